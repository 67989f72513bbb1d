/* chring-lb: the membership from etcd (--etcd, --etcd-prefix), over etcd's v3 JSON gateway.
 *
 * SPDX-License-Identifier: MIT
 *
 * One key per backend: <prefix>HOST:PORT, its value the weight (empty: 1).  The feed runs on the
 * main thread's event base with libevent's HTTP client, so it never blocks a worker; its answers
 * are read by etcd_read.c (libjansson, base64):
 *
 *   range    POST /v3/kv/range {key: prefix, range_end: prefix + 1}: every key and the store's
 *            revision R, read (JSON, base64) on a thread of its own.  The feed's set becomes
 *            these keys; the ring is brought to it with one chring_update holding only the
 *            differences (members that are not etcd's, the starting list among them, leave).
 *   watch    POST /v3/watch {create_request: {key, range_end, start_revision: R + 1}}: a stream
 *            of JSON objects, one per line; each batch of events is applied as the changes it
 *            holds, one chring_update per batch (several events of one key: the last counts).
 *            A message above WATCH_INLINE (a prefix deleted at once) is read on a thread of its
 *            own like a range, the messages behind it waiting, in order and bounded.
 *
 * The set is a hash table by name, so a batch costs O(its events), never O(members).  A new
 * name with a numeric address is set up at once; any other name is resolved by the resolver
 * thread (getaddrinfo may take seconds) and joins the ring when its answer comes back; a name
 * that does not resolve is tried again every RESOLVE_RETRY_MS, in the background, never again
 * for each batch.
 *
 * Bounds (docs/lb.md, "The etcd feed").  A range answer or one watch message above
 * --etcd-max-answer bytes, or whose JSON would need more than 4 times that (at least 64 MiB) of
 * jansson's memory, drops the connection (logged) and the feed tries again after a backoff.  A
 * range answer must arrive whole within --etcd-range-timeout, however slowly it drips.  A put
 * that would take etcd's members above --etcd-max-points points in all (weights x points per
 * unit of weight) is refused and logged; the member keeps its weight.  Keys and values are
 * quoted in the log (text.h: control bytes, escapes and newlines as \xNN).
 *
 * Failures.  etcd unreachable at start: the starting list (--backend, --members) is served and
 * the range is tried again with a backoff (100 ms doubling to 2 s).  A connection lost (the
 * stream ended, an error, WATCH_IDLE_S without a byte): the last membership stays, then range
 * and watch again after the backoff.  A watch cancelled by etcd (its start revision was
 * compacted): range again after the backoff too, so an etcd that cancels every watch costs at
 * most one range every 2 s.  The backoff returns to 100 ms once a watch has lasted
 * ETCD_STABLE_MS.  Members that join or leave through etcd slow-start and drain like any others
 * (health.c).
 *
 * Every connection is freed from the step event, never from inside its own callbacks.
 */
#define _GNU_SOURCE
#include "etcd.h"
#include "backend.h"
#include "config.h"
#include "etcd_read.h"
#include "lb.h"
#include "log.h"
#include "members.h"
#include "membership.h"
#include "text.h"
#include "worker.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ETCD_BACKOFF_MIN_MS 100
#define ETCD_BACKOFF_MAX_MS 2000
#define ETCD_STABLE_MS 5000
#define ETCD_WATCH_IDLE_S 60 /* an idle watch is renewed (range, watch) this often */
#define ETCD_MAX_HEADERS 65536
#define RESOLVE_RETRY_MS 10000
#define WATCH_INLINE ((size_t)256 << 10) /* a larger watch message is read off the main thread */

enum etcd_state {
    ETCD_OFF,
    ETCD_CONNECTING, /* a range is in flight */
    ETCD_WATCHING,   /* the watch was created */
    ETCD_RETRYING    /* waiting out a backoff */
};
static const char *const state_names[] = {"off", "connecting", "watching", "retrying"};

enum etcd_action {
    ACT_RANGE,
    ACT_WATCH
};

static struct event_base *base;
static struct event *step_ev, *close_ev, *deadline_ev, *resolved_ev, *retry_ev;
static void on_parsed(evutil_socket_t fd, short what, void *arg);
static uint64_t feed_gen; /* one more at each failure: results read before it are dropped */
struct range_job;
static void watch_parsed(struct range_job *job);
static struct evhttp_connection *conn;
static enum etcd_action next_action;
static bool watch_dead; /* the current request is being replaced: ignore what it still sends */
static int backoff_ms = ETCD_BACKOFF_MIN_MS;
static int64_t watch_created_ms; /* when the current watch was created (0: not yet) */
static char host[256], hosthdr[300];
static uint16_t port;
static char *key_b64, *end_b64;
static struct evbuffer *rbuf, *wbuf; /* the range answer; the watch's partial message */
static uint64_t watch_from;          /* the watch's start revision */
static uint64_t points_per_weight;
static int64_t range_started_ms; /* for the log: how long a range took */

/* For the stats (any thread). */
static _Atomic int st_state;
static _Atomic bool st_active;
static _Atomic uint64_t st_revision, st_members, st_ranges, st_batches, st_events, st_bad,
    st_errors, st_compacted, st_resolving, st_unresolved, st_resolves, st_points, st_refused;

