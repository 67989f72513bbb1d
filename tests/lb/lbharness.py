"""Shared pieces of the chring-lb tests: nginx backends and fronts, the balancer, clients.

Ports, processes, cleanup, logs, checks and the command line are the harness of every
real-server suite, tests/harness/realserver.py; this module adds what the balancer's tests share
and keeps the harness's names (check, log, Env, run, main ...) for the scripts of tests/lb.
Everything listens on 127.0.0.1 only, lives under one temporary folder, and is stopped by its
PID when the test ends (also on failure).  Every wait is bounded.
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
import realserver  # noqa: E402
from realserver import TestFailure, check, free_port, log, skip, wait_port, wait_until  # noqa: E402,F401

CHRING_LB = os.environ.get("CHRING_LB", "chring-lb")
CHRING_LB_EXPECT = os.environ.get("CHRING_LB_EXPECT", "chring-lb-expect")
NGINX = os.environ.get("NGINX", "/usr/sbin/nginx")

SLOW_FILE_BYTES = 300 * 1024
HUGE_FILE_BYTES = 8 * 1024 * 1024


class Env(realserver.Env):
    """A temporary folder (chring-lb-NAME-*) and every process started in it."""

    def __init__(self, name):
        super().__init__(name, "lb")


class Nginx:
    """One nginx master process (1 worker) with its own prefix directory."""

    def __init__(self, env, name, http_body, workers=1):
        self.env = env
        self.name = name
        self.d = env.path(name)
        for sub in ("", "tmp", "www", "logs"):
            os.makedirs(os.path.join(self.d, sub), exist_ok=True)
            os.chmod(os.path.join(self.d, sub), 0o777)
        self.conf = os.path.join(self.d, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(
                """
worker_processes {workers};
daemon off;
pid {d}/nginx.pid;
error_log {d}/logs/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format lb '$msec $request_time $status $body_bytes_sent $server_port "$request" $request_length';
    access_log {d}/logs/access.log lb;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    default_type text/plain;
{body}
}}
""".format(d=self.d, body=http_body, workers=workers))
        self.proc = None

    def start(self, port):
        self.proc = self.env.spawn(self.name, [NGINX, "-p", self.d, "-e", self.d + "/logs/error.log",
                                               "-c", self.conf])
        self.env.watch(os.path.join(self.d, "logs", "error.log"))
        wait_port(port, proc=self.proc)

    def stop(self):
        if self.proc is not None:
            self.env.stop(self.proc, signal.SIGTERM)

    def access_log(self):
        p = os.path.join(self.d, "logs", "access.log")
        rows = []
        if not os.path.exists(p):
            return rows
        with open(p) as f:
            for line in f:
                parts = line.split(" ", 5)
                if len(parts) < 6:
                    continue
                req, _, rlen = parts[5].strip().rpartition(" ")
                # integer milliseconds: nginx's $msec and $request_time have ms resolution
                end = int(parts[0].replace(".", ""))
                rt = int(parts[1].replace(".", ""))
                rows.append({"start": end - rt, "end": end, "status": int(parts[2]),
                             "bytes": int(parts[3]), "port": int(parts[4]), "request": req,
                             "request_length": int(rlen)})
        return rows


class Backend(Nginx):
    """An nginx answering "$server_port\\n" for every path, and a few hundred KB at limit_rate under
    /slow/ so that slow requests overlap."""

    def __init__(self, env, idx, rate="600k"):
        self.port = free_port()
        name = "backend%d" % idx
        d = env.path(name)
        os.makedirs(os.path.join(d, "www"), exist_ok=True)
        os.chmod(d, 0o777)
        os.chmod(os.path.join(d, "www"), 0o777)
        big = os.path.join(d, "www", "big.bin")
        with open(big, "wb") as f:
            f.write((b"0123456789abcdef" * 64) * (SLOW_FILE_BYTES // 1024))
        os.chmod(big, 0o644)
        huge = os.path.join(d, "www", "huge.bin")
        with open(huge, "wb") as f:
            f.write(b"H" * HUGE_FILE_BYTES)
        os.chmod(huge, 0o644)
        body = """
    server {{
        listen 127.0.0.1:{port} reuseport;
        location / {{ return 200 "$server_port\\n"; }}
        location /hop {{
            return 200 "$server_port secret=[$http_x_secret] ka=[$http_keep_alive] te=[$http_te] up=[$http_upgrade] pc=[$http_proxy_connection] conn=[$http_connection] xff=[$http_x_forwarded_for] e2e=[$http_x_end_to_end]\\n";
        }}
        location /huge/ {{
            root {www};
            try_files /huge.bin =404;
        }}
        location /slow/ {{
            root {www};
            try_files /big.bin =404;
            limit_rate {rate};
            add_header X-Backend-Port $server_port;
        }}
    }}
