"""A stand-in for etcd's v3 JSON gateway on 127.0.0.1, under the test's control: it answers
POST /v3/kv/range and POST /v3/watch the way etcd does (base64 keys and values, revisions as
strings, a watch as a chunked stream of JSON lines), or in any hostile way a test asks for.
Used by tests/lb/lb_feed.py and bench/lb/feed_bench.py.

    srv = FakeEtcd()                      # listens on a free port; srv.url
    srv.members = {"127.0.0.1:9001": 1}   # what a range answers (name -> weight or raw value)
    srv.range_hook = fn(conn)             # instead of the answer: fn writes what it wants
    srv.watch_hook = fn(conn)             # likewise for a watch, after the response head
    srv.send(events)                      # a watch batch to every open watch
    srv.close()

Every connection is served by a daemon thread; close() shuts the listener and every
connection, so nothing outlives the test.
"""
import base64
import json
import socket
import threading
import time


def b64(b):
    if isinstance(b, str):
        b = b.encode("utf-8", "surrogateescape")
    return base64.b64encode(b).decode()


class FakeEtcd:
    def __init__(self, prefix=b"/chring/pool/"):
        self.prefix = prefix
        self.members = {}
        self.revision = 10
        self.range_hook = None
        self.watch_hook = None
        self.ranges = 0
        self.watches = 0
        self.watch_conns = []
        self.conns = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.closed = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    # -- etcd's answers ---------------------------------------------------------------------
    def kv(self, name, value):
        key = name if isinstance(name, bytes) else name.encode("utf-8", "surrogateescape")
        d = {"key": b64(self.prefix + key), "create_revision": "2", "mod_revision": "3",
             "version": "1"}
        if value not in (None, "", b""):
            d["value"] = b64(str(value) if isinstance(value, int) else value)
        return d

    def range_body(self):
        kvs = [self.kv(n, w) for n, w in self.members.items()]
        return json.dumps({"header": {"cluster_id": "1", "member_id": "2",
                                      "revision": str(self.revision), "raft_term": "2"},
                           "kvs": kvs, "count": str(len(kvs))}).encode()

    def watch_line(self, events=None, **extra):
        r = {"header": {"cluster_id": "1", "member_id": "2", "revision": str(self.revision),
                        "raft_term": "2"}}
        r.update(extra)
        if events:
            r["events"] = events
        return json.dumps({"result": r}).encode() + b"\n"

    def put_event(self, name, value=None):
        self.revision += 1
        return {"kv": self.kv(name, value)}

    def delete_event(self, name):
        self.revision += 1
        key = name if isinstance(name, bytes) else name.encode()
        return {"type": "DELETE", "kv": {"key": b64(self.prefix + key)}}

    def send(self, events=None, raw=None):
        """A watch message (events, or raw bytes as they are) to every open watch."""
        data = raw if raw is not None else self.watch_line(events)
        with self.lock:
            conns = list(self.watch_conns)
        for c in conns:
            try:
                chunk(c, data)
            except OSError:
                pass
        return len(conns)

    # -- serving ----------------------------------------------------------------------------
    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            c.settimeout(30)
            buf = b""
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            head, _, body = buf.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            path = lines[0].split(b" ")[1]
            n = 0
            for l in lines[1:]:
                k, _, v = l.partition(b":")
                if k.strip().lower() == b"content-length":
                    n = int(v.strip())
            while len(body) < n:
                body += c.recv(65536)
            if path == b"/v3/kv/range":
                with self.lock:
                    self.ranges += 1
                if self.range_hook:
                    self.range_hook(c)
                    return
                data = self.range_body()
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(data) + data)
                time.sleep(0.2)  # the client closes; a keep-alive would wait here
            elif path == b"/v3/watch":
                with self.lock:
                    self.watches += 1
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n")
                if self.watch_hook:
                    self.watch_hook(c)
                    return
                chunk(c, self.watch_line(created=True))
                with self.lock:
                    self.watch_conns.append(c)
                while not self.closed:  # held open; data comes from send()
                    try:
                        if not c.recv(4096):
                            break
                    except socket.timeout:
                        continue
            else:
                c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        except OSError:
            pass
        finally:
            with self.lock:
                if c in self.watch_conns:
                    self.watch_conns.remove(c)
            try:
                c.close()
            except OSError:
                pass

    def close(self):
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass


def chunk(c, data):
    c.sendall(b"%x\r\n" % len(data) + data + b"\r\n")
