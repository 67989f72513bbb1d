/* Health and warm-up (include/chring.h and docs/design.md §3, "Health and warm-up"): members
 * marked down, admission ramps and slow start.  Every expected placement here is computed by the
 * test itself from the snapshot's points (chring_snap_point) and the capacity formula
 * (chring_capacity_weighted), never by asking the library the same question twice, so a walk
 * that does not pass over a member down, or a capacity that counts it, shows.
 *
 * Single-threaded: the flips concurrent with lookups are tests/stress/health_flips.c.
 *
 * SPDX-License-Identifier: MIT
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */

#include "chring_test.h"

#include <time.h>

/* ---- the cases: every profile, and the custom hash at two widths ---------------------------- */

struct profile_case {
    const char *label;
    chring_profile_t profile;
    unsigned bits; /* custom only */
    /* Whether a member's points depend on the member alone (then down equals removal). */
    bool alone;
};

static uint64_t custom_hash(const void *data, size_t len, void *ctx)
{
    (void)ctx;
    return ref_mix64(ref_fnv1a64(data, len) ^ UINT64_C(0x5bd1e9955bd1e995));
}

static const struct profile_case cases[] = {
    {"hash64", CHRING_PROFILE_HASH64, 0, true},
    {"murmur32", CHRING_PROFILE_MURMUR32, 0, true},
    {"fnv32", CHRING_PROFILE_FNV32, 0, true},
    {"fnv16", CHRING_PROFILE_FNV16, 0, false},
    {"xxh3", CHRING_PROFILE_XXH3, 0, true},
    {"ketama", CHRING_PROFILE_KETAMA, 0, false},
    /* nginx keeps only the first of equal positions: alone unless two positions collide, which
     * down_sends_keys_where_the_walk_goes checks on the ring itself. */
    {"nginx", CHRING_PROFILE_NGINX, 0, true},
    {"custom64", CHRING_PROFILE_CUSTOM, 64, true},
    /* 16 bits: many equal positions, all kept. */
    {"custom16", CHRING_PROFILE_CUSTOM, 16, true},
};
#define NCASES (sizeof cases / sizeof cases[0])

#define NMEMBERS 8
static const uint32_t weights[NMEMBERS] = {1, 2, 1, 3, 1, 1, 2, 1};

static void member_name(char *buf, size_t cap, int i)
{
    snprintf(buf, cap, "10.0.0.%d:11211", i + 1); /* an address, for nginx's sake */
}

static void case_config(const struct profile_case *pc, chring_config_t *cfg)
{
    chring_config_default(cfg);
    cfg->profile = pc->profile;
    if (pc->profile == CHRING_PROFILE_CUSTOM) {
        cfg->hash = custom_hash;
        cfg->hash_bits = pc->bits;
    }
}

/* A ring of the case's profile with members 0..NMEMBERS-1 except `without` (-1: none), added by
 * one update in index order (the join order fnv16 depends on; with slow start configured, the
 * first population of an empty ring, which does not ramp). */
static chring_t *case_ring_cfg(const chring_config_t *cfg, int without)
{
    chring_t *r = ring_create(cfg);
    char names[NMEMBERS][32];
    chring_change_t changes[NMEMBERS];
    size_t n = 0;
    for (int i = 0; i < NMEMBERS; i++) {
        if (i == without)
            continue;
        member_name(names[i], sizeof names[i], i);
        changes[n++] = (chring_change_t){names[i], weights[i], NULL};
    }
    int rc = chring_update(r, changes, n);
    cr_assert_eq(rc, 0, "chring_update: %d", rc);
    return r;
}

static chring_t *case_ring(const struct profile_case *pc, int without)
{
    chring_config_t cfg;
    case_config(pc, &cfg);
    return case_ring_cfg(&cfg, without);
}

#define NKEYS 20000

struct keys {
    char text[NKEYS][16];
    size_t len[NKEYS];
};

static struct keys *keys_make(void)
{
    struct keys *k = malloc(sizeof *k);
    cr_assert_not_null(k, "out of memory in the test");
    for (int i = 0; i < NKEYS; i++) {
        key_name(k->text[i], sizeof k->text[i], i);
        k->len[i] = strlen(k->text[i]);
    }
    return k;
}

static const chring_member_t *find_member(const chring_snap_t *s, int i)
{
    char name[32];
    member_name(name, sizeof name, i);
    const chring_member_t *m = chring_snap_find(s, name);
    cr_assert_not_null(m, "member %s in the snapshot", name);
    return m;
}

static void set_down_ok(chring_t *r, int i, int down)
{
    char name[32];
    member_name(name, sizeof name, i);
    int rc = chring_set_down(r, name, down);
    cr_assert_eq(rc, 0, "chring_set_down(%s, %d): %d", name, down, rc);
}

/* ---- the reference walk, from the snapshot's points --------------------------------------- */

struct ref_ring {
    const chring_snap_t *s;
    size_t n;
    uint64_t *pos;
    const chring_member_t **owner;
};

static void ref_load(struct ref_ring *rr, const chring_snap_t *s)
{
    rr->s = s;
    rr->n = chring_snap_points(s);
    rr->pos = calloc(rr->n + 1, sizeof *rr->pos);
    rr->owner = calloc(rr->n + 1, sizeof *rr->owner);
    cr_assert(rr->pos && rr->owner, "out of memory in the test");
    for (size_t i = 0; i < rr->n; i++) {
        int rc = chring_snap_point(s, i, &rr->pos[i], &rr->owner[i]);
        cr_assert_eq(rc, 0, "chring_snap_point(%zu): %d", i, rc);
        if (i > 0)
            cr_assert_geq(rr->pos[i], rr->pos[i - 1], "points in ring order");
    }
}

static void ref_free(struct ref_ring *rr)
{
    free(rr->pos);
    free(rr->owner);
}

