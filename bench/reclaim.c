/* chring-bench-reclaim: how soon a replaced snapshot comes back, and what that does to a burst of
 * publishes (docs/bench.md §11h; docs/design.md §4, "Reclamation").
 *
 * SPDX-License-Identifier: MIT
 *
 * Part 1, grace periods.  With 0, 1, 2 and 4 threads looking up in read sections back to back
 * (chring_snap_enter, 64 pre-hashed lookups, chring_snap_exit), the time urcu-bp's
 * synchronize_rcu takes (what the ring's reclaimer waits for) and the time from call_rcu to its
 * callback (what gave replaced snapshots back before the reclaimer): median, 90th percentile and
 * worst.
 *
 * Part 2, bursts.  Rings of 10,000 x 160 and 100,000 x 16 (hash64), built in one chring_update;
 * then bursts of 20 back-to-back publishes (one member added, removed, added, ...), a second
 * apart, each publish's wall time taken, with 0, 1 or 2 reader threads looking up all the while.
 * Each configuration runs in a child process of its own, twice: with the ring's reclaimer thread
 * (the default) and with CHRING_RECLAIM_THREAD=0 (replaced snapshots to liburcu's call_rcu, as
 * before the reclaimer), alternated, under the counting allocator (the peak bytes a point a burst
 * reached) and under the default one (blocks of 8 MB or more mapped by the library).
 *
 * Writes reclaim_grace.csv and reclaim_bursts.csv.  No assertion: the figures are for reading.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <urcu-bp.h>

#include "common.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- readers ------------------------------------------------------------------------------ */

struct readers {
    chring_t *r;
    atomic_int stop;
    pthread_t thread[4];
    int n;
};

static void *reader_main(void *arg)
{
    struct readers *rd = arg;
    uint64_t state = (uint64_t)(uintptr_t)&state;
    uintptr_t sink = 0;
    while (!atomic_load_explicit(&rd->stop, memory_order_relaxed)) {
        const chring_snap_t *s = chring_snap_enter(rd->r);
        for (int i = 0; i < 64; i++)
            sink += (uintptr_t)chring_snap_lookup_hash(s, bench_splitmix64(&state));
        chring_snap_exit(rd->r, s);
    }
    return (void *)sink;
}

static void readers_start(struct readers *rd, chring_t *r, int n)
{
    rd->r = r;
    rd->n = n;
    atomic_store(&rd->stop, 0);
    for (int i = 0; i < n; i++)
        bench_require(pthread_create(&rd->thread[i], NULL, reader_main, rd) == 0, "reader");
}

static void readers_stop(struct readers *rd)
{
    atomic_store(&rd->stop, 1);
    for (int i = 0; i < rd->n; i++)
        pthread_join(rd->thread[i], NULL);
}

/* ---- part 1: grace periods ---------------------------------------------------------------- */

static atomic_int callback_ran;
static uint64_t callback_at;
static struct rcu_head head;

static void callback(struct rcu_head *h)
{
    (void)h;
    callback_at = bench_now_ns();
    atomic_store(&callback_ran, 1);
}

