/* The snapshot index: how a key's position finds the first point at or after it without a search
 * of the whole ring.  Its two forms, their geometry, encoding and search are here; building and
 * shifting them from the previous snapshot's is index.c's (docs/design.md §4.1).
 * SPDX-License-Identifier: MIT
 *
 * Notation.  n = s->npoints, N = s->nbuckets (buckets, or lines), p[0 .. n) the sorted shifted
 * positions (chring__pos: s->pos holds 8 or 4 bytes a point), o[i] the slot of point i's member
 * (chring__owner: s->owner holds 2, 3 or 4 bytes a point), t(h) = h >> 32 and
 *
 *     P(h)    = t(h) * N                     (64 bits; grows strictly with t(h))
 *     line(h) = P(h) >> 32                   chring__bucket: the bucket or line of h, in [0, N)
 *     k(h)    = (P(h) mod 2^32) >> 16        chring__line_off: h's offset in its line, 16 bits
 *     F(L)    = the least i with line(p[i]) >= L, n if none     (0 <= L <= N; F(N) = n)
 *     c(L)    = F(L + 1) - F(L)              the points of line (bucket) L
 *     x(L)    = F(L + 1) if it is below n, else 0   the first point after L, wrapping
 *
 * (line(h), k(h)) is P(h) >> 16, so a smaller offset in the same line is a smaller position:
 * k(p) < k(h) gives p < h and k(p) > k(h) gives p > h; equal offsets say nothing.
 *
 * ONE LINE of the line index (struct chring_line, one 64-byte cache line), here line L with
 * c(L) = 3 points, f = F(L), x = x(L):
 *
 *   byte 0     4     6     8     10    12    32    34    36    38    40    42    62    64
 *        +-----+-----+-----+-----+-----+-...-+-----+-----+-----+-----+-----+-...-+-----+
 *        |first|  k0 |  k1 |  k2 | FFFF| ... | FFFF|  o0 |  o1 |  o2 |  ox | ... |  ox |
 *        +-----+-----+-----+-----+-----+-...-+-----+-----+-----+-----+-----+-...-+-----+
 *         u32  <------- off[0 .. 15): u16 --------><------- slot[0 .. 15): u16 -------->
 *
 *     first = f    off  = { k0, k1, k2, FFFF, ..., FFFF }   k0 = k(p[f]), k1 = k(p[f+1]), ...
 *                  slot = { o0, o1, o2, ox, ..., ox }       o0 = o[f], o1 = o[f+1], ...; ox = o[x]
 *
 *   The entries after the points are pads: offset CHRING_LINE_PAD (0xffff), above or equal to
 *   every offset, and the slot of the owner of the first point after the line (wrapping to
 *   point 0 after the ring's last point: keys above every point go to the first one).  A line
 *   has 15 entries and lists at most 14 points, so at least one pad ends every line.
 *
 *   A full line, c(L) > 14 (CHRING_LINE_FULL; how often: docs/bench.md §10): first is
 *   f | CHRING_LINE_FULL, every entry a pad (FFFF, o[x]); its keys search p[f .. F(L + 1)).
 *   An empty line, c(L) = 0: first = f = F(L + 1), every entry a pad naming o[x].
 *   After the ring's N lines, line N: first = n, every offset and slot 0xffff (the end that
 *   chring__index_first(s, L + 1) reads for the last line).
 *
 *   A key h of line L = line(h), k = k(h): below = #{ e : off[e] < k }, a prefix of the entries
 *   (chring__line_below), and
 *     - first has CHRING_LINE_FULL, or off[below] == k: the key's offset is a point's, or a pad's
 *       (k = 0xffff), and the point may be below or above h: binary search of p[f .. F(L + 1));
 *     - else the answer is point f + below (n wraps to 0), whose owner slot[below] names, with
 *       no point read: a point at or past entry below is above h, the others below it.
 *     off:   0x0c1a  0x5e00  0x9d4b  FFFF  FFFF ...
 *     k = 0x6000:   below = 2: point f + 2, owner slot[2]
 *     k = 0xa000:   below = 3: point f + 3 = F(L + 1), the first after the line, owner slot[3]
 *     k = 0x5e00:   off[1] == k: p[f + 1] may be above or below h: searched
 *     k = 0xffff:   equal to a pad (and to a point at offset 0xffff, which looks like one):
 *                   searched, so a point at 0xffff is never taken for a pad
 *
 *   THE LINE INVARIANT, for 0 <= L < N, with m = c(L) if c(L) <= 14, else 0:
 *     lines[L].first = F(L) | (c(L) > 14 ? CHRING_LINE_FULL : 0)
 *     lines[L].off[e] = k(p[F(L) + e]),  lines[L].slot[e] = o[F(L) + e]    for 0 <= e < m
 *     lines[L].off[e] = 0xffff,          lines[L].slot[e] = o[x(L)]        for m <= e < 15
 *   and lines[N].first = n, lines[N].off[e] = lines[N].slot[e] = 0xffff.
 *
 * THE BUCKET INDEX, flat (s->index, N + 1 entries of 32 bits; s->index_off NULL): index[b] =
 * F(b) for 0 <= b <= N, so index[N] = n.
 *
 * THE BUCKET INDEX, packed (rings of more than 2^19 points with positions of 32 bits or more that
 * take no lines: more than 65,535 slots, or the haproxy and varnish profiles): a byte a bucket and
 * a 32-bit base per group of CHRING_PACK_GROUP (64) buckets, g = b >> 6:
 *
 *     s->index     base[0 .. G + 1], G = N >> 6:   base[g] = F(64 g) for g <= G, base[G + 1] = n
 *     s->index_off off[0 .. N]:                    off[b] = min(F(b) - base[b >> 6], 255)
 *
 *     F(b) = base[b >> 6] + off[b]         where off[b] < 255 (CHRING_PACK_FAR)
 *     F(b) = the first point of p[base[g] + 255 .. base[g + 1]) at or after bucket b's start
 *                                          where off[b] = 255 (a group more crowded than a good
 *                                          hash ever makes one; F(N) = n)
 *
 *   At 1.5 buckets a point a group holds some 43 points, so the escape is for coarse custom
 *   hashes; the index takes 1 + 1/16 bytes a bucket, 1.6 a point, where the flat one takes 6.
 *   A bucket is empty when F(b) = F(b + 1): its key's answer is F(b) with no point read.
 *
 *   THE PACKED INVARIANT: base[g] = F(64 g) for 0 <= g <= G, base[G + 1] = n, and off[b] =
 *   min(F(b) - base[b >> 6], 255) for 0 <= b <= N.
 *
 *   Both forms: p[n .. n + CHRING_SENTINELS) are all ones, UINT64_MAX (2^64 - 2^32 read from
 *   4-byte positions; the search past three points stops at the next bucket's first), since the
 *   bucket search reads three points from a bucket's first, which may be n.
 *
 * WHAT A CHANGE TO THE FORMAT MUST TOUCH (the format is the invariants above, the geometry
 * and the choice of form):
 *   - this header: the picture and invariants, the constants, struct chring_line, the geometry
 *     (chring__bucket, chring__line_off, chring__bucket_start, chring__pack_first,
 *     chring__index_first) and the search (chring__line_below, whose SSE2 masks count 15
 *     entries at byte 4, chring__line_find, chring__bucket_first, chring__bucket_scan,
 *     chring__bucket_find and chring__pack_find for each width of positions, chring__find);
 *   - internal.h: how a point's position and owner are stored (chring__pos_width,
 *     chring__owner_width and their accessors);
 *   - index.c: which rings take which form (chring__index_lines, chring__index_packed), the
 *     counts and sizes (chring__index_buckets, chring__index_line_count, chring__index_bytes),
 *     the escape (chring__pack_far), the encoding (line_encode, line_end, pack_encode,
 *     chring__index_encode), the build (chring__index_build) and the shift (lines_shift,
 *     pack_shift, chring__index_shift);
 *   - find.h: chring__owner_of, which reads a line's slot itself;
 *   - batch.c: prefetch_entry and prefetch_points (what a line or an entry names);
 *   - snap_merge.c: fix_index (which lines or buckets a changed point can change) and the
 *     conditions under which chring__snap_merge shifts rather than builds;
 *   - snap_block.c: layout_for and chring__snap_alloc (the index's size, the lines' cache-line
 *     alignment, the sentinels); snap.c: chring_snap_check (the last line's or entry's first);
 *   - chunk.c and snap_merge.c's weave_chunks, for the chunked rings' own bucket index
 *     (docs/design.md §4.2: chring__chunk_scan and chring__chunk_find below, the chunk's first[]);
 *   - tests: tests/test_index_format.c (both invariants checked on index.c's output, with its
 *     own arithmetic, and every probe against a plain search: a change of format changes its
 *     invariant checkers first), tests/test_index.c, tests/test_lines.c,
 *     tests/objcode/check_prefetch.sh (the batch's prefetches);
 *   - docs: docs/design.md §4.1, and docs/bench.md's memory figures when the size changes. */
