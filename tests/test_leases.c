/* Bounded loads with the built-in counters (docs/design.md §3, §4): chring_acquire /
 * chring_release, capacities, statistics and the lifetime of removed members with leases.
 * Single-threaded, except the shard test at the end, whose threads run one at a time.
 *
 * SPDX-License-Identifier: MIT
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include "chring_test.h"

#include <pthread.h>
#include <time.h>

static void acquire_ok(chring_t *r, const char *key, chring_lease_t *lease, const char *expect)
{
    int rc = chring_acquire(r, key, strlen(key), lease);
    cr_assert_eq(rc, 0, "acquire %s: %d", key, rc);
    cr_assert_not_null(lease->member, "lease of %s has a member", key);
    if (expect)
        cr_assert_str_eq(chring_member_name(lease->member), expect, "%s placed on", key);
}

static uint64_t load_by_name(chring_t *r, const char *name)
{
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_find(s, name);
    cr_assert_not_null(m, "member %s", name);
    uint64_t load = chring_member_load(m);
    chring_snap_exit(r, s);
    return load;
}

static chring_member_stats_t stats_by_name(chring_t *r, const char *name)
{
    chring_member_stats_t st;
    const chring_snap_t *s = chring_snap_enter(r);
    chring_member_stats(chring_snap_find(s, name), &st);
    chring_snap_exit(r, s);
    return st;
}

Test(leases, worked_example_with_ring_balance)
{
    chring_t *r = worked_ring("abc", 1.25);
    chring_lease_t l3, l2, l4, l1, l3b;
    /* m = 0: cap = ceil(1.25 / 3) = 1; every owner is empty. */
    acquire_ok(r, "k3", &l3, "c");
    /* m = 1: cap = ceil(1.25 * 2 / 3) = 1; a is empty. */
    acquire_ok(r, "k2", &l2, "a");
    /* m = 2: cap = ceil(1.25 * 3 / 3) = 2; a has 1. */
    acquire_ok(r, "k4", &l4, "a");
    cr_assert_eq(load_by_name(r, "a"), 2u, "a = 2");
    cr_assert_eq(load_by_name(r, "b"), 0u, "b = 0");
    cr_assert_eq(load_by_name(r, "c"), 1u, "c = 1");
    cr_assert_eq(chring_leases(r), 3u, "m = 3");
    /* docs/design.md §10: m = 3, cap = 2, a is full: k1 -> b. */
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_member_capacity(r, s, chring_snap_find(s, "a")), 2u, "cap of a");
    chring_snap_exit(r, s);
    acquire_ok(r, "k1", &l1, "b");
    chring_release(r, &l1);
    cr_assert_null(l1.member, "release clears the lease");
    /* Back at m = 3, cap = 2: k3's owner c has 1 and keeps it. */
    acquire_ok(r, "k3", &l3b, "c");

    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.acquires, 5u, "five acquires");
    cr_assert_eq(st.spills, 1u, "one spill (k1)");
    cr_assert_eq(st.leases, 4u, "four outstanding");
    cr_assert_eq(st.saturated, 0u, "no saturation");
    chring_member_stats_t ms = stats_by_name(r, "b");
    cr_assert_eq(ms.acquires, 1u, "b: one acquire");
    cr_assert_eq(ms.primary, 0u, "b: not as owner");
    cr_assert_eq(ms.spilled_in, 1u, "b: spilled in");
    cr_assert_eq(ms.load, 0u, "b: released");
    ms = stats_by_name(r, "a");
    cr_assert_eq(ms.acquires, 2u, "a: two");
    cr_assert_eq(ms.primary, 2u, "a: both as owner");
    cr_assert_eq(ms.load, 2u, "a: load");
    ms = stats_by_name(r, "c");
    cr_assert_eq(ms.acquires, 2u, "c: two");
    cr_assert_eq(ms.primary, 2u, "c: both as owner");
    chring_release(r, &l3);
    chring_release(r, &l2);
    chring_release(r, &l4);
    chring_release(r, &l3b);
    cr_assert_eq(chring_leases(r), 0u, "all released");
    chring_free(&r);
}

static chring_t *numbered_ring(int members, double balance, uint32_t vnodes)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.balance = balance;
    cfg.vnodes = vnodes;
    chring_t *r = ring_create(&cfg);
    add_numbered(r, "srv-", 0, members);
    return r;
}

/* Acquires `count` leases (a hot key when `hot`, distinct keys otherwise) and checks each choice
 * against the rule and every load against ceil(c * K / n). */
