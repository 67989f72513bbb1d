/* Change, observable: the arcs of the hash space whose owner differs between two snapshots
 * (chring_snap_diff), and the arc measures: a member's share of the hash space
 * (chring_member_share) and the fraction that moved between two snapshots (chring_snap_moved)
 * (docs/design.md §2, §3).
 * SPDX-License-Identifier: MIT
 *
 * Owners by each profile's own rule, in the unshifted hash space of chring_snap_lookup_hash
 * (0 .. 2^bits - 1).  The owner of a position is piecewise constant; it can change only at a few
 * breakpoints per point:
 *   first point at or after (every profile but haproxy): the owner of (q_prev, q] is the first
 *   point at q, so owners change only just after a point position (q + 1) and at 0;
 *   varnish: as first point at or after, but the arc above the last position belongs to the
 *   last point (not the first), and a ring of two points gives every position to point 1: the
 *   breakpoints above still bound every piece, and the lookup at each piece's start applies
 *   the rule (chring__start);
 *   nearest point (haproxy): a position exactly at a point q belongs to the first point there,
 *   (q, mid] to the last point at q and (mid, q_next) to the first at q_next, with mid =
 *   q + floor(d / 2) and d the distance to the next position (ties go to the point before); so
 *   owners change at q, q + 1 and mid + 1, and the gap across the top wraps.
 * A breakpoint iterator yields a superset of those in increasing order; diff merges two of them,
 * asks each snapshot for the owner at the start of every piece (the lookup itself, so the diff
 * can never disagree with chring_snap_lookup_hash) and joins neighbouring pieces that moved alike
 * into maximal arcs.  O(points of a + points of b) lookups, no allocation.  Health is ignored:
 * placement only, as in the measures.  The measures of the nearest-point and varnish profiles
 * count the same pieces; those of the other profiles, whose arcs are simply (previous point,
 * point], sum the arcs directly, with no lookup. */
#include "find.h"
#include "member.h"

#include <math.h>

struct breaks {
    const chring_snap_t *s;
    uint64_t max;   /* 2^bits - 1 */
    bool nearest;   /* the profile's rule */
    size_t i;       /* the next point (the first of its position) */
    uint64_t q0, qL; /* first and last positions */
    uint64_t lead[3], trail[2], pend[3];
    unsigned nlead, ilead, ntrail, itrail, npend, ipend;
    bool in_groups, done;
};

static inline uint64_t point_at(const chring_snap_t *s, size_t i)
{
    return chring__pos(s, i) >> s->prof.shift;
}

static void sort_small(uint64_t *v, unsigned n)
{
    for (unsigned a = 1; a < n; a++)
        for (unsigned b = a; b > 0 && v[b - 1] > v[b]; b--) {
            uint64_t t = v[b];
            v[b] = v[b - 1];
            v[b - 1] = t;
        }
}

/* Half the circular distance from q to the next position (d mod 2^bits; d 0 is the whole
 * circle), floor. */
static uint64_t half_gap(const struct breaks *b, uint64_t q, uint64_t next)
{
    uint64_t d = (next - q) & b->max;
    return d == 0 ? (b->max >> 1) + 1 : d / 2;
}

static void breaks_init(struct breaks *b, const chring_snap_t *s)
{
    memset(b, 0, sizeof *b);
    b->s = s;
    b->max = s->prof.bits == 64 ? UINT64_MAX : (UINT64_C(1) << s->prof.bits) - 1;
    b->nearest = s->prof.desc->nearest;
    b->lead[b->nlead++] = 0;
    if (s->npoints == 0)
        return;
    b->q0 = point_at(s, 0);
    b->qL = point_at(s, s->npoints - 1);
    uint64_t cand[2];
    unsigned ncand = 0;
    if (b->qL < b->max)
        cand[ncand++] = b->qL + 1;
    if (b->nearest)
        cand[ncand++] = (b->qL + half_gap(b, b->qL, b->q0) + 1) & b->max;
    for (unsigned k = 0; k < ncand; k++) {
        if (cand[k] < b->q0)
            b->lead[b->nlead++] = cand[k];
        else if (cand[k] > b->qL)
            b->trail[b->ntrail++] = cand[k];
    }
    sort_small(b->lead, b->nlead);
    sort_small(b->trail, b->ntrail);
    b->in_groups = true;
}

/* The breakpoints of the group of positions at point i, which is the first at its position. */
static void group_fill(struct breaks *b)
{
    const chring_snap_t *s = b->s;
    uint64_t q = point_at(s, b->i);
    while (b->i < s->npoints && point_at(s, b->i) == q)
        b->i++;
    b->npend = b->ipend = 0;
    if (b->nearest)
        b->pend[b->npend++] = q;
    if (b->i < s->npoints) { /* not the last position: the gap to the next is inside the range */
        uint64_t next = point_at(s, b->i);
        b->pend[b->npend++] = q + 1;
        if (b->nearest)
            b->pend[b->npend++] = q + half_gap(b, q, next) + 1;
    }
}

