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
 *   backend.c     backend objects, per-worker connection pools, retirement
 *   h1.c          strict HTTP/1.1 framing: message heads and bodies parsed from bytes
 *   guard.c       the request guard: client bytes checked and normalised before evhttp reads them
 *   http.c        hop-by-hop headers (RFC 9110 section 7.6.1) and plain-text answers
 *   key.c         the routing key of a request
 *   forward.c     the backend request built from the client's request
 *   proxy.c       the proxying of one request: lease, attempts, retry, relay of the answer
 *   limits.c      limits: connections (accept paused at the limit, EMFILE backoff), requests in
 *                 flight, buffered body bytes in all
 *   stats.c       GET /_chring/stats: the JSON, O(points) per request
 *   status.c      the stats listener (--stats-listen, --stats-allow) and the status page
 *                 GET /_chring/
 *   worker.c      worker threads: event loop, listener, the request entry point
 *   membership.c  the ring's writer side: --backend plus --members (or etcd's set) applied
 *                 with chring_sync, members leaving through a drain kept until they leave
 *   health.c      passive health through the ring (chring_set_down), drains, on the main thread
 *   etcd.c        the membership from etcd: range, then watch, over etcd's v3 JSON gateway
 *   etcd_read.c   etcd's answers (JSON through libjansson, base64) read into changes
 *                 (etcd_read.h)
 *   text.c        bytes from outside made safe for a log line or JSON (text.h)
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
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>

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
    /* limits (limits.c) and the stats listener (status.c) */
    unsigned max_conns;      /* client connections in all; at the limit accept pauses */
    unsigned max_requests;   /* requests in flight in all; above: 503 */
    uint64_t max_body_total; /* request body bytes buffered in all; above: 503 */
    char stats_host[256];    /* --stats-listen; stats_port 0: stats on the main listener */
    uint16_t stats_port;
    const char *stats_allow; /* --stats-allow: "any" or a comma-separated list of CIDRs */
    /* health and membership feeds (health.c, etcd.c) */
    uint32_t slow_start_ms;  /* --slow-start: members that join later ramp up over this */
    uint32_t drain_ms;       /* --drain: a member removed ramps to 0 and leaves by then */
    const char *etcd_url;    /* --etcd http://HOST:PORT, or NULL */
    const char *etcd_prefix; /* --etcd-prefix, default "/chring/pool/" */
    /* the etcd feed's bounds (etcd.c) */
    size_t etcd_max_answer;         /* --etcd-max-answer: a range answer or one watch message */
    uint64_t etcd_max_points;       /* --etcd-max-points: etcd's members' points in all */
    uint32_t etcd_range_timeout_ms; /* --etcd-range-timeout: a whole range answer */
};

/* Set once by lb_config_parse before any thread starts; read-only afterwards. */
extern struct lb_config lb_cfg;

/* Fills lb_cfg from the command line.  Returns 0, or -1 after printing why on standard error;
 * --help prints the usage and exits 0. */
int lb_config_parse(int argc, char **argv);

/* ------------------------------------------------------------------------------------------ */
/* strict HTTP/1.1 framing (h1.c) and the request guard (guard.c)                             */

#define H1_MAX_FIELDS 512    /* field lines in one head; more: 400 / 502 */
#define H1_MAX_LINE 4096     /* a chunk-size or trailer line */
#define H1_MAX_TRAILER 16384 /* a trailer section */

struct evbuffer;

enum h1_framing {
    H1_NONE,    /* no body */
    H1_LENGTH,  /* Content-Length bytes */
    H1_CHUNKED, /* chunked */
    H1_CLOSE    /* until the connection closes (answers only) */
};

struct h1_field { /* points into the parsed head; not NUL-terminated */
    const char *name, *value;
    size_t nlen, vlen;
};

struct h1_head {
    const char *method, *target, *reason;
    size_t mlen, tlen, rlen;
    int minor;  /* HTTP/1.minor */
    int status; /* answers */
    int hosts;
    enum h1_framing framing;
    uint64_t length;
    bool has_length, close;
    size_t nfields;
    struct h1_field fields[H1_MAX_FIELDS];
};

/* Parses the head buf[0..len) (start line, fields, the empty line; len includes the final CRLF
 * CRLF) of a request (request) or an answer, in one pass.  Returns 0, or the status it earns:
 * 400 for a request (or 502 for an answer) with a malformed start line, a bare CR or LF, a
 * field name that is not a token or has white space before its colon, obs-fold, a control byte
 * (NUL included) in a value, more than H1_MAX_FIELDS fields. */
