/* Bounded loads with caller-supplied loads (docs/design.md §3, §10): chring_snap_lookup_bounded.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

/* Loads indexed by the member's udata (1-based index stored as a pointer-sized integer). */
struct loads {
    uint64_t value[64];
    unsigned calls;
};

static size_t member_index(const chring_member_t *m)
{
    return (size_t)(uintptr_t)chring_member_udata(m) - 1;
}

static uint64_t load_of(const chring_member_t *m, void *ctx)
{
    struct loads *loads = ctx;
    loads->calls++;
    return loads->value[member_index(m)];
}

/* Loads for the worked example, by name. */
struct named_loads {
    uint64_t a, b, c;
};

static uint64_t named_load(const chring_member_t *m, void *ctx)
{
    const struct named_loads *loads = ctx;
    const char *name = chring_member_name(m);
    return name[0] == 'a' ? loads->a : name[0] == 'b' ? loads->b : loads->c;
}

Test(bounded, worked_example_spills_k1_to_b_and_keeps_k3_on_c)
{
    chring_t *r = worked_ring("abc", 1.25);
    struct named_loads loads = {2, 0, 1};
    const chring_snap_t *s = chring_snap_enter(r);
    /* m = 3, n = 3, cap = ceil(1.25 * 4 / 3) = 2: a (2) is full, b (0) is not. */
    const chring_member_t *m = chring_snap_lookup_bounded(s, "k1", 2, 1.25, named_load, &loads);
    cr_assert_not_null(m, "k1 placed");
    cr_assert_str_eq(chring_member_name(m), "b", "k1 spills from a to b");
    m = chring_snap_lookup_bounded(s, "k3", 2, 1.25, named_load, &loads);
    cr_assert_str_eq(chring_member_name(m), "c", "k3 stays on c (1 < 2)");
    /* k2 (55) is owned by a#1 at 60; a is full, the walk goes on to b#1 at 80. */
    m = chring_snap_lookup_bounded(s, "k2", 2, 1.25, named_load, &loads);
    cr_assert_str_eq(chring_member_name(m), "b", "k2 spills to b");
    /* With b full as well (loads 2, 2, 1: m = 5, cap = ceil(1.25 * 6 / 3) = 3): nobody is full. */
    loads.b = 2;
    m = chring_snap_lookup_bounded(s, "k1", 2, 1.25, named_load, &loads);
    cr_assert_str_eq(chring_member_name(m), "a", "cap grew to 3, a is below it");
    /* Loads 3, 3, 0: m = 6, cap = ceil(1.25 * 7 / 3) = 3: a and b are full, k1 walks to c. */
    loads = (struct named_loads){3, 3, 0};
    m = chring_snap_lookup_bounded(s, "k1", 2, 1.25, named_load, &loads);
    cr_assert_str_eq(chring_member_name(m), "c", "k1 walks past a and b to c");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(bounded, worked_example_with_c_one)
{
    /* c = 1, loads a=1, b=0, c=0: m = 1, cap = ceil(2 / 3) = 1: a is full, k4 wraps to a#0 and
     * spills to b#0. */
    chring_t *r = worked_ring("abc", 1.25);
    struct named_loads loads = {1, 0, 0};
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_lookup_bounded(s, "k4", 2, 1.0, named_load, &loads);
    cr_assert_str_eq(chring_member_name(m), "b", "k4 spills from a to b");
    m = chring_snap_lookup_bounded(s, "k5", 2, 1.0, named_load, &loads);
    cr_assert_str_eq(chring_member_name(m), "b", "k5's owner b is not full");
    chring_snap_exit(r, s);
    chring_free(&r);
}

static chring_t *indexed_ring(int members, uint32_t vnodes)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = vnodes;
    chring_t *r = ring_create(&cfg);
    char name[32];
    for (int i = 0; i < members; i++) {
        snprintf(name, sizeof name, "server-%d", i);
        add_or_fail(r, name, 1, (void *)(uintptr_t)(i + 1));
    }
    return r;
}

enum key_pattern {
    DISTINCT_KEYS,
    ONE_HOT_KEY,
    THREE_HOT_KEYS
};

/* Places `count` keys one by one with bounded lookups, incrementing the chosen member's load.
 * Checks every placement against the rule: the first member clockwise (the order of
 * chring_snap_lookup_n) whose load is below cap = chring_capacity(m, n, c). */
