/* Bounded loads with built-in counters: leases, per-member counters, ring statistics.
 * SPDX-License-Identifier: MIT
 *
 * Counters.  Each member's load lives in the low half of its hot word (its own cache line, shared
 * with its primary/spilled_in statistics, outside snapshots, so a publish neither copies nor
 * resets it).  The ring-wide number of outstanding leases m is not one shared counter (measured
 * here: 116 ns per acquire+release on 2 threads against 26 ns on 1): each thread acquires
 * through the shard it was given (a cache line of its own; one shard per online CPU, rounded up
 * to a power of two), the lease records that shard, and its release decrements the same shard.
 * m is the sum of the shards' counts, read in one pass.  Each shard's count is exact at the
 * moment it is read, so the sum is exact whenever no acquire or release is in flight; while they
 * are, a shard read early and one read late may each be off by what changed in between, so a
 * reader's m is at most the sum over shards of the most each held during its read (with every
 * thread on its own shard: at most the leases each thread holds, plus those in flight).  A
 * release on another thread than its acquire writes the acquiring thread's shard line: correct,
 * only slower.
 *
 * Admission (docs/design.md §3).  A thread computes each member's capacity from the m it read
 * (read only once a loaded member must be judged: load 0 is below every capacity, which is >= 1),
 * then adds 1 to the member's word and keeps the lease only if the old load was below that
 * capacity; else it takes the 1 back and walks on.  Before the fetch-and-add it looks at the load
 * with a plain atomic load, so full members cost no write.  The walk visits each point at most
 * once; if every member looked full (possible only through races), the key goes to the least
 * loaded member seen and a saturation event is counted.  The undo can never drop the word to
 * zero (member.h).
 */
#include "find.h"
#include "member.h"
#include "walk.h"

static unsigned next_slot;
static _Thread_local unsigned my_slot; /* 0: not assigned yet; else slot + 1 */

static inline struct chring_shard *my_shard(chring_t *r)
{
    unsigned slot = my_slot;
    if (CHRING_UNLIKELY(slot == 0)) {
        slot = ck_pr_faa_uint(&next_slot, 1) + 1;
        my_slot = slot;
    }
    return &r->shards[(slot - 1) & r->shard_mask];
}

uint64_t chring__leases(chring_t *r)
{
    uint64_t sum = 0;
    for (unsigned k = 0; k <= r->shard_mask; k++)
        sum += CHRING_LOAD_64(&r->shards[k].leases);
    /* Each count is non-negative at every instant; a sum read across instants is, too, but stay
     * safe against a wrapped read. */
    return sum > (UINT64_C(1) << 62) ? 0 : sum;
}

uint64_t chring_leases(chring_t *r)
{
    return r == NULL ? 0 : chring__leases(r);
}

/* A lease's reserved_ word: the shard it was acquired through in the top 8 bits, and a cookie
 * derived from the member and the ring below, so that release ignores a lease this library did
 * not fill in (a zeroed one, say) and a lease released through another ring than its own (which
 * would otherwise take a lease from the other ring's count and move its m). */
#define LEASE_COOKIE_MASK ((UINT64_C(1) << 56) - 1)

static inline uint64_t lease_cookie(const chring_t *r, const chring_member_t *m)
{
    uint64_t ring = (uint64_t)(uintptr_t)r * UINT64_C(0x9e3779b97f4a7c15);
    return ((uint64_t)(uintptr_t)m ^ ring ^ UINT64_C(0x4c65617365c0ffee)) & LEASE_COOKIE_MASK;
}

static inline void lease_clear(chring_lease_t *lease)
{
    lease->member = NULL;
    lease->reserved_ = 0;
    lease->outcome = CHRING_OUTCOME_NONE;
}

static inline void lease_fill(chring_t *r, chring_lease_t *lease, chring_member_t *m,
                              const struct chring_shard *shard, uint32_t outcome)
{
    lease->member = m;
    lease->reserved_ = (uint64_t)(shard - r->shards) << 56 | lease_cookie(r, m);
    lease->outcome = outcome;
}

/* The capacities one acquire judges members by (docs/design.md §3): m read once, on first need.
 * With no ramp running (epoch 0) and every member met at scale 1, the integer weights against W
 * of the members up, the capacity cached per weight (equal weights share one): exactly the rule
 * without ramps, no clock read.  Otherwise effective weights: e_j = s_j * w_j against E, the sum
 * over the members up, cached in the snapshot for at most a millisecond (effective.c). */
