/* Unit tests of chring-lb's HTTP/1 parser (lb/h1.c): heads, framing, the head's end found
 * incrementally, chunked decoding.  Each rule of docs/lb.md's security model has its case here
 * as well as its attack through the binary (tests/lb/lb_test.py, lb_hop.py).
 *
 * SPDX-License-Identifier: MIT
 */
#include "h1.h"

#include <criterion/criterion.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct h1_head head;

/* Parses s as a request (or an answer) head and, when that succeeds, its framing. */
static int parse(const char *s, bool request)
{
    static char buf[8192];
    size_t n = strlen(s);
    cr_assert(n < sizeof buf);
    memcpy(buf, s, n);
    int rc = h1_parse_head(buf, n, request, &head);
    if (rc == 0)
        rc = request ? h1_request_framing(&head) : h1_response_framing(&head, false);
    return rc;
}

Test(h1_request, a_plain_get_has_its_parts_and_no_body)
{
    cr_assert_eq(parse("GET /a?b=1 HTTP/1.1\r\nHost: x:80\r\nX-Y:  v w \r\n\r\n", true), 0);
    cr_assert_eq(head.mlen, 3);
    cr_assert(memcmp(head.method, "GET", 3) == 0);
    cr_assert_eq(head.tlen, 6);
    cr_assert_eq(head.minor, 1);
    cr_assert_eq(head.nfields, 2);
    cr_assert_eq(head.fields[1].vlen, 3, "the value's surrounding white space is not part of it");
    cr_assert(memcmp(head.fields[1].value, "v w", 3) == 0);
    cr_assert_eq(head.framing, H1_NONE);
    cr_assert_eq(head.hosts, 1);
}

