/* chring-bench-scale: chring against the structures a user would pick instead, from 10 to 100,000
 * members (docs/bench.md §9): lookup cost (throughput and latency), memory, build time, keys moved
 * by one member more or less, the spread of keys (the largest member's share of the key space over
 * the mean: exact for the rings and Maglev, sampled for jump hash), and chring's publish latency
 * alone and in bursts.
 *
 * SPDX-License-Identifier: MIT
 *
 * Ring sizes: 10, 100, 1000, 10,000 members x 160 points and 100,000 x 16 (hash64 profile).  The
 * structures, all in the same run, on the same keys:
 *   chring        chring_snap_enter + chring_snap_lookup + chring_snap_exit
 *   rwlock        the same points (copied out with chring_snap_point), hash64 written inline, a
 *                 branchy binary search behind a pthread_rwlock_t (rdlock per lookup)
 *   branchless    the same points, a branchless binary search, no synchronisation at all
 *   maglev        Maglev (maglev.h) with Envoy's default table of 65537 slots (while there are
 *                 fewer members than slots), and with the table scaled to >= 100 slots per member
 *   jump          jump consistent hash (jump.h) over an array of the members
 *   dram          hash64 of the key, then one load from a random slot of a 64 MiB array, on 4 KiB
 *                 pages and on huge pages: the cost of the hash plus one dependent DRAM miss (with
 *                 and without a TLB miss), the floor a lookup that misses the cache once cannot
 *                 beat
 * Every lookup hashes a 16-byte key with hash64 (FNV-1a 64 + SplitMix64), which the program writes
 * into a buffer on the stack just before the lookup (so the key is in L1, as a key a proxy has just
 * parsed); keys never repeat within a run.  Throughput: key i depends on i only, so the CPU may
 * overlap consecutive lookups.  Latency: key i also depends on the owner the previous lookup
 * returned, so no lookup starts before the previous one has finished.  Before timing, the program
 * checks that chring, rwlock and branchless return the same owners (the same latency chains),
 * that every Maglev member has floor(M / N) or ceil(M / N) slots, and that jump hash moves keys only
 * to the new bucket when the bucket count grows.  Times are the thread's CPU time, medians of
 * --reps interleaved reps (bench_interleaved); publish times are wall and CPU time.
 *
 * Writes scale.csv (long format) and scale_plot.csv (for bench/scale.gp).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "baseline.h"
#include "common.h"
#include "jump.h"
#include "maglev.h"

#define NSIZES 5
static const unsigned size_members[NSIZES] = {10, 100, 1000, 10000, 100000};
static const unsigned size_vnodes[NSIZES] = {160, 160, 160, 160, 16};

#define DRAM_BYTES ((size_t)64 << 20)
#define CHAIN_CHECK_STEPS 20000

enum {
    K_CHRING,
    K_RWLOCK,
    K_BRANCHLESS,
    K_MAGLEV_DEFAULT,
    K_MAGLEV,
    K_JUMP,
    K_DRAM,
    K_DRAM_HUGE,
    NKINDS
};
static const char *kind_names[NKINDS] = {
    "chring",        "rwlock", "branchless",     "maglev_65537",
    "maglev_scaled", "jump",   "hash_dram_miss", "hash_dram_miss_huge"};
static const char *kind_desc[NKINDS] = {
    "chring (enter + lookup + exit)",
    "rwlock + branchy binary search (same points)",
    "branchless binary search, no sync (same points)",
    "Maglev, Envoy's default table (65537)",
    "Maglev, table >= 100 x members (max 5000011)",
    "jump consistent hash",
    "hash + one DRAM miss (64 MiB, 4 KiB pages)",
    "hash + one DRAM miss (64 MiB, huge pages asked for)",
};

/* ---- the structures under test ------------------------------------------------------------- */

typedef struct ctx {
    chring_t *ring;
    const base_ring_t *base;
    pthread_rwlock_t *rw;
    const maglev_t *maglev;
    const bench_backend_t *const *backends; /* jump: bucket -> backend */
    int32_t nbackends;
    const uint64_t *dram;
    uint64_t dram_mask;
    uint64_t next;  /* key counter: keys never repeat, not even between warm-up and timed run */
    uint64_t check; /* sum of the owners returned by the last run */
} ctx_t;

/* Key i: 16 bytes from the counter and, in latency mode, the previous owner. */
static inline void make_key(uint64_t key[2], uint64_t i, uintptr_t previous)
{
    key[0] = (i * 0x9e3779b97f4a7c15ull) ^ (uint64_t)previous;
    key[1] = i;
}

static inline uintptr_t look_chring(ctx_t *c, const uint64_t key[2])
{
    const chring_snap_t *s = chring_snap_enter(c->ring);
    const chring_member_t *m = chring_snap_lookup(s, key, 16);
    chring_snap_exit(c->ring, s);
    return (uintptr_t)m;
}

static inline uintptr_t look_rwlock(ctx_t *c, const uint64_t key[2])
{
    uint64_t h = base_hash64(key, 16);
    pthread_rwlock_rdlock(c->rw);
    const chring_member_t *m = base_owner_branchy(c->base, h);
    pthread_rwlock_unlock(c->rw);
    return (uintptr_t)m;
}

static inline uintptr_t look_branchless(ctx_t *c, const uint64_t key[2])
{
    return (uintptr_t)base_owner_branchless(c->base, base_hash64(key, 16));
}

static inline uintptr_t look_maglev(ctx_t *c, const uint64_t key[2])
{
    return (uintptr_t)maglev_lookup(c->maglev, base_hash64(key, 16));
}

static inline uintptr_t look_jump(ctx_t *c, const uint64_t key[2])
{
    return (uintptr_t)c->backends[jump_consistent_hash(base_hash64(key, 16), c->nbackends)];
}

static inline uintptr_t look_dram(ctx_t *c, const uint64_t key[2])
{
    return (uintptr_t)c->dram[base_hash64(key, 16) & c->dram_mask];
}

/* A throughput and a latency runner for each structure. */
#define DEFINE_RUNNERS(name) \
    static uint64_t run_##name##_thr(void *arg, size_t iters) \
    { \
        ctx_t *c = arg; \
        uint64_t key[2], i0 = c->next; \
        uintptr_t acc = 0; \
        uint64_t t0 = bench_cpu_ns(); \
        for (size_t i = 0; i < iters; i++) { \
            make_key(key, i0 + i, 0); \
            acc += look_##name(c, key); \
        } \
        uint64_t t1 = bench_cpu_ns(); \
        c->next = i0 + iters; \
        c->check = acc; \
        bench_sink += acc; \
        return t1 - t0; \
    } \
    static uint64_t run_##name##_lat(void *arg, size_t iters) \
    { \
        ctx_t *c = arg; \
        uint64_t key[2], i0 = c->next; \
        uintptr_t acc = 0, owner = 0; \
        uint64_t t0 = bench_cpu_ns(); \
        for (size_t i = 0; i < iters; i++) { \
            make_key(key, i0 + i, owner); \
            owner = look_##name(c, key); \
            acc += owner; \
        } \
        uint64_t t1 = bench_cpu_ns(); \
        c->next = i0 + iters; \
        c->check = acc; \
        bench_sink += acc; \
        return t1 - t0; \
    }

