/* Batch lookups (include/chring.h, docs/design.md §4 "Batches"): chring_snap_lookup_many and
 * chring_snap_lookup_hashes give, key for key, what chring_snap_lookup and
 * chring_snap_lookup_hash give, on every profile, with members down, on rings small and large,
 * after every kind of change, for batches of every length the pipeline treats apart.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

enum {
    MAX_KEYS = 4096
};

/* Keys of assorted lengths (0 included), their hashes, and room for the owners. */
struct batch {
    char text[MAX_KEYS][24];
    const void *keys[MAX_KEYS];
    size_t lens[MAX_KEYS];
    uint64_t hashes[MAX_KEYS];
    const chring_member_t *owners[MAX_KEYS + 1];
};

static struct batch *batch_new(const chring_snap_t *s, size_t n, unsigned seed)
{
    struct batch *b = calloc(1, sizeof *b);
    cr_assert_not_null(b);
    cr_assert_leq(n, (size_t)MAX_KEYS);
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(b->text[i], sizeof b->text[i], "k%u-%zu", seed, i);
        b->keys[i] = b->text[i];
        b->lens[i] = i % 97 == 5 ? 0 : (size_t)len; /* the empty key, now and then */
        b->hashes[i] = chring_snap_hash(s, b->keys[i], b->lens[i]);
    }
    return b;
}

/* Both batch calls over keys [from, from + n) against the single lookups, and the entry past the
 * batch left alone. */
