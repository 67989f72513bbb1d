/* Error names (docs/design.md §5): chring_strerror names every negative errno value the
 * library returns, each distinctly, and answers any other value safely.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

Test(errors, strerror_names_each_errno_distinctly)
{
    const int errs[] = {-EINVAL, -ENOMEM, -ENOENT, -ENAMETOOLONG,
                        -ENOSPC, -E2BIG,  -ERANGE, -EEXIST};
    const size_t count = sizeof errs / sizeof errs[0];
    const char *unknown = chring_strerror(-123456);
    cr_assert_not_null(unknown, "strerror of an unknown value");
    cr_assert_str_eq(unknown, "unknown error", "as documented in the header");
    cr_assert_not_null(chring_strerror(0), "strerror(0)");
    cr_assert_str_eq(chring_strerror(0), "success", "as documented in the header");
    for (size_t i = 0; i < count; i++) {
        const char *text = chring_strerror(errs[i]);
        cr_assert_not_null(text, "strerror(%d)", errs[i]);
        cr_assert_gt(strlen(text), 0u, "strerror(%d) is empty", errs[i]);
        cr_assert_str_neq(text, unknown, "strerror(%d) is the unknown text", errs[i]);
        cr_assert_str_neq(text, "success", "strerror(%d) says success", errs[i]);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(text, chring_strerror(errs[j]), "%d and %d share a name", errs[i],
                              errs[j]);
    }
}

Test(errors, strerror_of_positive_or_huge_values_is_safe)
{
    cr_assert_not_null(chring_strerror(1 << 30), "huge positive");
    cr_assert_not_null(chring_strerror(-(1 << 30)), "huge negative");
    cr_assert_not_null(chring_strerror(-2147483647 - 1), "INT_MIN");
}
