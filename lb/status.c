/* chring-lb: the stats listener and the status page.
 *
 * SPDX-License-Identifier: MIT
 *
 * Every /_chring/ path is the balancer's own: GET /_chring/stats (JSON, stats.c) and GET
 * /_chring/ (one self-contained HTML page, no external asset, that draws the ring and every
 * member's load from the JSON, refreshed each second).  By default they are answered on the main
 * listener, by the worker that got the request, to peers in --stats-allow (loopback by default).
 * With --stats-listen they are answered only there, by the main thread's event loop (the one that
 * applies membership changes), so a stats request never takes a worker's time, and the main
 * listener answers them 404.
 */
#define _GNU_SOURCE
#include "status.h"
#include "allow.h"
#include "config.h"
#include "conn.h"
#include "listen.h"
#include "log.h"
#include "proxy.h"
#include "worker.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* the status page                                                                             */

/* The page: lb/status.html, embedded at build time by lb/embed.py (lb/meson.build). */
#include "status_html.h"

static void serve_page(struct lb_req *req)
{
    enum evhttp_cmd_type cmd = req->cmd;
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        lb_send_text(req, 405, "Method Not Allowed", "GET only");
        return;
    }
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        lb_send_text(req, 500, "Internal Server Error", "out of memory");
        return;
    }
    evbuffer_add_reference(b, lb_status_html, lb_status_html_len, NULL, NULL);
    struct evkeyvalq *oh = req->out;
    evhttp_add_header(oh, "Content-Type", "text/html; charset=utf-8");
    evhttp_add_header(oh, "Cache-Control", "no-store");
    /* The page needs nothing from elsewhere: forbid everything else. */
    evhttp_add_header(oh, "Content-Security-Policy",
                      "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                      "connect-src 'self'; img-src 'self'");
    lb_req_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* routing and the stats listener                                                              */

/* The request came through a proxy: its peer address is the proxy's, not the client's. */
static bool forwarded(const struct lb_req *req)
{
    static const char *const marks[] = {"Forwarded", "X-Forwarded-For", "X-Real-IP", "Via"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (evhttp_find_header(req->in, marks[i]))
            return true;
    return false;
}

void lb_status_route(struct worker *w, struct lb_req *req, const char *path)
{
    /* The main listener (docs/lb.md, "Security model"): a front on the same host (nginx's
     * default proxy_pass) connects from loopback for every client it has, so loopback proves
     * nothing there.  /_chring/ is answered on it only when --stats-allow names the peers, and
     * then never to a request that a proxy forwarded. */
    if (w && (lb_cfg.stats_port != 0 || !lb_cfg.stats_allow)) {
        lb_send_text(req, 404, "Not Found", "not found");
        return;
    }
    if (w && !lb_stats_allow_any() && forwarded(req)) {
        lb_send_text(req, 403, "Forbidden", "not allowed: forwarded by a proxy (--stats-allow)");
        return;
    }
    if (!lb_stats_peer_allowed(req->peer)) {
        lb_send_text(req, 403, "Forbidden", "not allowed (--stats-allow)");
        return;
    }
    if (!lb_stats_host_allowed(evhttp_find_header(req->in, "Host"),
                               w == NULL)) {
        lb_send_text(req, 421, "Misdirected Request", "Host not allowed for /_chring/");
        return;
    }
    if (strcmp(path, "/_chring/stats") == 0)
        lb_stats_serve(w, req);
    else if (strcmp(path, "/_chring/metrics") == 0)
        lb_metrics_serve(w, req);
    else if (strcmp(path, "/_chring/") == 0)
        serve_page(req);
    else
        lb_send_text(req, 404, "Not Found", "not found");
}

static struct evconnlistener *stats_listener;
static struct event *stats_backoff_ev;

/* Out of descriptors on the stats listener: accepting pauses for a second (as the workers'
 * listeners back off, limits.c), instead of spinning on the main thread. */
static void on_stats_backoff_end(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (stats_listener)
        evconnlistener_enable(stats_listener);
}

static void on_stats_accept_error(struct evconnlistener *listener, void *arg)
{
    (void)arg;
    static const struct timeval second = {1, 0};
    evconnlistener_disable(listener);
    if (stats_backoff_ev)
        event_add(stats_backoff_ev, &second);
}

static void on_stats_request(struct worker *w, struct lb_req *req)
{
    (void)w;
    const char *path = req->path;
    if (strcmp(path, "/_chring") == 0) {
        evhttp_add_header(req->out, "Location", "/_chring/");
        lb_send_text(req, 301, "Moved Permanently", "/_chring/");
    } else if (strncmp(path, "/_chring/", 9) == 0) {
        lb_status_route(NULL, req, path);
    } else {
        lb_send_text(req, 404, "Not Found", "not found: see /_chring/");
    }
}

int lb_status_start(struct event_base *base)
{
    if (lb_cfg.stats_port == 0)
        return 0;
    int fd = lb_listen_on(lb_cfg.stats_host, lb_cfg.stats_port, false);
    if (fd >= 0) {
        stats_listener = lb_server_listen(base, fd, NULL, on_stats_request);
        if (!stats_listener)
            close(fd);
    }
    stats_backoff_ev = evtimer_new(base, on_stats_backoff_end, NULL);
    if (!stats_listener || !stats_backoff_ev) {
        lb_log("--stats-listen %s:%u: cannot listen", lb_cfg.stats_host, lb_cfg.stats_port);
        lb_status_stop();
        return -1;
    }
    evconnlistener_set_error_cb(stats_listener, on_stats_accept_error);
    lb_log("stats and status page on http://%s:%u/_chring/", lb_cfg.stats_host, lb_cfg.stats_port);
    return 0;
}

void lb_status_stop(void)
{
    if (stats_listener)
        evconnlistener_free(stats_listener);
    stats_listener = NULL;
    lb_server_close_all(NULL);
    if (stats_backoff_ev)
        event_free(stats_backoff_ev);
    stats_backoff_ev = NULL;
}
