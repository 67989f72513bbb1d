#!/usr/bin/env bash
# Configures (once) and builds chring.
#
#   scripts/build.sh [BUILDDIR [MESON_OPTION...]]
#
# BUILDDIR defaults to "build".  A directory that is not configured yet is set up with
# --buildtype=$BUILDTYPE (default release) and the given options; an already configured one gets
# the given options through `meson configure` (ninja itself reconfigures when a meson.build
# changes).  Builds with ninja, NINJA_JOBS jobs if set.  Run from anywhere.
set -euo pipefail

cd "$(dirname "$0")/.."
builddir="${1:-build}"
[ "$#" -gt 0 ] && shift
buildtype="${BUILDTYPE:-release}"

if [ -f "$builddir/build.ninja" ] && [ -f "$builddir/meson-private/coredata.dat" ]; then
    if [ "$#" -gt 0 ]; then
        meson configure "$builddir" "$@"
    fi
elif [ -f "$builddir/meson-private/coredata.dat" ]; then
    # A setup that stopped half way (a missing dependency, say): configure it again from scratch.
    meson setup --wipe "$builddir" --buildtype="$buildtype" "$@"
else
    meson setup "$builddir" --buildtype="$buildtype" "$@"
fi

jobs=()
if [ -n "${NINJA_JOBS:-}" ]; then
    jobs=(-j "$NINJA_JOBS")
fi
ninja -C "$builddir" "${jobs[@]}"
