#!/usr/bin/env python3
"""Tests of ngx_http_upstream_chring_module with the real nginx of the system (docs/nginx.md).

    nginx_test.py CASE        run one case (see CASES at the end)
    nginx_test.py --backend PORT   (internal) one backend process

Each case starts nginx (the stock binary, the module loaded with load_module) with its own
temporary prefix, configuration and ports on 127.0.0.1, and Python backends it starts itself;
everything is stopped by its PID when the case ends, also on failure (the harness of the
real-server suites, tests/harness/realserver.py).  Every loop and every wait is bounded.
Expected owners come from chring-nginx-expect (plain chring lookups) and, for the nginx profile,
from nginx's own `hash $arg_k consistent` on the same servers.
"""
import http.client
import http.server
import json
import math
import os
import signal
import socketserver
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from realserver import TestFailure, check, free_port, log, stop_process, wait_port  # noqa: E402
import realserver  # noqa: E402

NGINX = os.environ.get("CHRING_NGINX_BIN", "/usr/sbin/nginx")
MODULE = os.environ.get("CHRING_NGINX_MODULE", "ngx_http_upstream_chring_module.so")
EXPECT = os.environ.get("CHRING_NGINX_EXPECT", "chring-nginx-expect")


# nginx takes inherited listening sockets from an NGINX variable in its environment: children get
# an environment without one.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "NGINX"}


# ------------------------------------------------------------------------------------------------
# The backend: "<port>\n" for every request, after ?sleep=MS; it counts its requests in flight per
# (X-Worker, X-Up) pair and keeps the highest count, served at /_stats and reset at /_reset.
# ------------------------------------------------------------------------------------------------


def backend_main(port):
    lock = threading.Lock()
    inflight = {}
    peak = {}
    served = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        def answer(self, body, ctype="text/plain"):
            data = body.encode()
            head = ("HTTP/1.0 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
                    "Connection: close\r\n\r\n" % (ctype, len(data))).encode()
            self.wfile.write(head + data)  # one write (docs: Nagle and delayed ACKs)

        def do_GET(self):
            u = urllib.parse.urlsplit(self.path)
            if u.path == "/_stats":
                with lock:
                    body = json.dumps({"served": served[0],
                                       "peak": {"%s %s" % k: v for k, v in peak.items()}})
                self.answer(body, "application/json")
                return
            if u.path == "/_reset":
                with lock:
                    peak.clear()
                    served[0] = 0
                self.answer("reset\n")
                return
            q = urllib.parse.parse_qs(u.query)
            who = (self.headers.get("X-Worker", "-"), self.headers.get("X-Up", "-"))
            with lock:
                inflight[who] = inflight.get(who, 0) + 1
                peak[who] = max(peak.get(who, 0), inflight[who])
                served[0] += 1
            try:
                ms = int(q.get("sleep", ["0"])[0])
                if ms > 0:
                    time.sleep(min(ms, 5000) / 1000.0)
                self.answer("%d\n" % port)
            finally:
                with lock:
                    inflight[who] -= 1

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True
        request_queue_size = 256

    srv = Server(("127.0.0.1", port), Handler)
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    srv.serve_forever()


# ------------------------------------------------------------------------------------------------
# Processes
# ------------------------------------------------------------------------------------------------

class Env(realserver.Env):
    """A temporary folder (chring-nginx-*) and every process started in it, with the
    environment nginx's children get."""

    def __init__(self, name):
        super().__init__(name, "nginx")

    def spawn(self, name, argv):
        return super().spawn(name, argv, env=CHILD_ENV)


class Backend:
    def __init__(self, env):
        self.env = env
        self.port = free_port()
        self.name = "127.0.0.1:%d" % self.port
        self.proc = None

    def start(self):
        self.proc = self.env.spawn("backend-%d" % self.port,
                                   [sys.executable, os.path.abspath(__file__), "--backend", str(self.port)])
        wait_port(self.port, proc=self.proc)

    def stop(self):
        stop_process(self.proc)

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            c.request("GET", path)
            return c.getresponse().read()
        finally:
            c.close()

    def stats(self):
        return json.loads(self.get("/_stats"))

    def reset(self):
        self.get("/_reset")


