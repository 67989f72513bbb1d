#!/usr/bin/env python3
"""chring-lb's health through the ring, against real nginx backends (docs/lb.md, "Health, slow
start and drain"):

    lb_health.py passive      a backend that fails is marked down in the ring (chring_set_down):
                              its keys go to their next replica without trying it again, every
                              other key keeps its owner; restarted, it is up again after
                              --fail-timeout and gets back exactly its keys
    lb_health.py slow-start   a backend that joins through a reload with --slow-start gets a
                              growing share of its keys' requests while they are held
    lb_health.py drain        with --drain, a backend removed from the members file stays in the
                              ring, ramping down, while requests are held on it, and leaves when
                              its load reaches 0; with requests longer than --drain it leaves
                              after --drain, and those requests still complete
    lb_health.py digest       the placement digest in the stats is the oracle's for the members
                              file; unchanged while a backend is down by passive health, changed
                              by a SIGHUP that removes a member or changes a weight, back to the
                              first when the file is
    lb_health.py outcome      X-Chring-Outcome (--outcome-header, off by default): owner without
                              load, spilled for the keys of a backend that failed (its retry),
                              owner_down once it is down; one the backend sends is replaced; the
                              stats' outcomes count every lease taken

Everything on 127.0.0.1 under a temporary directory, stopped by PID; every wait bounded.
"""
import os
import random
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402
from lbharness import check, log  # noqa: E402

RNG = random.Random(int(os.environ.get("LB_SEED", "19")))


def keys_for(n, prefix="/k/"):
    return ["%s%d-%08x" % (prefix, i, RNG.getrandbits(32)) for i in range(n)]


def write_members(path, members):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("# chring-lb members\n" + "".join(m + "\n" for m in members))
    os.rename(tmp, path)


def member(st, name):
    for m in st["members"]:
        if m["name"] == name:
            return m
    return None


# ------------------------------------------------------------------------------------------------
def passive(env):
    bs = [h.Backend(env, i).start() for i in range(4)]
    members = [b.member for b in bs]
    pm = {b.port: b.member for b in bs}
    args = ["--fail-timeout", "3"]
    for m in members:
        args += ["--backend", m]
    lb = h.Balancer(env, args).start()
    keys = keys_for(600)
    reps = h.expect(members, keys, replicas=2)
    victim = bs[1]
    victim.stop()
    log("stopped", victim.member)
    c = h.Client(lb.port)
    t0 = time.time()
    for k, (own, nxt) in zip(keys, reps):
        s, body, _ = c.get(k)
        got = pm.get(h.port_of(body))
        check(s == 200, "%s answered %d" % (k, s))
        check(got == (nxt if own == victim.member else own),
              "%s (owner %s, next %s) answered by %s" % (k, own, nxt, got))
    elapsed = time.time() - t0
    st = lb.stats()
    vm = member(st, victim.member)
    nkeys = sum(1 for own, _ in reps if own == victim.member)
    log("%d keys of the stopped backend on their next replica, in %.2f s: failures %d, downs %d" %
        (nkeys, elapsed, vm["failures"], vm["downs"]))
    # Down in the ring, not in the balancer's own bookkeeping: the ring counts it down, and every
    # key of it after the first failure (one per worker thread at most, racing) went to the next
    # replica without an attempt on it (no retry).
    check(vm["ring_down"] and vm["down"] and st["ring"]["down"] == 1,
          "the failed backend is not down in the ring: %s, ring down %d" % (vm, st["ring"]["down"]))
    if elapsed < 2.5:  # all within --fail-timeout: it was never tried again meanwhile
        check(1 <= vm["failures"] <= 2, "failures %d: keys kept trying the down backend" % vm["failures"])
        check(st["balancer"]["retries"] == vm["failures"], "retries %d, failures %d" %
              (st["balancer"]["retries"], vm["failures"]))
    # the others keep their keys: placement as chring's owner with the victim down
    others_moved = sum(1 for m in st["members"] if m["name"] != victim.member and m["down"])
    check(others_moved == 0, "another member is down")
    # recovery: restarted, it is set up after --fail-timeout and gets back exactly its keys
    victim.start()
    h.wait_until("the restarted backend up again", lambda: not member(lb.stats(), victim.member)["ring_down"], 20)
    log("%s is up again in the ring" % victim.member)
    for k, (own, nxt) in zip(keys, reps):
        s, body, _ = c.get(k)
        got = pm.get(h.port_of(body))
        check(s == 200 and got == own, "after recovery %s answered %d by %s, owner %s" % (k, s, got, own))
    st = lb.wait_idle()
    check(st["ring"]["down"] == 0, "members still down: %d" % st["ring"]["down"])
    log("after recovery: 600/600 keys on their owner")
    c.close()
    lb.stop()


