/* Regression tests for what the fuzz targets found (fuzz/, docs/fuzz.md), and replays of the
 * checks behind their most interesting corpus inputs.  Each test is named after what it proves.
 *
 * SPDX-License-Identifier: MIT
 *
 * This file is compiled twice (tests/regress/meson.build): against the shared library, as a user
 * sees it, and against a copy of the library built with UndefinedBehaviorSanitizer, so that a
 * finding that was undefined behaviour (not a wrong answer) fails here as well.
 */
#include <chring.h>

#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------- */

static chring_t *ring_of(chring_profile_t profile, uint32_t vnodes)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    cfg.vnodes = vnodes;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    return r;
}

static const char *owner(chring_t *r, const char *key)
{
    static char name[CHRING_NAME_MAX + 1];
    int n = chring_lookup_name(r, key, strlen(key), name, sizeof name);
    return n < 0 ? NULL : name;
}

/* The worked example's table hash (docs/design.md §10). */
static uint64_t table_hash(const void *data, size_t len, void *ctx)
{
    static const struct {
        const char *s;
        uint64_t v;
    } table[] = {{"a#0", 10}, {"b#0", 30}, {"c#0", 50}, {"a#1", 60}, {"b#1", 80}, {"c#1", 95},
                 {"k1", 5},   {"k2", 55},  {"k3", 85},  {"k4", 97},  {"k5", 30}};
    (void)ctx;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strlen(table[i].s) == len && memcmp(table[i].s, data, len) == 0)
            return table[i].v;
    return 0;
}

typedef struct retired {
    int count[4];
} retired_t;

static void count_retire(void *udata, void *ctx)
{
    retired_t *r = ctx;
    r->count[(intptr_t)udata]++;
}

/* ---- findings ------------------------------------------------------------------------------ */

/* Finding 1 (fuzz_api, UBSan): chring_murmur3_32(NULL, 0, seed) computed NULL + 0, undefined
 * behaviour; a NULL zero-length key is valid everywhere (docs/design.md §6).  Fails in the UBSan
 * build. */
Test(regress, murmur3_null_empty_key_is_defined)
{
    cr_assert_eq(chring_murmur3_32(NULL, 0, 0), 0u);
    cr_assert_eq(chring_murmur3_32(NULL, 0, 7), chring_murmur3_32("", 0, 7));
    chring_t *r = ring_of(CHRING_PROFILE_MURMUR32, 4);
    cr_assert_eq(chring_add(r, "a", 1, NULL), 0);
    cr_assert_eq(chring_add(r, "b", 1, NULL), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_hash(s, NULL, 0), chring_snap_hash(s, "", 0));
    cr_assert_eq(chring_snap_lookup(s, NULL, 0), chring_snap_lookup(s, "", 0));
    chring_snap_exit(r, s);
    chring_lease_t lease;
    cr_assert_eq(chring_acquire(r, NULL, 0, &lease), 0);
    chring_release(r, &lease);
    chring_free(&r);
}

/* Finding 3 (fuzz_api, UBSan, the full build, now in src/snap_build.c): building an fnv16
 * snapshot put its uint64_t scratch array right after npoints uint32_t owners, misaligned whenever the nominal point count
 * is odd (one member of weight 1 at V = 1 is enough): undefined behaviour, a trap on
 * strict-alignment machines.  Fails in the UBSan build (test_fuzz_regress_ubsan). */
