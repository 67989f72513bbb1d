/* chring-lb: "host:port[=weight]" entries and members files, shared by chring-lb and
 * chring-lb-expect.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef CHRING_LB_MEMBERS_H
#define CHRING_LB_MEMBERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One "host:port[=weight]" entry of --backend or of a --members file. */
typedef struct lb_entry {
    char *name; /* "host:port" exactly as written: the ring member's name */
    uint32_t weight;
} lb_entry_t;

/* Entries in the order they were first given, and an index by name (open addressing, slot[i] is
 * an index into v plus 1, 0 for an empty slot; nslot a power of two, at most half full), so a
 * members file of n entries is read in O(n). */
typedef struct lb_entries {
    lb_entry_t *v;
    size_t n, cap;
    size_t *slot;
    size_t nslot;
} lb_entries_t;

/* Parses one "host:port[=weight]" token into e (name malloc'ed).  Returns 0, or -1 with a reason
 * in err (static storage). */
int lb_parse_entry(const char *tok, lb_entry_t *e, const char **err);
/* Adds an entry, replacing the weight of an earlier one of the same name (the last weight given
 * counts, the first position is kept).  O(1) expected.  Returns 0 / -1. */
int lb_entries_put(lb_entries_t *es, const char *tok, const char **err);
/* The entry of that name, or NULL.  O(1) expected. */
const lb_entry_t *lb_entries_find(const lb_entries_t *es, const char *name);
/* Reads a members file: one entry per line (several per line allowed, separated by blanks),
 * '#' starts a comment.  Only a regular file is read (opened without blocking: a FIFO or a
 * device is refused).  Returns 0, or -1 with a message written into msg. */
int lb_entries_read_file(lb_entries_t *es, const char *path, char *msg, size_t msgcap);
void lb_entries_free(lb_entries_t *es);

/* True when name is "host:port" with a numeric IPv4 or IPv6 host: setting it up needs no DNS. */
bool lb_name_is_numeric(const char *name);

/* Splits "host:port" ("[v6]:port" too) into host and port.  Returns 0 / -1. */
int lb_split_hostport(const char *name, char *host, size_t hostcap, uint16_t *port);

#endif
