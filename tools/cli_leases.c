/* chring command engine: leases on the library's built-in load counters (ACQUIRE, RELEASE).
 *
 * SPDX-License-Identifier: MIT
 *
 * ACQUIRE numbers its leases 1, 2, ... and keeps them in an array sorted by number, so RELEASE
 * finds one by binary search.  A released slot stays (its .lease.member is NULL) until the array
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

/* ACQUIRE <key>: "<owner> <lease number>", or EMPTY for an empty ring. */
void cli_cmd_acquire(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    FILE *out = call->out;
    if (cli->leases_live >= CHRING_CLI_LEASES_MAX) {
        cli_answer_err(out, "too many leases");
        return;
    }
    if (!leases_reserve(cli)) {
        cli_answer_err(out, "out of memory");
        return;
    }
    chring_lease_t lease;
    int rc = chring_acquire(cli->ring, call->arg.ptr, call->arg.len, &lease);
    if (rc == -ENOENT) {
        fputs("EMPTY\n", out);
        return;
    }
    if (rc < 0 || !lease.member) {
        cli_answer_lib_err(out, rc < 0 ? rc : -EINVAL);
        return;
    }
    cli_lease_t *slot = &cli->leases[cli->leases_len++];
    slot->number = ++cli->next_lease;
    slot->lease = lease;
    cli->leases_live++;
    cli_put_name(out, slot->lease.member);
    fprintf(out, " %" PRIu64 "\n", slot->number);
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
