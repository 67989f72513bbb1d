/* chring-bench-batch: many keys at once (docs/bench.md §10).  chring_snap_lookup_many in batches
 * of 1, 4, 16 and 64 keys against a hand-written prefetching batch over the same points, the
 * rwlock ring (one thread, and two threads reading it at once), chring's single lookup and the
 * floor of one DRAM miss, at 10, 100, 1000 and 10,000 members x 160 points (hash64).
 *
 * SPDX-License-Identifier: MIT
 *
 * The structures, all in the same run, on the same keys (16 bytes, written just before use, never
 * repeated within a run):
 *   chring         chring_snap_enter + chring_snap_lookup + chring_snap_exit, one key at a time
 *   chring_many    chring_snap_enter + chring_snap_lookup_many(B keys) + chring_snap_exit
 *   hand           the ring's points copied out (chring_snap_point) into a sorted array with a
 *                  prefix-bucket index (2 to 4 buckets per point), and a batch written by hand as
 *                  a user would: hash every key and prefetch its bucket, then read the buckets and
 *                  prefetch the points, then scan the points and prefetch the owners, then read
 *                  the owners; no synchronisation at all
 *   rwlock         the same points, a branchy binary search behind a pthread_rwlock_t (rdlock per
 *                  lookup); "rwlock, 2 threads": two threads reading it at once (the reader
 *                  count's cache line goes back and forth between the cores)
 *   dram           hash64 of the key, then one load from a random slot of a 64 MiB array
 * Throughput: the keys of a batch depend only on their number.  Latency: the keys of a batch also
 * depend on the owners the previous batch returned (the sum of them), so no batch starts before
 * the previous one has finished; per key, that is the batch's latency over B.  Before timing, the
 * program checks that chring_many, hand and rwlock give chring's owner for every key of a sample.
 * Times are the thread's CPU time per key, medians of --reps interleaved reps
 * (bench_interleaved); two threads: the median over reps of the mean of both threads' CPU time
 * per key.  The spread of keys (the largest member's share of the key space over the mean share)
 * is exact (chring_member_share); the copies hold the same points, so the same spread.
 *
 * Publish bursts right after a build: a 10,000 x 160 ring is built (one chring_update) and at
 * once --burst back-to-back publishes of one member (add, remove, add, ...) follow, with no pause;
 * three builds.  Then the same after 12 publishes spaced by 40 ms (a burst after a quiet while).
 * Each publish's wall time, the writer's CPU time and its minor page faults (a publish that had
 * to fault in a fresh block shows hundreds).
 *
 * Writes batch.csv (long format) and batch_plot.csv (for bench/batch.gp).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "baseline.h"
#include "common.h"
#include "maglev.h"

#define NSIZES 4
static const unsigned size_members[NSIZES] = {10, 100, 1000, 10000};
#define VNODES 160
#define NBATCHES 4
static const unsigned batch_sizes[NBATCHES] = {1, 4, 16, 64};
#define MAX_BATCH 64
#define DRAM_BYTES ((size_t)64 << 20)
#define CHECK_KEYS 100000

/* ---- the hand-written prefetching batch ---------------------------------------------------- */

typedef struct hand {
    uint64_t *pos;                 /* n points ascending, then UINT64_MAX */
    const chring_member_t **owner; /* owner of each point */
    uint32_t *first;               /* first[b]: the first point whose top bits are >= b */
    unsigned shift;                /* 64 - bits of the bucket number */
    size_t n;
} hand_t;

