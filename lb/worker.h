/* chring-lb: worker threads: event loop, listener, the request entry point (worker.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_WORKER_H
#define CHRING_LB_WORKER_H

#include <chring.h>

#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct worker {
    unsigned id;
    pthread_t thread;
    struct event_base *base;
    struct conn *conns; /* its client connections (conn.c) */
    struct event *stop_ev, *reap_ev, *free_ev;
    struct bconn *dead;                /* connections to free outside their own callbacks */
    struct evconnlistener *listener;   /* the worker's client listener */
    struct event *limit_ev;            /* re-checks the connection limit (any thread may wake it) */
    struct event *backoff_ev;          /* accept backoff after EMFILE and friends */
    int backoff_ms;                    /* current backoff, 0: none */
    bool listener_off;                 /* the listener is disabled (limit or backoff) */
    struct conn *parked, *parked_tail; /* accepted over --max-conns, waiting for a slot (FIFO) */
    struct proxy *active;
    _Atomic uint64_t requests, proxied, retries, bad_gateway, aborts, client_gone, no_backend,
        stats_served, active_n, pauses;
    /* leases taken (a request's placement and its retry) by their lease.outcome: [0] unused,
     * CHRING_OUTCOME_OWNER, _SPILLED, _SATURATED */
    _Atomic uint64_t outcomes[5]; /* by CHRING_OUTCOME_*: none, owner, spilled, saturated, owner_down */
};

/* [lb_cfg.threads], allocated by main before the ring exists. */
extern struct worker *lb_workers;
/* Every worker's counters added up, for the stats and the metrics: t[0..9] requests, proxied,
 * retries, bad_gateway (502 and 504), aborts, client_gone, no_backend, stats_served, active_n,
 * pauses; o[0..4] the outcomes by CHRING_OUTCOME_* (none, owner, spilled, saturated, owner_down).
 * Relaxed loads: a sum, not a snapshot.  Any thread. */
void lb_workers_sum(uint64_t t[10], uint64_t o[5]);
/* The one ring: created by main before the workers start, freed after they stopped. */
extern chring_t *lb_ring;

/* Sets up worker id: event base, HTTP/1.1 server (conn.c), listener (its own, or a dup of
 * shared_fd when that is >= 0).  Returns 0 / -1; on failure lb_worker_free still cleans up. */
int lb_worker_init(struct worker *w, unsigned id, int shared_fd);
/* The thread's body: runs the worker's event loop until its stop event. */
void *lb_worker_main(void *arg);
/* Worker stopped: closes its client connections (releasing their leases) and frees set-aside
 * connections. */
void lb_worker_cleanup(struct worker *w);
void lb_worker_free(struct worker *w);

#endif
