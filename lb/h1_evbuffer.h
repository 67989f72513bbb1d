/* chring-lb: the HTTP/1.1 parser (h1.h) on libevent's buffers (h1_evbuffer.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_H1_EVBUFFER_H
#define CHRING_LB_H1_EVBUFFER_H

#include "h1.h"

#include <sys/types.h>

struct evbuffer;

/* Where the head at the start of src ends: h1_head_end over src's bytes from s->len on, read in
 * place (evbuffer_peek), nothing removed.  Returns the head's length (> 0; *s zeroed), 0 when it
 * has not arrived whole (*s remembers how far it looked), -EBADMSG for a bare LF, -EINVAL for a
 * NULL argument.  The thread that owns src. */
ssize_t h1_evbuffer_head_end(struct evbuffer *src, struct h1_head_scan *s);
/* Moves the body bytes at the start of src to the end of dst, framing removed (h1_body_step on
 * each contiguous piece of src; the data moved with evbuffer_remove_buffer, without a copy
 * where whole chains go).  Returns 1 when the body ended (src keeps what follows it), 0 when
 * more is needed (src is then empty), -EBADMSG for a framing error (what came before it was
 * moved), -ENOMEM when libevent could not move data, -EINVAL for a NULL argument or
 * src == dst.  The thread that owns both buffers. */
int h1_evbuffer_body_step(struct h1_body *b, struct evbuffer *src, struct evbuffer *dst);

#endif
