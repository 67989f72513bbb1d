/* chring-lb: the resolver: the one thread that sets up backends whose names need DNS, for both
 * membership feeds (the etcd feed, etcd.c and feed.c; the members file's SIGHUP reload,
 * membership.c).  getaddrinfo may take seconds; the main thread, which serves --stats-listen and
 * applies passive health, never waits on it (docs/lb.md, "The etcd feed", "Membership").
 *
 * SPDX-License-Identifier: MIT
 *
 * A queue in, a list out, both under one lock: the thread takes the oldest name, calls
 * lb_backend_new (which only allocates, resolves and registers the object under the backends'
 * lock, so any thread may call it), puts the answer on the done list and activates an event of
 * the main thread's base (thread-safe: evthread_use_pthreads), which hands each client its
 * answers in the order asked.  One lookup at a time: a feed's names are few and a slow name
 * delays the next ones, never the main thread.
 */
#define _GNU_SOURCE
#include "resolver.h"
#include "backend.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static pthread_t thread;
static bool running, quit;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct lb_lookup *todo, **todo_tail = &todo; /* under lock, oldest first */
static struct lb_lookup *done, **done_tail = &done;
static struct event *done_ev;

void lb_lookups_free(struct lb_lookup *list)
{
    while (list) {
        struct lb_lookup *next = list->next;
        if (list->be)
            lb_backend_discard(list->be);
        free(list->name);
        free(list);
        list = next;
    }
}

static void *resolver_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!todo && !quit)
            pthread_cond_wait(&cond, &lock);
        if (quit)
            break;
        struct lb_lookup *l = todo;
        todo = l->next;
        if (!todo)
            todo_tail = &todo;
        pthread_mutex_unlock(&lock);
        l->next = NULL;
        l->be = lb_backend_new(l->name, l->err, sizeof l->err);
        pthread_mutex_lock(&lock);
        *done_tail = l;
        done_tail = &l->next;
        if (done_ev)
            event_active(done_ev, 0, 0);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* The answers (main thread): each client gets its own, in the order asked. */
static void on_done(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    pthread_mutex_lock(&lock);
    struct lb_lookup *list = done;
    done = NULL;
    done_tail = &done;
    pthread_mutex_unlock(&lock);
    while (list) {
        const struct lb_resolver_client *c = list->client;
        struct lb_lookup *mine = NULL, **mt = &mine, *rest = NULL, **rt = &rest;
        for (struct lb_lookup *l = list, *next; l; l = next) {
            next = l->next;
            l->next = NULL;
            if (l->client == c) {
                *mt = l;
                mt = &l->next;
            } else {
                *rt = l;
                rt = &l->next;
            }
        }
        list = rest;
        c->done(mine, c->arg);
    }
}

int lb_resolver_start(struct event_base *base)
{
    done_ev = event_new(base, -1, 0, on_done, NULL);
    return done_ev ? 0 : -1;
}

int lb_resolve(const struct lb_resolver_client *c, const char *name, size_t tag)
{
    if (!done_ev)
        return -1;
    struct lb_lookup *l = calloc(1, sizeof *l);
    if (!l || !(l->name = strdup(name))) {
        free(l);
        return -1;
    }
    l->client = c;
    l->tag = tag;
    pthread_mutex_lock(&lock);
    if (!running) {
        quit = false;
        if (pthread_create(&thread, NULL, resolver_main, NULL) != 0) {
            pthread_mutex_unlock(&lock);
            free(l->name);
            free(l);
            return -1;
        }
        running = true;
    }
    *todo_tail = l;
    todo_tail = &l->next;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    return 0;
}

void lb_resolver_stop(void)
{
    pthread_mutex_lock(&lock);
    quit = true;
    bool was = running;
    running = false;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    if (was)
        pthread_join(thread, NULL);
    lb_lookups_free(todo);
    lb_lookups_free(done);
    todo = done = NULL;
    todo_tail = &todo;
    done_tail = &done;
    if (done_ev)
        event_free(done_ev);
    done_ev = NULL;
}
