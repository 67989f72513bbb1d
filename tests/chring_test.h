/* Helpers shared by the black-box Criterion suites in tests/.  Only the public header is used.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_TEST_H
#define CHRING_TEST_H

#include <chring.h>
#include <criterion/criterion.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A custom hash backed by a table of strings: the hand-made rings of docs/design.md §10 are built
 * from it.  Strings missing from the table hash to `fallback`. */
struct table_entry {
    const char *text;
    uint64_t value;
};

struct table_hash {
    const struct table_entry *entries;
    size_t count;
    uint64_t fallback;
};

static inline uint64_t table_hash_fn(const void *data, size_t len, void *ctx)
{
    const struct table_hash *table = ctx;
    for (size_t i = 0; i < table->count; i++) {
        const char *text = table->entries[i].text;
        if (strlen(text) == len && (len == 0 || memcmp(text, data, len) == 0))
            return table->entries[i].value;
    }
    return table->fallback;
}

/* The worked example of docs/design.md §10: a 64-bit table hash, points a#0=10, b#0=30, c#0=50,
 * a#1=60, b#1=80, c#1=95 and keys k1=5, k2=55, k3=85, k4=97, k5=30. */
static const struct table_entry worked_entries[] = {
    {"a#0", 10}, {"b#0", 30}, {"c#0", 50}, {"a#1", 60}, {"b#1", 80}, {"c#1", 95},
    {"k1", 5},   {"k2", 55},  {"k3", 85},  {"k4", 97},  {"k5", 30},
};
static const struct table_hash worked_table = {worked_entries,
                                               sizeof worked_entries / sizeof worked_entries[0], 0};

/* Creates a ring or fails the test. */
static inline chring_t *ring_create(const chring_config_t *cfg)
{
    chring_t *r = NULL;
    int rc = chring_new(&r, cfg);
    cr_assert_eq(rc, 0, "chring_new failed: %d", rc);
    cr_assert_not_null(r, "chring_new returned no ring");
    return r;
}

/* A custom-profile ring over a table hash with `vnodes` points per unit of weight. */
static inline chring_t *table_ring(const struct table_hash *table, unsigned bits, uint32_t vnodes,
                                   double balance)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = CHRING_PROFILE_CUSTOM;
    cfg.hash = table_hash_fn;
    cfg.hash_ctx = (void *)table;
    cfg.hash_bits = bits;
    cfg.vnodes = vnodes;
    cfg.balance = balance;
    return ring_create(&cfg);
}

/* The worked-example ring with a, b, c added (in the given order) at weight 1, vnodes 2. */
static inline chring_t *worked_ring(const char *order, double balance)
{
    chring_t *r = table_ring(&worked_table, 64, 2, balance);
    for (const char *p = order; *p; p++) {
        char name[2] = {*p, 0};
        int rc = chring_add(r, name, 1, NULL);
        cr_assert_eq(rc, 0, "chring_add(%s) failed: %d", name, rc);
    }
    return r;
}

static inline void add_or_fail(chring_t *r, const char *name, uint32_t weight, void *udata)
{
    int rc = chring_add(r, name, weight, udata);
    cr_assert_eq(rc, 0, "chring_add(%s, %u) failed: %d", name, (unsigned)weight, rc);
}

/* Adds members "<prefix><i>" for i in [first, first + count). */
static inline void add_numbered(chring_t *r, const char *prefix, int first, int count)
{
    char name[64];
    for (int i = first; i < first + count; i++) {
        snprintf(name, sizeof name, "%s%d", prefix, i);
        add_or_fail(r, name, 1, NULL);
    }
}

/* A ring's point copied out of a snapshot (chring_snap_point), for the tests that check lookups
 * against the points themselves. */
struct copied_point {
    uint64_t pos;
    const chring_member_t *m;
};

/* The index of the first of n sorted copied points at or after h (wrapping to 0). */
static inline size_t point_by_search(const struct copied_point *p, size_t n, uint64_t h)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p[mid].pos < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == n ? 0 : lo;
}

/* The owner's name of a NUL-terminated key in s, or NULL. */
static inline const char *owner_of(const chring_snap_t *s, const char *key)
{
    const chring_member_t *m = chring_snap_lookup(s, key, strlen(key));
    return m ? chring_member_name(m) : NULL;
}

static inline char *copy_string(const char *text)
{
    size_t len = strlen(text);
    char *copy = malloc(len + 1);
    cr_assert_not_null(copy, "out of memory in the test");
    memcpy(copy, text, len + 1);
    return copy;
}

static inline void key_name(char *buf, size_t cap, int i)
{
    snprintf(buf, cap, "key-%d", i);
}

/* Owners of keys key-0 .. key-(count-1), names copied (so they outlive the snapshot). */
static inline char **owners_copy(chring_t *r, int count)
{
    char **owners = calloc((size_t)count, sizeof *owners);
    cr_assert_not_null(owners, "out of memory in the test");
    const chring_snap_t *s = chring_snap_enter(r);
    char key[32];
    for (int i = 0; i < count; i++) {
        key_name(key, sizeof key, i);
        const char *name = owner_of(s, key);
        owners[i] = name ? copy_string(name) : NULL;
    }
    chring_snap_exit(r, s);
    return owners;
}

static inline void owners_free(char **owners, int count)
{
    for (int i = 0; i < count; i++)
        free(owners[i]);
    free(owners);
}

static inline int str_eq_null(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

/* The current snapshot's version. */
static inline uint64_t ring_version(chring_t *r)
{
    const chring_snap_t *s = chring_snap_enter(r);
    uint64_t v = chring_snap_version(s);
    chring_snap_exit(r, s);
    return v;
}

/* Independent reference implementations for expected values. */
static inline uint64_t ref_fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static inline uint32_t ref_fnv1a32(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

static inline uint64_t ref_mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ull;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z;
}

static inline uint64_t ref_hash64(const void *data, size_t len)
{
    return ref_mix64(ref_fnv1a64(data, len));
}

#endif /* CHRING_TEST_H */
