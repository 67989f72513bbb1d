/* chring-nginx-expect: the nginx module tests' oracle.  Owners of keys by plain chring lookups
 * (the library's own answers), no module code.
 *
 *   chring-nginx-expect [--digest] PROFILE VNODES NAME=WEIGHT... [-NAME...]  < keys  > owners
 *
 * Every NAME=WEIGHT is a member; a -NAME (a member listed before) is set down.  One key per line
 * on standard input, its owner's name per line on standard output.  With --digest, only the
 * ring's placement digest (chring_snap_digest, 16 hex digits) is printed.
 */
#include <inttypes.h>
#include <chring.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    chring_config_t cfg;
    chring_t *ring;
    char line[4096], name[CHRING_NAME_MAX + 1];
    int i, rc, digest = 0;

    if (argc > 1 && strcmp(argv[1], "--digest") == 0) {
        digest = 1;
        argc--;
        argv++;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: %s PROFILE VNODES NAME=WEIGHT... [-NAME...]\n", argv[0]);
        return 2;
    }
    chring_config_default(&cfg);
    if (chring_profile_parse(argv[1], &cfg.profile) != 0) {
        fprintf(stderr, "unknown profile %s\n", argv[1]);
        return 2;
    }
    cfg.vnodes = (uint32_t)strtoul(argv[2], NULL, 10);
    if (chring_new(&ring, &cfg) != 0) {
        fprintf(stderr, "chring_new failed\n");
        return 2;
    }
    for (i = 3; i < argc; i++) {
        if (argv[i][0] == '-') {
            rc = chring_set_down(ring, argv[i] + 1, 1);
        } else {
            char *eq = strrchr(argv[i], '=');
            if (eq == NULL) {
                fprintf(stderr, "bad member %s\n", argv[i]);
                return 2;
            }
            *eq = '\0';
            rc = chring_add(ring, argv[i], (uint32_t)strtoul(eq + 1, NULL, 10), NULL);
        }
        if (rc != 0) {
            fprintf(stderr, "%s: %s\n", argv[i], chring_strerror(rc));
            return 2;
        }
    }
    if (digest) {
        const chring_snap_t *s = chring_snap_enter(ring);
        printf("%016" PRIx64 "\n", chring_snap_digest(s));
        chring_snap_exit(ring, s);
        chring_free(&ring);
        return 0;
    }
    while (fgets(line, sizeof(line), stdin) != NULL) {
        size_t len = strcspn(line, "\n");
        rc = chring_lookup_name(ring, line, len, name, sizeof(name));
        printf("%s\n", rc >= 0 ? name : "-");
    }
    chring_free(&ring);
    return 0;
}
