/* chring-bench-memory: the library's memory per point against ring size (docs/bench.md §6),
 * counted through chring_set_allocator.
 *
 * SPDX-License-Identifier: MIT
 *
 * A counting allocator is installed before any ring exists; it counts the bytes the library asks
 * for (not malloc's own overhead).  For each ring: live bytes before chring_new, after building the
 * ring in one chring_update (once deferred reclamation has settled), the peak during the build,
 * after one more member is added (the incremental publish path), and after chring_free (which
 * should give every byte back).  Bytes per point = (live after - live before) / points.
 *
 * Then memory at rest (docs/bench.md §11): rings of 10,000 x 160 and 100,000 x 16 built in one
 * chring_update; the bytes held a second after the build, then three bursts of 20 back-to-back
 * publishes (one member added, removed, added, ...), each publish's wall time and the writer
 * thread's CPU time (the machine may be shared: CPU time is what the publish itself cost), and
 * the bytes held 50 ms and a second after each burst, with no chring_trim.
 *
 * Writes memory.csv and memory_rest.csv.
 */
#include <stdlib.h>
#include <time.h>

#include "common.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One ring of members x vnodes (hash64) at rest and in bursts; a row per burst. */
static void at_rest(FILE *csv, unsigned members, unsigned vnodes)
{
    enum {
        BURSTS = 3,
        PUBLISHES = 20
    };
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = vnodes;
    chring_t *r = NULL;
    bench_require(chring_new(&r, &cfg) == 0, "chring_new");
    char(*names)[16];
    chring_change_t *feed = bench_member_feed(members, &names);
    long long before = bench_counted_live();
    uint64_t t0 = bench_now_ns();
    bench_require(chring_update(r, feed, members) == 0, "build");
    double build_ms = (double)(bench_now_ns() - t0) / 1e6;
    double points = (double)members * vnodes;
    bench_sleep_ms(1000);
    double built = (double)(bench_counted_live() - before) / points;
    printf("| %u x %u | build %.0f ms | a second after the build | | | | %.1f |\n", members,
           vnodes, build_ms, built);
    fprintf(csv, "%u,%u,build,%.1f,,,,%.2f,,,\n", members, vnodes, build_ms, built);
    bench_counted_reset();
    for (int b = 0; b < BURSTS; b++) {
        double ms[PUBLISHES], sorted[PUBLISHES], cpu[PUBLISHES];
        for (int k = 0; k < PUBLISHES; k++) {
            uint64_t t = bench_now_ns();
            double c = bench_thread_cpu_ms();
            int rc = k % 2 == 0 ? chring_add(r, names[members], 1, NULL)
                                : chring_remove(r, names[members]);
            cpu[k] = bench_thread_cpu_ms() - c;
            ms[k] = (double)(bench_now_ns() - t) / 1e6;
            bench_require(rc == 0, "publish %d of burst %d", k, b);
            sorted[k] = ms[k];
        }
        double first_cpu = cpu[0];
        qsort(sorted, PUBLISHES, sizeof sorted[0], cmp_double);
        qsort(cpu, PUBLISHES, sizeof cpu[0], cmp_double);
        bench_sleep_ms(50);
        double soon = (double)(bench_counted_live() - before) / points;
        bench_sleep_ms(950);
        double rest = (double)(bench_counted_live() - before) / points;
        printf("| %u x %u | burst %d of %d publishes | first %.1f ms, median %.1f, worst %.1f | "
               "first %.1f ms, median %.1f, worst %.1f | %.1f | %.1f | %.1f |\n",
               members, vnodes, b, PUBLISHES, ms[0], sorted[PUBLISHES / 2], sorted[PUBLISHES - 1],
               first_cpu, cpu[PUBLISHES / 2], cpu[PUBLISHES - 1],
               (double)(bench_counted_peak() - before) / points, soon, rest);
        fprintf(csv, "%u,%u,burst%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f\n", members, vnodes, b,
                ms[0], sorted[PUBLISHES / 2], sorted[PUBLISHES - 1], soon, rest, first_cpu,
                cpu[PUBLISHES / 2], cpu[PUBLISHES - 1]);
        bench_counted_reset();
    }
    chring_free(&r);
    free(feed);
    free(names);
}