static chring_lease_t *acquire_many(chring_t *r, int members, double c, int count, int hot)
{
    chring_lease_t *leases = calloc((size_t)count, sizeof *leases);
    cr_assert_not_null(leases, "out of memory in the test");
    char key[32];
    for (int k = 0; k < count; k++) {
        if (hot)
            snprintf(key, sizeof key, "hot");
        else
            key_name(key, sizeof key, k);
        uint64_t m_before = chring_leases(r);
        cr_assert_eq(m_before, (uint64_t)k, "m counts the outstanding leases");
        uint64_t cap = chring_capacity(m_before, (uint64_t)members, c);
        /* The expected member: first clockwise whose load is below cap. */
        const chring_snap_t *s = chring_snap_enter(r);
        const chring_member_t *walk[64];
        size_t walked = chring_snap_lookup_n(s, key, strlen(key), walk, 64);
        cr_assert_eq(walked, (size_t)members, "lookup_n");
        const chring_member_t *expect = NULL;
        uint64_t expect_load = 0;
        for (size_t i = 0; i < walked && !expect; i++) {
            cr_assert_eq(chring_member_capacity(r, s, walk[i]), cap, "member_capacity");
            if (chring_member_load(walk[i]) < cap) {
                expect = walk[i];
                expect_load = chring_member_load(walk[i]);
            }
        }
        chring_snap_exit(r, s);
        cr_assert_not_null(expect, "someone is below cap");
        acquire_ok(r, key, &leases[k], chring_member_name(expect));
        cr_assert_eq(chring_member_load(leases[k].member), expect_load + 1, "load incremented");
    }
    uint64_t bound = (uint64_t)ceil(c * count / members);
    const chring_snap_t *s = chring_snap_enter(r);
    uint64_t total = 0;
    for (size_t i = 0; i < chring_snap_len(s); i++) {
        uint64_t load = chring_member_load(chring_snap_member(s, i));
        cr_assert_leq(load, bound, "member %zu at %llu above ceil(cK/n) = %llu", i,
                      (unsigned long long)load, (unsigned long long)bound);
        total += load;
    }
    chring_snap_exit(r, s);
    cr_assert_eq(total, (uint64_t)count, "loads sum to the leases");
    return leases;
}

static void release_all(chring_t *r, chring_lease_t *leases, int count)
{
    for (int k = 0; k < count; k++)
        chring_release(r, &leases[k]);
    free(leases);
    cr_assert_eq(chring_leases(r), 0u, "all released");
}

Test(leases, hot_key_bounded_at_capacity)
{
    const double cs[] = {1.0, 1.25, 2.0};
    for (int i = 0; i < 3; i++) {
        chring_t *r = numbered_ring(8, cs[i], 40);
        chring_lease_t *leases = acquire_many(r, 8, cs[i], 400, 1);
        chring_stats_t st;
        chring_stats(r, &st);
        cr_assert_eq(st.acquires, 400u, "acquires");
        cr_assert_gt(st.spills, 0u, "a hot key spills");
        cr_assert_eq(st.saturated, 0u, "no saturation single-threaded");
        release_all(r, leases, 400);
        chring_free(&r);
    }
}

Test(leases, distinct_keys_bounded_at_capacity)
{
    chring_t *r = numbered_ring(5, 1.25, 160);
    chring_lease_t *leases = acquire_many(r, 5, 1.25, 1000, 0);
    release_all(r, leases, 1000);
    chring_free(&r);
}

Test(leases, weighted_member_takes_twice_the_hot_load)
{
    /* c = 1: caps are ceil((m + 1) * w / W) with W = 5; after 1000 hot acquires the loads
     * are exactly 400 for weight 2 and 200 for each weight-1 member. */
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.balance = 1.0;
    cfg.vnodes = 40;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, "double", 2, NULL);
    add_numbered(r, "single-", 0, 3);
    const int count = 1000;
    chring_lease_t *leases = calloc(count, sizeof *leases);
    for (int k = 0; k < count; k++) {
        uint64_t m = chring_leases(r);
        acquire_ok(r, "hot", &leases[k], NULL);
        uint64_t w = chring_member_weight(leases[k].member);
        uint64_t cap = chring_capacity_weighted(m, w, 5, 1.0);
        cr_assert_leq(chring_member_load(leases[k].member), cap, "acquire %d above its cap", k);
    }
    cr_assert_eq(load_by_name(r, "double"), 400u, "weight 2 of 5");
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "single-%d", i);
        cr_assert_eq(load_by_name(r, name), 200u, "weight 1 of 5");
    }
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_member_capacity(r, s, chring_snap_find(s, "double")),
                 chring_capacity_weighted(1000, 2, 5, 1.0), "member_capacity is weighted");
    chring_snap_exit(r, s);
    release_all(r, leases, count);
    chring_free(&r);
}

Test(leases, weighted_with_default_balance_about_twice)
{
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "double", 2, NULL);
    add_numbered(r, "single-", 0, 3);
    const int count = 2000;
    chring_lease_t *leases = calloc(count, sizeof *leases);
    for (int k = 0; k < count; k++) {
        uint64_t m = chring_leases(r);
        acquire_ok(r, "hot", &leases[k], NULL);
        uint64_t w = chring_member_weight(leases[k].member);
        cr_assert_leq(chring_member_load(leases[k].member), chring_capacity_weighted(m, w, 5, 1.25),
                      "acquire %d above its cap", k);
    }
    uint64_t dbl = load_by_name(r, "double");
    cr_assert_leq(dbl, (uint64_t)ceil(1.25 * count * 2 / 5), "weighted bound");
    /* The singles cap at ceil(1.25 * K / 5) each, so the double takes at least the rest. */
    uint64_t floor_dbl = (uint64_t)count - 3 * (uint64_t)ceil(1.25 * count / 5);
    cr_assert_geq(dbl, floor_dbl, "weight 2 took only %llu of 2000", (unsigned long long)dbl);
    release_all(r, leases, count);
    chring_free(&r);
}