static void hand_build(hand_t *h, const base_ring_t *b)
{
    unsigned bits = 1;
    while (((size_t)1 << bits) < 2 * b->n)
        bits++; /* 2 to 4 buckets per point */
    size_t nb = (size_t)1 << bits;
    h->n = b->n;
    h->shift = 64 - bits;
    h->pos = malloc((b->n + 1) * sizeof *h->pos);
    h->owner = malloc(b->n * sizeof *h->owner);
    h->first = malloc((nb + 1) * sizeof *h->first);
    bench_require(h->pos && h->owner && h->first, "out of memory");
    memcpy(h->pos, b->pos, b->n * sizeof *h->pos);
    memcpy(h->owner, b->owner, b->n * sizeof *h->owner);
    h->pos[b->n] = UINT64_MAX;
    size_t i = 0;
    for (size_t k = 0; k < nb; k++) {
        while (i < b->n && (b->pos[i] >> h->shift) < k)
            i++;
        h->first[k] = (uint32_t)i;
    }
    h->first[nb] = (uint32_t)b->n;
}

static void hand_free(hand_t *h)
{
    free(h->pos);
    free(h->owner);
    free(h->first);
}

/* The batch, four passes over the keys; each pass's loads were prefetched by the one before. */
static inline void hand_batch(const hand_t *h, const uint64_t (*keys)[2], size_t n,
                              const chring_member_t **out)
{
    uint64_t hs[MAX_BATCH];
    uint32_t at[MAX_BATCH];
    for (size_t i = 0; i < n; i++) {
        hs[i] = base_hash64(keys[i], 16);
        __builtin_prefetch(&h->first[hs[i] >> h->shift]);
    }
    for (size_t i = 0; i < n; i++) {
        at[i] = h->first[hs[i] >> h->shift];
        __builtin_prefetch(&h->pos[at[i]]);
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t j = at[i];
        while (h->pos[j] < hs[i])
            j++;
        at[i] = j == h->n ? 0 : j;
        __builtin_prefetch(&h->owner[at[i]]);
    }
    for (size_t i = 0; i < n; i++)
        out[i] = h->owner[at[i]];
}

/* ---- the runners --------------------------------------------------------------------------- */

typedef struct ctx {
    chring_t *ring;
    const base_ring_t *base;
    const hand_t *hand;
    pthread_rwlock_t *rw;
    const uint64_t *dram;
    uint64_t dram_mask;
    size_t batch;
    uint64_t next; /* key counter: keys never repeat */
    uint64_t check;
} ctx_t;

static inline void make_key(uint64_t key[2], uint64_t i, uintptr_t previous)
{
    key[0] = (i * 0x9e3779b97f4a7c15ull) ^ (uint64_t)previous;
    key[1] = i;
}

static inline uintptr_t look_chring(ctx_t *c, const uint64_t key[2])
{
    const chring_snap_t *s = chring_snap_enter(c->ring);
    const chring_member_t *m = chring_snap_lookup(s, key, 16);
    chring_snap_exit(c->ring, s);
    return (uintptr_t)m;
}

static inline uintptr_t look_rwlock(ctx_t *c, const uint64_t key[2])
{
    uint64_t h = base_hash64(key, 16);
    pthread_rwlock_rdlock(c->rw);
    const chring_member_t *m = base_owner_branchy(c->base, h);
    pthread_rwlock_unlock(c->rw);
    return (uintptr_t)m;
}

static inline uintptr_t look_dram(ctx_t *c, const uint64_t key[2])
{
    return (uintptr_t)c->dram[base_hash64(key, 16) & c->dram_mask];
}

/* One key at a time: throughput (mode 0) or latency (mode 1). */
#define DEFINE_SINGLE(name) \
    static uint64_t run_##name##_1(void *arg, size_t iters, int mode) \
    { \
        ctx_t *c = arg; \
        uint64_t key[2], i0 = c->next; \
        uintptr_t acc = 0, owner = 0; \
        uint64_t t0 = bench_cpu_ns(); \
        for (size_t i = 0; i < iters; i++) { \
            make_key(key, i0 + i, mode ? owner : 0); \
            owner = look_##name(c, key); \
            acc += owner; \
        } \
        uint64_t t1 = bench_cpu_ns(); \
        c->next = i0 + iters; \
        c->check = acc; \
        bench_sink += acc; \
        return t1 - t0; \
    } \
    static uint64_t run_##name##_thr(void *arg, size_t iters) { return run_##name##_1(arg, iters, 0); } \
    static uint64_t run_##name##_lat(void *arg, size_t iters) { return run_##name##_1(arg, iters, 1); }

