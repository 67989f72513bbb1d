/* The structures behind chring's opaque handles, and the chring__ functions shared across files,
 * grouped by the file that defines them in the order of the source layout (docs/design.md §9):
 * each file uses only what the files before it define.
 * SPDX-License-Identifier: MIT */
#ifndef CHRING_INTERNAL_H
#define CHRING_INTERNAL_H

#include "shim.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "chring.h"

/* 2^64 as a double (exact): the ring's circumference, by which arcs become fractions, and the
 * first value too large for a uint64_t. */
#define CHRING_TWO_POW_64 18446744073709551616.0

/* Validity words: set at creation, poisoned just before the memory is freed. */
#define CHRING_MEMBER_MAGIC UINT32_C(0x6368726d)         /* "chrm" */
#define CHRING_SNAP_MAGIC UINT64_C(0x636872736e617073)   /* "chrsnaps" */
#define CHRING_POISON UINT64_C(0xdeadbeefdeadbeef)

/* ---- structures --------------------------------------------------------------------------- */

/* What few members need (docs/design.md §4, "What a member costs"): a ramp's parameters, the
 * statistics of the last report, the links of a flap.  Allocated by a writer, under the ring
 * lock, the first time a member needs one of them (chring__member_cold), freed with the member;
 * the member's cold pointer is published with a release store before anything refers to it. */
struct chring_member_cold {
    /* The ramp (health.c): written before the member's ramp_gen, read after it. */
    uint64_t ramp_start_ns; /* CLOCK_MONOTONIC at the start of the ramp */
    uint64_t ramp_len_ns;
    uint64_t ramp_from, ramp_to; /* doubles' bits: read atomically, whole */
    /* The last report (report.c, for the statistics): the value, the member's load then and
     * when (CLOCK_MONOTONIC ns).  Written under the ring lock. */
    uint64_t rep_value, rep_local, rep_at_ns;
    /* Flaps (ghost.c), under the ring's ghost lock: the ghost list (non-NULL once the member was
     * listed as a ghost or linked to one); the member whose prev this one is; the next ghost of
     * the ring's list; whether it is listed (removed with leases out) and whether it was ever a
     * prev (then it is freed a grace period after it is destroyed, since readers may still
     * follow a prev pointer to it). */
    struct chring_ghosts *ghosts;
    chring_member_t *succ;
    chring_member_t *ghost_next;
    uint32_t ghosted;
    uint32_t linked;
    chring_member_t *self; /* the member, for the deferred free */
    struct rcu_head rcu;
};

/* A member.  Its hot word and the rules for changing it: member.h.  offsetof(name) + name_len +
 * 1 bytes (114 + the name), on a cache line: the first line is the member's own, the second
 * holds what every member needs and, for a name of up to 13 bytes, the name; what few members
 * need is in its cold block (above).  A member that fits CHRING_MEMBER_SLOT bytes lives in a
 * slot of the ring's member chunks (member.c), any other in an allocation of its own. */
struct chring_member {
    /* First cache line: written by every acquire and release on this member. */
    uint64_t word;       /* leases | snapshot references << 32 (member.h) */
    uint64_t primary;    /* acquires that found their owner here */
    uint64_t spilled_in; /* acquires that spilled here from a full owner */
    uint32_t down;       /* 1: out of service (health.c); read by every walk that meets it */
    uint32_t ramp_gen;   /* 0: admission scale 1; else the generation of the ramp (cold) */
    /* Reported load (report.c): what the member's report adds to its leases, and until when
     * (CLOCK_MONOTONIC ns; 0: no report).  Written by chring_report_load under the ring lock. */
    uint64_t rep_extra;
    uint64_t rep_until_ns;
    /* A flap (ghost.c): the member of the same name removed while its leases were out, whose
     * leases this one counts as its own; NULL mostly.  Changed under the ring's ghost lock. */
    chring_member_t *prev;
    uint64_t down_in; /* acquires placed here because the key's owner was down (load.c) */
    /* (the first cache line is full: magic begins the second, checked below) */
    /* Second cache line: immutable after creation except weight, slot_hint and cold (writers
     * only, under the ring lock). */
    uint32_t magic;
    uint32_t weight; /* current weight, stored by the writer at publish */
    /* Its slot in the snapshot published last (apply.c), a hint for chring_acquire_try: a
     * snapshot whose slot_member[slot_hint] is this member lists it there, no name search. */
    uint32_t slot_hint;
    uint32_t chunk; /* 1 + the id of the member chunk it lives in (member.c); 0: its own */
    /* chring_member_id: the ring's count of members created, at its creation; also the join
     * order, for the fnv16 profile's collision rule (snap_build.c) */
    uint64_t id;
    void *udata;
    /* The ring (its health, config.retire, ghost list and member chunks, at destruction): a
     * member never outlives its ring, whose chring_free comes after every lease and held
     * snapshot is given back (chring.h). */
    struct chring *ring;
    struct chring_member_cold *cold; /* NULL until the member needs it */
    uint16_t name_len;               /* 1 .. CHRING_NAME_MAX */
    char name[];                     /* name_len bytes and a NUL */
};

_Static_assert(offsetof(struct chring_member, magic) == CHRING_CACHELINE || sizeof(void *) != 8,
               "a member's hot fields fill its first cache line exactly");
_Static_assert(offsetof(struct chring_member, name) == CHRING_CACHELINE + 50 || sizeof(void *) != 8,
               "a member is its hot line, 50 bytes and its name");
_Static_assert(CHRING_NAME_MAX <= UINT16_MAX, "a name's length fits name_len");

/* The ring's member chunks (member.c): slots of CHRING_MEMBER_SLOT bytes, CHRING_CHUNK_SLOTS to
 * a chunk (CHRING_CHUNK_FIRST while the ring has fewer than CHRING_CHUNK_SLOTS members in
 * chunks, so that a small ring does not hold 8 KB for a few members), each chunk one
 * allocation, freed when its last member is.  Under the ring's ghost
 * lock (a member is freed by whichever thread brings its word to zero). */
