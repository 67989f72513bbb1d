/* Snapshot blocks: one allocation per snapshot, the spare-block cache, and a snapshot's end.
 * SPDX-License-Identifier: MIT
 *
 * A snapshot is one block: its header, the members sorted by name with their weights, point
 * counts and slots, the slot table, the points (positions, then owners) and the prefix index.
 *
 * References (docs/design.md §4): a snapshot is born with one reference, owned by the ring's
 * published pointer and dropped by an RCU callback after the grace period that follows its
 * replacement; chring_snap_hold adds one, chring_snap_put drops one.  Whoever drops the last
 * destroys it: it drops its reference on its node of the membership chain (below), which drops
 * the members no later snapshot lists once the snapshots before it are gone too (member.h), and
 * its block goes to the spare-block cache.
 *
 * The spare-block cache.  A snapshot of a large ring is megabytes; allocating it fresh for every
 * publish costs a page fault per 4 KiB (measured here: about 730 faults, 0.7-1 ms, for one add at
 * 1000 x 160, as much as the merge itself).  So the blocks of destroyed snapshots are kept
 * (struct chring_blocks, owned by the ring), up to CHRING_SPARES of them, and reused by the next
 * publishes when their size fits.  Several, because in a burst of back-to-back publishes the
 * replaced snapshots may come back late: the ring's reclaimer (reclaim.c) gives a snapshot up
 * 0.1-0.2 ms after its publish while a core is free, but when readers keep every core busy a grace
 * period takes 10 ms (urcu-bp sleeps between its checks), so at 10,000 x 160 (3-7 ms a publish)
 * one to three are still waiting for their grace period when the next publish needs a block (with
 * liburcu's call_rcu, before the reclaimer, in every burst); a fresh 30 MB block then costs 4-5 ms of huge-page faults when the
 * kernel has free 2 MiB pages and 30-260 ms when it compacts (measured here), far past a
 * publish.  A large ring's first publish therefore makes up to CHRING_PREFAULT blocks ready at
 * its end (prefault_spares; fewer for very large blocks, or as chring_set_prefault says:
 * prefault_count) and, while publishes go on, the ring keeps CHRING_PREFAULT (block_take).  A new
 * block has 1/64 more room than asked, so the block of a snapshot with one member less fits the
 * next one with the member back.  Other spares that no publish took for CHRING_SPARE_AGE
 * publishes are freed.  At rest the ring's trimmer frees every spare no publish took for
 * CHRING_SPARE_IDLE_NS (below) but blocks->at_rest of those that fit the last publish's size
 * (0 unless chring_set_spares_at_rest asks for more), and chring_trim frees them all at once.  Under
 * AddressSanitizer a kept block is poisoned, so a use after the grace period is still reported
 * as it would be after free(). */
#include "index.h"
#include "member.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static const struct chring_health no_health; /* nothing is down in the empty snapshot */

const chring_snap_t chring__empty_snap = {
    .magic = CHRING_SNAP_MAGIC,
    .refs = 1,
    .health = &no_health,
    .prof = {.desc = &chring__profiles[CHRING_PROFILE_HASH64],
             .id = CHRING_PROFILE_HASH64,
             .bits = 64,
             .shift = 0,
             .vnodes = CHRING_DEFAULT_VNODES},
    .nbuckets = 2,
    .pos_w = 8,
    .search = 8,
    .owner_w = 2,
    .owner_mask = 0xffff,
};

/* ---- the spare-block cache ---------------------------------------------------------------- */

/* Takes the block in a cache slot (NULL if empty), leaving it empty: an atomic exchange, a full
 * barrier like the compare-and-swap that put it there.  Not ck_pr_fas_ptr: under ThreadSanitizer
 * (CK_USE_CC_BUILTINS) ck builds it from a plain volatile load and a CAS loop, and the load is a
 * race TSan reports against a spare_put on another thread. */
static chring_snap_t *spare_take(struct chring_blocks *blocks, unsigned k)
{
    return __atomic_exchange_n(&blocks->spare[k], NULL, __ATOMIC_SEQ_CST);
}

/* The trimmer's flags (below) and the block size the writer shares with it: C11 atomics that
 * ThreadSanitizer sees (ck_pr's loads and stores are volatile accesses to it).  A store
 * releases what came before it, a load acquires it. */
#define ATOMIC_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ATOMIC_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

static void block_free(chring_snap_t *b)
{
    CHRING_UNPOISON_BLOCK(b, b->block_size);
    chring__free_block(b, b->block_size);
}

/* Puts b in a free slot of the cache; false when every slot is taken.  Compare-and-swap is a
 * full barrier: whoever takes the block sees it complete. */
static bool spare_put(struct chring_blocks *blocks, chring_snap_t *b)
{
    for (unsigned k = 0; k < CHRING_SPARES; k++)
        if (ck_pr_cas_ptr(&blocks->spare[k], NULL, b))
            return true;
    return false;
}

static void trimmer_start(struct chring_blocks *blocks);

