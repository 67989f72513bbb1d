/* chring-lb-expect: the tests' independent oracle.  Builds a ring from the members given on the
 * command line (through the public API only, no balancer code) and prints, for each key read from
 * standard input (one per line, without the newline), the names of the key's first R replicas
 * separated by a space (chring_lookup_name for the owner, chring_snap_lookup_n for more).
 *
 *   chring-lb-expect [--profile NAME] [--vnodes N] [--replicas R] [--hex] HOST:PORT[=W]... < keys
 *   chring-lb-expect [--profile NAME] [--vnodes N] --digest HOST:PORT[=W]...
 *
 * --hex reads each key as hex digits (two per byte), for keys that hold NUL bytes or newlines
 * (--key prompt's: the model, a NUL byte, the prompt).
 *
 * --digest prints the placement digest of that ring (chring_snap_digest, 16 hex digits, as the
 * balancer's stats show it) and reads no keys.
 *
 * SPDX-License-Identifier: MIT
 */
#define _POSIX_C_SOURCE 200809L
#include "members.h"

#include <chring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    unsigned replicas = 1;
    int digest = 0, hex = 0;
    lb_entries_t es = {0};
    for (int i = 1; i < argc; i++) {
        const char *err;
        if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc) {
            if (chring_profile_parse(argv[++i], &cfg.profile) < 0) {
                fprintf(stderr, "unknown profile %s\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--vnodes") == 0 && i + 1 < argc) {
            cfg.vnodes = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--replicas") == 0 && i + 1 < argc) {
            replicas = (unsigned)strtoul(argv[++i], NULL, 10);
            if (replicas < 1 || replicas > 16)
                replicas = 1;
        } else if (strcmp(argv[i], "--hex") == 0) {
            hex = 1;
        } else if (strcmp(argv[i], "--digest") == 0) {
            digest = 1;
        } else if (lb_entries_put(&es, argv[i], &err) < 0) {
            fprintf(stderr, "%s: %s\n", argv[i], err);
            return 2;
        }
    }
    chring_t *r = NULL;
    int rc = chring_new(&r, &cfg);
    if (rc < 0) {
        fprintf(stderr, "chring_new: %s\n", chring_strerror(rc));
        return 1;
    }
    for (size_t i = 0; i < es.n; i++) {
        rc = chring_add(r, es.v[i].name, es.v[i].weight, NULL);
        if (rc < 0) {
            fprintf(stderr, "chring_add %s: %s\n", es.v[i].name, chring_strerror(rc));
            return 1;
        }
    }
    if (digest) {
        const chring_snap_t *s = chring_snap_enter(r);
        printf("%016llx\n", (unsigned long long)chring_snap_digest(s));
        chring_snap_exit(r, s);
        chring_free(&r);
        lb_entries_free(&es);
        return 0;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        if (hex) { /* decoded in place: two digits a byte, a bad digit ends the key */
            ssize_t k = 0;
            for (ssize_t j = 0; j + 1 < len; j += 2) {
                unsigned byte;
                if (sscanf(line + j, "%2x", &byte) != 1)
                    break;
                line[k++] = (char)byte;
            }
            len = k;
        }
        char name[CHRING_NAME_MAX + 1];
        rc = chring_lookup_name(r, line, (size_t)len, name, sizeof name);
        fputs(rc < 0 ? "-" : name, stdout);
        if (replicas > 1) {
            const chring_member_t *out[16];
            const chring_snap_t *s = chring_snap_enter(r);
            size_t n = chring_snap_lookup_n(s, line, (size_t)len, out, replicas);
            for (size_t k = 1; k < replicas; k++)
                printf(" %s", k < n ? chring_member_name(out[k]) : "-");
            chring_snap_exit(r, s);
        }
        putchar('\n');
    }
    free(line);
    chring_free(&r);
    lb_entries_free(&es);
    return 0;
}