int h1_parse_head(char *buf, size_t len, bool request, struct h1_head *h);
/* The request's framing and Host rules (docs/lb.md, "Security model"): sets h->framing,
 * h->length, h->hosts.  Returns 0, 400 or 501. */
int h1_request_framing(struct h1_head *h);
/* An answer's framing, for a request that was HEAD (head_request) or not: sets h->framing,
 * h->length, h->has_length, h->close.  Returns 0 or 502. */
int h1_response_framing(struct h1_head *h, bool head_request);
/* True when token is one of the comma-separated tokens of v[0..len) (case-insensitive). */
bool h1_token_listed(const char *v, size_t len, const char *token);
/* The length of the head at the start of src (through CRLF CRLF), -1 when it has not arrived,
 * -2 when a bare LF (not after a CR) came first;
 * *scanned (0 at the start of a head) remembers how far it looked, so that a head arriving
 * byte by byte costs linear time. */
ssize_t h1_find_head_end(struct evbuffer *src, size_t *scanned);

enum h1_body_state {
    H1B_DONE,
    H1B_LENGTH,
    H1B_CHUNK_SIZE,
    H1B_CHUNK_DATA,
    H1B_CHUNK_CRLF,
    H1B_TRAILER,
    H1B_UNTIL_CLOSE
};

struct h1_body {
    enum h1_body_state state;
    uint64_t left;        /* bytes of the current piece */
    uint64_t total;       /* body bytes so far */
    size_t trailer_bytes; /* of the trailer section */
};

void h1_body_init(struct h1_body *b, enum h1_framing framing, uint64_t length);
/* Moves the body bytes of src (framing removed: chunk sizes, extensions and trailers checked and
 * dropped) to dst.  Returns 1 when the body ended (src keeps what follows), 0 when more is
 * needed, -1 for a framing error (a chunk size that is not plain hex, a missing CRLF, a bad
 * trailer). */
int h1_body_step(struct h1_body *b, struct evbuffer *src, struct evbuffer *dst);

/* evhttp's bufferevent callback (evhttp_set_bevcb; arg: the worker): every client connection
 * reads through the request guard, which passes evhttp only requests it checked, normalised. */
struct bufferevent *lb_guard_bev(struct event_base *base, void *arg);

/* ------------------------------------------------------------------------------------------ */
/* logging (log.c)                                                                             */

/* One line "HH:MM:SS.mmm chring-lb: message" on standard error.  Any thread. */
void lb_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------------------------------ */
/* backends and connection pools (backend.c)                                                   */

struct worker;
struct proxy;

struct bconn {               /* one keep-alive connection to a backend, owned by one worker */
    struct bufferevent *bev; /* NULL once an idle connection closed or misbehaved */
    bool reused;             /* it has carried a complete answer before */
    struct bconn *next;
};

struct pool {
    struct bconn *idle;
    unsigned nidle;
};

