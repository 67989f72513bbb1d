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
 * never reports the end before it, and consumes exactly the body (what follows stays).  Built
 * by fuzz/meson.build (clang, -Dfuzz=true) and, as a plain replay of fuzz/corpus/h1 and
 * fuzz/regress/h1, by tests/lb/meson.build (docs/fuzz.md).
 */
#include "h1.h"

#include <event2/buffer.h>
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool answer = data[0] & 1, head_req = data[0] & 2;
    size_t piece = (size_t)data[1] + 1;
    data += 2;
    size -= 2;
    struct evbuffer *in = evbuffer_new(), *body = evbuffer_new();
    struct h1_head *h = malloc(sizeof *h);
    CHECK(in && body && h);
    size_t fed = 0, scanned = 0;
    ssize_t end = -1;
    /* the head, found as the bytes arrive */
    while (fed < size) {
        size_t n = size - fed < piece ? size - fed : piece;
        evbuffer_add(in, data + fed, n);
        fed += n;
        end = h1_find_head_end(in, &scanned);
        if (end != -1)
            break;
    }
    if (end >= 0) {
        /* the head in a buffer of its exact size: a read past it is ASan's to see */
        char *buf = malloc((size_t)end);
        CHECK(buf);
        evbuffer_remove(in, buf, (size_t)end);
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
            struct h1_body b;
            h1_body_init(&b, h->framing, h->length);
            int brc = 0;
            for (;;) {
                size_t before_in = evbuffer_get_length(in), before_out = evbuffer_get_length(body);
                brc = h1_body_step(&b, in, body);
                CHECK(brc >= -1 && brc <= 1);
                size_t got = evbuffer_get_length(body) - before_out;
                CHECK(got <= before_in - evbuffer_get_length(in));
                CHECK(b.total == evbuffer_get_length(body) || h->framing == H1_CLOSE);
                if (h->framing == H1_LENGTH)
                    CHECK(b.total <= h->length && (brc != 1 || b.total == h->length));
                if (brc != 0 || fed == size)
                    break;
                size_t n = size - fed < piece ? size - fed : piece;
                evbuffer_add(in, data + fed, n);
                fed += n;
            }
            if (h->framing == H1_NONE)
                CHECK(brc == 1 && evbuffer_get_length(body) == 0);
        }
        free(buf);
    }
    evbuffer_free(in);
    evbuffer_free(body);
    free(h);
    return 0;
}