static void expect_batch_matches(const chring_snap_t *s, struct batch *b, size_t from, size_t n,
                                 const char *what)
{
    const chring_member_t *fence = (const void *)&fence;
    b->owners[n] = fence;
    for (size_t i = 0; i < n; i++)
        b->owners[i] = fence;
    cr_assert_eq(chring_snap_lookup_many(s, b->keys + from, b->lens + from, n, b->owners), n,
                 "%s: lookup_many returns n = %zu", what, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(b->owners[i], chring_snap_lookup(s, b->keys[from + i], b->lens[from + i]),
                     "%s: lookup_many key %zu of %zu", what, from + i, n);
    cr_assert_eq(b->owners[n], fence, "%s: lookup_many wrote past n = %zu", what, n);
    for (size_t i = 0; i < n; i++)
        b->owners[i] = fence;
    cr_assert_eq(chring_snap_lookup_hashes(s, b->hashes + from, n, b->owners), n,
                 "%s: lookup_hashes returns n = %zu", what, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(b->owners[i], chring_snap_lookup_hash(s, b->hashes[from + i]),
                     "%s: lookup_hashes hash %zu of %zu", what, from + i, n);
    cr_assert_eq(b->owners[n], fence, "%s: lookup_hashes wrote past n = %zu", what, n);
}

/* Every length from 0 to 40 (short of, at and past the pipeline's stages), then odd and large
 * ones, from several offsets. */
static void expect_all_lengths_match(const chring_snap_t *s, unsigned seed, const char *what)
{
    struct batch *b = batch_new(s, MAX_KEYS, seed);
    for (size_t n = 0; n <= 40; n++)
        expect_batch_matches(s, b, n % 7, n, what);
    static const size_t longer[] = {63, 64, 65, 127, 1001, MAX_KEYS - 1, MAX_KEYS};
    for (size_t k = 0; k < sizeof longer / sizeof longer[0]; k++)
        expect_batch_matches(s, b, 0, longer[k], what);
    free(b);
}

/* Members named by decimal numbers first .. first + count - 1 (every profile takes those names,
 * haproxy's server ids included). */
static void add_members(chring_t *r, unsigned first, unsigned count)
{
    for (unsigned i = first; i < first + count; i++) {
        char name[16];
        snprintf(name, sizeof name, "%u", i);
        int rc = chring_add(r, name, 1 + i % 3, NULL);
        cr_assert_eq(rc, 0, "add %s (weight %u): %s", name, 1 + i % 3, chring_strerror(rc));
    }
}

Test(batch, null_arguments_return_zero_and_write_nothing)
{
    chring_t *r = ring_create(NULL);
    add_members(r, 1, 3);
    const chring_snap_t *s = chring_snap_enter(r);
    const void *keys[1] = {"k"};
    size_t lens[1] = {1};
    uint64_t hashes[1] = {42};
    const chring_member_t *sentinel = (const void *)&sentinel;
    const chring_member_t *owners[1] = {sentinel};
    cr_expect_eq(chring_snap_lookup_many(NULL, keys, lens, 1, owners), 0);
    cr_expect_eq(chring_snap_lookup_many(s, NULL, lens, 1, owners), 0);
    cr_expect_eq(chring_snap_lookup_many(s, keys, NULL, 1, owners), 0);
    cr_expect_eq(chring_snap_lookup_many(s, keys, lens, 1, NULL), 0);
    cr_expect_eq(chring_snap_lookup_hashes(NULL, hashes, 1, owners), 0);
    cr_expect_eq(chring_snap_lookup_hashes(s, NULL, 1, owners), 0);
    cr_expect_eq(chring_snap_lookup_hashes(s, hashes, 1, NULL), 0);
    cr_expect_eq(owners[0], sentinel, "a refused call writes nothing");
    cr_expect_eq(chring_snap_lookup_many(s, keys, lens, 0, owners), 0);
    cr_expect_eq(chring_snap_lookup_hashes(s, hashes, 0, owners), 0);
    cr_expect_eq(owners[0], sentinel, "n = 0 writes nothing");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(batch, empty_ring_gives_null_owners_and_returns_n)
{
    chring_t *r = ring_create(NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    struct batch *b = batch_new(s, 20, 1);
    const chring_member_t *fence = (const void *)&fence;
    for (size_t i = 0; i < 21; i++)
        b->owners[i] = fence;
    cr_assert_eq(chring_snap_lookup_many(s, b->keys, b->lens, 20, b->owners), 20);
    for (size_t i = 0; i < 20; i++)
        cr_assert_null(b->owners[i]);
    cr_assert_eq(b->owners[20], fence);
    for (size_t i = 0; i < 20; i++)
        b->owners[i] = fence;
    cr_assert_eq(chring_snap_lookup_hashes(s, b->hashes, 20, b->owners), 20);
    for (size_t i = 0; i < 20; i++)
        cr_assert_null(b->owners[i]);
    chring_snap_exit(r, s);
    /* The static empty snapshot of a NULL ring too. */
    const chring_snap_t *e = chring_snap_enter(NULL);
    cr_assert_eq(chring_snap_lookup_hashes(e, b->hashes, 20, b->owners), 20);
    for (size_t i = 0; i < 20; i++)
        cr_assert_null(b->owners[i]);
    chring_snap_exit(NULL, e);
    free(b);
    chring_free(&r);
}

Test(batch, null_key_with_a_length_has_no_owner_and_leaves_the_others_alone)
{
    chring_t *r = ring_create(NULL);
    add_members(r, 1, 5);
    const chring_snap_t *s = chring_snap_enter(r);
    struct batch *b = batch_new(s, 50, 2);
    b->keys[3] = NULL;  /* NULL with a length: no owner */
    b->keys[30] = NULL; /* NULL with length 0: the empty key */
    b->lens[30] = 0;
    cr_assert_eq(chring_snap_lookup_many(s, b->keys, b->lens, 50, b->owners), 50);
    cr_assert_null(b->owners[3]);
    cr_assert_not_null(b->owners[30]);
    cr_assert_eq(b->owners[30], chring_snap_lookup(s, "", 0));
    for (size_t i = 0; i < 50; i++)
        cr_assert_eq(b->owners[i], chring_snap_lookup(s, b->keys[i], b->lens[i]), "key %zu", i);
    chring_snap_exit(r, s);
    free(b);
    chring_free(&r);
}

/* A coarse custom hash: many points share few positions, buckets are crowded and the search
 * takes its slow branch. */
static uint64_t coarse_hash(const void *data, size_t len, void *ctx)
{
    (void)ctx;
    return chring_hash64(data, len) & 0xff00;
}

Test(batch, every_profile_matches_the_single_lookups_with_and_without_members_down,
     .timeout = 60)
{
    for (int p = 0; p <= (int)CHRING_PROFILE_COUNT; p++) {
        chring_config_t cfg;
        chring_config_default(&cfg);
        const char *name = p == (int)CHRING_PROFILE_COUNT ? "custom-coarse16"
                                                          : chring_profile_name((chring_profile_t)p);
        if (p == (int)CHRING_PROFILE_COUNT) {
            cfg.profile = CHRING_PROFILE_CUSTOM;
            cfg.hash = coarse_hash;
            cfg.hash_bits = 16;
            cfg.vnodes = 40;
        } else if (p == (int)CHRING_PROFILE_CUSTOM) {
            cfg.profile = CHRING_PROFILE_CUSTOM;
            cfg.hash = table_hash_fn;
            cfg.hash_ctx = (void *)&worked_table; /* names off the table hash to 0: all collide */
            cfg.hash_bits = 32;
            cfg.vnodes = 4;
        } else {
            cfg.profile = (chring_profile_t)p;
        }
        chring_t *r = NULL;
        cr_assert_eq(chring_new(&r, &cfg), 0, "profile %s", name);
        /* 10 members (a ring in the caches), then 300 (one past the L1 and L2 of most cores). */
        for (int round = 0; round < 2; round++) {
            add_members(r, round == 0 ? 1 : 11, round == 0 ? 10 : 290);
            char what[96];
            const chring_snap_t *s = chring_snap_enter(r);
            snprintf(what, sizeof what, "%s, %zu members", name, chring_snap_len(s));
            expect_all_lengths_match(s, (unsigned)p, what);
            chring_snap_exit(r, s);
            /* Members down: the batch passes over them as the single lookups do. */
            cr_assert_eq(chring_set_down(r, "2", 1), 0);
            cr_assert_eq(chring_set_down(r, "8", 1), 0);
            s = chring_snap_enter(r);
            snprintf(what, sizeof what, "%s, %zu members, 2 down", name, chring_snap_len(s));
            expect_all_lengths_match(s, (unsigned)p + 100, what);
            chring_snap_exit(r, s);
            cr_assert_eq(chring_set_down(r, "2", 0), 0);
            cr_assert_eq(chring_set_down(r, "8", 0), 0);
        }
        chring_free(&r);
    }
}

Test(batch, every_member_down_gives_no_owner)
{
    chring_t *r = ring_create(NULL);
    add_members(r, 1, 4);
    for (int i = 1; i <= 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "%d", i);
        cr_assert_eq(chring_set_down(r, name, 1), 0);
    }
    const chring_snap_t *s = chring_snap_enter(r);
    struct batch *b = batch_new(s, 33, 3);
    cr_assert_eq(chring_snap_lookup_many(s, b->keys, b->lens, 33, b->owners), 33);
    for (size_t i = 0; i < 33; i++)
        cr_assert_null(b->owners[i], "key %zu", i);
    cr_assert_eq(chring_snap_lookup_hashes(s, b->hashes, 33, b->owners), 33);
    for (size_t i = 0; i < 33; i++)
        cr_assert_null(b->owners[i], "hash %zu", i);
    chring_snap_exit(r, s);
    free(b);
    chring_free(&r);
}

Test(batch, large_ring_matches_the_single_lookups_after_every_change, .timeout = 120)
{
    chring_t *r = ring_create(NULL);
    enum {
        MEMBERS = 3300
    };
    static char names[MEMBERS + 64][16];
    chring_change_t *all = calloc(MEMBERS + 64, sizeof *all);
    cr_assert_not_null(all);
    for (int i = 0; i < MEMBERS + 64; i++)
        snprintf(names[i], sizeof names[i], "node-%05d", i);
    for (int i = 0; i < MEMBERS; i++)
        all[i] = (chring_change_t){names[i], 1, NULL};
    cr_assert_eq(chring_sync(r, all, MEMBERS), 0);
    uint64_t seed = 777;
    for (int step = 0; step < 12; step++) {
        const char *kind = "build";
        if (step > 0) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            int who = (int)((seed >> 33) % (MEMBERS + 64));
            int rc = 0;
            switch (step % 6) {
            case 1: kind = "add"; rc = chring_add(r, names[who], 1 + (uint32_t)(seed >> 60) % 3, NULL); break;
            case 2: kind = "remove"; rc = chring_remove(r, names[who]); break;
            case 3: kind = "weight"; rc = chring_set_weight(r, names[who % MEMBERS], 2 + step % 2); break;
            case 4: {
                kind = "update";
                chring_change_t batch[3] = {{names[(who + 1) % (MEMBERS + 64)], 0, NULL},
                                            {names[(who + 2) % (MEMBERS + 64)], 2, NULL},
                                            {names[(who + 3) % (MEMBERS + 64)], 1, NULL}};
                rc = chring_update(r, batch, 3);
                break;
            }
            case 5: {
                kind = "sync";
                size_t n = 0;
                for (int i = 0; i < MEMBERS + 64; i++)
                    if ((i + step) % 50 != 0)
                        all[n++] = (chring_change_t){names[i], 1 + (uint32_t)(i % 7 == 0), NULL};
                rc = chring_sync(r, all, n);
                break;
            }
            default: {
                kind = "down";
                char *down = names[who % MEMBERS];
                rc = chring_set_down(r, down, 1);
                if (rc == -ENOENT)
                    rc = 0;
            }
            }
            cr_assert(rc == 0 || rc == -ENOENT, "step %d (%s): %s", step, kind,
                      chring_strerror(rc));
        }
        if (step == 8)
            for (int i = 0; i < 40; i++)
                (void)chring_set_down(r, names[i * 80], 1); /* a run of members down */
        const chring_snap_t *s = chring_snap_hold(r);
        cr_assert_gt(chring_snap_points(s), (size_t)1 << 19, "the ring is large");
        char what[64];
        snprintf(what, sizeof what, "step %d (%s), %zu points", step, kind, chring_snap_points(s));
        struct batch *b = batch_new(s, MAX_KEYS, (unsigned)step);
        expect_batch_matches(s, b, 0, MAX_KEYS, what);
        for (size_t n = 1; n <= 24; n += 7)
            expect_batch_matches(s, b, n, n, what);
        free(b);
        chring_snap_put(r, s);
    }
    free(all);
    chring_free(&r);
}
