/* vmod_chring: chring's consistent hashing with bounded loads as a Varnish 7.1 director
 * (docs/varnish.md).
 *
 * SPDX-License-Identifier: MIT
 *
 * Pieces, and who may touch them:
 *
 *   director    one per VCL object, with its own chring ring: the backends added in vcl_init
 *               (each checked there against the profile's rules in a one-member scratch ring),
 *               and the ring built from all of them at the first call after vcl_init.  Two VCLs
 *               (labels, a rollback) each place by their own membership.  The member's udata is
 *               its struct member_ref, so a placement never searches by name.
 *   registry    one entry per director name: the newest director of that name that built its
 *               ring.  A newer director's build takes over its counters, health and ramps, and
 *               gives its joiners a slow start (docs/varnish.md, "Reloads").
 *   key         `.backend(key)` stores the key's hash (hex) in a request header named after the
 *               director, on req (client side) or bereq (backend side), and returns the
 *               director.  Nothing is placed and no lease is taken there.
 *   fetch       the director is a leaf for Varnish: its gethdrs places the key (the lease is
 *               taken), resolves the chosen backend and hands the fetch to it.  The lease goes
 *               back when the backend's body has been read: a fetch processor the director
 *               pushes right above the backend's body reader releases it when that reader says
 *               the body ended (or failed), before Varnish adds the last bytes to the object, so
 *               no client can have the whole answer while its lease is still counted.  Without
 *               a body, or when the fetch fails or is abandoned, finish releases it (Varnish
 *               calls it before it marks the object finished).  So a lease counts a request at
 *               the backend, not a client's delivery.  The per-fetch state (lease, tried
 *               members for `return (retry)`) is the backend task's PRIV_TASK.
 *   health      mirrored into the ring without reading every backend per request: the member
 *               a placement chose is checked (sick: marked down, placed again), one member
 *               that is down is checked per placement (healthy again: marked up, with a ramp),
 *               and every member at most once a second (ctx->now).
 *
 * Forwarding the fetch uses Varnish's director method table (cache/cache_director.h), so the
 * module is built for the exact varnishd it runs in ($ABI strict).
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
#include "cache/cache_director.h"
#include "cache/cache_filter.h"
#include "vcl.h"
#include "vrt_obj.h"
#include "vsb.h"

#include "vcc_if.h"
#include "VSC_chring.h"

#include "chring.h"

/* varnishd's own (cache/cache_varnishd.h, whose other declarations do not compile cleanly
 * under -Wpedantic): puts a fetch processor on top of a fetch's stack. */
struct vfp_entry *VFP_Push(struct vfp_ctx *, const struct vfp *);

/* The most members a fetch's retries remember. */
#define TRIED_MAX 8
/* Longest director name used in the key header (VCL names are short). */
#define HDR_NAME_MAX 200

/* ---- the registry ------------------------------------------------------------------------- */

struct vmod_chring_director;

struct ring_entry {
    struct ring_entry *next;
    char *name;
    unsigned refs;                       /* directors of this name; under registry_mtx */
    struct vmod_chring_director *newest; /* the newest director that built its ring */
};

static pthread_mutex_t registry_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct ring_entry *registry;

/* ---- the director ------------------------------------------------------------------------- */

struct member_ref {
    char *name; /* the member name: ident or the backend's VCL name */
    VCL_BACKEND be;
    uint32_t weight;
    int down;    /* mirrored into the ring: 1 down; written under the director's mtx */
    size_t slot; /* its index in down_list while down */
};

struct vmod_chring_director {
    unsigned magic;
#define CHRING_DIRECTOR_MAGIC 0x6368726e
    char *vcl_name;
    char *hdr; /* "\NNNchring-key-<name>:" for http_GetHdr / http_Unset */
    struct ring_entry *entry;
    chring_profile_t profile;
    uint32_t vnodes;
    double balance;
    uint32_t slow_start_ms;
    chring_t *ring;    /* this director's own ring */
    chring_t *scratch; /* checks each member of vcl_init against the profile's rules */
    uint64_t points;   /* the members' points, summed in vcl_init */
    VCL_BACKEND dir;
    size_t n, cap;
    struct member_ref *members;
    int built;           /* the ring holds the members: atomic, set under mtx */
    pthread_mutex_t mtx; /* the build and health changes */
    size_t *down_list;   /* indices of the members that are down; under mtx, read racy */
    size_t ndown;        /* atomic */
    unsigned rr;         /* atomic: which down member the next placement checks */
    int64_t last_sweep;  /* ctx->now (whole seconds) of the last full health check; CAS */
    struct VSC_chring *vsc;
    struct vsc_seg *vsc_seg;
};

/* Per backend task (PRIV_TASK keyed by the director): the key's hash and the lease. */
struct task_state {
    unsigned magic;
#define CHRING_TASK_MAGIC 0x63687274
    chring_t *ring; /* the director's: alive while the task's VCL is */
    struct VSC_chring *vsc;
    uint64_t hash;
    int has_hash;
    int held;
    int spilled;        /* the lease went past the key's healthy owner (load, not health) */
    VCL_BACKEND chosen; /* the backend of the last placement */
    chring_lease_t lease;
    VCL_BACKEND leaf; /* the backend the fetch was handed to, until finish */
    unsigned ntried;  /* members the fetch's earlier attempts used */
    const chring_member_t *tried[TRIED_MAX];
};

#define VSC_ADD(d, field, v) __atomic_fetch_add(&(d)->field, (v), __ATOMIC_RELAXED)

