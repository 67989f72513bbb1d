/* chring-lb: the client side: chring-lb's own HTTP/1.1 server connections (conn.h).
 *
 * SPDX-License-Identifier: MIT
 *
 * Every client connection (a worker's, or the stats listener's on the main thread) is a plain
 * bufferevent whose bytes go through h1.c, the strict parser the backend side uses too, by way
 * of h1_evbuffer.c: one parse per request.  A connection goes through
 *
 *   IDLE  waiting for the first byte of a request (--client-timeout of silence closes it), and
 *         not reading while the answers before it hold more than LB_PIPELINE_OUT bytes;
 *   HEAD  a head is arriving: it must be whole by --client-timeout after its first byte,
 *         however it is trickled, and at most --max-headers bytes (431);
 *   BODY  the body is arriving: by --client-timeout after the head plus the time the bytes so
 *         far take at --body-min-rate; each byte is reserved against --max-body-total as it
 *         arrives (503 when it does not fit); more than --max-body: 413;
 *   BUSY  the handler has the request; the socket is still read (a close is noticed: the gone
 *         callback) but pipelined bytes are left in the input buffer, at most about
 *         --max-headers of them;
 *   CLOSING  the last answer is being written;
 *   LINGER   it is out and the sending side shut down: what the client still sends is read and
 *         dropped for at most 2 s, so that a refusal is not lost to a reset.
 *
 * Every refusal (400, 408, 413, 417, 431, 501, 503) is written here, with "Connection: close",
 * after the answers to the requests before it, and nothing after it is read.  `Expect:
 * 100-continue` on a request with a body is answered "100 Continue" before the body is read,
 * unless its bytes have started to arrive.  Answers carry a Content-Length, or are chunked to
 * HTTP/1.1 clients, or end with the connection for HTTP/1.0 ones.  An answer's bytes may wait
 * for the client at most --client-timeout plus one second per --send-min-rate bytes it took
 * (on_send_check); past that the connection is closed.
 *
 * Limits (limits.c): a worker's connection counts against --max-conns from its accept to its
 * free; one accepted while every slot is taken (another worker took the last) is parked, its
 * socket not read, until lb_conn_admit_parked gives it the first slot that frees.  The stats
 * listener's connections take no slot: a peer outside --stats-allow is closed at its accept,
 * and at most LB_STATS_CONNS of them are open.
 */
#define _GNU_SOURCE
#include "conn.h"
#include "allow.h"
#include "config.h"
#include "h1.h"
#include "h1_evbuffer.h"
#include "lb.h"
#include "limits.h"
#include "log.h"
#include "worker.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

enum conn_state {
    C_IDLE,
    C_HEAD,
    C_BODY,
    C_BUSY,
    C_CLOSING,
    C_LINGER
};

/* A request and what its answer needs; the public part first. */
struct req {
    struct lb_req pub;
    struct evkeyvalq in, out;
    char *store; /* method, target, path, query, authority: NUL-terminated copies */
    bool keep_alive;
    bool head_only;   /* HEAD: no body in the answer */
    bool started;     /* the answer's head went out */
    bool chunked;     /* the answer is chunked */
    bool no_body;     /* the answer has no body (HEAD, 1xx, 204, 304) */
    bool until_close; /* the answer's body ends with the connection */
    uint64_t charged; /* body bytes reserved against --max-body-total */
    void (*drained)(void *);
    void (*gone)(void *);
    void *cb_arg;
};

struct conn {
    struct worker *w; /* NULL: the stats listener */
    lb_handler_fn handler;
    struct bufferevent *bev;
    struct event *deadline;           /* the head's or the body's deadline */
    struct event *later;              /* the next step, outside the callers' stacks */
    struct event *send_check;         /* the client's time to take its answer (on_send_check) */
    struct evbuffer_cb_entry *out_cb; /* on_out_change on the output buffer */
    enum conn_state state;
    struct h1_head_scan scan; /* where the head's end was looked for */
    struct h1_head *head;     /* scratch, allocated once */
    struct h1_body body;
    struct req *req;          /* being read (BODY) or served (BUSY) */
    struct evbuffer *scratch; /* body bytes on their way into the request */
    int64_t started_ms;       /* the head's first byte, then the body's start */
    char peer[INET6_ADDRSTRLEN];
    bool counted;             /* holds a --max-conns slot */
    bool aborted;             /* closing without lingering */
    bool parked;              /* waits for one: not read */
    bool out_full;            /* the next request waits until the answers before are written */
    int64_t wait_since_ms;    /* the output holds bytes since then (0: it is empty) */
    int64_t waited_ms;        /* the time the output held bytes before that, in this answer */
    uint64_t sent;            /* bytes written to the socket in this answer */
    struct conn *prev, *next; /* the list of the worker's (or the stats) connections */
    struct conn *park_prev, *park_next; /* the worker's parked connections, oldest first */
};

