/* The merge path of a publish: the next snapshot from the current one, for profiles whose points
 * depend on (name, weight) alone.
 * SPDX-License-Identifier: MIT
 *
 * Points name their member by slot, and a member keeps its slot from snapshot to snapshot, so the
 * points of members whose object and weight are unchanged are copied from prev as they are: runs
 * of memcpy between the places where the (few) new points go, found by binary search.  New and
 * re-weighted members' points are generated and sorted; removed and re-weighted members' old
 * points are dropped while copying.  The index is shifted rather than rebuilt.  The phases:
 *
 *   1. plan:     a slot for every member, which keep their points, which old slots drop theirs;
 *   2. generate: the slot tables, and the fresh points, sorted;
 *   3. drop:     the old points that go, in ring order (found by position when few);
 *   4. weave:    old runs and fresh points into the new ring, in (position, name) order;
 *   5. index:    shifted from prev's, or rebuilt when much changed.
 *
 * Measured at 1000 x 160 in bench/ (chring-bench-publish; docs/bench.md). */
#include "index.h"
#include "member.h"

struct merge {
    const struct chring_prof *prof;
    const chring_snap_t *prev;
    chring_member_t *const *members;
    const uint32_t *weights;
    size_t nmembers;
    uint64_t total_weight;

    /* plan */
    uint32_t *slot_of;   /* the slot of members[j] */
    uint32_t *keeps;     /* 1: same object and weight as in prev, points copied */
    unsigned char *drop; /* per old slot: its old points go */
    uint32_t *gone_rank; /* the ranks in prev of the members whose old points go */
    size_t kept, fresh, gone, ngone, nslots;

    /* generate / drop */
    uint64_t *fpos, *tpos; /* fresh points and sort scratch */
    uint32_t *fowner, *towner;
    uint64_t *removed; /* positions of the old points that go */
    size_t *dropped;   /* and their indices in prev */
    size_t ndropped;
};

static uint64_t points_of(const struct merge *g, size_t j)
{
    return g->prof->desc->points(g->prof, g->weights[j], g->nmembers, g->total_weight);
}

/* 1. Walks prev's members and the new ones together (both sorted by name). */
static void plan(struct merge *g)
{
    const chring_snap_t *prev = g->prev;
    size_t ia = 0, free_cursor = 0;
    g->kept = g->fresh = g->gone = g->ngone = 0;
    g->nslots = prev->nslots;
    memset(g->drop, 0, prev->nslots);
    for (size_t j = 0; j <= g->nmembers; j++) {
        /* Old members ordered before this one are removed.  The same member in both is the
         * common case: the pointers say so without reading either name. */
        while (ia < prev->nmembers &&
               (j == g->nmembers ||
                (prev->members[ia] != g->members[j] &&
                 chring__name_cmp(prev->members[ia]->name, prev->members[ia]->name_len,
                                  g->members[j]->name, g->members[j]->name_len) < 0))) {
            g->drop[prev->member_slot[ia]] = 1;
            g->gone += prev->member_points[ia];
            g->gone_rank[g->ngone++] = (uint32_t)ia;
            ia++;
        }
        if (j == g->nmembers)
            break;
        g->keeps[j] = 0;
        if (ia < prev->nmembers && prev->members[ia] == g->members[j]) {
            g->slot_of[j] = prev->member_slot[ia];
            if (prev->weights[ia] == g->weights[j]) {
                g->keeps[j] = 1;
                g->kept += prev->member_points[ia];
            } else {
                g->drop[g->slot_of[j]] = 1; /* re-weighted: its points are generated afresh */
                g->gone += prev->member_points[ia];
                g->gone_rank[g->ngone++] = (uint32_t)ia;
                g->fresh += (size_t)points_of(g, j);
            }
            ia++;
            continue;
        }
        /* A new member takes a slot no member of prev holds, else a new one.  (A slot freed in
         * this batch is not reused: its old points are still being dropped by slot.) */
        while (free_cursor < prev->nslots && prev->slot_member[free_cursor] != NULL)
            free_cursor++;
        g->slot_of[j] =
            free_cursor < prev->nslots ? (uint32_t)free_cursor++ : (uint32_t)g->nslots++;
        g->fresh += (size_t)points_of(g, j);
    }
}

/* 2. Fills the slot tables of s and generates the fresh points (shifted), then sorts them.
 * Generated in name order, so the stable sort leaves equal positions in name order. */
