/* libFuzzer target: chunked decoding (lb/h1.c's h1_body_step), by round trip.
 *
 * SPDX-License-Identifier: MIT
 *
 * The input is a payload and a recipe: it is cut into chunks of sizes read from the input,
 * written in the chunked coding with hex sizes in either case, optional leading zeros,
 * extensions and a trailer, followed by bytes that belong to the next message; the encoding
 * is then decoded from pieces of a size read from the input.  The decoder must give back the
 * payload exactly, report the end exactly once, and leave the next message's bytes unread.
 * Then the input itself, raw, is decoded in pieces of 7 bytes and in one piece: the two must
 * agree (result, data, where they stopped), and no data span may lie outside its piece.
 */
#include "h1.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) \
    do { \
        if (!(c)) \
            abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A growing byte string. */
struct bytes {
    char *p;
    size_t len, cap;
};

static void put(struct bytes *s, const void *src, size_t n)
{
    if (n == 0)
        return;
    if (s->len + n > s->cap) {
        s->cap = (s->len + n) * 2 + 64;
        s->p = realloc(s->p, s->cap);
        CHECK(s->p);
    }
    memcpy(s->p + s->len, src, n);
    s->len += n;
}

static void putf(struct bytes *s, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    CHECK(n > 0 && (size_t)n < sizeof tmp);
    put(s, tmp, (size_t)n);
}

/* Decodes in[0..len) arriving in pieces of `piece` bytes into out (its data appended); *stop is
 * where the decoder stopped.  Returns its last result. */
static int decode(const char *in, size_t len, size_t piece, struct bytes *out, size_t *stop)
{
    struct h1_body b;
    h1_body_init(&b, H1_CHUNKED, 0);
    size_t at = 0, avail = len < piece ? len : piece;
    int rc;
    for (;;) {
        size_t used;
        struct h1_span d;
        rc = h1_body_step(&b, in + at, avail - at, &used, &d);
        CHECK(rc == 1 || rc == 0 || rc == -EBADMSG);
        CHECK(used <= avail - at);
        if (rc >= 0) {
            CHECK(d.off + d.len <= used);
            put(out, in + at + d.off, d.len);
        }
        CHECK(b.total == out->len);
        at += used;
        if (rc == 1) { /* ended: it stays so, and takes nothing more */
            size_t more;
            CHECK(h1_body_step(&b, in + at, len - at, &more, &d) == 1 && more == 0 && d.len == 0);
        }
        if (rc != 0)
            break;
        if (at < avail)
            continue;
        if (avail == len)
            break;
        avail = len - avail < piece ? len : avail + piece;
    }
    *stop = at;
    return rc;
}

static void decode_raw(const uint8_t *data, size_t size)
{
    const char *in = size ? (const char *)data : "";
    struct bytes a = {0}, b = {0};
    size_t stop_a, stop_b;
    int rc_a = decode(in, size, 7, &a, &stop_a);
    int rc_b = decode(in, size, size ? size : 1, &b, &stop_b);
    CHECK(a.len <= size);
    CHECK(rc_a == rc_b && stop_a == stop_b && a.len == b.len);
    CHECK(a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
    free(a.p);
    free(b.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode_raw(data, size);
    if (size < 3)
        return 0;
    size_t piece = (size_t)data[0] % 64 + 1;
    unsigned style = data[1];
    size_t nsizes = (size_t)data[2] % 16;
    data += 3;
    size -= 3;
    if (size < nsizes)
        return 0;
    const uint8_t *sizes = data;
    const uint8_t *payload = data + nsizes;
    size_t plen = size - nsizes;
    struct bytes enc = {0}, out = {0};
    size_t at = 0;
    for (size_t i = 0; at < plen; i++) {
        size_t n = nsizes ? (size_t)sizes[i % nsizes] + 1 : plen;
        if (n > plen - at)
            n = plen - at;
        putf(&enc, (style & 1) ? "%s%zX" : "%s%zx", (style & 2) ? "00" : "", n);
        if (style & 4)
            putf(&enc, ";ext=%zu;q=\"v\"", i);
        put(&enc, "\r\n", 2);
        put(&enc, payload + at, n);
        put(&enc, "\r\n", 2);
        at += n;
    }
    put(&enc, "0\r\n", 3);
    if (style & 8)
        put(&enc, "X-Trailer: t\r\nX-Other: \"u\"\r\n", 28);
    put(&enc, "\r\nNEXT", 6);
    size_t stop;
    int rc = decode(enc.p, enc.len, piece, &out, &stop);
    CHECK(rc == 1);
    CHECK(out.len == plen);
    CHECK(plen == 0 || memcmp(out.p, payload, plen) == 0);
    CHECK(stop == enc.len - 4 && memcmp(enc.p + stop, "NEXT", 4) == 0);
    free(enc.p);
    free(out.p);
    return 0;
}
