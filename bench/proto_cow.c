/* proto_cow: a prototype of a publish whose cost follows the change (issue 35, item 5;
 * docs/design.md, "Appendix: a publish that follows the change").
 *
 * SPDX-License-Identifier: MIT
 *
 * A standalone program, not the library: it builds rings of random 64-bit positions (N members
 * x V points, owner slots 0 .. N-1) in two layouts and compares them in one run, interleaved:
 *
 * - flat: today's shape.  Sorted positions pos[], owner slots owner[], and a line index: one
 *   64-byte line per about LINE_LOAD points, each listing its points' 16-bit offsets and owner
 *   slots (docs/design.md §4, "The line index").  A publish writes a whole new copy (points
 *   copied in runs, lines shifted, the lines round each change rewritten) into a spare block
 *   that is already faulted in (the library's best case: a spare at hand).
 * - chunked: the same lines cut into chunks of L lines; a chunk holds its lines (each line's
 *   first point counted from the chunk's start) and the points of those lines, exactly sized.
 *   A table of chunk pointers names them; consecutive tables share the chunks a publish did not
 *   touch.  A publish copies the table and only the chunks its changes fall in (copy-on-write),
 *   plus, when the first point of a chunk changes owner, the chunk before it (its last lines
 *   name that owner).  Chunks are counted by reference (a dense array of counts indexed by a
 *   chunk id kept beside each pointer), and a replaced table goes to liburcu-bp's call_rcu;
 *   its callback drops one reference per chunk and frees the chunks no table shares any more.
 *
 * The lines here carry 24-bit owner slots (16 low bits and 8 high bits in separate arrays), so
 * that one format serves 100,000 members; 12 entries (11 listed points) and about 7 points a
 * line.  The library's lines carry 16-bit slots (15 entries, 8 points a line).
 *
 * Lookups, pre-hashed (random 64-bit positions), thread CPU time:
 *   owner: the owner of a key by its line alone (what chring_snap_lookup does with lines);
 *   point: the first point at or after the key and its position and owner (what a walk starts
 *          from: the line, then the point arrays);
 *   throughput: independent keys; latency: each key depends on the previous answer.
 * Publishes (thread CPU and wall time, median and worst of 20): one member added / removed
 * (alternately), and 1 % of the members replaced by new ones / put back (alternately).  Before
 * timing, every layout is checked against a binary search of the flat positions on random keys,
 * after the build and after every publish round; a mismatch exits 1.
 *
 * Usage: proto_cow [--members N[,N...]] [--vnodes V] [--chunk L[,L...]] [--reps R]
 *                  [--lookups M] [--publishes P] [--no-reader]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <urcu-bp.h>

#include "common.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* -DPROTO_FIXED_LSHIFT=s builds the lookups for chunks of 2^s lines known at compile time, as a
 * library with one chunk size would have them (then --chunk must be 2^s). */
#ifndef PROTO_FIXED_LSHIFT
#define PROTO_FIXED_LSHIFT 0
#endif
#define LSHIFT(t) (PROTO_FIXED_LSHIFT ? (unsigned)PROTO_FIXED_LSHIFT : (t)->lshift)

/* -DPROTO_PLANT=1 or 2 plants a bug that the checks must catch (docs/bench.md, "Prototypes"). */
#ifndef PROTO_PLANT
#define PROTO_PLANT 0
#endif

/* ---- utilities ---------------------------------------------------------------------------- */

static uint64_t now_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Point i of member m: a pure function, so a removal can generate the positions again. */
static uint64_t point_pos(uint32_t m, uint32_t i)
{
    return mix64(((uint64_t)m << 24 | i) * 0x9e3779b97f4a7c15ull + 0x1234567u);
}

/* Minor page faults of the calling thread so far. */
static long thread_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_minflt + ru.ru_majflt : -1;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "proto_cow: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

/* AnonHugePages of this process, kB (-1 if unknown). */
static long huge_kb(void)
{
    long kb = -1;
    char line[256];
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "proto_cow: CHECK FAILED: %s\n", what);
        exit(1);
    }
}

/* A point: position and owner slot.  Points sort by position (64-bit random positions: the
 * prototype's rings have no equal positions, checked at the build). */
struct pt {
    uint64_t pos;
    uint32_t slot;
};

/* LSD radix sort by pos, 16 bits a pass. */
static void sort_points(struct pt *a, size_t n)
{
    struct pt *tmp = xmalloc(n * sizeof *tmp);
    size_t *count = xmalloc(65536 * sizeof *count);
    for (unsigned shift = 0; shift < 64; shift += 16) {
        memset(count, 0, 65536 * sizeof *count);
        for (size_t i = 0; i < n; i++)
            count[(a[i].pos >> shift) & 0xffff]++;
        size_t sum = 0;
        for (size_t d = 0; d < 65536; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            tmp[count[(a[i].pos >> shift) & 0xffff]++] = a[i];
        struct pt *t = a;
        a = tmp;
        tmp = t;
    }
    /* four passes: the sorted data is back in the caller's array */
    free(tmp);
    free(count);
}

static size_t pos_search(const uint64_t *pos, size_t lo, size_t hi, uint64_t h)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pos[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The first index >= lo whose position is >= h: galloping from lo (changes are sorted, so the
 * merge's searches move forward). */
static size_t pos_gallop(const uint64_t *pos, size_t lo, size_t n, uint64_t h)
{
    size_t step = 1, hi = lo;
    while (hi < n && pos[hi] < h) {
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    return pos_search(pos, lo, hi < n ? hi : n, h);
}

/* ---- lines -------------------------------------------------------------------------------- */

#define LINE_ENTRIES 12
#define LINE_POINTS (LINE_ENTRIES - 1)
#define LINE_LOAD 7
#define LINE_FULL UINT32_C(0x80000000)
#define LINE_PAD UINT16_C(0xffff)

struct line {
    uint32_t first; /* first point of the line (flat: of the ring; chunked: of the chunk) */
    uint16_t off[LINE_ENTRIES];
    uint16_t slot_lo[LINE_ENTRIES];
    uint8_t slot_hi[LINE_ENTRIES];
};
_Static_assert(sizeof(struct line) == 64, "a line is one cache line");

static inline uint32_t line_slot(const struct line *l, unsigned e)
{
    return l->slot_lo[e] | (uint32_t)l->slot_hi[e] << 16;
}

static inline size_t line_of(uint64_t h, uint64_t nlines)
{
    return (size_t)(((h >> 32) * nlines) >> 32);
}

static inline uint16_t line_off(uint64_t h, uint64_t nlines)
{
    return (uint16_t)((uint32_t)((h >> 32) * nlines) >> 16);
}

/* The entries below key offset k: a prefix (offsets sorted, pads above all). */
static inline unsigned line_below(const struct line *l, uint16_t k)
{
#if defined(__SSE2__)
    const __m128i key = _mm_set1_epi16((short)k), zero = _mm_setzero_si128();
    __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)&l->off[0]);
    __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)&l->off[8]);
    unsigned ge = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_subs_epu16(key, lo), zero)) |
                  (((unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_subs_epu16(key, hi), zero)) &
                    0xffu) << 16) |
                  (1u << 24);
    return (unsigned)__builtin_ctz(ge) / 2;
#else
    unsigned e = 0;
    while (l->off[e] < k)
        e++;
    return e;