/* The next breakpoint, in increasing order (repeats allowed); false when there is none. */
static bool breaks_next(struct breaks *b, uint64_t *out)
{
    if (b->ilead < b->nlead) {
        *out = b->lead[b->ilead++];
        return true;
    }
    while (b->in_groups) {
        if (b->ipend < b->npend) {
            *out = b->pend[b->ipend++];
            return true;
        }
        if (b->i >= b->s->npoints) {
            b->in_groups = false;
            break;
        }
        group_fill(b);
    }
    if (b->itrail < b->ntrail) {
        *out = b->trail[b->itrail++];
        return true;
    }
    return false;
}

/* An iterator's next breakpoint above t, or false. */
struct cursor {
    struct breaks b;
    bool have;
    uint64_t next;
};

static void cursor_past(struct cursor *c, uint64_t t)
{
    while (c->have && c->next <= t)
        c->have = breaks_next(&c->b, &c->next);
}

/* The owner of unshifted position h by the snapshot's rule, health ignored; NULL when empty. */
static const chring_member_t *owner_at(const chring_snap_t *s, uint64_t h)
{
    if (s->npoints == 0)
        return NULL;
    size_t i = chring__start(s, h << s->prof.shift);
    return s->slot_member[chring__owner(s, i)];
}

static bool same_name(const chring_member_t *a, const chring_member_t *b)
{
    if (a == b)
        return true;
    if (a == NULL || b == NULL)
        return false;
    return chring__name_cmp(a->name, a->name_len, b->name, b->name_len) == 0;
}

/* The pieces [from, to] of the hash space on which both owners are constant, in order: calls
 * piece() for each; a non-zero return stops the walk and is returned. */
typedef int (*piece_fn)(uint64_t from, uint64_t to, const chring_member_t *was,
                        const chring_member_t *now, void *ctx);

static int pieces(const chring_snap_t *a, const chring_snap_t *b, piece_fn piece, void *ctx)
{
    struct cursor ca, cb;
    breaks_init(&ca.b, a);
    breaks_init(&cb.b, b);
    ca.have = breaks_next(&ca.b, &ca.next); /* 0 */
    cb.have = breaks_next(&cb.b, &cb.next);
    uint64_t max = ca.b.max;
    uint64_t t = 0;
    for (;;) {
        cursor_past(&ca, t);
        cursor_past(&cb, t);
        uint64_t end = max;
        if (ca.have && ca.next - 1 < end)
            end = ca.next - 1;
        if (cb.have && cb.next - 1 < end)
            end = cb.next - 1;
        int rc = piece(t, end, owner_at(a, t), owner_at(b, t), ctx);
        if (rc != 0)
            return rc;
        if (end == max)
            return 0;
        t = end + 1;
    }
}

/* ---- chring_snap_diff --------------------------------------------------------------------- */

struct diff {
    int (*fn)(uint64_t from, uint64_t to, const chring_member_t *was, const chring_member_t *now,
              void *ctx);
    void *ctx;
    bool open; /* an arc is pending */
    uint64_t from, to;
    const chring_member_t *was, *now;
};

static int diff_flush(struct diff *d)
{
    if (!d->open)
        return 0;
    d->open = false;
    return d->fn(d->from, d->to, d->was, d->now, d->ctx);
}

static int diff_piece(uint64_t from, uint64_t to, const chring_member_t *was,
                      const chring_member_t *now, void *ctx)
{
    struct diff *d = ctx;
    if (same_name(was, now))
        return diff_flush(d);
    if (d->open && d->to + 1 == from && same_name(d->was, was) && same_name(d->now, now)) {
        d->to = to;
        return 0;
    }
    int rc = diff_flush(d);
    if (rc != 0)
        return rc;
    d->open = true;
    d->from = from;
    d->to = to;
    d->was = was;
    d->now = now;
    return 0;
}

static bool comparable(const chring_snap_t *a, const chring_snap_t *b)
{
    return a != NULL && b != NULL && a->prof.id == b->prof.id && a->prof.bits == b->prof.bits;
}

int chring_snap_diff(const chring_snap_t *a, const chring_snap_t *b,
                     int (*fn)(uint64_t from, uint64_t to, const chring_member_t *was,
                               const chring_member_t *now, void *ctx),
                     void *ctx)
{
    if (fn == NULL || !comparable(a, b))
        return -EINVAL;
    if (a->npoints == 0 && b->npoints == 0)
        return 0;
    struct diff d = {.fn = fn, .ctx = ctx};
    int rc = pieces(a, b, diff_piece, &d);
    if (rc != 0)
        return rc;
    return diff_flush(&d);
}

/* ---- the arc measures: chring_member_share, chring_snap_moved ----------------------------- */

