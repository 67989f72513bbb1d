/* chring-bench-acquire: the cost of chring_acquire + chring_release against a plain lookup
 * measured in the same run (docs/bench.md §4): 1 thread, 2 threads on distinct keys, 2 threads on
 * one hot key, and a proxy-like pattern that keeps 64 leases in flight per thread.
 *
 * SPDX-License-Identifier: MIT
 *
 * Ring: 100 members x 160 points (hash64), balance 1.25, 16-byte pseudo-random keys.  Each
 * measurement runs the threads for 10 x --ms milliseconds; configurations are interleaved rep by
 * rep and the median is reported, as ns per operation per thread (thread wall time / its
 * operations, averaged over the threads).
 *
 * Writes acquire.csv.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define NKEYS ((size_t)1 << 17) /* 2 MiB of 16-byte keys, as in chring-bench-lookup */
#define MEMBERS 100
#define WINDOW 64

enum kind {
    K_LOOKUP,
    K_ACQUIRE,
    K_ACQUIRE_HOT,
    K_ACQUIRE_WINDOW,
    NKINDS
};
static const char *kind_names[NKINDS] = {"lookup", "acquire_release", "acquire_release_hot_key",
                                         "acquire_release_64_in_flight"};
static const char *kind_desc[NKINDS] = {
    "plain lookup (enter + lookup + exit)",
    "chring_acquire + chring_release, distinct keys",
    "chring_acquire + chring_release, every thread on one hot key",
    "acquire a new key, release the one acquired 64 before (64 leases in flight per thread)",
};

typedef struct shared {
    enum kind kind;
    chring_t *ring;
    const unsigned char *keys;
    atomic_int ready;
    atomic_int go;
    atomic_int stop;
} shared_t;

typedef struct worker {
    pthread_t tid;
    shared_t *sh;
    size_t first_key;
    uint64_t ops;
    uint64_t wall_ns;
    uint64_t cpu_ns;
} worker_t;

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *worker_main(void *arg)
{
    worker_t *wk = arg;
    shared_t *sh = wk->sh;
    chring_t *r = sh->ring;
    size_t k = wk->first_key;
    uint64_t ops = 0, acc = 0, t0, c0;
    chring_lease_t window[WINDOW];
    unsigned slot = 0;

    memset(window, 0, sizeof window);
    {
        const chring_snap_t *s = chring_snap_enter(r); /* liburcu-bp registers the thread here */
        chring_snap_exit(r, s);
    }
    atomic_fetch_add(&sh->ready, 1);
    while (!atomic_load_explicit(&sh->go, memory_order_acquire))
        ;
    t0 = bench_now_ns();
    c0 = thread_cpu_ns();
    while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
        for (int i = 0; i < 256; i++) {
            const unsigned char *key = sh->keys + k * 16;
            switch (sh->kind) {
            case K_LOOKUP: {
                const chring_snap_t *s = chring_snap_enter(r);
                acc += (uintptr_t)chring_snap_lookup(s, key, 16);
                chring_snap_exit(r, s);
                break;
            }
            case K_ACQUIRE:
            case K_ACQUIRE_HOT: {
                chring_lease_t lease;
                if (sh->kind == K_ACQUIRE_HOT)
                    key = sh->keys; /* key 0 for every thread */
                chring_acquire(r, key, 16, &lease);
                acc += (uintptr_t)lease.member;
                chring_release(r, &lease);
                break;
            }
            default:
                chring_release(r, &window[slot]); /* a cleared lease is a no-op */
                chring_acquire(r, key, 16, &window[slot]);
                acc += (uintptr_t)window[slot].member;
                slot = (slot + 1) % WINDOW;
                break;
            }
            k = (k + 1) & (NKEYS - 1);
        }
        ops += 256;
    }
    wk->cpu_ns = thread_cpu_ns() - c0;
    wk->wall_ns = bench_now_ns() - t0;
    wk->ops = ops;
    for (unsigned i = 0; i < WINDOW; i++)
        chring_release(r, &window[i]);
    bench_sink += acc;
    return NULL;
}