/* ---- lifetime ---------------------------------------------------------------------------- */

struct retire_log {
    int count[4];
};

static void record_retire(void *udata, void *ctx)
{
    struct retire_log *log = ctx;
    uintptr_t id = (uintptr_t)udata;
    if (id >= 1 && id <= 4)
        __atomic_add_fetch(&log->count[id - 1], 1, __ATOMIC_SEQ_CST);
}

static int retired(struct retire_log *log, int id)
{
    return __atomic_load_n(&log->count[id - 1], __ATOMIC_SEQ_CST);
}

static chring_t *retire_ring(struct retire_log *log)
{
    memset(log, 0, sizeof *log);
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 16;
    cfg.retire = record_retire;
    cfg.retire_ctx = log;
    return ring_create(&cfg);
}

/* Gives the grace periods and the ring's reclaimer thread time to run (not a timing assertion: the
 * test checks what must NOT have happened yet). */
static void let_grace_periods_pass(chring_t *r)
{
    for (int i = 0; i < 4; i++) {
        add_or_fail(r, "churn", 1, NULL);
        cr_assert_eq(chring_remove(r, "churn"), 0, "churn");
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

Test(leases, release_after_remove_then_retire)
{
    struct retire_log log;
    chring_t *r = retire_ring(&log);
    add_or_fail(r, "x", 1, (void *)(uintptr_t)1);
    add_or_fail(r, "y", 1, (void *)(uintptr_t)2);
    chring_lease_t lease;
    acquire_ok(r, "hot", &lease, NULL);
    chring_lease_t on_x;
    /* Make sure one lease is on x: with two members, keys spread; take one on x. */
    char key[32];
    int found = 0;
    for (int i = 0; i < 1000 && !found; i++) {
        key_name(key, sizeof key, i);
        char owner[8];
        if (chring_lookup_name(r, key, strlen(key), owner, sizeof owner) == 1 && owner[0] == 'x')
            found = 1;
    }
    cr_assert(found, "no key of x");
    acquire_ok(r, key, &on_x, "x");
    chring_release(r, &lease);

    cr_assert_eq(chring_remove(r, "x"), 0, "remove x");
    let_grace_periods_pass(r);
    cr_assert_eq(chring_member_check(on_x.member), 0, "x still valid under its lease");
    cr_assert_str_eq(chring_member_name(on_x.member), "x", "x's name readable");
    cr_assert_eq(chring_member_load(on_x.member), 1u, "x's load");
    cr_assert_eq(chring_leases(r), 1u, "m includes leases on removed members");
    cr_assert_eq(retired(&log, 1), 0, "x retired before its last lease was released");
    chring_release(r, &on_x);
    cr_assert_eq(chring_leases(r), 0u, "released");
    chring_free(&r);
    cr_assert_eq(log.count[0], 1, "x retired exactly once");
    cr_assert_eq(log.count[1], 1, "y retired exactly once");
}

Test(leases, removed_member_with_leases_counts_in_capacity)
{
    /* m includes leases on removed members (docs/design.md §3). */
    chring_t *r = numbered_ring(4, 1.0, 40);
    chring_lease_t leases[4];
    for (int k = 0; k < 4; k++)
        acquire_ok(r, "hot", &leases[k], NULL);
    cr_assert_eq(chring_remove(r, "srv-0"), 0, "remove");
    cr_assert_eq(chring_leases(r), 4u, "still four leases");
    const chring_snap_t *s = chring_snap_enter(r);
    /* m = 4, n = 3, c = 1: ceil(5 / 3) = 2. */
    cr_assert_eq(chring_member_capacity(r, s, chring_snap_member(s, 0)), 2u, "capacity");
    chring_snap_exit(r, s);
    for (int k = 0; k < 4; k++)
        chring_release(r, &leases[k]);
    cr_assert_eq(chring_leases(r), 0u, "released");
    chring_free(&r);
}

Test(leases, old_release_after_readd_leaves_new_member_alone)
{
    struct retire_log log;
    chring_t *r = retire_ring(&log);
    add_or_fail(r, "x", 1, (void *)(uintptr_t)1);
    chring_lease_t old_lease, new_lease;
    acquire_ok(r, "k", &old_lease, "x");
    cr_assert_eq(chring_remove(r, "x"), 0, "remove");
    add_or_fail(r, "x", 1, (void *)(uintptr_t)2);
    acquire_ok(r, "k", &new_lease, "x");
    cr_assert_neq(new_lease.member, old_lease.member, "a new member object");
    cr_assert_eq(chring_member_load(new_lease.member), 1u, "new x has one lease");
    chring_member_stats_t ms;
    chring_member_stats(new_lease.member, &ms);
    cr_assert_eq(ms.acquires, 1u, "new counters start at zero");
    cr_assert_eq(chring_leases(r), 2u, "two leases");
    chring_release(r, &old_lease);
    cr_assert_eq(chring_member_load(new_lease.member), 1u, "the old release left new x alone");
    cr_assert_eq(chring_leases(r), 1u, "one lease");
    chring_release(r, &new_lease);
    cr_assert_eq(chring_leases(r), 0u, "none");
    chring_free(&r);
    cr_assert_eq(log.count[0], 1, "old x retired once");
    cr_assert_eq(log.count[1], 1, "new x retired once");
}

Test(leases, double_release_is_a_noop)
{
    chring_t *r = numbered_ring(3, 1.25, 40);
    chring_lease_t a, b;
    acquire_ok(r, "k", &a, NULL);
    acquire_ok(r, "k", &b, NULL);
    const chring_member_t *ma = a.member;
    uint64_t load = chring_member_load(ma);
    chring_release(r, &a);
    cr_assert_null(a.member, "cleared");
    chring_release(r, &a);
    cr_assert_eq(chring_member_load(ma), load - 1, "the second release did nothing");
    cr_assert_eq(chring_leases(r), 1u, "one lease left");
    chring_release(r, &b);
    chring_release(r, &b);
    cr_assert_eq(chring_leases(r), 0u, "none left, not negative");
    cr_assert_eq(chring_member_load(ma), 0u, "load not negative");
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.leases, 0u, "stats leases");
    chring_free(&r);
}

Test(leases, zeroed_lease_release_is_a_noop)
{
    chring_t *r = numbered_ring(3, 1.25, 40);
    chring_lease_t held;
    acquire_ok(r, "k", &held, NULL);
    chring_lease_t zero;
    memset(&zero, 0, sizeof zero);
    chring_release(r, &zero);
    chring_lease_t cleared = {NULL, 0, 0};
    chring_release(r, &cleared);
    cr_assert_eq(chring_leases(r), 1u, "the real lease is still counted");
    cr_assert_eq(chring_member_load(held.member), 1u, "its load is intact");
    chring_release(r, &held);
    chring_free(&r);
}

Test(leases, acquire_on_empty_ring_clears_the_lease)
{
    chring_t *r = ring_create(NULL);
    chring_lease_t lease;
    memset(&lease, 0x77, sizeof lease);
    cr_assert_eq(chring_acquire(r, "k", 1, &lease), -ENOENT, "empty ring");
    cr_assert_null(lease.member, "cleared");
    chring_release(r, &lease);
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.acquires, 0u, "a failed acquire is not counted");
    cr_assert_eq(st.leases, 0u, "no lease");
    chring_free(&r);
}