static void grace_periods(FILE *csv, bool quick)
{
    enum {
        SYNCS = 200,
        CALLS = 40
    };
    int nsync = quick ? 60 : SYNCS, ncall = quick ? 12 : CALLS;
    static const int counts[] = {0, 1, 2, 4};
    chring_t *r = bench_ring(CHRING_PROFILE_HASH64, 100);
    printf("## Grace periods (urcu-bp), readers looking up back to back\n\n"
           "| readers | synchronize_rcu: median, p90, worst (us) | call_rcu to its callback: "
           "median, p90, worst (us) |\n|---|---|---|\n");
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        struct readers rd;
        double sync_us[SYNCS], call_us[CALLS];
        readers_start(&rd, r, counts[c]);
        bench_sleep_ms(50);
        for (int i = 0; i < nsync; i++) {
            uint64_t t = bench_now_ns();
            synchronize_rcu();
            sync_us[i] = (double)(bench_now_ns() - t) / 1e3;
            bench_sleep_ms(2);
        }
        for (int i = 0; i < ncall; i++) {
            atomic_store(&callback_ran, 0);
            uint64_t t = bench_now_ns();
            call_rcu(&head, callback);
            for (int spin = 0; spin < 20000 && !atomic_load(&callback_ran); spin++) {
                struct timespec pause = {0, 50000};
                nanosleep(&pause, NULL);
            }
            bench_require(atomic_load(&callback_ran), "call_rcu's callback within a second");
            call_us[i] = (double)(callback_at - t) / 1e3;
        }
        readers_stop(&rd);
        qsort(sync_us, (size_t)nsync, sizeof sync_us[0], cmp_double);
        qsort(call_us, (size_t)ncall, sizeof call_us[0], cmp_double);
        printf("| %d | %.0f, %.0f, %.0f | %.0f, %.0f, %.0f |\n", counts[c], sync_us[nsync / 2],
               sync_us[nsync * 9 / 10], sync_us[nsync - 1], call_us[ncall / 2],
               call_us[ncall * 9 / 10], call_us[ncall - 1]);
        fprintf(csv, "%d,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f\n", counts[c], sync_us[nsync / 2],
                sync_us[nsync * 9 / 10], sync_us[nsync - 1], call_us[ncall / 2],
                call_us[ncall * 9 / 10], call_us[ncall - 1]);
    }
    chring_free(&r);
    printf("\n");
}

/* ---- part 2: bursts (one configuration, in a child process) ------------------------------- */

enum {
    PUBLISHES = 20
};

/* Runs one configuration and prints one line: the figures the parent reads back. */
static int burst_child(unsigned members, unsigned vnodes, int counting, int readers, int bursts)
{
    if (counting)
        bench_require(chring_set_allocator(&bench_counting_allocator) == 0, "allocator");
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = vnodes;
    chring_t *r = NULL;
    bench_require(chring_new(&r, &cfg) == 0, "chring_new");
    char(*names)[16];
    chring_change_t *feed = bench_member_feed(members, &names);
    long long before = bench_counted_live();
    bench_require(chring_update(r, feed, members) == 0, "build");
    struct readers rd;
    readers_start(&rd, r, readers);
    double points = (double)members * vnodes;
    double *ms = calloc((size_t)bursts * PUBLISHES, sizeof *ms);
    bench_require(ms != NULL, "memory");
    int over = 0, n = 0;
    double first_worst = 0, other_worst = 0, peak = 0;
    for (int b = 0; b < bursts; b++) {
        bench_sleep_ms(1000);
        bench_counted_reset();
        for (int k = 0; k < PUBLISHES; k++) {
            uint64_t t = bench_now_ns();
            int rc = k % 2 == 0 ? chring_add(r, names[members], 1, NULL)
                                : chring_remove(r, names[members]);
            double d = (double)(bench_now_ns() - t) / 1e6;
            bench_require(rc == 0, "publish %d of burst %d", k, b);
            ms[n++] = d;
            over += d > 10.0;
            if (k == 0 && d > first_worst)
                first_worst = d;
            if (k > 0 && d > other_worst)
                other_worst = d;
        }
        double p = (double)(bench_counted_peak() - before) / points;
        if (p > peak)
            peak = p;
    }
    readers_stop(&rd);
    qsort(ms, (size_t)n, sizeof ms[0], cmp_double);
    printf("%d %d %.2f %.2f %.2f %.2f %.1f\n", n, over, ms[n / 2], first_worst, other_worst,
           ms[n * 9 / 10], counting ? peak : 0.0);
    chring_free(&r);
    free(ms);
    free(feed);
    free(names);
    return 0;
}

/* Runs burst_child in a child process (this program again, with CHRING_RECLAIM_THREAD set as
 * asked) and reads its line. */