static void place_keys(chring_t *r, int members, enum key_pattern pattern, int count, double c)
{
    struct loads loads;
    memset(&loads, 0, sizeof loads);
    const chring_snap_t *s = chring_snap_enter(r);
    uint64_t placed = 0;
    char key[32];
    for (int k = 0; k < count; k++) {
        switch (pattern) {
        case DISTINCT_KEYS: key_name(key, sizeof key, k); break;
        case ONE_HOT_KEY: snprintf(key, sizeof key, "hot"); break;
        case THREE_HOT_KEYS: snprintf(key, sizeof key, "hot-%d", k % 3); break;
        }
        size_t len = strlen(key);
        uint64_t cap = chring_capacity(placed, (uint64_t)members, c);
        const chring_member_t *walk[64];
        size_t walked = chring_snap_lookup_n(s, key, len, walk, (size_t)members);
        cr_assert_eq(walked, (size_t)members, "lookup_n");
        const chring_member_t *expect = NULL;
        for (size_t i = 0; i < walked && !expect; i++)
            if (loads.value[member_index(walk[i])] < cap)
                expect = walk[i];
        cr_assert_not_null(expect, "some member is below cap");
        const chring_member_t *got = chring_snap_lookup_bounded(s, key, len, c, load_of, &loads);
        cr_assert_not_null(got, "placement %d", k);
        cr_assert_lt(loads.value[member_index(got)], cap,
                     "placement %d chose %s at load %llu, cap %llu", k, chring_member_name(got),
                     (unsigned long long)loads.value[member_index(got)], (unsigned long long)cap);
        cr_assert_eq(got, expect, "placement %d: %s instead of the first member below cap, %s", k,
                     chring_member_name(got), chring_member_name(expect));
        loads.value[member_index(got)]++;
        placed++;
    }
    chring_snap_exit(r, s);
    uint64_t bound = (uint64_t)ceil(fmax(c, 1.0) * count / members);
    for (int j = 0; j < members; j++)
        cr_assert_leq(loads.value[j], bound, "member %d has %llu > ceil(cK/n) = %llu", j,
                      (unsigned long long)loads.value[j], (unsigned long long)bound);
}

static void place_all_patterns(double c)
{
    chring_t *r = indexed_ring(8, 40);
    place_keys(r, 8, DISTINCT_KEYS, 1000, c);
    place_keys(r, 8, ONE_HOT_KEY, 1000, c);
    place_keys(r, 8, THREE_HOT_KEYS, 999, c);
    chring_free(&r);
}

Test(bounded, never_exceeds_capacity_c_1)
{
    place_all_patterns(1.0);
}

Test(bounded, never_exceeds_capacity_c_1_25)
{
    place_all_patterns(1.25);
}

Test(bounded, never_exceeds_capacity_c_2)
{
    place_all_patterns(2.0);
}

Test(bounded, never_exceeds_capacity_odd_member_count)
{
    chring_t *r = indexed_ring(7, 160);
    place_keys(r, 7, ONE_HOT_KEY, 500, 1.25);
    place_keys(r, 7, DISTINCT_KEYS, 500, 1.1);
    chring_free(&r);
}