static void block_stash(chring_snap_t *s)
{
    struct chring_blocks *blocks = s->blocks;
    if (blocks == NULL) {
        block_free(s);
        return;
    }
    s->stashed = CHRING_LOAD_64(&blocks->takes);
    s->stashed_ns = chring__now_ns();
    CHRING_POISON_BLOCK((char *)s + sizeof *s, s->block_size - sizeof *s);
    if (!spare_put(blocks, s)) {
        block_free(s); /* the cache is full: the blocks in it are as good */
        return;
    }
    trimmer_start(blocks);
}

/* Large snapshots ask the kernel for transparent huge pages (madvise; Linux's THP in "madvise"
 * mode, Debian's default): a 40 MB snapshot then takes 20 page faults instead of 10,000 when it
 * is first written, and a lookup's index and point loads miss the TLB far less.  Only the 2 MiB
 * aligned interior of the block can be huge.  Where the kernel refuses (no THP, memory that is
 * not anonymous from a custom allocator) nothing changes: the error is ignored. */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_MIN (4 * HUGE_PAGE)

static void advise_huge(char *block, size_t size)
{
#ifdef MADV_HUGEPAGE
    if (size < HUGE_MIN)
        return;
    uintptr_t start = ((uintptr_t)block + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)block + size) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (end > start)
        (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)block, (void)size;
#endif
}

/* Spare blocks made ready ahead of a burst (docs/design.md §4, "Spare blocks").  The first
 * publish of a large ring that found no spare of its size (its build, or the first publish
 * after the ring doubled or halved) allocates its block and, at its end (chring__chain_link,
 * once nothing can fail, before the new snapshot is published), fills the cache with
 * CHRING_PREFAULT blocks of the same size, every page written once, so that the kernel's page
 * faults (zeroing, huge-page compaction: 4 to 260 ms for a 30 MB block here) are paid by this
 * publish instead of by the next ones of a burst, which find the blocks of the snapshots they
 * replaced still waiting for their grace period.  Five: a burst at 10,000 x 160 on this machine
 * had up to three blocks waiting and, with three made ready, still faulted in a fresh block about
 * once in 40 to 120 publishes (docs/bench.md §10).  Faulting the block in 4 KiB pages instead
 * (no MADV_HUGEPAGE, no compaction) is no way out: 8-18 ms for 30 MB here.  Once per size: a
 * ring that runs short later (grace periods slower than five publishes) allocates one block at a
 * time as before.  "Of its size": blocks of the size made ready would fit the need (block_fits),
 * so a publish with a member more than the build, after the trimmer freed the build's spares,
 * allocates its own block and no more (docs/design.md §4, "At rest").
 * At the end, not when the block is allocated: the spares are stamped when they are made, and
 * the trimmer frees a spare idle for CHRING_SPARE_IDLE_NS; made at the start of a build that
 * takes longer than that (16 M points: seconds), they were freed before the build published,
 * 1.7 GB zeroed for nothing.  Made at the end they also come after the build's scratch (the
 * sort's second buffer) is freed, so the build's peak holds one of them fewer.  Best effort: an
 * allocation that fails, or a full cache, leaves the rest as it is.  The writer's. */
/* How many spares a publish makes ready for blocks of `size` bytes: chring_set_prefault's
 * count, else as many as fit in CHRING_PREFAULT_BYTES, between CHRING_PREFAULT_MIN and
 * CHRING_PREFAULT.  A burst needs a spare for each block still waiting for its grace period
 * when the next publish needs one: the reclaimer hands a replaced block back 0.1-0.2 ms after
 * its publish while a core is free, 10 ms or more when readers keep every core busy (call_rcu,
 * when these counts were measured, 10-30 ms), and a publish's own time grows with the block (a copy of it: about 0.12-0.14 ms a MB
 * here), so the bigger the block, the fewer are out at once.  Measured with
 * chring-bench-prefault (20 back-to-back publishes right after the build, counts alternated,
 * 2-6 rounds each; docs/bench.md, "Spares a build makes ready"): at 20,000 x 160 (68 MB blocks,
 * 9.5 ms publishes) five made ready left no publish faulting a fresh block, two left one (21 to
 * 157 ms), none three (30 to 170 ms); at 50,000 x 160 (170 MB, 23 ms) and 100,000 x 160 (340 MB,
 * 38 ms) two left none in every round, one left four (210-360 ms), and a burst never held more
 * than the snapshot and two other blocks.  Five at 16 M points made the build's peak 101 bytes
 * a point of the library's own count (1.6 GB, two to three seconds of zeroing) against 51 with
 * two, for nothing.  384 MB gives five up to 76 MB blocks (about 3.6 M points), two from 192 MB
 * (about 9 M). */
static unsigned prefault_count(const struct chring_blocks *blocks, size_t size)
{
    if (blocks->prefault != 0)
        return blocks->prefault - 1; /* chring_set_prefault */
    size_t fit = CHRING_PREFAULT_BYTES / size;
    return fit >= CHRING_PREFAULT       ? CHRING_PREFAULT
           : fit <= CHRING_PREFAULT_MIN ? CHRING_PREFAULT_MIN
                                        : (unsigned)fit;
}