bool lb_etcd_active(void)
{
    return atomic_load_explicit(&st_active, memory_order_acquire);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* This thread's CPU time, for the log: what a range costs whatever else the machine runs. */
static int64_t cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The retry of names that did not resolve, every RESOLVE_RETRY_MS while there are any. */
static void arm_retry(void)
{
    struct timeval tv = {RESOLVE_RETRY_MS / 1000, (RESOLVE_RETRY_MS % 1000) * 1000};
    if (retry_ev && !evtimer_pending(retry_ev, NULL))
        evtimer_add(retry_ev, &tv);
}

/* ------------------------------------------------------------------------------------------ */
/* the set: etcd's members by name (main thread)                                               */

enum resolve_state {
    RS_NONE,   /* nothing pending: in the ring, or to be set up when next wanted */
    RS_QUEUED, /* with the resolver thread */
    RS_FAILED  /* did not resolve: tried again at retry_at */
};

struct fentry {
    char *name;
    uint32_t weight; /* 0: deleted in the batch being applied (freed after it) */
    uint32_t stamp;  /* the batch that touched it last */
    enum resolve_state resolve;
    int64_t retry_at;
    struct fentry *next; /* hash chain */
};

static struct fentry **table;
static size_t table_cap, table_n; /* buckets (a power of two), entries */
static uint32_t stamp = 1; /* the touches since the last apply carry it */
static uint64_t total_points; /* of every entry's weight */
static size_t refused;        /* puts refused in the message being applied */
static struct fentry **touched;
static size_t ntouched, touched_cap;

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a, mixed */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return chring_mix64(h);
}

static struct fentry **slot(const char *name)
{
    struct fentry **p = &table[name_hash(name) & (table_cap - 1)];
    while (*p && strcmp((*p)->name, name) != 0)
        p = &(*p)->next;
    return p;
}

static struct fentry *find(const char *name)
{
    return table_cap ? *slot(name) : NULL;
}

static int grow(void)
{
    size_t nc = table_cap ? table_cap * 2 : 1024;
    struct fentry **nt = calloc(nc, sizeof *nt);
    if (!nt)
        return -1;
    for (size_t i = 0; i < table_cap; i++)
        for (struct fentry *e = table[i], *next; e; e = next) {
            next = e->next;
            size_t b = name_hash(e->name) & (nc - 1);
            e->next = nt[b];
            nt[b] = e;
        }
    free(table);
    table = nt;
    table_cap = nc;
    return 0;
}

/* The entry of name, created (weight 0, owning name) when it is new; NULL when out of memory
 * (name freed then). */
static struct fentry *find_or_add(char *name, bool *fresh)
{
    *fresh = false;
    struct fentry *e = find(name);
    if (e) {
        free(name);
        return e;
    }
    if (table_n >= table_cap && grow() < 0) {
        free(name);
        return NULL;
    }
    e = calloc(1, sizeof *e);
    if (!e) {
        free(name);
        return NULL;
    }
    e->name = name;
    struct fentry **p = slot(name);
    e->next = *p;
    *p = e;
    table_n++;
    *fresh = true;
    return e;
}

static void set_resolve(struct fentry *e, enum resolve_state rs)
{
    if (e->resolve == RS_FAILED && rs != RS_FAILED)
        SUB(st_unresolved, 1);
    else if (e->resolve != RS_FAILED && rs == RS_FAILED)
        ADD(st_unresolved, 1);
    e->resolve = rs;
    if (rs == RS_FAILED)
        e->retry_at = now_ms() + RESOLVE_RETRY_MS;
}

static void entry_delete(struct fentry *e)
{
    set_resolve(e, RS_NONE);
    struct fentry **p = slot(e->name);
    *p = e->next;
    table_n--;
    free(e->name);
    free(e);
}

static bool entry_known(const char *name, void *ctx)
{
    (void)ctx;
    return find(name) != NULL;
}

static int touch(struct fentry *e)
{
    if (e->stamp == stamp)
        return 0;
    if (ntouched == touched_cap) {
        size_t nc = touched_cap ? touched_cap * 2 : 64;
        struct fentry **nt = realloc(touched, nc * sizeof *nt);
        if (!nt)
            return -1;
        touched = nt;
        touched_cap = nc;
    }
    e->stamp = stamp;
    touched[ntouched++] = e;
    return 0;
}

static void log_refused(void)
{
    if (refused > LB_ETCD_BAD_SHOWN)
        lb_log("etcd: %zu more puts refused (--etcd-max-points)", refused - LB_ETCD_BAD_SHOWN);
    refused = 0;
}

static void log_bad(const struct lb_etcd_msg *m)
{
    for (size_t i = 0; i < m->bad && i < LB_ETCD_BAD_SHOWN; i++)
        lb_log("etcd: %s; skipped", m->bad_why[i]);
    if (m->bad > LB_ETCD_BAD_SHOWN)
        lb_log("etcd: %zu more bad entries skipped", m->bad - LB_ETCD_BAD_SHOWN);
    ADD(st_bad, m->bad);
}

/* ------------------------------------------------------------------------------------------ */
/* the resolver thread: names that are not numeric addresses                                  */

struct resolved {
    char *name;
    struct backend *be; /* NULL: did not resolve (err) */
    char err[256];
    struct resolved *next;
};

static pthread_t resolver;
static bool resolver_running;
static pthread_mutex_t rq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rq_cond = PTHREAD_COND_INITIALIZER;
static struct resolved *rq_todo, *rq_done; /* under rq_lock */
static bool rq_quit;

/* lb_backend_new only allocates, resolves and registers the object under the backends' lock,
 * so this thread may call it: the object is handed to the main thread, which puts it in the
 * ring or discards it. */