Test(leases, statistics_add_up)
{
    chring_t *r = numbered_ring(4, 1.25, 40);
    const int count = 300;
    chring_lease_t *leases = calloc(count, sizeof *leases);
    char key[32];
    for (int k = 0; k < count; k++) {
        /* Half hot, half distinct keys. */
        if (k % 2)
            snprintf(key, sizeof key, "hot");
        else
            key_name(key, sizeof key, k);
        acquire_ok(r, key, &leases[k], NULL);
    }
    for (int k = 0; k < count; k += 3)
        chring_release(r, &leases[k]);
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.acquires, (uint64_t)count, "acquires");
    cr_assert_eq(st.leases, (uint64_t)(count - 100), "leases");
    cr_assert_eq(st.leases, chring_leases(r), "chring_leases exact when quiescent");
    cr_assert_eq(st.members, 4u, "members");
    cr_assert_eq(st.points, 160u, "points");
    cr_assert_eq(st.version, 4u, "version");
    cr_assert_eq(st.publishes, 4u, "publishes");
    cr_assert_eq(st.saturated, 0u, "saturated stays 0 single-threaded");
    uint64_t sum_acquires = 0, sum_spilled = 0, sum_load = 0;
    const chring_snap_t *s = chring_snap_enter(r);
    for (size_t i = 0; i < chring_snap_len(s); i++) {
        chring_member_stats_t ms;
        chring_member_stats(chring_snap_member(s, i), &ms);
        cr_assert_eq(ms.acquires, ms.primary + ms.spilled_in, "acquires = primary + spilled_in");
        cr_assert_eq(ms.load, chring_member_load(chring_snap_member(s, i)), "load");
        sum_acquires += ms.acquires;
        sum_spilled += ms.spilled_in;
        sum_load += ms.load;
    }
    chring_snap_exit(r, s);
    cr_assert_eq(sum_acquires, st.acquires, "per-member acquires sum to the ring's");
    cr_assert_eq(sum_spilled, st.spills, "spilled_in sums to spills");
    cr_assert_eq(sum_load, st.leases, "loads sum to leases");
    cr_assert_gt(st.spills, 0u, "the hot key spilled");
    for (int k = 0; k < count; k++)
        chring_release(r, &leases[k]);
    free(leases);
    chring_stats(r, &st);
    cr_assert_eq(st.leases, 0u, "all released");
    cr_assert_eq(st.acquires, (uint64_t)count, "acquires is a running total");
    chring_free(&r);
}

