/* The ring itself (docs/design.md §1, §10): the worked example, empty rings, idempotent changes,
 * collisions, order independence, movement on add and remove, spread, n-replica lookups.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

static void assert_owner(const chring_snap_t *s, const char *key, const char *expect)
{
    const char *got = owner_of(s, key);
    cr_assert_not_null(got, "no owner for %s", key);
    cr_assert_str_eq(got, expect, "owner of %s", key);
}

Test(worked_example, owners_by_hand)
{
    chring_t *r = worked_ring("abc", 1.25);
    const chring_snap_t *s = chring_snap_enter(r);
    assert_owner(s, "k1", "a"); /* 5 -> a#0 at 10 */
    assert_owner(s, "k2", "a"); /* 55 -> a#1 at 60 */
    assert_owner(s, "k3", "c"); /* 85 -> c#1 at 95 */
    assert_owner(s, "k4", "a"); /* 97 -> past the largest point, wraps to a#0 at 10 */
    assert_owner(s, "k5", "b"); /* 30 -> b#0 at 30: a point exactly at the hash counts */
    chring_snap_exit(r, s);
    chring_free(&r);
    cr_assert_null(r, "chring_free clears the pointer");
}

Test(worked_example, ring_reads_a10_b30_c50_a60_b80_c95)
{
    chring_t *r = worked_ring("cab", 1.25);
    const chring_snap_t *s = chring_snap_enter(r);
    const uint64_t positions[] = {10, 30, 50, 60, 80, 95};
    const char *const owners[] = {"a", "b", "c", "a", "b", "c"};
    cr_assert_eq(chring_snap_points(s), 6u, "3 members x 2 vnodes");
    cr_assert_eq(chring_snap_len(s), 3u, "3 members");
    for (size_t i = 0; i < 6; i++) {
        uint64_t pos = 0;
        const chring_member_t *m = NULL;
        cr_assert_eq(chring_snap_point(s, i, &pos, &m), 0, "point %zu", i);
        cr_assert_eq(pos, positions[i], "position of point %zu", i);
        cr_assert_not_null(m, "member of point %zu", i);
        cr_assert_str_eq(chring_member_name(m), owners[i], "owner of point %zu", i);
    }
    cr_assert_eq(chring_snap_point(s, 6, NULL, NULL), -ERANGE, "past the end");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(worked_example, lookup_by_hash_uses_first_point_at_or_after)
{
    chring_t *r = worked_ring("abc", 1.25);
    const chring_snap_t *s = chring_snap_enter(r);
    const struct {
        uint64_t h;
        const char *owner;
    } cases[] = {{0, "a"},  {10, "a"}, {11, "b"}, {30, "b"},         {31, "c"},
                 {50, "c"}, {51, "a"}, {60, "a"}, {61, "b"},         {80, "b"},
                 {81, "c"}, {95, "c"}, {96, "a"}, {1ull << 63, "a"}, {UINT64_MAX, "a"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const chring_member_t *m = chring_snap_lookup_hash(s, cases[i].h);
        cr_assert_not_null(m, "owner of hash %llu", (unsigned long long)cases[i].h);
        cr_assert_str_eq(chring_member_name(m), cases[i].owner, "owner of hash %llu",
                         (unsigned long long)cases[i].h);
    }
    cr_assert_eq(chring_snap_hash(s, "k3", 2), 85u, "the custom hash is the profile's hash");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(worked_example, arc_shares_by_hand)
{
    /* b owns (10,30] and (60,80]: 40 positions; c owns (30,50] and (80,95]: 35; a the rest. */
    chring_t *r = worked_ring("abc", 1.25);
    const chring_snap_t *s = chring_snap_enter(r);
    const double ring = 18446744073709551616.0;
    double sb = chring_member_share(s, chring_snap_find(s, "b"));
    double sc = chring_member_share(s, chring_snap_find(s, "c"));
    double sa = chring_member_share(s, chring_snap_find(s, "a"));
    cr_assert_float_eq(sb, 40.0 / ring, 1e-6 * 40.0 / ring, "share of b");
    cr_assert_float_eq(sc, 35.0 / ring, 1e-6 * 35.0 / ring, "share of c");
    cr_assert_float_eq(sa, 1.0, 1e-12, "share of a");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(worked_example, lookup_n_walks_clockwise_distinct)
{
    chring_t *r = worked_ring("abc", 1.25);
    const chring_snap_t *s = chring_snap_enter(r);
    const struct {
        const char *key;
        const char *order[3];
    } cases[] = {
        {"k1", {"a", "b", "c"}}, /* 5: a10 b30 c50 */
        {"k2", {"a", "b", "c"}}, /* 55: a60 b80 c95 */
        {"k3", {"c", "a", "b"}}, /* 85: c95, wrap a10 b30 */
        {"k4", {"a", "b", "c"}}, /* 97: wrap a10 b30 c50 */
        {"k5", {"b", "c", "a"}}, /* 30: b30 c50 a60 */
    };
    for (size_t i = 0; i < 5; i++) {
        const chring_member_t *out[5] = {NULL};
        size_t got = chring_snap_lookup_n(s, cases[i].key, 2, out, 5);
        cr_assert_eq(got, 3u, "n above the member count returns every member");
        for (size_t j = 0; j < 3; j++)
            cr_assert_str_eq(chring_member_name(out[j]), cases[i].order[j], "%s replica %zu",
                             cases[i].key, j);
        cr_assert_null(out[3], "nothing written past the count");
        got = chring_snap_lookup_n(s, cases[i].key, 2, out, 2);
        cr_assert_eq(got, 2u, "n = 2");
        cr_assert_str_eq(chring_member_name(out[1]), cases[i].order[1], "second replica");
    }
    const chring_member_t *out[1];
    cr_assert_eq(chring_snap_lookup_n(s, "k1", 2, out, 0), 0u, "n = 0");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(worked_example, lookup_name_copies_the_owner)
{
    chring_t *r = worked_ring("abc", 1.25);
    char buf[8];
    memset(buf, 'Z', sizeof buf);
    cr_assert_eq(chring_lookup_name(r, "k3", 2, buf, sizeof buf), 1, "length of c");
    cr_assert_str_eq(buf, "c", "owner of k3");
    cr_assert_eq(chring_lookup_name(r, "k5", 2, buf, 2), 1, "cap = length + 1 is enough");
    cr_assert_str_eq(buf, "b", "owner of k5");
    cr_assert_eq(chring_lookup_name(r, "k5", 2, buf, 1), -ENOSPC, "cap = length is short");
    cr_assert_eq(chring_lookup_name(r, "k5", 2, buf, 0), -ENOSPC, "cap 0 is short");
    chring_free(&r);
}

Test(ring, lookup_name_reports_length_of_long_names)
{
    chring_t *r = ring_create(NULL);
    char name[CHRING_NAME_MAX + 1];
    memset(name, 'n', CHRING_NAME_MAX);
    name[CHRING_NAME_MAX] = 0;
    add_or_fail(r, name, 1, NULL);
    char buf[CHRING_NAME_MAX + 1];
    cr_assert_eq(chring_lookup_name(r, "key", 3, buf, sizeof buf), CHRING_NAME_MAX, "255 bytes");
    cr_assert_str_eq(buf, name, "the whole name");
    cr_assert_eq(chring_lookup_name(r, "key", 3, buf, CHRING_NAME_MAX), -ENOSPC, "one short");
    chring_free(&r);
}

static void assert_empty(chring_t *r)
{
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_null(chring_snap_lookup(s, "k", 1), "lookup on an empty ring");
    cr_assert_null(chring_snap_lookup(s, NULL, 0), "empty key on an empty ring");
    cr_assert_null(chring_snap_lookup_hash(s, 42), "lookup_hash on an empty ring");
    const chring_member_t *out[2];
    cr_assert_eq(chring_snap_lookup_n(s, "k", 1, out, 2), 0u, "lookup_n on an empty ring");
    cr_assert_eq(chring_snap_len(s), 0u, "no members");
    cr_assert_eq(chring_snap_points(s), 0u, "no points");
    cr_assert_null(chring_snap_member(s, 0), "no member 0");
    cr_assert_eq(chring_snap_point(s, 0, NULL, NULL), -ERANGE, "no point 0");
    chring_snap_exit(r, s);
    char buf[16];
    cr_assert_eq(chring_lookup_name(r, "k", 1, buf, sizeof buf), -ENOENT, "lookup_name");
    chring_lease_t lease;
    memset(&lease, 0x5a, sizeof lease);
    cr_assert_eq(chring_acquire(r, "k", 1, &lease), -ENOENT, "acquire on an empty ring");
    cr_assert_null(lease.member, "the lease is cleared");
    chring_release(r, &lease);
    cr_assert_eq(chring_len(r), 0u, "chring_len");
    cr_assert_eq(chring_leases(r), 0u, "no leases");
}

Test(ring, empty_before_first_add_and_after_last_remove)
{
    chring_t *r = ring_create(NULL);
    assert_empty(r);
    add_or_fail(r, "only", 1, NULL);
    char buf[16];
    cr_assert_eq(chring_lookup_name(r, "k", 1, buf, sizeof buf), 4, "the only member owns all");
    cr_assert_eq(chring_remove(r, "only"), 0, "remove the last member");
    assert_empty(r);
    cr_assert_eq(ring_version(r), 2u, "two publishes");
    chring_free(&r);
}

Test(ring, zero_vnodes_rejected)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 0;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), -EINVAL, "vnodes 0");
    cr_assert_null(r, "no ring on failure");
}

Test(ring, repeated_add_and_stranger_remove_change_nothing)
{
    chring_t *r = ring_create(NULL);
    int tags[3];
    add_or_fail(r, "beta", 1, &tags[0]);
    add_or_fail(r, "alpha", 1, &tags[1]);
    add_or_fail(r, "gamma", 1, &tags[2]);
    const int keys = 1000;
    char **before = owners_copy(r, keys);
    uint64_t version = ring_version(r);
    cr_assert_eq(version, 3u, "three publishes");

    int other;
    cr_assert_eq(chring_add(r, "beta", 1, &other), 0, "repeated add");
    cr_assert_eq(chring_remove(r, "stranger"), -ENOENT, "stranger remove");
    cr_assert_eq(chring_add(r, "alpha", 1, NULL), 0, "repeated add");
    cr_assert_eq(ring_version(r), version, "nothing published");
    cr_assert_eq(chring_len(r), 3u, "Len");

    char **after = owners_copy(r, keys);
    for (int i = 0; i < keys; i++)
        cr_assert_str_eq(after[i], before[i], "key-%d moved", i);

    const chring_snap_t *s = chring_snap_enter(r);
    const char *const sorted[] = {"alpha", "beta", "gamma"};
    for (size_t i = 0; i < 3; i++)
        cr_assert_str_eq(chring_member_name(chring_snap_member(s, i)), sorted[i], "member %zu", i);
    cr_assert_null(chring_snap_member(s, 3), "past the end");
    cr_assert_eq(chring_member_udata(chring_snap_find(s, "beta")), &tags[0],
                 "an existing member's udata is never replaced");
    chring_snap_exit(r, s);
    owners_free(before, keys);
    owners_free(after, keys);
    chring_free(&r);
}

Test(ring, members_sorted_by_memcmp_shorter_first)
{
    chring_t *r = ring_create(NULL);
    const char *const names[] = {"b", "abc", "ab", "B", "a", "\xc3\xa9", "ab\x01"};
    for (size_t i = 0; i < 7; i++)
        add_or_fail(r, names[i], 1, NULL);
    const char *const sorted[] = {"B", "a", "ab", "ab\x01", "abc", "b", "\xc3\xa9"};
    const chring_snap_t *s = chring_snap_enter(r);
    for (size_t i = 0; i < 7; i++)
        cr_assert_str_eq(chring_member_name(chring_snap_member(s, i)), sorted[i], "member %zu", i);
    for (size_t i = 0; i < 7; i++) {
        const chring_member_t *m = chring_snap_find(s, names[i]);
        cr_assert_not_null(m, "find %s", names[i]);
        cr_assert_str_eq(chring_member_name(m), names[i], "find returns the member");
    }
    cr_assert_null(chring_snap_find(s, "abcd"), "find of a non-member");
    chring_snap_exit(r, s);
    chring_free(&r);
}

static uint64_t constant_hash(const void *data, size_t len, void *ctx)
{
    (void)data;
    (void)len;
    (void)ctx;
    return 7;
}

static chring_t *constant_ring(void)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_CUSTOM;
    cfg.hash = constant_hash;
    cfg.hash_bits = 64;
    cfg.vnodes = 12;
    return ring_create(&cfg);
}

static void check_collision_ring(chring_t *r)
{
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_points(s), 36u, "all colliding points are kept");
    /* Every point sits at 7; ties go by name (memcmp, shorter first). */
    const char *const expect[] = {"ab", "abc", "b"};
    for (size_t i = 0; i < 36; i++) {
        uint64_t pos;
        const chring_member_t *m;
        cr_assert_eq(chring_snap_point(s, i, &pos, &m), 0, "point %zu", i);
        cr_assert_eq(pos, 7u, "position");
        cr_assert_str_eq(chring_member_name(m), expect[i / 12], "point %zu", i);
    }
    assert_owner(s, "any", "ab");
    assert_owner(s, "other key", "ab");
    const chring_member_t *out[3];
    cr_assert_eq(chring_snap_lookup_n(s, "x", 1, out, 3), 3u, "three replicas");
    for (size_t i = 0; i < 3; i++)
        cr_assert_str_eq(chring_member_name(out[i]), expect[i], "replica %zu", i);
    chring_snap_exit(r, s);
}

