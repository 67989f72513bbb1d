#!/usr/bin/env bash
# The ThreadSanitizer recipe of docs/install.md, as a user follows it: a TSan build of the library
# (clang, -Db_sanitize=thread) installed in its own libdir beside the ordinary one, a threaded
# user program built with -fsanitize=thread against it through pkg-config, run with the installed
# share/chring/tsan.supp (one liburcu function, no library-wide pattern).  Passes when that run
# gives 0 reports, the same program with a planted race of its own is reported, and so is a race
# planted in its config.retire callback, which liburcu's call_rcu thread runs (a suppression such
# as race:liburcu-bp.so would hide that one).
#
#   tsan-user.sh [SOURCE_ROOT]
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chring-tsan-user.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
die() {
    echo "tsan-user: FAILED: $*" >&2
    exit 1
}
prefix="$tmp/prefix"
echo "== TSan build of the library, installed into $prefix/lib/chring-tsan"
CC=clang meson setup "$tmp/build" "$src" --buildtype=debugoptimized -Db_sanitize=thread \
    -Db_lundef=false -Dlibrary=shared -Dlibrary_only=true -Dinstall=true --prefix="$prefix" \
    --libdir=lib/chring-tsan >"$tmp/setup.log" 2>&1 || { cat "$tmp/setup.log"; die "setup"; }
nice ninja -C "$tmp/build" -j2 >"$tmp/build.log" 2>&1 || { tail -30 "$tmp/build.log"; die "build"; }
meson install -C "$tmp/build" --no-rebuild >/dev/null
lib="$prefix/lib/chring-tsan"
supp="$prefix/share/chring/tsan.supp"
[ -f "$supp" ] || die "share/chring/tsan.supp is not installed"
grep -v '^#' "$supp" | grep -q chring && die "the suppressions name chring itself"
grep -v '^#' "$supp" | grep -q '\.so' && die "the suppressions name a whole library"
flags=$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs chring)
run() { # NAME EXTRA_CFLAGS -> prints the number of reports
    clang -fsanitize=thread -g -O1 $2 "$src/tests/consumers/tsan_user.c" $flags -Wl,-rpath,"$lib" -o "$tmp/$1"
    TSAN_OPTIONS="suppressions=$supp" timeout 300 "$tmp/$1" >"$tmp/$1.log" 2>&1 || true
    grep -c 'WARNING: ThreadSanitizer' "$tmp/$1.log" || true
}
n=$(run clean "")
echo "user program: $n reports"
[ "$n" -eq 0 ] || { head -60 "$tmp/clean.log"; die "$n ThreadSanitizer reports for a correct user program"; }
grep -q '^done$' "$tmp/clean.log" || die "the user program did not finish"
# The control may meet TSan's own start-up failures on this kernel ("unexpected memory mapping"
# with high ASLR entropy, clang 14): up to three runs, each shown when it reports nothing.
for attempt in 1 2 3; do
    n=$(run planted -DPLANT_RACE)
    echo "user program with a planted race (run $attempt): $n reports"
    [ "$n" -gt 0 ] && break
    head -20 "$tmp/planted.log"
done
[ "$n" -gt 0 ] || die "TSan did not report the planted race: the run cannot fail"
for attempt in 1 2 3; do
    n=$(run retire -DPLANT_RETIRE_RACE)
    echo "user program with a race in its retire callback (run $attempt): $n reports"
    [ "$n" -gt 0 ] && grep -q count_retired "$tmp/retire.log" && break
    head -20 "$tmp/retire.log"
done
[ "$n" -gt 0 ] && grep -q count_retired "$tmp/retire.log" ||
    die "TSan did not report the race in the retire callback (call_rcu thread): the suppressions hide it"
echo "tsan-user: ok"