#define CHRING_MEMBER_SLOT 128
#define CHRING_CHUNK_SLOTS 64
#define CHRING_CHUNK_FIRST 16
struct chring_member_chunk {
    struct chring_member_chunk *next, *prev; /* the pool's chunks with a free slot */
    void *free;                              /* freed slots, linked through their first word */
    uint32_t used;                           /* slots holding a member */
    uint32_t fresh;                          /* slots never handed out start at this one */
    uint32_t id;                             /* its index in the pool's table */
    uint16_t listed;                         /* on the list of chunks with a free slot */
    uint16_t slots;                          /* CHRING_CHUNK_SLOTS or CHRING_CHUNK_FIRST */
};
struct chring_member_pool {
    struct chring_member_chunk **chunks; /* by id; NULL: a free id */
    uint32_t nchunks, cap;               /* ids used so far, the table's size */
    struct chring_member_chunk *partial; /* chunks with a free slot */
    uint64_t live;                       /* members in chunks */
};

/* What every lookup of a ring needs to know about health (health.c): how many members of the
 * current membership are down, and their total current weight.  Written by writers under the
 * ring lock, read by readers with plain atomic loads; lives in struct chring, beside the published
 * pointer, so a lookup reads no extra cache line. */
struct chring_health {
    uint64_t alive_down;  /* member objects alive that are down, listed or not: a lookup checks
                            flags only when this is not 0 (a held snapshot may list a member
                            removed while down) */
    uint64_t ndown;       /* members of the current membership that are down (stats) */
    uint64_t down_weight; /* their total weight in the current snapshot */
    chring_snap_t *const *current; /* the ring's published pointer: is a snapshot current? */
    /* Effective weights (effective.c; written by health.c): 0 while no member object alive
     * ramps (listed by the current snapshot or only by a held one); else the writers' latest ramp
     * sequence number, which also invalidates cached sums.  The ring's ramps_alive counts the
     * member objects alive whose ramp_gen is not 0 (a held snapshot may list a member removed
     * while it ramped), kept by whoever moves a ramp_gen from or to 0 (member.c's
     * chring__member_ramp_gen: writers, a member's destroy or discard; health.c: the acquire that
     * clears a finished ramp); the epoch is cleared only while it is 0. */
    uint64_t ramp_epoch;
    /* Reported load (report.c): 0 while no report of the current membership counts; else the
     * writers' latest report sequence number, which also invalidates the snapshots' cached sums
     * of what the reports add. */
    uint64_t report_seq;
};

struct chring_profile_desc;

/* A ring's profile: its descriptor (profile.c) and the parameters of this ring.  The ring keeps
 * one; every snapshot copies it, so lookups never reach back to the ring. */
struct chring_prof {
    const struct chring_profile_desc *desc;
    chring_profile_t id;
    unsigned bits;  /* 64, 32 or 16 */
    unsigned shift; /* 64 - bits: positions are stored shifted to the top of 64 bits */
    uint32_t vnodes;
    chring_hash_fn hash; /* custom only */
    void *hash_ctx;
    uint32_t ring_size_min, ring_size_max; /* envoy only */
};

/* The spare-block cache (snap_block.c): blocks of destroyed snapshots, kept for the next
 * publishes.  takes counts the publishes that asked for a block (the writer's; read by any).
 * A spare that no publish took for CHRING_SPARE_IDLE_NS is freed by the ring's trimmer, a
 * thread that runs while the cache holds spares (docs/design.md §4, "Spare blocks"). */
#define CHRING_SPARES 6
#define CHRING_PREFAULT 5  /* spares a large ring's first publish makes ready, at most */
/* ... while they stay within this many bytes, but at least CHRING_PREFAULT_MIN (prefault_count,
 * snap_block.c) */
#define CHRING_PREFAULT_BYTES ((size_t)384 << 20)
#define CHRING_PREFAULT_MIN 2
#define CHRING_SPARE_AGE 8 /* publishes a spare may wait untaken (block_take, snap_block.c) */
#define CHRING_SPARE_IDLE_NS UINT64_C(200000000) /* 200 ms */
#define CHRING_RETURN_WAIT_NS UINT64_C(2000000)   /* 2 ms (block_take, snap_block.c) */
struct chring_blocks {
    chring_snap_t *spare[CHRING_SPARES];
    uint64_t takes;
    size_t prefaulted; /* the block size spares were last made ready for (the writer's) */
    size_t ready_size; /* spares of this size to make ready at the end of the publish under
                          way; 0: none (the writer's) */
    size_t ready_need; /* and the size that publish asked for */
    uint32_t prefault; /* chring_set_prefault's n + 1; 0: the default (prefault_count) */
    /* The trimmer (snap_block.c). */
    uint32_t ready;    /* wake is initialised (by the writer's first block_take) */
    uint32_t trimming; /* 1 while a trimmer thread runs (atomic) */
    uint32_t stop;     /* chring__blocks_drop asks the trimmer to end (atomic) */
    uint32_t at_rest;  /* spares the trimmer leaves (chring_set_spares_at_rest; atomic) */
    size_t wanted;     /* the size the writer's last publish asked for (atomic): what the
                          spares kept at rest must fit */
    int trimmer_pid;   /* the process the trimmer runs in: a child after fork() has none */
    /* Replaced snapshots the reclaimer's thread has yet to give up (reclaim.c; atomic): their
     * blocks are on their way back, so a publish that finds no spare waits a little for one
     * (block_take) rather than fault in a fresh block. */
    uint64_t returning;
    sem_t wake;        /* posted by chring__blocks_drop */
    /* The oldest node of the membership chain not yet freed (nodes are freed in chain order);
     * NULL before the first publish.  Written by the writer (the first node) and by whoever
     * frees a node. */
    struct chring_chain *oldest;
};

/* The reclaimer (reclaim.c): replaced snapshots wait in `retired` (newest first, linked through
 * retired_next) for a thread of the ring's own that waits for a grace period (synchronize_rcu)
 * and drops their published references, so that their blocks come back as soon as the grace
 * period ends (docs/design.md §4, "Reclamation").  It runs while snapshots wait, and a little
 * after. */
