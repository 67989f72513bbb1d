/* chring-lb: passive health and drains through the ring, on the main thread (health.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_HEALTH_H
#define CHRING_LB_HEALTH_H

#include <chring.h>

#include <stdatomic.h>
#include <stdint.h>

struct event_base;

/* Failed attempts that passive health did not act on because half of the members were down
 * already (the panic threshold), for the stats. */
extern _Atomic uint64_t lb_health_panics;
/* Starts the health event and timer.  Returns 0 / -1. */
int lb_health_start(struct event_base *base);
void lb_health_stop(void);
/* A member left the membership: ramps its admission scale to 0 over --drain; health.c removes
 * it when its load is 0 or --drain has passed.  Main thread; in a read section on s. */
void lb_health_drain(const chring_snap_t *s, const chring_member_t *m);
/* A leaving member is wanted again: its scale ramps back up.  Main thread. */
void lb_health_undrain(const chring_member_t *m);

#endif
