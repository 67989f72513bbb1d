#!/usr/bin/env python3
"""Time to first byte through chring-lb against the engine's own (docs/lb.md, "Streams"): a
streaming backend in a process of its own answers each request with its head and a first SSE
event at once, then a second event 20 ms later; a client times, for each request, from the last
byte of its request to the first event's bytes, alternating direct requests to the backend and
requests through chring-lb (fresh connections both, keep-alive both: two rows).  The difference
of the medians and of the 99th percentiles is the hop's cost.

    CHRING_LB=build/lb/chring-lb bench/lb/ttfb_bench.py [REQUESTS]

Everything runs on 127.0.0.1.  Ports, chring-lb's process and its folder are the real-server
harness's (tests/harness/realserver.py): chring-lb's output goes to lb.out in the folder, and
everything stops when the script ends.
"""
import multiprocessing
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "harness"))
import realserver  # noqa: E402

LB = os.environ.get("CHRING_LB", "build/lb/chring-lb")


def backend(port, ready):
    import threading
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(128)
    ready.set()

    def serve(c):
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    b = c.recv(65536)
                    if not b:
                        return
                    buf += b
                _, _, buf = buf.partition(b"\r\n\r\n")
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n10\r\ndata: token-01\n\n\r\n")
                time.sleep(0.02)
                c.sendall(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
        except OSError:
            pass
        finally:
            c.close()

    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


REQ = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 41\r\n\r\n" \
      b'{"model":"m","prompt":"hi","stream":true}'


def one(sock):
    """Sends a request on sock, returns the seconds to the first event, reads the answer."""
    t0 = time.perf_counter()
    sock.sendall(REQ)
    buf = b""
    first = None
    while not buf.endswith(b"0\r\n\r\n"):
        b = sock.recv(65536)
        if not b:
            raise OSError("closed")
        buf += b
        if first is None and b"data: token-01" in buf:
            first = time.perf_counter() - t0
    return first


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    bport, lport = realserver.free_port(), realserver.free_port()
    ready = multiprocessing.Event()
    bp = multiprocessing.Process(target=backend, args=(bport, ready), daemon=True)
    bp.start()
    env = realserver.Env("ttfb", "bench")
    try:
        if not ready.wait(10):
            raise realserver.TestFailure("the backend did not start in 10 s")
        lb = env.spawn("lb", [LB, "--listen", "127.0.0.1:%d" % lport, "--threads", "1",
                              "--backend", "127.0.0.1:%d" % bport, "--key", "prompt"])
        realserver.wait_port(lport, proc=lb)
        print("mode,path,requests,median_ms,p99_ms")
        for mode in ("keepalive", "fresh"):
            times = {"direct": [], "chring-lb": []}
            socks = {}
            for i in range(n):
                for path, port in (("direct", bport), ("chring-lb", lport)):
                    if mode == "fresh" or path not in socks:
                        if path in socks:
                            socks[path].close()
                        socks[path] = socket.create_connection(("127.0.0.1", port), timeout=10)
                        socks[path].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    times[path].append(one(socks[path]))
            for s in socks.values():
                s.close()
            for path, v in times.items():
                print("%s,%s,%d,%.3f,%.3f" % (mode, path, len(v), 1e3 * pct(v, 0.5), 1e3 * pct(v, 0.99)))
            print("# %s: the hop adds %.3f ms at the median, %.3f ms at p99" % (
                mode, 1e3 * (pct(times["chring-lb"], 0.5) - pct(times["direct"], 0.5)),
                1e3 * (pct(times["chring-lb"], 0.99) - pct(times["direct"], 0.99))))
    except realserver.TestFailure as e:
        print("ttfb_bench: %s" % e, file=sys.stderr)
        return 1
    finally:
        env.close()
        bp.terminate()
        bp.join(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
