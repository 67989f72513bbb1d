/* Membership changes (docs/design.md §1, §4, §5): weights, batches (chring_update), chring_sync and
 * the retire callback.
 *
 * SPDX-License-Identifier: MIT
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include "chring_test.h"

#include <time.h>

#define KEYS 10000

Test(weights, growing_moves_keys_only_to_that_member)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "w", 0, 6);
    char **before = owners_copy(r, KEYS);
    cr_assert_eq(chring_set_weight(r, "w2", 3), 0, "grow");
    char **after = owners_copy(r, KEYS);
    int moved = 0;
    for (int i = 0; i < KEYS; i++) {
        if (strcmp(before[i], after[i]) != 0) {
            cr_assert_str_eq(after[i], "w2", "key-%d moved to %s, not to the grown member", i,
                             after[i]);
            moved++;
        }
        if (strcmp(before[i], "w2") == 0)
            cr_assert_str_eq(after[i], "w2", "key-%d left the grown member", i);
    }
    cr_assert_gt(moved, KEYS / 20, "growing 1 -> 3 of 6 moved only %d keys", moved);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_member_points(s, chring_snap_find(s, "w2")), 480u, "3 * 160 points");
    cr_assert_eq(chring_snap_points(s), 1280u, "5 * 160 + 480");
    chring_snap_exit(r, s);
    owners_free(before, KEYS);
    owners_free(after, KEYS);
    chring_free(&r);
}

Test(weights, shrinking_moves_keys_only_from_that_member)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "w", 0, 5);
    add_or_fail(r, "heavy", 4, NULL);
    char **before = owners_copy(r, KEYS);
    cr_assert_eq(chring_set_weight(r, "heavy", 1), 0, "shrink");
    char **after = owners_copy(r, KEYS);
    int moved = 0;
    for (int i = 0; i < KEYS; i++) {
        if (strcmp(before[i], after[i]) != 0) {
            cr_assert_str_eq(before[i], "heavy", "key-%d moved from %s", i, before[i]);
            moved++;
        }
    }
    cr_assert_gt(moved, KEYS / 20, "shrinking 4 -> 1 moved only %d keys", moved);
    owners_free(before, KEYS);
    owners_free(after, KEYS);
    chring_free(&r);
}

Test(weights, weight_change_keeps_prefix_of_points)
{
    /* Growing adds points at the end of the index range: with the table hash, p#0 and p#1 stay,
     * p#2 appears; shrinking drops from the end. */
    static const struct table_entry entries[] = {
        {"p#0", 100}, {"p#1", 300}, {"p#2", 500}, {"q#0", 200}, {"q#1", 400}, {"q#2", 600},
    };
    static const struct table_hash table = {entries, 6, 0};
    chring_t *r = table_ring(&table, 64, 2, 1.25);
    add_or_fail(r, "p", 1, NULL);
    add_or_fail(r, "q", 1, NULL);
    cr_assert_eq(chring_set_weight(r, "p", 2), 0, "grow p to 4 points");
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_points(s), 6u, "p: 4 points (p#3 falls back to 0), q: 2");
    uint64_t pos;
    const chring_member_t *m;
    const uint64_t positions[] = {0, 100, 200, 300, 400, 500};
    const char *const owners[] = {"p", "p", "q", "p", "q", "p"};
    for (size_t i = 0; i < 6; i++) {
        cr_assert_eq(chring_snap_point(s, i, &pos, &m), 0, "point");
        cr_assert_eq(pos, positions[i], "position %zu", i);
        cr_assert_str_eq(chring_member_name(m), owners[i], "owner %zu", i);
    }
    chring_snap_exit(r, s);
    cr_assert_eq(chring_set_weight(r, "q", 1), 0, "same weight");
    cr_assert_eq(chring_set_weight(r, "p", 1), 0, "shrink p back");
    s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_points(s), 4u, "p#2 and p#3 dropped");
    cr_assert_eq(chring_snap_point(s, 0, &pos, &m), 0, "point");
    cr_assert_eq(pos, 100u, "p#0 kept");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(weights, add_with_another_weight_acts_as_set_weight)
{
    int tag1, tag2;
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "m", 1, &tag1);
    cr_assert_eq(chring_add(r, "m", 2, &tag2), 0, "add with weight 2");
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_find(s, "m");
    cr_assert_eq(chring_snap_member_points(s, m), 320u, "2 * 160");
    cr_assert_eq(chring_member_weight(m), 2u, "weight");
    cr_assert_eq(chring_member_udata(m), &tag1, "udata never replaced");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(weights, snapshot_weight_is_the_snapshots_own)
{
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "m", 1, NULL);
    const chring_snap_t *old = chring_snap_hold(r);
    cr_assert_eq(chring_set_weight(r, "m", 3), 0, "set_weight");
    const chring_member_t *m = chring_snap_find(old, "m");
    cr_assert_eq(chring_snap_weight(old, m), 1u, "the old snapshot's weight");
    cr_assert_eq(chring_snap_member_points(old, m), 160u, "the old snapshot's points");
    cr_assert_eq(chring_member_weight(m), 3u, "the member's current weight");
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_find(s, "m"), m, "the member object is kept across publishes");
    cr_assert_eq(chring_snap_weight(s, m), 3u, "the new snapshot's weight");
    chring_snap_exit(r, s);
    chring_snap_put(r, old);
    chring_free(&r);
}

