/* The ring against an independent model (SPEC §1, §2): after every step of a random sequence of
 * adds, removes, weight changes, batches and syncs, the snapshot's points must be exactly the
 * labels' hashes sorted by (position, name, index), and every lookup must be the first point at
 * or after the key's hash, wrapping.  Run for each mergeable profile and for coarse custom
 * hashes whose many equal positions exercise the tie order.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

#include <xxhash.h>

#define MAX_MEMBERS 24
#define VNODES 12
#define MAX_WEIGHT 4
#define MAX_POINTS (MAX_MEMBERS * VNODES * MAX_WEIGHT)

typedef uint64_t (*model_hash)(const void *data, size_t len);

struct model {
    model_hash hash;
    unsigned bits;
    uint32_t weight[MAX_MEMBERS]; /* 0: not a member */
    int fnv16;                    /* labels "<name>", "<i>-<name>"; skip taken positions */
    uint64_t join[MAX_MEMBERS];   /* join sequence of each member (fnv16) */
    uint64_t seq;
};

struct model_point {
    uint64_t pos;
    int member;
    uint32_t index;
};

static void member_name(char *buf, size_t cap, int j)
{
    /* Names of different lengths with common prefixes test memcmp, shorter-first order. */
    static const char *const stems[] = {"s", "s1", "sa", "t", "s10", "z", "sab", "a"};
    snprintf(buf, cap, "%s%d", stems[j % 8], j / 8);
}

static int name_order(int a, int b)
{
    char x[32], y[32];
    member_name(x, sizeof x, a);
    member_name(y, sizeof y, b);
    size_t lx = strlen(x), ly = strlen(y);
    int c = memcmp(x, y, lx < ly ? lx : ly);
    if (c)
        return c;
    return (lx > ly) - (lx < ly);
}

static int compare_model_points(const void *a, const void *b)
{
    const struct model_point *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    if (x->member != y->member)
        return name_order(x->member, y->member);
    return (x->index > y->index) - (x->index < y->index);
}

static uint64_t width_mask(unsigned bits)
{
    return bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
}