static void generate(struct merge *g, chring_snap_t *s)
{
    for (size_t k = 0; k < g->nslots; k++) {
        s->slot_member[k] = NULL;
        s->slot_weight[k] = 0;
        s->slot_rank[k] = UINT32_MAX;
    }
    size_t at = 0;
    for (size_t j = 0; j < g->nmembers; j++) {
        uint32_t slot = g->slot_of[j];
        s->member_slot[j] = slot;
        s->slot_member[slot] = g->members[j];
        s->slot_weight[slot] = g->weights[j];
        s->slot_rank[slot] = (uint32_t)j;
        if (g->keeps[j]) {
            s->member_points[j] = g->prev->member_points[g->prev->slot_rank[slot]];
            continue;
        }
        uint64_t count = points_of(g, j);
        g->prof->desc->positions(g->prof, g->members[j]->name, g->members[j]->name_len, count,
                                 g->fpos + at);
        for (uint64_t i = 0; i < count; i++) {
            g->fpos[at + i] <<= g->prof->shift;
            g->fowner[at + i] = slot;
        }
        s->member_points[j] = (uint32_t)count;
        at += count;
    }
    chring__sort_points(g->fresh, g->fpos, g->fowner, g->tpos, g->towner);
}

/* 3a. The old points that go, found from their positions: the members that lose them are few,
 * and their old points are a pure function of (name, old weight), generated again, sorted, and
 * looked up in prev by binary search; every point of prev at such a position whose slot drops
 * is listed, in ring order.  False (nothing listed) when the points found are not exactly the
 * gone ones (a custom hash that is not a function of its input), or without memory: the caller
 * scans instead. */
static bool find_dropped(struct merge *g)
{
    const chring_snap_t *prev = g->prev;
    size_t n = g->gone;
    char *scratch = chring__alloc(n * 2 * (sizeof(uint64_t) + sizeof(uint32_t)));
    if (scratch == NULL)
        return false;
    uint64_t *gpos = (uint64_t *)(void *)scratch, *tpos = gpos + n;
    uint32_t *gslot = (uint32_t *)(void *)(tpos + n), *tslot = gslot + n;
    size_t at = 0;
    for (size_t k = 0; k < g->ngone; k++) {
        size_t ia = g->gone_rank[k];
        const chring_member_t *m = prev->members[ia];
        size_t count = prev->member_points[ia];
        g->prof->desc->positions(g->prof, m->name, m->name_len, count, gpos + at);
        for (size_t i = 0; i < count; i++) {
            gpos[at + i] <<= g->prof->shift;
            gslot[at + i] = prev->member_slot[ia];
        }
        at += count;
    }
    chring__sort_points(n, gpos, gslot, tpos, tslot);
    size_t found = 0, cursor = 0;
    bool exact = true;
    for (size_t k = 0; k < n && exact; k++) {
        if (k > 0 && gpos[k] == gpos[k - 1])
            continue; /* the run of points at this position was listed once */
        size_t i = chring__pos_search(prev, cursor, prev->npoints, gpos[k]);
        for (; i < prev->npoints && chring__pos(prev, i) == gpos[k]; i++) {
            if (!g->drop[chring__owner(prev, i)])
                continue;
            if (found == n) {
                exact = false;
                break;
            }
            g->removed[found] = chring__pos(prev, i);
            g->dropped[found++] = i;
        }
        cursor = i;
    }
    chring__free(scratch);
    if (!exact || found != n)
        return false;
    g->ndropped = found;
    return true;
}

/* 3. The old points that go, in order: found by position when they are few (3a), else by a
 * scan of the owners (the branch is rarely taken). */
static void list_dropped(struct merge *g)
{
    const chring_snap_t *prev = g->prev;
    g->ndropped = 0;
    if (g->gone > 0 && g->gone * 64 <= prev->npoints && find_dropped(g))
        return;
    for (size_t i = 0; g->gone > 0 && i < prev->npoints; i++) {
        if (g->drop[chring__owner(prev, i)]) {
            g->removed[g->ndropped] = chring__pos(prev, i);
            g->dropped[g->ndropped++] = i;
        }
    }
}

/* The owners of n points of prev from point from, to s from point to: the bytes as they are
 * while the two snapshots' owners are as wide (the usual case: the width changes only when the
 * slots cross 65,536 or 2^24), else slot by slot. */
static void copy_owners(chring_snap_t *s, size_t to, const chring_snap_t *prev, size_t from,
                        size_t n)
{
    if (s->owner_w == prev->owner_w) {
        memcpy(s->owner + to * s->owner_w, prev->owner + from * prev->owner_w, n * s->owner_w);
        return;
    }
    for (size_t i = 0; i < n; i++)
        chring__owner_set(s, to + i, chring__owner(prev, from + i));
}

