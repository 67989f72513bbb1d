#!/usr/bin/env python3
"""chring-lb's etcd feed at scale against a real etcd on 127.0.0.1 (docs/bench.md, "chring-lb and
etcd at scale"; docs/lb.md, "The etcd feed").

    CHRING_LB=build/lb/chring-lb bench/lb/etcd_scale.py [members [N [K]]] [changes K] [gap S]
    CHRING_LB=build/lb/chring-lb bench/lb/etcd_scale.py points [KEYS [WEIGHT [K]]] [changes K] [gap S]

CHRING_LB_ARGS adds arguments to chring-lb's (split at spaces), e.g. "--spare-blocks 0" to measure
the changes without the spare block kept at rest (docs/lb.md, "Memory").  gap S: the seconds
between two changes (default 1.0; more than the library's 200 ms, so that without a spare kept
each change finds none).

members (the default, N = 100000): N keys with numeric addresses (weight 1, --vnodes 160: 16 M
points at 100,000) are put into etcd with its JSON gateway's txn in batches; chring-lb starts with
--etcd and the time until the ring holds N members is taken; then K times one new key is put and
the time until the ring has it is taken (from the put's sending to the log line that applied its
batch, both on this machine's clock; the log has millisecond stamps).

points (KEYS = 10, WEIGHT = 10000: 16 M points): few keys of a large weight; K changes of one
key's weight (WEIGHT - 1, then back), each a change of 160,000 points.

In both modes a thread asks for the summary (GET /_chring/stats?members=0 on --stats-listen)
every 50 ms from the start of chring-lb to the end, and the worst answer time after the ring was
applied (and the worst overall) is reported; chring-lb's RSS (VmRSS, VmHWM) is read after the
apply and after the changes; the time SIGTERM takes is measured.  Every process is stopped at the
end.  The machine's load average is printed with the figures (a shared machine is noisy).
"""
import base64
import datetime
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

LB = os.environ.get("CHRING_LB", "build/lb/chring-lb")
ETCD = shutil.which("etcd") or "/usr/bin/etcd"
PREFIX = "/scale/"
STAMP = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d\d\d) ")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def b64(s):
    return base64.b64encode(s.encode()).decode()


