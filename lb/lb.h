/* chring-lb: the balancer's shared structures and the functions its files call across.
 *
 * SPDX-License-Identifier: MIT
 *
 * chring-lb is a multithreaded HTTP/1.1 reverse proxy that routes each request by a key on a
 * chring ring with bounded loads.
 *
 * Shape.  N worker threads, each with its own libevent event_base and HTTP/1.1 server (conn.c)
 * accepting on its own SO_REUSEPORT listener (one shared listener when SO_REUSEPORT is
 * unavailable).  A request takes a lease with chring_acquire() on its key; the member's udata
 * is a struct backend holding the address and one idle-connection pool per worker (keep-alive
 * bufferevents, used only by their worker's thread).  The backend's answer is relayed as it
 * arrives (its head, then its body piece by piece); the lease is released when the answer has
 * been relayed completely, or the client has gone, or the backend failed.  A backend that
 * refuses or times out before answering is retried once, placed again with bounded loads over
 * every member but the failed one (chring_acquire_skip), then 502.
 *
 * The main thread owns the ring's writer side: it loads the membership, and on SIGHUP re-reads
 * --members and applies its differences with one chring_update() (connections are not dropped:
 * members that stay keep their object, counters and pools).  A removed member's struct backend
 * is handed to the ring's retire callback, which may run on any thread: it queues the backend
 * and wakes every worker; each worker frees its own pool of it; the last one frees the object.
 *
 * Files, each one concept (and its header: config.h, h1.h, conn.h, log.h, backend.h, worker.h,
 * proxy.h, limits.h; the rest is declared below):
 *   config.c      the options: lb_cfg and its parsing
 *   log.c         the timestamped log line on standard error
 *   backend.c     backend objects, per-worker connection pools, retirement
 *   h1.c          strict HTTP/1.1 framing: message heads and bodies parsed from bytes
 *   conn.c        the client side: chring-lb's own HTTP/1.1 server connections (conn.h)
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
 *                 as differences with chring_update, members leaving through a drain kept
 *                 until they leave
 *   health.c      passive health through the ring (chring_set_down), drains, on the main thread
 *   allow.c       --stats-allow: which peers may read /_chring/ (allow.h)
 *   listen.c      listening sockets for --listen and --stats-listen (listen.h)
 *   etcd.c        the membership from etcd: range, then watch, over etcd's v3 JSON gateway
 *   etcd_read.c   etcd's answers (JSON through libjansson, base64) read into changes
 *                 (etcd_read.h)
 *   text.c        bytes from outside made safe for a log line or JSON (text.h)
 *   chring-lb.c   main: setup, signals, shutdown
 * members.c (members.h) parses "host:port[=weight]" entries; chring-lb-expect uses it too.
 */
#ifndef CHRING_LB_H
#define CHRING_LB_H

/* One header per concept; this one includes them all, and declares what the membership, health,
 * etcd and status files share. */
#include "backend.h"
#include "config.h"
#include "conn.h"
#include "h1.h"
#include "limits.h"
#include "log.h"
#include "members.h"
#include "proxy.h"
#include "worker.h"

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
/* the stats listener and the status page (status.c)                                          */

/* A request to a /_chring/ path (path) on a worker (w) or on the stats listener (w NULL):
 * answered 404 on the main listener when --stats-listen is set, 403 for a peer outside
 * --stats-allow, else the JSON (stats) or the status page (/_chring/). */
void lb_status_route(struct worker *w, struct lb_req *req, const char *path);
/* The members= query argument of /_chring/stats and /_chring/metrics (stats.c): absent, every
 * member (*off 0, *count SIZE_MAX); "0", none (the summary); "OFFSET,COUNT" (decimal), the
 * members of ring order OFFSET to OFFSET+COUNT.  query may be NULL.  Returns 0, or -1 for a
 * malformed value. */
