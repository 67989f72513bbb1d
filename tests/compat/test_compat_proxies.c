/* The haproxy and envoy profiles (docs/design.md §2.1, docs/compat.md) through the public API
 * alone, against what the real proxies do:
 *
 *   compat_haproxy  maps recorded from Debian 12's haproxy 2.6 on loopback
 *                   (tests/compat/gen/haproxy_golden.sh, tests/compat/data/haproxy_*.tsv): the
 *                   default key hash by chring_lookup_name, HAProxy's other key hashes (written
 *                   here from the formulas in include/chring.h) by chring_snap_lookup_hash, the
 *                   same maps reached through removals and weight changes, the nearest-point
 *                   start of the n-replica, bounded and lease walks, and the names and weights
 *                   the profile refuses;
 *   compat_envoy    the ring positions, picks, entry counts and histograms stated by Envoy's own
 *                   unit tests of ring_hash (test/extensions/load_balancing_policies/ring_hash/
 *                   ring_hash_lb_test.cc in envoyproxy/envoy), every case that needs no
 *                   localities, priorities or Murmur2, and the ring size bounds.
 *
 * The data directory comes from the environment (COMPAT_DATA, set by meson). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "chring.h"

/* ------------------------------------------------------------------------------------------- *
 * Golden files: "#member\tNAME\tWEIGHT", "# key-hash: H", other "#" comments, "KEY\tMEMBER".
 * ------------------------------------------------------------------------------------------- */

#define MAX_MEMBERS 64
#define MAX_KEYS 4096
#define MAX_LINE 512

struct golden {
    char path[1024];
    char key_hash[MAX_LINE];
    size_t members;
    char member[MAX_MEMBERS][CHRING_NAME_MAX + 1];
    uint32_t weight[MAX_MEMBERS];
    size_t keys;
    char *key[MAX_KEYS];
    char *owner[MAX_KEYS];
};

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    cr_assert(d != NULL);
    memcpy(d, s, n);
    return d;
}

static struct golden *golden_load(const char *file)
{
    const char *dir = getenv("COMPAT_DATA");
    cr_assert(dir != NULL && *dir != '\0', "COMPAT_DATA is not set (meson sets it)");
    struct golden *g = calloc(1, sizeof *g);
    cr_assert(g != NULL);
    snprintf(g->path, sizeof g->path, "%s/%s", dir, file);
    FILE *f = fopen(g->path, "r");
    cr_assert(f != NULL, "cannot open %s", g->path);
    strcpy(g->key_hash, "default");
    char line[MAX_LINE];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strncmp(line, "#member\t", 8) == 0) {
            char *name = line + 8;
            char *w = strchr(name, '\t');
            cr_assert(w != NULL && g->members < MAX_MEMBERS, "%s: bad member line", g->path);
            *w++ = '\0';
            cr_assert(strlen(name) > 0 && strlen(name) <= CHRING_NAME_MAX);
            strcpy(g->member[g->members], name);
            g->weight[g->members] = (uint32_t)strtoul(w, NULL, 10);
            g->members++;
            continue;
        }
        if (strncmp(line, "# key-hash: ", 12) == 0) {
            snprintf(g->key_hash, sizeof g->key_hash, "%s", line + 12);
            continue;
        }
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *tab = strchr(line, '\t');
        cr_assert(tab != NULL && g->keys < MAX_KEYS, "%s: bad key line '%s'", g->path, line);
        *tab = '\0';
        g->key[g->keys] = dup_str(line);
        g->owner[g->keys] = dup_str(tab + 1);
        g->keys++;
    }
    fclose(f);
    cr_assert(g->members > 0 && g->keys > 0, "%s: empty", g->path);
    return g;
}

static void golden_free(struct golden *g)
{
    for (size_t i = 0; i < g->keys; i++) {
        free(g->key[i]);
        free(g->owner[i]);
    }
    free(g);
}

