/* The read side for many keys at once: chring_snap_lookup_many and chring_snap_lookup_hashes.
 * SPDX-License-Identifier: MIT
 *
 * A lookup on a ring that has left the caches is a chain of dependent misses: the index entry of
 * the key's bucket, then the bucket's first points and their owner slots (fetched together).  One
 * key at a time, each key waits for its whole chain.  Keys of a batch do not depend on each
 * other, so their misses can overlap (docs/design.md §4, "Batches"): the keys go GROUP at a time
 * through three passes.  The first hashes each key and prefetches its index entry; the second
 * reads the entries, which have arrived meanwhile, and prefetches what they name; the third runs
 * each lookup as chring_snap_lookup does (find.h's chring__owner_of) on lines in the cache.  The
 * answer is therefore the single lookup's, for every profile and with members down: the passes
 * only decide when lines are fetched, never what a key resolves to.  Sixteen keys' misses keep a
 * core's line fill buffers busy; a longer group (32, 64) or a sliding window across groups
 * measured no better at 16 keys here (docs/bench.md §10).
 *
 * Everything here is reader side: no lock, no allocation, no system call; the group's positions
 * live on the stack. */
#include "find.h"
#include "member.h"

#define GROUP 16

/* A prefetch the compiler must keep.  __builtin_prefetch is a call GCC treats as free of side
 * effects: at -O2 GCC 12 vectorised the first pass (dropping its prefetches, which have no
 * vector form) and deleted the second, a loop that does nothing else, so the release build
 * overlapped no misses at all (docs/design.md §4, "Batches").  An asm volatile statement is
 * never deleted, moved out of its loop or vectorised; it takes the address in a register and
 * claims no memory, so it orders nothing else.  tests/objcode/check_prefetch.sh counts these
 * instructions in the built library. */
#if defined(__x86_64__) || defined(__i386__)
#define BATCH_PREFETCH(p) __asm__ volatile("prefetcht0 (%0)" : : "r"((const void *)(p)))
#elif defined(__aarch64__)
#define BATCH_PREFETCH(p) __asm__ volatile("prfm pldl1keep, [%0]" : : "r"((const void *)(p)))
#else
#define BATCH_PREFETCH(p) CHRING_PREFETCH(p)
#endif

/* Stage 1: the index entry of the key's bucket. */
static inline void prefetch_entry(const chring_snap_t *s, uint64_t h64)
{
    size_t b = chring__bucket(s, h64);
    if (s->lines != NULL) {
        BATCH_PREFETCH(&s->lines[b]);
    } else if (s->chunks != NULL) { /* the table entry is in the caches: the chunk's entry */
        BATCH_PREFETCH(&s->chunks[b >> s->chunk_shift].c->first[b & (((size_t)1 << s->chunk_shift) - 1)]);
    } else if (s->index_off != NULL) {
        BATCH_PREFETCH(&s->index_off[b]);
        BATCH_PREFETCH(&s->index[b >> CHRING_PACK_SHIFT]);
    } else {
        BATCH_PREFETCH(&s->index[b]);
    }
}

/* Stage 2: what the entry names, the bucket's first points and their owner slots. */
static inline void prefetch_points(const chring_snap_t *s, uint64_t h64)
{
    if (s->lines != NULL)
        return; /* a line names its key's owner: the first pass fetched all there is */
    if (s->chunks != NULL) {
        size_t b = chring__bucket(s, h64);
        const struct chring_chunk *k = s->chunks[b >> s->chunk_shift].c;
        size_t e = k->first[b & (((size_t)1 << s->chunk_shift) - 1)];
        BATCH_PREFETCH(&k->pos[e]);
        BATCH_PREFETCH(k->owner + e * s->owner_w);
        return;
    }
    size_t e = chring__bucket_first(s, chring__bucket(s, h64));
    BATCH_PREFETCH((const char *)s->pos + e * s->pos_w);
    BATCH_PREFETCH(s->owner + e * s->owner_w);
}

/* The pipeline over n positions that GET(i, &bad) yields (setting bad for a key with no owner),
 * GROUP keys at a time: hash each key of the group and prefetch its entry, then read the entries
 * and prefetch what they name, then resolve the keys.  A macro rather than a function taking a
 * callback, so that each caller's hashing is inlined. */
#define CHRING_BATCH_PIPELINE(s, n, owners, GET)                                                   \
    do {                                                                                           \
        uint64_t h64[GROUP];                                                                       \
        bool bad[GROUP];                                                                           \
        for (size_t g = 0; g < (n); g += GROUP) {                                                  \
            size_t m = (n) - g < GROUP ? (n) - g : GROUP;                                          \
            for (size_t k = 0; k < m; k++) {                                                       \
                bad[k] = false;                                                                    \
                h64[k] = GET(g + k, &bad[k]);                                                      \
                if (CHRING_LIKELY(!bad[k]))                                                        \
                    prefetch_entry((s), h64[k]);                                                   \
            }                                                                                      \
            for (size_t k = 0; k < m; k++)                                                         \
                if (CHRING_LIKELY(!bad[k]))                                                        \
                    prefetch_points((s), h64[k]);                                                  \
            for (size_t k = 0; k < m; k++)                                                         \
                (owners)[g + k] = CHRING_UNLIKELY(bad[k]) ? NULL : chring__owner_of((s), h64[k]);  \
        }                                                                                          \
    } while (0)

size_t chring_snap_lookup_hashes(const chring_snap_t *s, const uint64_t *hashes, size_t n,
                                 const chring_member_t **owners)
{
    if (s == NULL || hashes == NULL || owners == NULL)
        return 0;
    if (s->npoints == 0) {
        for (size_t i = 0; i < n; i++)
            owners[i] = NULL;
        return n;
    }
    unsigned shift = s->prof.shift; /* bits above the profile's width fall off */
#define GET_HASH(i, bad) (hashes[(i)] << shift)
    CHRING_BATCH_PIPELINE(s, n, owners, GET_HASH);
#undef GET_HASH
    return n;
}

/* A key's position, or bad set for a NULL key with a length (chring_snap_lookup's NULL). */
static inline uint64_t key_pos_checked(const chring_snap_t *s, const void *key, size_t len,
                                       bool *bad)
{
    if (CHRING_UNLIKELY(key == NULL && len > 0)) {
        *bad = true;
        return 0;
    }
    return chring__key_pos(s, key, len);
}

size_t chring_snap_lookup_many(const chring_snap_t *s, const void *const *keys, const size_t *lens,
                               size_t n, const chring_member_t **owners)
{
    if (s == NULL || keys == NULL || lens == NULL || owners == NULL)
        return 0;
    if (s->npoints == 0) {
        for (size_t i = 0; i < n; i++)
            owners[i] = NULL;
        return n;
    }
#define GET_KEY(i, bad) key_pos_checked(s, keys[(i)], lens[(i)], (bad))
    CHRING_BATCH_PIPELINE(s, n, owners, GET_KEY);
#undef GET_KEY
    return n;
}