static void *resolver_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&rq_lock);
    for (;;) {
        while (!rq_todo && !rq_quit)
            pthread_cond_wait(&rq_cond, &rq_lock);
        if (rq_quit)
            break;
        struct resolved *r = rq_todo;
        rq_todo = r->next;
        pthread_mutex_unlock(&rq_lock);
        r->be = lb_backend_new(r->name, r->err, sizeof r->err);
        ADD(st_resolves, 1);
        pthread_mutex_lock(&rq_lock);
        r->next = rq_done;
        rq_done = r;
        if (resolved_ev)
            event_active(resolved_ev, 0, 0);
    }
    pthread_mutex_unlock(&rq_lock);
    return NULL;
}

static void resolve_queue(struct fentry *e)
{
    struct resolved *r = calloc(1, sizeof *r);
    if (!r || !(r->name = strdup(e->name))) {
        free(r);
        set_resolve(e, RS_FAILED);
        return;
    }
    if (!resolver_running) {
        rq_quit = false;
        if (pthread_create(&resolver, NULL, resolver_main, NULL) != 0) {
            free(r->name);
            free(r);
            set_resolve(e, RS_FAILED);
            lb_log("etcd: cannot start the resolver thread");
            return;
        }
        resolver_running = true;
    }
    set_resolve(e, RS_QUEUED);
    ADD(st_resolving, 1);
    pthread_mutex_lock(&rq_lock);
    r->next = rq_todo;
    rq_todo = r;
    pthread_cond_signal(&rq_cond);
    pthread_mutex_unlock(&rq_lock);
}

/* ------------------------------------------------------------------------------------------ */
/* applying                                                                                    */

/* What waits to be applied (touched entries, since a change is being published), and the
 * change under way, for the stats and the log once it is published. */
static bool pend, pend_full;
static uint64_t pend_rev;
static char pend_what[32];
static struct {
    bool full;
    uint64_t rev, members, points;
    char why[96];
} applying;
/* The range's timing line, written once its change is published. */
static struct {
    bool on;
    size_t len;
    int64_t answered, read_cpu, t_read, c_read;
} range_line;

static void apply_now(void);
static void schedule(int ms);
static bool watch_waits;   /* the watch starts when the range's change is published */
static uint64_t watch_gen; /* feed_gen then: a failure meanwhile ranges again instead */

/* The touched entries' change was published (main thread; rc < 0: not applied). */
static void applied(int rc, int64_t publish_cpu, void *arg)
{
    (void)arg;
    if (rc < 0)
        lb_log("etcd: %s not applied; the next range applies the whole set", applying.why);
    atomic_store_explicit(&st_revision, applying.rev, memory_order_relaxed);
    atomic_store_explicit(&st_members, applying.members, memory_order_relaxed);
    atomic_store_explicit(&st_points, applying.points, memory_order_relaxed);
    atomic_store_explicit(&st_active, true, memory_order_release);
    if (applying.full && range_line.on) {
        range_line.on = false;
        lb_log("etcd: range of %zu bytes: answered in %lld ms, read in %lld ms (%lld ms of CPU "
               "off the main thread), applied in %lld ms (%lld ms of CPU)",
               range_line.len, (long long)(range_line.answered - range_started_ms),
               (long long)(range_line.t_read - range_line.answered), (long long)range_line.read_cpu,
               (long long)(now_ms() - range_line.t_read),
               (long long)(cpu_ms() - range_line.c_read + publish_cpu));
    }
    if (watch_waits && !pend) {
        watch_waits = false;
        if (watch_gen == feed_gen && next_action == ACT_WATCH)
            schedule(0);
    }
    if (pend)
        apply_now();
    else if (resolved_ev)
        event_active(resolved_ev, 0, 0); /* answers that came while the change was published */
}

/* Applies the touched entries (what, rev: for the log) with one change; full: a range, every
 * ring member that is not etcd's leaves too.  While a change is being published (by the writer
 * thread, membership.c) they wait, and whatever more is touched meanwhile joins them: one
 * change for all once it is done. */
static void apply(const char *what, uint64_t rev, bool full)
{
    pend = true;
    pend_full |= full;
    pend_rev = rev;
    snprintf(pend_what, sizeof pend_what, "%s", what);
    if (!lb_membership_busy())
        apply_now();
}

/* Deleted entries are freed once their change was handed over (names are copied). */
static void apply_now(void)
{
    bool full = pend_full;
    pend = pend_full = false;
    snprintf(applying.why, sizeof applying.why, "etcd %s at revision %llu", pend_what,
             (unsigned long long)pend_rev);
    applying.full = full;
    applying.rev = pend_rev;
    applying.members = table_n;
    applying.points = total_points;
    for (size_t i = 0; i < ntouched; i++)
        applying.members -= touched[i]->weight == 0;
    struct lb_change *ch = calloc(ntouched + 1, sizeof *ch);
    size_t k = 0;
    /* from now on etcd, not --members, is the membership (a SIGHUP applies nothing) */
    lb_membership_from_etcd();
    if (!ch) {
        lb_log("%s: out of memory; not applied", applying.why);
        applied(-1, 0, NULL);
    } else {
        const chring_snap_t *s = chring_snap_enter(lb_ring);
        for (size_t i = 0; i < ntouched; i++) {
            struct fentry *e = touched[i];
            if (e->weight == 0 || chring_snap_find(s, e->name)) {
                ch[k++] = (struct lb_change){e->name, e->weight, NULL};
                continue;
            }
            if (e->resolve == RS_QUEUED)
                continue; /* joins when its answer comes back, with the weight it has then */
            if (e->resolve == RS_FAILED)
                continue; /* tried again by on_retry, never once per batch */
            if (!lb_name_is_numeric(e->name)) {
                resolve_queue(e);
                continue;
            }
            char err[256];
            struct backend *be = lb_backend_new(e->name, err, sizeof err);
            if (!be) {
                char q[300];
                lb_text_quote(q, sizeof q, err, strlen(err));
                lb_log("etcd: %s; left out", q);
                set_resolve(e, RS_FAILED);
                arm_retry();
                continue;
            }
            ch[k++] = (struct lb_change){e->name, e->weight, be};
        }
        chring_snap_exit(lb_ring, s);
        if (lb_membership_change_async(ch, k, full ? entry_known : NULL, NULL, applying.why,
                                       applied, NULL) < 0)
            applied(-1, 0, NULL);
    }
    free(ch);
    for (size_t i = 0; i < ntouched; i++)
        if (touched[i]->weight == 0)
            entry_delete(touched[i]);
    ntouched = 0;
    stamp++;
}

