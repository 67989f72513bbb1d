#!/usr/bin/env bash
# vmod_chring under AddressSanitizer + UBSan inside the stock varnishd: the VMOD and its copy of
# the library built with the sanitizers, their runtime preloaded into varnishd (which is not),
# and the tests/varnish cases run against it (placement, digest, parity, hot key across threads,
# a sick backend, retries, fetch errors and aborted requests, a reload under traffic with the old
# VCL discarded, back-to-back requests, every method called in vcl_fini of discarded VCLs, bad
# arguments refused at vcl.load, labels and a rollback, the operator's view, stalled deliveries
# of a cached object, pipes).  Any sanitizer report from varnishd fails the case that saw it
# (tests/varnish/varnish_test.py, CHRING_VARNISH_PRELOAD).
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/deps.sh varnish libvarnishapi-dev python3
dir=build-varnish-asan
if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false \
        -Durcu_lgpl=false -Dtests=true -Dbench=false -Dlb=disabled -Dfuzz=false \
        -Dnginx_module=disabled -Dvarnish_vmod=enabled
fi
# Only what the cases use: the VMOD and the chring tool they compare with.
nice ninja -C "$dir" -j2 vmod/libvmod_chring.so tools/chring
export CHRING_VARNISH_PRELOAD="$(gcc -print-file-name=libasan.so)"
export CHRING_VMOD="$PWD/$dir/vmod/libvmod_chring.so" CHRING_TOOL="$PWD/$dir/tools/chring"
export COMPAT_DATA="$PWD/tests/compat/data" PYTHONDONTWRITEBYTECODE=1
for case in placement digest parity hotkey sick retry errors reload sequential fini badargs \
        labels rollback observe delivery pipe; do
    echo "== varnish $case (ASan + UBSan VMOD)"
    timeout 600 python3 tests/varnish/varnish_test.py "$case"
done
