/* chring-lb: listening sockets (listen.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_LISTEN_H
#define CHRING_LB_LISTEN_H

#include <stdbool.h>
#include <stdint.h>

/* Opens a listening socket on --listen.  Returns the descriptor, -2 when reuseport was asked
 * for and SO_REUSEPORT is unavailable, -1 on another error (logged). */
int lb_listen_socket(bool reuseport);
/* The same on host:port. */
int lb_listen_on(const char *host, uint16_t port, bool reuseport);

#endif