static void resolved_applied(int rc, int64_t cpu, void *arg)
{
    (void)cpu;
    (void)arg;
    if (rc < 0)
        lb_log("etcd: resolved names not applied");
    if (pend)
        apply_now();
    else if (resolved_ev)
        event_active(resolved_ev, 0, 0);
}

/* Resolver answers (main thread): each name that is still wanted joins with its weight now. */
static void on_resolved(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (lb_membership_busy())
        return; /* activated again once the change under way is published */
    pthread_mutex_lock(&rq_lock);
    struct resolved *done = rq_done;
    rq_done = NULL;
    pthread_mutex_unlock(&rq_lock);
    size_t n = 0;
    for (struct resolved *r = done; r; r = r->next)
        n++;
    struct lb_change *ch = calloc(n + 1, sizeof *ch);
    size_t k = 0;
    bool failed = false;
    for (struct resolved *r = done; r; r = r->next) {
        SUB(st_resolving, 1);
        struct fentry *e = find(r->name);
        if (!e || e->weight == 0 || e->resolve != RS_QUEUED || !ch) {
            if (r->be)
                lb_backend_discard(r->be);
            if (e && e->resolve == RS_QUEUED)
                set_resolve(e, RS_NONE);
            continue;
        }
        if (r->be) {
            set_resolve(e, RS_NONE);
            ch[k++] = (struct lb_change){e->name, e->weight, r->be};
            continue;
        }
        char q[300];
        lb_text_quote(q, sizeof q, r->err, strlen(r->err));
        lb_log("etcd: %s; left out, tried again in %d s", q, RESOLVE_RETRY_MS / 1000);
        set_resolve(e, RS_FAILED);
        failed = true;
    }
    if (k && lb_membership_change_async(ch, k, NULL, NULL, "etcd: names resolved",
                                        resolved_applied, NULL) < 0)
        lb_log("etcd: resolved names not applied");
    free(ch);
    while (done) {
        struct resolved *next = done->next;
        free(done->name);
        free(done);
        done = next;
    }
    if (failed)
        arm_retry();
}

/* Names that did not resolve are handed to the resolver thread again once their time came. */
static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    int64_t now = now_ms();
    bool left = false;
    for (size_t i = 0; i < table_cap; i++)
        for (struct fentry *e = table[i]; e; e = e->next) {
            if (e->resolve != RS_FAILED)
                continue;
            if (e->retry_at <= now && e->weight > 0)
                resolve_queue(e);
            else
                left = true;
        }
    if (left)
        arm_retry();
}

/* A put of name at weight (name owned).  Refused (logged) when etcd's points would pass
 * --etcd-max-points.  Returns 0, -1 out of memory. */
static int put(char *name, uint32_t weight)
{
    bool fresh;
    struct fentry *e = find_or_add(name, &fresh);
    if (!e)
        return -1;
    uint64_t was = (uint64_t)e->weight * points_per_weight,
             now = (uint64_t)weight * points_per_weight;
    if (total_points - was + now > lb_cfg.etcd_max_points) {
        if (refused++ >= LB_ETCD_BAD_SHOWN)
            goto counted;
        char q[300];
        lb_text_quote(q, sizeof q, e->name, strlen(e->name));
        lb_log("etcd: %s=%u refused: etcd's members would have %llu points, above "
               "--etcd-max-points %llu",
               q, weight, (unsigned long long)(total_points - was + now),
               (unsigned long long)lb_cfg.etcd_max_points);
    counted:
        ADD(st_refused, 1);
        if (fresh)
            entry_delete(e);
        return 0;
    }
    if (touch(e) < 0)
        return -1;
    total_points = total_points - was + now;
    e->weight = weight;
    return 0;
}

