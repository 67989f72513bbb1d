/* chring-lb: the ring's writer side: the membership is --backend plus the members file, applied
 * as its differences with one chring_update at start and on every SIGHUP (or etcd's set and
 * changes, etcd.c); with --drain, members that leave stay until health.c removes them.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "membership.h"
#include "backend.h"
#include "config.h"
#include "health.h"
#include "lb.h"
#include "log.h"
#include "members.h"
#include "status.h"
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

static bool entry_wanted(const char *name, void *ctx)
{
    return lb_entries_find(ctx, name) != NULL;
}

/* Applies es with be[i] set up for entry i already (NULL: none yet; be NULL: none at all), each
 * owned by the call.  Main thread only (the only writer), so what the snapshot shows is still
 * the membership when lb_membership_change runs.  Names the ring does not hold and that have no
 * backend yet are set up here, on this thread; the rest is the differences. */
static int set_with(const lb_entries_t *es, struct backend **be, const char *what)
{
    char msg[512] = "";
    struct lb_change *ch = calloc(es->n + 1, sizeof *ch);
    int rc = 0;
    size_t k = 0;
    if (!ch) {
        lb_log("%s: out of memory; membership unchanged", what);
        rc = -1;
        goto out;
    }
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    for (; k < es->n; k++) {
        ch[k] = (struct lb_change){es->v[k].name, es->v[k].weight, be ? be[k] : NULL};
        if (be)
            be[k] = NULL;
        if (!ch[k].be && !chring_snap_find(s, es->v[k].name)) {
            ch[k].be = lb_backend_new(es->v[k].name, msg, sizeof msg);
            if (!ch[k].be) {
                log_quoted(msg, "membership unchanged");
                rc = -1;
                break;
            }
        }
    }
    chring_snap_exit(lb_ring, s);
    if (rc == 0)
        rc = lb_membership_change(ch, k, entry_wanted, (void *)es, what);
    else
        for (size_t i = 0; i < k; i++)
            if (ch[i].be)
                lb_backend_discard(ch[i].be);
out:
    for (size_t i = 0; be && i < es->n; i++)
        if (be[i])
            lb_backend_discard(be[i]);
    free(ch);
    return rc;
}

int lb_membership_set(const lb_entries_t *es, const char *what)
{
    return set_with(es, NULL, what);
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
/* SIGHUP: names that need DNS resolved by a thread of the reload's own                        */

/* A reload whose new names are not numeric addresses.  The main thread reads the file; the
 * thread resolves the names that need DNS (lb_backend_new only allocates, resolves and
 * registers the object under the backends' lock, so any thread may call it) and wakes the main
 * thread, which applies the whole file, or nothing if a name did not resolve.  Meanwhile the
 * main thread goes on (passive health, drains, the stats listener); a SIGHUP that arrives then
 * is remembered and the file read again once this reload is done. */
struct reload {
    lb_entries_t es;
    struct backend **be; /* [es.n]: entry i's backend, set up by the thread */
    bool *resolve;       /* [es.n]: entry i is the thread's to set up */
    size_t nresolve;
    int64_t read_ms, read_cpu, resolve_t0;
    bool failed;   /* the thread: a name did not resolve (err) */
    char err[512]; /* its reason */
};

struct wjob;
static struct wjob *writing; /* with the writer thread (main thread) */
static pthread_t writer_thread;
static struct event *written_ev;
static int finish(struct wjob *j);
static struct reload *pending; /* with the thread (main thread) */
static bool reload_again;      /* a SIGHUP came meanwhile */
static pthread_t reload_thread;
static struct event *reload_done_ev;
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
    free(r->resolve);
    free(r);
}

static void *reload_main(void *arg)
{
    struct reload *r = arg;
    for (size_t i = 0; i < r->es.n && !r->failed; i++)
        if (r->resolve[i]) {
            r->be[i] = lb_backend_new(r->es.v[i].name, r->err, sizeof r->err);
            r->failed = r->be[i] == NULL;
        }
    event_active(reload_done_ev, 0, 0); /* the event base is thread-safe (evthread_use_pthreads) */
    return NULL;
}

/* Applies r (or refuses it: a name did not resolve, or etcd took over meanwhile), counts it,
 * logs its timing line and frees it.  Main thread. */
