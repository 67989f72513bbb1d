/* chring-lb: limits in all: client connections, requests in flight, buffered body bytes, and the
 * accept backoff when the process runs out of descriptors (limits.h).
 *
 * SPDX-License-Identifier: MIT
 *
 * Connections (--max-conns).  A worker's client connection is counted from its accept to its
 * free (conn.c).  When the count reaches the limit every worker disables its listener, so
 * connections beyond the limit wait in the kernel's accept queue (HAProxy's maxconn does the
 * same) instead of costing a descriptor and a buffer each; when a connection closes below the
 * limit the workers enable their listeners again.  A slot is taken with a compare-and-swap, so
 * the count never exceeds the limit.  Workers accept in parallel, so one may accept a
 * connection while another takes the last slot: such a connection is parked (conn.c reads
 * nothing of it), counts against the limit as waiting, and is the first to get a slot that
 * frees; the listeners stay disabled while any waits.  At most one per worker is parked at a
 * time, as a worker disables its own listener on the spot.  The wake-ups go through one event
 * per worker (event_active is thread-safe with evthread_use_pthreads); each worker enables or
 * disables only its own listener, on its own thread.
 *
 * EMFILE.  accept() failing for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM)
 * leaves the connection in the queue, so a listener left enabled is readable again at once and
 * the loop spins.  The listener is disabled instead and enabled again after a backoff that
 * starts at 10 ms and doubles up to 1 s; an accept that succeeds resets it.  The error is logged
 * at most once a second with the number of errors since.
 *
 * Requests in flight (--max-requests) and buffered body bytes (--max-body-total): atomic counters
 * shared by every worker.  A request body's bytes are reserved as they arrive, whatever its
 * framing (never its declared length), and the request holds them until it is freed.  Above
 * either limit the caller answers 503 with Retry-After (conn.c, proxy.c): limits.c only counts,
 * and reaches conn.c only through the callback lb_limits_attach is given.
 */
#define _GNU_SOURCE
#include "limits.h"
#include "config.h"
#include "lb.h"
#include "log.h"
#include "worker.h"

#include <errno.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint64_t conns, parked, conns_parked, accept_errors, accept_backoffs, accept_pauses;
static _Atomic uint64_t inflight, requests_refused, body_bytes, body_refused, slow_clients;
static _Atomic bool limit_hit; /* some listener was disabled for the connection limit */
static _Atomic bool stopping;  /* workers stopped: no more wake-ups */
static _Atomic int64_t last_log_ms;
static _Atomic uint64_t errors_since_log;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void lb_limits_init(void)
{
    if (lb_cfg.max_conns == 0) {
        /* A proxied connection costs two descriptors (client and backend); keep a reserve for
         * listeners, logs, the stats listener and idle pools. */
        struct rlimit rl;
        uint64_t nofile = 1024;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            nofile = rl.rlim_cur;
        uint64_t n = nofile > 64 + 32 ? (nofile - 64) / 2 : 16;
        lb_cfg.max_conns = (unsigned)(n > 100000 ? 100000 : n);
    }
}

void lb_limits_get(struct lb_limit_stats *out)
{
    out->conns = GET(conns);
    out->parked = GET(parked);
    out->conns_parked = GET(conns_parked);
    out->accept_errors = GET(accept_errors);
    out->accept_backoffs = GET(accept_backoffs);
    out->accept_pauses = GET(accept_pauses);
    out->requests_refused = GET(requests_refused);
    out->body_bytes = GET(body_bytes);
    out->body_refused = GET(body_refused);
    out->slow_clients = GET(slow_clients);
}

void lb_client_too_slow(void)
{
    ADD(slow_clients, 1);
}

/* The slots are all taken, or promised to parked connections.  Sequentially consistent, with
 * the updates in lb_conn_close and lb_conn_unpark: see listener_update. */
static bool is_full(void)
{
    return atomic_load(&conns) + atomic_load(&parked) >= lb_cfg.max_conns;
}

/* Enables or disables w's listener as the connection limit and the backoff say.  w's thread. */
static void listener_update(struct worker *w)
{
    bool backoff = w->backoff_ev && evtimer_pending(w->backoff_ev, NULL);
    bool full = is_full();
    if (full) {
        /* Published before the count is read again: a close that the first read missed either
         * sees the flag (and wakes every worker) or is seen by the second read. */
        atomic_store(&limit_hit, true);
        full = is_full();
    }
    bool off = backoff || full;
    if (off == w->listener_off || !w->listener)
        return;
    if (off) {
        evconnlistener_disable(w->listener);
        if (full)
            ADD(accept_pauses, 1);
    } else {
        evconnlistener_enable(w->listener);
    }
    w->listener_off = off;
}

/* What lb_limits_attach was given: conn.c's lb_conn_admit_parked (a callback, so that limits.c
 * counts and conn.c answers and admits: neither file calls the other both ways). */
