/* The bad-input catalogue of docs/design.md §6: every public function answers bad input with a
 * negative errno (or NULL / 0 where it has no error channel), never a crash, never a half-applied
 * change.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

static char name255[CHRING_NAME_MAX + 1];
static char name256[CHRING_NAME_MAX + 2];

static void make_names(void)
{
    memset(name255, 'x', CHRING_NAME_MAX);
    name255[CHRING_NAME_MAX] = 0;
    memset(name256, 'y', CHRING_NAME_MAX + 1);
    name256[CHRING_NAME_MAX + 1] = 0;
}

/* A ring with members a, b (weight 1) and a snapshot of owners to compare against. */
struct fixture {
    chring_t *r;
    uint64_t version;
    char **owners;
};

static void fixture_init(struct fixture *f)
{
    make_names();
    f->r = ring_create(NULL);
    add_or_fail(f->r, "a", 1, NULL);
    add_or_fail(f->r, "b", 1, NULL);
    f->version = ring_version(f->r);
    f->owners = owners_copy(f->r, 500);
}

/* Nothing changed since fixture_init. */
static void fixture_unchanged(struct fixture *f, const char *what)
{
    cr_assert_eq(ring_version(f->r), f->version, "%s published", what);
    cr_assert_eq(chring_len(f->r), 2u, "%s changed the member count", what);
    char **now = owners_copy(f->r, 500);
    for (int i = 0; i < 500; i++)
        cr_assert_str_eq(now[i], f->owners[i], "%s moved key-%d", what, i);
    owners_free(now, 500);
}

static void fixture_fini(struct fixture *f)
{
    owners_free(f->owners, 500);
    chring_free(&f->r);
}

Test(badinput, new_rejects_bad_config)
{
    chring_config_t cfg;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(NULL, NULL), -EINVAL, "NULL out");

    chring_config_default(&cfg);
    cfg.profile = (chring_profile_t)42;
    cr_assert_eq(chring_new(&r, &cfg), -EINVAL, "unknown profile");
    cfg.profile = (chring_profile_t)-1;
    cr_assert_eq(chring_new(&r, &cfg), -EINVAL, "negative profile");

    chring_config_default(&cfg);
    cfg.vnodes = 0;
    cr_assert_eq(chring_new(&r, &cfg), -EINVAL, "vnodes 0");

    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_CUSTOM;
    cfg.hash_bits = 64;
    cr_assert_eq(chring_new(&r, &cfg), -EINVAL, "custom without a function");

    const unsigned bad_bits[] = {0, 8, 1, 24, 48, 63, 65, 128};
    for (size_t i = 0; i < sizeof bad_bits / sizeof bad_bits[0]; i++) {
        chring_config_default(&cfg);
        cfg.profile = CHRING_PROFILE_CUSTOM;
        cfg.hash = table_hash_fn;
        cfg.hash_ctx = (void *)&worked_table;
        cfg.hash_bits = bad_bits[i];
        cr_assert_eq(chring_new(&r, &cfg), -EINVAL, "custom width %u", bad_bits[i]);
    }
    cr_assert_null(r, "no ring was returned");

    const unsigned good_bits[] = {16, 32, 64};
    for (size_t i = 0; i < 3; i++) {
        chring_config_default(&cfg);
        cfg.profile = CHRING_PROFILE_CUSTOM;
        cfg.hash = table_hash_fn;
        cfg.hash_ctx = (void *)&worked_table;
        cfg.hash_bits = good_bits[i];
        cr_assert_eq(chring_new(&r, &cfg), 0, "custom width %u", good_bits[i]);
        chring_free(&r);
    }
}

