/* Acquire by a hash the proxy computed, the outcome of a pick, admission of a chosen member
 * within its capacity, and lease moves (docs/design.md §3).
 * SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chring.h"
#include "chring_test.h"

static chring_t *profile_ring(chring_profile_t profile, int members)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    chring_t *r = ring_create(&cfg);
    char name[32];
    for (int i = 1; i <= members; i++) {
        if (profile == CHRING_PROFILE_HAPROXY)
            snprintf(name, sizeof name, "%d", i);
        else
            snprintf(name, sizeof name, "10.0.0.%d:80", i);
        add_or_fail(r, name, (uint32_t)(1 + i % 3), NULL);
    }
    return r;
}

static const chring_profile_t every_profile[] = {
    CHRING_PROFILE_HASH64, CHRING_PROFILE_MURMUR32, CHRING_PROFILE_FNV32, CHRING_PROFILE_FNV16,
    CHRING_PROFILE_XXH3,   CHRING_PROFILE_KETAMA,   CHRING_PROFILE_NGINX, CHRING_PROFILE_HAPROXY,
    CHRING_PROFILE_ENVOY};
#define NPROFILES (sizeof every_profile / sizeof every_profile[0])

/* Two rings alike, one acquired by key and one by the key's hash, hold the same leases. */
Test(outcome, acquire_hash_places_as_acquire_by_key_in_every_profile)
{
    for (size_t p = 0; p < NPROFILES; p++) {
        chring_t *a = profile_ring(every_profile[p], 6), *b = profile_ring(every_profile[p], 6);
        chring_lease_t la[300], lb[300];
        char key[32];
        for (int i = 0; i < 300; i++) {
            key_name(key, sizeof key, i);
            cr_assert_eq(chring_acquire(a, key, strlen(key), &la[i]), 0);
            const chring_snap_t *s = chring_snap_enter(b);
            uint64_t h = chring_snap_hash(s, key, strlen(key));
            chring_snap_exit(b, s);
            /* Bits above the profile's width are ignored. */
            if (chring_snap_hash_bits(s) < 64)
                h |= UINT64_C(0xabc) << 52;
            cr_assert_eq(chring_acquire_hash(b, h, &lb[i]), 0);
            cr_assert_str_eq(chring_member_name(la[i].member), chring_member_name(lb[i].member),
                             "%s: %s by key on %s, by hash on %s",
                             chring_profile_name(every_profile[p]), key,
                             chring_member_name(la[i].member), chring_member_name(lb[i].member));
            cr_assert_eq(la[i].outcome, lb[i].outcome, "%s: %s: the same outcome",
                         chring_profile_name(every_profile[p]), key);
        }
        chring_stats_t sa, sb;
        chring_stats(a, &sa);
        chring_stats(b, &sb);
        cr_assert_eq(sa.spills, sb.spills);
        cr_assert_gt(sa.spills, 0u, "%s: the bound made some keys spill",
                     chring_profile_name(every_profile[p]));
        for (int i = 0; i < 300; i++) {
            chring_release(a, &la[i]);
            chring_release(b, &lb[i]);
        }
        chring_free(&a);
        chring_free(&b);
    }
}

Test(outcome, acquire_hash_skip_passes_over_the_skipped_members)
{
    chring_t *a = profile_ring(CHRING_PROFILE_HASH64, 5), *b = profile_ring(CHRING_PROFILE_HASH64, 5);
    char key[32];
    for (int i = 0; i < 100; i++) {
        key_name(key, sizeof key, i);
        const chring_snap_t *sa = chring_snap_enter(a), *sb = chring_snap_enter(b);
        const chring_member_t *skip_a[2] = {chring_snap_lookup(sa, key, strlen(key)),
                                            chring_snap_member(sa, (size_t)i % 5)};
        const chring_member_t *skip_b[2] = {chring_snap_lookup(sb, key, strlen(key)),
                                            chring_snap_member(sb, (size_t)i % 5)};
        chring_lease_t la, lb;
        cr_assert_eq(chring_acquire_skip(a, key, strlen(key), skip_a, 2, &la), 0);
        cr_assert_eq(chring_acquire_hash_skip(b, chring_snap_hash(sb, key, strlen(key)), skip_b, 2,
                                              &lb),
                     0);
        cr_assert_str_eq(chring_member_name(la.member), chring_member_name(lb.member));
        cr_assert_neq(lb.member, skip_b[0], "the owner was skipped");
        cr_assert_eq(lb.outcome, CHRING_OUTCOME_SPILLED, "skipped owner: spilled");
        chring_snap_exit(a, sa);
        chring_snap_exit(b, sb);
        chring_release(a, &la);
        chring_release(b, &lb);
    }
    chring_stats_t st;
    chring_stats(b, &st);
    cr_assert_eq(st.retries, 100u, "counted as retries");
    chring_free(&a);
    chring_free(&b);
}

