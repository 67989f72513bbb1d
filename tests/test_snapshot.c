/* Snapshots (docs/design.md §4, §5): hold/put, read sections, writers inside a read section, and
 * chring_snap_moved.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

Test(snapshot, held_snapshot_answers_with_old_membership)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "h", 0, 4);
    const int keys = 3000;
    char **before = owners_copy(r, keys);
    const chring_snap_t *held = chring_snap_hold(r);
    cr_assert_not_null(held, "hold");
    uint64_t version = chring_snap_version(held);

    cr_assert_eq(chring_remove(r, "h1"), 0, "remove");
    add_or_fail(r, "h9", 2, NULL);
    cr_assert_eq(chring_set_weight(r, "h2", 3), 0, "set_weight");

    cr_assert_eq(chring_snap_check(held), 0, "held snapshot intact");
    cr_assert_eq(chring_snap_version(held), version, "version of the held snapshot");
    cr_assert_eq(chring_snap_len(held), 4u, "old member count");
    cr_assert_eq(chring_snap_points(held), 640u, "old point count");
    cr_assert_not_null(chring_snap_find(held, "h1"), "h1 still in the held snapshot");
    cr_assert_null(chring_snap_find(held, "h9"), "h9 not in the held snapshot");
    char key[32];
    for (int i = 0; i < keys; i++) {
        key_name(key, sizeof key, i);
        cr_assert_str_eq(owner_of(held, key), before[i], "key-%d in the held snapshot", i);
    }
    const chring_snap_t *now = chring_snap_enter(r);
    cr_assert_eq(chring_snap_version(now), version + 3, "three publishes since");
    cr_assert_null(chring_snap_find(now, "h1"), "h1 removed now");
    chring_snap_exit(r, now);
    chring_snap_put(r, held);
    owners_free(before, keys);
    chring_free(&r);
}

Test(snapshot, hold_twice_put_twice)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "h", 0, 2);
    const chring_snap_t *a = chring_snap_hold(r);
    const chring_snap_t *b = chring_snap_hold(r);
    cr_assert_eq(a, b, "the same current snapshot");
    cr_assert_eq(chring_remove(r, "h0"), 0, "remove");
    chring_snap_put(r, a);
    cr_assert_eq(chring_snap_check(b), 0, "still held once");
    cr_assert_str_eq(owner_of(b, "k") ? "ok" : "none", "ok", "answers lookups");
    cr_assert_eq(chring_snap_len(b), 2u, "old membership");
    chring_snap_put(r, b);
    chring_snap_put(r, NULL);
    chring_free(&r);
}

Test(snapshot, read_sections_nest)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "n", 0, 3);
    const chring_snap_t *outer = chring_snap_enter(r);
    const chring_snap_t *inner = chring_snap_enter(r);
    cr_assert_eq(outer, inner, "no publish in between");
    chring_snap_exit(r, inner);
    cr_assert_not_null(owner_of(outer, "key"), "outer section still valid");
    chring_snap_exit(r, outer);
    chring_free(&r);
}

Test(snapshot, writer_inside_read_section_does_not_block)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "n", 0, 3);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *n1 = chring_snap_find(s, "n1");
    /* Writers never wait for a grace period, so this returns inside the section. */
    cr_assert_eq(chring_remove(r, "n1"), 0, "remove inside a read section");
    add_or_fail(r, "n7", 1, NULL);
    chring_change_t batch[] = {{"n8", 1, NULL}};
    cr_assert_eq(chring_update(r, batch, 1), 0, "update inside a read section");
    cr_assert_eq(chring_snap_check(s), 0, "the section's snapshot was freed under it");
    cr_assert_eq(chring_snap_len(s), 3u, "the section's snapshot is unchanged");
    cr_assert_eq(chring_member_check(n1), 0, "removed member valid until the section ends");
    cr_assert_str_eq(chring_member_name(n1), "n1", "its name readable");
    const chring_snap_t *inner = chring_snap_enter(r);
    cr_assert_eq(chring_snap_len(inner), 4u, "a new section sees the new snapshot");
    chring_snap_exit(r, inner);
    chring_snap_exit(r, s);
    cr_assert_eq(chring_len(r), 4u, "n0, n2, n7, n8");
    chring_free(&r);
}