DEFINE_SINGLE(chring)
DEFINE_SINGLE(rwlock)
DEFINE_SINGLE(dram)

static inline void batch_chring(ctx_t *c, const void *const *keys, const size_t *lens, size_t n,
                                const chring_member_t **out)
{
    const chring_snap_t *s = chring_snap_enter(c->ring);
    chring_snap_lookup_many(s, keys, lens, n, out);
    chring_snap_exit(c->ring, s);
}

/* Batches of c->batch keys: iters keys rounded up to whole batches, the time scaled back. */
#define DEFINE_BATCH(name, CALL) \
    static uint64_t run_##name##_b(void *arg, size_t iters, int mode) \
    { \
        ctx_t *c = arg; \
        size_t b = c->batch, batches = (iters + b - 1) / b; \
        uint64_t keys[MAX_BATCH][2], i0 = c->next; \
        const void *ptrs[MAX_BATCH]; \
        size_t lens[MAX_BATCH]; \
        const chring_member_t *out[MAX_BATCH]; \
        uintptr_t acc = 0, previous = 0; \
        for (size_t k = 0; k < b; k++) { \
            ptrs[k] = keys[k]; \
            lens[k] = 16; \
        } \
        (void)ptrs; \
        (void)lens; \
        uint64_t t0 = bench_cpu_ns(); \
        for (size_t j = 0; j < batches; j++) { \
            for (size_t k = 0; k < b; k++) \
                make_key(keys[k], i0 + j * b + k, previous); \
            CALL; \
            uintptr_t sum = 0; \
            for (size_t k = 0; k < b; k++) \
                sum += (uintptr_t)out[k]; \
            acc += sum; \
            previous = mode ? sum : 0; \
        } \
        uint64_t t1 = bench_cpu_ns(); \
        c->next = i0 + batches * b; \
        c->check = acc; \
        bench_sink += acc; \
        return (uint64_t)((double)(t1 - t0) * (double)iters / (double)(batches * b)); \
    } \
    static uint64_t run_##name##_thr(void *arg, size_t iters) { return run_##name##_b(arg, iters, 0); } \
    static uint64_t run_##name##_lat(void *arg, size_t iters) { return run_##name##_b(arg, iters, 1); }

DEFINE_BATCH(many, batch_chring(c, ptrs, lens, b, out))
DEFINE_BATCH(hand, hand_batch(c->hand, (const uint64_t(*)[2])keys, b, out))

/* ---- two threads on the rwlock ring -------------------------------------------------------- */

typedef struct pair_arg {
    ctx_t ctx;
    size_t iters;
    pthread_barrier_t *start;
    double ns;
} pair_arg_t;

static void *pair_thread(void *p)
{
    pair_arg_t *a = p;
    run_rwlock_thr(&a->ctx, a->iters / 4 + 1); /* warm-up */
    pthread_barrier_wait(a->start);
    a->ns = (double)run_rwlock_thr(&a->ctx, a->iters) / (double)a->iters;
    return NULL;
}

/* The median over reps of the mean CPU time per lookup of two threads reading at once. */
static double measure_rwlock_pair(const ctx_t *base, size_t iters, int reps)
{
    double *samples = calloc((size_t)reps, sizeof *samples);
    bench_require(samples != NULL, "out of memory");
    for (int rep = 0; rep < reps; rep++) {
        pthread_barrier_t start;
        pthread_t t[2];
        pair_arg_t a[2];
        pthread_barrier_init(&start, NULL, 2);
        for (int k = 0; k < 2; k++) {
            a[k] = (pair_arg_t){*base, iters, &start, 0};
            a[k].ctx.next = ((uint64_t)(k + 1) << 56) + (uint64_t)rep * iters * 2;
            bench_require(pthread_create(&t[k], NULL, pair_thread, &a[k]) == 0, "pthread_create");
        }
        for (int k = 0; k < 2; k++)
            pthread_join(t[k], NULL);
        pthread_barrier_destroy(&start);
        samples[rep] = (a[0].ns + a[1].ns) / 2;
    }
    double med = bench_median(samples, (size_t)reps);
    free(samples);
    return med;
}

