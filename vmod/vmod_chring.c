/* vmod_chring: chring's consistent hashing with bounded loads as a Varnish 7.1 director
 * (docs/varnish.md).
 *
 * SPDX-License-Identifier: MIT
 *
 * Pieces, and who may touch them:
 *
 *   ring entry  one chring ring per director name and parameters, in a process-wide registry,
 *               so that a director of the same name in a newer VCL carries the ring over
 *               (counters, leases, ramps).  The registry mutex guards the list and the
 *               reference counts; the ring serialises its own writers.
 *   director    one per VCL object: its backends (member name -> VCL_BACKEND), built in
 *               vcl_init and read-only afterwards, and its generation (load order).  The
 *               ring's membership follows the newest director that has placed a key: its first
 *               placement syncs the ring to its backends (claim()).  An older VCL still serving
 *               requests skips members it has no backend for.
 *   task state  per director and task (VRT_priv_task with the director as id): the key, the
 *               lease and the backend it chose.  Its fini releases the lease, so a lease ends
 *               with its task: also on errors, aborted fetches and vcl.discard.
 *               A retried fetch (`return (retry)`) keeps its task, so the state also
 *               lists the members the fetch's earlier attempts used.
 *
 * Health: at each placement the owning director reads its backends' probes (VRT_Healthy) and
 * mirrors a change into chring_set_down, with a ramp (slow_start) for a backend that comes back.
 */
#define _GNU_SOURCE /* strdup */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "vcl.h"
#include "vrt_obj.h"

#include "vcc_if.h"

#include "chring.h"

/* The most members a fetch's retries remember. */
#define TRIED_MAX 8

/* ---- the registry ------------------------------------------------------------------------- */

struct ring_entry {
    struct ring_entry *next;
    char *name;
    chring_profile_t profile;
    uint32_t vnodes;
    double balance;
    uint32_t slow_start_ms;
    chring_t *ring;
    unsigned refs;      /* directors holding it; under registry_mtx */
    uint64_t owner_gen; /* generation of the director whose membership the ring holds; atomic */
    pthread_mutex_t claim_mtx;
};

static pthread_mutex_t registry_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct ring_entry *registry;
static uint64_t next_gen = 1; /* under registry_mtx */

/* ---- the director ------------------------------------------------------------------------- */

struct backend_ref {
    char *name; /* the member name: ident or the backend's VCL name */
    VCL_BACKEND be;
    uint32_t weight;
    int health; /* last state mirrored into the ring: 1 up, 0 down, -1 not yet; written under
                   the entry's claim_mtx, read without it */
};

struct vmod_chring_director {
    unsigned magic;
#define CHRING_DIRECTOR_MAGIC 0x6368726e
    char *vcl_name;
    struct ring_entry *entry;
    uint64_t gen;
    VCL_BACKEND dir;
    size_t n, cap;
    struct backend_ref *backends;
};

struct task_state {
    unsigned magic;
#define CHRING_TASK_MAGIC 0x63687274
    struct vmod_chring_director *d;
    const char *key;
    size_t key_len;
    int held;
    chring_lease_t lease;
    VCL_BACKEND be;
    VCL_INT attempt; /* backend tasks: bereq.retries when the lease was taken */
    unsigned ntried; /* members the fetch's earlier attempts used */
    const chring_member_t *tried[TRIED_MAX];
};

