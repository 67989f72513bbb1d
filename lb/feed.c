/* chring-lb: a membership feed's set: the names a feed gives (etcd's keys: etcd.c) with their
 * weights and resolve states, and what brings the ring to it: the puts and deletes since the
 * last apply, as one change holding only the differences (docs/lb.md, "The etcd feed").
 *
 * SPDX-License-Identifier: MIT
 *
 * The set is a hash table by name, so a batch costs O(its events), never O(members); a replace
 * (a range) costs O(entries).  A new name with a numeric address is set up at once; any other
 * name is handed to the resolver thread (resolver.c) and joins the ring when its answer comes
 * back, with the weight it has then; a name that does not resolve is tried again every
 * RESOLVE_RETRY_MS, in the background, never again for each batch.
 *
 * The change is published by writer.c's writer thread (lb_ring_change_async): the
 * main thread computes the differences and goes on.  What is put or deleted while a change is
 * being published waits (touched entries, a stamp per apply) and is applied as one change when
 * that one is done; so are the resolver's answers.
 */
#define _GNU_SOURCE
#include "feed.h"
#include "backend.h"
#include "log.h"
#include "members.h"
#include "writer.h"
#include "resolver.h"
#include "text.h"
#include "worker.h"

#include <event2/event.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RESOLVE_RETRY_MS 10000
#define REFUSED_SHOWN 3 /* refused puts logged one by one per message */

#define ADD(x, v) atomic_fetch_add_explicit(&(x), (v), memory_order_relaxed)
#define SUB(x, v) atomic_fetch_sub_explicit(&(x), (v), memory_order_relaxed)
#define GET(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define SET(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)

enum resolve_state {
    RS_NONE,   /* nothing pending: in the ring, or to be set up when next wanted */
    RS_QUEUED, /* with the resolver thread */
    RS_FAILED  /* did not resolve: tried again at retry_at */
};

struct fentry {
    char *name;
    uint32_t weight; /* 0: deleted, freed once its change is handed over */
    uint32_t stamp;  /* the apply that touched it last */
    enum resolve_state resolve;
    int64_t retry_at;
    struct backend *be;  /* set up by the caller (lb_feed_put_backend), not in the ring yet */
    struct fentry *next; /* hash chain */
};

struct lb_feed {
    char label[32], cap_option[48];
    uint64_t max_points, points_per_weight;
    lb_feed_applied_fn *applied_cb;
    void *applied_arg;
    struct lb_resolver_client client;
    struct event *retry_ev, *resolved_ev;

    struct fentry **table;
    size_t table_cap, table_n; /* buckets (a power of two), entries */
    uint32_t stamp;            /* the touches since the last apply carry it */
    uint64_t total_points;     /* of every entry's weight */
    size_t refused;            /* puts refused since lb_feed_log_refused */
    struct fentry **touched;
    size_t ntouched, touched_cap;
    struct lb_lookup *answers; /* the resolver's, waiting for the change under way */

    /* What waits to be applied, and the change under way (for the stats once published). */
    bool pend, pend_full, publishing;
    uint64_t pend_rev;
    char pend_what[96];
    struct {
        bool full;
        uint64_t rev, members, points;
        char why[96];
    } applying;

    _Atomic bool st_applied;
    _Atomic uint64_t st_revision, st_members, st_points, st_refused, st_resolving, st_unresolved,
        st_resolves;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------------------------ */
/* the table                                                                                   */

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a, mixed */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return chring_mix64(h);
}

static struct fentry **slot(const struct lb_feed *f, const char *name)
{
    struct fentry **p = &f->table[name_hash(name) & (f->table_cap - 1)];
    while (*p && strcmp((*p)->name, name) != 0)
        p = &(*p)->next;
    return p;
}

static struct fentry *find(const struct lb_feed *f, const char *name)
{
    return f->table_cap ? *slot(f, name) : NULL;
}

static int grow(struct lb_feed *f)
{
    size_t nc = f->table_cap ? f->table_cap * 2 : 1024;
    struct fentry **nt = calloc(nc, sizeof *nt);
    if (!nt)
        return -1;
    for (size_t i = 0; i < f->table_cap; i++)
        for (struct fentry *e = f->table[i], *next; e; e = next) {
            next = e->next;
            size_t b = name_hash(e->name) & (nc - 1);
            e->next = nt[b];
            nt[b] = e;
        }
    free(f->table);
    f->table = nt;
    f->table_cap = nc;
    return 0;
}

