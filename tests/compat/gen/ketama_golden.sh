#!/bin/sh
# Regenerates the ketama golden data in tests/compat/data from libmemcached itself.
# Needs libmemcached-dev and pkg-config; no memcached server is contacted.
# Run from anywhere: sh tests/compat/gen/ketama_golden.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
data="$here/../data"
keys="$here/keys.txt"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cc -O2 -o "$bin/gen" "$here/ketama_libmemcached.c" $(pkg-config --cflags --libs libmemcached)
g="$bin/gen"

"$g" digests "$data/ketama_digests.tsv" 100
"$g" map "$data/ketama_n3.tsv" "$keys" 10.0.1.1:11211 10.0.1.2:11211 10.0.1.3:11211
"$g" map "$data/ketama_n7.tsv" "$keys" $(seq -f '10.0.1.%g:11211' 1 7)
"$g" map "$data/ketama_n8.tsv" "$keys" $(seq -f '10.0.1.%g:11211' 1 8)
# n8 after removing 10.0.1.4
"$g" map "$data/ketama_n8_minus4.tsv" "$keys" $(seq -f '10.0.1.%g:11211' 1 3) $(seq -f '10.0.1.%g:11211' 5 8)
# 25 and 47 equal members: 39 digests each, not 40
"$g" map "$data/ketama_n25.tsv" "$keys" $(seq -f '10.0.1.%g:11211' 1 25)
"$g" map "$data/ketama_n47.tsv" "$keys" $(seq -f '10.0.1.%g:11211' 1 47)
"$g" map "$data/ketama_weighted.tsv" "$keys" 10.0.1.1=1 10.0.1.2=3 10.0.1.3=1 10.0.1.4=2 10.0.1.5=1
# non-default ports keep ":port" in the label, the default 11211 does not; host names are not resolved
"$g" map "$data/ketama_ports.tsv" "$keys" 10.0.2.1:11212 10.0.2.2:11213=2 10.0.2.3:11211 cache-a.example cache-b.example:11300
"$g" continuum "$data/ketama_ports_continuum.tsv" 10.0.2.1:11212 10.0.2.2:11213=2 10.0.2.3:11211 cache-a.example cache-b.example:11300
# weight 1 next to weight 100 among 2 members: 0 digests, the member owns nothing
"$g" map "$data/ketama_zero.tsv" "$keys" 10.0.3.1=100 10.0.3.2=1
# 30 members, weights 1 to 5, default and other ports, addresses and host names
"$g" map "$data/ketama_mixed30.tsv" "$keys" 10.0.4.1:11211=3 10.0.4.2:11211=2 10.0.4.3:11214=4 \
    10.0.4.4:11211=1 mc05.cache.internal:11211=1 10.0.4.6:11217=5 10.0.4.7:11211=1 10.0.4.8:11211=3 \
    10.0.4.9:11220=5 mc10.cache.internal:11211=1 10.0.4.11:11211=5 10.0.4.12:11223=2 10.0.4.13:11211=1 \
    10.0.4.14:11211=1 mc15.cache.internal:11226=4 10.0.4.16:11211=4 10.0.4.17:11211=1 10.0.4.18:11229=2 \
    10.0.4.19:11211=1 mc20.cache.internal:11211=5 10.0.4.21:11232=4 10.0.4.22:11211=1 10.0.4.23:11211=5 \
    10.0.4.24:11235=1 mc25.cache.internal:11211=2 10.0.4.26:11211=5 10.0.4.27:11238=1 10.0.4.28:11211=5 \
    10.0.4.29:11211=5 mc30.cache.internal:11241=4