static struct ring_entry *entry_get(const char *name)
{
    struct ring_entry *e;
    pthread_mutex_lock(&registry_mtx);
    for (e = registry; e != NULL; e = e->next) {
        if (strcmp(e->name, name) == 0) {
            e->refs++;
            pthread_mutex_unlock(&registry_mtx);
            return e;
        }
    }
    e = calloc(1, sizeof *e);
    if (e != NULL && (e->name = strdup(name)) == NULL) {
        free(e);
        e = NULL;
    }
    if (e != NULL) {
        e->refs = 1;
        e->next = registry;
        registry = e;
    }
    pthread_mutex_unlock(&registry_mtx);
    return e;
}

/* Drops a director's reference to its name's entry (it is no longer the newest). */
static void entry_put(struct ring_entry *e, struct vmod_chring_director *d)
{
    pthread_mutex_lock(&registry_mtx);
    if (e->newest == d)
        e->newest = NULL;
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
    free(e->name);
    free(e);
}

static struct member_ref *member_of(const chring_member_t *m)
{
    return m == NULL ? NULL : chring_member_udata(m);
}

/* ---- health ------------------------------------------------------------------------------- */

/* Mirrors one backend's state into the ring (down or up, with a ramp over slow_start when it
 * comes back).  Under the director's mutex, so the ring and mr->down agree. */
static void mark(struct vmod_chring_director *d, struct member_ref *mr, int down)
{
    pthread_mutex_lock(&d->mtx);
    if (mr->down != down && chring_set_down(d->ring, mr->name, down) == 0) {
        if (down) {
            mr->slot = d->ndown;
            d->down_list[d->ndown] = (size_t)(mr - d->members);
            __atomic_store_n(&d->ndown, d->ndown + 1, __ATOMIC_RELEASE);
        } else {
            size_t last = d->down_list[d->ndown - 1];
            d->down_list[mr->slot] = last;
            d->members[last].slot = mr->slot;
            __atomic_store_n(&d->ndown, d->ndown - 1, __ATOMIC_RELEASE);
            if (d->slow_start_ms > 0)
                (void)chring_set_ramp(d->ring, mr->name, CHRING_DEFAULT_SLOW_START_FROM, 1.0,
                                      d->slow_start_ms);
        }
        __atomic_store_n(&mr->down, down, __ATOMIC_RELAXED);
        VSC_ADD(d->vsc, health_changes, 1);
    }
    pthread_mutex_unlock(&d->mtx);
}

static void check_member(VRT_CTX, struct vmod_chring_director *d, struct member_ref *mr)
{
    int down = VRT_Healthy(ctx, mr->be, NULL) ? 0 : 1;
    if (__atomic_load_n(&mr->down, __ATOMIC_RELAXED) != down)
        mark(d, mr, down);
}

/* Per placement: one member that is down is checked (round robin), and all members at most
 * once a second of ctx->now (one thread does it).  O(1) per request otherwise. */
static void health_tick(VRT_CTX, struct vmod_chring_director *d)
{
    size_t ndown = __atomic_load_n(&d->ndown, __ATOMIC_ACQUIRE);
    if (ndown > 0) {
        unsigned k = __atomic_fetch_add(&d->rr, 1, __ATOMIC_RELAXED);
        /* A racy read: a stale index only checks another member, which is harmless. */
        size_t i = __atomic_load_n(&d->down_list[k % ndown], __ATOMIC_RELAXED);
        if (i < d->n)
            check_member(ctx, d, &d->members[i]);
    }
    int64_t last = __atomic_load_n(&d->last_sweep, __ATOMIC_RELAXED);
    int64_t now = (int64_t)ctx->now;
    if (now != last && __atomic_compare_exchange_n(&d->last_sweep, &last, now, 0, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED))
        for (size_t i = 0; i < d->n; i++)
            check_member(ctx, d, &d->members[i]);
}

/* ---- the ring's build --------------------------------------------------------------------- */

/* Takes over from the newest director of the same name (a reload): its counters and the
 * ramps still running (health is mirrored at this director's first placement); members it did not have warm up over slow_start.
 * Under registry_mtx (the other director cannot go meanwhile) and d->mtx. */
static void take_over(struct vmod_chring_director *d, struct vmod_chring_director *prev)
{
    if (prev->vsc != NULL && d->vsc != NULL) {
        d->vsc->acquires += prev->vsc->acquires;
        d->vsc->owner += prev->vsc->owner;
        d->vsc->spills += prev->vsc->spills;
        d->vsc->saturated += prev->vsc->saturated;
        d->vsc->health_moves += prev->vsc->health_moves;
        d->vsc->retries += prev->vsc->retries;
        d->vsc->failures += prev->vsc->failures;
        d->vsc->health_changes += prev->vsc->health_changes;
    }
    if (!__atomic_load_n(&prev->built, __ATOMIC_ACQUIRE))
        return;
    const chring_snap_t *s = chring_snap_hold(prev->ring);
    for (size_t i = 0; i < d->n; i++) {
        struct member_ref *mr = &d->members[i];
        const chring_member_t *pm = chring_snap_find(s, mr->name);
        if (pm == NULL) {
            if (d->slow_start_ms > 0)
                (void)chring_set_ramp(d->ring, mr->name, CHRING_DEFAULT_SLOW_START_FROM, 1.0,
                                      d->slow_start_ms);
            continue;
        }
        double scale = chring_member_scale(pm);
        if (scale < 1.0 && d->slow_start_ms > 0) {
            double left = (1.0 - scale) / (1.0 - CHRING_DEFAULT_SLOW_START_FROM);
            (void)chring_set_ramp(d->ring, mr->name, scale, 1.0,
                                  (uint32_t)(left * d->slow_start_ms + 0.5));
        }
    }
    chring_snap_put(prev->ring, s);
}

