/* chring-bench-chunks: chunked snapshots against the flat layout, publishes, memory and lookups
 * (docs/design.md §4.2; docs/bench.md §11i).
 *
 * SPDX-License-Identifier: MIT
 *
 * A ring of the default profile (hash64) with more than 65,535 members and at least
 * CHRING_CHUNK_MIN points (2^22 unless the environment says otherwise, read once a process, at
 * its first publish) holds its points in chunks shared between snapshots, so that a publish
 * copies the chunks the change touches instead of the whole ring.  The environment's
 * CHRING_CHUNK_MIN=0 keeps every ring flat: the baseline.
 *
 * Each configuration runs in a child process of its own (this program again, with
 * CHRING_CHUNK_MIN set as asked), flat (CHRING_CHUNK_MIN=0) and chunked alternated, --rounds
 * rounds (2 by default).  Chunked is the default threshold (the variable unset) for rings of
 * 2^22 points or more, CHRING_CHUNK_MIN=1 below (chunks forced, for comparison only: rings whose
 * members fit the line index's 16-bit slots, 10,000 x 160 among them, stay flat whatever the
 * threshold, which the allocations a publish show).  Rings: 100,000 x 160 (16 M points) and
 * 100,000 x 16 (1.6 M, chunks forced), or --sizes, each built in one chring_update under the
 * counting allocator.
 *
 * In each child:
 *   build       the ring in one chring_update, wall time
 *   bursts      a second after the build, 20 back-to-back publishes (member 0 removed, added
 *               back, removed, ...), each publish's wall time (CLOCK_MONOTONIC) and the writer
 *               thread's CPU time: the first, the median of the 20 and the worst of the 19 after
 *               the first; then a second burst a second later (--quick: one burst).  Also the
 *               library's allocations a publish (a flat publish takes a whole block, a chunked
 *               one a new chunk for each chunk the change touches)
 *   memory      the bytes the library holds (chring_set_allocator, counting) a point a second
 *               after the build, the most it held during the bursts, and a second after them
 *   lookups     pre-hashed keys (chring_snap_lookup_hash in a read section of its own, as
 *               chring-bench-lookup's pre-hashed variant), ~2 M a rep (--quick: 256 K), medians
 *               of 5 interleaved reps (--reps) of the thread's CPU time: independent keys
 *               (throughput), each key made from the previous key and its owner (latency: a
 *               lookup cannot start before the previous one has returned), and the same two in
 *               batches of 16 (chring_snap_lookup_hashes; latency: a batch's keys are made from
 *               the previous batch's owners).  Keys are made just before use (SplitMix64), never
 *               repeated.
 * The ratios chunked / flat are taken between the two children of the same round.
 *
 * Writes chunks.csv (a row per ring, round and layout).  No assertion: the figures are for
 * reading.  Run by hand: about two and a half minutes and 2 GB at 100,000 x 160.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

enum {
    PUBLISHES = 20, /* publishes a burst */
    BURSTS = 2,     /* bursts a child (--quick: 1) */
    BATCH = 16,     /* keys a batch lookup */
    KINDS = 4,      /* lookup kinds, below */
    SIZES_MAX = 8
};

static const char *const kind_names[KINDS] = {"lookup, independent", "lookup, chained",
                                              "batch of 16, independent", "batch of 16, chained"};

/* What one child measured: written as is to its stdout, a pipe to the parent (the same program,
 * so the same layout). */
struct figures {
    double points;
    double build_ms;
    int bursts;
    /* [burst]: wall time and the writer thread's CPU time, ms */
    double first_ms[BURSTS], median_ms[BURSTS], worst_ms[BURSTS];
    double first_cpu[BURSTS], median_cpu[BURSTS], worst_cpu[BURSTS];
    double allocs;    /* the library's allocations a publish, over every burst */
    double built_bpp; /* bytes a point a second after the build */
    double peak_bpp;  /* the most bytes a point during the bursts */
    double after_bpp; /* bytes a point a second after the last burst */
    double ns[KINDS]; /* ns a key: see kind_names */
};

/* ---- lookups ------------------------------------------------------------------------------ */

struct lookups {
    chring_t *r;
    uint64_t state; /* independent keys: SplitMix64's state */
    uint64_t h;     /* chained keys: the last key */
};

/* The key after h, whose owner was `owner` (a member, or a sum of members): it cannot be made
 * before that lookup has returned. */
static inline uint64_t chain_next(uint64_t h, uintptr_t owner)
{
    uint64_t state = h ^ (uint64_t)owner;
    return bench_splitmix64(&state);
}