static chring_t *ring_new(chring_profile_t profile, uint32_t ring_min, uint32_t ring_max)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    cfg.vnodes = 0; /* ignored by both profiles */
    if (ring_min != 0) {
        cfg.ring_size_min = ring_min;
        cfg.ring_size_max = ring_max;
    }
    chring_t *r = NULL;
    int rc = chring_new(&r, &cfg);
    cr_assert_eq(rc, 0, "chring_new: %s", chring_strerror(rc));
    return r;
}

static void add(chring_t *r, const char *name, uint32_t weight)
{
    int rc = chring_add(r, name, weight, NULL);
    cr_assert_eq(rc, 0, "chring_add(%s, %u): %s", name, weight, chring_strerror(rc));
}

static void ring_add_all(chring_t *r, const struct golden *g, int reverse)
{
    for (size_t i = 0; i < g->members; i++) {
        size_t m = reverse ? g->members - 1 - i : i;
        add(r, g->member[m], g->weight[m]);
    }
}

/* ------------------------------------------------------------------------------------------- *
 * HAProxy's key hashes, from the formulas in include/chring.h (CHRING_PROFILE_HAPROXY).
 * ------------------------------------------------------------------------------------------- */

static uint32_t t_avalanche(uint32_t a)
{
    a = (a + 0x7ed55d16u) + (a << 12);
    a = (a ^ 0xc761c23cu) ^ (a >> 19);
    a = (a + 0x165667b1u) + (a << 5);
    a = (a + 0xd3a2646cu) ^ (a << 9);
    a = (a + 0xfd7046c5u) + (a << 3);
    a = (a ^ 0xb55a4f09u) ^ (a >> 16);
    return a * 3221225473u;
}

static uint32_t t_sdbm(const unsigned char *b, size_t n)
{
    uint32_t h = 0;
    for (size_t i = 0; i < n; i++)
        h = b[i] + (h << 6) + (h << 16) - h;
    return h;
}

static uint32_t t_djb2(const unsigned char *b, size_t n)
{
    uint32_t h = 5381;
    for (size_t i = 0; i < n; i++)
        h = (h << 5) + h + b[i];
    return h;
}

static uint32_t t_rotl(uint32_t x, unsigned s)
{
    return s == 0 ? x : (x << s) | (x >> (32 - s));
}

static uint32_t t_wt6(const unsigned char *b, size_t n)
{
    uint32_t h0 = 0xa53c965au, h1 = 0x5ca6953au;
    unsigned s0 = 6, s1 = 18;
    for (size_t i = 0; i < n; i++) {
        h0 = ~(h0 ^ b[i]);
        h1 = ~(h1 + b[i]);
        uint32_t t = t_rotl(h1, s0);
        h1 = t_rotl(h0, s1);
        h0 = t;
        t = ((h0 >> 16) ^ h1) & 0xffffu;
        s0 = t & 31u;
        s1 = t >> 11;
    }
    return h0 ^ h1;
}

/* The key's hash as HAProxy computes it for `hash-type consistent <key_hash>`. */
static uint32_t t_key_hash(const char *key_hash, const char *key)
{
    const unsigned char *b = (const unsigned char *)key;
    size_t n = strlen(key);
    if (strcmp(key_hash, "default") == 0)
        return t_avalanche(t_sdbm(b, n));
    uint32_t h;
    if (strncmp(key_hash, "sdbm", 4) == 0)
        h = t_sdbm(b, n);
    else if (strncmp(key_hash, "djb2", 4) == 0)
        h = t_djb2(b, n);
    else if (strncmp(key_hash, "wt6", 3) == 0)
        h = t_wt6(b, n);
    else if (strncmp(key_hash, "crc32", 5) == 0)
        h = (uint32_t)crc32(0L, b, (uInt)n);
    else
        cr_assert_fail("unknown key hash %s", key_hash);
    return strstr(key_hash, "_avalanche") != NULL ? t_avalanche(h) : h;
}

/* Mismatches of the golden map: by chring_lookup_name for the default key hash, and always by
 * chring_snap_lookup_hash with the hash computed here. */