struct capacity {
    chring_t *r;
    const chring_snap_t *s;
    uint64_t rseq;      /* health->report_seq as read at the start: 0, no report counts */
    uint64_t now;       /* the clock, read at the start when rseq is not 0 (report.c) */
    uint64_t up_weight; /* W: the snapshot's total weight of members that are up */
    uint64_t epoch;     /* health->ramp_epoch as read at the start */
    double c;
    bool have_total;
    bool have_sum;
    uint64_t total;
    double sum;      /* E, once needed */
    uint32_t weight; /* the weight whose capacity (scale 1) is in cap; 0: none yet */
    uint64_t cap;
};

static inline void capacity_init(struct capacity *k, chring_t *r, const chring_snap_t *s,
                                 bool any_down)
{
    k->r = r;
    k->s = s;
    k->epoch = CHRING_LOAD_64(&s->health->ramp_epoch);
    k->rseq = CHRING_LOAD_64(&s->health->report_seq);
    k->now = CHRING_UNLIKELY(k->rseq != 0) ? chring__now_ns() : 0;
    k->up_weight = any_down ? chring__up_weight(s) : s->total_weight;
    k->c = r->balance;
    k->have_total = false;
    k->have_sum = false;
    k->total = 0;
    k->sum = 0.0;
    k->weight = 0;
    k->cap = 0;
}

/* The ring's floor under cap: chring__capacity_floor, inline in internal.h beside hash.c's other
 * capacity formulas. */
static inline uint64_t with_floor(const struct capacity *k, uint64_t cap, double e)
{
    return chring__capacity_floor(cap, k->r->floor, e);
}

static uint64_t capacity_slow(struct capacity *k, uint32_t weight, double scale)
{
    if (!k->have_sum) {
        k->sum = chring__effective_weight(k->r, k->s, k->epoch);
        k->have_sum = true;
    }
    double e = scale * (double)weight;
    return with_floor(k, chring__capacity_effective(k->total, e, k->sum, k->c), e);
}

static inline uint64_t capacity_of(struct capacity *k, uint32_t weight, double scale)
{
    if (!k->have_total) {
        k->total = chring__leases(k->r);
        if (CHRING_UNLIKELY(k->rseq != 0))
            k->total += chring__report_sum(k->s, k->rseq, k->now);
        k->have_total = true;
    }
    if (CHRING_UNLIKELY(k->epoch != 0 || scale < 1.0))
        return capacity_slow(k, weight, scale);
    if (weight != k->weight) {
        k->weight = weight;
        k->cap = with_floor(k, chring_capacity_weighted(k->total, weight, k->up_weight, k->c),
                            (double)weight);
    }
    return k->cap;
}

/* Whether m is one of the nskip members the caller passes over: compared by identity, or with
 * skip_ids by chring_member_id (which no other member of the ring ever has). */
static inline bool skipped(const chring_member_t *m, const chring_member_t *const *skip,
                           const uint64_t *skip_ids, size_t nskip)
{
    if (skip_ids != NULL) {
        for (size_t k = 0; k < nskip; k++)
            if (skip_ids[k] == m->id)
                return true;
        return false;
    }
    for (size_t k = 0; k < nskip; k++)
        if (skip[k] == m)
            return true;
    return false;
}

/* What the bound counts for m beyond its own leases: its report's excess (report.c; 0 while no
 * report counts, no clock read) and the leases of its prev chain (a flap, ghost.c; 0 without
 * one, a load of m's first line).  Inside a read section.  Below 2^35. */
static inline uint64_t report_extra(const struct capacity *k, const chring_member_t *m)
{
    uint64_t extra = chring__member_inherited(m);
    if (CHRING_UNLIKELY(k->rseq != 0))
        extra += chring__report_extra(m, k->now);
    return extra;
}

/* a * w in 128 bits, as *hi and *lo. */
static inline void mul_wide(uint64_t a, uint32_t w, uint64_t *hi, uint64_t *lo)
{
    uint64_t low = (a & UINT64_C(0xffffffff)) * w, high = (a >> 32) * w;
    *lo = low + (high << 32);
    *hi = (high >> 32) + (*lo < low);
}