static size_t model_points_fnv16(const struct model *md, struct model_point *out)
{
    /* SPEC §2: member by member in join order, each member's points in index order; a
     * position already taken is skipped. */
    static unsigned char taken[65536];
    memset(taken, 0, sizeof taken);
    int order[MAX_MEMBERS], members = 0;
    for (int j = 0; j < MAX_MEMBERS; j++)
        if (md->weight[j])
            order[members++] = j;
    for (int a = 1; a < members; a++)
        for (int b = a; b > 0 && md->join[order[b - 1]] > md->join[order[b]]; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    size_t count = 0;
    for (int o = 0; o < members; o++) {
        int j = order[o];
        char name[32], label[48];
        member_name(name, sizeof name, j);
        for (uint32_t i = 0; i < md->weight[j] * VNODES; i++) {
            int len = i == 0 ? snprintf(label, sizeof label, "%s", name)
                             : snprintf(label, sizeof label, "%u-%s", (unsigned)i, name);
            uint64_t pos = ref_fnv1a32(label, (size_t)len) & 0xffffu;
            if (taken[pos])
                continue;
            taken[pos] = 1;
            out[count].pos = pos;
            out[count].member = j;
            out[count].index = i;
            count++;
        }
    }
    qsort(out, count, sizeof *out, compare_model_points);
    return count;
}

static size_t model_points(const struct model *md, struct model_point *out)
{
    if (md->fnv16)
        return model_points_fnv16(md, out);
    size_t count = 0;
    for (int j = 0; j < MAX_MEMBERS; j++) {
        char name[32], label[48];
        member_name(name, sizeof name, j);
        for (uint32_t i = 0; i < md->weight[j] * VNODES; i++) {
            int len = snprintf(label, sizeof label, "%s#%u", name, (unsigned)i);
            out[count].pos = md->hash(label, (size_t)len) & width_mask(md->bits);
            out[count].member = j;
            out[count].index = i;
            count++;
        }
    }
    qsort(out, count, sizeof *out, compare_model_points);
    return count;
}

static void model_check(chring_t *r, const struct model *md, int step)
{
    static struct model_point expect[MAX_POINTS];
    size_t count = model_points(md, expect);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_check(s), 0, "step %d: snapshot invariants", step);
    cr_assert_eq(chring_snap_points(s), count, "step %d: point count", step);
    size_t members = 0;
    for (int j = 0; j < MAX_MEMBERS; j++)
        members += md->weight[j] > 0;
    cr_assert_eq(chring_snap_len(s), members, "step %d: member count", step);
    char name[32];
    for (size_t i = 0; i < count; i++) {
        uint64_t pos;
        const chring_member_t *m;
        cr_assert_eq(chring_snap_point(s, i, &pos, &m), 0, "step %d: point %zu", step, i);
        member_name(name, sizeof name, expect[i].member);
        cr_assert_eq(pos, expect[i].pos, "step %d: position of point %zu", step, i);
        cr_assert_str_eq(chring_member_name(m), name, "step %d: owner of point %zu at %llu", step,
                         i, (unsigned long long)pos);
    }
    for (int j = 0; j < MAX_MEMBERS; j++) {
        member_name(name, sizeof name, j);
        const chring_member_t *m = chring_snap_find(s, name);
        if (md->weight[j] == 0) {
            cr_assert_null(m, "step %d: %s should be absent", step, name);
            continue;
        }
        cr_assert_not_null(m, "step %d: %s missing", step, name);
        cr_assert_eq(chring_snap_weight(s, m), md->weight[j], "step %d: weight of %s", step, name);
        size_t mine = 0;
        for (size_t i = 0; i < count; i++)
            mine += expect[i].member == j;
        cr_assert_eq(chring_snap_member_points(s, m), mine, "step %d: points of %s", step, name);
        if (!md->fnv16)
            cr_assert_eq(mine, (size_t)md->weight[j] * VNODES, "step %d: V * w", step);
    }
    /* Lookups: the first point at or after the key's hash, wrapping. */
    char key[32];
    for (int k = 0; k < 300; k++) {
        int len = snprintf(key, sizeof key, "key-%d", k * 7919 + step);
        uint64_t h = md->hash(key, (size_t)len) & width_mask(md->bits);
        cr_assert_eq(chring_snap_hash(s, key, (size_t)len), h, "step %d: hash of %s", step, key);
        const chring_member_t *got = chring_snap_lookup(s, key, (size_t)len);
        if (count == 0) {
            cr_assert_null(got, "step %d: empty ring", step);
            continue;
        }
        size_t lo = 0, hi = count;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (expect[mid].pos < h)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == count)
            lo = 0;
        member_name(name, sizeof name, expect[lo].member);
        cr_assert_not_null(got, "step %d: no owner", step);
        cr_assert_str_eq(chring_member_name(got), name, "step %d: owner of %s (hash %llu)", step,
                         key, (unsigned long long)h);
        cr_assert_eq(chring_snap_lookup_hash(s, h), got, "step %d: lookup_hash", step);
    }
    /* Shares sum to one on a non-empty ring. */
    if (members > 0) {
        double sum = 0;
        for (size_t i = 0; i < chring_snap_len(s); i++)
            sum += chring_member_share(s, chring_snap_member(s, i));
        cr_assert_float_eq(sum, 1.0, 1e-9, "step %d: shares", step);
    }
    chring_snap_exit(r, s);
}

/* A small deterministic generator (xorshift64*). */
static uint64_t rng_state;
static uint32_t rng_below(uint32_t n)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 33) % n;
}

