/* Structures behind chring's opaque handles and the chring__ functions shared across files.
 * SPDX-License-Identifier: MIT */
#ifndef CHRING_INTERNAL_H
#define CHRING_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <ck_pr.h>
#include <urcu-bp.h>

#include "chring.h"

/* ------------------------------------------------------------------------------------------ *
 * RCU publication, with the ThreadSanitizer recipe of shared/notes/sanitizers.md: under TSan the
 * publish and the dereference become C11 release/acquire atomics TSan understands, and the grace
 * period is modelled by releasing a token before each read-side unlock and acquiring it where a
 * grace period has ended (the top of each call_rcu callback, after synchronize_rcu).
 * ------------------------------------------------------------------------------------------ */
#if defined(__SANITIZE_THREAD__)
#define CHRING_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHRING_TSAN 1
#endif
#endif

#ifdef CHRING_TSAN
#include <sanitizer/tsan_interface.h>
extern char chring__tsan_grace_token;
#define CHRING_RCU_ASSIGN(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)
#define CHRING_RCU_DEREF(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#define CHRING_GRACE_READER_DONE() __tsan_release(&chring__tsan_grace_token)
#define CHRING_GRACE_ENDED() __tsan_acquire(&chring__tsan_grace_token)
#else
#define CHRING_RCU_ASSIGN(p, v) rcu_assign_pointer((p), (v))
#define CHRING_RCU_DEREF(p) rcu_dereference(p)
#define CHRING_GRACE_READER_DONE() ((void)0)
#define CHRING_GRACE_ENDED() ((void)0)
#endif

/* Plain atomic loads and stores of shared counters.  ck 0.7's ck_pr_load/ck_pr_store are volatile
 * accesses even with CK_USE_CC_BUILTINS, which TSan takes for plain ones racing with the
 * fetch-and-adds; under TSan use the C11 builtins (relaxed: these are counters and flags whose
 * ordering comes from the RMWs and the RCU publish).  On x86-64 both compile to the same mov. */
#ifdef CHRING_TSAN
#define CHRING_LOAD_64(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define CHRING_LOAD_32(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define CHRING_STORE_64(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define CHRING_STORE_32(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#else
#define CHRING_LOAD_64(p) ck_pr_load_64(p)
#define CHRING_LOAD_32(p) ck_pr_load_32(p)
#define CHRING_STORE_64(p, v) ck_pr_store_64((p), (v))
#define CHRING_STORE_32(p, v) ck_pr_store_32((p), (v))
#endif

#define CHRING_CACHELINE 64
/* Written-by-one-thread lines that others read or write sit this far apart: Intel's adjacent-line
 * prefetcher fetches 64-byte lines in 128-byte aligned pairs, so neighbours 64 bytes apart still
 * bounce between cores together. */
#define CHRING_DESTRUCTIVE 128
#define CHRING_LIKELY(x) __builtin_expect(!!(x), 1)
#define CHRING_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Validity words: set at creation, poisoned just before the memory is freed. */
#define CHRING_MEMBER_MAGIC UINT64_C(0x6368726d656d6272) /* "chrmembr" */
#define CHRING_SNAP_MAGIC UINT64_C(0x636872736e617073)   /* "chrsnaps" */
#define CHRING_POISON UINT64_C(0xdeadbeefdeadbeef)

/* A member's hot word: the low half counts leases (the member's load), the high half counts the
 * snapshots that list it.  Whoever brings the word to zero retires and frees the member. */
#define CHRING_LOAD_MASK UINT64_C(0xffffffff)
#define CHRING_SNAP_REF (UINT64_C(1) << 32)

