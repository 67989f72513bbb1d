/* chring: a consistent hash ring with virtual nodes and bounded loads.
 *
 * SPDX-License-Identifier: MIT
 *
 * One public header, in sections: version, errors, allocator, hashing, configuration, ring
 * lifecycle (writer side), snapshots and lookup (reader side), load accounting (leases),
 * statistics, diagnostics.
 *
 * Threads in one paragraph.  Writer functions (chring_add, chring_remove, chring_set_weight,
 * chring_update, chring_sync) may be called from any thread; they serialise among themselves on
 * a mutex that readers never touch, build a new immutable snapshot and publish it with one RCU
 * pointer swap.  Reader functions run between chring_snap_enter() and chring_snap_exit() on the
 * snapshot that was current when the section began: wait-free, no lock, no allocation, no
 * system call (after a thread's first read section, where liburcu's "bp" flavour registers the
 * thread by itself; the application never registers threads).  Pointers obtained inside a read
 * section (snapshots, members, names) are valid until the matching chring_snap_exit(); a lease
 * keeps its member valid until chring_release(); chring_snap_hold() keeps a snapshot (and its
 * members) valid until chring_snap_put().
 *
 * Ordering.  A writer call publishes its change before it returns: a read section that begins
 * after the call returns (on any thread that learnt of the return through some synchronisation,
 * or on the same thread) sees the change, and so does every later one.  A read section that
 * began before may still see the previous snapshot until it ends.  Writers are serialised, so
 * their changes are seen in the order their calls returned.  What a snapshot holds is its
 * membership, weights and points.  Everything else lives on the member objects and the ring
 * and is seen at once by every reader, also inside a read section that began before the change
 * and on a held snapshot: health (chring_set_down, chring_set_ramp, slow start), loads and
 * leases, reported loads (chring_report_load) and a flap's inherited leases.  A lookup or an
 * acquire that runs while such a change is made answers as before it or as after it; a walk
 * judges each member it meets once (a member met again answers as at its first meeting).
 *
 * Errors: functions that can fail return int: 0 (or a non-negative count) on success, a negative
 * errno value on failure, named by chring_strerror().  A failed writer call changes nothing and
 * invokes no callback.  A NULL handle or pointer is bad input: functions with an error channel
 * return -EINVAL, the others return NULL or 0 as each comment says; free/release/put/exit
 * functions accept NULL and do nothing.
 *
 * Callbacks.  config.retire and the load callback of chring_snap_lookup_bounded run on the
 * threads each comment names, must be thread-safe and short, and must not call into the ring
 * that invoked them.  A failed call never invokes a callback.
 *
 * fork().  A ring created before fork() keeps working in the parent and in the child with no
 * call from the application: the library registers pthread_atfork handlers at the first
 * chring_new that quiesce every ring's writer lock and reclaimer (chring_quiesce) and liburcu's
 * call_rcu worker and bp registry around the fork.  The child has only the forking thread:
 * leases other threads held stay counted there, and snapshots they held stay referenced (their
 * members are not retired by the child's chring_free).  An application that already calls
 * liburcu-bp's fork hooks itself (call_rcu_before_fork, urcu_bp_before_fork and their after-fork
 * partners) must call chring_atfork_urcu(0) once before its first fork, or it deadlocks: those
 * hooks must not run twice.
 *
 * Stability.  Everything in this header is the stable API except the section "Diagnostics and
 * test hooks" at the end (chring_snap_check, chring_member_check) and chring_set_allocator,
 * which exist for tests, fuzzers and torture programs and may change between releases.
 *
 * The design behind these rules: docs/design.md in the source tree.
 */
#ifndef CHRING_H
#define CHRING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define CHRING_API
#elif defined(__GNUC__) && __GNUC__ >= 4
#define CHRING_API __attribute__((visibility("default")))
#else
#define CHRING_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------------- */

#define CHRING_VERSION_MAJOR 0
#define CHRING_VERSION_MINOR 3
#define CHRING_VERSION_PATCH 0
#define CHRING_VERSION_NUMBER \
    (CHRING_VERSION_MAJOR * 10000 + CHRING_VERSION_MINOR * 100 + CHRING_VERSION_PATCH)

/* The library's version as "MAJOR.MINOR.PATCH" (static storage).  Any thread. */
CHRING_API const char *chring_version(void);
/* CHRING_VERSION_NUMBER of the library actually linked.  Any thread. */
CHRING_API unsigned chring_version_number(void);

/* ---------------------------------------------------------------------------------------------
 * Limits
 * ------------------------------------------------------------------------------------------- */

/* Longest member name in bytes (names are non-empty byte strings without NUL). */
#define CHRING_NAME_MAX 255
/* Most points one member may have (vnodes * weight, or the profile's own count). */
#define CHRING_POINTS_MAX (1u << 24)
/* Most points one ring may have in all. */
#define CHRING_RING_POINTS_MAX (1u << 31)
/* Default virtual nodes per unit of weight, and default balance factor c. */
#define CHRING_DEFAULT_VNODES 160u
#define CHRING_DEFAULT_BALANCE 1.25
/* Default admission scale a slow-starting member begins at (config.slow_start_from). */
#define CHRING_DEFAULT_SLOW_START_FROM 0.1
/* Defaults (and the upper limit) of the envoy profile's ring size bounds, as Envoy's. */
#define CHRING_DEFAULT_RING_SIZE_MIN 1024u
#define CHRING_DEFAULT_RING_SIZE_MAX 8388608u
/* Default lifetime of a reported load (config.report_ttl_ms), in milliseconds. */
#define CHRING_DEFAULT_REPORT_TTL_MS 1000u

/* ---------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------- */

/* A short English description of a negative errno value returned by this library ("success"
 * for 0, "unknown error" for values it never returns).  Returns static storage; any thread. */
CHRING_API const char *chring_strerror(int err);
/* The symbolic name of a negative errno value returned by this library, without the sign:
 * "EINVAL" for -EINVAL, "OK" for 0, "UNKNOWN" for values it never returns (libuv's
 * uv_err_name; the names and chring_strerror's texts come from one list).  Returns static
 * storage, never NULL; any thread. */
CHRING_API const char *chring_err_name(int err);

/* ---------------------------------------------------------------------------------------------
 * Allocator
 * ------------------------------------------------------------------------------------------- */

/* Memory functions the library uses for every allocation it makes (rings, snapshots, members,
 * scratch space of a publish).  alloc returns NULL on failure; free accepts NULL. */
typedef struct chring_allocator {
    void *(*alloc)(size_t size, void *ctx);
    void (*free)(void *ptr, void *ctx);
    void *ctx;
} chring_allocator_t;

/* Installs a process-wide allocator (a NULL argument restores malloc/free).  Call it while no
 * ring exists and no other thread uses the library: memory is always returned to the allocator
 * that gave it.  Returns 0, or -EINVAL if exactly one of alloc/free is NULL.  A test hook (fault
 * injection, memory accounting): not part of the stable API. */
CHRING_API int chring_set_allocator(const chring_allocator_t *allocator);

/* ---------------------------------------------------------------------------------------------
 * Hashing: pure functions, any thread
 * ------------------------------------------------------------------------------------------- */

/* FNV-1a 64: offset 14695981039346656037, prime 1099511628211.  data NULL hashes as the empty
 * input, whatever len (so data may be NULL when len is 0).  Pure; any thread. */
CHRING_API uint64_t chring_fnv1a64(const void *data, size_t len);
/* FNV-1a 32: offset 2166136261, prime 16777619.  data NULL hashes as the empty input.  Pure; any
 * thread. */
