/* chring command engine: agreement and change (DIGEST, MARK, DIFF).
 *
 * SPDX-License-Identifier: MIT
 *
 * DIGEST prints chring_snap_digest of the current snapshot.  MARK holds the current snapshot
 * (chring_snap_hold; a later MARK replaces it); DIFF lists the arcs of the hash space whose owner
 * differs between the marked snapshot and the current one (chring_snap_diff), one per line, then
 * their count and the fraction of the key space they cover (chring_snap_moved).
 */
#include "cli_internal.h"

#include <errno.h>
#include <inttypes.h>

void cli_mark_clear(chring_cli_t *cli)
{
    if (cli->marked) {
        chring_snap_put(cli->ring, cli->marked);
        cli->marked = NULL;
    }
}

/* DIGEST: the current snapshot's placement digest, 16 hex digits. */
void cli_cmd_digest(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    fprintf(call->out, "%016" PRIx64 "\n", chring_snap_digest(s));
    chring_snap_exit(cli->ring, s);
}

/* MARK: holds the current snapshot for DIFF.  OK. */
void cli_cmd_mark(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    cli_mark_clear(cli);
    cli->marked = chring_snap_hold(cli->ring);
    cli_answer_ok(call->out);
}

struct diff_out {
    FILE *out;
    uint64_t arcs;
};

static void put_owner(FILE *out, const chring_member_t *m)
{
    if (m)
        cli_put_name(out, m);
    else
        fputc('-', out);
}

static int diff_line(uint64_t from, uint64_t to, const chring_member_t *was,
                     const chring_member_t *now, void *ctx)
{
    struct diff_out *d = ctx;
    fprintf(d->out, "%" PRIu64 " %" PRIu64 " ", from, to);
    put_owner(d->out, was);
    fputc(' ', d->out);
    put_owner(d->out, now);
    fputc('\n', d->out);
    d->arcs++;
    return 0;
}

/* DIFF: "<from> <to> <was> <now>" per arc whose owner moved since MARK (inclusive positions in
 * the profile's hash width, ring order; "-" for no owner), then "ARCS <count> moved=<fraction>". */
void cli_cmd_diff(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    if (!cli->marked) {
        cli_answer_err(call->out, "no MARK yet");
        return;
    }
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    struct diff_out d = {call->out, 0};
    int rc = chring_snap_diff(cli->marked, s, diff_line, &d);
    double moved = chring_snap_moved(cli->marked, s);
    chring_snap_exit(cli->ring, s);
    if (rc != 0) {
        cli_answer_lib_err(call->out, rc);
        return;
    }
    fprintf(call->out, "ARCS %" PRIu64 " moved=%.6f\n", d.arcs, moved);
}
