/* The udata rule (docs/design.md §4, §5; include/chring.h, config.retire): every non-NULL udata
 * passed to chring_add, chring_update or chring_sync in a call that returns 0 is handed back
 * through config.retire exactly once: when the member that keeps it is retired, or, for one the
 * call did not keep (its change named an existing member, which keeps its own udata), before the
 * call returns, unless it is the member's own udata.  A call that fails keeps none and hands none
 * back.
 *
 * A ledger records every object the test creates (each one malloc'd, so LeakSanitizer sees one
 * that is never handed back), what the test expects of it, and how often and when retire handed
 * it back; retire frees it.  A model of the membership (name -> weight, udata) tells which
 * objects a call keeps.  The same calls run once plainly and once with the k-th allocation of
 * each call failing, k = 1, 2, ... until it succeeds (as tests/test_alloc.c does).  Run under
 * AddressSanitizer + UndefinedBehaviorSanitizer by .ci/steps/22-misuse-asan.sh.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

#include <pthread.h>
#include <stdbool.h>

/* ---- The ledger ---------------------------------------------------------------------------- */

enum expect {
    FRESH,      /* created, not yet passed to a call */
    KEPT,       /* a member keeps it: handed back once, when that member is retired */
    UNKEPT,     /* the call did not keep it: handed back before the call returned */
    OWN,        /* passed again as the member's own udata: no second hand-back from this call */
    TEST_FREED, /* passed to a call that failed: the test freed it, the ring must never return it */
};

#define LEDGER_MAX 65536

struct object {
    int index; /* in the ledger */
};

/* The ledger keeps each object's address disguised, so that it does not keep the object
 * reachable: an object the ring never hands back (and so never frees) is a leak LeakSanitizer
 * reports. */
#define DISGUISE(o) ((uintptr_t)(o) ^ (uintptr_t)0x5a5a5a5a5a5a5a5aull)

struct entry {
    uintptr_t object; /* DISGUISE(the object) */
    enum expect expect;
    int retired;    /* hand-backs through config.retire */
    bool by_writer; /* the (last) hand-back ran on the test's thread inside a writer call */
};

static struct {
    pthread_mutex_t lock;
    struct entry entries[LEDGER_MAX];
    int count;
    int unknown;      /* hand-backs of objects the ledger does not know (or freed ones) */
    int null_retired; /* retire(NULL): members created without udata, retired */
    int null_created; /* members created without udata (by the model) */
    pthread_t writer; /* the test's thread */
    bool in_call;     /* the test's thread is inside a writer call */
} ledger = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct object *object_new(void)
{
    struct object *o = malloc(sizeof *o);
    cr_assert_not_null(o, "out of memory in the test");
    pthread_mutex_lock(&ledger.lock);
    cr_assert_lt(ledger.count, LEDGER_MAX, "ledger full");
    o->index = ledger.count++;
    ledger.entries[o->index] = (struct entry){.object = DISGUISE(o), .expect = FRESH};
    pthread_mutex_unlock(&ledger.lock);
    return o;
}

/* config.retire: may run on the ring's reclaimer thread, on a thread inside chring_release or
 * chring_snap_put, inside chring_free, or on a writer after its lock is released. */
static void ledger_retire(void *udata, void *ctx)
{
    (void)ctx;
    struct object *o = udata;
    pthread_mutex_lock(&ledger.lock);
    if (o == NULL) {
        ledger.null_retired++; /* a member created without udata is retired too */
        pthread_mutex_unlock(&ledger.lock);
        return;
    }
    int i = -1;
    for (int k = 0; k < ledger.count; k++)
        if (ledger.entries[k].object == DISGUISE(o) && ledger.entries[k].expect != TEST_FREED &&
            ledger.entries[k].retired == 0) {
            i = k;
            break;
        }
    if (i < 0) {
        ledger.unknown++; /* a second hand-back, or an object the test freed or never made */
        pthread_mutex_unlock(&ledger.lock);
        return;
    }
    struct entry *e = &ledger.entries[i];
    e->retired++;
    e->by_writer = ledger.in_call && pthread_equal(pthread_self(), ledger.writer);
    pthread_mutex_unlock(&ledger.lock);
    free(o); /* as an application frees its per-member object */
}

static struct entry ledger_get(const struct object *o, int index)
{
    pthread_mutex_lock(&ledger.lock);
    struct entry e = ledger.entries[o ? o->index : index];
    pthread_mutex_unlock(&ledger.lock);
    return e;
}

