/* chring health flips: one thread marks a member down and up while others look keys up.
 *
 * SPDX-License-Identifier: MIT
 *
 *   chring-health-flips [SECONDS]   (default: $CHRING_HEALTH_FLIPS_SECONDS, else 3)
 *
 * Environment: CHRING_HEALTH_FLIPS_SECONDS (the free-running stage's length),
 * CHRING_HEALTH_FLIPS_THREADS (readers, default 3).
 *
 * A plain main() program (not Criterion) so that it runs under ThreadSanitizer; it uses only the
 * public header.  The expected owners with the flipped member up and down are computed before any
 * thread starts: with it up by plain lookups, with it down by the test's own clockwise walk over
 * the snapshot's points (chring_snap_point) past that member, never by asking the library.  The
 * membership never changes, so member pointers stay valid and compare by identity.
 *
 *   - Lock-step stage (include/chring.h, chring_set_down: "seen by every read section that begins
 *     after it returns").  The writer sets the state of phase p (down on odd phases), then
 *     publishes p with a release store and waits until every reader has acknowledged p before it
 *     flips again.  A reader that loaded p with an acquire load therefore looks up while the state
 *     is exactly p's: every plain lookup, lookup by hash and n-replica lookup must give the
 *     expected answer of that state, and an acquire of a key of the flipped member must not land
 *     on it while it is down.
 *   - Free-running stage.  The writer flips as fast as it can for the stage's length (and at most
 *     FREE_FLIPS times); readers check that every answer is the expected one of one of the two
 *     states (a key of another member never moves, a key of the flipped member goes to it or to
 *     the walk's next member, an n-replica answer is one of the two lists), that acquires place
 *     every key somewhere, and that stats.down is 0 or 1.
 *   - At the end, the member up again, every key is back on its owner.
 *
 * Every wait is bounded (a reader that stops acknowledging fails the run after WAIT_SECONDS).
 * Any violation prints one line starting with "health-flips: FAIL" and exits 1; a clean run prints
 * its counts and "health-flips: OK".
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chring.h"

#define NMEMBERS 16
#define FLIPPED 3
#define NKEYS 4096
#define NREP 3
#define MAX_READERS 16
#define LOCKSTEP_PHASES 400
#define FREE_FLIPS 2000000L
#define WAIT_SECONDS 60.0
#define BATCH 256

enum stage {
    STAGE_LOCKSTEP,
    STAGE_FREE,
    STAGE_STOP
};

static chring_t *ring;
static const chring_member_t *flipped;
static char keys[NKEYS][16];
static size_t key_len[NKEYS];
static const chring_member_t *want[2][NKEYS]; /* [0]: everyone up, [1]: the member down */
static const chring_member_t *reps[2][NKEYS][NREP];
static size_t nreps[2][NKEYS];
static int flipped_keys[NKEYS];
static size_t nflipped_keys;

static _Atomic int stage = STAGE_LOCKSTEP;
static _Atomic long phase = -1;
static _Atomic long acked[MAX_READERS];
static _Atomic long lookups, free_seen_down;
static int nreaders = 3;

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "health-flips: FAIL ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    exit(1); /* ends every thread the program started */
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *name_of(const chring_member_t *m)
{
    return m ? chring_member_name(m) : "(none)";
}

/* ---- expected answers, before any thread starts -------------------------------------------- */

static uint64_t *pos;
static const chring_member_t **owner;
static size_t npoints;

