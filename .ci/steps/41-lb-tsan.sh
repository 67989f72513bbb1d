#!/usr/bin/env bash
# chring-lb under ThreadSanitizer: the balancer's tests that exercise its threads besides the
# workers (docs/lb.md, "Threads"): the writer thread publishing a change off the main thread, the
# resolver thread, the digest thread, the threads that read a large etcd answer, against a stand-in
# etcd, a real etcd (the fleet), real nginx backends and headless Chromium.  The library is built
# with TSan too and follows docs/sanitizers.md's recipe (clang, no _LGPL_SOURCE, its own
# annotations of liburcu's grace periods); tests/lb/tsan.supp names one liburcu function only.
# A TSan report fails the test that saw it: the balancer's output is checked when the test stops
# it (tests/lb/lbharness.py, which prints the report), and TSan makes it exit 66.  No
# halt_on_error: the balancer goes on, so every report of a test is printed, not a connection
# reset.
#
# Proven able to fail: with a race planted in lb/writer.c (writer_main cleared lb_ring_writing
# with a plain store while the main thread's stats read it atomically), lb-feed-publish and
# lb-reload-publish failed with "sanitizer report from the balancer" and "ThreadSanitizer: data
# race ... in writer_main" (the other access: add_balancer, lb/stats.c); reverted.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/deps.sh clang libclang-rt-14-dev libevent-dev libjansson-dev nginx-light curl python3 \
    chromium etcd-server etcd-client
dir=build-lb-tsan
if [ ! -f "$dir/build.ninja" ]; then
    # clang: gcc 12's TSan runtime fails to restore the stack of liburcu's rcu_barrier in the
    # report it makes of it, so the suppression cannot match (docs/sanitizers.md).
    CC=clang meson setup "$dir" --buildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false \
        -Durcu_lgpl=false -Dtests=false -Dbench=false -Dtools=false -Dfuzz=false \
        -Dnginx_module=disabled -Dvarnish_vmod=disabled
fi
nice ninja -C "$dir" -j2
# history_size=7: more of each thread's past kept, so both stacks of a report are restored.
export TSAN_OPTIONS="history_size=7 second_deadlock_stack=1 suppressions=$PWD/tests/lb/tsan.supp"
tests=(
    lb-feed-apply lb-feed-big-batch lb-feed-resolve lb-feed-bounds lb-feed-cancel lb-feed-drip
    lb-feed-quote lb-feed-publish
    lb-reload-big lb-reload-duplicates lb-reload-resolve lb-reload-publish
    lb-fleet-agree lb-fleet-restart
    lb-status-big lb-status-page lb-status-fragment
    lb-health-digest lb-health-drain
)
# One test at a time (each starts a balancer and its backends, on 2 cores); TSan makes the
# balancer 5 to 20 times slower, hence the multiplier.
timeout 900 nice meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 1 \
    --timeout-multiplier 3 "${tests[@]}"