static size_t haproxy_mismatches(chring_t *r, const struct golden *g)
{
    size_t bad = 0;
    int by_name = strcmp(g->key_hash, "default") == 0;
    char name[CHRING_NAME_MAX + 1];
    const chring_snap_t *s = chring_snap_enter(r);
    for (size_t i = 0; i < g->keys; i++) {
        const chring_member_t *m = chring_snap_lookup_hash(s, t_key_hash(g->key_hash, g->key[i]));
        const char *got = m == NULL ? "(none)" : chring_member_name(m);
        if (strcmp(got, g->owner[i]) != 0 && bad++ < 5)
            cr_log_warn("%s: key '%s': HAProxy %s, chring_snap_lookup_hash %s", g->path, g->key[i],
                        g->owner[i], got);
    }
    chring_snap_exit(r, s);
    for (size_t i = 0; by_name && i < g->keys; i++) {
        int rc = chring_lookup_name(r, g->key[i], strlen(g->key[i]), name, sizeof name);
        if ((rc < 0 || strcmp(name, g->owner[i]) != 0) && bad++ < 5)
            cr_log_warn("%s: key '%s': HAProxy %s, chring_lookup_name %s", g->path, g->key[i],
                        g->owner[i], rc < 0 ? chring_strerror(rc) : name);
    }
    return bad;
}

static void check_haproxy(const char *file, int reverse)
{
    struct golden *g = golden_load(file);
    chring_t *r = ring_new(CHRING_PROFILE_HAPROXY, 0, 0);
    ring_add_all(r, g, reverse);
    cr_expect_eq(chring_len(r), g->members, "%s", file);
    size_t bad = haproxy_mismatches(r, g);
    cr_expect_eq(bad, 0u, "%s: %zu of %zu keys differ from HAProxy", file, bad, g->keys);
    chring_free(&r);
    golden_free(g);
}

static const char *const haproxy_maps[] = {
    "haproxy_n2.tsv",
    "haproxy_n3.tsv",
    "haproxy_n5.tsv",
    "haproxy_n8.tsv",
    "haproxy_n20.tsv",
    "haproxy_weighted.tsv",
    "haproxy_weighted_wide.tsv",
    "haproxy_n8_minus4_fixed.tsv",
    "haproxy_n8_minus4_renumbered.tsv",
    "haproxy_n8_disabled4.tsv",
    "haproxy_large_ids.tsv",
    "haproxy_colliding_ids.tsv",
    "haproxy_sdbm.tsv",
    "haproxy_sdbm_avalanche.tsv",
    "haproxy_djb2.tsv",
    "haproxy_djb2_avalanche.tsv",
    "haproxy_wt6.tsv",
    "haproxy_wt6_avalanche.tsv",
    "haproxy_crc32.tsv",
    "haproxy_crc32_avalanche.tsv",
};

Test(compat_haproxy, matches_haproxy)
{
    for (size_t i = 0; i < sizeof haproxy_maps / sizeof haproxy_maps[0]; i++)
        check_haproxy(haproxy_maps[i], 0);
}

Test(compat_haproxy, ignores_join_order)
{
    check_haproxy("haproxy_n8.tsv", 1);
    check_haproxy("haproxy_weighted_wide.tsv", 1);
    check_haproxy("haproxy_colliding_ids.tsv", 1);
}

/* The maps of a removed server and of weights, reached by changing a published ring (the merge
 * path of a publish) rather than by building it from scratch. */
Test(compat_haproxy, removal_and_weight_changes)
{
    struct golden *minus4 = golden_load("haproxy_n8_minus4_fixed.tsv");
    chring_t *r = ring_new(CHRING_PROFILE_HAPROXY, 0, 0);
    char id[4];
    for (int i = 1; i <= 8; i++) {
        snprintf(id, sizeof id, "%d", i);
        add(r, id, 1);
    }
    cr_assert_eq(chring_remove(r, "4"), 0);
    cr_expect_eq(haproxy_mismatches(r, minus4), 0u, "n8 then remove 4");
    chring_free(&r);
    golden_free(minus4);

    struct golden *w = golden_load("haproxy_weighted.tsv");
    r = ring_new(CHRING_PROFILE_HAPROXY, 0, 0);
    for (int i = 1; i <= 4; i++) {
        snprintf(id, sizeof id, "%d", i);
        add(r, id, 5); /* too heavy first: shrinking drops nodes from the end */
    }
    cr_assert_eq(chring_set_weight(r, "1", 1), 0);
    cr_assert_eq(chring_set_weight(r, "2", 2), 0);
    cr_assert_eq(chring_set_weight(r, "3", 1), 0);
    cr_assert_eq(chring_set_weight(r, "4", 3), 0);
    cr_expect_eq(haproxy_mismatches(r, w), 0u, "weights 5 then 1, 2, 1, 3");
    chring_free(&r);
    golden_free(w);
}