#endif
}

/* Encodes line b (global number) from point i of pos/owner (n points); `next` is the owner of
 * the first point after pos[n - 1] (the next chunk's, or the ring's first).  Returns the first
 * point after the line. */
static size_t line_encode(struct line *l, const uint64_t *pos, const uint32_t *owner, size_t n,
                          size_t i, size_t b, uint64_t nlines, uint32_t next)
{
    size_t end = i;
    while (end < n && line_of(pos[end], nlines) == b)
        end++;
    size_t count = end - i, listed = count <= LINE_POINTS ? count : 0;
    l->first = (uint32_t)i | (count > LINE_POINTS ? LINE_FULL : 0);
    for (size_t e = 0; e < listed; e++) {
        l->off[e] = line_off(pos[i + e], nlines);
        l->slot_lo[e] = (uint16_t)owner[i + e];
        l->slot_hi[e] = (uint8_t)(owner[i + e] >> 16);
    }
    uint32_t after = end < n ? owner[end] : next;
    for (size_t e = listed; e < LINE_ENTRIES; e++) {
        l->off[e] = LINE_PAD;
        l->slot_lo[e] = (uint16_t)after;
        l->slot_hi[e] = (uint8_t)(after >> 16);
    }
    return end;
}

/* ---- the flat layout ---------------------------------------------------------------------- */

struct flat {
    size_t n, cap;
    uint64_t nlines;
    uint64_t *pos;      /* cap + 1 (a sentinel) */
    uint32_t *owner;    /* cap */
    struct line *lines; /* nlines + 1: the last one's first is n */
};

static void flat_alloc(struct flat *f, size_t cap, uint64_t nlines)
{
    f->cap = cap;
    f->nlines = nlines;
    f->pos = xmalloc((cap + 1) * sizeof *f->pos);
    f->owner = xmalloc(cap * sizeof *f->owner);
    f->lines = aligned_alloc(64, (nlines + 1) * sizeof *f->lines);
    check(f->lines != NULL, "aligned_alloc");
    /* fault every page in: the spare block of the library is written once before use */
    memset(f->pos, 0, (cap + 1) * sizeof *f->pos);
    memset(f->owner, 0, cap * sizeof *f->owner);
    memset(f->lines, 0, (nlines + 1) * sizeof *f->lines);
}

static void flat_free(struct flat *f)
{
    free(f->pos);
    free(f->owner);
    free(f->lines);
}

static void flat_encode(struct flat *f, size_t b0, size_t b1)
{
    size_t i = pos_search(f->pos, 0, f->n, (((uint64_t)b0 << 32) + f->nlines - 1) / f->nlines << 32);
    for (size_t b = b0; b <= b1; b++)
        i = line_encode(&f->lines[b], f->pos, f->owner, f->n, i, b, f->nlines, f->owner[0]);
}

static void flat_finish(struct flat *f)
{
    f->pos[f->n] = UINT64_MAX;
    struct line *end = &f->lines[f->nlines];
    memset(end, 0xff, sizeof *end);
    end->first = (uint32_t)f->n;
}

static inline uint32_t flat_owner(const struct flat *f, uint64_t h)
{
    uint64_t at = (h >> 32) * f->nlines;
    const struct line *l = &f->lines[at >> 32];
    uint16_t k = (uint16_t)((uint32_t)at >> 16);
    unsigned below = line_below(l, k);
    if (__builtin_expect((l->first & LINE_FULL) != 0 || l->off[below] == k, 0)) {
        size_t first = l->first & ~LINE_FULL, hi = l[1].first & ~LINE_FULL;
        size_t i = pos_search(f->pos, first, hi, h);
        return f->owner[i == f->n ? 0 : i];
    }
    return line_slot(l, below);
}

/* The first point at or after h: its position and owner, folded into one word. */
static inline uint64_t flat_point(const struct flat *f, uint64_t h)
{
    uint64_t at = (h >> 32) * f->nlines;
    const struct line *l = &f->lines[at >> 32];
    uint16_t k = (uint16_t)((uint32_t)at >> 16);
    unsigned below = line_below(l, k);
    size_t first = l->first & ~LINE_FULL, i;
    if (__builtin_expect((l->first & LINE_FULL) != 0 || l->off[below] == k, 0))
        i = pos_search(f->pos, first, l[1].first & ~LINE_FULL, h);
    else
        i = first + below;
    if (i == f->n)
        i = 0;
    return f->pos[i] ^ f->owner[i];
}

/* The reference answer: a binary search of the sorted positions. */
static inline uint32_t flat_owner_ref(const struct flat *f, uint64_t h)
{
    size_t i = pos_search(f->pos, 0, f->n, h);
    return f->owner[i == f->n ? 0 : i];
}

/* A change: points added and removed, each sorted by position. */
struct change {
    struct pt *add, *rem;
    size_t nadd, nrem;
};

/* Merges old (pos/owner, on points) with a change into npos/nown: runs of old points copied
 * whole.  Returns the new count. */
static size_t merge_points(const uint64_t *opos, const uint32_t *oown, size_t on,
                           const struct pt *add, size_t nadd, const struct pt *rem, size_t nrem,
                           uint64_t *npos, uint32_t *nown)
{
    size_t i = 0, o = 0, ka = 0, kr = 0;
    while (ka < nadd || kr < nrem) {
        bool take_add = kr == nrem || (ka < nadd && add[ka].pos < rem[kr].pos);
        uint64_t p = take_add ? add[ka].pos : rem[kr].pos;
        size_t j = pos_gallop(opos, i, on, p);
        memcpy(npos + o, opos + i, (j - i) * sizeof *npos);
        memcpy(nown + o, oown + i, (j - i) * sizeof *nown);
        o += j - i;
        i = j;
        if (take_add) {
            npos[o] = p;
            nown[o++] = add[ka++].slot;
        } else {
            check(i < on && opos[i] == p && oown[i] == rem[kr].slot, "a removed point is there");
            i++;
            kr++;
        }
    }
    memcpy(npos + o, opos + i, (on - i) * sizeof *npos);
    memcpy(nown + o, oown + i, (on - i) * sizeof *nown);
    return o + on - i;
}

