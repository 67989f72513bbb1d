/* The clockwise walk over a snapshot's points and the memory of the members it found down:
 * what every bounded and n-replica lookup (find.h, lookup.c, load.c) and the search for the first
 * member up (health.c) share.  Below both find.h and health.c, so neither includes the other.
 * SPDX-License-Identifier: MIT */
#ifndef CHRING_WALK_H
#define CHRING_WALK_H

#include "internal.h"

/* The clockwise walk from a key's point: each point is visited at most once, and a run of
 * consecutive points of one member yields that member once (the same member again would give the
 * same answer).  A member met again later, after another one, is yielded again. */
struct chring__walk {
    const chring_snap_t *s;
    size_t i;      /* the next point */
    size_t left;   /* points not visited yet */
    uint32_t last; /* the slot yielded last */
};

static inline void chring__walk_start(struct chring__walk *w, const chring_snap_t *s, size_t i)
{
    w->s = s;
    w->i = i;
    w->left = s->npoints;
    w->last = UINT32_MAX;
}

/* The slot of the next member on the walk, or UINT32_MAX once every point was visited. */
static inline uint32_t chring__walk_next(struct chring__walk *w)
{
    while (w->left > 0) {
        uint32_t j = chring__owner(w->s, w->i);
        if (++w->i == w->s->npoints)
            w->i = 0;
        w->left--;
        if (j != w->last) {
            w->last = j;
            return j;
        }
    }
    return UINT32_MAX;
}

/* The members a walk found down, so that a walk meeting a member again (its points are spread
 * round the ring) judges it as it did the first time, even if it was set up or down in between:
 * a walk concurrent with a flip answers as one state or the other, never a mix of both.  Members
 * found up need no memory: a walk takes or judges them at their first meeting.  Past its
 * capacity the memory re-reads the flag (more members down than a walk usually meets). */
struct chring__downs {
    const chring_member_t *m[16];
    unsigned n;
};

/* How many members of s are up, when that costs O(1): for the current snapshot, its members less
 * the ring's count of members down (which counts the current membership's); for any other
 * snapshot (held, or replaced while the caller reads it), its member count, an upper bound.  So
 * 0 means every member is down (docs/design.md §3, "Health and warm-up": such a ring answers
 * like an empty one without walking its points).  A flag flipped concurrently is seen before or
 * after the flip, as a walk would see it. */
static inline size_t chring__members_up(const chring_snap_t *s)
{
    const struct chring_health *h = s->health;
    if (h->current == NULL || CHRING_RCU_DEREF(*h->current) != s)
        return s->nmembers;
    uint64_t down = CHRING_LOAD_64(&h->ndown);
    return down < s->nmembers ? s->nmembers - (size_t)down : 0;
}

static inline bool chring__down_once(struct chring__downs *d, const chring_member_t *m)
{
    for (unsigned k = 0; k < d->n; k++)
        if (d->m[k] == m)
            return true;
    if (CHRING_LOAD_32(&m->down) == 0)
        return false;
    if (d->n < sizeof d->m / sizeof d->m[0])
        d->m[d->n++] = m;
    return true;
}

#endif
