/* A member's hot word: the one rule whose violation is a use-after-free, and the only code that
 * changes the word.
 * SPDX-License-Identifier: MIT
 *
 * The word (64 bits, the first field of struct chring_member, on its own cache line):
 *
 *     word = leases + (snapshot references << 32)
 *
 * The low half counts the leases on the member (its load, docs/design.md §3); the high half is 1
 * (CHRING_SNAP_REF) while some snapshot that lists it may still be read: taken when it joins,
 * dropped by the membership chain (snap_block.c) once every snapshot published while it was
 * listed is destroyed.  Whoever brings the word to zero retires the
 * member (config.retire(udata)) and frees it, so retire runs exactly once, on whichever thread
 * that is, and never while a reader, a lease or a held snapshot can still reach the member
 * (docs/design.md §4).
 *
 *   transition              who                                   why it is safe
 *   ----------------------  ------------------------------------  ------------------------------
 *   created, word = 0       the writer, under the ring lock       nobody else can see it; a
 *                                                                  failed change discards it
 *                                                                  (chring__member_discard: no
 *                                                                  retire, never published)
 *   + CHRING_SNAP_REF       the writer, publishing the first      the member is new: nobody else
 *     (member_ref_snap)     snapshot that lists it (chain_link)   can see it yet
 *   - CHRING_SNAP_REF       whoever frees the chain node of the   every snapshot that listed it
 *     (member_unref_snap)   last snapshot that lists it: the      is destroyed, so every reader
 *                           thread that destroys the last of      of them is gone; may reach
 *                           those snapshots (call_rcu's thread,   zero: then this thread retires
 *                           chring_snap_put), or chring_free      it
 *   + 1 (member_admit,      a reader, inside a read section on a  that snapshot's reference keeps
 *     member_force)         snapshot that lists the member, or    the high half >= 1
 *                           with a held snapshot that does
 *   - 1 (member_undo)       the same reader, still in its read    the high half is still >= 1:
 *                           section, when the load it added to    the undo can never reach zero
 *                           was already at capacity
 *   - 1 (member_release)    the lease's holder, any thread; a     may reach zero (member removed,
 *                           compare-and-swap that refuses a       no snapshot lists it): then
 *                           member whose low half is 0            this thread retires it
 *
 * Why the undo can never reach zero: the reader's snapshot lists the member, and the snapshot's
 * published reference is dropped only by an RCU callback after a grace period, which cannot end
 * while the reader is inside its read section (a held snapshot keeps its reference until the
 * holder's chring_snap_put, after the acquire returns); the snapshot holds its chain node, which
 * holds the nodes after it, up to the one that drops the member.  So while the reader adds and
 * takes back its 1, the high half is 1 and the word at least CHRING_SNAP_REF.
 *
 * Worked example: add "a" (snapshot S1 lists it: word = 1 << 32); acquire on "a" (word =
 * (1 << 32) + 1); remove "a" (S2 does not list it: S2's chain node names "a" as gone; after a
 * grace period S1 is destroyed, S1's node is freed and drops "a": word = 1); release the lease
 * (word = 0): the releasing thread calls retire and frees "a".  Re-adding
 * "a" in between creates a new object with a word of its own, which the old lease never touches.
 *
 * Every read-modify-write here is a full barrier (lock xadd, lock cmpxchg): the uses of the
 * member that precede a decrement happen before the thread that sees zero frees it. */
#ifndef CHRING_MEMBER_H
#define CHRING_MEMBER_H

#include "internal.h"

#define CHRING_LOAD_MASK UINT64_C(0xffffffff)
#define CHRING_SNAP_REF (UINT64_C(1) << 32)

/* Whether the member is down (health.c).  On the member's first cache line, which an acquire
 * reads anyway. */
static inline bool chring__member_down(const chring_member_t *m)
{
    return CHRING_LOAD_32(&m->down) != 0;
}

/* The leases of m's prev chain (ghost.c): those of the members of its name removed while their
 * leases were out, which the bound counts on m.  0 with no flap (one load of m's first line).
 * Inside a read section: a prev is freed only a grace period after it is unlinked.  The chain is
 * followed at most 8 deep. */
static inline uint64_t chring__member_inherited(const chring_member_t *m)
{
    const chring_member_t *p = CHRING_LOAD_PTR(&m->prev);
    uint64_t n = 0;
    for (int hops = 0; CHRING_UNLIKELY(p != NULL) && hops < 8; hops++) {
        n += CHRING_LOAD_64(&p->word) & UINT64_C(0xffffffff);
        p = CHRING_LOAD_PTR(&p->prev);
    }
    return n;
}

/* The member's load: one atomic load. */
static inline uint64_t chring__member_load(const chring_member_t *m)
{
    return CHRING_LOAD_64(&m->word) & CHRING_LOAD_MASK;
}

static inline void chring__member_ref_snap(chring_member_t *m)
{
    ck_pr_faa_64(&m->word, CHRING_SNAP_REF);
}

static inline void chring__member_unref_snap(chring_member_t *m)
{
    if (ck_pr_faa_64(&m->word, (uint64_t)0 - CHRING_SNAP_REF) == CHRING_SNAP_REF)
        chring__member_destroy(m);
}

/* Adds one lease and returns the load before it: the caller keeps it only if that load was below
 * the capacity it computed, else it calls chring__member_undo. */
static inline uint64_t chring__member_admit(chring_member_t *m)
{
    return CHRING_LOAD_MASK & ck_pr_faa_64(&m->word, 1);
}

static inline void chring__member_undo(chring_member_t *m)
{
    ck_pr_faa_64(&m->word, (uint64_t)-1);
}

/* Adds one lease without a capacity check (saturation, a member the caller chose). */
static inline void chring__member_force(chring_member_t *m)
{
    ck_pr_faa_64(&m->word, 1);
}

/* Takes one lease back, unless the member has none: a copy of a lease released after the lease
 * itself would wrap the low half to 2^32 - 1 (full forever, never retired) and borrow from the
 * snapshot references.  A compare-and-swap refuses that case and returns false; nothing changes
 * then.  Returns true when a lease was taken back; the thread that brings the word to zero
 * retires the member. */
static inline bool chring__member_release(chring_member_t *m)
{
    uint64_t old = CHRING_LOAD_64(&m->word);
    for (;;) {
        if ((old & CHRING_LOAD_MASK) == 0)
            return false;
        if (ck_pr_cas_64_value(&m->word, old, old - 1, &old))
            break;
    }
    if (old == 1)
        chring__member_destroy(m); /* removed, unlisted, and this was the last lease */
    return true;
}

#endif
