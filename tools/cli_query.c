/* chring command engine: lookups and listings (LOOKUP, HASH, BOUNDED, REPLICAS, RING, DIST,
 * STATS, VERSION).  None of them changes the ring; each reads one snapshot.  LOOKUP, BOUNDED and
 * REPLICAS walk past members that are down (DOWN); RING and DIST ignore health.
 *
 * SPDX-License-Identifier: MIT
 */
#include "cli_internal.h"

#include <inttypes.h>

/* A key's owner: its name, or EMPTY for none. */
static void answer_owner(FILE *out, const chring_member_t *m)
{
    if (m) {
        cli_put_name(out, m);
        fputc('\n', out);
    } else {
        fputs("EMPTY\n", out);
    }
}

void cli_cmd_lookup(cli_call_t *call)
{
    chring_t *ring = call->cli->ring;
    const chring_snap_t *s = chring_snap_enter(ring);
    answer_owner(call->out, chring_snap_lookup(s, call->arg.ptr, call->arg.len));
    chring_snap_exit(ring, s);
}

/* LOOKUPS k1 k2 ...: the owners of the blank-separated keys, in one batch lookup, on one line
 * (EMPTY for a key with no owner). */
void cli_cmd_lookups(cli_call_t *call)
{
    span_t arg = call->arg;
    FILE *out = call->out;
    size_t n = 0;
    for (size_t i = 0; i < arg.len; i++)
        if (!cli_is_space(arg.ptr[i]) && (i == 0 || cli_is_space(arg.ptr[i - 1])))
            n++;
    if (n == 0) {
        cli_answer_err(out, call->usage);
        return;
    }
    const void **keys = cli_calloc(n, sizeof(*keys));
    size_t *lens = cli_calloc(n, sizeof(*lens));
    const chring_member_t **owners = cli_calloc(n, sizeof(*owners));
    if (!keys || !lens || !owners) {
        free(keys);
        free(lens);
        free(owners);
        cli_answer_err(out, "out of memory");
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < arg.len; i++) {
        if (cli_is_space(arg.ptr[i]))
            continue;
        size_t start = i;
        while (i < arg.len && !cli_is_space(arg.ptr[i]))
            i++;
        keys[k] = arg.ptr + start;
        lens[k++] = i - start;
    }
    chring_t *ring = call->cli->ring;
    const chring_snap_t *s = chring_snap_enter(ring);
    chring_snap_lookup_many(s, (const void *const *)keys, lens, n, owners);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            fputc(' ', out);
        if (owners[i])
            cli_put_name(out, owners[i]);
        else
            fputs("EMPTY", out);
    }
    fputc('\n', out);
    chring_snap_exit(ring, s);
    free(keys);
    free(lens);
    free(owners);
}

void cli_cmd_hash(cli_call_t *call)
{
    chring_t *ring = call->cli->ring;
    const chring_snap_t *s = chring_snap_enter(ring);
    fprintf(call->out, "%" PRIu64 "\n", chring_snap_hash(s, call->arg.ptr, call->arg.len));
    chring_snap_exit(ring, s);
}

static uint64_t supplied_load(const chring_member_t *m, void *ctx)
{
    (void)ctx;
    const cli_member_t *cm = chring_member_udata(m);
    return cm ? cm->load : 0;
}

/* BOUNDED <key>: the owner under bounded loads, with the loads LOAD supplied. */
void cli_cmd_bounded(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    answer_owner(call->out, chring_snap_lookup_bounded(s, call->arg.ptr, call->arg.len,
                                                       cli->balance, supplied_load, NULL));
    chring_snap_exit(cli->ring, s);
}

