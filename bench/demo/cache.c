/* chring-demo, the cache tier: the hit ratio through a join and a flap, with and without the
 * library's health and warm-up controls (docs/design.md §3, "Health and warm-up").
 *
 * SPDX-License-Identifier: MIT
 *
 * Each backend is an LRU cache of a fixed number of keys: the demo's model of a cache server (a
 * map from key to node, indexed by the key's number, and a doubly linked recency list).  One
 * proxy thread routes a Zipf stream through chring_acquire/chring_release with SLOTS requests
 * in flight (a request takes a random slot and releases the request that held it, as in the
 * load phases); the backend a request lands on looks its key up: a hit, or a miss that brings the
 * key in and evicts the least recently used one.  One thread, so that every run sees exactly the
 * same requests (same seed) and the runs differ only by what happens to the ring.
 *
 * Runs, in windows of o->window requests after a warm-up that fills the caches:
 *   control-10  10 backends, no change;
 *   control-11  11 backends, no change (the tier as it is after the join);
 *   (a)         backend-11 joins at window CHANGE;
 *   (b)         the same join with config.slow_start_ms; the windows after the join are paced in
 *               wall-clock time (o->window_ms each), so that the ramp spans RAMP_WINDOWS windows;
 *   (c)         backend-04 marked down at window CHANGE and up FLAP windows later (chring_set_down);
 *   (d)         the same flap done as chring_remove and chring_add of the same name.
 * A flapping backend keeps its cache in (c) and (d) alike: it did not restart, the proxy stopped
 * sending it requests.
 *
 * Cold misses of a change: the misses of the windows after it (until the next change or the end)
 * minus those of the control run on the same requests: control-11 for the joins, control-10 for
 * the flaps.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chring.h"
#include "demo.h"

#define BACKENDS 11     /* backend-01..10, and backend-11 that joins */
#define SLOTS 128       /* requests in flight */
#define KEY_LEN 16      /* "object:%09u" */
#define BALANCE 1.25    /* c */
#define WARM 30         /* warm-up windows, not recorded */
#define CHANGE 10       /* the window at whose start the first change happens */
#define FLAP 10         /* windows the flapping backend stays out */
#define RAMP_WINDOWS 20 /* the slow start's length, in paced windows */
#define WINDOWS 50      /* recorded windows per run */
#define JOINER 10       /* backend-11 */
#define FLAPPER 3       /* backend-04 */
#define SEED 0x5eed5eed12345ull

enum {
    RUN_CTRL10,
    RUN_CTRL11,
    RUN_JOIN,
    RUN_SLOW,
    RUN_DOWN,
    RUN_REMOVE,
    NRUNS
};

static const char *const run_name[NRUNS] = {"control-10",      "control-11", "join",
                                            "join-slow-start", "down-up",    "remove-readd"};

/* ---------------------------------------------------------------------------------------------
 * The caches
 * ------------------------------------------------------------------------------------------- */

typedef struct lru {
    uint32_t capacity, used;
    int32_t head, tail;   /* most and least recently used node, -1 when empty */
    int32_t *node_of;     /* key -> node, -1 when the key is not cached */
    uint32_t *key;        /* node -> key */
    int32_t *prev, *next; /* node -> its neighbours in recency order, -1 at the ends */
} lru_t;

static unsigned nkeys;

static void lru_init(lru_t *c, uint32_t capacity)
{
    c->capacity = capacity;
    c->node_of = malloc(nkeys * sizeof *c->node_of);
    c->key = malloc(capacity * sizeof *c->key);
    c->prev = malloc(capacity * sizeof *c->prev);
    c->next = malloc(capacity * sizeof *c->next);
    if (!c->node_of || !c->key || !c->prev || !c->next)
        demo_die("out of memory", ENOMEM);
}

static void lru_clear(lru_t *c)
{
    memset(c->node_of, 0xff, nkeys * sizeof *c->node_of);
    c->used = 0;
    c->head = c->tail = -1;
}

static void lru_free(lru_t *c)
{
    free(c->node_of);
    free(c->key);
    free(c->prev);
    free(c->next);
}

static void lru_copy(lru_t *dst, const lru_t *src)
{
    dst->used = src->used;
    dst->head = src->head;
    dst->tail = src->tail;
    memcpy(dst->node_of, src->node_of, nkeys * sizeof *dst->node_of);
    memcpy(dst->key, src->key, src->used * sizeof *dst->key);
    memcpy(dst->prev, src->prev, src->used * sizeof *dst->prev);
    memcpy(dst->next, src->next, src->used * sizeof *dst->next);
}

static void lru_unlink(lru_t *c, int32_t n)
{
    if (c->prev[n] >= 0)
        c->next[c->prev[n]] = c->next[n];
    else
        c->head = c->next[n];
    if (c->next[n] >= 0)
        c->prev[c->next[n]] = c->prev[n];
    else
        c->tail = c->prev[n];
}

static void lru_push_front(lru_t *c, int32_t n)
{
    c->prev[n] = -1;
    c->next[n] = c->head;
    if (c->head >= 0)
        c->prev[c->head] = n;
    c->head = n;
    if (c->tail < 0)
        c->tail = n;
}

/* Looks key k up: true on a hit (k becomes the most recently used); false on a miss, after
 * which k is cached, in place of the least recently used key when the cache is full. */
static bool lru_access(lru_t *c, uint32_t k)
{
    int32_t n = c->node_of[k];
    if (n >= 0) {
        if (n != c->head) {
            lru_unlink(c, n);
            lru_push_front(c, n);
        }
        return true;
    }
    if (c->used < c->capacity) {
        n = (int32_t)c->used++;
    } else {
        n = c->tail;
        lru_unlink(c, n);
        c->node_of[c->key[n]] = -1;
    }
    c->key[n] = k;
    c->node_of[k] = n;
    lru_push_front(c, n);
    return false;
}

/* ---------------------------------------------------------------------------------------------
 * The tier: backends, keys, the request stream
 * ------------------------------------------------------------------------------------------- */

typedef struct backend {
    char name[16];
    int index;
    lru_t cache;
} backend_t;

static backend_t backends[BACKENDS];
static char (*keys)[KEY_LEN + 1];
static double *cdf;
static double *prob;
/* Each key's owner (backend index) under plain lookup with 11 backends, with backend-01..10,
 * and with backend-01..10 but the flapper: where a join, a down or a removal sends it. */
static int *own11, *own10, *own9;

/* Walker's alias table of the Zipf distribution (built by Vose's method): a draw is one random
 * column, kept or sent to its alias by a second random number, two memory reads where a binary
 * search of the CDF would be twenty. */