/* The entry of name, created (weight 0, owning name) when it is new; NULL when out of memory
 * (name freed then). */
static struct fentry *find_or_add(struct lb_feed *f, char *name, bool *fresh)
{
    *fresh = false;
    struct fentry *e = find(f, name);
    if (e) {
        free(name);
        return e;
    }
    if (f->table_n >= f->table_cap && grow(f) < 0) {
        free(name);
        return NULL;
    }
    e = calloc(1, sizeof *e);
    if (!e) {
        free(name);
        return NULL;
    }
    e->name = name;
    struct fentry **p = slot(f, name);
    e->next = *p;
    *p = e;
    f->table_n++;
    *fresh = true;
    return e;
}

static void set_resolve(struct lb_feed *f, struct fentry *e, enum resolve_state rs)
{
    if (e->resolve == RS_FAILED && rs != RS_FAILED)
        SUB(f->st_unresolved, 1);
    else if (e->resolve != RS_FAILED && rs == RS_FAILED)
        ADD(f->st_unresolved, 1);
    e->resolve = rs;
    if (rs == RS_FAILED)
        e->retry_at = now_ms() + RESOLVE_RETRY_MS;
}

static void entry_delete(struct lb_feed *f, struct fentry *e)
{
    set_resolve(f, e, RS_NONE);
    struct fentry **p = slot(f, e->name);
    *p = e->next;
    f->table_n--;
    if (e->be)
        lb_backend_discard(e->be);
    free(e->name);
    free(e);
}

static bool entry_known(const char *name, void *ctx)
{
    return find(ctx, name) != NULL;
}