/* The flat publish: next = cur changed by c (next is a spare block of the same geometry). */
static void flat_publish(struct flat *next, const struct flat *cur, const struct change *c)
{
    next->n = merge_points(cur->pos, cur->owner, cur->n, c->add, c->nadd, c->rem, c->nrem,
                           next->pos, next->owner);
    check(next->n <= next->cap, "flat capacity");
    /* shift: line b's first moves by the changes in lines before b */
    const uint64_t nl = cur->nlines;
    size_t ka = 0, kr = 0;
    uint32_t delta = 0;
    for (size_t b = 0; b < nl;) {
        size_t nb = nl; /* the next line holding a change, + 1 */
        if (ka < c->nadd && line_of(c->add[ka].pos, nl) + 1 < nb)
            nb = line_of(c->add[ka].pos, nl) + 1;
        if (kr < c->nrem && line_of(c->rem[kr].pos, nl) + 1 < nb)
            nb = line_of(c->rem[kr].pos, nl) + 1;
        for (; b < nb; b++) {
            next->lines[b] = cur->lines[b];
            next->lines[b].first = (cur->lines[b].first & LINE_FULL) |
                                   ((cur->lines[b].first + delta) & ~LINE_FULL);
        }
        while (ka < c->nadd && line_of(c->add[ka].pos, nl) + 1 == nb)
            delta++, ka++;
        while (kr < c->nrem && line_of(c->rem[kr].pos, nl) + 1 == nb)
            delta--, kr++;
    }
    flat_finish(next);
    /* rewrite the lines round each change: from the line of the point before the changed line's
     * first point (its pads name the owner after it) to the changed line */
    size_t done = SIZE_MAX; /* the last line rewritten */
    ka = kr = 0;
    while (ka < c->nadd || kr < c->nrem) {
        bool take_add = kr == c->nrem || (ka < c->nadd && c->add[ka].pos < c->rem[kr].pos);
        uint64_t p = take_add ? c->add[ka++].pos : c->rem[kr++].pos;
        size_t b = line_of(p, nl);
        if (b == done)
            continue;
        size_t first = next->lines[b].first & ~LINE_FULL;
        size_t before = first == 0 ? next->n - 1 : first - 1;
        size_t b0 = next->n ? line_of(next->pos[before], nl) : 0;
#if PROTO_PLANT == 2 /* a planted bug (docs/bench.md, "Prototypes"): only the changed line */
        b0 = b;
#endif
        if (b0 > b) { /* wraps: the ring's last lines name the first point's owner */
            flat_encode(next, b0, nl - 1);
            b0 = 0;
        }
        if (done != SIZE_MAX && b0 <= done && done < b)
            b0 = done + 1;
        flat_encode(next, b0, b);
        done = b;
    }
}

/* ---- the chunked layout ------------------------------------------------------------------- */

/* A chunk: lines [c*L, c*L + L) of the ring and their points.  Immutable once published. */
struct chunk {
    uint32_t npoints;
    uint32_t nlines; /* L, or fewer in the ring's last chunk */
    uint64_t *pos;   /* npoints + 1 (a sentinel) */
    uint32_t *owner;
    uint64_t pad_[5];
    struct line lines[]; /* then pos, then owner, in the same allocation */
};
_Static_assert(offsetof(struct chunk, lines) == 64, "lines start on a cache line");

/* Chunk ids and their reference counts: a dense array, so that a publish's pass over the
 * table's counts stays in the cache.  Ids are recycled through a free list (writer and the
 * call_rcu thread: a mutex, off the read side). */
struct chunk_refs {
    _Atomic uint32_t *refs;
    uint32_t *free_ids;
    size_t nfree, cap, next_id;
    pthread_mutex_t lock;
    /* accounting */
    _Atomic int64_t live_bytes, live_chunks;
    _Atomic uint64_t freed_chunks, callbacks;
    /* from call_rcu to its callback, ms, for the last DELAYS callbacks (the call_rcu thread) */
    double delays[64];
};

/* A table: the chunk pointers and their ids.  Replaced tables go to call_rcu. */
struct table {
    struct rcu_head rcu;
    uint64_t retired_ns; /* when it went to call_rcu */
    struct chunk_refs *cr;
    uint64_t nlines;
    unsigned lshift; /* L = 1 << lshift */
    size_t nchunks;
    uint32_t *ids;
    struct chunk *chunk[];
};

static uint32_t id_get(struct chunk_refs *cr)
{
    pthread_mutex_lock(&cr->lock);
    uint32_t id;
    if (cr->nfree > 0)
        id = cr->free_ids[--cr->nfree];
    else {
        check(cr->next_id < cr->cap, "chunk ids");
        id = (uint32_t)cr->next_id++;
    }
    pthread_mutex_unlock(&cr->lock);
    return id;
}

static void id_put(struct chunk_refs *cr, uint32_t id)
{
    pthread_mutex_lock(&cr->lock);
    cr->free_ids[cr->nfree++] = id;
    pthread_mutex_unlock(&cr->lock);
}

static struct chunk *chunk_new(struct chunk_refs *cr, uint32_t nlines, size_t npoints)
{
    size_t bytes = sizeof(struct chunk) + nlines * sizeof(struct line) +
                   (npoints + 1) * sizeof(uint64_t) + npoints * sizeof(uint32_t);
    struct chunk *ch = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    check(ch != NULL, "chunk alloc");
    ch->npoints = (uint32_t)npoints;
    ch->nlines = nlines;
    ch->pos = (uint64_t *)(void *)&ch->lines[nlines];
    ch->owner = (uint32_t *)(void *)(ch->pos + npoints + 1);
    ch->pos[npoints] = UINT64_MAX;
    atomic_fetch_add(&cr->live_bytes, (int64_t)malloc_usable_size(ch));
    atomic_fetch_add(&cr->live_chunks, 1);
    return ch;
}

static void chunk_free(struct chunk_refs *cr, struct chunk *ch)
{
    atomic_fetch_sub(&cr->live_bytes, (int64_t)malloc_usable_size(ch));
    atomic_fetch_sub(&cr->live_chunks, 1);
    atomic_fetch_add(&cr->freed_chunks, 1);
    free(ch);
}

static struct table *table_new(struct chunk_refs *cr, uint64_t nlines, unsigned lshift)
{
    size_t nchunks = (size_t)((nlines + ((uint64_t)1 << lshift) - 1) >> lshift);
    struct table *t = xmalloc(sizeof *t + nchunks * sizeof(struct chunk *));
    t->cr = cr;
    t->nlines = nlines;
    t->lshift = lshift;
    t->nchunks = nchunks;
    t->ids = xmalloc(nchunks * sizeof *t->ids);
    atomic_fetch_add(&cr->live_bytes, (int64_t)(malloc_usable_size(t) + malloc_usable_size(t->ids)));
    return t;
}

static void table_drop(struct table *t)
{
    struct chunk_refs *cr = t->cr;
    for (size_t c = 0; c < t->nchunks; c++)
        if (atomic_fetch_sub_explicit(&cr->refs[t->ids[c]], 1, memory_order_acq_rel) == 1) {
            chunk_free(cr, t->chunk[c]);
            id_put(cr, t->ids[c]);
        }
    atomic_fetch_sub(&cr->live_bytes, (int64_t)(malloc_usable_size(t) + malloc_usable_size(t->ids)));
    free(t->ids);
    free(t);
}

static void table_reclaim(struct rcu_head *head)
{
    struct table *t = caa_container_of(head, struct table, rcu);
    uint64_t k = atomic_fetch_add(&t->cr->callbacks, 1);
    t->cr->delays[k % 64] = (double)(now_ns(CLOCK_MONOTONIC) - t->retired_ns) / 1e6;
    table_drop(t);
}

/* The owner of the first point at or after chunk c (wrapping). */
static uint32_t next_owner(const struct table *t, size_t c)
{
    for (size_t k = 0; k < t->nchunks; k++) {
        const struct chunk *ch = t->chunk[(c + k) % t->nchunks];
        if (ch->npoints > 0)
            return ch->owner[0];
    }
    return 0;
}

