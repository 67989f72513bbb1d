/* chring-lb: passive health through the ring, and drains, both applied on the main thread.
 *
 * SPDX-License-Identifier: MIT
 *
 * Passive health.  A worker whose attempt on a backend failed sets the backend's down_until_ms
 * (now + --fail-timeout) and wakes the main thread's health event.  The main thread, the ring's
 * only writer of membership, walks the current snapshot and marks down (chring_set_down) every
 * member whose mark is in the future: from then on chring_acquire walks past it, its keys go to
 * their next replica exactly as a removal would send them (docs/design.md §3, "Health and
 * warm-up"), every other key keeps its owner, nothing is rebuilt.  When the mark has passed, the
 * member is set up again and gets back exactly its keys; if it still fails, the first request
 * that tries it is retried on the next replica and marks it down again, so a dead backend costs
 * one failed attempt per --fail-timeout.  The walk is done by the main thread rather than by
 * the worker because a name can leave and come back as a new member (a new backend object):
 * only the membership's writer knows that the member it marks is the backend that failed.
 *
 * Drains.  With --drain S, a member that leaves the membership (the members file, etcd) stays
 * in the ring with its scale ramping from where it is to 0 over S (chring_set_ramp): fewer and
 * fewer new requests, its keys spilling to the members that will own them.  It leaves the ring
 * (one chring_update for all that are done) as soon as its load is 0, or when S has passed,
 * whichever comes first; a lease still held then keeps working (the member object lives until
 * its last lease is released).  A leaving member that comes back into the membership ramps up
 * again and stays.
 *
 * What counts as a failure.  A connection refused (or not made in time) is the backend's.  A
 * timeout or a close after the request went out is held against it only when it answered no
 * request at all while the attempt waited, and another client's attempt failed the same way
 * shortly before (lb_backend_attempt_failed): a backend that answers others is up, and one
 * client's slow endpoint or long prefill must not take it out of the ring for everyone.  (The
 * bound alone does not show that a backend is up: a backend busy with one client's slow requests
 * is full, so the bound sends everyone else elsewhere and it answers nobody.)  And passive health never holds more than half of the members down at once (a
 * panic threshold, as Envoy's): past that, failures are more likely the requests' than every
 * backend's, and the members left would melt or every request would get 502.
 *
 * One timer serves both: it fires at the earliest mark or drain deadline, and every
 * HEALTH_POLL_MS while a drain waits for its load to reach 0.
 */
#define _GNU_SOURCE
#include "health.h"
#include "backend.h"
#include "config.h"
#include "lb.h"
#include "log.h"
#include "writer.h"
#include "worker.h"

#include <stdlib.h>
#include <time.h>

#define HEALTH_POLL_MS 20

static struct event *health_ev; /* activated by workers (any thread) and by the timer */
static int64_t panic_logged_ms;  /* the last "stays in the ring" line (one a second at most) */
_Atomic uint64_t lb_health_panics;
static struct event_base *health_base;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void lb_backend_mark(struct backend *be, bool ok)
{
    if (ok || lb_cfg.fail_timeout_ms <= 0)
        return;
    atomic_store_explicit(&be->down_until_ms, now_ms() + lb_cfg.fail_timeout_ms,
                          memory_order_relaxed);
    if (health_ev)
        event_active(health_ev, 0, 0);
}

void lb_backend_answered(struct backend *be)
{
    int64_t now = now_ms();
    if (GET(be->last_answer_ms) != now)
        atomic_store_explicit(&be->last_answer_ms, now, memory_order_relaxed);
}

/* FNV-1a of the client's address: only compared for equality, a collision costs one missed
 * mark. */
static uint32_t peer_hash(const char *peer)
{
    uint32_t x = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)(peer ? peer : ""); *p; p++)
        x = (x ^ *p) * 16777619u;
    return x;
}

bool lb_backend_attempt_failed(struct backend *be, int64_t start_ms, const char *peer)
{
    int64_t now = now_ms();
    uint32_t who = peer_hash(peer);
    uint64_t last = atomic_exchange_explicit(&be->last_failure, (uint64_t)who << 32 | (uint32_t)now,
                                             memory_order_relaxed);
    int64_t window = 2 * ((int64_t)lb_cfg.backend_timeout.tv_sec * 1000 +
                          lb_cfg.backend_timeout.tv_usec / 1000);
    /* the age of the last failure, modulo 2^32 ms (49 days): a wrapped one looks old or new */
    uint32_t age = (uint32_t)now - (uint32_t)last;
    bool other_client = last != 0 && (uint32_t)(last >> 32) != who && (int64_t)age <= window;
    if (GET(be->last_answer_ms) >= start_ms || !other_client) {
        ADD(be->slow, 1);
        return false;
    }
    lb_backend_mark(be, false);
    return true;
}

