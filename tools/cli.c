/* chring command engine (SPEC §7): parses one command line and answers it.
 *
 * SPDX-License-Identifier: MIT
 *
 * State kept by the engine, and who owns it:
 * - The ring (chring_t) and the pool: the members in listed order, for DIST, STATS and the
 *   `mod` scheme of SNAP/MOVED.  Every pool entry is a cli_member, handed to the library as the
 *   member's udata; from the publish that adds it the ring owns it and frees it through the
 *   retire callback (SPEC §4), possibly on liburcu's call_rcu thread.  So the engine never touches
 *   an entry after the publish that removes it: the pool array is rebuilt before each writer call
 *   and swapped in when the call succeeds.  The pool always lists exactly the members of the
 *   current snapshot.
 * - The SNAP record: copies of the pool names at SNAP time and, per key, the index of its ring
 *   owner and of its mod owner in that copy (CLI_EMPTY for no owner).
 * - The leases of ACQUIRE, numbered 1, 2, ... in a growing array sorted by number.
 * The engine is single-threaded and uses only the public header.
 */
#include "cli.h"

#include <chring.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define CLI_EMPTY UINT32_MAX

typedef struct cli_member {
    char *name;          /* NUL-terminated copy of the name */
    size_t len;          /* its length */
    uint64_t load;       /* caller-supplied load (LOAD), read by BOUNDED */
    uint32_t snap_index; /* scratch: the position in the pool while SNAP runs */
    bool leaving;        /* scratch: named by the REMOVE being executed */
} cli_member_t;

typedef struct cli_lease {
    uint64_t number;      /* the number ACQUIRE printed */
    chring_lease_t lease; /* .member == NULL once released */
} cli_lease_t;

/* A byte range of the line. */
typedef struct span {
    const char *ptr;
    size_t len;
} span_t;

struct chring_cli {
    chring_t *ring;
    double balance;

    cli_member_t **pool; /* members in listed order */
    size_t pool_len;

    bool snapped;
    char **snap_names; /* the pool at SNAP time (copies) */
    size_t *snap_name_lens;
    size_t snap_pool_len;
    uint32_t *snap_ring; /* per key: index into snap_names or CLI_EMPTY */
    uint32_t *snap_mod;
    size_t snap_count;

    cli_lease_t *leases; /* sorted by number; released ones are compacted away lazily */
    size_t leases_len, leases_cap, leases_live;
    uint64_t next_lease;
};

/* ---------------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------------- */

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static char ascii_upper(char c)
{
    return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
}