/* The first point at or after h, wrapping. */
static size_t ref_first(const struct ref_ring *rr, uint64_t h)
{
    size_t lo = 0, hi = rr->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rr->pos[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == rr->n ? 0 : lo;
}

/* A set of members (the test's own idea of who is down). */
struct set {
    const chring_member_t *m[NMEMBERS + 2];
    size_t n;
};

static bool in_set(const struct set *set, const chring_member_t *m)
{
    for (size_t k = 0; k < set->n; k++)
        if (set->m[k] == m)
            return true;
    return false;
}

/* The owner of hash h walking past the members of `down`: NULL if every member is in it. */
static const chring_member_t *ref_owner(const struct ref_ring *rr, uint64_t h,
                                        const struct set *down)
{
    if (rr->n == 0)
        return NULL;
    size_t i = ref_first(rr, h);
    for (size_t step = 0; step < rr->n; step++, i = (i + 1) % rr->n)
        if (!in_set(down, rr->owner[i]))
            return rr->owner[i];
    return NULL;
}

/* Up to n distinct members walking clockwise from h, past the members of `down`. */
static size_t ref_replicas(const struct ref_ring *rr, uint64_t h, const struct set *down,
                           const chring_member_t **out, size_t n)
{
    size_t got = 0;
    if (rr->n == 0)
        return 0;
    size_t i = ref_first(rr, h);
    for (size_t step = 0; step < rr->n && got < n; step++, i = (i + 1) % rr->n) {
        const chring_member_t *m = rr->owner[i];
        bool seen = in_set(down, m);
        for (size_t k = 0; k < got && !seen; k++)
            seen = out[k] == m;
        if (!seen)
            out[got++] = m;
    }
    return got;
}

/* The total weight of the snapshot's members outside `down`. */
static uint64_t up_weight(const chring_snap_t *s, const struct set *down)
{
    uint64_t w = 0;
    for (size_t j = 0; j < chring_snap_len(s); j++)
        if (!in_set(down, chring_snap_member(s, j)))
            w += chring_snap_weight(s, chring_snap_member(s, j));
    return w;
}

/* A member's load and admission scale as the reference sees them. */
typedef uint64_t (*ref_load_fn)(const chring_member_t *m, void *ctx);

struct ref_scale {
    const chring_member_t *m; /* NULL: every member at scale 1 */
    double scale;
};

/* E of docs/design.md §3 (effective weights): the sum, in name order as the library sums it, of
 * s_j * w_j over the members not in `down`, s_j = 1 but for scale->m. */
static double ref_effective_sum(const chring_snap_t *s, const struct set *down,
                                const struct ref_scale *scale)
{
    double sum = 0.0;
    for (size_t j = 0; j < chring_snap_len(s); j++) {
        const chring_member_t *m = chring_snap_member(s, j);
        if (in_set(down, m))
            continue;
        double w = (double)chring_snap_weight(s, m);
        sum += scale->m == m ? scale->scale * w : w;
    }
    return sum;
}

/* The capacity of m by docs/design.md §3: ceil(c * (total + 1) * w / W) with every scale 1;
 * with scale, effective weights: ceil(c * (total + 1) * (s * w) / E), left to right in double. */
static uint64_t ref_capacity(const chring_snap_t *s, const chring_member_t *m, uint64_t total,
                             uint64_t W, double c, const struct set *down,
                             const struct ref_scale *scale)
{
    uint32_t w = chring_snap_weight(s, m);
    if (scale == NULL || scale->m == NULL)
        return chring_capacity_weighted(total, w, W, c);
    double e = scale->m == m ? scale->scale * (double)w : (double)w;
    double sum = ref_effective_sum(s, down, scale);
    if (!(e > 0.0) || !(sum > 0.0))
        return 0;
    return (uint64_t)ceil(c * (double)(total + 1) * e / sum);
}

/* The bounded walk of docs/design.md §3 past the members of `skip` (down ones, or a retry's):
 * the first member whose load is below its capacity (ref_capacity); if none, the least loaded
 * met relative to its weight (the first of equals; one at scale 0 only if no other is met), and
 * *saturated is set. */
static const chring_member_t *ref_bounded(const struct ref_ring *rr, uint64_t h,
                                          const struct set *skip, ref_load_fn load, void *ctx,
                                          uint64_t total, uint64_t W, double c,
                                          const struct ref_scale *scale, bool *saturated)
{
    *saturated = false;
    if (rr->n == 0)
        return NULL;
    const chring_member_t *least = NULL, *parked = NULL;
    uint64_t least_load = 0, parked_load = 0;
    size_t i = ref_first(rr, h);
    for (size_t step = 0; step < rr->n; step++, i = (i + 1) % rr->n) {
        const chring_member_t *m = rr->owner[i];
        if (in_set(skip, m))
            continue;
        uint64_t l = load(m, ctx);
        uint64_t w = chring_snap_weight(rr->s, m);
        bool zero = scale != NULL && scale->m == m && scale->scale <= 0.0;
        if (zero) {
            if (parked == NULL || l * chring_snap_weight(rr->s, parked) < parked_load * w)
                parked = m, parked_load = l;
            continue;
        }
        if (l < ref_capacity(rr->s, m, total, W, c, skip, scale))
            return m;
        if (least == NULL || l * chring_snap_weight(rr->s, least) < least_load * w) {
            least_load = l;
            least = m;
        }
    }
    if (least == NULL)
        least = parked;
    *saturated = least != NULL;
    return least;
}

static uint64_t builtin_load(const chring_member_t *m, void *ctx)
{
    (void)ctx;
    return chring_member_load(m);
}

static const char *name_or_null(const chring_member_t *m)
{
    return m ? chring_member_name(m) : "(none)";
}

/* ---- down: placement ---------------------------------------------------------------------- */

/* Whether every member of s has all the points its weight gives (no equal positions dropped):
 * nginx's points then depend on the member alone. */
static bool no_point_dropped(const chring_snap_t *s)
{
    for (size_t j = 0; j < chring_snap_len(s); j++) {
        const chring_member_t *m = chring_snap_member(s, j);
        if (chring_snap_member_points(s, m) != 160u * chring_snap_weight(s, m))
            return false;
    }
    return true;
}

/* Checks every key with the members of `down` marked down, against the test's walk, the owners
 * with everyone up, and (alone) a ring built without them. */
static void check_down_placement(const struct profile_case *pc, chring_t *r, const struct keys *k,
                                 const char *const *before, const int *victims, size_t nvictims,
                                 bool alone)
{
    for (size_t v = 0; v < nvictims; v++)
        set_down_ok(r, victims[v], 1);
    chring_t *removed = NULL;
    if (alone) {
        /* The same membership without the victims: what a removal would do. */
        chring_config_t cfg;
        case_config(pc, &cfg);
        removed = ring_create(&cfg);
        char name[32];
        for (int i = 0; i < NMEMBERS; i++) {
            bool victim = false;
            for (size_t v = 0; v < nvictims; v++)
                victim |= victims[v] == i;
            if (victim)
                continue;
            member_name(name, sizeof name, i);
            add_or_fail(removed, name, weights[i], NULL);
        }
    }
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_snap_t *rs = removed ? chring_snap_enter(removed) : NULL;
    struct ref_ring rr;
    ref_load(&rr, s);
    struct set down = {.n = 0};
    for (size_t v = 0; v < nvictims; v++)
        down.m[down.n++] = find_member(s, victims[v]);
    size_t moved = 0;
    for (int i = 0; i < NKEYS; i++) {
        const chring_member_t *got = chring_snap_lookup(s, k->text[i], k->len[i]);
        uint64_t h = chring_snap_hash(s, k->text[i], k->len[i]);
        const chring_member_t *want = ref_owner(&rr, h, &down);
        cr_assert_eq(got, want, "%s, %zu down: %s goes to %s, the walk says %s", pc->label,
                     nvictims, k->text[i], name_or_null(got), name_or_null(want));
        cr_assert_eq(chring_snap_lookup_hash(s, h), got, "%s: lookup_hash of %s", pc->label,
                     k->text[i]);
        cr_assert(!in_set(&down, got), "%s: %s placed on a member down", pc->label, k->text[i]);
        bool was_victims = false;
        for (size_t v = 0; v < nvictims; v++)
            was_victims |= strcmp(before[i], chring_member_name(down.m[v])) == 0;
        if (!was_victims)
            cr_assert_str_eq(chring_member_name(got), before[i], "%s: %s keeps its owner",
                             pc->label, k->text[i]);
        else
            moved++;
        if (rs != NULL)
            cr_assert_str_eq(chring_member_name(got), owner_of(rs, k->text[i]),
                             "%s: %s goes where a removal sends it", pc->label, k->text[i]);
        if (i % 64 == 0) {
            char buf[CHRING_NAME_MAX + 1];
            int len = chring_lookup_name(r, k->text[i], k->len[i], buf, sizeof buf);
            cr_assert_gt(len, 0, "%s: chring_lookup_name(%s): %d", pc->label, k->text[i], len);
            cr_assert_str_eq(buf, chring_member_name(got), "%s: lookup_name of %s", pc->label,
                             k->text[i]);
        }
    }
    cr_assert_gt(moved, 0u, "%s: the members down owned some keys", pc->label);
    ref_free(&rr);
    if (rs)
        chring_snap_exit(removed, rs);
    chring_snap_exit(r, s);
    chring_free(&removed);

    /* Up again: every key goes back. */
    for (size_t v = 0; v < nvictims; v++)
        set_down_ok(r, victims[v], 0);
    s = chring_snap_enter(r);
    for (int i = 0; i < NKEYS; i++)
        cr_assert_str_eq(owner_of(s, k->text[i]), before[i], "%s: %s back on its owner after up",
                         pc->label, k->text[i]);
    chring_snap_exit(r, s);
}

Test(health, down_sends_keys_where_the_walk_goes_for_every_profile, .timeout = 300)
{
    struct keys *k = keys_make();
    for (size_t c = 0; c < NCASES; c++) {
        const struct profile_case *pc = &cases[c];
        chring_t *r = case_ring(pc, -1);
        char **before = owners_copy(r, NKEYS);
        const chring_snap_t *s = chring_snap_enter(r);
        uint64_t version = chring_snap_version(s);
        bool alone = pc->alone && (pc->profile != CHRING_PROFILE_NGINX || no_point_dropped(s));
        chring_snap_exit(r, s);
        if (pc->alone && !alone)
            cr_log_info("nginx: equal positions collided; the walk alone is checked");
        for (int v = 0; v < NMEMBERS; v++) {
            int victims[1] = {v};
            check_down_placement(pc, r, k, (const char *const *)before, victims, 1, alone);
        }
        int pair[2] = {3, 6};
        check_down_placement(pc, r, k, (const char *const *)before, pair, 2, alone);
        cr_assert_eq(ring_version(r), version, "%s: down and up publish nothing", pc->label);
        owners_free(before, NKEYS);
        chring_free(&r);
    }
    free(k);
}

Test(health, n_replica_lookups_pass_over_members_down)
{
    struct keys *k = keys_make();
    for (size_t c = 0; c < NCASES; c++) {
        const struct profile_case *pc = &cases[c];
        chring_t *r = case_ring(pc, -1);
        set_down_ok(r, 2, 1);
        set_down_ok(r, 5, 1);
        const chring_snap_t *s = chring_snap_enter(r);
        struct ref_ring rr;
        ref_load(&rr, s);
        struct set down = {{find_member(s, 2), find_member(s, 5)}, 2};
        for (int i = 0; i < NKEYS; i++) {
            uint64_t h = chring_snap_hash(s, k->text[i], k->len[i]);
            /* n = 6 is every member up; n = 8 (more than are up) walks every point, so it is
             * checked on fewer keys. */
            static const size_t ns[] = {1, 3, 6, NMEMBERS};
            for (size_t t = 0; t < (i % 50 == 0 ? 4u : 3u); t++) {
                size_t n = ns[t];
                const chring_member_t *got[NMEMBERS], *want[NMEMBERS];
                size_t ngot = chring_snap_lookup_n(s, k->text[i], k->len[i], got, n);
                size_t nwant = ref_replicas(&rr, h, &down, want, n);
                cr_assert_eq(ngot, nwant, "%s: %s, n = %zu: %zu replicas, the walk gives %zu",
                             pc->label, k->text[i], n, ngot, nwant);
                for (size_t j = 0; j < ngot; j++)
                    cr_assert_eq(got[j], want[j], "%s: %s replica %zu is %s, the walk says %s",
                                 pc->label, k->text[i], j, name_or_null(got[j]),
                                 name_or_null(want[j]));
            }
        }
        /* Every member up has points here: n = all gives the members up. */
        const chring_member_t *all[NMEMBERS];
        cr_assert_eq(chring_snap_lookup_n(s, "x", 1, all, NMEMBERS), (size_t)NMEMBERS - 2,
                     "%s: every member up, none down", pc->label);
        ref_free(&rr);
        chring_snap_exit(r, s);
        chring_free(&r);
    }
    free(k);
}

/* Caller-supplied loads, by member index (udata-free: by name). */
struct name_loads {
    const chring_snap_t *s;
    uint64_t load[NMEMBERS];
};

static uint64_t name_load(const chring_member_t *m, void *ctx)
{
    const struct name_loads *nl = ctx;
    for (int i = 0; i < NMEMBERS; i++)
        if (find_member(nl->s, i) == m)
            return nl->load[i];
    cr_assert_fail("a load asked for a member outside the snapshot");
    return 0;
}

Test(health, bounded_lookups_pass_over_members_down_and_count_only_up_weights)
{
    struct keys *k = keys_make();
    static const double balances[] = {1.0, 1.25};
    for (size_t c = 0; c < NCASES; c++) {
        const struct profile_case *pc = &cases[c];
        chring_t *r = case_ring(pc, -1);
        set_down_ok(r, 1, 1); /* weight 2, and the least loaded: a walk that forgets it ends here */
        const chring_snap_t *s = chring_snap_enter(r);
        struct ref_ring rr;
        ref_load(&rr, s);
        struct set down = {{find_member(s, 1)}, 1};
        /* m = 60 of which the member down holds none; weights up 10 of 12. */
        struct name_loads nl = {s, {9, 0, 4, 17, 6, 9, 10, 5}};
        uint64_t total = 0;
        for (int i = 0; i < NMEMBERS; i++)
            total += nl.load[i];
        uint64_t W = up_weight(s, &down);
        cr_assert_eq(W, 10u, "%s: the weights of the members up", pc->label);
        size_t spilled = 0;
        for (size_t b = 0; b < sizeof balances / sizeof balances[0]; b++) {
            for (int i = 0; i < NKEYS; i += 2) {
                uint64_t h = chring_snap_hash(s, k->text[i], k->len[i]);
                bool saturated;
                const chring_member_t *want = ref_bounded(&rr, h, &down, name_load, &nl, total, W,
                                                          balances[b], NULL, &saturated);
                cr_assert(!saturated, "loads summing to m always leave room");
                const chring_member_t *got = chring_snap_lookup_bounded(
                    s, k->text[i], k->len[i], balances[b], name_load, &nl);
                cr_assert_eq(got, want, "%s, c = %g: %s bounded to %s, the walk says %s", pc->label,
                             balances[b], k->text[i], name_or_null(got), name_or_null(want));
                spilled += got != chring_snap_lookup(s, k->text[i], k->len[i]);
            }
        }
        cr_assert_gt(spilled, 0u, "%s: some keys spilled (the loads matter)", pc->label);
        /* Loads all zero: bounded and plain agree, members down passed over. */
        struct name_loads zero = {s, {0}};
        for (int i = 0; i < NKEYS; i += 7)
            cr_assert_eq(
                chring_snap_lookup_bounded(s, k->text[i], k->len[i], 1.25, name_load, &zero),
                chring_snap_lookup(s, k->text[i], k->len[i]), "%s: %s, no load: bounded is plain",
                pc->label, k->text[i]);
        ref_free(&rr);
        chring_snap_exit(r, s);
        chring_free(&r);
    }
    free(k);
}

/* Acquires keys holding every lease, each choice checked against the test's bounded walk with
 * the built-in loads and m, and members of `skip` passed over. */
static void acquire_and_check(const char *label, chring_t *r, const struct keys *k, int first,
                              int count, const struct set *down, const struct ref_scale *scale,
                              chring_lease_t *leases)
{
    for (int i = first; i < first + count; i++) {
        const chring_snap_t *s = chring_snap_enter(r);
        struct ref_ring rr;
        ref_load(&rr, s);
        uint64_t h = chring_snap_hash(s, k->text[i], k->len[i]);
        bool saturated;
        const chring_member_t *want =
            ref_bounded(&rr, h, down, builtin_load, NULL, chring_leases(r), up_weight(s, down),
                        CHRING_DEFAULT_BALANCE, scale, &saturated);
        cr_assert(!saturated, "%s: %s: the walk found room", label, k->text[i]);
        /* The capacities the next acquire judges members by. */
        if (i % 50 == 0)
            for (size_t j = 0; j < chring_snap_len(s); j++) {
                const chring_member_t *m = chring_snap_member(s, j);
                if (in_set(down, m))
                    continue;
                uint64_t cap = ref_capacity(s, m, chring_leases(r), up_weight(s, down),
                                            CHRING_DEFAULT_BALANCE, down, scale);
                cr_assert_eq(chring_member_capacity(r, s, m), cap,
                             "%s: capacity of %s after %d leases", label, chring_member_name(m),
                             i - first);
            }
        ref_free(&rr);
        chring_snap_exit(r, s);
        int rc = chring_acquire(r, k->text[i], k->len[i], &leases[i - first]);
        cr_assert_eq(rc, 0, "%s: acquire %s: %d", label, k->text[i], rc);
        cr_assert_eq(leases[i - first].member, want, "%s: %s acquired on %s, the walk says %s",
                     label, k->text[i], name_or_null(leases[i - first].member), name_or_null(want));
    }
}

static void release_all(chring_t *r, chring_lease_t *leases, int count)
{
    for (int i = 0; i < count; i++)
        chring_release(r, &leases[i]);
    cr_assert_eq(chring_leases(r), 0u, "every lease released");
}

#define NACQUIRE 1500

Test(health, acquire_passes_over_members_down_and_capacities_count_only_members_up, .timeout = 300)
{
    struct keys *k = keys_make();
    chring_lease_t *leases = calloc(NACQUIRE, sizeof *leases);
    cr_assert_not_null(leases, "out of memory in the test");
    for (size_t c = 0; c < NCASES; c++) {
        const struct profile_case *pc = &cases[c];
        chring_t *r = case_ring(pc, -1);
        set_down_ok(r, 3, 1); /* weights 3 and 1 of 12: W is 8 without them */
        set_down_ok(r, 4, 1);
        const chring_snap_t *s = chring_snap_enter(r);
        struct set down = {{find_member(s, 3), find_member(s, 4)}, 2};
        chring_snap_exit(r, s);
        acquire_and_check(pc->label, r, k, 0, NACQUIRE, &down, NULL, leases);
        chring_stats_t st;
        chring_stats(r, &st);
        cr_assert_eq(st.saturated, 0u, "%s: no saturation", pc->label);
        cr_assert_gt(st.spills, 0u, "%s: some acquires spilled (the bound was met)", pc->label);
        s = chring_snap_enter(r);
        cr_assert_eq(chring_member_load(down.m[0]) + chring_member_load(down.m[1]), 0u,
                     "%s: nothing acquired on the members down", pc->label);
        chring_snap_exit(r, s);
        release_all(r, leases, NACQUIRE);
        chring_free(&r);
    }
    free(leases);
    free(k);
}

Test(health, acquire_skip_also_passes_over_members_down)
{
    struct keys *k = keys_make();
    chring_t *r = case_ring(&cases[0], -1);
    set_down_ok(r, 0, 1);
    const chring_snap_t *s = chring_snap_enter(r);
    struct ref_ring rr;
    ref_load(&rr, s);
    const chring_member_t *downm = find_member(s, 0);
    size_t checked = 0;
    for (int i = 0; i < NKEYS; i += 5) {
        uint64_t h = chring_snap_hash(s, k->text[i], k->len[i]);
        /* Skip the key's owner with the member down up: for keys of member 0 that is member 0
         * itself (then only the down flag keeps it out), for the others their owner. */
        struct set none = {.n = 0};
        const chring_member_t *up_owner = ref_owner(&rr, h, &none);
        struct set skip = {{downm, up_owner}, 2};
        bool saturated;
        const chring_member_t *want =
            ref_bounded(&rr, h, &skip, builtin_load, NULL, 0, 1, 1.0, NULL, &saturated);
        chring_lease_t lease;
        int rc = chring_acquire_skip(r, k->text[i], k->len[i], &up_owner, 1, &lease);
        cr_assert_eq(rc, 0, "acquire_skip %s: %d", k->text[i], rc);
        cr_assert_eq(lease.member, want, "%s skipped to %s, the walk says %s", k->text[i],
                     name_or_null(lease.member), name_or_null(want));
        cr_assert_neq(lease.member, downm, "never the member down");
        chring_release(r, &lease);
        checked += up_owner == downm;
    }
    cr_assert_gt(checked, 0u, "some keys belonged to the member down");
    /* Skip every member up: only the one down is left, and it does not count. */
    const chring_member_t *ups[NMEMBERS];
    size_t nups = 0;
    for (int i = 1; i < NMEMBERS; i++)
        ups[nups++] = find_member(s, i);
    chring_lease_t lease = {(chring_member_t *)downm, 42, 0};
    cr_assert_eq(chring_acquire_skip(r, "k", 1, ups, nups, &lease), -ENOENT,
                 "only a member down is left: -ENOENT");
    cr_assert_null(lease.member, "the lease is cleared");
    ref_free(&rr);
    chring_snap_exit(r, s);
    chring_free(&r);
    free(k);
}

Test(health, every_member_down_answers_like_an_empty_ring)
{
    for (size_t c = 0; c < NCASES; c++) {
        const struct profile_case *pc = &cases[c];
        chring_t *r = case_ring(pc, -1);
        for (int i = 0; i < NMEMBERS; i++)
            set_down_ok(r, i, 1);
        chring_stats_t st;
        chring_stats(r, &st);
        cr_assert_eq(st.down, (uint64_t)NMEMBERS, "%s: stats.down", pc->label);
        const chring_snap_t *s = chring_snap_enter(r);
        struct name_loads zero = {s, {0}};
        char key[32], buf[64];
        for (int i = 0; i < 500; i++) {
            key_name(key, sizeof key, i);
            size_t len = strlen(key);
            const chring_member_t *out[NMEMBERS];
            cr_assert_null(chring_snap_lookup(s, key, len), "%s: lookup %s", pc->label, key);
            cr_assert_null(chring_snap_lookup_hash(s, chring_snap_hash(s, key, len)),
                           "%s: lookup_hash %s", pc->label, key);
            cr_assert_eq(chring_snap_lookup_n(s, key, len, out, NMEMBERS), 0u, "%s: lookup_n %s",
                         pc->label, key);
            cr_assert_null(chring_snap_lookup_bounded(s, key, len, 1.25, name_load, &zero),
                           "%s: lookup_bounded %s", pc->label, key);
        }
        chring_snap_exit(r, s);
        cr_assert_eq(chring_lookup_name(r, "k", 1, buf, sizeof buf), -ENOENT, "%s: lookup_name",
                     pc->label);
        chring_lease_t lease = {(chring_member_t *)1, 7, 0};
        cr_assert_eq(chring_acquire(r, "k", 1, &lease), -ENOENT, "%s: acquire", pc->label);
        cr_assert_null(lease.member, "%s: lease cleared", pc->label);
        lease.member = (chring_member_t *)1;
        cr_assert_eq(chring_acquire_skip(r, "k", 1, NULL, 0, &lease), -ENOENT, "%s: acquire_skip",
                     pc->label);
        cr_assert_null(lease.member, "%s: lease cleared", pc->label);
        cr_assert_eq(chring_leases(r), 0u, "%s: no lease taken", pc->label);
        /* One member up again owns every key. */
        set_down_ok(r, 6, 0);
        s = chring_snap_enter(r);
        const chring_member_t *only = find_member(s, 6);
        for (int i = 0; i < 500; i++) {
            key_name(key, sizeof key, i);
            cr_assert_eq(chring_snap_lookup(s, key, strlen(key)), only,
                         "%s: the one member up owns %s", pc->label, key);
        }
        chring_snap_exit(r, s);
        chring_free(&r);
    }
}

/* ---- down: state, errors, what ignores it ---------------------------------------------------- */

Test(health, set_down_errors_and_the_count_of_members_down)
{
    chring_t *r = case_ring(&cases[0], -1);
    char longname[CHRING_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    cr_assert_eq(chring_set_down(NULL, "10.0.0.1:11211", 1), -EINVAL, "NULL ring");
    cr_assert_eq(chring_set_down(r, NULL, 1), -EINVAL, "NULL name");
    cr_assert_eq(chring_set_down(r, "", 1), -EINVAL, "empty name");
    cr_assert_eq(chring_set_down(r, longname, 1), -ENAMETOOLONG, "name too long");
    cr_assert_eq(chring_set_down(r, "10.0.0.99:11211", 1), -ENOENT, "non-member");
    cr_assert_eq(chring_member_is_down(NULL), -EINVAL, "is_down(NULL)");
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.down, 0u, "failed calls mark nothing down");
    uint64_t publishes = st.publishes, version = st.version;

    set_down_ok(r, 0, 1);
    set_down_ok(r, 0, 1); /* no change: still 0 */
    char name[32];
    member_name(name, sizeof name, 2);
    cr_assert_eq(chring_set_down(r, name, 7), 0, "any non-zero is down");
    chring_stats(r, &st);
    cr_assert_eq(st.down, 2u, "two members down");
    cr_assert_eq(st.publishes, publishes, "down publishes nothing");
    cr_assert_eq(st.version, version, "the snapshot stays");
    const chring_snap_t *s = chring_snap_enter(r);
    cr_assert_eq(chring_member_is_down(find_member(s, 0)), 1, "member 0 down");
    cr_assert_eq(chring_member_is_down(find_member(s, 1)), 0, "member 1 up");
    cr_assert_eq(chring_member_is_down(find_member(s, 2)), 1, "member 2 down");
    chring_snap_exit(r, s);
    set_down_ok(r, 2, 0);
    set_down_ok(r, 2, 0);
    chring_stats(r, &st);
    cr_assert_eq(st.down, 1u, "one member down");
    chring_free(&r);
}

Test(health, a_member_removed_while_down_comes_back_up_as_a_new_object)
{
    chring_t *r = case_ring(&cases[0], -1);
    set_down_ok(r, 1, 1);
    const chring_snap_t *held = chring_snap_hold(r);
    const chring_member_t *old = find_member(held, 1);
    char name[32];
    member_name(name, sizeof name, 1);
    cr_assert_eq(chring_remove(r, name), 0, "remove the member down");
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.down, 0u, "a removed member no longer counts as down");
    cr_assert_eq(chring_set_down(r, name, 0), -ENOENT, "no longer a member");
    cr_assert_eq(chring_member_is_down(old), 1, "the old object stays down");
    add_or_fail(r, name, weights[1], NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *fresh = find_member(s, 1);
    cr_assert_neq(fresh, old, "a new object");
    cr_assert_eq(chring_member_is_down(fresh), 0, "the new object is up");
    /* It owns its keys again, and capacities count its weight. */
    struct keys *k = keys_make();
    size_t owned = 0;
    for (int i = 0; i < NKEYS; i++)
        owned += chring_snap_lookup(s, k->text[i], k->len[i]) == fresh;
    cr_assert_gt(owned, 0u, "the re-added member owns keys");
    cr_assert_eq(chring_member_capacity(r, s, fresh),
                 chring_capacity_weighted(0, weights[1], 12, CHRING_DEFAULT_BALANCE),
                 "W counts every member again");
    chring_snap_exit(r, s);
    chring_stats(r, &st);
    cr_assert_eq(st.down, 0u, "nothing down");
    chring_snap_put(r, held);
    free(k);
    chring_free(&r);
}

Test(health, reweighting_or_batch_removing_members_down_keeps_capacities_right)
{
    chring_t *r = case_ring(&cases[0], -1); /* total weight 12 */
    chring_lease_t lease[40];
    for (int i = 0; i < 40; i++) {
        char key[32];
        key_name(key, sizeof key, i);
        cr_assert_eq(chring_acquire(r, key, strlen(key), &lease[i]), 0, "acquire %s", key);
    }
    set_down_ok(r, 3, 1); /* weight 3: W up = 9 */
    char name[32];
    member_name(name, sizeof name, 3);
    cr_assert_eq(chring_set_weight(r, name, 5), 0, "reweight the member down");
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m0 = find_member(s, 0);
    cr_assert_eq(chring_member_capacity(r, s, m0),
                 chring_capacity_weighted(40, 1, 9, CHRING_DEFAULT_BALANCE),
                 "W up stays 9 after the member down grew to 5");
    cr_assert_eq(chring_member_is_down(find_member(s, 3)), 1, "still down after reweighting");
    chring_snap_exit(r, s);
    set_down_ok(r, 3, 0);
    s = chring_snap_enter(r);
    m0 = find_member(s, 0);
    cr_assert_eq(chring_member_capacity(r, s, m0),
                 chring_capacity_weighted(40, 1, 14, CHRING_DEFAULT_BALANCE),
                 "up again: W = 14 with its new weight");
    chring_snap_exit(r, s);
    /* A batch that removes one member down and keeps another. */
    set_down_ok(r, 3, 1);
    set_down_ok(r, 6, 1);
    char name6[32];
    member_name(name6, sizeof name6, 6);
    chring_change_t changes[2] = {{name, 0, NULL}, {"10.0.0.50:11211", 4, NULL}};
    cr_assert_eq(chring_update(r, changes, 2), 0, "update");
    chring_stats_t st;
    chring_stats(r, &st);
    cr_assert_eq(st.down, 1u, "one member left down");
    s = chring_snap_enter(r);
    m0 = find_member(s, 0);
    /* Members: weights 1 2 1 1 1 1 (the one at index 6, weight 2, down) + 4: up 11. */
    cr_assert_eq(chring_member_capacity(r, s, m0),
                 chring_capacity_weighted(40, 1, 11, CHRING_DEFAULT_BALANCE),
                 "W up after the batch");
    chring_snap_exit(r, s);
    /* sync to a set without member 6: nothing down. */
    const chring_change_t set[2] = {{"10.0.0.1:11211", 1, NULL}, {"10.0.0.2:11211", 2, NULL}};
    cr_assert_eq(chring_sync(r, set, 2), 0, "sync");
    chring_stats(r, &st);
    cr_assert_eq(st.down, 0u, "the member down left with the sync");
    s = chring_snap_enter(r);
    cr_assert_eq(chring_member_capacity(r, s, find_member(s, 0)),
                 chring_capacity_weighted(40, 1, 3, CHRING_DEFAULT_BALANCE), "W = 3");
    chring_snap_exit(r, s);
    for (int i = 0; i < 40; i++)
        chring_release(r, &lease[i]);
    chring_free(&r);
}

Test(health, acquire_member_on_a_member_down_works)
{
    chring_t *r = case_ring(&cases[0], -1);
    set_down_ok(r, 4, 1);
    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = find_member(s, 4);
    chring_lease_t lease;
    cr_assert_eq(chring_acquire_member(r, s, m, &lease), 0, "the caller chose it");
    cr_assert_eq(lease.member, m, "the lease is on it");
    cr_assert_eq(chring_member_load(m), 1u, "its load grew");
    chring_snap_exit(r, s);
    cr_assert_eq(chring_leases(r), 1u, "m = 1");
    /* Its lease keeps counting in m while it is down, and is released normally. */
    set_down_ok(r, 4, 0);
    chring_release(r, &lease);
    s = chring_snap_enter(r);
    cr_assert_eq(chring_member_load(find_member(s, 4)), 0u, "released");
    chring_snap_exit(r, s);
    chring_free(&r);
}

Test(health, snap_moved_and_member_share_ignore_health)
{
    for (size_t c = 0; c < NCASES; c++) {
        const struct profile_case *pc = &cases[c];
        chring_t *r = case_ring(pc, 7); /* without member 7, which joins below */
        const chring_snap_t *a = chring_snap_hold(r);
        char name[32];
        member_name(name, sizeof name, 7);
        add_or_fail(r, name, weights[7], NULL);
        const chring_snap_t *b = chring_snap_hold(r);
        double moved_up = chring_snap_moved(a, b);
        double shares_up[NMEMBERS];
        for (int i = 0; i < NMEMBERS; i++)
            shares_up[i] = chring_member_share(b, find_member(b, i));
        cr_assert_gt(moved_up, 0.0, "%s: the join moved keys", pc->label);
        set_down_ok(r, 0, 1);
        set_down_ok(r, 7, 1);
        cr_assert_eq(chring_snap_moved(a, b), moved_up, "%s: moved ignores members down",
                     pc->label);
        for (int i = 0; i < NMEMBERS; i++)
            cr_assert_eq(chring_member_share(b, find_member(b, i)), shares_up[i],
                         "%s: share of member %d ignores health", pc->label, i);
        cr_assert_gt(shares_up[0], 0.0, "%s: the member down keeps its share", pc->label);
        chring_snap_put(r, a);
        chring_snap_put(r, b);
        chring_free(&r);
    }
}

/* ---- ramps ------------------------------------------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
    nanosleep(&ts, NULL);
}

static void set_ramp_ok(chring_t *r, int i, double from, double to, uint32_t ms)
{
    char name[32];
    member_name(name, sizeof name, i);
    int rc = chring_set_ramp(r, name, from, to, ms);
    cr_assert_eq(rc, 0, "chring_set_ramp(%s, %g, %g, %u): %d", name, from, to, (unsigned)ms, rc);
}

static double scale_of(chring_t *r, int i)
{
    const chring_snap_t *s = chring_snap_enter(r);
    double scale = chring_member_scale(find_member(s, i));
    chring_snap_exit(r, s);
    return scale;
}

Test(health, scale_zero_admits_nothing_and_its_keys_spill_clockwise)
{
    struct keys *k = keys_make();
    chring_lease_t *leases = calloc(NACQUIRE, sizeof *leases);
    cr_assert_not_null(leases, "out of memory in the test");
    for (size_t c = 0; c < NCASES; c++) {
        const struct profile_case *pc = &cases[c];
        chring_t *r = case_ring(pc, -1);
        set_ramp_ok(r, 1, 0.0, 0.0, 0);
        cr_assert_eq(scale_of(r, 1), 0.0, "%s: scale 0", pc->label);
        const chring_snap_t *s = chring_snap_enter(r);
        struct ref_ring rr;
        ref_load(&rr, s);
        const chring_member_t *zero = find_member(s, 1);
        struct set as_down = {{zero}, 1};
        /* One at a time (each lease released): its keys go exactly where down would send them,
         * every other key to its owner; plain lookups ignore the scale. */
        size_t its = 0;
        for (int i = 0; i < NKEYS; i++) {
            const chring_member_t *owner = chring_snap_lookup(s, k->text[i], k->len[i]);
            uint64_t h = chring_snap_hash(s, k->text[i], k->len[i]);
            chring_lease_t lease;
            cr_assert_eq(chring_acquire(r, k->text[i], k->len[i], &lease), 0, "acquire");
            cr_assert_eq(lease.member, ref_owner(&rr, h, &as_down),
                         "%s: %s acquired on %s, the next member clockwise is %s", pc->label,
                         k->text[i], name_or_null(lease.member),
                         name_or_null(ref_owner(&rr, h, &as_down)));
            if (owner != zero)
                cr_assert_eq(lease.member, owner, "%s: %s stays on its owner", pc->label,
                             k->text[i]);
            its += owner == zero;
            chring_release(r, &lease);
        }
        cr_assert_gt(its, 0u, "%s: plain lookups still give it keys", pc->label);
        ref_free(&rr);
        chring_snap_exit(r, s);
        /* Holding leases: the bounded walk with its capacity 0. */
        struct set none = {.n = 0};
        struct ref_scale scale = {zero, 0.0};
        acquire_and_check(pc->label, r, k, 0, 300, &none, &scale, leases);
        cr_assert_eq(chring_member_load(zero), 0u, "%s: nothing admitted", pc->label);
        release_all(r, leases, 300);
        chring_free(&r);
    }
    free(leases);
    free(k);
}

