/* chring-demo: a simulated multithreaded proxy routing a skewed request stream with bounded loads.
 *
 * SPDX-License-Identifier: MIT
 *
 *   chring-demo [--out DIR] [--only loads|cache] [--phase-ms N] [--threads N] [--keys N]
 *               [--zipf S] [--cache-keys N] [--cache-size N] [--window N] [--window-ms N]
 *               [--no-plot]
 *
 * Two parts, both run by default: the load phases (this file) and the cache tier (cache.c: the
 * hit ratio of LRU backends through a join with and without slow start and through a flap done
 * as down/up and as remove/re-add; it writes chring-demo-cache.csv, .gp and .png).
 *
 * Worker threads (one per core, at least 2) route a Zipf(S) request stream over --keys keys to a
 * pool of backends.  Each request is placed with chring_acquire() and held for a random number
 * of further requests of its worker (a slot queue: a new request takes a random slot and releases
 * the request that held it, so holding times are geometric with a mean of QUEUE requests), then
 * released with chring_release().  The same traffic then runs again with bounded loads OFF: a
 * plain chring_snap_lookup() and the proxy's own in-flight counters.  Both runs go through four
 * phases while members join, leave and change weight under traffic, and print per phase:
 * requests routed per second, each member's peak load against its capacity with bounded loads on
 * and off, the spill rate, saturated events, and the fraction of keys each membership change
 * moved on the ring against hash mod N.
 *
 * Files (in DIR, default "."): chring-demo-loads.csv (per phase and member: weight, share of
 * requests, capacity, peak load bounded / unbounded), chring-demo-loads.gp (a gnuplot script with
 * the data inline) and chring-demo-loads.png when gnuplot is on PATH.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chring.h"
#include "demo.h"

#define MAX_MEMBERS 16
#define NPHASES 4
#define QUEUE 64 /* outstanding requests per worker (slots) */
#define KEY_LEN 16
#define BALANCE 1.25
#define MAX_WORKERS 64

/* ---------------------------------------------------------------------------------------------
 * Options, helpers
 * ------------------------------------------------------------------------------------------- */

static const char *out_dir = ".";
static unsigned phase_ms = 600;
static int nworkers;
static unsigned nkeys = 10000;
static double zipf_s = 1.0;
static bool plot = true;

void demo_die(const char *what, int err)
{
    fprintf(stderr, "chring-demo: %s: %s\n", what, err < 0 ? chring_strerror(err) : strerror(err));
    exit(1);
}

uint64_t demo_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void demo_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * The request stream: Zipf over nkeys keys
 * ------------------------------------------------------------------------------------------- */

static double *zipf_cdf; /* cdf[i] = P(rank <= i) */
static double *zipf_p;   /* probability of key i */
static char (*keys)[KEY_LEN + 1];

static void zipf_init(void)
{
    zipf_cdf = malloc(nkeys * sizeof *zipf_cdf);
    zipf_p = malloc(nkeys * sizeof *zipf_p);
    keys = malloc(nkeys * sizeof *keys);
    if (!zipf_cdf || !zipf_p || !keys)
        demo_die("out of memory", ENOMEM);
    double h = 0;
    for (unsigned i = 0; i < nkeys; i++)
        h += 1.0 / pow((double)(i + 1), zipf_s);
    double acc = 0;
    for (unsigned i = 0; i < nkeys; i++) {
        zipf_p[i] = 1.0 / pow((double)(i + 1), zipf_s) / h;
        acc += zipf_p[i];
        zipf_cdf[i] = acc;
        /* Fixed-length keys such as a proxy's session or object ids. */
        snprintf(keys[i], sizeof keys[i], "object:%09u", i * 2654435761u % 1000000000u);
    }
    zipf_cdf[nkeys - 1] = 1.0;
}

