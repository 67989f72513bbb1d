/* chring-lb: strict HTTP/1.1 message framing (RFC 9112): message heads and bodies as bytes.
 *
 * SPDX-License-Identifier: MIT
 *
 * One parser for both directions: client requests (conn.c) and backend answers (proxy.c).  It
 * is strict where a hop must be (docs/lb.md, "Security model"): no white space before a colon,
 * no bare LF, no obs-fold, Content-Length as plain digits and never two different ones.  Every
 * head is parsed in one pass (linear in its size), and what the other side gets is a
 * normalised copy: one field per line, "Name: value", the framing as this parser understood it
 * and nothing else.
 */
#define _GNU_SOURCE
#include "h1.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* tchar (RFC 9110 section 5.6.2). */
static bool is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A byte allowed in a field value or reason phrase: VCHAR, obs-text, SP, HTAB. */
static bool is_value_byte(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool name_is(const struct h1_field *f, const char *name)
{
    return f->nlen == strlen(name) && strncasecmp(f->name, name, f->nlen) == 0;
}

static bool add_field(struct h1_head *h, char *name, size_t nlen, char *value, size_t vlen)
{
    if (h->nfields == H1_MAX_FIELDS)
        return false;
    h->fields[h->nfields++] =
        (struct h1_field){.name = name, .nlen = nlen, .value = value, .vlen = vlen};
    return true;
}

/* Content-Length: 1*DIGIT, no sign, no leading zero (but "0"), at most 18 digits. */
static bool parse_length(const char *v, size_t len, uint64_t *out)
{
    if (len == 0 || len > 18 || (v[0] == '0' && len > 1))
        return false;
    uint64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        n = n * 10 + (uint64_t)(v[i] - '0');
    }
    *out = n;
    return true;
}

/* The Transfer-Encoding list: 0 when it is exactly "chunked", 501 for another coding, 400 for a
 * malformed or repeated one. */
static int transfer_codings(const struct h1_head *h)
{
    int chunked = 0;
    for (size_t i = 0; i < h->nfields; i++) {
        const struct h1_field *f = &h->fields[i];
        if (!name_is(f, "Transfer-Encoding"))
            continue;
        size_t p = 0;
        while (p < f->vlen) {
            while (p < f->vlen && (f->value[p] == ' ' || f->value[p] == '\t' || f->value[p] == ','))
                p++;
            size_t s = p;
            while (p < f->vlen && f->value[p] != ',')
                p++;
            size_t e = p;
            while (e > s && (f->value[e - 1] == ' ' || f->value[e - 1] == '\t'))
                e--;
            if (e == s)
                continue;
            if (e - s == 7 && strncasecmp(f->value + s, "chunked", 7) == 0)
                chunked++;
            else
                return 501;
        }
    }
    return chunked == 1 ? 0 : 400;
}

/* The start line.  Returns 0 or 400. */
static int parse_request_line(char *l, size_t len, struct h1_head *h)
{
    size_t i = 0;
    while (i < len && is_tchar((unsigned char)l[i]))
        i++;
    if (i == 0 || i >= len || l[i] != ' ')
        return 400;
    h->method = l;
    h->mlen = i;
    size_t t = ++i;
    while (i < len && (unsigned char)l[i] > 0x20 && (unsigned char)l[i] < 0x7f && l[i] != '#')
        i++;
    if (i == t || i >= len || l[i] != ' ')
        return 400;
    h->target = l + t;
    h->tlen = i - t;
    i++;
    if (len - i != 8 || memcmp(l + i, "HTTP/1.", 7) != 0 || l[i + 7] < '0' || l[i + 7] > '9')
        return 400;
    h->minor = l[i + 7] - '0';
    bool origin = h->target[0] == '/';
    bool absolute = h->tlen > 7 && strncasecmp(h->target, "http://", 7) == 0;
    bool asterisk =
        h->tlen == 1 && h->target[0] == '*' && h->mlen == 7 && memcmp(h->method, "OPTIONS", 7) == 0;
    return origin || absolute || asterisk ? 0 : 400;
}

static int parse_status_line(char *l, size_t len, struct h1_head *h)
{
    if (len < 12 || memcmp(l, "HTTP/1.", 7) != 0 || l[7] < '0' || l[7] > '9' || l[8] != ' ')
        return 502;
    h->minor = l[7] - '0';
    int code = 0;
    for (int i = 9; i < 12; i++) {
        if (l[i] < '0' || l[i] > '9')
            return 502;
        code = code * 10 + (l[i] - '0');
    }
    if (code < 100 || code > 599)
        return 502;
    h->status = code;
    h->reason = l + len;
    h->rlen = 0;
    if (len > 12) {
        if (l[12] != ' ')
            return 502;
        for (size_t i = 13; i < len; i++)
            if (!is_value_byte((unsigned char)l[i]))
                return 502;
        h->reason = l + 13;
        h->rlen = len - 13;
    }
    return 0;
}

