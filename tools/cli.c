/* chring command engine (docs/design.md §7): the engine's lifecycle and the command table every
 * line is dispatched from.
 *
 * SPDX-License-Identifier: MIT
 *
 * A line's first word names the command; it is looked up once in the table below, whose entry
 * gives the handler, the rule its arguments follow and its usage.  The dispatcher applies the rule
 * (and answers ERR when the line breaks it), so a handler starts from its arguments already taken
 * apart.  `chring --help` lists the commands from the same table (chring_cli_usage).  The state
 * the handlers share is described in cli_internal.h.
 */
#include "cli_internal.h"

#include <errno.h>

/* How a command takes its arguments, and the ERR answer to a line that breaks the rule. */
typedef enum cli_args {
    ARGS_NONE,       /* nothing but blanks: "this command takes no arguments" */
    ARGS_VERBATIM,   /* one space, then the rest of the line as it is (call.arg): the usage */
    ARGS_WORDS,      /* exactly `words` words (call.words), nothing after: the usage */
    ARGS_NAMES,      /* zero or more names (call.names): the reason cli_parse_names gives */
    ARGS_SOME_NAMES, /* as ARGS_NAMES, and at least one: "<COMMAND> needs at least one name" */
} cli_args_t;

typedef struct cli_command {
    const char *name; /* upper case; a line may spell it in any case */
    void (*run)(cli_call_t *call);
    cli_args_t args;
    unsigned words;    /* ARGS_WORDS: how many (at most 4, the size of call.words) */
    const char *usage; /* ARGS_VERBATIM, ARGS_WORDS: the ERR reason of a line against the rule */
    const char *help;  /* its line in `chring --help`; NULL: on the line of the command before */
} cli_command_t;

/* In the order of `chring --help`.  The answers are documented in docs/cli.md. */
static const cli_command_t commands[] = {
    {"POOL", cli_cmd_pool, ARGS_NAMES, 0, NULL,
     "POOL n1 n2 ...      pool := these names, weight 1, in this order  OK"},
    {"ADD", cli_cmd_add, ARGS_SOME_NAMES, 0, NULL,
     "ADD / REMOVE n..    join / leave (unknown, repeated: ignored)    OK"},
    {"REMOVE", cli_cmd_remove, ARGS_SOME_NAMES, 0, NULL, NULL},
    {"LOOKUP", cli_cmd_lookup, ARGS_VERBATIM, 0,
     "usage: LOOKUP <key> (one space, then the key verbatim)",
     "LOOKUP <key>        owner of key (rest of line); LOOKUPS k1 k2 name(s) | EMPTY"},
    {"LOOKUPS", cli_cmd_lookups, ARGS_VERBATIM, 0,
     "usage: LOOKUPS <key> <key>... (blank-separated keys)",
     NULL},
    {"HASH", cli_cmd_hash, ARGS_VERBATIM, 0,
     "usage: HASH <string> (one space, then the string verbatim)",
     "HASH <s>            the profile's hash of s (rest of the line)    decimal"},
    {"RING", cli_cmd_ring, ARGS_NONE, 0, NULL,
     "RING                every point, in ring order                   <hash>:<name>"},
    {"DIST", cli_cmd_dist, ARGS_NONE, 0, NULL,
     "DIST                each member, in pool order     <name> points=<p> share=<x>"},
    {"SNAP", cli_cmd_snap, ARGS_WORDS, 1, "usage: SNAP <n>",
     "SNAP <n> / MOVED    record owners of key0..key<n-1> / count moves  OK / ring=."},
    {"MOVED", cli_cmd_moved, ARGS_NONE, 0, NULL, NULL},
    {"WEIGHT", cli_cmd_weight, ARGS_WORDS, 2, "usage: WEIGHT <name> <weight>",
     "WEIGHT / LOAD n <x> a member's weight / the load BOUNDED sees     OK"},
    {"LOAD", cli_cmd_load, ARGS_WORDS, 2, "usage: LOAD <name> <load>", NULL},
    {"BOUNDED", cli_cmd_bounded, ARGS_VERBATIM, 0,
     "usage: BOUNDED <key> (one space, then the key verbatim)",
     "BOUNDED <key>       owner with bounded loads (LOAD values)        name | EMPTY"},
    {"ACQUIRE", cli_cmd_acquire, ARGS_VERBATIM, 0,
     "usage: ACQUIRE <key> (one space, then the key verbatim)",
     "ACQUIRE[H] <key|h>  on the built-in counters (H: hash)  <name> <lease> | EMPTY"},
    {"ACQUIREH", cli_cmd_acquire_hash, ARGS_WORDS, 1, "usage: ACQUIREH <hash>", NULL},
    {"RETRY", cli_cmd_retry, ARGS_VERBATIM, 0,
     "usage: RETRY <count> <name>... <key> (one space, then the key verbatim)",
     "RETRY k n.. <key>   ACQUIRE, passing over the k names  <name> <lease> | EMPTY"},
    {"RELEASE", cli_cmd_release, ARGS_WORDS, 1, "usage: RELEASE <lease-number>",
     "RELEASE <l> / TRY n release / a lease on n if below capacity  OK / <name> <l>"},
    {"TRY", cli_cmd_try, ARGS_WORDS, 1, "usage: TRY <name>", NULL},
    {"REPLICAS", cli_cmd_replicas, ARGS_VERBATIM, 0, "usage: REPLICAS <key> <n>",
     "REPLICAS <key> <n>  n distinct owners clockwise             names... | EMPTY"},
    {"DOWN", cli_cmd_down, ARGS_SOME_NAMES, 0, NULL,
     "DOWN / UP n..       mark members down (walked past) / up again    OK"},
    {"UP", cli_cmd_up, ARGS_SOME_NAMES, 0, NULL, NULL},
    {"RAMP", cli_cmd_ramp, ARGS_WORDS, 4, "usage: RAMP <name> <from> <to> <ms>",
     "RAMP n <f> <t> <ms> admission scale f to t in ms; HEALTH lists   OK"},
    {"HEALTH", cli_cmd_health, ARGS_NONE, 0, NULL, NULL},
    {"STATS", cli_cmd_stats, ARGS_NONE, 0, NULL,
     "STATS / VERSION     ring and member counters / snapshot version"},
    {"VERSION", cli_cmd_version, ARGS_NONE, 0, NULL, NULL},
    {"DIGEST", cli_cmd_digest, ARGS_NONE, 0, NULL,
     "DIGEST/MARK/DIFF    placement digest / hold the ring / arcs moved since MARK"},
    {"MARK", cli_cmd_mark, ARGS_NONE, 0, NULL, NULL},
    {"DIFF", cli_cmd_diff, ARGS_NONE, 0, NULL, NULL},
};

