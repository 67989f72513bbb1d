#!/usr/bin/env bash
# The scalar line search: the library built with CHRING_NO_SIMD (src/index.h, chring__line_below
# without SSE2) passes the unit suites.  No other build compiles that path, and the line index
# answers every lookup of a ring of 65,536 points and more (docs/design.md §4.1, "The line index").
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/deps.sh --group build
scripts/deps.sh libcriterion-dev
dir=build-nosimd
[ -f "$dir/build.ninja" ] || meson setup "$dir" --buildtype=release -Dc_args=-DCHRING_NO_SIMD \
    -Dtests=true -Dbench=false -Dlb=disabled -Dtools=false -Dfuzz=false \
    -Dnginx_module=disabled -Dvarnish_vmod=disabled
nice ninja -C "$dir" -j2
# The scalar scan is what the library holds: no SSE2 compare in its line search.
if objdump -d --no-show-raw-insn "$dir/src/libchring.so" | grep -q pcmpeqw; then
    echo "FAIL: the library built with CHRING_NO_SIMD still has SSE2 word compares (pcmpeqw)"
    exit 1
fi
# The citation check (suite docs) reads the sources, not this build: make test runs it.
timeout 900 meson test -C "$dir" --suite unit --no-suite docs --print-errorlogs --num-processes 2
