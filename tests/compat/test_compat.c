/* Compatibility profiles (docs/design.md §2.1) against golden maps produced by the real
 * implementations: libmemcached (ketama, normative), npm hashring (ketama, documentation) and nginx
 * (`hash $key consistent`).  The golden data and its generators live in tests/compat/data and
 * tests/compat/gen.
 *
 * Suite compat_internal checks src/compat.c on its own: digest counts, point positions, the nginx
 * HOST/PORT split, and whole key maps through a small reference ring built here from the compat
 * functions.  Suite compat_api checks the same maps through the public API (profiles
 * CHRING_PROFILE_KETAMA and CHRING_PROFILE_NGINX, chring_lookup_name), including membership and
 * weight changes.  The data directory comes from the environment (COMPAT_DATA, set by meson). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "chring.h"
#include "compat.h"

/* ------------------------------------------------------------------------------------------- *
 * Golden files: "#member\tNAME\tWEIGHT" lines, other "#" comments, then "KEY\tMEMBER" lines.
 * ------------------------------------------------------------------------------------------- */

#define MAX_MEMBERS 128
#define MAX_KEYS 4096
#define MAX_LINE 512

struct golden {
    char path[1024];
    size_t members;
    char member[MAX_MEMBERS][CHRING_NAME_MAX + 1];
    uint32_t weight[MAX_MEMBERS];
    size_t keys;
    char *key[MAX_KEYS];
    char *owner[MAX_KEYS];
};

static const char *data_dir(void)
{
    const char *dir = getenv("COMPAT_DATA");
    cr_assert(dir != NULL && *dir != '\0', "COMPAT_DATA is not set (meson sets it)");
    return dir;
}

static FILE *open_data(const char *file, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", data_dir(), file);
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL, "cannot open %s", path);
    return f;
}

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
    struct golden *g = calloc(1, sizeof *g);
    cr_assert(g != NULL);
    FILE *f = open_data(file, g->path, sizeof g->path);
    char line[MAX_LINE];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *tab = strchr(line, '\t');
        if (strncmp(line, "#member\t", 8) == 0) {
            char *name = line + 8;
            char *w = strchr(name, '\t');
            cr_assert(w != NULL && g->members < MAX_MEMBERS, "%s: bad member line", g->path);
            *w++ = '\0';
            size_t len = strlen(name);
            cr_assert(len > 0 && len <= CHRING_NAME_MAX, "%s: bad member name", g->path);
            memcpy(g->member[g->members], name, len + 1);
            g->weight[g->members] = (uint32_t)strtoul(w, NULL, 10);
            g->members++;
            continue;
        }
        if (line[0] == '#' || line[0] == '\0')
            continue;
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

/* ------------------------------------------------------------------------------------------- *
 * A reference ring built from the compat functions alone, written the plainest way: every point,
 * sorted by (position, member name), a linear successor search.
 * ------------------------------------------------------------------------------------------- */

struct ref_point {
    uint32_t pos;
    const char *name;
};

struct ref_ring {
    size_t n;
    struct ref_point *points;
    int nginx;
};

static int ref_cmp(const void *a, const void *b)
{
    const struct ref_point *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    size_t lx = strlen(x->name), ly = strlen(y->name);
    int c = memcmp(x->name, y->name, lx < ly ? lx : ly);
    if (c != 0)
        return c;
    return lx < ly ? -1 : lx > ly;
}

static void ref_build(struct ref_ring *ring, const struct golden *g, int nginx)
{
    uint64_t total_weight = 0;
    for (size_t m = 0; m < g->members; m++)
        total_weight += g->weight[m];
    size_t total = 0;
    uint32_t count[MAX_MEMBERS];
    for (size_t m = 0; m < g->members; m++) {
        count[m] = nginx ? 160 * g->weight[m]
                         : 4 * chring__ketama_digests(g->weight[m], total_weight, g->members);
        total += count[m];
    }
    ring->points = calloc(total ? total : 1, sizeof *ring->points);
    uint32_t *pos = calloc(total ? total : 1, sizeof *pos);
    cr_assert(ring->points != NULL && pos != NULL);
    size_t at = 0;
    for (size_t m = 0; m < g->members; m++) {
        const char *name = g->member[m];
        if (nginx)
            chring__nginx_points(name, strlen(name), count[m], pos);
        else
            chring__ketama_points(name, strlen(name), count[m] / 4, pos);
        for (uint32_t i = 0; i < count[m]; i++)
            ring->points[at++] = (struct ref_point){pos[i], name};
    }
    free(pos);
    qsort(ring->points, total, sizeof *ring->points, ref_cmp);
    /* nginx keeps only the first (by name) of equal positions. */
    if (nginx && total > 0) {
        size_t kept = 1;
        for (size_t i = 1; i < total; i++)
            if (ring->points[i].pos != ring->points[kept - 1].pos)
                ring->points[kept++] = ring->points[i];
        total = kept;
    }
    ring->n = total;
    ring->nginx = nginx;
}