static int del(const char *name)
{
    struct fentry *e = find(name);
    if (!e)
        return 0;
    if (touch(e) < 0)
        return -1;
    total_points -= (uint64_t)e->weight * points_per_weight;
    e->weight = 0;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* requests                                                                                    */

static void set_state(enum etcd_state s)
{
    atomic_store_explicit(&st_state, (int)s, memory_order_relaxed);
}

static void schedule(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_add(step_ev, &tv);
}

/* Range and watch again after the backoff (cancelled: etcd cancelled the watch, not an error). */
static void again(bool cancelled)
{
    if (watch_created_ms && now_ms() - watch_created_ms >= ETCD_STABLE_MS)
        backoff_ms = ETCD_BACKOFF_MIN_MS;
    watch_created_ms = 0;
    feed_gen++;
    set_state(cancelled ? ETCD_CONNECTING : ETCD_RETRYING);
    watch_dead = true;
    next_action = ACT_RANGE;
    event_del(deadline_ev);
    event_active(close_ev, 0, 0); /* no more bytes read from this connection */
    schedule(backoff_ms);
    backoff_ms = backoff_ms * 2 > ETCD_BACKOFF_MAX_MS ? ETCD_BACKOFF_MAX_MS : backoff_ms * 2;
}

/* The feed failed (why): keep the membership, range and watch again after the backoff. */
static void fail(const char *why)
{
    ADD(st_errors, 1);
    lb_log("etcd %s: %s; keeping the last membership, again in %d ms", lb_cfg.etcd_url, why,
           backoff_ms);
    again(false);
}

/* A JSON body for a request on conn to path, answered to cb, its body to chunk_cb. */
static int post(const char *path, const char *body, void (*cb)(struct evhttp_request *, void *),
                void (*chunk_cb)(struct evhttp_request *, void *))
{
    struct evhttp_request *req = evhttp_request_new(cb, NULL);
    if (!req)
        return -1;
    evhttp_request_set_chunked_cb(req, chunk_cb);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Host", hosthdr);
    evhttp_add_header(h, "Content-Type", "application/json");
    evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
    return evhttp_make_request(conn, req, EVHTTP_REQ_POST, path); /* frees req on failure */
}

static size_t parse_budget(void)
{
    size_t b = lb_cfg.etcd_max_answer * 4;
    return b < ((size_t)64 << 20) ? (size_t)64 << 20 : b;
}

/* The range answer arrives in pieces: kept, up to --etcd-max-answer. */
static void on_range_chunk(struct evhttp_request *req, void *arg)
{
    (void)arg;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    if (watch_dead) {
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    if (evbuffer_get_length(rbuf) + evbuffer_get_length(in) > lb_cfg.etcd_max_answer) {
        char why[96];
        snprintf(why, sizeof why, "range: an answer above --etcd-max-answer (%zu bytes)",
                 lb_cfg.etcd_max_answer);
        evbuffer_drain(in, evbuffer_get_length(in));
        fail(why);
        return;
    }
    evbuffer_add_buffer(rbuf, in);
}

/* ------------------------------------------------------------------------------------------ */
/* a range answer is read on a thread of its own: the main thread (stats on --stats-listen,    */
/* passive health, drains, resolved names) goes on meanwhile                                  */

struct range_job {
    bool watch;   /* a large watch message, not a range answer */
    uint64_t gen; /* feed_gen when it started: a result from before a failure is dropped */
    char *text;
    size_t len;
    size_t budget;
    struct lb_etcd_msg m;
    int rc;
    const char *why;
    int64_t answered_ms, read_cpu_ms;
};

static pthread_t range_thread;
static struct range_job *range_job; /* not NULL while its thread runs or its result waits */
static struct event *parsed_ev;

static void *range_main(void *arg)
{
    struct range_job *job = arg;
    int64_t c0 = cpu_ms();
    lb_etcd_read_budget(job->budget);
    job->why = "out of memory";
    job->rc = job->watch
                  ? lb_etcd_read_watch(job->text, job->len, lb_cfg.etcd_prefix, &job->m, &job->why)
                  : lb_etcd_read_range(job->text, job->len, lb_cfg.etcd_prefix, &job->m, &job->why);
    job->read_cpu_ms = cpu_ms() - c0;
    free(job->text);
    job->text = NULL;
    event_active(parsed_ev, 0, 0); /* the event base is thread-safe (evthread_use_pthreads) */
    return NULL;
}

static void range_job_free(struct range_job *job)
{
    if (!job)
        return;
    if (job->rc == 0)
        lb_etcd_msg_free(&job->m);
    free(job->text);
    free(job);
}

/* Reads text[0..len) (owned from now on) on a thread of its own.  Returns 0, or -1 (text freed). */
static int read_job_start(char *text, size_t len, bool watch)
{
    struct range_job *job = calloc(1, sizeof *job);
    if (!job) {
        free(text);
        return -1;
    }
    job->watch = watch;
    job->gen = feed_gen;
    job->text = text;
    job->len = len;
    job->budget = parse_budget();
    job->answered_ms = now_ms();
    job->rc = -1;
    range_job = job;
    if (pthread_create(&range_thread, NULL, range_main, job) != 0) {
        range_job = NULL;
        range_job_free(job);
        return -1;
    }
    return 0;
}

static void on_range(struct evhttp_request *req, void *arg)
{
    (void)arg;
    if (watch_dead)
        return;
    event_del(deadline_ev);
    if (!req || evhttp_request_get_response_code(req) != 200) {
        char why[64];
        snprintf(why, sizeof why, "range: %s %d", req ? "answered" : "no answer",
                 req ? evhttp_request_get_response_code(req) : 0);
        fail(why);
        return;
    }
    on_range_chunk(req, NULL); /* whatever evhttp kept */
    if (watch_dead)
        return;
    size_t len = evbuffer_get_length(rbuf);
    char *text = malloc(len + 1);
    if (!text) {
        fail("range: out of memory");
        return;
    }
    evbuffer_remove(rbuf, text, len);
    text[len] = '\0';
    if (read_job_start(text, len, false) < 0)
        fail("range: cannot start a thread to read the answer");
}

/* The range was read (main thread): the set becomes its keys, the ring follows. */
static void on_parsed(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    struct range_job *job = range_job;
    if (!job)
        return;
    pthread_join(range_thread, NULL);
    range_job = NULL;
    if (job->gen != feed_gen) { /* the feed failed meanwhile: a range follows anyway */
        range_job_free(job);
        return;
    }
    if (job->watch) {
        watch_parsed(job);
        return;
    }
    int64_t t_read = now_ms(), c_read = cpu_ms();
    if (job->rc < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "range: %s", job->why);
        range_job_free(job);
        fail(msg);
        return;
    }
    struct lb_etcd_msg *m = &job->m;
    log_bad(m);
    /* The set becomes the range's keys: every entry is touched, the ones absent deleted. */
    for (size_t i = 0; i < table_cap; i++)
        for (struct fentry *e = table[i]; e; e = e->next)
            e->weight = 0;
    total_points = 0;
    bool oom = false;
    for (size_t i = 0; i < m->n && !oom; i++) {
        oom = put(m->events[i].name, m->events[i].weight) < 0;
        m->events[i].name = NULL;
    }
    for (size_t i = 0; i < table_cap && !oom; i++)
        for (struct fentry *e = table[i]; e && !oom; e = e->next)
            oom = e->weight == 0 && touch(e) < 0;
    uint64_t rev = m->revision;
    size_t len = job->len;
    int64_t answered = job->answered_ms, read_cpu = job->read_cpu_ms;
    range_job_free(job); /* the names were moved into the set */
    log_refused();
    if (oom) {
        ntouched = 0;
        stamp++;
        fail("range: out of memory");
        return;
    }
    ADD(st_ranges, 1);
    if (total_points == 0)
        lb_log("etcd: no key under %s: the ring is empty", lb_cfg.etcd_prefix);
    /* the timing line is written once the change is published (applied) */
    range_line.on = true;
    range_line.len = len;
    range_line.answered = answered;
    range_line.read_cpu = read_cpu;
    range_line.t_read = t_read;
    range_line.c_read = c_read;
    apply("range", rev, true);
    /* The watch starts once the range's change is published (applied): "watching" in the
     * stats means the ring holds the range. */
    watch_from = rev + 1;
    next_action = ACT_WATCH;
    if (lb_membership_busy() || pend) {
        watch_waits = true;
        watch_gen = feed_gen;
    } else {
        schedule(0);
    }
}

/* A watch message read: applied (m freed).  Returns false when the watch must be replaced (a
 * range follows). */
static bool watch_apply(struct lb_etcd_msg *m)
{
    if (m->canceled || m->compact_revision > 0) {
        ADD(st_compacted, 1);
        lb_log("etcd: watch from revision %llu cancelled (compacted up to %llu): range again in "
               "%d ms",
               (unsigned long long)watch_from, (unsigned long long)m->compact_revision,
               backoff_ms);
        lb_etcd_msg_free(m);
        again(true);
        return false;
    }
    if (m->created) {
        set_state(ETCD_WATCHING);
        watch_created_ms = now_ms();
        lb_log("etcd: watching %s from revision %llu", lb_cfg.etcd_prefix,
               (unsigned long long)watch_from);
    }
    log_bad(m);
    bool oom = false;
    for (size_t i = 0; i < m->n && !oom; i++) {
        if (m->events[i].weight == 0) {
            oom = del(m->events[i].name) < 0;
        } else {
            oom = put(m->events[i].name, m->events[i].weight) < 0;
            m->events[i].name = NULL;
        }
    }
    size_t n = m->n + m->bad;
    uint64_t rev = m->revision;
    lb_etcd_msg_free(m);
    log_refused();
    if (oom) {
        ntouched = 0;
        stamp++;
        fail("watch: out of memory");
        return false;
    }
    if (n) {
        ADD(st_batches, 1);
        ADD(st_events, n);
        apply("watch batch", rev, false);
    } else if (rev && pend) {
        pend_rev = rev; /* the revision the waiting change brings the set to */
    } else if (rev && lb_membership_busy()) {
        applying.rev = rev;
    } else if (rev) {
        atomic_store_explicit(&st_revision, rev, memory_order_relaxed);
    }
    return true;
}

enum step_result {
    GO_ON,    /* the next message may be read */
    REPLACED, /* the watch is being replaced (a range follows) */
    PAUSED    /* a large message is being read on its own thread: later ones wait in wbuf */
};

/* One watch message: read here when small, on a thread of its own when above WATCH_INLINE. */
static enum step_result watch_message(const char *line, size_t len)
{
    if (len > WATCH_INLINE) {
        char *text = malloc(len + 1);
        if (text) {
            memcpy(text, line, len);
            text[len] = '\0';
        }
        if (!text || read_job_start(text, len, true) < 0) {
            fail("watch: cannot start a thread to read a large message");
            return REPLACED;
        }
        return PAUSED;
    }
    struct lb_etcd_msg m;
    const char *why = "";
    lb_etcd_read_budget(parse_budget());
    if (lb_etcd_read_watch(line, len, lb_cfg.etcd_prefix, &m, &why) < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "watch: %s", why);
        fail(msg);
        return REPLACED;
    }
    return watch_apply(&m) ? GO_ON : REPLACED;
}