/* Builds the ring from every backend added in vcl_init (once, at the first call after it). */
static int build(VRT_CTX, struct vmod_chring_director *d)
{
    if (__atomic_load_n(&d->built, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&registry_mtx);
    pthread_mutex_lock(&d->mtx);
    int rc = 0;
    if (!d->built) {
        chring_change_t *ch = calloc(d->n ? d->n : 1, sizeof *ch);
        rc = ch == NULL ? -ENOMEM : 0;
        for (size_t i = 0; rc == 0 && i < d->n; i++)
            ch[i] = (chring_change_t){.name = d->members[i].name,
                                      .weight = d->members[i].weight,
                                      .udata = &d->members[i]};
        if (rc == 0)
            rc = chring_sync(d->ring, ch, d->n);
        free(ch);
        if (rc == 0) {
            struct vmod_chring_director *prev = d->entry->newest;
            if (prev != NULL && prev != d)
                take_over(d, prev);
            d->entry->newest = d;
            __atomic_store_n(&d->built, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&d->mtx);
    pthread_mutex_unlock(&registry_mtx);
    if (rc < 0)
        VRT_fail(ctx, "chring: %s: cannot build the ring: %s", d->vcl_name, chring_strerror(rc));
    return rc;
}

/* Methods that place or look up keys see the whole membership: in vcl_init the backends are
 * still being added, so they fail there (docs/varnish.md, "Errors"). */
static int usable(VRT_CTX, struct vmod_chring_director *d, const char *method)
{
    if (ctx->method == VCL_MET_INIT) {
        VRT_fail(ctx,
                 "%s.%s(): not in vcl_init: the director's backends are complete only "
                 "after vcl_init",
                 d->vcl_name, method);
        return 0;
    }
    if (ctx->method == VCL_MET_FINI)
        return 0;
    return build(ctx, d) == 0;
}

/* ---- placement ---------------------------------------------------------------------------- */

static uint64_t key_hash(struct vmod_chring_director *d, const char *key)
{
    const chring_snap_t *s = chring_snap_enter(d->ring);
    uint64_t h = chring_snap_hash(s, key, strlen(key));
    chring_snap_exit(d->ring, s);
    return h;
}

/* The key's owner among the healthy members (health mirrored on the way), or NULL. */
static struct member_ref *owner_of(VRT_CTX, struct vmod_chring_director *d, uint64_t hash)
{
    health_tick(ctx, d);
    for (size_t tries = 0; tries <= d->n; tries++) {
        const chring_snap_t *s = chring_snap_enter(d->ring);
        struct member_ref *mr = member_of(chring_snap_lookup_hash(s, hash));
        chring_snap_exit(d->ring, s);
        if (mr == NULL || VRT_Healthy(ctx, mr->be, NULL))
            return mr;
        mark(d, mr, 1);
    }
    return NULL;
}

/* How a placement went, as varnishstat counts it and the log line names it. */
enum placement {
    PLACED_OWNER,     /* on the key's owner among the healthy members */
    PLACED_SPILLED,   /* past that owner, which was full */
    PLACED_HEALTH,    /* on that owner, past a sick one before it: a health move, not a spill */
    PLACED_SATURATED, /* every member met looked full */
    PLACED_RETRY      /* a retried fetch, skipping the members tried */
};

static const char *const placement_names[] = {"owner", "spilled", "health", "saturated", "retry"};

/* The lease goes back; its member is listed as tried (a retry skips it). */
static void end_attempt(struct task_state *t)
{
    if (!t->held)
        return;
    if (t->ntried < TRIED_MAX)
        t->tried[t->ntried++] = t->lease.member;
    chring_release(t->ring, &t->lease);
    __atomic_fetch_sub(&t->vsc->leases, 1, __ATOMIC_RELAXED);
    t->held = 0;
}

/* Places the task's key with bounded loads, skipping the members earlier attempts used, and
 * mirrors the chosen backend's health (a sick one is marked down and the key placed again).
 * Logs the owner, the member and the outcome.  Returns the member, or NULL. */
static struct member_ref *place(VRT_CTX, struct vmod_chring_director *d, struct task_state *t)
{
    health_tick(ctx, d);
    struct member_ref *mr = NULL;
    for (size_t tries = 0; tries <= d->n; tries++) {
        int rc = t->ntried == 0
                     ? chring_acquire_hash(d->ring, t->hash, &t->lease)
                     : chring_acquire_hash_skip(d->ring, t->hash, t->tried, t->ntried, &t->lease);
        if (rc < 0)
            break;
        mr = member_of(t->lease.member);
        if (VRT_Healthy(ctx, mr->be, NULL))
            break;
        chring_release(d->ring, &t->lease);
        mark(d, mr, 1);
        mr = NULL;
    }
    if (mr == NULL) {
        VSC_ADD(d->vsc, failures, 1);
        VSLb(ctx->vsl, SLT_VCL_Log, "chring %s key=%016" PRIx64 " outcome=none", d->vcl_name,
             t->hash);
        return NULL;
    }
    t->held = 1;
    VSC_ADD(d->vsc, leases, 1);
    VSC_ADD(d->vsc, acquires, 1);
    /* The owner among the healthy members tells a spill (load) from a health move; a lease on
     * the owner needs no second lookup. */
    struct member_ref *owner = mr;
    if (t->lease.outcome != CHRING_OUTCOME_OWNER) {
        const chring_snap_t *s = chring_snap_enter(d->ring);
        owner = member_of(chring_snap_lookup_hash(s, t->hash));
        chring_snap_exit(d->ring, s);
    }
    enum placement how;
    if (t->ntried > 0)
        how = PLACED_RETRY;
    else if (t->lease.outcome == CHRING_OUTCOME_OWNER)
        how = PLACED_OWNER;
    else if (owner == mr)
        how = PLACED_HEALTH;
    else if (t->lease.outcome == CHRING_OUTCOME_SATURATED)
        how = PLACED_SATURATED;
    else
        how = PLACED_SPILLED;
    t->spilled = owner != mr;
    t->chosen = mr->be;
    switch (how) {
    case PLACED_OWNER: VSC_ADD(d->vsc, owner, 1); break;
    case PLACED_SPILLED: VSC_ADD(d->vsc, spills, 1); break;
    case PLACED_HEALTH: VSC_ADD(d->vsc, health_moves, 1); break;
    case PLACED_SATURATED: VSC_ADD(d->vsc, saturated, 1); break;
    case PLACED_RETRY: VSC_ADD(d->vsc, retries, 1); break;
    }
    VSLb(ctx->vsl, SLT_VCL_Log, "chring %s key=%016" PRIx64 " owner=%s member=%s outcome=%s",
         d->vcl_name, t->hash, owner ? owner->name : "-", mr->name, placement_names[how]);
    return mr;
}

/* ---- task state --------------------------------------------------------------------------- */

/* PRIV_TASK fini of a backend task: a lease still held (a fetch Varnish never finished) goes
 * back.  It touches the ring only, which lives as long as the task's VCL; the state is only
 * ever made in backend tasks (gethdrs, pipe), never in vcl_init or vcl_fini. */
static void task_fini(VRT_CTX, void *p)
{
    struct task_state *t = p;
    (void)ctx;
    if (t != NULL && t->magic == CHRING_TASK_MAGIC)
        end_attempt(t);
}

static const struct vmod_priv_methods task_methods[1] = {{
    .magic = VMOD_PRIV_METHODS_MAGIC,
    .type = "chring task",
    .fini = task_fini,
}};

static struct task_state *task_get(VRT_CTX, struct vmod_chring_director *d)
{
    struct vmod_priv *p = VRT_priv_task(ctx, d);
    if (p == NULL)
        return NULL;
    if (p->priv == NULL) {
        struct task_state *t = WS_Alloc(ctx->ws, sizeof *t);
        if (t == NULL)
            return NULL;
        memset(t, 0, sizeof *t);
        t->magic = CHRING_TASK_MAGIC;
        t->ring = d->ring;
        t->vsc = d->vsc;
        p->priv = t;
        p->methods = task_methods;
    }
    return p->priv;
}

/* The key stored by .backend(): taken off the request (the backend never sees the header). */
static struct task_state *fetch_state(VRT_CTX, struct vmod_chring_director *d, struct http *bereq)
{
    struct task_state *t = task_get(ctx, d);
    if (t == NULL) {
        VSLb(ctx->vsl, SLT_FetchError, "chring %s: out of workspace", d->vcl_name);
        return NULL;
    }
    const char *v;
    if (bereq != NULL && http_GetHdr(bereq, d->hdr, &v)) {
        char *end;
        errno = 0;
        uint64_t h = strtoull(v, &end, 16);
        if (errno == 0 && end != v && *end == '\0') {
            t->hash = h;
            t->has_hash = 1;
        }
        http_Unset(bereq, d->hdr);
    }
    if (!t->has_hash) {
        VSC_ADD(d->vsc, failures, 1);
        VSLb(ctx->vsl, SLT_FetchError, "chring %s: no key: call .backend(key) first", d->vcl_name);
        return NULL;
    }
    if (build(ctx, d) < 0)
        return NULL;
    end_attempt(t); /* none is held: finish or a failed gethdrs ended the last one */
    return t;
}

/* ---- the end of the backend's body ------------------------------------------------------- */

/* Pulls from the backend's body reader below it; when the reader reports the end of the body (or
 * an error), the lease goes back before the caller adds those bytes to the object. */
static enum vfp_status v_matchproto_(vfp_pull_f)
    release_pull(struct vfp_ctx *vc, struct vfp_entry *vfe, void *p, ssize_t *lp)
{
    enum vfp_status vp = VFP_Suck(vc, p, lp);
    if (vp == VFP_END || vp == VFP_ERROR) {
        struct task_state *t = vfe->priv1;
        if (t != NULL && t->magic == CHRING_TASK_MAGIC)
            end_attempt(t);
        vfe->priv1 = NULL;
    }
    return vp;
}

static const struct vfp release_vfp = {
    .name = "chring-release",
    .pull = release_pull,
};

/* ---- the director's methods --------------------------------------------------------------- */

/* The fetch resolves the director: the key is placed now (the lease counts the fetch) and the
 * fetch handed to the chosen backend.  A retried fetch skips the members already tried. */
static int v_matchproto_(vdi_gethdrs_f) chring_gethdrs(VRT_CTX, VCL_BACKEND dir)
{
    struct vmod_chring_director *d;
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(ctx->bo, BUSYOBJ_MAGIC);
    CAST_OBJ_NOTNULL(d, dir->priv, CHRING_DIRECTOR_MAGIC);
    struct task_state *t = fetch_state(ctx, d, ctx->bo->bereq);
    if (t == NULL)
        return -1;
    struct member_ref *mr = place(ctx, d, t);
    if (mr == NULL) {
        VSLb(ctx->vsl, SLT_FetchError, "chring %s: no backend up", d->vcl_name);
        return -1;
    }
    VCL_BACKEND leaf = VRT_DirectorResolve(ctx, mr->be);
    if (leaf == NULL || leaf->vdir->methods->gethdrs == NULL) {
        VSLb(ctx->vsl, SLT_FetchError, "chring %s: %s resolved to no backend", d->vcl_name,
             mr->name);
        end_attempt(t);
        return -1;
    }
    t->leaf = leaf;
    int i = leaf->vdir->methods->gethdrs(ctx, leaf);
    if (i != 0) {
        /* Varnish does not call finish after a failed gethdrs. */
        t->leaf = NULL;
        end_attempt(t);
        return i;
    }
    /* A body to read: the backend pushed its reader; the release goes right above it. */
    if (!VTAILQ_EMPTY(&ctx->bo->vfc->vfp)) {
        struct vfp_entry *vfe = VFP_Push(ctx->bo->vfc, &release_vfp);
        if (vfe != NULL)
            vfe->priv1 = t;
    }
    return 0;
}

/* The fetch ended (body received, or failed, or abandoned): the backend's connection goes back
 * and so does the lease, if the end of the body did not release it already.  Varnish calls this
 * before it marks the object finished. */
static void v_matchproto_(vdi_finish_f) chring_finish(VRT_CTX, VCL_BACKEND dir)
{
    struct vmod_chring_director *d;
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CAST_OBJ_NOTNULL(d, dir->priv, CHRING_DIRECTOR_MAGIC);
    struct vmod_priv *p = VRT_priv_task_get(ctx, d);
    struct task_state *t = p == NULL ? NULL : p->priv;
    if (t == NULL)
        return;
    VCL_BACKEND leaf = t->leaf;
    t->leaf = NULL;
    if (leaf != NULL && leaf->vdir->methods->finish != NULL)
        leaf->vdir->methods->finish(ctx, leaf);
    end_attempt(t);
}

static VCL_IP v_matchproto_(vdi_getip_f) chring_getip(VRT_CTX, VCL_BACKEND dir)
{
    struct vmod_chring_director *d;
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CAST_OBJ_NOTNULL(d, dir->priv, CHRING_DIRECTOR_MAGIC);
    struct vmod_priv *p = VRT_priv_task_get(ctx, d);
    struct task_state *t = p == NULL ? NULL : p->priv;
    if (t == NULL || t->leaf == NULL || t->leaf->vdir->methods->getip == NULL)
        return NULL;
    return t->leaf->vdir->methods->getip(ctx, t->leaf);
}

/* return (pipe): placed for the pipe's life, which ends when this returns. */
static stream_close_t v_matchproto_(vdi_http1pipe_f) chring_http1pipe(VRT_CTX, VCL_BACKEND dir)
{
    struct vmod_chring_director *d;
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(ctx->bo, BUSYOBJ_MAGIC);
    CAST_OBJ_NOTNULL(d, dir->priv, CHRING_DIRECTOR_MAGIC);
    struct task_state *t = fetch_state(ctx, d, ctx->bo->bereq);
    if (t == NULL)
        return SC_TX_ERROR;
    struct member_ref *mr = place(ctx, d, t);
    if (mr == NULL)
        return SC_TX_ERROR;
    VCL_BACKEND leaf = VRT_DirectorResolve(ctx, mr->be);
    stream_close_t sc = SC_TX_ERROR;
    if (leaf != NULL && leaf->vdir->methods->http1pipe != NULL)
        sc = leaf->vdir->methods->http1pipe(ctx, leaf);
    end_attempt(t);
    return sc;
}

/* Healthy when one member is: from the mirrored state once the ring is built. */
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
        if (VRT_Healthy(ctx, d->members[i].be, NULL))
            return 1;
    return 0;
}

/* backend.list: "healthy/total" and the director's health; with -p one line per member (its
 * backend, health, state in the ring, admission scale, leases, capacity), as directors.shard
 * lists its backends; -j as JSON (with the member's acquires and spills). */
static void v_matchproto_(vdi_list_f)
    chring_list(VRT_CTX, VCL_BACKEND dir, struct vsb *vsb, int pflag, int jflag)
{
    struct vmod_chring_director *d;
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(dir, DIRECTOR_MAGIC);
    CAST_OBJ_NOTNULL(d, dir->priv, CHRING_DIRECTOR_MAGIC);
    unsigned nh = 0;
    int built = __atomic_load_n(&d->built, __ATOMIC_ACQUIRE);
    const chring_snap_t *s = built ? chring_snap_hold(d->ring) : NULL;
    if (pflag) {
        if (jflag) {
            VSB_cat(vsb, "{\n");
            VSB_indent(vsb, 2);
            VSB_printf(vsb, "\"profile\": \"%s\",\n", chring_profile_name(d->profile));
            VSB_printf(vsb, "\"balance\": %f,\n", d->balance);
            VSB_printf(vsb, "\"leases\": %ju,\n", (uintmax_t)(built ? chring_leases(d->ring) : 0));
            VSB_cat(vsb, "\"members\": {\n");
            VSB_indent(vsb, 2);
        } else {
            /* At most 10 columns: Varnish's CLI table (VCLI_VTE) asserts it. */
            VSB_printf(vsb, "\n\n\tBackend\tMember\tHealth\tRing\tScale\tLoad\tCapacity\n");
        }
    }
    for (size_t i = 0; i < d->n; i++) {
        struct member_ref *mr = &d->members[i];
        VCL_BOOL h = VRT_Healthy(ctx, mr->be, NULL);
        if (h)
            nh++;
        if (!pflag)
            continue;
        const chring_member_t *m = s == NULL ? NULL : chring_snap_find(s, mr->name);
        chring_member_stats_t ms;
        chring_member_stats(m, &ms);
        double scale = m == NULL ? 1.0 : chring_member_scale(m);
        uint64_t cap = m == NULL ? 0 : chring_member_capacity(d->ring, s, m);
        const char *ring_state = m == NULL ? "unbuilt" : chring_member_is_down(m) ? "down" : "up";
        if (jflag) {
            if (i)
                VSB_cat(vsb, ",\n");
            VSB_printf(vsb, "\"%s\": {\n", mr->name);
            VSB_indent(vsb, 2);
            VSB_printf(vsb, "\"backend\": \"%s\",\n", mr->be->vcl_name);
            VSB_printf(vsb, "\"health\": \"%s\",\n", h ? "healthy" : "sick");
            VSB_printf(vsb, "\"ring\": \"%s\",\n", ring_state);
            VSB_printf(vsb, "\"scale\": %f,\n", scale);
            VSB_printf(vsb, "\"load\": %ju,\n", (uintmax_t)ms.load);
            VSB_printf(vsb, "\"capacity\": %ju,\n", (uintmax_t)cap);
            VSB_printf(vsb, "\"acquires\": %ju,\n", (uintmax_t)ms.acquires);
            VSB_printf(vsb, "\"spilled_in\": %ju\n", (uintmax_t)ms.spilled_in);
            VSB_indent(vsb, -2);
            VSB_cat(vsb, "}");
        } else {
            VSB_printf(vsb, "\t%s\t%s\t%s\t%s\t%.3f\t%ju\t%ju\n", mr->be->vcl_name, mr->name,
                       h ? "healthy" : "sick", ring_state, scale, (uintmax_t)ms.load,
                       (uintmax_t)cap);
        }
    }
    if (s != NULL)
        chring_snap_put(d->ring, s);
    if (pflag) {
        if (jflag) {
            VSB_cat(vsb, "\n");
            VSB_indent(vsb, -2);
            VSB_cat(vsb, "}\n");
            VSB_indent(vsb, -2);
            VSB_cat(vsb, "},\n");
        }
        return;
    }
    if (jflag)
        VSB_printf(vsb, "[%u, %zu, \"%s\"]", nh, d->n, nh ? "healthy" : "sick");
    else
        VSB_printf(vsb, "%u/%zu\t%s", nh, d->n, nh ? "healthy" : "sick");
}

static void director_free(struct vmod_chring_director *d)
{
    if (d->entry != NULL)
        entry_put(d->entry, d);
    chring_free(&d->ring);
    chring_free(&d->scratch);
    if (d->vsc_seg != NULL)
        VSC_chring_Destroy(&d->vsc_seg);
    for (size_t i = 0; i < d->n; i++)
        free(d->members[i].name);
    free(d->members);
    free(d->down_list);
    free(d->hdr);
    free(d->vcl_name);
    pthread_mutex_destroy(&d->mtx);
    FREE_OBJ(d);
}

/* Varnish calls this once no task of the director's VCL runs any more. */
static void v_matchproto_(vdi_destroy_f) chring_destroy(VCL_BACKEND dir)
{
    struct vmod_chring_director *d;
    CHECK_OBJ_NOTNULL(dir, DIRECTOR_MAGIC);
    CAST_OBJ_NOTNULL(d, dir->priv, CHRING_DIRECTOR_MAGIC);
    director_free(d);
}

static const struct vdi_methods chring_methods[1] = {{
    .magic = VDI_METHODS_MAGIC,
    .type = "chring",
    .http1pipe = chring_http1pipe,
    .healthy = chring_healthy,
    .gethdrs = chring_gethdrs,
    .getip = chring_getip,
    .finish = chring_finish,
    .destroy = chring_destroy,
    .list = chring_list,
}};

/* ---- VCL ---------------------------------------------------------------------------------- */

static int new_ring(chring_t **out, chring_profile_t profile, uint32_t vnodes, double balance)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    cfg.vnodes = vnodes;
    cfg.balance = balance;
    int rc = chring_new(out, &cfg); /* slow start: ramps set by this module (take_over, mark) */
    /* A director's ring is built once, at its first use after vcl_init, and then only read
     * (health aside): no spare blocks for a burst of publishes that never comes.  Without this
     * a build of 8 MB or more (about 400,000 points) would make five ready, and every VCL load
     * would peak at about six times the ring (docs/varnish.md, "Memory"). */
    if (rc == 0 && (rc = chring_set_prefault(*out, 0)) != 0)
        chring_free(out);
    return rc;
}

VCL_VOID vmod_director__init(VRT_CTX, struct vmod_chring_director **dp, const char *vcl_name,
                             VCL_STRING profile, VCL_INT vnodes, VCL_REAL balance,
                             VCL_DURATION slow_start)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    AN(dp);
    AZ(*dp);
    chring_profile_t prof;
    chring_profile_info_t info;
    if (profile == NULL || chring_profile_parse(profile, &prof) < 0 ||
        prof == CHRING_PROFILE_CUSTOM || chring_profile_info(prof, &info) < 0) {
        /* The profiles the director takes, every one of the library's table but custom, listed
         * from chring_profile_info: a new profile shows here without an edit. */
        char names[256];
        size_t n = 0;
        names[0] = '\0';
        for (int p = 0; p < CHRING_PROFILE_COUNT; p++) {
            chring_profile_info_t pi;
            if (p != CHRING_PROFILE_CUSTOM && chring_profile_info((chring_profile_t)p, &pi) == 0 &&
                n < sizeof names)
                n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", pi.name);
        }
        VRT_fail(ctx, "chring.director(%s): profile: unknown profile '%s' (%s)", vcl_name,
                 profile ? profile : "", names);
        return;
    }
    if (vnodes < 0 || vnodes > (VCL_INT)CHRING_POINTS_MAX) {
        VRT_fail(ctx, "chring.director(%s): vnodes: %jd is out of range 0..%u (0: the default)",
                 vcl_name, (intmax_t)vnodes, CHRING_POINTS_MAX);
        return;
    }
    if (vnodes != 0 && !info.uses_vnodes) {
        VRT_fail(ctx,
                 "chring.director(%s): vnodes: profile %s fixes its own point counts; leave "
                 "vnodes at 0",
                 vcl_name, info.name);
        return;
    }
    if (vnodes == 0)
        vnodes = !info.uses_vnodes ? 0 : prof == CHRING_PROFILE_VARNISH ? 67 : 160;
    if (!isfinite(balance) || balance < 1.0) {
        VRT_fail(ctx, "chring.director(%s): balance: %g is not a number >= 1 (the bound c)",
                 vcl_name, balance);
        return;
    }
    if (!(slow_start >= 0) || slow_start > 86400.0 * 49) {
        VRT_fail(ctx, "chring.director(%s): slow_start: %gs is out of range 0s..49d", vcl_name,
                 slow_start);
        return;
    }
    if (strlen(vcl_name) > HDR_NAME_MAX) {
        VRT_fail(ctx, "chring.director(%s): the name is longer than %d bytes", vcl_name,
                 HDR_NAME_MAX);
        return;
    }
    struct vmod_chring_director *d;
    ALLOC_OBJ(d, CHRING_DIRECTOR_MAGIC);
    if (d == NULL) {
        VRT_fail(ctx, "chring.director(%s): out of memory", vcl_name);
        return;
    }
    pthread_mutex_init(&d->mtx, NULL);
    d->profile = prof;
    d->vnodes = (uint32_t)vnodes;
    d->balance = balance;
    d->slow_start_ms = (uint32_t)(slow_start * 1000.0 + 0.5);
    size_t hl = strlen("chring-key-:") + strlen(vcl_name);
    d->vcl_name = strdup(vcl_name);
    d->hdr = malloc(hl + 2);
    int rc = d->vcl_name == NULL || d->hdr == NULL ? -ENOMEM : 0;
    if (rc == 0) {
        d->hdr[0] = (char)hl;
        snprintf(d->hdr + 1, hl + 1, "chring-key-%s:", vcl_name);
        rc = new_ring(&d->ring, prof, d->vnodes, balance);
    }
    if (rc == 0)
        rc = new_ring(&d->scratch, prof, d->vnodes, balance);
    if (rc == 0 && (d->entry = entry_get(vcl_name)) == NULL)
        rc = -ENOMEM;
    if (rc < 0) {
        VRT_fail(ctx, "chring.director(%s): %s", vcl_name, chring_strerror(rc));
        director_free(d);
        return;
    }
    d->vsc =
        VSC_chring_New(NULL, &d->vsc_seg, "%s.%s", ctx->vcl ? VCL_Name(ctx->vcl) : "", vcl_name);
    d->dir = VRT_AddDirector(ctx, chring_methods, d, "%s", vcl_name);
    if (d->dir == NULL || d->vsc == NULL) {
        if (d->dir != NULL)
            VRT_DelDirector(&d->dir); /* frees d */
        else
            director_free(d);
        VRT_fail(ctx, "chring.director(%s): cannot register the director", vcl_name);
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
    if (ctx->method != VCL_MET_INIT || d->scratch == NULL) {
        VRT_fail(ctx, "%s.add_backend(): only in vcl_init", d->vcl_name);
        return;
    }
    if (be == NULL) {
        VRT_fail(ctx, "%s.add_backend(): backend: none given", d->vcl_name);
        return;
    }
    chring_profile_info_t info;
    (void)chring_profile_info(d->profile, &info);
    uint32_t maxw = info.max_weight ? info.max_weight : 65535;
    if (weight < 1 || weight > (VCL_INT)maxw) {
        VRT_fail(ctx, "%s.add_backend(%s): weight: %jd is out of range 1..%u%s%s", d->vcl_name,
                 VRT_BACKEND_string(be), (intmax_t)weight, maxw,
                 info.max_weight ? " for profile " : "", info.max_weight ? info.name : "");
        return;
    }
    const char *name = (ident != NULL && *ident != '\0') ? ident : VRT_BACKEND_string(be);
    if (name == NULL || *name == '\0' || strlen(name) > CHRING_NAME_MAX) {
        VRT_fail(ctx, "%s.add_backend(): ident: a member name is 1..%d bytes", d->vcl_name,
                 CHRING_NAME_MAX);
        return;
    }
    for (size_t i = 0; i < d->n; i++) {
        if (strcmp(d->members[i].name, name) == 0) {
            VRT_fail(ctx, "%s.add_backend(%s): member '%s' added twice", d->vcl_name,
                     VRT_BACKEND_string(be), name);
            return;
        }
    }
    /* Points: vnodes * weight where the profile uses vnodes; otherwise the profile's own rules
     * (haproxy's server ids, its point counts) are checked by the library on a ring that
     * holds this member alone. */
    uint64_t pts = (uint64_t)d->vnodes * (uint64_t)weight;
    int rc = 0;
    if (info.uses_vnodes && pts > CHRING_POINTS_MAX)
        rc = -E2BIG;
    if (!info.uses_vnodes) {
        chring_change_t one = {.name = name, .weight = (uint32_t)weight};
        rc = chring_sync(d->scratch, &one, 1);
        const chring_snap_t *s = chring_snap_enter(d->scratch);
        pts = chring_snap_points(s);
        chring_snap_exit(d->scratch, s);
    }
    if (rc < 0) {
        const char *why = rc == -E2BIG ? "too many points (vnodes * weight above the limit)"
                          : rc == -EINVAL && info.names_are_ids
                              ? "profile haproxy takes decimal server ids as member names "
                                "(give ident = \"1\", \"2\", ...)"
                              : chring_strerror(rc);
        VRT_fail(ctx, "%s.add_backend(%s): member '%s' weight %jd: %s", d->vcl_name,
                 VRT_BACKEND_string(be), name, (intmax_t)weight, why);
        return;
    }
    if (d->points + pts > CHRING_RING_POINTS_MAX) {
        VRT_fail(ctx, "%s.add_backend(%s): too many points: the ring would have %ju, above %u",
                 d->vcl_name, VRT_BACKEND_string(be), (uintmax_t)(d->points + pts),
                 CHRING_RING_POINTS_MAX);
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 8;
        struct member_ref *nb = realloc(d->members, cap * sizeof *nb);
        if (nb == NULL) {
            VRT_fail(ctx, "%s.add_backend(): out of memory", d->vcl_name);
            return;
        }
        d->members = nb;
        size_t *dl = realloc(d->down_list, cap * sizeof *dl);
        if (dl == NULL) {
            VRT_fail(ctx, "%s.add_backend(): out of memory", d->vcl_name);
            return;
        }
        d->down_list = dl;
        d->cap = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL) {
        VRT_fail(ctx, "%s.add_backend(): out of memory", d->vcl_name);
        return;
    }
    d->points += pts;
    d->members[d->n++] = (struct member_ref){.name = copy, .be = be, .weight = (uint32_t)weight};
}

/* Client side (vcl_recv, vcl_pipe) or backend side (vcl_backend_fetch): the key's hash goes
 * into the request for the fetch to place; returns the director itself. */
VCL_BACKEND vmod_director_backend(VRT_CTX, struct vmod_chring_director *d, VCL_STRING key)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    if (!usable(ctx, d, "backend"))
        return NULL;
    struct http *hp = (ctx->method & VCL_MET_TASK_B) ? ctx->http_bereq : ctx->http_req;
    if (ctx->method == VCL_MET_PIPE && ctx->http_bereq != NULL)
        hp = ctx->http_bereq;
    if (hp == NULL) {
        VRT_fail(ctx, "%s.backend(): no request here", d->vcl_name);
        return NULL;
    }
    if (key == NULL)
        key = "";
    char buf[17];
    snprintf(buf, sizeof buf, "%016" PRIx64, key_hash(d, key));
    http_ForceHeader(hp, d->hdr, buf);
    return d->dir;
}

