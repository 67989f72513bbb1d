/* The ring against the reference model (tests/model/, shared with the fuzz targets;
 * docs/design.md §1, §2, §3): after every step of a random sequence of adds, removes, weight
 * changes, batches and syncs, the snapshot must be the model's snapshot built from scratch from
 * the same membership: every point's position and member in ring order, the members in name
 * order with their weights, point counts and exact arc shares; every lookup, pre-hashed lookup,
 * n-replica lookup and bounded lookup must answer as the model does, and the fraction of keys
 * moved since the previous step must be the model's.  Run for every profile and for coarse
 * custom hashes whose many equal positions exercise the tie order.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

#include "model.h"

#define MAX_MEMBERS 24
#define VNODES 12
#define MAX_WEIGHT 4

/* The membership the test has asked for, kept next to the ring. */
struct run {
    model_cfg_t cfg;
    uint32_t weight[MAX_MEMBERS]; /* 0: not a member */
    uint64_t join[MAX_MEMBERS];   /* join sequence of each member (fnv16 places in join order) */
    uint64_t seq;
};

static void member_name(char *buf, size_t cap, int j)
{
    /* Names of different lengths with common prefixes test memcmp, shorter-first order. */
    static const char *const stems[] = {"s", "s1", "sa", "t", "s10", "z", "sab", "a"};
    snprintf(buf, cap, "%s%d", stems[j % 8], j / 8);
}

/* The member number j of a name made by member_name, or -1. */
static int member_number(const char *name)
{
    char buf[32];
    for (int j = 0; j < MAX_MEMBERS; j++) {
        member_name(buf, sizeof buf, j);
        if (strcmp(buf, name) == 0)
            return j;
    }
    return -1;
}

static uint64_t width_mask(unsigned bits)
{
    return bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
}

/* The model's snapshot of the run's membership: members in join order (obj = member number). */
static void model_of(const struct run *md, model_snap_t *out)
{
    static model_member_t members[MAX_MEMBERS];
    size_t n = 0;
    for (int j = 0; j < MAX_MEMBERS; j++) {
        if (md->weight[j] == 0)
            continue;
        model_member_t *m = &members[n++];
        memset(m, 0, sizeof *m);
        member_name(m->name, sizeof m->name, j);
        m->len = strlen(m->name);
        m->weight = md->weight[j];
        m->obj = j;
    }
    for (size_t a = 1; a < n; a++)
        for (size_t b = a; b > 0 && md->join[members[b - 1].obj] > md->join[members[b].obj]; b--) {
            model_member_t t = members[b];
            members[b] = members[b - 1];
            members[b - 1] = t;
        }
    cr_assert_eq(model_build(out, &md->cfg, members, n), 0, "model_build");
}

/* Caller-supplied loads for the bounded lookups, by member number: uneven, so that some owners
 * are full. */
static uint64_t run_load(int j, int step)
{
    return (uint64_t)((j * 7 + step) % 5) * (uint64_t)(j % 3);
}

struct load_ctx {
    int step;
};

static uint64_t load_cb(const chring_member_t *m, void *ctx)
{
    const struct load_ctx *lc = ctx;
    int j = member_number(chring_member_name(m));
    cr_assert_geq(j, 0, "load asked for an unknown member %s", chring_member_name(m));
    return run_load(j, lc->step);
}

static const char *model_name_at(const model_snap_t *ms, uint32_t member)
{
    return ms->members[member].name;
}

