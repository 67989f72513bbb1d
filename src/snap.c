/* The read-only snapshot API: accessors, find by name, points and the consistency check (the arc
 * measures, shares and moved fractions, are diff.c's).  Reader side: a snapshot never changes, so
 * plain loads suffice.
 * SPDX-License-Identifier: MIT */
#include "index.h"
#include "member.h"

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
        *pos = chring__pos(s, i) >> s->prof.shift;
    if (m != NULL)
        *m = s->slot_member[chring__owner(s, i)];
    return 0;
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
        if (chring__owner(s, i) >= s->nslots || s->slot_member[chring__owner(s, i)] == NULL)
            return -EINVAL;
        if (i > 0 && chring__pos(s, i - 1) > chring__pos(s, i))
            return -EINVAL;
    }
    if (s->npoints > 0 && chring__index_first(s, s->nbuckets) != s->npoints)
        return -EINVAL;
    return 0;
}
