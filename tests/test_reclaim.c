/* The reclaimer (src/reclaim.c, docs/design.md §4, "Reclamation"), seen from inside: a replaced
 * snapshot is given up by the ring's own thread after a grace period, not by liburcu's call_rcu;
 * chring_quiesce returns once every snapshot replaced before it is given up; the thread ends when
 * nothing waits and starts again with the next publish; CHRING_RECLAIM_THREAD=0 hands the
 * snapshots to call_rcu instead.  Internal: links the static library and reads struct chring
 * (src/internal.h).  No timing is asserted: every wait is a bounded poll for what must happen.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MEMBERS 8

static int retired[MEMBERS + 1];

static void count_retire(void *udata, void *ctx)
{
    (void)ctx;
    if (udata != NULL)
        __atomic_fetch_add((int *)udata, 1, __ATOMIC_SEQ_CST);
}

static chring_t *ring_with_members(void)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 16;
    cfg.retire = count_retire;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0, "chring_new");
    for (int i = 0; i < MEMBERS; i++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", i);
        cr_assert_eq(chring_add(r, name, 1, &retired[i]), 0, "add %s", name);
    }
    return r;
}

static uint64_t load64(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

/* Polls until *p reaches want, for at most 10 s.  Returns the last value seen. */
static uint64_t wait_until(const uint64_t *p, uint64_t want)
{
    struct timespec tick = {0, 1000000}; /* 1 ms */
    for (int i = 0; i < 10000 && load64(p) < want; i++)
        nanosleep(&tick, NULL);
    return load64(p);
}

Test(reclaim, replaced_snapshots_are_given_up_by_the_rings_thread_not_call_rcu, .timeout = 60)
{
    chring_t *r = ring_with_members();
    /* MEMBERS publishes so far, each replacing one snapshot (the first the empty version 0). */
    uint64_t got = wait_until(&r->reclaim.reclaimed, MEMBERS);
    cr_assert_eq(got, MEMBERS, "the thread gave up %llu of the %d replaced snapshots",
                 (unsigned long long)got, MEMBERS);
    cr_assert_eq(load64(&r->reclaim.deferred), 0, "a snapshot went to call_rcu");
    cr_assert_null(__atomic_load_n(&r->reclaim.retired, __ATOMIC_SEQ_CST), "none waits");
    cr_assert_geq(load64(&r->reclaim.batches), 1, "a grace period was waited for");
    chring_free(&r);
    for (int i = 0; i < MEMBERS; i++)
        cr_assert_eq(retired[i], 1, "m%d retired %d times", i, retired[i]);
}

Test(reclaim, the_thread_ends_when_idle_and_the_next_publish_starts_another, .timeout = 60)
{
    chring_t *r = ring_with_members();
    wait_until(&r->reclaim.reclaimed, MEMBERS);
    struct timespec tick = {0, 1000000};
    int i;
    for (i = 0; i < 10000 && __atomic_load_n(&r->reclaim.state, __ATOMIC_SEQ_CST) != 0; i++)
        nanosleep(&tick, NULL);
    cr_assert_eq(__atomic_load_n(&r->reclaim.state, __ATOMIC_SEQ_CST), 0,
                 "the thread still runs 10 s after the last publish");
    cr_assert_eq(chring_remove(r, "m0"), 0, "remove");
    uint64_t got = wait_until(&r->reclaim.reclaimed, MEMBERS + 1);
    cr_assert_eq(got, MEMBERS + 1, "the publish after the thread ended was not given up");
    /* m0's snapshot reference goes with the snapshots that listed it: retired once both are. */
    for (i = 0; i < 10000 && __atomic_load_n(&retired[0], __ATOMIC_SEQ_CST) == 0; i++)
        nanosleep(&tick, NULL);
    cr_assert_eq(__atomic_load_n(&retired[0], __ATOMIC_SEQ_CST), 1, "m0 retired");
    cr_assert_eq(load64(&r->reclaim.deferred), 0, "a snapshot went to call_rcu");
    chring_free(&r);
}

/* chring_quiesce's promise: when it returns, a member removed before it, which nothing holds, is
 * retired (its last snapshot given up), with no wait after it. */
Test(reclaim, quiesce_returns_after_the_replaced_snapshots_are_given_up, .timeout = 60)
{
    chring_t *r = ring_with_members();
    for (int round = 0; round < 50; round++) {
        int *slot = &retired[MEMBERS];
        __atomic_store_n(slot, 0, __ATOMIC_SEQ_CST);
        cr_assert_eq(chring_add(r, "extra", 1, slot), 0, "add extra");
        cr_assert_eq(chring_remove(r, "extra"), 0, "remove extra");
        cr_assert_eq(chring_quiesce(r), 0, "chring_quiesce");
        cr_assert_eq(__atomic_load_n(slot, __ATOMIC_SEQ_CST), 1,
                     "round %d: extra not retired when chring_quiesce returned", round);
    }
    cr_assert_eq(chring_quiesce(NULL), -EINVAL, "NULL ring");
    chring_free(&r);
}

/* A held snapshot is not given up by chring_quiesce: it stays until it is put. */
Test(reclaim, quiesce_leaves_a_held_snapshot_until_it_is_put, .timeout = 60)
{
    chring_t *r = ring_with_members();
    int *slot = &retired[MEMBERS];
    cr_assert_eq(chring_add(r, "extra", 1, slot), 0, "add extra");
    const chring_snap_t *held = chring_snap_hold(r);
    cr_assert_eq(chring_remove(r, "extra"), 0, "remove extra");
    cr_assert_eq(chring_quiesce(r), 0, "chring_quiesce");
    cr_assert_eq(__atomic_load_n(slot, __ATOMIC_SEQ_CST), 0, "extra retired under a hold");
    cr_assert_eq(chring_snap_len(held), MEMBERS + 1, "the held snapshot still lists extra");
    chring_snap_put(r, held);
    cr_assert_eq(__atomic_load_n(slot, __ATOMIC_SEQ_CST), 1, "extra retired by the put");
    chring_free(&r);
}

static void no_thread(void)
{
    setenv("CHRING_RECLAIM_THREAD", "0", 1);
}

/* With no thread (the environment says so, as when none can be started) the snapshots go to
 * call_rcu, and chring_quiesce still keeps its promise. */
Test(reclaim, without_a_thread_call_rcu_gives_them_up, .init = no_thread, .timeout = 60)
{
    chring_t *r = ring_with_members();
    cr_assert_eq(load64(&r->reclaim.deferred), MEMBERS, "each replaced snapshot to call_rcu");
    cr_assert_eq(__atomic_load_n(&r->reclaim.state, __ATOMIC_SEQ_CST), 0, "no thread");
    int *slot = &retired[MEMBERS];
    cr_assert_eq(chring_add(r, "extra", 1, slot), 0, "add extra");
    cr_assert_eq(chring_remove(r, "extra"), 0, "remove extra");
    cr_assert_eq(chring_quiesce(r), 0, "chring_quiesce");
    cr_assert_eq(__atomic_load_n(slot, __ATOMIC_SEQ_CST), 1, "extra retired");
    cr_assert_eq(load64(&r->reclaim.reclaimed), 0, "no thread gave any up");
    chring_free(&r);
    for (int i = 0; i < MEMBERS; i++)
        cr_assert_eq(retired[i], 1, "m%d retired %d times", i, retired[i]);
}