Test(ring, collisions_broken_by_name_in_either_join_order)
{
    chring_t *r1 = constant_ring();
    add_or_fail(r1, "b", 1, NULL);
    add_or_fail(r1, "abc", 1, NULL);
    add_or_fail(r1, "ab", 1, NULL);
    check_collision_ring(r1);
    chring_t *r2 = constant_ring();
    add_or_fail(r2, "ab", 1, NULL);
    add_or_fail(r2, "b", 1, NULL);
    add_or_fail(r2, "abc", 1, NULL);
    check_collision_ring(r2);
    /* Removing the smallest name hands the collided keys to the next name. */
    cr_assert_eq(chring_remove(r2, "ab"), 0, "remove ab");
    const chring_snap_t *s = chring_snap_enter(r2);
    assert_owner(s, "any", "abc");
    chring_snap_exit(r2, s);
    chring_free(&r1);
    chring_free(&r2);
}

/* A coarse 16-bit hash: the value is the length times 1000, so labels of equal length collide. */
static uint64_t length_hash16(const void *data, size_t len, void *ctx)
{
    (void)data;
    (void)ctx;
    return (uint64_t)len * 1000u;
}

Test(ring, coarse_16bit_collisions_broken_by_name)
{
    const char *const orders[2][3] = {{"q", "p", "r"}, {"r", "q", "p"}};
    for (int o = 0; o < 2; o++) {
        chring_config_t cfg;
        chring_config_default(&cfg);
        cfg.profile = CHRING_PROFILE_CUSTOM;
        cfg.hash = length_hash16;
        cfg.hash_bits = 16;
        cfg.vnodes = 12; /* p#0..p#9 at 3000, p#10, p#11 at 4000 */
        chring_t *r = ring_create(&cfg);
        for (int i = 0; i < 3; i++)
            add_or_fail(r, orders[o][i], 1, NULL);
        const chring_snap_t *s = chring_snap_enter(r);
        cr_assert_eq(chring_snap_points(s), 36u, "all points kept");
        assert_owner(s, "k", "p");        /* 1000 -> 3000 */
        assert_owner(s, "kkkk", "p");     /* 4000 -> 4000 */
        assert_owner(s, "kkkkkkkk", "p"); /* 8000 -> wraps to 3000 */
        chring_snap_exit(r, s);
        chring_free(&r);
    }
}

