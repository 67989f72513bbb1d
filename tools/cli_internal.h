/* chring command engine, inside: the engine's state, the call a command handler gets, and the
 * functions the engine's files share.  Only tools/cli*.c include this header.
 *
 * SPDX-License-Identifier: MIT
 *
 * The engine is split by concept: cli.c holds the state's lifecycle and the command table it
 * dispatches from; cli_parse.c reads words, numbers and name lists from a line; each group of
 * commands has its own file (cli_pool.c: the membership, cli_query.c: lookups and listings,
 * cli_moves.c: SNAP and MOVED, cli_leases.c: ACQUIRE, RETRY and RELEASE, cli_health.c: DOWN, UP,
 * RAMP and HEALTH).
 *
 * State kept by the engine, and who owns it:
 * - The ring (chring_t) and the pool: the members in listed order, for DIST, STATS and the
 *   `mod` scheme of SNAP/MOVED.  Every pool entry is a cli_member, handed to the library as the
 *   member's udata; from the publish that adds it the ring owns it and frees it through the
 *   retire callback (docs/design.md §4), possibly on liburcu's call_rcu thread.  So the engine
 *   never touches an entry after the publish that removes it: the pool array is rebuilt before
 *   each writer call and swapped in when the call succeeds.  The pool always lists exactly the
 *   members of the current snapshot.
 * - The SNAP record: copies of the pool names at SNAP time and, per key, the index of its ring
 *   owner and of its mod owner in that copy (CLI_EMPTY for no owner).
 * - The leases of ACQUIRE and RETRY, numbered 1, 2, ... in a growing array sorted by number.
 * The engine is single-threaded and uses only the public header.
 */
#ifndef CHRING_CLI_INTERNAL_H
#define CHRING_CLI_INTERNAL_H

#include "cli.h"

#include <chring.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "No owner" in the SNAP record. */
#define CLI_EMPTY UINT32_MAX

typedef struct cli_member {
    char *name;          /* NUL-terminated copy of the name */
    size_t len;          /* its length */
    uint64_t load;       /* caller-supplied load (LOAD), read by BOUNDED */
    uint32_t snap_index; /* scratch: the position in the pool while SNAP runs */
    bool leaving;        /* scratch: named by the REMOVE being executed */
} cli_member_t;

typedef struct cli_lease {
    uint64_t number;      /* the number ACQUIRE or RETRY printed */
    chring_lease_t lease; /* .member == NULL once released */
} cli_lease_t;

struct chring_cli {
    chring_t *ring;
    double balance;

    cli_member_t **pool; /* members in listed order */
    size_t pool_len;

    bool snapped;
    char **snap_names; /* the pool at SNAP time (copies) */
    size_t *snap_name_lens;
    size_t snap_pool_len;
    uint32_t *snap_ring; /* per key: index into snap_names or CLI_EMPTY */
    uint32_t *snap_mod;
    size_t snap_count;

    const chring_snap_t *marked; /* MARK's held snapshot, for DIFF (cli_agree.c); NULL: none */

    cli_lease_t *leases; /* sorted by number; released ones are compacted away lazily */
    size_t leases_len, leases_cap, leases_live;
    uint64_t next_lease;
};

/* ---------------------------------------------------------------------------------------------
 * Reading a line (cli_parse.c)
 * ------------------------------------------------------------------------------------------- */

/* A byte range of the line. */
typedef struct span {
    const char *ptr;
    size_t len;
} span_t;

/* Blanks separate words: space, tab, \n, \v, \f, \r. */
bool cli_is_space(char c);

/* Case-insensitive comparison of a word with an upper-case command word. */
bool cli_word_is(span_t word, const char *upper);

/* The next blank-separated word at or after *pos (which moves past it); false at the end of the
 * line. */
bool cli_next_word(const char *line, size_t len, size_t *pos, span_t *word);

/* Whether line[pos..len) holds only blanks. */
bool cli_rest_is_blank(const char *line, size_t len, size_t pos);

/* A decimal number of at most max: 1 to 20 digits, no sign, no blanks.  False if it is not. */
bool cli_parse_u64(span_t word, uint64_t max, uint64_t *out);

/* NULL if the word may be a member name, else the reason of the ERR answer ("name too long",
 * "name contains a NUL byte"). */
const char *cli_name_check(span_t name);

/* A NUL-terminated heap copy of s (s holds no NUL byte), or NULL when out of memory. */
char *cli_span_dup(span_t s);