typedef struct alias {
    double keep;
    uint32_t other;
} alias_t;

static alias_t *alias;

static void alias_init(void)
{
    alias = malloc(nkeys * sizeof *alias);
    uint32_t *small = malloc(nkeys * sizeof *small), *large = malloc(nkeys * sizeof *large);
    double *scaled = malloc(nkeys * sizeof *scaled);
    if (!alias || !small || !large || !scaled)
        demo_die("out of memory", ENOMEM);
    size_t ns = 0, nl = 0;
    for (unsigned i = 0; i < nkeys; i++) {
        scaled[i] = prob[i] * nkeys;
        if (scaled[i] < 1)
            small[ns++] = i;
        else
            large[nl++] = i;
    }
    while (ns && nl) {
        uint32_t lo = small[--ns], hi = large[nl - 1];
        alias[lo] = (alias_t){scaled[lo], hi};
        scaled[hi] -= 1 - scaled[lo];
        if (scaled[hi] < 1)
            nl--, small[ns++] = hi;
    }
    while (nl)
        alias[large[nl - 1]] = (alias_t){1, large[nl - 1]}, nl--;
    while (ns) /* only rounding leaves columns here */
        alias[small[ns - 1]] = (alias_t){1, small[ns - 1]}, ns--;
    free(small);
    free(large);
    free(scaled);
}

static unsigned zipf_draw(uint64_t *s)
{
    uint64_t x = demo_rnd(s);
    unsigned column = (unsigned)((x >> 32) * nkeys >> 32);
    double u = (double)(demo_rnd(s) >> 11) * 0x1p-53;
    return u < alias[column].keep ? column : alias[column].other;
}

static void sync_members(chring_t *r, unsigned n, int skip)
{
    chring_change_t ch[BACKENDS];
    size_t len = 0;
    for (unsigned i = 0; i < n; i++)
        if ((int)i != skip)
            ch[len++] = (chring_change_t){backends[i].name, 1, &backends[i]};
    int rc = chring_sync(r, ch, len);
    if (rc < 0)
        demo_die("chring_sync", rc);
}

static int *owners_with(unsigned n, int skip)
{
    chring_t *r;
    int rc = chring_new(&r, NULL);
    if (rc < 0)
        demo_die("chring_new", rc);
    sync_members(r, n, skip);
    int *own = malloc(nkeys * sizeof *own);
    if (!own)
        demo_die("out of memory", ENOMEM);
    const chring_snap_t *s = chring_snap_enter(r);
    for (unsigned k = 0; k < nkeys; k++)
        own[k] = ((const backend_t *)chring_member_udata(chring_snap_lookup(s, keys[k], KEY_LEN)))
                     ->index;
    chring_snap_exit(r, s);
    chring_free(&r);
    return own;
}

static void tier_init(const cache_opts_t *o)
{
    nkeys = o->keys;
    keys = malloc(nkeys * sizeof *keys);
    cdf = malloc(nkeys * sizeof *cdf);
    prob = malloc(nkeys * sizeof *prob);
    if (!keys || !cdf || !prob)
        demo_die("out of memory", ENOMEM);
    double h = 0, acc = 0;
    for (unsigned i = 0; i < nkeys; i++)
        h += 1.0 / pow((double)(i + 1), o->zipf);
    for (unsigned i = 0; i < nkeys; i++) {
        prob[i] = 1.0 / pow((double)(i + 1), o->zipf) / h;
        acc += prob[i];
        cdf[i] = acc;
        snprintf(keys[i], sizeof keys[i], "object:%09u", i * 2654435761u % 1000000000u);
    }
    cdf[nkeys - 1] = 1.0;
    alias_init();
    for (int i = 0; i < BACKENDS; i++) {
        snprintf(backends[i].name, sizeof backends[i].name, "backend-%02d", i + 1);
        backends[i].index = i;
        lru_init(&backends[i].cache, o->capacity);
    }
    own11 = owners_with(11, -1);
    own10 = owners_with(10, -1);
    own9 = owners_with(10, FLAPPER);
}

/* The share of the requests for the n most requested keys. */
static double top_share(unsigned n)
{
    return n >= nkeys ? 1.0 : cdf[n - 1];
}

static void tier_free(void)
{
    for (int i = 0; i < BACKENDS; i++)
        lru_free(&backends[i].cache);
    free(keys);
    free(cdf);
    free(prob);
    free(alias);
    free(own11);
    free(own10);
    free(own9);
}

/* ---------------------------------------------------------------------------------------------
 * Runs
 * ------------------------------------------------------------------------------------------- */

/* One window of one run.  The focus backend is the joiner (joins and control-11) or the flapper
 * (flaps and control-10); its keys are those it owns once the change is made (joins) or before it
 * (flaps), and their other owner is where they go without it (their previous owner for a join,
 * their next one for a down). */
typedef struct window_stats {
    uint32_t hits, misses;
    uint32_t focus;       /* requests for the focus backend's keys */
    uint32_t focus_hits;  /* ... that hit */
    uint32_t focus_on;    /* ... that the focus backend served */
    uint32_t focus_other; /* ... that their other owner served */
    uint32_t other_hits;  /* ... that their other owner served from its cache */
    uint32_t on_misses;   /* misses of the focus backend (any key): what it asked its origin */
    uint32_t spills;      /* acquires placed off their key's owner (chring_stats) */
    uint32_t saturated;   /* acquires that found every member full (chring_stats) */
    uint32_t joiner_peak; /* the joiner's highest load after an acquire (joins, control-11) */
    uint32_t joiner_cap;  /* its capacity (chring_member_capacity) at that moment */
    uint32_t joiner_over; /* acquires after which its load was above its capacity */
    double scale;         /* the joiner's admission scale during the window; -1: no joiner */
    double joined_at;     /* (b), window CHANGE: its scale as chring_add returned */
} window_stats_t;

static window_stats_t win[NRUNS][WINDOWS];

typedef struct slot {
    bool busy;
    uint32_t key;
    chring_lease_t lease;
} slot_t;

typedef struct tier_run {
    chring_t *ring;
    uint64_t seed;
    slot_t slots[SLOTS];
    unsigned nslots; /* requests in flight: SLOTS when 0 (every run but the floor's) */
    int focus;
    const int *focus_owner; /* owner table that defines the focus keys */
    const int *other_owner; /* owner table of their other owner */
} tier_run_t;

