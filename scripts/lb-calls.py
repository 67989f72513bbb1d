#!/usr/bin/env python3
"""Which lb/*.c file calls functions defined in which other lb/*.c file, and any two-file circles.

Usage: scripts/lb-calls.py [LBDIR]   (default lb/).  Prints "a.c -> b.c: f, g" for every use and
"circle: a.c <-> b.c" for each pair that uses each other; exits 1 when a circle is found.  A
function is "defined in" a file when the file has a non-static definition of it at column 0
(the project's style, docs/../STYLE): the check is textual, so it is a guide, not a proof.
"""
import os
import re
import sys

lbdir = sys.argv[1] if len(sys.argv) > 1 else "lb"
files = sorted(f for f in os.listdir(lbdir) if f.endswith(".c"))
src = {}
for f in files:
    text = open(os.path.join(lbdir, f), encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)      # comments
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)          # strings
    src[f] = text

# A definition: a line at column 0 that is not static, ends a declarator "name(" and whose
# statement opens a body before the next ';'.
defn = re.compile(r"^(?!static\b)(?![ \t#}])[^\n;(]*?\b([a-z_][a-z0-9_]*)\s*\(([^;{]*?)\)\s*\{", re.M)
owner = {}
for f, text in src.items():
    for m in defn.finditer(text):
        owner.setdefault(m.group(1), f)

uses = {}
for f, text in src.items():
    for name in set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*\(", text)) | set(re.findall(r"\b([a-z_][a-z0-9_]*)\b", text)):
        o = owner.get(name)
        if o and o != f:
            uses.setdefault((f, o), set()).add(name)

for (a, b), names in sorted(uses.items()):
    print(f"{a} -> {b}: {', '.join(sorted(names))}")
circles = sorted({tuple(sorted(p)) for p in uses if (p[1], p[0]) in uses})
for a, b in circles:
    print(f"circle: {a} <-> {b}")
sys.exit(1 if circles else 0)
