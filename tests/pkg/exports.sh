#!/usr/bin/env bash
# docs/design.md §5: the shared library exports every function the public header declares, and
# nothing else: every other symbol (internal chring__ ones included) is hidden.
#
#   exports.sh LIBCHRING.so CHRING.h
set -euo pipefail
lib=$1
header=$2

exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[A-Z]$/ { print $3 }' | sort -u)
declared=$(grep '^CHRING_API' "$header" | grep -o 'chring_[a-z0-9_]*(' |
    tr -d '(' | sort -u)
status=0

extra=$(comm -23 <(printf '%s\n' "$exported") <(printf '%s\n' "$declared") | grep -v '^$' || true)
missing=$(comm -13 <(printf '%s\n' "$exported") <(printf '%s\n' "$declared") | grep -v '^$' || true)
echo "$lib: $(printf '%s\n' "$exported" | grep -c . || true) symbols exported, $(printf '%s\n' "$declared" | grep -c .) declared by $header"
if [ -n "$extra" ]; then
    echo "exports: FAILED: exported but not declared in the public header (should be hidden):"
    printf '  %s\n' $extra
    status=1
fi
if [ -n "$missing" ]; then
    echo "exports: FAILED: declared CHRING_API in the header but not exported by the library:"
    printf '  %s\n' $missing
    status=1
fi
exit $status
