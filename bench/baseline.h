/* chring benchmark harness: the baselines a user would otherwise pick.
 *
 * SPDX-License-Identifier: MIT
 *
 * The same sorted ring as a chring snapshot (positions and owners copied out with
 * chring_snap_point), searched with a classic branchy binary search behind a pthread_rwlock_t or a
 * pthread_mutex_t, or with a branchless binary search and no synchronisation at all.  The hash is
 * the default profile's (FNV-1a 64 + SplitMix64), written inline as a user would.
 */
#ifndef CHRING_BENCH_BASELINE_H
#define CHRING_BENCH_BASELINE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "chring.h"

typedef struct base_ring {
    uint64_t *pos;                 /* point positions, ascending */
    const chring_member_t **owner; /* owner of each point */
    size_t n;                      /* points (>= 1) */
} base_ring_t;

/* Copies the points of s (which must not be empty) into a new base ring. */
void base_ring_copy(base_ring_t *b, const chring_snap_t *s);
void base_ring_free(base_ring_t *b);

/* FNV-1a 64 followed by the SplitMix64 finalizer, byte by byte: the hash64 profile's hash. */
static inline uint64_t base_hash64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

/* Index of the first position >= h (n when there is none): classic binary search with a
 * data-dependent branch per step. */
size_t base_search_branchy(const uint64_t *pos, size_t n, uint64_t h);
/* The same result without data-dependent branches (n >= 1). */
size_t base_search_branchless(const uint64_t *pos, size_t n, uint64_t h);

/* The owner of hash h: first point >= h, wrapping past the largest. */
static inline const chring_member_t *base_owner_branchy(const base_ring_t *b, uint64_t h)
{
    size_t i = base_search_branchy(b->pos, b->n, h);
    return b->owner[i == b->n ? 0 : i];
}

static inline const chring_member_t *base_owner_branchless(const base_ring_t *b, uint64_t h)
{
    size_t i = base_search_branchless(b->pos, b->n, h);
    return b->owner[i == b->n ? 0 : i];
}

#endif
