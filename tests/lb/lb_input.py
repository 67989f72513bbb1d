#!/usr/bin/env python3
"""What chring-lb reads from its operator and shows back, through the real binary
(docs/lb.md, "Security model").

    lb_input.py stats-allow   --stats-allow is parsed strictly: empty entries, signs, leading
                              zeros, white space, bits past the prefix, 'any' in a list and
                              IPv4-mapped forms are refused with the entry named; good lists work
    lb_input.py members-nul   a NUL byte in the members file is an error naming its line, at
                              start and on SIGHUP (the membership unchanged), never a silently
                              cut entry; a control byte in a name is refused, logged quoted
    lb_input.py names         member names with invalid UTF-8, a right-to-left override and a
                              zero-width space (resolved through tests/lb/gai_shim.c, LD_PRELOAD):
                              the stats are valid JSON with them replaced or escaped, and the
                              status page (headless Chromium, when installed) shows the invisible
                              characters as visible escapes
    lb_input.py spare-blocks  --spare-blocks is 0..6, anything else refused; at 3.2 M points a
                              chring-lb with --spare-blocks 1 (the default) holds one ring-sized
                              block more at rest than with 0, after the start and after a
                              SIGHUP (docs/lb.md, "Memory at 16 million points")
    lb_input.py memory-bound  at 8 M points (50,000 members x 160) chring-lb's RSS at rest and
                              its peak (VmHWM), after the start and after a SIGHUP, stay within
                              the bound docs/lb.md states from the ring's own size (points and
                              members) and a margin
"""
import json
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402
from lbharness import check, log  # noqa: E402


