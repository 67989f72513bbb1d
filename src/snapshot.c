/* Immutable snapshots: built from a membership set, never changed after they are published.
 * SPDX-License-Identifier: MIT
 *
 * Design note.
 * - A snapshot is one allocation: its header, the members sorted by name with their weights and
 *   point counts, the slot table, the points sorted by (position, member name) and a
 *   prefix-bucket index.  Breaking position ties by name makes the ring a pure function of the
 *   membership (Karger et al. 1997); only the fnv16 profile, which skips taken positions in join
 *   order, depends on history, as SPEC §2 says.  A point names its member by slot, which a member
 *   keeps across snapshots, so a publish can copy unchanged points verbatim (build_merge).
 * - Reference counts (shared/notes/lifetime.md): a snapshot is born with one reference, owned by
 *   the ring's published pointer and dropped by an RCU callback after the grace period that
 *   follows its replacement; chring_snap_hold adds one.  A snapshot holds one reference (the high
 *   half of the member's word) on each member it lists and drops them when it is destroyed.
 *   Leases hold the low half.  Whoever brings a member's word to zero retires and frees it, so
 *   retire runs exactly once, and never while a reader, a lease or a held snapshot can reach it.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

const chring_snap_t chring__empty_snap = {
    .magic = CHRING_SNAP_MAGIC,
    .refs = 1,
    .profile = CHRING_PROFILE_HASH64,
    .bits = 64,
    .shift = 0,
    .vnodes = CHRING_DEFAULT_VNODES,
    .index_bits = 1,
};

/* ---- members ------------------------------------------------------------------------------ */

void chring__member_destroy(chring_member_t *m)
{
    if (m->retire != NULL)
        m->retire(m->udata, m->retire_ctx);
    m->magic = CHRING_POISON;
    chring__free_aligned(m);
}

void chring__member_unref_snap(chring_member_t *m)
{
    /* Full barrier (lock xadd): every read of the member by this snapshot's users happened before,
     * and the thread that sees the word reach zero sees every earlier update. */
    uint64_t old = ck_pr_faa_64(&m->word, (uint64_t)0 - CHRING_SNAP_REF);
    if (old == CHRING_SNAP_REF)
        chring__member_destroy(m);
}

/* ---- sorting ------------------------------------------------------------------------------ */

/* Stable LSD radix sort of (pos, owner) pairs by pos, 8 bits a pass; passes whose byte is the
 * same for every key are skipped (the low 32 bits of a 32-bit profile's shifted positions).
 * Stability keeps the generation order (member index) among equal positions.  The result ends
 * in (pos, owner); (tpos, towner) is scratch of the same size. */
static void radix_sort(size_t n, uint64_t *pos, uint32_t *owner, uint64_t *tpos, uint32_t *towner)
{
    uint64_t *src_p = pos, *dst_p = tpos;
    uint32_t *src_o = owner, *dst_o = towner;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        size_t count[256] = {0};
        for (size_t i = 0; i < n; i++)
            count[(src_p[i] >> shift) & 0xff]++;
        bool skip = false;
        for (unsigned b = 0; b < 256; b++)
            if (count[b] == n)
                skip = true;
        if (skip)
            continue;
        size_t sum = 0;
        for (unsigned b = 0; b < 256; b++) {
            size_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) {
            size_t at = count[(src_p[i] >> shift) & 0xff]++;
            dst_p[at] = src_p[i];
            dst_o[at] = src_o[i];
        }
        uint64_t *tp = src_p;
        src_p = dst_p;
        dst_p = tp;
        uint32_t *to = src_o;
        src_o = dst_o;
        dst_o = to;
    }
    if (src_p != pos) {
        memcpy(pos, src_p, n * sizeof *pos);
        memcpy(owner, src_o, n * sizeof *owner);
    }
}

/* Bits of the prefix index for n points: the largest k with 2^k <= 3n, so 1.5 to 3 buckets per
 * point: 6 to 12 bytes per point of index, which keeps a 1000 x 160 ring within 24 bytes per
 * point with its 12 bytes of position and owner; at least 1, at most the profile's width and
 * 24 (a 64 MiB index would leave every cache). */
static unsigned index_bits_for(size_t n, unsigned width)
{
    unsigned k = 0;
    while (k < 63 && ((size_t)2 << k) <= 3 * n)
        k++;
    if (k < 1)
        k = 1;
    if (k > width)
        k = width;
    if (k > 24)
        k = 24;
    return k;
}