static struct ring_entry *entry_get(VRT_CTX, const char *name, chring_profile_t profile,
                                    uint32_t vnodes, double balance, uint32_t slow_ms)
{
    struct ring_entry *e;
    pthread_mutex_lock(&registry_mtx);
    for (e = registry; e != NULL; e = e->next) {
        if (strcmp(e->name, name) == 0 && e->profile == profile && e->vnodes == vnodes &&
            e->balance == balance && e->slow_start_ms == slow_ms) {
            e->refs++;
            pthread_mutex_unlock(&registry_mtx);
            return e;
        }
    }
    e = calloc(1, sizeof *e);
    if (e == NULL || (e->name = strdup(name)) == NULL) {
        free(e);
        pthread_mutex_unlock(&registry_mtx);
        VRT_fail(ctx, "chring: %s: out of memory", name);
        return NULL;
    }
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    cfg.vnodes = vnodes;
    cfg.balance = balance;
    cfg.slow_start_ms = slow_ms;
    int rc = chring_new(&e->ring, &cfg);
    if (rc < 0) {
        free(e->name);
        free(e);
        pthread_mutex_unlock(&registry_mtx);
        VRT_fail(ctx, "chring: %s: %s", name, chring_strerror(rc));
        return NULL;
    }
    e->profile = profile;
    e->vnodes = vnodes;
    e->balance = balance;
    e->slow_start_ms = slow_ms;
    e->refs = 1;
    pthread_mutex_init(&e->claim_mtx, NULL);
    e->next = registry;
    registry = e;
    pthread_mutex_unlock(&registry_mtx);
    return e;
}

/* Drops a director's reference; the last one frees the ring.  No task of a discarded VCL runs,
 * so every lease taken through it has been released already. */
static void entry_put(struct ring_entry *e)
{
    pthread_mutex_lock(&registry_mtx);
    if (--e->refs > 0) {
        pthread_mutex_unlock(&registry_mtx);
        return;
    }
    for (struct ring_entry **p = &registry; *p != NULL; p = &(*p)->next) {
        if (*p == e) {
            *p = e->next;
            break;
        }
    }
    pthread_mutex_unlock(&registry_mtx);
    chring_free(&e->ring);
    pthread_mutex_destroy(&e->claim_mtx);
    free(e->name);
    free(e);
}

static const struct backend_ref *find_backend(const struct vmod_chring_director *d,
                                              const char *name)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->backends[i].name, name) == 0)
            return &d->backends[i];
    return NULL;
}

/* Makes the ring's membership this director's backends if it is the newest director that has
 * placed a key (a newer VCL's first request after vcl.use).  One sync per VCL generation. */
