/* chring-lb: the routing key of an LLM request (--key prompt), read from its JSON body.
 *
 * SPDX-License-Identifier: MIT
 *
 * The body is parsed with libjansson.  jansson builds the whole tree (it has no streaming
 * reader), and a tree costs far more than its text: "[0,0,0,...]" of 16 MB is 8 M values of
 * about 60 bytes each, half a gigabyte.  So a scan of the bytes comes first (bounds(): strings,
 * containers and separators outside strings, and the nesting depth), and a body over the bounds
 * is not parsed: it routes by the empty key and is forwarded unchanged, like any body that is
 * not a JSON object.  jansson's own depth limit (2048) would bound the recursion but not the
 * values.  Duplicate keys: jansson keeps the last, as Python's json (vLLM, SGLang) does, so the
 * key follows the value the engine will read.
 */
#include "prompt.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The key being written: out[0..cap), n bytes so far; bytes past cap are dropped. */
struct keybuf {
    char *out;
    size_t cap, n;
};

static void put(struct keybuf *k, const char *s, size_t len)
{
    if (k->n >= k->cap)
        return;
    size_t room = k->cap - k->n;
    if (len > room)
        len = room;
    memcpy(k->out + k->n, s, len);
    k->n += len;
}

static bool full(const struct keybuf *k)
{
    return k->n >= k->cap;
}

static void put_string(struct keybuf *k, const json_t *s)
{
    if (json_is_string(s))
        put(k, json_string_value(s), json_string_length(s));
}

/* True when the body keeps LB_PROMPT_MAX_VALUES and LB_PROMPT_MAX_DEPTH (counted outside
 * strings; a string's escapes are skipped so that \" does not end it).  Malformed JSON may pass:
 * jansson refuses it afterwards. */
static bool bounds(const char *b, size_t len)
{
    size_t values = 0, depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = b[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
            continue;
        }
        switch (c) {
        case '"':
            in_string = true;
            values++;
            break;
        case '{':
        case '[':
            if (++depth > LB_PROMPT_MAX_DEPTH)
                return false;
            values++;
            break;
        case '}':
        case ']':
            if (depth > 0)
                depth--;
            break;
        case ',':
            values++;
            break;
        default: break;
        }
        if (values > LB_PROMPT_MAX_VALUES)
            return false;
    }
    return true;
}

/* Token ids: each integer in decimal and one space; other elements are skipped. */
static void put_ids(struct keybuf *k, const json_t *a)
{
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        if (full(k))
            return;
        if (json_is_integer(v)) {
            char num[32];
            int w = snprintf(num, sizeof num, "%lld ", (long long)json_integer_value(v));
            if (w > 0)
                put(k, num, (size_t)w);
        }
    }
}

static void put_prompt(struct keybuf *k, const json_t *p)
{
    if (json_is_string(p)) {
        put_string(k, p);
        return;
    }
    if (!json_is_array(p) || json_array_size(p) == 0)
        return;
    const json_t *first = json_array_get(p, 0);
    if (json_is_string(first))
        put_string(k, first);
    else if (json_is_integer(first))
        put_ids(k, p);
    else if (json_is_array(first))
        put_ids(k, first);
}

/* A message's content: a string, or the text of its parts of type "text", concatenated. */
static void put_content(struct keybuf *k, const json_t *c)
{
    if (json_is_string(c)) {
        put_string(k, c);
        return;
    }
    if (!json_is_array(c))
        return;
    size_t i;
    const json_t *part;
    json_array_foreach(c, i, part)
    {
        if (full(k))
            return;
        const json_t *type = json_object_get(part, "type");
        if (json_is_string(type) && strcmp(json_string_value(type), "text") == 0)
            put_string(k, json_object_get(part, "text"));
    }
}

static void put_messages(struct keybuf *k, const json_t *msgs)
{
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m)
    {
        if (full(k))
            return;
        if (!json_is_object(m))
            continue;
        put_string(k, json_object_get(m, "role"));
        put(k, "\n", 1);
        put_content(k, json_object_get(m, "content"));
        put(k, "\n", 1);
    }
}

size_t lb_prompt_key(const char *body, size_t len, char *out, size_t cap, enum lb_prompt_kind *kind)
{
    enum lb_prompt_kind kd = LB_PROMPT_NONE;
    struct keybuf k = {out, cap, 0};
    /* Not an object at all: no parse (the first byte after white space must be '{'). */
    size_t i = 0;
    while (body && i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
        i++;
    if (!body || i == len || body[i] != '{')
        goto done;
    if (!bounds(body, len)) {
        kd = LB_PROMPT_TOO_LARGE;
        goto done;
    }
    json_error_t err;
    /* JSON_ALLOW_NUL: "\u0000" inside a prompt is text like any other (lengths are kept). */
    json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, &err);
    if (!json_is_object(root)) {
        json_decref(root);
        goto done;
    }
    put_string(&k, json_object_get(root, "model"));
    put(&k, "", 1); /* the NUL byte between the model and the prompt */
    const json_t *msgs = json_object_get(root, "messages");
    const json_t *prompt = json_object_get(root, "prompt");
    if (json_is_array(msgs)) {
        kd = LB_PROMPT_MESSAGES;
        put_messages(&k, msgs);
    } else if (prompt) {
        kd = LB_PROMPT_TEXT;
        put_prompt(&k, prompt);
    } else {
        kd = LB_PROMPT_OBJECT;
    }
    json_decref(root);
done:
    if (kind)
        *kind = kd;
    return kd == LB_PROMPT_NONE || kd == LB_PROMPT_TOO_LARGE ? 0 : k.n;
}
