/* chring-lb: the stats listener, the status page, the stats JSON's and the metrics' shared
 * pieces (status.c, stats.c, metrics.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_STATUS_H
#define CHRING_LB_STATUS_H

#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct lb_req;
struct worker;

/* A request to a /_chring/ path (path) on a worker (w) or on the stats listener (w NULL):
 * answered 404 on the main listener when --stats-listen is set, 403 for a peer outside
 * --stats-allow, else the JSON (stats) or the status page (/_chring/). */
void lb_status_route(struct worker *w, struct lb_req *req, const char *path);
/* The members= query argument of /_chring/stats and /_chring/metrics (stats.c): absent, every
 * member (*off 0, *count SIZE_MAX); "0", none (the summary); "OFFSET,COUNT" (decimal), the
 * members of ring order OFFSET to OFFSET+COUNT.  query may be NULL.  Returns 0, or -1 for a
 * malformed value. */
int lb_stats_members_param(const char *query, size_t *off, size_t *count);
/* Answers GET (or HEAD) /_chring/metrics in Prometheus' text format 0.0.4 (metrics.c); any other
 * method 405, a malformed members= 400.  O(members) (the per-member families), O(1) with
 * members=0.  w may be NULL (the stats listener on the main thread). */
void lb_metrics_serve(struct worker *w, struct lb_req *req);
/* Opens --stats-listen on the main thread's event base.  Returns 0 (also without
 * --stats-listen) / -1 (logged). */
int lb_status_start(struct event_base *base);
/* Says a new snapshot was published (membership.c, after chring_update): a large ring's digest
 * is computed again off the main thread, once a digest was asked for (stats.c).  Any thread. */
void lb_stats_kick(void);
/* Stops the digest thread (stats.c).  Main thread, at exit, before the ring is freed.  Returns
 * true, or false when the thread is in a pass over the ring still after 100 ms: the ring must
 * not be freed then (the caller ends the process). */
bool lb_stats_stop(void);
void lb_status_stop(void);

#endif
