/* The shards of the outstanding-lease count, seen from inside (docs/design.md §3): every lease
 * is counted in the shard it was acquired through, and its release, on whatever thread, takes it
 * back from that same shard, so no shard ever goes below zero.  The black-box test in
 * test_leases.c checks the sum; a release that decremented the wrong shard keeps the sum right
 * (the shards are summed modulo 2^64) and only shows here.  Internal: links the static library
 * and reads struct chring (src/internal.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#define HELD 16

struct job {
    chring_t *r;
    chring_lease_t *leases;
    int count;
    int acquire; /* 1: acquire count leases; 0: release them */
};

static void *run_job(void *arg)
{
    struct job *j = arg;
    for (int i = 0; i < j->count; i++) {
        if (j->acquire) {
            char key[16];
            snprintf(key, sizeof key, "k%d", i);
            if (chring_acquire(j->r, key, strlen(key), &j->leases[i]) != 0)
                return (void *)1;
        } else {
            chring_release(j->r, &j->leases[i]);
        }
    }
    return NULL;
}

/* Runs a job on a new thread (a thread of its own is a shard of its own turn) and joins it. */
static void on_new_thread(chring_t *r, chring_lease_t *leases, int count, int acquire)
{
    pthread_t t;
    struct job j = {r, leases, count, acquire};
    void *ret = NULL;
    cr_assert_eq(pthread_create(&t, NULL, run_job, &j), 0);
    cr_assert_eq(pthread_join(t, &ret), 0);
    cr_assert_null(ret, "every acquire succeeded");
}

static unsigned shard_of(const chring_lease_t *lease)
{
    return (unsigned)(lease->reserved_ >> 56);
}

/* Each shard's count, exactly: expect[k] for shard k. */
static void assert_shards(chring_t *r, const uint64_t *expect, const char *when)
{
    for (unsigned k = 0; k <= r->shard_mask; k++)
        cr_assert_eq(r->shards[k].leases, expect[k], "%s: shard %u holds %llu, expected %llu", when,
                     k, (unsigned long long)r->shards[k].leases, (unsigned long long)expect[k]);
}

Test(shards, each_release_takes_its_lease_back_from_the_shard_it_was_acquired_through)
{
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, NULL), 0);
    cr_assert_geq(r->shard_mask, 1u, "at least two shards");
    cr_assert_eq(chring_add(r, "a", 1, NULL), 0);
    cr_assert_eq(chring_add(r, "b", 1, NULL), 0);
    static chring_lease_t x[HELD], y[HELD];
    uint64_t expect[64] = {0};

    on_new_thread(r, x, 5, 1);
    on_new_thread(r, y, 3, 1);
    unsigned sx = shard_of(&x[0]), sy = shard_of(&y[0]);
    cr_assert_neq(sx, sy, "two threads, one after the other, get different shards");
    for (int i = 0; i < 5; i++)
        cr_assert_eq(shard_of(&x[i]), sx, "one thread, one shard");
    expect[sx] = 5, expect[sy] = 3;
    assert_shards(r, expect, "after the acquires");

    /* Releases on this thread, then on a third one: neither acquired these leases. */
    for (int i = 0; i < 2; i++)
        chring_release(r, &x[i]);
    expect[sx] = 3;
    assert_shards(r, expect, "after this thread released 2 of the first thread's");
    on_new_thread(r, x + 2, 3, 0);
    on_new_thread(r, y, 2, 0);
    expect[sx] = 0, expect[sy] = 1;
    assert_shards(r, expect, "after other threads released more");
    chring_release(r, &y[2]);
    expect[sy] = 0;
    assert_shards(r, expect, "all released");
    cr_assert_eq(chring_leases(r), 0u);
    chring_free(&r);
}

Test(shards, one_shard_per_online_cpu_rounded_up_to_a_power_of_two)
{
    /* src/load.c: one shard per online CPU, rounded up to a power of two; at least 2, at most
     * 64.  So the count is the smallest power of two that covers the CPUs (within those
     * bounds): half of it would not. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_gt(cpus, 0L);
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, NULL), 0);
    unsigned count = r->shard_mask + 1;
    cr_assert_eq(count & (count - 1), 0u, "%u shards: a power of two", count);
    cr_assert_geq(count, 2u, "at least two");
    cr_assert_leq(count, 64u, "at most 64");
    if (count < 64)
        cr_assert_geq((long)count, cpus, "%u shards cover %ld CPUs", count, cpus);
    if (count > 2)
        cr_assert_lt((long)count / 2, cpus, "%u shards: half of them would cover %ld CPUs", count,
                     cpus);
    chring_free(&r);
}

Test(shards, internal_calloc_refuses_a_size_that_overflows)
{
    /* Not the shards, but also only visible from inside: n * size wrapping around SIZE_MAX must
     * fail, not return a small block (src/alloc.c). */
    cr_assert_null(chring__calloc(SIZE_MAX / 2 + 1, 2), "2^63 * 2 wraps to 0");
    cr_assert_null(chring__calloc(SIZE_MAX / 8 + 2, 8), "wraps to 8");
    void *p = chring__calloc(3, 8);
    cr_assert_not_null(p, "a small block");
    for (int i = 0; i < 24; i++)
        cr_assert_eq(((unsigned char *)p)[i], 0, "zeroed");
    chring__free(p);
}
