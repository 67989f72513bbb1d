/* chring-bench-lookup: ns per lookup against ring size, key length and profile, with the
 * baselines a user would otherwise pick, measured in the same run (docs/bench.md §1, 2 and the
 * plot); and a latency table, each key chosen from the previous answer (docs/bench.md §7).
 *
 * SPDX-License-Identifier: MIT
 *
 * A lookup is what a proxy does per request: chring_snap_enter, chring_snap_lookup of the key,
 * chring_snap_exit.  Times are the measuring thread's CPU time (bench_cpu_ns), so that time spent
 * waiting for a core taken by other work on a shared machine is not counted.  Keys are pseudo-random bytes precomputed in an array; lookups are
 * independent (throughput); results are folded into a sink.  For each ring size every variant is
 * calibrated to about --ms milliseconds and then run once per rep, interleaved, and the median of
 * the reps is reported.
 *
 * Writes lookup.csv (long format: one row per measurement), lookup_plot.csv (16-byte keys, one
 * column per profile or baseline, for bench/plot.gp) and lookup_latency.csv.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "common.h"

#ifdef HAVE_LIBMEMCACHED
#include <libmemcached/memcached.h>
#endif

#define NSIZES 3
#define NKEYLENS 4
#define NPROFILES 7
/* Keys per length: at most 2 MiB and 2^17 keys.  A proxy hashes a key it has just parsed (in
 * cache); with 16 MiB key arrays, 64- and 256-byte keys made the run bandwidth-bound on this shared
 * VM (xxh3, 64-byte keys: 31 ns per lookup from a 16 MiB array, 12 ns from 2 MiB).  2^17 distinct
 * 16-byte keys still reach most points of a 1000 x 160 ring, so its cache misses are measured. */
#define KEYSET_BYTES ((size_t)2 << 20)
#define KEYSET_MAX ((size_t)1 << 17)
#define VERIFY_KEYS 20000

static const unsigned sizes[NSIZES] = {10, 100, 1000};
static const size_t keylens[NKEYLENS] = {8, 16, 64, 256};
static const chring_profile_t profiles[NPROFILES] = {
    CHRING_PROFILE_HASH64, CHRING_PROFILE_XXH3,   CHRING_PROFILE_MURMUR32, CHRING_PROFILE_FNV32,
    CHRING_PROFILE_FNV16,  CHRING_PROFILE_KETAMA, CHRING_PROFILE_NGINX,
};
#define KEY16 1 /* index of 16-byte keys in keylens */

typedef struct keyset {
    unsigned char *keys;
    size_t len;
    size_t count;
} keyset_t;

/* One timed variant. */
typedef struct variant {
    const char *kind;    /* "chring", "chring_prehashed", "hash_only", "rwlock", ... */
    const char *profile; /* profile name or "hash64" for the baselines */
    size_t keylen;       /* 0 for pre-hashed variants */
    bench_fn fn;
    /* context */
    chring_t *ring;
    const keyset_t *ks;
    const uint64_t *hashes; /* pre-hashed keys (16-byte key set) */
    size_t nhashes;
    base_ring_t *base;
    pthread_rwlock_t *rw;
    pthread_mutex_t *mu;
    void *mc;
    /* result */
    size_t iters;
    double ns;
    uint64_t check; /* latency variants: sum of the owners of the last run (the chain check) */
} variant_t;

/* ---- chring variants ------------------------------------------------------------------------ */

