/* Out of memory at every allocation (docs/design.md §4, §6): a counting allocator installed with
 * chring_set_allocator fails the k-th allocation of an operation, for k = 1, 2, ... until the
 * operation succeeds.  After each failure: -ENOMEM, nothing published, membership and every
 * key's owner unchanged.  At the end, after chring_free, every allocation has been freed.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE /* mallinfo2 */

#include "chring_test.h"

#include <malloc.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The tests below that use the default allocator count the library's memory with mallinfo2,
 * which sees malloc's heap only: snapshot blocks of 8 MB and more, which the library maps itself
 * with the default allocator, are left to malloc in this process (CHRING_MAP_BLOCKS=0,
 * docs/design.md §4, "At rest"), except in the test that checks the mapping (it unsets it). */
__attribute__((constructor)) static void blocks_from_malloc(void)
{
    setenv("CHRING_MAP_BLOCKS", "0", 1);
}

/* Counters are updated atomically: liburcu's call_rcu thread may free snapshots. */
struct counting {
    long allocs;    /* successful allocations */
    long frees;     /* frees of non-NULL pointers */
    long calls;     /* allocation calls since the last arm */
    long fail_at;   /* the armed call number that fails; 0: none */
    long failures;  /* allocations failed on purpose */
    size_t largest; /* the largest allocation since the last watch_reset */
};

static struct counting counter;

static void *counting_alloc(size_t size, void *ctx)
{
    struct counting *c = ctx;
    long call = __atomic_add_fetch(&c->calls, 1, __ATOMIC_SEQ_CST);
    if (call == __atomic_load_n(&c->fail_at, __ATOMIC_SEQ_CST)) {
        __atomic_add_fetch(&c->failures, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    void *p = malloc(size ? size : 1);
    if (p)
        __atomic_add_fetch(&c->allocs, 1, __ATOMIC_SEQ_CST);
    size_t seen = __atomic_load_n(&c->largest, __ATOMIC_SEQ_CST);
    while (size > seen && !__atomic_compare_exchange_n(&c->largest, &seen, size, false,
                                                       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    return p;
}

static void counting_free(void *ptr, void *ctx)
{
    struct counting *c = ctx;
    if (!ptr)
        return;
    __atomic_add_fetch(&c->frees, 1, __ATOMIC_SEQ_CST);
    free(ptr);
}

static void install(void)
{
    memset(&counter, 0, sizeof counter);
    chring_allocator_t a = {counting_alloc, counting_free, &counter};
    cr_assert_eq(chring_set_allocator(&a), 0, "install the counting allocator");
}

static void arm(long k)
{
    __atomic_store_n(&counter.calls, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&counter.fail_at, k, __ATOMIC_SEQ_CST);
}

static void disarm(void)
{
    __atomic_store_n(&counter.fail_at, 0, __ATOMIC_SEQ_CST);
}

static void uninstall_and_check_balance(void)
{
    long allocs = __atomic_load_n(&counter.allocs, __ATOMIC_SEQ_CST);
    long frees = __atomic_load_n(&counter.frees, __ATOMIC_SEQ_CST);
    cr_assert_gt(allocs, 0, "the library used the installed allocator");
    cr_assert_eq(allocs, frees, "%ld allocations, %ld frees: a leak", allocs, frees);
    cr_assert_eq(chring_set_allocator(NULL), 0, "restore malloc/free");
}

/* Membership and placement before an operation, to compare after each failure. */
struct state {
    uint64_t version;
    size_t members;
    size_t points;
    char **owners;
    char names[16][32];
    uint32_t weights[16];
};

#define STATE_KEYS 1000

static void state_take(chring_t *r, struct state *st)
{
    const chring_snap_t *s = chring_snap_enter(r);
    st->version = chring_snap_version(s);
    st->members = chring_snap_len(s);
    st->points = chring_snap_points(s);
    cr_assert_leq(st->members, 16u, "fixture too large");
    for (size_t i = 0; i < st->members; i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        snprintf(st->names[i], sizeof st->names[i], "%s", chring_member_name(m));
        st->weights[i] = chring_snap_weight(s, m);
    }
    chring_snap_exit(r, s);
    st->owners = owners_copy(r, STATE_KEYS);
}

static void state_assert_same(chring_t *r, const struct state *st, const char *what, long k)
{
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_snap_version(s), st->version, "%s failing at %ld published", what, k);
    cr_assert_eq(chring_snap_len(s), st->members, "%s failing at %ld: members", what, k);
    cr_assert_eq(chring_snap_points(s), st->points, "%s failing at %ld: points", what, k);
    cr_assert_eq(chring_snap_check(s), 0, "%s failing at %ld: snapshot damaged", what, k);
    for (size_t i = 0; i < st->members; i++) {
        const chring_member_t *m = chring_snap_member(s, i);
        cr_assert_str_eq(chring_member_name(m), st->names[i], "%s failing at %ld", what, k);
        cr_assert_eq(chring_snap_weight(s, m), st->weights[i], "%s failing at %ld", what, k);
        cr_assert_eq(chring_member_weight(m), st->weights[i], "%s failing at %ld: weight", what, k);
    }
    chring_snap_exit(r, s);
    char **now = owners_copy(r, STATE_KEYS);
    for (int i = 0; i < STATE_KEYS; i++)
        cr_assert(str_eq_null(now[i], st->owners[i]), "%s failing at %ld moved key-%d", what, k, i);
    owners_free(now, STATE_KEYS);
}

static void state_free(struct state *st)
{
    owners_free(st->owners, STATE_KEYS);
}

typedef int (*operation)(chring_t *r);

/* Runs op with the k-th allocation failing, k = 1, 2, ..., until it succeeds. */
static void fail_each_allocation(chring_t *r, operation op, const char *what)
{
    struct state st;
    state_take(r, &st);
    long k;
    int rc = -1;
    for (k = 1; k < 10000; k++) {
        arm(k);
        rc = op(r);
        disarm();
        if (rc == 0)
            break;
        cr_assert_eq(rc, -ENOMEM, "%s failing at allocation %ld returned %d", what, k, rc);
        state_assert_same(r, &st, what, k);
    }
    cr_assert_eq(rc, 0, "%s never succeeded", what);
    cr_assert_gt(k, 1, "%s made no allocation through the allocator", what);
    cr_assert_eq(ring_version(r), st.version + 1, "%s published once after success", what);
    state_free(&st);
}

static chring_t *fixture(void)
{
    install();
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 32;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, "alpha", 1, NULL);
    add_or_fail(r, "beta", 2, NULL);
    add_or_fail(r, "gamma", 1, NULL);
    return r;
}

static int op_add(chring_t *r)
{
    return chring_add(r, "delta", 2, NULL);
}

static int op_remove(chring_t *r)
{
    return chring_remove(r, "beta");
}

static int op_set_weight(chring_t *r)
{
    return chring_set_weight(r, "alpha", 3);
}

static int op_update(chring_t *r)
{
    chring_change_t batch[] = {{"delta", 1, NULL}, {"gamma", 0, NULL}, {"beta", 1, NULL}};
    return chring_update(r, batch, 3);
}

static int op_sync(chring_t *r)
{
    chring_change_t feed[] = {{"epsilon", 1, NULL}, {"alpha", 2, NULL}, {"zeta", 1, NULL}};
    return chring_sync(r, feed, 3);
}

static int op_remove_last(chring_t *r)
{
    chring_change_t feed[] = {{"alpha", 1, NULL}};
    int rc = chring_sync(r, feed, 1);
    if (rc)
        return rc;
    return 0;
}

Test(alloc, new_fails_cleanly_at_each_allocation)
{
    install();
    long k;
    chring_t *r = NULL;
    for (k = 1; k < 10000; k++) {
        arm(k);
        int rc = chring_new(&r, NULL);
        disarm();
        if (rc == 0)
            break;
        cr_assert_eq(rc, -ENOMEM, "chring_new failing at %ld returned %d", k, rc);
        cr_assert_eq(__atomic_load_n(&counter.allocs, __ATOMIC_SEQ_CST),
                     __atomic_load_n(&counter.frees, __ATOMIC_SEQ_CST),
                     "chring_new failing at %ld leaked", k);
    }
    cr_assert_not_null(r, "chring_new never succeeded");
    cr_assert_gt(k, 1, "chring_new allocated nothing through the allocator");
    cr_assert_eq(ring_version(r), 0u, "a new ring");
    add_or_fail(r, "a", 1, NULL);
    chring_free(&r);
    uninstall_and_check_balance();
}

Test(alloc, add_fails_cleanly_at_each_allocation)
{
    chring_t *r = fixture();
    fail_each_allocation(r, op_add, "add");
    chring_free(&r);
    uninstall_and_check_balance();
}

Test(alloc, add_to_empty_ring_fails_cleanly)
{
    install();
    chring_t *r = ring_create(NULL);
    fail_each_allocation(r, op_add, "first add");
    chring_free(&r);
    uninstall_and_check_balance();
}

Test(alloc, remove_fails_cleanly_at_each_allocation)
{
    chring_t *r = fixture();
    fail_each_allocation(r, op_remove, "remove");
    chring_free(&r);
    uninstall_and_check_balance();
}

Test(alloc, set_weight_fails_cleanly_at_each_allocation)
{
    chring_t *r = fixture();
    fail_each_allocation(r, op_set_weight, "set_weight");
    chring_free(&r);
    uninstall_and_check_balance();
}

Test(alloc, update_fails_cleanly_at_each_allocation)
{
    chring_t *r = fixture();
    fail_each_allocation(r, op_update, "update");
    chring_free(&r);
    uninstall_and_check_balance();
}

Test(alloc, sync_fails_cleanly_at_each_allocation)
{
    chring_t *r = fixture();
    fail_each_allocation(r, op_sync, "sync");
    chring_free(&r);
    uninstall_and_check_balance();
}

Test(alloc, sync_to_one_member_fails_cleanly)
{
    chring_t *r = fixture();
    fail_each_allocation(r, op_remove_last, "sync to one");
    chring_free(&r);
    uninstall_and_check_balance();
}

Test(alloc, failures_with_held_snapshot_and_lease_leak_nothing)
{
    chring_t *r = fixture();
    const chring_snap_t *held = chring_snap_hold(r);
    chring_lease_t lease;
    cr_assert_eq(chring_acquire(r, "key", 3, &lease), 0, "acquire");
    fail_each_allocation(r, op_remove, "remove with a held snapshot");
    fail_each_allocation(r, op_add, "add with a held snapshot");
    cr_assert_eq(chring_snap_check(held), 0, "the held snapshot survived");
    chring_release(r, &lease);
    chring_snap_put(r, held);
    chring_free(&r);
    uninstall_and_check_balance();
}

Test(alloc, many_publishes_balance)
{
    chring_t *r = fixture();
    char name[32];
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof name, "m%d", i);
        add_or_fail(r, name, 1 + (uint32_t)(i % 3), NULL);
        if (i % 2)
            cr_assert_eq(chring_remove(r, name), 0, "remove");
    }
    chring_free(&r);
    uninstall_and_check_balance();
}

