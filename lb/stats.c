/* chring-lb: GET /_chring/stats, the ring's, every member's and the balancer's statistics as
 * JSON.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "backend.h"
#include "config.h"
#include "conn.h"
#include "etcd.h"
#include "health.h"
#include "lb.h"
#include "limits.h"
#include "log.h"
#include "membership.h"
#include "writer.h"
#include "proxy.h"
#include "status.h"
#include "text.h"
#include "worker.h"

#include <event2/buffer.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Names come from outside (the members file, etcd): any bytes, written as valid JSON with the
 * invisible and direction-changing characters escaped (text.h). */
static void json_str(struct evbuffer *b, const char *s)
{
    char buf[6 * CHRING_NAME_MAX + 16];
    size_t n = strlen(s);
    if (n > CHRING_NAME_MAX)
        n = CHRING_NAME_MAX;
    size_t len = lb_text_json(buf, sizeof buf, s, n);
    evbuffer_add(b, buf, len);
}

/* The snapshot's digest (docs/lb.md, "Statistics"), O(points): 0.8 s at 16 million points, so
 * a large ring's is never computed on the thread that answers.  Up to DIGEST_INLINE points it
 * is computed by the request (a few milliseconds) and kept per snapshot version; above, by the
 * digest thread, which a request (or a publish, once a digest was asked for: lb_stats_kick)
 * wakes, and which computes the digest of whatever snapshot is current when it runs (a burst of
 * publishes costs one pass, of the last).  Until it is done the answer says "digest":null. */
#define DIGEST_INLINE ((size_t)1 << 20)
/* The digest thread starts a pass only once the ring has not changed for this long: a burst of
 * publishes costs one pass, and a pass (which holds its snapshot, so the replaced snapshot's
 * memory stays until it ends) seldom overlaps the next publish of a burst. */
#define DIGEST_QUIET_MS 300

static pthread_mutex_t dg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dg_cond; /* CLOCK_MONOTONIC: set up with the thread */
static uint64_t dg_version = UINT64_MAX, dg_digest; /* the last digest computed, its version */
static bool dg_want, dg_quit, dg_running, dg_asked; /* under dg_lock */
static struct timespec dg_kicked;                   /* the last publish (CLOCK_MONOTONIC) */
static pthread_t dg_thread;

static void *digest_main(void *arg)
{
    (void)arg;
    /* The lowest priority (Linux: a thread's own nice value): the writer thread publishing a
     * change and the main thread come first on a busy machine. */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19) != 0)
        lb_log("stats: the digest thread keeps its priority");
    pthread_mutex_lock(&dg_lock);
    for (;;) {
        while (!dg_want && !dg_quit)
            pthread_cond_wait(&dg_cond, &dg_lock);
        /* quiet: no publish for DIGEST_QUIET_MS */
        for (;;) {
            struct timespec until = dg_kicked;
            until.tv_nsec += DIGEST_QUIET_MS * 1000000L;
            until.tv_sec += until.tv_nsec / 1000000000L;
            until.tv_nsec %= 1000000000L;
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (dg_quit || now.tv_sec > until.tv_sec ||
                (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec))
                break;
            pthread_cond_timedwait(&dg_cond, &dg_lock, &until);
        }
        if (dg_quit)
            break;
        dg_want = false;
        pthread_mutex_unlock(&dg_lock);
        const chring_snap_t *s = chring_snap_enter(lb_ring);
        uint64_t v = chring_snap_version(s), d = chring_snap_digest(s);
        chring_snap_exit(lb_ring, s);
        pthread_mutex_lock(&dg_lock);
        if (dg_version == UINT64_MAX || v > dg_version) {
            dg_version = v;
            dg_digest = d;
        }
    }
    pthread_mutex_unlock(&dg_lock);
    return NULL;
}

/* Wakes the digest thread (started on first use).  Under dg_lock. */
static void digest_wake(void)
{
    if (!dg_running && !dg_quit) {
        pthread_condattr_t a;
        if (pthread_condattr_init(&a) != 0 ||
            pthread_condattr_setclock(&a, CLOCK_MONOTONIC) != 0 ||
            pthread_cond_init(&dg_cond, &a) != 0) /* timed waits on CLOCK_MONOTONIC */
            return;
        pthread_condattr_destroy(&a);
        if (pthread_create(&dg_thread, NULL, digest_main, NULL) != 0)
            return;
        dg_running = true;
    }
    dg_want = true;
    pthread_cond_signal(&dg_cond);
}

