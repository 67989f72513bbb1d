#!/usr/bin/env python3
"""chring-lb under pressure, through the real binary: the limits in all (connections, requests in
flight, buffered body bytes), descriptor exhaustion, the stats listener and its allow list,
timeouts below 1 ms (docs/lb.md, "Limits").

    lb_limits.py NAME    NAME: conns, park, requests-bodies, emfile, stats (or "all")

Everything on 127.0.0.1, under a temporary directory, stopped by PID; every wait bounded.
"""
import os
import resource
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lbharness as h  # noqa: E402
from lbharness import check, log  # noqa: E402


def port_answer(rb, hold=None):
    """An answer function for a RawBackend: its port; paths under /hold wait for hold (bounded)."""
    def answer(path):
        if hold is not None and path.startswith("/hold"):
            hold.wait(20)
        body = ("%d\n" % rb.port).encode()
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    return answer


def request(port, data, timeout=5.0):
    """One request on a new connection; returns what came back until close or timeout."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        return read_answer(s, timeout)
    finally:
        s.close()


def answer_complete(out):
    """Whether out holds a whole answer with a Content-Length."""
    if b"\r\n\r\n" not in out:
        return False
    head, _, body = out.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length" and len(body) >= int(v):
            return True
    return False


def read_answer(s, timeout=5.0):
    """Reads one answer with a Content-Length (or until close/timeout)."""
    s.settimeout(timeout)
    out = b""
    end = time.time() + timeout
    while time.time() < end:
        try:
            b = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not b:
            break
        out += b
        if answer_complete(out):
            return out
    return out


def collect_answers(socks, timeout=20.0):
    """Reads every socket of socks at once until its answer is whole or it ends, then closes it.
    Returns (answered 200, ended otherwise, the sockets still waiting at the timeout)."""
    import select
    served, failed, waiting = 0, 0, list(socks)
    bufs = {s: b"" for s in waiting}
    end = time.time() + timeout
    while waiting and time.time() < end:
        ready, _, _ = select.select(waiting, [], [], 0.5)
        for s in ready:
            try:
                b = s.recv(65536)
            except OSError:
                b = b""
            bufs[s] += b
            if not b or answer_complete(bufs[s]):
                if h.status_of(bufs[s]) == 200:
                    served += 1
                else:
                    failed += 1
                waiting.remove(s)
                s.close()
    return served, failed, waiting


# ------------------------------------------------------------------------------------------------
def conns(env):
    """--max-conns 8: connections beyond the limit wait in the accept queue (never served while 8
    are open, the count never above 8), and are served once others close.  Timeouts below 1 ms
    are refused."""
    for bad in ("--backend-timeout", "--client-timeout", "--fail-timeout"):
        r = subprocess.run([h.CHRING_LB, bad, "0.0000001", "--backend", "127.0.0.1:1"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
        check(r.returncode == 2 and b"0.001" in r.stdout, "%s 0.0000001 accepted: %r" % (bad, r.stdout))
    log("timeouts of 0.0000001 s refused (exit 2) for --backend-timeout, --client-timeout, --fail-timeout")
    rb = h.RawBackend()
    rb.answer = port_answer(rb)
    held, extra = [], []
    try:
        lb = h.Balancer(env, ["--backend", rb.member, "--max-conns", "8"], threads=2,
                        stats_listen=True).start()
        for _ in range(8):
            held.append(socket.create_connection(("127.0.0.1", lb.port), timeout=5))
        # every one of the 8 is served (so it was accepted)
        for s in held:
            s.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
            check(h.status_of(read_answer(s)) == 200, "a connection within the limit was not served")
        for _ in range(12):
            extra.append(socket.create_connection(("127.0.0.1", lb.port), timeout=5))
        for s in extra:
            s.sendall(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        # sampled while the 12 wait: at most 8 connections counted, none of the 12 answered
        peak = 0
        for _ in range(10):
            st = lb.stats()["limits"]
            peak = max(peak, st["conns"])
            time.sleep(0.05)
        check(peak <= 8, "connections counted above --max-conns 8: %d" % peak)
        check(st["accept_pauses"] >= 1, "accepting never paused at the limit: %s" % st)
        for s in extra:
            s.setblocking(False)
            try:
                got = s.recv(1)
                check(not got, "a connection beyond the limit was answered while 8 were open")
            except BlockingIOError:
                pass
            s.setblocking(True)
        log("8 connections open: 12 more wait unanswered, at most %d counted, accepting paused %d times"
            % (peak, st["accept_pauses"]))
        for s in held:
            s.close()
        held = []
        # each answered one is closed, which lets the next waiting one in
        served, failed, waiting = collect_answers(extra)
        check(served == 12, "after the 8 closed, %d of the 12 waiting connections were served "
              "(%d closed unanswered, %d still waiting)" % (served, failed, len(waiting)))
        st = lb.stats()["limits"]
        check(st["conns"] <= 8, "connections counted above the limit: %s" % st)
        log("the 8 closed: the 12 waiting connections were served (at most 8 at a time; %d parked "
            "after a parallel accept took the last slot)" % st["conns_parked"])
        for s in extra:
            s.close()
        extra = []
        end = time.time() + 10
        while time.time() < end and lb.stats()["limits"]["conns"] != 0:
            time.sleep(0.05)
        check(lb.stats()["limits"]["conns"] == 0, "connections still counted after every client left")
        lb.wait_idle()
        lb.stop()
    finally:
        for s in held + extra:
            s.close()
        rb.close()


# ------------------------------------------------------------------------------------------------
def requests_bodies(env):
    """--max-requests 3: a fourth request in flight gets 503 with Retry-After, and requests are
    served again once they finish.  --max-body-total 1 MiB: body bytes are reserved as they
    arrive (never the declared length); a body whose bytes pass the cap in all gets 503; the
    reservations come back when the requests end."""
    hold = threading.Event()
    rb = h.RawBackend()
    rb.answer = port_answer(rb, hold)
    threads = []
    socks = []
    try:
        lb = h.Balancer(env, ["--backend", rb.member, "--max-requests", "3", "--max-body-total",
                              str(1 << 20), "--backend-timeout", "20"], threads=2,
                        stats_listen=True).start()
        results = []

        def held_get(i):
            results.append(h.status_of(request(lb.port, b"GET /hold/%d HTTP/1.1\r\nHost: x\r\n\r\n" % i,
                                             timeout=25)))

        for i in range(3):
            t = threading.Thread(target=held_get, args=(i,), daemon=True)
            t.start()
            threads.append(t)
        end = time.time() + 10
        while time.time() < end and lb.stats()["balancer"]["active"] < 3:
            time.sleep(0.05)
        check(lb.stats()["balancer"]["active"] == 3, "the 3 held requests are not in flight")
        resp = request(lb.port, b"GET /four HTTP/1.1\r\nHost: x\r\n\r\n")
        check(h.status_of(resp) == 503 and b"Retry-After: 1" in resp, "4th request in flight: %r" % resp[:200])
        check(lb.stats()["limits"]["requests_refused"] == 1, "requests_refused not counted")
        hold.set()
        for t in threads:
            t.join(25)
        check(results == [200, 200, 200], "held requests: %r" % results)
        resp = request(lb.port, b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
        check(h.status_of(resp) == 200, "after the held ones finished: %r" % resp[:100])
        log("--max-requests 3: the 4th got 503 with Retry-After; served again once they finished")
        lb.wait_idle()

        # bodies are reserved as their bytes arrive, never as declared: two uploads that
        # declare 400 KiB and sent 1000 bytes hold 2000 bytes of the cap
        n = 400 << 10
        for i in range(2):
            s = socket.create_connection(("127.0.0.1", lb.port), timeout=10)
            s.sendall(b"POST /up/%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (i, n) + b"x" * 1000)
            socks.append(s)
        end = time.time() + 10
        while time.time() < end and lb.stats()["limits"]["body_bytes"] < 2000:
            time.sleep(0.05)
        time.sleep(0.2)
        check(lb.stats()["limits"]["body_bytes"] == 2000,
              "two uploads with 1000 bytes sent: body_bytes %d" % lb.stats()["limits"]["body_bytes"])
        # their bytes arrive: 800 KiB less 2 bytes of the 1 MiB cap held
        for s in socks:
            s.sendall(b"x" * (n - 1001))
        end = time.time() + 10
        while time.time() < end and lb.stats()["limits"]["body_bytes"] < 2 * (n - 1):
            time.sleep(0.05)
        st = lb.stats()["limits"]
        check(st["body_bytes"] == 2 * (n - 1), "two uploads in progress: body_bytes %d" % st["body_bytes"])
        # a third one does not fit: 503 when its bytes pass the cap, nothing forwarded
        s = socket.create_connection(("127.0.0.1", lb.port), timeout=10)
        s.sendall(b"POST /third HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % n)
        try:
            for _ in range(8):
                s.sendall(b"t" * (64 << 10))
        except (BrokenPipeError, ConnectionResetError):
            pass
        resp = read_answer(s)
        s.close()
        check(h.status_of(resp) == 503 and b"Retry-After: 1" in resp, "a body beyond the global cap: %r" % resp[:200])
        # a chunked one likewise
        s = socket.create_connection(("127.0.0.1", lb.port), timeout=10)
        s.sendall(b"POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (64 << 10, b"c" * (64 << 10))
        resp = b""
        try:
            for _ in range(8):  # 512 KiB > the 224 KiB left
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        resp = read_answer(s)
        s.close()
        check(h.status_of(resp) == 503, "a chunked body beyond the global cap: %r" % resp[:200])
        st = lb.stats()["limits"]
        check(st["body_refused"] == 2, "body_refused %d, want 2" % st["body_refused"])
        end = time.time() + 5
        while time.time() < end and lb.stats()["limits"]["body_bytes"] != 2 * (n - 1):
            time.sleep(0.05)
        st = lb.stats()["limits"]
        check(st["body_bytes"] == 2 * (n - 1), "reservations after the refusals: %d" % st["body_bytes"])
        check(b"/third" not in rb.received() and b"/chunked" not in rb.received(),
              "a refused body reached the backend")
        log("--max-body-total 1 MiB with 800 KiB arrived: a 400 KiB body and a chunked one got 503")
        # the two finish: answered 200, the reservation returns to 0
        for s in socks:
            s.sendall(b"x")
        for s in socks:
            check(h.status_of(read_answer(s, timeout=10)) == 200, "an upload within the cap failed")
        for s in socks:
            s.close()
        socks = []
        end = time.time() + 10
        while time.time() < end and lb.stats()["limits"]["body_bytes"] != 0:
            time.sleep(0.05)
        check(lb.stats()["limits"]["body_bytes"] == 0, "body bytes still reserved after the uploads ended")
        # a client that leaves mid-body gives its reservation back
        s = socket.create_connection(("127.0.0.1", lb.port), timeout=10)
        s.sendall(b"POST /gone HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nabc" % n)
        time.sleep(0.2)
        s.close()
        end = time.time() + 10
        while time.time() < end and lb.stats()["limits"]["body_bytes"] != 0:
            time.sleep(0.05)
        check(lb.stats()["limits"]["body_bytes"] == 0, "a client gone mid-body kept its reservation")
        resp = request(lb.port, b"POST /last HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % n + b"y" * n)
        check(h.status_of(resp) == 200, "a body that fits after all ended: %r" % resp[:100])
        log("uploads ended (also one cut off mid-body): reservations back to 0, a new body accepted")
        lb.wait_idle()
        lb.stop()
    finally:
        hold.set()
        for t in threads:
            t.join(25)
        for s in socks:
            s.close()
        rb.close()


# ------------------------------------------------------------------------------------------------
def emfile(env):
    """RLIMIT_NOFILE 64 and --max-conns 1000: 150 clients exhaust the descriptors.  accept backs
    off instead of spinning (a bounded number of accept errors and log lines while the clients
    stay), and once they leave the balancer serves again."""
    rb = h.RawBackend()
    rb.answer = port_answer(rb)
    socks = []

    def low_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    try:
        lb = h.Balancer(env, ["--backend", rb.member, "--max-conns", "1000", "--client-timeout", "30"],
                        threads=1, stats_listen=True, spawn_kw={"preexec_fn": low_nofile}).start()
        before = lb.stats()["limits"]
        for _ in range(150):
            try:
                socks.append(socket.create_connection(("127.0.0.1", lb.port), timeout=5))
            except OSError:
                break
        hold_s = 2.0
        time.sleep(hold_s)  # exposure: the queue stays full for this long
        n_open = len(socks)
        for s in socks:
            s.close()
        socks = []
        # recovery (bounded): a request is served again
        ok = False
        end = time.time() + 15
        while time.time() < end and not ok:
            try:
                ok = h.status_of(request(lb.port, b"GET /again HTTP/1.1\r\nHost: x\r\n\r\n", timeout=3)) == 200
            except OSError:
                pass
            if not ok:
                time.sleep(0.1)
        check(ok, "not served again after the clients left")
        st = lb.stats()["limits"]
        errors = st["accept_errors"] - before["accept_errors"]
        check(st["accept_backoffs"] >= 1 and errors >= 1,
              "descriptors never ran out (RLIMIT_NOFILE 64, %d clients): %s" % (n_open, st))
        # a spinning accept() fails hundreds of thousands of times a second; the backoff (10 ms
        # doubling to 1 s) allows a few hundred in these seconds at most
        check(errors < 1000, "%d accept errors while %d clients held the queue: accept spins" % (errors, n_open))
        logged = [l for l in lb.output().splitlines() if "accept:" in l]
        check(len(logged) <= 20, "%d accept error lines logged" % len(logged))
        log("RLIMIT_NOFILE 64, %d clients for %.0f s: %d accept errors, %d backoffs, %d log lines; "
            "served again afterwards" % (n_open, hold_s, errors, st["accept_backoffs"], len(logged)))
        lb.wait_idle()
        lb.stop()
    finally:
        for s in socks:
            s.close()
        rb.close()


# ------------------------------------------------------------------------------------------------
def stats(env):
    """The stats listener: /_chring/ answered there, 404 on the main listener; --stats-allow
    refuses other peers (403); 5,000 members x 160 points: stats answered in one pass per request
    while requests are proxied, and SIGTERM stops the balancer."""
    rb = h.RawBackend()
    rb.answer = port_answer(rb)
    try:
        lb = h.Balancer(env, ["--backend", rb.member], stats_listen=True).start()
        s1 = h.status_of(request(lb.port, b"GET /_chring/stats HTTP/1.1\r\nHost: x\r\n\r\n"))
        s2 = h.status_of(request(lb.port, b"GET /_chring/ HTTP/1.1\r\nHost: x\r\n\r\n"))
        check(s1 == 404 and s2 == 404, "the main listener answered /_chring/: %s %s" % (s1, s2))
        page = request(lb.stats_port, b"GET /_chring/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        check(h.status_of(page) == 200 and b"<svg" in page and b"text/html" in page, "status page: %r" % page[:200])
        check(b"http://" not in page.split(b"\r\n\r\n", 1)[1].replace(b"http://www.w3.org/", b""),
              "the status page refers to an external asset")
        check(b"/_chring/stats" not in rb.received(), "a stats request reached the backend")
        lb.stop()
        lb = h.Balancer(env, ["--backend", rb.member, "--stats-allow", "10.0.0.0/8,fd00::/8"], name="lb-allow")
        lb.proc = env.spawn(lb.name, lb.argv)  # not start(): it reads the stats, which are refused
        h.wait_port(lb.port, proc=lb.proc)
        resp = request(lb.port, b"GET /_chring/stats HTTP/1.1\r\nHost: x\r\n\r\n")
        check(h.status_of(resp) == 403, "a peer outside --stats-allow: %r" % resp[:100])
        resp = request(lb.port, b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
        check(h.status_of(resp) == 200, "proxying with --stats-allow: %r" % resp[:100])
        rc = env.stop(lb.proc, timeout=20)
        check(rc == 0, "exit status %s" % rc)
        log("stats: 404 on the main listener with --stats-listen, 403 outside --stats-allow")
        # many members: the members file names 5,000 backends (only the first one is listening)
        mf = env.path("members.txt")
        with open(mf, "w") as f:
            f.write(rb.member + "\n")
            for i in range(4999):
                f.write("127.0.%d.%d:%d\n" % (1 + i // 250, 1 + i % 250, 1000 + i))
        lb = h.Balancer(env, ["--members", mf], stats_listen=True, name="lb-many").start()
        t0 = time.time()
        st = lb.stats()
        took = time.time() - t0
        check(st["ring"]["members"] == 5000 and len(st["members"]) == 5000, "members: %d" % st["ring"]["members"])
        total = sum(m["share"] for m in st["members"])
        check(abs(total - 1.0) < 1e-3, "shares sum to %f" % total)
        check(st["ring"]["arcs"] and st["ring"]["arcs_of"] == 720, "no arcs")
        stop = threading.Event()
        stat_count = [0]

        def hammer():
            while not stop.is_set() and stat_count[0] < 200:
                try:
                    lb.stats()
                    stat_count[0] += 1
                except Exception:
                    return

        th = [threading.Thread(target=hammer, daemon=True) for _ in range(2)]
        for t in th:
            t.start()
        served = 0
        for i in range(20):
            k = "/p%d" % i
            resp = request(lb.port, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % k.encode(), timeout=10)
            served += h.status_of(resp) in (200, 502)
        stop.set()
        for t in th:
            t.join(20)
        check(served == 20, "requests proxied while stats were read: %d of 20" % served)
        log("5,000 members (800,000 points): one stats request took %.2f s; %d stats requests and 20 "
            "proxied requests at once" % (took, stat_count[0]))
        lb.stop()
    finally:
        rb.close()



# ------------------------------------------------------------------------------------------------
def park(env):
    """--max-conns 2 and 2 workers, 30 rounds: 2 held connections, then 6 clients connect at once
    and send a request with "Connection: close"; 2 of them leave again while the limit holds
    (waiting in the accept queue, or parked after a parallel accept took the last slot), then the
    2 held close.  Each of the 4 that stayed is answered.  Once every client left, no connection is
    counted or parked any more and a new one is served: a parked connection that leaves gives its
    promise of a slot back, or the listeners would stay disabled."""
    rb = h.RawBackend()
    rb.answer = port_answer(rb)
    lb = None
    open_socks = []
    try:
        lb = h.Balancer(env, ["--backend", rb.member, "--max-conns", "2"], threads=2,
                        stats_listen=True).start()
        req = b"GET /p HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        rounds, end = 0, time.time() + 60
        while rounds < 30 and time.time() < end:
            rounds += 1
            held = [socket.create_connection(("127.0.0.1", lb.port), timeout=5) for _ in range(2)]
            open_socks += held
            for s in held:
                s.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
                check(h.status_of(read_answer(s)) == 200, "round %d: a held connection was not served"
                      % rounds)
            waiters = [socket.create_connection(("127.0.0.1", lb.port), timeout=5) for _ in range(6)]
            open_socks += waiters
            for s in waiters:
                s.sendall(req)
            time.sleep(0.02)
            for s in waiters[:2]:
                s.close()
            stay = waiters[2:]
            for s in held:
                s.close()
            served, _, waiting = collect_answers(stay)
            check(served == 4, "round %d: %d of the 4 clients that stayed were answered (%d still "
                  "waiting; limits %s)" % (rounds, served, len(waiting), lb.stats()["limits"]))
            for s in stay:
                s.close()
            open_socks = []
        # a hang detector: the 30 rounds take about a second; 60 s is the loop's bound
        check(rounds == 30, "only %d rounds in 60 s" % rounds)
        st = lb.stats()["limits"]
        end = time.time() + 10
        while time.time() < end and (st["conns"] != 0 or st["parked"] != 0):
            time.sleep(0.05)
            st = lb.stats()["limits"]
        check(st["conns"] == 0 and st["parked"] == 0,
              "every client left, but %d connections counted and %d parked" % (st["conns"], st["parked"]))
        check(h.status_of(request(lb.port, b"GET /z HTTP/1.1\r\nHost: x\r\n\r\n")) == 200,
              "a new connection after the rounds was not served")
        log("30 rounds at --max-conns 2: every client that stayed was answered, %d connections were "
            "parked after a parallel accept, none counted or parked at the end"
            % st["conns_parked"])
        lb.wait_idle()
        lb.stop()
        lb = None
    finally:
        for s in open_socks:
            s.close()
        if lb is not None:
            lb.stop()
        rb.close()


TESTS = {"conns": conns, "park": park, "requests-bodies": requests_bodies, "emfile": emfile, "stats": stats}



if __name__ == "__main__":
    sys.exit(h.main(TESTS, all_case=True))
