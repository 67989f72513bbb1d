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

/* ---- member chunks ------------------------------------------------------------------------ */

/* Members are small (114 bytes and the name) and each wants a cache line of its own for its hot
 * word: an allocation each, aligned by over-allocating, costs 71 bytes of slack a member on
 * top (200 bytes for a 12-byte name).  So members whose name fits live in slots of 128 bytes,
 * 64 to a chunk (one allocation of 8 KB and a header; 16 while the ring has fewer than 64): 128
 * bytes a member, 8 a point at 16 points (docs/design.md §4, "What a member costs").  A chunk is freed when its last member is,
 * so a ring that shrinks gives the memory back.  Every operation is under the ring's ghost
 * lock, which a last release and the reclaimer's thread take already, and which the fork handlers
 * hold across fork() (fork.c).  Under AddressSanitizer a free slot is poisoned, so a use after
 * free is still reported. */

/* A chunk and its slots are aligned to CHRING_DESTRUCTIVE (128 bytes): so is every slot, and the
 * line that Intel's adjacent-line prefetcher pairs with a member's hot line is the member's own
 * second line, never a line of the member before it. */
#define CHUNK_HEAD CHRING_DESTRUCTIVE
_Static_assert(sizeof(struct chring_member_chunk) <= CHUNK_HEAD, "a chunk's header fits");
_Static_assert(CHRING_MEMBER_SLOT % CHRING_DESTRUCTIVE == 0, "slots keep the alignment");

static struct chring_member_chunk *chunk_new(struct chring_member_pool *p)
{
    uint32_t id = 0;
    while (id < p->nchunks && p->chunks[id] != NULL)
        id++;
    if (id == p->cap) {
        uint32_t cap = p->cap ? p->cap * 2 : 16;
        struct chring_member_chunk **t = chring__calloc(cap, sizeof *t);
        if (t == NULL)
            return NULL;
        if (p->nchunks > 0)
            memcpy(t, p->chunks, p->nchunks * sizeof *t);
        chring__free(p->chunks);
        p->chunks = t;
        p->cap = cap;
    }
    uint16_t slots = p->live < CHRING_CHUNK_SLOTS ? CHRING_CHUNK_FIRST : CHRING_CHUNK_SLOTS;
    struct chring_member_chunk *c =
        chring__alloc_aligned(CHUNK_HEAD + (size_t)slots * CHRING_MEMBER_SLOT);
    if (c == NULL)
        return NULL;
    memset(c, 0, sizeof *c);
    c->id = id;
    c->slots = slots;
    p->chunks[id] = c;
    if (id == p->nchunks)
        p->nchunks++;
    CHRING_POISON_BLOCK((char *)c + CHUNK_HEAD, (size_t)slots * CHRING_MEMBER_SLOT);
    return c;
}

static void chunk_list(struct chring_member_pool *p, struct chring_member_chunk *c)
{
    c->prev = NULL;
    c->next = p->partial;
    if (p->partial != NULL)
        p->partial->prev = c;
    p->partial = c;
    c->listed = 1;
}

static void chunk_unlist(struct chring_member_pool *p, struct chring_member_chunk *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        p->partial = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->listed = 0;
}

/* A slot for a member, NULL when out of memory.  Writer side (under the ring lock). */
static chring_member_t *slot_take(chring_t *r)
{
    struct chring_member_pool *p = &r->pool;
    pthread_mutex_lock(&r->ghosts.lock);
    struct chring_member_chunk *c = p->partial;
    if (c == NULL) {
        c = chunk_new(p);
        if (c == NULL) {
            pthread_mutex_unlock(&r->ghosts.lock);
            return NULL;
        }
        chunk_list(p, c);
    }
    char *slot;
    if (c->free != NULL) {
        slot = c->free;
        CHRING_UNPOISON_BLOCK(slot, CHRING_MEMBER_SLOT);
        memcpy(&c->free, slot, sizeof c->free);
    } else {
        slot = (char *)c + CHUNK_HEAD + (size_t)c->fresh++ * CHRING_MEMBER_SLOT;
        CHRING_UNPOISON_BLOCK(slot, CHRING_MEMBER_SLOT);
    }
    if (++c->used == c->slots)
        chunk_unlist(p, c);
    p->live++;
    pthread_mutex_unlock(&r->ghosts.lock);
    chring_member_t *m = (chring_member_t *)(void *)slot;
    m->chunk = c->id + 1;
    return m;
}

