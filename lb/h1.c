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
 *
 * A leaf (docs/lb.md, "The parser"): bytes and lengths in, no buffer type, nothing of lb/ but
 * h1.h.  Heads and bodies are read as they arrive, piece by piece, through small state structs
 * (struct h1_head_scan, struct h1_body) that remember where a piece ended, so how the bytes are
 * cut never changes the outcome.  The framing fields are scanned once (scan_framing) for both
 * directions; each direction applies its own rules to what the scan found.
 */
#define _GNU_SOURCE
#include "h1.h"

#include <errno.h>
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

bool h1_authority_ok(const char *a, size_t n)
{
    if (!a)
        return n == 0;
    for (size_t k = 0; k < n; k++) {
        char c = a[k];
        if (!(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') &&
            (c == '\0' || !strchr("-._~%!$&'()*+,;=:[]", c)))
            return false;
    }
    return true;
}

/* What the fields of a head say about its framing, gathered in one scan for both directions;
 * h1_request_framing and h1_response_framing apply their own rules to it. */
struct framing_fields {
    bool have_len; /* a Content-Length */
    bool bad_len;  /* one that is not plain digits, or two that differ */
    uint64_t length;
    bool have_te;   /* a Transfer-Encoding */
    int te_chunked; /* its "chunked" codings, over every Transfer-Encoding field */
    bool te_other;  /* another coding among them */
    int hosts;      /* Host fields */
    bool bad_host;  /* one with a byte no authority holds */
    bool close;     /* "close" among the Connection tokens */
};

/* The Transfer-Encoding list v[0..len), its codings counted into *ff. */
static void scan_codings(const char *v, size_t len, struct framing_fields *ff)
{
    size_t p = 0;
    while (p < len) {
        while (p < len && (v[p] == ' ' || v[p] == '\t' || v[p] == ','))
            p++;
        size_t s = p;
        while (p < len && v[p] != ',')
            p++;
        size_t e = p;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e == s)
            continue;
        if (e - s == 7 && strncasecmp(v + s, "chunked", 7) == 0)
            ff->te_chunked++;
        else
            ff->te_other = true;
    }
}

static void scan_framing(const struct h1_head *h, struct framing_fields *ff)
{
    memset(ff, 0, sizeof *ff);
    for (size_t i = 0; i < h->nfields; i++) {
        const struct h1_field *f = &h->fields[i];
        if (name_is(f, "Content-Length")) {
            uint64_t n;
            if (!parse_length(f->value, f->vlen, &n) || (ff->have_len && n != ff->length))
                ff->bad_len = true;
            else
                ff->length = n;
            ff->have_len = true;
        } else if (name_is(f, "Transfer-Encoding")) {
            ff->have_te = true;
            scan_codings(f->value, f->vlen, ff);
        } else if (name_is(f, "Host")) {
            ff->hosts++;
            if (!h1_authority_ok(f->value, f->vlen))
                ff->bad_host = true;
        } else if (name_is(f, "Connection")) {
            if (h1_token_listed(f->value, f->vlen, "close"))
                ff->close = true;
        }
    }
}

/* The Transfer-Encoding codings: 0 when they are exactly one "chunked", 501 for another
 * coding, 400 for none or a repeated one. */
