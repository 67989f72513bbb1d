#!/usr/bin/env bash
# The batch lookups' prefetches survive clang's release build too (make test checks gcc's build
# with the same script, suite unit): tests/objcode/check_prefetch.sh on the library built by
# clang at -O3 (docs/design.md §4, "Batches").
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/deps.sh --group build
scripts/deps.sh clang
dir=build-clang
[ -f "$dir/build.ninja" ] || CC=clang meson setup "$dir" --buildtype=release -Dtests=false \
    -Dbench=false -Dlb=disabled -Dtools=false -Dfuzz=false -Dnginx_module=disabled \
    -Dvarnish_vmod=disabled
nice ninja -C "$dir" -j2
tests/objcode/check_prefetch.sh "$dir/src/libchring.so" 3