Test(health, a_constant_scale_multiplies_the_capacity)
{
    struct keys *k = keys_make();
    chring_lease_t *leases = calloc(NACQUIRE, sizeof *leases);
    cr_assert_not_null(leases, "out of memory in the test");
    static const double scales[] = {0.5, 0.25, 0.8};
    for (size_t c = 0; c < NCASES; c += 2) {
        for (size_t j = 0; j < sizeof scales / sizeof scales[0]; j++) {
            const struct profile_case *pc = &cases[c];
            chring_t *r = case_ring(pc, -1);
            set_ramp_ok(r, 3, scales[j], scales[j], 0);
            cr_assert_eq(scale_of(r, 3), scales[j], "%s: scale %g", pc->label, scales[j]);
            const chring_snap_t *s = chring_snap_enter(r);
            struct ref_scale scale = {find_member(s, 3), scales[j]};
            chring_snap_exit(r, s);
            struct set none = {.n = 0};
            acquire_and_check(pc->label, r, k, 0, 800, &none, &scale, leases);
            chring_stats_t st;
            chring_stats(r, &st);
            cr_assert_eq(st.saturated, 0u, "%s: no saturation", pc->label);
            release_all(r, leases, 800);
            chring_free(&r);
        }
    }
    free(leases);
    free(k);
}