/* Whether load a at weight wa is below load b at weight wb relative to the weights (a / wa <
 * b / wb): leases (the low half of the member's word) and weights are below 2^32, so the
 * products fit in 64 bits; a load a report raised may not, and is compared in 128 bits. */
static inline bool lighter(uint64_t a, uint32_t wa, uint64_t b, uint32_t wb)
{
    if (CHRING_LIKELY((a | b) >> 32 == 0))
        return a * (uint64_t)wb < b * (uint64_t)wa;
    uint64_t ahi, alo, bhi, blo;
    mul_wide(a, wb, &ahi, &alo);
    mul_wide(b, wa, &bhi, &blo);
    return ahi < bhi || (ahi == bhi && alo < blo);
}

/* The bounded-load walk of every acquire by key or hash (docs/design.md §3): from the point of
 * shifted position h64, clockwise, the first member outside skip admitted below its capacity; if
 * every such member looked full (only races can do that), the least loaded one seen relative to
 * its weight, one at scale 0 only when no other was met (saturation).  Returns 0 and fills the
 * lease, or -ENOENT when no member outside skip was met (an empty ring, or everything
 * skipped).  Inlined for each caller: with nskip 0 the skip test folds away. */
static inline int place(chring_t *r, uint64_t h64, bool hashed, const void *key, size_t len,
                        const chring_member_t *const *skip, const uint64_t *skip_ids, size_t nskip,
                        bool retry, chring_lease_t *lease)
{
    const chring_snap_t *s = chring_snap_enter(r);
    if (s->npoints == 0) {
        chring_snap_exit(r, s);
        lease_clear(lease);
        return -ENOENT;
    }
    if (!hashed)
        h64 = chring__key_pos(s, key, len);
    else if (s->prof.shift != 0)
        h64 <<= s->prof.shift; /* bits above the profile's width fall off */
    struct chring__walk walk;
    chring__walk_start(&walk, s, chring__start(s, h64));
    const uint32_t owner = chring__owner(s, walk.i);

    /* m is read only when a loaded member must be judged: a member with load 0 is below every
     * capacity of a member whose scale is above 0 (c * (m + 1) * e / E > 0, so cap >= 1), which
     * spares the common, lightly loaded case the read of every shard's line. */
    bool any_down = CHRING_LOAD_64(&s->health->alive_down) != 0;
    if (CHRING_UNLIKELY(any_down) && chring__members_up(s) == 0) {
        chring_snap_exit(r, s); /* every member down: -ENOENT in O(1), not a walk */
        lease_clear(lease);
        return -ENOENT;
    }
    struct capacity capacity;
    capacity_init(&capacity, r, s, any_down);
    /* least: the least loaded member met (relative to its weight) that may be admitted at all;
     * parked: the same among those at admission scale 0, which the saturation fallback takes
     * only when nothing else is met. */
    struct chring__downs downs = {.n = 0};
    uint32_t chosen = UINT32_MAX, least = UINT32_MAX, parked = UINT32_MAX;
    /* The first member met that is up and not skipped, and whether a skipped member came
     * before it: a key whose owner is down and that lands there went where the health-aware
     * lookup sends it (CHRING_OUTCOME_OWNER_DOWN), not past a full member. */
    uint32_t first_up = UINT32_MAX;
    bool skipped_first = false;
    uint64_t least_load = 0, parked_load = 0;
    for (uint32_t j; (j = chring__walk_next(&walk)) != UINT32_MAX;) {
        chring_member_t *m = s->slot_member[j];
        if (nskip > 0 && skipped(m, skip, skip_ids, nskip)) {
            skipped_first |= first_up == UINT32_MAX;
            continue; /* as if full */
        }
        if (any_down && chring__down_once(&downs, m))
            continue; /* out of service: as a removal would */
        if (first_up == UINT32_MAX)
            first_up = j;
        uint64_t extra = report_extra(&capacity, m);
        uint64_t load = chring__member_load(m) + extra;
        uint32_t weight = s->slot_weight[j];
        double scale = 1.0;
        if (CHRING_UNLIKELY(CHRING_LOAD_32(&m->ramp_gen) != 0)) {
            scale = chring__member_ramp_scale(m);
            if (scale <= 0.0) {
                if (parked == UINT32_MAX ||
                    lighter(load, weight, parked_load, s->slot_weight[parked])) {
                    parked_load = load;
                    parked = j;
                }
                continue; /* admits nothing */
            }
        }
        if (least == UINT32_MAX || lighter(load, weight, least_load, s->slot_weight[least])) {
            least_load = load;
            least = j;
        }
        if (load != 0 && load >= capacity_of(&capacity, weight, scale))
            continue; /* looks full: no write */
        uint64_t old = chring__member_admit(m) + extra;
        if (old == 0 || old < capacity_of(&capacity, weight, scale)) {
            chosen = j;
            break;
        }
        chring__member_undo(m);
    }
    if (CHRING_UNLIKELY(least == UINT32_MAX))
        least = parked;
    if (CHRING_UNLIKELY(least == UINT32_MAX)) {
        chring_snap_exit(r, s); /* every member met was skipped or down */
        lease_clear(lease);
        return -ENOENT;
    }

    struct chring_shard *shard = my_shard(r);
    uint32_t outcome = CHRING_OUTCOME_OWNER;
    if (CHRING_UNLIKELY(chosen == UINT32_MAX)) {
        chosen = least;
        chring__member_force(s->slot_member[chosen]);
        ck_pr_inc_64(&shard->saturated);
        outcome = CHRING_OUTCOME_SATURATED;
    }
    chring_member_t *m = s->slot_member[chosen];
    if (chosen == owner) {
        ck_pr_inc_64(&m->primary);
    } else if (outcome == CHRING_OUTCOME_OWNER && chosen == first_up && !skipped_first) {
        /* The owner is down (every member before first_up was), and the key is where a lookup
         * sends it: not a spill for load. */
        ck_pr_inc_64(&m->down_in);
        ck_pr_inc_64(&shard->owner_down);
        outcome = CHRING_OUTCOME_OWNER_DOWN;
    } else {
        ck_pr_inc_64(&m->spilled_in);
        ck_pr_inc_64(&shard->spills);
        if (outcome == CHRING_OUTCOME_OWNER)
            outcome = CHRING_OUTCOME_SPILLED;
    }
    if (retry)
        ck_pr_inc_64(&shard->retries);
    ck_pr_inc_64(&shard->leases);
    ck_pr_inc_64(&shard->acquired);
    chring_snap_exit(r, s);
    lease_fill(r, lease, m, shard, outcome);
    return 0;
}

