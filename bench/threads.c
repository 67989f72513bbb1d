/* chring-bench-threads: lookup throughput per thread count, with and without a writer thread
 * publishing 100 membership changes per second (docs/bench.md §3), against the same ring behind a
 * pthread_rwlock_t, and a control loop of trivial independent work that shows how far this machine
 * can scale at all.
 *
 * SPDX-License-Identifier: MIT
 *
 * Ring: 100 members x 160 points (hash64), 16-byte pseudo-random keys.  Each measurement runs N
 * reader threads for 10 x --ms milliseconds (300 ms by default); every configuration runs once per
 * rep, interleaved, and the median of the reps is reported.  Besides lookups per second, each
 * reader's CPU time (CLOCK_THREAD_CPUTIME_ID) is summed: CPUs used = CPU time / wall time shows
 * whether the threads actually ran in parallel (a shared 2-vCPU machine may not give them two
 * cores), and lookups per CPU-second separates the cost per lookup from the scheduling.
 *
 * Writes threads.csv.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "baseline.h"
#include "common.h"

#define NKEYS ((size_t)1 << 17) /* 2 MiB of 16-byte keys, as in chring-bench-lookup */
#define MEMBERS 100
#define WRITER_HZ 100

enum kind {
    K_CHRING,
    K_RWLOCK,
    K_CONTROL,
    NKINDS
};
static const char *kind_names[NKINDS] = {"chring", "rwlock", "control"};

typedef struct shared {
    enum kind kind;
    chring_t *ring;
    const unsigned char *keys;
    /* rwlock baseline: the current ring, swapped by the writer under the write lock */
    pthread_rwlock_t rw;
    base_ring_t *base_cur;
    base_ring_t base_full, base_less;
    /* run control */
    atomic_int ready;
    atomic_int go;
    atomic_int stop;
} shared_t;

typedef struct reader {
    pthread_t tid;
    shared_t *sh;
    size_t first_key;
    uint64_t ops;
    uint64_t wall_ns;
    uint64_t cpu_ns;
} reader_t;

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *reader_main(void *arg)
{
    reader_t *rd = arg;
    shared_t *sh = rd->sh;
    size_t k = rd->first_key;
    uint64_t ops = 0, acc = 0, t0, c0;

    /* A first read section outside the timing: liburcu-bp registers the thread there. */
    if (sh->kind == K_CHRING) {
        const chring_snap_t *s = chring_snap_enter(sh->ring);
        chring_snap_exit(sh->ring, s);
    }
    atomic_fetch_add(&sh->ready, 1);
    while (!atomic_load_explicit(&sh->go, memory_order_acquire))
        ;
    t0 = bench_now_ns();
    c0 = thread_cpu_ns();
    while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
        switch (sh->kind) {
        case K_CHRING:
            for (int i = 0; i < 256; i++) {
                const chring_snap_t *s = chring_snap_enter(sh->ring);
                acc += (uintptr_t)chring_snap_lookup(s, sh->keys + k * 16, 16);
                chring_snap_exit(sh->ring, s);
                k = (k + 1) & (NKEYS - 1);
            }
            break;
        case K_RWLOCK:
            for (int i = 0; i < 256; i++) {
                uint64_t h = base_hash64(sh->keys + k * 16, 16);
                pthread_rwlock_rdlock(&sh->rw);
                acc += (uintptr_t)base_owner_branchy(sh->base_cur, h);
                pthread_rwlock_unlock(&sh->rw);
                k = (k + 1) & (NKEYS - 1);
            }
            break;
        default: {
            /* Control: independent work with no shared memory at all (SplitMix64 steps, about
             * the cost of hashing one short key). */
            uint64_t state = acc + k;
            for (int i = 0; i < 256; i++)
                acc += bench_splitmix64(&state);
            k++;
            break;
        }
        }
        ops += 256;
    }
    rd->cpu_ns = thread_cpu_ns() - c0;
    rd->wall_ns = bench_now_ns() - t0;
    rd->ops = ops;
    bench_sink += acc;
    return NULL;
}

typedef struct writer {
    pthread_t tid;
    shared_t *sh;
    uint64_t publishes;
    uint64_t publish_ns; /* time spent inside the writer calls */
} writer_t;

