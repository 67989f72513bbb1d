/* chring-lb: the membership from etcd (--etcd, --etcd-prefix), over etcd's v3 JSON gateway.
 *
 * SPDX-License-Identifier: MIT
 *
 * One key per backend: <prefix>HOST:PORT, its value the weight (empty: 1).  The feed runs on the
 * main thread's event base with libevent's HTTP client, so it never blocks a worker:
 *
 *   range    POST /v3/kv/range {key: prefix, range_end: prefix + 1}: every key and the store's
 *            revision R; the whole set is applied with one chring_sync (lb_membership_set).
 *   watch    POST /v3/watch {create_request: {key, range_end, start_revision: R + 1}}: a stream
 *            of JSON objects, one per line; each batch of events is applied to the set and the
 *            set with one chring_sync.
 *
 * Failures.  etcd unreachable at start: the starting list (--backend, --members) is served and
 * the range is tried again with a backoff (100 ms doubling to 2 s).  A connection lost (the
 * stream ended, an error, WATCH_IDLE_S without a byte): the last membership stays, then range
 * and watch again with the same backoff.  A watch cancelled by etcd (its start revision was
 * compacted: `compact_revision`): range again at once.  A key that is not HOST:PORT or a value
 * that is not a weight (1..10000) is logged and skipped: an existing member keeps its weight.
 * Members that join or leave through etcd slow-start and drain like any others (health.c).
 *
 * Every connection is freed from the step event, never from inside its own callbacks.
 */
#define _GNU_SOURCE
#include "json.h"
#include "lb.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ETCD_BACKOFF_MIN_MS 100
#define ETCD_BACKOFF_MAX_MS 2000
#define ETCD_RANGE_TIMEOUT_S 5
#define ETCD_WATCH_IDLE_S 60             /* an idle watch is renewed (range, watch) this often */
#define ETCD_LINE_MAX ((size_t)64 << 20) /* one watch message */

enum etcd_state {
    ETCD_OFF,
    ETCD_CONNECTING, /* a range is in flight */
    ETCD_WATCHING,   /* the watch was created */
    ETCD_RETRYING    /* waiting out a backoff */
};
static const char *const state_names[] = {"off", "connecting", "watching", "retrying"};

enum etcd_action {
    ACT_RANGE,
    ACT_WATCH
};

static struct event_base *base;
static struct event *step_ev;
static struct evhttp_connection *conn;
static enum etcd_action next_action;
static bool watch_dead; /* the current watch is being replaced: ignore what it still sends */
static int backoff_ms = ETCD_BACKOFF_MIN_MS;
static char host[256], hosthdr[300];
static uint16_t port;
static char *key_b64, *end_b64;
static size_t prefix_len;
static lb_entries_t set; /* the membership etcd holds now (main thread) */
static struct evbuffer *wbuf;
static uint64_t watch_from; /* the watch's start revision */

/* For the stats (any thread). */
static _Atomic int st_state;
static _Atomic bool st_active;
static _Atomic uint64_t st_revision, st_members, st_ranges, st_batches, st_events, st_bad,
    st_errors, st_compacted;

bool lb_etcd_active(void)
{
    return atomic_load_explicit(&st_active, memory_order_acquire);
}

/* ------------------------------------------------------------------------------------------ */
/* base64 (RFC 4648, with padding), as etcd's gateway writes bytes                             */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const unsigned char *s, size_t n)
{
    char *o = malloc((n + 2) / 3 * 4 + 1), *p = o;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        *p++ = b64[v >> 18 & 63];
        *p++ = b64[v >> 12 & 63];
        *p++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? b64[v & 63] : '=';
    }
    *p = '\0';
    return o;
}

/* Decodes s[0..n) into a NUL-terminated string (*out, malloc'ed; *outlen bytes).  Returns
 * false for malformed input or out of memory. */
static bool b64_decode(const char *s, size_t n, char **out, size_t *outlen)
{
    if (n % 4)
        return false;
    char *o = malloc(n / 4 * 3 + 1);
    if (!o)
        return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        unsigned v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            const char *c = s[i + j] == '=' ? NULL : memchr(b64, s[i + j], 64);
            if (s[i + j] == '=' && i + 4 == n && j >= 2) {
                pad++;
            } else if (!c || pad || !s[i + j]) {
                free(o);
                return false;
            }
            v = v << 6 | (c ? (unsigned)(c - b64) : 0);
        }
        o[k++] = (char)(v >> 16);
        if (pad < 2)
            o[k++] = (char)(v >> 8 & 0xff);
        if (pad < 1)
            o[k++] = (char)(v & 0xff);
    }
    o[k] = '\0';
    *out = o;
    *outlen = k;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* the set                                                                                     */

