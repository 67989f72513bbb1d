/* The snapshot index's format, from sorted positions alone (docs/design.md §4.1; the picture and
 * the invariants: src/index.h).
 *
 * Each test lays out a sorted array of shifted positions and their owner slots, with no ring and
 * no member: a snapshot header around them (the fields the index reads), the bucket or the line
 * form chosen by hand, and index.c's chring__index_build.  Then two independent checks:
 *
 * - the invariant: every line (every slot and offset, the pads, the full flag, the line after
 *   the last), every flat bucket entry, or a packed index's bases and offset bytes is
 *   what src/index.h's formulas say, computed here from the positions with this file's own
 *   arithmetic, not index.h's;
 * - the probes: for every point its position, one below and one above; each line's or bucket's
 *   first and last position; in each line the first key of offset 0xffff (equal to a pad) and the
 *   last position; 0 and UINT64_MAX (or a 32-bit profile's top); random keys.  chring__find
 *   (the first point at or after, wrapping) and chring__owner_of (the plain lookup's owner, which
 *   reads a line's slot without a point) must give what a plain binary search
 *   of the positions gives.
 *
 * The cases: a hand-made line index (a sparse first line of 2 points then one of 3, a line of
 * exactly 14 points, full lines of 15 and 40, a point at offset 0xffff above another, a point at
 * offset 0, points sharing an offset, a run of empty lines, empty lines at the top so keys wrap);
 * a random line index of 100,000 points and one of 32-bit positions with repeats; a small flat
 * bucket index with a crowded bucket; a packed bucket index of more than 2^19 points (runs of
 * empty buckets, the top empty so keys wrap, a group of more than 255 points whose offsets
 * escape) and a small packed one whose last entry escapes; and for every form, an index shifted
 * from the previous one and rewritten round the changed points, which must equal the one built.
 *
 * Internal: links the static library and reads src/index.h.
 *
 * SPDX-License-Identifier: MIT */
#include "find.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- a snapshot around sorted positions ------------------------------------------------------ */

struct fixture {
    chring_snap_t s;
    struct chring_health health;
    char *tokens; /* the slots' members: distinct addresses, never read (no member is down) */
};

/* Member stand-ins: a lookup with no member down returns slot_member[slot] without reading it. */
enum {
    TOKEN = 64
};