static uint64_t run_single(void *ctx, size_t iters)
{
    struct lookups *l = ctx;
    uint64_t state = l->state;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        const chring_snap_t *s = chring_snap_enter(l->r);
        acc += (uintptr_t)chring_snap_lookup_hash(s, bench_splitmix64(&state));
        chring_snap_exit(l->r, s);
    }
    uint64_t t1 = bench_cpu_ns();
    l->state = state;
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_single_chained(void *ctx, size_t iters)
{
    struct lookups *l = ctx;
    uint64_t h = l->h;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        const chring_snap_t *s = chring_snap_enter(l->r);
        const chring_member_t *m = chring_snap_lookup_hash(s, h);
        chring_snap_exit(l->r, s);
        acc += (uintptr_t)m;
        h = chain_next(h, (uintptr_t)m);
    }
    uint64_t t1 = bench_cpu_ns();
    l->h = h;
    bench_sink += acc;
    return t1 - t0;
}

/* iters is a multiple of BATCH (main rounds the count; a warm-up may do a few keys more). */
static uint64_t run_batch(void *ctx, size_t iters)
{
    struct lookups *l = ctx;
    uint64_t state = l->state, hashes[BATCH];
    const chring_member_t *owners[BATCH];
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i += BATCH) {
        for (int j = 0; j < BATCH; j++)
            hashes[j] = bench_splitmix64(&state);
        const chring_snap_t *s = chring_snap_enter(l->r);
        chring_snap_lookup_hashes(s, hashes, BATCH, owners);
        chring_snap_exit(l->r, s);
        for (int j = 0; j < BATCH; j++)
            acc += (uintptr_t)owners[j];
    }
    uint64_t t1 = bench_cpu_ns();
    l->state = state;
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_batch_chained(void *ctx, size_t iters)
{
    struct lookups *l = ctx;
    uint64_t h = l->h, hashes[BATCH];
    const chring_member_t *owners[BATCH];
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i += BATCH) {
        uint64_t state = h;
        for (int j = 0; j < BATCH; j++)
            hashes[j] = bench_splitmix64(&state);
        const chring_snap_t *s = chring_snap_enter(l->r);
        chring_snap_lookup_hashes(s, hashes, BATCH, owners);
        chring_snap_exit(l->r, s);
        uintptr_t sum = 0;
        for (int j = 0; j < BATCH; j++)
            sum += (uintptr_t)owners[j];
        acc += sum;
        h = chain_next(h, sum);
    }
    uint64_t t1 = bench_cpu_ns();
    l->h = h;
    bench_sink += acc;
    return t1 - t0;
}

/* ---- one configuration (in a child process) ----------------------------------------------- */

/* The first of n values, the median of them all and the worst of the others. */
static void burst_summary(const double *v, int n, double *first, double *median, double *worst)
{
    double sorted[PUBLISHES];
    *first = v[0];
    *worst = 0;
    for (int k = 0; k < n; k++) {
        sorted[k] = v[k];
        if (k > 0 && v[k] > *worst)
            *worst = v[k];
    }
    *median = bench_median(sorted, (size_t)n);
}

