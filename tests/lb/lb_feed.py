#!/usr/bin/env python3
"""The etcd feed against a hostile or huge "etcd": tests/lb/fake_etcd.py on 127.0.0.1, through
the real chring-lb (docs/lb.md, "The etcd feed").  Each test is bounded in time and stops what
it started.

    lb_feed.py apply    100,000 members from one range read and applied in under 3 s of CPU
                        (the log's own timing); then one change through the watch applied within 1 s as that
                        change alone ("1 added"), several events of one key in a batch: the
                        last counts
    lb_feed.py big-batch  a watch message deleting 20,000 members (read off the main thread) and a
                        put right behind it in the same chunk: both applied, in order
    lb_feed.py resolve  names that do not resolve are resolved once, off the main thread:
                        batches that name them again are applied at once and resolve nothing
    lb_feed.py bounds   a range answer without end, a watch message without end, a watch
                        message whose JSON would cost jansson 20 times its size: each dropped
                        with a clear error, memory bounded; weights over --etcd-max-points
                        refused, the rest applied
    lb_feed.py cancel   an "etcd" that cancels every watch: ranges are retried with a backoff
                        (a handful in 4 s, not thousands)
    lb_feed.py drip     a range answer dripped a byte at a time fails at --etcd-range-timeout
                        and is retried
    lb_feed.py publish  4 million points (4 keys of weight 10,000 at --vnodes 100): the range's
                        change and a re-weighting are published off the main thread, the
                        summary answered while they are ("publishing": true, the old ring); the
                        summary's digest is null or the oracle's, and the oracle's once computed;
                        RSS at rest within 80 bytes per point + 64 MB, its peak 192 + 64 MB
    lb_feed.py quote    keys with newlines, terminal escapes and invalid UTF-8 are logged
                        quoted: no forged line, no escape byte in the log
"""
import os
import re
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402
from fake_etcd import FakeEtcd, chunk  # noqa: E402
from lbharness import check, log  # noqa: E402


def wait_for(what, fn, timeout):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise h.TestFailure("not within %.0f s: %s" % (timeout, what))


def etcd_stats(lb):
    return lb.stats().get("etcd", {})


# chring-lb's memory against its ring's points, a loose check of this feed's large changes: at
# rest the ring (about 21 bytes a point in the library's own count, docs/bench.md §11), the one
# spare block --spare-blocks keeps by default and the process; the peak adds the replaced
# snapshot and the spares a build makes ready.  The bound docs/lb.md states ("Memory at 16
# million points") is checked by lb-input-memory-bound (lb_input.py).  MARGIN for the process
# itself (threads, buffers, libevent).
REST_BYTES_PER_POINT = 80
PEAK_BYTES_PER_POINT = 192
MARGIN = 64 << 20


def balancer(env, srv, extra=(), threads=1):
    return h.Balancer(env, ["--etcd", srv.url] + list(extra), threads=threads).start()


def test_apply(env):
    srv = FakeEtcd()
    try:
        n = 100000
        srv.members = {"10.%d.%d.%d:80" % (i >> 16 & 255, i >> 8 & 255, i & 255): 1 for i in range(n)}
        lb = balancer(env, srv, ["--vnodes", "1"])
        line = wait_for("the range applied", lambda: re.search(
            r"etcd: range of (\d+) bytes: answered in (\d+) ms, read in (\d+) ms \((\d+) ms of CPU off the main thread\), applied in (\d+) ms \((\d+) ms of CPU\)",
            lb.output()), 60)
        read_ms, apply_ms = int(line.group(3)), int(line.group(5))
        log("range of %d members: %s bytes, read in %d ms (%s of CPU), applied in %d ms (%s of CPU)" % (n, line.group(1), read_ms, line.group(4), apply_ms, line.group(6)))
        cpu_ms = int(line.group(4)) + int(line.group(6))
        # CPU time, which the other programs of a shared machine (or a sanitizer build's
        # slowness, about 3x) inflate far less than the wall clock: 0.5 to 0.8 s in plain builds
        check(cpu_ms < 3000, "100k members took %d ms of CPU to read and apply" % cpu_ms)
        check(read_ms + apply_ms < 20000, "100k members took %d ms to read and apply" % (read_ms + apply_ms))
        st = wait_for("the watch", lambda: etcd_stats(lb).get("state") == "watching" and lb.stats(), 10)
        check(st["ring"]["members"] == n, "ring has %d members" % st["ring"]["members"])
        # one change: applied alone, quickly
        t0 = time.time()
        srv.send([srv.put_event("10.250.0.1:80", 3)])
        wait_for("one change applied", lambda: ("etcd watch batch at revision %d: 1 added, 0 removed"
                                                % srv.revision) in lb.output(), 5)
        dt = time.time() - t0
        log("one change applied in %.0f ms (stats polling included)" % (dt * 1000))
        check(dt < 1.0, "one change took %.2f s at 100k members" % dt)
        # several events of one key in one batch: the last counts; a delete of a member
        srv.send([srv.put_event("10.250.0.2:80", 2), srv.put_event("10.250.0.2:80", 7),
                  srv.delete_event("10.0.0.5:80")])
        wait_for("the batch", lambda: ("etcd watch batch at revision %d: 1 added, 1 removed"
                                       % srv.revision) in lb.output(), 5)
        st = lb.stats()
        w = {m["name"]: m["weight"] for m in st["members"] if m["name"].startswith("10.250.0.")}
        check(w == {"10.250.0.1:80": 3, "10.250.0.2:80": 7}, "weights %r" % w)
        check(st["ring"]["members"] == n + 1, "ring has %d members" % st["ring"]["members"])
        lb.stop()
    finally:
        srv.close()