static void add_members(chring_t *r, const int *order, int count)
{
    char name[32];
    for (int i = 0; i < count; i++) {
        snprintf(name, sizeof name, "node-%d", order[i]);
        add_or_fail(r, name, 1, NULL);
    }
}

Test(ring, insertion_order_irrelevant)
{
    const int forward[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    const int shuffled[] = {7, 2, 9, 0, 5, 3, 8, 1, 6, 4};
    chring_t *r1 = ring_create(NULL);
    chring_t *r2 = ring_create(NULL);
    add_members(r1, forward, 10);
    add_members(r2, shuffled, 10);
    const int keys = 2000;
    char **o1 = owners_copy(r1, keys);
    char **o2 = owners_copy(r2, keys);
    for (int i = 0; i < keys; i++)
        cr_assert_str_eq(o1[i], o2[i], "key-%d", i);
    const chring_snap_t *s1 = chring_snap_enter(r1);
    const chring_snap_t *s2 = chring_snap_enter(r2);
    cr_assert_eq(chring_snap_points(s1), 1600u, "10 x 160 points");
    cr_assert_eq(chring_snap_points(s2), 1600u, "10 x 160 points");
    for (size_t i = 0; i < 1600; i++) {
        uint64_t p1, p2;
        const chring_member_t *m1, *m2;
        cr_assert_eq(chring_snap_point(s1, i, &p1, &m1), 0, "point");
        cr_assert_eq(chring_snap_point(s2, i, &p2, &m2), 0, "point");
        cr_assert_eq(p1, p2, "position of point %zu", i);
        cr_assert_str_eq(chring_member_name(m1), chring_member_name(m2), "owner of point %zu", i);
    }
    cr_assert_float_eq(chring_snap_moved(s1, s2), 0.0, 0.0, "no key space differs");
    chring_snap_exit(r2, s2);
    chring_snap_exit(r1, s1);
    owners_free(o1, keys);
    owners_free(o2, keys);
    chring_free(&r1);
    chring_free(&r2);
}

struct expected_point {
    uint64_t pos;
    const char *name;
    uint32_t index;
};

static int compare_points(const void *a, const void *b)
{
    const struct expected_point *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->index < y->index ? -1 : x->index > y->index;
}

Test(ring, points_are_hash64_of_labels_in_order)
{
    const char *const names[] = {"engine-0", "engine-1", "engine-2"};
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 40;
    chring_t *r = ring_create(&cfg);
    for (int i = 0; i < 3; i++)
        add_or_fail(r, names[i], 1, NULL);
    struct expected_point expect[120];
    size_t count = 0;
    for (int n = 0; n < 3; n++)
        for (uint32_t i = 0; i < 40; i++) {
            char label[64];
            int len = snprintf(label, sizeof label, "%s#%u", names[n], (unsigned)i);
            expect[count].pos = ref_hash64(label, (size_t)len);
            expect[count].name = names[n];
            expect[count].index = i;
            count++;
        }
    qsort(expect, count, sizeof expect[0], compare_points);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_points(s), count, "points");
    for (size_t i = 0; i < count; i++) {
        uint64_t pos;
        const chring_member_t *m;
        cr_assert_eq(chring_snap_point(s, i, &pos, &m), 0, "point %zu", i);
        cr_assert_eq(pos, expect[i].pos, "position of point %zu", i);
        cr_assert_str_eq(chring_member_name(m), expect[i].name, "owner of point %zu", i);
    }
    cr_assert_eq(chring_snap_point(s, count, NULL, NULL), -ERANGE, "past the end");
    cr_assert_eq(chring_snap_point(s, (size_t)-1, NULL, NULL), -ERANGE, "far past the end");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(ring, adding_ninth_member_moves_only_to_it_about_one_ninth)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "engine-", 0, 8);
    const int keys = 20000;
    char **before = owners_copy(r, keys);
    add_or_fail(r, "engine-8", 1, NULL);
    char **after = owners_copy(r, keys);
    int moved = 0, owned = 0;
    for (int i = 0; i < keys; i++) {
        if (strcmp(after[i], "engine-8") == 0)
            owned++;
        if (strcmp(before[i], after[i]) != 0) {
            cr_assert_str_eq(after[i], "engine-8", "key-%d moved to an old member", i);
            moved++;
        }
    }
    cr_assert_eq(moved, owned, "every key of the new member moved to it");
    const chring_snap_t *s = chring_snap_enter(r);
    double p = chring_member_share(s, chring_snap_find(s, "engine-8"));
    chring_snap_exit(r, s);
    cr_assert(p > 0.07 && p < 0.16, "p_new = %f is not near 1/9", p);
    double mean = keys * p, sd = sqrt(keys * p * (1 - p));
    cr_assert(fabs(moved - mean) <= 4 * sd, "moved %d, expected %.1f +- 4 * %.1f", moved, mean, sd);
    owners_free(before, keys);
    owners_free(after, keys);
    chring_free(&r);
}

