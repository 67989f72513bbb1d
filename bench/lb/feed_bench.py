#!/usr/bin/env python3
"""How fast chring-lb applies its etcd feed (docs/lb.md, "The etcd feed"): a range of N members,
then single changes through the watch, against tests/lb/fake_etcd.py on 127.0.0.1.

    CHRING_LB=build/lb/chring-lb bench/lb/feed_bench.py [N] [CHANGES] [VNODES]

Times come from chring-lb's own log lines (UTC, millisecond resolution): the range from the
line "etcd: reading" to the line that reports it applied; a change from the moment this script
wrote it on the watch stream to the line that reports its batch applied.  Ports, the process and
its folder are the real-server harness's (tests/harness/realserver.py): every process is stopped
and the folder removed when the script ends (kept with CHRING_KEEP_TMP).
"""
import datetime
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "lb"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "harness"))
import realserver  # noqa: E402
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


def wait_line(path, pattern, timeout, proc):
    """The first line of path matching pattern, waited for at most timeout seconds
    (realserver.TestFailure after, or at once when proc exits)."""
    rx = re.compile(pattern)

    def find():
        with open(path, "rb") as f:
            for line in f:
                if rx.search(line):
                    return line.rstrip(b"\n")
        return None

    return realserver.wait_until("%r in %s" % (pattern, path), find, timeout, proc, interval=0.01)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    changes = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    vnodes = sys.argv[3] if len(sys.argv) > 3 else "160"
    srv = FakeEtcd()
    srv.members = {"10.%d.%d.%d:80" % (i >> 16 & 255, i >> 8 & 255, i & 255): 1 for i in range(n)}
    env = realserver.Env("feed", "bench")
    p = env.spawn("lb", [LB, "--listen", "127.0.0.1:%d" % realserver.free_port(), "--threads", "1",
                         "--vnodes", vnodes, "--etcd", srv.url,
                         "--etcd-max-points", str(1 << 31)])
    out = p.log_path
    try:
        a = wait_line(out, rb"etcd: reading", 10, p)
        b = wait_line(out, rb"etcd range at revision", 120, p)
        t = wait_line(out, rb"etcd: range of \d+ bytes", 30, p)
        wait_line(out, rb"etcd: watching", 30, p)
        print("range of %d members (vnodes %s): applied %d ms after start" % (n, vnodes, ms_of(b) - ms_of(a)))
        print("  ", t.decode(errors="replace"))
        times = []
        for i in range(changes):
            name = "10.200.%d.%d:80" % (i >> 8, i & 255)
            t0 = now_ms()
            srv.send([srv.put_event(name, 1)] if i % 2 == 0 else [srv.put_event("10.0.0.%d:80" % (i % 250), 2)])
            line = wait_line(out, rb"etcd watch batch at revision %d:" % srv.revision, 30, p)
            times.append(ms_of(line) - t0)
        times.sort()
        print("one change (%d, put or weight): median %d ms, max %d ms" % (changes, times[len(times) // 2], times[-1]))
    except realserver.TestFailure as e:
        print("feed_bench: %s" % e, file=sys.stderr)
        return 1
    finally:
        env.close()
        srv.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