/* 4. Before each fresh point, the old points ordered before it (by position, then member name)
 * are copied as runs between the dropped ones; then the fresh point. */
static void weave(struct merge *g, chring_snap_t *s)
{
    const chring_snap_t *prev = g->prev;
    size_t out = 0, cursor = 0, kd = 0;
    for (size_t k = 0; k <= g->fresh; k++) {
        size_t end = prev->npoints;
        if (k < g->fresh) {
            /* The first old point ordered after (fpos[k], its member's name). */
            size_t lo = chring__pos_search(prev, cursor, prev->npoints, g->fpos[k]);
            while (lo < prev->npoints && chring__pos(prev, lo) == g->fpos[k] &&
                   (g->drop[chring__owner(prev, lo)] ||
                    s->slot_rank[chring__owner(prev, lo)] < s->slot_rank[g->fowner[k]]))
                lo++;
            end = lo;
        }
        while (cursor < end) {
            size_t stop = kd < g->ndropped && g->dropped[kd] < end ? g->dropped[kd] : end;
            memcpy((char *)s->pos + out * s->pos_w, (const char *)prev->pos + cursor * s->pos_w,
                   (stop - cursor) * s->pos_w); /* one profile: one width */
            copy_owners(s, out, prev, cursor, stop - cursor);
            out += stop - cursor;
            cursor = stop;
            if (stop < end) {
                cursor++; /* skip the dropped point */
                kd++;
            }
        }
        if (k < g->fresh) {
            chring__pos_set(s, out, g->fpos[k]);
            chring__owner_set(s, out++, g->fowner[k]);
        }
    }
}

/* 5b. After a shift, the entries (index.c) of the buckets a changed point touches: a point
 * added or dropped at position p can change its own bucket and the buckets before it back to the
 * bucket of the point before p in the new ring (whether they are empty, the first point after
 * them, its owner, how far it is).  Every other bucket keeps its points and the same first point
 * after it, which the shift moved.  The index is half updated here, so the points are searched
 * without it. */
static void fix_index(chring_snap_t *s, const uint64_t *changed, size_t n)
{
    if (s->npoints == 0)
        return;
    const size_t last = s->nbuckets - 1;
    for (size_t k = 0; k < n; k++) {
        uint64_t p = changed[k];
        size_t at = chring__pos_search(s, 0, s->npoints, p); /* first >= p, wrapping */
        if (at == s->npoints)
            at = 0;
        size_t before = (at == 0 ? s->npoints : at) - 1;
        size_t b0 = chring__bucket(s, chring__pos(s, before)), b1 = chring__bucket(s, p);
        if (chring__pos(s, before) >= p) { /* wrapped: from the ring's last point round to p */
            chring__index_encode(s, b0, last);
            b0 = 0;
        }
        chring__index_encode(s, b0, b1);
    }
}

/* 4', chunked (chunk.c): the weave of one chunk, old chunk o (whose ring index is `base`) with
 * the fresh points [kf, kf_end) and without the dropped points [kd, kd_end), into chunk k:
 * weave's rule on the chunk's arrays.  A position belongs to one bucket, so the points at equal
 * positions are all in one chunk. */
static void weave_chunk(const struct merge *g, const chring_snap_t *s, const struct chring_chunk *o,
                        size_t base, size_t kf, size_t kf_end, size_t kd, size_t kd_end,
                        struct chring_chunk *k)
{
    size_t w = s->owner_w, out = 0, cursor = 0, n = o->npoints;
    for (size_t f = kf; f <= kf_end; f++) {
        size_t end = n;
        if (f < kf_end) {
            size_t lo = chring__pos_search_at(o->pos, 8, cursor, n, g->fpos[f]);
            while (lo < n && o->pos[lo] == g->fpos[f]) {
                uint32_t slot = chring__owner_in(o->owner, (uint32_t)w, s->owner_mask, lo);
                if (!g->drop[slot] && s->slot_rank[slot] >= s->slot_rank[g->fowner[f]])
                    break;
                lo++;
            }
            end = lo;
        }
        while (cursor < end) {
            size_t stop = kd < kd_end && g->dropped[kd] - base < end ? g->dropped[kd] - base : end;
            memcpy(k->pos + out, o->pos + cursor, (stop - cursor) * sizeof(uint64_t));
            memcpy(k->owner + out * w, o->owner + cursor * w, (stop - cursor) * w);
            out += stop - cursor;
            cursor = stop;
            if (stop < end) {
                cursor++; /* skip the dropped point */
                kd++;
            }
        }
        if (f < kf_end) {
            k->pos[out] = g->fpos[f];
            uint32_t slot = g->fowner[f];
            for (size_t b = 0; b < w; b++)
                k->owner[out * w + b] = (unsigned char)(slot >> (8 * b));
            out++;
        }
    }
}

