"""The harness of the suites that start real servers: tests/lb, tests/nginx and tests/varnish
(and of the benchmarks that start servers, bench/lb).

One copy of what each of them needs around its servers (CONTRIBUTING.md, "Adding a test"):

- ports: free_port() picks a free TCP port on 127.0.0.1, never the same one twice in a process;
  wait_port() waits, bounded, until something listens there.
- processes: Env.spawn() starts a program with its output in a file of the Env's folder;
  wait_port() and wait_until() wait for it to be ready with a deadline, failing at once when it
  exits first; Env.stop() sends a signal (SIGTERM unless told), waits a bounded time, then sends
  SIGKILL and reaps it.
- cleanup: every Env is a temporary folder and the processes started in it.  Env.close() stops
  them; the folder goes when the test ends (run()), or at once outside run().  An exit handler
  closes whatever is still open, and run() turns SIGTERM (meson's timeout) into a failure, so
  that nothing keeps running after a test, passed, failed or killed.
- logging: log() prints a time-stamped line; each started process writes its stdout and stderr
  to NAME.out in its Env's folder, and Env.watch() adds a server's own log file.  When a test
  fails, the last lines of each of these files are printed before the folders go.
- checks: check(cond, what) counts the checks passed and failed and raises TestFailure on a
  failed one; run() prints one final line (PASS or FAIL, the test's name, the time, the counts,
  what failed) and returns the exit status: 0 passed, 1 failed.
- the command line: main() gives a script's usage (exit 2), skips (exit 77, meson's "skipped")
  when a program or file the suite needs is missing, or when the suite's own extra_needs(case)
  names something else missing (a browser, a Python module), and runs the named test through
  run(); with all_case, `SCRIPT all` runs every test in turn and ends with one line for them all.
  A test that finds out only when running that it cannot run here calls skip(why): exit 77.

Everything listens on 127.0.0.1; every wait has a deadline.  The folders are kept for a look
afterwards when CHRING_KEEP_TMP (or the older LB_KEEP_TMP, CHRING_NGINX_KEEP_TMP) is set.
"""
import atexit
import inspect
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

KEEP_VARS = ("CHRING_KEEP_TMP", "LB_KEEP_TMP", "CHRING_NGINX_KEEP_TMP")
TAIL_LINES = 20


class TestFailure(Exception):
    pass


# ------------------------------------------------------------------------------------------------
# Checks and the log
# ------------------------------------------------------------------------------------------------

_counts_lock = threading.Lock()
_counts = {"passed": 0, "failed": 0, "failures": []}


def check(cond, what):
    """Counts one check; a false cond is a failure, raised as TestFailure(what).  Any thread."""
    with _counts_lock:
        if cond:
            _counts["passed"] += 1
            return
        _counts["failed"] += 1
        _counts["failures"].append(str(what))
    raise TestFailure(what)


def counts():
    """(checks passed, checks failed, the failed checks' messages) since the test began."""
    with _counts_lock:
        return _counts["passed"], _counts["failed"], list(_counts["failures"])


def _reset_counts():
    with _counts_lock:
        _counts["passed"] = 0
        _counts["failed"] = 0
        _counts["failures"] = []


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


# ------------------------------------------------------------------------------------------------
# Ports and readiness
# ------------------------------------------------------------------------------------------------

_ports_taken = set()


def free_port():
    """A TCP port free on 127.0.0.1 now, not handed out before by this process."""
    for _ in range(100):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in _ports_taken:
            _ports_taken.add(port)
            return port
    raise TestFailure("no free port")


def _exited(proc):
    msg = "process exited with %s" % proc.returncode
    path = getattr(proc, "log_path", None)
    if path:
        msg += "; the end of %s:\n%s" % (path, tail(path))
    return msg


def wait_until(what, pred, timeout=10.0, proc=None, interval=0.05):
    """Calls pred() until it returns a true value (returned) or timeout seconds pass
    (TestFailure: what, not after timeout); fails at once when proc, if given, has exited (with
    the end of its output)."""
    end = time.time() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise TestFailure("%s: %s" % (what, _exited(proc)))
        v = pred()
        if v:
            return v
        if time.time() >= end:
            raise TestFailure("%s: not after %.0fs" % (what, timeout))
        time.sleep(interval)