Test(ring, removing_member_moves_only_its_keys_to_next_clockwise)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "engine-", 0, 8);
    const int keys = 10000;
    const chring_snap_t *old = chring_snap_hold(r);
    char **before = owners_copy(r, keys);
    cr_assert_eq(chring_remove(r, "engine-3"), 0, "remove");
    char **after = owners_copy(r, keys);
    int moved = 0;
    char key[32];
    for (int i = 0; i < keys; i++) {
        if (strcmp(before[i], "engine-3") != 0) {
            cr_assert_str_eq(after[i], before[i], "key-%d of another member moved", i);
            continue;
        }
        moved++;
        key_name(key, sizeof key, i);
        const chring_member_t *next[2];
        cr_assert_eq(chring_snap_lookup_n(old, key, strlen(key), next, 2), 2u, "two replicas");
        cr_assert_str_eq(after[i], chring_member_name(next[1]),
                         "key-%d went elsewhere than the next member clockwise", i);
    }
    cr_assert_gt(moved, 0, "engine-3 owned no key");
    chring_snap_put(r, old);
    owners_free(before, keys);
    owners_free(after, keys);
    chring_free(&r);
}

Test(ring, keys_spread_by_arc_share_chi_square)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "engine-", 0, 8);
    const int keys = 80000;
    double counts[8] = {0};
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_points(s), 1280u, "8 x 160 points");
    char key[32];
    for (int i = 0; i < keys; i++) {
        key_name(key, sizeof key, i);
        const char *name = owner_of(s, key);
        counts[atoi(name + strlen("engine-"))] += 1;
    }
    double chi2 = 0, total_share = 0;
    for (int j = 0; j < 8; j++) {
        char name[32];
        snprintf(name, sizeof name, "engine-%d", j);
        double share = chring_member_share(s, chring_snap_find(s, name));
        total_share += share;
        double expect = keys * share;
        chi2 += (counts[j] - expect) * (counts[j] - expect) / expect;
    }
    chring_snap_exit(r, s);
    cr_assert_float_eq(total_share, 1.0, 1e-9, "shares sum to 1");
    cr_assert_lt(chi2, 24.32, "chi-square %f with 7 df", chi2);
    chring_free(&r);
}