static void prefault_spares(struct chring_blocks *blocks, size_t need, size_t size, uint64_t now)
{
    if (blocks->prefaulted >= need && blocks->prefaulted / 2 <= need)
        return; /* done for this size */
    unsigned count = prefault_count(blocks, size);
    if (count == 0)
        return;
    blocks->prefaulted = size;
    for (unsigned made = 0; made < count; made++) {
        chring_snap_t *b = chring__alloc_block(size);
        if (b == NULL)
            break;
        advise_huge((char *)b, size);
        for (size_t at = 0; at < size; at += 4096)
            ((volatile char *)b)[at] = 0;
        memset(b, 0, sizeof *b);
        b->block_size = size;
        b->blocks = blocks;
        b->magic = CHRING_POISON;
        b->stashed = now;
        b->stashed_ns = chring__now_ns(); /* as it is made: the trimmer's age counts from here */
        CHRING_POISON_BLOCK((char *)b + sizeof *b, size - sizeof *b);
        if (!spare_put(blocks, b)) {
            block_free(b);
            break;
        }
    }
    trimmer_start(blocks);
}

/* The end of a publish whose block_take asked for spares (blocks->ready_size): makes them ready
 * when it is published (chring__chain_link), forgets them when it is not (chring__snap_discard).
 * The writer's. */
static void prefault_end(struct chring_blocks *blocks, bool published)
{
    if (blocks == NULL || blocks->ready_size == 0)
        return;
    size_t size = blocks->ready_size, need = blocks->ready_need;
    blocks->ready_size = 0;
    if (published)
        prefault_spares(blocks, need, size, CHRING_LOAD_64(&blocks->takes));
}

static bool block_fits(const chring_snap_t *b, size_t size)
{
    return b->block_size >= size && b->block_size / 2 <= size;
}

/* A block of at least size bytes: the spare that came last of those that fit (not more than
 * twice the need, so a shrunken ring does not pin a big block), else a new allocation, with
 * room to grow by 1/64 so that the next publish (a member added after one removed) fits in
 * it.  The other spares go back, but those that do not fit are freed, and so are those that no
 * publish took for CHRING_SPARE_AGE publishes, except, for a large ring (blocks of HUGE_MIN and
 * more), the CHRING_PREFAULT - 1 that came last: with the block this publish replaces, they
 * are the CHRING_PREFAULT spares the next burst starts with.  Aging them out as well left a
 * ring that had published slowly for a while with one or two spares, and the burst that came
 * next faulted in a fresh block as soon as its grace periods lagged (docs/design.md §4, "Spare
 * blocks").  The writer's. */
static char *block_take(struct chring_blocks *blocks, size_t size, size_t *got)
{
    chring_snap_t *fit[CHRING_SPARES];
    unsigned nfit = 0;
    uint64_t now = 0;
    if (blocks != NULL) {
        now = CHRING_LOAD_64(&blocks->takes) + 1;
        CHRING_STORE_64(&blocks->takes, now);
        ATOMIC_STORE(&blocks->wanted, size);
        /* The writer's first publish: every block stashed later was taken here first. */
        if (CHRING_LOAD_32(&blocks->ready) == 0 && sem_init(&blocks->wake, 0, 0) == 0)
            ATOMIC_STORE(&blocks->ready, 1);
    }
    uint64_t deadline = 0;
scan:
    for (unsigned k = 0; blocks != NULL && k < CHRING_SPARES; k++) {
        chring_snap_t *b = spare_take(blocks, k);
        if (b == NULL)
            continue;
        CHRING_UNPOISON_BLOCK(b, sizeof *b);
        if (!block_fits(b, size)) {
            block_free(b);
            continue;
        }
        /* Insertion by arrival, the one that came last first. */
        unsigned at = nfit++;
        for (; at > 0 && fit[at - 1]->stashed < b->stashed; at--)
            fit[at] = fit[at - 1];
        fit[at] = b;
    }
    /* No spare fits, but the reclaimer's thread is about to give up a snapshot this ring
     * replaced (in a burst, the one the publish before this one replaced: 0.1-0.2 ms here while
     * a core is free): wait for its block, up to CHRING_RETURN_WAIT_NS, rather than fault in a
     * fresh one (5-70 ms on this VM: docs/design.md §4, "Reclamation").  Not inside a read
     * section, whose end that thread's grace period waits for. */
    if (nfit == 0 && blocks != NULL && size >= HUGE_MIN &&
        __atomic_load_n(&blocks->returning, __ATOMIC_SEQ_CST) != 0 && !rcu_read_ongoing()) {
        uint64_t t = chring__now_ns();
        if (deadline == 0)
            deadline = t + CHRING_RETURN_WAIT_NS;
        if (t < deadline) {
            struct timespec pause = {0, 20000}; /* 20 us */
            nanosleep(&pause, NULL);
            goto scan;
        }
    }
    chring_snap_t *best = nfit > 0 ? fit[0] : NULL;
    unsigned insured = size >= HUGE_MIN ? CHRING_PREFAULT : 1;
    for (unsigned k = 1; k < nfit; k++) {
        if (k >= insured && now - fit[k]->stashed > CHRING_SPARE_AGE) {
            block_free(fit[k]);
            continue;
        }
        CHRING_POISON_BLOCK((char *)fit[k] + sizeof *fit[k], fit[k]->block_size - sizeof *fit[k]);
        if (!spare_put(blocks, fit[k]))
            block_free(fit[k]);
    }
    if (best != NULL) {
        *got = best->block_size;
        CHRING_UNPOISON_BLOCK(best, best->block_size);
        return (char *)best;
    }
    size_t need = size;
    size += size / 64;
    size = (size + 4095) & ~(size_t)4095;
    *got = size;
    char *block = chring__alloc_block(size);
    if (block != NULL)
        advise_huge(block, size);
    if (block != NULL && blocks != NULL && size >= HUGE_MIN) {
        blocks->ready_size = size; /* spares of this size, at the publish's end (prefault_end) */
        blocks->ready_need = need;
    }
    return block;
}

