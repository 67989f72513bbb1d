/* chring-lb: the Prometheus text reader (lb/prom_read.h).
 * SPDX-License-Identifier: MIT */
#include "prom_read.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool name_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static bool name_char(unsigned char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

/* A float as the exposition format writes it.  Returns false for anything else. */
static bool parse_value(const char *p, size_t n, double *out)
{
    static const struct {
        const char *text;
        double v;
    } words[] = {{"NaN", NAN}, {"+Inf", INFINITY}, {"-Inf", -INFINITY}, {"Inf", INFINITY}};
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
        if (n == strlen(words[k].text) && memcmp(p, words[k].text, n) == 0) {
            *out = words[k].v;
            return true;
        }
    /* Decimal only (strtod would also take hex, "infinity", "nan(...)"): digits, one point,
     * an optional sign, an exponent with an optional sign. */
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return false;
    size_t i = 0, digits = 0;
    if (p[i] == '+' || p[i] == '-')
        i++;
    bool point = false;
    for (; i < n && ((p[i] >= '0' && p[i] <= '9') || (p[i] == '.' && !point)); i++) {
        if (p[i] == '.')
            point = true;
        else
            digits++;
    }
    if (digits == 0)
        return false;
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-'))
            i++;
        size_t exp = 0;
        for (; i < n && p[i] >= '0' && p[i] <= '9'; i++)
            exp++;
        if (exp == 0)
            return false;
    }
    if (i != n)
        return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    *out = strtod(buf, NULL);
    return true;
}

static bool parse_timestamp(const char *p, size_t n, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (n > 0 && (p[0] == '-' || p[0] == '+')) {
        neg = p[0] == '-';
        i++;
    }
    if (i == n || n - i > 18)
        return false; /* 18 digits: no overflow */
    int64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (p[i] - '0');
    }
    *out = neg ? -v : v;
    return true;
}

/* The label section from p (just past '{') to its '}' on this line [p, end): checks its syntax
 * and returns the '}', or NULL. */
static const char *parse_labels(const char *p, const char *end)
{
    for (;;) {
        while (p < end && blank(*p))
            p++;
        if (p < end && *p == '}')
            return p; /* empty, or after a trailing comma */
        if (p == end || !name_start((unsigned char)*p))
            return NULL;
        while (p < end && name_char((unsigned char)*p))
            p++;
        while (p < end && blank(*p))
            p++;
        if (p == end || *p++ != '=')
            return NULL;
        while (p < end && blank(*p))
            p++;
        if (p == end || *p++ != '"')
            return NULL;
        for (;;) {
            if (p == end)
                return NULL;
            char c = *p++;
            if (c == '"')
                break;
            if (c == '\\') {
                if (p == end || (*p != '\\' && *p != '"' && *p != 'n'))
                    return NULL;
                p++;
            }
        }
        while (p < end && blank(*p))
            p++;
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p == '}')
            return p;
        return NULL;
    }
}

/* One sample line [p, end) (no newline, not blank, not a comment).  Returns NULL or why. */
static const char *parse_sample(const char *p, const char *end, struct lb_prom_sample *s)
{
    memset(s, 0, sizeof *s);
    if (!name_start((unsigned char)*p))
        return "a sample line must begin with a metric name";
    s->name = p;
    while (p < end && name_char((unsigned char)*p))
        p++;
    s->name_len = (size_t)(p - s->name);
    const char *v = p;
    while (p < end && blank(*p))
        p++;
    if (p < end && *p == '{') {
        const char *close = parse_labels(p + 1, end);
        if (close == NULL)
            return "malformed labels";
        s->labels = p + 1;
        s->labels_len = (size_t)(close - (p + 1));
        p = close + 1;
        v = p;
        while (p < end && blank(*p))
            p++;
    }
    if (p == v)
        return "no blank before the value";
    v = p;
    while (p < end && !blank(*p))
        p++;
    if (!parse_value(v, (size_t)(p - v), &s->value))
        return "malformed value";
    while (p < end && blank(*p))
        p++;
    if (p < end) {
        const char *t = p;
        while (p < end && !blank(*p))
            p++;
        if (!parse_timestamp(t, (size_t)(p - t), &s->timestamp_ms))
            return "malformed timestamp";
        s->has_timestamp = true;
        while (p < end && blank(*p))
            p++;
        if (p < end)
            return "text after the timestamp";
    }
    return NULL;
}

long lb_prom_parse(const char *text, size_t len,
                   int (*fn)(const struct lb_prom_sample *s, void *ctx), void *ctx,
                   const char **why, size_t *line)
{
    const char *p = text, *end = text + len;
    long samples = 0;
    size_t no = 0;
    *why = NULL;
    *line = 0;
    while (p < end) {
        no++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl != NULL ? nl : end;
        const char *next = nl != NULL ? nl + 1 : end;
        if (e > p && e[-1] == '\r')
            e--;
        const char *q = p;
        while (q < e && blank(*q))
            q++;
        if (q < e && *q != '#') {
            if (memchr(q, '\0', (size_t)(e - q)) != NULL) {
                *why = "a NUL byte";
                *line = no;
                return -1;
            }
            struct lb_prom_sample s;
            const char *bad = parse_sample(q, e, &s);
            if (bad != NULL) {
                *why = bad;
                *line = no;
                return -1;
            }
            samples++;
            if (fn != NULL && fn(&s, ctx) != 0)
                return samples;
        }
        p = next;
    }
    return samples;
}

long lb_prom_label(const char *labels, size_t labels_len, const char *key, char *out, size_t cap)
{
    const char *p = labels, *end = labels + labels_len;
    size_t klen = strlen(key);
    while (p < end) {
        while (p < end && (blank(*p) || *p == ','))
            p++;
        const char *k = p;
        while (p < end && name_char((unsigned char)*p))
            p++;
        size_t kl = (size_t)(p - k);
        while (p < end && *p != '"')
            p++;
        if (p == end)
            return -1;
        p++; /* the opening quote */
        bool match = kl == klen && memcmp(k, key, klen) == 0;
        size_t n = 0;
        while (p < end && *p != '"') {
            char c = *p++;
            if (c == '\\' && p < end) {
                c = *p++;
                if (c == 'n')
                    c = '\n';
            }
            if (match) {
                if (n + 1 >= cap)
                    return -2;
                out[n++] = c;
            }
        }
        if (p < end)
            p++; /* the closing quote */
        if (match) {
            out[n] = '\0';
            return (long)n;
        }
    }
    return -1;
}

struct sum_ctx {
    const char *const *names;
    size_t n;
    double sum;
    long counted;
    size_t skipped;
};

static int sum_one(const struct lb_prom_sample *s, void *ctx)
{
    struct sum_ctx *c = ctx;
    for (size_t k = 0; k < c->n; k++)
        if (strlen(c->names[k]) == s->name_len && memcmp(c->names[k], s->name, s->name_len) == 0) {
            if (!isfinite(s->value) || s->value < 0)
                c->skipped++;
            else {
                c->sum += s->value;
                c->counted++;
            }
            break;
        }
    return 0;
}

long lb_prom_sum(const char *text, size_t len, const char *const *names, size_t n, double *sum,
                 size_t *skipped, const char **why, size_t *line)
{
    struct sum_ctx c = {names, n, 0.0, 0, 0};
    long r = lb_prom_parse(text, len, sum_one, &c, why, line);
    *sum = c.sum;
    *skipped = c.skipped;
    return r < 0 ? -1 : c.counted;
}
