#!/usr/bin/env python3
"""chring-lb end-to-end tests against real nginx backends.

    lb_test.py NAME      NAME: unloaded, nginx-compat, hotkey, sighup, backend-down, malformed,
                         weights-prefix (or "all")

Environment: CHRING_LB, CHRING_LB_EXPECT (the built programs), NGINX.  Each test starts what it
needs under a temporary directory, on 127.0.0.1 only, and stops it by PID.
"""
import json
import math
import os
import random
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402
from lbharness import check, log  # noqa: E402

RNG = random.Random(int(os.environ.get("LB_SEED", "8")))


def keys_for(n, prefix="/k/"):
    return ["%s%d-%08x" % (prefix, i, RNG.getrandbits(32)) for i in range(n)]


def backends(env, n, **kw):
    return [h.Backend(env, i, **kw).start() for i in range(n)]


def port_map(bs):
    return {b.port: b.member for b in bs}


# ------------------------------------------------------------------------------------------------
def unloaded(env):
    """1,000 distinct keys one at a time: each answered by the backend chring names for it."""
    bs = backends(env, 4)
    args = []
    for b in bs:
        args += ["--backend", b.member]
    lb = h.Balancer(env, args).start()
    keys = keys_for(1000)
    want = h.expect([b.member for b in bs], keys)
    pm = port_map(bs)
    c = h.Client(lb.port)
    wrong = 0
    for k, w in zip(keys, want):
        st, body, _ = c.get(k)
        check(st == 200, "%s answered %d" % (k, st))
        got = pm.get(h.port_of(body))
        if got != w:
            wrong += 1
            if wrong <= 5:
                log("key %s: balancer sent it to %s, chring names %s" % (k, got, w))
    check(wrong == 0, "%d of 1000 keys routed elsewhere than chring_lookup_name says" % wrong)
    st = lb.wait_idle()
    check(st["ring"]["spills"] == 0, "spills without load: %s" % st["ring"])
    check(st["ring"]["acquires"] == 1000, "acquires %d != 1000" % st["ring"]["acquires"])
    per = {m["name"]: m["primary"] for m in st["members"]}
    for b in bs:
        check(per[b.member] == want.count(b.member), "primary count of %s" % b.member)
    log("1000/1000 keys on their chring owner; per member:", per)
    # the same through header and query keys
    lb.stop()
    for kind, mk in (("header:X-Route", lambda k: ("/", {"X-Route": k})),
                     ("query:k", lambda k: ("/any?x=1&k=" + k, {}))):
        lb = h.Balancer(env, args + ["--key", kind], name="lb-" + kind.split(":")[0]).start()
        c = h.Client(lb.port)
        sub = keys[:200]
        for k, w in zip(sub, want[:200]):
            path, hdr = mk(k)
            st, body, _ = c.get(path, headers=hdr)
            check(st == 200 and pm.get(h.port_of(body)) == w, "--key %s: key %s -> %s, want %s" %
                  (kind, k, body, w))
        lb.wait_idle()
        lb.stop()
        log("--key %s: 200/200 keys on their owner" % kind)
    # the other placement profiles
    for prof in ("xxh3", "murmur32", "fnv32", "ketama"):
        lb = h.Balancer(env, args + ["--profile", prof], name="lb-" + prof).start()
        c = h.Client(lb.port)
        sub = keys[:200]
        want_p = h.expect([b.member for b in bs], sub, profile=prof)
        for k, w in zip(sub, want_p):
            st, body, _ = c.get(k)
            check(st == 200 and pm.get(h.port_of(body)) == w, "--profile %s: key %s -> %s, want %s" %
                  (prof, k, body, w))
        check(lb.stats()["ring"]["profile"] == prof, "stats profile")
        lb.wait_idle()
        lb.stop()
    log("--profile xxh3, murmur32, fnv32, ketama: 200/200 keys on their owner each")


# ------------------------------------------------------------------------------------------------
def nginx_compat(env):
    """--profile nginx --key query:k routes exactly as nginx's `hash $arg_k consistent;`."""
    bs = backends(env, 4)
    front = h.NginxHashFront(env, bs).start()
    args = ["--profile", "nginx", "--key", "query:k"]
    for b in bs:
        args += ["--backend", b.member]
    lb = h.Balancer(env, args).start()
    raw = keys_for(1000, prefix="")
    # a few awkward ones: empty, long, escapes, case of the argument name
    raw[:6] = ["", "a" * 300, "%41%42", "with+plus", "x.y-z_~", "UPPER"]
    want = h.expect([b.member for b in bs], raw, profile="nginx")
    pm = port_map(bs)
    cl, cf = h.Client(lb.port), h.Client(front.port)
    diff_front = diff_oracle = 0
    compared = len(raw)
    for k, w in zip(raw, want):
        path = "/p?z=0&k=%s&k=ignored" % k
        s1, b1, _ = cl.get(path)
        s2, b2, _ = cf.get(path)
        check(s1 == 200 and s2 == 200, "key %r: balancer %d, nginx %d" % (k, s1, s2))
        p1, p2 = pm.get(h.port_of(b1)), pm.get(h.port_of(b2))
        if k == "":
            # nginx does not hash an empty key: it falls back to round robin
            # (ngx_http_upstream_get_chash_peer); chring-lb hashes it like any other key
            compared -= 1
        elif p1 != p2:
            diff_front += 1
            if diff_front <= 5:
                log("key %r: chring-lb -> %s, nginx -> %s" % (k, p1, p2))
        if p1 != w:
            diff_oracle += 1
    check(diff_front == 0, "%d of %d keys routed differently from nginx hash consistent" % (diff_front, compared))
    check(diff_oracle == 0, "%d of 1000 keys differ from chring-lb-expect --profile nginx" % diff_oracle)
    # argument names match case-insensitively in nginx ($arg_k finds K=...)
    s1, b1, _ = cl.get("/p?K=" + raw[10])
    s2, b2, _ = cf.get("/p?K=" + raw[10])
    check(b1 == b2, "?K= (upper case name): balancer %r, nginx %r" % (b1, b2))
    lb.wait_idle()
    lb.stop()
    log("%d/%d non-empty keys routed as nginx `hash $arg_k consistent` routes them; 1000/1000 as the "
        "oracle (chring_lookup_name, profile nginx) says" % (compared, compared))


