/* A reference model of chring: small, slow and obviously correct.  The unit tests
 * (tests/test_model.c) and the fuzz targets (fuzz/) check the library against it.
 *
 * SPDX-License-Identifier: MIT
 *
 * The model re-derives everything from the contract (docs/design.md) and shares no code with the
 * library: its own FNV-1a, Mix64 and MurmurHash3, its own label formatting, a sorted array of
 * points rebuilt from scratch after every change, plain binary and linear search, its own
 * capacity arithmetic (docs/design.md §3) and exact moved/share fractions computed with 128-bit
 * integers.  A model that shared the library's code would agree with the library's bugs.  It
 * includes no header of the library and links none of its code.
 *
 * Profiles covered: hash64, murmur32, fnv32, fnv16, xxh3 (XXH3_64bits from libxxhash, which
 * docs/design.md §2 makes normative: no re-write), nginx (CRC-32 from zlib, likewise normative;
 * the HOST/PORT split, the point chain and the removal of equal points are the model's own),
 * ketama (MD5 from libmd, likewise; the single-precision digest counts and the four points per
 * digest are the model's own) and custom (any function, 64/32/16 bits).
 *
 * Not thread-safe: model_build sorts through a file-level pointer (qsort has no context
 * argument).  Its users are single-threaded.
 */
#ifndef CHRING_TEST_MODEL_H
#define CHRING_TEST_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define MODEL_NAME_MAX 255u
#define MODEL_POINTS_MAX (1u << 24)
#define MODEL_RING_POINTS_MAX (1u << 31)

typedef enum {
    MODEL_HASH64,
    MODEL_MURMUR32,
    MODEL_FNV32,
    MODEL_FNV16,
    MODEL_CUSTOM,
    MODEL_XXH3,
    MODEL_NGINX,
    MODEL_KETAMA
} model_profile_t;

typedef uint64_t (*model_hash_fn)(const void *data, size_t len, void *ctx);

typedef struct model_cfg {
    model_profile_t profile;
    unsigned bits;      /* 64, 32 or 16 */
    uint32_t vnodes;    /* points per unit of weight */
    model_hash_fn hash; /* MODEL_CUSTOM only */
    void *hash_ctx;
} model_cfg_t;

typedef struct model_member {
    char name[MODEL_NAME_MAX + 1]; /* NUL-terminated copy; len bytes without NUL */
    size_t len;
    uint32_t weight;
    int obj; /* the caller's identity of the member object (one per successful add) */
} model_member_t;

typedef struct model_point {
    uint64_t pos;
    uint32_t member; /* index into the snapshot's members (join order) */
    uint32_t index;  /* the point's index within its member */
} model_point_t;

typedef struct model_snap {
    model_cfg_t cfg;
    model_member_t *members; /* join order */
    size_t nmembers;
    uint32_t *by_name;     /* member indices sorted by name */
    model_point_t *points; /* ring order */
    size_t npoints;
    size_t *member_points; /* points placed per member */
    uint64_t total_weight;
} model_snap_t;

/* Hashes, written from docs/design.md §2 alone. */
uint64_t model_fnv1a64(const void *data, size_t len);
uint32_t model_fnv1a32(const void *data, size_t len);
uint64_t model_mix64(uint64_t z);
uint32_t model_murmur3_32(const void *data, size_t len, uint32_t seed);
/* The profile's hash of b, in the profile's width. */
uint64_t model_hash(const model_cfg_t *cfg, const void *data, size_t len);
/* Writes "<name>#<i>" (no NUL) into buf (at least len + 11 bytes); returns its length. */
size_t model_label(char *buf, const char *name, size_t len, uint32_t i);

/* Points per unit of weight: vnodes, 160 for nginx, 0 for ketama (whose counts depend on the
 * whole membership: see model_points). */
uint64_t model_points_per_weight(const model_cfg_t *cfg);
/* ketama: d_j, the digests of a member of weight w among n members of total weight W. */
uint32_t model_ketama_digests(uint32_t w, uint64_t total_weight, size_t n);
/* The points member j would have in a ring of these members (before nginx drops equal points
 * and fnv16 skips taken positions). */
uint64_t model_points(const model_cfg_t *cfg, const model_member_t *members, size_t n, size_t j);

/* memcmp order, shorter first on a common prefix. */
int model_name_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* Builds a snapshot of these members (join order) from scratch; copies them.  Returns 0 or -1
 * (out of memory). */
int model_build(model_snap_t *out, const model_cfg_t *cfg, const model_member_t *members, size_t n);
void model_snap_free(model_snap_t *s);
/* Index (join order) of the member of that name, or -1. */
long model_find(const model_snap_t *s, const char *name, size_t len);
/* The point that owns hash h (first position >= h, wrapping), or -1 on an empty snapshot. */
long model_owner_point(const model_snap_t *s, uint64_t h);
/* Up to n distinct member indices met clockwise from h's owner; returns how many. */
size_t model_lookup_n(const model_snap_t *s, uint64_t h, uint32_t *out, size_t n);
/* The member's exact arc share (count of owned positions / 2^bits). */
double model_share(const model_snap_t *s, size_t member);
/* Every member's share at once (out[j] for member j, join order). */
void model_shares(const model_snap_t *s, double *out);
/* The exact fraction of positions whose owner's name differs between a and b. */
double model_moved(const model_snap_t *a, const model_snap_t *b);

