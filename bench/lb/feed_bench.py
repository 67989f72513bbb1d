#!/usr/bin/env python3
"""How fast chring-lb applies its etcd feed (docs/lb.md, "The etcd feed"): a range of N members,
then single changes through the watch, against tests/lb/fake_etcd.py on 127.0.0.1.

    CHRING_LB=build/lb/chring-lb bench/lb/feed_bench.py [N] [CHANGES] [VNODES]

Times come from chring-lb's own log lines (UTC, millisecond resolution): the range from the
line "etcd: reading" to the line that reports it applied; a change from the moment this script
wrote it on the watch stream to the line that reports its batch applied.  Every process is
stopped when the script ends.
"""
import datetime
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "lb"))
from fake_etcd import FakeEtcd  # noqa: E402

LB = os.environ.get("CHRING_LB", "build/lb/chring-lb")
STAMP = re.compile(rb"^(\d\d):(\d\d):(\d\d)\.(\d\d\d) chring-lb: (.*)$")


def ms_of(line):
    m = STAMP.match(line)
    if not m:
        return None
    h, mi, s, ms = (int(x) for x in m.groups()[:4])
    return ((h * 60 + mi) * 60 + s) * 1000 + ms


def now_ms():
    t = datetime.datetime.now(datetime.timezone.utc)
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1000 + t.microsecond // 1000


def wait_line(path, pattern, timeout):
    end = time.time() + timeout
    rx = re.compile(pattern)
    while time.time() < end:
        with open(path, "rb") as f:
            for line in f:
                if rx.search(line):
                    return line.rstrip(b"\n")
        time.sleep(0.01)
    raise SystemExit("timeout waiting for %r in %s" % (pattern, path))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    changes = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    vnodes = sys.argv[3] if len(sys.argv) > 3 else "160"
    srv = FakeEtcd()
    srv.members = {"10.%d.%d.%d:80" % (i >> 16 & 255, i >> 8 & 255, i & 255): 1 for i in range(n)}
    tmp = tempfile.mkdtemp(prefix="chring-feed-bench-")
    out = os.path.join(tmp, "lb.out")
    port = free_port()
    with open(out, "wb") as f:
        p = subprocess.Popen([LB, "--listen", "127.0.0.1:%d" % port, "--threads", "1",
                              "--vnodes", vnodes, "--etcd", srv.url,
                              "--etcd-max-points", str(1 << 31)],
                             stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        a = wait_line(out, rb"etcd: reading", 10)
        b = wait_line(out, rb"etcd range at revision", 120)
        t = wait_line(out, rb"etcd: range of \d+ bytes", 30)
        wait_line(out, rb"etcd: watching", 30)
        print("range of %d members (vnodes %s): applied %d ms after start" % (n, vnodes, ms_of(b) - ms_of(a)))
        print("  ", t.decode(errors="replace"))
        times = []
        for i in range(changes):
            name = "10.200.%d.%d:80" % (i >> 8, i & 255)
            t0 = now_ms()
            srv.send([srv.put_event(name, 1)] if i % 2 == 0 else [srv.put_event("10.0.0.%d:80" % (i % 250), 2)])
            line = wait_line(out, rb"etcd watch batch at revision %d:" % srv.revision, 30)
            times.append(ms_of(line) - t0)
        times.sort()
        print("one change (%d, put or weight): median %d ms, max %d ms" % (changes, times[len(times) // 2], times[-1]))
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
        srv.close()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