static size_t first_point(uint64_t h)
{
    size_t lo = 0, hi = npoints;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pos[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == npoints ? 0 : lo;
}

/* Up to NREP distinct members clockwise from h, past `skip` (NULL: none). */
static size_t walk(uint64_t h, const chring_member_t *skip, const chring_member_t **out)
{
    size_t got = 0, i = first_point(h);
    for (size_t step = 0; step < npoints && got < NREP; step++, i = (i + 1) % npoints) {
        const chring_member_t *m = owner[i];
        bool seen = m == skip;
        for (size_t k = 0; k < got && !seen; k++)
            seen = out[k] == m;
        if (!seen)
            out[got++] = m;
    }
    return got;
}

static void expect(void)
{
    const chring_snap_t *s = chring_snap_enter(ring);
    char name[32];
    snprintf(name, sizeof name, "member-%02d", FLIPPED);
    flipped = chring_snap_find(s, name);
    if (flipped == NULL)
        fail("the flipped member is missing");
    npoints = chring_snap_points(s);
    pos = calloc(npoints, sizeof *pos);
    owner = calloc(npoints, sizeof *owner);
    if (pos == NULL || owner == NULL)
        fail("out of memory");
    for (size_t i = 0; i < npoints; i++)
        if (chring_snap_point(s, i, &pos[i], &owner[i]) != 0)
            fail("chring_snap_point(%zu)", i);
    for (int k = 0; k < NKEYS; k++) {
        snprintf(keys[k], sizeof keys[k], "key-%d", k);
        key_len[k] = strlen(keys[k]);
        uint64_t h = chring_snap_hash(s, keys[k], key_len[k]);
        want[0][k] = chring_snap_lookup(s, keys[k], key_len[k]);
        nreps[0][k] = chring_snap_lookup_n(s, keys[k], key_len[k], reps[0][k], NREP);
        const chring_member_t *check[NREP];
        if (walk(h, NULL, check) != nreps[0][k] || check[0] != want[0][k])
            fail("the walk disagrees with the library on %s with everyone up", keys[k]);
        nreps[1][k] = walk(h, flipped, reps[1][k]);
        want[1][k] = reps[1][k][0];
        if (want[0][k] == flipped)
            flipped_keys[nflipped_keys++] = k;
    }
    chring_snap_exit(ring, s);
    free(pos);
    free(owner);
    if (nflipped_keys == 0)
        fail("the flipped member owns no key");
}

/* ---- readers ------------------------------------------------------------------------------- */

static bool same_list(const chring_member_t *const *a, size_t na, const chring_member_t *const *b,
                      size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* Strict: the state is exactly `down` for the whole batch. */
static void check_strict(int down, int first)
{
    const chring_snap_t *s = chring_snap_enter(ring);
    for (int j = 0; j < BATCH; j++) {
        int k = (first + j) % NKEYS;
        const chring_member_t *m = chring_snap_lookup(s, keys[k], key_len[k]);
        if (m != want[down][k])
            fail("lock-step: %s on %s, expected %s (down = %d)", keys[k], name_of(m),
                 name_of(want[down][k]), down);
        uint64_t h = chring_snap_hash(s, keys[k], key_len[k]);
        if (chring_snap_lookup_hash(s, h) != m)
            fail("lock-step: %s by hash on another member than %s (down = %d)", keys[k], name_of(m),
                 down);
        const chring_member_t *out[NREP];
        size_t n = chring_snap_lookup_n(s, keys[k], key_len[k], out, NREP);
        if (!same_list(out, n, reps[down][k], nreps[down][k]))
            fail("lock-step: replicas of %s (first %s) not the expected ones (down = %d)", keys[k],
                 name_of(n ? out[0] : NULL), down);
    }
    chring_snap_exit(ring, s);
    atomic_fetch_add(&lookups, BATCH);
    for (int j = 0; j < 8; j++) {
        int k = flipped_keys[(size_t)(first + j) % nflipped_keys];
        chring_lease_t lease;
        if (chring_acquire(ring, keys[k], key_len[k], &lease) != 0)
            fail("lock-step: acquire %s failed (down = %d)", keys[k], down);
        if (down && lease.member == flipped)
            fail("lock-step: %s acquired on %s while it is down", keys[k], name_of(flipped));
        chring_release(ring, &lease);
    }
}

/* Free-running: each answer is the one of either state. */
static void check_either(int first)
{
    long seen_down = 0;
    const chring_snap_t *s = chring_snap_enter(ring);
    for (int j = 0; j < BATCH; j++) {
        int k = (first + j) % NKEYS;
        const chring_member_t *m = chring_snap_lookup(s, keys[k], key_len[k]);
        if (m != want[0][k] && m != want[1][k])
            fail("free: %s on %s, neither state's owner", keys[k], name_of(m));
        seen_down += m != want[0][k];
        const chring_member_t *out[NREP];
        size_t n = chring_snap_lookup_n(s, keys[k], key_len[k], out, NREP);
        if (!same_list(out, n, reps[0][k], nreps[0][k]) &&
            !same_list(out, n, reps[1][k], nreps[1][k]))
            fail("free: replicas of %s (first %s) are neither state's", keys[k],
                 name_of(n ? out[0] : NULL));
    }
    chring_snap_exit(ring, s);
    atomic_fetch_add(&lookups, BATCH);
    atomic_fetch_add(&free_seen_down, seen_down);
    int k = flipped_keys[(size_t)first % nflipped_keys];
    chring_lease_t lease;
    if (chring_acquire(ring, keys[k], key_len[k], &lease) != 0 || lease.member == NULL)
        fail("free: acquire %s placed nothing", keys[k]);
    chring_release(ring, &lease);
    chring_stats_t st;
    chring_stats(ring, &st);
    if (st.down > 1)
        fail("free: stats.down = %llu", (unsigned long long)st.down);
}

static void *reader(void *arg)
{
    int id = (int)(intptr_t)arg;
    int first = id * 997;
    long last = -1;
    for (;;) {
        int st = atomic_load(&stage);
        if (st == STAGE_STOP)
            break;
        if (st == STAGE_LOCKSTEP) {
            long p = atomic_load_explicit(&phase, memory_order_acquire);
            if (p == last || p < 0) {
                sched_yield();
                continue;
            }
            check_strict((int)(p & 1), first);
            last = p;
            atomic_store_explicit(&acked[id], p, memory_order_release);
        } else {
            check_either(first);
        }
        first = (first + BATCH) % NKEYS;
    }
    return NULL;
}

/* ---- the writer (main thread) --------------------------------------------------------------- */

static void set_state(int down)
{
    char name[32];
    snprintf(name, sizeof name, "member-%02d", FLIPPED);
    int rc = chring_set_down(ring, name, down);
    if (rc != 0)
        fail("chring_set_down(%s, %d): %d", name, down, rc);
}

int main(int argc, char **argv)
{
    double seconds = 3;
    const char *env = getenv("CHRING_HEALTH_FLIPS_SECONDS");
    if (argc > 1)
        seconds = atof(argv[1]);
    else if (env != NULL)
        seconds = atof(env);
    env = getenv("CHRING_HEALTH_FLIPS_THREADS");
    if (env != NULL)
        nreaders = atoi(env);
    if (nreaders < 1 || nreaders > MAX_READERS || !(seconds > 0))
        fail("bad arguments: %g seconds, %d readers", seconds, nreaders);

    if (chring_new(&ring, NULL) != 0)
        fail("chring_new");
    for (int i = 0; i < NMEMBERS; i++) {
        char name[32];
        snprintf(name, sizeof name, "member-%02d", i);
        if (chring_add(ring, name, 1 + (uint32_t)(i % 3), NULL) != 0)
            fail("chring_add(%s)", name);
    }
    expect();
    for (int i = 0; i < MAX_READERS; i++)
        atomic_init(&acked[i], -1);

    pthread_t threads[MAX_READERS];
    for (int i = 0; i < nreaders; i++)
        if (pthread_create(&threads[i], NULL, reader, (void *)(intptr_t)i) != 0)
            fail("pthread_create %d", i);

    /* Lock-step: state p & 1, published as phase p, flipped again once every reader saw it. */
    double deadline = now_s() + WAIT_SECONDS;
    for (long p = 0; p < LOCKSTEP_PHASES; p++) {
        set_state((int)(p & 1));
        atomic_store_explicit(&phase, p, memory_order_release);
        for (int i = 0; i < nreaders; i++)
            while (atomic_load_explicit(&acked[i], memory_order_acquire) < p) {
                if (now_s() > deadline)
                    fail("lock-step: reader %d did not acknowledge phase %ld in %g s", i, p,
                         WAIT_SECONDS);
                sched_yield();
            }
    }
    long lockstep_lookups = atomic_load(&lookups);

    /* Free-running. */
    atomic_store(&stage, STAGE_FREE);
    double end = now_s() + seconds;
    long flips = 0;
    while (flips < FREE_FLIPS && now_s() < end) {
        set_state((int)(++flips & 1));
        if (flips % 31 == 0)
            sched_yield(); /* give the readers the core now and then, in either state (31 is odd) */
    }
    set_state(0);
    atomic_store(&stage, STAGE_STOP);
    for (int i = 0; i < nreaders; i++)
        pthread_join(threads[i], NULL);

    /* Up again: every key on its owner. */
    const chring_snap_t *s = chring_snap_enter(ring);
    for (int k = 0; k < NKEYS; k++)
        if (chring_snap_lookup(s, keys[k], key_len[k]) != want[0][k])
            fail("end: %s not back on %s", keys[k], name_of(want[0][k]));
    chring_snap_exit(ring, s);
    chring_stats_t st;
    chring_stats(ring, &st);
    if (st.down != 0 || st.leases != 0)
        fail("end: stats.down %llu, leases %llu", (unsigned long long)st.down,
             (unsigned long long)st.leases);
    chring_free(&ring);
    printf("health-flips: %d readers, %d lock-step phases (%ld lookups), %ld free flips (%ld "
           "lookups, %ld answered with the member down)\n",
           nreaders, LOCKSTEP_PHASES, lockstep_lookups, flips,
           atomic_load(&lookups) - lockstep_lookups, atomic_load(&free_seen_down));
    printf("health-flips: OK\n");
    return 0;
}
