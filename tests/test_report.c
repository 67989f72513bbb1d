/* Reported load (docs/design.md §3, "Reported load"): chring_report_load and
 * config.report_ttl_ms, the count max(local, report + local - local_at_report), the ring's m as
 * the sum of those counts, expiry, members down and gone, and the statistics.
 * SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "chring.h"
#include "chring_test.h"

static chring_t *report_ring(uint32_t ttl_ms, int members)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.report_ttl_ms = ttl_ms;
    chring_t *r = ring_create(&cfg);
    char name[32];
    for (int i = 0; i < members; i++) {
        snprintf(name, sizeof name, "engine-%d", i);
        add_or_fail(r, name, 1, NULL);
    }
    return r;
}

/* The member of that name in a held snapshot (valid until the snapshot is put). */
static const chring_member_t *member_named(const chring_snap_t *s, const char *name)
{
    const chring_member_t *m = chring_snap_find(s, name);
    cr_assert_not_null(m, "%s is a member", name);
    return m;
}

static uint64_t counted(const chring_member_t *m)
{
    chring_member_stats_t st;
    chring_member_stats(m, &st);
    return st.counted;
}

/* A key whose owner is `name` (none found: the test fails). */
static void key_owned_by(const chring_snap_t *s, const char *name, char *key, size_t cap)
{
    for (int i = 0; i < 100000; i++) {
        key_name(key, cap, i);
        if (strcmp(chring_member_name(chring_snap_lookup(s, key, strlen(key))), name) == 0)
            return;
    }
    cr_assert_fail("no key owned by %s", name);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

Test(report, default_ttl_is_1000_ms)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cr_assert_eq(cfg.report_ttl_ms, 1000u);
    cr_assert_eq(CHRING_DEFAULT_REPORT_TTL_MS, 1000u);
}

Test(report, bad_arguments)
{
    chring_t *r = report_ring(1000, 3);
    const chring_snap_t *s = chring_snap_hold(r);
    const chring_member_t *m = member_named(s, "engine-0");
    cr_assert_eq(chring_report_load(NULL, m, 5), -EINVAL);
    cr_assert_eq(chring_report_load(r, NULL, 5), -EINVAL);
    chring_snap_put(r, s);
    chring_free(&r);
}

/* The rule: while a report counts, m's count is max(local, report + local - local_at_report),
 * the ring's m the sum of the counts, and every capacity follows. */
