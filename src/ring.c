/* The ring: configuration, lifecycle, publish and grace periods, held snapshots.
 * SPDX-License-Identifier: MIT
 *
 * Design note (invariants).
 * - r->current always points to a complete, immutable snapshot.  Writers serialise on r->lock,
 *   build the next snapshot off to the side and publish it with one release store (RCU
 *   assign); a reader sees either the old or the new snapshot, never a mix.  A failed change
 *   (bad input, out of memory) frees what it built and never touches r->current.
 * - The replaced snapshot's published reference is dropped after a grace period, by the ring's
 *   reclaimer thread (reclaim.c): no reader can still be inside a read section that saw it
 *   (Karger et al. 1997 for the ring; Mirrokni, Thorup, Zadimoghaddam 2018 for the bounded loads
 *   in load.c).  Writers never wait for a grace period (no synchronize_rcu), so they may run
 *   inside a read section; only chring_free and chring_quiesce wait.  (A publish that finds no
 *   spare block may wait up to 2 ms for the one the reclaimer is giving back, never inside a
 *   read section: snap_block.c.)
 * - Members are reference counted by snapshots and leases (member.h); the writer's view of the
 *   membership is the current snapshot, stable while the lock is held.  A removed member keeps
 *   its object until its last reference goes; adding the name again creates a new object.
 * - Ordering: a writer call publishes before it returns, so a read section that begins after the
 *   call returns sees its change (the publish is a release store, the read section's load of
 *   r->current a dependency-ordered load).
 * Membership changes themselves: apply.c.
 */
#include "internal.h"

#include <stdlib.h>
#include <unistd.h>

void chring_config_default(chring_config_t *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->profile = CHRING_PROFILE_HASH64;
    cfg->vnodes = CHRING_DEFAULT_VNODES;
    cfg->balance = CHRING_DEFAULT_BALANCE;
    cfg->slow_start_from = CHRING_DEFAULT_SLOW_START_FROM;
    cfg->ring_size_min = CHRING_DEFAULT_RING_SIZE_MIN;
    cfg->ring_size_max = CHRING_DEFAULT_RING_SIZE_MAX;
    cfg->report_ttl_ms = CHRING_DEFAULT_REPORT_TTL_MS;
}

static unsigned shard_count(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned n = 2;
    while (n < 64 && (long)n < cpus)
        n *= 2;
    return n;
}

int chring_new(chring_t **out, const chring_config_t *cfg)
{
    chring_config_t defaults;
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (cfg == NULL) {
        chring_config_default(&defaults);
        cfg = &defaults;
    }
    struct chring_prof prof;
    int err = chring__prof_init(&prof, cfg);
    if (err != 0)
        return err;
    if (cfg->slow_start_ms > 0 && !(cfg->slow_start_from >= 0.0 && cfg->slow_start_from <= 1.0))
        return -EINVAL; /* NaN fails both comparisons */

    chring_t *r = chring__alloc_aligned(sizeof *r);
    if (r == NULL)
        return -ENOMEM;
    memset(r, 0, sizeof *r);
    unsigned shards = shard_count();
    r->shards = chring__alloc_aligned(shards * sizeof *r->shards);
    chring_snap_t *s = chring__alloc(sizeof *s);
    err = -ENOMEM;
    if (r->shards == NULL || s == NULL || pthread_mutex_init(&r->lock, NULL) != 0)
        goto fail; /* the lock is initialised only once both allocations succeeded */
    if (pthread_mutex_init(&r->ghosts.lock, NULL) != 0) {
        pthread_mutex_destroy(&r->lock);
        goto fail;
    }
    if (chring__reclaim_init(r) != 0) {
        pthread_mutex_destroy(&r->ghosts.lock);
        pthread_mutex_destroy(&r->lock);
        goto fail;
    }
    memset(r->shards, 0, shards * sizeof *r->shards);
    r->shard_mask = shards - 1;
    r->cfg = *cfg;
    r->prof = prof;
    r->balance = chring__clamp_balance(cfg->balance);
    r->report_ttl_ns = (uint64_t)cfg->report_ttl_ms * UINT64_C(1000000);
    r->floor = (double)cfg->min_capacity;

    /* The empty version-0 snapshot carries the profile, like every later one. */
    *s = chring__empty_snap;
    s->prof = prof;
    s->blocks = &r->blocks;
    s->health = &r->health;
    r->health.current = &r->current;
    s->block_size = sizeof *s;
    r->current = s;
    err = chring__fork_track(r);
    if (err != 0) {
        chring__reclaim_drain(r); /* nothing waits: destroys it */
        pthread_mutex_destroy(&r->ghosts.lock);
        pthread_mutex_destroy(&r->lock);
        goto fail;
    }
    *out = r;
    return 0;

fail:
    chring__free(s);
    chring__free_aligned(r->shards);
    chring__free_aligned(r);
    return err;
}