Test(health, scale_one_acquires_exactly_as_a_ring_without_ramps, .timeout = 120)
{
    struct keys *k = keys_make();
    chring_lease_t *la = calloc(NACQUIRE, sizeof *la), *lb = calloc(NACQUIRE, sizeof *lb);
    cr_assert(la && lb, "out of memory in the test");
    for (size_t c = 0; c < NCASES; c++) {
        const struct profile_case *pc = &cases[c];
        chring_t *a = case_ring(pc, -1), *b = case_ring(pc, -1);
        set_ramp_ok(a, 0, 0.3, 1.0, 0); /* to 1 at once */
        set_ramp_ok(a, 2, 1.0, 1.0, 0);
        set_ramp_ok(a, 5, 1.0, 1.0, 600000); /* a ramp at 1 all along */
        set_ramp_ok(a, 6, 0.2, 1.0, 20);     /* reaches 1 below */
        double deadline = now_ms() + 10000;
        while (scale_of(a, 6) < 1.0 && now_ms() < deadline)
            sleep_ms(5);
        for (int i = 0; i < NMEMBERS; i++)
            cr_assert_eq(scale_of(a, i), 1.0, "%s: member %d at scale 1", pc->label, i);
        for (int i = 0; i < NACQUIRE; i++) {
            cr_assert_eq(chring_acquire(a, k->text[i], k->len[i], &la[i]), 0, "acquire a");
            cr_assert_eq(chring_acquire(b, k->text[i], k->len[i], &lb[i]), 0, "acquire b");
            cr_assert_str_eq(chring_member_name(la[i].member), chring_member_name(lb[i].member),
                             "%s: %s placed alike with and without ramps at 1", pc->label,
                             k->text[i]);
        }
        chring_stats_t sa, sb;
        chring_stats(a, &sa);
        chring_stats(b, &sb);
        cr_assert_gt(sa.spills, 0u, "%s: the bound was met", pc->label);
        cr_assert_eq(sa.spills, sb.spills, "%s: same spills", pc->label);
        release_all(a, la, NACQUIRE);
        release_all(b, lb, NACQUIRE);
        chring_free(&a);
        chring_free(&b);
    }
    free(la);
    free(lb);
    free(k);
}

