/* The bound at its edges (issue 31): a flap keeps one load count for its backend, and a ring
 * whose every member is down answers as an empty ring (docs/design.md §3).
 * SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "chring.h"
#include "chring_test.h"

static chring_t *ring_of(int members)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    chring_t *r = ring_create(&cfg);
    char name[32];
    for (int i = 0; i < members; i++) {
        snprintf(name, sizeof name, "backend-%d", i);
        add_or_fail(r, name, 1, NULL);
    }
    return r;
}

/* Fills the member of that name up to its capacity with chring_acquire_try; returns how many. */
static int fill(chring_t *r, const char *name, chring_lease_t *leases, int max)
{
    int n = 0;
    for (; n < max; n++) {
        const chring_snap_t *s = chring_snap_enter(r);
        int rc = chring_acquire_try(r, s, chring_snap_find(s, name), &leases[n]);
        chring_snap_exit(r, s);
        if (rc == -EBUSY)
            break;
        cr_assert_eq(rc, 0);
    }
    return n;
}

/* Leases elsewhere make m (and so the capacities) large enough to matter. */
Test(edges, a_flap_keeps_one_load_count)
{
    chring_t *r = ring_of(4);
    enum {
        MAX = 400
    };
    static chring_lease_t others[MAX], old[MAX], fresh[MAX];
    char key[32];
    for (int i = 0; i < 60; i++) {
        key_name(key, sizeof key, i);
        cr_assert_eq(chring_acquire(r, key, strlen(key), &others[i]), 0);
    }
    int nfilled = fill(r, "backend-2", old, MAX);
    cr_assert(nfilled > 1, "backend-2 took %d leases", nfilled);
    /* Its load: the leases fill() took and those of the 60 keys it owns. */
    const chring_snap_t *s = chring_snap_enter(r);
    int nold = (int)chring_member_load(chring_snap_find(s, "backend-2"));
    chring_snap_exit(r, s);

    /* Removed and added again while its nold leases are out: the same backend. */
    cr_assert_eq(chring_remove(r, "backend-2"), 0);
    add_or_fail(r, "backend-2", 1, NULL);
    s = chring_snap_enter(r);
    const chring_member_t *back = chring_snap_find(s, "backend-2");
    chring_member_stats_t st;
    chring_member_stats(back, &st);
    chring_snap_exit(r, s);
    cr_assert_eq(st.load, 0, "a new object");
    cr_assert_eq(st.inherited, (uint64_t)nold, "it counts the old leases: %llu of %d",
                 (unsigned long long)st.inherited, nold);
    cr_assert_eq(st.counted, (uint64_t)nold);

    /* The bound holds for the backend: the old leases plus the new ones stay within one
     * capacity (it was full already, so nothing more is admitted). */
    int nfresh = fill(r, "backend-2", fresh, MAX);
    s = chring_snap_enter(r);
    uint64_t cap = chring_member_capacity(r, s, chring_snap_find(s, "backend-2"));
    chring_snap_exit(r, s);
    cr_assert((uint64_t)(nold + nfresh) <= cap,
              "backend-2 holds %d old + %d new leases against a capacity of %llu", nold, nfresh,
              (unsigned long long)cap);

    /* The old leases go: the new member counts only its own. */
    for (int i = 0; i < nfilled; i++)
        chring_release(r, &old[i]);
    for (int i = 0; i < 60; i++)
        chring_release(r, &others[i]);
    s = chring_snap_enter(r);
    chring_member_stats(chring_snap_find(s, "backend-2"), &st);
    chring_snap_exit(r, s);
    cr_assert_eq(st.inherited, 0);
    cr_assert_eq(st.counted, (uint64_t)nfresh);
    for (int i = 0; i < nfresh; i++)
        chring_release(r, &fresh[i]);
    chring_free(&r);
}

/* Two flaps in a row: the newest member counts both removed members' leases. */
static int retired;
static void count_retire(void *udata, void *ctx)
{
    (void)udata;
    (void)ctx;
    retired++;
}

Test(edges, two_flaps_chain_and_retire_at_the_last_release)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.retire = count_retire;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 1, NULL);
    retired = 0;
    chring_lease_t l1, l2;
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_acquire_member(r, s, chring_snap_find(s, "a"), &l1), 0);
    chring_snap_exit(r, s);
    cr_assert_eq(chring_remove(r, "a"), 0);
    add_or_fail(r, "a", 1, NULL);
    s = chring_snap_enter(r);
    cr_assert_eq(chring_acquire_member(r, s, chring_snap_find(s, "a"), &l2), 0);
    chring_snap_exit(r, s);
    cr_assert_eq(chring_remove(r, "a"), 0);
    add_or_fail(r, "a", 1, NULL);
    s = chring_snap_enter(r);
    chring_member_stats_t st;
    chring_member_stats(chring_snap_find(s, "a"), &st);
    chring_snap_exit(r, s);
    cr_assert_eq(st.inherited, 2);
    chring_release(r, &l1);
    s = chring_snap_enter(r);
    chring_member_stats(chring_snap_find(s, "a"), &st);
    chring_snap_exit(r, s);
    cr_assert_eq(st.inherited, 1);
    chring_release(r, &l2);
    s = chring_snap_enter(r);
    chring_member_stats(chring_snap_find(s, "a"), &st);
    chring_snap_exit(r, s);
    cr_assert_eq(st.inherited, 0);
    chring_free(&r);
    cr_assert_eq(retired, 4);
}