Test(leases, counters_survive_publishes)
{
    /* Per-member counters live outside snapshots: a publish must not reset them. */
    chring_t *r = numbered_ring(3, 1.25, 40);
    chring_lease_t lease;
    acquire_ok(r, "k", &lease, NULL);
    const char *name = chring_member_name(lease.member);
    char saved[32];
    snprintf(saved, sizeof saved, "%s", name);
    add_or_fail(r, "other", 1, NULL);
    cr_assert_eq(chring_set_weight(r, "other", 2), 0, "publish");
    cr_assert_eq(load_by_name(r, saved), 1u, "load kept across publishes");
    chring_member_stats_t ms = stats_by_name(r, saved);
    cr_assert_eq(ms.acquires, 1u, "acquires kept across publishes");
    chring_release(r, &lease);
    cr_assert_eq(load_by_name(r, saved), 0u, "released through the new snapshot's member");
    chring_free(&r);
}

Test(leases, saturation_not_reachable_single_threaded)
{
    /* Through the public API alone, strict admission with n * cap > m always finds a member
     * below its capacity, so a single thread never saturates: every member full would need
     * loads summing to at least n * cap > m.  Drive the tightest case (c = 1, one hot key, n
     * members) and check the counter stays 0 while capacities are met exactly. */
    chring_t *r = numbered_ring(3, 1.0, 8);
    chring_lease_t leases[30];
    for (int k = 0; k < 30; k++) {
        acquire_ok(r, "hot", &leases[k], NULL);
        const chring_snap_t *s = chring_snap_enter(r);
        for (size_t i = 0; i < 3; i++)
            cr_assert_leq(chring_member_load(chring_snap_member(s, i)),
                          chring_capacity((uint64_t)k, 3, 1.0), "load above cap");
        chring_snap_exit(r, s);
    }
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.saturated, 0u, "saturated");
    for (int k = 0; k < 30; k++)
        cr_assert_eq(chring_member_load(leases[k].member), 10u, "c = 1 fills all three to 10");
    for (int k = 0; k < 30; k++)
        chring_release(r, &leases[k]);
    chring_free(&r);
}

Test(leases, sync_and_update_keep_counters_of_present_members)
{
    chring_t *r = numbered_ring(3, 1.25, 40);
    chring_lease_t lease;
    acquire_ok(r, "k", &lease, NULL);
    char name[32];
    snprintf(name, sizeof name, "%s", chring_member_name(lease.member));
    chring_change_t feed[] = {
        {"srv-0", 2, NULL}, {"srv-1", 2, NULL}, {"srv-2", 2, NULL}, {"new", 1, NULL}};
    cr_assert_eq(chring_sync(r, feed, 4), 0, "sync re-weights everyone");
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_find(s, name), lease.member, "the same member object");
    cr_assert_eq(chring_member_load(lease.member), 1u, "its load kept");
    chring_member_stats_t ms;
    chring_member_stats(lease.member, &ms);
    cr_assert_eq(ms.acquires, 1u, "its statistics kept");
    chring_snap_exit(r, s);
    cr_assert_eq(chring_leases(r), 1u, "m kept");
    chring_release(r, &lease);
    cr_assert_eq(chring_leases(r), 0u, "released");
    chring_free(&r);
}

/* Two names whose fnv16 positions (point 0 is the bare name) collide. */
static void fnv16_collision(char *first, char *second, size_t cap)
{
    static uint32_t seen[65536];
    memset(seen, 0, sizeof seen);
    char name[32];
    for (uint32_t i = 1; i < 1000000; i++) {
        snprintf(name, sizeof name, "n%u", (unsigned)i);
        uint32_t pos = ref_fnv1a32(name, strlen(name)) & 0xffffu;
        if (seen[pos]) {
            snprintf(first, cap, "n%u", (unsigned)seen[pos]);
            snprintf(second, cap, "%s", name);
            return;
        }
        seen[pos] = i;
    }
    cr_assert_fail("no collision");
}

