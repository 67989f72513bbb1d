/* Error names (docs/design.md §5): chring_strerror names every negative errno value the library
 * returns, each distinctly, from the one list in src/errors.h, and answers any other value
 * safely.  The list is included here, so an error added to it is tested without touching this
 * file.
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

#include "errors.h"

#include <stdbool.h>

#define AS_VALUE(name, text) -name,
#define AS_TEXT(name, text) text,
static const int listed[] = {CHRING_ERRORS(AS_VALUE)};
static const char *const listed_text[] = {CHRING_ERRORS(AS_TEXT)};
#define NLISTED (sizeof listed / sizeof listed[0])

Test(errors, strerror_names_each_listed_errno_distinctly)
{
    const char *unknown = chring_strerror(-123456);
    cr_assert_not_null(unknown, "strerror of an unknown value");
    cr_assert_str_eq(unknown, "unknown error", "as documented in the header");
    cr_assert_str_eq(chring_strerror(0), "success", "as documented in the header");
    cr_assert_geq(NLISTED, 7u, "the list holds every errno the header documents");
    for (size_t i = 0; i < NLISTED; i++) {
        const char *text = chring_strerror(listed[i]);
        cr_assert_not_null(text, "strerror(%d)", listed[i]);
        cr_assert_str_eq(text, listed_text[i], "strerror(%d) is its text in the list", listed[i]);
        cr_assert_gt(strlen(text), 0u, "strerror(%d) is empty", listed[i]);
        cr_assert_str_neq(text, unknown, "strerror(%d) is the unknown text", listed[i]);
        cr_assert_str_neq(text, "success", "strerror(%d) says success", listed[i]);
        for (size_t j = 0; j < i; j++) {
            cr_assert_neq(listed[i], listed[j], "%d is listed twice", listed[i]);
            cr_assert_str_neq(text, chring_strerror(listed[j]), "%d and %d share a name", listed[i],
                              listed[j]);
        }
    }
}

Test(errors, every_errno_the_header_documents_is_listed)
{
    const int documented[] = {-EINVAL, -ENOMEM, -ENOENT, -ENAMETOOLONG, -ENOSPC, -E2BIG, -ERANGE,
                              -EBUSY};
    for (size_t d = 0; d < sizeof documented / sizeof documented[0]; d++) {
        bool found = false;
        for (size_t i = 0; i < NLISTED; i++)
            found |= listed[i] == documented[d];
        cr_assert(found, "%d is returned by the library but not listed", documented[d]);
    }
}

Test(errors, values_the_library_never_returns_are_unknown)
{
    /* -EEXIST in particular: no function returns it, so it has no name of its own. */
    const int others[] = {-EEXIST, -EAGAIN, 1, EINVAL};
    for (size_t k = 0; k < sizeof others / sizeof others[0]; k++)
        cr_assert_str_eq(chring_strerror(others[k]), "unknown error", "strerror(%d)", others[k]);
}

Test(errors, strerror_of_positive_or_huge_values_is_safe)
{
    cr_assert_not_null(chring_strerror(1 << 30), "huge positive");
    cr_assert_not_null(chring_strerror(-(1 << 30)), "huge negative");
    cr_assert_not_null(chring_strerror(-2147483647 - 1), "INT_MIN");
}

#define AS_NAME(name, text) #name,
static const char *const listed_name[] = {CHRING_ERRORS(AS_NAME)};

Test(errors, err_name_is_each_listed_errno_s_own_name)
{
    cr_assert_str_eq(chring_err_name(0), "OK", "as documented in the header");
    for (size_t i = 0; i < NLISTED; i++) {
        const char *name = chring_err_name(listed[i]);
        cr_assert_not_null(name, "err_name(%d)", listed[i]);
        cr_assert_str_eq(name, listed_name[i], "err_name(%d) is its name in the list", listed[i]);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(name, chring_err_name(listed[j]), "%d and %d share a name", listed[i],
                              listed[j]);
    }
    cr_assert_str_eq(chring_err_name(-EINVAL), "EINVAL", "spelt as errno.h spells it");
    cr_assert_str_eq(chring_err_name(-E2BIG), "E2BIG", "spelt as errno.h spells it");
}

Test(errors, err_name_of_values_the_library_never_returns_is_unknown)
{
    const int others[] = {-EEXIST, -EAGAIN, EINVAL, 1 << 30, -2147483647 - 1};
    for (size_t k = 0; k < sizeof others / sizeof others[0]; k++)
        cr_assert_str_eq(chring_err_name(others[k]), "UNKNOWN", "err_name(%d)", others[k]);
}