static void run_model(chring_t *r, struct model *md, uint64_t seed, int steps)
{
    rng_state = seed;
    memset(md->weight, 0, sizeof md->weight);
    memset(md->join, 0, sizeof md->join);
    md->seq = 0;
    char names[MAX_MEMBERS][32];
    for (int j = 0; j < MAX_MEMBERS; j++)
        member_name(names[j], sizeof names[j], j);
    model_check(r, md, -1);
    for (int step = 0; step < steps; step++) {
        int j = (int)rng_below(MAX_MEMBERS);
        uint32_t w = 1 + rng_below(MAX_WEIGHT);
        switch (rng_below(6)) {
        case 0:
        case 1: /* add (or re-weight) */
            cr_assert_eq(chring_add(r, names[j], w, NULL), 0, "add");
            if (md->weight[j] == 0)
                md->join[j] = ++md->seq;
            md->weight[j] = w;
            break;
        case 2: /* remove */
            cr_assert_eq(chring_remove(r, names[j]), md->weight[j] ? 0 : -ENOENT, "remove");
            md->weight[j] = 0;
            break;
        case 3: /* set_weight */
            cr_assert_eq(chring_set_weight(r, names[j], w), md->weight[j] ? 0 : -ENOENT,
                         "set_weight");
            if (md->weight[j])
                md->weight[j] = w;
            break;
        case 4: { /* a batch of up to 4 distinct changes */
            chring_change_t batch[4];
            int used[4];
            size_t n = 0;
            uint32_t want = 1 + rng_below(4);
            uint32_t next[MAX_MEMBERS];
            memcpy(next, md->weight, sizeof next);
            int ok = 1;
            for (uint32_t t = 0; t < want; t++) {
                int k = (int)rng_below(MAX_MEMBERS);
                int dup = 0;
                for (size_t u = 0; u < n; u++)
                    dup |= used[u] == k;
                if (dup)
                    continue;
                uint32_t bw = rng_below(MAX_WEIGHT + 1); /* 0 removes */
                if (bw == 0 && md->weight[k] == 0)
                    ok = 0; /* removing a non-member fails the batch */
                batch[n] = (chring_change_t){names[k], bw, NULL};
                used[n++] = k;
                next[k] = bw;
            }
            int rc = chring_update(r, batch, n);
            cr_assert_eq(rc, ok ? 0 : -ENOENT, "update");
            if (ok) {
                for (size_t u = 0; u < n; u++)
                    if (md->weight[used[u]] == 0 && next[used[u]] != 0)
                        md->join[used[u]] = ++md->seq; /* new members join in array order */
                memcpy(md->weight, next, sizeof next);
            }
            break;
        }
        case 5: { /* sync to a random subset */
            chring_change_t feed[MAX_MEMBERS];
            size_t n = 0;
            uint32_t next[MAX_MEMBERS] = {0};
            int feed_order[MAX_MEMBERS];
            /* A shuffled feed, so that array order differs from name order. */
            for (int k = 0; k < MAX_MEMBERS; k++)
                feed_order[k] = k;
            for (int k = MAX_MEMBERS - 1; k > 0; k--) {
                int t = (int)rng_below((uint32_t)k + 1), v = feed_order[k];
                feed_order[k] = feed_order[t];
                feed_order[t] = v;
            }
            for (int f = 0; f < MAX_MEMBERS; f++) {
                int k = feed_order[f];
                if (rng_below(3) == 0) {
                    uint32_t sw = md->weight[k] && rng_below(2) ? md->weight[k]
                                                                 : 1 + rng_below(MAX_WEIGHT);
                    feed[n++] = (chring_change_t){names[k], sw, NULL};
                    next[k] = sw;
                }
            }
            cr_assert_eq(chring_sync(r, feed, n), 0, "sync");
            for (size_t f = 0; f < n; f++)
                for (int k = 0; k < MAX_MEMBERS; k++)
                    if (feed[f].name == names[k] && md->weight[k] == 0)
                        md->join[k] = ++md->seq;
            memcpy(md->weight, next, sizeof next);
            break;
        }
        }
        model_check(r, md, step);
    }
}

static chring_t *model_ring(chring_profile_t profile, chring_hash_fn custom, unsigned bits)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    cfg.vnodes = VNODES;
    if (profile == CHRING_PROFILE_CUSTOM) {
        cfg.hash = custom;
        cfg.hash_bits = bits;
    }
    return ring_create(&cfg);
}

