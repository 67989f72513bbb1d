/* Building a snapshot: the limits, the choice between merge and full build, and the full build.
 * SPDX-License-Identifier: MIT
 *
 * Points are ordered by (position, member name, point index): generated in name order and sorted
 * stably, so the ring is a pure function of the membership (Karger et al. 1997; docs/design.md
 * §1).  Only a profile that skips taken positions in join order (fnv16) depends on history, as
 * docs/design.md §2 says.  A snapshot is never changed after it is built. */
#include "index.h"
#include "member.h"

/* Sorts member ranks by join order, which is the order of their ids (apply.c creates members in
 * the caller's order; insertion sort: fnv16 rings are small). */
static void sort_by_join(uint32_t *order, size_t n, chring_member_t *const *members)
{
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    for (size_t i = 1; i < n; i++) {
        uint32_t v = order[i];
        size_t j = i;
        while (j > 0 && members[order[j - 1]]->id > members[v]->id) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
}

/* Slot j for the member of rank j: the numbering of a snapshot built from scratch. */
static void identity_slots(chring_snap_t *s)
{
    for (size_t j = 0; j < s->nmembers; j++) {
        s->member_slot[j] = (uint32_t)j;
        s->slot_member[j] = s->members[j];
        s->slot_weight[j] = s->weights[j];
        s->slot_rank[j] = (uint32_t)j;
    }
}

/* Member j's point count: the profile's per-member formula, or the counts it computed for the
 * whole membership (envoy: counts depend on every weight and on the member order). */
static uint64_t points_of(const chring_snap_t *s, const uint32_t *counts, size_t j)
{
    if (counts != NULL)
        return counts[j];
    return s->prof.desc->points(&s->prof, s->weights[j], s->nmembers, s->total_weight);
}

static void positions_of(const chring_snap_t *s, size_t j, uint64_t count, uint64_t *out)
{
    const chring_member_t *m = s->members[j];
    s->prof.desc->positions(&s->prof, m->name, m->name_len, count, out);
}

/* Every member's points, in name order, shifted, into pos (64-bit positions), their owners'
 * slots (ranks: identity_slots) into owner; returns how many. */
static size_t generate_all(chring_snap_t *s, const uint32_t *counts, uint64_t *pos,
                           uint32_t *owner)
{
    size_t at = 0;
    for (size_t j = 0; j < s->nmembers; j++) {
        uint64_t count = points_of(s, counts, j);
        positions_of(s, j, count, pos + at);
        for (uint64_t i = 0; i < count; i++) {
            pos[at + i] <<= s->prof.shift;
            owner[at + i] = (uint32_t)j;
        }
        s->member_points[j] = (uint32_t)count;
        at += count;
    }
    return at;
}

/* CHRING_COLLIDE_SKIP_TAKEN (16-bit positions): raw positions in name order into the scratch,
 * then placed member by member in join order, each member's points in index order; a position
 * already taken is skipped.  Returns the points placed. */
static size_t place_skip_taken(chring_snap_t *s, const uint32_t *counts, uint64_t *raw,
                               uint64_t *start, uint32_t *order, uint32_t *owner)
{
    uint64_t at = 0;
    for (size_t j = 0; j < s->nmembers; j++) {
        uint64_t count = points_of(s, counts, j);
        positions_of(s, j, count, raw + at);
        start[j] = at;
        at += count;
    }
    sort_by_join(order, s->nmembers, s->members);
    uint64_t taken[65536 / 64] = {0};
    size_t placed = 0;
    for (size_t o = 0; o < s->nmembers; o++) {
        uint32_t j = order[o];
        uint64_t count = points_of(s, counts, j);
        uint32_t mine = 0;
        for (uint64_t i = 0; i < count; i++) {
            uint64_t p = raw[start[j] + i];
            if (taken[p / 64] & (UINT64_C(1) << (p % 64)))
                continue;
            taken[p / 64] |= UINT64_C(1) << (p % 64);
            chring__pos_set(s, placed, p << s->prof.shift);
            owner[placed] = j;
            placed++;
            mine++;
        }
        s->member_points[j] = mine;
    }
    return placed;
}

/* CHRING_COLLIDE_KEEP_FIRST on sorted points: of equal positions only the first (by name) stays.
 * Returns the points kept. */
static size_t keep_first(chring_snap_t *s, size_t npoints, uint32_t *owner)
{
    if (npoints == 0)
        return 0;
    size_t kept = 1;
    for (size_t i = 1; i < npoints; i++) {
        if (chring__pos(s, i) == chring__pos(s, kept - 1)) {
            s->member_points[owner[i]]--;
            continue;
        }
        chring__pos_set(s, kept, chring__pos(s, i));
        owner[kept] = owner[i];
        kept++;
    }
    return kept;
}

/* A snapshot built from scratch: generate (or place) every member's points, sort them, apply the
 * profile's collision rule, index. */
static chring_snap_t *build_full(struct chring_blocks *blocks, const struct chring_prof *prof,
                                 chring_member_t *const *members, const uint32_t *weights,
                                 const uint32_t *counts, size_t nmembers, uint64_t total_weight,
                                 size_t npoints, int *err)
{
    bool skip_taken = prof->desc->collide == CHRING_COLLIDE_SKIP_TAKEN;
    chring_snap_t *s = chring__snap_alloc(blocks, prof, members, weights, nmembers, nmembers,
                                          total_weight, npoints, 0);
    /* Scratch: the owners as 32-bit slots (the snapshot's are narrower: written once sorted)
     * and the sort's second buffer (positions, then owners); for 4-byte positions the 64-bit
     * positions as generated instead, whose bytes (once narrowed into the snapshot) are the
     * sort's second buffer, 32-bit positions and owners.  For skip-taken also the join order
     * and offsets.  64-bit arrays first, then the 32-bit ones: every array stays aligned.  So
     * 16 bytes a point for 8-byte positions, 12 for 4-byte ones. */
    bool wide = chring__pos_width(prof) == 8;
    size_t scratch_size = npoints * (sizeof(uint64_t) + (wide ? 2 : 1) * sizeof(uint32_t)) +
                          (skip_taken ? nmembers * (sizeof(uint32_t) + sizeof(uint64_t)) : 0);
    char *scratch = s == NULL ? NULL : chring__alloc(scratch_size);
    if (s == NULL || scratch == NULL) {
        if (s != NULL)
            chring__snap_discard(s);
        *err = -ENOMEM;
        return NULL;
    }
    uint64_t *tpos = (uint64_t *)(void *)scratch;
    uint64_t *start = tpos + npoints; /* skip-taken only */
    uint32_t *owner = (uint32_t *)(void *)(start + (skip_taken ? nmembers : 0));
    uint32_t *towner = owner + npoints; /* 8-byte positions only */
    uint32_t *order = towner + (wide ? npoints : 0); /* skip-taken only */

    identity_slots(s);
    if (skip_taken) {
        npoints = place_skip_taken(s, counts, tpos, start, order, owner);
    } else if (wide) {
        npoints = generate_all(s, counts, s->pos, owner);
    } else {
        npoints = generate_all(s, counts, tpos, owner);
        for (size_t i = 0; i < npoints; i++)
            chring__pos_set(s, i, tpos[i]);
    }
    /* Generated in name order (skip-taken: no equal positions), so the stable sort orders equal
     * positions by name. */
    if (wide)
        chring__sort_points(npoints, s->pos, owner, tpos, towner);
    else
        chring__sort_points32(npoints, s->pos, owner, (uint32_t *)(void *)tpos,
                              (uint32_t *)(void *)tpos + npoints);
    if (prof->desc->collide == CHRING_COLLIDE_KEEP_FIRST)
        npoints = keep_first(s, npoints, owner);
    s->npoints = npoints;
    for (size_t i = 0; i < npoints; i++)
        chring__owner_set(s, i, owner[i]);
    chring__index_build(s);

    chring__free(scratch);
    *err = 0;
    return s;
}

/* The chunked snapshot of flat's points and membership (docs/design.md §4.2), keeping
 * prev_buckets while in band (0: none); flat is discarded and what it replaced (flat->swap's
 * gone) carried over.  NULL and *err = -ENOMEM on failure, flat then left to the caller. */
static chring_snap_t *chunkify(struct chring_blocks *blocks, chring_snap_t *flat,
                                size_t prev_buckets, int *err)
{
    size_t n = flat->npoints;
    size_t nbuckets = chring__chunk_buckets(n, prev_buckets);
    chring_snap_t *s = chring__snap_alloc_chunked(blocks, &flat->prof, flat->members, flat->weights,
                                                  flat->nmembers, flat->nslots,
                                                  flat->total_weight, n, nbuckets);
    size_t ngone = flat->swap != NULL ? flat->swap->ngone : 0;
    struct chring_chunk_swap *w = s == NULL ? NULL : chring__chunk_swap_new(s->nchunks, ngone);
    if (s == NULL || w == NULL)
        goto fail;
    memcpy(s->member_points, flat->member_points, flat->nmembers * sizeof(uint32_t));
    memcpy(s->member_slot, flat->member_slot, flat->nmembers * sizeof(uint32_t));
    memcpy(s->slot_member, flat->slot_member, flat->nslots * sizeof(chring_member_t *));
    memcpy(s->slot_weight, flat->slot_weight, flat->nslots * sizeof(uint32_t));
    memcpy(s->slot_rank, flat->slot_rank, flat->nslots * sizeof(uint32_t));
    s->swap = w;
    size_t i = 0;
    for (size_t c = 0; c < s->nchunks; c++) {
        size_t j = i;
        while (j < n && chring__bucket(s, chring__pos(flat, j)) >> s->chunk_shift == c)
            j++;
        struct chring_chunk *k = chring__chunk_alloc(j - i, s->chunk_shift, s->owner_w);
        if (k == NULL)
            goto fail;
        w->made[w->nmade++] = k;
        memcpy(k->pos, (const uint64_t *)flat->pos + i, (j - i) * sizeof(uint64_t));
        memcpy(k->owner, flat->owner + i * flat->owner_w, (j - i) * flat->owner_w);
        chring__chunk_finish(s, c, k);
        s->chunks[c].c = k;
        s->chunks[c].first = i;
        i = j;
    }
    s->chunks[s->nchunks].c = NULL;
    s->chunks[s->nchunks].first = n;
    chring__chunk_dir(s);
    /* What flat replaced (a publish from a chunked snapshot laid out anew) s replaces. */
    for (size_t k = 0; k < ngone; k++)
        w->gone[w->ngone++] = flat->swap->gone[k];
    chring__snap_discard(flat);
    *err = 0;
    return s;
fail:
    if (s != NULL)
        chring__snap_discard(s); /* frees the chunks made so far */
    else
        chring__chunk_swap_free(w, true);
    *err = -ENOMEM;
    return NULL;
}

chring_snap_t *chring__snap_build(struct chring_blocks *blocks, const struct chring_prof *prof,
                                  const chring_snap_t *prev, chring_member_t *const *members,
                                  const uint32_t *weights, size_t nmembers, int *err)
{
    uint64_t total_weight = 0;
    for (size_t j = 0; j < nmembers; j++)
        total_weight += weights[j];

    /* A profile that counts points for the whole membership does so first (scratch). */
    uint32_t *counts = NULL;
    if (prof->desc->counts != NULL && nmembers > 0) {
        counts = chring__calloc(nmembers, sizeof *counts);
        if (counts == NULL) {
            *err = -ENOMEM;
            return NULL;
        }
        prof->desc->counts(prof, weights, nmembers, counts);
    }

    /* Point counts, checked against the limits before anything is allocated. */
    uint64_t raw_points = 0;
    for (size_t j = 0; j < nmembers; j++) {
        uint64_t p = counts != NULL ? counts[j]
                                    : prof->desc->points(prof, weights[j], nmembers, total_weight);
        raw_points += p;
        if (p > CHRING_POINTS_MAX || raw_points > CHRING_RING_POINTS_MAX) {
            chring__free(counts);
            *err = -E2BIG;
            return NULL;
        }
    }

    chring_snap_t *s;
    if (prof->desc->mergeable && prev->npoints > 0)
        s = chring__snap_merge(blocks, prof, prev, members, weights, nmembers, total_weight, err);
    else
        s = build_full(blocks, prof, members, weights, counts, nmembers, total_weight,
                       (size_t)raw_points, err);
    chring__free(counts);
    /* A large ring of the default profile is laid out in chunks (chunk.c), keeping the chunk
     * geometry of a chunked prev while the ring stays in its band. */
    if (s != NULL && s->chunks == NULL && chring__chunk_eligible(prof, s->npoints, s->nslots)) {
        chring_snap_t *k = chunkify(blocks, s, prev->chunks != NULL ? prev->nbuckets : 0, err);
        if (k == NULL)
            chring__snap_discard(s);
        s = k;
    }
    return s;
}
