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
 * fast).  Above, the ring has left the caches and memory counts: 1.5 buckets per point (6
 * bytes; about 51 % of the buckets empty, where a lookup reads one entry), and the previous
 * snapshot's count while it stays within 1.35 to 1.65 per point, so that a publish can shift the
 * index instead of building it.  Measured against the 2.1 per point of before, and 1.0, 0.7 and
 * 0.5, the builds alternated (docs/bench.md §11d): at 1.5 lookups at 100,000 x 16 were as fast
 * (chring-bench-scale and a probe) and haproxy's at 10,000 x 160 faster (the probe), and a
 * publish at 100,000 x 16 no slower; fewer buckets cost chring-bench-scale's throughput at
 * 100,000 x 16 a median of 13 to 20 % (more keys read their points, which an empty bucket's
 * owner entry spares).  At least 2, at most 2^width (no finer than the positions) and 2^24
 * (a 64 MiB index would leave every cache). */
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

/* Whether empty buckets name their owner: only on rings of more than half a million points,
 * which have left the caches, where a lookup that reads no point saves one or two dependent
 * misses; on smaller rings the branch on an entry kind set for a third to a half of the buckets
 * costs more than the loads it saves (measured with one-owner flags at 1000 x 160: 20 % slower
 * in throughput).  Also: the profile's owner must be the first point at or after a key (not
 * haproxy's nearest point nor varnish's last point for keys above the top), and every point
 * index and slot must leave the kind bit free. */
bool chring__index_slots(const chring_snap_t *s)
{
    return !s->prof.desc->nearest && !s->prof.desc->varnish_start &&
           s->npoints > ((size_t)1 << 19) && s->npoints < CHRING_INDEX_POINT &&
           s->nslots < CHRING_INDEX_POINT;
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

/* An empty bucket b whose first point after it is point `first` of bucket nb (nbuckets if
 * none, wrapping to point 0) names that point's owner when nb is within reach, so that a search
 * from b finds a point-naming entry within CHRING_INDEX_REACH loads. */
static uint32_t empty_entry(const chring_snap_t *s, size_t b, size_t nb, size_t first, bool slots)
{
    if (slots && nb - b <= CHRING_INDEX_REACH)
        return CHRING_INDEX_SLOT | chring__owner(s, first == s->npoints ? 0 : first);
    return (uint32_t)first;
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
    bool slots = chring__index_slots(s);
    size_t i = chring__pos_search(s, 0, s->npoints, chring__bucket_start(s, b0));
    for (size_t b = b0; b <= b1; b++) {
        while (i < s->npoints && chring__bucket(s, chring__pos(s, i)) < b)
            i++;
        size_t nb = i < s->npoints ? chring__bucket(s, chring__pos(s, i)) : buckets;
        s->index[b] = nb == b ? (uint32_t)i : empty_entry(s, b, nb, i, slots);
    }
}

/* index[b] = first point whose top k bits are >= b, with a histogram and a prefix sum; then,
 * where the snapshot takes them, the empty buckets' owners, from the last bucket back (bucket b
 * is empty when its first point is the next bucket's). */
void chring__index_build(chring_snap_t *s)
{
    for (unsigned k = 0; k < CHRING_SENTINELS; k++)
        chring__pos_set(s, s->npoints + k, UINT64_MAX); /* the search's sentinels */
    if (s->lines != NULL) {
        lines_build(s);
        return;
    }
    size_t buckets = s->nbuckets;
    uint32_t *index = s->index;
    memset(index, 0, (buckets + 1) * sizeof *index);
    for (size_t i = 0; i < s->npoints; i++)
        index[chring__bucket(s, chring__pos(s, i)) + 1]++;
    for (size_t b = 0; b < buckets; b++)
        index[b + 1] += index[b];
    if (!chring__index_slots(s))
        return;
    size_t nb = buckets;            /* the next bucket that holds a point */
    uint32_t next = index[buckets]; /* the first point of bucket b + 1 */
    for (size_t b = buckets; b-- > 0;) {
        uint32_t first = index[b];
        if (first != next)
            nb = b;
        else
            index[b] = empty_entry(s, b, nb, first, true);
        next = first;
    }
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
    const uint32_t *src = prev->index;
    uint32_t *dst = s->index;
    struct shift_runs w = {added, nadded, removed, nremoved, 0, 0, 0};
    for (size_t b = 0, next;; shift_runs_pass(s, &w, next)) {
        next = shift_runs_end(s, &w);
        for (; b < next; b++) /* an entry naming a slot stays: mask 0 for it */
            dst[b] = src[b] + (w.delta & ((src[b] >> 31) - 1u));
        if (next == s->nbuckets + 1)
            break;
    }
}