/* ---- batches ---------------------------------------------------------------------------- */

static void assert_members(chring_t *r, const char *const *names, const uint32_t *weights,
                           size_t count)
{
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_len(s), count, "member count");
    for (size_t i = 0; i < count; i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        cr_assert_not_null(m, "member %zu", i);
        cr_assert_str_eq(chring_member_name(m), names[i], "member %zu", i);
        cr_assert_eq(chring_snap_weight(s, m), weights[i], "weight of %s", names[i]);
    }
    chring_snap_exit(r, s);
}

Test(update, batch_applies_all_with_one_version_step)
{
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 1, NULL);
    add_or_fail(r, "c", 1, NULL);
    uint64_t v = ring_version(r);
    int tag;
    chring_change_t batch[] = {{"d", 2, &tag}, {"a", 0, NULL}, {"b", 3, NULL}};
    cr_assert_eq(chring_update(r, batch, 3), 0, "update");
    cr_assert_eq(ring_version(r), v + 1, "one publish");
    const char *const names[] = {"b", "c", "d"};
    const uint32_t weights[] = {3, 1, 2};
    assert_members(r, names, weights, 3);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_member_udata(chring_snap_find(s, "d")), &tag, "udata of a new member");
    cr_assert_eq(chring_snap_points(s), 960u, "(3 + 1 + 2) * 160");
    chring_snap_exit(r, s);
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.publishes, 4u, "three adds and one batch");
    chring_free(&r);
}

static void assert_batch_fails(chring_change_t *batch, size_t n, int expect)
{
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 2, NULL);
    char **before = owners_copy(r, 2000);
    uint64_t v = ring_version(r);
    cr_assert_eq(chring_update(r, batch, n), expect, "the batch fails");
    cr_assert_eq(ring_version(r), v, "nothing published");
    const char *const names[] = {"a", "b"};
    const uint32_t weights[] = {1, 2};
    assert_members(r, names, weights, 2);
    char **after = owners_copy(r, 2000);
    for (int i = 0; i < 2000; i++)
        cr_assert_str_eq(after[i], before[i], "key-%d moved", i);
    owners_free(before, 2000);
    owners_free(after, 2000);
    chring_free(&r);
}

Test(update, batch_removing_a_non_member_changes_nothing)
{
    chring_change_t batch[] = {{"c", 1, NULL}, {"b", 0, NULL}, {"zz", 0, NULL}, {"a", 3, NULL}};
    assert_batch_fails(batch, 4, -ENOENT);
}

Test(update, batch_with_duplicate_name_changes_nothing)
{
    chring_change_t batch[] = {{"c", 1, NULL}, {"d", 1, NULL}, {"c", 2, NULL}};
    assert_batch_fails(batch, 3, -EINVAL);
    chring_change_t batch2[] = {{"a", 0, NULL}, {"a", 1, NULL}};
    assert_batch_fails(batch2, 2, -EINVAL);
}

Test(update, large_batch_with_duplicate_name_changes_nothing)
{
    /* Above 64 changes the repeated name is found in the sorted copy, not by a pairwise scan:
     * 70 new names and "n5" again at the end. */
    static char names[71][8];
    chring_change_t batch[71];
    for (int i = 0; i < 70; i++) {
        snprintf(names[i], sizeof names[i], "n%d", i);
        batch[i] = (chring_change_t){names[i], 1, NULL};
    }
    batch[70] = (chring_change_t){"n5", 2, NULL};
    assert_batch_fails(batch, 71, -EINVAL);
}

