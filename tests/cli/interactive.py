#!/usr/bin/env python3
"""Drives the chring tool through a pipe the way an interactive client does: writes one line,
waits (with a timeout) for its answer, then writes the next.  It fails if an answer does not come
while standard input is still open, which is what happens when a tool buffers its output.

    interactive.py <chring-binary>

Expected answers come from the reference model (ref_exercise.py), not from the tool.
"""
import os
import select
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_exercise  # noqa: E402

TIMEOUT = 10.0


class Session:
    def __init__(self, tool):
        self.proc = subprocess.Popen([tool, '--profile', 'murmur32', '--vnodes', '16'],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.buf = b''
        self.model = ref_exercise.Model('murmur32', 16)

    def read_line(self, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b'\n' not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self.buf += chunk
        line, self.buf = self.buf.split(b'\n', 1)
        return line

    def send(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def ask(self, line, nlines=None, want=None):
        """Sends one command, reads its answer lines and compares them with the model's."""
        if want is None:
            want = self.model.exec(line)
        self.send(line + b'\n')
        got = []
        for _ in range(len(want) if nlines is None else nlines):
            answer = self.read_line()
            if answer is None:
                raise AssertionError('no answer to %r within %.0f s (got %r)' % (line, TIMEOUT,
                                                                                 got))
            got.append(answer)
        if got != want:
            raise AssertionError('%r: expected %r, got %r' % (line, want, got))
        print('ok  %-24s -> %d line(s)' % (line.decode(errors='replace')[:24], len(got)))


def main():
    s = Session(sys.argv[1])
    try:
        s.ask(b'HASH test')
        s.ask(b'HASH Hello, world!')
        s.ask(b'LOOKUP k')
        s.ask(b'POOL a b c')
        s.ask(b'LOOKUP x')
        s.ask(b'RING')            # 48 lines, all before the next command is written
        s.ask(b'DIST')
        s.ask(b'SNAP 2000')
        s.ask(b'ADD d')
        s.ask(b'MOVED')
        s.ask(b'FROB', want=[b'ERR unknown command'])
        # Half a line: no answer may come until its newline does.
        s.send(b'HASH te')
        early = s.read_line(timeout=0.3)
        if early is not None:
            raise AssertionError('answered %r before the line was complete' % early)
        s.model.exec(b'HASH test')
        s.send(b'st\n')
        answer = s.read_line()
        if answer != b'3127628307':
            raise AssertionError('split line: expected 3127628307, got %r' % answer)
        print('ok  HASH te|st (split)      -> 1 line(s)')
        s.ask(b'VERSION')
        s.proc.stdin.close()
        rest = s.proc.stdout.read()
        status = s.proc.wait(timeout=TIMEOUT)
        if rest or status != 0:
            raise AssertionError('at EOF: extra output %r, exit status %d' % (rest, status))
        print('ok  EOF -> exit 0')
    except AssertionError as e:
        print('FAIL', e)
        s.proc.kill()
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