static uint64_t mix(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The index's forms, chosen by hand here (index.c chooses by size and profile). */
enum form {
    FLAT,   /* the bucket index, a 32-bit entry a bucket */
    PACKED, /* the bucket index, a base per 64 buckets and a byte a bucket */
    LINES,  /* the line index */
};

/* A snapshot of n points (positions sorted, copied) owned by owner[i] < nslots, with nbuckets
 * buckets of the given form, built by index.c. */
static void fixture_build(struct fixture *f, const uint64_t *pos, const uint32_t *owner, size_t n,
                          size_t nslots, size_t nbuckets, enum form form)
{
    memset(f, 0, sizeof *f);
    chring_snap_t *s = &f->s;
    s->prof.desc = &chring__profiles[CHRING_PROFILE_HASH64];
    s->prof.id = CHRING_PROFILE_HASH64;
    s->prof.bits = 64;
    s->health = &f->health;
    s->npoints = n;
    s->nslots = nslots;
    s->nbuckets = nbuckets;
    /* Positions whose low halves are all 0 (a 32-bit profile's) take the 4-byte width, as
     * the library stores a 32-bit profile's: both widths go through the same checks. */
    bool low_zero = true;
    for (size_t i = 0; i < n && low_zero; i++)
        low_zero = (uint32_t)pos[i] == 0;
    s->pos_w = low_zero ? 4 : 8;
    s->pos = malloc((n + CHRING_SENTINELS) * s->pos_w);
    chring__owner_shape(s, nslots); /* the library's width for these slots */
    s->owner = calloc(n * s->owner_w + CHRING_OWNER_PAD, 1);
    s->slot_member = malloc(nslots * sizeof *s->slot_member);
    f->tokens = malloc(nslots * TOKEN);
    cr_assert(s->pos && s->owner && s->slot_member && f->tokens);
    for (size_t i = 0; i < n; i++) {
        chring__pos_set(s, i, pos[i]);
        cr_assert_eq(chring__pos(s, i), pos[i], "point %zu's position reads back", i);
    }
    for (size_t i = 0; i < n; i++) {
        chring__owner_set(s, i, owner[i]);
        cr_assert_eq(chring__owner(s, i), owner[i], "point %zu's owner reads back", i);
    }
    for (size_t k = 0; k < nslots; k++)
        s->slot_member[k] = (chring_member_t *)(void *)(f->tokens + k * TOKEN);
    for (size_t i = 1; i < n; i++)
        cr_assert_leq(pos[i - 1], pos[i], "the positions are sorted");
    if (form == LINES) {
        s->lines = aligned_alloc(CHRING_CACHELINE, (nbuckets + 1) * sizeof *s->lines);
        cr_assert_not_null(s->lines);
        memset(s->lines, 0xa5, (nbuckets + 1) * sizeof *s->lines); /* what a block held */
    } else {
        /* The packed form's offsets follow its bases, as in a block. */
        size_t bytes = chring__index_bytes(nbuckets, form == PACKED);
        s->index = malloc(bytes);
        cr_assert_not_null(s->index);
        memset(s->index, 0xa5, bytes);
        if (form == PACKED)
            s->index_off = (uint8_t *)(s->index + (nbuckets >> 6) + 2);
    }
    chring__search_shape(s); /* as chring__snap_alloc */
    chring__index_build(s);
}

static void fixture_free(struct fixture *f)
{
    free(f->s.pos);
    free(f->s.owner);
    free(f->s.slot_member);
    free(f->s.lines);
    free(f->s.index);
    free(f->tokens);
}

/* ---- this file's own arithmetic (src/index.h's notation) ------------------------------------- */

/* line(h) and k(h): the top 48 bits of t(h) * N, as line and offset. */
static size_t line_of(size_t nlines, uint64_t h)
{
    return (size_t)(((h >> 32) * (uint64_t)nlines) >> 32);
}

static uint16_t offset_of(size_t nlines, uint64_t h)
{
    return (uint16_t)((((h >> 32) * (uint64_t)nlines) >> 16) & 0xffff);
}

/* The lowest shifted position whose (line, offset) is at least (l, k): the smallest t with
 * t * N >= (l << 32 | k << 16), in the top 32 bits.  l = N: 2^64, returned as 0 with *over. */
static uint64_t position_at(size_t nlines, uint64_t l, unsigned k, bool *over)
{
    uint64_t want = (l << 32) | ((uint64_t)k << 16);
    uint64_t t = (want + nlines - 1) / nlines;
    if (over)
        *over = t > UINT32_MAX;
    return t << 32;
}

/* The first index of a point at or after h: the plain search, with the wrap to point 0. */
static size_t plain_find(const chring_snap_t *s, uint64_t h)
{
    size_t lo = 0, hi = s->npoints;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (chring__pos(s, mid) < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == s->npoints ? 0 : lo;
}

/* F(L) for every L in [0, N]: first[L], counted with line_of. */
static size_t *firsts(const chring_snap_t *s)
{
    size_t n = s->npoints, nb = s->nbuckets;
    size_t *first = malloc((nb + 1) * sizeof *first);
    cr_assert_not_null(first);
    size_t i = 0;
    for (size_t l = 0; l <= nb; l++) {
        while (i < n && line_of(nb, chring__pos(s, i)) < l)
            i++;
        first[l] = i;
    }
    return first;
}

/* ---- the invariants -------------------------------------------------------------------------- */

static void check_line_invariant(const chring_snap_t *s, const char *what)
{
    size_t n = s->npoints, nb = s->nbuckets;
    size_t *first = firsts(s);
    for (size_t l = 0; l < nb; l++) {
        const struct chring_line *line = &s->lines[l];
        size_t f = first[l], c = first[l + 1] - f, x = first[l + 1] < n ? first[l + 1] : 0;
        size_t m = c <= 14 ? c : 0;
        uint32_t want_first = (uint32_t)f | (c > 14 ? CHRING_LINE_FULL : 0);
        cr_assert_eq(line->first, want_first,
                     "%s: line %zu of %zu points: first %#x, the invariant says %#x", what, l, c,
                     line->first, want_first);
        for (size_t e = 0; e < 15; e++) {
            uint16_t off = e < m ? offset_of(nb, chring__pos(s, f + e)) : 0xffff;
            uint16_t slot = (uint16_t)(e < m ? chring__owner(s, f + e) : chring__owner(s, x));
            cr_assert(line->off[e] == off && line->slot[e] == slot,
                      "%s: line %zu of %zu points, entry %zu: offset %#x slot %u, the invariant "
                      "says %#x %u",
                      what, l, c, e, line->off[e], line->slot[e], off, slot);
        }
    }
    cr_assert_eq(s->lines[nb].first, (uint32_t)n, "%s: the line after the last: first", what);
    for (size_t e = 0; e < 15; e++)
        cr_assert(s->lines[nb].off[e] == 0xffff && s->lines[nb].slot[e] == 0xffff,
                  "%s: the line after the last, entry %zu", what, e);
    free(first);
}

static void check_bucket_invariant(const chring_snap_t *s, const char *what)
{
    size_t n = s->npoints, nb = s->nbuckets;
    cr_assert_null(s->index_off, "%s: flat", what);
    size_t *first = firsts(s);
    for (size_t b = 0; b <= nb; b++)
        cr_assert_eq(s->index[b], (uint32_t)first[b],
                     "%s: bucket %zu: entry %#x, the invariant says %zu", what, b, s->index[b],
                     first[b]);
    cr_assert_eq(first[nb], n, "%s: the entry after the last", what);
    free(first);
}

/* The packed invariant: base[g] = F(64 g) for g <= N / 64, base[N / 64 + 1] = n, off[b] =
 * min(F(b) - base[b / 64], 255); returns the number of escapes (offsets of 255). */
static size_t check_packed_invariant(const chring_snap_t *s, const char *what)
{
    size_t n = s->npoints, nb = s->nbuckets, groups = nb / 64 + 1, far = 0;
    cr_assert_not_null(s->index_off, "%s: packed", what);
    size_t *first = firsts(s);
    for (size_t g = 0; g < groups; g++)
        cr_assert_eq(s->index[g], (uint32_t)first[g * 64],
                     "%s: group %zu's base %u, the invariant says %zu", what, g, s->index[g],
                     first[g * 64]);
    cr_assert_eq(s->index[groups], (uint32_t)n, "%s: the base after the last group", what);
    for (size_t b = 0; b <= nb; b++) {
        size_t off = first[b] - first[b / 64 * 64];
        uint8_t want = (uint8_t)(off < 255 ? off : 255);
        far += want == 255;
        cr_assert_eq(s->index_off[b], want,
                     "%s: bucket %zu (first point %zu, group base %zu): offset %u, the invariant "
                     "says %u",
                     what, b, first[b], first[b / 64 * 64], s->index_off[b], want);
    }
    free(first);
    return far;
}

/* ---- the probes ------------------------------------------------------------------------------ */

struct probes {
    uint64_t *h;
    size_t n, cap;
};

static void probe(struct probes *p, uint64_t h)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 4096;
        p->h = realloc(p->h, p->cap * sizeof *p->h);
        cr_assert_not_null(p->h);
    }
    p->h[p->n++] = h;
}