/* c as docs/design.md §3 uses it: below 1, NaN or infinite acts as 1. */
double model_balance(double c);
/* ceil(c * (m + 1) * w / W) in IEEE double, left to right, as a double; 0 when W == 0. */
double model_capacity(double c, uint64_t m, uint64_t w, uint64_t total_weight);
/* ceil(c * (m + 1) / n); 0 when n == 0. */
double model_capacity_plain(double c, uint64_t m, uint64_t n);
/* The bounded walk of docs/design.md §3 from h's owner: loads[i] is member i's load, m the total
 * used in the capacity.  Returns the chosen member index (or -1 on an empty snapshot); *owner
 * gets the owner's index; *saturated is set when no member was below its capacity (the least
 * loaded member seen first is returned then). */
long model_walk(const model_snap_t *s, uint64_t h, double c, uint64_t m, const uint64_t *loads,
                long *owner, int *saturated);
/* The walk of a retry that keeps the bound (chring_acquire_skip): as model_walk, but members j with
 * skip[j] != 0 are passed over as if full (they still count in the capacity's W); skip NULL skips
 * nothing.  Returns -1 when no member outside skip is met (an empty snapshot included; *owner is
 * the key's owner whenever the snapshot has points, skipped or not); *saturated is set when every
 * member met outside skip was at or above its capacity (the least loaded of them, first of equals,
 * is returned then). */
long model_walk_skip(const model_snap_t *s, uint64_t h, double c, uint64_t m, const uint64_t *loads,
                     const unsigned char *skip, long *owner, int *saturated);

/* Health and warm-up (docs/design.md §3).  down and scale describe the members of s (join
 * order): down[j] != 0 when member j is down, scale[j] its admission scale in [0, 1]; NULL means
 * every member up, every scale 1. */
/* W of the capacities: the total weight of the members of s that are up. */
uint64_t model_up_weight(const model_snap_t *s, const unsigned char *down);
/* The owner of hash h when members are down: the first member up clockwise from h's point, or -1
 * (an empty snapshot, or every member down). */
long model_owner_up(const model_snap_t *s, uint64_t h, const unsigned char *down);
/* Where a key at hash h whose owner is down goes without being a spill
 * (CHRING_OUTCOME_OWNER_DOWN): the first member clockwise from h's point that is up and not
 * skipped, when no skipped member comes before it.  Returns its index, or -1.  skip and down
 * may be NULL. */
long model_first_up_unskipped(const model_snap_t *s, uint64_t h, const unsigned char *skip,
                              const unsigned char *down);
/* model_lookup_n passing over the members that are down. */
size_t model_lookup_n_up(const model_snap_t *s, uint64_t h, const unsigned char *down,
                         uint32_t *out, size_t n);
/* A capacity under admission scale s: cap at s >= 1, else ceil(s * cap) in double. */
double model_scaled_capacity(double cap, double scale);
/* Effective weights (docs/design.md §3): E, the sum in name order of scale[j] * w_j over the
 * members that are up (scale NULL: every scale 1), and the capacity ceil(c * (m + 1) * e / E) of
 * a member of effective weight e, left to right in double (0 when e or E is not above 0). */
double model_effective_sum(const model_snap_t *s, const unsigned char *down, const double *scale);
double model_effective_capacity(double c, uint64_t m, double e, double sum);
/* The walk of chring_acquire and chring_acquire_skip with health: as model_walk_skip, also
 * passing over the members that are down (E counts only the members up, skipped ones included);
 * a member's capacity is model_effective_capacity of its effective weight scale[j] * w_j; with
 * scale non-NULL a member is admitted when its load is 0 or below it, and a member at scale 0
 * admits nothing.  When nothing is admitted the least loaded member met relative to its weight
 * at a scale above 0 (first of equals) is returned, else the same among those met at scale 0,
 * with *saturated set; -1 when no member outside skip is up
 * (*owner is still the member of h's point, up or down, whenever s has points). */
long model_walk_health(const model_snap_t *s, uint64_t h, double c, uint64_t m,
                       const uint64_t *loads, const unsigned char *skip, const unsigned char *down,
                       const double *scale, long *owner, int *saturated);

/* Reported load (docs/design.md §3, "Reported load"): what the bound counts for a member with
 * `local` leases of this instance whose report of `reported` was made when it had
 * `local_at_report`: max(local, reported + local - local_at_report), the excess over local at
 * most 2^32 - 1 (the library's limit). */
uint64_t model_report_count(uint64_t local, uint64_t reported, uint64_t local_at_report);

/* Checks the model's hashes and placement against the reference values of docs/design.md §10.
 * Returns 0, or -1 with a message on stderr. */
int model_selftest(void);

#endif /* CHRING_TEST_MODEL_H */