static uint64_t h_hash64(const void *d, size_t n)
{
    return ref_hash64(d, n);
}
static uint64_t h_fnv32(const void *d, size_t n)
{
    return ref_fnv1a32(d, n);
}
static uint64_t h_murmur32(const void *d, size_t n)
{
    return chring_murmur3_32(d, n, 0);
}
static uint64_t h_xxh3(const void *d, size_t n)
{
    return XXH3_64bits(d, n);
}
/* Coarse hashes: few distinct positions, so many points share one (ties by name, index). */
static uint64_t h_coarse64(const void *d, size_t n)
{
    return (ref_fnv1a32(d, n) % 97) * 0x0290000000000000ull;
}
static uint64_t h_coarse16(const void *d, size_t n)
{
    return (ref_fnv1a32(d, n) % 61) * 1000u;
}
static uint64_t h_wide32(const void *d, size_t n)
{
    /* Only the low 32 bits count on a 32-bit custom ring. */
    return ref_hash64(d, n);
}

static uint64_t c_coarse64(const void *d, size_t n, void *ctx)
{
    (void)ctx;
    return h_coarse64(d, n);
}
static uint64_t c_coarse16(const void *d, size_t n, void *ctx)
{
    (void)ctx;
    return h_coarse16(d, n);
}
static uint64_t c_wide32(const void *d, size_t n, void *ctx)
{
    (void)ctx;
    return h_wide32(d, n);
}

Test(model, hash64_random_changes)
{
    struct model md = {h_hash64, 64, {0}, 0, {0}, 0};
    chring_t *r = model_ring(CHRING_PROFILE_HASH64, NULL, 64);
    run_model(r, &md, 0x1234567ull, 120);
    chring_free(&r);
}

Test(model, fnv32_random_changes)
{
    struct model md = {h_fnv32, 32, {0}, 0, {0}, 0};
    chring_t *r = model_ring(CHRING_PROFILE_FNV32, NULL, 32);
    run_model(r, &md, 0x7654321ull, 80);
    chring_free(&r);
}

Test(model, murmur32_random_changes)
{
    struct model md = {h_murmur32, 32, {0}, 0, {0}, 0};
    chring_t *r = model_ring(CHRING_PROFILE_MURMUR32, NULL, 32);
    run_model(r, &md, 0xabcdefull, 80);
    chring_free(&r);
}

Test(model, xxh3_random_changes)
{
    struct model md = {h_xxh3, 64, {0}, 0, {0}, 0};
    chring_t *r = model_ring(CHRING_PROFILE_XXH3, NULL, 64);
    run_model(r, &md, 0x5eedull, 80);
    chring_free(&r);
}

Test(model, coarse_64bit_custom_ties_by_name_and_index)
{
    struct model md = {h_coarse64, 64, {0}, 0, {0}, 0};
    chring_t *r = model_ring(CHRING_PROFILE_CUSTOM, c_coarse64, 64);
    run_model(r, &md, 0xc0a75eull, 120);
    chring_free(&r);
}

Test(model, coarse_16bit_custom_ties_by_name_and_index)
{
    struct model md = {h_coarse16, 16, {0}, 0, {0}, 0};
    chring_t *r = model_ring(CHRING_PROFILE_CUSTOM, c_coarse16, 16);
    run_model(r, &md, 0x16b17ull, 120);
    chring_free(&r);
}

Test(model, custom_32bit_truncates_wide_values)
{
    struct model md = {h_wide32, 32, {0}, 0, {0}, 0};
    chring_t *r = model_ring(CHRING_PROFILE_CUSTOM, c_wide32, 32);
    run_model(r, &md, 0x32ull, 80);
    chring_free(&r);
}

/* Points at the very ends of the ring. */
static const struct table_entry edge_entries[] = {
    {"lo#0", 0}, {"hi#0", UINT64_MAX}, {"mid#0", 1ull << 63}, {"k0", 0}, {"kmax", UINT64_MAX},
    {"k1", 1},   {"kmid", 1ull << 63},
};
static const struct table_hash edge_table = {edge_entries, 7, 12345};