# ------------------------------------------------------------------------------------------------
class Holder:
    """Threads that each request /slow/<key> (a few hundred KB at the backend's limit_rate) over
    and over from a list of keys; records (end time, key, backend port, status)."""

    def __init__(self, port, keys, threads, rounds):
        self.port, self.keys, self.rows, self.errors = port, keys, [], []
        self.stop = threading.Event()
        self.ths = [threading.Thread(target=self.loop, args=(i, rounds)) for i in range(threads)]

    def loop(self, i, rounds):
        c = h.Client(self.port, timeout=60)
        for j in range(rounds):
            if self.stop.is_set():
                break
            k = self.keys[(i + j * 7) % len(self.keys)]
            try:
                s, body, r = c.get(k)
                port = int(r.getheader("X-Backend-Port") or 0)
                self.rows.append((time.time(), k, port, s, len(body)))
                if s != 200 or len(body) != h.SLOW_FILE_BYTES:
                    self.errors.append("%s: %d, %d bytes" % (k, s, len(body)))
            except Exception as e:  # noqa: BLE001
                self.errors.append("%s: %r" % (k, e))
        c.close()

    def start(self):
        for t in self.ths:
            t.start()
        return self

    def join(self, timeout=120):
        self.stop.set()
        for t in self.ths:
            t.join(timeout)
        check(not any(t.is_alive() for t in self.ths), "client threads still running")


def slow_start(env):
    bs = [h.Backend(env, i).start() for i in range(4)]
    mf = env.path("members.txt")
    write_members(mf, [b.member for b in bs[:3]])
    ramp = 8.0
    lb = h.Balancer(env, ["--members", mf, "--slow-start", str(ramp)]).start()
    new = bs[3]
    # keys the new member owns once it joined: every request for them is its (or, while it warms
    # up, spills to their previous owner)
    cand = keys_for(400, prefix="/slow/")
    owners = h.expect([b.member for b in bs], cand)
    hot = [k for k, o in zip(cand, owners) if o == new.member][:40]
    check(len(hot) >= 20, "too few keys on the new member")
    write_members(mf, [b.member for b in bs])
    lb.hup()
    t_join = time.time()
    h.wait_until("the reload", lambda: lb.stats()["ring"]["members"] == 4, 10)
    scale0 = member(lb.stats(), new.member)["scale"]
    check(scale0 < 0.5, "the joining member starts at scale %.3f (slow start off?)" % scale0)
    cl = Holder(lb.port, hot, threads=24, rounds=400).start()
    scales = []
    end = t_join + ramp + 2.0
    while time.time() < end:
        m = member(lb.stats(), new.member)
        scales.append((time.time() - t_join, m["scale"], m["load"]))
        time.sleep(0.5)
    cl.join()
    check(not cl.errors, "%d requests failed: %s" % (len(cl.errors), cl.errors[:3]))
    # the new member's share of the requests for its own keys, in windows since the join
    win = ramp / 4
    shares = []
    for i in range(5):
        rows = [r for r in cl.rows if t_join + i * win <= r[0] < t_join + (i + 1) * win]
        if rows:
            shares.append((i, len(rows), sum(1 for r in rows if r[2] == new.port) / len(rows)))
    for i, n, sh in shares:
        log("window %d (%.0f-%.0f s after the join): %d requests, %.0f %% served by the new member" %
            (i, i * win, (i + 1) * win, n, 100 * sh))
    log("scale over time:", " ".join("%.1fs:%.2f/%d" % s for s in scales[::2]))
    check(len(shares) >= 4, "too few windows with requests: %s" % shares)
    check(scales[-1][1] == 1.0, "scale %.3f after the ramp" % scales[-1][1])
    first, last = shares[0][2], shares[-1][2]
    check(last >= first + 0.15 and last >= 2 * first,
          "the new member's share did not grow: %.2f -> %.2f" % (first, last))
    check(all(s[1] >= p[1] for p, s in zip(scales, scales[1:])), "the scale went down")
    lb.wait_idle(30)
    lb.stop()


