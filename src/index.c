/* The snapshot index, built: the prefix-bucket index that makes a lookup one entry load and a
 * short scan, and the line index that makes it one cache line; which rings take which, their
 * geometry (bucket and line counts), the entries and lines encoded from the sorted points, each
 * built whole or shifted from the previous snapshot's (docs/design.md §4.1).  Their picture,
 * invariants, geometry and search are index.h's.
 * SPDX-License-Identifier: MIT */
#include "index.h"

/* Buckets of the prefix index for n points.  Up to half a million points: 2^k for the largest
 * k with 2^k <= 2.5n, so 1.25 to 2.5 buckets per point (5 to 10 bytes of index beside the 12 of
 * position and owner; with 3n, 10 x 160 took 25.6 bytes per point in all, and 2.5n measured as
 * fast).  Above, the ring has left the caches and memory counts: 1.5 buckets per point (about
 * 51 % of the buckets empty, where a lookup reads no point; 1.6 bytes a point packed), and the
 * previous snapshot's count while it stays within 1.35 to 1.65 per point, so that a publish can
 * shift the index instead of building it.  Measured with 32-bit entries against the 2.1 per
 * point of before, and 1.0, 0.7 and 0.5, the builds alternated (docs/bench.md §11d): at 1.5
 * lookups at 100,000 x 16 were as fast (chring-bench-scale and a probe) and haproxy's at 10,000
 * x 160 faster (the probe), and a publish at 100,000 x 16 no slower; fewer buckets cost
 * chring-bench-scale's throughput at 100,000 x 16 a median of 13 to 20 % (more keys read their
 * points, which an empty bucket spares).  At least 2, at most 2^width (no finer than the
 * positions) and 2^24 (a 64 MiB index would leave every cache). */
size_t chring__index_buckets(size_t n, unsigned width, size_t prev_buckets)
{
    size_t cap = (size_t)1 << (width < 24 ? width : 24);
    size_t nb;
    if (n <= ((size_t)1 << 19)) {
        unsigned k = 0;
        while (((size_t)2 << k) <= 5 * n / 2)
            k++;
        nb = (size_t)1 << k;
    } else if (prev_buckets >= n / 20 * 27 && prev_buckets <= n / 20 * 33) {
        nb = prev_buckets;
    } else {
        nb = n / 2 * 3;
    }
    if (nb > cap)
        nb = cap;
    return nb < 2 ? 2 : nb;
}

/* The packed bucket index (index.h) on rings of more than half a million points, which have
 * left the caches: 1.6 bytes a point where the flat index takes 6, so that 100,000 x 16 fits in
 * 24 bytes a point (docs/design.md §4.1).  Positions of 32 bits or more only: a 16-bit profile's
 * buckets are capped at 2^16 and past 2^19 points a group of them would hold hundreds of points,
 * each offset an escape.  Fewer than 2^32 points, the range of a base. */
bool chring__index_packed(const struct chring_prof *prof, size_t npoints)
{
    return prof->bits >= 32 && npoints > CHRING_PACK_MIN && npoints < UINT32_MAX;
}

size_t chring__index_bytes(size_t nbuckets, bool packed)
{
    if (!packed)
        return (nbuckets + 1) * sizeof(uint32_t);
    return ((nbuckets >> CHRING_PACK_SHIFT) + 2) * sizeof(uint32_t) + nbuckets + 1;
}

/* F(b) past an escape: at least 255 points after the group's base, at most the next group's
 * (base[G + 1] = n for the last group); F(nbuckets) is npoints. */
size_t chring__pack_far(const chring_snap_t *s, size_t b)
{
    if (b >= s->nbuckets)
        return s->npoints;
    size_t g = b >> CHRING_PACK_SHIFT;
    return chring__pos_search(s, (size_t)s->index[g] + CHRING_PACK_FAR, s->index[g + 1],
                              chring__bucket_start(s, b));
}

/* The line index (index.h) where a key's owner is the first point at or after it,
 * from 65,536 points on (1000 x 160 and up): there a lookup of the bucket index reads an entry,
 * then the bucket's points and their owners, two misses in a row for a key whose bucket holds a
 * point once the ring has left the core's caches, where a line is one miss.  Measured here
 * (docs/bench.md §10), one key at a time through chring_snap_lookup, old and new alternated:
 * 10,000 x 160 136-175 ns before and 92-99 after in throughput, 252-274 and 174-177 in latency;
 * smaller rings stay in the caches and keep the bucket index (unchanged there).  Points
 * with positions of 32 bits or more only (a 16-bit profile's points share offsets), fewer than
 * 2^31 points, slots that fit an entry. */
bool chring__index_lines(const struct chring_prof *prof, size_t npoints, size_t nslots)
{
    return !prof->desc->nearest && !prof->desc->varnish_start && prof->bits >= 32 &&
           npoints >= CHRING_LINES_MIN && npoints < CHRING_LINE_FULL && nslots <= CHRING_LINE_PAD;
}