#define CHRING_RECLAIM_LINGER_NS UINT64_C(100000000) /* 100 ms idle before the thread ends */
struct chring_reclaim {
    chring_snap_t *retired; /* pushed by the writer (under the ring lock), newest first (atomic) */
    uint64_t pushed;        /* the number of the last snapshot pushed (the writer's; atomic) */
    uint64_t taken;         /* every snapshot numbered up to this was taken (under batch) */
    pthread_mutex_t batch;  /* held by the reclaimer from taking a list to its last drop, and
                               by the fork handlers (fork.c) */
    sem_t wake;             /* posted by a writer that retires, and to stop the thread */
    uint32_t state;         /* RECLAIM_IDLE, RECLAIM_RUNS, RECLAIM_POKED (reclaim.c; atomic) */
    uint32_t stop;          /* chring_free asks the thread to end (atomic) */
    int pid;                /* the process the thread runs in: a child after fork() has none */
    uint64_t batches;       /* grace periods the thread waited for (statistics; atomic) */
    uint64_t reclaimed;     /* snapshots whose published reference it dropped (atomic) */
    uint64_t deferred;      /* snapshots handed to call_rcu instead: no thread (atomic) */
};

/* The membership chain (snap_block.c, docs/design.md §4, "References"): one node per published
 * snapshot, in publication order.  A snapshot holds its node; a node holds the next one.  The
 * next node lists, in gone, the members of this node's snapshot that the next snapshot does not
 * list; freeing a node drops their references.  So a member's one snapshot reference, taken when
 * it joins, is dropped once every snapshot published while it was listed is destroyed, and a
 * publish takes and drops references on the members it changes only. */
struct chring_chain {
    uint64_t refs; /* its snapshot's, and the previous node's */
    struct chring_chain *next; /* written once, by the writer, at the next publish */
    chring_snap_t *snap;       /* its snapshot: read only while the snapshot's reference holds */
    struct chring_chunk_swap *chunks; /* the previous snapshot's chunks this one does not hold
                                         (chunk.c), freed with the previous node; NULL: none */
    size_t ngone;
    chring_member_t *gone[]; /* the previous snapshot's members this one does not list (NULL:
                                dropped already, by chring_free: chring__chain_settle) */
};

/* A chunk of a chunked snapshot (chunk.c; docs/design.md §4.2): the points of a run of
 * consecutive buckets, with a bucket index of its own.  Written once, before the snapshot that
 * first lists it is published, then shared read-only by every later snapshot whose table points
 * at it, until a publish replaces it; freed with the chain node of the last snapshot that lists
 * it (snap_block.c, chain_unref), so no reference count is kept. */
struct chring_chunk {
    size_t bytes;         /* of this allocation */
    uint32_t npoints;     /* its points */
    uint32_t owner_w;     /* bytes of an owner slot: the snapshot's */
    uint64_t *pos;        /* npoints positions, then CHRING_SENTINELS of UINT64_MAX */
    unsigned char *owner; /* npoints slots of owner_w bytes, then CHRING_OWNER_PAD of 0 */
    uint32_t first[];     /* of each of its buckets, the first local point at or after the
                             bucket's start; first[buckets] = npoints */
};

/* An entry of a chunked snapshot's table: the chunk and the ring index of its first point. */
struct chring_chunk_ref {
    const struct chring_chunk *c;
    size_t first;
};

/* What a chunked publish made and replaced (chunk.c): the chunks its snapshot holds that the
 * previous one did not (freed if it is never published) and the previous one's that it does not
 * hold (freed with the previous snapshot's chain node). */
struct chring_chunk_swap {
    size_t nmade, ngone;
    struct chring_chunk **made; /* nmade, then gone: ngone */
    struct chring_chunk **gone;
};

/* A line of the line index: src/index.h. */
struct chring_line;

/* An immutable snapshot: members sorted by name, points sorted by (position, member name).
 * Positions are stored shifted to the top of 64 bits (pos << prof.shift) so that every profile
 * shares one search; chring_snap_point shifts them back.  One allocation holds it all
 * (snap_block.c). */
struct chring_snap {
    uint64_t magic;
    uint64_t refs; /* one for the published pointer (until its grace period ends) + holds */
    uint64_t version;
    struct rcu_head rcu;
    chring_snap_t *retired_next;        /* replaced, waiting for the reclaimer (reclaim.c) */
    uint64_t retired_seq;               /* and its number there (reclaim.c) */
    struct chring_blocks *blocks;       /* the cache this block goes back to; NULL: freed */
    struct chring_chain *chain;         /* its node of the membership chain; NULL: no members yet */
    const struct chring_health *health; /* the ring's (health.c): down members */
    size_t block_size;                  /* bytes of the allocation that holds this snapshot */
    uint64_t stashed;                   /* in the spare cache: blocks->takes when it came */
    uint64_t stashed_ns;                /* and CLOCK_MONOTONIC then (the trimmer's age) */

    struct chring_prof prof;

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
    /* The positions, sorted by (position, member name): pos_w bytes each, read with
     * chring__pos (the position shifted to the top of 64 bits, pos << prof.shift, whatever the
     * width) and written with chring__pos_set (below).  8 bytes for the 64-bit profiles; 4 for
     * the profiles of 32 bits or fewer, whose shifted positions have a low half of 0: the top
     * half alone (docs/design.md §4.1, "Points").  Points npoints to npoints + CHRING_SENTINELS
     * - 1 are the search's sentinels, all ones. */
    void *pos;
    uint32_t pos_w; /* 8 or 4 (chring__pos_width) */
    /* The slot of each point's member: owner_w bytes a point, little-endian, as few as the
     * slots need (chring__owner_width: 2 bytes up to 65,536 slots, 3 up to 2^24, else 4), read
     * with chring__owner and written with chring__owner_set (below); CHRING_OWNER_PAD bytes
     * follow the last, so that the 4-byte load that reads one stays in the block
     * (docs/design.md §4.1, "Points"). */
    unsigned char *owner;
    uint32_t owner_w;    /* 2, 3 or 4 */
    uint32_t owner_mask; /* the low owner_w bytes of a 32-bit word */

