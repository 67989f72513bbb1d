/* chring-bench-health: what health and warm-up cost (docs/bench.md §8): a plain lookup with no
 * member down against the same run's baselines; a ring with one member down, on keys whose owner
 * is up and on keys whose owner is down; acquire + release with members ramping against no ramp;
 * chring_set_down flips at 100 and 10,000 members.
 *
 * SPDX-License-Identifier: MIT
 *
 * Every table compares variants measured in one interleaved set (bench_interleaved: calibrated to
 * about --ms milliseconds each, one run of each per rep, the median of the reps), in the
 * measuring thread's CPU time (bench_cpu_ns).  Rings are hash64, 160 points per member, 16-byte
 * pseudo-random keys.  Two rings of the same membership stand side by side where a state is
 * compared (nobody down / one member down; no ramp / ramping), so both are measured in the same
 * minutes; placement is a pure function of the membership, so they place every key alike until a
 * member is set down, which the program checks.
 *
 * Writes health.csv.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "common.h"

#define NKEYS ((size_t)1 << 17) /* 2 MiB of 16-byte keys, as in chring-bench-lookup */
#define KEYLEN 16
#define NSIZES 3
#define ORPHANS_MAX ((size_t)8192)       /* keys whose owner is the member set down */
#define CANDIDATES_MAX ((size_t)1 << 25) /* bound on the keys tried to find them */
#define RAMP_MS ((uint32_t)3600000)      /* a ramp that lasts the whole run: one hour */
#define SLOW_START_FROM 0.1
#define ACQ_MEMBERS 100u

static const unsigned sizes[NSIZES] = {10, 100, 1000};
/* The previous figures (docs/bench.md §1, 2: library c7721c1, before health existed). */
static const double prev_rwlock_ratio[NSIZES] = {4.69, 5.51, 2.85};
static const double prev_branchless_ratio[NSIZES] = {0.62, 0.50, 0.60};
static const double prev_pre_ratio[NSIZES] = {0.18, 0.14, 0.22};

typedef struct keys {
    unsigned char *keys; /* count keys of KEYLEN bytes */
    uint64_t *hashes;    /* their hash64 */
    size_t count;
} keys_t;

/* One timed variant. */
typedef struct variant {
    bench_fn fn;
    chring_t *ring;
    const keys_t *ks;
    base_ring_t *base;
    pthread_rwlock_t *rw;
    const char (*names)[16]; /* set_down flips: the names cycled over */
    size_t nnames;
} variant_t;

/* ---- lookups ------------------------------------------------------------------------------- */

