#!/usr/bin/env bash
# chring consumed as C projects consume libraries (docs/install.md), each the way a user would:
#   1. a meson parent project (tests/consumers/subproject/) with chring as a real subproject,
#      default_library=static and =shared: only the library is configured (no chring tests, no
#      tools), the static parent loads no libchring.so, the shared one does, and `meson install`
#      of the parent installs the parent's program only;
#   2. `make install` into PREFIX under an absolute and a relative DESTDIR, needing only the
#      build group of scripts/deps.sh (the test packages are made to look missing);
#   3. a CMake project (tests/consumers/cmake/) against that installed tree: find_package(chring
#      CONFIG), chring::chring_shared, chring::chring_static and chring::chring;
#   4. `man` renders the installed chring(1) and chring(3).
#
#   consumers.sh [SOURCE_ROOT]
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chring-consumers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
die() {
    echo "consumers: FAILED: $*" >&2
    exit 1
}
step() { echo "== $*"; }

# ---- 1. meson subproject
parent="$tmp/parent"
mkdir -p "$parent/subprojects"
cp "$src/tests/consumers/subproject/meson.build" "$src/tests/pkg/pkg_user.c" "$parent/"
ln -s "$src" "$parent/subprojects/chring"
for kind in static shared; do
    b="$tmp/parent-$kind"
    step "meson subproject, default_library=$kind"
    meson setup "$b" "$parent" --buildtype=debug -Ddefault_library=$kind >"$tmp/setup.log" 2>&1 ||
        { cat "$tmp/setup.log"; die "the parent project does not configure"; }
    grep -q 'chring| Message\|chring| Project name: chring' "$tmp/setup.log" || die "chring was not configured as a subproject"
    nice ninja -C "$b" -j2 >"$tmp/build.log" 2>&1 || { tail -30 "$tmp/build.log"; die "the parent does not build"; }
    targets=$(meson introspect --targets "$b" | python3 -c 'import json,sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
    echo "targets: $targets"
    case "$kind" in
    static) [ "$targets" = "chring parent" ] || die "targets other than the library and the parent: $targets" ;;
    shared) [ "$targets" = "chring parent" ] || die "targets other than the library and the parent: $targets" ;;
    esac
    tests=$(meson introspect --tests "$b")
    [ "$tests" = "[]" ] || die "the subproject registers tests in the parent: $tests"
    loaded=$(ldd "$b/parent")
    case "$kind:$loaded" in
    static:*libchring*) die "default_library=static, yet the parent loads libchring.so" ;;
    shared:*libchring.so.*) ;;
    shared:*) die "default_library=shared, yet the parent does not load libchring.so" ;;
    esac
    "$b/parent" || die "the parent program failed"
    meson install -C "$b" --no-rebuild --destdir "$tmp/pdest-$kind" >/dev/null
    installed=$(cd "$tmp/pdest-$kind" && find . -type f -o -type l | sort)
    echo "installed: $installed"
    [ "$installed" = "./usr/local/bin/parent" ] || die "installing the parent installed more than its program"
done

# ---- 2. make install, PREFIX and DESTDIR
fake="$tmp/fakebin"
mkdir -p "$fake"
# The test group's packages look missing, and the user is not root: deps.sh fails if asked
# for any of them, so `make install` passes only if it asks for the build group alone.
test_pkgs=" $(bash "$src/scripts/deps.sh" --list test bench examples | tr '\n' ' ') "
build_pkgs=" $(bash "$src/scripts/deps.sh" --list build | tr '\n' ' ') "
cat >"$fake/dpkg-query" <<EOS
#!/usr/bin/env bash
pkg=\${@: -1}
case "$build_pkgs" in *" \$pkg "*) printf 'install ok installed'; exit 0 ;; esac
case "$test_pkgs" in *" \$pkg "*) exit 1 ;; esac
exec /usr/bin/dpkg-query "\$@"
EOS
printf '#!/bin/sh\n[ "$1" = -u ] && { echo 1000; exit 0; }\nexec /usr/bin/id "$@"\n' >"$fake/id"
chmod +x "$fake/dpkg-query" "$fake/id"
mbuild="$tmp/make-build"
step "make install PREFIX=/opt/chring DESTDIR=$tmp/abs (absolute)"
PATH="$fake:$PATH" make -C "$src" install BUILD="$mbuild" PREFIX=/opt/chring DESTDIR="$tmp/abs" \
    MESON_ARGS="-Dbench=false -Dlb=disabled" BUILDTYPE=debug NINJA_JOBS=2 >"$tmp/make.log" 2>&1 ||
    { tail -30 "$tmp/make.log"; die "make install failed (did it ask for a test package?)"; }
