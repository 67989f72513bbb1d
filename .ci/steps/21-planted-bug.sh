#!/usr/bin/env bash
# Proves the torture test can fail: the library built with -Dplanted_bug=reclaim_no_grace (the
# reclaimer thread, src/reclaim.c, skips its synchronize_rcu) or -Dplanted_bug=no_grace (the
# writer drops the replaced snapshot at once) frees replaced snapshots without waiting for an RCU
# grace period, and the torture test, run again and again
# (up to a time cap per sanitizer), must make AddressSanitizer report a use after free and
# ThreadSanitizer report a race with the freeing (or reuse) of the snapshot.  The step PASSES only
# if both sanitizers catch the planted bug; a clean result here would mean the torture test cannot
# see a missing grace period, so step 20's clean runs would prove nothing.
#
# Environment: CHRING_PLANTED_CAP (seconds of torture runs per sanitizer before giving up,
# default 60), CHRING_PLANTED_RUN (seconds per torture run, default 4), CHRING_TSAN_CC (default
# clang), CHRING_PLANTED_BUG (reclaim_no_grace, the default, or no_grace).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
scripts/deps.sh gcc clang libclang-rt-14-dev liburcu-dev libck-dev libxxhash-dev libmd-dev \
    zlib1g-dev meson ninja-build pkg-config libcriterion-dev

cap=${CHRING_PLANTED_CAP:-60}
per_run=${CHRING_PLANTED_RUN:-4}
tsan_cc=${CHRING_TSAN_CC:-clang}
planted=${CHRING_PLANTED_BUG:-reclaim_no_grace}
# As in step 20: the test areas are configured, only the torture test is built.
areas=(-Dtests=true -Dbench=false -Dlb=disabled -Dtools=false -Dfuzz=false)

setup() { # DIR CC MESON_OPTION...
    local dir=$1 cc=$2
    shift 2
    if [ ! -f "$dir/build.ninja" ]; then
        CC=$cc meson setup "$dir" --buildtype=debugoptimized -Db_lundef=false \
            -Dplanted_bug="$planted" "${areas[@]}" "$@"
    fi
    nice ninja -C "$dir" -j2 tests/stress/chring-torture
}

# The torture test's own bound checks on m are step 20's business: here they must not end a run
# before the sanitizer sees the freed snapshot, so they get a huge slack.
export CHRING_TORTURE_M_SLACK=1000000000

# Does the log hold a sanitizer report of the planted bug?  Prints the first one.
#  - ASan: a heap-use-after-free (a freed snapshot read), or a use-after-poison (the library keeps
#    the last destroyed snapshot's block for reuse, poisoned, so a read of it lands there).
#  - TSan: a data race or heap-use-after-free report.  Step 20 runs this very configuration
#    without the planted bug and requires 0 reports, so a report here is the planted bug's (the
#    reclamation's free() or the reuse of the block racing with a reader still in it).
caught() { # SANITIZER LOG
    if [ "$1" = asan ]; then
        grep -m1 -A 24 -E '^==[0-9]+==ERROR: AddressSanitizer: (heap-use-after-free|use-after-poison)' "$2"
    else
        awk '/^==================$/ { if (found) exit; inblock = 1; block = ""; next }
             inblock { block = block $0 "\n" }
             /WARNING: ThreadSanitizer: (data race|heap-use-after-free)/ { found = 1 }
             END { if (found) { printf "%s", block; exit 0 } exit 1 }' "$2" | head -n 40
        return "${PIPESTATUS[0]}"
    fi
}

result=0
hunt() { # NAME SANITIZER DIR ENV...
    local name=$1 san=$2 dir=$3 log start runs status pid
    shift 3
    log=$(mktemp)
    start=$SECONDS
    runs=0
    echo "== $name: running $dir/tests/stress/chring-torture $per_run until the first report (cap ${cap}s)"
    while [ $((SECONDS - start)) -lt "$cap" ]; do
        runs=$((runs + 1))
        status=0
        # Freed memory can send a reader into a long walk over garbage, so the run is watched
        # and ended (by its pid) as soon as the planted bug's report is in the log.
        env "$@" timeout --kill-after=5 $((per_run * 3 + 20)) \
            nice "$dir/tests/stress/chring-torture" "$per_run" >"$log" 2>&1 &
        pid=$!
        while kill -0 "$pid" 2>/dev/null; do
            if caught "$san" "$log" >/dev/null; then
                sleep 1 # let the sanitizer finish writing the report
                kill "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.5
        done
        wait "$pid" || status=$?
        if caught "$san" "$log"; then
            echo "== $name: CAUGHT the planted bug in run $runs after $((SECONDS - start))s (exit $status)"
            rm -f "$log"
            return 0
        fi
        # Not (yet) the report looked for: say what the run ended with (a SEGV on a garbage
        # pointer read from freed memory, the torture test's own FAIL line, ...).
        echo "   run $runs: exit $status, no report of the planted bug; it ended with: $(grep -m1 -E 'ERROR: (Address|Thread)Sanitizer|torture: FAIL' "$log" || tail -n1 "$log")"
    done
    echo "== $name: NOT caught in $runs runs (${cap}s): the torture test cannot see a missing grace period"
    tail -n 20 "$log"
    rm -f "$log"
    result=1
}

echo "-- building the planted-bug ASan configuration (gcc, -Dplanted_bug=$planted)"
setup "build-planted-$planted-asan" gcc -Db_sanitize=address,undefined
echo "-- building the planted-bug TSan configuration ($tsan_cc, -Dplanted_bug=$planted)"
setup "build-planted-$planted-tsan" "$tsan_cc" -Db_sanitize=thread

hunt "ASan" asan "build-planted-$planted-asan" \
    ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=0
# halt_on_error=0: keep running past unrelated reports until the planted one shows.
hunt "TSan" tsan "build-planted-$planted-tsan" \
    TSAN_OPTIONS="halt_on_error=0 suppressions=$root/tests/stress/tsan.supp"

if [ "$result" -ne 0 ]; then
    echo "21-planted-bug: FAILED: a sanitizer did not catch the planted missing grace period"
    exit 1
fi
echo "21-planted-bug: passed: ASan and TSan both caught the planted missing grace period"
