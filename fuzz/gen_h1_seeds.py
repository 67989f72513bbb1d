#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_h1 and fuzz_chunked (fuzz/corpus/h1, fuzz/corpus/chunked):
the requests and answers chring-lb's tests send (accepted and refused ones), each behind the
target's two control bytes.  Run from the top of the tree; the files are checked in."""
import hashlib
import os

REQ, ANS, ANS_HEAD = 0, 1, 3
SMUGGLE = b"GET /admin-secret HTTP/1.1\r\nHost: x\r\n\r\n"
requests = [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a?b=c&k=1 HTTP/1.1\r\nHost: example.com:8080\r\nX-A: 1\r\nConnection: keep-alive\r\n\r\n",
    b"GET http://real.example:8080/p?q=1 HTTP/1.1\r\nHost: other\r\nConnection: Host, close\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /old HTTP/1.0\r\n\r\n",
    b"\r\n\r\nGET /lead HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /next HTTP/1.1\r\n",
    b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
    b"5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n",
    b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\nContent-Length: 42\r\n\r\n0\r\n\r\n" + SMUGGLE,
    b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLE,
    b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n0\r\n\r\n",
    b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 42\r\n\r\n",
    b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello",
    b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
    b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX0\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    b"GET /a HTTP/1.1\nHost: x\n\n",
    b"GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
    b"GET  /a HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a HTTP/1.01\r\nHost: x\r\n\r\n",
    b"GET /a#frag HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: x\r\nVia: 1.1 chring-lb-0123456789abcdef\r\n\r\n",
]
answers = [
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloPOISON",
    b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 11\r\n\r\nhelloPOISON",
    b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nhello",
    b"HTTP/1.1 2000 OK\r\nContent-Length: 5\r\n\r\nhello",
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.0 200 OK\r\n\r\nuntil the close",
    b"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\nConnection: close\r\n\r\n",
]


def write(d, blobs):
    os.makedirs(d, exist_ok=True)
    for b in blobs:
        with open(os.path.join(d, hashlib.sha1(b).hexdigest()[:16]), "wb") as f:
            f.write(b)


h1 = []
for r in requests:
    h1 += [bytes([REQ, 255]) + r, bytes([REQ, 0]) + r, bytes([REQ, 6]) + r]
for a in answers:
    h1 += [bytes([ANS, 255]) + a, bytes([ANS, 2]) + a, bytes([ANS_HEAD, 255]) + a]
write("fuzz/corpus/h1", h1)
chunked = [
    b"5\r\nhello\r\n0\r\n\r\n",
    b"5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n",
    b"0x5\r\nhello\r\n0\r\n\r\n",
    b"ffffffffffffffff\r\n",
    bytes([7, 15, 3, 0, 4, 200]) + b"a payload cut in chunks of 1, 5 and 201 bytes",
    bytes([1, 0, 0]) + b"one chunk",
]
write("fuzz/corpus/chunked", chunked)
