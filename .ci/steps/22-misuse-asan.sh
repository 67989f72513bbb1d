#!/usr/bin/env bash
# The misuse guards and the udata rule under AddressSanitizer + UndefinedBehaviorSanitizer (gcc),
# with LeakSanitizer at exit: tests/test_misuse.c (a lease released through another ring or as a
# copy, a put of an unheld snapshot) and tests/test_udata.c (every udata handed back exactly once,
# none from a failed call, with an allocation failure injected at every allocation).  Each suite
# must pass with 0 sanitizer reports: a guard that lets a counter move would show as a use after
# free or a leak here even where the suite's own checks could not see it.  Also tests/test_chunks.c
# (chunks shared between snapshots, freed with the membership chain: docs/design.md §4.2) and
# test_udata again with every ring chunked (CHRING_CHUNK_MIN=1), whose allocation failures then
# fall in the chunked publish too: a chunk freed early or never shows here.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/deps.sh gcc liburcu-dev libck-dev libxxhash-dev libmd-dev zlib1g-dev meson ninja-build \
    pkg-config libcriterion-dev

dir=build-misuse-asan
suites=(misuse udata chunks udata:chunked)
if [ ! -f "$dir/build.ninja" ]; then
    # The library and the unit suites only.  -Db_lundef=false: the shared library keeps its
    # references to the sanitizer runtime, which the test executables link (docs/sanitizers.md;
    # src/meson.build turns UBSan's alignment check off for liburcu's inlined read side).
    CC=gcc meson setup "$dir" --buildtype=debugoptimized -Db_lundef=false \
        -Db_sanitize=address,undefined -Dtests=true -Dbench=false -Dlb=disabled \
        -Dtools=false -Dfuzz=false
fi
targets=()
for s in "${suites[@]}"; do
    targets+=("tests/test_${s%%:*}")
done
nice ninja -C "$dir" -j2 "${targets[@]}"

# Counts sanitizer reports in a log (the patterns of .ci/steps/20-sanitizers.sh).
reports() {
    grep -cE '^(==[0-9]+==ERROR: (Address|Leak)Sanitizer|.*: runtime error: )' "$1" || true
}

failed=0
for entry in "${suites[@]}"; do
    s=${entry%%:*}
    env=()
    if [ "$entry" != "$s" ]; then # SUITE:chunked
        env=(CHRING_CHUNK_MIN=1)
    fi
    log=$(mktemp)
    echo "== test_$s under ASan+UBSan ${env[*]:-}"
    status=0
    # Criterion runs each test in a child process, which inherits these options; a hang is
    # killed and counts as a failure.
    env "${env[@]}" ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0 \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        timeout --kill-after=10 600 nice "$dir/tests/test_$s" --jobs 1 >"$log" 2>&1 || status=$?
    n=$(reports "$log")
    if [ "$status" -eq 0 ] && [ "$n" -eq 0 ] && grep -q 'Failing: 0 | Crashing: 0' "$log"; then
        tail -n 3 "$log"
        echo "== test_$s: OK (exit 0, 0 sanitizer reports)"
    else
        head -n 80 "$log"
        echo "[...]"
        tail -n 15 "$log"
        echo "== test_$s: FAILED (exit $status, $n sanitizer reports)"
        failed=1
    fi
    rm -f "$log"
done

if [ "$failed" -ne 0 ]; then
    echo "22-misuse-asan: FAILED: a suite failed or a sanitizer reported a problem (above)"
    exit 1
fi
echo "22-misuse-asan: passed: test_misuse, test_udata (flat and chunked) and test_chunks under ASan+UBSan+LSan, 0 reports"