struct backend {
    char *name; /* member name, "host:port" as written */
    char addr[INET6_ADDRSTRLEN];
    struct sockaddr_storage sa; /* addr and port, for connect() */
    socklen_t salen;
    char hosthdr[300]; /* Host header when the client sent none */
    uint16_t port;
    struct pool *pools; /* [lb_cfg.threads], pools[w] touched only by worker w */
    bool *reaped;       /* [lb_cfg.threads], under the backends' lock */
    unsigned reap_left;
    bool retired;
    struct backend *prev, *next; /* every backend alive, under the backends' lock */
    _Atomic uint64_t requests, failures, retries_in, bytes_out;
    _Atomic uint64_t downs;         /* times passive health took it out of the ring */
    _Atomic int64_t down_until_ms;  /* passive health: down in the ring until then (monotonic) */
    _Atomic int64_t drain_until_ms; /* leaving: removed by then at the latest (0: not leaving);
                                       written by the main thread only */
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

/* Passive health (health.c): a failed attempt marks the backend down in the ring for
 * --fail-timeout (its keys go to their next replica, no rebuild); the main thread applies it
 * (chring_set_down) within an event-loop turn and sets it up again when the time has passed.
 * Any thread; a success changes nothing. */
void lb_backend_mark(struct backend *be, bool ok);

/* An idle connection of worker w to be (one that has not closed or sent a byte while idle), or
 * a new one, connecting.  Returns NULL when none can be made.  Worker w's thread only. */
struct bconn *lb_pool_get(struct worker *w, struct backend *be);
/* Gives bc (may be NULL) back to worker w's pool of be: the caller guarantees that its last
 * answer ended exactly at its framing with no byte left unread.  An excess connection is freed
 * later, so this may be called from inside the connection's own callbacks.  Worker w's thread
 * only. */
void lb_pool_put(struct worker *w, struct backend *be, struct bconn *bc);
/* Frees bc (may be NULL) and closes its connection; safe inside its own callbacks. */
void lb_bconn_free(struct bconn *bc);
/* Worker event (arg: the worker): frees the connections lb_pool_put set aside. */
void lb_pool_free_dead_cb(evutil_socket_t fd, short what, void *arg);

/* ------------------------------------------------------------------------------------------ */
/* workers (worker.c)                                                                          */

struct guard;
struct worker {
    unsigned id;
    pthread_t thread;
    struct event_base *base;
    struct evhttp *http;
    struct event *stop_ev, *reap_ev, *free_ev;
    struct bconn *dead;              /* connections to free outside their own callbacks */
    struct evconnlistener *listener; /* the worker's client listener */
    struct event *limit_ev;          /* re-checks the connection limit (any thread may wake it) */
    struct event *backoff_ev;        /* accept backoff after EMFILE and friends */
    int backoff_ms;                  /* current backoff, 0: none */
    bool listener_off;               /* the listener is disabled (limit or backoff) */
    struct guard *parked, *parked_tail; /* accepted over --max-conns, waiting for a slot (FIFO) */
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
 * may be NULL) as well.  Linear in the size of src. */
void lb_copy_headers(const struct evkeyvalq *src, struct evkeyvalq *dst, const char *const *extra);
/* The same for the fields of an answer's head, Content-Length and Transfer-Encoding skipped too
 * (the caller adds the framing).  Returns 0 / -1 (out of memory). */
int lb_copy_fields(const struct h1_head *h, struct evkeyvalq *dst);
/* Answers req with a text/plain body (body plus a newline). */
void lb_send_text(struct evhttp_request *req, int code, const char *reason, const char *body);

/* Writes the backend request for the client's request req on cevcon to out: request line
 * (HTTP/1.1, origin-form target), end-to-end headers, Host (hosthdr when the client sent none),
 * X-Forwarded-For (the client's list, then its address), Content-Length and a copy of the body
 * (req keeps it for a retry).  Returns 0 / -1 (out of memory). */
int lb_forward_write(struct evbuffer *out, struct evhttp_request *req,
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
 * statistics as JSON; any other method 405.  O(points + members) per request.  w may be NULL
 * (the stats listener on the main thread). */
void lb_stats_serve(struct worker *w, struct evhttp_request *req);

/* ------------------------------------------------------------------------------------------ */
/* the stats listener and the status page (status.c)                                          */

/* Parses --stats-allow (NULL: loopback only).  Returns 0 / -1 (reported). */
int lb_stats_allow_parse(const char *list);
/* A request to a /_chring/ path (path) on a worker (w) or on the stats listener (w NULL):
 * answered 404 on the main listener when --stats-listen is set, 403 for a peer outside
 * --stats-allow, else the JSON (stats) or the status page (/_chring/). */
void lb_status_route(struct worker *w, struct evhttp_request *req, const char *path);
/* Opens --stats-listen on the main thread's event base.  Returns 0 (also without
 * --stats-listen) / -1 (logged). */
int lb_status_start(struct event_base *base);
void lb_status_stop(void);

/* ------------------------------------------------------------------------------------------ */
/* limits (limits.c)                                                                           */

/* The counters of the limits, for the stats. */
struct lb_limit_stats {
    uint64_t conns, parked, conns_parked, accept_errors, accept_backoffs, accept_pauses;
    uint64_t requests_refused, body_bytes, body_refused;
};
void lb_limits_get(struct lb_limit_stats *out);
/* Sets the defaults that depend on the process (max_conns from RLIMIT_NOFILE) and the random
 * target of the 503 stand-in.  Main thread, before the workers. */
void lb_limits_init(void);
/* Worker w's listener: error callback (EMFILE backoff) and the limit event.  Returns 0 / -1. */
int lb_limits_attach(struct worker *w, struct evconnlistener *listener);
/* A client connection was accepted on w (its thread).  True: it took one of the --max-conns
 * slots; lb_conn_close gives it back.  False: every slot is taken (another worker accepted in
 * parallel): the caller parks the connection (reads nothing of it) until lb_conn_admit gives it
 * a slot, or calls lb_conn_unpark when it is freed while still parked. */
bool lb_conn_open(struct worker *w);
void lb_conn_close(void);
/* A parked connection takes a free slot: false when none is.  w's thread. */
bool lb_conn_admit(void);
void lb_conn_unpark(void);
/* Gives free slots to w's parked connections, oldest first (guard.c).  w's thread. */
void lb_guard_admit(struct worker *w);
/* Workers stopped: no more wake-ups between them. */
void lb_limits_shutdown(void);
/* A request enters the proxy: false above --max-requests (the caller answers 503). */
bool lb_inflight_enter(void);
void lb_inflight_leave(void);
/* Body bytes buffered: reserve (false when it would exceed --max-body-total), charge (no
 * check: bytes already admitted), release. */
bool lb_body_reserve(uint64_t n);
void lb_body_charge(uint64_t n);
void lb_body_release(uint64_t n);
/* The request target of the guard's 503 stand-in (random per process, not guessable). */
extern char lb_refused_target[48];
/* Answers the 503 stand-in (Retry-After, the connection closed). */
void lb_send_overloaded(struct evhttp_request *req, const char *why);

/* ------------------------------------------------------------------------------------------ */
/* membership (membership.c)                                                                   */

/* Successful and failed SIGHUP reloads, for the stats. */
extern _Atomic uint64_t lb_reloads, lb_reload_errors;

/* Makes the ring's membership exactly --backend plus the members file (logged).  Main thread
 * only.  Returns 0, or -1 with the membership unchanged. */
int lb_membership_apply(bool initial);
/* SIGHUP: lb_membership_apply(false), counted in lb_reloads or lb_reload_errors. */
void lb_membership_reload(void);
/* Makes the ring's membership exactly es (what: for the log), with --drain applied: a member
 * that is not in es ramps to 0 and stays until health.c removes it; one in es that was leaving
 * stays.  skip_bad: an entry whose backend cannot be set up (its host does not resolve) is
 * logged and left out instead of failing the whole call (etcd).  Main thread only.  Returns 0,
 * or -1 with the membership unchanged. */
int lb_membership_set(const lb_entries_t *es, const char *what, bool skip_bad);

/* One change of lb_membership_change: weight 0 removes name (or drains it, with --drain); weight
 * >= 1 adds it with be (resolved by the caller; be NULL: a member already in the ring only) or
 * sets its weight. */
struct lb_change {
    const char *name;
    uint32_t weight;
    struct backend *be; /* owned by the call from then on: kept by the ring, or discarded */
};
/* Applies ch[0..n) (distinct names) with one chring_update, --drain applied as in
 * lb_membership_set; with known (not NULL), every member of the ring for which known(name, ctx)
 * is false is removed too (a range: the ring becomes the feed's set).  O(n) plus O(members)
 * with known.  Main thread only.  Returns 0, or -1 with the membership unchanged (logged). */
int lb_membership_change(struct lb_change *ch, size_t n, bool (*known)(const char *, void *),
                         void *ctx, const char *what);

/* ------------------------------------------------------------------------------------------ */
/* health and drains (health.c), the etcd feed (etcd.c): both on the main thread's event base  */

/* Starts the health event and timer.  Returns 0 / -1. */
int lb_health_start(struct event_base *base);
void lb_health_stop(void);
/* A member left the membership: ramps its admission scale to 0 over --drain; health.c removes
 * it when its load is 0 or --drain has passed.  Main thread; in a read section on s. */
void lb_health_drain(const chring_snap_t *s, const chring_member_t *m);
/* A leaving member is wanted again: its scale ramps back up.  Main thread. */
void lb_health_undrain(const chring_member_t *m);

/* Starts the etcd feed when --etcd was given (0 otherwise too).  Returns 0 / -1. */
int lb_etcd_start(struct event_base *base);
void lb_etcd_stop(void);
/* True once etcd has given a membership: from then on it, not --members, is the membership. */
bool lb_etcd_active(void);
/* The "etcd" member of the stats JSON, with its leading comma (nothing without --etcd).  Any
 * thread. */
void lb_etcd_stats(struct evbuffer *b);

#endif