/* The same for the profiles that rebuild the whole ring on each publish. */
static chring_t *profile_fixture(chring_profile_t profile)
{
    install();
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    cfg.vnodes = 8;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, "10.0.0.1:11211", 1, NULL);
    add_or_fail(r, "10.0.0.2:11211", 2, NULL);
    add_or_fail(r, "10.0.0.3:11211", 1, NULL);
    return r;
}

static int op_add_server(chring_t *r)
{
    return chring_add(r, "10.0.0.4:11211", 1, NULL);
}

static int op_remove_server(chring_t *r)
{
    return chring_remove(r, "10.0.0.2:11211");
}

static int op_weigh_server(chring_t *r)
{
    return chring_set_weight(r, "10.0.0.1:11211", 3);
}

static void profile_failures(chring_profile_t profile)
{
    chring_t *r = profile_fixture(profile);
    fail_each_allocation(r, op_add_server, chring_profile_name(profile));
    fail_each_allocation(r, op_remove_server, chring_profile_name(profile));
    fail_each_allocation(r, op_weigh_server, chring_profile_name(profile));
    chring_free(&r);
    uninstall_and_check_balance();
}

Test(alloc, fnv16_publishes_fail_cleanly)
{
    profile_failures(CHRING_PROFILE_FNV16);
}

Test(alloc, ketama_publishes_fail_cleanly)
{
    profile_failures(CHRING_PROFILE_KETAMA);
}

Test(alloc, nginx_publishes_fail_cleanly)
{
    profile_failures(CHRING_PROFILE_NGINX);
}

Test(alloc, murmur32_publishes_fail_cleanly)
{
    profile_failures(CHRING_PROFILE_MURMUR32);
}

/* ---- the spare snapshot block ------------------------------------------------------------ */

/* The tests below watch the spare-block cache at work, spares kept from one publish to the
 * next however slowly the test runs: the trimmer, which frees a spare no publish took for
 * 200 ms (docs/design.md §4, "Spare blocks"), is turned off for them (the library reads the
 * variable at its first need, in this test's own process). */
static void keep_spares(void)
{
    setenv("CHRING_SPARE_IDLE_MS", "0", 1);
}

static void watch_reset(void)
{
    __atomic_store_n(&counter.largest, 0, __ATOMIC_SEQ_CST);
}

static size_t watch_largest(void)
{
    return __atomic_load_n(&counter.largest, __ATOMIC_SEQ_CST);
}

/* Which tagged udata have been retired (the retire callback may run on liburcu's thread). */
static int tag_c, tag_d, tag_e, tag_f;

struct retired {
    int c, d, e, f;
};

static void note_retired(void *udata, void *ctx)
{
    struct retired *seen = ctx;
    int *flag = udata == &tag_c   ? &seen->c
                : udata == &tag_d ? &seen->d
                : udata == &tag_e ? &seen->e
                : udata == &tag_f ? &seen->f
                                  : NULL;
    if (flag)
        __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
}

/* Waits (at most 5 s, polling every millisecond) until *flag is set. */
static bool wait_for(const int *flag)
{
    struct timespec start, now, tick = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int polls = 0; polls < 5000; polls++) {
        if (__atomic_load_n(flag, __ATOMIC_SEQ_CST))
            return true;
        nanosleep(&tick, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 5)
            break;
    }
    return __atomic_load_n(flag, __ATOMIC_SEQ_CST) != 0;
}

/* The destruction of a replaced snapshot ends on the ring's reclaimer thread, whose first steps
 * retire its members: once a member's retire has been seen, the block may still be on its way to
 * the spare cache.  chring_quiesce returns once every snapshot r replaced is given up (its header
 * says so), and chring_free waits for every pending RCU callback of the library (members freed a
 * grace period after their last reference), so after both the block is in the cache. */
static void rcu_callbacks_done(chring_t *r)
{
    cr_assert_eq(chring_quiesce(r), 0, "chring_quiesce");
    chring_t *scratch = ring_create(NULL);
    chring_free(&scratch);
}