int h1_parse_head(char *buf, size_t len, bool request, struct h1_head *h)
{
    int bad = request ? 400 : 502;
    memset(h, 0, sizeof *h);
    /* Lines end in CRLF exactly; a CR or LF anywhere else is refused. */
    size_t pos = 0;
    bool first = true;
    while (pos < len) {
        size_t e = pos;
        while (e < len && buf[e] != '\r' && buf[e] != '\n')
            e++;
        if (e + 1 >= len || buf[e] != '\r' || buf[e + 1] != '\n')
            return bad;
        char *l = buf + pos;
        size_t ll = e - pos;
        pos = e + 2;
        if (first) {
            int rc = request ? parse_request_line(l, ll, h) : parse_status_line(l, ll, h);
            if (rc)
                return rc;
            first = false;
            continue;
        }
        if (ll == 0)
            return pos == len ? 0 : bad; /* the empty line ends the head */
        size_t n = 0;
        while (n < ll && is_tchar((unsigned char)l[n]))
            n++;
        /* obs-fold (a line starting with white space), a name that is not a token, white space
         * before the colon: all end here. */
        if (n == 0 || n >= ll || l[n] != ':')
            return bad;
        size_t v = n + 1;
        while (v < ll && (l[v] == ' ' || l[v] == '\t'))
            v++;
        size_t ve = ll;
        while (ve > v && (l[ve - 1] == ' ' || l[ve - 1] == '\t'))
            ve--;
        for (size_t i = v; i < ve; i++)
            if (!is_value_byte((unsigned char)l[i]))
                return bad;
        if (!add_field(h, l, n, l + v, ve - v))
            return bad;
    }
    return bad; /* no empty line */
}

/* The framing of a request head already parsed.  Returns 0, 400 or 501. */
int h1_request_framing(struct h1_head *h)
{
    bool have_len = false, have_te = false;
    for (size_t i = 0; i < h->nfields; i++) {
        struct h1_field *f = &h->fields[i];
        if (name_is(f, "Content-Length")) {
            uint64_t n;
            if (!parse_length(f->value, f->vlen, &n) || (have_len && n != h->length))
                return 400;
            have_len = true;
            h->length = n;
        } else if (name_is(f, "Transfer-Encoding")) {
            have_te = true;
        } else if (name_is(f, "Host")) {
            h->hosts++;
            for (size_t k = 0; k < f->vlen; k++)
                if (!strchr("-._~%!$&'()*+,;=:[]", f->value[k]) &&
                    !(f->value[k] >= 'a' && f->value[k] <= 'z') &&
                    !(f->value[k] >= 'A' && f->value[k] <= 'Z') &&
                    !(f->value[k] >= '0' && f->value[k] <= '9'))
                    return 400;
        }
    }
    if (h->hosts > 1 || (h->minor >= 1 && h->hosts == 0))
        return 400;
    if (have_te) {
        if (have_len || h->minor == 0)
            return 400;
        int rc = transfer_codings(h);
        if (rc)
            return rc;
        h->framing = H1_CHUNKED;
    } else {
        h->framing = have_len && h->length > 0 ? H1_LENGTH : H1_NONE;
    }
    /* A body only for POST, PUT and PATCH: on another method it is far more likely a smuggling
     * attempt against a server that ignores it than a use. */
    bool body_method = (h->mlen == 4 && memcmp(h->method, "POST", 4) == 0) ||
                       (h->mlen == 3 && memcmp(h->method, "PUT", 3) == 0) ||
                       (h->mlen == 5 && memcmp(h->method, "PATCH", 5) == 0);
    if (h->framing != H1_NONE && !body_method)
        return 400;
    return 0;
}

int h1_response_framing(struct h1_head *h, bool head_request)
{
    bool have_len = false, have_te = false;
    for (size_t i = 0; i < h->nfields; i++) {
        struct h1_field *f = &h->fields[i];
        if (name_is(f, "Content-Length")) {
            uint64_t n;
            if (!parse_length(f->value, f->vlen, &n) || (have_len && n != h->length))
                return 502;
            have_len = true;
            h->length = n;
        } else if (name_is(f, "Transfer-Encoding")) {
            have_te = true;
        } else if (name_is(f, "Connection")) {
            if (h1_token_listed(f->value, f->vlen, "close"))
                h->close = true;
        }
    }
    h->has_length = have_len;
    if (h->status == 101)
        return 502; /* no upgrade was asked for */
    if (have_te && (have_len || transfer_codings(h) != 0))
        return 502;
    if (h->status < 200 || h->status == 204 || h->status == 304 || head_request)
        h->framing = H1_NONE;
    else if (have_te)
        h->framing = H1_CHUNKED;
    else if (have_len)
        h->framing = h->length > 0 ? H1_LENGTH : H1_NONE;
    else
        h->framing = H1_CLOSE;
    if (h->minor == 0 || h->framing == H1_CLOSE)
        h->close = true;
    return 0;
}

bool h1_token_listed(const char *v, size_t len, const char *token)
{
    size_t tl = strlen(token), p = 0;
    while (p < len) {
        while (p < len && (v[p] == ' ' || v[p] == '\t' || v[p] == ','))
            p++;
        size_t s = p;
        while (p < len && v[p] != ',' && v[p] != ' ' && v[p] != '\t')
            p++;
        if (p - s == tl && strncasecmp(v + s, token, tl) == 0)
            return true;
    }
    return false;
}

