/* chring-bench-prefault: what the spare blocks a build makes ready buy a burst that follows it,
 * and what they cost (docs/bench.md, "Spares a build makes ready"; docs/design.md §4, "Spare
 * blocks").
 *
 * SPDX-License-Identifier: MIT
 *
 * For each ring size and each count of spares (chring_set_prefault), alternated round by round
 * so that the machine's drift falls on every count alike: a ring of members x vnodes (hash64)
 * is built in one chring_update through the counting allocator, and at once 20 publishes follow
 * back to back (one member added, removed, added, ...).  Printed per round: the build's wall
 * and writer-thread CPU time, the bytes held at the build's peak and right after it, each
 * publish's wall and CPU time and minor page faults (median, worst, and the publishes that
 * faulted in a fresh block), the peak during the burst, and the bytes held 50 ms and 1 s after
 * it.  Bytes per point are the library's own count (chring_set_allocator), not the process's.
 *
 *   chring-bench-prefault [--rounds N] [--counts 5,0] [MEMBERS x VNODES ...]
 *   default: --rounds 2 --counts 5,0 20000x160 100000x160
 */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common.h"

enum {
    PUBLISHES = 20
};

static long thread_minflt(void)
{
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    return u.ru_minflt;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void one_round(FILE *csv, unsigned members, unsigned vnodes, unsigned prefault, int round)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = vnodes;
    chring_t *r = NULL;
    bench_require(chring_new(&r, &cfg) == 0, "chring_new");
    bench_require(chring_set_prefault(r, prefault) == 0, "chring_set_prefault(%u)", prefault);
    char(*names)[16];
    chring_change_t *feed = bench_member_feed(members, &names);
    double points = (double)members * vnodes;

    long long before = bench_counted_settled();
    bench_counted_reset();
    uint64_t t0 = bench_now_ns();
    double c0 = bench_thread_cpu_ms();
    bench_require(chring_update(r, feed, members) == 0, "build");
    double build_cpu = bench_thread_cpu_ms() - c0;
    double build_ms = (double)(bench_now_ns() - t0) / 1e6;
    double build_peak = (double)(bench_counted_peak() - before) / points;
    double built = (double)(bench_counted_live() - before) / points;

    bench_counted_reset();
    double ms[PUBLISHES], cpu[PUBLISHES], sorted_ms[PUBLISHES], sorted_cpu[PUBLISHES];
    long flt[PUBLISHES];
    for (int k = 0; k < PUBLISHES; k++) {
        uint64_t t = bench_now_ns();
        double c = bench_thread_cpu_ms();
        long f = thread_minflt();
        int rc = k % 2 == 0 ? chring_add(r, names[members], 1, NULL)
                            : chring_remove(r, names[members]);
        flt[k] = thread_minflt() - f;
        cpu[k] = bench_thread_cpu_ms() - c;
        ms[k] = (double)(bench_now_ns() - t) / 1e6;
        bench_require(rc == 0, "publish %d", k);
    }
    double burst_peak = (double)(bench_counted_peak() - before) / points;
    memcpy(sorted_ms, ms, sizeof ms);
    memcpy(sorted_cpu, cpu, sizeof cpu);
    qsort(sorted_ms, PUBLISHES, sizeof sorted_ms[0], cmp_double);
    qsort(sorted_cpu, PUBLISHES, sizeof sorted_cpu[0], cmp_double);
    /* A publish that faulted in a fresh block takes a fault per 2 MiB page at least: more than
     * a hundred at these sizes; one that reused a spare takes a few. */
    int fresh = 0;
    double fresh_cpu = 0;
    for (int k = 0; k < PUBLISHES; k++)
        if (flt[k] > 64) {
            fresh++;
            fresh_cpu += cpu[k];
        }
    bench_sleep_ms(50);
    double soon = (double)(bench_counted_live() - before) / points;
    bench_sleep_ms(950);
    double rest = (double)(bench_counted_live() - before) / points;
    printf("| %u x %u | %u | %d | %.0f / %.0f | %.1f | %.1f | %.1f / %.1f | %.1f / %.1f | "
           "%.1f / %.1f | %d (%.1f ms CPU each) | %.1f | %.1f | %.1f |\n",
           members, vnodes, prefault, round, build_ms, build_cpu, build_peak, built,
           sorted_ms[PUBLISHES / 2], sorted_ms[PUBLISHES - 1], sorted_cpu[PUBLISHES / 2],
           sorted_cpu[PUBLISHES - 1], ms[0], cpu[0], fresh, fresh > 0 ? fresh_cpu / fresh : 0.0,
           burst_peak, soon, rest);
    fprintf(csv, "%u,%u,%u,%d,%.1f,%.1f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%d,%.2f,%.2f,%.2f\n",
            members, vnodes, prefault, round, build_ms, build_cpu, build_peak, built,
            sorted_ms[PUBLISHES / 2], sorted_ms[PUBLISHES - 1], sorted_cpu[PUBLISHES / 2],
            sorted_cpu[PUBLISHES - 1], ms[0], cpu[0], fresh, burst_peak, soon, rest);
    fflush(stdout);
    chring_free(&r);
    free(feed);
    free(names);
}