/* The scale a linear ramp from..to over len ms gives dt ms after its start. */
static double linear(double from, double to, double len, double dt)
{
    if (dt <= 0)
        return from;
    if (dt >= len)
        return to;
    return from + (to - from) * (dt / len);
}

/* Samples member i's scale during a ramp that started between t0 and t1, at `at` ms after t1,
 * and checks it lies between the values the two bracketing instants give. */
static void check_ramp_sample(chring_t *r, int i, double from, double to, double len, double t0,
                              double t1, double at, const char *what)
{
    double wait = t1 + at - now_ms();
    if (wait > 0)
        sleep_ms(wait);
    double ta = now_ms();
    double s = scale_of(r, i);
    double tb = now_ms();
    /* Earliest instant after the latest start, latest instant after the earliest start. */
    double x = linear(from, to, len, ta - t1), y = linear(from, to, len, tb - t0);
    double lo = x < y ? x : y, hi = x < y ? y : x;
    cr_assert(s >= lo - 1e-9 && s <= hi + 1e-9,
              "%s: scale %.6f %.1f ms in, outside [%.6f, %.6f] (the call took %.3f ms)", what, s,
              ta - t1, lo, hi, t1 - t0);
}

Test(health, a_linear_ramp_measured_on_the_way_and_at_its_end)
{
    chring_t *r = case_ring(&cases[0], -1);
    const double len = 400;
    double t0 = now_ms();
    set_ramp_ok(r, 2, 0.2, 0.8, (uint32_t)len);
    double t1 = now_ms();
    check_ramp_sample(r, 2, 0.2, 0.8, len, t0, t1, 0, "warm-up at its start");
    check_ramp_sample(r, 2, 0.2, 0.8, len, t0, t1, len / 4, "warm-up a quarter of the way");
    check_ramp_sample(r, 2, 0.2, 0.8, len, t0, t1, len / 2, "warm-up half-way");
    check_ramp_sample(r, 2, 0.2, 0.8, len, t0, t1, len * 3 / 4, "warm-up three quarters in");
    check_ramp_sample(r, 2, 0.2, 0.8, len, t0, t1, len + 20, "warm-up past its end");
    cr_assert_eq(scale_of(r, 2), 0.8, "the ramp stays at `to`");
    /* A drain from the current scale to 0, as the header describes it. */
    const chring_snap_t *s = chring_snap_enter(r);
    double from = chring_member_scale(find_member(s, 2));
    chring_snap_exit(r, s);
    t0 = now_ms();
    set_ramp_ok(r, 2, from, 0.0, (uint32_t)len);
    t1 = now_ms();
    check_ramp_sample(r, 2, from, 0.0, len, t0, t1, len / 2, "drain half-way");
    check_ramp_sample(r, 2, from, 0.0, len, t0, t1, len + 20, "drain past its end");
    cr_assert_eq(scale_of(r, 2), 0.0, "drained to 0");
    /* The acquire sees the end of the drain: nothing admitted. */
    const char *key = NULL;
    char buf[32];
    s = chring_snap_enter(r);
    const chring_member_t *m2 = find_member(s, 2);
    for (int i = 0; i < NKEYS && key == NULL; i++) {
        key_name(buf, sizeof buf, i);
        if (chring_snap_lookup(s, buf, strlen(buf)) == m2)
            key = buf;
    }
    chring_snap_exit(r, s);
    cr_assert_not_null(key, "a key of member 2");
    chring_lease_t lease;
    cr_assert_eq(chring_acquire(r, key, strlen(key), &lease), 0, "acquire");
    cr_assert_str_neq(chring_member_name(lease.member), "10.0.0.3:11211", "drained: refused");
    chring_release(r, &lease);
    /* Other members never ramped. */
    cr_assert_eq(scale_of(r, 1), 1.0, "member 1 at 1");
    chring_free(&r);
}

