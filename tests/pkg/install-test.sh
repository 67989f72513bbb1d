#!/usr/bin/env bash
# Installs the build into a temporary DESTDIR and builds a user program against the installed
# copy with pkg-config, linked to the shared library and (--static) to the static one; runs both.
#
#   install-test.sh BUILD_ROOT SOURCE_DIR CC MESON
#
# Checks: the installed header, libchring.so, libchring.a, chring.pc and chring-static.pc exist;
# the chring tool is installed when the build has one; pkg-config finds chring at the project's
# version; --cflags carry no dependency's flags (ck's -D__x86_64__); one program builds with only
# `pkg-config --cflags --libs chring` and loads the installed libchring.so, another with only
# `pkg-config --cflags --libs [--static] chring-static` and loads no libchring.so; both create a
# ring and look a key up.
set -euo pipefail

build=$1
src=$2
cc=$3
meson=$4

tmp=$(mktemp -d "${TMPDIR:-/tmp}/chring-pkg.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dest="$tmp/dest"

step() { echo "== $*"; }
die() {
    echo "install-test: FAILED: $*" >&2
    exit 1
}

step "meson install --destdir $dest"
"$meson" install -C "$build" --no-rebuild --destdir "$dest" >"$tmp/install.log" 2>&1 ||
    {
        cat "$tmp/install.log"
        die "meson install failed"
    }

pc=$(find "$dest" -name chring.pc -path '*/pkgconfig/*' | head -n1)
[ -n "$pc" ] || die "no chring.pc installed"
header=$(find "$dest" -name chring.h | head -n1)
[ -n "$header" ] || die "no chring.h installed"
so=$(find "$dest" -name 'libchring.so' | head -n1)
[ -n "$so" ] || die "no libchring.so installed"
a=$(find "$dest" -name 'libchring.a' | head -n1)
[ -n "$a" ] || die "no libchring.a installed"
if [ -x "$build/tools/chring" ]; then
    find "$dest" -path '*/bin/chring' -type f | grep -q . || die "the chring tool was built but not installed"
fi
echo "installed: ${pc#$dest} ${header#$dest} ${so#$dest} ${a#$dest}"
echo "--- chring.pc"
cat "$pc"
echo "---"

# The .pc file names the configured prefix; the sysroot maps its -I/-L paths into the DESTDIR.
export PKG_CONFIG_PATH
PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_SYSROOT_DIR="$dest"

version=$(pkg-config --modversion chring) || die "pkg-config does not find chring"
expected=$(sed -n "s/^ *version: '\([^']*\)'.*/\1/p" "$src/meson.build" | head -n1)
[ -z "$expected" ] || [ "$version" = "$expected" ] || die "chring.pc says $version, meson.build $expected"

cflags=$(pkg-config --cflags chring)
libs=$(pkg-config --libs chring)
step "shared: $cc $cflags pkg_user.c $libs"
# shellcheck disable=SC2086 # flags are word lists
"$cc" ${CHRING_USER_CFLAGS:-} -std=c11 -Wall -Wextra -Werror $cflags "$src/tests/pkg/pkg_user.c" -o "$tmp/user-shared" $libs ||
    die "building against the shared library failed"
libdir=$(dirname "$so")
# (ldd's output is kept in a variable: grep -q closing a pipe early would fail it under pipefail.)
loaded=$(LD_LIBRARY_PATH="$libdir" ldd "$tmp/user-shared")
printf '%s\n' "$loaded" | grep libchring || true
case "$loaded" in
*"=> $libdir/libchring.so"*) ;;
*) die "the program does not load the installed libchring.so" ;;
esac
LD_LIBRARY_PATH="$libdir" "$tmp/user-shared" || die "the program linked to the shared library failed"

# No compiler-internal or dependency defines in the flags a user compiles with.
case " $cflags $(pkg-config --cflags chring-static) " in
*" -D"*) die "pkg-config --cflags carries a -D flag: $cflags" ;;
esac

for mode in "" "--static"; do
    static_libs=$(pkg-config $mode --libs chring-static) || die "pkg-config does not find chring-static"
    step "static: $cc $cflags pkg_user.c $static_libs"
    # shellcheck disable=SC2086
    "$cc" ${CHRING_USER_CFLAGS:-} -std=c11 -Wall -Wextra -Werror $cflags "$src/tests/pkg/pkg_user.c" -o "$tmp/user-static" $static_libs ||
        die "building against the static library with pkg-config $mode --libs chring-static failed"
    case "$(ldd "$tmp/user-static")" in
    *libchring*) die "the program linked with pkg-config $mode --libs chring-static loads libchring.so" ;;
    esac
    syms=$(nm "$tmp/user-static")
    grep -q ' T chring_new$' <<<"$syms" || die "chring_new is not linked into the static program"
    "$tmp/user-static" || die "the program linked to the static library failed"
done
echo "install-test: ok"
