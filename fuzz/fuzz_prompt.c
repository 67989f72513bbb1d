/* libFuzzer target: chring-lb's prompt key (lb/prompt.c, --key prompt): any bytes as a request
 * body.  The first byte picks the cut (the key's capacity, 1..256, or 64 KiB).
 *
 * Checks beyond "no crash, no leak, no undefined behaviour": no byte is written past the cap;
 * the key is empty exactly when the body was not parsed (kind NONE or TOO_LARGE); a parsed body's
 * key holds the NUL byte after the model within the cap or is cut before it; a key cut at any cap
 * is the first bytes of the whole key (so --key-prefix keeps a prefix, never another text); and
 * a body libjansson reads as an object within the bounds is never given the empty key.
 *
 * SPDX-License-Identifier: MIT
 */
#include "prompt.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) \
    do { \
        if (!(x)) \
            abort(); \
    } while (0)

#define WHOLE (1u << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t cap = data[0] == 0 ? WHOLE : (size_t)data[0];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    static char whole[WHOLE + 1], cut[WHOLE + 1];
    enum lb_prompt_kind kw, kc;
    whole[WHOLE] = cut[cap] = 0x5a;
    size_t nw = lb_prompt_key(body, len, whole, WHOLE, &kw);
    size_t nc = lb_prompt_key(body, len, cut, cap, &kc);
    CHECK(whole[WHOLE] == 0x5a && cut[cap] == 0x5a);
    CHECK(nw <= WHOLE && nc <= cap && kw == kc);
    CHECK((nw == 0) == (kw == LB_PROMPT_NONE || kw == LB_PROMPT_TOO_LARGE));
    CHECK(nc == (nw < cap ? nw : cap) && memcmp(whole, cut, nc) == 0);
    if (nw > 0 && nw < WHOLE)
        CHECK(memchr(whole, '\0', nw) != NULL);
    if (kw == LB_PROMPT_NONE) {
        json_error_t err;
        json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, &err);
        CHECK(!json_is_object(root));
        json_decref(root);
    }
    return 0;
}
