/* The varnish profile (docs/design.md §2.1, docs/compat.md) through the public API alone, against
 * what Varnish 7.1's shard director (directors.shard) does:
 *
 *   compat_varnish  the hashcircle points, key lookups and URL placements stated by Varnish's own
 *                   tests (vmod/tests/directors_c00003, c00005, c00006, c00007.vtc of
 *                   varnishcache/varnish-cache at tag varnish-7.1.1, extracted by
 *                   tests/compat/gen/varnish_golden.py into tests/compat/data/varnish_*.tsv),
 *                   SHA-256 known answers, and the lookup's two quirks.
 *
 * The live comparison with directors.shard in a running varnishd is tests/varnish. The data
 * directory comes from the environment (COMPAT_DATA, set by meson). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chring.h"

#define MAX_MEMBERS 8
#define MAX_ROWS 256
#define MAX_LINE 512

struct row {
    char kind[8];  /* "point", "hash" or "url" */
    unsigned idx;  /* point rows */
    uint32_t hash; /* point and hash rows */
    char url[128]; /* url rows */
    char owner[32];
};

struct golden {
    uint32_t vnodes;
    size_t members;
    char member[MAX_MEMBERS][32];
    uint32_t weight[MAX_MEMBERS];
    size_t rows;
    struct row row[MAX_ROWS];
};

static void golden_load(const char *file, struct golden *g)
{
    const char *dir = getenv("COMPAT_DATA");
    cr_assert(dir != NULL && *dir != '\0', "COMPAT_DATA is not set (meson sets it)");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL, "cannot open %s", path);
    memset(g, 0, sizeof *g);
    char line[MAX_LINE];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        struct row *r = &g->row[g->rows];
        if (sscanf(line, "# vnodes: %u", &g->vnodes) == 1)
            continue;
        if (strncmp(line, "#member\t", 8) == 0) {
            cr_assert(g->members < MAX_MEMBERS);
            cr_assert(sscanf(line + 8, "%31s %u", g->member[g->members], &g->weight[g->members]) ==
                      2);
            g->members++;
            continue;
        }
        if (line[0] == '#' || line[0] == '\0')
            continue;
        cr_assert(g->rows < MAX_ROWS);
        if (sscanf(line, "point\t%u\t%x\t%31s", &r->idx, &r->hash, r->owner) == 3)
            strcpy(r->kind, "point");
        else if (sscanf(line, "hash\t%x\t%31s", &r->hash, r->owner) == 2)
            strcpy(r->kind, "hash");
        else if (sscanf(line, "url\t%127s\t%31s", r->url, r->owner) == 2)
            strcpy(r->kind, "url");
        else
            cr_assert_fail("%s: bad line '%s'", file, line);
        g->rows++;
    }
    fclose(f);
    cr_assert(g->vnodes > 0 && g->members > 0 && g->rows > 0, "%s: empty", file);
}

static chring_t *ring_of(const struct golden *g)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_VARNISH;
    cfg.vnodes = g->vnodes;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    for (size_t j = 0; j < g->members; j++)
        cr_assert_eq(chring_add(r, g->member[j], g->weight[j], NULL), 0);
    return r;
}

/* Checks every row of one golden file; returns the number of points compared. */
static size_t check_golden(const char *file)
{
    struct golden g;
    golden_load(file, &g);
    chring_t *r = ring_of(&g);
    const chring_snap_t *s = chring_snap_enter(r);
    size_t expect_points = 0;
    for (size_t j = 0; j < g.members; j++)
        expect_points += (size_t)g.vnodes * g.weight[j];
    cr_assert_eq(chring_snap_points(s), expect_points, "%s: point count", file);
    size_t compared = 0;
    for (size_t k = 0; k < g.rows; k++) {
        const struct row *row = &g.row[k];
        const chring_member_t *m = NULL;
        if (strcmp(row->kind, "point") == 0) {
            uint64_t pos = 0;
            cr_assert_eq(chring_snap_point(s, row->idx, &pos, &m), 0);
            cr_assert_eq(pos, row->hash, "%s: point %u at %08llx, Varnish %08x", file, row->idx,
                         (unsigned long long)pos, row->hash);
            compared++;
        } else if (strcmp(row->kind, "hash") == 0) {
            m = chring_snap_lookup_hash(s, row->hash);
        } else {
            m = chring_snap_lookup(s, row->url, strlen(row->url));
        }
        cr_assert(m != NULL);
        cr_assert_str_eq(chring_member_name(m), row->owner, "%s: %s %08x %s", file, row->kind,
                         row->hash, row->url);
    }
    chring_snap_exit(r, s);
    chring_free(&r);
    return compared;
}

