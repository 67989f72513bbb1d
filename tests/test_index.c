/* The two indexes of large rings, seen from inside (docs/design.md §4.1, "The index" and "The line
 * index"), on the shapes no other suite builds.
 *
 * - A ring of more than 2^19 points that keeps the bucket index (more than 65,535 members: the
 *   slots do not fit a line), whose index is packed (a base per 64 buckets, a byte a bucket)
 *   and where a lookup in an empty bucket reads no point.  With members down, every
 *   bucket's first and last position must go to the first member up clockwise, as the points
 *   say: a lookup that took the named owner without its down-check would hand keys to a member
 *   that is down.  Checked after the build and after an add and a remove (the shifted index and
 *   the entries rewritten round the changed points).
 * - A line-index ring whose first lines are sparse (no point, two, one, three, a full fourteen,
 *   fifteen that do not fit, none again), each point another member's: a line that listed a wrong
 *   number of points (the lines after a first one of fewer than 14 points are the only ones
 *   where a count taken from the ring's start rather than the line's still fits a line), or
 *   started from a wrong point, gives wrong owners in the lines after it.  Keys at, below and
 *   above every point of those lines, at each line's ends and across each line, against a
 *   binary search of the points; after the build and after members with points there leave and
 *   come back.
 *
 * - A ring of 100,000 members x 16 points (1.6 M, the bucket index) is indexed with 1.5 buckets
 *   per point, packed, and a publish keeps that count (it shifts the index rather than building
 *   it): a denser index past 2^19 points costs bytes per point at rest and no lookup speed
 *   (docs/design.md §4.1, docs/bench.md §11d).  Its snapshot's block is at most 16 bytes a point
 *   (19.6 with the flat index), and keys round a sample of points and at bucket ends go to the
 *   owner the points say, after the build and after an add and a remove.
 *
 * - Owner slots of 2, 3 and 4 bytes (docs/design.md §4.1, "Points"): each reads back what
 *   was written without touching its neighbours, and a publish that takes a ring from 65,536
 *   slots to 65,537 (2 bytes to 3, the merge converting the owners it copies) gives the points a
 *   build of the same members gives.
 *
 * Internal: links the static library and reads the snapshot (src/internal.h) to know which index
 * a ring has and to compute the expected owners from its points.
 *
 * SPDX-License-Identifier: MIT */
#include "index.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- the expected owner, from the points ---------------------------------------------------- */

/* The first point at or after shifted position h (wrapping), then clockwise to the first point
 * whose member is up; NULL when every member is down. */
