/* chring-lb: backend objects, their per-worker connection pools, and their retirement (their
 * passive health is health.c's).
 *
 * SPDX-License-Identifier: MIT
 *
 * A backend object is a ring member's udata.  Every object alive is on one list under one lock,
 * from lb_backend_new until it is freed: by lb_backend_discard (never in the ring), by the last
 * worker reaping it after the ring retired it, or at shutdown.  pools[w] is touched only by
 * worker w's thread, so the request path takes no lock.
 */
#define _GNU_SOURCE
#include "backend.h"
#include "config.h"
#include "log.h"
#include "members.h"
#include "worker.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static pthread_mutex_t backends_lock = PTHREAD_MUTEX_INITIALIZER;
static struct backend *backends; /* every backend object alive */
static bool shutting_down;       /* under backends_lock: workers are gone, free directly */

/* ------------------------------------------------------------------------------------------ */
/* connection pools                                                                            */

void lb_bconn_free(struct bconn *bc)
{
    if (bc) {
        if (bc->bev)
            bufferevent_free(bc->bev);
        free(bc);
    }
}

/* Frees every connection of the list *head. */
static void bconn_free_list(struct bconn **head)
{
    while (*head) {
        struct bconn *bc = *head;
        *head = bc->next;
        lb_bconn_free(bc);
    }
}

static void pool_clear(struct pool *pl)
{
    bconn_free_list(&pl->idle);
    pl->nidle = 0;
}

/* An idle connection that becomes readable has either closed or sent bytes no request asked
 * for: either way it must not carry another request.  Its socket is closed at once; the bconn
 * stays in the pool, empty, until lb_pool_get meets it. */
static void on_idle_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what;
    struct bconn *bc = arg;
    bufferevent_free(bc->bev);
    bc->bev = NULL;
}

static void on_idle_read(struct bufferevent *bev, void *arg)
{
    on_idle_event(bev, 0, arg);
}

struct bconn *lb_pool_get(struct worker *w, struct backend *be)
{
    struct pool *pl = &be->pools[w->id];
    while (pl->idle) {
        struct bconn *bc = pl->idle;
        pl->idle = bc->next;
        pl->nidle--;
        bc->next = NULL;
        if (bc->bev && evbuffer_get_length(bufferevent_get_input(bc->bev)) == 0)
            return bc;
        lb_bconn_free(bc);
    }
    struct bconn *bc = calloc(1, sizeof *bc);
    if (!bc)
        return NULL;
    bc->bev = bufferevent_socket_new(w->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bc->bev ||
        bufferevent_socket_connect(bc->bev, (struct sockaddr *)&be->sa, (int)be->salen) < 0) {
        lb_bconn_free(bc);
        return NULL;
    }
    return bc;
}

void lb_pool_put(struct worker *w, struct backend *be, struct bconn *bc)
{
    if (!bc)
        return;
    struct pool *pl = &be->pools[w->id];
    if (bc->bev && pl->nidle < lb_cfg.max_idle) {
        bc->reused = true;
        bufferevent_setcb(bc->bev, on_idle_read, NULL, on_idle_event, bc);
        bufferevent_set_timeouts(bc->bev, NULL, NULL);
        bufferevent_enable(bc->bev, EV_READ);
        bc->next = pl->idle;
        pl->idle = bc;
        pl->nidle++;
        return;
    }
    if (bc->bev) {
        bufferevent_setcb(bc->bev, NULL, NULL, NULL, NULL);
        bufferevent_disable(bc->bev, EV_READ | EV_WRITE);
    }
    bc->next = w->dead;
    w->dead = bc;
    event_active(w->free_ev, 0, 0);
}

void lb_pool_free_dead_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    bconn_free_list(&w->dead);
}

/* ------------------------------------------------------------------------------------------ */
/* backend objects                                                                             */

static void backend_destroy(struct backend *be)
{
    if (!be)
        return;
    if (be->pools)
        for (unsigned w = 0; w < lb_cfg.threads; w++)
            pool_clear(&be->pools[w]);
    free(be->pools);
    free(be->reaped);
    free(be->name);
    free(be);
}

/* Resolves host into be->addr, preferring IPv4 (the usual backend address), else the first
 * answer.  Returns 0, or -1 with a message in err. */
