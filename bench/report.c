/* chring-bench-report: what reported load (chring_report_load, docs/design.md §3) costs an
 * acquire, what a report costs, and what a ring whose every member is down costs a lookup and an
 * acquire (docs/bench.md, "Reported load and rings down").
 *
 * SPDX-License-Identifier: MIT
 *
 *   chring-bench-report [REPS] [MS]     (default 7 reps of 200 ms per configuration)
 *
 * One thread.  Each configuration is timed for MS milliseconds per rep, configurations
 * interleaved rep by rep, and the median of the reps is printed in ns per operation.  The
 * program uses only the public header, and compiles against a library without
 * chring_report_load too (the report rows are then left out): built against the previous release
 * it gives the "before" figures of the same machine.
 *
 *   acquire 100x160, no report        chring_acquire + chring_release, 64 leases in flight
 *   acquire 100x160, reports counting the same, every member with a report that counts
 *   acquire 100x160, reports 10/s/m   the same, a report on one member per 1,000 acquires
 *   report                            one chring_report_load
 *   lookup/acquire 1000x160 all up    plain lookup (enter + lookup + exit); acquire + release
 *   lookup/acquire 1000x160 all down  the same with every member down: -ENOENT / NULL
 *
 * Then (counts, not times) the spill rate against the leases in flight over 16 members, for
 * uniform keys and for a hot key (every other request on one key), without a floor and with
 * config.min_capacity 4: a window of N leases, each acquire replacing the oldest, 20,000
 * acquires; for the hot key also the most leases its owner held against the most its capacity
 * allowed then (the bound must hold: max(bound, floor)).
 *
 * And the cache tier the floor is for: 16 members, each an LRU cache of 64 keys; a Zipf stream
 * (s = 1) over 4,000 keys, 100,000 requests, N in flight; a request hits when its member's cache
 * holds its key (then the key is refreshed there; a miss inserts it).  The hit ratio with and
 * without the floor.
 */
#include <chring.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef CHRING_DEFAULT_REPORT_TTL_MS
#define HAVE_REPORTS 1
#else
#define HAVE_REPORTS 0
#endif

#define NKEYS 4096
#define WINDOW 64

static char keys[NKEYS][16];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "chring-bench-report: %s: %s\n", what, chring_strerror(rc));
    exit(1);
}

static chring_t *ring_of(unsigned members, uint32_t ttl_ms)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
#if HAVE_REPORTS
    cfg.report_ttl_ms = ttl_ms;
#else
    (void)ttl_ms;
#endif
    chring_t *r;
    int rc = chring_new(&r, &cfg);
    if (rc != 0)
        die("chring_new", rc);
    chring_change_t *ch = calloc(members, sizeof *ch);
    char(*names)[32] = calloc(members, sizeof *names);
    if (!ch || !names)
        die("calloc", -12);
    for (unsigned i = 0; i < members; i++) {
        snprintf(names[i], sizeof names[i], "10.%u.%u.%u:8000", i >> 16, (i >> 8) & 255, i & 255);
        ch[i].name = names[i];
        ch[i].weight = 1;
    }
    if ((rc = chring_sync(r, ch, members)) != 0)
        die("chring_sync", rc);
    free(ch);
    free(names);
    return r;
}

enum kind {
    ACQUIRE,
    LOOKUP,
    REPORT
};

struct config {
    const char *name;
    chring_t *r;
    enum kind kind;
    unsigned report_every; /* ACQUIRE: a report per this many acquires (0: none) */
    double ns[64];
};

static uint64_t rng = 0x9e3779b97f4a7c15u;

static void run(struct config *c, unsigned rep, double ms)
{
    chring_lease_t window[WINDOW];
    memset(window, 0, sizeof window);
    const chring_snap_t *held = chring_snap_hold(c->r);
    size_t n = chring_snap_len(held);
    uint64_t ops = 0, sink = 0, t0 = now_ns(), end = t0 + (uint64_t)(ms * 1e6);
    unsigned k = 0;
    do {
        for (int i = 0; i < 256; i++, k++) {
            const char *key = keys[k % NKEYS];
            if (c->kind == LOOKUP) {
                const chring_snap_t *s = chring_snap_enter(c->r);
                sink += (uintptr_t)chring_snap_lookup(s, key, 16);
                chring_snap_exit(c->r, s);
            } else if (c->kind == ACQUIRE) {
                chring_lease_t *l = &window[k % WINDOW];
                chring_release(c->r, l);
                sink += (unsigned)chring_acquire(c->r, key, 16, l);
#if HAVE_REPORTS
                if (c->report_every && k % c->report_every == 0)
                    chring_report_load(c->r, chring_snap_member(held, k / c->report_every % n),
                                       (k >> 4) % 32);
#endif
            } else {
#if HAVE_REPORTS
                sink += (unsigned)chring_report_load(c->r, chring_snap_member(held, k % n), k % 32);
#endif
            }
        }
        ops += 256;
    } while (now_ns() < end);
    c->ns[rep] = (double)(now_ns() - t0) / (double)ops;
    for (int i = 0; i < WINDOW; i++)
        chring_release(c->r, &window[i]);
    chring_snap_put(c->r, held);
    if (sink == 42)
        putchar(' ');
}