static const char *ref_lookup(const struct ref_ring *ring, const char *key)
{
    uint32_t h =
        ring->nginx ? chring__nginx_hash(key, strlen(key)) : chring__ketama_hash(key, strlen(key));
    size_t lo = 0, hi = ring->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ring->points[mid].pos < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return ring->points[lo == ring->n ? 0 : lo].name;
}

/* Counts keys whose reference owner differs from the golden owner; prints the first few unless
 * differences are expected (quiet).  (Criterion's exit status counts warnings as failures.) */
static size_t ref_mismatches_q(const char *file, int nginx, int quiet)
{
    struct golden *g = golden_load(file);
    struct ref_ring ring;
    ref_build(&ring, g, nginx);
    size_t bad = 0;
    for (size_t i = 0; i < g->keys; i++) {
        const char *got = ref_lookup(&ring, g->key[i]);
        if (strcmp(got, g->owner[i]) != 0 && bad++ < 5 && !quiet)
            cr_log_warn("%s: key '%s': expected %s, reference ring gives %s", file, g->key[i],
                        g->owner[i], got);
    }
    free(ring.points);
    golden_free(g);
    return bad;
}

static size_t ref_mismatches(const char *file, int nginx)
{
    return ref_mismatches_q(file, nginx, 0);
}

/* ------------------------------------------------------------------------------------------- *
 * compat_internal: src/compat.c alone
 * ------------------------------------------------------------------------------------------- */

Test(compat_internal, key_hash_known_answers)
{
    /* CRC-32 check value; MD5("") = d41d8cd9 8f00b204 ..., first word little-endian. */
    cr_expect_eq(chring__nginx_hash("123456789", 9), 0xcbf43926u);
    cr_expect_eq(chring__nginx_hash("", 0), 0u);
    cr_expect_eq(chring__ketama_hash("", 0), 0xd98c1dd4u);
    /* MD5("a") = 0cc175b9 c0f1b6a8 31c399e2 69772661 */
    cr_expect_eq(chring__ketama_hash("a", 1), 0xb975c10cu);
}

Test(compat_internal, ketama_digests_match_libmemcached)
{
    char path[1024];
    FILE *f = open_data("ketama_digests.tsv", path, sizeof path);
    char line[MAX_LINE];
    unsigned lines = 0, equal_seen[101] = {0};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        unsigned long long members, total, weight, digests;
        cr_assert(sscanf(line, "%llu %llu %llu %llu", &members, &total, &weight, &digests) == 4,
                  "%s: bad line '%s'", path, line);
        uint32_t got = chring__ketama_digests((uint32_t)weight, total, (size_t)members);
        cr_expect_eq(got, digests,
                     "members %llu, total weight %llu, weight %llu: libmemcached %llu, chring %u",
                     members, total, weight, digests, got);
        if (total == members && weight == 1 && members <= 100)
            equal_seen[members] = 1;
        lines++;
    }
    fclose(f);
    for (unsigned n = 1; n <= 100; n++)
        cr_expect(equal_seen[n], "%s: no line for %u equal members", path, n);
    cr_expect_gt(lines, 100u);
}

Test(compat_internal, ketama_digests_known_cases)
{
    /* Equal weights: 40 digests, except where single precision rounds below 40. */
    static const unsigned thirty_nine[] = {25, 47, 50, 55, 61, 71, 94, 100};
    for (unsigned n = 1; n <= 100; n++) {
        uint32_t expect = 40;
        for (size_t i = 0; i < sizeof thirty_nine / sizeof thirty_nine[0]; i++)
            if (thirty_nine[i] == n)
                expect = 39;
        cr_expect_eq(chring__ketama_digests(1, n, n), expect, "%u members", n);
        /* Scaling every weight alike changes nothing ... */
        cr_expect_eq(chring__ketama_digests(3, 3ull * n, n), chring__ketama_digests(1, n, n),
                     "%u members of weight 3", n);
    }
    /* 7, 14, 28 members: libmemcached 40 where npm hashring (double precision) gives 39. */
    cr_expect_eq(chring__ketama_digests(1, 7, 7), 40u);
    cr_expect_eq(chring__ketama_digests(1, 14, 14), 40u);
    cr_expect_eq(chring__ketama_digests(1, 28, 28), 40u);
    /* A light member next to a heavy one can get no digest at all. */
    cr_expect_eq(chring__ketama_digests(1, 101, 2), 0u);
    cr_expect_eq(chring__ketama_digests(100, 101, 2), 79u);
    /* Degenerate input: no crash, no points. */
    cr_expect_eq(chring__ketama_digests(0, 10, 2), 0u);
    cr_expect_eq(chring__ketama_digests(1, 0, 2), 0u);
    cr_expect_eq(chring__ketama_digests(1, 1, 0), 0u);
}