/* ---- one ring size ------------------------------------------------------------------------- */

enum {
    V_CHRING,
    V_RWLOCK,
    V_DRAM,
    V_MANY,                 /* + batch index */
    V_HAND = V_MANY + NBATCHES, /* + batch index */
    NVARIANTS = V_HAND + NBATCHES
};

typedef struct size_result {
    unsigned members;
    size_t points;
    double ns[NVARIANTS][2]; /* [variant][0: throughput, 1: latency] */
    double rwlock_pair;      /* two threads, throughput, ns per lookup per thread */
    double spread;           /* largest member share / mean share */
} size_result_t;

static chring_t *make_ring(bench_backend_t *backends, unsigned members)
{
    chring_t *r = NULL;
    chring_change_t *changes = calloc(members, sizeof *changes);
    bench_require(changes != NULL, "out of memory");
    int err = chring_new(&r, NULL);
    bench_require(err == 0, "chring_new: %s", chring_strerror(err));
    for (unsigned i = 0; i < members; i++)
        changes[i] = (chring_change_t){backends[i].name, 1, &backends[i]};
    err = chring_update(r, changes, members);
    bench_require(err == 0, "chring_update: %s", chring_strerror(err));
    free(changes);
    return r;
}

/* chring_many, hand and rwlock against chring_snap_lookup, key for key, on CHECK_KEYS keys. */
static void check_owners(ctx_t *c)
{
    uint64_t keys[MAX_BATCH][2];
    const void *ptrs[MAX_BATCH];
    size_t lens[MAX_BATCH];
    const chring_member_t *many[MAX_BATCH], *hand[MAX_BATCH];
    for (size_t k = 0; k < MAX_BATCH; k++) {
        ptrs[k] = keys[k];
        lens[k] = 16;
    }
    for (uint64_t j = 0; j < CHECK_KEYS / MAX_BATCH; j++) {
        size_t b = 1 + j % MAX_BATCH;
        for (size_t k = 0; k < b; k++)
            make_key(keys[k], ((uint64_t)1 << 60) + j * MAX_BATCH + k, 0);
        batch_chring(c, ptrs, lens, b, many);
        hand_batch(c->hand, (const uint64_t(*)[2])keys, b, hand);
        for (size_t k = 0; k < b; k++) {
            uintptr_t want = look_chring(c, keys[k]);
            bench_require((uintptr_t)many[k] == want, "chring_snap_lookup_many differs");
            bench_require((uintptr_t)hand[k] == want || look_rwlock(c, keys[k]) != want,
                          "the hand-written batch differs from the rwlock ring");
            /* At equal positions the copies may order points apart from chring's tie rule. */
        }
    }
}

