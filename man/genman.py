#!/usr/bin/env python3
"""Writes chring's man pages from the sources they document, so that they cannot drift.

    genman.py help PROGRAM TEMPLATE OUT VERSION   chring(1), chring-lb(1): the template's prose
                                                  around the program's own --help, turned into
                                                  OPTIONS and COMMANDS sections
    genman.py header CHRING_H README TEMPLATE OUT VERSION
                                                  chring(3): the template's prose, the header's
                                                  opening paragraphs (threads, ordering, errors,
                                                  callbacks, fork, stability), every declaration
                                                  of the header with its comment, and the README's
                                                  C example (the one tests/pkg compiles)

A template is roff with @VERSION@, @DATE@ and @GENERATED@ (where the generated sections go).
The page date is the source's modification time unless SOURCE_DATE_EPOCH is set (reproducible).
"""
import os
import re
import subprocess
import sys
import time


def roff(text):
    """Escapes plain text for roff: backslashes, and a leading dot or quote."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    lines = []
    for line in text.split("\n"):
        if line.startswith(".") or line.startswith("'"):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def page_date(paths):
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    stamp = int(epoch) if epoch else int(max(os.path.getmtime(p) for p in paths))
    return time.strftime("%Y-%m-%d", time.gmtime(stamp))


def fill(template, version, date, generated):
    with open(template, encoding="utf-8") as f:
        text = f.read()
    return text.replace("@VERSION@", version).replace("@DATE@", date).replace("@GENERATED@", generated)


# ---- chring(1), chring-lb(1): from --help --------------------------------------------------

def help_entries(lines):
    """Entries of an indented help list: ("  TERM   description", continuation lines)."""
    entries = []
    for line in lines:
        m = re.match(r"^  (\S.*?)(?: {2,}(.*))?$", line)
        if m and not line.startswith("    "):
            cols = [m.group(1)] + ([c for c in re.split(r" {2,}", m.group(2))] if m.group(2) else [])
            entries.append(cols)
        elif line.strip() and entries:
            entries[-1][-1] = entries[-1][-1] + " " + line.strip()
    return entries


def from_help(program, template, out, version):
    text = subprocess.run([program, "--help"], check=True, capture_output=True, text=True).stdout
    lines = text.rstrip("\n").split("\n")
    usage = lines[0]
    if not usage.startswith("usage: "):
        sys.exit(f"genman: {program} --help does not begin with 'usage: '")
    sections = []  # (title, intro lines, entry lines), split at lines that are not indented
    title, intro, body, tail = "OPTIONS", [], [], []
    for line in lines[1:]:
        if line.startswith("  "):
            body.append(line)
        elif body and line.startswith("Commands"):
            sections.append((title, intro, body))
            title, intro, body = "COMMANDS", [line], []
        elif body:
            tail.append(line)
        else:
            intro.append(line)
    sections.append((title, intro, body))
    gen = [".SH SYNOPSIS", ".B " + roff(usage[len("usage: "):])]
    for title, intro, body in sections:
        gen.append(".SH " + title)
        for line in intro:
            gen += [".PP", roff(line)]
        for cols in help_entries(body):
            gen += [".TP", "\\fB" + roff(cols[0]) + "\\fR"]
            desc = cols[1] if len(cols) > 1 else ""
            if len(cols) > 2:
                desc += ". Answer: " + cols[2]
            gen.append(roff(desc))
    if tail:
        gen.append(".PP")
        gen += [roff(line) for line in tail]
    page = fill(template, version, page_date([template, program]), "\n".join(gen))
    with open(out, "w", encoding="utf-8") as f:
        f.write(page)


# ---- chring(3): from the header -------------------------------------------------------------

def comment_text(block):
    """The text of a /* ... */ comment, its leading stars removed."""
    body = block.strip()
    body = re.sub(r"^/\*+", "", body)
    body = re.sub(r"\*+/$", "", body)
    lines = [re.sub(r"^\s*\* ?", "", line) for line in body.split("\n")]
    return "\n".join(lines).strip()


def paragraphs(text):
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def from_header(header, readme, template, out, version):
    with open(header, encoding="utf-8") as f:
        src = f.read()
    gen = []
    # The opening comment: its paragraphs that begin with a title ("Threads in one paragraph.",
    # "Ordering.", ...) become sections of the page.
    opening = comment_text(src[: src.index("*/") + 2])
    for para in paragraphs(opening)[1:]:
        m = re.match(r"^(Threads in one paragraph|Ordering|Errors|Callbacks|fork\(\)|Stability)[.:]\s*(.*)$", para)
        if m:
            title = {"Threads in one paragraph": "THREADS"}.get(m.group(1), m.group(1).upper())
            text = m.group(2)
            gen += [".SH " + roff(title), roff(text[:1].upper() + text[1:])]
    # Everything after the include guard, in order: section banners, comments, declarations.
    body = src[src.index("#define CHRING_H") :]
    body = body[: body.rindex("#ifdef __cplusplus")]
    body = body[body.index("/* ----") :]  # from the first section on (includes, extern "C" before)
    gen.append(".SH API REFERENCE")
    pos = 0
    token = re.compile(r"/\*.*?\*/|#(?:[^\\\n]|\\\n|\\)*|[^/#]+|/", re.S)
    pending = []
    code = []

    def flush_code():
        text = "".join(code).strip()
        code.clear()
        if not text or text in ("{", "}"):
            return
        text = "\n".join(line.rstrip() for line in text.split("\n"))
        gen.extend([".PP", ".nf", ".ft CW", roff(text), ".ft", ".fi"])
        if pending:
            gen.extend([".RS", roff(" ".join(pending)), ".RE"])
            pending.clear()

    while pos < len(body):
        m = token.match(body, pos)
        pos = m.end()
        piece = m.group(0)
        if piece.startswith("/*"):
            text = comment_text(piece)
            if piece.startswith("/* ----"):
                flush_code()
                title = [l for l in text.split("\n") if l.strip() and not set(l.strip()) <= {"-"}]
                gen += [".SS " + roff(" ".join(title))]
                pending.clear()
            elif "".join(code).strip():
                # A comment inside or after code (a field's comment): keep it in the code block.
                code.append(piece)
            else:
                pending.append(" ".join(text.split()))
        elif piece.startswith("#"):
            if re.match(r"#define (CHRING_API|CHRING_H)\b", piece) or re.match(r"#(if|elif|else|endif)", piece):
                continue
            flush_code()
            code.append(piece + "\n")
            flush_code()
        else:
            code.append(piece)
            if piece.rstrip().endswith(";") and code and "".join(code).count("{") == "".join(code).count("}"):
                flush_code()
    flush_code()
    # The README's example, which tests/pkg/readme-example.sh compiles and runs.
    with open(readme, encoding="utf-8") as f:
        m = re.search(r"^## Using the library\n.*?^```c\n(.*?)^```$", f.read(), re.S | re.M)
    if not m:
        sys.exit("genman: no C example under '## Using the library' in " + readme)
    gen += [".SH EXAMPLE", ".nf", ".ft CW", roff(m.group(1).rstrip()), ".ft", ".fi"]
    page = fill(template, version, page_date([template, header, readme]), "\n".join(gen))
    with open(out, "w", encoding="utf-8") as f:
        f.write(page)


def main(argv):
    if len(argv) == 6 and argv[1] == "help":
        from_help(argv[2], argv[3], argv[4], argv[5])
    elif len(argv) == 7 and argv[1] == "header":
        from_header(argv[2], argv[3], argv[4], argv[5], argv[6])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
