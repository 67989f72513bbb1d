#!/usr/bin/env python3
"""The status page GET /_chring/ in a real browser: headless Chromium (Debian package chromium)
loads it from a running chring-lb (its --stats-listen) while traffic flows, and the test checks
the rendered DOM: every member present with its state (one marked down by passive health, one warming up after
joining with --slow-start), the
ring drawn with an arc per member, the load of a member with requests held on it, and numbers
that change between refreshes within one page load and between two loads, and the placement
digest the stats report.  A screenshot is kept
as lb-status.png in LB_ARTIFACT_DIR (the build directory under meson).

    lb_status.py page
    lb_status.py fragment  a view in the address that is not valid percent-encoding
                         (#filter=%E0) is ignored: every member is still drawn (it emptied the
                         page); a valid one (#filter=...%3A...) filters
    lb_status.py big     10,000 members: the page shows one page of 100 rows and the counts by
                         state, a member that leaves under --drain (a request held on it) shown
                         as draining, the time a refresh costs the page measured and bounded

Everything on 127.0.0.1, under a temporary directory, stopped by PID (Chromium by its process
group); every wait bounded.
"""
import html.parser
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402
from lbharness import check, log  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(env, url, extra, timeout=90):
    """Runs headless Chromium on url; returns its standard output.  Killed with its process group
    on timeout."""
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
            "--user-data-dir=" + env.path("chromium-profile")] + extra + [url]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise h.TestFailure("chromium did not finish in %d s" % timeout)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # helpers left behind, if any
        except ProcessLookupError:
            pass
    return out.decode("utf-8", "replace")


class Dom(html.parser.HTMLParser):
    """The parts of the dumped DOM the test reads."""

    def __init__(self, text):
        super().__init__()
        self.rows, self.arcs, self.ids, self.live = [], {}, {}, {}
        self._id = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "member" in a.get("class", "").split():
            self.rows.append(a)
        if tag == "path" and "data-member" in a:
            self.arcs[a["data-member"]] = self.arcs.get(a["data-member"], 0) + 1
        if a.get("id") == "live":
            self.live = a
        self._id = a.get("id")

    def handle_data(self, data):
        if self._id and data.strip():
            self.ids.setdefault(self._id, data.strip())

    def handle_endtag(self, tag):
        self._id = None


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    check(head[:8] == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % path)
    return struct.unpack(">II", head[16:24])