/* Case-insensitive comparison of a token with an upper-case command word. */
static bool word_is(span_t tok, const char *word)
{
    size_t n = strlen(word);
    if (tok.len != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (ascii_upper(tok.ptr[i]) != word[i])
            return false;
    return true;
}

/* The next whitespace-separated token at or after *pos; false at the end of the line. */
static bool next_token(const char *line, size_t len, size_t *pos, span_t *tok)
{
    size_t i = *pos;
    while (i < len && is_space(line[i]))
        i++;
    if (i == len) {
        *pos = i;
        return false;
    }
    size_t start = i;
    while (i < len && !is_space(line[i]))
        i++;
    tok->ptr = line + start;
    tok->len = i - start;
    *pos = i;
    return true;
}

static bool rest_is_blank(const char *line, size_t len, size_t pos)
{
    for (; pos < len; pos++)
        if (!is_space(line[pos]))
            return false;
    return true;
}

/* A decimal number of at most max: digits only, no sign, no blanks. */
static bool parse_u64(span_t tok, uint64_t max, uint64_t *out)
{
    if (tok.len == 0 || tok.len > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < tok.len; i++) {
        char c = tok.ptr[i];
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

static void put_bytes(FILE *out, const char *p, size_t n)
{
    if (n > 0)
        fwrite(p, 1, n, out);
}

static void put_name(FILE *out, const chring_member_t *m)
{
    const char *name = chring_member_name(m);
    put_bytes(out, name, strlen(name));
}

static void answer_err(FILE *out, const char *reason)
{
    fprintf(out, "ERR %s\n", reason);
}

static void answer_lib_err(FILE *out, int rc)
{
    fprintf(out, "ERR %s\n", chring_strerror(rc));
}

static void retire_member(void *udata, void *ctx)
{
    (void)ctx;
    cli_member_t *m = udata;
    if (m) {
        free(m->name);
        free(m);
    }
}

static cli_member_t *member_new(span_t name)
{
    cli_member_t *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->name = malloc(name.len + 1);
    if (!m->name) {
        free(m);
        return NULL;
    }
    memcpy(m->name, name.ptr, name.len);
    m->name[name.len] = '\0';
    m->len = name.len;
    return m;
}

/* The pool entry of a name, or NULL if the name is not a member. */
static cli_member_t *pool_find(chring_cli_t *cli, const char *name)
{
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    const chring_member_t *m = chring_snap_find(s, name);
    cli_member_t *cm = m ? chring_member_udata(m) : NULL;
    chring_snap_exit(cli->ring, s);
    return cm;
}

/* ---------------------------------------------------------------------------------------------
 * Name lists (POOL, ADD, REMOVE)
 * ------------------------------------------------------------------------------------------- */

typedef struct name_item {
    span_t name;
    size_t order; /* position in the command */
    char *cstr;   /* NUL-terminated copy, for the library */
} name_item_t;

typedef struct name_list {
    name_item_t *items;
    size_t len;
} name_list_t;

static int cmp_name_item(const void *a, const void *b)
{
    const name_item_t *x = a, *y = b;
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
    const name_item_t *x = a, *y = b;
    return x->order < y->order ? -1 : (x->order > y->order ? 1 : 0);
}

static void name_list_free(name_list_t *list)
{
    for (size_t i = 0; i < list->len; i++)
        free(list->items[i].cstr);
    free(list->items);
    list->items = NULL;
    list->len = 0;
}

/* Parses the names after the command into a list without repeats (the first one of equal names
 * is kept), in command order.  Returns NULL, or the reason of an ERR answer. */
static const char *parse_names(const char *line, size_t len, size_t pos, name_list_t *list)
{
    list->items = NULL;
    list->len = 0;
    size_t count = 0, scan = pos;
    span_t tok;
    while (next_token(line, len, &scan, &tok)) {
        if (tok.len > CHRING_NAME_MAX)
            return "name too long";
        if (memchr(tok.ptr, '\0', tok.len))
            return "name contains a NUL byte";
        count++;
    }
    if (count == 0)
        return NULL;
    list->items = calloc(count, sizeof(*list->items));
    if (!list->items)
        return "out of memory";
    scan = pos;
    while (next_token(line, len, &scan, &tok)) {
        list->items[list->len].name = tok;
        list->items[list->len].order = list->len;
        list->len++;
    }
    /* Drop repeats: sort by (name, order), keep the first of each run, restore command order. */
    qsort(list->items, list->len, sizeof(*list->items), cmp_name_item);
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
        name_item_t *it = &list->items[i];
        it->cstr = malloc(it->name.len + 1);
        if (!it->cstr) {
            name_list_free(list);
            return "out of memory";
        }
        memcpy(it->cstr, it->name.ptr, it->name.len);
        it->cstr[it->name.len] = '\0';
    }
    return NULL;
}

/* POOL n1 n2 ...: the membership becomes exactly these names, each at weight 1, in this order
 * (one chring_sync, one publish).  Members already in the pool keep their object, counters and
 * (fnv16) their earlier join; new names join in the listed order. */
static void cmd_pool(chring_cli_t *cli, const char *line, size_t len, size_t pos, FILE *out)
{
    name_list_t list;
    const char *reason = parse_names(line, len, pos, &list);
    if (reason) {
        answer_err(out, reason);
        return;
    }
    cli_member_t **pool = calloc(list.len ? list.len : 1, sizeof(*pool));
    chring_change_t *changes = calloc(list.len ? list.len : 1, sizeof(*changes));
    bool *fresh = calloc(list.len ? list.len : 1, sizeof(*fresh));
    int rc = (pool && changes && fresh) ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < list.len; i++) {
        cli_member_t *cm = pool_find(cli, list.items[i].cstr);
        if (!cm) {
            cm = member_new(list.items[i].name);
            if (!cm) {
                rc = -ENOMEM;
                break;
            }
            fresh[i] = true;
        }
        pool[i] = cm;
        changes[i].name = cm->name;
        changes[i].weight = 1;
        changes[i].udata = cm;
    }
    if (rc == 0)
        rc = chring_sync(cli->ring, changes, list.len);
    if (rc == 0) {
        free(cli->pool);
        cli->pool = pool;
        cli->pool_len = list.len;
        pool = NULL;
        fprintf(out, "OK\n");
    } else {
        for (size_t i = 0; pool && fresh && i < list.len; i++)
            if (fresh[i])
                retire_member(pool[i], NULL);
        answer_lib_err(out, rc);
    }
    free(pool);
    free(changes);
    free(fresh);
    name_list_free(&list);
}

/* ADD n1 n2 ...: names not yet in the pool join at weight 1 and are appended to the pool in this
 * order; names already there (or repeated) are ignored.  One chring_update: at most one publish. */
static void cmd_add(chring_cli_t *cli, const char *line, size_t len, size_t pos, FILE *out)
{
    name_list_t list;
    const char *reason = parse_names(line, len, pos, &list);
    if (reason) {
        answer_err(out, reason);
        return;
    }
    if (list.len == 0) {
        answer_err(out, "ADD needs at least one name");
        return;
    }
    cli_member_t **pool = calloc(cli->pool_len + list.len, sizeof(*pool));
    chring_change_t *changes = calloc(list.len, sizeof(*changes));
    size_t added = 0;
    int rc = (pool && changes) ? 0 : -ENOMEM;
    if (rc == 0 && cli->pool_len > 0)
        memcpy(pool, cli->pool, cli->pool_len * sizeof(*pool));
    for (size_t i = 0; rc == 0 && i < list.len; i++) {
        if (pool_find(cli, list.items[i].cstr))
            continue;
        cli_member_t *cm = member_new(list.items[i].name);
        if (!cm) {
            rc = -ENOMEM;
            break;
        }
        pool[cli->pool_len + added] = cm;
        changes[added].name = cm->name;
        changes[added].weight = 1;
        changes[added].udata = cm;
        added++;
    }
    if (rc == 0 && added > 0)
        rc = chring_update(cli->ring, changes, added);
    if (rc == 0) {
        free(cli->pool);
        cli->pool = pool;
        cli->pool_len += added;
        pool = NULL;
        fprintf(out, "OK\n");
    } else {
        for (size_t i = 0; pool && i < added; i++)
            retire_member(pool[cli->pool_len + i], NULL);
        answer_lib_err(out, rc);
    }
    free(pool);
    free(changes);
    name_list_free(&list);
}

/* REMOVE n1 n2 ...: members named here leave the ring and the pool (the others keep their order);
 * unknown or repeated names are ignored.  One chring_update: at most one publish. */
static void cmd_remove(chring_cli_t *cli, const char *line, size_t len, size_t pos, FILE *out)
{
    name_list_t list;
    const char *reason = parse_names(line, len, pos, &list);
    if (reason) {
        answer_err(out, reason);
        return;
    }
    if (list.len == 0) {
        answer_err(out, "REMOVE needs at least one name");
        return;
    }
    chring_change_t *changes = calloc(list.len, sizeof(*changes));
    cli_member_t **pool = calloc(cli->pool_len ? cli->pool_len : 1, sizeof(*pool));
    size_t removed = 0, kept = 0;
    int rc = (changes && pool) ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < list.len; i++) {
        cli_member_t *cm = pool_find(cli, list.items[i].cstr);
        if (!cm)
            continue;
        cm->leaving = true;
        changes[removed].name = cm->name;
        changes[removed].weight = 0;
        removed++;
    }
    /* The new pool is built before the publish: after it the removed entries belong to the
     * ring's retire callback and may already be freed. */
    for (size_t i = 0; i < cli->pool_len; i++) {
        if (!cli->pool[i]->leaving && pool)
            pool[kept++] = cli->pool[i];
        cli->pool[i]->leaving = false;
    }
    if (rc == 0 && removed > 0)
        rc = chring_update(cli->ring, changes, removed);
    if (rc == 0) {
        if (removed > 0) {
            free(cli->pool);
            cli->pool = pool;
            cli->pool_len = kept;
            pool = NULL;
        }
        fprintf(out, "OK\n");
    } else {
        answer_lib_err(out, rc);
    }
    free(pool);
    free(changes);
    name_list_free(&list);
}

