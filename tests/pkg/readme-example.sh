#!/usr/bin/env bash
# The C example of README.md ("## Using the library") compiles warning-free as C11 against the
# built library and runs.
#
#   readme-example.sh README.md CC INCLUDE_DIR LIBCHRING.so
set -euo pipefail
readme=$1
cc=$2
include=$3
lib=$4

tmp=$(mktemp -d "${TMPDIR:-/tmp}/chring-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The first ```c block after the "## Using the library" heading.
awk '/^## Using the library/ { section = 1; next }
     section && /^## / { exit }
     section && /^```c$/ { inblock = 1; next }
     inblock && /^```$/ { exit }
     inblock { print }' "$readme" >"$tmp/example.c"
[ -s "$tmp/example.c" ] || {
    echo "readme-example: FAILED: no \`\`\`c block under '## Using the library' in $readme"
    exit 1
}
echo "readme-example: $(wc -l <"$tmp/example.c") lines"
"$cc" ${CHRING_USER_CFLAGS:-} -std=c11 -Wall -Wextra -Wpedantic -Werror -I"$include" "$tmp/example.c" "$lib" \
    -o "$tmp/example"
out=$(LD_LIBRARY_PATH="$(dirname "$lib")" "$tmp/example")
printf '%s\n' "$out"
case "$out" in
*"user:42 -> cache-"*"served by cache-"*) echo "readme-example: ok" ;;
*)
    echo "readme-example: FAILED: unexpected output"
    exit 1
    ;;
esac
