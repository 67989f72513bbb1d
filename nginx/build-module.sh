#!/bin/bash
# Builds ngx_http_upstream_chring_module.so the way Debian builds nginx's own dynamic modules:
# nginx's configure from nginx-dev's source tree with the flags the packaged nginx was built with
# (conf_flags, --with-compat among them), then `make modules`.
#
#   build-module.sh OUTPUT.so MODULE_DIR NGINX_SRC WORK_DIR INCLUDE_DIR LIBCHRING_A [LINK_FLAGS...]
#
# WORK_DIR is scratch space (a copy of NGINX_SRC: configure writes into its current folder).
set -euo pipefail
out=$(realpath -m "$1") module_dir=$(realpath "$2") nginx_src=$3 work=$(realpath -m "$4")
incdir=$(realpath "$5") lib=$(realpath "$6")
shift 6
link_flags="$*"

rm -rf "$work"
mkdir -p "$work"
cp -r "$nginx_src" "$work/src-tree"
cd "$work/src-tree"
# shellcheck disable=SC1091
. ./conf_flags

if command -v dpkg-buildflags >/dev/null 2>&1; then
    cflags="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)"
    ldflags="$(dpkg-buildflags --get LDFLAGS)"
else
    cflags="-g -O2 -fstack-protector-strong -Wformat -Werror=format-security -D_FORTIFY_SOURCE=2"
    ldflags="-Wl,-z,relro -Wl,-z,now"
fi

export CHRING_NGX_INCS="$incdir"
# --exclude-libs: libchring.a stays private to the module (no chring_* symbols exported).
# -z nodelete: the module is never unmapped (a reload that drops load_module would otherwise
# dlclose it while liburcu's call_rcu thread, loaded with it, still runs).
export CHRING_NGX_LIBS="$lib $link_flags -Wl,-z,nodelete -Wl,--exclude-libs,ALL"

./configure --with-cc-opt="$cflags -fPIC" --with-ld-opt="$ldflags -fPIC" \
    "${NGX_CONF_FLAGS[@]}" --add-dynamic-module="$module_dir" --builddir="$work/objs" \
    > "$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
make -f "$work/objs/Makefile" modules > "$work/make.log" 2>&1 || { cat "$work/make.log" >&2; exit 1; }
cp "$work/objs/ngx_http_upstream_chring_module.so" "$out"