Test(outcome, acquire_hash_bad_input_and_empty_ring)
{
    chring_t *r = ring_create(NULL);
    chring_lease_t lease = {(chring_member_t *)&lease, 7, 9};
    cr_assert_eq(chring_acquire_hash(r, 42, &lease), -ENOENT);
    cr_assert_null(lease.member);
    cr_assert_eq(lease.reserved_, 0u);
    cr_assert_eq(lease.outcome, CHRING_OUTCOME_NONE);
    cr_assert_eq(chring_acquire_hash(NULL, 42, &lease), -EINVAL);
    cr_assert_eq(chring_acquire_hash(r, 42, NULL), -EINVAL);
    cr_assert_eq(chring_acquire_hash_skip(r, 42, NULL, 1, &lease), -EINVAL);
    cr_assert_eq(chring_acquire_hash_skip(NULL, 42, NULL, 0, &lease), -EINVAL);
    add_or_fail(r, "only", 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *only = chring_snap_member(s, 0);
    cr_assert_eq(chring_acquire_hash_skip(r, 42, &only, 1, &lease), -ENOENT, "all skipped");
    chring_snap_exit(r, s);
    cr_assert_null(lease.member);
    chring_free(&r);
}

Test(outcome, owner_spilled_and_saturated_are_reported)
{
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 1, NULL);
    char key[32];
    /* A key of a, with no load anywhere: its owner. */
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *a = chring_snap_find(s, "a"), *b = chring_snap_find(s, "b");
    int i = 0;
    do
        key_name(key, sizeof key, i++);
    while (chring_snap_lookup(s, key, strlen(key)) != a);
    chring_snap_exit(r, s);
    chring_lease_t first;
    cr_assert_eq(chring_acquire(r, key, strlen(key), &first), 0);
    cr_assert_eq(first.member, a);
    cr_assert_eq(first.outcome, CHRING_OUTCOME_OWNER);

    /* a full (loads a = 10, m = 10, cap = ceil(1.25 * 11 / 2) = 7): spilled to b. */
    chring_lease_t held[9];
    s = chring_snap_enter(r);
    for (int k = 0; k < 9; k++)
        cr_assert_eq(chring_acquire_member(r, s, a, &held[k]), 0);
    cr_assert_eq(held[0].outcome, CHRING_OUTCOME_OWNER, "acquire_member: the caller's choice");
    chring_snap_exit(r, s);
    chring_lease_t spilled;
    cr_assert_eq(chring_acquire(r, key, strlen(key), &spilled), 0);
    cr_assert_eq(spilled.member, b);
    cr_assert_eq(spilled.outcome, CHRING_OUTCOME_SPILLED);
    chring_release(r, &spilled);

    /* a full and b skipped: every member met looks full, saturated on a. */
    s = chring_snap_enter(r);
    chring_lease_t sat;
    cr_assert_eq(chring_acquire_hash_skip(r, chring_snap_hash(s, key, strlen(key)), &b, 1, &sat), 0);
    chring_snap_exit(r, s);
    cr_assert_eq(sat.member, a);
    cr_assert_eq(sat.outcome, CHRING_OUTCOME_SATURATED);
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.saturated, 1u);
    chring_release(r, &sat);
    cr_assert_eq(sat.outcome, CHRING_OUTCOME_NONE, "a released lease is cleared");

    /* a down: the owner is passed over, and the key lands where a lookup sends it, the first
     * member up after it: OWNER_DOWN, counted apart from spills (0.4). */
    cr_assert_eq(chring_set_down(r, "a", 1), 0);
    chring_stats(r, &st);
    uint64_t spills_before = st.spills;
    chring_lease_t down;
    cr_assert_eq(chring_acquire(r, key, strlen(key), &down), 0);
    cr_assert_eq(down.member, b);
    cr_assert_eq(down.outcome, CHRING_OUTCOME_OWNER_DOWN);
    chring_stats(r, &st);
    cr_assert_eq(st.spills, spills_before, "not a spill");
    cr_assert_eq(st.owner_down, 1u);
    chring_member_stats_t bs;
    chring_member_stats(b, &bs);
    cr_assert_eq(bs.down_in, 1u);
    cr_assert_eq(bs.acquires, bs.primary + bs.spilled_in + bs.down_in);
    chring_release(r, &down);
    /* Skipping b as well: the key spills past it (a retry), SPILLED. */
    chring_lease_t past;
    cr_assert_eq(chring_acquire_skip(r, key, strlen(key), &b, 1, &past), -ENOENT,
                 "a down, b skipped: nothing left of two members");

    chring_release(r, &first);
    for (int k = 0; k < 9; k++)
        chring_release(r, &held[k]);
    chring_free(&r);
}