Test(update, batch_with_empty_or_null_name_changes_nothing)
{
    chring_change_t batch[] = {{"c", 1, NULL}, {"", 1, NULL}};
    assert_batch_fails(batch, 2, -EINVAL);
    chring_change_t batch2[] = {{"c", 1, NULL}, {NULL, 1, NULL}};
    assert_batch_fails(batch2, 2, -EINVAL);
}

Test(update, batch_with_long_name_or_too_many_points_changes_nothing)
{
    char longname[CHRING_NAME_MAX + 2];
    memset(longname, 'x', CHRING_NAME_MAX + 1);
    longname[CHRING_NAME_MAX + 1] = 0;
    chring_change_t batch[] = {{"c", 1, NULL}, {longname, 1, NULL}};
    assert_batch_fails(batch, 2, -ENAMETOOLONG);
    /* 160 * 104858 > 2^24 points for one member. */
    chring_change_t batch2[] = {{"c", 1, NULL}, {"d", 104858, NULL}};
    assert_batch_fails(batch2, 2, -E2BIG);
}

Test(update, batch_that_changes_nothing_publishes_nothing)
{
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 2, NULL);
    uint64_t v = ring_version(r);
    chring_change_t batch[] = {{"a", 1, NULL}, {"b", 2, NULL}};
    cr_assert_eq(chring_update(r, batch, 2), 0, "no-op batch");
    cr_assert_eq(chring_update(r, batch, 0), 0, "empty batch");
    cr_assert_eq(chring_update(r, NULL, 0), 0, "NULL empty batch");
    cr_assert_eq(ring_version(r), v, "nothing published");
    cr_assert_eq(chring_update(r, NULL, 1), -EINVAL, "NULL changes with n > 0");
    chring_free(&r);
}

Test(update, batch_can_remove_every_member)
{
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 1, NULL);
    chring_change_t batch[] = {{"a", 0, NULL}, {"b", 0, NULL}};
    cr_assert_eq(chring_update(r, batch, 2), 0, "remove all");
    cr_assert_eq(chring_len(r), 0u, "empty");
    cr_assert_eq(ring_version(r), 3u, "one publish for the batch");
    chring_free(&r);
}

/* ---- sync -------------------------------------------------------------------------------- */

Test(sync, makes_membership_exact_in_one_step)
{
    int ta, tb, tc, tnew;
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, &ta);
    add_or_fail(r, "b", 1, &tb);
    add_or_fail(r, "c", 2, &tc);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *obj_b = chring_snap_find(s, "b");
    const chring_member_t *obj_c = chring_snap_find(s, "c");
    chring_snap_exit(r, s);
    uint64_t v = ring_version(r);

    int other;
    chring_change_t feed[] = {{"d", 1, &tnew}, {"c", 3, &other}, {"b", 1, &other}};
    cr_assert_eq(chring_sync(r, feed, 3), 0, "sync");
    cr_assert_eq(ring_version(r), v + 1, "one publish");
    const char *const names[] = {"b", "c", "d"};
    const uint32_t weights[] = {1, 3, 1};
    assert_members(r, names, weights, 3);
    s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_find(s, "b"), obj_b, "b keeps its object");
    cr_assert_eq(chring_snap_find(s, "c"), obj_c, "c keeps its object");
    cr_assert_eq(chring_member_udata(obj_b), &tb, "b keeps its udata");
    cr_assert_eq(chring_member_udata(obj_c), &tc, "c keeps its udata");
    cr_assert_eq(chring_member_udata(chring_snap_find(s, "d")), &tnew, "d's udata");
    cr_assert_null(chring_snap_find(s, "a"), "a removed");
    chring_snap_exit(r, s);

    /* The same set again: nothing changes, nothing is published. */
    cr_assert_eq(chring_sync(r, feed, 3), 0, "same feed");
    cr_assert_eq(ring_version(r), v + 1, "no publish");
    chring_free(&r);
}

