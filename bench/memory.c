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
 * Writes memory.csv.
 */
#include <stdlib.h>

#include "common.h"

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
    if (leaked_total != 0)
        printf("WARNING: %lld bytes were not given back after chring_free\n", leaked_total);
    chring_set_allocator(NULL);
    printf("\n# CSV: %s/memory.csv\n", o.out_dir);
    return 0;
}