struct chring_member {
    /* First cache line: written by every acquire and release on this member. */
    uint64_t word;       /* leases | snapshot references << 32 */
    uint64_t primary;    /* acquires that found their owner here */
    uint64_t spilled_in; /* acquires that spilled here from a full owner */
    char pad_[CHRING_CACHELINE - 3 * sizeof(uint64_t)];
    /* Second cache line on: immutable after creation except weight (writers only). */
    uint64_t magic;
    uint32_t weight;   /* current weight, stored by the writer at publish */
    uint32_t name_len; /* 1 .. CHRING_NAME_MAX */
    uint64_t join_seq; /* join order, for the fnv16 profile's collision rule */
    void *udata;
    void (*retire)(void *udata, void *ctx);
    void *retire_ctx;
    char name[]; /* name_len bytes and a NUL */
};

/* An immutable snapshot: members sorted by name, points sorted by (position, member index).
 * Positions are stored shifted to the top of 64 bits (pos << (64 - bits)) so that every profile
 * shares one search; chring_snap_point shifts them back. */
struct chring_snap {
    uint64_t magic;
    uint64_t refs; /* one for the published pointer (until its grace period ends) + holds */
    uint64_t version;
    struct rcu_head rcu;
    chring_t *ring;    /* whose spare-block cache takes this block when it is destroyed */
    size_t block_size; /* bytes of the allocation that holds this snapshot */

    chring_profile_t profile;
    unsigned bits;  /* 64, 32 or 16 */
    unsigned shift; /* 64 - bits */
    uint32_t vnodes;
    chring_hash_fn hash;
    void *hash_ctx;

    size_t nmembers;
    uint64_t total_weight;
    chring_member_t **members; /* sorted by name: member j has rank j */
    uint32_t *weights;         /* weight of members[j] in this snapshot */
    uint32_t *member_points;   /* points of members[j] in this snapshot */
    uint32_t *member_slot;     /* the slot of members[j] */

    /* Points name their member by slot.  A member keeps its slot from snapshot to snapshot, so a
     * publish copies the points of unchanged members verbatim; a free slot has no member. */
    size_t nslots;
    chring_member_t **slot_member; /* NULL for a free slot */
    uint32_t *slot_weight;
    uint32_t *slot_rank; /* the member's rank (index in members) */

    size_t npoints;
    uint64_t *pos;   /* sorted by (position, member name), shifted to 64 bits */
    uint32_t *owner; /* slot of each point's member */

    /* Prefix-bucket index: index[b] is the first point whose top index_bits bits are >= b, for
     * b in [0, 2^index_bits]; index[2^index_bits] == npoints. */
    unsigned index_bits;
    uint32_t *index;
};

/* One shard of the ring-wide lease accounting.  A thread acquires through the shard it was
 * given; a release decrements the shard its lease was acquired through (recorded in the lease),
 * so each shard's leases count is never negative and is bounded by what its threads hold. */
struct chring_shard {
    uint64_t leases;   /* outstanding leases acquired through this shard */
    uint64_t acquired; /* statistics */
    uint64_t spills;
    uint64_t saturated;
    char pad_[CHRING_DESTRUCTIVE - 4 * sizeof(uint64_t)];
};

struct chring {
    chring_snap_t *current; /* RCU-protected; written by writers under lock */
    char pad0_[CHRING_CACHELINE - sizeof(chring_snap_t *)];

    pthread_mutex_t lock; /* serialises writers; readers never touch it */
    chring_config_t cfg;
    double balance;     /* cfg.balance clamped to >= 1 */
    uint64_t publishes; /* written under lock, read atomically */
    uint64_t join_seq;  /* next join sequence number, under lock */
    chring_snap_t shape; /* the profile fields every snapshot of this ring copies */
    chring_snap_t *spare; /* a destroyed snapshot's block kept for the next publish (atomic) */
    unsigned shard_mask;
    struct chring_shard *shards; /* shard_mask + 1 shards, cache-line aligned */
};

/* alloc.c: every allocation of the library goes through these. */
void *chring__alloc(size_t size);
void *chring__calloc(size_t n, size_t size);
void chring__free(void *p);
void *chring__alloc_aligned(size_t size); /* CHRING_DESTRUCTIVE-aligned, freed with _free_aligned */
void chring__free_aligned(void *p);