static inline unsigned zipf_draw(uint64_t *s)
{
    double u = (double)(demo_rnd(s) >> 11) * 0x1p-53;
    unsigned lo = 0, hi = nkeys - 1;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (zipf_cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---------------------------------------------------------------------------------------------
 * Members and phases
 * ------------------------------------------------------------------------------------------- */

typedef struct backend {
    char name[16];
    int index;
} backend_t;

static backend_t backends[MAX_MEMBERS];

typedef struct phase_desc {
    const char *title;
} phase_desc_t;

static const phase_desc_t phases[NPHASES] = {
    {"10 backends, weight 1"},
    {"2 backends join (backend-11, backend-12)"},
    {"3 backends leave (backend-03, backend-06, backend-09)"},
    {"backend-01 grows to weight 3"},
};

/* Applies phase p's membership change (p = 0: the initial pool). */
static void apply_phase(chring_t *r, int p)
{
    int rc = 0;
    if (p == 0) {
        chring_change_t ch[10];
        for (int i = 0; i < 10; i++)
            ch[i] = (chring_change_t){backends[i].name, 1, &backends[i]};
        rc = chring_sync(r, ch, 10);
    } else if (p == 1) {
        chring_change_t ch[2] = {{backends[10].name, 1, &backends[10]},
                                 {backends[11].name, 1, &backends[11]}};
        rc = chring_update(r, ch, 2);
    } else if (p == 2) {
        chring_change_t ch[3] = {
            {backends[2].name, 0, NULL}, {backends[5].name, 0, NULL}, {backends[8].name, 0, NULL}};
        rc = chring_update(r, ch, 3);
    } else {
        rc = chring_set_weight(r, backends[0].name, 3);
    }
    if (rc < 0)
        demo_die("membership change", rc);
}

/* ---------------------------------------------------------------------------------------------
 * Workers
 * ------------------------------------------------------------------------------------------- */

typedef struct slot {
    bool busy;
    int member;           /* backend index */
    chring_lease_t lease; /* bounded mode */
} slot_t;

typedef struct worker {
    pthread_t tid;
    uint64_t seed;
    bool bounded;
    chring_t *ring;
    slot_t slots[QUEUE];
    uint64_t requests[NPHASES + 1];
    uint64_t peak[NPHASES + 1][MAX_MEMBERS];
    uint64_t cap_at_peak[NPHASES + 1][MAX_MEMBERS];
    char pad[64];
} worker_t;

static worker_t workers[MAX_WORKERS];
static _Atomic int cur_phase; /* 0: warm-up and settling after a change, 1..NPHASES */
static _Atomic int stop;
/* The proxy's own count of requests in flight per backend: each on its own cache line. */
static struct {
    _Atomic uint64_t n;
    char pad[56];
} inflight[MAX_MEMBERS];

static void finish(worker_t *w, slot_t *s)
{
    atomic_fetch_sub_explicit(&inflight[s->member].n, 1, memory_order_relaxed);
    if (w->bounded)
        chring_release(w->ring, &s->lease);
    s->busy = false;
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        int phase = atomic_load_explicit(&cur_phase, memory_order_relaxed);
        const char *key = keys[zipf_draw(&w->seed)];
        slot_t *s = &w->slots[demo_rnd(&w->seed) % QUEUE];
        if (s->busy)
            finish(w, s);
        const chring_member_t *m;
        if (w->bounded) {
            int rc = chring_acquire(w->ring, key, KEY_LEN, &s->lease);
            if (rc < 0)
                demo_die("chring_acquire", rc);
            m = s->lease.member;
        } else {
            const chring_snap_t *snap = chring_snap_enter(w->ring);
            m = chring_snap_lookup(snap, key, KEY_LEN);
            chring_snap_exit(w->ring, snap);
            if (!m)
                demo_die("chring_snap_lookup", -ENOENT);
        }
        /* The udata (our backend) lives as long as the program; the index is all we keep. */
        s->member = ((const backend_t *)chring_member_udata(m))->index;
        s->busy = true;
        /* Counted after the acquire and uncounted before the release, our counter never exceeds
         * the ring's admitted load of the member. */
        uint64_t v = atomic_fetch_add_explicit(&inflight[s->member].n, 1, memory_order_relaxed) + 1;
        /* A request during which the phase changed (this thread may have been preempted for a
         * long time in between) counts as settling time, not as either phase. */
        if (atomic_load_explicit(&cur_phase, memory_order_relaxed) != phase)
            phase = 0;
        if (v > w->peak[phase][s->member]) {
            w->peak[phase][s->member] = v;
            if (w->bounded) {
                const chring_snap_t *snap = chring_snap_enter(w->ring);
                w->cap_at_peak[phase][s->member] = chring_member_capacity(w->ring, snap, m);
                chring_snap_exit(w->ring, snap);
            }
        }
        w->requests[phase]++;
    }
    for (unsigned i = 0; i < QUEUE; i++)
        if (w->slots[i].busy)
            finish(w, &w->slots[i]);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Measurements of one pass
 * ------------------------------------------------------------------------------------------- */

typedef struct member_result {
    bool present;
    uint32_t weight;
    double req_share; /* share of the request stream the member owns (plain lookup) */
    double arc_share;
    uint64_t peak, cap_at_peak, acquires, spilled_in;
} member_result_t;

typedef struct phase_result {
    double seconds;
    uint64_t requests;
    double mean_inflight;
    uint64_t acquires, spills, saturated;
    unsigned members;
    uint64_t total_weight;
    member_result_t m[MAX_MEMBERS];
    /* keys moved by the change that started this phase */
    double moved_snap, moved_keys, moved_req, moved_mod, moved_mod_req, ideal;
} phase_result_t;

static phase_result_t res[2][NPHASES]; /* [0] bounded, [1] unbounded */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Owner of every key under the ring and under hash mod N (the pool sorted by name, a member of
 * weight w listed w times), to count what a change moves. */
typedef struct owners {
    int *ring;
    int *mod;
} owners_t;

static void owners_of(const chring_snap_t *s, owners_t *o)
{
    o->ring = malloc(nkeys * sizeof *o->ring);
    o->mod = malloc(nkeys * sizeof *o->mod);
    if (!o->ring || !o->mod)
        demo_die("out of memory", ENOMEM);
    const char *names[MAX_MEMBERS];
    int pool[MAX_MEMBERS * 4];
    size_t n = chring_snap_len(s), slots = 0;
    for (size_t i = 0; i < n; i++)
        names[i] = chring_member_name(chring_snap_member(s, i));
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        const chring_member_t *m = chring_snap_find(s, names[i]);
        int idx = ((const backend_t *)chring_member_udata(m))->index;
        for (uint32_t k = 0; k < chring_snap_weight(s, m) && slots < MAX_MEMBERS * 4; k++)
            pool[slots++] = idx;
    }
    for (unsigned i = 0; i < nkeys; i++) {
        const chring_member_t *m = chring_snap_lookup(s, keys[i], KEY_LEN);
        o->ring[i] = ((const backend_t *)chring_member_udata(m))->index;
        o->mod[i] = pool[chring_hash64(keys[i], KEY_LEN) % slots];
    }
}

static void owners_free(owners_t *o)
{
    free(o->ring);
    free(o->mod);
}

static void snapshot_members(const chring_snap_t *s, phase_result_t *pr)
{
    owners_t o;
    owners_of(s, &o);
    pr->members = (unsigned)chring_snap_len(s);
    pr->total_weight = 0;
    for (size_t i = 0; i < chring_snap_len(s); i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        int idx = ((const backend_t *)chring_member_udata(m))->index;
        pr->m[idx].present = true;
        pr->m[idx].weight = chring_snap_weight(s, m);
        pr->m[idx].arc_share = chring_member_share(s, m);
        pr->total_weight += pr->m[idx].weight;
    }
    for (unsigned i = 0; i < nkeys; i++)
        pr->m[o.ring[i]].req_share += zipf_p[i];
    owners_free(&o);
}

static void moved_between(const chring_snap_t *a, const chring_snap_t *b, phase_result_t *pr)
{
    owners_t oa, ob;
    owners_of(a, &oa);
    owners_of(b, &ob);
    unsigned ring_moved = 0, mod_moved = 0;
    double ring_req = 0, mod_req = 0;
    for (unsigned i = 0; i < nkeys; i++) {
        if (oa.ring[i] != ob.ring[i])
            ring_moved++, ring_req += zipf_p[i];
        if (oa.mod[i] != ob.mod[i])
            mod_moved++, mod_req += zipf_p[i];
    }
    pr->moved_snap = chring_snap_moved(a, b);
    pr->moved_keys = (double)ring_moved / nkeys;
    pr->moved_req = ring_req;
    pr->moved_mod = (double)mod_moved / nkeys;
    pr->moved_mod_req = mod_req;
    owners_free(&oa);
    owners_free(&ob);
}

/* Runs the four phases once, with bounded loads on (mode 0) or off (mode 1). */
static void run_pass(int mode)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.balance = BALANCE;
    chring_t *r;
    int rc = chring_new(&r, &cfg);
    if (rc < 0)
        demo_die("chring_new", rc);
    apply_phase(r, 0);

    atomic_store(&stop, 0);
    atomic_store(&cur_phase, 0);
    for (int i = 0; i < MAX_MEMBERS; i++)
        atomic_store(&inflight[i].n, 0);
    for (int i = 0; i < nworkers; i++) {
        worker_t *w = &workers[i];
        memset(w, 0, sizeof *w);
        w->seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) + 12345u;
        w->bounded = mode == 0;
        w->ring = r;
        if ((rc = pthread_create(&w->tid, NULL, worker_main, w)) != 0)
            demo_die("pthread_create", rc);
    }
    demo_sleep_ms(phase_ms / 5 + 20); /* warm-up: fill the workers' queues */

    const chring_snap_t *prev = NULL;
    for (int p = 0; p < NPHASES; p++) {
        phase_result_t *pr = &res[mode][p];
        if (p > 0) {
            /* The change happens under traffic; the requests admitted before it drain during a
             * settling time (peaks counted apart, as warm-up) before the phase is measured. */
            atomic_store(&cur_phase, 0);
            apply_phase(r, p);
        }
        const chring_snap_t *cur = chring_snap_hold(r);
        snapshot_members(cur, pr);
        if (prev) {
            moved_between(prev, cur, pr);
            chring_snap_put(r, prev);
        }
        prev = cur;

        chring_stats_t st0, st1;
        chring_member_stats_t ms0[MAX_MEMBERS];
        if (p > 0)
            demo_sleep_ms(phase_ms / 10 + 5);
        chring_stats(r, &st0);
        for (size_t i = 0; i < chring_snap_len(cur); i++) {
            const chring_member_t *m = chring_snap_member(cur, i);
            chring_member_stats(m, &ms0[((const backend_t *)chring_member_udata(m))->index]);
        }
        uint64_t t0 = demo_now_ns();
        atomic_store(&cur_phase, p + 1);
        double inflight_sum = 0;
        unsigned samples = 0;
        while (demo_now_ns() - t0 < (uint64_t)phase_ms * 1000000u) {
            demo_sleep_ms(5);
            uint64_t total = 0;
            for (int i = 0; i < MAX_MEMBERS; i++)
                total += atomic_load_explicit(&inflight[i].n, memory_order_relaxed);
            inflight_sum += (double)total;
            samples++;
        }
        pr->seconds = (double)(demo_now_ns() - t0) / 1e9;
        pr->mean_inflight = samples ? inflight_sum / samples : 0;
        chring_stats(r, &st1);
        pr->acquires = st1.acquires - st0.acquires;
        pr->spills = st1.spills - st0.spills;
        pr->saturated = st1.saturated - st0.saturated;
        for (size_t i = 0; i < chring_snap_len(cur); i++) {
            const chring_member_t *m = chring_snap_member(cur, i);
            int idx = ((const backend_t *)chring_member_udata(m))->index;
            chring_member_stats_t ms;
            chring_member_stats(m, &ms);
            pr->m[idx].acquires = ms.acquires - ms0[idx].acquires;
            pr->m[idx].spilled_in = ms.spilled_in - ms0[idx].spilled_in;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < nworkers; i++)
        pthread_join(workers[i].tid, NULL);
    chring_snap_put(r, prev);

    for (int p = 0; p < NPHASES; p++) {
        phase_result_t *pr = &res[mode][p];
        pr->requests = 0;
        for (int i = 0; i < nworkers; i++) {
            pr->requests += workers[i].requests[p + 1];
            for (int k = 0; k < MAX_MEMBERS; k++) {
                if (workers[i].peak[p + 1][k] > pr->m[k].peak) {
                    pr->m[k].peak = workers[i].peak[p + 1][k];
                    pr->m[k].cap_at_peak = workers[i].cap_at_peak[p + 1][k];
                }
            }
        }
    }
    if (chring_leases(r) != 0)
        fprintf(stderr, "chring-demo: warning: %" PRIu64 " leases outstanding at the end\n",
                chring_leases(r));
    chring_free(&r);
}