/* Every probe of the header comment; top is the highest position of the width. */
static void gather(struct probes *p, const chring_snap_t *s, uint64_t top, unsigned randoms)
{
    size_t nb = s->nbuckets;
    for (size_t i = 0; i < s->npoints; i++) {
        probe(p, chring__pos(s, i) - 1);
        probe(p, chring__pos(s, i));
        probe(p, chring__pos(s, i) + 1);
    }
    for (size_t l = 0; l < nb; l++) {
        bool over;
        uint64_t lo = position_at(nb, l, 0, NULL), pad = position_at(nb, l, 0xffff, NULL);
        uint64_t next = position_at(nb, l + 1, 0, &over);
        probe(p, lo);
        probe(p, pad); /* the first key of offset 0xffff: equal to a pad */
        probe(p, pad | UINT32_MAX);
        probe(p, over ? UINT64_MAX : next - 1);
    }
    probe(p, 0);
    probe(p, UINT64_MAX);
    probe(p, top);
    uint64_t x = 42;
    for (unsigned k = 0; k < randoms; k++)
        probe(p, mix(&x));
}

/* The probes against the plain search: chring__find's point, chring__owner_of's member. */
static void check_probes(const chring_snap_t *s, uint64_t top, unsigned randoms, const char *what)
{
    struct probes p = {0};
    gather(&p, s, top, randoms);
    for (size_t k = 0; k < p.n; k++) {
        uint64_t h = p.h[k];
        size_t want = plain_find(s, h), got = chring__find(s, h);
        size_t l = line_of(s->nbuckets, h);
        cr_assert_eq(got, want,
                     "%s: key %016llx (line %zu, offset %#x) finds point %zu, the positions say "
                     "%zu",
                     what, (unsigned long long)h, l, offset_of(s->nbuckets, h), got, want);
        const chring_member_t *m = chring__owner_of(s, h);
        const chring_member_t *wm = s->slot_member[chring__owner(s, want)];
        cr_assert(m == wm,
                  "%s: key %016llx (line %zu, offset %#x) goes to slot %td, the positions say "
                  "slot %u",
                  what, (unsigned long long)h, l, offset_of(s->nbuckets, h),
                  ((const char *)m - (const char *)s->slot_member[0]) / TOKEN,
                  chring__owner(s, want));
    }
    free(p.h);
}

