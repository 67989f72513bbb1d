#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_api (fuzz/corpus/api/): small meaningful operation sequences.

The byte format is described in docs/fuzz.md.  Run from anywhere: python3 fuzz/gen_api_seeds.py
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "api")

# Header: profile (0 hash64, 1 murmur32, 2 fnv32, 3 fnv16, 4 custom, 5 xxh3, 6 nginx, 7 ketama), vnodes - 1, balance index,
# custom width/garbage, custom buckets - 1.
def hdr(profile, vnodes, balance=0, cbits=0, garbage=0, buckets=4):
    return bytes([profile, vnodes - 1, balance, cbits | (garbage << 2), buckets - 1])

A, B, C, N1, N2, N3, HI, ENG, XH, ONEA, AB, A01, LONG255, LONG256, EMPTY = range(15)

def lit(name, long=False):  # a literal name (joins the pool)
    b = name.encode("latin-1")
    return bytes([0xc1 if long else 0xc0, len(b)]) + b

def w(k):  # weight k in 1..6
    return bytes([k - 1])

W0, W7, W16, WBIG, W2_31, WMAX, WWRAP0, WWRAPSMALL = (bytes([200 + i]) for i in range(8))

def add(name, weight=w(1)): return bytes([0]) + bytes([name]) + weight
def remove(name): return bytes([2, name])
def set_weight(name, weight): return bytes([3, name]) + weight
def update(changes):  # (name, weight) with weight bytes; weight 0 removes
    out = bytes([4, len(changes)])
    for n, wt in changes:
        out += bytes([n]) + wt + (b"" if wt == W0 else b"\x01")
    return out
def sync(members):
    out = bytes([5, len(members)])
    for n, wt in members:
        out += bytes([n]) + wt
    return out
def key(i): return bytes([i])  # "key<i>" for i < 0xc0
def lookup(k, held=None):
    t = 0 if held is None else (3 | (held << 2))
    return bytes([6, t]) + k + b"\x01"
def lookup_n(k, n): return bytes([7, 0]) + k + bytes([n])
def bounded(k, balance, loads): return bytes([8, 0]) + k + bytes([balance]) + bytes(loads)
def acquire(slot, k): return bytes([9, slot]) + k
def release(slot): return bytes([11, slot])
def acquire_member(slot, sel, held=None):
    t = 0 if held is None else (3 | (held << 2))
    return bytes([0x1a, slot, t, sel])
def release_twice(slot): return bytes([11, slot | 0xc0])
def hold(slot): return bytes([0x0c, slot])
def put(slot): return bytes([0x1c, slot])
def moved(held_a, held_b=None):
    t = 3 | (held_a << 2)
    s = 0 if held_b is None else (0x80 | held_b)
    return bytes([13, t, s | 0x40])
def oom(k): return bytes([0x1e, k - 1])
# udata modes (bits 4-5 of a writer's operation byte): 0 a fresh object, 1 NULL for an existing
# member, 2 the existing member's own udata, 3 (batches) the three in turn.
def add_u(name, mode, weight=w(1)): return bytes([mode << 4]) + bytes([name]) + weight
def update_u(changes, mode):
    return bytes([4 | mode << 4]) + update(changes)[1:]
def sync_u(members, mode):
    return bytes([5 | mode << 4]) + sync(members)[1:]
# acquire_skip: slot, key, header (nskip = low 5 bits % 5; bit 7 also tries a NULL skip, bit 6
# bad arguments, bit 5 a NULL skip when nskip is 0), then one selector per skipped member: bit 7 the
# member of that lease slot, bit 6 the key's replica (index % replicas), else member (% n) by name.
def acquire_skip(slot, k, sels, flags=0):
    return bytes([0x19, slot]) + k + bytes([len(sels) | flags]) + bytes(sels)