/* ---- the trimmer ---------------------------------------------------------------------------- */

/* Spares that no publish took for CHRING_SPARE_IDLE_NS are freed by a thread of the ring's own
 * (docs/design.md §4, "Spare blocks"), so that a ring at rest holds its current snapshot and
 * nothing more, with no call from the application: nothing else runs once publishes stop (the
 * last replaced snapshot comes back from the ring's reclaimer just after its grace period, whose
 * thread ends 100 ms later, and after that no library code runs until the next call).  The trimmer runs only while the cache
 * holds spares: the first spare put in an empty cache starts it (trimmer_start, from whichever
 * thread stashes: the reclaimer, a writer, a thread that puts a held snapshot), it sleeps
 * until the oldest spare is CHRING_SPARE_IDLE_NS old, frees the spares that are, and ends when
 * the cache is empty, or holds only the blocks->at_rest spares it keeps (docs/design.md §4,
 * "Spares kept at rest").  It takes spares with the same atomic exchange as a publish, so a publish
 * and the trimmer never hold one block at once; a spare it finds young goes back.  A burst after
 * a quiet while then allocates a fresh block for each of its first publishes until the blocks of
 * the snapshots it replaced come back (one to three here); making several ready at its first
 * publish instead, as a build does, cost that publish 100-400 ms (docs/bench.md §11).
 * chring__blocks_drop (chring_trim, chring_free) ends it first and
 * waits for it: after chring_free nothing touches the ring.  A child after fork() has no
 * trimmer (threads do not survive a fork): the process id tells, and the first spare the child
 * puts (its first publish) starts its own.
 * A trimmer that cannot be started (no thread) leaves the spares to the publishes' own aging
 * (block_take) and to chring_trim. */

/* How long a spare may wait untaken: CHRING_SPARE_IDLE_NS, or the environment's
 * CHRING_SPARE_IDLE_MS (read once; 0: no trimmer, spares stay until chring_trim or until the
 * publishes age them out). */
static uint64_t spare_idle_ns(void)
{
    static uint64_t idle; /* 0: not read yet; else the value + 1 */
    uint64_t v = ATOMIC_LOAD(&idle);
    if (v == 0) {
        v = CHRING_SPARE_IDLE_NS;
        const char *env = getenv("CHRING_SPARE_IDLE_MS");
        if (env != NULL && *env >= '0' && *env <= '9') {
            char *end;
            unsigned long long ms = strtoull(env, &end, 10);
            if (*end == '\0' && ms <= UINT64_C(1000000000))
                v = (uint64_t)ms * 1000000u;
        }
        ATOMIC_STORE(&idle, v + 1);
        return v;
    }
    return v - 1;
}

static bool trimmer_here(const struct chring_blocks *blocks)
{
    return ATOMIC_LOAD(&blocks->trimming) != 0 &&
           ATOMIC_LOAD(&blocks->trimmer_pid) == (int)getpid();
}

/* Frees the spares idle for CHRING_SPARE_IDLE_NS at `now`, except that the cache keeps
 * blocks->at_rest spares that fit the size the last publish asked for (the size the next one
 * will ask for, give or take a member): the young ones count first, then the idle ones that
 * came last.  A young spare that does not fit stays until it is idle, and does not count.  Not
 * simply the ones that came last: the empty snapshot's block, a few hundred bytes, comes back
 * after a build's grace period, later than the spares the build made ready, and was kept in
 * their place.  Returns the time the oldest young spare left will be idle, 0 if none is left:
 * the spares kept at rest are no reason to run again. */
static uint64_t trim_idle(struct chring_blocks *blocks, uint64_t now)
{
    chring_snap_t *taken[CHRING_SPARES];
    unsigned ntaken = 0;
    for (unsigned k = 0; k < CHRING_SPARES; k++) {
        chring_snap_t *b = spare_take(blocks, k);
        if (b == NULL)
            continue;
        /* Insertion by arrival, the one that came last first. */
        unsigned at = ntaken++;
        for (; at > 0 && taken[at - 1]->stashed_ns < b->stashed_ns; at--)
            taken[at] = taken[at - 1];
        taken[at] = b;
    }
    uint32_t keep = ATOMIC_LOAD(&blocks->at_rest);
    size_t wanted = ATOMIC_LOAD(&blocks->wanted);
    uint32_t kept = 0;
    uint64_t next = 0;
    for (unsigned k = 0; k < ntaken; k++) {
        chring_snap_t *b = taken[k];
        uint64_t due = b->stashed_ns + spare_idle_ns();
        bool young = due > now;
        bool fits = block_fits(b, wanted);
        if (!(young || (fits && kept < keep)) || !spare_put(blocks, b)) {
            block_free(b);
            continue;
        }
        kept += fits;
        if (young && (next == 0 || due < next))
            next = due;
    }
    return next;
}

