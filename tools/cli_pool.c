/* chring command engine: the membership (POOL, ADD, REMOVE, WEIGHT, LOAD).
 *
 * SPDX-License-Identifier: MIT
 *
 * Every writer command builds the new pool array before its one library call and swaps it in
 * only when the call succeeds: after the publish that removes a member its entry belongs to the
 * ring's retire callback (cli_internal.h).
 */
#include "cli_internal.h"

#include <errno.h>

void cli_member_retire(void *udata, void *ctx)
{
    (void)ctx;
    cli_member_t *m = udata;
    if (m) {
        free(m->name);
        free(m);
    }
}

static cli_member_t *member_new(span_t name)
{
    cli_member_t *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->name = cli_span_dup(name);
    if (!m->name) {
        free(m);
        return NULL;
    }
    m->len = name.len;
    return m;
}

/* The pool entry of a name, or NULL if the name is not a member. */
static cli_member_t *pool_find(chring_cli_t *cli, const char *name)
{
    const chring_snap_t *s = chring_snap_enter(cli->ring);
    const chring_member_t *m = chring_snap_find(s, name);
    cli_member_t *cm = m ? chring_member_udata(m) : NULL;
    chring_snap_exit(cli->ring, s);
    return cm;
}

/* The change that makes a new pool entry join at weight 1. */
static chring_change_t join(cli_member_t *cm)
{
    return (chring_change_t){.name = cm->name, .weight = 1, .udata = cm};
}

/* POOL n1 n2 ...: the membership becomes exactly these names, each at weight 1, in this order
 * (one chring_sync, one publish).  Members already in the pool keep their object, counters and
 * (fnv16) their earlier join; new names join in the listed order. */
void cli_cmd_pool(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    const cli_names_t *list = &call->names;
    cli_member_t **pool = cli_calloc(list->len, sizeof(*pool));
    chring_change_t *changes = cli_calloc(list->len, sizeof(*changes));
    bool *fresh = cli_calloc(list->len, sizeof(*fresh));
    int rc = (pool && changes && fresh) ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < list->len; i++) {
        cli_member_t *cm = pool_find(cli, list->items[i].cstr);
        if (!cm) {
            cm = member_new(list->items[i].name);
            if (!cm) {
                rc = -ENOMEM;
                break;
            }
            fresh[i] = true;
        }
        pool[i] = cm;
        changes[i] = join(cm);
    }
    if (rc == 0)
        rc = chring_sync(cli->ring, changes, list->len);
    if (rc == 0) {
        free(cli->pool);
        cli->pool = pool;
        cli->pool_len = list->len;
        pool = NULL;
        cli_answer_ok(call->out);
    } else {
        for (size_t i = 0; pool && fresh && i < list->len; i++)
            if (fresh[i])
                cli_member_retire(pool[i], NULL);
        cli_answer_lib_err(call->out, rc);
    }
    free(pool);
    free(changes);
    free(fresh);
}

/* ADD n1 n2 ...: names not yet in the pool join at weight 1 and are appended to the pool in this
 * order; names already there (or repeated) are ignored.  One chring_update: at most one publish. */
void cli_cmd_add(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    const cli_names_t *list = &call->names;
    cli_member_t **pool = calloc(cli->pool_len + list->len, sizeof(*pool));
    chring_change_t *changes = calloc(list->len, sizeof(*changes));
    size_t added = 0;
    int rc = (pool && changes) ? 0 : -ENOMEM;
    if (rc == 0 && cli->pool_len > 0)
        memcpy(pool, cli->pool, cli->pool_len * sizeof(*pool));
    for (size_t i = 0; rc == 0 && i < list->len; i++) {
        if (pool_find(cli, list->items[i].cstr))
            continue;
        cli_member_t *cm = member_new(list->items[i].name);
        if (!cm) {
            rc = -ENOMEM;
            break;
        }
        pool[cli->pool_len + added] = cm;
        changes[added] = join(cm);
        added++;
    }
    if (rc == 0 && added > 0)
        rc = chring_update(cli->ring, changes, added);
    if (rc == 0) {
        free(cli->pool);
        cli->pool = pool;
        cli->pool_len += added;
        pool = NULL;
        cli_answer_ok(call->out);
    } else {
        for (size_t i = 0; pool && i < added; i++)
            cli_member_retire(pool[cli->pool_len + i], NULL);
        cli_answer_lib_err(call->out, rc);
    }
    free(pool);
    free(changes);
}