Test(sync, weight_zero_rejected_and_nothing_changes)
{
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 1, NULL);
    uint64_t v = ring_version(r);
    chring_change_t feed[] = {{"c", 1, NULL}, {"a", 0, NULL}};
    cr_assert_eq(chring_sync(r, feed, 2), -EINVAL, "weight 0 in sync");
    chring_change_t dup[] = {{"c", 1, NULL}, {"c", 1, NULL}};
    cr_assert_eq(chring_sync(r, dup, 2), -EINVAL, "duplicate in sync");
    chring_change_t empty[] = {{"c", 1, NULL}, {"", 1, NULL}};
    cr_assert_eq(chring_sync(r, empty, 2), -EINVAL, "empty name in sync");
    cr_assert_eq(chring_sync(r, NULL, 2), -EINVAL, "NULL members with n > 0");
    cr_assert_eq(ring_version(r), v, "nothing published");
    const char *const names[] = {"a", "b"};
    const uint32_t weights[] = {1, 1};
    assert_members(r, names, weights, 2);
    chring_free(&r);
}

Test(sync, empty_set_empties_the_ring)
{
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 1, NULL);
    cr_assert_eq(chring_sync(r, NULL, 0), 0, "sync to nothing");
    cr_assert_eq(chring_len(r), 0u, "empty");
    cr_assert_eq(ring_version(r), 3u, "one publish");
    cr_assert_eq(chring_sync(r, NULL, 0), 0, "again");
    cr_assert_eq(ring_version(r), 3u, "no publish");
    chring_free(&r);
}

/* ---- retire ------------------------------------------------------------------------------- */

struct retire_log {
    int count[9];
    int wrong_ctx;
    int unknown;
};

static struct retire_log *retire_ctx_expected;

static void record_retire(void *udata, void *ctx)
{
    struct retire_log *log = ctx;
    if (log != retire_ctx_expected) {
        __atomic_add_fetch(&retire_ctx_expected->wrong_ctx, 1, __ATOMIC_SEQ_CST);
        return;
    }
    uintptr_t id = (uintptr_t)udata;
    if (id < 1 || id > 9)
        __atomic_add_fetch(&log->unknown, 1, __ATOMIC_SEQ_CST);
    else
        __atomic_add_fetch(&log->count[id - 1], 1, __ATOMIC_SEQ_CST);
}

static chring_t *retire_ring(struct retire_log *log)
{
    memset(log, 0, sizeof *log);
    retire_ctx_expected = log;
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 16;
    cfg.retire = record_retire;
    cfg.retire_ctx = log;
    return ring_create(&cfg);
}

static int retired(struct retire_log *log, int id)
{
    return __atomic_load_n(&log->count[id - 1], __ATOMIC_SEQ_CST);
}

Test(retire, every_member_retired_exactly_once)
{
    struct retire_log log;
    chring_t *r = retire_ring(&log);
    const char *const names[] = {"m1", "m2", "m3", "m4", "m5", "m6"};
    for (uintptr_t i = 0; i < 6; i++)
        add_or_fail(r, names[i], 1, (void *)(i + 1));
    cr_assert_eq(chring_remove(r, "m2"), 0, "remove");
    cr_assert_eq(chring_set_weight(r, "m3", 2), 0, "weight change retires nothing");
    chring_change_t batch[] = {{"m4", 0, NULL}, {"m7", 1, (void *)(uintptr_t)7}};
    cr_assert_eq(chring_update(r, batch, 2), 0, "batch");
    chring_change_t feed[] = {{"m1", 1, NULL}, {"m3", 2, NULL}, {"m8", 1, (void *)(uintptr_t)8}};
    cr_assert_eq(chring_sync(r, feed, 3), 0, "sync removes m5, m6, m7");
    /* A repeated add of an existing member with other udata keeps the member's own and hands the
     * new one back before it returns (docs/design.md §4: the udata rule). */
    cr_assert_eq(chring_add(r, "m1", 1, (void *)(uintptr_t)9), 0, "repeated add");
    cr_assert_eq(retired(&log, 9), 1, "the udata not kept came back before the call returned");
    cr_assert_eq(chring_member_udata(chring_snap_find(chring_snap_enter(r), "m1")), (void *)1,
                 "the member keeps its own udata");
    chring_snap_exit(r, NULL);
    for (int id = 1; id <= 9; id++)
        cr_assert_leq(retired(&log, id), 1, "member %d retired twice", id);
    for (int id = 1; id <= 8; id++) {
        if (id == 1 || id == 3 || id == 8)
            cr_assert_eq(retired(&log, id), 0, "member %d still in the ring was retired", id);
    }
    chring_free(&r);
    for (int id = 1; id <= 9; id++)
        cr_assert_eq(log.count[id - 1], 1, "member %d retired %d times", id, log.count[id - 1]);
    cr_assert_eq(log.unknown, 0, "retire with unknown udata");
    cr_assert_eq(log.wrong_ctx, 0, "retire with the wrong ctx");
}