int main(int argc, char **argv)
{
    static const struct {
        chring_profile_t profile;
        unsigned members;
    } rings[] = {
        {CHRING_PROFILE_HASH64, 10}, {CHRING_PROFILE_HASH64, 100},    {CHRING_PROFILE_HASH64, 1000},
        {CHRING_PROFILE_XXH3, 1000}, {CHRING_PROFILE_MURMUR32, 1000}, {CHRING_PROFILE_FNV32, 1000},
        {CHRING_PROFILE_FNV16, 100}, {CHRING_PROFILE_KETAMA, 1000},   {CHRING_PROFILE_NGINX, 1000},
    };
    bench_opts_t o;
    FILE *csv;
    double hash64_1000 = 0;
    long long leaked_total = 0;

    bench_parse(argc, argv, &o, "chring-bench-memory: library bytes per point against ring size",
                NULL);
    bench_print_machine("chring-bench-memory");
    bench_require(chring_set_allocator(&bench_counting_allocator) == 0, "chring_set_allocator");
    csv = bench_csv_open(&o, "memory.csv",
                         "profile,members,points,bytes,bytes_per_point,peak_build_bytes_per_point,"
                         "bytes_per_point_after_add,allocations,leaked_bytes");
    printf("# bytes the library asked for through chring_set_allocator; live after deferred frees "
           "settle\n\n");
    printf(
        "| profile | members | points | live bytes | bytes per point | peak during build per point "
        "| "
        "per point after +1 member (incremental) | allocations | bytes left after chring_free |\n"
        "|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof rings / sizeof rings[0]; i++) {
        long long before, built, peak, after_add, after_free, nalloc;
        size_t points, points_add;
        chring_t *r;
        char name[16];
        const chring_snap_t *s;

        before = bench_counted_settled();
        bench_counted_reset();
        r = bench_ring(rings[i].profile, rings[i].members);
        peak = bench_counted_peak();
        nalloc = bench_counted_allocations();
        built = bench_counted_settled();
        s = chring_snap_hold(r);
        points = chring_snap_points(s);
        chring_snap_put(r, s);

        bench_member_name(name, sizeof name, rings[i].members);
        bench_require(chring_add(r, name, 1, NULL) == 0, "add");
        after_add = bench_counted_settled();
        s = chring_snap_hold(r);
        points_add = chring_snap_points(s);
        chring_snap_put(r, s);

        chring_free(&r);
        after_free = bench_counted_settled();
        leaked_total += after_free - before;

        double per_point = (double)(built - before) / (double)points;
        if (rings[i].profile == CHRING_PROFILE_HASH64 && rings[i].members == 1000)
            hash64_1000 = per_point;
        printf("| %s | %u | %zu | %lld | %.1f | %.1f | %.1f | %lld | %lld |\n",
               chring_profile_name(rings[i].profile), rings[i].members, points, built - before,
               per_point, (double)(peak - before) / (double)points,
               (double)(after_add - before) / (double)points_add, nalloc, after_free - before);
        fprintf(csv, "%s,%u,%zu,%lld,%.2f,%.2f,%.2f,%lld,%lld\n",
                chring_profile_name(rings[i].profile), rings[i].members, points, built - before,
                per_point, (double)(peak - before) / (double)points,
                (double)(after_add - before) / (double)points_add, nalloc, after_free - before);
    }
    fclose(csv);
    printf("\ntarget: <= 24 bytes per point at 1000 x 160 (hash64): measured %.1f\n", hash64_1000);

    /* Memory at rest: no chring_trim anywhere. */
    csv = bench_csv_open(&o, "memory_rest.csv",
                         "members,vnodes,phase,first_or_build_ms,median_ms,worst_ms,"
                         "bytes_per_point_50ms_after,bytes_per_point_1s_after,first_cpu_ms,"
                         "median_cpu_ms,worst_cpu_ms");
    printf("\n## At rest (no chring_trim): bytes per point the library holds\n\n"
           "| ring | phase | publish wall time | publish CPU time (writer thread) | peak in the "
           "burst | 50 ms after | a second after |\n|---|---|---|---|---|---|---|\n");
    at_rest(csv, 10000, 160);
    at_rest(csv, 100000, 16);
    fclose(csv);
    printf("target: <= 24 bytes per point a second after the last publish\n");
    if (leaked_total != 0)
        printf("WARNING: %lld bytes were not given back after chring_free\n", leaked_total);
    chring_set_allocator(NULL);
    printf("\n# CSV: %s/memory.csv\n", o.out_dir);
    return 0;
}