# ------------------------------------------------------------------------------------------------
def drain(env):
    bs = [h.Backend(env, i).start() for i in range(2)]
    slow = h.Backend(env, 2, rate="50k").start()  # its /slow/ answers take ~6 s
    allm = [b.member for b in bs] + [slow.member]
    mf = env.path("members.txt")
    write_members(mf, allm)
    lb = h.Balancer(env, ["--members", mf, "--drain", "60", "--balance", "4"]).start()
    cand = keys_for(200, prefix="/slow/")
    own = h.expect(allm, cand)
    held_keys = [k for k, o in zip(cand, own) if o == slow.member][:3]
    check(len(held_keys) == 3, "too few keys on the slow backend")
    cl = Holder(lb.port, held_keys, threads=3, rounds=1).start()
    h.wait_until("3 requests held on the slow backend", lambda: member(lb.stats(), slow.member)["load"] == 3, 10)
    write_members(mf, [b.member for b in bs])
    lb.hup()
    t_hup = time.time()
    time.sleep(1.0)
    st = lb.stats()
    m = member(st, slow.member)
    check(m is not None, "the removed backend left the ring at once although 3 requests are held on it")
    check(m["draining"] and m["scale"] < 1 and m["load"] == 3,
          "the removed backend is not draining: %s" % m)
    check(st["ring"]["members"] == 3, "members %d while draining" % st["ring"]["members"])
    log("removed from the file, still in the ring while held: scale %.3f, load %d" % (m["scale"], m["load"]))
    gone = h.wait_until("the drained backend leaves", lambda: member(lb.stats(), slow.member) is None, 40)
    t_gone = time.time() - t_hup
    check(gone, "unreachable")
    cl.join()
    check(not cl.errors, "held requests failed: %s" % cl.errors)
    ends = sorted(r[0] - t_hup for r in cl.rows)
    check(len(ends) == 3 and all(r[2] == slow.port for r in cl.rows), "held requests: %s" % cl.rows)
    # it left when its load reached 0 (the last held request ended), long before --drain (60 s):
    # the bound of 50 s tells the two apart, it is not a speed target
    check(t_gone >= ends[-1] - 0.5 and t_gone < 50,
          "left at %.2f s, held requests ended at %s" % (t_gone, ["%.2f" % e for e in ends]))
    log("left the ring %.2f s after the reload; its held requests ended at %s s" %
        (t_gone, ", ".join("%.2f" % e for e in ends)))
    st = lb.wait_idle()
    check(st["ring"]["members"] == 2, "members %d" % st["ring"]["members"])
    lb.stop()

    # --drain shorter than the requests: it leaves after --drain; the requests still complete
    write_members(mf, allm)
    lb = h.Balancer(env, ["--members", mf, "--drain", "1.5", "--balance", "4"], name="lb-short").start()
    cl = Holder(lb.port, held_keys, threads=3, rounds=1).start()
    h.wait_until("3 requests held", lambda: member(lb.stats(), slow.member)["load"] == 3, 10)
    write_members(mf, [b.member for b in bs])
    lb.hup()
    t_hup = time.time()
    h.wait_until("the drained backend leaves", lambda: member(lb.stats(), slow.member) is None, 20)
    t_gone = time.time() - t_hup
    still = 3 - len(cl.rows)
    log("--drain 1.5: left the ring %.2f s after the reload with %d requests still held" % (t_gone, still))
    check(still > 0, "every held request ended before the member left (the test is too slow)")
    cl.join()
    check(not cl.errors and len(cl.rows) == 3, "held requests after the member left: %s %s" % (cl.errors, cl.rows))
    st = lb.wait_idle()
    check(st["ring"]["members"] == 2 and st["ring"]["leases"] == 0, "after: %s" % st["ring"])
    lb.stop()