int chring_acquire(chring_t *r, const void *key, size_t len, chring_lease_t *lease)
{
    if (r == NULL || lease == NULL || (key == NULL && len > 0)) {
        if (lease != NULL)
            lease_clear(lease);
        return -EINVAL;
    }
    return place(r, 0, false, key, len, NULL, NULL, 0, false, lease);
}

int chring_acquire_skip(chring_t *r, const void *key, size_t len,
                        const chring_member_t *const *skip, size_t nskip, chring_lease_t *lease)
{
    if (r == NULL || lease == NULL || (key == NULL && len > 0) || (skip == NULL && nskip > 0)) {
        if (lease != NULL)
            lease_clear(lease);
        return -EINVAL;
    }
    return place(r, 0, false, key, len, skip, NULL, nskip, true, lease);
}

int chring_acquire_skip_ids(chring_t *r, const void *key, size_t len, const uint64_t *skip_ids,
                            size_t nskip, chring_lease_t *lease)
{
    if (r == NULL || lease == NULL || (key == NULL && len > 0) || (skip_ids == NULL && nskip > 0)) {
        if (lease != NULL)
            lease_clear(lease);
        return -EINVAL;
    }
    return place(r, 0, false, key, len, NULL, nskip > 0 ? skip_ids : NULL, nskip, true, lease);
}

int chring_acquire_hash_skip_ids(chring_t *r, uint64_t hash, const uint64_t *skip_ids, size_t nskip,
                                 chring_lease_t *lease)
{
    if (r == NULL || lease == NULL || (skip_ids == NULL && nskip > 0)) {
        if (lease != NULL)
            lease_clear(lease);
        return -EINVAL;
    }
    return place(r, hash, true, NULL, 0, NULL, nskip > 0 ? skip_ids : NULL, nskip, true, lease);
}

