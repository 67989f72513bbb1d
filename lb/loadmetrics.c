/* chring-lb: the load the engines report (docs/lb.md, "Load the engines report").
 *
 * SPDX-License-Identifier: MIT
 *
 * With --load-metrics PATH, the main thread's event base scrapes every backend's Prometheus text
 * at PATH every --load-interval seconds (never a worker: workers only proxy), sums the series of
 * the gauges named by --load-metric (lb/prom_read.c) and reports the sum to the ring with
 * chring_report_load, which counts it in the bound until config.report_ttl_ms (1 s) has passed.
 * A scrape that fails, times out, answers anything but 200, is larger than LOAD_MAX_ANSWER or
 * names none of the gauges reports nothing: the backend's last report expires and the bound
 * counts this instance's leases alone again.
 *
 * Bounds, like the etcd feed's: an answer is at most LOAD_MAX_ANSWER bytes (libevent refuses a
 * larger body) and must arrive within LOAD_TIMEOUT_S; one scrape per backend at a time (a tick
 * skips a backend whose last scrape is still in flight, so a slow engine delays only its own
 * reports), one connection each, closed after it.  The
 * scrape names the member by its name, looked up again when the answer arrives (a member that
 * left meanwhile is not reported: chring_report_load would say -ENOENT).
 */
#include "loadmetrics.h"
#include "backend.h"
#include "config.h"
#include "log.h"
#include "prom_read.h"
#include "worker.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LOAD_MAX_ANSWER ((size_t)4 << 20)
#define LOAD_TIMEOUT_S 2
#define LOAD_NAMES_MAX 16

struct scrape {
    char *name;
    struct evhttp_connection *conn;
    struct scrape *next;
};

static struct event_base *load_base;
static struct event *load_timer;
static struct scrape *inflight;
static char *names_buf;
static const char *names[LOAD_NAMES_MAX];
static size_t nnames;
_Atomic uint64_t lb_load_scrapes, lb_load_reports, lb_load_failures;

static void scrape_free(struct scrape *sc)
{
    for (struct scrape **p = &inflight; *p; p = &(*p)->next)
        if (*p == sc) {
            *p = sc->next;
            break;
        }
    if (sc->conn)
        evhttp_connection_free(sc->conn);
    free(sc->name);
    free(sc);
}

/* libevent must not free a connection from inside its request callback: one turn later. */
static void scrape_free_later(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    scrape_free(arg);
}

static void report(const char *name, uint64_t load)
{
    const chring_snap_t *s = chring_snap_hold(lb_ring);
    const chring_member_t *m = chring_snap_find(s, name);
    if (m != NULL && chring_report_load(lb_ring, m, load) == 0)
        atomic_fetch_add(&lb_load_reports, 1);
    chring_snap_put(lb_ring, s);
}

static void on_answer(struct evhttp_request *req, void *arg)
{
    struct scrape *sc = arg;
    bool ok = false;
    if (req != NULL && evhttp_request_get_response_code(req) == 200) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(in);
        const char *text = len ? (const char *)evbuffer_pullup(in, -1) : "";
        double sum;
        size_t skipped, line;
        const char *why;
        long n = lb_prom_sum(text, len, names, nnames, &sum, &skipped, &why, &line);
        if (n > 0 && sum < 4294967295.0) {
            report(sc->name, (uint64_t)llround(sum));
            ok = true;
        }
    }
    if (!ok)
        atomic_fetch_add(&lb_load_failures, 1);
    event_base_once(load_base, -1, EV_TIMEOUT, scrape_free_later, sc, NULL);
}

static void scrape_one(const chring_member_t *m)
{
    struct backend *be = chring_member_udata(m);
    if (be == NULL)
        return;
    struct scrape *sc = calloc(1, sizeof *sc);
    if (!sc || !(sc->name = strdup(chring_member_name(m)))) {
        free(sc);
        return;
    }
    sc->conn = evhttp_connection_base_new(load_base, NULL, be->addr, be->port);
    struct evhttp_request *req = sc->conn ? evhttp_request_new(on_answer, sc) : NULL;
    if (!req) {
        if (sc->conn)
            evhttp_connection_free(sc->conn);
        free(sc->name);
        free(sc);
        atomic_fetch_add(&lb_load_failures, 1);
        return;
    }
    evhttp_connection_set_timeout(sc->conn, LOAD_TIMEOUT_S);
    evhttp_connection_set_max_body_size(sc->conn, (ev_ssize_t)LOAD_MAX_ANSWER);
    evhttp_connection_set_retries(sc->conn, 0);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host", be->hosthdr);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Accept", "text/plain");
    sc->next = inflight;
    inflight = sc;
    atomic_fetch_add(&lb_load_scrapes, 1);
    if (evhttp_make_request(sc->conn, req, EVHTTP_REQ_GET, lb_cfg.load_path) != 0) {
        /* libevent freed req; the connection stays ours */
        atomic_fetch_add(&lb_load_failures, 1);
        scrape_free(sc);
    }
}

/* Whether a scrape of the member of that name is still in flight. */
static bool scraping(const char *name)
{
    for (const struct scrape *sc = inflight; sc; sc = sc->next)
        if (strcmp(sc->name, name) == 0)
            return true;
    return false;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    const chring_snap_t *s = chring_snap_hold(lb_ring);
    for (size_t i = 0; i < chring_snap_len(s); i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        if (!scraping(chring_member_name(m))) /* one scrape per backend at a time: a slow one
                                                 delays only its own reports */
            scrape_one(m);
    }
    chring_snap_put(lb_ring, s);
}

int lb_load_start(struct event_base *base)
{
    if (lb_cfg.load_path == NULL)
        return 0;
    load_base = base;
    names_buf = strdup(lb_cfg.load_metric);
    if (!names_buf)
        return -1;
    nnames = 0;
    for (char *save = NULL, *t = strtok_r(names_buf, ",", &save); t && nnames < LOAD_NAMES_MAX;
         t = strtok_r(NULL, ",", &save))
        names[nnames++] = t;
    if (nnames == 0) {
        lb_log("--load-metric names no gauge");
        return -1;
    }
    load_timer = event_new(base, -1, EV_PERSIST, on_timer, NULL);
    if (!load_timer)
        return -1;
    struct timeval tv = {(time_t)lb_cfg.load_interval,
                         (suseconds_t)((lb_cfg.load_interval - floor(lb_cfg.load_interval)) * 1e6)};
    event_add(load_timer, &tv);
    lb_log("load: scraping %s every %.3f s, summing %s", lb_cfg.load_path, lb_cfg.load_interval,
           lb_cfg.load_metric);
    return 0;
}

void lb_load_stop(void)
{
    if (load_timer) {
        event_free(load_timer);
        load_timer = NULL;
    }
    while (inflight)
        scrape_free(inflight);
    free(names_buf);
    names_buf = NULL;
}