#define COMMON_MEMBERS 40

/* The membership "common-0" .. "common-39" plus one member named `extra` (its udata `tag`). */
static void sync_with(chring_t *r, const char *extra, int *tag)
{
    static char names[COMMON_MEMBERS][16];
    chring_change_t feed[COMMON_MEMBERS + 1];
    for (int i = 0; i < COMMON_MEMBERS; i++) {
        snprintf(names[i], sizeof names[i], "common-%d", i);
        feed[i] = (chring_change_t){names[i], 1, NULL};
    }
    feed[COMMON_MEMBERS] = (chring_change_t){extra, 1, tag};
    cr_assert_eq(chring_sync(r, feed, COMMON_MEMBERS + 1), 0, "sync with %s", extra);
}

Test(alloc, same_size_publish_after_a_grace_period_reuses_the_spare_block, .init = keep_spares)
{
    if (getenv("CHRING_CHUNK_MIN") != NULL) /* CI step 14-chunked.sh */
        cr_skip_test("a flat ring's block; a chunked ring allocates chunks too (docs/design.md §4.2)");
    install();
    struct retired seen = {0, 0, 0, 0};
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.retire = note_retired;
    cfg.retire_ctx = &seen;
    chring_t *r = ring_create(&cfg);

    /* 41 members x 160 points: the snapshot block (positions and owners of 6560 points, the
     * index) dwarfs the scratch space, the member objects and the ring. */
    watch_reset();
    sync_with(r, "c", &tag_c);
    size_t first = watch_largest();
    watch_reset();
    sync_with(r, "d", &tag_d);
    size_t second = watch_largest();
    size_t block = first < second ? first : second;
    cr_assert_geq(block, (size_t)(COMMON_MEMBERS + 1) * 160 * (sizeof(uint64_t) + 4),
                  "the largest allocation of a publish (%zu, %zu) is the snapshot block", first,
                  second);

    /* c is retired only once the snapshot that listed it is destroyed; its block then goes to
     * the spare cache and may or may not fit the next snapshot exactly (a member swapped in the
     * same batch takes a new slot).  One more swap makes every later snapshot the same shape. */
    cr_assert(wait_for(&seen.c), "c retired within 5 s");
    rcu_callbacks_done(r);
    sync_with(r, "e", &tag_e);
    cr_assert(wait_for(&seen.d), "d retired within 5 s");
    rcu_callbacks_done(r);

    /* The snapshot that listed d is in the cache and has the shape of the next one. */
    watch_reset();
    sync_with(r, "f", &tag_f);
    size_t third = watch_largest();
    cr_assert_lt(third, block,
                 "a same-size publish after a grace period allocated %zu bytes (the snapshot "
                 "block is %zu): the spare block was not reused",
                 third, block);
    cr_assert_eq(chring_len(r), (size_t)COMMON_MEMBERS + 1, "membership");
    chring_free(&r);
    cr_assert(seen.e && seen.f, "every member retired by chring_free");
    uninstall_and_check_balance();
}

/* ---- the default allocator frees --------------------------------------------------------- */

/* Bytes the process has allocated from malloc, in the heap and in mmap()ed chunks. */
static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static void create_use_free(int cycle)
{
    chring_t *r = ring_create(NULL);
    char name[32];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "node-%d-%d", cycle, i);
        add_or_fail(r, name, 1 + (uint32_t)(i % 2), NULL);
    }
    chring_lease_t lease;
    cr_assert_eq(chring_acquire(r, "key", 3, &lease), 0, "acquire");
    const chring_snap_t *held = chring_snap_hold(r);
    snprintf(name, sizeof name, "node-%d-3", cycle);
    cr_assert_eq(chring_remove(r, name), 0, "remove");
    chring_snap_put(r, held);
    chring_release(r, &lease);
    cr_assert_eq(chring_remove(r, "no-such-member"), -ENOENT, "remove a stranger");
    chring_free(&r);
}

Test(alloc, default_allocator_heap_does_not_grow_over_many_rings)
{
    /* The warm-up lets liburcu, the call_rcu thread and malloc's own arenas settle. */
    for (int cycle = 0; cycle < 20; cycle++)
        create_use_free(cycle);
    size_t before = heap_in_use();
    const int cycles = 200;
    for (int cycle = 0; cycle < cycles; cycle++)
        create_use_free(cycle);
    size_t after = heap_in_use();
    /* Each cycle allocates a ring, 8 members and 9 snapshots of up to 1920 points (tens of KiB):
     * keeping any of them would grow the heap by megabytes over 200 cycles; 64 KiB allows for
     * malloc's bookkeeping. */
    cr_assert_leq(after, before + 64 * 1024,
                  "the heap grew from %zu to %zu bytes over %d create/add/remove/free cycles",
                  before, after, cycles);
}

/* ---- the spare block does not pin a shrunken ring's memory ------------------------------- */

static void sync_numbered(chring_t *r, int count)
{
    static char names[200][16];
    static chring_change_t feed[200];
    for (int i = 0; i < count; i++) {
        snprintf(names[i], sizeof names[i], "node-%d", i);
        feed[i] = (chring_change_t){names[i], 1, NULL};
    }
    cr_assert_eq(chring_sync(r, feed, (size_t)count), 0, "sync to %d members", count);
}

Test(alloc, spare_block_more_than_twice_the_need_is_freed_not_reused, .init = keep_spares)
{
    /* 200 members x 160 points make a snapshot block of about 640 KiB (positions, owners, a
     * 2^16-bucket index).  After the ring shrinks to one member, that block waits in the spare
     * cache; the next publish needs a few KiB, so it must allocate a block of its own and free
     * the big one rather than keep 640 KiB behind a one-member ring (docs/design.md §9,
     * src/snap_block.c). */
    chring_t *r = ring_create(NULL);
    sync_numbered(r, 1);
    rcu_callbacks_done(r);
    size_t baseline = heap_in_use();

    sync_numbered(r, 200);
    sync_numbered(r, 1);
    rcu_callbacks_done(r); /* the 200-member snapshot is destroyed: its block is the spare */
    cr_assert_eq(chring_set_weight(r, "node-0", 2), 0, "a small publish");
    rcu_callbacks_done(r);
    size_t after = heap_in_use();
    cr_assert_lt(after, baseline + 256 * 1024,
                 "a one-member ring holds %zu bytes more than before the big ring",
                 after - baseline);
    chring_free(&r);
}

/* ---- spare blocks after a burst: aged out, or freed by chring_trim ----------------------- */

/* One publish: "extra" added on even turns, removed on odd ones. */
static void toggle_extra(chring_t *r, int *toggle, const char *what, int k)
{
    int rc = (*toggle)++ % 2 == 0 ? chring_add(r, "extra", 1, NULL) : chring_remove(r, "extra");
    cr_assert_eq(rc, 0, "%s %d", what, k);
}

/* n publishes that toggle "extra", each after the grace period of the one before (so its
 * replaced snapshot's block is back in the spare cache before the next). */
static void slow_publishes(chring_t *r, int *toggle, int n, const char *what)
{
    for (int k = 0; k < n; k++) {
        toggle_extra(r, toggle, what, k);
        rcu_callbacks_done(r);
    }
}

/* n publishes that toggle "extra", each with the snapshot it replaces held (so its block cannot
 * come back before the puts); held[] gets them. */
