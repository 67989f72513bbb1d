/* The read side's hot path, inline: a key's position, the point a lookup starts from (the
 * index's first point at or after the key, index.h's chring__find, moved by the profile's start
 * rule), and the owner of a key, with members down too.  The clockwise walk of the bounded and
 * n-replica lookups is walk.h's.
 * SPDX-License-Identifier: MIT */
#ifndef CHRING_FIND_H
#define CHRING_FIND_H

#include "hash.h"
#include "index.h"

/* A key's position shifted to 64 bits: the default profile's hash inlined (FNV-1a 64 then
 * SplitMix64), the others through their descriptor. */
static inline uint64_t chring__key_pos(const chring_snap_t *s, const void *key, size_t len)
{
    if (CHRING_LIKELY(s->prof.id == CHRING_PROFILE_HASH64))
        return chring__mix64(chring__fnv64_run(CHRING_FNV64_OFFSET, key, len));
    return s->prof.desc->hash(&s->prof, key, len) << s->prof.shift;
}

/* The nearest-point rule (haproxy): of point i, the first at or after h64, and the point before
 * it (wrapping), the nearer to h64 going round the ring, the one before on a tie.  Distances are
 * taken modulo 2^64 on shifted positions, which orders them as modulo 2^bits. */
static inline size_t chring__nearest(const chring_snap_t *s, uint64_t h64, size_t i)
{
    size_t before = (i == 0 ? s->npoints : i) - 1;
    return h64 - chring__pos(s, before) <= chring__pos(s, i) - h64 ? before : i;
}

/* The varnish rule (Varnish's shard_lookup()): of point i, chring__find's answer, the last
 * point when the key is above every point (chring__find wrapped to 0), and point 1 on a ring of
 * two points whatever the key.  A ring of one point answers 0 either way. */
static inline size_t chring__varnish_start(const chring_snap_t *s, uint64_t h64, size_t i)
{
    if (s->npoints == 2)
        return 1;
    if (i == 0 && s->npoints > 0 && h64 > chring__pos(s, s->npoints - 1))
        return s->npoints - 1;
    return i;
}

/* The point a lookup and every walk start from: chring__find's, moved to the nearest point or
 * by the varnish rule when the profile says so (docs/design.md §2.1).  The default profile
 * never reads the descriptor. */
CHRING_HOT_INLINE size_t chring__start(const chring_snap_t *s, uint64_t h64)
{
    size_t i = chring__find(s, h64);
    if (CHRING_UNLIKELY(s->prof.id != CHRING_PROFILE_HASH64)) {
        if (s->prof.desc->nearest)
            i = chring__nearest(s, h64, i);
        else if (s->prof.desc->varnish_start)
            i = chring__varnish_start(s, h64, i);
    }
    return i;
}

/* The owner of a key at shifted position h64 for a plain lookup: with the line index, the slot
 * its line names, with no point read; else the owner of the point chring__start finds.  Down
 * members as in chring__owner_up. */
CHRING_HOT_INLINE const chring_member_t *chring__owner_of(const chring_snap_t *s, uint64_t h64);

/* The owner of point i for a lookup: its member, or when members are down (health.c) the first
 * member clockwise that is up (NULL if none is).  With no member down this is one more load, of
 * the line that holds the ring's published pointer. */
static inline const chring_member_t *chring__owner_up(const chring_snap_t *s, size_t i)
{
    const chring_member_t *m = s->slot_member[chring__owner(s, i)];
    if (CHRING_LIKELY(CHRING_LOAD_64(&s->health->alive_down) == 0))
        return m;
    /* Some member is down: the owner's own flag first (a key whose owner is up pays one load of
     * the member), the walk only for keys whose owner is down. */
    return CHRING_LOAD_32(&m->down) == 0 ? m : chring__first_up(s, i);
}

/* chring__owner_of on a chunked snapshot: the key's chunk and bucket (the owner slots of the
 * bucket's first points fetched with its positions), the owner read in the chunk unless the key
 * is above the chunk's points. */
static inline const chring_member_t *chring__chunk_owner_of(const chring_snap_t *s, uint64_t h64)
{
    size_t b = chring__bucket(s, h64);
    const struct chring_chunk_ref *r = &s->chunks[b >> s->chunk_shift];
    const struct chring_chunk *k = r->c;
    size_t lb = b & (((size_t)1 << s->chunk_shift) - 1);
    CHRING_PREFETCH(k->owner + (size_t)k->first[lb] * s->owner_w);
    size_t i = chring__chunk_scan(k, lb, h64);
    if (CHRING_UNLIKELY(i == k->npoints)) {
        i += r->first;
        return chring__owner_up(s, i == s->npoints ? 0 : i);
    }
    const chring_member_t *m =
        s->slot_member[chring__owner_in(k->owner, s->owner_w, s->owner_mask, i)];
    if (CHRING_LIKELY(CHRING_LOAD_64(&s->health->alive_down) == 0) ||
        CHRING_LOAD_32(&m->down) == 0)
        return m;
    return chring__first_up(s, r->first + i);
}

CHRING_HOT_INLINE const chring_member_t *chring__owner_of(const chring_snap_t *s, uint64_t h64)
{
    if (s->lines != NULL) {
        /* One line: the slot after the points below the key names its owner, with no point
         * read; the rare keys that need the positions go through chring__line_find. */
        uint64_t at = (h64 >> 32) * (uint64_t)s->nbuckets;
        const struct chring_line *l = &s->lines[at >> 32];
        uint16_t k = (uint16_t)((uint32_t)at >> 16);
        unsigned below = chring__line_below(l, k);
        if (CHRING_UNLIKELY((l->first & CHRING_LINE_FULL) != 0 || l->off[below] == k))
            return chring__owner_up(s, chring__line_find(s, h64));
        const chring_member_t *m = s->slot_member[l->slot[below]];
        if (CHRING_LIKELY(CHRING_LOAD_64(&s->health->alive_down) == 0) ||
            CHRING_LOAD_32(&m->down) == 0)
            return m;
        size_t i = l->first + below;
        return chring__first_up(s, i == s->npoints ? 0 : i);
    }
    if (CHRING_UNLIKELY((s->search & CHRING_SEARCH_CHUNKED) != 0))
        return chring__chunk_owner_of(s, h64);
    /* The owner of the bucket's first point is the answer or next to it: its line is fetched
     * while the positions are compared, one miss in parallel instead of after. */
    size_t e = chring__bucket_first(s, chring__bucket(s, h64));
    CHRING_PREFETCH(s->owner + e * s->owner_w);
    return chring__owner_up(s, chring__start(s, h64));
}

#endif