Test(compat_haproxy, sixteen_nodes_per_weight)
{
    chring_t *r = ring_new(CHRING_PROFILE_HAPROXY, 0, 0);
    add(r, "1", 1);
    add(r, "2", 7);
    add(r, "3", 256);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_expect_eq(chring_snap_points(s), 16u * (1 + 7 + 256));
    cr_expect_eq(chring_snap_member_points(s, chring_snap_find(s, "2")), 16u * 7);
    cr_expect_eq(chring_snap_hash_bits(s), 32u);
    /* The key hash is avalanche(sdbm(key)). */
    cr_expect_eq(chring_snap_hash(s, "user:42", 7),
                 t_avalanche(t_sdbm((const unsigned char *)"user:42", 7)));
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(compat_haproxy, refuses_what_haproxy_cannot_name)
{
    chring_t *r = ring_new(CHRING_PROFILE_HAPROXY, 0, 0);
    static const char *const bad[] = {"web1",       "0",           "01",          "-1",
                                      "+1",         "1 ",          " 1",          "1a",
                                      "2147483648", "99999999999", "127.0.0.1:80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(chring_add(r, bad[i], 1, NULL), -EINVAL, "name '%s'", bad[i]);
    chring_change_t batch[2] = {{.name = "1", .weight = 1}, {.name = "srv2", .weight = 1}};
    cr_expect_eq(chring_update(r, batch, 2), -EINVAL);
    cr_expect_eq(chring_sync(r, batch, 2), -EINVAL);
    cr_expect_eq(chring_len(r), 0u, "nothing half-applied");
    cr_expect_eq(chring_add(r, "2147483647", 1, NULL), 0);
    cr_expect_eq(chring_add(r, "1", 256, NULL), 0);
    cr_expect_eq(chring_add(r, "2", 257, NULL), -E2BIG, "HAProxy weights stop at 256");
    cr_expect_eq(chring_set_weight(r, "1", 300), -E2BIG);
    cr_expect_eq(chring_len(r), 2u);
    chring_free(&r);
}

/* With r's points read back through chring_snap_point: the index of the point HAProxy picks for
 * hash h (nearest either side, ties before), and of the first point at or after h. */
struct pts {
    size_t n;
    uint64_t *pos;
    const chring_member_t **m;
};

static void pts_read(const chring_snap_t *s, struct pts *p)
{
    p->n = chring_snap_points(s);
    p->pos = calloc(p->n, sizeof *p->pos);
    p->m = calloc(p->n, sizeof *p->m);
    cr_assert(p->pos != NULL && p->m != NULL);
    for (size_t i = 0; i < p->n; i++)
        cr_assert_eq(chring_snap_point(s, i, &p->pos[i], &p->m[i]), 0);
}

static size_t pts_first_at_or_after(const struct pts *p, uint32_t h)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->pos[i] >= h)
            return i;
    return 0;
}

static size_t pts_nearest(const struct pts *p, uint32_t h)
{
    size_t next = pts_first_at_or_after(p, h);
    size_t prev = next == 0 ? p->n - 1 : next - 1;
    uint32_t dp = h - (uint32_t)p->pos[prev], dn = (uint32_t)p->pos[next] - h;
    return dp <= dn ? prev : next;
}

