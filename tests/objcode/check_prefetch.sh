#!/usr/bin/env bash
# The batch lookups' prefetches are in the object code (docs/design.md §4, "Batches").
#
# chring_snap_lookup_many and chring_snap_lookup_hashes overlap the misses of 16 keys only if the
# compiler kept both prefetch passes: the first prefetches each key's line, flat index entry, or
# packed index base and offset byte (four prefetch sites), the second the points and owner slot
# that an entry names (two sites).  GCC 12 at -O2 once kept none of them (it vectorised the first pass and
# deleted the second) and every answer stayed right, so nothing but the object code shows it.
# This check disassembles the built library and counts the prefetch instructions in each of the
# two functions: at least the six sites of the two passes (inlining and unrolling may repeat a
# site, the single lookup's code adds one of its own).  An unoptimised build (-O0, -Og, -O1)
# does not inline the passes into the functions: the check is skipped there (exit 77).
#
# Usage: check_prefetch.sh LIBRARY OPTIMIZATION [MIN]
set -euo pipefail
lib=$1
opt=$2
min=${3:-6}
case $opt in
0 | g | 1 | plain) echo "optimization '$opt': the passes are not inlined, nothing to count"; exit 77 ;;
esac
command -v objdump >/dev/null || { echo "objdump not found"; exit 77; }
[ -f "$lib" ] || { echo "no library at $lib"; exit 1; }

status=0
for fn in chring_snap_lookup_many chring_snap_lookup_hashes; do
    body=$(objdump -d --no-show-raw-insn "$lib" |
        awk -v head="<$fn>:" '$2 == head { on = 1; next } on && /^$/ { on = 0 } on')
    if [ -z "$body" ]; then
        echo "FAIL: $fn not found in $lib"
        status=1
        continue
    fi
    # x86 (prefetcht0, prefetchnta, prefetchw ...) and AArch64 (prfm).
    n=$(grep -cE '[[:space:]](prefetch[a-z0-9]*|prfm)[[:space:]]' <<<"$body" || true)
    if [ "$n" -ge "$min" ]; then
        echo "ok: $fn has $n prefetch instructions (at least $min)"
    else
        echo "FAIL: $fn has $n prefetch instructions, fewer than the $min sites of its two passes:"
        echo "      the compiler dropped prefetches (src/batch.c, BATCH_PREFETCH)"
        status=1
    fi
done
exit $status