Test(outcome, acquire_try_admits_only_below_the_capacity)
{
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 3, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *a = chring_snap_find(s, "a");
    chring_lease_t lease[64];
    int n = 0;
    /* Only a is tried: each try is admitted while a's load is below its capacity for that m. */
    for (;;) {
        cr_assert_lt(n, 64);
        uint64_t cap = chring_member_capacity(r, s, a);
        uint64_t load = chring_member_load(a);
        int rc = chring_acquire_try(r, s, a, &lease[n]);
        if (load < cap || load == 0) {
            cr_assert_eq(rc, 0, "load %llu below capacity %llu: admitted",
                         (unsigned long long)load, (unsigned long long)cap);
            cr_assert_eq(lease[n].member, a);
            cr_assert_eq(lease[n].outcome, CHRING_OUTCOME_OWNER);
            n++;
        } else {
            cr_assert_eq(rc, -EBUSY, "load %llu at capacity %llu: busy", (unsigned long long)load,
                         (unsigned long long)cap);
            cr_assert_null(lease[n].member, "the lease is cleared");
            break;
        }
    }
    /* m = n, all on a: cap(a) = ceil(1.25 * (n + 1) / 4) <= n. */
    cr_assert_eq(chring_member_load(a), (uint64_t)n);
    cr_assert_eq(chring_leases(r), (uint64_t)n, "a refused try moves no counter");
    cr_assert_eq(n, 1, "a (weight 1 of 4) admits one lease while it holds them all");
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.acquires, (uint64_t)n);
    chring_snap_exit(r, s);

    /* -ENOENT: down, scale 0, not in s; -EINVAL for NULLs. */
    chring_lease_t x;
    cr_assert_eq(chring_set_down(r, "b", 1), 0);
    s = chring_snap_enter(r);
    const chring_member_t *b = chring_snap_find(s, "b");
    cr_assert_eq(chring_acquire_try(r, s, b, &x), -ENOENT, "down");
    chring_snap_exit(r, s);
    cr_assert_eq(chring_set_down(r, "b", 0), 0);
    cr_assert_eq(chring_set_ramp(r, "b", 0.0, 0.0, 0), 0);
    s = chring_snap_enter(r);
    cr_assert_eq(chring_acquire_try(r, s, b, &x), -ENOENT, "scale 0");
    cr_assert_eq(chring_acquire_try(NULL, s, b, &x), -EINVAL);
    cr_assert_eq(chring_acquire_try(r, NULL, b, &x), -EINVAL);
    cr_assert_eq(chring_acquire_try(r, s, NULL, &x), -EINVAL);
    cr_assert_eq(chring_acquire_try(r, s, b, NULL), -EINVAL);
    chring_snap_exit(r, s);
    for (int k = 0; k < n; k++)
        chring_release(r, &lease[k]);
    chring_free(&r);
}

Test(outcome, acquire_try_of_a_removed_member_on_the_current_snapshot_is_enoent)
{
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 1, NULL);
    const chring_snap_t *old = chring_snap_hold(r);
    const chring_member_t *a = chring_snap_find(old, "a");
    cr_assert_eq(chring_remove(r, "a"), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    chring_lease_t x;
    cr_assert_eq(chring_acquire_try(r, s, a, &x), -ENOENT, "s does not list it");
    chring_snap_exit(r, s);
    chring_snap_put(r, old);
    chring_free(&r);
}

/* A lease moved (a bitwise copy whose original is never released) is the lease. */
Test(outcome, a_moved_lease_is_the_lease)
{
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 1, NULL);
    struct request {
        int id;
        chring_lease_t lease;
    } *first = calloc(1, sizeof *first), *second = calloc(1, sizeof *second);
    cr_assert(first && second);
    cr_assert_eq(chring_acquire(r, "k", 1, &first->lease), 0);
    const chring_member_t *m = first->lease.member;
    /* Retry: the request object moves; the lease goes with it. */
    memcpy(&second->lease, &first->lease, sizeof first->lease);
    free(first);
    cr_assert_eq(chring_member_load(m), 1u);
    chring_release(r, &second->lease);
    cr_assert_eq(chring_member_load(m), 0u, "the moved lease released it");
    cr_assert_eq(chring_leases(r), 0u);
    chring_release(r, &second->lease); /* the same object again: a no-op */
    cr_assert_eq(chring_leases(r), 0u);
    free(second);
    chring_free(&r);
}
