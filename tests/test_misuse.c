/* The misuse guards of include/chring.h (docs/design.md §5, §6): a lease released through
 * another ring than its own, a copy of a lease released after the lease itself, and a
 * chring_snap_put of a snapshot that was not held.  Each is ignored: no counter moves, the ring
 * keeps working, and every member is still retired exactly once.  Single-threaded; also run
 * under AddressSanitizer + UndefinedBehaviorSanitizer by .ci/steps/22-misuse-asan.sh.
 *
 * SPDX-License-Identifier: MIT
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include "chring_test.h"

#include <time.h>

/* One counter per udata object: how often config.retire handed it back (atomically: retire may
 * run on the ring's reclaimer thread). */
#define OBJECTS 8

struct object {
    int id;
    int retired;
};

static struct object objects[OBJECTS];

static void count_retire(void *udata, void *ctx)
{
    (void)ctx;
    struct object *o = udata;
    __atomic_add_fetch(&o->retired, 1, __ATOMIC_SEQ_CST);
}

static int retired(int id)
{
    return __atomic_load_n(&objects[id].retired, __ATOMIC_SEQ_CST);
}

static chring_t *counting_ring(void)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 40;
    cfg.retire = count_retire;
    return ring_create(&cfg);
}

/* Adds members m0..m(count-1) with udata objects[first + i]. */
static void add_members(chring_t *r, int first, int count)
{
    char name[16];
    for (int i = 0; i < count; i++) {
        objects[first + i].id = first + i;
        snprintf(name, sizeof name, "m%d", i);
        add_or_fail(r, name, 1, &objects[first + i]);
    }
}

static uint64_t load_of(chring_t *r, const char *name)
{
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_find(s, name);
    cr_assert_not_null(m, "member %s", name);
    uint64_t load = chring_member_load(m);
    chring_snap_exit(r, s);
    return load;
}

/* Waits (bounded: 20 s) until objects[id] was retired at least once; replaced snapshots are freed
 * by the ring's reclaimer thread, so a removed member's retirement comes a little later. */
static void wait_retired(int id)
{
    struct timespec pause = {0, 2 * 1000 * 1000};
    for (int i = 0; i < 10000 && retired(id) == 0; i++)
        nanosleep(&pause, NULL);
    cr_assert_eq(retired(id), 1, "object %d retired exactly once (got %d)", id, retired(id));
}

Test(misuse, lease_released_through_another_ring_moves_nothing)
{
    memset(objects, 0, sizeof objects);
    chring_t *a = counting_ring(), *b = counting_ring();
    add_members(a, 0, 3);
    add_members(b, 3, 3); /* the same names m0..m2 in both rings */

    chring_lease_t la, lb[2];
    cr_assert_eq(chring_acquire(a, "k", 1, &la), 0);
    /* b holds leases of its own, so that a wrong decrement of its m would show (m = 0 would
     * wrap, and a wrapped sum reads as 0). */
    cr_assert_eq(chring_acquire(b, "k", 1, &lb[0]), 0);
    cr_assert_eq(chring_acquire(b, "j", 1, &lb[1]), 0);
    const char *name = chring_member_name(la.member);
    uint64_t load_a = load_of(a, name), load_b = load_of(b, name);
    chring_stats_t sa0, sb0, sa1, sb1;
    chring_stats(a, &sa0);
    chring_stats(b, &sb0);
    cr_assert_eq(chring_leases(a), 1u);
    cr_assert_eq(chring_leases(b), 2u);

    chring_release(b, &la); /* the wrong ring: ignored */

    cr_assert_eq(chring_leases(a), 1u, "a's m unchanged");
    cr_assert_eq(chring_leases(b), 2u, "b's m unchanged");
    cr_assert_eq(load_of(a, name), load_a, "the lease's member keeps its load");
    cr_assert_eq(load_of(b, name), load_b, "b's member of the same name keeps its load");
    chring_stats(a, &sa1);
    chring_stats(b, &sb1);
    cr_assert_eq(memcmp(&sa0, &sa1, sizeof sa0), 0, "a's statistics unchanged");
    cr_assert_eq(memcmp(&sb0, &sb1, sizeof sb0), 0, "b's statistics unchanged");

    /* The lease still works through its own ring. */
    chring_release(a, &la);
    cr_assert_null(la.member, "released through its own ring: cleared");
    cr_assert_eq(chring_leases(a), 0u);
    cr_assert_eq(load_of(a, name), 0u);
    chring_release(b, &lb[0]);
    chring_release(b, &lb[1]);
    cr_assert_eq(chring_leases(b), 0u);

    chring_free(&a);
    chring_free(&b);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(retired(i), 1, "object %d retired exactly once (got %d)", i, retired(i));
}

