#!/usr/bin/env python3
"""SIGHUP reloads of --members through the real binary (docs/lb.md, "How a request is routed",
"Membership"):

    lb_reload.py big         a members file of 20,000 entries (1,000 of them given twice) reloaded
                             by SIGHUP: applied as its differences within a generous bound, the
                             read of the file within a bound of CPU time that a quadratic
                             duplicate scan exceeds many times over; every entry once, the last
                             weight of a name given twice; the 3-entry file again: 3 members, the
                             first digest, keys on their owners
    lb_reload.py duplicates  a name given twice in the file, or in --backend and in the file: one
                             member, the last weight counts, at start and on SIGHUP; a reload
                             that changes nothing publishes nothing; a bad entry: the reload
                             refused, the membership unchanged
    lb_reload.py resolve     a new name that takes 2 s to resolve (tests/lb/gai_shim.c): the
                             main thread answers the stats listener meanwhile, then the file is
                             applied; names the ring holds are not looked up again; a SIGHUP
                             while a reload resolves reads the file again after it; a name that
                             does not resolve refuses the reload, the membership unchanged;
                             SIGTERM while a reload resolves: a clean exit
    lb_reload.py publish     4 members of weight 10,000 at --vnodes 100 (4 million points): a
                             SIGHUP re-weighting one (1 million points) is published off the main
                             thread: the summary is answered meanwhile ("publishing": true, the
                             old version), then the new ring, one reload counted; SIGTERM
                             during the digest thread's pass over that ring: a clean exit

Everything on 127.0.0.1 under a temporary directory, stopped by PID; every wait bounded.
"""
import os
import re
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402
from lbharness import check, log  # noqa: E402

BIG = 20000
BIG_TWICE = 1000
APPLY_BOUND = 60.0    # s from SIGHUP to the stats showing the reload: generous, a shared machine
READ_CPU_BOUND = 300  # ms of CPU to read the file: 6 to 14 ms measured, the quadratic scan 928 ms


def write_members(path, lines):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("# chring-lb members\n" + "".join(l + "\n" for l in lines))
    os.rename(tmp, path)


