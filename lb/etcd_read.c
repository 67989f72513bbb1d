/* chring-lb: reading etcd's answers into membership changes (etcd_read.h).
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "etcd_read.h"

#include "members.h"
#include "text.h"

#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* the parse budget: jansson's allocations counted per thread                                  */

static _Thread_local size_t budget = (size_t)256 << 20, used;
static _Thread_local bool over;

/* malloc_usable_size (glibc, musl) counts what each block really holds, without a header that
 * would make every one of jansson's small blocks bigger. */
static void *budget_malloc(size_t n)
{
    if (n > budget || used > budget - n) {
        over = true;
        return NULL;
    }
    void *p = malloc(n);
    if (p)
        used += malloc_usable_size(p);
    return p;
}

/* A block allocated on another thread (a document handed over) or before the allocator was
 * installed was not counted here: the count stops at zero rather than wrap, which would make
 * every later parse on this thread "too large". */
static void budget_free(void *p)
{
    if (p) {
        size_t n = malloc_usable_size(p);
        used = n < used ? used - n : 0;
        free(p);
    }
}

void lb_etcd_read_budget(size_t bytes)
{
    budget = bytes;
}

/* jansson's allocator is process-wide: every JSON reader of chring-lb (the etcd answers here,
 * the metrics reader, prompt keys) allocates through the counted functions, on every thread.
 * They are installed before main, while the process has one thread: installed later (on the
 * first etcd read, on a reader thread), the pointers were written while other threads parsed,
 * and blocks allocated before were freed through budget_free uncounted. */
__attribute__((constructor)) static void install(void)
{
    json_set_alloc_funcs(budget_malloc, budget_free);
}

static json_t *parse(const char *text, size_t len, const char **why)
{
    over = false;
    json_error_t err;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!j)
        *why = over ? "answer too large to parse (its JSON needs more memory than the budget)"
                    : "not JSON";
    return j;
}

/* ------------------------------------------------------------------------------------------ */
/* base64                                                                                      */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t lb_b64_encode(const unsigned char *s, size_t n, char *out)
{
    char *p = out;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        *p++ = b64[v >> 18 & 63];
        *p++ = b64[v >> 12 & 63];
        *p++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? b64[v & 63] : '=';
    }
    *p = '\0';
    return (size_t)(p - out);
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

long lb_b64_decode(const char *s, size_t n, unsigned char *out)
{
    if (n % 4)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        bool last = i + 4 == n;
        int pad = last ? (s[i + 3] == '=') + (s[i + 3] == '=' && s[i + 2] == '=') : 0;
        unsigned v = 0;
        for (int j = 0; j < 4; j++) {
            int d = j >= 4 - pad ? 0 : b64_value((unsigned char)s[i + j]);
            if (d < 0)
                return -1;
            v = v << 6 | (unsigned)d;
        }
        if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))
            return -1; /* non-zero padding bits: not the canonical form */
        out[k++] = (unsigned char)(v >> 16);
        if (pad < 2)
            out[k++] = (unsigned char)(v >> 8);
        if (pad < 1)
            out[k++] = (unsigned char)v;
    }
    return (long)k;
}

/* A JSON string of base64 decoded into stack (cap bytes) when it fits, else into a malloc'ed
 * buffer; *out is where it went (NUL-terminated).  Returns its length, or -1 (not a string, not
 * base64, out of memory).  Free *out with field_free. */
static long b64_field(const json_t *j, unsigned char *stack, size_t cap, unsigned char **out)
{
    *out = NULL;
    if (!json_is_string(j))
        return -1;
    size_t n = json_string_length(j);
    unsigned char *o = n / 4 * 3 + 1 <= cap ? stack : malloc(n / 4 * 3 + 1);
    if (!o)
        return -1;
    long len = lb_b64_decode(json_string_value(j), n, o);
    if (len < 0) {
        if (o != stack)
            free(o);
        return -1;
    }
    o[len] = '\0';
    *out = o;
    return len;
}

static void field_free(unsigned char *p, const unsigned char *stack)
{
    if (p != stack)
        free(p);
}

