/* Unit tests of what reads the etcd feed's bytes (lb/etcd_read.c) and what quotes outside bytes
 * (lb/text.c).  Each test is named after what it proves.
 *
 * SPDX-License-Identifier: MIT
 */
#include "etcd_read.h"
#include "text.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "/chring/pool/"

static const char *b64s(const char *s)
{
    static char out[16][512]; /* several in one call's arguments */
    static int k;
    k = (k + 1) % 16;
    lb_b64_encode((const unsigned char *)s, strlen(s), out[k]);
    return out[k];
}

/* ---- base64 -------------------------------------------------------------------------------- */

Test(b64, encodes_and_decodes_the_rfc_4648_vectors)
{
    const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char enc[32];
        unsigned char dec[32];
        cr_assert_eq(lb_b64_encode((const unsigned char *)plain[i], strlen(plain[i]), enc),
                     strlen(coded[i]));
        cr_assert_str_eq(enc, coded[i]);
        long n = lb_b64_decode(coded[i], strlen(coded[i]), dec);
        cr_assert_eq(n, (long)strlen(plain[i]));
        cr_assert(memcmp(dec, plain[i], (size_t)n) == 0);
    }
}

Test(b64, refuses_anything_but_canonical_padded_base64)
{
    unsigned char out[16];
    const char *bad[] = {"Zg",   "Zg=",    "Zg===", "Z===", "Zm=v", "Zm9v=",   "Zh==",
                         "Zm9=", "Zm9v\n", "Zm 9",  "Zm-_", "====", "Zg==Zg=="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(lb_b64_decode(bad[i], strlen(bad[i]), out), -1, "accepted '%s'", bad[i]);
    cr_assert_eq(lb_b64_decode("AA==", 4, out), 1);
    cr_assert_eq(out[0], 0);
}

Test(b64, round_trips_every_byte_string_of_up_to_three_bytes)
{
    unsigned char in[3], back[3];
    char enc[8];
    for (unsigned len = 0; len <= 3; len++)
        for (unsigned v = 0; v < (1u << (8 * (len < 3 ? len : 2))); v++) {
            in[0] = (unsigned char)v, in[1] = (unsigned char)(v >> 8),
            in[2] = (unsigned char)(v * 7);
            size_t n = lb_b64_encode(in, len, enc);
            cr_assert_eq(lb_b64_decode(enc, n, back), (long)len);
            cr_assert(memcmp(in, back, len) == 0);
        }
}

/* ---- range and watch ----------------------------------------------------------------------- */

Test(etcd_read, range_gives_every_key_under_the_prefix_with_its_weight)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"header\":{\"revision\":\"42\"},\"kvs\":[{\"key\":\"%s\"},{\"key\":\"%s\","
             "\"value\":\"%s\"},{\"key\":\"%s\",\"value\":\"%s\"}],\"count\":\"3\"}",
             b64s(PREFIX "10.0.0.1:80"), b64s(PREFIX "10.0.0.2:80"), b64s("3"),
             b64s(PREFIX "[::1]:8080"), b64s("10000"));
    struct lb_etcd_msg m;
    const char *why = NULL;
    cr_assert_eq(lb_etcd_read_range(text, strlen(text), PREFIX, &m, &why), 0, "%s", why);
    cr_assert_eq(m.revision, 42);
    cr_assert_eq(m.n, 3);
    cr_assert_eq(m.bad, 0);
    cr_assert_str_eq(m.events[0].name, "10.0.0.1:80");
    cr_assert_eq(m.events[0].weight, 1);
    cr_assert_eq(m.events[1].weight, 3);
    cr_assert_str_eq(m.events[2].name, "[::1]:8080");
    cr_assert_eq(m.events[2].weight, 10000);
    lb_etcd_msg_free(&m);
}