size_t chring__index_line_count(size_t n, size_t prev_lines)
{
    if (prev_lines >= n / 9 && prev_lines <= n / 7 && prev_lines >= 2)
        return prev_lines;
    size_t nl = n / CHRING_LINE_LOAD;
    return nl < 2 ? 2 : nl;
}

/* Line b from its first point i (the first whose line is b or later): its points while they
 * fit, else CHRING_LINE_FULL; the slots after them name the owner of the first point after the
 * line (wrapping).  Returns the first point after the line. */
static size_t line_encode(chring_snap_t *s, size_t b, size_t i)
{
    struct chring_line *l = &s->lines[b];
    size_t n = s->npoints, end = i;
    while (end < n && chring__bucket(s, chring__pos(s, end)) == b)
        end++;
    size_t count = end - i, listed = count <= CHRING_LINE_POINTS ? count : 0;
    l->first = (uint32_t)i | (count > CHRING_LINE_POINTS ? CHRING_LINE_FULL : 0);
    for (size_t e = 0; e < listed; e++) {
        l->off[e] = chring__line_off(s, chring__pos(s, i + e));
        l->slot[e] = (uint16_t)chring__owner(s, i + e);
    }
    uint16_t next = (uint16_t)chring__owner(s, end == n ? 0 : end);
    for (size_t e = listed; e < CHRING_LINE_ENTRIES; e++) {
        l->off[e] = CHRING_LINE_PAD;
        l->slot[e] = next;
    }
    return end;
}

/* The last line, after the ring's: its first is npoints (the end of the last line's points). */
static void line_end(chring_snap_t *s)
{
    struct chring_line *l = &s->lines[s->nbuckets];
    memset(l, 0xff, sizeof *l);
    l->first = (uint32_t)s->npoints;
}

static void lines_build(chring_snap_t *s)
{
    size_t i = 0;
    for (size_t b = 0; b < s->nbuckets; b++)
        i = line_encode(s, b, i);
    line_end(s);
}

/* Lines b0 to b1 from the points alone: what they said is not read. */
static void lines_encode(chring_snap_t *s, size_t b0, size_t b1)
{
    size_t i = chring__pos_search(s, 0, s->npoints, chring__bucket_start(s, b0));
    for (size_t b = b0; b <= b1; b++)
        i = line_encode(s, b, i);
}

/* The runs of a shift (chring__index_shift, lines_shift): the buckets up to the next changed one
 * (inclusive) keep the current offset delta, since a change in bucket c moves the starts of
 * buckets c + 1 and later; the changed points, added and removed, are sorted by position. */
struct shift_runs {
    const uint64_t *added;
    size_t nadded;
    const uint64_t *removed;
    size_t nremoved;
    size_t ka, kr;  /* the changes passed */
    uint32_t delta; /* added minus removed so far; wraps for a net removal */
};

/* The end of the current run: one past the next changed bucket, nbuckets + 1 if none is left. */
static size_t shift_runs_end(const chring_snap_t *s, const struct shift_runs *w)
{
    size_t next = s->nbuckets + 1;
    if (w->ka < w->nadded && chring__bucket(s, w->added[w->ka]) + 1 < next)
        next = chring__bucket(s, w->added[w->ka]) + 1;
    if (w->kr < w->nremoved && chring__bucket(s, w->removed[w->kr]) + 1 < next)
        next = chring__bucket(s, w->removed[w->kr]) + 1;
    return next;
}

/* Counts the changes of the bucket before next into the offset. */
static void shift_runs_pass(const chring_snap_t *s, struct shift_runs *w, size_t next)
{
    while (w->ka < w->nadded && chring__bucket(s, w->added[w->ka]) + 1 == next)
        w->delta++, w->ka++;
    while (w->kr < w->nremoved && chring__bucket(s, w->removed[w->kr]) + 1 == next)
        w->delta--, w->kr++;
}

/* As chring__index_shift: a line's points and slots stay (a member keeps its slot), its first
 * point moves by the points added to and removed from lines before it. */
static void lines_shift(chring_snap_t *s, const chring_snap_t *prev, const uint64_t *added,
                        size_t nadded, const uint64_t *removed, size_t nremoved)
{
    const struct chring_line *src = prev->lines;
    struct chring_line *dst = s->lines;
    struct shift_runs w = {added, nadded, removed, nremoved, 0, 0, 0};
    for (size_t b = 0, next;; shift_runs_pass(s, &w, next)) {
        next = shift_runs_end(s, &w);
        for (; b < next; b++) {
            dst[b] = src[b];
            dst[b].first =
                (src[b].first & CHRING_LINE_FULL) | ((src[b].first + w.delta) & ~CHRING_LINE_FULL);
        }
        if (next == s->nbuckets + 1)
            break;
    }
}

/* Groups g0 to g1 of a packed index from the points alone, bases and offsets (the invariant of
 * index.h); i is a point at or before the first of group g0. */
