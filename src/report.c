/* Reported load: what a member measures of itself, counted by the bound (docs/design.md §3,
 * "Reported load").
 * SPDX-License-Identifier: MIT
 *
 * The rule.  chring_report_load(r, m, load) records the load with m's leases at the call
 * (local_at_report).  Until config.report_ttl_ms have passed, the bound counts for m
 *     max(local, load + local - local_at_report) = local + max(0, load - local_at_report)
 * so a report adds a constant, its excess, to the member's leases for as long as it counts: the
 * requests the member saw that were not this instance's.  The member keeps the excess and its
 * expiry on its first cache line (which every acquire reads anyway) and the m of the capacities
 * becomes the leases plus the sum of the excesses of the snapshot's members whose reports count.
 *
 * Cost.  Summing the excesses is O(members), so each snapshot caches the sum with the earliest
 * expiry among the reports it summed and the ring's report sequence it summed under; a report (or
 * a member down, which drops its report) stores a new sequence, so the next acquire sums again,
 * and so does the first acquire after a summed report expires: an acquire never counts an expired
 * report nor misses a recorded one.  Whether any report counts at all is one word beside the
 * published pointer (health.report_seq), read with the count of members down: 0 means none does,
 * and an acquire then judges by the leases alone with no clock read, as before reports existed.
 * A sum over the current snapshot that finds no report counting any more clears it with a
 * compare-and-swap from the sequence it read (a report recorded meanwhile stored a newer one, so
 * the swap fails or that store comes after it; either way the word ends non-zero), as
 * effective.c does for ramps.
 *
 * The cache's three words are written by whichever acquire sums, under a version word it makes
 * odd with a compare-and-swap first (an acquire that loses the race keeps its sum to itself), so
 * a reader never pairs one acquire's sum with another's expiry. */
#include "member.h"

uint64_t chring__report_sum(const chring_snap_t *s, uint64_t seq, uint64_t now)
{
    chring_snap_t *cache = (chring_snap_t *)s; /* the mutable words only */
    uint64_t ver = CHRING_LOAD_64(&cache->rep_ver);
    if ((ver & 1) == 0) {
        ck_pr_fence_load();
        uint64_t cseq = CHRING_LOAD_64(&cache->rep_seq);
        uint64_t until = CHRING_LOAD_64(&cache->rep_until_ns);
        uint64_t sum = CHRING_LOAD_64(&cache->rep_sum);
        ck_pr_fence_load();
        if (CHRING_LOAD_64(&cache->rep_ver) == ver && cseq == seq && now < until)
            return sum;
    }

    uint64_t sum = 0, until = UINT64_MAX;
    bool counting = false;
    for (size_t j = 0; j < s->nmembers; j++) {
        const chring_member_t *m = s->members[j];
        uint64_t u = CHRING_LOAD_64(&m->rep_until_ns);
        if (u <= now || chring__member_down(m))
            continue;
        counting = true;
        sum += CHRING_LOAD_64(&m->rep_extra);
        if (u < until)
            until = u;
    }
    if (s != &chring__empty_snap && ver % 2 == 0 && ck_pr_cas_64(&cache->rep_ver, ver, ver + 1)) {
        CHRING_STORE_64(&cache->rep_seq, seq);
        CHRING_STORE_64(&cache->rep_until_ns, until);
        CHRING_STORE_64(&cache->rep_sum, sum);
        ck_pr_fence_store();
        CHRING_STORE_64(&cache->rep_ver, ver + 2);
    }
    struct chring_health *h = (struct chring_health *)s->health;
    if (!counting && h->current != NULL && CHRING_RCU_DEREF(*h->current) == s)
        ck_pr_cas_64(&h->report_seq, seq, 0); /* fails if a report was recorded since */
    return sum;
}

/* A new sequence: every cached sum is stale.  Under the ring lock. */
static void report_changed(chring_t *r)
{
    ck_pr_fence_store(); /* the member's words before the sequence */
    CHRING_STORE_64(&r->health.report_seq, ++r->report_ctr);
}

void chring__report_drop(chring_t *r, chring_member_t *m)
{
    if (CHRING_LOAD_64(&m->rep_until_ns) == 0)
        return;
    CHRING_STORE_64(&m->rep_until_ns, 0);
    if (CHRING_LOAD_64(&r->health.report_seq) != 0)
        report_changed(r);
}

void chring__report_left(chring_t *r, chring_member_t *m)
{
    if (CHRING_LOAD_64(&r->health.report_seq) != 0)
        chring__report_drop(r, m);
}

int chring_report_load(chring_t *r, const chring_member_t *m, uint64_t load)
{
    if (r == NULL || m == NULL)
        return -EINVAL;
    if (r->report_ttl_ns == 0)
        return 0;
    chring_member_t *mm = (chring_member_t *)m;
    pthread_mutex_lock(&r->lock);
    int err = 0;
    struct chring_member_cold *c = NULL;
    if (chring__snap_rank(r->current, m) < 0) {
        err = -ENOENT; /* gone: its report describes nothing this ring places on */
    } else if (!chring__member_down(mm) && (c = chring__member_cold(mm)) == NULL) {
        err = -ENOMEM; /* the statistics' words: nothing recorded */
    } else if (!chring__member_down(mm)) {
        uint64_t now = chring__now_ns();
        rcu_read_lock(); /* a flap's prev (ghost.c): its leases are this backend's too */
        uint64_t local = chring__member_load(mm) + chring__member_inherited(mm);
        CHRING_GRACE_READER_DONE();
        rcu_read_unlock();
        uint64_t extra = load > local ? load - local : 0;
        if (extra > CHRING_LOAD_MASK)
            extra = CHRING_LOAD_MASK; /* an excess counts like leases: below 2^32 */
        /* Invalidate, then the excess, then the expiry: a reader that sees the new expiry sees
         * the new excess; one that sees the old expiry with the new excess counts the new one. */
        CHRING_STORE_64(&mm->rep_until_ns, 0);
        ck_pr_fence_store();
        CHRING_STORE_64(&mm->rep_extra, extra);
        CHRING_STORE_64(&c->rep_value, load);
        CHRING_STORE_64(&c->rep_local, local);
        CHRING_STORE_64(&c->rep_at_ns, now);
        ck_pr_fence_store();
        uint64_t until = now + r->report_ttl_ns;
        CHRING_STORE_64(&mm->rep_until_ns, until < now ? UINT64_MAX : until);
        CHRING_STORE_64(&r->reports, r->reports + 1);
        report_changed(r);
    }
    pthread_mutex_unlock(&r->lock);
    return err;
}
