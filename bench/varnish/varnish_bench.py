#!/usr/bin/env python3
"""Requests per second and p99 through varnishd: chring.director against directors.shard, on the
same backends, in the same varnishd, in the same run (docs/varnish.md, "Benchmark").

    varnish_bench.py [--backends N,N,...] [--duration S] [--rounds R] [--connections C]
                     [--threads T] [--keys K]

One nginx (one worker, `return 200` of a 64-byte body: backends far faster than the proxy) listens
on 4 ports of 127.0.0.1; for each backend count N (default 4, 100 and 10,000, one after the other
in the same run) one varnishd (the stock binary, the VMOD from the build folder) declares N
backends over those ports and has both directors over all N, chosen per request by a header, so
both run on the same threads, backends and caches.  Scenarios: `pass` (every request fetched from
a backend: chring places it when the fetch starts and holds the lease until its body is read),
and `hit` (objects cached: both directors are still called in vcl_recv on every request, where
chring only hashes the key and directors.shard picks a backend).  wrk sends random keys out of K with C connections,
the directors in alternating rounds of S seconds.  Prints a table and CSV; asserts nothing (a
benchmark).  Every process is stopped by its PID.

Environment: CHRING_VMOD (libvmod_chring.so), CHRING_VARNISHD, NGINX (binaries), WRK.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

VARNISHD = os.environ.get("CHRING_VARNISHD", "/usr/sbin/varnishd")
VMOD = os.environ.get("CHRING_VMOD", "build/vmod/libvmod_chring.so")
NGINX = os.environ.get("NGINX", "/usr/sbin/nginx")
WRK = os.environ.get("WRK", "wrk")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc, what, limit=60):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit("%s exited" % what)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit("%s did not listen" % what)


def start_nginx(d, ports):
    servers = "".join(
        "  server { listen 127.0.0.1:%d; access_log off; location / { return 200 '%s'; } }\n"
        % (p, ("b%d" % i).ljust(64, ".")) for i, p in enumerate(ports))
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write("daemon off; worker_processes 1; pid %s/nginx.pid; error_log %s/error.log;\n"
                "events { worker_connections 4096; }\n"
                "http { client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s;\n"
                "  uwsgi_temp_path %s; scgi_temp_path %s; keepalive_requests 1000000;\n%s}\n"
                % ((d,) * 7 + (servers,)))
    p = subprocess.Popen([NGINX, "-p", d, "-c", conf], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    wait_port(ports[0], p, "nginx")
    return p


VCL = """vcl 4.1;
import chring from "%(vmod)s";
import directors;
%(backends)s
sub vcl_init {
  new ring = chring.director(profile = "varnish");
  new shard = directors.shard();
%(adds)s  shard.reconfigure();
}
sub vcl_recv {
  if (req.http.x-dir == "shard") {
    set req.backend_hint = shard.backend(by = URL);
  } else {
    set req.backend_hint = ring.backend(key = req.url);
  }
  if (req.url ~ "^/pass/") { return (pass); }
  return (hash);
}
sub vcl_backend_response { set beresp.ttl = 1h; }
"""


def start_varnish(d, ports, nbackends):
    backends = "".join('backend b%d { .host = "127.0.0.1"; .port = "%d"; }\n'
                       % (i, ports[i % len(ports)]) for i in range(nbackends))
    adds = "".join("  ring.add_backend(b%d);\n  shard.add_backend(b%d);\n" % (i, i)
                   for i in range(nbackends))
    vcl = os.path.join(d, "bench.vcl")
    with open(vcl, "w") as f:
        f.write(VCL % {"vmod": os.path.abspath(VMOD), "backends": backends, "adds": adds})
    port = free_port()
    p = subprocess.Popen([VARNISHD, "-F", "-j", "none", "-n", d + "/n",
                          "-a", "127.0.0.1:%d" % port, "-T", "127.0.0.1:%d" % free_port(),
                          "-f", vcl, "-s", "malloc,256m", "-p", "vcc_err_unref=off",
                          "-p", "thread_pool_min=100", "-p", "vsl_space=1M",
                          # 10,000 backends: the VCL's C compiled without optimisation (gcc -O2
                          # takes minutes on it), and time for the child to load it.
                          "-p", "cc_command=exec gcc -O0 -fpic -shared -o %o %s",
                          "-p", "cli_timeout=600"]
                         # directors.shard keeps vcl_init's add_backend calls on the workspace
                         # of vcl_init, which is workspace_client (64k: about 1,500 backends).
                         + (["-p", "workspace_client=2m"] if nbackends > 1000 else []),
                         stdout=open(os.path.join(d, "varnishd.log"), "w"),
                         stderr=subprocess.STDOUT)
    try:
        wait_port(port, p, "varnishd", 900)
    except SystemExit:
        with open(os.path.join(d, "varnishd.log")) as f:
            sys.stderr.write(f.read()[-3000:])
        raise
    return p, port


LUA = """
math.randomseed(%(seed)d)
request = function()
  return wrk.format("GET", "/%(scenario)s/" .. math.random(%(keys)d))
