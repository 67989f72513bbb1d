/* chring-lb: GET /_chring/stats, the ring's, every member's and the balancer's statistics as
 * JSON.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "lb.h"

#include <event2/buffer.h>

static void json_str(struct evbuffer *b, const char *s)
{
    evbuffer_add(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            evbuffer_add_printf(b, "\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f)
            evbuffer_add_printf(b, "\\u%04x", *c);
        else
            evbuffer_add(b, c, 1);
    }
    evbuffer_add(b, "\"", 1);
}

static void add_ring(struct evbuffer *b, const chring_snap_t *s, const chring_stats_t *st)
{
    const char *pname = chring_profile_name(chring_snap_profile(s));
    evbuffer_add_printf(b, "{\"ring\":{\"profile\":");
    json_str(b, pname ? pname : "?");
    evbuffer_add_printf(b,
                        ",\"balance\":%.17g,\"version\":%llu,\"publishes\":%llu,\"members\":%llu,"
                        "\"points\":%llu,\"leases\":%llu,\"acquires\":%llu,\"spills\":%llu,"
                        "\"saturated\":%llu},\n\"members\":[",
                        lb_cfg.balance, (unsigned long long)st->version,
                        (unsigned long long)st->publishes, (unsigned long long)st->members,
                        (unsigned long long)st->points, (unsigned long long)st->leases,
                        (unsigned long long)st->acquires, (unsigned long long)st->spills,
                        (unsigned long long)st->saturated);
}

static void add_member(struct evbuffer *b, const chring_snap_t *s, const chring_member_t *m,
                       bool first)
{
    chring_member_stats_t ms;
    chring_member_stats(m, &ms);
    struct backend *be = chring_member_udata(m);
    evbuffer_add_printf(b, "%s\n {\"name\":", first ? "" : ",");
    json_str(b, chring_member_name(m));
    evbuffer_add_printf(b,
                        ",\"weight\":%u,\"load\":%llu,\"capacity\":%llu,\"acquires\":%llu,"
                        "\"primary\":%llu,\"spilled_in\":%llu,\"share\":%.6f",
                        chring_snap_weight(s, m), (unsigned long long)ms.load,
                        (unsigned long long)chring_member_capacity(lb_ring, s, m),
                        (unsigned long long)ms.acquires, (unsigned long long)ms.primary,
                        (unsigned long long)ms.spilled_in, chring_member_share(s, m));
    if (be)
        evbuffer_add_printf(
            b,
            ",\"requests\":%llu,\"failures\":%llu,\"retries_in\":%llu,"
            "\"bytes_out\":%llu,\"skipped\":%llu,"
            "\"down\":%s",
            (unsigned long long)GET(be->requests), (unsigned long long)GET(be->failures),
            (unsigned long long)GET(be->retries_in), (unsigned long long)GET(be->bytes_out),
            (unsigned long long)GET(be->skipped), lb_backend_down(be) ? "true" : "false");
    evbuffer_add(b, "}", 1);
}

static void add_balancer(struct evbuffer *b)
{
    uint64_t t[10] = {0};
    for (unsigned i = 0; i < lb_cfg.threads; i++) {
        struct worker *x = &lb_workers[i];
        t[0] += GET(x->requests);
        t[1] += GET(x->proxied);
        t[2] += GET(x->retries);
        t[3] += GET(x->bad_gateway);
        t[4] += GET(x->aborts);
        t[5] += GET(x->client_gone);
        t[6] += GET(x->no_backend);
        t[7] += GET(x->stats_served);
        t[8] += GET(x->active_n);
        t[9] += GET(x->pauses);
    }
    evbuffer_add_printf(
        b,
        "],\n\"balancer\":{\"threads\":%u,\"requests\":%llu,\"proxied\":%llu,"
        "\"retries\":%llu,\"bad_gateway\":%llu,\"aborted\":%llu,\"client_gone\":%llu,"
        "\"no_backend\":%llu,\"stats\":%llu,\"active\":%llu,\"reloads\":%llu,"
        "\"reload_errors\":%llu,\"backpressure_pauses\":%llu}}\n",
        lb_cfg.threads, (unsigned long long)t[0], (unsigned long long)t[1],
        (unsigned long long)t[2], (unsigned long long)t[3], (unsigned long long)t[4],
        (unsigned long long)t[5], (unsigned long long)t[6], (unsigned long long)t[7],
        (unsigned long long)t[8], (unsigned long long)GET(lb_reloads),
        (unsigned long long)GET(lb_reload_errors), (unsigned long long)t[9]);
}

void lb_stats_serve(struct worker *w, struct evhttp_request *req)
{
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        lb_send_text(req, 405, "Method Not Allowed", "GET only");
        return;
    }
    ADD(w->stats_served, 1);
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    chring_stats_t st;
    chring_stats(lb_ring, &st);
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    add_ring(b, s, &st);
    size_t n = chring_snap_len(s);
    for (size_t i = 0; i < n; i++)
        add_member(b, s, chring_snap_member(s, i), i == 0);
    chring_snap_exit(lb_ring, s);
    add_balancer(b);
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    evhttp_add_header(oh, "Content-Type", "application/json");
    evhttp_add_header(oh, "Cache-Control", "no-store");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}