Test(snapshot, null_ring_gives_static_empty_snapshot)
{
    const chring_snap_t *s = chring_snap_enter(NULL);
    cr_assert_not_null(s, "never NULL");
    cr_assert_eq(chring_snap_len(s), 0u, "empty");
    cr_assert_eq(chring_snap_points(s), 0u, "empty");
    cr_assert_null(chring_snap_lookup(s, "k", 1), "no owner");
    chring_snap_exit(NULL, s);
    const chring_snap_t *h = chring_snap_hold(NULL);
    cr_assert_not_null(h, "never NULL");
    cr_assert_eq(chring_snap_len(h), 0u, "empty");
    chring_snap_put(NULL, h);
}

Test(snapshot, points_non_decreasing_and_erange_past_end)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "p", 0, 6);
    add_or_fail(r, "heavy", 3, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    size_t points = chring_snap_points(s);
    cr_assert_eq(points, 160u * 9, "6 + 3 units of weight");
    uint64_t last = 0;
    const char *last_name = "";
    size_t per_member[7] = {0};
    for (size_t i = 0; i < points; i++) {
        uint64_t pos;
        const chring_member_t *m;
        cr_assert_eq(chring_snap_point(s, i, &pos, &m), 0, "point %zu", i);
        cr_assert_geq(pos, last, "positions non-decreasing at %zu", i);
        if (i > 0 && pos == last)
            cr_assert_leq(strcmp(last_name, chring_member_name(m)), 0, "ties by name");
        last = pos;
        last_name = chring_member_name(m);
        const char *name = chring_member_name(m);
        per_member[name[0] == 'h' ? 6 : name[1] - '0']++;
    }
    for (int j = 0; j < 6; j++)
        cr_assert_eq(per_member[j], 160u, "points of p%d", j);
    cr_assert_eq(per_member[6], 480u, "points of heavy");
    cr_assert_eq(chring_snap_point(s, points, NULL, NULL), -ERANGE, "past the end");
    uint64_t pos = 12345;
    cr_assert_eq(chring_snap_point(s, points + 1, &pos, NULL), -ERANGE, "past the end");
    cr_assert_eq(chring_snap_check(s), 0, "snapshot invariants");
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* ---- snap_moved ------------------------------------------------------------------------------ */

/* A hand-made ring in units of U = 2^(bits - 8), so the ring has 256 units in every width:
 * a#0=10, b#0=30, c#0=50, a#1=60, b#1=80, c#1=95, d#0=40, d#1=200, a#2=20, a#3=70. */
struct unit_table {
    struct table_entry entries[10];
    struct table_hash table;
};

static void unit_table_init(struct unit_table *t, unsigned bits)
{
    const struct table_entry base[10] = {
        {"a#0", 10}, {"b#0", 30}, {"c#0", 50},  {"a#1", 60}, {"b#1", 80},
        {"c#1", 95}, {"d#0", 40}, {"d#1", 200}, {"a#2", 20}, {"a#3", 70},
    };
    for (int i = 0; i < 10; i++) {
        t->entries[i] = base[i];
        t->entries[i].value = base[i].value << (bits - 8);
    }
    t->table = (struct table_hash){t->entries, 10, 0};
}

static void check_moved_by_hand(unsigned bits)
{
    struct unit_table t;
    unit_table_init(&t, bits);
    chring_t *r = table_ring(&t.table, bits, 2, 1.25);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 1, NULL);
    add_or_fail(r, "c", 1, NULL);
    const chring_snap_t *abc = chring_snap_hold(r);

    /* Removing b hands (10,30] and (60,80] to c: 40 of 256 units. */
    cr_assert_eq(chring_remove(r, "b"), 0, "remove b");
    const chring_snap_t *ac = chring_snap_hold(r);
    cr_assert_float_eq(chring_snap_moved(abc, ac), 40.0 / 256, 1e-12, "remove b (%u bits)", bits);
    cr_assert_float_eq(chring_snap_moved(ac, abc), 40.0 / 256, 1e-12, "symmetric");

    /* b again: the same membership (new member object, compared by name). */
    add_or_fail(r, "b", 1, NULL);
    const chring_snap_t *abc2 = chring_snap_hold(r);
    cr_assert_float_eq(chring_snap_moved(abc, abc2), 0.0, 1e-15, "same membership");

    /* d at 40 and 200 takes (30,40] from c and (95,200] from a: 115 units. */
    add_or_fail(r, "d", 1, NULL);
    const chring_snap_t *abcd = chring_snap_hold(r);
    cr_assert_float_eq(chring_snap_moved(abc2, abcd), 115.0 / 256, 1e-12, "add d");
    /* {a, c} against {a, b, c, d}: (10,30] b/c, (30,40] d/c, (60,80] b/c, (95,200] d/a. */
    cr_assert_float_eq(chring_snap_moved(ac, abcd), 155.0 / 256, 1e-12, "two changes");

    /* a to weight 2 (a#2 at 20, a#3 at 70) takes (10,20] and (60,70] from b: 20 units. */
    cr_assert_eq(chring_remove(r, "d"), 0, "remove d");
    cr_assert_eq(chring_set_weight(r, "a", 2), 0, "grow a");
    const chring_snap_t *grown = chring_snap_hold(r);
    cr_assert_float_eq(chring_snap_moved(abc, grown), 20.0 / 256, 1e-12, "grow a");

    cr_assert_float_eq(chring_snap_moved(abc, abc), 0.0, 0.0, "identical snapshots");
    chring_snap_put(r, abc);
    chring_snap_put(r, ac);
    chring_snap_put(r, abc2);
    chring_snap_put(r, abcd);
    chring_snap_put(r, grown);
    chring_free(&r);
}

