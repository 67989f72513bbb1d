/* chring-lb: the ring's writer side (membership.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_MEMBERSHIP_H
#define CHRING_LB_MEMBERSHIP_H

#include "members.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct backend;
struct event_base;

/* Successful and failed SIGHUP reloads, and the new names a reload has with its resolver
 * thread now, for the stats. */
extern _Atomic uint64_t lb_reloads, lb_reload_errors, lb_reload_resolving;

/* The start: makes the ring's membership exactly --backend plus the members file (logged),
 * resolving names on the calling thread.  Main thread, before lb_membership_start.  Returns 0, or
 * -1 with the membership unchanged. */
int lb_membership_load(void);
/* Sets up the reloads' wake-up on the main thread's event base.  Returns 0 / -1. */
int lb_membership_start(struct event_base *base);
/* Waits for a reload's lookups under way and drops that reload.  Main thread, before the ring
 * is freed. */
void lb_membership_stop(void);
/* SIGHUP: re-reads --backend plus the members file, counted in lb_reloads or lb_reload_errors
 * (logged, with the time it took).  The file is read and its differences applied on the main
 * thread; only names the ring does not hold yet and that are not numeric addresses need DNS, and
 * those are resolved by a thread of the reload's own, the file applied when they are (or refused
 * whole if one does not resolve).  A SIGHUP while names are resolved reads the file again once
 * that reload is done.  Refused while etcd gives the membership.  Main thread. */
void lb_membership_reload(void);
/* Said by the etcd feed (etcd.c) once etcd has given a membership: from then on it, not
 * --members, is the membership, and a SIGHUP reload applies nothing.  Main thread. */
void lb_membership_from_etcd(void);
/* Makes the ring's membership exactly es (distinct names; what: for the log) with one
 * lb_membership_change holding only the differences, --drain applied: a member that is not in es
 * ramps to 0 and stays until health.c removes them; one in es that was leaving stays.  Names the
 * ring does not hold yet are resolved (on this thread); a name that does not resolve fails the
 * whole call.  O(entries + members).  Main thread only.  Returns 0, or -1 with the membership
 * unchanged. */
int lb_membership_set(const lb_entries_t *es, const char *what);

/* One change of lb_membership_change: weight 0 removes name (or drains it, with --drain); weight
 * >= 1 adds it with be (resolved by the caller; be NULL: a member already in the ring only) or
 * sets its weight. */
struct lb_change {
    const char *name;
    uint32_t weight;
    struct backend *be; /* owned by the call from then on: kept by the ring, or discarded */
};
/* Applies ch[0..n) (distinct names) with one chring_update, --drain applied as in
 * lb_membership_set; with known (not NULL), every member of the ring for which known(name, ctx)
 * is false is removed too (a range: the ring becomes the feed's set).  O(n) plus O(members)
 * with known, and the publish, on the calling thread.  Main thread only; refused (-1, logged)
 * while a change of lb_membership_change_async is under way.  Returns 0, or -1 with the
 * membership unchanged (logged). */
int lb_membership_change(struct lb_change *ch, size_t n, bool (*known)(const char *, void *),
                         void *ctx, const char *what);
/* The same change, its publish (chring_update: 1 to 2 s at 16 million points) made by the
 * writer thread so that the main thread goes on (docs/lb.md, "The etcd feed"): the differences
 * are computed here, the drains and the log line once published, then done(rc, cpu_ms, arg) is
 * called on the main thread (rc as lb_membership_change's; cpu_ms: the publish's CPU time).  Before lb_membership_start, or without done,
 * done-less and synchronous.  One change at a time: while one is under way
 * (lb_membership_busy), the call returns -1 at once (backends discarded, nothing logged) and the
 * caller applies later.  Returns 0 (under way, or done called already), -1 (out of memory
 * (logged) or busy).  Main thread only. */
int lb_membership_change_async(struct lb_change *ch, size_t n,
                               bool (*known)(const char *, void *), void *ctx, const char *what,
                               void (*done)(int, int64_t, void *), void *arg);
/* True while a change is being published by the writer thread.  Main thread. */
bool lb_membership_busy(void);
/* The same for any thread (health.c leaves drained members in the ring while it is true, so
 * that the change under way, computed before, meets the membership it was computed against). */
extern _Atomic bool lb_ring_writing;

#endif