Test(badinput, new_accepts_bad_balance_as_one)
{
    const double cs[] = {NAN, INFINITY, -INFINITY, -1.0, 0.0, 0.5};
    for (size_t i = 0; i < 6; i++) {
        chring_config_t cfg;
        chring_config_default(&cfg);
        cfg.balance = cs[i];
        chring_t *r = NULL;
        cr_assert_eq(chring_new(&r, &cfg), 0, "balance %g acts as 1", cs[i]);
        add_numbered(r, "n", 0, 4);
        chring_lease_t leases[3];
        for (int k = 0; k < 3; k++)
            cr_assert_eq(chring_acquire(r, "k", 1, &leases[k]), 0, "acquire");
        const chring_snap_t *s = chring_snap_enter(r);
        const chring_member_t *m = chring_snap_member(s, 0);
        /* Three leases on four members: ceil(1 * 4 / 4) = 1 with c = 1 (1.25 would give 2). */
        cr_assert_eq(chring_member_capacity(r, s, m), 1u, "capacity with balance %g", cs[i]);
        chring_snap_exit(r, s);
        for (int k = 0; k < 3; k++)
            chring_release(r, &leases[k]);
        chring_free(&r);
    }
}

Test(badinput, add_rejects_bad_arguments)
{
    struct fixture f;
    fixture_init(&f);
    cr_assert_eq(chring_add(NULL, "c", 1, NULL), -EINVAL, "NULL ring");
    cr_assert_eq(chring_add(f.r, NULL, 1, NULL), -EINVAL, "NULL name");
    cr_assert_eq(chring_add(f.r, "", 1, NULL), -EINVAL, "empty name");
    cr_assert_eq(chring_add(f.r, "c", 0, NULL), -EINVAL, "weight 0");
    cr_assert_eq(chring_add(f.r, "a", 0, NULL), -EINVAL, "weight 0 for a member");
    cr_assert_eq(chring_add(f.r, name256, 1, NULL), -ENAMETOOLONG, "256-byte name");
    /* 160 * 104858 = 16777280 > 2^24 points. */
    cr_assert_eq(chring_add(f.r, "c", 104858, NULL), -E2BIG, "too many points");
    cr_assert_eq(chring_add(f.r, "a", 104858, NULL), -E2BIG, "too many points for a member");
    cr_assert_eq(chring_add(f.r, "c", UINT32_MAX, NULL), -E2BIG, "weight overflow");
    fixture_unchanged(&f, "failed adds");
    cr_assert_eq(chring_add(f.r, name255, 1, NULL), 0, "255-byte name is fine");
    const chring_snap_t *s = chring_snap_enter(f.r);
    const chring_member_t *m = chring_snap_find(s, name255);
    cr_assert_not_null(m, "the 255-byte member");
    cr_assert_eq(strlen(chring_member_name(m)), 255u, "its full name");
    chring_snap_exit(f.r, s);
    fixture_fini(&f);
}

Test(badinput, points_per_member_limit_uses_vnodes_times_weight)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 1u << 20;
    chring_t *r = ring_create(&cfg);
    cr_assert_eq(chring_add(r, "big", 17, NULL), -E2BIG, "2^20 * 17 > 2^24");
    cr_assert_eq(chring_add(r, "big", 4294967295u, NULL), -E2BIG, "2^20 * (2^32 - 1)");
    cr_assert_eq(chring_len(r), 0u, "nothing added");
    cr_assert_eq(ring_version(r), 0u, "nothing published");
    chring_free(&r);

    cfg.vnodes = CHRING_POINTS_MAX + 1;
    r = NULL;
    int rc = chring_new(&r, &cfg);
    if (rc == 0) {
        cr_assert_eq(chring_add(r, "big", 1, NULL), -E2BIG, "vnodes above 2^24");
        chring_free(&r);
    } else {
        cr_assert_eq(rc, -E2BIG, "vnodes above 2^24 rejected at chring_new with %d", rc);
    }
}