static void *writer_main(void *arg)
{
    writer_t *w = arg;
    shared_t *sh = w->sh;
    char victim[16];
    struct timespec next;
    bool present = true;

    bench_member_name(victim, sizeof victim, MEMBERS - 1);
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (!atomic_load_explicit(&sh->go, memory_order_acquire))
        ;
    while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
        next.tv_nsec += 1000000000L / WRITER_HZ;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        if (atomic_load_explicit(&sh->stop, memory_order_relaxed))
            break;
        uint64_t t0 = bench_now_ns();
        if (sh->kind == K_CHRING) {
            int err =
                present ? chring_remove(sh->ring, victim) : chring_add(sh->ring, victim, 1, NULL);
            bench_require(err == 0, "writer: %s", chring_strerror(err));
        } else {
            /* The baseline's writer has both rings ready and only swaps the pointer under the
             * write lock: the cheapest publish the baseline can have. */
            pthread_rwlock_wrlock(&sh->rw);
            sh->base_cur = present ? &sh->base_less : &sh->base_full;
            pthread_rwlock_unlock(&sh->rw);
        }
        w->publish_ns += bench_now_ns() - t0;
        present = !present;
        w->publishes++;
    }
    /* Leave the ring as it was. */
    if (!present && sh->kind == K_CHRING)
        chring_add(sh->ring, victim, 1, NULL);
    pthread_rwlock_wrlock(&sh->rw);
    sh->base_cur = &sh->base_full;
    pthread_rwlock_unlock(&sh->rw);
    return NULL;
}

typedef struct result {
    double mops;         /* million lookups (or control ops) per second, all readers */
    double cpus;         /* reader CPU time / wall time */
    double mops_per_cpu; /* million ops per CPU-second */
    double pub_per_s;    /* writer publishes per second */
} result_t;

static result_t run_once(shared_t *sh, enum kind kind, int threads, bool writer, double ms)
{
    reader_t *rd = calloc((size_t)threads, sizeof *rd);
    writer_t w = {0};
    result_t res = {0};
    uint64_t t0, wall;
    double ops_per_ns = 0, cpu = 0, ops = 0;

    bench_require(rd != NULL, "out of memory");
    sh->kind = kind;
    atomic_store(&sh->ready, 0);
    atomic_store(&sh->go, 0);
    atomic_store(&sh->stop, 0);
    for (int t = 0; t < threads; t++) {
        rd[t].sh = sh;
        rd[t].first_key = (NKEYS / (size_t)threads) * (size_t)t;
        bench_require(pthread_create(&rd[t].tid, NULL, reader_main, &rd[t]) == 0, "pthread_create");
    }
    if (writer) {
        w.sh = sh;
        bench_require(pthread_create(&w.tid, NULL, writer_main, &w) == 0, "pthread_create");
    }
    while (atomic_load(&sh->ready) < threads)
        sched_yield();
    t0 = bench_now_ns();
    atomic_store_explicit(&sh->go, 1, memory_order_release);
    {
        struct timespec d = {(time_t)(ms / 1000), (long)(ms * 1e6) % 1000000000L};
        nanosleep(&d, NULL);
    }
    atomic_store_explicit(&sh->stop, 1, memory_order_relaxed);
    wall = bench_now_ns() - t0;
    for (int t = 0; t < threads; t++) {
        pthread_join(rd[t].tid, NULL);
        ops_per_ns += (double)rd[t].ops / (double)rd[t].wall_ns;
        cpu += (double)rd[t].cpu_ns;
        ops += (double)rd[t].ops;
    }
    if (writer) {
        pthread_join(w.tid, NULL);
        res.pub_per_s = (double)w.publishes / ((double)wall / 1e9);
    }
    res.mops = ops_per_ns * 1e3;
    res.cpus = cpu / (double)wall;
    res.mops_per_cpu = ops / cpu * 1e3;
    free(rd);
    return res;
}

typedef struct config {
    enum kind kind;
    int threads;
    bool writer;
    result_t *samples;
    result_t median;
} config_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_field(const result_t *s, int n, size_t offset)
{
    double *v = malloc((size_t)n * sizeof *v), m;
    for (int i = 0; i < n; i++)
        v[i] = *(const double *)((const char *)&s[i] + offset);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    free(v);
    return m;
}