/* ns per operation per thread (wall time), averaged over the threads; *cpu_ns the same in thread
 * CPU time, which leaves out the time a thread waited for a core; *cpus the CPUs the threads got
 * (CPU time / wall time, summed): near the thread count only if they really ran in parallel. */
static double run_once(shared_t *sh, enum kind kind, int threads, double ms, double *cpu_ns,
                       double *cpus)
{
    worker_t wk[64];
    double ns = 0, cpu = 0, used = 0;

    sh->kind = kind;
    atomic_store(&sh->ready, 0);
    atomic_store(&sh->go, 0);
    atomic_store(&sh->stop, 0);
    for (int t = 0; t < threads; t++) {
        memset(&wk[t], 0, sizeof wk[t]);
        wk[t].sh = sh;
        wk[t].first_key = (NKEYS / (size_t)threads) * (size_t)t;
        bench_require(pthread_create(&wk[t].tid, NULL, worker_main, &wk[t]) == 0, "pthread_create");
    }
    while (atomic_load(&sh->ready) < threads)
        sched_yield();
    atomic_store_explicit(&sh->go, 1, memory_order_release);
    {
        struct timespec d = {(time_t)(ms / 1000), (long)(ms * 1e6) % 1000000000L};
        nanosleep(&d, NULL);
    }
    atomic_store_explicit(&sh->stop, 1, memory_order_relaxed);
    for (int t = 0; t < threads; t++) {
        pthread_join(wk[t].tid, NULL);
        ns += (double)wk[t].wall_ns / (double)wk[t].ops;
        cpu += (double)wk[t].cpu_ns / (double)wk[t].ops;
        used += (double)wk[t].cpu_ns / (double)wk[t].wall_ns;
    }
    *cpu_ns = cpu / threads;
    *cpus = used;
    return ns / threads;
}

typedef struct config {
    enum kind kind;
    int threads;
    double *samples;
    double *cpu_samples;
    double *cpus_samples;
    double cpus;
    double ns;
    double cpu_ns;
    double spill_rate;
    double saturated_rate;
} config_t;

