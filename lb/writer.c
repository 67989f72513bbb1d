/* chring-lb: the ring's writer: a change of the membership (lb_change: names, weights, backends)
 * made into one chring_update of the differences, --drain applied, and published on the calling
 * thread or by the writer thread (docs/lb.md, "The etcd feed"): at 16 million points a publish
 * takes 1 to 2 s, which the main thread (the stats listener, passive health, the feeds) must not
 * wait for.  Both feeds' sets (feed.c) go through it.
 *
 * SPDX-License-Identifier: MIT
 *
 * A change is prepared on the main thread against the current snapshot (the main thread is the
 * membership's only writer, and nothing else publishes while a change is under way, so what the
 * snapshot shows is still the membership when chring_update runs), its names copied; published;
 * finished on the main thread (the drains, the log line, the digest's recomputation).  One
 * change at a time: lb_ring_busy tells the feeds to wait, and health.c keeps drained members in
 * the ring meanwhile (lb_ring_writing).
 */
#define _GNU_SOURCE
#include "writer.h"
#include "backend.h"
#include "config.h"
#include "health.h"
#include "log.h"
#include "status.h"
#include "worker.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t ms_of(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct wjob;
static struct wjob *writing; /* with the writer thread (main thread) */
static pthread_t writer_thread;
static struct event *written_ev;
static int finish(struct wjob *j);

/* One change under way.  Names are copies: the caller's may go (etcd frees a deleted entry)
 * while the writer thread publishes. */
struct wjob {
    chring_change_t *cc;
    size_t k;
    char **drain, **undrain; /* names drained, undrained once published */
    size_t nd, nu;
    struct backend **be; /* added members' backends: the ring's once published, else discarded */
    size_t nbe;
    size_t added, removed, set;
    bool known;
    char what[128];
    int rc;
    int64_t t0, cpu; /* when it was handed over; the writer's CPU time */
    void (*done)(int, int64_t, void *);
    void *arg;
};

/* Written by the main thread only, read by it (health.c) and by the stats on any thread:
 * relaxed, a flag that publishes no data (what it says of the ring, the ring's own snapshot
 * says). */
_Atomic bool lb_ring_writing;

static void wjob_free(struct wjob *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->k; i++)
        free((char *)j->cc[i].name);
    for (size_t i = 0; i < j->nd; i++)
        free(j->drain[i]);
    for (size_t i = 0; i < j->nu; i++)
        free(j->undrain[i]);
    for (size_t i = 0; i < j->nbe; i++)
        if (j->be[i])
            lb_backend_discard(j->be[i]);
    free(j->cc);
    free(j->drain);
    free(j->undrain);
    free(j->be);
    free(j);
}

/* The change of ch against the current snapshot (main thread, nothing under way), as a job whose
 * names are copies.  Backends of ch not kept are discarded here.  NULL: out of memory (every
 * backend discarded, logged). */
static struct wjob *prepare(struct lb_change *ch, size_t n, bool (*known)(const char *, void *),
                            void *ctx, const char *what)
{
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    size_t nm = known ? chring_snap_len(s) : 0;
    struct wjob *j = calloc(1, sizeof *j);
    if (j) {
        j->cc = calloc(n + nm + 1, sizeof *j->cc);
        j->drain = calloc(n + nm + 1, sizeof *j->drain);
        j->undrain = calloc(n + 1, sizeof *j->undrain);
        j->be = calloc(n + 1, sizeof *j->be);
    }
    bool oom = !j || !j->cc || !j->drain || !j->undrain || !j->be;
    for (size_t i = 0; i < n; i++) {
        struct backend *be = ch[i].be;
        ch[i].be = NULL;
        if (oom) {
            if (be)
                lb_backend_discard(be);
            continue;
        }
        const chring_member_t *m = chring_snap_find(s, ch[i].name);
        char *name = strdup(ch[i].name);
        oom = !name;
        if (ch[i].weight == 0) {
            if (!m || oom) {
                free(name);
            } else if (lb_cfg.drain_ms > 0) {
                j->drain[j->nd++] = name;
            } else {
                j->cc[j->k++] = (chring_change_t){name, 0, NULL};
                j->removed++;
            }
        } else if (m && !oom) {
            /* the same weight is no change: the batch holds only the differences */
            if (chring_snap_weight(s, m) != ch[i].weight) {
                j->set++;
                j->cc[j->k++] = (chring_change_t){name, ch[i].weight, chring_member_udata(m)};
                name = strdup(name);
                oom = !name;
            }
            if (name)
                j->undrain[j->nu++] = name;
        } else if (be && !oom) {
            j->cc[j->k++] = (chring_change_t){name, ch[i].weight, be};
            j->be[j->nbe++] = be;
            be = NULL;
            j->added++;
        } else {
            free(name);
        }
        if (be)
            lb_backend_discard(be);
    }
    for (size_t i = 0; i < nm && !oom; i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        if (known(chring_member_name(m), ctx))
            continue;
        char *name = strdup(chring_member_name(m));
        oom = !name;
        if (oom) {
        } else if (lb_cfg.drain_ms > 0) {
            j->drain[j->nd++] = name;
        } else {
            j->cc[j->k++] = (chring_change_t){name, 0, NULL};
            j->removed++;
        }
    }
    chring_snap_exit(lb_ring, s);
    if (oom) {
        wjob_free(j);
        lb_log("%s: out of memory; membership unchanged", what);
        return NULL;
    }
    j->known = known != NULL;
    snprintf(j->what, sizeof j->what, "%s", what);
    return j;
}