static void (*admit_parked)(struct worker *w);

static void on_limit(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    admit_parked(arg); /* the parked first: they were accepted before any still queued */
    listener_update(arg);
}

static void wake_all(void)
{
    if (atomic_load(&stopping))
        return;
    for (unsigned i = 0; i < lb_cfg.threads; i++)
        if (lb_workers[i].limit_ev)
            event_active(lb_workers[i].limit_ev, 0, 0);
}

static void on_backoff_end(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    listener_update(arg); /* backoff_ms stays until an accept succeeds: the next error doubles it */
}

static void on_accept_error(struct evconnlistener *listener, void *arg)
{
    (void)arg; /* the worker is found by its listener */
    struct worker *w = NULL;
    for (unsigned i = 0; i < lb_cfg.threads && !w; i++)
        if (lb_workers[i].listener == listener)
            w = &lb_workers[i];
    if (!w) {
        evconnlistener_disable(listener);
        return;
    }
    int err = EVUTIL_SOCKET_ERROR();
    ADD(accept_errors, 1);
    ADD(errors_since_log, 1);
    int64_t t = now_ms();
    int64_t last = GET(last_log_ms);
    if (t - last >= 1000 && atomic_compare_exchange_strong_explicit(
                                &last_log_ms, &last, t, memory_order_relaxed, memory_order_relaxed))
        lb_log("accept: %s (%llu errors in the last second or so): accepting paused with backoff",
               strerror(err),
               (unsigned long long)atomic_exchange_explicit(&errors_since_log, 0,
                                                            memory_order_relaxed));
    w->backoff_ms = w->backoff_ms ? w->backoff_ms * 2 : 10;
    if (w->backoff_ms > 1000)
        w->backoff_ms = 1000;
    ADD(accept_backoffs, 1);
    if (!w->listener_off) {
        evconnlistener_disable(w->listener);
        w->listener_off = true;
    }
    struct timeval tv = {w->backoff_ms / 1000, (w->backoff_ms % 1000) * 1000};
    event_add(w->backoff_ev, &tv);
}

int lb_limits_attach(struct worker *w, struct evconnlistener *listener,
                     void (*on_slot_free)(struct worker *w))
{
    if (!w || !listener || !on_slot_free)
        return -1;
    admit_parked = on_slot_free;
    w->listener = listener;
    w->limit_ev = event_new(w->base, -1, 0, on_limit, w);
    w->backoff_ev = evtimer_new(w->base, on_backoff_end, w);
    if (!w->limit_ev || !w->backoff_ev)
        return -1;
    evconnlistener_set_error_cb(listener, on_accept_error);
    return 0;
}

/* Takes a slot: false when all are taken. */
static bool reserve(void)
{
    uint64_t n = GET(conns);
    do {
        if (n >= lb_cfg.max_conns)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&conns, &n, n + 1, memory_order_relaxed,
                                                    memory_order_relaxed));
    return true;
}

bool lb_conn_open(struct worker *w)
{
    w->backoff_ms = 0; /* descriptors were available */
    bool ok = reserve();
    if (!ok) {
        atomic_fetch_add(&parked, 1);
        ADD(conns_parked, 1);
    }
    if (!ok || GET(conns) >= lb_cfg.max_conns) {
        listener_update(w); /* at once: the listener stops accepting within this accept loop */
        wake_all();
    }
    return ok;
}

bool lb_conn_admit(void)
{
    if (!reserve())
        return false;
    atomic_fetch_sub(&parked, 1); /* the sum of the two stays: no wake-up */
    return true;
}

/* A slot (or the promise of one) was given back: the listeners that found the limit reached
 * look again. */
static void slot_freed(void)
{
    if (atomic_exchange(&limit_hit, false))
        wake_all();
}

void lb_conn_unpark(void)
{
    atomic_fetch_sub(&parked, 1);
    slot_freed();
}

void lb_conn_close(void)
{
    atomic_fetch_sub(&conns, 1);
    slot_freed();
}

void lb_limits_shutdown(void)
{
    atomic_store(&stopping, true);
}

bool lb_inflight_enter(void)
{
    if (ADD(inflight, 1) + 1 > lb_cfg.max_requests) {
        SUB(inflight, 1);
        ADD(requests_refused, 1);
        return false;
    }
    return true;
}

void lb_inflight_leave(void)
{
    SUB(inflight, 1);
}

bool lb_body_reserve(uint64_t n)
{
    if (n == 0)
        return true;
    if (ADD(body_bytes, n) + n > lb_cfg.max_body_total) {
        SUB(body_bytes, n);
        ADD(body_refused, 1);
        return false;
    }
    return true;
}

void lb_body_charge(uint64_t n)
{
    ADD(body_bytes, n);
}

void lb_body_release(uint64_t n)
{
    SUB(body_bytes, n);
}