DEFINE_RUNNERS(chring)
DEFINE_RUNNERS(rwlock)
DEFINE_RUNNERS(branchless)
DEFINE_RUNNERS(maglev)
DEFINE_RUNNERS(jump)
DEFINE_RUNNERS(dram)

static const bench_fn thr_fns[NKINDS] = {run_chring_thr, run_rwlock_thr, run_branchless_thr,
                                         run_maglev_thr, run_maglev_thr, run_jump_thr,
                                         run_dram_thr,   run_dram_thr};
static const bench_fn lat_fns[NKINDS] = {run_chring_lat, run_rwlock_lat, run_branchless_lat,
                                         run_maglev_lat, run_maglev_lat, run_jump_lat,
                                         run_dram_lat,   run_dram_lat};

/* ---- building ------------------------------------------------------------------------------ */

/* Backends 0 .. count - 1 (names as bench_member_name gives them). */
static bench_backend_t *make_backends(unsigned count)
{
    bench_backend_t *b = calloc(count, sizeof *b);
    bench_require(b != NULL, "out of memory");
    for (unsigned i = 0; i < count; i++) {
        bench_member_name(b[i].name, sizeof b[i].name, i);
        b[i].id = i;
    }
    return b;
}

/* A hash64 ring of backends 0 .. members - 1, vnodes points each, udata = the backend. */
static chring_t *make_ring(bench_backend_t *backends, unsigned members, unsigned vnodes)
{
    chring_config_t cfg;
    chring_t *r = NULL;
    chring_change_t *changes = calloc(members, sizeof *changes);
    int err;
    bench_require(changes != NULL, "out of memory");
    chring_config_default(&cfg);
    cfg.vnodes = vnodes;
    err = chring_new(&r, &cfg);
    bench_require(err == 0, "chring_new: %s", chring_strerror(err));
    for (unsigned i = 0; i < members; i++) {
        changes[i].name = backends[i].name;
        changes[i].weight = 1;
        changes[i].udata = &backends[i];
    }
    err = chring_update(r, changes, members);
    bench_require(err == 0, "chring_update(%u members): %s", members, chring_strerror(err));
    free(changes);
    return r;
}

typedef struct sort_point {
    uint64_t pos;
    uint32_t owner;
    uint32_t index;
} sort_point_t;

static int cmp_sort_point(const void *a, const void *b)
{
    const sort_point_t *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    if (x->owner != y->owner)
        return x->owner < y->owner ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* What a user of a plain sorted array does to build it: every label, every hash, qsort.  Returns
 * the sorted points (the caller frees them). */
static sort_point_t *sorted_build(const bench_backend_t *backends, unsigned members,
                                  unsigned vnodes)
{
    size_t n = (size_t)members * vnodes;
    sort_point_t *pts = malloc(n * sizeof *pts);
    char label[64];
    bench_require(pts != NULL, "out of memory");
    for (unsigned m = 0; m < members; m++)
        for (uint32_t i = 0; i < vnodes; i++) {
            int len = chring_vnode_label(label, sizeof label, backends[m].name, i);
            sort_point_t *p = &pts[(size_t)m * vnodes + i];
            p->pos = base_hash64(label, (size_t)len);
            p->owner = m;
            p->index = i;
        }
    qsort(pts, n, sizeof *pts, cmp_sort_point);
    return pts;
}

static double max_of(const double *v, size_t n)
{
    double m = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (v[i] > m)
            m = v[i];
    return m;
}

static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    return u.ru_minflt;
}

/* AnonHugePages of this process, kB (-1 if unknown). */
static long long anon_huge_kb(void)
{
    char line[256];
    long long kb = -1;
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static void pause_ms(double ms)
{
    struct timespec d = {(time_t)(ms / 1000), (long)(fmod(ms, 1000) * 1e6)};
    nanosleep(&d, NULL);
}

/* ---- results ------------------------------------------------------------------------------- */

typedef struct size_result {
    unsigned members, vnodes;
    size_t points;
    double ns[NKINDS][2]; /* [kind][0: throughput, 1: latency], NAN when not measured */
    /* build, ms of CPU time (median) */
    double build_chring, build_sorted, build_maglev_default, build_maglev, build_jump;
    /* bytes of the lookup structure */
    double mem_chring, mem_sorted, mem_maglev_default, mem_maglev, mem_jump;
    double mem_chring_peak, mem_chring_after_burst, mem_chring_trimmed;
    uint64_t maglev_default_size, maglev_size;
    uint64_t maglev_default_min, maglev_default_max, maglev_min, maglev_max;
    /* keys moved, fractions of the sample: [0] +1 member, [1] -1 member; "elsewhere" = keys
     * whose old and new owners are both other than the member that changed */
    double moved_ring[2], moved_maglev_default[2], elsewhere_maglev_default[2], moved_maglev[2],
        elsewhere_maglev[2], moved_jump[2], elsewhere_jump[2], moved_jump_last;
    double ideal[2];
    size_t jump_keys;
    /* chring publish: alone (pause before each), burst (back to back), wall and CPU ms */
    double alone_wall_med, alone_wall_max, alone_cpu_med, alone_cpu_max, alone_faults;
    double burst_wall_med, burst_wall_max, burst_cpu_med, burst_cpu_max, burst_faults;
    double alone_faults_max, burst_faults_max; /* the most minor faults of one publish */
    int alone_over, burst_over;                /* publishes over 10 ms wall */
    int alone_n, burst_n;
    /* spread of keys: the largest member's share of the key space over the mean share */
    double spread_chring, spread_maglev_default, spread_maglev, spread_jump;
    size_t spread_jump_keys;
} size_result_t;

/* ---- keys moved ---------------------------------------------------------------------------- */

#define NO_OWNER UINT32_MAX

static uint32_t ring_owner_id(const chring_snap_t *s, uint64_t h)
{
    const chring_member_t *m = chring_snap_lookup_hash(s, h);
    return m ? ((const bench_backend_t *)chring_member_udata(m))->id : NO_OWNER;
}

static void ring_owners(chring_t *r, const uint64_t *hashes, size_t n, uint32_t *out)
{
    const chring_snap_t *s = chring_snap_hold(r);
    for (size_t i = 0; i < n; i++)
        out[i] = ring_owner_id(s, hashes[i]);
    chring_snap_put(r, s);
}

/* Fraction of keys whose owner differs; *elsewhere gets the fraction whose old and new owners
 * are both other than `changed`. */
static double moved(const uint32_t *a, const uint32_t *b, size_t n, uint32_t changed,
                    double *elsewhere)
{
    size_t differ = 0, other = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            differ++;
            if (a[i] != changed && b[i] != changed)
                other++;
        }
    if (elsewhere)
        *elsewhere = (double)other / (double)n;
    return (double)differ / (double)n;
}

