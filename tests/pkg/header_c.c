/* The public header compiles alone as strict C11 (-std=c11 -Wall -Wextra -Wpedantic -Werror) and
 * its declarations link against the library. */
#include <chring.h>

#include <stdio.h>
#include <string.h>

/* Types and macros a user names directly. */
static chring_config_t config;
static chring_lease_t lease;
static const chring_change_t changes[2] = {{"a", 1, NULL}, {"b", 2, NULL}};

int main(void)
{
    const chring_snap_t *s;
    chring_t *r = NULL;
    chring_stats_t stats;

    chring_config_default(&config);
    if (chring_version_number() != CHRING_VERSION_NUMBER || strlen(chring_version()) < 5)
        return 1;
    if (config.vnodes != CHRING_DEFAULT_VNODES || CHRING_NAME_MAX != 255)
        return 1;
    if (chring_new(&r, &config) != 0)
        return 1;
    if (chring_update(r, changes, 2) != 0)
        return 1;
    s = chring_snap_enter(r);
    if (chring_snap_lookup(s, "key", 3) == NULL)
        return 1;
    chring_snap_exit(r, s);
    if (chring_acquire(r, "key", 3, &lease) != 0)
        return 1;
    chring_release(r, &lease);
    chring_stats(r, &stats);
    chring_free(&r);
    printf("%s %s\n", chring_version(), chring_strerror(0));
    return r == NULL ? 0 : 1;
}
