/* chring-lb: the members file's feed (docs/lb.md, "How a request is routed", Membership): the
 * membership is --backend plus the members file, the second feed on feed.c's set (the etcd feed
 * is the first): at start and on every SIGHUP the file replaces the set's entries, and the set's
 * differences with the ring are one change (writer.c: the writer thread publishes it).  Names
 * that need DNS are resolved by the resolver thread (resolver.c) before a reload is applied,
 * whole or not at all.  Once etcd has given a membership (lb_membership_from_etcd), a SIGHUP
 * applies nothing.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "membership.h"
#include "backend.h"
#include "config.h"
#include "lb.h"
#include "log.h"
#include "feed.h"
#include "members.h"
#include "resolver.h"
#include "text.h"
#include "worker.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Atomic uint64_t lb_reloads, lb_reload_errors;

/* Logs msg (which quotes a file's bytes or a name) quoted, then what follows. */
static void log_quoted(const char *msg, const char *then)
{
    char q[700];
    lb_text_quote(q, sizeof q, msg, strlen(msg));
    lb_log("%s; %s", q, then);
}

/* Reads --backend plus the members file into es.  Returns 0, or -1 (logged, es freed). */
static int read_entries(lb_entries_t *es)
{
    char msg[512] = "";
    const char *err = NULL;
    for (size_t i = 0; i < lb_cfg.static_entries.n; i++) {
        char tok[300];
        snprintf(tok, sizeof tok, "%s=%u", lb_cfg.static_entries.v[i].name,
                 lb_cfg.static_entries.v[i].weight);
        if (lb_entries_put(es, tok, &err) < 0) {
            lb_log("%s", err);
            lb_entries_free(es);
            return -1;
        }
    }
    if (lb_cfg.members_file && lb_entries_read_file(es, lb_cfg.members_file, msg, sizeof msg) < 0) {
        log_quoted(msg, "membership unchanged");
        lb_entries_free(es);
        return -1;
    }
    /* The points cap (docs/lb.md, "Limits"), as etcd's --etcd-max-points: a file cannot make
     * the ring take more memory than the operator allowed. */
    uint64_t points = 0;
    for (size_t i = 0; i < es->n && points <= lb_cfg.members_max_points; i++)
        points += (uint64_t)es->v[i].weight * lb_cfg.vnodes;
    if (points > lb_cfg.members_max_points) {
        lb_log("--backend plus --members: more than %llu points (--members-max-points); "
               "membership unchanged",
               (unsigned long long)lb_cfg.members_max_points);
        lb_entries_free(es);
        return -1;
    }
    return 0;
}

/* The members file's set (--backend plus --members): the second feed on feed.c's API.  A load or
 * a reload is a replace of its entries: the puts and deletes against the set, applied as the
 * ring's differences (published here at the start, by the writer thread once serving). */
static struct lb_feed *file_feed;
static int file_rc;                    /* the last change's, for a load (published at once) */
struct reload;
static struct reload *applying_reload; /* the reload whose change is being published */
static void reload_applied(int rc);

static void file_applied(int rc, bool full, int64_t cpu, void *arg)
{
    (void)full;
    (void)cpu;
    (void)arg;
    file_rc = rc;
    if (applying_reload)
        reload_applied(rc);
}

/* Replaces the file feed's entries by es, be[i] the backend set up for entry i (NULL: none; be
 * NULL: none at all), each owned by the call, and applies them (what: the log line's start).
 * Returns 0, or -1 with the membership unchanged (logged). */
