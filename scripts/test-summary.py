#!/usr/bin/env python3
"""Counts the results in meson test logs (meson-logs/testlog.json, one JSON object per line).

    test-summary.py [--counts] [--quiet] LOG.json...

Prints the failed tests, then one last line "N passed, N failed" (", N skipped" added when
nonzero).  OK and EXPECTEDFAIL count as passed; FAIL, TIMEOUT, ERROR, INTERRUPT and UNEXPECTEDPASS
as failed; SKIP is counted apart.  A log that is missing or unreadable counts as one failure.
--counts prints "PASSED FAILED SKIPPED" instead (for scripts that add several logs up).
Exit status: 1 if anything failed, else 0.
"""
import json
import sys

PASSED = {"OK", "EXPECTEDFAIL"}
FAILED = {"FAIL", "TIMEOUT", "ERROR", "INTERRUPT", "UNEXPECTEDPASS"}
SKIPPED = {"SKIP"}


def main(argv):
    counts_only = "--counts" in argv
    quiet = "--quiet" in argv
    logs = [a for a in argv if not a.startswith("--")]
    if not logs:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    passed = failed = skipped = 0
    failures = []
    for path in logs:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
        except OSError as e:
            failed += 1
            failures.append(f"{path}: cannot read the test log ({e.strerror})")
            continue
        for n, line in enumerate(lines, 1):
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
                result = entry["result"]
                name = entry.get("name", "?")
            except (ValueError, KeyError, TypeError):
                failed += 1
                failures.append(f"{path}:{n}: unreadable entry")
                continue
            if result in PASSED:
                passed += 1
            elif result in SKIPPED:
                skipped += 1
            elif result in FAILED:
                failed += 1
                failures.append(f"{name}: {result}")
            else:
                # PENDING/RUNNING or a result this script does not know: not a pass.
                failed += 1
                failures.append(f"{name}: {result} (unknown result)")
    if counts_only:
        print(passed, failed, skipped)
    else:
        if not quiet:
            for f in failures:
                print("FAILED " + f)
        line = f"{passed} passed, {failed} failed"
        if skipped:
            line += f", {skipped} skipped"
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
