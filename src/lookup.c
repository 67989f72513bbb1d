/* The read side: read sections, plain, pre-hashed, n-replica and bounded lookups.
 * SPDX-License-Identifier: MIT
 *
 * Everything here runs inside an RCU read section (or on a held snapshot): no lock, no
 * allocation, no system call.  A snapshot never changes after it is published, so plain loads
 * suffice once the snapshot pointer itself was read with a dependency-ordered load. */
#include "find.h"
#include "member.h"
#include "walk.h"

#ifdef CHRING_TSAN
char chring__tsan_grace_token;
char chring__tsan_barrier_token;
#endif

const chring_snap_t *chring_snap_enter(chring_t *r)
{
    if (r == NULL)
        return &chring__empty_snap;
    rcu_read_lock();
    /* Pairs with the writer's release store in chring__publish (ring.c): the snapshot's contents
     * are visible. */
    return CHRING_RCU_DEREF(r->current);
}

void chring_snap_exit(chring_t *r, const chring_snap_t *s)
{
    (void)s;
    if (r == NULL)
        return;
    CHRING_GRACE_READER_DONE();
    rcu_read_unlock();
}

uint64_t chring_snap_hash(const chring_snap_t *s, const void *key, size_t len)
{
    if (s == NULL || (key == NULL && len > 0))
        return 0;
    return s->prof.desc->hash(&s->prof, key, len);
}

const chring_member_t *chring_snap_lookup_hash(const chring_snap_t *s, uint64_t h)
{
    if (s == NULL || s->npoints == 0)
        return NULL;
    uint64_t h64 = s->prof.shift == 0 ? h : h << s->prof.shift; /* bits above the width fall off */
    return chring__owner_of(s, h64);
}

const chring_member_t *chring_snap_lookup(const chring_snap_t *s, const void *key, size_t len)
{
    if (s == NULL || s->npoints == 0 || (key == NULL && len > 0))
        return NULL;
    return chring__owner_of(s, chring__key_pos(s, key, len));
}

size_t chring_snap_lookup_n(const chring_snap_t *s, const void *key, size_t len,
                            const chring_member_t **out, size_t n)
{
    if (s == NULL || out == NULL || s->npoints == 0 || (key == NULL && len > 0))
        return 0;
    size_t want = n < s->nmembers ? n : s->nmembers;
    size_t got = 0;
    bool any_down = CHRING_LOAD_64(&s->health->alive_down) != 0;
    if (any_down) {
        /* No more members than are up: the walk stops once it has them all (with every member
         * down, at once) instead of visiting every point. */
        size_t up = chring__members_up(s);
        want = want < up ? want : up;
    }
    struct chring__downs downs = {.n = 0};
    struct chring__walk walk;
    chring__walk_start(&walk, s, chring__start(s, chring__key_pos(s, key, len)));
    for (uint32_t j; got < want && (j = chring__walk_next(&walk)) != UINT32_MAX;) {
        const chring_member_t *m = s->slot_member[j];
        bool seen = false;
        for (size_t k = 0; k < got && !seen; k++)
            seen = out[k] == m;
        if (seen || (any_down && chring__down_once(&downs, m)))
            continue;
        out[got++] = m;
    }
    return got;
}

const chring_member_t *chring_snap_lookup_bounded(const chring_snap_t *s, const void *key,
                                                  size_t len, double c, chring_load_fn load,
                                                  void *ctx)
{
    if (s == NULL || load == NULL || s->npoints == 0 || (key == NULL && len > 0))
        return NULL;
    c = chring__clamp_balance(c);
    uint64_t total = 0;
    for (size_t j = 0; j < s->nmembers; j++)
        total += load(s->members[j], ctx);
    bool any_down = CHRING_LOAD_64(&s->health->alive_down) != 0;
    if (any_down && chring__members_up(s) == 0)
        return NULL; /* every member down: like an empty ring, without a walk */
    uint64_t weight = any_down ? chring__up_weight(s) : s->total_weight;

    struct chring__downs downs = {.n = 0};
    struct chring__walk walk;
    chring__walk_start(&walk, s, chring__start(s, chring__key_pos(s, key, len)));
    const chring_member_t *least = NULL;
    uint64_t least_load = UINT64_MAX;
    for (uint32_t j; (j = chring__walk_next(&walk)) != UINT32_MAX;) {
        const chring_member_t *m = s->slot_member[j];
        if (any_down && chring__down_once(&downs, m))
            continue;
        uint64_t l = load(m, ctx);
        if (l < chring_capacity_weighted(total, s->slot_weight[j], weight, c))
            return m;
        if (l < least_load) {
            least_load = l;
            least = m;
        }
    }
    /* Only an inconsistent load callback gets here (loads summing to m cannot all be full), or a
     * ring whose every member is down (NULL). */
    return least;
}

int chring_lookup_name(chring_t *r, const void *key, size_t len, char *buf, size_t cap)
{
    if (r == NULL || buf == NULL || (key == NULL && len > 0))
        return -EINVAL;
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_lookup(s, key, len);
    int ret;
    if (m == NULL) {
        ret = -ENOENT;
    } else if (cap < (size_t)m->name_len + 1) {
        ret = -ENOSPC;
    } else {
        memcpy(buf, m->name, (size_t)m->name_len + 1);
        ret = (int)m->name_len;
    }
    chring_snap_exit(r, s);
    return ret;
}
