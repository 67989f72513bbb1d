/* chring-lb: the ring's writer (writer.c): membership changes as one chring_update of their
 * differences, published on the calling thread or by the writer thread.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_WRITER_H
#define CHRING_LB_WRITER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct backend;
struct event_base;

/* One change of lb_ring_change: weight 0 removes name (or drains it, with --drain); weight
 * >= 1 adds it with be (resolved by the caller; be NULL: a member already in the ring only) or
 * sets its weight. */
struct lb_change {
    const char *name;
    uint32_t weight;
    struct backend *be; /* owned by the call from then on: kept by the ring, or discarded */
};
/* Applies ch[0..n) (distinct names) with one chring_update: a member that leaves ramps to 0
 * with --drain and stays until health.c removes it, one that was leaving and is wanted again
 * stays; with known (not NULL), every member of the ring for which known(name, ctx) is false
 * leaves too (a replace: the ring becomes the feed's set).  O(n) plus O(members) with known,
 * and the publish, on the calling thread (what: the log line's start).  Main thread only;
 * refused (-1, logged) while a change of lb_ring_change_async is under way.  Returns 0, or -1
 * with the membership unchanged (logged). */
int lb_ring_change(struct lb_change *ch, size_t n, bool (*known)(const char *, void *), void *ctx,
                   const char *what);
/* The same change, its publish (chring_update: 1 to 2 s at 16 million points) made by the
 * writer thread so that the main thread goes on (docs/lb.md, "The etcd feed"): the differences
 * are computed here, the drains and the log line once published, then done(rc, cpu_ms, arg) is
 * called on the main thread (rc as lb_ring_change's; cpu_ms: the publish's CPU time).  Before
 * lb_writer_start, or without done, synchronous (done, if any, called before the return).  One change at a time: while one is under way
 * (lb_ring_busy), the call returns -1 at once (backends discarded, nothing logged) and the
 * caller applies later.  Returns 0 (under way, or done called already), -1 (out of memory
 * (logged) or busy).  Main thread only. */
int lb_ring_change_async(struct lb_change *ch, size_t n, bool (*known)(const char *, void *),
                         void *ctx, const char *what, void (*done)(int, int64_t, void *),
                         void *arg);
/* True while a change is being published by the writer thread.  Main thread. */
bool lb_ring_busy(void);
/* The same for any thread (health.c leaves drained members in the ring while it is true, so
 * that the change under way, computed before, meets the membership it was computed against). */
extern _Atomic bool lb_ring_writing;

/* Sets up the writer thread's wake-up on the main thread's event base (before it, changes are
 * published on the calling thread).  Returns 0 / -1. */
int lb_writer_start(struct event_base *base);
/* Waits for a publish under way and finishes it (its caller is not told).  Main thread, after
 * the event loop, before the feeds are freed. */
void lb_writer_stop(void);

#endif