/* The answers a connection may have waiting before its next request is read. */
#define LB_PIPELINE_OUT (64u << 10)

static struct conn *stats_conns; /* the stats listener's connections (main thread) */
static unsigned stats_open;      /* their number */
/* The stats listener's connections at most (each costs a descriptor). */
#define LB_STATS_CONNS 16
_Atomic uint64_t lb_stats_refused;
/* The handlers: set before the listeners accept, read-only afterwards. */
static lb_handler_fn worker_handler, stats_handler;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t tv_ms(const struct timeval *tv)
{
    return (int64_t)tv->tv_sec * 1000 + tv->tv_usec / 1000;
}

static struct conn **list_of(struct worker *w)
{
    return w ? &w->conns : &stats_conns;
}

static const char *reason_of(int code)
{
    switch (code) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 508: return "Loop Detected";
    default:
        return code < 300   ? "OK"
               : code < 400 ? "Redirect"
               : code < 500 ? "Client Error"
                            : "Server Error";
    }
}

/* ------------------------------------------------------------------------------------------ */
/* requests                                                                                    */

static void req_free(struct req *r)
{
    if (!r)
        return;
    evhttp_clear_headers(&r->in);
    evhttp_clear_headers(&r->out);
    if (r->pub.body)
        evbuffer_free(r->pub.body);
    lb_body_release(r->charged);
    free(r->store);
    free(r);
}

static void conn_free(struct conn *c);
static void conn_read(struct conn *c);

static void unpark(struct conn *c)
{
    struct worker *w = c->w;
    if (c->park_prev)
        c->park_prev->park_next = c->park_next;
    else
        w->parked = c->park_next;
    if (c->park_next)
        c->park_next->park_prev = c->park_prev;
    else
        w->parked_tail = c->park_prev;
    c->park_next = c->park_prev = NULL;
    c->parked = false;
}

static void conn_free(struct conn *c)
{
    struct conn **list = list_of(c->w);
    if (c->prev)
        c->prev->next = c->next;
    else if (*list == c)
        *list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (c->req) {
        struct req *r = c->req;
        c->req = NULL;
        if (r->gone) {
            void (*gone)(void *) = r->gone;
            r->gone = NULL;
            gone(r->cb_arg);
        }
        req_free(r);
    }
    if (c->deadline)
        event_free(c->deadline);
    if (c->later)
        event_free(c->later);
    if (c->send_check)
        event_free(c->send_check);
    if (c->out_cb)
        evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->out_cb);
    if (c->bev)
        bufferevent_free(c->bev);
    if (c->scratch)
        evbuffer_free(c->scratch);
    free(c->head);
    if (!c->w)
        stats_open--;
    bool counted = c->counted, parked = c->parked;
    if (parked)
        unpark(c);
    free(c);
    if (counted)
        lb_conn_close();
    else if (parked)
        lb_conn_unpark();
}

/* Runs the next step from the event loop: the connection may be freed there, not under a
 * handler that is still using its request. */
static void schedule(struct conn *c)
{
    event_active(c->later, 0, 0);
}

static void add_date(struct evbuffer *out)
{
    char date[64];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    evbuffer_add_printf(out, "Date: %s\r\n", date);
}

/* A refusal written by the balancer itself: the connection ends after it. */
static void refuse(struct conn *c, int code, const char *why)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    const char *body = why ? why : reason_of(code);
    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n", code,
                        reason_of(code));
    if (code == 503)
        evbuffer_add_printf(out, "Retry-After: 1\r\n");
    add_date(out);
    evbuffer_add_printf(out, "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
                        strlen(body) + 1, body);
    if (c->req) {
        req_free(c->req);
        c->req = NULL;
    }
    c->state = C_CLOSING;
    bufferevent_disable(c->bev, EV_READ);
    evbuffer_drain(bufferevent_get_input(c->bev),
                   evbuffer_get_length(bufferevent_get_input(c->bev)));
    event_del(c->deadline);
    bufferevent_enable(c->bev, EV_WRITE);
}

