/* chring-lb: the proxying of one request: its lease, its attempts (at most one retry), and the
 * relay of the backend's answer to the client.
 *
 * SPDX-License-Identifier: MIT
 *
 * A struct proxy lives from lb_proxy_start until proxy_finish, on its worker's thread only.  It
 * holds one lease at a time: the key's (chring_acquire), or after a failure a retry's
 * (chring_acquire_skip over the failed backend).  The backend connection is a plain bufferevent:
 * the request is written by lb_forward_write, the answer parsed by h1.c (through
 * h1_evbuffer.c) as it arrives (interim 1xx answers dropped, framing checked), its head
 * relayed, its body relayed piece by piece.  The connection goes back to the pool only when
 * the answer ended exactly at its framing, no byte is left unread and neither side asked to
 * close.  A proxy ends in one of four ways: the answer relayed completely (proxy_complete), an
 * error answered before any byte of the answer went out (proxy_fail), the client gone
 * (on_client_gone), the answer broken off midway (the client connection closed).
 */
#define _GNU_SOURCE
#include "proxy.h"
#include "backend.h"
#include "config.h"
#include "conn.h"
#include "h1.h"
#include "h1_evbuffer.h"
#include "lb.h"
#include "limits.h"
#include "log.h"
#include "text.h"
#include "worker.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct proxy {
    struct worker *w;
    struct lb_req *req;     /* the client's request (conn.c's), NULL once answered or gone */
    struct bconn *bc;       /* the backend connection of this attempt, or NULL */
    struct backend *be;     /* the backend of this attempt */
    struct event *deadline; /* --backend-timeout: the answer's head by then */
    chring_lease_t lease;
    char *key;
    size_t keylen;
    int attempt;      /* 0, 1 */
    bool head_req;    /* the client's request is HEAD: the answer has no body */
    bool in_head;     /* reading the answer's head (else its body) */
    bool got_bytes;   /* this attempt's connection delivered a byte */
    bool stale_once;  /* a pooled connection found closed was replaced once */
    bool close_after; /* the answer says the connection ends with it */
    bool headers_sent;
    bool paused;              /* backend reads paused: the client is slow */
    bool connected;           /* this attempt's connection is made (the request may be out) */
    int64_t attempt_start_ms; /* this attempt started then (monotonic) */
    struct h1_head_scan scan; /* where the answer head's end was looked for */
    struct h1_body body;
    struct h1_head *head;      /* scratch for parsing answer heads */
    struct evbuffer *out;      /* body bytes on their way to the client */
    struct proxy *prev, *next; /* worker->active */
};

static int proxy_start_attempt(struct proxy *p);

/* How a lease was placed, as chring says it (lease.outcome): counted per worker for the stats,
 * and named in X-Chring-Outcome (--outcome-header). */
static const char *const outcome_names[5] = {"none", "owner", "spilled", "saturated",
                                             "owner_down"};

