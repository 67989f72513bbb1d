/* chring-lb: the proxying of one request: its lease, its attempts (at most one retry), and the
 * relay of the backend's answer to the client.
 *
 * SPDX-License-Identifier: MIT
 *
 * A struct proxy lives from lb_proxy_start until proxy_finish, on its worker's thread only.  It
 * holds one lease at a time: the key's (chring_acquire), or after a failure a retry's
 * (chring_acquire_skip over the failed backend).  It ends in one of four ways: the answer relayed completely
 * (on_backend_done), an error answered before any byte of the answer went out (proxy_fail), the
 * client gone (on_client_close), the answer broken off midway (the client connection closed).
 */
#define _GNU_SOURCE
#include "lb.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <stdlib.h>
#include <string.h>

struct proxy {
    struct worker *w;
    struct evhttp_request *req;       /* the client's request */
    struct evhttp_connection *cevcon; /* its connection */
    struct evhttp_request *breq;      /* the backend request in flight, or NULL */
    struct bconn *bc;                 /* its connection */
    struct backend *be;               /* the backend of this attempt */
    chring_lease_t lease;             /* first attempt */
    char *key;
    size_t keylen;
    int attempt; /* 0, 1 */
    int berr;    /* last evhttp_request_error seen, -1 none */
    bool headers_sent;
    bool cancelling;
    bool paused;               /* backend reads paused: the client is slow */
    struct proxy *prev, *next; /* worker->active */
};

static int proxy_start_attempt(struct proxy *p);

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

/* Cancels the backend request in flight, if any: libevent frees it and resets its connection;
 * our done callback is not run. */
static void proxy_cancel_backend(struct proxy *p)
{
    if (p->breq) {
        struct evhttp_request *b = p->breq;
        p->breq = NULL;
        p->cancelling = true;
        evhttp_cancel_request(b);
        p->cancelling = false;
    }
}

/* Gives the attempt's backend connection back to the pool. */
static void proxy_put_conn(struct proxy *p)
{
    lb_pool_put(p->w, p->be, p->bc);
    p->bc = NULL;
}

/* Releases everything the proxy holds on the ring and frees it.  The client request must be
 * answered (or gone) already. */
static void proxy_finish(struct proxy *p)
{
    proxy_cancel_backend(p); /* should not happen; be safe */
    if (p->bc)
        proxy_put_conn(p);
    chring_release(lb_ring, &p->lease);
    proxy_unlink(p);
    free(p->key);
    free(p);
}

/* Answers the client (before any byte of the answer went out) and finishes. */
static void proxy_fail(struct proxy *p, int code, const char *reason, const char *body)
{
    evhttp_connection_set_closecb(p->cevcon, NULL, NULL);
    lb_send_text(p->req, code, reason, body);
    p->req = NULL;
    proxy_finish(p);
}

static void proxy_bad_gateway(struct proxy *p, const char *body)
{
    ADD(p->w->bad_gateway, 1);
    proxy_fail(p, 502, "Bad Gateway", body);
}

static void on_client_close(struct evhttp_connection *evcon, void *arg)
{
    struct proxy *p = arg;
    evhttp_connection_set_closecb(evcon, NULL, NULL);
    ADD(p->w->client_gone, 1);
    proxy_cancel_backend(p);
    /* A request detached from its dying connection is ours to free; one still attached is freed
     * by the connection. */
    if (p->req && evhttp_request_get_connection(p->req) == NULL)
        evhttp_request_free(p->req);
    p->req = NULL;
    proxy_finish(p);
}

/* ------------------------------------------------------------------------------------------ */
/* the backend's answer, relayed as it arrives                                                 */

static void on_backend_error(enum evhttp_request_error err, void *arg)
{
    struct proxy *p = arg;
    p->berr = (int)err;
}

static int on_backend_headers(struct evhttp_request *breq, void *arg)
{
    struct proxy *p = arg;
    if (p->headers_sent || !p->req)
        return 0;
    struct evkeyvalq *out = evhttp_request_get_output_headers(p->req);
    lb_copy_headers(evhttp_request_get_input_headers(breq), out, NULL);
    int code = evhttp_request_get_response_code(breq);
    const char *reason = evhttp_request_get_response_code_line(breq);
    evhttp_send_reply_start(p->req, code, reason && *reason ? reason : NULL);
    p->headers_sent = true;
    return 0;
}

/* The client connection's output buffer has been written out (evcon's write callback; set for
 * each chunk, replaced by evhttp_send_reply_end, gone with the connection). */
static void on_client_drained(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct proxy *p = arg;
    if (p->paused && p->bc) {
        struct bufferevent *bbev = evhttp_connection_get_bufferevent(p->bc->evcon);
        if (bbev)
            bufferevent_enable(bbev, EV_READ);
    }
    p->paused = false;
}