/* ---------------------------------------------------------------------------------------------
 * Lookups and listings
 * ------------------------------------------------------------------------------------------- */

static void cmd_lookup(chring_cli_t *cli, span_t key, FILE *out)
{
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    const chring_member_t *m = chring_snap_lookup(s, key.ptr, key.len);
    if (m) {
        put_name(out, m);
        fputc('\n', out);
    } else {
        fprintf(out, "EMPTY\n");
    }
    chring_snap_exit(cli->ring, s);
}

static void cmd_hash(chring_cli_t *cli, span_t s_arg, FILE *out)
{
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    fprintf(out, "%" PRIu64 "\n", chring_snap_hash(s, s_arg.ptr, s_arg.len));
    chring_snap_exit(cli->ring, s);
}

static void cmd_ring(chring_cli_t *cli, FILE *out)
{
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    size_t n = chring_snap_points(s);
    for (size_t i = 0; i < n; i++) {
        uint64_t pos;
        const chring_member_t *m;
        if (chring_snap_point(s, i, &pos, &m) != 0 || !m)
            break;
        fprintf(out, "%" PRIu64 ":", pos);
        put_name(out, m);
        fputc('\n', out);
    }
    chring_snap_exit(cli->ring, s);
}

static void cmd_dist(chring_cli_t *cli, FILE *out)
{
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    for (size_t i = 0; i < cli->pool_len; i++) {
        const chring_member_t *m = chring_snap_find(s, cli->pool[i]->name);
        put_bytes(out, cli->pool[i]->name, cli->pool[i]->len);
        fprintf(out, " points=%zu share=%.4f\n", chring_snap_member_points(s, m),
                chring_member_share(s, m));
    }
    chring_snap_exit(cli->ring, s);
}