Test(ring, member_shares_sum_to_one)
{
    const uint32_t weights[] = {1, 3, 1, 2, 5};
    chring_t *r = ring_create(NULL);
    char name[16];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "m%d", i);
        add_or_fail(r, name, weights[i], NULL);
    }
    const chring_snap_t *s = chring_snap_enter(r);
    double sum = 0;
    for (size_t i = 0; i < chring_snap_len(s); i++) {
        double share = chring_member_share(s, chring_snap_member(s, i));
        cr_assert(share > 0 && share < 1, "share %f", share);
        sum += share;
    }
    cr_assert_float_eq(sum, 1.0, 1e-9, "sum of shares");
    cr_assert_float_eq(chring_member_share(s, NULL), 0.0, 0.0, "NULL member");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(ring, lookup_n_returns_distinct_members_owner_first)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "n", 0, 5);
    const chring_snap_t *s = chring_snap_enter(r);
    char key[32];
    for (int i = 0; i < 500; i++) {
        key_name(key, sizeof key, i);
        const chring_member_t *out[8];
        for (size_t n = 1; n <= 8; n++) {
            size_t got = chring_snap_lookup_n(s, key, strlen(key), out, n);
            cr_assert_eq(got, n < 5 ? n : 5u, "count for n = %zu", n);
            cr_assert_eq(out[0], chring_snap_lookup(s, key, strlen(key)), "owner first");
            for (size_t a = 0; a < got; a++)
                for (size_t b = 0; b < a; b++)
                    cr_assert_neq(out[a], out[b], "replicas %zu and %zu equal", a, b);
        }
    }
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(ring, version_counts_publishes_only)
{
    chring_t *r = ring_create(NULL);
    cr_assert_eq(ring_version(r), 0u, "a new ring has version 0");
    add_or_fail(r, "a", 1, NULL);
    cr_assert_eq(ring_version(r), 1u, "add");
    add_or_fail(r, "b", 1, NULL);
    cr_assert_eq(ring_version(r), 2u, "add");
    add_or_fail(r, "b", 1, NULL);
    cr_assert_eq(chring_set_weight(r, "a", 1), 0, "same weight");
    cr_assert_eq(chring_remove(r, "zz"), -ENOENT, "stranger");
    cr_assert_eq(chring_update(r, NULL, 0), 0, "empty batch");
    cr_assert_eq(ring_version(r), 2u, "no-op changes publish nothing");
    cr_assert_eq(chring_set_weight(r, "a", 2), 0, "weight change");
    cr_assert_eq(ring_version(r), 3u, "set_weight");
    add_or_fail(r, "b", 3, NULL);
    cr_assert_eq(ring_version(r), 4u, "add with another weight acts as set_weight");
    cr_assert_eq(chring_remove(r, "a"), 0, "remove");
    cr_assert_eq(ring_version(r), 5u, "remove");
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.version, 5u, "stats version");
    cr_assert_eq(st.publishes, 5u, "stats publishes");
    cr_assert_eq(st.members, 1u, "stats members");
    cr_assert_eq(st.points, 480u, "b at weight 3 x 160");
    chring_free(&r);
}