void chring__publish(chring_t *r, chring_snap_t *next)
{
    chring_snap_t *cur = r->current;
    next->version = cur->version + 1;
    next->health = &r->health;
    /* Release store: the snapshot's contents are visible before the pointer (rcu_assign_pointer
     * has the write barrier; the TSan build uses a C11 release store). */
    CHRING_RCU_ASSIGN(r->current, next);
    CHRING_STORE_64(&r->publishes, r->publishes + 1);
    chring__reclaim_retire(r, cur);
}

void chring_free(chring_t **rp)
{
    if (rp == NULL || *rp == NULL)
        return;
    chring_t *r = *rp;
    *rp = NULL;

    /* Out of the fork handlers' list first: they take the list lock, then every ring's lock. */
    chring__fork_untrack(r);
    pthread_mutex_lock(&r->lock);
    chring_snap_t *last = r->current;
    CHRING_RCU_ASSIGN(r->current, (chring_snap_t *)&chring__empty_snap);
    pthread_mutex_unlock(&r->lock);

    synchronize_rcu();
    CHRING_GRACE_ENDED();
    /* Every snapshot replaced earlier is dropped before the ring goes, and before the last
     * snapshot: the reclaimer's (ended first, then what still waits for it) and, with the
     * barrier, any a call_rcu callback holds.  Then the membership chain (snap_block.c) has
     * freed every node before the last one, and the last one's members, which no later snapshot
     * drops, are dropped here. */
    chring__reclaim_drain(r);
    rcu_barrier();
    CHRING_GRACE_ENDED();
    CHRING_BARRIER_ENDED();
    if (last != &chring__empty_snap)
        chring__chain_settle(&r->blocks, last);
    chring__snap_unref(last);
    if (CHRING_LOAD_32(&r->ghosts.linked_ever)) {
        /* A member that was a flap's prev, destroyed by a callback of that barrier, is freed by
         * a callback queued after it (ghost.c). */
        rcu_barrier();
        CHRING_BARRIER_ENDED();
    }
    chring__blocks_drop(&r->blocks);
    chring__member_pool_drop(r);

    pthread_mutex_destroy(&r->ghosts.lock);
    pthread_mutex_destroy(&r->lock);
    chring__free_aligned(r->shards);
    chring__free_aligned(r);
}

int chring_trim(chring_t *r)
{
    if (r == NULL)
        return -EINVAL;
    chring__blocks_drop(&r->blocks);
    return 0;
}

size_t chring_len(chring_t *r)
{
    if (r == NULL)
        return 0;
    const chring_snap_t *s = chring_snap_enter(r);
    size_t n = chring_snap_len(s);
    chring_snap_exit(r, s);
    return n;
}

const chring_snap_t *chring_snap_hold(chring_t *r)
{
    if (r == NULL)
        return &chring__empty_snap;
    rcu_read_lock();
    chring_snap_t *s = CHRING_RCU_DEREF(r->current);
    /* Inside the read section the published reference keeps s alive, so the count is >= 1. */
    if (s != &chring__empty_snap)
        ck_pr_faa_64(&s->refs, 1);
    CHRING_GRACE_READER_DONE();
    rcu_read_unlock();
    return s;
}

void chring_snap_put(chring_t *r, const chring_snap_t *s)
{
    if (s == NULL || s == &chring__empty_snap)
        return;
    chring_snap_t *snap = (chring_snap_t *)s;
    if (r == NULL) {
        chring__snap_unref(snap);
        return;
    }
    /* Misuse guard: a put of a snapshot that was not held would drop the reference of the
     * snapshot r still publishes, and free it under its readers.  The published reference is the
     * only one exactly when the count is 1 while s is r's current snapshot: then the put is
     * ignored.  Otherwise the count is dropped with a compare-and-swap (full barrier, like the
     * fetch-and-add of chring__snap_unref), so the check and the drop see the same count. */
    uint64_t refs = CHRING_LOAD_64(&snap->refs);
    for (;;) {
        if (refs <= 1 && CHRING_RCU_DEREF(r->current) == snap)
            return;
        if (ck_pr_cas_64_value(&snap->refs, refs, refs - 1, &refs))
            break;
    }
    if (refs == 1)
        chring__snap_destroy(snap);
}