def page(env):
    hold = threading.Event()
    stop = threading.Event()
    rbs = [h.RawBackend() for _ in range(3)]
    for rb in rbs:
        def answer(path, rb=rb):
            if path.startswith("/hold"):
                hold.wait(30)
            body = ("%d\n" % rb.port).encode()
            return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        rb.answer = answer
    dead = "127.0.0.1:%d" % h.free_port()
    threads = []
    try:
        members = [rb.member for rb in rbs] + [dead]
        # the third backend joins by SIGHUP with --slow-start: it is warming while the page loads
        mf = env.path("members.txt")
        with open(mf, "w") as f:
            f.write("\n".join(m for m in members if m != rbs[2].member) + "\n")
        args = ["--fail-timeout", "120", "--backend-timeout", "30", "--members", mf,
                "--slow-start", "600"]
        lb = h.Balancer(env, args, stats_listen=True).start()
        with open(mf, "w") as f:
            f.write("\n".join(members) + "\n")
        lb.hup()
        end = time.time() + 10
        while time.time() < end and lb.stats()["ring"]["members"] != 4:
            time.sleep(0.05)
        check(lb.stats()["ring"]["members"] == 4, "the SIGHUP did not add %s" % rbs[2].member)
        keys = ["/k/%d" % i for i in range(400)]
        owners = h.expect(members, keys)
        # the dead member's keys: retried elsewhere, the member marked down (passive health)
        dead_key = [k for k, o in zip(keys, owners) if o == dead][0]
        st, _, _ = h.Client(lb.port).get(dead_key)
        check(st == 200, "the dead member's key answered %d" % st)
        # two requests held (keys of the first backend): loads shown
        hold_keys = [k for k, o in zip(["/hold" + k for k in keys], h.expect(members, ["/hold" + k for k in keys]))
                     if o == rbs[0].member][:2]

        def held(k):
            c = h.Client(lb.port, timeout=40)
            c.get(k)
            c.close()

        for k in hold_keys:
            t = threading.Thread(target=held, args=(k,), daemon=True)
            t.start()
            threads.append(t)

        def traffic():
            c = h.Client(lb.port, timeout=10)
            for i in range(200000):
                if stop.is_set():
                    break
                try:
                    c.get(keys[i % len(keys)] if owners[i % len(keys)] != dead else "/x")
                except Exception:
                    c.close()
                time.sleep(0.002)
            c.close()

        t = threading.Thread(target=traffic, daemon=True)
        t.start()
        threads.append(t)
        end = time.time() + 10
        while time.time() < end and lb.stats()["ring"]["leases"] < 2:
            time.sleep(0.05)
        url = "http://127.0.0.1:%d/_chring/" % lb.stats_port

        # one page load, several refreshes (virtual time runs while no fetch is pending)
        d1 = Dom(chromium(env, url, ["--virtual-time-budget=5000", "--dump-dom"]))
        names = sorted(r["data-name"] for r in d1.rows)
        check(names == sorted(members), "members on the page: %s, want %s" % (names, sorted(members)))
        state = {r["data-name"]: r["data-state"] for r in d1.rows}
        check(state[dead] == "down", "the dead member is shown %s" % state[dead])
        check(state[rbs[0].member] == "up" and state[rbs[1].member] == "up", "states: %s" % state)
        check(state[rbs[2].member] == "warming", "the member joined with --slow-start is shown %s"
              % state[rbs[2].member])
        load = {r["data-name"]: int(r["data-load"]) for r in d1.rows}
        # the two held requests (the second spills: capacity ceil(1.25 * 3 / 4) = 1)
        check(load[rbs[0].member] >= 1 and sum(load.values()) >= 2,
              "the held requests' load is not shown: %s" % load)
        check(int(d1.ids.get("k-leases", "0")) >= 2, "in flight shown: %s" % d1.ids.get("k-leases"))
        for m in members:
            check(d1.arcs.get(m, 0) >= 1, "no arc of %s drawn on the ring: %s" % (m, d1.arcs))
        refreshes = int(d1.live.get("data-refreshes", "0"))
        hist = [int(x) for x in d1.live.get("data-history", "").split(",") if x]
        check(refreshes >= 2 and len(hist) >= 2, "the page did not refresh itself: %s" % d1.live)
        check(hist == sorted(hist) and hist[-1] > hist[0],
              "acquires did not grow between the refreshes of one page load: %s" % hist)
        dg = h.digest_of(lb.stats())
        check(d1.ids.get("digest") == "digest " + dg, "the page shows %r, the stats' digest is %s" %
              (d1.ids.get("digest"), dg))
        a1 = int(d1.ids.get("k-acquires", "0"))
        log("page load 1: %d members (%s down, %s warming), %d arcs drawn, loads %s, %d refreshes with "
            "acquires %s" % (len(names), dead, rbs[2].member, sum(d1.arcs.values()), load, refreshes,
                             hist))
        # a second load later: the numbers moved on
        d2 = Dom(chromium(env, url, ["--virtual-time-budget=2000", "--dump-dom"]))
        a2 = int(d2.ids.get("k-acquires", "0"))
        check(a2 > a1, "acquires on the page did not grow between two loads: %d then %d" % (a1, a2))
        log("page load 2: acquires %d -> %d" % (a1, a2))
        # the screenshot, kept
        art = os.environ.get("LB_ARTIFACT_DIR") or env.dir
        shot = os.path.join(art, "lb-status.png")
        if os.path.exists(shot):
            os.unlink(shot)
        chromium(env, url, ["--virtual-time-budget=3000", "--window-size=1280,720",
                            "--screenshot=" + shot])
        check(os.path.exists(shot), "no screenshot written")
        w, hgt = png_size(shot)
        check((w, hgt) == (1280, 720) and os.path.getsize(shot) > 10000,
              "screenshot %dx%d, %d bytes" % (w, hgt, os.path.getsize(shot)))
        log("screenshot kept: %s (%dx%d)" % (shot, w, hgt))
        stop.set()
        hold.set()
        for t in threads:
            t.join(40)
        lb.wait_idle()
        lb.stop()
    finally:
        stop.set()
        hold.set()
        for t in threads:
            t.join(40)
        for rb in rbs:
            rb.close()