static const chring_member_t *expected_owner(const chring_snap_t *s, uint64_t h)
{
    size_t lo = 0, hi = s->npoints;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (chring__pos(s, mid) < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t i = lo == s->npoints ? 0 : lo;
    for (size_t step = 0; step < s->npoints; step++) {
        const chring_member_t *m = s->slot_member[chring__owner(s, (i + step) % s->npoints)];
        if (!chring_member_is_down(m))
            return m;
    }
    return NULL;
}

/* Checks positions h[0 .. n) (64-bit profiles: shifted == unshifted) with the single and the
 * batch lookup; returns how many were checked. */
static size_t check_positions(const chring_snap_t *s, const uint64_t *h, size_t n, const char *what)
{
    const chring_member_t *batch[64];
    for (size_t at = 0; at < n; at += 64) {
        size_t m = n - at < 64 ? n - at : 64;
        cr_assert_eq(chring_snap_lookup_hashes(s, h + at, m, batch), m);
        for (size_t k = 0; k < m; k++) {
            const chring_member_t *want = expected_owner(s, h[at + k]);
            const chring_member_t *got = chring_snap_lookup_hash(s, h[at + k]);
            cr_assert(got == want, "%s: position %016llx goes to %s, the points say %s", what,
                      (unsigned long long)h[at + k], got ? chring_member_name(got) : "NULL",
                      want ? chring_member_name(want) : "NULL");
            cr_assert(batch[k] == want, "%s: batch: position %016llx goes to %s, the points say %s",
                      what, (unsigned long long)h[at + k],
                      batch[k] ? chring_member_name(batch[k]) : "NULL",
                      want ? chring_member_name(want) : "NULL");
        }
    }
    return n;
}

/* ---- the packed bucket index --------------------------------------------------------------- */

enum {
    SLOT_MEMBERS = 66000, /* more than 65,535 slots: no line index */
    SLOT_VNODES = 8,      /* 528,000 points: more than 2^19, so the bucket index is packed */
};

static void slot_name(char *buf, size_t cap, unsigned i)
{
    snprintf(buf, cap, "n%05u", i);
}

/* Every empty bucket whose first point after it is a member's that is down: its first and last
 * position (an empty bucket answers its first point with no point read). */
static void check_slot_buckets(chring_t *r, const char *what)
{
    const chring_snap_t *s = chring_snap_hold(r);
    cr_assert_null(s->lines, "%s: more than 65,535 slots keep the bucket index", what);
    cr_assert_not_null(s->index);
    cr_assert_not_null(s->index_off, "%s: %zu points: the bucket index is packed", what,
                       s->npoints);
    size_t nh = 0, cap = 1 << 16, empty = 0, empty_down = 0;
    uint64_t *h = malloc(cap * sizeof *h);
    cr_assert_not_null(h);
    for (size_t b = 0; b < s->nbuckets; b++) {
        size_t f = chring__index_first(s, b);
        if (chring__index_first(s, b + 1) != f)
            continue;
        empty++;
        if (!chring_member_is_down(s->slot_member[chring__owner(s, f < s->npoints ? f : 0)]))
            continue;
        empty_down++;
        if (nh + 2 > cap) {
            check_positions(s, h, nh, what);
            nh = 0;
        }
        h[nh++] = chring__bucket_start(s, b);
        h[nh++] = b + 1 < s->nbuckets ? chring__bucket_start(s, b + 1) - 1 : UINT64_MAX;
    }
    check_positions(s, h, nh, what);
    /* And a spread of every kind of bucket, the members up included. */
    nh = 0;
    for (size_t b = 0; b < s->nbuckets && nh < cap; b += 37)
        h[nh++] = chring__bucket_start(s, b) + (uint64_t)b * 0x9e3779b9u;
    check_positions(s, h, nh, what);
    free(h);
    cr_assert_gt(empty, s->nbuckets / 4, "%s: %zu of %zu buckets are empty", what, empty,
                 s->nbuckets);
    cr_assert_gt(empty_down, empty / 8, "%s: %zu of them go to a member that is down", what,
                 empty_down);
    chring_snap_put(r, s);
}

Test(index, empty_buckets_of_a_packed_index_pass_over_members_down, .timeout = 120)
{
    if (getenv("CHRING_CHUNK_MIN") != NULL) /* CI step 14-chunked.sh */
        cr_skip_test("the packed index of a flat ring; chunked rings have none (docs/design.md §4.2)");
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = SLOT_VNODES;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    char(*names)[16] = malloc(SLOT_MEMBERS * sizeof *names);
    chring_change_t *changes = malloc(SLOT_MEMBERS * sizeof *changes);
    cr_assert(names != NULL && changes != NULL);
    for (unsigned i = 0; i < SLOT_MEMBERS; i++) {
        slot_name(names[i], sizeof names[i], i);
        changes[i] = (chring_change_t){names[i], 1, NULL};
    }
    cr_assert_eq(chring_update(r, changes, SLOT_MEMBERS), 0);
    /* One member in four down: a quarter of the owners of empty buckets. */
    for (unsigned i = 0; i < SLOT_MEMBERS; i += 4)
        cr_assert_eq(chring_set_down(r, names[i], 1), 0);
    check_slot_buckets(r, "built");
    char extra[16];
    slot_name(extra, sizeof extra, SLOT_MEMBERS);
    cr_assert_eq(chring_add(r, extra, 1, NULL), 0);
    check_slot_buckets(r, "one added");
    cr_assert_eq(chring_remove(r, names[1]), 0);
    check_slot_buckets(r, "one removed");
    /* Down members that are also removed, and the down ones back up: the plain path. */
    cr_assert_eq(chring_remove(r, names[4]), 0);
    check_slot_buckets(r, "a member down removed");
    chring_free(&r);
    free(changes);
    free(names);
}

/* ---- the bucket index's density past 2^19 points ------------------------------------------- */

enum {
    DENSE_MEMBERS = 100000, /* more than 65,535 slots: the bucket index */
    DENSE_VNODES = 16,      /* 1.6 M points */
    DENSE_POINTS = DENSE_MEMBERS * DENSE_VNODES,
};

/* The snapshot's bucket count (between 1.35 and 1.65 a point), and its keys: round every 53rd
 * point and at both ends of every 97th bucket. */
static size_t check_dense(chring_t *r, size_t points, const char *what)
{
    const chring_snap_t *s = chring_snap_hold(r);
    cr_assert_null(s->lines, "%s: more than 65,535 slots keep the bucket index", what);
    cr_assert_not_null(s->index);
    cr_assert_eq(s->npoints, points, "%s: %zu points", what, s->npoints);
    cr_assert(s->nbuckets * 20 >= s->npoints * 27 && s->nbuckets * 20 <= s->npoints * 33,
              "%s: %zu buckets for %zu points: %.2f a point, not 1.5", what, s->nbuckets,
              s->npoints, (double)s->nbuckets / (double)s->npoints);
    size_t cap = 1 << 17, nh = 0;
    uint64_t *h = malloc(cap * sizeof *h);
    cr_assert_not_null(h);
    for (size_t i = 0; i < s->npoints && nh + 3 <= cap; i += 53) {
        h[nh++] = chring__pos(s, i) - 1;
        h[nh++] = chring__pos(s, i);
        h[nh++] = chring__pos(s, i) + 1;
    }
    for (size_t b = 0; b < s->nbuckets && nh + 2 <= cap; b += 97) {
        h[nh++] = chring__bucket_start(s, b);
        h[nh++] = b + 1 < s->nbuckets ? chring__bucket_start(s, b + 1) - 1 : UINT64_MAX;
    }
    check_positions(s, h, nh, what);
    free(h);
    size_t nbuckets = s->nbuckets;
    chring_snap_put(r, s);
    return nbuckets;
}

Test(index, a_large_bucket_index_has_one_and_a_half_buckets_a_point_and_publishes_keep_it,
     .timeout = 120)
{
    if (getenv("CHRING_CHUNK_MIN") != NULL) /* CI step 14-chunked.sh */
        cr_skip_test("the packed index of a flat ring; chunked rings have none (docs/design.md §4.2)");
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = DENSE_VNODES;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    char(*names)[16] = malloc((DENSE_MEMBERS + 1) * sizeof *names);
    chring_change_t *changes = malloc(DENSE_MEMBERS * sizeof *changes);
    cr_assert(names != NULL && changes != NULL);
    for (unsigned i = 0; i <= DENSE_MEMBERS; i++)
        slot_name(names[i], sizeof names[i], i);
    for (unsigned i = 0; i < DENSE_MEMBERS; i++)
        changes[i] = (chring_change_t){names[i], 1, NULL};
    cr_assert_eq(chring_update(r, changes, DENSE_MEMBERS), 0);
    /* The built snapshot's block: points 11 bytes (a 3-byte owner slot: more than 65,536
     * slots), the packed index 1.6 (1.5 buckets a point, a byte each and a 4-byte base per 64),
     * the member and slot tables 36 / 16 = 2.25, the block's 1/64 of room: 15.1; with the flat
     * index (4 bytes a bucket) 19.6. */
    const chring_snap_t *s = chring_snap_hold(r);
    cr_assert_eq(s->owner_w, 3, "100,001 slots take 3 bytes");
    cr_assert_not_null(s->index_off, "the bucket index is packed");
    cr_assert_leq(s->block_size, (size_t)DENSE_POINTS * 16,
                  "a 100,000 x 16 snapshot holds %.1f bytes a point",
                  (double)s->block_size / DENSE_POINTS);
    chring_snap_put(r, s);
    size_t built = check_dense(r, DENSE_POINTS, "built");
    /* Publishes shift the index: the count stays. */
    cr_assert_eq(chring_add(r, names[DENSE_MEMBERS], 1, NULL), 0);
    cr_assert_eq(check_dense(r, DENSE_POINTS + DENSE_VNODES, "one added"), built,
                 "a publish kept the bucket count");
    cr_assert_eq(chring_remove(r, names[7]), 0);
    cr_assert_eq(check_dense(r, DENSE_POINTS, "one removed"), built,
                 "a publish kept the bucket count");
    chring_free(&r);
    free(changes);
    free(names);
}

/* ---- owner slots as wide as the slots need --------------------------------------------------- */

/* Every width: a slot written reads back, its neighbours keep theirs, the last point's 4-byte
 * load stays in the padding. */
Test(index, an_owner_slot_takes_two_three_or_four_bytes_and_reads_back_alone)
{
    const struct {
        size_t nslots;
        uint32_t width;
    } shapes[] = {{1, 2},     {65535, 2},           {65536, 2},
                  {65537, 3}, {(size_t)1 << 24, 3}, {((size_t)1 << 24) + 1, 4}};
    enum {
        N = 9
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        chring_snap_t s = {0};
        chring__owner_shape(&s, shapes[k].nslots);
        cr_assert_eq(s.owner_w, shapes[k].width, "%zu slots: %u bytes, not %u", shapes[k].nslots,
                     s.owner_w, shapes[k].width);
        unsigned char *bytes = malloc(N * s.owner_w + CHRING_OWNER_PAD);
        cr_assert_not_null(bytes);
        memset(bytes, 0xa5, N * s.owner_w + CHRING_OWNER_PAD); /* garbage in the padding too */
        s.owner = bytes;
        uint32_t top = (uint32_t)(shapes[k].nslots - 1), want[N];
        for (size_t i = 0; i < N; i++) {
            want[i] = i % 3 == 0 ? top : i % 3 == 1 ? 0 : (uint32_t)(top / (i + 2));
            chring__owner_set(&s, i, want[i]);
        }
        for (size_t i = 0; i < N; i++)
            cr_assert_eq(chring__owner(&s, i), want[i], "%u bytes: point %zu reads %u, not %u",
                         s.owner_w, i, chring__owner(&s, i), want[i]);
        /* Rewriting one leaves the others. */
        chring__owner_set(&s, 4, top / 7);
        want[4] = top / 7;
        for (size_t i = 0; i < N; i++)
            cr_assert_eq(chring__owner(&s, i), want[i], "%u bytes, after a rewrite: point %zu",
                         s.owner_w, i);
        free(bytes);
    }
}

/* A ring of 65,536 slots (2-byte owners) that a publish takes to 65,537 (3 bytes): the merge
 * copies the unchanged points' owners slot by slot instead of as bytes.  Its points, their
 * positions and their members' names, are those of a ring built from nothing with the same
 * members (a build writes its owners directly), and its lookups what the points say. */
Test(index, a_publish_that_takes_the_slots_past_65536_widens_the_owners, .timeout = 120)
{
    enum {
        WIDE_MEMBERS = 65536,
        WIDE_VNODES = 4,
    };
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = WIDE_VNODES;
    chring_t *r = NULL, *fresh = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    cr_assert_eq(chring_new(&fresh, &cfg), 0);
    char(*names)[16] = malloc((WIDE_MEMBERS + 1) * sizeof *names);
    chring_change_t *changes = malloc((WIDE_MEMBERS + 1) * sizeof *changes);
    cr_assert(names != NULL && changes != NULL);
    for (unsigned i = 0; i <= WIDE_MEMBERS; i++) {
        slot_name(names[i], sizeof names[i], i);
        changes[i] = (chring_change_t){names[i], 1, NULL};
    }
    cr_assert_eq(chring_update(r, changes, WIDE_MEMBERS), 0);
    const chring_snap_t *s = chring_snap_hold(r);
    cr_assert_eq(s->owner_w, 2, "65,536 slots take 2 bytes");
    chring_snap_put(r, s);
    cr_assert_eq(chring_add(r, names[WIDE_MEMBERS], 1, NULL), 0);
    cr_assert_eq(chring_update(fresh, changes, WIDE_MEMBERS + 1), 0);
    const chring_snap_t *a = chring_snap_hold(r), *b = chring_snap_hold(fresh);
    cr_assert_eq(a->owner_w, 3, "65,537 slots take 3 bytes");
    cr_assert_eq(b->owner_w, 3);
    cr_assert_eq(a->npoints, b->npoints);
    for (size_t i = 0; i < a->npoints; i++) {
        uint64_t pa, pb;
        const chring_member_t *ma, *mb;
        cr_assert_eq(chring_snap_point(a, i, &pa, &ma), 0);
        cr_assert_eq(chring_snap_point(b, i, &pb, &mb), 0);
        cr_assert(pa == pb && strcmp(chring_member_name(ma), chring_member_name(mb)) == 0,
                  "point %zu: %016llx of %s after the publish, %016llx of %s built", i,
                  (unsigned long long)pa, chring_member_name(ma), (unsigned long long)pb,
                  chring_member_name(mb));
    }
    /* Keys round every 97th point, single and in batches, against the points. */
    size_t nh = 0, cap = 3 * (a->npoints / 97 + 1);
    uint64_t *h = malloc(cap * sizeof *h);
    cr_assert_not_null(h);
    for (size_t i = 0; i < a->npoints && nh + 3 <= cap; i += 97) {
        h[nh++] = chring__pos(a, i) - 1;
        h[nh++] = chring__pos(a, i);
        h[nh++] = chring__pos(a, i) + 1;
    }
    check_positions(a, h, nh, "widened");
    free(h);
    chring_snap_put(r, a);
    chring_snap_put(fresh, b);
    chring_free(&r);
    chring_free(&fresh);
    free(changes);
    free(names);
}

/* ---- a line index whose first lines are sparse ---------------------------------------------- */

enum {
    LINE_MEMBERS = 512, /* m0 .. m511, 160 points each */
    LINE_VNODES = 160,
    LINE_POINTS = LINE_MEMBERS * LINE_VNODES, /* 81,920 points */
    LINES = LINE_POINTS / CHRING_LINE_LOAD,   /* 10,240 lines */
    SPARSE_LINES = 8,                         /* lines 0 .. 7: the sparse points only */
};

/* The sparse lines 0 .. 7 hold none, 2, 1, 3, 14 (as many as a line lists), 15 (one more: the
 * line searches), none and 1 points: point 0 of m0, m1, ... in turn, so that neighbours have
 * different owners, spread evenly across each line.  Every other point lies past them.  Line 2's
 * one point sits below line 3's second: a line 2 that listed three points (a count from the
 * ring's start) would hand the keys between them to that second point's owner. */
static const unsigned sparse_counts[SPARSE_LINES] = {
    0, 2, 1, 3, CHRING_LINE_POINTS, CHRING_LINE_POINTS + 1, 0, 1};

/* The lowest top-32-bit value of line b (as chring__bucket_start). */
static uint64_t line_top(uint64_t b)
{
    return ((b << 32) + LINES - 1) / LINES;
}

static uint64_t mix(uint64_t z)
{
    z += UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* The line of sparse point k (k below the sum of sparse_counts), and its rank in that line;
 * SPARSE_LINES past the last. */
static unsigned sparse_line(unsigned k, unsigned *rank)
{
    unsigned b = 0;
    for (; b < SPARSE_LINES && k >= sparse_counts[b]; b++)
        k -= sparse_counts[b];
    *rank = k;
    return b;
}

/* Labels "m<id>#<i>": m<k>#0 is sparse point k, spread across its line at distinct offsets (a
 * line spans about 419,000 values of the top 32 bits); the others lie past the sparse lines. */
static uint64_t line_hash(const void *data, size_t len, void *ctx)
{
    (void)ctx;
    const char *p = data;
    const char *hash = memchr(p, '#', len);
    cr_assert(p[0] == 'm' && hash != NULL, "a label");
    uint64_t id = 0, i = 0; /* the label is not NUL-terminated */
    for (const char *c = p + 1; c < hash; c++)
        id = id * 10 + (uint64_t)(*c - '0');
    for (const char *c = hash + 1; c < p + len; c++)
        i = i * 10 + (uint64_t)(*c - '0');
    unsigned rank, b = i == 0 ? sparse_line((unsigned)id, &rank) : SPARSE_LINES;
    if (b < SPARSE_LINES) {
        uint64_t width = line_top(b + 1) - line_top(b);
        uint64_t top = line_top(b) + width * (2 * rank + 1) / (2 * sparse_counts[b] + 1);
        return (top << 32) | (mix(id) & UINT32_MAX);
    }
    uint64_t at = mix(id * 1000 + i), floor = line_top(SPARSE_LINES + 1) << 32;
    return at < floor ? at + floor : at;
}

static void check_sparse_lines(chring_t *r, const char *what, int removed)
{
    const chring_snap_t *s = chring_snap_hold(r);
    cr_assert_not_null(s->lines, "%s: a line index", what);
    cr_assert_eq(s->nbuckets, LINES, "%s: %zu lines", what, s->nbuckets);
    unsigned rank, gone = removed < 0 ? SPARSE_LINES : sparse_line((unsigned)removed, &rank);
    for (size_t b = 0; b < SPARSE_LINES; b++) {
        size_t first = s->lines[b].first & ~CHRING_LINE_FULL;
        size_t count = (s->lines[b + 1].first & ~CHRING_LINE_FULL) - first;
        size_t want = sparse_counts[b] - (b == gone ? 1 : 0);
        cr_assert_eq(count, want, "%s: line %zu holds %zu points, not %zu", what, b, count, want);
    }
    uint64_t h[4096];
    size_t nh = 0;
    uint64_t end = line_top(SPARSE_LINES + 1) << 32; /* and the first line after them */
    for (size_t i = 0; i < s->npoints && chring__pos(s, i) < end + (UINT64_C(1) << 40); i++) {
        h[nh++] = chring__pos(s, i) - 1;
        h[nh++] = chring__pos(s, i);
        h[nh++] = chring__pos(s, i) + 1;
    }
    for (uint64_t b = 0; b <= SPARSE_LINES; b++) {
        uint64_t lo = line_top(b) << 32, hi = (line_top(b + 1) << 32) - 1;
        h[nh++] = lo;
        h[nh++] = hi;
        for (uint64_t k = 1; k < 64; k++)
            h[nh++] = lo + (hi - lo) / 64 * k;
    }
    h[nh++] = 0;
    h[nh++] = UINT64_MAX; /* past the last point: wraps to the first */
    cr_assert_lt(nh, sizeof h / sizeof h[0]);
    check_positions(s, h, nh, what);
    chring_snap_put(r, s);
}

Test(index, sparse_first_lines_give_every_key_its_owner, .timeout = 120)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_CUSTOM;
    cfg.hash = line_hash;
    cfg.hash_bits = 64;
    cfg.vnodes = LINE_VNODES;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    static char names[LINE_MEMBERS][12];
    static chring_change_t changes[LINE_MEMBERS];
    for (unsigned i = 0; i < LINE_MEMBERS; i++) {
        snprintf(names[i], sizeof names[i], "m%u", i);
        changes[i] = (chring_change_t){names[i], 1, NULL};
    }
    cr_assert_eq(chring_update(r, changes, LINE_MEMBERS), 0);
    check_sparse_lines(r, "built", -1);
    /* A publish shifts the lines and rewrites those round the changed points: the owner of
     * line 2's only point leaves and comes back; so does the owner of line 1's first. */
    cr_assert_eq(chring_remove(r, "m2"), 0);
    check_sparse_lines(r, "m2 removed", 2);
    cr_assert_eq(chring_add(r, "m2", 1, NULL), 0);
    check_sparse_lines(r, "m2 back", -1);
    cr_assert_eq(chring_remove(r, "m0"), 0);
    check_sparse_lines(r, "m0 removed", 0);
    cr_assert_eq(chring_add(r, "m0", 1, NULL), 0);
    check_sparse_lines(r, "m0 back", -1);
    chring_free(&r);
}