static void ledger_set(int index, enum expect expect)
{
    pthread_mutex_lock(&ledger.lock);
    ledger.entries[index].expect = expect;
    pthread_mutex_unlock(&ledger.lock);
}

/* Nothing was handed back twice, unknown, or after the test freed it. */
static void ledger_assert_sane(const char *what)
{
    pthread_mutex_lock(&ledger.lock);
    int unknown = ledger.unknown;
    int null_retired = ledger.null_retired, null_created = ledger.null_created;
    int bad = -1;
    for (int k = 0; k < ledger.count && bad < 0; k++) {
        const struct entry *e = &ledger.entries[k];
        if (e->retired > 1 || (e->expect == TEST_FREED && e->retired != 0) ||
            (e->expect == FRESH && e->retired != 0))
            bad = k;
    }
    struct entry e = bad >= 0 ? ledger.entries[bad] : (struct entry){0};
    pthread_mutex_unlock(&ledger.lock);
    cr_assert_eq(unknown, 0, "%s: %d hand-backs of unknown, freed or already returned objects",
                 what, unknown);
    cr_assert_leq(null_retired, null_created, "%s: %d members without udata retired, %d created",
                  what, null_retired, null_created);
    cr_assert_lt(bad, 0, "%s: object %d (expect %d) handed back %d times", what, bad, e.expect,
                 e.retired);
}

static void ledger_reset(void)
{
    pthread_mutex_lock(&ledger.lock);
    ledger.count = 0;
    ledger.unknown = 0;
    ledger.null_retired = 0;
    ledger.null_created = 0;
    ledger.writer = pthread_self();
    ledger.in_call = false;
    pthread_mutex_unlock(&ledger.lock);
}

/* ---- The counting allocator (fault injection) ---------------------------------------------- */

static struct {
    long allocs, frees, calls, fail_at;
} counter;

static void *counting_alloc(size_t size, void *ctx)
{
    (void)ctx;
    long call = __atomic_add_fetch(&counter.calls, 1, __ATOMIC_SEQ_CST);
    if (call == __atomic_load_n(&counter.fail_at, __ATOMIC_SEQ_CST))
        return NULL;
    void *p = malloc(size ? size : 1);
    if (p != NULL)
        __atomic_add_fetch(&counter.allocs, 1, __ATOMIC_SEQ_CST);
    return p;
}

static void counting_free(void *ptr, void *ctx)
{
    (void)ctx;
    if (ptr == NULL)
        return;
    __atomic_add_fetch(&counter.frees, 1, __ATOMIC_SEQ_CST);
    free(ptr);
}

static void arm(long k)
{
    __atomic_store_n(&counter.calls, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&counter.fail_at, k, __ATOMIC_SEQ_CST);
}

/* ---- The membership model ------------------------------------------------------------------ */

#define NAMES 16

struct model {
    bool present[NAMES];
    uint32_t weight[NAMES];
    struct object *udata[NAMES];
};

static const char *const names[NAMES] = {"a", "b", "c", "d", "e", "f", "g", "h",
                                         "i", "j", "k", "l", "m", "n", "o", "p"};