Test(compat_internal, hashring_digest_formula_differs_where_spec_says)
{
    /* npm hashring's own counts (double precision), recorded as documentation: it gives 39 where
     * libmemcached gives 40 at 7, 14, 28 members (and 49, 56, 98), and 40 where libmemcached
     * gives 39 (25, 47, 50, ...). */
    char path[1024];
    FILE *f = open_data("hashring_digests.tsv", path, sizeof path);
    char line[MAX_LINE];
    int differs[101] = {0};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        unsigned members, total, weight, digests;
        cr_assert(sscanf(line, "%u %u %u %u", &members, &total, &weight, &digests) == 4);
        if (members <= 100 && chring__ketama_digests(weight, total, members) != digests)
            differs[members] = (int)digests - (int)chring__ketama_digests(weight, total, members);
    }
    fclose(f);
    cr_expect_eq(differs[7], -1);
    cr_expect_eq(differs[14], -1);
    cr_expect_eq(differs[28], -1);
    cr_expect_eq(differs[25], 1);
    cr_expect_eq(differs[3], 0);
    cr_expect_eq(differs[8], 0);
}

Test(compat_internal, ketama_points_match_libmemcached_continuum)
{
    /* libmemcached's continuum for members with and without the default port: every position,
     * sorted, with its member (labels "<host>-<k>" on 11211, "<host>:<port>-<k>" otherwise). */
    struct golden *g = golden_load("ketama_ports.tsv");
    struct ref_ring ring;
    ref_build(&ring, g, 0);
    char path[1024];
    FILE *f = open_data("ketama_ports_continuum.tsv", path, sizeof path);
    char line[MAX_LINE];
    size_t i = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        line[strcspn(line, "\r\n")] = '\0';
        char *tab = strchr(line, '\t');
        cr_assert(tab != NULL);
        *tab = '\0';
        cr_assert_lt(i, ring.n, "libmemcached has more points than chring (%zu)", ring.n);
        uint32_t pos = (uint32_t)strtoul(line, NULL, 10);
        cr_expect_eq(ring.points[i].pos, pos, "point %zu: libmemcached %u, chring %u", i, pos,
                     ring.points[i].pos);
        cr_expect_str_eq(ring.points[i].name, tab + 1, "point %zu at %u", i, pos);
        i++;
    }
    fclose(f);
    cr_expect_eq(i, ring.n, "libmemcached %zu points, chring %zu", i, ring.n);
    free(ring.points);
    golden_free(g);
}

Test(compat_internal, ketama_point_order)
{
    /* Digest k of "<name>-<k>" gives points 4k .. 4k+3, words in order; a longer run extends a
     * shorter one. */
    uint32_t a[160], b[8];
    chring__ketama_points("10.0.1.1", 8, 40, a);
    chring__ketama_points("10.0.1.1", 8, 2, b);
    cr_expect_arr_eq(a, b, sizeof b);
    cr_expect_eq(a[0], chring__ketama_hash("10.0.1.1-0", 10));
    cr_expect_eq(a[4], chring__ketama_hash("10.0.1.1-1", 10));
    cr_expect_eq(a[156], chring__ketama_hash("10.0.1.1-39", 11));
}

/* The CRC chain of docs/design.md §2.1 written out with zlib for an explicit HOST and PORT. */
static void nginx_chain(const char *host, const char *port, uint32_t n, uint32_t *out)
{
    uint32_t prev = 0;
    for (uint32_t k = 0; k < n; k++) {
        unsigned char buf[600];
        size_t len = 0;
        memcpy(buf + len, host, strlen(host));
        len += strlen(host);
        buf[len++] = 0;
        memcpy(buf + len, port, strlen(port));
        len += strlen(port);
        for (int b = 0; b < 4; b++)
            buf[len++] = (unsigned char)(prev >> (8 * b));
        prev = (uint32_t)crc32(crc32(0L, Z_NULL, 0), buf, (uInt)len);
        out[k] = prev;
    }
}