static void burst_held(chring_t *r, int *toggle, const chring_snap_t **held, int n)
{
    for (int k = 0; k < n; k++) {
        held[k] = chring_snap_hold(r);
        toggle_extra(r, toggle, "publish of the burst", k);
    }
}

/* Three snapshots held across three publishes come back at once when put: the spare cache then
 * holds three blocks, as after a burst whose grace periods ended late. */
static void fill_spares(chring_t *r, int *toggle)
{
    const chring_snap_t *held[3];
    burst_held(r, toggle, held, 3);
    rcu_callbacks_done(r); /* the published references of the three are dropped */
    for (int k = 0; k < 3; k++)
        chring_snap_put(r, held[k]);
}

Test(alloc, spare_blocks_age_out_and_chring_trim_frees_them, .init = keep_spares)
{
    if (getenv("CHRING_CHUNK_MIN") != NULL) /* CI step 14-chunked.sh */
        cr_skip_test("a flat ring's blocks; a chunked ring allocates chunks too (docs/design.md §4.2)");
    /* 400 members x 160 points: a snapshot block of about 1.2 MiB (positions, owners, index). */
    chring_t *r = ring_create(NULL);
    static char names[400][16];
    static chring_change_t feed[400];
    for (int i = 0; i < 400; i++) {
        snprintf(names[i], sizeof names[i], "member-%d", i);
        feed[i] = (chring_change_t){names[i], 1, NULL};
    }
    cr_assert_eq(chring_sync(r, feed, 400), 0, "sync to 400 members");
    rcu_callbacks_done(r);
    cr_assert_eq(chring_trim(r), 0, "trim");
    size_t live = heap_in_use();
    /* One publish spaced by a grace period: the replaced snapshot's block is the one spare. */
    int toggle = 0;
    slow_publishes(r, &toggle, 1, "add");
    size_t block = heap_in_use() - live;
    const chring_snap_t *s = chring_snap_hold(r);
    cr_assert_geq(block, chring_snap_points(s) * (sizeof(uint64_t) + 2),
                  "one spare block (%zu bytes) holds at least the points", block);
    chring_snap_put(r, s);

    fill_spares(r, &toggle);
    size_t full = heap_in_use();
    cr_assert_geq(full, live + block * 5 / 2,
                  "three snapshots put at once: %zu bytes above the ring alone, expected at "
                  "least two spare blocks of %zu kept for the next publishes",
                  full - live, block);
    cr_assert_eq(chring_trim(r), 0, "trim");
    size_t trimmed = heap_in_use();
    cr_assert_lt(trimmed, live + block / 2,
                 "after chring_trim the ring holds %zu bytes, %zu before the first spare (a "
                 "block: %zu)",
                 trimmed, live, block);
    cr_assert_eq(chring_trim(NULL), -EINVAL, "trim of NULL");

    /* Spares that no publish takes are freed after eight publishes: publishes spaced by a grace
     * period keep one block in turn, the replaced snapshot's. */
    fill_spares(r, &toggle);
    slow_publishes(r, &toggle, 12, "spaced publish");
    size_t aged = heap_in_use();
    cr_assert_lt(aged, live + block * 3 / 2,
                 "12 spaced publishes after a burst: %zu bytes above the ring alone, more than "
                 "one spare block of %zu",
                 aged - live, block);
    cr_assert_eq(chring_len(r), toggle % 2 == 0 ? (size_t)400 : (size_t)401, "membership");
    chring_free(&r);
}

/* The membership of the large rings below: "node-00000" .. "node-03299" (LARGE_MEMBERS, weight
 * 1), then one more name, LARGE_NAMES[LARGE_MEMBERS], for the publishes that add it. */
enum {
    LARGE_MEMBERS = 3300
};
static char LARGE_NAMES[LARGE_MEMBERS + 1][16];

static chring_change_t *large_feed(void)
{
    static chring_change_t feed[LARGE_MEMBERS];
    for (int i = 0; i <= LARGE_MEMBERS; i++)
        snprintf(LARGE_NAMES[i], sizeof LARGE_NAMES[i], "node-%05d", i);
    for (int i = 0; i < LARGE_MEMBERS; i++)
        feed[i] = (chring_change_t){LARGE_NAMES[i], 1, NULL};
    return feed;
}

/* ---- a large ring's first publish makes spare blocks ready ------------------------------- */

/* A ring of 3300 members x 160 points, built in one chring_sync with its grace periods over:
 * blocks of about 11 MB, past the size whose publishes prepare spares (docs/design.md §4, "Spare
 * blocks").  *before: the heap in use before it; *block: about a snapshot's block (12 bytes a
 * point and 8 of index).  Skips the test where mallinfo2 does not see the allocator. */
static chring_t *large_ring_built_keeping(size_t *before, size_t *block, unsigned keep);

static chring_t *large_ring_built(size_t *before, size_t *block)
{
    return large_ring_built_keeping(before, block, 0);
}

/* The same, with chring_set_spares_at_rest(keep) before the build (keep > 0). */
static chring_t *large_ring_built_keeping(size_t *before, size_t *block, unsigned keep)
{
    enum {
        MEMBERS = LARGE_MEMBERS
    };
    chring_change_t *feed = large_feed();
    *before = heap_in_use();
    if (*before == 0)
        cr_skip_test("mallinfo2 does not see this process's allocator (a sanitizer's)");
    chring_t *r = ring_create(NULL);
    if (keep > 0)
        cr_assert_eq(chring_set_spares_at_rest(r, keep), 0, "keep %u", keep);
    cr_assert_eq(chring_sync(r, feed, MEMBERS), 0, "the build");
    rcu_callbacks_done(r);
    const chring_snap_t *s = chring_snap_hold(r);
    /* A point's position (8 bytes), owner slot (2: fewer than 65,536 slots), line (8). */
    *block = chring_snap_points(s) * (sizeof(uint64_t) + 2 + 8);
    chring_snap_put(r, s);
    return r;
}

/* chring_trim leaves the ring holding its one snapshot (a block of about `block` bytes). */
static void assert_trimmed(chring_t *r, size_t before, size_t block)
{
    cr_assert_eq(chring_trim(r), 0, "trim");
    size_t trimmed = heap_in_use();
    cr_assert_lt(trimmed - before, block * 3 / 2,
                 "after chring_trim the ring holds %zu bytes, more than its one snapshot (a "
                 "block: about %zu)",
                 trimmed - before, block);
}

Test(alloc, large_ring_build_prepares_spares_for_a_burst_and_chring_trim_frees_them,
     .init = keep_spares, .timeout = 60)
{
    size_t before, block;
    chring_t *r = large_ring_built(&before, &block);
    size_t built = heap_in_use();
    cr_assert_geq(built - before, 3 * block,
                  "after the build the ring holds %zu bytes: its snapshot and spares, expected "
                  "at least 3 blocks of about %zu",
                  built - before, block);
    /* A burst whose replaced snapshots cannot come back (each one is held): its publishes take
     * the spares the build made ready, and allocate no block. */
    const chring_snap_t *held[3];
    int toggle = 0;
    for (int k = 0; k < 3; k++) {
        burst_held(r, &toggle, &held[k], 1);
        size_t now = heap_in_use();
        cr_assert_lt(now, built + block / 2,
                     "publish %d of the burst after the build allocated %zu bytes: no spare "
                     "was ready",
                     k, now - built);
    }
    for (int k = 0; k < 3; k++)
        chring_snap_put(r, held[k]);
    rcu_callbacks_done(r);
    assert_trimmed(r, before, block);
    chring_free(&r);
}

/* ---- a large ring keeps its spares through slow publishes -------------------------------- */