    /* The snapshot index (src/index.h: its picture, invariants and search).
     * Prefix-bucket index, b in [0, nbuckets]: a position h is in bucket chring__bucket(s, h)
     * (monotonic in h), and F(b) is the first point of a bucket >= b; F(nbuckets) == npoints.
     * nbuckets is a power of two on small rings (the bucket is then h's top bits) and 1.5 per
     * point past half a million points (index.c).  Flat (index_off NULL): index[b] = F(b).
     * Packed (past half a million points, positions of 32 bits or more): index holds a base
     * per 64 buckets and index_off an offset byte per bucket (chring__pack_first). */
    size_t nbuckets;
    uint32_t *index;
    uint8_t *index_off;
    /* The bucket search a lookup takes (chring__search_shape, from pos_w and index_off): pos_w,
     * plus CHRING_SEARCH_PACKED for the packed index; one word that the search reads anyway for
     * the width, so the flat index of the rings in the caches pays no test for the packed one. */
    uint32_t search;
    /* The line index instead (struct chring_line, index.h), NULL where the ring has the bucket
     * index: nbuckets lines (a position's line is its bucket) and a last one whose first is
     * npoints; index is then NULL. */
    struct chring_line *lines;
    /* Or the chunks (chunk.c; docs/design.md §4.2), NULL where the points are in the block: a
     * table of nchunks + 1 entries (the last {NULL, npoints}), chunk c holding the points of
     * buckets [c << chunk_shift, (c + 1) << chunk_shift); pos, owner, index and lines are then
     * NULL and search has CHRING_SEARCH_CHUNKED.  chunk_dir[i >> CHRING_CHUNK_DIR_SHIFT] is the
     * chunk that holds point (i >> CHRING_CHUNK_DIR_SHIFT) << CHRING_CHUNK_DIR_SHIFT, where the
     * walk to point i's chunk starts.  swap: what the publish that built it made and replaced,
     * until it is published (chring__chain_link) or discarded. */
    struct chring_chunk_ref *chunks;
    size_t nchunks;
    uint32_t chunk_shift;
    uint32_t *chunk_dir;
    struct chring_chunk_swap *swap;

    /* The one mutable part (effective.c): the cached sum E of the effective weights of the
     * members that are up, written by acquires at most once a millisecond while ramps run. */
    uint64_t eff_stamp_ns; /* CLOCK_MONOTONIC when eff_bits was summed; 0: never */
    uint64_t eff_epoch;    /* health->ramp_epoch it was summed under */
    uint64_t eff_bits;     /* E, a double's bits */
    /* And (report.c) the cached sum of what the reports of its members add to m: valid while the
     * ring's report_seq is rep_seq and the clock is below rep_until_ns (the earliest expiry of
     * the reports summed).  rep_ver is odd while one acquire writes the three words. */
    uint64_t rep_ver;
    uint64_t rep_seq;
    uint64_t rep_until_ns;
    uint64_t rep_sum;
};

/* Point positions (struct chring_snap's pos): the bytes a profile's positions take. */
static inline uint32_t chring__pos_width(const struct chring_prof *p)
{
    return p->bits <= 32 ? 4 : 8;
}

/* Position i of an array of w-byte positions, shifted to the top of 64 bits: w a constant where
 * the search is specialised for each width (index.h), so that no load pays a branch. */
static inline uint64_t chring__pos_at(const void *pos, unsigned w, size_t i)
{
    return w == 8 ? ((const uint64_t *)pos)[i] : (uint64_t)((const uint32_t *)pos)[i] << 32;
}

/* The table entry of the chunk that holds point i (i < npoints) of a chunked snapshot: from
 * the directory's chunk, on past the chunks that end at or before i (one or two steps for a
 * chunk of hundreds of points; empty chunks are stepped over). */
#define CHRING_CHUNK_DIR_SHIFT 10
static inline const struct chring_chunk_ref *chring__chunk_of(const chring_snap_t *s, size_t i)
{
    const struct chring_chunk_ref *r = &s->chunks[s->chunk_dir[i >> CHRING_CHUNK_DIR_SHIFT]];
    while (r[1].first <= i)
        r++;
    return r;
}

/* Position i of s, shifted to the top of 64 bits (UINT64_MAX past the last point of a chunked
 * snapshot, as the sentinels read in a flat one). */
static inline uint64_t chring__pos(const chring_snap_t *s, size_t i)
{
    if (CHRING_UNLIKELY(s->chunks != NULL)) {
        if (i >= s->npoints)
            return UINT64_MAX;
        const struct chring_chunk_ref *r = chring__chunk_of(s, i);
        return r->c->pos[i - r->first];
    }
    return s->pos_w == 8 ? chring__pos_at(s->pos, 8, i) : chring__pos_at(s->pos, 4, i);
}

/* Writes position i of s from its shifted 64-bit value (of a 4-byte width, its top half: the
 * low half of a profile of 32 bits or fewer is 0; a sentinel's ones are kept).  Writers. */
static inline void chring__pos_set(chring_snap_t *s, size_t i, uint64_t h64)
{
    if (s->pos_w == 8)
        ((uint64_t *)s->pos)[i] = h64;
    else
        ((uint32_t *)s->pos)[i] = (uint32_t)(h64 >> 32);
}

/* Point owners (struct chring_snap's owner): the bytes a slot takes in a snapshot of nslots
 * slots, and the padding after the array. */
#define CHRING_OWNER_PAD 4
static inline uint32_t chring__owner_width(size_t nslots)
{
    return nslots <= ((size_t)1 << 16) ? 2 : nslots <= ((size_t)1 << 24) ? 3 : 4;
}