/* blocks->trimming: TRIM_IDLE, no trimmer; TRIM_RUNS; TRIM_POKED, a spare was put while it
 * ran.  A trimmer's last access to blocks is the store or compare-and-swap that sets TRIM_IDLE:
 * after it, chring__blocks_drop may free the ring. */
enum {
    TRIM_IDLE,
    TRIM_RUNS,
    TRIM_POKED
};

/* A full barrier, like every compare-and-swap of the library. */
static bool trim_cas(struct chring_blocks *blocks, uint32_t from, uint32_t to)
{
    return __atomic_compare_exchange_n(&blocks->trimming, &from, to, false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}

static void *trimmer_main(void *arg)
{
    struct chring_blocks *blocks = arg;
    uint64_t due = chring__now_ns() + spare_idle_ns();
    for (;;) {
        struct timespec at = {(time_t)(due / 1000000000u), (long)(due % 1000000000u)};
        while (sem_clockwait(&blocks->wake, CLOCK_MONOTONIC, &at) != 0 && errno == EINTR)
            continue;
        if (ATOMIC_LOAD(&blocks->stop) != 0)
            break;
        ATOMIC_STORE(&blocks->trimming, TRIM_RUNS); /* a poke from now on is seen below */
        due = trim_idle(blocks, chring__now_ns());
        if (due != 0)
            continue;
        /* Full barrier: a spare put after the cache was seen empty poked first, or finds the
         * trimmer gone and starts another. */
        if (trim_cas(blocks, TRIM_RUNS, TRIM_IDLE))
            return NULL;
        due = chring__now_ns() + spare_idle_ns();
    }
    ATOMIC_STORE(&blocks->trimming, TRIM_IDLE);
    return NULL;
}

/* Starts the trimmer unless one runs (then pokes it): best effort, a thread that cannot be made
 * is no error.  After a spare_put. */
static void trimmer_start(struct chring_blocks *blocks)
{
    if (ATOMIC_LOAD(&blocks->ready) == 0 || ATOMIC_LOAD(&blocks->stop) != 0 || spare_idle_ns() == 0)
        return;
    int pid = (int)getpid();
    if (ATOMIC_LOAD(&blocks->trimmer_pid) != pid) {
        ATOMIC_STORE(&blocks->trimming, TRIM_IDLE); /* the parent's, before a fork: not here */
        /* Before the state says a trimmer runs, so that trimmer_here never sees one without
         * its process (every thread that gets here stores the same pid). */
        ATOMIC_STORE(&blocks->trimmer_pid, pid);
    }
    for (;;) {
        uint32_t state = ATOMIC_LOAD(&blocks->trimming);
        if (state == TRIM_POKED)
            return;
        if (state == TRIM_RUNS) {
            if (trim_cas(blocks, TRIM_RUNS, TRIM_POKED))
                return;
            continue;
        }
        if (trim_cas(blocks, TRIM_IDLE, TRIM_RUNS))
            break;
    }
    if (!chring__thread_detached(trimmer_main, blocks, (size_t)64 << 10))
        ATOMIC_STORE(&blocks->trimming, TRIM_IDLE);
}

/* Ends the trimmer, if one runs in this process, and waits until it no longer touches blocks. */
static void trimmer_stop(struct chring_blocks *blocks)
{
    if (ATOMIC_LOAD(&blocks->ready) == 0)
        return;
    ATOMIC_STORE(&blocks->stop, 1);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (trimmer_here(blocks)) {
        sem_post(&blocks->wake);
        struct timespec pause = {0, 100000}; /* 0.1 ms */
        while (ATOMIC_LOAD(&blocks->trimming) != 0)
            nanosleep(&pause, NULL);
    }
    /* Posts the trimmer did not consume stay in the semaphore: drain them. */
    while (sem_trywait(&blocks->wake) == 0)
        continue;
    ATOMIC_STORE(&blocks->stop, 0);
}

int chring_set_spares_at_rest(chring_t *r, unsigned n)
{
    if (r == NULL || n > CHRING_SPARES)
        return -EINVAL;
    struct chring_blocks *blocks = &r->blocks;
    pthread_mutex_lock(&r->lock);
    uint32_t was = ATOMIC_LOAD(&blocks->at_rest);
    ATOMIC_STORE(&blocks->at_rest, (uint32_t)n);
    /* Fewer than before: spares the trimmer left when it ended may now be too many, and no
     * trimmer runs to free them.  Start one (or poke the one that runs); it frees the surplus
     * once it is idle. */
    bool any = false;
    for (unsigned k = 0; k < CHRING_SPARES; k++)
        any = any || __atomic_load_n(&blocks->spare[k], __ATOMIC_ACQUIRE) != NULL;
    if (n < was && any)
        trimmer_start(blocks);
    pthread_mutex_unlock(&r->lock);
    return 0;
}

int chring_set_prefault(chring_t *r, unsigned n)
{
    if (r == NULL || n > CHRING_SPARES - 1)
        return -EINVAL;
    pthread_mutex_lock(&r->lock);
    r->blocks.prefault = (uint32_t)n + 1; /* read by the writer, under this lock */
    pthread_mutex_unlock(&r->lock);
    return 0;
}

void chring__blocks_drop(struct chring_blocks *blocks)
{
    trimmer_stop(blocks);
    for (unsigned k = 0; k < CHRING_SPARES; k++) {
        chring_snap_t *b = spare_take(blocks, k);
        if (b != NULL) {
            CHRING_UNPOISON_BLOCK(b, sizeof *b);
            block_free(b);
        }
    }
}

/* ---- layout ------------------------------------------------------------------------------- */

struct layout {
    size_t members_off, slot_member_off, pos_off, weights_off, mpoints_off, mslot_off;
    size_t slot_weight_off, slot_rank_off, owner_off, index_off, size;
};

static size_t align_up(size_t x, size_t a)
{
    return (x + a - 1) & ~(a - 1);
}

/* Pointer arrays first, then the positions (8 or 4 bytes), then the 32-bit arrays, then the
 * owners (owner_w bytes a point and the padding), then the index: each stays aligned.  The lines
 * of a line index come last, with room to start them on a cache line wherever the
 * block starts (chring__snap_alloc). */
static struct layout layout_for(size_t nmembers, size_t nslots, size_t npoints, size_t nbuckets,
                                bool lines, bool packed, uint32_t pos_w)
{
    struct layout l;
    size_t at = align_up(sizeof(chring_snap_t), 16);
    l.members_off = at;
    at += nmembers * sizeof(chring_member_t *);
    l.slot_member_off = at;
    at += nslots * sizeof(chring_member_t *);
    l.pos_off = at = align_up(at, 16);
    at += (npoints + CHRING_SENTINELS) * pos_w;
    l.weights_off = at;
    at += nmembers * sizeof(uint32_t);
    l.mpoints_off = at;
    at += nmembers * sizeof(uint32_t);
    l.mslot_off = at;
    at += nmembers * sizeof(uint32_t);
    l.slot_weight_off = at;
    at += nslots * sizeof(uint32_t);
    l.slot_rank_off = at;
    at += nslots * sizeof(uint32_t);
    l.owner_off = at;
    at += npoints * chring__owner_width(nslots) + CHRING_OWNER_PAD;
    l.index_off = at = align_up(at, sizeof(uint32_t));
    if (lines)
        at += (nbuckets + 1) * sizeof(struct chring_line) + CHRING_CACHELINE - 1;
    else
        at += chring__index_bytes(nbuckets, packed);
    l.size = at;
    return l;
}

/* A block of size bytes (block_take) with the header of a snapshot of l's layout: the counts,
 * the member and slot arrays placed (not filled); NULL when out of memory. */
static chring_snap_t *snap_header(struct chring_blocks *blocks, size_t size, const struct layout *l,
                                  const struct chring_prof *prof, size_t nmembers, size_t nslots,
                                  uint64_t total_weight)
{
    size_t got;
    char *block = block_take(blocks, size, &got);
    if (block == NULL)
        return NULL;
    chring_snap_t *s = (chring_snap_t *)(void *)block;
    memset(s, 0, sizeof *s);
    s->magic = CHRING_SNAP_MAGIC;
    s->refs = 1;
    s->blocks = blocks;
    s->block_size = got;
    s->prof = *prof;
    s->nmembers = nmembers;
    s->total_weight = total_weight;
    s->members = (chring_member_t **)(void *)(block + l->members_off);
    s->weights = (uint32_t *)(void *)(block + l->weights_off);
    s->member_points = (uint32_t *)(void *)(block + l->mpoints_off);
    s->member_slot = (uint32_t *)(void *)(block + l->mslot_off);
    s->nslots = nslots;
    s->slot_member = (chring_member_t **)(void *)(block + l->slot_member_off);
    s->slot_weight = (uint32_t *)(void *)(block + l->slot_weight_off);
    s->slot_rank = (uint32_t *)(void *)(block + l->slot_rank_off);
    return s;
}

chring_snap_t *chring__snap_alloc(struct chring_blocks *blocks, const struct chring_prof *prof,
                                  chring_member_t *const *members, const uint32_t *weights,
                                  size_t nmembers, size_t nslots, uint64_t total_weight,
                                  size_t npoints, size_t prev_buckets)
{
    bool lines = chring__index_lines(prof, npoints, nslots);
    size_t nbuckets = lines ? chring__index_line_count(npoints, prev_buckets)
                            : chring__index_buckets(npoints, prof->bits, prev_buckets);
    bool packed = !lines && chring__index_packed(prof, npoints);
    uint32_t pos_w = chring__pos_width(prof);
    struct layout l = layout_for(nmembers, nslots, npoints, nbuckets, lines, packed, pos_w);
    chring_snap_t *s = snap_header(blocks, l.size, &l, prof, nmembers, nslots, total_weight);
    if (s == NULL)
        return NULL;
    char *block = (char *)s;
    s->pos = block + l.pos_off;
    s->pos_w = pos_w;
    s->owner = (unsigned char *)(block + l.owner_off);
    chring__owner_shape(s, nslots);
    memset(s->owner + npoints * s->owner_w, 0, CHRING_OWNER_PAD); /* read, masked off */
    s->npoints = npoints;
    s->nbuckets = nbuckets;
    if (lines) {
        uintptr_t at = ((uintptr_t)(block + l.index_off) + CHRING_CACHELINE - 1) &
                       ~(uintptr_t)(CHRING_CACHELINE - 1);
        s->lines = (struct chring_line *)at;
    } else {
        s->index = (uint32_t *)(void *)(block + l.index_off);
        if (packed) /* the offsets after the bases */
            s->index_off = (uint8_t *)(block + l.index_off) +
                           ((nbuckets >> CHRING_PACK_SHIFT) + 2) * sizeof(uint32_t);
    }
    chring__search_shape(s);
    if (nmembers > 0) {
        memcpy(s->members, members, nmembers * sizeof *members);
        memcpy(s->weights, weights, nmembers * sizeof *weights);
    }
    return s;
}

chring_snap_t *chring__snap_alloc_chunked(struct chring_blocks *blocks,
                                          const struct chring_prof *prof,
                                          chring_member_t *const *members, const uint32_t *weights,
                                          size_t nmembers, size_t nslots, uint64_t total_weight,
                                          size_t npoints, size_t nbuckets)
{
    /* The layout of a flat snapshot of no points and no index, then the table (16-byte
     * entries) and the directory. */
    struct layout l = layout_for(nmembers, nslots, 0, 0, false, false, 8);
    unsigned shift = chring__chunk_shift(nbuckets);
    size_t nchunks = nbuckets >> shift;
    size_t table_off = align_up(l.size, 16);
    size_t dir_off = table_off + (nchunks + 1) * sizeof(struct chring_chunk_ref);
    size_t size = dir_off + ((npoints >> CHRING_CHUNK_DIR_SHIFT) + 1) * sizeof(uint32_t);
    chring_snap_t *s = snap_header(blocks, size, &l, prof, nmembers, nslots, total_weight);
    if (s == NULL)
        return NULL;
    char *block = (char *)s;
    s->pos_w = 8;
    chring__owner_shape(s, nslots);
    s->npoints = npoints;
    s->nbuckets = nbuckets;
    s->chunks = (struct chring_chunk_ref *)(void *)(block + table_off);
    s->nchunks = nchunks;
    s->chunk_shift = shift;
    s->chunk_dir = (uint32_t *)(void *)(block + dir_off);
    chring__search_shape(s);
    if (nmembers > 0) {
        memcpy(s->members, members, nmembers * sizeof *members);
        memcpy(s->weights, weights, nmembers * sizeof *weights);
    }
    return s;
}

void chring__snap_discard(chring_snap_t *s)
{
    chring__chunk_swap_free(s->swap, true); /* the chunks it made; those it shares stay */
    s->swap = NULL;
    prefault_end(s->blocks, false);
    block_free(s);
}

/* ---- references --------------------------------------------------------------------------- */

/* Members ahead of the one whose word is updated, prefetched for writing: each word is on a
 * line of its own member, so a run of them is a cache miss each without it. */
#define MEMBERS_AHEAD 12

static void members_unref(chring_member_t *const *members, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        if (j + MEMBERS_AHEAD < n && members[j + MEMBERS_AHEAD] != NULL)
            __builtin_prefetch(&members[j + MEMBERS_AHEAD]->word, 1, 3);
        if (members[j] != NULL) /* NULL: dropped by chring__chain_settle */
            chring__member_unref_snap(members[j]);
    }
}

