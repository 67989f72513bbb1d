/* The reclaimer: a replaced snapshot's published reference dropped as soon as its grace period
 * has ended, by a thread of the ring's own.
 * SPDX-License-Identifier: MIT
 *
 * Why not call_rcu (docs/design.md §4, "Reclamation"; docs/bench.md §11h).  liburcu 0.13's
 * call_rcu worker sleeps 10 ms after it is woken and after every batch, whatever its flags, so a
 * replaced snapshot came back 10 ms after its publish with no reader at all, and 20 ms with two
 * busy readers on this 2-vCPU machine.  A burst of publishes a few milliseconds apart then had
 * three to six ring-sized blocks waiting, and each publish that found no spare faulted in a fresh
 * block (28-130 ms here when the pages are new to the process).  liburcu 0.13 has no call that
 * polls a grace period, and a writer may not wait for one itself (it may run inside a read
 * section), so a thread of the ring's own waits instead: synchronize_rcu of urcu-bp returned in
 * 26 us with one busy reader (10 ms only once every core is busy with readers, when urcu-bp
 * sleeps between its checks: still half of call_rcu's 20 ms).
 *
 * The protocol.
 * - The writer pushes the replaced snapshot on r->reclaim.retired (a stack, under the ring lock,
 *   so one pusher at a time) and pokes the thread, or starts it (reclaim_poke).
 * - The thread notes the stack's top, waits for a grace period (synchronize_rcu: every read
 *   section that could have seen the snapshots from that top down has ended, since they were
 *   unpublished before it began), then takes them off the stack under the batch mutex and drops
 *   their published references, oldest first, as call_rcu's callbacks did (the last reference
 *   destroys a snapshot: its block goes to the spare cache, its members may be retired, on this
 *   thread).
 * - It runs while snapshots wait and CHRING_RECLAIM_LINGER_NS after, so that a burst does not
 *   start a thread per publish; then it ends.  state: RECLAIM_IDLE (no thread), RECLAIM_RUNS,
 *   RECLAIM_POKED (something was pushed while it ran).  The thread's last access to the ring is
 *   the store or compare-and-swap that sets RECLAIM_IDLE: after it, chring_free may free it.
 * - A thread that cannot be started (no memory, a thread limit), or CHRING_RECLAIM_THREAD=0 in
 *   the environment, is no error: the snapshots waiting go to call_rcu, as before.
 * - fork(): the fork handlers hold every ring's batch mutex across fork() (fork.c), so no batch
 *   is half taken or half dropped; the child has no thread (the process id tells), and its first
 *   publish starts one for whatever waits.
 * - chring_free ends the thread (it finishes its batch first), waits for a grace period and
 *   drops what still waits, oldest first.
 */
#include "internal.h"

#include <stdlib.h>
#include <unistd.h>

enum {
    RECLAIM_IDLE,
    RECLAIM_RUNS,
    RECLAIM_POKED
};

/* Sequentially consistent, as every compare-and-swap of the library. */
#define RC_LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define RC_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