Test(misuse, released_copy_of_a_lease_moves_nothing)
{
    memset(objects, 0, sizeof objects);
    chring_t *r = counting_ring();
    add_members(r, 0, 3);

    chring_lease_t lease, other;
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m0 = chring_snap_find(s, "m0"), *m1 = chring_snap_find(s, "m1");
    cr_assert_eq(chring_acquire_member(r, s, m0, &lease), 0);
    /* Another lease on another member keeps m above 0, so that a wrong decrement shows. */
    cr_assert_eq(chring_acquire_member(r, s, m1, &other), 0);
    chring_snap_exit(r, s);
    chring_lease_t copy = lease;

    chring_release(r, &lease);
    cr_assert_eq(load_of(r, "m0"), 0u);
    cr_assert_eq(chring_leases(r), 1u);
    chring_stats_t before, after;
    chring_stats(r, &before);

    chring_release(r, &copy); /* the copy of a released lease: ignored */

    cr_assert_eq(load_of(r, "m0"), 0u, "the load stays 0");
    cr_assert_eq(load_of(r, "m1"), 1u, "the other member keeps its lease");
    cr_assert_eq(chring_leases(r), 1u, "m unchanged");
    chring_stats(r, &after);
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0, "statistics unchanged");

    /* The member is intact: it takes and gives back leases, and is retired exactly once when
     * removed (its word was not damaged by the copy). */
    chring_lease_t again;
    s = chring_snap_enter(r);
    cr_assert_eq(chring_member_check(chring_snap_find(s, "m0")), 0, "m0 still valid");
    cr_assert_eq(chring_acquire_member(r, s, chring_snap_find(s, "m0"), &again), 0);
    chring_snap_exit(r, s);
    cr_assert_eq(load_of(r, "m0"), 1u);
    chring_release(r, &again);
    cr_assert_eq(load_of(r, "m0"), 0u);
    cr_assert_eq(chring_remove(r, "m0"), 0);
    wait_retired(0);
    cr_assert_eq(retired(1), 0, "m1 is still in the ring");

    chring_release(r, &other);
    chring_free(&r);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(retired(i), 1, "object %d retired exactly once (got %d)", i, retired(i));
}

Test(misuse, put_of_an_unheld_snapshot_leaves_the_published_one_alone)
{
    memset(objects, 0, sizeof objects);
    chring_t *r = counting_ring();
    add_members(r, 0, 4);
    char **owners = owners_copy(r, 200);

    /* A snapshot obtained from a read section, put as if it were held. */
    const chring_snap_t *s = chring_snap_enter(r);
    uint64_t version = chring_snap_version(s);
    chring_snap_exit(r, s);
    chring_snap_put(r, s);
    /* A held snapshot put twice: the second put is the misuse. */
    const chring_snap_t *held = chring_snap_hold(r);
    cr_assert_eq(held, s, "nothing was published in between");
    chring_snap_put(r, held);
    chring_snap_put(r, held);

    /* The published snapshot survived: it is still current, valid, and answers every key. */
    s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_check(s), 0, "the published snapshot is intact");
    cr_assert_eq(chring_snap_version(s), version);
    cr_assert_eq(chring_snap_len(s), 4u);
    for (size_t i = 0; i < chring_snap_len(s); i++)
        cr_assert_eq(chring_member_check(chring_snap_member(s, i)), 0, "member %zu valid", i);
    chring_snap_exit(r, s);
    char **now = owners_copy(r, 200);
    for (int i = 0; i < 200; i++)
        cr_assert(str_eq_null(now[i], owners[i]), "key-%d keeps its owner", i);
    owners_free(now, 200);
    owners_free(owners, 200);
    chring_lease_t lease;
    cr_assert_eq(chring_acquire(r, "k", 1, &lease), 0, "acquire still works");
    chring_release(r, &lease);

    /* Later publishes reclaim it: m3 is listed by that snapshot only, so m3 is retired exactly
     * when the snapshot is destroyed after its replacement's grace period. */
    cr_assert_eq(chring_remove(r, "m3"), 0);
    wait_retired(3);
    cr_assert_eq(chring_add(r, "m9", 1, &objects[7]), 0);
    s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_check(s), 0);
    cr_assert_eq(chring_snap_len(s), 4u);
    chring_snap_exit(r, s);

    chring_free(&r);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(retired(i), 1, "object %d retired exactly once (got %d)", i, retired(i));
    cr_assert_eq(retired(7), 1, "m9's object retired exactly once");
}
