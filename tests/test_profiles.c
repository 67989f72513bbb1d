/* Placement profiles (docs/design.md §2, §10): each profile's hash, width and labels, the fnv16
 * lesson and its skip rule, and custom widths.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

#include <xxhash.h>

static chring_t *profile_ring(chring_profile_t profile, uint32_t vnodes)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    cfg.vnodes = vnodes;
    return ring_create(&cfg);
}

typedef uint64_t (*ref_hash)(const char *text);

static uint64_t ref_profile_hash64(const char *t)
{
    return ref_hash64(t, strlen(t));
}
static uint64_t ref_profile_murmur32(const char *t)
{
    /* chring_murmur3_32 itself is checked against the published vectors in test_hash.c. */
    return chring_murmur3_32(t, strlen(t), 0);
}
static uint64_t ref_profile_fnv32(const char *t)
{
    return ref_fnv1a32(t, strlen(t));
}
static uint64_t ref_profile_xxh3(const char *t)
{
    return XXH3_64bits(t, strlen(t));
}
static uint64_t ref_profile_fnv16(const char *t)
{
    return ref_fnv1a32(t, strlen(t)) & 0xffffu;
}

static const char *const probe_keys[] = {"",       "a",     "test",       "Hello, world!",
                                         "orange", "apple", "user:12345", "\xff\xfe"};
#define PROBE_COUNT (sizeof probe_keys / sizeof probe_keys[0])