Test(alloc, large_ring_keeps_five_spares_through_slow_publishes_and_frees_the_surplus,
     .init = keep_spares, .timeout = 120)
{
    /* 3300 members x 160 points, blocks of about 11 MB: a large ring (docs/design.md §4, "Spare
     * blocks").  Slow publishes (each after a grace period) used to age every spare but the
     * last out, so a burst after a quiet while faulted in fresh blocks; the ring now keeps the
     * five its build made ready, and only the blocks a burst added beyond them age out. */
    enum {
        KEPT = 5
    };
    size_t before, block;
    chring_t *r = large_ring_built(&before, &block);
    size_t built = heap_in_use();
    cr_assert_geq(built - before, (1 + KEPT) * block,
                  "after the build the ring holds %zu bytes, expected its snapshot and %d spares "
                  "of about %zu",
                  built - before, KEPT, block);
    block = (built - before) / (1 + KEPT); /* the blocks' real size, from here on */

    int toggle = 0;
    slow_publishes(r, &toggle, 12, "slow publish");
    size_t rested = heap_in_use();
    cr_assert_geq(rested + block / 2, built,
                  "after 12 slow publishes the ring holds %zu bytes, %zu after the build: "
                  "spares of %zu were freed",
                  rested - before, built - before, block);

    /* A burst whose replaced snapshots cannot come back: five publishes take the five spares
     * and allocate no block. */
    const chring_snap_t *held[KEPT + 2];
    for (int k = 0; k < KEPT; k++) {
        burst_held(r, &toggle, &held[k], 1);
        size_t now = heap_in_use();
        cr_assert_lt(now, rested + block / 2,
                     "publish %d of a burst after slow publishes allocated %zu bytes: no spare "
                     "was ready",
                     k, now - rested);
    }
    /* Two more: no spare is left, they allocate; all seven come back at once.  The cache keeps
     * six, and the slow publishes after it free the one beyond the five. */
    burst_held(r, &toggle, &held[KEPT], 2);
    rcu_callbacks_done(r);
    for (int k = 0; k < KEPT + 2; k++)
        chring_snap_put(r, held[k]);
    slow_publishes(r, &toggle, 12, "slow publish after the burst");
    size_t aged = heap_in_use();
    cr_assert_lt(aged, built + block / 2,
                 "12 slow publishes after a burst that needed seven blocks: the ring holds %zu "
                 "bytes, %zu after the build (its snapshot and %d spares of %zu)",
                 aged - before, built - before, KEPT, block);
    assert_trimmed(r, before, block);
    chring_free(&r);
}

/* ---- a ring at rest gives its spares back ------------------------------------------------ */

/* Waits (at most 20 s, polling every 10 ms) until what amount() reads is below `limit`; returns
 * the last figure.  A hang detector: the ring's trimmer frees spares 200 ms after they were last
 * idle. */
static long long settles_below(long long (*amount)(void), long long limit)
{
    struct timespec tick = {0, 10000000};
    long long now = amount();
    for (int polls = 0; polls < 2000 && now >= limit; polls++) {
        nanosleep(&tick, NULL);
        now = amount();
    }
    return now;
}

static long long heap_now(void)
{
    return (long long)heap_in_use();
}

static size_t heap_settles_below(size_t limit)
{
    return (size_t)settles_below(heap_now, (long long)limit);
}

Test(alloc, a_large_ring_at_rest_gives_its_spares_back_with_no_call, .timeout = 120)
{
    /* The build makes five spares ready and a burst leaves its replaced snapshots in the cache;
     * once publishes stop, the ring's trimmer frees every spare no publish took for 200 ms
     * (docs/design.md §4, "Spare blocks"): the ring comes back to its one snapshot with no
     * chring_trim, and the next burst still finds what it needs (it allocates). */
    size_t before, block;
    chring_t *r = large_ring_built(&before, &block);
    size_t limit = before + block * 3 / 2;
    size_t rest = heap_settles_below(limit);
    cr_assert_lt(rest, limit,
                 "20 s after the build the ring holds %zu bytes: more than its one snapshot (a "
                 "block: about %zu)",
                 rest - before, block);
    int toggle = 0;
    for (int burst = 0; burst < 2; burst++) {
        for (int k = 0; k < 6; k++)
            toggle_extra(r, &toggle, "publish of the burst", k);
        rcu_callbacks_done(r);
        rest = heap_settles_below(limit);
        cr_assert_lt(rest, limit,
                     "20 s after burst %d the ring holds %zu bytes: more than its one snapshot "
                     "(a block: about %zu)",
                     burst, rest - before, block);
    }
    cr_assert_eq(chring_len(r), toggle % 2 == 0 ? (size_t)3300 : (size_t)3301, "membership");
    chring_free(&r);
    cr_assert_lt(heap_in_use(), before + block / 2, "chring_free gave the blocks back");
}

/* ---- a large block goes back to the kernel when it is freed -------------------------------- */

static long long resident_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kb;
}

static void map_blocks(void)
{
    unsetenv("CHRING_MAP_BLOCKS");
}

Test(alloc, with_the_default_allocator_a_ring_at_rest_is_resident_in_its_snapshot_alone,
     .init = map_blocks, .timeout = 120)
{
    /* With malloc, blocks under its mmap threshold (raised to the size of each mapped block it
     * frees, up to 32 MiB) come from its heap, and a block the trimmer frees stays resident: the
     * process kept one to four blocks more than the ring after bursts (docs/bench.md §11e).  The
     * library maps such blocks itself and unmaps them when it frees them. */
    enum {
        MEMBERS = LARGE_MEMBERS
    };
    chring_change_t *feed = large_feed();
    chring_t *r = ring_create(NULL);
    cr_assert_eq(chring_sync(r, feed, MEMBERS), 0, "the build");
    const chring_snap_t *s = chring_snap_hold(r);
    long long block_kb = (long long)(chring_snap_points(s) * (sizeof(uint64_t) + 2 + 8) / 1024);
    chring_snap_put(r, s);
    rcu_callbacks_done(r);
    long long built = resident_kb();
    cr_assert_gt(built, 0, "VmRSS readable");
    /* The build's spares go 200 ms after it; then the ring and the process's own. */
    long long rest = settles_below(resident_kb, built - block_kb);
    long long limit = rest + block_kb / 2;
    for (int burst = 0; burst < 3; burst++) {
        for (int k = 0; k < 20; k++) {
            int rc = k % 2 == 0 ? chring_add(r, LARGE_NAMES[MEMBERS], 1, NULL)
                                : chring_remove(r, LARGE_NAMES[MEMBERS]);
            cr_assert_eq(rc, 0, "publish %d of burst %d", k, burst);
        }
        rcu_callbacks_done(r);
        long long now = settles_below(resident_kb, limit);
        cr_assert_lt(now, limit,
                     "20 s after burst %d the process is resident in %lld kB, %lld more than at "
                     "rest after the build (a block: about %lld kB)",
                     burst, now, now - rest, block_kb);
    }
    chring_free(&r);
}