/* The distinct members met going clockwise from point i, at most want. */
static size_t pts_walk(const struct pts *p, size_t i, const chring_member_t **out, size_t want)
{
    size_t got = 0;
    for (size_t k = 0; k < p->n && got < want; k++) {
        const chring_member_t *m = p->m[(i + k) % p->n];
        int seen = 0;
        for (size_t j = 0; j < got; j++)
            seen |= out[j] == m;
        if (!seen)
            out[got++] = m;
    }
    return got;
}

static uint64_t load_of(const chring_member_t *m, void *ctx)
{
    const chring_member_t *full = ctx;
    return m == full ? 1000 : 0;
}

/* Where the nearest point is not the first clockwise one, lookup_n, the bounded walk and the
 * lease walk all start from the nearest point and go on clockwise from it. */
Test(compat_haproxy, walks_start_at_the_nearest_point)
{
    struct golden *g = golden_load("haproxy_n8.tsv");
    chring_t *r = ring_new(CHRING_PROFILE_HAPROXY, 0, 0);
    ring_add_all(r, g, 0);
    const chring_snap_t *s = chring_snap_enter(r);
    struct pts p;
    pts_read(s, &p);
    size_t differ = 0;
    for (size_t i = 0; i < g->keys; i++) {
        const char *key = g->key[i];
        size_t len = strlen(key);
        uint32_t h = (uint32_t)chring_snap_hash(s, key, len);
        size_t start = pts_nearest(&p, h);
        differ += p.m[start] != p.m[pts_first_at_or_after(&p, h)];
        const chring_member_t *want[3], *got[3];
        size_t nw = pts_walk(&p, start, want, 3);
        size_t ng = chring_snap_lookup_n(s, key, len, got, 3);
        cr_assert_eq(ng, nw, "key %s", key);
        for (size_t k = 0; k < ng; k++)
            cr_assert_eq(got[k], want[k], "key %s: replica %zu is %s, expected %s", key, k,
                         chring_member_name(got[k]), chring_member_name(want[k]));
        cr_assert_eq(got[0], chring_snap_lookup(s, key, len));
        /* Owner full: the bounded walk takes the next member clockwise from the nearest point. */
        cr_assert_eq(chring_snap_lookup_bounded(s, key, len, 1.25, load_of, NULL), want[0]);
        cr_assert_eq(chring_snap_lookup_bounded(s, key, len, 1.25, load_of, (void *)want[0]),
                     want[1], "key %s", key);
    }
    /* About 45 % of the keys are owned elsewhere than the first point clockwise says. */
    cr_expect(differ > g->keys / 4, "only %zu of %zu keys exercise the nearest rule", differ,
              g->keys);
    free(p.pos);
    free(p.m);
    chring_snap_exit(r, s);

    /* Leases: with no load the lease lands on HAProxy's server; with that server holding the
     * only leases beyond its capacity, the next clockwise from the nearest point. */
    for (size_t i = 0; i < g->keys; i += 97) {
        const char *key = g->key[i];
        chring_lease_t first;
        cr_assert_eq(chring_acquire(r, key, strlen(key), &first), 0);
        cr_assert_str_eq(chring_member_name(first.member), g->owner[i], "key %s", key);
        chring_lease_t more[4];
        size_t held = 0;
        const chring_member_t *want[2];
        s = chring_snap_enter(r);
        while (held < 4 && chring_acquire_member(r, s, first.member, &more[held]) == 0)
            held++;
        pts_read(s, &p);
        cr_assert_eq(
            pts_walk(&p, pts_nearest(&p, (uint32_t)chring_snap_hash(s, key, strlen(key))), want, 2),
            2u);
        free(p.pos);
        free(p.m);
        chring_snap_exit(r, s);
        cr_assert_eq(held, 4u);
        chring_lease_t spill;
        cr_assert_eq(chring_acquire(r, key, strlen(key), &spill), 0);
        cr_expect_str_eq(chring_member_name(spill.member), chring_member_name(want[1]),
                         "key %s: spilled to %s", key, chring_member_name(spill.member));
        chring_release(r, &spill);
        while (held > 0)
            chring_release(r, &more[--held]);
        chring_release(r, &first);
    }
    chring_free(&r);
    golden_free(g);
}