/* Of the profiles whose owner is not simply the first point at or after (the nearest point,
 * varnish's top arc): measured on the pieces chring_snap_diff walks.  a and b comparable and not
 * empty. */
struct measure {
    const chring_member_t *member; /* share: this member's pieces; NULL: moved pieces */
    uint64_t lo, hi;               /* a 128-bit count of positions */
};

static int measure_piece(uint64_t from, uint64_t to, const chring_member_t *was,
                         const chring_member_t *now, void *ctx)
{
    struct measure *m = ctx;
    bool counted = m->member != NULL ? was == m->member : !same_name(was, now);
    if (counted) {
        uint64_t len = to - from; /* + 1 below, without overflow */
        uint64_t before = m->lo;
        m->lo += len;
        m->hi += m->lo < before;
        before = m->lo;
        m->lo += 1;
        m->hi += m->lo < before;
    }
    return 0;
}

static double fraction(const struct measure *m, unsigned bits)
{
    return ldexp((double)m->hi, 64 - (int)bits) + ldexp((double)m->lo, -(int)bits);
}

static double moved_by_arcs(const chring_snap_t *a, const chring_snap_t *b)
{
    struct measure m = {NULL, 0, 0};
    (void)pieces(a, b, measure_piece, &m);
    return fraction(&m, a->prof.bits);
}

static double share_by_arcs(const chring_snap_t *s, const chring_member_t *member)
{
    struct measure m = {member, 0, 0};
    (void)pieces(s, s, measure_piece, &m);
    return fraction(&m, s->prof.bits);
}

/* Of the other profiles, whose owners' arcs are (previous point, point]: the length of the arc
 * that ends at point i, the keys in (pos[i-1], pos[i]], and for point 0
 * the wrap (pos[n-1], 2^64) + [0, pos[0]].  A whole circle (every point at one position) has
 * arc 2^64 at point 0, returned as 0 with *full set. */
static uint64_t arc_before(const chring_snap_t *s, size_t i, bool *full)
{
    *full = false;
    if (i > 0)
        return chring__pos(s, i) - chring__pos(s, i - 1);
    if (chring__pos(s, 0) == chring__pos(s, s->npoints - 1)) {
        *full = true;
        return 0;
    }
    return chring__pos(s, 0) - chring__pos(s, s->npoints - 1); /* mod 2^64: the wrap arc */
}

double chring_member_share(const chring_snap_t *s, const chring_member_t *m)
{
    long j = chring__snap_rank(s, m);
    if (j < 0 || s->npoints == 0)
        return 0.0;
    if (s->prof.desc->nearest || s->prof.desc->varnish_start)
        return share_by_arcs(s, m); /* nearest-point or varnish arcs (above) */
    uint32_t slot = s->member_slot[j];
    double share = 0.0;
    for (size_t i = 0; i < s->npoints; i++) {
        if (chring__owner(s, i) != slot)
            continue;
        bool full;
        uint64_t arc = arc_before(s, i, &full);
        share += full ? 1.0 : (double)arc / CHRING_TWO_POW_64;
    }
    return share;
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
        return moved_by_arcs(a, b); /* nearest-point or varnish arcs (above) */

    /* Sweep the union of both position lists.  Between two consecutive distinct positions
     * (q_prev, q] the owner in each snapshot is the member of its first point >= q. */
    uint64_t moved_lo = 0, moved_hi = 0; /* a 128-bit sum of moved key counts */
    size_t ia = 0, ib = 0;
    uint64_t prev = 0;
    bool first = true;
    while (ia < a->npoints || ib < b->npoints) {
        uint64_t q;
        if (ib >= b->npoints || (ia < a->npoints && chring__pos(a, ia) <= chring__pos(b, ib)))
            q = chring__pos(a, ia);
        else
            q = chring__pos(b, ib);
        size_t oa = ia < a->npoints ? ia : 0; /* past the last point: wrap */
        size_t ob = ib < b->npoints ? ib : 0;
        /* Keys [0, q] for the first interval, (prev, q] afterwards. */
        uint64_t len = first ? q : q - prev;
        bool extra_one = first; /* [0, q] holds q + 1 keys */
        if (!same_name(a->slot_member[chring__owner(a, oa)],
                       b->slot_member[chring__owner(b, ob)])) {
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
        while (ia < a->npoints && chring__pos(a, ia) == q)
            ia++;
        while (ib < b->npoints && chring__pos(b, ib) == q)
            ib++;
    }
    /* The wrap interval (prev, 2^64): both owners are their first points. */
    if (!same_name(a->slot_member[chring__owner(a, 0)], b->slot_member[chring__owner(b, 0)])) {
        uint64_t len = UINT64_MAX - prev; /* keys prev+1 .. 2^64-1 */
        uint64_t before = moved_lo;
        moved_lo += len;
        moved_hi += moved_lo < before;
    }
    return (double)moved_hi + (double)moved_lo / CHRING_TWO_POW_64;
}
