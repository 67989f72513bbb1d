#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/fuzz_etcd.c into fuzz/corpus/etcd/ (the first byte of each
input picks the reader: 0 range, 1 watch, 2 base64, 3 JSON string, 4 log quote).  Run from the
top of the tree; the files are checked in."""
import base64
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "etcd")
P = b"/chring/pool/"


def b64(b):
    return base64.b64encode(b).decode()


def kv(name, value=None):
    d = {"key": b64(P + name), "create_revision": "2", "mod_revision": "3", "version": "1"}
    if value is not None:
        d["value"] = b64(value)
    return d


def header(rev):
    return {"cluster_id": "14841639068965178418", "member_id": "10276657743932975437",
            "revision": str(rev), "raft_term": "2"}


seeds = {
    "range-empty": b"\0" + json.dumps({"header": header(1)}).encode(),
    "range-three": b"\0" + json.dumps({"header": header(7), "kvs": [
        kv(b"10.0.0.1:80"), kv(b"10.0.0.2:80", b"3"), kv(b"[::1]:8080", b"10000")],
        "count": "3"}).encode(),
    "range-bad": b"\0" + json.dumps({"header": header(9), "kvs": [
        kv(b"no-port"), kv(b"a:1", b"0"), kv(b"a:1", b"10001"), kv(b"a\x00b:1"),
        kv(b"a b:1"), kv(b"\x1b[31m:1"), {"key": "not base64!"}, {"key": b64(b"/other/x:1")},
        kv(b"ok:1", b"07")]}).encode(),
    "watch-created": b"\1" + json.dumps({"result": {"header": header(8), "created": True}}).encode(),
    "watch-events": b"\1" + json.dumps({"result": {"header": header(12), "events": [
        {"kv": kv(b"10.0.0.3:80", b"2")}, {"type": "DELETE", "kv": {"key": b64(P + b"10.0.0.1:80"),
                                                                     "mod_revision": "12"}}]}}).encode(),
    "watch-canceled": b"\1" + json.dumps({"result": {"header": header(20), "canceled": True,
                                                       "compact_revision": "15"}}).encode(),
    "watch-error": b"\1" + json.dumps({"error": {"grpc_code": 14, "message": "unavailable"}}).encode(),
    "b64-foobar": b"\2" + b"Zm9vYmFy",
    "b64-pad1": b"\2" + b"Zm9vYmE=",
    "b64-pad2": b"\2" + b"Zm9vYg==",
    "b64-noncanonical": b"\2" + b"Zh==",
    "json-bidi": b"\3" + "evil\u202egpj.exe\u200b".encode() + b"\xff\xfe\xed\xa0\x80\xc0\xaf\xf4\x90\x80\x80",
    "json-plain": b"\3" + "caf\u00e9 \U0001f600 \"q\" \\".encode(),
    "quote-escapes": b"\4" + b"line\n12:00:00.000 chring-lb: forged\x1b[31m\x07\\\xff",
}
os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print("%d seeds in %s" % (len(seeds), OUT))