Test(leases, saturation_through_a_member_without_points)
{
    /* Under fnv16 a later joiner whose only position is taken has no point at all, yet it is a
     * member of the snapshot: n = 2 (and W = 2) while the walk can only reach the first member.
     * With c = 1 every acquire after the first finds the only reachable member at capacity:
     * the walk must not fail but place the key on the least loaded member it saw and count a
     * saturated event (docs/design.md §3). */
    char first[32], second[32];
    fnv16_collision(first, second, sizeof first);
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_FNV16;
    cfg.vnodes = 1;
    cfg.balance = 1.0;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, first, 1, NULL);
    add_or_fail(r, second, 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_len(s), 2u, "two members");
    cr_assert_eq(chring_snap_points(s), 1u, "one point");
    cr_assert_eq(chring_snap_member_points(s, chring_snap_find(s, second)), 0u, "no point");
    chring_snap_exit(r, s);
    chring_lease_t leases[10];
    uint64_t expect_saturated = 0;
    for (int k = 0; k < 10; k++) {
        /* The reachable member holds all k leases; its capacity is ceil((k + 1) / 2). */
        if ((uint64_t)k >= chring_capacity_weighted((uint64_t)k, 1, 2, 1.0))
            expect_saturated++;
        cr_assert_eq(chring_acquire(r, "hot", 3, &leases[k]), 0, "acquire %d never fails", k);
        cr_assert_str_eq(chring_member_name(leases[k].member), first, "the only reachable member");
    }
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.acquires, 10u, "acquires");
    cr_assert_eq(st.saturated, expect_saturated, "saturated events (n counts every member)");
    cr_assert_eq(st.leases, 10u, "leases");
    chring_member_stats_t ms;
    s = chring_snap_enter(r);
    chring_member_stats(chring_snap_find(s, first), &ms);
    chring_snap_exit(r, s);
    cr_assert_eq(ms.acquires, ms.primary + ms.spilled_in, "acquires = primary + spilled_in");
    cr_assert_eq(ms.load, 10u, "all ten on the reachable member");
    for (int k = 0; k < 10; k++)
        chring_release(r, &leases[k]);
    cr_assert_eq(chring_leases(r), 0u, "released");
    chring_free(&r);
}

Test(leases, acquire_member_leases_the_chosen_member_without_capacity_check)
{
    chring_t *r = worked_ring("abc", 1.0);
    chring_lease_t first, retry, stale;
    /* Fill b beyond what the bound would admit: acquire_member skips the capacity check. */
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *b = chring_snap_find(s, "b");
    chring_lease_t extra[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(chring_acquire_member(r, s, b, &extra[i]), 0, "acquire_member %d", i);
    chring_snap_exit(r, s);
    cr_assert_eq(load_by_name(r, "b"), 4u, "b holds the 4 chosen leases");
    cr_assert_eq(chring_leases(r), 4u, "they count in m");
    chring_member_stats_t st = stats_by_name(r, "b");
    cr_assert_eq(st.primary, 4u, "counted as primary acquires");
    cr_assert_eq(st.acquires, 4u, "and as acquires");

    /* A retry on the key's next replica: lookup_n then acquire_member. */
    acquire_ok(r, "k1", &first, NULL);
    s = chring_snap_enter(r);
    const chring_member_t *replicas[2];
    cr_assert_eq(chring_snap_lookup_n(s, "k1", 2, replicas, 2), 2u, "two replicas");
    cr_assert_eq(chring_acquire_member(r, s, replicas[1], &retry), 0, "lease on replica 2");
    cr_assert_eq(retry.member, replicas[1], "the lease is on replica 2");
    chring_snap_exit(r, s);
    chring_release(r, &first);

    /* A member no longer in the snapshot is refused, and the lease is cleared. */
    const chring_snap_t *old = chring_snap_hold(r);
    const chring_member_t *c = chring_snap_find(old, "c");
    cr_assert_eq(chring_remove(r, "c"), 0, "remove c");
    s = chring_snap_enter(r);
    stale.member = (chring_member_t *)c;
    cr_assert_eq(chring_acquire_member(r, s, c, &stale), -ENOENT, "c is not in the new snapshot");
    cr_assert_null(stale.member, "lease cleared on failure");
    cr_assert_eq(chring_acquire_member(r, s, NULL, &stale), -EINVAL, "NULL member");
    cr_assert_eq(chring_acquire_member(r, s, b, NULL), -EINVAL, "NULL lease");
    chring_snap_exit(r, s);
    chring_snap_put(r, old);

    chring_release(r, &retry);
    for (int i = 0; i < 4; i++)
        chring_release(r, &extra[i]);
    cr_assert_eq(chring_leases(r), 0u, "all released");
    cr_assert_eq(load_by_name(r, "b"), 0u, "b empty again");
    chring_free(&r);
}

/* ---- a failed acquire_member clears the whole lease -------------------------------------- */

static void fill_with_garbage(chring_lease_t *lease)
{
    memset(lease, 0xa5, sizeof *lease);
}

static void assert_cleared(const chring_lease_t *lease, const char *what)
{
    cr_assert_null(lease->member, "%s: member cleared", what);
    cr_assert_eq(lease->reserved_, 0u, "%s: reserved_ cleared", what);
}

Test(leases, failed_acquire_member_clears_the_whole_lease_on_every_path)
{
    chring_t *r = worked_ring("abc", 1.25);
    chring_t *other = worked_ring("bd", 1.25);
    const chring_snap_t *old = chring_snap_hold(r);
    add_or_fail(r, "d", 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_snap_t *os = chring_snap_enter(other);
    const chring_member_t *b = chring_snap_find(s, "b");
    const chring_member_t *d = chring_snap_find(s, "d");
    cr_assert(b && d, "fixture");

    struct {
        chring_t *ring;
        const chring_snap_t *snap;
        const chring_member_t *member;
        int expect;
        const char *what;
    } cases[] = {
        {NULL, s, b, -EINVAL, "NULL ring"},
        {r, NULL, b, -EINVAL, "NULL snapshot"},
        {r, s, NULL, -EINVAL, "NULL member"},
        {r, old, d, -ENOENT, "a member added after the held snapshot"},
        {r, s, chring_snap_find(os, "b"), -ENOENT, "another ring's member of the same name"},
        {r, s, chring_snap_find(os, "d"), -ENOENT, "another ring's member"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        chring_lease_t lease;
        fill_with_garbage(&lease);
        int rc = chring_acquire_member(cases[i].ring, cases[i].snap, cases[i].member, &lease);
        cr_assert_eq(rc, cases[i].expect, "%s: returned %d", cases[i].what, rc);
        assert_cleared(&lease, cases[i].what);
        /* The cleared lease releases as a no-op, through either ring. */
        chring_release(r, &lease);
        chring_release(other, &lease);
        assert_cleared(&lease, cases[i].what);
        cr_assert_eq(chring_leases(r), 0u, "%s: no lease counted", cases[i].what);
        cr_assert_eq(chring_leases(other), 0u, "%s: no lease counted", cases[i].what);
        cr_assert_eq(chring_member_load(b), 0u, "%s: b's load", cases[i].what);
        cr_assert_eq(chring_member_load(d), 0u, "%s: d's load", cases[i].what);
    }
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.acquires, 0u, "no acquire counted");
    cr_assert_eq(st.leases, 0u, "no lease outstanding");
    chring_snap_exit(other, os);
    chring_snap_exit(r, s);
    chring_snap_put(r, old);
    chring_free(&other);
    chring_free(&r);
}

/* ---- lease accounting over several shards, from several threads -------------------------- */

/* Each thread is given its own shard of the outstanding-lease count m (docs/design.md §3): the
 * threads below run one after another (each joined before the next starts), so they are given
 * shards in turn and every shard a ring has in use holds leases from some of them.  m and
 * chring_stats().leases are checked exactly after each step: nothing is in flight then. */
#define SHARD_THREADS 4
#define LEASES_MAX 64

struct lease_batch {
    chring_t *r;
    chring_lease_t *leases;
    int first, count; /* acquire (or release) leases[first .. first + count - 1] */
    int acquire;      /* 1: acquire; 0: release */
    int failures;
};

static void *lease_worker(void *arg)
{
    struct lease_batch *b = arg;
    char key[32];
    for (int i = b->first; i < b->first + b->count; i++) {
        if (b->acquire) {
            snprintf(key, sizeof key, "shard-key-%d", i);
            if (chring_acquire(b->r, key, strlen(key), &b->leases[i]) != 0)
                b->failures++;
        } else {
            chring_release(b->r, &b->leases[i]);
            if (b->leases[i].member != NULL)
                b->failures++;
        }
    }
    return NULL;
}

/* Runs one batch on a new thread and joins it. */
static void on_new_thread(chring_t *r, chring_lease_t *leases, int first, int count, int acquire)
{
    struct lease_batch b = {r, leases, first, count, acquire, 0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, lease_worker, &b), 0, "pthread_create");
    cr_assert_eq(pthread_join(t, NULL), 0, "pthread_join");
    cr_assert_eq(b.failures, 0, "%s of leases %d..%d failed", acquire ? "acquire" : "release",
                 first, first + count - 1);
}

static void assert_leases(chring_t *r, uint64_t expect, const char *when)
{
    cr_assert_eq(chring_leases(r), expect, "%s: chring_leases", when);
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.leases, expect, "%s: chring_stats().leases", when);
    /* The members' loads count the same leases. */
    uint64_t loads = 0;
    const chring_snap_t *s = chring_snap_enter(r);
    for (size_t i = 0; i < chring_snap_len(s); i++)
        loads += chring_member_load(chring_snap_member(s, i));
    chring_snap_exit(r, s);
    cr_assert_eq(loads, expect, "%s: the members' loads", when);
}

