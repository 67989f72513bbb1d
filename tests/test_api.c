/* The API's fixed points (docs/design.md §5): the configuration defaults, a NULL configuration
 * meaning the defaults, and the runtime version against the header's.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

Test(config, defaults_are_documented_values)
{
    chring_config_t cfg;
    memset(&cfg, 0xab, sizeof cfg);
    chring_config_default(&cfg);
    cr_assert_eq(cfg.profile, CHRING_PROFILE_HASH64, "profile");
    cr_assert_eq(cfg.vnodes, 160u, "vnodes");
    cr_assert_float_eq(cfg.balance, 1.25, 0.0, "balance");
    cr_assert(cfg.retire == NULL, "retire");
    cr_assert(cfg.hash == NULL, "hash");
    chring_config_default(NULL);
}

Test(config, default_config_equals_null_config)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    chring_t *a = ring_create(NULL);
    chring_t *b = ring_create(&cfg);
    /* The configuration is copied: changing it afterwards changes nothing. */
    cfg.vnodes = 3;
    cfg.profile = CHRING_PROFILE_FNV32;
    add_numbered(a, "n", 0, 5);
    add_numbered(b, "n", 0, 5);
    const chring_snap_t *sa = chring_snap_enter(a);
    const chring_snap_t *sb = chring_snap_enter(b);
    cr_assert_eq(chring_snap_points(sb), 800u, "5 x 160: the copy of the config is used");
    cr_assert_eq(chring_snap_profile(sb), CHRING_PROFILE_HASH64, "profile copied");
    cr_assert_eq(chring_snap_points(sa), chring_snap_points(sb), "same points");
    cr_assert_float_eq(chring_snap_moved(sa, sb), 0.0, 0.0, "same ring");
    chring_snap_exit(b, sb);
    chring_snap_exit(a, sa);
    chring_free(&a);
    chring_free(&b);
}

Test(version, runtime_version_matches_header)
{
    cr_assert_eq(chring_version_number(), (unsigned)CHRING_VERSION_NUMBER, "version number");
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", CHRING_VERSION_MAJOR, CHRING_VERSION_MINOR,
             CHRING_VERSION_PATCH);
    cr_assert_str_eq(chring_version(), expect, "version string");
}