Test(ring, zero_length_key_is_valid)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "n", 0, 4);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_lookup(s, NULL, 0);
    cr_assert_not_null(m, "len 0 has an owner");
    cr_assert_eq(chring_snap_lookup(s, "", 0), m, "NULL and \"\" are the same empty key");
    cr_assert_eq(chring_snap_hash(s, NULL, 0), chring_hash64("", 0), "hash of the empty key");
    cr_assert_eq(chring_snap_lookup_hash(s, chring_hash64("", 0)), m, "by hash");
    chring_snap_exit(r, s);
    char buf[16];
    cr_assert_geq(chring_lookup_name(r, NULL, 0, buf, sizeof buf), 2, "lookup_name of len 0");
    chring_lease_t lease;
    cr_assert_eq(chring_acquire(r, NULL, 0, &lease), 0, "acquire of len 0");
    chring_release(r, &lease);
    chring_free(&r);
}

Test(ring, weight_two_member_has_twice_the_points)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 50;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, "one", 1, NULL);
    add_or_fail(r, "two", 2, NULL);
    add_or_fail(r, "five", 5, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_points(s), 400u, "50 * (1 + 2 + 5)");
    cr_assert_eq(chring_snap_member_points(s, chring_snap_find(s, "one")), 50u, "weight 1");
    cr_assert_eq(chring_snap_member_points(s, chring_snap_find(s, "two")), 100u, "weight 2");
    cr_assert_eq(chring_snap_member_points(s, chring_snap_find(s, "five")), 250u, "weight 5");
    cr_assert_eq(chring_snap_weight(s, chring_snap_find(s, "two")), 2u, "snapshot weight");
    cr_assert_eq(chring_member_weight(chring_snap_find(s, "five")), 5u, "member weight");
    size_t counted = 0;
    for (size_t i = 0; i < 400; i++) {
        const chring_member_t *m;
        cr_assert_eq(chring_snap_point(s, i, NULL, &m), 0, "point");
        if (strcmp(chring_member_name(m), "two") == 0)
            counted++;
    }
    cr_assert_eq(counted, 100u, "points of two in ring order");
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* Crowded buckets (docs/design.md §9, src/find.h): a custom hash that packs many points into one
 * bucket of the prefix index, so the search takes its binary-search path.  Label "<x>#<i>" sits
 * at base(x) + 10 i: a at 10, 20, .., 200 and b at 15, 25, .., 205 share the lowest bucket, and c
 * at 2^62 + 10, .., 2^62 + 200 fills one near the middle. */
static uint64_t crowded_base(char name)
{
    return name == 'a' ? 10u : name == 'b' ? 15u : (UINT64_C(1) << 62) + 10u;
}

static uint64_t crowded_hash(const void *data, size_t len, void *ctx)
{
    (void)ctx;
    const char *p = data;
    cr_assert(len >= 3 && p[1] == '#', "only labels are hashed here");
    uint64_t i = 0;
    for (size_t k = 2; k < len; k++)
        i = i * 10 + (uint64_t)(p[k] - '0');
    return crowded_base(p[0]) + 10 * i;
}

Test(ring, crowded_bucket_lookups_find_the_first_point_at_or_after_the_hash, .timeout = 10)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_CUSTOM;
    cfg.hash = crowded_hash;
    cfg.hash_bits = 64;
    cfg.vnodes = 20;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, "c", 1, NULL);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 1, NULL);

    /* The expected ring, from the definition: every point, then the owner by a linear scan. */
    uint64_t pos[60];
    char who[60];
    size_t n = 0;
    for (const char *x = "abc"; *x; x++)
        for (uint64_t i = 0; i < 20; i++)
            pos[n] = crowded_base(*x) + 10 * i, who[n++] = *x;
    uint64_t probes[3 * 230 + 4];
    size_t np = 0;
    for (uint64_t h = 0; h < 230; h++) {
        probes[np++] = h;                             /* in and above the a/b bucket */
        probes[np++] = (UINT64_C(1) << 62) + h;       /* in and above c's bucket */
        probes[np++] = (UINT64_C(1) << 62) - 115 + h; /* just below c's bucket */
    }
    probes[np++] = UINT64_C(1) << 57;
    probes[np++] = UINT64_C(1) << 61;
    probes[np++] = UINT64_C(1) << 63;
    probes[np++] = UINT64_MAX;

    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_points(s), 60u);
    for (size_t k = 0; k < np; k++) {
        uint64_t h = probes[k];
        size_t best = SIZE_MAX, lowest = 0;
        for (size_t i = 0; i < n; i++) {
            if (pos[i] < pos[lowest])
                lowest = i;
            if (pos[i] >= h && (best == SIZE_MAX || pos[i] < pos[best]))
                best = i;
        }
        char expect[2] = {who[best == SIZE_MAX ? lowest : best], 0};
        const chring_member_t *m = chring_snap_lookup_hash(s, h);
        cr_assert_not_null(m, "owner of %llu", (unsigned long long)h);
        cr_assert_str_eq(chring_member_name(m), expect, "owner of hash %llu",
                         (unsigned long long)h);
    }
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* A ring of more than half a million points (3300 members x 160) through every kind of change:
 * after each publish, lookups of 20,000 keys name the owner of the first point at or after the
 * key's hash, found by a binary search of the points copied out of the snapshot.  Rings this
 * large take lookup shortcuts that smaller ones do not (a bucket whose keys all have one owner
 * answers without reading a position), kept up to date by every merge. */