static void claim(VRT_CTX, struct vmod_chring_director *d)
{
    struct ring_entry *e = d->entry;
    /* Acquire: pairs with the release store below, so the sync is seen before the owner. */
    if (__atomic_load_n(&e->owner_gen, __ATOMIC_ACQUIRE) >= d->gen)
        return;
    pthread_mutex_lock(&e->claim_mtx);
    if (e->owner_gen < d->gen) {
        chring_change_t *members = calloc(d->n ? d->n : 1, sizeof *members);
        if (members == NULL) {
            pthread_mutex_unlock(&e->claim_mtx);
            VRT_fail(ctx, "chring: %s: out of memory", d->vcl_name);
            return;
        }
        for (size_t i = 0; i < d->n; i++)
            members[i] =
                (chring_change_t){.name = d->backends[i].name, .weight = d->backends[i].weight};
        int rc = chring_sync(e->ring, members, d->n);
        free(members);
        if (rc < 0) {
            pthread_mutex_unlock(&e->claim_mtx);
            VRT_fail(ctx, "chring: %s: %s", d->vcl_name, chring_strerror(rc));
            return;
        }
        __atomic_store_n(&e->owner_gen, d->gen, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&e->claim_mtx);
}

/* Mirrors the probes of the owning director's backends into the ring: a backend Varnish finds
 * sick is down for chring (its keys walk on clockwise), and one that comes back ramps up over
 * slow_start.  A change is applied under the entry's mutex together with the state it records,
 * so the ring and b->health never disagree for long: a thread that applies an observation older
 * than another's leaves b->health saying so, and the next placement sees the difference and
 * applies the probe's state again. */
static void sync_health(VRT_CTX, struct vmod_chring_director *d)
{
    struct ring_entry *e = d->entry;
    if (__atomic_load_n(&e->owner_gen, __ATOMIC_ACQUIRE) != d->gen)
        return;
    for (size_t i = 0; i < d->n; i++) {
        struct backend_ref *b = &d->backends[i];
        int now = VRT_Healthy(ctx, b->be, NULL) ? 1 : 0;
        /* Relaxed: a stale read only costs a look under the mutex. */
        if (__atomic_load_n(&b->health, __ATOMIC_RELAXED) == now)
            continue;
        pthread_mutex_lock(&e->claim_mtx);
        int was = b->health;
        if (was != now) {
            (void)chring_set_down(e->ring, b->name, !now);
            if (now && was == 0 && e->slow_start_ms > 0)
                (void)chring_set_ramp(e->ring, b->name, 0.1, 1.0, e->slow_start_ms);
            __atomic_store_n(&b->health, now, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&e->claim_mtx);
    }
}

/* ---- task state --------------------------------------------------------------------------- */

/* PRIV_TASK fini: the task ended (delivered, failed or aborted): the lease goes back. */
static void task_fini(VRT_CTX, void *p)
{
    struct task_state *t = p;
    (void)ctx;
    if (t == NULL || t->magic != CHRING_TASK_MAGIC || !t->held)
        return;
    chring_release(t->d->entry->ring, &t->lease);
    t->held = 0;
}

static const struct vmod_priv_methods task_methods[1] = {{
    .magic = VMOD_PRIV_METHODS_MAGIC,
    .type = "chring task",
    .fini = task_fini,
}};

static struct task_state *task_get(VRT_CTX, struct vmod_chring_director *d)
{
    struct vmod_priv *p = VRT_priv_task(ctx, d);
    if (p == NULL) {
        VRT_fail(ctx, "chring: %s: no task state (workspace)", d->vcl_name);
        return NULL;
    }
    if (p->priv == NULL) {
        struct task_state *t = WS_Alloc(ctx->ws, sizeof *t);
        if (t == NULL) {
            VRT_fail(ctx, "chring: %s: out of workspace", d->vcl_name);
            return NULL;
        }
        memset(t, 0, sizeof *t);
        t->magic = CHRING_TASK_MAGIC;
        t->d = d;
        p->priv = t;
        p->methods = task_methods;
    }
    return p->priv;
}

/* Places the task's key with bounded loads, skipping `tried`, and members this director has no
 * backend for (a newer VCL's).  Returns the backend, or NULL when no member is left. */
static VCL_BACKEND place(VRT_CTX, struct vmod_chring_director *d, struct task_state *t,
                         const chring_member_t *const *skip, unsigned nskip)
{
    chring_t *ring = d->entry->ring;
    const chring_member_t *tried[TRIED_MAX];
    unsigned ntried = nskip < TRIED_MAX ? nskip : TRIED_MAX;
    if (ntried > 0)
        memcpy(tried, skip, ntried * sizeof *tried);
    claim(ctx, d);
    sync_health(ctx, d);
    for (;;) {
        int rc = ntried == 0
                     ? chring_acquire(ring, t->key, t->key_len, &t->lease)
                     : chring_acquire_skip(ring, t->key, t->key_len, tried, ntried, &t->lease);
        if (rc < 0)
            return NULL;
        const struct backend_ref *b = find_backend(d, chring_member_name(t->lease.member));
        if (b != NULL) {
            t->held = 1;
            t->be = b->be;
            return b->be;
        }
        if (ntried == TRIED_MAX) {
            chring_release(ring, &t->lease);
            return NULL;
        }
        tried[ntried++] = t->lease.member;
        chring_release(ring, &t->lease);
    }
}

/* ---- the director's methods --------------------------------------------------------------- */

/* The lease of an earlier attempt of this fetch goes back, its member listed as tried. */
static void end_attempt(struct vmod_chring_director *d, struct task_state *t)
{
    if (t->ntried < TRIED_MAX)
        t->tried[t->ntried++] = t->lease.member;
    chring_release(d->entry->ring, &t->lease);
    t->held = 0;
}

/* Resolve, on the backend side: the key `.backend()` stored in this task, placed once per
 * fetch attempt; a retried fetch (bereq.retries grew) skips the members its earlier attempts
 * used. */
static VCL_BACKEND v_matchproto_(vdi_resolve_f) chring_resolve(VRT_CTX, VCL_BACKEND dir)
{
    struct vmod_chring_director *d;
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(dir, DIRECTOR_MAGIC);
    CAST_OBJ_NOTNULL(d, dir->priv, CHRING_DIRECTOR_MAGIC);
    if (ctx->bo == NULL)
        return NULL;
    struct task_state *t = task_get(ctx, d);
    if (t == NULL || t->key == NULL)
        return NULL;
    VCL_INT attempt = VRT_r_bereq_retries(ctx);
    if (t->held && t->attempt == attempt)
        return t->be;
    if (t->held)
        end_attempt(d, t);
    t->attempt = attempt;
    return place(ctx, d, t, t->tried, t->ntried);
}

static VCL_BOOL v_matchproto_(vdi_healthy_f)
    chring_healthy(VRT_CTX, VCL_BACKEND dir, VCL_TIME *changed)
{
    struct vmod_chring_director *d;
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(dir, DIRECTOR_MAGIC);
    CAST_OBJ_NOTNULL(d, dir->priv, CHRING_DIRECTOR_MAGIC);
    if (changed != NULL)
        *changed = 0;
    for (size_t i = 0; i < d->n; i++)
        if (VRT_Healthy(ctx, d->backends[i].be, NULL))
            return 1;
    return 0;
}

static void v_matchproto_(vdi_destroy_f) chring_destroy(VCL_BACKEND dir)
{
    struct vmod_chring_director *d;
    CHECK_OBJ_NOTNULL(dir, DIRECTOR_MAGIC);
    CAST_OBJ_NOTNULL(d, dir->priv, CHRING_DIRECTOR_MAGIC);
    entry_put(d->entry);
    for (size_t i = 0; i < d->n; i++)
        free(d->backends[i].name);
    free(d->backends);
    free(d->vcl_name);
    FREE_OBJ(d);
}

static const struct vdi_methods chring_methods[1] = {{
    .magic = VDI_METHODS_MAGIC,
    .type = "chring",
    .healthy = chring_healthy,
    .resolve = chring_resolve,
    .destroy = chring_destroy,
}};

/* ---- VCL ---------------------------------------------------------------------------------- */

VCL_VOID vmod_director__init(VRT_CTX, struct vmod_chring_director **dp, const char *vcl_name,
                             VCL_STRING profile, VCL_INT vnodes, VCL_REAL balance,
                             VCL_DURATION slow_start)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    AN(dp);
    AZ(*dp);
    chring_profile_t prof;
    if (profile == NULL || chring_profile_parse(profile, &prof) < 0 ||
        prof == CHRING_PROFILE_CUSTOM) {
        VRT_fail(ctx, "chring.director(%s): unknown profile '%s'", vcl_name,
                 profile ? profile : "");
        return;
    }
    if (vnodes < 0 || vnodes > 16777216) {
        VRT_fail(ctx, "chring.director(%s): vnodes %jd out of range 0..16777216", vcl_name,
                 (intmax_t)vnodes);
        return;
    }
    if (vnodes == 0)
        vnodes = prof == CHRING_PROFILE_VARNISH ? 67 : 160;
    if (isnan(balance) || slow_start < 0 || isnan(slow_start) || slow_start > 86400.0 * 49) {
        VRT_fail(ctx, "chring.director(%s): bad balance or slow_start", vcl_name);
        return;
    }
    struct vmod_chring_director *d;
    ALLOC_OBJ(d, CHRING_DIRECTOR_MAGIC);
    if (d == NULL || (d->vcl_name = strdup(vcl_name)) == NULL) {
        free(d);
        VRT_fail(ctx, "chring.director(%s): out of memory", vcl_name);
        return;
    }
    d->entry = entry_get(ctx, vcl_name, prof, (uint32_t)vnodes, balance,
                         (uint32_t)(slow_start * 1000.0 + 0.5));
    if (d->entry == NULL) {
        free(d->vcl_name);
        FREE_OBJ(d);
        return;
    }
    pthread_mutex_lock(&registry_mtx);
    d->gen = next_gen++;
    pthread_mutex_unlock(&registry_mtx);
    d->dir = VRT_AddDirector(ctx, chring_methods, d, "%s", vcl_name);
    if (d->dir == NULL) {
        entry_put(d->entry);
        free(d->vcl_name);
        FREE_OBJ(d);
        return;
    }
    *dp = d;
}

VCL_VOID vmod_director__fini(struct vmod_chring_director **dp)
{
    struct vmod_chring_director *d;
    TAKE_OBJ_NOTNULL(d, dp, CHRING_DIRECTOR_MAGIC);
    VRT_DelDirector(&d->dir); /* calls chring_destroy */
}

VCL_VOID vmod_director_add_backend(VRT_CTX, struct vmod_chring_director *d, VCL_BACKEND be,
                                   VCL_INT weight, VCL_STRING ident)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    if (ctx->method != VCL_MET_INIT) {
        VRT_fail(ctx, "%s.add_backend(): only in vcl_init", d->vcl_name);
        return;
    }
    if (be == NULL) {
        VRT_fail(ctx, "%s.add_backend(): no backend", d->vcl_name);
        return;
    }
    if (weight < 1 || weight > 65535) {
        VRT_fail(ctx, "%s.add_backend(): weight %jd out of range 1..65535", d->vcl_name,
                 (intmax_t)weight);
        return;
    }
    const char *name = (ident != NULL && *ident != '\0') ? ident : VRT_BACKEND_string(be);
    if (name == NULL || *name == '\0' || strlen(name) > CHRING_NAME_MAX) {
        VRT_fail(ctx, "%s.add_backend(): bad member name", d->vcl_name);
        return;
    }
    if (find_backend(d, name) != NULL) {
        VRT_fail(ctx, "%s.add_backend(): member '%s' added twice", d->vcl_name, name);
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 8;
        struct backend_ref *nb = realloc(d->backends, cap * sizeof *nb);
        if (nb == NULL) {
            VRT_fail(ctx, "%s.add_backend(): out of memory", d->vcl_name);
            return;
        }
        d->backends = nb;
        d->cap = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL) {
        VRT_fail(ctx, "%s.add_backend(): out of memory", d->vcl_name);
        return;
    }
    d->backends[d->n++] =
        (struct backend_ref){.name = copy, .be = be, .weight = (uint32_t)weight, .health = -1};
}