static void cmd_version(chring_cli_t *cli, FILE *out)
{
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    fprintf(out, "%" PRIu64 "\n", chring_snap_version(s));
    chring_snap_exit(cli->ring, s);
}

/* ---------------------------------------------------------------------------------------------
 * SNAP and MOVED
 * ------------------------------------------------------------------------------------------- */

static void snap_clear(chring_cli_t *cli)
{
    for (size_t i = 0; i < cli->snap_pool_len; i++)
        free(cli->snap_names[i]);
    free(cli->snap_names);
    free(cli->snap_name_lens);
    free(cli->snap_ring);
    free(cli->snap_mod);
    cli->snap_names = NULL;
    cli->snap_name_lens = NULL;
    cli->snap_ring = NULL;
    cli->snap_mod = NULL;
    cli->snap_pool_len = 0;
    cli->snap_count = 0;
    cli->snapped = false;
}

static size_t snap_key(char *buf, size_t cap, size_t i)
{
    int n = snprintf(buf, cap, "key%zu", i);
    return n < 0 ? 0 : (size_t)n;
}

/* The index of a snapshot member in the pool (cli_member.snap_index was set for this SNAP). */
static uint32_t snap_owner_index(chring_cli_t *cli, const chring_member_t *m)
{
    if (!m)
        return CLI_EMPTY;
    const cli_member_t *cm = chring_member_udata(m);
    if (cm && cm->snap_index < cli->pool_len && cli->pool[cm->snap_index] == cm)
        return cm->snap_index;
    /* Not reached while the pool mirrors the snapshot; fall back to comparing names. */
    const char *name = chring_member_name(m);
    for (size_t i = 0; i < cli->pool_len; i++)
        if (strcmp(cli->pool[i]->name, name) == 0)
            return (uint32_t)i;
    return CLI_EMPTY;
}

