/* chring-lb: the ring's writer side: the membership is --backend plus the members file, applied
 * as its differences with one chring_update at start and on every SIGHUP (or etcd's set and
 * changes, etcd.c); with --drain, members that leave stay until health.c removes them.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "lb.h"
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Atomic uint64_t lb_reloads, lb_reload_errors;

/* Logs msg (which quotes a file's bytes or a name) quoted, then what follows. */
static void log_quoted(const char *msg, const char *then)
{
    char q[700];
    lb_text_quote(q, sizeof q, msg, strlen(msg));
    lb_log("%s; %s", q, then);
}

/* Reads --backend plus the members file into es.  Returns 0, or -1 (logged, es freed). */
static int read_entries(lb_entries_t *es)
{
    char msg[512] = "";
    const char *err = NULL;
    for (size_t i = 0; i < lb_cfg.static_entries.n; i++) {
        char tok[300];
        snprintf(tok, sizeof tok, "%s=%u", lb_cfg.static_entries.v[i].name,
                 lb_cfg.static_entries.v[i].weight);
        if (lb_entries_put(es, tok, &err) < 0) {
            lb_log("%s", err);
            lb_entries_free(es);
            return -1;
        }
    }
    if (lb_cfg.members_file && lb_entries_read_file(es, lb_cfg.members_file, msg, sizeof msg) < 0) {
        log_quoted(msg, "membership unchanged");
        lb_entries_free(es);
        return -1;
    }
    return 0;
}

static bool entry_wanted(const char *name, void *ctx)
{
    return lb_entries_find(ctx, name) != NULL;
}

/* Main thread only (the only writer), so what the snapshot shows is still the membership when
 * lb_membership_change runs.  Only names the ring does not hold yet are set up (and resolved,
 * on this thread: a name the ring knows costs no lookup); the rest is the differences. */
int lb_membership_set(const lb_entries_t *es, const char *what)
{
    char msg[512] = "";
    struct lb_change *ch = calloc(es->n + 1, sizeof *ch);
    if (!ch) {
        lb_log("%s: out of memory; membership unchanged", what);
        return -1;
    }
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    size_t k = 0;
    int rc = 0;
    for (size_t i = 0; i < es->n; i++) {
        ch[k] = (struct lb_change){es->v[i].name, es->v[i].weight, NULL};
        if (!chring_snap_find(s, es->v[i].name)) {
            ch[k].be = lb_backend_new(es->v[i].name, msg, sizeof msg);
            if (!ch[k].be) {
                log_quoted(msg, "membership unchanged");
                rc = -1;
                break;
            }
        }
        k++;
    }
    chring_snap_exit(lb_ring, s);
    if (rc < 0) {
        for (size_t i = 0; i < k; i++)
            if (ch[i].be)
                lb_backend_discard(ch[i].be);
    } else {
        rc = lb_membership_change(ch, k, entry_wanted, (void *)es, what);
    }
    free(ch);
    return rc;
}

