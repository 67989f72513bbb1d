/* Test-only LD_PRELOAD library for tests/lb/lb_input.py: a host name that starts with "shim-"
 * resolves to 127.0.0.1, so that member names made of any bytes (invalid UTF-8, bidi controls)
 * can reach the ring of a real chring-lb; glibc refuses such names otherwise.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <string.h>

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    static gai_fn real;
    if (!real) {
        void *sym = dlsym(RTLD_NEXT, "getaddrinfo");
        memcpy(&real, &sym, sizeof real);
    }
    if (node && strncmp(node, "shim-", 5) == 0)
        node = "127.0.0.1";
    return real(node, service, hints, res);
}