int main(int argc, char **argv)
{
    bench_opts_t o;
    shared_t sh;
    config_t cfg[8];
    int ncfg = 0;
    double ms;
    FILE *csv;

    bench_parse(argc, argv, &o, "chring-bench-acquire: acquire + release against a plain lookup",
                NULL);
    bench_print_machine("chring-bench-acquire");
    ms = 10 * o.target_ms;
    printf("# ring %d x 160 (hash64), balance 1.25, 16-byte keys; %.0f ms per measurement, median "
           "of %d\n"
           "# interleaved reps; ns per operation per thread\n\n",
           MEMBERS, ms, o.reps);

    memset(&sh, 0, sizeof sh);
    sh.keys = bench_keys(NKEYS, 16, 0xacc0);
    sh.ring = bench_ring(CHRING_PROFILE_HASH64, MEMBERS);

    cfg[ncfg++] = (config_t){.kind = K_LOOKUP, .threads = 1};
    cfg[ncfg++] = (config_t){.kind = K_ACQUIRE, .threads = 1};
    cfg[ncfg++] = (config_t){.kind = K_ACQUIRE_WINDOW, .threads = 1};
    cfg[ncfg++] = (config_t){.kind = K_LOOKUP, .threads = 2};
    cfg[ncfg++] = (config_t){.kind = K_ACQUIRE, .threads = 2};
    cfg[ncfg++] = (config_t){.kind = K_ACQUIRE_HOT, .threads = 2};
    cfg[ncfg++] = (config_t){.kind = K_ACQUIRE_WINDOW, .threads = 2};
    for (int i = 0; i < ncfg; i++) {
        cfg[i].samples = calloc((size_t)o.reps, sizeof(double));
        cfg[i].cpu_samples = calloc((size_t)o.reps, sizeof(double));
        cfg[i].cpus_samples = calloc((size_t)o.reps, sizeof(double));
    }

    fprintf(stderr, "acquire: %d configurations x %d reps x %.0f ms...\n", ncfg, o.reps, ms);
    for (int rep = 0; rep < o.reps; rep++)
        for (int i = 0; i < ncfg; i++) {
            chring_stats_t a, b;
            chring_stats(sh.ring, &a);
            cfg[i].samples[rep] = run_once(&sh, cfg[i].kind, cfg[i].threads, ms,
                                           &cfg[i].cpu_samples[rep], &cfg[i].cpus_samples[rep]);
            chring_stats(sh.ring, &b);
            if (rep == 0 && b.acquires > a.acquires) {
                cfg[i].spill_rate =
                    (double)(b.spills - a.spills) / (double)(b.acquires - a.acquires);
                cfg[i].saturated_rate =
                    (double)(b.saturated - a.saturated) / (double)(b.acquires - a.acquires);
            }
        }
    {
        chring_stats_t st;
        chring_stats(sh.ring, &st);
        bench_require(st.leases == 0, "%llu leases still outstanding after the runs",
                      (unsigned long long)st.leases);
    }

    csv = bench_csv_open(&o, "acquire.csv",
                         "variant,threads,ns_per_op,ratio_to_lookup,cpu_ns_per_op,cpu_ratio_to_"
                         "lookup,spill_rate,saturated_rate,cpus_used");
    printf("| operation | threads | ns per op per thread (wall) | x plain lookup | CPU ns per op | "
           "x plain lookup (CPU) | spills | saturated | CPUs used |\n"
           "|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < ncfg; i++) {
        cfg[i].ns = bench_median(cfg[i].samples, (size_t)o.reps);
        cfg[i].cpu_ns = bench_median(cfg[i].cpu_samples, (size_t)o.reps);
        cfg[i].cpus = bench_median(cfg[i].cpus_samples, (size_t)o.reps);
    }
    for (int i = 0; i < ncfg; i++) {
        double lookup_ns = 0, lookup_cpu = 0;
        for (int j = 0; j < ncfg; j++)
            if (cfg[j].kind == K_LOOKUP && cfg[j].threads == cfg[i].threads) {
                lookup_ns = cfg[j].ns;
                lookup_cpu = cfg[j].cpu_ns;
            }
        printf("| %s | %d | %.1f | %.2f | %.1f | %.2f | %.1f%% | %.2f%% | %.2f |\n",
               kind_desc[cfg[i].kind], cfg[i].threads, cfg[i].ns, cfg[i].ns / lookup_ns,
               cfg[i].cpu_ns, cfg[i].cpu_ns / lookup_cpu, 100 * cfg[i].spill_rate,
               100 * cfg[i].saturated_rate, cfg[i].cpus);
        fprintf(csv, "%s,%d,%.2f,%.3f,%.2f,%.3f,%.4f,%.4f,%.3f\n", kind_names[cfg[i].kind],
                cfg[i].threads, cfg[i].ns, cfg[i].ns / lookup_ns, cfg[i].cpu_ns,
                cfg[i].cpu_ns / lookup_cpu, cfg[i].spill_rate, cfg[i].saturated_rate, cfg[i].cpus);
    }
    fclose(csv);
    printf("\ntarget: acquire + release <= 3 x a plain lookup; CPU time (wall time):\n"
           "| case | target | measured |\n|---|---|---|\n"
           "| 1 thread | <= 3 | %.2f (%.2f) |\n| 2 threads, distinct keys | <= 3 | %.2f (%.2f) |\n"
           "| 2 threads, one hot key | <= 3 | %.2f (%.2f) |\n",
           cfg[1].cpu_ns / cfg[0].cpu_ns, cfg[1].ns / cfg[0].ns, cfg[4].cpu_ns / cfg[3].cpu_ns,
           cfg[4].ns / cfg[3].ns, cfg[5].cpu_ns / cfg[3].cpu_ns, cfg[5].ns / cfg[3].ns);
    printf("\n# CSV: %s/acquire.csv; load average now %.2f\n", o.out_dir, bench_loadavg());

    chring_free(&sh.ring);
    for (int i = 0; i < ncfg; i++) {
        free(cfg[i].samples);
        free(cfg[i].cpu_samples);
        free(cfg[i].cpus_samples);
    }
    free((void *)sh.keys);
    return 0;
}