/* hash.c / profile.c */
size_t chring__put_decimal(char *buf, uint32_t i); /* decimal digits of i, no NUL; returns count */
uint64_t chring__profile_hash(chring_profile_t profile, chring_hash_fn fn, void *ctx, unsigned bits,
                              const void *key, size_t len);
/* Points a member of this weight has under the profile before collision rules (ketama: depends
 * on the membership size and total weight; may be 0).  Callers check CHRING_POINTS_MAX. */
uint64_t chring__profile_points(const chring_snap_t *shape, uint32_t weight, size_t members,
                                uint64_t total_weight);
/* Writes the positions (in profile width, unshifted) of points [0, count) of a member. */
void chring__profile_positions(const chring_snap_t *shape, const char *name, size_t name_len,
                               uint32_t weight, size_t members, uint64_t total_weight,
                               uint64_t count, uint64_t *out);
double chring__clamp_balance(double c);

/* snapshot.c */
extern const chring_snap_t chring__empty_snap;
/* Builds the snapshot of this membership (members sorted by name).  shape: the ring's template
 * (profile fields; never a published snapshot, whose reference count other threads write);
 * prev: the current snapshot, whose points a mergeable profile reuses. */
chring_snap_t *chring__snap_build(const chring_snap_t *shape, const chring_snap_t *prev,
                                  chring_member_t *const *members, const uint32_t *weights,
                                  size_t nmembers, int *err);
void chring__snap_unref(chring_snap_t *s);
void chring__snap_drop_spare(chring_t *r);
void chring__member_unref_snap(chring_member_t *m);
void chring__member_destroy(chring_member_t *m);

/* The hot path's key hash: hash64 inlined (FNV-1a 64 then SplitMix64, byte order as the spec
 * says), the other profiles through their functions.  Returns the position shifted to 64 bits. */
static inline uint64_t chring__key_pos(const chring_snap_t *s, const void *key, size_t len)
{
    if (CHRING_LIKELY(s->profile == CHRING_PROFILE_HASH64)) {
        const unsigned char *p = key;
        uint64_t h = UINT64_C(14695981039346656037);
        for (size_t i = 0; i < len; i++) {
            h ^= p[i];
            h *= UINT64_C(1099511628211);
        }
        h ^= h >> 30;
        h *= UINT64_C(0xbf58476d1ce4e5b9);
        h ^= h >> 27;
        h *= UINT64_C(0x94d049bb133111eb);
        h ^= h >> 31;
        return h;
    }
    return chring__profile_hash(s->profile, s->hash, s->hash_ctx, s->bits, key, len) << s->shift;
}

/* lookup.c: index of the first point at or after the shifted position h64 (wrapping to 0).
 * pos[npoints] is a sentinel UINT64_MAX, so the scan needs no bound: every point of a later
 * bucket is above h64, and the sentinel is never below it.  The first two steps are branch-free
 * (a bucket holds about 0.5 points on average, so a loop's exit would be mispredicted often). */
static inline size_t chring__find(const chring_snap_t *s, uint64_t h64)
{
    size_t b = (size_t)(h64 >> (64 - s->index_bits));
    size_t i = s->index[b];
    const uint64_t *pos = s->pos;
    if (CHRING_UNLIKELY(s->index[b + 1] - i > 16)) {
        /* A crowded bucket (a coarse custom hash): binary search for the first pos >= h64. */
        size_t lo = i, hi = s->index[b + 1];
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (pos[mid] < h64)
                lo = mid + 1;
            else
                hi = mid;
        }
        i = lo;
    } else {
        i += pos[i] < h64;
        i += pos[i] < h64;
        while (pos[i] < h64)
            i++;
    }
    return i == s->npoints ? 0 : i;
}

/* load.c */
uint64_t chring__leases(chring_t *r);

#endif