/* The membership chain (struct chring_chain, docs/design.md §4, "References").  A member's
 * snapshot reference (member.h) is one, taken when the member joins (the publish of the first
 * snapshot that lists it) and dropped when the node of the last snapshot that lists it is freed.
 * A node is freed when its snapshot is destroyed and the node before it is freed, so not before
 * every snapshot published while the member was listed is destroyed: a reader or a holder of any
 * of them keeps it.  (A snapshot held from before the member joined keeps it too, until it is
 * put: the chain does not know where a member's listing began.  chring_free sorts that out for
 * the snapshots a fork() left held: chring__chain_settle.)  Before the chain every snapshot
 * took and dropped a reference on each of its members: two atomic operations on a line of each
 * member per publish, 100,000 cache misses at 100,000 members (docs/bench.md §11). */
struct chring_chain *chring__chain_new(size_t ngone)
{
    if (ngone > (SIZE_MAX - sizeof(struct chring_chain)) / sizeof(chring_member_t *))
        return NULL;
    struct chring_chain *c =
        chring__alloc(sizeof(struct chring_chain) + ngone * sizeof(chring_member_t *));
    if (c == NULL)
        return NULL;
    c->refs = 1; /* its snapshot's */
    c->next = NULL;
    c->snap = NULL;
    c->chunks = NULL;
    c->ngone = ngone;
    return c;
}