static void expect_split(const char *name, const char *host, const char *port)
{
    uint32_t got[320], want[320];
    chring__nginx_points(name, strlen(name), 320, got);
    nginx_chain(host, port, 320, want);
    cr_expect_arr_eq(got, want, sizeof want, "'%s' should split as HOST '%s' PORT '%s'", name, host,
                     port);
}

Test(compat_internal, nginx_split)
{
    expect_split("unix:/path", "/path", "");
    expect_split("UNIX:/x", "/x", "");
    expect_split("UnIx:/tmp/a.sock", "/tmp/a.sock", "");
    expect_split("unix:/a:80", "/a:80", "");
    expect_split("unix:", "", "");
    expect_split("unix", "unix", "");
    expect_split("host", "host", "");
    expect_split("host:", "host", "");
    expect_split("host:80", "host", "80");
    expect_split("127.0.0.1:28081", "127.0.0.1", "28081");
    expect_split("[::1]:8080", "[::1]", "8080");
    expect_split("[::1]", "[::1]", "");
    expect_split("a:b:c", "a:b:c", "");
    expect_split("a:b:8", "a:b", "8");
    expect_split("host:8a", "host:8a", "");
    expect_split(":80", "", "80");
    expect_split("80", "80", "");
    expect_split("10.0.0.1", "10.0.0.1", "");
}

Test(compat_internal, nginx_chain_grows_by_weight)
{
    /* Raising a weight continues the same chain: weight 1's points are weight 2's first 160. */
    uint32_t one[160], two[320];
    chring__nginx_points("127.0.0.1:28081", 15, 160, one);
    chring__nginx_points("127.0.0.1:28081", 15, 320, two);
    cr_expect_arr_eq(one, two, sizeof one);
}

static const char *const ketama_libmemcached_maps[] = {
    "ketama_n3.tsv",   "ketama_n7.tsv",      "ketama_n8.tsv",       "ketama_n8_minus4.tsv",
    "ketama_n25.tsv",  "ketama_n47.tsv",     "ketama_weighted.tsv", "ketama_ports.tsv",
    "ketama_zero.tsv", "ketama_mixed30.tsv",
};
static const char *const nginx_maps[] = {
    "nginx_n2.tsv",        "nginx_n3.tsv",       "nginx_n5.tsv",       "nginx_n8.tsv",
    "nginx_n8_minus4.tsv", "nginx_n8_down4.tsv", "nginx_weighted.tsv", "nginx_unix.tsv",
    "nginx_noport.tsv",    "nginx_port80.tsv",
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

Test(compat_internal, ketama_reference_ring_matches_libmemcached)
{
    for (size_t i = 0; i < COUNT(ketama_libmemcached_maps); i++)
        cr_expect_eq(ref_mismatches(ketama_libmemcached_maps[i], 0), 0u, "%s",
                     ketama_libmemcached_maps[i]);
}

Test(compat_internal, ketama_reference_ring_vs_hashring)
{
    /* hashring agrees where its digest counts agree with libmemcached's ... */
    cr_expect_eq(ref_mismatches("hashring_n3.tsv", 0), 0u);
    cr_expect_eq(ref_mismatches("hashring_weighted.tsv", 0), 0u);
    /* ... and not at 7 members (39 digests each in hashring, 40 in libmemcached). */
    cr_expect_gt(ref_mismatches_q("hashring_n7.tsv", 0, 1), 0u);
}

Test(compat_internal, nginx_reference_ring_matches_nginx)
{
    for (size_t i = 0; i < COUNT(nginx_maps); i++)
        cr_expect_eq(ref_mismatches(nginx_maps[i], 1), 0u, "%s", nginx_maps[i]);
}

/* ------------------------------------------------------------------------------------------- *
 * compat_api: the same maps through the public API.  These are the acceptance tests of the
 * profiles' integration into the library.
 * ------------------------------------------------------------------------------------------- */

static chring_t *ring_new(chring_profile_t profile, uint32_t vnodes)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    cfg.vnodes = vnodes; /* ignored by both profiles */
    chring_t *r = NULL;
    int rc = chring_new(&r, &cfg);
    cr_assert_eq(rc, 0, "chring_new: %s", chring_strerror(rc));
    cr_assert(r != NULL);
    return r;
}

static void ring_add_all(chring_t *r, const struct golden *g, int reverse)
{
    for (size_t i = 0; i < g->members; i++) {
        size_t m = reverse ? g->members - 1 - i : i;
        int rc = chring_add(r, g->member[m], g->weight[m], NULL);
        cr_assert_eq(rc, 0, "%s: chring_add(%s, %u): %s", g->path, g->member[m], g->weight[m],
                     chring_strerror(rc));
    }
}

