/* chring-lb: a multithreaded HTTP/1.1 reverse proxy that routes each request by a key on a
 * chring ring with bounded loads.
 *
 * SPDX-License-Identifier: MIT
 *
 * Shape.  N worker threads, each with its own libevent event_base and evhttp server accepting on
 * its own SO_REUSEPORT listener (one shared listener when SO_REUSEPORT is unavailable).  A request
 * takes a lease with chring_acquire() on its key; the member's udata is a struct backend holding
 * the address and one idle-connection pool per worker (keep-alive evhttp_connection objects, used
 * only by their worker's thread).  The backend's answer is relayed as it arrives (header callback,
 * then chunk callbacks); the lease is released when the answer has been relayed completely, or the
 * client has gone, or the backend failed.  A backend that refuses or times out before answering
 * is retried once on the key's next replica (chring_snap_lookup_n, n = 2), then 502.
 *
 * The main thread owns the ring's writer side: it loads the membership, and on SIGHUP re-reads
 * --members and applies it with chring_sync() (connections are not dropped: members that stay
 * keep their object, counters and pools).  A removed member's struct backend is handed to the
 * ring's retire callback, which may run on any thread: it queues the backend and wakes every
 * worker; each worker frees its own pool of it; the last one frees the object.
 */
#define _GNU_SOURCE
#include "lb.h"

#include <chring.h>

#include <arpa/inet.h>
#include <sys/queue.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <event2/util.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* configuration                                                                               */

enum key_kind { KEY_PATH, KEY_HEADER, KEY_QUERY };

static struct {
    char listen_host[256];
    uint16_t listen_port;
    unsigned threads;
    enum key_kind key_kind;
    char *key_name; /* header or query argument name */
    size_t key_prefix; /* 0: whole key */
    chring_profile_t profile;
    uint32_t vnodes;
    double balance;
    struct timeval backend_timeout;
    struct timeval client_timeout;
    size_t max_headers;
    size_t max_body;
    unsigned max_idle; /* idle backend connections kept per backend per worker */
    size_t high_water; /* client output bytes above which backend reads pause */
    int64_t fail_timeout_ms; /* after a failure, send the backend's keys to the next replica */
    const char *members_file;
    lb_entries_t static_entries; /* from --backend */
    bool verbose;
} cfg;

static chring_t *ring;

/* ------------------------------------------------------------------------------------------ */
/* logging                                                                                     */

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    char buf[1024];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03ld chring-lb: ", tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", buf);
}

/* ------------------------------------------------------------------------------------------ */
/* backends, workers                                                                           */

struct worker;
struct backend;

struct bconn { /* one keep-alive connection to a backend, owned by one worker */
    struct evhttp_connection *evcon;
    struct bconn *next;
};

struct pool {
    struct bconn *idle;
    unsigned nidle;
};

struct backend {
    char *name;             /* member name, "host:port" as written */
    char addr[INET6_ADDRSTRLEN];
    char hosthdr[300];      /* Host header when the client sent none */
    uint16_t port;
    struct pool *pools;     /* [cfg.threads], pools[w] touched only by worker w */
    bool *reaped;           /* [cfg.threads], under g_be_lock */
    unsigned reap_left;
    bool retired;
    struct backend *prev, *next; /* g_backends, under g_be_lock */
    _Atomic uint64_t requests, failures, retries_in, bytes_out, skipped;
    _Atomic int64_t down_until_ms; /* passive health: skip it until then (CLOCK_MONOTONIC) */
};

struct proxy;

struct worker {
    unsigned id;
    pthread_t thread;
    struct event_base *base;
    struct evhttp *http;
    struct event *stop_ev, *reap_ev, *free_ev;
    struct bconn *dead; /* connections to free outside their own callbacks */
    struct proxy *active;
    _Atomic uint64_t requests, proxied, retries, bad_gateway, aborts, client_gone, no_backend,
        stats_served, active_n, pauses;
};

static struct worker *workers;
static pthread_mutex_t g_be_lock = PTHREAD_MUTEX_INITIALIZER;
static struct backend *g_backends; /* every backend object alive */
static bool g_shutdown;            /* under g_be_lock: workers are gone, free directly */
static _Atomic uint64_t g_reloads, g_reload_errors;

#define ADD(x, v) atomic_fetch_add_explicit(&(x), (v), memory_order_relaxed)
#define SUB(x, v) atomic_fetch_sub_explicit(&(x), (v), memory_order_relaxed)
#define GET(x) atomic_load_explicit(&(x), memory_order_relaxed)

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool backend_down(struct backend *be)
{
    int64_t until = GET(be->down_until_ms);
    return until != 0 && now_ms() < until;
}

static void backend_mark(struct backend *be, bool ok)
{
    if (ok) {
        if (GET(be->down_until_ms) != 0)
            atomic_store_explicit(&be->down_until_ms, 0, memory_order_relaxed);
    } else if (cfg.fail_timeout_ms > 0) {
        atomic_store_explicit(&be->down_until_ms, now_ms() + cfg.fail_timeout_ms, memory_order_relaxed);
    }
}

static void bconn_free(struct bconn *bc)
{
    if (bc) {
        evhttp_connection_free(bc->evcon);
        free(bc);
    }
}

static void pool_clear(struct pool *pl)
{
    while (pl->idle) {
        struct bconn *bc = pl->idle;
        pl->idle = bc->next;
        bconn_free(bc);
    }
    pl->nidle = 0;
}

static void backend_destroy(struct backend *be)
{
    if (!be)
        return;
    if (be->pools)
        for (unsigned w = 0; w < cfg.threads; w++)
            pool_clear(&be->pools[w]);
    free(be->pools);
    free(be->reaped);
    free(be->name);
    free(be);
}

static struct backend *backend_new(const char *name, char *err, size_t errcap)
{
    char host[256];
    uint16_t port;
    if (lb_split_hostport(name, host, sizeof host, &port) < 0) {
        snprintf(err, errcap, "%s: not host:port", name);
        return NULL;
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host, NULL, &hints, &res);
    if (gai != 0 || !res) {
        snprintf(err, errcap, "%s: cannot resolve %s: %s", name, host, gai_strerror(gai));
        return NULL;
    }
    struct backend *be = calloc(1, sizeof *be);
    if (!be) {
        freeaddrinfo(res);
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    /* prefer IPv4 (the usual backend address), else the first answer */
    struct addrinfo *pick = res;
    for (struct addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    if (pick->ai_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)pick->ai_addr)->sin_addr, be->addr, sizeof be->addr);
    else
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)pick->ai_addr)->sin6_addr, be->addr,
                  sizeof be->addr);
    freeaddrinfo(res);
    be->port = port;
    snprintf(be->hosthdr, sizeof be->hosthdr, "%s", name);
    be->name = strdup(name);
    be->pools = calloc(cfg.threads, sizeof *be->pools);
    be->reaped = calloc(cfg.threads, sizeof *be->reaped);
    if (!be->name || !be->pools || !be->reaped) {
        backend_destroy(be);
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&g_be_lock);
    be->next = g_backends;
    if (g_backends)
        g_backends->prev = be;
    g_backends = be;
    pthread_mutex_unlock(&g_be_lock);
    return be;
}