Test(h1_request, every_framing_rule_of_the_security_model_refuses)
{
    static const struct {
        const char *req;
        int want;
    } cases[] = {
        {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: x\r\nX(y): 1\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
         400},
        {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n", 501},
        {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
        {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400},
        {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 4\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4, 4\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +4\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 04\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1234567890123456789\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: x\r\nX: 1\r\n folded\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: x\r\nX: a\001b\r\n\r\n", 400},
        {"GET / HTTP/1.1\nHost: x\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: x y\r\n\r\n", 400},
        {"GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
        {"GET a HTTP/1.1\r\nHost: x\r\n\r\n", 400},
        {"GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400},
        {"GET / HTTP/1.01\r\nHost: x\r\n\r\n", 400},
        {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 400},
        {"GET /a#f HTTP/1.1\r\nHost: x\r\n\r\n", 400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(parse(cases[i].req, true), cases[i].want, "case %zu: %s", i, cases[i].req);
}

Test(h1_request, accepted_forms_get_their_framing)
{
    cr_assert_eq(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: "
                       "5\r\n\r\n",
                       true),
                 0);
    cr_assert_eq(head.framing, H1_LENGTH);
    cr_assert_eq(head.length, 5);
    cr_assert_eq(parse("PUT / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n", true), 0);
    cr_assert_eq(head.framing, H1_CHUNKED);
    cr_assert_eq(parse("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", true), 0);
    cr_assert_eq(parse("GET http://h:1/p HTTP/1.1\r\nHost: y\r\n\r\n", true), 0);
    cr_assert_eq(parse("GET / HTTP/1.0\r\n\r\n", true), 0, "HTTP/1.0 needs no Host");
    cr_assert_eq(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", true), 0);
    cr_assert_eq(head.framing, H1_NONE);
}

Test(h1_request, more_fields_than_the_limit_are_refused)
{
    size_t n = H1_MAX_FIELDS + 1;
    char *s = malloc(32 + n * 8);
    size_t k = (size_t)sprintf(s, "GET / HTTP/1.1\r\n");
    for (size_t i = 0; i < n; i++)
        k += (size_t)sprintf(s + k, "X%zu: v\r\n", i % 10);
    strcpy(s + k, "\r\n");
    cr_assert_eq(h1_parse_head(s, strlen(s), true, &head), 400);
    free(s);
}

Test(h1_answer, framing_and_close)
{
    cr_assert_eq(parse("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", false), 0);
    cr_assert(head.framing == H1_LENGTH && head.has_length && !head.close);
    cr_assert_eq(parse("HTTP/1.1 200 OK\r\n\r\n", false), 0);
    cr_assert(head.framing == H1_CLOSE && head.close, "no length: until the close");
    cr_assert_eq(parse("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", false), 0);
    cr_assert_eq(head.framing, H1_NONE);
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false), 0);
    cr_assert(head.close, "an HTTP/1.0 answer ends its connection");
    cr_assert_eq(
        parse("HTTP/1.1 200 OK\r\nConnection: x, close\r\nContent-Length: 1\r\n\r\n", false), 0);
    cr_assert(head.close);
    cr_assert_eq(parse("HTTP/1.1 101 Switching Protocols\r\n\r\n", false), 502);
    cr_assert_eq(parse("HTTP/1.1 2000 OK\r\n\r\n", false), 502);
    cr_assert_eq(parse("HTTP/1.1 099 Low\r\n\r\n", false), 502);
    cr_assert_eq(parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", false),
                 502);
    cr_assert_eq(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false), 502);
    cr_assert_eq(parse("HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\n", false), 502);
}

Test(h1_head_end, found_incrementally_and_bare_lf_refused)
{
    const char *msg = "GET / HTTP/1.1\r\nHost: x\r\n\r\nrest";
    struct evbuffer *b = evbuffer_new();
    size_t scanned = 0;
    ssize_t end = -1;
    for (size_t i = 0; msg[i] && end < 0; i++) {
        evbuffer_add(b, msg + i, 1);
        end = h1_find_head_end(b, &scanned);
        cr_assert(end == -1 || end == (ssize_t)strlen(msg) - 4);
    }
    cr_assert_eq(end, (ssize_t)strlen(msg) - 4);
    evbuffer_free(b);
    b = evbuffer_new();
    scanned = 0;
    evbuffer_add(b, "GET / HTTP/1.1\nHost: x\r\n\r\n", 26);
    cr_assert_eq(h1_find_head_end(b, &scanned), -2);
    evbuffer_free(b);
}

Test(h1_tokens, listed_tokens_are_whole_case_insensitive_words)
{
    cr_assert(h1_token_listed("keep-alive, Close", 17, "close"));
    cr_assert(!h1_token_listed("closed, xclose", 14, "close"));
    cr_assert(!h1_token_listed("", 0, "close"));
}

/* Decodes enc (as one piece or byte by byte) into out; returns the last h1_body_step result. */
static int decode(const char *enc, size_t len, bool bytewise, struct evbuffer *in,
                  struct evbuffer *out)
{
    struct h1_body b;
    h1_body_init(&b, H1_CHUNKED, 0);
    int rc = 0;
    for (size_t i = 0; i < len; i += bytewise ? 1 : len) {
        evbuffer_add(in, enc + i, bytewise ? 1 : len);
        rc = h1_body_step(&b, in, out);
        if (rc != 0)
            break;
    }
    return rc;
}

Test(h1_chunked, decodes_sizes_extensions_and_trailers_and_stops_at_the_end)
{
    static const char enc[] = "5;a=1\r\nhello\r\nA\r\n 123456789\r\n0\r\nX-T: v\r\n\r\nNEXT";
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
        cr_assert_eq(decode(enc, sizeof enc - 1, bytewise, in, out), 1);
        cr_assert_eq(evbuffer_get_length(out), 15);
        cr_assert(memcmp(evbuffer_pullup(out, -1), "hello 123456789", 15) == 0);
        if (!bytewise) {
            cr_assert_eq(evbuffer_get_length(in), 4, "the next message stays unread");
        }
        evbuffer_free(in);
        evbuffer_free(out);
    }
}

Test(h1_chunked, malformed_sizes_and_crlf_are_errors)
{
    static const char *bad[] = {
        "0x5\r\nhello\r\n0\r\n\r\n", "+5\r\nhello\r\n0\r\n\r\n", "5\r\nhelloX0\r\n\r\n",    "\r\n",
        "5 x\r\nhello\r\n",          "10000000000000000\r\n",    "0\r\nbad trailer\r\n\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
        cr_assert_eq(decode(bad[i], strlen(bad[i]), false, in, out), -1, "case %zu", i);
        evbuffer_free(in);
        evbuffer_free(out);
    }
}

Test(h1_body, a_length_body_ends_exactly_at_its_length)
{
    struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
    struct h1_body b;
    h1_body_init(&b, H1_LENGTH, 5);
    evbuffer_add(in, "hel", 3);
    cr_assert_eq(h1_body_step(&b, in, out), 0);
    evbuffer_add(in, "loGET", 5);
    cr_assert_eq(h1_body_step(&b, in, out), 1);
    cr_assert_eq(evbuffer_get_length(out), 5);
    cr_assert_eq(evbuffer_get_length(in), 3);
    evbuffer_free(in);
    evbuffer_free(out);
}