static int64_t ms_of(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lb_membership_apply(bool initial)
{
    if (!initial && lb_etcd_active()) {
        lb_log("SIGHUP: the membership comes from etcd (--etcd); --members not applied");
        return -1;
    }
    int64_t t0 = ms_of(CLOCK_MONOTONIC), c0 = ms_of(CLOCK_PROCESS_CPUTIME_ID);
    lb_entries_t es = {0};
    if (read_entries(&es) < 0)
        return -1;
    int64_t t1 = ms_of(CLOCK_MONOTONIC), c1 = ms_of(CLOCK_PROCESS_CPUTIME_ID);
    int rc = lb_membership_set(&es, initial ? "loaded" : "reloaded");
    /* The process's CPU time: the workers' share of it is small while a reload runs, and it is
     * what the tests bound (wall clock on a shared machine says less). */
    lb_log("%s: %zu entries read in %lld ms (%lld ms of CPU), applied in %lld ms (%lld ms of CPU)%s",
           initial ? "load" : "reload", es.n, (long long)(t1 - t0), (long long)(c1 - c0),
           (long long)(ms_of(CLOCK_MONOTONIC) - t1),
           (long long)(ms_of(CLOCK_PROCESS_CPUTIME_ID) - c1), rc < 0 ? "; failed" : "");
    lb_entries_free(&es);
    return rc;
}

void lb_membership_reload(void)
{
    if (lb_membership_apply(false) == 0)
        ADD(lb_reloads, 1);
    else
        ADD(lb_reload_errors, 1);
}

/* Main thread only, like lb_membership_set: a member found in the snapshot is still a member
 * when chring_update runs. */
int lb_membership_change(struct lb_change *ch, size_t n, bool (*known)(const char *, void *),
                         void *ctx, const char *what)
{
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    size_t nm = known ? chring_snap_len(s) : 0;
    chring_change_t *cc = calloc(n + nm + 1, sizeof *cc);
    const chring_member_t **drain = calloc(n + nm + 1, sizeof *drain);
    const chring_member_t **undrain = calloc(n + 1, sizeof *undrain);
    bool *kept = calloc(n + 1, sizeof *kept); /* ch[i].be went into the ring */
    if (!cc || !drain || !undrain || !kept) {
        chring_snap_exit(lb_ring, s);
        for (size_t i = 0; i < n; i++)
            if (ch[i].be)
                lb_backend_discard(ch[i].be);
        free(cc);
        free(drain);
        free(undrain);
        free(kept);
        lb_log("%s: out of memory; membership unchanged", what);
        return -1;
    }
    size_t k = 0, nd = 0, nu = 0, added = 0, removed = 0, set = 0;
    for (size_t i = 0; i < n; i++) {
        const chring_member_t *m = chring_snap_find(s, ch[i].name);
        if (ch[i].weight == 0) {
            if (!m)
                continue;
            if (lb_cfg.drain_ms > 0) {
                drain[nd++] = m;
                continue;
            }
            cc[k++] = (chring_change_t){ch[i].name, 0, NULL};
            removed++;
        } else if (m) {
            /* the same weight is no change: the batch holds only the differences */
            if (chring_snap_weight(s, m) != ch[i].weight) {
                set++;
                cc[k++] = (chring_change_t){ch[i].name, ch[i].weight, chring_member_udata(m)};
            }
            undrain[nu++] = m;
        } else if (ch[i].be) {
            cc[k++] = (chring_change_t){ch[i].name, ch[i].weight, ch[i].be};
            kept[i] = true;
            added++;
        }
    }
    for (size_t j = 0; j < nm; j++) {
        const chring_member_t *m = chring_snap_member(s, j);
        if (known(chring_member_name(m), ctx))
            continue;
        if (lb_cfg.drain_ms > 0) {
            drain[nd++] = m;
        } else {
            cc[k++] = (chring_change_t){chring_member_name(m), 0, NULL};
            removed++;
        }
    }
    int rc = chring_update(lb_ring, cc, k);
    if (rc < 0)
        lb_log("%s: chring_update: %s; membership unchanged", what, chring_strerror(rc));
    for (size_t i = 0; i < n; i++)
        if (ch[i].be && (rc < 0 || !kept[i]))
            lb_backend_discard(ch[i].be);
    if (rc == 0) {
        for (size_t j = 0; j < nd; j++)
            lb_health_drain(s, drain[j]);
        for (size_t j = 0; j < nu; j++)
            lb_health_undrain(undrain[j]);
        if (added + removed + set + nd > 0 || known) {
            chring_stats_t st;
            chring_stats(lb_ring, &st);
            lb_log("%s: %zu added, %zu removed, %zu weights set, %zu draining; %llu members, "
                   "ring version %llu",
                   what, added, removed, set, nd, (unsigned long long)st.members,
                   (unsigned long long)st.version);
        }
    }
    chring_snap_exit(lb_ring, s);
    free(cc);
    free(drain);
    free(undrain);
    free(kept);
    return rc < 0 ? -1 : 0;
}