/* Fraction of Maglev slots (so of keys: the hash is uniform over the slots) whose owner differs
 * between tables a and b of the same size; *elsewhere: those whose old and new owners are both
 * other than `changed`. */
static double maglev_moved(const maglev_t *a, const maglev_t *b, unsigned changed,
                           double *elsewhere)
{
    uint64_t differ = 0, other = 0;
    for (uint64_t i = 0; i < a->size; i++)
        if (a->table[i] != b->table[i]) {
            differ++;
            if (a->table[i]->id != changed && b->table[i]->id != changed)
                other++;
        }
    *elsewhere = (double)other / (double)a->size;
    return (double)differ / (double)a->size;
}

static void measure_moved(size_result_t *res, chring_t *ring, bench_backend_t *backends,
                          size_t nkeys, size_t jump_keys)
{
    unsigned n = res->members, victim = n / 2, newcomer = n;
    uint64_t *hashes = malloc(nkeys * sizeof *hashes);
    uint32_t *base = malloc(nkeys * sizeof *base), *plus = malloc(nkeys * sizeof *plus),
             *minus = malloc(nkeys * sizeof *minus);
    const bench_backend_t **set = malloc((n + 1) * sizeof *set);
    uint64_t key[2];
    int err;

    bench_require(hashes && base && plus && minus && set, "out of memory");
    for (size_t i = 0; i < nkeys; i++) {
        make_key(key, ((uint64_t)1 << 62) + i, 0);
        hashes[i] = base_hash64(key, 16);
    }
    res->ideal[0] = 1.0 / (n + 1);
    res->ideal[1] = 1.0 / n;

    /* The ring: +1 (the newcomer), then -1 (the victim), on the same ring, restored after. */
    const chring_snap_t *before = chring_snap_hold(ring), *after;
    ring_owners(ring, hashes, nkeys, base);
    err = chring_add(ring, backends[newcomer].name, 1, &backends[newcomer]);
    bench_require(err == 0, "chring_add: %s", chring_strerror(err));
    ring_owners(ring, hashes, nkeys, plus);
    after = chring_snap_hold(ring);
    res->moved_ring[0] = chring_snap_moved(before, after); /* exact: the arcs that changed */
    chring_snap_put(ring, after);
    err = chring_remove(ring, backends[newcomer].name);
    bench_require(err == 0, "chring_remove: %s", chring_strerror(err));
    err = chring_remove(ring, backends[victim].name);
    bench_require(err == 0, "chring_remove: %s", chring_strerror(err));
    ring_owners(ring, hashes, nkeys, minus);
    after = chring_snap_hold(ring);
    res->moved_ring[1] = chring_snap_moved(before, after);
    chring_snap_put(ring, after);
    chring_snap_put(ring, before);
    err = chring_add(ring, backends[victim].name, 1, &backends[victim]);
    bench_require(err == 0, "chring_add: %s", chring_strerror(err));
    for (size_t i = 0; i < nkeys; i++) {
        bench_require(base[i] == plus[i] || plus[i] == newcomer,
                      "chring: key %zu moved from %u to %u, not to the new member", i, base[i],
                      plus[i]);
        bench_require(base[i] == minus[i] || base[i] == victim,
                      "chring: key %zu of member %u moved when %u left", i, base[i], victim);
    }

    /* Maglev, both table sizes, the size kept as configured for N members; exact, over the slots. */
    for (int t = 0; t < 2; t++) {
        uint64_t size = t == 0 ? res->maglev_default_size : res->maglev_size;
        double *mv = t == 0 ? res->moved_maglev_default : res->moved_maglev;
        double *el = t == 0 ? res->elsewhere_maglev_default : res->elsewhere_maglev;
        if (size == 0 || size <= n + 1) {
            mv[0] = mv[1] = el[0] = el[1] = NAN;
            continue;
        }
        maglev_t m0, m1, m2;
        for (unsigned i = 0; i <= n; i++)
            set[i] = &backends[i];
        maglev_build(&m0, set, n, size);
        maglev_build(&m1, set, n + 1, size);
        set[victim] = &backends[n - 1]; /* the set without the victim (order does not matter) */
        maglev_build(&m2, set, n - 1, size);
        mv[0] = maglev_moved(&m0, &m1, newcomer, &el[0]);
        mv[1] = maglev_moved(&m0, &m2, victim, &el[1]);
        maglev_free(&m0);
        maglev_free(&m1);
        maglev_free(&m2);
    }

    /* Jump hash, on a larger sample (its moves are known only by sampling): +1 appends bucket n;
     * -1 of the last bucket; -1 of the victim, whose bucket the last backend takes (the array
     * must stay dense). */
    free(hashes);
    free(base);
    free(plus);
    free(minus);
    nkeys = jump_keys;
    hashes = malloc(nkeys * sizeof *hashes);
    base = malloc(nkeys * sizeof *base);
    plus = malloc(nkeys * sizeof *plus);
    minus = malloc(nkeys * sizeof *minus);
    bench_require(hashes && base && plus && minus, "out of memory");
    for (size_t i = 0; i < nkeys; i++) {
        make_key(key, ((uint64_t)1 << 61) + i, 0);
        hashes[i] = base_hash64(key, 16);
    }
    res->jump_keys = nkeys;
    for (size_t i = 0; i < nkeys; i++) {
        int32_t b0 = jump_consistent_hash(hashes[i], (int32_t)n);
        int32_t b1 = jump_consistent_hash(hashes[i], (int32_t)n + 1);
        int32_t bm = jump_consistent_hash(hashes[i], (int32_t)n - 1);
        bench_require(b1 == b0 || b1 == (int32_t)n,
                      "jump: key %zu moved from bucket %d to %d, not to the new bucket %u", i, b0,
                      b1, n);
        base[i] = (uint32_t)b0;
        plus[i] = (uint32_t)b1;
        minus[i] = (uint32_t)bm; /* buckets 0 .. n - 2: the last backend left */
    }
    res->moved_jump[0] = moved(base, plus, nkeys, newcomer, &res->elsewhere_jump[0]);
    res->moved_jump_last = moved(base, minus, nkeys, n - 1, NULL);
    for (size_t i = 0; i < nkeys; i++)
        if (minus[i] == victim)
            minus[i] = n - 1; /* the victim's bucket now holds the last backend */
    res->moved_jump[1] = moved(base, minus, nkeys, victim, &res->elsewhere_jump[1]);

    free(hashes);
    free(base);
    free(plus);
    free(minus);
    free(set);
}

/* Jump hash against the paper's property over small bucket counts: growing from n to n + 1 buckets
 * moves a key only to bucket n, and every bucket is in range. */
static void check_jump_small(void)
{
    uint64_t state = 42;
    for (int k = 0; k < 20000; k++) {
        uint64_t key = bench_splitmix64(&state);
        int32_t prev = jump_consistent_hash(key, 1);
        bench_require(prev == 0, "jump: one bucket gave %d", prev);
        for (int32_t n = 2; n <= 300; n++) {
            int32_t b = jump_consistent_hash(key, n);
            bench_require(b >= 0 && b < n && (b == prev || b == n - 1),
                          "jump: key %d: %d buckets gave %d after %d", k, n, b, prev);
            prev = b;
        }
    }
}

