/* chring-lb: the backend request built from the client's request.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "lb.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>

/* Copies the body without consuming it (a retry sends it again). */
static int copy_body(struct evbuffer *dst, struct evbuffer *src)
{
    size_t len = evbuffer_get_length(src);
    if (len == 0)
        return 0;
    int n = evbuffer_peek(src, -1, NULL, NULL, 0);
    if (n <= 0)
        return 0;
    struct evbuffer_iovec *v = calloc((size_t)n, sizeof *v);
    if (!v)
        return -1;
    evbuffer_peek(src, -1, NULL, v, n);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = evbuffer_add(dst, v[i].iov_base, v[i].iov_len);
    free(v);
    return rc;
}

/* Appends the client's address to its X-Forwarded-For (or starts one). */
static void add_forwarded_for(struct evkeyvalq *out, const struct evkeyvalq *in,
                              struct evhttp_connection *cevcon)
{
    char *peer = NULL;
    ev_uint16_t pport = 0;
    evhttp_connection_get_peer(cevcon, &peer, &pport);
    const char *xff = evhttp_find_header(in, "X-Forwarded-For");
    if (peer) {
        if (xff) {
            char buf[1024];
            snprintf(buf, sizeof buf, "%s, %s", xff, peer);
            evhttp_add_header(out, "X-Forwarded-For", buf);
        } else {
            evhttp_add_header(out, "X-Forwarded-For", peer);
        }
    }
}

int lb_forward_prepare(struct evhttp_request *breq, struct evhttp_request *req,
                       struct evhttp_connection *cevcon, const char *hosthdr)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evkeyvalq *out = evhttp_request_get_output_headers(breq);
    static const char *const req_skip[] = {"Content-Length", "Expect", "X-Forwarded-For", NULL};
    lb_copy_headers(in, out, req_skip);
    if (!evhttp_find_header(out, "Host"))
        evhttp_add_header(out, "Host", hosthdr);
    add_forwarded_for(out, in, cevcon);
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t blen = evbuffer_get_length(body);
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (blen > 0 || evhttp_find_header(in, "Content-Length") ||
        evhttp_find_header(in, "Transfer-Encoding") || cmd == EVHTTP_REQ_POST ||
        cmd == EVHTTP_REQ_PUT || cmd == EVHTTP_REQ_PATCH) {
        char lenbuf[32];
        snprintf(lenbuf, sizeof lenbuf, "%zu", blen);
        evhttp_add_header(out, "Content-Length", lenbuf);
    }
    return copy_body(evhttp_request_get_output_buffer(breq), body);
}

const char *lb_forward_target(struct evhttp_request *req, char **built)
{
    const char *uri = evhttp_request_get_uri(req);
    *built = NULL;
    if (uri[0] == '/')
        return uri;
    const struct evhttp_uri *pu = evhttp_request_get_evhttp_uri(req);
    const char *path = pu ? evhttp_uri_get_path(pu) : NULL;
    const char *query = pu ? evhttp_uri_get_query(pu) : NULL;
    if (!path || !*path)
        path = "/";
    if (asprintf(built, "%s%s%s", path, query ? "?" : "", query ? query : "") < 0)
        *built = NULL;
    return *built ? *built : "/";
}
