/* chring command engine: health and warm-up (DOWN, UP, RAMP, HEALTH; docs/design.md §3).
 *
 * SPDX-License-Identifier: MIT
 *
 * DOWN and UP check every name before the first library call, so a line naming a non-member
 * changes nothing.  Setting a member down or up, or a ramp, publishes nothing (VERSION does not
 * move): the state lives on the member object, which keeps it while it stays in the pool; a name
 * that leaves and joins again is a new member, up, at scale 1.
 */
#include "cli_internal.h"

#include <errno.h>

/* DOWN / UP n1 n2 ...: every name must be a member (else ERR no such member and nothing
 * changes); repeats count once; a member already in that state stays in it. */
static void set_health(cli_call_t *call, int down)
{
    chring_cli_t *cli = call->cli;
    const cli_names_t *list = &call->names;
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    bool all = true;
    for (size_t i = 0; i < list->len && all; i++)
        all = chring_snap_find(s, list->items[i].cstr) != NULL;
    chring_snap_exit(cli->ring, s);
    if (!all) {
        cli_answer_err(call->out, "no such member");
        return;
    }
    /* The engine is the ring's only writer: the names checked above are still members. */
    for (size_t i = 0; i < list->len; i++) {
        int rc = chring_set_down(cli->ring, list->items[i].cstr, down);
        if (rc < 0) {
            cli_answer_lib_err(call->out, rc);
            return;
        }
    }
    cli_answer_ok(call->out);
}

void cli_cmd_down(cli_call_t *call)
{
    set_health(call, 1);
}

void cli_cmd_up(cli_call_t *call)
{
    set_health(call, 0);
}

/* An admission scale: a decimal number from 0 to 1 without sign or exponent ("0", "1", "0.25",
 * ".5", "1.000"), at most 20 bytes.  False if the word is not one. */
static bool parse_scale(span_t word, double *out)
{
    if (word.len == 0 || word.len > 20)
        return false;
    size_t digits = 0, dots = 0;
    for (size_t i = 0; i < word.len; i++) {
        char c = word.ptr[i];
        if (c >= '0' && c <= '9')
            digits++;
        else if (c == '.' && dots == 0)
            dots++;
        else
            return false;
    }
    if (digits == 0)
        return false;
    char buf[21];
    memcpy(buf, word.ptr, word.len);
    buf[word.len] = '\0';
    double v = strtod(buf, NULL);
    if (!(v >= 0.0 && v <= 1.0))
        return false;
    *out = v;
    return true;
}

/* RAMP <name> <from> <to> <ms>: chring_set_ramp.  ms 0 sets the scale to `to` at once. */
void cli_cmd_ramp(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    const char *reason = cli_name_check(call->words[0]);
    if (reason) {
        cli_answer_err(call->out, reason);
        return;
    }
    double from, to;
    uint64_t ms;
    if (!parse_scale(call->words[1], &from) || !parse_scale(call->words[2], &to)) {
        cli_answer_err(call->out, "bad scale (0 to 1)");
        return;
    }
    if (!cli_parse_u64(call->words[3], UINT32_MAX, &ms)) {
        cli_answer_err(call->out, "bad duration (0 to 4294967295 ms)");
        return;
    }
    char name[CHRING_NAME_MAX + 1];
    memcpy(name, call->words[0].ptr, call->words[0].len);
    name[call->words[0].len] = '\0';
    int rc = chring_set_ramp(cli->ring, name, from, to, (uint32_t)ms);
    if (rc == -ENOENT)
        cli_answer_err(call->out, "no such member");
    else if (rc < 0)
        cli_answer_lib_err(call->out, rc);
    else
        cli_answer_ok(call->out);
}

/* HEALTH: each member in pool order, "<name> down=<0|1> scale=<s>" (s with 4 decimals, read
 * now: a timed ramp moves it between two HEALTH commands). */
void cli_cmd_health(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    for (size_t i = 0; i < cli->pool_len; i++) {
        const chring_member_t *m = chring_snap_find(s, cli->pool[i]->name);
        cli_put_bytes(call->out, cli->pool[i]->name, cli->pool[i]->len);
        fprintf(call->out, " down=%d scale=%.4f\n", chring_member_is_down(m) == 1 ? 1 : 0,
                chring_member_scale(m));
    }
    chring_snap_exit(cli->ring, s);
}
