/* Sorting points and the prefix-bucket index that makes a lookup one index load and a short scan.
 * SPDX-License-Identifier: MIT */
#include "internal.h"

/* Stable LSD radix sort of (pos, owner) pairs by pos, 8 bits a pass; passes whose byte is the
 * same for every key are skipped (the low 32 bits of a 32-bit profile's shifted positions).
 * Stability keeps the generation order (member rank) among equal positions, which is the tie
 * rule of docs/design.md §1.  The result ends in (pos, owner); (tpos, towner) is scratch of the
 * same size. */
void chring__sort_points(size_t n, uint64_t *pos, uint32_t *owner, uint64_t *tpos, uint32_t *towner)
{
    uint64_t *src_p = pos, *dst_p = tpos;
    uint32_t *src_o = owner, *dst_o = towner;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        size_t count[256] = {0};
        for (size_t i = 0; i < n; i++)
            count[(src_p[i] >> shift) & 0xff]++;
        bool skip = false;
        for (unsigned b = 0; b < 256; b++)
            if (count[b] == n)
                skip = true;
        if (skip)
            continue;
        size_t sum = 0;
        for (unsigned b = 0; b < 256; b++) {
            size_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) {
            size_t at = count[(src_p[i] >> shift) & 0xff]++;
            dst_p[at] = src_p[i];
            dst_o[at] = src_o[i];
        }
        uint64_t *tp = src_p;
        src_p = dst_p;
        dst_p = tp;
        uint32_t *to = src_o;
        src_o = dst_o;
        dst_o = to;
    }
    if (src_p != pos) {
        memcpy(pos, src_p, n * sizeof *pos);
        memcpy(owner, src_o, n * sizeof *owner);
    }
}

/* Bits of the prefix index for n points: the largest k with 2^k <= 3n, so 1.5 to 3 buckets per
 * point: 6 to 12 bytes per point of index beside the 12 bytes of position and owner; at least
 * 1, at most the profile's width and 24 (a 64 MiB index would leave every cache). */
unsigned chring__index_bits(size_t n, unsigned width)
{
    unsigned k = 0;
    while (k < 63 && ((size_t)2 << k) <= 3 * n)
        k++;
    /* Above half a million points the ring has left the caches anyway and memory counts: at
     * most 2.5 buckets (10 bytes of index) per point, which keeps a 10,000 x 160 ring within 24
     * bytes per point in all. */
    if (n > ((size_t)1 << 19) && ((size_t)1 << k) > n / 2 * 5)
        k--;
    if (k < 1)
        k = 1;
    if (k > width)
        k = width;
    if (k > 24)
        k = 24;
    return k;
}

/* Whether the snapshot gets one-owner flags: only rings of more than half a million points,
 * which have left the caches, where a lookup that reads no position saves a dependent miss
 * (measured at 10,000 x 160: dependent lookups 17 % faster); on smaller rings the branch on a
 * flag set for about half the buckets costs more than the load it saves (1000 x 160: 20 %
 * slower in throughput), so it is never taken there.  Also: the profile's owner must be the
 * first point at or after a key, and every first-point index must leave the flag bit free. */
static bool flags_apply(const chring_snap_t *s)
{
    return !s->prof.desc->nearest && s->npoints > ((size_t)1 << 19) &&
           s->npoints < CHRING_INDEX_POINT;
}

/* A bucket has one owner for every key when the points it holds and the first point after it
 * (wrapping) all belong to one member: keys up to the bucket's first point go to that point,
 * keys between two of its points to the later one, keys after its last point to the next one.
 * An empty bucket always has one owner.  Its cost is the bucket's points. */
void chring__index_flags(chring_snap_t *s, size_t b0, size_t b1)
{
    size_t buckets = (size_t)1 << s->index_bits;
    if (b1 >= buckets)
        b1 = buckets - 1;
    bool apply = flags_apply(s);
    for (size_t b = b0; b <= b1; b++) {
        uint32_t first = s->index[b] & CHRING_INDEX_POINT;
        uint32_t end = s->index[b + 1] & CHRING_INDEX_POINT;
        bool one = apply;
        if (one) {
            uint32_t o = s->owner[first == s->npoints ? 0 : first];
            for (uint32_t j = first + 1; one && j <= end; j++)
                one = s->owner[j == s->npoints ? 0 : j] == o;
        }
        s->index[b] = first | (one ? CHRING_INDEX_ONE : 0);
    }
}

/* index[b] = first point whose top k bits are >= b, with a histogram and a prefix sum; then the
 * one-owner flags. */
void chring__index_build(chring_snap_t *s)
{
    s->pos[s->npoints] = UINT64_MAX; /* the search's sentinel */
    size_t buckets = (size_t)1 << s->index_bits;
    uint32_t *index = s->index;
    memset(index, 0, (buckets + 1) * sizeof *index);
    for (size_t i = 0; i < s->npoints; i++)
        index[(s->pos[i] >> (64 - s->index_bits)) + 1]++;
    for (size_t b = 0; b < buckets; b++)
        index[b + 1] += index[b];
    chring__index_flags(s, 0, buckets - 1);
}

/* The index of s from prev's when few points changed: bucket b starts after prev's start plus
 * the added points of lower buckets, minus the removed ones (both lists sorted by position).
 * Between two changed buckets the offset is constant, so the work is a vectorisable add over
 * runs of buckets; the caller checks that index_bits are the same. */
void chring__index_shift(chring_snap_t *s, const chring_snap_t *prev, const uint64_t *added,
                         size_t nadded, const uint64_t *removed, size_t nremoved)
{
    s->pos[s->npoints] = UINT64_MAX; /* the search's sentinel */
    const unsigned shift = 64 - s->index_bits;
    const size_t end = ((size_t)1 << s->index_bits) + 1;
    const uint32_t *src = prev->index;
    uint32_t *dst = s->index;
    uint32_t delta = 0; /* wraps for a net removal */
    size_t b = 0, ka = 0, kr = 0;
    for (;;) {
        /* Buckets up to the next changed one (inclusive) keep the current offset: a change in
         * bucket c moves the starts of buckets c + 1 and later. */
        size_t next = end;
        if (ka < nadded && (size_t)(added[ka] >> shift) + 1 < next)
            next = (size_t)(added[ka] >> shift) + 1;
        if (kr < nremoved && (size_t)(removed[kr] >> shift) + 1 < next)
            next = (size_t)(removed[kr] >> shift) + 1;
        for (; b < next; b++)
            dst[b] = src[b] + delta;
        if (next == end)
            break;
        while (ka < nadded && (size_t)(added[ka] >> shift) + 1 == next)
            delta++, ka++;
        while (kr < nremoved && (size_t)(removed[kr] >> shift) + 1 == next)
            delta--, kr++;
    }
}