def run_lb(args, timeout=10):
    """Runs chring-lb expecting it to exit (a refused option or file): (status, stderr); still
    running after timeout: (None, ...), the process killed."""
    try:
        p = subprocess.run([h.CHRING_LB, "--listen", "127.0.0.1:%d" % h.free_port()] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "still running after %d s" % timeout
    return p.returncode, p.stderr.decode("utf-8", "replace")


def test_stats_allow(env):
    bad = {
        "": "entry 1 '': an empty entry",
        "10.0.0.0/8,": "entry 2 '': an empty entry",
        "10.0.0.0/8,,::1": "entry 2 '': an empty entry",
        ",10.0.0.0/8": "entry 1 '': an empty entry",
        "10.0.0.0/+8": "not a plain decimal",
        "10.0.0.0/08": "not a plain decimal",
        "10.0.0.0/ 8": "not a plain decimal",
        "10.0.0.0/8 ": "not a plain decimal",
        " 10.0.0.0/8": "not an IPv4 or IPv6 address",
        "10.0.0.0/": "not a plain decimal",
        "10.0.0.0/33": "above 32",
        "::1/129": "above 128",
        "10.0.0.1/8": "bits set past /8 (the network is 10.0.0.0/8)",
        "fe80::1/10": "the network is fe80::/10",
        "any,10.0.0.0/8": "'any' must stand alone",
        "::ffff:10.0.0.0/104": "IPv4-mapped",
        ",".join(["10.0.0.%d" % i for i in range(65)]): "more entries than the 64 allowed",
        "10.0.0.0/8\x1b[31m": "'10.0.0.0/8?[31m'",
    }
    for v, want in bad.items():
        rc, err = run_lb(["--backend", "127.0.0.1:9", "--stats-allow", v, "--help"])
        check(rc not in (0, None) and want in err and "\x1b" not in err,
              "--stats-allow %r: status %d, %r (want %r)" % (v, rc, err.strip(), want))
    for v in ["any", "127.0.0.1", "127.0.0.0/8,::1", "0.0.0.0/0", "10.0.0.0/8,127.0.0.0/8"]:
        rc, err = run_lb(["--backend", "127.0.0.1:9", "--stats-allow", v, "--help"])
        check(rc == 0, "--stats-allow %r refused: %s" % (v, err))
    # a good list in use: loopback allowed, and 10/8 alone refuses it
    lb = h.Balancer(env, ["--backend", "127.0.0.1:9", "--stats-allow", "10.0.0.0/8,127.0.0.0/8"]).start()
    lb.stop()
    lb = h.Balancer(env, ["--backend", "127.0.0.1:9", "--stats-allow", "10.0.0.0/8"], name="lb2")
    lb.proc = env.spawn(lb.name, lb.argv)
    h.wait_port(lb.port, proc=lb.proc)
    st, _, _ = h.Client(lb.port).get("/_chring/stats")
    check(st == 403, "a peer outside --stats-allow answered %d" % st)
    lb.stop()
    log("%d bad lists refused with the entry named; good lists accepted" % len(bad))


def test_members_nul(env):
    mf = env.path("members.txt")
    with open(mf, "wb") as f:
        f.write(b"127.0.0.1:9\n127.0.0.1:10\x00junk\n")
    rc, err = run_lb(["--members", mf, "--threads", "1"], timeout=10)
    check(rc not in (0, None) and "members.txt:2: a NUL byte in the line" in err,
          "a NUL in the members file: status %d, %r" % (rc, err[-500:]))
    # a control byte in a name: refused, and the error does not carry the escape to the terminal
    with open(mf, "wb") as f:
        f.write(b"127.0.0.1:9\n\x1b[31m127.0.0.1:10\n")
    rc, err = run_lb(["--members", mf, "--threads", "1"], timeout=10)
    check(rc not in (0, None) and "members.txt:2: '\\x1b[31m127.0.0.1:10': a control byte in the name" in err
          and "\x1b" not in err, "a control byte in a name: status %s, %r" % (rc, err[-500:]))
    with open(mf, "wb") as f:
        f.write(b"127.0.0.1:9\n127.0.0.1:10\n")
    lb = h.Balancer(env, ["--members", mf]).start()
    with open(mf, "wb") as f:
        f.write(b"127.0.0.1:9\n127.0.0.1:11\x00\n127.0.0.1:12\n")
    lb.hup()
    end = time.time() + 10
    while time.time() < end and "a NUL byte" not in lb.output():
        time.sleep(0.05)
    out = lb.output()
    check("members.txt:2: a NUL byte in the line; membership unchanged" in out, "no error on SIGHUP:\n" + out[-1500:])
    names = sorted(m["name"] for m in lb.stats()["members"])
    check(names == ["127.0.0.1:10", "127.0.0.1:9"], "membership changed: %r" % names)
    check(lb.stats()["balancer"]["reload_errors"] == 1, "the failed reload is not counted")
    lb.stop()


def test_names(env):
    shim = os.environ["LB_GAI_SHIM"]
    port = h.free_port()
    names = [b"shim-\xff\xfebad:%d" % port, b"shim-evil\xe2\x80\xaegpj.exe:%d" % port,
             b"shim-zero\xe2\x80\x8bwidth:%d" % port, b"shim-plain:%d" % port]
    mf = env.path("members.txt")
    with open(mf, "wb") as f:
        f.write(b"\n".join(names) + b"\n")
    envv = dict(os.environ)
    envv["LD_PRELOAD"] = shim
    envv["ASAN_OPTIONS"] = envv.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    lb = h.Balancer(env, ["--members", mf], stats_listen=True, spawn_kw={"env": envv}).start()
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", lb.stats_port, timeout=5)
    c.request("GET", "/_chring/stats")
    raw = c.getresponse().read()
    c.close()
    raw.decode("utf-8")  # strict: valid UTF-8
    st = json.loads(raw)
    got = sorted(m["name"] for m in st["members"])
    want = sorted(["shim-\ufffd\ufffdbad:%d" % port, "shim-evil\u202egpj.exe:%d" % port,
                   "shim-zero\u200bwidth:%d" % port, "shim-plain:%d" % port])
    check(got == want, "names in the stats %r, want %r" % (got, want))
    check(b"\xe2\x80\xae" not in raw and b"\\u202e" in raw and b"\\u200b" in raw,
          "invisible characters not escaped in the JSON")
    log("stats JSON valid with names %r" % got)
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if chromium:
        from lb_status import Dom, chromium as run_chromium
        text = run_chromium(env, "http://127.0.0.1:%d/_chring/#sort=name" % lb.stats_port,
                            ["--virtual-time-budget=3000", "--dump-dom"])
        d = Dom(text)
        check(len(d.rows) == 4, "%d rows on the page" % len(d.rows))
        check('<span class="esc" title="U+202E">\\u{202E}</span>' in text
              and '<span class="esc" title="U+200B">\\u{200B}</span>' in text
              and '<span class="esc" title="U+FFFD">\\u{FFFD}</span>' in text,
              "the page does not show the invisible characters as escapes")
        log("the page shows U+202E, U+200B and U+FFFD as escapes")
    else:
        log("chromium not installed: the page part skipped")
    lb.stop()


def rss_settled_kb(pid):
    """VmRSS once it has not moved by more than 2 MB over 1 s (the library's trimmer frees
    spares 200 ms after the last publish), at most 20 s of polling."""
    seen = [h.vm_kb(pid, "VmRSS:")]
    for _ in range(200):
        time.sleep(0.1)
        seen.append(h.vm_kb(pid, "VmRSS:"))
        last = seen[-11:]
        if len(last) == 11 and max(last) - min(last) <= 2048:
            break
    return seen[-1]


def test_spare_blocks(env):
    for v in ["7", "-1", "", "x", "1x", "18446744073709551617"]:
        rc, err = run_lb(["--backend", "127.0.0.1:9", "--spare-blocks", v, "--help"])
        check(rc not in (0, None) and "--spare-blocks: 0..6" in err,
              "--spare-blocks %r: status %s, %r" % (v, rc, err.strip()))
    for v in ["0", "1", "6"]:
        rc, err = run_lb(["--backend", "127.0.0.1:9", "--spare-blocks", v, "--help"])
        check(rc == 0, "--spare-blocks %s refused: %s" % (v, err))
    with open(h.CHRING_LB, "rb") as f:
        if b"__asan_init" in f.read():
            log("a sanitizer build: its shadow memory is not the ring's; the memory part skipped")
            return
    # 20,000 numeric names where nothing listens (no DNS, no request sent) x 160 points
    names = ["127.0.2.%d:%d" % (1 + i % 250, 1000 + i // 250) for i in range(20001)]
    path = env.path("members")
    rest = {}
    for spare in (0, 1):
        with open(path, "w") as f:
            f.write("".join(n + "\n" for n in names[:20000]))
        lb = h.Balancer(env, ["--members", path, "--vnodes", "160", "--spare-blocks", str(spare)],
                        name="lb-spare-%d" % spare, stats_listen=True).start()
        st = lb.stats()
        check(st["ring"]["members"] == 20000, "%d members" % st["ring"]["members"])
        points = st["ring"]["points"]
        started = rss_settled_kb(lb.proc.pid)
        with open(path, "a") as f:
            f.write(names[20000] + "\n")
        lb.hup()
        end = time.time() + 60
        while time.time() < end and lb.stats()["balancer"]["reloads"] < 1:
            time.sleep(0.1)
        check(lb.stats()["ring"]["members"] == 20001, "the SIGHUP's member is not in the ring")
        rest[spare] = (started, rss_settled_kb(lb.proc.pid))
        log("--spare-blocks %d: RSS at rest %.0f MB after the start, %.0f MB after a SIGHUP "
            "(%d points)" % (spare, started / 1024, rest[spare][1] / 1024, points))
        lb.stop()
    # a snapshot block is 20 bytes a point here (positions 8, owners 4, the line index 8)
    block_kb = points * 20 // 1024
    for k, when in enumerate(("after the start", "after a SIGHUP")):
        more = rest[1][k] - rest[0][k]
        check(block_kb // 2 <= more <= block_kb * 3 // 2,
              "%s --spare-blocks 1 holds %.0f MB more than 0 at rest; one block is about %.0f MB"
              % (when, more / 1024, block_kb / 1024))


# chring-lb's memory against its ring's own size (docs/lb.md, "Memory at 16 million points"):
# the ring is at most RING_PER_POINT bytes a point and RING_PER_MEMBER a member (the library's
# snapshot, 20.6 to 23 bytes a point, and a member's 128-byte slot and its place in the
# snapshot's tables); the margin is the process (threads, buffers, libevent: about 30 MB) and
# the feed's tables, MARGIN and MARGIN_PER_MEMBER; the spare blocks a build makes ready take at
# most PREFAULT_BYTES or two blocks (docs/design.md §4, "Spare blocks").
RING_PER_POINT = 24
RING_PER_MEMBER = 256
MARGIN = 64 << 20
MARGIN_PER_MEMBER = 1024
PREFAULT_BYTES = 384 << 20


def ring_bytes(points, members):
    return RING_PER_POINT * points + RING_PER_MEMBER * members


def memory_bounds(points, members, spare_blocks, before=0):
    """(at rest, peak) in bytes for a ring of points and members, --spare-blocks spare_blocks,
    whose last publish replaced a ring of `before` bytes (0: the first load): at rest the ring
    and the blocks kept; at the peak the replaced ring (until its grace period ends), the new
    one, the larger of the spares a build makes ready and those kept at rest, and the margin."""
    ring = ring_bytes(points, members)
    margin = MARGIN + MARGIN_PER_MEMBER * members
    rest = (1 + spare_blocks) * ring + margin
    peak = before + ring + max(2 * ring, PREFAULT_BYTES, spare_blocks * ring) + margin
    return rest, peak


def test_memory_bound(env):
    if h.sanitized():
        log("a sanitizer build: its shadow memory is not the ring's; skipped")
        return
    # 50,000 numeric names where nothing listens (no DNS, no request sent) x 160 points: 8 M
    # points, snapshot blocks of about 160 MB, so the build makes two spares ready, not five
    n = 50000
    names = ["127.0.3.%d:%d" % (1 + i % 250, 1000 + i // 250) for i in range(n + 1)]
    path = env.path("members")
    with open(path, "w") as f:
        f.write("".join(x + "\n" for x in names[:n]))
    lb = h.Balancer(env, ["--members", path, "--vnodes", "160"], name="lb-memory",
                    stats_listen=True).start()  # --spare-blocks 1, the default
    st = lb.stats()
    check(st["ring"]["members"] == n, "%d members" % st["ring"]["members"])
    rest_bound, peak_bound = memory_bounds(st["ring"]["points"], n, 1)
    figures = []
    for when in ("after the start", "after a SIGHUP"):
        if when == "after a SIGHUP":
            with open(path, "a") as f:
                f.write(names[n] + "\n")
            lb.hup()
            end = time.time() + 60
            while time.time() < end and lb.stats()["balancer"]["reloads"] < 1:
                time.sleep(0.1)
            before = ring_bytes(st["ring"]["points"], n)
            st = lb.stats()
            check(st["ring"]["members"] == n + 1, "the SIGHUP's member is not in the ring")
            rest_bound, peak_bound = memory_bounds(st["ring"]["points"], n + 1, 1, before)
        rest = rss_settled_kb(lb.proc.pid) * 1024
        peak = h.vm_kb(lb.proc.pid, "VmHWM:") * 1024
        points = st["ring"]["points"]
        log("%s: %d points; RSS at rest %.0f MB (%.1f bytes a point, bound %.0f MB), peak %.0f MB "
            "(%.1f, bound %.0f MB)" % (when, points, rest / 2**20, rest / points, rest_bound / 2**20,
                                       peak / 2**20, peak / points, peak_bound / 2**20))
        figures.append((when, rest, peak, rest_bound, peak_bound))
    lb.stop()
    for when, rest, peak, rest_bound, peak_bound in figures:
        check(rest <= rest_bound, "%s: RSS at rest %.0f MB, above the bound %.0f MB"
              % (when, rest / 2**20, rest_bound / 2**20))
        check(peak <= peak_bound, "%s: peak RSS %.0f MB, above the bound %.0f MB"
              % (when, peak / 2**20, peak_bound / 2**20))


TESTS = {"stats-allow": test_stats_allow, "members-nul": test_members_nul, "names": test_names,
         "spare-blocks": test_spare_blocks, "memory-bound": test_memory_bound}


def extra_needs(case):
    """The case names resolves its names through tests/lb/gai_shim.c (LB_GAI_SHIM, built by
    tests/lb/meson.build)."""
    shim = os.environ.get("LB_GAI_SHIM")
    if case == "names" and not (shim and os.path.exists(shim)):
        return "LB_GAI_SHIM (tests/lb/gai_shim.c, built by meson)"
    return None


if __name__ == "__main__":
    sys.exit(h.main(TESTS, extra_needs=extra_needs))