#ifndef CHRING_INDEX_H
#define CHRING_INDEX_H

#include "internal.h"

#if defined(__SSE2__) && !defined(CHRING_NO_SIMD)
#include <emmintrin.h>
#endif

/* ---- the bucket index ---------------------------------------------------------------------- */

/* The packed form (above): a base a group of CHRING_PACK_GROUP buckets, an offset byte a bucket,
 * CHRING_PACK_FAR for an offset that does not fit (the first point is then searched for). */
#define CHRING_PACK_SHIFT 6
#define CHRING_PACK_GROUP ((size_t)1 << CHRING_PACK_SHIFT)
#define CHRING_PACK_FAR 255
#define CHRING_PACK_MIN ((size_t)1 << 19)

/* ---- the line index ------------------------------------------------------------------------ */

/* On rings of at least CHRING_LINES_MIN points whose owner is the first point at or after a key,
 * with slots that fit 16 bits, the bucket index gives way to lines of one cache line each, about
 * one line per CHRING_LINE_LOAD points.  A line lists its points (at most CHRING_LINE_POINTS):
 * each one's offset within the line (16 bits, in position order) and its owner's slot; after
 * them, CHRING_LINE_PAD offsets whose slots name the owner of the first point after the line.
 * So a key reads its line and nothing else of the ring: the points below it are those of smaller
 * offset, the slot after them is its owner.  A key whose offset equals a point's (at 10,000 x 160
 * a line spans some 21,000 values of a position's top 32 bits, from which the offset comes) and
 * a line of more points than it lists (CHRING_LINE_FULL) search the positions instead: how
 * often, docs/bench.md §10 ("The line index's exact searches").  The picture and the invariant:
 * above. */