def release_other(slot): return bytes([0x1b, slot])  # through the other ring, and vice versa
def release_copy(slot): return bytes([0x2b, slot])   # a copy of a lease released already
def put_unheld(): return bytes([0x2c])               # put of the current snapshot, not held
def quiesce(): return bytes([0x8e])
def bad(case): return bytes([0x0e, case])
def capacity(): return bytes([0x2e, 3 << 2, 8 << 2, 1 << 2, 3 << 2, 0])
# Health (operation 15): a selector (bit 0: a ramp, else set_down; bit 1: down; bit 2: pass the
# selector itself as the non-zero down flag; bit 6: the NULL forms first), the name, then for a
# ramp the indices of from and to in fuzz_api.c's scales[] (0: 0, 1: 1, 2: 0.5, 3: 0.25, 4: 1/3,
# 5: 0.1, 6: 0.999, 7: 1e-9, 8: -0.0, 9: -0.1, 10: 1.5, 11: NaN, 12: inf, 13: -1) and a byte t
# (bit 0: from = to over 1 + t ms, or UINT32_MAX ms with bit 1 as well; else ms 0).
def down(name, flag=1, sel=0): return bytes([0x0f, sel | (2 if flag else 0), name])
def up(name): return down(name, 0)
def ramp(name, frm, to, t=0): return bytes([0x0f, 1, name, frm, to, t])
def health_null(): return bytes([0x0f, 0x40, A])
def report(sel, v, held=None):  # chring_report_load on member sel (bit 0x40: NULL forms too)
    target = 0 if held is None else 3 | (held << 2)
    return bytes([0x4f, target, sel, v])
# acquire_try (operation 10, bit 5): slot, target (current or held snapshot), selector (bit 7:
# the member of that lease slot; bit 6: the NULL forms first; else member % n by name).
def acquire_try(slot, sel, held=None):
    t = 0 if held is None else (3 | (held << 2))
    return bytes([0x2a, slot, t, sel])
# The digest across rings (operation 13, bit 4): the members added to a second ring in another
# order (selector & 3: 0 reversed, 1 rotated by 1 + (selector >> 2), 2 by name, 3 by name
# reversed); bit 5 of the selector also stops the diff between them early.
def digest(sel): return bytes([0x1d, sel])
# moved with its diff stopped by the callback: selector bit 5, at arc 1 + ((sel >> 2) & 3),
# returning -7 with bit 1, else 3; bit 7 compares with held snapshot sel % 6.
def moved_stop(held_a, sel): return bytes([13, 3 | (held_a << 2), sel])

