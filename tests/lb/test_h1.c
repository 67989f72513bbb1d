/* Unit tests of chring-lb's HTTP/1 parser (lb/h1.c): heads, framing, the authority check, the
 * head's end found incrementally, bodies decoded from bytes (the same however they are cut),
 * and the evbuffer glue (lb/h1_evbuffer.c).  Each rule of docs/lb.md's security model has its
 * case here as well as its attack through the binary (tests/lb/lb_test.py, lb_hop.py).
 *
 * SPDX-License-Identifier: MIT
 */
#include "h1.h"
#include "h1_evbuffer.h"

#include <criterion/criterion.h>
#include <errno.h>
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

/* Finds the head's end of msg[0..len) fed in pieces of `piece` bytes.  *at: the bytes fed. */
static ssize_t head_end_in_pieces(const char *msg, size_t len, size_t piece, size_t *at)
{
    struct h1_head_scan s = {0};
    ssize_t end = 0;
    size_t fed = 0;
    while (fed < len && end == 0) {
        size_t n = len - fed < piece ? len - fed : piece;
        end = h1_head_end(&s, msg + fed, n);
        cr_assert(end != 0 || s.len == fed + n, "every byte looked at is remembered");
        fed += n;
    }
    *at = fed;
    return end;
}

Test(h1_head_end, found_however_the_head_is_cut_and_bare_lf_refused)
{
    static const char msg[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\nrest\r\n\r\n";
    size_t len = sizeof msg - 1, head = len - 8, fed;
    for (size_t piece = 1; piece <= len; piece++)
        cr_assert_eq(head_end_in_pieces(msg, len, piece, &fed), (ssize_t)head, "piece %zu", piece);
    /* an LF not after a CR, wherever it is and however it arrives */
    static const char *bare[] = {"\nGET / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\nHost: x\r\n\r\n",
                                 "GET / HTTP/1.1\r\nHost: x\r\n\n",
                                 "GET / HTTP/1.1\r\nA: b\r\r\n\n"};
    for (size_t i = 0; i < sizeof bare / sizeof bare[0]; i++)
        for (size_t piece = 1; piece <= 3; piece++)
            cr_assert_eq(head_end_in_pieces(bare[i], strlen(bare[i]), piece, &fed), -EBADMSG,
                         "case %zu, piece %zu", i, piece);
    struct h1_head_scan s = {0};
    cr_assert_eq(h1_head_end(&s, "GET / HTTP/1.1\r\n", 16), 0, "not there yet");
    cr_assert_eq(s.len, 16);
    cr_assert_eq(h1_head_end(NULL, "x", 1), -EINVAL);
    cr_assert_eq(h1_head_end(&s, NULL, 1), -EINVAL);
}

Test(h1_head_end, an_evbuffer_of_many_chains_is_read_in_place)
{
    static const char msg[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET";
    size_t len = sizeof msg - 1;
    struct evbuffer *b = evbuffer_new();
    struct h1_head_scan s = {0};
    ssize_t end = 0;
    /* one chain per byte (evbuffer_add_reference): the CRLF CRLF crosses chains */
    for (size_t i = 0; i < len && end == 0; i++) {
        evbuffer_add_reference(b, msg + i, 1, NULL, NULL);
        end = h1_evbuffer_head_end(b, &s);
    }
    cr_assert_eq(end, (ssize_t)len - 3);
    cr_assert_eq(s.len, 0, "zeroed for the next head");
    cr_assert_eq(evbuffer_get_length(b), len - 3, "nothing removed");
    evbuffer_free(b);
    b = evbuffer_new();
    s = (struct h1_head_scan){0};
    evbuffer_add_reference(b, "GET / HTTP/1.1\r", 15, NULL, NULL);
    cr_assert_eq(h1_evbuffer_head_end(b, &s), 0);
    evbuffer_add_reference(b, "\nHost: x\n\r\n", 11, NULL, NULL);
    cr_assert_eq(h1_evbuffer_head_end(b, &s), -EBADMSG);
    evbuffer_free(b);
}

Test(h1_authority, one_character_set_for_host_and_absolute_form)
{
    cr_assert(h1_authority_ok("example.com:8080", 16));
    cr_assert(h1_authority_ok("[::1]:80", 8));
    cr_assert(h1_authority_ok("a-b_c~d%20!$&'()*+,;=", 21));
    cr_assert(h1_authority_ok("", 0), "an empty Host is allowed; the caller decides");
    static const char *bad[] = {"a b", "a/b", "a?b", "a#b", "a@b", "a\"b", "a<b", "a\\b", "é"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert(!h1_authority_ok(bad[i], strlen(bad[i])), "case %zu: %s", i, bad[i]);
    cr_assert(!h1_authority_ok("a\0b", 3), "a NUL is no authority byte");
    cr_assert(!h1_authority_ok(NULL, 1));
    /* the Host rule of the request framing uses it */
    cr_assert_eq(parse("GET / HTTP/1.1\r\nHost: a@b\r\n\r\n", true), 400);
    cr_assert_eq(parse("GET / HTTP/1.1\r\nHost: [::1]:8\r\n\r\n", true), 0);
}

Test(h1_tokens, listed_tokens_are_whole_case_insensitive_words)
{
    cr_assert(h1_token_listed("keep-alive, Close", 17, "close"));
    cr_assert(!h1_token_listed("closed, xclose", 14, "close"));
    cr_assert(!h1_token_listed("", 0, "close"));
}

/* ------------------------------------------------------------------------------------------ */
/* bodies on bytes                                                                             */

struct decoded {
    int rc;
    size_t stop; /* where the decoder stopped */
    char data[65536];
    size_t len;
};

/* Decodes enc[0..len) of that framing, fed in pieces of `piece` bytes (each piece is stepped
 * until taken whole, as a caller does), into *d. */
static void decode_bytes(enum h1_framing framing, uint64_t length, const char *enc, size_t len,
                         size_t piece, struct decoded *d)
{
    struct h1_body b;
    h1_body_init(&b, framing, length);
    size_t at = 0, avail = len < piece ? len : piece;
    d->len = 0;
    for (;;) {
        size_t used;
        struct h1_span span;
        d->rc = h1_body_step(&b, enc + at, avail - at, &used, &span);
        cr_assert(used <= avail - at);
        if (d->rc >= 0) {
            cr_assert(span.off + span.len <= used, "the data lies in what was used");
            cr_assert(d->len + span.len <= sizeof d->data);
            memcpy(d->data + d->len, enc + at + span.off, span.len);
            d->len += span.len;
        }
        cr_assert_eq(b.total, d->len);
        at += used;
        if (d->rc != 0)
            break;
        if (at < avail)
            continue;
        if (avail == len)
            break;
        avail = len - avail < piece ? len : avail + piece;
    }
    d->stop = at;
}

static struct decoded whole, bytewise;

/* Decodes enc whole and one byte at a time: the same result, data and stop.  Returns the
 * result. */
static int decode_both(enum h1_framing framing, uint64_t length, const char *enc, size_t len)
{
    decode_bytes(framing, length, enc, len, len ? len : 1, &whole);
    decode_bytes(framing, length, enc, len, 1, &bytewise);
    cr_assert_eq(bytewise.rc, whole.rc, "result: %d whole, %d byte by byte", whole.rc, bytewise.rc);
    cr_assert_eq(bytewise.stop, whole.stop, "stop: %zu whole, %zu byte by byte", whole.stop,
                 bytewise.stop);
    cr_assert_eq(bytewise.len, whole.len);
    cr_assert(memcmp(bytewise.data, whole.data, whole.len) == 0);
    return whole.rc;
}

struct body_vector {
    enum h1_framing framing;
    uint64_t length;
    const char *enc;
    int rc;           /* 1: ended, 0: more needed, -EBADMSG */
    const char *data; /* the decoded data (rc >= 0) */
    size_t stop;      /* where it stops: after the body (1), at the bad byte (-EBADMSG) */
};

#define STOP_ALL ((size_t)-1) /* stops at the end of enc */

static const struct body_vector body_vectors[] = {
    {H1_CHUNKED, 0, "5;a=1\r\nhello\r\nA\r\n 123456789\r\n0\r\nX-T: v\r\n\r\nNEXT", 1,
     "hello 123456789", 42},
    {H1_CHUNKED, 0, "0\r\n\r\n", 1, "", 5},
    {H1_CHUNKED, 0, "1 \t;x=\"y z\"\r\na\r\n0\r\n\r\n", 1, "a", 21},
    {H1_CHUNKED, 0, "00000000000000f\r\n0123456789abcde\r\n0\r\n\r\nX", 1, "0123456789abcde", 39},
    {H1_CHUNKED, 0, "3\r\nabc\r\n0\r\nA: 1\r\nB-c:\r\nd:  e f \r\n\r\n", 1, "abc", 35},
    {H1_CHUNKED, 0, "3\r\nabc\r\n0\r\nA: 1\r\n", 0, "abc", STOP_ALL},
    {H1_CHUNKED, 0, "3\r\nab", 0, "ab", STOP_ALL},
    {H1_CHUNKED, 0, "0x5\r\nhello\r\n0\r\n\r\n", -EBADMSG, NULL, 1},
    {H1_CHUNKED, 0, "+5\r\nhello\r\n0\r\n\r\n", -EBADMSG, NULL, 0},
    {H1_CHUNKED, 0, "5\r\nhelloX0\r\n\r\n", -EBADMSG, NULL, 8},
    {H1_CHUNKED, 0, "5\r\nhello\rX", -EBADMSG, NULL, 9},
    {H1_CHUNKED, 0, "\r\n", -EBADMSG, NULL, 0},
    {H1_CHUNKED, 0, "5 x\r\nhello\r\n", -EBADMSG, NULL, 2},
    {H1_CHUNKED, 0, "5\nhello\r\n", -EBADMSG, NULL, 1},
    {H1_CHUNKED, 0, "5\r\rhello\r\n", -EBADMSG, NULL, 2},
    {H1_CHUNKED, 0, "5;a\001\r\nhello\r\n", -EBADMSG, NULL, 3},
    {H1_CHUNKED, 0, "10000000000000000\r\n", -EBADMSG, NULL, 15},
    {H1_CHUNKED, 0, "0\r\nbad trailer\r\n\r\n", -EBADMSG, NULL, 6},
    {H1_CHUNKED, 0, "0\r\nnocolon\r\n\r\n", -EBADMSG, NULL, 10},
    {H1_CHUNKED, 0, "0\r\n folded: x\r\n\r\n", -EBADMSG, NULL, 3},
    {H1_CHUNKED, 0, "0\r\nA: \001\r\n\r\n", -EBADMSG, NULL, 6},
    {H1_CHUNKED, 0, "0\r\n\rX", -EBADMSG, NULL, 4},
    {H1_LENGTH, 5, "helloGET", 1, "hello", 5},
    {H1_LENGTH, 5, "hel", 0, "hel", STOP_ALL},
    {H1_NONE, 0, "GET", 1, "", 0},
    {H1_CLOSE, 0, "any\r\nbytes\0", 0, "any\r\nbytes", STOP_ALL},
};

Test(h1_body, every_vector_decodes_the_same_whole_and_byte_by_byte)
{
    for (size_t i = 0; i < sizeof body_vectors / sizeof body_vectors[0]; i++) {
        const struct body_vector *v = &body_vectors[i];
        size_t len = strlen(v->enc);
        int rc = decode_both(v->framing, v->length, v->enc, len);
        cr_assert_eq(rc, v->rc, "vector %zu: %d, not %d", i, rc, v->rc);
        cr_assert_eq(whole.stop, v->stop == STOP_ALL ? len : v->stop, "vector %zu: stops at %zu", i,
                     whole.stop);
        if (v->data) {
            cr_assert_eq(whole.len, strlen(v->data), "vector %zu", i);
            cr_assert(memcmp(whole.data, v->data, whole.len) == 0, "vector %zu", i);
        }
        /* and in every cut into two pieces */
        for (size_t cut = 1; cut < len; cut++) {
            struct decoded two;
            decode_bytes(v->framing, v->length, v->enc, len, cut, &two);
            cr_assert(two.rc == whole.rc && two.stop == whole.stop && two.len == whole.len,
                      "vector %zu cut at %zu", i, cut);
        }
    }
}

/* A chunk-size line of chunk extensions, n bytes long before its CRLF, for a chunk "ab". */
static size_t long_size_line(char *buf, size_t n)
{
    buf[0] = '2';
    buf[1] = ';';
    memset(buf + 2, 'e', n - 2);
    memcpy(buf + n, "\r\nab\r\n0\r\n\r\n", 11);
    return n + 11;
}

Test(h1_body, lines_up_to_the_limit_pass_however_they_are_cut_and_longer_ones_fail)
{
    static char enc[H1_MAX_LINE + 64];
    /* exactly H1_MAX_LINE bytes: accepted, also when its CR comes in a piece of its own (the
     * evbuffer decoder counted the waiting CR against the limit and refused it then) */
    size_t len = long_size_line(enc, H1_MAX_LINE);
    cr_assert_eq(decode_both(H1_CHUNKED, 0, enc, len), 1);
    cr_assert_eq(whole.len, 2);
    len = long_size_line(enc, H1_MAX_LINE + 1);
    cr_assert_eq(decode_both(H1_CHUNKED, 0, enc, len), -EBADMSG);
    cr_assert_eq(whole.stop, H1_MAX_LINE, "refused at the byte past the limit");
    /* a trailer section: at most H1_MAX_TRAILER bytes, CRLFs counted */
    static char trailer[H1_MAX_TRAILER + 256];
    size_t k = (size_t)sprintf(trailer, "0\r\n");
    while (k - 3 + 10 <= H1_MAX_TRAILER)
        k += (size_t)sprintf(trailer + k, "X: 12345\r\n"); /* 10 bytes each */
    cr_assert_eq(k - 3, H1_MAX_TRAILER - 4);
    strcpy(trailer + k, "A:\r\n\r\n"); /* exactly H1_MAX_TRAILER, then the empty line */
    cr_assert_eq(decode_both(H1_CHUNKED, 0, trailer, k + 6), 1);
    strcpy(trailer + k, "AB:\r\n\r\n"); /* one byte more */
    cr_assert_eq(decode_both(H1_CHUNKED, 0, trailer, k + 7), -EBADMSG);
    cr_assert_eq(whole.stop, 3 + H1_MAX_TRAILER, "refused at the byte past the limit");
}

Test(h1_body, arguments_are_checked)
{
    struct h1_body b;
    size_t used;
    struct h1_span d;
    h1_body_init(&b, H1_CHUNKED, 0);
    cr_assert_eq(h1_body_step(NULL, "0", 1, &used, &d), -EINVAL);
    cr_assert_eq(h1_body_step(&b, NULL, 1, &used, &d), -EINVAL);
    cr_assert_eq(h1_body_step(&b, "0", 1, NULL, &d), -EINVAL);
    cr_assert_eq(h1_body_step(&b, "0", 1, &used, NULL), -EINVAL);
    cr_assert_eq(h1_body_step(&b, NULL, 0, &used, &d), 0, "no bytes: more needed");
    h1_body_init(NULL, H1_NONE, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* bodies through evbuffers (h1_evbuffer.c)                                                    */

/* Decodes enc through h1_evbuffer_body_step, the bytes added as one chain each `piece` bytes
 * (evbuffer_add_reference) and stepped after each; returns the last result. */
static int decode_evbuffer(const char *enc, size_t len, size_t piece, struct evbuffer *in,
                           struct evbuffer *out)
{
    struct h1_body b;
    h1_body_init(&b, H1_CHUNKED, 0);
    int rc = 0;
    for (size_t i = 0; i < len; i += piece) {
        evbuffer_add_reference(in, enc + i, len - i < piece ? len - i : piece, NULL, NULL);
        rc = h1_evbuffer_body_step(&b, in, out);
        if (rc != 0)
            break;
    }
    return rc;
}

Test(h1_evbuffer, a_chunked_body_across_chains_is_moved_and_the_rest_left)
{
    static const char enc[] = "5;a=1\r\nhello\r\nA\r\n 123456789\r\n0\r\nX-T: v\r\n\r\nNEXT";
    for (size_t piece = 1; piece < sizeof enc; piece++) {
        struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
        /* several chains at once, too: the piece's bytes then its successor's */
        cr_assert_eq(decode_evbuffer(enc, sizeof enc - 1, piece, in, out), 1, "piece %zu", piece);
        cr_assert_eq(evbuffer_get_length(out), 15);
        cr_assert(memcmp(evbuffer_pullup(out, -1), "hello 123456789", 15) == 0);
        size_t rest = evbuffer_get_length(in);
        cr_assert(rest <= 4 && (rest == 0 || memcmp(evbuffer_pullup(in, -1), "NEXT", rest) == 0),
                  "piece %zu: what follows stays", piece);
        evbuffer_free(in);
        evbuffer_free(out);
    }
}

Test(h1_evbuffer, many_chains_at_once_and_errors)
{
    static const char enc[] = "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\nGET";
    struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
    for (size_t i = 0; i < sizeof enc - 1; i++)
        evbuffer_add_reference(in, enc + i, 1, NULL, NULL);
    struct h1_body b;
    h1_body_init(&b, H1_CHUNKED, 0);
    cr_assert_eq(h1_evbuffer_body_step(&b, in, out), 1);
    cr_assert_eq(evbuffer_get_length(out), 7);
    cr_assert(memcmp(evbuffer_pullup(out, -1), "abcdefg", 7) == 0);
    cr_assert_eq(evbuffer_get_length(in), 3);
    cr_assert_eq(h1_evbuffer_body_step(&b, in, out), 1, "ended stays ended");
    cr_assert_eq(evbuffer_get_length(in), 3);
    cr_assert_eq(h1_evbuffer_body_step(&b, in, in), -EINVAL);
    evbuffer_free(in);
    evbuffer_free(out);
    in = evbuffer_new();
    out = evbuffer_new();
    h1_body_init(&b, H1_CHUNKED, 0);
    evbuffer_add(in, "3\r\nabcX", 7);
    cr_assert_eq(h1_evbuffer_body_step(&b, in, out), -EBADMSG);
    cr_assert_eq(evbuffer_get_length(out), 3, "the data before the error was moved");
    evbuffer_free(in);
    evbuffer_free(out);
}

Test(h1_evbuffer, a_length_body_ends_exactly_at_its_length)
{
    struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
    struct h1_body b;
    h1_body_init(&b, H1_LENGTH, 5);
    evbuffer_add(in, "hel", 3);
    cr_assert_eq(h1_evbuffer_body_step(&b, in, out), 0);
    cr_assert_eq(evbuffer_get_length(in), 0);
    evbuffer_add(in, "loGET", 5);
    cr_assert_eq(h1_evbuffer_body_step(&b, in, out), 1);
    cr_assert_eq(evbuffer_get_length(out), 5);
    cr_assert_eq(evbuffer_get_length(in), 3);
    evbuffer_free(in);
    evbuffer_free(out);
}
