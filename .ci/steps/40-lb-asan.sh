#!/usr/bin/env bash
# chring-lb under AddressSanitizer + UBSan (with LeakSanitizer at exit): the balancer's whole
# test suite ('lb': routing, nginx compatibility, hot key, SIGHUP, backend down, malformed input,
# smuggling and crafted answers, the limits under pressure, the status page in headless Chromium)
# against real nginx and raw backends.  A sanitizer report or an unclean exit fails the test that
# saw it.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/deps.sh libevent-dev libjansson-dev nginx-light curl python3 chromium
dir=build-lb-asan
if [ ! -f "$dir/build.ninja" ]; then
    # The library and lb only: tests/lb/meson.build registers the balancer's tests
    # (suite lb) whenever chring-lb is built, also with -Dtests=false.
    meson setup "$dir" --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false \
        -Durcu_lgpl=false -Dtests=false -Dbench=false -Dtools=false -Dfuzz=false
fi
nice ninja -C "$dir" -j2
# One test at a time: each starts several nginx processes and a balancer, on 2 cores.
timeout 900 meson test -C "$dir" --suite lb --print-errorlogs --num-processes 1 \
    --timeout-multiplier 3