static const config_t *find(const config_t *c, int n, enum kind kind, int threads, bool writer)
{
    for (int i = 0; i < n; i++)
        if (c[i].kind == kind && c[i].threads == threads && c[i].writer == writer)
            return &c[i];
    return NULL;
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    shared_t sh;
    config_t *cfg;
    int ncfg = 0, maxt;
    double ms;
    FILE *csv;

    bench_parse(argc, argv, &o,
                "chring-bench-threads: lookup throughput per thread count, with a writer", NULL);
    bench_print_machine("chring-bench-threads");
    maxt = o.max_threads;
    ms = 10 * o.target_ms;
    printf("# ring %d x 160 (hash64), 16-byte keys; %.0f ms per measurement, median of %d "
           "interleaved reps;\n"
           "# writer: alternately removes and re-adds one member, %d publishes per second\n\n",
           MEMBERS, ms, o.reps, WRITER_HZ);

    memset(&sh, 0, sizeof sh);
    sh.keys = bench_keys(NKEYS, 16, 0x7417ead5);
    sh.ring = bench_ring(CHRING_PROFILE_HASH64, MEMBERS);
    {
        char victim[16];
        const chring_snap_t *s = chring_snap_enter(sh.ring);
        base_ring_copy(&sh.base_full, s);
        chring_snap_exit(sh.ring, s);
        bench_member_name(victim, sizeof victim, MEMBERS - 1);
        bench_require(chring_remove(sh.ring, victim) == 0, "remove");
        s = chring_snap_enter(sh.ring);
        base_ring_copy(&sh.base_less, s);
        chring_snap_exit(sh.ring, s);
        bench_require(chring_add(sh.ring, victim, 1, NULL) == 0, "add");
        sh.base_cur = &sh.base_full;
        pthread_rwlock_init(&sh.rw, NULL);
    }

    cfg = calloc((size_t)maxt * 5, sizeof *cfg);
    for (int t = 1; t <= maxt; t++) {
        cfg[ncfg++] = (config_t){.kind = K_CHRING, .threads = t, .writer = false};
        cfg[ncfg++] = (config_t){.kind = K_CHRING, .threads = t, .writer = true};
        cfg[ncfg++] = (config_t){.kind = K_RWLOCK, .threads = t, .writer = false};
        cfg[ncfg++] = (config_t){.kind = K_RWLOCK, .threads = t, .writer = true};
        cfg[ncfg++] = (config_t){.kind = K_CONTROL, .threads = t, .writer = false};
    }
    for (int i = 0; i < ncfg; i++)
        cfg[i].samples = calloc((size_t)o.reps, sizeof(result_t));

    fprintf(stderr, "threads: %d configurations x %d reps x %.0f ms...\n", ncfg, o.reps, ms);
    for (int rep = 0; rep < o.reps; rep++)
        for (int i = 0; i < ncfg; i++)
            cfg[i].samples[rep] = run_once(&sh, cfg[i].kind, cfg[i].threads, cfg[i].writer, ms);
    csv = bench_csv_open(
        &o, "threads.csv",
        "variant,threads,writer,mlookups_per_s,cpus_used,mlookups_per_cpu_s,publishes_per_s");
    for (int i = 0; i < ncfg; i++) {
        result_t *m = &cfg[i].median;
        m->mops = median_field(cfg[i].samples, o.reps, offsetof(result_t, mops));
        m->cpus = median_field(cfg[i].samples, o.reps, offsetof(result_t, cpus));
        m->mops_per_cpu = median_field(cfg[i].samples, o.reps, offsetof(result_t, mops_per_cpu));
        m->pub_per_s = median_field(cfg[i].samples, o.reps, offsetof(result_t, pub_per_s));
        fprintf(csv, "%s,%d,%d,%.3f,%.3f,%.3f,%.1f\n", kind_names[cfg[i].kind], cfg[i].threads,
                cfg[i].writer, m->mops, m->cpus, m->mops_per_cpu, m->pub_per_s);
    }
    fclose(csv);

    printf("## lookups per second (millions, all reader threads together)\n\n");
    printf("| threads | chring | chring + writer | drop | rwlock | rwlock + writer | chring / "
           "rwlock | "
           "control (Mops/s) | CPUs used (chring) | CPUs used (control) | chring M/CPU-s | "
           "chring + writer M/CPU-s | drop per CPU-s |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int t = 1; t <= maxt; t++) {
        const config_t *c = find(cfg, ncfg, K_CHRING, t, false),
                       *cw = find(cfg, ncfg, K_CHRING, t, true);
        const config_t *r = find(cfg, ncfg, K_RWLOCK, t, false),
                       *rw = find(cfg, ncfg, K_RWLOCK, t, true);
        const config_t *k = find(cfg, ncfg, K_CONTROL, t, false);
        printf("| %d | %.1f | %.1f | %.1f%% | %.1f | %.1f | %.1fx | %.0f | %.2f | %.2f | %.1f | "
               "%.1f | %.1f%% |\n",
               t, c->median.mops, cw->median.mops, 100 * (1 - cw->median.mops / c->median.mops),
               r->median.mops, rw->median.mops, c->median.mops / r->median.mops, k->median.mops,
               c->median.cpus, k->median.cpus, c->median.mops_per_cpu, cw->median.mops_per_cpu,
               100 * (1 - cw->median.mops_per_cpu / c->median.mops_per_cpu));
    }
    if (maxt >= 2) {
        const config_t *c1 = find(cfg, ncfg, K_CHRING, 1, false),
                       *c2 = find(cfg, ncfg, K_CHRING, 2, false);
        const config_t *w2 = find(cfg, ncfg, K_CHRING, 2, true);
        const config_t *r1 = find(cfg, ncfg, K_RWLOCK, 1, false),
                       *r2 = find(cfg, ncfg, K_RWLOCK, 2, false);
        const config_t *k1 = find(cfg, ncfg, K_CONTROL, 1, false),
                       *k2 = find(cfg, ncfg, K_CONTROL, 2, false);
        printf("\n## ratios (same run)\n\n| ratio | target | measured |\n|---|---|---|\n");
        printf("| chring 2 threads / 1 thread | >= 1.7 | %.2f |\n",
               c2->median.mops / c1->median.mops);
        printf("| chring throughput drop with the writer, 2 threads | <= 10%% | %.1f%% |\n",
               100 * (1 - w2->median.mops / c2->median.mops));
        printf(
            "| the same drop in lookups per reader CPU-second (the writer's effect on each lookup, "
            "without the scheduling noise) | <= 10%% | %.1f%% |\n",
            100 * (1 - w2->median.mops_per_cpu / c2->median.mops_per_cpu));
        printf("| control (independent work) 2 threads / 1 thread: what the machine allows | - | "
               "%.2f |\n",
               k2->median.mops / k1->median.mops);
        printf("| chring 2-thread scaling / control's | - | %.2f |\n",
               (c2->median.mops / c1->median.mops) / (k2->median.mops / k1->median.mops));
        printf("| CPUs actually used by 2 chring readers (CPU time / wall) | 2 | %.2f |\n",
               c2->median.cpus);
        printf("| chring lookups per CPU-second, 2 threads / 1 thread | ~1 | %.2f |\n",
               c2->median.mops_per_cpu / c1->median.mops_per_cpu);
        printf("| rwlock 2 threads / 1 thread | - | %.2f |\n", r2->median.mops / r1->median.mops);
        printf("| chring / rwlock at 2 threads | - | %.1f |\n", c2->median.mops / r2->median.mops);
        printf("| writer publishes per second achieved (chring, 2 threads) | %d | %.0f |\n",
               WRITER_HZ, w2->median.pub_per_s);
    }
    printf("\n# CSV: %s/threads.csv; load average now %.2f\n", o.out_dir, bench_loadavg());

    chring_free(&sh.ring);
    base_ring_free(&sh.base_full);
    base_ring_free(&sh.base_less);
    pthread_rwlock_destroy(&sh.rw);
    for (int i = 0; i < ncfg; i++)
        free(cfg[i].samples);
    free(cfg);
    free((void *)sh.keys);
    return 0;
}