VCL_BACKEND vmod_director_lookup(VRT_CTX, struct vmod_chring_director *d, VCL_STRING key)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    if (!usable(ctx, d, "lookup"))
        return NULL;
    struct member_ref *mr = owner_of(ctx, d, key_hash(d, key ? key : ""));
    return mr == NULL ? NULL : mr->be;
}

VCL_STRING vmod_director_member(VRT_CTX, struct vmod_chring_director *d, VCL_STRING key)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    if (!usable(ctx, d, "member"))
        return "";
    struct member_ref *mr = owner_of(ctx, d, key_hash(d, key ? key : ""));
    return mr == NULL ? "" : mr->name; /* names live as long as the director's VCL */
}

VCL_BOOL vmod_director_spilled(VRT_CTX, struct vmod_chring_director *d)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    if (!(ctx->method & VCL_MET_TASK_B))
        return 0;
    struct vmod_priv *p = VRT_priv_task_get(ctx, d);
    const struct task_state *t = p == NULL ? NULL : p->priv;
    return t != NULL && t->magic == CHRING_TASK_MAGIC && t->spilled;
}

VCL_BACKEND vmod_director_chosen(VRT_CTX, struct vmod_chring_director *d)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    if (!(ctx->method & VCL_MET_TASK_B))
        return NULL;
    struct vmod_priv *p = VRT_priv_task_get(ctx, d);
    const struct task_state *t = p == NULL ? NULL : p->priv;
    return t != NULL && t->magic == CHRING_TASK_MAGIC ? t->chosen : NULL;
}