""".format(port=self.port, www=os.path.join(d, "www"), rate=rate)
        super().__init__(env, name, body)
        self.member = "127.0.0.1:%d" % self.port

    def start(self):
        super().start(self.port)
        return self


class NginxHashFront(Nginx):
    """nginx itself as the consistent-hash balancer: upstream with `hash $arg_k consistent;`."""

    def __init__(self, env, backends, key="$arg_k", workers=1, access_log=True):
        self.port = free_port()
        servers = "\n".join("        server %s;" % b.member for b in backends)
        body = """
    upstream chring_backends {{
        hash {key} consistent;
{servers}
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://chring_backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
""".format(key=key, servers=servers, port=self.port)
        super().__init__(env, "front", body, workers=workers)

    def start(self):
        super().start(self.port)
        return self


class Balancer:
    """chring-lb on 127.0.0.1.  stats_listen: its own --stats-listen port (stats_port), where the
    stats are read; spawn_kw: extra Popen arguments (preexec_fn for a resource limit); program:
    another chring-lb build to run (default CHRING_LB)."""

    def __init__(self, env, args, name="lb", threads=2, stats_listen=False, spawn_kw=None,
                 program=None):
        self.env = env
        self.port = free_port()
        self.name = name
        self.stats_port = self.port
        extra = []
        if stats_listen:
            self.stats_port = free_port()
            extra = ["--stats-listen", "127.0.0.1:%d" % self.stats_port]
        elif "--stats-allow" not in args:
            # the main listener answers /_chring/ only to the peers an explicit --stats-allow
            # names (docs/lb.md, "Security model")
            extra = ["--stats-allow", "127.0.0.0/8,::1"]
        self.argv = [program or CHRING_LB, "--listen", "127.0.0.1:%d" % self.port, "--threads", str(threads)] + extra + list(args)
        self.spawn_kw = spawn_kw or {}
        self.proc = None

    def start(self):
        log("start", " ".join(self.argv))
        self.proc = self.env.spawn(self.name, self.argv, **self.spawn_kw)
        wait_port(self.port, proc=self.proc)
        end = time.time() + 10
        while time.time() < end:
            try:
                self.stats()
                return self
            except (OSError, http.client.HTTPException, ValueError):
                time.sleep(0.05)
        raise TestFailure("balancer does not answer /_chring/stats")

    def stats(self):
        c = http.client.HTTPConnection("127.0.0.1", self.stats_port, timeout=5)
        try:
            c.request("GET", "/_chring/stats")
            r = c.getresponse()
            body = r.read()
            if r.status != 200:
                raise TestFailure("stats answered %d" % r.status)
            return json.loads(body)
        finally:
            c.close()

    def wait_idle(self, timeout=10.0):
        """Waits until no lease is outstanding; returns the stats."""
        end = time.time() + timeout
        st = self.stats()
        while time.time() < end:
            st = self.stats()
            if st["ring"]["leases"] == 0 and st["balancer"]["active"] == 0:
                return st
            time.sleep(0.05)
        raise TestFailure("leases not released: %s" % json.dumps(st["ring"]))

    def hup(self):
        os.kill(self.proc.pid, signal.SIGHUP)

    def alive(self):
        return self.proc.poll() is None

    def output(self):
        return self.env.output(self.name)

    def stop(self):
        """SIGTERM, bounded wait; checks a clean exit and no sanitizer report."""
        rc = self.env.stop(self.proc, signal.SIGTERM, timeout=20)
        out = self.output()
        # "too few references" is libevent freeing a bufferevent that was freed already
        bad = [l for l in out.splitlines() if "AddressSanitizer" in l or "runtime error" in l
               or "LeakSanitizer" in l or "ThreadSanitizer" in l or "too few references" in l]
        check(not bad, "sanitizer report from the balancer:\n" + out[-6000:])
        check(rc == 0, "balancer exited with status %s:\n%s" % (rc, out[-3000:]))
        return out


def expect(members, keys, profile=None, replicas=1, vnodes=None):
    argv = [CHRING_LB_EXPECT]
    if profile:
        argv += ["--profile", profile]
    if vnodes:
        argv += ["--vnodes", str(vnodes)]
    if replicas > 1:
        argv += ["--replicas", str(replicas)]
    argv += list(members)
    data = "".join(k + "\n" for k in keys)
    out = subprocess.run(argv, input=data.encode(), stdout=subprocess.PIPE, check=True, timeout=60).stdout
    lines = out.decode().splitlines()
    check(len(lines) == len(keys), "oracle answered %d lines for %d keys" % (len(lines), len(keys)))
    if replicas == 1:
        return lines
    return [l.split(" ") for l in lines]


def expect_digest(members, profile=None, vnodes=None):
    """The placement digest (16 hex digits) of a ring of these members, by the oracle."""
    argv = [CHRING_LB_EXPECT]
    if profile:
        argv += ["--profile", profile]
    if vnodes:
        argv += ["--vnodes", str(vnodes)]
    argv += ["--digest"] + list(members)
    out = subprocess.run(argv, stdout=subprocess.PIPE, check=True, timeout=60).stdout.decode().strip()
    check(len(out) == 16 and all(c in "0123456789abcdef" for c in out), "oracle digest %r" % out)
    return out


def digest_of(st):
    """The digest in a stats answer, checked to be 16 lower-case hex digits."""
    d = st["ring"].get("digest")
    check(isinstance(d, str) and len(d) == 16 and all(c in "0123456789abcdef" for c in d),
          "stats digest %r is not 16 hex digits" % (d,))
    return d


class Client:
    """A keep-alive HTTP/1.1 client connection (reconnects when the server closes)."""

    def __init__(self, port, timeout=20):
        self.port = port
        self.timeout = timeout
        self.c = None

    def get(self, path, headers=None, method="GET", body=None):
        for attempt in range(2):
            if self.c is None:
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            try:
                self.c.request(method, path, body=body, headers=headers or {})
                r = self.c.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.close()
                return r.status, data, r
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest) as e:
                # a keep-alive connection closed by the server between requests: retry once on a
                # new connection (a real client does the same)
                self.close()
                if attempt == 1:
                    raise
        raise TestFailure("unreachable")

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None


def sanitized():
    """True for a chring-lb built with AddressSanitizer (.ci/steps/40-lb-asan.sh) or
    ThreadSanitizer (.ci/steps/41-lb-tsan.sh): both map shadow memory of their own."""
    with open(CHRING_LB, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__tsan_init" in data


def vm_kb(pid, field):
    """A field of /proc/PID/status in kB ("VmRSS:", "VmHWM:"), 0 if it is not there."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def summary(port):
    """The stats listener's summary (GET /_chring/stats?members=0 on 127.0.0.1:port), parsed;
    a failed check unless it answers 200."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", "/_chring/stats?members=0")
        r = c.getresponse()
        body = r.read()
        check(r.status == 200, "summary answered %d" % r.status)
        return json.loads(body)
    finally:
        c.close()


def status_of(resp):
    """The status code of the answer at the start of resp (bytes), or None when resp does not
    start with an HTTP/1.x status line."""
    m = re.match(rb"HTTP/1\.[01] (\d{3})(?![0-9])", resp)
    return int(m.group(1)) if m else None


def port_of(body):
    try:
        return int(body.decode().strip())
    except ValueError:
        return None


def main(tests, needs=None, why="", extra_needs=None, all_case=False):
    """The command line of a suite script of tests/lb: realserver.main() with an Env of this
    module.  `SCRIPT NAME` runs tests[NAME]; exit 2 for a usage error, 77 (skipped) when a
    program of needs (default: chring-lb) is missing or extra_needs(NAME) names something else
    missing; all_case adds `SCRIPT all` (every test in turn)."""
    return realserver.main(tests, needs or (CHRING_LB,), why=why, env_class=Env,
                           extra_needs=extra_needs, all_case=all_case)


def run(main):
    """Runs one test function with an Env; exit status 0 = pass, 1 = fail."""
    return realserver.run(main, env_class=Env)


class EchoBackend:
    """A Python HTTP/1.1 backend (thread per connection) answering every request with
    "<port> <method> <sha256 of the body> <body length>", for body-integrity checks."""

    def __init__(self):
        import hashlib
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def handle_any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                outer.seen.append((self.command, dict(self.headers), len(body)))
                out = ("%d %s %s %d\n" % (outer.port, self.command, hashlib.sha256(body).hexdigest(),
                                          len(body))).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

        self.seen = []
        self.port = free_port()
        self.srv = ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.srv.daemon_threads = True
        self.member = "127.0.0.1:%d" % self.port
        self.t = threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.t.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class RawBackend:
    """A raw TCP backend on 127.0.0.1 that records every byte it receives (per connection, in
    order) and answers each request it can frame (head through CRLF CRLF, then Content-Length
    bytes) with answer(path) -> bytes, written in one piece exactly as given: crafted answers,
    broken framing, extra bytes after a body.  Bounded: each connection is read with a timeout
    and the server is shut down by close()."""

    def __init__(self, answer=None):
        import socketserver
        outer = self
        self.answer = answer or (lambda path: b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        self.lock = threading.Lock()
        self.conns = []  # bytearray per connection
        self.paths = []  # request targets in arrival order

        class H(socketserver.BaseRequestHandler):
            def handle(self):
                buf = bytearray()
                with outer.lock:
                    outer.conns.append(buf)
                self.request.settimeout(5)
                pending = b""
                for _ in range(10000):
                    try:
                        data = self.request.recv(65536)
                    except (socket.timeout, OSError):
                        return
                    if not data:
                        return
                    with outer.lock:
                        buf.extend(data)
                    pending += data
                    while b"\r\n\r\n" in pending:
                        head, rest = pending.split(b"\r\n\r\n", 1)
                        n = 0
                        for line in head.split(b"\r\n")[1:]:
                            k, _, v = line.partition(b":")
                            if k.strip().lower() == b"content-length":
                                n = int(v.strip() or 0)
                        if len(rest) < n:
                            break
                        pending = rest[n:]
                        path = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1") \
                            if head.count(b" ") >= 2 else ""
                        with outer.lock:
                            outer.paths.append(path)
                        try:
                            self.request.sendall(outer.answer(path))
                        except OSError:
                            return

        class S(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.port = free_port()
        self.srv = S(("127.0.0.1", self.port), H)
        self.member = "127.0.0.1:%d" % self.port
        self.t = threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.1},
                                  daemon=True)
        self.t.start()

    def received(self):
        """Every byte received so far, connections concatenated in order."""
        with self.lock:
            return b"".join(bytes(c) for c in self.conns)

    def reset(self):
        """Forgets what was received (connections stay open and keep recording)."""
        with self.lock:
            for c in self.conns:
                del c[:]
            self.paths.clear()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
