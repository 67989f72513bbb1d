/* fork() (docs/design.md §4; include/chring.h, "fork()"): a ring created before fork() keeps
 * working in the parent and in the child with no call from the application.  Prefork workers
 * publish, lease, release and free their copy of a master ring and find every member retired
 * exactly once; replaced snapshots are reclaimed in a child (its memory stays bounded over
 * thousands of publishes); a fork while other threads publish, read and acquire leaves a working
 * child; and an application that runs liburcu-bp's fork hooks itself, after
 * chring_atfork_urcu(0), does not deadlock.
 *
 * Children report through their exit status (and a line on stderr); the parent waits for each
 * with a watchdog that kills it after CHILD_SECONDS, so a hang fails the test instead of
 * blocking it.  Each child also arms alarm() around its own work.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE /* usleep, kill */

#include "chring_test.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>
#include <urcu-bp.h>

#define CHILD_SECONDS 60
#define MEMBERS 50
#define OBJECTS 4096

/* One retire counter per udata object; objects[0..MEMBERS) belong to the master ring's members,
 * the rest are handed out for members added later.  A child has its own copy of the array. */
static int objects[OBJECTS];
static int next_object = MEMBERS;

static void count_retire(void *udata, void *ctx)
{
    (void)ctx;
    if (udata != NULL) /* members added without udata ("churn", "child-*") */
        __atomic_add_fetch((int *)udata, 1, __ATOMIC_SEQ_CST);
}

static int retired(int i)
{
    return __atomic_load_n(&objects[i], __ATOMIC_SEQ_CST);
}

static chring_t *master_ring(uint32_t vnodes)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.vnodes = vnodes;
    cfg.retire = count_retire;
    chring_t *r = ring_create(&cfg);
    char name[32];
    for (int i = 0; i < MEMBERS; i++) {
        snprintf(name, sizeof name, "backend-%d", i);
        add_or_fail(r, name, 1 + (uint32_t)(i % 3), &objects[i]);
    }
    return r;
}

/* A failed check in a child: a line on stderr and a non-zero exit status. */
#define CHILD_CHECK(cond, ...) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "child %d, line %d: ", (int)getpid(), __LINE__); \
            fprintf(stderr, __VA_ARGS__); \
            fputc('\n', stderr); \
            return 1; \
        } \
    } while (0)

/* Waits for a child for at most CHILD_SECONDS, then kills it.  Returns its exit status, 128 +
 * the signal that ended it, or -1 if the watchdog had to kill it (a hang). */
