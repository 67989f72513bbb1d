/* chring_acquire_skip (docs/design.md §3; include/chring.h): a retry that keeps the bound.  A
 * property test over random rings (every built-in profile, random weights and vnodes) with
 * random loads (leases held) compares each choice with an independent model of the walk: from the
 * key's point clockwise, the first member outside skip whose load is below its capacity
 * (chring_capacity_weighted with the snapshot's weights and the ring's m); if every member met
 * outside skip is full, the least loaded of them (first met of equals) and a saturation event;
 * -ENOENT when no member outside skip is met.  Skip lists hold stale pointers too (removed
 * members kept alive by a lease), which match nothing.  Single-threaded.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

#include <stdbool.h>

static uint64_t next_random(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * UINT64_C(2685821657736338717);
}

static bool in_skip(const chring_member_t *m, const chring_member_t *const *skip, size_t nskip)
{
    for (size_t k = 0; k < nskip; k++)
        if (skip[k] == m)
            return true;
    return false;
}

/* The model's answer for one key. */
struct choice {
    int rc;                        /* 0 or -ENOENT */
    const chring_member_t *member; /* the member chosen */
    const chring_member_t *owner;  /* the key's owner */
    bool saturated;                /* every member met outside skip was full */
};

/* What the bound counts for m: its leases, and those of a member of its name removed while they
 * were out (a flap: chring_member_stats_t.inherited, docs/design.md §3). */
static uint64_t counted_of(const chring_member_t *m)
{
    chring_member_stats_t st;
    chring_member_stats(m, &st);
    return st.load + st.inherited;
}

/* The walk, computed from the snapshot's points, the members' loads and capacities.  Call inside
 * a read section on s, with no acquire or release in flight. */
static struct choice model_choice(chring_t *r, const chring_snap_t *s, const char *key,
                                  const chring_member_t *const *skip, size_t nskip)
{
    struct choice ch = {-ENOENT, NULL, NULL, false};
    size_t n = chring_snap_points(s);
    if (n == 0)
        return ch;
    uint64_t total_weight = 0;
    for (size_t i = 0; i < chring_snap_len(s); i++)
        total_weight += chring_snap_weight(s, chring_snap_member(s, i));
    uint64_t m_total = chring_leases(r);
    double c = 1.25; /* the rings below are made with balance 1.25 */

    /* The key's point: the first point at or after its hash, wrapping to the first. */
    uint64_t h = chring_snap_hash(s, key, strlen(key));
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t pos;
        cr_assert_eq(chring_snap_point(s, i, &pos, NULL), 0);
        if (pos >= h) {
            start = i;
            break;
        }
    }
    cr_assert_eq(chring_snap_point(s, start, NULL, &ch.owner), 0);
    cr_assert_eq(ch.owner, chring_snap_lookup(s, key, strlen(key)),
                 "the model's owner of %s is the ring's", key);

    const chring_member_t *least = NULL;
    uint64_t least_load = 0;
    for (size_t t = 0; t < n; t++) {
        const chring_member_t *m;
        cr_assert_eq(chring_snap_point(s, (start + t) % n, NULL, &m), 0);
        if (in_skip(m, skip, nskip))
            continue;
        uint64_t load = counted_of(m);
        /* The least loaded relative to its weight (docs/design.md §3). */
        if (least == NULL ||
            load * chring_snap_weight(s, least) < least_load * chring_snap_weight(s, m)) {
            least_load = load;
            least = m;
        }
        uint64_t cap = chring_capacity_weighted(m_total, chring_snap_weight(s, m), total_weight, c);
        cr_assert_eq(cap, chring_member_capacity(r, s, m), "capacity of %s", chring_member_name(m));
        if (load < cap) {
            ch.rc = 0;
            ch.member = m;
            return ch;
        }
    }
    if (least != NULL) {
        ch.rc = 0;
        ch.member = least;
        ch.saturated = true;
    }
    return ch;
}

#define LEASES_MAX 600

struct leases {
    chring_lease_t held[LEASES_MAX];
    size_t count;
};