def big(env):
    hold = threading.Event()
    rb = h.RawBackend()

    def answer(path):
        if path.startswith("/hold"):
            hold.wait(60)
        return b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"
    rb.answer = answer
    threads = []
    try:
        # the live backend holds half the keys (weight 10000 against 9,999 of weight 1)
        others = ["127.1.%d.%d:9" % (i >> 8, i & 255) for i in range(9999)]
        mf = env.path("members.txt")
        with open(mf, "w") as f:
            f.write("\n".join([rb.member + "=10000"] + others) + "\n")
        lb = h.Balancer(env, ["--members", mf, "--drain", "120", "--vnodes", "16",
                              "--backend-timeout", "70"], stats_listen=True).start()
        check(lb.stats()["ring"]["members"] == 10000, "not 10,000 members")

        def held(k):
            try:
                h.Client(lb.port, timeout=70).get(k)
            except Exception:
                pass
        for i in range(12):
            t = threading.Thread(target=held, args=("/hold/%d" % i,), daemon=True)
            t.start()
            threads.append(t)
        end = time.time() + 10
        live = lambda: [m for m in lb.stats()["members"] if m["name"] == rb.member][0]
        while time.time() < end and live()["load"] < 1:
            time.sleep(0.05)
        check(live()["load"] >= 1, "no request held on %s" % rb.member)
        with open(mf, "w") as f:  # the live member leaves: draining while its request is held
            f.write("\n".join(others) + "\n")
        lb.hup()
        end = time.time() + 10
        while time.time() < end and not any(m.get("draining") for m in lb.stats()["members"]):
            time.sleep(0.1)
        url = "http://127.0.0.1:%d/_chring/#sort=state" % lb.stats_port
        t0 = time.time()
        # Virtual time stands still while the page's scripts run (performance.now() with it), so
        # the cost of the refreshes is read from the wall clock: Chromium's start plus N
        # refreshes, each a fetch of the stats, a JSON parse and a render.
        d = Dom(chromium(env, url, ["--virtual-time-budget=10000", "--dump-dom"], timeout=120))
        wall = time.time() - t0
        log("page at 10,000 members: loaded, refreshed and dumped in %.1f s" % wall)
        check(len(d.rows) == 100, "%d rows on the page, want one page of 100" % len(d.rows))
        drained = [r for r in d.rows if r["data-state"] == "draining"]
        check([r["data-name"] for r in drained] == [rb.member],
              "draining rows %r, want %s (ordered by state)" % (drained, rb.member))
        check(d.ids.get("count-members") == "10000", "members counted: %r" % d.ids.get("count-members"))
        check(d.ids.get("page", "").endswith("of 10000"), "page %r" % d.ids.get("page"))
        refreshes = int(d.live.get("data-refreshes", "0"))
        per = wall / max(refreshes, 1)
        log("10,000 members: %d refreshes, %.0f ms of wall clock per refresh, Chromium's start "
            "included" % (refreshes, per * 1000))
        check(refreshes >= 5, "%d refreshes" % refreshes)
        # The cost per refresh is logged, not asserted: a timed check fails on a loaded machine
        # (the figure belongs to docs/bench.md's measurements, not to a test).
        hold.set()
        for t in threads:
            t.join(70)
        lb.stop()
    finally:
        hold.set()
        rb.close()


def fragment(env):
    members = ["127.0.0.1:%d" % p for p in (10001, 10002, 10003)]
    lb = h.Balancer(env, sum((["--backend", m] for m in members), []), stats_listen=True).start()
    base = "http://127.0.0.1:%d/_chring/" % lb.stats_port
    for frag, want in (("#filter=%E0", members), ("#sort=%E0&filter=%ZZ", members),
                       ("#filter=127.0.0.1%3A10002", members[1:2]), ("#sort=nonsense", members)):
        d = Dom(chromium(env, base + frag, ["--virtual-time-budget=3000", "--dump-dom"]))
        names = sorted(r["data-name"] for r in d.rows)
        log("%s: %s" % (frag, names))
        check(names == sorted(want), "%s: members drawn %s, want %s" % (frag, names, want))
    lb.stop()



TESTS = {"page": page, "big": big, "fragment": fragment}


def extra_needs(case):
    """Every case loads the page in headless Chromium."""
    if CHROMIUM and os.access(CHROMIUM, os.X_OK):
        return None
    return "chromium (Debian package chromium)"


if __name__ == "__main__":
    sys.exit(h.main(TESTS, extra_needs=extra_needs))