class Nginx:
    """The stock nginx with the module, its own prefix directory and configuration."""

    def __init__(self, env, workers=2):
        self.env = env
        self.d = env.path("nginx")
        for sub in ("", "tmp", "logs"):
            os.makedirs(os.path.join(self.d, sub), exist_ok=True)
        self.conf = os.path.join(self.d, "nginx.conf")
        self.workers = workers
        self.daemon = "off"  # "on" only where a case starts nginx as a daemon (case_memory)
        self.proc = None
        self.port = free_port()

    def text(self, http_body, load=True):
        return """
{load}
worker_processes {workers};
daemon {daemon};
master_process on;
pid {d}/nginx.pid;
error_log {d}/logs/error.log notice;
events {{ worker_connections 1024; }}
http {{
    access_log {d}/logs/access.log;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    add_header X-Chring-Member $chring_member always;
    add_header X-Chring-Spilled $chring_spilled always;
    add_header X-Chring-Digest $chring_digest always;
{body}
}}
""".format(load=("load_module %s;" % os.path.abspath(MODULE)) if load else "",
           workers=self.workers, daemon=self.daemon, d=self.d, body=http_body)

    def write(self, http_body, path=None):
        with open(path or self.conf, "w") as f:
            f.write(self.text(http_body))

    def test_config(self, http_body):
        """nginx -t on a configuration: (exit status, output)."""
        p = self.env.path("t-%d.conf" % free_port())
        self.write(http_body, p)
        r = subprocess.run([NGINX, "-t", "-p", self.d, "-e", self.d + "/logs/t.log", "-c", p],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30, env=CHILD_ENV)
        return r.returncode, r.stdout.decode(errors="replace")

    def start(self, http_body):
        self.write(http_body)
        self.proc = self.env.spawn("nginx", [NGINX, "-p", self.d, "-e", self.d + "/logs/error.log",
                                             "-c", self.conf])
        self.env.watch(os.path.join(self.d, "logs", "error.log"))
        wait_port(self.port, proc=self.proc)
        self.wait_workers(set())

    def workers_now(self):
        try:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                return set(int(x) for x in f.read().split())
        except OSError:
            return set()

    def wait_workers(self, old, timeout=30.0):
        """Waits until the master has its worker count of children, none of them in old."""
        end = time.time() + timeout
        while time.time() < end:
            check(self.proc.poll() is None, "nginx exited with %s" % self.proc.returncode)
            now = self.workers_now()
            if len(now) == self.workers and not (now & old):
                return now
            time.sleep(0.02)
        raise TestFailure("nginx workers did not turn over in %.0fs (old %s, now %s)"
                          % (timeout, sorted(old), sorted(self.workers_now())))

    def reload(self, http_body):
        old = self.workers_now()
        self.write(http_body)
        os.kill(self.proc.pid, signal.SIGHUP)
        return self.wait_workers(old)

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc, signal.SIGQUIT)

    def error_log(self):
        try:
            with open(os.path.join(self.d, "logs", "error.log")) as f:
                return f.read()
        except OSError:
            return ""


def get(port, path, timeout=20):
    """GET through nginx: (status, body, member header, spilled header)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        body = r.read().decode(errors="replace").strip()
        return r.status, body, r.getheader("X-Chring-Member", ""), r.getheader("X-Chring-Spilled", "")
    finally:
        c.close()


def expect(profile, vnodes, members, keys, down=()):
    """Owners of keys by the library (members: [(name, weight)])."""
    argv = [EXPECT, profile, str(vnodes)] + ["%s=%d" % m for m in members] + ["-" + d for d in down]
    r = subprocess.run(argv, input="".join(k + "\n" for k in keys).encode(), stdout=subprocess.PIPE,
                       timeout=60, check=True)
    out = r.stdout.decode().split("\n")[: len(keys)]
    check(len(out) == len(keys), "oracle answered %d of %d keys" % (len(out), len(keys)))
    return dict(zip(keys, out))


def upstream(name, directive, backends, params=None, extra=()):
    lines = ["    upstream %s {" % name, "        %s;" % directive]
    for b in backends:
        lines.append("        server %s%s;" % (b.name, (params or {}).get(b.name, "")))
    lines += ["        %s;" % e for e in extra]
    lines.append("    }")
    return "\n".join(lines)


def front(port, locations):
    """A server on port proxying /<tag>/ to upstream <tag> (X-Up: <tag>)."""
    body = ["    server {", "        listen 127.0.0.1:%d;" % port]
    for tag in locations:
        body.append("        location /%s/ { proxy_set_header X-Worker $pid; proxy_set_header X-Up %s; "
                    "proxy_pass http://%s; }"
                    % (tag, tag, tag))
    body.append("    }")
    return "\n".join(body)


def route(port, tag, keys, extra=""):
    """Sequential requests: key -> (backend name that answered, $chring_member, $chring_spilled)."""
    out = {}
    for k in keys:
        st, body, member, spilled = get(port, "/%s/?k=%s%s" % (tag, urllib.parse.quote(k, safe=":/"), extra))
        check(st == 200, "/%s/ key %r: status %d (%s)" % (tag, k, st, body))
        out[k] = ("127.0.0.1:%s" % body, member, spilled)
    return out


# ------------------------------------------------------------------------------------------------
# Cases
# ------------------------------------------------------------------------------------------------


def case_placement(env):
    """Sequential requests (no load) go to the key's owner: the library's own answers for the
    default profile and for profile=nginx, and nginx's own hash ... consistent for the latter."""
    backends = [Backend(env) for _ in range(5)]
    for b in backends:
        b.start()
    weights = {backends[1].name: 2, backends[3].name: 3}
    params = {n: " weight=%d" % w for n, w in weights.items()}
    members = [(b.name, weights.get(b.name, 1)) for b in backends]
    ng = Nginx(env)
    ng.start("\n".join([
        upstream("lib", "chring $arg_k vnodes=100", backends, params),
        # keepalive wraps the balancer's peer functions (it must come after chring).
        upstream("ngx", "chring $arg_k profile=nginx", backends, params, extra=["keepalive 8"]),
        upstream("gold", "hash $arg_k consistent", backends, params),
        front(ng.port, ["lib", "ngx", "gold"])]))
    keys = ["user:%d" % i for i in range(400)] + ["k%d" % (i * 7919) for i in range(200)]
    lib = route(ng.port, "lib", keys)
    want = expect("hash64", 100, members, keys)
    bad = [k for k in keys if lib[k][0] != want[k]]
    check(not bad, "hash64: %d of %d keys not on the library's owner, e.g. %r: %s against %s"
          % (len(bad), len(keys), bad[:1], bad and lib[bad[0]][0], bad and want[bad[0]]))
    check(all(lib[k][1] == lib[k][0] and lib[k][2] == "0" for k in keys),
          "$chring_member / $chring_spilled do not name the owner with no spill")
    check(len(set(v[0] for v in lib.values())) == 5, "not every backend got keys")
    ngx = route(ng.port, "ngx", keys)
    gold = route(ng.port, "gold", keys)
    want = expect("nginx", 160, members, keys)
    bad = [k for k in keys if ngx[k][0] != want[k]]
    check(not bad, "profile=nginx: %d keys not on the library's owner" % len(bad))
    bad = [k for k in keys if ngx[k][0] != gold[k][0]]
    check(not bad, "profile=nginx: %d of %d keys not where nginx's hash consistent puts them, "
          "e.g. %r: %s against %s" % (len(bad), len(keys), bad[:1], bad and ngx[bad[0]][0],
                                      bad and gold[bad[0]][0]))
    moved = sum(1 for k in keys if lib[k][0] != ngx[k][0])
    check(moved > 0, "the default and nginx profiles agree on every key (the test cannot tell them apart)")
    log("placement: %d keys, hash64 = library, nginx = library = nginx's hash consistent" % len(keys))