/* Reads the whole messages buffered in wbuf, in order, until one pauses or replaces the watch. */
static void watch_lines(void)
{
    while (!watch_dead && !range_job) {
        struct evbuffer_ptr eol = evbuffer_search_eol(wbuf, NULL, NULL, EVBUFFER_EOL_LF);
        if (eol.pos < 0) {
            if (evbuffer_get_length(wbuf) > lb_cfg.etcd_max_answer) {
                char why[96];
                snprintf(why, sizeof why, "watch: a message above --etcd-max-answer (%zu bytes)",
                         lb_cfg.etcd_max_answer);
                evbuffer_drain(wbuf, evbuffer_get_length(wbuf));
                fail(why);
            }
            return;
        }
        size_t len = (size_t)eol.pos;
        if (len > lb_cfg.etcd_max_answer) {
            evbuffer_drain(wbuf, evbuffer_get_length(wbuf));
            fail("watch: a message above --etcd-max-answer");
            return;
        }
        const char *line = (const char *)evbuffer_pullup(wbuf, (ssize_t)len + 1);
        enum step_result r = !line ? REPLACED : len == 0 ? GO_ON : watch_message(line, len);
        if (!line)
            fail("watch: out of memory");
        evbuffer_drain(wbuf, len + 1);
        if (r != GO_ON)
            return;
    }
}