static const struct member_ref *member_by_backend(struct vmod_chring_director *d, VCL_BACKEND be)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->members[i].be == be)
            return &d->members[i];
    return NULL;
}

VCL_INT vmod_director_load(VRT_CTX, struct vmod_chring_director *d, VCL_BACKEND be)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    const struct member_ref *mr = member_by_backend(d, be);
    if (mr == NULL || !usable(ctx, d, "load"))
        return -1;
    const chring_snap_t *s = chring_snap_enter(d->ring);
    const chring_member_t *m = chring_snap_find(s, mr->name);
    VCL_INT load = m == NULL ? -1 : (VCL_INT)chring_member_load(m);
    chring_snap_exit(d->ring, s);
    return load;
}

VCL_REAL vmod_director_scale(VRT_CTX, struct vmod_chring_director *d, VCL_BACKEND be)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    const struct member_ref *mr = member_by_backend(d, be);
    if (mr == NULL || !usable(ctx, d, "scale"))
        return -1;
    const chring_snap_t *s = chring_snap_enter(d->ring);
    const chring_member_t *m = chring_snap_find(s, mr->name);
    VCL_REAL scale = m == NULL ? -1 : chring_member_scale(m);
    chring_snap_exit(d->ring, s);
    return scale;
}

VCL_INT vmod_director_leases(VRT_CTX, struct vmod_chring_director *d)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    return (VCL_INT)chring_leases(d->ring);
}