Test(compat_varnish, hashcircle_of_weighted_backends_matches_directors_c00006)
{
    cr_assert_eq(check_golden("varnish_c00006.tsv"), 150);
}

Test(compat_varnish, hashcircle_of_three_backends_matches_directors_c00007)
{
    cr_assert_eq(check_golden("varnish_c00007.tsv"), 75);
}

Test(compat_varnish, integer_keys_match_directors_c00003_the_top_key_goes_to_the_last_point)
{
    check_golden("varnish_c00003.tsv");
}

Test(compat_varnish, urls_hash_as_by_url_in_directors_c00005)
{
    check_golden("varnish_c00005.tsv");
}

/* SHA-256 known answers (FIPS 180-2): the key hash is the little-endian u32 of the last 4 bytes. */
Test(compat_varnish, key_hash_is_the_tail_of_sha256)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_VARNISH;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_hash_bits(s), 32);
    /* SHA-256("abc") ends f2 00 15 ad; SHA-256("") ends 78 52 b8 55. */
    cr_assert_eq(chring_snap_hash(s, "abc", 3), 0xad1500f2u);
    cr_assert_eq(chring_snap_hash(s, "", 0), 0x55b85278u);
    chring_snap_exit(r, s);
    chring_free(&r);
    chring_profile_t p;
    cr_assert_eq(chring_profile_parse("varnish", &p), 0);
    cr_assert_eq(p, CHRING_PROFILE_VARNISH);
    cr_assert_str_eq(chring_profile_name(CHRING_PROFILE_VARNISH), "varnish");
}

/* The owner of each point, and the positions of the first and last. */
static void ring_ends(const chring_snap_t *s, const chring_member_t **first,
                      const chring_member_t **last, uint64_t *lo, uint64_t *hi)
{
    size_t n = chring_snap_points(s);
    cr_assert_eq(chring_snap_point(s, 0, lo, first), 0);
    cr_assert_eq(chring_snap_point(s, n - 1, hi, last), 0);
}

/* Keys above the highest point go to the last point, not the first; keys at or below a point to
 * that point; walks (n-replica, acquire) start there too. */
Test(compat_varnish, keys_above_the_top_point_start_at_the_last_point)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_VARNISH;
    cfg.vnodes = 25;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    cr_assert_eq(chring_add(r, "s1", 1, NULL), 0);
    cr_assert_eq(chring_add(r, "s2", 1, NULL), 0);
    cr_assert_eq(chring_add(r, "s3", 1, NULL), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *first, *last;
    uint64_t lo, hi;
    ring_ends(s, &first, &last, &lo, &hi);
    cr_assert(hi < UINT32_MAX);
    cr_assert_neq(first, last, "this ring's first and last points have different owners");
    cr_assert_eq(chring_snap_lookup_hash(s, UINT32_MAX), last);
    cr_assert_eq(chring_snap_lookup_hash(s, hi + 1), last);
    cr_assert_eq(chring_snap_lookup_hash(s, hi), last);
    cr_assert_eq(chring_snap_lookup_hash(s, lo), first);
    cr_assert_eq(chring_snap_lookup_hash(s, 0), first);
    /* A URL above the top point: found by search, then its walk starts at the last point. */
    char url[32];
    int found = 0;
    for (unsigned i = 0; i < 100000 && !found; i++) {
        snprintf(url, sizeof url, "/top-%u", i);
        found = chring_snap_hash(s, url, strlen(url)) > hi;
    }
    cr_assert(found);
    cr_assert_eq(chring_snap_lookup(s, url, strlen(url)), last);
    const chring_member_t *walk[3];
    cr_assert_eq(chring_snap_lookup_n(s, url, strlen(url), walk, 3), 3);
    cr_assert_eq(walk[0], last);
    chring_snap_exit(r, s);
    chring_lease_t lease;
    cr_assert_eq(chring_acquire(r, url, strlen(url), &lease), 0);
    cr_assert_str_eq(chring_member_name(lease.member), chring_member_name(last));
    chring_release(r, &lease);
    chring_free(&r);
}

/* A ring of exactly two points sends every key to point 1 (shard_lookup's first probe is the
 * last point); one point or three behave as usual. */