/* ---------------------------------------------------------------------------------------------
 * Report
 * ------------------------------------------------------------------------------------------- */

/* The most requests a worker's acquire can count as in flight: its other QUEUE - 1 slots busy, the
 * other workers' QUEUE slots each, and (docs/design.md §3 lets m be off by the operations in
 * flight) one request in flight per other worker. */
static uint64_t max_inflight(void)
{
    return (uint64_t)nworkers * (QUEUE + 1) - 2;
}

/* The largest capacity any admission of the phase can compute for member k: capacity grows with
 * m, and m never exceeds max_inflight().  With bounded loads ON no peak may go above it. */
static uint64_t capacity_of(const phase_result_t *pr, int k)
{
    return chring_capacity_weighted(max_inflight(), pr->m[k].weight, pr->total_weight, BALANCE);
}

static unsigned over_count(void)
{
    unsigned n = 0;
    for (int p = 0; p < NPHASES; p++)
        for (int k = 0; k < MAX_MEMBERS; k++)
            if (res[0][p].m[k].present && res[0][p].m[k].peak > capacity_of(&res[0][p], k))
                n++;
    return n;
}

static double worst_off_ratio(void)
{
    double worst = 0;
    for (int p = 0; p < NPHASES; p++)
        for (int k = 0; k < MAX_MEMBERS; k++)
            if (res[0][p].m[k].present) {
                double x = (double)res[1][p].m[k].peak / (double)capacity_of(&res[0][p], k);
                if (x > worst)
                    worst = x;
            }
    return worst;
}

