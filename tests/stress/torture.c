/* chring torture test: readers on every core against a writer churning the membership.
 *
 * SPDX-License-Identifier: MIT
 *
 *   chring-torture [SECONDS]      (default: $CHRING_TORTURE_SECONDS, else 10)
 *
 * Environment: CHRING_TORTURE_SECONDS (run time), CHRING_TORTURE_THREADS (readers; default the
 * number of online cores, at least 2), CHRING_TORTURE_SEED (PRNG seed; default from the clock,
 * printed so a failing run can be repeated with the same choices), CHRING_TORTURE_M_SLACK (extra
 * error allowed in the ring total m of hot epochs, default 0: see hot_bound(); a large value
 * looks past a known m problem to test everything else), CHRING_TORTURE_VNODES (points per unit
 * of weight, default the library's 160; 4000 makes rings of 65,536 points and more, which take
 * the line index of docs/design.md §4.1).
 *
 * A plain main() program (not Criterion) so that it runs under ThreadSanitizer.  It uses only
 * the public header, like any user.  What it proves, and how:
 *
 *   - Lifetime (docs/design.md §4).  Every member's udata is a test-owned object with a validity
 *     word that the retire callback poisons.  Under a sanitizer half of the retired objects are
 *     freed at once (so ASan/TSan see any later access as a use after free); the other half stay
 *     poisoned until the end (so the validity word catches a premature retire even without a
 *     sanitizer).  Readers check chring_snap_check(), chring_member_check(), the validity word and
 *     every field they read (name non-empty and equal to the udata's copy, weight in range, load
 *     sane) for every member they meet: inside read sections, on held snapshots outside read
 *     sections, and on leases kept across many publishes (released later, often after their member
 *     was removed; some taken with chring_acquire_member on a key's second replica or on a member
 *     of a held snapshot that may have left the ring long ago).  retire must run exactly once per
 *     member (counted per udata), never for a member still in the ring, and for every member ever
 *     added by the time chring_free() returns.
 *   - Load accounting (docs/design.md §3).  At quiescent checkpoints (every thread parked on a
 *     barrier, no acquire or release in flight) the ring's outstanding total chring_leases() and
 *     every member's load must equal the leases the threads hold; no load may ever read above 2^31
 *     (a negative counter).  At the end both are 0.
 *   - Strict admission.  In "hot" epochs the membership is frozen and every reader acquires the
 *     same key, so the owner fills up and spills; see hot_bound() for the bound checked there.
 *   - The writer checks its own side after every call: the published membership (names, udata,
 *     weights) equals the intended one, every changing call publishes exactly once, a call that
 *     changes nothing or fails publishes nothing, an existing member's udata is never replaced.
 *   - Retries that keep the bound (chring_acquire_skip in include/chring.h).  Readers retry with
 *     chring_acquire_skip, passing over the member they just got (a "failed backend") and
 *     sometimes the key's owner too: the member chosen is never one of those skipped; in hot
 *     epochs the retries take part in the bound checked there (admission stays strict).
 *     stats.retries counts them exactly.
 *   - Health and warm-up (docs/design.md §3, "Health and warm-up").  A flipper thread sets
 *     members down and up (at most 2 names down at once, so a ring of >= 3 members always has one
 *     up) in health epochs, and admission ramps (constant: ms 0 or from = to; timed: 1 to 50 ms)
 *     in health and hot epochs, while the readers acquire, retry and look up and the writer
 *     publishes and retires.  The flags are read during a walk, so what a reader may assert
 *     depends on what changed meanwhile: each set_down is bracketed by a per-name and a global
 *     sequence number (odd while the call runs).  An acquire, a retry or a lookup never returns a
 *     member that is down now while its name's sequence did not move across the call (down at
 *     the start and at the end, and not flipped in between: down throughout); with the global
 *     sequence unchanged a lookup is never NULL, an acquire never -ENOENT, a retry -ENOENT only
 *     with 2 names down, lookup_n returns exactly min(n, members up) members, none down, and a
 *     bounded lookup with zero loads is the plain owner.  chring_acquire_member takes a member
 *     that is down.  Effective weights (docs/design.md §3): a ramp scales its member's weight in
 *     E too, so it raises the others' capacities; in hot epochs only the rampable slots
 *     (RAMPABLE) ramp, and the hot bound below divides by E_min, the weight of the others.  After
 *     every hot and health epoch, with the readers parked, the coordinator freezes each member's
 *     scale (a constant ramp at its current value) and acquires alone: no saturation may happen
 *     then (saturations need concurrency) unless every member up is at scale 0.  Between epochs the coordinator sets every member up at scale 1 again; readers put
 *     held snapshots on entering and leaving a health epoch, so the other epochs' checks see no
 *     member down.
 *   - Reported load (chring_report_load, docs/design.md §3).  A reporter thread reports random
 *     loads on members of a held snapshot (some of them gone by then: -ENOENT) in churn and
 *     health epochs, concurrently with every acquire, retry, release and publish; reports expire
 *     after REPORT_TTL_MS.  What a member's stats count is never below its leases; stats.reports
 *     counts the reports recorded.  Before a hot epoch the coordinator reports 0 on every member
 *     (then the counted m must equal the leases), so the hot bound stays the leases' bound.
 *   - fork() (the fork() paragraph of include/chring.h).  A few times per run
 *     (CHRING_TORTURE_FORKS, default 3; 0 under ThreadSanitizer, see DEFAULT_FORKS) a reader forks
 *     while the other threads read, acquire and publish.  The child (only the forking thread)
 *     must, within an alarm() bound, publish (add, remove), read, acquire (plain and with skip),
 *     release, put its held snapshot and chring_free the ring, with the leases of the threads it
 *     does not have still counted and the member it added retired exactly once; it exits 0, and
 *     the parent checks the status (a hang is SIGALRM).
 *
 * Any violation prints one line starting with "torture: FAIL" and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include "chring.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#ifndef UNDER_SANITIZER
#define UNDER_SANITIZER 0
#endif
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

/* ---------------------------------------------------------------------------------------------
 * Parameters
 * ------------------------------------------------------------------------------------------- */

#define NSLOTS 24     /* member names the writer draws from */
static uint32_t vnodes = CHRING_DEFAULT_VNODES; /* points per unit of weight (main) */
#define MIN_MEMBERS 3 /* the writer never shrinks the ring below this */
#define MAX_WEIGHT 4  /* weights are 1..MAX_WEIGHT */
#define K_CHURN 8     /* leases a reader keeps outstanding in churn epochs */
#define K_HOT 16      /* ... in hot epochs */
#define MAX_LEASES 32 /* per-thread lease slots (>= K_HOT) */
#define MAX_THREADS 256
#define MAX_IDS (1u << 22) /* udata objects (members ever created) */
#define CHURN_MS 120       /* length of a churn epoch */
#define HOT_MS 40          /* length of a hot epoch */
#define BALANCE 1.25
#define HOT_KEY "the-hot-key"

#define MAGIC_LIVE 0x4c4956454d454d42ull /* "LIVEMEMB" */
#define MAGIC_DEAD 0xdeadbeefdeadbeefull

enum {
    ST_IN_RING = 0,
    ST_REMOVING = 1,
    ST_FREEING = 2
};

/* The test's per-member object (a member's udata). */
typedef struct udata {
    _Atomic uint64_t magic; /* MAGIC_LIVE until retired, then MAGIC_DEAD */
    _Atomic int state;      /* ST_*: set by the writer before the call that may retire it */
    uint32_t id;
    uint32_t namelen;
    char name[CHRING_NAME_MAX + 1];
} udata_t;

/* A udata handed to calls where the library must NOT take it (chring_add of an existing member,
 * sync of a kept member, a failing batch).  Seeing it as a member's udata, or retiring it, is a
 * violation. */
/* How often the dummy came back through retire, and how often the writer expected it to. */
static atomic_uint_fast64_t dummy_returned;
static uint64_t dummy_expected;

/* The dummies in a batch: each is a udata the call does not keep. */
static uint64_t count_dummies(const chring_change_t *ch, unsigned n);

static udata_t dummy_udata = {
    .magic = MAGIC_LIVE, .state = ST_IN_RING, .id = UINT32_MAX, .namelen = 5, .name = "dummy"};

static _Atomic(unsigned char) *retire_count; /* per udata id */
static _Atomic(udata_t *) *udata_ptr;        /* per udata id; NULL once freed */
static _Atomic uint32_t next_id;
static _Atomic uint64_t retires_total;
static bool free_retired = UNDER_SANITIZER;
/* Set in a fork child: retires there are counted, not checked against the parent's states. */
static volatile int in_child;
static uint64_t child_retires;

/* ---------------------------------------------------------------------------------------------
 * Failure reporting
 * ------------------------------------------------------------------------------------------- */

static _Atomic int failing;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    /* Only the first failing thread prints; the others wait to be ended by _exit. */
    if (atomic_exchange(&failing, 1)) {
        for (;;)
            pause();
    }
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "torture: FAIL %s\n", buf);
    fflush(stderr);
    fflush(stdout);
    _exit(1);
}

#define CHECK(cond, ...) \
    do { \
        if (!(cond)) \
            fail(__VA_ARGS__); \
    } while (0)

/* ---------------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: a per-thread generator. */
static inline uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static inline uint64_t splitmix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void slot_name(char *buf, size_t cap, unsigned slot)
{
    /* Names of different lengths (3 to 250 bytes) so that name handling is exercised too. */
    unsigned pad = (slot * 37u) % 60u;
    if (slot % 8 == 7)
        pad = 245;
    int n = snprintf(buf, cap, "m%02u", slot);
    for (unsigned i = 0; i < pad && (size_t)n + 1 < cap; i++)
        buf[n++] = (char)('a' + (slot + i) % 26);
    buf[n] = '\0';
}

/* ---------------------------------------------------------------------------------------------
 * The retire callback and udata objects
 * ------------------------------------------------------------------------------------------- */

static udata_t *udata_new(const char *name)
{
    uint32_t id = atomic_fetch_add(&next_id, 1);
    CHECK(id < MAX_IDS, "out of udata ids (raise MAX_IDS)");
    udata_t *u = calloc(1, sizeof *u);
    CHECK(u != NULL, "out of memory");
    atomic_init(&u->magic, MAGIC_LIVE);
    atomic_init(&u->state, ST_IN_RING);
    u->id = id;
    u->namelen = (uint32_t)strlen(name);
    memcpy(u->name, name, u->namelen + 1);
    atomic_store(&udata_ptr[id], u);
    return u;
}