typedef struct cli_name {
    span_t name;  /* in the line */
    size_t order; /* position in the command */
    char *cstr;   /* NUL-terminated copy, for the library */
} cli_name_t;

typedef struct cli_names {
    cli_name_t *items;
    size_t len;
} cli_names_t;

/* Parses the names in line[pos..len) into a list without repeats (the first one of equal names
 * is kept), in command order.  Returns NULL, or the reason of an ERR answer (then the list is
 * empty and needs no cli_names_free). */
const char *cli_parse_names(const char *line, size_t len, size_t pos, cli_names_t *list);

/* Frees the list's copies and empties it. */
void cli_names_free(cli_names_t *list);

/* ---------------------------------------------------------------------------------------------
 * Writing answers
 * ------------------------------------------------------------------------------------------- */

static inline void cli_put_bytes(FILE *out, const char *p, size_t n)
{
    if (n > 0)
        fwrite(p, 1, n, out);
}

static inline void cli_put_name(FILE *out, const chring_member_t *m)
{
    const char *name = chring_member_name(m);
    cli_put_bytes(out, name, strlen(name));
}

static inline void cli_answer_ok(FILE *out)
{
    fputs("OK\n", out);
}

static inline void cli_answer_err(FILE *out, const char *reason)
{
    fprintf(out, "ERR %s\n", reason);
}

static inline void cli_answer_lib_err(FILE *out, int rc)
{
    cli_answer_err(out, chring_strerror(rc));
}

/* calloc that never asks for zero bytes, so that NULL always means out of memory. */
static inline void *cli_calloc(size_t n, size_t size)
{
    return calloc(n ? n : 1, size);
}

/* ---------------------------------------------------------------------------------------------
 * Commands
 * ------------------------------------------------------------------------------------------- */

/* One command line, as the command table's argument rule (cli.c) prepared it for the handler. */
typedef struct cli_call {
    chring_cli_t *cli;
    FILE *out;
    const char *usage; /* the command's usage message, an ERR reason */
    span_t arg;        /* a verbatim argument: the rest of the line after the word and a space */
    span_t words[4];   /* a fixed number of words: the words after the command word */
    cli_names_t names; /* a name list: the names, without repeats, in command order */
} cli_call_t;

/* The handlers, one per command; each writes its answer (RING: one line per point, DIST and
 * STATS: per member) to call->out. */
void cli_cmd_pool(cli_call_t *call);
void cli_cmd_add(cli_call_t *call);
void cli_cmd_remove(cli_call_t *call);
void cli_cmd_weight(cli_call_t *call);
void cli_cmd_load(cli_call_t *call);
void cli_cmd_lookup(cli_call_t *call);
void cli_cmd_lookups(cli_call_t *call);
void cli_cmd_hash(cli_call_t *call);
void cli_cmd_ring(cli_call_t *call);
void cli_cmd_dist(cli_call_t *call);
void cli_cmd_bounded(cli_call_t *call);
void cli_cmd_replicas(cli_call_t *call);
void cli_cmd_stats(cli_call_t *call);
void cli_cmd_version(cli_call_t *call);
void cli_cmd_snap(cli_call_t *call);
void cli_cmd_moved(cli_call_t *call);
void cli_cmd_acquire(cli_call_t *call);
void cli_cmd_retry(cli_call_t *call);
void cli_cmd_release(cli_call_t *call);
void cli_cmd_down(cli_call_t *call);
void cli_cmd_up(cli_call_t *call);
void cli_cmd_ramp(cli_call_t *call);
void cli_cmd_health(cli_call_t *call);
/* By hash, within capacity (cli_leases.c); agreement and change (cli_agree.c). */
void cli_cmd_acquire_hash(cli_call_t *call);
void cli_cmd_try(cli_call_t *call);
void cli_cmd_digest(cli_call_t *call);
void cli_cmd_mark(cli_call_t *call);
void cli_cmd_diff(cli_call_t *call);
/* Puts MARK's snapshot (chring_cli_free, before the ring goes). */
void cli_mark_clear(chring_cli_t *cli);

/* The retire callback the ring frees pool entries with (cli_pool.c); also frees an entry that
 * never joined.  NULL-safe. */
void cli_member_retire(void *udata, void *ctx);

/* Drops the SNAP record (cli_moves.c). */
void cli_snap_clear(chring_cli_t *cli);

/* Releases every outstanding lease and frees the lease array (cli_leases.c). */
void cli_leases_free(chring_cli_t *cli);

#endif /* CHRING_CLI_INTERNAL_H */