Test(retire, removed_member_not_retired_while_snapshot_held)
{
    struct retire_log log;
    chring_t *r = retire_ring(&log);
    add_or_fail(r, "m1", 1, (void *)(uintptr_t)1);
    add_or_fail(r, "m2", 1, (void *)(uintptr_t)2);
    const chring_snap_t *held = chring_snap_hold(r);
    cr_assert_eq(chring_remove(r, "m1"), 0, "remove");
    /* Several more publishes give the library every chance to run grace periods. */
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(chring_set_weight(r, "m2", (uint32_t)(2 + i % 2)), 0, "publish");
    }
    const chring_member_t *m1 = chring_snap_find(held, "m1");
    cr_assert_not_null(m1, "held snapshot still has m1");
    cr_assert_eq(chring_member_check(m1), 0, "m1 still valid");
    cr_assert_str_eq(chring_member_name(m1), "m1", "m1's name readable");
    cr_assert_eq(retired(&log, 1), 0, "m1 retired while a held snapshot contains it");
    chring_snap_put(r, held);
    chring_free(&r);
    cr_assert_eq(log.count[0], 1, "m1 retired once");
    cr_assert_eq(log.count[1], 1, "m2 retired once");
}

Test(retire, member_removed_and_readded_is_two_members)
{
    struct retire_log log;
    chring_t *r = retire_ring(&log);
    add_or_fail(r, "x", 1, (void *)(uintptr_t)1);
    cr_assert_eq(chring_remove(r, "x"), 0, "remove");
    add_or_fail(r, "x", 1, (void *)(uintptr_t)2);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_member_udata(chring_snap_find(s, "x")), (void *)(uintptr_t)2,
                 "the new member has the new udata");
    chring_snap_exit(r, s);
    chring_free(&r);
    cr_assert_eq(log.count[0], 1, "old x retired once");
    cr_assert_eq(log.count[1], 1, "new x retired once");
}

Test(retire, free_without_retire_callback_is_fine)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "n", 0, 3);
    cr_assert_eq(chring_remove(r, "n1"), 0, "remove");
    chring_free(&r);
    cr_assert_null(r, "cleared");
    chring_free(&r);
    chring_free(NULL);
}

Test(update, udata_used_only_for_new_members)
{
    int old_tag, new_tag;
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, &old_tag);
    chring_change_t batch[] = {{"a", 2, &new_tag}, {"b", 1, &new_tag}};
    cr_assert_eq(chring_update(r, batch, 2), 0, "update");
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_member_udata(chring_snap_find(s, "a")), &old_tag, "a keeps its udata");
    cr_assert_eq(chring_member_udata(chring_snap_find(s, "b")), &new_tag, "b gets the new one");
    cr_assert_eq(chring_snap_weight(s, chring_snap_find(s, "a")), 2u, "a re-weighted");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(retire, removed_member_is_retired_without_chring_free)
{
    /* Liveness, not timing: a removed member with no lease and no holder must be retired once
     * a grace period has passed, not only at chring_free (a long-lived ring would leak).  The
     * bound is generous (20 s); liburcu's grace periods take milliseconds. */
    struct retire_log log;
    chring_t *r = retire_ring(&log);
    add_or_fail(r, "m1", 1, (void *)(uintptr_t)1);
    add_or_fail(r, "m2", 1, (void *)(uintptr_t)2);
    cr_assert_eq(chring_remove(r, "m1"), 0, "remove");
    for (int i = 0; i < 2000 && retired(&log, 1) == 0; i++) {
        cr_assert_eq(chring_set_weight(r, "m2", (uint32_t)(1 + i % 2)), 0, "publish");
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    cr_assert_eq(retired(&log, 1), 1, "m1 not retired after its grace period");
    cr_assert_eq(retired(&log, 2), 0, "m2 is still a member");
    chring_free(&r);
    cr_assert_eq(log.count[0], 1, "m1 once");
    cr_assert_eq(log.count[1], 1, "m2 once");
}
