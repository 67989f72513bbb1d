#!/usr/bin/env bash
# Installs the Debian packages chring needs, by group.
#
#   scripts/deps.sh                    every group (what `make test` needs: all of them)
#   scripts/deps.sh --group G [G...]   only these groups: build, test, bench, lb, all
#   scripts/deps.sh --list G [G...]    print the groups' packages, one per line, and exit
#   scripts/deps.sh pkg1 pkg2          only these packages
#   scripts/deps.sh --check [...]      only report what is missing (exit 1 if anything is)
#
# Nothing to do: prints nothing and exits 0.  As root: runs `apt-get update` once and installs
# what is missing.  Not root: names the missing packages and the command to install them, exits 1.
# CHRING_SKIP_DEPS=1 skips the whole check (for machines that provide the libraries otherwise).
set -euo pipefail

# build: what building and installing the library and the chring tool needs (make build and
#   make install need it and install nothing: make deps DEPS_GROUPS=build); nothing else.
# test: what the test suites need beyond build: Criterion, g++ (header test), clang and its
#   runtimes (sanitizers, fuzzing), cmake (the CMake consumer test), python3, the real components
#   the tests start (nginx, curl, wrk, headless Chromium, etcd, varnish, prometheus and
#   python3-prometheus-client; nginx-dev for the nginx module, libvarnishapi-dev for the Varnish
#   module),
#   libevent and libjansson for chring-lb.
# bench: the benchmark harness and the demo: gnuplot, libmemcached (the ketama baseline).
# lb: chring-lb (libevent, libjansson for the etcd feed; the meson option -Dlb).
DEPS_BUILD="liburcu-dev libck-dev libxxhash-dev libmd-dev zlib1g-dev make meson ninja-build
pkg-config gcc"
DEPS_TEST="libcriterion-dev g++ clang libclang-rt-14-dev cmake man-db python3 libevent-dev nginx-light
wrk curl chromium etcd-server etcd-client libmemcached-dev nginx-dev varnish libvarnishapi-dev
libjansson-dev prometheus python3-prometheus-client"
DEPS_BENCH="gnuplot-nox libmemcached-dev"
DEPS_LB="libevent-dev libjansson-dev"
DEPS_ALL="$DEPS_BUILD $DEPS_TEST $DEPS_BENCH $DEPS_LB"

group_packages() { # GROUP...
    local g
    for g in "$@"; do
        case "$g" in
        build) echo $DEPS_BUILD ;;
        test) echo $DEPS_TEST ;;
        bench) echo $DEPS_BENCH ;;
        lb | examples) echo $DEPS_LB ;; # examples: the old name of the group
        all) echo $DEPS_ALL ;;
        *)
            echo "deps.sh: unknown group '$g' (build, test, bench, lb, all)" >&2
            return 1
            ;;
        esac
    done | tr ' ' '\n' | grep . | awk '!seen[$0]++'
}

if [ "${1:-}" = "--list" ]; then
    shift
    group_packages "${@:-all}"
    exit 0
fi

if [ "${CHRING_SKIP_DEPS:-0}" = 1 ]; then
    exit 0
fi

check_only=0
if [ "${1:-}" = "--check" ]; then
    check_only=1
    shift
fi
if [ "${1:-}" = "--group" ]; then
    shift
    wanted=$(group_packages "$@" | tr '\n' ' ')
elif [ "$#" -gt 0 ]; then
    wanted="$*"
else
    wanted=$(group_packages all | tr '\n' ' ')
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps.sh: dpkg-query not found: this script knows Debian only; install by hand:" >&2
    echo "  $(echo $wanted)" >&2
    exit 1
fi

missing=""
for p in $wanted; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
    *" installed") ;;
    *) missing="$missing $p" ;;
    esac
done
missing="${missing# }"

if [ -z "$missing" ]; then
    exit 0
fi

if [ "$check_only" = 1 ]; then
    echo "deps.sh: missing Debian packages: $missing"
    exit 1
fi

if [ "$(id -u)" != 0 ]; then
    echo "deps.sh: these Debian packages are missing: $missing" >&2
    echo "deps.sh: install them as root, then run this again:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y $missing" >&2
    exit 1
fi

echo "deps.sh: installing: $missing"
export DEBIAN_FRONTEND=noninteractive
# Packages with a service (nginx-light) must not start it while installing: on a build machine port
# 80 may be taken, and a failed start would leave the package half-configured.  policy-rc.d 101
# tells invoke-rc.d to start nothing; tests start what they need themselves.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
fi
apt-get update -q
# shellcheck disable=SC2086 # word splitting of the package list is intended
apt-get install -y -q $missing </dev/null