static void model_check(chring_t *r, const struct run *md, const model_snap_t *ms, int step)
{
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_check(s), 0, "step %d: snapshot invariants", step);
    cr_assert_eq(chring_snap_hash_bits(s), ms->cfg.bits, "step %d: width", step);
    size_t count = ms->npoints;
    cr_assert_eq(chring_snap_points(s), count, "step %d: point count", step);
    cr_assert_eq(chring_snap_len(s), ms->nmembers, "step %d: member count", step);
    for (size_t i = 0; i < count; i++) {
        uint64_t pos;
        const chring_member_t *m;
        cr_assert_eq(chring_snap_point(s, i, &pos, &m), 0, "step %d: point %zu", step, i);
        cr_assert_eq(pos, ms->points[i].pos, "step %d: position of point %zu", step, i);
        cr_assert_str_eq(chring_member_name(m), model_name_at(ms, ms->points[i].member),
                         "step %d: owner of point %zu at %llu", step, i, (unsigned long long)pos);
    }
    cr_assert_eq(chring_snap_point(s, count, NULL, NULL), -ERANGE, "step %d: past the end", step);
    /* Members in name order, their weights, point counts and exact shares. */
    for (size_t i = 0; i < ms->nmembers; i++) {
        const model_member_t *want = &ms->members[ms->by_name[i]];
        const chring_member_t *m = chring_snap_member(s, i);
        cr_assert_not_null(m, "step %d: member %zu", step, i);
        cr_assert_str_eq(chring_member_name(m), want->name, "step %d: member %zu by name", step, i);
        cr_assert_eq(chring_snap_find(s, want->name), m, "step %d: find %s", step, want->name);
        cr_assert_eq(chring_snap_weight(s, m), want->weight, "step %d: weight of %s", step,
                     want->name);
        size_t mine = ms->member_points[ms->by_name[i]];
        cr_assert_eq(chring_snap_member_points(s, m), mine, "step %d: points of %s", step,
                     want->name);
        if (model_points_per_weight(&ms->cfg) == VNODES && ms->cfg.profile != MODEL_FNV16)
            cr_assert_eq(mine, (size_t)want->weight * VNODES, "step %d: V * w", step);
        cr_assert_float_eq(chring_member_share(s, m), model_share(ms, ms->by_name[i]), 1e-9,
                           "step %d: share of %s", step, want->name);
    }
    char name[32];
    for (int j = 0; j < MAX_MEMBERS; j++) {
        member_name(name, sizeof name, j);
        if (md->weight[j] == 0)
            cr_assert_null(chring_snap_find(s, name), "step %d: %s should be absent", step, name);
    }
    /* Lookups: the first point at or after the key's hash, wrapping; n replicas clockwise; the
     * bounded walk with uneven loads. */
    uint64_t total = 0;
    static uint64_t loads[MAX_MEMBERS];
    for (size_t k = 0; k < ms->nmembers; k++) {
        loads[k] = run_load(ms->members[k].obj, step);
        total += loads[k];
    }
    struct load_ctx lc = {step};
    /* The 300 keys at once too: the batch calls' owners, checked against the model below. */
    static char texts[300][32];
    static const void *keys[300];
    static size_t lens[300];
    static uint64_t hashes[300];
    static const chring_member_t *many[300], *by_hashes[300];
    for (int k = 0; k < 300; k++) {
        lens[k] = (size_t)snprintf(texts[k], sizeof texts[k], "key-%d", k * 7919 + step);
        keys[k] = texts[k];
        hashes[k] = model_hash(&ms->cfg, texts[k], lens[k]);
    }
    cr_assert_eq(chring_snap_lookup_many(s, keys, lens, 300, many), 300, "step %d", step);
    cr_assert_eq(chring_snap_lookup_hashes(s, hashes, 300, by_hashes), 300, "step %d", step);
    char key[32];
    for (int k = 0; k < 300; k++) {
        int len = snprintf(key, sizeof key, "key-%d", k * 7919 + step);
        uint64_t h = model_hash(&ms->cfg, key, (size_t)len);
        cr_assert_eq(many[k], chring_snap_lookup(s, key, (size_t)len), "step %d: lookup_many of %s",
                     step, key);
        cr_assert_eq(by_hashes[k], many[k], "step %d: lookup_hashes of %s", step, key);
        cr_assert_eq(chring_snap_hash(s, key, (size_t)len), h, "step %d: hash of %s", step, key);
        const chring_member_t *got = chring_snap_lookup(s, key, (size_t)len);
        long owner = model_owner_point(ms, h);
        if (owner < 0) {
            cr_assert_null(got, "step %d: empty ring", step);
            continue;
        }
        cr_assert_not_null(got, "step %d: no owner", step);
        cr_assert_str_eq(chring_member_name(got), model_name_at(ms, ms->points[owner].member),
                         "step %d: owner of %s (hash %llu)", step, key, (unsigned long long)h);
        cr_assert_eq(chring_snap_lookup_hash(s, h), got, "step %d: lookup_hash", step);
        if (k % 10 != 0)
            continue;
        const chring_member_t *replicas[4];
        uint32_t want[4];
        size_t n = chring_snap_lookup_n(s, key, (size_t)len, replicas, 4);
        cr_assert_eq(n, model_lookup_n(ms, h, want, 4), "step %d: lookup_n of %s", step, key);
        for (size_t i = 0; i < n; i++)
            cr_assert_str_eq(chring_member_name(replicas[i]), model_name_at(ms, want[i]),
                             "step %d: replica %zu of %s", step, i, key);
        long mowner;
        int saturated;
        long chosen = model_walk(ms, h, 1.25, total, loads, &mowner, &saturated);
        const chring_member_t *bounded =
            chring_snap_lookup_bounded(s, key, (size_t)len, 1.25, load_cb, &lc);
        cr_assert(!saturated, "step %d: consistent loads never saturate the model", step);
        cr_assert_not_null(bounded, "step %d: bounded lookup of %s", step, key);
        cr_assert_str_eq(chring_member_name(bounded), model_name_at(ms, (uint32_t)chosen),
                         "step %d: bounded lookup of %s", step, key);
    }
    /* Shares sum to one on a non-empty ring. */
    if (ms->nmembers > 0) {
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

/* Checks the ring against the model now, and the keys moved since the previous check (held). */
static void check_step(chring_t *r, const struct run *md, const chring_snap_t **held,
                       model_snap_t *held_model, int step)
{
    model_snap_t now;
    model_of(md, &now);
    model_check(r, md, &now, step);
    const chring_snap_t *s = chring_snap_hold(r);
    if (*held != NULL) {
        cr_assert_float_eq(chring_snap_moved(*held, s), model_moved(held_model, &now), 1e-9,
                           "step %d: moved since the previous step", step);
        chring_snap_put(r, *held);
        model_snap_free(held_model);
    }
    *held = s;
    *held_model = now;
}

static void run_model(chring_t *r, struct run *md, uint64_t seed, int steps)
{
    rng_state = seed;
    memset(md->weight, 0, sizeof md->weight);
    memset(md->join, 0, sizeof md->join);
    md->seq = 0;
    char names[MAX_MEMBERS][32];
    for (int j = 0; j < MAX_MEMBERS; j++)
        member_name(names[j], sizeof names[j], j);
    const chring_snap_t *held = NULL;
    model_snap_t held_model;
    check_step(r, md, &held, &held_model, -1);
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
                    uint32_t sw =
                        md->weight[k] && rng_below(2) ? md->weight[k] : 1 + rng_below(MAX_WEIGHT);
                    feed[n++] = (chring_change_t){names[k], sw, NULL};
                    next[k] = sw;
                }
            }
            cr_assert_eq(chring_sync(r, feed, n), 0, "sync");
            for (size_t f = 0; f < n; f++)
                for (int k = 0; k < MAX_MEMBERS; k++)
                    if (feed[f].name == names[k] && md->weight[k] == 0)
                        md->join[k] = ++md->seq; /* new members join in array order */
            memcpy(md->weight, next, sizeof next);
            break;
        }
        }
        check_step(r, md, &held, &held_model, step);
    }
    chring_snap_put(r, held);
    model_snap_free(&held_model);
}

