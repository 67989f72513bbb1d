/* libFuzzer target: chunked decoding (lb/h1.c's h1_body_step), by round trip.
 *
 * SPDX-License-Identifier: MIT
 *
 * The input is a payload and a recipe: it is cut into chunks of sizes read from the input,
 * written in the chunked coding with hex sizes in either case, optional leading zeros,
 * extensions and a trailer, followed by bytes that belong to the next message; the encoding
 * is then decoded from pieces of a size read from the input.  The decoder must give back the
 * payload exactly, report the end exactly once, and leave the next message's bytes unread.
 * Then the input itself, raw, is decoded: any outcome but a crash, a read out of bounds or an
 * output larger than the input is a finding.
 */
#include "h1.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) \
    do { \
        if (!(c)) \
            abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void decode_raw(const uint8_t *data, size_t size)
{
    struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
    CHECK(in && out);
    struct h1_body b;
    h1_body_init(&b, H1_CHUNKED, 0);
    size_t fed = 0;
    while (fed < size) {
        size_t n = size - fed < 7 ? size - fed : 7;
        evbuffer_add(in, data + fed, n);
        fed += n;
        int rc = h1_body_step(&b, in, out);
        CHECK(evbuffer_get_length(out) <= fed);
        if (rc != 0)
            break;
    }
    evbuffer_free(in);
    evbuffer_free(out);
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
    struct evbuffer *enc = evbuffer_new(), *out = evbuffer_new(), *in = evbuffer_new();
    CHECK(enc && out && in);
    size_t at = 0;
    for (size_t i = 0; at < plen; i++) {
        size_t n = nsizes ? (size_t)sizes[i % nsizes] + 1 : plen;
        if (n > plen - at)
            n = plen - at;
        evbuffer_add_printf(enc, (style & 1) ? "%s%zX" : "%s%zx", (style & 2) ? "00" : "", n);
        if (style & 4)
            evbuffer_add_printf(enc, ";ext=%zu;q=\"v\"", i);
        evbuffer_add(enc, "\r\n", 2);
        evbuffer_add(enc, payload + at, n);
        evbuffer_add(enc, "\r\n", 2);
        at += n;
    }
    evbuffer_add(enc, "0\r\n", 3);
    if (style & 8)
        evbuffer_add(enc, "X-Trailer: t\r\nX-Other: \"u\"\r\n", 28);
    evbuffer_add(enc, "\r\nNEXT", 6);
    struct h1_body b;
    h1_body_init(&b, H1_CHUNKED, 0);
    int rc = 0;
    while (evbuffer_get_length(enc) > 0) {
        evbuffer_remove_buffer(enc, in, piece);
        rc = h1_body_step(&b, in, out);
        CHECK(rc >= 0);
        if (rc == 1)
            break;
    }
    CHECK(rc == 1);
    CHECK(b.total == plen && evbuffer_get_length(out) == plen);
    if (plen)
        CHECK(memcmp(evbuffer_pullup(out, -1), payload, plen) == 0);
    evbuffer_add_buffer(in, enc);
    CHECK(evbuffer_get_length(in) == 4 && memcmp(evbuffer_pullup(in, -1), "NEXT", 4) == 0);
    CHECK(h1_body_step(&b, in, out) == 1 && evbuffer_get_length(in) == 4);
    evbuffer_free(enc);
    evbuffer_free(out);
    evbuffer_free(in);
    return 0;
}