static void route(tier_run_t *t, window_stats_t *ws)
{
    uint32_t k = zipf_draw(&t->seed);
    slot_t *s = &t->slots[demo_rnd(&t->seed) % (t->nslots ? t->nslots : SLOTS)];
    if (s->busy)
        chring_release(t->ring, &s->lease);
    int rc = chring_acquire(t->ring, keys[k], KEY_LEN, &s->lease);
    if (rc < 0)
        demo_die("chring_acquire", rc);
    s->busy = true;
    s->key = k;
    const backend_t *b = chring_member_udata(s->lease.member);
    bool hit = lru_access(&((backend_t *)b)->cache, k);
    if (!ws)
        return;
    if (t->focus == JOINER) {
        /* The bound at the joiner, warming or not: its load after this acquire against the
         * capacity the next acquire would judge it by (the effective-weight rule). */
        const chring_snap_t *snap = chring_snap_enter(t->ring);
        const chring_member_t *j = chring_snap_find(snap, backends[JOINER].name);
        if (j != NULL) {
            uint64_t load = chring_member_load(j), cap = chring_member_capacity(t->ring, snap, j);
            if (load > ws->joiner_peak)
                ws->joiner_peak = (uint32_t)load, ws->joiner_cap = (uint32_t)cap;
            ws->joiner_over += load > cap;
        }
        chring_snap_exit(t->ring, snap);
    }
    if (hit)
        ws->hits++;
    else
        ws->misses++;
    if (b->index == t->focus && !hit)
        ws->on_misses++;
    if (t->focus_owner[k] == t->focus) {
        ws->focus++;
        ws->focus_hits += hit;
        if (b->index == t->focus) {
            ws->focus_on++;
        } else if (b->index == t->other_owner[k]) {
            ws->focus_other++;
            ws->other_hits += hit;
        }
    }
}

static double joiner_scale(chring_t *r)
{
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_find(s, backends[JOINER].name);
    double scale = m ? chring_member_scale(m) : -1;
    chring_snap_exit(r, s);
    return scale;
}

static void check(int rc, const char *what)
{
    if (rc < 0)
        demo_die(what, rc);
}

/* The warm-up: WARM windows, and at least enough requests for the misses to replace every
 * cache's content about three times over (a request misses about a third of the time and one in
 * ten lands on a given backend). */
static uint64_t warm_requests(const cache_opts_t *o)
{
    uint64_t windows = (uint64_t)WARM * o->window, turnover = (uint64_t)o->capacity * 100;
    return windows > turnover ? windows : turnover;
}

/* The tier as a warm-up leaves it: the caches, the generator, the keys of the requests in flight.
 * The runs that start with backend-01..10 all start from one warm-up of theirs. */
typedef struct warm {
    lru_t caches[BACKENDS];
    uint64_t seed;
    bool busy[SLOTS];
    uint32_t key[SLOTS];
} warm_t;

static void start_ring(tier_run_t *t, int kind, unsigned members, const cache_opts_t *o)
{
    memset(t, 0, sizeof *t);
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.balance = BALANCE;
    if (kind == RUN_SLOW)
        cfg.slow_start_ms = RAMP_WINDOWS * o->window_ms;
    check(chring_new(&t->ring, &cfg), "chring_new");
    sync_members(t->ring, members, -1); /* an empty ring: no ramp */
    bool join = kind == RUN_CTRL11 || kind == RUN_JOIN || kind == RUN_SLOW;
    t->focus = join ? JOINER : FLAPPER;
    t->focus_owner = join ? own11 : own10;
    t->other_owner = join ? own10 : own9;
}

static void stop_ring(tier_run_t *t)
{
    for (int i = 0; i < SLOTS; i++)
        if (t->slots[i].busy)
            chring_release(t->ring, &t->slots[i].lease);
    if (chring_leases(t->ring) != 0)
        fprintf(stderr, "chring-demo: warning: %" PRIu64 " leases outstanding at the end\n",
                chring_leases(t->ring));
    chring_free(&t->ring);
}

static void warm_up(tier_run_t *t, const cache_opts_t *o)
{
    for (int i = 0; i < BACKENDS; i++)
        lru_clear(&backends[i].cache);
    t->seed = SEED;
    for (uint64_t i = 0; i < warm_requests(o); i++)
        route(t, NULL);
}

/* Saves the state of a warm-up on backend-01..10 in *w (allocated here). */
static void warm_save(warm_t *w, const cache_opts_t *o)
{
    static tier_run_t t;
    start_ring(&t, RUN_CTRL10, 10, o);
    warm_up(&t, o);
    for (int i = 0; i < BACKENDS; i++) {
        lru_init(&w->caches[i], o->capacity);
        lru_copy(&w->caches[i], &backends[i].cache);
    }
    w->seed = t.seed;
    for (int i = 0; i < SLOTS; i++)
        w->busy[i] = t.slots[i].busy, w->key[i] = t.slots[i].key;
    stop_ring(&t);
}

/* Puts the saved warm-up back: the caches as they were, and the requests that were in flight
 * placed again (bounded, in slot order) on the new ring. */
static void warm_restore(tier_run_t *t, const warm_t *w)
{
    for (int i = 0; i < BACKENDS; i++)
        lru_copy(&backends[i].cache, &w->caches[i]);
    t->seed = w->seed;
    for (int i = 0; i < SLOTS; i++) {
        if (!w->busy[i])
            continue;
        slot_t *s = &t->slots[i];
        check(chring_acquire(t->ring, keys[w->key[i]], KEY_LEN, &s->lease), "chring_acquire");
        s->busy = true;
        s->key = w->key[i];
    }
}

static void run_tier(int kind, const cache_opts_t *o, const warm_t *warm)
{
    static tier_run_t t;
    start_ring(&t, kind, kind == RUN_CTRL11 ? 11 : 10, o);
    if (kind == RUN_CTRL11)
        warm_up(&t, o);
    else
        warm_restore(&t, warm);
    const char *joiner = backends[JOINER].name, *flapper = backends[FLAPPER].name;
    for (int w = 0; w < WINDOWS; w++) {
        window_stats_t *ws = &win[kind][w];
        memset(ws, 0, sizeof *ws);
        if (w == CHANGE) {
            if (kind == RUN_JOIN || kind == RUN_SLOW)
                check(chring_add(t.ring, joiner, 1, &backends[JOINER]), "chring_add");
            else if (kind == RUN_DOWN)
                check(chring_set_down(t.ring, flapper, 1), "chring_set_down");
            else if (kind == RUN_REMOVE)
                check(chring_remove(t.ring, flapper), "chring_remove");
        } else if (w == CHANGE + FLAP) {
            if (kind == RUN_DOWN)
                check(chring_set_down(t.ring, flapper, 0), "chring_set_down");
            else if (kind == RUN_REMOVE)
                check(chring_add(t.ring, flapper, 1, &backends[FLAPPER]), "chring_add");
        }
        if (kind == RUN_SLOW && w == CHANGE)
            ws->joined_at = joiner_scale(t.ring); /* the config's slow_start_from */
        if (kind == RUN_SLOW && w >= CHANGE && w <= CHANGE + RAMP_WINDOWS) {
            /* The ramp config.slow_start_ms runs on CLOCK_MONOTONIC, set along the simulated
             * clock instead (a window is o->window_ms), one step per window: the run is then the
             * same on a busy machine as on an idle one. */
            double from = CHRING_DEFAULT_SLOW_START_FROM;
            double scale = from + (1 - from) * (double)(w - CHANGE) / RAMP_WINDOWS;
            check(chring_set_ramp(t.ring, joiner, scale, scale, 0), "chring_set_ramp");
        }
        ws->scale = joiner_scale(t.ring);
        chring_stats_t st0, st1;
        chring_stats(t.ring, &st0);
        for (unsigned i = 0; i < o->window; i++)
            route(&t, ws);
        chring_stats(t.ring, &st1);
        ws->spills = (uint32_t)(st1.spills - st0.spills);
        ws->saturated = (uint32_t)(st1.saturated - st0.saturated);
    }
    stop_ring(&t);
}