Test(bounded, equals_plain_lookup_when_unloaded)
{
    chring_t *r = indexed_ring(8, 160);
    struct loads loads;
    memset(&loads, 0, sizeof loads);
    const chring_snap_t *s = chring_snap_enter(r);
    char key[32];
    const double cs[] = {1.0, 1.25, 2.0};
    for (int i = 0; i < 3000; i++) {
        key_name(key, sizeof key, i);
        const chring_member_t *plain = chring_snap_lookup(s, key, strlen(key));
        for (int j = 0; j < 3; j++)
            cr_assert_eq(chring_snap_lookup_bounded(s, key, strlen(key), cs[j], load_of, &loads),
                         plain, "key-%d c=%g", i, cs[j]);
    }
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* Runs the hot-key placement for two factors and requires identical choices. */
static void assert_places_like(double c, double reference)
{
    chring_t *r = indexed_ring(8, 40);
    struct loads la, lb;
    memset(&la, 0, sizeof la);
    memset(&lb, 0, sizeof lb);
    const chring_snap_t *s = chring_snap_enter(r);
    char key[32];
    for (int k = 0; k < 800; k++) {
        if (k % 2)
            snprintf(key, sizeof key, "hot");
        else
            key_name(key, sizeof key, k);
        const chring_member_t *a = chring_snap_lookup_bounded(s, key, strlen(key), c, load_of, &la);
        const chring_member_t *b =
            chring_snap_lookup_bounded(s, key, strlen(key), reference, load_of, &lb);
        cr_assert_not_null(a, "placed");
        cr_assert_eq(a, b, "placement %d differs for c = %g and c = %g", k, c, reference);
        la.value[member_index(a)]++;
        lb.value[member_index(b)]++;
    }
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(bounded, c_below_one_places_exactly_like_one)
{
    assert_places_like(0.5, 1.0);
    assert_places_like(0.0, 1.0);
    assert_places_like(-3.0, 1.0);
}

Test(bounded, nan_and_infinite_c_place_like_one)
{
    assert_places_like(NAN, 1.0);
    assert_places_like(INFINITY, 1.0);
    assert_places_like(-INFINITY, 1.0);
}

Test(bounded, c_one_is_not_c_two)
{
    /* The factor matters: on a hot key c = 1 and c = 2 must diverge (guards against a
     * library that ignores c, which would also pass the "acts as 1" tests). */
    chring_t *r = indexed_ring(4, 40);
    struct loads l1, l2;
    memset(&l1, 0, sizeof l1);
    memset(&l2, 0, sizeof l2);
    const chring_snap_t *s = chring_snap_enter(r);
    int differ = 0;
    for (int k = 0; k < 100; k++) {
        const chring_member_t *a = chring_snap_lookup_bounded(s, "hot", 3, 1.0, load_of, &l1);
        const chring_member_t *b = chring_snap_lookup_bounded(s, "hot", 3, 2.0, load_of, &l2);
        differ += a != b;
        l1.value[member_index(a)]++;
        l2.value[member_index(b)]++;
    }
    chring_snap_exit(r, s);
    cr_assert_gt(differ, 0, "c = 1 and c = 2 placed a hot key identically");
    chring_free(&r);
}

Test(bounded, weighted_capacity_governs_the_walk)
{
    /* Members a (weight 3) and b (weight 1), a hot key, c = 1: each member's capacity is
     * chring_capacity_weighted(m, w, 4, 1), so after 400 placements a has 300 and b 100. */
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 20;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, "a", 3, (void *)(uintptr_t)1);
    add_or_fail(r, "b", 1, (void *)(uintptr_t)2);
    struct loads loads;
    memset(&loads, 0, sizeof loads);
    const chring_snap_t *s = chring_snap_enter(r);
    uint64_t placed = 0;
    for (int k = 0; k < 400; k++) {
        const chring_member_t *walk[2];
        cr_assert_eq(chring_snap_lookup_n(s, "hot", 3, walk, 2), 2u, "two members");
        const chring_member_t *expect = NULL;
        for (size_t i = 0; i < 2 && !expect; i++) {
            uint64_t w = chring_snap_weight(s, walk[i]);
            if (loads.value[member_index(walk[i])] < chring_capacity_weighted(placed, w, 4, 1.0))
                expect = walk[i];
        }
        const chring_member_t *got = chring_snap_lookup_bounded(s, "hot", 3, 1.0, load_of, &loads);
        cr_assert_eq(got, expect, "placement %d", k);
        loads.value[member_index(got)]++;
        placed++;
    }
    chring_snap_exit(r, s);
    cr_assert_eq(loads.value[0], 300u, "weight 3 of 4");
    cr_assert_eq(loads.value[1], 100u, "weight 1 of 4");
    chring_free(&r);
}

Test(bounded, null_arguments_return_null)
{
    chring_t *r = indexed_ring(3, 10);
    struct loads loads;
    memset(&loads, 0, sizeof loads);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_null(chring_snap_lookup_bounded(NULL, "k", 1, 1.25, load_of, &loads), "NULL s");
    cr_assert_null(chring_snap_lookup_bounded(s, "k", 1, 1.25, NULL, &loads), "NULL load");
    cr_assert_null(chring_snap_lookup_bounded(s, NULL, 1, 1.25, load_of, &loads), "NULL key");
    cr_assert_not_null(chring_snap_lookup_bounded(s, NULL, 0, 1.25, load_of, &loads), "len 0");
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* A callback that reports zero loads while the sum is taken and huge loads afterwards: an
 * inconsistent caller.  The walk must still end after visiting each point at most once and
 * answer with some member rather than loop or fail. */
struct two_faced {
    unsigned calls;
    unsigned members;
};

static uint64_t two_faced_load(const chring_member_t *m, void *ctx)
{
    (void)m;
    struct two_faced *tf = ctx;
    return tf->calls++ < tf->members ? 0 : UINT32_MAX;
}

Test(bounded, inconsistent_loads_end_the_walk_with_a_member)
{
    chring_t *r = indexed_ring(5, 20);
    const chring_snap_t *s = chring_snap_enter(r);
    for (int k = 0; k < 50; k++) {
        char key[32];
        key_name(key, sizeof key, k);
        struct two_faced tf = {0, 5};
        const chring_member_t *m =
            chring_snap_lookup_bounded(s, key, strlen(key), 1.25, two_faced_load, &tf);
        cr_assert_not_null(m, "the walk answers");
        cr_assert_leq(tf.calls, 5u + 100u, "at most one load per member plus one per point");
    }
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* Loads that look full everywhere: the first time the library asks about a member (taking m,
 * the sum over every member, which it needs before judging any) the callback says 1; every later
 * time it says the member's walk load, all far above any capacity m = n allows.  No member is
 * below its capacity, so the walk must place the key on the least loaded member it met
 * (docs/design.md §3) -- not on the owner, nor on the last member it tried. */
struct full_loads {
    uint64_t walk[64];
    unsigned asked[64];
};

static uint64_t full_load(const chring_member_t *m, void *ctx)
{
    struct full_loads *fl = ctx;
    size_t j = member_index(m);
    return fl->asked[j]++ == 0 ? 1 : fl->walk[j];
}

Test(bounded, every_member_full_goes_to_the_least_loaded_one_met)
{
    enum {
        MEMBERS = 5
    };
    chring_t *r = indexed_ring(MEMBERS, 20);
    const chring_snap_t *s = chring_snap_enter(r);
    int not_owner = 0, not_last = 0;
    char key[32];
    for (int k = 0; k < 100; k++) {
        key_name(key, sizeof key, k);
        const chring_member_t *order[MEMBERS];
        cr_assert_eq(chring_snap_lookup_n(s, key, strlen(key), order, MEMBERS), (size_t)MEMBERS,
                     "the walk meets every member");
        /* The least loaded member rotates through the walk's positions, owner and last included;
         * loads are distinct so the answer is unique. */
        size_t least = (size_t)k % MEMBERS;
        struct full_loads fl;
        memset(&fl, 0, sizeof fl);
        for (size_t i = 0; i < MEMBERS; i++)
            fl.walk[member_index(order[i])] = 1000 + 10 * ((i + MEMBERS - least) % MEMBERS);
        const chring_member_t *got =
            chring_snap_lookup_bounded(s, key, strlen(key), 1.25, full_load, &fl);
        cr_assert_not_null(got, "key-%d placed", k);
        cr_assert_str_eq(chring_member_name(got), chring_member_name(order[least]),
                         "key-%d: every member full, the least loaded one met (walk position %zu)",
                         k, least);
        not_owner += least != 0;
        not_last += least != MEMBERS - 1;
    }
    cr_assert_gt(not_owner, 0, "some keys' least loaded member is not the owner");
    cr_assert_gt(not_last, 0, "some keys' least loaded member is not the last one met");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(bounded, every_member_full_worked_example_by_hand)
{
    /* k1 (5) walks a#0, b#0, c#0; loads as m was taken a = b = c = 1 (m = 3, cap = 2), on the
     * walk a = 9, b = 7, c = 8: all full, b is the least loaded. */
    chring_t *r = table_ring(&worked_table, 64, 2, 1.25);
    add_or_fail(r, "a", 1, (void *)(uintptr_t)1);
    add_or_fail(r, "b", 1, (void *)(uintptr_t)2);
    add_or_fail(r, "c", 1, (void *)(uintptr_t)3);
    const chring_snap_t *s = chring_snap_enter(r);
    struct full_loads fl;
    memset(&fl, 0, sizeof fl);
    fl.walk[0] = 9, fl.walk[1] = 7, fl.walk[2] = 8;
    const chring_member_t *m = chring_snap_lookup_bounded(s, "k1", 2, 1.25, full_load, &fl);
    cr_assert_str_eq(chring_member_name(m), "b", "k1: b (7) is the least loaded, not a or c");
    /* k3 (85) walks c#1, a#0, b#0: with c = 8, a = 6, b = 7 the least loaded is a. */
    memset(&fl, 0, sizeof fl);
    fl.walk[0] = 6, fl.walk[1] = 7, fl.walk[2] = 8;
    m = chring_snap_lookup_bounded(s, "k3", 2, 1.25, full_load, &fl);
    cr_assert_str_eq(chring_member_name(m), "a", "k3: a (6), neither the owner c nor the last b");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(bounded, load_sum_covers_every_member)
{
    /* m is the sum over all members: with every load 0 but one member's 8, c = 1 and 4
     * members, cap = ceil(9 / 4) = 3, so the loaded member is full and nobody else is. */
    chring_t *r = indexed_ring(4, 40);
    const chring_snap_t *s = chring_snap_enter(r);
    char key[32];
    for (int k = 0; k < 200; k++) {
        key_name(key, sizeof key, k);
        const chring_member_t *owner = chring_snap_lookup(s, key, strlen(key));
        struct loads loads;
        memset(&loads, 0, sizeof loads);
        loads.value[member_index(owner)] = 8;
        const chring_member_t *got =
            chring_snap_lookup_bounded(s, key, strlen(key), 1.0, load_of, &loads);
        const chring_member_t *walk[2];
        cr_assert_eq(chring_snap_lookup_n(s, key, strlen(key), walk, 2), 2u, "two members");
        cr_assert_eq(got, walk[1], "key-%d: the full owner is skipped for the next member", k);
        cr_assert_geq(loads.calls, 4u, "the callback is asked about every member");
        /* The owner alone at 2: m = 2, cap = ceil(3 / 4) = 1, so it is full as well. */
        memset(&loads, 0, sizeof loads);
        loads.value[member_index(owner)] = 2;
        got = chring_snap_lookup_bounded(s, key, strlen(key), 1.0, load_of, &loads);
        cr_assert_eq(got, walk[1], "key-%d: owner at 2 with cap 1 is full", k);
        loads.value[member_index(owner)] = 0;
        got = chring_snap_lookup_bounded(s, key, strlen(key), 1.0, load_of, &loads);
        cr_assert_eq(got, owner, "key-%d: unloaded owner keeps it", k);
    }
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* The capacity formula itself (docs/design.md §3, §10): chring_capacity and
 * chring_capacity_weighted. */

Test(capacity, spec_reference_cases)
{
    cr_assert_eq(chring_capacity(3, 3, 1.25), 2u, "(3,3,1.25)");
    cr_assert_eq(chring_capacity(0, 8, 1.25), 1u, "(0,8,1.25)");
    cr_assert_eq(chring_capacity(7, 8, 1.25), 2u, "(7,8,1.25)");
    cr_assert_eq(chring_capacity(100, 8, 1.25), 16u, "(100,8,1.25)");
    cr_assert_eq(chring_capacity(10, 0, 1.25), 0u, "(10,0,1.25): no members");
    cr_assert_eq(chring_capacity(5, 2, 0.5), 3u, "(5,2,0.5): c acts as 1");
}

Test(capacity, largest_lease_count_does_not_wrap_m_plus_one)
{
    /* m = 2^64 - 1: m + 1 = 2^64 is formed in double, not in 64-bit integers where it is 0. */
    cr_assert_eq(chring_capacity(UINT64_MAX, 4, 1.0), UINT64_C(1) << 62, "2^64 / 4");
    cr_assert_eq(chring_capacity_weighted(UINT64_MAX, 3, 8, 1.0), UINT64_C(3) << 61,
                 "2^64 * 3 / 8");
    cr_assert_eq(chring_capacity(UINT64_MAX, 1, 1.0), UINT64_MAX, "2^64 saturates");
}

Test(capacity, c_below_one_nan_infinite_or_negative_acts_as_one)
{
    for (uint64_t m = 0; m < 200; m += 7) {
        for (uint64_t n = 1; n < 12; n++) {
            uint64_t one = chring_capacity(m, n, 1.0);
            cr_assert_eq(one, (uint64_t)ceil((double)(m + 1) / (double)n), "c = 1");
            cr_assert_eq(chring_capacity(m, n, 0.5), one, "c = 0.5, m=%llu n=%llu",
                         (unsigned long long)m, (unsigned long long)n);
            cr_assert_eq(chring_capacity(m, n, 0.0), one, "c = 0");
            cr_assert_eq(chring_capacity(m, n, -2.0), one, "c = -2");
            cr_assert_eq(chring_capacity(m, n, NAN), one, "c = NaN");
            cr_assert_eq(chring_capacity(m, n, INFINITY), one, "c = inf");
            cr_assert_eq(chring_capacity(m, n, -INFINITY), one, "c = -inf");
        }
    }
}

Test(capacity, is_computed_in_ieee_double_as_written)
{
    /* 1.1 * 50 is 55.000000000000007 in double, so the normative double formula gives 56 where
     * exact arithmetic would give 55. */
    cr_assert_eq(chring_capacity(49, 1, 1.1), 56u, "ceil(1.1 * 50 / 1) in double");
    for (uint64_t m = 0; m < 300; m += 3) {
        for (uint64_t n = 1; n < 20; n++) {
            const double cs[] = {1.0, 1.1, 1.25, 1.3, 2.0, 3.7};
            for (size_t i = 0; i < 6; i++) {
                double expect = ceil(cs[i] * (double)(m + 1) / (double)n);
                cr_assert_eq(chring_capacity(m, n, cs[i]), (uint64_t)expect, "m=%llu n=%llu c=%g",
                             (unsigned long long)m, (unsigned long long)n, cs[i]);
            }
        }
    }
}

Test(capacity, weighted_is_left_to_right_double)
{
    /* Left to right: ceil(((1.1 * 10) * 5) / 11) = 5; ceil(1.1 * (10 * 5 / 11)) would be 6. */
    cr_assert_eq(chring_capacity_weighted(9, 5, 11, 1.1), 5u, "(9,5,11,1.1)");
    /* ceil(((1.1 * 12) * 5) / 6) = 11; ceil(1.1 * 12 * (5 / 6)) would be 12. */
    cr_assert_eq(chring_capacity_weighted(11, 5, 6, 1.1), 11u, "(11,5,6,1.1)");
    /* 3 leases, weight 2 of 4, c = 1.25: ceil(1.25 * 4 * 2 / 4) = 3. */
    cr_assert_eq(chring_capacity_weighted(3, 2, 4, 1.25), 3u, "(3,2,4,1.25)");
    cr_assert_eq(chring_capacity_weighted(10, 1, 0, 1.25), 0u, "total weight 0");
    cr_assert_eq(chring_capacity_weighted(5, 1, 2, 0.5), 3u, "c below 1 acts as 1");
    cr_assert_eq(chring_capacity_weighted(5, 1, 2, NAN), 3u, "NaN acts as 1");
    cr_assert_eq(chring_capacity_weighted(5, 1, 2, INFINITY), 3u, "inf acts as 1");
    for (uint64_t m = 0; m < 100; m += 3)
        for (uint64_t w = 1; w < 5; w++)
            for (uint64_t tw = w; tw < 14; tw++) {
                double expect = ceil(1.25 * (double)(m + 1) * (double)w / (double)tw);
                cr_assert_eq(chring_capacity_weighted(m, w, tw, 1.25), (uint64_t)expect,
                             "m=%llu w=%llu W=%llu", (unsigned long long)m, (unsigned long long)w,
                             (unsigned long long)tw);
            }
}

Test(capacity, weighted_with_unit_weights_equals_unweighted)
{
    const double cs[] = {1.0, 1.1, 1.25, 2.0};
    for (size_t i = 0; i < 4; i++)
        for (uint64_t m = 0; m < 500; m += 11)
            for (uint64_t n = 1; n < 17; n++)
                cr_assert_eq(chring_capacity_weighted(m, 1, n, cs[i]), chring_capacity(m, n, cs[i]),
                             "m=%llu n=%llu c=%g", (unsigned long long)m, (unsigned long long)n,
                             cs[i]);
}