/* Coarse hashes: few distinct positions, so many points share one (ties by name, index). */
static uint64_t c_coarse64(const void *d, size_t n, void *ctx)
{
    (void)ctx;
    return (ref_fnv1a32(d, n) % 97) * 0x0290000000000000ull;
}

static uint64_t c_coarse16(const void *d, size_t n, void *ctx)
{
    (void)ctx;
    return (ref_fnv1a32(d, n) % 61) * 1000u;
}

/* Only the low 32 bits count on a 32-bit custom ring. */
static uint64_t c_wide32(const void *d, size_t n, void *ctx)
{
    (void)ctx;
    return ref_hash64(d, n);
}

/* Runs the random sequence on a new ring of the profile (custom: hash and width), against the
 * model configured alike. */
static void random_changes(chring_profile_t profile, model_profile_t mprofile, unsigned bits,
                           chring_hash_fn custom, uint64_t seed, int steps)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    cfg.vnodes = VNODES;
    if (profile == CHRING_PROFILE_CUSTOM) {
        cfg.hash = custom;
        cfg.hash_bits = bits;
    }
    chring_t *r = ring_create(&cfg);
    struct run md;
    memset(&md, 0, sizeof md);
    md.cfg = (model_cfg_t){mprofile, bits, VNODES, custom, NULL};
    run_model(r, &md, seed, steps);
    chring_free(&r);
}

