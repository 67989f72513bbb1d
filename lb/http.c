/* chring-lb: HTTP message helpers (proxy.h): fields copied from one message to the next without
 * the hop-by-hop ones, and the Host check of /_chring/.
 *
 * SPDX-License-Identifier: MIT
 *
 * lb_copy_headers (a client's request to the backend) and lb_copy_fields (a backend's answer
 * head, as h1.c parsed it, to the client) drop the fixed hop-by-hop names and every name a
 * Connection field lists (RFC 9110 section 7.6.1), in O(n log n) of the head.
 * lb_stats_host_allowed keeps DNS rebinding away from the stats and the status page: loopback
 * names, the listener's own address, or an address literal when it listens on every address.
 */
#define _GNU_SOURCE
#include "config.h"
#include "h1.h"
#include "proxy.h"

#include <arpa/inet.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

static const char *const hop_by_hop[] = {
    "Connection", "Keep-Alive",        "Proxy-Connection", "TE",
    "Trailer",    "Transfer-Encoding", "Upgrade",          NULL,
};

/* The names a message's Connection fields list, sorted (case-insensitively), so that checking
 * every field against them costs O(log tokens) each whatever the tokens are: header work stays
 * O(n log n) in the size of the head.  (A hash table would be O(1) on average but quadratic for
 * tokens an attacker picks to collide.) */
struct token {
    const char *name;
    size_t len;
};

struct tokens {
    struct token *v;
    size_t n;
};

static int token_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = strncasecmp(a, b, al < bl ? al : bl);
    return c ? c : al < bl ? -1 : al > bl ? 1 : 0;
}

static int token_qsort_cmp(const void *x, const void *y)
{
    const struct token *a = x, *b = y;
    return token_cmp(a->name, a->len, b->name, b->len);
}

static bool tokens_has(const struct tokens *t, const char *s, size_t n)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = token_cmp(s, n, t->v[mid].name, t->v[mid].len);
        if (c == 0)
            return true;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return false;
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
        if (p > s)
            t->v[t->n++] = (struct token){s, (size_t)(p - s)};
    }
}

/* Fills t from the Connection values (each NUL-terminated).  Returns 0 / -1. */
static int tokens_build(struct tokens *t, const char *const *values, size_t nvalues)
{
    size_t count = 0;
    for (size_t i = 0; i < nvalues; i++)
        for (const char *p = values[i]; *p; p++)
            count += *p == ',' || *p == ' ' || *p == '\t';
    count += nvalues;
    t->n = 0;
    t->v = NULL;
    if (nvalues == 0)
        return 0;
    t->v = calloc(count, sizeof *t->v);
    if (!t->v)
        return -1;
    for (size_t i = 0; i < nvalues; i++)
        tokens_add_list(t, values[i]);
    qsort(t->v, t->n, sizeof *t->v, token_qsort_cmp);
    return 0;
}

static void tokens_free(struct tokens *t)
{
    free(t->v);
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
        t.n = 0;
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