static void measure_size(const bench_opts_t *o, size_result_t *res, const uint64_t *dram,
                         uint64_t dram_mask)
{
    unsigned n = res->members;
    bench_backend_t *backends = calloc(n, sizeof *backends);
    bench_require(backends != NULL, "out of memory");
    for (unsigned i = 0; i < n; i++) {
        bench_member_name(backends[i].name, sizeof backends[i].name, i);
        backends[i].id = i;
    }
    chring_t *ring = make_ring(backends, n);
    base_ring_t base;
    hand_t hand;
    pthread_rwlock_t rw;
    pthread_rwlock_init(&rw, NULL);
    {
        const chring_snap_t *s = chring_snap_hold(ring);
        base_ring_copy(&base, s);
        res->points = chring_snap_points(s);
        double most = 0;
        for (size_t i = 0; i < chring_snap_len(s); i++) {
            double share = chring_member_share(s, chring_snap_member(s, i));
            most = share > most ? share : most;
        }
        res->spread = most * (double)chring_snap_len(s);
        chring_snap_put(ring, s);
    }
    hand_build(&hand, &base);

    ctx_t proto = {ring, &base, &hand, &rw, dram, dram_mask, 1, 0, 0};
    ctx_t ctx[NVARIANTS];
    bench_fn fns[2][NVARIANTS];
    void *ctxs[NVARIANTS];
    size_t iters[NVARIANTS];
    for (int v = 0; v < NVARIANTS; v++) {
        ctx[v] = proto;
        ctx[v].next = (uint64_t)v << 48;
        ctxs[v] = &ctx[v];
    }
    fns[0][V_CHRING] = run_chring_thr, fns[1][V_CHRING] = run_chring_lat;
    fns[0][V_RWLOCK] = run_rwlock_thr, fns[1][V_RWLOCK] = run_rwlock_lat;
    fns[0][V_DRAM] = run_dram_thr, fns[1][V_DRAM] = run_dram_lat;
    for (int b = 0; b < NBATCHES; b++) {
        ctx[V_MANY + b].batch = ctx[V_HAND + b].batch = batch_sizes[b];
        fns[0][V_MANY + b] = run_many_thr, fns[1][V_MANY + b] = run_many_lat;
        fns[0][V_HAND + b] = run_hand_thr, fns[1][V_HAND + b] = run_hand_lat;
    }
    check_owners(&ctx[V_CHRING]);
    fprintf(stderr, "batch: %u x %u: owners agree; timing...\n", n, VNODES);
    for (int md = 0; md < 2; md++) {
        for (int v = 0; v < NVARIANTS; v++)
            iters[v] = bench_calibrate(fns[md][v], ctxs[v], o->target_ms, 1000);
        double ns[NVARIANTS];
        bench_interleaved(NVARIANTS, fns[md], ctxs, iters, o->reps, ns);
        for (int v = 0; v < NVARIANTS; v++)
            res->ns[v][md] = ns[v];
    }
    res->rwlock_pair = measure_rwlock_pair(&ctx[V_RWLOCK], iters[V_RWLOCK], o->reps);

    pthread_rwlock_destroy(&rw);
    hand_free(&hand);
    base_ring_free(&base);
    chring_free(&ring);
    free(backends);
}

/* ---- publish bursts right after a build ---------------------------------------------------- */

#define BURST_BUILDS 3
#define BURST_MEMBERS 10000
#define BURST_SLOW 12 /* slow publishes before the second kind of burst */

typedef struct burst_result {
    int publishes, over_10ms, cpu_over_10ms, faulted;
    double wall_max, wall_median, cpu_max, cpu_median, build_wall;
    double wall_first[4]; /* the first publishes after the first build */
} burst_result_t;

static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    return u.ru_minflt;
}

/* BURST_BUILDS builds, each followed by `slow` publishes spaced by 40 ms (every grace period has
 * ended before the next: liburcu's call_rcu worker batches every 10 ms) and then `burst`
 * publishes back to back, which are timed.  slow = 0: the burst right after the build; slow > 0:
 * a burst after a quiet while, when a cache that ages its spares out has only one or two left
 * (docs/design.md §4, "Spare blocks"). */