Test(snap_moved, exact_on_hand_made_ring_64_bits)
{
    check_moved_by_hand(64);
}

Test(snap_moved, exact_on_hand_made_ring_32_bits)
{
    check_moved_by_hand(32);
}

Test(snap_moved, exact_on_hand_made_ring_16_bits)
{
    check_moved_by_hand(16);
}

Test(snap_moved, worked_example_remove_b_is_40_positions)
{
    /* Unscaled: b owns (10,30] and (60,80] of 2^64 positions. */
    chring_t *r = worked_ring("abc", 1.25);
    const chring_snap_t *before = chring_snap_hold(r);
    cr_assert_eq(chring_remove(r, "b"), 0, "remove");
    const chring_snap_t *after = chring_snap_hold(r);
    double expect = 40.0 / 18446744073709551616.0;
    cr_assert_float_eq(chring_snap_moved(before, after), expect, expect * 1e-9, "40 / 2^64");
    chring_snap_put(r, before);
    chring_snap_put(r, after);
    chring_free(&r);
}

Test(snap_moved, empty_snapshots)
{
    chring_t *r = ring_create(NULL);
    const chring_snap_t *empty = chring_snap_hold(r);
    add_or_fail(r, "a", 1, NULL);
    const chring_snap_t *one = chring_snap_hold(r);
    cr_assert_float_eq(chring_snap_moved(empty, empty), 0.0, 0.0, "both empty");
    cr_assert_float_eq(chring_snap_moved(empty, one), 1.0, 0.0, "one empty");
    cr_assert_float_eq(chring_snap_moved(one, empty), 1.0, 0.0, "one empty");
    chring_snap_put(r, empty);
    chring_snap_put(r, one);
    chring_free(&r);
}

Test(snap_moved, different_profiles_give_nan)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    chring_t *r1 = ring_create(&cfg);
    cfg.profile = CHRING_PROFILE_XXH3;
    chring_t *r2 = ring_create(&cfg);
    add_or_fail(r1, "a", 1, NULL);
    add_or_fail(r2, "a", 1, NULL);
    const chring_snap_t *s1 = chring_snap_hold(r1);
    const chring_snap_t *s2 = chring_snap_hold(r2);
    cr_assert(isnan(chring_snap_moved(s1, s2)), "hash64 against xxh3");
    cr_assert(isnan(chring_snap_moved(s1, NULL)), "against NULL");
    cr_assert(isnan(chring_snap_moved(NULL, s2)), "NULL against");
    chring_snap_put(r1, s1);
    chring_snap_put(r2, s2);
    chring_free(&r1);
    chring_free(&r2);
}

