/* chring-bench-publish: publish latency against ring size (docs/bench.md §5): add one member,
 * remove one member, change one weight, against a full rebuild measured in the same run.
 *
 * SPDX-License-Identifier: MIT
 *
 * Rings of 10, 100 and 1000 members x 160 points (hash64), then the other profiles at 1000 members
 * (fnv16 at 100, the most it holds).  Each rep times one call of each kind, interleaved:
 *   add       chring_add of a new member (one publish), on the built ring
 *   remove    chring_remove of that member (one publish)
 *   weight    chring_set_weight of an existing member 1 -> 2, and back (two publishes, timed apart)
 *   rebuild   chring_new + chring_sync of the whole membership (plus the new member) into a NEW
 *             ring: the library's own build from scratch
 *   naive     what a ring without incremental publish does: every label, every hash, qsort of all
 *             points (hash64 only; user code, no chring call)
 * Times are the calling thread's CPU time (bench_cpu_ns): the writer does all of a publish on its
 * own thread, and on a shared machine wall time would add the time it waited for a core.
 * Writers defer reclamation to call_rcu, so the figures are the writer's own latency; the program
 * sleeps 5 ms between calls so that reclamation from one call does not land in the next one's time.
 *
 * Writes publish.csv.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "baseline.h"
#include "common.h"

enum op {
    OP_ADD,
    OP_REMOVE,
    OP_WEIGHT_UP,
    OP_WEIGHT_DOWN,
    OP_REBUILD,
    OP_NAIVE,
    NOPS
};
static const char *op_names[NOPS] = {
    "add", "remove", "weight_up", "weight_down", "rebuild_sync_new_ring", "naive_rebuild_qsort"};

/* Minor page faults of this thread so far: fresh memory touched by a publish faults in page by
 * page, and on this VM each fault costs microseconds of the writer's CPU time. */
static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    return u.ru_minflt;
}

static void pause_ms(double ms)
{
    struct timespec d = {0, (long)(ms * 1e6)};
    nanosleep(&d, NULL);
}

typedef struct naive_point {
    uint64_t pos;
    uint32_t owner;
    uint32_t index;
} naive_point_t;