/* Every golden key's owner through chring_lookup_name; returns the mismatch count. */
static size_t api_mismatches(chring_t *r, const struct golden *g)
{
    size_t bad = 0;
    char name[CHRING_NAME_MAX + 1];
    for (size_t i = 0; i < g->keys; i++) {
        int rc = chring_lookup_name(r, g->key[i], strlen(g->key[i]), name, sizeof name);
        if (rc < 0) {
            if (bad++ < 5)
                cr_log_warn("%s: key '%s': chring_lookup_name: %s", g->path, g->key[i],
                            chring_strerror(rc));
            continue;
        }
        if (strcmp(name, g->owner[i]) != 0 && bad++ < 5)
            cr_log_warn("%s: key '%s': expected %s, chring gives %s", g->path, g->key[i],
                        g->owner[i], name);
    }
    return bad;
}

static void check_map(chring_profile_t profile, const char *file, int reverse, uint32_t vnodes)
{
    struct golden *g = golden_load(file);
    chring_t *r = ring_new(profile, vnodes);
    ring_add_all(r, g, reverse);
    cr_expect_eq(chring_len(r), g->members, "%s", file);
    size_t bad = api_mismatches(r, g);
    cr_expect_eq(bad, 0u, "%s: %zu of %zu keys differ from the golden map", file, bad, g->keys);
    chring_free(&r);
    golden_free(g);
}

/* The point count a snapshot reports equals the profile's: sum of 4 * d_j or 160 * w_j (nginx
 * before dropping equal positions, so only an upper bound there). */
static void check_points(chring_profile_t profile, const char *file)
{
    struct golden *g = golden_load(file);
    chring_t *r = ring_new(profile, 160);
    ring_add_all(r, g, 0);
    uint64_t total_weight = 0, expect = 0;
    for (size_t m = 0; m < g->members; m++)
        total_weight += g->weight[m];
    for (size_t m = 0; m < g->members; m++)
        expect += profile == CHRING_PROFILE_NGINX
                      ? 160u * g->weight[m]
                      : 4u * chring__ketama_digests(g->weight[m], total_weight, g->members);
    const chring_snap_t *s = chring_snap_enter(r);
    size_t points = chring_snap_points(s);
    chring_snap_exit(r, s);
    if (profile == CHRING_PROFILE_NGINX)
        cr_expect(points <= expect && points + 4 >= expect, "%s: %zu points, expected about %llu",
                  file, points, (unsigned long long)expect);
    else
        cr_expect_eq(points, expect, "%s: %zu points, expected %llu", file, points,
                     (unsigned long long)expect);
    chring_free(&r);
    golden_free(g);
}

Test(compat_api, ketama_matches_libmemcached)
{
    for (size_t i = 0; i < COUNT(ketama_libmemcached_maps); i++)
        check_map(CHRING_PROFILE_KETAMA, ketama_libmemcached_maps[i], 0, 160);
}

Test(compat_api, ketama_ignores_join_order_and_vnodes)
{
    check_map(CHRING_PROFILE_KETAMA, "ketama_weighted.tsv", 1, 7);
    check_map(CHRING_PROFILE_KETAMA, "ketama_ports.tsv", 1, 1000);
}

Test(compat_api, ketama_point_counts)
{
    check_points(CHRING_PROFILE_KETAMA, "ketama_n25.tsv");
    check_points(CHRING_PROFILE_KETAMA, "ketama_weighted.tsv");
    check_points(CHRING_PROFILE_KETAMA, "ketama_zero.tsv");
}

Test(compat_api, ketama_matches_hashring_with_full_names)
{
    check_map(CHRING_PROFILE_KETAMA, "hashring_n3.tsv", 0, 160);
    check_map(CHRING_PROFILE_KETAMA, "hashring_weighted.tsv", 0, 160);
}

Test(compat_api, ketama_remove_rebuilds_like_libmemcached)
{
    struct golden *full = golden_load("ketama_n8.tsv");
    struct golden *less = golden_load("ketama_n8_minus4.tsv");
    chring_t *r = ring_new(CHRING_PROFILE_KETAMA, 160);
    ring_add_all(r, full, 0);
    cr_expect_eq(api_mismatches(r, full), 0u);
    cr_assert_eq(chring_remove(r, "10.0.1.4"), 0);
    cr_expect_eq(api_mismatches(r, less), 0u, "after removing 10.0.1.4");
    cr_assert_eq(chring_add(r, "10.0.1.4", 1, NULL), 0);
    cr_expect_eq(api_mismatches(r, full), 0u, "after adding 10.0.1.4 back");
    chring_free(&r);
    golden_free(full);
    golden_free(less);
}

