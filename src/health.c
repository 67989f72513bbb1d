/* Health and warm-up: a member taken out of service without touching the ring, and an admission
 * scale that warms a member up (or drains it) by capacity, not by placement (docs/design.md §4).
 * SPDX-License-Identifier: MIT
 *
 * Down.  A member that is down keeps its points, its object and its counters; every lookup and
 * acquire walks past it, so its keys go where a removal would send them (the next point
 * clockwise) and every other key keeps its owner.  Setting it down or up writes one flag on the
 * member and the ring's count of members down (struct chring_health, beside the published
 * pointer): no allocation, no rebuild.  A lookup checks the count first, so with no member down
 * it costs what it cost before health existed.  Writers keep the count and the down members'
 * total weight right under the ring lock (chring_set_down here, publishes in apply.c); the
 * capacities count only the members that are up.
 *
 * Ramp.  A member's admission scale s(t) in [0, 1] multiplies its capacity in chring_acquire and
 * chring_acquire_skip: it is admitted while its load is below ceil(s * cap).  The ramp's
 * parameters live on the member's second cache line; its generation on the first, which an
 * acquire reads anyway: generation 0 means scale 1 and costs no clock read.  A ramp that has
 * reached 1 is cleared by the first acquire that notices (a compare-and-swap of its generation,
 * so a newer ramp is never cleared).  The ring counts the member objects alive whose ramp is set
 * (chring.ramps_alive, kept wherever a generation moves from or to 0: member.c's
 * chring__member_ramp_gen, and here the acquire that clears a finished ramp): the ramp epoch
 * below is cleared only while it is 0, so a held snapshot that lists a member removed while it
 * ramped keeps counting its scale.  A reader concurrent with
 * chring_set_ramp may combine an old and a new parameter for that instant; the scale is clamped
 * to [0, 1] either way.  Every change of a ramp, and of health while ramps run, gives the ring a
 * new ramp epoch (below), which the effective weights' cache is keyed on (effective.c). */
#include "member.h"
#include "walk.h"

#include <math.h>
#include <time.h>

/* ---- down --------------------------------------------------------------------------------- */

uint64_t chring__up_weight(const chring_snap_t *s)
{
    uint64_t down = 0;
    if (s->health->current != NULL && CHRING_RCU_DEREF(*s->health->current) == s) {
        down = CHRING_LOAD_64(&s->health->down_weight); /* the current membership's */
    } else {
        /* A held or replaced snapshot: its own members' weights (rare: some member is down). */
        for (size_t j = 0; j < s->nmembers; j++)
            if (chring__member_down(s->members[j]))
                down += s->weights[j];
    }
    return s->total_weight > down ? s->total_weight - down : 0;
}

const chring_member_t *chring__first_up(const chring_snap_t *s, size_t i)
{
    if (chring__members_up(s) == 0)
        return NULL; /* every member down: O(1), not a walk of every point */
    struct chring__downs downs = {.n = 0};
    struct chring__walk walk;
    chring__walk_start(&walk, s, i);
    for (uint32_t j; (j = chring__walk_next(&walk)) != UINT32_MAX;)
        if (!chring__down_once(&downs, s->slot_member[j]))
            return s->slot_member[j];
    return NULL;
}

/* The member named (name, len) in r's current snapshot, under r's lock; its rank in *rank.  One
 * binary search of the names. */
static chring_member_t *find_locked(chring_t *r, const char *name, size_t len, long *rank)
{
    *rank = chring__snap_find_rank(r->current, name, len);
    return *rank < 0 ? NULL : r->current->members[*rank];
}

int chring_set_down(chring_t *r, const char *name, int down)
{
    size_t len;
    if (r == NULL)
        return -EINVAL;
    int err = chring__name_check(name, &len);
    if (err != 0)
        return err;
    pthread_mutex_lock(&r->lock);
    long rank;
    chring_member_t *m = find_locked(r, name, len, &rank);
    if (m == NULL) {
        pthread_mutex_unlock(&r->lock);
        return -ENOENT;
    }
    uint32_t want = down != 0;
    if (m->down != want) {
        uint64_t w = r->current->weights[rank];
        struct chring_health *h = &r->health;
        if (want) {
            /* The flag before the count: a reader that sees the count sees the flag. */
            CHRING_STORE_32(&m->down, 1);
            chring__report_drop(r, m); /* a report of a member down is ignored (report.c) */
            CHRING_STORE_64(&h->down_weight, h->down_weight + w);
            CHRING_STORE_64(&h->ndown, h->ndown + 1);
            ck_pr_inc_64(&h->alive_down); /* full barrier: after the flag */
        } else {
            ck_pr_dec_64(&h->alive_down);
            CHRING_STORE_64(&h->ndown, h->ndown - 1);
            CHRING_STORE_64(&h->down_weight, h->down_weight - w);
            ck_pr_fence_store();
            CHRING_STORE_32(&m->down, 0);
        }
        chring__ramps_touch(r); /* a cached sum of effective weights counted the old state */
    }
    pthread_mutex_unlock(&r->lock); /* a release: later read sections see the change */
    return 0;
}

