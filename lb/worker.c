/* chring-lb: worker threads: each runs its own event loop and HTTP/1.1 server (conn.c) on its
 * own listener, and hands every request to the stats endpoint or to the proxy.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "worker.h"
#include "backend.h"
#include "config.h"
#include "conn.h"
#include "lb.h"
#include "limits.h"
#include "listen.h"
#include "proxy.h"
#include "status.h"

#include <errno.h>
#include <event2/listener.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The request entry point (conn.c's handler). */
static void on_request(struct worker *w, struct lb_req *req)
{
    ADD(w->requests, 1);
    if (strncmp(req->path, "/_chring/", 9) == 0)
        lb_status_route(w, req, req->path);
    else if (lb_via_loop(req->in))
        lb_send_text(req, 508, "Loop Detected", "this request came through this balancer already");
    else
        lb_proxy_start(w, req);
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    event_base_loopbreak(w->base);
}

void *lb_worker_main(void *arg)
{
    struct worker *w = arg;
    /* Not event_base_dispatch: it returns once no event is pending, which is the case of a
     * worker with no connection whose listener is paused at --max-conns.  The thread then ended
     * and the connections the kernel queued on its listener (SO_REUSEPORT gives each worker its
     * own queue) were never accepted.  The loop ends only by on_stop. */
    event_base_loop(w->base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

int lb_worker_init(struct worker *w, unsigned id, int shared_fd)
{
    w->id = id;
    w->base = event_base_new();
    if (!w->base)
        return -1;
    w->stop_ev = event_new(w->base, -1, 0, on_stop, w);
    w->reap_ev = event_new(w->base, -1, 0, lb_backend_reap_cb, w);
    w->free_ev = event_new(w->base, -1, 0, lb_pool_free_dead_cb, w);
    if (!w->stop_ev || !w->reap_ev || !w->free_ev)
        return -1;
    int fd = shared_fd;
    if (fd < 0) {
        fd = lb_listen_socket(true);
        if (fd < 0)
            return fd;
    } else {
        fd = dup(shared_fd);
        if (fd < 0)
            return -1;
    }
    evutil_make_socket_nonblocking(fd);
    struct evconnlistener *listener = lb_server_listen(w->base, fd, w, on_request);
    if (!listener) {
        close(fd);
        return -1;
    }
    return lb_limits_attach(w, listener, lb_conn_admit_parked);
}

void lb_worker_cleanup(struct worker *w)
{
    /* Closing the client connections cancels the backend requests of those being served and
     * releases their leases (their gone callbacks). */
    lb_limits_shutdown();
    if (w->listener)
        evconnlistener_free(w->listener);
    w->listener = NULL;
    lb_server_close_all(w);
    lb_proxy_drop_all(w);
    lb_pool_free_dead_cb(-1, 0, w);
}

void lb_worker_free(struct worker *w)
{
    if (w->stop_ev)
        event_free(w->stop_ev);
    if (w->reap_ev)
        event_free(w->reap_ev);
    if (w->free_ev)
        event_free(w->free_ev);
    if (w->limit_ev)
        event_free(w->limit_ev);
    if (w->backoff_ev)
        event_free(w->backoff_ev);
    w->limit_ev = w->backoff_ev = NULL;
    if (w->base)
        event_base_free(w->base);
}

void lb_workers_sum(uint64_t t[10], uint64_t o[5])
{
    for (int k = 0; k < 10; k++)
        t[k] = 0;
    for (int k = 0; k < 5; k++)
        o[k] = 0;
    for (unsigned i = 0; i < lb_cfg.threads; i++) {
        struct worker *x = &lb_workers[i];
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
        for (int k = 0; k < 5; k++)
            o[k] += GET(x->outcomes[k]);
    }
}