static void on_backend_chunk(struct evhttp_request *breq, void *arg)
{
    struct proxy *p = arg;
    struct evbuffer *in = evhttp_request_get_input_buffer(breq);
    if (!p->req || !p->headers_sent) {
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    ADD(p->be->bytes_out, evbuffer_get_length(in));
    evhttp_send_reply_chunk_with_cb(p->req, in, on_client_drained, p);
    /* Backpressure: a client slower than its backend would make us buffer the whole answer.
     * Above the high-water mark, stop reading from the backend until the client's output has
     * drained (on_client_drained). */
    struct bufferevent *cbev = evhttp_connection_get_bufferevent(p->cevcon);
    if (p->bc && cbev && evbuffer_get_length(bufferevent_get_output(cbev)) > lb_cfg.high_water) {
        struct bufferevent *bbev = evhttp_connection_get_bufferevent(p->bc->evcon);
        if (bbev) {
            bufferevent_disable(bbev, EV_READ);
            p->paused = true;
            ADD(p->w->pauses, 1);
        }
    }
}

/* The retry: chring_acquire_skip places the key again with bounded loads, passing over the
 * backend that failed (docs/design.md §12), so the retry lands on the first member clockwise that
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
    p->be = chring_member_udata(retry.member);
    ADD(p->be->retries_in, 1);
    ADD(p->w->retries, 1);
    p->attempt = 1;
    if (lb_cfg.verbose)
        lb_log("retry %.*s: %s -> %s", (int)p->keylen, p->key, failed->name, p->be->name);
    return proxy_start_attempt(p) == 0;
}

static void on_backend_done(struct evhttp_request *breq, void *arg)
{
    struct proxy *p = arg;
    if (p->cancelling)
        return;
    struct worker *w = p->w;
    bool ok = breq != NULL && evhttp_request_get_response_code(breq) != 0;
    p->breq = NULL;
    proxy_put_conn(p); /* a failed connection was reset; it reconnects on its next use */

    lb_backend_mark(p->be, ok);
    if (!ok) {
        ADD(p->be->failures, 1);
        if (!p->headers_sent) {
            if (p->attempt == 0 && proxy_retry(p))
                return;
            proxy_bad_gateway(p, p->berr == EVREQ_HTTP_TIMEOUT ? "backend timed out"
                                                               : "backend unavailable");
            return;
        }
        /* The answer broke off midway: the client must not take it for complete. */
        ADD(w->aborts, 1);
        evhttp_connection_set_closecb(p->cevcon, NULL, NULL);
        evhttp_connection_free(p->cevcon); /* frees p->req too */
        p->req = NULL;
        proxy_finish(p);
        return;
    }
    if (!p->headers_sent)
        on_backend_headers(breq, p);
    struct evbuffer *in = evhttp_request_get_input_buffer(breq);
    if (evbuffer_get_length(in) > 0)
        evhttp_send_reply_chunk(p->req, in);
    ADD(w->proxied, 1);
    evhttp_connection_set_closecb(p->cevcon, NULL, NULL);
    evhttp_send_reply_end(p->req);
    p->req = NULL;
    proxy_finish(p);
}

/* ------------------------------------------------------------------------------------------ */
/* attempts                                                                                    */

/* Sends the request to p->be.  Returns 0, or -1 with nothing in flight. */
static int proxy_start_attempt(struct proxy *p)
{
    ADD(p->be->requests, 1);
    p->berr = -1;
    p->bc = lb_pool_get(p->w, p->be);
    if (!p->bc)
        return -1;
    struct evhttp_request *breq = evhttp_request_new(on_backend_done, p);
    if (!breq) {
        proxy_put_conn(p);
        return -1;
    }
    evhttp_request_set_header_cb(breq, on_backend_headers);
    evhttp_request_set_chunked_cb(breq, on_backend_chunk);
    evhttp_request_set_error_cb(breq, on_backend_error);
    if (lb_forward_prepare(breq, p->req, p->cevcon, p->be->hosthdr) < 0) {
        evhttp_request_free(breq);
        proxy_put_conn(p);
        return -1;
    }
    char *built;
    const char *uri = lb_forward_target(p->req, &built);
    p->breq = breq;
    int rc = evhttp_make_request(p->bc->evcon, breq, evhttp_request_get_command(p->req), uri);
    free(built);
    if (rc != 0) { /* the request was freed by evhttp_make_request */
        p->breq = NULL;
        proxy_put_conn(p);
        return -1;
    }
    return 0;
}

void lb_proxy_start(struct worker *w, struct evhttp_request *req)
{
    struct evhttp_connection *cevcon = evhttp_request_get_connection(req);
    if (!cevcon) { /* cannot happen in a server callback; be safe */
        evhttp_request_free(req);
        return;
    }
    const char *key;
    size_t keylen;
    lb_request_key(req, &key, &keylen);

    struct proxy *p = calloc(1, sizeof *p);
    if (!p || !(p->key = malloc(keylen + 1))) {
        free(p);
        lb_send_text(req, 503, "Service Unavailable", "out of memory");
        return;
    }
    memcpy(p->key, key, keylen);
    p->key[keylen] = '\0';
    p->keylen = keylen;
    p->w = w;
    p->req = req;
    p->cevcon = cevcon;
    proxy_link(p);

    int rc = chring_acquire(lb_ring, p->key, p->keylen, &p->lease);
    if (rc != 0) {
        ADD(w->no_backend, 1);
        proxy_fail(p, 503, "Service Unavailable", "no backend");
        return;
    }
    p->be = chring_member_udata(p->lease.member);
    evhttp_connection_set_closecb(cevcon, on_client_close, p);
    /* Passive health: a backend that failed less than --fail-timeout ago is not tried; its keys
     * go to their next replica at once (if that one is down too, it is tried anyway). */
    if (lb_backend_down(p->be)) {
        ADD(p->be->skipped, 1);
        if (proxy_retry(p))
            return;
        if (p->attempt == 1) { /* the replica could not be tried */
            proxy_bad_gateway(p, "cannot reach backend");
            return;
        }
    }
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
