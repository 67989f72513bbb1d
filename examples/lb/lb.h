/* chring-lb: the balancer's shared structures and the functions its files call across.
 *
 * SPDX-License-Identifier: MIT
 *
 * chring-lb is a multithreaded HTTP/1.1 reverse proxy that routes each request by a key on a
 * chring ring with bounded loads.
 *
 * Shape.  N worker threads, each with its own libevent event_base and evhttp server accepting on
 * its own SO_REUSEPORT listener (one shared listener when SO_REUSEPORT is unavailable).  A request
 * takes a lease with chring_acquire() on its key; the member's udata is a struct backend holding
 * the address and one idle-connection pool per worker (keep-alive evhttp_connection objects, used
 * only by their worker's thread).  The backend's answer is relayed as it arrives (header callback,
 * then chunk callbacks); the lease is released when the answer has been relayed completely, or the
 * client has gone, or the backend failed.  A backend that refuses or times out before answering
 * is retried once, placed again with bounded loads over every member but the failed one
 * (chring_acquire_skip), then 502.
 *
 * The main thread owns the ring's writer side: it loads the membership, and on SIGHUP re-reads
 * --members and applies it with chring_sync() (connections are not dropped: members that stay
 * keep their object, counters and pools).  A removed member's struct backend is handed to the
 * ring's retire callback, which may run on any thread: it queues the backend and wakes every
 * worker; each worker frees its own pool of it; the last one frees the object.
 *
 * Files, each one concept:
 *   config.c      the options: lb_cfg and its parsing
 *   log.c         the timestamped log line on standard error
 *   backend.c     backend objects, passive health, per-worker connection pools, retirement
 *   http.c        hop-by-hop headers (RFC 9110 section 7.6.1) and plain-text answers
 *   key.c         the routing key of a request
 *   forward.c     the backend request built from the client's request
 *   proxy.c       the proxying of one request: lease, attempts, retry, relay of the answer
 *   stats.c       GET /_chring/stats
 *   worker.c      worker threads: event loop, listener, the request entry point
 *   membership.c  the ring's writer side: --backend plus --members applied with chring_sync
 *   chring-lb.c   main: setup, signals, shutdown
 * members.c (members.h) parses "host:port[=weight]" entries; chring-lb-expect uses it too.
 */
#ifndef CHRING_LB_H
#define CHRING_LB_H

#include "members.h"

#include <chring.h>

#include <arpa/inet.h>
#include <event2/event.h>
#include <event2/http.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

/* Relaxed atomic counters: statistics only, nothing is ordered by them. */
#define ADD(x, v) atomic_fetch_add_explicit(&(x), (v), memory_order_relaxed)
#define SUB(x, v) atomic_fetch_sub_explicit(&(x), (v), memory_order_relaxed)
#define GET(x) atomic_load_explicit(&(x), memory_order_relaxed)

/* ------------------------------------------------------------------------------------------ */
/* configuration (config.c)                                                                    */

enum key_kind {
    KEY_PATH,
    KEY_HEADER,
    KEY_QUERY
};

struct lb_config {
    char listen_host[256];
    uint16_t listen_port;
    unsigned threads;
    enum key_kind key_kind;
    const char *key_name; /* header or query argument name */
    size_t key_prefix;    /* 0: whole key */
    chring_profile_t profile;
    uint32_t vnodes;
    double balance;
    struct timeval backend_timeout;
    struct timeval client_timeout;
    size_t max_headers;
    size_t max_body;
    unsigned max_idle;       /* idle backend connections kept per backend per worker */
    size_t high_water;       /* client output bytes above which backend reads pause */
    int64_t fail_timeout_ms; /* after a failure, send the backend's keys to the next replica */
    const char *members_file;
    lb_entries_t static_entries; /* from --backend */
    bool verbose;
};

/* Set once by lb_config_parse before any thread starts; read-only afterwards. */
extern struct lb_config lb_cfg;

/* Fills lb_cfg from the command line.  Returns 0, or -1 after printing why on standard error;
 * --help prints the usage and exits 0. */
int lb_config_parse(int argc, char **argv);

/* ------------------------------------------------------------------------------------------ */
/* logging (log.c)                                                                             */

/* One line "HH:MM:SS.mmm chring-lb: message" on standard error.  Any thread. */
void lb_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------------------------------ */
/* backends and connection pools (backend.c)                                                   */

struct worker;
struct proxy;

struct bconn { /* one keep-alive connection to a backend, owned by one worker */
    struct evhttp_connection *evcon;
    struct bconn *next;
};

struct pool {
    struct bconn *idle;
    unsigned nidle;
};

struct backend {
    char *name; /* member name, "host:port" as written */
    char addr[INET6_ADDRSTRLEN];
    char hosthdr[300]; /* Host header when the client sent none */
    uint16_t port;
    struct pool *pools; /* [lb_cfg.threads], pools[w] touched only by worker w */
    bool *reaped;       /* [lb_cfg.threads], under the backends' lock */
    unsigned reap_left;
    bool retired;
    struct backend *prev, *next; /* every backend alive, under the backends' lock */
    _Atomic uint64_t requests, failures, retries_in, bytes_out, skipped;
    _Atomic int64_t down_until_ms; /* passive health: skip it until then (CLOCK_MONOTONIC) */
};