CHRING_API uint32_t chring_fnv1a32(const void *data, size_t len);
/* The SplitMix64 finalizer.  Pure; any thread. */
CHRING_API uint64_t chring_mix64(uint64_t z);
/* chring_mix64(chring_fnv1a64(data, len)): the default profile's hash.  data NULL hashes as the
 * empty input.  Pure; any thread. */
CHRING_API uint64_t chring_hash64(const void *data, size_t len);
/* MurmurHash3 x86 32-bit.  data NULL hashes as the empty input.  Pure; any thread. */
CHRING_API uint32_t chring_murmur3_32(const void *data, size_t len, uint32_t seed);
/* Writes "<name>#<i>" and a NUL into buf.  Returns the label's length (without the NUL),
 * -ENOSPC if cap is shorter than length + 1, -EINVAL if buf or name is NULL.  Any thread. */
CHRING_API int chring_vnode_label(char *buf, size_t cap, const char *name, uint32_t i);
/* The bounded-load capacity ceil(c * (total + 1) / n) in IEEE double; c below 1, NaN
 * or infinite acts as 1.  Returns 0 when n == 0.  Pure; any thread. */
CHRING_API uint64_t chring_capacity(uint64_t total, uint64_t n, double c);
/* The weighted capacity ceil(c * (total + 1) * weight / total_weight), evaluated left to right in
 * IEEE double; c as above.  Returns 0 when total_weight == 0.  Pure; any thread. */
CHRING_API uint64_t chring_capacity_weighted(uint64_t total, uint64_t weight, uint64_t total_weight,
                                             double c);

/* ---------------------------------------------------------------------------------------------
 * Configuration
 * ------------------------------------------------------------------------------------------- */

typedef enum {
    CHRING_PROFILE_HASH64 = 0, /* Mix64(FNV1a64), 64-bit, labels "<name>#<i>" */
    CHRING_PROFILE_MURMUR32,   /* MurmurHash3 x86 32, seed 0, 32-bit, labels "<name>#<i>" */
    CHRING_PROFILE_FNV32,      /* FNV-1a 32, 32-bit, labels "<name>#<i>" */
    CHRING_PROFILE_FNV16,      /* FNV1a32 & 0xffff, 16-bit, labels "<name>", "<i>-<name>";
                                  a taken position is skipped, earlier joiners keep it */
    CHRING_PROFILE_XXH3,       /* XXH3_64bits (libxxhash), 64-bit, labels "<name>#<i>" */
    CHRING_PROFILE_KETAMA,     /* libmemcached weighted ketama; vnodes ignored.  Point counts
                                  depend on the whole membership: changing one member's weight,
                                  or the member count, can move other members' keys */
    CHRING_PROFILE_NGINX,      /* nginx "hash $key consistent"; 160 * weight points; vnodes
                                  ignored; a member's points depend on its own weight only */
    CHRING_PROFILE_CUSTOM,     /* the caller's hash of hash_bits width, labels "<name>#<i>" */
    /* HAProxy 2.6 `hash-type consistent`; vnodes ignored, 32-bit.  Member names are HAProxy
     * server ids in decimal ("1", "2", ...: config order unless `id N`), anything else is
     * -EINVAL; weights 1..256 (above: -E2BIG), 16 * weight points.  The owner is the point
     * nearest the key's hash on either side, ties to the point before; n-replica and bounded
     * walks go on clockwise from it.  Key hash: avalanche(sdbm(key)).  For HAProxy's other key
     * hashes, compute h yourself and call chring_snap_lookup_hash, all modulo 2^32 on the key's
     * bytes b[0..n-1] taken unsigned:
     *   sdbm:  h = 0;          h = b + (h << 6) + (h << 16) - h
     *   djb2:  h = 5381;       h = (h << 5) + h + b
     *   wt6:   h0 = 0xa53c965a, h1 = 0x5ca6953a, s0 = 6, s1 = 18; per byte:
     *          h0 = ~(h0 ^ b); h1 = ~(h1 + b); t = rotl(h1, s0); h1 = rotl(h0, s1); h0 = t;
     *          t = ((h0 >> 16) ^ h1) & 0xffff; s0 = t & 31; s1 = t >> 11;  then h = h0 ^ h1
     *          (rotl(x, 0) is x; HAProxy's shift by 32 there is what x86 does: x)
     *   crc32: the standard CRC-32 (zlib's crc32)
     *   avalanche (HAProxy's full_hash, for the `avalanche` modifier):
     *          a = (a + 0x7ed55d16) + (a << 12); a = (a ^ 0xc761c23c) ^ (a >> 19);
     *          a = (a + 0x165667b1) + (a << 5);  a = (a + 0xd3a2646c) ^ (a << 9);
     *          a = (a + 0xfd7046c5) + (a << 3);  a = (a ^ 0xb55a4f09) ^ (a >> 16);
     *          h = a * 3221225473 */
    CHRING_PROFILE_HAPROXY,
    /* Envoy `ring_hash` with hash_function XX_HASH; vnodes ignored, 64-bit.  Member names are
     * Envoy's host keys (address "127.0.0.1:80", or the hostname / hash_key Envoy is told to
     * use), taken in name order; point i of a member is XXH64("<name>_<i>", seed 0); the point
     * counts come from the normalised weights and config.ring_size_min / ring_size_max by
     * running sums, so they depend on the whole membership.  Key hash: XXH64(key, seed 0). */
    CHRING_PROFILE_ENVOY,
    /* Varnish 7.1 `directors.shard()`; 32-bit; vnodes is its `replicas` (Varnish's default is
     * 67), vnodes * weight points per backend.  Member names are the backends' identities (the
     * VCL name unless `ident` is given); replica j sits at the little-endian u32 of the last 4
     * bytes of SHA-256(name followed by j in decimal).  Key hash: the same of the key bytes
     * (`by = URL`: the key is the URL).  A key above the highest point starts at the last point
     * (not the first), and on a ring of exactly two points every key starts at point 1, as
     * Varnish's shard_lookup() does; walks go on clockwise from there.  For `by = KEY` or
     * `by = BLOB`, pass Varnish's 32-bit key to chring_snap_lookup_hash. */
    CHRING_PROFILE_VARNISH
} chring_profile_t;

/* The number of profiles: every chring_profile_t value is below it. */
#define CHRING_PROFILE_COUNT (CHRING_PROFILE_VARNISH + 1)

/* A custom hash: returns a value of the configured width (higher bits are ignored).  Must be a
 * pure function, safe to call from any thread at once. */
typedef uint64_t (*chring_hash_fn)(const void *data, size_t len, void *ctx);

/* A ring's configuration, copied by chring_new().  Fill it with chring_config_default() first and
 * then set the fields you need: fields added in later versions get their defaults that way. */
