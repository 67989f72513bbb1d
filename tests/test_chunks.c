/* Chunked snapshots (src/chunk.c, docs/design.md §4.2), seen from inside: which rings take
 * chunks, that a publish shares every chunk its change does not fall in and replaces exactly
 * those it does, that every key answers as a plain search of the points after every kind of
 * publish (the chunks kept, or the ring laid out anew when it leaves its band), and that a held
 * snapshot keeps answering from its own chunks.  Each test lowers the threshold with
 * CHRING_CHUNK_MIN before its first ring (criterion runs each test in a process of its own, and
 * the library reads the variable once).  Internal: links the static library and reads the
 * snapshot's table (src/internal.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include "index.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static chring_t *ring_new(const char *min, uint32_t vnodes)
{
    cr_assert_eq(setenv("CHRING_CHUNK_MIN", min, 1), 0);
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = vnodes;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0, "chring_new");
    return r;
}

static void add_range(chring_t *r, int from, int to, uint32_t weight)
{
    for (int i = from; i < to; i++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", i);
        cr_assert_eq(chring_add(r, name, weight, NULL), 0, "add %s", name);
    }
}

static void set_weight(chring_t *r, int i, uint32_t weight)
{
    char name[16];
    snprintf(name, sizeof name, "m%d", i);
    chring_change_t c = {.name = name, .weight = weight};
    cr_assert_eq(chring_update(r, &c, 1), 0, "update %s to %u", name, weight);
}

/* The owner of h by a binary search of the snapshot's points through the public accessor: the
 * first point at or after h, wrapping to point 0. */
static const chring_member_t *search_owner(const chring_snap_t *s, uint64_t h)
{
    size_t lo = 0, hi = chring_snap_points(s);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t p;
        cr_assert_eq(chring_snap_point(s, mid, &p, NULL), 0);
        if (p < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == chring_snap_points(s))
        lo = 0;
    const chring_member_t *m = NULL;
    cr_assert_eq(chring_snap_point(s, lo, NULL, &m), 0);
    return m;
}

/* Every point in order, the table consistent (each chunk's first is the points before it, its
 * points in its buckets), and keys (random, and each point's position and its neighbours)
 * answer as the search does, one at a time and in a batch. */
static void check_snapshot(const chring_snap_t *s, int keys)
{
    cr_assert_eq(chring_snap_check(s), 0, "chring_snap_check");
    size_t n = chring_snap_points(s);
    uint64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t p;
        cr_assert_eq(chring_snap_point(s, i, &p, NULL), 0);
        cr_assert_geq(p, prev, "point %zu out of order", i);
        prev = p;
    }
    if (s->chunks != NULL) {
        size_t first = 0;
        for (size_t c = 0; c < s->nchunks; c++) {
            const struct chring_chunk *k = s->chunks[c].c;
            cr_assert_eq(s->chunks[c].first, first, "chunk %zu starts at %zu, not %zu", c,
                         s->chunks[c].first, first);
            for (size_t i = 0; i < k->npoints; i++)
                cr_assert_eq(chring__bucket(s, k->pos[i]) >> s->chunk_shift, c,
                             "a point of chunk %zu is in another chunk's buckets", c);
            first += k->npoints;
        }
        cr_assert_eq(first, n);
        cr_assert_eq(s->chunks[s->nchunks].first, n);
    }
    uint64_t hashes[64];
    const chring_member_t *batch[64];
    for (int k = 0; k < keys; k += 64) {
        for (int j = 0; j < 64; j++) {
            uint64_t h = rnd();
            if (j % 4 == 0 && n > 0) { /* a point's own position, or one off it */
                uint64_t p;
                cr_assert_eq(chring_snap_point(s, (size_t)(h % n), &p, NULL), 0);
                h = p + (uint64_t)(j % 3) - 1;
            }
            hashes[j] = h;
            const chring_member_t *want = search_owner(s, h);
            cr_assert_eq(chring_snap_lookup_hash(s, h), want, "key %016llx", (unsigned long long)h);
        }
        cr_assert_eq(chring_snap_lookup_hashes(s, hashes, 64, batch), 64);
        for (int j = 0; j < 64; j++)
            cr_assert_eq(batch[j], search_owner(s, hashes[j]), "batch key %016llx",
                         (unsigned long long)hashes[j]);
    }
}

Test(chunks, large_rings_of_the_default_profile_take_chunks_and_others_stay_flat, .timeout = 60)
{
    chring_t *r = ring_new("2000", 16);
    add_range(r, 0, 100, 1); /* 1,600 points */
    const chring_snap_t *s = chring_snap_hold(r);
    cr_assert_null(s->chunks, "1,600 points are below the threshold");
    chring_snap_put(r, s);
    add_range(r, 100, 140, 1); /* 2,240 */
    s = chring_snap_hold(r);
    cr_assert_not_null(s->chunks, "2,240 points of hash64 take chunks");
    cr_assert_null(s->pos);
    cr_assert_gt(s->nchunks, 1);
    check_snapshot(s, 512);
    chring_snap_put(r, s);
    chring_free(&r);

    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 16;
    cfg.profile = CHRING_PROFILE_KETAMA;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    add_range(r, 0, 20, 1);
    s = chring_snap_hold(r);
    cr_assert_null(s->chunks, "ketama rings stay flat");
    chring_snap_put(r, s);
    chring_free(&r);
}