#define CHRING_LINE_ENTRIES 15
#define CHRING_LINE_POINTS (CHRING_LINE_ENTRIES - 1)
#define CHRING_LINE_FULL UINT32_C(0x80000000)
#define CHRING_LINE_PAD UINT16_C(0xffff)
#define CHRING_LINE_LOAD 8
#define CHRING_LINES_MIN ((size_t)1 << 16)
struct chring_line {
    uint32_t first; /* the first point at or after the line's start; CHRING_LINE_FULL: not listed */
    uint16_t off[CHRING_LINE_ENTRIES];  /* the points' offsets, then CHRING_LINE_PAD */
    uint16_t slot[CHRING_LINE_ENTRIES]; /* their owners' slots, then the next point's owner's */
};
_Static_assert(sizeof(struct chring_line) == CHRING_CACHELINE, "a line is one cache line");

/* UINT64_MAX positions after the last point: the search reads up to three points from any
 * bucket's first point, which may be the end. */
#define CHRING_SENTINELS 3

/* ---- geometry ------------------------------------------------------------------------------ */

/* The bucket of shifted position h64: the top 32 bits scaled to [0, nbuckets), so that bucket
 * order is position order for any bucket count (2^k buckets: the top k bits). */
static inline size_t chring__bucket(const chring_snap_t *s, uint64_t h64)
{
    return (size_t)(((h64 >> 32) * (uint64_t)s->nbuckets) >> 32);
}

/* A shifted position's offset within its line (k above): the low half of the product that gives
 * its line, which grows with the position within a line, to 16 bits. */
static inline uint16_t chring__line_off(const chring_snap_t *s, uint64_t h64)
{
    return (uint16_t)((uint32_t)((h64 >> 32) * (uint64_t)s->nbuckets) >> 16);
}

