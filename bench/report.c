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
    chring_free(&plain);
    chring_free(&down);
    chring_free(&up);
#if HAVE_REPORTS
    chring_free(&counting);
    chring_free(&refreshed);
#endif
    return 0;
}