static void backend_unlink_locked(struct backend *be)
{
    if (be->prev)
        be->prev->next = be->next;
    else
        g_backends = be->next;
    if (be->next)
        be->next->prev = be->prev;
    be->prev = be->next = NULL;
}

/* An object that never made it into the ring. */
static void backend_discard(struct backend *be)
{
    pthread_mutex_lock(&g_be_lock);
    backend_unlink_locked(be);
    pthread_mutex_unlock(&g_be_lock);
    backend_destroy(be);
}

/* The ring's retire callback: may run on any thread (a worker releasing the last lease, the main
 * thread syncing, liburcu's call_rcu thread, chring_free). */
static void on_retire(void *udata, void *ctx)
{
    (void)ctx;
    struct backend *be = udata;
    if (!be)
        return;
    pthread_mutex_lock(&g_be_lock);
    if (g_shutdown) {
        backend_unlink_locked(be);
        pthread_mutex_unlock(&g_be_lock);
        backend_destroy(be);
        return;
    }
    be->retired = true;
    be->reap_left = cfg.threads;
    pthread_mutex_unlock(&g_be_lock);
    if (cfg.verbose)
        logf_("retired %s", be->name);
    for (unsigned w = 0; w < cfg.threads; w++)
        event_active(workers[w].reap_ev, 0, 0);
}

/* Worker w drops its pool of every retired backend; the last worker frees the object. */
static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    pthread_mutex_lock(&g_be_lock);
    struct backend *be = g_backends;
    while (be) {
        struct backend *next = be->next;
        if (be->retired && !be->reaped[w->id]) {
            pool_clear(&be->pools[w->id]);
            be->reaped[w->id] = true;
            if (--be->reap_left == 0) {
                backend_unlink_locked(be);
                backend_destroy(be);
            }
        }
        be = next;
    }
    pthread_mutex_unlock(&g_be_lock);
}

static void on_free_dead(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    while (w->dead) {
        struct bconn *bc = w->dead;
        w->dead = bc->next;
        bconn_free(bc);
    }
}

static struct bconn *pool_get(struct worker *w, struct backend *be)
{
    struct pool *pl = &be->pools[w->id];
    if (pl->idle) {
        struct bconn *bc = pl->idle;
        pl->idle = bc->next;
        pl->nidle--;
        bc->next = NULL;
        return bc;
    }
    struct bconn *bc = calloc(1, sizeof *bc);
    if (!bc)
        return NULL;
    bc->evcon = evhttp_connection_base_new(w->base, NULL, be->addr, be->port);
    if (!bc->evcon) {
        free(bc);
        return NULL;
    }
    evhttp_connection_set_timeout_tv(bc->evcon, &cfg.backend_timeout);
    evhttp_connection_set_retries(bc->evcon, 0);
    evhttp_connection_set_max_headers_size(bc->evcon, (ev_ssize_t)(cfg.max_headers * 4));
    return bc;
}

