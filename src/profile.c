/* The placement profiles as data: one descriptor each, in one table (docs/design.md §2).  Adding
 * or auditing a profile touches this file only: its hash, width, label format, point count,
 * whether a publish may merge its points, and how equal positions are settled.
 * SPDX-License-Identifier: MIT */
#include "internal.h"
#include "compat.h"
#include "hash.h"

#include <xxhash.h>

static inline uint64_t width_mask(unsigned bits)
{
    return bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
}

/* ---- key hashes --------------------------------------------------------------------------- */

static uint64_t hash_hash64(const struct chring_prof *p, const void *key, size_t len)
{
    (void)p;
    return chring_hash64(key, len);
}

static uint64_t hash_murmur32(const struct chring_prof *p, const void *key, size_t len)
{
    (void)p;
    return chring_murmur3_32(key, len, 0);
}

static uint64_t hash_fnv32(const struct chring_prof *p, const void *key, size_t len)
{
    (void)p;
    return chring_fnv1a32(key, len);
}

static uint64_t hash_fnv16(const struct chring_prof *p, const void *key, size_t len)
{
    (void)p;
    return chring_fnv1a32(key, len) & 0xffffu;
}

static uint64_t hash_xxh3(const struct chring_prof *p, const void *key, size_t len)
{
    (void)p;
    return XXH3_64bits(key, len);
}

static uint64_t hash_ketama(const struct chring_prof *p, const void *key, size_t len)
{
    (void)p;
    return chring__ketama_hash(key, len);
}

static uint64_t hash_nginx(const struct chring_prof *p, const void *key, size_t len)
{
    (void)p;
    return chring__nginx_hash(key, len);
}

static uint64_t hash_haproxy(const struct chring_prof *p, const void *key, size_t len)
{
    (void)p;
    return chring__haproxy_hash(key, len);
}

static uint64_t hash_envoy(const struct chring_prof *p, const void *key, size_t len)
{
    (void)p;
    return chring__envoy_hash(key, len);
}

static uint64_t hash_varnish(const struct chring_prof *p, const void *key, size_t len)
{
    (void)p;
    return chring__varnish_hash(key, len);
}

static uint64_t hash_custom(const struct chring_prof *p, const void *key, size_t len)
{
    return p->hash(key, len, p->hash_ctx) & width_mask(p->bits);
}

/* ---- point counts ------------------------------------------------------------------------- */

static uint64_t points_vnodes(const struct chring_prof *p, uint32_t weight, size_t members,
                              uint64_t total_weight)
{
    (void)members, (void)total_weight;
    return (uint64_t)p->vnodes * weight;
}

static uint64_t points_nginx(const struct chring_prof *p, uint32_t weight, size_t members,
                             uint64_t total_weight)
{
    (void)p, (void)members, (void)total_weight;
    return UINT64_C(160) * weight;
}

static uint64_t points_ketama(const struct chring_prof *p, uint32_t weight, size_t members,
                              uint64_t total_weight)
{
    (void)p;
    return UINT64_C(4) * chring__ketama_digests(weight, total_weight, members);
}

static uint64_t points_haproxy(const struct chring_prof *p, uint32_t weight, size_t members,
                               uint64_t total_weight)
{
    (void)p, (void)members, (void)total_weight;
    return chring__haproxy_points(weight);
}

/* envoy: an upper bound only; the counts come from counts_envoy, for the whole membership. */
static uint64_t points_envoy(const struct chring_prof *p, uint32_t weight, size_t members,
                             uint64_t total_weight)
{
    (void)members;
    return chring__envoy_points_bound(p->ring_size_min, p->ring_size_max, weight, total_weight);
}

static void counts_envoy(const struct chring_prof *p, const uint32_t *weights, size_t n,
                         uint32_t *out)
{
    chring__envoy_counts(p->ring_size_min, p->ring_size_max, weights, n, out);
}

/* ---- member names ------------------------------------------------------------------------- */