void chring__chain_link(chring_snap_t *cur, chring_snap_t *next, struct chring_chain *node,
                        chring_member_t *const *created, size_t n)
{
    prefault_end(next->blocks, true);
    for (size_t k = 0; k < n; k++)
        chring__member_ref_snap(created[k]);
    node->snap = next;
    next->chain = node;
    node->chunks = next->swap; /* the chunks next replaces go with cur's node */
    next->swap = NULL;
    if (cur->chain != NULL) {
        node->refs++;            /* the previous node's; nobody else can see node yet */
        cur->chain->next = node; /* cur is current: its node is alive */
    } else if (next->blocks != NULL) {
        CHRING_STORE_PTR(&next->blocks->oldest, node); /* the first node */
    }
}

/* Drops one reference on node c; frees the nodes that reach zero, in order, each dropping the
 * references of the members its snapshot listed and the next one does not. */
static void chain_unref(struct chring_blocks *blocks, struct chring_chain *c)
{
    /* Full barrier: the writer's next and gone, and this snapshot's uses, before the drop. */
    while (c != NULL && ck_pr_faa_64(&c->refs, (uint64_t)-1) == 1) {
        struct chring_chain *next = c->next;
        if (next != NULL) {
            members_unref(next->gone, next->ngone);
            chring__chunk_free_gone(next->chunks); /* c's snapshot listed them last */
        }
        chring__chunk_swap_free(c->chunks, false); /* its own gone: freed with the node before */
        if (blocks != NULL)
            CHRING_STORE_PTR(&blocks->oldest, next);
        chring__free(c);
        c = next;
    }
}

