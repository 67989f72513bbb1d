/* A program built the way a user builds one: only <chring.h> and `pkg-config --cflags --libs
 * chring` against an installed copy (tests/pkg/install-test.sh).  Creates a ring, adds members,
 * looks a key up, places and releases a lease. */
#include <chring.h>

#include <stdio.h>
#include <string.h>

static int fail(const char *what, int err)
{
    fprintf(stderr, "pkg_user: %s: %s\n", what, chring_strerror(err));
    return 1;
}

int main(void)
{
    static const char *names[] = {"cache-a", "cache-b", "cache-c"};
    chring_t *r = NULL;
    char owner[CHRING_NAME_MAX + 1];
    int err;

    if (chring_version_number() != CHRING_VERSION_NUMBER)
        return fail("header and library versions differ", 0);
    if ((err = chring_new(&r, NULL)) != 0)
        return fail("chring_new", err);
    for (size_t i = 0; i < 3; i++)
        if ((err = chring_add(r, names[i], 1, NULL)) != 0)
            return fail("chring_add", err);
    if (chring_len(r) != 3)
        return fail("chring_len is not 3", 0);

    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_lookup(s, "user:42", 7);
    const char *name = m ? chring_member_name(m) : "(none)";
    int member = 0;
    for (size_t i = 0; i < 3; i++)
        member |= strcmp(name, names[i]) == 0;
    snprintf(owner, sizeof owner, "%s", name);
    chring_snap_exit(r, s);
    if (!member)
        return fail("lookup returned no member of the ring", 0);

    char again[CHRING_NAME_MAX + 1];
    if ((err = chring_lookup_name(r, "user:42", 7, again, sizeof again)) < 0)
        return fail("chring_lookup_name", err);
    if (strcmp(owner, again) != 0)
        return fail("chring_lookup_name disagrees with chring_snap_lookup", 0);

    chring_lease_t lease;
    if ((err = chring_acquire(r, "user:42", 7, &lease)) != 0)
        return fail("chring_acquire", err);
    if (chring_leases(r) != 1)
        return fail("one lease expected", 0);
    chring_release(r, &lease);
    chring_free(&r);
    printf("chring %s: user:42 -> %s\n", chring_version(), owner);
    return 0;
}