/* haproxy: a member is a HAProxy server id in decimal. */
static int name_check_haproxy(const char *name, size_t len)
{
    uint32_t id;
    return chring__haproxy_id(name, len, &id);
}

/* ---- point positions ---------------------------------------------------------------------- */

/* Labels "<name>#<i>" hashed with the profile's key hash (murmur32, xxh3, custom). */
static void positions_label(const struct chring_prof *p, const char *name, size_t name_len,
                            uint64_t count, uint64_t *out)
{
    char label[CHRING_NAME_MAX + 16];
    memcpy(label, name, name_len);
    label[name_len] = '#';
    for (uint64_t i = 0; i < count; i++) {
        size_t len = name_len + 1 + chring__put_decimal(label + name_len + 1, (uint32_t)i);
        out[i] = p->desc->hash(p, label, len);
    }
}

/* hash64: FNV-1a is a running hash, so "<name>#" is hashed once and continued with each index. */
static void positions_hash64(const struct chring_prof *p, const char *name, size_t name_len,
                             uint64_t count, uint64_t *out)
{
    (void)p;
    char digits[10];
    uint64_t prefix = chring__fnv64_run(CHRING_FNV64_OFFSET, (const unsigned char *)name, name_len);
    prefix = chring__fnv64_run(prefix, (const unsigned char *)"#", 1);
    for (uint64_t i = 0; i < count; i++) {
        size_t nd = chring__put_decimal(digits, (uint32_t)i);
        out[i] = chring__mix64(chring__fnv64_run(prefix, (const unsigned char *)digits, nd));
    }
}

static void positions_fnv32(const struct chring_prof *p, const char *name, size_t name_len,
                            uint64_t count, uint64_t *out)
{
    (void)p;
    char digits[10];
    uint32_t prefix = chring__fnv32_run(CHRING_FNV32_OFFSET, (const unsigned char *)name, name_len);
    prefix = chring__fnv32_run(prefix, (const unsigned char *)"#", 1);
    for (uint64_t i = 0; i < count; i++) {
        size_t nd = chring__put_decimal(digits, (uint32_t)i);
        out[i] = chring__fnv32_run(prefix, (const unsigned char *)digits, nd);
    }
}

