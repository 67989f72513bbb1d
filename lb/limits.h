/* chring-lb: limits in all (limits.c): client connections (--max-conns, parked connections),
 * requests in flight, buffered body bytes, the accept backoff; counters for the stats.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_LIMITS_H
#define CHRING_LB_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

struct evconnlistener;
struct worker;

/* The counters of the limits, for the stats. */
struct lb_limit_stats {
    uint64_t conns, parked, conns_parked, accept_errors, accept_backoffs, accept_pauses;
    uint64_t requests_refused, body_bytes, body_refused;
    uint64_t slow_clients; /* closed for keeping their answer waiting (conn.c) */
};
void lb_limits_get(struct lb_limit_stats *out);
/* Counts a client closed for taking its answer too slowly (--send-min-rate).  Any thread. */
void lb_client_too_slow(void);
/* Sets the default that depends on the process: --max-conns, when not given, from
 * RLIMIT_NOFILE.  Main thread, before the workers. */
void lb_limits_init(void);
/* Worker w's listener: error callback (EMFILE backoff) and the limit event, which calls
 * on_slot_free(w) on w's thread when a slot may have freed (worker.c passes conn.c's
 * lb_conn_admit_parked) before resuming the listener.  Returns 0 / -1. */
int lb_limits_attach(struct worker *w, struct evconnlistener *listener,
                     void (*on_slot_free)(struct worker *w));
/* A client connection was accepted on w (its thread).  True: it took one of the --max-conns
 * slots; lb_conn_close gives it back.  False: every slot is taken (another worker accepted in
 * parallel): the caller parks the connection (reads nothing of it) until lb_conn_admit gives it
 * a slot, or calls lb_conn_unpark when it is freed while still parked. */
bool lb_conn_open(struct worker *w);
void lb_conn_close(void);
/* A parked connection takes a free slot: false when none is.  w's thread. */
bool lb_conn_admit(void);
void lb_conn_unpark(void);
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

#endif
