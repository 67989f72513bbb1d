/* chring-lb: reading etcd's answers (the v3 JSON gateway) into membership changes.
 *
 * SPDX-License-Identifier: MIT
 *
 * Pure functions of the bytes etcd sent: no I/O, no global state but the parse budget, any one
 * thread at a time (the budget is per thread).  The JSON is read with libjansson; keys and values
 * are base64 (RFC 4648, padded), as the gateway writes bytes.  A key is a member when it is
 * PREFIX + HOST:PORT (at most 255 bytes, no NUL, white space, '=' or control byte) and its value
 * a weight: empty (1) or a decimal in 1..10000.  Anything else is a bad entry: counted, the
 * first few described (quoted with lb_text_quote) for the log, and skipped.
 *
 * Memory.  A parse may allocate at most the budget (lb_etcd_read_budget) through jansson; above
 * it the parse fails ("too large") instead of growing: JSON of many tiny values costs jansson
 * far more memory than its text.
 */
#ifndef CHRING_LB_ETCD_READ_H
#define CHRING_LB_ETCD_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LB_ETCD_BAD_SHOWN 3 /* bad entries described per message */

struct lb_etcd_event {
    char *name;      /* HOST:PORT (the prefix removed), NUL-terminated, malloc'ed */
    uint32_t weight; /* 1..10000; 0: the key was deleted */
};

struct lb_etcd_msg {
    uint64_t revision;         /* header.revision (0 when absent) */
    uint64_t compact_revision; /* a watch cancelled because its start was compacted */
    bool created, canceled;    /* watch: created / canceled */
    struct lb_etcd_event *events;
    size_t n;
    size_t bad; /* bad entries skipped */
    char bad_why[LB_ETCD_BAD_SHOWN][400];
};

/* The most bytes jansson may hold for one parse on this thread (default 256 MiB). */
void lb_etcd_read_budget(size_t bytes);

/* Reads a range answer ({"header":{"revision":..},"kvs":[{"key":..,"value":..}..]}) of keys
 * under prefix into m (every key a put).  Returns 0, or -1 with why (static text) and m empty:
 * not JSON, over the budget, no revision. */
int lb_etcd_read_range(const char *text, size_t len, const char *prefix, struct lb_etcd_msg *m,
                       const char **why);
/* Reads one watch message ({"result":{"header":..,"created":..,"canceled":..,
 * "compact_revision":..,"events":[{"type":"DELETE"?,"kv":{..}}..]}}).  Returns 0, or -1 with why:
 * not JSON, over the budget, not a result (an "error" answer). */
int lb_etcd_read_watch(const char *text, size_t len, const char *prefix, struct lb_etcd_msg *m,
                       const char **why);
void lb_etcd_msg_free(struct lb_etcd_msg *m);

/* base64 with padding.  lb_b64_encode writes (n + 2) / 3 * 4 bytes and a NUL into out.
 * lb_b64_decode decodes s[0..n) into out (room for n / 4 * 3 bytes): returns the length, or -1
 * for anything but canonical padded base64 (n a multiple of 4, '=' only at the end, zero
 * padding bits). */
size_t lb_b64_encode(const unsigned char *s, size_t n, char *out);
long lb_b64_decode(const char *s, size_t n, unsigned char *out);

#endif
