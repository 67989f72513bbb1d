/* Effective weights: the bound that holds while members warm up and drain (docs/design.md §3).
 * SPDX-License-Identifier: MIT
 *
 * A member's admission scale s_j (health.c) scales its weight in the capacities' total as well
 * as its own: with e_j = s_j * w_j over the members that are up and E the sum of the e_j, member
 * j's capacity is ceil(c * (m + 1) * e_j / E) (hash.c, with the other capacity formulas).  The
 * capacities then add up to at least c * (m + 1) > m whatever the scales, so an acquire saturates
 * only through races.
 *
 * Cost.  E changes with time while a ramp runs, and summing it is O(members): so it is summed at
 * most once a millisecond per snapshot and cached in the snapshot (its one mutable part, three
 * words written by whichever acquire finds the sum stale).  Whether any ramp runs at all is one
 * word beside the published pointer, health.ramp_epoch, which every acquire reads anyway with the
 * count of members down: 0 means no member object alive ramps, and an acquire on any snapshot
 * then judges by the integer weights exactly as without ramps, with no clock read.  Writers set
 * it to a new sequence number whenever a ramp is set or a ramping member joins (and, while it is
 * not 0, whenever health changes, so that a cached sum is not used across the change): health.c's
 * chring__ramps_changed and chring__ramps_touch, beside the ramps they follow.
 *
 * Clearing it.  "Alive", not "listed by the current snapshot": a held snapshot (chring_snap_hold,
 * or a read section that began before a publish) may list a member removed while it ramped, and
 * an acquire on it must count that member's scale as long as the snapshot lives.  So the ring
 * counts the member objects alive whose ramp_gen is not 0 (chring.ramps_alive, kept wherever a
 * generation moves from or to 0: member.c's chring__member_ramp_gen for chring_set_ramp, slow
 * start and a member's destroy, health.c for the acquire that clears a finished ramp), and a
 * sum over any snapshot of the ring that finds no member of its own ramping clears the epoch only
 * while that count is 0, with a compare-and-swap from the epoch it read: a writer that set a ramp
 * meanwhile counted it and stored a newer epoch (after the ramp's generation and the count), so
 * the count reads non-zero, or the swap fails, or the writer's store comes after it; either way
 * the word ends non-zero.  A ring that never ramped never sums; one whose ramps are over goes on
 * summing (at most once a millisecond per snapshot acquired on) until its last ramping member
 * object is gone, then once more, which clears the word.  A reader may see a sum summed by
 * another thread while it checks the stamp: any sum it can see is at most a millisecond old,
 * which is the promise. */
#include "member.h"

#include <time.h>

double chring__effective_weight(chring_t *r, const chring_snap_t *s, uint64_t epoch)
{
    chring_snap_t *cache = (chring_snap_t *)s; /* the mutable words only */
    uint64_t now = chring__now_ns();
    uint64_t stamp = CHRING_LOAD_64(&cache->eff_stamp_ns);
    ck_pr_fence_load(); /* the epoch and sum stored before that stamp */
    if (stamp != 0 && now - stamp < CHRING_EFF_MAX_AGE_NS && now >= stamp &&
        CHRING_LOAD_64(&cache->eff_epoch) == epoch)
        return chring__bits_double(CHRING_LOAD_64(&cache->eff_bits));

    double sum = 0.0;
    bool ramping = false;
    for (size_t j = 0; j < s->nmembers; j++) {
        chring_member_t *m = s->members[j];
        /* A member down keeps its ramp (its generation is not cleared on reaching 1 either): it
         * counts as ramping, or the epoch would be cleared and its scale forgotten when it comes
         * up again (chring_set_down renews only a non-zero epoch; the integer weights would
         * judge it). */
        ramping |= CHRING_LOAD_32(&m->ramp_gen) != 0;
        if (chring__member_down(m))
            continue;
        double w = (double)s->weights[j];
        if (CHRING_LOAD_32(&m->ramp_gen) != 0) {
            double scale = chring__member_ramp_scale(m);
            sum += scale * w;
        } else {
            sum += w;
        }
    }
    if (s != &chring__empty_snap) {
        CHRING_STORE_64(&cache->eff_bits, chring__double_bits(sum));
        CHRING_STORE_64(&cache->eff_epoch, epoch);
        ck_pr_fence_store(); /* pairs with the load fence above */
        CHRING_STORE_64(&cache->eff_stamp_ns, now == 0 ? 1 : now);
    }
    if (!ramping && epoch != 0 && s->health == &r->health) {
        ck_pr_fence_load(); /* the epoch (read by the caller) before the count */
        if (CHRING_LOAD_64(&r->ramps_alive) == 0) /* no held snapshot lists a ramping member */
            ck_pr_cas_64(&r->health.ramp_epoch, epoch, 0); /* fails if a writer set a ramp since */
    }
    return sum;
}