/* Every member down: every lookup and acquire answers as an empty ring (NULL, -ENOENT, 0). */
Test(edges, every_member_down_answers_as_an_empty_ring)
{
    chring_t *r = ring_of(50);
    char name[32], key[32];
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof name, "backend-%d", i);
        cr_assert_eq(chring_set_down(r, name, 1), 0);
    }
    const chring_snap_t *held = chring_snap_hold(r);
    for (int k = 0; k < 20; k++) {
        key_name(key, sizeof key, k);
        chring_lease_t l;
        cr_assert_eq(chring_acquire(r, key, strlen(key), &l), -ENOENT);
        cr_assert_null(l.member);
        cr_assert_eq(chring_acquire_hash(r, (uint64_t)k * 0x9e3779b97f4a7c15u, &l), -ENOENT);
        cr_assert_eq(chring_acquire_skip(r, key, strlen(key), NULL, 0, &l), -ENOENT);
        const chring_snap_t *s = chring_snap_enter(r);
        cr_assert_null(chring_snap_lookup(s, key, strlen(key)));
        const chring_member_t *out[3];
        cr_assert_eq(chring_snap_lookup_n(s, key, strlen(key), out, 3), 0);
        chring_snap_exit(r, s);
        /* A held snapshot (not the current one after a publish) answers alike. */
        cr_assert_null(chring_snap_lookup(held, key, strlen(key)));
        char buf[64];
        cr_assert_eq(chring_lookup_name(r, key, strlen(key), buf, sizeof buf), -ENOENT);
    }
    /* One member up again: every key finds it. */
    cr_assert_eq(chring_set_down(r, "backend-7", 0), 0);
    key_name(key, sizeof key, 3);
    chring_lease_t l;
    cr_assert_eq(chring_acquire(r, key, strlen(key), &l), 0);
    cr_assert_str_eq(chring_member_name(l.member), "backend-7");
    chring_release(r, &l);
    chring_snap_put(r, held);
    chring_free(&r);
}

/* The floor (config.min_capacity): while few leases are out, keys stay on their owners. */
static chring_t *floor_ring(uint32_t floor, int members)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.min_capacity = floor;
    chring_t *r = ring_create(&cfg);
    char name[32];
    for (int i = 0; i < members; i++) {
        snprintf(name, sizeof name, "cache-%d", i);
        add_or_fail(r, name, 1, NULL);
    }
    return r;
}

/* Acquires keys 0 .. n-1 (held) and returns how many spilled. */
static int spills_of(chring_t *r, int n, int hot, chring_lease_t *leases)
{
    char key[32];
    int spilled = 0;
    for (int i = 0; i < n; i++) {
        key_name(key, sizeof key, hot ? 7 : i);
        cr_assert_eq(chring_acquire(r, key, strlen(key), &leases[i]), 0);
        spilled += leases[i].outcome != CHRING_OUTCOME_OWNER;
    }
    return spilled;
}

Test(edges, a_floor_keeps_uniform_keys_on_their_owners_at_low_concurrency)
{
    enum {
        N = 8
    };
    chring_lease_t a[N], b[N];
    chring_t *plain = floor_ring(0, 16), *floored = floor_ring(4, 16);
    int without = spills_of(plain, N, 0, a), with = spills_of(floored, N, 0, b);
    /* 8 keys over 16 members: with the bound alone an owner of a second key is full (capacity
     * ceil(1.25 * (m + 1) / 16) = 1 while m < 12); with a floor of 4 no key here spills unless
     * its owner already holds 4. */
    cr_assert_eq(with, 0, "%d of %d spilled with a floor of 4", with, N);
    cr_assert_gt(without, 0, "the bound alone spills here (%d)", without);
    chring_stats_t st;
    chring_stats(floored, &st);
    cr_assert_eq(st.spills, 0);
    for (int i = 0; i < N; i++) {
        chring_release(plain, &a[i]);
        chring_release(floored, &b[i]);
    }
    chring_free(&plain);
    chring_free(&floored);
}