uint64_t chring_member_id(const chring_member_t *m)
{
    return m == NULL ? 0 : m->id;
}

int chring_acquire_hash(chring_t *r, uint64_t hash, chring_lease_t *lease)
{
    if (r == NULL || lease == NULL) {
        if (lease != NULL)
            lease_clear(lease);
        return -EINVAL;
    }
    return place(r, hash, true, NULL, 0, NULL, NULL, 0, false, lease);
}

int chring_acquire_hash_skip(chring_t *r, uint64_t hash, const chring_member_t *const *skip,
                             size_t nskip, chring_lease_t *lease)
{
    if (r == NULL || lease == NULL || (skip == NULL && nskip > 0)) {
        if (lease != NULL)
            lease_clear(lease);
        return -EINVAL;
    }
    return place(r, hash, true, NULL, 0, skip, NULL, nskip, true, lease);
}

int chring_acquire_member(chring_t *r, const chring_snap_t *s, const chring_member_t *m,
                          chring_lease_t *lease)
{
    if (lease == NULL)
        return -EINVAL;
    lease_clear(lease);
    if (r == NULL || s == NULL || m == NULL)
        return -EINVAL;
    if (chring_snap_weight(s, m) == 0)
        return -ENOENT;
    /* s lists m, so s's reference keeps m's word above zero while we add the lease. */
    chring_member_t *mm = (chring_member_t *)m;
    struct chring_shard *shard = my_shard(r);
    chring__member_force(mm);
    ck_pr_inc_64(&mm->primary);
    ck_pr_inc_64(&shard->leases);
    ck_pr_inc_64(&shard->acquired);
    lease_fill(r, lease, mm, shard, CHRING_OUTCOME_OWNER);
    return 0;
}

/* The capacity m has for the next acquire on s, judged as place() judges it, and in *extra what
 * m's report adds to its leases (report.c); *usable false when m cannot be admitted at all
 * (down, scale 0). */
static uint64_t member_capacity(chring_t *r, const chring_snap_t *s, chring_member_t *m,
                                uint32_t weight, bool *usable, uint64_t *extra)
{
    *usable = false;
    *extra = 0;
    if (chring__member_down(m))
        return 0;
    double scale = CHRING_LOAD_32(&m->ramp_gen) != 0 ? chring__member_ramp_scale(m) : 1.0;
    if (scale <= 0.0)
        return 0;
    *usable = true;
    bool any_down = CHRING_LOAD_64(&s->health->alive_down) != 0;
    struct capacity capacity;
    capacity_init(&capacity, r, s, any_down);
    *extra = report_extra(&capacity, m);
    return capacity_of(&capacity, weight, scale);
}

int chring_acquire_try(chring_t *r, const chring_snap_t *s, const chring_member_t *m,
                       chring_lease_t *lease)
{
    if (lease == NULL)
        return -EINVAL;
    lease_clear(lease);
    if (r == NULL || s == NULL || m == NULL)
        return -EINVAL;
    /* Whether s lists m, and its weight there: by the slot the last publish gave it (one load,
     * no name search), or, for a snapshot that lists it elsewhere or not at all (an older one),
     * by its name. */
    uint32_t hint = CHRING_LOAD_32(&m->slot_hint), weight;
    if (CHRING_LIKELY(hint < s->nslots && s->slot_member[hint] == m))
        weight = s->slot_weight[hint];
    else
        weight = chring_snap_weight(s, m);
    if (weight == 0)
        return -ENOENT;
    chring_member_t *mm = (chring_member_t *)m;
    bool usable;
    uint64_t extra;
    rcu_read_lock(); /* a flap's prev is read inside a read section (ghost.c) */
    uint64_t cap = member_capacity(r, s, mm, weight, &usable, &extra);
    CHRING_GRACE_READER_DONE();
    rcu_read_unlock();
    if (!usable)
        return -ENOENT;
    /* Strict admission, as in place(): keep the lease only if the load before it was below the
     * capacity (load 0 is below every capacity of a usable member).  s's reference keeps m's
     * word above zero meanwhile. */
    uint64_t old = chring__member_admit(mm) + extra;
    if (old != 0 && old >= cap) {
        chring__member_undo(mm);
        return -EBUSY;
    }
    struct chring_shard *shard = my_shard(r);
    ck_pr_inc_64(&mm->primary);
    ck_pr_inc_64(&shard->leases);
    ck_pr_inc_64(&shard->acquired);
    lease_fill(r, lease, mm, shard, CHRING_OUTCOME_OWNER);
    return 0;
}