static void set_delete(lb_entries_t *es, const char *name)
{
    for (size_t i = 0; i < es->n; i++)
        if (strcmp(es->v[i].name, name) == 0) {
            free(es->v[i].name);
            es->v[i] = es->v[--es->n];
            return;
        }
}

/* One key/value of etcd (still base64) as an entry of es: a PUT.  Returns 0, or -1 when it is
 * not an entry (logged, counted, es unchanged). */
static int set_put(lb_entries_t *es, const struct lb_json *k, const struct lb_json *v)
{
    char *key = NULL, *val = NULL, *tok = NULL;
    size_t klen, vlen = 0;
    int rc = -1;
    const char *err = "not base64";
    if (!k || k->type != LBJ_STRING || !b64_decode(k->text, k->len, &key, &klen))
        goto out;
    if (v && (v->type != LBJ_STRING || !b64_decode(v->text, v->len, &val, &vlen)))
        goto out;
    err = "not under the prefix";
    if (klen <= prefix_len || strncmp(key, lb_cfg.etcd_prefix, prefix_len) != 0)
        goto out;
    const char *name = key + prefix_len;
    err = "name with a NUL, '=', white space or a control byte";
    if (strlen(name) != klen - prefix_len || strpbrk(name, "= \t\r\n"))
        goto out;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            goto out;
    err = "value is not a weight (empty, or an integer in 1..10000)";
    if (val && (strlen(val) != vlen || (vlen && strspn(val, "0123456789") != vlen)))
        goto out;
    if ((vlen ? asprintf(&tok, "%s=%s", name, val) : asprintf(&tok, "%s", name)) < 0) {
        tok = NULL;
        err = "out of memory";
        goto out;
    }
    rc = lb_entries_put(es, tok, &err);
out:
    if (rc < 0) {
        ADD(st_bad, 1);
        lb_log("etcd: key '%s' value '%s': %s; skipped", key ? key : "?", val ? val : "", err);
    }
    free(tok);
    free(key);
    free(val);
    return rc;
}

static void apply(const char *what, uint64_t rev)
{
    char why[96];
    snprintf(why, sizeof why, "etcd %s at revision %llu", what, (unsigned long long)rev);
    if (lb_membership_set(&set, why, true) < 0)
        lb_log("etcd: membership not applied; the next change applies the whole set");
    atomic_store_explicit(&st_revision, rev, memory_order_relaxed);
    atomic_store_explicit(&st_members, set.n, memory_order_relaxed);
    atomic_store_explicit(&st_active, true, memory_order_release);
}

/* ------------------------------------------------------------------------------------------ */
/* requests                                                                                    */

static void set_state(enum etcd_state s)
{
    atomic_store_explicit(&st_state, (int)s, memory_order_relaxed);
}

static void schedule(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_add(step_ev, &tv);
}

/* The feed failed (why): keep the membership, range and watch again after the backoff. */
static void fail(const char *why)
{
    ADD(st_errors, 1);
    lb_log("etcd %s: %s; keeping the last membership, again in %d ms", lb_cfg.etcd_url, why,
           backoff_ms);
    set_state(ETCD_RETRYING);
    watch_dead = true;
    next_action = ACT_RANGE;
    schedule(backoff_ms);
    backoff_ms = backoff_ms * 2 > ETCD_BACKOFF_MAX_MS ? ETCD_BACKOFF_MAX_MS : backoff_ms * 2;
}

/* A JSON body for a request on conn to path, answered to cb (chunks to chunk_cb). */
static int post(const char *path, const char *body, void (*cb)(struct evhttp_request *, void *),
                void (*chunk_cb)(struct evhttp_request *, void *))
{
    struct evhttp_request *req = evhttp_request_new(cb, NULL);
    if (!req)
        return -1;
    if (chunk_cb)
        evhttp_request_set_chunked_cb(req, chunk_cb);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Host", hosthdr);
    evhttp_add_header(h, "Content-Type", "application/json");
    evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
    return evhttp_make_request(conn, req, EVHTTP_REQ_POST, path); /* frees req on failure */
}

