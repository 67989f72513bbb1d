/* chring-lb: a small JSON reader (json.h).
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "json.h"

#include <stdlib.h>
#include <string.h>

#define LBJ_MAX_DEPTH 64

struct parser {
    const char *p, *end;
};

static void skip_ws(struct parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

void lb_json_free(struct lb_json *j)
{
    while (j) {
        struct lb_json *next = j->next;
        lb_json_free(j->child);
        free(j->key);
        free(j->text);
        free(j);
        j = next;
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool hex4(const char *s, const char *end, unsigned *out)
{
    if (end - s < 4)
        return false;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(s[i]);
        if (h < 0)
            return false;
        v = v << 4 | (unsigned)h;
    }
    *out = v;
    return true;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string at ps->p (the opening quote).  Returns the unescaped copy (NUL-terminated, *len
 * bytes; an escaped NUL is refused) or NULL. */
static char *parse_string(struct parser *ps, size_t *len)
{
    if (ps->p >= ps->end || *ps->p != '"')
        return NULL;
    const char *s = ++ps->p;
    const char *q = s;
    while (q < ps->end && *q != '"') {
        if (*q == '\\')
            q++;
        q++;
    }
    if (q >= ps->end)
        return NULL;
    /* unescaping never grows the text: \uXXXX (6 bytes) becomes at most 3, a pair (12) 4 */
    char *out = malloc((size_t)(q - s) + 1);
    if (!out)
        return NULL;
    size_t n = 0;
    const char *c = s;
    while (c < q) {
        unsigned char ch = (unsigned char)*c;
        if (ch < 0x20)
            goto bad;
        if (ch != '\\') {
            out[n++] = (char)ch;
            c++;
            continue;
        }
        c++;
        switch (*c) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (!hex4(c + 1, q, &cp) || cp == 0)
                goto bad;
            c += 4;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (q - c < 7 || c[1] != '\\' || c[2] != 'u' || !hex4(c + 3, q, &lo) ||
                    lo < 0xdc00 || lo > 0xdfff)
                    goto bad;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                c += 6;
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                goto bad;
            }
            n += put_utf8(out + n, cp);
            break;
        }
        default: goto bad;
        }
        c++;
    }
    out[n] = '\0';
    *len = n;
    ps->p = q + 1;
    return out;
bad:
    free(out);
    return NULL;
}

static struct lb_json *parse_value(struct parser *ps, int depth);

/* The members of an array or object after its opening bracket, up to the closing one. */
static bool parse_members(struct parser *ps, struct lb_json *j, bool object, int depth)
{
    char close = object ? '}' : ']';
    struct lb_json **tail = &j->child;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return true;
    }
    for (;;) {
        char *key = NULL;
        if (object) {
            size_t klen;
            skip_ws(ps);
            key = parse_string(ps, &klen);
            if (!key)
                return false;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                return false;
            }
            ps->p++;
        }
        struct lb_json *v = parse_value(ps, depth + 1);
        if (!v) {
            free(key);
            return false;
        }
        v->key = key;
        *tail = v;
        tail = &v->next;
        skip_ws(ps);
        if (ps->p >= ps->end)
            return false;
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            return true;
        }
        return false;
    }
}

static bool literal(struct parser *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return false;
    ps->p += n;
    return true;
}

static struct lb_json *parse_value(struct parser *ps, int depth)
{
    if (depth > LBJ_MAX_DEPTH)
        return NULL;
    skip_ws(ps);
    if (ps->p >= ps->end)
        return NULL;
    struct lb_json *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    char c = *ps->p;
    if (c == '{' || c == '[') {
        ps->p++;
        j->type = c == '{' ? LBJ_OBJECT : LBJ_ARRAY;
        if (!parse_members(ps, j, c == '{', depth))
            goto bad;
    } else if (c == '"') {
        j->type = LBJ_STRING;
        if (!(j->text = parse_string(ps, &j->len)))
            goto bad;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        const char *s = ps->p;
        while (ps->p < ps->end && (strchr("+-.eE", *ps->p) || (*ps->p >= '0' && *ps->p <= '9')))
            ps->p++;
        j->type = LBJ_NUMBER;
        j->len = (size_t)(ps->p - s);
        if (!(j->text = strndup(s, j->len)))
            goto bad;
    } else if (literal(ps, "true")) {
        j->type = LBJ_BOOL;
        j->truth = true;
    } else if (literal(ps, "false")) {
        j->type = LBJ_BOOL;
    } else if (literal(ps, "null")) {
        j->type = LBJ_NULL;
    } else {
        goto bad;
    }
    return j;
bad:
    lb_json_free(j);
    return NULL;
}

struct lb_json *lb_json_parse(const char *text, size_t len)
{
    struct parser ps = {text, text + len};
    struct lb_json *j = parse_value(&ps, 0);
    skip_ws(&ps);
    if (j && ps.p != ps.end) {
        lb_json_free(j);
        return NULL;
    }
    return j;
}

const struct lb_json *lb_json_get(const struct lb_json *j, const char *key)
{
    if (!j || j->type != LBJ_OBJECT)
        return NULL;
    for (const struct lb_json *c = j->child; c; c = c->next)
        if (strcmp(c->key, key) == 0)
            return c;
    return NULL;
}

bool lb_json_u64(const struct lb_json *j, uint64_t *out)
{
    if (!j || (j->type != LBJ_STRING && j->type != LBJ_NUMBER) || j->len == 0 || j->len > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < j->len; i++) {
        char c = j->text[i];
        if (c < '0' || c > '9')
            return false;
        uint64_t d = (uint64_t)(c - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}
