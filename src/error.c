/* Error texts and names from the one list in errors.h, and the version.
 * SPDX-License-Identifier: MIT */
#include "internal.h"
#include "errors.h"

const char *chring_strerror(int err)
{
    switch (err) {
    case 0: return "success";
#define CHRING_ERROR_CASE(name, text) \
    case -name: return text;
        CHRING_ERRORS(CHRING_ERROR_CASE)
#undef CHRING_ERROR_CASE
    default: return "unknown error";
    }
}

const char *chring_err_name(int err)
{
    switch (err) {
    case 0: return "OK";
#define CHRING_ERROR_NAME(name, text) \
    case -name: return #name;
        CHRING_ERRORS(CHRING_ERROR_NAME)
#undef CHRING_ERROR_NAME
    default: return "UNKNOWN";
    }
}

const char *chring_version(void)
{
#define CHRING_STR_(x) #x
#define CHRING_STR(x) CHRING_STR_(x)
    return CHRING_STR(CHRING_VERSION_MAJOR) "." CHRING_STR(CHRING_VERSION_MINOR) "." CHRING_STR(
        CHRING_VERSION_PATCH);
}

unsigned chring_version_number(void)
{
    return CHRING_VERSION_NUMBER;
}