def get_digest(port, path):
    """GET through nginx: (status, $chring_digest)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        return r.status, r.getheader("X-Chring-Digest", "")
    finally:
        c.close()


def case_digest(env):
    """$chring_digest: the same in every worker and for the same servers listed in another order,
    equal to the library's digest computed in another process (the oracle), different for a
    different weight; and $chring_spilled comes from the
    lease's outcome (0 for the owner with no load)."""
    backends = [Backend(env) for _ in range(4)]
    for b in backends:
        b.start()
    heavy = {backends[2].name: " weight=2"}
    ng = Nginx(env, workers=2)
    ng.start("\n".join([
        upstream("fwd", "chring $arg_k", backends),
        upstream("rev", "chring $arg_k", list(reversed(backends))),
        upstream("heavy", "chring $arg_k", backends, heavy),
        front(ng.port, ["fwd", "rev", "heavy"])]))
    seen = {}
    for tag in ("fwd", "rev", "heavy"):
        digests = set()
        for i in range(40):  # requests land on both workers
            st, d = get_digest(ng.port, "/%s/?k=key%d" % (tag, i))
            check(st == 200, "/%s/: status %d" % (tag, st))
            check(len(d) == 16, "/%s/: $chring_digest %r is not 16 hex digits" % (tag, d))
            digests.add(d)
        check(len(digests) == 1, "/%s/: the workers disagree: %s" % (tag, sorted(digests)))
        seen[tag] = digests.pop()
    check(seen["fwd"] == seen["rev"], "the order servers are listed in changed the digest")
    check(seen["fwd"] != seen["heavy"], "a weight change left the digest")
    members = [(b.name, 1) for b in backends]
    r = subprocess.run([EXPECT, "--digest", "hash64", "160"] + ["%s=%d" % m for m in members],
                       stdout=subprocess.PIPE, timeout=60, check=True)
    oracle = r.stdout.decode().strip()
    check(seen["fwd"] == oracle, "$chring_digest %s, the library in another process %s"
          % (seen["fwd"], oracle))
    lib = route(ng.port, "fwd", ["k%d" % i for i in range(50)])
    check(all(v[2] == "0" for v in lib.values()), "$chring_spilled is 1 with no load")
    log("digest: %s in both workers and both orders, %s with a weight 2; the oracle agrees"
        % (seen["fwd"], seen["heavy"]))


def hot(port, path, clients, rounds):
    """rounds x clients concurrent requests of path; returns the answers."""
    answers = []
    with ThreadPoolExecutor(max_workers=clients) as pool:
        for _ in range(rounds):
            answers += list(pool.map(lambda _: get(port, path), range(clients)))
    return answers