/* The bucket index of chunk k from old chunk o's: first[b] counts the points in the buckets below
 * b, so each fresh point adds one to the entries after its bucket and each dropped one takes one
 * away (a few points a chunk: a few runs of adds, where counting every point again cost more
 * than the rest of the publish). */
static void move_first(const struct merge *g, const chring_snap_t *s, size_t c,
                       const struct chring_chunk *o, size_t base, size_t kf, size_t kf_end,
                       size_t kd, size_t kd_end, struct chring_chunk *k)
{
    size_t buckets = (size_t)1 << s->chunk_shift, b0 = c << s->chunk_shift;
    memcpy(k->first, o->first, (buckets + 1) * sizeof(uint32_t));
    for (size_t f = kf; f < kf_end; f++)
        for (size_t lb = chring__bucket(s, g->fpos[f]) - b0 + 1; lb <= buckets; lb++)
            k->first[lb]++;
    for (size_t d = kd; d < kd_end; d++)
        for (size_t lb = chring__bucket(s, o->pos[g->dropped[d] - base]) - b0 + 1; lb <= buckets;
             lb++)
            k->first[lb]--;
}

/* 4' and 5', chunked: s's table from prev's, a new chunk for each chunk a fresh or dropped
 * point falls in, every other shared; what was made and replaced listed in s->swap.  0 or
 * -ENOMEM. */
static int weave_chunks(struct merge *g, chring_snap_t *s)
{
    const chring_snap_t *prev = g->prev;
    size_t touched = g->fresh + g->ndropped;
    if (touched > s->nchunks)
        touched = s->nchunks;
    s->swap = chring__chunk_swap_new(touched, touched);
    if (s->swap == NULL)
        return -ENOMEM;
    size_t kf = 0, kd = 0, out = 0;
    for (size_t c = 0; c < s->nchunks; c++) {
        const struct chring_chunk *o = prev->chunks[c].c;
        size_t base = prev->chunks[c].first, kf_end = kf, kd_end = kd;
        while (kf_end < g->fresh && chring__bucket(s, g->fpos[kf_end]) >> s->chunk_shift == c)
            kf_end++;
        while (kd_end < g->ndropped && g->dropped[kd_end] < base + o->npoints)
            kd_end++;
        s->chunks[c].first = out;
        if (kf_end == kf && kd_end == kd) {
            s->chunks[c].c = o;
            out += o->npoints;
            continue;
        }
        struct chring_chunk *k = chring__chunk_alloc(o->npoints + (kf_end - kf) - (kd_end - kd),
                                                     s->chunk_shift, s->owner_w);
        if (k == NULL)
            return -ENOMEM;
        s->swap->made[s->swap->nmade++] = k;
        s->swap->gone[s->swap->ngone++] = (struct chring_chunk *)(uintptr_t)o;
        weave_chunk(g, s, o, base, kf, kf_end, kd, kd_end, k);
        chring__chunk_seal(k);
        move_first(g, s, c, o, base, kf, kf_end, kd, kd_end, k);
        s->chunks[c].c = k;
        out += k->npoints;
        kf = kf_end;
        kd = kd_end;
    }
    s->chunks[s->nchunks].c = NULL;
    s->chunks[s->nchunks].first = out;
    chring__chunk_dir(s);
    return 0;
}

/* Whether a publish from chunked prev can keep its chunks: the new ring is chunked too, in the
 * same buckets and with owner slots as wide, and the change is small (else every chunk would be
 * copied anyway, and the ring is laid out anew: chring__chunk_expand, then a flat merge). */
static bool keeps_chunks(const struct merge *g, size_t npoints)
{
    const chring_snap_t *prev = g->prev;
    return chring__chunk_eligible(g->prof, npoints, g->nslots) &&
           chring__chunk_buckets(npoints, prev->nbuckets) == prev->nbuckets &&
           chring__owner_width(g->nslots) == prev->owner_w && g->fresh + g->gone < npoints / 4;
}