void lb_stats_kick(void)
{
    pthread_mutex_lock(&dg_lock);
    clock_gettime(CLOCK_MONOTONIC, &dg_kicked);
    if (dg_asked) {
        const chring_snap_t *s = chring_snap_enter(lb_ring);
        bool big = chring_snap_points(s) > DIGEST_INLINE;
        chring_snap_exit(lb_ring, s);
        if (big)
            digest_wake();
    }
    pthread_mutex_unlock(&dg_lock);
}

bool lb_stats_stop(void)
{
    pthread_mutex_lock(&dg_lock);
    dg_quit = true;
    bool running = dg_running;
    pthread_cond_signal(&dg_cond);
    pthread_mutex_unlock(&dg_lock);
    if (!running)
        return true;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until); /* pthread_timedjoin_np's clock */
    until.tv_nsec += 100 * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    if (pthread_timedjoin_np(dg_thread, NULL, &until) != 0) {
        /* In a pass: it ends with the process, never joined; detached, so that it is not a
         * leaked thread (ThreadSanitizer reports one at exit, docs/sanitizers.md). */
        pthread_detach(dg_thread);
        return false;
    }
    pthread_mutex_lock(&dg_lock);
    dg_running = false;
    pthread_mutex_unlock(&dg_lock);
    return true;
}

/* s's digest into *out; false while the digest thread computes it. */
static bool digest_of(const chring_snap_t *s, uint64_t *out)
{
    uint64_t v = chring_snap_version(s);
    pthread_mutex_lock(&dg_lock);
    dg_asked = true;
    bool hit = v == dg_version;
    *out = dg_digest;
    bool big = !hit && chring_snap_points(s) > DIGEST_INLINE;
    if (big)
        digest_wake();
    pthread_mutex_unlock(&dg_lock);
    if (hit || big)
        return hit;
    uint64_t d = chring_snap_digest(s); /* outside the lock: two computing it at once agree */
    pthread_mutex_lock(&dg_lock);
    if (dg_version == UINT64_MAX || v > dg_version) {
        dg_version = v;
        dg_digest = d;
    }
    pthread_mutex_unlock(&dg_lock);
    *out = d;
    return true;
}

static void add_ring(struct evbuffer *b, const chring_snap_t *s, const chring_stats_t *st)
{
    const char *pname = chring_profile_name(chring_snap_profile(s));
    evbuffer_add_printf(b, "{\"ring\":{\"profile\":");
    json_str(b, pname ? pname : "?");
    evbuffer_add_printf(b,
                        ",\"balance\":%.17g,\"version\":%llu,\"publishes\":%llu,\"members\":%llu,"
                        "\"points\":%llu,\"leases\":%llu,\"acquires\":%llu,\"spills\":%llu,"
                        "\"saturated\":%llu,\"down\":%llu,\"retries\":%llu,"
                        "\"digest\":",
                        lb_cfg.balance, (unsigned long long)st->version,
                        (unsigned long long)st->publishes, (unsigned long long)st->members,
                        (unsigned long long)st->points, (unsigned long long)st->leases,
                        (unsigned long long)st->acquires, (unsigned long long)st->spills,
                        (unsigned long long)st->saturated, (unsigned long long)st->down,
                        (unsigned long long)st->retries);
    uint64_t d;
    if (digest_of(s, &d))
        evbuffer_add_printf(b, "\"%016llx\",", (unsigned long long)d);
    else
        evbuffer_add(b, "null,", 5);
}

/* Member index by pointer: an open-addressing table built once per request, O(members). */
struct member_index {
    const chring_member_t **key;
    size_t *idx;
    size_t cap;
};

static size_t ptr_hash(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    return (size_t)(chring_mix64(x) & (cap - 1));
}

