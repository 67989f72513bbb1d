#!/usr/bin/env python3
"""Throughput of chring-lb against the same nginx backends reached directly, with wrk.

    lb_wrk.py [--duration S] [--connections C] [--threads T] [--lb-threads N]

Prints a table (requests/s, latency) and a CSV line per run; asserts nothing (a benchmark).
Scenarios: one backend directly; the four backends directly at once (four wrk processes, the
sum); chring-lb in front of the four (random keys, --key path); nginx `hash $arg_k consistent`
in front of the same four (the same requests); chring-lb with one hot key (bounded loads).
Everything on 127.0.0.1; every process stopped by its PID at the end.
"""
import argparse
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402

WRK = os.environ.get("WRK", "wrk")

LUA_RANDOM = """
math.randomseed(8)
request = function()
  local k = math.random(1, 100000)
  return wrk.format("GET", "/k/" .. k .. "?k=" .. k)
end
"""


def parse(out):
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    lat = re.search(r"Latency\s+([\d.]+)(\w+)\s+([\d.]+)(\w+)\s+([\d.]+)(\w+)", out)
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: (.*)", out)

    def ms(v, u):
        v = float(v)
        return v / 1000 if u == "us" else v * 1000 if u == "s" else v

    return {
        "rps": float(rps.group(1)) if rps else 0.0,
        "lat_avg_ms": ms(lat.group(1), lat.group(2)) if lat else float("nan"),
        "lat_max_ms": ms(lat.group(5), lat.group(6)) if lat else float("nan"),
        "non2xx": int(errs.group(1)) if errs else 0,
        "socket_errors": sock.group(1).strip() if sock else "",
    }


def wrk(port, args, script=None, path="/"):
    argv = [WRK, "-t%d" % args.threads, "-c%d" % args.connections, "-d%ds" % args.duration, "--latency"]
    if script:
        argv += ["-s", script]
    argv.append("http://127.0.0.1:%d%s" % (port, path))
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=args.duration + 60)
    return parse(out.stdout.decode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lb-threads", type=int, default=2)
    args = ap.parse_args()
    gone = h.realserver.missing((WRK, h.CHRING_LB, h.NGINX))
    if gone is not None:
        print("missing %s: skipped" % gone)
        return 77
    env = h.Env("wrk")
    rows = []
    try:
        script = env.path("random.lua")
        with open(script, "w") as f:
            f.write(LUA_RANDOM)
        bs = [h.Backend(env, i).start() for i in range(4)]
        cargs = []
        for b in bs:
            cargs += ["--backend", b.member]
        lb = h.Balancer(env, cargs, threads=args.lb_threads).start()
        front = h.NginxHashFront(env, bs, workers=args.lb_threads).start()

        rows.append(("backend directly (1 of 4)", wrk(bs[0].port, args, script)))
        time.sleep(1)
        # the four at once: four wrk processes, connections split between them
        # (started in the Env: stopped with it if anything fails)
        procs = []
        for i, b in enumerate(bs):
            argv = [WRK, "-t1", "-c%d" % max(1, args.connections // 4), "-d%ds" % args.duration,
                    "--latency", "-s", script, "http://127.0.0.1:%d/" % b.port]
            procs.append(("wrk%d" % i, env.spawn("wrk%d" % i, argv)))
        for _, p in procs:
            p.wait(args.duration + 60)
        parts = [parse(env.output(name)) for name, _ in procs]
        rows.append(("4 backends directly (sum)", {
            "rps": sum(p["rps"] for p in parts),
            "lat_avg_ms": sum(p["lat_avg_ms"] for p in parts) / len(parts),
            "lat_max_ms": max(p["lat_max_ms"] for p in parts),
            "non2xx": sum(p["non2xx"] for p in parts), "socket_errors": ""}))
        time.sleep(1)
        rows.append(("chring-lb, random keys", wrk(lb.port, args, script)))
        st = lb.wait_idle()
        rows[-1][1]["spills"] = st["ring"]["spills"]
        time.sleep(1)
        rows.append(("nginx hash consistent, same keys", wrk(front.port, args, script)))
        time.sleep(1)
        before = lb.stats()["ring"]
        rows.append(("chring-lb, one hot key", wrk(lb.port, args, None, "/hot")))
        st = lb.wait_idle()
        rows[-1][1]["spills"] = st["ring"]["spills"] - before["spills"]
        lb.stop()
        print()
        print("wrk -t%d -c%d -d%ds, chring-lb --threads %d, nginx front worker_processes %d, "
              "4 nginx backends (1 worker each), %d cores" % (args.threads, args.connections, args.duration,
                                                              args.lb_threads, args.lb_threads, os.cpu_count()))
        print("%-36s %12s %12s %12s %8s %8s" % ("scenario", "requests/s", "lat avg ms", "lat max ms", "non-2xx",
                                                "spills"))
        for name, r in rows:
            print("%-36s %12.0f %12.2f %12.2f %8d %8s" % (name, r["rps"], r["lat_avg_ms"], r["lat_max_ms"],
                                                          r["non2xx"], r.get("spills", "")))
        print()
        for name, r in rows:
            print("csv,%s,%.0f,%.3f,%.3f,%d,%s" % (name, r["rps"], r["lat_avg_ms"], r["lat_max_ms"], r["non2xx"],
                                                  r.get("spills", "")))
    finally:
        env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