/* ---- chring publish: alone and in bursts --------------------------------------------------- */

static void measure_publish(size_result_t *res, chring_t *ring, bench_backend_t *backends,
                            int alone, int bursts, int burst_len)
{
    const bench_backend_t *nb = &backends[res->members];
    double *wall =
        calloc((size_t)(alone > bursts * burst_len ? alone : bursts * burst_len), sizeof *wall);
    double *cpu =
        calloc((size_t)(alone > bursts * burst_len ? alone : bursts * burst_len), sizeof *cpu);
    double *faults =
        calloc((size_t)(alone > bursts * burst_len ? alone : bursts * burst_len), sizeof *faults);
    bool in = false;
    bench_require(wall && cpu && faults, "out of memory");

    for (int pass = 0; pass < 2; pass++) {
        int count = pass == 0 ? alone : bursts * burst_len;
        for (int i = 0; i < count; i++) {
            int err;
            if (pass == 0)
                pause_ms(10); /* alone: the previous snapshot's grace period has time to end */
            else if (i % burst_len == 0)
                pause_ms(50); /* between bursts; none within one */
            long f0 = minor_faults();
            uint64_t w0 = bench_now_ns(), c0 = bench_cpu_ns();
            err = in ? chring_remove(ring, nb->name) : chring_add(ring, nb->name, 1, (void *)nb);
            uint64_t c1 = bench_cpu_ns(), w1 = bench_now_ns();
            bench_require(err == 0, "publish %s: %s", in ? "remove" : "add", chring_strerror(err));
            in = !in;
            wall[i] = (double)(w1 - w0) / 1e6;
            cpu[i] = (double)(c1 - c0) / 1e6;
            faults[i] = (double)(minor_faults() - f0);
        }
        double wmax = max_of(wall, (size_t)count), cmax = max_of(cpu, (size_t)count);
        double wmed = bench_median(wall, (size_t)count), cmed = bench_median(cpu, (size_t)count);
        double fmed = bench_median(faults, (size_t)count);
        double fmax = max_of(faults, (size_t)count);
        int over = 0;
        for (int i = 0; i < count; i++)
            over += wall[i] > 10.0;
        if (pass == 0) {
            res->alone_wall_med = wmed, res->alone_wall_max = wmax;
            res->alone_cpu_med = cmed, res->alone_cpu_max = cmax;
            res->alone_faults = fmed, res->alone_n = count;
            res->alone_faults_max = fmax, res->alone_over = over;
        } else {
            res->burst_wall_med = wmed, res->burst_wall_max = wmax;
            res->burst_cpu_med = cmed, res->burst_cpu_max = cmax;
            res->burst_faults = fmed, res->burst_n = count;
            res->burst_faults_max = fmax, res->burst_over = over;
        }
    }
    if (in) {
        int err = chring_remove(ring, nb->name);
        bench_require(err == 0, "remove: %s", chring_strerror(err));
    }
    free(wall);
    free(cpu);
    free(faults);
}

/* ---- memory (counting allocator, its own phase) -------------------------------------------- */

/* Installs the counting allocator, builds each ring, counts it (after a build, at the peak of the
 * build, after a burst of back-to-back publishes, after chring_trim), frees it, and restores malloc: the timed phases
 * run on the library's default allocator. */
static void measure_memory(size_result_t *res, int burst_len)
{
    bench_require(chring_set_allocator(&bench_counting_allocator) == 0, "chring_set_allocator");
    for (int z = 0; z < NSIZES; z++) {
        unsigned n = size_members[z];
        bench_backend_t *backends = make_backends(n + 1);
        long long before = bench_counted_settled(), built, after;
        chring_t *ring;
        size_t points;
        bench_counted_reset();
        ring = make_ring(backends, n, size_vnodes[z]);
        {
            const chring_snap_t *s = chring_snap_hold(ring);
            points = chring_snap_points(s);
            chring_snap_put(ring, s);
        }
        res[z].mem_chring_peak = (double)(bench_counted_peak() - before);
        built = bench_counted_settled();
        res[z].mem_chring = (double)(built - before);
        for (int i = 0; i < burst_len; i++) {
            int err = i % 2 ? chring_remove(ring, backends[n].name)
                            : chring_add(ring, backends[n].name, 1, NULL);
            bench_require(err == 0, "publish: %s", chring_strerror(err));
        }
        if (burst_len % 2) {
            int err = chring_remove(ring, backends[n].name);
            bench_require(err == 0, "remove: %s", chring_strerror(err));
        }
        if (bench_counted_peak() - before > res[z].mem_chring_peak)
            res[z].mem_chring_peak = (double)(bench_counted_peak() - before);
        after = bench_counted_settled();
        res[z].mem_chring_after_burst = (double)(after - before);
        bench_require(chring_trim(ring) == 0, "chring_trim");
        res[z].mem_chring_trimmed = (double)(bench_counted_settled() - before);
        res[z].points = points;
        chring_free(&ring);
        bench_require(bench_counted_settled() == before, "%u members: %lld bytes left after free",
                      n, bench_counted_settled() - before);
        free(backends);
        fprintf(stderr, "scale: memory, %u members done\n", n);
    }
    chring_set_allocator(NULL);
}

/* ---- one ring size ------------------------------------------------------------------------- */

static double median_ms(double *v, int n)
{
    return bench_median(v, (size_t)n);
}