static void leases_release_all(chring_t *r, struct leases *ls)
{
    for (size_t i = 0; i < ls->count; i++)
        chring_release(r, &ls->held[i]);
    ls->count = 0;
}

/* What the property test saw, to show that every path was taken. */
struct seen {
    long chosen, spills, saturated, enoent, stale;
};

static const chring_profile_t profiles[] = {
    CHRING_PROFILE_HASH64, CHRING_PROFILE_MURMUR32, CHRING_PROFILE_FNV32, CHRING_PROFILE_FNV16,
    CHRING_PROFILE_XXH3,   CHRING_PROFILE_KETAMA,   CHRING_PROFILE_NGINX,
};

/* One random ring: members with random weights, random leases on them (placed with
 * chring_acquire_member, so loads may exceed capacities), a removed member kept alive by a
 * lease (a stale pointer), then random keys with random skip lists against the model. */
static void one_ring(chring_profile_t profile, uint64_t *rng, struct seen *seen)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    cfg.vnodes = 1 + (uint32_t)(next_random(rng) % 24);
    chring_t *r = ring_create(&cfg);
    int members = 1 + (int)(next_random(rng) % 10);
    char name[32];
    for (int i = 0; i < members; i++) {
        snprintf(name, sizeof name, "10.0.0.%d:%d", i + 1, 8000 + i);
        add_or_fail(r, name, 1 + (uint32_t)(next_random(rng) % 4), NULL);
    }

    static struct leases ls;
    ls.count = 0;
    /* A stale pointer: "gone" leased, then removed (the lease keeps it valid); sometimes a new
     * member of the same name takes its place, which the stale pointer must not match. */
    add_or_fail(r, "gone", 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *stale = chring_snap_find(s, "gone");
    cr_assert_eq(chring_acquire_member(r, s, stale, &ls.held[ls.count++]), 0);
    chring_snap_exit(r, s);
    cr_assert_eq(chring_remove(r, "gone"), 0);
    if (next_random(rng) % 2 == 0)
        add_or_fail(r, "gone", 2, NULL);

    /* Random loads. */
    s = chring_snap_enter(r);
    for (size_t i = 0; i < chring_snap_len(s); i++) {
        int count = (int)(next_random(rng) % 7);
        for (int k = 0; k < count && ls.count < LEASES_MAX / 2; k++)
            cr_assert_eq(
                chring_acquire_member(r, s, chring_snap_member(s, i), &ls.held[ls.count++]), 0);
    }
    chring_snap_exit(r, s);

    char key[32];
    for (int iter = 0; iter < 200; iter++) {
        snprintf(key, sizeof key, "key-%d-%d", iter, (int)(next_random(rng) % 1000));
        s = chring_snap_enter(r);
        const chring_member_t *skip[40];
        size_t nskip = 0;
        unsigned percent = (unsigned)(next_random(rng) % 4) * 33; /* 0, 33, 66 or 99 % */
        for (size_t i = 0; i < chring_snap_len(s); i++)
            if (next_random(rng) % 100 < percent)
                skip[nskip++] = chring_snap_member(s, i);
        if (next_random(rng) % 3 == 0) {
            skip[nskip++] = stale;
            seen->stale++;
        }
        if (nskip > 0 && next_random(rng) % 4 == 0)
            skip[nskip++] = skip[0]; /* a duplicate entry */

        struct choice want = model_choice(r, s, key, skip, nskip);
        uint64_t load_before = want.member ? chring_member_load(want.member) : 0;
        uint64_t counted_before = want.member ? counted_of(want.member) : 0;
        uint64_t cap_before = want.member ? chring_member_capacity(r, s, want.member) : 0;
        uint64_t m_before = chring_leases(r);
        chring_stats_t before, after;
        chring_stats(r, &before);

        chring_lease_t lease = {(chring_member_t *)stale, 12345, 0};
        int rc = chring_acquire_skip(r, key, strlen(key), skip, nskip, &lease);
        chring_stats(r, &after);

        cr_assert_eq(rc, want.rc, "%s: acquire_skip returned %d, the model %d", key, rc, want.rc);
        if (rc != 0) {
            seen->enoent++;
            cr_assert_null(lease.member, "%s: -ENOENT clears the lease", key);
            cr_assert_eq(lease.reserved_, 0u, "%s: -ENOENT clears the whole lease", key);
            cr_assert_eq(memcmp(&before, &after, sizeof before), 0, "%s: no counter moves", key);
            chring_snap_exit(r, s);
            continue;
        }
        seen->chosen++;
        const chring_member_t *got = lease.member;
        cr_assert_eq(got, want.member, "%s: chose %s, the model %s", key, chring_member_name(got),
                     chring_member_name(want.member));
        cr_assert(!in_skip(got, skip, nskip), "%s: the chosen member is not in skip", key);
        cr_assert_eq(chring_member_load(got), load_before + 1, "%s: its load grew by one", key);
        cr_assert_eq(chring_leases(r), m_before + 1, "%s: m grew by one", key);
        cr_assert_eq(after.saturated - before.saturated, want.saturated ? 1u : 0u,
                     "%s: saturation counted as the model says", key);
        cr_assert(counted_before < cap_before || after.saturated > before.saturated,
                  "%s: count %llu before admission is below capacity %llu", key,
                  (unsigned long long)counted_before, (unsigned long long)cap_before);
        cr_assert_eq(after.retries - before.retries, 1u, "%s: one retry counted", key);
        cr_assert_eq(after.acquires - before.acquires, 1u, "%s: one acquire counted", key);
        bool spill = got != want.owner;
        cr_assert_eq(after.spills - before.spills, spill ? 1u : 0u, "%s: spill counted", key);
        seen->spills += spill;
        seen->saturated += want.saturated;
        chring_snap_exit(r, s);

        /* Keep about half of the leases (bounded), so loads move. */
        if (ls.count < LEASES_MAX && next_random(rng) % 2 == 0)
            ls.held[ls.count++] = lease;
        else
            chring_release(r, &lease);
        if (ls.count > 1 && next_random(rng) % 4 == 0) {
            size_t victim = 1 + (size_t)(next_random(rng) % (ls.count - 1)); /* 0 is the stale's */
            chring_release(r, &ls.held[victim]);
            ls.held[victim] = ls.held[--ls.count];
        }
    }
    leases_release_all(r, &ls);
    cr_assert_eq(chring_leases(r), 0u, "every lease released");
    chring_free(&r);
}

