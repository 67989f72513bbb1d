/* chring-lb: the client side: its own HTTP/1.1 server connection layer (conn.c).
 *
 * SPDX-License-Identifier: MIT
 *
 * One struct conn per client connection, on a plain bufferevent, read with the strict parser
 * of h1.c (the one the backend side uses).  A request is handed to its handler once its head
 * and whole body have arrived (struct lb_req); the handler answers it with lb_req_reply, or
 * with lb_req_reply_start, lb_req_reply_chunk and lb_req_reply_end, or ends the connection with
 * lb_req_abort.  After any of these the request is gone: the handler must not touch it again.
 * Requests on one connection are served one at a time, in order (pipelined ones wait in the
 * input buffer).  Everything runs on the thread of the connection's event base.
 */
#ifndef CHRING_LB_CONN_H
#define CHRING_LB_CONN_H

#include <arpa/inet.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdbool.h>
#include <stdint.h>

struct conn;
struct worker;
struct evconnlistener;

struct lb_req {
    struct conn *conn;        /* its connection (conn.c's) */
    enum evhttp_cmd_type cmd; /* GET, POST, HEAD, PUT, DELETE, OPTIONS or PATCH */
    const char *method;       /* as sent */
    const char *target;       /* as sent */
    const char *path;         /* the target's path, raw (not decoded), "/" for "*" */
    const char *query;        /* after '?', raw, or NULL */
    const char *authority;    /* an absolute-form target's authority, else NULL */
    const char *peer;         /* the client's address */
    int minor;                /* HTTP/1.minor */
    struct evkeyvalq *in;     /* the request's fields, in order, as sent */
    struct evkeyvalq *out;    /* fields for the answer, added by the handler */
    struct evbuffer *body;    /* the whole body, framing removed */
};

/* A request handler: w is the worker (NULL on the stats listener). */
typedef void (*lb_handler_fn)(struct worker *w, struct lb_req *req);

/* Serves the client connections of listener fd (taken over) on base with handler: worker w's
 * (counted against --max-conns, parked over it) or, w NULL, the stats listener's.  Returns the
 * listener (LEV_OPT_CLOSE_ON_FREE), or NULL. */
struct evconnlistener *lb_server_listen(struct event_base *base, evutil_socket_t fd,
                                        struct worker *w, lb_handler_fn handler);
/* Closes every client connection of worker w (NULL: the stats listener's); requests being
 * served get their gone callback first.  Their thread, after their listener was freed. */
void lb_server_close_all(struct worker *w);

/* The whole answer: code, reason (NULL: the standard one), req->out, a Content-Length, body
 * (may be NULL; its bytes are moved out).  Frees req. */
void lb_req_reply(struct lb_req *req, int code, const char *reason, struct evbuffer *body);
/* The answer's head: length >= 0 is its Content-Length; -1: not known, chunked to an HTTP/1.1
 * client, until the close to an HTTP/1.0 one.  No body goes out for HEAD, 1xx, 204, 304. */
void lb_req_reply_start(struct lb_req *req, int code, const char *reason, int64_t length);
/* Moves data's bytes out as part of the body (chunked when the answer is). */
void lb_req_reply_chunk(struct lb_req *req, struct evbuffer *data);
/* The body is complete: the last chunk, then the next request, or the close.  Frees req. */
void lb_req_reply_end(struct lb_req *req);
/* The answer broke off: the connection is closed at once, so that the client cannot take what
 * it got for complete.  Frees req. */
void lb_req_abort(struct lb_req *req);
/* Callbacks while req is served, both with arg: drained, the client's output buffer has been
 * written out; gone, the client went away (req is freed when gone returns; call nothing on it
 * from then on). */
void lb_req_set_cbs(struct lb_req *req, void (*drained)(void *), void (*gone)(void *), void *arg);
/* Bytes of the answer waiting to be written to the client. */
size_t lb_req_pending(const struct lb_req *req);
/* The answer ends the connection (also for a keep-alive client). */
void lb_req_close_after(struct lb_req *req);

/* Answers req with a text/plain body (body plus a newline).  Frees req. */
void lb_send_text(struct lb_req *req, int code, const char *reason, const char *body);
/* Answers req 503 with Retry-After, the connection closed.  req's thread. */
void lb_send_overloaded(struct lb_req *req, const char *why);

/* Connections to the stats listener closed at their accept: a peer outside --stats-allow, or
 * more than the listener's 16 at a time.  Read with relaxed loads. */
extern _Atomic uint64_t lb_stats_refused;

/* Gives free --max-conns slots to w's parked connections, oldest first.  w's thread. */
void lb_conn_admit_parked(struct worker *w);

#endif
