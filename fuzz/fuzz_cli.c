/* libFuzzer target: the `chring` tool's command engine (tools/cli.h) against a model of the tool.
 *
 * SPDX-License-Identifier: MIT
 *
 * The input is a session: lines separated by '\n', fed one by one to chring_cli_exec() with the
 * answers written to an open_memstream() buffer.  A first line "#!<profile> <vnodes> <balance>"
 * chooses the engine's options (it is a comment to the engine); without it the ring is the
 * exercise's (murmur32, 16 vnodes).  Every answer must have one of the shapes of docs/cli.md.
 * The target also keeps its own model of the session (the pool in listed order, join order,
 * weights, LOAD values, leases, the SNAP record, the version) and, for the profiles the reference
 * model (tests/model/model.c) knows (all of them), checks every answer exactly: owners, hashes,
 * RING points, DIST points and shares, MOVED counts, BOUNDED, ACQUIRE and RETRY choices, REPLICAS
 * lists, STATS and VERSION, and health (DOWN, UP, RAMP, HEALTH; docs/design.md §3): members down
 * are walked past by every lookup, acquire and retry and leave W, ramps scale admission.  A difference prints the line, the answer and the reason, then aborts.
 *
 * Lines that would only cost time (SNAP of more than 4096 keys, a weight that builds more than
 * 65536 points without being refused) are skipped, not fed, and so is a well-formed RAMP whose
 * scale depends on time (ms > 0 and from != to): its answers could not be predicted.
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream */

#include <chring.h>

#include "cli.h"
#include "model.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_POOL 2048
#define MAX_IDS 16384
#define MAX_LEASES 4096
#define SNAP_LIMIT 4096

typedef struct span {
    const char *p;
    size_t n;
} span_t;

typedef struct tmember {
    char name[MODEL_NAME_MAX + 1];
    size_t len;
    uint32_t weight;
    uint64_t supplied; /* LOAD value */
    unsigned join;     /* join rank: smaller joined earlier */
    int id;            /* member object */
} tmember_t;

typedef struct tobj {
    uint64_t leases, acquires, primary, spilled_in;
    int down;     /* DOWN / UP: the state belongs to the member object */
    double scale; /* RAMP's constant admission scale, 1 without */
    char name[MODEL_NAME_MAX + 1];
    size_t len;
    bool ghost; /* left the pool while what the bound counted for it was above 0 (a flap) */
} tobj_t;

typedef struct tlease {
    uint64_t number;
    int id; /* -1 once released */
} tlease_t;

static struct {
    int modeled; /* the reference model knows the profile */
    model_cfg_t cfg;
    double balance;
    tmember_t pool[MAX_POOL];
    size_t npool;
    unsigned next_join;
    tobj_t objs[MAX_IDS];
    int nobjs;
    tlease_t leases[MAX_LEASES];
    size_t nleases;
    uint64_t next_lease, acquires, spills, retries, version;
    model_snap_t snap;
    int snap_dirty;
    /* SNAP record: owner names ("" for none) under the ring and the modulo. */
    int snapped;
    size_t snap_count;
    char (*snap_ring)[MODEL_NAME_MAX + 1];
    char (*snap_mod)[MODEL_NAME_MAX + 1];
} st;

static const char *cur_line;
static size_t cur_len;
static const char *cur_out;
static size_t cur_out_len;

static void show(FILE *f, const char *p, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n && i < 300; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            fputc(c, f);
        else
            fprintf(f, "\\x%02x", c);
    }
    if (n > 300)
        fprintf(f, "...(%zu bytes)", n);
    fputc('"', f);
}

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "\n==== fuzz_cli: wrong answer ====\nline:   ");
    show(stderr, cur_line, cur_len);
    fprintf(stderr, "\nanswer: ");
    show(stderr, cur_out, cur_out_len);
    fprintf(stderr, "\nwhy:    ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    abort();
}

/* ---- parsing like docs/cli.md says ----------------------------------------------------------- */

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static bool token(const char *line, size_t len, size_t *pos, span_t *tok)
{
    size_t i = *pos;
    while (i < len && blank(line[i]))
        i++;
    if (i == len) {
        *pos = i;
        return false;
    }
    size_t start = i;
    while (i < len && !blank(line[i]))
        i++;
    tok->p = line + start;
    tok->n = i - start;
    *pos = i;
    return true;
}

static bool rest_blank(const char *line, size_t len, size_t pos)
{
    for (; pos < len; pos++)
        if (!blank(line[pos]))
            return false;
    return true;
}