static const chring_member_t *owner_by_search(const struct copied_point *p, size_t n, uint64_t h)
{
    return p[point_by_search(p, n, h)].m;
}

/* The first member clockwise from h's point that is not its owner. */
static const chring_member_t *second_by_search(const struct copied_point *p, size_t n, uint64_t h)
{
    size_t i = point_by_search(p, n, h);
    const chring_member_t *first = p[i].m;
    for (size_t k = 1; k < n; k++)
        if (p[(i + k) % n].m != first)
            return p[(i + k) % n].m;
    return NULL;
}

Test(ring, large_ring_lookups_find_the_first_point_at_or_after_after_every_change, .timeout = 120)
{
    chring_t *r = ring_create(NULL);
    enum {
        MEMBERS = 3300
    };
    static char names[MEMBERS + 64][16];
    chring_change_t *all = calloc(MEMBERS, sizeof *all);
    cr_assert_not_null(all);
    for (int i = 0; i < MEMBERS + 64; i++)
        snprintf(names[i], sizeof names[i], "node-%05d", i);
    for (int i = 0; i < MEMBERS; i++)
        all[i] = (chring_change_t){names[i], 1, NULL};
    cr_assert_eq(chring_sync(r, all, MEMBERS), 0);
    free(all);
    struct copied_point *pts = NULL;
    size_t cap = 0;
    uint64_t seed = 12345;
    for (int step = 0; step < 24; step++) {
        if (step > 0) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            int who = (int)((seed >> 33) % (MEMBERS + 64));
            int rc;
            switch (step % 4) {
            case 0: rc = chring_add(r, names[who], 1 + (uint32_t)(seed >> 60) % 3, NULL); break;
            case 1: rc = chring_remove(r, names[who]); break;
            case 2: rc = chring_set_weight(r, names[who % MEMBERS], 2 + step % 2); break;
            default: {
                chring_change_t batch[3] = {{names[(who + 1) % (MEMBERS + 64)], 0, NULL},
                                            {names[(who + 2) % (MEMBERS + 64)], 2, NULL},
                                            {names[(who + 3) % (MEMBERS + 64)], 1, NULL}};
                rc = chring_update(r, batch, 3);
            }
            }
            cr_assert(rc == 0 || rc == -ENOENT, "step %d: %s", step, chring_strerror(rc));
        }
        const chring_snap_t *s = chring_snap_hold(r);
        size_t n = chring_snap_points(s);
        cr_assert_gt(n, (size_t)1 << 19, "the ring is large enough for the shortcuts");
        if (n > cap) {
            cap = n;
            pts = realloc(pts, cap * sizeof *pts);
            cr_assert_not_null(pts);
        }
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(chring_snap_point(s, i, &pts[i].pos, &pts[i].m), 0);
        for (int k = 0; k < 20000; k++) {
            char key[24];
            int len = snprintf(key, sizeof key, "key-%d-%d", step, k);
            uint64_t h = chring_snap_hash(s, key, (size_t)len);
            const chring_member_t *want = owner_by_search(pts, n, h);
            cr_assert_eq(chring_snap_lookup(s, key, (size_t)len), want, "step %d key %s", step,
                         key);
            cr_assert_eq(chring_snap_lookup_hash(s, h), want, "step %d hash of %s", step, key);
            /* The walks start from the same point (lookup_n, the bounded lookups). */
            const chring_member_t *two[2] = {NULL, NULL};
            cr_assert_eq(chring_snap_lookup_n(s, key, (size_t)len, two, 2), 2);
            cr_assert_eq(two[0], want, "step %d key %s: walk", step, key);
            cr_assert_eq(two[1], second_by_search(pts, n, h), "step %d key %s: walk", step, key);
        }
        chring_snap_put(r, s);
    }
    free(pts);
    chring_free(&r);
}

/* A publish of one change to a ring of more than half a million points keeps the points of the
 * unchanged members and merges the changed ones in (docs/design.md §4): after each kind of
 * change the snapshot is exactly the one a fresh build of the same membership makes, point for
 * point, with the same digest and the same owner for every key (the index included). */
