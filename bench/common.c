/* chring benchmark harness: shared helpers.
 *
 * SPDX-License-Identifier: MIT
 */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

volatile uint64_t bench_sink;

static void usage(FILE *f, const char *what, const char *extra)
{
    fprintf(f,
            "%s\n"
            "options:\n"
            "  --quick       short run (3 reps, ~10 ms per measurement)\n"
            "  --reps N      repetitions per measurement, median reported (default 9)\n"
            "  --ms X        wall time aimed at per measurement, in ms (default 30)\n"
            "  --out DIR     directory for the CSV files (default .)\n"
            "  --threads N   largest thread count for throughput runs (default 2 * cores)\n"
            "%s",
            what, extra ? extra : "");
}

void bench_parse(int argc, char **argv, bench_opts_t *o, const char *what, const char *extra_usage)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    bool reps_set = false, ms_set = false;

    memset(o, 0, sizeof *o);
    o->reps = 9;
    o->target_ms = 30;
    o->out_dir = ".";
    o->max_threads = (int)(cores > 0 ? 2 * cores : 4);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            o->quick = true;
        } else if (!strcmp(a, "--reps") && v) {
            o->reps = atoi(v);
            reps_set = true;
            i++;
        } else if (!strcmp(a, "--ms") && v) {
            o->target_ms = atof(v);
            ms_set = true;
            i++;
        } else if (!strcmp(a, "--out") && v) {
            o->out_dir = v;
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            o->max_threads = atoi(v);
            i++;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, what, extra_usage);
            exit(0);
        } else {
            fprintf(stderr, "unknown or incomplete option: %s\n", a);
            usage(stderr, what, extra_usage);
            exit(2);
        }
    }
    if (o->quick) {
        if (!reps_set)
            o->reps = 3;
        if (!ms_set)
            o->target_ms = 10;
    }
    if (o->reps < 1)
        o->reps = 1;
    if (o->target_ms <= 0)
        o->target_ms = 1;
    if (o->max_threads < 1)
        o->max_threads = 1;
    if (mkdir(o->out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "cannot create %s: %s\n", o->out_dir, strerror(errno));
        exit(1);
    }
}

double bench_loadavg(void)
{
    double load = NAN;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1)
            load = NAN;
        fclose(f);
    }
    return load;
}

void bench_print_machine(const char *program)
{
    char model[256] = "unknown";
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "model name", 10)) {
                const char *colon = strchr(line, ':');
                if (colon) {
                    colon++;
                    while (*colon == ' ' || *colon == '\t')
                        colon++;
                    snprintf(model, sizeof model, "%s", colon);
                    model[strcspn(model, "\n")] = '\0';
                }
                break;
            }
        }
        fclose(f);
    }
    printf("# %s (chring %s)\n", program, chring_version());
    printf("# machine: %ld online cores (sysconf), CPU \"%s\", load average %.2f\n",
           sysconf(_SC_NPROCESSORS_ONLN), model, bench_loadavg());
    printf("# compiler: gcc-compatible \"%s\"\n", __VERSION__);
    printf("# build: %s\n", BENCH_BUILD_INFO);
#ifdef __OPTIMIZE__
    printf("# harness compiled with optimisation (__OPTIMIZE__ defined)\n");
#else
    printf("# WARNING: harness compiled without optimisation: use a release build\n");
#endif
    fflush(stdout);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

chring_change_t *bench_member_feed(unsigned members, char (**names)[16])
{
    char(*n)[16] = malloc(((size_t)members + 1) * sizeof *n);
    chring_change_t *feed = malloc(((size_t)members + 1) * sizeof *feed);
    bench_require(n != NULL && feed != NULL, "memory for %u names", members);
    for (unsigned i = 0; i <= members; i++)
        bench_member_name(n[i], sizeof n[i], i);
    for (unsigned i = 0; i < members; i++)
        feed[i] = (chring_change_t){n[i], 1, NULL};
    *names = n;
    return feed;
}

void bench_sleep_ms(long ms)
{
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
}

double bench_thread_cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

