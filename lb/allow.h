/* chring-lb: --stats-allow (allow.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_ALLOW_H
#define CHRING_LB_ALLOW_H

#include <stdbool.h>

/* Parses --stats-allow (NULL: loopback only).  Returns 0 / -1 (reported). */
int lb_stats_allow_parse(const char *list);
/* True when peer (an address as inet_ntop writes it) is in --stats-allow.  Any thread. */
bool lb_stats_peer_allowed(const char *peer);
/* True when --stats-allow is 'any'.  Any thread (set before the threads start). */
bool lb_stats_allow_any(void);

#endif
