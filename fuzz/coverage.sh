#!/usr/bin/env bash
# Source coverage of the library reached by a corpus (clang source-based coverage).
#
#   fuzz/coverage.sh TARGET [CORPUS_DIR...]    TARGET: api or cli; default corpus fuzz/corpus/TARGET
#
# Builds build-fuzz-cov (clang, -fprofile-instr-generate -fcoverage-mapping, no sanitizers), runs
# the target once over every input (libFuzzer -runs=0) and prints llvm-cov's report for src/*.c.
# `llvm-cov show` with the same arguments lists the lines never reached.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:?usage: fuzz/coverage.sh api|cli [CORPUS_DIR...]}"
shift
dirs=("$@")
[ "${#dirs[@]}" -gt 0 ] || dirs=("fuzz/corpus/$target")
build=build-fuzz-cov
if [ ! -f "$build/build.ninja" ]; then
    rm -rf "$build"
    CC=clang meson setup "$build" --buildtype=debug -Dfuzz=true -Dtests=false -Dbench=false \
        -Dlb=disabled -Dtools=false -Db_lundef=false \
        -Durcu_lgpl=false "-Dc_args=-fprofile-instr-generate -fcoverage-mapping" \
        "-Dc_link_args=-fprofile-instr-generate"
fi
nice ninja -C "$build" -j "${NINJA_JOBS:-2}" "fuzz/fuzz_$target"
prof=$(mktemp -d "${TMPDIR:-/tmp}/chring-cov.XXXXXX")
trap 'rm -rf "$prof"' EXIT
LLVM_PROFILE_FILE="$prof/%p.profraw" "$build/fuzz/fuzz_$target" -runs=0 "${dirs[@]}" 2>&1 | tail -n 1
llvm-profdata merge -o "$prof/all.profdata" "$prof"/*.profraw
llvm-cov report "$build/fuzz/fuzz_$target" -instr-profile="$prof/all.profdata" src/*.c
