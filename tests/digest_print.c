/* A helper of tests/test_digest.c, run as a separate process: builds a ring of the profile named
 * in argv[1] from "name:weight" arguments, added one by one in the order given, and prints its
 * snapshot's digest in hex.  Exit status 0, or 1 on any error.
 * SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chring.h"

int main(int argc, char **argv)
{
    if (argc < 2)
        return 1;
    chring_config_t cfg;
    chring_config_default(&cfg);
    if (chring_profile_parse(argv[1], &cfg.profile) != 0)
        return 1;
    chring_t *r;
    if (chring_new(&r, &cfg) != 0)
        return 1;
    for (int i = 2; i < argc; i++) {
        char name[256];
        unsigned weight = 1;
        const char *colon = strrchr(argv[i], ':');
        size_t len = colon ? (size_t)(colon - argv[i]) : strlen(argv[i]);
        if (len >= sizeof name)
            return 1;
        memcpy(name, argv[i], len);
        name[len] = '\0';
        if (colon)
            weight = (unsigned)strtoul(colon + 1, NULL, 10);
        if (chring_add(r, name, weight, NULL) != 0)
            return 1;
    }
    const chring_snap_t *s = chring_snap_enter(r);
    printf("%016" PRIx64 "\n", chring_snap_digest(s));
    chring_snap_exit(r, s);
    chring_free(&r);
    return 0;
}