/* ---- the cases ------------------------------------------------------------------------------- */

enum {
    HAND_LINES = 64,
    HAND_SLOT0 = 1000, /* the slot of point 0 */
};

/* Points laid out by (line, offset, low bits), in order. */
struct layout {
    uint64_t *pos;
    uint32_t *owner;
    size_t n, cap, nlines;
};

static void put(struct layout *y, uint64_t h)
{
    if (y->n == y->cap) {
        y->cap = y->cap ? 2 * y->cap : 1024;
        y->pos = realloc(y->pos, y->cap * sizeof *y->pos);
        y->owner = realloc(y->owner, y->cap * sizeof *y->owner);
        cr_assert(y->pos && y->owner);
    }
    y->pos[y->n] = h;
    /* Each point its own slot, a wrong point a wrong owner; not the point's index, which a line
     * that read past its slots into the next line's first would find there. */
    y->owner[y->n] = (uint32_t)(y->n + HAND_SLOT0);
    y->n++;
}

/* A point at offset k of line l (the first position of that offset, plus low bits). */
static uint64_t at(const struct layout *y, uint64_t l, unsigned k, uint32_t low)
{
    uint64_t h = position_at(y->nlines, l, k, NULL) | low;
    cr_assert(line_of(y->nlines, h) == l && offset_of(y->nlines, h) == k, "a point at %#x of %zu",
              k, (size_t)l);
    return h;
}

/* Points spread evenly over line l, count of them at distinct offsets. */
static void spread(struct layout *y, uint64_t l, unsigned count)
{
    for (unsigned e = 0; e < count; e++)
        put(y, at(y, l, (unsigned)(0xff00u * e / count + 0x40u), 0x1000u * e));
}

/* The hand-made line index of the header comment, line by line. */
static void hand_layout(struct layout *y)
{
    memset(y, 0, sizeof *y);
    y->nlines = HAND_LINES;
    /* Line 0, sparse: a point at offset 0 (position 0, the ring's start) and one more.  Line 1:
     * three points, so lines 0 and 1 hold five, few enough to fit a line: a count of line 1's
     * points taken from the ring's start rather than the line's would still list them. */
    put(y, 0);
    put(y, at(y, 0, 0x8000, 7));
    put(y, at(y, 1, 0x1000, 0));
    put(y, at(y, 1, 0x5000, 0));
    put(y, at(y, 1, 0x9000, 0));
    spread(y, 2, 14);            /* as many as a line lists */
    spread(y, 3, 15);            /* one more: full */
    put(y, at(y, 4, 0x7000, 0)); /* a point, then one at offset 0xffff above it */
    put(y, at(y, 4, 0xffff, 0x1234));
    uint64_t shared = at(y, 5, 0x4000, 0); /* points sharing offset 0x4000, one repeated */
    put(y, shared);
    put(y, shared + 5);
    put(y, shared + 5);
    put(y, shared + (UINT64_C(1) << 32));
    spread(y, 6, 40);                   /* full, well past 15 */
    for (uint64_t l = 31; l <= 50; l++) /* lines 7 .. 30 empty: a run */
        spread(y, l, 8);
    put(y, at(y, 51, 0x0100, 0)); /* lines 52 .. 63 empty: keys there wrap */
}

