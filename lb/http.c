/* chring-lb: HTTP message helpers: the hop-by-hop rule (RFC 9110 section 7.6.1) and plain-text
 * answers.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "lb.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

static const char *const hop_by_hop[] = {
    "Connection", "Keep-Alive",        "Proxy-Connection", "TE",
    "Trailer",    "Transfer-Encoding", "Upgrade",          NULL,
};

/* The names a message's Connection fields list, in a small open-addressing set, so that
 * checking every field against them costs O(1) each: header work stays linear whatever the
 * number of fields and tokens. */
struct tokens {
    const char **name;
    size_t *len;
    size_t cap; /* a power of two, at least twice the tokens */
};

static uint64_t token_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        h = (h ^ (c >= 'A' && c <= 'Z' ? c + 32 : c)) * 1099511628211ULL;
    }
    return h;
}

static bool tokens_has(const struct tokens *t, const char *s, size_t n)
{
    if (t->cap == 0)
        return false;
    for (size_t i = token_hash(s, n) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (!t->name[i])
            return false;
        if (t->len[i] == n && strncasecmp(t->name[i], s, n) == 0)
            return true;
    }
}

static void tokens_add_list(struct tokens *t, const char *v)
{
    const char *p = v;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *s = p;
        while (*p && *p != ',' && *p != ' ' && *p != '\t')
            p++;
        size_t n = (size_t)(p - s);
        if (n == 0 || tokens_has(t, s, n))
            continue;
        size_t i = token_hash(s, n) & (t->cap - 1);
        while (t->name[i])
            i = (i + 1) & (t->cap - 1);
        t->name[i] = s;
        t->len[i] = n;
    }
}

/* Sizes and fills t from the Connection values (each NUL-terminated).  Returns 0 / -1. */
static int tokens_build(struct tokens *t, const char *const *values, size_t nvalues)
{
    size_t count = 0;
    for (size_t i = 0; i < nvalues; i++)
        for (const char *p = values[i]; *p; p++)
            count += *p == ',';
    count += nvalues;
    t->cap = 0;
    t->name = NULL;
    t->len = NULL;
    if (nvalues == 0)
        return 0;
    size_t cap = 8;
    while (cap < 2 * count)
        cap *= 2;
    t->name = calloc(cap, sizeof *t->name);
    t->len = calloc(cap, sizeof *t->len);
    if (!t->name || !t->len) {
        free(t->name);
        free(t->len);
        return -1;
    }
    t->cap = cap;
    for (size_t i = 0; i < nvalues; i++)
        tokens_add_list(t, values[i]);
    return 0;
}

static void tokens_free(struct tokens *t)
{
    free(t->name);
    free(t->len);
}

/* True when name is listed in extra (NULL-terminated, may be NULL), case-insensitively. */
static bool name_listed(const char *const *extra, const char *name, size_t n)
{
    for (const char *const *e = extra; e && *e; e++)
        if (strlen(*e) == n && strncasecmp(*e, name, n) == 0)
            return true;
    return false;
}

static bool is_hop_by_hop(const struct tokens *t, const char *name, size_t n)
{
    return name_listed(hop_by_hop, name, n) || tokens_has(t, name, n);
}

void lb_copy_headers(const struct evkeyvalq *src, struct evkeyvalq *dst, const char *const *extra)
{
    const struct evkeyval *h;
    size_t nconn = 0;
    TAILQ_FOREACH(h, src, next)
    nconn += strcasecmp(h->key, "Connection") == 0;
    const char **values = nconn ? calloc(nconn, sizeof *values) : NULL;
    size_t k = 0;
    if (values)
        TAILQ_FOREACH(h, src, next)
    if (strcasecmp(h->key, "Connection") == 0)
        values[k++] = h->value;
    struct tokens t;
    /* Out of memory: every end-to-end header is still copied, Connection-listed ones too. */
    if (tokens_build(&t, values, k) < 0)
        t.cap = 0;
    TAILQ_FOREACH(h, src, next)
    {
        size_t n = strlen(h->key);
        if (!is_hop_by_hop(&t, h->key, n) && !name_listed(extra, h->key, n))
            evhttp_add_header(dst, h->key, h->value);
    }
    tokens_free(&t);
    free(values);
}