/* The chunks a set of positions falls in, as a bitmap of nchunks bits. */
static void mark(const chring_snap_t *s, uint64_t p, unsigned char *bits)
{
    size_t c = chring__bucket(s, p) >> s->chunk_shift;
    bits[c / 8] |= (unsigned char)(1u << (c % 8));
}

Test(chunks, a_publish_shares_every_chunk_its_change_does_not_fall_in, .timeout = 60)
{
    rng_state = 7;
    chring_t *r = ring_new("1000", 16);
    add_range(r, 0, 400, 1); /* 6,400 points */
    for (int round = 0; round < 6; round++) {
        const chring_snap_t *a = chring_snap_hold(r);
        cr_assert_not_null(a->chunks);
        int victim = (int)(rnd() % 400);
        char name[16];
        snprintf(name, sizeof name, "m%d", victim);
        const chring_member_t *m = chring_snap_find(a, name);
        bool removing = m != NULL;
        if (removing)
            cr_assert_eq(chring_remove(r, name), 0);
        else
            cr_assert_eq(chring_add(r, name, 1, NULL), 0);
        const chring_snap_t *b = chring_snap_hold(r);
        cr_assert_eq(a->nchunks, b->nchunks, "the geometry is kept");
        /* The chunks the member's points fall in: in a (removed) or in b (added). */
        const chring_snap_t *with = removing ? a : b;
        const chring_member_t *who = removing ? m : chring_snap_find(b, name);
        unsigned char *bits = calloc(a->nchunks / 8 + 1, 1);
        cr_assert_not_null(bits);
        size_t member_points = 0;
        for (size_t i = 0; i < chring_snap_points(with); i++) {
            uint64_t p;
            const chring_member_t *o;
            cr_assert_eq(chring_snap_point(with, i, &p, &o), 0);
            if (o == who) {
                mark(with, p, bits);
                member_points++;
            }
        }
        cr_assert_eq(member_points, 16);
        size_t touched = 0;
        for (size_t c = 0; c < a->nchunks; c++) {
            bool in = (bits[c / 8] >> (c % 8)) & 1;
            touched += in;
            if (in)
                cr_assert_neq(a->chunks[c].c, b->chunks[c].c, "chunk %zu has a change", c);
            else
                cr_assert_eq(a->chunks[c].c, b->chunks[c].c, "chunk %zu was copied", c);
        }
        cr_assert_geq(touched, 1);
        cr_assert_leq(touched, 16);
        free(bits);
        check_snapshot(b, 256);
        check_snapshot(a, 256); /* still its own */
        chring_snap_put(r, a);
        chring_snap_put(r, b);
    }
    chring_free(&r);
}

Test(chunks, every_key_answers_as_a_search_after_every_kind_of_publish, .timeout = 120)
{
    rng_state = 11;
    chring_t *r = ring_new("1", 8);
    int live = 30;
    add_range(r, 0, live, 1);
    bool member[600] = {false};
    for (int i = 0; i < live; i++)
        member[i] = true;
    /* Grows to 500 members (the ring leaves its band: laid out anew several times), churns,
     * shrinks to 10 (again), with weight changes throughout. */
    for (int step = 0; step < 240; step++) {
        int target = step < 80 ? 500 : step < 160 ? 300 : 10;
        int i = (int)(rnd() % 520);
        char name[16];
        snprintf(name, sizeof name, "m%d", i);
        int n = 0;
        for (int j = 0; j < 600; j++)
            n += member[j];
        if (!member[i] && n < target) {
            /* A batch of adds, so that the ring grows fast enough to leave its band. */
            for (int j = i; j < 520 && j < i + 12; j++)
                if (!member[j]) {
                    add_range(r, j, j + 1, 1 + (uint32_t)(rnd() % 3));
                    member[j] = true;
                }
        } else if (member[i] && n > target) {
            for (int j = i; j < 520 && j < i + 12 && n > target; j++)
                if (member[j]) {
                    snprintf(name, sizeof name, "m%d", j);
                    cr_assert_eq(chring_remove(r, name), 0);
                    member[j] = false;
                    n--;
                }
        } else if (member[i]) {
            set_weight(r, i, 1 + (uint32_t)(rnd() % 4));
        }
        const chring_snap_t *s = chring_snap_hold(r);
        if (chring_snap_points(s) > 0)
            cr_assert_not_null(s->chunks, "step %d: every ring takes chunks here", step);
        check_snapshot(s, 128);
        chring_snap_put(r, s);
    }
    chring_free(&r);
}