Test(model, points_at_zero_and_max)
{
    chring_t *r = table_ring(&edge_table, 64, 1, 1.25);
    add_or_fail(r, "lo", 1, NULL);
    add_or_fail(r, "hi", 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_str_eq(owner_of(s, "k0"), "lo", "0 -> the point at 0");
    cr_assert_str_eq(owner_of(s, "k1"), "hi", "1 -> the point at max");
    cr_assert_str_eq(owner_of(s, "kmax"), "hi", "max -> the point at max");
    const double ring = 18446744073709551616.0;
    /* lo owns only position 0; hi owns 1 .. 2^64 - 1. */
    double share_lo = chring_member_share(s, chring_snap_find(s, "lo"));
    cr_assert_float_eq(share_lo, 1.0 / ring, 1e-6 / ring, "share of lo");
    cr_assert_float_eq(chring_member_share(s, chring_snap_find(s, "hi")), 1.0, 1e-12, "hi");
    chring_snap_exit(r, s);
    const chring_snap_t *before = chring_snap_hold(r);
    cr_assert_eq(chring_remove(r, "hi"), 0, "remove hi");
    s = chring_snap_enter(r);
    cr_assert_str_eq(owner_of(s, "kmax"), "lo", "max wraps to 0");
    cr_assert_float_eq(chring_member_share(s, chring_snap_find(s, "lo")), 1.0, 1e-12, "alone");
    double moved = chring_snap_moved(before, s);
    cr_assert_float_eq(moved, (ring - 1.0) / ring, 1e-12, "everything but position 0 moved");
    chring_snap_exit(r, s);
    add_or_fail(r, "mid", 1, NULL);
    s = chring_snap_enter(r);
    cr_assert_str_eq(owner_of(s, "kmid"), "mid", "exactly on mid");
    cr_assert_str_eq(owner_of(s, "kmax"), "lo", "max wraps to 0");
    cr_assert_float_eq(chring_member_share(s, chring_snap_find(s, "mid")), 0.5, 1e-12, "half");
    chring_snap_exit(r, s);
    chring_snap_put(r, before);
    chring_free(&r);
}

static uint64_t edge16(const void *data, size_t len, void *ctx)
{
    (void)ctx;
    if (len == 4 && memcmp(data, "lo#0", 4) == 0)
        return 0;
    if (len == 4 && memcmp(data, "hi#0", 4) == 0)
        return 0xfffe;
    if (len == 4 && memcmp(data, "kmax", 4) == 0)
        return 0xffff;
    if (len == 3 && memcmp(data, "khi", 3) == 0)
        return 0xfffe;
    return 5;
}

Test(model, sixteen_bit_top_wraps)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_CUSTOM;
    cfg.hash = edge16;
    cfg.hash_bits = 16;
    cfg.vnodes = 1;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, "lo", 1, NULL);
    add_or_fail(r, "hi", 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_str_eq(owner_of(s, "khi"), "hi", "0xfffe -> the point at 0xfffe");
    cr_assert_str_eq(owner_of(s, "kmax"), "lo", "0xffff wraps to 0");
    cr_assert_str_eq(owner_of(s, "other"), "hi", "5 -> 0xfffe");
    /* lo owns 0xffff and 0: 2 of 65536 positions. */
    cr_assert_float_eq(chring_member_share(s, chring_snap_find(s, "lo")), 2.0 / 65536, 1e-15,
                       "share of lo");
    cr_assert_eq(chring_snap_lookup_hash(s, 0xffff), chring_snap_find(s, "lo"), "by hash");
    chring_snap_exit(r, s);
    chring_free(&r);
}

static uint64_t h_fnv16(const void *d, size_t n)
{
    return ref_fnv1a32(d, n) & 0xffffu;
}