Test(leases, lease_count_is_exact_over_shards_and_threads)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.balance = 64; /* no spill matters here; keep every acquire simple */
    chring_t *r = ring_create(&cfg);
    add_numbered(r, "node-", 0, 5);
    static chring_lease_t leases[LEASES_MAX];
    memset(leases, 0, sizeof leases);
    assert_leases(r, 0, "new ring");

    /* Acquires: thread k takes 2k + 3 leases (3, 5, 7, 9: distinct, so a shard counted twice
     * or not at all shows). */
    int first[SHARD_THREADS], count[SHARD_THREADS], next = 0;
    uint64_t expect = 0;
    char when[64];
    for (int k = 0; k < SHARD_THREADS; k++) {
        first[k] = next;
        count[k] = 2 * k + 3;
        next += count[k];
        on_new_thread(r, leases, first[k], count[k], 1);
        expect += (uint64_t)count[k];
        snprintf(when, sizeof when, "after thread %d acquired %d", k, count[k]);
        assert_leases(r, expect, when);
    }
    /* This thread acquires too, on a shard of its own turn. */
    for (int i = next; i < next + 2; i++)
        cr_assert_eq(chring_acquire(r, "main", 4, &leases[i]), 0, "acquire on the main thread");
    expect += 2;
    assert_leases(r, expect, "after the main thread acquired 2");

    /* Releases on other threads than the acquiring ones: a new thread releases part of thread
     * 0's and thread 3's leases, the main thread part of thread 1's, another new thread the main
     * thread's. */
    on_new_thread(r, leases, first[0], 2, 0);
    on_new_thread(r, leases, first[3], 4, 0);
    expect -= 6;
    assert_leases(r, expect, "after another thread released 2 of thread 0's and 4 of thread 3's");
    for (int i = first[1]; i < first[1] + 3; i++)
        chring_release(r, &leases[i]);
    expect -= 3;
    assert_leases(r, expect, "after the main thread released 3 of thread 1's");
    on_new_thread(r, leases, next, 2, 0);
    expect -= 2;
    assert_leases(r, expect, "after another thread released the main thread's 2");

    /* A released lease released again changes nothing. */
    on_new_thread(r, leases, first[0], 2, 0);
    assert_leases(r, expect, "after releasing released leases again");

    /* The rest, each thread's remainder on a thread of its own. */
    for (int k = 0; k < SHARD_THREADS; k++) {
        int done = k == 0 ? 2 : k == 1 ? 3 : k == 3 ? 4 : 0;
        on_new_thread(r, leases, first[k] + done, count[k] - done, 0);
        expect -= (uint64_t)(count[k] - done);
        snprintf(when, sizeof when, "after thread %d's remaining leases were released", k);
        assert_leases(r, expect, when);
    }
    cr_assert_eq(expect, 0u, "the test's own count");
    assert_leases(r, 0, "all released");
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.acquires, (uint64_t)next + 2, "every acquire counted");
    chring_free(&r);
}