Test(badinput, member_with_exactly_points_max_points_is_accepted)
{
    /* The limit is inclusive: a member above CHRING_POINTS_MAX is rejected (just above), one with
     * exactly 2^24 = 2^20 * 16 points is a member like any other. */
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 1u << 20;
    chring_t *r = ring_create(&cfg);
    cr_assert_eq(chring_add(r, "big", 16, NULL), 0, "2^20 * 16 = 2^24 points");
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_points(s), (size_t)CHRING_POINTS_MAX, "every point placed");
    cr_assert_eq(chring_snap_member_points(s, chring_snap_find(s, "big")),
                 (size_t)CHRING_POINTS_MAX);
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(badinput, remove_rejects_bad_arguments)
{
    struct fixture f;
    fixture_init(&f);
    cr_assert_eq(chring_remove(NULL, "a"), -EINVAL, "NULL ring");
    cr_assert_eq(chring_remove(f.r, NULL), -EINVAL, "NULL name");
    cr_assert_eq(chring_remove(f.r, ""), -EINVAL, "empty name");
    cr_assert_eq(chring_remove(f.r, name256), -ENAMETOOLONG, "long name");
    cr_assert_eq(chring_remove(f.r, "c"), -ENOENT, "non-member");
    cr_assert_eq(chring_remove(f.r, name255), -ENOENT, "255-byte non-member");
    cr_assert_eq(chring_remove(f.r, "A"), -ENOENT, "names are case-sensitive bytes");
    fixture_unchanged(&f, "failed removes");
    fixture_fini(&f);
}

Test(badinput, set_weight_rejects_bad_arguments)
{
    struct fixture f;
    fixture_init(&f);
    cr_assert_eq(chring_set_weight(NULL, "a", 2), -EINVAL, "NULL ring");
    cr_assert_eq(chring_set_weight(f.r, NULL, 2), -EINVAL, "NULL name");
    cr_assert_eq(chring_set_weight(f.r, "", 2), -EINVAL, "empty name");
    cr_assert_eq(chring_set_weight(f.r, "a", 0), -EINVAL, "weight 0");
    cr_assert_eq(chring_set_weight(f.r, name256, 2), -ENAMETOOLONG, "long name");
    cr_assert_eq(chring_set_weight(f.r, "c", 2), -ENOENT, "non-member");
    cr_assert_eq(chring_set_weight(f.r, "a", 104858), -E2BIG, "too many points");
    fixture_unchanged(&f, "failed set_weights");
    fixture_fini(&f);
}

Test(badinput, update_and_sync_reject_bad_arguments)
{
    struct fixture f;
    fixture_init(&f);
    chring_change_t one[] = {{"c", 1, NULL}};
    cr_assert_eq(chring_update(NULL, one, 1), -EINVAL, "update NULL ring");
    cr_assert_eq(chring_sync(NULL, one, 1), -EINVAL, "sync NULL ring");
    cr_assert_eq(chring_update(f.r, NULL, 3), -EINVAL, "update NULL changes");
    chring_change_t dup[] = {{"c", 1, NULL}, {"d", 1, NULL}, {"c", 1, NULL}};
    cr_assert_eq(chring_update(f.r, dup, 3), -EINVAL, "update duplicate");
    cr_assert_eq(chring_sync(f.r, dup, 3), -EINVAL, "sync duplicate");
    chring_change_t longname[] = {{"c", 1, NULL}, {name256, 1, NULL}};
    cr_assert_eq(chring_update(f.r, longname, 2), -ENAMETOOLONG, "update long name");
    cr_assert_eq(chring_sync(f.r, longname, 2), -ENAMETOOLONG, "sync long name");
    chring_change_t big[] = {{"c", 1, NULL}, {"d", 200000, NULL}};
    cr_assert_eq(chring_update(f.r, big, 2), -E2BIG, "update too many points");
    cr_assert_eq(chring_sync(f.r, big, 2), -E2BIG, "sync too many points");
    chring_change_t removal[] = {{"c", 0, NULL}};
    cr_assert_eq(chring_update(f.r, removal, 1), -ENOENT, "update removes non-member");
    chring_change_t nullname[] = {{NULL, 1, NULL}};
    cr_assert_eq(chring_sync(f.r, nullname, 1), -EINVAL, "sync NULL name");
    fixture_unchanged(&f, "failed batches");
    fixture_fini(&f);
}

