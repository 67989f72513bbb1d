/* The placement profiles as data: hash, width, label format and point count (SPEC §2).
 * SPDX-License-Identifier: MIT */
#include "internal.h"
#include "compat.h"

#include <xxhash.h>

static const char *const profile_names[] = {
    [CHRING_PROFILE_HASH64] = "hash64", [CHRING_PROFILE_MURMUR32] = "murmur32",
    [CHRING_PROFILE_FNV32] = "fnv32",   [CHRING_PROFILE_FNV16] = "fnv16",
    [CHRING_PROFILE_XXH3] = "xxh3",     [CHRING_PROFILE_KETAMA] = "ketama",
    [CHRING_PROFILE_NGINX] = "nginx",   [CHRING_PROFILE_CUSTOM] = "custom",
};

const char *chring_profile_name(chring_profile_t profile)
{
    if ((unsigned)profile > CHRING_PROFILE_CUSTOM)
        return NULL;
    return profile_names[profile];
}

int chring_profile_parse(const char *name, chring_profile_t *out)
{
    if (name == NULL || out == NULL)
        return -EINVAL;
    for (unsigned p = 0; p <= CHRING_PROFILE_CUSTOM; p++) {
        if (strcmp(name, profile_names[p]) == 0) {
            *out = (chring_profile_t)p;
            return 0;
        }
    }
    return -EINVAL;
}

static inline uint64_t width_mask(unsigned bits)
{
    return bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
}

uint64_t chring__profile_hash(chring_profile_t profile, chring_hash_fn fn, void *ctx, unsigned bits,
                              const void *key, size_t len)
{
    switch (profile) {
    case CHRING_PROFILE_HASH64: return chring_hash64(key, len);
    case CHRING_PROFILE_MURMUR32: return chring_murmur3_32(key, len, 0);
    case CHRING_PROFILE_FNV32: return chring_fnv1a32(key, len);
    case CHRING_PROFILE_FNV16: return chring_fnv1a32(key, len) & 0xffffu;
    case CHRING_PROFILE_XXH3: return XXH3_64bits(key, len);
    case CHRING_PROFILE_KETAMA: return chring__ketama_hash(key, len);
    case CHRING_PROFILE_NGINX: return chring__nginx_hash(key, len);
    case CHRING_PROFILE_CUSTOM: return fn(key, len, ctx) & width_mask(bits);
    }
    return 0;
}

uint64_t chring__profile_points(const chring_snap_t *shape, uint32_t weight, size_t members,
                                uint64_t total_weight)
{
    uint64_t points;
    switch (shape->profile) {
    case CHRING_PROFILE_NGINX: points = UINT64_C(160) * weight; break;
    case CHRING_PROFILE_KETAMA:
        points = UINT64_C(4) * chring__ketama_digests(weight, total_weight, members);
        break;
    default: points = (uint64_t)shape->vnodes * weight; break;
    }
    return points;
}

/* Widens n 32-bit values written at the start of out into its n 64-bit slots, last first so that
 * no value is overwritten before it is read. */
static void widen_u32(uint64_t *out, uint64_t n)
{
    const unsigned char *bytes = (const unsigned char *)out;
    for (uint64_t k = n; k-- > 0;) {
        uint32_t v;
        memcpy(&v, bytes + 4 * k, sizeof v);
        out[k] = v;
    }
}

void chring__profile_positions(const chring_snap_t *shape, const char *name, size_t name_len,
                               uint32_t weight, size_t members, uint64_t total_weight,
                               uint64_t count, uint64_t *out)
{
    char label[CHRING_NAME_MAX + 16];

    switch (shape->profile) {
    case CHRING_PROFILE_KETAMA:
        chring__ketama_points(name, name_len, (uint32_t)(count / 4), (uint32_t *)(void *)out);
        widen_u32(out, count);
        (void)weight, (void)members, (void)total_weight;
        return;
    case CHRING_PROFILE_NGINX:
        chring__nginx_points(name, name_len, (uint32_t)count, (uint32_t *)(void *)out);
        widen_u32(out, count);
        return;
    case CHRING_PROFILE_FNV16:
        /* Point 0 is the bare name, point i >= 1 is "<i>-<name>" (the virtual-nodes lesson). */
        for (uint64_t i = 0; i < count; i++) {
            size_t len = 0;
            if (i > 0) {
                len = chring__put_decimal(label, (uint32_t)i);
                label[len++] = '-';
            }
            memcpy(label + len, name, name_len);
            len += name_len;
            out[i] = chring_fnv1a32(label, len) & 0xffffu;
        }
        return;
    case CHRING_PROFILE_HASH64: {
        /* FNV-1a is a running hash: hash "<name>#" once and continue with each index. */
        uint64_t prefix = chring_fnv1a64(name, name_len);
        prefix ^= (unsigned char)'#';
        prefix *= UINT64_C(1099511628211);
        for (uint64_t i = 0; i < count; i++) {
            size_t nd = chring__put_decimal(label, (uint32_t)i);
            uint64_t h = prefix;
            for (size_t d = 0; d < nd; d++) {
                h ^= (unsigned char)label[d];
                h *= UINT64_C(1099511628211);
            }
            out[i] = chring_mix64(h);
        }
        return;
    }
    case CHRING_PROFILE_FNV32: {
        uint32_t prefix = chring_fnv1a32(name, name_len);
        prefix ^= (unsigned char)'#';
        prefix *= UINT32_C(16777619);
        for (uint64_t i = 0; i < count; i++) {
            size_t nd = chring__put_decimal(label, (uint32_t)i);
            uint32_t h = prefix;
            for (size_t d = 0; d < nd; d++) {
                h ^= (unsigned char)label[d];
                h *= UINT32_C(16777619);
            }
            out[i] = h;
        }
        return;
    }
    case CHRING_PROFILE_MURMUR32:
    case CHRING_PROFILE_XXH3:
    case CHRING_PROFILE_CUSTOM:
        memcpy(label, name, name_len);
        label[name_len] = '#';
        for (uint64_t i = 0; i < count; i++) {
            size_t len = name_len + 1 + chring__put_decimal(label + name_len + 1, (uint32_t)i);
            out[i] = chring__profile_hash(shape->profile, shape->hash, shape->hash_ctx, shape->bits,
                                          label, len);
        }
        return;
    }
}
