/* chring-lb: strict HTTP/1.1 framing (h1.c), the one parser for requests and answers.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_H1_H
#define CHRING_LB_H1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define H1_MAX_FIELDS 512    /* field lines in one head; more: 400 / 502 */
#define H1_MAX_LINE 4096     /* a chunk-size or trailer line */
#define H1_MAX_TRAILER 16384 /* a trailer section */

struct evbuffer;

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
    int hosts;
    enum h1_framing framing;
    uint64_t length;
    bool has_length, close;
    size_t nfields;
    struct h1_field fields[H1_MAX_FIELDS];
};

/* Parses the head buf[0..len) (start line, fields, the empty line; len includes the final CRLF
 * CRLF) of a request (request) or an answer, in one pass.  Returns 0, or the status it earns:
 * 400 for a request (or 502 for an answer) with a malformed start line, a bare CR or LF, a
 * field name that is not a token or has white space before its colon, obs-fold, a control byte
 * (NUL included) in a value, more than H1_MAX_FIELDS fields. */
int h1_parse_head(char *buf, size_t len, bool request, struct h1_head *h);
/* The request's framing and Host rules (docs/lb.md, "Security model"): sets h->framing,
 * h->length, h->hosts.  Returns 0, 400 or 501. */
int h1_request_framing(struct h1_head *h);
/* An answer's framing, for a request that was HEAD (head_request) or not: sets h->framing,
 * h->length, h->has_length, h->close.  Returns 0 or 502. */
int h1_response_framing(struct h1_head *h, bool head_request);
/* True when token is one of the comma-separated tokens of v[0..len) (case-insensitive). */
bool h1_token_listed(const char *v, size_t len, const char *token);
/* The length of the head at the start of src (through CRLF CRLF), -1 when it has not arrived,
 * -2 when a bare LF (not after a CR) came first;
 * *scanned (0 at the start of a head) remembers how far it looked, so that a head arriving
 * byte by byte costs linear time. */
ssize_t h1_find_head_end(struct evbuffer *src, size_t *scanned);

enum h1_body_state {
    H1B_DONE,
    H1B_LENGTH,
    H1B_CHUNK_SIZE,
    H1B_CHUNK_DATA,
    H1B_CHUNK_CRLF,
    H1B_TRAILER,
    H1B_UNTIL_CLOSE
};

struct h1_body {
    enum h1_body_state state;
    uint64_t left;        /* bytes of the current piece */
    uint64_t total;       /* body bytes so far */
    size_t trailer_bytes; /* of the trailer section */
};

void h1_body_init(struct h1_body *b, enum h1_framing framing, uint64_t length);
/* Moves the body bytes of src (framing removed: chunk sizes, extensions and trailers checked and
 * dropped) to dst.  Returns 1 when the body ended (src keeps what follows), 0 when more is
 * needed, -1 for a framing error (a chunk size that is not plain hex, a missing CRLF, a bad
 * trailer). */
int h1_body_step(struct h1_body *b, struct evbuffer *src, struct evbuffer *dst);

#endif