/* Whether snapshot s lists m: a binary search of its members by name. */
static bool snap_lists(const chring_snap_t *s, const chring_member_t *m)
{
    size_t lo = 0, hi = s->nmembers;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const chring_member_t *x = s->members[mid];
        int c = chring__name_cmp(x->name, x->name_len, m->name, m->name_len);
        if (c == 0)
            return x == m;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* Whether one of the snapshots still held (stale, n) lists m. */
static bool stale_lists(chring_snap_t *const *stale, size_t n, const chring_member_t *m)
{
    for (size_t k = 0; k < n; k++)
        if (snap_lists(stale[k], m))
            return true;
    return false;
}

void chring__chain_settle(struct chring_blocks *blocks, chring_snap_t *last)
{
    struct chring_chain *oldest = CHRING_LOAD_PTR(&blocks->oldest);
    if (last->chain == NULL)
        return; /* no member was ever published */
    if (oldest == last->chain) { /* every snapshot before last is gone: the common case */
        members_unref(last->members, last->nmembers);
        chring__chunk_free_all(last); /* and no other snapshot lists its chunks */
        return;
    }
    /* Snapshots before last still held (a fork() child's, whose holders did not survive it):
     * each pins its node and every node after it.  The members those snapshots list keep their
     * reference, as they would without the chain; the others, which only snapshots destroyed
     * since listed, are dropped now and cleared from their node. */
    size_t nstale = 0, cap = 0;
    for (struct chring_chain *c = oldest; c != last->chain; c = c->next)
        cap++;
    chring_snap_t **stale = chring__calloc(cap, sizeof *stale);
    if (stale == NULL)
        return; /* out of memory: they all stay (not retired), as the held snapshots' do */
    for (struct chring_chain *c = oldest; c != last->chain; c = c->next) {
        /* Its own snapshot's reference: all of its count but the previous node's. */
        uint64_t own = CHRING_LOAD_64(&c->refs) - (c == oldest ? 0 : 1);
        if (own != 0)
            stale[nstale++] = c->snap;
    }
    size_t seen = 0; /* the stale snapshots before node c */
    for (struct chring_chain *c = oldest; c != NULL; c = c->next) {
        if (c != oldest)
            for (size_t k = 0; k < c->ngone; k++)
                if (c->gone[k] != NULL && !stale_lists(stale, seen, c->gone[k])) {
                    chring__member_unref_snap(c->gone[k]);
                    c->gone[k] = NULL;
                }
        if (seen < nstale && stale[seen] == c->snap)
            seen++;
    }
    for (size_t j = 0; j < last->nmembers; j++)
        if (!stale_lists(stale, nstale, last->members[j]))
            chring__member_unref_snap(last->members[j]);
    chring__free(stale);
}

void chring__snap_unref(chring_snap_t *s)
{
    if (s == NULL || s == &chring__empty_snap)
        return;
    /* Full barrier: all uses of s by this holder happen before the count drops. */
    if (ck_pr_faa_64(&s->refs, (uint64_t)-1) == 1)
        chring__snap_destroy(s);
}

void chring__snap_destroy(chring_snap_t *s)
{
    chain_unref(s->blocks, s->chain);
    s->magic = CHRING_POISON;
    block_stash(s);
}
