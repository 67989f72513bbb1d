/* chring-lb: strict HTTP/1.1 framing (h1.c), the one parser for requests and answers.
 *
 * SPDX-License-Identifier: MIT
 *
 * A leaf library on bytes and lengths: it knows no buffer type and no other file of lb/
 * (docs/lb.md, "The parser").  Whoever reads a socket hands it contiguous pieces; the
 * evbuffer glue of chring-lb is h1_evbuffer.c.  Every function is pure over its arguments and
 * the state struct it is given: any thread, no locks, no allocation.
 */
#ifndef CHRING_LB_H1_H
#define CHRING_LB_H1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define H1_MAX_FIELDS 512    /* field lines in one head; more: 400 / 502 */
#define H1_MAX_LINE 4096     /* a chunk-size or trailer line, its CRLF not counted */
#define H1_MAX_TRAILER 16384 /* a trailer section */

enum h1_framing {
    H1_NONE,    /* no body */
    H1_LENGTH,  /* Content-Length bytes */
    H1_CHUNKED, /* chunked */
    H1_CLOSE    /* until the connection closes (answers only) */
};

struct h1_field { /* points into the parsed head; not NUL-terminated */
    const char *name, *value;
    size_t nlen, vlen;
};

struct h1_head {
    const char *method, *target, *reason;
    size_t mlen, tlen, rlen;
    int minor;  /* HTTP/1.minor */
    int status; /* answers */
    int hosts;  /* requests: Host fields */
    enum h1_framing framing;
    uint64_t length;
    bool has_length, close;
    size_t nfields;
    struct h1_field fields[H1_MAX_FIELDS];
};

/* ------------------------------------------------------------------------------------------ */
/* heads                                                                                       */

/* Where a head ends, found as its bytes arrive in pieces.  Zero it before the first piece of
 * each head (h1_head_end does so itself when it finds the end). */
struct h1_head_scan {
    size_t len;            /* bytes of the head looked at so far */
    unsigned char matched; /* how much of CR LF CR LF the last bytes were */
};

/* Looks at the next piece of a head, piece[0..n) (the bytes after the s->len already looked
 * at).  Each byte is looked at once over all calls, so a head trickled byte by byte costs
 * linear time.  Returns the head's length (from its first byte through CRLF CRLF, > 0) when it
 * ends in this piece, and zeroes *s; 0 when it has not ended yet (all n bytes looked at);
 * -EBADMSG when an LF not after a CR came first (*s is then left as it was at that byte);
 * -EINVAL when s is NULL, or piece is NULL with n > 0.  piece is only read. */
ssize_t h1_head_end(struct h1_head_scan *s, const char *piece, size_t n);

/* Parses the head buf[0..len) (start line, fields, the empty line; len includes the final CRLF
 * CRLF) of a request (request) or an answer, in one pass.  Returns 0, or the status it earns:
 * 400 for a request (or 502 for an answer) with a malformed start line, a bare CR or LF, a
 * field name that is not a token or has white space before its colon, obs-fold, a control byte
 * (NUL included) in a value, more than H1_MAX_FIELDS fields; -EINVAL when buf or h is NULL.
 * h's pointers point into buf (which is not modified): keep buf while h is used. */
int h1_parse_head(char *buf, size_t len, bool request, struct h1_head *h);
/* The request's framing and Host rules (docs/lb.md, "Security model") for a head
 * h1_parse_head accepted: sets h->framing, h->length, h->hosts.  Returns 0, 400 or 501;
 * -EINVAL when h is NULL. */
int h1_request_framing(struct h1_head *h);
/* An answer's framing, for a request that was HEAD (head_request) or not, for a head
 * h1_parse_head accepted: sets h->framing, h->length, h->has_length, h->close.  Returns 0 or
 * 502; -EINVAL when h is NULL. */
int h1_response_framing(struct h1_head *h, bool head_request);
/* True when token is one of the comma-separated tokens of v[0..len) (case-insensitive).  False
 * when v (with len > 0) or token is NULL. */
bool h1_token_listed(const char *v, size_t len, const char *token);
/* True when every byte of a[0..n) may be part of an authority (RFC 3986 section 3.2: host and
 * port, as a Host field or an absolute-form target holds them): unreserved, sub-delims, '%',
 * ':', '[' and ']'.  An empty one is true (a Host field may be empty; an absolute-form target's
 * authority may not: the caller checks n).  False when a is NULL with n > 0. */
bool h1_authority_ok(const char *a, size_t n);

/* ------------------------------------------------------------------------------------------ */
/* bodies                                                                                      */

enum h1_body_state {
    H1B_DONE,
    H1B_LENGTH,
    H1B_CHUNK_SIZE, /* a chunk-size line (with its extensions) */
    H1B_CHUNK_DATA,
    H1B_CHUNK_CRLF, /* the CRLF after a chunk's data */
    H1B_TRAILER,    /* the trailer section, through its empty line */
    H1B_UNTIL_CLOSE
};

/* A body being decoded: set by h1_body_init, advanced by h1_body_step; a plain value. */
struct h1_body {
    enum h1_body_state state;
    uint64_t left;        /* bytes of the current piece */
    uint64_t total;       /* body bytes so far (the data, framing not counted) */
    size_t trailer_bytes; /* of the trailer section, CRLFs counted */
    size_t line;          /* bytes of the current chunk-size or trailer line */
    unsigned char phase;  /* where in that line (h1.c) */
    unsigned char digits; /* hex digits of the chunk size so far */
};

/* A run of body data inside the piece given to h1_body_step: piece[off..off+len). */
struct h1_span {
    size_t off, len;
};

/* Starts a body of that framing (and length, for H1_LENGTH).  Does nothing when b is NULL. */
void h1_body_init(struct h1_body *b, enum h1_framing framing, uint64_t length);
/* Decodes the next piece of a body, in[0..len): chunk sizes, extensions, CRLFs and trailers are
 * checked and dropped; the body's data is not copied but reported as *data, a span of in.  It
 * stops after one span of data, at the body's end or at the end of in, and sets *used to the
 * bytes of in it went through (framing and data).  Returns 1 when the body ended at
 * in[*used] (what follows is the next message's); 0 when more is needed: call again with
 * in + *used (when *used < len) or with the next piece; -EBADMSG for a framing error (a chunk
 * size that is not plain hex or has more than 15 digits, a missing CRLF, a line above
 * H1_MAX_LINE, a bad trailer field or a trailer section above H1_MAX_TRAILER), found at the
 * first byte that makes the body impossible; -EINVAL when b, used or data is NULL, or in is NULL
 * with len > 0.  The outcome does not depend on how the bytes are cut into pieces.  *data's len
 * is 0 when no data was met.  in is only read. */
int h1_body_step(struct h1_body *b, const char *in, size_t len, size_t *used, struct h1_span *data);

#endif
