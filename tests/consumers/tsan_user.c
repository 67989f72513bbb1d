/* A threaded user program for the ThreadSanitizer recipe (docs/install.md): two readers look
 * keys up and take leases while the main thread adds and removes members, and config.retire
 * counts the members retired (an atomic counter: retire runs on liburcu's call_rcu thread, a
 * releasing reader or the writer).  Built with -DPLANT_RETIRE_RACE the counter is a plain long
 * that the main thread also reads while it publishes: a race in the user's own retire callback,
 * which TSan must report even though liburcu's call_rcu thread runs it (the suppressions name
 * nothing that is on that thread's stack).  Built with
 * -DPLANT_RACE it also runs two threads of its own that increment a plain shared counter, with
 * nothing between them: TSan must report that (tests/consumers/tsan-user.sh), which shows the
 * run can fail.  (The racers call nothing of chring: the library's own atomics order the
 * readers' steps, and an increment in a reader could be ordered by them and go unreported.) */
#define _POSIX_C_SOURCE 200809L
#include <chring.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
static chring_t *r;
#ifdef PLANT_RETIRE_RACE
static long retired;
#else
static _Atomic long retired;
#endif

static void count_retired(void *udata, void *ctx)
{
    (void)udata, (void)ctx;
    retired++;
}
#ifdef PLANT_RACE
static long planted;

static void *racer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100000; i++)
        planted++;
    return NULL;
}
#endif
static void *reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        const chring_snap_t *s = chring_snap_enter(r);
        const chring_member_t *m = chring_snap_lookup(s, "k", 1);
        if (m)
            (void)chring_member_name(m);
        chring_snap_exit(r, s);
        chring_lease_t l;
        if (chring_acquire(r, "k", 1, &l) == 0)
            chring_release(r, &l);
    }
    return NULL;
}
int main(void)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.retire = count_retired;
    chring_new(&r, &cfg);
    chring_add(r, "a", 1, NULL);
    long seen = 0;
    pthread_t t[2];
#ifdef PLANT_RACE
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, racer, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("planted %ld\n", planted);
#endif
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, reader, NULL);
    for (int i = 0; i < 200; i++) {
        char n[8];
        snprintf(n, sizeof n, "m%d", (i / 2) % 10); /* added, then removed */
        if (i % 2)
            chring_remove(r, n);
        else
            chring_add(r, n, 1, NULL);
        seen += retired; /* the main thread reads the counter while members retire */
        struct timespec pause = {0, 1000000}; /* the call_rcu thread retires meanwhile */
        nanosleep(&pause, NULL);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    chring_free(&r);
    printf("retired %ld (seen %ld)\n", (long)retired, seen);
    puts("done");
    return 0;
}