/* Resolves name ("host:port") and registers a new backend object.  Returns it, or NULL with a
 * message in err.  Main thread. */
struct backend *lb_backend_new(const char *name, char *err, size_t errcap);
/* Unregisters and frees a backend that never made it into the ring.  Main thread. */
void lb_backend_discard(struct backend *be);
/* The ring's retire callback (chring_config_t.retire): may run on any thread. */
void lb_backend_retire(void *udata, void *ctx);
/* Worker event (arg: the worker): drops the worker's pool of every retired backend; the last
 * worker to do so frees the object.  Also called directly at shutdown. */
void lb_backend_reap_cb(evutil_socket_t fd, short what, void *arg);
/* At shutdown, workers stopped: from now on a retired backend is freed at once; every pool is
 * emptied. */
void lb_backends_shutdown(void);
/* After chring_free: frees every backend still registered (retired but not reaped). */
void lb_backends_free_all(void);

/* Passive health: true while the backend is marked down after a failure. */
bool lb_backend_down(struct backend *be);
/* Records the outcome of an attempt: a success clears the mark, a failure sets it for
 * --fail-timeout. */
void lb_backend_mark(struct backend *be, bool ok);

/* An idle connection of worker w to be, or a new one.  Returns NULL when none can be made.
 * Worker w's thread only. */
struct bconn *lb_pool_get(struct worker *w, struct backend *be);
/* Gives bc (may be NULL) back to worker w's pool of be; an excess connection is freed later, so
 * this may be called from inside the connection's own callbacks.  Worker w's thread only. */
void lb_pool_put(struct worker *w, struct backend *be, struct bconn *bc);
/* Worker event (arg: the worker): frees the connections lb_pool_put set aside. */
void lb_pool_free_dead_cb(evutil_socket_t fd, short what, void *arg);

/* ------------------------------------------------------------------------------------------ */
/* workers (worker.c)                                                                          */

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

/* [lb_cfg.threads], allocated by main before the ring exists. */
extern struct worker *lb_workers;
/* The one ring: created by main before the workers start, freed after they stopped. */
extern chring_t *lb_ring;

/* Opens a listening socket on --listen.  Returns the descriptor, -2 when reuseport was asked
 * for and SO_REUSEPORT is unavailable, -1 on another error (logged). */
int lb_listen_socket(bool reuseport);
/* Sets up worker id: event base, evhttp server, listener (its own, or a dup of shared_fd when
 * that is >= 0).  Returns 0 / -1; on failure lb_worker_free still cleans up. */
int lb_worker_init(struct worker *w, unsigned id, int shared_fd);
/* The thread's body: runs the worker's event loop until its stop event. */
void *lb_worker_main(void *arg);
/* Worker stopped: closes its client connections (releasing their leases) and frees set-aside
 * connections. */
void lb_worker_cleanup(struct worker *w);
void lb_worker_free(struct worker *w);

/* ------------------------------------------------------------------------------------------ */
/* requests: key.c, http.c, forward.c, proxy.c, stats.c                                        */

/* The routing key of req (--key, --key-prefix): points into req, valid while req lives. */
void lb_request_key(struct evhttp_request *req, const char **key, size_t *len);

/* Copies the end-to-end headers of src into dst, skipping the names in extra (NULL-terminated,
 * may be NULL) as well. */
void lb_copy_headers(const struct evkeyvalq *src, struct evkeyvalq *dst, const char *const *extra);
/* Answers req with a text/plain body (body plus a newline). */
void lb_send_text(struct evhttp_request *req, int code, const char *reason, const char *body);

/* Fills the backend request breq from the client's request req on cevcon: end-to-end headers,
 * Host (hosthdr when the client sent none), X-Forwarded-For, Content-Length and a copy of the
 * body (req keeps it for a retry).  Returns 0 / -1 (out of memory). */
int lb_forward_prepare(struct evhttp_request *breq, struct evhttp_request *req,
                       struct evhttp_connection *cevcon, const char *hosthdr);
/* The origin-form target for the backend: req's target as sent, or path?query of an
 * absolute-form one, then *built holds the allocated string (else NULL) for the caller to free. */
const char *lb_forward_target(struct evhttp_request *req, char **built);

/* Proxies req (not the stats endpoint) on worker w: leases a backend and starts the first
 * attempt, or answers 502/503. */
void lb_proxy_start(struct worker *w, struct evhttp_request *req);
/* Worker stopped, server freed: finishes every proxy left on w. */
void lb_proxy_drop_all(struct worker *w);

/* Answers GET (or HEAD) /_chring/stats with the ring's, every member's and the balancer's
 * statistics as JSON; any other method 405. */
void lb_stats_serve(struct worker *w, struct evhttp_request *req);

/* ------------------------------------------------------------------------------------------ */
/* membership (membership.c)                                                                   */

/* Successful and failed SIGHUP reloads, for the stats. */
extern _Atomic uint64_t lb_reloads, lb_reload_errors;

/* Makes the ring's membership exactly --backend plus the members file (logged).  Main thread
 * only.  Returns 0, or -1 with the membership unchanged. */
int lb_membership_apply(bool initial);
/* SIGHUP: lb_membership_apply(false), counted in lb_reloads or lb_reload_errors. */
void lb_membership_reload(void);

#endif
