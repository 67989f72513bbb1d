#!/usr/bin/env python3
"""Tests of vmod_chring with the real varnishd of the system (docs/varnish.md).

    varnish_test.py CASE        run one case (see CASES at the end)

Each case starts one varnishd (the stock binary, the VMOD imported from the build folder) in
the foreground with its own work folder and ports on 127.0.0.1, and Python backends in threads
of this process; varnishd is stopped by its PID when the case ends, also on failure (the harness
of the real-server suites, tests/harness/realserver.py).  Every loop
and every wait is bounded; no assertion is about time.  Expected owners come from the chring
command-line tool (tools/chring, same library), and for the varnish profile from Varnish's own
directors.shard in the same varnishd.
"""
import http.client
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from realserver import TestFailure, check, free_port, log, stop_process, wait_port  # noqa: E402
import realserver  # noqa: E402

VARNISHD = os.environ.get("CHRING_VARNISHD", "/usr/sbin/varnishd")
VMOD = os.environ.get("CHRING_VMOD", "libvmod_chring.so")
TOOL = os.environ.get("CHRING_TOOL", "chring")
COMPAT_DATA = os.environ.get("COMPAT_DATA", "")
# A sanitizer build of the VMOD (.ci/steps/45-varnish-asan.sh): the runtime to preload into
# varnishd, whose reports go to the work folder and fail the case.
PRELOAD = os.environ.get("CHRING_VARNISH_PRELOAD", "")


# ------------------------------------------------------------------------------------------------
# Backends: threads of this process.  Each answers "X-Backend: <name>" in one write with
# TCP_NODELAY; /health answers 200 or 503 (its probe); paths starting /fail/ answer 503 while
# `fail` is set.  A shared gate can hold requests until enough are in flight across all backends
# (the hot-key case), bounded by a deadline so nothing waits forever.
# ------------------------------------------------------------------------------------------------


class Gate:
    def __init__(self):
        self.cond = threading.Condition()
        self.want = 0  # 0: no gate
        self.inflight = 0
        self.peak = 0
        self.want_reached = False

    def enter(self):
        with self.cond:
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)
            self.cond.notify_all()
            if self.want:
                deadline = time.monotonic() + 20
                while (self.inflight < self.want and not self.want_reached
                       and time.monotonic() < deadline):
                    self.cond.wait(0.5)
                if self.inflight >= self.want:
                    self.want_reached = True

    def leave(self):
        with self.cond:
            self.inflight -= 1


class Backend:
    def __init__(self, name, gate=None):
        self.name = name
        self.healthy = True
        self.fail = False
        self.gate = gate
        self.lock = threading.Lock()
        self.release = threading.Event()  # /hold/ paths wait for it (bounded)
        self.inflight = 0
        self.peak = 0
        self.requests = 0
        backend = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                sock = self.request
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                buf = b""
                while True:
                    while b"\r\n\r\n" not in buf:
                        try:
                            data = sock.recv(65536)
                        except OSError:
                            return
                        if not data:
                            return
                        buf += data
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    path = head.split(b"\r\n", 1)[0].split(b" ")[1].decode()
                    if not backend.answer(sock, path):
                        return

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, sock, path):
        status = "200 OK"
        if path == "/health":
            status = "200 OK" if self.healthy else "503 Unavailable"
        else:
            with self.lock:
                self.requests += 1
                self.inflight += 1
                self.peak = max(self.peak, self.inflight)
            if self.gate is not None:
                self.gate.enter()
            if path.startswith("/hold/"):
                self.release.wait(30)
            if path.startswith("/drop/"):
                with self.lock:
                    self.inflight -= 1
                return False  # closed without an answer: a fetch error
            if self.fail and path.startswith("/fail/"):
                status = "503 Unavailable"
        body = self.name.encode()
        if path.startswith("/big/"):
            body = body.ljust(4 << 20, b".")  # 4 MB
        msg = ("HTTP/1.1 %s\r\nContent-Length: %d\r\nX-Backend: %s\r\n\r\n"
               % (status, len(body), self.name)).encode() + body
        if path != "/health":
            with self.lock:
                self.inflight -= 1
            if self.gate is not None:
                self.gate.leave()
        try:
            sock.sendall(msg)  # one write (Nagle and delayed ACKs)
        except OSError:
            return False
        return path != "/health"  # a probe waits for the close

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# ------------------------------------------------------------------------------------------------
# varnishd
# ------------------------------------------------------------------------------------------------


