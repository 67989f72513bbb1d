/* chring-lb: the map of the balancer's files, and the relaxed counter macros its counting files
 * share (nothing else: each file includes the headers of the concepts it uses).
 *
 * SPDX-License-Identifier: MIT
 *
 * chring-lb is a multithreaded HTTP/1.1 reverse proxy that routes each request by a key on a
 * chring ring with bounded loads.
 *
 * Shape.  N worker threads, each with its own libevent event_base and HTTP/1.1 server (conn.c)
 * accepting on its own SO_REUSEPORT listener (one shared listener when SO_REUSEPORT is
 * unavailable).  A request takes a lease with chring_acquire() on its key; the member's udata
 * is a struct backend holding the address and one idle-connection pool per worker (keep-alive
 * bufferevents, used only by their worker's thread).  The backend's answer is relayed as it
 * arrives (its head, then its body piece by piece); the lease is released when the answer has
 * been relayed completely, or the client has gone, or the backend failed.  A backend that
 * refuses or times out before answering is retried once, placed again with bounded loads over
 * every member but the failed one (chring_acquire_skip), then 502.
 *
 * The main thread owns the ring's writer side: it applies each new membership (--backend and
 * --members at start and on SIGHUP, or etcd's set) as its differences with one chring_update(),
 * published by the writer thread (writer.c) once serving (connections are not dropped: members
 * that stay keep their object, counters and pools).  A
 * removed member's struct backend is handed to the ring's retire callback, which may run on any
 * thread: it queues the backend and wakes every worker; each worker frees its own pool of it;
 * the last one frees the object.
 *
 * Files, each one concept and its header (config.h, h1.h, h1_evbuffer.h, conn.h, log.h,
 * backend.h, worker.h, proxy.h, limits.h, status.h for status.c, stats.c and metrics.c,
 * membership.h, health.h, etcd.h, loadmetrics.h, allow.h, listen.h, members.h, text.h, prompt.h,
 * prom_read.h, etcd_read.h, feed.h, writer.h, resolver.h):
 *   config.c      the options: lb_cfg and its parsing
 *   log.c         the timestamped log line on standard error
 *   backend.c     backend objects, per-worker connection pools, retirement
 *   h1.c          strict HTTP/1.1 framing: message heads and bodies parsed from bytes; a leaf
 *                 library (no libevent, nothing of lb/ but h1.h)
 *   h1_evbuffer.c h1 on libevent's buffers: the head's end and the body read in place
 *   conn.c        the client side: chring-lb's own HTTP/1.1 server connections (conn.h)
 *   http.c        fields copied without the hop-by-hop ones (RFC 9110 section 7.6.1), and
 *                 the Host check of /_chring/
 *   key.c         the routing key of a request
 *   prompt.c      --key prompt: the model and the prompt of an OpenAI-compatible JSON body,
 *                 read with libjansson after a bounds scan (prompt.h; pure code, fuzzed)
 *   forward.c     the backend request built from the client's request
 *   proxy.c       the proxying of one request: lease, attempts, retry, relay of the answer
 *   limits.c      limits: connections (accept paused at the limit, EMFILE backoff), requests in
 *                 flight, buffered body bytes in all
 *   stats.c       GET /_chring/stats: the JSON, O(points) per request but the summary; a
 *                 large ring's digest computed by a thread of its own
 *   metrics.c     GET /_chring/metrics: the same in Prometheus' text format
 *   status.c      the stats listener (--stats-listen, --stats-allow) and the status page
 *                 GET /_chring/
 *   worker.c      worker threads: event loop, listener, the request entry point
 *   membership.c  the members file's feed: --backend plus --members at start and on SIGHUP,
 *                 a replace of its set (feed.c)
 *   writer.c      the ring's writer: a membership change as one chring_update of its
 *                 differences, published on the main thread or by the writer thread, members
 *                 leaving through a drain kept until they leave (writer.h)
 *   feed.c        a feed's set (etcd's, the members file's): names -> weights, puts and
 *                 deletes applied as the differences (feed.h)
 *   resolver.c    the one resolver thread and its queue, answers handed to the main loop
 *                 (resolver.h)
 *   health.c      passive health through the ring (chring_set_down), drains, on the main thread
 *   allow.c       --stats-allow: which peers may read /_chring/ (allow.h)
 *   listen.c      listening sockets for --listen and --stats-listen (listen.h)
 *   etcd.c        the etcd client: range, then watch, over etcd's v3 JSON gateway, into its
 *                 feed's set
 *   loadmetrics.c --load-metrics: every backend's Prometheus text scraped from the main
 *                 thread, the named gauges summed (prom_read.c, pure code, fuzzed) and
 *                 reported to the ring (chring_report_load)
 *   etcd_read.c   etcd's answers (JSON through libjansson, base64) read into changes
 *                 (etcd_read.h)
 *   text.c        bytes from outside made safe for a log line or JSON (text.h)
 *   chring-lb.c   main: setup, signals, shutdown
 * members.c (members.h) parses "host:port[=weight]" entries; chring-lb-expect uses it too.
 */
#ifndef CHRING_LB_H
#define CHRING_LB_H

/* One header per concept (the list above), each file including the ones it uses; this one keeps
 * only what every counting file shares. */
#include <stdatomic.h>

/* Relaxed atomic counters: statistics only, nothing is ordered by them. */
#define ADD(x, v) atomic_fetch_add_explicit(&(x), (v), memory_order_relaxed)
#define SUB(x, v) atomic_fetch_sub_explicit(&(x), (v), memory_order_relaxed)
#define GET(x) atomic_load_explicit(&(x), memory_order_relaxed)

#endif
