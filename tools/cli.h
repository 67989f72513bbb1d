/* chring command engine: the protocol of the `chring` tool (docs/design.md §7) without any I/O
 * policy.
 *
 * SPDX-License-Identifier: MIT
 *
 * The engine holds one ring, its pool (member names in listed order), the SNAP record, the
 * caller-supplied loads of BOUNDED and the leases of ACQUIRE and RETRY.  It has no global state,
 * never exits and never reads input by itself: tools/main.c feeds it lines, the fuzz target feeds
 * it arbitrary bytes.  It uses only the public header include/chring.h.  One engine must be used by
 * one thread at a time.
 */
#ifndef CHRING_CLI_H
#define CHRING_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest line (without its newline) that tools/main.c hands to the engine. */
#define CHRING_CLI_LINE_MAX (1u << 20)
/* Most keys one SNAP may record. */
#define CHRING_CLI_SNAP_MAX 1000000u
/* Most leases that may be outstanding at once through ACQUIRE and RETRY. */
#define CHRING_CLI_LEASES_MAX 1000000u
/* Most names one RETRY may list. */
#define CHRING_CLI_SKIP_MAX 1000000u

typedef struct chring_cli chring_cli_t;

typedef struct chring_cli_options {
    const char *profile; /* a profile name (hash64, murmur32, fnv32, fnv16, xxh3, ketama, nginx);
                            NULL means hash64 */
    uint32_t vnodes;     /* points per unit of weight; 0 means the default (160) */
    double balance;      /* c of BOUNDED and ACQUIRE; 0 (or NaN, or negative) means the
                            default 1.25; other values below 1 act as 1 (docs/design.md §3) */
} chring_cli_options_t;

/* Creates an engine with an empty pool.  opt NULL means every default.  Returns 0 and sets *out,
 * -EINVAL for a NULL out, an unknown profile name (or "custom", which needs a hash function) or a
 * vnodes value the library rejects, -ENOMEM. */
int chring_cli_new(chring_cli_t **out, const chring_cli_options_t *opt);

/* Releases every outstanding lease, frees the ring and the engine.  NULL-safe. */
void chring_cli_free(chring_cli_t *cli);

/* Executes one command line: line[0..len) without its newline; it may hold any bytes, NUL
 * included.  Writes the answer (zero or more lines, each ending in '\n') to out; a malformed line
 * is answered "ERR <reason>".  Blank lines and lines whose first non-blank byte is '#' produce no
 * output.  Does not flush out.  The commands and answers are documented in docs/cli.md. */
void chring_cli_exec(chring_cli_t *cli, const char *line, size_t len, FILE *out);

/* Writes the command summary of `chring --help` to out: one line per command (a line may name
 * two), each starting with two spaces and ending in '\n'.  Does not flush out. */
void chring_cli_usage(FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* CHRING_CLI_H */