static int name_index(const char *name)
{
    for (int i = 0; i < NAMES; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    cr_assert_fail("unknown name %s", name);
    return -1;
}

/* The ring's membership, weights and udata are the model's. */
static void model_assert_ring(const struct model *md, chring_t *r, const char *what)
{
    const chring_snap_t *s = chring_snap_enter(r);
    size_t expected = 0;
    for (int i = 0; i < NAMES; i++) {
        const chring_member_t *m = chring_snap_find(s, names[i]);
        if (!md->present[i]) {
            cr_assert_null(m, "%s: %s is not a member", what, names[i]);
            continue;
        }
        expected++;
        cr_assert_not_null(m, "%s: %s is a member", what, names[i]);
        cr_assert_eq(chring_snap_weight(s, m), md->weight[i], "%s: weight of %s", what, names[i]);
        cr_assert_eq(chring_member_udata(m), (void *)md->udata[i], "%s: udata of %s", what,
                     names[i]);
    }
    cr_assert_eq(chring_snap_len(s), expected, "%s: member count", what);
    chring_snap_exit(r, s);
}

enum call_kind {
    CALL_ADD,
    CALL_UPDATE,
    CALL_SYNC
};

/* One writer call checked against the model and the ledger.  changes[k].udata are objects made
 * by object_new() (or NULL, or a member's own udata).  Returns the call's result. */
static int checked_call(chring_t *r, struct model *md, enum call_kind kind,
                        const chring_change_t *changes, size_t n, const char *what)
{
    /* What the call should do with each udata, from the model before it, and each object's
     * ledger index (read now: a hand-back frees the object). */
    enum expect expect[64];
    int index[64];
    cr_assert_leq(n, 64u);
    for (size_t k = 0; k < n; k++) {
        int i = name_index(changes[k].name);
        struct object *o = changes[k].udata;
        index[k] = o != NULL ? o->index : -1;
        if (o == NULL)
            expect[k] = FRESH; /* nothing to hand back */
        else if (md->present[i] && md->udata[i] == o)
            expect[k] = OWN;
        else if (md->present[i])
            expect[k] = UNKEPT;
        else
            expect[k] = KEPT;
        if (o != NULL && expect[k] != OWN)
            cr_assert_eq(ledger_get(NULL, index[k]).expect, FRESH,
                         "%s: change %zu passes a fresh object", what, k);
    }

    pthread_mutex_lock(&ledger.lock);
    ledger.in_call = true;
    pthread_mutex_unlock(&ledger.lock);
    int rc;
    if (kind == CALL_ADD) {
        cr_assert_eq(n, 1u);
        rc = chring_add(r, changes[0].name, changes[0].weight, changes[0].udata);
    } else if (kind == CALL_UPDATE) {
        rc = chring_update(r, changes, n);
    } else {
        rc = chring_sync(r, changes, n);
    }
    pthread_mutex_lock(&ledger.lock);
    ledger.in_call = false;
    pthread_mutex_unlock(&ledger.lock);

    if (rc != 0) {
        /* Failed: none kept, none handed back; the test still owns them and frees them. */
        for (size_t k = 0; k < n; k++) {
            if (index[k] < 0 || expect[k] == OWN)
                continue;
            struct entry e = ledger_get(NULL, index[k]);
            cr_assert_eq(e.retired, 0, "%s failed (%d) but handed change %zu's udata back", what,
                         rc, k);
            ledger_set(index[k], TEST_FREED);
            free(changes[k].udata);
        }
        model_assert_ring(md, r, what);
        ledger_assert_sane(what);
        return rc;
    }

    /* Succeeded: exactly the objects it did not keep came back, on the writer's thread inside
     * the call; the kept ones (and a member's own udata passed again) did not. */
    for (size_t k = 0; k < n; k++) {
        if (index[k] < 0)
            continue;
        struct entry e = ledger_get(NULL, index[k]);
        if (expect[k] == UNKEPT) {
            cr_assert_eq(e.retired, 1,
                         "%s: change %zu (%s) names a member: its udata is handed "
                         "back before the call returns (got %d)",
                         what, k, changes[k].name, e.retired);
            cr_assert(e.by_writer, "%s: change %zu's udata handed back by the writer call", what,
                      k);
            ledger_set(index[k], UNKEPT);
        } else if (changes[k].weight == 0) {
            /* Its member left in this call: the ring's reclaimer thread may retire it as soon as
             * the grace period after the call's publish ends (0.1 ms here, maybe before this
             * check), but the call itself never hands it back. */
            cr_assert(e.retired == 0 || !e.by_writer,
                      "%s: change %zu (%s): a removed member's own udata handed back by the "
                      "writer call",
                      what, k, changes[k].name);
        } else {
            cr_assert_eq(e.retired, 0, "%s: change %zu (%s): a kept udata is not handed back yet",
                         what, k, changes[k].name);
            if (expect[k] == KEPT)
                ledger_set(index[k], KEPT);
        }
    }

    /* Update the model. */
    bool named[NAMES] = {false};
    for (size_t k = 0; k < n; k++) {
        int i = name_index(changes[k].name);
        named[i] = true;
        if (changes[k].weight == 0) {
            md->present[i] = false;
            md->udata[i] = NULL;
        } else if (md->present[i]) {
            md->weight[i] = changes[k].weight;
        } else {
            md->present[i] = true;
            md->weight[i] = changes[k].weight;
            md->udata[i] = changes[k].udata;
            if (changes[k].udata == NULL) {
                pthread_mutex_lock(&ledger.lock);
                ledger.null_created++;
                pthread_mutex_unlock(&ledger.lock);
            }
        }
    }
    if (kind == CALL_SYNC)
        for (int i = 0; i < NAMES; i++)
            if (!named[i]) {
                md->present[i] = false;
                md->udata[i] = NULL;
            }
    model_assert_ring(md, r, what);
    ledger_assert_sane(what);
    return rc;
}

/* ---- The calls ----------------------------------------------------------------------------- */

enum udata_mode {
    U_NEW,  /* a fresh object */
    U_NULL, /* no udata */
    U_OWN,  /* the member's own udata again (the model's) */
};

struct step {
    enum call_kind kind;
    int expect; /* the call's result */
    size_t n;
    struct {
        const char *name;
        uint32_t weight;
        enum udata_mode udata;
    } c[NAMES];
};

/* Fresh objects for the step's changes, then the checked call. */
static int run_step(chring_t *r, struct model *md, const struct step *st, const char *what)
{
    chring_change_t changes[NAMES];
    for (size_t k = 0; k < st->n; k++) {
        changes[k].name = st->c[k].name;
        changes[k].weight = st->c[k].weight;
        if (st->c[k].udata == U_NEW)
            changes[k].udata = object_new();
        else if (st->c[k].udata == U_OWN)
            changes[k].udata = md->udata[name_index(st->c[k].name)];
        else
            changes[k].udata = NULL;
    }
    return checked_call(r, md, st->kind, changes, st->n, what);
}

/* The fixed calls: overlapping syncs, adds of existing members (same and other weight, fresh and
 * own udata), updates that add, remove with and without udata, and re-weight with udata, and a
 * batch that fails for another reason than memory. */
static const struct step steps[] = {
    {CALL_SYNC, 0, 4, {{"a", 1, U_NEW}, {"b", 1, U_NEW}, {"c", 2, U_NEW}, {"d", 1, U_NEW}}},
    /* c, d exist: their fresh objects come back; e, f are kept; a, b leave. */
    {CALL_SYNC, 0, 4, {{"c", 2, U_NEW}, {"d", 1, U_NEW}, {"e", 1, U_NEW}, {"f", 1, U_NEW}}},
    /* d re-weighted with a fresh object, e with its own, g new, f without udata. */
    {CALL_SYNC, 0, 4, {{"d", 2, U_NEW}, {"e", 3, U_OWN}, {"f", 1, U_NULL}, {"g", 1, U_NEW}}},
    {CALL_ADD, 0, 1, {{"e", 3, U_NEW}}},  /* existing, same weight: no change, handed back */
    {CALL_ADD, 0, 1, {{"f", 2, U_NEW}}},  /* existing, other weight: re-weight, handed back */
    {CALL_ADD, 0, 1, {{"g", 1, U_OWN}}},  /* its own udata: nothing handed back */
    {CALL_ADD, 0, 1, {{"g", 2, U_OWN}}},  /* re-weight with its own udata */
    {CALL_ADD, 0, 1, {{"h", 1, U_NEW}}},  /* new: kept */
    {CALL_ADD, 0, 1, {{"h", 1, U_NULL}}}, /* existing, no udata */
    {CALL_ADD, 0, 1, {{"i", 1, U_NULL}}}, /* new without udata */
    {CALL_UPDATE,
     0,
     6,
     {{"j", 1, U_NEW},  /* add */
      {"d", 0, U_NEW},  /* remove, with a udata: handed back */
      {"e", 0, U_NULL}, /* remove without */
      {"f", 1, U_NEW},  /* re-weight with a udata: handed back */
      {"g", 3, U_OWN},  /* re-weight with its own */
      {"k", 2, U_NULL}}},
    {CALL_UPDATE, 0, 2, {{"h", 0, U_OWN}, {"l", 1, U_NEW}}}, /* remove with its own udata */
    /* weight 0 for a non-member: the whole batch fails, the test frees its objects. */
    {CALL_UPDATE, -ENOENT, 3, {{"m", 1, U_NEW}, {"n", 0, U_NEW}, {"c", 1, U_NEW}}},
    {CALL_UPDATE, 0, 0, {{0}}},                                  /* an empty batch */
    {CALL_SYNC, -EINVAL, 2, {{"a", 1, U_NEW}, {"b", 0, U_NEW}}}, /* weight 0 in a sync */
};

/* xorshift64*: the random syncs are the same on every run. */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * UINT64_C(2685821657736338717);
}

