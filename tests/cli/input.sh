#!/usr/bin/env bash
# Tests of the chring tool's input and options (tools/main.c): files and standard input, an
# unreadable file, lines longer than the limit, a last line without a newline, --help, --version,
# bad options, a failing standard output.
#
#   tests/cli/input.sh <chring-binary>
set -u
tool=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
checks=0

# expect NAME WANT GOT: compares two strings.
expect() {
    checks=$((checks + 1))
    if [ "$2" != "$3" ]; then
        echo "FAIL $1"
        echo "  expected: $(printf '%q' "$2")"
        echo "  actual:   $(printf '%q' "$3")"
        failures=$((failures + 1))
    fi
}

m32=(--profile murmur32 --vnodes 16)

# Standard input, and the murmur32 vectors.
out=$(printf 'HASH \nHASH test\nHASH Hello, world!\n' | "$tool" "${m32[@]}"); st=$?
expect "stdin answers" $'0\n3127628307\n3224780355' "$out"
expect "stdin exit status" 0 "$st"

# --profile=VALUE form.
out=$(printf 'HASH test\n' | "$tool" --profile=murmur32); expect "--profile=murmur32" 3127628307 "$out"

# The last line may lack its newline; empty input answers nothing.
out=$(printf 'HASH test' | "$tool" "${m32[@]}"); expect "last line without newline" 3127628307 "$out"
out=$("$tool" </dev/null); st=$?
expect "empty input" "" "$out"; expect "empty input exit status" 0 "$st"

# Files: one session across several files, '-' is standard input.
printf 'POOL a b c\n' >"$tmp/one"
printf 'LOOKUP x\nVERSION\n' >"$tmp/two"
out=$(printf 'ADD d\nVERSION\n' | "$tool" "${m32[@]}" "$tmp/one" - "$tmp/two"); st=$?
expect "files and -" $'OK\nOK\n2\na\n2' "$out"
expect "files exit status" 0 "$st"

# An unreadable file: a message on stderr, exit 1, the other files are still read.
out=$("$tool" "${m32[@]}" "$tmp/one" "$tmp/missing" "$tmp/two" 2>"$tmp/err"); st=$?
expect "missing file: other files read" $'OK\na\n1' "$out"
expect "missing file exit status" 1 "$st"
expect "missing file message" "chring: $tmp/missing: No such file or directory" "$(cat "$tmp/err")"
out=$("$tool" "$tmp" 2>"$tmp/err"); st=$?
expect "directory exit status" 1 "$st"
expect "directory message" "chring: $tmp: Is a directory" "$(cat "$tmp/err")"

# Lines above the limit (1 MiB, CHRING_CLI_LINE_MAX) answer "ERR line too long" once; the rest
# of that line is skipped; the next line is answered.  A line of exactly the limit is answered.
limit=1048576
python3 - "$tmp" "$limit" <<'PY'
import sys
tmp, limit = sys.argv[1], int(sys.argv[2])
with open(tmp + '/long', 'wb') as f:
    f.write(b'HASH test\n')
    f.write(b'HASH ' + b'x' * (limit - 5) + b'\n')          # exactly the limit: answered
    f.write(b'HASH ' + b'x' * (limit - 4) + b'\n')          # one byte more: ERR
    f.write(b'POOL ' + b'n ' * (3 * limit) + b'\n')         # several reads long: ERR
    f.write(b'HASH test\n')
    f.write(b'LOOKUP ' + b'y' * (2 * limit))                # long and no newline at the end
PY
"$tool" "${m32[@]}" "$tmp/long" >"$tmp/long.out" 2>"$tmp/err"; st=$?
want_hash=$(python3 -B -c "
import sys; sys.path.insert(0, '$here')
import ref_exercise
print(ref_exercise.murmur3_32(b'x' * ($limit - 5)))")
expect "long lines" $'3127628307\n'"$want_hash"$'\nERR line too long\nERR line too long\n3127628307\nERR line too long' "$(cat "$tmp/long.out")"
expect "long lines exit status" 0 "$st"
expect "long lines stderr" "" "$(cat "$tmp/err")"

# At most 1000000 leases are held at once (CHRING_CLI_LEASES_MAX), by ACQUIRE and RETRY together;
# releasing one makes room.
python3 -c "import sys; sys.stdout.write('POOL a b\\n' + 'ACQUIRE k\\n' * 1000001 +
                                         'RETRY 1 a k\\nRELEASE 1000000\\nRETRY 1 a k\\n' +
                                         'ACQUIRE k\\nRELEASE 1000001\\nACQUIRE k\\n' +
                                         'RELEASE 1000000\\n')" \
    >"$tmp/leases"
