#!/usr/bin/env python3
"""Checks that chring-lb's HTTP/1.1 parser is a leaf library (docs/lb.md, "The parser").

Usage: scripts/h1-leaf.py [LBDIR]   (default lb/).  Fails (exit 1, one line per finding) when
lb/h1.h or lb/h1.c includes a libevent header (<event2/...>, <event.h>, <evhttp.h>, <evutil.h>),
when h1.c includes a header of lb/ other than h1.h or h1.h includes one at all, or when either
names libevent's types or calls (evbuffer, bufferevent, event_base, evhttp, evutil) outside
comments.  The test lb-h1-leaf runs it.
"""
import os
import re
import sys

lbdir = sys.argv[1] if len(sys.argv) > 1 else "lb"
LIBEVENT_HEADER = re.compile(r"^(event2/|event\.h$|evhttp\.h$|evutil\.h$|evdns\.h$|evrpc\.h$)")
LIBEVENT_NAME = re.compile(r"\b(evbuffer\w*|bufferevent\w*|event_base\w*|evhttp\w*|evutil\w*)\b")

findings = []
for name, own_headers in (("h1.h", set()), ("h1.c", {"h1.h"})):
    path = os.path.join(lbdir, name)
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        findings.append(f"{path}: cannot read: {e}")
        continue
    code = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    code = re.sub(r"//[^\n]*", "", code)
    for n, line in enumerate(code.split("\n"), 1):
        m = re.match(r"\s*#\s*include\s*([<\"])([^>\"]+)[>\"]", line)
        if m:
            kind, header = m.groups()
            if LIBEVENT_HEADER.search(header):
                findings.append(f"{path}:{n}: includes libevent's <{header}>")
            elif kind == '"' and header not in own_headers:
                findings.append(f"{path}:{n}: includes \"{header}\" (h1 includes nothing of lb/"
                                f" but h1.h)")
            continue
        stripped = re.sub(r'"(\\.|[^"\\\n])*"', '""', line)
        for word in LIBEVENT_NAME.findall(stripped):
            findings.append(f"{path}:{n}: names libevent's {word}")

for f in findings:
    print(f)
if not findings:
    print(f"{lbdir}/h1.h, {lbdir}/h1.c: a leaf (no libevent, nothing of lb/ but h1.h)")
sys.exit(1 if findings else 0)