/* The bucket search of s (its field search), once pos_w and index_off are set. */
#define CHRING_SEARCH_PACKED 16u
#define CHRING_SEARCH_CHUNKED 32u
static inline void chring__search_shape(chring_snap_t *s)
{
    s->search = s->pos_w | (s->index_off != NULL ? CHRING_SEARCH_PACKED : 0u) |
                (s->chunks != NULL ? CHRING_SEARCH_CHUNKED : 0u);
}

/* Sets s's owner width for nslots slots and the mask a reader applies. */
static inline void chring__owner_shape(chring_snap_t *s, size_t nslots)
{
    s->owner_w = chring__owner_width(nslots);
    s->owner_mask = s->owner_w == 4 ? UINT32_MAX : (UINT32_C(1) << (8 * s->owner_w)) - 1;
}

/* The slot of point i's member in an array of w-byte slots: one unaligned 4-byte load and a
 * mask, which the padding keeps inside the block (or chunk) for the last point.  Two bytes,
 * every ring of up to 65,536 members, is the branch predicted: its address is a scaled index,
 * where i * owner_w put a multiply on the lookup's chain. */
static inline uint32_t chring__owner_in(const unsigned char *owner, uint32_t w, uint32_t mask,
                                        size_t i)
{
    uint32_t v;
    if (CHRING_LIKELY(w == 2))
        memcpy(&v, owner + i * 2, sizeof v);
    else
        memcpy(&v, owner + i * w, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v & mask;
}

/* The slot of point i's member in s: in its chunk for a chunked snapshot. */
static inline uint32_t chring__owner(const chring_snap_t *s, size_t i)
{
    if (CHRING_UNLIKELY(s->chunks != NULL)) {
        const struct chring_chunk_ref *r = chring__chunk_of(s, i);
        return chring__owner_in(r->c->owner, s->owner_w, s->owner_mask, i - r->first);
    }
    return chring__owner_in(s->owner, s->owner_w, s->owner_mask, i);
}

/* Writes the slot of point i's member (slot < nslots, so it fits owner_w bytes).  Writers. */
static inline void chring__owner_set(chring_snap_t *s, size_t i, uint32_t slot)
{
    unsigned char *p = s->owner + i * s->owner_w;
    p[0] = (unsigned char)slot;
    p[1] = (unsigned char)(slot >> 8);
    if (s->owner_w > 2)
        p[2] = (unsigned char)(slot >> 16);
    if (s->owner_w > 3)
        p[3] = (unsigned char)(slot >> 24);
}

/* The members removed while their leases were out (ghost.c), newest first, so that a name added
 * again counts them (a flap).  Its own lock, which a last release may take: never the writers'. */
struct chring_ghosts {
    pthread_mutex_t lock;
    chring_member_t *head;
    uint32_t linked_ever; /* some member was a prev: chring_free waits for its deferred free */
};

/* One shard of the ring-wide lease accounting (load.c). */
struct chring_shard {
    uint64_t leases;   /* outstanding leases acquired through this shard */
    uint64_t acquired; /* statistics */
    uint64_t spills;
    uint64_t saturated;
    uint64_t retries;
    uint64_t owner_down; /* acquires placed on the first member up past a key's owner down */
    char pad_[CHRING_DESTRUCTIVE - 6 * sizeof(uint64_t)];
};

struct chring {
    chring_snap_t *current; /* RCU-protected; written by writers under lock */
    struct chring_health health;
    char pad0_[CHRING_CACHELINE - sizeof(chring_snap_t *) - sizeof(struct chring_health)];

    pthread_mutex_t lock; /* serialises writers; readers never touch it */
    chring_config_t cfg;
    struct chring_prof prof;
    double balance;         /* cfg.balance clamped to >= 1 */
    uint64_t publishes;     /* written under lock, read atomically */
    uint64_t ramp_seq;      /* last ramp_epoch a writer stored (health.c), under lock */
    uint64_t ramps_alive;   /* member objects alive that ramp (health.ramp_epoch), atomic */
    uint64_t report_ctr;    /* last report_seq a writer stored (report.c), under lock */
    uint64_t member_ids;    /* members created (ids), under lock */
    uint64_t reports;       /* reports recorded (statistics), under lock, read atomically */
    uint64_t report_ttl_ns; /* cfg.report_ttl_ms in ns */
    double floor;           /* cfg.min_capacity (load.c: the floor at low concurrency) */
    struct chring_blocks blocks;
    struct chring_reclaim reclaim; /* replaced snapshots, until their grace period (reclaim.c) */
    unsigned shard_mask;
    struct chring_shard *shards;     /* shard_mask + 1 shards, CHRING_DESTRUCTIVE aligned */
    chring_t *fork_prev, *fork_next; /* the rings alive, for the fork handlers (fork.c) */
    struct chring_ghosts ghosts;     /* flaps (ghost.c) */
    struct chring_member_pool pool;  /* member chunks (member.c), under ghosts.lock */
};

/* ---- alloc.c: every allocation of the library goes through these -------------------------- */

void *chring__alloc(size_t size);
void *chring__calloc(size_t n, size_t size);
void chring__free(void *p);
void *chring__alloc_aligned(size_t size); /* CHRING_DESTRUCTIVE-aligned, freed with _free_aligned */
void *chring__alloc_line(size_t size);    /* CHRING_CACHELINE-aligned, freed with _free_aligned */
void chring__free_aligned(void *p);
/* A snapshot block of size bytes, and its end: freed with the size it was allocated with. */
void *chring__alloc_block(size_t size);
void chring__free_block(void *p, size_t size);

/* ---- hash.c ------------------------------------------------------------------------------- */

/* Writes the decimal digits of i (no NUL) and returns their count (1 .. 10). */
size_t chring__put_decimal(char *buf, uint32_t i);
/* c as the bounded loads use it: below 1, NaN or infinite acts as 1 (docs/design.md §3). */
double chring__clamp_balance(double c);
/* ceil(c * (total + 1) * e / sum) in IEEE double, left to right; 0 when e or sum is not above 0.
 * c already clamped.  Effective weights (effective.c, docs/design.md §3). */
uint64_t chring__capacity_effective(uint64_t total, double e, double sum, double c);
/* The floor under a capacity cap (config.min_capacity, docs/design.md §3): at least
 * ceil(floor * e) for effective weight e > 0, UINT64_MAX from 2^64 up.  Inline, as every acquire
 * applies it (load.c): no floor (0) costs one compare. */
static inline uint64_t chring__capacity_floor(uint64_t cap, double floor, double e)
{
    if (CHRING_LIKELY(floor == 0.0) || !(e > 0.0))
        return cap;
    double f = ceil(floor * e);
    uint64_t fl = f < CHRING_TWO_POW_64 ? (uint64_t)f : UINT64_MAX;
    return fl > cap ? fl : cap;
}

/* ---- profile.c: the placement profiles as data (docs/design.md §2) ------------------------ */

/* How equal positions are settled once a profile's points are generated. */
enum chring_collide {
    CHRING_COLLIDE_KEEP_ALL,   /* all kept, ordered by member name (then point index) */
    CHRING_COLLIDE_SKIP_TAKEN, /* placed member by member in join order; a taken position is
                                  skipped (fnv16: the ring depends on join order) */
    CHRING_COLLIDE_KEEP_FIRST, /* only the first by member name is kept (nginx) */
};

struct chring_profile_desc {
    const char *name;
    unsigned bits;         /* 64, 32, 16; 0: the config's hash_bits (custom) */
    bool uses_vnodes;      /* false: the profile fixes its point counts; vnodes ignored */
    bool counts_need_ring; /* a member's point count depends on the whole membership */
    bool mergeable;        /* points a pure function of (name, weight): a publish may keep the
                                 points of unchanged members (snap_merge.c) */
    enum chring_collide collide;
    /* Lookup rule: false, the first point at or after the key's position (docs/design.md §1);
     * true, the nearest point on either side, ties to the point before (haproxy).  Walks go on
     * clockwise from the point chosen (find.h, chring__start). */
    bool nearest;
    /* Lookup rule of Varnish's shard director (varnish): a key above the highest point starts at
     * the last point instead of wrapping to the first, and on a ring of exactly two points every
     * key starts at point 1.  Walks go on clockwise from there. */
    bool varnish_start;
    uint32_t max_weight; /* the largest weight it takes; 0: no limit of its own */
    /* Optional: checks a member name for this profile, 0 or -EINVAL; NULL accepts every name. */
    int (*name_check)(const char *name, size_t len);
    /* Optional, for a profile whose point counts depend on the other members' weights and on
     * their order (envoy): the counts of the n members of a build, in name order, into out.
     * points() then only bounds a member's count from above, for the limit checks. */
    void (*counts)(const struct chring_prof *p, const uint32_t *weights, size_t n, uint32_t *out);
    /* A key's (or label's) hash in the profile's width. */
    uint64_t (*hash)(const struct chring_prof *p, const void *key, size_t len);
    /* Points of a member of this weight among `members` members of total weight total_weight,
     * before the collision rule (may be 0).  Callers check CHRING_POINTS_MAX. */
    uint64_t (*points)(const struct chring_prof *p, uint32_t weight, size_t members,
                       uint64_t total_weight);
    /* Writes the positions (profile width, unshifted) of the member's points [0, count): a pure
     * function of the name (the count comes from points() or counts()). */
    void (*positions)(const struct chring_prof *p, const char *name, size_t name_len,
                      uint64_t count, uint64_t *out);
};

/* Validates a configuration's profile fields and fills *out.  Returns 0 or -EINVAL. */
int chring__prof_init(struct chring_prof *out, const chring_config_t *cfg);
/* The descriptors, indexed by chring_profile_t. */
extern const struct chring_profile_desc chring__profiles[CHRING_PROFILE_COUNT];

/* ---- member.c (the word's operations are inline in member.h) ------------------------------ */

/* Byte order of names: memcmp, shorter first on a common prefix (docs/design.md §1). */
int chring__name_cmp(const char *a, size_t alen, const char *b, size_t blen);
/* Checks a member name: 0 and *len, -EINVAL (NULL, empty), -ENAMETOOLONG. */
int chring__name_check(const char *name, size_t *len);
chring_member_t *chring__member_new(const chring_t *r, const char *name, size_t len,
                                    uint32_t weight, void *udata);
void chring__member_discard(chring_member_t *m);
/* chring_free, once every member is freed: frees the pool's table (the chunks went with their
 * last members; a fork() child's members that stale snapshots keep stay, with their chunks). */
void chring__member_pool_drop(chring_t *r);
/* m's cold block, allocated (zeroed) the first time; NULL when out of memory.  Writer side, under
 * the ring lock. */
struct chring_member_cold *chring__member_cold(chring_member_t *m);
void chring__member_destroy(chring_member_t *m);
/* Sets m's ramp generation (health.c) to a new one (on) or to 0, keeping the ring's ramps_alive:
 * chring_set_ramp and slow start; the member's destroy and discard clear it. */
void chring__member_ramp_gen(chring_member_t *m, bool on);

/* ---- snap_block.c: snapshot blocks, the spare-block cache, destruction -------------------- */

extern const chring_snap_t chring__empty_snap;
/* A snapshot of this shape in one block (the spare block of `blocks` when it fits): header
 * filled from prof, members and weights copied, every array placed.  NULL when out of memory. */
chring_snap_t *chring__snap_alloc(struct chring_blocks *blocks, const struct chring_prof *prof,
                                  chring_member_t *const *members, const uint32_t *weights,
                                  size_t nmembers, size_t nslots, uint64_t total_weight,
                                  size_t npoints, size_t prev_buckets);
/* Frees a snapshot that was never published (no member references taken). */
void chring__snap_discard(chring_snap_t *s);
/* A chain node for a snapshot that drops ngone members of the current one; NULL when out of
 * memory.  Writer side. */
struct chring_chain *chring__chain_new(size_t ngone);
/* Publishes' bookkeeping, under the ring lock, once nothing can fail: next (whose node is node,
 * its gone filled) follows cur in the chain; the members that join (created, n) take their
 * reference. */
void chring__chain_link(chring_snap_t *cur, chring_snap_t *next, struct chring_chain *node,
                        chring_member_t *const *created, size_t n);
/* chring_free, after its grace period and barrier, before it drops last (the ring's last
 * snapshot): drops the references of last's members, which no later node drops, and of the
 * members in the chain that only snapshots destroyed since listed.  Snapshots still held then
 * (by threads a fork() left behind) keep theirs. */
void chring__chain_settle(struct chring_blocks *blocks, chring_snap_t *last);
/* Drops one snapshot reference; the last one destroys it (members unreferenced, block kept). */
void chring__snap_unref(chring_snap_t *s);
/* Destroys a snapshot whose last reference the caller dropped. */
void chring__snap_destroy(chring_snap_t *s);
/* Frees the spare block (chring_free). */
void chring__blocks_drop(struct chring_blocks *blocks);

/* A chunked snapshot of this shape (chunk.c): as chring__snap_alloc, with nbuckets buckets (a
 * power of two) in chunks of chring__chunk_shift(nbuckets), its table and directory placed,
 * every table entry to be filled by the caller; no chunk yet, swap NULL. */
chring_snap_t *chring__snap_alloc_chunked(struct chring_blocks *blocks,
                                          const struct chring_prof *prof,
                                          chring_member_t *const *members, const uint32_t *weights,
                                          size_t nmembers, size_t nslots, uint64_t total_weight,
                                          size_t npoints, size_t nbuckets);

/* ---- chunk.c: chunked snapshots (docs/design.md §4.2) ------------------------------------- */

/* The least points of a chunked ring: 2^22, or the environment's CHRING_CHUNK_MIN (read once: the
 * tests lower it so that small rings take chunks; 0: no ring is chunked). */
size_t chring__chunk_min(void);
/* Whether a snapshot of this profile, points and slots is chunked. */
bool chring__chunk_eligible(const struct chring_prof *prof, size_t npoints, size_t nslots);
/* The buckets of a chunked snapshot of npoints points: prev_buckets while it keeps 0.5 to 2
 * points a bucket (so that a publish keeps every chunk's geometry), else the power of two at or
 * above npoints (16 at least). */
size_t chring__chunk_buckets(size_t npoints, size_t prev_buckets);
/* log2 of the buckets a chunk covers, for nbuckets buckets. */
unsigned chring__chunk_shift(size_t nbuckets);
/* A chunk of npoints points for buckets of 2^shift a chunk (its arrays placed, not filled);
 * NULL when out of memory. */
struct chring_chunk *chring__chunk_alloc(size_t npoints, unsigned shift, uint32_t owner_w);
/* Once chunk c of s has its points: its sentinels, owner padding and bucket index. */
void chring__chunk_finish(const chring_snap_t *s, size_t c, struct chring_chunk *k);
/* Its sentinels and owner padding alone (a publish moves the old chunk's index instead). */
void chring__chunk_seal(struct chring_chunk *k);
/* Once s's table is filled (every entry and the last {NULL, npoints}): its directory. */
void chring__chunk_dir(chring_snap_t *s);
/* A swap list with room for made and gone chunks; NULL when out of memory. */
struct chring_chunk_swap *chring__chunk_swap_new(size_t made, size_t gone);
/* Frees a swap list and, with made, the chunks it made (a snapshot never published). */
void chring__chunk_swap_free(struct chring_chunk_swap *w, bool made);
/* Frees the chunks a swap list replaced (their last snapshot is gone) and empties it. */
void chring__chunk_free_gone(struct chring_chunk_swap *w);
/* Frees every chunk of s's table (the ring's last snapshot, at chring_free). */
void chring__chunk_free_all(const chring_snap_t *s);
/* A flat view of chunked s in *view (its points copied out; view's index empty, nbuckets 0), for
 * a publish that lays the ring out anew; freed with chring__chunk_expand_free.  0 or -ENOMEM. */
int chring__chunk_expand(const chring_snap_t *s, chring_snap_t *view);
void chring__chunk_expand_free(chring_snap_t *view);

/* ---- snap_sort.c: sorting points ---------------------------------------------------------- */

void chring__sort_points(size_t n, uint64_t *pos, uint32_t *owner, uint64_t *tpos,
                         uint32_t *towner);
/* The same for positions of 4 bytes (the top halves of a 32-bit profile's shifted positions). */
void chring__sort_points32(size_t n, uint32_t *pos, uint32_t *owner, uint32_t *tpos,
                           uint32_t *towner);

/* ---- index.c: the snapshot index, its geometry, search and building: src/index.h ---------- */

/* ---- snap_merge.c / snap_build.c ---------------------------------------------------------- */

/* The snapshot of prev's membership changed to `members` (sorted by name) when prev has points
 * and the profile is mergeable.  NULL and *err on failure. */
chring_snap_t *chring__snap_merge(struct chring_blocks *blocks, const struct chring_prof *prof,
                                  const chring_snap_t *prev, chring_member_t *const *members,
                                  const uint32_t *weights, size_t nmembers, uint64_t total_weight,
                                  int *err);
/* Builds the snapshot of this membership (members sorted by name), merging from prev (the current
 * snapshot) when the profile allows it.  The result takes no member reference (the publish does:
 * chring__chain_link) and is freed with chring__snap_discard if it is not published.  NULL and *err (-E2BIG, -ENOMEM) on failure, with nothing referenced. */
chring_snap_t *chring__snap_build(struct chring_blocks *blocks, const struct chring_prof *prof,
                                  const chring_snap_t *prev, chring_member_t *const *members,
                                  const uint32_t *weights, size_t nmembers, int *err);

/* ---- snap.c ------------------------------------------------------------------------------- */

/* Rank of member m in s (its index in s->members), or -1. */
long chring__snap_rank(const chring_snap_t *s, const chring_member_t *m);
/* Rank of the member named (name, len) in s, or -1: one binary search. */
long chring__snap_find_rank(const chring_snap_t *s, const char *name, size_t len);
/* The first rank >= from whose member's name is not below (name, len); nmembers if none is. */
size_t chring__snap_name_bound(const chring_snap_t *s, size_t from, const char *name, size_t len);

/* ---- health.c ----------------------------------------------------------------------------- */

/* The admission scale of a member with a ramp (m->ramp_gen != 0) now, in [0, 1]; may clear the
 * ramp once it has reached 1. */
double chring__member_ramp_scale(chring_member_t *m);
/* Starts the slow-start ramp of a member that is not published yet: 0 or -ENOMEM. */
int chring__member_slow_start(chring_member_t *m, double from, uint32_t ms);
/* The member of the first point from i clockwise that is up, or NULL if every member is down:
 * the slow path of chring__owner_up (find.h). */
const chring_member_t *chring__first_up(const chring_snap_t *s, size_t i);
/* Total weight the capacities count: the snapshot's, less that of the members down. */
uint64_t chring__up_weight(const chring_snap_t *s);
/* Writer side, under the ring lock: a ramp was set (or a member that ramps joined): a new epoch. */
void chring__ramps_changed(chring_t *r);
/* Writer side, under the ring lock: health changed: a new epoch if ramps run (cached sums). */
void chring__ramps_touch(chring_t *r);

/* ---- effective.c: effective weights (docs/design.md §3) ---------------------------------- */

/* How old a cached sum of effective weights may be. */
#define CHRING_EFF_MAX_AGE_NS UINT64_C(1000000)
/* CLOCK_MONOTONIC in nanoseconds (the vDSO: no system call).  Used by the ramps (health.c) and
 * the effective-weight cache (effective.c). */
static inline uint64_t chring__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}
/* Starts a detached thread running fn(arg) on a stack of `stack` bytes (0: the default): the
 * ring's trimmer (snap_block.c) and reclaimer (reclaim.c).  Returns whether it started. */
