/* The line index (docs/design.md §4.1, "The line index"): rings of 65,536 points and more whose
 * owner is the first point at or after a key find it by one line of about eight points.  These
 * rings are built with a custom 64-bit hash that places every point, so that they hold what the
 * index must get right besides the common case: a line with more points than it can list (160
 * points within 2^28 of each other), points whose positions share their top 32 bits with another
 * member's (so that keys share a point's offset in its line), a long run of lines with no point,
 * no point in the top of the ring (keys there wrap to the first point, whose owner a change can
 * make another), and keys at, just below
 * and just above every point.  After the build and after every kind of change (each a merge of
 * the previous snapshot, which shifts the lines and rewrites those a change touches), and with
 * members down, every probe's owner is checked against a binary search of the points copied out
 * of the snapshot: chring_snap_lookup_hash, chring_snap_lookup_hashes, and chring_snap_lookup_n's
 * first two members (the walk starts from the point the index finds).  Last, the profiles whose
 * owner is the first point at or after a key, each on a ring of 1000 members, against their own
 * copied points.
 * SPDX-License-Identifier: MIT */
#include "chring_test.h"

enum {
    MEMBERS = 600, /* m0 .. m599 */
    TWINS = 50,    /* twin0 .. twin49: each point 1 above m<i>'s */
    VNODES = 160,
};

/* The crowded line: points of "crowd" at CROWD + i 2^20, of "late" 7 above each. */
#define CROWD UINT64_C(0x4000000000000000)
/* No point has top six bits 0x24 ([0x9000.., 0x9400..): about 190 lines) nor top twelve bits
 * 0xfff (the ring's last 1/4096: keys there wrap). */
#define GAP_TOP6 0x24u