/* ---------------------------------------------------------------------------------------------
 * Report
 * ------------------------------------------------------------------------------------------- */

static double ratio(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : 0;
}

static double hit_ratio(const window_stats_t *ws)
{
    return ratio(ws->hits, (uint64_t)ws->hits + ws->misses);
}

/* The control a run's window w is compared with: the tier as it stands after the change. */
static int control_of(int run, int w)
{
    if (run == RUN_JOIN || run == RUN_SLOW || run == RUN_CTRL11)
        return w >= CHANGE || run == RUN_CTRL11 ? RUN_CTRL11 : RUN_CTRL10;
    return RUN_CTRL10;
}

/* Misses of run over windows [from, to) above those of its control on the same requests. */
static long cold_misses(int run, int from, int to)
{
    long sum = 0;
    for (int w = from; w < to; w++)
        sum += (long)win[run][w].misses - (long)win[control_of(run, w)][w].misses;
    return sum;
}

static int lowest_window(int run, int from, int to)
{
    int at = from;
    for (int w = from; w < to; w++)
        if (hit_ratio(&win[run][w]) < hit_ratio(&win[run][at]))
            at = w;
    return at;
}

/* Hit ratio over windows [from, to) of all requests (part 0), of the focus backend's keys (1), of
 * the other keys (2). */
static double hits_over(int run, int from, int to, int part)
{
    uint64_t hits = 0, all = 0;
    for (int w = from; w < to; w++) {
        const window_stats_t *ws = &win[run][w];
        uint64_t h = part == 1 ? ws->focus_hits : ws->hits - (part == 2 ? ws->focus_hits : 0);
        uint64_t n =
            part == 1 ? ws->focus : (uint64_t)ws->hits + ws->misses - (part == 2 ? ws->focus : 0);
        hits += h, all += n;
    }
    return ratio(hits, all);
}

/* Misses over windows CHANGE.. at the focus backend (focus) or at the others (!focus). */
static long backend_misses(int run, bool focus)
{
    long sum = 0;
    for (int w = CHANGE; w < WINDOWS; w++)
        sum += focus ? win[run][w].on_misses : win[run][w].misses - win[run][w].on_misses;
    return sum;
}

/* true when two runs saw the same hits and misses in every window. */
static bool same_windows(int a, int b)
{
    for (int w = 0; w < WINDOWS; w++)
        if (win[a][w].hits != win[b][w].hits || win[a][w].misses != win[b][w].misses)
            return false;
    return true;
}

static const char *event_of(int w)
{
    if (w == CHANGE)
        return "<- (a)(b) backend-11 joins; (c)(d) backend-04 out";
    if (w == CHANGE + FLAP)
        return "<- (c)(d) backend-04 back";
    if (w == CHANGE + RAMP_WINDOWS)
        return "<- (b) backend-11 at scale 1";
    return "";
}

static void print_windows(const cache_opts_t *o)
{
    printf("\n  hit ratio per window of %u requests, of all requests and of the requests for "
           "backend-11's keys:\n",
           o->window);
    printf("  %6s %7s %7s %7s %7s %7s %7s | %7s %7s %6s %6s %7s\n", "window", "ctl-10", "ctl-11",
           "(a)", "(b)", "(c)", "(d)", "keys(a)", "keys(b)", "on-11", "scale", "ld/cap");
    for (int w = 0; w < WINDOWS; w++) {
        const window_stats_t *b = &win[RUN_SLOW][w];
        printf("  %6d %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% |", w,
               100 * hit_ratio(&win[RUN_CTRL10][w]), 100 * hit_ratio(&win[RUN_CTRL11][w]),
               100 * hit_ratio(&win[RUN_JOIN][w]), 100 * hit_ratio(b),
               100 * hit_ratio(&win[RUN_DOWN][w]), 100 * hit_ratio(&win[RUN_REMOVE][w]));
        if (w < CHANGE) {
            printf(" %7s %7s %6s %6s %7s", "", "", "", "", "");
        } else {
            char bound[24];
            snprintf(bound, sizeof bound, "%u/%u", b->joiner_peak, b->joiner_cap);
            printf(" %6.1f%% %6.1f%% %5.0f%% %6.2f %7s",
                   100 * ratio(win[RUN_JOIN][w].focus_hits, win[RUN_JOIN][w].focus),
                   100 * ratio(b->focus_hits, b->focus), 100 * ratio(b->focus_on, b->focus),
                   b->scale, bound);
        }
        printf(" %s\n", event_of(w));
    }
    printf("  ctl-10, ctl-11: the control runs; keys(a), keys(b): the requests for the keys "
           "backend-11 owns once\n  it has joined; on-11: the share of them it served in (b); "
           "scale: its admission scale in (b);\n  ld/cap: its highest load in (b) after an "
           "acquire, and its capacity then (chring_member_capacity).\n");
}

static void print_change(const char *what, int run, int from, int to, bool joiner)
{
    int low = lowest_window(run, from, to);
    printf("  %-34s %7ld %9ld %8d: %4.1f%%", what, cold_misses(run, from, to),
           cold_misses(run, from, from + 1), low, 100 * hit_ratio(&win[run][low]));
    if (joiner)
        printf(" %11u (%u in control-11)", win[run][from].on_misses,
               win[RUN_CTRL11][from].on_misses);
    printf("\n");
}

/* The bound through the joins: saturated acquires, and the joiner's load against its capacity
 * (effective weights: while it warms, its scale shrinks its capacity and its share of E alike, so
 * the capacities still add up to more than the requests in flight). */
