/* Chunked snapshots: a large ring whose publish writes the change, not the ring
 * (docs/design.md §4.2).
 * SPDX-License-Identifier: MIT
 *
 * A flat snapshot holds its points in its block, so every publish copies all of them: about
 * 3.5 ms a million points here, 19-23 ms at 100,000 x 160 (docs/bench.md §11h).  A chunked
 * snapshot holds a table of chunks instead.  The ring's buckets (a power of two, 0.5 to 2 points
 * a bucket) are cut into runs of 2^chunk_shift; chunk c holds the points of run c, sorted, with
 * a bucket index of its own (first[]: local point indices).  A publish copies the table, gives a
 * new chunk to each run a changed point falls in (its old points and the fresh ones woven as the
 * flat merge weaves them, snap_merge.c) and shares every other chunk, pointer for pointer, with
 * the snapshot it replaces.  A chunk is never written once published.  A build, or a publish
 * that lays the ring out anew, cuts a flat snapshot into chunks (snap_build.c); this file holds
 * the geometry, a chunk's making, the directory, the flat view of a chunked snapshot and the
 * freeing of chunks.
 *
 * Lifetime.  The chunks a publish replaces are listed in its snapshot's chain node
 * (struct chring_chain's chunks) and freed when the node before it is freed (snap_block.c,
 * chain_unref): then every snapshot that listed them is gone, readers, holds and all, as for the
 * members a publish drops.  The chunks a publish made are freed with its snapshot if it is never
 * published.  The ring's last snapshot's chunks are freed by chring_free (chring__chain_settle).
 *
 * Which rings: the default profile (hash64: 8-byte positions, the plain first-point rule) with
 * the bucket index (rings whose slots do not fit the line index's 16 bits), from
 * CHRING_CHUNK_MIN points (chring__chunk_min): where a whole copy no longer fits 10 ms.  Other
 * rings stay flat, their lookups as they are. */
#include "index.h"

#include <stdlib.h>

/* 2^22 points: a flat publish copies about 3.5 ms a million points here (docs/bench.md §11h),
 * so a flat ring of 4 M points publishes in about 15 ms, and a ring of 1.6 M (10,000 x 160,
 * 100,000 x 16: the rings with lookup targets) stays flat at 5-6 ms. */
#define CHRING_CHUNK_MIN ((size_t)1 << 22)

size_t chring__chunk_min(void)
{
    static size_t min; /* 0: not read yet */
    size_t m = __atomic_load_n(&min, __ATOMIC_RELAXED);
    if (m == 0) {
        const char *env = getenv("CHRING_CHUNK_MIN");
        char *end = NULL;
        unsigned long long v = env != NULL ? strtoull(env, &end, 10) : 0;
        bool set = env != NULL && *env != '\0' && end != NULL && *end == '\0';
        m = !set ? CHRING_CHUNK_MIN : v == 0 || v > SIZE_MAX ? SIZE_MAX : (size_t)v;
        __atomic_store_n(&min, m, __ATOMIC_RELAXED);
    }
    return m;
}

bool chring__chunk_eligible(const struct chring_prof *prof, size_t npoints, size_t nslots)
{
    return prof->id == CHRING_PROFILE_HASH64 && npoints > 0 && npoints >= chring__chunk_min() &&
           npoints < UINT32_MAX && !chring__index_lines(prof, npoints, nslots);
}

size_t chring__chunk_buckets(size_t npoints, size_t prev_buckets)
{
    if (prev_buckets != 0 && npoints <= 2 * prev_buckets && npoints * 2 >= prev_buckets)
        return prev_buckets;
    size_t n = 16;
    while (n < npoints)
        n <<= 1;
    return n;
}

/* Buckets a chunk: nbuckets / 4096 between 4 and 2048, so that a ring of 16 M points has 8,192
 * chunks of about 2,000 points (30 KB; a one-member change of 160 points touches some 160) and a
 * small ring (the tests') has many chunks of a few points, empty ones among them. */
unsigned chring__chunk_shift(size_t nbuckets)
{
    size_t per = nbuckets >> 12;
    per = per < 4 ? 4 : per > 2048 ? 2048 : per;
    unsigned shift = 0;
    while (((size_t)1 << shift) < per)
        shift++;
    return shift;
}

struct chring_chunk *chring__chunk_alloc(size_t npoints, unsigned shift, uint32_t owner_w)
{
    size_t buckets = (size_t)1 << shift;
    size_t head = sizeof(struct chring_chunk) + (buckets + 1) * sizeof(uint32_t);
    head = (head + 7) & ~(size_t)7;
    size_t bytes = head + (npoints + CHRING_SENTINELS) * sizeof(uint64_t) + npoints * owner_w +
                   CHRING_OWNER_PAD;
    struct chring_chunk *k = chring__alloc(bytes);
    if (k == NULL)
        return NULL;
    k->bytes = bytes;
    k->npoints = (uint32_t)npoints;
    k->owner_w = owner_w;
    k->pos = (uint64_t *)(void *)((char *)k + head);
    k->owner = (unsigned char *)(k->pos + npoints + CHRING_SENTINELS);
    return k;
}