def case_hotkey(env):
    """One hot key under concurrent clients with slow backends: with chring several backends
    serve it and none holds more than its capacity per worker; nginx's hash consistent sends it
    all to one backend."""
    backends = [Backend(env) for _ in range(4)]
    for b in backends:
        b.start()
    clients, balance = 16, 1.25
    ng = Nginx(env, workers=2)
    ng.start("\n".join([
        upstream("hot", "chring $arg_k balance=%g" % balance, backends),
        upstream("gold", "hash $arg_k consistent", backends),
        front(ng.port, ["hot", "gold"])]))
    answers = hot(ng.port, "/hot/?k=celebrity&sleep=300", clients, 4)
    check(all(a[0] == 200 for a in answers), "a hot-key request failed: %s"
          % [a for a in answers if a[0] != 200][:3])
    served = set(a[1] for a in answers)
    spilled = sum(1 for a in answers if a[3] == "1")
    check(len(served) >= 3, "the hot key was served by %d backend(s) only" % len(served))
    check(spilled > 0, "no answer says $chring_spilled=1")
    # Per worker the bound is ceil(c * (m + 1) / n) with m < clients: at most ceil(c * clients / n).
    cap = math.ceil(balance * clients / len(backends))
    peaks = {}
    for b in backends:
        for who, v in b.stats()["peak"].items():
            if who.endswith(" hot"):
                peaks[(b.port, who)] = v
    check(peaks, "the backends saw no hot requests")
    over = {k: v for k, v in peaks.items() if v > cap}
    check(not over, "above the capacity %d of one worker: %s" % (cap, over))
    log("hotkey: %d backends served it, %d spills, peaks per worker %s (cap %d)"
        % (len(served), spilled, sorted(peaks.values()), cap))
    gold = hot(ng.port, "/gold/?k=celebrity&sleep=300", clients, 1)
    check(len(set(a[1] for a in gold)) == 1, "nginx's hash consistent spread the hot key (the "
          "control should concentrate it)")


def case_backend_down(env):
    """A backend stopped: its keys go to the next replica, every request is answered; once it is
    back and fail_timeout has passed, it gets exactly its keys again."""
    backends = [Backend(env) for _ in range(4)]
    for b in backends:
        b.start()
    members = [(b.name, 1) for b in backends]
    ng = Nginx(env, workers=2)
    params = {b.name: " max_fails=1 fail_timeout=2s" for b in backends}
    ng.start("\n".join([upstream("u", "chring $arg_k", backends, params), front(ng.port, ["u"])]))
    keys = ["session-%d" % i for i in range(300)]
    before = route(ng.port, "u", keys)
    victim = backends[2]
    check(sum(1 for v in before.values() if v[0] == victim.name) > 20, "the victim owns too few keys")
    victim.stop()
    after = route(ng.port, "u", keys)
    want = expect("hash64", 160, members, keys, down=[victim.name])
    bad = [k for k in keys if after[k][0] != want[k]]
    check(not bad, "%d keys not on the next replica with %s down, e.g. %r: %s against %s"
          % (len(bad), victim.name, bad[:1], bad and after[bad[0]][0], bad and want[bad[0]]))
    kept = [k for k in keys if before[k][0] != victim.name]
    check(all(after[k][0] == before[k][0] for k in kept), "a key of a live backend moved")
    retried = [k for k in keys if after[k][1].startswith(victim.name + ", ")]
    check(retried, "no request shows the failed try in $chring_member")
    check(all(after[k][1].split(", ")[-1] == after[k][0] for k in keys),
          "$chring_member's last name is not the backend that answered")
    log("backend-down: %d keys moved to the next replica, %d requests retried after the failed try"
        % (len(keys) - len(kept), len(retried)))
    # Back up: after fail_timeout its keys return to it (one trial request per worker first).
    victim.start()
    end = time.time() + 30
    while True:
        time.sleep(0.5)
        again = route(ng.port, "u", keys)
        if all(again[k][0] == before[k][0] for k in keys):
            break
        check(time.time() < end, "the restarted backend did not get its keys back in 30 s")
    log("backend-down: the restarted backend has exactly its keys again")


def case_reload(env):
    """nginx -s reload with one server removed moves only its keys; adding it back restores the
    first placement."""
    backends = [Backend(env) for _ in range(5)]
    for b in backends:
        b.start()
    ng = Nginx(env, workers=2)
    conf = lambda bs: "\n".join([upstream("u", "chring $arg_k profile=nginx", bs), front(ng.port, ["u"])])
    ng.start(conf(backends))
    keys = ["obj/%d" % i for i in range(600)]
    first = route(ng.port, "u", keys)
    gone = backends[1]
    rest = [b for b in backends if b is not gone]
    ng.reload(conf(rest))
    second = route(ng.port, "u", keys)
    want = expect("nginx", 160, [(b.name, 1) for b in rest], keys)
    check(all(second[k][0] == want[k] for k in keys), "after the reload keys are not where the "
          "library puts them without %s" % gone.name)
    moved = [k for k in keys if second[k][0] != first[k][0]]
    check(moved and all(first[k][0] == gone.name for k in moved),
          "the reload moved keys the removed server did not own")
    check(all(second[k][0] != gone.name for k in keys), "a key still goes to the removed server")
    # A reload with an error keeps the running configuration and its rings.
    old = ng.workers_now()
    ng.write(conf(backends).replace("profile=nginx", "profile=nginx bogus=1"))
    os.kill(ng.proc.pid, signal.SIGHUP)
    end = time.time() + 20
    while 'invalid parameter "bogus=1"' not in ng.error_log():
        check(time.time() < end, "nginx did not report the bad reload in 20 s")
        time.sleep(0.05)
    check(ng.workers_now() == old, "a reload with an error replaced the workers")
    kept = route(ng.port, "u", keys)
    check(all(kept[k][0] == second[k][0] for k in keys), "a failed reload changed the placement")
    ng.reload(conf(backends))
    third = route(ng.port, "u", keys)
    check(all(third[k][0] == first[k][0] for k in keys), "adding the server back did not restore "
          "the first placement")
    log("reload: removing %s moved %d of %d keys, all its own; adding it back restored them"
        % (gone.name, len(moved), len(keys)))