Test(alloc, a_child_after_fork_trims_the_spares_with_its_own_trimmer, .timeout = 120)
{
    /* The parent's trimmer does not exist in a child after fork(): the child's first publish
     * starts one of its own, which gives back every spare it holds (those it inherited and the
     * block its publish replaced), and the child's chring_free does not wait for the parent's
     * (docs/design.md §4, "At rest"). */
    size_t before, block;
    chring_t *r = large_ring_built(&before, &block);
    size_t built = heap_in_use();
    cr_assert_geq(built - before, 3 * block, "the build made spares ready");
    fflush(NULL);
    pid_t child = fork();
    cr_assert_geq(child, 0, "fork");
    if (child == 0) {
        int toggle = 0;
        toggle_extra(r, &toggle, "the child's publish", 0);
        rcu_callbacks_done(r);
        size_t rest = heap_settles_below(before + block * 3 / 2);
        int code = rest < before + block * 3 / 2 ? 0 : 1;
        chring_free(&r);
        _exit(code);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child, "waitpid");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the child still held its spares 20 s after its publish (status %d)", status);
    size_t rest = heap_settles_below(before + block * 3 / 2);
    cr_assert_lt(rest, before + block * 3 / 2, "the parent gave its spares back too");
    chring_free(&r);
}

Test(alloc, the_first_publish_after_a_quiet_while_allocates_its_own_block_only, .timeout = 120)
{
    /* The trimmer freed the five spares the build made ready; the next publish (a member more
     * than the build: a block a little larger) allocates its own block and does not make five
     * more ready, which cost it 100-200 ms of page faults here (docs/design.md §4, "At rest"). */
    size_t before, block;
    chring_t *r = large_ring_built(&before, &block);
    size_t rest = heap_settles_below(before + block * 3 / 2);
    cr_assert_lt(rest, before + block * 3 / 2, "the build's spares were given back");
    int toggle = 0;
    toggle_extra(r, &toggle, "the publish after a quiet while", 0);
    size_t after = heap_in_use();
    cr_assert_lt(after, rest + 2 * block,
                 "the publish after a quiet while made the ring hold %zu bytes more: its new "
                 "block and the one it replaced are about %zu",
                 after - rest, 2 * block);
    chring_free(&r);
}

/* ---- what a member costs (docs/design.md §4, "What a member costs") ------------------------- */

/* Bytes live through the allocator: each block carries its size in a header. */
static long long sized_live;

static void *sized_alloc(size_t size, void *ctx)
{
    (void)ctx;
    size_t *p = malloc(size + 16);
    if (p == NULL)
        return NULL;
    *p = size;
    __atomic_add_fetch(&sized_live, (long long)size, __ATOMIC_SEQ_CST);
    return (char *)p + 16;
}

static void sized_free(void *ptr, void *ctx)
{
    (void)ctx;
    if (ptr == NULL)
        return;
    size_t *p = (size_t *)(void *)((char *)ptr - 16);
    __atomic_sub_fetch(&sized_live, (long long)*p, __ATOMIC_SEQ_CST);
    free(p);
}

/* Live bytes of a ring of n members of one point each, named "m" and 7 digits (8 bytes). */
static long long ring_of_members_bytes(size_t n)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 1;
    chring_t *r = ring_create(&cfg);
    char(*names)[16] = calloc(n, sizeof *names);
    chring_change_t *feed = calloc(n, sizeof *feed);
    cr_assert(names != NULL && feed != NULL);
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "m%07zu", i);
        feed[i] = (chring_change_t){names[i], 1, NULL};
    }
    long long before = __atomic_load_n(&sized_live, __ATOMIC_SEQ_CST);
    cr_assert_eq(chring_update(r, feed, n), 0, "build of %zu members", n);
    /* (the empty snapshot it replaced, a header of some 300 bytes, may still wait for its
     * grace period: a tenth of a byte a member) */
    long long bytes = __atomic_load_n(&sized_live, __ATOMIC_SEQ_CST) - before;
    chring_free(&r);
    free(feed);
    free(names);
    return bytes;
}

/* A member is its own cache line (the words every acquire writes), 50 bytes every member needs
 * and its name (114 + 9 bytes here), in a 128-byte slot of a chunk of 64 (8 KB and a header,
 * so about 4 bytes a member more).  With the snapshot's share of one point (positions, owners, the
 * index and the member and slot tables: under 70 bytes), what 2000 more members add is at most
 * 200 bytes each (186.5 measured).  A member of 240 bytes plus its name, aligned to 128, added
 * about 440; one of 116 plus its name in an allocation of its own, aligned to 64, about 250. */
Test(alloc, a_member_costs_its_hot_line_its_fields_and_its_name)
{
    if (getenv("CHRING_CHUNK_MIN") != NULL) /* CI step 14-chunked.sh */
        cr_skip_test("counts a flat ring's bytes; a chunked ring's chunks add theirs (docs/design.md §4.2)");
    chring_allocator_t a = {sized_alloc, sized_free, NULL};
    cr_assert_eq(chring_set_allocator(&a), 0);
    long long small = ring_of_members_bytes(2000), large = ring_of_members_bytes(4000);
    cr_assert_eq(chring_set_allocator(NULL), 0);
    cr_assert_eq(__atomic_load_n(&sized_live, __ATOMIC_SEQ_CST), 0, "every byte given back");
    double per_member = (double)(large - small) / 2000.0;
    cr_assert_gt(per_member, 114.0 + 9.0, "a member's object is counted (%.1f bytes)", per_member);
    cr_assert_leq(per_member, 200.0, "%.1f bytes a member (one point each)", per_member);
}

/* A ramp and a report's statistics live in a block of their own, allocated the first time a
 * member needs it: out of memory there, chring_set_ramp and chring_report_load return -ENOMEM
 * and change nothing; the next call succeeds. */
Test(alloc, ramp_and_report_fail_cleanly_without_their_cold_block)
{
    install();
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.report_ttl_ms = 60000;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, "alpha", 1, NULL);
    add_or_fail(r, "beta", 1, NULL);
    const chring_snap_t *s = chring_snap_hold(r);
    const chring_member_t *alpha = chring_snap_find(s, "alpha");
    const chring_member_t *beta = chring_snap_find(s, "beta");
    cr_assert(alpha != NULL && beta != NULL);

    arm(1);
    int rc = chring_set_ramp(r, "alpha", 0.25, 0.25, 0);
    disarm();
    cr_assert_eq(rc, -ENOMEM, "set_ramp with its allocation failing: %d", rc);
    cr_assert_eq(chring_member_scale(alpha), 1.0, "no ramp was set");
    cr_assert_eq(chring_set_ramp(r, "alpha", 0.25, 0.25, 0), 0);
    cr_assert_eq(chring_member_scale(alpha), 0.25, "the ramp holds at 0.25");

    arm(1);
    rc = chring_report_load(r, beta, 7);
    disarm();
    cr_assert_eq(rc, -ENOMEM, "report_load with its allocation failing: %d", rc);
    chring_member_stats_t st;
    chring_member_stats(beta, &st);
    cr_assert_eq(st.report_live, 0, "no report was recorded");
    cr_assert_eq(st.counted, 0);
    cr_assert_eq(chring_report_load(r, beta, 7), 0);
    chring_member_stats(beta, &st);
    cr_assert_eq(st.report_live, 1);
    cr_assert_eq(st.reported, 7);
    cr_assert_eq(st.counted, 7, "the report counts: %llu", (unsigned long long)st.counted);

    chring_snap_put(r, s);
    chring_free(&r);
    uninstall_and_check_balance();
}

static int op_add_slow_start(chring_t *r)
{
    return chring_add(r, "delta", 2, NULL);
}

/* A member that joins with slow start needs its cold block for the ramp: an add fails cleanly
 * at that allocation as at every other. */
