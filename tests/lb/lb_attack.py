#!/usr/bin/env python3
"""chring-lb under the attacks of the fourth review (docs/lb.md, "Security model" and "Limits"):
each sent through the real binary, on 127.0.0.1 only, bounded in count and time.

  pipeline-flood  a client that pipelines requests and never reads: the balancer stops reading
                  it once its answers waiting hold 64 KiB; its memory stays bounded, and every
                  request sent is answered in order once the client reads
  slow-reader     clients that take a big answer in a trickle are closed by --send-min-rate:
                  their --max-requests slots and leases come back, and a probe is served
  stats-conns     connections to --stats-listen from a peer outside --stats-allow are closed at
                  once, and allowed ones are at most 16: 400 of them held with RLIMIT_NOFILE
                  256 no longer take the descriptors the main listener needs
  front-stats     a real nginx on the same host in front of the balancer with its defaults
                  (proxy_pass http://127.0.0.1:PORT;): its clients do not read /_chring/
  members-file    a FIFO as the members file (at the start, and by SIGHUP) is refused at once
                  instead of freezing the main thread; --members-max-points refuses a file
                  with more points
  idle-memory     an idle keep-alive connection after its request costs under 8 KB (17.8 KB
                  when the 16 KiB head scratch was kept)
  empty-lines     a CR and a LF before a request line, in separate reads, are an empty line
                  (RFC 9112 section 2.2), not a 400
"""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402
from lbharness import check, log  # noqa: E402


