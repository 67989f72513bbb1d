#!/usr/bin/env bash
# The torture test (tests/stress/chring-torture: readers on every core against a writer churning
# the membership) under AddressSanitizer + UndefinedBehaviorSanitizer (gcc) and under
# ThreadSanitizer (clang): each run must exit 0 with no sanitizer report.  This is where a race,
# a use after free or a lost retire in the library's RCU/lease lifetime code shows up.
#
# Environment: CHRING_SAN_SECONDS (torture run time per sanitizer, default 10; the torture test is
# time-bounded, so a slow sanitizer does fewer iterations rather than run longer),
# CHRING_TSAN_CC (compiler of the TSan build, default clang; gcc works too).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
scripts/deps.sh gcc clang libclang-rt-14-dev liburcu-dev libck-dev libxxhash-dev libmd-dev \
    zlib1g-dev meson ninja-build pkg-config libcriterion-dev

seconds=${CHRING_SAN_SECONDS:-10}
tsan_cc=${CHRING_TSAN_CC:-clang}
# The library and the test areas, of which only the torture test is built (setup below): the
# other areas are checked elsewhere.
areas=(-Dtests=true -Dbench=false -Dlb=disabled -Dtools=false -Dfuzz=false)

setup() { # DIR CC MESON_OPTION...
    local dir=$1 cc=$2
    shift 2
    if [ ! -f "$dir/build.ninja" ]; then
        CC=$cc meson setup "$dir" --buildtype=debugoptimized -Db_lundef=false "${areas[@]}" "$@"
    fi
    nice ninja -C "$dir" -j2 tests/stress/chring-torture
}

# Counts sanitizer reports in a log.
reports() {
    grep -cE '^(==[0-9]+==ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer:|.*: runtime error: )' "$1" || true
}

failed=0
run() { # NAME DIR ENV...
    local name=$1 dir=$2 log status n
    shift 2
    log=$(mktemp)
    echo "== $name: $dir/tests/stress/chring-torture $seconds"
    status=0
    # A stuck run (a deadlock) is a failure too: cap it well above its own time bound.
    env "$@" timeout --kill-after=10 $((seconds * 4 + 120)) \
        nice "$dir/tests/stress/chring-torture" "$seconds" >"$log" 2>&1 || status=$?
    n=$(reports "$log")
    if [ "$status" -eq 0 ] && [ "$n" -eq 0 ]; then
        cat "$log"
        echo "== $name: OK (exit 0, 0 sanitizer reports)"
    else
        # The first report (or failure message) and the end of the run explain the failure.
        head -n 80 "$log"
        echo "[...]"
        tail -n 15 "$log"
        echo "== $name: FAILED (exit $status, $n sanitizer reports)"
        failed=1
    fi
    rm -f "$log"
}

echo "-- building the ASan+UBSan configuration (gcc)"
setup build-asan gcc -Db_sanitize=address,undefined
echo "-- building the TSan configuration ($tsan_cc)"
setup build-tsan "$tsan_cc" -Db_sanitize=thread

run "ASan+UBSan" build-asan \
    ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
run "TSan" build-tsan \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tests/stress/tsan.supp"

# Again on rings of 65,536 points and more (4000 points per unit of weight), which take the line
# index (docs/design.md §2) and go back to the bucket index when the writer shrinks them.
run "ASan+UBSan, line index" build-asan CHRING_TORTURE_VNODES=4000 \
    ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
run "TSan, line index" build-tsan CHRING_TORTURE_VNODES=4000 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tests/stress/tsan.supp"

# Again with every ring chunked (CHRING_CHUNK_MIN=1, docs/design.md §4.2): chunks shared between
# snapshots and freed with the membership chain, so a chunk freed while a reader or a held
# snapshot can still reach it is a use after free here.
run "ASan+UBSan, chunked" build-asan CHRING_CHUNK_MIN=1 \
    ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
run "TSan, chunked" build-tsan CHRING_CHUNK_MIN=1 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tests/stress/tsan.supp"

if [ "$failed" -ne 0 ]; then
    echo "20-sanitizers: FAILED: a sanitizer reported a problem or the torture test failed (above)"
    exit 1
fi
echo "20-sanitizers: passed: ASan+UBSan and TSan torture runs of ${seconds}s each (160 and 4000 points a weight, and chunked), 0 reports"
