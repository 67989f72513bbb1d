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
    char (*names)[32] = calloc(members, sizeof *names);
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

enum kind { ACQUIRE, LOOKUP, REPORT };

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
                sink += (unsigned)chring_report_load(c->r, chring_snap_member(held, k % n),
                                                     k % 32);
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
    enum { ACQUIRES = 20000 };
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

static void spill_table(void)
{
    static const unsigned windows[] = {4, 8, 16, 32, 64, 128, 256};
    printf("\n# spill rate (spills per acquire) over 16 members against leases in flight, c 1.25\n");
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
    cfgs[nc++] = (struct config){.name = "acquire 100x160, reports counting", .r = counting,
                                 .kind = ACQUIRE};
    cfgs[nc++] = (struct config){.name = "acquire 100x160, a report per 1000 acquires",
                                 .r = refreshed, .kind = ACQUIRE, .report_every = 1000};
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