typedef struct chring_config {
    chring_profile_t profile; /* default CHRING_PROFILE_HASH64 */
    uint32_t vnodes;          /* points per unit of weight, >= 1; default 160; ignored (0
                                 allowed) by ketama, nginx, haproxy and envoy, which fix their
                                 point counts */
    double balance;           /* c for chring_acquire; default 1.25; < 1, NaN, inf act as 1 */
    chring_hash_fn hash;      /* CHRING_PROFILE_CUSTOM only; ignored otherwise */
    void *hash_ctx;           /* passed to hash; ignored unless CHRING_PROFILE_CUSTOM */
    unsigned hash_bits;       /* CHRING_PROFILE_CUSTOM only: 64, 32 or 16; ignored otherwise */
    /* Optional: hands a udata back to the application, with retire_ctx.  Every non-NULL udata
     * passed to chring_add, chring_update or chring_sync in a call that returns 0 comes back
     * exactly once: when the member that keeps it is retired (removed and no longer reachable
     * by a reader, a lease or a held snapshot, nor kept by a snapshot held from before it
     * joined, docs/design.md §4, "References"; or at chring_free), or, for a udata the call did
     * not keep (its change named a member that exists already; that member keeps its own
     * udata), before the call returns.  A call that fails keeps none and hands none back.
     * Threads: the ring's reclaimer thread (liburcu's call_rcu thread when it has none:
     * chring_quiesce); a thread inside chring_release, chring_snap_put, chring_quiesce or
     * chring_free; a writer call, after its lock is released, for udata it did not keep.  It
     * must be thread-safe and short, and must not call into the ring whose member it retires.
     * A member added with a NULL udata is retired with a call of retire(NULL) too, so the
     * callback also counts members. */
    void (*retire)(void *udata, void *ctx);
    void *retire_ctx;
    /* Slow start: with slow_start_ms > 0, a member that joins a ring that has members already (by
     * add, update or sync) starts at admission scale slow_start_from and ramps linearly to 1 over
     * slow_start_ms (see chring_set_ramp); the first population of an empty ring does not ramp.
     * So a ring populated by several chring_add calls ramps every member but the first: populate
     * it in one call instead, chring_sync(r, members, n) or chring_update(r, changes, n), and
     * only later joiners warm up.
     * Default 0 (off) and CHRING_DEFAULT_SLOW_START_FROM; slow_start_from outside [0, 1] or NaN
     * is -EINVAL from chring_new when slow_start_ms > 0. */
    uint32_t slow_start_ms;
    double slow_start_from;
    /* CHRING_PROFILE_ENVOY only (ignored otherwise): Envoy's minimum_ring_size and
     * maximum_ring_size, default CHRING_DEFAULT_RING_SIZE_MIN and CHRING_DEFAULT_RING_SIZE_MAX;
     * 1 <= ring_size_min <= ring_size_max <= CHRING_DEFAULT_RING_SIZE_MAX, else chring_new
     * returns -EINVAL. */
    uint32_t ring_size_min;
    uint32_t ring_size_max;
    /* Reported load (chring_report_load, 0.4): how long a member's report counts, in
     * milliseconds of CLOCK_MONOTONIC from the call.  Default 1000; 0: reports are ignored (the
     * bound counts this instance's leases only, as before 0.4). */
    uint32_t report_ttl_ms;
    /* A floor under the bound at low concurrency (0.4; docs/design.md §3, "The floor"): every
     * member admits at least ceil(min_capacity * e) leases, e = s * w its effective weight,
     * whatever m, so while few requests are in flight keys stay on their owners (the bound alone
     * sends a key past its owner as soon as the owner holds ceil(c * (m + 1) * e / E): 1 or 2
     * with 16 members and 8 in flight).  The capacities only grow, so the walk still ends on a
     * member below its capacity; a member holds at most the larger of the bound and its floor.
     * Default 0 (off: the bound alone). */
    uint32_t min_capacity;
} chring_config_t;

/* Fills *cfg with the defaults (hash64, 160 vnodes, balance 1.25, no retire, no slow start,
 * envoy ring sizes 1024 and 8388608, reports counted for 1000 ms).  cfg NULL: does nothing.
 * Any thread. */
CHRING_API void chring_config_default(chring_config_t *cfg);

/* The profile's name ("hash64", "murmur32", ...; static storage), or NULL for an unknown value.
 * Any thread. */
CHRING_API const char *chring_profile_name(chring_profile_t profile);
/* Parses a profile name as chring_profile_name() writes it.  Returns 0 and sets *out, or
 * -EINVAL for NULL arguments or an unknown name (*out untouched).  Any thread. */
CHRING_API int chring_profile_parse(const char *name, chring_profile_t *out);

/* Per-profile facts, from the library's one table of profiles (the tool, chring-lb, the nginx
 * module and the generated docs query it instead of keeping their own copies). */
typedef struct chring_profile_info {
    const char *name;        /* as chring_profile_name */
    unsigned hash_bits;      /* the ring's width: 64, 32 or 16; 0 for custom (config.hash_bits) */
    int uses_vnodes;         /* 1: config.vnodes sets the points per unit of weight (>= 1);
                                0: the profile fixes its point counts and ignores vnodes (0 allowed) */
    int names_are_ids;       /* 1: member names must be decimal server ids (haproxy) */
    int nearest;             /* 1: the owner is the nearest point on either side (haproxy); 0: the
                                first point at or after the key's hash */
    int join_order;          /* 1: contested positions go to the earlier joiner (fnv16) */
    int counts_need_ring;    /* 1: a member's point count depends on the whole membership (ketama,
                                envoy): a change can move other members' keys */
    uint32_t default_vnodes; /* CHRING_DEFAULT_VNODES where uses_vnodes, else 0 */
    uint32_t max_weight;     /* the largest weight the profile takes (haproxy: 256); 0: no limit of
                                its own (CHRING_POINTS_MAX still bounds vnodes * weight) */
} chring_profile_info_t;

/* Fills *out with the facts of profile.  Returns 0, or -EINVAL for an unknown profile or NULL out
 * (*out untouched).  Any thread; the strings are static.  The struct grows by appending fields, at
 * a new 0.MINOR (docs/abi.md). */
CHRING_API int chring_profile_info(chring_profile_t profile, chring_profile_info_t *out);

/* ---------------------------------------------------------------------------------------------
 * Ring lifecycle and membership: writer side
 * ------------------------------------------------------------------------------------------- */

typedef struct chring chring_t;
typedef struct chring_snap chring_snap_t;
typedef struct chring_member chring_member_t;

/* Creates an empty ring (version 0).  cfg NULL means the defaults; cfg is copied.
 * Returns 0 and sets *out; -EINVAL for a NULL out, an unknown profile, vnodes 0 (except for
 * ketama, nginx, haproxy and envoy, which ignore vnodes), envoy ring sizes out of range, a custom
 * profile without a hash function or with hash_bits other than 64/32/16; -ENOMEM.
 * Any thread.  The caller owns the ring and frees it with chring_free(). */
CHRING_API int chring_new(chring_t **out, const chring_config_t *cfg);

/* Frees the ring: unpublishes the current snapshot, waits for a grace period, for the ring's
 * reclaimer thread to end and for every pending RCU callback of the library, and retires
 * (config.retire) every member that is still in the ring and no longer referenced.  The caller
 * first releases every lease and puts every held snapshot of this ring; no other thread may use
 * the ring any more.  Must not be called inside a read section.  NULL-safe (r or *r NULL); sets
 * *r to NULL. */
CHRING_API void chring_free(chring_t **r);

/* Frees the spare blocks the ring keeps for its next publishes, now.  What a ring holds: its
 * current snapshot (a position a point, 8 bytes, 4 for the profiles of 32 bits or fewer, and
 * its owner's slot, 2 bytes up to 65,536 slots, 3 up to 2^24, else 4; the index 8 bytes a point
 * more, 1.6 with more than 65,535 members or the haproxy and varnish profiles past 2^19 points;
 * 36 bytes a member; a chunked ring, the default profile past 2^22 points with more than 65,535
 * members, holds its points in chunks shared between snapshots, about 16 bytes a point with
 * their own index, docs/design.md §4.2) and its members (a 128-byte
 * slot each for a name of up to 13 bytes, else 114 bytes and the name on a cache line; 112 more
 * for one that ramps, reports or flaps), plus, for a while, spare blocks of replaced snapshots
 * (a large ring's build makes up to five ready for a burst, chring_set_prefault; a burst of
 * back-to-back changes leaves one while a core is free, up to six when readers keep every core
 * busy) and the blocks of replaced snapshots until their grace period ends (the ring's reclaimer
 * gives them up then: chring_quiesce) or their holders put them (docs/design.md §4, "At rest",
 * "What a member costs").  Without this call a spare that no publish took for 200 ms is freed by
 * a thread of the ring's own (the environment variable CHRING_SPARE_IDLE_MS sets the time, 0
 * keeps the spares), so a second after its last publish a ring holds its snapshot and members alone
 * (docs/design.md §4, "At rest"), or those and the spares chring_set_spares_at_rest keeps.  With
 * the default allocator a block of 8 MB or more is mapped by the library and unmapped when
 * freed, so the process's resident memory comes down with it (CHRING_MAP_BLOCKS=0 in the
 * environment leaves blocks to malloc, which may keep them resident).  After this call the next
 * publish allocates its snapshot afresh, paying the page faults the spares save.  Returns 0;
 * -EINVAL for r NULL.  Any thread, also inside a read section (it waits only for the ring's
 * trimmer, if one runs, to stop) and concurrently with a publish (a block a publish is about to
 * reuse stays out of reach). */