static int apply_file(const lb_entries_t *es, struct backend **be, const char *what)
{
    if (!file_feed)
        file_feed = lb_feed_new(NULL, "members", "--members-max-points", UINT64_MAX, 1,
                                file_applied, NULL);
    bool oom = !file_feed;
    if (!oom)
        lb_feed_replace_begin(file_feed);
    for (size_t i = 0; i < es->n; i++) {
        struct backend *b = be ? be[i] : NULL;
        if (be)
            be[i] = NULL;
        char *name = oom ? NULL : strdup(es->v[i].name);
        if (!name) {
            oom = true;
            if (b)
                lb_backend_discard(b);
            continue;
        }
        oom = lb_feed_put_backend(file_feed, name, es->v[i].weight, b) < 0;
    }
    if (!oom)
        oom = lb_feed_replace_end(file_feed) < 0;
    if (oom) {
        if (file_feed)
            lb_feed_drop(file_feed);
        lb_log("%s: out of memory; membership unchanged", what);
        return -1;
    }
    file_rc = 0;
    lb_feed_apply(file_feed, what, 0, true); /* file_applied says how it went */
    return 0;
}

/* Sets up, on this thread, a backend for each entry the ring does not hold (be[i]).  Returns 0,
 * or -1 (logged, every backend discarded) when one cannot be set up. */
static int backends_here(const lb_entries_t *es, struct backend **be)
{
    char msg[512] = "";
    int rc = 0;
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    for (size_t i = 0; i < es->n && rc == 0; i++)
        if (!be[i] && !chring_snap_find(s, es->v[i].name)) {
            be[i] = lb_backend_new(es->v[i].name, msg, sizeof msg);
            if (!be[i]) {
                log_quoted(msg, "membership unchanged");
                rc = -1;
            }
        }
    chring_snap_exit(lb_ring, s);
    if (rc < 0)
        for (size_t i = 0; i < es->n; i++)
            if (be[i]) {
                lb_backend_discard(be[i]);
                be[i] = NULL;
            }
    return rc;
}

int lb_membership_set(const lb_entries_t *es, const char *what)
{
    struct backend **be = calloc(es->n + 1, sizeof *be);
    if (!be) {
        lb_log("%s: out of memory; membership unchanged", what);
        return -1;
    }
    int rc = backends_here(es, be);
    if (rc == 0)
        rc = apply_file(es, be, what); /* before lb_writer_start: published here */
    free(be);
    return rc < 0 ? rc : file_rc;
}