Test(report, count_follows_the_rule_and_m_is_the_sum)
{
    chring_t *r = report_ring(60000, 4);
    const chring_snap_t *s = chring_snap_hold(r);
    const chring_member_t *a = member_named(s, "engine-0");
    const chring_member_t *b = member_named(s, "engine-1");
    chring_lease_t la[8], lb[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(chring_acquire_member(r, s, a, &la[i]), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(chring_acquire_member(r, s, b, &lb[i]), 0);
    /* Before any report: counts are the leases, m = 6. */
    cr_assert_eq(counted(a), 3);
    cr_assert_eq(chring_member_capacity(r, s, b), chring_capacity(6, 4, 1.25));

    /* a reports 20 with 3 of ours on it: 17 come from elsewhere. */
    cr_assert_eq(chring_report_load(r, a, 20), 0);
    cr_assert_eq(counted(a), 20);
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.leases, 6);
    cr_assert_eq(st.counted, 23, "m = 20 + 3: %llu", (unsigned long long)st.counted);
    cr_assert_eq(st.reports, 1);
    cr_assert_eq(chring_member_capacity(r, s, b), chring_capacity(23, 4, 1.25));
    cr_assert_eq(chring_member_capacity(r, s, a), chring_capacity(23, 4, 1.25));

    /* Our leases on a move its count while the report counts: local - local_at_report. */
    for (int i = 3; i < 8; i++)
        cr_assert_eq(chring_acquire_member(r, s, a, &la[i]), 0);
    cr_assert_eq(counted(a), 25); /* 20 + 8 - 3 */
    for (int i = 0; i < 8; i++)
        chring_release(r, &la[i]);
    /* max(local, ...): 20 + 0 - 3 = 17 > 0. */
    cr_assert_eq(counted(a), 17);
    chring_stats(r, &st);
    cr_assert_eq(st.counted, 20);

    chring_member_stats_t ms;
    chring_member_stats(a, &ms);
    cr_assert_eq(ms.report_live, 1);
    cr_assert_eq(ms.reported, 20);
    cr_assert_eq(ms.local_at_report, 3);
    cr_assert_eq(ms.load, 0);
    cr_assert(ms.report_age_ms < 60000);

    /* A report below our own leases counts the leases: max(local, ...). */
    for (int i = 0; i < 3; i++)
        cr_assert_eq(chring_acquire_member(r, s, a, &la[i]), 0);
    cr_assert_eq(chring_report_load(r, a, 1), 0);
    cr_assert_eq(counted(a), 3);
    cr_assert_eq(chring_acquire_member(r, s, a, &la[3]), 0);
    cr_assert_eq(counted(a), 4);
    chring_stats(r, &st);
    cr_assert_eq(st.counted, st.leases);

    for (int i = 0; i < 4; i++)
        chring_release(r, &la[i]);
    for (int i = 0; i < 3; i++)
        chring_release(r, &lb[i]);
    chring_snap_put(r, s);
    chring_free(&r);
}

/* A member whose engine reports a queue loses its keys to the next member while the report
 * counts; they come back once it expires. */
Test(report, a_reported_queue_spills_and_expires)
{
    chring_t *r = report_ring(100, 4);
    const chring_snap_t *s = chring_snap_hold(r);
    char key[32];
    key_owned_by(s, "engine-2", key, sizeof key);
    const chring_member_t *owner = member_named(s, "engine-2");
    chring_lease_t l;
    cr_assert_eq(chring_acquire(r, key, strlen(key), &l), 0);
    cr_assert_eq(l.member, owner);
    chring_release(r, &l);

    /* 100 waiting on engine-2: its capacity is ceil(1.25 * 101 / 4) = 32 < 100. */
    cr_assert_eq(chring_report_load(r, owner, 100), 0);
    cr_assert_eq(chring_acquire(r, key, strlen(key), &l), 0);
    cr_assert_neq(l.member, owner, "a reported queue of 100 spills the key");
    cr_assert_eq(l.outcome, CHRING_OUTCOME_SPILLED);
    cr_assert_eq(chring_acquire_try(r, s, owner, &l) == -EBUSY, 1);
    chring_release(r, &l);

    sleep_ms(250); /* past the 100 ms the report counts */
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.counted, st.leases, "an expired report counts nothing");
    cr_assert_eq(counted(owner), 0);
    chring_member_stats_t ms;
    chring_member_stats(owner, &ms);
    cr_assert_eq(ms.report_live, 0);
    cr_assert_eq(chring_acquire(r, key, strlen(key), &l), 0);
    cr_assert_eq(l.member, owner, "back on its owner once the report expired");
    cr_assert_eq(l.outcome, CHRING_OUTCOME_OWNER);
    chring_release(r, &l);
    chring_snap_put(r, s);
    chring_free(&r);
}

/* report_ttl_ms 0: reports are ignored (the bound of 0.3). */
Test(report, ttl_zero_ignores_reports)
{
    chring_t *r = report_ring(0, 4);
    const chring_snap_t *s = chring_snap_hold(r);
    char key[32];
    key_owned_by(s, "engine-1", key, sizeof key);
    const chring_member_t *owner = member_named(s, "engine-1");
    cr_assert_eq(chring_report_load(r, owner, 1000), 0);
    chring_lease_t l;
    cr_assert_eq(chring_acquire(r, key, strlen(key), &l), 0);
    cr_assert_eq(l.member, owner);
    chring_release(r, &l);
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.reports, 0);
    cr_assert_eq(st.counted, 0);
    cr_assert_eq(counted(owner), 0);
    chring_snap_put(r, s);
    chring_free(&r);
}

/* A member down: its report is ignored, and one made before it went down is dropped. */
Test(report, down_members_reports_are_ignored)
{
    chring_t *r = report_ring(60000, 4);
    const chring_snap_t *s = chring_snap_hold(r);
    const chring_member_t *m = member_named(s, "engine-3");
    cr_assert_eq(chring_report_load(r, m, 50), 0);
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.counted, 50);
    cr_assert_eq(chring_set_down(r, "engine-3", 1), 0);
    chring_stats(r, &st);
    cr_assert_eq(st.counted, 0, "a member down: its report no longer counts");
    cr_assert_eq(chring_report_load(r, m, 70), 0);
    chring_stats(r, &st);
    cr_assert_eq(st.counted, 0, "a report of a member down is ignored");
    cr_assert_eq(st.reports, 1);
    cr_assert_eq(chring_set_down(r, "engine-3", 0), 0);
    chring_stats(r, &st);
    cr_assert_eq(st.counted, 0, "up again: no report counts until the next one");
    cr_assert_eq(counted(m), 0);
    chring_snap_put(r, s);
    chring_free(&r);
}

