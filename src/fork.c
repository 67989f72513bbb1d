/* fork(): a ring created before fork() keeps working in the parent and in the child, with no call
 * from the application (docs/design.md §4).
 * SPDX-License-Identifier: MIT
 *
 * A child of fork() has only the thread that forked.  Whatever another thread held at that
 * moment stays held forever in the child: liburcu's call_rcu worker is gone (replaced snapshots
 * would never be reclaimed, chring_free would wait for it forever), the bp flavour's registry
 * lock may be taken, and a ring's writer lock may be held by a writer half way through a
 * publish.  So the library registers pthread_atfork handlers, once, at the first chring_new:
 *
 *   prepare  every ring's writer lock (no publish is half done), every ring's reclaimer batch
 *            lock (no snapshot half reclaimed: reclaim.c), then liburcu's
 *            call_rcu_before_fork (the call_rcu threads pause between callbacks) and the bp
 *            flavour's urcu_bp_before_fork (its registry and grace-period locks);
 *   parent   the same released in reverse order;
 *   child    liburcu's after-fork-child hooks (a new call_rcu thread takes over the pending
 *            callbacks; the registry forgets the threads that did not survive), then the ring
 *            locks released.
 *
 * Lock order: the writer locks before liburcu's, which is the order a writer takes them in (a
 * publish may call call_rcu under its lock), and call_rcu's pause before the bp locks, because a
 * call_rcu thread waits for grace periods, which need the bp locks.  Leases held by threads that
 * do not exist in the child stay counted there: their members are not retired by the child's
 * chring_free.
 *
 * An application that calls liburcu-bp's fork hooks around fork() itself would take liburcu's
 * locks twice and deadlock: it turns chring's use of them off with chring_atfork_urcu(0). */
#include "internal.h"

static pthread_mutex_t rings_lock = PTHREAD_MUTEX_INITIALIZER;
static chring_t *rings; /* every ring alive, linked through fork_next/fork_prev */
static pthread_once_t registered = PTHREAD_ONCE_INIT;
static int use_urcu = 1;   /* chring_atfork_urcu */
static int took_urcu;      /* what prepare did, so that parent and child undo exactly that */
static int registered_err; /* pthread_atfork's result */

static void before_fork(void)
{
    pthread_mutex_lock(&rings_lock);
    for (chring_t *r = rings; r != NULL; r = r->fork_next)
        pthread_mutex_lock(&r->lock);
    /* Each ring's reclaimer between batches (reclaim.c): it waits for grace periods, so before
     * the bp locks, as call_rcu's pause. */
    for (chring_t *r = rings; r != NULL; r = r->fork_next)
        chring__reclaim_before_fork(r);
    took_urcu = ck_pr_load_int(&use_urcu);
    if (took_urcu) {
        call_rcu_before_fork();
        urcu_bp_before_fork();
    }
    /* The ghost locks last (ghost.c): a last release takes one, and so may a call_rcu callback,
     * which call_rcu_before_fork has let finish. */
    for (chring_t *r = rings; r != NULL; r = r->fork_next)
        pthread_mutex_lock(&r->ghosts.lock);
}

static void unlock_rings(void)
{
    for (chring_t *r = rings; r != NULL; r = r->fork_next)
        pthread_mutex_unlock(&r->ghosts.lock);
    for (chring_t *r = rings; r != NULL; r = r->fork_next)
        chring__reclaim_after_fork(r);
    for (chring_t *r = rings; r != NULL; r = r->fork_next)
        pthread_mutex_unlock(&r->lock);
    pthread_mutex_unlock(&rings_lock);
}

static void after_fork_parent(void)
{
    if (took_urcu) {
        urcu_bp_after_fork_parent();
        call_rcu_after_fork_parent();
    }
    unlock_rings();
}

static void after_fork_child(void)
{
    if (took_urcu) {
        urcu_bp_after_fork_child();
        call_rcu_after_fork_child();
    }
    /* The forking thread locked these in before_fork, and it is the child's one thread. */
    unlock_rings();
}

static void register_handlers(void)
{
    registered_err = pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

int chring__fork_track(chring_t *r)
{
    pthread_once(&registered, register_handlers);
    if (registered_err != 0)
        return -ENOMEM; /* pthread_atfork fails only for want of memory */
    pthread_mutex_lock(&rings_lock);
    r->fork_prev = NULL;
    r->fork_next = rings;
    if (rings != NULL)
        rings->fork_prev = r;
    rings = r;
    pthread_mutex_unlock(&rings_lock);
    return 0;
}

void chring__fork_untrack(chring_t *r)
{
    pthread_mutex_lock(&rings_lock);
    if (r->fork_prev != NULL)
        r->fork_prev->fork_next = r->fork_next;
    else
        rings = r->fork_next;
    if (r->fork_next != NULL)
        r->fork_next->fork_prev = r->fork_prev;
    pthread_mutex_unlock(&rings_lock);
}

int chring_atfork_urcu(int enable)
{
    return ck_pr_fas_int(&use_urcu, enable != 0);
}