static int wait_child(pid_t pid)
{
    for (int tick = 0; tick < CHILD_SECONDS * 100; tick++) {
        int status;
        pid_t got = waitpid(pid, &status, WNOHANG);
        cr_assert_neq(got, -1, "waitpid");
        if (got == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(10 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void assert_child_ok(pid_t pid, const char *what)
{
    int status = wait_child(pid);
    cr_assert_neq(status, -1, "%s: the child hung (killed after %d s)", what, CHILD_SECONDS);
    cr_assert_eq(status, 0, "%s: the child failed (status %d%s; its stderr says why)", what, status,
                 status == 128 + SIGALRM ? ", its alarm: a hang" : "");
}

/* The work of a prefork worker, or of the parent afterwards: a few hundred publishes (members
 * removed and added back with fresh objects), leases (one held across its member's removal),
 * chring_free, then every object this process gave the ring retired exactly once here.  The
 * master ring's objects must not have been retired before (in this process). */
static int worker(chring_t *r, unsigned seed)
{
    int first_new = next_object;
    for (int i = 0; i < MEMBERS; i++)
        CHILD_CHECK(retired(i) == 0, "object %d retired before the work", i);

    /* A lease kept across its member's removal: the member is retired only after release. */
    chring_lease_t kept;
    CHILD_CHECK(chring_acquire(r, "sticky", 6, &kept) == 0, "acquire sticky");
    char kept_name[32];
    snprintf(kept_name, sizeof kept_name, "%s", chring_member_name(kept.member));
    int kept_object = (int)((int *)chring_member_udata(kept.member) - objects);
    CHILD_CHECK(chring_remove(r, kept_name) == 0, "remove %s", kept_name);

    chring_stats_t st;
    chring_stats(r, &st);
    uint64_t publishes = st.publishes;
    char name[32], key[32];
    int changed = 0;
    for (int i = 0; i < 150; i++) {
        int victim = (int)((seed + (unsigned)i * 7u) % MEMBERS);
        snprintf(name, sizeof name, "backend-%d", victim);
        if (strcmp(name, kept_name) == 0)
            continue;
        changed++;
        CHILD_CHECK(chring_remove(r, name) == 0, "remove %s", name);
        CHILD_CHECK(next_object < OBJECTS, "out of objects");
        CHILD_CHECK(chring_add(r, name, 1 + (uint32_t)(i % 3), &objects[next_object++]) == 0,
                    "add %s", name);
        chring_lease_t leases[3];
        for (int k = 0; k < 3; k++) {
            snprintf(key, sizeof key, "key-%u-%d-%d", seed, i, k);
            CHILD_CHECK(chring_acquire(r, key, strlen(key), &leases[k]) == 0, "acquire %s", key);
        }
        for (int k = 0; k < 3; k++)
            chring_release(r, &leases[k]);
    }
    CHILD_CHECK(chring_leases(r) == 1, "one lease outstanding (%llu)",
                (unsigned long long)chring_leases(r));
    CHILD_CHECK(retired(kept_object) == 0, "the leased member is not retired while leased");
    chring_release(r, &kept);

    chring_stats(r, &st);
    CHILD_CHECK(st.leases == 0, "no lease outstanding");
    CHILD_CHECK(st.publishes - publishes == 2u * (unsigned)changed, "%d removes and adds published",
                changed);

    alarm(CHILD_SECONDS / 2); /* chring_free waits for liburcu's call_rcu worker */
    chring_free(&r);
    alarm(0);
    for (int i = 0; i < next_object; i++)
        if (i < MEMBERS || i >= first_new)
            CHILD_CHECK(retired(i) == 1, "object %d retired %d times, not once", i, retired(i));
    return 0;
}

Test(fork, prefork_workers_publish_lease_free_and_retire_every_member, .timeout = 240)
{
    chring_t *r = master_ring(CHRING_DEFAULT_VNODES);
    pid_t pids[4];
    for (int w = 0; w < 4; w++) {
        fflush(NULL);
        pids[w] = fork();
        cr_assert_neq(pids[w], -1, "fork");
        if (pids[w] == 0)
            _exit(worker(r, 11u * (unsigned)w + 1u));
    }
    for (int w = 0; w < 4; w++)
        assert_child_ok(pids[w], "prefork worker");
    /* The parent's ring was not touched by its children: the same work here. */
    cr_assert_eq(chring_len(r), (size_t)MEMBERS);
    cr_assert_eq(worker(r, 5), 0, "the parent's own work (its stderr says why)");
}

/* Resident memory in bytes (/proc/self/statm, second field). */
static long resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return -1;
    long size = 0, resident = -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

#define HELD_PUBLISHES 200
#define PUBLISHES 2000

/* Memory in a child: first the growth over HELD_PUBLISHES publishes whose snapshots are all
 * held (as if nothing were reclaimed), then the peak growth over PUBLISHES publishes that hold
 * nothing.  Writes both to fd; stops early once the second exceeds the test's bound (an eighth
 * of what never reclaiming would cost), so a broken child does not eat the machine. */
static int memory_child(chring_t *r, int fd)
{
    alarm(CHILD_SECONDS / 2);
    static const chring_snap_t *held[HELD_PUBLISHES];
    long before = resident_bytes();
    CHILD_CHECK(before > 0, "statm");
    for (int i = 0; i < HELD_PUBLISHES; i++) {
        held[i] = chring_snap_hold(r);
        CHILD_CHECK(chring_set_weight(r, "backend-0", 1 + (uint32_t)(i % 2) * 2) == 0, "publish");
    }
    long held_growth = resident_bytes() - before;
    for (int i = 0; i < HELD_PUBLISHES; i++)
        chring_snap_put(r, held[i]);
    /* Never reclaiming PUBLISHES snapshots would cost this much. */
    long never = held_growth * (PUBLISHES / HELD_PUBLISHES);

    for (int i = 0; i < 50; i++) /* warm-up: the spare block, malloc's arenas */
        CHILD_CHECK(chring_set_weight(r, "backend-0", 1 + (uint32_t)(i % 2)) == 0, "publish");
    long base = resident_bytes(), peak = 0;
    for (int i = 0; i < PUBLISHES && peak < never / 8; i++) {
        CHILD_CHECK(chring_set_weight(r, "backend-0", 1 + (uint32_t)(i % 2)) == 0, "publish");
        if (i % 10 == 0) {
            /* A short pause now and then lets liburcu's call_rcu thread run on a busy machine:
             * the backlog it may fall behind by is not what this test measures. */
            usleep(1000);
            long growth = resident_bytes() - base;
            peak = growth > peak ? growth : peak;
        }
    }
    long growth = resident_bytes() - base;
    peak = growth > peak ? growth : peak;
    long report[2] = {held_growth, peak};
    CHILD_CHECK(write(fd, report, sizeof report) == (ssize_t)sizeof report, "write");
    chring_free(&r);
    alarm(0);
    return 0;
}

Test(fork, a_child_reclaims_replaced_snapshots, .timeout = 240)
{
    chring_t *r = master_ring(40);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1, "fork");
    if (pid == 0) {
        close(fds[0]);
        _exit(memory_child(r, fds[1]));
    }
    close(fds[1]);
    long report[2] = {0, 0};
    ssize_t got = read(fds[0], report, sizeof report);
    close(fds[0]);
    /* The child's end first (bounded), then its report, then how it ended. */
    int status = wait_child(pid);
    cr_assert_eq(got, (ssize_t)sizeof report, "the child reported its memory (status %d)", status);
    long held = report[0], peak = report[1];
    long never = held * (PUBLISHES / HELD_PUBLISHES);
    cr_log_info("RSS: +%ld bytes for %d held snapshots (never reclaiming %d: about %ld); peak "
                "growth over %d publishes: %ld bytes",
                held, HELD_PUBLISHES, PUBLISHES, never, PUBLISHES, peak);
    /* 200 held snapshots of 50 members x 40 vnodes x 2 weight on average: about 4000 points, tens
     * of bytes each, so tens of MB. */
    cr_assert_gt(held, 4L << 20, "holding %d snapshots grew RSS by %ld bytes only", HELD_PUBLISHES,
                 held);
    cr_assert_lt(peak, never / 8,
                 "RSS grew by up to %ld bytes over %d publishes in the child; never reclaiming "
                 "would cost about %ld",
                 peak, PUBLISHES, never);
    cr_assert_eq(status, 0, "memory child: failed or hung after its report (status %d)", status);
    chring_free(&r);
}

/* ---- A fork while other threads publish, read and acquire ---------------------------------- */

struct busy {
    chring_t *r;
    int stop;          /* set by the main thread */
    int pinned_ready;  /* the pinned lease is held */
    int pinned_object; /* the udata object of the pinned lease's member */
    int holding;       /* the reader may hold a snapshot (set before the hold, cleared after) */
    long iterations[4];
};

static bool stopped(struct busy *b)
{
    return __atomic_load_n(&b->stop, __ATOMIC_SEQ_CST) != 0;
}

/* Publishes: weights of the first members toggled, and a member without udata added and removed. */
static void *publisher(void *arg)
{
    struct busy *b = arg;
    char name[32];
    for (long i = 0; i < 100000000L && !stopped(b); i++) {
        snprintf(name, sizeof name, "backend-%ld", i % 10);
        chring_set_weight(b->r, name, 1 + (uint32_t)(i % 4));
        if (i % 2 == 0)
            chring_add(b->r, "churn", 1, NULL);
        else
            chring_remove(b->r, "churn");
        b->iterations[0] = i;
    }
    return NULL;
}

/* Reads, holds snapshots and takes leases. */
static void *reader(void *arg)
{
    struct busy *b = arg;
    char key[32];
    for (long i = 0; i < 1000000000L && !stopped(b); i++) {
        snprintf(key, sizeof key, "key-%ld", i % 1000);
        const chring_snap_t *s = chring_snap_enter(b->r);
        const chring_member_t *m = chring_snap_lookup(s, key, strlen(key));
        if (m != NULL)
            (void)chring_member_name(m);
        chring_snap_exit(b->r, s);
        chring_lease_t lease;
        if (chring_acquire(b->r, key, strlen(key), &lease) == 0)
            chring_release(b->r, &lease);
        if (i % 64 == 0) {
            /* A fork between the hold and the put leaves the child a snapshot nobody puts: the
             * members it lists stay referenced there (busy_child allows for it). */
            __atomic_store_n(&b->holding, 1, __ATOMIC_SEQ_CST);
            chring_snap_put(b->r, chring_snap_hold(b->r));
            __atomic_store_n(&b->holding, 0, __ATOMIC_SEQ_CST);
        }
        b->iterations[1] = i;
    }
    return NULL;
}

/* Holds one lease for the whole test: in a child, its member must stay unretired. */
static void *pinner(void *arg)
{
    struct busy *b = arg;
    chring_lease_t lease;
    if (chring_acquire(b->r, "pinned", 6, &lease) != 0)
        return NULL;
    b->pinned_object = (int)((int *)chring_member_udata(lease.member) - objects);
    __atomic_store_n(&b->pinned_ready, 1, __ATOMIC_SEQ_CST);
    while (!stopped(b))
        usleep(1000);
    chring_release(b->r, &lease);
    return NULL;
}

/* In the child of a busy parent: only this thread exists.  Publishes, leases, chring_free. */
static int busy_child(struct busy *b)
{
    alarm(CHILD_SECONDS / 2);
    chring_t *r = b->r;
    char name[32], key[32];
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "child-%d", i % 20);
        if (i < 20)
            CHILD_CHECK(chring_add(r, name, 1, NULL) == 0, "add %s", name);
        else
            CHILD_CHECK(chring_set_weight(r, name, 1 + (uint32_t)(i % 3)) == 0, "weight %s", name);
        chring_lease_t lease;
        snprintf(key, sizeof key, "child-key-%d", i);
        CHILD_CHECK(chring_acquire(r, key, strlen(key), &lease) == 0, "acquire");
        const chring_snap_t *s = chring_snap_hold(r);
        CHILD_CHECK(chring_snap_check(s) == 0, "snapshot valid");
        chring_snap_put(r, s);
        chring_release(r, &lease);
    }
    chring_free(&r);
    alarm(0);
    /* Leases other threads held at the fork stay counted: the pinned member is not retired; the
     * others (but the at most one lease each reader thread was holding) are, exactly once. */
    CHILD_CHECK(retired(b->pinned_object) == 0, "the member pinned by another thread retired");
    int count = 0;
    for (int i = 0; i < MEMBERS; i++) {
        CHILD_CHECK(retired(i) <= 1, "object %d retired %d times", i, retired(i));
        count += retired(i);
    }
    /* A snapshot the reader held at the fork is never put in the child (only the forking thread
     * exists there), so the members it lists are never retired: then any count is right. */
    CHILD_CHECK(count >= MEMBERS - 3 || __atomic_load_n(&b->holding, __ATOMIC_SEQ_CST),
                "only %d of %d members retired, and no snapshot was held at the fork", count,
                MEMBERS);
    return 0;
}

Test(fork, fork_while_other_threads_publish_read_and_acquire, .timeout = 240)
{
    struct busy b = {.r = master_ring(40)};
    pthread_t threads[3];
    void *(*bodies[3])(void *) = {pinner, publisher, reader};
    for (int t = 0; t < 3; t++) {
        cr_assert_eq(pthread_create(&threads[t], NULL, bodies[t], &b), 0);
        if (t == 0)
            for (int i = 0; i < 10000 && !__atomic_load_n(&b.pinned_ready, __ATOMIC_SEQ_CST); i++)
                usleep(1000);
    }
    cr_assert(__atomic_load_n(&b.pinned_ready, __ATOMIC_SEQ_CST), "the pinned lease is held");

    for (int round = 0; round < 6; round++) {
        usleep(20 * 1000); /* let the threads get busy again */
        fflush(NULL);
        pid_t pid = fork();
        cr_assert_neq(pid, -1, "fork");
        if (pid == 0)
            _exit(busy_child(&b));
        assert_child_ok(pid, "child of a busy parent");
    }

    __atomic_store_n(&b.stop, 1, __ATOMIC_SEQ_CST);
    for (int t = 0; t < 3; t++)
        pthread_join(threads[t], NULL);
    cr_assert_gt(b.iterations[0], 0, "the publisher ran");
    cr_assert_gt(b.iterations[1], 0, "the reader ran");
    cr_assert_eq(chring_leases(b.r), 0u);
    chring_remove(b.r, "churn");
    chring_free(&b.r);
    for (int i = 0; i < MEMBERS; i++)
        cr_assert_eq(retired(i), 1, "object %d retired %d times in the parent", i, retired(i));
}

/* ---- An application that calls liburcu-bp's fork hooks itself ----------------------------- */

static int hooks_child(chring_t *r)
{
    alarm(CHILD_SECONDS / 2);
    for (int i = 0; i < 300; i++) {
        CHILD_CHECK(chring_set_weight(r, "backend-1", 1 + (uint32_t)(i % 2)) == 0, "publish");
        chring_lease_t lease;
        CHILD_CHECK(chring_acquire(r, "k", 1, &lease) == 0, "acquire");
        chring_release(r, &lease);
    }
    CHILD_CHECK(chring_remove(r, "backend-2") == 0, "remove");
    chring_free(&r);
    alarm(0);
    for (int i = 0; i < MEMBERS; i++)
        CHILD_CHECK(retired(i) == 1, "object %d retired %d times", i, retired(i));
    return 0;
}

Test(fork, application_running_liburcu_fork_hooks_itself_after_atfork_urcu_0, .timeout = 60)
{
    cr_assert_eq(chring_atfork_urcu(0), 1, "the default is on");
    struct busy b = {.r = master_ring(40)};
    pthread_t thread;
    cr_assert_eq(pthread_create(&thread, NULL, publisher, &b), 0);
    for (int round = 0; round < 4; round++) {
        usleep(20 * 1000);
        fflush(NULL);
        call_rcu_before_fork();
        urcu_bp_before_fork();
        pid_t pid = fork();
        if (pid == 0) {
            urcu_bp_after_fork_child();
            call_rcu_after_fork_child();
            _exit(hooks_child(b.r));
        }
        urcu_bp_after_fork_parent();
        call_rcu_after_fork_parent();
        cr_assert_neq(pid, -1, "fork");
        assert_child_ok(pid, "child with the application's hooks");
    }
    __atomic_store_n(&b.stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(thread, NULL);
    cr_assert_eq(chring_atfork_urcu(1), 0, "the setting was off");
    chring_remove(b.r, "churn");
    chring_free(&b.r);
    for (int i = 0; i < MEMBERS; i++)
        cr_assert_eq(retired(i), 1, "object %d retired %d times in the parent", i, retired(i));
}