static bool run_child(const char *self, unsigned members, unsigned vnodes, int counting,
                      int readers, int bursts, bool thread, char *line, size_t cap)
{
    int fd[2];
    bench_require(pipe(fd) == 0, "pipe");
    pid_t pid = fork();
    bench_require(pid >= 0, "fork");
    if (pid == 0) {
        char a[5][16];
        snprintf(a[0], sizeof a[0], "%u", members);
        snprintf(a[1], sizeof a[1], "%u", vnodes);
        snprintf(a[2], sizeof a[2], "%d", counting);
        snprintf(a[3], sizeof a[3], "%d", readers);
        snprintf(a[4], sizeof a[4], "%d", bursts);
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        setenv("CHRING_RECLAIM_THREAD", thread ? "1" : "0", 1);
        execl(self, self, "--burst-child", a[0], a[1], a[2], a[3], a[4], (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *in = fdopen(fd[0], "r");
    bool got = in != NULL && fgets(line, (int)cap, in) != NULL;
    if (in != NULL)
        fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    return got && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void bursts(FILE *csv, const char *self, bool quick)
{
    static const struct {
        unsigned members, vnodes;
    } rings[] = {{10000, 160}, {100000, 16}};
    int nbursts = quick ? 2 : 4, rounds = quick ? 1 : 2;
    printf("## Bursts of %d back-to-back publishes a second apart (%d bursts a run, %d runs "
           "alternated)\n\n"
           "| ring | allocator | reader threads | given back by | publishes over 10 ms | first of "
           "a burst, worst (ms) | the others, worst (ms) | median (ms) | peak in a burst "
           "(bytes a point) |\n|---|---|---|---|---|---|---|---|---|\n",
           PUBLISHES, nbursts, rounds);
    for (size_t g = 0; g < sizeof rings / sizeof rings[0]; g++)
        for (int counting = 1; counting >= 0; counting--)
            for (int readers = 0; readers <= 2; readers++)
                for (int round = 0; round < rounds; round++)
                    for (int thread = 1; thread >= 0; thread--) {
                        char line[256];
                        int n, over;
                        double median, first, other, p90, peak;
                        bench_require(run_child(self, rings[g].members, rings[g].vnodes, counting,
                                                readers, nbursts, thread, line, sizeof line),
                                      "burst child");
                        bench_require(sscanf(line, "%d %d %lf %lf %lf %lf %lf", &n, &over, &median,
                                             &first, &other, &p90, &peak) == 7,
                                      "burst child's line: %s", line);
                        const char *who = thread ? "the reclaimer" : "call_rcu";
                        char peak_text[32] = "not counted";
                        if (counting)
                            snprintf(peak_text, sizeof peak_text, "%.1f", peak);
                        printf("| %u x %u | %s | %d | %s | %d of %d | %.1f | %.1f | %.1f | %s |\n",
                               rings[g].members, rings[g].vnodes, counting ? "counting" : "default",
                               readers, who, over, n, first, other, median, peak_text);
                        fprintf(csv, "%u,%u,%s,%d,%s,%d,%d,%.2f,%.2f,%.2f,%.2f,%.1f\n",
                                rings[g].members, rings[g].vnodes,
                                counting ? "counting" : "default", readers,
                                thread ? "reclaimer" : "call_rcu", over, n, first, other, median,
                                p90, peak);
                        fflush(stdout);
                    }
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--burst-child") == 0)
        return burst_child((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), atoi(argv[4]),
                           atoi(argv[5]), atoi(argv[6]));
    bench_opts_t o;
    bench_parse(argc, argv, &o,
                "chring-bench-reclaim: grace periods, and bursts of publishes with the reclaimer "
                "and with call_rcu",
                NULL);
    bench_print_machine("chring-bench-reclaim");
    FILE *grace = bench_csv_open(&o, "reclaim_grace.csv",
                                 "readers,sync_median_us,sync_p90_us,sync_max_us,call_median_us,"
                                 "call_p90_us,call_max_us");
    grace_periods(grace, o.quick);
    fclose(grace);
    FILE *csv = bench_csv_open(&o, "reclaim_bursts.csv",
                               "members,vnodes,allocator,readers,given_back_by,over_10ms,"
                               "publishes,first_worst_ms,others_worst_ms,median_ms,p90_ms,"
                               "peak_bytes_per_point");
    bursts(csv, "/proc/self/exe", o.quick);
    fclose(csv);
    return 0;
}