static void cmd_snap(chring_cli_t *cli, uint64_t count, FILE *out)
{
    char **names = calloc(cli->pool_len ? cli->pool_len : 1, sizeof(*names));
    size_t *lens = calloc(cli->pool_len ? cli->pool_len : 1, sizeof(*lens));
    uint32_t *ring = malloc((count ? count : 1) * sizeof(*ring));
    uint32_t *mod = malloc((count ? count : 1) * sizeof(*mod));
    bool ok = names && lens && ring && mod;
    for (size_t i = 0; ok && i < cli->pool_len; i++) {
        names[i] = malloc(cli->pool[i]->len + 1);
        ok = names[i] != NULL;
        if (ok) {
            memcpy(names[i], cli->pool[i]->name, cli->pool[i]->len + 1);
            lens[i] = cli->pool[i]->len;
            cli->pool[i]->snap_index = (uint32_t)i;
        }
    }
    if (!ok) {
        for (size_t i = 0; names && i < cli->pool_len; i++)
            free(names[i]);
        free(names);
        free(lens);
        free(ring);
        free(mod);
        answer_err(out, "out of memory");
        return;
    }
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    char key[32];
    for (size_t i = 0; i < count; i++) {
        size_t klen = snap_key(key, sizeof(key), i);
        ring[i] = snap_owner_index(cli, chring_snap_lookup(s, key, klen));
        mod[i] = cli->pool_len == 0
                     ? CLI_EMPTY
                     : (uint32_t)(chring_snap_hash(s, key, klen) % (uint64_t)cli->pool_len);
    }
    chring_snap_exit(cli->ring, s);
    snap_clear(cli);
    cli->snap_names = names;
    cli->snap_name_lens = lens;
    cli->snap_pool_len = cli->pool_len;
    cli->snap_ring = ring;
    cli->snap_mod = mod;
    cli->snap_count = count;
    cli->snapped = true;
    fprintf(out, "OK\n");
}

/* Whether a recorded owner (index into the SNAP copy, or CLI_EMPTY) differs from a current one
 * (a name, or NULL for no owner).  No owner is an owner value of its own: EMPTY -> EMPTY is not
 * a move, EMPTY -> x and x -> EMPTY are. */
static bool owner_changed(const chring_cli_t *cli, uint32_t then, const char *now, size_t now_len)
{
    if (then == CLI_EMPTY || !now)
        return !(then == CLI_EMPTY && !now);
    return cli->snap_name_lens[then] != now_len || memcmp(cli->snap_names[then], now, now_len) != 0;
}

static void cmd_moved(chring_cli_t *cli, FILE *out)
{
    if (!cli->snapped) {
        answer_err(out, "MOVED needs a SNAP first");
        return;
    }
    size_t moved_ring = 0, moved_mod = 0;
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    char key[32];
    for (size_t i = 0; i < cli->snap_count; i++) {
        size_t klen = snap_key(key, sizeof(key), i);
        const chring_member_t *m = chring_snap_lookup(s, key, klen);
        const char *name = m ? chring_member_name(m) : NULL;
        if (owner_changed(cli, cli->snap_ring[i], name, name ? strlen(name) : 0))
            moved_ring++;
        const cli_member_t *cm =
            cli->pool_len == 0
                ? NULL
                : cli->pool[chring_snap_hash(s, key, klen) % (uint64_t)cli->pool_len];
        if (owner_changed(cli, cli->snap_mod[i], cm ? cm->name : NULL, cm ? cm->len : 0))
            moved_mod++;
    }
    chring_snap_exit(cli->ring, s);
    fprintf(out, "ring=%zu mod=%zu\n", moved_ring, moved_mod);
}

/* ---------------------------------------------------------------------------------------------
 * Extensions: WEIGHT, LOAD, BOUNDED, REPLICAS, ACQUIRE, RELEASE, STATS
 * ------------------------------------------------------------------------------------------- */

/* Parses "<name> <number>" with nothing after; returns NULL or the reason of an ERR answer. */
static const char *parse_name_number(chring_cli_t *cli, const char *line, size_t len, size_t pos,
                                     const char *usage, const char *bad, uint64_t min, uint64_t max,
                                     cli_member_t **member, uint64_t *value)
{
    span_t name, num;
    if (!next_token(line, len, &pos, &name) || !next_token(line, len, &pos, &num) ||
        !rest_is_blank(line, len, pos))
        return usage;
    if (name.len > CHRING_NAME_MAX)
        return "name too long";
    if (memchr(name.ptr, '\0', name.len))
        return "name contains a NUL byte";
    if (!parse_u64(num, max, value) || *value < min)
        return bad;
    char cname[CHRING_NAME_MAX + 1];
    memcpy(cname, name.ptr, name.len);
    cname[name.len] = '\0';
    *member = pool_find(cli, cname);
    if (!*member)
        return "no such member";
    return NULL;
}