/* Checks snap_hash, the width, and that the points are exactly the labels' hashes. */
static void check_profile(chring_profile_t profile, unsigned bits, ref_hash ref)
{
    chring_t *r = profile_ring(profile, 8);
    const char *const names[] = {"cache-a", "cache-b", "cache-c"};
    for (int i = 0; i < 3; i++)
        add_or_fail(r, names[i], 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_profile(s), profile, "profile");
    cr_assert_eq(chring_snap_hash_bits(s), bits, "width");
    for (size_t i = 0; i < PROBE_COUNT; i++)
        cr_assert_eq(chring_snap_hash(s, probe_keys[i], strlen(probe_keys[i])), ref(probe_keys[i]),
                     "hash of probe %zu", i);
    /* Every point is the hash of "<name>#<i>" (fnv16 labels differ and are checked apart). */
    cr_assert_eq(chring_snap_points(s), 24u, "3 x 8 points");
    int found[3][8] = {{0}};
    uint64_t last = 0;
    for (size_t p = 0; p < 24; p++) {
        uint64_t pos;
        const chring_member_t *m;
        cr_assert_eq(chring_snap_point(s, p, &pos, &m), 0, "point %zu", p);
        cr_assert_geq(pos, last, "points ordered");
        last = pos;
        int n = chring_member_name(m)[6] - 'a';
        int hit = 0;
        for (int i = 0; i < 8 && !hit; i++) {
            char label[32];
            snprintf(label, sizeof label, "%s#%d", names[n], i);
            if (!found[n][i] && ref(label) == pos) {
                found[n][i] = 1;
                hit = 1;
            }
        }
        cr_assert(hit, "point %zu at %llu is no label of %s", p, (unsigned long long)pos, names[n]);
    }
    /* Lookups agree with a linear scan over the points. */
    for (size_t i = 0; i < PROBE_COUNT; i++) {
        uint64_t h = ref(probe_keys[i]);
        const chring_member_t *expect = NULL;
        for (size_t p = 0; p < 24 && !expect; p++) {
            uint64_t pos;
            const chring_member_t *m;
            chring_snap_point(s, p, &pos, &m);
            if (pos >= h)
                expect = m;
        }
        if (!expect)
            chring_snap_point(s, 0, NULL, &expect);
        cr_assert_eq(chring_snap_lookup(s, probe_keys[i], strlen(probe_keys[i])), expect,
                     "owner of probe %zu", i);
    }
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(profiles, hash64_is_mix64_of_fnv1a64)
{
    check_profile(CHRING_PROFILE_HASH64, 64, ref_profile_hash64);
}

Test(profiles, murmur32_hash_vectors_through_snap_hash)
{
    chring_t *r = profile_ring(CHRING_PROFILE_MURMUR32, 16);
    add_or_fail(r, "x", 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_hash(s, "", 0), 0u, "HASH \"\"");
    cr_assert_eq(chring_snap_hash(s, "test", 4), 3127628307u, "HASH test");
    cr_assert_eq(chring_snap_hash(s, "Hello, world!", 13), 3224780355u, "HASH Hello, world!");
    chring_snap_exit(r, s);
    chring_free(&r);
    check_profile(CHRING_PROFILE_MURMUR32, 32, ref_profile_murmur32);
}

Test(profiles, murmur32_hash_vectors_on_an_empty_ring)
{
    chring_t *r = profile_ring(CHRING_PROFILE_MURMUR32, 16);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_hash(s, "test", 4), 3127628307u, "HASH test with no members");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(profiles, fnv32_is_fnv1a32)
{
    check_profile(CHRING_PROFILE_FNV32, 32, ref_profile_fnv32);
}

Test(profiles, xxh3_is_xxh3_64bits)
{
    check_profile(CHRING_PROFILE_XXH3, 64, ref_profile_xxh3);
}

Test(profiles, fnv16_hash_is_fnv1a32_low_16_bits)
{
    chring_t *r = profile_ring(CHRING_PROFILE_FNV16, 1);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_hash_bits(s), 16u, "width");
    for (size_t i = 0; i < PROBE_COUNT; i++)
        cr_assert_eq(chring_snap_hash(s, probe_keys[i], strlen(probe_keys[i])),
                     ref_profile_fnv16(probe_keys[i]), "hash of probe %zu", i);
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* The virtual-nodes lesson: alpha, beta, gamma at weight 2, V = 1, added in that order. */
static chring_t *lesson_ring(void)
{
    chring_t *r = profile_ring(CHRING_PROFILE_FNV16, 1);
    add_or_fail(r, "alpha", 2, NULL);
    add_or_fail(r, "beta", 2, NULL);
    add_or_fail(r, "gamma", 2, NULL);
    return r;
}

Test(profiles, fnv16_lesson_example)
{
    chring_t *r = lesson_ring();
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_hash(s, "orange", 6), 29675u, "Pos(orange)");
    const char *orange = owner_of(s, "orange");
    cr_assert_not_null(orange, "orange has an owner");
    cr_assert_str_eq(orange, "alpha", "orange -> 1-alpha at 39205");
    cr_assert_str_eq(owner_of(s, "apple"), "beta", "apple -> beta");
    /* Labels: point 0 is the bare name, point 1 is "1-<name>". */
    const struct {
        uint64_t pos;
        const char *name;
    } ring[] = {{5130, "gamma"},  {19609, "beta"},  {28075, "alpha"},
                {39205, "alpha"}, {53800, "gamma"}, {58567, "beta"}};
    cr_assert_eq(chring_snap_points(s), 6u, "six points");
    for (size_t i = 0; i < 6; i++) {
        uint64_t pos;
        const chring_member_t *m;
        cr_assert_eq(chring_snap_point(s, i, &pos, &m), 0, "point %zu", i);
        cr_assert_eq(pos, ring[i].pos, "position of point %zu", i);
        cr_assert_str_eq(chring_member_name(m), ring[i].name, "owner of point %zu", i);
    }
    cr_assert_eq(ref_profile_fnv16("1-alpha"), 39205u, "the lesson's 1-alpha");
    cr_assert_eq(ref_profile_fnv16("1-beta"), 19609u, "the lesson's 1-beta");
    cr_assert_eq(ref_profile_fnv16("1-gamma"), 53800u, "the lesson's 1-gamma");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(profiles, fnv16_one_position_ring_gives_apple_to_alpha)
{
    /* The lesson's previous chapter: weight 1, so point 0 only (the bare name). */
    chring_t *r = profile_ring(CHRING_PROFILE_FNV16, 1);
    add_or_fail(r, "alpha", 1, NULL);
    add_or_fail(r, "beta", 1, NULL);
    add_or_fail(r, "gamma", 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_points(s), 3u, "three points");
    cr_assert_str_eq(owner_of(s, "apple"), "alpha", "apple (10943) -> alpha (28075)");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(profiles, fnv16_labels_with_many_vnodes)
{
    chring_t *r = profile_ring(CHRING_PROFILE_FNV16, 12);
    add_or_fail(r, "srv", 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    /* Expected: the distinct positions of "srv", "1-srv", ..., "11-srv". */
    uint64_t expect[12];
    size_t count = 0;
    for (int i = 0; i < 12; i++) {
        char label[16];
        if (i == 0)
            snprintf(label, sizeof label, "srv");
        else
            snprintf(label, sizeof label, "%d-srv", i);
        uint64_t pos = ref_profile_fnv16(label);
        int dup = 0;
        for (size_t j = 0; j < count; j++)
            dup |= expect[j] == pos;
        if (!dup)
            expect[count++] = pos;
    }
    cr_assert_eq(chring_snap_points(s), count, "distinct positions");
    for (size_t p = 0; p < count; p++) {
        uint64_t pos;
        cr_assert_eq(chring_snap_point(s, p, &pos, NULL), 0, "point");
        int hit = 0;
        for (size_t j = 0; j < count; j++)
            hit |= expect[j] == pos;
        cr_assert(hit, "point at %llu is no label of srv", (unsigned long long)pos);
    }
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* Finds two names "n<i>", "n<j>" whose point-0 labels collide in 16 bits while their "1-"
 * labels take two other, distinct positions. */
static void find_collision(char *first, char *second, size_t cap)
{
    static uint32_t seen[65536];
    memset(seen, 0, sizeof seen);
    char name[32];
    for (uint32_t i = 1; i < 1000000; i++) {
        snprintf(name, sizeof name, "n%u", (unsigned)i);
        uint64_t pos = ref_profile_fnv16(name);
        if (seen[pos]) {
            char other[32], l1[40], l2[40];
            snprintf(other, sizeof other, "n%u", (unsigned)seen[pos]);
            snprintf(l1, sizeof l1, "1-%s", other);
            snprintf(l2, sizeof l2, "1-%s", name);
            uint64_t p1 = ref_profile_fnv16(l1), p2 = ref_profile_fnv16(l2);
            if (p1 != p2 && p1 != pos && p2 != pos) {
                snprintf(first, cap, "%s", other);
                snprintf(second, cap, "%s", name);
                return;
            }
        } else {
            seen[pos] = i;
        }
    }
    cr_assert_fail("no fnv16 collision found");
}

/* The owner of position `pos` (which must be a point) in the current snapshot. */
static const char *holder_of(chring_t *r, uint64_t pos, char *buf, size_t cap)
{
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_lookup_hash(s, pos);
    cr_assert_not_null(m, "owner");
    snprintf(buf, cap, "%s", chring_member_name(m));
    size_t at_pos = 0;
    for (size_t i = 0; i < chring_snap_points(s); i++) {
        uint64_t p;
        chring_snap_point(s, i, &p, NULL);
        at_pos += p == pos;
    }
    cr_assert_eq(at_pos, 1u, "a position is held by exactly one point under fnv16");
    chring_snap_exit(r, s);
    return buf;
}

Test(profiles, fnv16_earlier_joiner_keeps_contested_position)
{
    char first[32], second[32], held[32];
    find_collision(first, second, sizeof first);
    uint64_t contested = ref_profile_fnv16(first);

    chring_t *r1 = profile_ring(CHRING_PROFILE_FNV16, 1);
    add_or_fail(r1, first, 2, NULL);
    add_or_fail(r1, second, 2, NULL);
    cr_assert_str_eq(holder_of(r1, contested, held, sizeof held), first, "first joined first");
    const chring_snap_t *s = chring_snap_enter(r1);
    cr_assert_eq(chring_snap_points(s), 3u, "the later joiner's colliding point is skipped");
    cr_assert_eq(chring_snap_member_points(s, chring_snap_find(s, second)), 1u, "one point left");
    chring_snap_exit(r1, s);

    chring_t *r2 = profile_ring(CHRING_PROFILE_FNV16, 1);
    add_or_fail(r2, second, 2, NULL);
    add_or_fail(r2, first, 2, NULL);
    cr_assert_str_eq(holder_of(r2, contested, held, sizeof held), second, "second joined first");

    /* After weight changes, the earlier joiner still keeps it. */
    cr_assert_eq(chring_set_weight(r1, second, 3), 0, "grow the later joiner");
    cr_assert_str_eq(holder_of(r1, contested, held, sizeof held), first, "after growth");
    cr_assert_eq(chring_set_weight(r1, first, 3), 0, "grow the earlier joiner");
    cr_assert_str_eq(holder_of(r1, contested, held, sizeof held), first, "after growth");
    cr_assert_eq(chring_set_weight(r1, first, 1), 0, "shrink the earlier joiner");
    cr_assert_str_eq(holder_of(r1, contested, held, sizeof held), first, "after shrinking");
    cr_assert_eq(chring_set_weight(r2, first, 4), 0, "grow the later joiner");
    cr_assert_str_eq(holder_of(r2, contested, held, sizeof held), second, "after growth");
    chring_free(&r1);
    chring_free(&r2);
}

Test(profiles, fnv16_batch_joins_in_array_order)
{
    char first[32], second[32], held[32];
    find_collision(first, second, sizeof first);
    uint64_t contested = ref_profile_fnv16(first);
    chring_t *r1 = profile_ring(CHRING_PROFILE_FNV16, 1);
    chring_change_t batch1[] = {{second, 2, NULL}, {first, 2, NULL}};
    cr_assert_eq(chring_update(r1, batch1, 2), 0, "update");
    cr_assert_str_eq(holder_of(r1, contested, held, sizeof held), second, "array order");
    chring_t *r2 = profile_ring(CHRING_PROFILE_FNV16, 1);
    chring_change_t batch2[] = {{first, 2, NULL}, {second, 2, NULL}};
    cr_assert_eq(chring_sync(r2, batch2, 2), 0, "sync");
    cr_assert_str_eq(holder_of(r2, contested, held, sizeof held), first, "array order");
    chring_free(&r1);
    chring_free(&r2);
}

Test(profiles, fnv16_rejoining_member_becomes_the_later_joiner)
{
    char first[32], second[32], held[32];
    find_collision(first, second, sizeof first);
    uint64_t contested = ref_profile_fnv16(first);
    chring_t *r = profile_ring(CHRING_PROFILE_FNV16, 1);
    add_or_fail(r, first, 2, NULL);
    add_or_fail(r, second, 2, NULL);
    cr_assert_eq(chring_remove(r, first), 0, "remove the earlier joiner");
    cr_assert_str_eq(holder_of(r, contested, held, sizeof held), second, "now alone there");
    add_or_fail(r, first, 2, NULL);
    cr_assert_str_eq(holder_of(r, contested, held, sizeof held), second,
                     "the rejoined member is the later joiner");
    chring_free(&r);
}

Test(profiles, fnv16_growth_of_earlier_joiner_follows_join_order)
{
    /* docs/design.md §2: points are placed member by member in join order, each member's in index
     * order.  Find A, B with fnv16("2-A") == fnv16(B); A joins first at weight 2 (points A, 1-A),
     * then B at weight 1 (point B).  Growing A to weight 3 adds 2-A, which contends with B's point:
     * A, the earlier joiner, is placed first and takes the position. */
    static uint32_t owner_of_pos[65536];
    memset(owner_of_pos, 0, sizeof owner_of_pos);
    char a[32] = "", b[32] = "", label[40];
    for (uint32_t i = 1; i < 200000 && !a[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "m%u", (unsigned)i);
        owner_of_pos[ref_profile_fnv16(name)] = i;
    }
    for (uint32_t i = 1; i < 200000 && !a[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "a%u", (unsigned)i);
        snprintf(label, sizeof label, "2-%s", name);
        uint32_t j = owner_of_pos[ref_profile_fnv16(label)];
        if (!j)
            continue;
        char other[32], l0[40], l1[40];
        snprintf(other, sizeof other, "m%u", (unsigned)j);
        snprintf(l0, sizeof l0, "%s", name);
        snprintf(l1, sizeof l1, "1-%s", name);
        uint64_t pb = ref_profile_fnv16(other);
        if (ref_profile_fnv16(l0) == pb || ref_profile_fnv16(l1) == pb ||
            ref_profile_fnv16(l0) == ref_profile_fnv16(l1))
            continue;
        snprintf(a, sizeof a, "%s", name);
        snprintf(b, sizeof b, "%s", other);
    }
    cr_assert(a[0], "no crafted collision found");
    uint64_t contested = ref_profile_fnv16(b);
    char held[32];
    chring_t *r = profile_ring(CHRING_PROFILE_FNV16, 1);
    add_or_fail(r, a, 2, NULL);
    add_or_fail(r, b, 1, NULL);
    cr_assert_str_eq(holder_of(r, contested, held, sizeof held), b, "before growth");
    cr_assert_eq(chring_set_weight(r, a, 3), 0, "grow the earlier joiner");
    cr_assert_str_eq(holder_of(r, contested, held, sizeof held), a,
                     "the earlier joiner is placed first");
    chring_free(&r);
}

/* Custom hashes return values of their width; higher bits are ignored. */
static uint64_t noisy_table_hash(const void *data, size_t len, void *ctx)
{
    return 0xdead000000000000ull | 0x0000beef00000000ull | table_hash_fn(data, len, ctx);
}

Test(profiles, custom_widths_ignore_higher_bits)
{
    static const struct table_entry entries[] = {{"a#0", 100}, {"b#0", 200}, {"k", 150}};
    static const struct table_hash table = {entries, 3, 0};
    const unsigned widths[] = {32, 16};
    for (int w = 0; w < 2; w++) {
        chring_config_t cfg;
        chring_config_default(&cfg);
        cfg.profile = CHRING_PROFILE_CUSTOM;
        cfg.hash = noisy_table_hash;
        cfg.hash_ctx = (void *)&table;
        cfg.hash_bits = widths[w];
        cfg.vnodes = 1;
        chring_t *r = ring_create(&cfg);
        add_or_fail(r, "a", 1, NULL);
        add_or_fail(r, "b", 1, NULL);
        const chring_snap_t *s = chring_snap_enter(r);
        cr_assert_eq(chring_snap_hash_bits(s), widths[w], "width");
        cr_assert_eq(chring_snap_hash(s, "k", 1), 150u, "hash truncated to %u bits", widths[w]);
        uint64_t pos;
        cr_assert_eq(chring_snap_point(s, 0, &pos, NULL), 0, "point 0");
        cr_assert_eq(pos, 100u, "position truncated");
        cr_assert_eq(chring_snap_point(s, 1, &pos, NULL), 0, "point 1");
        cr_assert_eq(pos, 200u, "position truncated");
        cr_assert_str_eq(owner_of(s, "k"), "b", "150 -> 200");
        /* lookup_hash ignores bits above the width too. */
        const chring_member_t *m = chring_snap_lookup_hash(s, 0xffff000000000000ull | 150u);
        cr_assert_str_eq(chring_member_name(m), "b", "lookup_hash ignores high bits");
        chring_snap_exit(r, s);
        chring_free(&r);
    }
}

Test(profiles, custom_hash_receives_ctx_and_labels)
{
    static const struct table_entry entries[] = {{"srv#0", 1000}, {"srv#1", 2000}, {"srv#2", 3000}};
    static const struct table_hash table = {entries, 3, 5};
    chring_t *r = table_ring(&table, 64, 3, 1.25);
    add_or_fail(r, "srv", 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    const uint64_t expect[] = {1000, 2000, 3000};
    for (size_t i = 0; i < 3; i++) {
        uint64_t pos;
        cr_assert_eq(chring_snap_point(s, i, &pos, NULL), 0, "point %zu", i);
        cr_assert_eq(pos, expect[i], "labels srv#0..srv#2");
    }
    cr_assert_eq(chring_snap_hash(s, "zz", 2), 5u, "fallback through ctx");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(profiles, names_round_trip)
{
    const chring_profile_t all[] = {CHRING_PROFILE_HASH64, CHRING_PROFILE_MURMUR32,
                                    CHRING_PROFILE_FNV32,  CHRING_PROFILE_FNV16,
                                    CHRING_PROFILE_XXH3,   CHRING_PROFILE_KETAMA,
                                    CHRING_PROFILE_NGINX,  CHRING_PROFILE_CUSTOM};
    const char *const names[] = {"hash64", "murmur32", "fnv32", "fnv16", "xxh3", "ketama", "nginx"};
    for (size_t i = 0; i < 7; i++) {
        const char *name = chring_profile_name(all[i]);
        cr_assert_not_null(name, "name of profile %d", (int)all[i]);
        cr_assert_str_eq(name, names[i], "the tool's --profile spells it so (docs/design.md §7)");
    }
    for (size_t i = 0; i < 8; i++) {
        chring_profile_t parsed = (chring_profile_t)99;
        cr_assert_eq(chring_profile_parse(chring_profile_name(all[i]), &parsed), 0, "parse %s",
                     chring_profile_name(all[i]));
        cr_assert_eq(parsed, all[i], "round trip of %s", chring_profile_name(all[i]));
    }
    chring_profile_t out;
    cr_assert_null(chring_profile_name((chring_profile_t)77), "unknown profile value");
    cr_assert_eq(chring_profile_parse("sha1", &out), -EINVAL, "unknown name");
    cr_assert_eq(chring_profile_parse(NULL, &out), -EINVAL, "NULL name");
    cr_assert_eq(chring_profile_parse("hash64", NULL), -EINVAL, "NULL out");
}

Test(profiles, nginx_equal_points_count_only_for_the_first_name)
{
    /* "cache" and "unix:cache" both split to HOST "cache" and an empty PORT (docs/design.md
     * §2.1), so their CRC-32 chains are the same: the 160 points of "cache" are also the first
     * 160 of "unix:cache" (weight 2, 320 points).  Of equal points only the first by name stays,
     * so "cache" keeps its 160 and "unix:cache" keeps only its last 160. */
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_NGINX;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, "unix:cache", 2, NULL);
    add_or_fail(r, "cache", 1, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *plain = chring_snap_find(s, "cache");
    const chring_member_t *sock = chring_snap_find(s, "unix:cache");
    cr_assert_eq(chring_snap_points(s), 320u, "160 shared points once, 160 of unix:cache's own");
    cr_assert_eq(chring_snap_member_points(s, plain), 160u, "cache keeps every point");
    cr_assert_eq(chring_snap_member_points(s, sock), 160u, "unix:cache loses the shared 160");
    size_t owned = 0;
    for (size_t i = 0; i < chring_snap_points(s); i++) {
        const chring_member_t *m = NULL;
        cr_assert_eq(chring_snap_point(s, i, NULL, &m), 0);
        owned += m == sock;
    }
    cr_assert_eq(owned, 160u, "points of unix:cache in the ring");
    chring_snap_exit(r, s);
    chring_free(&r);
}
