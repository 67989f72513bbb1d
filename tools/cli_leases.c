/* chring command engine: leases on the library's built-in load counters (ACQUIRE, RETRY,
 * RELEASE).
 *
 * SPDX-License-Identifier: MIT
 *
 * ACQUIRE and RETRY number their leases 1, 2, ... (one sequence) and keep them in an array sorted
 * by number, so RELEASE finds one by binary search.  A released slot stays (its .lease.member is NULL) until the array
 * is full; then released slots are compacted away before the array grows.  At most
 * CHRING_CLI_LEASES_MAX leases are outstanding at once.
 */
#include "cli_internal.h"

#include <errno.h>
#include <inttypes.h>

void cli_leases_free(chring_cli_t *cli)
{
    for (size_t i = 0; i < cli->leases_len; i++)
        if (cli->leases[i].lease.member)
            chring_release(cli->ring, &cli->leases[i].lease);
    free(cli->leases);
    cli->leases = NULL;
    cli->leases_len = cli->leases_cap = cli->leases_live = 0;
}

/* Makes room for one more lease; false when out of memory. */
static bool leases_reserve(chring_cli_t *cli)
{
    if (cli->leases_len < cli->leases_cap)
        return true;
    /* Compact released leases first; grow only when more than half are live. */
    size_t kept = 0;
    for (size_t i = 0; i < cli->leases_len; i++)
        if (cli->leases[i].lease.member)
            cli->leases[kept++] = cli->leases[i];
    cli->leases_len = kept;
    if (kept * 2 >= cli->leases_cap) {
        size_t cap = cli->leases_cap ? cli->leases_cap * 2 : 16;
        cli_lease_t *grown = realloc(cli->leases, cap * sizeof(*grown));
        if (!grown)
            return false;
        cli->leases = grown;
        cli->leases_cap = cap;
    }
    return true;
}

/* Checks that one more lease may be held and that there is room for it; answers ERR if not. */
static bool lease_room(chring_cli_t *cli, FILE *out)
{
    if (cli->leases_live >= CHRING_CLI_LEASES_MAX) {
        cli_answer_err(out, "too many leases");
        return false;
    }
    if (!leases_reserve(cli)) {
        cli_answer_err(out, "out of memory");
        return false;
    }
    return true;
}

/* Keeps the lease of a successful acquire (rc 0) under the next number and answers
 * "<owner> <lease number>"; EMPTY for -ENOENT (no lease); ERR for another failure. */
static void lease_keep(chring_cli_t *cli, FILE *out, int rc, const chring_lease_t *lease)
{
    if (rc == -ENOENT) {
        fputs("EMPTY\n", out);
        return;
    }
    if (rc < 0 || !lease->member) {
        cli_answer_lib_err(out, rc < 0 ? rc : -EINVAL);
        return;
    }
    cli_lease_t *slot = &cli->leases[cli->leases_len++];
    slot->number = ++cli->next_lease;
    slot->lease = *lease;
    cli->leases_live++;
    cli_put_name(out, slot->lease.member);
    fprintf(out, " %" PRIu64 "\n", slot->number);
}

/* ACQUIRE <key>: "<owner> <lease number>", or EMPTY for an empty ring. */
void cli_cmd_acquire(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    if (!lease_room(cli, call->out))
        return;
    chring_lease_t lease;
    int rc = chring_acquire(cli->ring, call->arg.ptr, call->arg.len, &lease);
    lease_keep(cli, call->out, rc, &lease);
}

/* RETRY <count> <name>... <key>: as ACQUIRE, but the walk passes over the count named members
 * (chring_acquire_skip).  The count word and the names are blank-separated words; the key is the
 * rest of the line after the last of them (the count word when it is 0) and exactly one space.
 * Names not in the pool are allowed and skip nothing, as a member that has left matches nothing
 * in the library's skip list. */