/* ------------------------------------------------------------------------------------------- *
 * Envoy: the expectations of ring_hash_lb_test.cc.
 * ------------------------------------------------------------------------------------------- */

static chring_t *envoy_ring(uint32_t ring_min, uint32_t ring_max, const char *const *names,
                            const uint32_t *weights, size_t n)
{
    chring_t *r = ring_new(CHRING_PROFILE_ENVOY, ring_min, ring_max);
    for (size_t i = 0; i < n; i++)
        add(r, names[i], weights == NULL ? 1 : weights[i]);
    return r;
}

static const char *pick(const chring_snap_t *s, uint64_t h)
{
    const chring_member_t *m = chring_snap_lookup_hash(s, h);
    return m == NULL ? "(none)" : chring_member_name(m);
}

static void expect_ring(const chring_snap_t *s, const uint64_t *pos, const char *const *owner,
                        size_t n)
{
    cr_assert_eq(chring_snap_points(s), n);
    for (size_t i = 0; i < n; i++) {
        uint64_t p;
        const chring_member_t *m;
        cr_assert_eq(chring_snap_point(s, i, &p, &m), 0);
        cr_expect_eq(p, pos[i], "entry %zu at %llu, Envoy %llu", i, (unsigned long long)p,
                     (unsigned long long)pos[i]);
        cr_expect_str_eq(chring_member_name(m), owner[i], "entry %zu", i);
    }
}

/* hosts_ = 127.0.0.1:90 .. :95 */
static const char *const ports90[] = {"127.0.0.1:90", "127.0.0.1:91", "127.0.0.1:92",
                                      "127.0.0.1:93", "127.0.0.1:94", "127.0.0.1:95"};