def post(port, path, obj, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", path, json.dumps(obj), {"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            raise SystemExit("etcd %s answered %d: %r" % (path, r.status, body[:200]))
        return json.loads(body)
    finally:
        c.close()


def utc_ms_of_day():
    t = datetime.datetime.now(datetime.timezone.utc)
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1000 + t.microsecond // 1000


def stamp_ms(line):
    m = STAMP.match(line)
    if not m:
        return None
    h, mi, s, ms = (int(x) for x in m.groups())
    return ((h * 60 + mi) * 60 + s) * 1000 + ms


def rss_kb(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def name_of(i):
    """A distinct numeric address for member i (loopback; no traffic is sent to them)."""
    return "127.%d.%d.%d:%d" % (1 + i // (250 * 250 * 4), (i // (250 * 4)) % 250 + 1, (i // 4) % 250 + 1,
                                8000 + i % 4)


class Summary(threading.Thread):
    """Asks for the summary every 50 ms; keeps the worst answer time, overall and since mark()."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.worst = 0.0
        self.worst_marked = 0.0
        self.marked = False
        self.count = 0
        self.errors = 0
        self.last = None

    def mark(self):
        self.marked = True

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                c.request("GET", "/_chring/stats?members=0")
                r = c.getresponse()
                body = r.read()
                c.close()
                dt = time.monotonic() - t0
                if r.status == 200:
                    self.last = json.loads(body)
                    self.count += 1
                    self.worst = max(self.worst, dt)
                    if self.marked:
                        self.worst_marked = max(self.worst_marked, dt)
                else:
                    self.errors += 1
            except (OSError, http.client.HTTPException, ValueError):
                self.errors += 1
            time.sleep(max(0.0, 0.05 - (time.monotonic() - t0)))


def wait_log(path, pattern, start, timeout):
    """The first line of path at or after byte start matching pattern: (line, offset after it)."""
    rx = re.compile(pattern)
    end = time.time() + timeout
    while time.time() < end:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read()
        pos = 0
        for raw in data.splitlines(keepends=True):
            if not raw.endswith(b"\n"):
                break
            pos += len(raw)
            line = raw.decode("utf-8", "replace")
            if rx.search(line):
                return line.rstrip("\n"), start + pos
        time.sleep(0.005)
    raise SystemExit("timeout waiting for %r" % pattern)


def main():
    args = sys.argv[1:]
    named = {}
    for word in ("changes", "gap"):
        if word in args:
            at = args.index(word)
            if at + 1 >= len(args):
                raise SystemExit("%s: a value" % word)
            named[word] = args[at + 1]
            del args[at:at + 2]
    gap = float(named.get("gap", "1.0"))
    mode = "members"
    if args and args[0] in ("members", "points"):
        mode = args.pop(0)
    if mode == "members":
        nkeys = int(args[0]) if len(args) > 0 else 100000
        weight = 1
        changes = int(args[1]) if len(args) > 1 else 5
    else:
        nkeys = int(args[0]) if len(args) > 0 else 10
        weight = int(args[1]) if len(args) > 1 else 10000
        changes = int(args[2]) if len(args) > 2 else 4
    if "changes" in named:
        changes = int(named["changes"])
    vnodes = 160
    tmp = tempfile.mkdtemp(prefix="etcd_scale.")
    procs = []
    cport, pport, lport, sport = free_port(), free_port(), free_port(), free_port()
    url = "http://127.0.0.1:%d" % cport
    try:
        etcd = subprocess.Popen(
            [ETCD, "--name", "s", "--data-dir", os.path.join(tmp, "data"), "--listen-client-urls", url,
             "--advertise-client-urls", url, "--listen-peer-urls", "http://127.0.0.1:%d" % pport,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % pport,
             "--initial-cluster", "s=http://127.0.0.1:%d" % pport, "--log-level", "error",
             "--logger", "zap", "--max-txn-ops", "2000", "--max-request-bytes", str(16 << 20)],
            stdout=open(os.path.join(tmp, "etcd.out"), "wb"), stderr=subprocess.STDOUT)
        procs.append(etcd)
        end = time.time() + 20
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", cport, timeout=1)
                c.request("GET", "/health")
                if json.loads(c.getresponse().read()).get("health") == "true":
                    break
            except (OSError, ValueError, http.client.HTTPException):
                pass
            if time.time() > end or etcd.poll() is not None:
                raise SystemExit("etcd did not start (%s)" % os.path.join(tmp, "etcd.out"))
            time.sleep(0.1)
        t0 = time.monotonic()
        value = "" if weight == 1 else str(weight)
        for i in range(0, nkeys, 1000):
            ops = [{"requestPut": {"key": b64(PREFIX + name_of(j)), "value": b64(value)}}
                   for j in range(i, min(nkeys, i + 1000))]
            post(cport, "/v3/kv/txn", {"success": ops})
        print("etcd: %d keys (weight %d) put in %.1f s" % (nkeys, weight, time.monotonic() - t0))

        logp = os.path.join(tmp, "lb.out")
        argv = [LB, "--listen", "127.0.0.1:%d" % lport, "--stats-listen", "127.0.0.1:%d" % sport,
                "--threads", "1", "--vnodes", str(vnodes), "--etcd", url, "--etcd-prefix", PREFIX] + os.environ.get("CHRING_LB_ARGS", "").split()
        print("chring-lb: %s" % " ".join(argv[1:]))
        t_start = time.monotonic()
        lb = subprocess.Popen(argv, stdout=open(logp, "wb"), stderr=subprocess.STDOUT)
        procs.append(lb)
        poller = Summary(sport)
        poller.start()
        line, off = wait_log(logp, r"etcd: range of \d+ bytes", 0, 300)
        t_applied = time.monotonic() - t_start
        print("chring-lb: started and applied in %.2f s; %s" % (t_applied, line))
        end = time.time() + 60
        while time.time() < end and not (poller.last and poller.last["ring"]["members"] == nkeys):
            time.sleep(0.05)
        st = poller.last
        print("summary: %d members, %d points, digest %s" % (st["ring"]["members"], st["ring"]["points"],
                                                            st["ring"]["digest"]))
        r1 = rss_kb(lb.pid)
        print("RSS after the apply: %.0f MB (peak %.0f MB), the ring's points: %d (%.0f MB at 8 bytes)" %
              (r1["VmRSS"] / 1024, r1["VmHWM"] / 1024, st["ring"]["points"], st["ring"]["points"] * 8 / 1e6))
        poller.mark()
        lat = []
        for k in range(changes):
            time.sleep(gap)
            if mode == "members":
                name, val = name_of(nkeys + k), ""
                pat = r"etcd watch batch at revision %d: 1 added"
            else:
                name, val = name_of(0), str(weight - 1 if k % 2 == 0 else weight)
                pat = r"etcd watch batch at revision %d: 0 added, 0 removed, 1 weights set"
            sent = utc_ms_of_day()
            r = post(cport, "/v3/kv/put", {"key": b64(PREFIX + name), "value": b64(val)})
            rev = int(r["header"]["revision"])
            line, off = wait_log(logp, pat % rev, off, 30)
            d = stamp_ms(line) - sent
            lat.append(d)
            print("change %d (revision %d): in the ring %d ms after the put was sent" % (k + 1, rev, d))
        time.sleep(1.0)
        r2 = rss_kb(lb.pid)
        poller.stop.set()
        poller.join()
        t = time.monotonic()
        lb.send_signal(signal.SIGTERM)
        rc = lb.wait(timeout=60)
        t_term = time.monotonic() - t
        procs.remove(lb)
        with open(logp) as f:
            lines = f.read().splitlines()
        for l in lines:
            if "range of" in l or "published in" in l:
                print("log: " + l.rstrip())
        for l in [x for x in lines if "exit" in x][-5:]:
            print("log (end): " + l)
        print("changes: worst %d ms, median %d ms (%d)" % (max(lat), sorted(lat)[len(lat) // 2], len(lat)))
        print("summary: %d answers, worst %.3f s after the apply (%.3f s from the start), %d errors" %
              (poller.count, poller.worst_marked, poller.worst, poller.errors))
        print("RSS at rest, 1 s after the last change: %.0f MB (peak %.0f MB)" % (r2["VmRSS"] / 1024, r2["VmHWM"] / 1024))
        print("SIGTERM: exit %d in %.2f s" % (rc, t_term))
        print("load average: %s (a machine shared with other work)" % open("/proc/loadavg").read().strip())
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