Test(health, capacity_follows_the_scale_during_a_ramp)
{
    chring_t *r = case_ring(&cases[0], -1);
    chring_lease_t lease[200];
    char key[32];
    for (int i = 0; i < 200; i++) {
        key_name(key, sizeof key, i);
        cr_assert_eq(chring_acquire(r, key, strlen(key), &lease[i]), 0, "acquire");
    }
    const double len = 300;
    double t0 = now_ms();
    set_ramp_ok(r, 3, 0.0, 1.0, (uint32_t)len);
    double t1 = now_ms();
    for (int step = 0; step <= 4; step++) {
        double wait = t1 + step * len / 4 - now_ms();
        if (wait > 0)
            sleep_ms(wait);
        const chring_snap_t *s = chring_snap_enter(r);
        const chring_member_t *m = find_member(s, 3);
        double ta = now_ms();
        uint64_t cap = chring_member_capacity(r, s, m);
        double tb = now_ms();
        chring_snap_exit(r, s);
        /* Effective weights (docs/design.md §3): member 3 (weight 3 of 12) at scale x has
         * capacity ceil(c * 201 * 3x / (9 + 3y)), y the scale its E was summed at, at most 1 ms
         * earlier. */
        double x_lo = linear(0.0, 1.0, len, ta - t1), x_hi = linear(0.0, 1.0, len, tb - t0);
        double y_lo = linear(0.0, 1.0, len, ta - t1 - 1.0);
        uint64_t lo = (uint64_t)ceil(CHRING_DEFAULT_BALANCE * 201.0 * (3.0 * x_lo) / (9.0 + 3.0 * x_hi));
        uint64_t hi = (uint64_t)ceil(CHRING_DEFAULT_BALANCE * 201.0 * (3.0 * x_hi) / (9.0 + 3.0 * y_lo));
        uint64_t plain = chring_capacity_weighted(200, 3, 12, CHRING_DEFAULT_BALANCE);
        cr_assert(cap >= lo && cap <= hi, "step %d: capacity %llu outside [%llu, %llu] (%llu at 1)",
                  step, (unsigned long long)cap, (unsigned long long)lo, (unsigned long long)hi,
                  (unsigned long long)plain);
    }
    for (int i = 0; i < 200; i++)
        chring_release(r, &lease[i]);
    chring_free(&r);
}