Test(badinput, reader_functions_accept_null)
{
    struct fixture f;
    fixture_init(&f);
    const chring_snap_t *s = chring_snap_enter(f.r);
    const chring_member_t *out[2];
    cr_assert_null(chring_snap_lookup(NULL, "k", 1), "lookup NULL s");
    cr_assert_null(chring_snap_lookup(s, NULL, 1), "lookup NULL key with len > 0");
    cr_assert_eq(chring_snap_hash(NULL, "k", 1), 0u, "hash NULL s");
    cr_assert_null(chring_snap_lookup_hash(NULL, 5), "lookup_hash NULL s");
    cr_assert_eq(chring_snap_lookup_n(NULL, "k", 1, out, 2), 0u, "lookup_n NULL s");
    cr_assert_eq(chring_snap_lookup_n(s, "k", 1, NULL, 2), 0u, "lookup_n NULL out");
    cr_assert_eq(chring_snap_lookup_n(s, NULL, 1, out, 2), 0u, "lookup_n NULL key, len > 0");
    cr_assert_eq(chring_snap_version(NULL), 0u, "version NULL");
    cr_assert_eq(chring_snap_len(NULL), 0u, "len NULL");
    cr_assert_eq(chring_snap_points(NULL), 0u, "points NULL");
    cr_assert_null(chring_snap_member(NULL, 0), "member NULL");
    cr_assert_null(chring_snap_member(s, 2), "member past the end");
    cr_assert_null(chring_snap_member(s, (size_t)-1), "member far past the end");
    cr_assert_null(chring_snap_find(NULL, "a"), "find NULL s");
    cr_assert_null(chring_snap_find(s, NULL), "find NULL name");
    cr_assert_null(chring_snap_find(s, ""), "find empty name");
    cr_assert_eq(chring_snap_point(NULL, 0, NULL, NULL), -EINVAL, "point NULL s");
    cr_assert_eq(chring_snap_weight(NULL, chring_snap_member(s, 0)), 0u, "weight NULL s");
    cr_assert_eq(chring_snap_weight(s, NULL), 0u, "weight NULL m");
    cr_assert_eq(chring_snap_member_points(s, NULL), 0u, "member_points NULL m");
    cr_assert_eq(chring_snap_member_points(NULL, chring_snap_member(s, 0)), 0u, "NULL s");
    cr_assert_eq(chring_member_weight(NULL), 0u, "member_weight NULL");
    cr_assert_eq(chring_member_load(NULL), 0u, "member_load NULL");
    cr_assert_float_eq(chring_member_share(NULL, chring_snap_member(s, 0)), 0.0, 0.0, "share");
    cr_assert_float_eq(chring_member_share(s, NULL), 0.0, 0.0, "share NULL m");
    cr_assert_eq(chring_snap_check(NULL), -EINVAL, "check NULL");
    cr_assert_eq(chring_snap_check(s), 0, "check a good snapshot");
    cr_assert_eq(chring_member_check(NULL), -EINVAL, "member_check NULL");
    cr_assert_eq(chring_member_check(chring_snap_member(s, 0)), 0, "member_check good");
    cr_assert_eq(chring_member_capacity(f.r, s, NULL), 0u, "capacity NULL m");
    cr_assert_eq(chring_member_capacity(NULL, s, chring_snap_member(s, 0)), 0u, "NULL r");
    cr_assert_eq(chring_member_capacity(f.r, NULL, chring_snap_member(s, 0)), 0u, "NULL s");
    chring_member_stats_t ms;
    memset(&ms, 0xff, sizeof ms);
    chring_member_stats(NULL, &ms);
    cr_assert(ms.load == 0 && ms.acquires == 0 && ms.primary == 0 && ms.spilled_in == 0,
              "member_stats NULL gives zeros");
    chring_member_stats(chring_snap_member(s, 0), NULL);
    chring_snap_exit(f.r, s);
    chring_snap_exit(NULL, s);
    chring_stats_t st;
    memset(&st, 0xff, sizeof st);
    chring_stats(NULL, &st);
    cr_assert(st.version == 0 && st.publishes == 0 && st.members == 0 && st.points == 0 &&
                  st.leases == 0 && st.acquires == 0 && st.spills == 0 && st.saturated == 0,
              "stats NULL gives zeros");
    chring_stats(f.r, NULL);
    cr_assert_eq(chring_len(NULL), 0u, "len NULL ring");
    cr_assert_eq(chring_leases(NULL), 0u, "leases NULL ring");
    fixture_unchanged(&f, "reader calls");
    fixture_fini(&f);
}