Test(alloc, add_with_slow_start_fails_cleanly_at_each_allocation)
{
    install();
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 32;
    cfg.slow_start_ms = 60000;
    chring_t *r = ring_create(&cfg);
    add_or_fail(r, "alpha", 1, NULL);
    add_or_fail(r, "beta", 2, NULL);
    fail_each_allocation(r, op_add_slow_start, "add with slow start");
    const chring_snap_t *s = chring_snap_hold(r);
    double scale = chring_member_scale(chring_snap_find(s, "delta"));
    cr_assert(scale < 1.0, "delta ramps: scale %f", scale);
    chring_snap_put(r, s);
    chring_free(&r);
    uninstall_and_check_balance();
}

/* Member chunks go back when their last member does: a ring of 4000 members (4 chunks of 16
 * slots, then 62 of 64) synced down to 2 keeps one chunk once the replaced snapshot's grace
 * period has ended (waited for by polling, at most 20 s: no timing is asserted).  A chunk is
 * the one allocation of a 128-byte header and 16 or 64 x 128 bytes, and its alignment slack
 * (member.c), counted here by size. */
static long sized_chunks;

static bool is_chunk(size_t size)
{
    return (size >= 128 + 64 * 128 && size < 128 + 64 * 128 + 256) ||
           (size >= 128 + 16 * 128 && size < 128 + 16 * 128 + 256);
}

static void *chunk_counting_alloc(size_t size, void *ctx)
{
    void *p = sized_alloc(size, ctx);
    if (p != NULL && is_chunk(size))
        __atomic_add_fetch(&sized_chunks, 1, __ATOMIC_SEQ_CST);
    return p;
}

static void chunk_counting_free(void *ptr, void *ctx)
{
    if (ptr != NULL && is_chunk(*(size_t *)(void *)((char *)ptr - 16)))
        __atomic_sub_fetch(&sized_chunks, 1, __ATOMIC_SEQ_CST);
    sized_free(ptr, ctx);
}

Test(alloc, a_ring_that_shrinks_gives_its_member_chunks_back, .timeout = 60)
{
    chring_allocator_t a = {chunk_counting_alloc, chunk_counting_free, NULL};
    cr_assert_eq(chring_set_allocator(&a), 0);
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = 1;
    chring_t *r = ring_create(&cfg);
    enum {
        N = 4000
    };
    static char names[N][16];
    static chring_change_t feed[N];
    for (size_t i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "m%07zu", i);
        feed[i] = (chring_change_t){names[i], 1, NULL};
    }
    cr_assert_eq(chring_update(r, feed, N), 0);
    long full = __atomic_load_n(&sized_chunks, __ATOMIC_SEQ_CST);
    cr_assert_eq(full, 4 + (N - 64 + 63) / 64, "4000 members in %ld chunks", full);
    cr_assert_eq(chring_sync(r, feed, 2), 0, "down to two members");
    long now = full;
    for (int i = 0; i < 2000 && now > 1; i++) {
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
        now = __atomic_load_n(&sized_chunks, __ATOMIC_SEQ_CST);
    }
    cr_assert_eq(now, 1, "two members keep %ld chunks (4000 had %ld)", now, full);
    chring_free(&r);
    cr_assert_eq(__atomic_load_n(&sized_chunks, __ATOMIC_SEQ_CST), 0, "no chunk left");
    cr_assert_eq(__atomic_load_n(&sized_live, __ATOMIC_SEQ_CST), 0, "every byte given back");
    cr_assert_eq(chring_set_allocator(NULL), 0);
}

/* ---- spares kept at rest (chring_set_spares_at_rest) ------------------------------------- */

/* Sleeps `ms` milliseconds: more than the trimmer's 200 ms, so that a trimmer that would free
 * one spare more has had its turn. */
static void pause_ms(long ms)
{
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0)
        continue;
}

/* The ring holds its snapshot and `kept` spares once the trimmer is done: the heap in use goes
 * below that many blocks and a half, and stays above that many less a half, also after two
 * more trimmer periods. */
static void assert_kept_at_rest(size_t before, size_t block, unsigned kept, const char *what)
{
    size_t limit = before + block * (2 * kept + 3) / 2;
    size_t rest = heap_settles_below(limit);
    cr_assert_lt(rest, limit,
                 "%s: 20 s later the ring holds %zu bytes, more than its snapshot and %u spares "
                 "(a block: about %zu)",
                 what, rest - before, kept, block);
    pause_ms(600);
    rest = heap_in_use();
    cr_assert_geq(rest, before + block * (2 * kept + 1) / 2,
                  "%s: at rest the ring holds %zu bytes, fewer than its snapshot and %u spares "
                  "(a block: about %zu)",
                  what, rest - before, kept, block);
    cr_assert_lt(rest, limit, "%s: at rest the ring holds %zu bytes", what, rest - before);
}

Test(alloc, chring_set_spares_at_rest_validates_its_input)
{
    chring_t *r = ring_create(NULL);
    cr_assert_eq(chring_set_spares_at_rest(NULL, 1), -EINVAL, "NULL ring");
    cr_assert_eq(chring_set_spares_at_rest(r, 7), -EINVAL, "7: more than a ring can hold");
    cr_assert_eq(chring_set_spares_at_rest(r, UINT32_MAX), -EINVAL, "UINT32_MAX");
    cr_assert_eq(chring_set_spares_at_rest(r, 6), 0, "6");
    cr_assert_eq(chring_set_spares_at_rest(r, 0), 0, "0");
    chring_free(&r);
}

Test(alloc, a_ring_at_rest_keeps_the_spares_it_was_asked_to_and_zero_frees_them, .timeout = 120)
{
    /* Two spares kept: after three replaced snapshots come back at once the trimmer frees all
     * but the two that came last and then leaves them (docs/design.md §4, "At rest").  Asked
     * for none afterwards, the ring gives them back with no further publish. */
    size_t before, block;
    chring_t *r = large_ring_built(&before, &block);
    cr_assert_eq(chring_set_spares_at_rest(r, 2), 0, "keep two");
    int toggle = 0;
    fill_spares(r, &toggle);
    assert_kept_at_rest(before, block, 2, "two kept");
    cr_assert_eq(chring_set_spares_at_rest(r, 0), 0, "keep none");
    assert_kept_at_rest(before, block, 0, "none kept after two");
    chring_free(&r);
    cr_assert_lt(heap_in_use(), before + block / 2, "chring_free gave the blocks back");
}

Test(alloc, a_spare_kept_at_rest_serves_the_next_publish_and_chring_trim_frees_it, .timeout = 120)
{
    /* One spare kept: the publish after a quiet while takes it and allocates no block; its
     * replaced snapshot is the spare kept next; chring_trim frees it at once. */
    size_t before, block;
    chring_t *r = large_ring_built(&before, &block);
    cr_assert_eq(chring_set_spares_at_rest(r, 1), 0, "keep one");
    int toggle = 0;
    fill_spares(r, &toggle);
    assert_kept_at_rest(before, block, 1, "one kept");
    size_t rest = heap_in_use();
    toggle_extra(r, &toggle, "the publish after a quiet while", 0);
    size_t after = heap_in_use();
    cr_assert_lt(after, rest + block / 2,
                 "the publish after a quiet while allocated %zu bytes: the spare kept at rest "
                 "was not taken (a block: about %zu)",
                 after - rest, block);
    rcu_callbacks_done(r);
    assert_kept_at_rest(before, block, 1, "one kept after the publish");
    assert_trimmed(r, before, block);
    chring_free(&r);
}