Test(model, fnv16_random_changes_follow_join_order)
{
    struct model md = {h_fnv16, 16, {0}, 1, {0}, 0};
    chring_t *r = model_ring(CHRING_PROFILE_FNV16, NULL, 16);
    run_model(r, &md, 0xf16ull, 150);
    chring_free(&r);
}

/* Lookups on a large ring agree with a binary search over the snapshot's own point list, for
 * hashes spread over the whole width and hashes right at, just before and just after points. */
static void check_large_ring(chring_profile_t profile, int members)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    chring_t *r = ring_create(&cfg);
    chring_change_t *feed = calloc((size_t)members, sizeof *feed);
    char(*names)[16] = calloc((size_t)members, sizeof *names);
    cr_assert(feed && names, "out of memory in the test");
    for (int i = 0; i < members; i++) {
        snprintf(names[i], sizeof names[i], "node-%d", i);
        feed[i] = (chring_change_t){names[i], 1 + (uint32_t)(i % 3), NULL};
    }
    cr_assert_eq(chring_sync(r, feed, (size_t)members), 0, "sync");
    const chring_snap_t *s = chring_snap_enter(r);
    unsigned bits = chring_snap_hash_bits(s);
    size_t count = chring_snap_points(s);
    uint64_t *pos = malloc(count * sizeof *pos);
    const chring_member_t **owner = malloc(count * sizeof *owner);
    cr_assert(pos && owner, "out of memory in the test");
    for (size_t i = 0; i < count; i++)
        cr_assert_eq(chring_snap_point(s, i, &pos[i], &owner[i]), 0, "point");
    uint64_t mask = width_mask(bits);
    rng_state = 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < 30000; k++) {
        uint64_t h;
        size_t at = (size_t)rng_below((uint32_t)count);
        switch (k % 4) {
        case 0:
            h = ((uint64_t)rng_below(UINT32_MAX) << 32 | rng_below(UINT32_MAX)) & mask;
            break;
        case 1:
            h = pos[at];
            break;
        case 2:
            h = pos[at] - 1;
            h &= mask;
            break;
        default:
            h = (pos[at] + 1) & mask;
            break;
        }
        size_t lo = 0, hi = count;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (pos[mid] < h)
                lo = mid + 1;
            else
                hi = mid;
        }
        const chring_member_t *expect = owner[lo == count ? 0 : lo];
        cr_assert_eq(chring_snap_lookup_hash(s, h), expect, "hash %llu",
                     (unsigned long long)h);
    }
    chring_snap_exit(r, s);
    free(pos);
    free(owner);
    free(feed);
    free(names);
    chring_free(&r);
}

Test(model, large_hash64_ring_lookups_agree_with_points)
{
    check_large_ring(CHRING_PROFILE_HASH64, 600);
}

Test(model, large_murmur32_ring_lookups_agree_with_points)
{
    check_large_ring(CHRING_PROFILE_MURMUR32, 300);
}

Test(model, large_fnv16_ring_lookups_agree_with_points)
{
    check_large_ring(CHRING_PROFILE_FNV16, 200);
}

Test(model, default_config_equals_null_config)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    chring_t *a = ring_create(NULL);
    chring_t *b = ring_create(&cfg);
    /* The configuration is copied: changing it afterwards changes nothing. */
    cfg.vnodes = 3;
    cfg.profile = CHRING_PROFILE_FNV32;
    add_numbered(a, "n", 0, 5);
    add_numbered(b, "n", 0, 5);
    const chring_snap_t *sa = chring_snap_enter(a);
    const chring_snap_t *sb = chring_snap_enter(b);
    cr_assert_eq(chring_snap_points(sb), 800u, "5 x 160: the copy of the config is used");
    cr_assert_eq(chring_snap_profile(sb), CHRING_PROFILE_HASH64, "profile copied");
    cr_assert_eq(chring_snap_points(sa), chring_snap_points(sb), "same points");
    cr_assert_float_eq(chring_snap_moved(sa, sb), 0.0, 0.0, "same ring");
    chring_snap_exit(b, sb);
    chring_snap_exit(a, sa);
    chring_free(&a);
    chring_free(&b);
}