Test(leases, saturated_acquire_goes_to_the_least_loaded_member_met_not_the_owner)
{
    /* fnv16, one point per member: a and the colliding later joiner d share one position, so d
     * has no point and n = W = 3 while the walk meets only a and b.  With c = 1 and loads a = 3,
     * b = 2 (pinned with chring_acquire_member), m = 5 and every capacity is ceil(6 / 3) = 2:
     * both reachable members are full, and a key owned by a must go to b, the least loaded
     * member met (docs/design.md §3), counted as a saturation and as a spill into b. */
    char a[32], d[32], b[32];
    fnv16_collision(a, d, sizeof a);
    uint32_t pos_a = ref_fnv1a32(a, strlen(a)) & 0xffffu;
    for (int i = 0;; i++) {
        snprintf(b, sizeof b, "other-%d", i);
        if ((ref_fnv1a32(b, strlen(b)) & 0xffffu) != pos_a)
            break;
    }
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_FNV16;
    cfg.vnodes = 1;
    cfg.balance = 1.0;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, a, 1, NULL);
    add_or_fail(r, b, 1, NULL);
    add_or_fail(r, d, 1, NULL);

    const chring_snap_t *s = chring_snap_hold(r);
    cr_assert_eq(chring_snap_points(s), 2u, "d has no point");
    const chring_member_t *ma = chring_snap_find(s, a), *mb = chring_snap_find(s, b);
    chring_lease_t pinned[5];
    for (int k = 0; k < 5; k++)
        cr_assert_eq(chring_acquire_member(r, s, k < 3 ? ma : mb, &pinned[k]), 0, "pin %d", k);
    cr_assert_eq(chring_member_capacity(r, s, ma), 2u, "ceil(1 * 6 / 3)");
    char key[32];
    for (int i = 0;; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        if (chring_snap_lookup(s, key, strlen(key)) == ma)
            break;
    }
    chring_snap_put(r, s);

    chring_lease_t lease;
    acquire_ok(r, key, &lease, b);
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.saturated, 1u, "one saturation event");
    cr_assert_eq(st.spills, 1u, "one spill");
    cr_assert_eq(stats_by_name(r, b).spilled_in, 1u, "spilled into b");
    cr_assert_eq(load_by_name(r, a), 3u, "a unchanged");
    cr_assert_eq(load_by_name(r, b), 3u, "b took the key");
    chring_release(r, &lease);
    for (int k = 0; k < 5; k++)
        chring_release(r, &pinned[k]);
    cr_assert_eq(chring_leases(r), 0u, "all released");
    chring_free(&r);
}

Test(leases, release_ignores_a_lease_the_library_did_not_fill_in)
{
    /* A lease naming a real member but not filled in by an acquire (reserved_ left zero) is not
     * one of the ring's: releasing it moves no counter. */
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, NULL);
    chring_lease_t real;
    acquire_ok(r, "k", &real, "a");
    chring_lease_t forged = {real.member, 0, 0};
    chring_release(r, &forged);
    cr_assert_eq(load_by_name(r, "a"), 1u, "the member's load is untouched");
    cr_assert_eq(chring_leases(r), 1u, "the ring's count is untouched");
    chring_release(r, &real);
    cr_assert_eq(load_by_name(r, "a"), 0u, "the real lease released");
    cr_assert_eq(chring_leases(r), 0u);
    chring_free(&r);
}
