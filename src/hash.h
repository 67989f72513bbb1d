/* The FNV-1a and SplitMix64 constants and steps, written once: hash.c builds the public hash
 * functions from them, profile.c the running label hashes, find.h the inlined key hash of the
 * default profile (docs/design.md §2).
 * SPDX-License-Identifier: MIT */
#ifndef CHRING_HASH_H
#define CHRING_HASH_H

#include <stddef.h>
#include <stdint.h>

#define CHRING_FNV64_OFFSET UINT64_C(14695981039346656037)
#define CHRING_FNV64_PRIME UINT64_C(1099511628211)
#define CHRING_FNV32_OFFSET UINT32_C(2166136261)
#define CHRING_FNV32_PRIME UINT32_C(16777619)

/* FNV-1a is a running hash: continue h over len more bytes. */
static inline uint64_t chring__fnv64_run(uint64_t h, const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= CHRING_FNV64_PRIME;
    }
    return h;
}

static inline uint32_t chring__fnv32_run(uint32_t h, const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= CHRING_FNV32_PRIME;
    }
    return h;
}

/* The SplitMix64 finalizer (mod 2^64). */
static inline uint64_t chring__mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= UINT64_C(0xbf58476d1ce4e5b9);
    z ^= z >> 27;
    z *= UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return z;
}

#endif