CHRING_API int chring_trim(chring_t *r);

/* Waits until every snapshot r replaced before the call has been given up by the ring: its grace
 * period has ended and its published reference is dropped, so a replaced snapshot nobody holds
 * is destroyed (its block in the spare cache, the members only it kept retired) when this
 * returns; a held one stays until it is put.  The ring's reclaimer thread does the same on its
 * own 0.1-0.2 ms after a publish when a core is free, 10 ms when every core is busy in read
 * sections (docs/design.md §4, "Reclamation"): this call is for a program that must know, a test
 * or a measurement of memory.  With CHRING_RECLAIM_THREAD=0 in the environment (or when no
 * thread can be started) replaced snapshots go to liburcu's call_rcu, and this call waits for
 * its callbacks too.  Returns 0; -EINVAL for r NULL.  Any thread but not inside a read section
 * (it waits for a grace period) nor inside config.retire; concurrently with publishes and other
 * calls; it does not take the writer lock.  (0.4) */
CHRING_API int chring_quiesce(chring_t *r);

/* How many spare blocks the ring keeps at rest: the ring's trimmer, which frees the spares no
 * publish took for 200 ms, leaves n of those that fit the size of the last publish (the ones that
 * came last first).  0, the default, frees them all: a ring at rest holds its snapshot and
 * members alone.  n = 1 keeps one block the size of the ring's snapshot, its pages already
 * faulted in, so that a change after a quiet while copies into it instead of zeroing a fresh
 * block (at 16 M points on a VM up to 0.65 s against 40 ms: docs/design.md §4, "Spares kept at
 * rest").  The cost is that block, held while the ring lives: about as much memory again as
 * the snapshot.  A smaller n than before takes effect when the ring's trimmer next runs (200 ms
 * after this call, or after the next publish).  chring_trim still frees every spare, kept or
 * not, and chring_free frees them with the ring.  With CHRING_SPARE_IDLE_MS=0 (no trimmer) n
 * changes nothing.  Returns 0; -EINVAL for r NULL or n above 6 (the spares a ring can hold).
 * Owns nothing.  Writer side: any thread, also inside a read section; it takes the ring's
 * writer lock (held for a few loads and stores), so it waits for a publish that runs. */
CHRING_API int chring_set_spares_at_rest(chring_t *r, unsigned n);

/* How many spare blocks a publish that allocates a fresh large snapshot block (8 MB or more:
 * about 400,000 points) makes ready for the publishes that follow it: a ring's build, or the
 * first publish after the ring doubled or halved.  Each is a block of the new snapshot's size,
 * every page written once at the end of that publish, so that a burst of changes right after it
 * does not pay the kernel's page faults for fresh blocks while the blocks of the snapshots it
 * replaced wait for their grace period (docs/design.md §4, "Spare blocks").  The default
 * suits a ring that is built and then changed in bursts: five, fewer for blocks over 76 MB
 * (about 3.6 M points), down to two from 192 MB (about 9 M points), whose slower publishes
 * find the blocks they replaced back sooner.  0 makes none: for a ring built once and then only
 * read (the nginx module), or a program that must keep its peak memory low, at the price of
 * page faults in the first publishes of a burst after the build; the ring's trimmer frees the
 * spares 200 ms after the publish that made them anyway.  The count takes effect from the next
 * publish; spares made already stay until the trimmer or chring_trim frees them.  Returns 0;
 * -EINVAL for r NULL or n above 5 (one spare slot stays free for a replaced snapshot's block).
 * Owns nothing.  Writer side: any thread, also inside a read section; it takes the ring's
 * writer lock, so it waits for a publish that runs. */
CHRING_API int chring_set_prefault(chring_t *r, unsigned n);

/* Adds a member of the given weight (>= 1).  A member of that name with the same weight: no
 * change, returns 0; with another weight: as chring_set_weight().  An existing member's udata is
 * never replaced: the udata passed for it is handed back to config.retire before the call
 * returns 0 (unless it is the member's own).  Returns 0 or a negative errno: -EINVAL (NULL ring
 * or name, empty name, weight 0), -ENAMETOOLONG (name above CHRING_NAME_MAX bytes), -E2BIG (the
 * member's points above CHRING_POINTS_MAX or the ring's above CHRING_RING_POINTS_MAX), -ENOMEM.
 * On failure nothing changes.  Writer side: any thread, also inside a read section (writers
 * never wait for a grace period).  udata stays the caller's: the ring hands it to config.retire
 * when the member is retired. */
CHRING_API int chring_add(chring_t *r, const char *name, uint32_t weight, void *udata);

/* Removes a member.  Returns 0, -ENOENT for a non-member (nothing changes), -EINVAL (NULL r or
 * name, empty name), -ENAMETOOLONG, -ENOMEM.  The member object stays valid for current readers, leases and held
 * snapshots; it is retired once all of them are done with it.  Writer side, any thread. */
CHRING_API int chring_remove(chring_t *r, const char *name);

/* Changes a member's weight (>= 1); the same weight publishes nothing.  Returns 0, -ENOENT for a
 * non-member, -EINVAL (weight 0, NULL r or name, empty name), -ENAMETOOLONG, -E2BIG, -ENOMEM.
 * Writer side, any thread. */
CHRING_API int chring_set_weight(chring_t *r, const char *name, uint32_t weight);

/* One change of a batch: weight >= 1 adds the member (or changes its weight); weight 0 removes it.
 * udata is kept only when the member is new; otherwise a successful call hands it back to
 * config.retire before it returns (unless it is the member's own udata). */
typedef struct chring_change {
    const char *name;
    uint32_t weight;
    void *udata;
} chring_change_t;

/* Applies a batch of changes, all or nothing, with at most one publish.  Returns 0 or a negative
 * errno: -EINVAL (NULL ring, NULL changes with n > 0, a bad name, the same name twice),
 * -ENAMETOOLONG, -ENOENT (weight 0 for a non-member), -E2BIG, -ENOMEM.  n == 0 or a batch that
 * changes nothing publishes nothing.  Writer side. */
CHRING_API int chring_update(chring_t *r, const chring_change_t *changes, size_t n);

/* Makes the membership exactly this set (a discovery feed), with at most one publish: absent
 * members are removed, new ones added, weights set; members already present keep their object,
 * counters and udata.  Returns 0 or a negative errno: -EINVAL (weight 0, a bad name, the same
 * name twice, NULL members with n > 0), -ENAMETOOLONG, -E2BIG, -ENOMEM.  n == 0 empties the ring.
 * Writer side. */
CHRING_API int chring_sync(chring_t *r, const chring_change_t *members, size_t n);

/* The number of members of the current snapshot (0 for NULL).  Any thread; wait-free. */
CHRING_API size_t chring_len(chring_t *r);

/* ---------------------------------------------------------------------------------------------
 * Snapshots and lookup: reader side
 * ------------------------------------------------------------------------------------------- */

