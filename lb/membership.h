/* chring-lb: the members file's feed (membership.c): --backend plus --members, at start and on
 * SIGHUP.
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
/* From then on a reload's names are resolved by the resolver thread (resolver.c, started before)
 * and the reload applied on the main loop; the file's set gets its events on base.  Returns 0,
 * -1 out of memory. */
int lb_membership_start(struct event_base *base);
/* Drops a reload whose names are being resolved (lb_resolver_stop drops their answers) and the
 * members file's set.  Main thread, after lb_writer_stop, before the ring is freed. */
void lb_membership_stop(void);
/* SIGHUP: re-reads --backend plus the members file, counted in lb_reloads or lb_reload_errors
 * (logged, with the time it took).  The file is read and its differences applied on the main
 * thread; only names the ring does not hold yet and that are not numeric addresses need DNS, and
 * those are resolved by the resolver thread (resolver.c, the etcd feed's too), the file applied
 * when the last answer is in (or refused whole if one does not resolve).  A SIGHUP while names are resolved reads the file again once
 * that reload is done.  Refused while etcd gives the membership.  Main thread. */
void lb_membership_reload(void);
/* Said by the etcd feed (etcd.c) once etcd has given a membership: from then on it, not
 * --members, is the membership, and a SIGHUP reload applies nothing.  Main thread. */
void lb_membership_from_etcd(void);
/* Makes the ring's membership exactly es (what: for the log): the members file's set (feed.c)
 * replaced by es, applied as one change holding only the differences (writer.c, on this
 * thread), --drain applied: a member that is not in es
 * ramps to 0 and stays until health.c removes them; one in es that was leaving stays.  Names the
 * ring does not hold yet are resolved (on this thread); a name that does not resolve fails the
 * whole call.  O(entries + members).  Main thread only.  Returns 0, or -1 with the membership
 * unchanged. */
int lb_membership_set(const lb_entries_t *es, const char *what);

#endif