static void print_bound(void)
{
    uint64_t sat[NRUNS] = {0}, over[NRUNS] = {0};
    uint32_t peak[NRUNS] = {0}, cap_at_peak[NRUNS] = {0};
    const int runs[] = {RUN_JOIN, RUN_SLOW, RUN_CTRL11};
    for (int i = 0; i < 3; i++)
        for (int w = CHANGE; w < WINDOWS; w++) {
            const window_stats_t *ws = &win[runs[i]][w];
            sat[runs[i]] += ws->saturated;
            over[runs[i]] += ws->joiner_over;
            if (ws->joiner_peak > peak[runs[i]])
                peak[runs[i]] = ws->joiner_peak, cap_at_peak[runs[i]] = ws->joiner_cap;
        }
    const window_stats_t *first = &win[RUN_SLOW][CHANGE];
    printf("      Saturated acquires from the join on (windows %d-%d): %" PRIu64 " in (a), %" PRIu64
           " in (b), %" PRIu64 " in\n      control-11.  backend-11's load went above its capacity "
           "after %" PRIu64 " acquires in (b) (%" PRIu64 " in (a)):\n      warming, its capacity "
           "is ceil(c * (m + 1) * e / E) with e = s * w its effective weight, %u at\n      scale "
           "%.2f, where it held at most %u; its highest load in (b) was %u, against %u then.\n",
           CHANGE, WINDOWS - 1, sat[RUN_JOIN], sat[RUN_SLOW], sat[RUN_CTRL11], over[RUN_SLOW],
           over[RUN_JOIN], first->joiner_cap, first->scale, first->joiner_peak, peak[RUN_SLOW],
           cap_at_peak[RUN_SLOW]);
}

static void print_summary(void)
{
    printf("\n  steady state (the controls over windows %d-%d): %.1f%% hits with 10 backends, "
           "%.1f%% with 11.\n",
           CHANGE, WINDOWS - 1, 100 * hits_over(RUN_CTRL10, CHANGE, WINDOWS, 0),
           100 * hits_over(RUN_CTRL11, CHANGE, WINDOWS, 0));
    printf("  cold misses: the misses of the windows after a change (until the next one) less "
           "those of the control\n  on the same requests: control-11 after a join, control-10 "
           "during and after a flap.\n\n");
    printf("  %-34s %7s %9s %14s %11s\n", "change", "cold", "in its", "lowest window",
           "misses at backend-11,");
    printf("  %-34s %7s %9s %14s %11s\n", "", "misses", "1st window", "", "1st window");
    print_change("(a) backend-11 joins", RUN_JOIN, CHANGE, WINDOWS, true);
    print_change("(b) backend-11 joins, slow start", RUN_SLOW, CHANGE, WINDOWS, true);
    print_change("(c) backend-04 set down", RUN_DOWN, CHANGE, CHANGE + FLAP, false);
    print_change("(c) backend-04 set up again", RUN_DOWN, CHANGE + FLAP, WINDOWS, false);
    print_change("(d) backend-04 removed", RUN_REMOVE, CHANGE, CHANGE + FLAP, false);
    print_change("(d) backend-04 added again", RUN_REMOVE, CHANGE + FLAP, WINDOWS, false);

    /* Where (b) sent the requests backend-11 refused while it ramped. */
    uint64_t focus = 0, on = 0, to_prev = 0, prev_hits = 0;
    for (int w = CHANGE; w < CHANGE + RAMP_WINDOWS; w++) {
        const window_stats_t *ws = &win[RUN_SLOW][w];
        focus += ws->focus, on += ws->focus_on;
        to_prev += ws->focus_other, prev_hits += ws->other_hits;
    }
    const window_stats_t *a1 = &win[RUN_JOIN][CHANGE], *b1 = &win[RUN_SLOW][CHANGE];
    printf("\n  (b) backend-11 joined at scale %.1f (config.slow_start_from %.2f, read back as "
           "chring_add returned)\n      and ramped to 1 over windows %d-%d.  Meanwhile it served "
           "%.0f%% of its keys' requests;\n      %.0f%% of those it refused went to their previous "
           "owner, which served %.1f%% of them from its\n      cache.  In the first window its "
           "keys hit %.1f%% (%.1f%% in (a)) and it missed %u times (%u in\n      (a)).\n",
           b1->joined_at, CHRING_DEFAULT_SLOW_START_FROM, CHANGE, CHANGE + RAMP_WINDOWS - 1,
           100 * ratio(on, focus), 100 * ratio(to_prev, focus - on),
           100 * ratio(prev_hits, to_prev), 100 * ratio(b1->focus_hits, b1->focus),
           100 * ratio(a1->focus_hits, a1->focus), b1->on_misses, a1->on_misses);
    long ca = cold_misses(RUN_JOIN, CHANGE, WINDOWS), cb = cold_misses(RUN_SLOW, CHANGE, WINDOWS);
    int ramp_end = CHANGE + RAMP_WINDOWS;
    if (cb > ca)
        printf("      In all it lost more than (a): %ld cold misses against %ld.  Over windows "
               "%d-%d,\n      backend-11 itself missed %ld times (%ld in (a), %ld in control-11) "
               "and the\n      other backends %ld times (%ld in (a), %ld in control-11): while "
               "it ramps, its\n      previous owners keep serving and caching its keys, so the "
               "tier gains the 11th cache\n      later (over the ramp the other backends' keys "
               "hit %.1f%% in (b), %.1f%% in (a), %.1f%%\n      in control-11).\n",
               cb, ca, CHANGE, WINDOWS - 1, backend_misses(RUN_SLOW, true),
               backend_misses(RUN_JOIN, true), backend_misses(RUN_CTRL11, true),
               backend_misses(RUN_SLOW, false), backend_misses(RUN_JOIN, false),
               backend_misses(RUN_CTRL11, false), 100 * hits_over(RUN_SLOW, CHANGE, ramp_end, 2),
               100 * hits_over(RUN_JOIN, CHANGE, ramp_end, 2),
               100 * hits_over(RUN_CTRL11, CHANGE, ramp_end, 2));
    else
        printf("      In all it lost less than (a): %ld cold misses against %ld.\n", cb, ca);
    print_bound();
    long cc = cold_misses(RUN_DOWN, CHANGE, WINDOWS), cd = cold_misses(RUN_REMOVE, CHANGE, WINDOWS);
    if (same_windows(RUN_DOWN, RUN_REMOVE))
        printf("  (c) and (d): the same hits and misses in every window (%ld cold misses each).  "
               "A member that is\n      down is walked past exactly as if it were removed, and "
               "a name added again gets exactly its\n      old points back, so both flaps send "
               "every request to the same backend.  Down/up saves the\n      ring's work (no "
               "snapshot rebuilt or published, the member object and its counters kept),\n"
               "      not cache hits.\n",
               cc);
    else
        printf("  (c) and (d): the windows differ: %ld cold misses against %ld.\n", cc, cd);
}