static uint64_t run_chring(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const unsigned char *keys = v->ks->keys;
    size_t len = v->ks->len, count = v->ks->count, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        const chring_snap_t *s = chring_snap_enter(v->ring);
        acc += (uintptr_t)chring_snap_lookup(s, keys + k * len, len);
        chring_snap_exit(v->ring, s);
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_chring_prehashed(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const uint64_t *hashes = v->hashes;
    size_t count = v->nhashes, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        const chring_snap_t *s = chring_snap_enter(v->ring);
        acc += (uintptr_t)chring_snap_lookup_hash(s, hashes[k]);
        chring_snap_exit(v->ring, s);
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

/* The profile's hash alone (chring_snap_hash, one read section around the whole loop). */
static uint64_t run_hash_only(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const unsigned char *keys = v->ks->keys;
    size_t len = v->ks->len, count = v->ks->count, k = 0;
    uint64_t acc = 0;
    const chring_snap_t *s = chring_snap_enter(v->ring);
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        acc += chring_snap_hash(s, keys + k * len, len);
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    chring_snap_exit(v->ring, s);
    bench_sink += acc;
    return t1 - t0;
}

/* An empty read section: chring_snap_enter + chring_snap_exit. */
static uint64_t run_enter_exit(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        const chring_snap_t *s = chring_snap_enter(v->ring);
        acc += (uintptr_t)s;
        chring_snap_exit(v->ring, s);
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

/* ---- baselines ------------------------------------------------------------------------------ */

static uint64_t run_rwlock(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const unsigned char *keys = v->ks->keys;
    size_t len = v->ks->len, count = v->ks->count, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        uint64_t h = base_hash64(keys + k * len, len);
        pthread_rwlock_rdlock(v->rw);
        acc += (uintptr_t)base_owner_branchy(v->base, h);
        pthread_rwlock_unlock(v->rw);
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_mutex(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const unsigned char *keys = v->ks->keys;
    size_t len = v->ks->len, count = v->ks->count, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        uint64_t h = base_hash64(keys + k * len, len);
        pthread_mutex_lock(v->mu);
        acc += (uintptr_t)base_owner_branchy(v->base, h);
        pthread_mutex_unlock(v->mu);
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_branchless(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const unsigned char *keys = v->ks->keys;
    size_t len = v->ks->len, count = v->ks->count, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        acc += (uintptr_t)base_owner_branchless(v->base, base_hash64(keys + k * len, len));
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_rwlock_prehashed(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    size_t count = v->nhashes, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        pthread_rwlock_rdlock(v->rw);
        acc += (uintptr_t)base_owner_branchy(v->base, v->hashes[k]);
        pthread_rwlock_unlock(v->rw);
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_branchy_prehashed(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    size_t count = v->nhashes, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        acc += (uintptr_t)base_owner_branchy(v->base, v->hashes[k]);
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_branchless_prehashed(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    size_t count = v->nhashes, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        acc += (uintptr_t)base_owner_branchless(v->base, v->hashes[k]);
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

#ifdef HAVE_LIBMEMCACHED
static uint64_t run_libmemcached(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const memcached_st *mc = v->mc;
    const unsigned char *keys = v->ks->keys;
    size_t len = v->ks->len, count = v->ks->count, k = 0;
    uint64_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        acc += memcached_generate_hash(mc, (const char *)keys + k * len, len);
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

/* libmemcached in weighted ketama mode over the same servers as the chring ring (names
 * "10.a.b.c", port 11211, which libmemcached leaves out of the point labels); no server runs:
 * memcached_generate_hash only reads the continuum.  NULL if libmemcached refuses. */
static memcached_st *mc_ring(unsigned members)
{
    memcached_st *mc = memcached_create(NULL);
    char name[16];
    if (!mc)
        return NULL;
    if (memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1) != MEMCACHED_SUCCESS)
        goto fail;
    for (unsigned i = 0; i < members; i++) {
        bench_member_name(name, sizeof name, i);
        if (memcached_server_add_with_weight(mc, name, 11211, 1) != MEMCACHED_SUCCESS)
            goto fail;
    }
    if (memcached_server_count(mc) != members)
        goto fail;
    return mc;
fail:
    memcached_free(mc);
    return NULL;
}

/* How many of the first n keys libmemcached places on a server of another name than chring's
 * ketama profile does. */
static size_t mc_disagreements(memcached_st *mc, chring_t *ketama, const keyset_t *ks, size_t n)
{
    size_t differ = 0;
    const chring_snap_t *s = chring_snap_enter(ketama);
    for (size_t i = 0; i < n && i < ks->count; i++) {
        const char *key = (const char *)ks->keys + i * ks->len;
        uint32_t idx = memcached_generate_hash(mc, key, ks->len);
        const memcached_instance_st *inst = memcached_server_instance_by_position(mc, idx);
        const chring_member_t *m = chring_snap_lookup(s, key, ks->len);
        if (!inst || !m || strcmp(memcached_server_name(inst), chring_member_name(m)) != 0)
            differ++;
    }
    chring_snap_exit(ketama, s);
    return differ;
}
#endif

/* ---- latency: each key chosen from the previous answer ------------------------------------- */

/* In the latency variants the index of the next key depends on the owner the previous lookup
 * returned, so the CPU cannot start a lookup before the previous one has finished (the
 * throughput variants above let it overlap independent lookups).  The i-th key is
 * (i + 64 bits of the owner's address, folded to 0..63) mod the key count: the owner's address
 * feeds the next load's address, while the counter i keeps the chain from cycling over a few
 * hundred keys (a function of the owner alone would enter a short cycle and run from cache).
 * Every latency variant visits the same keys in the same order (the baselines' owners are
 * chring's member pointers, copied out of the snapshot), which the program checks before timing:
 * the sums of the owners returned must be equal. */
static inline size_t next_key(size_t i, const void *owner, size_t mask)
{
    return (i + (((uintptr_t)owner >> 4) & 63)) & mask;
}

static uint64_t run_chring_lat(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const unsigned char *keys = v->ks->keys;
    size_t len = v->ks->len, mask = v->ks->count - 1, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        const chring_snap_t *s = chring_snap_enter(v->ring);
        const chring_member_t *m = chring_snap_lookup(s, keys + k * len, len);
        chring_snap_exit(v->ring, s);
        acc += (uintptr_t)m;
        k = next_key(i + 1, m, mask);
    }
    uint64_t t1 = bench_cpu_ns();
    v->check = acc;
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_chring_prehashed_lat(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const uint64_t *hashes = v->hashes;
    size_t mask = v->nhashes - 1, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        const chring_snap_t *s = chring_snap_enter(v->ring);
        const chring_member_t *m = chring_snap_lookup_hash(s, hashes[k]);
        chring_snap_exit(v->ring, s);
        acc += (uintptr_t)m;
        k = next_key(i + 1, m, mask);
    }
    uint64_t t1 = bench_cpu_ns();
    v->check = acc;
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_rwlock_lat(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const unsigned char *keys = v->ks->keys;
    size_t len = v->ks->len, mask = v->ks->count - 1, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        uint64_t h = base_hash64(keys + k * len, len);
        pthread_rwlock_rdlock(v->rw);
        const chring_member_t *m = base_owner_branchy(v->base, h);
        pthread_rwlock_unlock(v->rw);
        acc += (uintptr_t)m;
        k = next_key(i + 1, m, mask);
    }
    uint64_t t1 = bench_cpu_ns();
    v->check = acc;
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_branchless_lat(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const unsigned char *keys = v->ks->keys;
    size_t len = v->ks->len, mask = v->ks->count - 1, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        const chring_member_t *m = base_owner_branchless(v->base, base_hash64(keys + k * len, len));
        acc += (uintptr_t)m;
        k = next_key(i + 1, m, mask);
    }
    uint64_t t1 = bench_cpu_ns();
    v->check = acc;
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_branchy_prehashed_lat(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    size_t mask = v->nhashes - 1, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        const chring_member_t *m = base_owner_branchy(v->base, v->hashes[k]);
        acc += (uintptr_t)m;
        k = next_key(i + 1, m, mask);
    }
    uint64_t t1 = bench_cpu_ns();
    v->check = acc;
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_branchless_prehashed_lat(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    size_t mask = v->nhashes - 1, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        const chring_member_t *m = base_owner_branchless(v->base, v->hashes[k]);
        acc += (uintptr_t)m;
        k = next_key(i + 1, m, mask);
    }
    uint64_t t1 = bench_cpu_ns();
    v->check = acc;
    bench_sink += acc;
    return t1 - t0;
}

#define NLAT_SIZES 4
#define NLAT_KINDS 6
#define LAT_CHECK_STEPS 20000
static const unsigned lat_sizes[NLAT_SIZES] = {10, 100, 1000, 10000};
enum {
    L_CHRING,
    L_CHRING_PRE,
    L_RWLOCK,
    L_BRANCHLESS,
    L_BRANCHY_PRE,
    L_BRANCHLESS_PRE
};
static const char *lat_names[NLAT_KINDS] = {
    "chring",     "chring_prehashed",  "rwlock",
    "branchless", "branchy_prehashed", "branchless_prehashed"};
static const char *lat_desc[NLAT_KINDS] = {
    "chring hash64 lookup (enter + lookup + exit)",
    "chring pre-hashed (chring_snap_lookup_hash)",
    "hash64 + branchy search behind pthread_rwlock",
    "hash64 + branchless search, no synchronisation",
    "pre-hashed, branchy search, no synchronisation",
    "pre-hashed, branchless search, no synchronisation",
};
static const bench_fn lat_thr_fns[NLAT_KINDS] = {
    run_chring,     run_chring_prehashed,  run_rwlock,
    run_branchless, run_branchy_prehashed, run_branchless_prehashed};
static const bench_fn lat_lat_fns[NLAT_KINDS] = {
    run_chring_lat,     run_chring_prehashed_lat,  run_rwlock_lat,
    run_branchless_lat, run_branchy_prehashed_lat, run_branchless_prehashed_lat};

/* The latency table: hash64 rings of 10 .. 10,000 members x 160 points, 16-byte keys; for each
 * size chring and the baselines in both modes, one interleaved set. */
static void latency_section(const bench_opts_t *o, const keyset_t *ks16)
{
    /* [size][kind][0: throughput, 1: latency] */
    double res[NLAT_SIZES][NLAT_KINDS][2];
    size_t n = ks16->count;
    uint64_t *hashes = malloc(n * sizeof *hashes);
    FILE *csv;

    bench_require(hashes != NULL, "out of memory");
    bench_require(n > 0 && (n & (n - 1)) == 0, "latency mode needs a power-of-two key count");
    for (size_t i = 0; i < n; i++)
        hashes[i] = base_hash64(ks16->keys + i * ks16->len, ks16->len);
    csv = bench_csv_open(o, "lookup_latency.csv",
                         "variant,mode,members,points,key_len,ns_per_lookup");

    for (int z = 0; z < NLAT_SIZES; z++) {
        unsigned members = lat_sizes[z];
        chring_t *ring = bench_ring(CHRING_PROFILE_HASH64, members);
        base_ring_t base;
        pthread_rwlock_t rw;
        variant_t vars[2 * NLAT_KINDS];
        bench_fn fns[2 * NLAT_KINDS];
        void *ctxs[2 * NLAT_KINDS];
        size_t iters[2 * NLAT_KINDS];
        double ns[2 * NLAT_KINDS];
        size_t points;

        {
            const chring_snap_t *s = chring_snap_enter(ring);
            points = chring_snap_points(s);
            base_ring_copy(&base, s);
            for (size_t i = 0; i < VERIFY_KEYS && i < n; i++)
                bench_require(chring_snap_hash(s, ks16->keys + i * 16, 16) == hashes[i],
                              "inline hash64 differs from the ring's hash at key %zu", i);
            chring_snap_exit(ring, s);
        }
        pthread_rwlock_init(&rw, NULL);
        memset(vars, 0, sizeof vars);
        for (int kd = 0; kd < NLAT_KINDS; kd++)
            for (int mode = 0; mode < 2; mode++) {
                variant_t *v = &vars[2 * kd + mode];
                v->kind = lat_names[kd];
                v->profile = "hash64";
                v->keylen = kd == L_CHRING || kd == L_RWLOCK || kd == L_BRANCHLESS ? 16 : 0;
                v->fn = mode ? lat_lat_fns[kd] : lat_thr_fns[kd];
                v->ring = ring;
                v->ks = ks16;
                v->hashes = hashes;
                v->nhashes = n;
                v->base = &base;
                v->rw = &rw;
            }
        /* The chain check: every latency variant must return the same owners in the same order. */
        for (int kd = 0; kd < NLAT_KINDS; kd++) {
            variant_t *v = &vars[2 * kd + 1];
            v->fn(v, LAT_CHECK_STEPS);
            bench_require(v->check == vars[1].check,
                          "latency chain of %s differs from chring's (%u members)", v->kind,
                          members);
        }
        printf("# latency, %u members: the %d latency variants return the same %d owners in the "
               "same order\n",
               members, NLAT_KINDS, LAT_CHECK_STEPS);
        fflush(stdout);

        for (int i = 0; i < 2 * NLAT_KINDS; i++) {
            fns[i] = vars[i].fn;
            ctxs[i] = &vars[i];
            iters[i] = bench_calibrate(vars[i].fn, &vars[i], o->target_ms, 4096);
        }
        fprintf(stderr, "lookup latency: %u members, %d variants x %d reps...\n", members,
                2 * NLAT_KINDS, o->reps);
        bench_interleaved(2 * NLAT_KINDS, fns, ctxs, iters, o->reps, ns);
        for (int kd = 0; kd < NLAT_KINDS; kd++)
            for (int mode = 0; mode < 2; mode++) {
                variant_t *v = &vars[2 * kd + mode];
                res[z][kd][mode] = ns[2 * kd + mode];
                fprintf(csv, "%s,%s,%u,%zu,%zu,%.2f\n", v->kind, mode ? "latency" : "throughput",
                        members, points, v->keylen, res[z][kd][mode]);
            }
        fflush(csv);
        pthread_rwlock_destroy(&rw);
        base_ring_free(&base);
        chring_free(&ring);
    }
    fclose(csv);
    free(hashes);

    printf("\n## latency against throughput: ns per lookup, hash64, 16-byte keys\n\n"
           "throughput = independent keys back to back; latency = each key chosen from the "
           "previous answer\n\n");
    printf("| variant | mode | 10 x 160 | 100 x 160 | 1000 x 160 | 10000 x 160 |\n"
           "|---|---|---|---|---|---|\n");
    for (int kd = 0; kd < NLAT_KINDS; kd++)
        for (int mode = 0; mode < 2; mode++) {
            printf("| %s | %s", lat_desc[kd], mode ? "latency" : "throughput");
            for (int z = 0; z < NLAT_SIZES; z++)
                printf(" | %.1f", res[z][kd][mode]);
            printf(" |\n");
        }
    printf("\n## latency ratios (same run)\n\n"
           "| ratio | 10 x 160 | 100 x 160 | 1000 x 160 | 10000 x 160 |\n|---|---|---|---|---|\n");
    for (int kd = 0; kd < NLAT_KINDS; kd++) {
        printf("| %s: latency / throughput", lat_names[kd]);
        for (int z = 0; z < NLAT_SIZES; z++)
            printf(" | %.2f", res[z][kd][1] / res[z][kd][0]);
        printf(" |\n");
    }
    printf("| rwlock latency / chring latency");
    for (int z = 0; z < NLAT_SIZES; z++)
        printf(" | %.2f", res[z][L_RWLOCK][1] / res[z][L_CHRING][1]);
    printf(" |\n| chring latency / branchless (no sync) latency");
    for (int z = 0; z < NLAT_SIZES; z++)
        printf(" | %.2f", res[z][L_CHRING][1] / res[z][L_BRANCHLESS][1]);
    printf(" |\n| chring pre-hashed latency / branchless pre-hashed latency");
    for (int z = 0; z < NLAT_SIZES; z++)
        printf(" | %.2f", res[z][L_CHRING_PRE][1] / res[z][L_BRANCHLESS_PRE][1]);
    printf(" |\n| rwlock throughput / chring throughput");
    for (int z = 0; z < NLAT_SIZES; z++)
        printf(" | %.2f", res[z][L_RWLOCK][0] / res[z][L_CHRING][0]);
    printf(" |\n");
}

/* ---- driver --------------------------------------------------------------------------------- */

static bool fits(chring_profile_t p, unsigned members)
{
    /* fnv16 has 65,536 positions and skips taken ones: 1000 x 160 points do not fit. */
    return p != CHRING_PROFILE_FNV16 || members * 160u <= 32768u;
}

static const char *pname(chring_profile_t p)
{
    return chring_profile_name(p);
}

/* Results kept for the summary tables: [size][profile][keylen] (NAN when not measured). */
static double res_lookup[NSIZES][NPROFILES][NKEYLENS];
static double res_pre[NSIZES][NPROFILES];
static double res_hash[NPROFILES][NKEYLENS];
static double res_enter_exit[NSIZES];
static double res_points[NSIZES][NPROFILES];
enum {
    B_RWLOCK,
    B_MUTEX,
    B_BRANCHLESS,
    B_RWLOCK_PRE,
    B_BRANCHY_PRE,
    B_BRANCHLESS_PRE,
    B_MEMCACHED,
    NBASE
};
static const char *base_names[NBASE] = {"rwlock",
                                        "mutex",
                                        "branchless",
                                        "rwlock_prehashed",
                                        "branchy_prehashed",
                                        "branchless_prehashed",
                                        "libmemcached"};
static double res_base[NSIZES][NBASE];

int main(int argc, char **argv)
{
    bench_opts_t o;
    keyset_t ks[NKEYLENS];
    uint64_t *hashes[NPROFILES] = {0};
    size_t nhashes;
    FILE *csv, *plot;

    bool run_matrix = true, run_latency = true;
    {
        /* This program's own options, taken out before the common ones are parsed. */
        int out = 1;
        for (int i = 1; i < argc; i++) {
            if (!strcmp(argv[i], "--latency"))
                run_matrix = false;
            else if (!strcmp(argv[i], "--no-latency"))
                run_latency = false;
            else
                argv[out++] = argv[i];
        }
        argc = out;
    }
    bench_parse(argc, argv, &o,
                "chring-bench-lookup: ns per lookup by ring size, key length, profile; baselines",
                "  --latency     only the latency table (each key chosen from the previous\n"
                "                answer, beside the same lookups on independent keys)\n"
                "  --no-latency  everything but the latency table\n");
    bench_require(run_matrix || run_latency, "--latency and --no-latency leave nothing to run");
    bench_print_machine("chring-bench-lookup");
    printf(
        "# lookup = chring_snap_enter + chring_snap_lookup + chring_snap_exit, independent keys;\n"
        "# median of %d interleaved reps of ~%.0f ms of thread CPU time each\n\n",
        o.reps, o.target_ms);

    for (int k = 0; k < NKEYLENS; k++) {
        ks[k].len = keylens[k];
        ks[k].count = KEYSET_BYTES / keylens[k];
        if (ks[k].count > KEYSET_MAX)
            ks[k].count = KEYSET_MAX;
        if (o.quick && ks[k].count > ((size_t)1 << 16))
            ks[k].count = (size_t)1 << 16;
        ks[k].keys = bench_keys(ks[k].count, ks[k].len, 0x5eed0000u + (uint64_t)k);
    }
    nhashes = ks[KEY16].count;

    for (int z = 0; z < NSIZES; z++)
        for (int p = 0; p < NPROFILES; p++) {
            res_pre[z][p] = NAN;
            res_points[z][p] = NAN;
            for (int k = 0; k < NKEYLENS; k++)
                res_lookup[z][p][k] = NAN;
        }
    for (int z = 0; z < NSIZES; z++)
        for (int b = 0; b < NBASE; b++)
            res_base[z][b] = NAN;
    for (int p = 0; p < NPROFILES; p++)
        for (int k = 0; k < NKEYLENS; k++)
            res_hash[p][k] = NAN;

    if (!run_matrix)
        goto latency;
    csv = bench_csv_open(&o, "lookup.csv",
                         "variant,profile,members,points,key_len,ns_per_lookup,mlookups_per_s");

    for (int z = 0; z < NSIZES; z++) {
        unsigned members = sizes[z];
        chring_t *rings[NPROFILES] = {0};
        base_ring_t base;
        pthread_rwlock_t rw;
        pthread_mutex_t mu;
        void *mc = NULL;
        variant_t *vars = calloc(NPROFILES * (NKEYLENS * 2 + 1) + NBASE + 1, sizeof *vars);
        size_t nv = 0;

        bench_require(vars != NULL, "out of memory");
        for (int p = 0; p < NPROFILES; p++) {
            if (!fits(profiles[p], members))
                continue;
            rings[p] = bench_ring(profiles[p], members);
            {
                const chring_snap_t *s = chring_snap_enter(rings[p]);
                res_points[z][p] = (double)chring_snap_points(s);
                if (!hashes[p]) {
                    hashes[p] = malloc(nhashes * sizeof *hashes[p]);
                    bench_require(hashes[p] != NULL, "out of memory");
                    for (size_t i = 0; i < nhashes; i++)
                        hashes[p][i] = chring_snap_hash(s, ks[KEY16].keys + i * 16, 16);
                }
                chring_snap_exit(rings[p], s);
            }
        }

        /* Baselines: the hash64 ring copied out. */
        {
            const chring_snap_t *s = chring_snap_enter(rings[0]);
            base_ring_copy(&base, s);
            for (size_t i = 0; i < VERIFY_KEYS && i < ks[KEY16].count; i++) {
                const unsigned char *key = ks[KEY16].keys + i * 16;
                uint64_t h = base_hash64(key, 16);
                const chring_member_t *m = chring_snap_lookup(s, key, 16);
                bench_require(h == chring_hash64(key, 16) && h == hashes[0][i],
                              "inline hash64 differs from chring_hash64 at key %zu", i);
                bench_require(m == base_owner_branchy(&base, h) &&
                                  m == base_owner_branchless(&base, h),
                              "baseline owner differs from chring's at key %zu (%zu members)", i,
                              (size_t)members);
                bench_require(m == chring_snap_lookup_hash(s, h),
                              "chring_snap_lookup_hash differs from chring_snap_lookup at key %zu",
                              i);
            }
            chring_snap_exit(rings[0], s);
            pthread_rwlock_init(&rw, NULL);
            pthread_mutex_init(&mu, NULL);
            printf("# %u members: baselines agree with chring on the owner of %d keys\n", members,
                   VERIFY_KEYS);
        }
#ifdef HAVE_LIBMEMCACHED
        mc = members <= 100 ? mc_ring(members) : NULL;
        if (mc) {
            size_t differ = mc_disagreements(mc, rings[5], &ks[KEY16], VERIFY_KEYS);
            printf("# %u members: libmemcached ketama and chring ketama disagree on %zu of %d "
                   "keys%s\n",
                   members, differ, VERIFY_KEYS, differ ? "  <-- MISMATCH" : "");
        } else if (members <= 100) {
            printf("# %u members: libmemcached refused the ring\n", members);
        }
#endif

        for (int p = 0; p < NPROFILES; p++) {
            if (!rings[p])
                continue;
            for (int k = 0; k < NKEYLENS; k++) {
                variant_t *v = &vars[nv++];
                v->kind = "chring";
                v->profile = pname(profiles[p]);
                v->keylen = keylens[k];
                v->fn = run_chring;
                v->ring = rings[p];
                v->ks = &ks[k];
            }
            {
                variant_t *v = &vars[nv++];
                v->kind = "chring_prehashed";
                v->profile = pname(profiles[p]);
                v->fn = run_chring_prehashed;
                v->ring = rings[p];
                v->hashes = hashes[p];
                v->nhashes = nhashes;
            }
            if (z == 1) /* the hash alone does not depend on the ring's size */
                for (int k = 0; k < NKEYLENS; k++) {
                    variant_t *v = &vars[nv++];
                    v->kind = "hash_only";
                    v->profile = pname(profiles[p]);
                    v->keylen = keylens[k];
                    v->fn = run_hash_only;
                    v->ring = rings[p];
                    v->ks = &ks[k];
                }
        }
        {
            variant_t *v = &vars[nv++];
            v->kind = "enter_exit";
            v->profile = "hash64";
            v->fn = run_enter_exit;
            v->ring = rings[0];
        }
        for (int b = 0; b < NBASE; b++) {
            variant_t *v = &vars[nv];
            bool pre = b == B_RWLOCK_PRE || b == B_BRANCHY_PRE || b == B_BRANCHLESS_PRE;
            static const bench_fn fns[NBASE] = {run_rwlock,
                                                run_mutex,
                                                run_branchless,
                                                run_rwlock_prehashed,
                                                run_branchy_prehashed,
                                                run_branchless_prehashed,
#ifdef HAVE_LIBMEMCACHED
                                                run_libmemcached
#else
                                                NULL
#endif
            };
            if (b == B_MEMCACHED && !mc)
                continue;
            nv++;
            v->kind = base_names[b];
            v->profile = b == B_MEMCACHED ? "ketama" : "hash64";
            v->keylen = pre ? 0 : 16;
            v->fn = fns[b];
            v->ks = &ks[KEY16];
            v->hashes = hashes[0];
            v->nhashes = nhashes;
            v->base = &base;
            v->rw = &rw;
            v->mu = &mu;
            v->mc = mc;
        }

        /* Calibrate, then run all variants interleaved. */
        {
            bench_fn *fns = calloc(nv, sizeof *fns);
            void **ctxs = calloc(nv, sizeof *ctxs);
            size_t *iters = calloc(nv, sizeof *iters);
            double *ns = calloc(nv, sizeof *ns);
            bench_require(fns && ctxs && iters && ns, "out of memory");
            for (size_t i = 0; i < nv; i++) {
                fns[i] = vars[i].fn;
                ctxs[i] = &vars[i];
                iters[i] = bench_calibrate(vars[i].fn, &vars[i], o.target_ms, 4096);
            }
            fprintf(stderr, "lookup: %u members, %zu variants x %d reps...\n", members, nv, o.reps);
            bench_interleaved(nv, fns, ctxs, iters, o.reps, ns);
            for (size_t i = 0; i < nv; i++) {
                variant_t *v = &vars[i];
                int p = -1, k = -1;
                v->ns = ns[i];
                for (int j = 0; j < NPROFILES; j++)
                    if (!strcmp(v->profile, pname(profiles[j])))
                        p = j;
                for (int j = 0; j < NKEYLENS; j++)
                    if (v->keylen == keylens[j])
                        k = j;
                if (!strcmp(v->kind, "chring"))
                    res_lookup[z][p][k] = v->ns;
                else if (!strcmp(v->kind, "chring_prehashed"))
                    res_pre[z][p] = v->ns;
                else if (!strcmp(v->kind, "hash_only"))
                    res_hash[p][k] = v->ns;
                else if (!strcmp(v->kind, "enter_exit"))
                    res_enter_exit[z] = v->ns;
                else
                    for (int b = 0; b < NBASE; b++)
                        if (!strcmp(v->kind, base_names[b]))
                            res_base[z][b] = v->ns;
                fprintf(csv, "%s,%s,%u,%.0f,%zu,%.2f,%.2f\n", v->kind, v->profile, members,
                        p >= 0 ? res_points[z][p] : res_points[z][0], v->keylen, v->ns,
                        1e3 / v->ns);
            }
            fflush(csv);
            free(fns);
            free(ctxs);
            free(iters);
            free(ns);
        }

#ifdef HAVE_LIBMEMCACHED
        if (mc)
            memcached_free(mc);
#endif
        pthread_rwlock_destroy(&rw);
        pthread_mutex_destroy(&mu);
        base_ring_free(&base);
        for (int p = 0; p < NPROFILES; p++)
            chring_free(&rings[p]);
        free(vars);
    }
    fclose(csv);

    /* ---- tables ---- */
    printf("\n## ns per lookup, 16-byte keys (enter + lookup + exit), by ring size\n\n");
    printf("| profile | 10 x 160 | 100 x 160 | 1000 x 160 |\n|---|---|---|---|\n");
    for (int p = 0; p < NPROFILES; p++) {
        printf("| %s", pname(profiles[p]));
        for (int z = 0; z < NSIZES; z++)
            isnan(res_lookup[z][p][KEY16]) ? printf(" | -")
                                           : printf(" | %.1f", res_lookup[z][p][KEY16]);
        printf(" |\n");
    }
    for (int p = 0; p < NPROFILES; p++) {
        printf("| %s, pre-hashed (chring_snap_lookup_hash)", pname(profiles[p]));
        for (int z = 0; z < NSIZES; z++)
            isnan(res_pre[z][p]) ? printf(" | -") : printf(" | %.1f", res_pre[z][p]);
        printf(" |\n");
    }
    printf("| enter + exit only (empty read section)");
    for (int z = 0; z < NSIZES; z++)
        printf(" | %.1f", res_enter_exit[z]);
    printf(" |\n");

    printf("\n## baselines on the same hash64 ring (copied out of the snapshot), same run\n\n");
    printf("| baseline | 10 x 160 | 100 x 160 | 1000 x 160 |\n|---|---|---|---|\n");
    static const char *base_desc[NBASE] = {
        "hash64 + branchy search behind pthread_rwlock (rdlock per lookup)",
        "hash64 + branchy search behind pthread_mutex",
        "hash64 + branchless search, no synchronisation",
        "pre-hashed, branchy search behind pthread_rwlock",
        "pre-hashed, branchy search, no synchronisation",
        "pre-hashed, branchless search, no synchronisation",
        "libmemcached 1.1 ketama (memcached_generate_hash; MD5 of the key)",
    };
    for (int b = 0; b < NBASE; b++) {
        printf("| %s", base_desc[b]);
        for (int z = 0; z < NSIZES; z++)
            isnan(res_base[z][b]) ? printf(" | -") : printf(" | %.1f", res_base[z][b]);
        printf(" |\n");
    }

    printf("\n## ns per lookup by key length (bytes), enter + lookup + exit\n\n");
    printf("| profile | members | 8 | 16 | 64 | 256 |\n|---|---|---|---|---|---|\n");
    for (int p = 0; p < NPROFILES; p++)
        for (int z = 0; z < NSIZES; z++) {
            if (isnan(res_lookup[z][p][KEY16]))
                continue;
            printf("| %s | %u", pname(profiles[p]), sizes[z]);
            for (int k = 0; k < NKEYLENS; k++)
                printf(" | %.1f", res_lookup[z][p][k]);
            printf(" |\n");
        }
    printf("\n## ns per hash alone (chring_snap_hash) by key length\n\n");
    printf("| profile | 8 | 16 | 64 | 256 |\n|---|---|---|---|---|\n");
    for (int p = 0; p < NPROFILES; p++) {
        printf("| %s", pname(profiles[p]));
        for (int k = 0; k < NKEYLENS; k++)
            printf(" | %.1f", res_hash[p][k]);
        printf(" |\n");
    }

    printf("\n## ratios (same run)\n\n");
    printf("| ratio | target | 10 x 160 | 100 x 160 | 1000 x 160 |\n|---|---|---|---|---|\n");
    printf("| rwlock ring time / chring hash64 lookup time (16-byte keys) | >= 4");
    for (int z = 0; z < NSIZES; z++)
        printf(" | %.2f", res_base[z][B_RWLOCK] / res_lookup[z][0][KEY16]);
    printf(" |\n| mutex ring time / chring hash64 lookup time | -");
    for (int z = 0; z < NSIZES; z++)
        printf(" | %.2f", res_base[z][B_MUTEX] / res_lookup[z][0][KEY16]);
    printf(" |\n| chring pre-hashed (hash64) / branchless unsynchronised search | <= 0.4");
    for (int z = 0; z < NSIZES; z++)
        printf(" | %.2f", res_pre[z][0] / res_base[z][B_BRANCHLESS_PRE]);
    printf(" |\n| chring hash64 lookup / hash64 + branchless search, no sync | -");
    for (int z = 0; z < NSIZES; z++)
        printf(" | %.2f", res_lookup[z][0][KEY16] / res_base[z][B_BRANCHLESS]);
    printf(" |\n| chring xxh3 lookup / chring hash64 lookup | -");
    for (int z = 0; z < NSIZES; z++)
        printf(" | %.2f", res_lookup[z][1][KEY16] / res_lookup[z][0][KEY16]);
    printf(" |\n| libmemcached ketama time / chring ketama time | -");
    for (int z = 0; z < NSIZES; z++)
        isnan(res_base[z][B_MEMCACHED])
            ? printf(" | -")
            : printf(" | %.2f", res_base[z][B_MEMCACHED] / res_lookup[z][5][KEY16]);
    printf(" |\n");

    /* Wide CSV for the plot: 16-byte keys. */
    plot = bench_csv_open(&o, "lookup_plot.csv",
                          "members,hash64,xxh3,murmur32,fnv32,fnv16,ketama,nginx,hash64_prehashed,"
                          "rwlock,mutex,branchless,branchless_prehashed,libmemcached");
    for (int z = 0; z < NSIZES; z++) {
        fprintf(plot, "%u", sizes[z]);
        for (int p = 0; p < NPROFILES; p++)
            fprintf(plot, ",%.2f", res_lookup[z][p][KEY16]);
        fprintf(plot, ",%.2f,%.2f,%.2f,%.2f,%.2f,%.2f\n", res_pre[z][0], res_base[z][B_RWLOCK],
                res_base[z][B_MUTEX], res_base[z][B_BRANCHLESS], res_base[z][B_BRANCHLESS_PRE],
                res_base[z][B_MEMCACHED]);
    }
    fclose(plot);
    printf("\n# CSV: %s/lookup.csv, %s/lookup_plot.csv; load average now %.2f\n", o.out_dir,
           o.out_dir, bench_loadavg());

latency:
    if (run_latency) {
        fprintf(stderr, "lookup: latency table...\n");
        latency_section(&o, &ks[KEY16]);
        printf("\n# CSV: %s/lookup_latency.csv; load average now %.2f\n", o.out_dir,
               bench_loadavg());
    }

    for (int k = 0; k < NKEYLENS; k++)
        free(ks[k].keys);
    for (int p = 0; p < NPROFILES; p++)
        free(hashes[p]);
    return 0;
}