int lb_stats_members_param(const char *query, size_t *off, size_t *count);
/* Answers GET (or HEAD) /_chring/metrics in Prometheus' text format 0.0.4 (metrics.c); any other
 * method 405, a malformed members= 400.  O(members) (the per-member families), O(1) with
 * members=0.  w may be NULL (the stats listener on the main thread). */
void lb_metrics_serve(struct worker *w, struct lb_req *req);
/* Opens --stats-listen on the main thread's event base.  Returns 0 (also without
 * --stats-listen) / -1 (logged). */
int lb_status_start(struct event_base *base);
void lb_status_stop(void);

/* ------------------------------------------------------------------------------------------ */
/* membership (membership.c)                                                                   */

/* Successful and failed SIGHUP reloads, and the new names a reload has with its resolver
 * thread now, for the stats. */
extern _Atomic uint64_t lb_reloads, lb_reload_errors, lb_reload_resolving;

/* The start: makes the ring's membership exactly --backend plus the members file (logged),
 * resolving names on the calling thread.  Main thread, before lb_membership_start.  Returns 0, or
 * -1 with the membership unchanged. */
int lb_membership_load(void);
/* Sets up the reloads' wake-up on the main thread's event base.  Returns 0 / -1. */
int lb_membership_start(struct event_base *base);
/* Waits for a reload's lookups under way and drops that reload.  Main thread, before the ring
 * is freed. */
void lb_membership_stop(void);
/* SIGHUP: re-reads --backend plus the members file, counted in lb_reloads or lb_reload_errors
 * (logged, with the time it took).  The file is read and its differences applied on the main
 * thread; only names the ring does not hold yet and that are not numeric addresses need DNS, and
 * those are resolved by a thread of the reload's own, the file applied when they are (or refused
 * whole if one does not resolve).  A SIGHUP while names are resolved reads the file again once
 * that reload is done.  Refused while etcd gives the membership.  Main thread. */
void lb_membership_reload(void);
/* Said by the etcd feed (etcd.c) once etcd has given a membership: from then on it, not
 * --members, is the membership, and a SIGHUP reload applies nothing.  Main thread. */
void lb_membership_from_etcd(void);
/* Makes the ring's membership exactly es (distinct names; what: for the log) with one
 * lb_membership_change holding only the differences, --drain applied: a member that is not in es
 * ramps to 0 and stays until health.c removes them; one in es that was leaving stays.  Names the
 * ring does not hold yet are resolved (on this thread); a name that does not resolve fails the
 * whole call.  O(entries + members).  Main thread only.  Returns 0, or -1 with the membership
 * unchanged. */
int lb_membership_set(const lb_entries_t *es, const char *what);

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

/* Failed attempts that passive health did not act on because half of the members were down
 * already (the panic threshold), for the stats. */
extern _Atomic uint64_t lb_health_panics;
/* Starts the health event and timer.  Returns 0 / -1. */
int lb_health_start(struct event_base *base);
void lb_health_stop(void);
/* A member left the membership: ramps its admission scale to 0 over --drain; health.c removes
 * it when its load is 0 or --drain has passed.  Main thread; in a read section on s. */
void lb_health_drain(const chring_snap_t *s, const chring_member_t *m);
/* A leaving member is wanted again: its scale ramps back up.  Main thread. */
void lb_health_undrain(const chring_member_t *m);

/* Starts the etcd feed when --etcd was given (0 otherwise too).  Returns 0 / -1. */
/* The load the engines report (loadmetrics.c): scrapes on the main thread's base; a no-op
 * without --load-metrics.  Counters for the stats. */
int lb_load_start(struct event_base *base);
void lb_load_stop(void);
extern _Atomic uint64_t lb_load_scrapes, lb_load_reports, lb_load_failures;

int lb_etcd_start(struct event_base *base);
void lb_etcd_stop(void);
/* True once etcd has given a membership: from then on it, not --members, is the membership. */
bool lb_etcd_active(void);
/* The "etcd" member of the stats JSON, with its leading comma (nothing without --etcd).  Any
 * thread. */
void lb_etcd_stats(struct evbuffer *b);

#endif