Test(snap_moved, four_to_five_members_moves_about_a_fifth)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "backend-", 0, 4);
    const chring_snap_t *four = chring_snap_hold(r);
    add_or_fail(r, "backend-4", 1, NULL);
    const chring_snap_t *five = chring_snap_hold(r);
    double moved = chring_snap_moved(four, five);
    cr_assert(moved > 0.1 && moved < 0.3, "moved %f", moved);
    /* The new member's share is exactly the moved fraction: all moved keys go to it. */
    double share = chring_member_share(five, chring_snap_find(five, "backend-4"));
    cr_assert_float_eq(moved, share, 1e-9, "moved = share of the new member");

    const int keys = 20000;
    int ring_moved = 0, mod_moved = 0;
    char key[32];
    for (int i = 0; i < keys; i++) {
        key_name(key, sizeof key, i);
        size_t len = strlen(key);
        ring_moved += strcmp(chring_member_name(chring_snap_lookup(four, key, len)),
                             chring_member_name(chring_snap_lookup(five, key, len))) != 0;
        uint64_t h = chring_hash64(key, len);
        mod_moved += h % 4 != h % 5;
    }
    double empirical = (double)ring_moved / keys;
    cr_assert(fabs(empirical - moved) <= 0.02, "empirical %f against snap_moved %f", empirical,
              moved);
    /* hash mod N, for comparison (docs/design.md §10): about 4/5 move. */
    double mod_fraction = (double)mod_moved / keys;
    cr_assert(mod_fraction > 0.7 && mod_fraction < 0.9, "mod N moved %f", mod_fraction);
    chring_snap_put(r, four);
    chring_snap_put(r, five);
    chring_free(&r);
}

Test(snapshot, hold_and_leases_inside_a_read_section)
{
    chring_t *r = ring_create(NULL);
    add_numbered(r, "n", 0, 3);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_snap_t *held = chring_snap_hold(r);
    cr_assert_eq(held, s, "hold inside a section takes the current snapshot");
    chring_lease_t lease;
    cr_assert_eq(chring_acquire(r, "key", 3, &lease), 0, "acquire inside a section");
    cr_assert_eq(lease.member, chring_snap_lookup(s, "key", 3), "unloaded: the owner");
    chring_snap_exit(r, s);
    cr_assert_eq(chring_remove(r, chring_member_name(lease.member)), 0, "remove the owner");
    /* Outside any section: the hold keeps the snapshot, the lease keeps its member. */
    cr_assert_eq(chring_snap_check(held), 0, "held snapshot valid");
    cr_assert_eq(chring_snap_len(held), 3u, "old membership");
    cr_assert_eq(chring_member_check(lease.member), 0, "leased member valid");
    s = chring_snap_enter(r);
    chring_release(r, &lease);
    chring_snap_put(r, held);
    chring_snap_exit(r, s);
    cr_assert_eq(chring_leases(r), 0u, "released inside a section");
    chring_free(&r);
}

/* The first interval [0, q] holds q + 1 keys and the wrap interval (last, 2^64) none when a point
 * sits at the top position: only the keys 0..5 change owner here (a at 5 is removed; b at
 * 2^64 - 1 owns everything after), so exactly 6 of 2^64 keys move. */
Test(snap_moved, counts_key_zero_and_an_empty_wrap_interval_exactly)
{
    const struct table_entry entries[] = {{"a#0", 5}, {"b#0", UINT64_MAX}};
    const struct table_hash table = {entries, 2, 0};
    chring_t *r = table_ring(&table, 64, 1, 1.25);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 1, NULL);
    const chring_snap_t *ab = chring_snap_hold(r);
    cr_assert_eq(chring_remove(r, "a"), 0, "remove a");
    const chring_snap_t *b = chring_snap_hold(r);
    const double expect = 6.0 / 18446744073709551616.0; /* exact in double */
    cr_assert_eq(chring_snap_moved(ab, b), expect, "keys 0..5 moved: %a", chring_snap_moved(ab, b));
    cr_assert_eq(chring_snap_moved(b, ab), expect, "symmetric");
    chring_snap_put(r, ab);
    chring_snap_put(r, b);
    chring_free(&r);
}

Test(snap_moved, custom_rings_of_different_widths_give_nan)
{
    /* Same profile (custom), same hash, same membership, but 64 against 32 bits: the positions
     * are not comparable, so there is no moved fraction. */
    chring_t *r64 = table_ring(&worked_table, 64, 2, 1.25);
    chring_t *r32 = table_ring(&worked_table, 32, 2, 1.25);
    add_or_fail(r64, "a", 1, NULL);
    add_or_fail(r32, "a", 1, NULL);
    const chring_snap_t *s64 = chring_snap_hold(r64);
    const chring_snap_t *s32 = chring_snap_hold(r32);
    cr_assert(isnan(chring_snap_moved(s64, s32)), "64 against 32 bits");
    cr_assert(isnan(chring_snap_moved(s32, s64)), "32 against 64 bits");
    cr_assert_eq(chring_snap_moved(s32, s32), 0.0, "one width: comparable");
    chring_snap_put(r64, s64);
    chring_snap_put(r32, s32);
    chring_free(&r64);
    chring_free(&r32);
}
