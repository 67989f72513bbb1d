/* libFuzzer target: chring-lb's HTTP/1 parser (lb/h1.c), requests and answers, as the server
 * layer (lb/conn.c) and the proxy (lb/proxy.c) use it: bytes arrive in pieces, the head is
 * found incrementally, parsed, its framing decided, then its body decoded piece by piece.
 *
 * SPDX-License-Identifier: MIT
 *
 * Input: byte 0 chooses the direction (bit 0: answer; bit 1: the request was HEAD), byte 1 the
 * piece size the bytes arrive in (1..256); the rest is what the peer sent.  Checked on every
 * input: every field lies inside the head and holds no CR, LF or NUL; a name is a token; the
 * framing agrees with the fields; the body decoder never produces more than a Content-Length,
 * never reports the end before it, and consumes exactly the body (what follows stays); the
 * body decoded from the pieces and decoded in one piece give the same result, data and end.  Built
 * by fuzz/meson.build (clang, -Dfuzz=true) and, as a plain replay of fuzz/corpus/h1 and
 * fuzz/regress/h1, by tests/lb/meson.build (docs/fuzz.md).
 */
#include "h1.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) \
    do { \
        if (!(c)) \
            abort(); \
    } while (0)

static bool is_token(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  (c && strchr("!#$%&'*+-.^_`|~", c));
        if (!ok)
            return false;
    }
    return true;
}

static void check_head(const char *buf, size_t len, const struct h1_head *h, bool request)
{
    CHECK(h->nfields <= H1_MAX_FIELDS);
    for (size_t i = 0; i < h->nfields; i++) {
        const struct h1_field *f = &h->fields[i];
        CHECK(f->name >= buf && f->name + f->nlen <= buf + len);
        CHECK(f->value >= buf && f->value + f->vlen <= buf + len);
        CHECK(is_token(f->name, f->nlen));
        for (size_t k = 0; k < f->vlen; k++)
            CHECK(f->value[k] != '\r' && f->value[k] != '\n' && f->value[k] != '\0');
    }
    if (request) {
        CHECK(is_token(h->method, h->mlen));
        CHECK(h->tlen > 0 && h->target >= buf && h->target + h->tlen <= buf + len);
    } else {
        CHECK(h->status >= 100 && h->status <= 599);
    }
    CHECK(h->minor >= 0 && h->minor <= 9);
}

/* Decodes the body that starts at in[at], the bytes up to in[avail] having arrived already and
 * the rest (up to in[size]) arriving in pieces of `piece` bytes, as a caller of h1_body_step
 * does.  The data goes to out; *stop is where the decoder stopped.  Returns its last result. */
static int decode(const struct h1_head *h, const char *in, size_t at, size_t avail, size_t size,
                  size_t piece, char *out, size_t *outlen, size_t *stop)
{
    struct h1_body b;
    h1_body_init(&b, h->framing, h->length);
    size_t n = 0;
    int rc;
    for (;;) {
        size_t used;
        struct h1_span d;
        rc = h1_body_step(&b, in + at, avail - at, &used, &d);
        CHECK(rc == 1 || rc == 0 || rc == -EBADMSG);
        CHECK(used <= avail - at && (rc < 0 || d.off + d.len <= used));
        if (rc >= 0 && d.len > 0) {
            memcpy(out + n, in + at + d.off, d.len);
            n += d.len;
        }
        CHECK(b.total == n);
        if (h->framing == H1_LENGTH)
            CHECK(b.total <= h->length && (rc != 1 || b.total == h->length));
        at += used;
        if (rc != 0)
            break;
        if (at < avail)
            continue;
        if (avail == size)
            break;
        avail = size - avail < piece ? size : avail + piece;
    }
    *outlen = n;
    *stop = at;
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool answer = data[0] & 1, head_req = data[0] & 2;
    size_t piece = (size_t)data[1] + 1;
    const char *in = (const char *)data + 2;
    size = size - 2;
    struct h1_head *h = malloc(sizeof *h);
    CHECK(h);
    /* the head, found as the pieces arrive */
    struct h1_head_scan scan = {0};
    size_t fed = 0;
    ssize_t end = 0;
    while (fed < size && end == 0) {
        size_t n = size - fed < piece ? size - fed : piece;
        end = h1_head_end(&scan, in + fed, n);
        CHECK(end == 0 || end == -EBADMSG ||
              (end > 0 && (size_t)end <= fed + n && (size_t)end > fed));
        if (end == 0)
            CHECK(scan.len == fed + n);
        fed += n;
    }
    /* found in one piece: the same end, or the same bare LF */
    struct h1_head_scan whole = {0};
    ssize_t end_whole = h1_head_end(&whole, in, size);
    CHECK(end_whole == end);
    if (end > 0) {
        /* the head in a buffer of its exact size: a read past it is ASan's to see */
        char *buf = malloc((size_t)end);
        CHECK(buf);
        memcpy(buf, in, (size_t)end);
        CHECK(buf[end - 1] == '\n' && buf[end - 2] == '\r');
        int rc = h1_parse_head(buf, (size_t)end, !answer, h);
        CHECK(rc == 0 || rc == (answer ? 502 : 400));
        if (rc == 0) {
            check_head(buf, (size_t)end, h, !answer);
            rc = answer ? h1_response_framing(h, head_req) : h1_request_framing(h);
            CHECK(rc == 0 || rc == 400 || rc == 501 || rc == 502);
        }
        if (rc == 0) {
            if (h->framing == H1_LENGTH)
                CHECK(h->length > 0);
            /* the body, from the head's end on: the rest of the last piece, then the next
             * ones; and again in one piece: the same outcome, data and stop */
            char *out1 = malloc(size + 1), *out2 = malloc(size + 1);
            CHECK(out1 && out2);
            size_t n1, n2, stop1, stop2;
            int rc1 = decode(h, in, (size_t)end, fed, size, piece, out1, &n1, &stop1);
            int rc2 = decode(h, in, (size_t)end, size, size, 1, out2, &n2, &stop2);
            CHECK(rc1 == rc2 && n1 == n2 && stop1 == stop2 && memcmp(out1, out2, n1) == 0);
            if (h->framing == H1_NONE)
                CHECK(rc1 == 1 && n1 == 0 && stop1 == (size_t)end);
            if (h->framing == H1_CLOSE)
                CHECK(rc1 == 0 && n1 == size - (size_t)end);
            free(out1);
            free(out2);
        }
        free(buf);
    }
    free(h);
    return 0;
}
