/* chring-lb: a request towards its backend: its key (key.c), hop-by-hop fields (http.c), the
 * forwarded request and loop detection (forward.c), the proxying (proxy.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_PROXY_H
#define CHRING_LB_PROXY_H

#include "conn.h"
#include "h1.h"

#include <stdbool.h>
#include <stddef.h>

struct evbuffer;
struct evkeyvalq;
struct worker;

/* The routing key of req (--key, --key-prefix) in a new NUL-terminated string of *len bytes
 * (the key itself may hold NUL bytes: --key prompt puts one after the model); the caller frees
 * it.  Returns NULL when out of memory.  Any worker thread. */
char *lb_request_key(const struct lb_req *req, size_t *len);

/* Copies the end-to-end headers of src into dst, skipping the names in extra (NULL-terminated,
 * may be NULL) as well.  Linear in the size of src. */
void lb_copy_headers(const struct evkeyvalq *src, struct evkeyvalq *dst, const char *const *extra);
/* The same for the fields of an answer's head, Content-Length and Transfer-Encoding skipped too
 * (the caller adds the framing).  Returns 0 / -1 (out of memory). */
int lb_copy_fields(const struct h1_head *h, struct evkeyvalq *dst);
/* The Host check of /_chring/ (DNS rebinding): true for host (a Host value, NULL when the
 * request had none) naming loopback (localhost, *.localhost, 127.0.0.0/8, ::1), the listener's
 * configured address (--stats-listen when stats_listener, else --listen), or any address when
 * that listener is a wildcard (0.0.0.0, ::). */
bool lb_stats_host_allowed(const char *host, bool stats_listener);

/* Writes the backend request for the client's request req to out: request line (HTTP/1.1,
 * origin-form target), end-to-end headers, Host (an absolute-form target's authority, else the
 * client's Host, else hosthdr), X-Forwarded-For (the client's list, then its address), Via,
 * Content-Length and the body (shared, not copied: req keeps it for a retry).  Returns 0 / -1
 * (out of memory). */
int lb_forward_write(struct evbuffer *out, const struct lb_req *req, const char *hosthdr);
/* Loop detection: lb_via_init draws this process's Via pseudonym (main, before the workers);
 * lb_forward_write adds "Via: 1.1 <pseudonym>" to every forwarded request; lb_via_loop is true
 * when a request's Via fields already list it (the answer is then 508 Loop Detected). */
void lb_via_init(void);
const char *lb_via_token(void);
bool lb_via_loop(const struct evkeyvalq *headers);

/* Proxies req (not the stats endpoint) on worker w: leases a backend and starts the first
 * attempt, or answers 502/503. */
void lb_proxy_start(struct worker *w, struct lb_req *req);
/* Worker stopped, server freed: finishes every proxy left on w. */
void lb_proxy_drop_all(struct worker *w);

/* Answers GET (or HEAD) /_chring/stats with the ring's, every member's and the balancer's
 * statistics as JSON; any other method 405.  O(points + members) per request.  w may be NULL
 * (the stats listener on the main thread). */
void lb_stats_serve(struct worker *w, struct lb_req *req);

#endif
