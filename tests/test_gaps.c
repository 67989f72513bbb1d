/* Paths the other suites reach but do not judge, each found by a mutant they let live: the
 * capacities of a held snapshot with a member down (docs/design.md §3), a ramp's generation under
 * a concurrent clear (§3), the lease an acquire with bad arguments leaves (§5, §6), and the
 * index of a large ring after a merge that changes points round its wrap (§1, §9).
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE /* syscall(), usleep() */
#include "chring_test.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void add(chring_t *r, const char *name, uint32_t weight)
{
    int rc = chring_add(r, name, weight, NULL);
    cr_assert_eq(rc, 0, "chring_add(%s, %u): %d", name, weight, rc);
}

/* ---- the capacities of a held snapshot count only its members that are up ----------------- */

/* A held snapshot that is no longer current cannot use the ring's running total of the weight
 * down (that is the current membership's): its capacities add up its own members that are down.
 * A finite loop over them, whose sum the capacity shows. */
Test(gaps, capacity_on_a_replaced_snapshot_leaves_out_its_members_down, .timeout = 30)
{
    chring_t *r = ring_create(NULL);
    add(r, "a", 1);
    add(r, "b", 3);
    add(r, "c", 4);
    const chring_snap_t *held = chring_snap_hold(r);
    add(r, "d", 2); /* held is replaced: no longer the ring's current snapshot */
    cr_assert_eq(chring_set_down(r, "b", 1), 0);

    enum {
        LEASES = 100
    };
    chring_lease_t leases[LEASES];
    char key[16];
    for (int i = 0; i < LEASES; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        cr_assert_eq(chring_acquire(r, key, strlen(key), &leases[i]), 0);
    }
    const double c = CHRING_DEFAULT_BALANCE;
    const chring_member_t *a = chring_snap_find(held, "a");
    const chring_member_t *cm = chring_snap_find(held, "c");
    cr_assert_not_null(a);
    cr_assert_not_null(cm);
    /* held lists a (1), b (3, down) and c (4): W is 5 there.  Counting b would give W = 8. */
    uint64_t want_a = chring_capacity_weighted(LEASES, 1, 1 + 4, c);
    uint64_t want_c = chring_capacity_weighted(LEASES, 4, 1 + 4, c);
    cr_assert_neq(want_a, chring_capacity_weighted(LEASES, 1, 1 + 3 + 4, c), "a test that tells");
    cr_assert_eq(chring_member_capacity(r, held, a), want_a, "a on the held snapshot");
    cr_assert_eq(chring_member_capacity(r, held, cm), want_c, "c on the held snapshot");

    /* The current snapshot (a, b down, c, d): W is 7, from the ring's running total. */
    const chring_snap_t *now = chring_snap_enter(r);
    cr_assert_eq(chring_member_capacity(r, now, chring_snap_find(now, "a")),
                 chring_capacity_weighted(LEASES, 1, 1 + 4 + 2, c), "a on the current snapshot");
    chring_snap_exit(r, now);

    /* Up again: held counts b again. */
    cr_assert_eq(chring_set_down(r, "b", 0), 0);
    cr_assert_eq(chring_member_capacity(r, held, a),
                 chring_capacity_weighted(LEASES, 1, 1 + 3 + 4, c), "b up again");

    for (int i = 0; i < LEASES; i++)
        chring_release(r, &leases[i]);
    chring_snap_put(r, held);
    chring_free(&r);
}

/* ---- a ramp is never cleared by a reader that judged an older one -------------------------- */

/* The library reads the clock between loading a ramp's generation and clearing a finished ramp
 * with a compare-and-swap of that generation.  This clock_gettime, which the test binary's own
 * definition puts in front of the C library's, sets a new ramp on the member in that window
 * once armed: the reader's compare-and-swap then meets the new ramp's generation and must fail.
 * If generations repeated (or came back to 0), the new ramp would be cleared under the writer. */
static chring_t *ramp_ring;
static volatile int ramp_armed, ramp_fired;