/* A large watch message was read (main thread): applied, then the messages that waited. */
static void watch_parsed(struct range_job *job)
{
    int rc = job->rc;
    const char *why = job->why;
    struct lb_etcd_msg m = job->m;
    job->rc = -1; /* m moved out */
    range_job_free(job);
    if (watch_dead) { /* not reached: a failure changes feed_gen, and on_parsed drops the job */
        if (rc == 0)
            lb_etcd_msg_free(&m);
        return;
    }
    if (rc < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "watch: %s", why);
        fail(msg);
        return;
    }
    if (watch_apply(&m))
        watch_lines();
}

static void on_watch_chunk(struct evhttp_request *req, void *arg)
{
    (void)arg;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    if (watch_dead) {
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    evbuffer_add_buffer(wbuf, in);
    if (range_job) { /* a large message is being read: the next ones wait, bounded */
        if (evbuffer_get_length(wbuf) > lb_cfg.etcd_max_answer * 2) {
            evbuffer_drain(wbuf, evbuffer_get_length(wbuf));
            fail("watch: more than twice --etcd-max-answer waiting behind a large message");
        }
        return;
    }
    watch_lines();
}

static void on_watch_done(struct evhttp_request *req, void *arg)
{
    (void)arg;
    if (watch_dead)
        return;
    char why[64];
    snprintf(why, sizeof why, "watch ended (%s %d)", req ? "status" : "connection lost",
             req ? evhttp_request_get_response_code(req) : 0);
    fail(why);
}

/* The range did not arrive whole in time (a slow drip keeps an idle timeout from firing). */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (next_action != ACT_RANGE || watch_dead)
        return;
    char why[96];
    snprintf(why, sizeof why, "range: no whole answer within --etcd-range-timeout (%u ms)",
             lb_cfg.etcd_range_timeout_ms);
    fail(why);
}

/* Drops the connection (outside its callbacks): a failed request reads nothing more. */
static void on_close(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (conn && watch_dead) {
        evhttp_connection_free(conn);
        conn = NULL;
    }
}

/* The step event: frees the previous connection and starts the next request on a new one. */
static void on_step(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (range_job) { /* a reading thread from before has not ended yet */
        schedule(10);
        return;
    }
    if (conn)
        evhttp_connection_free(conn); /* pending requests go with it, without callbacks */
    conn = evhttp_connection_base_new(base, NULL, host, port);
    if (!conn) {
        fail("cannot create a connection");
        return;
    }
    evhttp_connection_set_max_headers_size(conn, ETCD_MAX_HEADERS);
    evbuffer_drain(wbuf, evbuffer_get_length(wbuf));
    evbuffer_drain(rbuf, evbuffer_get_length(rbuf));
    watch_dead = false;
    char body[1024];
    int rc;
    if (next_action == ACT_RANGE) {
        set_state(ETCD_CONNECTING);
        range_started_ms = now_ms();
        uint32_t t = lb_cfg.etcd_range_timeout_ms;
        struct timeval tv = {(time_t)(t / 1000), (suseconds_t)(t % 1000) * 1000};
        evhttp_connection_set_timeout_tv(conn, &tv);
        event_add(deadline_ev, &tv);
        snprintf(body, sizeof body, "{\"key\":\"%s\",\"range_end\":\"%s\"}", key_b64, end_b64);
        rc = post("/v3/kv/range", body, on_range, on_range_chunk);
    } else {
        evhttp_connection_set_timeout(conn, ETCD_WATCH_IDLE_S);
        snprintf(body, sizeof body,
                 "{\"create_request\":{\"key\":\"%s\",\"range_end\":\"%s\","
                 "\"start_revision\":\"%llu\"}}",
                 key_b64, end_b64, (unsigned long long)watch_from);
        rc = post("/v3/watch", body, on_watch_done, on_watch_chunk);
    }
    if (rc < 0)
        fail("cannot send the request");
}