static FILE *open_out(const cache_opts_t *o, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", o->out_dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        demo_die(path, errno);
    return f;
}

static void write_csv(const cache_opts_t *o, char *path, size_t cap)
{
    FILE *f = open_out(o, "chring-demo-cache.csv", path, cap);
    fprintf(f, "run,window,requests,hits,misses,hit_ratio,control_misses,focus_backend,"
               "focus_requests,focus_hits,focus_on_backend,focus_on_other_owner,"
               "other_owner_hits,focus_backend_misses,spills,joiner_scale,saturated,"
               "joiner_peak_load,joiner_capacity_at_peak,joiner_over_capacity\n");
    for (int r = 0; r < NRUNS; r++) {
        bool join = r == RUN_CTRL11 || r == RUN_JOIN || r == RUN_SLOW;
        for (int w = 0; w < WINDOWS; w++) {
            const window_stats_t *ws = &win[r][w];
            fprintf(f, "%s,%d,%u,%u,%u,%.6f,%u,%s,%u,%u,%u,%u,%u,%u,%u,%.4f,%u,%u,%u,%u\n",
                    run_name[r], w, ws->hits + ws->misses, ws->hits, ws->misses, hit_ratio(ws),
                    win[control_of(r, w)][w].misses, backends[join ? JOINER : FLAPPER].name,
                    ws->focus, ws->focus_hits, ws->focus_on, ws->focus_other, ws->other_hits,
                    ws->on_misses, ws->spills, ws->scale, ws->saturated, ws->joiner_peak,
                    ws->joiner_cap, ws->joiner_over);
        }
    }
    if (fclose(f) != 0)
        demo_die(path, errno);
}

/* The gnuplot script, data inline: the joins on the left, the flaps on the right; hit ratio of
 * all requests, cold misses per window, and the requests for the changed backend's keys. */