end
"""


def run_wrk(d, port, scenario, director, a):
    lua = os.path.join(d, "k.lua")
    with open(lua, "w") as f:
        f.write(LUA % {"seed": 7, "scenario": scenario, "keys": a.keys})
    out = subprocess.run([WRK, "-t%d" % a.threads, "-c%d" % a.connections,
                          "-d%ds" % a.duration, "--latency", "-s", lua,
                          "-H", "x-dir: %s" % director, "http://127.0.0.1:%d" % port],
                         capture_output=True, text=True, timeout=a.duration + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, float(p99.group(1)) * scale, int(errors.group(1)) if errors else 0


def bench_one(d, ports, n, a, csv):
    """Both directors over n backends in one varnishd, alternating rounds."""
    vd = None
    try:
        t0 = time.monotonic()
        vd, port = start_varnish(d, ports, n)
        print("== %d backends (varnishd up in %.1f s)" % (n, time.monotonic() - t0), flush=True)
        # The first request of each director builds its ring; then warm the hit scenario's cache
        # through both directors (they place alike).
        run_wrk(d, port, "hit", "ring", argparse.Namespace(**{**vars(a), "duration": 2}))
        run_wrk(d, port, "hit", "shard", argparse.Namespace(**{**vars(a), "duration": 2}))
        results = {}
        for r in range(a.rounds):
            for scenario in ("pass", "hit"):
                for director in (("ring", "shard") if r % 2 == 0 else ("shard", "ring")):
                    res = run_wrk(d, port, scenario, director, a)
                    results.setdefault((scenario, director), []).append(res)
                    print("%5d round %d %-4s %-5s %9.0f req/s  p99 %7.2f ms  non-2xx %d"
                          % (n, r + 1, scenario, director, *res), flush=True)
        for (scenario, director), rs in sorted(results.items()):
            rps = sorted(x[0] for x in rs)[len(rs) // 2]
            p99 = sorted(x[1] for x in rs)[len(rs) // 2]
            csv.append("%d,%s,%s,%d,%.0f,%.2f,%d" % (
                n, scenario, "chring.director" if director == "ring" else "directors.shard",
                len(rs), rps, p99, sum(x[2] for x in rs)))
    finally:
        if vd is not None and vd.poll() is None:
            vd.send_signal(signal.SIGTERM)
            try:
                vd.wait(timeout=60)
            except subprocess.TimeoutExpired:
                vd.kill()
                vd.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="4,100,10000")
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keys", type=int, default=1000)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="chring-varnish-bench-")
    ports = [free_port() for _ in range(4)]
    ngx = None
    csv = []
    try:
        ngx = start_nginx(d, ports)
        for n in (int(x) for x in a.backends.split(",")):
            bench_one(d, ports, n, a, csv)
        print("\nbackends,scenario,director,rounds,median_rps,median_p99_ms,non2xx")
        print("\n".join(csv))
    finally:
        if ngx is not None and ngx.poll() is None:
            ngx.send_signal(signal.SIGQUIT)
            try:
                ngx.wait(timeout=30)
            except subprocess.TimeoutExpired:
                ngx.kill()
                ngx.wait(timeout=30)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