Test(compat_envoy, basic)
{
    chring_t *r = envoy_ring(12, CHRING_DEFAULT_RING_SIZE_MAX, ports90, NULL, 6);
    const chring_snap_t *s = chring_snap_enter(r);
    static const uint64_t pos[] = {
        833437586790550860u,   928266305478181108u,   1033482794131418490u,  3551244743356806947u,
        3851675632748031481u,  5583722120771150861u,  6311230543546372928u,  7700377290971790572u,
        13144177310400110813u, 13444792449719432967u, 15516499411664133160u, 16117243373044804889u};
    static const char *const own[] = {":94", ":92", ":90", ":95", ":93", ":91",
                                      ":91", ":93", ":95", ":92", ":94", ":90"};
    const char *owner[12];
    char names[12][16];
    for (size_t i = 0; i < 12; i++) {
        snprintf(names[i], sizeof names[i], "127.0.0.1%s", own[i]);
        owner[i] = names[i];
    }
    expect_ring(s, pos, owner, 12);
    for (size_t i = 0; i < 6; i++)
        cr_expect_eq(chring_snap_member_points(s, chring_snap_find(s, ports90[i])), 2u);
    cr_expect_str_eq(pick(s, 0), "127.0.0.1:94");
    cr_expect_str_eq(pick(s, UINT64_MAX), "127.0.0.1:94");
    cr_expect_str_eq(pick(s, 3551244743356806947u), "127.0.0.1:95");
    cr_expect_str_eq(pick(s, 3551244743356806948u), "127.0.0.1:93");
    cr_expect_str_eq(pick(s, 16117243373044804880u), "127.0.0.1:90");
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* BasicWithHostname / BasicWithMetadataHashKey: the host key is "90" .. "95". */
Test(compat_envoy, basic_with_hostname)
{
    static const char *const hosts[] = {"90", "91", "92", "93", "94", "95"};
    chring_t *r = envoy_ring(12, CHRING_DEFAULT_RING_SIZE_MAX, hosts, NULL, 6);
    const chring_snap_t *s = chring_snap_enter(r);
    static const uint64_t pos[] = {
        1975508444536362413u,  2376063919839173711u,  2386806903309390596u,  6749904478991551885u,
        6803900775736438537u,  7225015537174310577u,  8787465352164086522u,  11282020843382717940u,
        13723418369486627818u, 13776502110861797421u, 14338313586354474791u, 15364271037087512980u};
    static const char *const owner[] = {"95", "95", "93", "94", "93", "92",
                                        "90", "92", "91", "90", "91", "94"};
    expect_ring(s, pos, owner, 12);
    cr_expect_str_eq(pick(s, 0), "95");
    cr_expect_str_eq(pick(s, UINT64_MAX), "95");
    cr_expect_str_eq(pick(s, 7225015537174310577u), "92");
    cr_expect_str_eq(pick(s, 6803900775736438537u), "93");
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* BasicFailover's ring of one host: minimum 12 gives it 12 entries. */
Test(compat_envoy, one_host)
{
    static const char *const hosts[] = {"127.0.0.1:82"};
    chring_t *r = envoy_ring(12, CHRING_DEFAULT_RING_SIZE_MAX, hosts, NULL, 1);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_expect_eq(chring_snap_points(s), 12u);
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(compat_envoy, uneven_hosts)
{
    static const char *const a[] = {"127.0.0.1:80", "127.0.0.1:81"};
    chring_t *r = envoy_ring(3, CHRING_DEFAULT_RING_SIZE_MAX, a, NULL, 2);
    const chring_snap_t *s = chring_snap_enter(r);
    static const uint64_t pos1[] = {5454692015285649509u, 7859399908942313493u,
                                    13838424394637650569u, 16064866803292627174u};
    static const char *const own1[] = {"127.0.0.1:80", "127.0.0.1:81", "127.0.0.1:80",
                                       "127.0.0.1:81"};
    expect_ring(s, pos1, own1, 4);
    cr_expect_str_eq(pick(s, 0), "127.0.0.1:80");
    chring_snap_exit(r, s);

    /* The hosts become :81 and :82. */
    chring_change_t sync[] = {{.name = "127.0.0.1:81", .weight = 1},
                              {.name = "127.0.0.1:82", .weight = 1}};
    cr_assert_eq(chring_sync(r, sync, 2), 0);
    s = chring_snap_enter(r);
    static const uint64_t pos2[] = {7859399908942313493u, 8241336090459785962u,
                                    12882406409176325258u, 16064866803292627174u};
    static const char *const own2[] = {"127.0.0.1:81", "127.0.0.1:82", "127.0.0.1:82",
                                       "127.0.0.1:81"};
    expect_ring(s, pos2, own2, 4);
    cr_expect_str_eq(pick(s, 0), "127.0.0.1:81");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(compat_envoy, host_weighted_tiny_ring)
{
    static const uint32_t w[] = {1, 2, 3};
    chring_t *r = envoy_ring(6, 6, ports90, w, 3);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_expect_eq(chring_snap_points(s), 6u);
    for (size_t i = 0; i < 3; i++)
        cr_expect_eq(chring_snap_member_points(s, chring_snap_find(s, ports90[i])), w[i]);
    static const struct {
        uint64_t h;
        size_t host;
    } expected[] = {{928266305478181108u, 2},   {4443673547860492590u, 2},
                    {5583722120771150861u, 1},  {6311230543546372928u, 1},
                    {13444792449719432967u, 2}, {16117243373044804889u, 0}};
    for (size_t i = 0; i < 6; i++)
        cr_expect_str_eq(pick(s, expected[i].h), ports90[expected[i].host], "hash %llu",
                         (unsigned long long)expected[i].h);
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* Hashes i * (UINT64_MAX / steps) for i < steps, counted by host index (port - 90). */
static void histogram(const chring_snap_t *s, uint32_t steps, uint32_t *counts, size_t hosts)
{
    for (uint32_t i = 0; i < steps; i++) {
        const chring_member_t *m = chring_snap_lookup_hash(s, i * (UINT64_MAX / steps));
        cr_assert(m != NULL);
        int port = atoi(strrchr(chring_member_name(m), ':') + 1);
        cr_assert(port >= 90 && (size_t)(port - 90) < hosts);
        counts[port - 90]++;
    }
}

Test(compat_envoy, host_weighted_large_ring)
{
    static const uint32_t w[] = {1, 2, 3};
    chring_t *r = envoy_ring(6144, CHRING_DEFAULT_RING_SIZE_MAX, ports90, w, 3);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_expect_eq(chring_snap_points(s), 6144u);
    cr_expect_eq(chring_snap_member_points(s, chring_snap_find(s, ports90[0])), 1024u);
    cr_expect_eq(chring_snap_member_points(s, chring_snap_find(s, ports90[2])), 3072u);
    uint32_t counts[3] = {0};
    histogram(s, 6000, counts, 3);
    cr_expect_eq(counts[0], 987u);
    cr_expect_eq(counts[1], 1932u);
    cr_expect_eq(counts[2], 3081u);
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(compat_envoy, small_fractional_scale)
{
    chring_t *r = envoy_ring(2, 2, ports90, NULL, 4);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_expect_eq(chring_snap_points(s), 2u);
    size_t min = SIZE_MAX, max = 0;
    for (size_t i = 0; i < 4; i++) {
        size_t n = chring_snap_member_points(s, chring_snap_find(s, ports90[i]));
        min = n < min ? n : min;
        max = n > max ? n : max;
    }
    cr_expect_eq(min, 0u);
    cr_expect_eq(max, 1u);
    uint32_t counts[4] = {0}, zeroes = 0, sum = 0;
    histogram(s, 1024, counts, 4);
    for (size_t i = 0; i < 4; i++) {
        zeroes += counts[i] == 0;
        sum += counts[i];
    }
    cr_expect_eq(zeroes, 2u);
    cr_expect_eq(sum, 1024u);
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(compat_envoy, large_fractional_scale)
{
    chring_t *r = envoy_ring(1023, 1023, ports90, NULL, 2);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_expect_eq(chring_snap_points(s), 1023u);
    size_t a = chring_snap_member_points(s, chring_snap_find(s, ports90[0]));
    size_t b = chring_snap_member_points(s, chring_snap_find(s, ports90[1]));
    cr_expect((a == 511 && b == 512) || (a == 512 && b == 511), "%zu and %zu entries", a, b);
    uint32_t counts[2] = {0};
    histogram(s, 1023, counts, 2);
    cr_expect_eq(counts[0], 526u);
    cr_expect_eq(counts[1], 497u);
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(compat_envoy, ring_size_bounds_and_hash)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cr_expect_eq(cfg.ring_size_min, 1024u);
    cr_expect_eq(cfg.ring_size_max, 8388608u);
    cfg.profile = CHRING_PROFILE_ENVOY;
    chring_t *r = NULL;
    cfg.ring_size_min = 20; /* BadRingSizeBounds */
    cfg.ring_size_max = 10;
    cr_expect_eq(chring_new(&r, &cfg), -EINVAL);
    cfg.ring_size_min = 0;
    cr_expect_eq(chring_new(&r, &cfg), -EINVAL);
    cfg.ring_size_min = 1;
    cfg.ring_size_max = CHRING_DEFAULT_RING_SIZE_MAX + 1;
    cr_expect_eq(chring_new(&r, &cfg), -EINVAL);
    cr_expect(r == NULL);
    /* Other profiles ignore the fields. */
    cfg.profile = CHRING_PROFILE_HASH64;
    cr_expect_eq(chring_new(&r, &cfg), 0);
    chring_free(&r);

    /* Defaults: 1024 entries for equal hosts of a small ring; keys hash with XXH64 seed 0. */
    r = envoy_ring(0, 0, ports90, NULL, 4);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_expect_eq(chring_snap_points(s), 1024u);
    cr_expect_eq(chring_snap_hash_bits(s), 64u);
    cr_expect_eq(chring_snap_hash(s, "", 0), UINT64_C(0xef46db3751d8e999)); /* XXH64("", 0) */
    const chring_member_t *m = chring_snap_lookup(s, "user:42", 7);
    cr_expect_eq(m, chring_snap_lookup_hash(s, chring_snap_hash(s, "user:42", 7)));
    chring_snap_exit(r, s);
    chring_free(&r);
}