/* A sync to a random subset of the first 12 names, random weights, mostly fresh objects. */
static void random_sync(struct step *st, const struct model *md, uint64_t *rng)
{
    memset(st, 0, sizeof *st);
    st->kind = CALL_SYNC;
    for (int i = 0; i < 12; i++) {
        if (next_random(rng) % 2 == 0)
            continue;
        size_t k = st->n++;
        st->c[k].name = names[i];
        st->c[k].weight = 1 + (uint32_t)(next_random(rng) % 3);
        uint64_t pick = next_random(rng) % 8;
        st->c[k].udata = pick == 0 ? U_NULL : (pick == 1 && md->present[i]) ? U_OWN : U_NEW;
    }
}

typedef int (*step_runner)(chring_t *r, struct model *md, const struct step *st, const char *what);

/* The step with the k-th allocation failing, k = 1, 2, ..., until the call returns something
 * other than -ENOMEM, which must then be the step's own result. */
static int run_step_failing_each_allocation(chring_t *r, struct model *md, const struct step *st,
                                            const char *what)
{
    int rc = -ENOMEM;
    long k;
    for (k = 1; k < 1000 && rc == -ENOMEM; k++) {
        arm(k);
        rc = run_step(r, md, st, what);
        arm(0);
    }
    cr_assert_neq(rc, -ENOMEM, "%s: still -ENOMEM after %ld injected failures", what, k);
    return rc;
}