static bool state_cas(struct chring_reclaim *rc, uint32_t from, uint32_t to)
{
    return __atomic_compare_exchange_n(&rc->state, &from, to, false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}

int chring__reclaim_init(chring_t *r)
{
    struct chring_reclaim *rc = &r->reclaim;
    memset(rc, 0, sizeof *rc);
    if (pthread_mutex_init(&rc->batch, NULL) != 0)
        return -ENOMEM;
    if (sem_init(&rc->wake, 0, 0) != 0) {
        pthread_mutex_destroy(&rc->batch);
        return -ENOMEM;
    }
    return 0;
}

/* Takes the snapshots retired as number `upto` or earlier off the stack (the stack is newest
 * first, so they are a tail of it) and returns them, newest first.  Under the batch mutex: only
 * a holder of it takes snapshots off, so every one on the stack is alive; a writer pushes
 * concurrently, but writes only the head and its own snapshot's link, never the links below. */
static chring_snap_t *reclaim_take(struct chring_reclaim *rc, uint64_t upto)
{
    chring_snap_t *prev = NULL;
    chring_snap_t *p = __atomic_load_n(&rc->retired, __ATOMIC_ACQUIRE);
    while (p != NULL && p->retired_seq > upto) {
        prev = p;
        p = p->retired_next;
    }
    if (p == NULL)
        return NULL;
    if (prev == NULL) {
        chring_snap_t *head = p;
        if (!__atomic_compare_exchange_n(&rc->retired, &head, NULL, false, __ATOMIC_SEQ_CST,
                                         __ATOMIC_ACQUIRE)) {
            /* Pushed meanwhile: cut below the newer ones. */
            prev = head;
            while (prev->retired_next != p)
                prev = prev->retired_next;
        }
    }
    if (prev != NULL)
        prev->retired_next = NULL;
    if (upto > __atomic_load_n(&rc->taken, __ATOMIC_RELAXED))
        __atomic_store_n(&rc->taken, upto, __ATOMIC_SEQ_CST);
    return p;
}

/* A taken list (newest first) in retire order: oldest first. */
static chring_snap_t *oldest_first(chring_snap_t *list)
{
    chring_snap_t *oldest = NULL;
    while (list != NULL) {
        chring_snap_t *next = list->retired_next;
        list->retired_next = oldest;
        oldest = list;
        list = next;
    }
    return oldest;
}

/* Drops the published reference of every snapshot of list (newest first, as taken), oldest
 * first.  Returns how many. */
static uint64_t drop_list(struct chring_reclaim *rc, chring_snap_t *list)
{
    chring_t *r = caa_container_of(rc, chring_t, reclaim);
    chring_snap_t *oldest = oldest_first(list);
    uint64_t n = 0;
    while (oldest != NULL) {
        chring_snap_t *next = oldest->retired_next;
        oldest->retired_next = NULL;
        chring__snap_unref(oldest);
        __atomic_fetch_sub(&r->blocks.returning, 1, __ATOMIC_SEQ_CST);
        n++;
        oldest = next;
    }
    return n;
}

/* Drops every snapshot retired as number `upto` or earlier that is still on the stack, once a
 * grace period that began after their retirement has ended (the caller waited for it), and waits
 * for a batch that took some of them to finish dropping.  Returns how many it dropped. */
static uint64_t reclaim_upto(struct chring_reclaim *rc, uint64_t upto)
{
    CHRING_GRACE_ENDED();
    pthread_mutex_lock(&rc->batch);
    uint64_t n = drop_list(rc, reclaim_take(rc, upto));
    pthread_mutex_unlock(&rc->batch);
    return n;
}

/* One batch of the thread: what was retired when it begins, after a grace period.  Returns
 * whether there was any.
 *
 * The batch mutex is held only while the batch takes its snapshots off the stack and drops them,
 * not across synchronize_rcu: an application that runs liburcu-bp's fork hooks itself
 * (chring_atfork_urcu(0)) holds the grace-period lock when the library's fork handler takes this
 * mutex, so a thread that held it while waiting for that lock would deadlock the fork.  The
 * snapshots stay on the stack until they are taken, so a fork during the wait loses none. */
static bool reclaim_batch(struct chring_reclaim *rc)
{
    uint64_t upto = __atomic_load_n(&rc->pushed, __ATOMIC_SEQ_CST);
    if (upto <= __atomic_load_n(&rc->taken, __ATOMIC_SEQ_CST))
        return false;
#if !(defined(CHRING_PLANTED_BUG_RECLAIM_NO_GRACE) && CHRING_PLANTED_BUG_RECLAIM_NO_GRACE)
    synchronize_rcu();
#endif
    /* Test-only planted bug (-Dplanted_bug=reclaim_no_grace): no wait above, the blocks come
     * back while readers may still be in them.  The torture test must catch it. */
    uint64_t n = reclaim_upto(rc, upto);
    __atomic_fetch_add(&rc->batches, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&rc->reclaimed, n, __ATOMIC_RELAXED);
    return true;
}

static void *reclaim_main(void *arg)
{
    struct chring_reclaim *rc = arg;
    for (;;) {
        RC_STORE(&rc->state, RECLAIM_RUNS); /* a poke from now on is seen below */
        if (reclaim_batch(rc))
            continue;
        if (RC_LOAD(&rc->stop) != 0)
            break;
        uint64_t due = chring__now_ns() + CHRING_RECLAIM_LINGER_NS;
        struct timespec at = {(time_t)(due / 1000000000u), (long)(due % 1000000000u)};
        int rv;
        while ((rv = sem_clockwait(&rc->wake, CLOCK_MONOTONIC, &at)) != 0 && errno == EINTR)
            continue;
        if (rv == 0 || RC_LOAD(&rc->stop) != 0)
            continue; /* poked (or asked to stop: the loop's checks come first) */
        /* Idle for the linger time: end, unless a writer pushed meanwhile (it poked first, or
         * finds the thread gone and starts another). */
        if (RC_LOAD(&rc->retired) == NULL && state_cas(rc, RECLAIM_RUNS, RECLAIM_IDLE))
            return NULL;
    }
    RC_STORE(&rc->state, RECLAIM_IDLE);
    return NULL;
}

/* Whether the reclaimer may have a thread: the environment's CHRING_RECLAIM_THREAD=0 says no
 * (read once per process): replaced snapshots then go to call_rcu, as they did before the
 * reclaimer, for a program that wants no thread of the library's per ring. */
static bool thread_allowed(void)
{
    static int allowed; /* 0: not read yet; else 1 + whether allowed */
    int v = __atomic_load_n(&allowed, __ATOMIC_RELAXED);
    if (v == 0) {
        const char *env = getenv("CHRING_RECLAIM_THREAD");
        v = 1 + !(env != NULL && strcmp(env, "0") == 0);
        __atomic_store_n(&allowed, v, __ATOMIC_RELAXED);
    }
    return v == 2;
}

/* Pokes the thread, or starts it when none runs in this process.  Returns false when no thread
 * runs and none could be started. */
static bool reclaim_poke(struct chring_reclaim *rc)
{
    if (!thread_allowed())
        return false;
    int pid = (int)getpid();
    if (RC_LOAD(&rc->pid) != pid) {
        RC_STORE(&rc->state, RECLAIM_IDLE); /* the parent's, before a fork: not here */
        RC_STORE(&rc->pid, pid);
    }
    for (;;) {
        uint32_t state = RC_LOAD(&rc->state);
        if (state == RECLAIM_POKED)
            return true;
        if (state == RECLAIM_RUNS) {
            if (state_cas(rc, RECLAIM_RUNS, RECLAIM_POKED)) {
                sem_post(&rc->wake);
                return true;
            }
            continue;
        }
        if (state_cas(rc, RECLAIM_IDLE, RECLAIM_RUNS))
            break;
    }
    /* A batch may call call_rcu (a member freed a grace period after its last reference:
     * ghost.c, member.c).  The first call_rcu of a process creates liburcu's default worker
     * under a mutex that call_rcu_before_fork holds until the fork is over, while the fork
     * handler waits for the batch: create it here, on the writer's thread, first. */
    (void)get_default_call_rcu_data();
    /* The default stack: the members' retire callbacks (the application's) run on this thread,
     * as they ran on call_rcu's. */
    bool started = chring__thread_detached(reclaim_main, rc, 0);
    if (!started)
        RC_STORE(&rc->state, RECLAIM_IDLE);
    return started;
}

/* call_rcu's callback, for a snapshot no thread of the ring's own could take. */
static void snap_rcu_done(struct rcu_head *head)
{
    CHRING_GRACE_ENDED();
    chring_snap_t *s = caa_container_of(head, chring_snap_t, rcu);
    chring__snap_unref(s);
    CHRING_CALLBACK_DONE();
}

void chring__reclaim_retire(chring_t *r, chring_snap_t *old)
{
#if defined(CHRING_PLANTED_BUG_NO_GRACE) && CHRING_PLANTED_BUG_NO_GRACE
    /* Test-only planted bug (-Dplanted_bug=no_grace): free without a grace period.  The torture
     * test must catch this under ASan and TSan. */
    (void)r;
    chring__snap_unref(old);
#else
    struct chring_reclaim *rc = &r->reclaim;
    CHRING_CALLBACK_QUEUED();
    uint64_t seq = __atomic_load_n(&rc->pushed, __ATOMIC_RELAXED) + 1; /* writers only */
    old->retired_seq = seq;
    __atomic_fetch_add(&r->blocks.returning, 1, __ATOMIC_SEQ_CST);
    chring_snap_t *head = __atomic_load_n(&rc->retired, __ATOMIC_ACQUIRE);
    do
        old->retired_next = head;
    while (!__atomic_compare_exchange_n(&rc->retired, &head, old, true, __ATOMIC_SEQ_CST,
                                        __ATOMIC_ACQUIRE));
    /* After the push: whoever reads seq finds the snapshot on the stack. */
    __atomic_store_n(&rc->pushed, seq, __ATOMIC_SEQ_CST);
    if (reclaim_poke(rc))
        return;
    /* No thread runs in this process and none could be started: hand what waits to call_rcu,
     * oldest first (under the batch mutex, as chring_quiesce may take some at the same time). */
    pthread_mutex_lock(&rc->batch);
    chring_snap_t *oldest = oldest_first(reclaim_take(rc, seq));
    while (oldest != NULL) {
        chring_snap_t *next = oldest->retired_next;
        oldest->retired_next = NULL;
        __atomic_fetch_add(&rc->deferred, 1, __ATOMIC_RELAXED);
        __atomic_fetch_sub(&r->blocks.returning, 1, __ATOMIC_SEQ_CST); /* not soon */
        call_rcu(&oldest->rcu, snap_rcu_done);
        oldest = next;
    }
    pthread_mutex_unlock(&rc->batch);
#endif
}

/* Stops the thread, if one runs in this process, and waits until it no longer touches rc. */
static void reclaim_stop(struct chring_reclaim *rc)
{
    RC_STORE(&rc->stop, 1);
    if (RC_LOAD(&rc->state) != RECLAIM_IDLE && RC_LOAD(&rc->pid) == (int)getpid()) {
        sem_post(&rc->wake);
        struct timespec pause = {0, 100000}; /* 0.1 ms */
        while (RC_LOAD(&rc->state) != RECLAIM_IDLE)
            nanosleep(&pause, NULL);
    }
}

int chring_quiesce(chring_t *r)
{
    if (r == NULL)
        return -EINVAL;
    struct chring_reclaim *rc = &r->reclaim;
    uint64_t upto = __atomic_load_n(&rc->pushed, __ATOMIC_SEQ_CST);
    if (upto == 0)
        return 0;
    synchronize_rcu();
    reclaim_upto(rc, upto);
    /* Snapshots handed to call_rcu (no thread) are given up by its callbacks. */
    if (__atomic_load_n(&rc->deferred, __ATOMIC_SEQ_CST) != 0) {
        rcu_barrier();
        CHRING_BARRIER_ENDED();
    }
    return 0;
}

void chring__reclaim_drain(chring_t *r)
{
    struct chring_reclaim *rc = &r->reclaim;
    reclaim_stop(rc);
    /* The caller waited for a grace period after the last publish: whatever still waits can
     * go (the mutex orders the thread's last batch before this). */
    reclaim_upto(rc, __atomic_load_n(&rc->pushed, __ATOMIC_SEQ_CST));
    sem_destroy(&rc->wake);
    pthread_mutex_destroy(&rc->batch);
}

void chring__reclaim_before_fork(chring_t *r)
{
    pthread_mutex_lock(&r->reclaim.batch);
}

void chring__reclaim_after_fork(chring_t *r)
{
    pthread_mutex_unlock(&r->reclaim.batch);
}