#if HAVE_REPORTS
static chring_t *floor_ring(uint32_t floor)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.min_capacity = floor;
    chring_t *r;
    int rc = chring_new(&r, &cfg);
    if (rc != 0)
        die("chring_new", rc);
    char name[32];
    for (int i = 0; i < 16; i++) {
        snprintf(name, sizeof name, "cache-%d", i);
        if ((rc = chring_add(r, name, 1, NULL)) != 0)
            die("chring_add", rc);
    }
    return r;
}

/* Spills per acquire with `window` leases in flight; hot: every other key is key 0.  *over:
 * how often the hot key's owner held more than the capacity it was admitted under. */
static double spill_rate(uint32_t floor, unsigned window, int hot, unsigned *max_hot,
                         unsigned *over)
{
    enum {
        ACQUIRES = 20000
    };
    chring_t *r = floor_ring(floor);
    chring_lease_t *w = calloc(window, sizeof *w);
    if (!w)
        die("calloc", -12);
    const chring_snap_t *s = chring_snap_hold(r);
    const chring_member_t *hot_owner = chring_snap_lookup(s, keys[0], 16);
    unsigned spills = 0;
    *max_hot = 0;
    *over = 0;
    for (unsigned i = 0; i < ACQUIRES; i++) {
        chring_lease_t *l = &w[i % window];
        chring_release(r, l);
        const char *key = hot && i % 2 == 0 ? keys[0] : keys[1 + (i * 7919u) % (NKEYS - 1)];
        uint64_t cap = chring_member_capacity(r, s, hot_owner);
        if (chring_acquire(r, key, 16, l) != 0)
            die("chring_acquire", -1);
        spills += l->outcome != CHRING_OUTCOME_OWNER;
        unsigned load = (unsigned)chring_member_load(hot_owner);
        if (load > *max_hot)
            *max_hot = load;
        if (l->member == hot_owner && load > cap)
            (*over)++;
    }
    for (unsigned i = 0; i < window; i++)
        chring_release(r, &w[i]);
    chring_snap_put(r, s);
    free(w);
    chring_free(&r);
    return (double)spills / ACQUIRES;
}

#define CACHE_KEYS 64
#define ZIPF_KEYS 4000

struct lru {
    unsigned key[CACHE_KEYS];
    uint64_t used[CACHE_KEYS];
    unsigned n;
};

/* Whether the cache holds k (refreshed), inserting it (evicting the least recently used) if not. */
static int lru_touch(struct lru *c, unsigned k, uint64_t now)
{
    for (unsigned i = 0; i < c->n; i++)
        if (c->key[i] == k) {
            c->used[i] = now;
            return 1;
        }
    unsigned at = c->n;
    if (c->n < CACHE_KEYS) {
        c->n++;
    } else {
        at = 0;
        for (unsigned i = 1; i < CACHE_KEYS; i++)
            if (c->used[i] < c->used[at])
                at = i;
    }
    c->key[at] = k;
    c->used[at] = now;
    return 0;
}

static double cache_hits(uint32_t floor, unsigned window)
{
    enum {
        REQUESTS = 100000
    };
    static double cdf[ZIPF_KEYS];
    double total = 0;
    for (unsigned i = 0; i < ZIPF_KEYS; i++)
        cdf[i] = (total += 1.0 / (i + 1));
    chring_t *r = floor_ring(floor);
    const chring_snap_t *s = chring_snap_hold(r);
    size_t n = chring_snap_len(s);
    struct lru *caches = calloc(n, sizeof *caches);
    chring_lease_t *w = calloc(window, sizeof *w);
    if (!caches || !w)
        die("calloc", -12);
    uint64_t z = 12345;
    unsigned hits = 0;
    char key[32];
    for (unsigned i = 0; i < REQUESTS; i++) {
        z = z * 6364136223846793005u + 1442695040888963407u;
        double u = (double)(z >> 11) / 9007199254740992.0 * total;
        unsigned lo = 0, hi = ZIPF_KEYS - 1;
        while (lo < hi) {
            unsigned mid = (lo + hi) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        chring_lease_t *l = &w[i % window];
        chring_release(r, l);
        int len = snprintf(key, sizeof key, "object-%u", lo);
        if (chring_acquire(r, key, (size_t)len, l) != 0)
            die("chring_acquire", -1);
        size_t m = 0;
        while (m < n && chring_snap_member(s, m) != l->member)
            m++;
        hits += lru_touch(&caches[m], lo, i + 1);
    }
    for (unsigned i = 0; i < window; i++)
        chring_release(r, &w[i]);
    chring_snap_put(r, s);
    free(caches);
    free(w);
    chring_free(&r);
    return (double)hits / REQUESTS;
}

static void cache_table(void)
{
    static const unsigned windows[] = {8, 32, 128};
    printf("\n# cache tier: hit ratio, 16 LRU caches of %d keys, Zipf(1) over %d keys, c 1.25\n",
           CACHE_KEYS, ZIPF_KEYS);
    printf("# %8s %12s %12s %12s\n", "in-flight", "no floor", "floor 4", "floor 16");
    for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++)
        printf("  %8u %11.1f%% %11.1f%% %11.1f%%\n", windows[i], 100 * cache_hits(0, windows[i]),
               100 * cache_hits(4, windows[i]), 100 * cache_hits(16, windows[i]));
}

