/* chring-lb: main: options, listeners, workers, the ring, signals, and the shutdown order.
 *
 * SPDX-License-Identifier: MIT
 *
 * The balancer's shape and its files are described at the top of lb.h.
 */
#define _GNU_SOURCE
#include "backend.h"
#include "config.h"
#include "etcd.h"
#include "health.h"
#include "limits.h"
#include "listen.h"
#include "loadmetrics.h"
#include "log.h"
#include "members.h"
#include "membership.h"
#include "proxy.h"
#include "resolver.h"
#include "status.h"
#include "worker.h"
#include "writer.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/thread.h>

struct worker *lb_workers;
chring_t *lb_ring;

static struct event_base *main_base;

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (sig == SIGHUP) {
        lb_membership_reload();
        return;
    }
    lb_log("signal %d: shutting down", (int)sig);
    event_base_loopbreak(main_base);
}

int main(int argc, char **argv)
{
    if (lb_config_parse(argc, argv) < 0)
        return 2;
    lb_limits_init();
    lb_via_init();
    signal(SIGPIPE, SIG_IGN);
    if (evthread_use_pthreads() < 0) {
        lb_log("evthread_use_pthreads failed");
        return 1;
    }

    int status = 1;
    lb_workers = calloc(lb_cfg.threads, sizeof *lb_workers);
    if (!lb_workers)
        return 1;

    /* listeners: one SO_REUSEPORT socket per worker, else one shared */
    int shared_fd = -1;
    int probe = lb_listen_socket(true);
    if (probe == -2) {
        shared_fd = lb_listen_socket(false);
        if (shared_fd < 0)
            goto out_workers;
    } else if (probe < 0) {
        goto out_workers;
    } else {
        close(probe); /* probe worked; each worker opens its own */
    }
    unsigned started = 0;
    for (unsigned i = 0; i < lb_cfg.threads; i++) {
        if (lb_worker_init(&lb_workers[i], i, shared_fd) < 0) {
            lb_log("cannot set up worker %u (listen %s:%u)", i, lb_cfg.listen_host,
                   lb_cfg.listen_port);
            goto out_init;
        }
    }
    if (shared_fd >= 0)
        close(shared_fd);
    shared_fd = -1;

    chring_config_t rc;
    chring_config_default(&rc);
    rc.profile = lb_cfg.profile;
    rc.vnodes = lb_cfg.vnodes;
    rc.balance = lb_cfg.balance;
    rc.min_capacity = lb_cfg.min_capacity;
    rc.retire = lb_backend_retire;
    rc.slow_start_ms = lb_cfg.slow_start_ms;
    int err = chring_new(&lb_ring, &rc);
    if (err < 0) {
        lb_log("chring_new: %s", chring_strerror(err));
        goto out_init;
    }
    /* A ring-sized spare block kept at rest, so that a sporadic change (one etcd key) copies
     * into pages already faulted in (docs/lb.md, "Memory"); 0..6, checked by config.c. */
    err = chring_set_spares_at_rest(lb_ring, lb_cfg.spare_blocks);
    if (err < 0) {
        lb_log("chring_set_spares_at_rest: %s", chring_strerror(err));
        goto out_ring;
    }
    if (lb_membership_load() < 0)
        goto out_ring;

    main_base = event_base_new();
    if (!main_base)
        goto out_ring;
    struct event *sig_hup = evsignal_new(main_base, SIGHUP, on_signal, NULL);
    struct event *sig_term = evsignal_new(main_base, SIGTERM, on_signal, NULL);
    struct event *sig_int = evsignal_new(main_base, SIGINT, on_signal, NULL);
    if (!sig_hup || !sig_term || !sig_int || event_add(sig_hup, NULL) ||
        event_add(sig_term, NULL) || event_add(sig_int, NULL)) {
        lb_log("cannot install signal handlers");
        goto out_signals;
    }
    if (lb_status_start(main_base) < 0 || lb_health_start(main_base) < 0 ||
        lb_resolver_start(main_base) < 0 || lb_writer_start(main_base) < 0 ||
        lb_membership_start(main_base) < 0 || lb_etcd_start(main_base) < 0 ||
        lb_load_start(main_base) < 0)
        goto out_signals;

    /* Workers start with every signal blocked: libevent's signal pipe lives in the main loop. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (; started < lb_cfg.threads; started++)
        if (pthread_create(&lb_workers[started].thread, NULL, lb_worker_main,
                           &lb_workers[started]) != 0)
            break;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started < lb_cfg.threads) {
        lb_log("cannot start worker threads");
    } else {
        lb_log("listening on %s:%u, %u threads, profile %s, key %s%s%s, balance %g",
               lb_cfg.listen_host, lb_cfg.listen_port, lb_cfg.threads,
               chring_profile_name(lb_cfg.profile),
               lb_cfg.key_kind == KEY_PATH     ? "path"
               : lb_cfg.key_kind == KEY_HEADER ? "header:"
               : lb_cfg.key_kind == KEY_QUERY  ? "query:"
                                               : "prompt",
               lb_cfg.key_name ? lb_cfg.key_name : "", "", lb_cfg.balance);
        event_base_dispatch(main_base);
        status = 0;
    }
    for (unsigned i = 0; i < started; i++)
        event_active(lb_workers[i].stop_ev, 0, 0);
    for (unsigned i = 0; i < started; i++)
        pthread_join(lb_workers[i].thread, NULL);

out_signals:
    lb_writer_stop(); /* a publish under way, before the feeds go */
    lb_membership_stop();
    lb_etcd_stop();
    lb_resolver_stop(); /* after its clients: answers still queued are dropped */
    lb_load_stop();
    lb_health_stop(); /* workers have stopped: nobody wakes it any more */
    if (sig_hup)
        event_free(sig_hup);
    if (sig_term)
        event_free(sig_term);
    if (sig_int)
        event_free(sig_int);
    lb_status_stop();
    event_base_free(main_base);
out_ring:
    /* Workers are stopped: close client connections (releasing leases), reap what was retired,
     * drop every pool, then free the ring, which retires the remaining members. */
    for (unsigned i = 0; i < lb_cfg.threads; i++)
        if (lb_workers[i].base) {
            lb_worker_cleanup(&lb_workers[i]);
            lb_backend_reap_cb(-1, 0, &lb_workers[i]);
        }
    lb_backends_shutdown();
    {
        chring_stats_t st;
        chring_stats(lb_ring, &st);
        if (lb_ring)
            lb_log("exit: %llu leases outstanding, %llu acquires, %llu spills",
                   (unsigned long long)st.leases, (unsigned long long)st.acquires,
                   (unsigned long long)st.spills);
    }
    if (!lb_stats_stop()) {
        /* The digest thread is in a pass over a large ring (up to a second or two at 16 million
         * points): SIGTERM does not wait for it.  The ring cannot be freed under its read
         * section, nor the library's state torn down by exit handlers, so the process ends
         * here; the system takes its memory back. */
        lb_log("exit: the ring's digest is being computed; the ring is not freed");
        _exit(status);
    }
    chring_free(&lb_ring);
    lb_backends_free_all(); /* retired but not reaped: ours now */
out_init:
    for (unsigned i = 0; i < lb_cfg.threads; i++) {
        if (lb_workers[i].listener)
            lb_worker_cleanup(&lb_workers[i]);
        lb_worker_free(&lb_workers[i]);
    }
    if (shared_fd >= 0)
        close(shared_fd);
out_workers:
    free(lb_workers);
    lb_entries_free(&lb_cfg.static_entries);
    libevent_global_shutdown();
    return status;
}