static void cmd_weight(chring_cli_t *cli, const char *line, size_t len, size_t pos, FILE *out)
{
    cli_member_t *cm;
    uint64_t weight;
    const char *reason =
        parse_name_number(cli, line, len, pos, "usage: WEIGHT <name> <weight>",
                          "bad weight (1 to 4294967295)", 1, UINT32_MAX, &cm, &weight);
    if (reason) {
        answer_err(out, reason);
        return;
    }
    int rc = chring_set_weight(cli->ring, cm->name, (uint32_t)weight);
    if (rc < 0)
        answer_lib_err(out, rc);
    else
        fprintf(out, "OK\n");
}

static void cmd_load(chring_cli_t *cli, const char *line, size_t len, size_t pos, FILE *out)
{
    cli_member_t *cm;
    uint64_t load;
    const char *reason = parse_name_number(cli, line, len, pos, "usage: LOAD <name> <load>",
                                           "bad load (0 to 4294967295)", 0, UINT32_MAX, &cm, &load);
    if (reason) {
        answer_err(out, reason);
        return;
    }
    cm->load = load;
    fprintf(out, "OK\n");
}

static uint64_t supplied_load(const chring_member_t *m, void *ctx)
{
    (void)ctx;
    const cli_member_t *cm = chring_member_udata(m);
    return cm ? cm->load : 0;
}

static void cmd_bounded(chring_cli_t *cli, span_t key, FILE *out)
{
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    const chring_member_t *m =
        chring_snap_lookup_bounded(s, key.ptr, key.len, cli->balance, supplied_load, NULL);
    if (m) {
        put_name(out, m);
        fputc('\n', out);
    } else {
        fprintf(out, "EMPTY\n");
    }
    chring_snap_exit(cli->ring, s);
}

/* REPLICAS <key> <n>: the key is everything between "REPLICAS " and the last blank. */
static void cmd_replicas(chring_cli_t *cli, span_t arg, FILE *out)
{
    size_t end = arg.len;
    while (end > 0 && is_space(arg.ptr[end - 1]))
        end--;
    size_t sep = end;
    while (sep > 0 && arg.ptr[sep - 1] != ' ' && arg.ptr[sep - 1] != '\t')
        sep--;
    if (sep == 0) {
        answer_err(out, "usage: REPLICAS <key> <n>");
        return;
    }
    span_t num = { arg.ptr + sep, end - sep };
    span_t key = { arg.ptr, sep - 1 };
    uint64_t n;
    if (!parse_u64(num, UINT32_MAX, &n) || n == 0) {
        answer_err(out, "bad count (1 to 4294967295)");
        return;
    }
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    size_t members = chring_snap_len(s);
    size_t want = n < members ? (size_t)n : members;
    const chring_member_t **owners = malloc((want ? want : 1) * sizeof(*owners));
    if (!owners) {
        chring_snap_exit(cli->ring, s);
        answer_err(out, "out of memory");
        return;
    }
    size_t got = chring_snap_lookup_n(s, key.ptr, key.len, owners, want);
    if (got == 0)
        fprintf(out, "EMPTY");
    for (size_t i = 0; i < got; i++) {
        if (i > 0)
            fputc(' ', out);
        put_name(out, owners[i]);
    }
    fputc('\n', out);
    free(owners);
    chring_snap_exit(cli->ring, s);
}

static void cmd_acquire(chring_cli_t *cli, span_t key, FILE *out)
{
    if (cli->leases_live >= CHRING_CLI_LEASES_MAX) {
        answer_err(out, "too many leases");
        return;
    }
    if (cli->leases_len == cli->leases_cap) {
        /* Compact released leases first; grow only when more than half are live. */
        size_t kept = 0;
        for (size_t i = 0; i < cli->leases_len; i++)
            if (cli->leases[i].lease.member)
                cli->leases[kept++] = cli->leases[i];
        cli->leases_len = kept;
        if (kept * 2 >= cli->leases_cap) {
            size_t cap = cli->leases_cap ? cli->leases_cap * 2 : 16;
            cli_lease_t *grown = realloc(cli->leases, cap * sizeof(*grown));
            if (!grown) {
                answer_err(out, "out of memory");
                return;
            }
            cli->leases = grown;
            cli->leases_cap = cap;
        }
    }
    chring_lease_t lease;
    int rc = chring_acquire(cli->ring, key.ptr, key.len, &lease);
    if (rc == -ENOENT) {
        fprintf(out, "EMPTY\n");
        return;
    }
    if (rc < 0 || !lease.member) {
        answer_lib_err(out, rc < 0 ? rc : -EINVAL);
        return;
    }
    cli_lease_t *slot = &cli->leases[cli->leases_len++];
    slot->number = ++cli->next_lease;
    slot->lease = lease;
    cli->leases_live++;
    put_name(out, slot->lease.member);
    fprintf(out, " %" PRIu64 "\n", slot->number);
}