Test(compat_api, ketama_weight_change_rebuilds_like_libmemcached)
{
    /* Start with every member at weight 1, then set the golden weights one by one: the final
     * ring must be libmemcached's for the final weights (points depend on the whole membership). */
    struct golden *g = golden_load("ketama_weighted.tsv");
    chring_t *r = ring_new(CHRING_PROFILE_KETAMA, 160);
    for (size_t m = 0; m < g->members; m++)
        cr_assert_eq(chring_add(r, g->member[m], 1, NULL), 0);
    for (size_t m = 0; m < g->members; m++)
        if (g->weight[m] != 1)
            cr_assert_eq(chring_set_weight(r, g->member[m], g->weight[m]), 0);
    cr_expect_eq(api_mismatches(r, g), 0u);
    chring_free(&r);
    golden_free(g);
}

Test(compat_api, nginx_matches_nginx)
{
    for (size_t i = 0; i < COUNT(nginx_maps); i++)
        check_map(CHRING_PROFILE_NGINX, nginx_maps[i], 0, 160);
}

Test(compat_api, nginx_ignores_join_order_and_vnodes)
{
    check_map(CHRING_PROFILE_NGINX, "nginx_weighted.tsv", 1, 3);
    check_map(CHRING_PROFILE_NGINX, "nginx_unix.tsv", 1, 1000);
}

Test(compat_api, nginx_point_counts)
{
    check_points(CHRING_PROFILE_NGINX, "nginx_weighted.tsv");
    check_points(CHRING_PROFILE_NGINX, "nginx_n8.tsv");
}

Test(compat_api, nginx_remove_and_weight_change)
{
    struct golden *full = golden_load("nginx_n8.tsv");
    struct golden *less = golden_load("nginx_n8_minus4.tsv");
    struct golden *weighted = golden_load("nginx_weighted.tsv");
    chring_t *r = ring_new(CHRING_PROFILE_NGINX, 160);
    ring_add_all(r, full, 0);
    cr_expect_eq(api_mismatches(r, full), 0u);
    cr_assert_eq(chring_remove(r, "127.0.0.1:28084"), 0);
    cr_expect_eq(api_mismatches(r, less), 0u, "after removing 127.0.0.1:28084");
    chring_free(&r);

    /* nginx_weighted's members at weight 1, then raised: the chain continues. */
    r = ring_new(CHRING_PROFILE_NGINX, 160);
    for (size_t m = 0; m < weighted->members; m++)
        cr_assert_eq(chring_add(r, weighted->member[m], 1, NULL), 0);
    for (size_t m = 0; m < weighted->members; m++)
        if (weighted->weight[m] != 1)
            cr_assert_eq(chring_set_weight(r, weighted->member[m], weighted->weight[m]), 0);
    cr_expect_eq(api_mismatches(r, weighted), 0u);
    chring_free(&r);
    golden_free(full);
    golden_free(less);
    golden_free(weighted);
}

Test(compat_api, hash_is_the_profiles)
{
    chring_t *k = ring_new(CHRING_PROFILE_KETAMA, 160);
    chring_t *n = ring_new(CHRING_PROFILE_NGINX, 160);
    cr_assert_eq(chring_add(k, "10.0.1.1", 1, NULL), 0);
    cr_assert_eq(chring_add(n, "127.0.0.1:28081", 1, NULL), 0);
    const chring_snap_t *sk = chring_snap_enter(k);
    cr_expect_eq(chring_snap_hash(sk, "a", 1), (uint64_t)chring__ketama_hash("a", 1));
    chring_snap_exit(k, sk);
    const chring_snap_t *sn = chring_snap_enter(n);
    cr_expect_eq(chring_snap_hash(sn, "123456789", 9), 0xcbf43926u);
    cr_expect_eq(chring_snap_hash_bits(sn), 32u);
    chring_snap_exit(n, sn);
    chring_free(&k);
    chring_free(&n);
}

/* ------------------------------------------------------------------------------------------- *
 * Ties: two members with a point at the same position.  chring gives the position to the
 * smaller name, whatever the join order (ketama itself uses insertion order there; nginx keeps
 * whichever its unstable qsort put first).  No golden map can show this, so the test finds a
 * colliding pair of names among generated candidates, then a key whose position falls on the arc
 * ending at the shared point.
 * ------------------------------------------------------------------------------------------- */

struct cand_point {
    uint32_t pos;
    uint32_t cand;
};

static int cand_cmp(const void *a, const void *b)
{
    const struct cand_point *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    return x->cand < y->cand ? -1 : x->cand > y->cand;
}

#define TIE_CANDIDATES 3000

static void cand_name(char *buf, size_t cap, uint32_t i)
{
    snprintf(buf, cap, "10.9.%u.%u:11311", i / 250, i % 250);
}