static uint64_t run_lookup(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const unsigned char *keys = v->ks->keys;
    size_t count = v->ks->count, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        const chring_snap_t *s = chring_snap_enter(v->ring);
        acc += (uintptr_t)chring_snap_lookup(s, keys + k * KEYLEN, KEYLEN);
        chring_snap_exit(v->ring, s);
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

static uint64_t run_prehashed(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const uint64_t *hashes = v->ks->hashes;
    size_t count = v->ks->count, k = 0;
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

static uint64_t run_rwlock(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const unsigned char *keys = v->ks->keys;
    size_t count = v->ks->count, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        uint64_t h = base_hash64(keys + k * KEYLEN, KEYLEN);
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

static uint64_t run_branchless(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const unsigned char *keys = v->ks->keys;
    size_t count = v->ks->count, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        acc += (uintptr_t)base_owner_branchless(v->base, base_hash64(keys + k * KEYLEN, KEYLEN));
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
    const uint64_t *hashes = v->ks->hashes;
    size_t count = v->ks->count, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        acc += (uintptr_t)base_owner_branchless(v->base, hashes[k]);
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

/* ---- acquire + release ---------------------------------------------------------------------- */

static uint64_t run_acquire(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    const unsigned char *keys = v->ks->keys;
    size_t count = v->ks->count, k = 0;
    uintptr_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        chring_lease_t lease;
        chring_acquire(v->ring, keys + k * KEYLEN, KEYLEN, &lease);
        acc += (uintptr_t)lease.member;
        chring_release(v->ring, &lease);
        if (++k == count)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

/* A clock read alone, clock_gettime(CLOCK_MONOTONIC) as the library's ramp makes it: what an
 * acquire that meets a ramping member adds at least. */
static uint64_t run_clock(void *ctx, size_t iters)
{
    uint64_t acc = 0;
    (void)ctx;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++)
        acc += bench_now_ns();
    uint64_t t1 = bench_cpu_ns();
    bench_sink += acc;
    return t1 - t0;
}

/* ---- set down / up -------------------------------------------------------------------------- */

/* One flip: chring_set_down(name, 1) then chring_set_down(name, 0), over the nnames names in
 * turn (nnames 1: always the same member). */
static uint64_t run_flip(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    size_t k = 0;
    int acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        acc |= chring_set_down(v->ring, v->names[k], 1);
        acc |= chring_set_down(v->ring, v->names[k], 0);
        if (++k == v->nnames)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_require(acc == 0, "chring_set_down failed during the flips");
    return t1 - t0;
}

/* The name searches a flip makes, alone: chring_set_down finds the member by name and then its
 * rank (a second search, by the member's name), so a flip (two calls) makes four.  Here the same
 * four through the reader side: chring_snap_find and chring_snap_weight (which finds the rank the
 * same way), twice, in one read section. */
static uint64_t run_find(void *ctx, size_t iters)
{
    variant_t *v = ctx;
    size_t k = 0;
    uint64_t acc = 0;
    uint64_t t0 = bench_cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        const chring_snap_t *s = chring_snap_enter(v->ring);
        for (int twice = 0; twice < 2; twice++)
            acc += chring_snap_weight(s, chring_snap_find(s, v->names[k]));
        chring_snap_exit(v->ring, s);
        if (++k == v->nnames)
            k = 0;
    }
    uint64_t t1 = bench_cpu_ns();
    bench_require(acc == 2 * (uint64_t)iters, "a name search failed");
    return t1 - t0;
}

/* ---- setup ---------------------------------------------------------------------------------- */

static void fill_hashes(keys_t *ks)
{
    ks->hashes = malloc((ks->count ? ks->count : 1) * sizeof *ks->hashes);
    bench_require(ks->hashes != NULL, "out of memory");
    for (size_t i = 0; i < ks->count; i++)
        ks->hashes[i] = chring_hash64(ks->keys + i * KEYLEN, KEYLEN);
}

static void keys_free(keys_t *ks)
{
    free(ks->keys);
    free(ks->hashes);
    memset(ks, 0, sizeof *ks);
}

static const chring_member_t *owner_of(chring_t *r, const unsigned char *key)
{
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_lookup(s, key, KEYLEN);
    chring_snap_exit(r, s);
    return m; /* compared by identity only: the ring keeps its members */
}

/* The keys of `all` whose owner on r is not victim (into *others), and up to `want` keys owned
 * by victim (into *mine), drawn from all first and then from further pseudo-random keys. */
static void split_keys(chring_t *r, const chring_member_t *victim, const keys_t *all, size_t want,
                       keys_t *others, keys_t *mine)
{
    uint64_t state = 0x0e1f4a11u;
    size_t tried = 0;
    unsigned char key[KEYLEN];

    others->keys = malloc(all->count * KEYLEN);
    mine->keys = malloc(want * KEYLEN);
    bench_require(others->keys && mine->keys, "out of memory");
    others->count = mine->count = 0;
    for (size_t i = 0; i < all->count; i++) {
        const unsigned char *k = all->keys + i * KEYLEN;
        if (owner_of(r, k) != victim)
            memcpy(others->keys + others->count++ * KEYLEN, k, KEYLEN);
        else if (mine->count < want)
            memcpy(mine->keys + mine->count++ * KEYLEN, k, KEYLEN);
    }
    while (mine->count < want && tried++ < CANDIDATES_MAX) {
        uint64_t a = bench_splitmix64(&state), b = bench_splitmix64(&state);
        memcpy(key, &a, 8);
        memcpy(key + 8, &b, 8);
        if (owner_of(r, key) == victim)
            memcpy(mine->keys + mine->count++ * KEYLEN, key, KEYLEN);
    }
    bench_require(mine->count > 0, "no key of the chosen member found in %zu tries", tried);
    fill_hashes(others);
    fill_hashes(mine);
}

static const chring_member_t *find_member(chring_t *r, const char *name)
{
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_find(s, name);
    chring_snap_exit(r, s);
    bench_require(m != NULL, "member %s not found", name);
    return m;
}

/* Runs n variants interleaved; ns per operation into ns[]. */
static void measure(const bench_opts_t *o, variant_t *vars, size_t n, double *ns, const char *what)
{
    bench_fn fns[32];
    void *ctxs[32];
    size_t iters[32];
    bench_require(n <= 32, "too many variants");
    for (size_t i = 0; i < n; i++) {
        fns[i] = vars[i].fn;
        ctxs[i] = &vars[i];
        iters[i] = bench_calibrate(vars[i].fn, &vars[i], o->target_ms, 1024);
    }
    fprintf(stderr, "health: %s, %zu variants x %d reps...\n", what, n, o->reps);
    bench_interleaved(n, fns, ctxs, iters, o->reps, ns);
}

/* ---- 1. lookups: no member down, one member down ------------------------------------------ */

enum {
    V_LOOKUP,
    V_PRE,
    V_RWLOCK,
    V_BRANCHLESS,
    V_BRANCHLESS_PRE,
    V_UP_NONE, /* keys of members up, ring with nobody down */
    V_UP_ONE,  /* the same keys, ring with one member down */
    V_UP_NONE_PRE,
    V_UP_ONE_PRE,
    V_DOWN_NONE, /* keys of the member set down, ring with nobody down */
    V_DOWN_ONE,  /* the same keys, ring with that member down */
    V_DOWN_NONE_PRE,
    V_DOWN_ONE_PRE,
    NV_LOOKUP
};
static const char *lookup_names[NV_LOOKUP] = {"lookup_none_down",
                                              "prehashed_none_down",
                                              "rwlock",
                                              "branchless",
                                              "branchless_prehashed",
                                              "keys_up_none_down",
                                              "keys_up_one_down",
                                              "keys_up_none_down_pre",
                                              "keys_up_one_down_pre",
                                              "keys_down_none_down",
                                              "keys_down_one_down",
                                              "keys_down_none_down_pre",
                                              "keys_down_one_down_pre"};
static double res_lookup[NSIZES][NV_LOOKUP];
static size_t res_orphans[NSIZES];

static void lookups(const bench_opts_t *o, const keys_t *all, FILE *csv)
{
    for (int z = 0; z < NSIZES; z++) {
        unsigned members = sizes[z];
        chring_t *none = bench_ring(CHRING_PROFILE_HASH64, members);
        chring_t *one = bench_ring(CHRING_PROFILE_HASH64, members);
        chring_t *removed = bench_ring(CHRING_PROFILE_HASH64, members);
        char victim_name[16];
        const chring_member_t *victim, *victim_one;
        keys_t up = {0}, down = {0};
        base_ring_t base;
        pthread_rwlock_t rw;
        variant_t vars[NV_LOOKUP];
        chring_stats_t st;

        bench_member_name(victim_name, sizeof victim_name, members / 2);
        victim = find_member(none, victim_name);
        victim_one = find_member(one, victim_name);
        split_keys(none, victim, all, o->quick ? ORPHANS_MAX / 2 : ORPHANS_MAX, &up, &down);
        res_orphans[z] = down.count;
        bench_require(chring_set_down(one, victim_name, 1) == 0, "chring_set_down");
        bench_require(chring_remove(removed, victim_name) == 0, "chring_remove");
        chring_stats(one, &st);
        bench_require(st.down == 1, "stats.down is %llu, expected 1", (unsigned long long)st.down);

        /* The rings agree where they must: keys of members up keep their owner (by name: the
         * rings are distinct objects), keys of the member down go where a removal sends them. */
        for (size_t i = 0; i < up.count && i < 20000; i++) {
            const unsigned char *k = up.keys + i * KEYLEN;
            bench_require(!strcmp(chring_member_name(owner_of(none, k)),
                                  chring_member_name(owner_of(one, k))),
                          "a key whose owner is up moved when another member went down");
        }
        for (size_t i = 0; i < down.count; i++) {
            const unsigned char *k = down.keys + i * KEYLEN;
            const chring_member_t *m = owner_of(one, k);
            bench_require(m != victim_one && !strcmp(chring_member_name(m),
                                                     chring_member_name(owner_of(removed, k))),
                          "a key of the member down does not go where a removal sends it");
        }
        chring_free(&removed);
        printf("# %u members, %s down: %zu keys of members up keep their owner (20000 checked), "
               "%zu keys of the member down go where its removal sends them\n",
               members, victim_name, up.count, down.count);

        {
            const chring_snap_t *s = chring_snap_enter(none);
            base_ring_copy(&base, s);
            for (size_t i = 0; i < 20000 && i < all->count; i++)
                bench_require(base_owner_branchless(&base, all->hashes[i]) ==
                                      chring_snap_lookup(s, all->keys + i * KEYLEN, KEYLEN) &&
                                  base_owner_branchy(&base, all->hashes[i]) ==
                                      chring_snap_lookup_hash(s, all->hashes[i]),
                              "baseline owner differs from chring's at key %zu", i);
            chring_snap_exit(none, s);
        }
        pthread_rwlock_init(&rw, NULL);

        memset(vars, 0, sizeof vars);
        vars[V_LOOKUP] = (variant_t){.fn = run_lookup, .ring = none, .ks = all};
        vars[V_PRE] = (variant_t){.fn = run_prehashed, .ring = none, .ks = all};
        vars[V_RWLOCK] = (variant_t){.fn = run_rwlock, .ks = all, .base = &base, .rw = &rw};
        vars[V_BRANCHLESS] = (variant_t){.fn = run_branchless, .ks = all, .base = &base};
        vars[V_BRANCHLESS_PRE] =
            (variant_t){.fn = run_branchless_prehashed, .ks = all, .base = &base};
        vars[V_UP_NONE] = (variant_t){.fn = run_lookup, .ring = none, .ks = &up};
        vars[V_UP_ONE] = (variant_t){.fn = run_lookup, .ring = one, .ks = &up};
        vars[V_UP_NONE_PRE] = (variant_t){.fn = run_prehashed, .ring = none, .ks = &up};
        vars[V_UP_ONE_PRE] = (variant_t){.fn = run_prehashed, .ring = one, .ks = &up};
        vars[V_DOWN_NONE] = (variant_t){.fn = run_lookup, .ring = none, .ks = &down};
        vars[V_DOWN_ONE] = (variant_t){.fn = run_lookup, .ring = one, .ks = &down};
        vars[V_DOWN_NONE_PRE] = (variant_t){.fn = run_prehashed, .ring = none, .ks = &down};
        vars[V_DOWN_ONE_PRE] = (variant_t){.fn = run_prehashed, .ring = one, .ks = &down};
        {
            char what[64];
            snprintf(what, sizeof what, "lookups, %u members", members);
            measure(o, vars, NV_LOOKUP, res_lookup[z], what);
        }
        for (int v = 0; v < NV_LOOKUP; v++)
            fprintf(csv, "lookup,%s,%u,%.2f\n", lookup_names[v], members, res_lookup[z][v]);
        fflush(csv);

        pthread_rwlock_destroy(&rw);
        base_ring_free(&base);
        keys_free(&up);
        keys_free(&down);
        chring_free(&none);
        chring_free(&one);
    }

    printf("\n## 1. lookups with no member down, against the same run's baselines (ns per lookup)"
           "\n\n| variant | 10 x 160 | 100 x 160 | 1000 x 160 |\n|---|---|---|---|\n");
    static const struct {
        int v;
        const char *desc;
    } rows[] = {
        {V_LOOKUP, "chring hash64 lookup, no member down (enter + lookup + exit)"},
        {V_PRE, "chring pre-hashed, no member down"},
        {V_RWLOCK, "hash64 + branchy search behind pthread_rwlock"},
        {V_BRANCHLESS, "hash64 + branchless search, no synchronisation"},
        {V_BRANCHLESS_PRE, "pre-hashed, branchless search, no synchronisation"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        printf("| %s", rows[i].desc);
        for (int z = 0; z < NSIZES; z++)
            printf(" | %.1f", res_lookup[z][rows[i].v]);
        printf(" |\n");
    }
    printf("\nratios, this run (previous figures of docs/bench.md, library c7721c1, before "
           "health):\n\n| ratio | 10 x 160 | 100 x 160 | 1000 x 160 |\n|---|---|---|---|\n");
    printf("| rwlock ring / chring lookup");
    for (int z = 0; z < NSIZES; z++)
        printf(" | %.2f (%.2f)", res_lookup[z][V_RWLOCK] / res_lookup[z][V_LOOKUP],
               prev_rwlock_ratio[z]);
    printf(" |\n| chring lookup / hash64 + branchless search, no sync");
    for (int z = 0; z < NSIZES; z++)
        printf(" | %.2f (%.2f)", res_lookup[z][V_LOOKUP] / res_lookup[z][V_BRANCHLESS],
               prev_branchless_ratio[z]);
    printf(" |\n| chring pre-hashed / branchless pre-hashed search, no sync");
    for (int z = 0; z < NSIZES; z++)
        printf(" | %.2f (%.2f)", res_lookup[z][V_PRE] / res_lookup[z][V_BRANCHLESS_PRE],
               prev_pre_ratio[z]);
    printf(" |\n");

    printf("\n## 2. one member down (ns per lookup; each pair on the same keys, two rings of the "
           "same membership)\n\n| keys | lookup | 10 x 160 | 100 x 160 | 1000 x 160 |\n"
           "|---|---|---|---|---|\n");
    static const struct {
        int none, one;
        const char *keys, *kind;
    } pairs[] = {
        {V_UP_NONE, V_UP_ONE, "keys whose owner is up", "hash64"},
        {V_UP_NONE_PRE, V_UP_ONE_PRE, "keys whose owner is up", "pre-hashed"},
        {V_DOWN_NONE, V_DOWN_ONE, "keys whose owner is down", "hash64"},
        {V_DOWN_NONE_PRE, V_DOWN_ONE_PRE, "keys whose owner is down", "pre-hashed"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        printf("| %s | %s, nobody down", pairs[i].keys, pairs[i].kind);
        for (int z = 0; z < NSIZES; z++)
            printf(" | %.1f", res_lookup[z][pairs[i].none]);
        printf(" |\n| %s | %s, one member down", pairs[i].keys, pairs[i].kind);
        for (int z = 0; z < NSIZES; z++)
            printf(" | %.1f", res_lookup[z][pairs[i].one]);
        printf(" |\n| %s | %s: one down / nobody down", pairs[i].keys, pairs[i].kind);
        for (int z = 0; z < NSIZES; z++)
            printf(" | %.2f", res_lookup[z][pairs[i].one] / res_lookup[z][pairs[i].none]);
        printf(" |\n");
    }
    printf("\n(keys whose owner is down: %zu / %zu / %zu, found among pseudo-random keys)\n",
           res_orphans[0], res_orphans[1], res_orphans[2]);
}

/* ---- 3. acquire + release with members ramping ------------------------------------------- */

enum {
    A_LOOKUP,   /* plain lookup, all keys, no ramp */
    A_NONE,     /* acquire + release, all keys, no ramp */
    A_ALL,      /* every member ramping */
    A_ONE,      /* one member joined with slow start */
    A_NEW_NONE, /* keys of the newcomer, no ramp */
    A_NEW_ONE,  /* the same keys, the newcomer ramping */
    A_CLOCK,    /* clock_gettime(CLOCK_MONOTONIC) alone */
    NV_ACQ
};
static const char *acq_names[NV_ACQ] = {"lookup_no_ramp",
                                        "acquire_no_ramp",
                                        "acquire_all_ramping",
                                        "acquire_one_slow_start",
                                        "acquire_newcomer_keys_no_ramp",
                                        "acquire_newcomer_keys_ramping",
                                        "clock_gettime_monotonic"};
static const char *acq_desc[NV_ACQ] = {
    "plain lookup (enter + lookup + exit), no ramp",
    "acquire + release, no ramp",
    "acquire + release, every member ramping (chring_set_ramp 0.5 -> 1 over 1 h)",
    "acquire + release, one member in slow start (config.slow_start_ms 1 h), all keys",
    "acquire + release on the keys the newcomer owns, no ramp",
    "acquire + release on the same keys, the newcomer in slow start",
    "clock_gettime(CLOCK_MONOTONIC) alone (for comparison)",
};

static void acquires(const bench_opts_t *o, const keys_t *all, FILE *csv)
{
    chring_t *none = bench_ring(CHRING_PROFILE_HASH64, ACQ_MEMBERS);
    chring_t *ramping = bench_ring(CHRING_PROFILE_HASH64, ACQ_MEMBERS);
    chring_t *slow = NULL;
    chring_config_t cfg;
    char name[16], newcomer[16];
    keys_t others = {0}, mine = {0};
    variant_t vars[NV_ACQ];
    double ns[NV_ACQ];
    chring_stats_t before[NV_ACQ], after[NV_ACQ];
    chring_t *ring_of[NV_ACQ];

    /* Every member ramping. */
    for (unsigned i = 0; i < ACQ_MEMBERS; i++) {
        bench_member_name(name, sizeof name, i);
        bench_require(chring_set_ramp(ramping, name, 0.5, 1.0, RAMP_MS) == 0, "chring_set_ramp");
    }
    /* One member joining a populated ring with slow start: the first ACQ_MEMBERS - 1 members in
     * one update (the first population of an empty ring does not ramp), then the last one by
     * chring_add, which starts it at SLOW_START_FROM. */
    chring_config_default(&cfg);
    cfg.slow_start_ms = RAMP_MS;
    cfg.slow_start_from = SLOW_START_FROM;
    bench_require(chring_new(&slow, &cfg) == 0, "chring_new (slow start)");
    {
        chring_change_t changes[ACQ_MEMBERS - 1];
        char names[ACQ_MEMBERS - 1][16];
        memset(changes, 0, sizeof changes);
        for (unsigned i = 0; i + 1 < ACQ_MEMBERS; i++) {
            bench_member_name(names[i], sizeof names[i], i);
            changes[i].name = names[i];
            changes[i].weight = 1;
        }
        bench_require(chring_update(slow, changes, ACQ_MEMBERS - 1) == 0, "chring_update");
    }
    bench_member_name(newcomer, sizeof newcomer, ACQ_MEMBERS - 1);
    bench_require(chring_add(slow, newcomer, 1, NULL) == 0, "chring_add");
    {
        const chring_snap_t *s = chring_snap_enter(slow);
        double sc = chring_member_scale(chring_snap_find(s, newcomer));
        bench_require(sc < 1.0, "the newcomer does not ramp (scale %.3f)", sc);
        for (unsigned i = 0; i + 1 < ACQ_MEMBERS; i++) {
            bench_member_name(name, sizeof name, i);
            bench_require(chring_member_scale(chring_snap_find(s, name)) == 1.0,
                          "a member of the first population ramps");
        }
        chring_snap_exit(slow, s);
    }
    split_keys(none, find_member(none, newcomer), all, o->quick ? ORPHANS_MAX / 2 : ORPHANS_MAX,
               &others, &mine);
    for (size_t i = 0; i < mine.count; i++)
        bench_require(!strcmp(chring_member_name(owner_of(slow, mine.keys + i * KEYLEN)), newcomer),
                      "the rings of the same membership disagree on a key's owner");
    printf("\n# acquire: %u members; %zu keys owned by the newcomer %s (scale now %.3f)\n",
           ACQ_MEMBERS, mine.count, newcomer, chring_member_scale(find_member(slow, newcomer)));

    memset(vars, 0, sizeof vars);
    vars[A_LOOKUP] = (variant_t){.fn = run_lookup, .ring = none, .ks = all};
    vars[A_NONE] = (variant_t){.fn = run_acquire, .ring = none, .ks = all};
    vars[A_ALL] = (variant_t){.fn = run_acquire, .ring = ramping, .ks = all};
    vars[A_ONE] = (variant_t){.fn = run_acquire, .ring = slow, .ks = all};
    vars[A_NEW_NONE] = (variant_t){.fn = run_acquire, .ring = none, .ks = &mine};
    vars[A_NEW_ONE] = (variant_t){.fn = run_acquire, .ring = slow, .ks = &mine};
    vars[A_CLOCK] = (variant_t){.fn = run_clock, .ring = none};
    for (int v = 0; v < NV_ACQ; v++) {
        ring_of[v] = vars[v].ring;
        chring_stats(ring_of[v], &before[v]);
    }
    /* The spill counts below are per ring over the whole run (rings are shared by variants). */
    measure(o, vars, NV_ACQ, ns, "acquire + release, 100 members");
    for (int v = 0; v < NV_ACQ; v++)
        chring_stats(ring_of[v], &after[v]);
    bench_require(chring_member_scale(find_member(slow, newcomer)) < 1.0 &&
                      chring_member_scale(find_member(ramping, newcomer)) < 1.0,
                  "a ramp ended during the run");

    printf("\n## 3. acquire + release with members ramping (ns per operation, 1 thread, %u x 160,"
           " balance 1.25)\n\n| operation | ns | x no ramp (same keys) | x plain lookup |\n"
           "|---|---|---|---|\n",
           ACQ_MEMBERS);
    for (int v = 0; v < NV_ACQ; v++) {
        double ref = v == A_NEW_ONE                    ? ns[A_NEW_NONE]
                     : (v == A_LOOKUP || v == A_CLOCK) ? NAN
                                                       : ns[A_NONE];
        printf("| %s | %.1f | ", acq_desc[v], ns[v]);
        isnan(ref) ? printf("-") : printf("%.2f", ns[v] / ref);
        printf(" | %.2f |\n", ns[v] / ns[A_LOOKUP]);
        fprintf(csv, "acquire,%s,%u,%.2f\n", acq_names[v], ACQ_MEMBERS, ns[v]);
    }
    {
        uint64_t acq = 0, spills = 0;
        chring_t *seen[3] = {none, ramping, slow};
        for (int i = 0; i < 3; i++) {
            chring_stats_t st;
            chring_stats(seen[i], &st);
            bench_require(st.leases == 0, "leases left outstanding");
        }
        for (int v = A_NONE; v < NV_ACQ; v++)
            if (v == A_NONE || v == A_ALL || v == A_ONE) {
                acq += after[v].acquires - before[v].acquires;
                spills += after[v].spills - before[v].spills;
            }
        printf("\n(%llu acquires on the three rings, %llu spills: one lease at a time, load 0, "
               "so a ramp below 1 still admits)\n",
               (unsigned long long)acq, (unsigned long long)spills);
    }
    keys_free(&others);
    keys_free(&mine);
    chring_free(&none);
    chring_free(&ramping);
    chring_free(&slow);
}

/* ---- 4. chring_set_down flips ------------------------------------------------------------- */

static void flips(const bench_opts_t *o, FILE *csv)
{
    static const unsigned flip_sizes[2] = {100, 10000};
    chring_t *rings[2];
    char(*names[2])[16];
    variant_t vars[8];
    double ns[8];

    for (int z = 0; z < 2; z++) {
        rings[z] = bench_ring(CHRING_PROFILE_HASH64, flip_sizes[z]);
        names[z] = calloc(flip_sizes[z], sizeof *names[z]);
        bench_require(names[z] != NULL, "out of memory");
        for (unsigned i = 0; i < flip_sizes[z]; i++)
            bench_member_name(names[z][i], sizeof names[z][i], i);
        /* What a flip does, checked once: down is seen, up again restores the state. */
        {
            const char *n = names[z][flip_sizes[z] / 2];
            const chring_member_t *m = find_member(rings[z], n);
            chring_stats_t st;
            bench_require(chring_set_down(rings[z], n, 1) == 0 && chring_member_is_down(m) == 1,
                          "chring_set_down(1)");
            chring_stats(rings[z], &st);
            bench_require(st.down == 1, "stats.down after a set down");
            bench_require(chring_set_down(rings[z], n, 0) == 0 && chring_member_is_down(m) == 0,
                          "chring_set_down(0)");
        }
        /* [4z]: flip the same member, [4z+1]: every member in turn, [4z+2], [4z+3]: the name
         * searches alone, likewise. */
        for (int i = 0; i < 4; i++) {
            bool same = i % 2 == 0;
            vars[4 * z + i] =
                (variant_t){.fn = i < 2 ? run_flip : run_find,
                            .ring = rings[z],
                            .names = (const char(*)[16])names[z] + (same ? flip_sizes[z] / 2 : 0),
                            .nnames = same ? 1 : flip_sizes[z]};
        }
    }
    measure(o, vars, 8, ns, "set_down flips");
    for (int z = 0; z < 2; z++) {
        chring_stats_t st;
        static const char *what[4] = {"flip_same_member", "flip_every_member_in_turn",
                                      "name_searches_same_member",
                                      "name_searches_every_member_in_turn"};
        chring_stats(rings[z], &st);
        bench_require(st.down == 0, "a member left down after the flips");
        for (int i = 0; i < 4; i++)
            fprintf(csv, "flip,%s,%u,%.2f\n", what[i], flip_sizes[z], ns[4 * z + i]);
    }
    printf("\n## 4. chring_set_down flip (down then up: two calls), ns per flip\n\n"
           "| | 100 x 160 | 10000 x 160 | 10000 / 100 |\n|---|---|---|---|\n");
    static const char *rows[4] = {
        "flip, the same member each time",
        "flip, every member in turn",
        "its 4 name searches alone (2 x chring_snap_find + chring_snap_weight), same member",
        "its 4 name searches alone, every member in turn",
    };
    for (int i = 0; i < 4; i++)
        printf("| %s | %.1f | %.1f | %.2f |\n", rows[i], ns[i], ns[4 + i], ns[4 + i] / ns[i]);
    for (int i = 0; i < 2; i++)
        printf("| %s, minus its name searches | %.1f | %.1f | %.2f |\n",
               i ? "every member" : "same member", ns[i] - ns[i + 2], ns[4 + i] - ns[6 + i],
               (ns[4 + i] - ns[6 + i]) / (ns[i] - ns[i + 2]));
    for (int z = 0; z < 2; z++) {
        chring_free(&rings[z]);
        free(names[z]);
    }
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    keys_t all;
    FILE *csv;

    bench_parse(argc, argv, &o,
                "chring-bench-health: lookups with members down, acquire with members ramping, "
                "set_down flips",
                NULL);
    bench_print_machine("chring-bench-health");
    printf("# hash64 rings, 160 points per member, 16-byte keys; median of %d interleaved reps "
           "of ~%.0f ms of thread CPU time each\n\n",
           o.reps, o.target_ms);

    all.count = o.quick ? NKEYS / 2 : NKEYS;
    all.keys = bench_keys(all.count, KEYLEN, 0x5eed0001u);
    fill_hashes(&all);
    csv = bench_csv_open(&o, "health.csv", "table,variant,members,ns_per_op");

    lookups(&o, &all, csv);
    acquires(&o, &all, csv);
    flips(&o, csv);

    fclose(csv);
    printf("\n# CSV: %s/health.csv; load average now %.2f\n", o.out_dir, bench_loadavg());
    keys_free(&all);
    return 0;
}
