/* Membership changes: add, remove, set_weight, update (a batch) and sync (a discovery feed).
 * SPDX-License-Identifier: MIT
 *
 * Every change goes through apply(), in six steps:
 *
 *   1. validate  the arguments, before any allocation and without the lock;
 *   2. sort      the changes by name (a repeated name is bad input);
 *   3. merge     the current members (sorted by name) with the sorted changes, under the lock:
 *                the next membership, or "nothing changes", or -ENOENT;
 *   4. create    the new members, in the caller's order, which is their join order;
 *   5. build     the next snapshot (snap_build.c);
 *   6. publish   it (ring.c).
 *
 * Then, after the lock is released and only if the call succeeds, every non-NULL udata that the
 * call did not keep (its change named a member that exists already, whose own udata stays) is
 * handed back through config.retire, so a discovery feed that allocates one object per entry
 * leaks nothing (docs/design.md §4).
 * A step that fails leaves the ring as it was: the members it created are discarded unpublished
 * (member.c), their udata stays the caller's, and r->current is untouched (docs/design.md §4). */
#include "internal.h"

#include <stdlib.h>

enum apply_mode {
    MODE_UPDATE, /* changes relative to the current membership; weight 0 removes */
    MODE_SYNC,   /* the membership becomes exactly the given set */
    MODE_WEIGHT, /* as MODE_UPDATE, but only for existing members (chring_set_weight) */
};

struct change_ref {
    const chring_change_t *change;
    size_t len;
    size_t order; /* position in the caller's array: join order of new members */
};

/* The work of one apply: the sorted changes, and the next membership as it is worked out. */
struct batch {
    const chring_change_t *changes;
    size_t n;
    enum apply_mode mode;
    struct change_ref *sorted;
    chring_member_t **members; /* the next membership, sorted by name */
    uint32_t *weights;
    size_t count;
    size_t *created_at;        /* per change: 1 + its index in members if it is new, else 0 */
    chring_member_t **created; /* the new members, until they belong to a published snapshot */
    size_t ncreated;
    void **unkept; /* udata of changes that named an existing member, to hand back */
    size_t nunkept;
    /* Members down that leave the membership or change weight (health.c): how the ring's
     * count and weight of members down change if this batch is published. */
    uint64_t down_left, down_weight_left, down_weight_joined;
};

static int cmp_change(const void *a, const void *b)
{
    const struct change_ref *x = a, *y = b;
    return chring__name_cmp(x->change->name, x->len, y->change->name, y->len);
}

/* 1. Bad input visible in the arguments. */
static int validate(const chring_t *r, const chring_change_t *changes, size_t n,
                    enum apply_mode mode)
{
    if (r == NULL || (changes == NULL && n > 0))
        return -EINVAL;
    const struct chring_prof *prof = &r->prof;
    for (size_t k = 0; k < n; k++) {
        size_t len;
        int err = chring__name_check(changes[k].name, &len);
        if (err != 0)
            return err;
        /* A profile that takes only names of its own form (haproxy: server ids). */
        if (prof->desc->name_check != NULL && prof->desc->name_check(changes[k].name, len) != 0)
            return -EINVAL;
        uint32_t w = changes[k].weight;
        if (w == 0 && mode == MODE_SYNC)
            return -EINVAL;
        /* A point count that depends on the whole membership is checked by the build. */
        if (w != 0 && !prof->desc->counts_need_ring &&
            prof->desc->points(prof, w, 1, w) > CHRING_POINTS_MAX)
            return -E2BIG;
    }
    /* A repeated name, found before allocating when the batch is small (a pairwise scan); a large
     * batch finds it in its sorted copy. */
    if (n <= 64) {
        for (size_t a = 1; a < n; a++)
            for (size_t b = 0; b < a; b++)
                if (strcmp(changes[a].name, changes[b].name) == 0)
                    return -EINVAL;
    }
    return 0;
}

/* 2. */
static int sort_changes(struct batch *b)
{
    if (b->n == 0)
        return 0;
    b->sorted = chring__calloc(b->n, sizeof *b->sorted);
    if (b->sorted == NULL)
        return -ENOMEM;
    for (size_t k = 0; k < b->n; k++) {
        b->sorted[k].change = &b->changes[k];
        b->sorted[k].len = strlen(b->changes[k].name);
        b->sorted[k].order = k;
    }
    qsort(b->sorted, b->n, sizeof *b->sorted, cmp_change);
    for (size_t k = 1; k < b->n; k++)
        if (cmp_change(&b->sorted[k - 1], &b->sorted[k]) == 0)
            return -EINVAL;
    return 0;
}

/* A member down that leaves (new weight 0) or changes weight: the ring's health changes with
 * this batch.  Down flags change only under the lock, which the caller holds. */