VCL_BACKEND vmod_director_backend(VRT_CTX, struct vmod_chring_director *d, VCL_STRING key)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    struct task_state *t = task_get(ctx, d);
    if (t == NULL)
        return NULL;
    if (key == NULL)
        key = "";
    if (ctx->method & VCL_MET_TASK_B) {
        /* Backend side: placed when the fetch resolves the director (chring_resolve); a new
         * attempt's call ends the previous attempt's lease. */
        if (t->held && t->attempt != VRT_r_bereq_retries(ctx))
            end_attempt(d, t);
        t->key = key;
        t->key_len = strlen(key);
        return d->dir;
    }
    /* Client side (and vcl_pipe): placed now, held until the client task ends.  A restart
     * places again: the lease of the previous pass goes back first. */
    if (t->held) {
        chring_release(d->entry->ring, &t->lease);
        t->held = 0;
    }
    t->key = key;
    t->key_len = strlen(key);
    return place(ctx, d, t, NULL, 0);
}

/* The owner of key (health applied) under a read section, or NULL. */
static const struct backend_ref *owner_of(VRT_CTX, struct vmod_chring_director *d, VCL_STRING key)
{
    chring_t *ring = d->entry->ring;
    claim(ctx, d);
    sync_health(ctx, d);
    if (key == NULL)
        key = "";
    const chring_snap_t *s = chring_snap_enter(ring);
    const chring_member_t *m = chring_snap_lookup(s, key, strlen(key));
    const struct backend_ref *b = m == NULL ? NULL : find_backend(d, chring_member_name(m));
    chring_snap_exit(ring, s);
    return b;
}