static void measure_size(const bench_opts_t *o, size_result_t *res, const uint64_t *dram,
                         const uint64_t *dram_huge, uint64_t dram_mask, size_t moved_keys)
{
    unsigned n = res->members, vnodes = res->vnodes;
    bench_backend_t *backends = make_backends(n + 1);
    const bench_backend_t **bucket = malloc(n * sizeof *bucket);
    const bench_backend_t **set = malloc(n * sizeof *set);
    int build_reps = n >= 10000 ? (o->quick ? 1 : 3) : (o->quick ? 3 : 5);
    double *samples = calloc((size_t)build_reps, sizeof *samples);
    chring_t *ring;
    base_ring_t base;
    maglev_t mg_default = {0}, mg_scaled;
    pthread_rwlock_t rw;
    ctx_t ctx[NKINDS];

    bench_require(bucket && set && samples, "out of memory");
    for (unsigned i = 0; i < n; i++)
        set[i] = &backends[i];
    res->maglev_size = maglev_scaled_size(n);
    res->maglev_default_size = n < MAGLEV_ENVOY_DEFAULT ? MAGLEV_ENVOY_DEFAULT : 0;

    /* Build times (CPU), each structure from nothing. */
    fprintf(stderr, "scale: %u x %u: builds...\n", n, vnodes);
    for (int r = 0; r < build_reps; r++) {
        uint64_t t0 = bench_cpu_ns();
        chring_t *fresh = make_ring(backends, n, vnodes);
        samples[r] = (double)(bench_cpu_ns() - t0) / 1e6;
        chring_free(&fresh);
    }
    res->build_chring = median_ms(samples, build_reps);
    for (int r = 0; r < build_reps; r++) {
        uint64_t t0 = bench_cpu_ns();
        sort_point_t *pts = sorted_build(backends, n, vnodes);
        samples[r] = (double)(bench_cpu_ns() - t0) / 1e6;
        free(pts);
    }
    res->build_sorted = median_ms(samples, build_reps);
    for (int t = 0; t < 2; t++) {
        uint64_t size = t == 0 ? res->maglev_default_size : res->maglev_size;
        if (size == 0) {
            res->build_maglev_default = NAN;
            continue;
        }
        for (int r = 0; r < build_reps; r++) {
            maglev_t m;
            uint64_t t0 = bench_cpu_ns();
            maglev_build(&m, set, n, size);
            samples[r] = (double)(bench_cpu_ns() - t0) / 1e6;
            maglev_free(&m);
        }
        *(t == 0 ? &res->build_maglev_default : &res->build_maglev) =
            median_ms(samples, build_reps);
    }
    for (int r = 0; r < build_reps; r++) {
        uint64_t t0 = bench_cpu_ns();
        for (unsigned i = 0; i < n; i++)
            bucket[i] = &backends[i];
        samples[r] = (double)(bench_cpu_ns() - t0) / 1e6;
        bench_sink += (uintptr_t)bucket[r % n];
    }
    res->build_jump = median_ms(samples, build_reps);

    /* The structures measured below. */
    ring = make_ring(backends, n, vnodes);
    /* Keys moved by one member more or less (checks chring's and jump's guarantees).  First: it
     * removes and re-adds a member, whose member pointer the copies below must hold). */
    fprintf(stderr, "scale: %u x %u: keys moved...\n", n, vnodes);
    measure_moved(res, ring, backends, moved_keys, 16 * moved_keys);
    printf("# %u x %u: +1 member: chring's and jump's moved keys all went to the new member; "
           "-1 member: chring moved only the leaver's keys (%zu keys)\n",
           n, vnodes, moved_keys);
    {
        const chring_snap_t *s = chring_snap_hold(ring);
        sort_point_t *pts = sorted_build(backends, n, vnodes);
        size_t ties = 0;
        base_ring_copy(&base, s);
        bench_require(base.n == (size_t)n * vnodes, "%u members: %zu points, expected %zu", n,
                      base.n, (size_t)n * vnodes);
        /* The user's sorted array is the ring's: same positions, same owners (but at equal
         * positions, where the tie rule may differ). */
        for (size_t i = 0; i < base.n; i++) {
            bool tie = (i > 0 && pts[i - 1].pos == pts[i].pos) ||
                       (i + 1 < base.n && pts[i + 1].pos == pts[i].pos);
            bench_require(pts[i].pos == base.pos[i], "%u members: point %zu differs", n, i);
            ties += tie;
            bench_require(tie || (const bench_backend_t *)chring_member_udata(base.owner[i]) ==
                                     &backends[pts[i].owner],
                          "%u members: owner of point %zu differs", n, i);
        }
        free(pts);
        for (uint64_t i = 0; i < 20000; i++) {
            uint64_t key[2];
            make_key(key, i, 0);
            bench_require(chring_snap_hash(s, key, 16) == base_hash64(key, 16),
                          "inline hash64 differs from the ring's");
        }
        chring_snap_put(ring, s);
        printf("# %u x %u: the sorted array a user builds (labels, hash64, qsort) equals chring's "
               "%zu points (%zu at equal positions)\n",
               n, vnodes, base.n, ties);
    }
    res->mem_sorted = (double)base.n * (sizeof *base.pos + sizeof *base.owner);
    if (res->maglev_default_size) {
        maglev_build(&mg_default, set, n, res->maglev_default_size);
        maglev_slot_counts(&mg_default, n, &res->maglev_default_min, &res->maglev_default_max);
        bench_require(res->maglev_default_max - res->maglev_default_min <= 1,
                      "maglev: slots per member %llu .. %llu",
                      (unsigned long long)res->maglev_default_min,
                      (unsigned long long)res->maglev_default_max);
        res->mem_maglev_default = (double)maglev_bytes(&mg_default);
    } else {
        res->mem_maglev_default = NAN;
    }
    maglev_build(&mg_scaled, set, n, res->maglev_size);
    maglev_slot_counts(&mg_scaled, n, &res->maglev_min, &res->maglev_max);
    bench_require(res->maglev_max - res->maglev_min <= 1, "maglev: slots per member %llu .. %llu",
                  (unsigned long long)res->maglev_min, (unsigned long long)res->maglev_max);
    res->mem_maglev = (double)maglev_bytes(&mg_scaled);
    res->mem_jump = (double)n * sizeof *bucket;
    printf("# %u x %u: Maglev tables of %llu and %llu slots: %llu-%llu and %llu-%llu slots per "
           "member (floor or ceil of M / N)\n",
           n, vnodes, (unsigned long long)res->maglev_default_size,
           (unsigned long long)res->maglev_size, (unsigned long long)res->maglev_default_min,
           (unsigned long long)res->maglev_default_max, (unsigned long long)res->maglev_min,
           (unsigned long long)res->maglev_max);

    /* The spread of keys: exact for the rings (arc shares; the sorted arrays hold the same
     * points) and Maglev (slots), sampled for jump hash (256 keys per member). */
    {
        const chring_snap_t *s = chring_snap_hold(ring);
        double most = 0;
        for (size_t i = 0; i < chring_snap_len(s); i++) {
            double share = chring_member_share(s, chring_snap_member(s, i));
            most = share > most ? share : most;
        }
        res->spread_chring = most * (double)chring_snap_len(s);
        chring_snap_put(ring, s);
        res->spread_maglev_default =
            res->maglev_default_size
                ? (double)res->maglev_default_max * n / (double)res->maglev_default_size
                : NAN;
        res->spread_maglev = (double)res->maglev_max * n / (double)res->maglev_size;
        size_t keys = (size_t)n * 256;
        uint32_t *hits = calloc(n, sizeof *hits);
        bench_require(hits != NULL, "out of memory");
        for (size_t i = 0; i < keys; i++) {
            uint64_t key[2];
            make_key(key, ((uint64_t)1 << 59) + i, 0);
            hits[jump_consistent_hash(base_hash64(key, 16), (int32_t)n)]++;
        }
        uint32_t top = 0;
        for (unsigned i = 0; i < n; i++)
            top = hits[i] > top ? hits[i] : top;
        res->spread_jump = (double)top * n / (double)keys;
        res->spread_jump_keys = keys;
        free(hits);
    }

    /* Lookups: every structure, both modes, one interleaved set. */
    pthread_rwlock_init(&rw, NULL);
    memset(ctx, 0, sizeof ctx);
    for (int k = 0; k < NKINDS; k++) {
        ctx[k].ring = ring;
        ctx[k].base = &base;
        ctx[k].rw = &rw;
        ctx[k].maglev = k == K_MAGLEV_DEFAULT ? &mg_default : &mg_scaled;
        ctx[k].backends = bucket;
        ctx[k].nbackends = (int32_t)n;
        ctx[k].dram = k == K_DRAM_HUGE ? dram_huge : dram;
        ctx[k].dram_mask = dram_mask;
    }
    {
        bench_fn fns[2 * NKINDS];
        void *ctxs[2 * NKINDS];
        size_t iters[2 * NKINDS];
        double ns[2 * NKINDS];
        ctx_t lat[NKINDS]; /* latency contexts: own counters */
        size_t nv = 0;
        int which[2 * NKINDS], mode[2 * NKINDS];

        memcpy(lat, ctx, sizeof lat);
        /* The chain check: the exact rings return the same owners, so their chains agree. */
        for (int k = K_CHRING; k <= K_BRANCHLESS; k++) {
            lat[k].next = 0;
            lat_fns[k](&lat[k], CHAIN_CHECK_STEPS);
            bench_require(lat[k].check == lat[K_CHRING].check,
                          "%u members: latency chain of %s differs from chring's", n,
                          kind_names[k]);
        }
        for (int k = 0; k < NKINDS; k++)
            for (int md = 0; md < 2; md++) {
                if (k == K_MAGLEV_DEFAULT && !res->maglev_default_size) {
                    res->ns[k][md] = NAN;
                    continue;
                }
                fns[nv] = md ? lat_fns[k] : thr_fns[k];
                ctxs[nv] = md ? (void *)&lat[k] : (void *)&ctx[k];
                which[nv] = k;
                mode[nv] = md;
                nv++;
            }
        for (size_t v = 0; v < nv; v++)
            iters[v] = bench_calibrate(fns[v], ctxs[v], o->target_ms, 4096);
        fprintf(stderr, "scale: %u x %u: %zu lookup variants x %d reps...\n", n, vnodes, nv,
                o->reps);
        bench_interleaved(nv, fns, ctxs, iters, o->reps, ns);
        for (size_t v = 0; v < nv; v++)
            res->ns[which[v]][mode[v]] = ns[v];
    }
    pthread_rwlock_destroy(&rw);

    /* chring publish, alone and in bursts. */
    fprintf(stderr, "scale: %u x %u: publish...\n", n, vnodes);
    measure_publish(res, ring, backends, o->quick ? 10 : 3 * o->reps, o->quick ? 2 : 3,
                    o->quick ? 10 : 20);

    if (res->maglev_default_size)
        maglev_free(&mg_default);
    maglev_free(&mg_scaled);
    base_ring_free(&base);
    chring_free(&ring);
    free(samples);
    free(set);
    free(bucket);
    free(backends);
}