static int64_t ms_of(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The start: names resolved on this thread, before anything is served. */
int lb_membership_load(void)
{
    int64_t t0 = ms_of(CLOCK_MONOTONIC), c0 = ms_of(CLOCK_PROCESS_CPUTIME_ID);
    lb_entries_t es = {0};
    if (read_entries(&es) < 0)
        return -1;
    int64_t t1 = ms_of(CLOCK_MONOTONIC), c1 = ms_of(CLOCK_PROCESS_CPUTIME_ID);
    int rc = lb_membership_set(&es, "loaded");
    lb_log("load: %zu entries read in %lld ms (%lld ms of CPU), applied in %lld ms (%lld ms of "
           "CPU)%s",
           es.n, (long long)(t1 - t0), (long long)(c1 - c0),
           (long long)(ms_of(CLOCK_MONOTONIC) - t1),
           (long long)(ms_of(CLOCK_PROCESS_CPUTIME_ID) - c1), rc < 0 ? "; failed" : "");
    lb_entries_free(&es);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* SIGHUP: names that need DNS resolved by the resolver thread (resolver.c)                    */

/* A reload whose new names are not numeric addresses.  The main thread reads the file and hands
 * those names to the resolver thread (the one the etcd feed uses too), whose answers come back
 * on the main thread; once the last one is in, the whole file is applied, or nothing if a name
 * did not resolve.  Meanwhile the main thread goes on (passive health, drains, the stats
 * listener); a SIGHUP that arrives then is remembered and the file read again once this reload
 * is done. */
struct reload {
    lb_entries_t es;
    struct backend **be; /* [es.n]: entry i's backend */
    size_t nresolve, waiting;
    int64_t read_ms, read_cpu, resolve_t0;
    int64_t apply_t0, apply_c0, resolved_ms; /* when the apply began (wall, process CPU) */
    bool failed;   /* a name did not resolve (err) */
    char err[512]; /* its reason */
};

static struct reload *pending; /* names with the resolver (main thread) */
static bool reload_again;      /* a SIGHUP came meanwhile */
static bool started;           /* lb_membership_start ran: the resolver answers on the loop */
/* Set once by the etcd feed (lb_membership_from_etcd): --members is not applied any more. */
static _Atomic bool from_etcd;

void lb_membership_from_etcd(void)
{
    atomic_store_explicit(&from_etcd, true, memory_order_release);
}
_Atomic uint64_t lb_reload_resolving;

static void reload_free(struct reload *r)
{
    for (size_t i = 0; r->be && i < r->es.n; i++)
        if (r->be[i])
            lb_backend_discard(r->be[i]);
    lb_entries_free(&r->es);
    free(r->be);
    free(r);
}

/* The reload's line and count, once its change is published or refused (rc); r freed.  A SIGHUP
 * that came meanwhile reads the file again. */
static void reload_done(struct reload *r, int rc)
{
    char resolved[96] = "";
    if (r->nresolve)
        snprintf(resolved, sizeof resolved, ", %zu names resolved off the main thread in %lld ms",
                 r->nresolve, (long long)r->resolved_ms);
    /* The process's CPU time: the workers' share of it is small while a reload runs, and it is
     * what the tests bound (wall clock on a shared machine says less). */
    lb_log("reload: %zu entries read in %lld ms (%lld ms of CPU), applied in %lld ms (%lld ms of "
           "CPU)%s%s",
           r->es.n, (long long)r->read_ms, (long long)r->read_cpu,
           (long long)(ms_of(CLOCK_MONOTONIC) - r->apply_t0),
           (long long)(ms_of(CLOCK_PROCESS_CPUTIME_ID) - r->apply_c0), resolved,
           rc < 0 ? "; failed" : "");
    if (rc == 0)
        ADD(lb_reloads, 1);
    else
        ADD(lb_reload_errors, 1);
    reload_free(r);
    if (reload_again) {
        reload_again = false;
        lb_membership_reload();
    }
}

static void reload_applied(int rc)
{
    struct reload *r = applying_reload;
    applying_reload = NULL;
    reload_done(r, rc);
}

/* Applies r (or refuses it: a name did not resolve, or etcd took over meanwhile); its change is
 * published by the writer thread, and reload_done counts it then.  Main thread. */
static void reload_finish(struct reload *r)
{
    r->apply_t0 = ms_of(CLOCK_MONOTONIC);
    r->apply_c0 = ms_of(CLOCK_PROCESS_CPUTIME_ID);
    if (r->nresolve)
        r->resolved_ms = r->apply_t0 - r->resolve_t0;
    if (r->failed) {
        log_quoted(r->err, "membership unchanged");
    } else if (from_etcd) {
        lb_log("SIGHUP: the membership comes from etcd (--etcd) now; --members not applied");
    } else if (backends_here(&r->es, r->be) == 0) { /* numeric names, and any the ring lost */
        applying_reload = r;
        if (apply_file(&r->es, r->be, "reloaded") == 0)
            return; /* reload_applied, now or once published */
        applying_reload = NULL;
    }
    reload_done(r, -1);
}

/* The resolver's answers for the reload under way (main thread). */
static void on_reload_answers(struct lb_lookup *list, void *arg)
{
    (void)arg;
    struct reload *r = pending;
    for (struct lb_lookup *l = list; l && r; l = l->next) {
        if (l->tag < r->es.n) {
            r->be[l->tag] = l->be;
            l->be = NULL;
            if (!r->be[l->tag] && !r->failed) {
                r->failed = true;
                snprintf(r->err, sizeof r->err, "%s", l->err);
            }
        }
        r->waiting--;
    }
    lb_lookups_free(list);
    if (!r || r->waiting > 0)
        return;
    pending = NULL;
    SUB(lb_reload_resolving, r->nresolve);
    reload_finish(r);
}

static const struct lb_resolver_client reload_client = {on_reload_answers, NULL};

int lb_membership_start(struct event_base *base)
{
    /* the file's set gets its events: a name it holds that needs DNS again (it left the ring
     * between a reload's lookups and its apply) is resolved like etcd's */
    if (file_feed && lb_feed_attach(file_feed, base) < 0)
        return -1;
    started = true;
    return 0;
}

void lb_membership_stop(void)
{
    if (pending) { /* its lookups are the resolver's to drop (lb_resolver_stop) */
        SUB(lb_reload_resolving, pending->nresolve);
        reload_free(pending);
        pending = NULL;
    }
    if (applying_reload) { /* published or not, lb_writer_stop told nobody */
        reload_free(applying_reload);
        applying_reload = NULL;
    }
    started = false;
    lb_feed_free(file_feed);
    file_feed = NULL;
}

static void reload_refused(const char *why)
{
    lb_log("SIGHUP: %s; membership unchanged", why);
    ADD(lb_reload_errors, 1);
}

void lb_membership_reload(void)
{
    if (pending || applying_reload) {
        reload_again = true;
        lb_log("SIGHUP: a reload is %s; the members file is read again after it",
               pending ? "resolving names" : "being published");
        return;
    }
    if (from_etcd) {
        lb_log("SIGHUP: the membership comes from etcd (--etcd); --members not applied");
        ADD(lb_reload_errors, 1);
        return;
    }
    struct reload *r = calloc(1, sizeof *r);
    if (!r) {
        reload_refused("out of memory");
        return;
    }
    int64_t t0 = ms_of(CLOCK_MONOTONIC), c0 = ms_of(CLOCK_PROCESS_CPUTIME_ID);
    if (read_entries(&r->es) < 0) { /* logged */
        free(r);
        ADD(lb_reload_errors, 1);
        return;
    }
    r->read_ms = ms_of(CLOCK_MONOTONIC) - t0;
    r->read_cpu = ms_of(CLOCK_PROCESS_CPUTIME_ID) - c0;
    r->be = calloc(r->es.n + 1, sizeof *r->be);
    if (!r->be) {
        reload_free(r);
        reload_refused("out of memory");
        return;
    }
    /* Only names the ring does not hold need a backend; numeric ones are set up here, at once,
     * by reload_finish. */
    bool *need = calloc(r->es.n + 1, sizeof *need);
    if (!need) {
        reload_free(r);
        reload_refused("out of memory");
        return;
    }
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    for (size_t i = 0; i < r->es.n; i++)
        if (!lb_name_is_numeric(r->es.v[i].name) && !chring_snap_find(s, r->es.v[i].name)) {
            need[i] = true;
            r->nresolve++;
        }
    chring_snap_exit(lb_ring, s);
    if (r->nresolve > 0 && started) {
        r->resolve_t0 = ms_of(CLOCK_MONOTONIC);
        size_t queued = 0;
        for (size_t i = 0; i < r->es.n; i++)
            if (need[i] && lb_resolve(&reload_client, r->es.v[i].name, i) == 0)
                queued++;
            else if (need[i])
                break;
        free(need);
        if (queued < r->nresolve) { /* refused once the queued ones are answered */
            r->failed = true;
            snprintf(r->err, sizeof r->err, "SIGHUP: cannot hand the names to the resolver");
        }
        if (queued > 0) {
            r->waiting = queued;
            pending = r;
            ADD(lb_reload_resolving, r->nresolve);
            lb_log("SIGHUP: %zu new names to resolve, off the main thread", r->nresolve);
            return;
        }
        reload_finish(r);
        return;
    }
    free(need);
    r->nresolve = 0; /* whatever needs a lookup is resolved by reload_finish, on this thread */
    reload_finish(r);
}