def wait_reload(lb, n, timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            st = lb.stats()
        except (OSError, ValueError, h.TestFailure):
            st = None
        if st and st["balancer"]["reloads"] + st["balancer"]["reload_errors"] >= n:
            # a stats answer lists the members before the counters: one begun before the reload
            # may count it and still list the members before it, so read them again
            return lb.stats()
        time.sleep(0.05)
    raise h.TestFailure("reload %d not applied within %.0f s" % (n, timeout))


def reload_lines(lb):
    """The balancer's timing lines of each reload: [(entries, read ms, read CPU ms, apply ms,
    apply CPU ms)]."""
    pat = re.compile(r"reload: (\d+) entries read in (\d+) ms \((\d+) ms of CPU\), "
                     r"applied in (\d+) ms \((\d+) ms of CPU\)")
    return [tuple(int(x) for x in m.groups()) for m in pat.finditer(lb.output())]


def weights(st):
    return {m["name"]: m["weight"] for m in st["members"]}


# ------------------------------------------------------------------------------------------------
def big(env):
    bs = [h.Backend(env, i).start() for i in range(3)]
    members = [b.member for b in bs]
    pm = {b.port: b.member for b in bs}
    path = env.path("members")
    write_members(path, members)
    lb = h.Balancer(env, ["--members", path, "--vnodes", "16"]).start()
    d0 = h.digest_of(lb.stats())
    check(d0 == h.expect_digest(members, vnodes=16), "the first digest is not the oracle's")

    # 20,000 distinct names (numeric addresses on loopback where nothing listens: no DNS lookup,
    # no request is sent to them), 1,000 of them given a second time with weight 2
    extra = ["127.0.2.%d:%d" % (1 + i % 250, 1000 + i // 250) for i in range(BIG - len(members))]
    check(len(set(extra)) == len(extra), "the test's names are not distinct")
    lines = members + extra + [n + "=2" for n in extra[:BIG_TWICE]]
    write_members(path, lines)
    t0 = time.time()
    lb.hup()
    st = wait_reload(lb, 1, APPLY_BOUND)
    took = time.time() - t0
    check(st["balancer"]["reload_errors"] == 0, "the big reload failed:\n" + lb.output()[-2000:])
    w = weights(st)
    check(len(w) == BIG and st["ring"]["members"] == BIG,
          "%d members after the reload (%d stats entries), want %d" % (st["ring"]["members"], len(w), BIG))
    twice = sum(1 for n in extra[:BIG_TWICE] if w.get(n) == 2)
    once = sum(1 for n in extra[BIG_TWICE:] if w.get(n) == 1)
    check(twice == BIG_TWICE and once == len(extra) - BIG_TWICE,
          "weights: %d of the names given twice at 2, %d of the others at 1" % (twice, once))
    t = reload_lines(lb)
    check(len(t) == 1 and t[0][0] == BIG, "the reload's timing line: %s" % t)
    n, read_ms, read_cpu, apply_ms, apply_cpu = t[0]
    log("SIGHUP with %d lines, %d entries: in the stats after %.2f s; read %d ms (%d ms of CPU), "
        "applied %d ms (%d ms of CPU)" % (len(lines), n, took, read_ms, read_cpu, apply_ms, apply_cpu))
    check(read_cpu <= READ_CPU_BOUND, "reading %d entries took %d ms of CPU (bound %d)" %
          (n, read_cpu, READ_CPU_BOUND))
    with open(env.path("reload.txt"), "w") as f:
        f.write("%d entries: %.3f s to the stats, read %d ms (%d CPU), applied %d ms (%d CPU)\n" %
                (n, took, read_ms, read_cpu, apply_ms, apply_cpu))

    # the small file again: the 20,000 leave in one change, the first placement comes back
    write_members(path, members)
    lb.hup()
    st = wait_reload(lb, 2, APPLY_BOUND)
    check(sorted(weights(st)) == sorted(members) and h.digest_of(st) == d0,
          "after the 3-entry file again: %d members, digest %s (first %s)" %
          (len(st["members"]), h.digest_of(st), d0))
    keys = ["/r/%d" % i for i in range(200)]
    c = h.Client(lb.port)
    for k, own in zip(keys, h.expect(members, keys, vnodes=16)):
        s, body, _ = c.get(k)
        check(s == 200 and pm.get(h.port_of(body)) == own, "%s: %d from %s, owner %s" %
              (k, s, pm.get(h.port_of(body)), own))
    c.close()
    log("the 3-entry file again: 3 members, digest %s as at start, 200 keys on their owner" % d0)
    lb.wait_idle()
    lb.stop()


# ------------------------------------------------------------------------------------------------
def duplicates(env):
    bs = [h.Backend(env, i).start() for i in range(3)]
    a, b, c = (x.member for x in bs)
    path = env.path("members")
    # a twice in the file (last: 3), b in --backend at 2 and in the file at 1 (the file's, read
    # after --backend, counts)
    write_members(path, [a, b, a + "=3", c + "=2", c + "=1"])
    lb = h.Balancer(env, ["--members", path, "--backend", b + "=2"]).start()
    st = lb.stats()
    check(weights(st) == {a: 3, b: 1, c: 1}, "at start: %s" % weights(st))
    check(h.digest_of(st) == h.expect_digest([a + "=3", b, c]), "the digest at start")
    log("at start: one member per name, the last weight: %s" % weights(st))

    v0 = st["ring"]["version"]
    write_members(path, [c, a + "=1", b + "=4", a + "=3", c + "=1"])  # the same set, reordered
    lb.hup()
    st = wait_reload(lb, 1, 20)
    check(weights(st) == {a: 3, b: 4, c: 1}, "after a reload with duplicates: %s" % weights(st))
    v1 = st["ring"]["version"]
    check(v1 > v0, "the weight change was not published")
    write_members(path, [b + "=4", a + "=2", a + "=3", c])  # nothing changes
    lb.hup()
    st = wait_reload(lb, 2, 20)
    check(weights(st) == {a: 3, b: 4, c: 1} and st["ring"]["version"] == v1,
          "a reload changing nothing: %s, version %d -> %d" % (weights(st), v1, st["ring"]["version"]))
    log("SIGHUP with duplicates: merged, the last weight counts; one that changes nothing "
        "publishes nothing (version %d)" % v1)

    write_members(path, [a, b + "=0", c])
    lb.hup()
    st = wait_reload(lb, 3, 20)
    check(st["balancer"]["reload_errors"] == 1 and weights(st) == {a: 3, b: 4, c: 1},
          "a bad entry: reload_errors %d, members %s" % (st["balancer"]["reload_errors"], weights(st)))
    check("weight must be an integer" in lb.output(), "the bad entry is not logged")
    log("a bad entry: reload refused, membership unchanged")
    lb.stop()


# ------------------------------------------------------------------------------------------------
def lookups(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def wait_resolving(lb, reloads_before, until_done=False, timeout=10):
    """Polls the stats listener (served by the main thread) until a reload has names with its
    resolver thread (until_done: and then until it is done); fails when the reload completes
    before one is seen resolving, which is what a main thread blocked in the lookup shows (the
    stats answer waits for it).  Returns the answers served while it resolved."""
    end = time.time() + timeout
    served = 0
    while time.time() < end:
        b = lb.stats()["balancer"]
        done = b["reloads"] + b["reload_errors"] > reloads_before
        if b["reload_resolving"] > 0:
            check(not done, "a reload counted while one resolves: %s" % b)
            served += 1
            if not until_done:
                return served
        elif done:
            check(served > 0, "the reload was done before the stats listener saw it resolving: "
                  "the main thread waited for the lookup")
            return served
        time.sleep(0.02)
    raise h.TestFailure("no reload resolving, then done, within %.0f s" % timeout)


def resolve(env):
    shim = os.environ.get("LB_GAI_SHIM")
    if not shim or not os.path.exists(shim):
        print("LB_GAI_SHIM not built: skipped")
        raise SystemExit(77)
    bs = [h.Backend(env, i).start() for i in range(3)]
    pm = {b.port: b for b in bs}
    count = env.path("lookups")
    envv = dict(os.environ)
    envv["LD_PRELOAD"] = shim
    envv["GAI_SHIM_COUNT"] = count
    envv["ASAN_OPTIONS"] = envv.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    path = env.path("members")
    write_members(path, [bs[0].member, bs[1].member])
    lb = h.Balancer(env, ["--members", path], stats_listen=True, spawn_kw={"env": envv}).start()

    slow = "shim-slow-a:%d" % bs[2].port
    first = [bs[0].member, bs[1].member, slow]
    write_members(path, first)
    t0 = time.time()
    lb.hup()
    served = wait_resolving(lb, 0, until_done=True)
    st = wait_reload(lb, 1, 30)
    took = time.time() - t0
    check(st["balancer"]["reloads"] == 1 and sorted(weights(st)) == sorted(first),
          "after the slow name resolved: %s, %s" % (st["balancer"], sorted(weights(st))))
    check(lookups(count) == 1, "%d lookups of shim names, want 1" % lookups(count))
    check("1 names resolved off the main thread" in lb.output(), "no timing line for the lookup")
    log("SIGHUP with a name taking 2 s to resolve: %d stats answers from the main thread while it "
        "resolved, applied after %.2f s" % (served, took))
    keys = ["/s/%d" % i for i in range(120)]
    c = h.Client(lb.port)
    for k, own in zip(keys, h.expect(first, keys)):
        s, body, _ = c.get(k)
        want = bs[2] if own == slow else pm[int(own.rsplit(":", 1)[1])]
        check(s == 200 and h.port_of(body) == want.port, "%s (owner %s): %d from %s" %
              (k, own, s, h.port_of(body)))
    c.close()

    # the same file again: nothing to resolve, applied at once
    lb.hup()
    st = wait_reload(lb, 2, 10)
    check(lookups(count) == 1, "a name the ring holds was looked up again (%d lookups)" % lookups(count))
    log("the same file again: no lookup")

    # a SIGHUP while a reload resolves: the file is read again after it
    second = [bs[0].member, "shim-slow-b:%d" % bs[1].port]
    third = second + ["shim-slow-c:%d" % bs[2].port]
    write_members(path, second)
    lb.hup()
    wait_resolving(lb, 2)
    write_members(path, third)
    lb.hup()
    st = wait_reload(lb, 4, 30)
    check(st["balancer"]["reloads"] == 4 and sorted(weights(st)) == sorted(third),
          "after two SIGHUPs, the second while the first resolved: %s, %s" %
          (st["balancer"], sorted(weights(st))))
    check(lookups(count) == 3, "%d lookups, want 3 (b and c once each)" % lookups(count))
    check("read again after it" in lb.output(), "the second SIGHUP is not logged as deferred")
    log("a SIGHUP while a reload resolved: both applied in order, the last file is the membership")

    # a name that does not resolve: the reload refused whole
    v = st["ring"]["version"]
    write_members(path, third + ["nohost-1.invalid:80", bs[1].member])
    lb.hup()
    st = wait_reload(lb, 5, 30)
    check(st["balancer"]["reload_errors"] == 1 and sorted(weights(st)) == sorted(third) and
          st["ring"]["version"] == v, "an unresolvable name: %s, %s" % (st["balancer"], sorted(weights(st))))
    check("nohost-1.invalid" in lb.output(), "the unresolvable name is not logged")
    log("an unresolvable name: reload refused, membership unchanged")

    # SIGTERM while a reload resolves: it waits for the lookup, drops the reload, exits cleanly
    lb.wait_idle()
    write_members(path, third + ["shim-slow-d:%d" % bs[0].port])
    lb.hup()
    wait_resolving(lb, 5)
    lb.stop()
    log("SIGTERM while a reload resolved: clean exit")


def publish(env):
    path = env.path("members")
    names = ["127.0.3.%d:80" % i for i in range(1, 5)]
    write_members(path, [n + "=10000" for n in names])
    lb = h.Balancer(env, ["--members", path, "--vnodes", "100"], threads=1, stats_listen=True).start()
    st = h.summary(lb.stats_port)
    check(st["ring"]["points"] == 4000000, "points %d at start" % st["ring"]["points"])
    v0 = st["ring"]["version"]
    write_members(path, [names[0] + "=9000"] + [n + "=10000" for n in names[1:]])
    lb.hup()
    seen = []  # (publishing, version) per summary
    end = time.time() + 120
    while time.time() < end:
        st = h.summary(lb.stats_port)
        seen.append((st["balancer"].get("publishing", False), st["ring"]["version"]))
        if st["balancer"]["reloads"] == 1 and not st["balancer"].get("publishing"):
            break
        time.sleep(0.02)
    check(st["balancer"]["reloads"] == 1, "the reload not counted within 120 s: %r" % st["balancer"])
    during = [x for x in seen if x[0]]
    log("re-weighting 1 million points by SIGHUP: %d summaries, %d while published" % (len(seen), len(during)))
    # (the flag falls once the main thread hears of the publish: a summary just after it may
    # show the new ring still "publishing")
    check(any(v == v0 for p, v in during), "no summary answered while the reload was published: %r" % seen[:5])
    check(st["ring"]["version"] > v0 and st["ring"]["points"] == 3900000,
          "ring version %d, %d points after the reload" % (st["ring"]["version"], st["ring"]["points"]))
    check(re.search(r"reload: 4 entries read in \d+ ms \(\d+ ms of CPU\), applied in \d+ ms", lb.output()),
          "no reload line")
    # SIGTERM while the digest thread is in a pass over the 3.9 million points (asked by the
    # summary, started once the ring was quiet for 0.3 s): the process ends without waiting for
    # it, cleanly (docs/lb.md, "Threads").  Under ThreadSanitizer the pass takes seconds, so the
    # SIGTERM mostly comes during it; an abandoned thread left joinable is a "thread leak" there.
    st = h.summary(lb.stats_port)
    time.sleep(0.6)
    out = lb.stop()
    cut = "the ring's digest is being computed; the ring is not freed" in out
    log("SIGTERM %s the digest thread's pass: clean exit" % ("during" if cut else "after"))
    # Whether the SIGTERM came during the pass depends on timing (it did not, once, in CI under
    # TSan): logged, not checked; the clean exit is what stop() checks.


TESTS = {"big": big, "duplicates": duplicates, "resolve": resolve, "publish": publish}


if __name__ == "__main__":
    sys.exit(h.main(TESTS, (h.CHRING_LB, h.CHRING_LB_EXPECT, h.NGINX)))
