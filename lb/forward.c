/* chring-lb: the backend request built from the client's request.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "conn.h"
#include "proxy.h"

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
        uint64_t t =
            ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
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

/* The client's X-Forwarded-For list (every such field, in order), then its address, whole:
 * the last element is always the peer this hop saw. */
static int add_forwarded_for(struct evbuffer *out, const struct lb_req *req)
{
    int rc = evbuffer_add(out, "X-Forwarded-For: ", 17);
    const struct evkeyval *h;
    TAILQ_FOREACH(h, req->in, next)
    {
        if (strcasecmp(h->key, "X-Forwarded-For") == 0 && h->value[0])
            rc |= evbuffer_add_printf(out, "%s, ", h->value) < 0;
    }
    rc |= evbuffer_add_printf(out, "%s\r\n", req->peer[0] ? req->peer : "unknown") < 0;
    return rc ? -1 : 0;
}

int lb_forward_write(struct evbuffer *out, const struct lb_req *req, const char *hosthdr)
{
    /* origin-form: the target as sent; absolute-form: its path and query */
    int rc;
    if (req->target[0] == '*')
        rc = evbuffer_add_printf(out, "%s * HTTP/1.1\r\n", req->method) < 0;
    else if (req->authority)
        rc = evbuffer_add_printf(out, "%s %s%s%s HTTP/1.1\r\n", req->method, req->path,
                                 req->query ? "?" : "", req->query ? req->query : "") < 0;
    else
        rc = evbuffer_add_printf(out, "%s %s HTTP/1.1\r\n", req->method, req->target) < 0;
    struct evkeyvalq hdrs;
    TAILQ_INIT(&hdrs);
    /* Host is end-to-end whatever Connection lists (RFC 9110 section 7.2): it is written here,
     * never dropped; an absolute-form target's authority replaces it (RFC 9112 section
     * 3.2.2). */
    static const char *const req_skip[] = {"Content-Length", "Expect", "X-Forwarded-For", "Host",
                                           NULL};
    lb_copy_headers(req->in, &hdrs, req_skip);
    const char *host = req->authority ? req->authority : evhttp_find_header(req->in, "Host");
    rc |= evbuffer_add_printf(out, "Host: %s\r\n", host && *host ? host : hosthdr) < 0;
    struct evkeyval *h;
    TAILQ_FOREACH(h, &hdrs, next)
    {
        rc |= evbuffer_add_printf(out, "%s: %s\r\n", h->key, h->value) < 0;
    }
    evhttp_clear_headers(&hdrs);
    rc |= add_forwarded_for(out, req) < 0;
    /* After the client's own Via fields (copied above): the list stays in hop order. */
    rc |= evbuffer_add_printf(out, "Via: 1.%d %s\r\n", req->minor, via_token) < 0;
    size_t blen = evbuffer_get_length(req->body);
    if (blen > 0 || req->cmd == EVHTTP_REQ_POST || req->cmd == EVHTTP_REQ_PUT ||
        req->cmd == EVHTTP_REQ_PATCH)
        rc |= evbuffer_add_printf(out, "Content-Length: %zu\r\n", blen) < 0;
    rc |= evbuffer_add(out, "\r\n", 2);
    /* The body's chains are shared, not copied: the request keeps it for a retry, and the
     * bytes buffered stay what --max-body-total counts. */
    if (blen > 0)
        rc |= evbuffer_add_buffer_reference(out, req->body);
    return rc ? -1 : 0;
}
