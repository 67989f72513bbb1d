#!/usr/bin/env python3
"""Writes a file's bytes as a C header: `static const char NAME[]` (NUL-terminated) and
`NAME_len`.  chring-lb embeds its status page (lb/status.html) this way at build time.

usage: embed.py INPUT OUTPUT NAME
"""
import sys


def main():
    src, dst, name = sys.argv[1], sys.argv[2], sys.argv[3]
    data = open(src, 'rb').read()
    lines = [f'/* Generated from {src.rsplit("/", 1)[-1]} by lb/embed.py: do not edit. */',
             f'static const char {name}[] = {{']
    for i in range(0, len(data), 16):
        lines.append('    ' + ', '.join(f'0x{b:02x}' for b in data[i:i + 16]) + ',')
    lines.append('    0x00};')
    lines.append(f'static const unsigned long {name}_len = {len(data)}ul;')
    with open(dst, 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