static void note_down(struct batch *b, const chring_member_t *m, uint32_t old_weight,
                      uint32_t new_weight)
{
    if (!m->down)
        return;
    b->down_weight_left += old_weight;
    if (new_weight == 0)
        b->down_left++;
    else
        b->down_weight_joined += new_weight;
}

/* 3. The next membership from the current one.  Returns 1 when it differs, 0 when nothing
 * changes, or a negative errno.  New members get a placeholder (NULL) and their change's
 * created_at. */
static int merge_membership(struct batch *b, const chring_snap_t *cur)
{
    size_t cap = cur->nmembers + b->n;
    b->members = chring__calloc(cap ? cap : 1, sizeof *b->members);
    b->weights = chring__calloc(cap ? cap : 1, sizeof *b->weights);
    b->created = chring__calloc(b->n ? b->n : 1, sizeof *b->created);
    b->created_at = chring__calloc(b->n ? b->n : 1, sizeof *b->created_at);
    b->unkept = chring__calloc(b->n ? b->n : 1, sizeof *b->unkept);
    if (b->members == NULL || b->weights == NULL || b->created == NULL || b->created_at == NULL ||
        b->unkept == NULL)
        return -ENOMEM;

    bool changed = false;
    size_t ia = 0, ib = 0;
    while (ia < cur->nmembers || ib < b->n) {
        if (b->mode != MODE_SYNC && ia < cur->nmembers) {
            /* The members before the next change are kept as they are: found by a binary
             * search and copied in one run, so that a change to a ring of 100,000 members
             * compares a few dozen names, not every one (each a cache miss). */
            size_t stop = ib < b->n ? chring__snap_name_bound(cur, ia, b->sorted[ib].change->name,
                                                              b->sorted[ib].len)
                                    : cur->nmembers;
            if (stop > ia) {
                memcpy(&b->members[b->count], &cur->members[ia], (stop - ia) * sizeof *b->members);
                memcpy(&b->weights[b->count], &cur->weights[ia], (stop - ia) * sizeof *b->weights);
                b->count += stop - ia;
                ia = stop;
                continue;
            }
        }
        int c;
        if (ia >= cur->nmembers)
            c = 1;
        else if (ib >= b->n)
            c = -1;
        else
            c = chring__name_cmp(cur->members[ia]->name, cur->members[ia]->name_len,
                                 b->sorted[ib].change->name, b->sorted[ib].len);
        if (c < 0) {
            /* A member the changes do not name: kept by an update, dropped by a sync. */
            if (b->mode != MODE_SYNC) {
                b->members[b->count] = cur->members[ia];
                b->weights[b->count++] = cur->weights[ia];
            } else {
                changed = true;
                note_down(b, cur->members[ia], cur->weights[ia], 0);
            }
            ia++;
        } else if (c == 0) {
            uint32_t w = b->sorted[ib].change->weight;
            void *udata = b->sorted[ib].change->udata;
            if (udata != NULL && udata != cur->members[ia]->udata)
                b->unkept[b->nunkept++] = udata; /* the member keeps its own */
            if (w == 0) {
                changed = true; /* removed */
                note_down(b, cur->members[ia], cur->weights[ia], 0);
            } else {
                b->members[b->count] = cur->members[ia];
                b->weights[b->count++] = w;
                changed |= w != cur->weights[ia];
                if (w != cur->weights[ia])
                    note_down(b, cur->members[ia], cur->weights[ia], w);
            }
            ia++, ib++;
        } else {
            const chring_change_t *ch = b->sorted[ib].change;
            if (ch->weight == 0 || b->mode == MODE_WEIGHT)
                return -ENOENT;
            b->members[b->count] = NULL;
            b->weights[b->count] = ch->weight;
            b->created_at[b->sorted[ib].order] = b->count + 1;
            b->count++;
            changed = true;
            ib++;
        }
    }
    return changed ? 1 : 0;
}

/* 4. In the caller's order, which is their join order (the fnv16 profile's collision rule).  A
 * member that joins a ring that has members already warms up with config.slow_start_ms. */
static int create_members(struct batch *b, chring_t *r, bool slow_start)
{
    for (size_t k = 0; k < b->n; k++) {
        if (b->created_at[k] == 0)
            continue;
        const chring_change_t *ch = &b->changes[k];
        chring_member_t *m =
            chring__member_new(r, ch->name, strlen(ch->name), ch->weight, ch->udata);
        if (m == NULL)
            return -ENOMEM;
        m->id = ++r->member_ids; /* a failed call leaves gaps: ids are unique, not dense */
        b->created[b->ncreated++] = m; /* discarded with the batch if a later step fails */
        if (slow_start &&
            chring__member_slow_start(m, r->cfg.slow_start_from, r->cfg.slow_start_ms) != 0)
            return -ENOMEM;
        b->members[b->created_at[k] - 1] = m;
    }
    return 0;
}