static void layout_free(struct layout *y)
{
    free(y->pos);
    free(y->owner);
}

Test(index_format, hand_made_lines_hold_the_invariant_and_answer_every_probe)
{
    struct layout y;
    hand_layout(&y);
    struct fixture f;
    fixture_build(&f, y.pos, y.owner, y.n, y.n + HAND_SLOT0, y.nlines, LINES);
    check_line_invariant(&f.s, "hand-made lines");
    check_probes(&f.s, UINT64_MAX, 20000, "hand-made lines");
    /* The shapes the cases need, as the index holds them: the probes above went through each. */
    cr_assert_eq(f.s.lines[2].first & CHRING_LINE_FULL, 0, "14 points fit a line");
    cr_assert_neq(f.s.lines[3].first & CHRING_LINE_FULL, 0, "15 points do not");
    cr_assert_eq(f.s.lines[4].off[1], 0xffff, "line 4 lists a point at offset 0xffff");
    cr_assert_eq(f.s.lines[4].slot[1], chring__owner(&f.s, f.s.lines[4].first + 1));
    cr_assert_eq(f.s.lines[HAND_LINES - 1].slot[0], HAND_SLOT0,
                 "the top line names point 0's owner");
    fixture_free(&f);
    layout_free(&y);
}

/* n sorted random positions (top: a 32-bit profile's, low half 0, every fifth repeated), owners
 * random below nslots; a gap of no point in [gap_lo, gap_hi) and none from top_free up. */
static void random_layout(struct layout *y, size_t n, bool narrow, uint32_t nslots, uint64_t gap_lo,
                          uint64_t gap_hi, uint64_t top_free)
{
    memset(y, 0, sizeof *y);
    uint64_t x = n * 7 + (narrow ? 1 : 0);
    while (y->n < n) {
        uint64_t h = mix(&x);
        if (narrow)
            h &= UINT64_C(0xffffffff00000000);
        if ((h >= gap_lo && h < gap_hi) || h >= top_free)
            continue;
        put(y, h);
        if (narrow && y->n % 5 == 0 && y->n < n)
            put(y, h);
    }
    qsort(y->pos, y->n, sizeof *y->pos, cmp_u64);
    for (size_t i = 0; i < y->n; i++)
        y->owner[i] = (uint32_t)(mix(&x) % nslots);
}

Test(index_format, random_lines_of_64_and_32_bit_positions)
{
    struct layout y;
    /* 100,000 points, a run of about 1,200 empty lines, the ring's top 1/1024 empty. */
    random_layout(&y, 100000, false, 5000, UINT64_C(0x3000000000000000),
                  UINT64_C(0x3180000000000000), UINT64_C(0xffc0000000000000));
    struct fixture f;
    size_t nlines = chring__index_line_count(y.n, 0);
    fixture_build(&f, y.pos, y.owner, y.n, 5000, nlines, LINES);
    check_line_invariant(&f.s, "random lines");
    check_probes(&f.s, UINT64_MAX, 50000, "random lines");
    fixture_free(&f);
    layout_free(&y);

    /* 32-bit positions (shifted: the low half 0), repeats, the top of the width. */
    random_layout(&y, 70000, true, 60000, 0, 0, UINT64_MAX);
    nlines = chring__index_line_count(y.n, 0);
    fixture_build(&f, y.pos, y.owner, y.n, 60000, nlines, LINES);
    check_line_invariant(&f.s, "32-bit lines");
    check_probes(&f.s, UINT64_C(0xffffffff00000000), 50000, "32-bit lines");
    fixture_free(&f);
    layout_free(&y);
}

Test(index_format, a_small_bucket_index_with_a_crowded_bucket)
{
    struct layout y;
    random_layout(&y, 1000, false, 100, UINT64_C(0x8000000000000000), UINT64_C(0x9000000000000000),
                  UINT64_C(0xf000000000000000));
    /* Ten points in one bucket (a coarse hash), in the gap so the order holds once sorted. */
    for (uint64_t k = 0; k < 10; k++)
        put(&y, UINT64_C(0x8800000000000000) + k * 977);
    qsort(y.pos, y.n, sizeof *y.pos, cmp_u64);
    for (size_t i = 0; i < y.n; i++)
        y.owner[i] = (uint32_t)(i * 7 % 100);
    struct fixture f;
    size_t nb = chring__index_buckets(y.n, 64, 0);
    fixture_build(&f, y.pos, y.owner, y.n, 100, nb, FLAT);
    check_bucket_invariant(&f.s, "small buckets");
    check_probes(&f.s, UINT64_MAX, 20000, "small buckets");
    fixture_free(&f);
    layout_free(&y);
}