static void measure_bursts(burst_result_t *out, int burst, int slow)
{
    bench_backend_t *backends = calloc(BURST_MEMBERS + 1, sizeof *backends);
    double *wall = calloc((size_t)(BURST_BUILDS * burst), sizeof *wall);
    double *cpu = calloc((size_t)(BURST_BUILDS * burst), sizeof *cpu);
    bench_require(backends && wall && cpu, "out of memory");
    for (unsigned i = 0; i <= BURST_MEMBERS; i++)
        bench_member_name(backends[i].name, sizeof backends[i].name, i);
    memset(out, 0, sizeof *out);
    for (int b = 0; b < BURST_BUILDS; b++) {
        uint64_t w0 = bench_now_ns();
        chring_t *ring = make_ring(backends, BURST_MEMBERS);
        out->build_wall += (double)(bench_now_ns() - w0) / 1e6 / BURST_BUILDS;
        const char *extra = backends[BURST_MEMBERS].name;
        for (int i = 0; i < slow; i++) {
            int err = i % 2 ? chring_remove(ring, extra) : chring_add(ring, extra, 1, NULL);
            bench_require(err == 0, "publish: %s", chring_strerror(err));
            struct timespec d = {0, 40 * 1000000L};
            nanosleep(&d, NULL);
        }
        for (int i = 0; i < burst; i++) {
            long f0 = minor_faults();
            uint64_t a = bench_now_ns(), c = bench_cpu_ns();
            int err =
                (slow + i) % 2 ? chring_remove(ring, extra) : chring_add(ring, extra, 1, NULL);
            double cms = (double)(bench_cpu_ns() - c) / 1e6,
                   wms = (double)(bench_now_ns() - a) / 1e6;
            bench_require(err == 0, "publish: %s", chring_strerror(err));
            size_t k = (size_t)(b * burst + i);
            wall[k] = wms;
            cpu[k] = cms;
            out->over_10ms += wms > 10.0;
            out->cpu_over_10ms += cms > 10.0;
            out->faulted += minor_faults() - f0 > 50;
            if (b == 0 && i < 4)
                out->wall_first[i] = wms;
            out->wall_max = wms > out->wall_max ? wms : out->wall_max;
            out->cpu_max = cms > out->cpu_max ? cms : out->cpu_max;
        }
        chring_free(&ring);
    }
    out->publishes = BURST_BUILDS * burst;
    out->wall_median = bench_median(wall, (size_t)out->publishes);
    out->cpu_median = bench_median(cpu, (size_t)out->publishes);
    free(backends);
    free(wall);
    free(cpu);
}

/* ---- output -------------------------------------------------------------------------------- */

