#!/usr/bin/env bash
# Chunked snapshots (docs/design.md §4.2, src/chunk.c): with CHRING_CHUNK_MIN=1 every ring of the
# default profile with the bucket index is chunked, however small, so the unit, stress (torture,
# health flips) and cli suites run their rings chunked.  By default only rings of 2^22 points and
# more are, which no other test builds at scale.  Uses make test's build (read-only).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${BUILD:-build}
[ -f "$dir/build.ninja" ] || { echo "FAIL: $dir is not built (make test builds it)"; exit 1; }
# The docs suite reads the sources, not this build, and makes no ring.  A test that asserts a
# flat ring's own layout (its block, its packed index) skips itself when CHRING_CHUNK_MIN is set.
CHRING_CHUNK_MIN=1 timeout 1200 meson test -C "$dir" --no-rebuild --suite unit --suite stress \
    --suite cli --no-suite docs --print-errorlogs --num-processes 2