static void cmd_release(chring_cli_t *cli, const char *line, size_t len, size_t pos, FILE *out)
{
    span_t tok;
    uint64_t number;
    if (!next_token(line, len, &pos, &tok) || !rest_is_blank(line, len, pos)) {
        answer_err(out, "usage: RELEASE <lease-number>");
        return;
    }
    if (!parse_u64(tok, UINT64_MAX, &number) || number == 0) {
        answer_err(out, "bad lease number");
        return;
    }
    size_t lo = 0, hi = cli->leases_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cli->leases[mid].number < number)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == cli->leases_len || cli->leases[lo].number != number ||
        !cli->leases[lo].lease.member) {
        answer_err(out, "no such lease");
        return;
    }
    /* chring_release clears the lease, which marks the slot released. */
    chring_release(cli->ring, &cli->leases[lo].lease);
    cli->leases[lo].lease.member = NULL;
    cli->leases_live--;
    fprintf(out, "OK\n");
}

static void cmd_stats(chring_cli_t *cli, FILE *out)
{
    chring_stats_t st;
    chring_stats(cli->ring, &st);
    fprintf(out,
            "version=%" PRIu64 " publishes=%" PRIu64 " members=%" PRIu64 " points=%" PRIu64
            " leases=%" PRIu64 " acquires=%" PRIu64 " spills=%" PRIu64 " saturated=%" PRIu64 "\n",
            st.version, st.publishes, st.members, st.points, st.leases, st.acquires, st.spills,
            st.saturated);
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    for (size_t i = 0; i < cli->pool_len; i++) {
        const chring_member_t *m = chring_snap_find(s, cli->pool[i]->name);
        chring_member_stats_t ms;
        chring_member_stats(m, &ms);
        put_bytes(out, cli->pool[i]->name, cli->pool[i]->len);
        fprintf(out,
                " weight=%" PRIu32 " load=%" PRIu64 " acquires=%" PRIu64 " primary=%" PRIu64
                " spilled_in=%" PRIu64 " supplied=%" PRIu64 "\n",
                chring_snap_weight(s, m), ms.load, ms.acquires, ms.primary, ms.spilled_in,
                cli->pool[i]->load);
    }
    chring_snap_exit(cli->ring, s);
}

/* ---------------------------------------------------------------------------------------------
 * Engine
 * ------------------------------------------------------------------------------------------- */

int chring_cli_new(chring_cli_t **out, const chring_cli_options_t *opt)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    chring_config_t cfg;
    chring_config_default(&cfg);
    if (opt && opt->profile) {
        chring_profile_t profile;
        if (chring_profile_parse(opt->profile, &profile) != 0 || profile == CHRING_PROFILE_CUSTOM)
            return -EINVAL;
        cfg.profile = profile;
    }
    if (opt && opt->vnodes > 0)
        cfg.vnodes = opt->vnodes;
    if (opt && opt->balance > 0) /* false for NaN as well */
        cfg.balance = opt->balance;
    cfg.retire = retire_member;
    cfg.retire_ctx = NULL;

    chring_cli_t *cli = calloc(1, sizeof(*cli));
    if (!cli)
        return -ENOMEM;
    int rc = chring_new(&cli->ring, &cfg);
    if (rc < 0) {
        free(cli);
        return rc;
    }
    cli->balance = cfg.balance;
    *out = cli;
    return 0;
}