def _connects(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_port(port, timeout=10.0, proc=None):
    """Waits until a TCP connection to 127.0.0.1:port succeeds, at most timeout seconds; fails at
    once when proc, if given, exits before (with the end of its output)."""
    wait_until("listening on 127.0.0.1:%d" % port, lambda: _connects(port), timeout, proc)


# ------------------------------------------------------------------------------------------------
# Processes, their logs, cleanup
# ------------------------------------------------------------------------------------------------


def tail(path, lines=TAIL_LINES):
    """The last lines of a file ('' when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def stop_process(p, sig=signal.SIGTERM, timeout=10.0):
    """Sends sig to a running process, waits up to timeout seconds, then SIGKILL; reaps it.
    Returns its exit status (negative: the signal that ended it)."""
    if p.poll() is None:
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)
    return p.returncode


_envs = []          # every Env not yet removed
_in_run = [False]   # inside run(): folders are removed when the test ends


class Env:
    """A temporary folder and every process started in it."""

    def __init__(self, name, area="test"):
        self.dir = tempfile.mkdtemp(prefix="chring-%s-%s-" % (area, name))
        os.chmod(self.dir, 0o755)
        self.procs = []  # (name, Popen)
        self.logs = []   # files whose end is printed when the test fails
        _envs.append(self)

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def spawn(self, name, argv, **kw):
        """Starts argv with stdin from /dev/null and stdout and stderr into NAME.out of this
        folder (the Popen's log_path); kw goes to Popen (env, preexec_fn, ...)."""
        path = self.path(name + ".out")
        out = open(path, "wb")
        try:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, **kw)
        finally:
            out.close()
        p.log_path = path
        self.procs.append((name, p))
        self.watch(path)
        return p

    def watch(self, path):
        """Adds a log file (a server's own) to those printed when the test fails."""
        if path not in self.logs:
            self.logs.append(path)

    def output(self, name):
        """The whole output of the process spawned as name."""
        with open(self.path(name + ".out"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    @staticmethod
    def stop(p, sig=signal.SIGTERM, timeout=10.0):
        return stop_process(p, sig, timeout)

    def close(self):
        """Stops every process still running, the last started first; removes the folder now,
        or at the end of the test inside run() (after a failure has printed the logs)."""
        for _, p in reversed(self.procs):
            if p.poll() is None:
                stop_process(p)
        if not _in_run[0]:
            self.remove()

    def print_logs(self):
        for path in self.logs:
            text = tail(path)
            if text.strip():
                print("--- the end of %s\n%s" % (path, text), flush=True)

    def remove(self):
        if self in _envs:
            _envs.remove(self)
        if any(os.environ.get(v) for v in KEEP_VARS):
            log("kept", self.dir)
            return
        shutil.rmtree(self.dir, ignore_errors=True)


def _close_all(failed=False):
    """Closes every Env of the test (the last made first), prints their logs' ends when it
    failed, and removes their folders."""
    envs = list(reversed(_envs))
    for e in envs:
        for _, p in reversed(e.procs):
            if p.poll() is None:
                stop_process(p)
    if failed:
        for e in reversed(envs):
            e.print_logs()
    for e in envs:
        e.remove()


atexit.register(_close_all)


# ------------------------------------------------------------------------------------------------
# One test, and the command line
# ------------------------------------------------------------------------------------------------


class Skip(BaseException):
    """Raised by skip(): the test cannot run here.  Not an Exception, so that no retry loop of a
    test catches it."""


def skip(why):
    """Ends the running test as skipped (run() returns 77, meson's "skipped"): for what a test
    finds out only when it runs (a resource limit, a file built optionally).  why says what is
    missing and where it comes from."""
    raise Skip(why)


class Stopped(BaseException):
    """SIGTERM during a test (meson's timeout): not an Exception, so that no retry loop of a
    test catches it."""


def _on_sigterm(signum, frame):
    raise Stopped("stopped by signal %d (a timeout?)" % signum)


def run(fn, name=None, env_class=Env):
    """Runs one test: fn(env) with a fresh env_class(fn's name) when fn takes an argument, else
    fn().  Prints the final line and returns the exit status: 0 passed, 1 failed, 77 skipped
    (skip()).  Every Env made during the test is closed at its end; their logs are printed
    when it failed."""
    name = name or fn.__name__
    _reset_counts()
    _in_run[0] = True
    old = None
    if threading.current_thread() is threading.main_thread():
        old = signal.signal(signal.SIGTERM, _on_sigterm)
    t0 = time.time()
    failed = None
    skipped = None
    try:
        if inspect.signature(fn).parameters:
            fn(env_class(fn.__name__))
        else:
            fn()
    except Skip as e:
        skipped = str(e)
    except (TestFailure, Stopped) as e:
        failed = str(e)
    except Exception as e:  # noqa: BLE001 - any error fails the test, with its traceback
        import traceback
        traceback.print_exc()
        failed = "%s: %s" % (type(e).__name__, e)
    finally:
        try:
            _close_all(failed is not None)
        finally:
            _in_run[0] = False
            if old is not None:
                signal.signal(signal.SIGTERM, old)
    passed, nfailed, _ = counts()
    took = time.time() - t0
    if skipped is not None and failed is None:
        log("SKIP %s in %.1fs: %s: skipped" % (name, took, skipped))
        return 77
    if failed is None:
        log("PASS %s in %.1fs: %d checks passed" % (name, took, passed))
        return 0
    first, _, more = failed.partition("\n")
    if more:
        print("--- what failed\n%s" % failed, flush=True)
    log("FAIL %s in %.1fs: %d checks passed, %d failed: %s" % (name, took, passed, nfailed, first))
    return 1


def missing(needs=(), files=()):
    """The first of needs (programs: a path, or a name looked up in PATH) that cannot be run,
    or of files that cannot be read; None when all are there."""
    for prog in needs:
        ok = os.access(prog, os.X_OK) if os.sep in prog else shutil.which(prog) is not None
        if not ok:
            return prog
    for f in files:
        if not os.access(f, os.R_OK):
            return f
    return None


def main(tests, needs=(), files=(), why="", env_class=Env, argv=None, extra_needs=None,
         all_case=False):
    """The command line of a suite script: `SCRIPT NAME` runs tests[NAME] through run().

    Exit status 2 with the usage for a wrong command line; 77 (skipped) when a program of needs
    or a file of files is missing (why: a note on what provides it), or when extra_needs, if
    given, returns a reason for the case (extra_needs(NAME) -> None when the case can run, else
    what is missing and where it comes from: a browser, a Python module, a program only one case
    needs); else run()'s (env_class: the Env a test taking an argument gets).

    all_case adds `SCRIPT all`: every test in turn, each with its own final line (a case whose
    extra_needs are missing is skipped), then one line for them all; exit 1 when one failed, 77
    when all were skipped, else 0."""
    argv = sys.argv if argv is None else argv
    script = os.path.basename(argv[0])
    names = list(tests) + (["all"] if all_case and "all" not in tests else [])
    if len(argv) != 2 or argv[1] not in names:
        print("usage: %s %s" % (script, "|".join(names)), file=sys.stderr)
        return 2
    gone = missing(needs, files)
    if gone is not None:
        print("missing %s%s: skipped" % (gone, why))
        return 77
    if argv[1] in tests:
        return _run_case(tests, argv[1], env_class, extra_needs)
    t0 = time.time()
    results = [(n, _run_case(tests, n, env_class, extra_needs)) for n in tests]
    bad = [n for n, rc in results if rc not in (0, 77)]
    nskipped = sum(1 for _, rc in results if rc == 77)
    took = time.time() - t0
    if bad:
        log("FAIL all of %s in %.1fs: %d failed (%s), %d passed, %d skipped"
            % (script, took, len(bad), ", ".join(bad), len(results) - len(bad) - nskipped,
               nskipped))
        return 1
    if nskipped == len(results):
        log("SKIP all of %s: every test skipped" % script)
        return 77
    log("PASS all of %s in %.1fs: %d passed, %d skipped"
        % (script, took, len(results) - nskipped, nskipped))
    return 0


def _run_case(tests, name, env_class, extra_needs):
    why_not = extra_needs(name) if extra_needs is not None else None
    if why_not:
        print("missing %s: skipped" % why_not, flush=True)
        return 77
    return run(tests[name], name=name, env_class=env_class)
