/* chring-lb: backend objects, their per-worker connection pools, retirement (backend.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_BACKEND_H
#define CHRING_LB_BACKEND_H

#include <arpa/inet.h>
#include <event2/util.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct worker;
struct proxy;

struct bconn {               /* one keep-alive connection to a backend, owned by one worker */
    struct bufferevent *bev; /* NULL once an idle connection closed or misbehaved */
    bool reused;             /* it has carried a complete answer before */
    struct bconn *next;
};

struct pool {
    struct bconn *idle;
    unsigned nidle;
};

struct backend {
    char *name; /* member name, "host:port" as written */
    char addr[INET6_ADDRSTRLEN];
    struct sockaddr_storage sa; /* addr and port, for connect() */
    socklen_t salen;
    char hosthdr[300]; /* Host header when the client sent none */
    uint16_t port;
    struct pool *pools; /* [lb_cfg.threads], pools[w] touched only by worker w */
    bool *reaped;       /* [lb_cfg.threads], under the backends' lock */
    unsigned reap_left;
    bool retired;
    struct backend *prev, *next; /* every backend alive, under the backends' lock */
    _Atomic uint64_t requests, failures, retries_in, bytes_out;
    _Atomic uint64_t downs;         /* times passive health took it out of the ring */
    _Atomic uint64_t slow;          /* attempts that failed while it answered other requests:
                                       not held against it (health.c) */
    _Atomic int64_t last_answer_ms; /* an answer's head last arrived from it (monotonic) */
    _Atomic uint64_t last_failure;  /* the last failure not held against it: the client's
                                       address hashed (high 32 bits), the time in ms (low 32) */
    _Atomic int64_t down_until_ms;  /* passive health: down in the ring until then (monotonic) */
    _Atomic int64_t drain_until_ms; /* leaving: removed by then at the latest (0: not leaving);
                                       written by the main thread only */
};

/* Resolves name ("host:port") and registers a new backend object.  Returns it, or NULL with a
 * message in err.  Main thread. */
struct backend *lb_backend_new(const char *name, char *err, size_t errcap);
/* Unregisters and frees a backend that never made it into the ring.  Main thread. */
void lb_backend_discard(struct backend *be);
/* The ring's retire callback (chring_config_t.retire): may run on any thread. */
void lb_backend_retire(void *udata, void *ctx);
/* Worker event (arg: the worker): drops the worker's pool of every retired backend; the last
 * worker to do so frees the object.  Also called directly at shutdown. */
void lb_backend_reap_cb(evutil_socket_t fd, short what, void *arg);
/* At shutdown, workers stopped: from now on a retired backend is freed at once; every pool is
 * emptied. */
void lb_backends_shutdown(void);
/* After chring_free: frees every backend still registered (retired but not reaped). */
void lb_backends_free_all(void);

/* Passive health (health.c): a failed attempt marks the backend down in the ring for
 * --fail-timeout (its keys go to their next replica, no rebuild); the main thread applies it
 * (chring_set_down) within an event-loop turn and sets it up again when the time has passed,
 * and never holds more than half of the members down at once.  Any thread; a success changes
 * nothing. */
void lb_backend_mark(struct backend *be, bool ok);
/* An attempt of client peer (its address) on be that started at start_ms (monotonic) failed after
 * its connection was made (a timeout or a close before the answer's head): held against be, and
 * marked as above, only when be answered no request since start_ms and another client's attempt
 * failed the same way within the last two --backend-timeout, so that one client's slow or
 * failing requests (a slow endpoint, a long prefill) cannot take a backend out of the ring.
 * Returns true when it was held against be.  Any thread. */
bool lb_backend_attempt_failed(struct backend *be, int64_t start_ms, const char *peer);
/* An answer's head arrived from be. */
void lb_backend_answered(struct backend *be);

/* An idle connection of worker w to be (one that has not closed or sent a byte while idle), or
 * a new one, connecting.  Returns NULL when none can be made.  Worker w's thread only. */
struct bconn *lb_pool_get(struct worker *w, struct backend *be);
/* Gives bc (may be NULL) back to worker w's pool of be: the caller guarantees that its last
 * answer ended exactly at its framing with no byte left unread.  An excess connection is freed
 * later, so this may be called from inside the connection's own callbacks.  Worker w's thread
 * only. */
void lb_pool_put(struct worker *w, struct backend *be, struct bconn *bc);
/* Frees bc (may be NULL) and closes its connection; safe inside its own callbacks. */
void lb_bconn_free(struct bconn *bc);
/* Worker event (arg: the worker): frees the connections lb_pool_put set aside. */
void lb_pool_free_dead_cb(evutil_socket_t fd, short what, void *arg);

#endif