int lb_etcd_start(struct event_base *b)
{
    if (!lb_cfg.etcd_url)
        return 0;
    base = b;
    if (lb_split_hostport(lb_cfg.etcd_url + 7, host, sizeof host, &port) < 0)
        return -1;
    snprintf(hosthdr, sizeof hosthdr, "%s", lb_cfg.etcd_url + 7);
    switch (lb_cfg.profile) {
    case CHRING_PROFILE_KETAMA:
    case CHRING_PROFILE_NGINX: points_per_weight = 160; break;
    case CHRING_PROFILE_HAPROXY: points_per_weight = 16; break;
    default: points_per_weight = lb_cfg.vnodes ? lb_cfg.vnodes : 1; break;
    }
    /* the range [prefix, prefix with its last byte + 1): every key that starts with prefix */
    size_t prefix_len = strlen(lb_cfg.etcd_prefix);
    unsigned char end[256];
    memcpy(end, lb_cfg.etcd_prefix, prefix_len);
    size_t elen = prefix_len;
    while (elen > 0 && end[elen - 1] == 0xff)
        elen--;
    if (elen == 0) {
        lb_log("--etcd-prefix: cannot be all 0xff bytes");
        return -1;
    }
    end[elen - 1]++;
    key_b64 = malloc((prefix_len + 2) / 3 * 4 + 1);
    end_b64 = malloc((elen + 2) / 3 * 4 + 1);
    if (key_b64 && end_b64) {
        lb_b64_encode((const unsigned char *)lb_cfg.etcd_prefix, prefix_len, key_b64);
        lb_b64_encode(end, elen, end_b64);
    }
    wbuf = evbuffer_new();
    rbuf = evbuffer_new();
    step_ev = event_new(base, -1, 0, on_step, NULL);
    close_ev = event_new(base, -1, 0, on_close, NULL);
    deadline_ev = evtimer_new(base, on_deadline, NULL);
    resolved_ev = event_new(base, -1, 0, on_resolved, NULL);
    retry_ev = evtimer_new(base, on_retry, NULL);
    parsed_ev = event_new(base, -1, 0, on_parsed, NULL);
    if (!key_b64 || !end_b64 || !wbuf || !rbuf || !step_ev || !close_ev || !deadline_ev ||
        !resolved_ev || !retry_ev || !parsed_ev || grow() < 0) {
        lb_etcd_stop();
        return -1;
    }
    lb_log("etcd: reading %s from %s", lb_cfg.etcd_prefix, lb_cfg.etcd_url);
    next_action = ACT_RANGE;
    set_state(ETCD_CONNECTING);
    schedule(0);
    return 0;
}

void lb_etcd_stop(void)
{
    if (range_job) { /* a range being read: wait for its thread (bounded by the answer's size) */
        pthread_join(range_thread, NULL);
        range_job_free(range_job);
        range_job = NULL;
    }
    if (resolver_running) {
        pthread_mutex_lock(&rq_lock);
        rq_quit = true;
        pthread_cond_signal(&rq_cond);
        pthread_mutex_unlock(&rq_lock);
        pthread_join(resolver, NULL);
        resolver_running = false;
    }
    for (struct resolved *lists[2] = {rq_todo, rq_done}, **l = lists; l < lists + 2; l++)
        while (*l) {
            struct resolved *r = *l;
            *l = r->next;
            if (r->be)
                lb_backend_discard(r->be);
            free(r->name);
            free(r);
        }
    rq_todo = rq_done = NULL;
    if (conn)
        evhttp_connection_free(conn);
    conn = NULL;
    struct event **evs[] = {&step_ev, &close_ev, &deadline_ev, &resolved_ev, &retry_ev, &parsed_ev};
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) {
        if (*evs[i])
            event_free(*evs[i]);
        *evs[i] = NULL;
    }
    if (wbuf)
        evbuffer_free(wbuf);
    if (rbuf)
        evbuffer_free(rbuf);
    wbuf = rbuf = NULL;
    free(key_b64);
    free(end_b64);
    key_b64 = end_b64 = NULL;
    for (size_t i = 0; i < table_cap; i++)
        while (table[i]) {
            struct fentry *e = table[i];
            table[i] = e->next;
            free(e->name);
            free(e);
        }
    free(table);
    table = NULL;
    table_cap = table_n = 0;
    free(touched);
    touched = NULL;
    ntouched = touched_cap = 0;
    set_state(ETCD_OFF);
}

void lb_etcd_stats(struct evbuffer *b)
{
    if (!lb_cfg.etcd_url)
        return;
    int s = atomic_load_explicit(&st_state, memory_order_relaxed);
    evbuffer_add_printf(
        b,
        ",\n\"etcd\":{\"state\":\"%s\",\"applied\":%s,\"revision\":%llu,\"members\":%llu,"
        "\"ranges\":%llu,\"batches\":%llu,\"events\":%llu,\"bad_entries\":%llu,"
        "\"errors\":%llu,\"compacted\":%llu,\"resolving\":%llu,\"unresolved\":%llu,"
        "\"resolves\":%llu,\"points\":%llu,\"refused\":%llu,\"publishing\":%s}",
        state_names[s >= 0 && s <= ETCD_RETRYING ? s : 0], lb_etcd_active() ? "true" : "false",
        (unsigned long long)GET(st_revision), (unsigned long long)GET(st_members),
        (unsigned long long)GET(st_ranges), (unsigned long long)GET(st_batches),
        (unsigned long long)GET(st_events), (unsigned long long)GET(st_bad),
        (unsigned long long)GET(st_errors), (unsigned long long)GET(st_compacted),
        (unsigned long long)GET(st_resolving), (unsigned long long)GET(st_unresolved),
        (unsigned long long)GET(st_resolves), (unsigned long long)GET(st_points),
        (unsigned long long)GET(st_refused),
        atomic_load_explicit(&lb_ring_writing, memory_order_relaxed) ? "true" : "false");
}