static void pack_encode(chring_snap_t *s, size_t g0, size_t g1, size_t i)
{
    const size_t n = s->npoints, nb = s->nbuckets;
    for (size_t g = g0; g <= g1; g++) {
        size_t b0 = g << CHRING_PACK_SHIFT, b1 = b0 + CHRING_PACK_GROUP - 1;
        if (b1 > nb)
            b1 = nb;
        size_t base = 0;
        for (size_t b = b0; b <= b1; b++) {
            while (i < n && chring__bucket(s, chring__pos(s, i)) < b)
                i++;
            if (b == b0)
                base = i, s->index[g] = (uint32_t)i;
            size_t off = i - base;
            s->index_off[b] = (uint8_t)(off < CHRING_PACK_FAR ? off : CHRING_PACK_FAR);
        }
    }
    if (g1 == nb >> CHRING_PACK_SHIFT)
        s->index[g1 + 1] = (uint32_t)n;
}

void chring__index_encode(chring_snap_t *s, size_t b0, size_t b1)
{
    const size_t buckets = s->nbuckets;
    if (b1 >= buckets)
        b1 = buckets - 1;
    if (s->lines != NULL) {
        lines_encode(s, b0, b1);
        return;
    }
    if (s->index_off != NULL) {
        size_t g0 = b0 >> CHRING_PACK_SHIFT, g1 = b1 >> CHRING_PACK_SHIFT;
        size_t i = chring__pos_search(s, 0, s->npoints,
                                      chring__bucket_start(s, g0 << CHRING_PACK_SHIFT));
        pack_encode(s, g0, g1, i);
        return;
    }
    size_t i = chring__pos_search(s, 0, s->npoints, chring__bucket_start(s, b0));
    for (size_t b = b0; b <= b1; b++) {
        while (i < s->npoints && chring__bucket(s, chring__pos(s, i)) < b)
            i++;
        s->index[b] = (uint32_t)i;
    }
}

/* Flat: index[b] = first point whose bucket is >= b, with a histogram and a prefix sum.
 * Packed: one pass over the buckets and the points. */
void chring__index_build(chring_snap_t *s)
{
    for (unsigned k = 0; k < CHRING_SENTINELS; k++)
        chring__pos_set(s, s->npoints + k, UINT64_MAX); /* the search's sentinels */
    if (s->lines != NULL) {
        lines_build(s);
        return;
    }
    size_t buckets = s->nbuckets;
    if (s->index_off != NULL) {
        pack_encode(s, 0, buckets >> CHRING_PACK_SHIFT, 0);
        return;
    }
    uint32_t *index = s->index;
    memset(index, 0, (buckets + 1) * sizeof *index);
    for (size_t i = 0; i < s->npoints; i++)
        index[chring__bucket(s, chring__pos(s, i)) + 1]++;
    for (size_t b = 0; b < buckets; b++)
        index[b + 1] += index[b];
}

/* As chring__index_shift for a packed index: the offsets copied, each base moved by the points
 * added to and removed from buckets before its group's first; the groups that hold a change are
 * then rewritten whole (chring__index_encode, from snap_merge.c's fix_index), and the others
 * keep their offsets, whose first points all moved alike. */
static void pack_shift(chring_snap_t *s, const chring_snap_t *prev, const uint64_t *added,
                       size_t nadded, const uint64_t *removed, size_t nremoved)
{
    size_t nb = s->nbuckets, last = nb >> CHRING_PACK_SHIFT;
    memcpy(s->index_off, prev->index_off, nb + 1);
    size_t ka = 0, kr = 0;
    uint32_t delta = 0; /* added minus removed so far; wraps for a net removal */
    for (size_t g = 0; g <= last; g++) {
        size_t b = g << CHRING_PACK_SHIFT;
        while (ka < nadded && chring__bucket(s, added[ka]) < b)
            delta++, ka++;
        while (kr < nremoved && chring__bucket(s, removed[kr]) < b)
            delta--, kr++;
        s->index[g] = prev->index[g] + delta;
    }
    s->index[last + 1] = (uint32_t)s->npoints;
}

/* The index of s from prev's when few points changed: bucket b starts after prev's start plus
 * the added points of lower buckets, minus the removed ones (both lists sorted by position).
 * Between two changed buckets the offset is constant, so the work is a vectorisable add over
 * runs of buckets; the caller checks that the bucket counts are the same. */
void chring__index_shift(chring_snap_t *s, const chring_snap_t *prev, const uint64_t *added,
                         size_t nadded, const uint64_t *removed, size_t nremoved)
{
    for (unsigned k = 0; k < CHRING_SENTINELS; k++)
        chring__pos_set(s, s->npoints + k, UINT64_MAX); /* the search's sentinels */
    if (s->lines != NULL) {
        lines_shift(s, prev, added, nadded, removed, nremoved);
        return;
    }
    if (s->index_off != NULL) {
        pack_shift(s, prev, added, nadded, removed, nremoved);
        return;
    }
    const uint32_t *src = prev->index;
    uint32_t *dst = s->index;
    struct shift_runs w = {added, nadded, removed, nremoved, 0, 0, 0};
    for (size_t b = 0, next;; shift_runs_pass(s, &w, next)) {
        next = shift_runs_end(s, &w);
        for (; b < next; b++)
            dst[b] = src[b] + w.delta;
        if (next == s->nbuckets + 1)
            break;
    }
}
