/* chring_profile_info: the library's one table of per-profile facts agrees with what the library
 * does (docs/design.md §2).
 * SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>

#include <errno.h>
#include <string.h>

#include "chring.h"

Test(profile_info, every_fact_matches_the_library)
{
    for (int p = 0; p < CHRING_PROFILE_COUNT; p++) {
        chring_profile_info_t info;
        cr_assert_eq(chring_profile_info((chring_profile_t)p, &info), 0);
        cr_assert_str_eq(info.name, chring_profile_name((chring_profile_t)p));
        if (p == CHRING_PROFILE_CUSTOM) {
            cr_assert_eq(info.hash_bits, 0u);
            continue;
        }
        chring_config_t cfg;
        chring_config_default(&cfg);
        cfg.profile = (chring_profile_t)p;
        cfg.vnodes = 0;
        chring_t *r = NULL;
        int rc = chring_new(&r, &cfg);
        cr_assert_eq(rc == 0, !info.uses_vnodes, "%s: vnodes 0 is accepted iff it is ignored (%d)",
                     info.name, rc);
        chring_free(&r);
        cfg.vnodes = info.uses_vnodes ? info.default_vnodes : 0;
        cr_assert_eq(info.default_vnodes, info.uses_vnodes ? CHRING_DEFAULT_VNODES : 0u);
        cr_assert_eq(chring_new(&r, &cfg), 0);
        const chring_snap_t *s = chring_snap_enter(r);
        cr_assert_eq(chring_snap_hash_bits(s), info.hash_bits, "%s: width", info.name);
        chring_snap_exit(r, s);
        cr_assert_eq(chring_add(r, "web-1", 1, NULL) == -EINVAL, info.names_are_ids != 0,
                     "%s: a name that is not an id", info.name);
        cr_assert_eq(chring_add(r, "7", 1, NULL), 0);
        if (info.max_weight != 0) {
            cr_assert_eq(chring_set_weight(r, "7", info.max_weight), 0);
            cr_assert_neq(chring_set_weight(r, "7", info.max_weight + 1), 0, "%s: above %u",
                          info.name, info.max_weight);
        }
        cr_assert_eq(info.join_order != 0, p == CHRING_PROFILE_FNV16);
        cr_assert_eq(info.nearest != 0, p == CHRING_PROFILE_HAPROXY);
        cr_assert_eq(info.counts_need_ring != 0,
                     p == CHRING_PROFILE_KETAMA || p == CHRING_PROFILE_ENVOY);
        chring_free(&r);
    }
    chring_profile_info_t info;
    cr_assert_eq(chring_profile_info((chring_profile_t)CHRING_PROFILE_COUNT, &info), -EINVAL);
    cr_assert_eq(chring_profile_info(CHRING_PROFILE_HASH64, NULL), -EINVAL);
}