static uint64_t mix(uint64_t z)
{
    z += UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t spread(uint64_t id, uint64_t i)
{
    uint64_t p = mix(id * 1000 + i);
    if ((p >> 58) == GAP_TOP6)
        p -= UINT64_C(1) << 58;
    if ((p >> 52) == 0xfff)
        p -= UINT64_C(1) << 52;
    return p;
}

static uint64_t parse(const char *p, size_t len, size_t *at)
{
    uint64_t v = 0;
    while (*at < len && p[*at] >= '0' && p[*at] <= '9')
        v = v * 10 + (uint64_t)(p[(*at)++] - '0');
    return v;
}

/* Labels "<name>#<i>" as above; a key "h<16 hex digits>" hashes to that number. */
static uint64_t placed_hash(const void *data, size_t len, void *ctx)
{
    (void)ctx;
    const char *p = data;
    if (len == 17 && p[0] == 'h') {
        char hex[17];
        memcpy(hex, p + 1, 16);
        hex[16] = 0;
        return strtoull(hex, NULL, 16);
    }
    const char *hash = memchr(p, '#', len);
    cr_assert_not_null(hash, "a label or a key h<hex>");
    size_t at = (size_t)(hash - p) + 1;
    uint64_t i = parse(p, len, &at);
    if (strncmp(p, "crowd#", 6) == 0)
        return CROWD + (i << 20);
    if (strncmp(p, "late#", 5) == 0)
        return CROWD + (i << 20) + 7;
    if (strncmp(p, "low#", 4) == 0)
        return i + 1; /* below every other point: the ring's first points */
    size_t idat = strncmp(p, "twin", 4) == 0 ? 4 : 1;
    uint64_t id = parse(p, len, &idat);
    return spread(id, i) + (p[0] == 't' ? 1 : 0);
}

/* The first up member clockwise from h, and the next up member other than it. */
static void expect_owners(const struct copied_point *p, size_t n, uint64_t h,
                          const chring_member_t *want[2])
{
    size_t i = point_by_search(p, n, h);
    want[0] = want[1] = NULL;
    for (size_t k = 0; k < n && want[1] == NULL; k++) {
        const chring_member_t *m = p[(i + k) % n].m;
        if (chring_member_is_down(m) > 0 || m == want[0])
            continue;
        if (want[0] == NULL)
            want[0] = m;
        else
            want[1] = m;
    }
}

static uint64_t *probes_of(const struct copied_point *p, size_t n, size_t *count)
{
    size_t cap = n * 5 + 20000 + 8, np = 0;
    uint64_t *h = malloc(cap * sizeof *h);
    cr_assert_not_null(h);
    for (size_t i = 0; i < n; i++) {
        h[np++] = p[i].pos - 1;
        h[np++] = p[i].pos;
        h[np++] = p[i].pos + 1;
        h[np++] = p[i].pos & ~(uint64_t)UINT32_MAX; /* the point's top 32 bits, low ones 0 */
        h[np++] = p[i].pos | UINT32_MAX;
    }
    uint64_t seed = 7;
    for (int k = 0; k < 20000; k++)
        h[np++] = mix(seed++);
    h[np++] = 0;
    h[np++] = UINT64_MAX;
    h[np++] = (uint64_t)GAP_TOP6 << 58;
    h[np++] = ((uint64_t)GAP_TOP6 << 58) + (UINT64_C(1) << 57);
    h[np++] = ((uint64_t)(GAP_TOP6 + 1) << 58) - 1;
    h[np++] = UINT64_C(0xfff) << 52;
    h[np++] = CROWD - 1;
    h[np++] = CROWD + (UINT64_C(200) << 20);
    *count = np;
    return h;
}

/* Every probe of the current snapshot against the copied points; returns the points. */
static size_t check_ring(chring_t *r, const char *when)
{
    const chring_snap_t *s = chring_snap_hold(r);
    size_t n = chring_snap_points(s);
    cr_assert_geq(n, (size_t)65536, "%s: a ring that takes the line index", when);
    struct copied_point *p = malloc(n * sizeof *p);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(chring_snap_point(s, i, &p[i].pos, &p[i].m), 0);
    size_t np;
    uint64_t *h = probes_of(p, n, &np);
    const chring_member_t **batch = malloc(np * sizeof *batch);
    cr_assert_not_null(batch);
    cr_assert_eq(chring_snap_lookup_hashes(s, h, np, batch), np);
    for (size_t k = 0; k < np; k++) {
        const chring_member_t *want[2];
        expect_owners(p, n, h[k], want);
        const chring_member_t *got = chring_snap_lookup_hash(s, h[k]);
        cr_assert_eq(got, want[0], "%s: owner of %016llx: %s, expected %s", when,
                     (unsigned long long)h[k], got ? chring_member_name(got) : "(none)",
                     want[0] ? chring_member_name(want[0]) : "(none)");
        cr_assert_eq(batch[k], want[0], "%s: batch owner of %016llx", when,
                     (unsigned long long)h[k]);
        if (k % 7 == 0) { /* the walks, on a seventh of the probes */
            char key[18];
            snprintf(key, sizeof key, "h%016llx", (unsigned long long)h[k]);
            const chring_member_t *two[2] = {NULL, NULL};
            size_t got2 = chring_snap_lookup_n(s, key, 17, two, 2);
            cr_assert_eq(got2, want[1] ? 2u : want[0] ? 1u : 0u, "%s: walk from %s", when, key);
            cr_assert_eq(two[0], want[0], "%s: walk from %s, first", when, key);
            cr_assert_eq(two[1], want[1], "%s: walk from %s, second", when, key);
        }
    }
    free(batch);
    free(h);
    free(p);
    chring_snap_put(r, s);
    return n;
}

static chring_t *placed_ring(void)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_CUSTOM;
    cfg.hash = placed_hash;
    cfg.hash_bits = 64;
    cfg.vnodes = VNODES;
    chring_t *r = ring_create(&cfg);
    static char names[MEMBERS + TWINS + 1][16];
    chring_change_t *all = calloc(MEMBERS + TWINS + 1, sizeof *all);
    cr_assert_not_null(all);
    size_t n = 0;
    for (int i = 0; i < MEMBERS; i++) {
        snprintf(names[n], sizeof names[n], "m%d", i);
        all[n] = (chring_change_t){names[n], 1, NULL}, n++;
    }
    for (int i = 0; i < TWINS; i++) {
        snprintf(names[n], sizeof names[n], "twin%d", i);
        all[n] = (chring_change_t){names[n], 1, NULL}, n++;
    }
    all[n++] = (chring_change_t){"crowd", 1, NULL};
    cr_assert_eq(chring_sync(r, all, n), 0);
    free(all);
    return r;
}

Test(lines, a_built_ring_answers_every_probe_as_the_points_say, .timeout = 120)
{
    chring_t *r = placed_ring();
    size_t n = check_ring(r, "built");
    cr_assert_eq(n, (size_t)(MEMBERS + TWINS + 1) * VNODES);
    chring_free(&r);
}