/* F(b) of a packed index whose offset for b is CHRING_PACK_FAR: searched (index.c). */
size_t chring__pack_far(const chring_snap_t *s, size_t b);

/* F(b) of a packed index (above), b <= nbuckets. */
static inline size_t chring__pack_first(const chring_snap_t *s, size_t b)
{
    unsigned off = s->index_off[b];
    if (CHRING_UNLIKELY(off == CHRING_PACK_FAR))
        return chring__pack_far(s, b);
    return (size_t)s->index[b >> CHRING_PACK_SHIFT] + off;
}

/* F(b) of a bucket index, flat or packed, b <= nbuckets. */
static inline size_t chring__bucket_first(const chring_snap_t *s, size_t b)
{
    return s->search & CHRING_SEARCH_PACKED ? chring__pack_first(s, b) : (size_t)s->index[b];
}

/* The first point at or after the start of bucket (or line) b, b <= nbuckets (F(b) above), in
 * any form. */
static inline size_t chring__index_first(const chring_snap_t *s, size_t b)
{
    if (s->lines != NULL)
        return (size_t)(s->lines[b].first & ~CHRING_LINE_FULL);
    if (s->chunks != NULL) {
        size_t c = b >> s->chunk_shift;
        if (c >= s->nchunks)
            return s->npoints;
        return s->chunks[c].first + s->chunks[c].c->first[b & (((size_t)1 << s->chunk_shift) - 1)];
    }
    return chring__bucket_first(s, b);
}

/* The lowest position of bucket b (b < nbuckets). */
static inline uint64_t chring__bucket_start(const chring_snap_t *s, size_t b)
{
    uint64_t nb = s->nbuckets;
    return ((((uint64_t)b << 32) + nb - 1) / nb) << 32;
}

/* The first index in [lo, hi) of sorted w-byte positions pos whose shifted position is >= h64,
 * hi if none is. */
static inline size_t chring__pos_search_at(const void *pos, unsigned w, size_t lo, size_t hi,
                                           uint64_t h64)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (chring__pos_at(pos, w, mid) < h64)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static inline size_t chring__chunk_search(const chring_snap_t *s, size_t lo, size_t hi,
                                           uint64_t h64);

/* The same in s's points: the binary search of every caller (the crowded bucket, the merge, the
 * index's repair), one loop for each width. */
static inline size_t chring__pos_search(const chring_snap_t *s, size_t lo, size_t hi, uint64_t h64)
{
    if (CHRING_UNLIKELY(s->chunks != NULL))
        return chring__chunk_search(s, lo, hi, h64);
    return s->pos_w == 8 ? chring__pos_search_at(s->pos, 8, lo, hi, h64)
                         : chring__pos_search_at(s->pos, 4, lo, hi, h64);
}

/* ---- index.c: which rings take which form, the counts, building and shifting --------------- */

size_t chring__index_buckets(size_t npoints, unsigned width, size_t prev_buckets);
/* Whether a snapshot of this profile, points and slots takes the line index. */
bool chring__index_lines(const struct chring_prof *prof, size_t npoints, size_t nslots);
/* Lines for npoints points: prev_lines (the previous snapshot's) while it keeps 7 to 9 points a
 * line, so that a publish can shift the lines instead of building them. */
size_t chring__index_line_count(size_t npoints, size_t prev_lines);
/* The whole index of s (the form s->lines or s->index says, nbuckets of it) from its points, and
 * the sentinels: the invariants above. */
void chring__index_build(chring_snap_t *s);
/* The index of s from prev's, of the same form and count, when s's points are prev's with the
 * sorted positions added and removed: each line's or entry's first moved by the changes before
 * it.  The lines and buckets round each change are then rewritten with chring__index_encode
 * (snap_merge.c, fix_index). */
void chring__index_shift(chring_snap_t *s, const chring_snap_t *prev, const uint64_t *added,
                         size_t nadded, const uint64_t *removed, size_t nremoved);
/* Whether a bucket index of this profile and points is packed (above): more than
 * CHRING_PACK_MIN points, positions of 32 bits or more, fewer than 2^32 points. */