int clock_gettime(clockid_t clk, struct timespec *ts)
{
    int rc = (int)syscall(SYS_clock_gettime, clk, ts);
    if (ramp_armed) {
        ramp_armed = 0; /* before the call: chring_set_ramp reads the clock too */
        ramp_fired = chring_set_ramp(ramp_ring, "a", 0.5, 0.5, 0) == 0;
    }
    return rc;
}

Test(gaps, a_reader_clearing_a_finished_ramp_leaves_a_newer_ramp_alone)
{
    ramp_ring = ring_create(NULL);
    add(ramp_ring, "a", 1);
    add(ramp_ring, "b", 1);
    const chring_snap_t *s = chring_snap_hold(ramp_ring);
    const chring_member_t *a = chring_snap_find(s, "a");
    cr_assert_not_null(a);

    for (int round = 0; round < 3; round++) {
        /* A 1 ms ramp up to 1, finished and not yet noticed by any reader. */
        cr_assert_eq(chring_set_ramp(ramp_ring, "a", 0.0, 1.0, 1), 0);
        usleep(5000);
        ramp_fired = 0;
        ramp_armed = 1;
        /* This reader sees the finished ramp (scale 1) and clears it, unless a newer one came. */
        cr_assert_float_eq(chring_member_scale(a), 1.0, 1e-12, "the finished ramp's scale");
        cr_assert(ramp_fired, "the clock was read between the generation and its clear");
        cr_assert_float_eq(chring_member_scale(a), 0.5, 1e-12,
                           "round %d: the ramp set meanwhile (0.5) survives the clear", round);
        cr_assert_eq(chring_member_capacity(ramp_ring, s, a), 1u, "ceil(0.5 * 1)");
    }
    /* A constant ramp to 1 with no duration clears it at once, as before. */
    cr_assert_eq(chring_set_ramp(ramp_ring, "a", 1.0, 1.0, 0), 0);
    cr_assert_float_eq(chring_member_scale(a), 1.0, 1e-12);
    chring_snap_put(ramp_ring, s);
    chring_free(&ramp_ring);
}

/* ---- an acquire with bad arguments clears the lease ---------------------------------------- */

/* So that a caller may release whatever lease an acquire left, failed or not: a released cleared
 * lease is a no-op.  The lease here holds a real lease's bytes before the failing call. */
Test(gaps, acquire_with_bad_arguments_clears_the_lease)
{
    chring_t *r = ring_create(NULL);
    add(r, "a", 1);
    chring_lease_t lease, copy;
    cr_assert_eq(chring_acquire(r, "k", 1, &lease), 0);
    copy = lease;
    const chring_member_t *m = lease.member;
    cr_assert_eq(chring_member_load(m), 1u);

    cr_assert_eq(chring_acquire(NULL, "k", 1, &lease), -EINVAL, "a NULL ring");
    cr_assert_null(lease.member, "a NULL ring leaves the lease cleared");
    cr_assert_eq(lease.reserved_, 0u, "a NULL ring leaves the lease cleared");
    chring_release(r, &lease); /* a no-op */
    cr_assert_eq(chring_member_load(m), 1u, "the failed acquire's lease released nothing");

    lease = copy;
    cr_assert_eq(chring_acquire(r, NULL, 4, &lease), -EINVAL, "a NULL key with a length");
    cr_assert_null(lease.member, "a NULL key leaves the lease cleared");
    cr_assert_eq(lease.reserved_, 0u, "a NULL key leaves the lease cleared");
    chring_release(r, &lease);
    cr_assert_eq(chring_member_load(m), 1u, "the failed acquire's lease released nothing");

    chring_release(r, &copy);
    cr_assert_eq(chring_member_load(m), 0u);
    chring_free(&r);
}

/* ---- a merge that changes points round the wrap keeps a large ring's index right ---------- */

/* Past half a million points the bucket index is packed (a base per 64 buckets, a byte a
 * bucket), and keys above the last point wrap to point 0.  A member whose points come before
 * every other point becomes point 0's owner when it joins and stops being it when it leaves, and
 * moves every other point's index: a merge that adds or drops it must shift every group's base
 * and rewrite the groups round the change and from the last point's bucket to the end of the
 * index.  (Written for the owner entries the packed index replaced, which named the owner of the
 * first point after an empty bucket, wrapping.)  The custom hash puts "edge"'s points at the
 * bottom of the ring and spreads the others with chring_hash64; each snapshot is compared with a
 * ring built afresh. */