static void print_header(void)
{
    printf("| structure |");
    for (int z = 0; z < NSIZES; z++)
        printf(" %u x %u |", size_members[z], VNODES);
    printf("\n|---|");
    for (int z = 0; z < NSIZES; z++)
        printf("---|");
    printf("\n");
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    bench_parse(argc, argv, &o, "chring-bench-batch: batch lookups against a hand-written "
                                "prefetching batch and the rwlock ring (docs/bench.md §10)", NULL);
    bench_print_machine("chring-bench-batch");
    double load_start = bench_loadavg();
    size_t dram_n = DRAM_BYTES / sizeof(uint64_t);
    uint64_t *dram = malloc(DRAM_BYTES), state = 7;
    bench_require(dram != NULL, "out of memory");
    for (size_t i = 0; i < dram_n; i++)
        dram[i] = bench_splitmix64(&state);
    static size_result_t res[NSIZES];
    for (int z = 0; z < NSIZES; z++) {
        res[z].members = size_members[z];
        measure_size(&o, &res[z], dram, dram_n - 1);
    }
    free(dram);
    burst_result_t bursts[2]; /* right after the build; after BURST_SLOW slow publishes */
    fprintf(stderr, "batch: publish bursts after a build...\n");
    measure_bursts(&bursts[0], o.quick ? 20 : 40, 0);
    measure_bursts(&bursts[1], o.quick ? 20 : 40, BURST_SLOW);
    const burst_result_t *bu = &bursts[0];

    static const char *single_desc[3] = {"chring, one key (enter + lookup + exit)",
                                         "rwlock + branchy binary search (same points)",
                                         "hash + one DRAM miss (64 MiB, 4 KiB pages)"};
    for (int md = 0; md < 2; md++) {
        printf("\n## ns per key, %s\n\n",
               md ? "latency (a batch's keys depend on the previous batch's owners)"
                  : "throughput (independent keys)");
        print_header();
        for (int v = 0; v < NVARIANTS; v++) {
            if (v < V_MANY)
                printf("| %s |", single_desc[v]);
            else
                printf("| %s, batch of %u |",
                       v < V_HAND ? "chring_snap_lookup_many" : "hand-written prefetching batch",
                       batch_sizes[(v - V_MANY) % NBATCHES]);
            for (int z = 0; z < NSIZES; z++)
                printf(" %.1f |", res[z].ns[v][md]);
            printf("\n");
        }
        if (md == 0) {
            printf("| rwlock, 2 threads reading at once (per lookup, each thread) |");
            for (int z = 0; z < NSIZES; z++)
                printf(" %.1f |", res[z].rwlock_pair);
            printf("\n");
        }
    }

    printf("\n## ratios (same run, throughput)\n\n");
    print_header();
    for (int b = 0; b < NBATCHES; b++) {
        printf("| rwlock / chring_snap_lookup_many, batch of %u%s |", batch_sizes[b],
               batch_sizes[b] == 16 ? " (goal >= 8 at 10,000, >= 4 at 10)" : "");
        for (int z = 0; z < NSIZES; z++)
            printf(" %.2f |", res[z].ns[V_RWLOCK][0] / res[z].ns[V_MANY + b][0]);
        printf("\n");
    }
    for (int b = 0; b < NBATCHES; b++) {
        printf("| chring_snap_lookup_many / hand-written, batch of %u%s |", batch_sizes[b],
               batch_sizes[b] == 16 ? " (goal <= 1.3 at 10,000)" : "");
        for (int z = 0; z < NSIZES; z++)
            printf(" %.2f |", res[z].ns[V_MANY + b][0] / res[z].ns[V_HAND + b][0]);
        printf("\n");
    }
    printf("| rwlock / chring, one key (goal >= 3 at 1000 and 10,000) |");
    for (int z = 0; z < NSIZES; z++)
        printf(" %.2f |", res[z].ns[V_RWLOCK][0] / res[z].ns[V_CHRING][0]);
    printf("\n| rwlock with 2 threads / chring, one key |");
    for (int z = 0; z < NSIZES; z++)
        printf(" %.2f |", res[z].rwlock_pair / res[z].ns[V_CHRING][0]);
    printf("\n| chring latency / (hash + one DRAM miss), one key |");
    for (int z = 0; z < NSIZES; z++)
        printf(" %.2f |", res[z].ns[V_CHRING][1] / res[z].ns[V_DRAM][1]);
    printf("\n\n## spread of keys: the largest member's share over the mean share (exact)\n\n");
    print_header();
    printf("| chring, the rwlock ring and the hand-written batch (the same points) |");
    for (int z = 0; z < NSIZES; z++)
        printf(" %.3f |", res[z].spread);
    printf("\n");

    printf("\n## publish of one member, back to back right after a build and after %d publishes "
           "spaced by 40 ms, %u x %u (%d builds each, %d publishes), ms\n\n",
           BURST_SLOW, BURST_MEMBERS, VNODES, BURST_BUILDS, bu->publishes);
    printf(
        "| the burst comes | build (wall, mean) | first 4 publishes of the first burst (wall) | "
        "wall median | wall max (goal <= 10) | CPU median | CPU max | publishes over 10 ms "
        "wall / CPU | publishes with > 50 page faults |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < 2; k++) {
        const burst_result_t *b = &bursts[k];
        printf(
            "| %s | %.1f | %.1f, %.1f, %.1f, %.1f | %.2f | %.2f | %.2f | %.2f | %d / %d | %d |\n",
            k ? "after the slow publishes" : "right after the build", b->build_wall,
            b->wall_first[0], b->wall_first[1], b->wall_first[2], b->wall_first[3], b->wall_median,
            b->wall_max, b->cpu_median, b->cpu_max, b->over_10ms, b->cpu_over_10ms, b->faulted);
    }

    FILE *csv =
        bench_csv_open(&o, "batch.csv", "structure,members,vnodes,points,batch,metric,value");
    for (int z = 0; z < NSIZES; z++) {
        const size_result_t *r = &res[z];
        static const char *names[3] = {"chring", "rwlock", "hash_dram_miss"};
        for (int v = 0; v < NVARIANTS; v++)
            for (int md = 0; md < 2; md++)
                fprintf(csv, "%s,%u,%u,%zu,%u,%s,%.6g\n",
                        v < V_MANY   ? names[v]
                        : v < V_HAND ? "chring_many"
                                     : "hand",
                        r->members, VNODES, r->points,
                        v < V_MANY ? 1 : batch_sizes[(v - V_MANY) % NBATCHES],
                        md ? "ns_latency" : "ns_throughput", r->ns[v][md]);
        fprintf(csv, "rwlock_2threads,%u,%u,%zu,1,ns_throughput,%.6g\n", r->members, VNODES,
                r->points, r->rwlock_pair);
        fprintf(csv, "chring,%u,%u,%zu,1,spread,%.6g\n", r->members, VNODES, r->points, r->spread);
    }
    for (int k = 0; k < 2; k++) {
        const burst_result_t *b = &bursts[k];
        const char *what = k ? "publish_burst_after_slow" : "publish_burst";
        fprintf(csv, "%s,%u,%u,%u,1,wall_ms_max,%.6g\n", what, BURST_MEMBERS, VNODES,
                BURST_MEMBERS * VNODES, b->wall_max);
        fprintf(csv, "%s,%u,%u,%u,1,wall_ms_median,%.6g\n", what, BURST_MEMBERS, VNODES,
                BURST_MEMBERS * VNODES, b->wall_median);
        fprintf(csv, "%s,%u,%u,%u,1,cpu_ms_max,%.6g\n", what, BURST_MEMBERS, VNODES,
                BURST_MEMBERS * VNODES, b->cpu_max);
        fprintf(csv, "%s,%u,%u,%u,1,over_10ms,%d\n", what, BURST_MEMBERS, VNODES,
                BURST_MEMBERS * VNODES, b->over_10ms);
        fprintf(csv, "%s,%u,%u,%u,1,cpu_over_10ms,%d\n", what, BURST_MEMBERS, VNODES,
                BURST_MEMBERS * VNODES, b->cpu_over_10ms);
        fprintf(csv, "%s,%u,%u,%u,1,faulted,%d\n", what, BURST_MEMBERS, VNODES,
                BURST_MEMBERS * VNODES, b->faulted);
    }
    fclose(csv);
    FILE *plot = bench_csv_open(&o, "batch_plot.csv",
                                "batch,chring_many_10,chring_many_10000,hand_10,hand_10000,"
                                "rwlock_10,rwlock_10000,rwlock2_10,rwlock2_10000,chring_10,"
                                "chring_10000");
    for (int b = 0; b < NBATCHES; b++) {
        const size_result_t *a = &res[0], *z = &res[NSIZES - 1];
        fprintf(plot, "%u,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f\n", batch_sizes[b],
                a->ns[V_MANY + b][0], z->ns[V_MANY + b][0], a->ns[V_HAND + b][0],
                z->ns[V_HAND + b][0], a->ns[V_RWLOCK][0], z->ns[V_RWLOCK][0], a->rwlock_pair,
                z->rwlock_pair, a->ns[V_CHRING][0], z->ns[V_CHRING][0]);
    }
    fclose(plot);
    printf("\n# CSV: %s/batch.csv, %s/batch_plot.csv; load average %.2f at the start, %.2f now\n",
           o.out_dir, o.out_dir, load_start, bench_loadavg());
    return 0;
}
