/* chring-lb: the request guard: a bufferevent filter between each client socket and evhttp.
 *
 * SPDX-License-Identifier: MIT
 *
 * evhttp reads a client connection only through this filter.  A request's head is held until it
 * has arrived whole, parsed strictly (h1.c), and passed on normalised: "Name: value" lines, one
 * Content-Length, no Transfer-Encoding.  A Content-Length body then streams through; a chunked
 * body is held until its last chunk, checked as it arrives, and passed on de-chunked with its
 * length (evhttp buffers a body whole anyway), so evhttp never parses a chunk size or a trailer.
 *
 * A request that breaks a rule is not passed on: in its place evhttp gets a stand-in it answers
 * with the status the rule asks for and then closes the connection (a start line without spaces
 * gets 400; an unknown method 501; a Content-Length above --max-body 413), and every later byte
 * of the connection is dropped.  evhttp answers pipelined requests in order, so the refusal goes
 * out after the answers to the requests before it, and nothing after it is read.
 *
 * Limits (limits.c): each guard counts as one client connection from its creation to its free.
 * One created when every --max-conns slot is taken (another worker accepted at the same time) is
 * parked: its socket is not read and nothing reaches evhttp until a slot frees, and the parked
 * connections of a worker get the slots that free first, oldest first.  A body is
 * reserved against --max-body-total while it is read (a Content-Length whole when the head
 * arrives, a chunked body as it grows) and the reservation is handed over with the request;
 * a body that does not fit gets the 503 stand-in (lb_refused_target) and the connection ends.
 */
#define _GNU_SOURCE
#include "lb.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

enum guard_state {
    G_HEAD,    /* waiting for a request head */
    G_LENGTH,  /* passing a Content-Length body */
    G_CHUNKED, /* holding a chunked body */
    G_DEAD     /* refused: dropping everything */
};

struct guard {
    enum guard_state state;
    size_t scanned;
    struct h1_body body;
    struct evbuffer *head;    /* G_CHUNKED: the normalised head, without its Content-Length */
    struct evbuffer *held;    /* G_CHUNKED: the body so far, de-chunked */
    struct h1_head *parsed;   /* scratch, allocated once per connection */
    struct bufferevent *bev;  /* the filter */
    struct bufferevent *sock; /* the socket under it */
    struct event *flush_ev;   /* pushes evhttp's output through the filter */
    struct event *write_ev;   /* the socket is writable again */
    uint64_t charged;         /* body bytes of the request being read, reserved */
    struct worker *w;         /* the worker whose thread runs the connection */
    struct guard *park_next;  /* parked: the next in w's list */
    struct guard *park_prev;
    bool counted;             /* holds one of the --max-conns slots */
    bool parked;              /* waits for a slot: the socket is not read */
    bool nodelay;             /* TCP_NODELAY set on the socket */
};

static void release_body(struct guard *g)
{
    lb_body_release(g->charged);
    g->charged = 0;
}

static void refuse(struct guard *g, struct evbuffer *src, struct evbuffer *dst, int code)
{
    if (code == 501)
        evbuffer_add_printf(dst, "CHRING-LB-REFUSED / HTTP/1.1\r\nHost: x\r\n\r\n");
    else if (code == 503)
        evbuffer_add_printf(dst, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                            lb_refused_target);
    else if (code == 413)
        evbuffer_add_printf(dst, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
                            lb_cfg.max_body + 1);
    else
        evbuffer_add_printf(dst, "REFUSED\r\n\r\n");
    evbuffer_drain(src, evbuffer_get_length(src));
    if (g->held)
        evbuffer_drain(g->held, evbuffer_get_length(g->held));
    release_body(g);
    g->state = G_DEAD;
}

static bool is_body_method(const struct h1_head *h)
{
    return (h->mlen == 4 && memcmp(h->method, "POST", 4) == 0) ||
           (h->mlen == 3 && memcmp(h->method, "PUT", 3) == 0) ||
           (h->mlen == 5 && memcmp(h->method, "PATCH", 5) == 0);
}

/* Writes the normalised head: start line, every field but the framing ones, and a
 * Content-Length when the request has a body length (chunked: added when the body is done). */
static void write_head(struct evbuffer *out, const struct h1_head *h)
{
    evbuffer_add_printf(out, "%.*s %.*s HTTP/1.%d\r\n", (int)h->mlen, h->method, (int)h->tlen,
                        h->target, h->minor);
    for (size_t i = 0; i < h->nfields; i++) {
        const struct h1_field *f = &h->fields[i];
        if ((f->nlen == 14 && strncasecmp(f->name, "Content-Length", 14) == 0) ||
            (f->nlen == 17 && strncasecmp(f->name, "Transfer-Encoding", 17) == 0))
            continue;
        evbuffer_add(out, f->name, f->nlen);
        evbuffer_add(out, ": ", 2);
        evbuffer_add(out, f->value, f->vlen);
        evbuffer_add(out, "\r\n", 2);
    }
    if (h->framing == H1_LENGTH || (h->framing == H1_NONE && is_body_method(h)))
        evbuffer_add_printf(out, "Content-Length: %llu\r\n", (unsigned long long)h->length);
}