/* Encodes the chunk's lines from local line j0 on. */
static void chunk_encode(const struct table *t, struct chunk *ch, size_t c, size_t j0)
{
    uint32_t next = next_owner(t, c + 1);
    size_t b0 = (c << t->lshift) + j0;
    size_t i = j0 == 0 ? 0 : pos_search(ch->pos, 0, ch->npoints, ((((uint64_t)b0 << 32) + t->nlines - 1) / t->nlines) << 32);
    for (size_t j = j0; j < ch->nlines; j++)
        i = line_encode(&ch->lines[j], ch->pos, ch->owner, ch->npoints, i, b0 + j - j0, t->nlines, next);
}

/* The chunked layout of a flat ring (every chunk new, one reference each). */
static struct table *chunked_build(struct chunk_refs *cr, const struct flat *f, unsigned lshift)
{
    struct table *t = table_new(cr, f->nlines, lshift);
    size_t L = (size_t)1 << lshift;
    for (size_t c = 0; c < t->nchunks; c++) {
        size_t b0 = c * L, b1 = b0 + L < f->nlines ? b0 + L : f->nlines;
        size_t i0 = f->lines[b0].first & ~LINE_FULL, i1 = f->lines[b1].first & ~LINE_FULL;
        struct chunk *ch = chunk_new(cr, (uint32_t)(b1 - b0), i1 - i0);
        memcpy(ch->pos, f->pos + i0, (i1 - i0) * sizeof *ch->pos);
        memcpy(ch->owner, f->owner + i0, (i1 - i0) * sizeof *ch->owner);
        t->chunk[c] = ch;
        t->ids[c] = id_get(cr);
        atomic_store(&cr->refs[t->ids[c]], 1);
    }
    for (size_t c = 0; c < t->nchunks; c++)
        chunk_encode(t, t->chunk[c], c, 0);
    return t;
}

static inline uint32_t chunked_owner(const struct table *t, uint64_t h)
{
    uint64_t at = (h >> 32) * t->nlines;
    size_t b = (size_t)(at >> 32);
    const struct chunk *ch = t->chunk[b >> LSHIFT(t)];
    size_t j = b & (((size_t)1 << LSHIFT(t)) - 1);
    const struct line *l = &ch->lines[j];
    uint16_t k = (uint16_t)((uint32_t)at >> 16);
    unsigned below = line_below(l, k);
    if (__builtin_expect((l->first & LINE_FULL) != 0 || l->off[below] == k, 0)) {
        size_t first = l->first & ~LINE_FULL;
        size_t hi = j + 1 < ch->nlines ? l[1].first & ~LINE_FULL : ch->npoints;
        size_t i = pos_search(ch->pos, first, hi, h);
        return i < ch->npoints ? ch->owner[i] : next_owner(t, (b >> LSHIFT(t)) + 1);
    }
    return line_slot(l, below);
}

static inline uint64_t chunked_point(const struct table *t, uint64_t h)
{
    uint64_t at = (h >> 32) * t->nlines;
    size_t b = (size_t)(at >> 32);
    const struct chunk *ch = t->chunk[b >> LSHIFT(t)];
    size_t j = b & (((size_t)1 << LSHIFT(t)) - 1);
    const struct line *l = &ch->lines[j];
    uint16_t k = (uint16_t)((uint32_t)at >> 16);
    unsigned below = line_below(l, k);
    size_t first = l->first & ~LINE_FULL, i;
    if (__builtin_expect((l->first & LINE_FULL) != 0 || l->off[below] == k, 0))
        i = pos_search(ch->pos, first, j + 1 < ch->nlines ? l[1].first & ~LINE_FULL : ch->npoints, h);
    else
        i = first + below;
    if (__builtin_expect(i == ch->npoints, 0)) { /* the next chunk's first point (wrapping) */
        size_t c = b >> LSHIFT(t);
        do {
            c = (c + 1) % t->nchunks;
            ch = t->chunk[c];
        } while (ch->npoints == 0);
        i = 0;
    }
    return ch->pos[i] ^ ch->owner[i];
}

/* Publish statistics of one chunked publish. */
struct cow_stats {
    size_t touched, padfix, bytes_copied;
    double ref_ms; /* the pass over the shared chunks' counts */
};

/* The chunked publish: a new table that shares every chunk c does not touch. */
static struct table *chunked_publish(const struct table *cur, const struct change *c,
                                     struct cow_stats *st)
{
    struct chunk_refs *cr = cur->cr;
    struct table *t = table_new(cr, cur->nlines, cur->lshift);
    memcpy(t->chunk, cur->chunk, cur->nchunks * sizeof *t->chunk);
    memcpy(t->ids, cur->ids, cur->nchunks * sizeof *t->ids);
    const unsigned ls = cur->lshift;
    const uint64_t nl = cur->nlines;
    /* touched[k]: the chunks the change falls in, ascending (added and removed are sorted) */
    size_t *touched = xmalloc((c->nadd + c->nrem + 2) * sizeof *touched), nt = 0;
    size_t ka = 0, kr = 0;
    memset(st, 0, sizeof *st);
    while (ka < c->nadd || kr < c->nrem) {
        size_t ca = ka < c->nadd ? line_of(c->add[ka].pos, nl) >> ls : SIZE_MAX;
        size_t cc = kr < c->nrem ? line_of(c->rem[kr].pos, nl) >> ls : SIZE_MAX;
        size_t ch = ca < cc ? ca : cc;
        size_t a0 = ka, r0 = kr;
        while (ka < c->nadd && line_of(c->add[ka].pos, nl) >> ls == ch)
            ka++;
        while (kr < c->nrem && line_of(c->rem[kr].pos, nl) >> ls == ch)
            kr++;
        const struct chunk *old = cur->chunk[ch];
        struct chunk *nw = chunk_new(cr, old->nlines, old->npoints + (ka - a0) - (kr - r0));
        size_t n = merge_points(old->pos, old->owner, old->npoints, c->add + a0, ka - a0,
                                c->rem + r0, kr - r0, nw->pos, nw->owner);
        check(n == nw->npoints, "chunk merge count");
        t->chunk[ch] = nw;
        t->ids[ch] = id_get(cr);
        atomic_store_explicit(&cr->refs[t->ids[ch]], 1, memory_order_relaxed);
        touched[nt++] = ch;
        st->bytes_copied += old->nlines * sizeof(struct line) + n * 12;
    }
    /* lines, from the last touched chunk back, so that the chunk after is final; a chunk whose
     * first owner changed makes the non-empty chunk before it rewrite its last lines (copied
     * first when the change did not touch it) */
    for (size_t k = nt; k-- > 0;) {
        size_t ch = touched[k];
        chunk_encode(t, t->chunk[ch], ch, 0);
        uint32_t now = next_owner(t, ch);
        size_t p = (ch + t->nchunks - 1) % t->nchunks;
        for (size_t steps = 0; steps < t->nchunks; steps++, p = (p + t->nchunks - 1) % t->nchunks) {
            bool is_touched = t->chunk[p] != cur->chunk[p];
            struct chunk *pc = t->chunk[p];
            size_t lastj = pc->nlines - 1;
            if (!is_touched) {
#if PROTO_PLANT == 1 /* a planted bug (docs/bench.md, "Prototypes"): no pad fix */
                break;
#endif
                if (line_slot(&pc->lines[lastj], LINE_POINTS) == now)
                    break; /* it already names the right owner */
                struct chunk *cp = chunk_new(cr, pc->nlines, pc->npoints);
                memcpy(cp->lines, pc->lines, pc->nlines * sizeof(struct line) +
                       (pc->npoints + 1) * sizeof(uint64_t) + pc->npoints * sizeof(uint32_t));
                t->chunk[p] = cp;
                t->ids[p] = id_get(cr);
                atomic_store_explicit(&cr->refs[t->ids[p]], 1, memory_order_relaxed);
                st->padfix++;
                st->bytes_copied += pc->nlines * sizeof(struct line) + pc->npoints * 12;
                pc = cp;
            }
            size_t j0 = pc->npoints ? (line_of(pc->pos[pc->npoints - 1], nl) - (p << ls)) : 0;
            chunk_encode(t, pc, p, j0);
            if (pc->npoints > 0)
                break;
        }
    }
    st->touched = nt;
    /* the shared chunks gain the new table's reference */
    uint64_t r0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    for (size_t ch = 0; ch < t->nchunks; ch++)
        if (t->chunk[ch] == cur->chunk[ch])
            atomic_fetch_add_explicit(&cr->refs[t->ids[ch]], 1, memory_order_relaxed);
    st->ref_ms = (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - r0) / 1e6;
    free(touched);
    return t;
}