static int backend_resolve(struct backend *be, const char *name, const char *host, char *err,
                           size_t errcap)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host, NULL, &hints, &res);
    if (gai != 0 || !res) {
        snprintf(err, errcap, "%s: cannot resolve %s: %s", name, host, gai_strerror(gai));
        return -1;
    }
    struct addrinfo *pick = res;
    for (struct addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    memcpy(&be->sa, pick->ai_addr, pick->ai_addrlen);
    be->salen = (socklen_t)pick->ai_addrlen;
    if (pick->ai_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)pick->ai_addr)->sin_addr, be->addr,
                  sizeof be->addr);
    else
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)pick->ai_addr)->sin6_addr, be->addr,
                  sizeof be->addr);
    freeaddrinfo(res);
    return 0;
}

struct backend *lb_backend_new(const char *name, char *err, size_t errcap)
{
    char host[256];
    uint16_t port;
    if (lb_split_hostport(name, host, sizeof host, &port) < 0) {
        snprintf(err, errcap, "%s: not host:port", name);
        return NULL;
    }
    struct backend *be = calloc(1, sizeof *be);
    if (!be) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    if (backend_resolve(be, name, host, err, errcap) < 0) {
        free(be);
        return NULL;
    }
    be->port = port;
    if (be->sa.ss_family == AF_INET)
        ((struct sockaddr_in *)&be->sa)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)&be->sa)->sin6_port = htons(port);
    snprintf(be->hosthdr, sizeof be->hosthdr, "%s", name);
    be->name = strdup(name);
    be->pools = calloc(lb_cfg.threads, sizeof *be->pools);
    be->reaped = calloc(lb_cfg.threads, sizeof *be->reaped);
    if (!be->name || !be->pools || !be->reaped) {
        backend_destroy(be);
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&backends_lock);
    be->next = backends;
    if (backends)
        backends->prev = be;
    backends = be;
    pthread_mutex_unlock(&backends_lock);
    return be;
}

static void backend_unlink_locked(struct backend *be)
{
    if (be->prev)
        be->prev->next = be->next;
    else
        backends = be->next;
    if (be->next)
        be->next->prev = be->prev;
    be->prev = be->next = NULL;
}

void lb_backend_discard(struct backend *be)
{
    pthread_mutex_lock(&backends_lock);
    backend_unlink_locked(be);
    pthread_mutex_unlock(&backends_lock);
    backend_destroy(be);
}

/* ------------------------------------------------------------------------------------------ */
/* retirement                                                                                  */

/* Runs on any thread: a worker releasing the last lease, the main thread syncing, liburcu's
 * call_rcu thread, chring_free. */
void lb_backend_retire(void *udata, void *ctx)
{
    (void)ctx;
    struct backend *be = udata;
    if (!be)
        return;
    pthread_mutex_lock(&backends_lock);
    if (shutting_down) {
        backend_unlink_locked(be);
        pthread_mutex_unlock(&backends_lock);
        backend_destroy(be);
        return;
    }
    be->retired = true;
    be->reap_left = lb_cfg.threads;
    pthread_mutex_unlock(&backends_lock);
    if (lb_cfg.verbose)
        lb_log("retired %s", be->name);
    for (unsigned w = 0; w < lb_cfg.threads; w++)
        event_active(lb_workers[w].reap_ev, 0, 0);
}

void lb_backend_reap_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    pthread_mutex_lock(&backends_lock);
    struct backend *be = backends;
    while (be) {
        struct backend *next = be->next;
        if (be->retired && !be->reaped[w->id]) {
            pool_clear(&be->pools[w->id]);
            be->reaped[w->id] = true;
            if (--be->reap_left == 0) {
                backend_unlink_locked(be);
                backend_destroy(be);
            }
        }
        be = next;
    }
    pthread_mutex_unlock(&backends_lock);
}

void lb_backends_shutdown(void)
{
    pthread_mutex_lock(&backends_lock);
    shutting_down = true;
    for (struct backend *be = backends; be; be = be->next)
        for (unsigned i = 0; i < lb_cfg.threads; i++)
            pool_clear(&be->pools[i]);
    pthread_mutex_unlock(&backends_lock);
}

void lb_backends_free_all(void)
{
    pthread_mutex_lock(&backends_lock);
    while (backends) {
        struct backend *be = backends;
        backend_unlink_locked(be);
        backend_destroy(be);
    }
    pthread_mutex_unlock(&backends_lock);
}