/* Finds two candidate names sharing a point in a 2-member ring of the profile (160 points each);
 * writes them and the shared position.  Returns 0 if none was found. */
static int find_tie(int nginx, char *a, char *b, size_t cap, uint32_t *tied)
{
    size_t total = (size_t)TIE_CANDIDATES * 160;
    struct cand_point *all = malloc(total * sizeof *all);
    uint32_t pos[160];
    cr_assert(all != NULL);
    for (uint32_t i = 0; i < TIE_CANDIDATES; i++) {
        char name[64];
        cand_name(name, sizeof name, i);
        if (nginx)
            chring__nginx_points(name, strlen(name), 160, pos);
        else
            chring__ketama_points(name, strlen(name), chring__ketama_digests(1, 2, 2), pos);
        for (uint32_t k = 0; k < 160; k++)
            all[(size_t)i * 160 + k] = (struct cand_point){pos[k], i};
    }
    qsort(all, total, sizeof *all, cand_cmp);
    int found = 0;
    for (size_t i = 1; i < total && !found; i++) {
        if (all[i].pos == all[i - 1].pos && all[i].cand != all[i - 1].cand) {
            cand_name(a, cap, all[i - 1].cand);
            cand_name(b, cap, all[i].cand);
            *tied = all[i].pos;
            found = 1;
        }
    }
    free(all);
    return found;
}

static void check_tie(chring_profile_t profile)
{
    int nginx = profile == CHRING_PROFILE_NGINX;
    char a[64], b[64];
    uint32_t tied;
    cr_assert(find_tie(nginx, a, b, sizeof a, &tied), "no colliding pair among %d candidates",
              TIE_CANDIDATES);
    /* The predecessor of the shared position on the 2-member ring. */
    struct golden *g = calloc(1, sizeof *g);
    cr_assert(g != NULL);
    snprintf(g->path, sizeof g->path, "tie %s/%s", a, b);
    memcpy(g->member[0], a, strlen(a) + 1);
    memcpy(g->member[1], b, strlen(b) + 1);
    g->weight[0] = g->weight[1] = 1;
    g->members = 2;
    struct ref_ring ring;
    ref_build(&ring, g, nginx);
    uint32_t before = 0;
    for (size_t i = 0; i < ring.n; i++)
        if (ring.points[i].pos < tied)
            before = ring.points[i].pos;
    cr_assert_gt(tied, before, "the shared point should not be the smallest");
    /* A key on the arc (before, tied]. */
    char key[64];
    int have_key = 0;
    for (uint32_t j = 0; j < 2000000 && !have_key; j++) {
        snprintf(key, sizeof key, "tie-key-%u", j);
        uint32_t h =
            nginx ? chring__nginx_hash(key, strlen(key)) : chring__ketama_hash(key, strlen(key));
        have_key = h > before && h <= tied;
    }
    cr_assert(have_key, "no key found on the arc ending at %u", tied);
    const char *smaller = strcmp(a, b) < 0 ? a : b;
    cr_expect_str_eq(ref_lookup(&ring, key), smaller);
    for (int reverse = 0; reverse < 2; reverse++) {
        chring_t *r = ring_new(profile, 160);
        ring_add_all(r, g, reverse);
        char owner[CHRING_NAME_MAX + 1];
        cr_assert_geq(chring_lookup_name(r, key, strlen(key), owner, sizeof owner), 0);
        cr_expect_str_eq(owner, smaller, "%s and %s share position %u; key %s (join order %s)", a,
                         b, tied, key, reverse ? "reversed" : "as listed");
        chring_free(&r);
    }
    free(ring.points);
    free(g);
}

Test(compat_api, ketama_tie_goes_to_smaller_name)
{
    check_tie(CHRING_PROFILE_KETAMA);
}

Test(compat_api, nginx_tie_goes_to_smaller_name)
{
    check_tie(CHRING_PROFILE_NGINX);
}

/* ------------------------------------------------------------------------------------------- *
 * Bad input specific to the compatibility profiles (docs/design.md §2.1, §6).
 * ------------------------------------------------------------------------------------------- */

static void check_vnodes_ignored(chring_profile_t profile, uint32_t vnodes)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    cfg.vnodes = vnodes;
    chring_t *r = NULL;
    int rc = chring_new(&r, &cfg);
    cr_expect_eq(rc, 0, "profile %d, vnodes %u: %s", (int)profile, vnodes, chring_strerror(rc));
    if (rc != 0)
        return;
    cr_expect_eq(chring_add(r, "10.0.1.1", 1, NULL), 0);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_expect_eq(chring_snap_points(s), 160u, "profile %d, vnodes %u", (int)profile, vnodes);
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(compat_api, vnodes_ignored)
{
    static const uint32_t values[] = {1, 7, 160, UINT32_MAX};
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
        check_vnodes_ignored(CHRING_PROFILE_KETAMA, values[v]);
        check_vnodes_ignored(CHRING_PROFILE_NGINX, values[v]);
    }
}

