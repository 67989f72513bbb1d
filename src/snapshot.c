/* Immutable snapshots: built from a membership set, never changed after they are published.
 * SPDX-License-Identifier: MIT
 *
 * Design note.
 * - A snapshot is one allocation: its header, the members sorted by name with their weights and
 *   point counts, the points sorted by (position, member index) and a prefix-bucket index.  The
 *   member order is the name order, so sorting points by member index breaks position ties by
 *   name, which makes the ring a pure function of the membership (Karger et al. 1997); only the
 *   fnv16 profile, which skips taken positions in join order, depends on history, as SPEC §2 says.
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

/* ---- building ----------------------------------------------------------------------------- */

static int name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c != 0)
        return c;
    return (alen > blen) - (alen < blen);
}

/* Points of a member of a mergeable profile: vnodes * weight. */
static uint64_t shape_points(const chring_snap_t *shape, uint32_t weight)
{
    return (uint64_t)shape->vnodes * weight;
}

struct layout {
    size_t members_off, weights_off, mpoints_off, pos_off, owner_off, index_off, size;
};

static size_t align_up(size_t x, size_t a)
{
    return (x + a - 1) & ~(a - 1);
}

static struct layout layout_for(size_t nmembers, size_t npoints, unsigned index_bits)
{
    struct layout l;
    size_t at = align_up(sizeof(chring_snap_t), 16);
    l.members_off = at;
    at += nmembers * sizeof(chring_member_t *);
    l.pos_off = at = align_up(at, 16);
    at += (npoints + 1) * sizeof(uint64_t); /* + the sentinel */
    l.weights_off = at;
    at += nmembers * sizeof(uint32_t);
    l.mpoints_off = at;
    at += nmembers * sizeof(uint32_t);
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
 * the membership) and nginx (equal positions dropped) rebuild. */
static bool mergeable(const chring_snap_t *shape)
{
    switch (shape->profile) {
    case CHRING_PROFILE_FNV16:
    case CHRING_PROFILE_KETAMA:
    case CHRING_PROFILE_NGINX: return false;
    default: return true;
    }
}