static enum evhttp_cmd_type method_cmd(const char *m, size_t n, bool *ok)
{
    static const struct {
        const char *name;
        enum evhttp_cmd_type cmd;
    } methods[] = {{"GET", EVHTTP_REQ_GET},       {"POST", EVHTTP_REQ_POST},
                   {"HEAD", EVHTTP_REQ_HEAD},     {"PUT", EVHTTP_REQ_PUT},
                   {"DELETE", EVHTTP_REQ_DELETE}, {"OPTIONS", EVHTTP_REQ_OPTIONS},
                   {"PATCH", EVHTTP_REQ_PATCH}};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strlen(methods[i].name) == n && memcmp(methods[i].name, m, n) == 0) {
            *ok = true;
            return methods[i].cmd;
        }
    *ok = false;
    return EVHTTP_REQ_GET;
}

/* Builds the request from the parsed head h.  Returns 0, or the status to refuse it with. */
static int req_build(struct conn *c, struct h1_head *h, bool body_here, struct req **out)
{
    bool known;
    enum evhttp_cmd_type cmd = method_cmd(h->method, h->mlen, &known);
    if (!known)
        return 501;
    struct req *r = calloc(1, sizeof *r);
    if (!r)
        return 503;
    TAILQ_INIT(&r->in);
    TAILQ_INIT(&r->out);
    r->pub.in = &r->in;
    r->pub.out = &r->out;
    r->pub.cmd = cmd;
    r->pub.minor = h->minor;
    r->pub.peer = c->peer;
    r->pub.conn = c;
    r->head_only = cmd == EVHTTP_REQ_HEAD;
    /* method, target, path (+1 for "/"), query, authority */
    size_t cap = h->mlen + 1 + 3 * (h->tlen + 2) + 2;
    char *s = r->store = malloc(cap);
    r->pub.body = evbuffer_new();
    if (!s || !r->pub.body) {
        req_free(r);
        return 503;
    }
    memcpy(s, h->method, h->mlen);
    s[h->mlen] = '\0';
    r->pub.method = s;
    s += h->mlen + 1;
    memcpy(s, h->target, h->tlen);
    s[h->tlen] = '\0';
    r->pub.target = s;
    s += h->tlen + 1;
    const char *t = h->target;
    size_t tl = h->tlen;
    if (tl > 7 && strncasecmp(t, "http://", 7) == 0) {
        /* absolute-form (RFC 9112 section 3.2.2): its authority replaces Host */
        size_t a = 7, e = 7;
        while (e < tl && t[e] != '/' && t[e] != '?')
            e++;
        if (e == a || !h1_authority_ok(t + a, e - a)) {
            req_free(r);
            return 400;
        }
        memcpy(s, t + a, e - a);
        s[e - a] = '\0';
        r->pub.authority = s;
        s += e - a + 1;
        t += e;
        tl -= e;
    }
    size_t q = 0;
    while (q < tl && t[q] != '?')
        q++;
    if (q == 0 || t[0] != '/') { /* "*", or "http://host" or "http://host?q" */
        *s = '/';
        s[1] = '\0';
        r->pub.path = s;
        s += 2;
    } else {
        memcpy(s, t, q);
        s[q] = '\0';
        r->pub.path = s;
        s += q + 1;
    }
    if (q < tl) {
        memcpy(s, t + q + 1, tl - q - 1);
        s[tl - q - 1] = '\0';
        r->pub.query = s;
    }
    /* Fields: the head is drained after this, so its bytes can end each name and value. */
    bool close = false, keep = false, expect_continue = false, expect_other = false;
    for (size_t i = 0; i < h->nfields; i++) {
        struct h1_field *f = &h->fields[i];
        char *name = (char *)f->name, *value = (char *)f->value;
        name[f->nlen] = '\0';
        value[f->vlen] = '\0';
        if (f->nlen == 10 && strcasecmp(name, "Connection") == 0) {
            close |= h1_token_listed(value, f->vlen, "close");
            keep |= h1_token_listed(value, f->vlen, "keep-alive");
        } else if (f->nlen == 6 && strcasecmp(name, "Expect") == 0) {
            if (f->vlen == 12 && strcasecmp(value, "100-continue") == 0)
                expect_continue = true;
            else
                expect_other = true;
        }
        if (evhttp_add_header(&r->in, name, value) < 0) {
            req_free(r);
            return 400;
        }
    }
    if (expect_other) {
        req_free(r);
        return 417;
    }
    r->keep_alive = h->minor >= 1 ? !close : keep && !close;
    if (expect_continue && h->minor >= 1 && h->framing != H1_NONE && !body_here)
        evbuffer_add_printf(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n");
    *out = r;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* reading                                                                                     */

static void arm_deadline(struct conn *c, int64_t at_ms)
{
    int64_t d = at_ms - now_ms();
    if (d < 0)
        d = 0;
    struct timeval tv = {(time_t)(d / 1000), (suseconds_t)((d % 1000) * 1000)};
    event_add(c->deadline, &tv);
}

/* When the body must have arrived: --client-timeout after it started, plus the time its bytes
 * so far take at --body-min-rate. */
static int64_t body_deadline(const struct conn *c)
{
    int64_t rate = (int64_t)lb_cfg.body_min_rate;
    int64_t extra = rate > 0 ? (int64_t)(c->body.total * 1000 / (uint64_t)rate) : 0;
    return c->started_ms + tv_ms(&lb_cfg.client_timeout) + extra;
}

/* Appends the bytes of from to body by copying them into full chains.  Moving the socket's
 * chains instead would keep each read (at most 4 KiB in libevent) in a chain of 8 KiB: the
 * body would cost twice what --max-body-total counts. */
static void body_keep(struct evbuffer *body, struct evbuffer *from)
{
    for (;;) {
        struct evbuffer_iovec v[16];
        int n = evbuffer_peek(from, -1, NULL, v, 16);
        if (n <= 0)
            return;
        size_t done = 0;
        for (int i = 0; i < n && i < 16; i++) {
            if (evbuffer_add(body, v[i].iov_base, v[i].iov_len) < 0)
                break;
            done += v[i].iov_len;
        }
        evbuffer_drain(from, done);
        if (n <= 16 || done == 0)
            return;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* the client's side of writing (docs/lb.md, "Limits": slow readers)                          */

/* The bytes of this answer the client took: those written to the socket less those still in
 * the kernel's send queue (which grows to megabytes on a fast path: a written byte is not yet a
 * byte the client read). */
static uint64_t taken(const struct conn *c)
{
    int queued = 0;
    if (ioctl(bufferevent_getfd(c->bev), SIOCOUTQ, &queued) < 0 || queued < 0)
        queued = 0;
    return c->sent > (uint64_t)queued ? c->sent - (uint64_t)queued : 0;
}

/* How long this answer may have kept the balancer waiting for the client: --client-timeout,
 * plus 1 s per --send-min-rate bytes the client took. */
static int64_t send_allowance(const struct conn *c)
{
    int64_t a = tv_ms(&lb_cfg.client_timeout);
    if (lb_cfg.send_min_rate > 0)
        a += (int64_t)(taken(c) * 1000 / lb_cfg.send_min_rate);
    return a;
}

static int64_t waited_now(const struct conn *c, int64_t now)
{
    return c->waited_ms + (c->wait_since_ms ? now - c->wait_since_ms : 0);
}

static void arm_send_check(struct conn *c, int64_t now)
{
    int64_t d = send_allowance(c) - waited_now(c, now);
    if (d < 0)
        d = 0;
    struct timeval tv = {(time_t)(d / 1000), (suseconds_t)((d % 1000) * 1000)};
    event_add(c->send_check, &tv);
}

/* The output buffer changed: bytes taken by the socket are the client's progress; the time the
 * buffer holds bytes is the time the balancer waits for the client. */
static void on_out_change(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg)
{
    (void)b;
    struct conn *c = arg;
    c->sent += info->n_deleted;
    size_t len = info->orig_size + info->n_added - info->n_deleted;
    if (info->orig_size == 0 && len > 0) {
        int64_t now = now_ms();
        c->wait_since_ms = now;
        if (!evtimer_pending(c->send_check, NULL))
            arm_send_check(c, now);
    } else if (info->orig_size > 0 && len == 0 && c->wait_since_ms) {
        c->waited_ms += now_ms() - c->wait_since_ms;
        c->wait_since_ms = 0;
    }
}

/* A client that keeps its answer waiting longer than its allowance is closed, whatever it is
 * doing: a request being served gets its gone callback (the proxy gives back its lease, its
 * --max-requests slot and its backend connection).  The socket's own write timeout closes a
 * client that takes nothing for --client-timeout; this closes one that takes a trickle. */
static void on_send_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    if (c->state == C_LINGER || !c->wait_since_ms)
        return; /* armed again when the output next holds bytes */
    int64_t now = now_ms();
    if (waited_now(c, now) < send_allowance(c)) {
        arm_send_check(c, now);
        return;
    }
    lb_client_too_slow();
    if (lb_cfg.verbose)
        lb_log("client %s closed: its answer waited %lld ms for %llu bytes (--client-timeout, "
               "--send-min-rate)",
               c->peer, (long long)waited_now(c, now), (unsigned long long)taken(c));
    conn_free(c);
}

static void dispatch(struct conn *c)
{
    struct req *r = c->req;
    c->state = C_BUSY;
    event_del(c->deadline);
    /* each answer has its own allowance (what is still buffered of the one before counts) */
    c->sent = 0;
    c->waited_ms = 0;
    event_del(c->send_check); /* armed for the answer before, maybe far later */
    if (c->wait_since_ms) {
        c->wait_since_ms = now_ms();
        arm_send_check(c, c->wait_since_ms);
    }
    /* No read timeout while the handler works: the backend has its own.  The socket is still
     * read to notice a close; pipelined bytes beyond about a head wait in the kernel. */
    bufferevent_set_timeouts(c->bev, NULL, &lb_cfg.client_timeout);
    bufferevent_setwatermark(c->bev, EV_READ, 0, lb_cfg.max_headers + 4096);
    c->handler(c->w, &r->pub);
}

/* Reads what the state asks for: a head, a body; may refuse or dispatch. */
static void conn_read(struct conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    for (;;) {
        if (c->state == C_IDLE) {
            /* The answers before are written before the next request is read once they hold
             * more than LB_PIPELINE_OUT bytes: pipelined requests whose answers need no
             * backpressure of their own (the balancer's, HEAD, 204, 304) cannot pile answers
             * up for a client that does not read.  Reading resumes in on_write. */
            if (evbuffer_get_length(bufferevent_get_output(c->bev)) > LB_PIPELINE_OUT) {
                c->out_full = true;
                bufferevent_disable(c->bev, EV_READ);
                return;
            }
            if (evbuffer_get_length(in) == 0)
                return;
            /* From the first byte on, empty lines included: a trickle of them cannot hold the
             * connection either. */
            c->state = C_HEAD;
            c->scan = (struct h1_head_scan){0};
            c->started_ms = now_ms();
            arm_deadline(c, c->started_ms + tv_ms(&lb_cfg.client_timeout));
        }
        if (c->state == C_HEAD) {
            /* RFC 9112 section 2.2: empty lines before a request line are ignored, also when
             * their CR and LF arrive in separate reads (a lone CR waits for what follows). */
            unsigned char two[2];
            while (c->scan.len == 0) {
                ev_ssize_t got = evbuffer_copyout(in, two, 2);
                if (got == 2 && two[0] == '\r' && two[1] == '\n')
                    evbuffer_drain(in, 2);
                else if (got == 1 && two[0] == '\r')
                    return;
                else
                    break;
            }
            if (evbuffer_get_length(in) == 0)
                return;
            ssize_t end = h1_evbuffer_head_end(in, &c->scan);
            if (end < 0) {
                refuse(c, 400, "bare LF");
                return;
            }
            if (end == 0) {
                if (evbuffer_get_length(in) > lb_cfg.max_headers) {
                    refuse(c, 431, "request head above --max-headers");
                    return;
                }
                return;
            }
            if ((size_t)end > lb_cfg.max_headers) {
                refuse(c, 431, "request head above --max-headers");
                return;
            }
            char *buf = (char *)evbuffer_pullup(in, end);
            if (!c->head)
                c->head = malloc(sizeof *c->head);
            if (!buf || !c->head) {
                refuse(c, 503, "out of memory");
                return;
            }
            struct h1_head *h = c->head;
            int rc = h1_parse_head(buf, (size_t)end, true, h);
            if (rc == 0)
                rc = h1_request_framing(h);
            if (rc == 0 && h->framing == H1_LENGTH && h->length > lb_cfg.max_body)
                rc = 413;
            struct req *r = NULL;
            if (rc == 0) {
                /* the 100 Continue goes out only if no body byte is there yet */
                bool body_here = evbuffer_get_length(in) > (size_t)end;
                rc = req_build(c, h, body_here, &r);
                evbuffer_drain(in, (size_t)end); /* after: h points into these bytes */
            }
            if (rc != 0) {
                refuse(c, rc, NULL);
                return;
            }
            c->req = r;
            h1_body_init(&c->body, h->framing, h->length);
            if (h->framing == H1_NONE) {
                dispatch(c);
                return;
            }
            c->state = C_BODY;
            c->started_ms = now_ms();
            arm_deadline(c, body_deadline(c));
        }
        if (c->state == C_BODY) {
            struct req *r = c->req;
            int rc = h1_evbuffer_body_step(&c->body, in, c->scratch);
            body_keep(r->pub.body, c->scratch);
            if (rc < 0) {
                if (rc == -EBADMSG)
                    refuse(c, 400, "malformed chunked body");
                else
                    refuse(c, 503, "out of memory");
                return;
            }
            if (c->body.total > lb_cfg.max_body) {
                refuse(c, 413, "request body above --max-body");
                return;
            }
            if (c->body.total > r->charged) {
                if (!lb_body_reserve(c->body.total - r->charged)) {
                    refuse(c, 503, "buffered request bodies at their limit (--max-body-total)");
                    return;
                }
                r->charged = c->body.total;
            }
            if (rc == 0)
                return;
            dispatch(c);
            return;
        }
        return; /* BUSY, CLOSING: nothing is read */
    }
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    if (c->state == C_LINGER) {
        struct evbuffer *in = bufferevent_get_input(bev);
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    conn_read(c);
}

/* The last answer is out.  Closing now with request bytes still unread would make the kernel
 * reset the connection, and the client could lose the answer (a 413 or 503 sent before its
 * body): the sending side is shut down instead, and whatever still comes is read and dropped
 * until the client closes, for at most 2 s (nginx's lingering close). */
static void closing_done(struct conn *c)
{
    if (c->aborted) {
        conn_free(c);
        return;
    }
    c->state = C_LINGER;
    shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    struct evbuffer *in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    static const struct timeval linger = {2, 0};
    bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
    bufferevent_set_timeouts(c->bev, &linger, NULL);
    bufferevent_disable(c->bev, EV_WRITE);
    bufferevent_enable(c->bev, EV_READ);
    event_add(c->deadline, &linger);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    (void)bev;
    struct conn *c = arg;
    if (c->state == C_CLOSING) {
        closing_done(c);
        return;
    }
    if (c->state == C_BUSY && c->req && c->req->drained)
        c->req->drained(c->req->cb_arg);
    else if (c->state == C_IDLE && c->out_full) {
        c->out_full = false;
        bufferevent_enable(c->bev, EV_READ);
        conn_read(c);
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    struct conn *c = arg;
    if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) &&
        (c->state == C_HEAD || c->state == C_BODY)) {
        refuse(c, 408, "request not received within --client-timeout");
        return;
    }
    conn_free(c); /* a request being served gets its gone callback */
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    if (c->state == C_LINGER) {
        conn_free(c);
    } else if (c->state == C_HEAD) {
        refuse(c, 408, "request head not received within --client-timeout");
    } else if (c->state == C_BODY) {
        int64_t at = body_deadline(c);
        if (now_ms() >= at)
            refuse(c, 408, "request body too slow (--client-timeout, --body-min-rate)");
        else
            arm_deadline(c, at);
    }
}

static void on_later(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    if (c->state == C_CLOSING) {
        /* aborted: closed now, whatever is still buffered (writing is off) */
        if (c->aborted || evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
            closing_done(c);
        return;
    }
    if (c->state == C_IDLE)
        conn_read(c);
}

/* ------------------------------------------------------------------------------------------ */
/* answers                                                                                     */

static struct req *priv(struct lb_req *req)
{
    return (struct req *)req;
}

/* The request is done: the next one, or the close once the answer is out. */
static void req_done(struct req *r, bool close)
{
    struct conn *c = r->pub.conn;
    c->req = NULL;
    req_free(r);
    /* The head's scratch (16 KiB for H1_MAX_FIELDS fields) is not kept by an idle connection:
     * a pipelined request allocates it again, one at a time. */
    free(c->head);
    c->head = NULL;
    if (close) {
        c->state = C_CLOSING;
        bufferevent_disable(c->bev, EV_READ);
    } else {
        c->state = C_IDLE;
        bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
        bufferevent_set_timeouts(c->bev, &lb_cfg.client_timeout, &lb_cfg.client_timeout);
        bufferevent_enable(c->bev, EV_READ);
    }
    schedule(c);
}

static bool field_listed(const struct evkeyvalq *q, const char *name, const char *token)
{
    const struct evkeyval *kv;
    TAILQ_FOREACH(kv, q, next)
    {
        if (strcasecmp(kv->key, name) == 0 && h1_token_listed(kv->value, strlen(kv->value), token))
            return true;
    }
    return false;
}

void lb_req_reply_start(struct lb_req *req, int code, const char *reason, int64_t length)
{
    struct req *r = priv(req);
    struct conn *c = req->conn;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    r->started = true;
    r->no_body = r->head_only || code < 200 || code == 204 || code == 304;
    if (field_listed(&r->out, "Connection", "close"))
        r->keep_alive = false;
    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", code,
                        reason && *reason ? reason : reason_of(code));
    bool has_date = false;
    struct evkeyval *kv;
    TAILQ_FOREACH(kv, &r->out, next)
    {
        if (strcasecmp(kv->key, "Connection") == 0)
            continue; /* written below, once */
        has_date |= strcasecmp(kv->key, "Date") == 0;
        evbuffer_add_printf(out, "%s: %s\r\n", kv->key, kv->value);
    }
    if (!has_date)
        add_date(out);
    if (length >= 0) {
        if (code >= 200 && code != 204)
            evbuffer_add_printf(out, "Content-Length: %lld\r\n", (long long)length);
    } else if (!r->no_body) {
        if (req->minor >= 1)
            r->chunked = true;
        else
            r->until_close = true;
    }
    if (r->chunked)
        evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n");
    if (r->until_close)
        r->keep_alive = false;
    if (!r->keep_alive)
        evbuffer_add_printf(out, "Connection: close\r\n");
    else if (req->minor == 0)
        evbuffer_add_printf(out, "Connection: keep-alive\r\n");
    evbuffer_add(out, "\r\n", 2);
}

void lb_req_reply_chunk(struct lb_req *req, struct evbuffer *data)
{
    struct req *r = priv(req);
    size_t n = evbuffer_get_length(data);
    if (n == 0)
        return;
    if (r->no_body) {
        evbuffer_drain(data, n);
        return;
    }
    struct evbuffer *out = bufferevent_get_output(req->conn->bev);
    if (r->chunked)
        evbuffer_add_printf(out, "%zx\r\n", n);
    evbuffer_add_buffer(out, data);
    if (r->chunked)
        evbuffer_add(out, "\r\n", 2);
}

void lb_req_reply_end(struct lb_req *req)
{
    struct req *r = priv(req);
    if (r->chunked)
        evbuffer_add(bufferevent_get_output(req->conn->bev), "0\r\n\r\n", 5);
    req_done(r, !r->keep_alive);
}

void lb_req_reply(struct lb_req *req, int code, const char *reason, struct evbuffer *body)
{
    int64_t n = body ? (int64_t)evbuffer_get_length(body) : 0;
    lb_req_reply_start(req, code, reason, n);
    if (body)
        lb_req_reply_chunk(req, body);
    lb_req_reply_end(req);
}

void lb_req_abort(struct lb_req *req)
{
    struct req *r = priv(req);
    struct conn *c = req->conn;
    r->gone = NULL;
    c->req = NULL;
    req_free(r);
    /* Not a clean end: the socket is closed at once (from the event loop), and what is still
     * buffered is dropped with it (a socket bufferevent's output cannot be drained from
     * outside: its start is frozen). */
    c->state = C_CLOSING;
    c->aborted = true;
    bufferevent_disable(c->bev, EV_READ | EV_WRITE);
    schedule(c);
}

void lb_req_set_cbs(struct lb_req *req, void (*drained)(void *), void (*gone)(void *), void *arg)
{
    struct req *r = priv(req);
    r->drained = drained;
    r->gone = gone;
    r->cb_arg = arg;
}

size_t lb_req_pending(const struct lb_req *req)
{
    return evbuffer_get_length(bufferevent_get_output(req->conn->bev));
}

void lb_req_close_after(struct lb_req *req)
{
    priv(req)->keep_alive = false;
}

void lb_send_text(struct lb_req *req, int code, const char *reason, const char *body)
{
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add_printf(b, "%s\n", body);
    evhttp_add_header(req->out, "Content-Type", "text/plain");
    lb_req_reply(req, code, reason, b);
    if (b)
        evbuffer_free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* connections                                                                                 */

static void park(struct conn *c)
{
    struct worker *w = c->w;
    c->parked = true;
    c->park_prev = w->parked_tail;
    c->park_next = NULL;
    if (w->parked_tail)
        w->parked_tail->park_next = c;
    else
        w->parked = c;
    w->parked_tail = c;
}

void lb_conn_admit_parked(struct worker *w)
{
    while (w->parked && lb_conn_admit()) {
        struct conn *c = w->parked;
        unpark(c);
        c->counted = true;
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    }
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
    (void)salen;
    struct worker *w = arg;
    struct event_base *base = evconnlistener_get_base(l);
    struct conn *c = calloc(1, sizeof *c);
    if (c) {
        c->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
        c->deadline = evtimer_new(base, on_deadline, c);
        c->later = event_new(base, -1, 0, on_later, c);
        c->send_check = evtimer_new(base, on_send_check, c);
        c->scratch = evbuffer_new();
        if (c->bev && c->send_check)
            c->out_cb = evbuffer_add_cb(bufferevent_get_output(c->bev), on_out_change, c);
    }
    if (!c || !c->bev || !c->deadline || !c->later || !c->send_check || !c->out_cb || !c->scratch) {
        if (!c || !c->bev)
            evutil_closesocket(fd);
        if (c) {
            if (c->out_cb)
                evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->out_cb);
            if (c->bev)
                bufferevent_free(c->bev);
            if (c->deadline)
                event_free(c->deadline);
            if (c->later)
                event_free(c->later);
            if (c->send_check)
                event_free(c->send_check);
            if (c->scratch)
                evbuffer_free(c->scratch);
            free(c);
        }
        return;
    }
    c->w = w;
    c->handler = w ? worker_handler : stats_handler;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, c->peer, sizeof c->peer);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, c->peer, sizeof c->peer);
    /* An answer goes out in pieces (its head, then its body as the backend sends it): with
     * Nagle's algorithm a piece would wait for the client's delayed ACK of the one before. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!w && (!lb_stats_peer_allowed(c->peer) || stats_open >= LB_STATS_CONNS)) {
        /* The stats listener's peers are checked before they cost more than this: one not
         * allowed, or one above the listener's own limit, is closed at once, so that they
         * cannot take the descriptors the main listener needs (docs/lb.md, "Security model"). */
        ADD(lb_stats_refused, 1);
        evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->out_cb);
        bufferevent_free(c->bev);
        event_free(c->deadline);
        event_free(c->later);
        event_free(c->send_check);
        evbuffer_free(c->scratch);
        free(c);
        return;
    }
    if (!w)
        stats_open++;
    struct conn **list = list_of(c->w);
    c->next = *list;
    if (*list)
        (*list)->prev = c;
    *list = c;
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    bufferevent_set_timeouts(c->bev, &lb_cfg.client_timeout, &lb_cfg.client_timeout);
    if (!c->w || lb_conn_open(c->w)) {
        c->counted = c->w != NULL;
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    } else {
        park(c);
    }
}

struct evconnlistener *lb_server_listen(struct event_base *base, evutil_socket_t fd,
                                        struct worker *w, lb_handler_fn handler)
{
    if (w)
        worker_handler = handler;
    else
        stats_handler = handler;
    return evconnlistener_new(base, on_accept, w, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1,
                              fd);
}

void lb_server_close_all(struct worker *w)
{
    struct conn **list = list_of(w);
    while (*list)
        conn_free(*list);
}

void lb_send_overloaded(struct lb_req *req, const char *why)
{
    evhttp_add_header(req->out, "Retry-After", "1");
    lb_req_close_after(req);
    lb_send_text(req, 503, "Service Unavailable", why);
}