static int cmp_point(const void *a, const void *b)
{
    const naive_point_t *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    if (x->owner != y->owner)
        return x->owner < y->owner ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Builds the whole ring the naive way; returns elapsed ns. */
static uint64_t naive_rebuild(unsigned members)
{
    size_t n = (size_t)members * 160;
    naive_point_t *pts;
    char name[16], label[64];
    uint64_t t0 = bench_cpu_ns(), t1;
    pts = malloc(n * sizeof *pts);
    bench_require(pts != NULL, "out of memory");
    for (unsigned m = 0; m < members; m++) {
        bench_member_name(name, sizeof name, m);
        for (uint32_t i = 0; i < 160; i++) {
            int len = chring_vnode_label(label, sizeof label, name, i);
            naive_point_t *p = &pts[(size_t)m * 160 + i];
            p->pos = base_hash64(label, (size_t)len);
            p->owner = m;
            p->index = i;
        }
    }
    qsort(pts, n, sizeof *pts, cmp_point);
    t1 = bench_cpu_ns();
    bench_sink += pts[n / 2].pos;
    free(pts);
    return t1 - t0;
}

/* The membership of the ring plus one new member, for chring_sync. */
static chring_change_t *membership(unsigned members, char (*names)[16])
{
    chring_change_t *c = calloc(members + 1, sizeof *c);
    bench_require(c != NULL, "out of memory");
    for (unsigned i = 0; i <= members; i++) {
        bench_member_name(names[i], 16, i);
        c[i].name = names[i];
        c[i].weight = 1;
    }
    return c;
}

typedef struct row {
    const char *profile;
    unsigned members;
    size_t points;
    double ms[NOPS];     /* median milliseconds, NAN when not measured */
    double faults[NOPS]; /* median minor page faults per call */
} row_t;

static row_t measure(chring_profile_t profile, unsigned members, int reps, bool naive)
{
    row_t row = {chring_profile_name(profile), members, 0, {0}, {0}};
    chring_t *r = bench_ring(profile, members);
    char(*names)[16] = calloc(members + 1, 16);
    chring_change_t *all = membership(members, names);
    double *samples = calloc((size_t)reps * NOPS, sizeof *samples);
    double *faults = calloc((size_t)reps * NOPS, sizeof *faults);
    const char *newcomer = names[members];
    const char *existing = names[members / 2];
    chring_config_t cfg;

    bench_require(samples != NULL && faults != NULL, "out of memory");
    chring_config_default(&cfg);
    cfg.profile = profile;
    {
        const chring_snap_t *s = chring_snap_hold(r);
        row.points = chring_snap_points(s);
        chring_snap_put(r, s);
    }
    fprintf(stderr, "publish: %s, %u members...\n", row.profile, members);
    /* Two passes: the single-member calls, interleaved among themselves, then the rebuilds, so
     * that no add or remove runs right after a rebuild has flushed the caches. */
    for (int pass = 0; pass < 2; pass++)
        for (int rep = 0; rep < reps; rep++) {
            for (int op = pass == 0 ? OP_ADD : OP_REBUILD; op < (pass == 0 ? OP_REBUILD : NOPS);
                 op++) {
                uint64_t t0, ns = 0;
                int err = 0;
                if (op == OP_NAIVE && !naive)
                    continue;
                pause_ms(5);
                long f0 = minor_faults();
                t0 = bench_cpu_ns();
                switch (op) {
                case OP_ADD: err = chring_add(r, newcomer, 1, NULL); break;
                case OP_REMOVE: err = chring_remove(r, newcomer); break;
                case OP_WEIGHT_UP: err = chring_set_weight(r, existing, 2); break;
                case OP_WEIGHT_DOWN: err = chring_set_weight(r, existing, 1); break;
                case OP_REBUILD: {
                    chring_t *fresh = NULL;
                    err = chring_new(&fresh, &cfg);
                    if (err == 0)
                        err = chring_sync(fresh, all, members + 1);
                    ns = bench_cpu_ns() - t0;
                    chring_free(&fresh);
                    break;
                }
                default: ns = naive_rebuild(members); break;
                }
                if (op != OP_REBUILD && op != OP_NAIVE)
                    ns = bench_cpu_ns() - t0;
                bench_require(err == 0, "%s %s on %u members: %s", row.profile, op_names[op],
                              members, chring_strerror(err));
                samples[op * reps + rep] = (double)ns / 1e6;
                faults[op * reps + rep] = (double)(minor_faults() - f0);
            }
        }
    for (int op = 0; op < NOPS; op++) {
        row.ms[op] =
            (op == OP_NAIVE && !naive) ? NAN : bench_median(samples + op * reps, (size_t)reps);
        row.faults[op] = bench_median(faults + op * reps, (size_t)reps);
    }
    chring_free(&r);
    free(samples);
    free(faults);
    free(all);
    free(names);
    return row;
}

static void print_row(FILE *csv, const row_t *w)
{
    printf("| %s | %u | %zu | %.3f | %.3f | %.3f | %.3f | %.3f | ", w->profile, w->members,
           w->points, w->ms[OP_ADD], w->ms[OP_REMOVE], w->ms[OP_WEIGHT_UP], w->ms[OP_WEIGHT_DOWN],
           w->ms[OP_REBUILD]);
    if (!isnan(w->ms[OP_NAIVE]))
        printf("%.3f", w->ms[OP_NAIVE]);
    else
        printf("-");
    printf(" | %.1f | %.0f / %.0f |\n",
           w->ms[OP_REBUILD] /
               (w->ms[OP_ADD] > w->ms[OP_REMOVE] ? w->ms[OP_ADD] : w->ms[OP_REMOVE]),
           w->faults[OP_ADD], w->faults[OP_REMOVE]);
    for (int op = 0; op < NOPS; op++)
        fprintf(csv, "%s,%u,%zu,%s,%.4f,%.0f\n", w->profile, w->members, w->points, op_names[op],
                w->ms[op], w->faults[op]);
    fflush(csv);
}

int main(int argc, char **argv)
{
    static const unsigned sizes[] = {10, 100, 1000};
    static const chring_profile_t others[] = {CHRING_PROFILE_XXH3,   CHRING_PROFILE_MURMUR32,
                                              CHRING_PROFILE_FNV32,  CHRING_PROFILE_FNV16,
                                              CHRING_PROFILE_KETAMA, CHRING_PROFILE_NGINX};
    bench_opts_t o;
    row_t rows[3];
    int reps;
    FILE *csv;

    bench_parse(argc, argv, &o, "chring-bench-publish: publish latency against ring size", NULL);
    bench_print_machine("chring-bench-publish");
    /* One call of about a millisecond is one sample: three times the usual reps. */
    reps = 3 * o.reps;
    printf("# median of %d reps; milliseconds of the calling thread's CPU time per call\n\n", reps);
    csv = bench_csv_open(&o, "publish.csv", "profile,members,points,operation,ms,minor_faults");
    printf("| profile | members | points | add | remove | weight 1->2 | weight 2->1 | rebuild (new "
           "ring + sync) | "
           "naive rebuild (labels, hash, qsort) | rebuild / max(add, remove) | page faults add / "
           "remove |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int z = 0; z < 3; z++) {
        rows[z] = measure(CHRING_PROFILE_HASH64, sizes[z], reps, true);
        print_row(csv, &rows[z]);
    }
    for (size_t p = 0; p < sizeof others / sizeof others[0]; p++) {
        row_t w = measure(others[p], others[p] == CHRING_PROFILE_FNV16 ? 100 : 1000, reps, false);
        print_row(csv, &w);
    }
    fclose(csv);
    {
        const row_t *w = &rows[2];
        double worst = w->ms[OP_ADD] > w->ms[OP_REMOVE] ? w->ms[OP_ADD] : w->ms[OP_REMOVE];
        printf("\n| target (hash64, 1000 x 160) | target | measured |\n|---|---|---|\n");
        printf(
            "| add one member | <= 2 ms | %.3f ms |\n| remove one member | <= 2 ms | %.3f ms |\n",
            w->ms[OP_ADD], w->ms[OP_REMOVE]);
        printf("| full rebuild / slower of add, remove | >= 20 | %.1f |\n",
               w->ms[OP_REBUILD] / worst);
        printf("| naive rebuild / slower of add, remove | - | %.1f |\n", w->ms[OP_NAIVE] / worst);
    }
    printf("\n# CSV: %s/publish.csv; load average now %.2f\n", o.out_dir, bench_loadavg());
    return 0;
}