Test(chunks, a_held_snapshot_answers_from_its_own_chunks_after_many_publishes, .timeout = 60)
{
    rng_state = 3;
    chring_t *r = ring_new("1000", 16);
    add_range(r, 0, 300, 1);
    const chring_snap_t *a = chring_snap_hold(r);
    enum {
        KEYS = 2048
    };
    static uint64_t hashes[KEYS];
    static const chring_member_t *before[KEYS];
    for (int k = 0; k < KEYS; k++) {
        hashes[k] = rnd();
        before[k] = chring_snap_lookup_hash(a, hashes[k]);
    }
    for (int i = 0; i < 40; i++) { /* every publish replaces chunks a holds */
        char name[16];
        snprintf(name, sizeof name, "m%d", i);
        cr_assert_eq(chring_remove(r, name), 0);
    }
    cr_assert_eq(chring_quiesce(r), 0); /* every replaced snapshot given up: only the hold */
    for (int k = 0; k < KEYS; k++)
        cr_assert_eq(chring_snap_lookup_hash(a, hashes[k]), before[k], "key %d", k);
    check_snapshot(a, 256);
    chring_snap_put(r, a);
    chring_free(&r);
}

/* Across the threshold both ways: a flat ring that grows into chunks, and a chunked ring that
 * shrinks back to flat (laid out from a flat view of its chunks, which all go with the old
 * snapshot), with a snapshot held across each crossing answering as before. */
Test(chunks, a_ring_crosses_the_threshold_both_ways_and_held_snapshots_keep_answering,
     .timeout = 60)
{
    rng_state = 5;
    chring_t *r = ring_new("2000", 16);
    add_range(r, 0, 120, 1); /* 1,920 points: flat */
    enum {
        KEYS = 512
    };
    static uint64_t hashes[KEYS];
    static const chring_member_t *before[KEYS];
    for (int k = 0; k < KEYS; k++)
        hashes[k] = rnd();
    for (int round = 0; round < 3; round++) {
        const chring_snap_t *a = chring_snap_hold(r);
        bool was_chunked = a->chunks != NULL;
        for (int k = 0; k < KEYS; k++)
            before[k] = chring_snap_lookup_hash(a, hashes[k]);
        if (was_chunked) { /* back to 1,920 points: flat again */
            for (int i = 120; i < 141; i++) {
                char name[16];
                snprintf(name, sizeof name, "m%d", i);
                cr_assert_eq(chring_remove(r, name), 0);
            }
        } else {
            add_range(r, 120, 141, 1); /* 2,256 points: chunked */
        }
        const chring_snap_t *b = chring_snap_hold(r);
        cr_assert_neq(b->chunks != NULL, was_chunked, "round %d: the layout changed", round);
        check_snapshot(b, 256);
        cr_assert_eq(chring_quiesce(r), 0);
        for (int k = 0; k < KEYS; k++)
            cr_assert_eq(chring_snap_lookup_hash(a, hashes[k]), before[k], "round %d key %d", round,
                         k);
        check_snapshot(a, 128);
        chring_snap_put(r, a);
        chring_snap_put(r, b);
    }
    chring_free(&r);
}

/* Owner slots widen from 2 bytes to 3 when the slots pass 65,536: the publish cannot keep the
 * chunks (their slots are 2 bytes) and lays the ring out anew, while a snapshot held from before
 * still answers from its own. */
Test(chunks, owner_slots_that_widen_lay_the_ring_out_anew, .timeout = 120)
{
    rng_state = 9;
    chring_t *r = ring_new("1", 1);
    enum {
        N = 65536
    };
    chring_change_t *c = calloc(N, sizeof *c);
    char(*names)[16] = calloc(N + 1, 16);
    cr_assert(c != NULL && names != NULL);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], 16, "w%d", i);
        c[i] = (chring_change_t){.name = names[i], .weight = 1};
    }
    cr_assert_eq(chring_update(r, c, N), 0);
    const chring_snap_t *a = chring_snap_hold(r);
    cr_assert_not_null(a->chunks, "65,536 slots: the bucket index, chunked");
    cr_assert_eq(a->owner_w, 2);
    check_snapshot(a, 128);
    snprintf(names[N], 16, "w%d", N);
    cr_assert_eq(chring_add(r, names[N], 1, NULL), 0);
    const chring_snap_t *b = chring_snap_hold(r);
    cr_assert_not_null(b->chunks);
    cr_assert_eq(b->owner_w, 3, "65,537 slots take 3 bytes");
    check_snapshot(b, 128);
    check_snapshot(a, 64); /* its own chunks, 2-byte slots */
    chring_snap_put(r, a);
    chring_snap_put(r, b);
    chring_free(&r);
    free(c);
    free(names);
}