bool chring__index_packed(const struct chring_prof *prof, size_t npoints);
/* Bytes of a bucket index of nbuckets buckets, flat or packed (snap_block.c's layout). */
size_t chring__index_bytes(size_t nbuckets, bool packed);
/* Writes the entries of buckets [b0, b1] from the points alone (what the entries say is not
 * read); a packed index rewrites the whole groups of b0 to b1, their bases included. */
void chring__index_encode(chring_snap_t *s, size_t b0, size_t b1);

/* ---- the search, inline for the hot path (find.h) ------------------------------------------ */

/* Of line l and a key's offset k in it: the number of listed points below the key, the index of
 * the slot that names its owner.  The offsets are sorted and the pads are above every offset,
 * so the points below are a prefix: with SSE2, two compares of eight offsets at once and the
 * first that is not below; else a scan that the pad at entry 14 ends. */
static inline unsigned chring__line_below(const struct chring_line *l, uint16_t k)
{
#if defined(__SSE2__) && !defined(CHRING_NO_SIMD)
    const __m128i key = _mm_set1_epi16((short)k);
    const __m128i zero = _mm_setzero_si128();
    __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)&l->off[0]);
    __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)&l->off[8]);
    /* off >= k exactly where k - off saturates to 0 (unsigned); bit 30 stops the count at 15,
     * the eighth lane of hi (slot[0]) is not an offset. */
    unsigned ge = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_subs_epu16(key, lo), zero)) |
                  (((unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_subs_epu16(key, hi), zero)) &
                    0x3fffu) << 16) |
                  (1u << 30);
    return (unsigned)__builtin_ctz(ge) / 2;
#else
    unsigned e = 0;
    while (l->off[e] < k)
        e++;
    return e;
#endif
}

/* The first point at or after h64 (wrapping to 0) by the line index: the line's first point plus
 * the points below the key, or where the key's offset is a point's or the line lists no points
 * (CHRING_LINE_FULL), a binary search of the line's points. */
static inline size_t chring__line_find(const chring_snap_t *s, uint64_t h64)
{
    size_t b = chring__bucket(s, h64);
    const struct chring_line *l = &s->lines[b];
    uint16_t k = chring__line_off(s, h64);
    unsigned below = chring__line_below(l, k);
    size_t i;
    if (CHRING_UNLIKELY((l->first & CHRING_LINE_FULL) != 0 || l->off[below] == k))
        i = chring__pos_search(s, l->first & ~CHRING_LINE_FULL, chring__index_first(s, b + 1),
                               h64);
    else
        i = l->first + below;
    return i == s->npoints ? 0 : i;
}

/* From point i, the first of bucket b (h64's): the first point at or after h64 (not wrapped).
 * The bucket's first three points (or the sentinels past the last point, UINT64_MAX) are
 * compared with h64 at once: three loads that do not wait for each other, and no branch for the
 * usual answer (a bucket holds 0.4 to 0.8 points on average, so a loop's exit would be
 * mispredicted often).  Points are sorted, and those after the bucket are above h64, so the
 * number below h64 is where the answer is.  A key above three points of its bucket (a crowded
 * bucket: a coarse custom hash) takes a binary search up to the next bucket's first point, read
 * there only (read first, it cost the flat index of the rings in the L1 cache 0.5 ns a lookup in
 * chring-bench-lookup, docs/bench.md §11g): 4-byte sentinels read as 2^64 - 2^32, below a key
 * with low bits above them (none of a 32-bit profile's own keys, whose low half is 0), so the
 * search never runs past the next bucket. */
CHRING_HOT_INLINE size_t chring__bucket_scan(const chring_snap_t *s, unsigned w, size_t b,
                                             size_t i, uint64_t h64)
{
    const void *pos = s->pos;
    size_t below = (size_t)(chring__pos_at(pos, w, i) < h64) +
                   (size_t)(chring__pos_at(pos, w, i + 1) < h64);
    if (CHRING_UNLIKELY(chring__pos_at(pos, w, i + 2) < h64)) {
        size_t end = chring__bucket_first(s, b + 1);
        return chring__pos_search_at(pos, w, i + 3 < end ? i + 3 : end, end, h64);
    }
    return i + below;
}