# ------------------------------------------------------------------------------------------------
def max_overlap(intervals):
    ev = []
    for s, e in intervals:
        ev.append((s, 1))
        ev.append((e, -1))
    ev.sort(key=lambda x: (x[0], x[1]))  # an end at the same instant as a start comes first
    cur = best = 0
    for _, d in ev:
        cur += d
        best = max(best, cur)
    return best


def hotkey(env):
    """One hot key from many concurrent connections: bounded loads spill it, no backend goes
    above its capacity (balancer stats sampled, backends' access logs), every request 200."""
    n_be, clients, rounds, c = 4, 16, 3, 1.25
    bs = backends(env, n_be, rate="600k")
    args = ["--balance", str(c)]
    for b in bs:
        args += ["--backend", b.member]
    lb = h.Balancer(env, args).start()
    bound = math.ceil(c * clients / n_be)  # a member's load never exceeds ceil(c*(m+1)/n), m+1 <= clients
    results, errors = [], []
    stop = threading.Event()
    samples = []

    def sampler():
        while not stop.is_set():
            try:
                st = lb.stats()
                samples.append(st)
            except Exception as e:  # noqa: BLE001
                errors.append("stats: %r" % e)
            time.sleep(0.03)

    def client(i):
        cl = h.Client(lb.port, timeout=30)
        for r in range(rounds):
            try:
                st, body, resp = cl.get("/slow/hot")
                results.append((st, len(body), resp.getheader("X-Backend-Port")))
            except Exception as e:  # noqa: BLE001
                errors.append("client %d: %r" % (i, e))
        cl.close()

    smp = threading.Thread(target=sampler)
    smp.start()
    ths = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.time()
    for t in ths:
        t.start()
    for t in ths:
        t.join(60)
    stop.set()
    smp.join(10)
    dt = time.time() - t0
    check(not errors, "errors: %s" % errors[:5])
    check(len(results) == clients * rounds, "%d answers for %d requests" % (len(results), clients * rounds))
    bad = [r for r in results if r[0] != 200 or r[1] != h.SLOW_FILE_BYTES]
    check(not bad, "%d requests not answered 200 with the whole body: %s" % (len(bad), bad[:3]))
    st = lb.wait_idle()
    spills = st["ring"]["spills"]
    check(spills > 0, "a hot key from %d connections never spilled: %s" % (clients, st["ring"]))
    check(sum(m["spilled_in"] for m in st["members"]) == spills, "spilled_in does not add up to spills")
    # sampled in-flight loads
    peak = {}
    peak_m = 0
    for s in samples:
        peak_m = max(peak_m, s["ring"]["leases"])
        for m in s["members"]:
            peak[m["name"]] = max(peak.get(m["name"], 0), m["load"])
            check(m["load"] <= bound, "sampled load %d of %s above the bound %d" % (m["load"], m["name"], bound))
    # the backends' own view: overlap of request intervals in their access logs
    log_peak = {}
    total = 0
    for b in bs:
        rows = [r for r in b.access_log() if "/slow/hot" in r["request"]]
        total += len(rows)
        log_peak[b.member] = max_overlap([(r["start"], r["end"]) for r in rows])
        check(log_peak[b.member] <= bound, "%s served %d /slow/hot at once (access log), bound %d" %
              (b.member, log_peak[b.member], bound))
    check(total == clients * rounds, "access logs hold %d requests, sent %d" % (total, clients * rounds))
    owner = h.expect([b.member for b in bs], ["/slow/hot"])[0]
    log("%d requests in %.1fs, %d samples, peak leases %d; spills %d, saturated %d; bound %d" %
        (len(results), dt, len(samples), peak_m, spills, st["ring"]["saturated"], bound))
    log("owner %s; peak sampled load per member %s; peak overlap in access logs %s" %
        (owner, json.dumps(peak), json.dumps(log_peak)))
    log("acquires per member: %s" % {m["name"]: (m["primary"], m["spilled_in"]) for m in st["members"]})
    lb.stop()


# ------------------------------------------------------------------------------------------------
def write_members(path, members, extra=""):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("# chring-lb members\n" + extra)
        for m in members:
            f.write(m + "\n")
    os.rename(tmp, path)


def sighup(env):
    """Remove a backend with SIGHUP under traffic: no request fails; afterwards only its keys
    moved.  A broken file keeps the membership.  Adding it back restores the routing."""
    bs = backends(env, 4)
    mf = env.path("members.txt")
    members = [b.member for b in bs]
    write_members(mf, members)
    lb = h.Balancer(env, ["--members", mf]).start()
    keys = keys_for(1000)
    before = h.expect(members, keys)
    pm = port_map(bs)
    results, errors = [], []
    stop = threading.Event()

    def traffic(i):
        cl = h.Client(lb.port)
        j = 0
        while not stop.is_set() and j < 100000:
            k = keys[(i * 131 + j) % len(keys)]
            j += 1
            try:
                st, body, _ = cl.get(k)
                results.append(st)
                if st != 200:
                    errors.append("%s -> %d" % (k, st))
            except Exception as e:  # noqa: BLE001
                errors.append("%s: %r" % (k, e))
        cl.close()

    ths = [threading.Thread(target=traffic, args=(i,)) for i in range(4)]
    for t in ths:
        t.start()
    time.sleep(1.0)
    victim = bs[1]
    remaining = [m for m in members if m != victim.member]
    write_members(mf, remaining)
    lb.hup()
    t_hup = time.time()
    while time.time() - t_hup < 5:
        if lb.stats()["ring"]["members"] == 3:
            break
        time.sleep(0.05)
    time.sleep(1.0)
    # a file with an error: membership kept
    write_members(mf, remaining, extra="not-a-host-port\n")
    lb.hup()
    time.sleep(0.5)
    stop.set()
    for t in ths:
        t.join(30)
    check(not errors, "%d requests failed around the reload: %s" % (len(errors), errors[:5]))
    st = lb.wait_idle()
    check(st["ring"]["members"] == 3, "members after reload: %d" % st["ring"]["members"])
    check(st["balancer"]["reloads"] == 1 and st["balancer"]["reload_errors"] == 1,
          "reloads %d, reload errors %d" % (st["balancer"]["reloads"], st["balancer"]["reload_errors"]))
    log("%d requests during the reload, all 200" % len(results))
    # afterwards: only the victim's keys moved, each to the oracle's new owner
    after = h.expect(remaining, keys)
    cl = h.Client(lb.port)
    moved = 0
    for k, b4, af in zip(keys, before, after):
        s, body, _ = cl.get(k)
        got = pm.get(h.port_of(body))
        check(s == 200 and got == af, "after reload %s -> %s, want %s" % (k, got, af))
        if b4 != victim.member:
            check(got == b4, "key %s of %s moved to %s" % (k, b4, got))
        else:
            moved += 1
    check(moved == before.count(victim.member), "moved count")
    log("after the reload: %d keys of %s moved, the other %d stayed" % (moved, victim.member, 1000 - moved))
    # add it back
    write_members(mf, members)
    lb.hup()
    time.sleep(0.3)
    for k, b4 in list(zip(keys, before))[:300]:
        s, body, _ = cl.get(k)
        check(pm.get(h.port_of(body)) == b4, "after re-adding, %s not back on %s" % (k, b4))
    st = lb.wait_idle()
    check(st["ring"]["members"] == 4, "members after re-adding: %d" % st["ring"]["members"])
    log("re-added %s: routing restored" % victim.member)
    cl.close()
    lb.stop()