/* Indexes the members off to off+n of ring order (member off+i at index i). */
static int index_build(struct member_index *t, const chring_snap_t *s, size_t off, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    t->key = calloc(cap, sizeof *t->key);
    t->idx = calloc(cap, sizeof *t->idx);
    t->cap = cap;
    if (!t->key || !t->idx)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const chring_member_t *m = chring_snap_member(s, off + i);
        size_t j = ptr_hash(m, cap);
        while (t->key[j])
            j = (j + 1) & (cap - 1);
        t->key[j] = m;
        t->idx[j] = i;
    }
    return 0;
}

static size_t index_of(const struct member_index *t, const chring_member_t *m)
{
    for (size_t j = ptr_hash(m, t->cap);; j = (j + 1) & (t->cap - 1))
        if (t->key[j] == m || !t->key[j])
            return t->key[j] ? t->idx[j] : SIZE_MAX;
}

static void index_free(struct member_index *t)
{
    free(t->key);
    free(t->idx);
}

/* Every member's arc share in one pass over the points (chring_member_share per member would
 * cost O(members x points)): point i owns the arc (pos[i-1], pos[i]], point 0 the wrap. */
static void shares(const chring_snap_t *s, const struct member_index *t, double *share)
{
    size_t np = chring_snap_points(s);
    unsigned bits = chring_snap_hash_bits(s);
    uint64_t mask = bits >= 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
    double span = bits >= 64 ? 18446744073709551616.0 : (double)((uint64_t)1 << bits);
    if (np == 0)
        return;
    uint64_t first, prev;
    chring_snap_point(s, np - 1, &prev, NULL);
    chring_snap_point(s, 0, &first, NULL);
    for (size_t i = 0; i < np; i++) {
        uint64_t pos;
        const chring_member_t *m;
        chring_snap_point(s, i, &pos, &m);
        size_t k = index_of(t, m);
        if (k != SIZE_MAX) {
            if (i == 0 && first == prev) /* every point at one position: the whole circle */
                share[k] += 1.0;
            else
                share[k] += (double)((pos - prev) & mask) / span;
        }
        prev = pos;
    }
}

/* The ring drawn by the status page: the owner of LB_ARCS evenly spaced positions by the points
 * alone (a member that is down keeps its arcs, drawn as down), as runs [first position, member
 * index], O(LB_ARCS log points). */
#define LB_ARCS 720

