/* chring-lb: the resolver (resolver.c): one thread and its queue, for both membership feeds.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_RESOLVER_H
#define CHRING_LB_RESOLVER_H

#include <stddef.h>

struct backend;
struct event_base;

/* One lookup: a name to set up as a backend (lb_backend_new: DNS for a name that is not a
 * numeric address), and its answer. */
struct lb_lookup {
    char *name;
    struct backend *be; /* the answer; NULL: did not resolve (err) */
    char err[256];
    size_t tag; /* the client's, as given to lb_resolve */
    const struct lb_resolver_client *client;
    struct lb_lookup *next;
};

/* Who asked: done(list, arg) is called on the main thread with the client's answers, in the
 * order asked (several at once when they came together); the list and its backends are the
 * client's from then on (lb_lookups_free). */
struct lb_resolver_client {
    void (*done)(struct lb_lookup *list, void *arg);
    void *arg;
};

/* Sets up the answers' wake-up on the main thread's event base; the thread starts with the
 * first lookup.  Returns 0 / -1. */
int lb_resolver_start(struct event_base *base);
/* Waits for the lookup under way (bounded by the system resolver's timeouts), stops the thread
 * and frees what was queued or answered and not handed over (backends discarded).  Main thread,
 * after the event loop. */
void lb_resolver_stop(void);
/* Queues name (copied) for client c (which outlives its lookups, or lb_resolver_stop comes
 * first).  Returns 0, or -1: out of memory or no thread (nothing queued).  Main thread. */
int lb_resolve(const struct lb_resolver_client *c, const char *name, size_t tag);
/* Frees a list of answers, discarding the backends left in it.  Any thread. */
void lb_lookups_free(struct lb_lookup *list);

#endif