/* One head at the start of src.  Returns true when it was handled (passed or refused). */
static bool guard_head(struct guard *g, struct evbuffer *src, struct evbuffer *dst)
{
    /* RFC 9112 section 2.2: empty lines before a request line are ignored. */
    unsigned char two[2];
    while (g->scanned == 0 && evbuffer_copyout(src, two, 2) == 2 && two[0] == '\r' &&
           two[1] == '\n')
        evbuffer_drain(src, 2);
    ssize_t end = h1_find_head_end(src, &g->scanned);
    if (end == -2) {
        refuse(g, src, dst, 400);
        return true;
    }
    if (end < 0) {
        if (evbuffer_get_length(src) > lb_cfg.max_headers) {
            refuse(g, src, dst, 400);
            return true;
        }
        return false;
    }
    if ((size_t)end > lb_cfg.max_headers) {
        refuse(g, src, dst, 400);
        return true;
    }
    char *buf = (char *)evbuffer_pullup(src, end);
    if (!g->parsed)
        g->parsed = malloc(sizeof *g->parsed);
    if (!buf || !g->parsed) {
        refuse(g, src, dst, 400);
        return true;
    }
    struct h1_head *h = g->parsed;
    int rc = h1_parse_head(buf, (size_t)end, true, h);
    if (rc == 0)
        rc = h1_request_framing(h);
    if (rc == 0 && h->framing == H1_LENGTH && h->length > lb_cfg.max_body)
        rc = 413;
    if (rc == 0 && h->framing == H1_LENGTH) {
        if (!lb_body_reserve(h->length))
            rc = 503;
        else
            g->charged = h->length;
    }
    if (rc != 0) {
        refuse(g, src, dst, rc);
        return true;
    }
    if (h->framing == H1_CHUNKED) {
        if (!g->head)
            g->head = evbuffer_new();
        if (!g->held)
            g->held = evbuffer_new();
        if (!g->head || !g->held) {
            refuse(g, src, dst, 400);
            return true;
        }
        write_head(g->head, h);
        g->state = G_CHUNKED;
    } else {
        write_head(dst, h);
        evbuffer_add(dst, "\r\n", 2);
        g->state = h->framing == H1_LENGTH ? G_LENGTH : G_HEAD;
    }
    h1_body_init(&g->body, h->framing, h->length);
    evbuffer_drain(src, (size_t)end);
    return true;
}

static enum bufferevent_filter_result guard_filter(struct evbuffer *src, struct evbuffer *dst,
                                                   ev_ssize_t limit,
                                                   enum bufferevent_flush_mode mode, void *ctx)
{
    (void)limit;
    (void)mode;
    struct guard *g = ctx;
    if (g->parked)
        return BEV_NEED_MORE; /* not expected (park disables reading before evhttp gives the
                                 socket its descriptor); bytes read anyway wait for admission */
    size_t before = evbuffer_get_length(dst);
    while (evbuffer_get_length(src) > 0) {
        if (g->state == G_DEAD) {
            evbuffer_drain(src, evbuffer_get_length(src));
            break;
        }
        if (g->state == G_HEAD) {
            if (!guard_head(g, src, dst))
                break;
            continue;
        }
        struct evbuffer *to = g->state == G_LENGTH ? dst : g->held;
        int rc = h1_body_step(&g->body, src, to);
        if (rc < 0) {
            refuse(g, src, dst, 400);
            break;
        }
        if (g->state == G_CHUNKED && g->body.total > lb_cfg.max_body) {
            refuse(g, src, dst, 413);
            break;
        }
        if (g->state == G_CHUNKED && g->body.total > g->charged) {
            if (!lb_body_reserve(g->body.total - g->charged)) {
                refuse(g, src, dst, 503);
                break;
            }
            g->charged = g->body.total;
        }
        if (rc == 0)
            break;
        release_body(g); /* the body goes to evhttp: the request holds it from now on */
        if (g->state == G_CHUNKED) {
            evbuffer_add_printf(g->head, "Content-Length: %llu\r\n\r\n",
                                (unsigned long long)g->body.total);
            evbuffer_add_buffer(dst, g->head);
            evbuffer_add_buffer(dst, g->held);
        }
        g->state = G_HEAD;
    }
    return evbuffer_get_length(dst) > before ? BEV_OK : BEV_NEED_MORE;
}

/* evhttp adds an answer to the filter's output and only then enables writing, which a filter
 * bufferevent does not notice (its output is processed when bytes are added, or on a flush).
 * Every addition schedules a flush from the event loop, after evhttp has enabled writing. */
