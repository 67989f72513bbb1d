/* chring-lb: a small JSON reader for etcd's answers (etcd.c).
 *
 * SPDX-License-Identifier: MIT
 *
 * lb_json_parse builds a tree of the whole text in one allocation-per-node pass (depth and size
 * bounded); lookups by key are linear in an object's members, which is what the few fields etcd
 * answers need.  Strings are unescaped (\uXXXX as UTF-8, surrogate pairs joined); numbers are
 * kept as their text (etcd writes 64-bit revisions as strings anyway).
 */
#ifndef CHRING_LB_JSON_H
#define CHRING_LB_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum lb_json_type {
    LBJ_NULL,
    LBJ_BOOL,
    LBJ_NUMBER,
    LBJ_STRING,
    LBJ_ARRAY,
    LBJ_OBJECT
};

struct lb_json {
    enum lb_json_type type;
    char *key;  /* member name inside an object, else NULL */
    char *text; /* LBJ_STRING (unescaped, NUL-terminated; len bytes) and LBJ_NUMBER */
    size_t len; /* of text */
    bool truth; /* LBJ_BOOL */
    struct lb_json *child, *next; /* LBJ_ARRAY / LBJ_OBJECT: first child; siblings */
};

/* Parses text[0..len) (one value, white space around it allowed).  Returns the tree, or NULL
 * for malformed input, nesting deeper than 64, or out of memory. */
struct lb_json *lb_json_parse(const char *text, size_t len);
void lb_json_free(struct lb_json *j);
/* The member named key of object j, or NULL (also when j is NULL or not an object). */
const struct lb_json *lb_json_get(const struct lb_json *j, const char *key);
/* The value of a string or number as an unsigned 64-bit integer: true and *out when it is a
 * plain decimal (etcd's revisions are strings of digits). */
bool lb_json_u64(const struct lb_json *j, uint64_t *out);

#endif