static inline bool chring__thread_detached(void *(*fn)(void *), void *arg, size_t stack)
{
    pthread_attr_t attr;
    pthread_t thread;
    bool started = false;
    if (pthread_attr_init(&attr) == 0) {
        if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
            (stack == 0 || pthread_attr_setstacksize(&attr, stack) == 0))
            started = pthread_create(&thread, &attr, fn, arg) == 0;
        pthread_attr_destroy(&attr);
    }
    return started;
}
/* A double's bits and back: how a scale or a sum is stored in a 64-bit atomic word. */
static inline uint64_t chring__double_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}
static inline double chring__bits_double(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}
/* E of s, a snapshot of r: the sum of s_j * w_j over the members of s that are up, cached in s
 * for at most CHRING_EFF_MAX_AGE_NS and while health->ramp_epoch stays `epoch`.  A sum that finds
 * no member of s ramping while no member object of r alive ramps (r->ramps_alive 0) clears the
 * ring's ramp_epoch.  Reader side. */
double chring__effective_weight(chring_t *r, const chring_snap_t *s, uint64_t epoch);

/* ---- report.c: reported load (docs/design.md §3, "Reported load") ---------------------- */

/* What s's members' reports add to m at time now (ns), for report sequence seq (non-zero):
 * cached in s while seq holds and no summed report has expired.  A sum over the current snapshot
 * that finds no report counting clears the ring's report_seq.  Reader side. */