def rss_of(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def sanitized(pid):
    """True for an AddressSanitizer build: redzones and the quarantine of freed memory make
    resident memory no measure of what the balancer keeps."""
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def flood(port, request, limit_bytes, seconds):
    """Sends request over and over on one connection without reading, until limit_bytes went out,
    or seconds passed, or 1.5 s passed without the balancer taking a byte.  Returns the socket
    and the bytes sent."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setblocking(False)
    block = request * (65536 // len(request))
    sent = 0
    pos = 0
    end = time.time() + seconds
    last_progress = time.time()
    while sent < limit_bytes and time.time() < end and time.time() - last_progress < 1.5:
        try:
            n = s.send(block[pos:])
        except BlockingIOError:
            time.sleep(0.01)
            continue
        sent += n
        pos = (pos + n) % len(block)
        last_progress = time.time()
    return s, sent


def pipeline_flood(env):
    """22 MB of 35-byte requests for /_chring/ from a peer outside --stats-allow (each answered
    403 by the balancer itself) on one connection that does not read: the balancer's resident
    memory grew from 3 MB to 664 MB; now it grows by less than 32 MB, and it stops reading the
    client.  Then the client reads: every request it sent whole has its 403, in order."""
    lb = h.Balancer(env, ["--backend", "127.0.0.1:9", "--stats-allow", "192.0.2.1",
                          "--client-timeout", "30"], stats_listen=False)
    lb.proc = env.spawn(lb.name, lb.argv)
    h.wait_port(lb.port, proc=lb.proc)
    time.sleep(0.3)
    base = rss_of(lb.proc.pid)
    request = b"GET /_chring/ HTTP/1.1\r\nHost: a\r\n\r\n"
    s, sent = flood(lb.port, request, 22 << 20, 12)
    time.sleep(0.5)
    grown = rss_of(lb.proc.pid) - base
    log("flood: %.1f MB of requests taken by the balancer; its resident memory grew by %.1f MB" %
        (sent / 1e6, grown / 1e6))
    if sanitized(lb.proc.pid):
        log("AddressSanitizer build: resident memory not checked")
    else:
        check(grown < 32 << 20, "resident memory grew by %d bytes for a client that does not read" % grown)
    check(sent < 22 << 20, "the balancer kept reading a client that does not read (%d bytes)" % sent)
    # the client reads: an answer for every whole request, in order, then nothing more
    whole = sent // len(request)
    s.setblocking(True)
    s.settimeout(5)
    got = 0
    buf = b""
    end = time.time() + 60
    while got < whole and time.time() < end:
        try:
            b = s.recv(1 << 20)
        except socket.timeout:
            break
        if not b:
            break
        buf += b
        got += buf.count(b"HTTP/1.1 403 ")
        buf = buf[buf.rfind(b"HTTP/1.1 403 ") + 1:] if b"HTTP/1.1 403 " in buf else buf[-16:]
    s.close()
    log("answers read: %d for %d requests sent whole" % (got, whole))
    check(got == whole, "%d answers for %d requests" % (got, whole))
    check(lb.alive(), "the balancer died")
    lb.stop()


def slow_reader(env):
    """Two clients take an 8 MiB answer 16 KiB every 0.5 s (32 KiB/s: each write makes progress
    within --client-timeout 2) with --max-requests 2: they held both slots and every probe got
    503 for as long as they read.  With --send-min-rate 131072 they are closed within a few
    seconds: the slots and leases come back and a probe is served."""
    be = h.Backend(env, 0).start()
    lb = h.Balancer(env, ["--backend", be.member, "--max-requests", "2", "--client-timeout", "2",
                          "--send-min-rate", "131072"], stats_listen=True).start()
    stop = threading.Event()

    def reader(i):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(5)
        s.connect(("127.0.0.1", lb.port))
        s.sendall(b"GET /huge/%d HTTP/1.1\r\nHost: a\r\n\r\n" % i)
        try:
            while not stop.is_set():
                b = s.recv(16384)
                if not b:
                    return
                stop.wait(0.5)
        except OSError:
            pass
        finally:
            s.close()

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        check(lb.stats()["ring"]["leases"] == 2, "the slow readers do not hold two leases")
        served = None
        t0 = time.time()
        # a hang detector, not a speed target: the slow readers are closed after about 1.5 s
        # (--send-min-rate); without it they held the slots for as long as they read
        while time.time() - t0 < 15:
            c = h.Client(lb.port, timeout=5)
            st, _, _ = c.get("/probe")
            c.close()
            if st == 200:
                served = time.time() - t0
                break
            time.sleep(0.5)
        log("probe served after %s s" % served)
        check(served is not None, "every probe got 503 for 15 s: the slow readers kept the slots")
        st = lb.wait_idle()
        check(st["limits"]["slow_clients"] == 2, "slow_clients %d" % st["limits"]["slow_clients"])
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    lb.stop()


def hold_conns(port, n):
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break
    return socks


def closed_by_peer(s, timeout):
    """True when the balancer closes s within timeout."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def stats_conns(env):
    """With RLIMIT_NOFILE 256, 400 connections to --stats-listen held by a peer outside
    --stats-allow took every descriptor (they were read for a request before the peer was
    checked), and the main listener stopped answering.  Now each is closed at its accept, and
    the main listener serves a request while they are held; from an allowed peer, 16 stay open
    at most (the stats listener's own limit), and the stats are read again once they close."""
    import resource

    def low_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    be = h.Backend(env, 0).start()
    for allowed in (False, True):
        lb = h.Balancer(env, ["--backend", be.member, "--max-conns", "1000"] +
                        ([] if allowed else ["--stats-allow", "192.0.2.1"]),
                        name="lb-%s" % ("allowed" if allowed else "refused"), threads=1,
                        stats_listen=True, spawn_kw={"preexec_fn": low_nofile})
        lb.proc = env.spawn(lb.name, lb.argv, **lb.spawn_kw)
        h.wait_port(lb.port, proc=lb.proc)
        h.wait_port(lb.stats_port, proc=lb.proc)
        socks = hold_conns(lb.stats_port, 400)
        try:
            time.sleep(0.5)
            still = [s for s in socks if not closed_by_peer(s, 0.01)]
            log("%s peer: %d of %d stats connections still open" %
                ("allowed" if allowed else "refused", len(still), len(socks)))
            check(len(still) <= (16 if allowed else 0),
                  "%d stats connections held open" % len(still))
            c = h.Client(lb.port, timeout=3)
            try:
                st, _, _ = c.get("/main")
            except OSError as e:
                st = "no answer (%s)" % e
            c.close()
            check(st == 200, "the main listener answered %s while the stats connections were held" % st)
        finally:
            for s in socks:
                s.close()
        if allowed:
            end = time.time() + 5
            ok = False
            while time.time() < end and not ok:
                try:
                    st = lb.stats()
                    ok = True
                except (OSError, h.TestFailure, ValueError):
                    time.sleep(0.1)
            check(ok, "stats not served after the connections closed")
            check(st["limits"]["stats_refused"] >= 400 - 16 - 10,
                  "stats_refused %d" % st["limits"]["stats_refused"])
        lb.stop()


def front_stats(env):
    """A same-host nginx front in its default setup connects from 127.0.0.1 and sends Host:
    127.0.0.1:PORT, so every client of the front read the stats and the status page.  Now the
    main listener answers /_chring/ only with an explicit --stats-allow (404 otherwise, to
    everyone), and then never to a request a proxy forwarded (X-Forwarded-For, Forwarded,
    X-Real-IP, Via: 403; an explicit --stats-allow naming loopback behind a front that adds
    none of them is the operator's choice, docs/lb.md); proxying through the front is unaffected, and --stats-listen serves
    the stats."""
    be = h.Backend(env, 0).start()
    runs = [("default", [], False), ("stats-listen", [], True),
            ("allow", ["--stats-allow", "127.0.0.1"], False)]
    for name, extra, stats_listen in runs:
        lb = h.Balancer(env, ["--backend", be.member] + extra, name="lb-" + name,
                        stats_listen=stats_listen)
        if name == "default":
            # the harness adds an explicit --stats-allow when neither is given: not here
            i = lb.argv.index("--stats-allow")
            del lb.argv[i:i + 2]
        lb.proc = env.spawn(lb.name, lb.argv)
        h.wait_port(lb.port, proc=lb.proc)
        fport = h.free_port()
        # the default front, and one adding X-Forwarded-For as most setups do
        front = h.Nginx(env, "front-" + name, """
    server {{
        listen 127.0.0.1:{port};
        location / {{ proxy_pass http://127.0.0.1:{lb}; }}
        location /xff/ {{
            proxy_pass http://127.0.0.1:{lb}/;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }}
    }}
""".format(port=fport, lb=lb.port))
        front.start(fport)
        seen = {}
        for path in ("/_chring/stats", "/_chring/", "/_chring/stats?members=0", "/xff/_chring/stats"):
            c = h.Client(fport, timeout=5)
            st, body, _ = c.get(path)
            c.close()
            seen[path] = st
            if name == "allow" and not path.startswith("/xff/"):
                continue  # an explicit --stats-allow 127.0.0.1 behind a same-host front: allowed
            check(st in (403, 404), "%s: a client of the front read %s: %d %r" % (name, path, st, body[:80]))
            if name == "allow":
                check(st == 403, "%s: %s forwarded with X-Forwarded-For: %d" % (name, path, st))
        c = h.Client(fport, timeout=5)
        st, body, _ = c.get("/x")
        c.close()
        check(st == 200 and h.port_of(body) == be.port, "%s: proxying through the front: %d" % (name, st))
        c = h.Client(lb.port, timeout=5)
        st, _, _ = c.get("/_chring/stats")
        want = 200 if name == "allow" else 404
        check(st == want, "%s: /_chring/stats asked directly from loopback: %d, want %d" % (name, st, want))
        st, _, _ = c.get("/_chring/stats", headers={"Via": "1.1 someone"})
        check(st in (403, 404), "%s: a request with Via read the stats: %d" % (name, st))
        c.close()
        if stats_listen:
            check(lb.stats()["ring"]["members"] == 1, "stats listener")
        log("%s: through the front %s; directly from loopback %d" % (name, seen, want))
        front.stop()
        lb.stop()


def wait_stats(lb, pred, timeout):
    end = time.time() + timeout
    st = None
    while time.time() < end:
        try:
            st = lb.stats()
            if pred(st):
                return st
        except (OSError, h.TestFailure, ValueError):
            pass
        time.sleep(0.1)
    raise h.TestFailure("stats not as expected within %.0f s: %s" % (timeout, st and st["balancer"]))


def members_file(env):
    """A members file that blocks on open (a FIFO without a writer) froze the main thread: the
    start never finished, and a SIGHUP after the file was replaced by a FIFO stopped the stats
    listener and SIGTERM.  Now it is refused ("not a regular file"), the membership unchanged.
    --members-max-points caps the file's points as --etcd-max-points caps etcd's."""
    members = [h.Backend(env, i).start() for i in range(3)]
    fifo = env.path("members.fifo")
    os.mkfifo(fifo)
    p = env.spawn("lb-fifo", [h.CHRING_LB, "--listen", "127.0.0.1:%d" % h.free_port(),
                              "--members", fifo])
    try:
        rc = p.wait(10)
    except Exception:
        rc = None
    out = env.output("lb-fifo")
    check(rc is not None and rc != 0, "a FIFO as the members file: the start did not end (%s)" % rc)
    check("not a regular file" in out, "no reason given: %r" % out[-300:])
    path = env.path("members.txt")

    def write(ms):
        with open(path + ".new", "w") as f:
            f.write("".join(m.member + "\n" for m in ms))
        os.replace(path + ".new", path)

    write(members[:2])
    lb = h.Balancer(env, ["--members", path, "--members-max-points", str(2 * 160)],
                    stats_listen=True).start()
    check(lb.stats()["ring"]["members"] == 2, "two members at the start")
    os.replace(fifo, path)
    lb.hup()
    st = wait_stats(lb, lambda st: st["balancer"]["reload_errors"] == 1, 5)
    check(st["ring"]["members"] == 2, "membership changed by a FIFO")
    os.unlink(path)
    write(members)  # 3 x 160 points: above the cap
    lb.hup()
    st = wait_stats(lb, lambda st: st["balancer"]["reload_errors"] == 2, 5)
    check(st["ring"]["members"] == 2, "membership changed by a file above --members-max-points")
    write(members[1:])
    lb.hup()
    st = wait_stats(lb, lambda st: st["balancer"]["reloads"] >= 1 and st["balancer"]["reload_errors"] == 2, 5)
    names = sorted(m["name"] for m in st["members"])
    check(names == sorted(m.member for m in members[1:]), "members after a good reload: %s" % names)
    out = lb.stop()
    check("not a regular file" in out and "--members-max-points" in out, "reasons not logged")
    log("FIFO refused at the start and by SIGHUP; a file above the points cap refused")


def idle_memory(env):
    """1,000 keep-alive connections, each idle after one proxied request: the balancer's
    resident memory grows by less than 8 KB each (it kept the 16 KiB head scratch of the first
    request: 17.8 KB each)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    n = 1000
    if hard != resource.RLIM_INFINITY and hard < 2 * n + 200:
        h.skip("RLIMIT_NOFILE hard limit %d, below the %d descriptors needed" % (hard, 2 * n + 200))
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2 * n + 200), hard))

    def nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (4 * n, max(4 * n, hard) if hard != resource.RLIM_INFINITY else 4 * n))

    be = h.Backend(env, 0).start()
    lb = h.Balancer(env, ["--backend", be.member, "--client-timeout", "60"], threads=1,
                    stats_listen=True, spawn_kw={"preexec_fn": nofile}).start()
    socks = []
    req = b"GET /idle HTTP/1.1\r\nHost: a\r\n\r\n"

    def open_some(k):
        for _ in range(k):
            s = socket.create_connection(("127.0.0.1", lb.port), timeout=5)
            s.sendall(req)
            data = b""
            while b"\r\n\r\n" not in data or not data.endswith(b"\n"):
                b = s.recv(4096)
                if not b:
                    raise h.TestFailure("closed after one request")
                data += b
            socks.append(s)

    try:
        open_some(100)  # pools, arenas and the backend's connection warmed up
        time.sleep(0.3)
        base = rss_of(lb.proc.pid)
        open_some(n)
        time.sleep(0.3)
        per = (rss_of(lb.proc.pid) - base) / n
        log("%d idle keep-alive connections: %.1f KB of resident memory each" % (n, per / 1000))
        check(lb.stats()["limits"]["conns"] == n + 100, "connections counted")
        if sanitized(lb.proc.pid):
            log("AddressSanitizer build: resident memory not checked")
        else:
            check(per < 8000, "an idle keep-alive connection costs %.0f bytes" % per)
    finally:
        for s in socks:
            s.close()
    lb.stop()


def empty_lines(env):
    """RFC 9112 section 2.2: a server SHOULD ignore at least one empty line before a request
    line.  Its CR and its LF sent in separate reads got 400; now the request is answered.  A
    bare LF is still refused, and empty lines trickled forever are cut by --client-timeout."""
    be = h.Backend(env, 0).start()
    lb = h.Balancer(env, ["--backend", be.member, "--client-timeout", "2"], stats_listen=True).start()
    for pieces, want in (([b"\r", b"\n", b"GET /e HTTP/1.1\r\nHost: a\r\n\r\n"], 200),
                         ([b"\r\n\r", b"\n\r", b"\nGET /e HTTP/1.1\r\nHost: a\r\n\r\n"], 200),
                         ([b"\n", b"GET /e HTTP/1.1\r\nHost: a\r\n\r\n"], 400)):
        s = socket.create_connection(("127.0.0.1", lb.port), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for p in pieces:
            s.sendall(p)
            time.sleep(0.15)
        data = s.recv(4096)
        s.close()
        st = int(data.split(b" ")[1]) if data.startswith(b"HTTP/1.1 ") else None
        check(st == want, "%r answered %r, want %d" % (pieces, data[:40], want))
    s = socket.create_connection(("127.0.0.1", lb.port), timeout=5)
    t0 = time.time()
    got = b""
    try:
        while time.time() - t0 < 12 and not got:
            s.sendall(b"\r\n")
            s.settimeout(0.3)
            try:
                got = s.recv(4096)
            except socket.timeout:
                pass
    except OSError:
        pass
    s.close()
    took = time.time() - t0
    # a hang detector, not a speed target: cut after about --client-timeout (2 s); a trickle that
    # kept the connection would run the whole 12 s
    check(got.startswith(b"HTTP/1.1 408") and took < 8,
          "empty lines trickled: %r after %.1f s" % (got[:30], took))
    log("empty lines trickled: 408 after %.1f s (--client-timeout 2)" % took)
    lb.stop()


TESTS = {
    "pipeline-flood": pipeline_flood,
    "slow-reader": slow_reader,
    "stats-conns": stats_conns,
    "front-stats": front_stats,
    "members-file": members_file,
    "idle-memory": idle_memory,
    "empty-lines": empty_lines,
}


if __name__ == "__main__":
    sys.exit(h.main(TESTS))