Test(health, set_ramp_refuses_bad_values_and_changes_nothing)
{
    chring_t *r = case_ring(&cases[0], -1);
    set_ramp_ok(r, 0, 0.5, 0.5, 0);
    char name[32];
    member_name(name, sizeof name, 0);
    char longname[CHRING_NAME_MAX + 2];
    memset(longname, 'y', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    static const double bad[] = {-0.1, 1.0000001, 2.0, -1e-300, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(chring_set_ramp(r, name, bad[i], 1.0, 100), -EINVAL, "from %g", bad[i]);
        cr_assert_eq(chring_set_ramp(r, name, 0.0, bad[i], 0), -EINVAL, "to %g", bad[i]);
    }
    cr_assert_eq(chring_set_ramp(NULL, name, 0, 1, 10), -EINVAL, "NULL ring");
    cr_assert_eq(chring_set_ramp(r, NULL, 0, 1, 10), -EINVAL, "NULL name");
    cr_assert_eq(chring_set_ramp(r, "", 0, 1, 10), -EINVAL, "empty name");
    cr_assert_eq(chring_set_ramp(r, longname, 0, 1, 10), -ENAMETOOLONG, "name too long");
    cr_assert_eq(chring_set_ramp(r, "10.0.0.99:11211", 0, 1, 10), -ENOENT, "non-member");
    cr_assert_eq(scale_of(r, 0), 0.5, "refused calls change nothing");
    cr_assert_eq(chring_member_scale(NULL), 0.0, "scale of NULL");
    /* The bounds themselves are fine. */
    set_ramp_ok(r, 0, 0.0, 1.0, 0);
    cr_assert_eq(scale_of(r, 0), 1.0, "ms 0: `to` at once");
    set_ramp_ok(r, 0, 1.0, 0.0, 0);
    cr_assert_eq(scale_of(r, 0), 0.0, "ms 0: `to` at once");
    /* Slow start's configuration. */
    chring_config_t cfg;
    chring_config_default(&cfg);
    cr_assert_eq(cfg.slow_start_ms, 0u, "slow start off by default");
    cr_assert_eq(cfg.slow_start_from, CHRING_DEFAULT_SLOW_START_FROM, "default from");
    chring_t *bad_ring = NULL;
    cfg.slow_start_ms = 1000;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cfg.slow_start_from = bad[i];
        cr_assert_eq(chring_new(&bad_ring, &cfg), -EINVAL, "slow_start_from %g", bad[i]);
    }
    cfg.slow_start_ms = 0;
    cfg.slow_start_from = NAN;
    cr_assert_eq(chring_new(&bad_ring, &cfg), 0, "slow start off: from is not looked at");
    chring_free(&bad_ring);
    chring_free(&r);
}

/* ---- slow start ---------------------------------------------------------------------------- */