static void reload_finish(struct reload *r)
{
    int64_t t = ms_of(CLOCK_MONOTONIC), c = ms_of(CLOCK_PROCESS_CPUTIME_ID);
    int rc = -1;
    if (r->failed)
        log_quoted(r->err, "membership unchanged");
    else if (from_etcd)
        lb_log("SIGHUP: the membership comes from etcd (--etcd) now; --members not applied");
    else
        rc = set_with(&r->es, r->be, "reloaded");
    char resolved[96] = "";
    if (r->nresolve)
        snprintf(resolved, sizeof resolved, ", %zu names resolved off the main thread in %lld ms",
                 r->nresolve, (long long)(t - r->resolve_t0));
    /* The process's CPU time: the workers' share of it is small while a reload runs, and it is
     * what the tests bound (wall clock on a shared machine says less). */
    lb_log("reload: %zu entries read in %lld ms (%lld ms of CPU), applied in %lld ms (%lld ms of "
           "CPU)%s%s",
           r->es.n, (long long)r->read_ms, (long long)r->read_cpu,
           (long long)(ms_of(CLOCK_MONOTONIC) - t),
           (long long)(ms_of(CLOCK_PROCESS_CPUTIME_ID) - c), resolved, rc < 0 ? "; failed" : "");
    if (rc == 0)
        ADD(lb_reloads, 1);
    else
        ADD(lb_reload_errors, 1);
    reload_free(r);
}

static void on_reload_done(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    struct reload *r = pending;
    if (!r)
        return;
    pthread_join(reload_thread, NULL);
    pending = NULL;
    SUB(lb_reload_resolving, r->nresolve);
    reload_finish(r);
    if (reload_again) {
        reload_again = false;
        lb_membership_reload();
    }
}

static void on_written(evutil_socket_t fd, short what, void *arg);

int lb_membership_start(struct event_base *base)
{
    reload_done_ev = event_new(base, -1, 0, on_reload_done, NULL);
    written_ev = event_new(base, -1, 0, on_written, NULL);
    return reload_done_ev && written_ev ? 0 : -1;
}

void lb_membership_stop(void)
{
    if (pending) { /* waits for the lookups under way (bounded by the resolver's timeouts) */
        pthread_join(reload_thread, NULL);
        SUB(lb_reload_resolving, pending->nresolve);
        reload_free(pending);
        pending = NULL;
    }
    if (reload_done_ev)
        event_free(reload_done_ev);
    reload_done_ev = NULL;
    if (writing) { /* a publish under way: waited for, finished without its caller */
        pthread_join(writer_thread, NULL);
        finish(writing);
        writing = NULL;
        atomic_store_explicit(&lb_ring_writing, false, memory_order_release);
    }
    if (written_ev)
        event_free(written_ev);
    written_ev = NULL;
}

static void reload_refused(const char *why)
{
    lb_log("SIGHUP: %s; membership unchanged", why);
    ADD(lb_reload_errors, 1);
}

void lb_membership_reload(void)
{
    if (pending) {
        reload_again = true;
        lb_log("SIGHUP: a reload is resolving names; the members file is read again after it");
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
    r->resolve = calloc(r->es.n + 1, sizeof *r->resolve);
    if (!r->be || !r->resolve) {
        reload_free(r);
        reload_refused("out of memory");
        return;
    }
    /* Only names the ring does not hold need a backend; numeric ones are set up by set_with,
     * here, at once. */
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    for (size_t i = 0; i < r->es.n; i++)
        if (!lb_name_is_numeric(r->es.v[i].name) && !chring_snap_find(s, r->es.v[i].name)) {
            r->resolve[i] = true;
            r->nresolve++;
        }
    chring_snap_exit(lb_ring, s);
    if (r->nresolve > 0 && reload_done_ev) {
        r->resolve_t0 = ms_of(CLOCK_MONOTONIC);
        if (pthread_create(&reload_thread, NULL, reload_main, r) == 0) {
            pending = r;
            ADD(lb_reload_resolving, r->nresolve);
            lb_log("SIGHUP: %zu new names to resolve, off the main thread", r->nresolve);
            return;
        }
        lb_log("SIGHUP: cannot start the reload's resolver thread; resolving here");
    }
    r->nresolve = 0; /* whatever needs a lookup is resolved by set_with, on this thread */
    reload_finish(r);
}

/* ------------------------------------------------------------------------------------------ */
/* the change: prepared on the main thread, published (chring_update) there or by the writer   */
/* thread, finished on the main thread                                                          */

/* One change under way.  Names are copies: the caller's may go (etcd frees a deleted entry)
 * while the writer thread publishes. */
struct wjob {
    chring_change_t *cc;
    size_t k;
    char **drain, **undrain; /* names drained, undrained once published */
    size_t nd, nu;
    struct backend **be; /* added members' backends: the ring's once published, else discarded */
    size_t nbe;
    size_t added, removed, set;
    bool known;
    char what[128];
    int rc;
    int64_t t0, cpu; /* when it was handed over; the writer's CPU time */
    void (*done)(int, int64_t, void *);
    void *arg;
};

_Atomic bool lb_ring_writing;

static void wjob_free(struct wjob *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->k; i++)
        free((char *)j->cc[i].name);
    for (size_t i = 0; i < j->nd; i++)
        free(j->drain[i]);
    for (size_t i = 0; i < j->nu; i++)
        free(j->undrain[i]);
    for (size_t i = 0; i < j->nbe; i++)
        if (j->be[i])
            lb_backend_discard(j->be[i]);
    free(j->cc);
    free(j->drain);
    free(j->undrain);
    free(j->be);
    free(j);
}