/* ---- changes ------------------------------------------------------------------------------ */

static int cmp_pt(const void *a, const void *b)
{
    const struct pt *x = a, *y = b;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* The points of members ms[0..nm) (V each), sorted, into out (allocated). */
static struct pt *member_points(const uint32_t *ms, size_t nm, uint32_t vnodes, size_t *count)
{
    struct pt *p = xmalloc((nm * vnodes + 1) * sizeof *p);
    size_t n = 0;
    for (size_t k = 0; k < nm; k++)
        for (uint32_t i = 0; i < vnodes; i++)
            p[n++] = (struct pt){point_pos(ms[k], i), ms[k]};
    if (n > 4096)
        sort_points(p, n);
    else
        qsort(p, n, sizeof *p, cmp_pt);
    *count = n;
    return p;
}

/* ---- measurement -------------------------------------------------------------------------- */

struct layouts {
    struct flat *flat;
    size_t nt;
    struct table **tables; /* published pointers (rcu_assign_pointer), one per chunk size */
};

enum lk { LK_FLAT_OWNER, LK_FLAT_POINT, LK_FLAT_BATCH, LK_CHUNK_OWNER, LK_CHUNK_POINT, LK_CHUNK_BATCH };

/* A prefetch the compiler keeps (docs/design.md §4, "Batches": __builtin_prefetch may be dropped). */
static inline void prefetch(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p);
#endif
}

#define BATCH 16
/* Where key h's line is (flat, or through the table): the first pass of a batch. */
static inline const struct line *flat_line(const struct flat *f, uint64_t h)
{
    return &f->lines[((h >> 32) * f->nlines) >> 32];
}
static inline const struct line *chunked_line(const struct table *t, uint64_t h)
{
    size_t b = (size_t)(((h >> 32) * t->nlines) >> 32);
    return &t->chunk[b >> LSHIFT(t)]->lines[b & (((size_t)1 << LSHIFT(t)) - 1)];
}

