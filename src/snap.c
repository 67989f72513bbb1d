/* The read-only snapshot API: accessors, find by name, points, arc shares, moved fractions and
 * the consistency check.  Reader side: a snapshot never changes, so plain loads suffice.
 * SPDX-License-Identifier: MIT */
#include "member.h"

#include <math.h>

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

size_t chring__snap_name_bound(const chring_snap_t *s, size_t from, const char *name, size_t len)
{
    size_t lo = from, hi = s->nmembers;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const chring_member_t *m = s->members[mid];
        if (chring__name_cmp(m->name, m->name_len, name, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

long chring__snap_find_rank(const chring_snap_t *s, const char *name, size_t len)
{
    size_t i = chring__snap_name_bound(s, 0, name, len);
    if (i < s->nmembers &&
        chring__name_cmp(s->members[i]->name, s->members[i]->name_len, name, len) == 0)
        return (long)i;
    return -1;
}

const chring_member_t *chring_snap_find(const chring_snap_t *s, const char *name)
{
    size_t len;
    if (s == NULL || chring__name_check(name, &len) != 0)
        return NULL;
    long j = chring__snap_find_rank(s, name, len);
    return j < 0 ? NULL : s->members[j];
}

long chring__snap_rank(const chring_snap_t *s, const chring_member_t *m)
{
    if (s == NULL || m == NULL)
        return -1;
    long j = chring__snap_find_rank(s, m->name, m->name_len);
    return (j >= 0 && s->members[j] == m) ? j : -1;
}

chring_profile_t chring_snap_profile(const chring_snap_t *s)
{
    return s == NULL ? CHRING_PROFILE_HASH64 : s->prof.id;
}

unsigned chring_snap_hash_bits(const chring_snap_t *s)
{
    return s == NULL ? 0 : s->prof.bits;
}

uint32_t chring_snap_weight(const chring_snap_t *s, const chring_member_t *m)
{
    long j = chring__snap_rank(s, m);
    return j < 0 ? 0 : s->weights[j];
}

size_t chring_snap_member_points(const chring_snap_t *s, const chring_member_t *m)
{
    long j = chring__snap_rank(s, m);
    return j < 0 ? 0 : s->member_points[j];
}

int chring_snap_point(const chring_snap_t *s, size_t i, uint64_t *pos, const chring_member_t **m)
{
    if (s == NULL)
        return -EINVAL;
    if (i >= s->npoints)
        return -ERANGE;
    if (pos != NULL)
        *pos = s->pos[i] >> s->prof.shift;
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
    long j = chring__snap_rank(s, m);
    if (j < 0 || s->npoints == 0)
        return 0.0;
    if (s->prof.desc->nearest || s->prof.desc->varnish_start)
        return chring__share_by_arcs(s, m); /* nearest-point or varnish arcs (diff.c) */
    uint32_t slot = s->member_slot[j];
    double share = 0.0;
    for (size_t i = 0; i < s->npoints; i++) {
        if (s->owner[i] != slot)
            continue;
        bool full;
        uint64_t arc = arc_before(s, i, &full);
        share += full ? 1.0 : (double)arc / CHRING_TWO_POW_64;
    }
    return share;
}

static bool same_owner(const chring_member_t *a, const chring_member_t *b)
{
    return a == b || chring__name_cmp(a->name, a->name_len, b->name, b->name_len) == 0;
}

double chring_snap_moved(const chring_snap_t *a, const chring_snap_t *b)
{
    if (a == NULL || b == NULL || a->prof.id != b->prof.id || a->prof.bits != b->prof.bits)
        return (double)NAN;
    if (a->npoints == 0 && b->npoints == 0)
        return 0.0;
    if (a->npoints == 0 || b->npoints == 0)
        return 1.0;
    if (a->prof.desc->nearest || a->prof.desc->varnish_start)
        return chring__moved_by_arcs(a, b); /* nearest-point or varnish arcs (diff.c) */

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
    return (double)moved_hi + (double)moved_lo / CHRING_TWO_POW_64;
}

/* ---- diagnostics -------------------------------------------------------------------------- */

int chring_snap_check(const chring_snap_t *s)
{
    if (s == NULL || CHRING_LOAD_64(&s->magic) != CHRING_SNAP_MAGIC)
        return -EINVAL;
    if (s->prof.bits != 64 && s->prof.bits != 32 && s->prof.bits != 16)
        return -EINVAL;
    if (s->npoints > 0 && s->nmembers == 0)
        return -EINVAL;
    for (size_t j = 0; j < s->nmembers; j++) {
        if (chring_member_check(s->members[j]) != 0)
            return -EINVAL;
        if (s->member_slot[j] >= s->nslots || s->slot_member[s->member_slot[j]] != s->members[j])
            return -EINVAL;
        if (j > 0 && chring__name_cmp(s->members[j - 1]->name, s->members[j - 1]->name_len,
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
    if (s->npoints > 0 && chring__index_first(s, s->nbuckets) != s->npoints)
        return -EINVAL;
    return 0;
}
