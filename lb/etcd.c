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
 *            these keys (a replace); the ring is brought to it with one chring_update holding
 *            only the differences (members that are not etcd's, the starting list among them,
 *            leave).
 *   watch    POST /v3/watch {create_request: {key, range_end, start_revision: R + 1}}: a stream
 *            of JSON objects, one per line; each batch of events is applied as the changes it
 *            holds, one chring_update per batch (several events of one key: the last counts;
 *            batches that come while a change is published join the next one).
 *            A message above WATCH_INLINE (a prefix deleted at once) is read on a thread of its
 *            own like a range, the messages behind it waiting, in order and bounded.
 *
 * etcd.c is the client alone: the requests, their answers' bounds, the backoff.  What it reads
 * goes into the feed's set (feed.c: puts, deletes, a replace for a range), which brings the ring
 * to it as the differences, published off the main thread (membership.c's writer thread), and
 * has names that need DNS resolved by the resolver thread (resolver.c).  The watch starts once
 * the range's change is published: "watching" in the stats means the ring holds the range.
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
#include "feed.h"
#include "lb.h"
#include "log.h"
#include "members.h"
#include "membership.h"
#include "text.h"
#include "worker.h"
#include "writer.h"

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
static struct event *step_ev, *close_ev, *deadline_ev;
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
static struct lb_feed *feed; /* etcd's set (feed.c) */
static _Atomic uint64_t st_ranges, st_batches, st_events, st_bad, st_errors, st_compacted;

bool lb_etcd_active(void)
{
    struct lb_feed_stats fs = {0};
    if (feed)
        lb_feed_stats(feed, &fs);
    return fs.applied;
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


static void log_bad(const struct lb_etcd_msg *m)
{
    for (size_t i = 0; i < m->bad && i < LB_ETCD_BAD_SHOWN; i++)
        lb_log("etcd: %s; skipped", m->bad_why[i]);
    if (m->bad > LB_ETCD_BAD_SHOWN)
        lb_log("etcd: %zu more bad entries skipped", m->bad - LB_ETCD_BAD_SHOWN);
    ADD(st_bad, m->bad);
}

static void schedule(int ms);
static bool watch_waits;   /* the watch starts when the range's change is published */
static uint64_t watch_gen; /* feed_gen then: a failure meanwhile ranges again instead */
/* The range's timing line, written once its change is published. */
static struct {
    bool on;
    size_t len;
    int64_t answered, read_cpu, t_read, c_read;
} range_line;

/* A change of the set was published (main thread): the range's line; the watch starts. */
static void on_applied(int rc, bool full, int64_t publish_cpu, void *arg)
{
    (void)arg;
    if (rc < 0) /* its line says why (writer.c) */
        lb_log("etcd: that change was not applied; the next range applies the whole set");
    if (full && range_line.on) {
        range_line.on = false;
        lb_log("etcd: range of %zu bytes: answered in %lld ms, read in %lld ms (%lld ms of CPU "
               "off the main thread), applied in %lld ms (%lld ms of CPU)",
               range_line.len, (long long)(range_line.answered - range_started_ms),
               (long long)(range_line.t_read - range_line.answered), (long long)range_line.read_cpu,
               (long long)(now_ms() - range_line.t_read),
               (long long)(cpu_ms() - range_line.c_read + publish_cpu));
    }
    if (watch_waits && !lb_feed_busy(feed)) {
        watch_waits = false;
        if (watch_gen == feed_gen && next_action == ACT_WATCH)
            schedule(0);
    }
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
    lb_feed_replace_begin(feed);
    bool oom = false;
    for (size_t i = 0; i < m->n && !oom; i++) {
        oom = lb_feed_put(feed, m->events[i].name, m->events[i].weight) < 0;
        m->events[i].name = NULL;
    }
    oom = oom || lb_feed_replace_end(feed) < 0;
    uint64_t rev = m->revision;
    size_t len = job->len;
    int64_t answered = job->answered_ms, read_cpu = job->read_cpu_ms;
    range_job_free(job); /* the names were moved into the set */
    lb_feed_log_refused(feed);
    if (oom) {
        lb_feed_drop(feed);
        fail("range: out of memory");
        return;
    }
    ADD(st_ranges, 1);
    if (lb_feed_points(feed) == 0)
        lb_log("etcd: no key under %s: the ring is empty", lb_cfg.etcd_prefix);
    /* the timing line is written once the change is published (applied) */
    range_line.on = true;
    range_line.len = len;
    range_line.answered = answered;
    range_line.read_cpu = read_cpu;
    range_line.t_read = t_read;
    range_line.c_read = c_read;
    char why[64];
    snprintf(why, sizeof why, "etcd range at revision %llu", (unsigned long long)rev);
    /* from now on etcd, not --members, is the membership: a SIGHUP meanwhile applies nothing */
    lb_membership_from_etcd();
    lb_feed_apply(feed, why, rev, true);
    /* The watch starts once the range's change is published (applied): "watching" in the
     * stats means the ring holds the range. */
    watch_from = rev + 1;
    next_action = ACT_WATCH;
    if (lb_feed_busy(feed)) {
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
            oom = lb_feed_del(feed, m->events[i].name) < 0;
        } else {
            oom = lb_feed_put(feed, m->events[i].name, m->events[i].weight) < 0;
            m->events[i].name = NULL;
        }
    }
    size_t n = m->n + m->bad;
    uint64_t rev = m->revision;
    lb_etcd_msg_free(m);
    lb_feed_log_refused(feed);
    if (oom) {
        lb_feed_drop(feed);
        fail("watch: out of memory");
        return false;
    }
    if (n) {
        ADD(st_batches, 1);
        ADD(st_events, n);
        char why[64];
        snprintf(why, sizeof why, "etcd watch batch at revision %llu", (unsigned long long)rev);
        lb_feed_apply(feed, why, rev, false);
    } else if (rev) {
        lb_feed_revision(feed, rev);
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
    parsed_ev = event_new(base, -1, 0, on_parsed, NULL);
    feed = lb_feed_new(base, "etcd", "--etcd-max-points", lb_cfg.etcd_max_points,
                       points_per_weight, on_applied, NULL);
    if (!key_b64 || !end_b64 || !wbuf || !rbuf || !step_ev || !close_ev || !deadline_ev ||
        !parsed_ev || !feed) {
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
    if (conn)
        evhttp_connection_free(conn);
    conn = NULL;
    struct event **evs[] = {&step_ev, &close_ev, &deadline_ev, &parsed_ev};
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
    lb_feed_free(feed);
    feed = NULL;
    set_state(ETCD_OFF);
}

void lb_etcd_stats(struct evbuffer *b)
{
    if (!lb_cfg.etcd_url)
        return;
    int s = atomic_load_explicit(&st_state, memory_order_relaxed);
    struct lb_feed_stats fs = {0};
    if (feed)
        lb_feed_stats(feed, &fs);
    evbuffer_add_printf(
        b,
        ",\n\"etcd\":{\"state\":\"%s\",\"applied\":%s,\"revision\":%llu,\"members\":%llu,"
        "\"ranges\":%llu,\"batches\":%llu,\"events\":%llu,\"bad_entries\":%llu,"
        "\"errors\":%llu,\"compacted\":%llu,\"resolving\":%llu,\"unresolved\":%llu,"
        "\"resolves\":%llu,\"points\":%llu,\"refused\":%llu,\"publishing\":%s}",
        state_names[s >= 0 && s <= ETCD_RETRYING ? s : 0], fs.applied ? "true" : "false",
        (unsigned long long)fs.revision, (unsigned long long)fs.members,
        (unsigned long long)GET(st_ranges), (unsigned long long)GET(st_batches),
        (unsigned long long)GET(st_events), (unsigned long long)GET(st_bad),
        (unsigned long long)GET(st_errors), (unsigned long long)GET(st_compacted),
        (unsigned long long)fs.resolving, (unsigned long long)fs.unresolved,
        (unsigned long long)fs.resolves, (unsigned long long)fs.points,
        (unsigned long long)fs.refused,
        atomic_load_explicit(&lb_ring_writing, memory_order_relaxed) ? "true" : "false");
}
