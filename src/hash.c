/* Hash functions, labels and the capacity formulas (plain, weighted, effective; the floor under
 * them is inline in internal.h, as every acquire applies it): pure functions, any thread.
 * SPDX-License-Identifier: MIT */
#include "hash.h"
#include "internal.h"

#include <math.h>

uint64_t chring_fnv1a64(const void *data, size_t len)
{
    return data == NULL ? CHRING_FNV64_OFFSET : chring__fnv64_run(CHRING_FNV64_OFFSET, data, len);
}

uint32_t chring_fnv1a32(const void *data, size_t len)
{
    return data == NULL ? CHRING_FNV32_OFFSET : chring__fnv32_run(CHRING_FNV32_OFFSET, data, len);
}

uint64_t chring_mix64(uint64_t z)
{
    return chring__mix64(z);
}

uint64_t chring_hash64(const void *data, size_t len)
{
    return chring_mix64(chring_fnv1a64(data, len));
}

static inline uint32_t rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

uint32_t chring_murmur3_32(const void *data, size_t len, uint32_t seed)
{
    static const unsigned char empty[1];
    const unsigned char *p = data;
    const uint32_t c1 = 0xcc9e2d51, c2 = 0x1b873593;
    uint32_t h = seed;
    if (p == NULL) { /* a NULL key is the empty key; no arithmetic on a null pointer */
        p = empty;
        len = 0;
    }
    size_t blocks = len / 4;

    for (size_t i = 0; i < blocks; i++) {
        /* Blocks are read little-endian, byte by byte, so the result is the same everywhere. */
        uint32_t k = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                     (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
        h = rotl32(h, 13);
        h = h * 5 + 0xe6546b64;
    }

    const unsigned char *tail = p + blocks * 4;
    uint32_t k = 0;
    switch (len & 3) {
    case 3: k ^= (uint32_t)tail[2] << 16; /* fall through */
    case 2: k ^= (uint32_t)tail[1] << 8;  /* fall through */
    case 1:
        k ^= tail[0];
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
    }

    h ^= (uint32_t)len;
    h ^= h >> 16;
    h *= 0x85ebca6b;
    h ^= h >> 13;
    h *= 0xc2b2ae35;
    h ^= h >> 16;
    return h;
}

size_t chring__put_decimal(char *buf, uint32_t i)
{
    char digits[10];
    size_t nd = 0;
    do {
        digits[nd++] = (char)('0' + i % 10);
        i /= 10;
    } while (i != 0);
    for (size_t d = 0; d < nd; d++)
        buf[d] = digits[nd - 1 - d];
    return nd;
}

int chring_vnode_label(char *buf, size_t cap, const char *name, uint32_t i)
{
    if (buf == NULL || name == NULL)
        return -EINVAL;
    size_t len = strlen(name);
    char digits[10];
    size_t nd = chring__put_decimal(digits, i);
    if (len + 1 + nd + 1 > cap || len + 1 + nd > INT32_MAX)
        return -ENOSPC;
    memcpy(buf, name, len);
    buf[len] = '#';
    memcpy(buf + len + 1, digits, nd);
    buf[len + 1 + nd] = '\0';
    return (int)(len + 1 + nd);
}

double chring__clamp_balance(double c)
{
    /* NaN fails every comparison, so it lands on 1 too. */
    if (!(c >= 1.0) || isinf(c))
        return 1.0;
    return c;
}

static uint64_t ceil_to_u64(double x)
{
    x = ceil(x);
    if (!(x < CHRING_TWO_POW_64))
        return UINT64_MAX;
    return (uint64_t)x;
}

/* docs/design.md §3: ceil(c * (m + 1) * w / W), left to right in IEEE double.  m + 1 is formed
 * in double when m is UINT64_MAX (it would wrap in integers). */
uint64_t chring_capacity_weighted(uint64_t total, uint64_t weight, uint64_t total_weight, double c)
{
    if (total_weight == 0)
        return 0;
    c = chring__clamp_balance(c);
    double m1 = total == UINT64_MAX ? (double)total + 1.0 : (double)(total + 1);
    return ceil_to_u64(c * m1 * (double)weight / (double)total_weight);
}

/* The unweighted formula ceil(c * (m + 1) / n) is the weighted one with w = 1 and W = n: the
 * product by 1.0 is exact, so both round identically. */
uint64_t chring_capacity(uint64_t total, uint64_t n, double c)
{
    return chring_capacity_weighted(total, 1, n, c);
}

/* The capacity of a member of effective weight e = s * w against E, the sum over the members up
 * (effective.c): the weighted formula with doubles for w and W, so the same rounding. */
uint64_t chring__capacity_effective(uint64_t total, double e, double sum, double c)
{
    if (!(sum > 0.0) || !(e > 0.0))
        return 0;
    double m1 = total == UINT64_MAX ? (double)total + 1.0 : (double)(total + 1);
    return ceil_to_u64(c * m1 * e / sum); /* left to right, as docs/design.md §3 writes it */
}