/* More than 2^19 points: the packed form.  A gap of about 82 empty buckets and the top 1/4096
 * empty (its buckets wrap to point 0), and a coarse cluster of 600 points in a few buckets (a
 * group of more than 255 points: the offsets after it escape). */
static void packed_layout(struct layout *y)
{
    random_layout(y, 600000, false, 70000, UINT64_C(0x5000000000000000),
                  UINT64_C(0x5006000000000000), UINT64_C(0xfff0000000000000));
    for (uint64_t k = 0; k < 600; k++)
        put(y, UINT64_C(0x5003000000000000) + k * UINT64_C(0x10000000000));
    qsort(y->pos, y->n, sizeof *y->pos, cmp_u64);
    uint64_t x = 5;
    for (size_t i = 0; i < y->n; i++)
        y->owner[i] = (uint32_t)(mix(&x) % 70000);
}

Test(index_format, a_packed_bucket_index_with_empty_buckets_and_a_crowded_group, .timeout = 60)
{
    struct layout y;
    packed_layout(&y);
    struct fixture f;
    size_t nb = chring__index_buckets(y.n, 64, 0);
    fixture_build(&f, y.pos, y.owner, y.n, 70000, nb, PACKED);
    size_t far = check_packed_invariant(&f.s, "packed");
    cr_assert_gt(far, 0, "the cluster makes offsets escape");
    check_probes(&f.s, UINT64_MAX, 20000, "packed");
    fixture_free(&f);
    layout_free(&y);
}

/* A small packed index (chosen by hand) whose last group is crowded: the entry after the last
 * bucket escapes, and keys above every point wrap.  Its first bucket holds exactly 255 points,
 * so that the next buckets' first point is the first an escape may name. */
Test(index_format, a_packed_index_whose_last_group_escapes)
{
    struct layout y;
    random_layout(&y, 2000, false, 300, 0, UINT64_C(0x0100000000000000),
                  UINT64_C(0xf000000000000000));
    for (uint64_t k = 0; k < 255; k++) /* bucket 0 of 1000 ends at about 2^64 / 1000 */
        put(&y, k * UINT64_C(0x10000000000));
    for (uint64_t k = 0; k < 300; k++)
        put(&y, UINT64_C(0xf800000000000000) + k * UINT64_C(0x1000000000000));
    qsort(y.pos, y.n, sizeof *y.pos, cmp_u64);
    for (size_t i = 0; i < y.n; i++)
        y.owner[i] = (uint32_t)(i * 7 % 300);
    struct fixture f;
    fixture_build(&f, y.pos, y.owner, y.n, 300, 1000, PACKED); /* 1000: not a multiple of 64 */
    size_t far = check_packed_invariant(&f.s, "packed, crowded top");
    cr_assert_eq(f.s.index_off[1000], 255, "the entry after the last escapes");
    cr_assert_eq(chring__index_first(&f.s, 1000), y.n, "and reads as the end");
    cr_assert_eq(f.s.index_off[1], 255, "bucket 1's first point is 255 after its group's");
    cr_assert_eq(chring__index_first(&f.s, 1), 255, "and reads as point 255");
    cr_assert_gt(far, 1, "offsets escape in the last group");
    check_probes(&f.s, UINT64_MAX, 20000, "packed, crowded top");
    fixture_free(&f);
    layout_free(&y);
}

/* ---- shifted, then rewritten round the changes: the index built ------------------------------ */

/* What a merge does after chring__index_shift (snap_merge.c, fix_index): each changed point's
 * bucket and those back to the bucket of the point before it, encoded again from the points. */
static void rewrite_round(chring_snap_t *s, const uint64_t *changed, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        uint64_t p = changed[k];
        size_t i = chring__pos_search(s, 0, s->npoints, p);
        if (i == s->npoints)
            i = 0;
        size_t before = (i == 0 ? s->npoints : i) - 1;
        size_t b0 = chring__bucket(s, chring__pos(s, before)), b1 = chring__bucket(s, p);
        if (chring__pos(s, before) >= p) {
            chring__index_encode(s, b0, s->nbuckets - 1);
            b0 = 0;
        }
        chring__index_encode(s, b0, b1);
    }
}

