/* chring-lb: a membership feed's set (feed.c): names -> weights, brought to the ring as the
 * differences.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_FEED_H
#define CHRING_LB_FEED_H

#include <stdbool.h>
#include <stdint.h>

struct backend;
struct event_base;
struct lb_feed;

/* Called on the main thread once a change of the set is published (rc 0), or was not (rc -1,
 * logged); full: it held a replace (lb_feed_replace_begin/_end); cpu_ms: the publish's CPU time.
 * Before lb_writer_start, before lb_feed_apply returns. */
typedef void lb_feed_applied_fn(int rc, bool full, int64_t cpu_ms, void *arg);

/* A feed's statistics (any thread; a copy). */
struct lb_feed_stats {
    bool applied;        /* a change of the set has been published */
    uint64_t revision;   /* the revision the ring holds (the feed's counter: etcd's) */
    uint64_t members;    /* entries of the set, as applied */
    uint64_t points;     /* their points, as applied */
    uint64_t refused;    /* puts refused above the points cap */
    uint64_t resolving;  /* names with the resolver now */
    uint64_t unresolved; /* names that did not resolve, tried again every 10 s */
    uint64_t resolves;   /* lookups answered */
};

/* A new empty set on the main thread's base (NULL: names that need DNS must come with their
 * backend, lb_feed_put_backend).  label names it in the log ("etcd": lines start "etcd: "),
 * cap_option is the option of max_points (points in all: weights x points_per_weight) for the
 * refusal's line; applied (may be NULL) is told of each publish.  NULL: out of memory. */
struct lb_feed *lb_feed_new(struct event_base *base, const char *label, const char *cap_option,
                            uint64_t max_points, uint64_t points_per_weight,
                            lb_feed_applied_fn *applied, void *arg);
/* Gives a set made without a base its events (the resolver's answers, the retries).  Returns 0
 * (also when it has them), -1 out of memory.  Main thread. */
int lb_feed_attach(struct lb_feed *f, struct event_base *base);
/* Frees the set (a change under way is writer.c's to finish).  Main thread. */
void lb_feed_free(struct lb_feed *f);

/* A put of name (owned by the call from then on) at weight >= 1: the entry's weight in the set,
 * applied with the next lb_feed_apply.  A put that would take the set above max_points is
 * refused (the first 3 since lb_feed_log_refused logged, all counted) and the entry keeps
 * its weight.  Returns 0 (applied or refused), -1 out of memory. */
int lb_feed_put(struct lb_feed *f, char *name, uint32_t weight);
/* A put of name (owned) at weight with its backend be (owned; may be NULL), set up by the caller:
 * used if the name joins the ring with the next apply, discarded otherwise.  No points cap
 * (the caller checked it).  Returns 0, -1 out of memory (be discarded). */
int lb_feed_put_backend(struct lb_feed *f, char *name, uint32_t weight, struct backend *be);
/* A delete of name (absent: nothing).  Returns 0, -1 out of memory. */
int lb_feed_del(struct lb_feed *f, const char *name);
/* A replace: between _begin and _end the set is what is put, every other entry deleted.
 * _end returns 0, -1 out of memory. */
void lb_feed_replace_begin(struct lb_feed *f);
int lb_feed_replace_end(struct lb_feed *f);
/* Logs how many more puts were refused than shown since the last call. */
void lb_feed_log_refused(struct lb_feed *f);
/* Forgets what was put or deleted since the last apply (after a failure: a replace follows). */
void lb_feed_drop(struct lb_feed *f);
/* The puts and deletes since the last apply, as one change of the ring (why: the log line's
 * start; rev: the feed's revision, for the stats; full: also every ring member that is not in
 * the set leaves): published by writer.c's writer thread (before lb_writer_start: here, at
 * once); while a change is being published, they wait and join whatever comes next.  Names
 * that are not numeric addresses and came without a backend are resolved by the resolver
 * thread and join the ring when their answer comes back.  The feed's applied callback says
 * how it went.  Main thread. */
void lb_feed_apply(struct lb_feed *f, const char *why, uint64_t rev, bool full);
/* A message that changed nothing but moved the revision to rev. */
void lb_feed_revision(struct lb_feed *f, uint64_t rev);
/* The set's points now (weights x points_per_weight, what is put, applied or not). */
uint64_t lb_feed_points(const struct lb_feed *f);
/* True while a change of the set is being published or waits to be. */
bool lb_feed_busy(const struct lb_feed *f);
void lb_feed_stats(const struct lb_feed *f, struct lb_feed_stats *out);

#endif
