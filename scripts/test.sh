#!/usr/bin/env bash
# Builds chring and runs every registered meson test suite, then prints one last line
# "N passed, N failed" (", N skipped" when nonzero) from the test log.
#
#   scripts/test.sh [BUILDDIR [MESON_OPTION...]]
#
# Environment: TEST_ARGS (extra `meson test` arguments, e.g. "--suite unit"), TEST_PROCESSES
# (parallel tests, default 2), BUILDTYPE, NINJA_JOBS (see scripts/build.sh).  A failed configure
# or build counts as one failure.  Exit status: 0 when nothing failed.
set -uo pipefail

cd "$(dirname "$0")/.."
builddir="${1:-build}"

if ! scripts/build.sh "$@"; then
    echo "test.sh: configuring or building $builddir failed"
    echo "0 passed, 1 failed"
    exit 1
fi

log="$builddir/meson-logs/testlog.json"
rm -f "$log"
# shellcheck disable=SC2086 # TEST_ARGS is a list of words on purpose
meson test -C "$builddir" --print-errorlogs --num-processes "${TEST_PROCESSES:-2}" ${TEST_ARGS:-}
status=$?

if [ ! -f "$log" ] && [ "$status" -eq 0 ]; then
    echo "test.sh: no tests are registered in $builddir"
    echo "0 passed, 0 failed"
    exit 0
fi
if [ ! -f "$log" ]; then
    echo "test.sh: meson test exited with $status and wrote no $log"
    echo "0 passed, 1 failed"
    exit 1
fi
if [ "$status" -eq 0 ]; then
    python3 scripts/test-summary.py "$log"
    exit $?
fi
# The runner failed: the log names the failed tests.  If it names none (the runner itself broke,
# or a rebuild failed), count the run as one failure so that the last line never says 0 failed.
python3 scripts/test-summary.py --quiet "$log" >/dev/null
if [ $? -ne 0 ]; then
    python3 scripts/test-summary.py "$log"
    exit 1
fi
read -r passed failed skipped < <(python3 scripts/test-summary.py --counts "$log")
echo "FAILED meson test exited with status $status"
line="$passed passed, $((failed + 1)) failed"
[ "$skipped" -gt 0 ] && line="$line, $skipped skipped"
echo "$line"
exit 1