seeds = {
    "basic-hash64": hdr(0, 4) + add(A) + add(B) + add(C, w(2)) + lookup(key(1)) + lookup_n(key(2), 3)
        + hold(0) + remove(B) + moved(0) + lookup(key(1), held=0) + put(0) + set_weight(C, w(1))
        + sync([(A, w(1)), (N1, w(3))]) + lookup(key(7)),
    "leases-murmur32": hdr(1, 2, balance=0) + add(A) + add(B) + add(C)
        + b"".join(acquire(i, key(1)) for i in range(6)) + release(2) + release_twice(3)
        + remove(A) + acquire(7, key(1)) + release(0) + release(1) + capacity(),
    "bounded-fnv32": hdr(2, 3) + add(N1) + add(N2) + add(N3, w(2))
        + bounded(key(5), 0, [3, 0, 1]) + bounded(key(9), 1, [7, 7, 0]) + bounded(key(3), 5, [2, 2, 2]),
    "fnv16-labels": hdr(3, 2) + add(A, w(2)) + add(ONEA, w(2)) + add(AB) + lookup(key(4))
        + set_weight(A, w(4)) + remove(ONEA) + add(ONEA) + hold(1) + set_weight(A, w(1)) + moved(1),
    # "1-a" (weight 1, V = 1) has the label of "a"'s point 1: it is left without points, so the
    # bound counts a member that can never be reached and acquires saturate.
    "fnv16-pointless": hdr(3, 1, balance=1) + add(A, w(2)) + add(ONEA, w(1)) + lookup_n(key(1), 5)
        + b"".join(acquire(i, key(i)) for i in range(6)) + bounded(key(3), 1, [9, 0])
        + remove(A) + lookup(key(2)) + add(A, w(2)),
    # A removed member retires when its last reference goes: after a grace period, on the release
    # of its last lease, on the put of the last held snapshot listing it.
    "retire-paths": hdr(0, 2) + add(A) + add(B) + add(C) + acquire(0, key(1)) + acquire(1, key(2))
        + hold(0) + remove(A) + remove(B) + quiesce() + release(0) + quiesce() + put(0) + quiesce()
        + release(1) + remove(C) + quiesce() + add(A) + quiesce(),
    # Writers inside a read section (bit 7 of the operation byte): remove, update, sync, add.
    "writers-in-read-section": hdr(1, 3) + add(A) + add(B) + add(C) + hold(0)
        + bytes([0x82, B]) + bytes([0x84, 2, N1, 0, 1, A, 200]) + bytes([0x85, 1, C, 2])
        + bytes([0x80, A, 0]) + acquire(0, key(1)) + bytes([0x82, A]) + release(0) + moved(0),
    "xxh3": hdr(5, 8) + add(A) + add(N1, w(3)) + lookup(key(9)) + acquire(0, key(9))
        + hold(1) + set_weight(N1, w(1)) + moved(1),
    "nginx": hdr(6, 1) + b"\x00" + lit("10.0.0.1:80") + w(1) + b"\x00" + lit("unix:/run/a.sock")
        + w(2) + add(N1) + lookup(key(3)) + lookup_n(key(3), 3) + acquire(0, key(3)) + hold(0)
        + set_weight(N1, w(3)) + moved(0) + remove(N1) + WWRAP0 + add(N2, W7),
    "ketama": hdr(7, 1) + b"\x00" + lit("10.0.1.1:11211") + w(1) + add(N1) + add(N2, W2_31)
        + lookup(key(3)) + hold(0) + set_weight(N2, w(1)) + moved(0) + acquire(0, key(3))
        + add(N3) + bounded(key(4), 0, [1, 0, 2, 0]) + remove(N1) + moved(0),
    "bad-configurations": hdr(0, 4, buckets=1)
        + b"".join(bad(15 | (k << 4)) + bytes([k]) for k in range(16))
        + b"".join(bad(15 | (4 << 4)) + bytes([k]) for k in range(8)),
    # Leases on chosen members: live, removed but listed by a held snapshot, not in the snapshot.
    "acquire-member": hdr(0, 3) + add(A) + add(B) + add(C) + acquire_member(0, 1) + hold(0)
        + remove(B) + acquire_member(1, 1, held=0) + acquire_member(2, 0x81)
        + acquire_member(3, 0x81, held=0) + acquire(4, key(1)) + release(1) + put(0)
        + quiesce() + release(3) + quiesce(),
    "custom16-collisions": hdr(4, 3, cbits=2, garbage=1, buckets=3) + add(A) + add(B) + add(C)
        + add(XH) + b"".join(acquire(i, key(i)) for i in range(10)) + remove(B) + hold(2)
        + b"".join(release(i) for i in range(5)) + moved(2) + put(2),
    "custom64-one-bucket": hdr(4, 2, cbits=0, buckets=1) + add(B) + add(A) + lookup(key(0))
        + lookup_n(key(0), 2) + acquire(0, key(0)) + acquire(1, key(0)) + acquire(2, key(0)),
    "errors-weights": hdr(0, 4) + add(A, WBIG) + add(A, WWRAP0) + add(A, WWRAPSMALL) + add(A, W0)
        + add(EMPTY) + add(LONG256) + add(LONG255) + set_weight(A, w(2)) + remove(B)
        + update([(A, W0), (A, w(1))]) + sync([(B, W0)]) + update([(C, w(1)), (B, W0)]),
    "oom": hdr(1, 3) + oom(1) + add(A) + oom(2) + add(B) + add(C) + oom(1) + remove(C)
        + oom(3) + update([(N1, w(1)), (A, W0)]) + oom(2) + sync([(N2, w(2))]) + lookup(key(1)),
    "batches": hdr(2, 1) + update([(A, w(1)), (B, w(2)), (C, w(3))]) + sync([(C, w(1)), (N1, w(1))])
        + update([(N1, W0), (HI, w(1))]) + sync([]) + update([]) + add(ENG),
    # The udata rule: a udata a successful call does not keep comes back once before it returns
    # (an add of an existing member, changes of an update or sync naming existing members), NULL
    # and the member's own udata never; a failed call (bad batch, allocation failure) none.
    "udata-rule": hdr(0, 2) + add(A) + add(B) + add(A) + add(A, w(2)) + add_u(A, 1) + add_u(B, 2, w(3))
        + update_u([(A, w(1)), (B, W0), (C, w(2))], 3) + update_u([(A, w(2)), (C, w(1))], 0)
        + sync_u([(A, w(1)), (C, w(1)), (N1, w(1))], 0) + sync_u([(A, w(2)), (C, w(1)), (N1, w(2))], 3)
        + update([(A, w(1)), (A, w(2))]) + oom(1) + add(A, w(3)) + oom(2) + update([(C, w(3)), (N2, w(1))])
        + oom(1) + sync([(A, w(1))]) + b"".join(oom(k) + add(A, w(1 + k % 3)) for k in range(2, 9))
        + b"".join(oom(k) + sync_u([(A, w(1 + k % 2)), (C, w(1))], 0) for k in range(2, 9))
        + quiesce() + remove(A) + quiesce(),
    # Retries that keep the bound: skip the owner, two replicas, every member (-ENOENT), a removed
    # member (matches nothing), and skip until every member left is full (saturation).
    "acquire-skip": hdr(0, 3) + add(A) + add(B) + add(C) + acquire_skip(0, key(1), [0x40])
        + acquire_skip(1, key(1), [0x40, 0x41]) + acquire_skip(2, key(1), [0, 1, 2])
        + acquire_skip(3, key(2), [0x80], flags=0xc0) + acquire_skip(4, key(3), [], flags=0x20)
        + b"".join(acquire(5 + i, key(4)) for i in range(4)) + acquire_skip(9, key(4), [0x40, 0x41])
        + hold(0) + remove(A) + acquire_skip(10, key(5), [0x80, 0x81, 0x40]) + put(0) + quiesce()
        + remove(B) + acquire_skip(11, key(6), [0x40]) + release(0) + quiesce(),
    "acquire-skip-fnv16-pointless": hdr(3, 1, balance=1) + add(A, w(2)) + add(ONEA, w(1)) + add(B)
        + acquire_skip(0, key(1), [0x40]) + acquire_skip(1, key(2), [0x40, 0x41])
        + b"".join(acquire_skip(2 + i, key(i), [0x40]) for i in range(6)),
    # Misuse guards: releases through the wrong ring, a copy of a released lease, a put of the
    # published snapshot that nothing holds (also after a hold and its put).
    "misuse-guards": hdr(1, 2) + add(A) + add(B) + acquire_member(0, 0) + acquire_member(1, 1)
        + release_other(0) + release_other(5) + release(0) + release_copy(0) + release_copy(1)
        + put_unheld() + hold(0) + put_unheld() + put(0) + put_unheld() + remove(A) + put_unheld()
        + release(1) + hold(1) + remove(B) + release_copy(1) + put(1) + quiesce() + add(A) + put_unheld(),
    # Down and up: lookups, replicas, bounded and acquires walk past a member down, a held snapshot
    # sees its members' state, every member down answers as an empty ring, acquire_member still
    # works on a member down, weights change under a member down (W), a name removed and added
    # again comes back up; non-members and bad names; a flip inside a read section.
    "health-down": hdr(0, 3) + add(A) + add(B) + add(C, w(2)) + lookup(key(1)) + down(A)
        + lookup(key(1)) + lookup_n(key(1), 3) + bounded(key(1), 0, [3, 0, 1])
        + b"".join(acquire(i, key(i)) for i in range(4)) + hold(0) + down(B, sel=4)
        + lookup(key(2), held=0) + down(C) + lookup(key(3)) + acquire(5, key(3))
        + acquire_skip(6, key(3), []) + acquire_member(7, 0) + up(B) + set_weight(C, w(3))
        + acquire(8, key(5)) + up(C) + remove(A) + add(A) + lookup(key(1)) + down(N1) + down(EMPTY)
        + down(LONG256) + health_null() + bytes([0x8f, 2, B]) + sync([(B, w(1)), (C, w(1))])
        + acquire(9, key(6)) + put(0) + quiesce() + up(B),
    # Constant ramps: scale 0.5 and 0.25 bound admission, scale 0 admits nothing (its keys spill),
    # every member at scale 0 or full falls back on the least loaded; from = to over a time;
    # refused scales (outside [0, 1], NaN, inf); back to 1; a ramp on a member down.
    "health-ramp": hdr(1, 2, balance=1) + add(A) + add(B) + add(C) + ramp(A, 0, 2)
        + b"".join(acquire(i, key(1)) for i in range(4)) + ramp(B, 1, 0) + ramp(C, 5, 3, 1)
        + b"".join(acquire(4 + i, key(i)) for i in range(4)) + ramp(A, 0, 0) + ramp(C, 0, 0)
        + b"".join(acquire(8 + i, key(i)) for i in range(3)) + acquire_skip(12, key(2), [0x40])
        + ramp(A, 10, 1) + ramp(A, 0, 11) + ramp(A, 12, 12, 3) + ramp(A, 9, 1) + ramp(N2, 0, 1)
        + down(B) + acquire(13, key(3)) + ramp(B, 7, 7, 1) + up(B) + acquire(14, key(4))
        + ramp(A, 4, 6) + ramp(C, 8, 1) + b"".join(acquire(15 + i, key(i)) for i in range(3))
        + b"".join(release(i) for i in range(8)) + ramp(B, 1, 1),
    # chring_acquire_try: admitted below the capacity (c = 1: the first lease fills a member of
    # three), -EBUSY when full, -ENOENT for a member down, at scale 0, removed or not in the
    # snapshot; on a held snapshot; the NULL forms; a weight and a ramp in E.
    "acquire-try": hdr(0, 3, balance=1) + add(A) + add(B) + add(C) + acquire_try(0, 0)
        + acquire_try(1, 0) + acquire_try(2, 1) + acquire_try(3, 0x40 | 2) + down(C)
        + acquire_try(4, 2) + up(C) + ramp(B, 0, 0) + acquire_try(5, 1) + ramp(B, 2, 2)
        + set_weight(A, w(3)) + acquire_try(6, 0) + acquire_try(7, 0) + hold(0) + remove(A)
        + acquire_try(8, 0, held=0) + acquire_try(9, 0x80, held=0) + acquire_try(10, 0x80)
        + b"".join(release(i) for i in range(11)) + acquire_try(11, 0, held=0) + put(0)
        + quiesce(),
    # The digest: the same members added in four other orders (fnv16: a taken position goes to
    # the earlier joiner, so some orders place differently); unchanged by down, ramps and leases;
    # held snapshots against the current one; diffs between the rings.
    "digest-orders-fnv16": hdr(3, 2) + add(A, w(2)) + add(ONEA, w(2)) + add(AB) + add(B)
        + digest(0) + digest(1) + digest(2) + digest(3) + digest(0x25) + hold(0) + down(A)
        + ramp(B, 2, 2) + acquire(0, key(1)) + up(A) + set_weight(A, w(1)) + digest(0)
        + moved(0) + set_weight(A, w(2)) + moved(0) + remove(ONEA) + digest(1),
    "digest-orders-hash64": hdr(0, 4) + digest(0) + add(A) + add(B, w(2)) + add(N1) + add(HI)
        + digest(0) + digest(5) + digest(2) + digest(3) + hold(1) + down(B) + acquire(0, key(3))
        + digest(0) + up(B) + remove(HI) + add(HI) + moved(1) + set_weight(B, w(3)) + digest(1),
    # Diffs: against an empty ring (one arc, everything moved), after a join and a leave, a
    # weight change, both ways, and stopped by the callback at arcs 1 and 2.
    "diff-murmur32": hdr(1, 3) + hold(1) + add(A) + add(B) + add(C) + moved(1) + hold(0)
        + add(N1) + remove(B) + moved(0) + moved_stop(0, 0x20) + moved_stop(0, 0x26)
        + set_weight(C, w(4)) + moved(0) + moved_stop(1, 0x80 | 0x2a | 1) + sync([]) + moved(0),
    # Reported load: reports on members of the current snapshot (sel picks by name order), a
    # huge one, on a member of a held snapshot that left (-ENOENT), on a member down (ignored, and
    # it drops the report), NULL forms; acquires, retries and acquire_try count them.
    "reports-hash64": hdr(0, 4) + add(A) + add(B) + add(C) + add(N1)
        + report(0, 30) + acquire(0, key(1)) + acquire(1, key(1)) + acquire(2, key(2))
        + report(1, 0xc5) + acquire(3, key(3)) + acquire_try(4, 1) + acquire_try(5, 0)
        + acquire_skip(6, key(1), [0]) + hold(0) + remove(B) + report(1, 7, held=0)
        + report(0x42, 9) + down(A) + report(0, 12) + acquire(7, key(4)) + up(A)
        + acquire(8, key(4)) + b"".join(release(i) for i in range(9)) + put(0),
    "reports-ignored-ttl0": hdr(0, 4, buckets=0x81) + add(A) + add(B) + report(0, 40)
        + acquire(0, key(1)) + acquire_try(1, 0) + release(0) + release(1),
    # A flap: a member removed while its leases are out and added again counts them (twice over:
    # a second flap keeps the first one's leases counted); acquire, acquire_try, reports.
    "flap-hash64": hdr(0, 4) + add(A) + add(B) + add(C)
        + acquire_member(0, 0) + acquire_member(1, 0) + acquire(2, key(1)) + remove(A) + add(A)
        + acquire_try(3, 0) + acquire(4, key(1)) + acquire_member(5, 0) + remove(A) + add(A)
        + report(0, 9) + acquire_try(6, 0) + acquire(7, key(2)) + release(0) + release(5)
        + acquire_try(8, 0) + b"".join(release(i) for i in range(9)),
    "literal-names": hdr(0, 2) + b"\x00" + lit("node with spaces") + w(1)
        + b"\x00" + lit("x" * 5, long=True) + w(1)
        + lookup(key(2)) + bad(0) + bad(3) + bad(13) + bad(14),
}

os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, "seed-" + name), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} seeds to {OUT}")