static void print_report(void)
{
    for (int p = 0; p < NPHASES; p++) {
        const phase_result_t *b = &res[0][p], *u = &res[1][p];
        printf("\n== phase %d: %s: %u members\n", p + 1, phases[p].title, b->members);
        double bps = (double)b->requests / b->seconds, ups = (double)u->requests / u->seconds;
        printf("  routed: bounded ON %.2f M req/s (%.0f ns per request per worker), OFF %.2f M "
               "req/s (%.0f ns): acquire+release cost %.0f ns more than a plain lookup\n",
               bps / 1e6, 1e9 * nworkers / bps, ups / 1e6, 1e9 * nworkers / ups,
               1e9 * nworkers / bps - 1e9 * nworkers / ups);
        printf("  in flight: %.0f requests on average (ON), %.0f (OFF), at most %" PRIu64
               " counted by an acquire; capacity at that m: %" PRIu64 " per unit of weight\n",
               b->mean_inflight, u->mean_inflight, max_inflight(),
               chring_capacity_weighted(max_inflight(), 1, b->total_weight, BALANCE));
        printf("  spill rate (ON): %.1f%% of %" PRIu64 " acquires placed off their key's owner; "
               "saturated events: %" PRIu64 "\n",
               b->acquires ? 100.0 * (double)b->spills / (double)b->acquires : 0.0, b->acquires,
               b->saturated);
        if (p > 0)
            printf("  keys moved by this change: ring %.1f%% of keys (%.1f%% of requests; "
                   "chring_snap_moved %.1f%% of the key space), hash mod N %.1f%% of keys "
                   "(%.1f%% of requests)\n",
                   100 * b->moved_keys, 100 * b->moved_req, 100 * b->moved_snap, 100 * b->moved_mod,
                   100 * b->moved_mod_req);
        printf("  %-11s %6s %6s %9s %9s %10s %16s %10s %11s\n", "member", "weight", "arc",
               "requests", "capacity", "peak ON", "peak OFF", "acquires", "spilled in");
        for (int k = 0; k < MAX_MEMBERS; k++) {
            if (!b->m[k].present)
                continue;
            uint64_t cap = capacity_of(b, k);
            printf("  %-11s %6u %5.1f%% %8.1f%% %9" PRIu64 " %5" PRIu64 " %-4s %5" PRIu64
                   " (%4.2fx cap) %10" PRIu64 " %10.1f%%\n",
                   backends[k].name, b->m[k].weight, 100 * b->m[k].arc_share,
                   100 * b->m[k].req_share, cap, b->m[k].peak, b->m[k].peak > cap ? "OVER" : "",
                   u->m[k].peak, (double)u->m[k].peak / (double)cap, b->m[k].acquires,
                   b->m[k].acquires ? 100.0 * (double)b->m[k].spilled_in / (double)b->m[k].acquires
                                    : 0.0);
        }
    }
}