void cli_cmd_retry(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    FILE *out = call->out;
    const char *line = call->arg.ptr;
    size_t len = call->arg.len, pos = 0;
    span_t word;
    uint64_t count;
    if (!cli_next_word(line, len, &pos, &word)) {
        cli_answer_err(out, call->usage);
        return;
    }
    if (!cli_parse_u64(word, CHRING_CLI_SKIP_MAX, &count)) {
        cli_answer_err(out, "bad count (0 to 1000000)");
        return;
    }
    /* First pass: the line's shape and the names' validity, before anything is allocated. */
    size_t names_at = pos;
    for (uint64_t i = 0; i < count; i++) {
        if (!cli_next_word(line, len, &pos, &word)) {
            cli_answer_err(out, call->usage);
            return;
        }
        const char *reason = cli_name_check(word);
        if (reason) {
            cli_answer_err(out, reason);
            return;
        }
    }
    if (pos >= len || line[pos] != ' ') {
        cli_answer_err(out, call->usage);
        return;
    }
    span_t key = {line + pos + 1, len - pos - 1};
    if (!lease_room(cli, out))
        return;
    /* count is at most the number of words on the line, so this allocation is bounded by it. */
    const chring_member_t **skip = cli_calloc((size_t)count, sizeof(*skip));
    if (!skip) {
        cli_answer_err(out, "out of memory");
        return;
    }
    /* Second pass: the named members of the current snapshot.  The engine is the ring's only
     * writer and runs on one thread, so the snapshot chring_acquire_skip reads is this one and
     * its members stay valid across the call. */
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    size_t nskip = 0;
    char name[CHRING_NAME_MAX + 1];
    pos = names_at;
    for (uint64_t i = 0; i < count; i++) {
        cli_next_word(line, len, &pos, &word);
        memcpy(name, word.ptr, word.len);
        name[word.len] = '\0';
        const chring_member_t *m = chring_snap_find(s, name);
        if (m)
            skip[nskip++] = m;
    }
    chring_lease_t lease;
    int rc = chring_acquire_skip(cli->ring, key.ptr, key.len, skip, nskip, &lease);
    chring_snap_exit(cli->ring, s);
    free(skip);
    lease_keep(cli, out, rc, &lease);
}

/* RELEASE <lease number>: releases a lease ACQUIRE printed and has not been released. */
void cli_cmd_release(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    uint64_t number;
    if (!cli_parse_u64(call->words[0], UINT64_MAX, &number) || number == 0) {
        cli_answer_err(call->out, "bad lease number");
        return;
    }
    size_t lo = 0, hi = cli->leases_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cli->leases[mid].number < number)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == cli->leases_len || cli->leases[lo].number != number ||
        !cli->leases[lo].lease.member) {
        cli_answer_err(call->out, "no such lease");
        return;
    }
    /* chring_release clears the lease, which marks the slot released. */
    chring_release(cli->ring, &cli->leases[lo].lease);
    cli->leases[lo].lease.member = NULL;
    cli->leases_live--;
    cli_answer_ok(call->out);
}

/* The outcome word ACQUIREH prints. */
static const char *outcome_word(uint32_t outcome)
{
    switch (outcome) {
    case CHRING_OUTCOME_OWNER:
        return "owner";
    case CHRING_OUTCOME_SPILLED:
        return "spilled";
    case CHRING_OUTCOME_SATURATED:
        return "saturated";
    default:
        return "none";
    }
}

/* ACQUIREH <hash>: as ACQUIRE with the key's hash given (decimal, the profile's width; higher
 * bits are ignored, chring_acquire_hash): "<owner> <lease number> owner|spilled|saturated". */
void cli_cmd_acquire_hash(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    uint64_t hash;
    if (!cli_parse_u64(call->words[0], UINT64_MAX, &hash)) {
        cli_answer_err(call->out, "bad hash (decimal, 0 to 18446744073709551615)");
        return;
    }
    if (!lease_room(cli, call->out))
        return;
    chring_lease_t lease;
    int rc = chring_acquire_hash(cli->ring, hash, &lease);
    uint32_t outcome = lease.outcome;
    if (rc != 0 || !lease.member) {
        lease_keep(cli, call->out, rc, &lease);
        return;
    }
    cli_lease_t *slot = &cli->leases[cli->leases_len++];
    slot->number = ++cli->next_lease;
    slot->lease = lease; /* a move: the slot's copy is the lease now */
    cli->leases_live++;
    cli_put_name(call->out, slot->lease.member);
    fprintf(call->out, " %" PRIu64 " %s\n", slot->number, outcome_word(outcome));
}

/* TRY <name>: a lease on that member only while it is below its capacity (chring_acquire_try):
 * "<name> <lease number>", BUSY when it is full, REFUSED when it is not a member, is down or is
 * at admission scale 0. */
void cli_cmd_try(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    span_t word = call->words[0];
    const char *reason = cli_name_check(word);
    if (reason) {
        cli_answer_err(call->out, reason);
        return;
    }
    if (!lease_room(cli, call->out))
        return;
    char name[CHRING_NAME_MAX + 1];
    memcpy(name, word.ptr, word.len);
    name[word.len] = '\0';
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    const chring_member_t *m = chring_snap_find(s, name);
    chring_lease_t lease;
    int rc = m ? chring_acquire_try(cli->ring, s, m, &lease) : -ENOENT;
    chring_snap_exit(cli->ring, s);
    if (rc == -EBUSY) {
        fputs("BUSY\n", call->out);
        return;
    }
    if (rc == -ENOENT) {
        fputs("REFUSED\n", call->out);
        return;
    }
    lease_keep(cli, call->out, rc, &lease);
}