# ------------------------------------------------------------------------------------------------
class SilentServer:
    """Accepts connections and never answers (a hung backend)."""

    def __init__(self):
        self.port = h.free_port()
        self.s = socket.socket()
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.s.bind(("127.0.0.1", self.port))
        self.s.listen(128)
        self.member = "127.0.0.1:%d" % self.port
        self.conns = []
        self.stop = False
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        self.s.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.s.accept()
                self.conns.append(c)
            except OSError:
                pass

    def close(self):
        self.stop = True
        self.t.join(2)
        for c in self.conns:
            c.close()
        self.s.close()


def backend_down(env):
    """A stopped backend: its requests are retried on the key's next replica, nothing else is
    affected.  A hung backend: the same after --backend-timeout.  Nothing left: 502."""
    bs = backends(env, 4)
    hung = SilentServer()
    try:
        members = [b.member for b in bs]
        args = ["--backend-timeout", "1"]
        for m in members:
            args += ["--backend", m]
        lb = h.Balancer(env, args).start()
        keys = keys_for(1000)
        reps = h.expect(members, keys, replicas=2)
        pm = port_map(bs)
        victim = bs[2]
        victim.stop()
        log("stopped", victim.member)
        cl = h.Client(lb.port)
        retried = 0
        t0 = time.time()
        for k, (own, nxt) in zip(keys, reps):
            s, body, _ = cl.get(k)
            got = pm.get(h.port_of(body))
            check(s == 200, "%s answered %d with %s down" % (k, s, victim.member))
            if own == victim.member:
                retried += 1
                check(got == nxt, "%s (owner %s down) went to %s, next replica is %s" % (k, own, got, nxt))
            else:
                check(got == own, "%s moved from %s to %s although its owner is up" % (k, own, got))
        st = lb.wait_idle()
        vm = [m for m in st["members"] if m["name"] == victim.member][0]
        # passive health: each failure is retried once and takes the backend down in the ring, so
        # the next keys of it go to their next replica without trying it (no retry)
        check(st["balancer"]["retries"] == vm["failures"], "retries %d, failures of the stopped "
              "backend %d" % (st["balancer"]["retries"], vm["failures"]))
        check(0 < vm["failures"] < retried, "failures %d of %d keys: the stopped backend was not "
              "taken out of the ring after a failure" % (vm["failures"], retried))
        check(st["balancer"]["bad_gateway"] == 0, "502s: %d" % st["balancer"]["bad_gateway"])
        check(vm["downs"] >= 1 and vm["down"] and vm["ring_down"],
              "passive health: the stopped backend is not down in the ring: %s" % vm)
        log("%d keys of the stopped backend answered by their next replica (%d tried it and were "
            "retried; taken down in the ring %d times), %d others untouched (%.1fs)" %
            (retried, vm["failures"], vm["downs"], 1000 - retried, time.time() - t0))
        # it comes back: after --fail-timeout (1 s) its keys go to it again
        victim.start()
        time.sleep(1.2)
        back = 0
        for k, (own, nxt) in zip(keys, reps):
            if own == victim.member:
                s, body, _ = cl.get(k)
                check(s == 200 and pm.get(h.port_of(body)) == own, "%s not back on %s" % (k, own))
                back += 1
        log("the backend restarted: its %d keys answered by it again" % back)
        lb.wait_idle()
        lb.stop()
        victim.stop()

        # a hung backend: times out after 1 s, then the next replica answers
        alive = [b.member for b in bs if b is not victim]
        members2 = alive + [hung.member]
        args = ["--backend-timeout", "1", "--verbose"]
        for m in members2:
            args += ["--backend", m]
        lb = h.Balancer(env, args, name="lb-hung").start()
        keys2 = keys_for(400)
        reps2 = h.expect(members2, keys2, replicas=2)
        hung_keys = [(k, nx) for k, (o, nx) in zip(keys2, reps2) if o == hung.member][:4]
        check(hung_keys, "no key on the hung backend")
        results = []

        def one(k, nx):
            c2 = h.Client(lb.port)
            t = time.time()
            s, body, _ = c2.get(k)
            results.append((k, s, pm.get(h.port_of(body)), nx, time.time() - t))
            c2.close()

        ths = [threading.Thread(target=one, args=kn) for kn in hung_keys]
        for t in ths:
            t.start()
        # meanwhile the other keys are served at once
        quick = [(k, o) for k, (o, nx) in zip(keys2, reps2) if o != hung.member][:50]
        cl = h.Client(lb.port)
        tq = time.time()
        off_owner = 0
        for k, o in quick:
            s, body, _ = cl.get(k)
            got = pm.get(h.port_of(body))
            # A retry leases the hung backend's next replica and counts in its load, so bounded
            # loads may spill a quick key off that replica meanwhile: any live backend, counted.
            check(s == 200 and got in alive, "%s during a hung backend: %d from %s" % (k, s, got))
            off_owner += got != o
        tq = time.time() - tq
        for t in ths:
            t.join(20)
        # the first waits for the timeout and is retried; while its lease is held the others may
        # spill (bounded loads) to the same next replica at once
        for k, s, got, nx, dt in results:
            # the one retried goes to its next replica; those spilled meanwhile walk clockwise to
            # the first member below capacity, which is usually, not always, the same one
            check(s == 200 and got in alive, "%s on the hung backend: %d from %s" % (k, s, got))
            # a hang detector: about 1 s (--backend-timeout 1, then the retry), while a request
            # held by the hung backend waits for the client's 20 s
            check(dt <= 5, "%s took %.2fs (timeout 1s)" % (k, dt))
        check(len(results) == len(hung_keys), "hung-key answers missing")
        check(max(r[4] for r in results) >= 0.8, "no request waited for the backend timeout")
        st = lb.wait_idle()
        check(off_owner <= st["ring"]["spills"],
              "%d quick keys answered off their owner, only %d spills" % (off_owner, st["ring"]["spills"]))
        hm = [m for m in st["members"] if m["name"] == hung.member][0]
        check(hm["failures"] >= 1 and st["balancer"]["retries"] >= hm["failures"],
              "hung backend failures %d, retries %d" % (hm["failures"], st["balancer"]["retries"]))
        log("hung backend: %d requests retried after %.2f-%.2fs; 50 other keys served in %.2fs meanwhile" %
            (len(results), min(r[4] for r in results), max(r[4] for r in results), tq))
        lb.wait_idle()
        lb.stop()

        # only dead backends: 502, quickly, no lease left
        dead = [victim.member, "127.0.0.1:%d" % h.free_port()]
        lb = h.Balancer(env, ["--backend", dead[0], "--backend", dead[1]], name="lb-dead").start()
        cl = h.Client(lb.port)
        for k in keys[:20]:
            s, body, _ = cl.get(k)
            check(s == 502, "%s with every backend down answered %d" % (k, s))
        st = lb.wait_idle()
        check(st["balancer"]["bad_gateway"] == 20, "bad_gateway %d" % st["balancer"]["bad_gateway"])
        log("every backend down: 20/20 answered 502, leases back to 0")
        lb.stop()
    finally:
        hung.close()