/* Begins a read section and returns the current snapshot, valid until chring_snap_exit().
 * Never NULL: for r NULL, a static empty snapshot (and no read section).  Sections may nest.
 * The snapshot is the one the last writer call that returned before this one published (see
 * "Ordering" at the top).  Wait-free; any thread, no registration needed. */
CHRING_API const chring_snap_t *chring_snap_enter(chring_t *r);
/* Ends the read section begun by the matching chring_snap_enter(r).  r NULL: no-op.  s is
 * reserved (ignored): pass the snapshot chring_snap_enter returned.  On the thread that called
 * that chring_snap_enter (a read section belongs to its thread); wait-free. */
CHRING_API void chring_snap_exit(chring_t *r, const chring_snap_t *s);

/* The owner of key (len bytes; len 0 is a valid key, key may then be NULL).  Returns NULL on an
 * empty snapshot or for s NULL or key NULL with len > 0.  Reader side: inside a read section
 * (or on a held snapshot); wait-free. */
CHRING_API const chring_member_t *chring_snap_lookup(const chring_snap_t *s, const void *key,
                                                     size_t len);
/* The profile's hash of key, in the profile's width (a 32-bit profile returns a value below
 * 2^32).  Returns 0 for s NULL or key NULL with len > 0.  Reader side. */
CHRING_API uint64_t chring_snap_hash(const chring_snap_t *s, const void *key, size_t len);
/* The owner of a key whose hash is h = chring_snap_hash(s, key) (bits above the profile's width
 * are ignored).  Returns NULL on an empty snapshot or for s NULL.  Reader side; wait-free. */
CHRING_API const chring_member_t *chring_snap_lookup_hash(const chring_snap_t *s, uint64_t h);

/* Batch lookups: the owners of n keys at once, owners[i] exactly what
 * chring_snap_lookup(s, keys[i], lens[i]) would return (NULL for keys[i] NULL with lens[i] > 0),
 * members down included.  The keys' cache misses overlap instead of coming one after the other
 * (docs/design.md §4, "Batches"): from about 8 keys a batch costs a fraction of n single lookups
 * on a ring that has left the caches.  Any n; owners holds n entries, written in order.  Returns
 * n (every owners[i] NULL on an empty snapshot), or 0 with nothing written for s, keys, lens or
 * owners NULL.  The members are valid as chring_snap_lookup's are.  Reader side: inside a read
 * section (or on a held snapshot); wait-free, no allocation. */
CHRING_API size_t chring_snap_lookup_many(const chring_snap_t *s, const void *const *keys,
                                          const size_t *lens, size_t n,
                                          const chring_member_t **owners);
/* chring_snap_lookup_many for keys hashed already: owners[i] exactly what
 * chring_snap_lookup_hash(s, hashes[i]) would return.  Returns n, or 0 with nothing written for
 * s, hashes or owners NULL.  Reader side; wait-free, no allocation. */
CHRING_API size_t chring_snap_lookup_hashes(const chring_snap_t *s, const uint64_t *hashes,
                                            size_t n, const chring_member_t **owners);

/* A caller-supplied load: the number of requests the caller has placed on member m.  Called on the
 * lookup's thread, inside its read section; must not call back into the ring. */
typedef uint64_t (*chring_load_fn)(const chring_member_t *m, void *ctx);

/* Bounded-load lookup with caller-supplied loads: m is the sum of load() over the snapshot's
 * members; the walk goes clockwise from the key's owner and returns the first member whose load
 * is below its (weighted) capacity for factor c (< 1, NaN, inf act as 1).  If no member met is
 * below its capacity (only loads that do not sum as reported can do that), returns the least
 * loaded member met, the first of equals.  load is called with ctx.  Returns NULL on an empty
 * snapshot or NULL s/load.  Reader side. */
CHRING_API const chring_member_t *chring_snap_lookup_bounded(const chring_snap_t *s,
                                                             const void *key, size_t len, double c,
                                                             chring_load_fn load, void *ctx);

/* Writes up to n distinct members met walking clockwise from the key's owner (the owner first)
 * into out.  Returns how many were written: min(n, members that have points) -- a member left
 * without points (fnv16 skips, a tiny ketama share) is never met -- and 0 on an empty snapshot or
 * for NULL s/out.  Reader side; wait-free. */
CHRING_API size_t chring_snap_lookup_n(const chring_snap_t *s, const void *key, size_t len,
                                       const chring_member_t **out, size_t n);

/* The snapshot's version: 0 for a new ring, +1 per publish.  0 for NULL.  Reader side. */
CHRING_API uint64_t chring_snap_version(const chring_snap_t *s);
/* Members in the snapshot (0 for NULL).  Reader side. */
CHRING_API size_t chring_snap_len(const chring_snap_t *s);
/* Points in the snapshot (0 for NULL).  Reader side. */
CHRING_API size_t chring_snap_points(const chring_snap_t *s);
/* Member i, members sorted by name (memcmp order, shorter first on a common prefix).  NULL past
 * the end or for NULL s.  Reader side. */
CHRING_API const chring_member_t *chring_snap_member(const chring_snap_t *s, size_t i);
/* The member of that name in this snapshot, or NULL (also for s or name NULL, or a name that is
 * empty or longer than CHRING_NAME_MAX).  Reader side. */
CHRING_API const chring_member_t *chring_snap_find(const chring_snap_t *s, const char *name);
/* The snapshot's profile and hash width in bits (64, 32 or 16).  For s NULL: CHRING_PROFILE_HASH64
 * (the default profile) and 0 bits.  Reader side. */
CHRING_API chring_profile_t chring_snap_profile(const chring_snap_t *s);
CHRING_API unsigned chring_snap_hash_bits(const chring_snap_t *s);
/* The weight member m has in this snapshot (its current weight may be newer), or 0 if m is not
 * in s (or s or m is NULL).  Reader side. */
CHRING_API uint32_t chring_snap_weight(const chring_snap_t *s, const chring_member_t *m);
/* The number of points member m has in this snapshot (0 if it is not in s, or s or m is NULL).
 * Reader side. */
CHRING_API size_t chring_snap_member_points(const chring_snap_t *s, const chring_member_t *m);

/* Takes a reference on the current snapshot, valid outside read sections until
 * chring_snap_put(r, s).  Returns the static empty snapshot for r NULL; never NULL.
 * Any thread; lock-free (one atomic increment). */
CHRING_API const chring_snap_t *chring_snap_hold(chring_t *r);
/* Drops a reference taken by chring_snap_hold(r); the last one frees the snapshot (and may retire
 * members), on this thread.  NULL-safe.  Misuse guard: a put of a snapshot that was not held,
 * which would free the snapshot r still publishes, is ignored (nothing changes); pass the ring the
 * snapshot was held from (with r NULL the guard is off).  The guard covers the current snapshot
 * only: an extra put of a replaced snapshot still waiting for its grace period is undefined. */
CHRING_API void chring_snap_put(chring_t *r, const chring_snap_t *s);

/* The fraction of the key space whose owner (compared by name, by the profile's own rule: the
 * nearest point for haproxy, the top arc to the last point for varnish) differs between a and b,
 * two snapshots of the same ring: exact up to double rounding, the summed lengths of
 * chring_snap_diff's arcs over 2^bits.  0 when both are empty; 1 when exactly one is empty; NaN
 * when the profiles (or NULL) differ.  Reader side, O(points of a + b). */
CHRING_API double chring_snap_moved(const chring_snap_t *a, const chring_snap_t *b);