static int64_t cpu_now(void)
{
    return ms_of(CLOCK_THREAD_CPUTIME_ID);
}

/* The publish (any thread): one chring_update. */
static void publish(struct wjob *j)
{
    int64_t c = cpu_now();
    j->rc = chring_update(lb_ring, j->cc, j->k);
    j->cpu = cpu_now() - c;
    if (j->rc == 0)
        j->nbe = 0; /* the ring's now */
}

/* After the publish (main thread): drains, the log line; the job freed.  Returns 0 / -1. */
static int finish(struct wjob *j)
{
    int rc = j->rc;
    if (rc < 0) {
        lb_log("%s: chring_update: %s; membership unchanged", j->what, chring_strerror(rc));
    } else {
        if (j->k > 0)
            lb_stats_kick(); /* a large ring's digest, off this thread */
        const chring_snap_t *s = chring_snap_enter(lb_ring);
        for (size_t i = 0; i < j->nd; i++) {
            const chring_member_t *m = chring_snap_find(s, j->drain[i]);
            if (m)
                lb_health_drain(s, m);
        }
        for (size_t i = 0; i < j->nu; i++) {
            const chring_member_t *m = chring_snap_find(s, j->undrain[i]);
            if (m)
                lb_health_undrain(m);
        }
        chring_snap_exit(lb_ring, s);
        if (j->added + j->removed + j->set + j->nd > 0 || j->known) {
            chring_stats_t st;
            chring_stats(lb_ring, &st);
            lb_log("%s: %zu added, %zu removed, %zu weights set, %zu draining; %llu members, "
                   "ring version %llu",
                   j->what, j->added, j->removed, j->set, j->nd, (unsigned long long)st.members,
                   (unsigned long long)st.version);
        }
    }
    wjob_free(j);
    return rc < 0 ? -1 : 0;
}

/* Main thread only, like lb_membership_set: a member found in the snapshot is still a member
 * when chring_update runs (nothing else publishes while a change is under way). */
int lb_ring_change(struct lb_change *ch, size_t n, bool (*known)(const char *, void *), void *ctx,
                   const char *what)
{
    if (writing) {
        for (size_t i = 0; i < n; i++)
            if (ch[i].be)
                lb_backend_discard(ch[i].be);
        lb_log("%s: a change is being published; membership unchanged", what);
        return -1;
    }
    struct wjob *j = prepare(ch, n, known, ctx, what);
    if (!j)
        return -1;
    publish(j);
    return finish(j);
}

static void *writer_main(void *arg)
{
    publish(arg);
    event_active(written_ev, 0, 0); /* the event base is thread-safe (evthread_use_pthreads) */
    return NULL;
}

static void on_written(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    struct wjob *j = writing;
    if (!j)
        return;
    pthread_join(writer_thread, NULL);
    writing = NULL;
    atomic_store_explicit(&lb_ring_writing, false, memory_order_relaxed);
    void (*done)(int, int64_t, void *) = j->done;
    void *darg = j->arg;
    int64_t ms = ms_of(CLOCK_MONOTONIC) - j->t0, cpu = j->cpu;
    size_t k = j->k;
    int rc = finish(j);
    if (ms >= 100)
        lb_log("ring: a change of %zu members published in %lld ms off the main thread (%lld ms "
               "of CPU)",
               k, (long long)ms, (long long)cpu);
    done(rc, cpu, darg);
}

bool lb_ring_busy(void)
{
    return writing != NULL;
}

int lb_ring_change_async(struct lb_change *ch, size_t n, bool (*known)(const char *, void *),
                         void *ctx, const char *what, void (*done)(int, int64_t, void *), void *arg)
{
    if (!done || !written_ev) {
        int64_t c = cpu_now();
        int rc = lb_ring_change(ch, n, known, ctx, what);
        if (done)
            done(rc, cpu_now() - c, arg);
        return 0;
    }
    if (writing) {
        for (size_t i = 0; i < n; i++)
            if (ch[i].be)
                lb_backend_discard(ch[i].be);
        return -1;
    }
    struct wjob *j = prepare(ch, n, known, ctx, what);
    if (!j)
        return -1;
    j->done = done;
    j->arg = arg;
    j->t0 = ms_of(CLOCK_MONOTONIC);
    writing = j;
    atomic_store_explicit(&lb_ring_writing, true, memory_order_relaxed);
    if (pthread_create(&writer_thread, NULL, writer_main, j) != 0) {
        writing = NULL;
        atomic_store_explicit(&lb_ring_writing, false, memory_order_relaxed);
        publish(j); /* here, then */
        int64_t cpu = j->cpu;
        done(finish(j), cpu, arg);
    }
    return 0;
}

int lb_writer_start(struct event_base *base)
{
    written_ev = event_new(base, -1, 0, on_written, NULL);
    return written_ev ? 0 : -1;
}

void lb_writer_stop(void)
{
    if (writing) { /* a publish under way: waited for, finished without its caller */
        pthread_join(writer_thread, NULL);
        finish(writing);
        writing = NULL;
        atomic_store_explicit(&lb_ring_writing, false, memory_order_relaxed);
    }
    if (written_ev)
        event_free(written_ev);
    written_ev = NULL;
}