Test(badinput, member_in_other_snapshot_has_no_share_or_points)
{
    chring_t *r1 = ring_create(NULL);
    chring_t *r2 = ring_create(NULL);
    add_or_fail(r1, "a", 1, NULL);
    add_or_fail(r2, "a", 1, NULL);
    const chring_snap_t *s1 = chring_snap_enter(r1);
    const chring_snap_t *s2 = chring_snap_enter(r2);
    const chring_member_t *foreign = chring_snap_find(s2, "a");
    cr_assert_float_eq(chring_member_share(s1, foreign), 0.0, 0.0, "not in s1");
    cr_assert_eq(chring_snap_member_points(s1, foreign), 0u, "not in s1");
    cr_assert_eq(chring_snap_weight(s1, foreign), 0u, "not in s1");
    cr_assert_eq(chring_member_capacity(r1, s1, foreign), 0u, "not in s1");
    chring_snap_exit(r2, s2);
    chring_snap_exit(r1, s1);
    chring_free(&r1);
    chring_free(&r2);
}

Test(badinput, lookup_name_and_acquire_reject_bad_arguments)
{
    struct fixture f;
    fixture_init(&f);
    char buf[16];
    cr_assert_eq(chring_lookup_name(NULL, "k", 1, buf, sizeof buf), -EINVAL, "NULL ring");
    cr_assert_eq(chring_lookup_name(f.r, "k", 1, NULL, 16), -EINVAL, "NULL buf");
    cr_assert_eq(chring_lookup_name(f.r, NULL, 1, buf, sizeof buf), -EINVAL, "NULL key");
    cr_assert_eq(chring_lookup_name(f.r, NULL, 0, buf, sizeof buf), 1, "empty key is valid");
    chring_lease_t lease;
    memset(&lease, 0, sizeof lease);
    cr_assert_eq(chring_acquire(NULL, "k", 1, &lease), -EINVAL, "acquire NULL ring");
    cr_assert_eq(chring_acquire(f.r, "k", 1, NULL), -EINVAL, "acquire NULL lease");
    cr_assert_eq(chring_acquire(f.r, NULL, 1, &lease), -EINVAL, "acquire NULL key");
    cr_assert_eq(chring_leases(f.r), 0u, "no lease taken");
    chring_release(f.r, NULL);
    chring_release(NULL, &lease);
    chring_release(f.r, &lease);
    cr_assert_eq(chring_leases(f.r), 0u, "still none");
    fixture_unchanged(&f, "failed acquires");
    fixture_fini(&f);
}

Test(badinput, names_are_bytes)
{
    /* Any byte but NUL may be in a name: spaces, '#', high bytes. */
    chring_t *r = ring_create(NULL);
    const char *const names[] = {"with space", "hash#0", "\x01\x02", "\xff\xfe\xfd", "-"};
    for (size_t i = 0; i < 5; i++)
        add_or_fail(r, names[i], 1, NULL);
    cr_assert_eq(chring_len(r), 5u, "five members");
    cr_assert_eq(chring_remove(r, "hash#0"), 0, "remove by bytes");
    cr_assert_eq(chring_len(r), 4u, "four members");
    chring_free(&r);
}

