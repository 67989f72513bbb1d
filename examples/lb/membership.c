/* chring-lb: the ring's writer side: the membership is --backend plus the members file, applied
 * with one chring_sync at start and on every SIGHUP.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "lb.h"

#include <stdio.h>
#include <stdlib.h>

_Atomic uint64_t lb_reloads, lb_reload_errors;

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
        lb_log("%s; membership unchanged", msg);
        lb_entries_free(es);
        return -1;
    }
    return 0;
}

/* Main thread only (the only writer), so a name found in the snapshot is still a member when
 * chring_sync runs. */
int lb_membership_apply(bool initial)
{
    lb_entries_t es = {0};
    char msg[512] = "";
    if (read_entries(&es) < 0)
        return -1;
    chring_change_t *ch = calloc(es.n ? es.n : 1, sizeof *ch);
    struct backend **fresh = calloc(es.n ? es.n : 1, sizeof *fresh);
    if (!ch || !fresh) {
        free(ch);
        free(fresh);
        lb_entries_free(&es);
        return -1;
    }
    int rc = 0;
    const chring_snap_t *s = chring_snap_enter(lb_ring);
    for (size_t i = 0; i < es.n; i++) {
        ch[i].name = es.v[i].name;
        ch[i].weight = es.v[i].weight;
        const chring_member_t *m = chring_snap_find(s, es.v[i].name);
        if (m) {
            ch[i].udata = chring_member_udata(m);
            continue;
        }
        fresh[i] = lb_backend_new(es.v[i].name, msg, sizeof msg);
        if (!fresh[i]) {
            lb_log("%s; membership unchanged", msg);
            rc = -1;
            break;
        }
        ch[i].udata = fresh[i];
    }
    chring_snap_exit(lb_ring, s);
    if (rc == 0) {
        rc = chring_sync(lb_ring, ch, es.n);
        if (rc < 0)
            lb_log("chring_sync: %s; membership unchanged", chring_strerror(rc));
    }
    if (rc < 0) {
        for (size_t i = 0; i < es.n; i++)
            if (fresh[i])
                lb_backend_discard(fresh[i]);
    } else {
        chring_stats_t st;
        chring_stats(lb_ring, &st);
        lb_log("%s: %zu members, ring version %llu", initial ? "loaded" : "reloaded", es.n,
               (unsigned long long)st.version);
    }
    free(ch);
    free(fresh);
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