# ------------------------------------------------------------------------------------------------
def wait_reload(lb, n, timeout=20):
    """The stats once reload n is done, read again after the counter moved (an answer lists the
    members before the counters)."""
    h.wait_until("reload %d applied" % n,
             lambda: (lambda b: b["reloads"] + b["reload_errors"] >= n)(lb.stats()["balancer"]), timeout)
    return lb.stats()


def digest(env):
    bs = [h.Backend(env, i).start() for i in range(4)]
    members = [b.member for b in bs]
    path = env.path("members")
    write_members(path, members)
    lb = h.Balancer(env, ["--members", path, "--fail-timeout", "30"]).start()
    d0 = h.digest_of(lb.stats())
    check(d0 == h.expect_digest(members), "digest %s, the oracle's %s" % (d0, h.expect_digest(members)))
    log("4 members: digest %s, the oracle's" % d0)

    # passive health: down in the ring, the placement (and so the digest) unchanged
    victim = bs[1]
    victim.stop()
    keys = keys_for(200)
    owners = h.expect(members, keys)
    c = h.Client(lb.port)
    for k, own in zip(keys, owners):
        if own == victim.member:
            s, _, _ = c.get(k)
            check(s == 200, "%s answered %d with its owner stopped" % (k, s))
            break
    # The worker that saw the failure marks the backend; the main thread puts it down in the ring
    # on its next turn (lb/health.c), which may come after this stats request is answered: wait
    # for it (a hang detector: the mark takes well under a second).
    h.wait_until("the stopped backend down in the ring",
                 lambda: (lambda st: member(st, victim.member)["ring_down"] and st["ring"]["down"] == 1)(lb.stats()),
                 10)
    st = lb.stats()
    check(h.digest_of(st) == d0, "passive health changed the digest: %s -> %s" % (d0, h.digest_of(st)))
    log("%s down in the ring (passive health): digest still %s" % (victim.member, d0))

    # SIGHUP: a member removed, then a weight changed, then the first file again
    steps = [("without %s" % bs[3].member, members[:3]),
             ("%s at weight 3" % bs[0].member, [members[0] + "=3"] + members[1:3]),
             ("the first file again", members)]
    seen = [d0]
    for i, (what, ms) in enumerate(steps, 1):
        write_members(path, ms)
        lb.hup()
        st = wait_reload(lb, i)
        check(st["balancer"]["reload_errors"] == 0, "reload %d failed" % i)
        d = h.digest_of(st)
        want = h.expect_digest(ms)
        check(d == want, "after the reload %s: digest %s, the oracle's %s" % (what, d, want))
        log("SIGHUP, %s: digest %s" % (what, d))
        seen.append(d)
    check(len(set(seen[:3])) == 3, "a placement change kept the digest: %s" % seen)
    check(seen[3] == d0, "the first membership again, another digest: %s, %s" % (seen[3], d0))
    victim.start()
    c.close()
    lb.wait_idle()
    lb.stop()


def outcome_of(r):
    vals = r.msg.get_all("X-Chring-Outcome") or []
    return vals[0] if len(vals) == 1 else (None if not vals else vals)