/* A 64-bit digest of s's placement alone: the profile and the parameters it uses and every point
 * (position, member name) in ring order.  Snapshots with the same points have the same digest
 * whatever order their membership was built in, in any process, on any machine (the encoding is
 * fixed: docs/design.md §3); snapshots that place some key differently have different digests
 * but for a 2^-64 chance.  It digests the points, not only the map from keys to owners: a change
 * that moves points but no key (the weight of a ring's only member) changes it too.  Health,
 * loads, udata and versions do not enter it: a fleet compares its instances' digests to learn
 * whether they agree.  0 for NULL.  Reader side (or a held snapshot); O(points), no
 * allocation. */
CHRING_API uint64_t chring_snap_digest(const chring_snap_t *s);

/* Calls fn once for each maximal arc of hash positions [from, to] (inclusive, in the unshifted
 * hash space of chring_snap_lookup_hash, 0 .. 2^bits - 1) whose owner differs between a and b,
 * with the owner in each (was in a, now in b; NULL in an empty snapshot), compared by name.
 * Arcs come in ring order, from position 0 up; an arc that wraps past the top is reported as
 * two.  A maximal arc has one (was, now) pair: neighbouring positions that moved between other
 * owners are another arc.  Owners by each profile's own rule (haproxy: the nearest point;
 * varnish: its top-arc and two-point rules), ignoring health, as chring_snap_moved and
 * chring_member_share measure them: the arcs' lengths summed, over 2^bits, are
 * chring_snap_moved(a, b).  fn returning non-zero stops the walk and
 * its value is returned.  Returns 0, or -EINVAL for NULL a, b or fn or snapshots of different
 * profiles or widths.  The members passed to fn are valid while a and b are.  Reader side (or
 * held snapshots); O(points of a + points of b), no allocation; fn must not call into the ring
 * but may read a and b. */
CHRING_API int chring_snap_diff(const chring_snap_t *a, const chring_snap_t *b,
                                int (*fn)(uint64_t from, uint64_t to, const chring_member_t *was,
                                          const chring_member_t *now, void *ctx),
                                void *ctx);

/* Point i in ring order: its position in the profile's width and its member.  pos and m may be
 * NULL (that part is not written).  Returns 0, -ERANGE past the end, -EINVAL for NULL s.  Reader
 * side. */
CHRING_API int chring_snap_point(const chring_snap_t *s, size_t i, uint64_t *pos,
                                 const chring_member_t **m);

/* Member accessors: while m is valid, that is inside a read section that found it, on a held
 * snapshot that lists it, or with a lease on it (reader side, or any thread holding the lease).
 * The name is NUL-terminated and lives as long as the member; NULL for m NULL.  The udata is the
 * one the member was added with; NULL for m NULL. */
CHRING_API const char *chring_member_name(const chring_member_t *m);
CHRING_API void *chring_member_udata(const chring_member_t *m);
/* The member's current weight (may be newer than a snapshot's); 0 for NULL.  Reader side, or with
 * a lease on m. */
CHRING_API uint32_t chring_member_weight(const chring_member_t *m);
/* Outstanding leases of this instance on the member (its load, the "local" count; what the
 * bound counts for it is chring_member_stats' counted, which a report raises); 0 for NULL.  One
 * atomic load.  Reader side, or with a lease on m. */
CHRING_API uint64_t chring_member_load(const chring_member_t *m);
/* The member's arc share in s: the fraction of the ring's 2^bits positions whose keys it owns
 * (by the profile's own rule: the nearest point for haproxy, the top arc to the last point for
 * varnish; health ignored).
 * 0 if m is not in s (or s or m is NULL).  Reader side, O(points of s). */
CHRING_API double chring_member_share(const chring_snap_t *s, const chring_member_t *m);

/* One lookup in its own read section, the owner's name copied out with a NUL.  Returns the name's
 * length, -ENOENT on an empty ring, -ENOSPC if cap < length + 1, -EINVAL for NULL r/buf or a NULL
 * key with len > 0.  Any thread. */
CHRING_API int chring_lookup_name(chring_t *r, const void *key, size_t len, char *buf, size_t cap);

/* ---------------------------------------------------------------------------------------------
 * Bounded loads with built-in counters
 * ------------------------------------------------------------------------------------------- */

/* How an acquire placed its key (chring_lease_t.outcome). */
#define CHRING_OUTCOME_NONE 0u      /* a cleared lease (no acquire, or released) */
#define CHRING_OUTCOME_OWNER 1u     /* on the key's owner (or the member the caller chose:
                                       chring_acquire_member, chring_acquire_try) */
#define CHRING_OUTCOME_SPILLED 2u   /* on another member: a member before it was full (the owner,
                                       or the members up after a down owner) or skipped */
#define CHRING_OUTCOME_SATURATED 3u /* every member met looked full (only races do that): the
                                       least loaded one relative to its weight */