uint64_t chring__report_sum(const chring_snap_t *s, uint64_t seq, uint64_t now);
/* What member m's report adds to its leases at time now: 0 when it has none or it expired. */
static inline uint64_t chring__report_extra(const chring_member_t *m, uint64_t now)
{
    uint64_t until = CHRING_LOAD_64(&m->rep_until_ns);
    return until > now ? CHRING_LOAD_64(&m->rep_extra) : 0;
}
/* Writer side, under the ring lock: drops m's report (it went down). */
void chring__report_drop(chring_t *r, chring_member_t *m);
/* Writer side, under the ring lock, before publishing a membership that m, listed by the current
 * snapshot, leaves: drops m's report (a report of a member gone is ignored, in every snapshot
 * that still lists it).  Called for the members that leave only (apply.c): O(changes). */
void chring__report_left(chring_t *r, chring_member_t *m);

/* ---- ghost.c: flaps (docs/design.md §3, "Flaps") ------------------------------------------- */

/* Writer side, under the ring lock, before publishing a membership that m, listed by the current
 * snapshot, leaves: lists m as a ghost if its leases (or its prev chain's) are out. */
void chring__ghost_leave(chring_t *r, chring_member_t *m);
/* Writer side, under the ring lock, after publishing: each new member whose name a ghost has
 * counts that ghost's leases (its prev). */