ssize_t h1_find_head_end(struct evbuffer *src, size_t *scanned)
{
    size_t len = evbuffer_get_length(src);
    /* Every LF met must follow a CR: a bare LF ends the head's chances at once, not at the size
     * limit.  Each byte is looked at once over all calls (*scanned). */
    size_t from = *scanned;
    for (;;) {
        struct evbuffer_ptr start;
        if (from >= len || evbuffer_ptr_set(src, &start, from, EVBUFFER_PTR_SET) < 0)
            break;
        struct evbuffer_ptr lf = evbuffer_search(src, "\n", 1, &start);
        if (lf.pos < 0)
            break;
        char prev[4] = {0};
        size_t at = (size_t)lf.pos;
        if (at == 0)
            return -2;
        size_t back = at >= 3 ? 3 : at;
        struct evbuffer_ptr pp;
        evbuffer_ptr_set(src, &pp, at - back, EVBUFFER_PTR_SET);
        evbuffer_copyout_from(src, &pp, prev, back);
        if (prev[back - 1] != '\r')
            return -2;
        if (at >= 3 && prev[0] == '\r' && prev[1] == '\n') {
            *scanned = 0;
            return (ssize_t)at + 1;
        }
        from = at + 1;
    }
    *scanned = len;
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* bodies                                                                                      */

int h1_body_step(struct h1_body *b, struct evbuffer *src, struct evbuffer *dst)
{
    for (;;) {
        size_t avail = evbuffer_get_length(src);
        switch (b->state) {
        case H1B_DONE: return 1;
        case H1B_UNTIL_CLOSE: evbuffer_remove_buffer(src, dst, avail); return 0;
        case H1B_LENGTH:
        case H1B_CHUNK_DATA: {
            size_t n = avail < b->left ? avail : (size_t)b->left;
            if (n == 0 && b->left > 0)
                return 0;
            evbuffer_remove_buffer(src, dst, n);
            b->left -= n;
            b->total += n;
            if (b->left > 0)
                return 0;
            b->state = b->state == H1B_LENGTH ? H1B_DONE : H1B_CHUNK_CRLF;
            break;
        }
        case H1B_CHUNK_CRLF: {
            if (avail < 2)
                return 0;
            unsigned char c[2];
            evbuffer_copyout(src, c, 2);
            if (c[0] != '\r' || c[1] != '\n')
                return -1;
            evbuffer_drain(src, 2);
            b->state = H1B_CHUNK_SIZE;
            break;
        }
        case H1B_CHUNK_SIZE:
        case H1B_TRAILER: {
            size_t eol;
            struct evbuffer_ptr at = evbuffer_search_eol(src, NULL, &eol, EVBUFFER_EOL_CRLF_STRICT);
            if (at.pos < 0)
                return avail > H1_MAX_LINE ? -1 : 0;
            if ((size_t)at.pos > H1_MAX_LINE)
                return -1;
            char line[H1_MAX_LINE + 1];
            size_t ll = (size_t)at.pos;
            evbuffer_remove(src, line, ll);
            evbuffer_drain(src, 2);
            b->trailer_bytes += ll + 2;
            for (size_t i = 0; i < ll; i++)
                if (!is_value_byte((unsigned char)line[i]))
                    return -1;
            if (b->state == H1B_TRAILER) {
                if (ll == 0) {
                    b->state = H1B_DONE;
                    return 1;
                }
                /* A trailer field is checked like a header field and dropped. */
                size_t n = 0;
                while (n < ll && is_tchar((unsigned char)line[n]))
                    n++;
                if (n == 0 || n >= ll || line[n] != ':' || b->trailer_bytes > H1_MAX_TRAILER)
                    return -1;
                break;
            }
            /* chunk-size = 1*HEXDIG, then optional ";" extensions (dropped). */
            uint64_t size = 0;
            size_t i = 0;
            for (; i < ll; i++) {
                char ch = line[i];
                int d = ch >= '0' && ch <= '9'   ? ch - '0'
                        : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                        : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                                 : -1;
                if (d < 0)
                    break;
                if (i >= 15)
                    return -1;
                size = size * 16 + (uint64_t)d;
            }
            if (i == 0)
                return -1;
            while (i < ll && (line[i] == ' ' || line[i] == '\t'))
                i++;
            if (i < ll && line[i] != ';')
                return -1;
            if (size == 0) {
                b->state = H1B_TRAILER;
                b->trailer_bytes = 0;
            } else {
                b->left = size;
                b->state = H1B_CHUNK_DATA;
            }
            break;
        }
        }
    }
}

void h1_body_init(struct h1_body *b, enum h1_framing framing, uint64_t length)
{
    memset(b, 0, sizeof *b);
    switch (framing) {
    case H1_NONE: b->state = H1B_DONE; break;
    case H1_LENGTH:
        b->state = H1B_LENGTH;
        b->left = length;
        break;
    case H1_CHUNKED: b->state = H1B_CHUNK_SIZE; break;
    case H1_CLOSE: b->state = H1B_UNTIL_CLOSE; break;
    }
}
