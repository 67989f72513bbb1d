/* libFuzzer target: the public API of chring against the reference model (tests/model/model.c).
 *
 * SPDX-License-Identifier: MIT
 *
 * The input is decoded into a ring configuration and a sequence of API operations (the format is
 * described in docs/fuzz.md).  Every operation runs on the library and on the model; after it the
 * two must agree exactly (owners, replica lists, bounded choices, acquire choices and outcomes,
 * chring_acquire_try's admissions, error codes, versions, points in ring order, shares, moved
 * fractions, the arcs of chring_snap_diff, digests equal exactly when the points are, loads and
 * statistics, health: members down and constant admission scales) or the target prints what
 * differs and aborts.  The retire callback checks that every member object is retired
 * exactly once, only after nothing references it any more, and never for an add that failed; a
 * udata a successful call did not keep (its change named a member that exists already) must come
 * back exactly once before the call returns, and none from a failed call (config.retire in
 * include/chring.h).
 *
 * Environment: FUZZ_API_TRACE=1 prints every operation as it runs (for replaying a finding).
 */
#include <chring.h>

#include "model.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu-bp.h>

/* ---- input decoding ------------------------------------------------------------------------ */

typedef struct input {
    const uint8_t *p;
    size_t n;
} input_t;

static int more(const input_t *in)
{
    return in->n > 0;
}

static uint8_t take8(input_t *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static uint64_t take64(input_t *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | take8(in);
    return v;
}

/* ---- failure reporting --------------------------------------------------------------------- */

static char trace[8192];
static size_t trace_len;
static int trace_print;
static unsigned op_no;

static void note(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    if (trace_print)
        fprintf(stderr, "op %u: %s\n", op_no, line);
    if (trace_len + (size_t)n + 16 >= sizeof trace) {
        /* Keep the most recent half. */
        memmove(trace, trace + sizeof trace / 2, trace_len - sizeof trace / 2);
        trace_len -= sizeof trace / 2;
    }
    trace_len +=
        (size_t)snprintf(trace + trace_len, sizeof trace - trace_len, "op %u: %s\n", op_no, line);
}

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "\n==== fuzz_api: library and model disagree ====\nrecent operations:\n%.*s",
            (int)trace_len, trace);
    fprintf(stderr, "at op %u: ", op_no);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    abort();
}

/* Printable rendering of a name or key for messages. */
static const char *show(const void *data, size_t len)
{
    static char buf[4][96];
    static int which;
    char *out = buf[which++ & 3];
    const unsigned char *p = data;
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < len && o < 80; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
            out[o++] = (char)p[i];
        else
            o += (size_t)snprintf(out + o, 96 - o, "\\x%02x", p[i]);
    }
    if (len > 0 && o >= 80)
        o += (size_t)snprintf(out + o, 96 - o, "...(%zu)", len);
    out[o++] = '"';
    out[o] = 0;
    return out;
}

/* ---- member objects and the retire callback ------------------------------------------------ */

/* One object per add call that may create a member; udata of the member is &objs[id].  The
 * reference fields are read by the retire callback, which may run on the ring's reclaimer thread:
 * they are accessed atomically, and a field that releases a reference is updated before the
 * library call that may retire the member. */
typedef struct obj {
    char name[MODEL_NAME_MAX + 1];
    size_t len;
    int added;   /* became a member (a successful call added it) */
    int live;    /* in the current membership */
    int leases;  /* outstanding leases */
    int holds;   /* held snapshots listing it */
    int readers; /* the open read section lists it */
    int pending; /* passed to the writer call in flight, which may hand it back at once */
    int handed;  /* handed back at once by a successful call that did not keep it */
    int retired; /* retire calls seen */
    /* The version of the first snapshot that no longer lists it (0: never left).  A snapshot
     * held from before then keeps it unretired, even one from before it joined (docs/design.md
     * §4, "References": the chain does not know where a member's listing began). */
    uint64_t left_version;
    uint64_t load, acquires, primary, spilled_in;
    int down;     /* chring_set_down: the state belongs to the member object */
    double scale; /* the admission scale of its constant ramp (chring_set_ramp), 1 without */
    /* Its report (chring_report_load): counts while rep_live, the member live and up; the
     * reports of this target never expire (config.report_ttl_ms UINT32_MAX, or 0: ignored). */
    int rep_live;
    uint64_t rep_value, rep_local;
    /* A flap (docs/design.md §3): removed while its leases, or those of an earlier object of
     * its name, were out; its leases then count on every later object of its name. */
    int ghosted;
    uint64_t down_in; /* acquires placed here because the key's owner was down */
} obj_t;

#define MAX_OBJS 1024
static obj_t objs[MAX_OBJS];
static int nobjs;
static uintptr_t generation; /* retire_ctx of the current ring */

