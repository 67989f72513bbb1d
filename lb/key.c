/* chring-lb: the routing key of a request (--key, --key-prefix; --key prompt reads the body
 * with prompt.c).
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "config.h"
#include "conn.h"
#include "prompt.h"
#include "proxy.h"

#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* nginx's $arg_NAME: the first argument whose name matches case-insensitively, raw (not
 * decoded); a missing argument gives the empty key. */
static const char *query_arg(const char *q, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    const char *p = q;
    while (p && *p) {
        const char *amp = strchr(p, '&');
        const char *end = amp ? amp : p + strlen(p);
        if ((size_t)(end - p) >= nl && strncasecmp(p, name, nl) == 0 &&
            (p[nl] == '=' || p + nl == end)) {
            const char *v = p + nl;
            if (v < end && *v == '=')
                v++;
            *len = (size_t)(end - v);
            return v;
        }
        p = amp ? amp + 1 : NULL;
    }
    *len = 0;
    return "";
}

/* Is the request's body JSON as far as its Content-Type says: absent, application/json, or a
 * +json type (parameters after ';' ignored).  Another type routes by the empty key. */
static bool json_type(const struct lb_req *req)
{
    const char *ct = evhttp_find_header(req->in, "Content-Type");
    if (!ct)
        return true;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strcspn(ct, "; \t");
    if (n == 16 && strncasecmp(ct, "application/json", 16) == 0)
        return true;
    return n > 5 && strncasecmp(ct + n - 5, "+json", 5) == 0 && memchr(ct, '/', n) != NULL;
}

/* --key prompt: the model and the prompt of the JSON body (prompt.c), at most key_prefix bytes;
 * a request without a body (GET) or with another Content-Type: the empty key. */
static char *prompt_key(const struct lb_req *req, size_t *len)
{
    size_t blen = evbuffer_get_length(req->body);
    size_t cap = lb_cfg.key_prefix ? lb_cfg.key_prefix : blen + 1;
    char *out = malloc(cap + 1);
    if (!out)
        return NULL;
    *len = 0;
    if (blen > 0 && json_type(req)) {
        /* One contiguous copy of the body for the parser: within --max-body; the request keeps
         * its own (forwarded byte for byte). */
        char *body = (char *)evbuffer_pullup(req->body, -1);
        if (body)
            *len = lb_prompt_key(body, blen, out, cap, NULL);
    }
    out[*len] = '\0';
    return out;
}

char *lb_request_key(const struct lb_req *req, size_t *len)
{
    const char *key = "";
    *len = 0;
    switch (lb_cfg.key_kind) {
    case KEY_PATH:
        key = req->path;
        *len = strlen(req->path);
        break;
    case KEY_HEADER: {
        const char *v = evhttp_find_header(req->in, lb_cfg.key_name);
        key = v ? v : "";
        *len = strlen(key);
        break;
    }
    case KEY_QUERY: key = query_arg(req->query ? req->query : "", lb_cfg.key_name, len); break;
    case KEY_PROMPT: return prompt_key(req, len);
    }
    if (lb_cfg.key_prefix && *len > lb_cfg.key_prefix)
        *len = lb_cfg.key_prefix;
    char *out = malloc(*len + 1);
    if (out) {
        memcpy(out, key, *len);
        out[*len] = '\0';
    }
    return out;
}