[ -f "$tmp/abs/opt/chring/include/chring.h" ] || die "no chring.h under DESTDIR/PREFIX"
step "make install (default PREFIX) DESTDIR=rel-dest (relative to the directory make runs in)"
rm -rf "$src/.consumers-rel-dest"
(cd "$tmp" && PATH="$fake:$PATH" make -f "$src/Makefile" -C "$src" install BUILD="$mbuild" DESTDIR=.consumers-rel-dest >"$tmp/make2.log" 2>&1) ||
    { tail -30 "$tmp/make2.log"; die "make install with a relative DESTDIR failed"; }
ok=0
[ -f "$src/.consumers-rel-dest/usr/local/include/chring.h" ] && ok=1
find "$mbuild" -path '*consumers-rel-dest*' | grep -q . && ok=0
rm -rf "$src/.consumers-rel-dest"
[ "$ok" = 1 ] || die "a relative DESTDIR did not land at <make's directory>/DESTDIR/usr/local (the default prefix)"
dest="$tmp/abs"
prefix="$dest/opt/chring"

# ---- 3. CMake
if command -v cmake >/dev/null; then
    step "cmake find_package(chring CONFIG) against $prefix"
    cp -r "$src/tests/consumers/cmake" "$tmp/cmake-src"
    cp "$src/tests/pkg/pkg_user.c" "$tmp/cmake-src/"
    want=$(sed -nE "s/^  version: '([0-9]+\.[0-9]+)\.[0-9]+',$/\1/p" "$src/meson.build")
    [ -n "$want" ] || die "no version in meson.build"
    cmake -S "$tmp/cmake-src" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCHRING_WANT="$want" >"$tmp/cmake.log" 2>&1 ||
        { cat "$tmp/cmake.log"; die "cmake does not find chring"; }
    # While the version is 0.x every minor release has its own ABI (docs/abi.md): asking for the
    # previous minor must fail.
    minor=${want#*.}
    if [ "${want%%.*}" = 0 ] && [ "$minor" -gt 0 ]; then
        if cmake -S "$tmp/cmake-src" -B "$tmp/cmake-old" -DCMAKE_PREFIX_PATH="$prefix" \
            -DCHRING_WANT="0.$((minor - 1))" >"$tmp/cmake-old.log" 2>&1; then
            die "find_package(chring 0.$((minor - 1))) accepted chring $want"
        fi
    fi
    cmake --build "$tmp/cmake-build" -j2 >"$tmp/cmake-build.log" 2>&1 || { tail -30 "$tmp/cmake-build.log"; die "the CMake consumer does not build"; }
    libdir=$(dirname "$(find "$prefix" -name libchring.so | head -n1)")
    for exe in user_shared user_default; do
        out=$(ldd "$tmp/cmake-build/$exe")
        case "$out" in *"$libdir/libchring.so"*) ;; *) die "$exe does not load the installed libchring.so" ;; esac
        "$tmp/cmake-build/$exe" || die "$exe failed"
    done
    case "$(ldd "$tmp/cmake-build/user_static")" in *libchring*) die "user_static loads libchring.so" ;; esac
    "$tmp/cmake-build/user_static" || die "user_static failed"
else
    die "cmake is missing (scripts/deps.sh --group test installs it)"
fi

# ---- 4. man
step "man renders the installed pages"
for page in "1 chring" "3 chring"; do
    read -r sec name <<<"$page"
    out=$(MANWIDTH=100 man -M "$prefix/share/man" "$sec" "$name" 2>&1) || die "man $sec $name: $out"
    grep -q 'NAME' <<<"$out" || die "man $sec $name rendered no NAME section"
done
# The pages cannot drift from their sources: every CHRING_API function of the header is in
# chring(3), every command and option of `chring --help` in chring(1).
page3=$(MANWIDTH=200 man -M "$prefix/share/man" 3 chring 2>/dev/null)
for fn in $(grep '^CHRING_API' "$src/include/chring.h" | grep -o 'chring_[a-z0-9_]*(' | tr -d '('); do
    grep -q "$fn(" <<<"$page3" || die "chring(3) does not document $fn"
done
page1=$(MANWIDTH=200 man -M "$prefix/share/man" 1 chring 2>/dev/null)
# The installed tool has no RUNPATH (docs/install.md): it finds the installed library this way.
libdir=$(find "$prefix" -name 'libchring.so.*' -printf '%h\n' | head -n1)
help_words=$(LD_LIBRARY_PATH="$libdir" "$prefix/bin/chring" --help | grep -oE '^  (--[a-z]+|[A-Z]{3,})') ||
    die "the installed chring --help did not run"
[ "$(wc -w <<<"$help_words")" -ge 10 ] || die "chring --help listed too few options and commands"
for word in $help_words; do
    grep -q -- "$word" <<<"$page1" || die "chring(1) does not list $word of chring --help"
done
echo "consumers: ok"