int chring_member_is_down(const chring_member_t *m)
{
    if (m == NULL)
        return -EINVAL;
    return chring__member_down(m) ? 1 : 0;
}

/* ---- ramp --------------------------------------------------------------------------------- */

static bool valid_scale(double x)
{
    return x >= 0.0 && x <= 1.0; /* false for NaN */
}

/* Writes a ramp's parameters (in the member's cold block), then (store fence) its new
 * generation.  0, or -ENOMEM with nothing changed. */
static int ramp_store(chring_member_t *m, double from, double to, uint32_t ms, uint64_t start)
{
    if (ms == 0 && to >= 1.0) {
        chring__member_ramp_gen(m, false);
        return 0;
    }
    struct chring_member_cold *c = chring__member_cold(m);
    if (c == NULL)
        return -ENOMEM;
    CHRING_STORE_64(&c->ramp_start_ns, start);
    CHRING_STORE_64(&c->ramp_len_ns, (uint64_t)ms * UINT64_C(1000000));
    CHRING_STORE_64(&c->ramp_from, chring__double_bits(from));
    CHRING_STORE_64(&c->ramp_to, chring__double_bits(to));
    ck_pr_fence_store();
    chring__member_ramp_gen(m, true);
    return 0;
}

/* The ramp epoch, health.ramp_epoch: how an acquire knows without a clock read that no member
 * ramps, and when a cached sum of effective weights is stale (effective.c says how it is read and
 * cleared).  Writer side, under the ring lock. */
void chring__ramps_changed(chring_t *r)
{
    ck_pr_fence_store(); /* the ramp's generation before the epoch (effective.c) */
    CHRING_STORE_64(&r->health.ramp_epoch, ++r->ramp_seq);
}

void chring__ramps_touch(chring_t *r)
{
    if (CHRING_LOAD_64(&r->health.ramp_epoch) != 0)
        chring__ramps_changed(r);
}

int chring_set_ramp(chring_t *r, const char *name, double from, double to, uint32_t ms)
{
    size_t len;
    if (r == NULL || !valid_scale(from) || !valid_scale(to))
        return -EINVAL;
    int err = chring__name_check(name, &len);
    if (err != 0)
        return err;
    uint64_t start = chring__now_ns();
    pthread_mutex_lock(&r->lock);
    long rank;
    chring_member_t *m = find_locked(r, name, len, &rank);
    err = m == NULL ? -ENOENT : ramp_store(m, from, to, ms, start);
    if (err == 0)
        chring__ramps_changed(r); /* effective weights: E now changes (effective.c) */
    pthread_mutex_unlock(&r->lock);
    return err;
}

int chring__member_slow_start(chring_member_t *m, double from, uint32_t ms)
{
    return ramp_store(m, from, 1.0, ms, chring__now_ns());
}

double chring__member_ramp_scale(chring_member_t *m)
{
    uint32_t gen = CHRING_LOAD_32(&m->ramp_gen);
    if (gen == 0)
        return 1.0;
    ck_pr_fence_load(); /* pairs with ramp_store's store fence */
    const struct chring_member_cold *c = CHRING_LOAD_PTR(&m->cold); /* set before ramp_gen */
    uint64_t start = CHRING_LOAD_64(&c->ramp_start_ns);
    uint64_t len = CHRING_LOAD_64(&c->ramp_len_ns);
    double from = chring__bits_double(CHRING_LOAD_64(&c->ramp_from));
    double to = chring__bits_double(CHRING_LOAD_64(&c->ramp_to));
    uint64_t now = chring__now_ns();
    double s;
    if (now < start || len == 0 || now - start >= len) {
        s = now < start ? from : to;
        if (now >= start && to >= 1.0 && ck_pr_cas_32(&m->ramp_gen, gen, 0))
            ck_pr_dec_64(&m->ring->ramps_alive); /* done: later acquires read no clock */
    } else {
        s = from + (to - from) * ((double)(now - start) / (double)len);
    }
    return s < 0.0 ? 0.0 : s > 1.0 ? 1.0 : s;
}

double chring_member_scale(const chring_member_t *m)
{
    return m == NULL ? 0.0 : chring__member_ramp_scale((chring_member_t *)m);
}