VCL_BACKEND vmod_director_lookup(VRT_CTX, struct vmod_chring_director *d, VCL_STRING key)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    const struct backend_ref *b = owner_of(ctx, d, key);
    return b == NULL ? NULL : b->be;
}

VCL_STRING vmod_director_member(VRT_CTX, struct vmod_chring_director *d, VCL_STRING key)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    const struct backend_ref *b = owner_of(ctx, d, key);
    return b == NULL ? "" : b->name; /* names live as long as the director's VCL */
}

VCL_BOOL vmod_director_spilled(VRT_CTX, struct vmod_chring_director *d)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    struct vmod_priv *p = VRT_priv_task_get(ctx, d);
    const struct task_state *t = p == NULL ? NULL : p->priv;
    if (t == NULL || !t->held)
        return 0;
    /* The lease says how it was placed (docs/design.md §3): no second lookup, but for the rare
     * saturated pick, which may have landed on the owner itself. */
    if (t->lease.outcome == CHRING_OUTCOME_OWNER)
        return 0;
    if (t->lease.outcome == CHRING_OUTCOME_SPILLED)
        return 1;
    chring_t *ring = d->entry->ring;
    const chring_snap_t *s = chring_snap_enter(ring);
    const chring_member_t *owner = chring_snap_lookup(s, t->key, t->key_len);
    chring_snap_exit(ring, s);
    return owner != t->lease.member;
}