/* fnv16: point 0 is the bare name, point i >= 1 is "<i>-<name>" (the virtual-nodes lesson). */
static void positions_fnv16(const struct chring_prof *p, const char *name, size_t name_len,
                            uint64_t count, uint64_t *out)
{
    (void)p;
    char label[CHRING_NAME_MAX + 16];
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

static void positions_ketama(const struct chring_prof *p, const char *name, size_t name_len,
                             uint64_t count, uint64_t *out)
{
    (void)p;
    chring__ketama_points(name, name_len, (uint32_t)(count / 4), (uint32_t *)(void *)out);
    widen_u32(out, count);
}

static void positions_nginx(const struct chring_prof *p, const char *name, size_t name_len,
                            uint64_t count, uint64_t *out)
{
    (void)p;
    chring__nginx_points(name, name_len, (uint32_t)count, (uint32_t *)(void *)out);
    widen_u32(out, count);
}

static void positions_haproxy(const struct chring_prof *p, const char *name, size_t name_len,
                              uint64_t count, uint64_t *out)
{
    (void)p;
    chring__haproxy_positions(name, name_len, count, out);
}

static void positions_envoy(const struct chring_prof *p, const char *name, size_t name_len,
                            uint64_t count, uint64_t *out)
{
    (void)p;
    chring__envoy_positions(name, name_len, count, out);
}

static void positions_varnish(const struct chring_prof *p, const char *name, size_t name_len,
                              uint64_t count, uint64_t *out)
{
    (void)p;
    chring__varnish_points(name, name_len, count, out);
}

/* ---- the table ---------------------------------------------------------------------------- */

const struct chring_profile_desc chring__profiles[CHRING_PROFILE_COUNT] = {
    [CHRING_PROFILE_HASH64] = {.name = "hash64",
                               .bits = 64,
                               .uses_vnodes = true,
                               .mergeable = true,
                               .collide = CHRING_COLLIDE_KEEP_ALL,
                               .hash = hash_hash64,
                               .points = points_vnodes,
                               .positions = positions_hash64},
    [CHRING_PROFILE_MURMUR32] = {.name = "murmur32",
                                 .bits = 32,
                                 .uses_vnodes = true,
                                 .mergeable = true,
                                 .collide = CHRING_COLLIDE_KEEP_ALL,
                                 .hash = hash_murmur32,
                                 .points = points_vnodes,
                                 .positions = positions_label},
    [CHRING_PROFILE_FNV32] = {.name = "fnv32",
                              .bits = 32,
                              .uses_vnodes = true,
                              .mergeable = true,
                              .collide = CHRING_COLLIDE_KEEP_ALL,
                              .hash = hash_fnv32,
                              .points = points_vnodes,
                              .positions = positions_fnv32},
    /* Join order decides contested positions, so a publish rebuilds. */
    [CHRING_PROFILE_FNV16] = {.name = "fnv16",
                              .bits = 16,
                              .uses_vnodes = true,
                              .mergeable = false,
                              .collide = CHRING_COLLIDE_SKIP_TAKEN,
                              .hash = hash_fnv16,
                              .points = points_vnodes,
                              .positions = positions_fnv16},
    [CHRING_PROFILE_XXH3] = {.name = "xxh3",
                             .bits = 64,
                             .uses_vnodes = true,
                             .mergeable = true,
                             .collide = CHRING_COLLIDE_KEEP_ALL,
                             .hash = hash_xxh3,
                             .points = points_vnodes,
                             .positions = positions_label},
    /* Point counts depend on the membership size and total weight, so a publish rebuilds. */
    [CHRING_PROFILE_KETAMA] = {.name = "ketama",
                               .bits = 32,
                               .uses_vnodes = false,
                               .counts_need_ring = true,
                               .mergeable = false,
                               .collide = CHRING_COLLIDE_KEEP_ALL,
                               .hash = hash_ketama,
                               .points = points_ketama,
                               .positions = positions_ketama},
    /* Equal positions are dropped, so a removal can uncover a dropped point: a publish
     * rebuilds. */
    [CHRING_PROFILE_NGINX] = {.name = "nginx",
                              .bits = 32,
                              .uses_vnodes = false,
                              .mergeable = false,
                              .collide = CHRING_COLLIDE_KEEP_FIRST,
                              .hash = hash_nginx,
                              .points = points_nginx,
                              .positions = positions_nginx},
    /* The caller's hash; bits 0: the width comes from config.hash_bits. */
    [CHRING_PROFILE_CUSTOM] = {.name = "custom",
                               .bits = 0,
                               .uses_vnodes = true,
                               .mergeable = true,
                               .collide = CHRING_COLLIDE_KEEP_ALL,
                               .hash = hash_custom,
                               .points = points_vnodes,
                               .positions = positions_label},
    /* A member's nodes depend on its id and weight alone, and a weight change adds or drops
     * nodes at the end, so a publish may merge.  The owner is the nearest node. */
    [CHRING_PROFILE_HAPROXY] = {.name = "haproxy",
                                .bits = 32,
                                .uses_vnodes = false,
                                .mergeable = true,
                                .collide = CHRING_COLLIDE_KEEP_ALL,
                                .nearest = true,
                                .max_weight = 256,
                                .name_check = name_check_haproxy,
                                .hash = hash_haproxy,
                                .points = points_haproxy,
                                .positions = positions_haproxy},
    /* Entry counts depend on every weight and on the host order, so a publish rebuilds. */
    [CHRING_PROFILE_ENVOY] = {.name = "envoy",
                              .bits = 64,
                              .uses_vnodes = false,
                              .counts_need_ring = true,
                              .mergeable = false,
                              .collide = CHRING_COLLIDE_KEEP_ALL,
                              .counts = counts_envoy,
                              .hash = hash_envoy,
                              .points = points_envoy,
                              .positions = positions_envoy},
    /* Varnish's shard director: vnodes is its `replicas`, vnodes * weight points per backend,
     * each a pure function of (name, index), so a publish may merge.  Keys above the top point
     * start at the last point; a two-point ring starts every key at point 1. */
    [CHRING_PROFILE_VARNISH] = {.name = "varnish",
                                .bits = 32,
                                .uses_vnodes = true,
                                .mergeable = true,
                                .collide = CHRING_COLLIDE_KEEP_ALL,
                                .varnish_start = true,
                                .hash = hash_varnish,
                                .points = points_vnodes,
                                .positions = positions_varnish},
};

static const struct chring_profile_desc *profile_desc(chring_profile_t id)
{
    return (unsigned)id >= CHRING_PROFILE_COUNT ? NULL : &chring__profiles[id];
}

int chring__prof_init(struct chring_prof *out, const chring_config_t *cfg)
{
    const struct chring_profile_desc *d = profile_desc(cfg->profile);
    if (d == NULL)
        return -EINVAL;
    /* Profiles that fix their own point counts ignore vnodes, 0 included (docs/design.md §2.1). */
    if (d->uses_vnodes && cfg->vnodes == 0)
        return -EINVAL;
    if (cfg->profile == CHRING_PROFILE_ENVOY &&
        (cfg->ring_size_min == 0 || cfg->ring_size_min > cfg->ring_size_max ||
         cfg->ring_size_max > CHRING_DEFAULT_RING_SIZE_MAX))
        return -EINVAL;
    unsigned bits = d->bits;
    if (bits == 0) {
        if (cfg->hash == NULL ||
            (cfg->hash_bits != 64 && cfg->hash_bits != 32 && cfg->hash_bits != 16))
            return -EINVAL;
        bits = cfg->hash_bits;
    }
    out->desc = d;
    out->id = cfg->profile;
    out->bits = bits;
    out->shift = 64 - bits;
    out->vnodes = cfg->vnodes;
    out->hash = d->bits == 0 ? cfg->hash : NULL;
    out->hash_ctx = d->bits == 0 ? cfg->hash_ctx : NULL;
    out->ring_size_min = cfg->profile == CHRING_PROFILE_ENVOY ? cfg->ring_size_min : 0;
    out->ring_size_max = cfg->profile == CHRING_PROFILE_ENVOY ? cfg->ring_size_max : 0;
    return 0;
}

const char *chring_profile_name(chring_profile_t profile)
{
    const struct chring_profile_desc *d = profile_desc(profile);
    return d == NULL ? NULL : d->name;
}

int chring_profile_parse(const char *name, chring_profile_t *out)
{
    if (name == NULL || out == NULL)
        return -EINVAL;
    for (unsigned p = 0; p < CHRING_PROFILE_COUNT; p++) {
        if (strcmp(name, profile_desc((chring_profile_t)p)->name) == 0) {
            *out = (chring_profile_t)p;
            return 0;
        }
    }
    return -EINVAL;
}

int chring_profile_info(chring_profile_t profile, chring_profile_info_t *out)
{
    const struct chring_profile_desc *d = profile_desc(profile);
    if (d == NULL || out == NULL)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    out->name = d->name;
    out->hash_bits = d->bits;
    out->uses_vnodes = d->uses_vnodes;
    out->names_are_ids = d->name_check != NULL;
    out->nearest = d->nearest;
    out->join_order = d->collide == CHRING_COLLIDE_SKIP_TAKEN;
    out->counts_need_ring = d->counts_need_ring;
    out->default_vnodes = d->uses_vnodes ? CHRING_DEFAULT_VNODES : 0;
    out->max_weight = d->max_weight;
    return 0;
}