Test(skip, choices_match_the_model_of_the_walk_over_random_rings_and_loads)
{
    uint64_t rng = UINT64_C(0x2545f4914f6cdd1d);
    struct seen seen = {0};
    for (int round = 0; round < 28; round++)
        one_ring(profiles[round % (sizeof profiles / sizeof profiles[0])], &rng, &seen);
    /* Every path of the walk was taken. */
    cr_assert_gt(seen.chosen, 1000, "choices made: %ld", seen.chosen);
    cr_assert_gt(seen.spills, 100, "spills: %ld", seen.spills);
    cr_assert_gt(seen.saturated, 10, "saturated choices: %ld", seen.saturated);
    cr_assert_gt(seen.enoent, 10, "everything skipped: %ld", seen.enoent);
    cr_assert_gt(seen.stale, 100, "stale pointers in skip: %ld", seen.stale);
}

/* A stale pointer to a removed member matches nothing, not even the new member of its name. */
Test(skip, stale_pointer_matches_nothing_not_even_its_successor)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "s", 0, 4);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *old = chring_snap_lookup(s, "k", 1);
    char name[16];
    snprintf(name, sizeof name, "%s", chring_member_name(old));
    chring_lease_t keep;
    cr_assert_eq(chring_acquire_member(r, s, old, &keep), 0);
    chring_snap_exit(r, s);
    cr_assert_eq(chring_remove(r, name), 0);
    add_or_fail(r, name, 1, NULL); /* same name, same points, a new object */
    /* The new object counts the kept lease as its own (a flap, docs/design.md §3): leases on the
     * other members make room for one more on it. */
    chring_lease_t room[8];
    s = chring_snap_enter(r);
    const chring_member_t *other = chring_snap_member(s, 0) == chring_snap_find(s, name)
                                       ? chring_snap_member(s, 1)
                                       : chring_snap_member(s, 0);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(chring_acquire_member(r, s, other, &room[i]), 0);
    chring_snap_exit(r, s);

    const chring_member_t *skip[] = {old};
    chring_lease_t lease;
    cr_assert_eq(chring_acquire_skip(r, "k", 1, skip, 1, &lease), 0);
    cr_assert_neq(lease.member, old, "the removed member is not chosen");
    cr_assert_str_eq(chring_member_name(lease.member), name, "its successor owns k and is free");
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.spills, 0u, "no spill: the key stayed on its owner");
    cr_assert_eq(st.retries, 1u);
    chring_release(r, &lease);

    /* Skipping the successor moves the key on; skipping every member gives -ENOENT. */
    s = chring_snap_enter(r);
    const chring_member_t *all[5] = {old};
    for (size_t i = 0; i < chring_snap_len(s); i++)
        all[1 + i] = chring_snap_member(s, i);
    const chring_member_t *owner = chring_snap_lookup(s, "k", 1);
    chring_snap_exit(r, s);
    const chring_member_t *just_owner[] = {owner};
    cr_assert_eq(chring_acquire_skip(r, "k", 1, just_owner, 1, &lease), 0);
    cr_assert_neq(lease.member, owner);
    chring_release(r, &lease);
    lease.member = (chring_member_t *)owner;
    lease.reserved_ = 7;
    cr_assert_eq(chring_acquire_skip(r, "k", 1, all, 5, &lease), -ENOENT);
    cr_assert_null(lease.member, "-ENOENT clears the lease");
    cr_assert_eq(lease.reserved_, 0u);
    chring_stats(r, &st);
    cr_assert_eq(st.retries, 2u, "only successful calls count as retries");
    cr_assert_eq(st.spills, 1u);
    chring_release(r, &keep);
    for (int i = 0; i < 8; i++)
        chring_release(r, &room[i]);
    chring_free(&r);
}