/* M lookups of kind k; latency: the next key depends on the answer.  Returns ns per lookup. */
static double run_lookups(const struct layouts *ly, enum lk k, size_t which, size_t m, bool latency,
                          uint64_t seed, uint64_t *sink)
{
    uint64_t h = seed, acc = 0, st = seed;
    const struct flat *f = ly->flat;
    const struct table *t = k >= LK_CHUNK_OWNER ? ly->tables[which] : NULL;
    if (k == LK_FLAT_BATCH || k == LK_CHUNK_BATCH) {
        /* batches of 16: every key's line prefetched, then every key resolved; in latency, a
         * batch's keys depend on the previous batch's answers */
        uint64_t keys[BATCH];
        uint64_t t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        for (size_t q = 0; q + BATCH <= m; q += BATCH) {
            uint64_t got = 0;
            for (int i = 0; i < BATCH; i++) {
                keys[i] = latency ? (h = mix64(h + acc)) : mix64(st += 0x9e3779b97f4a7c15ull);
                prefetch(k == LK_FLAT_BATCH ? flat_line(f, keys[i]) : chunked_line(t, keys[i]));
            }
            for (int i = 0; i < BATCH; i++)
                got += k == LK_FLAT_BATCH ? flat_owner(f, keys[i]) : chunked_owner(t, keys[i]);
            acc = latency ? got : acc + got;
        }
        *sink += acc;
        return (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / (double)(m - m % BATCH);
    }
    uint64_t t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    /* one loop per kind, so that nothing but the lookup differs between the layouts */
#define LOOKUPS(call)                                                                              \
    do {                                                                                           \
        if (latency)                                                                               \
            for (size_t q = 0; q < m; q++) {                                                       \
                uint64_t key = h = mix64(h + acc);                                                 \
                acc = call;                                                                        \
            }                                                                                      \
        else                                                                                       \
            for (size_t q = 0; q < m; q++) {                                                       \
                uint64_t key = mix64(st += 0x9e3779b97f4a7c15ull);                                 \
                acc += call;                                                                       \
            }                                                                                      \
    } while (0)
    switch (k) {
    case LK_FLAT_OWNER: LOOKUPS(flat_owner(f, key)); break;
    case LK_FLAT_POINT: LOOKUPS(flat_point(f, key)); break;
    case LK_CHUNK_OWNER: LOOKUPS(chunked_owner(t, key)); break;
    default: LOOKUPS(chunked_point(t, key)); break;
    }
#undef LOOKUPS
    *sink += acc;
    return (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / (double)m;
}

/* Checks every layout against the reference on `keys` random keys. */
static void verify(const struct layouts *ly, size_t keys, uint64_t seed, const char *when)
{
    for (size_t q = 0; q < keys; q++) {
        uint64_t h = mix64(seed + q * 0x9e3779b97f4a7c15ull);
        if (q < 64) /* the edges: round the wrap, a point's own position */
            h = q < 16 ? UINT64_MAX - q : q < 32 ? q - 16 : ly->flat->pos[(q * 7919) % ly->flat->n];
        uint32_t want = flat_owner_ref(ly->flat, h);
        size_t i = pos_search(ly->flat->pos, 0, ly->flat->n, h);
        if (i == ly->flat->n)
            i = 0;
        uint64_t wantp = ly->flat->pos[i] ^ ly->flat->owner[i];
        char what[160];
        snprintf(what, sizeof what, "%s: flat owner of key %zu", when, q);
        check(flat_owner(ly->flat, h) == want, what);
        check(flat_point(ly->flat, h) == wantp, what);
        for (size_t w = 0; w < ly->nt; w++) {
            snprintf(what, sizeof what, "%s: chunked (layout %zu) owner of key %zu", when, w, q);
            check(chunked_owner(ly->tables[w], h) == want, what);
            check(chunked_point(ly->tables[w], h) == wantp, what);
        }
    }
}

/* Checks one key in every layout against the reference. */
static void verify_key(const struct layouts *ly, uint64_t h, const char *when)
{
    const struct flat *f = ly->flat;
    size_t i = pos_search(f->pos, 0, f->n, h);
    if (i == f->n)
        i = 0;
    char what[160];
    snprintf(what, sizeof what, "%s: key 0x%016llx", when, (unsigned long long)h);
    check(flat_owner(f, h) == f->owner[i], what);
    check(flat_point(f, h) == (f->pos[i] ^ f->owner[i]), what);
    for (size_t w = 0; w < ly->nt; w++) {
        check(chunked_owner(ly->tables[w], h) == f->owner[i], what);
        check(chunked_point(ly->tables[w], h) == (f->pos[i] ^ f->owner[i]), what);
    }
}

/* The keys a publish could have got wrong: at and round every changed position, and just above
 * the point before it (the arc whose owner the lines' padding names); and just above every
 * chunk's last point (the arc a chunk's last lines name the next chunk's owner for). */
static void verify_around(const struct layouts *ly, const struct change *c, const char *when)
{
    const struct flat *f = ly->flat;
    for (int side = 0; side < 2; side++) {
        const struct pt *v = side ? c->rem : c->add;
        size_t nv = side ? c->nrem : c->nadd;
        for (size_t k = 0; k < nv; k++) {
            uint64_t p = v[k].pos;
            verify_key(ly, p - 1, when);
            verify_key(ly, p, when);
            verify_key(ly, p + 1, when);
            size_t i = pos_search(f->pos, 0, f->n, p);
            size_t before = (i == 0 ? f->n : i) - 1;
            verify_key(ly, f->pos[before] + 1, when);
        }
    }
    for (size_t w = 0; w < ly->nt; w++) {
        const struct table *t = ly->tables[w];
        for (size_t ch = 0; ch < t->nchunks; ch++)
            if (t->chunk[ch]->npoints > 0)
                verify_key(ly, t->chunk[ch]->pos[t->chunk[ch]->npoints - 1] + 1, when);
    }
}

/* A reader thread: lookups in read sections on the published tables, while the writer
 * publishes (so that grace periods are those of a ring under reader load). */
struct reader {
    struct layouts *ly;
    _Atomic int stop;
    uint64_t lookups, sink;
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    urcu_bp_register_thread();
    uint64_t h = 1, n = 0;
    while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
        urcu_bp_read_lock();
        for (size_t w = 0; w < r->ly->nt; w++) {
            const struct table *t = rcu_dereference(r->ly->tables[w]);
            for (int q = 0; q < 64; q++)
                h = mix64(h + chunked_owner(t, h));
        }
        urcu_bp_read_unlock();
        n += 64 * r->ly->nt;
    }
    r->lookups = n;
    r->sink = h;
    return NULL;
}

static void print_row_ms(const char *what, double *v, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        worst = v[i] > worst ? v[i] : worst;
    printf(" %s median %.3f worst %.3f |", what, bench_median(v, n), worst);
}

static void size_run(uint32_t nmembers, uint32_t vnodes, const unsigned *lshifts, size_t nls,
                     int reps, size_t lookups, int publishes, bool with_reader)
{
    const size_t n = (size_t)nmembers * vnodes;
    const uint64_t nlines = n / LINE_LOAD;
    printf("\n## %u x %u: %zu points, %llu lines of 64 B (%.2f points a line), load average %.2f\n",
           nmembers, vnodes, n, (unsigned long long)nlines, (double)n / (double)nlines, bench_loadavg());
    fflush(stdout);

    /* the ring: every point, sorted */
    uint64_t b0 = now_ns(CLOCK_MONOTONIC);
    struct pt *all = xmalloc(n * sizeof *all);
    for (uint32_t m = 0, k = 0; m < nmembers; m++)
        for (uint32_t i = 0; i < vnodes; i++)
            all[k++] = (struct pt){point_pos(m, i), m};
    sort_points(all, n);
    for (size_t i = 1; i < n; i++)
        check(all[i - 1].pos < all[i].pos, "positions are distinct");
    const size_t cap = n + n / 16 + 1024;
    struct flat flats[2];
    flat_alloc(&flats[0], cap, nlines);
    flat_alloc(&flats[1], cap, nlines); /* the spare: already faulted in */
    struct flat *cur = &flats[0];
    cur->n = n;
    for (size_t i = 0; i < n; i++) {
        cur->pos[i] = all[i].pos;
        cur->owner[i] = all[i].slot;
    }
    free(all);
    flat_finish(cur);
    flat_encode(cur, 0, nlines - 1);
    double flat_build_ms = (double)(now_ns(CLOCK_MONOTONIC) - b0) / 1e6;

    struct chunk_refs *crs = xmalloc(nls * sizeof *crs);
    struct layouts ly = {cur, nls, xmalloc(nls * sizeof(struct table *))};
    for (size_t w = 0; w < nls; w++) {
        struct chunk_refs *cr = &crs[w];
        memset(cr, 0, sizeof *cr);
        size_t nch = (size_t)((nlines >> lshifts[w]) + 1);
        cr->cap = nch * 4 + 4096;
        cr->refs = xmalloc(cr->cap * sizeof *cr->refs);
        cr->free_ids = xmalloc(cr->cap * sizeof *cr->free_ids);
        pthread_mutex_init(&cr->lock, NULL);
        uint64_t c0 = now_ns(CLOCK_MONOTONIC);
        struct table *t = chunked_build(cr, cur, lshifts[w]);
        ly.tables[w] = t;
        double ms = (double)(now_ns(CLOCK_MONOTONIC) - c0) / 1e6;
        printf("# chunked L=%u lines (%.0f points, %.1f KiB a chunk): %zu chunks, table %.1f KiB "
               "(pointers) + %.1f KiB (ids), built from the flat ring in %.0f ms\n",
               1u << lshifts[w], (double)n / (double)t->nchunks,
               (double)cr->live_bytes / (double)t->nchunks / 1024.0, t->nchunks,
               (double)t->nchunks * 8 / 1024.0, (double)t->nchunks * 4 / 1024.0, ms);
    }
    printf("# flat ring built (positions generated, radix-sorted, lines encoded) in %.0f ms\n",
           flat_build_ms);
    printf("# transparent huge pages of the process after the build: %ld kB\n", huge_kb());
    verify(&ly, 200000, 42, "after the build");
    printf("# checked: 200000 keys, every layout's owner and first point equal a binary search's\n");

    /* memory per point */
    printf("\nmemory per point (bytes; malloc_usable_size of every allocation):\n\n");
    printf("| layout | points + owners | lines | chunk headers, slack, table, counts | total |\n|---|---|---|---|---|\n");
    printf("| flat | %.2f | %.2f | 0 | %.2f |\n", 12.0 + 8.0 / (double)n,
           (double)(nlines + 1) * 64 / (double)n, 12.0 + (double)(nlines + 1) * 64 / (double)n);
    for (size_t w = 0; w < nls; w++) {
        const struct table *t = ly.tables[w];
        double total = (double)(crs[w].live_bytes + (int64_t)(crs[w].cap * 8)) / (double)n; /* counts and free ids */
        double lines = (double)nlines * 64 / (double)n;
        printf("| chunked, L=%u | %.2f | %.2f | %.2f | %.2f |\n", 1u << t->lshift, 12.0, lines,
               total - 12.0 - lines, total);
    }

    /* lookups: every variant, interleaved rep by rep; variant v is layout v / 3 (0: flat, then
     * each chunk size) and kind v % 3 (owner, point, batch of 16) */
    size_t nvar = 3 * (1 + nls);
    double *res = xmalloc(nvar * 2 * (size_t)reps * sizeof *res);
    uint64_t sink = 0;
    for (int r = 0; r < reps; r++)
        for (int lat = 0; lat < 2; lat++)
            for (size_t v = 0; v < nvar; v++) {
                enum lk k = (enum lk)((v >= 3 ? 3 : 0) + v % 3);
                res[(v * 2 + (size_t)lat) * (size_t)reps + (size_t)r] =
                    run_lookups(&ly, k, v >= 3 ? v / 3 - 1 : 0, lookups, lat, 7 + (uint64_t)r, &sink);
            }
    printf("\nlookups, ns each (pre-hashed random keys, thread CPU time, median of %d interleaved reps of %zu), load average %.2f:\n\n",
           reps, lookups, bench_loadavg());
    printf("| layout | owner, throughput | owner, latency | point, throughput | point, latency | batch of 16, throughput | batch of 16, latency |\n|---|---|---|---|---|---|---|\n");
    double flat_med[6];
    for (size_t layout = 0; layout <= nls; layout++) {
        double row[6]; /* owner tp, owner lat, point tp, point lat, batch tp, batch lat */
        for (int q = 0; q < 6; q++)
            row[q] = bench_median(&res[((layout * 3 + (size_t)(q / 2)) * 2 + (size_t)(q % 2)) * (size_t)reps],
                            (size_t)reps);
        if (layout == 0) {
            memcpy(flat_med, row, sizeof row);
            printf("| flat | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", row[0], row[1], row[2],
                   row[3], row[4], row[5]);
        } else {
            printf("| chunked, L=%u |", 1u << lshifts[layout - 1]);
            for (int q = 0; q < 6; q++)
                printf(" %.1f (%.2fx) |", row[q], row[q] / flat_med[q]);
            printf("\n");
        }
    }
    free(res);

    /* publishes */
    struct reader rd = {&ly, 0, 0, 0};
    pthread_t rt;
    if (with_reader)
        check(pthread_create(&rt, NULL, reader_main, &rd) == 0, "reader thread");
    const char *kinds[2] = {"one member (added / removed)", "1 % of members (replaced / put back)"};
    for (int kind = 0; kind < 2; kind++) {
        /* the change and its inverse */
        uint32_t nch = kind == 0 ? 1 : nmembers / 100;
        uint32_t *gone = xmalloc(nch * sizeof *gone), *fresh = xmalloc(nch * sizeof *fresh);
        uint64_t sel = 99;
        for (uint32_t k = 0; k < nch; k++) {
            fresh[k] = nmembers + k;
            gone[k] = (uint32_t)(mix64(sel += 0x9e3779b97f4a7c15ull) % nmembers);
            for (uint32_t j = 0; j < k; j++)
                if (gone[j] == gone[k]) {
                    k--;
                    break;
                }
        }
        uint64_t g0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        struct change fwd, back;
        fwd.add = member_points(fresh, nch, vnodes, &fwd.nadd);
        if (kind == 0) {
            fwd.rem = NULL;
            fwd.nrem = 0;
        } else {
            fwd.rem = member_points(gone, nch, vnodes, &fwd.nrem);
        }
        double gen_ms = (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - g0) / 1e6;
        back = (struct change){fwd.rem, fwd.add, fwd.nrem, fwd.nadd};
        double *fl_cpu = xmalloc((size_t)publishes * sizeof(double)),
               *fl_wall = xmalloc((size_t)publishes * sizeof(double));
        double *ck_cpu = xmalloc(nls * (size_t)publishes * sizeof(double)),
               *ck_wall = xmalloc(nls * (size_t)publishes * sizeof(double));
        double *ref_ms = xmalloc(nls * (size_t)publishes * sizeof(double));
        double *fl_flt = xmalloc((size_t)publishes * sizeof(double));
        double *ck_flt = xmalloc(nls * (size_t)publishes * sizeof(double));
        size_t *touched = xmalloc(nls * (size_t)publishes * sizeof(size_t)),
               *padfix = xmalloc(nls * (size_t)publishes * sizeof(size_t));
        double *copied = xmalloc(nls * (size_t)publishes * sizeof(double));
        int64_t *peak = calloc(nls, sizeof *peak);
        uint64_t *maxwait = calloc(nls, sizeof *maxwait);
        uint64_t *cb0 = xmalloc(nls * sizeof *cb0), *fr0 = xmalloc(nls * sizeof *fr0);
        int64_t *live_before = xmalloc(nls * sizeof *live_before);
        for (size_t w = 0; w < nls; w++) {
            rcu_barrier(); /* the previous kind's tables are gone */
            cb0[w] = atomic_load(&crs[w].callbacks);
            fr0[w] = atomic_load(&crs[w].freed_chunks);
            live_before[w] = atomic_load(&crs[w].live_bytes);
        }
        for (int p = 0; p < publishes; p++) {
            const struct change *c = p % 2 == 0 ? &fwd : &back;
            struct flat *next = cur == &flats[0] ? &flats[1] : &flats[0];
            long f0 = thread_faults();
            uint64_t w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
            flat_publish(next, cur, c);
            fl_cpu[p] = (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / 1e6;
            fl_flt[p] = (double)(thread_faults() - f0);
            fl_wall[p] = (double)(now_ns(CLOCK_MONOTONIC) - w0) / 1e6;
            cur = next;
            ly.flat = cur;
            for (size_t w = 0; w < nls; w++) {
                struct cow_stats st;
                f0 = thread_faults();
                w0 = now_ns(CLOCK_MONOTONIC);
                c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
                struct table *old = ly.tables[w];
                struct table *t = chunked_publish(old, c, &st);
                rcu_assign_pointer(ly.tables[w], t);
                old->retired_ns = now_ns(CLOCK_MONOTONIC);
                urcu_bp_call_rcu(&old->rcu, table_reclaim);
                uint64_t waiting = (uint64_t)p + 1 - (atomic_load(&crs[w].callbacks) - cb0[w]);
                if (waiting > maxwait[w])
                    maxwait[w] = waiting;
                size_t ix = w * (size_t)publishes + (size_t)p;
                ck_cpu[ix] = (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / 1e6;
                ck_wall[ix] = (double)(now_ns(CLOCK_MONOTONIC) - w0) / 1e6;
                ck_flt[ix] = (double)(thread_faults() - f0);
                ref_ms[ix] = st.ref_ms;
                touched[ix] = st.touched;
                padfix[ix] = st.padfix;
                copied[ix] = (double)st.bytes_copied / 1e6;
                int64_t live = atomic_load(&crs[w].live_bytes) - live_before[w];
                if (live > peak[w])
                    peak[w] = live;
            }
        }
        /* check after the round (the writer's own view; the reader is still going): random
         * keys, and the keys round the last publish's change */
        verify(&ly, 20000, 1000 + (uint64_t)kind, kinds[kind]);
        verify_around(&ly, publishes % 2 ? &fwd : &back, kinds[kind]);
        printf("\npublish of %s, %d back to back (the reader thread %s), load average %.2f; "
               "change list generated and sorted outside the timing (%zu points added, %zu removed; "
               "%.2f ms):\n\n",
               kinds[kind], publishes, with_reader ? "looking up in read sections" : "off",
               bench_loadavg(), fwd.nadd, fwd.nrem, gen_ms);
        printf("| layout | CPU ms | wall ms | chunks copied (touched + pad) | MB written | refcount pass ms | pending at the peak (MB over the ring) | grace periods (call_rcu) per publish; tables waiting at most | call_rcu to callback ms, median / worst | chunks freed per callback |\n|---|---|---|---|---|---|---|---|---|---|\n");
        printf("| flat (whole copy into a faulted spare) |");
        print_row_ms("", fl_cpu, (size_t)publishes);
        print_row_ms("", fl_wall, (size_t)publishes);
        printf(" all | %.1f | - | - (one whole block per publish) | - | - | - |\n",
               (double)cur->n * 12 / 1e6 + (double)nlines * 64 / 1e6);
        for (size_t w = 0; w < nls; w++) {
            rcu_barrier();
            size_t base = w * (size_t)publishes;
            double tmed[64], pmed[64];
            for (int p = 0; p < publishes && p < 64; p++) {
                tmed[p] = (double)touched[base + (size_t)p];
                pmed[p] = (double)padfix[base + (size_t)p];
            }
            double tm = bench_median(tmed, (size_t)(publishes < 64 ? publishes : 64));
            double pm = bench_median(pmed, (size_t)(publishes < 64 ? publishes : 64));
            uint64_t cbs = atomic_load(&crs[w].callbacks) - cb0[w];
            uint64_t frs = atomic_load(&crs[w].freed_chunks) - fr0[w];
            printf("| chunked, L=%u |", 1u << lshifts[w]);
            print_row_ms("", &ck_cpu[base], (size_t)publishes);
            print_row_ms("", &ck_wall[base], (size_t)publishes);
            printf(" %.0f + %.0f | %.2f (median) |", tm, pm, bench_median(&copied[base], (size_t)publishes));
            size_t nd = cbs < 64 ? (size_t)cbs : 64;
            double dl[64], dworst = 0;
            for (size_t q = 0; q < nd; q++) /* this kind's callbacks: cb0[w] on */
                dl[q] = crs[w].delays[(cb0[w] + cbs - nd + q) % 64];
            for (size_t q = 0; q < nd; q++)
                dworst = dl[q] > dworst ? dl[q] : dworst;
            printf(" %.3f (median) | %.1f | %.2f; %llu | %.1f / %.1f | %.1f |\n",
                   bench_median(&ref_ms[base], (size_t)publishes), (double)peak[w] / 1e6,
                   (double)cbs / publishes, (unsigned long long)maxwait[w],
                   nd ? bench_median(dl, nd) : 0.0, dworst, cbs ? (double)frs / (double)cbs : 0.0);
        }
        printf("\npage faults of the writer thread per publish, median / max:");
        {
            double worst = 0;
            for (int p = 0; p < publishes; p++)
                worst = fl_flt[p] > worst ? fl_flt[p] : worst;
            printf(" flat %.0f / %.0f;", bench_median(fl_flt, (size_t)publishes), worst);
            for (size_t w = 0; w < nls; w++) {
                double *v = &ck_flt[w * (size_t)publishes];
                worst = 0;
                for (int p = 0; p < publishes; p++)
                    worst = v[p] > worst ? v[p] : worst;
                printf(" L=%u %.0f / %.0f;", 1u << lshifts[w], bench_median(v, (size_t)publishes), worst);
            }
            printf("\n");
        }
        fflush(stdout);
        free(fl_flt);
        free(ck_flt);
        free(fwd.add);
        free(fwd.rem);
        free(gone);
        free(fresh);
        free(fl_cpu);
        free(fl_wall);
        free(ck_cpu);
        free(ck_wall);
        free(ref_ms);
        free(touched);
        free(padfix);
        free(copied);
        free(peak);
        free(maxwait);
        free(cb0);
        free(fr0);
        free(live_before);
    }
    if (with_reader) {
        atomic_store(&rd.stop, 1);
        pthread_join(rt, NULL);
        printf("\n# the reader thread did %llu lookups in read sections during the publishes\n",
               (unsigned long long)rd.lookups);
    }
    for (size_t w = 0; w < nls; w++) {
        struct table *t = ly.tables[w];
        table_drop(t);
        rcu_barrier();
        check(crs[w].live_chunks == 0, "every chunk freed once its last table went");
        free(crs[w].refs);
        free(crs[w].free_ids);
    }
    free(crs);
    free(ly.tables);
    flat_free(&flats[0]);
    flat_free(&flats[1]);
    if (sink == 42)
        printf("#\n");
}

static size_t parse_list(const char *s, unsigned *out, size_t max)
{
    size_t n = 0;
    while (*s && n < max) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s)
            break;
        out[n++] = (unsigned)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv)
{
    unsigned members[8] = {10000, 100000}, chunks[8] = {64, 256};
    size_t nm = 2, nc = 2;
    unsigned vnodes = 160;
    int reps = 7, publishes = 20;
    size_t lookups = 2000000;
    bool with_reader = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--members") && i + 1 < argc)
            nm = parse_list(argv[++i], members, 8);
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc)
            nc = parse_list(argv[++i], chunks, 8);
        else if (!strcmp(argv[i], "--vnodes") && i + 1 < argc)
            vnodes = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lookups") && i + 1 < argc)
            lookups = (size_t)atoll(argv[++i]);
        else if (!strcmp(argv[i], "--publishes") && i + 1 < argc)
            publishes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-reader"))
            with_reader = false;
        else {
            fprintf(stderr,
                    "usage: %s [--members N[,N...]] [--vnodes V] [--chunk L[,L...]] [--reps R]\n"
                    "          [--lookups M] [--publishes P] [--no-reader]\n",
                    argv[0]);
            return 2;
        }
    }
    unsigned lshifts[8];
    for (size_t w = 0; w < nc; w++) {
        unsigned s = 0;
        while ((1u << s) < chunks[w])
            s++;
        if ((1u << s) != chunks[w] || s < 1 || s > 16) {
            fprintf(stderr, "proto_cow: --chunk takes powers of two from 2 to 65536\n");
            return 2;
        }
        lshifts[w] = s;
        if (PROTO_FIXED_LSHIFT && s != PROTO_FIXED_LSHIFT) {
            fprintf(stderr, "proto_cow: built for chunks of %u lines only\n", 1u << PROTO_FIXED_LSHIFT);
            return 2;
        }
    }
    if (nm == 0 || nc == 0 || vnodes == 0 || reps < 1 || publishes < 2 || lookups == 0) {
        fprintf(stderr, "proto_cow: bad arguments\n");
        return 2;
    }
    printf("# proto_cow: chunked copy-on-write lines against the flat layout (docs/design.md, appendix)\n");
    printf("# 2 threads may share the machine with other work: ratios come from one interleaved run\n");
    printf("# load average %.2f at the start; GLIBC_TUNABLES=%s (glibc.malloc.hugetlb=1: malloc asks\n"
           "# for transparent huge pages, for the flat arrays and the chunks alike)\n",
           bench_loadavg(), getenv("GLIBC_TUNABLES") ? getenv("GLIBC_TUNABLES") : "(unset)");
    urcu_bp_register_thread();
    for (size_t k = 0; k < nm; k++)
        size_run(members[k], vnodes, lshifts, nc, reps, lookups, publishes, with_reader);
    return 0;
}
