/* chring-demo: what demo.c (the load phases) and cache.c (the cache tier) share, each name
 * prefixed demo_ (everything else in the two files is static).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_DEMO_H
#define CHRING_DEMO_H

#include <stdbool.h>
#include <stdint.h>

/* Prints "chring-demo: what: error" (err < 0: a chring error, else an errno) and exits 1. */
void demo_die(const char *what, int err);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t demo_now_ns(void);
void demo_sleep_ms(unsigned ms);

/* xorshift64*: a fast generator, one per stream. */
static inline uint64_t demo_rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* The cache tier's options (cache.c). */
typedef struct cache_opts {
    const char *out_dir; /* where the CSV, the gnuplot script and the PNG go */
    bool plot;           /* run gnuplot */
    unsigned keys;       /* distinct keys of the Zipf stream */
    double zipf;         /* its exponent */
    unsigned capacity;   /* keys each backend's LRU holds */
    unsigned window;     /* requests per window */
    unsigned window_ms;  /* wall-clock pace of a window in the slow-start run */
} cache_opts_t;

/* Runs the cache-tier scenarios, prints their windows and cold misses, writes the files. */
void demo_cache_tier_run(const cache_opts_t *o);

#endif