def outcome(env):
    bs = [h.Backend(env, i).start() for i in range(3)]
    members = [b.member for b in bs]
    pm = {b.port: b.member for b in bs}
    keys = keys_for(150)
    owners = h.expect(members, keys)

    # off by default
    args = []
    for m in members:
        args += ["--backend", m]
    plain = h.Balancer(env, args, name="lb-plain").start()
    c = h.Client(plain.port)
    for k in keys[:30]:
        s, _, r = c.get(k)
        check(s == 200 and outcome_of(r) is None, "without --outcome-header %s got %r" % (k, outcome_of(r)))
    c.close()
    st = plain.wait_idle()
    o = st["balancer"]["outcomes"]
    check(o == {"owner": 30, "spilled": 0, "saturated": 0, "owner_down": 0}, "outcomes without load: %s" % o)
    plain.stop()
    log("off by default: no X-Chring-Outcome; stats count 30 leases on their owner")

    lb = h.Balancer(env, args + ["--outcome-header", "--fail-timeout", "30"]).start()
    c = h.Client(lb.port)
    for k, own in zip(keys, owners):
        s, body, r = c.get(k)
        check(s == 200 and pm.get(h.port_of(body)) == own and outcome_of(r) == "owner",
              "%s without load: %d from %s, X-Chring-Outcome %r" % (k, s, pm.get(h.port_of(body)), outcome_of(r)))
    log("%d keys without load: each on its owner, X-Chring-Outcome: owner" % len(keys))
    victim = bs[2]
    victim.stop()
    got = {"owner": 0, "spilled": 0, "owner_down": 0}
    for k, own in zip(keys, owners):
        s, body, r = c.get(k)
        # a key of the stopped backend: its retry's lease is a spill (the first attempt found the
        # backend failing); once passive health has it down, the key goes straight to the next
        # member up, which is not a spill for load: owner_down
        want = ("spilled", "owner_down") if own == victim.member else ("owner",)
        check(s == 200 and outcome_of(r) in want,
              "%s (owner %s, stopped %s): %d, X-Chring-Outcome %r, want %s" %
              (k, own, victim.member, s, outcome_of(r), want))
        got[outcome_of(r)] += 1
    st = lb.wait_idle()
    o, b = st["balancer"]["outcomes"], st["balancer"]
    log("with %s stopped: %d keys spilled, %d on their owner; stats %s, retries %d" %
        (victim.member, got["spilled"], got["owner"], o, b["retries"]))
    check(got["spilled"] > 0 and got["owner_down"] > 0,
          "keys of the stopped backend among %d: %d spilled (retries), %d owner_down (down)" %
          (len(keys), got["spilled"], got["owner_down"]))
    # a request whose attempt on the stopped backend failed took a lease on its owner first,
    # then its retry's (spilled); the others one lease each
    check(o["owner"] == len(keys) + got["owner"] + b["retries"] and o["spilled"] == got["spilled"] and
          o["owner_down"] == got["owner_down"] and o["saturated"] == 0 and b["retries"] >= 1,
          "outcomes %s: want owner %d, spilled %d (%d retries)" %
          (o, len(keys) + got["owner"] + b["retries"], got["spilled"], b["retries"]))
    c.close()
    lb.stop()

    # one the backend sends is not passed on as ours
    rb = h.RawBackend(lambda path: b"HTTP/1.1 200 OK\r\nX-Chring-Outcome: saturated\r\n"
                      b"X-Chring-Outcome: forged\r\nContent-Length: 2\r\n\r\nok")
    try:
        lb = h.Balancer(env, ["--backend", rb.member, "--outcome-header"], name="lb-raw").start()
        c = h.Client(lb.port)
        s, body, r = c.get("/forged")
        check(s == 200 and body == b"ok" and outcome_of(r) == "owner",
              "a backend's own X-Chring-Outcome: %d %r, the client saw %r" % (s, body, r.msg.get_all("X-Chring-Outcome")))
        c.close()
        lb.wait_idle()
        lb.stop()
    finally:
        rb.close()
    log("a backend's own X-Chring-Outcome fields replaced by the one of chring-lb")


TESTS = {"passive": passive, "slow-start": slow_start, "drain": drain, "digest": digest,
         "outcome": outcome}


if __name__ == "__main__":
    sys.exit(h.main(TESTS, (h.CHRING_LB, h.CHRING_LB_EXPECT, h.NGINX)))