/* REMOVE n1 n2 ...: members named here leave the ring and the pool (the others keep their order);
 * unknown or repeated names are ignored.  One chring_update: at most one publish. */
void cli_cmd_remove(cli_call_t *call)
{
    chring_cli_t *cli = call->cli;
    const cli_names_t *list = &call->names;
    chring_change_t *changes = calloc(list->len, sizeof(*changes));
    cli_member_t **pool = cli_calloc(cli->pool_len, sizeof(*pool));
    size_t removed = 0, kept = 0;
    int rc = (changes && pool) ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < list->len; i++) {
        cli_member_t *cm = pool_find(cli, list->items[i].cstr);
        if (!cm)
            continue;
        cm->leaving = true;
        changes[removed].name = cm->name;
        changes[removed].weight = 0;
        removed++;
    }
    /* The new pool is built before the publish: after it the removed entries belong to the
     * ring's retire callback and may already be freed. */
    for (size_t i = 0; i < cli->pool_len; i++) {
        if (!cli->pool[i]->leaving && pool)
            pool[kept++] = cli->pool[i];
        cli->pool[i]->leaving = false;
    }
    if (rc == 0 && removed > 0)
        rc = chring_update(cli->ring, changes, removed);
    if (rc == 0) {
        if (removed > 0) {
            free(cli->pool);
            cli->pool = pool;
            cli->pool_len = kept;
            pool = NULL;
        }
        cli_answer_ok(call->out);
    } else {
        cli_answer_lib_err(call->out, rc);
    }
    free(pool);
    free(changes);
}

/* The words "<name> <number>" of WEIGHT and LOAD: NULL, or the reason of the ERR answer (bad is
 * the one for a number that is not from min to max). */
static const char *member_and_number(cli_call_t *call, const char *bad, uint64_t min, uint64_t max,
                                     cli_member_t **member, uint64_t *value)
{
    const char *reason = cli_name_check(call->words[0]);
    if (reason)
        return reason;
    if (!cli_parse_u64(call->words[1], max, value) || *value < min)
        return bad;
    char cname[CHRING_NAME_MAX + 1];
    memcpy(cname, call->words[0].ptr, call->words[0].len);
    cname[call->words[0].len] = '\0';
    *member = pool_find(call->cli, cname);
    if (!*member)
        return "no such member";
    return NULL;
}

/* WEIGHT <name> <weight>: one chring_set_weight. */
void cli_cmd_weight(cli_call_t *call)
{
    cli_member_t *cm;
    uint64_t weight;
    const char *reason =
        member_and_number(call, "bad weight (1 to 4294967295)", 1, UINT32_MAX, &cm, &weight);
    if (reason) {
        cli_answer_err(call->out, reason);
        return;
    }
    int rc = chring_set_weight(call->cli->ring, cm->name, (uint32_t)weight);
    if (rc < 0)
        cli_answer_lib_err(call->out, rc);
    else
        cli_answer_ok(call->out);
}

/* LOAD <name> <load>: the load BOUNDED sees for the member; the ring does not change. */
void cli_cmd_load(cli_call_t *call)
{
    cli_member_t *cm;
    uint64_t load;
    const char *reason =
        member_and_number(call, "bad load (0 to 4294967295)", 0, UINT32_MAX, &cm, &load);
    if (reason) {
        cli_answer_err(call->out, reason);
        return;
    }
    cm->load = load;
    cli_answer_ok(call->out);
}
