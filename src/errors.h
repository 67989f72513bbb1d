/* Every error the library returns, in one list: chring_strerror and chring_err_name (error.c)
 * and their test are generated from it.  X(errno name, description); 0 is success.
 * Include-only list, no dependencies, so tests may include it.
 * SPDX-License-Identifier: MIT */
#ifndef CHRING_ERRORS_H
#define CHRING_ERRORS_H

#define CHRING_ERRORS(X) \
    X(EINVAL, "invalid argument") \
    X(ENOMEM, "out of memory") \
    X(ENOENT, "no such member (or empty ring)") \
    X(ENAMETOOLONG, "member name longer than CHRING_NAME_MAX bytes") \
    X(ENOSPC, "buffer too small") \
    X(E2BIG, "too many points (member above CHRING_POINTS_MAX or ring above " \
             "CHRING_RING_POINTS_MAX)") \
    X(ERANGE, "index out of range") \
    X(EBUSY, "member at its capacity")

#endif
