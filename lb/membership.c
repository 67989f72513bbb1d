/* chring-lb: the ring's writer side: the membership is --backend plus the members file, applied
 * with one chring_sync at start and on every SIGHUP (or etcd's set, etcd.c); with --drain, members
 * that leave stay in the sync until health.c removes them.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "lb.h"
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Main thread only (the only writer), so a name found in the snapshot is still a member when
 * chring_sync runs: the sync runs inside the read section on s, which writers may do. */
int lb_membership_set(const lb_entries_t *es, const char *what, bool skip_bad)
{
    char msg[512] = "";
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    size_t nm = chring_snap_len(s);
    chring_change_t *ch = calloc(es->n + nm + 1, sizeof *ch);
    struct backend **fresh = calloc(es->n + 1, sizeof *fresh);
    const char **wanted = calloc(es->n + 1, sizeof *wanted);
    const chring_member_t **leaving = calloc(nm + 1, sizeof *leaving);
    if (!ch || !fresh || !wanted || !leaving) {
        chring_snap_exit(lb_ring, s);
        free(ch);
        free(fresh);
        free(wanted);
        free(leaving);
        return -1;
    }
    int rc = 0;
    size_t k = 0, nleaving = 0, skipped = 0;
    for (size_t i = 0; i < es->n; i++) {
        wanted[i] = es->v[i].name;
        ch[k].name = es->v[i].name;
        ch[k].weight = es->v[i].weight;
        const chring_member_t *m = chring_snap_find(s, es->v[i].name);
        if (m) {
            ch[k++].udata = chring_member_udata(m);
            continue;
        }
        fresh[i] = lb_backend_new(es->v[i].name, msg, sizeof msg);
        if (!fresh[i] && skip_bad) {
            log_quoted(msg, "left out");
            skipped++;
            continue;
        }
        if (!fresh[i]) {
            log_quoted(msg, "membership unchanged");
            rc = -1;
            break;
        }
        ch[k++].udata = fresh[i];
    }
    /* --drain: members that leave stay (own weight, own udata) until health.c removes them */
    if (rc == 0 && lb_cfg.drain_ms > 0) {
        qsort(wanted, es->n, sizeof *wanted, cmp_name);
        for (size_t j = 0; j < nm; j++) {
            const chring_member_t *m = chring_snap_member(s, j);
            const char *name = chring_member_name(m);
            if (es->n && bsearch(&name, wanted, es->n, sizeof *wanted, cmp_name))
                continue;
            ch[k].name = name;
            ch[k].weight = chring_snap_weight(s, m);
            ch[k++].udata = chring_member_udata(m);
            leaving[nleaving++] = m;
        }
    }
    if (rc == 0) {
        rc = chring_sync(lb_ring, ch, k);
        if (rc < 0)
            lb_log("chring_sync: %s; membership unchanged", chring_strerror(rc));
    }
    if (rc < 0) {
        for (size_t i = 0; i < es->n; i++)
            if (fresh[i])
                lb_backend_discard(fresh[i]);
    } else {
        for (size_t j = 0; j < nleaving; j++)
            lb_health_drain(s, leaving[j]);
        for (size_t i = 0; i < es->n; i++) {
            const chring_member_t *m = fresh[i] ? NULL : chring_snap_find(s, es->v[i].name);
            if (m)
                lb_health_undrain(m);
        }
        chring_stats_t st;
        chring_stats(lb_ring, &st);
        lb_log("%s: %zu members (%zu left out, %zu leaving), ring version %llu", what,
               es->n - skipped, skipped, nleaving, (unsigned long long)st.version);
    }
    chring_snap_exit(lb_ring, s);
    free(ch);
    free(fresh);
    free(wanted);
    free(leaving);
    return rc;
}

int lb_membership_apply(bool initial)
{
    if (!initial && lb_etcd_active()) {
        lb_log("SIGHUP: the membership comes from etcd (--etcd); --members not applied");
        return -1;
    }
    lb_entries_t es = {0};
    if (read_entries(&es) < 0)
        return -1;
    int rc = lb_membership_set(&es, initial ? "loaded" : "reloaded", false);
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
            if (chring_snap_weight(s, m) != ch[i].weight)
                set++;
            cc[k++] = (chring_change_t){ch[i].name, ch[i].weight, chring_member_udata(m)};
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
        if (added + removed + set + nd > 0) {
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