/* prev's points less every 97th, plus new ones (one at the ring's top, one below every point),
 * shifted and rewritten, against the same points built. */
static void check_shift(const struct layout *y, size_t nslots, size_t nb, enum form form,
                        const char *what)
{
    struct fixture prev, built, shifted;
    fixture_build(&prev, y->pos, y->owner, y->n, nslots, nb, form);
    size_t cap = y->n + 64, n = 0, nadded = 0, nremoved = 0;
    uint64_t *pos = malloc(cap * sizeof *pos), *added = malloc(64 * sizeof *added);
    uint64_t *removed = malloc(cap * sizeof *removed);
    uint32_t *owner = malloc(cap * sizeof *owner);
    cr_assert(pos && added && removed && owner);
    uint64_t x = 99;
    for (unsigned k = 0; k < 40; k++)
        added[nadded++] = mix(&x);
    added[nadded++] = UINT64_MAX - 3;
    added[nadded++] = 1;
    qsort(added, nadded, sizeof *added, cmp_u64);
    size_t a = 0;
    for (size_t i = 0; i <= y->n; i++) {
        while (a < nadded && (i == y->n || added[a] < y->pos[i])) {
            pos[n] = added[a++];
            owner[n++] = (uint32_t)(mix(&x) % nslots);
        }
        if (i == y->n)
            break;
        if (i % 97 == 5) {
            removed[nremoved++] = y->pos[i];
            continue;
        }
        pos[n] = y->pos[i];
        owner[n++] = y->owner[i];
    }
    fixture_build(&built, pos, owner, n, nslots, nb, form);
    /* The shifted one: the same points, the index written only by the shift and the rewrites. */
    fixture_build(&shifted, pos, owner, n, nslots, nb, form);
    bool lines = form == LINES;
    size_t bytes = lines ? (nb + 1) * sizeof(struct chring_line)
                         : chring__index_bytes(nb, form == PACKED);
    void *index = lines ? (void *)shifted.s.lines : (void *)shifted.s.index;
    memset(index, 0xa5, bytes);
    chring__index_shift(&shifted.s, &prev.s, added, nadded, removed, nremoved);
    rewrite_round(&shifted.s, added, nadded);
    rewrite_round(&shifted.s, removed, nremoved);
    const char *want = lines ? (const char *)built.s.lines : (const char *)built.s.index;
    /* Entry by entry (a line, a flat entry; a packed index's bases, then its offset bytes). */
    size_t w = lines ? sizeof(struct chring_line) : form == PACKED ? 1 : sizeof(uint32_t);
    for (size_t at = 0; at < bytes; at += w)
        cr_assert(memcmp((const char *)index + at, want + at, w) == 0,
                  "%s: byte %zu of %zu (%zu buckets) differs between the shifted index and the "
                  "built one",
                  what, at, bytes, nb);
    if (lines)
        check_line_invariant(&shifted.s, what);
    else if (form == PACKED)
        check_packed_invariant(&shifted.s, what);
    else
        check_bucket_invariant(&shifted.s, what);
    fixture_free(&prev);
    fixture_free(&built);
    fixture_free(&shifted);
    free(pos);
    free(added);
    free(removed);
    free(owner);
}

Test(index_format, a_shifted_index_is_the_built_one, .timeout = 60)
{
    struct layout y;
    hand_layout(&y);
    check_shift(&y, y.n + HAND_SLOT0, y.nlines, LINES, "hand-made lines, shifted");
    layout_free(&y);
    random_layout(&y, 100000, false, 5000, UINT64_C(0x3000000000000000),
                  UINT64_C(0x3180000000000000), UINT64_C(0xffc0000000000000));
    check_shift(&y, 5000, chring__index_line_count(y.n, 0), LINES, "random lines, shifted");
    check_shift(&y, 5000, chring__index_buckets(y.n, 64, 0), FLAT, "random buckets, shifted");
    layout_free(&y);
    packed_layout(&y);
    check_shift(&y, 70000, chring__index_buckets(y.n, 64, 0), PACKED, "packed, shifted");
    layout_free(&y);
}
