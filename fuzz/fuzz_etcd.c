/* libFuzzer target: chring-lb's etcd reader (lb/etcd_read.c: JSON through libjansson, base64)
 * and the quoting of outside bytes (lb/text.c).  The first byte picks what the rest is fed to:
 *
 *   0  a range answer          1  a watch message          2  base64 decoding
 *   3  a JSON string (text.h)  4  a log quote (text.h)
 *
 * Checks beyond "no crash, no leak, no undefined behaviour": every event names a member under
 * the rules (no NUL, no control byte, at most 255 bytes, weight 0..10000); base64 that decodes
 * encodes back to the same text; lb_text_json's output is valid JSON that libjansson reads back
 * to a string of valid UTF-8; lb_text_quote's output is printable ASCII only.
 *
 * SPDX-License-Identifier: MIT
 */
#include "etcd_read.h"
#include "text.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) \
    do { \
        if (!(x)) \
            abort(); \
    } while (0)

static void check_msg(const struct lb_etcd_msg *m)
{
    for (size_t i = 0; i < m->n; i++) {
        const char *name = m->events[i].name;
        size_t len = strlen(name);
        CHECK(len > 0 && len <= 255);
        for (size_t j = 0; j < len; j++)
            CHECK((unsigned char)name[j] >= 0x20 && name[j] != 0x7f && name[j] != ' ' &&
                  name[j] != '=');
        CHECK(m->events[i].weight <= 10000);
    }
    for (size_t i = 0; i < m->bad && i < LB_ETCD_BAD_SHOWN; i++)
        for (const char *c = m->bad_why[i]; *c; c++)
            CHECK((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned mode = data[0] % 5;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    lb_etcd_read_budget((size_t)64 << 20);
    if (mode <= 1) {
        struct lb_etcd_msg m;
        const char *why = NULL;
        int rc = mode == 0 ? lb_etcd_read_range(text, n, "/chring/pool/", &m, &why)
                           : lb_etcd_read_watch(text, n, "/chring/pool/", &m, &why);
        if (rc == 0) {
            check_msg(&m);
            lb_etcd_msg_free(&m);
        } else {
            CHECK(why != NULL);
        }
    } else if (mode == 2) {
        unsigned char *out = malloc(n / 4 * 3 + 1);
        CHECK(out);
        long len = lb_b64_decode(text, n, out);
        if (len >= 0) {
            char *again = malloc(((size_t)len + 2) / 3 * 4 + 1);
            CHECK(again);
            CHECK(lb_b64_encode(out, (size_t)len, again) == n);
            CHECK(memcmp(again, text, n) == 0);
            free(again);
        }
        free(out);
    } else if (mode == 3) {
        size_t cap = lb_text_json_len(text, n) + 1;
        char *out = malloc(cap);
        CHECK(out);
        size_t len = lb_text_json(out, cap, text, n);
        CHECK(len + 1 == cap && strlen(out) == len);
        json_error_t err;
        json_t *j = json_loadb(out, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
        CHECK(j && json_is_string(j));
        json_decref(j);
        free(out);
    } else {
        char out[256];
        size_t len = lb_text_quote(out, sizeof out, text, n);
        CHECK(len < sizeof out && strlen(out) == len);
        for (size_t i = 0; i < len; i++)
            CHECK(out[i] >= 0x20 && out[i] < 0x7f);
    }
    return 0;
}