/* Builds index[b] = first point whose top k bits are >= b, with a histogram and a prefix sum. */
static void build_index(chring_snap_t *s)
{
    s->pos[s->npoints] = UINT64_MAX; /* the search's sentinel */
    size_t buckets = (size_t)1 << s->index_bits;
    uint32_t *index = s->index;
    memset(index, 0, (buckets + 1) * sizeof *index);
    for (size_t i = 0; i < s->npoints; i++)
        index[(s->pos[i] >> (64 - s->index_bits)) + 1]++;
    for (size_t b = 0; b < buckets; b++)
        index[b + 1] += index[b];
}

/* The index of s from prev's when few points changed: bucket b starts after prev's start plus
 * the added points of lower buckets, minus the removed ones (both lists sorted by position).
 * Between two changed buckets the offset is constant, so the work is a vectorisable add over
 * runs of buckets; the caller checks that index_bits are the same. */
static void shift_index(chring_snap_t *s, const chring_snap_t *prev, const uint64_t *added,
                        size_t nadded, const uint64_t *removed, size_t nremoved)
{
    s->pos[s->npoints] = UINT64_MAX; /* the search's sentinel */
    const unsigned shift = 64 - s->index_bits;
    const size_t end = ((size_t)1 << s->index_bits) + 1;
    const uint32_t *src = prev->index;
    uint32_t *dst = s->index;
    uint32_t delta = 0; /* wraps for a net removal */
    size_t b = 0, ka = 0, kr = 0;
    for (;;) {
        /* Buckets up to the next changed one (inclusive) keep the current offset: a change in
         * bucket c moves the starts of buckets c + 1 and later. */
        size_t next = end;
        if (ka < nadded && (size_t)(added[ka] >> shift) + 1 < next)
            next = (size_t)(added[ka] >> shift) + 1;
        if (kr < nremoved && (size_t)(removed[kr] >> shift) + 1 < next)
            next = (size_t)(removed[kr] >> shift) + 1;
        for (; b < next; b++)
            dst[b] = src[b] + delta;
        if (next == end)
            break;
        while (ka < nadded && (size_t)(added[ka] >> shift) + 1 == next)
            delta++, ka++;
        while (kr < nremoved && (size_t)(removed[kr] >> shift) + 1 == next)
            delta--, kr++;
    }
}

/* ---- building ----------------------------------------------------------------------------- */

static int name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c != 0)
        return c;
    return (alen > blen) - (alen < blen);
}

struct layout {
    size_t members_off, slot_member_off, pos_off, weights_off, mpoints_off, mslot_off;
    size_t slot_weight_off, slot_rank_off, owner_off, index_off, size;
};

static size_t align_up(size_t x, size_t a)
{
    return (x + a - 1) & ~(a - 1);
}

static struct layout layout_for(size_t nmembers, size_t nslots, size_t npoints, unsigned index_bits)
{
    struct layout l;
    size_t at = align_up(sizeof(chring_snap_t), 16);
    l.members_off = at;
    at += nmembers * sizeof(chring_member_t *);
    l.slot_member_off = at;
    at += nslots * sizeof(chring_member_t *);
    l.pos_off = at = align_up(at, 16);
    at += (npoints + 1) * sizeof(uint64_t); /* + the sentinel */
    l.weights_off = at;
    at += nmembers * sizeof(uint32_t);
    l.mpoints_off = at;
    at += nmembers * sizeof(uint32_t);
    l.mslot_off = at;
    at += nmembers * sizeof(uint32_t);
    l.slot_weight_off = at;
    at += nslots * sizeof(uint32_t);
    l.slot_rank_off = at;
    at += nslots * sizeof(uint32_t);
    l.owner_off = at;
    at += npoints * sizeof(uint32_t);
    l.index_off = at;
    at += (((size_t)1 << index_bits) + 1) * sizeof(uint32_t);
    l.size = at;
    return l;
}

static int cmp_join(const void *a, const void *b, void *members)
{
    chring_member_t *const *m = members;
    uint64_t x = m[*(const uint32_t *)a]->join_seq, y = m[*(const uint32_t *)b]->join_seq;
    return (x > y) - (x < y);
}