void lb_health_drain(const chring_snap_t *s, const chring_member_t *m)
{
    (void)s;
    struct backend *be = chring_member_udata(m);
    if (!be || GET(be->drain_until_ms) != 0)
        return;
    const char *name = chring_member_name(m);
    int rc = chring_set_ramp(lb_ring, name, chring_member_scale(m), 0, lb_cfg.drain_ms);
    if (rc < 0)
        lb_log("drain %s: %s", name, chring_strerror(rc));
    atomic_store_explicit(&be->drain_until_ms, now_ms() + lb_cfg.drain_ms, memory_order_relaxed);
    lb_log("draining %s: scale %.3f to 0 over %u ms, load %llu", name, chring_member_scale(m),
           lb_cfg.drain_ms, (unsigned long long)chring_member_load(m));
    if (health_ev)
        event_active(health_ev, 0, 0);
}

void lb_health_undrain(const chring_member_t *m)
{
    struct backend *be = chring_member_udata(m);
    if (!be || GET(be->drain_until_ms) == 0)
        return;
    const char *name = chring_member_name(m);
    int rc = chring_set_ramp(lb_ring, name, chring_member_scale(m), 1, lb_cfg.slow_start_ms);
    if (rc < 0)
        lb_log("undrain %s: %s", name, chring_strerror(rc));
    atomic_store_explicit(&be->drain_until_ms, 0, memory_order_relaxed);
    lb_log("%s is wanted again: no longer draining", name);
}

static void arm(int64_t next, int64_t now)
{
    if (next == INT64_MAX)
        return;
    int64_t d = next > now ? next - now : 0;
    struct timeval tv = {(time_t)(d / 1000), (suseconds_t)(d % 1000) * 1000};
    event_add(health_ev, &tv);
}

/* Main thread: applies the marks, ends the drains that are done, re-arms the timer. */
static void on_health(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    int64_t now = now_ms(), next = INT64_MAX;
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    size_t n = chring_snap_len(s), ngone = 0, ndown = 0;
    chring_change_t *gone = NULL;
    for (size_t i = 0; i < n; i++)
        ndown += chring_member_is_down(chring_snap_member(s, i)) > 0;
    for (size_t i = 0; i < n; i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        struct backend *be = chring_member_udata(m);
        if (!be)
            continue;
        const char *name = chring_member_name(m);
        int64_t until = GET(be->down_until_ms);
        bool down = chring_member_is_down(m) > 0;
        if (until > now) {
            if (!down && (ndown + 1) * 2 > n) {
                /* The panic threshold: half of the members down already.  Past it the failures
                 * are more likely the requests' or the network's than every backend's, and
                 * taking more out would send everyone to the few left, or answer 502 to all. */
                ADD(lb_health_panics, 1);
                if (now - panic_logged_ms >= 1000) {
                    panic_logged_ms = now;
                    lb_log("%s failed, but %zu of %zu members are down already: it stays in the "
                           "ring (passive health takes out at most half)",
                           name, ndown, n);
                }
            } else if (!down && chring_set_down(lb_ring, name, 1) == 0) {
                ndown++;
                ADD(be->downs, 1);
                lb_log("%s failed: down for %lld ms, its keys go to their next replica", name,
                       (long long)lb_cfg.fail_timeout_ms);
            }
            if (until < next)
                next = until;
        } else if (down && chring_set_down(lb_ring, name, 0) == 0) {
            lb_log("%s up again after --fail-timeout", name);
        }
        int64_t drain = GET(be->drain_until_ms);
        if (drain && atomic_load_explicit(&lb_ring_writing, memory_order_relaxed)) {
            /* a change is being published (membership.c): the drained leave after it */
            if (now + HEALTH_POLL_MS < next)
                next = now + HEALTH_POLL_MS;
        } else if (drain) {
            if (chring_member_load(m) == 0 || drain <= now) {
                if (!gone)
                    gone = calloc(n, sizeof *gone);
                if (gone) {
                    gone[ngone].name = name;
                    gone[ngone++].weight = 0;
                    lb_log("drained %s: load %llu, %s", name,
                           (unsigned long long)chring_member_load(m),
                           drain <= now ? "--drain passed" : "its load reached 0");
                }
            } else if (now + HEALTH_POLL_MS < next) {
                next = now + HEALTH_POLL_MS;
            }
        }
    }
    if (ngone) {
        int rc = chring_update(lb_ring, gone, ngone);
        if (rc < 0) {
            lb_log("removing drained members: %s; trying again", chring_strerror(rc));
            next = now + HEALTH_POLL_MS;
        }
    }
    chring_snap_exit(lb_ring, s);
    free(gone);
    arm(next, now);
}

int lb_health_start(struct event_base *base)
{
    health_base = base;
    health_ev = event_new(base, -1, 0, on_health, NULL);
    if (!health_ev)
        return -1;
    event_active(health_ev, 0, 0); /* a failure before the loop ran */
    return 0;
}

void lb_health_stop(void)
{
    if (health_ev) {
        struct event *ev = health_ev;
        health_ev = NULL;
        event_free(ev);
    }
    health_base = NULL;
}