chring_snap_t *chring__snap_merge(struct chring_blocks *blocks, const struct chring_prof *prof,
                                  const chring_snap_t *prev, chring_member_t *const *members,
                                  const uint32_t *weights, size_t nmembers, uint64_t total_weight,
                                  int *err)
{
    struct merge g = {.prof = prof,
                      .prev = prev,
                      .members = members,
                      .weights = weights,
                      .nmembers = nmembers,
                      .total_weight = total_weight};
    /* Scratch of the plan: the slots, the keep flags, the ranks that lose their points, the
     * drop flags. */
    size_t head = (nmembers * 2 + prev->nmembers) * sizeof(uint32_t) + prev->nslots;
    g.slot_of = chring__alloc(head ? head : 1);
    if (g.slot_of == NULL) {
        *err = -ENOMEM;
        return NULL;
    }
    g.keeps = g.slot_of + nmembers;
    g.gone_rank = g.keeps + nmembers;
    g.drop = (unsigned char *)(g.gone_rank + prev->nmembers);
    plan(&g);

    size_t npoints = g.kept + g.fresh;
    /* A chunked prev: its chunks kept, or a flat view of it to merge from (chunk.c). */
    const chring_snap_t *chunked = prev->chunks != NULL ? prev : NULL;
    bool chunks = chunked != NULL && keeps_chunks(&g, npoints);
    chring_snap_t view;
    if (chunked != NULL && !chunks) {
        if (chring__chunk_expand(chunked, &view) != 0) {
            chring__free(g.slot_of);
            *err = -ENOMEM;
            return NULL;
        }
        g.prev = prev = &view;
    }
    chring_snap_t *s =
        chunks ? chring__snap_alloc_chunked(blocks, prof, members, weights, nmembers, g.nslots,
                                            total_weight, npoints, prev->nbuckets)
               : chring__snap_alloc(blocks, prof, members, weights, nmembers, g.nslots,
                                    total_weight, npoints, prev->nbuckets);
    /* Scratch of the points: two runs of (pos, owner) for sorting the fresh points; the
     * positions and indices of the old points that go.  64-bit arrays first. */
    char *scratch = s == NULL ? NULL
                              : chring__alloc(g.fresh * 2 * (sizeof(uint64_t) + sizeof(uint32_t)) +
                                              g.gone * (sizeof(uint64_t) + sizeof(size_t)) + 1);
    if (s != NULL && chunked != NULL && !chunks) {
        /* Laid out anew: every chunk of prev goes with prev. */
        s->swap = chring__chunk_swap_new(0, chunked->nchunks);
        for (size_t c = 0; s->swap != NULL && c < chunked->nchunks; c++)
            s->swap->gone[s->swap->ngone++] = (struct chring_chunk *)(uintptr_t)chunked->chunks[c].c;
    }
    if (s == NULL || scratch == NULL || (chunked != NULL && !chunks && s->swap == NULL)) {
        if (s != NULL)
            chring__snap_discard(s);
        chring__free(scratch);
        chring__free(g.slot_of);
        if (chunked != NULL && !chunks)
            chring__chunk_expand_free(&view);
        *err = -ENOMEM;
        return NULL;
    }
    g.fpos = (uint64_t *)(void *)scratch;
    g.tpos = g.fpos + g.fresh;
    g.removed = g.tpos + g.fresh;
    g.dropped = (size_t *)(void *)(g.removed + g.gone);
    g.fowner = (uint32_t *)(void *)(g.dropped + g.gone);
    g.towner = g.fowner + g.fresh;

    generate(&g, s);
    list_dropped(&g);
    if (chunks) {
        *err = weave_chunks(&g, s);
        chring__free(scratch);
        chring__free(g.slot_of);
        if (*err != 0) {
            chring__snap_discard(s);
            return NULL;
        }
        return s;
    }
    weave(&g, s);
    if (s->nbuckets == prev->nbuckets && (s->lines == NULL) == (prev->lines == NULL) &&
        (s->index_off == NULL) == (prev->index_off == NULL) &&
        g.fresh + g.gone < npoints / 4) {
        chring__index_shift(s, prev, g.fpos, g.fresh, g.removed, g.ndropped);
        fix_index(s, g.fpos, g.fresh);
        fix_index(s, g.removed, g.ndropped);
    } else {
        chring__index_build(s);
    }

    chring__free(scratch);
    chring__free(g.slot_of);
    if (chunked != NULL)
        chring__chunk_expand_free(&view);
    *err = 0;
    return s;
}
