/* chring-bench-resident: the process's resident memory a second after a build and after bursts
 * of publishes, with the library's default allocator, snapshot blocks mapped by the library
 * (the default) or left to malloc (CHRING_MAP_BLOCKS=0); and each burst's publish times
 * (docs/bench.md §11e; docs/design.md §4, "At rest").
 *
 * SPDX-License-Identifier: MIT
 *
 * For each ring size, round after round, the two modes alternated, each run in a child process
 * of its own (a fresh heap): a ring of members x vnodes (hash64) is built in one chring_update;
 * a second later VmRSS is read; then three bursts of 20 back-to-back publishes (one member
 * added, removed, added, ...), each followed by a second of rest and a read of VmRSS.  Printed
 * per run: VmRSS after the build and after each burst, and each burst's first and worst
 * publish, wall and writer-thread CPU time.  The library's own count of its bytes is
 * chring-bench-memory's (through chring_set_allocator, which leaves blocks to that allocator).
 *
 *   chring-bench-resident [--rounds N] [MEMBERS x VNODES ...]
 *   default: --rounds 2 100000x16 10000x160
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

enum {
    BURSTS = 3,
    PUBLISHES = 20
};

static long resident_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

static double clock_ms(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* One run, in a child: prints one line. */
static int run(unsigned members, unsigned vnodes, bool mapped)
{
    if (!mapped && setenv("CHRING_MAP_BLOCKS", "0", 1) != 0)
        return 1;
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = vnodes;
    chring_t *r = NULL;
    bench_require(chring_new(&r, &cfg) == 0, "chring_new");
    char(*names)[16];
    chring_change_t *feed = bench_member_feed(members, &names);
    bench_require(chring_update(r, feed, members) == 0, "the build");
    bench_sleep_ms(1000);
    printf("| %u x %u | %s | %ld |", members, vnodes, mapped ? "mapped (default)" : "malloc",
           resident_mb());
    for (int b = 0; b < BURSTS; b++) {
        double first = 0, worst = 0, cfirst = 0, cworst = 0;
        for (int k = 0; k < PUBLISHES; k++) {
            double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
            int rc = k % 2 == 0 ? chring_add(r, names[members], 1, NULL)
                                : chring_remove(r, names[members]);
            double t = clock_ms(CLOCK_MONOTONIC) - t0, c = clock_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
            bench_require(rc == 0, "publish %d", k);
            if (k == 0)
                first = t, cfirst = c;
            worst = t > worst ? t : worst;
            cworst = c > cworst ? c : cworst;
        }
        bench_sleep_ms(1000);
        printf(" %ld | %.1f / %.1f, %.1f / %.1f |", resident_mb(), first, cfirst, worst, cworst);
    }
    printf("\n");
    fflush(stdout);
    chring_free(&r);
    free(names);
    free(feed);
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = 2;
    unsigned sizes[16][2];
    size_t nsizes = 0;
    for (int i = 1; i < argc; i++) {
        unsigned m, v;
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (sscanf(argv[i], "%ux%u", &m, &v) == 2 && m > 0 && v > 0 && nsizes < 16) {
            sizes[nsizes][0] = m;
            sizes[nsizes++][1] = v;
        } else {
            fprintf(stderr, "usage: %s [--rounds N] [MEMBERSxVNODES ...]\n", argv[0]);
            return 2;
        }
    }
    if (nsizes == 0) {
        sizes[0][0] = 100000, sizes[0][1] = 16;
        sizes[1][0] = 10000, sizes[1][1] = 160;
        nsizes = 2;
    }
    bench_print_machine("chring-bench-resident");
    printf("\n| ring | blocks | MB after the build |");
    for (int b = 0; b < BURSTS; b++)
        printf(" MB after burst %d | its publishes: first wall / CPU, worst wall / CPU (ms) |", b);
    printf("\n|---|---|---|");
    for (int b = 0; b < BURSTS; b++)
        printf("---|---|");
    printf("\n");
    fflush(stdout);
    for (int round = 0; round < rounds; round++)
        for (size_t s = 0; s < nsizes; s++)
            for (int mode = 0; mode < 2; mode++) {
                bool mapped = (mode + round) % 2 == 0;
                pid_t pid = fork();
                if (pid == 0)
                    _exit(run(sizes[s][0], sizes[s][1], mapped));
                int status = 0;
                if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
                    WEXITSTATUS(status) != 0) {
                    fprintf(stderr, "a run failed\n");
                    return 1;
                }
            }
    printf("# load average at the end %.2f\n", bench_loadavg());
    return 0;
}