def case_slow_start(env):
    """After a reload adds a server, slow_start keeps it to one request in flight per worker at
    first and the keys it refuses go to their previous owner; without slow_start it takes more.

    Eight servers, then a ninth; eight concurrent slow requests on keys the ninth owns whose
    previous owners are eight different servers, so no previous owner is ever full (each gets at
    most one) and balance=2 lets the ninth take a second request once four are in flight."""
    backends = [Backend(env) for _ in range(9)]
    for b in backends:
        b.start()
    ng = Nginx(env, workers=1)
    conf = lambda bs: "\n".join([upstream("slow", "chring $arg_k balance=2 slow_start=120s", bs),
                                 upstream("plain", "chring $arg_k balance=2", bs),
                                 front(ng.port, ["slow", "plain"])])
    old, new = backends[:8], backends[8]
    ng.start(conf(old))
    ng.reload(conf(backends))
    keys = ["item-%d" % i for i in range(5000)]
    owner9 = expect("hash64", 160, [(b.name, 1) for b in backends], keys)
    owner8 = expect("hash64", 160, [(b.name, 1) for b in old], keys)
    mine = {}
    for k in keys:
        if owner9[k] == new.name and owner8[k] not in mine:
            mine[owner8[k]] = k
    mine = list(mine.values())
    check(len(mine) == 8, "keys of the new server cover %d previous owners, not 8" % len(mine))
    results = {}
    for tag in ("slow", "plain"):
        for b in backends:
            b.reset()
        with ThreadPoolExecutor(max_workers=len(mine)) as pool:
            answers = list(pool.map(lambda k: (k, get(ng.port, "/%s/?k=%s&sleep=600" % (tag, k))), mine))
        check(all(a[1][0] == 200 for a in answers), "%s: a request failed" % tag)
        peak = max([v for w, v in new.stats()["peak"].items() if w.endswith(" " + tag)] or [0])
        elsewhere = [(k, "127.0.0.1:" + a[1]) for k, a in answers if "127.0.0.1:" + a[1] != new.name]
        results[tag] = (peak, elsewhere)
    peak, elsewhere = results["slow"]
    check(peak == 1, "slow start: the new server had %d requests in flight (1 expected)" % peak)
    check(len(elsewhere) == len(mine) - 1, "slow start: %d of %d requests refused by the new server "
          "(%d expected)" % (len(elsewhere), len(mine), len(mine) - 1))
    check(all(owner8[k] == b for k, b in elsewhere),
          "slow start: a refused key did not go to its previous owner: %s"
          % [(k, b, owner8[k]) for k, b in elsewhere if owner8[k] != b][:3])
    check(results["plain"][0] >= 2, "without slow_start the new server took %d at once (control)"
          % results["plain"][0])
    log("slow-start: new server peak 1 (without slow_start: %d), %d refused keys on their previous owner"
        % (results["plain"][0], len(elsewhere)))


BAD_CONFIGS = [
    # (what, http block text, text the error must contain)
    ("unknown option", "upstream u { chring $arg_k weight=3; server 127.0.0.1:9; }",
     'invalid parameter "weight=3"'),
    ("balance not a number", "upstream u { chring $arg_k balance=abc; server 127.0.0.1:9; }",
     'invalid balance "abc"'),
    ("balance below 1", "upstream u { chring $arg_k balance=0.5; server 127.0.0.1:9; }",
     'invalid balance "0.5"'),
    ("balance empty", "upstream u { chring $arg_k balance=; server 127.0.0.1:9; }",
     'invalid balance ""'),
    ("unknown profile", "upstream u { chring $arg_k profile=maglev; server 127.0.0.1:9; }",
     'unknown profile "maglev" (hash64, murmur32, fnv32, fnv16, xxh3, ketama, nginx, haproxy, envoy, '
     'varnish)'),
    ("custom profile", "upstream u { chring $arg_k profile=custom; server 127.0.0.1:9; }",
     'unknown profile "custom"'),
    ("vnodes 0", "upstream u { chring $arg_k vnodes=0; server 127.0.0.1:9; }", 'invalid vnodes "0"'),
    ("vnodes not a number", "upstream u { chring $arg_k vnodes=many; server 127.0.0.1:9; }",
     'invalid vnodes "many"'),
    ("vnodes too large", "upstream u { chring $arg_k vnodes=100000; server 127.0.0.1:9; }",
     'invalid vnodes "100000"'),
    ("slow_start not a time", "upstream u { chring $arg_k slow_start=soon; server 127.0.0.1:9; }",
     'invalid slow_start "soon"'),
    ("no key", "upstream u { chring; server 127.0.0.1:9; }",
     'invalid number of arguments in "chring" directive'),
    ("twice", "upstream u { chring $arg_k; chring $arg_x; server 127.0.0.1:9; }",
     '"chring" directive is duplicate'),
    ("in http", "chring $arg_k; upstream u { server 127.0.0.1:9; }",
     '"chring" directive is not allowed here'),
    ("in server", "server { listen 127.0.0.1:9; chring $arg_k; }",
     '"chring" directive is not allowed here'),
    ("in location", "server { listen 127.0.0.1:9; location / { chring $arg_k; } }",
     '"chring" directive is not allowed here'),
    ("empty upstream", "upstream u { chring $arg_k; }", 'no servers are inside upstream'),
    ("backup after chring", "upstream u { chring $arg_k; server 127.0.0.1:9; server 127.0.0.1:10 backup; }",
     'does not support parameter "backup"'),
    ("backup before chring", "upstream u { server 127.0.0.1:9; server 127.0.0.1:10 backup; chring $arg_k; }",
     'is a backup server'),
    ("max_conns before chring", "upstream u { server 127.0.0.1:9 max_conns=5; chring $arg_k; }",
     'has max_conns'),
    ("zone", "upstream u { zone z 64k; chring $arg_k; server 127.0.0.1:9; }", 'has a zone'),
    ("same server twice", "upstream u { chring $arg_k; server 127.0.0.1:9; server 127.0.0.1:9; }",
     'appears more than once'),
]