#define CHRING_OUTCOME_OWNER_DOWN 4u /* (0.4) the key's owner was down and the key is on the
                                        first member up after it, where a lookup sends it: not a
                                        spill for load (counted in stats.owner_down and the
                                        member's down_in, not in spills and spilled_in) */

/* A lease: the member a key was placed on and how (outcome, one of CHRING_OUTCOME_*).  Treat it
 * as opaque apart from .member and .outcome (reserved_ is the library's).
 * Moves.  A lease may be moved: a bitwise copy (assignment, memcpy) whose original is never
 * released afterwards is the lease, and is released in its place (a proxy keeps the lease in its
 * request object and moves it on retry).  Releasing the same object twice is a no-op (the first
 * release clears it); releasing two copies of one lease is undefined (the misuse guard of
 * chring_release catches it only while the member has no other lease).
 * Layout: 24 bytes on LP64 (member, reserved_, outcome and 4 bytes of padding); it grew by
 * outcome in 0.3 (docs/abi.md). */
typedef struct chring_lease {
    chring_member_t *member;
    uint64_t reserved_;
    uint32_t outcome;
} chring_lease_t;

/* Places key on the current snapshot with bounded loads (factor config.balance) and increments
 * the chosen member's load.  The bound holds at admission: against the n and W of the snapshot
 * the acquire used and the m it read then.  Leases admitted under an older snapshot stay where
 * they are, so after a join or a re-weight a member can stay above the new snapshot's capacity
 * for as long as those leases live; new acquires are not admitted to it meanwhile.  Admission is
 * strict: a member is chosen only when this thread saw its load below the capacity it computed;
 * if every member looks full through races, the key goes to the least loaded member seen and a
 * saturation event is counted.  Returns 0 and fills *lease, -ENOENT on an empty ring (lease
 * cleared), -EINVAL for NULL r/lease or NULL key with len > 0.  Any thread; lock-free, no
 * allocation.  The lease keeps its member valid until released.  Capacities count every member of
 * the snapshot that is up in n and W, also one left without points (an fnv16 member whose every
 * position was taken, a ketama member of tiny weight share): such a member is never reached, so
 * the bound can become unreachable and saturation events are counted even without races.
 * Effective weights (docs/design.md §3): a member's admission scale s (chring_set_ramp, slow
 * start) scales its weight in W too: with e_j = s_j * w_j over the members that are up and E
 * their sum, member j's capacity is ceil(c * (m + 1) * e_j / E), so the capacities add up to at
 * least c * (m + 1) > m while members warm up or drain, and a single-threaded acquire never
 * saturates.  E is at most about 1 ms old while a ramp runs (no per-acquire sum over the
 * members); with no ramp running the integer weights are used as they are.  A member removed
 * while it ramps still counts at its scale on a held snapshot that lists it.  A member at scale 0
 * admits nothing; the saturation fallback (races only) takes the least loaded member relative to
 * its weight (load / w), one at scale 0 only when no other member is met.  lease->outcome says
 * whether the key went to its owner, spilled or saturated. */
CHRING_API int chring_acquire(chring_t *r, const void *key, size_t len, chring_lease_t *lease);

/* Takes a lease on a member the caller chose (a sticky session, a pinned backend), without the
 * capacity check (a retry that must keep the bound uses chring_acquire_skip): m's load and the
 * ring's outstanding leases grow by one, counted as an acquire with m as primary.  m must be a
 * member of s, which must be the snapshot of the caller's read section or a held snapshot of r.
 * Returns 0 and fills *lease, -ENOENT if m is not in s, -EINVAL for NULL arguments (the lease is
 * cleared on failure).  Reader side; lock-free, no allocation. */
CHRING_API int chring_acquire_member(chring_t *r, const chring_snap_t *s, const chring_member_t *m,
                                     chring_lease_t *lease);

/* Retries that keep the bound: as chring_acquire, but the walk passes over the nskip members of
 * skip (a backend that just failed, replicas already tried) as if they were full; the bound holds
 * for the member chosen.  Members are compared by identity; a pointer to a member no longer in the
 * snapshot is allowed and matches nothing while that member is still valid (a lease or a held
 * snapshot keeps it).  A pointer kept past that (the lease released, the member removed and
 * retired) may be the address of a new member's object and then skips that member: a retry that
 * releases its lease before it retries skips by chring_member_id with chring_acquire_skip_ids
 * instead.  Counted in chring_stats_t.retries, and as a spill
 * when the chosen member is not the key's owner.  Returns 0 and fills *lease; -ENOENT when no
 * member outside skip exists (the lease is cleared); -EINVAL for NULL r/lease, a NULL key with
 * len > 0, or a NULL skip with nskip > 0.  Any thread; lock-free, no allocation; O(nskip) per
 * member met. */
CHRING_API int chring_acquire_skip(chring_t *r, const void *key, size_t len,
                                   const chring_member_t *const *skip, size_t nskip,
                                   chring_lease_t *lease);

/* chring_acquire_skip and chring_acquire_hash_skip comparing members by chring_member_id: an id
 * names one member object of the ring for ever (never reused, also after the member is retired),
 * so a skip list kept after its leases were released matches no other member.  Same walk, bound,
 * outcome, statistics and errors as chring_acquire_skip (skip_ids NULL with nskip > 0:
 * -EINVAL).  Any thread; lock-free, no allocation; O(nskip) per member met.  (0.4) */
CHRING_API int chring_acquire_skip_ids(chring_t *r, const void *key, size_t len,
                                       const uint64_t *skip_ids, size_t nskip,
                                       chring_lease_t *lease);
CHRING_API int chring_acquire_hash_skip_ids(chring_t *r, uint64_t hash, const uint64_t *skip_ids,
                                            size_t nskip, chring_lease_t *lease);
/* The member's id: unique among the members a ring ever created, never reused, > 0; 0 for NULL.
 * Reader side (or with a lease on m).  (0.4) */
CHRING_API uint64_t chring_member_id(const chring_member_t *m);

/* As chring_acquire and chring_acquire_skip with the key already hashed: hash is the h that
 * chring_snap_lookup_hash takes (the profile's hash of the key, or a composite key the proxy
 * hashed itself in the profile's width; bits above the width are ignored).  Same bound, same
 * outcome, same statistics (chring_acquire_hash_skip counts as a retry).  Returns 0 and fills
 * *lease; -ENOENT on an empty ring or when every member is skipped or down (lease cleared);
 * -EINVAL for NULL r/lease, or a NULL skip with nskip > 0.  Any thread; lock-free, no
 * allocation. */
CHRING_API int chring_acquire_hash(chring_t *r, uint64_t hash, chring_lease_t *lease);
CHRING_API int chring_acquire_hash_skip(chring_t *r, uint64_t hash,
                                        const chring_member_t *const *skip, size_t nskip,
                                        chring_lease_t *lease);

/* Admits m only while it is below its capacity (chring_member_capacity's rule, strict as in
 * chring_acquire): for preference lists that keep the bound (zone-local members first, a sticky
 * member, a multiget's shard groups), where chring_acquire_member ignores capacity.  s must be the
 * snapshot of the caller's read section or a held snapshot of r.  Returns 0 and fills *lease
 * (outcome CHRING_OUTCOME_OWNER; counted as an acquire with m as primary), -EBUSY when m is full,
 * -ENOENT when s does not list m or m is down or at admission scale 0, -EINVAL for NULL
 * arguments; the lease is cleared on failure.  Reader side; lock-free, no allocation. */
CHRING_API int chring_acquire_try(chring_t *r, const chring_snap_t *s, const chring_member_t *m,
                                  chring_lease_t *lease);

/* Releases a lease and clears it.  A cleared (or zeroed) lease is a no-op, and so are r or lease
 * NULL.  Any thread; lock-free.  May retire the member (config.retire) if it was removed and this was its last
 * reference.  Misuse guards (ignored, no counter moves): a lease released through another ring
 * than its own (the lease is left as it is, so it can still be released through its own ring),
 * and a copy of a lease released while its member has no load (the lease itself was released
 * already).  A copy released while the member has other leases is undefined. */
CHRING_API void chring_release(chring_t *r, chring_lease_t *lease);

/* The capacity member m would have for the next acquire on snapshot s: ceil(c * (m + 1) * e / E)
 * (at least ceil(config.min_capacity * e)) with the ring's balance factor c, its current
 * outstanding leases m, m's effective weight e = s * w and E the sum of the effective weights of
 * the members that are up (chring_acquire).
 * 0 if m is not in s, is down or is at admission scale 0, and for r, s or m NULL.  Reader side. */
CHRING_API uint64_t chring_member_capacity(chring_t *r, const chring_snap_t *s,
                                           const chring_member_t *m);

/* Outstanding leases on the ring (the m of the capacity formula), removed members included.
 * Exact when no acquire or release is in flight.  0 for r NULL.  Any thread. */
CHRING_API uint64_t chring_leases(chring_t *r);

/* Reports a load measured by member m itself (an LLM engine's running + waiting requests), which
 * counts requests from every instance and from clients that bypass them (docs/design.md §3,
 * "Reported load").  The ring records it with m's load now, this instance's own leases on m
 * (local_at_report); until config.report_ttl_ms have passed, every acquire, retry, acquire_try and
 * chring_member_capacity counts for m
 *     max(local, report + local - local_at_report)
 * instead of its own leases (local), and the m of the capacities (the ring's total) becomes the
 * sum of those counts over the members, every other member counting its leases.  A newer report
 * replaces the older one; an expired report counts nothing.  Placement (lookups), the digest and
 * the diff do not change.  Ignored (returns 0, nothing recorded): config.report_ttl_ms 0, or m
 * down (a report made before m went down is dropped then, too).  Returns 0, -ENOENT when m is not
 * a member of the current snapshot (a removed member), -EINVAL for NULL r or m, -ENOMEM (nothing
 * recorded: a member's first report allocates the small block that holds its statistics,
 * docs/design.md §4, "What a member costs").  m must be valid
 * (from a held snapshot or a lease; chring-lb holds a snapshot).  Any thread, concurrently with
 * acquires and other reports; takes the writers' lock (reports are a writer's rate, not an
 * acquire's), allocates nothing after a member's first report, publishes nothing.  In a process that forks while threads run,
 * call it (as every writer call) outside read sections: the fork handlers hold the writers' lock
 * while they wait for the rings' reclaimers and liburcu's call_rcu thread, whose grace periods
 * wait for that section.  A ring that never reports costs its acquires nothing
 * more: one word beside the published pointer, read with the health count, says whether any
 * report counts. */
CHRING_API int chring_report_load(chring_t *r, const chring_member_t *m, uint64_t load);

/* ---------------------------------------------------------------------------------------------
 * Statistics: copied out, each field read atomically, the set as consistent as is cheap
 * ------------------------------------------------------------------------------------------- */

typedef struct chring_member_stats {
    uint64_t load;       /* outstanding leases of this instance (the "local" count) */
    uint64_t acquires;   /* leases ever placed here (primary + spilled_in + down_in): by
                            chring_acquire, _skip, _hash, _hash_skip, _member and _try */
    uint64_t primary;    /* ... of which this member was the key's owner (or the member the
                            caller chose: chring_acquire_member, chring_acquire_try) */
    uint64_t spilled_in; /* ... of which a member before it was full or skipped (SPILLED, or
                            SATURATED away from the owner) */
    /* Reported load (0.4, chring_report_load): report_live is 1 while a report counts, else 0
     * and the next three are 0.  reported is the value reported, local_at_report the member's
     * load when it was, report_age_ms its age now. */
    uint64_t report_live;
    uint64_t reported;
    uint64_t local_at_report;
    uint64_t report_age_ms;
    /* What the bound counts for the member now: local + inherited, or while a report counts
     * max(local, reported + local - local_at_report) with local = load + inherited. */
    uint64_t counted;
    /* Leases out on members of the same name removed while they were out (a flap: the name was
     * removed and added again), which the bound counts on this member as its own (0.4). */
    uint64_t inherited;
    /* ... acquires of the count above whose owner was down and which landed here, the first
     * member up after it (CHRING_OUTCOME_OWNER_DOWN, 0.4) */
    uint64_t down_in;
} chring_member_stats_t;

typedef struct chring_stats {
    uint64_t version;   /* current snapshot's version */
    uint64_t publishes; /* snapshots published since chring_new */
    uint64_t members;   /* members of the current snapshot */
    uint64_t points;    /* points of the current snapshot */
    uint64_t leases;    /* outstanding leases (m) */
    uint64_t acquires;  /* successful acquires (chring_acquire, _skip, _hash, _hash_skip,
                           _member, _try) */
    uint64_t spills;    /* acquires placed past the key's owner for load or a skip (outcome
                           SPILLED, or SATURATED away from the owner; not OWNER_DOWN) */
    uint64_t saturated; /* acquires that found every member full (outcome SATURATED) */
    uint64_t down;      /* members of the current membership that are down */
    uint64_t retries;   /* successful chring_acquire_skip and chring_acquire_hash_skip calls */
    /* Reported load (0.4): reports recorded (chring_report_load calls that returned 0 and were
     * not ignored), and the m the capacities use now: leases plus, for each member of the
     * current snapshot whose report counts, what its count adds to its leases. */
    uint64_t reports;
    uint64_t counted;
    /* Acquires whose owner was down, placed on the first member up after it (outcome
     * CHRING_OUTCOME_OWNER_DOWN, 0.4): counted apart from spills, so spill alerts do not fire on
     * health checks. */
    uint64_t owner_down;
} chring_stats_t;

/* Copies a member's statistics (zeros for NULL m; nothing written for NULL out).  Reader side, or
 * with a lease on m. */
CHRING_API void chring_member_stats(const chring_member_t *m, chring_member_stats_t *out);
/* Copies the ring's statistics (zeros for NULL r; nothing written for NULL out).  Any thread. */
CHRING_API void chring_stats(chring_t *r, chring_stats_t *out);

/* ---------------------------------------------------------------------------------------------
 * Health and warm-up
 * ------------------------------------------------------------------------------------------- */

/* Marks a member down (down != 0) or up (0).  A member that is down keeps its points, its object
 * (counters, udata) and its leases; every lookup and acquire (plain, pre-hashed, n-replica,
 * caller-loads bounded, chring_lookup_name, chring_acquire, chring_acquire_skip) walks past it,
 * so its keys go where a removal would send them (for every profile whose points depend on the
 * member alone) and every other key keeps its owner; set up again, it gets back exactly its keys.
 * Capacities count only the members that are up (their n and W).  A ring whose every member is
 * down answers like an empty ring.  chring_acquire_member on a down member still works (the caller
 * chose it).  chring_snap_moved and chring_member_share ignore health.  The state belongs to the
 * member object: a name removed and added again comes back up.  Allocates nothing, rebuilds
 * nothing: O(log members) to find the name, then O(1).  Returns 0 (also when the state does not
 * change), -ENOENT for a non-member, -EINVAL (NULL r or name, empty name), -ENAMETOOLONG.  Writer
 * side: any thread, serialised with the other writers; seen by every read section that begins
 * after it returns, and at once (a flag on the member, not a publish) by read sections already
 * running and on held snapshots that list the member ("Ordering" at the top).  Going down drops
 * the member's reported load (chring_report_load).  A ring whose every member is down answers
 * in O(1) (no walk of its points), for the current snapshot. */
CHRING_API int chring_set_down(chring_t *r, const char *name, int down);
/* 1 if m is down, 0 if it is up, -EINVAL for NULL.  Reader side (or with a lease on m). */
CHRING_API int chring_member_is_down(const chring_member_t *m);

/* Moves a member's admission scale s linearly from `from` to `to` over ms milliseconds of
 * CLOCK_MONOTONIC, starting now (ms 0: s = to at once).  The acquires judge the member by its
 * effective weight s * w, in its own capacity and in the total E of every capacity (see
 * chring_acquire): s = 1 is the plain bound; s = 0 admits nothing, its share goes to the others
 * and its keys spill clockwise, to the member that owned them before it joined.  Plain and n-replica lookups ignore the scale.  A member at s = 1 costs an acquire
 * nothing more (no clock read).  Drain a leaving member with
 * chring_set_ramp(r, name, chring_member_scale(m), 0, ms) and remove it when its load is 0.
 * Returns 0, -ENOENT for a non-member, -EINVAL (from or to outside [0, 1] or NaN, NULL r or name),
 * -ENAMETOOLONG, -ENOMEM (nothing changed: a member's first ramp allocates the small block that
 * holds it, docs/design.md §4, "What a member costs").  Writer side; allocates nothing else.  A reader concurrent with the call sees the old
 * ramp or the new one (for an instant possibly a blend of their parameters), always a scale in
 * [0, 1]. */
CHRING_API int chring_set_ramp(chring_t *r, const char *name, double from, double to, uint32_t ms);
/* The member's admission scale now, in [0, 1] (1 without a ramp); 0.0 for NULL.  Reader side. */
CHRING_API double chring_member_scale(const chring_member_t *m);

/* ---------------------------------------------------------------------------------------------
 * fork()
 * ------------------------------------------------------------------------------------------- */

/* Whether the library's fork handlers also run liburcu-bp's fork hooks (call_rcu_before_fork,
 * urcu_bp_before_fork and their after-fork partners): 1, the default, or 0 for an application that
 * calls those hooks around fork() itself (running them twice deadlocks).  The rings' writer locks
 * are quiesced either way.  Returns the previous setting.  Any thread, not during a fork. */
CHRING_API int chring_atfork_urcu(int enable);

/* ---------------------------------------------------------------------------------------------
 * Diagnostics and test hooks: for tests, fuzzers and torture programs; not part of the stable
 * API (they may change or go in any release)
 * ------------------------------------------------------------------------------------------- */

/* Checks a snapshot's validity word and its invariants that are cheap to check (points sorted,
 * owners in range, members' validity words).  Returns 0, or -EINVAL if s is NULL, poisoned
 * (freed) or inconsistent.  Reader side.  Reading freed memory is undefined: this helps a
 * torture test notice a use after free without a sanitizer, it cannot prove there was none. */
CHRING_API int chring_snap_check(const chring_snap_t *s);
/* Checks a member's validity word.  Returns 0 or -EINVAL (NULL, poisoned).  Reader side, or with
 * a lease on m. */
CHRING_API int chring_member_check(const chring_member_t *m);

#ifdef __cplusplus
}
#endif

#endif /* CHRING_H */