VCL_INT vmod_director_load(VRT_CTX, struct vmod_chring_director *d, VCL_BACKEND be)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    const char *name = NULL;
    for (size_t i = 0; i < d->n; i++)
        if (d->backends[i].be == be)
            name = d->backends[i].name;
    if (name == NULL)
        return -1;
    chring_t *ring = d->entry->ring;
    const chring_snap_t *s = chring_snap_enter(ring);
    const chring_member_t *m = chring_snap_find(s, name);
    VCL_INT load = m == NULL ? -1 : (VCL_INT)chring_member_load(m);
    chring_snap_exit(ring, s);
    return load;
}

VCL_REAL vmod_director_scale(VRT_CTX, struct vmod_chring_director *d, VCL_BACKEND be)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    const struct backend_ref *b = NULL;
    for (size_t i = 0; i < d->n; i++)
        if (d->backends[i].be == be)
            b = &d->backends[i];
    if (b == NULL)
        return -1;
    chring_t *ring = d->entry->ring;
    const chring_snap_t *s = chring_snap_enter(ring);
    const chring_member_t *m = chring_snap_find(s, b->name);
    VCL_REAL scale = m == NULL ? -1 : chring_member_scale(m);
    chring_snap_exit(ring, s);
    return scale;
}

VCL_INT vmod_director_leases(VRT_CTX, struct vmod_chring_director *d)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    return (VCL_INT)chring_leases(d->entry->ring);
}

/* The current snapshot's placement digest, after this director's membership has been synced (a
 * VCL's first call may come before its first placement). */
VCL_STRING vmod_director_digest(VRT_CTX, struct vmod_chring_director *d)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    claim(ctx, d);
    chring_t *ring = d->entry->ring;
    const chring_snap_t *s = chring_snap_enter(ring);
    uint64_t digest = chring_snap_digest(s);
    chring_snap_exit(ring, s);
    char buf[17];
    snprintf(buf, sizeof buf, "%016" PRIx64, digest);
    return WS_Copy(ctx->ws, buf, -1);
}

VCL_STRING vmod_director_stats(VRT_CTX, struct vmod_chring_director *d)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    chring_stats_t st;
    chring_stats(d->entry->ring, &st);
    char buf[256];
    snprintf(buf, sizeof buf,
             "members=%ju points=%ju leases=%ju acquires=%ju spills=%ju retries=%ju "
             "saturated=%ju down=%ju version=%ju",
             (uintmax_t)st.members, (uintmax_t)st.points, (uintmax_t)chring_leases(d->entry->ring),
             (uintmax_t)st.acquires, (uintmax_t)st.spills, (uintmax_t)st.retries,
             (uintmax_t)st.saturated, (uintmax_t)st.down, (uintmax_t)st.version);
    return WS_Copy(ctx->ws, buf, -1);
}