Test(etcd_read, bad_entries_are_counted_described_quoted_and_skipped)
{
    char text[4096];
    snprintf(
        text, sizeof text,
        "{\"header\":{\"revision\":\"5\"},\"kvs\":[{\"key\":\"%s\"},{\"key\":\"%s\","
        "\"value\":\"%s\"},{\"key\":\"%s\",\"value\":\"%s\"},{\"key\":\"!!\"},{\"key\":\"%s\"},"
        "{\"key\":\"%s\"},{\"key\":\"%s\"}]}",
        b64s(PREFIX "no-port"), b64s(PREFIX "a:1"), b64s("0"), b64s(PREFIX "a:2"), b64s("10001"),
        b64s("/other/a:1"), b64s(PREFIX "\x1b[31m:1"), b64s(PREFIX "ok:1"));
    struct lb_etcd_msg m;
    const char *why = NULL;
    cr_assert_eq(lb_etcd_read_range(text, strlen(text), PREFIX, &m, &why), 0);
    cr_assert_eq(m.n, 1);
    cr_assert_str_eq(m.events[0].name, "ok:1");
    cr_assert_eq(m.bad, 6);
    cr_assert(strstr(m.bad_why[0], "not HOST:PORT"));
    cr_assert(strstr(m.bad_why[1], "not a weight"));
    for (int i = 0; i < LB_ETCD_BAD_SHOWN; i++)
        for (const char *c = m.bad_why[i]; *c; c++)
            cr_assert((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f);
    lb_etcd_msg_free(&m);
}

Test(etcd_read, a_nul_in_a_key_is_a_bad_entry_not_a_shorter_name)
{
    char key[64], text[512];
    const char raw[] = PREFIX "a:1\0junk";
    lb_b64_encode((const unsigned char *)raw, sizeof raw - 1, key);
    snprintf(text, sizeof text, "{\"header\":{\"revision\":\"5\"},\"kvs\":[{\"key\":\"%s\"}]}",
             key);
    struct lb_etcd_msg m;
    const char *why;
    cr_assert_eq(lb_etcd_read_range(text, strlen(text), PREFIX, &m, &why), 0);
    cr_assert_eq(m.n, 0);
    cr_assert_eq(m.bad, 1);
    cr_assert(strstr(m.bad_why[0], "a NUL in the name"));
    lb_etcd_msg_free(&m);
}

Test(etcd_read, a_range_without_a_revision_or_not_json_is_an_error)
{
    struct lb_etcd_msg m;
    const char *why = NULL;
    cr_assert_eq(lb_etcd_read_range("{\"kvs\":[]}", 10, PREFIX, &m, &why), -1);
    cr_assert_str_eq(why, "an answer without a revision");
    cr_assert_eq(lb_etcd_read_range("{\"header\":", 10, PREFIX, &m, &why), -1);
    cr_assert_str_eq(why, "not JSON");
    const char *dup = "{\"header\":{\"revision\":\"1\"},\"header\":{\"revision\":\"2\"}}";
    cr_assert_eq(lb_etcd_read_range(dup, strlen(dup), PREFIX, &m, &why), -1);
    const char *big = "{\"header\":{\"revision\":\"18446744073709551616\"}}";
    cr_assert_eq(lb_etcd_read_range(big, strlen(big), PREFIX, &m, &why), -1);
}

Test(etcd_read, watch_messages_give_created_canceled_and_events_in_order)
{
    struct lb_etcd_msg m;
    const char *why = NULL;
    const char *created = "{\"result\":{\"header\":{\"revision\":\"8\"},\"created\":true}}";
    cr_assert_eq(lb_etcd_read_watch(created, strlen(created), PREFIX, &m, &why), 0);
    cr_assert(m.created && !m.canceled && m.n == 0 && m.revision == 8);
    lb_etcd_msg_free(&m);
    const char *cancel = "{\"result\":{\"header\":{\"revision\":\"20\"},\"canceled\":true,"
                         "\"compact_revision\":\"15\"}}";
    cr_assert_eq(lb_etcd_read_watch(cancel, strlen(cancel), PREFIX, &m, &why), 0);
    cr_assert(m.canceled && m.compact_revision == 15);
    lb_etcd_msg_free(&m);
    char text[1024];
    snprintf(text, sizeof text,
             "{\"result\":{\"header\":{\"revision\":\"12\"},\"events\":[{\"kv\":{\"key\":\"%s\","
             "\"value\":\"%s\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":\"%s\"}}]}}",
             b64s(PREFIX "10.0.0.3:80"), b64s("2"), b64s(PREFIX "10.0.0.1:80"));
    cr_assert_eq(lb_etcd_read_watch(text, strlen(text), PREFIX, &m, &why), 0);
    cr_assert_eq(m.n, 2);
    cr_assert_eq(m.events[0].weight, 2);
    cr_assert_str_eq(m.events[1].name, "10.0.0.1:80");
    cr_assert_eq(m.events[1].weight, 0);
    lb_etcd_msg_free(&m);
    const char *err = "{\"error\":{\"grpc_code\":14}}";
    cr_assert_eq(lb_etcd_read_watch(err, strlen(err), PREFIX, &m, &why), -1);
    cr_assert_str_eq(why, "etcd answered an error");
}

Test(etcd_read, json_that_needs_more_memory_than_the_budget_is_refused)
{
    size_t n = 200000;
    char *text = malloc(3 * n + 64);
    cr_assert(text);
    size_t k = (size_t)sprintf(text, "{\"result\":{\"events\":[");
    for (size_t i = 0; i < n; i++)
        k += (size_t)sprintf(text + k, "[],");
    k += (size_t)sprintf(text + k, "[]]}}");
    struct lb_etcd_msg m;
    const char *why = NULL;
    lb_etcd_read_budget((size_t)1 << 20);
    cr_assert_eq(lb_etcd_read_watch(text, k, PREFIX, &m, &why), -1);
    cr_assert(strstr(why, "too large"), "%s", why);
    lb_etcd_read_budget((size_t)256 << 20);
    cr_assert_eq(lb_etcd_read_watch(text, k, PREFIX, &m, &why), 0);
    cr_assert_eq(m.bad, n + 1);
    lb_etcd_msg_free(&m);
    free(text);
}

/* ---- quoting ------------------------------------------------------------------------------- */

Test(text, a_log_quote_shows_control_bytes_escapes_and_non_ascii_as_hex)
{
    char out[128];
    const char in[] = "a\nb\x1b[31m\\\xff";
    lb_text_quote(out, sizeof out, in, sizeof in - 1);
    cr_assert_str_eq(out, "a\\x0ab\\x1b[31m\\x5c\\xff");
    char small[12];
    lb_text_quote(small, sizeof small, "abcdefghijklmnop", 16);
    cr_assert_str_eq(small, "abcdefgh...");
}

Test(text, json_replaces_invalid_utf8_and_escapes_invisible_characters)
{
    char out[256];
    const char in[] =
        "ok \xc3\xa9 \xe2\x80\xae \xe2\x80\x8b \xef\xbb\xbf \xff \xc0\xaf \xed\xa0\x80 "
        "\xf4\x90\x80\x80 \xf0\x9f\x98\x80 \"\\\x01";
    lb_text_json(out, sizeof out, in, sizeof in - 1);
    cr_assert_str_eq(out, "\"ok \xc3\xa9 \\u202e \\u200b \\ufeff \\ufffd \\ufffd\\ufffd "
                          "\\ufffd\\ufffd\\ufffd \\ufffd\\ufffd\\ufffd\\ufffd \xf0\x9f\x98\x80 "
                          "\\\"\\\\\\u0001\"");
    cr_assert_eq(lb_text_json_len(in, sizeof in - 1), strlen(out));
    cr_assert_eq(lb_text_json(out, 4, in, sizeof in - 1), 0, "too small a buffer writes nothing");
}

Test(text, json_of_random_bytes_is_always_valid_json_of_valid_utf8)
{
    srand(7);
    char in[64], out[6 * 64 + 8];
    for (int t = 0; t < 20000; t++) {
        size_t n = (size_t)(rand() % 64);
        for (size_t i = 0; i < n; i++)
            in[i] = (char)(rand() % 4 ? 0x80 + rand() % 0x80 : rand() % 0x80);
        size_t len = lb_text_json(out, sizeof out, in, n);
        json_error_t err;
        json_t *j = json_loadb(out, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
        cr_assert(j && json_is_string(j), "not JSON: %s (%s)", out, err.text);
        json_decref(j);
    }
}

/* A document another part of chring-lb parsed before the first etcd read (the metrics reader, a
 * prompt key), freed after it: its blocks were not counted, and freeing them must not take the
 * thread's count below zero, which made every later read "too large". */
Test(etcd_read, a_document_parsed_before_the_first_read_does_not_spoil_the_budget)
{
    json_t *other = json_loads("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
                               "\"a prompt long enough to take a few blocks\"}]}",
                               0, NULL);
    cr_assert_not_null(other);
    char text[512];
    snprintf(text, sizeof text, "{\"header\":{\"revision\":\"7\"},\"kvs\":[{\"key\":\"%s\"}]}",
             b64s(PREFIX "10.0.0.1:80"));
    struct lb_etcd_msg m;
    const char *why = NULL;
    cr_assert_eq(lb_etcd_read_range(text, strlen(text), PREFIX, &m, &why), 0, "%s", why);
    lb_etcd_msg_free(&m);
    json_decref(other);
    why = NULL;
    cr_assert_eq(lb_etcd_read_range(text, strlen(text), PREFIX, &m, &why), 0,
                 "the read after: %s", why ? why : "");
    cr_assert_eq(m.n, 1);
    lb_etcd_msg_free(&m);
}
