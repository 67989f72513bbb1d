/* chring command engine: SNAP and MOVED, how many keys change owner between two rings.
 *
 * SPDX-License-Identifier: MIT
 *
 * SNAP <n> records, for the keys key0 .. key<n-1>, the owner on the ring and the owner under the
 * `mod` scheme (pool[hash % pool size]); MOVED counts the keys whose owner differs now, under each
 * scheme.  The record keeps copies of the pool's names, since the members themselves may be
 * retired before MOVED.
 */
#include "cli_internal.h"

void cli_snap_clear(chring_cli_t *cli)
{
    for (size_t i = 0; i < cli->snap_pool_len; i++)
        free(cli->snap_names[i]);
    free(cli->snap_names);
    free(cli->snap_name_lens);
    free(cli->snap_ring);
    free(cli->snap_mod);
    cli->snap_names = NULL;
    cli->snap_name_lens = NULL;
    cli->snap_ring = NULL;
    cli->snap_mod = NULL;
    cli->snap_pool_len = 0;
    cli->snap_count = 0;
    cli->snapped = false;
}

static size_t snap_key(char *buf, size_t cap, size_t i)
{
    int n = snprintf(buf, cap, "key%zu", i);
    return n < 0 ? 0 : (size_t)n;
}

/* The index of a snapshot member in the pool (cli_member.snap_index was set for this SNAP). */
static uint32_t snap_owner_index(chring_cli_t *cli, const chring_member_t *m)
{
    if (!m)
        return CLI_EMPTY;
    const cli_member_t *cm = chring_member_udata(m);
    if (cm && cm->snap_index < cli->pool_len && cli->pool[cm->snap_index] == cm)
        return cm->snap_index;
    /* Not reached while the pool mirrors the snapshot; fall back to comparing names. */
    const char *name = chring_member_name(m);
    for (size_t i = 0; i < cli->pool_len; i++)
        if (strcmp(cli->pool[i]->name, name) == 0)
            return (uint32_t)i;
    return CLI_EMPTY;
}

void cli_cmd_snap(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    uint64_t count;
    if (!cli_parse_u64(call->words[0], CHRING_CLI_SNAP_MAX, &count)) {
        cli_answer_err(call->out, "bad count (0 to 1000000)");
        return;
    }
    char **names = cli_calloc(cli->pool_len, sizeof(*names));
    size_t *lens = cli_calloc(cli->pool_len, sizeof(*lens));
    uint32_t *ring = cli_calloc(count, sizeof(*ring));
    uint32_t *mod = cli_calloc(count, sizeof(*mod));
    bool ok = names && lens && ring && mod;
    for (size_t i = 0; ok && i < cli->pool_len; i++) {
        names[i] = cli_span_dup((span_t){cli->pool[i]->name, cli->pool[i]->len});
        ok = names[i] != NULL;
        if (ok) {
            lens[i] = cli->pool[i]->len;
            cli->pool[i]->snap_index = (uint32_t)i;
        }
    }
    if (!ok) {
        for (size_t i = 0; names && i < cli->pool_len; i++)
            free(names[i]);
        free(names);
        free(lens);
        free(ring);
        free(mod);
        cli_answer_err(call->out, "out of memory");
        return;
    }
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    char key[32];
    for (size_t i = 0; i < count; i++) {
        size_t klen = snap_key(key, sizeof(key), i);
        ring[i] = snap_owner_index(cli, chring_snap_lookup(s, key, klen));
        mod[i] = cli->pool_len == 0
                     ? CLI_EMPTY
                     : (uint32_t)(chring_snap_hash(s, key, klen) % (uint64_t)cli->pool_len);
    }
    chring_snap_exit(cli->ring, s);
    cli_snap_clear(cli);
    cli->snap_names = names;
    cli->snap_name_lens = lens;
    cli->snap_pool_len = cli->pool_len;
    cli->snap_ring = ring;
    cli->snap_mod = mod;
    cli->snap_count = count;
    cli->snapped = true;
    cli_answer_ok(call->out);
}

/* Whether a recorded owner (index into the SNAP copy, or CLI_EMPTY) differs from a current one
 * (a name, or NULL for no owner).  No owner is an owner value of its own: EMPTY -> EMPTY is not
 * a move, EMPTY -> x and x -> EMPTY are. */
static bool owner_changed(const chring_cli_t *cli, uint32_t then, const char *now, size_t now_len)
{
    if (then == CLI_EMPTY || !now)
        return !(then == CLI_EMPTY && !now);
    return cli->snap_name_lens[then] != now_len || memcmp(cli->snap_names[then], now, now_len) != 0;
}

void cli_cmd_moved(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    if (!cli->snapped) {
        cli_answer_err(call->out, "MOVED needs a SNAP first");
        return;
    }
    size_t moved_ring = 0, moved_mod = 0;
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    char key[32];
    for (size_t i = 0; i < cli->snap_count; i++) {
        size_t klen = snap_key(key, sizeof(key), i);
        const chring_member_t *m = chring_snap_lookup(s, key, klen);
        const char *name = m ? chring_member_name(m) : NULL;
        if (owner_changed(cli, cli->snap_ring[i], name, name ? strlen(name) : 0))
            moved_ring++;
        const cli_member_t *cm =
            cli->pool_len == 0
                ? NULL
                : cli->pool[chring_snap_hash(s, key, klen) % (uint64_t)cli->pool_len];
        if (owner_changed(cli, cli->snap_mod[i], cm ? cm->name : NULL, cm ? cm->len : 0))
            moved_mod++;
    }
    chring_snap_exit(cli->ring, s);
    fprintf(call->out, "ring=%zu mod=%zu\n", moved_ring, moved_mod);
}
