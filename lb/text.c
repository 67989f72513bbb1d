/* chring-lb: bytes from outside made safe for a log line or a JSON string (text.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include "text.h"

#include <stdint.h>
#include <string.h>

static const char hex[] = "0123456789abcdef";

size_t lb_text_quote(char *out, size_t cap, const void *s, size_t n)
{
    const unsigned char *c = s;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool plain = c[i] >= 0x20 && c[i] < 0x7f && c[i] != '\\';
        size_t need = plain ? 1 : 4;
        if (k + need + 4 > cap) { /* room for "..." and the NUL */
            memcpy(out + k, "...", 3);
            k += 3;
            break;
        }
        if (plain) {
            out[k++] = (char)c[i];
        } else {
            out[k++] = '\\';
            out[k++] = 'x';
            out[k++] = hex[c[i] >> 4];
            out[k++] = hex[c[i] & 15];
        }
    }
    out[k] = '\0';
    return k;
}

bool lb_text_invisible(unsigned cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0xad || cp == 0x34f || cp == 0x61c ||
           cp == 0x115f || cp == 0x1160 || cp == 0x17b4 || cp == 0x17b5 ||
           (cp >= 0x180b && cp <= 0x180f) || (cp >= 0x200b && cp <= 0x200f) ||
           (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x206f) || cp == 0x3164 ||
           (cp >= 0xfe00 && cp <= 0xfe0f) || cp == 0xfeff || cp == 0xffa0 ||
           (cp >= 0xfff0 && cp <= 0xfffb) || (cp >= 0x1d173 && cp <= 0x1d17a) ||
           (cp >= 0xe0000 && cp <= 0xe0fff);
}

/* The code point of the UTF-8 sequence at c[0..n) (strict: no overlong form, no surrogate,
 * nothing above U+10FFFF): its length in *len, or 0 with *len 1 for an invalid byte. */
static unsigned utf8_next(const unsigned char *c, size_t n, size_t *len)
{
    unsigned cp;
    size_t want;
    if (c[0] < 0x80) {
        *len = 1;
        return c[0];
    }
    if (c[0] >= 0xc2 && c[0] <= 0xdf) {
        cp = c[0] & 0x1fu;
        want = 2;
    } else if (c[0] >= 0xe0 && c[0] <= 0xef) {
        cp = c[0] & 0x0fu;
        want = 3;
    } else if (c[0] >= 0xf0 && c[0] <= 0xf4) {
        cp = c[0] & 0x07u;
        want = 4;
    } else {
        *len = 1;
        return UINT32_MAX;
    }
    if (n < want) {
        *len = 1;
        return UINT32_MAX;
    }
    for (size_t i = 1; i < want; i++) {
        if ((c[i] & 0xc0) != 0x80) {
            *len = 1;
            return UINT32_MAX;
        }
        cp = cp << 6 | (c[i] & 0x3fu);
    }
    if ((want == 3 && cp < 0x800) || (want == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
        *len = 1;
        return UINT32_MAX;
    }
    *len = want;
    return cp;
}

/* One code point as JSON; writes into out when out is not NULL.  Returns its length. */
static size_t json_cp(char *out, unsigned cp, const unsigned char *raw, size_t rawlen)
{
    char tmp[16];
    size_t k = 0;
    if (cp == UINT32_MAX)
        cp = 0xfffd; /* invalid UTF-8: the replacement character, escaped */
    if (cp == '"' || cp == '\\') {
        tmp[k++] = '\\';
        tmp[k++] = (char)cp;
    } else if (cp == 0xfffd || lb_text_invisible(cp)) {
        unsigned units[2] = {cp, 0};
        size_t nu = 1;
        if (cp >= 0x10000) {
            units[0] = 0xd800 + ((cp - 0x10000) >> 10);
            units[1] = 0xdc00 + ((cp - 0x10000) & 0x3ff);
            nu = 2;
        }
        for (size_t u = 0; u < nu; u++) {
            tmp[k++] = '\\';
            tmp[k++] = 'u';
            for (int sh = 12; sh >= 0; sh -= 4)
                tmp[k++] = hex[units[u] >> sh & 15];
        }
    } else {
        if (out)
            memcpy(out, raw, rawlen);
        return rawlen;
    }
    if (out)
        memcpy(out, tmp, k);
    return k;
}

size_t lb_text_json_len(const void *s, size_t n)
{
    const unsigned char *c = s;
    size_t k = 2;
    for (size_t i = 0, len = 1; i < n; i += len) {
        unsigned cp = utf8_next(c + i, n - i, &len); /* sets len before json_cp reads it */
        k += json_cp(NULL, cp, c + i, len);
    }
    return k;
}

size_t lb_text_json(char *out, size_t cap, const void *s, size_t n)
{
    const unsigned char *c = s;
    if (cap < lb_text_json_len(s, n) + 1) {
        if (cap)
            out[0] = '\0';
        return 0;
    }
    size_t k = 0;
    out[k++] = '"';
    for (size_t i = 0, len = 1; i < n; i += len) {
        unsigned cp = utf8_next(c + i, n - i, &len);
        k += json_cp(out + k, cp, c + i, len);
    }
    out[k++] = '"';
    out[k] = '\0';
    return k;
}