static int child(unsigned members, unsigned vnodes, int bursts, size_t nlookups, int reps)
{
    struct figures f;
    memset(&f, 0, sizeof f);
    f.bursts = bursts;
    bench_require(chring_set_allocator(&bench_counting_allocator) == 0, "allocator");
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = vnodes;
    chring_t *r = NULL;
    bench_require(chring_new(&r, &cfg) == 0, "chring_new");
    char(*names)[16];
    chring_change_t *feed = bench_member_feed(members, &names);
    long long before = bench_counted_live();
    uint64_t t0 = bench_now_ns();
    bench_require(chring_update(r, feed, members) == 0, "build of %u x %u", members, vnodes);
    f.build_ms = (double)(bench_now_ns() - t0) / 1e6;
    chring_stats_t st;
    chring_stats(r, &st);
    f.points = (double)st.points;

    /* Bursts, a second after the build and a second apart. */
    bench_sleep_ms(1000);
    f.built_bpp = (double)(bench_counted_live() - before) / f.points;
    bench_counted_reset();
    for (int b = 0; b < bursts; b++) {
        double ms[PUBLISHES], cpu[PUBLISHES];
        if (b > 0)
            bench_sleep_ms(1000);
        for (int k = 0; k < PUBLISHES; k++) {
            uint64_t t = bench_now_ns(), c = bench_cpu_ns();
            int rc = k % 2 == 0 ? chring_remove(r, names[0]) : chring_add(r, names[0], 1, NULL);
            cpu[k] = (double)(bench_cpu_ns() - c) / 1e6;
            ms[k] = (double)(bench_now_ns() - t) / 1e6;
            bench_require(rc == 0, "publish %d of burst %d: %s", k, b, chring_strerror(rc));
        }
        burst_summary(ms, PUBLISHES, &f.first_ms[b], &f.median_ms[b], &f.worst_ms[b]);
        burst_summary(cpu, PUBLISHES, &f.first_cpu[b], &f.median_cpu[b], &f.worst_cpu[b]);
    }
    f.allocs = (double)bench_counted_allocations() / (double)(bursts * PUBLISHES);
    f.peak_bpp = (double)(bench_counted_peak() - before) / f.points;
    bench_sleep_ms(1000);
    f.after_bpp = (double)(bench_counted_live() - before) / f.points;

    /* Lookups: the batch call must answer as the single one does (a check, not a figure). */
    {
        uint64_t state = 99, hashes[BATCH];
        const chring_member_t *owners[BATCH];
        const chring_snap_t *s = chring_snap_enter(r);
        for (int i = 0; i < 64; i++) {
            for (int j = 0; j < BATCH; j++)
                hashes[j] = bench_splitmix64(&state);
            chring_snap_lookup_hashes(s, hashes, BATCH, owners);
            for (int j = 0; j < BATCH; j++)
                bench_require(owners[j] == chring_snap_lookup_hash(s, hashes[j]) &&
                                  owners[j] != NULL,
                              "chring_snap_lookup_hashes differs from chring_snap_lookup_hash");
        }
        chring_snap_exit(r, s);
    }
    struct lookups ctx[KINDS];
    bench_fn fns[KINDS] = {run_single, run_single_chained, run_batch, run_batch_chained};
    void *ctxs[KINDS];
    size_t iters[KINDS];
    for (int k = 0; k < KINDS; k++) {
        ctx[k] = (struct lookups){r, 0x5eed0000u + (uint64_t)k, 0xc4a1u + (uint64_t)k};
        ctxs[k] = &ctx[k];
        iters[k] = nlookups;
    }
    bench_interleaved(KINDS, fns, ctxs, iters, reps, f.ns);

    chring_free(&r);
    chring_set_allocator(NULL);
    free(feed);
    free(names);
    bench_require(fwrite(&f, sizeof f, 1, stdout) == 1 && fflush(stdout) == 0, "result");
    return 0;
}

/* Runs child() in a child process: this program again, with CHRING_CHUNK_MIN set to chunk_min
 * (unset for NULL).  Returns whether it ran to the end and *f is its figures. */