class Varnish:
    """One varnishd in the foreground, in a folder of its own (a harness Env): its output in
    varnishd.out there, stopped by stop(), or at the end of the case at the latest."""

    def __init__(self, vcl):
        self.env = realserver.Env("varnishd", "varnish")
        self.dir = self.env.dir
        self.port = free_port()
        self.admin = free_port()
        self.nvcl = 0
        path = self.write_vcl(vcl)
        env = dict(os.environ)
        if PRELOAD:
            env["LD_PRELOAD"] = PRELOAD
            env["ASAN_OPTIONS"] = ("detect_leaks=0:abort_on_error=1:log_path=%s/asan"
                                   % self.dir)
            env["UBSAN_OPTIONS"] = ("print_stacktrace=1:halt_on_error=1:log_path=%s/ubsan"
                                    % self.dir)
        self.proc = self.env.spawn("varnishd", [VARNISHD, "-F", "-j", "none", "-n", self.dir + "/n", "-a", "127.0.0.1:%d" % self.port,
             "-T", "127.0.0.1:%d" % self.admin, "-f", path, "-s", "malloc,32m",
             "-p", "vcc_err_unref=off", "-p", "thread_pool_min=50", "-p", "vsl_space=1M",
             "-p", "vcc_allow_inline_c=off"], env=env)
        wait_port(self.port, timeout=60, proc=self.proc)

    def write_vcl(self, vcl):
        self.nvcl += 1
        path = os.path.join(self.dir, "v%d.vcl" % self.nvcl)
        with open(path, "w") as f:
            f.write(vcl)
        return path

    def adm(self, *args):
        r = subprocess.run(["varnishadm", "-n", self.dir + "/n", "-t", "30"] + list(args),
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout + r.stderr

    def reload(self, vcl, discard_old=None):
        """vcl.load + vcl.use of a new VCL; returns its name."""
        path = self.write_vcl(vcl)
        name = "v%d" % self.nvcl
        rc, out = self.adm("vcl.load", name, path)
        check(rc == 0, "vcl.load: %s" % out)
        rc, out = self.adm("vcl.use", name)
        check(rc == 0, "vcl.use: %s" % out)
        if discard_old:
            rc, out = self.adm("vcl.discard", discard_old)
            check(rc == 0, "vcl.discard %s: %s" % (discard_old, out))
        return name

    def child_pid(self):
        try:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                kids = f.read().split()
            return int(kids[0]) if kids else None
        except OSError:
            return None

    def stop(self):
        stop_process(self.proc, signal.SIGTERM, timeout=30)
        reports = [f for f in os.listdir(self.dir) if f.startswith(("asan.", "ubsan."))]
        text = ""
        for f in reports:
            with open(os.path.join(self.dir, f), errors="replace") as fh:
                text += fh.read()[:4000]
        self.env.close()
        check(not text, "sanitizer report from varnishd:\n" + text)


def get(port, path, headers=None, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path, headers=headers or {})
    r = c.getresponse()
    body = r.read()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    if conn is None:
        c.close()
    return r.status, hdrs, body


def tool_owners(profile, vnodes, members, keys, down=()):
    """Owners from the chring tool: members is a list of (name, weight)."""
    lines = ["ADD " + " ".join(n for n, _ in members)]
    for n, w in members:
        if w != 1:
            lines.append("WEIGHT %s %d" % (n, w))
    if down:
        lines.append("DOWN " + " ".join(down))
    lines += ["LOOKUP " + k for k in keys]
    r = subprocess.run([TOOL, "--profile", profile, "--vnodes", str(vnodes)],
                       input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "chring tool: %s" % r.stderr)
    out = r.stdout.split("\n")
    skip = 1 + sum(1 for _, w in members if w != 1) + (1 if down else 0)
    return dict(zip(keys, out[skip:skip + len(keys)]))


def tool_digest(profile, vnodes, members):
    """The chring tool's DIGEST for a membership: members is a list of (name, weight), added in
    the order given."""
    lines = ["ADD " + " ".join(n for n, _ in members)]
    lines += ["WEIGHT %s %d" % (n, w) for n, w in members if w != 1]
    lines.append("DIGEST")
    r = subprocess.run([TOOL, "--profile", profile, "--vnodes", str(vnodes)],
                       input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "chring tool: %s" % r.stderr)
    return r.stdout.split("\n")[len(lines) - 1]


# ------------------------------------------------------------------------------------------------
# VCL
# ------------------------------------------------------------------------------------------------


def vcl_backends(backends, probe=False):
    out = []
    for b in backends:
        p = ""
        if probe:
            p = ('\n  .probe = { .url = "/health"; .interval = 0.1s; .timeout = 2s; '
                 '.window = 2; .threshold = 1; .initial = 2; }')
        out.append('backend %s { .host = "127.0.0.1"; .port = "%d";%s }' % (b.name, b.port, p))
    return "\n".join(out)


def vcl_common(body_init, recv_extra="", backend_side=False, ring="ring", synth_extra=""):
    recv = ('  set req.backend_hint = %s.backend(key = req.url);\n' % ring) if not backend_side else ""
    # .spilled() is the fetch's: read in vcl_backend_response, handed to the client in a header.
    fetch = """
sub vcl_backend_response {
  set beresp.http.x-spilled = %s.spilled();
  set beresp.http.x-chosen = %s.chosen();
}
""" % (ring, ring)
    if backend_side:
        fetch = """
sub vcl_backend_fetch {
  set bereq.backend = %s.backend(key = bereq.url);
}
sub vcl_backend_response {
  if (beresp.status == 503 && bereq.retries < 2) { return (retry); }
  set beresp.http.x-retries = bereq.retries;
  set beresp.http.x-spilled = %s.spilled();
}
""" % (ring, ring)
    return """
sub vcl_init {
%s
}
sub vcl_recv {
  if (req.url == "/_leases") { return (synth(200, "leases")); }
%s%s  return (pass);
}
%s
sub vcl_synth {
  if (resp.reason == "leases") {
    set resp.http.x-leases = %s.leases();
    set resp.http.x-stats = %s.stats();
    return (deliver);
  }
%s
}
sub vcl_deliver {
  set resp.http.x-member = %s.member(req.url);
  set resp.http.x-lookup = %s.lookup(req.url);
}
""" % (body_init, recv_extra, recv, fetch, ring, ring, synth_extra, ring, ring)


def header(backends_text, init, **kw):
    return ('vcl 4.1;\nimport chring from "%s";\nimport directors;\n%s\n' % (VMOD, backends_text)
            + vcl_common(init, **kw))


def leases(v):
    st, h, _ = get(v.port, "/_leases")
    check(st == 200, "/_leases: %d" % st)
    return int(h["x-leases"]), h.get("x-stats", "")


def owners_through(v, keys, headers=None):
    out = {}
    conn = http.client.HTTPConnection("127.0.0.1", v.port, timeout=30)
    for k in keys:
        st, h, _ = get(v.port, k, headers=headers, conn=conn)
        check(st == 200, "%s: status %d" % (k, st))
        out[k] = h["x-backend"]
    conn.close()
    return out


KEYS = ["/obj/%d" % i for i in range(300)]


def with_setup(names, fn, gate=None):
    """Runs fn with backends of these names, stopped afterwards."""
    backends = [Backend(n, gate) for n in names]
    try:
        return fn(backends)
    finally:
        for b in backends:
            b.stop()


# ------------------------------------------------------------------------------------------------
# Cases
# ------------------------------------------------------------------------------------------------


def case_placement():
    """hash64 and xxh3 directors: every key's backend and .member() as the tool places it."""
    def run(bs):
        b1, b2, b3 = bs
        init = """
  new ring = chring.director(profile = "hash64", vnodes = 160, balance = 1.25);
  ring.add_backend(b1);
  ring.add_backend(b2, weight = 2);
  ring.add_backend(b3, ident = "cache-3");
  new fast = chring.director(profile = "xxh3", vnodes = 40);
  fast.add_backend(b1);
  fast.add_backend(b2);
  fast.add_backend(b3);"""
        extra = '  if (req.http.x-dir == "fast") { set req.backend_hint = fast.backend(key = req.url); return (pass); }\n'
        v = Varnish(header(vcl_backends(bs), init, recv_extra=extra))
        try:
            names = {"b1": "b1", "b2": "b2", "b3": "cache-3"}
            want = tool_owners("hash64", 160, [("b1", 1), ("b2", 2), ("cache-3", 1)], KEYS)
            got = owners_through(v, KEYS)
            bad = [k for k in KEYS if names[got[k]] != want[k]]
            check(not bad, "hash64: %d of %d keys differ from the tool, e.g. %s"
                  % (len(bad), len(KEYS), bad[:3]))
            st, h, _ = get(v.port, KEYS[7])
            check(h["x-member"] == want[KEYS[7]], ".member(): %s, tool %s"
                  % (h["x-member"], want[KEYS[7]]))
            check(h["x-chosen"] == h["x-backend"], ".chosen() %s, answered by %s"
                  % (h["x-chosen"], h["x-backend"]))
            # One connection: each request's task (and lease) ends before the next is read.
            vcl_name = {"b1": "b1", "b2": "b2", "cache-3": "b3"}
            conn = http.client.HTTPConnection("127.0.0.1", v.port, timeout=30)
            for k in KEYS[:40]:
                st, h, _ = get(v.port, k, conn=conn)
                check(h["x-lookup"] == vcl_name[want[k]] and h["x-spilled"] == "false",
                      "%s: .lookup() %s .spilled() %s, tool %s"
                      % (k, h["x-lookup"], h["x-spilled"], want[k]))
            want = tool_owners("xxh3", 40, [("b1", 1), ("b2", 1), ("b3", 1)], KEYS)
            got = owners_through(v, KEYS, headers={"x-dir": "fast"})
            bad = [k for k in KEYS if got[k] != want[k]]
            check(not bad, "xxh3: %d keys differ from the tool" % len(bad))
            n, stats = leases(v)
            check(n == 0, "leases at rest: %d (%s)" % (n, stats))
            log("placement: 300 keys x 2 directors as the tool; leases at rest 0;", stats)
        finally:
            v.stop()
    with_setup(["b1", "b2", "b3"], run)


def case_digest():
    """.digest() as the tool's DIGEST for the same membership (built in another order), for a
    hash64 and a varnish director; unchanged while a probe marks a backend sick; changed by a
    reload that changes the membership, and back when the membership comes back."""
    def vcl(bs, ring_members):
        init = '  new ring = chring.director(profile = "hash64", vnodes = 160);\n'
        for name, weight, ident in ring_members:
            init += "  ring.add_backend(%s%s%s);\n" % (
                name, ", weight = %d" % weight if weight != 1 else "",
                ', ident = "%s"' % ident if ident else "")
        init += '  new vd = chring.director(profile = "varnish");\n'
        init += "".join("  vd.add_backend(%s);\n" % n for n, _, _ in ring_members)
        extra = '  if (req.url == "/_digest") { return (synth(200, "digest")); }\n'
        synth = ('  if (resp.reason == "digest") {\n'
                 '    set resp.http.x-digest = ring.digest();\n'
                 '    set resp.http.x-digest-vd = vd.digest();\n'
                 '    set resp.http.x-stats = ring.stats();\n    return (deliver);\n  }')
        return header(vcl_backends(bs, probe=True), init, recv_extra=extra, synth_extra=synth)

    def digests(v):
        st, h, _ = get(v.port, "/_digest")
        check(st == 200, "/_digest: %d" % st)
        return h["x-digest"], h["x-digest-vd"], h["x-stats"]

    def run(bs):
        first = [("b1", 1, None), ("b2", 2, None), ("b3", 1, "cache-3")]
        v = Varnish(vcl(bs, first))
        try:
            for b in bs:
                wait_health(v, b.name, "healthy")
            # Asked before any key is placed: the director's membership is the ring's already.
            ours, ours_vd, _ = digests(v)
            check(len(ours) == 16 and all(ch in "0123456789abcdef" for ch in ours),
                  "not 16 lowercase hex digits: %r" % ours)
            want = tool_digest("hash64", 160, [("cache-3", 1), ("b2", 2), ("b1", 1)])
            check(ours == want, "hash64: .digest() %s, the tool's DIGEST %s" % (ours, want))
            want_vd = tool_digest("varnish", 67, [("b3", 1), ("b1", 1), ("b2", 1)])
            check(ours_vd == want_vd, "varnish: .digest() %s, the tool's DIGEST %s"
                  % (ours_vd, want_vd))
            check(ours != ours_vd, "two placements, one digest %s" % ours)
            # A backend its probe marks sick is down for the ring, which places no key on it;
            # the placement's digest stays.
            bs[1].healthy = False
            wait_health(v, "b2", "sick")
            sick = owners_through(v, KEYS[:60])
            check(all(sick[k] != "b2" for k in sick), "b2 still answers while sick")
            sick_digest, sick_vd, stats = digests(v)
            check("down=1" in stats, "b2 is not down in the ring: %s" % stats)
            check(sick_digest == ours and sick_vd == ours_vd,
                  "b2 sick changed the digest: %s -> %s, %s -> %s"
                  % (ours, sick_digest, ours_vd, sick_vd))
            bs[1].healthy = True
            wait_health(v, "b2", "healthy")
            # A reload that changes the membership: b4 joins, b3 (cache-3) leaves.
            second = [("b1", 1, None), ("b2", 2, None), ("b4", 1, None)]
            v.reload(vcl(bs, second))
            changed, changed_vd, stats = digests(v)
            check("members=3" in stats, "after the reload: %s" % stats)
            check(changed != ours and changed_vd != ours_vd,
                  "the reload changed the membership, not the digest: %s, %s"
                  % (changed, changed_vd))
            want = tool_digest("hash64", 160, [("b4", 1), ("b1", 1), ("b2", 2)])
            check(changed == want, "after the reload: .digest() %s, the tool's %s"
                  % (changed, want))
            want_vd = tool_digest("varnish", 67, [("b4", 1), ("b2", 1), ("b1", 1)])
            check(changed_vd == want_vd, "after the reload (varnish): .digest() %s, the tool's %s"
                  % (changed_vd, want_vd))
            # The first membership again, on the ring carried over: the first digest again.
            v.reload(vcl(bs, first))
            back, back_vd, _ = digests(v)
            check(back == ours and back_vd == ours_vd,
                  "the first membership again: %s, %s; first %s, %s"
                  % (back, back_vd, ours, ours_vd))
            n, stats = leases(v)
            check(n == 0, "leases at rest: %d (%s)" % (n, stats))
            log("digest: hash64 %s and varnish %s as the tool's DIGEST; unchanged with b2 sick; "
                "%s and %s after the reload (b4 for b3), the first again after the reload back"
                % (ours, ours_vd, changed, changed_vd))
        finally:
            v.stop()
    with_setup(["b1", "b2", "b3", "b4"], run)


def case_parity():
    """profile = "varnish" against directors.shard in the same varnishd, and Varnish's vtc URLs."""
    def run(bs):
        s1, s2, s3, s4 = bs
        init = """
  new ring = chring.director(profile = "varnish");
  ring.add_backend(s1);
  ring.add_backend(s2, weight = 2);
  ring.add_backend(s3);
  ring.add_backend(s4, weight = 3);
  new shard = directors.shard();
  shard.add_backend(s1);
  shard.add_backend(s2, weight = 2);
  shard.add_backend(s3);
  shard.add_backend(s4, weight = 3);
  shard.reconfigure();
  new vtc = chring.director(profile = "varnish", vnodes = 25);
  vtc.add_backend(s1);
  vtc.add_backend(s2);
  vtc.add_backend(s3);"""
        extra = ('  if (req.http.x-dir == "shard") { set req.backend_hint = shard.backend(by = URL); return (pass); }\n'
                 '  if (req.http.x-dir == "vtc") { set req.backend_hint = vtc.backend(key = req.url); return (pass); }\n')
        v = Varnish(header(vcl_backends(bs), init, recv_extra=extra))
        try:
            keys = KEYS + ["/", "/index.html", "/a?b=c", "/%e2%82%ac"]
            ours = owners_through(v, keys)
            theirs = owners_through(v, keys, headers={"x-dir": "shard"})
            bad = [k for k in keys if ours[k] != theirs[k]]
            check(not bad, "%d of %d URLs differ from directors.shard, e.g. %s"
                  % (len(bad), len(keys), [(k, ours[k], theirs[k]) for k in bad[:3]]))
            want = tool_owners("varnish", 67, [("s1", 1), ("s2", 2), ("s3", 1), ("s4", 3)], keys)
            bad = [k for k in keys if ours[k] != want[k]]
            check(not bad, "%d URLs differ from the tool" % len(bad))
            # A sick backend: both directors walk on clockwise from where Varnish starts.
            rc, out = v.adm("backend.set_health", "s2", "sick")
            check(rc == 0, "backend.set_health: %s" % out)
            ours_sick = owners_through(v, keys)
            theirs_sick = owners_through(v, keys, headers={"x-dir": "shard"})
            bad = [k for k in keys if ours_sick[k] != theirs_sick[k]]
            check(not bad, "s2 sick: %d of %d URLs differ from directors.shard, e.g. %s"
                  % (len(bad), len(keys), [(k, ours_sick[k], theirs_sick[k]) for k in bad[:3]]))
            check(all(ours_sick[k] == ours[k] for k in keys if ours[k] != "s2"),
                  "s2 sick moved keys of other backends")
            rc, out = v.adm("backend.set_health", "s2", "auto")
            check(rc == 0, "backend.set_health: %s" % out)
            # Varnish's own directors_c00005.vtc: s1, s2, s3, replicas 25, by URL.
            vec = []
            with open(os.path.join(COMPAT_DATA, "varnish_c00005.tsv")) as f:
                for line in f:
                    p = line.rstrip("\n").split("\t")
                    if p[0] == "url":
                        vec.append((p[1], p[2]))
            check(len(vec) == 3, "c00005 vectors: %d" % len(vec))
            got = owners_through(v, [u for u, _ in vec], headers={"x-dir": "vtc"})
            bad = [(u, got[u], w) for u, w in vec if got[u] != w]
            check(not bad, "directors_c00005 vectors: %s" % bad)
            log("parity: %d URLs as directors.shard (4 backends, weights 1,2,1,3, replicas 67), "
                "also with s2 sick, and the 3 URLs of directors_c00005.vtc" % len(keys))
        finally:
            v.stop()
    with_setup(["s1", "s2", "s3", "s4"], run)


def three_backends(args):
    """vcl_init's lines of a director `ring` (these arguments) over b1, b2 and b3."""
    return ("\n  new ring = chring.director(%s);\n  ring.add_backend(b1);\n"
            "  ring.add_backend(b2);\n  ring.add_backend(b3);" % args)


def case_hotkey():
    """24 concurrent clients on one key: it spills, no backend above its capacity."""
    clients = 24
    gate = Gate()

    def run(bs):
        init = three_backends('profile = "hash64", balance = 1.25')
        v = Varnish(header(vcl_backends(bs), init))
        try:
            gate.want = clients
            gate.want_reached = False
            with ThreadPoolExecutor(clients) as ex:
                res = list(ex.map(lambda i: get(v.port, "/hot"), range(clients)))
            check(all(st == 200 for st, _, _ in res), "failed requests: %s"
                  % [st for st, _, _ in res if st != 200])
            check(gate.want_reached, "the %d requests were never all in flight at once (peak %d)"
                  % (clients, gate.peak))
            per = {}
            for _, h, _ in res:
                per[h["x-backend"]] = per.get(h["x-backend"], 0) + 1
            owner = res[0][1]["x-member"]
            spilled = sum(1 for _, h, _ in res if h["x-spilled"] == "true")
            check(spilled == clients - per.get(owner, 0),
                  ".spilled() said true %d times, %d went past the owner %s"
                  % (spilled, clients - per.get(owner, 0), owner))
            check(all((h["x-spilled"] == "true") == (h["x-backend"] != owner) for _, h, _ in res),
                  ".spilled() disagrees with where a request went")
            cap = -(-int(1.25 * clients * 100) // (3 * 100))  # ceil(c * K / n) = 10
            peaks = {b.name: b.peak for b in bs}
            check(max(peaks.values()) <= cap, "a backend above its capacity %d: %s" % (cap, peaks))
            check(len(per) >= 3, "the hot key did not spill over the 3 backends: %s" % per)
            gate.want = 0
            n, stats = leases(v)
            check(n == 0, "leases at rest: %d (%s)" % (n, stats))
            log("hotkey: %d clients, per backend %s, peaks %s <= %d; %s" % (clients, per, peaks,
                                                                           cap, stats))
        finally:
            gate.want = 0
            v.stop()
    with_setup(["b1", "b2", "b3"], run, gate=gate)


def wait_health(v, name, state):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rc, out = v.adm("backend.list", name)
        for line in out.splitlines():
            if ("." + name) in line.split()[0] if line.split() else False:
                cols = line.split()
                if state in cols[1:4]:
                    return
        time.sleep(0.1)
    raise TestFailure("backend %s never became %s: %s" % (name, state, v.adm("backend.list")[1]))


def case_sick():
    """A backend its probe marks sick: only its keys move, and they come back; it warms up
    again (slow start) while the others stay at full scale."""
    def run(bs):
        init = """
  new ring = chring.director(profile = "hash64", slow_start = 120s);
  ring.add_backend(b1);
  ring.add_backend(b2);
  ring.add_backend(b3);
  ring.add_backend(b4);"""
        extra = '  if (req.url ~ "^/_scale/") { return (synth(200, "scale")); }\n'
        scale = ('  if (resp.reason == "scale") {\n'
                 '    set resp.http.x-scale = ring.scale(b2);\n'
                 '    set resp.http.x-scale-b1 = ring.scale(b1);\n    return (deliver);\n  }')
        v = Varnish(header(vcl_backends(bs, probe=True), init, recv_extra=extra,
                           synth_extra=scale))
        try:
            members = [(b.name, 1) for b in bs]
            for b in bs:
                wait_health(v, b.name, "healthy")
            before = owners_through(v, KEYS)
            check(before == tool_owners("hash64", 160, members, KEYS), "healthy: not as the tool")
            bs[1].healthy = False
            wait_health(v, "b2", "sick")
            sick = owners_through(v, KEYS)
            want = tool_owners("hash64", 160, members, KEYS, down=["b2"])
            check(sick == want, "b2 sick: not as the tool with b2 down")
            moved = [k for k in KEYS if sick[k] != before[k]]
            check(moved and all(before[k] == "b2" for k in moved),
                  "keys moved that b2 did not own")
            check(all(sick[k] != "b2" for k in KEYS), "b2 still answers while sick")
            bs[1].healthy = True
            wait_health(v, "b2", "healthy")
            after = owners_through(v, KEYS)
            check(after == before, "b2 healthy again: %d keys not back"
                  % sum(1 for k in KEYS if after[k] != before[k]))
            st, h, _ = get(v.port, "/_scale/")
            check(0 < float(h["x-scale"]) < 0.5 and float(h["x-scale-b1"]) == 1.0,
                  "after recovery b2 should warm up, b1 not: scales %s, %s"
                  % (h["x-scale"], h["x-scale-b1"]))
            n, stats = leases(v)
            check(n == 0, "leases at rest: %d" % n)
            log("sick: b2 sick moved its %d keys only, healthy again got them back and warms "
                "up (scale %s); %s" % (len(moved), h["x-scale"], stats))
        finally:
            v.stop()
    with_setup(["b1", "b2", "b3", "b4"], run)


def case_retry():
    """return (retry) after a 503: the fetch asks again and skips the backend that failed."""
    def run(bs):
        init = """
  new ring = chring.director(profile = "hash64");
  ring.add_backend(b1);
  ring.add_backend(b2);
  ring.add_backend(b3);"""
        v = Varnish(header(vcl_backends(bs), init, backend_side=True))
        try:
            keys = ["/fail/%d" % i for i in range(30)]
            members = [(b.name, 1) for b in bs]
            plain = tool_owners("hash64", 160, members, keys)
            got = owners_through(v, keys)
            check(got == plain, "backend-side placement not as the tool")
            by_name = {b.name: b for b in bs}
            for k in keys[:10]:
                owner = plain[k]
                by_name[owner].fail = True
                st, h, _ = get(v.port, k)
                by_name[owner].fail = False
                want = tool_owners("hash64", 160, members, [k], down=[owner])[k]
                check(st == 200, "%s: status %d after retry" % (k, st))
                check(h["x-retries"] == "1", "%s: retries %s" % (k, h.get("x-retries")))
                check(h["x-backend"] == want, "%s: retry went to %s, want %s (owner %s failed)"
                      % (k, h["x-backend"], want, owner))
            n, stats = leases(v)
            check(n == 0, "leases at rest: %d (%s)" % (n, stats))
            check("retries=10" in stats, "ring retries: %s" % stats)
            log("retry: 10 fetches retried past their failed owner to the next member; %s" % stats)
        finally:
            v.stop()
    with_setup(["b1", "b2", "b3"], run)


def reload_vcl(bs, names, slow="0s", old_label=None):
    init = '  new ring = chring.director(profile = "hash64", slow_start = %s);\n' % slow
    init += "".join("  ring.add_backend(%s);\n" % n for n in names)
    extra = ('  if (req.url ~ "^/_scale/") { return (synth(200, "scale")); }\n')
    if old_label:
        # Requests marked x-old run on the older VCL: its director is older than the ring's
        # membership (the stragglers of a reload).
        extra += '  if (req.http.x-old) { return (vcl(%s)); }\n' % old_label
    scale = ""
    if any(b.name == "b4" for b in bs):
        scale = ('  if (resp.reason == "scale") {\n'
                 '    set resp.http.x-scale = ring.scale(b4);\n    return (deliver);\n  }')
    text = header(vcl_backends(bs), init, recv_extra=extra, synth_extra=scale)
    return text


def case_reload():
    """vcl.load + vcl.use under traffic: b4 joins, b3 leaves; no failed request; keys move
    only to or from them; the joiner warms up (slow start); the old VCL discarded, leases 0."""
    def run(bs):
        v = Varnish(reload_vcl(bs, ["b1", "b2", "b3"], slow="120s"))
        stop = threading.Event()
        failures = []
        count = [0]

        def traffic():
            conn = http.client.HTTPConnection("127.0.0.1", v.port, timeout=30)
            i = 0
            while not stop.is_set() and count[0] < 200000:
                try:
                    st, _, _ = get(v.port, KEYS[i % len(KEYS)], conn=conn)
                    if st != 200:
                        failures.append(st)
                except Exception as e:  # noqa: BLE001 - every failure is recorded
                    failures.append(repr(e))
                    conn = http.client.HTTPConnection("127.0.0.1", v.port, timeout=30)
                count[0] += 1
                i += 1

        try:
            before = owners_through(v, KEYS)
            threads = [threading.Thread(target=traffic) for _ in range(4)]
            for t in threads:
                t.start()
            while count[0] < 400 and all(t.is_alive() for t in threads):
                time.sleep(0.05)  # traffic is flowing before the reload
            rc, out = v.adm("vcl.label", "previous", "boot")
            check(rc == 0, "vcl.label: %s" % out)
            v2 = v.reload(reload_vcl(bs, ["b1", "b2", "b4"], slow="120s", old_label="previous"))
            seen = count[0]
            while count[0] < seen + 400 and all(t.is_alive() for t in threads):
                time.sleep(0.05)  # and after it, on the new VCL, before the old one goes
            # The old VCL's director (still reachable through its label) places by its own
            # membership, b1 b2 b3, while the new one places by b1 b2 b4.
            old = owners_through(v, KEYS[:100], headers={"x-old": "1"})
            want_old = tool_owners("hash64", 160, [("b1", 1), ("b2", 1), ("b3", 1)], KEYS[:100])
            check(old == want_old, "the old VCL: %d of 100 keys not by its own membership"
                  % sum(1 for k in old if old[k] != want_old[k]))
            v.reload(reload_vcl(bs, ["b1", "b2", "b4"], slow="120s"))
            for name in (v2, "previous", "boot"):
                rc, out = v.adm("vcl.discard", name)
                check(rc == 0, "vcl.discard %s: %s" % (name, out))
            seen = count[0]
            while count[0] < seen + 200 and all(t.is_alive() for t in threads):
                time.sleep(0.05)
            stop.set()
            for t in threads:
                t.join(60)
            # At rest (no request in flight), plain placement: a warming member with no load
            # still admits one, so every key is on its owner.
            after = owners_through(v, KEYS)
            check(not failures, "%d failed requests during the reload: %s"
                  % (len(failures), failures[:5]))
            want = tool_owners("hash64", 160, [("b1", 1), ("b2", 1), ("b4", 1)], KEYS)
            check(after == want, "after the reload: %d keys not as the tool"
                  % sum(1 for k in KEYS if after[k] != want[k]))
            moved = [k for k in KEYS if after[k] != before[k]]
            check(all(before[k] == "b3" or after[k] == "b4" for k in moved),
                  "a key moved between unchanged backends")
            n, stats = leases(v)
            check(n == 0, "leases at rest: %d (%s)" % (n, stats))
            check("members=3" in stats, "members: %s" % stats)
            # Slow start applies to the joiner: under 24 concurrent requests on one of b4's
            # keys, b4 admits fewer than the others (scale 0.1 of its capacity).
            st, h, _ = get(v.port, "/_scale/b4")
            scale = float(h["x-scale"])
            check(0 < scale < 0.5, "b4 is not warming up: scale %s" % scale)
            hot = next(k for k in KEYS if want[k] == "b4")
            gate = Gate()
            for b in bs:
                b.gate = gate
            gate.want = 24
            gate.want_reached = False
            with ThreadPoolExecutor(24) as ex:
                res = list(ex.map(lambda i: get(v.port, hot), range(24)))
            gate.want = 0
            for b in bs:
                b.gate = None
            check(all(st == 200 for st, _, _ in res), "hot key during warm-up failed")
            per = {}
            for _, h, _ in res:
                per[h["x-backend"]] = per.get(h["x-backend"], 0) + 1
            check(gate.want_reached, "the 24 requests were never all in flight")
            # At scale 1 the owner b4 would take its full capacity (10), as many as any other;
            # warming, it takes fewer than either unchanged member.
            check(per.get("b4", 0) < min(per.get("b1", 0), per.get("b2", 0)),
                  "the warming joiner b4 (scale %.3f) took %s of its hot key" % (scale, per))
            log("reload: %d requests, none failed; %d keys moved, all from b3 or to b4; "
                "warming b4 (scale %.3f) took %d of 24 on its hot key (%s); %s"
                % (count[0], len(moved), scale, per.get("b4", 0), per, stats))
        finally:
            stop.set()
            v.stop()
    with_setup(["b1", "b2", "b3", "b4"], run)


def wait_leases_zero(v):
    """Leases go back when tasks end, which varnishd does after the client's answer: a bounded
    wait for the state, not a timing assertion."""
    deadline = time.monotonic() + 30
    while True:
        n, stats = leases(v)
        if n == 0 or time.monotonic() > deadline:
            return n, stats
        time.sleep(0.1)


def case_errors():
    """Leases go back on fetch errors and aborted requests, client side and backend side."""
    def run(bs):
        init = """
  new ring = chring.director(profile = "hash64");
  ring.add_backend(b1);
  ring.add_backend(b2);
  ring.add_backend(b3);
  new late = chring.director(profile = "hash64");
  late.add_backend(b1);
  late.add_backend(b2);
  late.add_backend(b3);"""
        extra = '  if (req.http.x-dir == "late") { return (pass); }\n'
        v = Varnish(header(vcl_backends(bs), init, recv_extra=extra).replace(
            "sub vcl_deliver {", """sub vcl_backend_fetch {
  if (bereq.http.x-dir == "late") { set bereq.backend = late.backend(key = bereq.url); }
}
sub vcl_deliver {""", 1).replace(
            '    set resp.http.x-leases = ring.leases();',
            '    set resp.http.x-leases = ring.leases() + late.leases();'))
        try:
            for hdr in ({}, {"x-dir": "late"}):
                # Fetch errors: every backend closes without an answer.
                for i in range(12):
                    st, _, _ = get(v.port, "/drop/%d" % i, headers=hdr)
                    check(st == 503, "/drop/%d: status %d" % (i, st))
                n, stats = wait_leases_zero(v)
                check(n == 0, "after fetch errors (%s): leases %d (%s)" % (hdr, n, stats))
                # Aborted requests: 12 clients go away while their fetches are held.
                for b in bs:
                    b.release.clear()
                socks = []
                for i in range(12):
                    c = socket.create_connection(("127.0.0.1", v.port), timeout=30)
                    extra_hdr = "".join("%s: %s\r\n" % kv for kv in hdr.items())
                    c.sendall(("GET /hold/%d HTTP/1.1\r\nHost: x\r\n%s\r\n"
                               % (i, extra_hdr)).encode())
                    socks.append(c)
                deadline = time.monotonic() + 30
                while sum(b.inflight for b in bs) < 12 and time.monotonic() < deadline:
                    time.sleep(0.05)
                check(sum(b.inflight for b in bs) == 12, "the held fetches did not all arrive")
                n, _ = leases(v)
                check(n == 12, "12 requests in flight: leases %d" % n)
                for c in socks:
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
                    c.close()  # a reset: the clients are gone
                for b in bs:
                    b.release.set()
                n, stats = wait_leases_zero(v)
                check(n == 0, "after aborted requests (%s): leases %d (%s)" % (hdr, n, stats))
            log("errors: leases back to 0 after 12 fetch errors and 12 aborted requests, "
                "placed client side and backend side")
        finally:
            for b in bs:
                b.release.set()
            v.stop()
    with_setup(["b1", "b2", "b3"], run)


def status_kb(pid, field):
    """A kB field of /proc/PID/status (VmRSS, VmHWM), 0 if absent."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def rss_kb(pid):
    return status_kb(pid, "VmRSS")


def case_reloads_memory():
    """100 reloads (load, use, discard the previous) under leases: the child's memory is flat."""
    def run(bs):
        names = ["b1", "b2", "b3"]
        v = Varnish(reload_vcl(bs, names))
        try:
            prev = "boot"
            samples = []
            for i in range(100):
                members = names if i % 2 == 0 else names[:2]
                prev = v.reload(reload_vcl(bs, members), discard_old=prev)
                st, _, _ = get(v.port, KEYS[i])
                check(st == 200, "request after reload %d: %d" % (i, st))
                if i in (19, 99):
                    time.sleep(1)  # let the discarded VCLs' cooldown finish before sampling
                    samples.append(rss_kb(v.child_pid()))
            n, stats = leases(v)
            check(n == 0, "leases at rest: %d" % n)
            growth = samples[1] - samples[0]
            check(growth < 8192, "child RSS grew %d kB from reload 20 to 100" % growth)
            log("reloads-memory: RSS after 20 reloads %d kB, after 100 %d kB (%+d kB); %s"
                % (samples[0], samples[1], growth, stats))
        finally:
            v.stop()
    with_setup(["b1", "b2", "b3"], run)


def case_build_memory():
    """A director of 600,000 points (3 backends, vnodes 200,000: a snapshot of about 11 MB, past
    the 8 MB from which a build makes spare blocks ready): the child's peak resident memory rises
    by the ring and its build's scratch at the first request (the build), not by the five spare
    blocks of a ring built for bursts (docs/varnish.md, "Memory")."""
    def run(bs):
        init = three_backends('profile = "hash64", vnodes = 200000')
        v = Varnish(header(vcl_backends(bs), init))
        try:
            pid = v.child_pid()
            before = status_kb(pid, "VmHWM")
            st, h, _ = get(v.port, KEYS[0])  # the ring is built at its first use
            check(st == 200, "first request: %d" % st)
            after = status_kb(pid, "VmHWM")
            rest = status_kb(pid, "VmRSS")
            # The snapshot: 600,000 points at about 19 bytes (an 8-byte position, a 2-byte
            # owner slot, the line index's 8), 11.4 MB; the build's scratch 16 bytes a point,
            # 9.6 MB.  Five spares would add 57 MB.
            ring_kb = 600000 * 19 // 1024
            bound = 3 * ring_kb + 8192
            rise = after - before
            check(rise < bound, "the build raised the child's peak by %d kB, bound %d kB (the ring "
                  "about %d kB)" % (rise, bound, ring_kb))
            log("build-memory: the build raised the child's peak by %d kB (bound %d kB, the ring "
                "about %d kB); resident %d kB" % (rise, bound, ring_kb, rest))
        finally:
            v.stop()
    with_setup(["b1", "b2", "b3"], run)


def case_unload():
    """A VCL without chring replaces the last one with it and the old one is discarded (the
    VMOD's last user gone), twice; a VCL importing it again places as the tool, and the cache
    process survives throughout."""
    def run(bs):
        names = ["b1", "b2", "b3"]
        v = Varnish(reload_vcl(bs, names))
        try:
            check(get(v.port, KEYS[0])[0] == 200, "first request")
            plain = ('vcl 4.1;\n%s\nsub vcl_recv { set req.backend_hint = b1; return (pass); }\n'
                     % vcl_backends(bs))
            prev = v.reload(plain, discard_old="boot")
            for i in range(3):
                check(get(v.port, KEYS[i])[0] == 200, "request without chring")
            prev = v.reload(reload_vcl(bs, names), discard_old=prev)
            got = owners_through(v, KEYS[:50])
            want = tool_owners("hash64", 160, [(n, 1) for n in names], KEYS[:50])
            check(got == want, "after the VMOD came back: not as the tool")
            prev = v.reload(plain, discard_old=prev)
            check(get(v.port, KEYS[0])[0] == 200, "request after the second unload")
            check(v.proc.poll() is None and v.child_pid() is not None, "varnishd lost its child")
            rc, out = v.adm("status")
            check(rc == 0 and "running" in out, "child not running: %s" % out)
            log("unload: the last chring VCL discarded twice, chring imported again, placement "
                "as the tool")
        finally:
            v.stop()
    with_setup(["b1", "b2", "b3"], run)



def case_sequential():
    """300 URLs sent one after another, each on a new connection after the previous answer
    arrived (pass, placed in vcl_recv, 4 backends): with nothing in flight every URL is on its
    owner as the tool places it.  The lease ends with the fetch, so no phantom load from the
    previous request is left to push a key off its owner."""
    def vcl(bs, names):
        init = '  new ring = chring.director(profile = "hash64", slow_start = 30s);\n'
        init += "".join("  ring.add_backend(%s);\n" % n for n in names)
        return header(vcl_backends(bs), init)

    def back_to_back(v, names):
        want = tool_owners("hash64", 160, [(n, 1) for n in names], KEYS)
        got = {}
        for k in KEYS:
            st, h, _ = get(v.port, k)  # a new connection each, after the last answer
            check(st == 200, "%s: status %d" % (k, st))
            got[k] = h["x-backend"]
        bad = [k for k in KEYS if got[k] != want[k]]
        check(not bad, "%s: %d of %d back-to-back URLs off their owner, e.g. %s"
              % (" ".join(names), len(bad), len(KEYS), [(k, got[k], want[k]) for k in bad[:3]]))
        return got

    def run(bs):
        names = ["b1", "b2", "b3", "b4"]
        v = Varnish(vcl(bs, names))
        try:
            before = back_to_back(v, names)
            n, stats = leases(v)
            check(n == 0, "leases at rest: %d (%s)" % (n, stats))
            check("spills=0" in stats, "spills with nothing in flight: %s" % stats)
            # A reload that adds b5 (warming up): keys move only to b5.
            v.reload(vcl(bs, names + ["b5"]))
            after = back_to_back(v, names + ["b5"])
            moved = [k for k in KEYS if after[k] != before[k]]
            check(moved and all(after[k] == "b5" for k in moved),
                  "after adding b5, keys moved between unchanged backends: %s"
                  % [(k, before[k], after[k]) for k in moved if after[k] != "b5"][:3])
            log("sequential: %d back-to-back URLs (new connections) all on their owner, before "
                "and after a reload adding b5 (%d moved, all to b5); %s"
                % (len(KEYS), len(moved), stats))
        finally:
            v.stop()
    with_setup(["b1", "b2", "b3", "b4", "b5"], run)


def case_fini():
    """Every method called in vcl_fini (and .backend() in vcl_recv before), then the VCL
    discarded: the director is never touched after it is freed (the sanitizer build reports
    a use after free otherwise), the cache process keeps running, and the next VCL places as
    the tool."""
    def run(bs):
        names = ["b1", "b2", "b3"]
        init = '  new ring = chring.director(profile = "hash64");\n'
        init += "".join("  ring.add_backend(%s);\n" % n for n in names)
        fini = """
sub vcl_fini {
  if (ring.backend(key = "/x") == ring.lookup("/x")) { }
  if (ring.member("/x") == ring.digest()) { }
  if (ring.spilled() || ring.leases() > 0 || ring.load(b1) > 0 || ring.scale(b1) > 0) { }
  if (ring.stats() == "") { }
}
"""
        v = Varnish(header(vcl_backends(bs), init) + fini)
        try:
            check(get(v.port, KEYS[0])[0] == 200, "first request")
            prev = "boot"
            for i in range(3):
                prev = v.reload(header(vcl_backends(bs), init) + fini, discard_old=prev)
                check(get(v.port, KEYS[i])[0] == 200, "request after discard %d" % i)
            time.sleep(1)  # the discarded VCLs' cooldown, then their fini runs
            rc, out = v.adm("panic.show")  # exit 0 only when there is a panic to show
            check(rc != 0 and "Panic" not in out, "the child panicked: %s" % out[:2000])
            got = owners_through(v, KEYS[:50])
            want = tool_owners("hash64", 160, [(n, 1) for n in names], KEYS[:50])
            check(got == want, "after three discards: not as the tool")
            check(v.proc.poll() is None and v.child_pid() is not None, "varnishd lost its child")
            log("fini: every method in vcl_fini, 3 VCLs discarded, child alive, placement as the "
                "tool")
        finally:
            v.stop()
    with_setup(["b1", "b2", "b3"], run)


def case_badargs():
    """Every bad argument fails vcl.load, with a message naming the argument and the rule; a
    placement method in vcl_init fails it too (the membership is not complete there)."""
    def run(bs):
        ok_init = '  new ring = chring.director(profile = "hash64");\n  ring.add_backend(b1);\n'
        v = Varnish(header(vcl_backends(bs), ok_init))
        try:
            bad = [
                ('haproxy with backend names',
                 '  new ring = chring.director(profile = "haproxy");\n  ring.add_backend(b1);\n',
                 ["ring.add_backend(b1)", "haproxy", "server ids"]),
                ('too many points for a member',
                 '  new ring = chring.director(vnodes = 16777216);\n'
                 '  ring.add_backend(b1, weight = 2);\n',
                 ["ring.add_backend(b1)", "too many points"]),
                ('too many points for the ring',
                 '  new ring = chring.director(vnodes = 16777216);\n'
                 + "".join("  ring.add_backend(%s, weight = 1, ident = \"m%d\");\n"
                           % ("b1", i) for i in range(130)),
                 ["too many points", "ring would have"]),
                ('balance 0.5', '  new ring = chring.director(balance = 0.5);\n',
                 ["balance", ">= 1"]),
                ('balance -3', '  new ring = chring.director(balance = -3);\n',
                 ["balance", ">= 1"]),
                ('slow_start -1s', '  new ring = chring.director(slow_start = -1s);\n',
                 ["slow_start", "out of range"]),
                ('unknown profile', '  new ring = chring.director(profile = "sha1");\n',
                 ["profile", "unknown"]),
                ('vnodes with ketama', '  new ring = chring.director(profile = "ketama", vnodes = 100);\n',
                 ["vnodes", "ketama"]),
                ('weight 0', '  new ring = chring.director();\n  ring.add_backend(b1, weight = 0);\n',
                 ["weight", "out of range"]),
                ('haproxy weight 300',
                 '  new ring = chring.director(profile = "haproxy");\n'
                 '  ring.add_backend(b1, weight = 300, ident = "1");\n',
                 ["weight", "1..256"]),
                ('.member() in vcl_init',
                 '  new ring = chring.director();\n  ring.add_backend(b1);\n'
                 '  if (ring.member("/x") == "b1") { }\n  ring.add_backend(b2);\n',
                 ["ring.member()", "not in vcl_init"]),
                ('.backend() in vcl_init',
                 '  new ring = chring.director();\n  ring.add_backend(b1);\n'
                 '  if (ring.backend("/x") == b1) { }\n',
                 ["ring.backend()", "not in vcl_init"]),
                ('.digest() in vcl_init',
                 '  new ring = chring.director();\n  ring.add_backend(b1);\n'
                 '  if (ring.digest() == "") { }\n',
                 ["ring.digest()", "not in vcl_init"]),
                ('.lookup() in vcl_init',
                 '  new ring = chring.director();\n  ring.add_backend(b1);\n'
                 '  if (ring.lookup("/x") == b1) { }\n',
                 ["ring.lookup()", "not in vcl_init"]),
            ]
            for i, (what, init, words) in enumerate(bad):
                path = v.write_vcl(header(vcl_backends(bs), init))
                rc, out = v.adm("vcl.load", "bad%d" % i, path)
                check(rc != 0, "%s: vcl.load succeeded: %s" % (what, out))
                missing = [w for w in words if w not in out]
                check(not missing, "%s: the message lacks %s: %s" % (what, missing, out))
            # Varnish 7.1 has no $Restrict: add_backend outside vcl_init fails the request
            # (VCL failure, 503), and the director keeps its backends.
            extra = '  if (req.url == "/add") { ring.add_backend(b2); }\n'
            v.reload(header(vcl_backends(bs), ok_init, recv_extra=extra))
            st, _, _ = get(v.port, "/add")
            check(st == 503, "add_backend in vcl_recv: status %d" % st)
            got = owners_through(v, KEYS[:20])
            check(set(got.values()) == {"b1"}, "the director changed: %s" % set(got.values()))
            log("badargs: %d bad VCLs refused at vcl.load with the argument and rule named; "
                "add_backend in vcl_recv fails the request" % len(bad))
        finally:
            v.stop()
    with_setup(["b1", "b2"], run)


def site_vcl(bs, names, profile="hash64"):
    init = '  new ring = chring.director(profile = "%s");\n' % profile
    init += "".join("  ring.add_backend(%s);\n" % n for n in names)
    return header(vcl_backends(bs), init)


def case_labels():
    """Two VCLs live at once through vcl.label, each with a director called ring over its own
    backends: each site's requests go to its own backends, as the tool places them, none
    fails."""
    def run(bs):
        v = Varnish(site_vcl(bs, ["a1", "a2"]))
        try:
            for name, members in (("sitea", ["a1", "a2"]), ("siteb", ["b1", "b2", "b3"])):
                path = v.write_vcl(site_vcl(bs, members))
                rc, out = v.adm("vcl.load", name + "_v", path)
                check(rc == 0, "vcl.load: %s" % out)
                rc, out = v.adm("vcl.label", name, name + "_v")
                check(rc == 0, "vcl.label: %s" % out)
            top = ('vcl 4.1;\nbackend none none;\nsub vcl_recv {\n'
                   '  if (req.http.host == "b") { return (vcl(siteb)); }\n'
                   '  return (vcl(sitea));\n}\n')
            v.reload(top)
            keys = KEYS[:40]
            want_a = tool_owners("hash64", 160, [("a1", 1), ("a2", 1)], keys)
            want_b = tool_owners("hash64", 160, [("b1", 1), ("b2", 1), ("b3", 1)], keys)
            for rnd in range(2):  # interleaved: each site's first use, then again
                got_b = owners_through(v, keys, headers={"host": "b"})
                got_a = owners_through(v, keys, headers={"host": "a"})
                check(got_a == want_a, "site a (round %d): %d of %d not as the tool"
                      % (rnd, sum(1 for k in keys if got_a[k] != want_a[k]), len(keys)))
                check(got_b == want_b, "site b (round %d): %d of %d not as the tool"
                      % (rnd, sum(1 for k in keys if got_b[k] != want_b[k]), len(keys)))
            log("labels: two VCLs with a director called ring, 2 x 2 x %d requests, each on "
                "its own backends as the tool" % len(keys))
        finally:
            v.stop()
    with_setup(["a1", "a2", "b1", "b2", "b3"], run)


def case_rollback():
    """A pool swap (b1 b2 b3 -> b4 b5) then vcl.use of the first VCL again (a rollback):
    every request succeeds and goes where the first VCL's membership places it; leases 0."""
    def run(bs):
        first = ["b1", "b2", "b3"]
        v = Varnish(site_vcl(bs, first))
        try:
            keys = KEYS[:40]
            want1 = tool_owners("hash64", 160, [(n, 1) for n in first], keys)
            check(owners_through(v, keys) == want1, "first VCL: not as the tool")
            v.reload(site_vcl(bs, ["b4", "b5"]))
            want2 = tool_owners("hash64", 160, [("b4", 1), ("b5", 1)], keys)
            check(owners_through(v, keys) == want2, "after the swap: not as the tool")
            rc, out = v.adm("vcl.use", "boot")
            check(rc == 0, "vcl.use boot: %s" % out)
            got = owners_through(v, keys)  # checks every status is 200
            bad = [k for k in keys if got[k] != want1[k]]
            check(not bad, "after the rollback: %d of %d not on the first VCL's backends"
                  % (len(bad), len(keys)))
            n, stats = leases(v)
            check(n == 0, "leases at rest: %d (%s)" % (n, stats))
            log("rollback: pool swapped and rolled back with vcl.use, %d requests each way, "
                "none failed, placement as the tool" % len(keys))
        finally:
            v.stop()
    with_setup(["b1", "b2", "b3", "b4", "b5"], run)


def varnishstat(v):
    r = subprocess.run(["varnishstat", "-n", v.dir + "/n", "-1", "-f", "CHRING.*"],
                       capture_output=True, text=True, timeout=60)
    out = {}
    for line in r.stdout.splitlines():
        p = line.split()
        if len(p) >= 2 and p[0].startswith("CHRING."):
            out[p[0]] = int(p[1])
    return out


def case_observe():
    """What an operator sees: backend.list -p lists every member (health, ring state, scale,
    load, capacity); varnishstat has the director's counters; the log has a line per
    placement with the owner, the member and the outcome; a move past a sick owner is a health
    move, not a spill; a reload's director takes the counters over."""
    def run(bs):
        names = ["b1", "b2", "b3"]
        v = Varnish(site_vcl(bs, names))
        try:
            keys = KEYS[:60]
            want = tool_owners("hash64", 160, [(n, 1) for n in names], keys)
            owners_through(v, keys)
            rc, out = v.adm("backend.list", "-p", "boot.ring")
            check(rc == 0, "backend.list -p: %s" % out)
            for n in names:
                line = [l for l in out.splitlines() if l.split()[:2] == [n, n]]
                check(line, "backend.list -p has no line for %s: %s" % (n, out))
                cols = line[0].split()
                check(cols[2] == "healthy" and cols[3] == "up" and cols[5] == "0"
                      and int(cols[6]) >= 1,
                      "member line of %s: %s" % (n, line[0]))
            check("Capacity" in out and "Scale" in out, "no header line: %s" % out)
            stats = varnishstat(v)
            acq = stats.get("CHRING.boot.ring.acquires", -1)
            check(acq == len(keys), "varnishstat acquires %d, want %d: %s" % (acq, len(keys), stats))
            check(stats.get("CHRING.boot.ring.owner") == len(keys), "owner count: %s" % stats)
            check(stats.get("CHRING.boot.ring.leases") == 0, "leases gauge: %s" % stats)
            # b2 sick: its keys move on, as health moves; .spilled() says false for them.
            rc, out = v.adm("backend.set_health", "b2", "sick")
            check(rc == 0, "backend.set_health: %s" % out)
            moved = [k for k in keys if want[k] == "b2"]
            check(moved, "b2 owns none of the keys")
            conn = http.client.HTTPConnection("127.0.0.1", v.port, timeout=30)
            for k in moved:
                st, h, _ = get(v.port, k, conn=conn)
                check(st == 200 and h["x-backend"] != "b2", "%s: %d from %s" % (k, st,
                                                                     h.get("x-backend")))
                check(h["x-spilled"] == "false", "%s: .spilled() true for a health move" % k)
            conn.close()
            stats = varnishstat(v)
            check(stats.get("CHRING.boot.ring.health_moves") == len(moved)
                  and stats.get("CHRING.boot.ring.spills") == 0
                  and stats.get("CHRING.boot.ring.health_changes", 0) >= 1,
                  "health moves %d: %s" % (len(moved), stats))
            rc, out = v.adm("backend.list", "-p", "boot.ring")
            line = [l for l in out.splitlines() if l.split()[:2] == ["b2", "b2"]][0]
            check(line.split()[2] == "sick" and line.split()[3] == "down",
                  "b2 line while sick: %s" % line)
            # The log: one line per placement, owner / member / outcome.
            r = subprocess.run(["varnishlog", "-n", v.dir + "/n", "-d", "-g", "raw",
                                "-i", "VCL_Log"], capture_output=True, text=True, timeout=60)
            lines = [l for l in r.stdout.splitlines() if "chring ring key=" in l]
            check(any("owner=%s member=%s outcome=owner" % (want[keys[0]], want[keys[0]]) in l
                      for l in lines), "no owner line for %s: %s" % (keys[0], lines[:3]))
            check(any("owner=" in l and "outcome=health" in l for l in lines),
                  "no health move line: %s" % lines[-3:])
            rc, out = v.adm("backend.set_health", "b2", "auto")
            # A reload: the new VCL's director takes the counters over at its first placement.
            before = varnishstat(v)["CHRING.boot.ring.acquires"]
            v2 = v.reload(site_vcl(bs, names))
            check(get(v.port, keys[0])[0] == 200, "request after the reload")
            stats = varnishstat(v)
            after = stats.get("CHRING.%s.ring.acquires" % v2, -1)
            check(after == before + 1, "after the reload: %d acquires, %d before (%s)"
                  % (after, before, stats))
            log("observe: backend.list -p per member, varnishstat %d acquires carried over to "
                "%d after the reload, %d health moves with .spilled() false, %d log lines"
                % (before, after, len(moved), len(lines)))
        finally:
            v.stop()
    with_setup(["b1", "b2", "b3"], run)


def case_delivery():
    """12 slow clients reading a cached 4 MB object hold no lease: a lease counts a fetch at the
    backend, not a delivery (placed in vcl_recv, cache hits and a miss)."""
    def run(bs):
        init = '  new ring = chring.director(profile = "hash64");\n'
        init += "".join("  ring.add_backend(%s);\n" % b.name for b in bs)
        extra = ('  if (req.url ~ "^/big/") {\n'
                 '    set req.backend_hint = ring.backend(key = req.url);\n'
                 '    return (hash);\n  }\n')
        v = Varnish(header(vcl_backends(bs), init, recv_extra=extra))
        socks = []
        try:
            st, _, body = get(v.port, "/big/1")  # the miss: fetched and cached
            check(st == 200 and len(body) == 4 << 20, "first fetch: %d, %d bytes" % (st, len(body)))
            check(wait_leases_zero(v)[0] == 0, "leases after the fetch")
            for _ in range(12):
                c = socket.socket()
                c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                c.settimeout(30)
                c.connect(("127.0.0.1", v.port))
                c.sendall(b"GET /big/1 HTTP/1.1\r\nHost: x\r\n\r\n")
                check(len(c.recv(1024)) > 0, "a slow client got nothing")
                socks.append(c)  # reads no more: its delivery stalls
            n, stats = leases(v)
            check(n == 0, "12 slow clients of a cached object hold %d leases (%s)" % (n, stats))
            acq = int(stats.split("acquires=")[1].split()[0])
            check(acq < 12, "the stalled hits were fetched: %s" % stats)
            log("delivery: 12 stalled deliveries of a cached 4 MB object, leases %d; %s"
                % (n, stats))
        finally:
            for c in socks:
                c.close()
            v.stop()
    with_setup(["b1", "b2", "b3"], run)


def case_pipe():
    """return (pipe) through the director: the key is placed for the pipe's life (on its owner,
    as the tool places it) and the lease goes back when the pipe closes."""
    def run(bs):
        init = '  new ring = chring.director(profile = "hash64");\n'
        init += "".join("  ring.add_backend(%s);\n" % b.name for b in bs)
        extra = ('  if (req.url ~ "^/pipe/") {\n'
                 '    set req.backend_hint = ring.backend(key = req.url);\n'
                 '    return (pipe);\n  }\n')
        v = Varnish(header(vcl_backends(bs), init, recv_extra=extra))
        try:
            keys = ["/pipe/%d" % i for i in range(20)]
            want = tool_owners("hash64", 160, [(b.name, 1) for b in bs], keys)
            for k in keys:
                # A pipe's lease lasts until varnishd sees both ends closed, which may be after
                # the client has its answer: wait for the state (bounded), then place the next.
                check(wait_leases_zero(v)[0] == 0, "a pipe's lease was never released")
                st, h, _ = get(v.port, k, headers={"Connection": "close"})
                check(st == 200 and h["x-backend"] == want[k],
                      "%s: %d from %s, tool %s" % (k, st, h.get("x-backend"), want[k]))
            n, stats = wait_leases_zero(v)
            check(n == 0, "leases after the pipes: %d (%s)" % (n, stats))
            check("acquires=20 " in stats, "one lease per pipe: %s" % stats)
            log("pipe: 20 piped requests on their owners, leases back to 0; %s" % stats)
        finally:
            v.stop()
    with_setup(["b1", "b2", "b3"], run)

CASES = {
    "placement": case_placement,
    "digest": case_digest,
    "parity": case_parity,
    "hotkey": case_hotkey,
    "sick": case_sick,
    "retry": case_retry,
    "reload": case_reload,
    "reloads-memory": case_reloads_memory,
    "build-memory": case_build_memory,
    "unload": case_unload,
    "errors": case_errors,
    "sequential": case_sequential,
    "fini": case_fini,
    "badargs": case_badargs,
    "labels": case_labels,
    "rollback": case_rollback,
    "observe": case_observe,
    "delivery": case_delivery,
    "pipe": case_pipe,
}


def main():
    return realserver.main(CASES, (VARNISHD, TOOL, "varnishadm", "varnishstat", "varnishlog"),
                           (VMOD,))


if __name__ == "__main__":
    sys.exit(main())
