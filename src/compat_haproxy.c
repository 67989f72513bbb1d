/* HAProxy 2.6's `hash-type consistent` (docs/design.md §2.1, docs/compat.md): server ids as
 * member names, the integer avalanche that places a server's nodes, and the key hashes.
 *
 * SPDX-License-Identifier: MIT
 *
 * Written from HAProxy's documented behaviour and checked against maps recorded from the real
 * haproxy binary (tests/compat): a server of id I and weight w has 16 * w nodes, node k at
 * full_hash(I * 4096 + k) computed modulo 2^32 (4096 = 256 weights x 16 nodes per weight); a key
 * hashes with sdbm followed by the same avalanche.  The lookup rule (nearest node on either side)
 * lives with the search, in find.h.  All functions are pure and may be called from any thread. */
#include "internal.h"
#include "compat.h"

/* Nodes per unit of weight (HAProxy's BE_WEIGHT_SCALE), and the id stride (its SRV_EWGHT_RANGE:
 * the 256 possible weights times 16). */
#define HAPROXY_NODES_PER_WEIGHT 16u
#define HAPROXY_ID_STRIDE 4096u

int chring__haproxy_id(const char *name, size_t len, uint32_t *id)
{
    /* A server id as HAProxy prints it: decimal, no sign, no leading zero, 1 .. 2^31 - 1 (ids are
     * positive C ints). */
    if (name == NULL || len == 0 || len > 10 || name[0] == '0')
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    if (v > INT32_MAX)
        return -EINVAL;
    *id = (uint32_t)v;
    return 0;
}

uint32_t chring__haproxy_avalanche(uint32_t a)
{
    /* Bob Jenkins' 32-bit integer mix, six add/xor-shift steps, then a multiplication by the
     * prime 3221225473 (HAProxy's full_hash). */
    a = (a + 0x7ed55d16u) + (a << 12);
    a = (a ^ 0xc761c23cu) ^ (a >> 19);
    a = (a + 0x165667b1u) + (a << 5);
    a = (a + 0xd3a2646cu) ^ (a << 9);
    a = (a + 0xfd7046c5u) + (a << 3);
    a = (a ^ 0xb55a4f09u) ^ (a >> 16);
    return a * 3221225473u;
}

uint32_t chring__haproxy_sdbm(const void *key, size_t len)
{
    /* hash = byte + (hash << 6) + (hash << 16) - hash, bytes unsigned, modulo 2^32. */
    const unsigned char *p = key;
    uint32_t h = 0;
    for (size_t i = 0; i < len; i++)
        h = (uint32_t)p[i] + (h << 6) + (h << 16) - h;
    return h;
}

uint32_t chring__haproxy_hash(const void *key, size_t len)
{
    return chring__haproxy_avalanche(chring__haproxy_sdbm(key, len));
}

uint64_t chring__haproxy_points(uint32_t weight)
{
    /* HAProxy's weights are 1 .. 256; a larger one has no HAProxy equivalent and is reported as
     * too big (the callers' CHRING_POINTS_MAX check turns this into -E2BIG). */
    if (weight > 256)
        return (uint64_t)CHRING_POINTS_MAX + 1;
    return (uint64_t)HAPROXY_NODES_PER_WEIGHT * weight;
}

void chring__haproxy_positions(const char *name, size_t len, uint64_t count, uint64_t *out)
{
    /* A name that is not a server id never gets here once the ring checks names (the profile's
     * name_check); id 0, which HAProxy never assigns, keeps the function total. */
    uint32_t id = 0;
    if (chring__haproxy_id(name, len, &id) != 0)
        id = 0;
    uint32_t base = id * HAPROXY_ID_STRIDE; /* modulo 2^32, as HAProxy's int arithmetic wraps */
    for (uint64_t k = 0; k < count; k++)
        out[k] = chring__haproxy_avalanche(base + (uint32_t)k);
}
