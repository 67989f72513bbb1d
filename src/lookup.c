/* The read side: read sections, plain, pre-hashed, n-replica and bounded lookups.
 * SPDX-License-Identifier: MIT
 *
 * Everything here runs inside an RCU read section (or on a held snapshot): no lock, no
 * allocation, no system call.  A snapshot never changes after it is published, so plain loads
 * suffice once the snapshot pointer itself was read with a dependency-ordered load. */
#include "internal.h"

#ifdef CHRING_TSAN
char chring__tsan_grace_token;
#endif

const chring_snap_t *chring_snap_enter(chring_t *r)
{
    if (r == NULL)
        return &chring__empty_snap;
    rcu_read_lock();
    /* Pairs with the writer's release store in publish(): the snapshot's contents are visible. */
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
    return chring__profile_hash(s->profile, s->hash, s->hash_ctx, s->bits, key, len);
}

const chring_member_t *chring_snap_lookup_hash(const chring_snap_t *s, uint64_t h)
{
    if (s == NULL || s->npoints == 0)
        return NULL;
    uint64_t h64 = s->shift == 0 ? h : h << s->shift; /* bits above the width fall off */
    return s->slot_member[s->owner[chring__find(s, h64)]];
}

const chring_member_t *chring_snap_lookup(const chring_snap_t *s, const void *key, size_t len)
{
    if (s == NULL || s->npoints == 0 || (key == NULL && len > 0))
        return NULL;
    return s->slot_member[s->owner[chring__find(s, chring__key_pos(s, key, len))]];
}

size_t chring_snap_lookup_n(const chring_snap_t *s, const void *key, size_t len,
                            const chring_member_t **out, size_t n)
{
    if (s == NULL || out == NULL || s->npoints == 0 || (key == NULL && len > 0))
        return 0;
    size_t want = n < s->nmembers ? n : s->nmembers;
    size_t got = 0;
    size_t i = chring__find(s, chring__key_pos(s, key, len));
    for (size_t step = 0; step < s->npoints && got < want; step++) {
        const chring_member_t *m = s->slot_member[s->owner[i]];
        bool seen = false;
        for (size_t k = 0; k < got && !seen; k++)
            seen = out[k] == m;
        if (!seen)
            out[got++] = m;
        if (++i == s->npoints)
            i = 0;
    }
    return got;
}

const chring_member_t *chring_snap_lookup_bounded(const chring_snap_t *s, const void *key,
                                                  size_t len, double c,
                                                  uint64_t (*load)(const chring_member_t *m,
                                                                   void *ctx),
                                                  void *ctx)
{
    if (s == NULL || load == NULL || s->npoints == 0 || (key == NULL && len > 0))
        return NULL;
    c = chring__clamp_balance(c);
    uint64_t total = 0;
    for (size_t j = 0; j < s->nmembers; j++)
        total += load(s->members[j], ctx);

    size_t i = chring__find(s, chring__key_pos(s, key, len));
    uint32_t last = UINT32_MAX;
    const chring_member_t *least = NULL;
    uint64_t least_load = UINT64_MAX;
    for (size_t step = 0; step < s->npoints; step++) {
        uint32_t j = s->owner[i];
        if (++i == s->npoints)
            i = 0;
        if (j == last)
            continue; /* the same member again: same answer */
        last = j;
        const chring_member_t *m = s->slot_member[j];
        uint64_t l = load(m, ctx);
        if (l < chring_capacity_weighted(total, s->slot_weight[j], s->total_weight, c))
            return m;
        if (l < least_load) {
            least_load = l;
            least = m;
        }
    }
    /* Only an inconsistent load callback gets here (loads summing to m cannot all be full). */
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

/* ---- member accessors --------------------------------------------------------------------- */

const char *chring_member_name(const chring_member_t *m)
{
    return m == NULL ? NULL : m->name;
}

void *chring_member_udata(const chring_member_t *m)
{
    return m == NULL ? NULL : m->udata;
}

uint32_t chring_member_weight(const chring_member_t *m)
{
    return m == NULL ? 0 : CHRING_LOAD_32(&m->weight);
}

uint64_t chring_member_load(const chring_member_t *m)
{
    return m == NULL ? 0 : (CHRING_LOAD_64(&m->word) & CHRING_LOAD_MASK);
}