static void on_retire(void *ud, void *ctx)
{
    (void)ctx;
    udata_t *u = ud;
    CHECK(u != NULL, "retire called with a NULL udata");
    if (in_child) {
        /* The child of a fork: its only thread retires; the parent's bookkeeping of states is a
         * copy as of the fork, so only "never twice" is checked (the validity word). */
        if (u != &dummy_udata) {
            CHECK(atomic_load_explicit(&u->magic, memory_order_relaxed) == MAGIC_LIVE,
                  "fork child: retire of a udata already retired (#%u)", u->id);
            atomic_store_explicit(&u->magic, MAGIC_DEAD, memory_order_relaxed);
        }
        child_retires++;
        return;
    }
    if (u == &dummy_udata) {
        /* The dummy is passed only for members that exist already: a successful call hands it
         * back before it returns, a failed one never (docs/design.md §4).  The writer counts
         * what it expects; writer_verify compares after every step. */
        atomic_fetch_add(&dummy_returned, 1);
        return;
    }
    uint64_t magic = atomic_load_explicit(&u->magic, memory_order_relaxed);
    CHECK(magic == MAGIC_LIVE,
          "retire of a udata whose validity word is %#" PRIx64 " (retired twice, or not a udata)",
          magic);
    CHECK(u->id < MAX_IDS, "retire: udata id %u out of range", u->id);
    unsigned prev = atomic_fetch_add(&retire_count[u->id], 1);
    CHECK(prev == 0, "member %s (udata #%u) retired twice", u->name, u->id);
    int st = atomic_load(&u->state);
    CHECK(st != ST_IN_RING, "member %s (udata #%u) retired while it is still in the ring", u->name,
          u->id);
    atomic_store_explicit(&u->magic, MAGIC_DEAD, memory_order_relaxed);
    atomic_fetch_add(&retires_total, 1);
    if (free_retired && u->id % 2 == 0) {
        atomic_store(&udata_ptr[u->id], NULL);
        free(u);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Threads and shared state
 * ------------------------------------------------------------------------------------------- */

typedef struct held_lease {
    chring_lease_t lease;
    udata_t *udata; /* the member's udata at acquire time */
    uint64_t acquired_version;
} held_lease_t;

typedef struct thread {
    int index;
    pthread_t tid;
    uint64_t seed;
    /* leases: a FIFO of `count` entries starting at `head` */
    held_lease_t leases[MAX_LEASES];
    unsigned head, count;
    const chring_snap_t *held_snap; /* a snapshot kept with chring_snap_hold */
    unsigned held_age;
    uint64_t last_version;
    /* counters */
    uint64_t lookups, bounded, bounded_checked, lookup_n, acquires, releases, holds, nested,
        lookup_names, hot_acquires, member_checks, late_releases, acquire_members,
        acquire_member_enoent, retries, forks, health_steps, health_acquires, health_on_down,
        health_unstable, health_enoent;
    uint64_t max_hot_load_over; /* largest (load - bound) seen, for the report (<= 0 is fine) */
    char pad[64];
} thread_t;

enum {
    EPOCH_CHURN = 0,
    EPOCH_HOT = 1,
    EPOCH_HEALTH = 2
};

/* Bound per member for the hot epoch, filled by the coordinator while every thread is parked. */
typedef struct hot_entry {
    const chring_member_t *member;
    uint64_t bound;
    uint32_t weight;
} hot_entry_t;

static chring_t *ring;
static int nthreads;
static thread_t *threads;
static pthread_barrier_t barrier;
static _Atomic int epoch_stop; /* 1: readers park at the barrier */
static _Atomic int run_over;   /* 1: readers finish after the barrier */
static int epoch_kind;         /* written by the coordinator while all threads are parked */
static uint64_t hot_saturated_start;
static hot_entry_t hot_table[NSLOTS];
static size_t hot_table_len;
static uint64_t hot_m_bound, hot_total_weight;
static uint64_t max_m_seen; /* largest chring_leases() the writer read in hot epochs */
static uint64_t m_slack;    /* CHRING_TORTURE_M_SLACK */

/* Health (the flipper thread).  flip_mode says what it may do now: FLIP_NONE (churn epochs and
 * while the coordinator resets), FLIP_RAMPS (hot epochs), FLIP_ALL (health epochs).  flip_lock
 * makes one flipper action and the coordinator's reset exclusive.  name_seq[i] and flip_seq are
 * odd while a chring_set_down on slot i's name runs. */
enum {
    FLIP_NONE = 0,
    FLIP_RAMPS = 1,
    FLIP_ALL = 2
};
#define MAX_DOWN 2 /* names the flipper keeps down at once (MIN_MEMBERS - 1) */
static pthread_mutex_t flip_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int flip_mode;
static _Atomic uint64_t flip_seq;
static _Atomic uint64_t name_seq[NSLOTS];
static _Atomic int names_down; /* names the flipper set down and did not set up since */
static bool flip_down[NSLOTS]; /* the flipper's own view, under flip_lock */
static uint64_t flips_down, flips_up, flips_enoent, ramps_const, ramps_timed, quiesces;

/* ---------------------------------------------------------------------------------------------
 * Checks readers run on everything they meet
 * ------------------------------------------------------------------------------------------- */

static uint64_t load_limit(void)
{
    /* Admitted leases are at most every thread's lease slots; the counter may in addition show
     * one tentative increment per thread in flight (an acquire that undoes a full member). */
    return (uint64_t)nthreads * (MAX_LEASES + 2);
}

static udata_t *check_member(const chring_member_t *m, const char *where)
{
    CHECK(m != NULL, "%s: NULL member", where);
    CHECK(chring_member_check(m) == 0,
          "%s: chring_member_check(%p) failed: a poisoned "
          "(freed) member",
          where, (const void *)m);
    udata_t *u = chring_member_udata(m);
    CHECK(u != NULL, "%s: member %p has a NULL udata", where, (const void *)m);
    CHECK(u != &dummy_udata,
          "%s: member %p carries the dummy udata: an existing member's udata "
          "was replaced",
          where, (const void *)m);
    uint64_t magic = atomic_load_explicit(&u->magic, memory_order_relaxed);
    CHECK(magic == MAGIC_LIVE,
          "%s: member %p's udata (#%u, %s) is %s: the member was retired "
          "while still reachable",
          where, (const void *)m, u->id, u->name,
          magic == MAGIC_DEAD ? "poisoned" : "garbage (torn read)");
    CHECK(atomic_load_explicit(&retire_count[u->id], memory_order_relaxed) == 0,
          "%s: member %s (udata #%u) was already retired", where, u->name, u->id);
    const char *name = chring_member_name(m);
    CHECK(name != NULL && name[0] != '\0', "%s: member %p has an empty or NULL name", where,
          (const void *)m);
    CHECK(strlen(name) == u->namelen && memcmp(name, u->name, u->namelen) == 0,
          "%s: member name \"%.40s\" differs from its udata's \"%.40s\"", where, name, u->name);
    uint32_t w = chring_member_weight(m);
    CHECK(w >= 1 && w <= MAX_WEIGHT, "%s: member %s has weight %u", where, u->name, w);
    uint64_t load = chring_member_load(m);
    CHECK(load < (1ull << 31), "%s: member %s's load reads %" PRIu64 " (a negative counter)", where,
          u->name, load);
    CHECK(load <= load_limit(),
          "%s: member %s's load %" PRIu64 " exceeds every lease the "
          "threads can hold (%" PRIu64 ")",
          where, u->name, load, load_limit());
    return u;
}

static void check_snap(const chring_snap_t *s, const char *where)
{
    CHECK(s != NULL, "%s: NULL snapshot", where);
    CHECK(chring_snap_check(s) == 0,
          "%s: chring_snap_check failed on snapshot %p (version %" PRIu64 ")", where,
          (const void *)s, chring_snap_version(s));
    size_t n = chring_snap_len(s);
    CHECK(n >= MIN_MEMBERS && n <= NSLOTS, "%s: snapshot has %zu members", where, n);
    CHECK(chring_snap_points(s) >= n, "%s: snapshot has %zu points for %zu members", where,
          chring_snap_points(s), n);
}

/* Every member of s, in name order, valid and consistent. */
static void check_snap_members(const chring_snap_t *s, const char *where)
{
    size_t n = chring_snap_len(s);
    const char *prev = NULL;
    size_t points = 0;
    for (size_t i = 0; i < n; i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        check_member(m, where);
        const char *name = chring_member_name(m);
        if (prev) {
            size_t lp = strlen(prev), ln = strlen(name);
            int c = memcmp(prev, name, lp < ln ? lp : ln);
            CHECK(c < 0 || (c == 0 && lp < ln), "%s: members not sorted by name at %zu", where, i);
        }
        prev = name;
        CHECK(chring_snap_find(s, name) == m, "%s: chring_snap_find(%.40s) is not member %zu",
              where, name, i);
        uint32_t sw = chring_snap_weight(s, m);
        CHECK(sw >= 1 && sw <= MAX_WEIGHT, "%s: snapshot weight %u of %.40s", where, sw, name);
        size_t mp = chring_snap_member_points(s, m);
        CHECK(mp == (size_t)sw * vnodes, "%s: %.40s has %zu points at weight %u",
              where, name, mp, sw);
        points += mp;
        double share = chring_member_share(s, m);
        CHECK(share >= 0.0 && share <= 1.0, "%s: share %g", where, share);
    }
    CHECK(chring_snap_member(s, n) == NULL, "%s: chring_snap_member past the end is not NULL",
          where);
    CHECK(points == chring_snap_points(s), "%s: members' points %zu != snapshot points %zu", where,
          points, chring_snap_points(s));
}

/* Every point of s in ring order: positions non-decreasing, each point's member valid and in s. */
static void check_points(const chring_snap_t *s)
{
    size_t n = chring_snap_points(s);
    uint64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t pos;
        const chring_member_t *m;
        CHECK(chring_snap_point(s, i, &pos, &m) == 0, "chring_snap_point(%zu) of %zu failed", i, n);
        CHECK(i == 0 || pos >= prev, "point %zu at %#" PRIx64 " comes after %#" PRIx64, i, pos,
              prev);
        CHECK(m != NULL && chring_snap_weight(s, m) >= 1,
              "point %zu's member is not in the "
              "snapshot",
              i);
        prev = pos;
    }
    CHECK(chring_snap_point(s, n, NULL, NULL) == -ERANGE, "chring_snap_point past the end");
}

/* Caller-supplied loads for chring_snap_lookup_bounded: a pure function of the member (its udata
 * id) and a per-call salt, so that the test can recompute the walk. */
typedef struct fake_loads {
    uint64_t salt;
    unsigned calls;
} fake_loads_t;

static uint64_t fake_load(const chring_member_t *m, void *ctx)
{
    fake_loads_t *f = ctx;
    f->calls++;
    const udata_t *u = chring_member_udata(m);
    return splitmix(u->id ^ f->salt) % 9;
}

/* Recomputes the walk of docs/design.md §3 with the same loads and compares it with the
 * library's answer. */
static void check_bounded(const chring_snap_t *s, const void *key, size_t len,
                          const chring_member_t *got, uint64_t salt)
{
    const chring_member_t *order[NSLOTS];
    size_t n = chring_snap_len(s);
    size_t k = chring_snap_lookup_n(s, key, len, order, NSLOTS);
    CHECK(k == n, "lookup_n(all) returned %zu of %zu members", k, n);
    fake_loads_t f = {.salt = salt};
    uint64_t total = 0, total_weight = 0;
    for (size_t i = 0; i < n; i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        total += fake_load(m, &f);
        total_weight += chring_snap_weight(s, m);
    }
    const chring_member_t *want = NULL;
    for (size_t i = 0; i < k && !want; i++) {
        uint64_t cap =
            chring_capacity_weighted(total, chring_snap_weight(s, order[i]), total_weight, BALANCE);
        if (fake_load(order[i], &f) < cap)
            want = order[i];
    }
    CHECK(want != NULL, "bounded walk found no member below capacity (m=%" PRIu64 ")", total);
    CHECK(got == want,
          "lookup_bounded chose %.40s, the walk of docs/design.md §3 gives %.40s (m=%" PRIu64
          ", W=%" PRIu64 ")",
          chring_member_name(got), chring_member_name(want), total, total_weight);
}

static uint64_t zero_load(const chring_member_t *m, void *ctx)
{
    (void)m;
    (void)ctx;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Leases
 * ------------------------------------------------------------------------------------------- */

static void lease_release_oldest(thread_t *t, bool twice)
{
    held_lease_t *h = &t->leases[t->head];
    /* The lease keeps its member valid, also long after the member left the ring. */
    udata_t *u = check_member(h->lease.member, "lease before release");
    CHECK(u == h->udata, "lease's member now has udata #%u, at acquire it had #%u", u->id,
          h->udata->id);
    if (atomic_load_explicit(&u->state, memory_order_relaxed) != ST_IN_RING)
        t->late_releases++; /* its member has left the ring (or is leaving) */
    chring_release(ring, &h->lease);
    CHECK(h->lease.member == NULL, "chring_release did not clear the lease");
    if (twice)
        chring_release(ring, &h->lease); /* a cleared lease: a no-op (checked at checkpoints) */
    t->head = (t->head + 1) % MAX_LEASES;
    t->count--;
    t->releases++;
}

static void lease_release_all(thread_t *t)
{
    while (t->count > 0)
        lease_release_oldest(t, false);
    t->head = 0;
}

static held_lease_t *lease_slot(thread_t *t)
{
    return &t->leases[(t->head + t->count) % MAX_LEASES];
}

/* The bound of a hot epoch.
 *
 * In a hot epoch the membership is frozen (same members, same weights) and every reader acquires
 * the same key, releasing its oldest lease first once it holds K_HOT.  So while a thread starts an
 * acquire it holds at most K_HOT - 1 leases, and at any time the leases outstanding plus those
 * being acquired number at most T * K_HOT (T readers).  docs/design.md §3 lets the ring total m
 * that an acquire reads be approximate while acquires and releases are in flight, off by at most
 * the T operations in flight: every acquire sees m <= M = T * (K_HOT + 1).  Capacity grows with
 * m, so every admitting thread computed cap_j <= B_j = capacity_weighted(M, w_j, W, c).  The writer
 * checks that premise directly: chring_leases(), the same sum acquire reads, never exceeds M in a
 * hot epoch (CHRING_TORTURE_M_SLACK adds to M, to look past a broken m while testing the rest).
 *
 * Claim: at any moment, the leases held on member j that were admitted (not saturated) number
 * A_j <= B_j.  Take the last admitted of them: when it was admitted, the other A_j - 1 were
 * already counted on j and are still held, so the counter it saw was >= A_j - 1 (the counter
 * is never below the admitted leases: tentative increments only add to it), and strict admission
 * says the counter was below its cap <= B_j.  So A_j - 1 < B_j.  Saturated acquires (every member
 * looked full through races) may land anywhere: each can add one lease beyond the bound, so the
 * checks allow S, the saturated events counted since the epoch began.
 *
 *   - at a quiescent checkpoint: held leases on j (== load_j) <= B_j + S;
 *   - right after an acquire on j: the counter may also hold tentative increments of the other
 *     T - 1 threads, so load_j <= B_j + S + (T - 1).
 */
static const hot_entry_t *hot_entry(const chring_member_t *m)
{
    for (size_t i = 0; i < hot_table_len; i++)
        if (hot_table[i].member == m)
            return &hot_table[i];
    fail("hot epoch: acquire chose member %p that is not in the frozen snapshot", (const void *)m);
}

static uint64_t hot_bound(const chring_member_t *m)
{
    return hot_entry(m)->bound;
}

/* The terms of a hot bound, for failure messages. */
static const char *hot_terms(const chring_member_t *m, char *buf, size_t cap)
{
    const hot_entry_t *e = hot_entry(m);
    snprintf(buf, cap,
             "B = capacity_weighted(M = %" PRIu64 ", w = %u, E_min = %" PRIu64 ", c = %.2f)"
             " = %" PRIu64 "; %d readers x %d leases; chring_leases now %" PRIu64,
             hot_m_bound, e->weight, hot_total_weight, BALANCE, e->bound, nthreads, K_HOT,
             chring_leases(ring));
    return buf;
}

static uint64_t saturated_now(void)
{
    chring_stats_t st;
    chring_stats(ring, &st);
    return st.saturated;
}

/* ---------------------------------------------------------------------------------------------
 * Reader thread
 * ------------------------------------------------------------------------------------------- */

static void make_key(uint64_t *s, unsigned char *key, size_t *len)
{
    uint64_t r = rnd(s);
    uint64_t v = r % 100000; /* a key space with repeats */
    switch ((r >> 40) % 16) {
    case 0:
        *len = 0; /* the empty key is valid */
        return;
    case 1:
    case 2:
    case 3: *len = (size_t)snprintf((char *)key, 64, "key-%" PRIu64, v); return;
    default:
        memcpy(key, &v, sizeof v);
        *len = sizeof v;
        return;
    }
}

/* The read section of a churn step: every lookup of one key checked against the others.
 * Returns the version of the snapshot it read. */
static uint64_t churn_read(thread_t *t, const unsigned char *key, size_t len, uint64_t r)
{
    const chring_snap_t *s = chring_snap_enter(ring);
    check_snap(s, "read section");
    uint64_t version = chring_snap_version(s);
    CHECK(version >= t->last_version, "snapshot version went back from %" PRIu64 " to %" PRIu64,
          t->last_version, version);
    t->last_version = version;

    const chring_member_t *owner = chring_snap_lookup(s, key, len);
    check_member(owner, "lookup");
    t->lookups++;
    const chring_member_t *by_hash = chring_snap_lookup_hash(s, chring_snap_hash(s, key, len));
    CHECK(by_hash == owner, "lookup_hash disagrees with lookup");

    /* A burst of plain lookups with a lighter check: pressure on the read side, where a missing
     * grace period shows. */
    for (int i = 0; i < 8; i++) {
        uint64_t k = rnd(&t->seed);
        const chring_member_t *m = chring_snap_lookup_hash(s, k);
        CHECK(m != NULL && chring_member_check(m) == 0, "burst lookup: invalid member %p",
              (const void *)m);
        const udata_t *u = chring_member_udata(m);
        CHECK(u != NULL && atomic_load_explicit(&u->magic, memory_order_relaxed) == MAGIC_LIVE,
              "burst lookup: member %p has a retired or garbage udata", (const void *)m);
    }
    t->lookups += 8;
    /* The same pressure through a batch: each owner the single lookup's, on this snapshot. */
    {
        uint64_t hashes[8];
        const chring_member_t *owners[8];
        for (int i = 0; i < 8; i++)
            hashes[i] = rnd(&t->seed);
        CHECK(chring_snap_lookup_hashes(s, hashes, 8, owners) == 8, "lookup_hashes count");
        for (int i = 0; i < 8; i++) {
            check_member(owners[i], "batch lookup");
            CHECK(owners[i] == chring_snap_lookup_hash(s, hashes[i]),
                  "lookup_hashes disagrees with lookup_hash");
        }
        t->lookups += 8;
    }

    if (r % 8 == 0) {
        fake_loads_t f = {.salt = r};
        const chring_member_t *b = chring_snap_lookup_bounded(s, key, len, BALANCE, fake_load, &f);
        check_member(b, "lookup_bounded");
        check_bounded(s, key, len, b, r);
        t->bounded_checked++;
    } else {
        const chring_member_t *b =
            chring_snap_lookup_bounded(s, key, len, BALANCE, zero_load, NULL);
        CHECK(b == owner, "lookup_bounded with all loads 0 differs from lookup");
    }
    t->bounded++;

    if ((r >> 8) % 4 == 0) {
        const chring_member_t *out[4];
        size_t want = 1 + (r >> 16) % 4;
        size_t k = chring_snap_lookup_n(s, key, len, out, want);
        size_t n = chring_snap_len(s);
        CHECK(k == (want < n ? want : n), "lookup_n(%zu) returned %zu", want, k);
        CHECK(out[0] == owner, "lookup_n's first member is not the owner");
        for (size_t i = 0; i < k; i++) {
            check_member(out[i], "lookup_n");
            for (size_t j = 0; j < i; j++)
                CHECK(out[i] != out[j], "lookup_n returned a member twice");
        }
        t->lookup_n++;
    }

    if ((r >> 20) % 64 == 0) {
        check_snap_members(s, "snapshot members");
        uint64_t cap = chring_member_capacity(ring, s, owner);
        CHECK(cap >= 1 && cap < (1ull << 31), "member_capacity %" PRIu64, cap);
        t->member_checks++;
    }

    if ((r >> 26) % 16 == 0) {
        /* Nested read sections see the same snapshot or a newer one. */
        const chring_snap_t *inner = chring_snap_enter(ring);
        check_snap(inner, "nested read section");
        CHECK(chring_snap_version(inner) >= version, "nested section saw an older snapshot");
        check_member(chring_snap_lookup(inner, key, len), "nested lookup");
        chring_snap_exit(ring, inner);
        check_member(owner, "lookup after nested exit");
        t->nested++;
    }
    chring_snap_exit(ring, s);
    return version;
}

/* A lease on a member of a held snapshot, chosen by the caller: the member may have left the ring
 * long ago, the lease must still keep it alive. */
static int lease_held_member(thread_t *t, held_lease_t *h, uint64_t r)
{
    const chring_snap_t *hs = t->held_snap;
    const chring_member_t *m = chring_snap_member(hs, (size_t)(r >> 40) % chring_snap_len(hs));
    int rc = chring_acquire_member(ring, hs, m, &h->lease);
    CHECK(rc == 0, "chring_acquire_member on a held snapshot: %s", chring_strerror(rc));
    CHECK(h->lease.member == m, "chring_acquire_member leased another member");
    t->acquire_members++;
    /* The same member on the current snapshot: -ENOENT if it has left meanwhile. */
    const chring_snap_t *cur = chring_snap_enter(ring);
    if (chring_snap_find(cur, chring_member_name(m)) != m) {
        chring_lease_t none = {NULL, 0, 0};
        int rc2 = chring_acquire_member(ring, cur, m, &none);
        CHECK(rc2 == -ENOENT && none.member == NULL,
              "chring_acquire_member of a member not in the snapshot returned %d", rc2);
        t->acquire_member_enoent++;
    }
    chring_snap_exit(ring, cur);
    return rc;
}

/* A retry on the key's second replica, chosen in a read section. */
static int lease_replica(thread_t *t, held_lease_t *h, const unsigned char *key, size_t len)
{
    const chring_snap_t *cur = chring_snap_enter(ring);
    const chring_member_t *rep[2];
    size_t k = chring_snap_lookup_n(cur, key, len, rep, 2);
    CHECK(k == 2, "lookup_n(2) returned %zu", k);
    int rc = chring_acquire_member(ring, cur, rep[1], &h->lease);
    CHECK(rc == 0, "chring_acquire_member on a replica: %s", chring_strerror(rc));
    CHECK(h->lease.member == rep[1], "chring_acquire_member leased another member");
    chring_snap_exit(ring, cur);
    t->acquire_members++;
    return rc;
}

/* A retry after a failed try: the member just got is passed over (how 3: the key's owner too,
 * which may be another member, or one removed meanwhile: it then matches nothing); the first
 * lease is released, the retry's is kept. */
static int lease_retry(thread_t *t, held_lease_t *h, const unsigned char *key, size_t len,
                       unsigned how)
{
    chring_lease_t first;
    int rc = chring_acquire(ring, key, len, &first);
    CHECK(rc == 0, "chring_acquire (before a retry): %s", chring_strerror(rc));
    check_member(first.member, "lease before a retry");
    const chring_member_t *skip[2] = {first.member, NULL};
    size_t nskip = 1;
    if (how == 3) {
        const chring_snap_t *cur = chring_snap_enter(ring);
        skip[nskip++] = chring_snap_lookup(cur, key, len);
        chring_snap_exit(ring, cur);
    }
    rc = chring_acquire_skip(ring, key, len, skip, nskip, &h->lease);
    CHECK(rc == 0, "chring_acquire_skip over %zu of at least %d members: %s", nskip, MIN_MEMBERS,
          chring_strerror(rc));
    for (size_t i = 0; i < nskip; i++)
        CHECK(h->lease.member != skip[i],
              "chring_acquire_skip chose %.40s, which it was told to skip",
              chring_member_name(h->lease.member));
    chring_release(ring, &first);
    t->acquires++; /* the first try; the retry is counted below */
    t->releases++;
    t->retries++;
    return rc;
}

/* Leases: acquire one about every second step, keep up to K_CHURN outstanding; version is the
 * snapshot's the step read. */
static void churn_lease(thread_t *t, const unsigned char *key, size_t len, uint64_t r,
                        uint64_t version)
{
    if ((r >> 32) % 2 == 0) {
        if (t->count >= K_CHURN)
            lease_release_oldest(t, (r >> 34) % 8 == 0);
        held_lease_t *h = lease_slot(t);
        unsigned how = (unsigned)((r >> 36) % 16);
        int rc;
        if (how == 0 && t->held_snap) {
            rc = lease_held_member(t, h, r);
        } else if (how == 1) {
            rc = lease_replica(t, h, key, len);
        } else if (how == 2 || how == 3) {
            rc = lease_retry(t, h, key, len, how);
        } else {
            rc = chring_acquire(ring, key, len, &h->lease);
            CHECK(rc == 0, "chring_acquire: %s", chring_strerror(rc));
        }
        h->udata = check_member(h->lease.member, "acquired lease");
        h->acquired_version = version;
        t->count++;
        t->acquires++;
    }
}

/* Held snapshots: kept for a few dozen steps, used outside any read section, then put. */
static void churn_held(thread_t *t, const unsigned char *key, size_t len, uint64_t r)
{
    if ((r >> 40) % 32 == 0) {
        if (t->held_snap) {
            const chring_snap_t *hs = t->held_snap;
            check_snap(hs, "held snapshot");
            check_snap_members(hs, "held snapshot members");
            check_member(chring_snap_lookup(hs, key, len), "lookup on held snapshot");
            if ((r >> 45) % 4 == 0)
                check_points(hs);
            /* A diff against the current snapshot, many publishes later. */
            const chring_snap_t *now = chring_snap_enter(ring);
            double moved = chring_snap_moved(hs, now), self = chring_snap_moved(hs, hs);
            CHECK(moved >= 0.0 && moved <= 1.0 && self == 0.0,
                  "chring_snap_moved: %g against the current snapshot, %g against itself", moved,
                  self);
            chring_snap_exit(ring, now);
            chring_snap_put(ring, hs);
            t->held_snap = NULL;
        } else {
            t->held_snap = chring_snap_hold(ring);
            check_snap(t->held_snap, "fresh held snapshot");
            t->holds++;
        }
    }
}

/* A reader's step in a churn epoch: one key looked up every way in a read section, then perhaps
 * a lease, a held snapshot, a lookup in a section of its own. */
static void reader_churn_step(thread_t *t)
{
    unsigned char key[64];
    size_t len;
    uint64_t r = rnd(&t->seed);
    make_key(&t->seed, key, &len);

    uint64_t version = churn_read(t, key, len, r);
    churn_lease(t, key, len, r, version);
    churn_held(t, key, len, r);

    if ((r >> 48) % 128 == 0) {
        char buf[CHRING_NAME_MAX + 1];
        int n = chring_lookup_name(ring, key, len, buf, sizeof buf);
        CHECK(n > 0 && (size_t)n == strlen(buf), "chring_lookup_name returned %d", n);
        t->lookup_names++;
    }
}

/* The slot of a member's name (every member of the ring has one of the slots' names). */
static unsigned slot_of(const chring_member_t *m)
{
    const udata_t *u = chring_member_udata(m);
    char name[CHRING_NAME_MAX + 1];
    for (unsigned i = 0; i < NSLOTS; i++) {
        slot_name(name, sizeof name, i);
        if (strcmp(name, u->name) == 0)
            return i;
    }
    fail("member %.40s has no slot name", u->name);
}

/* A reader's step in a health epoch: the flipper sets members down and up and ramps them while
 * this runs.  `stable` means the global flip sequence did not move across a call (no flag
 * changed: the state the walk read is the state before and after); `still` the same for one
 * member's name. */
static void reader_health_step(thread_t *t)
{
    unsigned char key[64];
    size_t len;
    uint64_t r = rnd(&t->seed);
    make_key(&t->seed, key, &len);
    t->health_steps++;

    uint64_t names0[NSLOTS];
    uint64_t g0 = atomic_load(&flip_seq);
    for (unsigned i = 0; i < NSLOTS; i++)
        names0[i] = atomic_load(&name_seq[i]);
    const chring_snap_t *s = chring_snap_enter(ring);
    check_snap(s, "health: read section");
    size_t n = chring_snap_len(s);
    const chring_member_t *owner = chring_snap_lookup(s, key, len);
    const chring_member_t *out[4];
    size_t want = 1 + (r >> 8) % 4;
    size_t k = chring_snap_lookup_n(s, key, len, out, want);
    const chring_member_t *zero = chring_snap_lookup_bounded(s, key, len, BALANCE, zero_load, NULL);
    /* The flags this step judges by, read before the sequence is read again: with the sequence
     * unchanged they are the flags the walks above read. */
    int owner_down = owner ? chring_member_is_down(owner) : 0, out_down[4];
    for (size_t i = 0; i < k && i < 4; i++)
        out_down[i] = chring_member_is_down(out[i]);
    size_t up = 0;
    for (size_t i = 0; i < n; i++)
        up += chring_member_is_down(chring_snap_member(s, i)) == 0;
    atomic_thread_fence(memory_order_seq_cst); /* the flags read above, before the sequence */
    bool stable = (g0 & 1) == 0 && atomic_load(&flip_seq) == g0;
    if (!stable)
        t->health_unstable++;
    if (owner == NULL) {
        CHECK(!stable,
              "health: lookup returned NULL with no flag changing and at most %d of %zu "
              "members down",
              MAX_DOWN, n);
    } else {
        check_member(owner, "health: lookup");
        CHECK(!stable || owner_down == 0,
              "health: lookup returned %.40s, down throughout the lookup",
              chring_member_name(owner));
    }
    CHECK(k <= (want < n ? want : n), "health: lookup_n(%zu) returned %zu of %zu members", want, k,
          n);
    for (size_t i = 0; i < k; i++) {
        check_member(out[i], "health: lookup_n");
        for (size_t j = 0; j < i; j++)
            CHECK(out[i] != out[j], "health: lookup_n returned a member twice");
        if (stable)
            CHECK(out_down[i] == 0, "health: lookup_n returned %.40s, down",
                  chring_member_name(out[i]));
    }
    if (stable) {
        /* No flag moved across the calls, so the count of members up just read is theirs. */
        CHECK(k == (want < up ? want : up), "health: lookup_n(%zu) returned %zu, %zu members up",
              want, k, up);
        CHECK(k == 0 || out[0] == owner, "health: lookup_n's first member is not the owner");
        CHECK(zero == owner, "health: bounded lookup with zero loads differs from the lookup");
    }
    /* chring_acquire_member works on a member that is down (the caller chose it). */
    if ((r >> 12) % 8 == 0) {
        for (size_t i = 0; i < n; i++) {
            const chring_member_t *m = chring_snap_member(s, i);
            if (chring_member_is_down(m) != 1)
                continue;
            if (t->count >= K_CHURN)
                lease_release_oldest(t, false);
            held_lease_t *h = lease_slot(t);
            int rc = chring_acquire_member(ring, s, m, &h->lease);
            CHECK(rc == 0 && h->lease.member == m,
                  "health: chring_acquire_member on a member down: %s", chring_strerror(rc));
            h->udata = check_member(m, "health: lease on a member down");
            h->acquired_version = chring_snap_version(s);
            t->count++;
            t->acquires++;
            t->acquire_members++;
            break;
        }
    }
    chring_snap_exit(ring, s);

    /* Acquires and retries on the current snapshot, whatever the writer publishes meanwhile. */
    if (t->count >= K_CHURN)
        lease_release_oldest(t, false);
    held_lease_t *h = lease_slot(t);
    g0 = atomic_load(&flip_seq);
    for (unsigned i = 0; i < NSLOTS; i++)
        names0[i] = atomic_load(&name_seq[i]);
    int rc;
    const chring_member_t *skip = NULL;
    bool retry = (r >> 16) % 4 == 0 && t->count > 0;
    if (retry) {
        skip = t->leases[(t->head + t->count - 1) % MAX_LEASES].lease.member;
        rc = chring_acquire_skip(ring, key, len, &skip, 1, &h->lease);
    } else {
        rc = chring_acquire(ring, key, len, &h->lease);
    }
    atomic_thread_fence(memory_order_seq_cst);
    stable = (g0 & 1) == 0 && atomic_load(&flip_seq) == g0;
    int down_names = atomic_load(&names_down);
    if (rc == -ENOENT) {
        /* Every member met is down (or skipped): with no flip across the call that needs at least
         * n - 1 >= MAX_DOWN members down, all of them names the flipper set down. */
        CHECK(!stable || (retry && down_names >= MAX_DOWN),
              "health: %s returned -ENOENT with no flag changing, %d names down",
              retry ? "chring_acquire_skip" : "chring_acquire", down_names);
        CHECK(h->lease.member == NULL, "health: a refused acquire left its lease filled");
        t->health_enoent++;
        return;
    }
    CHECK(rc == 0, "health: %s: %s", retry ? "chring_acquire_skip" : "chring_acquire",
          chring_strerror(rc));
    const chring_member_t *m = h->lease.member;
    h->udata = check_member(m, "health: acquired lease");
    CHECK(!retry || m != skip, "health: chring_acquire_skip chose the member it skips");
    if (chring_member_is_down(m) == 1) {
        unsigned i = slot_of(m);
        bool still = (names0[i] & 1) == 0 && atomic_load(&name_seq[i]) == names0[i];
        CHECK(!still,
              "health: %s placed the key on %.40s, down at the start and at the end of the call "
              "and not flipped in between",
              retry ? "chring_acquire_skip" : "chring_acquire", chring_member_name(m));
        t->health_on_down++; /* flipped during the call: either state may have been read */
    }
    h->acquired_version = 0;
    t->count++;
    t->acquires++;
    t->health_acquires++;
    if (retry)
        t->retries++;
}

static void reader_hot_step(thread_t *t)
{
    uint64_t r = rnd(&t->seed);
    if (t->count >= K_HOT)
        lease_release_oldest(t, false);
    held_lease_t *h = lease_slot(t);
    int rc;
    if (r % 4 == 1 && t->count > 0) {
        /* A retry passing over the member of this thread's newest lease: admission stays strict,
         * so the bound below holds for it too. */
        const chring_member_t *skip = t->leases[(t->head + t->count - 1) % MAX_LEASES].lease.member;
        rc = chring_acquire_skip(ring, HOT_KEY, strlen(HOT_KEY), &skip, 1, &h->lease);
        CHECK(rc == 0, "chring_acquire_skip (hot): %s", chring_strerror(rc));
        CHECK(h->lease.member != skip, "chring_acquire_skip (hot) chose the member it skips");
        t->retries++;
    } else {
        rc = chring_acquire(ring, HOT_KEY, strlen(HOT_KEY), &h->lease);
        CHECK(rc == 0, "chring_acquire (hot): %s", chring_strerror(rc));
    }
    h->udata = check_member(h->lease.member, "hot lease");
    t->count++;
    t->acquires++;
    t->hot_acquires++;

    uint64_t load = chring_member_load(h->lease.member);
    uint64_t bound = hot_bound(h->lease.member);
    uint64_t sat = 0;
    if (load > bound + (uint64_t)(nthreads - 1)) /* read the stats only when needed */
        sat = saturated_now() - hot_saturated_start;
    uint64_t limit = bound + sat + (uint64_t)(nthreads - 1);
    char terms[256];
    CHECK(load <= limit,
          "hot epoch: member %.40s has load %" PRIu64 " right after an acquire, "
          "above its bound %" PRIu64 " + %" PRIu64 " saturated + %d in flight (%s)",
          h->udata->name, load, bound, sat, nthreads - 1,
          hot_terms(h->lease.member, terms, sizeof terms));
    if (load > bound && load - bound > t->max_hot_load_over)
        t->max_hot_load_over = load - bound;

    if (r % 4 == 0) {
        unsigned char key[64];
        size_t len;
        make_key(&t->seed, key, &len);
        const chring_snap_t *s = chring_snap_enter(ring);
        check_member(chring_snap_lookup(s, key, len), "lookup (hot epoch)");
        chring_snap_exit(ring, s);
        t->lookups++;
    }
}

/* ---------------------------------------------------------------------------------------------
 * fork() while the other threads run
 * ------------------------------------------------------------------------------------------- */

#define CHILD_ALARM_S 20 /* the child's time bound; a hang ends it (SIGALRM, or the parent) */
/* CHRING_TORTURE_FORKS.  Off under ThreadSanitizer: the child's first new thread (liburcu's
 * call_rcu worker, which chring_free needs) makes TSan end the child ("starting new threads after
 * multi-threaded fork is not supported", exit 66) unless TSAN_OPTIONS has die_after_fork=0, which
 * TSan documents as unsupported (tests/stress/README.md). */
#define DEFAULT_FORKS (UNDER_TSAN ? 0 : 3)

static _Atomic int forks_left;        /* CHRING_TORTURE_FORKS, counted down */
static _Atomic uint64_t next_fork_ns; /* when the next fork may happen */
static uint64_t fork_gap_ns;          /* run time / (forks + 1) */

/* The child: only the forking thread exists.  It must publish, read, acquire, release and free
 * the ring within CHILD_ALARM_S; any failure exits 1 (fail), a hang dies of SIGALRM. */
static __attribute__((noreturn)) void fork_child(thread_t *t, pid_t parent)
{
#ifdef __linux__
    /* A parent that dies (a failure on another thread) takes a stuck child with it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent)
        _exit(1);
    in_child = 1;
    free_retired = false;
    alarm(CHILD_ALARM_S);
    /* Leases of threads the child does not have stay counted: the count is stable now. */
    uint64_t base = chring_leases(ring);
    CHECK(base >= t->count && chring_leases(ring) == base,
          "fork child: chring_leases reads %" PRIu64 " (this thread holds %u)", base, t->count);

    udata_t *u = udata_new("fork-child-member");
    int rc = chring_add(ring, u->name, 2, u);
    CHECK(rc == 0, "fork child: chring_add: %s", chring_strerror(rc));
    const chring_snap_t *s = chring_snap_enter(ring);
    CHECK(chring_snap_check(s) == 0, "fork child: chring_snap_check failed");
    const chring_member_t *mine = chring_snap_find(s, u->name);
    CHECK(mine != NULL && chring_member_udata(mine) == u,
          "fork child: the member it added is not published");
    for (int i = 0; i < 64; i++) {
        uint64_t k = rnd(&t->seed);
        check_member(chring_snap_lookup(s, &k, sizeof k), "fork child lookup");
    }
    chring_snap_exit(ring, s);

    unsigned char key[64];
    size_t len;
    make_key(&t->seed, key, &len);
    chring_lease_t a, b;
    rc = chring_acquire(ring, key, len, &a);
    CHECK(rc == 0, "fork child: chring_acquire: %s", chring_strerror(rc));
    check_member(a.member, "fork child lease");
    const chring_member_t *skip = a.member;
    rc = chring_acquire_skip(ring, key, len, &skip, 1, &b);
    CHECK(rc == 0 && b.member != a.member, "fork child: chring_acquire_skip: %s",
          rc ? chring_strerror(rc) : "chose the skipped member");
    CHECK(chring_leases(ring) == base + 2,
          "fork child: %" PRIu64 " leases after 2 acquires on %" PRIu64, chring_leases(ring), base);
    chring_release(ring, &a);
    chring_release(ring, &b);
    uint64_t own = t->count;
    lease_release_all(t);
    CHECK(chring_leases(ring) == base - own,
          "fork child: %" PRIu64 " leases after releasing its %" PRIu64 " of %" PRIu64,
          chring_leases(ring), own, base);
    if (t->held_snap) {
        chring_snap_put(ring, t->held_snap);
        t->held_snap = NULL;
    }
    rc = chring_remove(ring, u->name);
    CHECK(rc == 0, "fork child: chring_remove: %s", chring_strerror(rc));
    chring_free(&ring); /* a grace period and every RCU callback, in the child */
    CHECK(ring == NULL, "fork child: chring_free did not clear the pointer");
    CHECK(atomic_load_explicit(&u->magic, memory_order_relaxed) == MAGIC_DEAD,
          "fork child: the member it added and removed was not retired by chring_free");
    _exit(0);
}

/* Forks now if a fork is due (outside any read section); waits for the child and checks it. */
static void maybe_fork(thread_t *t)
{
    if (atomic_load_explicit(&forks_left, memory_order_relaxed) <= 0)
        return;
    uint64_t at = atomic_load(&next_fork_ns);
    if (now_ns() < at || !atomic_compare_exchange_strong(&next_fork_ns, &at, at + fork_gap_ns))
        return;
    atomic_fetch_sub(&forks_left, 1);
    fflush(stdout);
    fflush(stderr);
    pid_t self = getpid(), pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0)
        fork_child(t, self);
    /* The child's alarm() cannot fire while it waits in a grace period: liburcu-bp's
     * synchronize_rcu blocks every signal.  So the parent enforces the bound too. */
    int status = 0;
    pid_t w;
    uint64_t deadline = now_ns() + (CHILD_ALARM_S + 5) * 1000000000ull;
    for (;;) {
        w = waitpid(pid, &status, WNOHANG);
        if (w != 0 && !(w < 0 && errno == EINTR))
            break;
        if (now_ns() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail("fork child %d hung: still running after %d s, killed (a lock or a grace period "
                 "that cannot end in the child)",
                 (int)pid, CHILD_ALARM_S + 5);
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    CHECK(w == pid, "waitpid: %s", strerror(errno));
    CHECK(!WIFSIGNALED(status) || WTERMSIG(status) != SIGALRM,
          "fork child %d hung: killed by SIGALRM after %d s (a lock or a grace period that "
          "cannot end in the child)",
          (int)pid, CHILD_ALARM_S);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork child %d failed: %s %d", (int)pid,
          WIFEXITED(status) ? "exit status" : "signal",
          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    t->forks++;
}

static void *reader_main(void *arg)
{
    thread_t *t = arg;
    for (;;) {
        while (!atomic_load_explicit(&epoch_stop, memory_order_acquire)) {
            if (epoch_kind == EPOCH_HOT) {
                reader_hot_step(t);
            } else if (epoch_kind == EPOCH_HEALTH) {
                reader_health_step(t);
            } else {
                maybe_fork(t);
                reader_churn_step(t);
            }
        }
        /* A snapshot held in a health epoch may list members removed while down (they stay down):
         * none is carried into another epoch, nor from one into a health epoch. */
        if (epoch_kind == EPOCH_HEALTH && t->held_snap) {
            chring_snap_put(ring, t->held_snap);
            t->held_snap = NULL;
        }
        pthread_barrier_wait(&barrier); /* A: parked, nothing in flight */
        pthread_barrier_wait(&barrier); /* B: the coordinator has checked and set the next epoch */
        if (atomic_load(&run_over))
            break;
        if (epoch_kind == EPOCH_HEALTH && t->held_snap) {
            chring_snap_put(ring, t->held_snap);
            t->held_snap = NULL;
        }
    }
    lease_release_all(t);
    if (t->held_snap) {
        chring_snap_put(ring, t->held_snap);
        t->held_snap = NULL;
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Writer
 * ------------------------------------------------------------------------------------------- */

typedef struct slot {
    char name[CHRING_NAME_MAX + 1];
    bool present;
    uint32_t weight;
    udata_t *udata;
} slot_t;

static slot_t slots[NSLOTS];
static unsigned present_count;
static uint64_t expected_publishes;
static uint64_t w_adds, w_removes, w_weights, w_readds, w_updates, w_syncs, w_noops, w_failed,
    w_moved_checks;
static uint64_t members_created;
static uint64_t writer_seed;

static uint64_t publishes_now(void)
{
    chring_stats_t st;
    chring_stats(ring, &st);
    CHECK(st.version == st.publishes, "stats: version %" PRIu64 " != publishes %" PRIu64,
          st.version, st.publishes);
    return st.publishes;
}

/* The published membership must be exactly the writer's intended one. */
static uint64_t count_dummies(const chring_change_t *ch, unsigned n)
{
    uint64_t d = 0;
    for (unsigned j = 0; j < n; j++)
        d += ch[j].udata == &dummy_udata;
    return d;
}

static void writer_verify(const char *after)
{
    uint64_t returned = atomic_load(&dummy_returned);
    CHECK(returned == dummy_expected,
          "after %s: the udata not kept came back %" PRIu64 " times, expected %" PRIu64
          " (once per successful call that passed it, never for a failed one)",
          after, returned, dummy_expected);
    uint64_t p = publishes_now();
    CHECK(p == expected_publishes, "after %s: %" PRIu64 " publishes, expected %" PRIu64, after, p,
          expected_publishes);
    const chring_snap_t *s = chring_snap_enter(ring);
    check_snap(s, after);
    CHECK(chring_snap_len(s) == present_count, "after %s: snapshot has %zu members, expected %u",
          after, chring_snap_len(s), present_count);
    CHECK(chring_len(ring) == present_count, "after %s: chring_len %zu, expected %u", after,
          chring_len(ring), present_count);
    for (unsigned i = 0; i < NSLOTS; i++) {
        const chring_member_t *m = chring_snap_find(s, slots[i].name);
        if (!slots[i].present) {
            CHECK(m == NULL, "after %s: removed member %.40s is still published", after,
                  slots[i].name);
            continue;
        }
        CHECK(m != NULL, "after %s: member %.40s is missing", after, slots[i].name);
        udata_t *u = check_member(m, after);
        CHECK(u == slots[i].udata, "after %s: member %.40s has udata #%u, expected #%u", after,
              slots[i].name, u->id, slots[i].udata->id);
        CHECK(chring_snap_weight(s, m) == slots[i].weight,
              "after %s: %.40s has weight %u, "
              "expected %u",
              after, slots[i].name, chring_snap_weight(s, m), slots[i].weight);
    }
    chring_snap_exit(ring, s);
}

static udata_t *writer_new_udata(unsigned slot)
{
    members_created++;
    return udata_new(slots[slot].name);
}

static unsigned pick(bool present)
{
    for (;;) {
        unsigned i = (unsigned)(rnd(&writer_seed) % NSLOTS);
        if (slots[i].present == present)
            return i;
    }
}

static uint32_t other_weight(uint32_t w)
{
    uint32_t nw;
    do
        nw = 1 + (uint32_t)(rnd(&writer_seed) % MAX_WEIGHT);
    while (nw == w);
    return nw;
}

static void w_add(unsigned i, uint32_t w)
{
    udata_t *u = writer_new_udata(i);
    int rc = chring_add(ring, slots[i].name, w, u);
    CHECK(rc == 0, "chring_add(%.40s): %s", slots[i].name, chring_strerror(rc));
    slots[i].present = true;
    slots[i].weight = w;
    slots[i].udata = u;
    present_count++;
    expected_publishes++;
}

static void w_remove(unsigned i)
{
    atomic_store(&slots[i].udata->state, ST_REMOVING);
    int rc = chring_remove(ring, slots[i].name);
    CHECK(rc == 0, "chring_remove(%.40s): %s", slots[i].name, chring_strerror(rc));
    slots[i].present = false;
    slots[i].udata = NULL;
    present_count--;
    expected_publishes++;
}

/* A re-weight: chring_set_weight, or chring_add of the member with another weight. */
static void writer_reweight(uint64_t r)
{
    unsigned i = pick(true);
    uint32_t w = other_weight(slots[i].weight);
    int rc = (r >> 8) % 2 ? chring_set_weight(ring, slots[i].name, w)
                          : chring_add(ring, slots[i].name, w, &dummy_udata);
    CHECK(rc == 0, "re-weight %.40s: %s", slots[i].name, chring_strerror(rc));
    dummy_expected += (r >> 8) % 2 ? 0 : 1;
    slots[i].weight = w;
    expected_publishes++;
    w_weights++;
    writer_verify("re-weight");
}

/* A batch of 2..5 changes on distinct names (adds, removes, re-weights): one publish. */
static void writer_batch(uint64_t r)
{
    chring_change_t ch[5];
    unsigned idx[5];
    bool used[NSLOTS] = {false};
    unsigned n = 2 + (unsigned)((r >> 8) % 4), k = 0;
    unsigned members_after = present_count;
    for (unsigned tries = 0; k < n && tries < 50; tries++) {
        unsigned i = (unsigned)(rnd(&writer_seed) % NSLOTS);
        if (used[i])
            continue;
        used[i] = true;
        uint64_t c = rnd(&writer_seed);
        idx[k] = i;
        if (!slots[i].present) {
            ch[k++] = (chring_change_t){slots[i].name, 1 + (uint32_t)(c % MAX_WEIGHT), NULL};
            members_after++;
        } else if (c % 2 && members_after > MIN_MEMBERS) {
            ch[k++] = (chring_change_t){slots[i].name, 0, NULL};
            members_after--;
        } else {
            ch[k++] = (chring_change_t){slots[i].name, other_weight(slots[i].weight), &dummy_udata};
        }
    }
    if (k == 0)
        return;
    /* New members get their udata; removed ones are marked before the call. */
    for (unsigned j = 0; j < k; j++) {
        unsigned i = idx[j];
        if (!slots[i].present)
            ch[j].udata = writer_new_udata(i);
        else if (ch[j].weight == 0)
            atomic_store(&slots[i].udata->state, ST_REMOVING);
    }
    int rc = chring_update(ring, ch, k);
    CHECK(rc == 0, "chring_update of %u changes: %s", k, chring_strerror(rc));
    dummy_expected += count_dummies(ch, k);
    for (unsigned j = 0; j < k; j++) {
        unsigned i = idx[j];
        if (!slots[i].present) {
            slots[i].present = true;
            slots[i].udata = ch[j].udata;
            slots[i].weight = ch[j].weight;
            present_count++;
        } else if (ch[j].weight == 0) {
            slots[i].present = false;
            slots[i].udata = NULL;
            present_count--;
        } else {
            slots[i].weight = ch[j].weight;
        }
    }
    expected_publishes++;
    w_updates++;
    writer_verify("chring_update");
}

/* chring_sync to a new random set, fed in a shuffled order. */
static void writer_sync(void)
{
    chring_change_t ch[NSLOTS];
    unsigned idx[NSLOTS];
    bool keep[NSLOTS];
    unsigned k = 0;
    for (unsigned i = 0; i < NSLOTS; i++)
        keep[i] = rnd(&writer_seed) % 10 < 6;
    unsigned n = 0;
    for (unsigned i = 0; i < NSLOTS; i++)
        n += keep[i];
    for (unsigned i = 0; n < MIN_MEMBERS; i = (i + 1) % NSLOTS)
        if (!keep[i])
            keep[i] = true, n++;
    bool changed = false;
    for (unsigned i = 0; i < NSLOTS; i++) {
        if (!keep[i]) {
            if (slots[i].present) {
                atomic_store(&slots[i].udata->state, ST_REMOVING);
                changed = true;
            }
            continue;
        }
        uint32_t w = slots[i].present && rnd(&writer_seed) % 2
                         ? slots[i].weight
                         : 1 + (uint32_t)(rnd(&writer_seed) % MAX_WEIGHT);
        udata_t *u = slots[i].present ? &dummy_udata : writer_new_udata(i);
        if (!slots[i].present || w != slots[i].weight)
            changed = true;
        idx[k] = i;
        ch[k++] = (chring_change_t){slots[i].name, w, u};
    }
    /* Feed them in a shuffled order: the result must not depend on it. */
    for (unsigned j = k; j > 1; j--) {
        unsigned x = (unsigned)(rnd(&writer_seed) % j);
        chring_change_t tmp = ch[j - 1];
        ch[j - 1] = ch[x];
        ch[x] = tmp;
        unsigned ti = idx[j - 1];
        idx[j - 1] = idx[x];
        idx[x] = ti;
    }
    int rc = chring_sync(ring, ch, k);
    CHECK(rc == 0, "chring_sync of %u members: %s", k, chring_strerror(rc));
    dummy_expected += count_dummies(ch, k);
    present_count = 0;
    for (unsigned i = 0; i < NSLOTS; i++) {
        if (!keep[i]) {
            slots[i].present = false;
            slots[i].udata = NULL;
        }
    }
    for (unsigned j = 0; j < k; j++) {
        unsigned i = idx[j];
        if (!slots[i].present) {
            slots[i].present = true;
            slots[i].udata = ch[j].udata;
        }
        slots[i].weight = ch[j].weight;
        present_count++;
    }
    if (changed)
        expected_publishes++;
    w_syncs++;
    writer_verify("chring_sync");
}

/* Calls that change nothing publish nothing. */
static void writer_noops(void)
{
    unsigned i = pick(true);
    int rc = chring_add(ring, slots[i].name, slots[i].weight, &dummy_udata);
    CHECK(rc == 0, "chring_add of an existing member, same weight: %s", chring_strerror(rc));
    dummy_expected++;
    rc = chring_set_weight(ring, slots[i].name, slots[i].weight);
    CHECK(rc == 0, "chring_set_weight to the same weight: %s", chring_strerror(rc));
    chring_change_t same = {slots[i].name, slots[i].weight, &dummy_udata};
    rc = chring_update(ring, &same, 1);
    CHECK(rc == 0, "chring_update that changes nothing: %s", chring_strerror(rc));
    dummy_expected++;
    w_noops++;
    writer_verify("calls that change nothing");
}

/* Calls that fail publish nothing and take no udata. */
static void writer_failing(void)
{
    unsigned absent = present_count < NSLOTS ? pick(false) : NSLOTS;
    if (absent < NSLOTS) {
        int rc = chring_remove(ring, slots[absent].name);
        CHECK(rc == -ENOENT, "chring_remove of a non-member returned %d", rc);
        chring_change_t bad[2] = {{slots[absent].name, 1, &dummy_udata},
                                  {slots[absent].name, 2, &dummy_udata}};
        rc = chring_update(ring, bad, 2);
        CHECK(rc == -EINVAL, "chring_update with a name twice returned %d", rc);
    }
    unsigned i = pick(true);
    chring_change_t bad2[2] = {{slots[i].name, other_weight(slots[i].weight), &dummy_udata},
                               {"", 1, &dummy_udata}};
    int rc = chring_update(ring, bad2, 2);
    CHECK(rc == -EINVAL, "chring_update with an empty name returned %d", rc);
    rc = chring_sync(ring, bad2, 2);
    CHECK(rc == -EINVAL, "chring_sync with an empty name returned %d", rc);
    w_failed++;
    writer_verify("failing calls");
}

static void writer_step(void)
{
    uint64_t r = rnd(&writer_seed);
    unsigned op = (unsigned)(r % 100);
    if (op < 20) { /* add a new member (or re-add a removed name: a new member) */
        if (present_count < NSLOTS) {
            w_add(pick(false), 1 + (uint32_t)((r >> 8) % MAX_WEIGHT));
            w_adds++;
            writer_verify("add");
        }
    } else if (op < 40) { /* remove */
        if (present_count > MIN_MEMBERS) {
            w_remove(pick(true));
            w_removes++;
            writer_verify("remove");
        }
    } else if (op < 55) { /* re-weight (set_weight, or add with another weight) */
        writer_reweight(r);
    } else if (op < 65) { /* remove and re-add the same name: a NEW member */
        if (present_count > MIN_MEMBERS) {
            unsigned i = pick(true);
            w_remove(i);
            w_add(i, 1 + (uint32_t)((r >> 8) % MAX_WEIGHT));
            w_readds++;
            writer_verify("re-add");
        }
    } else if (op < 80) { /* a batch of 2..5 changes on distinct names, one publish */
        writer_batch(r);
    } else if (op < 88) { /* sync to a new random set */
        writer_sync();
    } else if (op < 94) { /* calls that change nothing publish nothing */
        writer_noops();
    } else { /* calls that fail publish nothing and take no udata */
        writer_failing();
    }
}

/* ---------------------------------------------------------------------------------------------
 * Health: the flipper thread and the coordinator's reset
 * ------------------------------------------------------------------------------------------- */

static _Atomic int flipper_quit;
static uint64_t flipper_seed;

/* One chring_set_down on slot i's name, bracketed by the sequences; the flipper's view follows
 * what the call did (-ENOENT: the name is no member, so no member of it is down either).  Called
 * under flip_lock. */
static void flip(unsigned i, bool down)
{
    char name[CHRING_NAME_MAX + 1];
    slot_name(name, sizeof name, i);
    if (down && !flip_down[i])
        atomic_fetch_add(&names_down, 1); /* before: never fewer than are down */
    atomic_fetch_add(&flip_seq, 1);
    atomic_fetch_add(&name_seq[i], 1);
    int rc = chring_set_down(ring, name, down);
    atomic_fetch_add(&name_seq[i], 1);
    atomic_fetch_add(&flip_seq, 1);
    CHECK(rc == 0 || rc == -ENOENT, "chring_set_down(%.40s, %d): %s", name, down,
          chring_strerror(rc));
    bool now = rc == 0 && down;
    if (down && !flip_down[i] && !now)
        atomic_fetch_sub(&names_down, 1);
    if (!down && flip_down[i])
        atomic_fetch_sub(&names_down, 1);
    flip_down[i] = now;
    if (rc == -ENOENT)
        flips_enoent++;
    else if (down)
        flips_down++;
    else
        flips_up++;
}

/* The slots hot epochs ramp (effective weights: the others' weight is E_min of the hot bound). */
#define RAMPABLE(slot) ((slot) % 3 == 0)

static void *flipper_main(void *arg)
{
    (void)arg;
    static const double scales[] = {0.0, 0.1, 0.25, 0.5, 0.9, 1.0};
    const size_t nscales = sizeof scales / sizeof scales[0];
    char name[CHRING_NAME_MAX + 1];
    while (!atomic_load(&flipper_quit)) {
        uint64_t r = rnd(&flipper_seed);
        pthread_mutex_lock(&flip_lock);
        int mode = atomic_load(&flip_mode);
        unsigned i = (unsigned)(r % NSLOTS);
        if (mode == FLIP_ALL && (r >> 8) % 2 == 0) {
            if (!flip_down[i] && atomic_load(&names_down) >= MAX_DOWN) {
                for (unsigned j = 0; j < NSLOTS; j++) /* full: set one of them up instead */
                    if (flip_down[j]) {
                        i = j;
                        break;
                    }
            }
            flip(i, !flip_down[i]);
        } else if (mode != FLIP_NONE && (mode == FLIP_ALL || RAMPABLE(i))) {
            /* Constant (ms 0, or from = to over a time) or timed, 1 to 50 ms. */
            double from = scales[(r >> 12) % nscales], to = scales[(r >> 16) % nscales];
            uint32_t ms = 1 + (uint32_t)((r >> 20) % 50);
            if ((r >> 9) % 2 == 0) {
                from = to;
                if ((r >> 10) % 2 == 0)
                    ms = 0;
                ramps_const++;
            } else {
                ramps_timed++;
            }
            slot_name(name, sizeof name, i);
            int rc = chring_set_ramp(ring, name, from, to, ms);
            CHECK(rc == 0 || rc == -ENOENT, "chring_set_ramp(%.40s, %g, %g, %u): %s", name, from,
                  to, ms, chring_strerror(rc));
        }
        pthread_mutex_unlock(&flip_lock);
        /* Now and then wait for the writer's replaced snapshots to be given up
         * (chring_quiesce, src/reclaim.c): it takes them off the reclaimer's stack on this
         * thread, racing the reclaimer's own thread and the writer's pushes. */
        if ((r >> 40) % 8 == 0) {
            int rc = chring_quiesce(ring);
            CHECK(rc == 0, "chring_quiesce: %s", chring_strerror(rc));
            quiesces++;
        }
        struct timespec ts = {0, 100000 + (long)((r >> 32) % 200000)};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Reported load (chring_report_load, docs/design.md §3): a reporter thread reports random
 * loads on members of the current snapshot while the readers acquire, retry and release and the
 * writer publishes, in churn and health epochs; reports expire after REPORT_TTL_MS.  Hot epochs
 * check a bound computed from the leases alone, so before one the coordinator turns the reporter
 * off and reports 0 on every member (a report of 0 adds nothing to the member's leases). */
#define REPORT_TTL_MS 30
static _Atomic int reporter_on;
static _Atomic int reporter_quit;
static uint64_t reporter_seed;
static uint64_t reports_made, reports_enoent, reports_cleared;

static void *reporter_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&reporter_quit)) {
        uint64_t r = rnd(&reporter_seed);
        pthread_mutex_lock(&flip_lock); /* quiet while the coordinator probes or clears */
        if (atomic_load(&reporter_on)) {
            /* A held snapshot, not a read section: a writer call inside a read section can
             * deadlock with a fork (the fork handlers hold the writers' lock while they wait for
             * liburcu's call_rcu thread, whose grace period waits for that section). */
            const chring_snap_t *s = chring_snap_hold(ring);
            size_t n = chring_snap_len(s);
            if (n > 0) {
                const chring_member_t *m = chring_snap_member(s, (size_t)(r % n));
                uint64_t load = (r >> 16) % 4 == 0 ? 0 : (r >> 20) % 64;
                int rc = chring_report_load(ring, m, load);
                CHECK(rc == 0 || rc == -ENOENT, "chring_report_load(%.40s): %s",
                      chring_member_name(m), chring_strerror(rc));
                reports_made += rc == 0;
                reports_enoent += rc == -ENOENT;
                chring_member_stats_t ms;
                chring_member_stats(m, &ms);
                CHECK(ms.counted >= ms.load && ms.counted < (UINT64_C(1) << 31),
                      "reported member %.40s: counted %" PRIu64 ", load %" PRIu64,
                      chring_member_name(m), ms.counted, ms.load);
            }
            chring_snap_put(ring, s);
        }
        pthread_mutex_unlock(&flip_lock);
        struct timespec ts = {0, 50000 + (long)((r >> 32) % 200000)};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Readers parked: the reporter off and every report made to add nothing (before a hot epoch). */
static void reports_clear(void)
{
    pthread_mutex_lock(&flip_lock);
    atomic_store(&reporter_on, 0);
    const chring_snap_t *s = chring_snap_hold(ring);
    for (size_t i = 0; i < chring_snap_len(s); i++) {
        int rc = chring_report_load(ring, chring_snap_member(s, i), 0);
        CHECK(rc == 0, "clear: chring_report_load: %s", chring_strerror(rc));
        reports_cleared++; /* every member is up here: each is recorded */
    }
    chring_snap_put(ring, s);
    chring_stats_t st;
    chring_stats(ring, &st);
    CHECK(st.counted == st.leases,
          "reports of 0 on every member: counted %" PRIu64 " != leases %" PRIu64, st.counted,
          st.leases);
    pthread_mutex_unlock(&flip_lock);
}

/* Between epochs (readers parked): every name up at scale 1, then the next epoch's mode. */
static void health_reset(int next_mode)
{
    pthread_mutex_lock(&flip_lock);
    atomic_store(&flip_mode, FLIP_NONE);
    for (unsigned i = 0; i < NSLOTS; i++) {
        flip(i, false);
        int rc = chring_set_ramp(ring, slots[i].name, 1.0, 1.0, 0);
        CHECK(rc == (slots[i].present ? 0 : -ENOENT), "reset: chring_set_ramp(%.40s): %s",
              slots[i].name, chring_strerror(rc));
    }
    CHECK(atomic_load(&names_down) == 0, "reset: %d names still counted down",
          atomic_load(&names_down));
    chring_stats_t st;
    chring_stats(ring, &st);
    CHECK(st.down == 0, "reset: stats.down = %" PRIu64 " with every member set up", st.down);
    atomic_store(&flip_mode, next_mode);
    pthread_mutex_unlock(&flip_lock);
}

/* While the membership is frozen (hot epochs) the writer stays on the read side. */
static void writer_quiet_step(const chring_snap_t **prev)
{
    const chring_snap_t *cur = chring_snap_hold(ring);
    check_snap(cur, "writer hold");
    if (*prev) {
        double moved = chring_snap_moved(*prev, cur);
        CHECK(moved == 0.0, "hot epoch: snap_moved between snapshots of a frozen membership is %g",
              moved);
        chring_snap_put(ring, *prev);
    }
    *prev = cur;
    w_moved_checks++;
    /* m as the library computes it (chring_leases sums the same shards acquire reads): at most
     * the T * K_HOT leases outstanding or being acquired, plus the T operations in flight. */
    for (int i = 0; i < 200; i++) {
        uint64_t m = chring_leases(ring);
        if (m > max_m_seen)
            max_m_seen = m;
        CHECK(m <= hot_m_bound,
              "hot epoch: chring_leases read %" PRIu64 " while at most %" PRIu64
              " leases were outstanding or in flight (%d readers x %d leases, "
              "+%d in flight, +%" PRIu64 " slack)",
              m, hot_m_bound, nthreads, K_HOT, nthreads, m_slack);
    }
    chring_stats_t st;
    chring_stats(ring, &st);
    CHECK(st.members == present_count, "stats.members %" PRIu64 " != %u", st.members,
          present_count);
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * Checkpoints (the writer thread coordinates them)
 * ------------------------------------------------------------------------------------------- */

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

static uint64_t checkpoints;
static uint64_t probe_acquires; /* the coordinator's own acquires (ramp_probe) */

/* Every thread is parked: nothing is in flight, so every count must be exact. */
static void checkpoint(void)
{
    checkpoints++;
    size_t total = 0;
    uint64_t acquires = 0, retries = 0;
    for (int i = 0; i < nthreads; i++) {
        total += threads[i].count;
        acquires += threads[i].acquires;
        retries += threads[i].retries;
    }
    acquires += probe_acquires;
    const chring_member_t **held = malloc((total + 1) * sizeof *held);
    CHECK(held != NULL, "out of memory");
    size_t k = 0;
    for (int i = 0; i < nthreads; i++)
        for (unsigned j = 0; j < threads[i].count; j++)
            held[k++] = threads[i].leases[(threads[i].head + j) % MAX_LEASES].lease.member;
    qsort(held, k, sizeof *held, cmp_ptr);

    uint64_t leases = chring_leases(ring);
    CHECK(leases == total,
          "checkpoint %" PRIu64 ": chring_leases = %" PRIu64 ", the threads hold "
          "%zu leases",
          checkpoints, leases, total);
    chring_stats_t st;
    chring_stats(ring, &st);
    CHECK(st.leases == total, "checkpoint: stats.leases = %" PRIu64 ", threads hold %zu", st.leases,
          total);
    CHECK(st.acquires == acquires,
          "checkpoint: stats.acquires = %" PRIu64 ", the threads made "
          "%" PRIu64,
          st.acquires, acquires);
    CHECK(st.retries == retries,
          "checkpoint: stats.retries = %" PRIu64 ", the threads made %" PRIu64 " retries",
          st.retries, retries);
    CHECK(st.spills <= st.acquires && st.saturated <= st.acquires,
          "checkpoint: spills %" PRIu64 " / saturated %" PRIu64 " above acquires %" PRIu64,
          st.spills, st.saturated, st.acquires);

    uint64_t sum = 0;
    uint64_t sat = st.saturated - hot_saturated_start;
    for (size_t a = 0; a < k;) {
        size_t b = a;
        while (b < k && held[b] == held[a])
            b++;
        udata_t *u = check_member(held[a], "checkpoint lease");
        uint64_t load = chring_member_load(held[a]);
        CHECK(load == b - a,
              "checkpoint %" PRIu64 ": member %.40s has load %" PRIu64 " but %zu "
              "leases on it are held",
              checkpoints, u->name, load, b - a);
        chring_member_stats_t ms;
        chring_member_stats(held[a], &ms);
        CHECK(ms.load == load && ms.acquires == ms.primary + ms.spilled_in + ms.down_in,
              "checkpoint: member stats of %.40s: load %" PRIu64 " acquires %" PRIu64
              " primary %" PRIu64 " spilled_in %" PRIu64 " down_in %" PRIu64,
              u->name, ms.load, ms.acquires, ms.primary, ms.spilled_in, ms.down_in);
        if (epoch_kind == EPOCH_HOT) {
            uint64_t bound = hot_bound(held[a]);
            char terms[256];
            CHECK(load <= bound + sat,
                  "checkpoint %" PRIu64 " (hot): member %.40s holds %" PRIu64
                  " leases, above its bound %" PRIu64 " + %" PRIu64 " saturated (%s)",
                  checkpoints, u->name, load, bound, sat, hot_terms(held[a], terms, sizeof terms));
        }
        sum += load;
        a = b;
    }
    CHECK(sum == total, "checkpoint: loads sum to %" PRIu64 ", %zu leases held", sum, total);

    /* Current members without held leases have load 0. */
    const chring_snap_t *s = chring_snap_enter(ring);
    check_snap_members(s, "checkpoint snapshot");
    for (size_t i = 0; i < chring_snap_len(s); i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        if (!bsearch(&m, held, k, sizeof *held, cmp_ptr))
            CHECK(chring_member_load(m) == 0,
                  "checkpoint: member %.40s has load %" PRIu64 " without any lease",
                  chring_member_name(m), chring_member_load(m));
    }
    chring_snap_exit(ring, s);
    free(held);
}

/* After a ramp epoch (readers parked): with every scale frozen where it is, acquires made alone
 * never saturate (docs/design.md §3: the capacities add up to at least c * (m + 1) > m), unless
 * no member up admits anything.  Leaves the ring's leases as it found them. */
static void ramp_probe(void)
{
    pthread_mutex_lock(&flip_lock); /* the flipper idles */
    bool someone_admits = false;
    const chring_snap_t *s = chring_snap_enter(ring);
    for (unsigned i = 0; i < NSLOTS; i++) {
        if (!slots[i].present)
            continue;
        const chring_member_t *m = chring_snap_find(s, slots[i].name);
        if (m == NULL)
            continue;
        double scale = chring_member_scale(m);
        int rc = chring_set_ramp(ring, slots[i].name, scale, scale, 0);
        CHECK(rc == 0, "probe: chring_set_ramp(%.40s): %s", slots[i].name, chring_strerror(rc));
        someone_admits |= scale > 0.0 && !chring_member_is_down(m);
    }
    chring_snap_exit(ring, s);
    enum { PROBE = 64 };
    chring_lease_t lease[PROBE];
    uint64_t before = saturated_now();
    char key[32];
    for (int k = 0; k < PROBE; k++) {
        snprintf(key, sizeof key, "probe-%d", k);
        int rc = chring_acquire(ring, key, strlen(key), &lease[k]);
        CHECK(rc == 0 || (rc == -ENOENT && !someone_admits), "probe: chring_acquire: %s",
              chring_strerror(rc));
        probe_acquires += rc == 0;
    }
    uint64_t sat = saturated_now() - before;
    CHECK(sat == 0 || !someone_admits,
          "probe: %" PRIu64 " of %d acquires saturated single-threaded with the scales frozen", sat,
          PROBE);
    for (int k = 0; k < PROBE; k++)
        chring_release(ring, &lease[k]);
    pthread_mutex_unlock(&flip_lock);
}

/* Prepares a hot epoch: frees every lease (from this thread: releases may come from any thread)
 * and records each member's bound from the frozen snapshot. */
static void prepare_hot(void)
{
    for (int i = 0; i < nthreads; i++)
        lease_release_all(&threads[i]);
    hot_m_bound = (uint64_t)nthreads * (K_HOT + 1) + m_slack;
    const chring_snap_t *s = chring_snap_enter(ring);
    uint64_t total_weight = 0;
    hot_table_len = chring_snap_len(s);
    for (size_t i = 0; i < hot_table_len; i++)
        total_weight += chring_snap_weight(s, chring_snap_member(s, i));
    /* E >= E_min, the weight of the members that do not ramp (s_j <= 1 for the others), so
     * cap_j = ceil(c * (m + 1) * s_j * w_j / E) <= capacity_weighted(M, w_j, E_min, c). */
    for (unsigned i = 0; i < NSLOTS; i++)
        if (slots[i].present && RAMPABLE(i)) {
            const chring_member_t *m = chring_snap_find(s, slots[i].name);
            total_weight -= m != NULL ? chring_snap_weight(s, m) : 0;
        }
    hot_total_weight = total_weight;
    for (size_t i = 0; i < hot_table_len; i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        hot_table[i].member = m;
        hot_table[i].weight = chring_snap_weight(s, m);
        hot_table[i].bound = total_weight == 0 ? UINT64_MAX / 4
                                               : chring_capacity_weighted(hot_m_bound,
                                                     chring_snap_weight(s, m), total_weight, BALANCE);
    }
    chring_snap_exit(ring, s);
    hot_saturated_start = saturated_now();
}

/* ---------------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------------- */

static double env_double(const char *name, double def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    double d = strtod(v, &end);
    if (*end || d != d || d < 0) {
        fprintf(stderr, "torture: bad %s=%s\n", name, v);
        exit(2);
    }
    return d;
}

int main(int argc, char **argv)
{
    double seconds = env_double("CHRING_TORTURE_SECONDS", 10.0);
    if (argc > 1) {
        char *end;
        seconds = strtod(argv[1], &end);
        if (*end || !(seconds >= 0)) {
            fprintf(stderr, "usage: %s [SECONDS]\n", argv[0]);
            return 2;
        }
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    nthreads = (int)env_double("CHRING_TORTURE_THREADS", cores < 2 ? 2 : (double)cores);
    if (nthreads < 2)
        nthreads = 2;
    if (nthreads > MAX_THREADS)
        nthreads = MAX_THREADS;
    uint64_t seed = (uint64_t)env_double("CHRING_TORTURE_SEED", (double)(now_ns() % 1000000007u));
    m_slack = (uint64_t)env_double("CHRING_TORTURE_M_SLACK", 0);
    int forks = (int)env_double("CHRING_TORTURE_FORKS", DEFAULT_FORKS);
    writer_seed = splitmix(seed) | 1;

    printf("torture: %s, %d readers + 1 writer, %.1f s, seed %" PRIu64 ", vnodes %g, %s\n",
           chring_version(), nthreads, seconds, seed, env_double("CHRING_TORTURE_VNODES", 160),
           free_retired ? "sanitizer build: half of the retired udata freed at once"
                        : "retired udata kept poisoned");
    fflush(stdout);

    retire_count = calloc(MAX_IDS, sizeof *retire_count);
    udata_ptr = calloc(MAX_IDS, sizeof *udata_ptr);
    threads = calloc((size_t)nthreads, sizeof *threads);
    CHECK(retire_count && udata_ptr && threads, "out of memory");

    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.balance = BALANCE;
    cfg.retire = on_retire;
    cfg.retire_ctx = NULL;
    /* Points per unit of weight: past about 2,800 the ring crosses 65,536 points as the writer
     * adds and removes members, so publishes go between the bucket and the line index. */
    vnodes = (uint32_t)env_double("CHRING_TORTURE_VNODES", CHRING_DEFAULT_VNODES);
    cfg.vnodes = vnodes;
    cfg.report_ttl_ms = REPORT_TTL_MS;
    int rc = chring_new(&ring, &cfg);
    CHECK(rc == 0, "chring_new: %s", chring_strerror(rc));

    for (unsigned i = 0; i < NSLOTS; i++)
        slot_name(slots[i].name, sizeof slots[i].name, i);
    for (unsigned i = 0; i < 10; i++)
        w_add(i, 1 + i % MAX_WEIGHT);
    writer_verify("initial adds");

    /* Forks at even intervals of the run, the first after one interval. */
    fork_gap_ns = (uint64_t)(seconds * 1e9) / (uint64_t)(forks + 1);
    atomic_store(&next_fork_ns, now_ns() + fork_gap_ns);
    atomic_store(&forks_left, forks);

    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++) {
        threads[i].index = i;
        threads[i].seed = splitmix(seed + 1000u * (uint64_t)(i + 1)) | 1;
        CHECK(pthread_create(&threads[i].tid, NULL, reader_main, &threads[i]) == 0,
              "pthread_create");
    }

    uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9);
    uint64_t epochs = 0, hot_epochs = 0, health_epochs = 0, writer_steps = 0;
    flipper_seed = splitmix(seed ^ 0x666c6970ull) | 1;
    pthread_t flipper;
    CHECK(pthread_create(&flipper, NULL, flipper_main, NULL) == 0, "pthread_create (flipper)");
    reporter_seed = splitmix(seed ^ 0x7265706full) | 1;
    atomic_store(&reporter_on, 1);
    pthread_t reporter;
    CHECK(pthread_create(&reporter, NULL, reporter_main, NULL) == 0, "pthread_create (reporter)");
    const chring_snap_t *quiet_prev = NULL;
    for (;;) {
        uint64_t epoch_end = now_ns() + (epoch_kind == EPOCH_HOT ? HOT_MS : CHURN_MS) * 1000000ull;
        if (epoch_end > end)
            epoch_end = end;
        do {
            if (epoch_kind == EPOCH_HOT)
                writer_quiet_step(&quiet_prev);
            else
                writer_step();
            writer_steps++;
        } while (now_ns() < epoch_end);
        if (quiet_prev) {
            chring_snap_put(ring, quiet_prev);
            quiet_prev = NULL;
        }
        atomic_store_explicit(&epoch_stop, 1, memory_order_release);
        pthread_barrier_wait(&barrier); /* A */
        checkpoint();
        if (epoch_kind == EPOCH_HOT || epoch_kind == EPOCH_HEALTH)
            ramp_probe();
        epochs++;
        bool over = now_ns() >= end;
        if (over) {
            atomic_store(&run_over, 1);
        } else {
            /* Every third epoch is hot, starting with the second, and every third a health
             * epoch, starting with the third.  Each begins with every member up at scale 1. */
            epoch_kind = epochs % 3 == 1 ? EPOCH_HOT : epochs % 3 == 2 ? EPOCH_HEALTH : EPOCH_CHURN;
            health_reset(epoch_kind == EPOCH_HOT      ? FLIP_RAMPS
                         : epoch_kind == EPOCH_HEALTH ? FLIP_ALL
                                                      : FLIP_NONE);
            if (epoch_kind == EPOCH_HOT) {
                reports_clear();
                prepare_hot();
                hot_epochs++;
            } else {
                atomic_store(&reporter_on, 1);
            }
            if (epoch_kind == EPOCH_HEALTH)
                health_epochs++;
        }
        atomic_store_explicit(&epoch_stop, 0, memory_order_release);
        pthread_barrier_wait(&barrier); /* B */
        if (over)
            break;
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(threads[i].tid, NULL);
    atomic_store(&flipper_quit, 1);
    pthread_join(flipper, NULL);
    atomic_store(&reporter_quit, 1);
    pthread_join(reporter, NULL);
    health_reset(FLIP_NONE);
    double elapsed = (double)(now_ns() - start) / 1e9;

    /* Everything released: the ring's total and every load are 0. */
    CHECK(chring_leases(ring) == 0, "end: chring_leases = %" PRIu64 " after every release",
          chring_leases(ring));
    const chring_snap_t *s = chring_snap_enter(ring);
    for (size_t i = 0; i < chring_snap_len(s); i++)
        CHECK(chring_member_load(chring_snap_member(s, i)) == 0,
              "end: member %.40s has load %" PRIu64, chring_member_name(chring_snap_member(s, i)),
              chring_member_load(chring_snap_member(s, i)));
    chring_snap_exit(ring, s);

    chring_stats_t st;
    chring_stats(ring, &st);
    uint64_t retired_before_free = atomic_load(&retires_total);
    for (unsigned i = 0; i < NSLOTS; i++)
        if (slots[i].present)
            atomic_store(&slots[i].udata->state, ST_FREEING);
    chring_free(&ring);
    CHECK(ring == NULL, "chring_free did not clear the pointer");

    /* Every member ever added is retired exactly once by now. */
    uint32_t ids = atomic_load(&next_id);
    for (uint32_t id = 0; id < ids; id++) {
        unsigned c = atomic_load(&retire_count[id]);
        CHECK(c == 1, "member udata #%u retired %u times (expected exactly once)", id, c);
    }
    CHECK(atomic_load(&retires_total) == ids, "retires %" PRIu64 " != members %u",
          atomic_load(&retires_total), ids);

    uint64_t lookups = 0, bounded = 0, bchecked = 0, lookup_n = 0, acquires = 0, releases = 0,
             holds = 0, nested = 0, names = 0, hot = 0, mchecks = 0, over = 0, late = 0, chosen = 0,
             enoent = 0, nretries = 0, nforks = 0, hsteps = 0, hacq = 0, hdown = 0, hunstable = 0,
             henoent = 0;
    for (int i = 0; i < nthreads; i++) {
        thread_t *t = &threads[i];
        lookups += t->lookups;
        bounded += t->bounded;
        bchecked += t->bounded_checked;
        lookup_n += t->lookup_n;
        acquires += t->acquires;
        releases += t->releases;
        holds += t->holds;
        nested += t->nested;
        names += t->lookup_names;
        hot += t->hot_acquires;
        mchecks += t->member_checks;
        late += t->late_releases;
        chosen += t->acquire_members;
        enoent += t->acquire_member_enoent;
        nretries += t->retries;
        nforks += t->forks;
        hsteps += t->health_steps;
        hacq += t->health_acquires;
        hdown += t->health_on_down;
        hunstable += t->health_unstable;
        henoent += t->health_enoent;
        if (t->max_hot_load_over > over)
            over = t->max_hot_load_over;
    }
    printf("torture: %.2f s, %" PRIu64 " epochs (%" PRIu64 " hot), %" PRIu64 " quiescent "
           "checkpoints\n",
           elapsed, epochs, hot_epochs, checkpoints);
    printf("  readers: %" PRIu64 " lookups (%.0f/s), %" PRIu64 " bounded lookups (%" PRIu64
           " recomputed), %" PRIu64 " lookup_n, %" PRIu64 " nested sections, %" PRIu64
           " full snapshot scans, %" PRIu64 " lookup_name\n",
           lookups, (double)lookups / elapsed, bounded, bchecked, lookup_n, nested, mchecks, names);
    printf("  leases: %" PRIu64 " acquires (%.0f/s; %" PRIu64 " on the hot key, %" PRIu64
           " by chring_acquire_member, %" PRIu64 " of it refused as -ENOENT), %" PRIu64
           " releases (%" PRIu64 " after their member left), %" PRIu64 " spills, %" PRIu64
           " saturated; hot-key load above bound "
           "(in-flight slack) at most %" PRIu64 "; hot m read at most %" PRIu64 " (bound %" PRIu64
           ")\n",
           acquires, (double)acquires / elapsed, hot, chosen, enoent, releases, late, st.spills,
           st.saturated, over, max_m_seen, (uint64_t)nthreads * (K_HOT + 1) + m_slack);
    printf("  retries: %" PRIu64 " chring_acquire_skip (stats.retries %" PRIu64
           "), never onto a skipped member; fork: %" PRIu64 " children of %d planned, each "
           "published, acquired, released and freed the ring\n",
           nretries, st.retries, nforks, forks);
    printf("  health: %" PRIu64 " epochs, %" PRIu64 " reader steps (%" PRIu64
           " with a flip during the lookups), %" PRIu64 " acquires and retries (%" PRIu64
           " onto a member flipped during the call, %" PRIu64 " -ENOENT); flipper: %" PRIu64
           " down, %" PRIu64 " up, %" PRIu64 " on non-members, %" PRIu64 " constant and %" PRIu64
           " timed ramps, %" PRIu64 " chring_quiesce\n",
           health_epochs, hsteps, hunstable, hacq, hdown, henoent, flips_down, flips_up,
           flips_enoent, ramps_const, ramps_timed, quiesces);
    /* A report on a member down returns 0 and is not recorded: the reporter cannot tell. */
    CHECK(st.reports >= reports_cleared && st.reports <= reports_made + reports_cleared,
          "stats.reports %" PRIu64 " outside [%" PRIu64 ", %" PRIu64 "]", st.reports,
          reports_cleared, reports_made + reports_cleared);
    printf("  reports: %" PRIu64 " recorded (stats.reports %" PRIu64 "), %" PRIu64
           " on a member that had left\n",
           reports_made, st.reports, reports_enoent);
    printf("  snapshots: %" PRIu64 " held by readers, %" PRIu64 " held by the writer\n", holds,
           w_moved_checks);
    printf("  writer: %" PRIu64 " steps, %" PRIu64 " publishes (%.0f/s): %" PRIu64 " adds, %" PRIu64
           " removes, %" PRIu64 " re-weights, %" PRIu64 " re-adds, %" PRIu64 " batches, %" PRIu64
           " syncs, %" PRIu64 " no-change rounds, %" PRIu64 " failing rounds\n",
           writer_steps, st.publishes, (double)st.publishes / elapsed, w_adds, w_removes, w_weights,
           w_readds, w_updates, w_syncs, w_noops, w_failed);
    printf("  retire: %u members created, %" PRIu64 " retired during the run, %u after "
           "chring_free: each exactly once\n",
           ids, retired_before_free, ids - (uint32_t)retired_before_free);
    printf("torture: OK\n");

    for (uint32_t id = 0; id < ids; id++)
        free(atomic_load(&udata_ptr[id]));
    free(udata_ptr);
    free(retire_count);
    free(threads);
    pthread_barrier_destroy(&barrier);
    (void)members_created;
    return 0;
}
