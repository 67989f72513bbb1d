/* Members: names, creation, retirement (which unlists a flap's ghost: ghost.c), accessors.  The
 * hot word and its rules: member.h.
 * SPDX-License-Identifier: MIT */
#include "member.h"

int chring__name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c != 0)
        return c;
    return (alen > blen) - (alen < blen);
}

int chring__name_check(const char *name, size_t *len)
{
    if (name == NULL)
        return -EINVAL;
    size_t n = strnlen(name, CHRING_NAME_MAX + 1);
    if (n == 0)
        return -EINVAL;
    if (n > CHRING_NAME_MAX)
        return -ENAMETOOLONG;
    *len = n;
    return 0;
}

chring_member_t *chring__member_new(const chring_t *r, const char *name, size_t len,
                                    uint32_t weight, void *udata)
{
    size_t head = offsetof(chring_member_t, name);
    chring_member_t *m = chring__alloc_line(head + len + 1);
    if (m == NULL)
        return NULL;
    memset(m, 0, head);
    m->magic = CHRING_MEMBER_MAGIC;
    m->weight = weight;
    m->name_len = (uint32_t)len;
    m->udata = udata;
    m->ring = (chring_t *)r;
    memcpy(m->name, name, len);
    m->name[len] = '\0';
    return m;
}

struct chring_member_cold *chring__member_cold(chring_member_t *m)
{
    struct chring_member_cold *c = m->cold;
    if (c != NULL)
        return c;
    c = chring__calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->self = m;
    CHRING_STORE_PTR(&m->cold, c); /* release: its words before any reader can reach them */
    return c;
}

static void member_free(chring_member_t *m)
{
    chring__free(m->cold);
    chring__free_aligned(m);
}

/* A member that was never published: nobody else saw it, and its udata stays the caller's. */
void chring__member_discard(chring_member_t *m)
{
    m->magic = CHRING_POISON;
    member_free(m);
}

/* Unlists m from the ring's ghosts and unlinks it from its prev and its successor (ghost.c says
 * why); true when m must be freed a grace period later (it was a prev, and readers may still
 * follow a pointer to it). */
static bool unghost(chring_member_t *m)
{
    struct chring_member_cold *c = m->cold;
    struct chring_ghosts *gs = c != NULL ? c->ghosts : NULL;
    if (gs == NULL)
        return false; /* never listed, never linked */
    pthread_mutex_lock(&gs->lock);
    if (c->ghosted) {
        chring_member_t **p = &gs->head;
        while (*p != NULL && *p != m)
            p = &(*p)->cold->ghost_next;
        if (*p == m)
            CHRING_STORE_PTR(p, c->ghost_next); /* the head is read without the lock */
        c->ghosted = 0;
    }
    chring_member_t *prev = m->prev, *succ = c->succ;
    if (succ != NULL)
        CHRING_STORE_PTR(&succ->prev, prev); /* the successor counts past m */
    if (prev != NULL)
        prev->cold->succ = succ; /* a prev was listed: it has its cold block */
    bool deferred = c->linked != 0;
    pthread_mutex_unlock(&gs->lock);
    return deferred;
}

static void member_free_rcu(struct rcu_head *head)
{
    CHRING_GRACE_ENDED();
    member_free(caa_container_of(head, struct chring_member_cold, rcu)->self);
    CHRING_CALLBACK_DONE();
}

/* Called by whoever brought the word to zero (member.h). */
void chring__member_destroy(chring_member_t *m)
{
    chring_t *r = m->ring;
    if (CHRING_LOAD_32(&m->down))
        ck_pr_dec_64(&r->health.alive_down); /* no snapshot can list it any more */
    bool deferred = unghost(m);              /* unlisted, unlinked (flaps) */
    if (r->cfg.retire != NULL)
        r->cfg.retire(m->udata, r->cfg.retire_ctx);
    m->magic = CHRING_POISON;
    if (deferred) {
        struct rcu_head *head = &m->cold->rcu; /* read before the callback may run */
        CHRING_CALLBACK_QUEUED();
        call_rcu(head, member_free_rcu);
    } /* readers may still follow a prev pointer to it */
    else
        member_free(m);
}

/* ---- accessors ---------------------------------------------------------------------------- */

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
    return m == NULL ? 0 : chring__member_load(m);
}

int chring_member_check(const chring_member_t *m)
{
    if (m == NULL || CHRING_LOAD_64(&m->magic) != CHRING_MEMBER_MAGIC)
        return -EINVAL;
    if (m->name_len == 0 || m->name_len > CHRING_NAME_MAX || m->name[m->name_len] != '\0')
        return -EINVAL;
    if (CHRING_LOAD_32(&m->weight) == 0)
        return -EINVAL;
    return 0;
}
