/* A main() for a libFuzzer target built without libFuzzer: runs LLVMFuzzerTestOneInput once on
 * every file of the directories (or files) given, so that a plain test run replays the seed
 * corpus and the inputs of past findings with any compiler (tests/lb/meson.build).
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return -1;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        if (n == 0)
            break;
        len += n;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) < 0)
            continue; /* a regress folder that does not exist yet */
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) < 0)
                return 1;
            files++;
            continue;
        }
        struct dirent **names;
        int n = scandir(argv[i], &names, NULL, alphasort);
        for (int k = 0; k < n; k++) {
            char path[4096];
            if (names[k]->d_name[0] != '.') {
                snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
                if (run_file(path) < 0)
                    return 1;
                files++;
            }
            free(names[k]);
        }
        free(names);
    }
    printf("%d inputs replayed\n", files);
    return files > 0 ? 0 : 1;
}
