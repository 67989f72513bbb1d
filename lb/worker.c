/* chring-lb: worker threads: each runs its own event loop and evhttp server on its own listener,
 * and hands every request to the stats endpoint or to the proxy.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "lb.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The request entry point (evhttp's generic callback). */
static void on_request(struct evhttp_request *req, void *arg)
{
    struct worker *w = arg;
    ADD(w->requests, 1);
    const struct evhttp_uri *pu = evhttp_request_get_evhttp_uri(req);
    const char *path = pu ? evhttp_uri_get_path(pu) : NULL;
    if (path && strncmp(path, "/_chring/", 9) == 0)
        lb_status_route(w, req, path);
    else if (lb_via_loop(evhttp_request_get_input_headers(req)))
        lb_send_text(req, 508, "Loop Detected", "this request came through this balancer already");
    else if (path && strcmp(path, lb_refused_target) == 0)
        lb_send_overloaded(req, "buffered request bodies at their limit (--max-body-total)");
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

/* Closes fd and frees res, then returns rc. */
static int listen_fail(int fd, struct addrinfo *res, int rc)
{
    close(fd);
    freeaddrinfo(res);
    return rc;
}

int lb_listen_socket(bool reuseport)
{
    struct addrinfo hints = {0}, *res = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", lb_cfg.listen_port);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int gai = getaddrinfo(lb_cfg.listen_host, port, &hints, &res);
    if (gai != 0) {
        lb_log("listen %s:%s: %s", lb_cfg.listen_host, port, gai_strerror(gai));
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
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
        return listen_fail(fd, res, -2);
#else
    if (reuseport)
        return listen_fail(fd, res, -2);
#endif
    if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
        lb_log("listen %s:%s: %s", lb_cfg.listen_host, port, strerror(errno));
        return listen_fail(fd, res, -1);
    }
    freeaddrinfo(res);
    return fd;
}

int lb_worker_init(struct worker *w, unsigned id, int shared_fd)
{
    w->id = id;
    w->base = event_base_new();
    if (!w->base)
        return -1;
    w->http = evhttp_new(w->base);
    w->stop_ev = event_new(w->base, -1, 0, on_stop, w);
    w->reap_ev = event_new(w->base, -1, 0, lb_backend_reap_cb, w);
    w->free_ev = event_new(w->base, -1, 0, lb_pool_free_dead_cb, w);
    if (!w->http || !w->stop_ev || !w->reap_ev || !w->free_ev)
        return -1;
    evhttp_set_gencb(w->http, on_request, w);
    evhttp_set_bevcb(w->http, lb_guard_bev, w);
    evhttp_set_timeout_tv(w->http, &lb_cfg.client_timeout);
    evhttp_set_max_headers_size(w->http, (ev_ssize_t)lb_cfg.max_headers);
    evhttp_set_max_body_size(w->http, (ev_ssize_t)lb_cfg.max_body);
    evhttp_set_allowed_methods(w->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_default_content_type(w->http, NULL);
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
    struct evhttp_bound_socket *bound = evhttp_accept_socket_with_handle(w->http, fd);
    if (!bound) {
        close(fd);
        return -1;
    }
    return lb_limits_attach(w, evhttp_bound_socket_get_listener(bound));
}

void lb_worker_cleanup(struct worker *w)
{
    /* Freeing the server closes the client connections; the close callbacks cancel backend
     * requests and release leases. */
    lb_limits_shutdown();
    if (w->http)
        evhttp_free(w->http);
    w->http = NULL;
    w->listener = NULL;
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