/* Sorts member indices by join order (insertion sort: fnv16 rings are small). */
static void sort_by_join(uint32_t *order, size_t n, chring_member_t *const *members)
{
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    for (size_t i = 1; i < n; i++) {
        uint32_t v = order[i];
        size_t j = i;
        while (j > 0 && cmp_join(&order[j - 1], &v, (void *)members) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
}

/* Profiles whose points are a pure function of (name, weight): a publish can keep the points of
 * unchanged members and merge in the new ones.  fnv16 (join order), ketama (point counts depend on
 * the membership) and nginx (equal positions dropped, so a removal can uncover a dropped point)
 * rebuild. */
static bool mergeable(const chring_snap_t *shape)
{
    switch (shape->profile) {
    case CHRING_PROFILE_FNV16:
    case CHRING_PROFILE_KETAMA:
    case CHRING_PROFILE_NGINX: return false;
    default: return true;
    }
}

/* The spare-block cache.  A snapshot of a large ring is megabytes; allocating it fresh for every
 * publish costs a page fault per 4 KiB (measured here: about 730 faults, 0.7-1 ms, for one add at
 * 1000 x 160, as much as the merge itself).  So the block of the last destroyed snapshot (after
 * its grace period and last put) is kept in r->spare and reused by the next publish when its size
 * fits.  In AddressSanitizer builds the kept block is poisoned, so a use after the grace period is
 * still reported as it would be after free(). */
#if defined(__SANITIZE_ADDRESS__)
#define CHRING_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHRING_ASAN 1
#endif
#endif
#ifdef CHRING_ASAN
#include <sanitizer/asan_interface.h>
#define BLOCK_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define BLOCK_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define BLOCK_POISON(p, n) ((void)(p), (void)(n))
#define BLOCK_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static void block_free(chring_snap_t *b)
{
    BLOCK_UNPOISON(b, b->block_size);
    chring__free(b);
}

static void block_stash(chring_snap_t *s)
{
    chring_t *r = s->ring;
    if (r == NULL) {
        chring__free(s);
        return;
    }
    BLOCK_POISON((char *)s + sizeof *s, s->block_size - sizeof *s);
    /* Exchange (full barrier): whoever takes the block sees it complete. */
    chring_snap_t *old = ck_pr_fas_ptr(&r->spare, s);
    if (old != NULL) {
        BLOCK_UNPOISON(old, sizeof *old);
        block_free(old);
    }
}

/* A block of at least size bytes: the spare one when it fits (and is not more than twice the
 * need, so a shrunken ring does not pin a big block), else a new allocation. */
static char *block_take(chring_t *r, size_t size, size_t *got)
{
    chring_snap_t *b = r == NULL ? NULL : ck_pr_fas_ptr(&r->spare, NULL);
    if (b != NULL) {
        BLOCK_UNPOISON(b, sizeof *b);
        if (b->block_size >= size && b->block_size / 2 <= size) {
            *got = b->block_size;
            BLOCK_UNPOISON(b, b->block_size);
            return (char *)b;
        }
        block_free(b);
    }
    *got = size;
    return chring__alloc(size);
}

void chring__snap_drop_spare(chring_t *r)
{
    chring_snap_t *b = ck_pr_fas_ptr(&r->spare, NULL);
    if (b != NULL) {
        BLOCK_UNPOISON(b, sizeof *b);
        block_free(b);
    }
}

static chring_snap_t *snap_alloc(const chring_snap_t *shape, chring_member_t *const *members,
                                 const uint32_t *weights, size_t nmembers, size_t nslots,
                                 uint64_t total_weight, size_t npoints)
{
    unsigned index_bits = index_bits_for(npoints, shape->bits);
    struct layout l = layout_for(nmembers, nslots, npoints, index_bits);
    size_t got;
    char *block = block_take(shape->ring, l.size, &got);
    if (block == NULL)
        return NULL;
    chring_snap_t *s = (chring_snap_t *)(void *)block;
    *s = *shape;
    s->block_size = got;
    s->magic = CHRING_SNAP_MAGIC;
    s->refs = 1;
    s->nmembers = nmembers;
    s->total_weight = total_weight;
    s->members = (chring_member_t **)(void *)(block + l.members_off);
    s->weights = (uint32_t *)(void *)(block + l.weights_off);
    s->member_points = (uint32_t *)(void *)(block + l.mpoints_off);
    s->member_slot = (uint32_t *)(void *)(block + l.mslot_off);
    s->nslots = nslots;
    s->slot_member = (chring_member_t **)(void *)(block + l.slot_member_off);
    s->slot_weight = (uint32_t *)(void *)(block + l.slot_weight_off);
    s->slot_rank = (uint32_t *)(void *)(block + l.slot_rank_off);
    s->pos = (uint64_t *)(void *)(block + l.pos_off);
    s->owner = (uint32_t *)(void *)(block + l.owner_off);
    s->npoints = npoints;
    s->index_bits = index_bits;
    s->index = (uint32_t *)(void *)(block + l.index_off);
    if (nmembers > 0) {
        memcpy(s->members, members, nmembers * sizeof *members);
        memcpy(s->weights, weights, nmembers * sizeof *weights);
    }
    return s;
}

static void take_member_refs(chring_snap_t *s)
{
    for (size_t j = 0; j < s->nmembers; j++)
        ck_pr_faa_64(&s->members[j]->word, CHRING_SNAP_REF);
}

/* Slot j for the member of rank j: the numbering of a snapshot built from scratch. */
static void identity_slots(chring_snap_t *s)
{
    for (size_t j = 0; j < s->nmembers; j++) {
        s->member_slot[j] = (uint32_t)j;
        s->slot_member[j] = s->members[j];
        s->slot_weight[j] = s->weights[j];
        s->slot_rank[j] = (uint32_t)j;
    }
}

/* The merge path.  Points name their member by slot, and a member keeps its slot from snapshot
 * to snapshot, so the points of members whose object and weight are unchanged are copied from
 * prev as they are: runs of memcpy between the places where the (few) new points go, found by
 * binary search.  New and re-weighted members' points are generated and sorted; removed and
 * re-weighted members' old points are dropped while copying.  The index is shifted rather than
 * rebuilt.  Measured at 1000 x 160 in bench/ (chring-bench-publish). */
static chring_snap_t *build_merge(const chring_snap_t *shape, const chring_snap_t *prev,
                                  chring_member_t *const *members, const uint32_t *weights,
                                  size_t nmembers, uint64_t total_weight, int *err)
{
    /* Scratch head: the new members' slots and whether each keeps its points, which old slots
     * drop theirs, and a free-slot cursor. */
    size_t head = nmembers * 2 * sizeof(uint32_t) + prev->nslots;
    uint32_t *slot_of = chring__alloc(head ? head : 1);
    if (slot_of == NULL) {
        *err = -ENOMEM;
        return NULL;
    }
    uint32_t *keeps = slot_of + nmembers; /* 1: same object and weight, points copied */
    unsigned char *drop = (unsigned char *)(keeps + nmembers);
    memset(drop, 0, prev->nslots);

    size_t kept = 0, fresh = 0, gone = 0, ia = 0, free_cursor = 0, nslots = prev->nslots;
    for (size_t j = 0; j <= nmembers; j++) {
        /* Old members ordered before this one are removed. */
        while (ia < prev->nmembers &&
               (j == nmembers || name_cmp(prev->members[ia]->name, prev->members[ia]->name_len,
                                          members[j]->name, members[j]->name_len) < 0)) {
            drop[prev->member_slot[ia]] = 1;
            gone += prev->member_points[ia];
            ia++;
        }
        if (j == nmembers)
            break;
        keeps[j] = 0;
        if (ia < prev->nmembers && prev->members[ia] == members[j]) {
            slot_of[j] = prev->member_slot[ia];
            if (prev->weights[ia] == weights[j]) {
                keeps[j] = 1;
                kept += prev->member_points[ia];
            } else {
                drop[slot_of[j]] = 1; /* re-weighted: its points are generated afresh */
                gone += prev->member_points[ia];
                fresh += (size_t)chring__profile_points(shape, weights[j], nmembers, total_weight);
            }
            ia++;
            continue;
        }
        /* A new member takes a slot no member of prev holds, else a new one.  (A slot freed in
         * this batch is not reused: its old points are still being dropped by slot.) */
        while (free_cursor < prev->nslots && prev->slot_member[free_cursor] != NULL)
            free_cursor++;
        slot_of[j] = free_cursor < prev->nslots ? (uint32_t)free_cursor++ : (uint32_t)nslots++;
        fresh += (size_t)chring__profile_points(shape, weights[j], nmembers, total_weight);
    }

    size_t npoints = kept + fresh;
    chring_snap_t *s = snap_alloc(shape, members, weights, nmembers, nslots, total_weight, npoints);
    /* Scratch: two runs of (pos, owner) for sorting the fresh points; the positions and the
     * indices of the old points that go. */
    char *scratch = s == NULL ? NULL
                              : chring__alloc(fresh * 2 * (sizeof(uint64_t) + sizeof(uint32_t)) +
                                              gone * (sizeof(uint64_t) + sizeof(size_t)) + 1);
    if (s == NULL || scratch == NULL) {
        if (s != NULL)
            block_free(s);
        chring__free(slot_of);
        *err = -ENOMEM;
        return NULL;
    }
    uint64_t *fpos = (uint64_t *)(void *)scratch;
    uint64_t *tpos = fpos + fresh;
    uint64_t *removed = tpos + fresh;
    size_t *dropped = (size_t *)(void *)(removed + gone);
    uint32_t *fowner = (uint32_t *)(void *)(dropped + gone);
    uint32_t *towner = fowner + fresh;

    for (size_t k = 0; k < nslots; k++) {
        s->slot_member[k] = NULL;
        s->slot_weight[k] = 0;
        s->slot_rank[k] = UINT32_MAX;
    }
    size_t at = 0;
    for (size_t j = 0; j < nmembers; j++) {
        uint32_t slot = slot_of[j];
        s->member_slot[j] = slot;
        s->slot_member[slot] = members[j];
        s->slot_weight[slot] = weights[j];
        s->slot_rank[slot] = (uint32_t)j;
        if (keeps[j]) {
            s->member_points[j] = prev->member_points[prev->slot_rank[slot]];
            continue;
        }
        uint64_t count = chring__profile_points(shape, weights[j], nmembers, total_weight);
        chring__profile_positions(shape, members[j]->name, members[j]->name_len, weights[j],
                                  nmembers, total_weight, count, fpos + at);
        for (uint64_t i = 0; i < count; i++) {
            fpos[at + i] <<= shape->shift;
            fowner[at + i] = slot;
        }
        s->member_points[j] = (uint32_t)count;
        at += count;
    }
    /* Generated in name order, so the stable sort leaves equal positions in name order. */
    radix_sort(fresh, fpos, fowner, tpos, towner);

    /* The old points that go, in order (a scan of the owners; the branch is rarely taken). */
    size_t ndropped = 0;
    for (size_t i = 0; gone > 0 && i < prev->npoints; i++) {
        if (drop[prev->owner[i]]) {
            removed[ndropped] = prev->pos[i];
            dropped[ndropped++] = i;
        }
    }

    size_t out = 0, cursor = 0, kd = 0;
    for (size_t k = 0; k <= fresh; k++) {
        size_t end = prev->npoints;
        if (k < fresh) {
            /* The first old point ordered after (fpos[k], its member's name). */
            size_t lo = cursor, hi = prev->npoints;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (prev->pos[mid] < fpos[k])
                    lo = mid + 1;
                else
                    hi = mid;
            }
            while (lo < prev->npoints && prev->pos[lo] == fpos[k] &&
                   (drop[prev->owner[lo]] ||
                    s->slot_rank[prev->owner[lo]] < s->slot_rank[fowner[k]]))
                lo++;
            end = lo;
        }
        /* Copy the old points [cursor, end) as runs between the dropped ones. */
        while (cursor < end) {
            size_t stop = kd < ndropped && dropped[kd] < end ? dropped[kd] : end;
            memcpy(s->pos + out, prev->pos + cursor, (stop - cursor) * sizeof *s->pos);
            memcpy(s->owner + out, prev->owner + cursor, (stop - cursor) * sizeof *s->owner);
            out += stop - cursor;
            cursor = stop;
            if (stop < end) {
                cursor++; /* skip the dropped point */
                kd++;
            }
        }
        if (k < fresh) {
            s->pos[out] = fpos[k];
            s->owner[out++] = fowner[k];
        }
    }
    if (s->index_bits == prev->index_bits && fresh + gone < npoints / 4)
        shift_index(s, prev, fpos, fresh, removed, ndropped);
    else
        build_index(s);
    chring__free(scratch);
    chring__free(slot_of);
    take_member_refs(s);
    *err = 0;
    return s;
}

/* A snapshot built from scratch: every member's points generated, radix-sorted, the profile's
 * collision rule applied. */
static chring_snap_t *build_full(const chring_snap_t *shape, chring_member_t *const *members,
                                 const uint32_t *weights, size_t nmembers, uint64_t total_weight,
                                 size_t npoints, int *err)
{
    chring_snap_t *s = snap_alloc(shape, members, weights, nmembers, nmembers, total_weight,
                                  npoints);
    /* Scratch: the radix sort's second buffer, and fnv16's join order and offsets. */
    size_t scratch_size = npoints * (sizeof(uint64_t) + sizeof(uint32_t)) +
                          (shape->profile == CHRING_PROFILE_FNV16
                               ? nmembers * (sizeof(uint32_t) + sizeof(uint64_t))
                               : 0);
    char *scratch = s == NULL ? NULL : chring__alloc(scratch_size);
    if (s == NULL || scratch == NULL) {
        if (s != NULL)
            block_free(s);
        *err = -ENOMEM;
        return NULL;
    }
    identity_slots(s);

    /* 64-bit arrays first, then the 32-bit ones: every array stays aligned. */
    uint64_t *tpos = (uint64_t *)(void *)scratch;
    bool fnv16 = shape->profile == CHRING_PROFILE_FNV16;
    uint64_t *start = tpos + npoints;                                      /* fnv16 only */
    uint32_t *towner = (uint32_t *)(void *)(start + (fnv16 ? nmembers : 0));
    uint32_t *order = towner + npoints;                                    /* fnv16 only */

    if (fnv16) {
        /* Raw positions in name order into the scratch, then placed member by member in join
         * order, each member's points in index order; a position already taken is skipped. */
        uint64_t at = 0;
        for (size_t j = 0; j < nmembers; j++) {
            uint64_t count = chring__profile_points(shape, weights[j], nmembers, total_weight);
            chring__profile_positions(shape, members[j]->name, members[j]->name_len, weights[j],
                                      nmembers, total_weight, count, tpos + at);
            start[j] = at;
            at += count;
        }
        sort_by_join(order, nmembers, members);
        uint64_t taken[65536 / 64] = {0};
        size_t placed = 0;
        for (size_t o = 0; o < nmembers; o++) {
            uint32_t j = order[o];
            uint64_t count = chring__profile_points(shape, weights[j], nmembers, total_weight);
            uint32_t mine = 0;
            for (uint64_t i = 0; i < count; i++) {
                uint64_t p = tpos[start[j] + i];
                if (taken[p / 64] & (UINT64_C(1) << (p % 64)))
                    continue;
                taken[p / 64] |= UINT64_C(1) << (p % 64);
                s->pos[placed] = p << s->shift;
                s->owner[placed] = j;
                placed++;
                mine++;
            }
            s->member_points[j] = mine;
        }
        npoints = placed;
    } else {
        uint64_t at = 0;
        for (size_t j = 0; j < nmembers; j++) {
            uint64_t count = chring__profile_points(shape, weights[j], nmembers, total_weight);
            chring__profile_positions(shape, members[j]->name, members[j]->name_len, weights[j],
                                      nmembers, total_weight, count, s->pos + at);
            for (uint64_t i = 0; i < count; i++) {
                s->pos[at + i] <<= s->shift;
                s->owner[at + i] = (uint32_t)j;
            }
            s->member_points[j] = (uint32_t)count;
            at += count;
        }
    }
    /* Generated in name order (fnv16: no equal positions), so the stable sort orders equal
     * positions by name. */
    radix_sort(npoints, s->pos, s->owner, tpos, towner);

    if (shape->profile == CHRING_PROFILE_NGINX && npoints > 0) {
        /* nginx keeps only the first point (by name) of equal positions. */
        size_t kept = 1;
        for (size_t i = 1; i < npoints; i++) {
            if (s->pos[i] == s->pos[kept - 1]) {
                s->member_points[s->owner[i]]--;
                continue;
            }
            s->pos[kept] = s->pos[i];
            s->owner[kept] = s->owner[i];
            kept++;
        }
        npoints = kept;
    }
    s->npoints = npoints;
    build_index(s);
    chring__free(scratch);
    take_member_refs(s);
    *err = 0;
    return s;
}

chring_snap_t *chring__snap_build(const chring_snap_t *shape, const chring_snap_t *prev,
                                  chring_member_t *const *members, const uint32_t *weights,
                                  size_t nmembers, int *err)
{
    uint64_t total_weight = 0;
    for (size_t j = 0; j < nmembers; j++)
        total_weight += weights[j];

    /* Point counts, checked against the limits before anything is allocated. */
    uint64_t raw_points = 0;
    for (size_t j = 0; j < nmembers; j++) {
        uint64_t p = chring__profile_points(shape, weights[j], nmembers, total_weight);
        if (p > CHRING_POINTS_MAX) {
            *err = -E2BIG;
            return NULL;
        }
        raw_points += p;
        if (raw_points > CHRING_RING_POINTS_MAX) {
            *err = -E2BIG;
            return NULL;
        }
    }

    if (mergeable(shape) && prev->npoints > 0)
        return build_merge(shape, prev, members, weights, nmembers, total_weight, err);
    return build_full(shape, members, weights, nmembers, total_weight, (size_t)raw_points, err);
}

void chring__snap_unref(chring_snap_t *s)
{
    if (s == NULL || s == &chring__empty_snap)
        return;
    /* Full barrier: all uses of s by this holder happen before the count drops. */
    if (ck_pr_faa_64(&s->refs, (uint64_t)-1) != 1)
        return;
    for (size_t j = 0; j < s->nmembers; j++)
        chring__member_unref_snap(s->members[j]);
    s->magic = CHRING_POISON;
    block_stash(s);
}


/* ---- accessors ---------------------------------------------------------------------------- */

uint64_t chring_snap_version(const chring_snap_t *s)
{
    return s == NULL ? 0 : s->version;
}

size_t chring_snap_len(const chring_snap_t *s)
{
    return s == NULL ? 0 : s->nmembers;
}

size_t chring_snap_points(const chring_snap_t *s)
{
    return s == NULL ? 0 : s->npoints;
}

const chring_member_t *chring_snap_member(const chring_snap_t *s, size_t i)
{
    if (s == NULL || i >= s->nmembers)
        return NULL;
    return s->members[i];
}

/* Index of the member named (name, len) in s, or -1. */
static long find_name(const chring_snap_t *s, const char *name, size_t len)
{
    size_t lo = 0, hi = s->nmembers;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const chring_member_t *m = s->members[mid];
        int c = name_cmp(m->name, m->name_len, name, len);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

const chring_member_t *chring_snap_find(const chring_snap_t *s, const char *name)
{
    if (s == NULL || name == NULL)
        return NULL;
    size_t len = strnlen(name, CHRING_NAME_MAX + 1);
    if (len == 0 || len > CHRING_NAME_MAX)
        return NULL;
    long j = find_name(s, name, len);
    return j < 0 ? NULL : s->members[j];
}

static long member_index(const chring_snap_t *s, const chring_member_t *m)
{
    if (s == NULL || m == NULL)
        return -1;
    long j = find_name(s, m->name, m->name_len);
    return (j >= 0 && s->members[j] == m) ? j : -1;
}

chring_profile_t chring_snap_profile(const chring_snap_t *s)
{
    return s == NULL ? CHRING_PROFILE_HASH64 : s->profile;
}

unsigned chring_snap_hash_bits(const chring_snap_t *s)
{
    return s == NULL ? 0 : s->bits;
}

uint32_t chring_snap_weight(const chring_snap_t *s, const chring_member_t *m)
{
    long j = member_index(s, m);
    return j < 0 ? 0 : s->weights[j];
}

size_t chring_snap_member_points(const chring_snap_t *s, const chring_member_t *m)
{
    long j = member_index(s, m);
    return j < 0 ? 0 : s->member_points[j];
}

int chring_snap_point(const chring_snap_t *s, size_t i, uint64_t *pos, const chring_member_t **m)
{
    if (s == NULL)
        return -EINVAL;
    if (i >= s->npoints)
        return -ERANGE;
    if (pos != NULL)
        *pos = s->pos[i] >> s->shift;
    if (m != NULL)
        *m = s->slot_member[s->owner[i]];
    return 0;
}

/* The length of the arc that ends at point i: the keys in (pos[i-1], pos[i]], and for point 0
 * the wrap (pos[n-1], 2^64) + [0, pos[0]].  A whole circle (every point at one position) has
 * arc 2^64 at point 0, returned as 0 with *full set. */
static uint64_t arc_before(const chring_snap_t *s, size_t i, bool *full)
{
    *full = false;
    if (i > 0)
        return s->pos[i] - s->pos[i - 1];
    if (s->pos[0] == s->pos[s->npoints - 1]) {
        *full = true;
        return 0;
    }
    return s->pos[0] - s->pos[s->npoints - 1]; /* mod 2^64: the wrap arc */
}

double chring_member_share(const chring_snap_t *s, const chring_member_t *m)
{
    long j = member_index(s, m);
    if (j < 0 || s->npoints == 0)
        return 0.0;
    uint32_t slot = s->member_slot[j];
    double share = 0.0;
    for (size_t i = 0; i < s->npoints; i++) {
        if (s->owner[i] != slot)
            continue;
        bool full;
        uint64_t arc = arc_before(s, i, &full);
        share += full ? 1.0 : (double)arc / 18446744073709551616.0;
    }
    return share;
}

static bool same_owner(const chring_member_t *a, const chring_member_t *b)
{
    return a == b || name_cmp(a->name, a->name_len, b->name, b->name_len) == 0;
}

double chring_snap_moved(const chring_snap_t *a, const chring_snap_t *b)
{
    if (a == NULL || b == NULL || a->profile != b->profile || a->bits != b->bits)
        return (double)NAN;
    if (a->npoints == 0 && b->npoints == 0)
        return 0.0;
    if (a->npoints == 0 || b->npoints == 0)
        return 1.0;

    /* Sweep the union of both position lists.  Between two consecutive distinct positions
     * (q_prev, q] the owner in each snapshot is the member of its first point >= q. */
    uint64_t moved_lo = 0, moved_hi = 0; /* a 128-bit sum of moved key counts */
    size_t ia = 0, ib = 0;
    uint64_t prev = 0;
    bool first = true;
    while (ia < a->npoints || ib < b->npoints) {
        uint64_t q;
        if (ib >= b->npoints || (ia < a->npoints && a->pos[ia] <= b->pos[ib]))
            q = a->pos[ia];
        else
            q = b->pos[ib];
        size_t oa = ia < a->npoints ? ia : 0; /* past the last point: wrap */
        size_t ob = ib < b->npoints ? ib : 0;
        /* Keys [0, q] for the first interval, (prev, q] afterwards. */
        uint64_t len = first ? q : q - prev;
        bool extra_one = first; /* [0, q] holds q + 1 keys */
        if (!same_owner(a->slot_member[a->owner[oa]], b->slot_member[b->owner[ob]])) {
            uint64_t before = moved_lo;
            moved_lo += len;
            moved_hi += moved_lo < before;
            if (extra_one) {
                before = moved_lo;
                moved_lo += 1;
                moved_hi += moved_lo < before;
            }
        }
        first = false;
        prev = q;
        while (ia < a->npoints && a->pos[ia] == q)
            ia++;
        while (ib < b->npoints && b->pos[ib] == q)
            ib++;
    }
    /* The wrap interval (prev, 2^64): both owners are their first points. */
    if (!same_owner(a->slot_member[a->owner[0]], b->slot_member[b->owner[0]])) {
        uint64_t len = UINT64_MAX - prev; /* keys prev+1 .. 2^64-1 */
        uint64_t before = moved_lo;
        moved_lo += len;
        moved_hi += moved_lo < before;
    }
    return (double)moved_hi + (double)moved_lo / 18446744073709551616.0;
}

/* ---- diagnostics -------------------------------------------------------------------------- */

int chring_member_check(const chring_member_t *m)
{
    if (m == NULL || CHRING_LOAD_64(&m->magic) != CHRING_MEMBER_MAGIC)
        return -EINVAL;
    if (m->name_len == 0 || m->name_len > CHRING_NAME_MAX || m->name[m->name_len] != '\0')
        return -EINVAL;
    if (CHRING_LOAD_32(&m->weight) == 0)
        return -EINVAL;
    return 0;
}

int chring_snap_check(const chring_snap_t *s)
{
    if (s == NULL || CHRING_LOAD_64(&s->magic) != CHRING_SNAP_MAGIC)
        return -EINVAL;
    if (s->bits != 64 && s->bits != 32 && s->bits != 16)
        return -EINVAL;
    if (s->npoints > 0 && s->nmembers == 0)
        return -EINVAL;
    for (size_t j = 0; j < s->nmembers; j++) {
        if (chring_member_check(s->members[j]) != 0)
            return -EINVAL;
        if (s->member_slot[j] >= s->nslots || s->slot_member[s->member_slot[j]] != s->members[j])
            return -EINVAL;
        if (j > 0 && name_cmp(s->members[j - 1]->name, s->members[j - 1]->name_len,
                              s->members[j]->name, s->members[j]->name_len) >= 0)
            return -EINVAL;
    }
    /* A bounded sample of the points: in order and owned by a listed member. */
    size_t step = s->npoints / 64 + 1;
    for (size_t i = 0; i < s->npoints; i += step) {
        if (s->owner[i] >= s->nslots || s->slot_member[s->owner[i]] == NULL)
            return -EINVAL;
        if (i > 0 && s->pos[i - 1] > s->pos[i])
            return -EINVAL;
    }
    if (s->npoints > 0 && s->index[(size_t)1 << s->index_bits] != s->npoints)
        return -EINVAL;
    return 0;
}