static void guard_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct guard *g = arg;
    bufferevent_flush(g->bev, EV_WRITE, BEV_NORMAL);
}

/* The output side writes evhttp's bytes to the socket itself and consumes only what the kernel
 * took: evhttp shuts a connection down as soon as its output buffer is empty, so bytes parked in
 * a buffer under the filter would be lost with a "Connection: close" answer. */
static enum bufferevent_filter_result guard_out(struct evbuffer *src, struct evbuffer *dst,
                                                ev_ssize_t limit, enum bufferevent_flush_mode mode,
                                                void *ctx)
{
    (void)dst;
    (void)limit;
    (void)mode;
    struct guard *g = ctx;
    evutil_socket_t fd = bufferevent_getfd(g->sock);
    if (fd < 0)
        return BEV_NEED_MORE;
    if (!g->nodelay) {
        /* An answer goes out in pieces (its head, then its body as the backend sends it): with
         * Nagle's algorithm a piece would wait for the client's delayed ACK of the one before
         * (40 ms on Linux). */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        g->nodelay = true;
    }
    while (evbuffer_get_length(src) > 0) {
        int n = evbuffer_write(src, fd);
        if (n > 0)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            evbuffer_drain(src, evbuffer_get_length(src)); /* the peer is gone: evhttp sees it */
            break;
        }
        if (!g->write_ev)
            g->write_ev = event_new(bufferevent_get_base(g->bev), fd, EV_WRITE, guard_flush_cb, g);
        if (g->write_ev)
            event_add(g->write_ev, NULL);
        return BEV_NEED_MORE;
    }
    return BEV_OK;
}

static void guard_outbuf_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    (void)buf;
    struct guard *g = arg;
    if (info->n_added > 0)
        event_active(g->flush_ev, 0, 0);
}

/* Takes g out of its worker's list of parked connections. */
static void unpark(struct guard *g)
{
    struct worker *w = g->w;
    if (g->park_prev)
        g->park_prev->park_next = g->park_next;
    else
        w->parked = g->park_next;
    if (g->park_next)
        g->park_next->park_prev = g->park_prev;
    else
        w->parked_tail = g->park_prev;
    g->park_next = g->park_prev = NULL;
    g->parked = false;
}

static void guard_free(void *ctx)
{
    struct guard *g = ctx;
    if (g->flush_ev)
        event_free(g->flush_ev);
    if (g->write_ev)
        event_free(g->write_ev);
    if (g->head)
        evbuffer_free(g->head);
    if (g->held)
        evbuffer_free(g->held);
    free(g->parsed);
    release_body(g);
    bool counted = g->counted, parked = g->parked;
    if (parked)
        unpark(g);
    free(g);
    if (counted)
        lb_conn_close();
    else if (parked)
        lb_conn_unpark();
}

static void park(struct guard *g)
{
    struct worker *w = g->w;
    g->parked = true;
    g->park_prev = w->parked_tail;
    g->park_next = NULL;
    if (w->parked_tail)
        w->parked_tail->park_next = g;
    else
        w->parked = g;
    w->parked_tail = g;
    /* Before evhttp gives the socket its descriptor, which enables it as it was left. */
    bufferevent_disable(g->sock, EV_READ);
}

void lb_guard_admit(struct worker *w)
{
    while (w->parked && lb_conn_admit()) {
        struct guard *g = w->parked;
        unpark(g);
        g->counted = true;
        bufferevent_enable(g->sock, EV_READ);
        if (evbuffer_get_length(bufferevent_get_input(g->sock)) > 0)
            bufferevent_trigger(g->sock, EV_READ, BEV_TRIG_IGNORE_WATERMARKS);
    }
}

struct bufferevent *lb_guard_bev(struct event_base *base, void *arg)
{
    struct worker *w = arg;
    struct guard *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    struct bufferevent *sock = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!sock) {
        free(g);
        return NULL;
    }
    struct bufferevent *bev =
        bufferevent_filter_new(sock, guard_filter, guard_out, BEV_OPT_CLOSE_ON_FREE, guard_free, g);
    if (!bev) {
        bufferevent_free(sock);
        free(g);
        return NULL;
    }
    g->bev = bev;
    g->sock = sock;
    g->flush_ev = event_new(base, -1, 0, guard_flush_cb, g);
    if (!g->flush_ev || !evbuffer_add_cb(bufferevent_get_output(bev), guard_outbuf_cb, g)) {
        if (g->flush_ev)
            event_free(g->flush_ev);
        g->flush_ev = NULL;
        bufferevent_free(bev); /* frees g; it holds no slot yet */
        return NULL;
    }
    g->w = w;
    if (lb_conn_open(w))
        g->counted = true;
    else
        park(g);
    return bev;
}