Test(health, slow_start_ramps_joiners_but_not_the_first_population)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.slow_start_ms = 400;
    cfg.slow_start_from = 0.25;
    chring_t *r = ring_create(&cfg);
    chring_change_t first[3] = {{"a", 1, NULL}, {"b", 1, NULL}, {"c", 2, NULL}};
    cr_assert_eq(chring_update(r, first, 3), 0, "first population");
    const chring_snap_t *s = chring_snap_enter(r);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(chring_member_scale(chring_snap_find(s, first[i].name)), 1.0,
                     "%s: the first population does not ramp", first[i].name);
    chring_snap_exit(r, s);

    /* Joins by add, update and sync, each bracketed in time. */
    double t0[3], t1[3];
    const char *joiner[3] = {"d", "e", "f"};
    t0[0] = now_ms();
    add_or_fail(r, "d", 1, NULL);
    t1[0] = now_ms();
    chring_change_t e = {"e", 2, NULL};
    t0[1] = now_ms();
    cr_assert_eq(chring_update(r, &e, 1), 0, "update adds e");
    t1[1] = now_ms();
    chring_change_t all[6] = {{"a", 1, NULL}, {"b", 1, NULL}, {"c", 2, NULL},
                              {"d", 1, NULL}, {"e", 2, NULL}, {"f", 1, NULL}};
    t0[2] = now_ms();
    cr_assert_eq(chring_sync(r, all, 6), 0, "sync adds f");
    t1[2] = now_ms();
    for (int j = 0; j < 3; j++) {
        s = chring_snap_enter(r);
        double ta = now_ms();
        double scale = chring_member_scale(chring_snap_find(s, joiner[j]));
        double tb = now_ms();
        chring_snap_exit(r, s);
        double lo = linear(0.25, 1.0, 400, ta - t1[j]), hi = linear(0.25, 1.0, 400, tb - t0[j]);
        cr_assert(scale >= lo - 1e-9 && scale <= hi + 1e-9, "%s: scale %.6f outside [%.6f, %.6f]",
                  joiner[j], scale, lo, hi);
        cr_assert_lt(scale, 1.0 + 1e-12, "%s in [0, 1]", joiner[j]);
    }
    s = chring_snap_enter(r);
    cr_assert_eq(chring_member_scale(chring_snap_find(s, "a")), 1.0, "members present stay at 1");
    chring_snap_exit(r, s);
    /* The ramps end at 1. */
    double deadline = now_ms() + 10000;
    double t_end = t1[2] + 400;
    while (now_ms() < t_end + 5 && now_ms() < deadline)
        sleep_ms(5);
    s = chring_snap_enter(r);
    for (int j = 0; j < 3; j++)
        cr_assert_eq(chring_member_scale(chring_snap_find(s, joiner[j])), 1.0, "%s warmed up",
                     joiner[j]);
    chring_snap_exit(r, s);
    /* Emptied and populated again: a first population again. */
    cr_assert_eq(chring_sync(r, NULL, 0), 0, "empty the ring");
    add_or_fail(r, "g", 1, NULL);
    s = chring_snap_enter(r);
    cr_assert_eq(chring_member_scale(chring_snap_find(s, "g")), 1.0, "g populates an empty ring");
    chring_snap_exit(r, s);
    double h0 = now_ms();
    add_or_fail(r, "h", 1, NULL);
    double h1 = now_ms();
    s = chring_snap_enter(r);
    double ta = now_ms();
    double scale = chring_member_scale(chring_snap_find(s, "h"));
    double tb = now_ms();
    chring_snap_exit(r, s);
    double lo = linear(0.25, 1.0, 400, ta - h1), hi = linear(0.25, 1.0, 400, tb - h0);
    cr_assert(scale >= lo - 1e-9 && scale <= hi + 1e-9, "h joins g: it ramps (%.6f, [%.6f, %.6f])",
              scale, lo, hi);
    chring_free(&r);

    /* Without slow start nothing ramps. */
    chring_config_default(&cfg);
    r = ring_create(&cfg);
    add_or_fail(r, "a", 1, NULL);
    add_or_fail(r, "b", 1, NULL);
    s = chring_snap_enter(r);
    cr_assert_eq(chring_member_scale(chring_snap_find(s, "b")), 1.0, "no slow start configured");
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* Background leases on every member but one, n per unit of weight, so that the others' loads
 * stay below their capacities (c * (m + 1) * w / W > n * w) while m is far above 0. */
static int hold_background(chring_t *r, int except, int n, chring_lease_t *leases)
{
    int count = 0;
    const chring_snap_t *s = chring_snap_enter(r);
    for (int i = 0; i < NMEMBERS; i++) {
        if (i == except)
            continue;
        for (int j = 0; j < n * (int)weights[i]; j++) {
            int rc = chring_acquire_member(r, s, find_member(s, i), &leases[count++]);
            cr_assert_eq(rc, 0, "background lease: %d", rc);
        }
    }
    chring_snap_exit(r, s);
    return count;
}

Test(health, a_joining_members_refused_keys_land_on_their_previous_owner, .timeout = 300)
{
    struct keys *k = keys_make();
    chring_lease_t *background = calloc(20 * 12, sizeof *background);
    cr_assert_not_null(background, "out of memory in the test");
    const int joiner = 5;
    for (size_t c = 0; c < NCASES; c++) {
        const struct profile_case *pc = &cases[c];
        chring_config_t cfg;
        case_config(pc, &cfg);
        cfg.slow_start_ms = 100000000; /* about 28 hours: the scale stays below 1e-3 here */
        cfg.slow_start_from = 0.0;
        chring_t *r = case_ring_cfg(&cfg, joiner);
        char **before = owners_copy(r, NKEYS);
        char name[32];
        member_name(name, sizeof name, joiner);
        add_or_fail(r, name, weights[joiner], NULL);
        int nbg = hold_background(r, joiner, 20, background);
        const chring_snap_t *s = chring_snap_enter(r);
        const chring_member_t *j = find_member(s, joiner);
        struct ref_ring rr;
        ref_load(&rr, s);
        struct set as_down = {{j}, 1};
        /* The previous owner is the next member clockwise, except for ketama (every point moved
         * with the join) and for nginx if the joiner took a position from another member. */
        bool previous = pc->profile != CHRING_PROFILE_KETAMA &&
                        (pc->profile != CHRING_PROFILE_NGINX || no_point_dropped(s));
        /* One lease on the joiner; its plain capacity is far above 1, its scaled one is 1. */
        chring_lease_t one;
        cr_assert_eq(chring_acquire_member(r, s, j, &one), 0, "a lease on the joiner");
        uint64_t plain =
            chring_capacity_weighted(chring_leases(r), weights[joiner], 12, CHRING_DEFAULT_BALANCE);
        cr_assert_gt(plain, 10u, "%s: without slow start the joiner would admit", pc->label);
        cr_assert_leq(chring_member_capacity(r, s, j), 1u, "%s: the joiner's scaled capacity",
                      pc->label);
        size_t refused = 0;
        for (int i = 0; i < NKEYS; i++) {
            const chring_member_t *owner = chring_snap_lookup(s, k->text[i], k->len[i]);
            chring_lease_t lease;
            cr_assert_eq(chring_acquire(r, k->text[i], k->len[i], &lease), 0, "acquire");
            if (owner == j) {
                refused++;
                if (!previous) {
                    uint64_t h = chring_snap_hash(s, k->text[i], k->len[i]);
                    cr_assert_eq(lease.member, ref_owner(&rr, h, &as_down),
                                 "%s: %s refused to the next member", pc->label, k->text[i]);
                } else {
                    cr_assert_str_eq(chring_member_name(lease.member), before[i],
                                     "%s: %s refused by the joiner lands on its previous owner",
                                     pc->label, k->text[i]);
                }
            } else {
                cr_assert_eq(lease.member, owner, "%s: %s stays on its owner", pc->label,
                             k->text[i]);
            }
            chring_release(r, &lease);
        }
        cr_assert_gt(refused, 0u, "%s: the joiner owns keys", pc->label);
        chring_release(r, &one);
        ref_free(&rr);
        chring_snap_exit(r, s);
        release_all(r, background, nbg);
        owners_free(before, NKEYS);
        chring_free(&r);
    }
    free(background);
    free(k);
}