Test(badinput, set_allocator_requires_both_functions)
{
    chring_allocator_t half = {NULL, NULL, NULL};
    half.alloc = NULL;
    half.free = NULL;
    cr_assert_eq(chring_set_allocator(&half), 0, "both NULL: the default");
    chring_allocator_t only_free = {NULL, NULL, NULL};
    only_free.free = (void (*)(void *, void *))0x1;
    cr_assert_eq(chring_set_allocator(&only_free), -EINVAL, "free without alloc");
    chring_allocator_t only_alloc = {NULL, NULL, NULL};
    only_alloc.alloc = (void *(*)(size_t, void *))0x1;
    cr_assert_eq(chring_set_allocator(&only_alloc), -EINVAL, "alloc without free");
    cr_assert_eq(chring_set_allocator(NULL), 0, "NULL restores malloc/free");
    /* The library still works with the defaults. */
    chring_t *r = ring_create(NULL);
    add_or_fail(r, "a", 1, NULL);
    chring_free(&r);
}

Test(badinput, ring_total_above_2_31_points_rejected)
{
    /* 129 members of 2^24 points each is 2^31 + 2^24 points: -E2BIG, found before the points
     * are allocated (a batch, so no member has to exist first). */
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = CHRING_POINTS_MAX;
    chring_t *r = ring_create(&cfg);
    enum {
        COUNT = 129
    };
    static char names[COUNT][16];
    chring_change_t batch[COUNT];
    for (int i = 0; i < COUNT; i++) {
        snprintf(names[i], sizeof names[i], "big%d", i);
        batch[i] = (chring_change_t){names[i], 1, NULL};
    }
    cr_assert_eq(chring_update(r, batch, COUNT), -E2BIG, "update above 2^31 points");
    cr_assert_eq(chring_sync(r, batch, COUNT), -E2BIG, "sync above 2^31 points");
    cr_assert_eq(chring_len(r), 0u, "nothing added");
    cr_assert_eq(ring_version(r), 0u, "nothing published");
    chring_free(&r);
}

/* A custom hash that must never be handed a NULL key with a length. */
static unsigned null_key_calls;

static uint64_t null_checking_hash(const void *data, size_t len, void *ctx)
{
    (void)ctx;
    if (data == NULL && len > 0)
        null_key_calls++;
    return ref_hash64(data, len);
}

Test(badinput, snap_hash_of_null_key_with_length_is_zero_on_every_profile)
{
    const chring_profile_t profiles[] = {CHRING_PROFILE_HASH64, CHRING_PROFILE_MURMUR32,
                                         CHRING_PROFILE_FNV32,  CHRING_PROFILE_FNV16,
                                         CHRING_PROFILE_XXH3,   CHRING_PROFILE_KETAMA,
                                         CHRING_PROFILE_NGINX,  CHRING_PROFILE_CUSTOM};
    for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; i++) {
        chring_config_t cfg;
        chring_config_default(&cfg);
        cfg.profile = profiles[i];
        cfg.vnodes = 4;
        if (profiles[i] == CHRING_PROFILE_CUSTOM) {
            cfg.hash = null_checking_hash;
            cfg.hash_bits = 64;
        }
        chring_t *r = ring_create(&cfg);
        add_or_fail(r, "10.0.0.1:11211", 1, NULL);
        add_or_fail(r, "10.0.0.2:11211", 2, NULL);
        const chring_snap_t *s = chring_snap_enter(r);
        const char *name = chring_profile_name(profiles[i]);
        cr_assert_gt(chring_snap_points(s), 0u, "%s: a real snapshot", name);
        cr_assert_eq(chring_snap_hash(s, NULL, 1), 0u, "%s: NULL key, length 1", name);
        cr_assert_eq(chring_snap_hash(s, NULL, 4096), 0u, "%s: NULL key, length 4096", name);
        /* A NULL key of length 0 is the empty key. */
        cr_assert_eq(chring_snap_hash(s, NULL, 0), chring_snap_hash(s, "", 0),
                     "%s: NULL key, length 0", name);
        chring_snap_exit(r, s);
        chring_free(&r);
    }
    cr_assert_eq(null_key_calls, 0u, "the custom hash was handed a NULL key with a length");
}
