/* The writer side: configuration, membership changes, publish, grace periods, retirement.
 * SPDX-License-Identifier: MIT
 *
 * Design note (invariants).
 * - r->current always points to a complete, immutable snapshot.  Writers serialise on r->lock,
 *   build the next snapshot off to the side and publish it with one release store (RCU
 *   assign); a reader sees either the old or the new snapshot, never a mix.  A failed change
 *   (bad input, out of memory) frees what it built and never touches r->current.
 * - The replaced snapshot's published reference is dropped by a call_rcu callback, that is after
 *   a grace period: no reader can still be inside a read section that saw it (Karger et al. 1997
 *   for the ring; Mirrokni, Thorup, Zadimoghaddam 2018 for the bounded loads in load.c).
 *   Writers never wait for a grace period (no synchronize_rcu), so they may run inside a read
 *   section; only chring_free waits.
 * - Members are reference counted by snapshots and leases (snapshot.c); the writer's view of the
 *   membership is the current snapshot, stable while the lock is held.  A removed member keeps
 *   its object until its last reference goes; adding the name again creates a new object.
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
}

static unsigned profile_bits(const chring_config_t *cfg)
{
    switch (cfg->profile) {
    case CHRING_PROFILE_HASH64:
    case CHRING_PROFILE_XXH3: return 64;
    case CHRING_PROFILE_MURMUR32:
    case CHRING_PROFILE_FNV32:
    case CHRING_PROFILE_KETAMA:
    case CHRING_PROFILE_NGINX: return 32;
    case CHRING_PROFILE_FNV16: return 16;
    case CHRING_PROFILE_CUSTOM: return cfg->hash_bits;
    }
    return 0;
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
    if ((unsigned)cfg->profile > CHRING_PROFILE_CUSTOM)
        return -EINVAL;
    /* ketama and nginx fix their own point counts and ignore vnodes, 0 included (SPEC §2.1). */
    if (cfg->vnodes == 0 && cfg->profile != CHRING_PROFILE_KETAMA &&
        cfg->profile != CHRING_PROFILE_NGINX)
        return -EINVAL;
    if (cfg->profile == CHRING_PROFILE_CUSTOM &&
        (cfg->hash == NULL || (cfg->hash_bits != 64 && cfg->hash_bits != 32 && cfg->hash_bits != 16)))
        return -EINVAL;

    chring_t *r = chring__alloc_aligned(sizeof *r);
    if (r == NULL)
        return -ENOMEM;
    memset(r, 0, sizeof *r);
    unsigned shards = shard_count();
    r->shards = chring__alloc_aligned(shards * sizeof *r->shards);
    chring_snap_t *s = chring__alloc(sizeof *s);
    if (r->shards == NULL || s == NULL) {
        chring__free(s);
        chring__free_aligned(r->shards);
        chring__free_aligned(r);
        return -ENOMEM;
    }
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        chring__free(s);
        chring__free_aligned(r->shards);
        chring__free_aligned(r);
        return -ENOMEM;
    }
    memset(r->shards, 0, shards * sizeof *r->shards);
    r->shard_mask = shards - 1;
    r->cfg = *cfg;
    r->balance = chring__clamp_balance(cfg->balance);

    /* The empty version-0 snapshot carries the profile, like every later one. */
    *s = chring__empty_snap;
    s->profile = cfg->profile;
    s->bits = profile_bits(cfg);
    s->shift = 64 - s->bits;
    s->vnodes = cfg->vnodes;
    s->hash = cfg->profile == CHRING_PROFILE_CUSTOM ? cfg->hash : NULL;
    s->hash_ctx = cfg->profile == CHRING_PROFILE_CUSTOM ? cfg->hash_ctx : NULL;
    s->refs = 1;
    s->version = 0;
    s->ring = r;
    s->block_size = sizeof *s;
    r->shape = *s;
    r->current = s;
    *out = r;
    return 0;
}

static void snap_rcu_done(struct rcu_head *head)
{
    CHRING_GRACE_ENDED();
    chring_snap_t *s = caa_container_of(head, chring_snap_t, rcu);
    chring__snap_unref(s);
}

/* Drops the published reference of a snapshot that was just replaced, once no reader can
 * still see it. */
static void retire_snapshot(chring_snap_t *old)
{
#if defined(CHRING_PLANTED_BUG_NO_GRACE) && CHRING_PLANTED_BUG_NO_GRACE
    /* Test-only planted bug (-Dplanted_bug=no_grace): free without a grace period.  The torture
     * test must catch this under ASan and TSan. */
    chring__snap_unref(old);
#else
    call_rcu(&old->rcu, snap_rcu_done);
#endif
}

