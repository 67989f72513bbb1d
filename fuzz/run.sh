#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each of them for a while; exits non-zero on any finding.
#
#   fuzz/run.sh [SECONDS]        SECONDS per target, default 60
#
# Environment:
#   FUZZ_BUILD=dir      build directory (default build-fuzz), configured here with clang, ASan and
#                       UBSan if it is not configured yet
#   FUZZ_TARGETS="api cli h1 chunked etcd prompt"   which targets to run (default: fuzz_api, fuzz_cli,
#                       fuzz_prom, fuzz_h1, fuzz_chunked, and fuzz_etcd and fuzz_prompt when
#                       libjansson is installed)
#   FUZZ_JOBS=n         parallel fuzzing processes per target (libFuzzer -jobs/-workers), default 1.
#                       The targets spend most of their time waiting for RCU grace periods in
#                       chring_free, so n above the number of cores still helps.
#   FUZZ_KEEP=dir       keep each target's grown corpus in dir/<target> (to merge into the seed
#                       corpus with -merge=1 later); by default the grown corpus is thrown away
#   FUZZ_ARGS="..."     extra libFuzzer flags
#
# The seed corpus (fuzz/corpus/<target>) and the inputs of past findings (fuzz/regress/<target>)
# are copied to a temporary directory first, so runs never
# grow the repository.  Findings (crash-*, leak-*, timeout-*, oom-* inputs) are copied to
# $FUZZ_BUILD/findings/<target>/ and listed; replay one with `$FUZZ_BUILD/fuzz/fuzz_api FILE`
# (FUZZ_API_TRACE=1 prints each operation).
set -euo pipefail

cd "$(dirname "$0")/.."
top=$(pwd)
seconds="${1:-60}"
build="${FUZZ_BUILD:-build-fuzz}"
targets="${FUZZ_TARGETS:-}"
jobs="${FUZZ_JOBS:-1}"
case "$seconds" in '' | *[!0-9]*) echo "fuzz/run.sh: SECONDS must be a number" >&2; exit 2 ;; esac

if ! command -v clang >/dev/null 2>&1; then
    echo "fuzz/run.sh: clang is needed (scripts/deps.sh installs it with libclang-rt-14-dev)" >&2
    exit 1
fi

if [ ! -f "$build/build.ninja" ]; then
    rm -rf "$build"
    # _LGPL_SOURCE is left out: liburcu 0.13's bp flavour with it makes UBSan report a misaligned
    # reader struct (docs/sanitizers.md).  The tests are on for the regression suite below.
    CC=clang meson setup "$build" --buildtype=debugoptimized -Dfuzz=true -Dtests=true \
        -Dbench=false -Dlb=disabled -Dtools=false \
        -Db_sanitize=address,undefined -Db_lundef=false -Durcu_lgpl=false
fi
nice ninja -C "$build" -j "${NINJA_JOBS:-2}"
if [ -z "$targets" ]; then
    # h1 and chunked are always built; etcd and prompt when libjansson is installed
    # (fuzz/meson.build)
    targets="api cli prom"
    for t in h1 chunked etcd prompt; do
        if [ -x "$build/fuzz/fuzz_$t" ]; then targets="$targets $t"; fi
    done
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

# First the replays: every seed and every past finding's input once through each target
# (meson suite "fuzz"), and the regression tests of the findings under clang's ASan + UBSan
# (suite "regress").
status=0
summary=""
work=""
# An interrupted run leaves no temporary corpus behind.
trap '[ -n "$work" ] && rm -rf "$work"' EXIT
if meson test -C "$build" --suite fuzz --suite regress --print-errorlogs --num-processes 2; then
    summary="replays and regression tests: passed"$'\n'
else
    status=1
    summary="replays and regression tests: FAILED (see above)"$'\n'
fi

for t in $targets; do
    exe="$top/$build/fuzz/fuzz_$t"
    if [ ! -x "$exe" ]; then
        echo "fuzz/run.sh: $exe was not built" >&2
        status=1
        continue
    fi
    work=$(mktemp -d "${TMPDIR:-/tmp}/chring-fuzz-$t.XXXXXX")
    mkdir -p "$work/corpus"
    cp -r "fuzz/corpus/$t/." "$work/corpus/"
    # Inputs of past findings start every run too (fuzz/regress/<target>/).
    [ -d "fuzz/regress/$t" ] && cp -r "fuzz/regress/$t/." "$work/corpus/"
    args=(-max_total_time="$seconds" -dict="$top/fuzz/$t.dict" -max_len=4096 -timeout=30
          -print_final_stats=1 -artifact_prefix="$work/")
    if [ "$jobs" -gt 1 ]; then
        args+=(-jobs="$jobs" -workers="$jobs")
    fi
    echo "== fuzz_$t: ${seconds}s, $jobs process(es), seeds: $(ls "$work/corpus" | wc -l) files"
    rc=0
    (cd "$work" && nice "$exe" "${args[@]}" ${FUZZ_ARGS:-} corpus >"$work/fuzz.log" 2>&1) || rc=$?
    logs=("$work/fuzz.log")
    stats=("$work/fuzz.log")
    if [ "$jobs" -gt 1 ]; then
        # With -jobs each worker logs to fuzz-N.log (the parent's log repeats them at the end).
        logs+=("$work"/fuzz-*.log)
        stats=("$work"/fuzz-*.log)
    fi
    found=$(ls "$work" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' || true)
    execs=$(cat "${stats[@]}" 2>/dev/null | sed -n 's/^stat::number_of_executed_units: *//p' |
        awk '{s += $1} END {print s + 0}')
    cov=$(cat "${stats[@]}" 2>/dev/null | grep -Eo 'cov: [0-9]+ ft: [0-9]+' | tail -n 1 || true)
    corpus=$(ls "$work/corpus" | wc -l)
    line="fuzz_$t: ${seconds}s x $jobs, $execs executions, ${cov:-cov: ?}, corpus $corpus files"
    if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
        status=1
        mkdir -p "$build/findings/$t"
        for f in $found; do cp "$work/$f" "$build/findings/$t/"; done
        echo "!! fuzz_$t found something (exit $rc). Last lines of the log:"
        for l in "${logs[@]}"; do
            [ -f "$l" ] && grep -E -B2 -A25 'disagree|wrong answer|ERROR|runtime error' "$l" | head -n 60
        done
        line="$line; FINDINGS: ${found:-(exit $rc)} -> $build/findings/$t/"
    fi
    summary="$summary$line"$'\n'
    if [ -n "${FUZZ_KEEP:-}" ]; then
        mkdir -p "$FUZZ_KEEP/$t"
        cp -r "$work/corpus/." "$FUZZ_KEEP/$t/"
    fi
    rm -rf "$work"
    work=""
done

echo "== summary"
printf '%s' "$summary"
if [ "$status" -ne 0 ]; then
    echo "fuzz/run.sh: findings (see above); replay with $build/fuzz/fuzz_<target> FILE"
fi
exit "$status"