Test(regress, fnv16_odd_point_count_builds_without_misaligned_access)
{
    chring_t *r = ring_of(CHRING_PROFILE_FNV16, 1);
    cr_assert_eq(chring_add(r, "a", 1, NULL), 0);
    cr_assert_eq(chring_add(r, "b", 2, NULL), 0);
    cr_assert_eq(chring_set_weight(r, "a", 2), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_len(s), 2u);
    cr_assert_leq(chring_snap_points(s), 4u);
    cr_assert_eq(chring_snap_check(s), 0);
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* ---- replays of the fuzz model's checks ---------------------------------------------------- */

/* The docs/design.md §10 worked example through a custom hash: point order, lookups (a point
 * exactly at the key's hash counts; wrap), and the bounded walk with caller-supplied loads. */
static uint64_t example_load(const chring_member_t *m, void *ctx)
{
    (void)ctx;
    const char *n = chring_member_name(m);
    return n[0] == 'a' ? 2 : n[0] == 'b' ? 0 : 1;
}

Test(regress, worked_example_order_lookups_and_bounded_walk)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_CUSTOM;
    cfg.hash = table_hash;
    cfg.hash_bits = 64;
    cfg.vnodes = 2;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    /* Joined in another order than the ring's: the ring must not depend on it. */
    cr_assert_eq(chring_add(r, "c", 1, NULL), 0);
    cr_assert_eq(chring_add(r, "a", 1, NULL), 0);
    cr_assert_eq(chring_add(r, "b", 1, NULL), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    static const uint64_t pos[6] = {10, 30, 50, 60, 80, 95};
    static const char names[6] = {'a', 'b', 'c', 'a', 'b', 'c'};
    cr_assert_eq(chring_snap_points(s), 6u);
    for (size_t i = 0; i < 6; i++) {
        uint64_t p;
        const chring_member_t *m;
        cr_assert_eq(chring_snap_point(s, i, &p, &m), 0);
        cr_assert_eq(p, pos[i], "point %zu at %llu", i, (unsigned long long)p);
        cr_assert_eq(chring_member_name(m)[0], names[i]);
    }
    cr_assert_eq(chring_snap_point(s, 6, NULL, NULL), -ERANGE);
    chring_snap_exit(r, s);
    cr_assert_str_eq(owner(r, "k1"), "a");
    cr_assert_str_eq(owner(r, "k2"), "a");
    cr_assert_str_eq(owner(r, "k3"), "c");
    cr_assert_str_eq(owner(r, "k4"), "a");
    cr_assert_str_eq(owner(r, "k5"), "b");
    s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_lookup_bounded(s, "k1", 2, 1.25, example_load, NULL);
    cr_assert_str_eq(chring_member_name(m), "b");
    m = chring_snap_lookup_bounded(s, "k3", 2, 1.25, example_load, NULL);
    cr_assert_str_eq(chring_member_name(m), "c");
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* fnv16 (docs/design.md §2): "1-a" at V = 1, weight 1 has exactly the label of "a"'s point 1, so
 * when "a" joined first, "1-a" is left without points: it is a member (len 2) that owns nothing and
 * that lookup_n never meets.  After "a" leaves and joins again, "1-a" is the earlier joiner and
 * keeps the position. */
Test(regress, fnv16_earlier_joiner_keeps_a_contested_label)
{
    chring_t *r = ring_of(CHRING_PROFILE_FNV16, 1);
    cr_assert_eq(chring_add(r, "a", 2, NULL), 0);
    cr_assert_eq(chring_add(r, "1-a", 1, NULL), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *late = chring_snap_find(s, "1-a");
    cr_assert_not_null(late);
    cr_assert_eq(chring_snap_len(s), 2u);
    cr_assert_eq(chring_snap_points(s), 2u);
    cr_assert_eq(chring_snap_member_points(s, late), 0u);
    cr_assert_eq(chring_member_share(s, late), 0.0);
    const chring_member_t *out[4];
    cr_assert_eq(chring_snap_lookup_n(s, "k", 1, out, 4), 1u);
    cr_assert_str_eq(chring_member_name(out[0]), "a");
    chring_snap_exit(r, s);

    cr_assert_eq(chring_remove(r, "a"), 0);
    cr_assert_eq(chring_add(r, "a", 2, NULL), 0);
    s = chring_snap_enter(r);
    late = chring_snap_find(s, "1-a");
    const chring_member_t *a = chring_snap_find(s, "a");
    cr_assert_eq(chring_snap_member_points(s, late), 1u);
    cr_assert_eq(chring_snap_member_points(s, a), 1u);
    cr_assert_eq(chring_snap_points(s), 2u);
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* The docs/design.md §10 fnv16 example. */
Test(regress, fnv16_reference_example)
{
    chring_t *r = ring_of(CHRING_PROFILE_FNV16, 1);
    cr_assert_eq(chring_add(r, "alpha", 2, NULL), 0);
    cr_assert_eq(chring_add(r, "beta", 2, NULL), 0);
    cr_assert_eq(chring_add(r, "gamma", 2, NULL), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_hash(s, "orange", 6), 29675u);
    chring_snap_exit(r, s);
    cr_assert_str_eq(owner(r, "orange"), "alpha");
    cr_assert_str_eq(owner(r, "apple"), "beta");
    chring_free(&r);
}

/* Weights whose point count passes 2^32 must not wrap in 32-bit arithmetic: V = 4 and
 * w = 2^30 is exactly 2^32 points (0 when wrapped), w = 2^30 + 1 wraps to 4.  Both are -E2BIG and
 * publish nothing, in add, set_weight, update and sync. */
Test(regress, point_count_overflow_is_e2big)
{
    chring_t *r = ring_of(CHRING_PROFILE_HASH64, 4);
    const uint32_t bad[] = {UINT32_C(1) << 30, (UINT32_C(1) << 30) + 1, (1u << 22) + 1, UINT32_MAX};
    cr_assert_eq(chring_add(r, "a", 1, NULL), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(chring_add(r, "b", bad[i], NULL), -E2BIG, "add weight %u", bad[i]);
        cr_assert_eq(chring_set_weight(r, "a", bad[i]), -E2BIG, "set_weight %u", bad[i]);
        chring_change_t c = {"c", bad[i], NULL};
        cr_assert_eq(chring_update(r, &c, 1), -E2BIG);
        cr_assert_eq(chring_sync(r, &c, 1), -E2BIG);
    }
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.version, 1u);
    cr_assert_eq(st.members, 1u);
    cr_assert_eq(st.points, 4u);
    chring_free(&r);
}

/* A removed member is retired once, and only after its last lease is released and the last held
 * snapshot listing it is put (docs/design.md §4). */
Test(regress, retire_waits_for_stale_lease_and_held_snapshot)
{
    retired_t retired = {{0}};
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 4;
    cfg.retire = count_retire;
    cfg.retire_ctx = &retired;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    cr_assert_eq(chring_add(r, "a", 1, (void *)(intptr_t)1), 0);
    cr_assert_eq(chring_add(r, "b", 1, (void *)(intptr_t)2), 0);
    chring_lease_t lease[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(chring_acquire(r, "same key", 8, &lease[i]), 0);
    const chring_snap_t *held = chring_snap_hold(r);
    const chring_member_t *victim = lease[0].member;
    intptr_t id = (intptr_t)chring_member_udata(victim);
    cr_assert_eq(chring_remove(r, chring_member_name(victim)), 0);
    /* Give call_rcu every chance to run: publish more snapshots. */
    for (int i = 0; i < 50; i++)
        cr_assert_eq(chring_set_weight(r, id == 1 ? "b" : "a", 1 + (uint32_t)(i % 3)), 0);
    for (int i = 0; i < 3; i++)
        if (lease[i].member == victim)
            chring_release(r, &lease[i]);
    cr_assert_eq(chring_member_check(victim), 0);
    cr_assert_eq(retired.count[id], 0, "retired while a held snapshot lists it");
    chring_snap_put(r, held);
    for (int i = 0; i < 3; i++)
        chring_release(r, &lease[i]); /* the others; a cleared lease is a no-op */
    chring_release(r, &lease[0]);     /* twice: a no-op */
    chring_free(&r);
    cr_assert_eq(retired.count[1], 1);
    cr_assert_eq(retired.count[2], 1);
}

/* chring_snap_moved is the exact fraction: removing one member moves exactly its arc share. */
Test(regress, moved_after_remove_equals_the_removed_share)
{
    chring_t *r = ring_of(CHRING_PROFILE_HASH64, 8);
    cr_assert_eq(chring_add(r, "a", 1, NULL), 0);
    cr_assert_eq(chring_add(r, "b", 2, NULL), 0);
    cr_assert_eq(chring_add(r, "c", 3, NULL), 0);
    const chring_snap_t *before = chring_snap_hold(r);
    double share = chring_member_share(before, chring_snap_find(before, "b"));
    cr_assert_eq(chring_remove(r, "b"), 0);
    const chring_snap_t *after = chring_snap_enter(r);
    double moved = chring_snap_moved(before, after);
    cr_assert(fabs(moved - share) < 1e-12, "moved %.17g, share %.17g", moved, share);
    cr_assert(fabs(chring_snap_moved(after, before) - share) < 1e-12);
    cr_assert_eq(chring_snap_moved(after, after), 0.0);
    cr_assert(isnan(chring_snap_moved(after, NULL)));
    chring_snap_exit(r, after);
    chring_snap_put(r, before);
    chring_free(&r);
}

/* Capacities of docs/design.md §10, and a huge c whose capacity passes 2^64: it must saturate, not
 * convert an out-of-range double (undefined behaviour, caught by the UBSan build). */
Test(regress, capacity_reference_values_and_huge_balance)
{
    cr_assert_eq(chring_capacity(3, 3, 1.25), 2u);
    cr_assert_eq(chring_capacity(0, 8, 1.25), 1u);
    cr_assert_eq(chring_capacity(7, 8, 1.25), 2u);
    cr_assert_eq(chring_capacity(100, 8, 1.25), 16u);
    cr_assert_eq(chring_capacity(10, 0, 1.25), 0u);
    cr_assert_eq(chring_capacity(5, 2, 0.5), 3u);
    cr_assert_eq(chring_capacity(5, 2, NAN), 3u);
    cr_assert_eq(chring_capacity(5, 2, INFINITY), 3u);
    cr_assert_geq(chring_capacity(5, 2, 1e300), UINT64_C(1) << 63);
    cr_assert_geq(chring_capacity_weighted(5, 3, 4, 1e300), UINT64_C(1) << 63);
    cr_assert_eq(chring_capacity_weighted(3, 1, 3, 1.25), 2u);
    cr_assert_eq(chring_capacity_weighted(3, 0, 3, 1.25), 0u);
}

/* fuzz_api found this (fuzz/regress/api/effective-weight-ramp-while-down): a member at a
 * constant admission scale below 1 that is down when the effective weights are summed made the
 * sum find no member ramping and turn the ring's ramp epoch off; set up again, it was counted at
 * its full weight in the total E of every member at scale 1 (docs/design.md §3, "Effective
 * weights"), whose capacities came out too low. */
Test(regress, a_ramping_member_down_and_up_again_keeps_its_effective_weight)
{
    chring_t *r = ring_of(CHRING_PROFILE_HASH64, 16);
    cr_assert_eq(chring_add(r, "b", 1, NULL), 0);
    cr_assert_eq(chring_add(r, "c", 1, NULL), 0);
    chring_lease_t leases[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(chring_acquire(r, "k", 1, &leases[i]), 0);
    cr_assert_eq(chring_set_ramp(r, "b", 0.5, 0.5, 0), 0);
    cr_assert_eq(chring_set_down(r, "b", 1), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    /* E = 1 (c alone) while b is down: ceil(1.25 * 4 * 1 / 1) = 5; this sums E. */
    cr_assert_eq(chring_member_capacity(r, s, chring_snap_find(s, "c")), 5u);
    chring_snap_exit(r, s);
    cr_assert_eq(chring_set_down(r, "b", 0), 0);
    s = chring_snap_enter(r);
    /* E = 0.5 + 1: c's capacity ceil(1.25 * 4 * 1 / 1.5) = 4 (3 if b counted at weight 1), b's
     * ceil(1.25 * 4 * 0.5 / 1.5) = 2. */
    cr_assert_eq(chring_member_capacity(r, s, chring_snap_find(s, "c")), 4u);
    cr_assert_eq(chring_member_capacity(r, s, chring_snap_find(s, "b")), 2u);
    chring_snap_exit(r, s);
    for (int i = 0; i < 3; i++)
        chring_release(r, &leases[i]);
    chring_free(&r);
}

/* fuzz_api found this (fuzz/regress/api/held-snapshot-keeps-a-removed-members-ramp): a held
 * snapshot listing a member removed while it ramped was judged by the integer weights once a sum
 * over the current snapshot (where no member ramped any more) had turned the ring's ramp epoch
 * off; the removed member's scale must count as long as a snapshot lists it (docs/design.md §3,
 * "Effective weights"). */
Test(regress, a_held_snapshot_counts_the_scale_of_a_member_removed_while_ramping)
{
    chring_t *r = ring_of(CHRING_PROFILE_HASH64, 16);
    cr_assert_eq(chring_add(r, "a", 3, NULL), 0);
    cr_assert_eq(chring_add(r, "b", 1, NULL), 0);
    cr_assert_eq(chring_add(r, "c", 1, NULL), 0);
    cr_assert_eq(chring_set_ramp(r, "b", 0.5, 0.5, 0), 0);
    const chring_snap_t *held = chring_snap_hold(r);
    const chring_member_t *a = chring_snap_find(held, "a");
    chring_lease_t leases[4];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(chring_acquire_member(r, held, a, &leases[i]), 0);
    cr_assert_eq(chring_remove(r, "b"), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    /* E = 3 + 1 on the current snapshot: ceil(1.25 * 4 * 3 / 4) = 4; this sums E. */
    cr_assert_eq(chring_member_capacity(r, s, chring_snap_find(s, "a")), 4u);
    chring_snap_exit(r, s);
    /* The held snapshot: E = 3 + 0.5 + 1, ceil(1.25 * 4 * 3 / 4.5) = 4 (3 with b at weight 1). */
    cr_assert_eq(chring_member_capacity(r, held, a), 4u);
    cr_assert_eq(chring_acquire_try(r, held, a, &leases[3]), 0);
    for (int i = 0; i < 4; i++)
        chring_release(r, &leases[i]);
    chring_snap_put(r, held);
    chring_free(&r);
}