static FILE *open_out(const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        demo_die(path, errno);
    return f;
}

static void write_files(void)
{
    char csv_path[4096], gp_path[4096], png_path[4096];
    FILE *f = open_out("chring-demo-loads.csv", csv_path, sizeof csv_path);
    fprintf(f, "phase,phase_title,member,weight,arc_share,request_share,capacity,"
               "peak_bounded,peak_unbounded,acquires,spilled_in,capacity_at_peak\n");
    for (int p = 0; p < NPHASES; p++) {
        const phase_result_t *b = &res[0][p], *u = &res[1][p];
        for (int k = 0; k < MAX_MEMBERS; k++) {
            if (!b->m[k].present)
                continue;
            fprintf(f,
                    "%d,\"%s\",%s,%u,%.6f,%.6f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                    ",%" PRIu64 ",%" PRIu64 "\n",
                    p + 1, phases[p].title, backends[k].name, b->m[k].weight, b->m[k].arc_share,
                    b->m[k].req_share, capacity_of(b, k), b->m[k].peak, u->m[k].peak,
                    b->m[k].acquires, b->m[k].spilled_in, b->m[k].cap_at_peak);
        }
    }
    if (fclose(f) != 0)
        demo_die(csv_path, errno);

    /* A gnuplot script with the data inline: one panel per phase, per member the peak load with
     * bounded loads on and off as bars, the capacity as a marker. */
    f = open_out("chring-demo-loads.gp", gp_path, sizeof gp_path);
    snprintf(png_path, sizeof png_path, "%s/chring-demo-loads.png", out_dir);
    fprintf(f, "# chring-demo: peak load per member, bounded loads on and off (generated)\n");
    for (int p = 0; p < NPHASES; p++) {
        fprintf(f, "$P%d << EOD\n", p + 1);
        const phase_result_t *b = &res[0][p], *u = &res[1][p];
        for (int k = 0; k < MAX_MEMBERS; k++)
            if (b->m[k].present)
                fprintf(f, "\"%s%s\" %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", backends[k].name + 8,
                        b->m[k].weight > 1 ? " (w3)" : "", b->m[k].peak, u->m[k].peak,
                        capacity_of(b, k));
        fprintf(f, "EOD\n");
    }
    uint64_t ymax = 1;
    for (int p = 0; p < NPHASES; p++)
        for (int k = 0; k < MAX_MEMBERS; k++) {
            if (res[1][p].m[k].peak > ymax)
                ymax = res[1][p].m[k].peak;
            if (res[0][p].m[k].peak > ymax)
                ymax = res[0][p].m[k].peak;
        }
    fprintf(f, "set terminal pngcairo size 1400,900 font 'sans,11'\n");
    fprintf(f, "set output '%s'\n", png_path);
    fprintf(f,
            "set multiplot layout 2,2 title 'chring-demo: peak requests in flight per backend, "
            "Zipf(%.2f) over %u keys, %d workers, balance c = %.2f' font 'sans,13'\n",
            zipf_s, nkeys, nworkers, BALANCE);
    fprintf(f,
            "set style data histogram\nset style histogram clustered gap 1\n"
            "set style fill solid 0.85 border -1\nset boxwidth 0.9\n"
            "set yrange [0:%" PRIu64 "]\nset grid ytics\nset key top right\n"
            "set xlabel 'backend-NN'\nset ylabel 'peak load (requests in flight)'\n",
            ymax + ymax / 5 + 1);
    for (int p = 0; p < NPHASES; p++) {
        fprintf(f, "set title 'phase %d: %s'\n", p + 1, phases[p].title);
        fprintf(f,
                "plot $P%d using 2:xtic(1) title 'bounded loads ON' lc rgb '#2b6cb0', "
                "'' using 3 title 'bounded loads OFF' lc rgb '#d9480f', "
                "'' using 0:4:(0.45) with xerrorbars lw 3 pt 7 ps 0.6 lc rgb 'black' "
                "title 'capacity (c = %.2f)'\n",
                p + 1, BALANCE);
    }
    fprintf(f, "unset multiplot\n");
    if (fclose(f) != 0)
        demo_die(gp_path, errno);

    printf("\nwrote %s and %s\n", csv_path, gp_path);
    if (!plot)
        return;
    if (strchr(gp_path, '\'') || system("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf("gnuplot not found on PATH: no picture (install gnuplot-nox, then run "
               "gnuplot %s)\n",
               gp_path);
        return;
    }
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "gnuplot '%s'", gp_path);
    if (system(cmd) == 0)
        printf("wrote %s\n", png_path);
    else
        printf("gnuplot failed: no picture (the script is %s)\n", gp_path);
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--out DIR] [--only loads|cache] [--phase-ms N] [--threads N] [--keys N] "
            "[--zipf S]\n          [--cache-keys N] [--cache-size N] [--window N] "
            "[--window-ms N] [--no-plot]\n"
            "  --out DIR         where the CSV files, the gnuplot scripts and the PNGs go "
            "(default .)\n"
            "  --only PART       run only the load phases or only the cache tier (default: "
            "both)\n"
            "  --phase-ms N      load phases: length of each phase, per pass (default 600)\n"
            "  --threads N       load phases: worker threads (default: online cores, at least "
            "2)\n"
            "  --keys N          load phases: distinct keys of the Zipf stream (default 10000)\n"
            "  --zipf S          Zipf exponent of both parts' streams (default 1.0)\n"
            "  --cache-keys N    cache tier: distinct keys of its stream (default 100000)\n"
            "  --cache-size N    cache tier: keys each backend's LRU holds (default 1000)\n"
            "  --window N        cache tier: requests per window (default 10000)\n"
            "  --window-ms N     cache tier: pace of a window after the slow-start join, in ms "
            "(default 10;\n"
            "                    the slow start lasts 20 windows)\n"
            "  --no-plot         do not run gnuplot\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    nworkers = cores < 2 ? 2 : (int)cores;
    cache_opts_t cache = {.out_dir = ".",
                          .plot = true,
                          .keys = 500000,
                          .capacity = 5000,
                          .window = 10000,
                          .window_ms = 15};
    bool run_loads = true, run_cache = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-plot")) {
            plot = false;
        } else if (!v) {
            usage(argv[0]);
        } else if (!strcmp(a, "--out")) {
            out_dir = v, i++;
        } else if (!strcmp(a, "--phase-ms")) {
            phase_ms = (unsigned)strtoul(v, NULL, 10), i++;
        } else if (!strcmp(a, "--threads")) {
            nworkers = atoi(v), i++;
        } else if (!strcmp(a, "--keys")) {
            nkeys = (unsigned)strtoul(v, NULL, 10), i++;
        } else if (!strcmp(a, "--zipf")) {
            zipf_s = strtod(v, NULL), i++;
        } else if (!strcmp(a, "--only") && !strcmp(v, "loads")) {
            run_cache = false, i++;
        } else if (!strcmp(a, "--only") && !strcmp(v, "cache")) {
            run_loads = false, i++;
        } else if (!strcmp(a, "--cache-keys")) {
            cache.keys = (unsigned)strtoul(v, NULL, 10), i++;
        } else if (!strcmp(a, "--cache-size")) {
            cache.capacity = (unsigned)strtoul(v, NULL, 10), i++;
        } else if (!strcmp(a, "--window")) {
            cache.window = (unsigned)strtoul(v, NULL, 10), i++;
        } else if (!strcmp(a, "--window-ms")) {
            cache.window_ms = (unsigned)strtoul(v, NULL, 10), i++;
        } else {
            usage(argv[0]);
        }
    }
    if (nworkers < 1 || nworkers > MAX_WORKERS || nkeys < 1 || phase_ms < 10 ||
        !(zipf_s >= 0 && zipf_s < 10) || cache.keys < 2 || cache.keys > 10000000 ||
        cache.capacity < 1 || cache.capacity >= cache.keys || cache.window < 100 ||
        cache.window > 10000000 || cache.window_ms < 1 || cache.window_ms > 10000)
        usage(argv[0]);
    cache.out_dir = out_dir;
    cache.plot = plot;
    cache.zipf = zipf_s;
    for (int i = 0; i < MAX_MEMBERS; i++) {
        snprintf(backends[i].name, sizeof backends[i].name, "backend-%02d", i + 1);
        backends[i].index = i;
    }
    if (!run_loads) {
        printf("chring-demo (chring %s): the cache tier only\n", chring_version());
        demo_cache_tier_run(&cache);
        return 0;
    }
    zipf_init();

    printf("chring-demo (chring %s): a proxy of %d worker threads routes a Zipf(%.2f) stream "
           "over %u keys\nthrough chring_acquire/chring_release (bounded loads, c = %.2f), each "
           "request held for about %d\nfurther requests of its worker, while backends join and "
           "leave; then the same traffic with\nbounded loads OFF (plain lookup).  The hottest key "
           "alone is %.1f%% of all requests.\n",
           chring_version(), nworkers, zipf_s, nkeys, BALANCE, QUEUE, 100 * zipf_p[0]);
    fflush(stdout);
    run_pass(0);
    run_pass(1);
    print_report();
    printf("\narc: the member's share of the key space; requests: its share of the Zipf "
           "stream under plain lookup.\ncapacity = ceil(c * (m + 1) * w / W) at m = %" PRIu64
           ", the most requests an acquire can count in flight\n(W = total weight): no "
           "admission computes more, so with bounded loads ON no peak may exceed it: %s.\n"
           "OFF, the owners of the hottest keys carry up to %.1fx it.  spilled in: the member's "
           "acquires whose key's owner was full.\n",
           max_inflight(), over_count() ? "OVER marks those that did" : "none did in this run",
           worst_off_ratio());
    write_files();
    free(zipf_cdf);
    free(zipf_p);
    free(keys);
    if (run_cache)
        demo_cache_tier_run(&cache);
    return 0;
}
