#!/usr/bin/env python3
"""chring-lb as an HTTP hop towards clients (docs/lb.md, "Security model" and "Limits"): each
attack sent through the real binary, on 127.0.0.1 only, bounded in count and time.

  loop        a member that is the balancer itself, and two balancers in a ring: 508 at once
              (Via carries a per-process pseudonym), not a request storm
  stats-host  /_chring/ answers only Host names of loopback or of its listener (DNS rebinding)
"""
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402
from lbharness import check, log  # noqa: E402


def exchange(port, data, timeout=5.0):
    """Sends data, returns every byte until the server closes or timeout passes, and the time
    the first answer byte took."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = b""
    t0 = time.time()
    first = None
    try:
        s.sendall(data)
        end = t0 + timeout
        while time.time() < end:
            s.settimeout(max(0.05, end - time.time()))
            try:
                b = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not b:
                break
            if first is None:
                first = time.time() - t0
            out += b
    finally:
        s.close()
    return out, first


def status_of(resp):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", resp)
    return int(m.group(1)) if m else None


def loop(env):
    """A member that is the balancer itself (N6): the request comes back with this instance's
    Via pseudonym and is answered 508 Loop Detected, so one client request costs two requests
    in the balancer, not thousands; the same for two balancers that list each other."""
    rb = h.RawBackend()
    try:
        # the Via entry a backend sees: the client's list, then this hop's pseudonym
        lb = h.Balancer(env, ["--backend", rb.member]).start()
        resp, _ = exchange(lb.port, b"GET /v HTTP/1.1\r\nHost: x\r\nVia: 1.0 upstream-proxy\r\n"
                           b"Connection: close\r\n\r\n")
        check(status_of(resp) == 200, "via: %r" % resp[:200])
        seen = rb.received()
        m = re.search(rb"\r\nVia: 1\.0 upstream-proxy\r\n(?:[^\r]*\r\n)*?Via: 1\.1 (chring-lb-[0-9a-f]{16})\r\n",
                      seen)
        check(m, "the backend did not get the client's Via then this hop's: %r" % seen)
        token = m.group(1)
        log("forwarded with Via: 1.1 %s after the client's own" % token.decode())
        # the same token sent by a client (a loop) is refused, another instance's is not
        rb.reset()
        resp, _ = exchange(lb.port, b"GET /v HTTP/1.1\r\nHost: x\r\nVia: 1.1 " + token +
                           b", 1.1 other\r\nConnection: close\r\n\r\n")
        check(status_of(resp) == 508 and rb.received() == b"", "own Via: %r" % resp[:200])
        resp, _ = exchange(lb.port, b"GET /v HTTP/1.1\r\nHost: x\r\nVia: 1.1 " + token +
                           b"0\r\nConnection: close\r\n\r\n")
        check(status_of(resp) == 200, "a longer pseudonym is not ours: %r" % resp[:200])
        lb.stop()

        # a balancer whose member is itself
        self_lb = h.Balancer(env, [], name="self")
        self_lb.argv += ["--backend", "127.0.0.1:%d" % self_lb.port]
        self_lb.start()
        before = self_lb.stats()["balancer"]["requests"]
        for i in range(5):
            resp, first = exchange(self_lb.port, b"GET /loop%d HTTP/1.1\r\nHost: x\r\n"
                                   b"Connection: close\r\n\r\n" % i)
            check(status_of(resp) == 508, "self member: %r" % resp[:200])
            check(first is not None and first < 5, "self member: answered after %s s" % first)
        self_lb.wait_idle()
        n = self_lb.stats()["balancer"]["requests"] - before
        # two per client request (it, and its 508 coming back), plus a few stats requests
        check(n <= 5 * 2 + 5, "5 client requests cost %d requests in the balancer" % n)
        log("member = the balancer itself: 5 requests answered 508, %d requests in all" % n)
        self_lb.stop()

        # two balancers listing each other
        a = h.Balancer(env, [], name="a")
        b = h.Balancer(env, ["--backend", "127.0.0.1:%d" % a.port], name="b")
        a.argv += ["--backend", "127.0.0.1:%d" % b.port]
        a.start()
        b.start()
        resp, _ = exchange(a.port, b"GET /ab HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        check(status_of(resp) == 508, "a -> b -> a: %r" % resp[:200])
        na = a.wait_idle()["balancer"]["requests"]
        check(na <= 6, "a ring of two balancers: a served %d requests" % na)
        log("a -> b -> a: 508, %d requests in a" % na)
        b.stop()
        a.stop()
    finally:
        rb.close()


def stats_host(env):
    """/_chring/ answers a Host naming loopback or its own listener only (N8): a page of another
    origin that rebinds its name to 127.0.0.1 sends its own name as Host and gets 421, on the
    main listener and on --stats-listen; proxying is not affected."""
    rb = h.RawBackend()
    try:
        lb = h.Balancer(env, ["--backend", rb.member], stats_listen=True).start()
        for port, where in ((lb.stats_port, "stats listener"),):
            for host, want in (("localhost:%d" % port, 200), ("127.0.0.1:%d" % port, 200),
                               ("127.1.2.3", 200), ("LOCALHOST.", 200), ("app.localhost", 200),
                               ("[::1]:%d" % port, 200), ("evil.example:%d" % port, 421),
                               ("127.0.0.1.evil.example", 421), ("localhost.evil.example", 421),
                               ("10.0.0.1", 421), ("[::2]", 421)):
                resp, _ = exchange(port, ("GET /_chring/stats HTTP/1.1\r\nHost: %s\r\n"
                                          "Connection: close\r\n\r\n" % host).encode())
                check(status_of(resp) == want, "%s, Host %s: %r (want %d)" % (where, host, resp[:120], want))
            log("%s: loopback Host names answered, others 421" % where)
        resp, _ = exchange(lb.port, b"GET /x HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        check(status_of(resp) == 200, "proxying with any Host: %r" % resp[:120])
        lb.stop()
        # stats on the main listener: the same rule
        rb.reset()
        lb = h.Balancer(env, ["--backend", rb.member]).start()
        for host, want in (("127.0.0.1:%d" % lb.port, 200), ("rebind.evil.example", 421)):
            for path in ("/_chring/stats", "/_chring/"):
                resp, _ = exchange(lb.port, ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                                             % (path, host)).encode())
                check(status_of(resp) == want, "main listener %s, Host %s: %r" % (path, host, resp[:120]))
        check(rb.received() == b"", "a /_chring/ request was forwarded: %r" % rb.received()[:200])
        log("main listener: the same rule, nothing forwarded")
        lb.stop()
    finally:
        rb.close()


def fnv1a_lower(tok, mask=(1 << 17) - 1):
    """The low bits of FNV-1a over the lower-cased token (all that a table index uses)."""
    h = 1469598103934665603 & mask
    for c in tok:
        h = ((h ^ c) * 1099511628211) & mask
    return h


def connection_tokens(env):
    """Header work is linear in the head (N17): a Connection field listing 65,536 distinct
    tokens chosen so that a plain FNV-1a hash of them falls into one sixteenth of a table sized
    for them (what an attacker can compute offline) is answered at once, not after seconds of
    probing; the listed fields are still dropped."""
    import random
    rng = random.Random(17)
    n, cap = 65536, 131072
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789"
    table = bytes(alphabet[i % len(alphabet)] for i in range(256))
    tokens, seen = [], set()
    while len(tokens) < n:
        raw = rng.randbytes(6 * 65536).translate(table)
        for i in range(0, len(raw), 6):
            t = raw[i:i + 6]
            if fnv1a_lower(t) & (cap - 1) < cap // 16 and t not in seen:
                seen.add(t)
                tokens.append(t)
                if len(tokens) == n:
                    break
    conn = b", ".join(tokens)
    rb = h.RawBackend()
    try:
        lb = h.Balancer(env, ["--backend", rb.member, "--max-headers", str(1 << 20)], threads=1).start()
        req = (b"GET /tokens HTTP/1.1\r\nHost: x\r\n" + tokens[5] + b": secret\r\nX-Kept: yes\r\n"
               b"Connection: " + conn + b", close\r\n\r\n")
        t0 = time.time()
        resp, _ = exchange(lb.port, req, timeout=15)
        took = time.time() - t0
        check(status_of(resp) == 200, "answered %r after %.1f s" % (resp[:100], took))
        check(took < 5, "a Connection field of %d tokens took %.1f s" % (n, took))
        seen_b = rb.received()
        check(b"X-Kept: yes" in seen_b and b"secret" not in seen_b and b"Connection" not in seen_b,
              "Connection-listed fields: %r" % seen_b[:300])
        log("Connection with %d colliding tokens (%d KB): answered in %.2f s" % (n, len(conn) >> 10, took))
        lb.stop()
    finally:
        rb.close()


TESTS = {
    "connection-tokens": connection_tokens,
    "loop": loop,
    "stats-host": stats_host,
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in TESTS:
        print("usage: lb_hop.py %s" % "|".join(TESTS), file=sys.stderr)
        return 2
    if not os.access(h.CHRING_LB, os.X_OK):
        print("missing %s: skipped" % h.CHRING_LB)
        return 77
    return h.run(TESTS[sys.argv[1]])


if __name__ == "__main__":
    sys.exit(main())
