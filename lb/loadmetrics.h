/* chring-lb: the load the engines report (loadmetrics.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_LOADMETRICS_H
#define CHRING_LB_LOADMETRICS_H

#include <stdatomic.h>
#include <stdint.h>

struct event_base;

/* The load the engines report (loadmetrics.c): scrapes on the main thread's base; a no-op
 * without --load-metrics.  Counters for the stats. */
int lb_load_start(struct event_base *base);
void lb_load_stop(void);
extern _Atomic uint64_t lb_load_scrapes, lb_load_reports, lb_load_failures;

#endif