/* The change of ch against the current snapshot (main thread, nothing under way), as a job whose
 * names are copies.  Backends of ch not kept are discarded here.  NULL: out of memory (every
 * backend discarded, logged). */
static struct wjob *prepare(struct lb_change *ch, size_t n, bool (*known)(const char *, void *),
                            void *ctx, const char *what)
{
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    size_t nm = known ? chring_snap_len(s) : 0;
    struct wjob *j = calloc(1, sizeof *j);
    if (j) {
        j->cc = calloc(n + nm + 1, sizeof *j->cc);
        j->drain = calloc(n + nm + 1, sizeof *j->drain);
        j->undrain = calloc(n + 1, sizeof *j->undrain);
        j->be = calloc(n + 1, sizeof *j->be);
    }
    bool oom = !j || !j->cc || !j->drain || !j->undrain || !j->be;
    for (size_t i = 0; i < n; i++) {
        struct backend *be = ch[i].be;
        ch[i].be = NULL;
        if (oom) {
            if (be)
                lb_backend_discard(be);
            continue;
        }
        const chring_member_t *m = chring_snap_find(s, ch[i].name);
        char *name = strdup(ch[i].name);
        oom = !name;
        if (ch[i].weight == 0) {
            if (!m || oom) {
                free(name);
            } else if (lb_cfg.drain_ms > 0) {
                j->drain[j->nd++] = name;
            } else {
                j->cc[j->k++] = (chring_change_t){name, 0, NULL};
                j->removed++;
            }
        } else if (m && !oom) {
            /* the same weight is no change: the batch holds only the differences */
            if (chring_snap_weight(s, m) != ch[i].weight) {
                j->set++;
                j->cc[j->k++] = (chring_change_t){name, ch[i].weight, chring_member_udata(m)};
                name = strdup(name);
                oom = !name;
            }
            if (name)
                j->undrain[j->nu++] = name;
        } else if (be && !oom) {
            j->cc[j->k++] = (chring_change_t){name, ch[i].weight, be};
            j->be[j->nbe++] = be;
            be = NULL;
            j->added++;
        } else {
            free(name);
        }
        if (be)
            lb_backend_discard(be);
    }
    for (size_t i = 0; i < nm && !oom; i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        if (known(chring_member_name(m), ctx))
            continue;
        char *name = strdup(chring_member_name(m));
        oom = !name;
        if (oom) {
        } else if (lb_cfg.drain_ms > 0) {
            j->drain[j->nd++] = name;
        } else {
            j->cc[j->k++] = (chring_change_t){name, 0, NULL};
            j->removed++;
        }
    }
    chring_snap_exit(lb_ring, s);
    if (oom) {
        wjob_free(j);
        lb_log("%s: out of memory; membership unchanged", what);
        return NULL;
    }
    j->known = known != NULL;
    snprintf(j->what, sizeof j->what, "%s", what);
    return j;
}

static int64_t cpu_now(void)
{
    return ms_of(CLOCK_THREAD_CPUTIME_ID);
}

/* The publish (any thread): one chring_update. */
static void publish(struct wjob *j)
{
    int64_t c = cpu_now();
    j->rc = chring_update(lb_ring, j->cc, j->k);
    j->cpu = cpu_now() - c;
    if (j->rc == 0)
        j->nbe = 0; /* the ring's now */
}