static void on_range(struct evhttp_request *req, void *arg)
{
    (void)arg;
    if (!req || evhttp_request_get_response_code(req) != 200) {
        char why[64];
        snprintf(why, sizeof why, "range: %s %d", req ? "answered" : "no answer",
                 req ? evhttp_request_get_response_code(req) : 0);
        fail(why);
        return;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *text = (const char *)evbuffer_pullup(in, -1);
    struct lb_json *j = text ? lb_json_parse(text, len) : NULL;
    uint64_t rev;
    if (!j || !lb_json_u64(lb_json_get(lb_json_get(j, "header"), "revision"), &rev)) {
        lb_json_free(j);
        fail("range: an answer without a revision");
        return;
    }
    lb_entries_t fresh = {0};
    const struct lb_json *kvs = lb_json_get(j, "kvs");
    for (const struct lb_json *kv = kvs && kvs->type == LBJ_ARRAY ? kvs->child : NULL; kv;
         kv = kv->next)
        set_put(&fresh, lb_json_get(kv, "key"), lb_json_get(kv, "value"));
    lb_json_free(j);
    lb_entries_free(&set);
    set = fresh;
    ADD(st_ranges, 1);
    if (set.n == 0)
        lb_log("etcd: no key under %s: the ring is empty", lb_cfg.etcd_prefix);
    apply("range", rev);
    backoff_ms = ETCD_BACKOFF_MIN_MS;
    watch_from = rev + 1;
    next_action = ACT_WATCH;
    schedule(0);
}

/* One watch message.  Returns false when the watch must be replaced (a range follows). */
static bool watch_message(const char *line, size_t len)
{
    struct lb_json *j = lb_json_parse(line, len);
    const struct lb_json *r = lb_json_get(j, "result");
    if (!r) {
        lb_json_free(j);
        fail(lb_json_get(j, "error") ? "watch: etcd answered an error" : "watch: not a result");
        return false;
    }
    uint64_t rev = 0, compact = 0;
    lb_json_u64(lb_json_get(lb_json_get(r, "header"), "revision"), &rev);
    const struct lb_json *cr = lb_json_get(r, "compact_revision");
    const struct lb_json *canceled = lb_json_get(r, "canceled");
    if ((lb_json_u64(cr, &compact) && compact > 0) ||
        (canceled && canceled->type == LBJ_BOOL && canceled->truth)) {
        ADD(st_compacted, 1);
        lb_log("etcd: watch from revision %llu cancelled (compacted up to %llu): range again",
               (unsigned long long)watch_from, (unsigned long long)compact);
        lb_json_free(j);
        watch_dead = true;
        set_state(ETCD_CONNECTING);
        next_action = ACT_RANGE;
        schedule(0);
        return false;
    }
    const struct lb_json *created = lb_json_get(r, "created");
    if (created && created->type == LBJ_BOOL && created->truth) {
        set_state(ETCD_WATCHING);
        lb_log("etcd: watching %s from revision %llu", lb_cfg.etcd_prefix,
               (unsigned long long)watch_from);
    }
    const struct lb_json *evs = lb_json_get(r, "events");
    size_t n = 0;
    for (const struct lb_json *e = evs && evs->type == LBJ_ARRAY ? evs->child : NULL; e;
         e = e->next, n++) {
        const struct lb_json *kv = lb_json_get(e, "kv"), *type = lb_json_get(e, "type");
        bool del = type && type->type == LBJ_STRING && strcmp(type->text, "DELETE") == 0;
        if (!del) {
            set_put(&set, lb_json_get(kv, "key"), lb_json_get(kv, "value"));
            continue;
        }
        const struct lb_json *k = lb_json_get(kv, "key");
        char *key;
        size_t klen;
        if (k && k->type == LBJ_STRING && b64_decode(k->text, k->len, &key, &klen)) {
            if (klen > prefix_len && strncmp(key, lb_cfg.etcd_prefix, prefix_len) == 0)
                set_delete(&set, key + prefix_len);
            free(key);
        }
    }
    lb_json_free(j);
    if (n) {
        ADD(st_batches, 1);
        ADD(st_events, n);
        apply("watch batch", rev);
    } else if (rev) {
        atomic_store_explicit(&st_revision, rev, memory_order_relaxed);
    }
    return true;
}

static void on_watch_chunk(struct evhttp_request *req, void *arg)
{
    (void)arg;
    if (watch_dead)
        return;
    evbuffer_add_buffer(wbuf, evhttp_request_get_input_buffer(req));
    for (;;) {
        struct evbuffer_ptr eol = evbuffer_search_eol(wbuf, NULL, NULL, EVBUFFER_EOL_LF);
        if (eol.pos < 0) {
            if (evbuffer_get_length(wbuf) > ETCD_LINE_MAX)
                fail("watch: a message above 64 MiB");
            return;
        }
        size_t len = (size_t)eol.pos;
        const char *line = (const char *)evbuffer_pullup(wbuf, (ssize_t)len + 1);
        bool go_on = line && (len == 0 || watch_message(line, len));
        evbuffer_drain(wbuf, len + 1);
        if (!go_on || watch_dead)
            return;
    }
}

static void on_watch_done(struct evhttp_request *req, void *arg)
{
    (void)arg;
    if (watch_dead)
        return;
    char why[64];
    snprintf(why, sizeof why, "watch ended (%s %d)", req ? "status" : "connection lost",
             req ? evhttp_request_get_response_code(req) : 0);
    fail(why);
}

/* The step event: frees the previous connection and starts the next request on a new one. */
static void on_step(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (conn)
        evhttp_connection_free(conn); /* pending requests go with it, without callbacks */
    conn = evhttp_connection_base_new(base, NULL, host, port);
    if (!conn) {
        fail("cannot create a connection");
        return;
    }
    evbuffer_drain(wbuf, evbuffer_get_length(wbuf));
    watch_dead = false;
    char body[1024];
    int rc;
    if (next_action == ACT_RANGE) {
        set_state(ETCD_CONNECTING);
        evhttp_connection_set_timeout(conn, ETCD_RANGE_TIMEOUT_S);
        snprintf(body, sizeof body, "{\"key\":\"%s\",\"range_end\":\"%s\"}", key_b64, end_b64);
        rc = post("/v3/kv/range", body, on_range, NULL);
    } else {
        evhttp_connection_set_timeout(conn, ETCD_WATCH_IDLE_S);
        snprintf(body, sizeof body,
                 "{\"create_request\":{\"key\":\"%s\",\"range_end\":\"%s\","
                 "\"start_revision\":\"%llu\"}}",
                 key_b64, end_b64, (unsigned long long)watch_from);
        rc = post("/v3/watch", body, on_watch_done, on_watch_chunk);
    }
    if (rc < 0)
        fail("cannot send the request");
}

int lb_etcd_start(struct event_base *b)
{
    if (!lb_cfg.etcd_url)
        return 0;
    base = b;
    if (lb_split_hostport(lb_cfg.etcd_url + 7, host, sizeof host, &port) < 0)
        return -1;
    snprintf(hosthdr, sizeof hosthdr, "%s", lb_cfg.etcd_url + 7);
    /* the range [prefix, prefix with its last byte + 1): every key that starts with prefix */
    prefix_len = strlen(lb_cfg.etcd_prefix);
    unsigned char end[256];
    memcpy(end, lb_cfg.etcd_prefix, prefix_len);
    size_t elen = prefix_len;
    while (elen > 0 && end[elen - 1] == 0xff)
        elen--;
    if (elen == 0) {
        lb_log("--etcd-prefix: cannot be all 0xff bytes");
        return -1;
    }
    end[elen - 1]++;
    key_b64 = b64_encode((const unsigned char *)lb_cfg.etcd_prefix, prefix_len);
    end_b64 = b64_encode(end, elen);
    wbuf = evbuffer_new();
    step_ev = event_new(base, -1, 0, on_step, NULL);
    if (!key_b64 || !end_b64 || !wbuf || !step_ev) {
        lb_etcd_stop();
        return -1;
    }
    lb_log("etcd: reading %s from %s", lb_cfg.etcd_prefix, lb_cfg.etcd_url);
    next_action = ACT_RANGE;
    set_state(ETCD_CONNECTING);
    schedule(0);
    return 0;
}

void lb_etcd_stop(void)
{
    if (conn)
        evhttp_connection_free(conn);
    conn = NULL;
    if (step_ev)
        event_free(step_ev);
    step_ev = NULL;
    if (wbuf)
        evbuffer_free(wbuf);
    wbuf = NULL;
    free(key_b64);
    free(end_b64);
    key_b64 = end_b64 = NULL;
    lb_entries_free(&set);
    set_state(ETCD_OFF);
}

void lb_etcd_stats(struct evbuffer *b)
{
    if (!lb_cfg.etcd_url)
        return;
    int s = atomic_load_explicit(&st_state, memory_order_relaxed);
    evbuffer_add_printf(
        b,
        ",\n\"etcd\":{\"state\":\"%s\",\"applied\":%s,\"revision\":%llu,\"members\":%llu,"
        "\"ranges\":%llu,\"batches\":%llu,\"events\":%llu,\"bad_entries\":%llu,"
        "\"errors\":%llu,\"compacted\":%llu}",
        state_names[s >= 0 && s <= ETCD_RETRYING ? s : 0], lb_etcd_active() ? "true" : "false",
        (unsigned long long)GET(st_revision), (unsigned long long)GET(st_members),
        (unsigned long long)GET(st_ranges), (unsigned long long)GET(st_batches),
        (unsigned long long)GET(st_events), (unsigned long long)GET(st_bad),
        (unsigned long long)GET(st_errors), (unsigned long long)GET(st_compacted));
}