static void count_outcome(struct worker *w, const chring_lease_t *lease)
{
    ADD(w->outcomes[lease->outcome < 5 ? lease->outcome : 0], 1);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_backend_read(struct bufferevent *bev, void *arg);
static void on_backend_event(struct bufferevent *bev, short what, void *arg);

static void proxy_link(struct proxy *p)
{
    struct worker *w = p->w;
    p->next = w->active;
    if (w->active)
        w->active->prev = p;
    w->active = p;
    ADD(w->active_n, 1);
}

static void proxy_unlink(struct proxy *p)
{
    struct worker *w = p->w;
    if (p->prev)
        p->prev->next = p->next;
    else if (w->active == p)
        w->active = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
    SUB(w->active_n, 1);
}

/* Closes the attempt's backend connection (an answer not read to its end cannot be reused). */
static void proxy_drop_conn(struct proxy *p)
{
    if (p->bc) {
        lb_bconn_free(p->bc);
        p->bc = NULL;
    }
}

/* Releases everything the proxy holds on the ring and frees it.  The client request must be
 * answered (or gone) already. */
static void proxy_finish(struct proxy *p)
{
    proxy_drop_conn(p);
    chring_release(lb_ring, &p->lease);
    proxy_unlink(p);
    lb_inflight_leave();
    if (p->deadline)
        event_free(p->deadline);
    if (p->out)
        evbuffer_free(p->out);
    free(p->head);
    free(p->key);
    free(p);
}

/* Answers the client (before any byte of the answer went out) and finishes. */
static void proxy_fail(struct proxy *p, int code, const char *reason, const char *body)
{
    lb_send_text(p->req, code, reason, body);
    p->req = NULL;
    proxy_finish(p);
}

static void proxy_bad_gateway(struct proxy *p, const char *body)
{
    ADD(p->w->bad_gateway, 1);
    proxy_fail(p, 502, "Bad Gateway", body);
}

/* The client went away (conn.c frees its request when this returns). */
static void on_client_gone(void *arg)
{
    struct proxy *p = arg;
    ADD(p->w->client_gone, 1);
    p->req = NULL;
    proxy_finish(p);
}

/* The answer broke off midway (or its body's framing was broken): the client must not take it
 * for complete. */
static void proxy_abort(struct proxy *p)
{
    ADD(p->w->aborts, 1);
    proxy_drop_conn(p);
    lb_req_abort(p->req);
    p->req = NULL;
    proxy_finish(p);
}

/* ------------------------------------------------------------------------------------------ */
/* the backend's answer, relayed as it arrives                                                 */

/* The client connection's output buffer has been written out (conn.c calls it only while the
 * request is being served). */
static void on_client_drained(void *arg)
{
    struct proxy *p = arg;
    if (p->paused && p->bc && p->bc->bev)
        bufferevent_enable(p->bc->bev, EV_READ); /* its idle timeout starts again */
    p->paused = false;
}

/* Sends what p->out holds to the client as it came (a token stream's events go out one by
 * one); pauses the backend's reads above the high-water mark (a client slower than its backend
 * would make us buffer the whole answer).  While reads are paused the backend's idle timeout
 * does not run: the wait is the client's, not the backend's. */
static void relay_body(struct proxy *p)
{
    size_t n = evbuffer_get_length(p->out);
    if (n == 0)
        return;
    ADD(p->be->bytes_out, n);
    lb_req_reply_chunk(p->req, p->out);
    if (p->bc && p->bc->bev && lb_req_pending(p->req) > lb_cfg.high_water) {
        bufferevent_disable(p->bc->bev, EV_READ);
        p->paused = true;
        ADD(p->w->pauses, 1);
    }
}

/* The retry: chring_acquire_skip places the key again with bounded loads, passing over the
 * backend that failed (docs/design.md §3), so the retry lands on the first member clockwise that
 * is below its capacity, and the bound holds for it like for any request.  The new lease is taken
 * before the first is released, so the skipped member cannot be retired (and its address reused)
 * while it is compared. */
static bool proxy_retry(struct proxy *p)
{
    struct backend *failed = p->be;
    const chring_member_t *skip[1] = {p->lease.member};
    chring_lease_t retry;
    if (chring_acquire_skip(lb_ring, p->key, p->keylen, skip, 1, &retry) != 0)
        return false;
    chring_release(lb_ring, &p->lease);
    p->lease = retry;
    count_outcome(p->w, &p->lease);
    p->be = chring_member_udata(retry.member);
    ADD(p->be->retries_in, 1);
    ADD(p->w->retries, 1);
    p->attempt = 1;
    if (lb_cfg.verbose) {
        char q[160];
        lb_text_quote(q, sizeof q, p->key, p->keylen);
        lb_log("retry %s: %s -> %s", q, failed->name, p->be->name);
    }
    return proxy_start_attempt(p) == 0;
}

/* Methods a retry may send again after the first attempt's request went out (RFC 9110 section
 * 9.2.2: idempotent). */
static bool idempotent(const struct lb_req *req)
{
    switch (req->cmd) {
    case EVHTTP_REQ_GET:
    case EVHTTP_REQ_HEAD:
    case EVHTTP_REQ_PUT:
    case EVHTTP_REQ_DELETE:
    case EVHTTP_REQ_OPTIONS: return true;
    default: return false;
    }
}

/* The attempt failed before any byte of the answer went to the client (timed_out: its answer's
 * head did not come within --backend-timeout).  Passive health: a connection that could not be
 * made is the backend's failure; one that was made and then timed out or closed counts against
 * the backend only when it answered nobody meanwhile (lb_backend_attempt_failed).  Then the
 * retry, once, except for a non-idempotent request that timed out after it went out (the backend
 * may be working on it: a long prefill, a slow endpoint; sending it again would double the
 * work): 504 at once.  Else 502 (504 for a timeout). */
static void proxy_attempt_failed(struct proxy *p, const char *why, bool timed_out)
{
    bool sent = p->connected;
    proxy_drop_conn(p);
    ADD(p->be->failures, 1);
    if (sent)
        lb_backend_attempt_failed(p->be, p->attempt_start_ms, p->req ? p->req->peer : NULL);
    else
        lb_backend_mark(p->be, false);
    if (p->attempt == 0 && !(timed_out && sent && !idempotent(p->req)) && proxy_retry(p))
        return;
    if (timed_out) {
        ADD(p->w->bad_gateway, 1);
        proxy_fail(p, 504, "Gateway Timeout", why);
        return;
    }
    proxy_bad_gateway(p, why);
}

/* The answer was relayed completely. */
static void proxy_complete(struct proxy *p)
{
    struct bconn *bc = p->bc;
    p->bc = NULL;
    bufferevent_setcb(bc->bev, NULL, NULL, NULL, NULL);
    if (!p->close_after && evbuffer_get_length(bufferevent_get_input(bc->bev)) == 0)
        lb_pool_put(p->w, p->be, bc);
    else
        lb_bconn_free(bc);
    lb_backend_mark(p->be, true);
    ADD(p->w->proxied, 1);
    lb_req_reply_end(p->req);
    p->req = NULL;
    proxy_finish(p);
}

/* The answer's final head, checked: its status, end-to-end fields and framing go to the client.
 * Returns 0 / -1 (out of memory). */
static int relay_head(struct proxy *p, const struct h1_head *h)
{
    if (lb_copy_fields(h, p->req->out) < 0)
        return -1;
    if (lb_cfg.outcome_header) { /* ours alone: one the backend sent is dropped */
        while (evhttp_find_header(p->req->out, "X-Chring-Outcome"))
            evhttp_remove_header(p->req->out, "X-Chring-Outcome");
        uint32_t o = p->lease.outcome < 5 ? p->lease.outcome : 0;
        if (evhttp_add_header(p->req->out, "X-Chring-Outcome", outcome_names[o]) < 0)
            return -1;
    }
    int64_t length = h->has_length && h->framing != H1_CHUNKED ? (int64_t)h->length : -1;
    char reason[256];
    snprintf(reason, sizeof reason, "%.*s", (int)h->rlen, h->reason);
    lb_req_reply_start(p->req, h->status, reason[0] ? reason : NULL, length);
    p->headers_sent = true;
    return 0;
}

/* Parses and relays what the backend sent.  May finish p. */
static void backend_input(struct proxy *p)
{
    struct evbuffer *in = bufferevent_get_input(p->bc->bev);
    for (;;) {
        if (p->in_head) {
            ssize_t end = h1_evbuffer_head_end(in, &p->scan);
            if (end < 0)
                goto bad_answer;
            if (end == 0) {
                if (evbuffer_get_length(in) > lb_cfg.max_headers * 4)
                    goto bad_answer;
                return;
            }
            if ((size_t)end > lb_cfg.max_headers * 4)
                goto bad_answer;
            char *buf = (char *)evbuffer_pullup(in, end);
            if (!p->head)
                p->head = malloc(sizeof *p->head);
            if (!buf || !p->head)
                goto bad_answer;
            struct h1_head *h = p->head;
            if (h1_parse_head(buf, (size_t)end, false, h) != 0 ||
                h1_response_framing(h, p->head_req) != 0)
                goto bad_answer;
            lb_backend_answered(p->be);
            if (h->status < 200) { /* interim: dropped, the final answer follows */
                evbuffer_drain(in, (size_t)end);
                continue;
            }
            if (relay_head(p, h) < 0)
                goto bad_answer;
            /* The head is in: the body has no deadline, only an idle timeout.  An answer that
             * keeps delivering bytes (a token stream, an event a second for as long as it
             * lasts) goes on; one idle for --backend-timeout is cut (proxy_abort: the client
             * cannot take it for complete). */
            event_del(p->deadline);
            bufferevent_set_timeouts(p->bc->bev, &lb_cfg.backend_timeout, &lb_cfg.backend_timeout);
            p->close_after = h->close;
            h1_body_init(&p->body, h->framing, h->length);
            evbuffer_drain(in, (size_t)end);
            p->in_head = false;
        }
        int rc = h1_evbuffer_body_step(&p->body, in, p->out);
        relay_body(p);
        if (rc < 0) {
            ADD(p->be->failures, 1);
            proxy_abort(p);
        } else if (rc > 0) {
            proxy_complete(p);
        }
        return;
    }
bad_answer:
    ADD(p->be->failures, 1);
    if (p->headers_sent) {
        proxy_abort(p);
        return;
    }
    proxy_drop_conn(p);
    proxy_bad_gateway(p, "invalid answer from backend");
}

static void on_backend_read(struct bufferevent *bev, void *arg)
{
    struct proxy *p = arg;
    if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
        p->got_bytes = true;
    backend_input(p);
}

static void on_backend_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    struct proxy *p = arg;
    if (what & BEV_EVENT_CONNECTED) {
        p->connected = true;
        return;
    }
    if ((what & BEV_EVENT_EOF) && !p->in_head && p->body.state == H1B_UNTIL_CLOSE) {
        p->close_after = true; /* the answer ends with the connection */
        relay_body(p);
        proxy_complete(p);
        return;
    }
    if (p->headers_sent) { /* broke off in the middle of the answer, or idle too long */
        ADD(p->be->failures, 1);
        if ((what & BEV_EVENT_TIMEOUT) && lb_cfg.verbose)
            lb_log("%s: answer idle for --backend-timeout: cut", p->be->name);
        proxy_abort(p);
        return;
    }
    /* A pooled connection the backend closed just as it was reused: not a failure of the
     * backend; the request goes again, once, on a new connection. */
    if ((what & BEV_EVENT_EOF) && !p->got_bytes && p->bc->reused && !p->stale_once) {
        p->stale_once = true;
        proxy_drop_conn(p);
        ADD(p->be->requests, (uint64_t)-1);
        if (proxy_start_attempt(p) == 0)
            return;
        proxy_attempt_failed(p, "cannot reach backend", false);
        return;
    }
    if (what & BEV_EVENT_TIMEOUT)
        proxy_attempt_failed(p, "backend timed out", true);
    else
        proxy_attempt_failed(p, "backend unavailable", false);
}

