/* chring command engine: reading a command line (words, decimal numbers, member names).
 *
 * SPDX-License-Identifier: MIT
 *
 * A line is a byte range that may hold any byte, NUL included; nothing here assumes a
 * terminating NUL.  Words are the runs of non-blank bytes (docs/cli.md, "Lines").
 */
#include "cli_internal.h"

bool cli_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static char ascii_upper(char c)
{
    return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
}

bool cli_word_is(span_t word, const char *upper)
{
    size_t n = strlen(upper);
    if (word.len != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (ascii_upper(word.ptr[i]) != upper[i])
            return false;
    return true;
}

bool cli_next_word(const char *line, size_t len, size_t *pos, span_t *word)
{
    size_t i = *pos;
    while (i < len && cli_is_space(line[i]))
        i++;
    if (i == len) {
        *pos = i;
        return false;
    }
    size_t start = i;
    while (i < len && !cli_is_space(line[i]))
        i++;
    word->ptr = line + start;
    word->len = i - start;
    *pos = i;
    return true;
}

bool cli_rest_is_blank(const char *line, size_t len, size_t pos)
{
    for (; pos < len; pos++)
        if (!cli_is_space(line[pos]))
            return false;
    return true;
}

bool cli_parse_u64(span_t word, uint64_t max, uint64_t *out)
{
    if (word.len == 0 || word.len > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < word.len; i++) {
        char c = word.ptr[i];
        if (c < '0' || c > '9')
            return false;
        uint64_t d = (uint64_t)(c - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

const char *cli_name_check(span_t name)
{
    if (name.len > CHRING_NAME_MAX)
        return "name too long";
    if (memchr(name.ptr, '\0', name.len))
        return "name contains a NUL byte";
    return NULL;
}

char *cli_span_dup(span_t s)
{
    char *copy = malloc(s.len + 1);
    if (!copy)
        return NULL;
    if (s.len > 0)
        memcpy(copy, s.ptr, s.len);
    copy[s.len] = '\0';
    return copy;
}

/* ---------------------------------------------------------------------------------------------
 * Name lists (POOL, ADD, REMOVE)
 * ------------------------------------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b)
{
    const cli_name_t *x = a, *y = b;
    size_t n = x->name.len < y->name.len ? x->name.len : y->name.len;
    int c = memcmp(x->name.ptr, y->name.ptr, n);
    if (c != 0)
        return c;
    if (x->name.len != y->name.len)
        return x->name.len < y->name.len ? -1 : 1;
    return x->order < y->order ? -1 : (x->order > y->order ? 1 : 0);
}

static int cmp_order(const void *a, const void *b)
{
    const cli_name_t *x = a, *y = b;
    return x->order < y->order ? -1 : (x->order > y->order ? 1 : 0);
}

void cli_names_free(cli_names_t *list)
{
    for (size_t i = 0; i < list->len; i++)
        free(list->items[i].cstr);
    free(list->items);
    list->items = NULL;
    list->len = 0;
}

const char *cli_parse_names(const char *line, size_t len, size_t pos, cli_names_t *list)
{
    list->items = NULL;
    list->len = 0;
    size_t count = 0, scan = pos;
    span_t word;
    while (cli_next_word(line, len, &scan, &word)) {
        const char *reason = cli_name_check(word);
        if (reason)
            return reason;
        count++;
    }
    if (count == 0)
        return NULL;
    list->items = calloc(count, sizeof(*list->items));
    if (!list->items)
        return "out of memory";
    scan = pos;
    while (cli_next_word(line, len, &scan, &word)) {
        list->items[list->len].name = word;
        list->items[list->len].order = list->len;
        list->len++;
    }
    /* Drop repeats: sort by (name, order), keep the first of each run, restore command order. */
    qsort(list->items, list->len, sizeof(*list->items), cmp_name);
    size_t kept = 0;
    for (size_t i = 0; i < list->len; i++) {
        if (kept > 0 && list->items[kept - 1].name.len == list->items[i].name.len &&
            memcmp(list->items[kept - 1].name.ptr, list->items[i].name.ptr,
                   list->items[i].name.len) == 0)
            continue;
        list->items[kept++] = list->items[i];
    }
    list->len = kept;
    qsort(list->items, list->len, sizeof(*list->items), cmp_order);
    for (size_t i = 0; i < list->len; i++) {
        cli_name_t *it = &list->items[i];
        it->cstr = cli_span_dup(it->name);
        if (!it->cstr) {
            cli_names_free(list);
            return "out of memory";
        }
    }
    return NULL;
}