def test_big_batch(env):
    srv = FakeEtcd()
    try:
        n = 20000
        names = ["10.1.%d.%d:80" % (i >> 8, i & 255) for i in range(n)]
        srv.members = {m: 1 for m in names}
        lb = balancer(env, srv, ["--vnodes", "1"])
        wait_for("the watch", lambda: etcd_stats(lb).get("state") == "watching", 30)
        check(lb.stats()["ring"]["members"] == n, "range not applied")
        big = srv.watch_line([srv.delete_event(m) for m in names])
        small = srv.watch_line([srv.put_event("10.2.0.1:80", 4)])
        log("a watch message of %d bytes, then one of %d, in one chunk" % (len(big), len(small)))
        srv.send(raw=big + small)
        wait_for("both applied", lambda: ("etcd watch batch at revision %d: 1 added" % srv.revision)
                 in lb.output(), 20)
        out = lb.output()
        i = out.index("etcd watch batch at revision %d: 0 added, %d removed" % (srv.revision - 1, n))
        check(i < out.index("etcd watch batch at revision %d: 1 added" % srv.revision), "out of order")
        st = lb.stats()
        check([m["name"] for m in st["members"]] == ["10.2.0.1:80"] and st["members"][0]["weight"] == 4,
              "ring %r" % [m["name"] for m in st["members"]])
        lb.stop()
    finally:
        srv.close()


def test_resolve(env):
    srv = FakeEtcd()
    try:
        bad = ["nohost-%d.invalid:80" % i for i in range(3)]
        srv.members = {"127.0.0.1:9": 1}
        srv.members.update({b: 1 for b in bad})
        lb = balancer(env, srv)
        wait_for("the names tried", lambda: etcd_stats(lb).get("unresolved") == 3, 30)
        st = etcd_stats(lb)
        check(st["resolves"] == 3, "resolves %d" % st["resolves"])
        for i in range(5):
            t0 = time.time()
            srv.send([srv.put_event(b, 2 + i) for b in bad] + [srv.put_event("127.0.0.%d:9" % (i + 2), 1)])
            wait_for("batch %d" % i, lambda: lb.stats()["ring"]["members"] == 2 + i, 5)
            dt = time.time() - t0
            check(dt < 1.0, "a batch naming unresolvable names took %.2f s" % dt)
        st = etcd_stats(lb)
        check(st["resolves"] == 3, "the names were resolved again: %d resolutions" % st["resolves"])
        check(st["unresolved"] == 3 and st["resolving"] == 0, "etcd stats %r" % st)
        out = lb.output()
        check("nohost-0.invalid" in out and "tried again in" in out, "no log line for the name")
        lb.stop()
    finally:
        srv.close()


def endless(c, piece, total, sent):
    """Writes chunks of piece until total bytes or the peer is gone; sent[0] counts."""
    try:
        while sent[0] < total:
            chunk(c, piece)
            sent[0] += len(piece)
    except OSError:
        pass