/* The placement digest of the director's whole membership. */
VCL_STRING vmod_director_digest(VRT_CTX, struct vmod_chring_director *d)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    if (!usable(ctx, d, "digest"))
        return "";
    const chring_snap_t *s = chring_snap_enter(d->ring);
    uint64_t digest = chring_snap_digest(s);
    chring_snap_exit(d->ring, s);
    char buf[17];
    snprintf(buf, sizeof buf, "%016" PRIx64, digest);
    return WS_Copy(ctx->ws, buf, -1);
}

VCL_STRING vmod_director_stats(VRT_CTX, struct vmod_chring_director *d)
{
    CHECK_OBJ_NOTNULL(ctx, VRT_CTX_MAGIC);
    CHECK_OBJ_NOTNULL(d, CHRING_DIRECTOR_MAGIC);
    if (!usable(ctx, d, "stats"))
        return "";
    chring_stats_t st;
    chring_stats(d->ring, &st);
    const struct VSC_chring *c = d->vsc;
#define RD(f) (uintmax_t) __atomic_load_n(&c->f, __ATOMIC_RELAXED)
    return WS_Printf(ctx->ws,
                     "members=%ju points=%ju leases=%ju acquires=%ju owner=%ju spills=%ju "
                     "health_moves=%ju retries=%ju saturated=%ju failures=%ju down=%ju "
                     "version=%ju",
                     (uintmax_t)st.members, (uintmax_t)st.points, (uintmax_t)chring_leases(d->ring),
                     RD(acquires), RD(owner), RD(spills), RD(health_moves), RD(retries),
                     RD(saturated), RD(failures), (uintmax_t)st.down, (uintmax_t)st.version);
#undef RD
}