Test(alloc, a_spare_kept_at_rest_from_the_build_is_one_of_the_ring_s_size, .timeout = 120)
{
    /* Asked before the build: the empty snapshot's block (a few hundred bytes) comes back after
     * the build's grace period, later than the spares the build made ready; the spare kept is
     * one of those, the size the next publish needs, not the newest block (docs/design.md §4,
     * "Spares kept at rest"). */
    size_t before, block;
    chring_t *r = large_ring_built_keeping(&before, &block, 1);
    assert_kept_at_rest(before, block, 1, "one kept after the build");
    size_t rest = heap_in_use();
    int toggle = 0;
    toggle_extra(r, &toggle, "the first publish after the build", 0);
    size_t after = heap_in_use();
    cr_assert_lt(after, rest + block / 2,
                 "the first publish after the build allocated %zu bytes: no spare of its size "
                 "was kept (a block: about %zu)",
                 after - rest, block);
    chring_free(&r);
}

/* ---- the spares a build makes ready age from the build's end ------------------------------ */

/* A build that takes longer than the trimmer's idle time: an allocator that counts live bytes
 * (sized_alloc) and sleeps once, STALL_MS, in the first allocation under 8 MB that follows one
 * of 8 MB or more: the build's scratch, allocated right after the snapshot's block.  The
 * publish that makes the spares ready then ends well after its block was allocated. */
#define STALL_BIG ((size_t)8 << 20)
#define STALL_MS 1000
#define STALL_IDLE_MS "300"

static int stall_state; /* 0: no big allocation yet; 1: the next small one sleeps; 2: done */

static void *stalling_alloc(size_t size, void *ctx)
{
    int state = __atomic_load_n(&stall_state, __ATOMIC_SEQ_CST);
    if (state == 0 && size >= STALL_BIG)
        __atomic_store_n(&stall_state, 1, __ATOMIC_SEQ_CST);
    else if (state == 1 && size < STALL_BIG)
        if (__atomic_exchange_n(&stall_state, 2, __ATOMIC_SEQ_CST) == 1)
            pause_ms(STALL_MS);
    return sized_alloc(size, ctx);
}

/* The trimmer frees a spare 300 ms after it was stashed, less than the build's stall. */
static void idle_shorter_than_the_build(void)
{
    setenv("CHRING_SPARE_IDLE_MS", STALL_IDLE_MS, 1);
}

static long long sized_now(void)
{
    return __atomic_load_n(&sized_live, __ATOMIC_SEQ_CST);
}

Test(alloc, the_spares_a_build_makes_ready_are_there_when_it_returns_and_go_later,
     .init = idle_shorter_than_the_build, .timeout = 120)
{
    /* The spares a large ring's build makes ready are for a burst that follows the build
     * (docs/design.md §4, "Spare blocks"): they age from the end of the publish that made them,
     * so a build that takes longer than the trimmer's idle time still returns with them, and
     * the trimmer frees them once they have been idle after it. */
    enum {
        MEMBERS = LARGE_MEMBERS
    };
    chring_change_t *feed = large_feed();
    chring_allocator_t a = {stalling_alloc, sized_free, NULL};
    cr_assert_eq(chring_set_allocator(&a), 0);
    long long before = __atomic_load_n(&sized_live, __ATOMIC_SEQ_CST);
    chring_t *r = ring_create(NULL);
    cr_assert_eq(chring_sync(r, feed, MEMBERS), 0, "the build");
    long long built = __atomic_load_n(&sized_live, __ATOMIC_SEQ_CST) - before;
    cr_assert_eq(__atomic_load_n(&stall_state, __ATOMIC_SEQ_CST), 2, "the build was stalled");
    const chring_snap_t *s = chring_snap_hold(r);
    long long block = (long long)chring_snap_points(s) * (8 + 4 + 8);
    chring_snap_put(r, s);
    cr_assert_geq(built, 4 * block,
                  "the build returned holding %lld bytes: its snapshot and fewer than three "
                  "spares (a block: about %lld); the spares it made ready were freed while it "
                  "ran",
                  built, block);
    long long rest = settles_below(sized_now, before + block * 3 / 2) - before;
    cr_assert_lt(rest, block * 3 / 2,
                 "20 s after the build the ring holds %lld bytes: more than its one snapshot (a "
                 "block: about %lld)",
                 rest, block);
    chring_free(&r);
    cr_assert_eq(chring_set_allocator(NULL), 0);
    cr_assert_eq(__atomic_load_n(&sized_live, __ATOMIC_SEQ_CST), 0, "every byte given back");
}

/* ---- how many spares a build makes ready (chring_set_prefault) ---------------------------- */

Test(alloc, chring_set_prefault_validates_its_input)
{
    chring_t *r = ring_create(NULL);
    cr_assert_eq(chring_set_prefault(NULL, 0), -EINVAL, "NULL ring");
    cr_assert_eq(chring_set_prefault(r, 6), -EINVAL, "6: no slot left for a replaced block");
    cr_assert_eq(chring_set_prefault(r, UINT32_MAX), -EINVAL, "UINT32_MAX");
    cr_assert_eq(chring_set_prefault(r, 5), 0, "5");
    cr_assert_eq(chring_set_prefault(r, 0), 0, "0");
    chring_free(&r);
}

/* Bytes a build of 3300 x 160 (blocks of about 11 MB: a large ring) leaves live, the trimmer
 * off, with chring_set_prefault(n) before it (n < 0: not called); *block: about a snapshot's
 * block (12 bytes a point and 8 of index). */
static long long build_with_prefault(int n, long long *block)
{
    enum {
        MEMBERS = LARGE_MEMBERS
    };
    chring_change_t *feed = large_feed();
    chring_allocator_t a = {sized_alloc, sized_free, NULL};
    cr_assert_eq(chring_set_allocator(&a), 0);
    long long before = __atomic_load_n(&sized_live, __ATOMIC_SEQ_CST);
    chring_t *r = ring_create(NULL);
    if (n >= 0)
        cr_assert_eq(chring_set_prefault(r, (unsigned)n), 0, "prefault %d", n);
    cr_assert_eq(chring_sync(r, feed, MEMBERS), 0, "the build");
    rcu_callbacks_done(r);
    long long built = __atomic_load_n(&sized_live, __ATOMIC_SEQ_CST) - before;
    const chring_snap_t *s = chring_snap_hold(r);
    *block = (long long)chring_snap_points(s) * (8 + 4 + 8);
    chring_snap_put(r, s);
    chring_free(&r);
    cr_assert_eq(chring_set_allocator(NULL), 0);
    cr_assert_eq(__atomic_load_n(&sized_live, __ATOMIC_SEQ_CST), 0, "every byte given back");
    return built;
}

Test(alloc, a_build_makes_ready_the_spares_chring_set_prefault_asks_for, .init = keep_spares,
     .timeout = 60)
{
    /* A block is about 11 MB and 1/64 of room to grow: a ring holding its snapshot and k spares
     * holds between k + 1/2 and k + 3/2 blocks.  By default five (docs/design.md §4, "Spare
     * blocks"); chring_set_prefault(0), none: the build's peak and what it leaves are its
     * snapshot (the nginx module's choice); two, two. */
    static const struct {
        int n;
        long long spares;
    } cases[] = {{-1, 5}, {0, 0}, {2, 2}, {5, 5}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        long long block;
        long long built = build_with_prefault(cases[c].n, &block);
        long long k = cases[c].spares;
        cr_assert(built >= block * (2 * k + 1) / 2 && built < block * (2 * k + 3) / 2,
                  "chring_set_prefault(%d): the build left %lld bytes, not its snapshot and "
                  "%lld spares (a block: about %lld)",
                  cases[c].n, built, k, block);
    }
}