void chring_free(chring_t **rp)
{
    if (rp == NULL || *rp == NULL)
        return;
    chring_t *r = *rp;
    *rp = NULL;

    pthread_mutex_lock(&r->lock);
    chring_snap_t *last = r->current;
    CHRING_RCU_ASSIGN(r->current, (chring_snap_t *)&chring__empty_snap);
    pthread_mutex_unlock(&r->lock);

    synchronize_rcu();
    CHRING_GRACE_ENDED();
    chring__snap_unref(last);
    /* Every pending callback (snapshots replaced earlier) runs before the ring goes. */
    rcu_barrier();
    CHRING_GRACE_ENDED();
    chring__snap_drop_spare(r);

    pthread_mutex_destroy(&r->lock);
    chring__free_aligned(r->shards);
    chring__free_aligned(r);
}

size_t chring_len(chring_t *r)
{
    if (r == NULL)
        return 0;
    const chring_snap_t *s = chring_snap_enter(r);
    size_t n = s->nmembers;
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
    (void)r;
    chring__snap_unref((chring_snap_t *)s);
}

/* ---- membership changes ------------------------------------------------------------------- */

enum apply_mode {
    MODE_UPDATE, /* changes relative to the current membership; weight 0 removes */
    MODE_SYNC,   /* the membership becomes exactly the given set */
    MODE_WEIGHT, /* as MODE_UPDATE, but only for existing members (chring_set_weight) */
};

static int check_name(const char *name, size_t *len)
{
    if (name == NULL)
        return -EINVAL;
    size_t n = strnlen(name, CHRING_NAME_MAX + 1);
    if (n == 0)
        return -EINVAL;
    if (n > CHRING_NAME_MAX)
        return -ENAMETOOLONG;
    *len = n;
    return 0;
}

static int name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c != 0)
        return c;
    return (alen > blen) - (alen < blen);
}

struct change_ref {
    const chring_change_t *change;
    size_t len;
    size_t order; /* position in the caller's array: join order of new members */
};

static int cmp_change(const void *a, const void *b)
{
    const struct change_ref *x = a, *y = b;
    return name_cmp(x->change->name, x->len, y->change->name, y->len);
}

static chring_member_t *member_new(chring_t *r, const char *name, size_t len, uint32_t weight,
                                   void *udata)
{
    chring_member_t *m = chring__alloc_aligned(sizeof *m + len + 1);
    if (m == NULL)
        return NULL;
    memset(m, 0, sizeof *m);
    m->magic = CHRING_MEMBER_MAGIC;
    m->weight = weight;
    m->name_len = (uint32_t)len;
    m->udata = udata;
    m->retire = r->cfg.retire;
    m->retire_ctx = r->cfg.retire_ctx;
    memcpy(m->name, name, len);
    m->name[len] = '\0';
    return m;
}

