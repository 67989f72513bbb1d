/* chring-lb: GET /_chring/metrics, the statistics of GET /_chring/stats in Prometheus' text
 * exposition format, version 0.0.4 (docs/lb.md, "Metrics").
 *
 * SPDX-License-Identifier: MIT
 *
 * One family per quantity, each with its # HELP and # TYPE lines and all its samples together
 * (the format requires it); counters are named ..._total.  The balancer's, the limits' and the
 * etcd feed's families cost O(1); the per-member families (label member="host:port") cost
 * O(members) each, written in one read section on one snapshot, so that every family shows the
 * same members; ?members=0 leaves them out.  Nothing here scans the ring's points.
 */
#define _GNU_SOURCE
#include "backend.h"
#include "config.h"
#include "conn.h"
#include "etcd.h"
#include "health.h"
#include "lb.h"
#include "limits.h"
#include "membership.h"
#include "status.h"
#include "worker.h"

#include <event2/buffer.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void family(struct evbuffer *b, const char *name, const char *type, const char *help)
{
    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void one(struct evbuffer *b, const char *name, const char *type, const char *help,
                uint64_t v)
{
    family(b, name, type, help);
    evbuffer_add_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

/* A member's name as a label value: printable ASCII as is, the backslash and the double quote
 * escaped as the format says, every other byte (controls, newlines, bytes >= 0x80) as the four
 * characters \xNN (its backslash escaped), so that any name gives one well-formed line. */
static size_t label_value(char *out, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (size_t i = 0; s[i] && i < CHRING_NAME_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == '"') {
            out[k++] = '\\';
            out[k++] = (char)c;
        } else if (c >= 0x20 && c < 0x7f) {
            out[k++] = (char)c;
        } else {
            out[k++] = '\\';
            out[k++] = '\\';
            out[k++] = 'x';
            out[k++] = hex[c >> 4];
            out[k++] = hex[c & 15];
        }
    }
    out[k] = '\0';
    return k;
}

enum member_value {
    MV_WEIGHT,
    MV_LOAD,
    MV_CAPACITY,
    MV_SCALE,
    MV_DOWN,
    MV_DRAINING,
    MV_ACQUIRES,
    MV_REQUESTS,
    MV_FAILURES,
    MV_REPORTED,
    MV_REPORT_AGE,
    MV_COUNTED
};

static const struct {
    const char *name, *type, *help;
    enum member_value v;
} member_families[] = {
    {"chring_lb_member_weight", "gauge", "The member's weight in the ring.", MV_WEIGHT},
    {"chring_lb_member_load", "gauge", "Requests holding a lease on the member.", MV_LOAD},
    {"chring_lb_member_capacity", "gauge",
     "The member's bounded-load capacity: leases it may hold before keys spill.", MV_CAPACITY},
    {"chring_lb_member_scale", "gauge",
     "The member's admission scale (slow start and drain ramp it between 0 and 1).", MV_SCALE},
    {"chring_lb_member_down", "gauge", "1 when the member is down in the ring (passive health).",
     MV_DOWN},
    {"chring_lb_member_draining", "gauge", "1 while the member leaves through --drain.",
     MV_DRAINING},
    {"chring_lb_member_acquires_total", "counter", "Leases taken on the member.", MV_ACQUIRES},
    {"chring_lb_member_requests_total", "counter", "Requests proxied to the member.", MV_REQUESTS},
    {"chring_lb_member_failures_total", "counter",
     "Requests to the member that failed (refused, timed out, broken answer).", MV_FAILURES},
    {"chring_lb_member_reported_load", "gauge",
     "The load the member's engine reported (--load-metrics), while the report counts; no sample "
     "otherwise.",
     MV_REPORTED},
    {"chring_lb_member_report_age_seconds", "gauge",
     "The age of the member's report, while it counts; no sample otherwise.", MV_REPORT_AGE},
    {"chring_lb_member_counted", "gauge",
     "What the bound counts for the member: its leases, raised by a report that counts.",
     MV_COUNTED},
};

static void member_sample(struct evbuffer *b, const char *fam, const char *label,
                          const chring_snap_t *s, const chring_member_t *m, enum member_value v)
{
    struct backend *be = chring_member_udata(m);
    switch (v) {
    case MV_SCALE:
        evbuffer_add_printf(b, "%s{member=\"%s\"} %.4f\n", fam, label, chring_member_scale(m));
        return;
    case MV_WEIGHT:
        evbuffer_add_printf(b, "%s{member=\"%s\"} %u\n", fam, label, chring_snap_weight(s, m));
        return;
    case MV_REPORTED:
    case MV_REPORT_AGE: {
        chring_member_stats_t rs;
        chring_member_stats(m, &rs);
        if (!rs.report_live) /* no report counts: no sample (Prometheus' way to say "none") */
            return;
        if (v == MV_REPORTED)
            evbuffer_add_printf(b, "%s{member=\"%s\"} %llu\n", fam, label,
                                (unsigned long long)rs.reported);
        else
            evbuffer_add_printf(b, "%s{member=\"%s\"} %.3f\n", fam, label,
                                (double)rs.report_age_ms / 1000);
        return;
    }
    default: break;
    }
    uint64_t x = 0;
    chring_member_stats_t ms;
    switch (v) {
    case MV_LOAD: x = chring_member_load(m); break;
    case MV_CAPACITY: x = chring_member_capacity(lb_ring, s, m); break;
    case MV_DOWN: x = chring_member_is_down(m) > 0; break;
    case MV_DRAINING: x = be && GET(be->drain_until_ms) != 0; break;
    case MV_ACQUIRES:
        chring_member_stats(m, &ms);
        x = ms.acquires;
        break;
    case MV_REQUESTS: x = be ? GET(be->requests) : 0; break;
    case MV_FAILURES: x = be ? GET(be->failures) : 0; break;
    case MV_COUNTED:
        chring_member_stats(m, &ms);
        x = ms.counted;
        break;
    default: break;
    }
    evbuffer_add_printf(b, "%s{member=\"%s\"} %llu\n", fam, label, (unsigned long long)x);
}

static void add_members(struct evbuffer *b, const chring_snap_t *s, size_t off, size_t count)
{
    size_t n = chring_snap_len(s);
    size_t end = off < n ? (count < n - off ? off + count : n) : off;
    /* the labels once: each family below walks the same members */
    char **labels = calloc(end > off ? end - off : 1, sizeof *labels);
    if (!labels)
        return;
    char tmp[6 * CHRING_NAME_MAX + 1];
    for (size_t i = off; i < end; i++) {
        size_t len = label_value(tmp, chring_member_name(chring_snap_member(s, i)));
        labels[i - off] = strndup(tmp, len);
    }
    for (size_t f = 0; f < sizeof member_families / sizeof member_families[0]; f++) {
        family(b, member_families[f].name, member_families[f].type, member_families[f].help);
        for (size_t i = off; i < end; i++)
            if (labels[i - off])
                member_sample(b, member_families[f].name, labels[i - off], s,
                              chring_snap_member(s, i), member_families[f].v);
    }
    for (size_t i = off; i < end; i++)
        free(labels[i - off]);
    free(labels);
}

static void add_ring(struct evbuffer *b)
{
    chring_stats_t st;
    chring_stats(lb_ring, &st);
    one(b, "chring_lb_ring_members", "gauge", "Members in the ring.", st.members);
    one(b, "chring_lb_ring_points", "gauge", "Points (virtual nodes) in the ring.", st.points);
    one(b, "chring_lb_ring_down", "gauge", "Members down in the ring.", st.down);
    one(b, "chring_lb_ring_leases", "gauge", "Leases held in all.", st.leases);
    one(b, "chring_lb_ring_version", "gauge", "The ring's version (each publish adds one).",
        st.version);
    one(b, "chring_lb_ring_publishes_total", "counter", "Snapshots published.", st.publishes);
    one(b, "chring_lb_ring_acquires_total", "counter", "Leases taken.", st.acquires);
    one(b, "chring_lb_ring_spills_total", "counter",
        "Acquires that went past a member at its capacity.", st.spills);
    one(b, "chring_lb_ring_saturated_total", "counter",
        "Acquires that found every member at its capacity.", st.saturated);
    one(b, "chring_lb_ring_retries_total", "counter", "Acquires retried on another member.",
        st.retries);
    family(b, "chring_lb_ring_balance", "gauge", "The bounded-load factor c (--balance).");
    evbuffer_add_printf(b, "chring_lb_ring_balance %.17g\n", lb_cfg.balance);
}

static void add_balancer(struct evbuffer *b)
{
    uint64_t t[10], o[5];
    lb_workers_sum(t, o);
    one(b, "chring_lb_threads", "gauge", "Worker threads.", lb_cfg.threads);
    one(b, "chring_lb_requests_total", "counter", "Requests received.", t[0]);
    one(b, "chring_lb_proxied_total", "counter", "Requests answered by a backend.", t[1]);
    one(b, "chring_lb_retries_total", "counter", "Requests retried on another backend.", t[2]);
    one(b, "chring_lb_bad_gateway_total", "counter", "Requests answered 502 or 504 (the backends failed or timed out).", t[3]);
    one(b, "chring_lb_aborted_total", "counter", "Answers broken off.", t[4]);
    one(b, "chring_lb_client_gone_total", "counter", "Clients gone before their answer.", t[5]);
    one(b, "chring_lb_no_backend_total", "counter", "Requests with no member to go to.", t[6]);
    one(b, "chring_lb_stats_requests_total", "counter", "Stats and metrics requests answered.",
        t[7]);
    one(b, "chring_lb_active_requests", "gauge", "Requests being proxied.", t[8]);
    one(b, "chring_lb_backpressure_pauses_total", "counter",
        "Backend reads paused for a slow client.", t[9]);
    one(b, "chring_lb_health_panics_total", "counter",
        "Failures passive health did not act on: half of the members were down already.",
        GET(lb_health_panics));
    one(b, "chring_lb_reloads_total", "counter", "Successful SIGHUP reloads.", GET(lb_reloads));
    one(b, "chring_lb_reload_errors_total", "counter", "Refused SIGHUP reloads.",
        GET(lb_reload_errors));
    family(b, "chring_lb_outcomes_total", "counter",
           "Leases by how their member was chosen: its owner, spilled past a full one, with "
           "every member full, or past an owner that was down.");
    evbuffer_add_printf(b,
                        "chring_lb_outcomes_total{outcome=\"owner\"} %llu\n"
                        "chring_lb_outcomes_total{outcome=\"spilled\"} %llu\n"
                        "chring_lb_outcomes_total{outcome=\"saturated\"} %llu\n"
                        "chring_lb_outcomes_total{outcome=\"owner_down\"} %llu\n",
                        (unsigned long long)o[CHRING_OUTCOME_OWNER],
                        (unsigned long long)o[CHRING_OUTCOME_SPILLED],
                        (unsigned long long)o[CHRING_OUTCOME_SATURATED],
                        (unsigned long long)o[CHRING_OUTCOME_OWNER_DOWN]);
}

static void add_limits(struct evbuffer *b)
{
    struct lb_limit_stats l;
    lb_limits_get(&l);
    one(b, "chring_lb_connections", "gauge", "Client connections holding a --max-conns slot.",
        l.conns);
    one(b, "chring_lb_connections_max", "gauge", "--max-conns.", lb_cfg.max_conns);
    one(b, "chring_lb_connections_waiting", "gauge",
        "Accepted connections parked, waiting for a slot.", l.parked);
    one(b, "chring_lb_connections_parked_total", "counter", "Connections parked.", l.conns_parked);
    one(b, "chring_lb_accept_pauses_total", "counter", "Accepting paused at --max-conns.",
        l.accept_pauses);
    one(b, "chring_lb_accept_errors_total", "counter", "accept() failures.", l.accept_errors);
    one(b, "chring_lb_accept_backoffs_total", "counter", "Accept backoffs for want of descriptors.",
        l.accept_backoffs);
    one(b, "chring_lb_requests_max", "gauge", "--max-requests.", lb_cfg.max_requests);
    one(b, "chring_lb_requests_refused_total", "counter", "Requests refused at --max-requests.",
        l.requests_refused);
    one(b, "chring_lb_body_bytes", "gauge", "Request body bytes buffered.", l.body_bytes);
    one(b, "chring_lb_body_bytes_max", "gauge", "--max-body-total.", lb_cfg.max_body_total);
    one(b, "chring_lb_body_refused_total", "counter", "Requests refused at --max-body-total.",
        l.body_refused);
    one(b, "chring_lb_slow_clients_total", "counter",
        "Clients closed for keeping their answer waiting (--send-min-rate).", l.slow_clients);
    one(b, "chring_lb_stats_refused_total", "counter",
        "Stats listener connections closed at their accept.", GET(lb_stats_refused));
}

/* The etcd feed's numbers, read from the object lb_etcd_stats writes for the JSON (one source
 * for both).  Counters are the ones that only grow. */
static void add_etcd(struct evbuffer *b)
{
    static const struct {
        const char *key, *type, *help;
    } fields[] = {
        {"revision", "gauge", "The etcd revision applied."},
        {"members", "gauge", "Members etcd gives."},
        {"points", "gauge", "Points of etcd's members in all."},
        {"resolving", "gauge", "Names being resolved."},
        {"unresolved", "gauge", "Names that did not resolve."},
        {"ranges", "counter", "Range requests answered."},
        {"batches", "counter", "Changes applied."},
        {"events", "counter", "Watch events read."},
        {"bad_entries", "counter", "Keys or values refused."},
        {"errors", "counter", "Connection and protocol errors."},
        {"compacted", "counter", "Watches that found their revision compacted."},
        {"resolves", "counter", "Name resolutions done."},
        {"refused", "counter", "Changes refused (--etcd-max-points)."},
    };
    struct evbuffer *e = evbuffer_new();
    if (!e)
        return;
    lb_etcd_stats(e);
    if (evbuffer_get_length(e) < 2 || evbuffer_add(e, "}", 1) < 0) {
        evbuffer_free(e);
        return;
    }
    size_t n = evbuffer_get_length(e);
    char *text = (char *)evbuffer_pullup(e, -1);
    text[0] = '{'; /* ",\n\"etcd\":{...}" becomes the object {"etcd":{...}} */
    json_t *root = json_loadb(text, n, 0, NULL);
    evbuffer_free(e);
    json_t *etcd = root ? json_object_get(root, "etcd") : NULL;
    if (!json_is_object(etcd)) {
        json_decref(root);
        return;
    }
    json_t *state = json_object_get(etcd, "state");
    if (json_is_string(state)) {
        family(b, "chring_lb_etcd_state", "gauge",
               "The etcd feed's state (1 for the current one).");
        evbuffer_add_printf(b, "chring_lb_etcd_state{state=\"%s\"} 1\n", json_string_value(state));
    }
    one(b, "chring_lb_etcd_applied", "gauge", "1 once etcd gives the membership.",
        json_is_true(json_object_get(etcd, "applied")));
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        json_t *v = json_object_get(etcd, fields[i].key);
        if (!json_is_integer(v))
            continue;
        char name[64];
        snprintf(name, sizeof name, "chring_lb_etcd_%s%s", fields[i].key,
                 strcmp(fields[i].type, "counter") == 0 ? "_total" : "");
        one(b, name, fields[i].type, fields[i].help, (uint64_t)json_integer_value(v));
    }
    json_decref(root);
}

void lb_metrics_serve(struct worker *w, struct lb_req *req)
{
    if (req->cmd != EVHTTP_REQ_GET && req->cmd != EVHTTP_REQ_HEAD) {
        lb_send_text(req, 405, "Method Not Allowed", "GET only");
        return;
    }
    size_t off = 0, count = SIZE_MAX;
    if (lb_stats_members_param(req->query, &off, &count) < 0) {
        lb_send_text(req, 400, "Bad Request",
                     "members=: 0, or OFFSET,COUNT (decimal numbers) for one page of members");
        return;
    }
    ADD((w ? w : &lb_workers[0])->stats_served, 1);
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        lb_send_text(req, 500, "Internal Server Error", "out of memory");
        return;
    }
    add_ring(b);
    add_balancer(b);
    add_limits(b);
    add_etcd(b);
    if (count > 0) {
        const chring_snap_t *s = chring_snap_enter(lb_ring);
        add_members(b, s, off, count);
        chring_snap_exit(lb_ring, s);
    }
    evhttp_add_header(req->out, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    evhttp_add_header(req->out, "Cache-Control", "no-store");
    lb_req_reply(req, 200, "OK", b);
    evbuffer_free(b);
}
