#!/usr/bin/env bash
# The libFuzzer targets (fuzz/: the API against a reference model, the tool's command engine
# against a model of the session, chring-lb's HTTP/1 parser and chunked decoding) for about 60 s each under ASan + UBSan, after replaying the seed
# corpus and the inputs of past findings.  Any crash, model mismatch, leak, timeout or sanitizer
# report fails the step; the finding's input is left in build-fuzz/findings/.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/deps.sh clang libclang-rt-14-dev liburcu-dev libck-dev libxxhash-dev libmd-dev \
    zlib1g-dev meson ninja-build pkg-config libcriterion-dev libevent-dev libjansson-dev
# Two processes per target: the targets mostly wait for RCU grace periods (chring_free), so two
# processes roughly double the executions on 2 cores.
FUZZ_BUILD=build-fuzz FUZZ_JOBS=${FUZZ_JOBS:-2} NINJA_JOBS=2 timeout 900 fuzz/run.sh "${CHRING_FUZZ_SECONDS:-60}"