static int touch(struct lb_feed *f, struct fentry *e)
{
    if (e->stamp == f->stamp)
        return 0;
    if (f->ntouched == f->touched_cap) {
        size_t nc = f->touched_cap ? f->touched_cap * 2 : 64;
        struct fentry **nt = realloc(f->touched, nc * sizeof *nt);
        if (!nt)
            return -1;
        f->touched = nt;
        f->touched_cap = nc;
    }
    e->stamp = f->stamp;
    f->touched[f->ntouched++] = e;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* puts and deletes                                                                            */

int lb_feed_put(struct lb_feed *f, char *name, uint32_t weight)
{
    bool fresh;
    struct fentry *e = find_or_add(f, name, &fresh);
    if (!e)
        return -1;
    uint64_t was = (uint64_t)e->weight * f->points_per_weight,
             now = (uint64_t)weight * f->points_per_weight;
    if (f->total_points - was + now > f->max_points) {
        if (f->refused++ >= REFUSED_SHOWN)
            goto counted;
        char q[300];
        lb_text_quote(q, sizeof q, e->name, strlen(e->name));
        lb_log("%s: %s=%u refused: %s's members would have %llu points, above %s %llu", f->label, q,
               weight, f->label, (unsigned long long)(f->total_points - was + now), f->cap_option,
               (unsigned long long)f->max_points);
    counted:
        ADD(f->st_refused, 1);
        if (fresh)
            entry_delete(f, e);
        return 0;
    }
    if (touch(f, e) < 0)
        return -1;
    f->total_points = f->total_points - was + now;
    e->weight = weight;
    return 0;
}

int lb_feed_put_backend(struct lb_feed *f, char *name, uint32_t weight, struct backend *be)
{
    bool fresh;
    struct fentry *e = find_or_add(f, name, &fresh);
    if (!e) {
        if (be)
            lb_backend_discard(be);
        return -1;
    }
    if (touch(f, e) < 0) {
        if (fresh)
            entry_delete(f, e);
        if (be)
            lb_backend_discard(be);
        return -1;
    }
    f->total_points = f->total_points - (uint64_t)e->weight * f->points_per_weight +
                      (uint64_t)weight * f->points_per_weight;
    e->weight = weight;
    if (be) {
        if (e->be)
            lb_backend_discard(e->be);
        e->be = be;
    }
    return 0;
}

int lb_feed_del(struct lb_feed *f, const char *name)
{
    struct fentry *e = find(f, name);
    if (!e)
        return 0;
    if (touch(f, e) < 0)
        return -1;
    f->total_points -= (uint64_t)e->weight * f->points_per_weight;
    e->weight = 0;
    return 0;
}

void lb_feed_replace_begin(struct lb_feed *f)
{
    for (size_t i = 0; i < f->table_cap; i++)
        for (struct fentry *e = f->table[i]; e; e = e->next)
            e->weight = 0;
    f->total_points = 0;
}

int lb_feed_replace_end(struct lb_feed *f)
{
    for (size_t i = 0; i < f->table_cap; i++)
        for (struct fentry *e = f->table[i]; e; e = e->next)
            if (e->weight == 0 && touch(f, e) < 0)
                return -1;
    return 0;
}

void lb_feed_log_refused(struct lb_feed *f)
{
    if (f->refused > REFUSED_SHOWN)
        lb_log("%s: %zu more puts refused (%s)", f->label, f->refused - REFUSED_SHOWN,
               f->cap_option);
    f->refused = 0;
}

void lb_feed_drop(struct lb_feed *f)
{
    f->ntouched = 0;
    f->stamp++;
    f->pend = f->pend_full = false;
}

/* Every feed (two: etcd's, the members file's), so that the end of one's change lets another's
 * waiting change go (main thread). */
static struct lb_feed *feeds[4];

static void apply_now(struct lb_feed *f);

static void kick_others(struct lb_feed *self)
{
    for (size_t i = 0; i < sizeof feeds / sizeof feeds[0]; i++) {
        struct lb_feed *f = feeds[i];
        if (!f || f == self || f->publishing || lb_ring_busy())
            continue;
        if (f->pend)
            apply_now(f);
        else if (f->answers && f->resolved_ev)
            event_active(f->resolved_ev, 0, 0);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* resolving                                                                                   */

/* The retry of names that did not resolve, every RESOLVE_RETRY_MS while there are any. */
static void arm_retry(struct lb_feed *f)
{
    struct timeval tv = {RESOLVE_RETRY_MS / 1000, (RESOLVE_RETRY_MS % 1000) * 1000};
    if (f->retry_ev && !evtimer_pending(f->retry_ev, NULL))
        evtimer_add(f->retry_ev, &tv);
}

static void resolve_queue(struct lb_feed *f, struct fentry *e)
{
    if (lb_resolve(&f->client, e->name, 0) < 0) {
        set_resolve(f, e, RS_FAILED);
        lb_log("%s: cannot hand %s to the resolver thread", f->label, e->name);
        arm_retry(f);
        return;
    }
    set_resolve(f, e, RS_QUEUED);
    ADD(f->st_resolving, 1);
}

static void on_answers(struct lb_lookup *list, void *arg)
{
    struct lb_feed *f = arg;
    struct lb_lookup **t = &f->answers;
    while (*t)
        t = &(*t)->next;
    *t = list;
    if (f->resolved_ev)
        event_active(f->resolved_ev, 0, 0);
}

static void resolved_applied(int rc, int64_t cpu, void *arg)
{
    (void)cpu;
    struct lb_feed *f = arg;
    f->publishing = false;
    if (rc < 0)
        lb_log("%s: resolved names not applied", f->label);
    if (f->pend)
        lb_feed_apply(f, f->pend_what, f->pend_rev, f->pend_full);
    else if (f->answers && f->resolved_ev)
        event_active(f->resolved_ev, 0, 0);
    kick_others(f);
}

/* The resolver's answers (main thread): each name that is still wanted joins with its weight
 * now.  While a change is being published they wait for it. */
static void on_resolved(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct lb_feed *f = arg;
    if (f->publishing || lb_ring_busy())
        return; /* activated again once the change under way is published */
    struct lb_lookup *done = f->answers;
    f->answers = NULL;
    size_t n = 0;
    for (struct lb_lookup *r = done; r; r = r->next)
        n++;
    struct lb_change *ch = calloc(n + 1, sizeof *ch);
    size_t k = 0;
    bool failed = false;
    for (struct lb_lookup *r = done; r; r = r->next) {
        SUB(f->st_resolving, 1);
        ADD(f->st_resolves, 1);
        struct fentry *e = find(f, r->name);
        if (!e || e->weight == 0 || e->resolve != RS_QUEUED || !ch) {
            if (e && e->resolve == RS_QUEUED)
                set_resolve(f, e, RS_NONE);
            continue; /* r->be discarded with the list */
        }
        if (r->be) {
            set_resolve(f, e, RS_NONE);
            ch[k++] = (struct lb_change){e->name, e->weight, r->be};
            r->be = NULL;
            continue;
        }
        char q[300];
        lb_text_quote(q, sizeof q, r->err, strlen(r->err));
        lb_log("%s: %s; left out, tried again in %d s", f->label, q, RESOLVE_RETRY_MS / 1000);
        set_resolve(f, e, RS_FAILED);
        failed = true;
    }
    if (k) {
        char why[64];
        snprintf(why, sizeof why, "%s: names resolved", f->label);
        f->publishing = true;
        if (lb_ring_change_async(ch, k, NULL, NULL, why, resolved_applied, f) < 0) {
            f->publishing = false;
            lb_log("%s: resolved names not applied", f->label);
        }
    }
    free(ch);
    lb_lookups_free(done);
    if (failed)
        arm_retry(f);
}

/* Names that did not resolve are handed to the resolver thread again once their time came. */
static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct lb_feed *f = arg;
    int64_t now = now_ms();
    bool left = false;
    for (size_t i = 0; i < f->table_cap; i++)
        for (struct fentry *e = f->table[i]; e; e = e->next) {
            if (e->resolve != RS_FAILED)
                continue;
            if (e->retry_at <= now && e->weight > 0)
                resolve_queue(f, e);
            else
                left = true;
        }
    if (left)
        arm_retry(f);
}

/* ------------------------------------------------------------------------------------------ */
/* applying                                                                                    */

/* The touched entries' change was published (main thread; rc < 0: not applied). */
static void applied(int rc, int64_t publish_cpu, void *arg)
{
    struct lb_feed *f = arg;
    f->publishing = false;
    SET(f->st_revision, f->applying.rev);
    SET(f->st_members, f->applying.members);
    SET(f->st_points, f->applying.points);
    atomic_store_explicit(&f->st_applied, true, memory_order_release);
    if (f->applied_cb)
        f->applied_cb(rc, f->applying.full, publish_cpu, f->applied_arg);
    if (f->pend)
        apply_now(f);
    else if (f->answers && f->resolved_ev)
        event_active(f->resolved_ev, 0, 0); /* answers that came while the change was published */
    kick_others(f);
}

void lb_feed_apply(struct lb_feed *f, const char *why, uint64_t rev, bool full)
{
    f->pend = true;
    f->pend_full |= full;
    f->pend_rev = rev;
    if (why != f->pend_what)
        snprintf(f->pend_what, sizeof f->pend_what, "%s", why);
    if (!f->publishing && !lb_ring_busy())
        apply_now(f);
}

/* Deleted entries are freed once their change was handed over (names are copied). */
static void apply_now(struct lb_feed *f)
{
    bool full = f->pend_full;
    f->pend = f->pend_full = false;
    snprintf(f->applying.why, sizeof f->applying.why, "%s", f->pend_what);
    f->applying.full = full;
    f->applying.rev = f->pend_rev;
    f->applying.members = f->table_n;
    f->applying.points = f->total_points;
    for (size_t i = 0; i < f->ntouched; i++)
        f->applying.members -= f->touched[i]->weight == 0;
    struct lb_change *ch = calloc(f->ntouched + 1, sizeof *ch);
    size_t k = 0;
    if (!ch) {
        lb_log("%s: out of memory; not applied", f->applying.why);
        f->publishing = true;
        applied(-1, 0, f);
    } else {
        const chring_snap_t *s = chring_snap_enter(lb_ring);
        for (size_t i = 0; i < f->ntouched; i++) {
            struct fentry *e = f->touched[i];
            if (e->weight == 0 || chring_snap_find(s, e->name)) {
                ch[k++] = (struct lb_change){e->name, e->weight, NULL};
                if (e->be) { /* a member already: the caller's backend is not needed */
                    lb_backend_discard(e->be);
                    e->be = NULL;
                }
                continue;
            }
            if (e->be) { /* set up by the caller */
                ch[k++] = (struct lb_change){e->name, e->weight, e->be};
                e->be = NULL;
                continue;
            }
            if (e->resolve == RS_QUEUED)
                continue; /* joins when its answer comes back, with the weight it has then */
            if (e->resolve == RS_FAILED)
                continue; /* tried again by on_retry, never once per batch */
            if (!lb_name_is_numeric(e->name)) {
                resolve_queue(f, e);
                continue;
            }
            char err[256];
            struct backend *be = lb_backend_new(e->name, err, sizeof err);
            if (!be) {
                char q[300];
                lb_text_quote(q, sizeof q, err, strlen(err));
                lb_log("%s: %s; left out", f->label, q);
                set_resolve(f, e, RS_FAILED);
                arm_retry(f);
                continue;
            }
            ch[k++] = (struct lb_change){e->name, e->weight, be};
        }
        chring_snap_exit(lb_ring, s);
        f->publishing = true;
        if (lb_ring_change_async(ch, k, full ? entry_known : NULL, f, f->applying.why, applied, f) <
            0)
            applied(-1, 0, f);
    }
    free(ch);
    for (size_t i = 0; i < f->ntouched; i++)
        if (f->touched[i]->weight == 0)
            entry_delete(f, f->touched[i]);
    f->ntouched = 0;
    f->stamp++;
}

void lb_feed_revision(struct lb_feed *f, uint64_t rev)
{
    if (f->pend)
        f->pend_rev = rev; /* the revision the waiting change brings the set to */
    else if (f->publishing)
        f->applying.rev = rev;
    else
        SET(f->st_revision, rev);
}

uint64_t lb_feed_points(const struct lb_feed *f)
{
    return f->total_points;
}

bool lb_feed_busy(const struct lb_feed *f)
{
    return f->pend || f->publishing;
}

void lb_feed_stats(const struct lb_feed *f, struct lb_feed_stats *out)
{
    out->applied = atomic_load_explicit(&f->st_applied, memory_order_acquire);
    out->revision = GET(f->st_revision);
    out->members = GET(f->st_members);
    out->points = GET(f->st_points);
    out->refused = GET(f->st_refused);
    out->resolving = GET(f->st_resolving);
    out->unresolved = GET(f->st_unresolved);
    out->resolves = GET(f->st_resolves);
}

/* ------------------------------------------------------------------------------------------ */

struct lb_feed *lb_feed_new(struct event_base *base, const char *label, const char *cap_option,
                            uint64_t max_points, uint64_t points_per_weight,
                            lb_feed_applied_fn *applied_cb, void *arg)
{
    struct lb_feed *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    snprintf(f->label, sizeof f->label, "%s", label);
    snprintf(f->cap_option, sizeof f->cap_option, "%s", cap_option);
    f->max_points = max_points;
    f->points_per_weight = points_per_weight;
    f->applied_cb = applied_cb;
    f->applied_arg = arg;
    f->client = (struct lb_resolver_client){on_answers, f};
    f->stamp = 1;
    size_t slot_i = 0;
    while (slot_i < sizeof feeds / sizeof feeds[0] && feeds[slot_i])
        slot_i++;
    if ((base && lb_feed_attach(f, base) < 0) || grow(f) < 0 ||
        slot_i == sizeof feeds / sizeof feeds[0]) {
        lb_feed_free(f);
        return NULL;
    }
    feeds[slot_i] = f;
    return f;
}

int lb_feed_attach(struct lb_feed *f, struct event_base *base)
{
    if (f->retry_ev || f->resolved_ev)
        return 0;
    f->retry_ev = evtimer_new(base, on_retry, f);
    f->resolved_ev = event_new(base, -1, 0, on_resolved, f);
    if (!f->retry_ev || !f->resolved_ev)
        return -1;
    if (f->answers) /* answers that came before */
        event_active(f->resolved_ev, 0, 0);
    return 0;
}

void lb_feed_free(struct lb_feed *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < sizeof feeds / sizeof feeds[0]; i++)
        if (feeds[i] == f)
            feeds[i] = NULL;
    if (f->retry_ev)
        event_free(f->retry_ev);
    if (f->resolved_ev)
        event_free(f->resolved_ev);
    lb_lookups_free(f->answers);
    for (size_t i = 0; i < f->table_cap; i++)
        while (f->table[i]) {
            struct fentry *e = f->table[i];
            f->table[i] = e->next;
            if (e->be)
                lb_backend_discard(e->be);
            free(e->name);
            free(e);
        }
    free(f->table);
    free(f->touched);
    free(f);
}