static void write_gp(const cache_opts_t *o, char *path, size_t cap, char *png, size_t png_cap)
{
    FILE *f = open_out(o, "chring-demo-cache.gp", path, cap);
    snprintf(png, png_cap, "%s/chring-demo-cache.png", o->out_dir);
    fprintf(f, "# chring-demo: the cache tier's hit ratio per window (generated)\n"
               "# x ctl10 ctl11 a b c d | cold_a cold_b cold_c cold_d | miss11_a miss11_b | "
               "keys_a keys_b on11_b scale_b | keys_c on04_c | peak11_a cap11_a peak11_b cap11_b | "
               "sat_a sat_b sat_c sat_d\n$D << EOD\n");
    for (int w = 0; w < WINDOWS; w++) {
        fprintf(f, "%.1f", w + 0.5);
        const int runs[] = {RUN_CTRL10, RUN_CTRL11, RUN_JOIN, RUN_SLOW, RUN_DOWN, RUN_REMOVE};
        for (int i = 0; i < 6; i++)
            fprintf(f, " %.3f", 100 * hit_ratio(&win[runs[i]][w]));
        for (int i = 2; i < 6; i++)
            fprintf(f, " %ld", cold_misses(runs[i], w, w + 1));
        const window_stats_t *a = &win[RUN_JOIN][w], *b = &win[RUN_SLOW][w];
        const window_stats_t *c = &win[RUN_DOWN][w];
        if (w < CHANGE)
            fprintf(f, " NaN NaN NaN NaN NaN NaN");
        else
            fprintf(f, " %u %u %.3f %.3f %.3f %.3f", a->on_misses, b->on_misses,
                    100 * ratio(a->focus_hits, a->focus), 100 * ratio(b->focus_hits, b->focus),
                    100 * ratio(b->focus_on, b->focus), 100 * b->scale);
        fprintf(f, " %.3f %.3f", 100 * ratio(c->focus_hits, c->focus),
                100 * ratio(c->focus_on, c->focus));
        if (w < CHANGE)
            fprintf(f, " NaN NaN NaN NaN");
        else
            fprintf(f, " %u %u %u %u", a->joiner_peak, a->joiner_cap, b->joiner_peak,
                    b->joiner_cap);
        fprintf(f, " %u %u %u %u\n", a->saturated, b->saturated, c->saturated,
                win[RUN_REMOVE][w].saturated);
    }
    fprintf(f, "EOD\n");
    double lo = 100, hi = 0;
    long cold_lo = 0, cold_hi = 0;
    unsigned miss_hi = 0;
    for (int r = 0; r < NRUNS; r++)
        for (int w = 0; w < WINDOWS; w++) {
            double h = 100 * hit_ratio(&win[r][w]);
            lo = h < lo ? h : lo, hi = h > hi ? h : hi;
            long cm = cold_misses(r, w, w + 1);
            cold_lo = cm < cold_lo ? cm : cold_lo, cold_hi = cm > cold_hi ? cm : cold_hi;
            if (r == RUN_JOIN || r == RUN_SLOW)
                miss_hi = win[r][w].on_misses > miss_hi ? win[r][w].on_misses : miss_hi;
        }
    if ((long)miss_hi > cold_hi)
        cold_hi = (long)miss_hi;
    unsigned cap_hi = 0;
    for (int w = CHANGE; w < WINDOWS; w++) {
        const window_stats_t *a = &win[RUN_JOIN][w], *b = &win[RUN_SLOW][w];
        const unsigned v[] = {a->joiner_cap, b->joiner_cap, a->joiner_peak, b->joiner_peak};
        for (int i = 0; i < 4; i++)
            cap_hi = v[i] > cap_hi ? v[i] : cap_hi;
    }
    fprintf(f, "set terminal pngcairo noenhanced size 1500,1700 font 'sans,10'\nset output '%s'\n",
            png);
    fprintf(f,
            "set multiplot layout 4,2 title \"chring-demo cache tier: 10 backends, each an LRU "
            "of %u keys; a Zipf(%.2f) stream over %u keys, %d requests in flight, chring_acquire "
            "with c = %.2f\\nwindows of %u requests; every run sees the same requests\" "
            "font 'sans,12'\n",
            o->capacity, o->zipf, nkeys, SLOTS, BALANCE, o->window);
    fprintf(f,
            "set grid\nset xrange [0:%d]\nset xtics 5\nset key opaque box\n"
            "set xlabel 'window'\n",
            WINDOWS);
    fprintf(f, "set style line 1 lw 2 lc rgb '#999999'\n"
               "set style line 2 lw 2 dt 2 lc rgb '#bbbbbb'\n"
               "set style line 3 lw 2 pt 7 ps 0.5 lc rgb '#d9480f'\n"
               "set style line 4 lw 2 pt 5 ps 0.5 lc rgb '#1c7ed6'\n"
               "set style line 5 lw 4 lc rgb '#2f9e44'\n"
               "set style line 6 pt 6 ps 1.1 lw 1.5 lc rgb '#862e9c'\n");
    const char *hits_range = "set ylabel 'hit ratio (%)'\n";
    char yr[128], cr[128];
    snprintf(yr, sizeof yr, "set yrange [%.0f:%.0f]\n", floor(lo - 4), ceil(hi + 1));
    snprintf(cr, sizeof cr, "set yrange [%ld:%ld]\n", cold_lo - 20, cold_hi + cold_hi / 4 + 20);
    const char *join_mark = "set arrow 1 from %d, graph 0 to %d, graph 1 nohead dt 3 lw 1.5 "
                            "lc rgb '#1c7ed6'\n";
    /* Row 1: hit ratio of all requests. */
    fprintf(f, "%s%sset key bottom right\n", hits_range, yr);
    fprintf(f, "set arrow 1 from %d, graph 0 to %d, graph 1 nohead dt 2 lc rgb '#555555'\n", CHANGE,
            CHANGE);
    fprintf(f, join_mark, CHANGE + RAMP_WINDOWS, CHANGE + RAMP_WINDOWS);
    fprintf(f, "set arrow 2 from %d, graph 0 to %d, graph 1 nohead dt 2 lc rgb '#555555'\n", CHANGE,
            CHANGE);
    fprintf(f,
            "set title 'join: backend-11 joins at window %d (slow start: scale %.1f to 1 by "
            "window %d): hit ratio, all requests'\n"
            "plot $D u 1:3 w l ls 1 t 'control: 11 backends', '' u 1:2 w l ls 2 t 'control: "
            "10 backends', '' u 1:4 w lp ls 3 t '(a) join', '' u 1:5 w lp ls 4 t '(b) join, "
            "slow start'\n",
            CHANGE, CHRING_DEFAULT_SLOW_START_FROM, CHANGE + RAMP_WINDOWS);
    fprintf(f,
            "unset arrow 1\nset arrow 3 from %d, graph 0 to %d, graph 1 nohead dt 2 lc rgb "
            "'#555555'\n",
            CHANGE + FLAP, CHANGE + FLAP);
    fprintf(f,
            "set title 'flap: backend-04 out at window %d, back at window %d (its cache kept): "
            "hit ratio, all requests'\n"
            "plot $D u 1:2 w l ls 1 t 'control: 10 backends', '' u 1:6 w l ls 5 t '(c) "
            "chring_set_down 1, then 0', '' u 1:7 w p ls 6 t '(d) chring_remove, then "
            "chring_add'\n",
            CHANGE, CHANGE + FLAP);
    /* Row 2: cold misses per window. */
    fprintf(f, "unset arrow 3\n");
    fprintf(f, join_mark, CHANGE + RAMP_WINDOWS, CHANGE + RAMP_WINDOWS);
    fprintf(f, "set ylabel 'misses per window'\n%sset key top right\n", cr);
    fprintf(f, "set title 'join: cold misses per window (misses above control-11 on the same "
               "requests), and misses at backend-11'\n"
               "plot 0 w l lc rgb '#555555' notitle, $D u 1:8 w lp ls 3 t '(a) cold misses', "
               "'' u 1:9 w lp ls 4 t '(b) cold misses', '' u 1:12 w l ls 3 dt 2 t '(a) misses "
               "at backend-11', '' u 1:13 w l ls 4 dt 2 t '(b) misses at backend-11'\n");
    fprintf(f,
            "unset arrow 1\nset arrow 3 from %d, graph 0 to %d, graph 1 nohead dt 2 lc rgb "
            "'#555555'\n",
            CHANGE + FLAP, CHANGE + FLAP);
    fprintf(f, "set title 'flap: cold misses per window (misses above control-10 on the same "
               "requests)'\n"
               "plot 0 w l lc rgb '#555555' notitle, $D u 1:10 w l ls 5 t '(c) down, then up', "
               "'' u 1:11 w p ls 6 t '(d) remove, then re-add'\n");
    /* Row 3: the changed backend's keys. */
    fprintf(f, "unset arrow 3\n");
    fprintf(f, join_mark, CHANGE + RAMP_WINDOWS, CHANGE + RAMP_WINDOWS);
    fprintf(f, "set ylabel '%%'\nset yrange [0:105]\nset key bottom right\n");
    fprintf(f, "set title \"join: requests for backend-11's keys (the keys it owns once it "
               "has joined); in (b) those it refuses\\ngo to their previous owner, whose cache "
               "still holds them\"\n"
               "plot $D u 1:14 w lp ls 3 t '(a) hit ratio', '' u 1:15 w lp ls 4 t '(b) hit ratio', "
               "'' u 1:16 w l ls 4 dt 2 t '(b) share backend-11 served', '' u 1:17 w l lw 1.5 dt 3 "
               "lc rgb 'black' t '(b) its admission scale x 100'\n");
    fprintf(f,
            "unset arrow 1\nset arrow 3 from %d, graph 0 to %d, graph 1 nohead dt 2 lc rgb "
            "'#555555'\n",
            CHANGE + FLAP, CHANGE + FLAP);
    fprintf(f, "set title \"flap: requests for backend-04's keys\"\n"
               "plot $D u 1:18 w l ls 5 t '(c) hit ratio', '' u 1:19 w l ls 5 dt 2 t '(c) share "
               "backend-04 served'\n");
    /* Row 4: the bound through the changes. */
    fprintf(f, "unset arrow 3\n");
    fprintf(f, join_mark, CHANGE + RAMP_WINDOWS, CHANGE + RAMP_WINDOWS);
    fprintf(f, "set ylabel 'requests in flight'\nset yrange [0:%u]\nset key bottom right\n",
            cap_hi + cap_hi / 3 + 2);
    fprintf(f, "set title \"join: backend-11's highest load per window and its capacity then "
               "(effective weights:\\nwhile it warms, ceil(c * (m + 1) * s * w / E) with E the "
               "sum of s * w)\"\n"
               "plot $D u 1:21 w l ls 3 dt 2 t '(a) capacity', '' u 1:20 w p ls 3 t '(a) highest "
               "load', '' u 1:23 w l ls 4 dt 2 t '(b) capacity', '' u 1:22 w p ls 4 t '(b) highest "
               "load'\n");
    fprintf(f,
            "unset arrow 1\nset arrow 2 from %d, graph 0 to %d, graph 1 nohead dt 2 lc rgb "
            "'#555555'\nset arrow 3 from %d, graph 0 to %d, graph 1 nohead dt 2 lc rgb "
            "'#555555'\n",
            CHANGE, CHANGE, CHANGE + FLAP, CHANGE + FLAP);
    fprintf(f, "set ylabel 'acquires per window'\nset yrange [-1:10]\nset key top right\n");
    fprintf(f, "set title 'saturated acquires per window (every member met looked full: "
               "chring_stats.saturated)'\n"
               "plot $D u 1:24 w lp ls 3 t '(a) join', '' u 1:25 w lp ls 4 t '(b) join, slow "
               "start', '' u 1:26 w l ls 5 t '(c) down, then up', '' u 1:27 w p ls 6 t '(d) "
               "remove, then re-add'\n");
    fprintf(f, "unset multiplot\n");
    if (fclose(f) != 0)
        demo_die(path, errno);
}