Test(skip, bad_arguments_and_the_empty_ring)
{
    chring_t *r = ring_create(NULL);
    chring_lease_t lease = {(chring_member_t *)&lease, 9, 0};
    cr_assert_eq(chring_acquire_skip(r, "k", 1, NULL, 0, &lease), -ENOENT, "empty ring");
    cr_assert_null(lease.member);
    add_numbered(r, "s", 0, 3);
    const chring_member_t *skip[1] = {NULL};
    cr_assert_eq(chring_acquire_skip(NULL, "k", 1, skip, 1, &lease), -EINVAL, "NULL ring");
    cr_assert_eq(chring_acquire_skip(r, "k", 1, skip, 1, NULL), -EINVAL, "NULL lease");
    lease = (chring_lease_t){(chring_member_t *)&lease, 9, 0};
    cr_assert_eq(chring_acquire_skip(r, NULL, 1, skip, 1, &lease), -EINVAL, "NULL key, len 1");
    cr_assert_null(lease.member, "the lease is cleared on -EINVAL");
    lease = (chring_lease_t){(chring_member_t *)&lease, 9, 0};
    cr_assert_eq(chring_acquire_skip(r, "k", 1, NULL, 2, &lease), -EINVAL, "NULL skip, nskip 2");
    cr_assert_null(lease.member, "the lease is cleared on -EINVAL");
    cr_assert_eq(lease.reserved_, 0u);
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.acquires + st.retries + st.leases, 0u, "failed calls count nothing");

    /* Valid edge cases: a NULL skip with nskip 0, a NULL key of length 0, a NULL entry. */
    cr_assert_eq(chring_acquire_skip(r, "k", 1, NULL, 0, &lease), 0);
    chring_release(r, &lease);
    cr_assert_eq(chring_acquire_skip(r, NULL, 0, skip, 1, &lease), 0);
    chring_release(r, &lease);
    chring_stats(r, &st);
    cr_assert_eq(st.retries, 2u);
    cr_assert_eq(st.leases, 0u);
    chring_free(&r);
}