/* ---- output -------------------------------------------------------------------------------- */

static void print_header_sizes(const char *first)
{
    printf("| %s |", first);
    for (int z = 0; z < NSIZES; z++)
        printf(" %u x %u |", size_members[z], size_vnodes[z]);
    printf("\n|---|");
    for (int z = 0; z < NSIZES; z++)
        printf("---|");
    printf("\n");
}

static void print_cell(double v, const char *fmt)
{
    if (isnan(v))
        printf(" - |");
    else {
        printf(" ");
        printf(fmt, v);
        printf(" |");
    }
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    size_result_t res[NSIZES];
    uint64_t *dram, *dram_huge;
    size_t dram_n = DRAM_BYTES / sizeof *dram;
    FILE *csv, *plot;
    double load_start;

    bench_parse(argc, argv, &o,
                "chring-bench-scale: chring against the rwlock ring, a branchless search, Maglev "
                "and jump hash, 10 to 100,000 members",
                NULL);
    bench_print_machine("chring-bench-scale");
    load_start = bench_loadavg();
    printf("# lookups: hash64 of a 16-byte key written just before the lookup (in L1); medians "
           "of %d interleaved reps of ~%.0f ms of thread CPU time\n\n",
           o.reps, o.target_ms);
    memset(res, 0, sizeof res);
    for (int z = 0; z < NSIZES; z++) {
        res[z].members = size_members[z];
        res[z].vnodes = size_vnodes[z];
    }

    check_jump_small();
    printf(
        "# jump hash: 20000 keys, 1 .. 300 buckets: each key stays or moves to the new bucket\n");

    measure_memory(res, o.quick ? 10 : 20);

    /* The two floors: 64 MiB of random words on 4 KiB pages (plain malloc, which the kernel's
     * "madvise" THP mode leaves alone) and on huge pages where the kernel grants them. */
    dram = malloc(DRAM_BYTES);
    dram_huge = aligned_alloc((size_t)2 << 20, DRAM_BYTES);
    bench_require(dram != NULL && dram_huge != NULL, "out of memory");
    {
        long long huge0 = anon_huge_kb(), huge1;
        uint64_t state = 7;
        (void)madvise(dram_huge, DRAM_BYTES, MADV_HUGEPAGE);
        for (size_t i = 0; i < dram_n; i++)
            dram[i] = dram_huge[i] = bench_splitmix64(&state);
        huge1 = anon_huge_kb();
        printf(
            "# DRAM floor: the huge-page array got %lld kB of anonymous huge pages (of %zu kB)\n",
            huge1 - huge0, DRAM_BYTES >> 10);
    }
    for (int z = 0; z < NSIZES; z++) {
        measure_size(&o, &res[z], dram, dram_huge, dram_n - 1,
                     o.quick ? (size_t)1 << 15 : (size_t)1 << 17);
        fflush(stdout);
    }
    free(dram);
    free(dram_huge);

    /* Tables. */
    for (int md = 0; md < 2; md++) {
        printf("\n## ns per lookup, %s\n\n",
               md ? "latency (each key depends on the previous answer)"
                  : "throughput (independent keys)");
        print_header_sizes("structure");
        for (int k = 0; k < NKINDS; k++) {
            printf("| %s |", kind_desc[k]);
            for (int z = 0; z < NSIZES; z++)
                print_cell(res[z].ns[k][md], "%.1f");
            printf("\n");
        }
    }
    printf("\n## ratios (same run)\n\n");
    print_header_sizes("ratio");
    {
        static const struct {
            const char *what;
            int a, b, md;
        } ratios[] = {
            {"rwlock / chring, throughput (goal >= 4)", K_RWLOCK, K_CHRING, 0},
            {"rwlock / chring, latency (goal >= 2)", K_RWLOCK, K_CHRING, 1},
            {"chring latency / (hash + one DRAM miss, 4 KiB pages) (goal <= 1.3 at 10,000 x 160)",
             K_CHRING, K_DRAM, 1},
            {"chring latency / (hash + one DRAM miss, huge pages)", K_CHRING, K_DRAM_HUGE, 1},
            {"branchless / chring, throughput", K_BRANCHLESS, K_CHRING, 0},
            {"branchless / chring, latency", K_BRANCHLESS, K_CHRING, 1},
            {"Maglev (scaled) / chring, throughput", K_MAGLEV, K_CHRING, 0},
            {"Maglev (scaled) / chring, latency", K_MAGLEV, K_CHRING, 1},
            {"jump / chring, throughput", K_JUMP, K_CHRING, 0},
            {"jump / chring, latency", K_JUMP, K_CHRING, 1},
        };
        for (size_t i = 0; i < sizeof ratios / sizeof ratios[0]; i++) {
            printf("| %s |", ratios[i].what);
            for (int z = 0; z < NSIZES; z++)
                print_cell(res[z].ns[ratios[i].a][ratios[i].md] /
                               res[z].ns[ratios[i].b][ratios[i].md],
                           "%.2f");
            printf("\n");
        }
    }

    printf("\n## build from nothing, ms of CPU time (median)\n\n");
    print_header_sizes("structure");
    {
        const char *what[] = {"chring (chring_new + chring_update)",
                              "sorted array (labels, hash64, qsort): rwlock and branchless",
                              "Maglev, 65537 slots", "Maglev, scaled table",
                              "jump hash (the array of members)"};
        for (int i = 0; i < 5; i++) {
            printf("| %s |", what[i]);
            for (int z = 0; z < NSIZES; z++) {
                double v[] = {res[z].build_chring, res[z].build_sorted, res[z].build_maglev_default,
                              res[z].build_maglev, res[z].build_jump};
                print_cell(v[i], i == 4 ? "%.4f" : "%.2f");
            }
            printf("\n");
        }
    }

    printf("\n## memory of the lookup structure, bytes per member (bytes per point for the rings)"
           "\n\n");
    print_header_sizes("structure");
/* One row of chring's bytes per point: field of each size's result over its points. */
#define PER_POINT_ROW(label, field)                                                             \
    do {                                                                                       \
        printf("| %s |", (label));                                                            \
        for (int z = 0; z < NSIZES; z++)                                                       \
            print_cell(res[z].field / (double)res[z].points, "%.1f");                         \
    } while (0)
    PER_POINT_ROW("chring, counted by chring_set_allocator: bytes per point", mem_chring);
    printf("\n");
    PER_POINT_ROW("chring: peak during the build and a burst of back-to-back publishes, per point",
                  mem_chring_peak);
    printf("\n");
    PER_POINT_ROW("chring: after the burst, once grace periods ended, per point",
                  mem_chring_after_burst);
    printf("\n");
    PER_POINT_ROW("chring: after the burst and chring_trim (the spare blocks freed), per point",
                  mem_chring_trimmed);
#undef PER_POINT_ROW
    printf("\n| chring, bytes per member |");
    for (int z = 0; z < NSIZES; z++)
        print_cell(res[z].mem_chring / res[z].members, "%.0f");
    printf("\n| sorted array (positions + owners, 16 B per point), bytes per member |");
    for (int z = 0; z < NSIZES; z++)
        print_cell(res[z].mem_sorted / res[z].members, "%.0f");
    printf("\n| Maglev, 65537 slots x 8 B, bytes per member |");
    for (int z = 0; z < NSIZES; z++)
        print_cell(res[z].mem_maglev_default / res[z].members, "%.0f");
    printf("\n| Maglev, scaled table x 8 B, bytes per member |");
    for (int z = 0; z < NSIZES; z++)
        print_cell(res[z].mem_maglev / res[z].members, "%.0f");
    printf("\n| Maglev scaled table size (slots) |");
    for (int z = 0; z < NSIZES; z++)
        print_cell((double)res[z].maglev_size, "%.0f");
    printf("\n| jump hash (an array of member pointers), bytes per member |");
    for (int z = 0; z < NSIZES; z++)
        print_cell(res[z].mem_jump / res[z].members, "%.0f");
    printf("\n");

    printf("\n## keys moved by one member more (+1) or less (-1), %% of sampled keys; "
           "\"elsewhere\": keys moved between two members that did not change\n\n");
    print_header_sizes("structure");
    for (int d = 0; d < 2; d++) {
        printf("| ideal (%s): %s |", d ? "-1" : "+1", d ? "1 / N" : "1 / (N + 1)");
        for (int z = 0; z < NSIZES; z++)
            print_cell(100 * res[z].ideal[d], "%.3f");
        printf("\n| chring and the sorted arrays (same points), %s, exact (chring_snap_moved) |",
               d ? "-1" : "+1");
        for (int z = 0; z < NSIZES; z++)
            print_cell(100 * res[z].moved_ring[d], "%.3f");
        printf("\n| Maglev 65537, %s, exact over the slots (elsewhere) |", d ? "-1" : "+1");
        for (int z = 0; z < NSIZES; z++) {
            if (isnan(res[z].moved_maglev_default[d]))
                printf(" - |");
            else
                printf(" %.3f (%.3f) |", 100 * res[z].moved_maglev_default[d],
                       100 * res[z].elsewhere_maglev_default[d]);
        }
        printf("\n| Maglev scaled, %s, exact over the slots (elsewhere) |", d ? "-1" : "+1");
        for (int z = 0; z < NSIZES; z++)
            printf(" %.3f (%.3f) |", 100 * res[z].moved_maglev[d],
                   100 * res[z].elsewhere_maglev[d]);
        printf("\n| jump, %s, sampled (elsewhere) |",
               d ? "-1 of a member in the middle (the last one takes its bucket)" : "+1");
        for (int z = 0; z < NSIZES; z++)
            printf(" %.3f (%.3f) |", 100 * res[z].moved_jump[d], 100 * res[z].elsewhere_jump[d]);
        printf("\n");
    }
    printf("| jump, -1 of the last bucket, sampled |");
    for (int z = 0; z < NSIZES; z++)
        print_cell(100 * res[z].moved_jump_last, "%.3f");
    printf("\n\n(jump hash sampled on %zu keys; chring's and jump's moves checked key by key on "
           "the samples: +1 moves keys only to the new member, -1 only the leaver's keys)\n",
           res[0].jump_keys);

    printf("\n## spread of keys: the largest member's share of the key space over the mean share"
           "\n\n");
    print_header_sizes("structure");
    printf("| chring, rwlock, branchless (the same points; exact, arc shares) |");
    for (int z = 0; z < NSIZES; z++)
        print_cell(res[z].spread_chring, "%.3f");
    printf("\n| Maglev, 65537 slots (exact, slots) |");
    for (int z = 0; z < NSIZES; z++)
        print_cell(res[z].spread_maglev_default, "%.3f");
    printf("\n| Maglev, scaled table (exact, slots) |");
    for (int z = 0; z < NSIZES; z++)
        print_cell(res[z].spread_maglev, "%.3f");
    printf("\n| jump hash (sampled, 256 keys per member: sampling adds its own spread) |");
    for (int z = 0; z < NSIZES; z++)
        print_cell(res[z].spread_jump, "%.3f");
    printf("\n");

    printf("\n## chring publish of one member (add or remove), ms: alone (10 ms pause before "
           "each) and in bursts (back to back, no pause)\n\n");
    print_header_sizes("publish");
    {
        const char *what[] = {"alone, wall, median",
                              "alone, wall, max",
                              "alone, CPU, median",
                              "alone, CPU, max",
                              "burst, wall, median",
                              "burst, wall, max",
                              "burst, CPU, median",
                              "burst, CPU, max",
                              "minor faults per publish, alone / burst (median)",
                              "minor faults of one publish, alone / burst (max)",
                              "publishes over 10 ms wall, alone / burst"};
        for (int i = 0; i < 11; i++) {
            printf("| %s |", what[i]);
            for (int z = 0; z < NSIZES; z++) {
                const size_result_t *r = &res[z];
                double v[] = {r->alone_wall_med, r->alone_wall_max, r->alone_cpu_med,
                              r->alone_cpu_max,  r->burst_wall_med, r->burst_wall_max,
                              r->burst_cpu_med,  r->burst_cpu_max};
                if (i < 8)
                    print_cell(v[i], "%.3f");
                else if (i == 8)
                    printf(" %.0f / %.0f |", r->alone_faults, r->burst_faults);
                else if (i == 9)
                    printf(" %.0f / %.0f |", r->alone_faults_max, r->burst_faults_max);
                else
                    printf(" %d / %d |", r->alone_over, r->burst_over);
            }
            printf("\n");
        }
        printf("\n(%d publishes alone, %d in bursts of %d; a baseline's publish is its build "
               "above: the sorted array and Maglev rebuild, jump hash appends or renumbers)\n",
               res[0].alone_n, res[0].burst_n, o.quick ? 10 : 20);
    }

    /* CSV. */
    csv = bench_csv_open(&o, "scale.csv", "section,structure,members,vnodes,points,metric,value");
    for (int z = 0; z < NSIZES; z++) {
        const size_result_t *r = &res[z];
#define ROW(section, structure, metric, value) \
    fprintf(csv, "%s,%s,%u,%u,%zu,%s,%.6g\n", section, structure, r->members, r->vnodes, \
            r->points, metric, (double)(value))
        for (int k = 0; k < NKINDS; k++) {
            ROW("lookup", kind_names[k], "ns_throughput", r->ns[k][0]);
            ROW("lookup", kind_names[k], "ns_latency", r->ns[k][1]);
        }
        ROW("build", "chring", "ms_cpu", r->build_chring);
        ROW("build", "sorted_array", "ms_cpu", r->build_sorted);
        ROW("build", "maglev_65537", "ms_cpu", r->build_maglev_default);
        ROW("build", "maglev_scaled", "ms_cpu", r->build_maglev);
        ROW("build", "jump", "ms_cpu", r->build_jump);
        ROW("memory", "chring", "bytes", r->mem_chring);
        ROW("memory", "chring", "peak_bytes", r->mem_chring_peak);
        ROW("memory", "chring", "bytes_after_burst", r->mem_chring_after_burst);
        ROW("memory", "chring", "bytes_after_trim", r->mem_chring_trimmed);
        ROW("memory", "sorted_array", "bytes", r->mem_sorted);
        ROW("memory", "maglev_65537", "bytes", r->mem_maglev_default);
        ROW("memory", "maglev_scaled", "bytes", r->mem_maglev);
        ROW("memory", "maglev_scaled", "slots", r->maglev_size);
        ROW("memory", "jump", "bytes", r->mem_jump);
        ROW("moved", "ideal", "add", r->ideal[0]);
        ROW("moved", "ideal", "remove", r->ideal[1]);
        ROW("moved", "chring", "add", r->moved_ring[0]);
        ROW("moved", "chring", "remove", r->moved_ring[1]);
        ROW("moved", "maglev_65537", "add", r->moved_maglev_default[0]);
        ROW("moved", "maglev_65537", "remove", r->moved_maglev_default[1]);
        ROW("moved", "maglev_65537", "add_elsewhere", r->elsewhere_maglev_default[0]);
        ROW("moved", "maglev_65537", "remove_elsewhere", r->elsewhere_maglev_default[1]);
        ROW("moved", "maglev_scaled", "add", r->moved_maglev[0]);
        ROW("moved", "maglev_scaled", "remove", r->moved_maglev[1]);
        ROW("moved", "maglev_scaled", "add_elsewhere", r->elsewhere_maglev[0]);
        ROW("moved", "maglev_scaled", "remove_elsewhere", r->elsewhere_maglev[1]);
        ROW("moved", "jump", "add", r->moved_jump[0]);
        ROW("moved", "jump", "remove_middle", r->moved_jump[1]);
        ROW("moved", "jump", "remove_middle_elsewhere", r->elsewhere_jump[1]);
        ROW("moved", "jump", "remove_last", r->moved_jump_last);
        ROW("publish", "chring", "alone_wall_ms_median", r->alone_wall_med);
        ROW("publish", "chring", "alone_wall_ms_max", r->alone_wall_max);
        ROW("publish", "chring", "alone_cpu_ms_median", r->alone_cpu_med);
        ROW("publish", "chring", "alone_cpu_ms_max", r->alone_cpu_max);
        ROW("publish", "chring", "burst_wall_ms_median", r->burst_wall_med);
        ROW("publish", "chring", "burst_wall_ms_max", r->burst_wall_max);
        ROW("publish", "chring", "burst_cpu_ms_median", r->burst_cpu_med);
        ROW("publish", "chring", "burst_cpu_ms_max", r->burst_cpu_max);
        ROW("publish", "chring", "alone_minor_faults_median", r->alone_faults);
        ROW("publish", "chring", "burst_minor_faults_median", r->burst_faults);
        ROW("publish", "chring", "alone_minor_faults_max", r->alone_faults_max);
        ROW("publish", "chring", "burst_minor_faults_max", r->burst_faults_max);
        ROW("spread", "chring", "max_share_over_mean", r->spread_chring);
        ROW("spread", "maglev_65537", "max_share_over_mean", r->spread_maglev_default);
        ROW("spread", "maglev_scaled", "max_share_over_mean", r->spread_maglev);
        ROW("spread", "jump", "max_share_over_mean_sampled", r->spread_jump);
        ROW("publish", "chring", "alone_over_10ms", (double)r->alone_over);
        ROW("publish", "chring", "burst_over_10ms", (double)r->burst_over);
#undef ROW
    }
    fclose(csv);
    {
        char header[1024];
        int len = snprintf(header, sizeof header, "members");
        for (int md = 0; md < 2; md++)
            for (int k = 0; k < NKINDS; k++)
                len += snprintf(header + len, sizeof header - (size_t)len, ",%s_%s", kind_names[k],
                                md ? "latency" : "throughput");
        plot = bench_csv_open(&o, "scale_plot.csv", header);
    }
    for (int z = 0; z < NSIZES; z++) {
        fprintf(plot, "%u", res[z].members);
        for (int md = 0; md < 2; md++)
            for (int k = 0; k < NKINDS; k++)
                fprintf(plot, ",%.2f", res[z].ns[k][md]);
        fprintf(plot, "\n");
    }
    fclose(plot);
    printf("\n# CSV: %s/scale.csv, %s/scale_plot.csv; load average %.2f at the start, %.2f now\n",
           o.out_dir, o.out_dir, load_start, bench_loadavg());
    return 0;
}