void chring_cli_free(chring_cli_t *cli)
{
    if (!cli)
        return;
    for (size_t i = 0; i < cli->leases_len; i++)
        if (cli->leases[i].lease.member)
            chring_release(cli->ring, &cli->leases[i].lease);
    free(cli->leases);
    snap_clear(cli);
    /* chring_free retires (frees) every pool entry through retire_member. */
    chring_free(&cli->ring);
    free(cli->pool);
    free(cli);
}

/* The argument of HASH, LOOKUP, BOUNDED, ACQUIRE and REPLICAS: everything after the command word
 * and one space, verbatim.  False when the command word is not followed by a space. */
static bool verbatim_arg(const char *line, size_t len, size_t cmd_end, span_t *arg)
{
    if (cmd_end >= len || line[cmd_end] != ' ')
        return false;
    arg->ptr = line + cmd_end + 1;
    arg->len = len - cmd_end - 1;
    return true;
}

void chring_cli_exec(chring_cli_t *cli, const char *line, size_t len, FILE *out)
{
    if (!cli || !out || (!line && len > 0))
        return;
    size_t pos = 0;
    span_t cmd;
    if (!next_token(line, len, &pos, &cmd))
        return; /* blank line */
    if (cmd.ptr[0] == '#')
        return; /* comment */
    size_t cmd_end = pos;
    span_t arg;

    if (word_is(cmd, "POOL")) {
        cmd_pool(cli, line, len, pos, out);
    } else if (word_is(cmd, "ADD")) {
        cmd_add(cli, line, len, pos, out);
    } else if (word_is(cmd, "REMOVE")) {
        cmd_remove(cli, line, len, pos, out);
    } else if (word_is(cmd, "LOOKUP")) {
        if (verbatim_arg(line, len, cmd_end, &arg))
            cmd_lookup(cli, arg, out);
        else
            answer_err(out, "usage: LOOKUP <key> (one space, then the key verbatim)");
    } else if (word_is(cmd, "HASH")) {
        if (verbatim_arg(line, len, cmd_end, &arg))
            cmd_hash(cli, arg, out);
        else
            answer_err(out, "usage: HASH <string> (one space, then the string verbatim)");
    } else if (word_is(cmd, "BOUNDED")) {
        if (verbatim_arg(line, len, cmd_end, &arg))
            cmd_bounded(cli, arg, out);
        else
            answer_err(out, "usage: BOUNDED <key> (one space, then the key verbatim)");
    } else if (word_is(cmd, "ACQUIRE")) {
        if (verbatim_arg(line, len, cmd_end, &arg))
            cmd_acquire(cli, arg, out);
        else
            answer_err(out, "usage: ACQUIRE <key> (one space, then the key verbatim)");
    } else if (word_is(cmd, "REPLICAS")) {
        if (verbatim_arg(line, len, cmd_end, &arg))
            cmd_replicas(cli, arg, out);
        else
            answer_err(out, "usage: REPLICAS <key> <n>");
    } else if (word_is(cmd, "SNAP")) {
        span_t tok;
        uint64_t count;
        if (!next_token(line, len, &pos, &tok) || !rest_is_blank(line, len, pos))
            answer_err(out, "usage: SNAP <n>");
        else if (!parse_u64(tok, CHRING_CLI_SNAP_MAX, &count))
            answer_err(out, "bad count (0 to 1000000)");
        else
            cmd_snap(cli, count, out);
    } else if (word_is(cmd, "WEIGHT")) {
        cmd_weight(cli, line, len, pos, out);
    } else if (word_is(cmd, "LOAD")) {
        cmd_load(cli, line, len, pos, out);
    } else if (word_is(cmd, "RELEASE")) {
        cmd_release(cli, line, len, pos, out);
    } else if (word_is(cmd, "RING") || word_is(cmd, "DIST") || word_is(cmd, "MOVED") ||
               word_is(cmd, "STATS") || word_is(cmd, "VERSION")) {
        if (!rest_is_blank(line, len, pos))
            answer_err(out, "this command takes no arguments");
        else if (word_is(cmd, "RING"))
            cmd_ring(cli, out);
        else if (word_is(cmd, "DIST"))
            cmd_dist(cli, out);
        else if (word_is(cmd, "MOVED"))
            cmd_moved(cli, out);
        else if (word_is(cmd, "STATS"))
            cmd_stats(cli, out);
        else
            cmd_version(cli, out);
    } else {
        answer_err(out, "unknown command");
    }
}