/* etcd writes 64-bit numbers as strings of digits; a plain JSON integer is taken too. */
static bool u64_field(const json_t *j, uint64_t *out)
{
    if (json_is_integer(j) && json_integer_value(j) >= 0) {
        *out = (uint64_t)json_integer_value(j);
        return true;
    }
    if (!json_is_string(j))
        return false;
    const char *s = json_string_value(j);
    size_t n = json_string_length(j);
    if (n == 0 || n > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* entries                                                                                     */

static void bad(struct lb_etcd_msg *m, const unsigned char *key, long klen,
                const unsigned char *val, long vlen, const char *why)
{
    if (m->bad < LB_ETCD_BAD_SHOWN) {
        char k[160], v[80];
        if (key)
            lb_text_quote(k, sizeof k, key, (size_t)klen);
        else
            snprintf(k, sizeof k, "(not base64)");
        if (val)
            lb_text_quote(v, sizeof v, val, (size_t)vlen);
        else
            snprintf(v, sizeof v, "(none)");
        snprintf(m->bad_why[m->bad], sizeof m->bad_why[0], "key '%s' value '%s': %s", k, v, why);
    }
    m->bad++;
}

static int push(struct lb_etcd_msg *m, size_t *cap, char *name, uint32_t weight)
{
    if (m->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        struct lb_etcd_event *ne = realloc(m->events, nc * sizeof *ne);
        if (!ne)
            return -1;
        m->events = ne;
        *cap = nc;
    }
    m->events[m->n].name = name;
    m->events[m->n++].weight = weight;
    return 0;
}

/* One kv ({"key":..,"value":..}) as an event (del: a DELETE, the value ignored).  Returns 0
 * (added, or bad and counted), -1 out of memory. */
static int read_kv(struct lb_etcd_msg *m, size_t *cap, const json_t *kv, bool del,
                   const char *prefix, size_t plen)
{
    unsigned char *key = NULL, *val = NULL;
    unsigned char kbuf[512], vbuf[64];
    long klen = b64_field(json_object_get(kv, "key"), kbuf, sizeof kbuf, &key), vlen = 0;
    const json_t *jv = json_object_get(kv, "value");
    const char *why = NULL;
    uint32_t weight = 0;
    if (klen < 0) {
        why = "the key is not base64";
    } else if (!del && jv && (vlen = b64_field(jv, vbuf, sizeof vbuf, &val)) < 0) {
        why = "the value is not base64";
    } else if ((size_t)klen <= plen || memcmp(key, prefix, plen) != 0) {
        why = "not under the prefix";
    } else {
        const char *name = (const char *)key + plen;
        size_t nlen = (size_t)klen - plen;
        char host[256];
        uint16_t port;
        if (strlen(name) != nlen)
            why = "a NUL in the name";
        else if (nlen > 255)
            why = "a name longer than 255 bytes";
        else if (strpbrk(name, "= \t\r\n\v\f"))
            why = "white space or '=' in the name";
        else
            for (const unsigned char *c = (const unsigned char *)name; *c && !why; c++)
                if (*c < 0x20 || *c == 0x7f)
                    why = "a control byte in the name";
        if (!why && lb_split_hostport(name, host, sizeof host, &port) < 0)
            why = "the name is not HOST:PORT (port 1..65535)";
        if (!why && !del) {
            weight = 1;
            if (vlen > 0) {
                unsigned long w = 0;
                for (long i = 0; i < vlen && !why; i++) {
                    if (val[i] < '0' || val[i] > '9' || i >= 5)
                        why = "the value is not a weight (empty, or an integer in 1..10000)";
                    else
                        w = w * 10 + (unsigned long)(val[i] - '0');
                }
                if (!why && (w < 1 || w > 10000))
                    why = "the value is not a weight (empty, or an integer in 1..10000)";
                weight = (uint32_t)w;
            }
        }
    }
    int rc = 0;
    if (why) {
        bad(m, key, klen, val, vlen, why);
    } else {
        char *name = strdup((const char *)key + plen);
        if (!name || push(m, cap, name, del ? 0 : weight) < 0) {
            free(name);
            rc = -1;
        }
    }
    field_free(key, kbuf);
    field_free(val, vbuf);
    return rc;
}

void lb_etcd_msg_free(struct lb_etcd_msg *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->events[i].name);
    free(m->events);
    memset(m, 0, sizeof *m);
}

int lb_etcd_read_range(const char *text, size_t len, const char *prefix, struct lb_etcd_msg *m,
                       const char **why)
{
    memset(m, 0, sizeof *m);
    json_t *j = parse(text, len, why);
    if (!j)
        return -1;
    size_t cap = 0, plen = strlen(prefix);
    int rc = 0;
    if (!u64_field(json_object_get(json_object_get(j, "header"), "revision"), &m->revision)) {
        *why = "an answer without a revision";
        rc = -1;
    }
    const json_t *kvs = json_object_get(j, "kvs");
    size_t i;
    const json_t *kv;
    if (rc == 0 && json_is_array(kvs))
        json_array_foreach(kvs, i, kv)
        {
            if (read_kv(m, &cap, kv, false, prefix, plen) < 0) {
                *why = "out of memory";
                rc = -1;
                break;
            }
        }
    json_decref(j);
    if (rc < 0)
        lb_etcd_msg_free(m);
    return rc;
}

int lb_etcd_read_watch(const char *text, size_t len, const char *prefix, struct lb_etcd_msg *m,
                       const char **why)
{
    memset(m, 0, sizeof *m);
    json_t *j = parse(text, len, why);
    if (!j)
        return -1;
    const json_t *r = json_object_get(j, "result");
    if (!json_is_object(r)) {
        *why = json_object_get(j, "error") ? "etcd answered an error" : "not a watch result";
        json_decref(j);
        return -1;
    }
    u64_field(json_object_get(json_object_get(r, "header"), "revision"), &m->revision);
    u64_field(json_object_get(r, "compact_revision"), &m->compact_revision);
    m->created = json_is_true(json_object_get(r, "created"));
    m->canceled = json_is_true(json_object_get(r, "canceled"));
    size_t cap = 0, plen = strlen(prefix), i;
    const json_t *e, *evs = json_object_get(r, "events");
    int rc = 0;
    if (json_is_array(evs))
        json_array_foreach(evs, i, e)
        {
            const json_t *type = json_object_get(e, "type");
            bool del = json_is_string(type) && strcmp(json_string_value(type), "DELETE") == 0;
            if (read_kv(m, &cap, json_object_get(e, "kv"), del, prefix, plen) < 0) {
                *why = "out of memory";
                rc = -1;
                break;
            }
        }
    json_decref(j);
    if (rc < 0)
        lb_etcd_msg_free(m);
    return rc;
}