/* May be called from inside the connection's own callbacks: an excess connection is freed later. */
static void pool_put(struct worker *w, struct backend *be, struct bconn *bc)
{
    if (!bc)
        return;
    struct pool *pl = &be->pools[w->id];
    if (pl->nidle < cfg.max_idle) {
        bc->next = pl->idle;
        pl->idle = bc;
        pl->nidle++;
        return;
    }
    bc->next = w->dead;
    w->dead = bc;
    event_active(w->free_ev, 0, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* hop-by-hop headers (RFC 9110 section 7.6.1)                                                 */

static const char *const hop_by_hop[] = {
    "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
    NULL,
};

static bool token_listed(const struct evkeyvalq *src, const char *name)
{
    size_t nl = strlen(name);
    const struct evkeyval *h;
    TAILQ_FOREACH(h, src, next)
    {
        if (strcasecmp(h->key, "Connection") != 0)
            continue;
        const char *p = h->value;
        while (*p) {
            while (*p == ' ' || *p == '\t' || *p == ',')
                p++;
            const char *s = p;
            while (*p && *p != ',' && *p != ' ' && *p != '\t')
                p++;
            if ((size_t)(p - s) == nl && strncasecmp(s, name, nl) == 0)
                return true;
        }
    }
    return false;
}

static bool is_hop_by_hop(const struct evkeyvalq *src, const char *name)
{
    for (const char *const *h = hop_by_hop; *h; h++)
        if (strcasecmp(*h, name) == 0)
            return true;
    return token_listed(src, name);
}

/* Copies end-to-end headers; skip names in extra (NULL-terminated) as well. */
static void copy_headers(const struct evkeyvalq *src, struct evkeyvalq *dst, const char *const *extra)
{
    const struct evkeyval *h;
    TAILQ_FOREACH(h, src, next)
    {
        if (is_hop_by_hop(src, h->key))
            continue;
        bool skip = false;
        for (const char *const *e = extra; e && *e; e++)
            if (strcasecmp(*e, h->key) == 0) {
                skip = true;
                break;
            }
        if (!skip)
            evhttp_add_header(dst, h->key, h->value);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* the proxying of one request                                                                 */

struct proxy {
    struct worker *w;
    struct evhttp_request *req;         /* the client's request */
    struct evhttp_connection *cevcon;   /* its connection */
    struct evhttp_request *breq;        /* the backend request in flight, or NULL */
    struct bconn *bc;                   /* its connection */
    struct backend *be;                 /* the backend of this attempt */
    chring_lease_t lease;               /* first attempt */
    char *key;
    size_t keylen;
    int attempt;                        /* 0, 1 */
    int berr;                           /* last evhttp_request_error seen, -1 none */
    bool headers_sent;
    bool cancelling;
    bool paused;                        /* backend reads paused: the client is slow */
    struct proxy *prev, *next;          /* worker->active */
};

static void proxy_unlink(struct proxy *p)
{
    struct worker *w = p->w;
    if (p->prev)
        p->prev->next = p->next;
    else if (w->active == p)
        w->active = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
}

/* Releases everything the proxy holds on the ring and frees it.  The client request must be
 * answered (or gone) already. */
static void proxy_finish(struct proxy *p)
{
    if (p->breq) { /* should not happen; be safe */
        struct evhttp_request *b = p->breq;
        p->breq = NULL;
        p->cancelling = true;
        evhttp_cancel_request(b);
    }
    if (p->bc) {
        pool_put(p->w, p->be, p->bc);
        p->bc = NULL;
    }
    chring_release(ring, &p->lease);
    proxy_unlink(p);
    SUB(p->w->active_n, 1);
    free(p->key);
    free(p);
}

static void send_text(struct evhttp_request *req, int code, const char *reason, const char *body)
{
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add_printf(b, "%s\n", body);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain");
    evhttp_send_reply(req, code, reason, b);
    if (b)
        evbuffer_free(b);
}

/* Answers the client (before any byte of the answer went out) and finishes. */
static void proxy_fail(struct proxy *p, int code, const char *reason, const char *body)
{
    evhttp_connection_set_closecb(p->cevcon, NULL, NULL);
    send_text(p->req, code, reason, body);
    p->req = NULL;
    proxy_finish(p);
}

static void on_client_close(struct evhttp_connection *evcon, void *arg)
{
    struct proxy *p = arg;
    evhttp_connection_set_closecb(evcon, NULL, NULL);
    ADD(p->w->client_gone, 1);
    if (p->breq) {
        struct evhttp_request *b = p->breq;
        p->breq = NULL;
        p->cancelling = true;
        evhttp_cancel_request(b); /* frees it and resets its connection; our done cb is not run */
        p->cancelling = false;
    }
    /* A request detached from its dying connection is ours to free; one still attached is freed
     * by the connection. */
    if (p->req && evhttp_request_get_connection(p->req) == NULL)
        evhttp_request_free(p->req);
    p->req = NULL;
    proxy_finish(p);
}

static void on_backend_error(enum evhttp_request_error err, void *arg)
{
    struct proxy *p = arg;
    p->berr = (int)err;
}

static int on_backend_headers(struct evhttp_request *breq, void *arg)
{
    struct proxy *p = arg;
    if (p->headers_sent || !p->req)
        return 0;
    struct evkeyvalq *out = evhttp_request_get_output_headers(p->req);
    copy_headers(evhttp_request_get_input_headers(breq), out, NULL);
    int code = evhttp_request_get_response_code(breq);
    const char *reason = evhttp_request_get_response_code_line(breq);
    evhttp_send_reply_start(p->req, code, reason && *reason ? reason : NULL);
    p->headers_sent = true;
    return 0;
}

/* The client connection's output buffer has been written out (evcon's write callback; set for
 * each chunk, replaced by evhttp_send_reply_end, gone with the connection). */
static void on_client_drained(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct proxy *p = arg;
    if (p->paused && p->bc) {
        struct bufferevent *bbev = evhttp_connection_get_bufferevent(p->bc->evcon);
        if (bbev)
            bufferevent_enable(bbev, EV_READ);
    }
    p->paused = false;
}

static void on_backend_chunk(struct evhttp_request *breq, void *arg)
{
    struct proxy *p = arg;
    struct evbuffer *in = evhttp_request_get_input_buffer(breq);
    if (!p->req || !p->headers_sent) {
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    ADD(p->be->bytes_out, evbuffer_get_length(in));
    evhttp_send_reply_chunk_with_cb(p->req, in, on_client_drained, p);
    /* Backpressure: a client slower than its backend would make us buffer the whole answer.
     * Above the high-water mark, stop reading from the backend until the client's output has
     * drained (on_client_drained). */
    struct bufferevent *cbev = evhttp_connection_get_bufferevent(p->cevcon);
    if (p->bc && cbev && evbuffer_get_length(bufferevent_get_output(cbev)) > cfg.high_water) {
        struct bufferevent *bbev = evhttp_connection_get_bufferevent(p->bc->evcon);
        if (bbev) {
            bufferevent_disable(bbev, EV_READ);
            p->paused = true;
            ADD(p->w->pauses, 1);
        }
    }
}

static int proxy_start_attempt(struct proxy *p);

/* The key's next replica: the first of the key's two replicas that is not the failed backend.
 * The first lease is released and the replica leased with chring_acquire_member (no capacity
 * check: the request has to go somewhere), so the retry counts in the ring's m and in the
 * replica's load like any request. */
static bool proxy_retry(struct proxy *p)
{
    struct backend *failed = p->be;
    const chring_snap_t *s = chring_snap_enter(ring);
    const chring_member_t *rep[2];
    size_t n = chring_snap_lookup_n(s, p->key, p->keylen, rep, 2);
    const chring_member_t *target = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(chring_member_name(rep[i]), failed->name) != 0) {
            target = rep[i];
            break;
        }
    chring_lease_t retry;
    if (!target || chring_acquire_member(ring, s, target, &retry) != 0) {
        chring_snap_exit(ring, s);
        return false;
    }
    chring_snap_exit(ring, s);
    chring_release(ring, &p->lease);
    p->lease = retry;
    p->be = chring_member_udata(retry.member);
    ADD(p->be->retries_in, 1);
    ADD(p->w->retries, 1);
    p->attempt = 1;
    if (cfg.verbose)
        logf_("retry %.*s: %s -> %s", (int)p->keylen, p->key, failed->name, p->be->name);
    return proxy_start_attempt(p) == 0;
}

static void on_backend_done(struct evhttp_request *breq, void *arg)
{
    struct proxy *p = arg;
    if (p->cancelling)
        return;
    struct worker *w = p->w;
    bool ok = breq != NULL && evhttp_request_get_response_code(breq) != 0;
    struct bconn *bc = p->bc;
    p->bc = NULL;
    p->breq = NULL;
    pool_put(w, p->be, bc); /* a failed connection was reset; it reconnects on its next use */

    backend_mark(p->be, ok);
    if (!ok) {
        ADD(p->be->failures, 1);
        if (!p->headers_sent) {
            if (p->attempt == 0 && proxy_retry(p))
                return;
            ADD(w->bad_gateway, 1);
            proxy_fail(p, 502, "Bad Gateway",
                       p->berr == EVREQ_HTTP_TIMEOUT ? "backend timed out" : "backend unavailable");
            return;
        }
        /* The answer broke off midway: the client must not take it for complete. */
        ADD(w->aborts, 1);
        evhttp_connection_set_closecb(p->cevcon, NULL, NULL);
        evhttp_connection_free(p->cevcon); /* frees p->req too */
        p->req = NULL;
        proxy_finish(p);
        return;
    }
    if (!p->headers_sent)
        on_backend_headers(breq, p);
    struct evbuffer *in = evhttp_request_get_input_buffer(breq);
    if (evbuffer_get_length(in) > 0)
        evhttp_send_reply_chunk(p->req, in);
    ADD(w->proxied, 1);
    evhttp_connection_set_closecb(p->cevcon, NULL, NULL);
    evhttp_send_reply_end(p->req);
    p->req = NULL;
    proxy_finish(p);
}

/* Copies the body without consuming it (a retry sends it again). */
static int copy_body(struct evbuffer *dst, struct evbuffer *src)
{
    size_t len = evbuffer_get_length(src);
    if (len == 0)
        return 0;
    int n = evbuffer_peek(src, -1, NULL, NULL, 0);
    if (n <= 0)
        return 0;
    struct evbuffer_iovec *v = calloc((size_t)n, sizeof *v);
    if (!v)
        return -1;
    evbuffer_peek(src, -1, NULL, v, n);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = evbuffer_add(dst, v[i].iov_base, v[i].iov_len);
    free(v);
    return rc;
}

static int proxy_start_attempt(struct proxy *p)
{
    struct worker *w = p->w;
    ADD(p->be->requests, 1);
    p->berr = -1;
    p->bc = pool_get(w, p->be);
    if (!p->bc)
        return -1;
    struct evhttp_request *breq = evhttp_request_new(on_backend_done, p);
    if (!breq) {
        pool_put(w, p->be, p->bc);
        p->bc = NULL;
        return -1;
    }
    evhttp_request_set_header_cb(breq, on_backend_headers);
    evhttp_request_set_chunked_cb(breq, on_backend_chunk);
    evhttp_request_set_error_cb(breq, on_backend_error);

    struct evkeyvalq *in = evhttp_request_get_input_headers(p->req);
    struct evkeyvalq *out = evhttp_request_get_output_headers(breq);
    static const char *const req_skip[] = {"Content-Length", "Expect", "X-Forwarded-For", NULL};
    copy_headers(in, out, req_skip);
    if (!evhttp_find_header(out, "Host"))
        evhttp_add_header(out, "Host", p->be->hosthdr);
    char *peer = NULL;
    ev_uint16_t pport = 0;
    evhttp_connection_get_peer(p->cevcon, &peer, &pport);
    const char *xff = evhttp_find_header(in, "X-Forwarded-For");
    if (peer) {
        if (xff) {
            char buf[1024];
            snprintf(buf, sizeof buf, "%s, %s", xff, peer);
            evhttp_add_header(out, "X-Forwarded-For", buf);
        } else {
            evhttp_add_header(out, "X-Forwarded-For", peer);
        }
    }
    struct evbuffer *body = evhttp_request_get_input_buffer(p->req);
    size_t blen = evbuffer_get_length(body);
    enum evhttp_cmd_type cmd = evhttp_request_get_command(p->req);
    if (blen > 0 || evhttp_find_header(in, "Content-Length") || evhttp_find_header(in, "Transfer-Encoding") ||
        cmd == EVHTTP_REQ_POST || cmd == EVHTTP_REQ_PUT || cmd == EVHTTP_REQ_PATCH) {
        char lenbuf[32];
        snprintf(lenbuf, sizeof lenbuf, "%zu", blen);
        evhttp_add_header(out, "Content-Length", lenbuf);
    }
    if (copy_body(evhttp_request_get_output_buffer(breq), body) < 0) {
        evhttp_request_free(breq);
        pool_put(w, p->be, p->bc);
        p->bc = NULL;
        return -1;
    }

    /* origin-form target: the request-target as sent, or path?query of an absolute-form one */
    const char *uri = evhttp_request_get_uri(p->req);
    char *built = NULL;
    if (uri[0] != '/') {
        const struct evhttp_uri *pu = evhttp_request_get_evhttp_uri(p->req);
        const char *path = pu ? evhttp_uri_get_path(pu) : NULL;
        const char *query = pu ? evhttp_uri_get_query(pu) : NULL;
        if (!path || !*path)
            path = "/";
        if (asprintf(&built, "%s%s%s", path, query ? "?" : "", query ? query : "") < 0)
            built = NULL;
        uri = built ? built : "/";
    }
    p->breq = breq;
    int rc = evhttp_make_request(p->bc->evcon, breq, cmd, uri);
    free(built);
    if (rc != 0) { /* the request was freed by evhttp_make_request */
        p->breq = NULL;
        pool_put(w, p->be, p->bc);
        p->bc = NULL;
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* routing key                                                                                 */

/* nginx's $arg_NAME: the first argument whose name matches case-insensitively, raw (not
 * decoded); a missing argument gives the empty key. */
static const char *query_arg(const char *q, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    const char *p = q;
    while (p && *p) {
        const char *amp = strchr(p, '&');
        const char *end = amp ? amp : p + strlen(p);
        if ((size_t)(end - p) >= nl && strncasecmp(p, name, nl) == 0 && (p[nl] == '=' || p + nl == end)) {
            const char *v = p + nl;
            if (v < end && *v == '=')
                v++;
            *len = (size_t)(end - v);
            return v;
        }
        p = amp ? amp + 1 : NULL;
    }
    *len = 0;
    return "";
}

static void request_key(struct evhttp_request *req, const char **key, size_t *len)
{
    const struct evhttp_uri *pu = evhttp_request_get_evhttp_uri(req);
    *key = "";
    *len = 0;
    switch (cfg.key_kind) {
    case KEY_PATH: {
        const char *path = pu ? evhttp_uri_get_path(pu) : NULL;
        if (!path || !*path)
            path = "/";
        *key = path;
        *len = strlen(path);
        break;
    }
    case KEY_HEADER: {
        const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), cfg.key_name);
        *key = v ? v : "";
        *len = strlen(*key);
        break;
    }
    case KEY_QUERY: {
        const char *q = pu ? evhttp_uri_get_query(pu) : NULL;
        *key = query_arg(q ? q : "", cfg.key_name, len);
        break;
    }
    }
    if (cfg.key_prefix && *len > cfg.key_prefix)
        *len = cfg.key_prefix;
}

/* ------------------------------------------------------------------------------------------ */
/* GET /_chring/stats                                                                          */

static void json_str(struct evbuffer *b, const char *s)
{
    evbuffer_add(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            evbuffer_add_printf(b, "\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f)
            evbuffer_add_printf(b, "\\u%04x", *c);
        else
            evbuffer_add(b, c, 1);
    }
    evbuffer_add(b, "\"", 1);
}

static void serve_stats(struct worker *w, struct evhttp_request *req)
{
    ADD(w->stats_served, 1);
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    chring_stats_t st;
    chring_stats(ring, &st);
    const chring_snap_t *s = chring_snap_enter(ring);
    const char *pname = chring_profile_name(chring_snap_profile(s));
    evbuffer_add_printf(b, "{\"ring\":{\"profile\":");
    json_str(b, pname ? pname : "?");
    evbuffer_add_printf(b,
                        ",\"balance\":%.17g,\"version\":%llu,\"publishes\":%llu,\"members\":%llu,"
                        "\"points\":%llu,\"leases\":%llu,\"acquires\":%llu,\"spills\":%llu,"
                        "\"saturated\":%llu},\n\"members\":[",
                        cfg.balance, (unsigned long long)st.version, (unsigned long long)st.publishes,
                        (unsigned long long)st.members, (unsigned long long)st.points,
                        (unsigned long long)st.leases, (unsigned long long)st.acquires,
                        (unsigned long long)st.spills, (unsigned long long)st.saturated);
    size_t n = chring_snap_len(s);
    for (size_t i = 0; i < n; i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        chring_member_stats_t ms;
        chring_member_stats(m, &ms);
        struct backend *be = chring_member_udata(m);
        evbuffer_add_printf(b, "%s\n {\"name\":", i ? "," : "");
        json_str(b, chring_member_name(m));
        evbuffer_add_printf(b,
                            ",\"weight\":%u,\"load\":%llu,\"capacity\":%llu,\"acquires\":%llu,"
                            "\"primary\":%llu,\"spilled_in\":%llu,\"share\":%.6f",
                            chring_snap_weight(s, m), (unsigned long long)ms.load,
                            (unsigned long long)chring_member_capacity(ring, s, m),
                            (unsigned long long)ms.acquires, (unsigned long long)ms.primary,
                            (unsigned long long)ms.spilled_in, chring_member_share(s, m));
        if (be)
            evbuffer_add_printf(b,
                                ",\"requests\":%llu,\"failures\":%llu,\"retries_in\":%llu,"
                                "\"bytes_out\":%llu,\"skipped\":%llu,"
                                "\"down\":%s",
                                (unsigned long long)GET(be->requests), (unsigned long long)GET(be->failures),
                                (unsigned long long)GET(be->retries_in),
                                (unsigned long long)GET(be->bytes_out), (unsigned long long)GET(be->skipped),
                                backend_down(be) ? "true" : "false");
        evbuffer_add(b, "}", 1);
    }
    chring_snap_exit(ring, s);
    uint64_t t[10] = {0};
    for (unsigned i = 0; i < cfg.threads; i++) {
        struct worker *x = &workers[i];
        t[0] += GET(x->requests);
        t[1] += GET(x->proxied);
        t[2] += GET(x->retries);
        t[3] += GET(x->bad_gateway);
        t[4] += GET(x->aborts);
        t[5] += GET(x->client_gone);
        t[6] += GET(x->no_backend);
        t[7] += GET(x->stats_served);
        t[8] += GET(x->active_n);
        t[9] += GET(x->pauses);
    }
    evbuffer_add_printf(b,
                        "],\n\"balancer\":{\"threads\":%u,\"requests\":%llu,\"proxied\":%llu,"
                        "\"retries\":%llu,\"bad_gateway\":%llu,\"aborted\":%llu,\"client_gone\":%llu,"
                        "\"no_backend\":%llu,\"stats\":%llu,\"active\":%llu,\"reloads\":%llu,"
                        "\"reload_errors\":%llu,\"backpressure_pauses\":%llu}}\n",
                        cfg.threads, (unsigned long long)t[0], (unsigned long long)t[1],
                        (unsigned long long)t[2], (unsigned long long)t[3], (unsigned long long)t[4],
                        (unsigned long long)t[5], (unsigned long long)t[6], (unsigned long long)t[7],
                        (unsigned long long)t[8], (unsigned long long)GET(g_reloads),
                        (unsigned long long)GET(g_reload_errors), (unsigned long long)t[9]);
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    evhttp_add_header(oh, "Content-Type", "application/json");
    evhttp_add_header(oh, "Cache-Control", "no-store");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* request entry point                                                                         */

static void on_request(struct evhttp_request *req, void *arg)
{
    struct worker *w = arg;
    ADD(w->requests, 1);
    const struct evhttp_uri *pu = evhttp_request_get_evhttp_uri(req);
    const char *path = pu ? evhttp_uri_get_path(pu) : NULL;
    if (path && strcmp(path, "/_chring/stats") == 0) {
        enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
        if (cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD)
            serve_stats(w, req);
        else
            send_text(req, 405, "Method Not Allowed", "GET only");
        return;
    }
    struct evhttp_connection *cevcon = evhttp_request_get_connection(req);
    if (!cevcon) { /* cannot happen in a server callback; be safe */
        evhttp_request_free(req);
        return;
    }
    const char *key;
    size_t keylen;
    request_key(req, &key, &keylen);

    struct proxy *p = calloc(1, sizeof *p);
    if (!p || !(p->key = malloc(keylen + 1))) {
        free(p);
        send_text(req, 503, "Service Unavailable", "out of memory");
        return;
    }
    memcpy(p->key, key, keylen);
    p->key[keylen] = '\0';
    p->keylen = keylen;
    p->w = w;
    p->req = req;
    p->cevcon = cevcon;
    p->next = w->active;
    if (w->active)
        w->active->prev = p;
    w->active = p;
    ADD(w->active_n, 1);

    int rc = chring_acquire(ring, p->key, p->keylen, &p->lease);
    if (rc != 0) {
        ADD(w->no_backend, 1);
        proxy_fail(p, 503, "Service Unavailable", "no backend");
        return;
    }
    p->be = chring_member_udata(p->lease.member);
    evhttp_connection_set_closecb(cevcon, on_client_close, p);
    /* Passive health: a backend that failed less than --fail-timeout ago is not tried; its keys
     * go to their next replica at once (if that one is down too, it is tried anyway). */
    if (backend_down(p->be)) {
        ADD(p->be->skipped, 1);
        if (proxy_retry(p))
            return;
        if (p->attempt == 1) { /* the replica could not be tried */
            ADD(w->bad_gateway, 1);
            proxy_fail(p, 502, "Bad Gateway", "cannot reach backend");
            return;
        }
    }
    if (proxy_start_attempt(p) != 0) {
        ADD(p->be->failures, 1);
        if (proxy_retry(p))
            return;
        ADD(w->bad_gateway, 1);
        proxy_fail(p, 502, "Bad Gateway", "cannot reach backend");
    }
}

/* ------------------------------------------------------------------------------------------ */
/* workers                                                                                     */

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    event_base_loopbreak(w->base);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    event_base_dispatch(w->base);
    return NULL;
}

static int listen_socket(bool reuseport)
{
    struct addrinfo hints = {0}, *res = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", cfg.listen_port);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int gai = getaddrinfo(cfg.listen_host, port, &hints, &res);
    if (gai != 0) {
        logf_("listen %s:%s: %s", cfg.listen_host, port, gai_strerror(gai));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(res);
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
#ifdef SO_REUSEPORT
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) {
        close(fd);
        freeaddrinfo(res);
        return -2;
    }
#else
    if (reuseport) {
        close(fd);
        freeaddrinfo(res);
        return -2;
    }
#endif
    if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
        logf_("listen %s:%s: %s", cfg.listen_host, port, strerror(errno));
        close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    return fd;
}

static int worker_init(struct worker *w, unsigned id, int shared_fd)
{
    w->id = id;
    w->base = event_base_new();
    if (!w->base)
        return -1;
    w->http = evhttp_new(w->base);
    w->stop_ev = event_new(w->base, -1, 0, on_stop, w);
    w->reap_ev = event_new(w->base, -1, 0, on_reap, w);
    w->free_ev = event_new(w->base, -1, 0, on_free_dead, w);
    if (!w->http || !w->stop_ev || !w->reap_ev || !w->free_ev)
        return -1;
    evhttp_set_gencb(w->http, on_request, w);
    evhttp_set_timeout_tv(w->http, &cfg.client_timeout);
    evhttp_set_max_headers_size(w->http, (ev_ssize_t)cfg.max_headers);
    evhttp_set_max_body_size(w->http, (ev_ssize_t)cfg.max_body);
    evhttp_set_allowed_methods(w->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                                            EVHTTP_REQ_PATCH);
    evhttp_set_default_content_type(w->http, NULL);
    int fd = shared_fd;
    if (fd < 0) {
        fd = listen_socket(true);
        if (fd < 0)
            return fd;
    } else {
        fd = dup(shared_fd);
        if (fd < 0)
            return -1;
    }
    if (!evhttp_accept_socket_with_handle(w->http, fd)) {
        close(fd);
        return -1;
    }
    return 0;
}

static void worker_cleanup(struct worker *w)
{
    /* Freeing the server closes the client connections; the close callbacks cancel backend
     * requests and release leases. */
    if (w->http)
        evhttp_free(w->http);
    w->http = NULL;
    while (w->active) { /* any left (cannot normally happen) */
        struct proxy *p = w->active;
        p->req = NULL;
        proxy_finish(p);
    }
    on_free_dead(-1, 0, w);
}

static void worker_free(struct worker *w)
{
    if (w->stop_ev)
        event_free(w->stop_ev);
    if (w->reap_ev)
        event_free(w->reap_ev);
    if (w->free_ev)
        event_free(w->free_ev);
    if (w->base)
        event_base_free(w->base);
}

/* ------------------------------------------------------------------------------------------ */
/* membership                                                                                  */

/* Makes the ring's membership exactly --backend plus the members file.  Main thread only (the
 * only writer), so a name found in the snapshot is still a member when chring_sync runs. */
static int apply_membership(bool initial)
{
    lb_entries_t es = {0};
    char msg[512] = "";
    const char *err = NULL;
    for (size_t i = 0; i < cfg.static_entries.n; i++) {
        char tok[300];
        snprintf(tok, sizeof tok, "%s=%u", cfg.static_entries.v[i].name, cfg.static_entries.v[i].weight);
        if (lb_entries_put(&es, tok, &err) < 0) {
            logf_("%s", err);
            lb_entries_free(&es);
            return -1;
        }
    }
    if (cfg.members_file && lb_entries_read_file(&es, cfg.members_file, msg, sizeof msg) < 0) {
        logf_("%s; membership unchanged", msg);
        lb_entries_free(&es);
        return -1;
    }
    chring_change_t *ch = calloc(es.n ? es.n : 1, sizeof *ch);
    struct backend **fresh = calloc(es.n ? es.n : 1, sizeof *fresh);
    if (!ch || !fresh) {
        free(ch);
        free(fresh);
        lb_entries_free(&es);
        return -1;
    }
    int rc = 0;
    const chring_snap_t *s = chring_snap_enter(ring);
    for (size_t i = 0; i < es.n; i++) {
        ch[i].name = es.v[i].name;
        ch[i].weight = es.v[i].weight;
        const chring_member_t *m = chring_snap_find(s, es.v[i].name);
        if (m) {
            ch[i].udata = chring_member_udata(m);
            continue;
        }
        fresh[i] = backend_new(es.v[i].name, msg, sizeof msg);
        if (!fresh[i]) {
            logf_("%s; membership unchanged", msg);
            rc = -1;
            break;
        }
        ch[i].udata = fresh[i];
    }
    chring_snap_exit(ring, s);
    if (rc == 0) {
        rc = chring_sync(ring, ch, es.n);
        if (rc < 0)
            logf_("chring_sync: %s; membership unchanged", chring_strerror(rc));
    }
    if (rc < 0) {
        for (size_t i = 0; i < es.n; i++)
            if (fresh[i])
                backend_discard(fresh[i]);
    } else {
        chring_stats_t st;
        chring_stats(ring, &st);
        logf_("%s: %zu members, ring version %llu", initial ? "loaded" : "reloaded", es.n,
              (unsigned long long)st.version);
    }
    free(ch);
    free(fresh);
    lb_entries_free(&es);
    return rc;
}

static struct event_base *main_base;

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (sig == SIGHUP) {
        if (apply_membership(false) == 0)
            ADD(g_reloads, 1);
        else
            ADD(g_reload_errors, 1);
        return;
    }
    logf_("signal %d: shutting down", (int)sig);
    event_base_loopbreak(main_base);
}

/* ------------------------------------------------------------------------------------------ */
/* options                                                                                     */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: chring-lb [options] --backend HOST:PORT[=WEIGHT]... | --members FILE\n"
            "  --listen HOST:PORT        listen address (default 127.0.0.1:8080)\n"
            "  --threads N               worker threads (default: one per core)\n"
            "  --backend HOST:PORT[=W]   a backend (repeatable); its member name is HOST:PORT as written\n"
            "  --members FILE            backends, one HOST:PORT[=W] per line, '#' comments;\n"
            "                            re-read on SIGHUP and applied with chring_sync\n"
            "  --key path|header:NAME|query:NAME   routing key (default path)\n"
            "  --key-prefix N            route by the key's first N bytes\n"
            "  --profile NAME            hash64 (default), xxh3, murmur32, fnv32, fnv16, ketama, nginx\n"
            "  --vnodes N                points per unit of weight (default 160)\n"
            "  --balance C               bounded-load factor c (default 1.25)\n"
            "  --backend-timeout SECS    connect/read timeout towards backends (default 3)\n"
            "  --client-timeout SECS     idle timeout of client connections (default 15)\n"
            "  --fail-timeout SECS       after a failure, send a backend's keys to their next replica\n"
            "                            for this long without trying it (default 1; 0: off)\n"
            "  --max-headers BYTES       largest request header block (default 8192)\n"
            "  --max-body BYTES          largest request body, buffered (default 16777216)\n"
            "  --max-idle N              idle backend connections per backend per thread (default 64)\n"
            "  --verbose                 log retries and retirements\n"
            "GET /_chring/stats answers the ring's and every member's statistics as JSON.\n");
}

static int parse_secs(const char *s, struct timeval *tv)
{
    char *end;
    double d = strtod(s, &end);
    if (*end || !(d > 0) || d > 86400)
        return -1;
    tv->tv_sec = (time_t)d;
    tv->tv_usec = (suseconds_t)((d - (double)tv->tv_sec) * 1e6);
    return 0;
}

static int parse_size(const char *s, size_t *out, size_t lo, size_t hi)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || s[0] == '-' || v < lo || v > hi)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_args(int argc, char **argv)
{
    enum { O_LISTEN = 256, O_THREADS, O_BACKEND, O_MEMBERS, O_KEY, O_KEYPREFIX, O_PROFILE, O_VNODES,
           O_BALANCE, O_BTIMEOUT, O_CTIMEOUT, O_FAILTIMEOUT, O_MAXHDR, O_MAXBODY, O_MAXIDLE, O_VERBOSE, O_HELP };
    static const struct option opts[] = {
        {"listen", required_argument, 0, O_LISTEN},
        {"threads", required_argument, 0, O_THREADS},
        {"backend", required_argument, 0, O_BACKEND},
        {"members", required_argument, 0, O_MEMBERS},
        {"key", required_argument, 0, O_KEY},
        {"key-prefix", required_argument, 0, O_KEYPREFIX},
        {"profile", required_argument, 0, O_PROFILE},
        {"vnodes", required_argument, 0, O_VNODES},
        {"balance", required_argument, 0, O_BALANCE},
        {"backend-timeout", required_argument, 0, O_BTIMEOUT},
        {"client-timeout", required_argument, 0, O_CTIMEOUT},
        {"fail-timeout", required_argument, 0, O_FAILTIMEOUT},
        {"max-headers", required_argument, 0, O_MAXHDR},
        {"max-body", required_argument, 0, O_MAXBODY},
        {"max-idle", required_argument, 0, O_MAXIDLE},
        {"verbose", no_argument, 0, O_VERBOSE},
        {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0},
    };
    snprintf(cfg.listen_host, sizeof cfg.listen_host, "127.0.0.1");
    cfg.listen_port = 8080;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    cfg.threads = ncpu > 0 ? (unsigned)ncpu : 1;
    cfg.key_kind = KEY_PATH;
    cfg.profile = CHRING_PROFILE_HASH64;
    cfg.vnodes = CHRING_DEFAULT_VNODES;
    cfg.balance = CHRING_DEFAULT_BALANCE;
    cfg.backend_timeout = (struct timeval){3, 0};
    cfg.client_timeout = (struct timeval){15, 0};
    cfg.max_headers = 8192;
    cfg.max_body = 16u << 20;
    cfg.max_idle = 64;
    cfg.high_water = 256u << 10;
    cfg.fail_timeout_ms = 1000;
    int c;
    size_t v;
    const char *err;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_LISTEN: {
            uint16_t port;
            if (lb_split_hostport(optarg, cfg.listen_host, sizeof cfg.listen_host, &port) < 0) {
                fprintf(stderr, "chring-lb: --listen %s: expected HOST:PORT\n", optarg);
                return -1;
            }
            cfg.listen_port = port;
            break;
        }
        case O_THREADS:
            if (parse_size(optarg, &v, 1, 256) < 0) {
                fprintf(stderr, "chring-lb: --threads: 1..256\n");
                return -1;
            }
            cfg.threads = (unsigned)v;
            break;
        case O_BACKEND:
            if (lb_entries_put(&cfg.static_entries, optarg, &err) < 0) {
                fprintf(stderr, "chring-lb: --backend %s: %s\n", optarg, err);
                return -1;
            }
            break;
        case O_MEMBERS:
            cfg.members_file = optarg;
            break;
        case O_KEY:
            if (strcmp(optarg, "path") == 0) {
                cfg.key_kind = KEY_PATH;
            } else if (strncmp(optarg, "header:", 7) == 0 && optarg[7]) {
                cfg.key_kind = KEY_HEADER;
                cfg.key_name = optarg + 7;
            } else if (strncmp(optarg, "query:", 6) == 0 && optarg[6]) {
                cfg.key_kind = KEY_QUERY;
                cfg.key_name = optarg + 6;
            } else {
                fprintf(stderr, "chring-lb: --key: path, header:NAME or query:NAME\n");
                return -1;
            }
            break;
        case O_KEYPREFIX:
            if (parse_size(optarg, &cfg.key_prefix, 1, 1u << 20) < 0) {
                fprintf(stderr, "chring-lb: --key-prefix: a positive number of bytes\n");
                return -1;
            }
            break;
        case O_PROFILE:
            if (chring_profile_parse(optarg, &cfg.profile) < 0 || cfg.profile == CHRING_PROFILE_CUSTOM) {
                fprintf(stderr, "chring-lb: --profile %s: unknown\n", optarg);
                return -1;
            }
            break;
        case O_VNODES:
            if (parse_size(optarg, &v, 1, CHRING_POINTS_MAX) < 0) {
                fprintf(stderr, "chring-lb: --vnodes: 1..%u\n", CHRING_POINTS_MAX);
                return -1;
            }
            cfg.vnodes = (uint32_t)v;
            break;
        case O_BALANCE: {
            char *end;
            cfg.balance = strtod(optarg, &end);
            if (*end || !isfinite(cfg.balance) || cfg.balance < 1) {
                fprintf(stderr, "chring-lb: --balance: a number >= 1\n");
                return -1;
            }
            break;
        }
        case O_BTIMEOUT:
            if (parse_secs(optarg, &cfg.backend_timeout) < 0) {
                fprintf(stderr, "chring-lb: --backend-timeout: seconds > 0\n");
                return -1;
            }
            break;
        case O_CTIMEOUT:
            if (parse_secs(optarg, &cfg.client_timeout) < 0) {
                fprintf(stderr, "chring-lb: --client-timeout: seconds > 0\n");
                return -1;
            }
            break;
        case O_FAILTIMEOUT: {
            char *end;
            double d = strtod(optarg, &end);
            if (*end || !(d >= 0) || d > 86400) {
                fprintf(stderr, "chring-lb: --fail-timeout: seconds >= 0\n");
                return -1;
            }
            cfg.fail_timeout_ms = (int64_t)(d * 1000);
            break;
        }
        case O_MAXHDR:
            if (parse_size(optarg, &cfg.max_headers, 256, 1u << 20) < 0) {
                fprintf(stderr, "chring-lb: --max-headers: 256..1048576\n");
                return -1;
            }
            break;
        case O_MAXBODY:
            if (parse_size(optarg, &cfg.max_body, 0, (size_t)1 << 31) < 0) {
                fprintf(stderr, "chring-lb: --max-body: 0..2147483648\n");
                return -1;
            }
            break;
        case O_MAXIDLE:
            if (parse_size(optarg, &v, 0, 100000) < 0) {
                fprintf(stderr, "chring-lb: --max-idle: 0..100000\n");
                return -1;
            }
            cfg.max_idle = (unsigned)v;
            break;
        case O_VERBOSE:
            cfg.verbose = true;
            break;
        case O_HELP:
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "chring-lb: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (cfg.static_entries.n == 0 && !cfg.members_file) {
        fprintf(stderr, "chring-lb: no backends: give --backend or --members\n");
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    if (parse_args(argc, argv) < 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    if (evthread_use_pthreads() < 0) {
        logf_("evthread_use_pthreads failed");
        return 1;
    }

    int status = 1;
    workers = calloc(cfg.threads, sizeof *workers);
    if (!workers)
        return 1;

    /* listeners: one SO_REUSEPORT socket per worker, else one shared */
    int shared_fd = -1;
    int probe = listen_socket(true);
    if (probe == -2) {
        shared_fd = listen_socket(false);
        if (shared_fd < 0)
            goto out_workers;
    } else if (probe < 0) {
        goto out_workers;
    } else {
        close(probe); /* probe worked; each worker opens its own */
    }
    unsigned started = 0;
    for (unsigned i = 0; i < cfg.threads; i++) {
        if (worker_init(&workers[i], i, shared_fd) < 0) {
            logf_("cannot set up worker %u (listen %s:%u)", i, cfg.listen_host, cfg.listen_port);
            goto out_init;
        }
    }
    if (shared_fd >= 0)
        close(shared_fd);
    shared_fd = -1;

    chring_config_t rc;
    chring_config_default(&rc);
    rc.profile = cfg.profile;
    rc.vnodes = cfg.vnodes;
    rc.balance = cfg.balance;
    rc.retire = on_retire;
    int err = chring_new(&ring, &rc);
    if (err < 0) {
        logf_("chring_new: %s", chring_strerror(err));
        goto out_init;
    }
    if (apply_membership(true) < 0)
        goto out_ring;

    main_base = event_base_new();
    if (!main_base)
        goto out_ring;
    struct event *sig_hup = evsignal_new(main_base, SIGHUP, on_signal, NULL);
    struct event *sig_term = evsignal_new(main_base, SIGTERM, on_signal, NULL);
    struct event *sig_int = evsignal_new(main_base, SIGINT, on_signal, NULL);
    if (!sig_hup || !sig_term || !sig_int || event_add(sig_hup, NULL) || event_add(sig_term, NULL) ||
        event_add(sig_int, NULL)) {
        logf_("cannot install signal handlers");
        goto out_signals;
    }

    /* Workers start with every signal blocked: libevent's signal pipe lives in the main loop. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (; started < cfg.threads; started++)
        if (pthread_create(&workers[started].thread, NULL, worker_main, &workers[started]) != 0)
            break;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started < cfg.threads) {
        logf_("cannot start worker threads");
    } else {
        logf_("listening on %s:%u, %u threads, profile %s, key %s%s%s, balance %g", cfg.listen_host,
              cfg.listen_port, cfg.threads, chring_profile_name(cfg.profile),
              cfg.key_kind == KEY_PATH ? "path" : cfg.key_kind == KEY_HEADER ? "header:" : "query:",
              cfg.key_name ? cfg.key_name : "", "", cfg.balance);
        event_base_dispatch(main_base);
        status = 0;
    }
    for (unsigned i = 0; i < started; i++)
        event_active(workers[i].stop_ev, 0, 0);
    for (unsigned i = 0; i < started; i++)
        pthread_join(workers[i].thread, NULL);

out_signals:
    if (sig_hup)
        event_free(sig_hup);
    if (sig_term)
        event_free(sig_term);
    if (sig_int)
        event_free(sig_int);
    event_base_free(main_base);
out_ring:
    /* Workers are stopped: close client connections (releasing leases), reap what was retired,
     * drop every pool, then free the ring, which retires the remaining members. */
    for (unsigned i = 0; i < cfg.threads; i++)
        if (workers[i].base) {
            worker_cleanup(&workers[i]);
            on_reap(-1, 0, &workers[i]);
        }
    pthread_mutex_lock(&g_be_lock);
    g_shutdown = true;
    for (struct backend *be = g_backends; be; be = be->next)
        for (unsigned i = 0; i < cfg.threads; i++)
            pool_clear(&be->pools[i]);
    pthread_mutex_unlock(&g_be_lock);
    {
        chring_stats_t st;
        chring_stats(ring, &st);
        if (ring)
            logf_("exit: %llu leases outstanding, %llu acquires, %llu spills", (unsigned long long)st.leases,
                  (unsigned long long)st.acquires, (unsigned long long)st.spills);
    }
    chring_free(&ring);
    pthread_mutex_lock(&g_be_lock);
    while (g_backends) { /* retired but not reaped: ours now */
        struct backend *be = g_backends;
        backend_unlink_locked(be);
        backend_destroy(be);
    }
    pthread_mutex_unlock(&g_be_lock);
out_init:
    for (unsigned i = 0; i < cfg.threads; i++) {
        if (workers[i].http)
            worker_cleanup(&workers[i]);
        worker_free(&workers[i]);
    }
    if (shared_fd >= 0)
        close(shared_fd);
out_workers:
    free(workers);
    lb_entries_free(&cfg.static_entries);
    libevent_global_shutdown();
    return status;
}