static chring_snap_t *snap_alloc(const chring_snap_t *shape, chring_member_t *const *members,
                                 const uint32_t *weights, size_t nmembers, uint64_t total_weight,
                                 size_t npoints)
{
    unsigned index_bits = index_bits_for(npoints, shape->bits);
    struct layout l = layout_for(nmembers, npoints, index_bits);
    char *block = chring__alloc(l.size);
    if (block == NULL)
        return NULL;
    chring_snap_t *s = (chring_snap_t *)(void *)block;
    *s = *shape;
    s->magic = CHRING_SNAP_MAGIC;
    s->refs = 1;
    s->nmembers = nmembers;
    s->total_weight = total_weight;
    s->members = (chring_member_t **)(void *)(block + l.members_off);
    s->weights = (uint32_t *)(void *)(block + l.weights_off);
    s->member_points = (uint32_t *)(void *)(block + l.mpoints_off);
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

/* The merge path: points of members whose object and weight are unchanged are copied from prev
 * (already sorted; their owner indices renumbered, which keeps their order because both member
 * arrays are sorted by name), the points of new and re-weighted members are generated and
 * sorted, and the two sorted runs are merged.  O(points) instead of a sort of every point:
 * measured about 20x faster than a full rebuild at 1000 x 160 (see bench/). */
static chring_snap_t *build_merge(const chring_snap_t *shape, const chring_snap_t *prev,
                                  chring_member_t *const *members, const uint32_t *weights,
                                  size_t nmembers, uint64_t total_weight, int *err)
{
    size_t scratch_head = prev->nmembers * sizeof(uint32_t) + nmembers * sizeof(uint32_t);
    uint32_t *remap = chring__alloc(scratch_head);
    if (remap == NULL) {
        *err = -ENOMEM;
        return NULL;
    }
    uint32_t *origin = remap + prev->nmembers; /* new index -> old index, or UINT32_MAX */

    /* Pair the old and new members by name; a pair survives only with the same object and
     * weight. */
    size_t kept = 0, fresh = 0;
    size_t ia = 0;
    for (size_t j = 0; j < nmembers; j++) {
        origin[j] = UINT32_MAX;
        while (ia < prev->nmembers &&
               name_cmp(prev->members[ia]->name, prev->members[ia]->name_len, members[j]->name,
                        members[j]->name_len) < 0)
            remap[ia++] = UINT32_MAX;
        if (ia < prev->nmembers && prev->members[ia] == members[j] &&
            prev->weights[ia] == weights[j]) {
            remap[ia] = (uint32_t)j;
            origin[j] = (uint32_t)ia;
            kept += prev->member_points[ia];
            ia++;
        } else {
            fresh += (size_t)shape_points(shape, weights[j]);
        }
    }
    while (ia < prev->nmembers)
        remap[ia++] = UINT32_MAX;

    size_t npoints = kept + fresh;
    chring_snap_t *s = snap_alloc(shape, members, weights, nmembers, total_weight, npoints);
    /* Scratch for the fresh points: two runs of (pos, owner) for the radix sort. */
    char *scratch = s == NULL ? NULL : chring__alloc(fresh * 2 * (sizeof(uint64_t) + sizeof(uint32_t)));
    if (s == NULL || scratch == NULL) {
        chring__free(s);
        chring__free(remap);
        *err = -ENOMEM;
        return NULL;
    }
    uint64_t *fpos = (uint64_t *)(void *)scratch;
    uint64_t *tpos = fpos + fresh;
    uint32_t *fowner = (uint32_t *)(void *)(tpos + fresh);
    uint32_t *towner = fowner + fresh;

    size_t at = 0;
    for (size_t j = 0; j < nmembers; j++) {
        if (origin[j] != UINT32_MAX) {
            s->member_points[j] = prev->member_points[origin[j]];
            continue;
        }
        uint64_t count = shape_points(shape, weights[j]);
        chring__profile_positions(shape, members[j]->name, members[j]->name_len, weights[j],
                                  nmembers, total_weight, count, fpos + at);
        for (uint64_t i = 0; i < count; i++) {
            fpos[at + i] <<= shape->shift;
            fowner[at + i] = (uint32_t)j;
        }
        s->member_points[j] = (uint32_t)count;
        at += count;
    }
    radix_sort(fresh, fpos, fowner, tpos, towner);

    /* Merge by (position, new member index). */
    size_t i = 0, k = 0, out = 0;
    for (;;) {
        while (i < prev->npoints && remap[prev->owner[i]] == UINT32_MAX)
            i++;
        bool have_old = i < prev->npoints, have_new = k < fresh;
        if (!have_old && !have_new)
            break;
        bool take_old;
        if (!have_new) {
            take_old = true;
        } else if (!have_old) {
            take_old = false;
        } else {
            uint64_t po = prev->pos[i], pn = fpos[k];
            take_old = po < pn || (po == pn && remap[prev->owner[i]] < fowner[k]);
        }
        if (take_old) {
            s->pos[out] = prev->pos[i];
            s->owner[out++] = remap[prev->owner[i++]];
        } else {
            s->pos[out] = fpos[k];
            s->owner[out++] = fowner[k++];
        }
    }
    build_index(s);
    chring__free(scratch);
    chring__free(remap);
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

    size_t npoints = (size_t)raw_points;
    chring_snap_t *s = snap_alloc(shape, members, weights, nmembers, total_weight, npoints);
    /* Scratch: the radix sort's second buffer, and fnv16's join order. */
    size_t scratch_size = npoints * (sizeof(uint64_t) + sizeof(uint32_t)) +
                          (shape->profile == CHRING_PROFILE_FNV16 ? nmembers * sizeof(uint32_t) : 0);
    char *scratch = s == NULL ? NULL : chring__alloc(scratch_size);
    if (s == NULL || scratch == NULL) {
        chring__free(s);
        *err = -ENOMEM;
        return NULL;
    }

    uint64_t *tpos = (uint64_t *)(void *)scratch;
    uint32_t *towner = (uint32_t *)(void *)(scratch + npoints * sizeof(uint64_t));

    if (shape->profile == CHRING_PROFILE_FNV16) {
        /* Raw positions in name order into the scratch, then placed member by member in join
         * order, each member's points in index order; a position already taken is skipped. */
        uint32_t *order = (uint32_t *)(void *)(scratch + npoints * 12);
        uint64_t at = 0;
        for (size_t j = 0; j < nmembers; j++) {
            uint64_t count = chring__profile_points(shape, weights[j], nmembers, total_weight);
            chring__profile_positions(shape, members[j]->name, members[j]->name_len, weights[j],
                                      nmembers, total_weight, count, tpos + at);
            at += count;
        }
        sort_by_join(order, nmembers, members);
        uint64_t taken[65536 / 64] = {0};
        size_t kept = 0;
        for (size_t o = 0; o < nmembers; o++) {
            uint32_t j = order[o];
            uint64_t start = 0;
            for (uint32_t q = 0; q < j; q++)
                start += chring__profile_points(shape, weights[q], nmembers, total_weight);
            uint64_t count = chring__profile_points(shape, weights[j], nmembers, total_weight);
            uint32_t mine = 0;
            for (uint64_t i = 0; i < count; i++) {
                uint64_t p = tpos[start + i];
                if (taken[p / 64] & (UINT64_C(1) << (p % 64)))
                    continue;
                taken[p / 64] |= UINT64_C(1) << (p % 64);
                s->pos[kept] = p << s->shift;
                s->owner[kept] = j;
                kept++;
                mine++;
            }
            s->member_points[j] = mine;
        }
        npoints = kept;
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
    chring__free(s);
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
        *m = s->members[s->owner[i]];
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
    double share = 0.0;
    for (size_t i = 0; i < s->npoints; i++) {
        if (s->owner[i] != (uint32_t)j)
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
        if (!same_owner(a->members[a->owner[oa]], b->members[b->owner[ob]])) {
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
    if (!same_owner(a->members[a->owner[0]], b->members[b->owner[0]])) {
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
        if (j > 0 && name_cmp(s->members[j - 1]->name, s->members[j - 1]->name_len,
                              s->members[j]->name, s->members[j]->name_len) >= 0)
            return -EINVAL;
    }
    /* A bounded sample of the points: in order and owned by a listed member. */
    size_t step = s->npoints / 64 + 1;
    for (size_t i = 0; i < s->npoints; i += step) {
        if (s->owner[i] >= s->nmembers)
            return -EINVAL;
        if (i > 0 && s->pos[i - 1] > s->pos[i])
            return -EINVAL;
    }
    if (s->npoints > 0 && s->index[(size_t)1 << s->index_bits] != s->npoints)
        return -EINVAL;
    return 0;
}
