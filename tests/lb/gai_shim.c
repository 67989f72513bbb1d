/* Test-only LD_PRELOAD library for tests/lb/lb_input.py and lb_reload.py: a host name that
 * starts with "shim-" resolves to 127.0.0.1, so that member names made of any bytes (invalid
 * UTF-8, bidi controls) can reach the ring of a real chring-lb; glibc refuses such names
 * otherwise.  One that starts with "shim-slow-" takes SHIM_SLOW_MS to resolve (a slow DNS
 * server), and each lookup of a "shim-" name is counted in the file $GAI_SHIM_COUNT (a byte
 * appended) when that is set.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SHIM_SLOW_MS 2000

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    static gai_fn real;
    if (!real) {
        void *sym = dlsym(RTLD_NEXT, "getaddrinfo");
        memcpy(&real, &sym, sizeof real);
    }
    if (node && strncmp(node, "shim-", 5) == 0) {
        const char *count = getenv("GAI_SHIM_COUNT");
        if (count) {
            int fd = open(count, O_WRONLY | O_APPEND | O_CREAT, 0600);
            if (fd >= 0) {
                (void)!write(fd, "x", 1);
                close(fd);
            }
        }
        if (strncmp(node, "shim-slow-", 10) == 0) {
            struct timespec ts = {SHIM_SLOW_MS / 1000, (SHIM_SLOW_MS % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        node = "127.0.0.1";
    }
    return real(node, service, hints, res);
}