Test(ring, one_change_to_a_large_ring_gives_the_fresh_build_of_its_membership, .timeout = 180)
{
    enum {
        MEMBERS = 3400,
        EXTRA = 8
    };
    static char names[MEMBERS + EXTRA][16];
    static uint32_t weight[MEMBERS + EXTRA];
    chring_change_t *all = calloc(MEMBERS + EXTRA, sizeof *all);
    cr_assert_not_null(all);
    /* fnv32 too: 32-bit positions at this size collide, so equal positions of different
     * members are merged and dropped as well. */
    static const chring_profile_t profiles[] = {CHRING_PROFILE_HASH64, CHRING_PROFILE_FNV32};
    for (size_t pr = 0; pr < sizeof profiles / sizeof profiles[0]; pr++) {
        chring_config_t cfg;
        chring_config_default(&cfg);
        cfg.profile = profiles[pr];
        for (int i = 0; i < MEMBERS + EXTRA; i++) {
            snprintf(names[i], sizeof names[i], "node-%05d", i);
            weight[i] = i < MEMBERS ? 1 : 0;
        }
        chring_t *r = ring_create(&cfg);
        for (int i = 0; i < MEMBERS; i++)
            all[i] = (chring_change_t){names[i], 1, NULL};
        cr_assert_eq(chring_sync(r, all, MEMBERS), 0);
        for (int step = 0; step < 5; step++) {
            switch (step) {
            case 0: /* a new member */
                cr_assert_eq(chring_add(r, names[MEMBERS], 1, NULL), 0);
                weight[MEMBERS] = 1;
                break;
            case 1: /* a member leaves */
                cr_assert_eq(chring_remove(r, names[1234]), 0);
                weight[1234] = 0;
                break;
            case 2: /* a member's weight changes */
                cr_assert_eq(chring_set_weight(r, names[77], 3), 0);
                weight[77] = 3;
                break;
            case 3: { /* one update: a member leaves, one joins, one is re-weighted */
                chring_change_t batch[3] = {
                    {names[5], 0, NULL}, {names[MEMBERS + 1], 2, NULL}, {names[3000], 2, NULL}};
                cr_assert_eq(chring_update(r, batch, 3), 0);
                weight[5] = 0, weight[MEMBERS + 1] = 2, weight[3000] = 2;
                break;
            }
            default: /* the first member back */
                cr_assert_eq(chring_add(r, names[1234], 1, NULL), 0);
                weight[1234] = 1;
            }
            size_t n = 0;
            for (int i = 0; i < MEMBERS + EXTRA; i++)
                if (weight[i] > 0)
                    all[n++] = (chring_change_t){names[i], weight[i], NULL};
            chring_t *fresh = ring_create(&cfg);
            cr_assert_eq(chring_sync(fresh, all, n), 0);
            const chring_snap_t *a = chring_snap_hold(r), *b = chring_snap_hold(fresh);
            size_t np = chring_snap_points(a);
            cr_assert_gt(np, (size_t)1 << 19, "the ring is large enough for the shortcuts");
            cr_assert_eq(np, chring_snap_points(b), "step %d: point counts", step);
            for (size_t i = 0; i < np; i++) {
                uint64_t pa, pb;
                const chring_member_t *ma, *mb;
                cr_assert_eq(chring_snap_point(a, i, &pa, &ma), 0);
                cr_assert_eq(chring_snap_point(b, i, &pb, &mb), 0);
                cr_assert_eq(pa, pb, "step %d point %zu: position", step, i);
                cr_assert_str_eq(chring_member_name(ma), chring_member_name(mb),
                                 "step %d point %zu: member", step, i);
            }
            cr_assert_eq(chring_snap_digest(a), chring_snap_digest(b), "step %d: digest", step);
            uint64_t h = 99;
            for (int k = 0; k < 50000; k++) {
                h = h * 6364136223846793005u + 1442695040888963407u;
                cr_assert_str_eq(chring_member_name(chring_snap_lookup_hash(a, h)),
                                 chring_member_name(chring_snap_lookup_hash(b, h)),
                                 "step %d hash %llu", step, (unsigned long long)h);
            }
            chring_snap_put(r, a);
            chring_snap_put(fresh, b);
            chring_free(&fresh);
        }
        chring_free(&r);
    }
    free(all);
}

/* A removed member's points are found by their positions when few go (docs/design.md §4); a
 * custom hash that is not the function it was (here its salt changes under the ring) finds none
 * of them again, and the publish falls back to reading every owner: the member's points still
 * all go, and every other point stays as it was. */
static uint64_t salted_hash(const void *data, size_t len, void *ctx)
{
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603u ^ *(const uint64_t *)ctx;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211u;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdu;
    return h ^ (h >> 33);
}

Test(ring, removal_with_a_hash_that_changed_still_drops_exactly_the_members_points)
{
    uint64_t salt = 1;
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_CUSTOM;
    cfg.hash = salted_hash;
    cfg.hash_ctx = &salt;
    cfg.hash_bits = 64;
    chring_t *r = ring_create(&cfg);
    char names[100][16];
    chring_change_t all[100];
    for (int i = 0; i < 100; i++) {
        snprintf(names[i], sizeof names[i], "node-%d", i);
        all[i] = (chring_change_t){names[i], 1, NULL};
    }
    cr_assert_eq(chring_sync(r, all, 100), 0);
    const chring_snap_t *a = chring_snap_hold(r);
    size_t n = chring_snap_points(a);
    salt = 2; /* the positions the ring holds are no longer the hash's */
    cr_assert_eq(chring_remove(r, names[42]), 0);
    const chring_snap_t *b = chring_snap_hold(r);
    cr_assert_eq(chring_snap_points(b), n - 160);
    size_t ib = 0;
    for (size_t ia = 0; ia < n; ia++) {
        uint64_t pa, pb;
        const chring_member_t *ma, *mb;
        cr_assert_eq(chring_snap_point(a, ia, &pa, &ma), 0);
        if (strcmp(chring_member_name(ma), names[42]) == 0)
            continue;
        cr_assert_eq(chring_snap_point(b, ib++, &pb, &mb), 0);
        cr_assert_eq(pa, pb, "point %zu", ia);
        cr_assert_eq(ma, mb, "point %zu", ia);
    }
    cr_assert_eq(ib, n - 160);
    chring_snap_put(r, a);
    chring_snap_put(r, b);
    chring_free(&r);
}
