/* chring-lb: the HTTP/1.1 parser (h1.c) on libevent's buffers.
 *
 * SPDX-License-Identifier: MIT
 *
 * h1.c reads contiguous bytes; an evbuffer is a list of chains.  Both functions here hand h1
 * the chains one by one as evbuffer_peek shows them, in place, so a head or a body is looked at
 * once however it arrived, and nothing is made contiguous for it (docs/lb.md, "The parser").
 */
#define _GNU_SOURCE
#include "h1_evbuffer.h"

#include <errno.h>
#include <event2/buffer.h>

/* Chains looked at per evbuffer_peek. */
#define PEEK_CHAINS 8

ssize_t h1_evbuffer_head_end(struct evbuffer *src, struct h1_head_scan *s)
{
    if (!src || !s)
        return -EINVAL;
    size_t len = evbuffer_get_length(src);
    while (s->len < len) {
        struct evbuffer_ptr at;
        if (evbuffer_ptr_set(src, &at, s->len, EVBUFFER_PTR_SET) < 0)
            break;
        struct evbuffer_iovec v[PEEK_CHAINS];
        int n = evbuffer_peek(src, -1, &at, v, PEEK_CHAINS);
        size_t before = s->len;
        for (int i = 0; i < n && i < PEEK_CHAINS; i++) {
            ssize_t end = h1_head_end(s, v[i].iov_base, v[i].iov_len);
            if (end != 0)
                return end;
        }
        if (s->len == before)
            break; /* no progress: never with a consistent buffer */
    }
    return 0;
}

int h1_evbuffer_body_step(struct h1_body *b, struct evbuffer *src, struct evbuffer *dst)
{
    if (!b || !src || !dst || src == dst)
        return -EINVAL;
    for (;;) {
        /* the first chain that holds bytes (an empty one may lead) */
        struct evbuffer_iovec v[PEEK_CHAINS];
        int n = evbuffer_peek(src, -1, NULL, v, PEEK_CHAINS);
        const char *piece = NULL;
        size_t plen = 0;
        for (int i = 0; i < n && i < PEEK_CHAINS && plen == 0; i++) {
            piece = v[i].iov_base;
            plen = v[i].iov_len;
        }
        size_t used;
        struct h1_span data;
        int rc = h1_body_step(b, plen ? piece : NULL, plen, &used, &data);
        if (rc < 0) {
            evbuffer_drain(src, used);
            return rc;
        }
        if (data.len > 0) {
            evbuffer_drain(src, data.off);
            if (evbuffer_remove_buffer(src, dst, data.len) < 0)
                return -ENOMEM;
            evbuffer_drain(src, used - data.off - data.len);
        } else {
            evbuffer_drain(src, used);
        }
        if (rc == 1)
            return 1;
        if (plen == 0 || used == 0)
            return 0;
    }
}