def test_bounds(env):
    srv = FakeEtcd()
    try:
        cap = 4 << 20
        sent = [0]
        piece = b'{"key":"L2NocmluZy9wb29sL3g=","value":"MQ=="},' * 20000  # ~1 MB
        def range_hook(c):
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
            chunk(c, b'{"header":{"revision":"5"},"kvs":[')
            endless(c, piece, 200 << 20, sent)
        srv.range_hook = range_hook
        lb = balancer(env, srv, ["--etcd-max-answer", str(cap), "--vnodes", "16",
                                 "--etcd-max-points", "1000000"])
        wait_for("the range refused", lambda: "range: an answer above --etcd-max-answer" in lb.output(), 20)
        time.sleep(0.5)
        log("range: %d bytes sent before the balancer dropped the connection" % sent[0])
        check(sent[0] < 64 << 20, "the balancer read %d bytes of an endless range" % sent[0])
        # a watch message without end, then one that would cost jansson far more than its size
        srv.range_hook = None
        srv.members = {"127.0.0.1:%d" % (9000 + i): 10000 for i in range(40)}
        wsent = [0]
        mode = ["endless"]
        def watch_hook(c):
            chunk(c, srv.watch_line(created=True))
            if mode[0] == "endless":
                endless(c, b"x" * (1 << 20), 200 << 20, wsent)
            else:
                chunk(c, b'{"result":{"events":[' + b"[]," * (cap // 3 - 64) + b'[]]}}\n')
                time.sleep(5)
        srv.watch_hook = watch_hook
        wait_for("the watch message refused", lambda: "watch: a message above --etcd-max-answer" in lb.output(), 20)
        log("watch: %d bytes sent before the balancer dropped the connection" % wsent[0])
        check(wsent[0] < 64 << 20, "the balancer read %d bytes of an endless watch line" % wsent[0])
        mode[0] = "many values"
        wait_for("the costly message refused", lambda: "too large to parse" in lb.output(), 20)
        out = lb.output()
        # 40 keys of weight 10000 x 16 points: 6.4M points; 6 fit under 1M
        check("refused: etcd's members would have" in out, "no points refusal in the log")
        st = lb.stats()
        check(st["ring"]["members"] == 6, "ring has %d members" % st["ring"]["members"])
        check(st["etcd"]["refused"] >= 34, "etcd stats %r" % st["etcd"])
        check(st["ring"]["points"] <= 1000000, "ring has %d points" % st["ring"]["points"])
        hwm = h.vm_kb(lb.proc.pid, "VmHWM:")
        log("peak memory of the balancer: %d MiB" % (hwm >> 10))
        check(hwm < 400 << 10, "peak memory %d MiB" % (hwm >> 10))
        lb.stop()
    finally:
        srv.close()


def test_cancel(env):
    srv = FakeEtcd()
    try:
        srv.members = {"127.0.0.1:9": 1}
        def watch_hook(c):
            chunk(c, srv.watch_line(created=True))
            chunk(c, srv.watch_line(canceled=True, compact_revision="8"))
            time.sleep(1)
        srv.watch_hook = watch_hook
        lb = balancer(env, srv)
        wait_for("a cancelled watch", lambda: srv.watches >= 1, 10)
        r0, t0 = srv.ranges, time.time()
        time.sleep(4)
        n = srv.ranges - r0
        log("ranges in %.1f s of cancelled watches: %d" % (time.time() - t0, n))
        check(n <= 12, "%d ranges in 4 s: no backoff after cancelled watches" % n)
        check(n >= 1, "the feed stopped trying")
        check(lb.stats()["ring"]["members"] == 1, "membership lost")
        lb.stop()
    finally:
        srv.close()


def test_drip(env):
    srv = FakeEtcd()
    try:
        stop = threading.Event()
        def range_hook(c):
            body = srv.range_body()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body))
            for b in body:
                if stop.is_set():
                    return
                c.sendall(bytes([b]))
                time.sleep(0.1)
        srv.members = {"127.0.0.1:9": 1}
        srv.range_hook = range_hook
        lb = h.Balancer(env, ["--etcd", srv.url, "--etcd-range-timeout", "1",
                              "--backend", "127.0.0.1:7"], threads=1).start()
        t0 = time.time()
        wait_for("the range deadline", lambda: "range: no whole answer within --etcd-range-timeout" in lb.output(), 8)
        log("dripped range dropped after %.1f s" % (time.time() - t0))
        wait_for("a second range", lambda: srv.ranges >= 2, 8)
        check(lb.stats()["ring"]["members"] == 1, "the starting list is not served")
        stop.set()
        lb.stop()
    finally:
        srv.close()


def test_quote(env):
    srv = FakeEtcd()
    try:
        srv.members = {
            "evil\n12:00:00.000 chring-lb: forged line": 1,
            "\x1b[31mred\x1b[0m:80": 1,
            b"bad\xff\xfe:80": 1,
            "127.0.0.1:9": "\x1b]0;title\x07",
            "127.0.0.1:10": 1,
        }
        lb = balancer(env, srv)
        wait_for("the range", lambda: etcd_stats(lb).get("ranges", 0) >= 1, 10)
        time.sleep(0.3)
        with open(env.path(lb.name + ".out"), "rb") as f:
            raw = f.read()
        check(b"\x1b" not in raw and b"\x07" not in raw, "a terminal escape reached the log")
        check(b"\xff" not in raw, "an invalid byte reached the log")
        check(not re.search(rb"^12:00:00\.000 chring-lb: forged", raw, re.M), "a forged log line")
        check(b"evil\\x0a12:00:00.000" in raw, "the newline is not shown quoted:\n%s" % raw.decode(errors="replace"))
        check(b"\\x1b[31mred" in raw and b"bad\\xff\\xfe" in raw, "quoted forms missing")
        check(lb.stats()["ring"]["members"] == 1, "the good key is not applied")
        lb.stop()
    finally:
        srv.close()


