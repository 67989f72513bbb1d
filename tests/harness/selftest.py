#!/usr/bin/env python3
"""The harness of the real-server suites (tests/harness/realserver.py) tested on itself: a small
suite script written to a temporary folder runs each of its cases in a process of its own, and
what the harness promises is checked from outside: the exit status (0, 1, 2 for usage, 77 for a
missing program or a case's extra need, or a test that skips itself), the final line with the
counts, the end of a server's output printed on a failure, no server left running and no folder
left behind, passed, failed, crashed, skipped, killed by SIGTERM (meson's timeout) or with a
server that ignores SIGTERM; and `SCRIPT all`, which runs every case and sums them up in one line.

    selftest.py      runs every case; exit 0 when all hold, 1 otherwise

Bounded: each case runs under a 30 s timeout, and every server is a sleeping Python process on
127.0.0.1 that the harness must stop.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CASE_TIMEOUT = 30

# The suite under test: each case starts a server (a Python process listening on 127.0.0.1 that
# says hello on its stdout) and prints its pid and the Env's folder for the checks outside.
SUITE = r'''
import os, signal, sys, time
sys.path.insert(0, %(here)r)
import realserver as h

SERVER = """
import signal, socket, sys, time
if sys.argv[2] == 'stubborn':
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
s = socket.socket()
s.bind(('127.0.0.1', int(sys.argv[1])))
s.listen(8)
print('server-says-hello', flush=True)
print('the-last-line', file=sys.stderr, flush=True)
time.sleep(120)
"""


def server(env, kind="plain"):
    port = h.free_port()
    p = env.spawn("server", [sys.executable, "-c", SERVER, str(port), kind])
    h.wait_port(port, timeout=20, proc=p)
    h.log("pid", p.pid, "dir", env.dir)
    return p


def passing(env):
    server(env)
    h.check(True, "one")
    h.check(1 + 1 == 2, "two")


def failing(env):
    server(env)
    h.check(True, "first")
    h.check(False, "the planted failure")
    h.check(True, "never reached")


def crashing(env):
    server(env)
    raise ValueError("a planted error")


def early_exit(env):
    p = env.spawn("quitter", [sys.executable, "-c",
                              "import sys; print('bad config line 3', flush=True); sys.exit(3)"])
    h.log("pid", p.pid, "dir", env.dir)
    h.wait_port(h.free_port(), timeout=20, proc=p)


def never_ready(env):
    p = env.spawn("sleeper", [sys.executable, "-c",
                              "import time; print('asleep', flush=True); time.sleep(120)"])
    h.log("pid", p.pid, "dir", env.dir)
    h.wait_port(h.free_port(), timeout=1, proc=p)


def hanging(env):
    server(env)
    h.log("waiting")
    time.sleep(50)


def stubborn(env):
    p = server(env, "stubborn")
    h.check(env.stop(p, signal.SIGTERM, timeout=1) == -signal.SIGKILL, "killed")


def skipping(env):
    server(env)
    h.check(True, "before the skip")
    h.skip("a planted resource (not here)")
    h.check(False, "never reached")


def no_env():
    v = h.Env("own", "selftest")
    port = h.free_port()
    p = v.spawn("server", [sys.executable, "-c", SERVER, str(port), "plain"])
    h.wait_port(port, timeout=20, proc=p)
    h.log("pid", p.pid, "dir", v.dir)
    h.check(False, "failed with an Env of its own")


TESTS = {"passing": passing, "failing": failing, "crashing": crashing, "early-exit": early_exit,
         "never-ready": never_ready, "hanging": hanging, "stubborn": stubborn, "no-env": no_env,
         "skipping": skipping}
if os.environ.get("CASES"):
    TESTS = {k: TESTS[k] for k in os.environ["CASES"].split(",")}


def extra_needs(case):
    return os.environ.get("EXTRA") if case == os.environ.get("EXTRA_CASE", "passing") else None


sys.exit(h.main(TESTS, needs=(sys.executable, os.environ.get("NEED", sys.executable)),
                extra_needs=extra_needs, all_case=True))
'''


class Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAILED:", what, flush=True)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is not running: the harness reaps what it starts, but the suite's process that
    # was its parent may already be gone
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def finish(p, out=""):
    """Waits for the suite's process (bounded): SIGTERM after CASE_TIMEOUT seconds (the harness
    then stops its servers), SIGKILL if that does not end it.  (exit status, output)."""
    try:
        rest, _ = p.communicate(timeout=CASE_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        try:
            rest, _ = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            rest, _ = p.communicate()
        rest += "\n(selftest: the case did not end in %d s)" % CASE_TIMEOUT
    return p.returncode, out + rest


def run_case(script, case, env=None, term_after=None):
    """Runs `script case`; (exit status, output)."""
    p = subprocess.Popen([sys.executable, script, case], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=env, text=True)
    if term_after:
        # SIGTERM once the case says it is waiting (bounded), as meson does on a timeout
        out = ""
        end = time.time() + 30
        while "waiting" not in out and time.time() < end:
            line = p.stdout.readline()
            if not line:
                break
            out += line
        p.send_signal(signal.SIGTERM)
        return finish(p, out)
    return finish(p)


def main():
    c = Checks()
    tmp = tempfile.mkdtemp(prefix="chring-harness-selftest-")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    for v in ("CHRING_KEEP_TMP", "LB_KEEP_TMP", "CHRING_NGINX_KEEP_TMP"):
        env.pop(v, None)
    try:
        script = os.path.join(tmp, "suite.py")
        with open(script, "w") as f:
            f.write(SUITE % {"here": HERE})
        expect = {
            # case: (exit status, final line's pattern, text the output must hold, whether the
            # end of the servers' output is printed)
            "passing": (0, r"PASS passing in [\d.]+s: 2 checks passed$", None, False),
            "failing": (1, r"FAIL failing in [\d.]+s: 1 checks passed, 1 failed: the planted "
                           r"failure$", "server-says-hello", True),
            "crashing": (1, r"FAIL crashing in [\d.]+s: 0 checks passed, 0 failed: ValueError: "
                            r"a planted error$", "Traceback", True),
            "early-exit": (1, r"FAIL early-exit in [\d.]+s: .*process exited with 3",
                           "bad config line 3", True),
            "never-ready": (1, r"FAIL never-ready in [\d.]+s: .*listening on 127.0.0.1:\d+: not "
                               r"after 1s$", "asleep", True),
            "hanging": (1, r"FAIL hanging in [\d.]+s: .*stopped by signal 15", "the-last-line",
                        True),
            "stubborn": (0, r"PASS stubborn in [\d.]+s: 1 checks passed$", None, False),
            "no-env": (1, r"FAIL no-env in [\d.]+s: 0 checks passed, 1 failed: failed with an Env "
                          r"of its own$", "server-says-hello", True),
            "skipping": (77, r"SKIP skipping in [\d.]+s: a planted resource \(not here\): "
                             r"skipped$", None, False),
        }
        for case, (status, final, holds, tail) in expect.items():
            rc, out = run_case(script, case, env, term_after=(case == "hanging"))
            lines = [l for l in out.splitlines() if l.strip()]
            c.check(rc == status, "%s: exit status %s, want %s:\n%s" % (case, rc, status, out))
            c.check(lines and re.search(final, lines[-1]),
                    "%s: final line %r, want /%s/" % (case, lines[-1] if lines else "", final))
            c.check(holds is None or holds in out, "%s: the output lacks %r:\n%s"
                    % (case, holds, out))
            c.check(("--- the end of " in out) == tail, "%s: the end of the servers' output %s"
                    % (case, "missing" if tail else "printed on a pass"))
            for pid, folder in re.findall(r" pid (\d+) dir (\S+)", out):
                end = time.time() + 5
                while alive(int(pid)) and time.time() < end:
                    time.sleep(0.05)
                c.check(not alive(int(pid)), "%s: its server %s still runs" % (case, pid))
                c.check(not os.path.exists(folder), "%s: its folder %s is left" % (case, folder))
                # what a broken harness left: stopped and removed here
                if alive(int(pid)):
                    os.kill(int(pid), signal.SIGKILL)
                if folder.startswith(tempfile.gettempdir() + "/chring-"):
                    shutil.rmtree(folder, ignore_errors=True)
            if case not in ("early-exit", "never-ready"):
                c.check(" pid " in out, "%s: no server started:\n%s" % (case, out))
            print("%s: exit %d, %s" % (case, rc, lines[-1] if lines else "(no output)"), flush=True)
        # the command line: a wrong case is a usage error, a missing program a skip
        rc, out = run_case(script, "nonesuch", env)
        c.check(rc == 2 and "usage: suite.py passing|failing|" in out,
                "a wrong case: exit %s, %r" % (rc, out))
        rc, out = run_case(script, "passing", dict(env, NEED="/nonexistent/prog"))
        c.check(rc == 77 and "missing /nonexistent/prog: skipped" in out,
                "a missing program: exit %s, %r" % (rc, out))
        c.check(" pid " not in out, "a skipped case started a server")
        # what one case needs besides the suite's programs: that case skipped, the others run
        rc, out = run_case(script, "passing", dict(env, EXTRA="a planted need (a package)"))
        c.check(rc == 77 and out.strip().endswith("missing a planted need (a package): skipped")
                and " pid " not in out, "a missing extra need: exit %s, %r" % (rc, out))
        rc, out = run_case(script, "stubborn", dict(env, EXTRA="a planted need (a package)"))
        c.check(rc == 0, "another case's extra need stopped this one: exit %s, %r" % (rc, out))
        # all: every case in turn, each with its final line, then one line for them all
        for cases, extra, status, final in (
                ("passing,failing,skipping,stubborn", "a planted need",
                 1, r"FAIL all of suite.py in [\d.]+s: 1 failed \(failing\), "
                 r"1 passed, 2 skipped$"),
                ("passing,skipping,stubborn", "", 0,
                 r"PASS all of suite.py in [\d.]+s: 2 passed, 1 skipped$"),
                ("skipping", "", 77, r"SKIP all of suite.py: every test skipped$")):
            rc, out = run_case(script, "all", dict(env, CASES=cases, EXTRA=extra))
            lines = [l for l in out.splitlines() if l.strip()]
            c.check(rc == status and lines and re.search(final, lines[-1]),
                    "all of %s: exit %s (want %s), final line %r, want /%s/"
                    % (cases, rc, status, lines[-1] if lines else "", final))
            for case in cases.split(","):
                c.check(re.search(r"(PASS|FAIL|SKIP) %s in " % case, out)
                        or (case == "passing" and extra and "missing %s: skipped" % extra in out),
                        "all of %s: no final line for %s:\n%s" % (cases, case, out))
            for pid, folder in re.findall(r" pid (\d+) dir (\S+)", out):
                end = time.time() + 5
                while alive(int(pid)) and time.time() < end:
                    time.sleep(0.05)
                c.check(not alive(int(pid)) and not os.path.exists(folder),
                        "all of %s: server %s or folder %s left" % (cases, pid, folder))
            print("all of %s: exit %d, %s" % (cases, rc, lines[-1] if lines else "(no output)"),
                  flush=True)
        # a folder kept on request
        rc, out = run_case(script, "passing", dict(env, CHRING_KEEP_TMP="1"))
        kept = re.findall(r" kept (\S+)", out)
        c.check(rc == 0 and kept and all(os.path.isdir(k) for k in kept),
                "CHRING_KEEP_TMP did not keep the folder: %r" % out)
        for k in kept:
            shutil.rmtree(k, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%s: %d checks passed, %d failed" % ("PASS" if not c.failed else "FAIL", c.passed,
                                              c.failed))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