/* REPLICAS <key> <n>: the key is everything between "REPLICAS " and the last blank. */
void cli_cmd_replicas(cli_call_t *call)
{
    span_t arg = call->arg;
    FILE *out = call->out;
    size_t end = arg.len;
    while (end > 0 && cli_is_space(arg.ptr[end - 1]))
        end--;
    size_t sep = end;
    while (sep > 0 && arg.ptr[sep - 1] != ' ' && arg.ptr[sep - 1] != '\t')
        sep--;
    if (sep == 0) {
        cli_answer_err(out, call->usage);
        return;
    }
    span_t num = {arg.ptr + sep, end - sep};
    span_t key = {arg.ptr, sep - 1};
    uint64_t n;
    if (!cli_parse_u64(num, UINT32_MAX, &n) || n == 0) {
        cli_answer_err(out, "bad count (1 to 4294967295)");
        return;
    }
    chring_t *ring = call->cli->ring;
    const chring_snap_t *s = chring_snap_enter(ring);
    size_t members = chring_snap_len(s);
    size_t want = n < members ? (size_t)n : members;
    const chring_member_t **owners = cli_calloc(want, sizeof(*owners));
    if (!owners) {
        chring_snap_exit(ring, s);
        cli_answer_err(out, "out of memory");
        return;
    }
    size_t got = chring_snap_lookup_n(s, key.ptr, key.len, owners, want);
    if (got == 0)
        fputs("EMPTY", out);
    for (size_t i = 0; i < got; i++) {
        if (i > 0)
            fputc(' ', out);
        cli_put_name(out, owners[i]);
    }
    fputc('\n', out);
    free(owners);
    chring_snap_exit(ring, s);
}

/* RING: every point in ring order, "<position>:<name>". */
void cli_cmd_ring(cli_call_t *call)
{
    chring_t *ring = call->cli->ring;
    const chring_snap_t *s = chring_snap_enter(ring);
    size_t n = chring_snap_points(s);
    for (size_t i = 0; i < n; i++) {
        uint64_t pos;
        const chring_member_t *m;
        if (chring_snap_point(s, i, &pos, &m) != 0 || !m)
            break;
        fprintf(call->out, "%" PRIu64 ":", pos);
        cli_put_name(call->out, m);
        fputc('\n', call->out);
    }
    chring_snap_exit(ring, s);
}

/* DIST: each member in pool order with its points and its share of the ring. */
void cli_cmd_dist(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    for (size_t i = 0; i < cli->pool_len; i++) {
        const chring_member_t *m = chring_snap_find(s, cli->pool[i]->name);
        cli_put_bytes(call->out, cli->pool[i]->name, cli->pool[i]->len);
        fprintf(call->out, " points=%zu share=%.4f\n", chring_snap_member_points(s, m),
                chring_member_share(s, m));
    }
    chring_snap_exit(cli->ring, s);
}

/* STATS: the ring's counters, then each member's in pool order. */
void cli_cmd_stats(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    FILE *out = call->out;
    chring_stats_t st;
    chring_stats(cli->ring, &st);
    fprintf(out,
            "version=%" PRIu64 " publishes=%" PRIu64 " members=%" PRIu64 " points=%" PRIu64
            " leases=%" PRIu64 " acquires=%" PRIu64 " spills=%" PRIu64 " saturated=%" PRIu64
            " retries=%" PRIu64 " down=%" PRIu64 "\n",
            st.version, st.publishes, st.members, st.points, st.leases, st.acquires, st.spills,
            st.saturated, st.retries, st.down);
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    for (size_t i = 0; i < cli->pool_len; i++) {
        const chring_member_t *m = chring_snap_find(s, cli->pool[i]->name);
        chring_member_stats_t ms;
        chring_member_stats(m, &ms);
        cli_put_bytes(out, cli->pool[i]->name, cli->pool[i]->len);
        fprintf(out,
                " weight=%" PRIu32 " load=%" PRIu64 " acquires=%" PRIu64 " primary=%" PRIu64
                " spilled_in=%" PRIu64 " supplied=%" PRIu64 "\n",
                chring_snap_weight(s, m), ms.load, ms.acquires, ms.primary, ms.spilled_in,
                cli->pool[i]->load);
    }
    chring_snap_exit(cli->ring, s);
}

/* VERSION: the current snapshot's version. */
void cli_cmd_version(cli_call_t *call)
{
    chring_t *ring = call->cli->ring;
    const chring_snap_t *s = chring_snap_enter(ring);
    fprintf(call->out, "%" PRIu64 "\n", chring_snap_version(s));
    chring_snap_exit(ring, s);
}
