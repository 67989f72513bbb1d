/* The membership chain (docs/design.md §4, "References"): a member keeps its one snapshot
 * reference until every snapshot published while it was listed is destroyed, and is retired
 * exactly once after that.  Grace periods end on the ring's reclaimer thread, so the tests wait
 * for the retirements they expect by polling (at most 20 s each; nothing is timed), and assert
 * what must not have happened at the moment a later event proves the grace periods before it
 * have ended.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

#include <time.h>

/* What config.retire handed back: a count per member, the udata being an index. */
#define MEMBERS 64
static int retired[MEMBERS];

static void on_retire(void *udata, void *ctx)
{
    (void)ctx;
    if (udata != NULL)
        __atomic_add_fetch(&retired[(intptr_t)udata - 1], 1, __ATOMIC_SEQ_CST);
}

static int retired_count(int i)
{
    return __atomic_load_n(&retired[i], __ATOMIC_SEQ_CST);
}

static void *tag(int i)
{
    return (void *)(intptr_t)(i + 1);
}

static void name_of(char *buf, size_t cap, int i)
{
    snprintf(buf, cap, "member-%02d", i);
}

static chring_t *ring_with_retire(void)
{
    memset(retired, 0, sizeof retired);
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 16;
    cfg.retire = on_retire;
    return ring_create(&cfg);
}

static void add(chring_t *r, int i)
{
    char name[32];
    name_of(name, sizeof name, i);
    cr_assert_eq(chring_add(r, name, 1, tag(i)), 0, "add %s", name);
}

static void del(chring_t *r, int i)
{
    char name[32];
    name_of(name, sizeof name, i);
    cr_assert_eq(chring_remove(r, name), 0, "remove %s", name);
}

/* Polls until member i is retired (true), for at most 20 s. */
static bool wait_retired(int i)
{
    for (int k = 0; k < 2000 && retired_count(i) == 0; k++) {
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return retired_count(i) != 0;
}

/* x leaves before a snapshot is held, a after: x is retired once the snapshots that listed it
 * are gone; a not while the held snapshot that lists it is out, and once it is put. */
Test(chain, a_member_goes_when_the_snapshots_that_listed_it_are_gone, .timeout = 60)
{
    chring_t *r = ring_with_retire();
    for (int i = 0; i < 3; i++)
        add(r, i); /* a = 0, b = 1, x = 2 */
    del(r, 2);
    const chring_snap_t *held = chring_snap_hold(r); /* lists a and b */
    del(r, 0);
    cr_assert(wait_retired(2), "x, listed only by destroyed snapshots, was never retired");
    cr_assert_eq(retired_count(0), 0, "a was retired while a held snapshot lists it");
    char name[32];
    name_of(name, sizeof name, 0);
    const chring_member_t *a = chring_snap_find(held, name);
    cr_assert_not_null(a, "the held snapshot lists a");
    cr_assert_eq(chring_member_check(a), 0, "a is intact while held");
    chring_snap_put(r, held);
    cr_assert(wait_retired(0), "a was never retired after the put");
    cr_assert_eq(retired_count(1), 0, "b is still a member");
    chring_free(&r);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(retired_count(i), 1, "member %d retired %d times", i, retired_count(i));
}

/* A snapshot held across many publishes keeps every member it lists intact; the members that
 * came and went meanwhile are retired once it is put (docs/design.md §4: a snapshot held from
 * before a member joined keeps it until put), and every member exactly once by chring_free. */
Test(chain, a_held_snapshot_keeps_its_members_through_many_publishes, .timeout = 60)
{
    chring_t *r = ring_with_retire();
    for (int i = 0; i < 8; i++)
        add(r, i);
    const chring_snap_t *held = chring_snap_hold(r);
    for (int i = 8; i < MEMBERS; i++) {
        add(r, i);
        del(r, i - 8); /* the held snapshot's members leave first, then the later ones */
    }
    for (size_t j = 0; j < chring_snap_len(held); j++)
        cr_assert_eq(chring_member_check(chring_snap_member(held, j)), 0,
                     "member %zu of the held snapshot is intact", j);
    chring_snap_put(r, held);
    for (int i = 0; i < MEMBERS - 8; i++)
        cr_assert(wait_retired(i), "member %d left and was never retired", i);
    for (int i = MEMBERS - 8; i < MEMBERS; i++)
        cr_assert_eq(retired_count(i), 0, "member %d is still in the ring", i);
    chring_free(&r);
    for (int i = 0; i < MEMBERS; i++)
        cr_assert_eq(retired_count(i), 1, "member %d retired %d times", i, retired_count(i));
}

/* A batch that replaces the whole membership (a sync) records every member that leaves in its
 * chain node: all are retired, once, and the ring goes on. */
Test(chain, a_sync_that_replaces_every_member_retires_them_all, .timeout = 60)
{
    chring_t *r = ring_with_retire();
    chring_change_t feed[MEMBERS];
    char names[MEMBERS][32];
    for (int i = 0; i < MEMBERS; i++) {
        name_of(names[i], sizeof names[i], i);
        feed[i] = (chring_change_t){names[i], 1, tag(i)};
    }
    cr_assert_eq(chring_sync(r, feed, MEMBERS / 2), 0);
    cr_assert_eq(chring_sync(r, feed + MEMBERS / 2, MEMBERS / 2), 0);
    for (int i = 0; i < MEMBERS / 2; i++)
        cr_assert(wait_retired(i), "member %d of the first sync was never retired", i);
    cr_assert_eq(chring_len(r), (size_t)MEMBERS / 2);
    chring_free(&r);
    for (int i = 0; i < MEMBERS; i++)
        cr_assert_eq(retired_count(i), 1, "member %d retired %d times", i, retired_count(i));
}