/* A member gone: -ENOENT for a report; one made before it left no longer counts anywhere. */
Test(report, gone_members_reports_are_ignored)
{
    chring_t *r = report_ring(60000, 4);
    const chring_snap_t *s = chring_snap_hold(r);
    const chring_member_t *m = member_named(s, "engine-1");
    const chring_member_t *other = member_named(s, "engine-0");
    cr_assert_eq(chring_report_load(r, m, 40), 0);
    cr_assert_eq(chring_member_capacity(r, s, other), chring_capacity(40, 4, 1.25));
    cr_assert_eq(chring_remove(r, "engine-1"), 0);
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.counted, 0);
    /* The held snapshot still lists it; its report counts there no more either. */
    cr_assert_eq(chring_member_capacity(r, s, other), chring_capacity(0, 4, 1.25));
    cr_assert_eq(chring_report_load(r, m, 40), -ENOENT);
    chring_stats(r, &st);
    cr_assert_eq(st.counted, 0);
    cr_assert_eq(st.reports, 1);
    chring_snap_put(r, s);
    chring_free(&r);
}

/* Placement, the digest and the diff ignore reports. */
Test(report, placement_and_digest_ignore_reports)
{
    chring_t *r = report_ring(60000, 5);
    const chring_snap_t *s = chring_snap_hold(r);
    uint64_t digest = chring_snap_digest(s);
    char **before = owners_copy(r, 500);
    for (size_t i = 0; i < chring_snap_len(s); i++)
        cr_assert_eq(chring_report_load(r, chring_snap_member(s, i), 1000 + i), 0);
    char **after = owners_copy(r, 500);
    for (int i = 0; i < 500; i++)
        cr_assert_str_eq(before[i], after[i]);
    const chring_snap_t *now = chring_snap_hold(r);
    cr_assert_eq(chring_snap_digest(now), digest);
    cr_assert_eq(chring_snap_version(now), chring_snap_version(s), "a report publishes nothing");
    owners_free(before, 500);
    owners_free(after, 500);
    chring_snap_put(r, now);
    chring_snap_put(r, s);
    chring_free(&r);
}

/* With reports on every member, single-threaded acquires never saturate and every member stays
 * within its capacity as counted (the argument of docs/design.md §3 holds with counts). */
Test(report, the_bound_holds_on_counts)
{
    chring_t *r = report_ring(60000, 6);
    const chring_snap_t *s = chring_snap_hold(r);
    static const uint64_t reported[] = {0, 40, 3, 90, 7, 15};
    for (size_t i = 0; i < 6; i++)
        cr_assert_eq(chring_report_load(r, chring_snap_member(s, i), reported[i]), 0);
    enum {
        N = 400
    };
    static chring_lease_t leases[N];
    char key[32];
    for (int i = 0; i < N; i++) {
        key_name(key, sizeof key, i % 37); /* hot keys */
        cr_assert_eq(chring_acquire(r, key, strlen(key), &leases[i]), 0);
        cr_assert_neq(leases[i].outcome, CHRING_OUTCOME_SATURATED, "acquire %d saturated", i);
        const chring_member_t *m = leases[i].member;
        chring_stats_t st;
        chring_stats(r, &st);
        /* Admitted below the capacity of the m before it: its count before the lease (count - 1,
         * a report's excess is constant) below ceil(1.25 * ((m - 1) + 1) / 6). */
        uint64_t c = counted(m), cap = chring_capacity(st.counted - 1, 6, 1.25);
        cr_assert(c - 1 < cap, "acquire %d: %s counted %llu, capacity %llu", i,
                  chring_member_name(m), (unsigned long long)c, (unsigned long long)cap);
    }
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.saturated, 0);
    cr_assert_eq(st.counted, N + 40 + 3 + 90 + 7 + 15);
    for (int i = 0; i < N; i++)
        chring_release(r, &leases[i]);
    chring_snap_put(r, s);
    chring_free(&r);
}
