/* chring-lb: the membership from etcd (etcd.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_ETCD_H
#define CHRING_LB_ETCD_H

#include <stdbool.h>

struct evbuffer;
struct event_base;

/* Starts the etcd feed when --etcd was given (0 otherwise too).  Returns 0 / -1. */
int lb_etcd_start(struct event_base *base);
void lb_etcd_stop(void);
/* True once etcd has given a membership: from then on it, not --members, is the membership. */
bool lb_etcd_active(void);
/* The "etcd" member of the stats JSON, with its leading comma (nothing without --etcd).  Any
 * thread. */
void lb_etcd_stats(struct evbuffer *b);

#endif