void chring_release(chring_t *r, chring_lease_t *lease)
{
    if (r == NULL || lease == NULL || lease->member == NULL)
        return;
    chring_member_t *m = lease->member;
    uint64_t shard = lease->reserved_ >> 56;
    if ((lease->reserved_ & LEASE_COOKIE_MASK) != lease_cookie(r, m) || shard > r->shard_mask)
        return; /* not a lease this library filled in for this ring */
    lease_clear(lease);
    /* The shard after the member: a member without load (a copy of a lease already released)
     * refuses the release, and then no counter moves.  The member's release is a full barrier:
     * the caller's use of the member happens before the count drops. */
    if (chring__member_release(m))
        ck_pr_dec_64(&r->shards[shard].leases);
}

uint64_t chring_member_capacity(chring_t *r, const chring_snap_t *s, const chring_member_t *m)
{
    uint32_t w = chring_snap_weight(s, m);
    if (r == NULL || w == 0)
        return 0;
    bool usable;
    uint64_t extra;
    rcu_read_lock();
    uint64_t cap = member_capacity(r, s, (chring_member_t *)m, w, &usable, &extra);
    CHRING_GRACE_READER_DONE();
    rcu_read_unlock();
    return cap;
}

void chring_member_stats(const chring_member_t *m, chring_member_stats_t *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof *out);
    if (m == NULL)
        return;
    out->load = chring__member_load(m);
    out->primary = CHRING_LOAD_64(&m->primary);
    out->spilled_in = CHRING_LOAD_64(&m->spilled_in);
    out->down_in = CHRING_LOAD_64(&m->down_in);
    out->acquires = out->primary + out->spilled_in + out->down_in;
    rcu_read_lock(); /* a flap's prev is read inside a read section (ghost.c) */
    out->inherited = chring__member_inherited(m);
    CHRING_GRACE_READER_DONE();
    rcu_read_unlock();
    out->counted = out->load + out->inherited;
    uint64_t now = chring__now_ns();
    uint64_t until = CHRING_LOAD_64(&m->rep_until_ns);
    if (until > now) {
        ck_pr_fence_load(); /* pairs with chring_report_load's store fence */
        out->report_live = 1;
        /* A live report was recorded in the cold block, which is set before its expiry. */
        const struct chring_member_cold *c = CHRING_LOAD_PTR(&m->cold);
        if (c != NULL) {
            out->reported = CHRING_LOAD_64(&c->rep_value);
            out->local_at_report = CHRING_LOAD_64(&c->rep_local);
            uint64_t at = CHRING_LOAD_64(&c->rep_at_ns);
            out->report_age_ms = now > at ? (now - at) / UINT64_C(1000000) : 0;
        }
        out->counted += CHRING_LOAD_64(&m->rep_extra);
    }
}

void chring_stats(chring_t *r, chring_stats_t *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof *out);
    if (r == NULL)
        return;
    const chring_snap_t *s = chring_snap_enter(r);
    out->version = s->version;
    out->members = s->nmembers;
    out->points = s->npoints;
    uint64_t rseq = CHRING_LOAD_64(&s->health->report_seq);
    uint64_t extra = rseq != 0 ? chring__report_sum(s, rseq, chring__now_ns()) : 0;
    chring_snap_exit(r, s);
    out->reports = CHRING_LOAD_64(&r->reports);
    out->publishes = CHRING_LOAD_64(&r->publishes);
    out->down = CHRING_LOAD_64(&r->health.ndown);
    for (unsigned k = 0; k <= r->shard_mask; k++) {
        out->acquires += CHRING_LOAD_64(&r->shards[k].acquired);
        out->spills += CHRING_LOAD_64(&r->shards[k].spills);
        out->saturated += CHRING_LOAD_64(&r->shards[k].saturated);
        out->retries += CHRING_LOAD_64(&r->shards[k].retries);
        out->owner_down += CHRING_LOAD_64(&r->shards[k].owner_down);
    }
    out->leases = chring__leases(r);
    out->counted = out->leases + extra;
}