def case_badconf(env):
    """nginx -t refuses every configuration error with a clear message (and passes a good one)."""
    ng = Nginx(env)
    st, out = ng.test_config("upstream u { chring $arg_k balance=2 profile=nginx vnodes=10 "
                             "slow_start=30s; server 127.0.0.1:9 weight=2 max_fails=3 "
                             "fail_timeout=5s; server 127.0.0.1:10 down; }\n"
                             "server { listen 127.0.0.1:%d; location / { proxy_pass http://u; } }"
                             % ng.port)
    check(st == 0, "a good configuration was refused: %s" % out)
    failures = []
    for what, body, needle in BAD_CONFIGS:
        st, out = ng.test_config(body)
        if st == 0 or needle not in out or "emerg" not in out:
            failures.append("%s: status %d, output %r" % (what, st, out.strip()))
    check(not failures, "nginx -t did not refuse as expected:\n  " + "\n  ".join(failures))
    log("badconf: %d bad configurations refused by nginx -t with their messages" % len(BAD_CONFIGS))


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def threads(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def case_reloads_memory(env):
    """100 reloads of a configuration with large rings: the memory of the master and of the
    workers stays bounded (the rings of each old configuration are freed)."""
    backends = [Backend(env) for _ in range(2)]
    for b in backends:
        b.start()
    ng = Nginx(env, workers=2)
    ups = []
    for u in range(8):
        servers = "".join("        server 127.0.0.1:%d;\n" % (20000 + u * 100 + i) for i in range(30))
        ups.append("    upstream big%d {\n        chring $arg_k vnodes=1000;\n%s    }" % (u, servers))
    conf = "\n".join(ups + [upstream("u", "chring $arg_k", backends), front(ng.port, ["u"])])
    ng.start(conf)
    samples = []
    for i in range(1, 101):
        workers = ng.reload(conf)
        st, _, _, _ = get(ng.port, "/u/?k=%d" % i)
        check(st == 200, "reload %d: a request failed" % i)
        if i % 10 == 0:
            samples.append((rss_kb(ng.proc.pid), max(rss_kb(w) for w in workers), threads(ng.proc.pid)))
    log("reloads-memory: master, worker RSS (KiB) and master threads every 10 reloads: %s" % samples)
    (m10, w10, t10), (m100, w100, t100) = samples[0], samples[-1]
    # One configuration's rings: 8 x 30 x 1000 points, about 5 MB.  A leak of them would add
    # about 450 MB over 90 reloads; allow 16 MB of allocator noise.
    log("reloads-memory: master RSS %d -> %d KiB, worker %d -> %d KiB, master threads %d -> %d"
        % (m10, m100, w10, w100, t10, t100))
    check(m100 - m10 < 16 * 1024, "the master grew by %d KiB from reload 10 to 100" % (m100 - m10))
    check(w100 - w10 < 16 * 1024, "a worker grew by %d KiB from reload 10 to 100" % (w100 - w10))
    check(t100 <= t10, "the master's threads grew from %d to %d" % (t10, t100))
    check("emerg" not in ng.error_log() and "alert" not in ng.error_log(),
          "nginx logged errors: %s" % [l for l in ng.error_log().splitlines() if "emerg" in l or "alert" in l][:3])


def big_upstream(name, directive, nservers):
    """An upstream of nservers addresses (never connected to: nginx -t and a worker at rest)."""
    servers = "".join("        server 127.0.%d.%d:%d;\n" % (1 + i // 50000, (i // 250) % 200 + 1,
                                                         20000 + i % 250) for i in range(nservers))
    return "    upstream %s {\n        %s;\n%s    }" % (name, directive, servers)


def children(pid):
    """The child processes of pid (its workers, for an nginx master)."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return set(int(x) for x in f.read().split())
    except OSError:
        return set()


def start_daemon(ng, http_body, extra_env=None):
    """Starts nginx as a daemon (daemon on, nginx's default): the process started forks the
    master and exits.  Returns the master's PID (from its pid file) once its one worker is up
    and the port answers; stop it with stop_daemon()."""
    ng.daemon = "on"
    ng.write(http_body)
    env = dict(CHILD_ENV, **(extra_env or {}))
    p = realserver.Env.spawn(ng.env, "nginx-daemon-%d" % ng.port,
                             [NGINX, "-p", ng.d, "-e", ng.d + "/logs/error.log", "-c", ng.conf],
                             env=env)
    ng.env.watch(os.path.join(ng.d, "logs", "error.log"))
    try:
        rc = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise TestFailure("nginx did not go to the background in 60 s")
    check(rc == 0, "nginx (daemon on) exited with %d" % rc)
    pidfile = os.path.join(ng.d, "nginx.pid")
    end = time.time() + 30
    master = 0
    while time.time() < end and master == 0:
        try:
            with open(pidfile) as f:
                master = int(f.read().strip() or "0")
        except (OSError, ValueError):
            master = 0
        if master == 0:
            time.sleep(0.02)
    check(master > 0, "no pid file from the nginx daemon")
    while time.time() < end and len(children(master)) != ng.workers:
        time.sleep(0.02)
    wait_port(ng.port)
    return master


def stop_daemon(master, timeout=10.0):
    """SIGQUIT to a daemon master, then SIGKILL to it and its workers if it has not ended
    within timeout (bounded; the master is not our child, so it is polled through /proc)."""
    workers = children(master)
    try:
        os.kill(master, signal.SIGQUIT)
    except ProcessLookupError:
        return
    end = time.time() + timeout
    while time.time() < end and os.path.exists("/proc/%d" % master):
        time.sleep(0.05)
    if os.path.exists("/proc/%d" % master):
        for pid in [master] + sorted(workers):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def nginx_t_peak_kb(ng, http_body):
    """nginx -t on a configuration: its peak RSS (ru_maxrss of the reaped process, KiB)."""
    p = ng.env.path("t-%d.conf" % free_port())
    ng.write(http_body, p)
    with open(ng.env.path("t-out-%d.txt" % free_port()), "w") as out:
        proc = subprocess.Popen([NGINX, "-t", "-p", ng.d, "-e", ng.d + "/logs/t.log", "-c", p],
                                stdout=out, stderr=subprocess.STDOUT, env=CHILD_ENV)
        end = time.time() + 120
        while time.time() < end:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                check(proc.returncode == 0, "nginx -t refused the configuration (status %d)"
                      % proc.returncode)
                return ru.ru_maxrss
            time.sleep(0.05)
        proc.kill()
        proc.wait()
    raise TestFailure("nginx -t did not end in 120 s")


# Bytes per point of an upstream's ring (docs/nginx.md "Memory"): what nginx -t and a running
# nginx hold beyond the same servers balanced by round robin.  Bounds, generous, above the
# measured figures (28 at the peak of nginx -t, 24 at rest in the master and a worker).  The
# peak's bound fails a module that lets the build make spare blocks ready (chring_set_prefault
# not called: 111-132 measured).
MEM_PEAK_PER_POINT = 48
MEM_REST_PER_POINT = 48
MEM_SERVERS = int(os.environ.get("CHRING_NGINX_MEM_SERVERS", "10000"))
MEM_VNODES = 160


def case_memory(env):
    """Memory per point of a large upstream (10,000 servers x 160 points): the peak of nginx -t
    and the RSS of the master and a worker a second after the configuration was loaded, nginx
    started as a daemon as in production, each against the same servers balanced by round
    robin, below the documented bounds.  Run twice with chring: as it comes, and with the ring's
    trimmer late (CHRING_SPARE_IDLE_MS=60000, what a loaded machine does when the trimmer thread
    is not scheduled before nginx forks its daemon and workers, which have no trimmer): the
    memory at rest must not depend on that thread."""
    points = MEM_SERVERS * MEM_VNODES
    runs = [("rr", "least_conn", None),
            ("chring", "chring $arg_k vnodes=%d" % MEM_VNODES, None),
            ("chring-late-trimmer", "chring $arg_k vnodes=%d" % MEM_VNODES,
             {"CHRING_SPARE_IDLE_MS": "60000"})]
    figures = {}
    for kind, directive, extra_env in runs:
        ng = Nginx(env, workers=1)
        body = "\n".join([big_upstream("big", directive, MEM_SERVERS), front(ng.port, ["big"])])
        peak = nginx_t_peak_kb(ng, body)
        master = start_daemon(ng, body, extra_env)
        try:
            time.sleep(1.0)  # at rest: a second after the configuration was loaded
            workers = children(master)
            check(len(workers) == 1, "%s: %d workers" % (kind, len(workers)))
            w = workers.pop()
            figures[kind] = {"t_peak": peak, "master": rss_kb(master), "worker": rss_kb(w)}
        finally:
            stop_daemon(master)
        log("memory: %s: nginx -t peak %d KiB; at rest master %d KiB, worker %d KiB"
            % (kind, peak, figures[kind]["master"], figures[kind]["worker"]))
    failures = []
    for kind in ("chring", "chring-late-trimmer"):
        per = {k: (figures[kind][k] - figures["rr"][k]) * 1024.0 / points
               for k in ("t_peak", "master", "worker")}
        log("memory: %s: %d x %d = %d points; bytes per point over round robin: nginx -t peak "
            "%.1f, at rest master %.1f, worker %.1f"
            % (kind, MEM_SERVERS, MEM_VNODES, points, per["t_peak"], per["master"], per["worker"]))
        if per["t_peak"] > MEM_PEAK_PER_POINT:
            failures.append("%s: nginx -t peaked at %.1f bytes per point (bound %d)"
                            % (kind, per["t_peak"], MEM_PEAK_PER_POINT))
        for who in ("master", "worker"):
            if per[who] > MEM_REST_PER_POINT:
                failures.append("%s: the %s holds %.1f bytes per point at rest (bound %d)"
                                % (kind, who, per[who], MEM_REST_PER_POINT))
    check(not failures, "; ".join(failures))


# Bytes a request in flight may cost beyond the same request to a one-server upstream, for an
# upstream of 10,000 servers (docs/nginx.md "Memory"): nginx's own round-robin bitmap of tried
# peers is 1.25 KB there; the module used to take 16 bytes per server (160 KB).
REQ_EXTRA_BYTES = 16 * 1024
REQ_INFLIGHT = 200


def case_request_memory(env):
    """What a request in flight costs does not grow with the upstream's servers: 200 requests
    held at once through an upstream of 10,000 servers (9,999 down, so that every key reaches
    the one backend) against the same through an upstream of that backend alone, the worker's
    RSS read while all 200 are at the backend.  And a request that tries more servers than its
    first room (4) keeps every try: 6 refusing servers and a live one, max_fails=0, one point each, a key walks
    up to 7 servers and $chring_member names each once, the live one last."""
    be = Backend(env)
    be.start()
    dead = [free_port() for _ in range(6)]
    ng = Nginx(env, workers=1)
    down = "".join("        server 127.0.%d.%d:%d down;\n" % (1 + i // 50000, (i // 250) % 200 + 1,
                                                              20000 + i % 250) for i in range(9999))
    walk = "".join("        server 127.0.0.1:%d max_fails=0;\n" % p for p in dead)
    ng.start("\n".join([
        "    upstream big {\n        chring $arg_k vnodes=1;\n        server %s;\n%s    }"
        % (be.name, down),
        upstream("small", "chring $arg_k vnodes=1", [be]),
        "    upstream walk {\n        chring $arg_k vnodes=1;\n        server %s max_fails=0;\n%s"
        "    }" % (be.name, walk),
        front(ng.port, ["small", "big", "walk"])]))
    worker = ng.workers_now().pop()

    def wave(tag):
        be.reset()
        with ThreadPoolExecutor(max_workers=REQ_INFLIGHT) as pool:
            futs = [pool.submit(get, ng.port, "/%s/?k=w%d&sleep=3000" % (tag, i))
                    for i in range(REQ_INFLIGHT)]
            end = time.time() + 20
            held = 0
            while time.time() < end:
                held = max([v for w, v in be.stats()["peak"].items() if w.endswith(" " + tag)] or [0])
                if held >= REQ_INFLIGHT:
                    break
                time.sleep(0.05)
            rss = rss_kb(worker)
            answers = [f.result() for f in futs]
        check(held == REQ_INFLIGHT, "%s: %d of %d requests held at the backend at once"
              % (tag, held, REQ_INFLIGHT))
        check(all(a[0] == 200 for a in answers), "%s: a request failed" % tag)
        return rss

    wave("small")  # nginx's own pools and connections for 200 requests, once
    small = wave("small")
    big = wave("big")
    extra = (big - small) * 1024.0 / REQ_INFLIGHT
    log("request-memory: worker RSS with %d requests in flight: %d KiB (1 server), %d KiB "
        "(10,000 servers): %.0f bytes a request more" % (REQ_INFLIGHT, small, big, extra))
    check(extra <= REQ_EXTRA_BYTES, "a request in flight through 10,000 servers costs %.0f bytes "
          "more than through one (bound %d)" % (extra, REQ_EXTRA_BYTES))

    # One point per server: the seven arcs' walks are 1 to 7 servers long, whatever the ports;
    # keys until the longest walk is met (bounded), and at least one must pass the first room of
    # 4 tries (a fixed count of keys can miss the short arcs of a placement).
    longest, tried = 0, 0
    for i in range(2000):
        if longest == 7:
            break
        tried += 1
        st, body, member, _ = get(ng.port, "/walk/?k=walk%d" % i)
        names = member.split(", ")
        check(st == 200 and "127.0.0.1:" + body == be.name, "walk key %d: %d %r" % (i, st, body))
        check(names[-1] == be.name and len(set(names)) == len(names) and
              set(names[:-1]) <= set("127.0.0.1:%d" % p for p in dead),
              "walk key %d: $chring_member %r" % (i, member))
        longest = max(longest, len(names))
    check(longest >= 5, "the longest walk tried %d servers over %d keys (more than the first "
          "room of 4 expected)" % (longest, tried))
    log("request-memory: %d keys through 6 refusing servers: up to %d tries each, all named"
        % (tried, longest))


CASES = {
    "placement": case_placement,
    "hotkey": case_hotkey,
    "backend-down": case_backend_down,
    "reload": case_reload,
    "slow-start": case_slow_start,
    "badconf": case_badconf,
    "digest": case_digest,
    "reloads-memory": case_reloads_memory,
    "memory": case_memory,
    "request-memory": case_request_memory,
}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--backend":
        backend_main(int(sys.argv[2]))
        return 0
    return realserver.main(CASES, (NGINX, EXPECT), (MODULE,), env_class=Env)


if __name__ == "__main__":
    sys.exit(main())