/* The member of the first point at or after h, clockwise (the point owning h). */
static const chring_member_t *point_owner(const chring_snap_t *s, size_t np, uint64_t h)
{
    size_t lo = 0, hi = np;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t pos;
        chring_snap_point(s, mid, &pos, NULL);
        if (pos < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    const chring_member_t *m = NULL;
    chring_snap_point(s, lo == np ? 0 : lo, NULL, &m);
    return m;
}

static void add_arcs(struct evbuffer *b, const chring_snap_t *s, const struct member_index *t)
{
    unsigned bits = chring_snap_hash_bits(s);
    size_t np = chring_snap_points(s);
    evbuffer_add_printf(b, "\"arcs_of\":%d,\"arcs\":[", LB_ARCS);
    size_t last = SIZE_MAX;
    bool first = true;
    for (unsigned i = 0; i < LB_ARCS && np > 0; i++) {
        /* position i/LB_ARCS of the circle, in the profile's width */
        uint64_t h = bits >= 64 ? (uint64_t)((double)i / LB_ARCS * 18446744073709551615.0)
                                : (uint64_t)i * (((uint64_t)1 << bits) / LB_ARCS);
        size_t k = index_of(t, point_owner(s, np, h));
        if (k == last)
            continue;
        evbuffer_add_printf(b, "%s[%u,%zd]", first ? "" : ",", i,
                            k == SIZE_MAX ? (ssize_t)-1 : (ssize_t)k);
        last = k;
        first = false;
    }
    evbuffer_add(b, "],", 2);
}

static void add_member(struct evbuffer *b, const chring_snap_t *s, const chring_member_t *m,
                       double share, bool first)
{
    chring_member_stats_t ms;
    chring_member_stats(m, &ms);
    struct backend *be = chring_member_udata(m);
    evbuffer_add_printf(b, "%s\n {\"name\":", first ? "" : ",");
    json_str(b, chring_member_name(m));
    bool down = chring_member_is_down(m) > 0;
    evbuffer_add_printf(b,
                        ",\"weight\":%u,\"load\":%llu,\"capacity\":%llu,\"acquires\":%llu,"
                        "\"primary\":%llu,\"spilled_in\":%llu,\"share\":%.6f,\"scale\":%.4f,"
                        "\"ring_down\":%s",
                        chring_snap_weight(s, m), (unsigned long long)ms.load,
                        (unsigned long long)chring_member_capacity(lb_ring, s, m),
                        (unsigned long long)ms.acquires, (unsigned long long)ms.primary,
                        (unsigned long long)ms.spilled_in, share, chring_member_scale(m),
                        down ? "true" : "false");
    if (be) {
        evbuffer_add_printf(
            b,
            ",\"requests\":%llu,\"failures\":%llu,\"retries_in\":%llu,"
            "\"bytes_out\":%llu,\"downs\":%llu,\"slow\":%llu,\"draining\":%s",
            (unsigned long long)GET(be->requests), (unsigned long long)GET(be->failures),
            (unsigned long long)GET(be->retries_in), (unsigned long long)GET(be->bytes_out),
            (unsigned long long)GET(be->downs), (unsigned long long)GET(be->slow),
            GET(be->drain_until_ms) ? "true" : "false");
    }
    /* The load the engine reported (loadmetrics.c, chring_report_load): while it counts, its
     * value, its age and what the bound counts for the member. */
    if (ms.report_live)
        evbuffer_add_printf(b, ",\"reported\":%llu,\"report_age_ms\":%llu",
                            (unsigned long long)ms.reported, (unsigned long long)ms.report_age_ms);
    else
        evbuffer_add_printf(b, ",\"reported\":null,\"report_age_ms\":null");
    evbuffer_add_printf(b, ",\"counted\":%llu", (unsigned long long)ms.counted);
    evbuffer_add_printf(b, ",\"down\":%s}", down ? "true" : "false");
}

static void add_balancer(struct evbuffer *b)
{
    uint64_t t[10], o[5];
    lb_workers_sum(t, o);
    evbuffer_add_printf(
        b,
        "],\n\"balancer\":{\"threads\":%u,\"requests\":%llu,\"proxied\":%llu,"
        "\"retries\":%llu,\"bad_gateway\":%llu,\"aborted\":%llu,\"client_gone\":%llu,"
        "\"no_backend\":%llu,\"stats\":%llu,\"active\":%llu,\"reloads\":%llu,"
        "\"reload_errors\":%llu,\"reload_resolving\":%llu,\"backpressure_pauses\":%llu,"
        "\"health_panics\":%llu,\"publishing\":%s,"
        "\"outcomes\":{\"owner\":%llu,\"spilled\":%llu,\"saturated\":%llu,"
        "\"owner_down\":%llu}}",
        lb_cfg.threads, (unsigned long long)t[0], (unsigned long long)t[1],
        (unsigned long long)t[2], (unsigned long long)t[3], (unsigned long long)t[4],
        (unsigned long long)t[5], (unsigned long long)t[6], (unsigned long long)t[7],
        (unsigned long long)t[8], (unsigned long long)GET(lb_reloads),
        (unsigned long long)GET(lb_reload_errors), (unsigned long long)GET(lb_reload_resolving),
        (unsigned long long)t[9], (unsigned long long)GET(lb_health_panics),
        atomic_load_explicit(&lb_ring_writing, memory_order_relaxed) ? "true" : "false",
        (unsigned long long)o[CHRING_OUTCOME_OWNER],
        (unsigned long long)o[CHRING_OUTCOME_SPILLED],
        (unsigned long long)o[CHRING_OUTCOME_SATURATED],
        (unsigned long long)o[CHRING_OUTCOME_OWNER_DOWN]);
    lb_etcd_stats(b);
    struct lb_limit_stats l;
    lb_limits_get(&l);
    evbuffer_add_printf(b,
                        ",\n\"limits\":{\"conns\":%llu,\"max_conns\":%u,\"parked\":%llu,"
                        "\"conns_parked\":%llu,"
                        "\"accept_pauses\":%llu,\"accept_errors\":%llu,\"accept_backoffs\":%llu,"
                        "\"max_requests\":%u,\"requests_refused\":%llu,\"body_bytes\":%llu,"
                        "\"max_body_total\":%llu,\"body_refused\":%llu,\"slow_clients\":%llu,"
                        "\"stats_refused\":%llu}}\n",
                        (unsigned long long)l.conns, lb_cfg.max_conns,
                        (unsigned long long)l.parked, (unsigned long long)l.conns_parked,
                        (unsigned long long)l.accept_pauses,
                        (unsigned long long)l.accept_errors, (unsigned long long)l.accept_backoffs,
                        lb_cfg.max_requests, (unsigned long long)l.requests_refused,
                        (unsigned long long)l.body_bytes, (unsigned long long)lb_cfg.max_body_total,
                        (unsigned long long)l.body_refused, (unsigned long long)l.slow_clients,
                        (unsigned long long)GET(lb_stats_refused));
}

/* A decimal number of at most 18 digits (no sign, no blank) ending at one of stops. */
static const char *parse_count(const char *p, const char *stops, size_t *out)
{
    size_t v = 0, k = 0;
    for (; p[k] >= '0' && p[k] <= '9'; k++) {
        if (k == 18)
            return NULL;
        v = v * 10 + (size_t)(p[k] - '0');
    }
    if (k == 0 || !strchr(stops, p[k]))
        return NULL;
    *out = v;
    return p + k;
}

int lb_stats_members_param(const char *query, size_t *off, size_t *count)
{
    *off = 0;
    *count = SIZE_MAX;
    for (const char *p = query; p && *p;) {
        const char *end = strchr(p, '&');
        if (strncmp(p, "members=", 8) == 0) {
            const char *v = p + 8;
            size_t a, n;
            const char *e = parse_count(v, ",&", &a);
            if (!e)
                return -1;
            if (*e != ',') {
                if (a != 0)
                    return -1;
                *count = 0;
            } else if (!parse_count(e + 1, "&", &n)) {
                return -1;
            } else {
                *off = a;
                *count = n;
            }
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

void lb_stats_serve(struct worker *w, struct lb_req *req)
{
    enum evhttp_cmd_type cmd = req->cmd;
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        lb_send_text(req, 405, "Method Not Allowed", "GET only");
        return;
    }
    size_t off, count;
    if (lb_stats_members_param(req->query, &off, &count) < 0) {
        lb_send_text(req, 400, "Bad Request",
                     "members=: 0, or OFFSET,COUNT (decimal numbers) for one page of members");
        return;
    }
    if (w)
        ADD(w->stats_served, 1);
    else
        ADD(lb_workers[0].stats_served, 1);
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        lb_send_text(req, 500, "Internal Server Error", "out of memory");
        return;
    }
    chring_stats_t st;
    chring_stats(lb_ring, &st);
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    size_t total = chring_snap_len(s);
    bool whole = off == 0 && count >= total; /* the status page's document: with the arcs */
    if (off > total)
        off = total;
    size_t n = count < total - off ? count : total - off;
    struct member_index t = {0};
    double *share = calloc(n + 1, sizeof *share);
    if (!share || index_build(&t, s, off, n) < 0) {
        chring_snap_exit(lb_ring, s);
        if (share)
            index_free(&t);
        free(share);
        evbuffer_free(b);
        lb_send_text(req, 500, "Internal Server Error", "out of memory");
        return;
    }
    if (n > 0)
        shares(s, &t, share); /* O(points): not for the summary */
    add_ring(b, s, &st);
    if (whole)
        add_arcs(b, s, &t);
    evbuffer_add_printf(b,
                        "\"hash_bits\":%u},\n\"members_total\":%zu,\"members_offset\":%zu,"
                        "\"members\":[",
                        chring_snap_hash_bits(s), total, off);
    for (size_t i = 0; i < n; i++)
        add_member(b, s, chring_snap_member(s, off + i), share[i], i == 0);
    chring_snap_exit(lb_ring, s);
    index_free(&t);
    free(share);
    add_balancer(b);
    struct evkeyvalq *oh = req->out;
    evhttp_add_header(oh, "Content-Type", "application/json");
    evhttp_add_header(oh, "Cache-Control", "no-store");
    lb_req_reply(req, 200, "OK", b);
    evbuffer_free(b);
}
