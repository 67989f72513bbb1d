/* chring benchmark harness: jump consistent hash, a baseline a user would pick instead of a ring.
 *
 * SPDX-License-Identifier: MIT
 *
 * J. Lamping and E. Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm", 2014: the
 * published algorithm with its 64-bit linear congruential generator.  It maps a 64-bit key to a
 * bucket 0 .. n - 1 in O(ln n) steps with no memory but the bucket array; when n grows to n + 1 a
 * key either stays or moves to the new bucket n.  Buckets are numbered, not named: only the last
 * one can leave without moving other keys (removing bucket k < n - 1 means renumbering, e.g.
 * moving the last backend into slot k, which also moves the last backend's keys).
 */
#ifndef CHRING_BENCH_JUMP_H
#define CHRING_BENCH_JUMP_H

#include <stdint.h>

static inline int32_t jump_consistent_hash(uint64_t key, int32_t num_buckets)
{
    int64_t b = -1, j = 0;
    while (j < num_buckets) {
        b = j;
        key = key * 2862933555777941757ull + 1;
        j = (int64_t)((double)(b + 1) * ((double)(1ll << 31) / (double)((key >> 33) + 1)));
    }
    return (int32_t)b;
}

#endif