int lb_copy_fields(const struct h1_head *h, struct evkeyvalq *dst)
{
    /* Fields are not NUL-terminated: one copy of the whole head, each string terminated. */
    size_t total = 0, nconn = 0;
    for (size_t i = 0; i < h->nfields; i++) {
        total += h->fields[i].nlen + h->fields[i].vlen + 2;
        nconn += h->fields[i].nlen == 10 && strncasecmp(h->fields[i].name, "Connection", 10) == 0;
    }
    char *copy = malloc(total + 1);
    const char **values = calloc(nconn + 1, sizeof *values);
    char **names = calloc(h->nfields + 1, sizeof *names);
    char **vals = calloc(h->nfields + 1, sizeof *vals);
    int rc = -1;
    if (!copy || !values || !names || !vals)
        goto out;
    char *p = copy;
    size_t k = 0;
    for (size_t i = 0; i < h->nfields; i++) {
        const struct h1_field *f = &h->fields[i];
        names[i] = p;
        memcpy(p, f->name, f->nlen);
        p[f->nlen] = '\0';
        p += f->nlen + 1;
        vals[i] = p;
        memcpy(p, f->value, f->vlen);
        p[f->vlen] = '\0';
        p += f->vlen + 1;
        if (f->nlen == 10 && strncasecmp(f->name, "Connection", 10) == 0)
            values[k++] = vals[i];
    }
    struct tokens t;
    if (tokens_build(&t, values, k) < 0)
        goto out;
    static const char *const framing[] = {"Content-Length", NULL};
    for (size_t i = 0; i < h->nfields; i++) {
        size_t n = h->fields[i].nlen;
        if (!is_hop_by_hop(&t, names[i], n) && !name_listed(framing, names[i], n))
            evhttp_add_header(dst, names[i], vals[i]);
    }
    tokens_free(&t);
    rc = 0;
out:
    free(copy);
    free(values);
    free(names);
    free(vals);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* the Host check of the stats endpoint                                                       */

static bool host_is_loopback_literal(const char *name)
{
    unsigned char a[16];
    if (inet_pton(AF_INET, name, a) == 1)
        return a[0] == 127;
    if (inet_pton(AF_INET6, name, a) == 1)
        return memcmp(a, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1", 16) == 0 ||
               (memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0 && a[12] == 127);
    return false;
}

static bool host_is_literal(const char *name)
{
    unsigned char a[16];
    return inet_pton(AF_INET, name, a) == 1 || inet_pton(AF_INET6, name, a) == 1;
}

static bool is_wildcard(const char *listen)
{
    return !*listen || strcmp(listen, "0.0.0.0") == 0 || strcmp(listen, "::") == 0 ||
           strcmp(listen, "*") == 0;
}

bool lb_stats_host_allowed(const char *host, bool stats_listener)
{
    if (!host)
        return true; /* HTTP/1.0 without Host: no browser sends that */
    char name[256];
    size_t n = strlen(host);
    const char *end = host + n;
    if (host[0] == '[') {
        const char *close = strchr(host, ']');
        if (!close || (close[1] != '\0' && close[1] != ':'))
            return false;
        end = close;
        host++;
    } else {
        const char *colon = strrchr(host, ':');
        if (colon && strchr(host, ':') != colon)
            return false; /* an IPv6 address without brackets is not a Host */
        if (colon)
            end = colon;
    }
    size_t len = (size_t)(end - host);
    if (len == 0 || len >= sizeof name)
        return false;
    memcpy(name, host, len);
    name[len] = '\0';
    if (name[len - 1] == '.') /* the absolute form of a name */
        name[--len] = '\0';
    if (strcasecmp(name, "localhost") == 0 ||
        (len > 10 && strcasecmp(name + len - 10, ".localhost") == 0))
        return true; /* RFC 6761 section 6.3: always loopback */
    if (host_is_loopback_literal(name))
        return true;
    const char *listen = stats_listener ? lb_cfg.stats_host : lb_cfg.listen_host;
    if (strcasecmp(name, listen) == 0)
        return true;
    /* A listener on every address is reached by any of them; a rebinding page always names
     * the attacker's domain, never an address. */
    return is_wildcard(listen) && host_is_literal(name);
}
