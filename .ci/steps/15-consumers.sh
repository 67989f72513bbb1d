#!/usr/bin/env bash
# chring as its users consume it (tests/consumers/consumers.sh): a meson parent project with
# chring as a subproject (static and shared), `make install` with PREFIX and absolute/relative
# DESTDIR needing only the build packages, a CMake find_package consumer, `man`.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/deps.sh --group build
scripts/deps.sh cmake man-db
timeout 900 bash tests/consumers/consumers.sh