/* Index of the first point at or after the shifted position h64 (wrapping to 0), by the flat
 * bucket index: the bucket's entry, then chring__bucket_scan. */
CHRING_HOT_INLINE size_t chring__bucket_find(const chring_snap_t *s, uint64_t h64, unsigned w)
{
    size_t b = chring__bucket(s, h64);
    size_t i = chring__bucket_scan(s, w, b, s->index[b], h64);
    return i == s->npoints ? 0 : i;
}

/* The same by the packed index: the bucket's first point and the next bucket's, from a base
 * (the group's, in a table of 1/64 of the offsets' size that stays in the caches) and two
 * offset bytes, most often on one cache line.  An empty bucket (about half of them at 1.5 a
 * point) answers its first point with no point read. */
CHRING_HOT_INLINE size_t chring__pack_find(const chring_snap_t *s, uint64_t h64, unsigned w)
{
    size_t b = chring__bucket(s, h64);
    size_t i = chring__pack_first(s, b);
    if (i != chring__pack_first(s, b + 1))
        i = chring__bucket_scan(s, w, b, i, h64);
    return i == s->npoints ? 0 : i;
}

/* Of chunk k and a key's bucket lb in it, the chunk's first point at or after h64: the bucket's
 * first three points compared at once, as chring__bucket_scan does (the chunk's sentinels end
 * it); k->npoints when the key is above every point of the chunk. */
CHRING_HOT_INLINE size_t chring__chunk_scan(const struct chring_chunk *k, size_t lb, uint64_t h64)
{
    const uint64_t *pos = k->pos;
    size_t i = k->first[lb];
    size_t below = (size_t)(pos[i] < h64) + (size_t)(pos[i + 1] < h64);
    if (CHRING_UNLIKELY(pos[i + 2] < h64)) {
        size_t end = k->first[lb + 1];
        return chring__pos_search_at(pos, 8, i + 3 < end ? i + 3 : end, end, h64);
    }
    return i + below;
}

/* Index of the first point at or after h64 (wrapping to 0) of a chunked snapshot: the key's
 * chunk from the table (a few kilobytes to 128 KiB, in the caches), then its bucket in the
 * chunk.  A key above the chunk's points gets the next chunk's first point: the ring index
 * after the chunk's last. */
CHRING_HOT_INLINE size_t chring__chunk_find(const chring_snap_t *s, uint64_t h64)
{
    size_t b = chring__bucket(s, h64);
    const struct chring_chunk_ref *r = &s->chunks[b >> s->chunk_shift];
    size_t i = r->first + chring__chunk_scan(r->c, b & (((size_t)1 << s->chunk_shift) - 1), h64);
    return i == s->npoints ? 0 : i;
}

/* The points below h64 are a prefix of the ring, [0, g) with g the ring index of the first point
 * at or after h64 (not wrapped): its chunk's search gives g, and [lo, hi)'s answer is g clamped
 * to it. */
static inline size_t chring__chunk_search(const chring_snap_t *s, size_t lo, size_t hi, uint64_t h64)
{
    size_t b = chring__bucket(s, h64);
    const struct chring_chunk_ref *r = &s->chunks[b >> s->chunk_shift];
    size_t g = r->first + chring__chunk_scan(r->c, b & (((size_t)1 << s->chunk_shift) - 1), h64);
    return g < lo ? lo : g > hi ? hi : g;
}

CHRING_HOT_INLINE size_t chring__find(const chring_snap_t *s, uint64_t h64)
{
    if (s->lines != NULL)
        return chring__line_find(s, h64);
    /* One search for each form and width of the positions, chosen by one word (s->search),
     * the branches predicted by the ring's size and profile. */
    switch (s->search) {
    case 8:
        return chring__bucket_find(s, h64, 8);
    case 4:
        return chring__bucket_find(s, h64, 4);
    case 8 | CHRING_SEARCH_PACKED:
        return chring__pack_find(s, h64, 8);
    case 8 | CHRING_SEARCH_CHUNKED:
        return chring__chunk_find(s, h64);
    default:
        return chring__pack_find(s, h64, 4);
    }
}

#endif