def test_publish(env):
    srv = FakeEtcd()
    try:
        names = ["10.3.0.%d:80" % i for i in range(1, 5)]
        srv.members = {m: 10000 for m in names}
        lb = h.Balancer(env, ["--etcd", srv.url, "--vnodes", "100"], threads=1,
                        stats_listen=True).start()
        seen = []  # (publishing, ring members, ring version, digest) per summary

        def poll_until(what, cond, timeout):
            end = time.time() + timeout
            while time.time() < end:
                st = h.summary(lb.stats_port)
                seen.append((st["etcd"].get("publishing", False), st["ring"]["members"], st["ring"]["version"],
                             st["ring"]["digest"]))
                if cond(st):
                    return st
                time.sleep(0.02)
            raise h.TestFailure("not within %.0f s: %s" % (timeout, what))

        st = poll_until("the range in the ring", lambda st: st["ring"]["points"] == 4000000
                        and not st["etcd"].get("publishing"), 120)
        during = [x for x in seen if x[0]]
        log("range: %d summaries, %d answered while its change was published" % (len(seen), len(during)))
        # (the flag falls once the main thread hears of the publish: a summary just after it
        # may show the new ring still "publishing")
        check(any(x[1] == 0 for x in during),
              "no summary answered while the range's 4 million points were published: %r" % seen[:5])
        want = h.expect_digest([m + "=10000" for m in names], vnodes=100)
        st = poll_until("the digest", lambda st: st["ring"]["digest"] is not None, 60)
        check(st["ring"]["digest"] == want, "digest %r, the oracle's %s" % (st["ring"]["digest"], want))
        check(all(x[3] in (None, want) for x in seen if x[2] == st["ring"]["version"]),
              "a summary showed another digest: %r" % seen)
        v0 = st["ring"]["version"]
        del seen[:]
        srv.send([srv.put_event(names[0], 9000)])
        st = poll_until("the re-weighting", lambda st: st["ring"]["version"] > v0
                        and not st["etcd"].get("publishing"), 120)
        during = [x for x in seen if x[0]]
        log("re-weighting 1 million points: %d summaries, %d while published" % (len(seen), len(during)))
        check(any(x[2] == v0 for x in during),
              "no summary answered while the change was published: %r" % seen[:5])
        check(st["ring"]["points"] == 3900000, "points %d" % st["ring"]["points"])
        check(("etcd watch batch at revision %d: 0 added, 0 removed, 1 weights set" % srv.revision)
              in lb.output(), "the batch's line is missing")
        # memory (docs/lb.md, "Memory"): a second after the last publish, and the peak
        pts = st["ring"]["points"]
        rest = REST_BYTES_PER_POINT * pts + MARGIN
        end = time.time() + 10
        rss = h.vm_kb(lb.proc.pid, "VmRSS:")
        while rss * 1024 > rest and time.time() < end:  # replaced snapshots go after a grace period
            time.sleep(0.1)
            rss = h.vm_kb(lb.proc.pid, "VmRSS:")
        hwm = h.vm_kb(lb.proc.pid, "VmHWM:")
        log("memory at %d points: RSS %.0f MB (%.1f bytes per point), peak %.0f MB (%.1f)" %
            (pts, rss / 1024, rss * 1024 / pts, hwm / 1024, hwm * 1024 / pts))
        if h.sanitized():  # a sanitizer's shadow (and ASan's quarantine) is its own memory, not ours
            log("a sanitizer build: the memory bounds are not checked")
        else:
            check(rss * 1024 <= rest, "RSS %.0f MB at rest, above %.0f MB" % (rss / 1024, rest / 2**20))
            peak = PEAK_BYTES_PER_POINT * pts + MARGIN
            check(hwm * 1024 <= peak, "peak RSS %.0f MB, above %.0f MB" % (hwm / 1024, peak / 2**20))
        lb.stop()
    finally:
        srv.close()


TESTS = {"apply": test_apply, "big-batch": test_big_batch, "resolve": test_resolve, "bounds": test_bounds,
         "cancel": test_cancel, "drip": test_drip, "quote": test_quote, "publish": test_publish}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in TESTS:
        sys.exit("usage: lb_feed.py " + "|".join(TESTS))
    sys.exit(h.run(TESTS[sys.argv[1]]))