/* Gives m's slot back; its chunk goes when it was the last.  Any thread. */
static void slot_give(chring_t *r, chring_member_t *m)
{
    struct chring_member_pool *p = &r->pool;
    pthread_mutex_lock(&r->ghosts.lock);
    struct chring_member_chunk *c = p->chunks[m->chunk - 1];
    memcpy(m, &c->free, sizeof c->free);
    c->free = m;
    CHRING_POISON_BLOCK(m, CHRING_MEMBER_SLOT);
    p->live--;
    if (--c->used == 0) {
        if (c->listed)
            chunk_unlist(p, c);
        p->chunks[c->id] = NULL;
        CHRING_UNPOISON_BLOCK((char *)c + CHUNK_HEAD, (size_t)c->slots * CHRING_MEMBER_SLOT);
        chring__free_aligned(c);
    } else if (!c->listed) {
        chunk_list(p, c);
    }
    pthread_mutex_unlock(&r->ghosts.lock);
}

void chring__member_pool_drop(chring_t *r)
{
    struct chring_member_pool *p = &r->pool;
    if (p->live != 0)
        return; /* members stale snapshots keep (a fork() child's): their chunks stay */
    chring__free(p->chunks);
    memset(p, 0, sizeof *p);
}

/* ---- members ------------------------------------------------------------------------------ */

chring_member_t *chring__member_new(const chring_t *r, const char *name, size_t len,
                                    uint32_t weight, void *udata)
{
    size_t head = offsetof(chring_member_t, name);
    chring_member_t *m = head + len + 1 <= CHRING_MEMBER_SLOT
                             ? slot_take((chring_t *)r)
                             : chring__alloc_line(head + len + 1);
    if (m == NULL)
        return NULL;
    uint32_t chunk = head + len + 1 <= CHRING_MEMBER_SLOT ? m->chunk : 0;
    memset(m, 0, head);
    m->chunk = chunk;
    m->magic = CHRING_MEMBER_MAGIC;
    m->weight = weight;
    m->name_len = (uint16_t)len;
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
    if (m->chunk != 0)
        slot_give(m->ring, m);
    else
        chring__free_aligned(m);
}

/* Moves m's ramp generation to a new one (on) or to 0, and counts m in or out of its ring's
 * ramps_alive (member objects alive that ramp: effective.c) when it moves from or to 0.  A
 * compare-and-swap, because an acquire may clear a finished ramp meanwhile
 * (chring__member_ramp_scale, which counts it out itself): whoever moves the word counts. */
void chring__member_ramp_gen(chring_member_t *m, bool on)
{
    uint32_t old = CHRING_LOAD_32(&m->ramp_gen), gen;
    do
        gen = !on ? 0 : old + 1 == 0 ? 1 : old + 1;
    while (!ck_pr_cas_32_value(&m->ramp_gen, old, gen, &old));
    if (old == 0 && gen != 0)
        ck_pr_inc_64(&m->ring->ramps_alive); /* before the writer's new epoch (effective.c) */
    else if (old != 0 && gen == 0)
        ck_pr_dec_64(&m->ring->ramps_alive);
}

/* A member that was never published: nobody else saw it, and its udata stays the caller's. */
void chring__member_discard(chring_member_t *m)
{
    chring__member_ramp_gen(m, false); /* a slow start counted it in */
    m->magic = (uint32_t)CHRING_POISON;
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
    chring__member_ramp_gen(m, false);       /* nor count its scale (effective.c) */
    bool deferred = unghost(m);              /* unlisted, unlinked (flaps) */
    if (r->cfg.retire != NULL)
        r->cfg.retire(m->udata, r->cfg.retire_ctx);
    m->magic = (uint32_t)CHRING_POISON;
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
    if (m == NULL || CHRING_LOAD_32(&m->magic) != CHRING_MEMBER_MAGIC)
        return -EINVAL;
    if (m->name_len == 0 || m->name_len > CHRING_NAME_MAX || m->name[m->name_len] != '\0')
        return -EINVAL;
    if (CHRING_LOAD_32(&m->weight) == 0)
        return -EINVAL;
    return 0;
}