static int codings_status(const struct framing_fields *ff)
{
    if (ff->te_other)
        return 501;
    return ff->te_chunked == 1 ? 0 : 400;
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
    if (!buf || !h)
        return -EINVAL;
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

int h1_request_framing(struct h1_head *h)
{
    if (!h)
        return -EINVAL;
    struct framing_fields ff;
    scan_framing(h, &ff);
    h->hosts = ff.hosts;
    h->length = ff.length;
    if (ff.bad_len || ff.bad_host)
        return 400;
    if (h->hosts > 1 || (h->minor >= 1 && h->hosts == 0))
        return 400;
    if (ff.have_te) {
        if (ff.have_len || h->minor == 0)
            return 400;
        int rc = codings_status(&ff);
        if (rc)
            return rc;
        h->framing = H1_CHUNKED;
    } else {
        h->framing = ff.have_len && h->length > 0 ? H1_LENGTH : H1_NONE;
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
    if (!h)
        return -EINVAL;
    struct framing_fields ff;
    scan_framing(h, &ff);
    h->length = ff.length;
    h->close = ff.close;
    if (ff.bad_len)
        return 502;
    h->has_length = ff.have_len;
    if (h->status == 101)
        return 502; /* no upgrade was asked for */
    if (ff.have_te && (ff.have_len || codings_status(&ff) != 0))
        return 502;
    if (h->status < 200 || h->status == 204 || h->status == 304 || head_request)
        h->framing = H1_NONE;
    else if (ff.have_te)
        h->framing = H1_CHUNKED;
    else if (ff.have_len)
        h->framing = h->length > 0 ? H1_LENGTH : H1_NONE;
    else
        h->framing = H1_CLOSE;
    if (h->minor == 0 || h->framing == H1_CLOSE)
        h->close = true;
    return 0;
}

bool h1_token_listed(const char *v, size_t len, const char *token)
{
    if (!token || (!v && len > 0))
        return false;
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

ssize_t h1_head_end(struct h1_head_scan *s, const char *piece, size_t n)
{
    if (!s || (!piece && n > 0))
        return -EINVAL;
    /* matched: 0 nothing, 1 CR, 2 CR LF, 3 CR LF CR.  Every LF must follow a CR: a bare LF ends
     * the head's chances at once, not at the size limit. */
    unsigned char m = s->matched;
    for (size_t i = 0; i < n; i++) {
        char c = piece[i];
        if (c == '\n') {
            if (m != 1 && m != 3) {
                s->len += i;
                s->matched = m;
                return -EBADMSG;
            }
            if (m == 3) {
                ssize_t len = (ssize_t)(s->len + i + 1);
                memset(s, 0, sizeof *s);
                return len;
            }
            m = 2;
        } else if (c == '\r') {
            m = m == 2 ? 3 : 1;
        } else {
            m = 0;
        }
    }
    s->len += n;
    s->matched = m;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* bodies                                                                                      */

/* The phases of a chunk-size line: its hex digits, white space after them, extensions, its CR
 * (h1_body.phase in H1B_CHUNK_SIZE). */
enum {
    SIZE_DIGITS,
    SIZE_SPACE,
    SIZE_EXT,
    SIZE_CR
};
/* The phases of a trailer line: its start (a name, or the CR of the empty line), the name, the
 * value, the CR of a field line, the CR of the empty line (in H1B_TRAILER). */
enum {
    TRAILER_START,
    TRAILER_NAME,
    TRAILER_VALUE,
    TRAILER_CR,
    TRAILER_LAST_CR
};

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One byte of a chunk-size line: chunk-size = 1*HEXDIG (at most 15), then optional white
 * space, then optional ";" extensions (checked as value bytes and dropped), then CRLF.  Returns
 * 0, or -1 when the line cannot be one.  At its LF the state moves on (data or trailer). */
static int size_byte(struct h1_body *b, char c)
{
    switch (b->phase) {
    case SIZE_CR:
        if (c != '\n')
            return -1;
        if (b->left == 0) {
            b->state = H1B_TRAILER;
            b->phase = TRAILER_START;
            b->trailer_bytes = 0;
        } else {
            b->state = H1B_CHUNK_DATA;
        }
        b->line = 0;
        return 0;
    case SIZE_DIGITS: {
        int d = hex_value(c);
        if (d >= 0) {
            if (b->digits == 15)
                return -1;
            b->left = b->left * 16 + (uint64_t)d;
            b->digits++;
            break;
        }
        if (b->digits == 0)
            return -1;
        if (c == ' ' || c == '\t')
            b->phase = SIZE_SPACE;
        else if (c == ';')
            b->phase = SIZE_EXT;
        else if (c == '\r')
            b->phase = SIZE_CR;
        else
            return -1;
        break;
    }
    case SIZE_SPACE:
        if (c == ';')
            b->phase = SIZE_EXT;
        else if (c == '\r')
            b->phase = SIZE_CR;
        else if (c != ' ' && c != '\t')
            return -1;
        break;
    default: /* SIZE_EXT */
        if (c == '\r')
            b->phase = SIZE_CR;
        else if (!is_value_byte((unsigned char)c))
            return -1;
        break;
    }
    if (c != '\r' && ++b->line > H1_MAX_LINE)
        return -1;
    return 0;
}

/* One byte of the trailer section: field lines checked like a head's (a token, a colon, value
 * bytes) and dropped, then the empty line.  Returns 0, or -1.  At the last LF the body is done. */
static int trailer_byte(struct h1_body *b, char c)
{
    /* The section's bytes count from the first after the last chunk's line; its final empty
     * line does not count against H1_MAX_TRAILER, every other byte does, at once. */
    b->trailer_bytes++;
    bool last_line = b->phase == TRAILER_LAST_CR || (b->phase == TRAILER_START && c == '\r');
    if (!last_line && b->trailer_bytes > H1_MAX_TRAILER)
        return -1;
    switch (b->phase) {
    case TRAILER_START:
        if (c == '\r') {
            b->phase = TRAILER_LAST_CR;
            return 0;
        }
        if (!is_tchar((unsigned char)c))
            return -1;
        b->phase = TRAILER_NAME;
        break;
    case TRAILER_NAME:
        if (c == ':')
            b->phase = TRAILER_VALUE;
        else if (!is_tchar((unsigned char)c))
            return -1;
        break;
    case TRAILER_VALUE:
        if (c == '\r') {
            b->phase = TRAILER_CR;
            return 0;
        }
        if (!is_value_byte((unsigned char)c))
            return -1;
        break;
    case TRAILER_CR:
        if (c != '\n')
            return -1;
        b->phase = TRAILER_START;
        b->line = 0;
        return 0;
    default: /* TRAILER_LAST_CR */
        if (c != '\n')
            return -1;
        b->state = H1B_DONE;
        return 0;
    }
    if (++b->line > H1_MAX_LINE)
        return -1;
    return 0;
}

int h1_body_step(struct h1_body *b, const char *in, size_t len, size_t *used, struct h1_span *data)
{
    if (!b || !used || !data || (!in && len > 0))
        return -EINVAL;
    *data = (struct h1_span){0, 0};
    size_t p = 0;
    for (;;) {
        switch (b->state) {
        case H1B_DONE: *used = p; return 1;
        case H1B_UNTIL_CLOSE:
            *data = (struct h1_span){p, len - p};
            b->total += len - p;
            *used = len;
            return 0;
        case H1B_LENGTH:
        case H1B_CHUNK_DATA: {
            /* One span of data per call: the caller takes it before the framing after it. */
            size_t n = len - p < b->left ? len - p : (size_t)b->left;
            *data = (struct h1_span){p, n};
            p += n;
            b->left -= n;
            b->total += n;
            *used = p;
            if (b->left > 0)
                return 0;
            if (b->state == H1B_LENGTH) {
                b->state = H1B_DONE;
                return 1;
            }
            b->state = H1B_CHUNK_CRLF;
            b->phase = 0;
            return 0;
        }
        case H1B_CHUNK_CRLF:
            for (; p < len && b->state == H1B_CHUNK_CRLF; p++) {
                if (in[p] != (b->phase == 0 ? '\r' : '\n'))
                    goto bad;
                if (b->phase++ == 1) {
                    b->state = H1B_CHUNK_SIZE;
                    b->phase = SIZE_DIGITS;
                    b->digits = 0;
                    b->line = 0;
                }
            }
            if (b->state == H1B_CHUNK_CRLF) {
                *used = p;
                return 0;
            }
            break;
        case H1B_CHUNK_SIZE:
        case H1B_TRAILER: {
            enum h1_body_state st = b->state;
            for (; p < len && b->state == st; p++)
                if ((st == H1B_CHUNK_SIZE ? size_byte(b, in[p]) : trailer_byte(b, in[p])) < 0)
                    goto bad;
            if (b->state == st) {
                *used = p;
                return 0;
            }
            break;
        }
        }
    }
bad:
    *used = p;
    return -EBADMSG;
}

void h1_body_init(struct h1_body *b, enum h1_framing framing, uint64_t length)
{
    if (!b)
        return;
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