static void spill_table(void)
{
    static const unsigned windows[] = {4, 8, 16, 32, 64, 128, 256};
    printf(
        "\n# spill rate (spills per acquire) over 16 members against leases in flight, c 1.25\n");
    printf("# %8s %14s %14s %14s %14s %18s\n", "in-flight", "uniform", "uniform+floor4", "hot",
           "hot+floor4", "hot owner max/over");
    for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++) {
        unsigned mh0, ov0, mh1, ov1, a, b, c2, d;
        double u0 = spill_rate(0, windows[i], 0, &a, &b);
        double u4 = spill_rate(4, windows[i], 0, &c2, &d);
        double h0 = spill_rate(0, windows[i], 1, &mh0, &ov0);
        double h4 = spill_rate(4, windows[i], 1, &mh1, &ov1);
        printf("  %8u %13.1f%% %13.1f%% %13.1f%% %13.1f%%  %5u/%u %5u/%u\n", windows[i], 100 * u0,
               100 * u4, 100 * h0, 100 * h4, mh0, ov0, mh1, ov1);
        if (ov0 != 0 || ov1 != 0)
            die("the hot key's owner went past its capacity", -1);
    }
}
#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    unsigned reps = argc > 1 ? (unsigned)atoi(argv[1]) : 7;
    double ms = argc > 2 ? atof(argv[2]) : 200;
    if (reps < 1 || reps > 64 || !(ms > 0))
        die("usage: chring-bench-report [REPS 1..64] [MS]", -22);
    for (unsigned i = 0; i < NKEYS; i++)
        for (int b = 0; b < 16; b++) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            keys[i][b] = (char)('a' + (rng >> 59));
        }

    chring_t *plain = ring_of(100, 1000);
    chring_t *down = ring_of(1000, 1000), *up = ring_of(1000, 1000);
    const chring_snap_t *s = chring_snap_hold(down);
    for (size_t i = 0; i < chring_snap_len(s); i++) {
        int rc = chring_set_down(down, chring_member_name(chring_snap_member(s, i)), 1);
        if (rc != 0)
            die("chring_set_down", rc);
    }
    chring_snap_put(down, s);

    struct config cfgs[8];
    size_t nc = 0;
    cfgs[nc++] = (struct config){.name = "acquire 100x160, no report", .r = plain, .kind = ACQUIRE};
#if HAVE_REPORTS
    chring_t *counting = ring_of(100, 3600000), *refreshed = ring_of(100, 3600000);
    s = chring_snap_hold(counting);
    for (size_t i = 0; i < chring_snap_len(s); i++)
        chring_report_load(counting, chring_snap_member(s, i), 3 + i % 5);
    chring_snap_put(counting, s);
    cfgs[nc++] = (struct config){
        .name = "acquire 100x160, reports counting", .r = counting, .kind = ACQUIRE};
    cfgs[nc++] = (struct config){.name = "acquire 100x160, a report per 1000 acquires",
                                 .r = refreshed,
                                 .kind = ACQUIRE,
                                 .report_every = 1000};
    cfgs[nc++] = (struct config){.name = "chring_report_load", .r = refreshed, .kind = REPORT};
#endif
    cfgs[nc++] = (struct config){.name = "lookup 1000x160, all up", .r = up, .kind = LOOKUP};
    cfgs[nc++] = (struct config){.name = "lookup 1000x160, all down", .r = down, .kind = LOOKUP};
    cfgs[nc++] = (struct config){.name = "acquire 1000x160, all up", .r = up, .kind = ACQUIRE};
    cfgs[nc++] = (struct config){.name = "acquire 1000x160, all down", .r = down, .kind = ACQUIRE};

    printf("# chring-bench-report, library %s: median of %u reps of %.0f ms, ns per operation, "
           "1 thread\n",
           chring_version(), reps, ms);
    for (unsigned rep = 0; rep < reps; rep++)
        for (size_t c = 0; c < nc; c++)
            run(&cfgs[c], rep, ms);
    for (size_t c = 0; c < nc; c++) {
        qsort(cfgs[c].ns, reps, sizeof(double), cmp_double);
        printf("%-48s %10.1f ns\n", cfgs[c].name, cfgs[c].ns[reps / 2]);
    }
#if HAVE_REPORTS
    spill_table();
    cache_table();
#endif
    chring_free(&plain);
    chring_free(&down);
    chring_free(&up);
#if HAVE_REPORTS
    chring_free(&counting);
    chring_free(&refreshed);
#endif
    return 0;
}