Test(model, model_passes_its_self_test)
{
    cr_assert_eq(model_selftest(), 0, "the model against the reference values (stderr)");
}

Test(model, hash64_random_changes)
{
    random_changes(CHRING_PROFILE_HASH64, MODEL_HASH64, 64, NULL, 0x1234567ull, 120);
}

Test(model, fnv32_random_changes)
{
    random_changes(CHRING_PROFILE_FNV32, MODEL_FNV32, 32, NULL, 0x7654321ull, 80);
}

Test(model, murmur32_random_changes)
{
    random_changes(CHRING_PROFILE_MURMUR32, MODEL_MURMUR32, 32, NULL, 0xabcdefull, 80);
}

Test(model, xxh3_random_changes)
{
    random_changes(CHRING_PROFILE_XXH3, MODEL_XXH3, 64, NULL, 0x5eedull, 80);
}

Test(model, coarse_64bit_custom_ties_by_name_and_index)
{
    random_changes(CHRING_PROFILE_CUSTOM, MODEL_CUSTOM, 64, c_coarse64, 0xc0a75eull, 120);
}

Test(model, coarse_16bit_custom_ties_by_name_and_index)
{
    random_changes(CHRING_PROFILE_CUSTOM, MODEL_CUSTOM, 16, c_coarse16, 0x16b17ull, 120);
}

Test(model, custom_32bit_truncates_wide_values)
{
    random_changes(CHRING_PROFILE_CUSTOM, MODEL_CUSTOM, 32, c_wide32, 0x32ull, 80);
}

Test(model, fnv16_random_changes_follow_join_order)
{
    random_changes(CHRING_PROFILE_FNV16, MODEL_FNV16, 16, NULL, 0xf16ull, 150);
}

Test(model, nginx_random_changes)
{
    random_changes(CHRING_PROFILE_NGINX, MODEL_NGINX, 32, NULL, 0x9e11ull, 60);
}

Test(model, ketama_random_changes)
{
    random_changes(CHRING_PROFILE_KETAMA, MODEL_KETAMA, 32, NULL, 0x4e7a3aull, 60);
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
        case 0: h = ((uint64_t)rng_below(UINT32_MAX) << 32 | rng_below(UINT32_MAX)) & mask; break;
        case 1: h = pos[at]; break;
        case 2:
            h = pos[at] - 1;
            h &= mask;
            break;
        default: h = (pos[at] + 1) & mask; break;
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
        cr_assert_eq(chring_snap_lookup_hash(s, h), expect, "hash %llu", (unsigned long long)h);
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
