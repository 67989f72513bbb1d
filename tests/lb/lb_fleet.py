#!/usr/bin/env python3
"""A fleet on one membership: three chring-lb instances fed by a real etcd (Debian etcd-server)
started by the test on 127.0.0.1 (temporary data dir, non-default ports), real nginx backends
(docs/fleet.md).

    lb_fleet.py agree     the three route 1,000 keys identically (and as chring names them);
                          a backend deleted and another added with etcdctl: all three agree
                          again (convergence time measured and logged) and only the changed
                          members' keys moved; bad keys and values are skipped without touching
                          the ring; the three report one placement digest (the oracle's for
                          etcd's set), a new one after the change
    lb_fleet.py restart   an instance started while etcd is down serves its starting list; etcd
                          stopped under traffic and started again: every request answered
                          throughout, the instances keep the last membership, then converge
                          after a change

Everything is stopped by PID when the test ends, also on failure; every wait is bounded.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402
from lbharness import check, log  # noqa: E402

ETCD = os.environ.get("ETCD") or shutil.which("etcd") or "/usr/bin/etcd"
ETCDCTL = os.environ.get("ETCDCTL") or shutil.which("etcdctl") or "/usr/bin/etcdctl"
PREFIX = "/chring/pool/"
RNG = random.Random(int(os.environ.get("LB_SEED", "16")))
CONVERGE_BOUND = 15.0  # generous: a shared machine; the measured time is logged


def keys_for(n):
    return ["/f/%d-%08x" % (i, RNG.getrandbits(32)) for i in range(n)]


class Etcd:
    """One etcd member on 127.0.0.1 with its own data directory and free ports."""

    def __init__(self, env):
        self.env = env
        self.port = h.free_port()
        self.peer = h.free_port()
        self.data = env.path("etcd-data")
        self.url = "http://127.0.0.1:%d" % self.port
        self.proc = None
        self.starts = 0

    def start(self):
        self.starts += 1
        argv = [ETCD, "--name", "t", "--data-dir", self.data,
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", "http://127.0.0.1:%d" % self.peer,
                "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % self.peer,
                "--initial-cluster", "t=http://127.0.0.1:%d" % self.peer,
                "--log-level", "error", "--logger", "zap"]
        self.proc = self.env.spawn("etcd%d" % self.starts, argv)
        end = time.time() + 20
        while time.time() < end:
            check(self.proc.poll() is None, "etcd exited with %s" % self.proc.returncode)
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if json.loads(r.read()).get("health") == "true":
                        return self
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        raise h.TestFailure("etcd not healthy after 20 s")

    def stop(self):
        if self.proc is not None:
            self.env.stop(self.proc)
            self.proc = None

    def ctl(self, *args):
        r = subprocess.run([ETCDCTL, "--endpoints", self.url] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=20)
        check(r.returncode == 0, "etcdctl %s: %s" % (" ".join(args), r.stdout.decode()))
        return r.stdout.decode()

    def put(self, name, value=""):
        self.ctl("put", PREFIX + name, value)

    def delete(self, name):
        self.ctl("del", PREFIX + name)


def fleet(env, etcd, n=3, extra=()):
    lbs = []
    for i in range(n):
        args = ["--etcd", etcd.url, "--etcd-prefix", PREFIX] + list(extra)
        lbs.append(h.Balancer(env, args, name="lb%d" % i).start())
    return lbs


def members_of(lb):
    try:
        st = lb.stats()
    except (OSError, ValueError, h.TestFailure):
        return None, None
    return sorted(m["name"] for m in st["members"]), st


def wait_converged(lbs, want, what, t0=None):
    """Waits until every instance's ring holds exactly want; returns the seconds each took since
    t0 (default: now)."""
    want = sorted(want)
    t0 = t0 or time.time()
    took = [None] * len(lbs)
    while time.time() - t0 < CONVERGE_BOUND and None in took:
        for i, lb in enumerate(lbs):
            if took[i] is None and members_of(lb)[0] == want:
                took[i] = time.time() - t0
        time.sleep(0.01)
    check(None not in took, "%s: not every instance converged within %.0f s: %s" %
          (what, CONVERGE_BOUND, [members_of(lb)[0] for lb in lbs]))
    log("%s: every instance holds the %d members after %s s" %
        (what, len(want), ", ".join("%.3f" % t for t in took)))
    return took


def route(lb, keys, pm):
    c = h.Client(lb.port)
    out = []
    for k in keys:
        s, body, _ = c.get(k)
        check(s == 200, "%s on %s answered %d" % (k, lb.name, s))
        out.append(pm.get(h.port_of(body)))
    c.close()
    return out


# ------------------------------------------------------------------------------------------------
def agree(env):
    etcd = Etcd(env).start()
    bs = [h.Backend(env, i).start() for i in range(5)]
    pm = {b.port: b.member for b in bs}
    first = [b.member for b in bs[:4]]
    etcd.put(bs[0].member)
    etcd.put(bs[1].member, "2")
    etcd.put(bs[2].member, "")
    etcd.put(bs[3].member, "1")
    lbs = fleet(env, etcd)
    wait_converged(lbs, first, "start")
    keys = keys_for(1000)
    want = h.expect([bs[0].member, bs[1].member + "=2", bs[2].member, bs[3].member], keys)
    maps = [route(lb, keys, pm) for lb in lbs]
    for lb, m in zip(lbs, maps):
        wrong = sum(1 for a, b in zip(m, want) if a != b)
        check(wrong == 0, "%s: %d of 1000 keys differ from chring's owner" % (lb.name, wrong))
    log("three instances, 1000 keys: identical, each on chring's owner")
    d1 = [h.digest_of(lb.stats()) for lb in lbs]
    d1_want = h.expect_digest([bs[0].member, bs[1].member + "=2", bs[2].member, bs[3].member])
    check(d1 == [d1_want] * 3, "digests after converging %s, the oracle's %s" % (d1, d1_want))
    log("three instances, one placement digest %s (the oracle's for etcd's set)" % d1_want)
    for lb, m in zip(lbs, maps):
        log("%s: keys per backend %s" % (lb.name, " ".join("%s=%d" % (b.member, m.count(b.member)) for b in bs)))
    v0 = [lb.stats()["ring"]["version"] for lb in lbs]

    # bad entries: skipped, the ring untouched
    etcd.put(bs[0].member, "heavy")
    etcd.put("not-a-host-port", "1")
    etcd.put(bs[4].member, "0")
    time.sleep(0.5)
    for lb, v in zip(lbs, v0):
        st = lb.stats()
        check(st["ring"]["version"] == v, "%s: a bad entry changed the ring (version %d -> %d)" %
              (lb.name, v, st["ring"]["version"]))
        check(st["etcd"]["bad_entries"] >= 3, "%s: bad entries %d" % (lb.name, st["etcd"]["bad_entries"]))
        check(sorted(m["name"] for m in st["members"]) == sorted(first), "%s: members changed" % lb.name)
        w0 = [m["weight"] for m in st["members"] if m["name"] == bs[0].member][0]
        check(w0 == 1, "%s: the bad value changed the weight to %d" % (lb.name, w0))
    log("bad values and keys: logged and skipped, ring versions unchanged")

    # a backend deleted and another added
    gone, new = bs[2], bs[4]
    t0 = time.time()
    etcd.delete(gone.member)
    etcd.put(new.member)
    ctl_s = time.time() - t0
    second = [bs[0].member, bs[1].member, bs[3].member, new.member]
    took = wait_converged(lbs, second, "delete + add (from the start of etcdctl del)", t0)
    log("the two etcdctl calls took %.3f s" % ctl_s)
    want2 = h.expect([bs[0].member, bs[1].member + "=2", bs[3].member, new.member], keys)
    maps2 = [route(lb, keys, pm) for lb in lbs]
    for lb, m in zip(lbs, maps2):
        check(m == want2, "%s: %d keys differ from chring's owner after the change" %
              (lb.name, sum(1 for a, b in zip(m, want2) if a != b)))
    d2 = [h.digest_of(lb.stats()) for lb in lbs]
    d2_want = h.expect_digest([bs[0].member, bs[1].member + "=2", bs[3].member, new.member])
    check(d2 == [d2_want] * 3 and d2_want != d1_want,
          "digests after the change %s (before %s), the oracle's %s" % (d2, d1_want, d2_want))
    log("after the change: one new digest %s on the three" % d2_want)
    moved = [(a, b) for a, b in zip(maps[0], maps2[0]) if a != b]
    stray = [(a, b) for a, b in moved if a != gone.member and b != new.member]
    check(not stray, "%d keys moved between unchanged members: %s" % (len(stray), stray[:5]))
    log("after the change: identical on all three; %d keys moved, every one from %s or to %s" %
        (len(moved), gone.member, new.member))
    for lb, m in zip(lbs, maps2):
        log("%s: keys per backend %s" % (lb.name, " ".join("%s=%d" % (b.member, m.count(b.member)) for b in bs)))
    for lb in lbs:
        e = lb.stats()["etcd"]
        check(e["state"] == "watching" and e["applied"] and e["batches"] >= 2, "etcd stats %s" % e)
    with open(env.path("convergence.txt"), "w") as f:
        f.write("delete+add %s\n" % " ".join("%.3f" % t for t in took))
    for lb in lbs:
        lb.wait_idle()
        lb.stop()


# ------------------------------------------------------------------------------------------------
def restart(env):
    etcd = Etcd(env)
    bs = [h.Backend(env, i).start() for i in range(5)]
    pm = {b.port: b.member for b in bs}
    # etcd down at start: the starting list is served, the feed keeps trying
    starter = h.Balancer(env, ["--etcd", etcd.url, "--etcd-prefix", PREFIX, "--backend",
                               bs[0].member, "--backend", bs[1].member], name="lb-starter").start()
    keys = keys_for(300)
    got = route(starter, keys, pm)
    check(got == h.expect([bs[0].member, bs[1].member], keys), "the starting list is not served")
    time.sleep(1.0)
    e = starter.stats()["etcd"]
    check(not e["applied"] and e["state"] in ("retrying", "connecting") and e["errors"] >= 2,
          "etcd down at start: %s" % e)
    log("etcd down at start: the starting list served, %d connection attempts failed" % e["errors"])
    d_start = h.digest_of(starter.stats())
    check(d_start == h.expect_digest([bs[0].member, bs[1].member]), "the starting list's digest")
    etcd.start()
    for b in bs[:3]:
        etcd.put(b.member)
    lbs = fleet(env, etcd, n=2) + [starter]
    wait_converged(lbs, [b.member for b in bs[:3]], "etcd up")
    d_up = [h.digest_of(lb.stats()) for lb in lbs]
    check(d_up == [h.expect_digest([b.member for b in bs[:3]])] * 3 and d_up[0] != d_start,
          "digests once etcd is up %s (the starting list's %s)" % (d_up, d_start))
    log("digest %s on the starter alone, then %s on all three" % (d_start, d_up[0]))

    errors, done = [], [0]
    stop = threading.Event()

    def traffic(lb):
        c = h.Client(lb.port)
        j = 0
        while not stop.is_set() and j < 200000:
            k = keys[j % len(keys)]
            j += 1
            try:
                s, _, _ = c.get(k)
                done[0] += 1
                if s != 200:
                    errors.append("%s %s: %d" % (lb.name, k, s))
            except Exception as ex:  # noqa: BLE001
                errors.append("%s %s: %r" % (lb.name, k, ex))
        c.close()

    ths = [threading.Thread(target=traffic, args=(lb,)) for lb in lbs]
    for t in ths:
        t.start()
    try:
        time.sleep(0.5)
        etcd.stop()
        log("etcd stopped")
        time.sleep(2.5)
        n_down = done[0]
        for lb in lbs:
            m, st = members_of(lb)
            check(m == sorted(b.member for b in bs[:3]), "%s lost its membership: %s" % (lb.name, m))
            check(st["etcd"]["state"] == "retrying", "%s: etcd state %s" % (lb.name, st["etcd"]))
        etcd.start()
        log("etcd started again (same data dir)")
        etcd.put(bs[3].member)
        etcd.delete(bs[0].member)
        wait_converged(lbs, [bs[1].member, bs[2].member, bs[3].member], "after the restart")
        time.sleep(0.3)
    finally:
        stop.set()
        for t in ths:
            t.join(30)
    check(not errors, "%d requests failed around the etcd restart: %s" % (len(errors), errors[:5]))
    log("%d requests during the etcd outage and after, all 200 (%d while it was down)" % (done[0], n_down))
    want = h.expect([bs[1].member, bs[2].member, bs[3].member], keys)
    for lb in lbs:
        check(route(lb, keys, pm) == want, "%s routes differently after the restart" % lb.name)
        st = lb.stats()
        check(st["etcd"]["state"] == "watching" and st["etcd"]["ranges"] >= 2, "%s: %s" % (lb.name, st["etcd"]))
    log("after the restart: the three instances route 300 keys identically")
    for lb in lbs:
        lb.wait_idle()
        lb.stop()
    etcd.stop()


TESTS = {"agree": agree, "restart": restart}


if __name__ == "__main__":
    sys.exit(h.main(TESTS, (h.CHRING_LB, h.CHRING_LB_EXPECT, h.NGINX, ETCD, ETCDCTL),
                    " (Debian etcd-server, etcd-client)"))