"$tool" --profile murmur32 --vnodes 16 "$tmp/leases" | tail -n 9 >"$tmp/leases.out"
expect "lease limit" $'b 1000000\nERR too many leases\nERR too many leases\nOK\nb 1000001\n'\
$'ERR too many leases\nOK\nb 1000002\nERR no such lease' "$(cat "$tmp/leases.out")"

# --help fits one screen (at most 24 lines of at most 80 columns); --version.
"$tool" --help >"$tmp/help"; st=$?
expect "--help exit status" 0 "$st"
expect "--help fits 24 lines" 1 "$([ "$(wc -l <"$tmp/help")" -le 24 ] && echo 1)"
expect "--help fits 80 columns" "" "$(awk 'length($0) > 80' "$tmp/help")"
expect "--version" 1 "$("$tool" --version | grep -cE '^chring [0-9]+\.[0-9]+\.[0-9]+$')"

# Bad options: a message on stderr, exit 2, nothing read.
for bad in "--profile nope" "--profile custom" "--profile" "--vnodes 0" "--vnodes -3" \
    "--vnodes 16777217" "--vnodes 12x" "--balance x" "--balance 0" "--balance -1" \
    "--balance nan" "--balance inf" "--frobnicate" "-x"; do
    # shellcheck disable=SC2086 # the option and its value are two words on purpose
    out=$(echo 'HASH test' | "$tool" $bad 2>"$tmp/err"); st=$?
    expect "bad option '$bad' exit status" 2 "$st"
    expect "bad option '$bad' stdout" "" "$out"
    expect "bad option '$bad' message" 1 "$(grep -c '^chring: ' "$tmp/err")"
done
# Valid edge values; ketama and nginx ignore --vnodes and take any whole number
# (docs/design.md §2.1).
for ok in "--profile ketama --vnodes 0" "--vnodes 0 --profile=nginx" "--profile nginx --vnodes 4294967295" \
    "--profile haproxy --vnodes 0" "--profile envoy --vnodes 0"; do
    # shellcheck disable=SC2086
    out=$(echo 'HASH a' | "$tool" $ok 2>&1); st=$?
    expect "option '$ok'" 0 "$st"
done
for bad in "--profile ketama --vnodes 4294967296" "--profile nginx --vnodes +1" "--vnodes ' 5'"; do
    # shellcheck disable=SC2086
    out=$(echo 'HASH a' | eval "\"\$tool\" $bad" 2>/dev/null); st=$?
    expect "option '$bad' exit status" 2 "$st"
done
out=$(printf 'POOL a\nBOUNDED k\n' | "$tool" --profile nginx --vnodes 16777216 --balance 0.5); st=$?
expect "edge option values" $'OK\na' "$out"
expect "edge option values exit status" 0 "$st"

# A failing standard output is an error too.
if [ -w /dev/full ]; then
    echo 'HASH test' | "$tool" >/dev/full 2>"$tmp/err"; st=$?
    expect "/dev/full exit status" 1 "$st"
    expect "/dev/full message" 1 "$(grep -c 'error writing standard output' "$tmp/err")"
fi

# A reader that goes away (N21): status 1 and the message, not a death by SIGPIPE, and not an
# endless input answered into a closed pipe when the parent ignores SIGPIPE.
if command -v timeout >/dev/null; then
    { yes 'HASH test' 2>/dev/null | timeout 20 "$tool" 2>"$tmp/err"; echo $? >"$tmp/st"; } | head -n 1 >/dev/null
    expect "reader gone: exit status" 1 "$(cat "$tmp/st")"
    expect "reader gone: message" 1 "$(grep -c 'error writing standard output' "$tmp/err")"
    (
        trap '' PIPE
        { yes 'HASH test' 2>/dev/null | timeout 20 "$tool" 2>"$tmp/err"; echo $? >"$tmp/st"; } | head -n 1 >/dev/null
    )
    expect "reader gone, SIGPIPE ignored: exit status" 1 "$(cat "$tmp/st")"
fi

echo "$checks checks, $failures failed"
[ "$failures" -eq 0 ]
