/* chring-lb: HTTP message helpers: the hop-by-hop rule (RFC 9110 section 7.6.1) and plain-text
 * answers.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "lb.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

static const char *const hop_by_hop[] = {
    "Connection", "Keep-Alive",        "Proxy-Connection", "TE",
    "Trailer",    "Transfer-Encoding", "Upgrade",          NULL,
};

/* True when name is one of the tokens of a Connection header of src. */
static bool token_listed(const struct evkeyvalq *src, const char *name)
{
    size_t nl = strlen(name);
    const struct evkeyval *h;
    TAILQ_FOREACH(h, src, next)
    {
        if (strcasecmp(h->key, "Connection") != 0)
            continue;
        const char *p = h->value;
        while (*p) {
            while (*p == ' ' || *p == '\t' || *p == ',')
                p++;
            const char *s = p;
            while (*p && *p != ',' && *p != ' ' && *p != '\t')
                p++;
            if ((size_t)(p - s) == nl && strncasecmp(s, name, nl) == 0)
                return true;
        }
    }
    return false;
}

/* True when name is listed in extra (NULL-terminated, may be NULL), case-insensitively. */
static bool name_listed(const char *const *extra, const char *name)
{
    for (const char *const *e = extra; e && *e; e++)
        if (strcasecmp(*e, name) == 0)
            return true;
    return false;
}

static bool is_hop_by_hop(const struct evkeyvalq *src, const char *name)
{
    return name_listed(hop_by_hop, name) || token_listed(src, name);
}

void lb_copy_headers(const struct evkeyvalq *src, struct evkeyvalq *dst, const char *const *extra)
{
    const struct evkeyval *h;
    TAILQ_FOREACH(h, src, next)
    {
        if (!is_hop_by_hop(src, h->key) && !name_listed(extra, h->key))
            evhttp_add_header(dst, h->key, h->value);
    }
}

void lb_send_text(struct evhttp_request *req, int code, const char *reason, const char *body)
{
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add_printf(b, "%s\n", body);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain");
    evhttp_send_reply(req, code, reason, b);
    if (b)
        evbuffer_free(b);
}
