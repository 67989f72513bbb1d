#!/usr/bin/env bash
# Runs one scripted session of the chring tool and compares its output with the expected one.
#
#   tests/cli/run.sh <chring-binary> <session.in>
#
# The session's first line may be "# args: <options>" (the tool's options for this session); the
# expected standard output is <session>.out beside it.  Standard error must be empty and the exit
# status 0.  On a mismatch the diff (expected, then actual) is printed and the exit status is 1.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 <chring-binary> <session.in>" >&2
    exit 2
fi
tool=$1
session=$2
expected=${session%.in}.out
args=()
first=$(head -n 1 "$session")
if [[ $first == "# args:"* ]]; then
    read -r -a args <<<"${first#\# args:}"
fi
actual=$(mktemp)
errors=$(mktemp)
trap 'rm -f "$actual" "$errors"' EXIT
"$tool" "${args[@]}" <"$session" >"$actual" 2>"$errors"
status=$?
fail=0
if [ $status -ne 0 ]; then
    echo "exit status $status (expected 0)"
    fail=1
fi
if [ -s "$errors" ]; then
    echo "unexpected standard error:"
    cat "$errors"
    fail=1
fi
if ! diff -u --label "expected $expected" --label "actual" -a "$expected" "$actual"; then
    fail=1
fi
if [ $fail -eq 0 ]; then
    echo "ok: $(basename "$session") ($(wc -l <"$actual") lines, ${args[*]:-default options})"
fi
exit $fail