Test(edges, the_hot_key_owner_holds_at_most_the_floor_or_the_bound)
{
    enum {
        N = 200
    };
    static chring_lease_t l[N];
    chring_t *r = floor_ring(6, 16);
    char key[32];
    key_name(key, sizeof key, 7);
    const chring_snap_t *s = chring_snap_hold(r);
    const chring_member_t *owner = chring_snap_lookup(s, key, strlen(key));
    for (int i = 0; i < N; i++) {
        uint64_t cap = chring_member_capacity(r, s, owner);
        uint64_t bound = chring_capacity(chring_leases(r), 16, 1.25);
        cr_assert_eq(cap, bound > 6 ? bound : 6, "the owner's capacity is max(bound, floor)");
        cr_assert_eq(chring_acquire(r, key, strlen(key), &l[i]), 0);
        cr_assert_neq(l[i].outcome, CHRING_OUTCOME_SATURATED);
        cr_assert_leq(chring_member_load(owner), cap, "after %d: the owner within %llu", i,
                      (unsigned long long)cap);
    }
    cr_assert_eq(chring_member_load(owner),
                 6 > chring_capacity(N - 1, 16, 1.25) ? 6 : chring_capacity(N - 1, 16, 1.25));
    for (int i = 0; i < N; i++)
        chring_release(r, &l[i]);
    chring_snap_put(r, s);
    chring_free(&r);
}

/* Skip lists by id: an id names one member object for ever, so a list kept after its leases
 * were released (the member removed and retired, its address maybe reused) skips no other. */
static int id_retired;
static void id_retire(void *udata, void *ctx)
{
    (void)udata;
    (void)ctx;
    __atomic_add_fetch(&id_retired, 1, __ATOMIC_SEQ_CST);
}

Test(edges, skip_ids_match_only_the_member_meant)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.retire = id_retire;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, "old", 1, NULL);
    add_or_fail(r, "keep", 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *old = chring_snap_find(s, "old");
    uint64_t old_id = chring_member_id(old);
    const void *old_addr = old;
    cr_assert_gt(old_id, 0);
    cr_assert_neq(chring_member_id(chring_snap_find(s, "keep")), old_id);
    chring_snap_exit(r, s);
    cr_assert_eq(chring_member_id(NULL), 0);

    id_retired = 0;
    cr_assert_eq(chring_remove(r, "old"), 0);
    /* Until it is retired (a grace period; bounded wait), then new members: one may take its
     * address.  Its id is new whatever its address. */
    for (int i = 0; i < 2000 && __atomic_load_n(&id_retired, __ATOMIC_SEQ_CST) == 0; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    cr_assert_eq(__atomic_load_n(&id_retired, __ATOMIC_SEQ_CST), 1, "retired within 2 s");
    char name[32];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "new-%d", i);
        add_or_fail(r, name, 1, NULL);
    }
    add_or_fail(r, "old", 1, NULL); /* the name again: a new object, a new id */
    s = chring_snap_enter(r);
    int reused = 0;
    for (size_t i = 0; i < chring_snap_len(s); i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        cr_assert_neq(chring_member_id(m), old_id, "%s has the retired member's id",
                      chring_member_name(m));
        reused += (const void *)m == old_addr;
    }
    chring_snap_exit(r, s);
    /* With the retired id in the skip list every key goes where a plain acquire sends it. */
    char key[32];
    for (int k = 0; k < 200; k++) {
        key_name(key, sizeof key, k);
        chring_lease_t a, b;
        cr_assert_eq(chring_acquire(r, key, strlen(key), &a), 0);
        const chring_member_t *plain = a.member;
        chring_release(r, &a);
        cr_assert_eq(chring_acquire_skip_ids(r, key, strlen(key), &old_id, 1, &b), 0);
        cr_assert_eq(b.member, plain, "%s: the retired id skipped %s (address reused: %d)", key,
                     chring_member_name(plain), reused);
        /* Skipping the member chosen, by its id, moves the key on. */
        uint64_t id = chring_member_id(plain);
        chring_release(r, &b);
        cr_assert_eq(chring_acquire_skip_ids(r, key, strlen(key), &id, 1, &b), 0);
        cr_assert_neq(b.member, plain);
        chring_release(r, &b);
        uint64_t h = 0;
        s = chring_snap_enter(r);
        h = chring_snap_hash(s, key, strlen(key));
        chring_snap_exit(r, s);
        cr_assert_eq(chring_acquire_hash_skip_ids(r, h, &id, 1, &b), 0);
        cr_assert_neq(b.member, plain);
        chring_release(r, &b);
    }
    chring_lease_t l;
    cr_assert_eq(chring_acquire_skip_ids(r, "k", 1, NULL, 1, &l), -EINVAL);
    cr_assert_eq(chring_acquire_skip_ids(r, "k", 1, NULL, 0, &l), 0);
    chring_release(r, &l);
    chring_free(&r);
}