void chring__ghosts_link(chring_t *r, chring_member_t *const *created, size_t n);

/* ---- load.c ------------------------------------------------------------------------------- */

uint64_t chring__leases(chring_t *r);

/* ---- reclaim.c: replaced snapshots back at the end of their grace period ------------------- */

/* Initialises r->reclaim: 0, or -ENOMEM (nothing to undo). */
int chring__reclaim_init(chring_t *r);
/* Hands the snapshot just replaced (under r->lock) to the reclaimer, which drops its published
 * reference once a grace period has ended. */
void chring__reclaim_retire(chring_t *r, chring_snap_t *old);
/* chring_free, after its grace period: ends the thread, drops every snapshot still waiting
 * (oldest first) and destroys r->reclaim. */
void chring__reclaim_drain(chring_t *r);
/* The fork handlers: no batch half done across fork(); the child has no reclaimer thread. */
void chring__reclaim_before_fork(chring_t *r);
void chring__reclaim_after_fork(chring_t *r);

/* ---- fork.c ------------------------------------------------------------------------------- */

/* Registers the fork handlers (once) and the ring with them: 0 or -ENOMEM. */
int chring__fork_track(chring_t *r);
void chring__fork_untrack(chring_t *r);

/* ---- ring.c ------------------------------------------------------------------------------- */

/* Publishes next (built from cur = r->current, under r->lock) and retires cur after a grace
 * period. */
void chring__publish(chring_t *r, chring_snap_t *next);

#endif