static void write_files(const cache_opts_t *o)
{
    char csv_path[4096], gp_path[4096], png_path[4096];
    write_csv(o, csv_path, sizeof csv_path);
    write_gp(o, gp_path, sizeof gp_path, png_path, sizeof png_path);
    printf("\nwrote %s and %s\n", csv_path, gp_path);
    if (!o->plot)
        return;
    if (strchr(gp_path, '\'') || system("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf("gnuplot not found on PATH: no picture (install gnuplot-nox, then run "
               "gnuplot %s)\n",
               gp_path);
        return;
    }
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "gnuplot '%s'", gp_path);
    if (system(cmd) == 0)
        printf("wrote %s\n", png_path);
    else
        printf("gnuplot failed: no picture (the script is %s)\n", gp_path);
}

/* The floor (docs/design.md §3, "The floor"): with few requests in flight the bound alone sends
 * keys past their owner (a capacity of ceil(c * (m + 1) / 10) is 1 at m = 7), and each such
 * request is a miss at a cache that does not hold the key.  The same stream with 8, 16, 32 and
 * SLOTS requests in flight, on 10 backends, the bound alone and with config.min_capacity = FLOOR:
 * the hit ratio and the share of acquires that spilled, over FLOOR_WINDOWS windows after the
 * warm-up. */
#define FLOOR 4
#define FLOOR_WINDOWS 10
static void floor_runs(const cache_opts_t *o)
{
    static const unsigned inflight[] = {8, 16, 32, SLOTS};
    printf("\n== the floor under the bound at low concurrency (config.min_capacity, 0.4): the same "
           "stream, 10 backends,\n   c = %.2f, %d windows after the warm-up\n"
           "  in flight   hit ratio: bound alone   min_capacity = %d     spills: bound alone   "
           "min_capacity = %d\n",
           BALANCE, FLOOR_WINDOWS, FLOOR, FLOOR);
    for (size_t i = 0; i < sizeof inflight / sizeof *inflight; i++) {
        double hit[2], spill[2];
        for (int f = 0; f < 2; f++) {
            static tier_run_t t;
            memset(&t, 0, sizeof t);
            chring_config_t cfg;
            chring_config_default(&cfg);
            cfg.balance = BALANCE;
            cfg.min_capacity = f ? FLOOR : 0;
            check(chring_new(&t.ring, &cfg), "chring_new");
            sync_members(t.ring, 10, -1);
            t.nslots = inflight[i];
            t.focus = FLAPPER;
            t.focus_owner = own10;
            t.other_owner = own9;
            warm_up(&t, o);
            window_stats_t ws;
            memset(&ws, 0, sizeof ws);
            chring_stats_t st0, st1;
            chring_stats(t.ring, &st0);
            uint64_t n = (uint64_t)FLOOR_WINDOWS * o->window;
            for (uint64_t k = 0; k < n; k++)
                route(&t, &ws);
            chring_stats(t.ring, &st1);
            hit[f] = 100 * hit_ratio(&ws);
            spill[f] = 100 * ratio(st1.spills - st0.spills, n);
            stop_ring(&t);
        }
        printf("  %9u   %20.1f%%   %17.1f%%   %17.1f%%   %17.1f%%\n", inflight[i], hit[0], hit[1],
               spill[0], spill[1]);
    }
    fflush(stdout);
}

void demo_cache_tier_run(const cache_opts_t *o)
{
    tier_init(o);
    double share = 0;
    for (unsigned k = 0; k < nkeys; k++)
        if (own10[k] == FLAPPER)
            share += prob[k];
    double joiner_share = 0;
    for (unsigned k = 0; k < nkeys; k++)
        if (own11[k] == JOINER)
            joiner_share += prob[k];
    printf("\n== cache tier: 10 backends, each an LRU cache of %u keys; a Zipf(%.2f) stream over "
           "%u keys (%.1f%% of\n   its requests for keys that fit in the 10 caches at once), %d "
           "requests in flight, routed with\n   chring_acquire/chring_release (c = %.2f) by one "
           "proxy thread, so that every run sees the same\n   requests; windows of %u requests "
           "after a warm-up of %" PRIu64 " requests\n",
           o->capacity, o->zipf, nkeys, 100 * top_share(10u * o->capacity), SLOTS, BALANCE,
           o->window, warm_requests(o));
    printf("  (a) backend-11 joins at window %d (it owns %.1f%% of the requests once it has "
           "joined)\n  (b) the same join with config.slow_start_ms = %u: it joins at admission "
           "scale %.2f, ramped to 1\n      over %d windows (the ramp set along the simulated "
           "clock, a window being %u ms)\n",
           CHANGE, 100 * joiner_share, RAMP_WINDOWS * o->window_ms, CHRING_DEFAULT_SLOW_START_FROM,
           RAMP_WINDOWS, o->window_ms);
    printf("  (c) backend-04 (%.1f%% of the requests) set down at window %d and up at window "
           "%d\n  (d) the same flap done as chring_remove and chring_add of the same name\n"
           "  A flapping backend keeps its cache (it did not restart: the proxy stopped sending to "
           "it).\n",
           100 * share, CHANGE, CHANGE + FLAP);
    fflush(stdout);
    static warm_t warm;
    warm_save(&warm, o);
    for (int r = 0; r < NRUNS; r++)
        run_tier(r, o, &warm);
    for (int i = 0; i < BACKENDS; i++)
        lru_free(&warm.caches[i]);
    print_windows(o);
    print_summary();
    floor_runs(o);
    write_files(o);
    tier_free();
}