Test(compat_varnish, a_two_point_ring_sends_every_key_to_point_1)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_VARNISH;
    cfg.vnodes = 1;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    cr_assert_eq(chring_add(r, "a", 1, NULL), 0);
    cr_assert_eq(chring_add(r, "b", 1, NULL), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_points(s), 2);
    const chring_member_t *p0, *p1;
    uint64_t lo, hi;
    ring_ends(s, &p0, &p1, &lo, &hi);
    cr_assert_neq(p0, p1);
    cr_assert_eq(chring_snap_lookup_hash(s, 0), p1);
    cr_assert_eq(chring_snap_lookup_hash(s, lo), p1);
    cr_assert_eq(chring_snap_lookup_hash(s, lo + 1), p1);
    cr_assert_eq(chring_snap_lookup_hash(s, UINT32_MAX), p1);
    for (unsigned i = 0; i < 64; i++) {
        char key[16];
        snprintf(key, sizeof key, "/k%u", i);
        cr_assert_eq(chring_snap_lookup(s, key, strlen(key)), p1);
    }
    chring_snap_exit(r, s);
    /* Three points: a key at or below the first point goes to it again. */
    cr_assert_eq(chring_add(r, "c", 1, NULL), 0);
    s = chring_snap_enter(r);
    ring_ends(s, &p0, &p1, &lo, &hi);
    cr_assert_eq(chring_snap_lookup_hash(s, 0), p0);
    cr_assert_eq(chring_snap_lookup_hash(s, UINT32_MAX), p1);
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* A backend that is down passes its keys clockwise from where Varnish starts, as the shard
 * director's walk over unhealthy backends does. */
Test(compat_varnish, a_down_backend_passes_its_keys_on_clockwise)
{
    struct golden g;
    golden_load("varnish_c00007.tsv", &g);
    chring_t *r = ring_of(&g);
    cr_assert_eq(chring_set_down(r, "s3", 1), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    size_t n = chring_snap_points(s);
    for (size_t i = 0; i < n; i++) {
        uint64_t pos;
        const chring_member_t *owner;
        cr_assert_eq(chring_snap_point(s, i, &pos, &owner), 0);
        const chring_member_t *want = owner;
        for (size_t k = i; chring_member_is_down(want) == 1; k = (k + 1) % n)
            cr_assert_eq(chring_snap_point(s, k, NULL, &want), 0);
        cr_assert_eq(chring_snap_lookup_hash(s, pos), want, "point %zu", i);
    }
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* The owner by a binary search over the points, as Varnish's shard_lookup() finds it (first
 * point at or above h; above the top, the last point; two points, point 1). */
static const chring_member_t *reference_owner(const chring_snap_t *s, uint32_t h)
{
    size_t n = chring_snap_points(s), lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t pos;
        cr_assert_eq(chring_snap_point(s, mid, &pos, NULL), 0);
        if (pos < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t i = n == 2 ? 1 : lo == n ? n - 1 : lo;
    const chring_member_t *m;
    cr_assert_eq(chring_snap_point(s, i, NULL, &m), 0);
    return m;
}

/* A ring of more than 2^19 points, where the index may name owners in empty buckets for other
 * profiles: keys above the top point still go to the last point. */
Test(compat_varnish, a_large_ring_keeps_the_top_rule, .timeout = 60)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_VARNISH;
    cfg.vnodes = 11000;
    chring_t *r = NULL;
    cr_assert_eq(chring_new(&r, &cfg), 0);
    chring_change_t members[50];
    char names[50][16];
    for (int j = 0; j < 50; j++) {
        snprintf(names[j], sizeof names[j], "be-%d", j);
        members[j] = (chring_change_t){.name = names[j], .weight = 1};
    }
    cr_assert_eq(chring_sync(r, members, 50), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_gt(chring_snap_points(s), (size_t)1 << 19);
    uint64_t hi;
    const chring_member_t *last, *first;
    ring_ends(s, &first, &last, &(uint64_t){0}, &hi);
    for (uint64_t h = hi; h <= UINT32_MAX; h += (UINT32_MAX - hi) / 64 + 1)
        cr_assert_eq(chring_snap_lookup_hash(s, h), last, "above the top: %llx",
                     (unsigned long long)h);
    cr_assert_eq(chring_snap_lookup_hash(s, UINT32_MAX), last);
    uint32_t x = 12345;
    for (int k = 0; k < 20000; k++) {
        x = x * 1664525u + 1013904223u;
        cr_assert_eq(chring_snap_lookup_hash(s, x), reference_owner(s, x), "h %08x", x);
    }
    chring_snap_exit(r, s);
    chring_free(&r);
}