# ------------------------------------------------------------------------------------------------
def raw_exchange(port, data, read_timeout=3.0, close_after_send=False, chunks=None, delay=0.0):
    """Sends data (or chunks with a delay between them) and returns what came back until the
    server closes or the read times out."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    out = b""
    try:
        if chunks:
            for ch in chunks:
                s.sendall(ch)
                time.sleep(delay)
        if data:
            s.sendall(data)
        if close_after_send:
            return b""
        s.settimeout(read_timeout)
        end = time.time() + read_timeout
        while time.time() < end:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not b:
                break
            out += b
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        s.close()
    return out


def malformed(env):
    """Bad input from clients: 400/408/413/431/501 or a closed connection; never a crash, a leaked
    lease or a stuck worker."""
    bs = backends(env, 3, rate="200k")
    args = ["--client-timeout", "2", "--max-headers", "4096", "--max-body", "65536"]
    for b in bs:
        args += ["--backend", b.member]
    lb = h.Balancer(env, args).start()
    port = lb.port
    ok_codes = {None, 400, 408, 413, 414, 431, 501}
    cases = [
        ("garbage line", b"GARBAGE\r\n\r\n"),
        ("missing version", b"GET /\r\n\r\n"),
        ("bad version", b"GET / HTTP/9.9\r\nHost: x\r\n\r\n"),
        ("header without colon", b"GET / HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n"),
        ("unknown method", b"FROB / HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("CONNECT", b"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("binary", bytes(RNG.getrandbits(8) for _ in range(4096))),
        ("NULs", b"GET /\x00\x00 HTTP/1.1\r\nHost: \x00\r\n\r\n"),
        ("oversized header", b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"),
        ("many headers", b"GET / HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(2000)) + b"\r\n"),
        ("oversized body", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 100000),
        ("bad content-length", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"),
        ("bad chunk", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n"),
        ("huge uri", b"GET /" + b"u" * 50000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
    ]
    for name, data in cases:
        resp = raw_exchange(port, data)
        st = h.status_of(resp)
        check(st in ok_codes, "%s: answered %r" % (name, resp[:80]))
        check(lb.alive(), "balancer died on %s" % name)
        log("%-22s -> %s" % (name, st if st else "closed"))

    # these are fine: proxied
    for name, data in [
        ("absolute-form", b"GET http://example.invalid/abs HTTP/1.1\r\nHost: example.invalid\r\nConnection: close\r\n\r\n"),
        ("pipelined", b"GET /p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /p2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ("chunked body", b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        ("HTTP/1.0", b"GET /old HTTP/1.0\r\n\r\n"),
        ("hop-by-hop", b"GET /hop HTTP/1.1\r\nHost: x\r\nConnection: X-Secret, close\r\nX-Secret: 1\r\nKeep-Alive: 5\r\n"
                       b"TE: trailers\r\nUpgrade: h2c\r\nProxy-Connection: keep-alive\r\nX-End-To-End: yes\r\n\r\n"),
    ]:
        resp = raw_exchange(port, data, read_timeout=1.0 if name == "hop-by-hop" else 3.0)
        if name == "hop-by-hop":
            want = b"secret=[] ka=[] te=[] up=[] pc=[] conn=[] xff=[127.0.0.1] e2e=[yes]"
            check(want in resp, "hop-by-hop headers reached the backend: %r" % resp[-200:])
        check(h.status_of(resp) == 200, "%s: %r" % (name, resp[:120]))
        if name == "pipelined":
            check(resp.count(b"HTTP/1.1 200") == 2, "pipelined: %r" % resp[:300])
        log("%-22s -> 200" % name)

    # a client vanishing mid-body, mid-response, and while the backend is slow
    for i in range(10):
        raw_exchange(port, b"POST /vanish HTTP/1.1\r\nHost: x\r\nContent-Length: 50000\r\n\r\n" + b"y" * 1000,
                     close_after_send=True)
        raw_exchange(port, b"GET /slow/vanish%d HTTP/1.1\r\nHost: x\r\n\r\n" % i, read_timeout=0.2)
    time.sleep(0.5)

    # slowloris: header bytes trickled slower than --client-timeout (2 s) get the connection closed;
    # meanwhile, other clients are served
    lorises = []
    for i in range(30):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /loris HTTP/1.1\r\nHost: x\r\n")
        lorises.append(s)
    cl = h.Client(port)
    t0 = time.time()
    for i in range(50):
        st, _, _ = cl.get("/during-loris/%d" % i)
        check(st == 200, "request during slowloris answered %d" % st)
    log("50 requests served in %.2fs with 30 slowloris connections open" % (time.time() - t0))
    time.sleep(3.0)
    closed = 0
    for s in lorises:
        try:
            s.sendall(b"X-Trickle: 1\r\n")
            s.settimeout(2)
            b = s.recv(100)
            if b == b"" or h.status_of(b) in ok_codes:
                closed += 1
        except OSError:
            closed += 1
        s.close()
    check(closed == len(lorises), "%d of %d idle slowloris connections still open after the timeout" %
          (len(lorises) - closed, len(lorises)))
    log("slowloris: %d/%d connections closed by --client-timeout" % (closed, len(lorises)))

    st = lb.wait_idle()
    check(lb.alive(), "balancer died")
    st2, body, _ = h.Client(port).get("/still-alive")
    check(st2 == 200, "normal request after the abuse answered %d" % st2)
    log("after all: leases %d, active %d, client_gone %d; a normal request answered 200" %
        (st["ring"]["leases"], st["balancer"]["active"], st["balancer"]["client_gone"]))
    lb.stop()


# ------------------------------------------------------------------------------------------------
def weights_prefix(env):
    """Weights from a members file, --key header:NAME with --key-prefix N."""
    bs = backends(env, 3)
    mf = env.path("members.txt")
    with open(mf, "w") as f:
        f.write("# weights\n%s=1\n%s=2  # heavier\n\n%s=3\n" % (bs[0].member, bs[1].member, bs[2].member))
    lb = h.Balancer(env, ["--members", mf, "--key", "header:X-Tenant", "--key-prefix", "6"]).start()
    keys = ["t%05d/%08x" % (i, RNG.getrandbits(32)) for i in range(600)]
    want = h.expect(["%s=%d" % (b.member, i + 1) for i, b in enumerate(bs)], [k[:6] for k in keys])
    pm = port_map(bs)
    cl = h.Client(lb.port)
    for k, w in zip(keys, want):
        s, body, _ = cl.get("/w", headers={"X-Tenant": k})
        check(s == 200 and pm.get(h.port_of(body)) == w, "tenant %s -> %s, want %s" % (k, body, w))
    st = lb.wait_idle()
    shares = {m["name"]: round(m["share"], 3) for m in st["members"]}
    counts = {b.member: want.count(b.member) for b in bs}
    log("600 keys (6-byte prefixes) on their weighted owner; shares %s, keys %s" % (shares, counts))
    # raise the first backend's weight 1 -> 3 by SIGHUP: keys only move to it
    with open(mf, "w") as f:
        f.write("%s=3\n%s=2\n%s=3\n" % (bs[0].member, bs[1].member, bs[2].member))
    lb.hup()
    end = time.time() + 5
    while time.time() < end and lb.stats()["ring"]["version"] < 2:
        time.sleep(0.05)
    want2 = h.expect(["%s=%d" % (b.member, w) for b, w in zip(bs, (3, 2, 3))], [k[:6] for k in keys])
    moved = 0
    for k, w1, w2 in zip(keys, want, want2):
        s, body, _ = cl.get("/w", headers={"X-Tenant": k})
        got = pm.get(h.port_of(body))
        check(s == 200 and got == w2, "after the weight change %s -> %s, want %s" % (k, got, w2))
        if w1 != w2:
            moved += 1
            check(w2 == bs[0].member, "key %s moved from %s to %s, not to the heavier member" % (k, w1, w2))
    check(moved > 0, "raising a weight moved no key")
    log("weight 1 -> 3 by SIGHUP: %d of 600 keys moved, all to the heavier member" % moved)
    lb.wait_idle()
    lb.stop()

# ------------------------------------------------------------------------------------------------
def retire_inflight(env):
    """Remove a backend while slow requests to it are in flight: they finish (200, whole body);
    its object is retired once the last lease is released (on a worker thread).  Then SIGTERM
    with requests in flight: a clean exit (no leak, no sanitizer report)."""
    bs = backends(env, 4, rate="300k")
    mf = env.path("members.txt")
    members = [b.member for b in bs]
    write_members(mf, members)
    # a large balance factor: these few requests stay on their owner instead of spilling
    lb = h.Balancer(env, ["--members", mf, "--verbose", "--balance", "10"]).start()
    keys = keys_for(400, prefix="/slow/")
    owners = h.expect(members, keys)
    victim = bs[0].member
    vkeys = [k for k, o in zip(keys, owners) if o == victim][:6]
    results, errors = [], []

    def one(k):
        try:
            c = h.Client(lb.port, timeout=30)
            st, body, resp = c.get(k)
            results.append((k, st, len(body), resp.getheader("X-Backend-Port")))
            c.close()
        except Exception as e:  # noqa: BLE001
            errors.append("%s: %r" % (k, e))

    ths = [threading.Thread(target=one, args=(k,)) for k in vkeys]
    for t in ths:
        t.start()
    end = time.time() + 10
    while time.time() < end:
        st = lb.stats()
        vload = [m["load"] for m in st["members"] if m["name"] == victim][0]
        if vload == len(vkeys):
            break
        time.sleep(0.02)
    check(vload == len(vkeys), "only %d of %d requests in flight on the victim" % (vload, len(vkeys)))
    write_members(mf, members[1:])
    lb.hup()
    time.sleep(0.2)
    st2 = lb.stats()
    check(st2["ring"]["members"] == 3, "victim still a member after SIGHUP")
    check(st2["ring"]["leases"] > 0, "no lease in flight at the reload (requests too fast?)")
    check("retired " + victim not in lb.output(), "retired while its leases were held")
    for t in ths:
        t.join(30)
    check(not errors, "in-flight requests failed: %s" % errors)
    bad = [r for r in results if r[1] != 200 or r[2] != h.SLOW_FILE_BYTES or r[3] != str(bs[0].port)]
    check(not bad, "in-flight requests to the removed backend: %s" % bad)
    lb.wait_idle()
    end = time.time() + 5
    while time.time() < end and "retired " + victim not in lb.output():
        time.sleep(0.05)
    check("retired " + victim in lb.output(), "removed backend never retired")
    log("%d requests in flight on %s (load %d) while it was removed: all 200 from it; retired after "
        "the last lease" % (len(results), victim, vload))

    # SIGTERM with requests in flight
    results.clear()
    errors.clear()
    ths = [threading.Thread(target=one, args=(k,)) for k in keys[100:112]]
    for t in ths:
        t.start()
    end = time.time() + 10
    while time.time() < end and lb.stats()["ring"]["leases"] < 6:
        time.sleep(0.02)
    check(lb.stats()["ring"]["leases"] > 0, "nothing in flight at SIGTERM")
    t0 = time.time()
    lb.stop()
    for t in ths:
        t.join(30)
    log("SIGTERM with requests in flight: clean exit in %.2fs (%d clients cut off)" %
        (time.time() - t0, len(errors)))

# ------------------------------------------------------------------------------------------------
def slow_client(env):
    """A client much slower than its backend: the balancer pauses reading from the backend
    (backpressure) instead of buffering the whole answer, and the answer arrives whole.  A client
    that stops reading is dropped after --client-timeout and its lease released."""
    bs = backends(env, 2)
    args = ["--client-timeout", "2"]
    for b in bs:
        args += ["--backend", b.member]
    lb = h.Balancer(env, args).start()

    def fetch(path, per_read, pause, stop_after=None):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.connect(("127.0.0.1", lb.port))
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        s.settimeout(10)
        got = b""
        t0 = time.time()
        while time.time() - t0 < 30:
            if stop_after is not None and len(got) >= stop_after:
                break
            try:
                b = s.recv(per_read)
            except (socket.timeout, ConnectionResetError):
                break
            if not b:
                break
            got += b
            time.sleep(pause)
        s.close()
        return got, time.time() - t0

    got, dt = fetch(b"/huge/a", 256 * 1024, 0.002)
    head, _, body = got.partition(b"\r\n\r\n")
    check(h.status_of(got) == 200, "slow client: %r" % got[:100])
    check(len(body) == h.HUGE_FILE_BYTES, "slow client got %d of %d body bytes" % (len(body), h.HUGE_FILE_BYTES))
    st = lb.wait_idle()
    pauses = st["balancer"]["backpressure_pauses"]
    check(pauses > 0, "no backpressure pause for a client slower than its backend")
    log("slow client: 8 MiB in %.2fs, whole; backend reads paused %d times" % (dt, pauses))

    # a client that stops reading: dropped after the client timeout, lease released
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", lb.port))
    s.sendall(b"GET /huge/stuck HTTP/1.1\r\nHost: x\r\n\r\n")
    end = time.time() + 5
    while time.time() < end and lb.stats()["ring"]["leases"] != 1:
        time.sleep(0.02)
    check(lb.stats()["ring"]["leases"] == 1, "the stuck client holds no lease")
    t0 = time.time()
    st = lb.wait_idle(timeout=15)
    log("a client that stopped reading: dropped, lease released after %.1fs (--client-timeout 2)" %
        (time.time() - t0))
    s.close()
    c = h.Client(lb.port)
    check(c.get("/after")[0] == 200, "balancer unusable after the stuck client")
    lb.stop()

# ------------------------------------------------------------------------------------------------
def bodies(env):
    """Request bodies reach the backend intact (Content-Length and chunked, 0 B to 4 MiB, several
    methods); response bodies reach the client intact (8 MiB)."""
    import hashlib
    eb = h.EchoBackend()
    try:
        lb = h.Balancer(env, ["--backend", eb.member]).start()
        c = h.Client(lb.port)
        for method in ("POST", "PUT", "PATCH"):
            for size in (0, 1, 1000, 65536, 1 << 20, 4 << 20):
                body = bytes(RNG.getrandbits(8) for _ in range(min(size, 4096))) * (size // 4096 or 1)
                body = body[:size]
                st, out, _ = c.get("/echo/%d" % size, method=method, body=body,
                                   headers={"Content-Type": "application/octet-stream"})
                want = "%d %s %s %d" % (eb.port, method, hashlib.sha256(body).hexdigest(), len(body))
                check(st == 200 and out.decode().strip() == want, "%s %d bytes: %r" % (method, size, out[:120]))
        # a chunked request body: de-chunked by the balancer, sent with Content-Length
        data = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (b"a" * 100, b"b" * 7000, b"c")) + b"0\r\n\r\n"
        resp = raw_exchange(lb.port, b"POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                            b"Connection: close\r\n\r\n" + data)
        full = b"a" * 100 + b"b" * 7000 + b"c"
        check(hashlib.sha256(full).hexdigest().encode() in resp, "chunked request body: %r" % resp[-200:])
        hdrs = eb.seen[-1][1]
        check("Transfer-Encoding" not in hdrs and hdrs.get("Content-Length") == str(len(full)),
              "chunked request forwarded with headers %s" % hdrs)
        log("request bodies: POST/PUT/PATCH of 0 B .. 4 MiB and a chunked one arrive intact")
        lb.wait_idle()
        lb.stop()
    finally:
        eb.close()
    bs = backends(env, 1)
    lb = h.Balancer(env, ["--backend", bs[0].member], name="lb-huge").start()
    st, out, r = h.Client(lb.port).get("/huge/x")
    check(st == 200 and out == b"H" * h.HUGE_FILE_BYTES, "8 MiB response: %d bytes" % len(out))
    for hop in ("Connection", "Keep-Alive", "Transfer-Encoding"):
        v = r.getheader(hop)
        check(v is None or hop == "Connection" and v.lower() == "close", "response header %s: %s" % (hop, v))
    log("response body: 8 MiB intact; no hop-by-hop header from the backend in the answer")
    lb.stop()



# Requests chring-lb must refuse without forwarding a byte (docs/lb.md, "Security model"):
# (name, bytes, expected status).  Each carries a hidden "admin-secret" request where a lenient
# parser would find a second request.
SMUGGLE = "GET /admin-secret HTTP/1.1\r\nHost: x\r\n\r\n"
REFUSED = [
    ("space before colon (TE)", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n"
     "Content-Length: 42\r\n\r\n0\r\n\r\n" + SMUGGLE, 400),
    ("space before colon (CL)", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length : 42\r\n\r\n" + SMUGGLE, 400),
    ("name not a token", "GET /a HTTP/1.1\r\nHost: x\r\nX(y): 1\r\n\r\n", 400),
    ("CL.TE", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
     "0\r\n\r\n" + SMUGGLE, 400),
    ("TE.CL", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
     "2a\r\n" + SMUGGLE + "\r\n0\r\n\r\n", 400),
    ("TE.TE obfuscated (second TE)", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
     "Transfer-Encoding: x\r\n\r\n0\r\n\r\n" + SMUGGLE, 501),
    ("TE.TE obfuscated (xchunked)", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n"
     "0\r\n\r\n" + SMUGGLE, 501),
    ("TE.TE obfuscated (tab, with CL)", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
     "Transfer-Encoding:\tchunked\r\n\r\n0\r\n\r\n" + SMUGGLE, 400),
    ("TE gzip, chunked", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
     "0\r\n\r\n", 501),
    ("TE unknown coding", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: foo\r\n\r\n", 501),
    ("TE in HTTP/1.0", "POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("two different CL", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 42\r\n\r\n"
     + SMUGGLE, 400),
    ("CL list", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 42, 42\r\n\r\n" + SMUGGLE, 400),
    ("CL +5", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello", 400),
    ("CL 005", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length:   005\r\n\r\nhello", 400),
    ("CL negative", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
    ("chunk size 0x5", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     "0x5\r\nhello\r\n0\r\n\r\n", 400),
    ("chunk size +5", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     "+5\r\nhello\r\n0\r\n\r\n", 400),
    ("chunk without CRLF", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     "5\r\nhelloX0\r\n\r\n", 400),
    ("GET with a body", "GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(SMUGGLE), SMUGGLE), 400),
    ("obs-fold", "GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n", 400),
    ("NUL in a value", "GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400),
    ("control byte in a value", "GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", 400),
    ("bare LF", "GET /a HTTP/1.1\nHost: x\n\n", 400),
    ("missing Host", "GET /a HTTP/1.1\r\n\r\n", 400),
    ("two Hosts", "GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400),
    ("Host with a space", "GET /a HTTP/1.1\r\nHost: x y\r\n\r\n", 400),
    ("two spaces in the request line", "GET  /a HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("target not origin or absolute", "GET a HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("bad version", "GET /a HTTP/1.01\r\nHost: x\r\n\r\n", 400),
    ("control byte in the target", "GET /a\x01b HTTP/1.1\r\nHost: x\r\n\r\n", 400),
]


def smuggling(env):
    """Every request rule of docs/lb.md's security model, each attack sent through a real
    chring-lb to a raw backend that records the bytes it received: the client gets the refusal,
    the backend gets nothing (and never the hidden request); pipelined requests are answered in
    order, and a bad one ends the connection without forwarding what follows."""
    rb = h.RawBackend()
    try:
        lb = h.Balancer(env, ["--backend", rb.member]).start()
        for name, req, want in REFUSED:
            rb.reset()
            resp = raw_exchange(lb.port, req.encode("latin-1"), read_timeout=3.0)
            got = h.status_of(resp)
            check(got == want, "%s: client got %r, want %d" % (name, resp[:80], want))
            check(resp.count(b"HTTP/1.1 ") == 1, "%s: more than one answer: %r" % (name, resp[:300]))
            time.sleep(0.05)
            seen = rb.received()
            check(seen == b"", "%s: the backend received %r" % (name, seen[:200]))
            log("%-34s -> %d, nothing forwarded" % (name, got))
        # pipelined: two good requests answered in order, each forwarded once
        rb.reset()
        resp = raw_exchange(lb.port, b"GET /p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /p2 HTTP/1.1\r\nHost: x\r\n"
                            b"Connection: close\r\n\r\n")
        check(resp.count(b"hello") == 2, "pipelined: %r" % resp)
        check(rb.paths == ["/p1", "/p2"], "pipelined: the backend saw %r" % rb.paths)
        # pipelined with a bad second request: the first answered, then 400, the rest dropped
        rb.reset()
        resp = raw_exchange(lb.port, b"GET /p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /p2 HTTP/1.1\r\nHost: x\r\n"
                            b"Content-Length : 0\r\n\r\n" + SMUGGLE.encode())
        check(resp.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 400" in resp and resp.count(b"HTTP/1.1 ") == 2,
              "pipelined bad second: %r" % resp)
        time.sleep(0.05)
        check(rb.paths == ["/p1"] and b"admin-secret" not in rb.received(),
              "pipelined bad second: the backend saw %r" % rb.paths)
        log("pipelined: in order; a bad one ends the connection, nothing after it forwarded")
        # accepted forms reach the backend normalised: one Content-Length, no Transfer-Encoding
        rb.reset()
        resp = raw_exchange(lb.port, b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                            b"Connection: close\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n")
        check(h.status_of(resp) == 200, "chunked with extension and trailer: %r" % resp[:100])
        seen = rb.received()
        check(b"Content-Length: 5\r\n" in seen and seen.endswith(b"\r\n\r\nhello") and
              b"Transfer-Encoding" not in seen and b"X-Trailer" not in seen,
              "chunked: the backend received %r" % seen)
        # X-Forwarded-For: the client's list whole, then the peer (F3)
        rb.reset()
        xff = ", ".join("10.0.%d.%d" % (i // 250, i % 250) for i in range(300))
        resp = raw_exchange(lb.port, ("GET /x HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: %s\r\n"
                                      "Connection: close\r\n\r\n" % xff).encode())
        check(h.status_of(resp) == 200, "long X-Forwarded-For: %r" % resp[:100])
        seen = rb.received()
        check(("X-Forwarded-For: %s, 127.0.0.1\r\n" % xff).encode() in seen,
              "X-Forwarded-For (%d bytes) not forwarded whole with the peer: %r" % (len(xff), seen[-200:]))
        log("X-Forwarded-For of %d bytes forwarded whole, peer appended" % len(xff))
        st = lb.wait_idle()
        check(st["ring"]["leases"] == 0, "leases left")
        lb.stop()
    finally:
        rb.close()


def answers(env):
    """Backend answers: bytes after a body never reach another client (F1), interim answers are
    not taken for the final one (F4), invalid or conflicting framing becomes a 502 (F10)."""
    crafted = {
        "/poison": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloPOISON",
        "/early": b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
                  b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal",
        "/twocl": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 11\r\n\r\nhelloPOISON",
        "/negcl": b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello",
        "/pluscl": b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
        "/spacename": b"HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello",
        "/clte": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "/gzipte": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nhello",
        "/status": b"HTTP/1.1 2000 OK\r\nContent-Length: 5\r\n\r\nhello",
        "/switch": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nhello",
        "/badchunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
    }
    rb = h.RawBackend(lambda path: crafted.get(path, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
    try:
        lb = h.Balancer(env, ["--backend", rb.member], threads=1).start()
        # F1: four clients in turn; every one gets exactly its own answer
        got = []
        for i in range(4):
            c = h.Client(lb.port, timeout=5)
            st, body, _ = c.get("/poison" if i % 2 == 0 else "/plain")
            c.close()
            got.append((st, body))
        check(got == [(200, b"hello")] * 4, "bytes left on a pooled connection reached a client: %r" % got)
        log("F1: 4 clients got %r" % [b for _, b in got])
        # F4: interim answers dropped, the final one relayed
        c = h.Client(lb.port, timeout=5)
        st, body, _ = c.get("/early")
        check((st, body) == (200, b"final"), "103/100 then 200: got %r %r" % (st, body))
        st, body, _ = c.get("/plain")
        check((st, body) == (200, b"hello"), "after the interim answers: %r %r" % (st, body))
        c.close()
        log("F4: 103 and 100 dropped, 200 relayed")
        # F10: invalid framing from the backend is a 502, and nothing of it reaches the client
        for path in ("/twocl", "/negcl", "/pluscl", "/spacename", "/clte", "/gzipte", "/status", "/switch"):
            c = h.Client(lb.port, timeout=5)
            st, body, _ = c.get(path)
            c.close()
            check(st == 502 and b"hello" not in body and b"POISON" not in body,
                  "%s: client got %r %r" % (path, st, body[:80]))
        # a chunk size that is not plain hex after the head went out: the client connection is cut
        resp = raw_exchange(lb.port, b"GET /badchunk HTTP/1.1\r\nHost: x\r\n\r\n")
        check(b"hello" not in resp and not resp.endswith(b"0\r\n\r\n"), "bad chunk relayed: %r" % resp)
        log("F10: 8 invalid framings answered 502; a bad chunk size cut the answer off")
        st = lb.wait_idle()
        check(st["ring"]["leases"] == 0, "leases left")
        lb.stop()
    finally:
        rb.close()


# ------------------------------------------------------------------------------------------------
def retry_bound(env):
    """A retry keeps the bound: when a key's owner fails and its next replica is at capacity, the
    retry goes to the first member after it that is below its capacity, never onto the full one
    (docs/lb.md, "Failures")."""
    release = threading.Event()

    def answering(rb):
        def answer(path):
            if path.startswith("/hold"):
                release.wait(20)
            body = ("%d\n" % rb.port).encode()
            return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        return answer

    rb_b = h.RawBackend()
    rb_b.answer = answering(rb_b)
    rb_c = h.RawBackend()
    rb_c.answer = answering(rb_c)
    dead = "127.0.0.1:%d" % h.free_port()  # nothing listens there: connection refused
    holder = None
    try:
        members = [dead, rb_b.member, rb_c.member]
        names = {rb_b.port: rb_b.member, rb_c.port: rb_c.member}
        keys = keys_for(2000)
        reps = h.expect(members, keys, replicas=3)
        retry_keys = [k for k, r in zip(keys, reps) if r == [dead, rb_b.member, rb_c.member]]
        hold_keys = ["/hold" + k for k in keys]
        hold_owner = h.expect(members, hold_keys)
        hold_keys = [k for k, o in zip(hold_keys, hold_owner) if o == rb_b.member]
        check(len(retry_keys) >= 2 and hold_keys, "no key with replicas dead, B, C")
        # c = 1 and 3 members: capacity = ceil((m + 1) / 3).  With one request held on B, the
        # retry of a key owned by the dead member sees m = 2 (B's lease and its own first one):
        # capacity 1, B is full, C is the first member below its capacity.
        args = ["--balance", "1", "--fail-timeout", "0", "--backend-timeout", "10", "--verbose"]
        for m in members:
            args += ["--backend", m]
        lb = h.Balancer(env, args, threads=1).start()
        c = h.Client(lb.port, timeout=15)
        # control: without load the retry lands on the next replica, B
        st, body, _ = c.get(retry_keys[0])
        check(st == 200 and names.get(h.port_of(body)) == rb_b.member,
              "unloaded retry of %s: %r %r, want the next replica %s" % (retry_keys[0], st, body, rb_b.member))
        lb.wait_idle()
        # one request held on B
        held = {}

        def hold():
            hc = h.Client(lb.port, timeout=25)
            held["answer"] = hc.get(hold_keys[0])[:2]
            hc.close()

        holder = threading.Thread(target=hold, daemon=True)
        holder.start()
        end = time.time() + 10
        bm = None
        while time.time() < end:
            s = lb.stats()
            bm = [m for m in s["members"] if m["name"] == rb_b.member][0]
            if bm["load"] == 1:
                break
            time.sleep(0.05)
        check(bm is not None and bm["load"] == 1, "the held request is not on B: %s" % bm)
        check(bm["capacity"] == 1, "B's capacity with m = 1 should be ceil(2/3) = 1: %s" % bm)
        before = {m["name"]: m for m in lb.stats()["members"]}
        for k in retry_keys[1:4]:
            st, body, _ = c.get(k)
            got = names.get(h.port_of(body))
            check(st == 200, "%s answered %d" % (k, st))
            check(got == rb_c.member, "the retry of %s went to %s while B was at capacity; want %s"
                  % (k, got, rb_c.member))
        after = {m["name"]: m for m in lb.stats()["members"]}
        n = len(retry_keys[1:4])
        check(after[rb_c.member]["retries_in"] - before[rb_c.member]["retries_in"] == n,
              "C's retries_in moved by %d, want %d" % (after[rb_c.member]["retries_in"] - before[rb_c.member]["retries_in"], n))
        check(after[rb_b.member]["retries_in"] == before[rb_b.member]["retries_in"],
              "a retry was counted on B while it was full")
        check(after[rb_b.member]["load"] == 1, "B's load is %d, want only the held request" % after[rb_b.member]["load"])
        log("B at capacity (load 1 of 1): %d retries of keys owned by the dead member went to C, "
            "none to B" % n)
        release.set()
        holder.join(25)
        check(held.get("answer") == (200, ("%d\n" % rb_b.port).encode()), "held request: %r" % held)
        st = lb.wait_idle()
        check(st["ring"]["saturated"] == 0, "saturation events: %s" % st["ring"])
        lb.stop()
    finally:
        release.set()
        if holder is not None:
            holder.join(25)
        rb_b.close()
        rb_c.close()

TESTS = {
    "unloaded": unloaded,
    "nginx-compat": nginx_compat,
    "hotkey": hotkey,
    "sighup": sighup,
    "backend-down": backend_down,
    "malformed": malformed,
    "weights-prefix": weights_prefix,
    "retire-inflight": retire_inflight,
    "slow-client": slow_client,
    "bodies": bodies,
    "smuggling": smuggling,
    "answers": answers,
    "retry-bound": retry_bound,
}



if __name__ == "__main__":
    sys.exit(h.main(TESTS, (h.CHRING_LB, h.CHRING_LB_EXPECT, h.NGINX), all_case=True))
