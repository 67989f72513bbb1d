#!/usr/bin/env python3
"""chring-lb as an HTTP hop: per-request latency against a direct request, and throughput against
nginx's own `hash consistent` front, on the same backends in the same run.

    lb_bench.py [--requests N] [--duration S] [--rounds R] [--connections C]

Latency: one keep-alive connection, requests one after another (N per scenario after a warm-up),
p50 and p99 of the client-measured time: directly to a backend, through chring-lb, through nginx's
front; for answers an nginx backend writes in one piece, and for answers a raw backend writes in
four pieces (status line, fields, two body halves: four send() calls with TCP_NODELAY).
Throughput: wrk with random keys through chring-lb and through nginx's front, in alternating
rounds.  With CHRING_LB_BASE (another chring-lb build, e.g. the one before the hardening) the same
scenarios run through it too, interleaved, so that the hardening's cost is read against the noise
of the same run.  Prints tables and CSV; asserts nothing (a benchmark).  Everything on 127.0.0.1,
every process stopped by its PID.
"""
import argparse
import os
import socket
import socketserver
import statistics
import sys
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "lb"))
import lbharness as h  # noqa: E402
import lb_wrk  # noqa: E402


class PiecesBackend:
    """Answers every request with a 64-byte body, written in four send() calls."""

    def __init__(self):
        outer = self

        class H(socketserver.BaseRequestHandler):
            def handle(self):
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.request.settimeout(30)
                buf = b""
                for _ in range(10000000):
                    try:
                        data = self.request.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    buf += data
                    while b"\r\n\r\n" in buf:
                        _, buf = buf.split(b"\r\n\r\n", 1)
                        body = (b"%d " % outer.port).ljust(64, b".")
                        try:
                            self.request.sendall(b"HTTP/1.1 200 OK\r\n")
                            self.request.sendall(b"Content-Type: text/plain\r\nContent-Length: 64\r\n\r\n")
                            self.request.sendall(body[:32])
                            self.request.sendall(body[32:])
                        except OSError:
                            return

        class S(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.port = h.free_port()
        self.member = "127.0.0.1:%d" % self.port
        self.srv = S(("127.0.0.1", self.port), H)
        self.t = threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.t.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def latencies(port, n, warm=200, path="/k/%d?k=%d"):
    """Sequential keep-alive requests; returns the per-request times in microseconds."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = []
    buf = b""
    try:
        for i in range(warm + n):
            k = i % 1000
            req = b"GET " + (path % (k, k)).encode() + b" HTTP/1.1\r\nHost: bench\r\n\r\n"
            t0 = time.perf_counter()
            s.sendall(req)
            while True:
                if b"\r\n\r\n" in buf:
                    head, rest = buf.split(b"\r\n\r\n", 1)
                    cl = 0
                    for line in head.split(b"\r\n")[1:]:
                        a, _, v = line.partition(b":")
                        if a.strip().lower() == b"content-length":
                            cl = int(v)
                    if len(rest) >= cl:
                        if not head.startswith(b"HTTP/1.1 200"):
                            raise RuntimeError("answer %r" % head[:40])
                        buf = rest[cl:]
                        break
                data = s.recv(65536)
                if not data:
                    raise RuntimeError("connection closed")
                buf += data
            if i >= warm:
                out.append((time.perf_counter() - t0) * 1e6)
    finally:
        s.close()
    return out


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lb-threads", type=int, default=2)
    args = ap.parse_args()
    base = os.environ.get("CHRING_LB_BASE")
    gone = h.realserver.missing((lb_wrk.WRK, h.CHRING_LB, h.NGINX) + ((base,) if base else ()))
    if gone is not None:
        print("missing %s: skipped" % gone)
        return 77
    env = h.Env("bench")
    pieces = None
    try:
        script = env.path("random.lua")
        with open(script, "w") as f:
            f.write(lb_wrk.LUA_RANDOM)
        bs = [h.Backend(env, i).start() for i in range(4)]
        pieces = PiecesBackend()
        cargs = []
        for b in bs:
            cargs += ["--backend", b.member]
        lbs = {"chring-lb": h.Balancer(env, cargs, threads=args.lb_threads, name="lb").start()}
        lbp = {"chring-lb": h.Balancer(env, ["--backend", pieces.member], threads=args.lb_threads,
                                       name="lbp").start()}
        if base:
            lbs["base"] = h.Balancer(env, cargs, threads=args.lb_threads, name="lb-base",
                                     program=base).start()
            lbp["base"] = h.Balancer(env, ["--backend", pieces.member], threads=args.lb_threads,
                                     name="lbp-base", program=base).start()
        front = h.NginxHashFront(env, bs, workers=args.lb_threads, access_log=False).start()

        # latency: alternating rounds so that a noisy moment hits every scenario alike
        lat = {}
        scen = [("one piece", "direct (nginx backend)", bs[0].port)]
        scen += [("one piece", "through %s" % k, v.port) for k, v in lbs.items()]
        scen += [("one piece", "through nginx hash consistent", front.port)]
        scen += [("four pieces", "direct (raw backend)", pieces.port)]
        scen += [("four pieces", "through %s" % k, v.port) for k, v in lbp.items()]
        for r in range(args.rounds):
            for kind, name, port in scen:
                lat.setdefault((kind, name), []).extend(latencies(port, args.requests // args.rounds))
        print()
        print("latency: 1 keep-alive connection, sequential requests, %d per scenario, %d cores"
              % (args.requests, os.cpu_count()))
        print("%-12s %-34s %10s %10s %10s" % ("answer", "path", "p50 us", "p99 us", "mean us"))
        for (kind, name), xs in lat.items():
            print("%-12s %-34s %10.0f %10.0f %10.0f" % (kind, name, pct(xs, 50), pct(xs, 99), statistics.mean(xs)))
        for (kind, name), xs in lat.items():
            print("csv-latency,%s,%s,%.1f,%.1f" % (kind, name, pct(xs, 50), pct(xs, 99)))

        # throughput
        tp = {}
        wargs = argparse.Namespace(threads=args.threads, connections=args.connections, duration=args.duration)
        targets = [("chring-lb %s" % k, v.port) for k, v in lbs.items()]
        targets.append(("nginx hash consistent", front.port))
        for r in range(args.rounds):
            for name, port in targets:
                tp.setdefault(name, []).append(lb_wrk.wrk(port, wargs, script))
                time.sleep(1)
        print()
        print("throughput: wrk -t%d -c%d -d%ds, random keys, %d rounds alternating; chring-lb --threads %d, "
              "nginx worker_processes %d, 4 nginx backends" % (args.threads, args.connections, args.duration,
                                                               args.rounds, args.lb_threads, args.lb_threads))
        print("%-32s %s" % ("front", "requests/s per round"))
        for name, rs in tp.items():
            print("%-32s %s  (non-2xx %d)" % (name, "  ".join("%8.0f" % x["rps"] for x in rs),
                                             sum(x["non2xx"] for x in rs)))
        for name, rs in tp.items():
            print("csv-throughput,%s,%s" % (name, ",".join("%.0f" % x["rps"] for x in rs)))
        for v in list(lbs.values()) + list(lbp.values()):
            v.stop()
    finally:
        if pieces:
            pieces.close()
        env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