/* ------------------------------------------------------------------------------------------ */
/* attempts                                                                                    */

/* Sends the request to p->be.  Returns 0, or -1 with nothing in flight. */
static int proxy_start_attempt(struct proxy *p)
{
    ADD(p->be->requests, 1);
    p->in_head = true;
    p->got_bytes = false;
    p->scan = (struct h1_head_scan){0};
    p->attempt_start_ms = now_ms();
    p->bc = lb_pool_get(p->w, p->be);
    if (!p->bc)
        return -1;
    p->connected = p->bc->reused;
    struct bufferevent *bev = p->bc->bev;
    bufferevent_setcb(bev, on_backend_read, NULL, on_backend_event, p);
    /* --backend-timeout is a deadline for the answer's head, whatever comes before it (interim
     * answers, a head trickled byte by byte), not an idle timeout. */
    bufferevent_set_timeouts(bev, NULL, &lb_cfg.backend_timeout);
    event_add(p->deadline, &lb_cfg.backend_timeout);
    if (lb_forward_write(bufferevent_get_output(bev), p->req, p->be->hosthdr) < 0 ||
        bufferevent_enable(bev, EV_READ | EV_WRITE) < 0) {
        proxy_drop_conn(p);
        return -1;
    }
    return 0;
}

/* --backend-timeout passed before the answer's head was in: the attempt failed. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct proxy *p = arg;
    if (p->bc && p->in_head)
        proxy_attempt_failed(p, "backend timed out", true);
}

void lb_proxy_start(struct worker *w, struct lb_req *req)
{
    if (!lb_inflight_enter()) {
        lb_send_overloaded(req, "requests in flight at their limit (--max-requests)");
        return;
    }
    size_t keylen;
    char *key = lb_request_key(req, &keylen);

    struct proxy *p = calloc(1, sizeof *p);
    if (!p || !(p->key = key) || !(p->out = evbuffer_new()) ||
        !(p->deadline = evtimer_new(w->base, on_deadline, p))) {
        if (p && p->out)
            evbuffer_free(p->out);
        free(key);
        free(p);
        lb_inflight_leave();
        lb_send_text(req, 503, "Service Unavailable", "out of memory");
        return;
    }
    p->keylen = keylen;
    p->w = w;
    p->req = req;
    p->head_req = req->cmd == EVHTTP_REQ_HEAD;
    proxy_link(p);
    lb_req_set_cbs(req, on_client_drained, on_client_gone, p);

    int rc = chring_acquire(lb_ring, p->key, p->keylen, &p->lease);
    if (rc != 0 && chring_len(lb_ring) > 0) { /* members, every one down (passive health) */
        proxy_bad_gateway(p, "every backend is down");
        return;
    }
    if (rc != 0) {
        ADD(w->no_backend, 1);
        proxy_fail(p, 503, "Service Unavailable", "no backend");
        return;
    }
    count_outcome(w, &p->lease);
    p->be = chring_member_udata(p->lease.member);
    /* Passive health needs nothing here: a backend that failed less than --fail-timeout ago is
     * down in the ring (health.c), so chring_acquire placed the key on its next replica. */
    if (proxy_start_attempt(p) != 0) {
        ADD(p->be->failures, 1);
        if (proxy_retry(p))
            return;
        proxy_bad_gateway(p, "cannot reach backend");
    }
}

void lb_proxy_drop_all(struct worker *w)
{
    while (w->active) { /* any left (cannot normally happen) */
        struct proxy *p = w->active;
        p->req = NULL;
        proxy_finish(p);
    }
}
