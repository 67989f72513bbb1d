/* A threaded user program for the ThreadSanitizer recipe (docs/install.md): two readers look
 * keys up and take leases while the main thread adds and removes members.  Built with
 * -DPLANT_RACE it also runs two threads of its own that increment a plain shared counter, with
 * nothing between them: TSan must report that (tests/consumers/tsan-user.sh), which shows the
 * run can fail.  (The racers call nothing of chring: the library's own atomics order the
 * readers' steps, and an increment in a reader could be ordered by them and go unreported.) */
#include <chring.h>
#include <pthread.h>
#include <stdio.h>
static chring_t *r;
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
    chring_new(&r, NULL);
    chring_add(r, "a", 1, NULL);
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
        snprintf(n, sizeof n, "m%d", i % 10);
        if (i % 2)
            chring_remove(r, n);
        else
            chring_add(r, n, 1, NULL);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    chring_free(&r);
    puts("done");
    return 0;
}