/* After the publish (main thread): drains, the log line; the job freed.  Returns 0 / -1. */
static int finish(struct wjob *j)
{
    int rc = j->rc;
    if (rc < 0) {
        lb_log("%s: chring_update: %s; membership unchanged", j->what, chring_strerror(rc));
    } else {
        if (j->k > 0)
            lb_stats_kick(); /* a large ring's digest, off this thread */
        const chring_snap_t *s = chring_snap_enter(lb_ring);
        for (size_t i = 0; i < j->nd; i++) {
            const chring_member_t *m = chring_snap_find(s, j->drain[i]);
            if (m)
                lb_health_drain(s, m);
        }
        for (size_t i = 0; i < j->nu; i++) {
            const chring_member_t *m = chring_snap_find(s, j->undrain[i]);
            if (m)
                lb_health_undrain(m);
        }
        chring_snap_exit(lb_ring, s);
        if (j->added + j->removed + j->set + j->nd > 0 || j->known) {
            chring_stats_t st;
            chring_stats(lb_ring, &st);
            lb_log("%s: %zu added, %zu removed, %zu weights set, %zu draining; %llu members, "
                   "ring version %llu",
                   j->what, j->added, j->removed, j->set, j->nd, (unsigned long long)st.members,
                   (unsigned long long)st.version);
        }
    }
    wjob_free(j);
    return rc < 0 ? -1 : 0;
}

/* Main thread only, like lb_membership_set: a member found in the snapshot is still a member
 * when chring_update runs (nothing else publishes while a change is under way). */
int lb_membership_change(struct lb_change *ch, size_t n, bool (*known)(const char *, void *),
                         void *ctx, const char *what)
{
    if (writing) {
        for (size_t i = 0; i < n; i++)
            if (ch[i].be)
                lb_backend_discard(ch[i].be);
        lb_log("%s: a change is being published; membership unchanged", what);
        return -1;
    }
    struct wjob *j = prepare(ch, n, known, ctx, what);
    if (!j)
        return -1;
    publish(j);
    return finish(j);
}

static void *writer_main(void *arg)
{
    publish(arg);
    event_active(written_ev, 0, 0); /* the event base is thread-safe (evthread_use_pthreads) */
    return NULL;
}

static void on_written(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    struct wjob *j = writing;
    if (!j)
        return;
    pthread_join(writer_thread, NULL);
    writing = NULL;
    atomic_store_explicit(&lb_ring_writing, false, memory_order_release);
    void (*done)(int, int64_t, void *) = j->done;
    void *darg = j->arg;
    int64_t ms = ms_of(CLOCK_MONOTONIC) - j->t0, cpu = j->cpu;
    size_t k = j->k;
    int rc = finish(j);
    if (ms >= 100)
        lb_log("ring: a change of %zu members published in %lld ms off the main thread (%lld ms "
               "of CPU)",
               k, (long long)ms, (long long)cpu);
    done(rc, cpu, darg);
}

bool lb_membership_busy(void)
{
    return writing != NULL;
}

int lb_membership_change_async(struct lb_change *ch, size_t n,
                               bool (*known)(const char *, void *), void *ctx, const char *what,
                               void (*done)(int, int64_t, void *), void *arg)
{
    if (!done || !written_ev) {
        int64_t c = cpu_now();
        int rc = lb_membership_change(ch, n, known, ctx, what);
        if (done)
            done(rc, cpu_now() - c, arg);
        return 0;
    }
    if (writing) {
        for (size_t i = 0; i < n; i++)
            if (ch[i].be)
                lb_backend_discard(ch[i].be);
        return -1;
    }
    struct wjob *j = prepare(ch, n, known, ctx, what);
    if (!j)
        return -1;
    j->done = done;
    j->arg = arg;
    j->t0 = ms_of(CLOCK_MONOTONIC);
    writing = j;
    atomic_store_explicit(&lb_ring_writing, true, memory_order_release);
    if (pthread_create(&writer_thread, NULL, writer_main, j) != 0) {
        writing = NULL;
        atomic_store_explicit(&lb_ring_writing, false, memory_order_release);
        publish(j); /* here, then */
        int64_t cpu = j->cpu;
        done(finish(j), cpu, arg);
    }
    return 0;
}