Test(compat_api, vnodes_zero_accepted)
{
    /* docs/design.md §2.1: "any vnodes value is accepted and ignored" for ketama and nginx.  (The
     * general rule of §6, vnodes 0 is -EINVAL, concerns the profiles that use vnodes.) */
    check_vnodes_ignored(CHRING_PROFILE_KETAMA, 0);
    check_vnodes_ignored(CHRING_PROFILE_NGINX, 0);
}

static uint32_t weight_of(chring_t *r, const char *name)
{
    uint32_t weight = 0;
    const chring_snap_t *s = chring_snap_enter(r);
    for (size_t i = 0; i < chring_snap_len(s); i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        if (strcmp(chring_member_name(m), name) == 0)
            weight = chring_member_weight(m);
    }
    chring_snap_exit(r, s);
    return weight;
}

Test(compat_api, nginx_point_count_limits)
{
    /* 160 * weight above CHRING_POINTS_MAX is -E2BIG, also where 160 * weight wraps a uint32. */
    chring_t *r = ring_new(CHRING_PROFILE_NGINX, 160);
    uint32_t over = CHRING_POINTS_MAX / 160 + 1;
    cr_expect_eq(chring_add(r, "a:1", over, NULL), -E2BIG);
    cr_expect_eq(chring_add(r, "a:1", 26843546u, NULL), -E2BIG); /* 160 * w = 2^32 + 64 */
    cr_expect_eq(chring_add(r, "a:1", UINT32_MAX, NULL), -E2BIG);
    cr_expect_eq(chring_len(r), 0u);
    cr_assert_eq(chring_add(r, "a:1", 1, NULL), 0);
    cr_expect_eq(chring_set_weight(r, "a:1", 26843546u), -E2BIG);
    cr_expect_eq(weight_of(r, "a:1"), 1u);
    chring_free(&r);
}

Test(compat_api, ketama_large_weights)
{
    /* Weights near UINT32_MAX: the total needs 64 bits; counts stay libmemcached's formula. */
    chring_t *r = ring_new(CHRING_PROFILE_KETAMA, 160);
    cr_assert_eq(chring_add(r, "a", UINT32_MAX, NULL), 0);
    cr_assert_eq(chring_add(r, "b", UINT32_MAX, NULL), 0);
    cr_assert_eq(chring_add(r, "c", 1, NULL), 0);
    uint64_t total = 2ull * UINT32_MAX + 1;
    size_t expect = 4u * (chring__ketama_digests(UINT32_MAX, total, 3) * 2u +
                          chring__ketama_digests(1, total, 3));
    const chring_snap_t *s = chring_snap_enter(r);
    cr_expect_eq(chring_snap_points(s), expect);
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(compat_api, ketama_ring_is_libmemcached_continuum)
{
    /* The snapshot's points, in ring order, are libmemcached's continuum point for point. */
    struct golden *g = golden_load("ketama_ports.tsv");
    chring_t *r = ring_new(CHRING_PROFILE_KETAMA, 160);
    ring_add_all(r, g, 1);
    const chring_snap_t *s = chring_snap_enter(r);
    cr_expect_eq(chring_snap_hash_bits(s), 32u);
    char path[1024];
    FILE *f = open_data("ketama_ports_continuum.tsv", path, sizeof path);
    char line[MAX_LINE];
    size_t i = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        line[strcspn(line, "\r\n")] = '\0';
        char *tab = strchr(line, '\t');
        cr_assert(tab != NULL);
        *tab = '\0';
        uint64_t pos = 0;
        const chring_member_t *m = NULL;
        int rc = chring_snap_point(s, i, &pos, &m);
        if (rc != 0 || pos != strtoull(line, NULL, 10) || strcmp(chring_member_name(m), tab + 1))
            if (bad++ < 5)
                cr_log_error("point %zu: libmemcached %s %s, chring rc %d %llu %s", i, line,
                             tab + 1, rc, (unsigned long long)pos,
                             rc == 0 ? chring_member_name(m) : "-");
        i++;
    }
    fclose(f);
    cr_expect_eq(bad, 0u);
    cr_expect_eq(chring_snap_points(s), i);
    chring_snap_exit(r, s);
    chring_free(&r);
    golden_free(g);
}
