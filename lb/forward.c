/* chring-lb: the backend request built from the client's request.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "lb.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Loop detection (docs/lb.md, "Security model"): every forwarded request carries a Via entry
 * whose pseudonym is random per process, "chring-lb-" and 16 hex digits (RFC 9110 section
 * 7.6.3).  A request that arrives with it has been through this instance already: a member
 * that is the balancer itself, or a ring of balancers.  It is answered 508 instead of being
 * forwarded again. */
static char via_token[32];
static size_t via_len;

void lb_via_init(void)
{
    unsigned char rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t t = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
        memcpy(rnd, &t, sizeof rnd);
    }
    int k = snprintf(via_token, sizeof via_token, "chring-lb-");
    for (size_t i = 0; i < sizeof rnd; i++)
        k += snprintf(via_token + k, sizeof via_token - (size_t)k, "%02x", rnd[i]);
    via_len = (size_t)k;
}

const char *lb_via_token(void)
{
    return via_token;
}

/* True when v holds the token as a received-by pseudonym: preceded by a space (after the
 * protocol) and followed by the end, a comma, a space or a tab. */
static bool via_lists_us(const char *v)
{
    for (const char *p = strstr(v, via_token); p; p = strstr(p + 1, via_token)) {
        char after = p[via_len];
        bool starts = p == v || p[-1] == ' ' || p[-1] == '\t';
        if (starts && (after == '\0' || after == ',' || after == ' ' || after == '\t'))
            return true;
    }
    return false;
}

bool lb_via_loop(const struct evkeyvalq *headers)
{
    if (via_len == 0)
        return false;
    const struct evkeyval *h;
    TAILQ_FOREACH(h, headers, next)
    {
        if (strcasecmp(h->key, "Via") == 0 && via_lists_us(h->value))
            return true;
    }
    return false;
}

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

/* The client's X-Forwarded-For list (every such field, in order), then its address, whole:
 * the last element is always the peer this hop saw. */
static int add_forwarded_for(struct evbuffer *out, const struct evkeyvalq *in,
                             struct evhttp_connection *cevcon)
{
    char *peer = NULL;
    ev_uint16_t pport = 0;
    evhttp_connection_get_peer(cevcon, &peer, &pport);
    int rc = evbuffer_add(out, "X-Forwarded-For: ", 17);
    const struct evkeyval *h;
    TAILQ_FOREACH(h, in, next)
    {
        if (strcasecmp(h->key, "X-Forwarded-For") == 0 && h->value[0]) {
            rc |= evbuffer_add_printf(out, "%s, ", h->value) < 0;
        }
    }
    rc |= evbuffer_add_printf(out, "%s\r\n", peer && *peer ? peer : "unknown") < 0;
    return rc ? -1 : 0;
}

static const char *method_name(enum evhttp_cmd_type cmd)
{
    switch (cmd) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_PATCH: return "PATCH";
    default: return NULL; /* not allowed by the server: cannot reach here */
    }
}

int lb_forward_write(struct evbuffer *out, struct evhttp_request *req,
                     struct evhttp_connection *cevcon, const char *hosthdr)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    const char *method = method_name(cmd);
    if (!method)
        return -1;
    char *built;
    const char *target = lb_forward_target(req, &built);
    int rc = evbuffer_add_printf(out, "%s %s HTTP/1.1\r\n", method, target) < 0;
    free(built);
    struct evkeyvalq hdrs;
    TAILQ_INIT(&hdrs);
    static const char *const req_skip[] = {"Content-Length", "Expect", "X-Forwarded-For", NULL};
    lb_copy_headers(in, &hdrs, req_skip);
    bool host = false;
    struct evkeyval *h;
    TAILQ_FOREACH(h, &hdrs, next)
    {
        host |= strcasecmp(h->key, "Host") == 0;
        rc |= evbuffer_add_printf(out, "%s: %s\r\n", h->key, h->value) < 0;
    }
    evhttp_clear_headers(&hdrs);
    if (!host)
        rc |= evbuffer_add_printf(out, "Host: %s\r\n", hosthdr) < 0;
    rc |= add_forwarded_for(out, in, cevcon) < 0;
    /* After the client's own Via fields (copied above): the list stays in hop order. */
    rc |= evbuffer_add_printf(out, "Via: 1.1 %s\r\n", via_token) < 0;
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t blen = evbuffer_get_length(body);
    if (blen > 0 || cmd == EVHTTP_REQ_POST || cmd == EVHTTP_REQ_PUT || cmd == EVHTTP_REQ_PATCH)
        rc |= evbuffer_add_printf(out, "Content-Length: %zu\r\n", blen) < 0;
    rc |= evbuffer_add(out, "\r\n", 2);
    rc |= copy_body(out, body);
    return rc ? -1 : 0;
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