static void ledger_run(bool inject)
{
    ledger_reset();
    memset(&counter, 0, sizeof counter);
    chring_allocator_t allocator = {counting_alloc, counting_free, NULL};
    cr_assert_eq(chring_set_allocator(&allocator), 0);

    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 20;
    cfg.retire = ledger_retire;
    chring_t *r = ring_create(&cfg);
    struct model md;
    memset(&md, 0, sizeof md);
    step_runner run = inject ? run_step_failing_each_allocation : run_step;

    char what[64];
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        snprintf(what, sizeof what, "step %zu", s);
        int rc = run(r, &md, &steps[s], what);
        cr_assert_eq(rc, steps[s].expect, "%s returned %d, expected %d", what, rc, steps[s].expect);
    }
    uint64_t rng = UINT64_C(0x9e3779b97f4a7c15);
    for (int round = 0; round < 40; round++) {
        struct step st;
        random_sync(&st, &md, &rng);
        snprintf(what, sizeof what, "random sync %d", round);
        int rc = run(r, &md, &st, what);
        cr_assert_eq(rc, 0, "%s returned %d", what, rc);
    }

    chring_free(&r);
    ledger_assert_sane("after chring_free");
    /* Every object a successful call was given came back exactly once; none of a failed one. */
    int kept = 0, unkept = 0, freed = 0;
    for (int k = 0; k < ledger.count; k++) {
        struct entry e = ledger_get(NULL, k);
        cr_assert_neq(e.expect, FRESH, "object %d was never passed", k);
        if (e.expect == TEST_FREED) {
            freed++;
            cr_assert_eq(e.retired, 0, "object %d of a failed call handed back", k);
        } else {
            kept += e.expect == KEPT;
            unkept += e.expect == UNKEPT;
            cr_assert_eq(e.retired, 1, "object %d (expect %d) handed back %d times", k, e.expect,
                         e.retired);
        }
    }
    cr_assert_eq(ledger.null_retired, ledger.null_created,
                 "every member created without udata retired once: %d of %d", ledger.null_retired,
                 ledger.null_created);
    cr_assert_gt(ledger.null_created, 3, "members without udata were created");
    cr_assert_gt(kept, 20, "the calls kept objects (%d)", kept);
    cr_assert_gt(unkept, 20, "the calls handed objects back (%d)", unkept);
    if (inject)
        cr_assert_gt(freed, 100, "failed calls left objects to the test (%d)", freed);
    long allocs = __atomic_load_n(&counter.allocs, __ATOMIC_SEQ_CST);
    long frees = __atomic_load_n(&counter.frees, __ATOMIC_SEQ_CST);
    cr_assert_eq(allocs, frees, "%ld allocations, %ld frees: the library leaked", allocs, frees);
    cr_assert_eq(chring_set_allocator(NULL), 0);
}

Test(udata, every_udata_of_a_successful_call_comes_back_exactly_once)
{
    ledger_run(false);
}

Test(udata, failed_calls_keep_none_and_hand_none_back_at_every_allocation)
{
    ledger_run(true);
}
