/* chring-lb: parsing "host:port[=weight]" entries and members files.
 *
 * SPDX-License-Identifier: MIT
 */
#define _POSIX_C_SOURCE 200809L
#include "members.h"

#include <arpa/inet.h>
#include <chring.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LB_WEIGHT_MAX 10000u

int lb_split_hostport(const char *name, char *host, size_t hostcap, uint16_t *port)
{
    const char *colon = strrchr(name, ':');
    if (colon == NULL || colon == name || colon[1] == '\0')
        return -1;
    const char *h = name;
    size_t hl = (size_t)(colon - name);
    if (h[0] == '[') {
        if (hl < 3 || h[hl - 1] != ']')
            return -1;
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl + 1 > hostcap)
        return -1;
    unsigned long p = 0;
    for (const char *c = colon + 1; *c; c++) {
        if (!isdigit((unsigned char)*c))
            return -1;
        p = p * 10 + (unsigned long)(*c - '0');
        if (p > 65535)
            return -1;
    }
    if (p == 0)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (uint16_t)p;
    return 0;
}

bool lb_name_is_numeric(const char *name)
{
    char h[256];
    uint16_t p;
    unsigned char a[16];
    return lb_split_hostport(name, h, sizeof h, &p) == 0 &&
           (inet_pton(AF_INET, h, a) == 1 || inet_pton(AF_INET6, h, a) == 1);
}

int lb_parse_entry(const char *tok, lb_entry_t *e, const char **err)
{
    const char *eq = strchr(tok, '=');
    size_t nl = eq ? (size_t)(eq - tok) : strlen(tok);
    unsigned long w = 1;
    if (nl == 0) {
        *err = "empty name";
        return -1;
    }
    if (nl > CHRING_NAME_MAX) {
        *err = "name longer than 255 bytes";
        return -1;
    }
    for (size_t i = 0; i < nl; i++)
        if ((unsigned char)tok[i] < 0x20 || tok[i] == 0x7f) {
            *err = "a control byte in the name";
            return -1;
        }
    if (eq) {
        char *end = NULL;
        errno = 0;
        if (!isdigit((unsigned char)eq[1])) {
            *err = "weight is not a number";
            return -1;
        }
        w = strtoul(eq + 1, &end, 10);
        if (errno || *end != '\0' || w < 1 || w > LB_WEIGHT_MAX) {
            *err = "weight must be an integer in 1..10000";
            return -1;
        }
    }
    char *name = strndup(tok, nl);
    if (!name) {
        *err = "out of memory";
        return -1;
    }
    char host[256];
    uint16_t port;
    if (lb_split_hostport(name, host, sizeof host, &port) < 0) {
        free(name);
        *err = "expected host:port (port 1..65535)";
        return -1;
    }
    e->name = name;
    e->weight = (uint32_t)w;
    return 0;
}

/* FNV-1a, mixed: the index's hash of a name. */
static uint64_t name_hash(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = (h ^ *c) * 0x100000001b3ull;
    return chring_mix64(h);
}

/* The slot holding name, or the empty slot where it would go.  nslot > 0. */
static size_t *index_slot(const lb_entries_t *es, const char *name)
{
    size_t mask = es->nslot - 1;
    for (size_t j = (size_t)name_hash(name) & mask;; j = (j + 1) & mask)
        if (es->slot[j] == 0 || strcmp(es->v[es->slot[j] - 1].name, name) == 0)
            return &es->slot[j];
}

/* Makes room in the index for one more entry (at most half full).  Returns 0 / -1. */
static int index_reserve(lb_entries_t *es)
{
    if (2 * (es->n + 1) <= es->nslot)
        return 0;
    size_t nslot = es->nslot ? es->nslot * 2 : 16;
    size_t *slot = calloc(nslot, sizeof *slot);
    if (!slot)
        return -1;
    free(es->slot);
    es->slot = slot;
    es->nslot = nslot;
    for (size_t i = 0; i < es->n; i++)
        *index_slot(es, es->v[i].name) = i + 1;
    return 0;
}

const lb_entry_t *lb_entries_find(const lb_entries_t *es, const char *name)
{
    if (es->nslot == 0)
        return NULL;
    size_t i = *index_slot(es, name);
    return i ? &es->v[i - 1] : NULL;
}

int lb_entries_put(lb_entries_t *es, const char *tok, const char **err)
{
    lb_entry_t e;
    if (lb_parse_entry(tok, &e, err) < 0)
        return -1;
    if (index_reserve(es) < 0) {
        free(e.name);
        *err = "out of memory";
        return -1;
    }
    size_t *slot = index_slot(es, e.name);
    if (*slot) {
        es->v[*slot - 1].weight = e.weight;
        free(e.name);
        return 0;
    }
    if (es->n == es->cap) {
        size_t nc = es->cap ? es->cap * 2 : 8;
        lb_entry_t *nv = realloc(es->v, nc * sizeof *nv);
        if (!nv) {
            free(e.name);
            *err = "out of memory";
            return -1;
        }
        es->v = nv;
        es->cap = nc;
    }
    es->v[es->n++] = e;
    *slot = es->n;
    return 0;
}

int lb_entries_read_file(lb_entries_t *es, const char *path, char *msg, size_t msgcap)
{
    /* Opened without blocking, and only a regular file is read: a FIFO without a writer (or a
     * device) would block the open or the reads, and the caller is the main thread. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(msg, msgcap, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(msg, msgcap, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    FILE *f = fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ? NULL : fdopen(fd, "r");
    if (!f) {
        snprintf(msg, msgcap, "%s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    unsigned lineno = 0;
    int rc = 0;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        if (memchr(line, '\0', (size_t)len)) {
            snprintf(msg, msgcap, "%s:%u: a NUL byte in the line", path, lineno);
            rc = -1;
            goto out;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL;
        for (char *tok = strtok_r(line, " \t\r\n", &save); tok;
             tok = strtok_r(NULL, " \t\r\n", &save)) {
            const char *err = NULL;
            if (lb_entries_put(es, tok, &err) < 0) {
                snprintf(msg, msgcap, "%s:%u: '%s': %s", path, lineno, tok, err);
                rc = -1;
                goto out;
            }
        }
    }
    if (ferror(f)) {
        snprintf(msg, msgcap, "%s: read error", path);
        rc = -1;
    }
out:
    free(line);
    fclose(f);
    return rc;
}

void lb_entries_free(lb_entries_t *es)
{
    for (size_t i = 0; i < es->n; i++)
        free(es->v[i].name);
    free(es->v);
    free(es->slot);
    es->v = NULL;
    es->slot = NULL;
    es->n = es->cap = es->nslot = 0;
}
