#!/usr/bin/env bash
# The ThreadSanitizer recipe for users (docs/install.md), followed as a user would
# (tests/consumers/tsan-user.sh): 0 reports for a threaded user program; a race planted in the
# program and one planted in its config.retire callback (run by liburcu's call_rcu thread) are
# both reported; the installed suppressions name no whole library.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/deps.sh --group build
scripts/deps.sh clang libclang-rt-14-dev
timeout 900 bash tests/consumers/tsan-user.sh