void chring__chunk_seal(struct chring_chunk *k)
{
    size_t n = k->npoints;
    for (size_t e = 0; e < CHRING_SENTINELS; e++)
        k->pos[n + e] = UINT64_MAX;
    memset(k->owner + n * k->owner_w, 0, CHRING_OWNER_PAD);
}

/* first[b] is the number of the chunk's points in its buckets below b: a histogram of the
 * buckets, then its prefix sums (a branch a bucket to find each first point was three times
 * slower: half of them mispredicted). */
void chring__chunk_finish(const chring_snap_t *s, size_t c, struct chring_chunk *k)
{
    size_t n = k->npoints, buckets = (size_t)1 << s->chunk_shift, b0 = c << s->chunk_shift;
    chring__chunk_seal(k);
    memset(k->first, 0, (buckets + 1) * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++)
        k->first[chring__bucket(s, k->pos[i]) - b0 + 1]++;
    for (size_t lb = 1; lb <= buckets; lb++)
        k->first[lb] += k->first[lb - 1];
}

void chring__chunk_dir(chring_snap_t *s)
{
    size_t c = 0;
    for (size_t d = 0; s->npoints > 0 && d <= (s->npoints - 1) >> CHRING_CHUNK_DIR_SHIFT; d++) {
        size_t i = d << CHRING_CHUNK_DIR_SHIFT;
        while (s->chunks[c + 1].first <= i)
            c++;
        s->chunk_dir[d] = (uint32_t)c;
    }
}

struct chring_chunk_swap *chring__chunk_swap_new(size_t made, size_t gone)
{
    struct chring_chunk_swap *w =
        chring__alloc(sizeof *w + (made + gone + 1) * sizeof(struct chring_chunk *));
    if (w == NULL)
        return NULL;
    w->nmade = w->ngone = 0;
    w->made = (struct chring_chunk **)(void *)(w + 1);
    w->gone = w->made + made;
    return w;
}

void chring__chunk_swap_free(struct chring_chunk_swap *w, bool made)
{
    if (w == NULL)
        return;
    if (made)
        for (size_t k = 0; k < w->nmade; k++)
            chring__free(w->made[k]);
    chring__free(w);
}

void chring__chunk_free_gone(struct chring_chunk_swap *w)
{
    if (w == NULL)
        return;
    for (size_t k = 0; k < w->ngone; k++)
        chring__free(w->gone[k]);
    w->ngone = 0;
}

void chring__chunk_free_all(const chring_snap_t *s)
{
    for (size_t c = 0; s->chunks != NULL && c < s->nchunks; c++)
        chring__free((void *)(uintptr_t)s->chunks[c].c);
}

int chring__chunk_expand(const chring_snap_t *s, chring_snap_t *view)
{
    /* The fields a merge reads, one by one: the header's counts (refs, the cached sums) are
     * written by readers meanwhile and are not the view's to copy. */
    memset(view, 0, sizeof *view);
    view->magic = CHRING_SNAP_MAGIC;
    view->health = s->health;
    view->prof = s->prof;
    view->nmembers = s->nmembers;
    view->total_weight = s->total_weight;
    view->members = s->members;
    view->weights = s->weights;
    view->member_points = s->member_points;
    view->member_slot = s->member_slot;
    view->nslots = s->nslots;
    view->slot_member = s->slot_member;
    view->slot_weight = s->slot_weight;
    view->slot_rank = s->slot_rank;
    view->npoints = s->npoints;
    view->pos_w = s->pos_w;
    view->owner_w = s->owner_w;
    view->owner_mask = s->owner_mask;
    size_t n = s->npoints;
    char *mem = chring__alloc((n + CHRING_SENTINELS) * sizeof(uint64_t) + n * s->owner_w +
                              CHRING_OWNER_PAD);
    if (mem == NULL)
        return -ENOMEM;
    view->pos = mem;
    view->owner = (unsigned char *)mem + (n + CHRING_SENTINELS) * sizeof(uint64_t);
    for (size_t c = 0; c < s->nchunks; c++) {
        const struct chring_chunk *k = s->chunks[c].c;
        memcpy((uint64_t *)view->pos + s->chunks[c].first, k->pos, k->npoints * sizeof(uint64_t));
        memcpy(view->owner + s->chunks[c].first * s->owner_w, k->owner,
               (size_t)k->npoints * s->owner_w);
    }
    for (size_t e = 0; e < CHRING_SENTINELS; e++)
        ((uint64_t *)view->pos)[n + e] = UINT64_MAX;
    memset(view->owner + n * s->owner_w, 0, CHRING_OWNER_PAD);
    view->nbuckets = 0; /* no index to shift: the merge builds the new one */
    chring__search_shape(view);
    return 0;
}

void chring__chunk_expand_free(chring_snap_t *view)
{
    chring__free(view->pos);
}
