/* Flaps: a name removed and added again while its leases are out keeps one load count for its
 * backend (docs/design.md §3, "Flaps").
 * SPDX-License-Identifier: MIT
 *
 * A removed member's object lives on while leases name it (member.h), and a name added again is
 * a new object at load 0: without more, the backend would carry the old object's leases and up
 * to a full capacity of new ones.  So a member that leaves with leases out (its own, or its prev
 * chain's: a second flap keeps the first one's leases counted) is listed as a ghost
 * (the ring's list, newest first, under a lock of its own: the writers' lock is never taken by a
 * release), and a member created later under the same name points at the newest such ghost (its
 * prev).  Every acquire judges a member by its leases plus those of its prev chain (member.h,
 * chring__member_inherited), so the old leases count on the new member until they are released.
 *
 * Lifetime.  The list holds no reference: a ghost is destroyed as any member, by whoever
 * releases its last lease, and destroying it unlists it and unlinks it from its successor under
 * the lock (the successor then points past it; member.c, unghost, with the rest of a member's
 * destruction).  Readers follow prev pointers without the lock,
 * inside read sections, so a member that was ever a prev is freed a grace period after it is
 * destroyed (call_rcu), not at once; its retire still runs at once.  A member that is itself a
 * successor is unlinked from its prev when it goes, so no ghost ever points at freed memory. */
#include "member.h"

#include <stdlib.h>

void chring__ghost_leave(chring_t *r, chring_member_t *m)
{
    rcu_read_lock(); /* its prev chain (member.h) */
    uint64_t out = chring__member_load(m) + chring__member_inherited(m);
    CHRING_GRACE_READER_DONE();
    rcu_read_unlock();
    if (out == 0)
        return; /* nothing out, its own or its prev chain's: nothing to count */
    /* Out of memory for its cold block: not listed, so a name added again starts at its own
     * load (the flap is not counted; nothing else changes). */
    struct chring_member_cold *c = chring__member_cold(m);
    if (c == NULL)
        return;
    pthread_mutex_lock(&r->ghosts.lock);
    /* The current snapshot lists m, so m is alive; the lock orders this with its destruction. */
    c->ghosts = &r->ghosts;
    c->ghost_next = r->ghosts.head;
    CHRING_STORE_PTR(&r->ghosts.head, m); /* read without the lock by ghosts_link */
    CHRING_STORE_32(&c->ghosted, 1);
    pthread_mutex_unlock(&r->ghosts.lock);
}

void chring__ghosts_link(chring_t *r, chring_member_t *const *created, size_t n)
{
    if (n == 0 || CHRING_LOAD_PTR(&r->ghosts.head) == NULL)
        return;
    pthread_mutex_lock(&r->ghosts.lock);
    for (size_t k = 0; k < n; k++) {
        chring_member_t *m = created[k];
        for (chring_member_t *g = r->ghosts.head; g != NULL; g = g->cold->ghost_next) {
            if (g->cold->succ != NULL || g->name_len != m->name_len ||
                memcmp(g->name, m->name, m->name_len) != 0)
                continue;
            /* g is listed, so alive or waiting for this lock to be unlisted.  Out of memory for
             * m's cold block: not linked (the flap is not counted). */
            struct chring_member_cold *c = chring__member_cold(m);
            if (c == NULL)
                break;
            c->ghosts = &r->ghosts;
            g->cold->succ = m;
            g->cold->linked = 1;
            CHRING_STORE_32(&r->ghosts.linked_ever, 1);
            ck_pr_fence_store(); /* g's words before readers can reach it */
            CHRING_STORE_PTR(&m->prev, g);
            break;
        }
    }
    pthread_mutex_unlock(&r->ghosts.lock);
}