#define COMMANDS_LEN (sizeof(commands) / sizeof(commands[0]))

void chring_cli_usage(FILE *out)
{
    for (size_t i = 0; i < COMMANDS_LEN; i++)
        if (commands[i].help)
            fprintf(out, "  %s\n", commands[i].help);
}

int chring_cli_new(chring_cli_t **out, const chring_cli_options_t *opt)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    chring_config_t cfg;
    chring_config_default(&cfg);
    if (opt && opt->profile) {
        chring_profile_t profile;
        if (chring_profile_parse(opt->profile, &profile) != 0 || profile == CHRING_PROFILE_CUSTOM)
            return -EINVAL;
        cfg.profile = profile;
    }
    if (opt && opt->vnodes > 0)
        cfg.vnodes = opt->vnodes;
    if (opt && opt->balance > 0) /* false for NaN as well */
        cfg.balance = opt->balance;
    cfg.retire = cli_member_retire;
    cfg.retire_ctx = NULL;

    chring_cli_t *cli = calloc(1, sizeof(*cli));
    if (!cli)
        return -ENOMEM;
    int rc = chring_new(&cli->ring, &cfg);
    if (rc < 0) {
        free(cli);
        return rc;
    }
    cli->balance = cfg.balance;
    *out = cli;
    return 0;
}

void chring_cli_free(chring_cli_t *cli)
{
    if (!cli)
        return;
    cli_leases_free(cli);
    cli_snap_clear(cli);
    cli_mark_clear(cli);
    /* chring_free retires (frees) every pool entry through cli_member_retire. */
    chring_free(&cli->ring);
    free(cli->pool);
    free(cli);
}

static const cli_command_t *command_find(span_t word)
{
    for (size_t i = 0; i < COMMANDS_LEN; i++)
        if (cli_word_is(word, commands[i].name))
            return &commands[i];
    return NULL;
}

/* Applies the command's argument rule to line[pos..len) (pos is just after the command word) and
 * fills the call.  Returns NULL, or the reason of the ERR answer. */
static const char *take_args(const cli_command_t *cmd, const char *line, size_t len, size_t pos,
                             cli_call_t *call)
{
    switch (cmd->args) {
    case ARGS_NONE:
        return cli_rest_is_blank(line, len, pos) ? NULL : "this command takes no arguments";
    case ARGS_VERBATIM:
        if (pos >= len || line[pos] != ' ')
            return cmd->usage;
        call->arg.ptr = line + pos + 1;
        call->arg.len = len - pos - 1;
        return NULL;
    case ARGS_WORDS:
        for (unsigned i = 0; i < cmd->words; i++)
            if (!cli_next_word(line, len, &pos, &call->words[i]))
                return cmd->usage;
        return cli_rest_is_blank(line, len, pos) ? NULL : cmd->usage;
    case ARGS_NAMES:
    case ARGS_SOME_NAMES: return cli_parse_names(line, len, pos, &call->names);
    }
    return cmd->usage;
}

void chring_cli_exec(chring_cli_t *cli, const char *line, size_t len, FILE *out)
{
    if (!cli || !out || (!line && len > 0))
        return;
    size_t pos = 0;
    span_t word;
    if (!cli_next_word(line, len, &pos, &word))
        return; /* blank line */
    if (word.ptr[0] == '#')
        return; /* comment */
    const cli_command_t *cmd = command_find(word);
    if (!cmd) {
        cli_answer_err(out, "unknown command");
        return;
    }
    cli_call_t call = {.cli = cli, .out = out, .usage = cmd->usage};
    const char *reason = take_args(cmd, line, len, pos, &call);
    if (reason)
        cli_answer_err(out, reason);
    else if (cmd->args == ARGS_SOME_NAMES && call.names.len == 0)
        fprintf(out, "ERR %s needs at least one name\n", cmd->name);
    else
        cmd->run(&call);
    cli_names_free(&call.names);
}
