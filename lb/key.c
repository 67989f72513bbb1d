/* chring-lb: the routing key of a request (--key, --key-prefix).
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "lb.h"

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

void lb_request_key(const struct lb_req *req, const char **key, size_t *len)
{
    *key = "";
    *len = 0;
    switch (lb_cfg.key_kind) {
    case KEY_PATH:
        *key = req->path;
        *len = strlen(req->path);
        break;
    case KEY_HEADER: {
        const char *v = evhttp_find_header(req->in, lb_cfg.key_name);
        *key = v ? v : "";
        *len = strlen(*key);
        break;
    }
    case KEY_QUERY: *key = query_arg(req->query ? req->query : "", lb_cfg.key_name, len); break;
    }
    if (lb_cfg.key_prefix && *len > lb_cfg.key_prefix)
        *len = lb_cfg.key_prefix;
}
