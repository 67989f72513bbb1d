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
#include "lb.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* --stats-allow                                                                               */

struct cidr {
    int family;
    unsigned char addr[16];
    unsigned bits;
};

#define MAX_CIDRS 64
static struct cidr allow[MAX_CIDRS];
static size_t nallow;
static bool allow_any;

/* One entry of --stats-allow: an address, or an address, '/' and a prefix length in plain
 * decimal (no sign, no leading zero, no white space) with no bit set past it.  Returns NULL, or
 * why it is refused (static text, or buf). */
static const char *parse_cidr(const char *s, size_t len, struct cidr *c, char *buf, size_t bufcap)
{
    char text[INET6_ADDRSTRLEN + 8];
    if (len == 0)
        return "an empty entry (two commas, or one at an end)";
    if (len >= sizeof text)
        return "not an IPv4 or IPv6 address";
    memcpy(text, s, len);
    text[len] = '\0';
    char *slash = strchr(text, '/');
    long bits = -1;
    if (slash) {
        const char *d = slash + 1;
        size_t nd = strlen(d);
        if (nd == 0 || nd > 3 || strspn(d, "0123456789") != nd || (nd > 1 && d[0] == '0'))
            return "the prefix length is not a plain decimal number";
        bits = strtol(d, NULL, 10);
        *slash = '\0';
    }
    unsigned max;
    if (inet_pton(AF_INET, text, c->addr) == 1) {
        c->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, text, c->addr) == 1) {
        c->family = AF_INET6;
        max = 128;
        if (memcmp(c->addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0)
            return "an IPv4-mapped IPv6 address: write the IPv4 form (peers are matched as IPv4)";
    } else {
        return "not an IPv4 or IPv6 address";
    }
    if (bits < 0)
        bits = max;
    if ((unsigned)bits > max) {
        snprintf(buf, bufcap, "the prefix length is above %u", max);
        return buf;
    }
    c->bits = (unsigned)bits;
    for (unsigned i = c->bits; i < max; i++)
        if (c->addr[i / 8] & (0x80 >> (i % 8))) {
            struct cidr net = *c;
            for (unsigned j = c->bits; j < max; j++)
                net.addr[j / 8] &= (unsigned char)~(0x80 >> (j % 8));
            char a[INET6_ADDRSTRLEN];
            inet_ntop(c->family, net.addr, a, sizeof a);
            snprintf(buf, bufcap, "bits set past /%u (the network is %s/%u)", c->bits, a, c->bits);
            return buf;
        }
    return NULL;
}

int lb_stats_allow_parse(const char *list)
{
    nallow = 0;
    allow_any = false;
    if (!list)
        list = "127.0.0.0/8,::1";
    if (strcmp(list, "any") == 0) {
        allow_any = true;
        return 0;
    }
    for (const char *p = list;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char buf[128], shown[64];
        const char *why;
        if (len == 3 && memcmp(p, "any", 3) == 0)
            why = "'any' must stand alone";
        else if (nallow == MAX_CIDRS)
            why = "more entries than the 64 allowed";
        else
            why = parse_cidr(p, len, &allow[nallow], buf, sizeof buf);
        if (why) {
            snprintf(shown, sizeof shown, "%.*s", (int)(len < 48 ? len : 48), p);
            for (char *c = shown; *c; c++)
                if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                    *c = '?';
            fprintf(stderr,
                    "chring-lb: --stats-allow: entry %zu '%s': %s; expected 'any' or up to %d "
                    "addresses or CIDRs (a.b.c.d/n, x::y/n) separated by commas\n",
                    nallow + 1, shown, why, MAX_CIDRS);
            nallow = 0;
            return -1;
        }
        nallow++;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

static bool prefix_match(const unsigned char *a, const unsigned char *b, unsigned bits)
{
    unsigned full = bits / 8, rest = bits % 8;
    if (memcmp(a, b, full) != 0)
        return false;
    if (rest == 0)
        return true;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (a[full] & mask) == (b[full] & mask);
}

bool lb_stats_peer_allowed(const char *peer)
{
    if (allow_any)
        return true;
    unsigned char a4[4], a6[16];
    bool v4 = inet_pton(AF_INET, peer, a4) == 1;
    bool v6 = !v4 && inet_pton(AF_INET6, peer, a6) == 1;
    if (v6 && memcmp(a6, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) { /* IPv4-mapped */
        memcpy(a4, a6 + 12, 4);
        v4 = true;
        v6 = false;
    }
    for (size_t i = 0; i < nallow; i++) {
        if (v4 && allow[i].family == AF_INET && prefix_match(a4, allow[i].addr, allow[i].bits))
            return true;
        if (v6 && allow[i].family == AF_INET6 && prefix_match(a6, allow[i].addr, allow[i].bits))
            return true;
    }
    return false;
}

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
    if (w && !allow_any && forwarded(req)) {
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
