/* chring-lb: listening sockets (the main listener, the stats listener).
 *
 * SPDX-License-Identifier: MIT
 *
 * A leaf: used by worker.c (--listen) and status.c (--stats-listen), uses only config.h and
 * log.h, so neither of those two files needs the other for a socket (docs/lb.md).
 */
#define _GNU_SOURCE
#include "listen.h"

#include "config.h"
#include "log.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Closes fd and frees res, then returns rc. */
static int listen_fail(int fd, struct addrinfo *res, int rc)
{
    close(fd);
    freeaddrinfo(res);
    return rc;
}

int lb_listen_socket(bool reuseport)
{
    return lb_listen_on(lb_cfg.listen_host, lb_cfg.listen_port, reuseport);
}

int lb_listen_on(const char *host, uint16_t listen_port, bool reuseport)
{
    struct addrinfo hints = {0}, *res = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", listen_port);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        lb_log("listen %s:%s: %s", host, port, gai_strerror(gai));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(res);
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
#ifdef SO_REUSEPORT
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
        return listen_fail(fd, res, -2);
#else
    if (reuseport)
        return listen_fail(fd, res, -2);
#endif
    if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
        lb_log("listen %s:%s: %s", host, port, strerror(errno));
        return listen_fail(fd, res, -1);
    }
    freeaddrinfo(res);
    return fd;
}