int main(int argc, char **argv)
{
    unsigned sizes[8][2];
    size_t nsizes = 0;
    unsigned counts[8] = {5, 0};
    size_t ncounts = 2;
    int rounds = 2;
    const char *out = ".";
    for (int i = 1; i < argc; i++) {
        unsigned m, v;
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--counts") == 0 && i + 1 < argc) {
            ncounts = 0;
            for (char *p = argv[++i]; *p != '\0' && ncounts < 8;) {
                counts[ncounts++] = (unsigned)strtoul(p, &p, 10);
                if (*p == ',')
                    p++;
            }
        } else if (sscanf(argv[i], "%ux%u", &m, &v) == 2 && nsizes < 8) {
            sizes[nsizes][0] = m;
            sizes[nsizes][1] = v;
            nsizes++;
        } else {
            fprintf(stderr, "usage: chring-bench-prefault [--rounds N] [--counts 5,0] "
                            "[--out DIR] [MEMBERSxVNODES ...]\n");
            return 2;
        }
    }
    if (nsizes == 0) {
        sizes[0][0] = 20000, sizes[0][1] = 160;
        sizes[1][0] = 100000, sizes[1][1] = 160;
        nsizes = 2;
    }
    bench_print_machine("chring-bench-prefault");
    bench_require(chring_set_allocator(&bench_counting_allocator) == 0, "chring_set_allocator");
    char path[4096];
    snprintf(path, sizeof path, "%s/prefault.csv", out);
    FILE *csv = fopen(path, "w");
    bench_require(csv != NULL, "open %s", path);
    fprintf(csv, "members,vnodes,prefault,round,build_ms,build_cpu_ms,build_peak_bpp,built_bpp,"
                 "median_ms,worst_ms,median_cpu_ms,worst_cpu_ms,first_ms,first_cpu_ms,fresh,"
                 "burst_peak_bpp,bpp_50ms_after,bpp_1s_after\n");
    printf("# bytes per point: the library's own, counted through chring_set_allocator\n\n"
           "| ring | spares made ready | round | build wall / CPU ms | build peak B/pt | after "
           "the build B/pt | publish wall median / worst ms | CPU median / worst | first "
           "publish wall / CPU | publishes that faulted a fresh block | burst peak B/pt | 50 ms "
           "after | 1 s after |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < nsizes; s++)
        for (int round = 0; round < rounds; round++)
            for (size_t c = 0; c < ncounts; c++)
                one_round(csv, sizes[s][0], sizes[s][1],
                          counts[(c + (size_t)round) % ncounts], round);
    fclose(csv);
    chring_set_allocator(NULL);
    return 0;
}