static int ld(const int *p)
{
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static void add_to(int *p, int d)
{
    __atomic_add_fetch(p, d, __ATOMIC_SEQ_CST);
}

static void on_retire(void *udata, void *ctx)
{
    if ((uintptr_t)ctx != __atomic_load_n(&generation, __ATOMIC_SEQ_CST))
        fail("retire called with the context of a ring already freed (ctx %p)", ctx);
    obj_t *o = udata;
    if (o < objs || o >= objs + MAX_OBJS)
        fail("retire called with a udata that is no member's: %p", udata);
    int times = __atomic_add_fetch(&o->retired, 1, __ATOMIC_SEQ_CST);
    if (times > 1)
        fail("member %s (object %d) retired %d times", show(o->name, o->len), (int)(o - objs),
             times);
    if (!ld(&o->added) && !ld(&o->pending))
        fail("retire called for %s (object %d), which no successful call kept and no call in "
             "flight passed",
             show(o->name, o->len), (int)(o - objs));
    if (ld(&o->live) || ld(&o->leases) || ld(&o->holds) || ld(&o->readers))
        fail("member %s (object %d) retired while still referenced: live=%d leases=%d "
             "held-snapshots=%d read-section=%d",
             show(o->name, o->len), (int)(o - objs), ld(&o->live), ld(&o->leases), ld(&o->holds),
             ld(&o->readers));
}

/* ---- OOM injection ------------------------------------------------------------------------- */

static int fail_countdown; /* >0: the countdown-th allocation from now fails */
static int failed_allocs;

static void *fuzz_alloc(size_t size, void *ctx)
{
    (void)ctx;
    int c = __atomic_load_n(&fail_countdown, __ATOMIC_SEQ_CST);
    if (c > 0 && __atomic_sub_fetch(&fail_countdown, 1, __ATOMIC_SEQ_CST) == 0) {
        __atomic_add_fetch(&failed_allocs, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    return malloc(size);
}

static void fuzz_free(void *ptr, void *ctx)
{
    (void)ctx;
    free(ptr);
}

/* ---- the run's state ----------------------------------------------------------------------- */

typedef struct custom_ctx {
    unsigned buckets; /* distinct values: few, so positions collide */
    unsigned bits;
    int garbage; /* set bits above the width, which the library must ignore */
} custom_ctx_t;

static uint64_t custom_hash(const void *data, size_t len, void *ctx)
{
    const custom_ctx_t *c = ctx;
    uint64_t v = model_fnv1a32(data, len) % c->buckets;
    uint64_t span = c->bits == 64 ? UINT64_MAX : (UINT64_C(1) << c->bits) - 1;
    v *= span / c->buckets;
    if (c->garbage && c->bits < 64)
        v |= model_fnv1a64(data, len) << c->bits;
    return v;
}

static custom_ctx_t custom;
static model_cfg_t mcfg;
static double balance;
static chring_t *ring;

/* The model's membership in join order, and its snapshot. */
#define MAX_MEMBERS 64
static model_member_t members[MAX_MEMBERS];
static size_t nmembers;
static model_snap_t cur;
static uint64_t version;
static uint64_t acquires, spills, saturated_events, retries;
static uint64_t reports; /* chring_report_load calls recorded (chring_stats_t.reports) */
static uint64_t owner_downs; /* acquires whose owner was down, on the first member up after it */
static int reports_ignored; /* config.report_ttl_ms 0 */

#define LEASES 32
static chring_lease_t leases[LEASES];
static int lease_obj[LEASES]; /* -1: empty */
/* A copy of each slot's last released lease (the misuse guard of chring_release), and its object
 * (-1: none). */
static chring_lease_t stale[LEASES];
static int stale_obj[LEASES];

/* A second ring, created once, holding one lease of its own: leases released through the wrong
 * ring must change nothing on either (the misuse guard of chring_release). */
static chring_t *other;
static chring_lease_t other_lease;

#define HELD 6
static const chring_snap_t *held[HELD];
static model_snap_t held_model[HELD];
static uint64_t held_version[HELD];
static uint64_t held_digest[HELD]; /* chring_snap_digest when it was held: it never changes */

/* The digest rule (chring_snap_digest): the last snapshot whose digest was checked, as the model
 * builds it, and that digest.  A snapshot with the same points (position, member name, in order)
 * must have the same digest, one with other points another digest. */
static model_snap_t digest_model;
static uint64_t digest_value;
static int digest_known;

static void rebuild(void)
{
    model_snap_free(&cur);
    if (model_build(&cur, &mcfg, members, nmembers) != 0)
        abort();
}

/* ---- names, keys, weights ------------------------------------------------------------------ */

typedef struct bytes {
    char b[300];
    size_t len;
} bytes_t;

#define POOL_MAX 24
static bytes_t pool[POOL_MAX];
static size_t pool_n, pool_next;

static void pool_reset(void)
{
    static const char *const seeds[] = {"a",        "b",        "c",   "node-1", "node-2", "node 3",
                                        "\xff\xfe", "engine-0", "x#1", "1-a",    "ab",     "a\x01"};
    pool_n = 0;
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        pool[pool_n].len = strlen(seeds[i]);
        memcpy(pool[pool_n].b, seeds[i], pool[pool_n].len + 1);
        pool_n++;
    }
    /* The longest valid name, one byte too long, and empty. */
    memset(pool[pool_n].b, 'n', 255);
    pool[pool_n].b[255] = 0;
    pool[pool_n++].len = 255;
    memset(pool[pool_n].b, 'n', 256);
    pool[pool_n].b[256] = 0;
    pool[pool_n++].len = 256;
    pool[pool_n].b[0] = 0;
    pool[pool_n++].len = 0;
    pool_next = pool_n;
}

/* A member name: mostly from the pool (so names recur), sometimes literal bytes (cut at the first
 * NUL: a C string cannot hold one), which then join the pool. */
static const bytes_t *take_name(input_t *in)
{
    uint8_t s = take8(in);
    if (s < 0xc0)
        return &pool[s % pool_n];
    static bytes_t lit;
    size_t len = take8(in);
    if (s & 1)
        len = 250 + len % 10; /* around the 255-byte limit */
    size_t got = 0;
    while (got < len && more(in)) {
        uint8_t c = take8(in);
        if (c == 0)
            break;
        lit.b[got++] = (char)c;
    }
    if (s & 1) /* pad long names so they reach the limit even at the end of the input */
        while (got < len)
            lit.b[got++] = 'L';
    lit.b[got] = 0;
    lit.len = got;
    if (pool_n < POOL_MAX) {
        pool[pool_n++] = lit;
    } else {
        pool[pool_next] = lit;
        pool_next = pool_next + 1 < POOL_MAX ? pool_next + 1 : 15;
    }
    return &lit;
}

static bytes_t key_buf;

/* A key: "key<n>" mostly, or literal bytes (NUL allowed: keys have a length). */
static const bytes_t *take_key(input_t *in, int *null_ptr)
{
    uint8_t s = take8(in);
    *null_ptr = 0;
    if (s < 0xc0) {
        key_buf.len = (size_t)snprintf(key_buf.b, sizeof key_buf.b, "key%u", (unsigned)s);
    } else if (s == 0xff) {
        key_buf.len = 0;
        *null_ptr = 1; /* a zero-length key may be NULL */
    } else {
        size_t len = take8(in) % 64;
        size_t got = 0;
        while (got < len && more(in))
            key_buf.b[got++] = (char)take8(in);
        key_buf.len = got;
    }
    return &key_buf;
}

static const void *key_ptr(const bytes_t *k, int null_ptr)
{
    return null_ptr ? NULL : k->b;
}

/* Weights: small ones mostly, 0, and values whose point count passes CHRING_POINTS_MAX, reaches
 * exactly 2^32 (wraps to 0 in 32-bit arithmetic) or wraps to a small count. */
static uint32_t take_weight(input_t *in)
{
    uint8_t s = take8(in);
    uint64_t v = model_points_per_weight(&mcfg);
    if (v == 0)
        v = mcfg.vnodes; /* ketama: no fixed points per weight */
    if (s < 200)
        return 1 + s % 6;
    switch ((s - 200) % 12) {
    case 0: return 0;
    case 1: return 7;
    case 2: return 16;
    case 3: return (uint32_t)(MODEL_POINTS_MAX / v + 1);
    case 4: return UINT32_C(0x80000000);
    case 5: return UINT32_MAX;
    case 6: return (uint32_t)((UINT64_C(1) << 32) / v);
    case 7: return (uint32_t)((UINT64_C(1) << 32) / v + 1);
    case 8: return UINT32_C(0x10000000);
    case 9: return MODEL_POINTS_MAX + 1;
    case 10: return 33;
    default: return 0;
    }
}

static const double balances[] = {1.25, 1.0,   1.5, 2.0, 0.5, NAN,     INFINITY,          -INFINITY,
                                  -1.0, 1e300, 1.1, 3.0, 0.0, DBL_MIN, 1.0 + DBL_EPSILON, 7.75};

static double take_balance(input_t *in)
{
    return balances[take8(in) % (sizeof balances / sizeof balances[0])];
}

/* ---- identifying library members with model members ---------------------------------------- */

static int obj_of(const chring_member_t *m)
{
    obj_t *o = chring_member_udata(m);
    if (o < objs || o >= objs + nobjs)
        fail("member %p has udata %p, which is no object of this run", (const void *)m, (void *)o);
    return (int)(o - objs);
}

/* m must be the member object `obj` (udata) named `name`. */
static void expect_member(const chring_member_t *m, const model_member_t *want, const char *what)
{
    if (!want) {
        if (m)
            fail("%s: library returned member %s, model expects none", what,
                 show(chring_member_name(m), strlen(chring_member_name(m))));
        return;
    }
    if (!m)
        fail("%s: library returned no member, model expects %s", what, show(want->name, want->len));
    const char *name = chring_member_name(m);
    if (!name || strlen(name) != want->len || memcmp(name, want->name, want->len) != 0)
        fail("%s: library returned %s, model expects %s", what,
             name ? show(name, strlen(name)) : "(null name)", show(want->name, want->len));
    if (obj_of(m) != want->obj)
        fail("%s: member %s is object %d, model expects object %d (udata replaced?)", what,
             show(want->name, want->len), obj_of(m), want->obj);
}

/* ---- read sections ------------------------------------------------------------------------- */

/* Read sections may nest; each frame remembers the member objects its snapshot listed, which
 * must not be retired before the section ends (the membership may change meanwhile: a writer may
 * run inside a read section). */
#define MAX_DEPTH 4
static int frame_objs[MAX_DEPTH][MAX_MEMBERS];
static size_t frame_len[MAX_DEPTH];
static int depth;

static const chring_snap_t *enter(void)
{
    if (depth == MAX_DEPTH)
        abort();
    frame_len[depth] = cur.nmembers;
    for (size_t j = 0; j < cur.nmembers; j++) {
        frame_objs[depth][j] = cur.members[j].obj;
        add_to(&objs[cur.members[j].obj].readers, 1);
    }
    depth++;
    return chring_snap_enter(ring);
}

static void leave(const chring_snap_t *s)
{
    chring_snap_exit(ring, s);
    depth--;
    for (size_t j = 0; j < frame_len[depth]; j++)
        add_to(&objs[frame_objs[depth][j]].readers, -1);
}

/* ---- full consistency check ---------------------------------------------------------------- */

static int close_enough(double a, double b)
{
    return fabs(a - b) <= 1e-9;
}

static void check_snapshot(const chring_snap_t *s, const model_snap_t *m, uint64_t ver,
                           const char *which)
{
    if (chring_snap_check(s) != 0)
        fail("%s: chring_snap_check fails", which);
    if (chring_snap_version(s) != ver)
        fail("%s: version %llu, model %llu", which, (unsigned long long)chring_snap_version(s),
             (unsigned long long)ver);
    if (chring_snap_len(s) != m->nmembers)
        fail("%s: %zu members, model %zu", which, chring_snap_len(s), m->nmembers);
    if (chring_snap_points(s) != m->npoints)
        fail("%s: %zu points, model %zu", which, chring_snap_points(s), m->npoints);
    if (chring_snap_hash_bits(s) != m->cfg.bits)
        fail("%s: hash width %u, model %u", which, chring_snap_hash_bits(s), m->cfg.bits);
    for (size_t i = 0; i < m->npoints; i++) {
        uint64_t pos = 0;
        const chring_member_t *pm = NULL;
        int rc = chring_snap_point(s, i, &pos, &pm);
        if (rc != 0)
            fail("%s: chring_snap_point(%zu) = %d", which, i, rc);
        const model_point_t *p = &m->points[i];
        if (pos != p->pos)
            fail("%s: point %zu at %llu, model %llu (member %s index %u)", which, i,
                 (unsigned long long)pos, (unsigned long long)p->pos,
                 show(m->members[p->member].name, m->members[p->member].len), p->index);
        expect_member(pm, &m->members[p->member], "chring_snap_point");
    }
    if (chring_snap_point(s, m->npoints, NULL, NULL) != -ERANGE)
        fail("%s: chring_snap_point past the end is not -ERANGE", which);
    double share_sum = 0;
    static double shares[MAX_MEMBERS];
    model_shares(m, shares);
    for (size_t i = 0; i < m->nmembers; i++) {
        const model_member_t *want = &m->members[m->by_name[i]];
        const chring_member_t *lm = chring_snap_member(s, i);
        expect_member(lm, want, "chring_snap_member (sorted by name)");
        if (chring_member_check(lm) != 0)
            fail("%s: chring_member_check(%s) fails", which, show(want->name, want->len));
        if (chring_snap_find(s, want->name) != lm)
            fail("%s: chring_snap_find(%s) is not chring_snap_member", which,
                 show(want->name, want->len));
        if (chring_snap_weight(s, lm) != want->weight)
            fail("%s: snapshot weight of %s is %u, model %u", which, show(want->name, want->len),
                 chring_snap_weight(s, lm), want->weight);
        if (chring_snap_member_points(s, lm) != m->member_points[m->by_name[i]])
            fail("%s: %s has %zu points, model %zu", which, show(want->name, want->len),
                 chring_snap_member_points(s, lm), m->member_points[m->by_name[i]]);
        double share = chring_member_share(s, lm), want_share = shares[m->by_name[i]];
        if (!close_enough(share, want_share))
            fail("%s: share of %s is %.17g, model %.17g", which, show(want->name, want->len), share,
                 want_share);
        share_sum += share;
        const obj_t *o = &objs[want->obj];
        if (chring_member_load(lm) != o->load)
            fail("%s: load of %s is %llu, model %llu", which, show(want->name, want->len),
                 (unsigned long long)chring_member_load(lm), (unsigned long long)o->load);
        chring_member_stats_t st;
        chring_member_stats(lm, &st);
        if (st.load != o->load || st.acquires != o->acquires || st.primary != o->primary ||
            st.spilled_in != o->spilled_in)
            fail("%s: stats of %s: load %llu acquires %llu primary %llu spilled_in %llu; model "
                 "%llu %llu %llu %llu",
                 which, show(want->name, want->len), (unsigned long long)st.load,
                 (unsigned long long)st.acquires, (unsigned long long)st.primary,
                 (unsigned long long)st.spilled_in, (unsigned long long)o->load,
                 (unsigned long long)o->acquires, (unsigned long long)o->primary,
                 (unsigned long long)o->spilled_in);
    }
    if (chring_snap_member(s, m->nmembers) != NULL)
        fail("%s: chring_snap_member past the end is not NULL", which);
    if (m->nmembers > 0 && !close_enough(share_sum, 1.0))
        fail("%s: shares sum to %.17g", which, share_sum);
}

static uint64_t model_leases(void)
{
    uint64_t n = 0;
    for (int i = 0; i < LEASES; i++)
        n += lease_obj[i] >= 0;
    return n;
}

/* What the bound counts for object id (docs/design.md §3, "Reported load"): its load, raised
 * by its report while that counts (the member live and up: a report of a member down or gone
 * counts nothing). */
/* The leases the library counts on object id for the removed objects of its name (flaps):
 * those of every earlier object of its name that left with leases out, its own or inherited. */
static uint64_t obj_inherited(int id)
{
    uint64_t n = 0;
    for (int j = 0; j < id; j++)
        if (objs[j].ghosted && !ld(&objs[j].live) && objs[j].len == objs[id].len &&
            memcmp(objs[j].name, objs[id].name, objs[id].len) == 0)
            n += objs[j].load;
    return n;
}

static uint64_t obj_count(int id)
{
    const obj_t *o = &objs[id];
    uint64_t local = o->load + obj_inherited(id);
    if (!o->rep_live || !ld(&o->live) || o->down)
        return local;
    return model_report_count(local, o->rep_value, o->rep_local);
}

/* The m of snapshot m's capacities: the leases, plus what its members' reports add. */
static uint64_t model_m(const model_snap_t *m)
{
    uint64_t total = model_leases();
    for (size_t j = 0; j < m->nmembers; j++) {
        int id = m->members[j].obj;
        total += obj_count(id) - objs[id].load - obj_inherited(id);
    }
    return total;
}

/* The health of snapshot m's members (join order), from their objects: a held snapshot sees its
 * members' current state, a removed member keeps the one it had. */
typedef struct health {
    unsigned char down[MAX_MEMBERS];
    double scale[MAX_MEMBERS];
    size_t ndown;
} health_t;

static void health_of(const model_snap_t *m, health_t *hl)
{
    hl->ndown = 0;
    for (size_t j = 0; j < m->nmembers; j++) {
        const obj_t *o = &objs[m->members[j].obj];
        hl->down[j] = (unsigned char)o->down;
        hl->scale[j] = o->scale;
        hl->ndown += o->down != 0;
    }
}

/* Whether two model snapshots have the same points: positions and member names in ring order
 * (what chring_snap_digest covers besides the profile and its parameters, fixed per input). */
static int points_alike(const model_snap_t *a, const model_snap_t *b)
{
    if (a->npoints != b->npoints)
        return 0;
    for (size_t i = 0; i < a->npoints; i++) {
        const model_member_t *ma = &a->members[a->points[i].member];
        const model_member_t *mb = &b->members[b->points[i].member];
        if (a->points[i].pos != b->points[i].pos || ma->len != mb->len ||
            memcmp(ma->name, mb->name, ma->len) != 0)
            return 0;
    }
    return 1;
}

/* The digest of a snapshot against one of a snapshot the model says places alike or not. */
static void expect_digest(uint64_t got, const model_snap_t *m, uint64_t other,
                          const model_snap_t *other_m, const char *what)
{
    int alike = points_alike(m, other_m);
    if (alike && got != other)
        fail("%s: digests %016llx and %016llx of snapshots with the same points (%zu)", what,
             (unsigned long long)got, (unsigned long long)other, m->npoints);
    if (!alike && got == other)
        fail("%s: digest %016llx for snapshots with different points (%zu and %zu)", what,
             (unsigned long long)got, m->npoints, other_m->npoints);
}

static void check_all(void)
{
    const chring_snap_t *s = enter();
    check_snapshot(s, &cur, version, "current snapshot");
    /* The digest covers placement alone: health, ramps, loads and leases leave it, and a publish
     * changes it exactly when the points change. */
    uint64_t digest = chring_snap_digest(s);
    if (digest_known)
        expect_digest(digest, &cur, digest_value, &digest_model,
                      "chring_snap_digest of the current snapshot against the last one checked");
    if (!digest_known || !points_alike(&cur, &digest_model)) {
        model_snap_free(&digest_model);
        if (model_build(&digest_model, &mcfg, members, nmembers) != 0)
            abort();
    }
    digest_value = digest;
    digest_known = 1;
    if (chring_len(ring) != nmembers)
        fail("chring_len %zu, model %zu", chring_len(ring), nmembers);
    /* Current weights, health and capacities of the live members: W counts the members up, the
     * capacity is scaled by the member's admission scale. */
    health_t hl;
    health_of(&cur, &hl);
    double eff_sum = model_effective_sum(&cur, hl.down, hl.scale);
    for (size_t j = 0; j < cur.nmembers; j++) {
        const model_member_t *want = &cur.members[j];
        const chring_member_t *lm = chring_snap_find(s, want->name);
        expect_member(lm, want, "chring_snap_find");
        if (chring_member_weight(lm) != want->weight)
            fail("current weight of %s is %u, model %u", show(want->name, want->len),
                 chring_member_weight(lm), want->weight);
        if (chring_member_is_down(lm) != hl.down[j])
            fail("chring_member_is_down(%s) = %d, model %d", show(want->name, want->len),
                 chring_member_is_down(lm), hl.down[j]);
        if (chring_member_scale(lm) != hl.scale[j])
            fail("chring_member_scale(%s) = %.17g, model %.17g", show(want->name, want->len),
                 chring_member_scale(lm), hl.scale[j]);
        /* Effective weights (docs/design.md §3): e = scale * w against E of the members up. */
        double e = hl.scale[j] < 1.0 ? hl.scale[j] * (double)want->weight : (double)want->weight;
        double cap = hl.down[j] ? 0.0 : model_effective_capacity(balance, model_m(&cur), e, eff_sum);
        uint64_t got = chring_member_capacity(ring, s, lm);
        /* Past 2^63 the library's capacity saturates: then only "at least 2^63" is checked. */
        if (cap < 0x1p63 ? (double)got != cap : got < (UINT64_C(1) << 63))
            fail("chring_member_capacity(%s) = %llu, model %.17g", show(want->name, want->len),
                 (unsigned long long)got, cap);
    }
    leave(s);

    chring_stats_t st;
    chring_stats(ring, &st);
    uint64_t nleases = model_leases();
    if (st.owner_down != owner_downs)
        fail("chring_stats: owner_down %llu, model %llu", (unsigned long long)st.owner_down,
             (unsigned long long)owner_downs);
    if (st.counted != model_m(&cur) || st.reports != reports)
        fail("chring_stats: counted %llu reports %llu; model %llu %llu",
             (unsigned long long)st.counted, (unsigned long long)st.reports,
             (unsigned long long)model_m(&cur), (unsigned long long)reports);
    if (st.version != version || st.publishes != version || st.members != nmembers ||
        st.points != cur.npoints || st.leases != nleases || st.acquires != acquires ||
        st.spills != spills || st.saturated != saturated_events || st.retries != retries ||
        st.down != hl.ndown)
        fail("chring_stats: version %llu publishes %llu members %llu points %llu leases %llu "
             "acquires %llu spills %llu saturated %llu retries %llu down %llu; model %llu %llu %zu "
             "%zu %llu %llu %llu %llu %llu %zu",
             (unsigned long long)st.version, (unsigned long long)st.publishes,
             (unsigned long long)st.members, (unsigned long long)st.points,
             (unsigned long long)st.leases, (unsigned long long)st.acquires,
             (unsigned long long)st.spills, (unsigned long long)st.saturated,
             (unsigned long long)st.retries, (unsigned long long)st.down,
             (unsigned long long)version, (unsigned long long)version, nmembers, cur.npoints,
             (unsigned long long)nleases, (unsigned long long)acquires, (unsigned long long)spills,
             (unsigned long long)saturated_events, (unsigned long long)retries, hl.ndown);
    if (chring_leases(ring) != nleases)
        fail("chring_leases %llu, model %llu", (unsigned long long)chring_leases(ring),
             (unsigned long long)nleases);

    /* Leases keep their members valid, removed ones included. */
    uint64_t load_sum = 0;
    for (int i = 0; i < LEASES; i++) {
        if (lease_obj[i] < 0)
            continue;
        const obj_t *o = &objs[lease_obj[i]];
        const chring_member_t *lm = leases[i].member;
        if (!lm || chring_member_check(lm) != 0 || obj_of(lm) != lease_obj[i])
            fail("lease %d does not hold its member %s", i, show(o->name, o->len));
        if (chring_member_load(lm) != o->load)
            fail("load of %s (through lease %d, live=%d) is %llu, model %llu",
                 show(o->name, o->len), i, o->live, (unsigned long long)chring_member_load(lm),
                 (unsigned long long)o->load);
        chring_member_stats_t ms;
        chring_member_stats(lm, &ms);
        if (ms.load != o->load || ms.acquires != o->acquires || ms.primary != o->primary ||
            ms.spilled_in != o->spilled_in || ms.down_in != o->down_in)
            fail("stats of %s through lease %d differ from the model's", show(o->name, o->len), i);
        if (ms.inherited != obj_inherited(lease_obj[i]))
            fail("inherited leases of %s (lease %d): %llu, model %llu", show(o->name, o->len), i,
                 (unsigned long long)ms.inherited,
                 (unsigned long long)obj_inherited(lease_obj[i]));
        int live_report = o->rep_live && o->live && !o->down;
        if (ms.counted != obj_count(lease_obj[i]) || ms.report_live != (uint64_t)live_report ||
            (live_report && (ms.reported != o->rep_value || ms.local_at_report != o->rep_local)))
            fail("report stats of %s through lease %d: live %llu reported %llu at %llu counted "
                 "%llu; model %d %llu %llu %llu",
                 show(o->name, o->len), i, (unsigned long long)ms.report_live,
                 (unsigned long long)ms.reported, (unsigned long long)ms.local_at_report,
                 (unsigned long long)ms.counted, live_report, (unsigned long long)o->rep_value,
                 (unsigned long long)o->rep_local, (unsigned long long)obj_count(lease_obj[i]));
        if (!o->live) {
            /* A removed member is in no current snapshot: it owns nothing there. */
            const chring_snap_t *s2 = enter();
            if (chring_member_share(s2, lm) != 0.0 || chring_snap_weight(s2, lm) != 0 ||
                chring_snap_member_points(s2, lm) != 0 || chring_member_capacity(ring, s2, lm) != 0)
                fail("removed member %s (lease %d) still has a share, weight, points or capacity "
                     "in the current snapshot",
                     show(o->name, o->len), i);
            const chring_member_t *same = chring_snap_find(s2, o->name);
            if (same == lm)
                fail("chring_snap_find(%s) returns the removed member object",
                     show(o->name, o->len));
            leave(s2);
        }
    }
    for (int id = 0; id < nobjs; id++)
        if (objs[id].added && (objs[id].live || objs[id].leases))
            load_sum += objs[id].load;
    if (load_sum != nleases)
        fail("model: loads sum to %llu, leases %llu", (unsigned long long)load_sum,
             (unsigned long long)nleases);

    /* Held snapshots stay exactly as they were, their digests too; against the current one
     * a held snapshot's digest is equal exactly when the points are. */
    for (int h = 0; h < HELD; h++) {
        if (!held[h])
            continue;
        check_snapshot(held[h], &held_model[h], held_version[h], "held snapshot");
        if (chring_snap_digest(held[h]) != held_digest[h])
            fail("the digest of held snapshot %d changed: %016llx, was %016llx", h,
                 (unsigned long long)chring_snap_digest(held[h]),
                 (unsigned long long)held_digest[h]);
        expect_digest(held_digest[h], &held_model[h], digest, &cur,
                      "chring_snap_digest of a held snapshot against the current one");
    }
    if (chring_snap_digest(NULL) != 0)
        fail("chring_snap_digest(NULL) is not 0");
}

/* ---- writer operations --------------------------------------------------------------------- */

enum {
    E_INVAL = 1,
    E_NAMETOOLONG = 2,
    E_NOENT = 4,
    E_2BIG = 8
};

static unsigned name_errors(const bytes_t *n)
{
    if (n->len == 0)
        return E_INVAL;
    if (n->len > MODEL_NAME_MAX)
        return E_NAMETOOLONG;
    return 0;
}

static unsigned weight_errors(uint32_t w)
{
    if (w == 0)
        return E_INVAL;
    if (model_points_per_weight(&mcfg) * w > MODEL_POINTS_MAX)
        return E_2BIG;
    return 0;
}

static long member_index(const char *name, size_t len)
{
    for (size_t j = 0; j < nmembers; j++)
        if (model_name_cmp(members[j].name, members[j].len, name, len) == 0)
            return (long)j;
    return -1;
}

static int new_obj(const bytes_t *name)
{
    if (nobjs >= MAX_OBJS)
        return -1;
    obj_t *o = &objs[nobjs];
    memset(o, 0, sizeof *o);
    size_t len = name->len <= MODEL_NAME_MAX ? name->len : MODEL_NAME_MAX;
    memcpy(o->name, name->b, len);
    o->len = len;
    o->scale = 1.0;
    return nobjs++;
}

static const char *err_name(int rc)
{
    switch (-rc) {
    case 0: return "0";
    case EINVAL: return "-EINVAL";
    case ENAMETOOLONG: return "-ENAMETOOLONG";
    case ENOENT: return "-ENOENT";
    case E2BIG: return "-E2BIG";
    case ENOMEM: return "-ENOMEM";
    case ENOSPC: return "-ENOSPC";
    case ERANGE: return "-ERANGE";
    case EEXIST: return "-EEXIST";
    case EBUSY: return "-EBUSY";
    default: return "(other)";
    }
}

static unsigned err_bit(int rc)
{
    switch (-rc) {
    case EINVAL: return E_INVAL;
    case ENAMETOOLONG: return E_NAMETOOLONG;
    case ENOENT: return E_NOENT;
    case E2BIG: return E_2BIG;
    default: return 0x100;
    }
}

/* The planned outcome of a writer call: which errors are acceptable (any of them, in whatever
 * order the library checks), and on success the new membership. */
typedef struct plan {
    unsigned errors;
    unsigned pure; /* errors visible in the arguments alone (checked before any allocation) */
    model_member_t next[MAX_MEMBERS];
    size_t nnext;
    int overflow; /* more members than the target tracks: skip the call */
    int created[9];
    size_t ncreated;
    int passed[9]; /* fresh objects passed as udata: kept if created, else handed back at once */
    size_t npassed;
} plan_t;

static int oom_armed;

/* Runs a writer call planned by p: pre-marks the members it removes, calls, checks the result
 * code and applies or reverts. */
static void run_writer(plan_t *p, const char *what, int (*call)(void *), void *arg)
{
    int changed = 0;
    if (!p->errors) {
        changed = p->nnext != nmembers;
        for (size_t j = 0; !changed && j < nmembers; j++)
            changed = members[j].weight != p->next[j].weight || members[j].obj != p->next[j].obj;
    }
    /* Members about to leave stop counting as live before the call: the library may retire
     * them on another thread as soon as it publishes. */
    int gone[MAX_MEMBERS];
    size_t ngone = 0;
    if (!p->errors) {
        for (size_t j = 0; j < nmembers; j++) {
            int kept = 0;
            for (size_t k = 0; k < p->nnext; k++)
                kept |= p->next[k].obj == members[j].obj;
            if (!kept) {
                gone[ngone++] = members[j].obj;
                add_to(&objs[members[j].obj].live, -1);
            }
        }
    }
    for (size_t k = 0; k < p->npassed; k++)
        add_to(&objs[p->passed[k]].pending, 1);
    if (oom_armed)
        __atomic_store_n(&fail_countdown, oom_armed, __ATOMIC_SEQ_CST);
    int before_failed = ld(&failed_allocs);
    int rc = call(arg);
    __atomic_store_n(&fail_countdown, 0, __ATOMIC_SEQ_CST);
    int oom_hit = ld(&failed_allocs) != before_failed;
    oom_armed = 0;
    note("  -> %s (model: %s%s)", err_name(rc), p->errors ? "an error" : "success",
         oom_hit ? ", an allocation failed" : "");
    int ok;
    if (p->errors)
        ok = (rc < 0 && (err_bit(rc) & p->errors)) ||
             /* an error that needs the membership (unknown member, a repeated name) may come
              * after the writer's first allocation */
             (rc == -ENOMEM && oom_hit && !p->pure);
    else
        ok = rc == 0 || (rc == -ENOMEM && oom_hit);
    if (!ok)
        fail("%s returned %s; model expects %s (acceptable error bits 0x%x)", what, err_name(rc),
             p->errors ? "one of the errors" : "0", p->errors);
    /* The udata rule (config.retire in include/chring.h): a failed call hands none back; a
     * successful one hands back, before it returns, exactly the udata it did not keep. */
    for (size_t k = 0; k < p->npassed; k++) {
        int id = p->passed[k], kept = 0;
        for (size_t c = 0; c < p->ncreated; c++)
            kept |= p->created[c] == id;
        int want = rc == 0 && !kept;
        if (ld(&objs[id].retired) != want)
            fail("%s returned %s and handed the udata of its change %s (object %d) back %d times "
                 "before returning; expected %d (%s)",
                 what, err_name(rc), show(objs[id].name, objs[id].len), id, ld(&objs[id].retired),
                 want,
                 rc != 0 ? "a failed call keeps none and hands none back"
                 : kept  ? "the new member keeps it"
                         : "the member exists already: its udata is not replaced");
        add_to(&objs[id].handed, want);
        add_to(&objs[id].pending, -1);
    }
    if (rc != 0) {
        for (size_t g = 0; g < ngone; g++)
            add_to(&objs[gone[g]].live, 1);
        return;
    }
    /* Members that left with leases out, theirs or inherited, count on the next member of their
     * name (a flap, docs/design.md §3). */
    for (size_t g = 0; g < ngone; g++)
        objs[gone[g]].ghosted = objs[gone[g]].load + obj_inherited(gone[g]) > 0;
    for (size_t c = 0; c < p->ncreated; c++) {
        int id = p->created[c];
        for (size_t k = 0; k < p->nnext; k++)
            if (p->next[k].obj == id) {
                add_to(&objs[id].added, 1);
                add_to(&objs[id].live, 1);
            }
    }
    memcpy(members, p->next, p->nnext * sizeof *members);
    nmembers = p->nnext;
    if (changed)
        version++;
    for (size_t g = 0; g < ngone; g++)
        objs[gone[g]].left_version = version;
    rebuild();
}

/* Plans setting `name` to weight w (0: removal) on p->next; `obj` is the object a new member
 * would be.  Returns 0, or the error bits of this change. */
static unsigned plan_change(plan_t *p, const bytes_t *name, uint32_t w, int obj, int sync)
{
    unsigned e = name_errors(name);
    p->pure |= e | (w > 0 ? weight_errors(w) : sync ? E_INVAL : 0);
    long j = -1;
    for (size_t k = 0; !e && k < p->nnext; k++)
        if (model_name_cmp(p->next[k].name, p->next[k].len, name->b, name->len) == 0)
            j = (long)k;
    if (w == 0) {
        if (sync)
            return e | E_INVAL;
        if (j < 0)
            return e | E_NOENT;
        if (e)
            return e;
        memmove(&p->next[j], &p->next[j + 1], (p->nnext - (size_t)j - 1) * sizeof p->next[0]);
        p->nnext--;
        return 0;
    }
    e |= weight_errors(w);
    if (e)
        return e;
    if (j >= 0) {
        p->next[j].weight = w;
        return 0;
    }
    if (p->nnext >= MAX_MEMBERS || obj < 0) {
        p->overflow = 1;
        return 0;
    }
    model_member_t *m = &p->next[p->nnext++];
    memset(m, 0, sizeof *m);
    memcpy(m->name, name->b, name->len);
    m->len = name->len;
    m->weight = w;
    m->obj = obj;
    p->created[p->ncreated++] = obj;
    return 0;
}

static void plan_start(plan_t *p)
{
    memset(p, 0, offsetof(plan_t, next));
    memcpy(p->next, members, nmembers * sizeof *members);
    p->nnext = nmembers;
    p->overflow = 0;
    p->ncreated = 0;
    p->npassed = 0;
}

static unsigned plan_total(const plan_t *p)
{
    uint64_t total = 0;
    for (size_t k = 0; k < p->nnext; k++) {
        uint64_t points = model_points(&mcfg, p->next, p->nnext, k);
        if (points > MODEL_POINTS_MAX)
            return E_2BIG;
        total += points;
    }
    return total > MODEL_RING_POINTS_MAX ? E_2BIG : 0;
}

struct add_args {
    const char *name;
    uint32_t weight;
    void *udata;
};

/* The operation byte being run (its spare bits choose variants). */
static uint8_t op_byte;

/* The udata of a change naming `name` (bits 4-5 of a writer's operation byte, docs/fuzz.md): for
 * a member that exists already, mode 1 passes NULL (nothing may come back) and mode 2 the
 * member's own udata (kept, not handed back); otherwise a fresh object, whose id goes to *obj (-1
 * for NULL and own; -2 when the target has no object left). */
static void *change_udata(const bytes_t *name, unsigned mode, int *obj)
{
    long ex = member_index(name->b, name->len);
    *obj = -1;
    if (ex >= 0 && mode == 1)
        return NULL;
    if (ex >= 0 && mode == 2)
        return &objs[members[ex].obj];
    *obj = new_obj(name);
    return *obj >= 0 ? &objs[*obj] : (*obj = -2, NULL);
}

static int call_add(void *a)
{
    struct add_args *x = a;
    return chring_add(ring, x->name, x->weight, x->udata);
}

static int call_remove(void *a)
{
    struct add_args *x = a;
    return chring_remove(ring, x->name);
}

static int call_set_weight(void *a)
{
    struct add_args *x = a;
    return chring_set_weight(ring, x->name, x->weight);
}

struct batch_args {
    chring_change_t changes[8];
    size_t n;
    int null_array;
};

static int call_update(void *a)
{
    struct batch_args *x = a;
    return chring_update(ring, x->null_array ? NULL : x->changes, x->n);
}

static int call_sync(void *a)
{
    struct batch_args *x = a;
    return chring_sync(ring, x->null_array ? NULL : x->changes, x->n);
}

static void op_add(input_t *in)
{
    const bytes_t *name = take_name(in);
    uint32_t w = take_weight(in);
    int obj;
    unsigned mode = (op_byte >> 4) & 3;
    void *udata = change_udata(name, mode, &obj);
    if (obj == -2)
        return;
    plan_t p;
    plan_start(&p);
    unsigned e = weight_errors(w) | name_errors(name);
    p.pure = e;
    if (!e)
        e = plan_change(&p, name, w, obj, 0);
    p.errors = e | (e ? 0 : plan_total(&p));
    if (p.overflow)
        return;
    if (obj >= 0)
        p.passed[p.npassed++] = obj;
    note("add %s weight %u (udata: %s)", show(name->b, name->len), w,
         obj >= 0 ? "a fresh object"
         : udata  ? "the member's own"
                  : "NULL");
    struct add_args a = {name->b, w, udata};
    run_writer(&p, "chring_add", call_add, &a);
}

static void op_remove(input_t *in)
{
    const bytes_t *name = take_name(in);
    plan_t p;
    plan_start(&p);
    p.errors = plan_change(&p, name, 0, -1, 0);
    note("remove %s", show(name->b, name->len));
    struct add_args a = {name->b, 0, NULL};
    run_writer(&p, "chring_remove", call_remove, &a);
}

static void op_set_weight(input_t *in)
{
    const bytes_t *name = take_name(in);
    uint32_t w = take_weight(in);
    plan_t p;
    plan_start(&p);
    unsigned e = name_errors(name) | weight_errors(w);
    p.pure = e;
    if (!name_errors(name) && member_index(name->b, name->len) < 0)
        e |= E_NOENT;
    if (!e)
        e = plan_change(&p, name, w, -1, 0);
    p.errors = e | (e ? 0 : plan_total(&p));
    note("set_weight %s %u", show(name->b, name->len), w);
    struct add_args a = {name->b, w, NULL};
    run_writer(&p, "chring_set_weight", call_set_weight, &a);
}

/* update (sync = 0) or sync (sync = 1) of up to 8 changes. */
static void op_batch(input_t *in, int sync)
{
    static bytes_t names[8];
    struct batch_args a;
    memset(&a, 0, sizeof a);
    uint8_t hdr = take8(in);
    a.n = hdr % 9;
    a.null_array = a.n == 0 && (hdr & 0x80);
    plan_t p;
    plan_start(&p);
    unsigned e = 0;
    note("%s of %zu%s:", sync ? "sync" : "update", a.n, a.null_array ? " (NULL array)" : "");
    int cobj[8];
    unsigned mode = (op_byte >> 4) & 3;
    for (size_t i = 0; i < a.n; i++) {
        names[i] = *take_name(in);
        uint32_t w = take_weight(in);
        if (!sync && w > 0 && (take8(in) & 1) == 0)
            w = 0; /* updates remove often */
        a.changes[i].udata = change_udata(&names[i], mode == 3 ? (unsigned)i % 3 : mode, &cobj[i]);
        if (cobj[i] == -2)
            return;
        if (cobj[i] >= 0)
            p.passed[p.npassed++] = cobj[i];
        a.changes[i].name = names[i].b;
        a.changes[i].weight = w;
        note("  %s weight %u (udata: %s)", show(names[i].b, names[i].len), w,
             cobj[i] >= 0         ? "a fresh object"
             : a.changes[i].udata ? "the member's own"
                                  : "NULL");
        for (size_t k = 0; k < i; k++)
            if (model_name_cmp(names[k].b, names[k].len, names[i].b, names[i].len) == 0)
                e |= E_INVAL;
    }
    if (sync) {
        /* The new set: members named in the batch keep their object and join order; the others
         * leave; new ones join in array order. */
        plan_t q;
        plan_start(&q);
        q.nnext = 0;
        for (size_t j = 0; j < nmembers; j++)
            for (size_t i = 0; i < a.n; i++)
                if (model_name_cmp(members[j].name, members[j].len, names[i].b, names[i].len) == 0)
                    q.next[q.nnext++] = members[j];
        for (size_t i = 0; i < a.n; i++)
            e |= plan_change(&q, &names[i], a.changes[i].weight, cobj[i], 1);
        memcpy(q.passed, p.passed, sizeof q.passed);
        q.npassed = p.npassed;
        p = q;
    } else {
        for (size_t i = 0; i < a.n; i++)
            e |= plan_change(&p, &names[i], a.changes[i].weight, cobj[i], 0);
    }
    p.errors = e | (e ? 0 : plan_total(&p));
    if (p.overflow)
        return;
    run_writer(&p, sync ? "chring_sync" : "chring_update", sync ? call_sync : call_update, &a);
}

/* ---- reader operations --------------------------------------------------------------------- */

/* A snapshot to read: the current one (in a read section) or a held one. */
typedef struct target {
    const chring_snap_t *s;
    const model_snap_t *m;
    int is_current;
} target_t;

static target_t take_target(input_t *in)
{
    uint8_t t = take8(in);
    target_t x = {NULL, &cur, 1};
    if ((t & 3) == 3 && held[(t >> 2) % HELD]) {
        x.s = held[(t >> 2) % HELD];
        x.m = &held_model[(t >> 2) % HELD];
        x.is_current = 0;
    } else {
        x.s = enter();
    }
    return x;
}

static void drop_target(target_t *x)
{
    if (x->is_current)
        leave(x->s);
}

/* The owner of h in m with its members' health: the first member up clockwise. */
static const model_member_t *model_owner(const model_snap_t *m, uint64_t h)
{
    health_t hl;
    health_of(m, &hl);
    long j = model_owner_up(m, h, hl.down);
    return j < 0 ? NULL : &m->members[j];
}

static void op_lookup(input_t *in)
{
    target_t t = take_target(in);
    int null_ptr;
    const bytes_t *k = take_key(in, &null_ptr);
    uint8_t extra = take8(in);
    note("lookup %s on %s snapshot", show(k->b, k->len), t.is_current ? "the current" : "a held");
    uint64_t h = model_hash(&t.m->cfg, k->b, k->len);
    uint64_t lh = chring_snap_hash(t.s, key_ptr(k, null_ptr), k->len);
    if (lh != h)
        fail("chring_snap_hash(%s) = %llu, model %llu", show(k->b, k->len), (unsigned long long)lh,
             (unsigned long long)h);
    const model_member_t *want = model_owner(t.m, h);
    expect_member(chring_snap_lookup(t.s, key_ptr(k, null_ptr), k->len), want,
                  "chring_snap_lookup");
    /* Bits above the profile's width are ignored. */
    uint64_t noisy = h;
    if (t.m->cfg.bits < 64)
        noisy |= (UINT64_C(0x9e3779b97f4a7c15) * (extra + 1u)) << t.m->cfg.bits;
    expect_member(chring_snap_lookup_hash(t.s, noisy), want, "chring_snap_lookup_hash");
    /* The batch calls: the key among others (a NULL key with a length has no owner), its owner
     * as the model's, the others as the single lookups'. */
    const void *keys[3] = {"x", key_ptr(k, null_ptr), NULL};
    size_t lens[3] = {1, k->len, 1};
    uint64_t hashes[3] = {h, noisy, extra};
    const chring_member_t *owners[3] = {NULL, NULL, NULL};
    if (chring_snap_lookup_many(t.s, keys, lens, 3, owners) != 3)
        fail("chring_snap_lookup_many of 3 keys did not return 3");
    expect_member(owners[1], want, "chring_snap_lookup_many");
    if (owners[0] != chring_snap_lookup(t.s, "x", 1) || owners[2] != NULL)
        fail("chring_snap_lookup_many: another key's owner is not chring_snap_lookup's");
    if (chring_snap_lookup_hashes(t.s, hashes, 3, owners) != 3)
        fail("chring_snap_lookup_hashes of 3 hashes did not return 3");
    expect_member(owners[0], want, "chring_snap_lookup_hashes");
    expect_member(owners[1], want, "chring_snap_lookup_hashes (bits above the width)");
    if (owners[2] != chring_snap_lookup_hash(t.s, extra))
        fail("chring_snap_lookup_hashes: another hash's owner is not chring_snap_lookup_hash's");
    drop_target(&t);

    char buf[300];
    size_t cap = extra % 2 ? sizeof buf : (size_t)take8(in) % 260;
    int rc = chring_lookup_name(ring, key_ptr(k, null_ptr), k->len, buf, cap);
    const model_member_t *now = model_owner(&cur, model_hash(&cur.cfg, k->b, k->len));
    int expect = !now ? -ENOENT : cap < now->len + 1 ? -ENOSPC : (int)now->len;
    if (rc != expect)
        fail("chring_lookup_name(%s, cap %zu) = %d, model %d", show(k->b, k->len), cap, rc, expect);
    if (rc >= 0 && (memcmp(buf, now->name, now->len) != 0 || buf[now->len] != 0))
        fail("chring_lookup_name(%s) wrote %s, model %s", show(k->b, k->len), show(buf, now->len),
             show(now->name, now->len));
}

static void op_lookup_n(input_t *in)
{
    target_t t = take_target(in);
    int null_ptr;
    const bytes_t *k = take_key(in, &null_ptr);
    size_t n = take8(in) % 10;
    note("lookup_n %s n=%zu", show(k->b, k->len), n);
    const chring_member_t *out[10];
    uint32_t want[10];
    size_t got = chring_snap_lookup_n(t.s, key_ptr(k, null_ptr), k->len, out, n);
    health_t hl;
    health_of(t.m, &hl);
    size_t wn = model_lookup_n_up(t.m, model_hash(&t.m->cfg, k->b, k->len), hl.down, want, n);
    if (got != wn)
        fail("chring_snap_lookup_n(%s, %zu) = %zu members, model %zu", show(k->b, k->len), n, got,
             wn);
    for (size_t i = 0; i < got; i++)
        expect_member(out[i], &t.m->members[want[i]], "chring_snap_lookup_n");
    drop_target(&t);
}

static const uint64_t load_values[] = {0, 1, 2, 3, 5, 10, 1000, UINT64_C(1) << 40};

typedef struct loads_ctx {
    const model_snap_t *m;
    const uint64_t *loads;
    unsigned calls;
} loads_ctx_t;

static uint64_t load_cb(const chring_member_t *m, void *ctx)
{
    loads_ctx_t *c = ctx;
    const char *name = chring_member_name(m);
    long j = model_find(c->m, name, strlen(name));
    if (j < 0)
        fail("the load callback got %s, which is not in the snapshot", show(name, strlen(name)));
    c->calls++;
    return c->loads[j];
}

static void op_bounded(input_t *in)
{
    target_t t = take_target(in);
    int null_ptr;
    const bytes_t *k = take_key(in, &null_ptr);
    double c = take_balance(in);
    uint64_t loads[MAX_MEMBERS], m = 0;
    for (size_t i = 0; i < t.m->nmembers; i++) {
        loads[t.m->by_name[i]] = load_values[take8(in) % 8];
        m += loads[t.m->by_name[i]];
    }
    note("bounded %s c=%g m=%llu", show(k->b, k->len), c, (unsigned long long)m);
    loads_ctx_t ctx = {t.m, loads, 0};
    const chring_member_t *got =
        chring_snap_lookup_bounded(t.s, key_ptr(k, null_ptr), k->len, c, load_cb, &ctx);
    long owner;
    int sat;
    health_t hl;
    health_of(t.m, &hl);
    /* Members down are walked past (their loads still count in m); the scale is ignored. */
    long j = model_walk_health(t.m, model_hash(&t.m->cfg, k->b, k->len), c, m, loads, NULL, hl.down,
                               NULL, &owner, &sat);
    if (sat) {
        /* No member below its capacity: only double rounding gets here; any member will do. */
        if (!got)
            fail("chring_snap_lookup_bounded(%s) returned NULL on a non-empty ring",
                 show(k->b, k->len));
    } else {
        expect_member(got, j < 0 ? NULL : &t.m->members[j], "chring_snap_lookup_bounded");
    }
    if (chring_snap_lookup_bounded(t.s, key_ptr(k, null_ptr), k->len, c, NULL, NULL) != NULL)
        fail("chring_snap_lookup_bounded with a NULL load function did not return NULL");
    drop_target(&t);
}

static void op_release_slot(int slot, int twice)
{
    int id = lease_obj[slot];
    if (id >= 0) {
        /* The reference goes before the call: the release may retire the member. */
        objs[id].load--;
        add_to(&objs[id].leases, -1);
        lease_obj[slot] = -1;
    }
    note("release lease %d (%s)%s", slot, id >= 0 ? show(objs[id].name, objs[id].len) : "cleared",
         twice ? " twice" : "");
    if (id >= 0) {
        stale[slot] = leases[slot]; /* a copy, for the misuse guard (op_misuse_release) */
        stale_obj[slot] = id;
    }
    chring_release(ring, &leases[slot]);
    if (leases[slot].member != NULL)
        fail("chring_release did not clear the lease");
    if (twice)
        chring_release(ring, &leases[slot]);
}

static void op_acquire(input_t *in)
{
    int slot = take8(in) % LEASES;
    int null_ptr;
    const bytes_t *k = take_key(in, &null_ptr);
    if (lease_obj[slot] >= 0)
        op_release_slot(slot, 0);
    note("acquire %s into lease %d", show(k->b, k->len), slot);
    uint64_t loads[MAX_MEMBERS];
    for (size_t j = 0; j < cur.nmembers; j++)
        loads[j] = obj_count(cur.members[j].obj);
    long owner;
    int sat;
    health_t hl;
    health_of(&cur, &hl);
    long j = model_walk_health(&cur, model_hash(&cur.cfg, k->b, k->len), balance, model_m(&cur),
                               loads, NULL, hl.down, hl.scale, &owner, &sat);
    /* Odd slots acquire by the key's hash (chring_acquire_hash, bits above the width set):
     * the same walk, so the same model. */
    int by_hash = slot & 1;
    uint64_t h = model_hash(&cur.cfg, k->b, k->len);
    if (cur.cfg.bits < 64)
        h |= UINT64_C(0x5a5a) << 48;
    int rc = by_hash ? chring_acquire_hash(ring, h, &leases[slot])
                     : chring_acquire(ring, key_ptr(k, null_ptr), k->len, &leases[slot]);
    if (j < 0) {
        if (rc != -ENOENT || leases[slot].member != NULL)
            fail("chring_acquire on an empty ring (or every member down) = %s, member %p; "
                 "expected -ENOENT, NULL",
                 err_name(rc), (void *)leases[slot].member);
        return;
    }
    if (rc != 0)
        fail("chring_acquire(%s) = %s", show(k->b, k->len), err_name(rc));
    int id;
    if (sat) {
        /* Every member met looked full (a member left without points counts in n and W but is
         * never reached; with ramps the scaled capacities can add up to less than m): the least
         * loaded member met at a scale above 0, else the least loaded one at scale 0. */
        expect_member(leases[slot].member, &cur.members[j], "chring_acquire (saturated)");
        saturated_events++;
    } else {
        expect_member(leases[slot].member, &cur.members[j], "chring_acquire");
    }
    id = cur.members[j].obj;
    int owner_down = !sat && id != cur.members[owner].obj &&
                     model_first_up_unskipped(&cur, model_hash(&cur.cfg, k->b, k->len), NULL, hl.down) == j;
    uint32_t want_outcome = sat                               ? CHRING_OUTCOME_SATURATED
                            : id == cur.members[owner].obj ? CHRING_OUTCOME_OWNER
                            : owner_down                   ? CHRING_OUTCOME_OWNER_DOWN
                                                            : CHRING_OUTCOME_SPILLED;
    if (leases[slot].outcome != want_outcome)
        fail("%s(%s): outcome %u, model %u", by_hash ? "chring_acquire_hash" : "chring_acquire",
             show(k->b, k->len), leases[slot].outcome, want_outcome);
    lease_obj[slot] = id;
    add_to(&objs[id].leases, 1);
    objs[id].load++;
    objs[id].acquires++;
    acquires++;
    if (id == cur.members[owner].obj) {
        objs[id].primary++;
    } else if (owner_down) {
        objs[id].down_in++;
        owner_downs++;
    } else {
        objs[id].spilled_in++;
        spills++;
    }
}

/* chring_acquire_skip: the walk of chring_acquire passing over a skip set (include/chring.h):
 * members of the current snapshot by name, the key's replicas (its owner first), members of
 * leases (maybe removed: they match nothing).  Checked against model_walk_skip. */
static void op_acquire_skip(input_t *in)
{
    int slot = take8(in) % LEASES;
    int null_ptr;
    const bytes_t *k = take_key(in, &null_ptr);
    uint8_t hdr = take8(in);
    if (lease_obj[slot] >= 0)
        op_release_slot(slot, 0);
    size_t nskip = (hdr & 0x1f) % 5;
    const chring_member_t *skip[4];
    int skip_obj[4];
    uint64_t h = model_hash(&cur.cfg, k->b, k->len);
    uint32_t reps[8];
    health_t hl;
    health_of(&cur, &hl);
    size_t nreps = model_lookup_n_up(&cur, h, hl.down, reps, 8);
    const chring_snap_t *s = enter();
    for (size_t i = 0; i < nskip; i++) {
        uint8_t sel = take8(in);
        if ((sel & 0x80) && lease_obj[sel % LEASES] >= 0) {
            skip[i] = leases[sel % LEASES].member;
            skip_obj[i] = lease_obj[sel % LEASES];
        } else if ((sel & 0x40) && nreps > 0) {
            const model_member_t *mm = &cur.members[reps[sel % nreps]];
            skip[i] = chring_snap_find(s, mm->name);
            skip_obj[i] = mm->obj;
            expect_member(skip[i], mm, "chring_snap_find (a replica to skip)");
        } else if (cur.nmembers > 0) {
            size_t b = sel % cur.nmembers;
            skip[i] = chring_snap_member(s, b);
            skip_obj[i] = cur.members[cur.by_name[b]].obj;
        } else {
            nskip = i; /* nothing to skip */
            break;
        }
    }
    leave(s);
    note("acquire_skip %s into lease %d, skipping %zu", show(k->b, k->len), slot, nskip);
    for (size_t i = 0; i < nskip; i++)
        note("  skip %s (object %d)", show(objs[skip_obj[i]].name, objs[skip_obj[i]].len),
             skip_obj[i]);

    /* Refused arguments first: they clear the lease and change nothing. */
    if ((hdr & 0x80) && nskip > 0) {
        leases[slot].member = (chring_member_t *)(uintptr_t)1;
        int rc =
            chring_acquire_skip(ring, key_ptr(k, null_ptr), k->len, NULL, nskip, &leases[slot]);
        if (rc != -EINVAL || leases[slot].member != NULL)
            fail("chring_acquire_skip with a NULL skip and nskip %zu = %s, lease %s; expected "
                 "-EINVAL and a cleared lease",
                 nskip, err_name(rc), leases[slot].member ? "kept" : "cleared");
    }
    if (hdr & 0x40) {
        int rc = chring_acquire_skip(ring, NULL, 1 + k->len, skip, nskip, &leases[slot]);
        if (rc != -EINVAL || leases[slot].member != NULL)
            fail("chring_acquire_skip with a NULL key of length %zu = %s; expected -EINVAL",
                 1 + k->len, err_name(rc));
        if (chring_acquire_skip(ring, k->b, k->len, skip, nskip, NULL) != -EINVAL ||
            chring_acquire_skip(NULL, k->b, k->len, skip, nskip, &leases[slot]) != -EINVAL)
            fail("chring_acquire_skip with a NULL lease or ring is not -EINVAL");
    }

    unsigned char mask[MAX_MEMBERS] = {0};
    uint64_t loads[MAX_MEMBERS];
    for (size_t j = 0; j < cur.nmembers; j++) {
        loads[j] = obj_count(cur.members[j].obj);
        for (size_t i = 0; i < nskip; i++)
            mask[j] |= skip_obj[i] == cur.members[j].obj;
    }
    long owner;
    int sat;
    long j = model_walk_health(&cur, h, balance, model_m(&cur), loads, mask, hl.down, hl.scale,
                               &owner, &sat);
    int rc = chring_acquire_skip(ring, key_ptr(k, null_ptr), k->len,
                                 nskip == 0 && (hdr & 0x20) ? NULL : skip, nskip, &leases[slot]);
    note("  -> %s, %s (model: %s%s)", err_name(rc),
         rc == 0 ? show(chring_member_name(leases[slot].member),
                        strlen(chring_member_name(leases[slot].member)))
                 : "no member",
         j < 0 ? "-ENOENT" : show(cur.members[j].name, cur.members[j].len),
         sat ? ", saturated" : "");
    if (j < 0) {
        if (rc != -ENOENT || leases[slot].member != NULL)
            fail("chring_acquire_skip(%s) = %s, member %p; the model finds no member outside the "
                 "skip set (%zu members, %zu skipped): expected -ENOENT and a cleared lease",
                 show(k->b, k->len), err_name(rc), (void *)leases[slot].member, cur.nmembers,
                 nskip);
        return;
    }
    if (rc != 0)
        fail("chring_acquire_skip(%s) = %s", show(k->b, k->len), err_name(rc));
    for (size_t i = 0; i < nskip; i++)
        if (leases[slot].member == skip[i])
            fail("chring_acquire_skip(%s) chose %s, which is in the skip set", show(k->b, k->len),
                 show(objs[skip_obj[i]].name, objs[skip_obj[i]].len));
    /* Saturated: every member met outside skip and up is full; the least loaded of them at a
     * scale above 0, else at scale 0. */
    expect_member(leases[slot].member, &cur.members[j],
                  sat ? "chring_acquire_skip (saturated)" : "chring_acquire_skip");
    if (sat)
        saturated_events++;
    int id = cur.members[j].obj;
    lease_obj[slot] = id;
    add_to(&objs[id].leases, 1);
    objs[id].load++;
    objs[id].acquires++;
    acquires++;
    retries++;
    int owner_down = !sat && id != cur.members[owner].obj &&
                     model_first_up_unskipped(&cur, h, mask, hl.down) == j;
    uint32_t want_outcome = sat                            ? CHRING_OUTCOME_SATURATED
                            : id == cur.members[owner].obj ? CHRING_OUTCOME_OWNER
                            : owner_down                   ? CHRING_OUTCOME_OWNER_DOWN
                                                           : CHRING_OUTCOME_SPILLED;
    if (leases[slot].outcome != want_outcome)
        fail("chring_acquire_skip(%s): outcome %u, model %u", show(k->b, k->len),
             leases[slot].outcome, want_outcome);
    if (id == cur.members[owner].obj) {
        objs[id].primary++;
    } else if (owner_down) {
        objs[id].down_in++;
        owner_downs++;
    } else {
        objs[id].spilled_in++;
        spills++;
    }
}

/* chring_acquire_member: a lease on a member the caller chose, without the capacity check; on a
 * held snapshot that may be a member removed since. */
/* The member an acquire by member names, by selector sel: of a lease (bit 7, when that lease is
 * held: maybe removed, maybe not in t's snapshot), else of t's snapshot.  Sets *m (NULL if none)
 * and *id (the model object, -1); returns the member's index in t->m->members, -1 when the
 * snapshot does not list it. */
static long pick_member(const target_t *t, uint8_t sel, const chring_member_t **m, int *id)
{
    long j = -1;
    int from = sel % LEASES;
    *m = NULL;
    *id = -1;
    if ((sel & 0x80) && lease_obj[from] >= 0) {
        *m = leases[from].member;
        *id = lease_obj[from];
        for (size_t q = 0; q < t->m->nmembers; q++)
            if (t->m->members[q].obj == *id)
                j = (long)q;
    } else if (t->m->nmembers > 0) {
        size_t i = sel % t->m->nmembers;
        *m = chring_snap_member(t->s, i);
        j = t->m->by_name[i];
        *id = t->m->members[j].obj;
    }
    return j;
}

/* An acquire by member into lease slot succeeded (what, the call's name): the lease names m as
 * its owner, and the model counts it. */
static void member_lease_taken(const char *what, int slot, const chring_member_t *m, int id)
{
    if (leases[slot].member != m || leases[slot].outcome != CHRING_OUTCOME_OWNER)
        fail("%s filled the lease with another member or outcome %u", what, leases[slot].outcome);
    lease_obj[slot] = id;
    add_to(&objs[id].leases, 1);
    objs[id].load++;
    objs[id].acquires++;
    objs[id].primary++;
    acquires++;
}

static void op_acquire_member(input_t *in)
{
    int slot = take8(in) % LEASES;
    if (lease_obj[slot] >= 0)
        op_release_slot(slot, 0);
    target_t t = take_target(in);
    const chring_member_t *m;
    int id;
    int in_snapshot = pick_member(&t, take8(in), &m, &id) >= 0;
    note("acquire_member %s into lease %d on %s snapshot",
         id >= 0 ? show(objs[id].name, objs[id].len) : "(none)", slot,
         t.is_current ? "the current" : "a held");
    int rc = chring_acquire_member(ring, t.s, m, &leases[slot]);
    drop_target(&t);
    int expect = !m ? -EINVAL : in_snapshot ? 0 : -ENOENT;
    if (rc != expect)
        fail("chring_acquire_member = %s, expected %s", err_name(rc), err_name(expect));
    if (rc != 0) {
        if (leases[slot].member != NULL)
            fail("a refused chring_acquire_member did not clear the lease");
        return;
    }
    member_lease_taken("chring_acquire_member", slot, m, id);
}

/* chring_acquire_try (include/chring.h): m admitted only below its capacity by the rule of
 * chring_member_capacity (effective weights of the snapshot's members that are up, the ring's
 * outstanding leases), strict as chring_acquire: a load of 0 is always below it; -EBUSY when m is
 * full, -ENOENT when the snapshot does not list m or m is down or at scale 0.  The member is
 * chosen as in op_acquire_member: of the current or a held snapshot, or of a lease (maybe
 * removed, maybe not in the snapshot).  Selector bit 6: the NULL forms first. */
static void op_acquire_try(input_t *in)
{
    int slot = take8(in) % LEASES;
    if (lease_obj[slot] >= 0)
        op_release_slot(slot, 0);
    target_t t = take_target(in);
    uint8_t sel = take8(in);
    const chring_member_t *m;
    int id;
    long j = pick_member(&t, sel, &m, &id);
    if (sel & 0x40) {
        chring_lease_t l = leases[slot];
        if (chring_acquire_try(NULL, t.s, m, &l) != -EINVAL ||
            chring_acquire_try(ring, NULL, m, &l) != -EINVAL ||
            chring_acquire_try(ring, t.s, NULL, &l) != -EINVAL ||
            chring_acquire_try(ring, t.s, m, NULL) != -EINVAL || l.member != NULL)
            fail("chring_acquire_try with a NULL argument: not -EINVAL, or the lease not cleared");
    }
    /* The model's answer. */
    int expect;
    double cap = 0;
    uint64_t load = id >= 0 ? obj_count(id) : 0;
    if (!m) {
        expect = -EINVAL;
    } else if (j < 0) {
        expect = -ENOENT;
    } else {
        health_t hl;
        health_of(t.m, &hl);
        if (hl.down[j] || hl.scale[j] <= 0.0) {
            expect = -ENOENT;
        } else {
            double w = (double)t.m->members[j].weight;
            double e = hl.scale[j] < 1.0 ? hl.scale[j] * w : w;
            cap = model_effective_capacity(balance, model_m(t.m), e,
                                           model_effective_sum(t.m, hl.down, hl.scale));
            expect = load == 0 || (double)load < cap ? 0 : -EBUSY;
        }
    }
    note("acquire_try %s into lease %d on %s snapshot (load %llu, capacity %.17g)",
         id >= 0 ? show(objs[id].name, objs[id].len) : "(none)", slot,
         t.is_current ? "the current" : "a held", (unsigned long long)load, cap);
    int rc = chring_acquire_try(ring, t.s, m, &leases[slot]);
    drop_target(&t);
    if (rc != expect)
        fail("chring_acquire_try = %s, model %s (load %llu, capacity %.17g)", err_name(rc),
             err_name(expect), (unsigned long long)load, cap);
    if (rc != 0) {
        if (leases[slot].member != NULL || leases[slot].outcome != CHRING_OUTCOME_NONE)
            fail("a refused chring_acquire_try did not clear the lease");
        return;
    }
    member_lease_taken("chring_acquire_try", slot, m, id);
}

static void op_release(input_t *in)
{
    uint8_t s = take8(in);
    int slot = s % LEASES;
    if ((s >> 5) == 7) {
        chring_lease_t zero;
        memset(&zero, 0, sizeof zero);
        note("release a zeroed lease");
        chring_release(ring, &zero);
        return;
    }
    op_release_slot(slot, (s >> 5) == 6);
}

/* The misuse guards of chring_release (include/chring.h): bit 4 of the operation releases a
 * lease through the other ring and the other ring's lease through this one; bit 5 releases the
 * copy of a lease released already, when its member has no load (a copy released while the member
 * has leases is undefined) and something still keeps the member (otherwise it may be retired and
 * freed).  Nothing may change: check_all follows, and the wrongly released leases stay intact. */
static void op_misuse_release(input_t *in)
{
    int slot = take8(in) % LEASES;
    if (op_byte & 0x10) {
        if (lease_obj[slot] >= 0) {
            note("release lease %d through another ring", slot);
            chring_lease_t before = leases[slot];
            chring_release(other, &leases[slot]);
            if (memcmp(&before, &leases[slot], sizeof before) != 0)
                fail("chring_release through another ring changed the lease");
            if (chring_leases(other) != 1)
                fail("chring_release of a lease of another ring moved that ring's count to %llu",
                     (unsigned long long)chring_leases(other));
        }
        note("release the other ring's lease through this ring");
        chring_lease_t before = other_lease;
        chring_release(ring, &other_lease);
        if (memcmp(&before, &other_lease, sizeof before) != 0)
            fail("chring_release of another ring's lease changed it");
        if (chring_leases(other) != 1 || chring_member_load(other_lease.member) != 1)
            fail("chring_release of another ring's lease moved its counters (leases %llu, load "
                 "%llu)",
                 (unsigned long long)chring_leases(other),
                 (unsigned long long)chring_member_load(other_lease.member));
        return;
    }
    int id = stale_obj[slot];
    if (id < 0 || objs[id].load != 0 || !(objs[id].live || objs[id].holds))
        return;
    note("release a copy of lease %d (%s), released already; its member has no load", slot,
         show(objs[id].name, objs[id].len));
    chring_release(ring, &stale[slot]);
    stale_obj[slot] = -1;
}

/* The misuse guard of chring_snap_put (include/chring.h): a put of the current snapshot that
 * nothing holds would free the snapshot the ring publishes; it must be ignored. */
static void op_misuse_put(void)
{
    for (int h = 0; h < HELD; h++)
        if (held[h] && held_version[h] == version)
            return; /* that put would be a valid one, of a hold */
    const chring_snap_t *s = enter();
    note("put the current snapshot (version %llu), which nothing holds",
         (unsigned long long)version);
    chring_snap_put(ring, s);
    check_snapshot(s, &cur, version, "the current snapshot after a put without a hold");
    leave(s);
}

static void op_put_slot(int slot)
{
    if (!held[slot])
        return;
    note("put held snapshot %d", slot);
    for (size_t j = 0; j < held_model[slot].nmembers; j++)
        add_to(&objs[held_model[slot].members[j].obj].holds, -1);
    chring_snap_put(ring, held[slot]);
    held[slot] = NULL;
    model_snap_free(&held_model[slot]);
}

static void op_hold(input_t *in)
{
    int slot = take8(in) % HELD;
    op_put_slot(slot);
    note("hold snapshot into %d (version %llu)", slot, (unsigned long long)version);
    held[slot] = chring_snap_hold(ring);
    if (model_build(&held_model[slot], &mcfg, members, nmembers) != 0)
        abort();
    for (size_t j = 0; j < nmembers; j++)
        add_to(&objs[members[j].obj].holds, 1);
    held_version[slot] = version;
    held_digest[slot] = chring_snap_digest(held[slot]);
    check_snapshot(held[slot], &held_model[slot], version, "newly held snapshot");
}

static void op_put(input_t *in)
{
    op_put_slot(take8(in) % HELD);
}

/* chring_snap_diff (include/chring.h) against the model: every arc [from, to] inside the width,
 * after the previous one (ring order, no overlap), its owners in a and b (by name, NULL for an
 * empty snapshot) the same at both ends and at every point inside, different from each other, a
 * neighbouring arc with another pair of owners (maximal arcs); every position between the arcs
 * has the same owner in both (piece by piece over both snapshots' points), so the arcs are
 * exactly the positions that moved; their lengths sum to the model's moved fraction and to
 * chring_snap_moved.  A callback returning non-zero at arc stop_at stops the walk with that
 * value. */
typedef struct diff_ctx {
    const model_snap_t *a, *b;
    uint64_t top; /* 2^bits - 1 */
    size_t arcs, stop_at;
    int stop_value;
    uint64_t prev_to;
    const char *prev_was, *prev_now;
    long double sum;
} diff_ctx_t;

static size_t first_at_or_after(const model_snap_t *m, uint64_t h)
{
    size_t lo = 0, hi = m->npoints;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->points[mid].pos < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int same_name(const char *name, const model_member_t *want)
{
    if (!name || !want)
        return !name && !want;
    return strlen(name) == want->len && memcmp(name, want->name, want->len) == 0;
}

static int same_owner_name(const char *x, const char *y)
{
    if (!x || !y)
        return !x && !y;
    return strcmp(x, y) == 0;
}

/* The owner of every position of [from, to] in m must be `name`. */
static void diff_arc_owner(const model_snap_t *m, uint64_t from, uint64_t to, const char *name,
                           const char *which)
{
    if (m->npoints == 0) {
        if (name)
            fail("chring_snap_diff: arc [%llu, %llu] names %s in %s, which is empty",
                 (unsigned long long)from, (unsigned long long)to, show(name, strlen(name)), which);
        return;
    }
    size_t i = first_at_or_after(m, from);
    /* A point at the same position as the one before it owns nothing (custom hashes collide). */
    for (; i < m->npoints && m->points[i].pos < to; i++)
        if ((i == 0 || m->points[i - 1].pos != m->points[i].pos) &&
            !same_name(name, &m->members[m->points[i].member]))
            fail("chring_snap_diff: in arc [%llu, %llu] the point at %llu of %s is %s's, the arc "
                 "says %s",
                 (unsigned long long)from, (unsigned long long)to,
                 (unsigned long long)m->points[i].pos, which,
                 show(m->members[m->points[i].member].name, m->members[m->points[i].member].len),
                 name ? show(name, strlen(name)) : "(none)");
    const model_member_t *end = &m->members[m->points[i == m->npoints ? 0 : i].member];
    if (!same_name(name, end))
        fail("chring_snap_diff: arc [%llu, %llu] ends on %s in %s, the arc says %s",
             (unsigned long long)from, (unsigned long long)to, show(end->name, end->len), which,
             name ? show(name, strlen(name)) : "(none)");
}

/* The owner of position h in m and the last position of the piece from h on which it stays the
 * owner (the top for the wrap); NULL and the top for an empty snapshot. */
static const model_member_t *owner_piece(const model_snap_t *m, uint64_t h, uint64_t top,
                                         uint64_t *end)
{
    *end = top;
    if (m->npoints == 0)
        return NULL;
    size_t i = first_at_or_after(m, h);
    if (i == m->npoints)
        return &m->members[m->points[0].member];
    *end = m->points[i].pos;
    return &m->members[m->points[i].member];
}

/* Between the arcs, [g0, g1] has the same owner names in a and b at every position. */
static void diff_gap(const diff_ctx_t *d, uint64_t g0, uint64_t g1)
{
    for (uint64_t h = g0;;) {
        uint64_t ea, eb;
        const model_member_t *oa = owner_piece(d->a, h, d->top, &ea);
        const model_member_t *ob = owner_piece(d->b, h, d->top, &eb);
        int same =
            oa && ob ? oa->len == ob->len && memcmp(oa->name, ob->name, oa->len) == 0 : !oa && !ob;
        if (!same)
            fail("chring_snap_diff: no arc covers position %llu, owned by %s in a and %s in b",
                 (unsigned long long)h, oa ? show(oa->name, oa->len) : "(none)",
                 ob ? show(ob->name, ob->len) : "(none)");
        uint64_t end = ea < eb ? ea : eb;
        if (end >= g1)
            return;
        h = end + 1;
    }
}

static int diff_fn(uint64_t from, uint64_t to, const chring_member_t *was,
                   const chring_member_t *now, void *ctx)
{
    diff_ctx_t *d = ctx;
    const char *wn = was ? chring_member_name(was) : NULL;
    const char *nn = now ? chring_member_name(now) : NULL;
    if (from > to || to > d->top)
        fail("chring_snap_diff: arc [%llu, %llu] is not inside [0, %llu]", (unsigned long long)from,
             (unsigned long long)to, (unsigned long long)d->top);
    if (d->arcs > 0 && (d->prev_to == d->top || from <= d->prev_to))
        fail("chring_snap_diff: arc [%llu, %llu] after an arc ending at %llu",
             (unsigned long long)from, (unsigned long long)to, (unsigned long long)d->prev_to);
    if (same_owner_name(wn, nn))
        fail("chring_snap_diff: arc [%llu, %llu] has the same owner %s in both",
             (unsigned long long)from, (unsigned long long)to,
             wn ? show(wn, strlen(wn)) : "(none)");
    if (d->arcs > 0 && from == d->prev_to + 1 && same_owner_name(wn, d->prev_was) &&
        same_owner_name(nn, d->prev_now))
        fail("chring_snap_diff: arcs ending at %llu and starting at %llu have the same owners: "
             "not maximal",
             (unsigned long long)d->prev_to, (unsigned long long)from);
    uint64_t gap = d->arcs > 0 ? d->prev_to + 1 : 0;
    if (from > gap)
        diff_gap(d, gap, from - 1);
    diff_arc_owner(d->a, from, to, wn, "a");
    diff_arc_owner(d->b, from, to, nn, "b");
    d->arcs++;
    d->prev_to = to;
    d->prev_was = wn;
    d->prev_now = nn;
    d->sum += (long double)(to - from) + 1.0L;
    return d->arcs == d->stop_at ? d->stop_value : 0;
}

static void check_diff(const chring_snap_t *a, const model_snap_t *am, const chring_snap_t *b,
                       const model_snap_t *bm, uint8_t sel)
{
    diff_ctx_t d = {.a = am, .b = bm};
    d.top = am->cfg.bits == 64 ? UINT64_MAX : (UINT64_C(1) << am->cfg.bits) - 1;
    if (sel & 0x20) {
        d.stop_at = 1 + ((sel >> 2) & 3);
        d.stop_value = (sel & 2) ? -7 : 3;
    }
    int rc = chring_snap_diff(a, b, diff_fn, &d);
    note("diff: %zu arcs, rc %d", d.arcs, rc);
    if (d.stop_at && d.arcs == d.stop_at) {
        if (rc != d.stop_value)
            fail("chring_snap_diff stopped by its callback returned %d, the callback %d", rc,
                 d.stop_value);
        return;
    }
    if (rc != 0)
        fail("chring_snap_diff = %s", err_name(rc));
    if (d.arcs == 0)
        diff_gap(&d, 0, d.top);
    else if (d.prev_to < d.top)
        diff_gap(&d, d.prev_to + 1, d.top);
    double total = (double)(d.sum / ((long double)d.top + 1.0L));
    double want = model_moved(am, bm), lib = chring_snap_moved(a, b);
    if (!close_enough(total, want) || !close_enough(total, lib))
        fail("chring_snap_diff: %zu arcs sum to %.17g, the model's moved fraction %.17g, "
             "chring_snap_moved %.17g",
             d.arcs, total, want, lib);
}

static void op_moved(input_t *in)
{
    target_t a = take_target(in);
    uint8_t s = take8(in);
    const chring_snap_t *b = NULL;
    const model_snap_t *bm = NULL;
    const chring_snap_t *opened = NULL;
    if (held[s % HELD] && (s & 0x80)) {
        b = held[s % HELD];
        bm = &held_model[s % HELD];
    } else if (!a.is_current) {
        opened = b = enter();
        bm = &cur;
    } else {
        b = a.s;
        bm = a.m;
    }
    double got = chring_snap_moved(a.s, b), want = model_moved(a.m, bm);
    note("moved = %.17g (model %.17g)", got, want);
    if (!close_enough(got, want))
        fail("chring_snap_moved = %.17g, model %.17g (%zu and %zu points)", got, want, a.m->npoints,
             bm->npoints);
    if (s & 0x40) {
        double back = chring_snap_moved(b, a.s);
        if (!close_enough(back, want))
            fail("chring_snap_moved is not symmetric: %.17g and %.17g", got, back);
    }
    if (!isnan(chring_snap_moved(a.s, NULL)))
        fail("chring_snap_moved(s, NULL) is not NaN");
    check_diff(a.s, a.m, b, bm, s);
    if (s & 0x40)
        check_diff(b, bm, a.s, a.m, 0);
    if (chring_snap_diff(NULL, b, diff_fn, NULL) != -EINVAL ||
        chring_snap_diff(a.s, NULL, diff_fn, NULL) != -EINVAL ||
        chring_snap_diff(a.s, b, NULL, NULL) != -EINVAL)
        fail("chring_snap_diff with a NULL argument is not -EINVAL");
    if (mcfg.profile != MODEL_HASH64) {
        /* The other ring is hash64: another profile. */
        const chring_snap_t *o = chring_snap_enter(other);
        int rc = chring_snap_diff(a.s, o, diff_fn, NULL);
        chring_snap_exit(other, o);
        if (rc != -EINVAL)
            fail("chring_snap_diff of snapshots of different profiles = %s", err_name(rc));
    }
    if (opened)
        leave(opened);
    drop_target(&a);
}

/* The digest across rings (chring_snap_digest): a second ring of the same configuration gets
 * the current members added one by one in another order (reversed, rotated, or by name), and its
 * snapshot's digest must equal the current one's exactly when the model, building that order,
 * gives the same points (fnv16's taken positions go to the earlier joiner, so its points can
 * depend on the order).  chring_snap_moved and chring_snap_diff between the two rings as well. */
static void op_digest(input_t *in)
{
    uint8_t sel = take8(in);
    static model_member_t order[MAX_MEMBERS];
    size_t n = nmembers;
    for (size_t i = 0; i < n; i++) {
        size_t from;
        switch (sel & 3) {
        case 0: from = n - 1 - i; break;
        case 1: from = (i + 1 + (sel >> 2)) % n; break;
        default: from = cur.by_name[(sel & 1) ? n - 1 - i : i]; break;
        }
        order[i] = cur.members[from];
    }
    chring_config_t cfg;
    chring_config_default(&cfg);
    static const chring_profile_t lib_profiles[] = {
        [MODEL_HASH64] = CHRING_PROFILE_HASH64, [MODEL_MURMUR32] = CHRING_PROFILE_MURMUR32,
        [MODEL_FNV32] = CHRING_PROFILE_FNV32,   [MODEL_FNV16] = CHRING_PROFILE_FNV16,
        [MODEL_CUSTOM] = CHRING_PROFILE_CUSTOM, [MODEL_XXH3] = CHRING_PROFILE_XXH3,
        [MODEL_NGINX] = CHRING_PROFILE_NGINX,   [MODEL_KETAMA] = CHRING_PROFILE_KETAMA,
    };
    cfg.profile = lib_profiles[mcfg.profile];
    cfg.vnodes = mcfg.vnodes;
    cfg.balance = balance;
    if (mcfg.profile == MODEL_CUSTOM) {
        cfg.hash = custom_hash;
        cfg.hash_ctx = &custom;
        cfg.hash_bits = custom.bits;
    }
    note("digest: a second ring with the %zu members in order %u", n, sel & 3);
    chring_t *second = NULL;
    if (chring_new(&second, &cfg) != 0)
        fail("chring_new of the second ring failed");
    for (size_t i = 0; i < n; i++) {
        int rc = chring_add(second, order[i].name, order[i].weight, NULL);
        if (rc != 0)
            fail("chring_add(%s) to the second ring = %s", show(order[i].name, order[i].len),
                 err_name(rc));
    }
    model_snap_t m2;
    if (model_build(&m2, &mcfg, order, n) != 0)
        abort();
    const chring_snap_t *s = enter();
    const chring_snap_t *s2 = chring_snap_enter(second);
    if (chring_snap_points(s2) != m2.npoints)
        fail("the second ring has %zu points, model %zu", chring_snap_points(s2), m2.npoints);
    expect_digest(chring_snap_digest(s2), &m2, chring_snap_digest(s), &cur,
                  "chring_snap_digest of the same members added in another order");
    check_diff(s, &cur, s2, &m2, sel);
    chring_snap_exit(second, s2);
    leave(s);
    model_snap_free(&m2);
    chring_free(&second);
}

static uint64_t take_count(input_t *in)
{
    uint8_t s = take8(in);
    switch (s % 4) {
    case 0: return s >> 2;
    case 1: return take8(in) * 1000u + (s >> 2);
    case 2: return take64(in) >> (s >> 2);
    default: return take64(in) & ((UINT64_C(1) << 53) - 1);
    }
}

static void op_capacity(input_t *in)
{
    uint64_t total = take_count(in), n = take_count(in), w = take_count(in), tw = take_count(in);
    double c = take_balance(in);
    note("capacity total=%llu n=%llu w=%llu W=%llu c=%g", (unsigned long long)total,
         (unsigned long long)n, (unsigned long long)w, (unsigned long long)tw, c);
    uint64_t got = chring_capacity(total, n, c);
    uint64_t gotw = chring_capacity_weighted(total, w, tw, c);
    if (total >= (UINT64_C(1) << 53) || w >= (UINT64_C(1) << 53) || tw >= (UINT64_C(1) << 53))
        return; /* only "no crash, no undefined behaviour" is checked up there */
    double want = model_capacity_plain(c, total, n), wantw = model_capacity(c, total, w, tw);
    if (want < 0x1p63 ? (double)got != want : got < (UINT64_C(1) << 63))
        fail("chring_capacity(%llu, %llu, %g) = %llu, model %.17g", (unsigned long long)total,
             (unsigned long long)n, c, (unsigned long long)got, want);
    if (wantw < 0x1p63 ? (double)gotw != wantw : gotw < (UINT64_C(1) << 63))
        fail("chring_capacity_weighted(%llu, %llu, %llu, %g) = %llu, model %.17g",
             (unsigned long long)total, (unsigned long long)w, (unsigned long long)tw, c,
             (unsigned long long)gotw, wantw);
}

static void op_hash(input_t *in)
{
    int null_ptr;
    const bytes_t *k = take_key(in, &null_ptr);
    const void *p = key_ptr(k, null_ptr);
    uint32_t seed = (uint32_t)take64(in);
    uint64_t z = take64(in);
    note("hash functions on %s", show(k->b, k->len));
    if (chring_fnv1a64(p, k->len) != model_fnv1a64(k->b, k->len))
        fail("chring_fnv1a64(%s) differs", show(k->b, k->len));
    if (chring_fnv1a32(p, k->len) != model_fnv1a32(k->b, k->len))
        fail("chring_fnv1a32(%s) differs", show(k->b, k->len));
    if (chring_hash64(p, k->len) != model_mix64(model_fnv1a64(k->b, k->len)))
        fail("chring_hash64(%s) differs", show(k->b, k->len));
    if (chring_mix64(z) != model_mix64(z))
        fail("chring_mix64(%llu) differs", (unsigned long long)z);
    if (chring_murmur3_32(p, k->len, seed) != model_murmur3_32(k->b, k->len, seed))
        fail("chring_murmur3_32(%s, seed %u) = %u, model %u", show(k->b, k->len), seed,
             chring_murmur3_32(p, k->len, seed), model_murmur3_32(k->b, k->len, seed));
    const bytes_t *name = take_name(in);
    uint32_t i = (uint32_t)take64(in);
    size_t cap = take8(in) % 2 ? (size_t)take8(in) + name->len / 2 : 300;
    char buf[300], want[300];
    size_t wl = model_label(want, name->b, name->len, i);
    int rc = chring_vnode_label(buf, cap, name->b, i);
    int expect = cap < wl + 1 ? -ENOSPC : (int)wl;
    if (rc != expect)
        fail("chring_vnode_label(%s, %u, cap %zu) = %d, model %d", show(name->b, name->len), i, cap,
             rc, expect);
    if (rc >= 0 && (memcmp(buf, want, wl) != 0 || buf[wl] != 0))
        fail("chring_vnode_label(%s, %u) wrote %s, model %s", show(name->b, name->len), i,
             show(buf, wl), show(want, wl));
}

/* Arguments the API must refuse without harm (docs/design.md §6). */
static void op_bad(input_t *in)
{
    uint8_t s = take8(in);
    chring_lease_t lease;
    memset(&lease, 0, sizeof lease);
    char buf[8];
    note("bad argument %u", s % 16);
    int rc = 0, expect = -EINVAL;
    switch (s % 16) {
    case 0: rc = chring_add(ring, NULL, 1, NULL); break;
    case 1: rc = chring_remove(ring, NULL); break;
    case 2: rc = chring_set_weight(ring, NULL, 1); break;
    case 3: rc = chring_add(NULL, "a", 1, NULL); break;
    case 4: rc = chring_update(ring, NULL, 1); break;
    case 5: rc = chring_sync(ring, NULL, 2); break;
    case 6: rc = chring_lookup_name(ring, "k", 1, NULL, 0); break;
    case 7: rc = chring_lookup_name(ring, NULL, 1, buf, sizeof buf); break;
    case 8: rc = chring_acquire(ring, NULL, 1, &lease); break;
    case 9: rc = chring_acquire(ring, "k", 1, NULL); break;
    case 10: rc = chring_snap_point(NULL, 0, NULL, NULL); break;
    case 11: rc = chring_vnode_label(NULL, 8, "a", 1); break;
    case 12:
        rc = chring_update(ring, NULL, 0);
        expect = 0;
        break;
    case 13: {
        const chring_snap_t *s2 = enter();
        if (chring_snap_lookup(s2, NULL, 1) != NULL || chring_snap_lookup_n(s2, "k", 1, NULL, 3))
            fail("a NULL key or output array was not refused");
        if (chring_member_share(s2, NULL) != 0 || chring_snap_weight(s2, NULL) != 0)
            fail("a NULL member was not refused");
        leave(s2);
        expect = 0;
        break;
    }
    case 14:
        if (chring_member_weight(NULL) || chring_member_load(NULL) || chring_snap_version(NULL) ||
            chring_len(NULL) || chring_snap_points(NULL) || chring_snap_len(NULL))
            fail("NULL accessors did not return 0/NULL");
        expect = 0;
        break;
    default: {
        /* Configurations chring_new must refuse (docs/design.md §6), picked by the high bits. */
        chring_t *tmp = NULL;
        chring_config_t cfg;
        chring_config_default(&cfg);
        switch ((s >> 4) % 6) {
        case 0: cfg.vnodes = 0; break;
        case 1: cfg.profile = (chring_profile_t)99; break;
        case 2:
            cfg.profile = CHRING_PROFILE_CUSTOM; /* without a function */
            cfg.hash_bits = 64;
            break;
        case 3:
            cfg.profile = CHRING_PROFILE_CUSTOM;
            cfg.hash = custom_hash;
            cfg.hash_ctx = &custom;
            cfg.hash_bits =
                8 + (unsigned)(take8(in) % 8) * 8; /* 8..64: only 16, 32, 64 are valid */
            if (cfg.hash_bits == 16 || cfg.hash_bits == 32 || cfg.hash_bits == 64)
                cfg.hash_bits = 48;
            break;
        case 4: {
            /* A valid configuration, but one of chring_new's allocations fails: -ENOMEM and no
             * ring (LeakSanitizer checks that nothing was left behind), or a ring. */
            int k = 1 + take8(in) % 8;
            __atomic_store_n(&fail_countdown, k, __ATOMIC_SEQ_CST);
            int before = ld(&failed_allocs);
            int rc2 = chring_new(&tmp, &cfg);
            __atomic_store_n(&fail_countdown, 0, __ATOMIC_SEQ_CST);
            if (ld(&failed_allocs) != before ? (rc2 != -ENOMEM || tmp != NULL)
                                             : (rc2 != 0 || tmp == NULL))
                fail("chring_new with allocation %d failing = %s, ring %p", k, err_name(rc2),
                     (void *)tmp);
            chring_free(&tmp);
            cfg.vnodes = 0; /* then the refused configuration below */
            break;
        }
        default:
            cfg.vnodes = 0; /* and the output pointer NULL */
            rc = chring_new(NULL, &cfg);
            if (rc != -EINVAL)
                fail("chring_new(NULL, cfg) = %s", err_name(rc));
            break;
        }
        rc = chring_new(&tmp, &cfg);
        if (tmp)
            fail("chring_new with a bad configuration (case %u) created a ring", (s >> 4) % 6);
        if (rc == 0)
            rc = -1;
        /* Names of profiles and errors: static strings, never NULL for what the library
         * returns. */
        for (int p = 0; p <= CHRING_PROFILE_CUSTOM; p++) {
            const char *name = chring_profile_name((chring_profile_t)p);
            chring_profile_t back;
            if (!name || chring_profile_parse(name, &back) != 0 || back != (chring_profile_t)p)
                fail("profile %d does not round-trip through its name", p);
        }
        static const int errs[] = {0,       -EINVAL, -ENOMEM, -ENOENT, -ENAMETOOLONG,
                                   -ENOSPC, -E2BIG,  -ERANGE, -EEXIST, -12345};
        for (size_t e = 0; e < sizeof errs / sizeof errs[0]; e++)
            if (!chring_strerror(errs[e]) || !*chring_strerror(errs[e]))
                fail("chring_strerror(%d) is empty", errs[e]);
        if (chring_profile_name((chring_profile_t)99) != NULL)
            fail("chring_profile_name(99) is not NULL");
        break;
    }
    }
    if (rc == -ENOENT && nmembers == 0 && (s % 16 == 7 || s % 16 == 8))
        rc = expect; /* an empty ring may be noticed first */
    if (rc != expect)
        fail("bad argument case %u returned %s, expected %s", s % 16, err_name(rc),
             err_name(expect));
    if (lease.member)
        fail("a refused acquire filled the lease");
}

/* Lets every pending grace period and RCU callback finish, as time passing would: then a removed
 * member that nothing references any more has been retired, and a release or put that drops the
 * last reference retires on the spot. */
/* Whether a held snapshot published before `o` left keeps it (see obj.left_version). */
static int pinned_by_hold(const obj_t *o)
{
    for (int h = 0; h < HELD; h++)
        if (held[h] && held_version[h] < o->left_version)
            return 1;
    return 0;
}

static void op_quiesce(void)
{
    note("quiesce: synchronize_rcu, rcu_barrier");
    synchronize_rcu();
    rcu_barrier();
    for (int id = 0; id < nobjs; id++) {
        obj_t *o = &objs[id];
        /* A callback may queue another one (rcu_barrier does not wait for those): a few more
         * rounds before calling it a lost retire. */
        for (int round = 0;
             round < 3 && o->added && !o->live && !o->leases && !o->holds && !pinned_by_hold(o) &&
             ld(&o->retired) != 1;
             round++) {
            synchronize_rcu();
            rcu_barrier();
        }
        if (o->added && !o->live && !o->leases && !o->holds && !pinned_by_hold(o) &&
            ld(&o->retired) != 1)
            fail("%s (object %d) was removed, has no lease and no held snapshot from before it "
                 "left, a grace period "
                 "and every RCU callback have passed, yet it is not retired",
                 show(o->name, o->len), id);
    }
}

/* Admission scales of constant ramps (and refused ones: outside [0, 1], NaN). */
static const double scales[] = {0.0,  1.0,  0.5,  0.25, 1.0 / 3.0, 0.1,      0.999,
                                1e-9, -0.0, -0.1, 1.5,  NAN,       INFINITY, -1.0};

static double take_scale(input_t *in)
{
    return scales[take8(in) % (sizeof scales / sizeof scales[0])];
}

static int valid_scale(double x)
{
    return x >= 0.0 && x <= 1.0;
}

/* Health and warm-up (include/chring.h): chring_set_down and chring_set_ramp with constant
 * scales (ms 0, or a timed ramp whose ends are equal), on members, non-members and bad names;
 * NULL arguments.  The model keeps the state on the member object (obj_t.down, .scale); every
 * later lookup, acquire and capacity is checked against it by the other operations and
 * check_all. */
static void op_health(input_t *in)
{
    uint8_t sel = take8(in);
    const bytes_t *name = take_name(in);
    long j = member_index(name->b, name->len);
    unsigned errs = name_errors(name);
    if (sel & 0x40) {
        /* The NULL forms. */
        note("health: NULL arguments");
        if (chring_set_down(NULL, "a", 1) != -EINVAL || chring_set_down(ring, NULL, 1) != -EINVAL ||
            chring_set_ramp(NULL, "a", 0, 1, 0) != -EINVAL ||
            chring_set_ramp(ring, NULL, 0, 1, 0) != -EINVAL ||
            chring_member_is_down(NULL) != -EINVAL || chring_member_scale(NULL) != 0.0)
            fail("a health call with a NULL argument was not refused as include/chring.h says");
    }
    int rc, expect;
    if (sel & 1) {
        double from = take_scale(in), to = take_scale(in);
        uint8_t t = take8(in);
        /* Constant scales only: ms 0 (s = to at once), or from = to over ms. */
        uint32_t ms = 0;
        if (t & 1) {
            from = to;
            ms = (t & 2) ? UINT32_MAX : 1u + t;
        }
        note("set_ramp %s from %g to %g over %u ms", show(name->b, name->len), from, to, ms);
        expect = !valid_scale(from) || !valid_scale(to) ? -EINVAL
                 : errs & E_INVAL                       ? -EINVAL
                 : errs & E_NAMETOOLONG                 ? -ENAMETOOLONG
                 : j < 0                                ? -ENOENT
                                                        : 0;
        rc = chring_set_ramp(ring, name->b, from, to, ms);
        if (rc == 0)
            objs[members[j].obj].scale = to >= 1.0 ? 1.0 : to;
    } else {
        int down = (sel & 2) != 0;
        note("set_down %s %d", show(name->b, name->len), down);
        expect = errs & E_INVAL         ? -EINVAL
                 : errs & E_NAMETOOLONG ? -ENAMETOOLONG
                 : j < 0                ? -ENOENT
                                        : 0;
        rc = chring_set_down(ring, name->b, (sel & 4) && down ? (int)sel : down);
        if (rc == 0 && down)
            objs[members[j].obj].rep_live = 0; /* going down drops a report */
        if (rc == 0)
            objs[members[j].obj].down = down;
    }
    if (rc != expect)
        fail("health call on %s = %s, model %s", show(name->b, name->len), err_name(rc),
             err_name(expect));
}

/* Reported load (chring_report_load): a member of the current or a held snapshot or of a lease
 * (maybe removed), a value small or huge; NULL arguments.  The model keeps the report on the
 * object; every later acquire, retry, acquire_try, capacity and statistic counts it. */
static void op_report(input_t *in)
{
    target_t t = take_target(in);
    uint8_t sel = take8(in);
    uint8_t v = take8(in);
    const chring_member_t *m;
    int id;
    pick_member(&t, sel, &m, &id);
    uint64_t value = (v & 0xc0) == 0xc0 ? (UINT64_C(1) << 40) + v : (uint64_t)(v & 0x3f);
    if (sel & 0x40) {
        if (chring_report_load(NULL, m, 1) != -EINVAL || chring_report_load(ring, NULL, 1) != -EINVAL)
            fail("chring_report_load with a NULL argument is not -EINVAL");
    }
    int expect = !m ? -EINVAL : reports_ignored ? 0 : !ld(&objs[id].live) ? -ENOENT : 0;
    note("report %llu on %s (%s)", (unsigned long long)value,
         id >= 0 ? show(objs[id].name, objs[id].len) : "(none)",
         t.is_current ? "the current snapshot" : "a held snapshot");
    int rc = chring_report_load(ring, m, value);
    drop_target(&t);
    if (rc != expect)
        fail("chring_report_load = %s, model %s", err_name(rc), err_name(expect));
    if (rc == 0 && m && !reports_ignored && !objs[id].down) {
        objs[id].rep_live = 1;
        objs[id].rep_value = value;
        objs[id].rep_local = objs[id].load + obj_inherited(id);
        reports++;
    }
}

static void op_oom(input_t *in)
{
    oom_armed = 1 + take8(in) % 12;
    note("the next writer call's allocation %d fails", oom_armed);
}

/* ---- the driver ---------------------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (model_selftest() != 0)
        abort();
    static const chring_allocator_t allocator = {fuzz_alloc, fuzz_free, NULL};
    if (chring_set_allocator(&allocator) != 0)
        abort();
    const char *t = getenv("FUZZ_API_TRACE");
    trace_print = t && *t && *t != '0';
    /* The other ring of the misuse guards: one member, one lease, for the process's life. */
    if (chring_new(&other, NULL) != 0 || chring_add(other, "other", 1, NULL) != 0 ||
        chring_acquire(other, "k", 1, &other_lease) != 0)
        abort();
    return 0;
}

static void start(const uint8_t *hdr)
{
    static const model_profile_t profiles[] = {
        MODEL_HASH64, MODEL_MURMUR32, MODEL_FNV32, MODEL_FNV16,
        MODEL_CUSTOM, MODEL_XXH3,     MODEL_NGINX, MODEL_KETAMA,
    };
    static const chring_profile_t lib_profiles[] = {
        CHRING_PROFILE_HASH64, CHRING_PROFILE_MURMUR32, CHRING_PROFILE_FNV32, CHRING_PROFILE_FNV16,
        CHRING_PROFILE_CUSTOM, CHRING_PROFILE_XXH3,     CHRING_PROFILE_NGINX, CHRING_PROFILE_KETAMA,
    };
    static const unsigned widths[] = {64, 32, 32, 16, 0, 64, 32, 32};
    static const unsigned custom_widths[] = {64, 32, 16};
    size_t p = hdr[0] % (sizeof profiles / sizeof profiles[0]);
    memset(&mcfg, 0, sizeof mcfg);
    mcfg.profile = profiles[p];
    mcfg.bits = widths[p];
    mcfg.vnodes = 1 + hdr[1] % 8;
    balance = balances[hdr[2] % (sizeof balances / sizeof balances[0])];
    custom.bits = custom_widths[hdr[3] % 3];
    custom.garbage = (hdr[3] >> 2) & 1;
    custom.buckets = 1 + hdr[4] % 32;
    if (mcfg.profile == MODEL_CUSTOM) {
        mcfg.bits = custom.bits;
        mcfg.hash = custom_hash;
        mcfg.hash_ctx = &custom;
    }

    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = lib_profiles[p];
    cfg.vnodes = mcfg.vnodes;
    cfg.balance = balance;
    if (mcfg.profile == MODEL_CUSTOM) {
        cfg.hash = custom_hash;
        cfg.hash_ctx = &custom;
        cfg.hash_bits = custom.bits;
    }
    /* Reports never expire here (a run's timing must not decide), or are ignored. */
    reports_ignored = (hdr[4] & 0x80) != 0;
    cfg.report_ttl_ms = reports_ignored ? 0 : UINT32_MAX;
    cfg.retire = on_retire;
    uintptr_t gen = __atomic_add_fetch(&generation, 1, __ATOMIC_SEQ_CST);
    cfg.retire_ctx = (void *)gen;

    trace_len = 0;
    op_no = 0;
    note("new ring: profile %s, vnodes %u, balance %g, custom bits %u buckets %u garbage %d",
         chring_profile_name(cfg.profile), mcfg.vnodes, balance, custom.bits, custom.buckets,
         custom.garbage);
    int rc = chring_new(&ring, &cfg);
    if (rc != 0 || !ring)
        fail("chring_new = %s", err_name(rc));
    nmembers = 0;
    version = acquires = spills = saturated_events = retries = reports = owner_downs = 0;
    nobjs = 0;
    memset(leases, 0, sizeof leases);
    for (int i = 0; i < LEASES; i++)
        lease_obj[i] = stale_obj[i] = -1;
    memset(held, 0, sizeof held);
    pool_reset();
    oom_armed = 0;
    rebuild();
}

static void finish(void)
{
    op_no++;
    note("release every lease, put every held snapshot, chring_free");
    for (int i = 0; i < LEASES; i++)
        if (lease_obj[i] >= 0)
            op_release_slot(i, 0);
    for (int h = 0; h < HELD; h++)
        op_put_slot(h);
    for (size_t j = 0; j < nmembers; j++)
        add_to(&objs[members[j].obj].live, -1);
    chring_free(&ring);
    if (ring != NULL)
        fail("chring_free did not clear the pointer");
    for (int id = 0; id < nobjs; id++) {
        int want = objs[id].added || objs[id].handed ? 1 : 0;
        if (ld(&objs[id].retired) != want)
            fail("after chring_free, %s (object %d, %s) was retired %d times, expected %d",
                 show(objs[id].name, objs[id].len), id,
                 objs[id].added    ? "a member once"
                 : objs[id].handed ? "a udata not kept, handed back at once"
                                   : "never kept by a successful call",
                 ld(&objs[id].retired), want);
    }
    model_snap_free(&cur);
    model_snap_free(&digest_model);
    digest_known = 0;
    nmembers = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    start(data);
    input_t in = {data + 5, size - 5};
    check_all();
    while (more(&in) && op_no < 256) {
        op_no++;
        uint8_t op = take8(&in);
        op_byte = op;
        /* Bit 7 of a writer operation runs it inside a read section: the writer must not wait
         * for a grace period there (a deadlock, reported as a timeout), and the snapshot the
         * section entered must stay intact and unchanged after the publish. */
        unsigned kind = op % 16;
        const chring_snap_t *section = NULL;
        model_snap_t section_model;
        uint64_t section_version = version;
        if ((op & 0x80) && (kind <= 5 || kind == 15)) {
            note("(the next writer call runs inside a read section)");
            if (model_build(&section_model, &mcfg, members, nmembers) != 0)
                abort();
            section = enter();
        }
        switch (kind) {
        case 0:
        case 1: op_add(&in); break;
        case 2: op_remove(&in); break;
        case 3: op_set_weight(&in); break;
        case 4: op_batch(&in, 0); break;
        case 5: op_batch(&in, 1); break;
        case 6: op_lookup(&in); break;
        case 7: op_lookup_n(&in); break;
        case 8: op_bounded(&in); break;
        case 9:
            if (op & 0x10)
                op_acquire_skip(&in);
            else
                op_acquire(&in);
            break;
        case 10:
            if (op & 0x10)
                op_acquire_member(&in);
            else if (op & 0x20)
                op_acquire_try(&in);
            else
                op_acquire(&in);
            break;
        case 11:
            if (op & 0x30)
                op_misuse_release(&in);
            else
                op_release(&in);
            break;
        case 12:
            if (op & 0x20)
                op_misuse_put();
            else if (op & 0x10)
                op_put(&in);
            else
                op_hold(&in);
            break;
        case 13:
            if (op & 0x10)
                op_digest(&in);
            else
                op_moved(&in);
            break;
        case 14:
            if (op & 0x80)
                op_quiesce();
            else if (op & 0x10)
                op_oom(&in);
            else if (op & 0x20)
                op_capacity(&in);
            else if (op & 0x40)
                op_hash(&in);
            else
                op_bad(&in);
            break;
        default:
            if (op & 0x40)
                op_report(&in);
            else
                op_health(&in);
            break;
        }
        if (section) {
            check_snapshot(section, &section_model, section_version,
                           "the snapshot of a read section a writer ran in");
            leave(section);
            model_snap_free(&section_model);
        }
        check_all();
    }
    finish();
    return 0;
}