static uint64_t edge_hash(const void *data, size_t len, void *ctx)
{
    (void)ctx;
    if (len > 5 && memcmp(data, "edge#", 5) == 0)
        return (uint64_t)len + ((const unsigned char *)data)[len - 1]; /* tiny positions */
    return chring_hash64(data, len);
}

enum {
    BIG_MEMBERS = 3400,
    BIG_VNODES = 160
}; /* 544,000 points: past 2^19 */

static chring_t *big_ring(int with_edge)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_CUSTOM;
    cfg.hash = edge_hash;
    cfg.hash_bits = 64;
    cfg.vnodes = BIG_VNODES;
    chring_t *r = ring_create(&cfg);
    static char names[BIG_MEMBERS + 1][16];
    static chring_change_t changes[BIG_MEMBERS + 1];
    size_t n = 0;
    for (int i = 0; i < BIG_MEMBERS; i++, n++) {
        snprintf(names[i], sizeof names[i], "m%04d", i);
        changes[n] = (chring_change_t){names[i], 1, NULL};
    }
    if (with_edge)
        changes[n++] = (chring_change_t){"edge", 1, NULL};
    cr_assert_eq(chring_update(r, changes, n), 0);
    return r;
}

/* Every key position from the last point round the wrap to a little past the first points, and
 * a sample of the whole ring, owned alike in a and b. */
static void same_owners(const chring_snap_t *a, const chring_snap_t *b, const char *what)
{
    size_t n = chring_snap_points(a);
    cr_assert_eq(n, chring_snap_points(b), "%s: point counts", what);
    uint64_t last, first_other = 0;
    cr_assert_eq(chring_snap_point(a, n - 1, &last, NULL), 0);
    for (size_t i = 0; i < n; i++) {
        const chring_member_t *m;
        cr_assert_eq(chring_snap_point(a, i, &first_other, &m), 0);
        if (strcmp(chring_member_name(m), "edge") != 0)
            break;
    }
    const uint64_t steps = 1u << 16;
    uint64_t tail = UINT64_MAX - last, head = first_other;
    for (uint64_t k = 0; k <= steps; k++) {
        uint64_t hs[3] = {last + tail / steps * k, head / steps * k,
                          UINT64_C(0x9e3779b97f4a7c15) * k};
        for (int t = 0; t < 3; t++) {
            const chring_member_t *ma = chring_snap_lookup_hash(a, hs[t]);
            const chring_member_t *mb = chring_snap_lookup_hash(b, hs[t]);
            cr_assert(ma != NULL && mb != NULL, "%s: an owner", what);
            cr_assert_str_eq(chring_member_name(ma), chring_member_name(mb),
                             "%s: the owner of position %llu", what, (unsigned long long)hs[t]);
        }
    }
}

Test(gaps, merge_that_changes_the_first_points_rewrites_the_wrapped_entries, .timeout = 120)
{
    chring_t *r = big_ring(0);
    chring_t *with = big_ring(1), *without = big_ring(0);

    add(r, "edge", 1); /* a merge: 160 points of 544,000 */
    const chring_snap_t *s = chring_snap_hold(r), *w = chring_snap_hold(with);
    const chring_member_t *first;
    cr_assert_eq(chring_snap_point(s, 0, NULL, &first), 0);
    cr_assert_str_eq(chring_member_name(first), "edge", "edge owns point 0");
    same_owners(s, w, "edge joined");
    chring_snap_put(r, s);
    chring_snap_put(with, w);

    cr_assert_eq(chring_remove(r, "edge"), 0); /* a merge again: point 0 changes owner back */
    s = chring_snap_hold(r);
    const chring_snap_t *wo = chring_snap_hold(without);
    same_owners(s, wo, "edge left");
    chring_snap_put(r, s);
    chring_snap_put(without, wo);

    chring_free(&r);
    chring_free(&with);
    chring_free(&without);
}
