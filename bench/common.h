/* chring benchmark harness: shared helpers (timing, machine description, options, keys, CSV).
 *
 * SPDX-License-Identifier: MIT
 *
 * The programs in bench/ are plain main() executables that use only the public header, as any
 * user would.  Every measurement is repeated and reported as a median; baselines are measured in
 * the same run, interleaved with the chring variants rep by rep, so that noise from other work on
 * the machine hits both sides of a ratio alike.
 */
#ifndef CHRING_BENCH_COMMON_H
#define CHRING_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "chring.h"

#ifndef BENCH_BUILD_INFO
#define BENCH_BUILD_INFO "unknown (built outside meson)"
#endif

/* Options every program understands. */
typedef struct bench_opts {
    bool quick;          /* --quick: fewer reps, shorter runs */
    int reps;            /* --reps N: repetitions per measurement (median reported) */
    double target_ms;    /* --ms X: wall time aimed at per single measurement */
    const char *out_dir; /* --out DIR: where CSV files go (default ".") */
    int max_threads;     /* --threads N: largest thread count (throughput programs) */
} bench_opts_t;

/* Parses the common options; unknown options print usage (with `extra_usage`) and exit 2. */
void bench_parse(int argc, char **argv, bench_opts_t *o, const char *what, const char *extra_usage);

/* Prints the machine (cores, CPU model, load average), the compiler, the flags and the library
 * version to stdout, each line prefixed with "# ". */
void bench_print_machine(const char *program);
/* The 1-minute load average (from /proc/loadavg), NaN if unknown. */
double bench_loadavg(void);

/* Monotonic nanoseconds. */
static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread in nanoseconds (CLOCK_THREAD_CPUTIME_ID).  Single-thread
 * measurements use it instead of wall time: on a machine shared with other work, time the thread
 * spent waiting for a core is not the code's cost (cache interference from that work still shows). */
static inline uint64_t bench_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A membership of `members` names (bench_member_name 0 .. members - 1, weight 1, no udata) and
 * *names holding them and one name more, (*names)[members], for publishes that add a member.
 * Exits on allocation failure; free both with free(). */
chring_change_t *bench_member_feed(unsigned members, char (**names)[16]);

/* Sleeps ms milliseconds (nanosleep; a signal may end it early). */
void bench_sleep_ms(long ms);

/* The calling thread's CPU time, in ms (CLOCK_THREAD_CPUTIME_ID). */
double bench_thread_cpu_ms(void);

/* The median of n values (the array is sorted in place).  NaN for n == 0. */
double bench_median(double *values, size_t n);

/* SplitMix64: a fast deterministic generator for keys. */
static inline uint64_t bench_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* count keys of len bytes each, pseudo-random, stored back to back (key i at buf + i * len). */
unsigned char *bench_keys(size_t count, size_t len, uint64_t seed);

/* Member name i of the benchmark rings: "10.<a>.<b>.<c>", an address as libmemcached and nginx
 * take it (so the ketama and nginx profiles see realistic names).  buf needs 16 bytes. */
void bench_member_name(char *buf, size_t cap, unsigned i);

/* Builds a ring of `members` members of weight 1 with the given profile (vnodes 160), in one
 * chring_update.  Exits with a message on failure. */
chring_t *bench_ring(chring_profile_t profile, unsigned members);

/* Opens DIR/name for writing (exits on failure) and writes a header line. */
FILE *bench_csv_open(const bench_opts_t *o, const char *name, const char *header);

/* Iterations so that one measurement takes about target_ms: fn(ctx, iters) returns the elapsed
 * nanoseconds of iters operations.  At least min_iters. */
typedef uint64_t (*bench_fn)(void *ctx, size_t iters);
size_t bench_calibrate(bench_fn fn, void *ctx, double target_ms, size_t min_iters);

/* Runs one interleaved set: for each rep, each of the n variants once (fns[v](ctxs[v],
 * iters[v])), each after an untimed warm-up of a quarter of its iterations.  Writes the median ns per operation of variant v into ns_per_op[v]. */
void bench_interleaved(size_t n, const bench_fn *fns, void *const *ctxs, const size_t *iters,
                       int reps, double *ns_per_op);

/* Aborts with a message if cond is false (checks that results agree). */
void bench_require(bool cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A counting allocator for chring_set_allocator: counts the bytes the library asks for (not
 * malloc's own overhead), live and peak.  Install it while no ring exists. */
extern const chring_allocator_t bench_counting_allocator;
/* Bytes the library holds now. */
long long bench_counted_live(void);
/* The most bytes held at once since the last bench_counted_reset(). */
long long bench_counted_peak(void);
/* Allocations since the last bench_counted_reset(). */
long long bench_counted_allocations(void);
/* Sets the peak to the live count and the allocation count to 0. */
void bench_counted_reset(void);
/* Waits (at most 2 s) until deferred frees (call_rcu) have stopped changing the live count, and
 * returns it. */
long long bench_counted_settled(void);

/* A sink the compiler must assume is read: results of timed loops are folded into it. */
extern volatile uint64_t bench_sink;

#endif