/* Validates, builds and publishes one change set.  Called without the lock. */
static int apply(chring_t *r, const chring_change_t *changes, size_t n, enum apply_mode mode)
{
    if (r == NULL || (changes == NULL && n > 0))
        return -EINVAL;
    const chring_snap_t *shape0 = &r->shape;
    for (size_t k = 0; k < n; k++) {
        size_t len;
        int err = check_name(changes[k].name, &len);
        if (err != 0)
            return err;
        if (changes[k].weight == 0 && mode == MODE_SYNC)
            return -EINVAL;
        if (changes[k].weight != 0 && shape0->profile != CHRING_PROFILE_KETAMA &&
            chring__profile_points(shape0, changes[k].weight, 1, changes[k].weight) >
                CHRING_POINTS_MAX)
            return -E2BIG;
    }

    /* A repeated name is bad input visible in the arguments: find it before allocating when the
     * batch is small (a pairwise scan); a large batch finds it in its sorted copy below. */
    if (n <= 64) {
        for (size_t a = 1; a < n; a++)
            for (size_t b = 0; b < a; b++)
                if (strcmp(changes[a].name, changes[b].name) == 0)
                    return -EINVAL;
    }

    struct change_ref *sorted = NULL;
    if (n > 0) {
        sorted = chring__calloc(n, sizeof *sorted);
        if (sorted == NULL)
            return -ENOMEM;
    }
    for (size_t k = 0; k < n; k++) {
        sorted[k].change = &changes[k];
        sorted[k].len = strlen(changes[k].name);
        sorted[k].order = k;
    }
    if (n > 1)
        qsort(sorted, n, sizeof *sorted, cmp_change);
    for (size_t k = 1; k < n; k++) {
        if (cmp_change(&sorted[k - 1], &sorted[k]) == 0) {
            chring__free(sorted);
            return -EINVAL;
        }
    }

    pthread_mutex_lock(&r->lock);
    chring_snap_t *cur = r->current;
    int err = 0;
    size_t count = 0, ncreated = 0, ia = 0, ib = 0;
    bool changed = false;
    size_t cap = cur->nmembers + n;
    chring_member_t **members = chring__calloc(cap ? cap : 1, sizeof *members);
    uint32_t *weights = chring__calloc(cap ? cap : 1, sizeof *weights);
    /* New members, in the caller's order (their join order). */
    chring_member_t **created = chring__calloc(n ? n : 1, sizeof *created);
    size_t *created_at = chring__calloc(n ? n : 1, sizeof *created_at);
    if (members == NULL || weights == NULL || created == NULL || created_at == NULL) {
        err = -ENOMEM;
        goto out;
    }

    /* Merge the current members (sorted by name) with the sorted changes. */
    while (ia < cur->nmembers || ib < n) {
        int c;
        if (ia >= cur->nmembers)
            c = 1;
        else if (ib >= n)
            c = -1;
        else
            c = name_cmp(cur->members[ia]->name, cur->members[ia]->name_len,
                         sorted[ib].change->name, sorted[ib].len);
        if (c < 0) {
            /* A member the changes do not name: kept by an update, dropped by a sync. */
            if (mode != MODE_SYNC) {
                members[count] = cur->members[ia];
                weights[count++] = cur->weights[ia];
            } else {
                changed = true;
            }
            ia++;
        } else if (c == 0) {
            uint32_t w = sorted[ib].change->weight;
            if (w == 0) {
                changed = true; /* removed */
            } else {
                members[count] = cur->members[ia];
                weights[count++] = w;
                changed |= w != cur->weights[ia];
            }
            ia++, ib++;
        } else {
            const chring_change_t *ch = sorted[ib].change;
            if (ch->weight == 0 || mode == MODE_WEIGHT) {
                err = -ENOENT;
                goto out;
            }
            /* A placeholder; the member is created below once everything else is known. */
            members[count] = NULL;
            weights[count] = ch->weight;
            created_at[sorted[ib].order] = count + 1;
            count++;
            changed = true;
            ib++;
        }
    }
    if (!changed)
        goto out;

    /* Create the new members in the caller's order, which is their join order. */
    for (size_t k = 0; k < n; k++) {
        if (created_at[k] == 0)
            continue;
        size_t slot = created_at[k] - 1;
        chring_member_t *m = member_new(r, changes[k].name, strlen(changes[k].name),
                                        changes[k].weight, changes[k].udata);
        if (m == NULL) {
            err = -ENOMEM;
            goto out;
        }
        m->join_seq = r->join_seq + k;
        created[ncreated++] = m;
        members[slot] = m;
    }

    chring_snap_t *next = chring__snap_build(&r->shape, cur, members, weights, count, &err);
    if (next == NULL)
        goto out;
    next->version = cur->version + 1;
    r->join_seq += n;

    /* Current weights first, so that a reader of the new snapshot sees them. */
    for (size_t j = 0; j < count; j++)
        CHRING_STORE_32(&members[j]->weight, weights[j]);
    /* Release store: the snapshot's contents are visible before the pointer (rcu_assign_pointer
     * has the write barrier; the TSan build uses a C11 release store). */
    CHRING_RCU_ASSIGN(r->current, next);
    CHRING_STORE_64(&r->publishes, r->publishes + 1);
    ncreated = 0; /* the new members now belong to the snapshot */
    retire_snapshot(cur);

out:
    pthread_mutex_unlock(&r->lock);
    for (size_t k = 0; k < ncreated; k++) {
        /* Never published: no retire, nobody else saw them. */
        created[k]->magic = CHRING_POISON;
        chring__free_aligned(created[k]);
    }
    chring__free(created_at);
    chring__free(created);
    chring__free(weights);
    chring__free(members);
    chring__free(sorted);
    return err;
}

int chring_update(chring_t *r, const chring_change_t *changes, size_t n)
{
    return apply(r, changes, n, MODE_UPDATE);
}

int chring_sync(chring_t *r, const chring_change_t *members, size_t n)
{
    return apply(r, members, n, MODE_SYNC);
}

int chring_add(chring_t *r, const char *name, uint32_t weight, void *udata)
{
    if (weight == 0)
        return -EINVAL;
    chring_change_t change = {name, weight, udata};
    return apply(r, &change, 1, MODE_UPDATE);
}

int chring_remove(chring_t *r, const char *name)
{
    chring_change_t change = {name, 0, NULL};
    return apply(r, &change, 1, MODE_UPDATE);
}

int chring_set_weight(chring_t *r, const char *name, uint32_t weight)
{
    if (weight == 0)
        return -EINVAL;
    chring_change_t change = {name, weight, NULL};
    return apply(r, &change, 1, MODE_WEIGHT);
}