static bool is_word(span_t t, const char *w)
{
    size_t n = strlen(w);
    if (t.n != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = t.p[i];
        if (c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        if (c != w[i])
            return false;
    }
    return true;
}

/* Decimal digits only, at most max. */
static bool number(span_t t, uint64_t max, uint64_t *out)
{
    if (t.n == 0 || t.n > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < t.n; i++) {
        if (t.p[i] < '0' || t.p[i] > '9')
            return false;
        uint64_t d = (uint64_t)(t.p[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

static bool span_eq(span_t a, const char *b, size_t blen)
{
    return a.n == blen && memcmp(a.p, b, blen) == 0;
}

/* ---- the model of the session ---------------------------------------------------------------- */

static long pool_find(const char *name, size_t len)
{
    for (size_t i = 0; i < st.npool; i++)
        if (st.pool[i].len == len && memcmp(st.pool[i].name, name, len) == 0)
            return (long)i;
    return -1;
}

static const model_snap_t *snap(void)
{
    if (st.snap_dirty) {
        static model_member_t members[MAX_POOL];
        static tmember_t sorted[MAX_POOL];
        memcpy(sorted, st.pool, st.npool * sizeof *sorted);
        /* join order: insertion sort by join rank */
        for (size_t i = 1; i < st.npool; i++)
            for (size_t j = i; j > 0 && sorted[j - 1].join > sorted[j].join; j--) {
                tmember_t t = sorted[j];
                sorted[j] = sorted[j - 1];
                sorted[j - 1] = t;
            }
        for (size_t i = 0; i < st.npool; i++) {
            memset(&members[i], 0, sizeof members[i]);
            memcpy(members[i].name, sorted[i].name, sorted[i].len);
            members[i].len = sorted[i].len;
            members[i].weight = sorted[i].weight;
            members[i].obj = sorted[i].id;
        }
        model_snap_free(&st.snap);
        if (model_build(&st.snap, &st.cfg, members, st.npool) != 0)
            abort();
        st.snap_dirty = 0;
    }
    return &st.snap;
}

static int new_id(void)
{
    if (st.nobjs >= MAX_IDS)
        return -1;
    memset(&st.objs[st.nobjs], 0, sizeof st.objs[0]);
    st.objs[st.nobjs].scale = 1.0;
    return st.nobjs++;
}

static uint64_t outstanding(void)
{
    uint64_t n = 0;
    for (size_t i = 0; i < st.nleases; i++)
        n += st.leases[i].id >= 0;
    return n;
}

/* The health of the snapshot's members (join order), from their objects. */
static void health_of(const model_snap_t *s, unsigned char *down, double *scale)
{
    for (size_t j = 0; j < s->nmembers; j++) {
        down[j] = (unsigned char)st.objs[s->members[j].obj].down;
        scale[j] = st.objs[s->members[j].obj].scale;
    }
}

/* Whether the pool is not empty and every member in it is down (the ring answers EMPTY). */
static bool all_down(void)
{
    for (size_t i = 0; i < st.npool; i++)
        if (!st.objs[st.pool[i].id].down)
            return false;
    return st.npool > 0;
}

/* The owner of a key: the first member up clockwise from its point. */
static const model_member_t *owner_of(const void *key, size_t len)
{
    const model_snap_t *s = snap();
    static unsigned char down[MAX_POOL];
    static double scale[MAX_POOL];
    health_of(s, down, scale);
    long j = model_owner_up(s, model_hash(&s->cfg, key, len), down);
    return j < 0 ? NULL : &s->members[j];
}

static const tmember_t *pool_member_by_id(int id)
{
    for (size_t i = 0; i < st.npool; i++)
        if (st.pool[i].id == id)
            return &st.pool[i];
    return NULL;
}

/* ---- answers --------------------------------------------------------------------------------- */

/* The answer split into lines (without '\n'). */
static span_t *lines;
static size_t nlines, lines_cap;

static void split_answer(void)
{
    nlines = 0;
    if (cur_out_len == 0)
        return;
    if (cur_out[cur_out_len - 1] != '\n')
        fail("the answer does not end with a newline");
    size_t start = 0;
    for (size_t i = 0; i < cur_out_len; i++)
        if (cur_out[i] == '\n') {
            if (nlines == lines_cap) {
                lines_cap = lines_cap ? 2 * lines_cap : 1024;
                lines = realloc(lines, lines_cap * sizeof *lines);
                if (!lines)
                    abort();
            }
            lines[nlines].p = cur_out + start;
            lines[nlines].n = i - start;
            nlines++;
            start = i + 1;
        }
}

static bool is_err(void)
{
    return nlines == 1 && lines[0].n > 4 && memcmp(lines[0].p, "ERR ", 4) == 0;
}

static void expect_lines(size_t n)
{
    if (nlines != n)
        fail("%zu answer lines, expected %zu", nlines, n);
}

static void expect_ok(void)
{
    expect_lines(1);
    if (!span_eq(lines[0], "OK", 2))
        fail("expected OK");
}

static void expect_err(void)
{
    if (!is_err())
        fail("expected one line \"ERR <reason>\"");
}

/* A one-line answer that is a pool member's name (or EMPTY for an empty pool); returns it. */
static span_t expect_name_or_empty(void)
{
    expect_lines(1);
    if (st.npool == 0 || all_down()) {
        if (!span_eq(lines[0], "EMPTY", 5))
            fail("the pool is empty or every member is down: expected EMPTY");
        return lines[0];
    }
    if (pool_find(lines[0].p, lines[0].n) < 0)
        fail("the answer is not a member of the pool");
    return lines[0];
}

static void expect_model_name(span_t got, const model_member_t *want, const char *what)
{
    if (!st.modeled || !want)
        return;
    if (!span_eq(got, want->name, want->len)) {
        fprintf(stderr, "model's %s: ", what);
        show(stderr, want->name, want->len);
        fail("the %s differs from the model's", what);
    }
}

/* "<prefix><decimal>" at the start of *t; advances past it. */
static bool field(span_t *t, const char *prefix, uint64_t *v)
{
    size_t pl = strlen(prefix);
    if (t->n < pl || memcmp(t->p, prefix, pl) != 0)
        return false;
    size_t i = pl;
    while (i < t->n && t->p[i] >= '0' && t->p[i] <= '9')
        i++;
    span_t num = {t->p + pl, i - pl};
    if (!number(num, UINT64_MAX, v))
        return false;
    t->p += i;
    t->n -= i;
    return true;
}

/* ---- commands -------------------------------------------------------------------------------- */

/* Parses the names of POOL/ADD/REMOVE; false if the engine must answer ERR. */
static bool names(const char *line, size_t len, size_t pos, span_t *out, size_t *n)
{
    span_t t;
    *n = 0;
    while (token(line, len, &pos, &t)) {
        if (t.n > MODEL_NAME_MAX || memchr(t.p, 0, t.n))
            return false;
        bool dup = false;
        for (size_t i = 0; i < *n; i++)
            dup |= out[i].n == t.n && memcmp(out[i].p, t.p, t.n) == 0;
        if (!dup)
            out[(*n)++] = t;
    }
    return true;
}

/* What the bound counts for member object id: its leases and those of the earlier objects of its
 * name that left with leases out, its ghosts (docs/design.md §3, "Flaps"; object ids grow with
 * time, so an earlier object has a smaller id). */
static uint64_t counted(int id)
{
    const tobj_t *o = &st.objs[id];
    uint64_t n = o->leases;
    for (int k = 0; k < id; k++)
        if (st.objs[k].ghost && st.objs[k].len == o->len &&
            memcmp(st.objs[k].name, o->name, o->len) == 0)
            n += st.objs[k].leases;
    return n;
}

/* Member object id leaves the pool: a ghost when the bound counts anything for it. */
static void leave(int id)
{
    if (counted(id) > 0)
        st.objs[id].ghost = true;
}

static void set_member(tmember_t *m, span_t name, int id)
{
    memcpy(st.objs[id].name, name.p, name.n);
    st.objs[id].len = name.n;
    memset(m, 0, sizeof *m);
    memcpy(m->name, name.p, name.n);
    m->len = name.n;
    m->weight = 1;
    m->join = st.next_join++;
    m->id = id;
}

static void do_pool(const char *line, size_t len, size_t pos)
{
    static span_t list[MAX_POOL];
    size_t n;
    if (!names(line, len, pos, list, &n)) {
        expect_err();
        return;
    }
    expect_ok();
    static tmember_t next[MAX_POOL];
    bool changed = n != st.npool;
    for (size_t i = 0; i < n; i++) {
        long j = pool_find(list[i].p, list[i].n);
        if (j >= 0) {
            next[i] = st.pool[j];
            changed |= next[i].weight != 1;
            next[i].weight = 1;
        } else {
            int id = new_id();
            if (id < 0)
                abort();
            set_member(&next[i], list[i], id);
            changed = true;
        }
    }
    for (size_t i = 0; i < st.npool; i++) {
        bool kept = false;
        for (size_t k = 0; k < n && !kept; k++)
            kept = next[k].id == st.pool[i].id;
        if (!kept)
            leave(st.pool[i].id);
    }
    memcpy(st.pool, next, n * sizeof *next);
    st.npool = n;
    if (changed) {
        st.version++;
        st.snap_dirty = 1;
    }
}

static void do_add(const char *line, size_t len, size_t pos)
{
    static span_t list[MAX_POOL];
    size_t n;
    if (!names(line, len, pos, list, &n) || n == 0) {
        expect_err();
        return;
    }
    expect_ok();
    bool changed = false;
    for (size_t i = 0; i < n; i++) {
        if (pool_find(list[i].p, list[i].n) >= 0)
            continue;
        int id = new_id();
        if (id < 0)
            abort();
        set_member(&st.pool[st.npool++], list[i], id);
        changed = true;
    }
    if (changed) {
        st.version++;
        st.snap_dirty = 1;
    }
}

static void do_remove(const char *line, size_t len, size_t pos)
{
    static span_t list[MAX_POOL];
    size_t n;
    if (!names(line, len, pos, list, &n) || n == 0) {
        expect_err();
        return;
    }
    expect_ok();
    bool changed = false;
    for (size_t i = 0; i < n; i++) {
        long j = pool_find(list[i].p, list[i].n);
        if (j < 0)
            continue;
        leave(st.pool[j].id);
        memmove(&st.pool[j], &st.pool[j + 1], (st.npool - (size_t)j - 1) * sizeof st.pool[0]);
        st.npool--;
        changed = true;
    }
    if (changed) {
        st.version++;
        st.snap_dirty = 1;
    }
}

/* "<name> <number>" of WEIGHT and LOAD; false if the engine must answer ERR. */
static bool name_number(const char *line, size_t len, size_t pos, uint64_t min, long *member,
                        uint64_t *value)
{
    span_t name, num;
    if (!token(line, len, &pos, &name) || !token(line, len, &pos, &num) ||
        !rest_blank(line, len, pos))
        return false;
    if (name.n > MODEL_NAME_MAX || memchr(name.p, 0, name.n))
        return false;
    if (!number(num, UINT32_MAX, value) || *value < min)
        return false;
    *member = pool_find(name.p, name.n);
    return *member >= 0;
}

static uint64_t points_per_weight(void)
{
    return model_points_per_weight(&st.cfg);
}

static void do_weight(const char *line, size_t len, size_t pos)
{
    long j;
    uint64_t w;
    if (!name_number(line, len, pos, 1, &j, &w)) {
        expect_err();
        return;
    }
    if (st.modeled && w * points_per_weight() > MODEL_POINTS_MAX) {
        expect_err();
        return;
    }
    if (!st.modeled && is_err())
        return; /* not reached (every profile is modelled) */
    expect_ok();
    if (st.pool[j].weight != w) {
        st.pool[j].weight = (uint32_t)w;
        st.version++;
        st.snap_dirty = 1;
    }
}

static void do_load(const char *line, size_t len, size_t pos)
{
    long j;
    uint64_t v;
    if (!name_number(line, len, pos, 0, &j, &v)) {
        expect_err();
        return;
    }
    expect_ok();
    st.pool[j].supplied = v;
}

static void do_lookup(span_t key)
{
    span_t got = expect_name_or_empty();
    if (st.npool && st.modeled)
        expect_model_name(got, owner_of(key.p, key.n), "owner");
}

/* LOOKUPS k1 k2 ...: one line, the owners in the keys' order, each what LOOKUP of that key
 * answers (docs/cli.md). */
static void do_lookups(const char *line, size_t len, size_t pos)
{
    span_t key;
    size_t nkeys = 0, p = pos;
    while (token(line, len, &p, &key))
        nkeys++;
    if (nkeys == 0) {
        expect_err();
        return;
    }
    expect_lines(1);
    span_t ans = lines[0];
    size_t at = 0;
    for (size_t k = 0; k < nkeys; k++) {
        if (!token(line, len, &pos, &key))
            fail("LOOKUPS: lost a key");
        size_t end = at;
        while (end < ans.n && ans.p[end] != ' ')
            end++;
        span_t got = {ans.p + at, end - at};
        if (got.n == 0)
            fail("LOOKUPS: %zu owners for %zu keys", k, nkeys);
        if (st.npool == 0 || all_down()) {
            if (!span_eq(got, "EMPTY", 5))
                fail("LOOKUPS: the pool is empty or every member is down: expected EMPTY");
        } else {
            if (pool_find(got.p, got.n) < 0)
                fail("LOOKUPS: owner %zu is not a member of the pool", k);
            if (st.modeled)
                expect_model_name(got, owner_of(key.p, key.n), "owner");
        }
        at = end + (end < ans.n ? 1 : 0);
        if (k + 1 < nkeys && end >= ans.n)
            fail("LOOKUPS: %zu owners for %zu keys", k + 1, nkeys);
    }
    if (at < ans.n)
        fail("LOOKUPS: more owners than keys");
}

static void do_hash(span_t arg)
{
    expect_lines(1);
    uint64_t v;
    if (!number(lines[0], UINT64_MAX, &v))
        fail("HASH: not a decimal number");
    if (st.modeled && v != model_hash(&st.cfg, arg.p, arg.n))
        fail("HASH: model says %llu", (unsigned long long)model_hash(&st.cfg, arg.p, arg.n));
}

static void do_ring(void)
{
    uint64_t prev = 0;
    for (size_t i = 0; i < nlines; i++) {
        const char *colon = memchr(lines[i].p, ':', lines[i].n);
        if (!colon)
            fail("RING line %zu has no ':'", i);
        span_t num = {lines[i].p, (size_t)(colon - lines[i].p)};
        span_t name = {colon + 1, lines[i].n - num.n - 1};
        uint64_t pos;
        if (!number(num, UINT64_MAX, &pos))
            fail("RING line %zu: bad position", i);
        if (i > 0 && pos < prev)
            fail("RING line %zu: positions not in order", i);
        prev = pos;
        if (pool_find(name.p, name.n) < 0)
            fail("RING line %zu: not a pool member", i);
    }
    if (!st.modeled)
        return;
    const model_snap_t *s = snap();
    expect_lines(s->npoints);
    for (size_t i = 0; i < s->npoints; i++) {
        const model_member_t *m = &s->members[s->points[i].member];
        char want[400];
        int n = snprintf(want, sizeof want, "%llu:", (unsigned long long)s->points[i].pos);
        memcpy(want + n, m->name, m->len);
        if (!span_eq(lines[i], want, (size_t)n + m->len))
            fail("RING line %zu differs from the model's %llu:%s (index %u)", i,
                 (unsigned long long)s->points[i].pos, m->name, s->points[i].index);
    }
}

static void do_dist(void)
{
    expect_lines(st.npool);
    static double shares[MAX_POOL];
    const model_snap_t *s = st.modeled ? snap() : NULL;
    if (s)
        model_shares(s, shares);
    for (size_t i = 0; i < st.npool; i++) {
        span_t l = lines[i];
        if (l.n < st.pool[i].len + 1 || memcmp(l.p, st.pool[i].name, st.pool[i].len) != 0 ||
            l.p[st.pool[i].len] != ' ')
            fail("DIST line %zu does not start with pool member %zu's name", i, i);
        span_t rest = {l.p + st.pool[i].len + 1, l.n - st.pool[i].len - 1};
        uint64_t points;
        if (!field(&rest, "points=", &points) || rest.n < 8 || memcmp(rest.p, " share=", 7) != 0)
            fail("DIST line %zu: expected points=<p> share=<s>", i);
        char buf[32];
        size_t sl = rest.n - 7;
        if (sl >= sizeof buf || sl != 6)
            fail("DIST line %zu: share is not of the form d.dddd", i);
        memcpy(buf, rest.p + 7, sl);
        buf[sl] = 0;
        if (buf[1] != '.' || (buf[0] != '0' && buf[0] != '1'))
            fail("DIST line %zu: share is not of the form d.dddd", i);
        double share = strtod(buf, NULL);
        if (!s)
            continue;
        long j = model_find(s, st.pool[i].name, st.pool[i].len);
        if (j < 0)
            abort();
        if (points != s->member_points[j])
            fail("DIST line %zu: the model has %zu points", i, s->member_points[j]);
        if (fabs(share - shares[j]) > 0.00005 + 1e-12)
            fail("DIST line %zu: the model's share is %.6f", i, shares[j]);
    }
}

static void owner_name_or_empty(const model_member_t *m, char *out)
{
    if (!m) {
        out[0] = 0;
        return;
    }
    memcpy(out, m->name, m->len + 1);
}

static void mod_owner(const char *key, size_t klen, char *out)
{
    if (st.npool == 0) {
        out[0] = 0;
        return;
    }
    const tmember_t *m = &st.pool[model_hash(&st.cfg, key, klen) % st.npool];
    memcpy(out, m->name, m->len + 1);
}

static void do_snap(uint64_t n)
{
    expect_ok();
    if (!st.modeled) {
        st.snapped = 1;
        return;
    }
    free(st.snap_ring);
    free(st.snap_mod);
    st.snap_ring = calloc(n ? n : 1, sizeof *st.snap_ring);
    st.snap_mod = calloc(n ? n : 1, sizeof *st.snap_mod);
    if (!st.snap_ring || !st.snap_mod)
        abort();
    for (size_t i = 0; i < n; i++) {
        char key[32];
        int kl = snprintf(key, sizeof key, "key%zu", i);
        owner_name_or_empty(owner_of(key, (size_t)kl), st.snap_ring[i]);
        mod_owner(key, (size_t)kl, st.snap_mod[i]);
    }
    st.snap_count = n;
    st.snapped = 1;
}

static void do_moved(void)
{
    if (!st.snapped) {
        expect_err();
        return;
    }
    expect_lines(1);
    span_t l = lines[0];
    uint64_t ring, mod;
    if (!field(&l, "ring=", &ring) || !field(&l, " mod=", &mod) || l.n != 0)
        fail("MOVED: expected ring=<x> mod=<y>");
    if (!st.modeled)
        return;
    uint64_t want_ring = 0, want_mod = 0;
    for (size_t i = 0; i < st.snap_count; i++) {
        char key[32], now[MODEL_NAME_MAX + 1];
        int kl = snprintf(key, sizeof key, "key%zu", i);
        owner_name_or_empty(owner_of(key, (size_t)kl), now);
        want_ring += strcmp(now, st.snap_ring[i]) != 0;
        mod_owner(key, (size_t)kl, now);
        want_mod += strcmp(now, st.snap_mod[i]) != 0;
    }
    if (ring != want_ring || mod != want_mod)
        fail("MOVED: the model says ring=%llu mod=%llu", (unsigned long long)want_ring,
             (unsigned long long)want_mod);
}

static void do_bounded(span_t key)
{
    span_t got = expect_name_or_empty();
    if (!st.modeled || st.npool == 0)
        return;
    const model_snap_t *s = snap();
    uint64_t loads[MAX_POOL], m = 0;
    for (size_t j = 0; j < s->nmembers; j++) {
        const tmember_t *t = pool_member_by_id(s->members[j].obj);
        loads[j] = t->supplied;
        m += t->supplied;
    }
    long owner;
    int sat;
    static unsigned char down[MAX_POOL];
    static double scale[MAX_POOL];
    health_of(s, down, scale);
    /* Members down are walked past (their LOAD values still count in m); scales are ignored. */
    long j = model_walk_health(s, model_hash(&s->cfg, key.p, key.n), st.balance, m, loads, NULL,
                               down, NULL, &owner, &sat);
    if (j >= 0 && !sat)
        expect_model_name(got, &s->members[j], "bounded choice");
}

/* ACQUIRE (skip NULL) and RETRY (skip[j]: pool member j is passed over as if full). */
static void do_acquire(span_t key, const bool *skip)
{
    expect_lines(1);
    if (st.npool == 0) {
        if (!span_eq(lines[0], "EMPTY", 5))
            fail("the pool is empty: expected EMPTY");
        return;
    }
    /* The walk with health: members skipped (RETRY) or down are passed over; a member at scale 0
     * is taken only when nothing else is met; EMPTY when no member outside the list is up. */
    long walk_j = -1, walk_owner = -1;
    int walk_sat = 0;
    /* the walk's inputs, also read below to tell an owner down from a spill */
    static uint64_t loads[MAX_POOL];
    static unsigned char mask[MAX_POOL], down[MAX_POOL];
    static double scale[MAX_POOL];
    if (st.modeled) {
        const model_snap_t *s = snap();
        health_of(s, down, scale);
        for (size_t j = 0; j < s->nmembers; j++) {
            long sj = skip ? pool_find(s->members[j].name, s->members[j].len) : -1;
            mask[j] = sj >= 0 && skip[sj];
            loads[j] = counted(s->members[j].obj);
        }
        walk_j = model_walk_health(s, model_hash(&s->cfg, key.p, key.n), st.balance, outstanding(),
                                   loads, mask, down, scale, &walk_owner, &walk_sat);
        if ((walk_j < 0) != span_eq(lines[0], "EMPTY", 5))
            fail(walk_j >= 0
                     ? "ACQUIRE/RETRY: a member outside the list is up and met: expected "
                       "<name> <lease>"
                     : "ACQUIRE/RETRY: every member met is skipped or down: expected EMPTY");
        if (walk_j < 0)
            return;
    } else if (span_eq(lines[0], "EMPTY", 5)) {
        return;
    }
    const char *sp = NULL;
    for (size_t i = lines[0].n; i > 0; i--)
        if (lines[0].p[i - 1] == ' ') {
            sp = lines[0].p + i - 1;
            break;
        }
    if (!sp)
        fail("ACQUIRE: expected <name> <lease>");
    span_t name = {lines[0].p, (size_t)(sp - lines[0].p)};
    span_t num = {sp + 1, lines[0].n - name.n - 1};
    uint64_t number_got;
    if (!number(num, UINT64_MAX, &number_got) || number_got != st.next_lease + 1)
        fail("ACQUIRE: expected lease number %llu", (unsigned long long)st.next_lease + 1);
    long pj = pool_find(name.p, name.n);
    if (pj < 0)
        fail("ACQUIRE: not a pool member");
    if (skip && skip[pj])
        fail("RETRY: placed on a skipped member");
    int id = st.pool[pj].id;
    if (st.objs[id].down)
        fail("ACQUIRE/RETRY: placed on a member that is down");
    if (st.modeled) {
        const model_snap_t *s = snap();
        /* Saturated too: the first least loaded member met (at a scale above 0, else at 0). */
        expect_model_name(name, &s->members[walk_j], "acquire choice");
        tobj_t *o = &st.objs[id];
        /* The key's owner for primary/spill is the member of its point, up or down.  A key
         * whose owner is down and that lands on the first member up after it, no skipped member
         * before, went where a lookup sends it: not a spill (CHRING_OUTCOME_OWNER_DOWN, counted
         * apart; STATS shows neither primary nor spilled_in for it). */
        if (s->members[walk_owner].obj == id) {
            o->primary++;
        } else if (!walk_sat && model_first_up_unskipped(s, model_hash(&s->cfg, key.p, key.n),
                                                         mask, down) == walk_j) {
            /* owner down: neither primary nor spilled_in */
        } else {
            o->spilled_in++;
            st.spills++;
        }
    }
    st.objs[id].leases++;
    st.objs[id].acquires++;
    st.acquires++;
    if (skip)
        st.retries++;
    st.next_lease++;
    if (st.nleases < MAX_LEASES)
        st.leases[st.nleases++] = (tlease_t){st.next_lease, id};
    else
        abort();
}

/* RETRY <count> <name>... <key> (arg: after "RETRY "). */
static void do_retry(span_t arg)
{
    static bool skip[MAX_POOL];
    memset(skip, 0, sizeof skip);
    size_t pos = 0;
    span_t t;
    uint64_t count;
    if (!token(arg.p, arg.n, &pos, &t) || !number(t, CHRING_CLI_SKIP_MAX, &count)) {
        expect_err();
        return;
    }
    for (uint64_t i = 0; i < count; i++) {
        if (!token(arg.p, arg.n, &pos, &t) || t.n > MODEL_NAME_MAX || memchr(t.p, '\0', t.n)) {
            expect_err();
            return;
        }
        long pj = pool_find(t.p, t.n);
        if (pj >= 0)
            skip[pj] = true;
    }
    if (pos >= arg.n || arg.p[pos] != ' ') {
        expect_err();
        return;
    }
    span_t key = {arg.p + pos + 1, arg.n - pos - 1};
    do_acquire(key, skip);
}

static void do_release(const char *line, size_t len, size_t pos)
{
    span_t tok;
    uint64_t n;
    if (!token(line, len, &pos, &tok) || !rest_blank(line, len, pos) ||
        !number(tok, UINT64_MAX, &n) || n == 0) {
        expect_err();
        return;
    }
    for (size_t i = 0; i < st.nleases; i++)
        if (st.leases[i].number == n && st.leases[i].id >= 0) {
            expect_ok();
            st.objs[st.leases[i].id].leases--;
            st.leases[i].id = -1;
            return;
        }
    expect_err();
}

static void do_replicas(span_t arg)
{
    size_t end = arg.n;
    while (end > 0 && blank(arg.p[end - 1]))
        end--;
    size_t sep = end;
    while (sep > 0 && arg.p[sep - 1] != ' ' && arg.p[sep - 1] != '\t')
        sep--;
    uint64_t n;
    span_t num = {arg.p + sep, end - sep};
    if (sep == 0 || !number(num, UINT32_MAX, &n) || n == 0) {
        expect_err();
        return;
    }
    span_t key = {arg.p, sep - 1};
    expect_lines(1);
    if (st.npool == 0) {
        if (!span_eq(lines[0], "EMPTY", 5))
            fail("the pool is empty: expected EMPTY");
        return;
    }
    size_t want_n = n < st.npool ? (size_t)n : st.npool;
    if (all_down()) {
        if (!span_eq(lines[0], "EMPTY", 5))
            fail("every member is down: expected EMPTY");
        return;
    }
    span_t got[MAX_POOL];
    size_t ngot = 0, pos = 0;
    span_t t;
    while (token(lines[0].p, lines[0].n, &pos, &t)) {
        if (ngot == MAX_POOL || pool_find(t.p, t.n) < 0)
            fail("REPLICAS: a listed name is not a pool member");
        for (size_t i = 0; i < ngot; i++)
            if (got[i].n == t.n && memcmp(got[i].p, t.p, t.n) == 0)
                fail("REPLICAS: a member is listed twice");
        got[ngot++] = t;
    }
    if (!st.modeled)
        return;
    const model_snap_t *s = snap();
    uint32_t want[MAX_POOL];
    static unsigned char down[MAX_POOL];
    static double scale[MAX_POOL];
    health_of(s, down, scale);
    size_t wn = model_lookup_n_up(s, model_hash(&s->cfg, key.p, key.n), down, want, want_n);
    if (ngot != wn)
        fail("REPLICAS: %zu members, expected %zu", ngot, wn);
    for (size_t i = 0; i < wn; i++)
        expect_model_name(got[i], &s->members[want[i]], "replica");
}

static void do_stats(void)
{
    expect_lines(1 + st.npool);
    span_t l = lines[0];
    uint64_t v[10];
    static const char *const keys[10] = {
        "version=",   " publishes=", " members=",   " points=",  " leases=",
        " acquires=", " spills=",    " saturated=", " retries=", " down="};
    for (int i = 0; i < 10; i++)
        if (!field(&l, keys[i], &v[i]))
            fail("STATS first line: expected %s<n>", keys[i]);
    if (l.n != 0)
        fail("STATS first line: trailing bytes");
    if (v[0] != st.version || v[1] != st.version || v[2] != st.npool || v[4] != outstanding() ||
        v[5] != st.acquires || v[8] != st.retries)
        fail("STATS: model version %llu members %zu leases %llu acquires %llu retries %llu",
             (unsigned long long)st.version, st.npool, (unsigned long long)outstanding(),
             (unsigned long long)st.acquires, (unsigned long long)st.retries);
    uint64_t ndown = 0;
    for (size_t i = 0; i < st.npool; i++)
        ndown += st.objs[st.pool[i].id].down != 0;
    if (v[9] != ndown)
        fail("STATS: model down %llu", (unsigned long long)ndown);
    if (st.modeled && (v[3] != snap()->npoints || v[6] != st.spills))
        fail("STATS: model points %zu spills %llu", snap()->npoints, (unsigned long long)st.spills);
    for (size_t i = 0; i < st.npool; i++) {
        const tmember_t *m = &st.pool[i];
        span_t r = lines[1 + i];
        if (r.n < m->len + 1 || memcmp(r.p, m->name, m->len) != 0)
            fail("STATS line %zu: not pool member %zu", i + 1, i);
        r.p += m->len;
        r.n -= m->len;
        uint64_t w, load, acq, prim, spill, sup;
        if (!field(&r, " weight=", &w) || !field(&r, " load=", &load) ||
            !field(&r, " acquires=", &acq) || !field(&r, " primary=", &prim) ||
            !field(&r, " spilled_in=", &spill) || !field(&r, " supplied=", &sup) || r.n != 0)
            fail("STATS line %zu: bad shape", i + 1);
        const tobj_t *o = &st.objs[m->id];
        if (w != m->weight || load != o->leases || acq != o->acquires || sup != m->supplied)
            fail("STATS line %zu: model weight %u load %llu acquires %llu supplied %llu", i + 1,
                 m->weight, (unsigned long long)o->leases, (unsigned long long)o->acquires,
                 (unsigned long long)m->supplied);
        if (st.modeled && (prim != o->primary || spill != o->spilled_in))
            fail("STATS line %zu: model primary %llu spilled_in %llu", i + 1,
                 (unsigned long long)o->primary, (unsigned long long)o->spilled_in);
    }
}

/* DOWN / UP n1 n2 ...: names as POOL's; at least one; every one a pool member, else ERR and
 * nothing changes. */
static void do_down(const char *line, size_t len, size_t pos, int down)
{
    static span_t list[MAX_POOL];
    size_t n;
    if (!names(line, len, pos, list, &n) || n == 0) {
        expect_err();
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (pool_find(list[i].p, list[i].n) < 0) {
            expect_err();
            return;
        }
    expect_ok();
    for (size_t i = 0; i < n; i++)
        st.objs[st.pool[pool_find(list[i].p, list[i].n)].id].down = down;
}

/* A RAMP scale as docs/cli.md says: a decimal number from 0 to 1, digits and at most one '.',
 * at least one digit, no sign or exponent, at most 20 bytes. */
static bool scale_word(span_t t, double *out)
{
    if (t.n == 0 || t.n > 20)
        return false;
    size_t digits = 0, dots = 0;
    char buf[21];
    for (size_t i = 0; i < t.n; i++) {
        if (t.p[i] >= '0' && t.p[i] <= '9')
            digits++;
        else if (t.p[i] == '.' && ++dots == 1)
            ;
        else
            return false;
        buf[i] = t.p[i];
    }
    buf[t.n] = 0;
    double v = strtod(buf, NULL);
    if (digits == 0 || !(v >= 0.0 && v <= 1.0))
        return false;
    *out = v;
    return true;
}

/* RAMP <name> <from> <to> <ms>: whether the line is well-formed (name, scales, ms), and its
 * parts. */
static bool ramp_parse(const char *line, size_t len, size_t pos, span_t *name, double *from,
                       double *to, uint64_t *ms)
{
    span_t a, b, c;
    return token(line, len, &pos, name) && token(line, len, &pos, &a) &&
           token(line, len, &pos, &b) && token(line, len, &pos, &c) && rest_blank(line, len, pos) &&
           name->n <= MODEL_NAME_MAX && !memchr(name->p, 0, name->n) && scale_word(a, from) &&
           scale_word(b, to) && number(c, UINT32_MAX, ms);
}

static void do_ramp(const char *line, size_t len, size_t pos)
{
    span_t name;
    double from, to;
    uint64_t ms;
    if (!ramp_parse(line, len, pos, &name, &from, &to, &ms)) {
        expect_err();
        return;
    }
    long j = pool_find(name.p, name.n);
    if (j < 0) {
        expect_err();
        return;
    }
    expect_ok();
    /* Only constant scales are fed (worth_feeding): ms 0, or from = to. */
    st.objs[st.pool[j].id].scale = to;
}

/* HEALTH: "<name> down=<0|1> scale=<s>" per pool member, s with 4 decimals. */
static void do_health(void)
{
    expect_lines(st.npool);
    for (size_t i = 0; i < st.npool; i++) {
        const tmember_t *m = &st.pool[i];
        const tobj_t *o = &st.objs[m->id];
        char want[MODEL_NAME_MAX + 64];
        memcpy(want, m->name, m->len);
        int n = snprintf(want + m->len, 64, " down=%d scale=%.4f", o->down ? 1 : 0, o->scale);
        if (!span_eq(lines[i], want, m->len + (size_t)n))
            fail("HEALTH line %zu: the model says \"%.*s\"", i + 1, (int)(m->len + (size_t)n),
                 want);
    }
}

static void do_version(void)
{
    expect_lines(1);
    uint64_t v;
    if (!number(lines[0], UINT64_MAX, &v) || v != st.version)
        fail("VERSION: model %llu", (unsigned long long)st.version);
}

/* Whether to feed the line at all (lines that only cost time are skipped). */
static bool worth_feeding(const char *line, size_t len)
{
    size_t pos = 0;
    span_t cmd, a, b;
    if (!token(line, len, &pos, &cmd))
        return true;
    /* Not modelled here, so not fed: ACQUIREH and TRY take leases the model does not count, and
     * DIGEST, MARK and DIFF answer what only the library computes.  fuzz_api checks the calls
     * behind them (chring_acquire_hash, chring_acquire_try, chring_snap_digest, chring_snap_diff)
     * against its model; tests/cli/acquire_hash.in and digest.in the commands. */
    if (is_word(cmd, "ACQUIREH") || is_word(cmd, "TRY") || is_word(cmd, "DIGEST") ||
        is_word(cmd, "MARK") || is_word(cmd, "DIFF"))
        return false;
    if (is_word(cmd, "SNAP")) {
        uint64_t n;
        if (token(line, len, &pos, &a) && number(a, UINT64_MAX, &n) && n > SNAP_LIMIT)
            return false;
    } else if (is_word(cmd, "WEIGHT")) {
        uint64_t w;
        if (token(line, len, &pos, &a) && token(line, len, &pos, &b) && number(b, UINT64_MAX, &w)) {
            uint64_t per = points_per_weight();
            if (w * per > 65536 && w * per <= MODEL_POINTS_MAX && w <= UINT32_MAX)
                return false;
        }
    } else if (is_word(cmd, "ACQUIRE") || is_word(cmd, "RETRY")) {
        if (st.nleases >= MAX_LEASES)
            return false;
    } else if (is_word(cmd, "RAMP")) {
        span_t name;
        double from, to;
        uint64_t ms;
        if (ramp_parse(line, len, pos, &name, &from, &to, &ms) && ms > 0 && from != to)
            return false; /* a scale that moves with time */
    } else if (is_word(cmd, "POOL") || is_word(cmd, "ADD")) {
        size_t n = 0;
        while (token(line, len, &pos, &a))
            n++;
        if (st.nobjs + n >= MAX_IDS || (is_word(cmd, "ADD") && st.npool + n > MAX_POOL) ||
            n > MAX_POOL)
            return false;
    }
    return true;
}

static void check(const char *line, size_t len)
{
    split_answer();
    size_t pos = 0;
    span_t cmd, arg;
    if (!token(line, len, &pos, &cmd) || cmd.p[0] == '#') {
        expect_lines(0);
        return;
    }
    if (nlines == 0 && !(is_word(cmd, "RING") || is_word(cmd, "DIST") || is_word(cmd, "HEALTH")))
        fail("no answer");
    size_t cmd_end = pos;
    bool spaced = cmd_end < len && line[cmd_end] == ' ';
    arg.p = line + cmd_end + (spaced ? 1 : 0);
    arg.n = spaced ? len - cmd_end - 1 : 0;

    if (is_word(cmd, "POOL")) {
        do_pool(line, len, pos);
    } else if (is_word(cmd, "ADD")) {
        do_add(line, len, pos);
    } else if (is_word(cmd, "REMOVE")) {
        do_remove(line, len, pos);
    } else if (is_word(cmd, "LOOKUP") || is_word(cmd, "HASH") || is_word(cmd, "BOUNDED") ||
               is_word(cmd, "ACQUIRE") || is_word(cmd, "RETRY") || is_word(cmd, "REPLICAS")) {
        if (!spaced) {
            expect_err();
            return;
        }
        if (is_word(cmd, "LOOKUP"))
            do_lookup(arg);
        else if (is_word(cmd, "HASH"))
            do_hash(arg);
        else if (is_word(cmd, "BOUNDED"))
            do_bounded(arg);
        else if (is_word(cmd, "ACQUIRE"))
            do_acquire(arg, NULL);
        else if (is_word(cmd, "RETRY"))
            do_retry(arg);
        else
            do_replicas(arg);
    } else if (is_word(cmd, "LOOKUPS")) {
        do_lookups(line, len, pos);
    } else if (is_word(cmd, "SNAP")) {
        span_t t;
        uint64_t n;
        if (!token(line, len, &pos, &t) || !rest_blank(line, len, pos) ||
            !number(t, CHRING_CLI_SNAP_MAX, &n)) {
            expect_err();
            return;
        }
        do_snap(n);
    } else if (is_word(cmd, "WEIGHT")) {
        do_weight(line, len, pos);
    } else if (is_word(cmd, "LOAD")) {
        do_load(line, len, pos);
    } else if (is_word(cmd, "RELEASE")) {
        do_release(line, len, pos);
    } else if (is_word(cmd, "DOWN") || is_word(cmd, "UP")) {
        do_down(line, len, pos, is_word(cmd, "DOWN"));
    } else if (is_word(cmd, "RAMP")) {
        do_ramp(line, len, pos);
    } else if (is_word(cmd, "RING") || is_word(cmd, "DIST") || is_word(cmd, "MOVED") ||
               is_word(cmd, "STATS") || is_word(cmd, "VERSION") || is_word(cmd, "HEALTH")) {
        if (!rest_blank(line, len, pos)) {
            expect_err();
            return;
        }
        if (is_word(cmd, "RING"))
            do_ring();
        else if (is_word(cmd, "DIST"))
            do_dist();
        else if (is_word(cmd, "MOVED"))
            do_moved();
        else if (is_word(cmd, "STATS"))
            do_stats();
        else if (is_word(cmd, "HEALTH"))
            do_health();
        else
            do_version();
    } else {
        expect_err();
    }
}

/* ---- the driver ------------------------------------------------------------------------------ */

static void options(const char *line, size_t len, chring_cli_options_t *opt, char *profile)
{
    /* "#!<profile> <vnodes> <balance>" */
    size_t pos = 2;
    span_t t;
    opt->profile = "murmur32";
    opt->vnodes = 16;
    opt->balance = 0;
    if (token(line, len, &pos, &t) && t.n < 16) {
        static const char *const known[] = {"hash64", "murmur32", "fnv32", "fnv16",
                                            "xxh3",   "ketama",   "nginx"};
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (span_eq(t, known[i], strlen(known[i]))) {
                memcpy(profile, t.p, t.n);
                profile[t.n] = 0;
                opt->profile = profile;
            }
    }
    uint64_t v;
    if (token(line, len, &pos, &t) && number(t, UINT64_MAX, &v))
        opt->vnodes = (uint32_t)(1 + v % 32);
    if (token(line, len, &pos, &t) && t.n < 24) {
        char buf[24];
        memcpy(buf, t.p, t.n);
        buf[t.n] = 0;
        opt->balance = strtod(buf, NULL);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (model_selftest() != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    chring_cli_options_t opt;
    char profile[16];
    size_t first = 0;
    while (first < size && in[first] != '\n')
        first++;
    if (size >= 2 && in[0] == '#' && in[1] == '!')
        options(in, first, &opt, profile);
    else
        options("#!", 2, &opt, profile);

    memset(&st, 0, sizeof st);
    st.cfg.vnodes = opt.vnodes;
    st.balance = opt.balance > 0 ? opt.balance : 1.25;
    st.modeled = 1;
    if (strcmp(opt.profile, "hash64") == 0) {
        st.cfg.profile = MODEL_HASH64;
        st.cfg.bits = 64;
    } else if (strcmp(opt.profile, "murmur32") == 0) {
        st.cfg.profile = MODEL_MURMUR32;
        st.cfg.bits = 32;
    } else if (strcmp(opt.profile, "fnv32") == 0) {
        st.cfg.profile = MODEL_FNV32;
        st.cfg.bits = 32;
    } else if (strcmp(opt.profile, "fnv16") == 0) {
        st.cfg.profile = MODEL_FNV16;
        st.cfg.bits = 16;
    } else if (strcmp(opt.profile, "xxh3") == 0) {
        st.cfg.profile = MODEL_XXH3;
        st.cfg.bits = 64;
    } else if (strcmp(opt.profile, "nginx") == 0) {
        st.cfg.profile = MODEL_NGINX;
        st.cfg.bits = 32;
    } else {
        st.modeled = 0;                /* ketama */
        st.cfg.profile = MODEL_CUSTOM; /* marks "not modelled"; never used to hash */
        st.cfg.bits = 64;
    }
    st.snap_dirty = 1;

    chring_cli_t *cli = NULL;
    int rc = chring_cli_new(&cli, &opt);
    if (rc != 0 || !cli) {
        fprintf(stderr, "chring_cli_new(%s, %u, %g) = %d\n", opt.profile, opt.vnodes, opt.balance,
                rc);
        abort();
    }
    char *buf = NULL;
    size_t buf_len = 0;
    FILE *out = open_memstream(&buf, &buf_len);
    if (!out)
        abort();
    size_t start = 0;
    while (start < size) {
        size_t end = start;
        while (end < size && in[end] != '\n')
            end++;
        const char *line = in + start;
        size_t len = end - start;
        start = end + 1;
        if (!worth_feeding(line, len))
            continue;
        size_t before = buf_len;
        chring_cli_exec(cli, line, len, out);
        if (fflush(out) != 0)
            abort();
        cur_line = line;
        cur_len = len;
        cur_out = buf + before;
        cur_out_len = buf_len - before;
        check(line, len);
    }
    fclose(out);
    free(buf);
    chring_cli_free(cli);
    model_snap_free(&st.snap);
    free(st.snap_ring);
    free(st.snap_mod);
    return 0;
}