/* What the members that change must know before next replaces cur, written for those only:
 * current weights (so that a reader of next sees them), chring_acquire_try's slot hint (load.c),
 * and, for the members that leave, their report (report.c) and their leases out (ghost.c).  The
 * two snapshots list their members sorted by name, and a member that stays is the same object
 * in both: one walk of the two arrays finds the changes by comparing pointers, and reads a
 * member's name only where the arrays differ.  So a publish at 100,000 members touches the
 * objects of the members it changes, not every one (each a cache miss: docs/bench.md §11).  A
 * member that stays keeps its weight word and its hint unless next changes them: both were
 * written when a snapshot that listed it was published, and its slot is kept by a merge.  The
 * members that leave go in next's chain node (snap_block.c), which drops their references once
 * cur and every snapshot before it are gone. */
static void members_changed(chring_t *r, const chring_snap_t *cur, const chring_snap_t *next,
                            struct chring_chain *node)
{
    size_t ia = 0, ngone = 0;
    for (size_t j = 0; j < next->nmembers; j++) {
        chring_member_t *m = next->members[j];
        while (ia < cur->nmembers && cur->members[ia] != m &&
               chring__name_cmp(cur->members[ia]->name, cur->members[ia]->name_len, m->name,
                                m->name_len) < 0) {
            chring__report_left(r, cur->members[ia]); /* leaves */
            chring__ghost_leave(r, cur->members[ia]);
            node->gone[ngone++] = cur->members[ia];
            ia++;
        }
        if (ia < cur->nmembers && cur->members[ia] == m) { /* stays */
            if (cur->weights[ia] != next->weights[j])
                CHRING_STORE_32(&m->weight, next->weights[j]);
            if (cur->member_slot[ia] != next->member_slot[j])
                CHRING_STORE_32(&m->slot_hint, next->member_slot[j]);
            ia++;
            continue;
        }
        CHRING_STORE_32(&m->weight, next->weights[j]); /* joins */
        CHRING_STORE_32(&m->slot_hint, next->member_slot[j]);
    }
    for (; ia < cur->nmembers; ia++) {
        chring__report_left(r, cur->members[ia]);
        chring__ghost_leave(r, cur->members[ia]);
        node->gone[ngone++] = cur->members[ia];
    }
}

static void batch_free(struct batch *b)
{
    for (size_t k = 0; k < b->ncreated; k++)
        chring__member_discard(b->created[k]);
    chring__free(b->unkept);
    chring__free(b->created_at);
    chring__free(b->created);
    chring__free(b->weights);
    chring__free(b->members);
    chring__free(b->sorted);
}

static int apply(chring_t *r, const chring_change_t *changes, size_t n, enum apply_mode mode)
{
    int err = validate(r, changes, n, mode);
    if (err != 0)
        return err;
    struct batch b = {.changes = changes, .n = n, .mode = mode};
    err = sort_changes(&b);
    if (err != 0) {
        batch_free(&b);
        return err;
    }

    pthread_mutex_lock(&r->lock);
    chring_snap_t *cur = r->current, *next = NULL;
    int changed = merge_membership(&b, cur);
    if (changed <= 0) {
        err = changed; /* 0: nothing changes, nothing is published */
        goto unlock;
    }
    err = create_members(&b, r, r->cfg.slow_start_ms > 0 && cur->nmembers > 0);
    if (err != 0)
        goto unlock;
    next = chring__snap_build(&r->blocks, &r->prof, cur, b.members, b.weights, b.count, &err);
    if (next == NULL)
        goto unlock;
    /* The members of cur that next does not list: all of cur's but those next keeps. */
    struct chring_chain *node = chring__chain_new(cur->nmembers - (next->nmembers - b.ncreated));
    if (node == NULL) {
        chring__snap_discard(next); /* never published: no member reference taken */
        err = -ENOMEM;
        goto unlock;
    }
    struct chring_health *h = &r->health;
    if (b.down_weight_left != 0 || b.down_left != 0) {
        CHRING_STORE_64(&h->ndown, h->ndown - b.down_left);
        CHRING_STORE_64(&h->down_weight,
                        h->down_weight - b.down_weight_left + b.down_weight_joined);
    }
    members_changed(r, cur, next, node);
    chring__chain_link(cur, next, node, b.created, b.ncreated); /* joiners' references */
    chring__publish(r, next);
    chring__ghosts_link(r, b.created, b.ncreated); /* names that come back count them */
    if (r->cfg.slow_start_ms > 0 && cur->nmembers > 0 && b.ncreated > 0)
        chring__ramps_changed(r); /* members that ramp joined (health.c) */
    b.ncreated = 0; /* the new members now belong to the published snapshot */
unlock:
    pthread_mutex_unlock(&r->lock);
    if (err == 0 && r->cfg.retire != NULL)
        for (size_t k = 0; k < b.nunkept; k++)
            r->cfg.retire(b.unkept[k], r->cfg.retire_ctx);
    batch_free(&b);
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
