/* Error names and version, from one list.
 * SPDX-License-Identifier: MIT */
#include "internal.h"

const char *chring_strerror(int err)
{
    switch (err) {
    case 0: return "success";
    case -EINVAL: return "invalid argument";
    case -ENOMEM: return "out of memory";
    case -ENOENT: return "no such member (or empty ring)";
    case -ENAMETOOLONG: return "member name longer than CHRING_NAME_MAX bytes";
    case -ENOSPC: return "buffer too small";
    case -E2BIG: return "too many points (member above CHRING_POINTS_MAX or ring above "
                        "CHRING_RING_POINTS_MAX)";
    case -ERANGE: return "index out of range";
    case -EEXIST: return "member already exists";
    default: return "unknown error";
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