static bool run_child(const char *self, unsigned members, unsigned vnodes, const char *chunk_min,
                      int bursts, size_t nlookups, int reps, struct figures *f)
{
    int fd[2];
    bench_require(pipe(fd) == 0, "pipe");
    pid_t pid = fork();
    bench_require(pid >= 0, "fork");
    if (pid == 0) {
        char a[5][24];
        snprintf(a[0], sizeof a[0], "%u", members);
        snprintf(a[1], sizeof a[1], "%u", vnodes);
        snprintf(a[2], sizeof a[2], "%d", bursts);
        snprintf(a[3], sizeof a[3], "%zu", nlookups);
        snprintf(a[4], sizeof a[4], "%d", reps);
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        if (chunk_min != NULL)
            setenv("CHRING_CHUNK_MIN", chunk_min, 1);
        else
            unsetenv("CHRING_CHUNK_MIN");
        execl(self, self, "--child", a[0], a[1], a[2], a[3], a[4], (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t got = 0;
    while (got < sizeof *f) {
        ssize_t n = read(fd[0], (char *)f + got, sizeof *f - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return got == sizeof *f && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ---- the parent --------------------------------------------------------------------------- */

struct config {
    unsigned members, vnodes;
    int round;
    bool chunked;
    const char *env; /* CHRING_CHUNK_MIN's value, NULL for unset */
    struct figures f;
};

static const char *env_text(const struct config *c)
{
    return c->env == NULL ? "unset" : c->env;
}

/* "N x V" (or "NxV") sizes separated by commas; returns how many, 0 on a malformed list. */
static int parse_sizes(const char *text, unsigned (*sizes)[2], int cap)
{
    int n = 0;
    const char *p = text;
    while (*p != '\0' && n < cap) {
        char *end;
        unsigned long m = strtoul(p, &end, 10);
        if (end == p || *end != 'x')
            return 0;
        p = end + 1;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || m == 0 || v == 0 || m > 1000000 || v > 100000)
            return 0;
        sizes[n][0] = (unsigned)m;
        sizes[n][1] = (unsigned)v;
        n++;
        p = end;
        if (*p == ',')
            p++;
        else if (*p != '\0')
            return 0;
    }
    return *p == '\0' ? n : 0;
}

static void print_tables(const struct config *c, int n, int bursts)
{
    printf("\n## Publishes: bursts of %d back-to-back (member 0 removed, added back, ...), a "
           "second after the build%s; ms: first, median of the %d, worst after the first\n\n"
           "| ring | layout | CHRING_CHUNK_MIN | round | build (ms) |",
           PUBLISHES, bursts > 1 ? " and a second apart" : "", PUBLISHES);
    for (int b = 0; b < bursts; b++)
        printf(" burst %d, wall | burst %d, CPU |", b + 1, b + 1);
    printf(" allocations a publish |\n|---|---|---|---|---|");
    for (int b = 0; b < bursts; b++)
        printf("---|---|");
    printf("---|\n");
    for (int i = 0; i < n; i++) {
        const struct figures *f = &c[i].f;
        printf("| %u x %u | %s | %s | %d | %.0f |", c[i].members, c[i].vnodes,
               c[i].chunked ? "chunked" : "flat", env_text(&c[i]), c[i].round + 1, f->build_ms);
        for (int b = 0; b < bursts; b++)
            printf(" %.2f, %.2f, %.2f | %.2f, %.2f, %.2f |", f->first_ms[b], f->median_ms[b],
                   f->worst_ms[b], f->first_cpu[b], f->median_cpu[b], f->worst_cpu[b]);
        printf(" %.0f |\n", f->allocs);
    }

    printf("\n## Memory (library bytes a point, counting allocator) and lookups (ns a key, thread "
           "CPU time)\n\n"
           "| ring | layout | round | a second after the build | peak in the bursts | a second "
           "after the bursts |");
    for (int k = 0; k < KINDS; k++)
        printf(" %s |", kind_names[k]);
    printf("\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const struct figures *f = &c[i].f;
        printf("| %u x %u | %s | %d | %.1f | %.1f | %.1f |", c[i].members, c[i].vnodes,
               c[i].chunked ? "chunked" : "flat", c[i].round + 1, f->built_bpp, f->peak_bpp,
               f->after_bpp);
        for (int k = 0; k < KINDS; k++)
            printf(" %.1f |", f->ns[k]);
        printf("\n");
    }

    printf("\n## chunked / flat, the same round\n\n"
           "| ring | round | publish median, wall (burst 1) | publish median, CPU (burst 1) | "
           "bytes a point after the bursts |");
    for (int k = 0; k < KINDS; k++)
        printf(" %s |", kind_names[k]);
    printf("\n|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        if (!c[i].chunked)
            continue;
        const struct config *flat = NULL;
        for (int j = 0; j < n; j++)
            if (!c[j].chunked && c[j].members == c[i].members && c[j].vnodes == c[i].vnodes &&
                c[j].round == c[i].round)
                flat = &c[j];
        if (flat == NULL)
            continue;
        const struct figures *a = &c[i].f, *b = &flat->f;
        printf("| %u x %u | %d | %.3f | %.3f | %.2f |", c[i].members, c[i].vnodes, c[i].round + 1,
               a->median_ms[0] / b->median_ms[0], a->median_cpu[0] / b->median_cpu[0],
               a->after_bpp / b->after_bpp);
        for (int k = 0; k < KINDS; k++)
            printf(" %.2f |", a->ns[k] / b->ns[k]);
        printf("\n");
    }
}

static void write_csv(FILE *csv, const struct config *c, int n)
{
    for (int i = 0; i < n; i++) {
        const struct figures *f = &c[i].f;
        fprintf(csv, "%u,%u,%.0f,%d,%s,%s,%.1f", c[i].members, c[i].vnodes, f->points,
                c[i].round + 1, c[i].chunked ? "chunked" : "flat", env_text(&c[i]), f->build_ms);
        for (int b = 0; b < BURSTS; b++) {
            if (b < f->bursts)
                fprintf(csv, ",%.3f,%.3f,%.3f,%.3f,%.3f,%.3f", f->first_ms[b], f->median_ms[b],
                        f->worst_ms[b], f->first_cpu[b], f->median_cpu[b], f->worst_cpu[b]);
            else
                fprintf(csv, ",,,,,,");
        }
        fprintf(csv, ",%.1f,%.2f,%.2f,%.2f", f->allocs, f->built_bpp, f->peak_bpp, f->after_bpp);
        for (int k = 0; k < KINDS; k++)
            fprintf(csv, ",%.2f", f->ns[k]);
        fprintf(csv, "\n");
    }
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--child") == 0)
        return child((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), atoi(argv[4]),
                     (size_t)atoll(argv[5]), atoi(argv[6]));

    unsigned sizes[SIZES_MAX][2] = {{100000, 160}, {100000, 16}};
    int nsizes = 2, rounds = 0;
    bool reps_set = false;
    {
        /* This program's own options, taken out before the common ones are parsed. */
        int out = 1;
        for (int i = 1; i < argc; i++) {
            if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
                rounds = atoi(argv[++i]);
                bench_require(rounds >= 1, "--rounds takes a count of 1 or more");
            } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
                nsizes = parse_sizes(argv[++i], sizes, SIZES_MAX);
                bench_require(nsizes > 0, "--sizes takes MEMBERSxVNODES[,...] (at most %d)",
                              SIZES_MAX);
            } else {
                reps_set |= !strcmp(argv[i], "--reps");
                argv[out++] = argv[i];
            }
        }
        argc = out;
    }
    bench_opts_t o;
    bench_parse(argc, argv, &o,
                "chring-bench-chunks: chunked snapshots against the flat layout (publish bursts, "
                "memory, lookups), each configuration in a child process",
                "  --rounds N    rounds of flat and chunked, alternated (default 2; --quick 1)\n"
                "  --sizes L     rings, MEMBERSxVNODES[,...] (default 100000x160,100000x16)\n"
                "  (--reps N: lookup reps, default 5; --quick: one burst, 256 K lookups a rep)\n");
    if (rounds == 0)
        rounds = o.quick ? 1 : 2;
    int reps = reps_set ? o.reps : 5, bursts = o.quick ? 1 : BURSTS;
    size_t nlookups = o.quick ? (size_t)1 << 18 : (size_t)1 << 21;
    bench_print_machine("chring-bench-chunks");
    printf("# each configuration in a child process of its own, flat (CHRING_CHUNK_MIN=0) and "
           "chunked alternated, %d round%s; lookups: %zu pre-hashed keys a rep, median of %d "
           "interleaved reps\n",
           rounds, rounds > 1 ? "s" : "", nlookups, reps);
    fflush(stdout);

    int n = nsizes * rounds * 2;
    struct config *c = calloc((size_t)n, sizeof *c);
    bench_require(c != NULL, "memory");
    int i = 0;
    for (int z = 0; z < nsizes; z++)
        for (int round = 0; round < rounds; round++)
            for (int l = 0; l < 2; l++, i++) {
                /* Flat first in rounds 1, 3, ..., chunked first in rounds 2, 4, ... */
                bool chunked = (l == 0) == (round % 2 == 1);
                double points = (double)sizes[z][0] * sizes[z][1];
                c[i].members = sizes[z][0];
                c[i].vnodes = sizes[z][1];
                c[i].round = round;
                c[i].chunked = chunked;
                c[i].env = !chunked ? "0" : points >= (double)((size_t)1 << 22) ? NULL : "1";
                fprintf(stderr, "chunks: %u x %u, round %d, %s (CHRING_CHUNK_MIN %s)...\n",
                        c[i].members, c[i].vnodes, round + 1, chunked ? "chunked" : "flat",
                        env_text(&c[i]));
                bench_require(run_child("/proc/self/exe", c[i].members, c[i].vnodes, c[i].env,
                                        bursts, nlookups, reps, &c[i].f),
                              "child for %u x %u", c[i].members, c[i].vnodes);
            }

    print_tables(c, n, bursts);
    FILE *csv = bench_csv_open(
        &o, "chunks.csv",
        "members,vnodes,points,round,layout,chunk_min,build_ms,"
        "b1_first_ms,b1_median_ms,b1_worst_ms,b1_first_cpu_ms,b1_median_cpu_ms,b1_worst_cpu_ms,"
        "b2_first_ms,b2_median_ms,b2_worst_ms,b2_first_cpu_ms,b2_median_cpu_ms,b2_worst_cpu_ms,"
        "allocations_per_publish,bytes_per_point_built,bytes_per_point_peak,"
        "bytes_per_point_after,ns_lookup,ns_lookup_chained,ns_batch16,ns_batch16_chained");
    write_csv(csv, c, n);
    fclose(csv);
    printf("\n# CSV: %s/chunks.csv; load average now %.2f\n", o.out_dir, bench_loadavg());
    free(c);
    return 0;
}