Test(lines, every_kind_of_change_keeps_the_lines_exact, .timeout = 240)
{
    chring_t *r = placed_ring();
    /* late's points go into the full line, between crowd's. */
    cr_assert_eq(chring_add(r, "late", 1, NULL), 0);
    check_ring(r, "late added");
    /* The full line keeps late's points only: 160, still more than a line lists. */
    cr_assert_eq(chring_remove(r, "crowd"), 0);
    check_ring(r, "crowd removed");
    /* Now the line lists nothing of crowd's nor late's. */
    cr_assert_eq(chring_remove(r, "late"), 0);
    check_ring(r, "late removed");
    cr_assert_eq(chring_remove(r, "twin3"), 0);
    check_ring(r, "twin3 removed");
    cr_assert_eq(chring_set_weight(r, "m5", 3), 0);
    check_ring(r, "m5 weighted 3");
    /* The lines past the ring's last point name the owner of its first: low's, then again
     * another member's. */
    cr_assert_eq(chring_add(r, "low", 1, NULL), 0);
    check_ring(r, "low added");
    cr_assert_eq(chring_remove(r, "low"), 0);
    check_ring(r, "low removed");
    chring_change_t batch[3] = {{"m7", 0, NULL}, {"twin60", 2, NULL}, {"crowd", 1, NULL}};
    cr_assert_eq(chring_update(r, batch, 3), 0);
    check_ring(r, "m7 removed, twin60 and crowd added");
    chring_free(&r);
}

Test(lines, members_down_are_passed_over_from_the_line_found, .timeout = 120)
{
    chring_t *r = placed_ring();
    const char *down[] = {"m1", "crowd", "twin7", "m7", "m400"};
    for (size_t k = 0; k < sizeof down / sizeof *down; k++)
        cr_assert_eq(chring_set_down(r, down[k], 1), 0, "%s down", down[k]);
    check_ring(r, "five members down");
    for (size_t k = 0; k < sizeof down / sizeof *down; k++)
        cr_assert_eq(chring_set_down(r, down[k], 0), 0, "%s up", down[k]);
    check_ring(r, "all up again");
    chring_free(&r);
}

/* Every profile whose owner is the first point at or after a key, on a ring of 1000 members (about
 * 160,000 points; Envoy's with a minimum ring of 131,072): the owner of 50,000 keys, one at a time
 * and in a batch, is the first point at or after the key's hash among the copied points (the
 * positions chring_snap_point gives are in the profile's width, as chring_snap_hash's hashes). */
Test(lines, every_first_point_profile_finds_the_owner_by_its_line, .timeout = 120)
{
    static const chring_profile_t profiles[] = {CHRING_PROFILE_HASH64, CHRING_PROFILE_MURMUR32,
                                                CHRING_PROFILE_FNV32,  CHRING_PROFILE_XXH3,
                                                CHRING_PROFILE_KETAMA, CHRING_PROFILE_NGINX,
                                                CHRING_PROFILE_ENVOY};
    enum { KEYS = 50000 };
    static char keys[KEYS][24];
    static const void *ptrs[KEYS];
    static size_t lens[KEYS];
    static const chring_member_t *batch[KEYS];
    for (int k = 0; k < KEYS; k++) {
        lens[k] = (size_t)snprintf(keys[k], sizeof keys[k], "key-%d", k);
        ptrs[k] = keys[k];
    }
    for (size_t f = 0; f < sizeof profiles / sizeof *profiles; f++) {
        chring_config_t cfg;
        chring_config_default(&cfg);
        cfg.profile = profiles[f];
        if (profiles[f] == CHRING_PROFILE_ENVOY)
            cfg.ring_size_min = 131072;
        chring_t *r = ring_create(&cfg);
        static char names[1000][16];
        chring_change_t all[1000];
        for (int i = 0; i < 1000; i++) {
            snprintf(names[i], sizeof names[i], "10.0.%d.%d", i / 250, i % 250);
            all[i] = (chring_change_t){names[i], 1, NULL};
        }
        cr_assert_eq(chring_sync(r, all, 1000), 0);
        const chring_snap_t *s = chring_snap_hold(r);
        const char *name = chring_profile_name(profiles[f]);
        size_t n = chring_snap_points(s);
        cr_assert_geq(n, (size_t)65536, "%s: %zu points take the line index", name, n);
        struct copied_point *p = malloc(n * sizeof *p);
        cr_assert_not_null(p);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(chring_snap_point(s, i, &p[i].pos, &p[i].m), 0);
        cr_assert_eq(chring_snap_lookup_many(s, ptrs, lens, KEYS, batch), (size_t)KEYS);
        for (int k = 0; k < KEYS; k++) {
            uint64_t h = chring_snap_hash(s, keys[k], lens[k]);
            const chring_member_t *want = p[point_by_search(p, n, h)].m;
            cr_assert_eq(chring_snap_lookup(s, keys[k], lens[k]), want, "%s: owner of %s", name,
                         keys[k]);
            cr_assert_eq(chring_snap_lookup_hash(s, h), want, "%s: owner of hash %llx", name,
                         (unsigned long long)h);
            cr_assert_eq(batch[k], want, "%s: batch owner of %s", name, keys[k]);
        }
        free(p);
        chring_snap_put(r, s);
        chring_free(&r);
    }
}