double bench_median(double *values, size_t n)
{
    if (n == 0)
        return NAN;
    qsort(values, n, sizeof *values, cmp_double);
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

unsigned char *bench_keys(size_t count, size_t len, uint64_t seed)
{
    size_t bytes = count * len;
    unsigned char *buf = malloc(bytes ? bytes : 1);
    uint64_t state = seed;
    bench_require(buf != NULL, "out of memory for %zu keys", count);
    for (size_t i = 0; i < bytes; i += 8) {
        uint64_t r = bench_splitmix64(&state);
        size_t n = bytes - i < 8 ? bytes - i : 8;
        memcpy(buf + i, &r, n);
    }
    return buf;
}

void bench_member_name(char *buf, size_t cap, unsigned i)
{
    snprintf(buf, cap, "10.%u.%u.%u", (i >> 16) & 255, (i >> 8) & 255, (i & 255) + 1);
}

chring_t *bench_ring(chring_profile_t profile, unsigned members)
{
    chring_config_t cfg;
    chring_t *r = NULL;
    chring_change_t *changes = calloc(members ? members : 1, sizeof *changes);
    char(*names)[16] = calloc(members ? members : 1, sizeof *names);
    int err;

    bench_require(changes && names, "out of memory");
    chring_config_default(&cfg);
    cfg.profile = profile;
    err = chring_new(&r, &cfg);
    bench_require(err == 0, "chring_new(%s): %s", chring_profile_name(profile),
                  chring_strerror(err));
    for (unsigned i = 0; i < members; i++) {
        bench_member_name(names[i], sizeof names[i], i);
        changes[i].name = names[i];
        changes[i].weight = 1;
    }
    err = chring_update(r, changes, members);
    bench_require(err == 0, "chring_update(%s, %u members): %s", chring_profile_name(profile),
                  members, chring_strerror(err));
    bench_require(chring_len(r) == members, "ring has %zu members, expected %u", chring_len(r),
                  members);
    free(changes);
    free(names);
    return r;
}

FILE *bench_csv_open(const bench_opts_t *o, const char *name, const char *header)
{
    char path[4096];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", o->out_dir, name);
    f = fopen(path, "w");
    bench_require(f != NULL, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "%s\n", header);
    return f;
}

size_t bench_calibrate(bench_fn fn, void *ctx, double target_ms, size_t min_iters)
{
    size_t iters = min_iters;
    /* Grow until one run takes at least a tenth of the target, then scale. */
    for (;;) {
        uint64_t ns = fn(ctx, iters);
        if (ns >= target_ms * 1e5 || iters >= ((size_t)1 << 30)) {
            double scaled = (double)iters * (target_ms * 1e6) / (double)(ns ? ns : 1);
            size_t n = scaled < (double)min_iters ? min_iters : (size_t)scaled;
            return n;
        }
        iters *= 4;
    }
}

void bench_interleaved(size_t n, const bench_fn *fns, void *const *ctxs, const size_t *iters,
                       int reps, double *ns_per_op)
{
    double *samples = calloc((size_t)reps * n, sizeof *samples);
    bench_require(samples != NULL, "out of memory");
    for (int rep = 0; rep < reps; rep++)
        for (size_t v = 0; v < n; v++) {
            /* Warm-up, untimed: the previous variant may have used another ring (a 1000 x 160 ring
             * is megabytes) and evicted this one's from the caches; a proxy's ring stays warm. */
            fns[v](ctxs[v], iters[v] / 4 + 1);
            samples[v * (size_t)reps + (size_t)rep] =
                (double)fns[v](ctxs[v], iters[v]) / (double)iters[v];
        }
    for (size_t v = 0; v < n; v++)
        ns_per_op[v] = bench_median(samples + v * (size_t)reps, (size_t)reps);
    free(samples);
}

void bench_require(bool cond, const char *fmt, ...)
{
    va_list ap;
    if (cond)
        return;
    fflush(stdout);
    fprintf(stderr, "bench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

/* ---- the counting allocator ------------------------------------------------------------------ */

#define COUNT_HEADER 16 /* keeps malloc's alignment for the caller */

static atomic_llong counted_live, counted_peak, counted_allocs;

static void *count_alloc(size_t size, void *ctx)
{
    (void)ctx;
    unsigned char *p = malloc(size + COUNT_HEADER);
    long long now, peak;
    if (!p)
        return NULL;
    memcpy(p, &size, sizeof size);
    now = atomic_fetch_add(&counted_live, (long long)size) + (long long)size;
    atomic_fetch_add(&counted_allocs, 1);
    peak = atomic_load(&counted_peak);
    while (now > peak && !atomic_compare_exchange_weak(&counted_peak, &peak, now))
        ;
    return p + COUNT_HEADER;
}

static void count_free(void *ptr, void *ctx)
{
    (void)ctx;
    size_t size;
    unsigned char *p;
    if (!ptr)
        return;
    p = (unsigned char *)ptr - COUNT_HEADER;
    memcpy(&size, p, sizeof size);
    atomic_fetch_sub(&counted_live, (long long)size);
    free(p);
}

const chring_allocator_t bench_counting_allocator = {count_alloc, count_free, NULL};

long long bench_counted_live(void)
{
    return atomic_load(&counted_live);
}

long long bench_counted_peak(void)
{
    return atomic_load(&counted_peak);
}

long long bench_counted_allocations(void)
{
    return atomic_load(&counted_allocs);
}

void bench_counted_reset(void)
{
    atomic_store(&counted_peak, atomic_load(&counted_live));
    atomic_store(&counted_allocs, 0);
}

long long bench_counted_settled(void)
{
    long long last = atomic_load(&counted_live);
    int stable = 0;
    for (int i = 0; i < 200 && stable < 5; i++) {
        struct timespec d = {0, 10 * 1000000L};
        nanosleep(&d, NULL);
        long long now = atomic_load(&counted_live);
        stable = now == last ? stable + 1 : 0;
        last = now;
    }
    return last;
}
