/* Agreement and change, observable (docs/design.md §3): chring_snap_digest is a function of the
 * placement alone, the same across build orders and processes; chring_snap_diff reports exactly
 * the arcs whose owner changed (checked against a brute-force comparison of owners) and their
 * lengths sum to chring_snap_moved.
 * SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chring.h"
#include "chring_test.h"

#ifndef DIGEST_PRINT
#error "DIGEST_PRINT: the path of tests/digest_print"
#endif

static const chring_profile_t profiles[] = {
    CHRING_PROFILE_HASH64, CHRING_PROFILE_MURMUR32, CHRING_PROFILE_FNV32, CHRING_PROFILE_FNV16,
    CHRING_PROFILE_XXH3,   CHRING_PROFILE_KETAMA,   CHRING_PROFILE_NGINX, CHRING_PROFILE_HAPROXY,
    CHRING_PROFILE_ENVOY,  CHRING_PROFILE_VARNISH};
#define NPROFILES (sizeof profiles / sizeof profiles[0])

static chring_t *new_ring(chring_profile_t profile, uint32_t vnodes)
{
    chring_config_t cfg;
    chring_config_default(&cfg);
    cfg.profile = profile;
    if (vnodes != 0)
        cfg.vnodes = vnodes;
    return ring_create(&cfg);
}

static void member_name(char *buf, size_t cap, chring_profile_t profile, int i)
{
    if (profile == CHRING_PROFILE_HAPROXY)
        snprintf(buf, cap, "%d", i + 1);
    else
        snprintf(buf, cap, "10.1.%d.%d:80", i / 7, i % 7);
}

static uint64_t digest_of(chring_t *r)
{
    const chring_snap_t *s = chring_snap_enter(r);
    uint64_t d = chring_snap_digest(s);
    chring_snap_exit(r, s);
    return d;
}

/* The same membership built three ways: added in order, added in reverse, one chring_sync. */
Test(digest, equal_across_build_orders_in_every_profile)
{
    for (size_t p = 0; p < NPROFILES; p++) {
        chring_t *fwd = new_ring(profiles[p], 0), *rev = new_ring(profiles[p], 0),
                 *one = new_ring(profiles[p], 0);
        char names[8][32];
        chring_change_t ch[8];
        for (int i = 0; i < 8; i++) {
            member_name(names[i], sizeof names[i], profiles[p], i);
            ch[i] = (chring_change_t){names[i], (uint32_t)(1 + i % 3), NULL};
            add_or_fail(fwd, names[i], ch[i].weight, NULL);
        }
        for (int i = 7; i >= 0; i--)
            add_or_fail(rev, names[i], ch[i].weight, NULL);
        cr_assert_eq(chring_sync(one, ch, 8), 0);
        uint64_t d = digest_of(fwd);
        const char *pn = chring_profile_name(profiles[p]);
        if (profiles[p] != CHRING_PROFILE_FNV16) /* fnv16's points depend on join order */
            cr_assert_eq(digest_of(rev), d, "%s: reverse order", pn);
        cr_assert_eq(digest_of(one), d, "%s: one sync", pn);
        cr_assert_neq(d, 0u);
        chring_free(&fwd);
        chring_free(&rev);
        chring_free(&one);
    }
}

static uint64_t run_digest_print(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s", DIGEST_PRINT, args);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f, "popen %s", cmd);
    char line[64] = "";
    cr_assert_not_null(fgets(line, sizeof line, f), "output of %s", cmd);
    cr_assert_eq(pclose(f), 0, "%s exited with 0", cmd);
    return strtoull(line, NULL, 16);
}

/* Other processes (other address layouts: member pointers differ) agree with this one. */
Test(digest, equal_across_processes)
{
    static const char *const profile_args[] = {"hash64", "nginx", "ketama", "haproxy", "xxh3"};
    for (size_t p = 0; p < sizeof profile_args / sizeof profile_args[0]; p++) {
        chring_profile_t profile;
        cr_assert_eq(chring_profile_parse(profile_args[p], &profile), 0);
        bool ids = profile == CHRING_PROFILE_HAPROXY;
        const char *fwd = ids ? "1:1 2:2 3:1 4:3" : "a:80:1 b:80:2 c:80:1 d:80:3";
        const char *rev = ids ? "4:3 3:1 2:2 1:1" : "d:80:3 c:80:1 b:80:2 a:80:1";
        char args[256];
        snprintf(args, sizeof args, "%s %s", profile_args[p], fwd);
        uint64_t other = run_digest_print(args);
        snprintf(args, sizeof args, "%s %s", profile_args[p], rev);
        uint64_t other_rev = run_digest_print(args);

        chring_t *r = new_ring(profile, 0);
        static const char *const host[] = {"a:80", "b:80", "c:80", "d:80"};
        static const char *const id[] = {"1", "2", "3", "4"};
        static const uint32_t w[] = {1, 2, 1, 3};
        for (int i = 0; i < 4; i++)
            add_or_fail(r, ids ? id[i] : host[i], w[i], NULL);
        uint64_t here = digest_of(r);
        cr_assert_eq(other, here, "%s: another process: %016" PRIx64 ", here %016" PRIx64,
                     profile_args[p], other, here);
        cr_assert_eq(other_rev, here, "%s: another process, reverse order", profile_args[p]);
        chring_free(&r);
    }
}

/* Every placement change changes it; health, ramps, loads and a no-op do not. */
Test(digest, changes_with_placement_only)
{
    for (size_t p = 0; p < NPROFILES; p++) {
        const char *pn = chring_profile_name(profiles[p]);
        chring_t *r = new_ring(profiles[p], 0);
        char names[6][32];
        for (int i = 0; i < 6; i++) {
            member_name(names[i], sizeof names[i], profiles[p], i);
            add_or_fail(r, names[i], 1, NULL);
        }
        uint64_t d = digest_of(r);
        cr_assert_eq(chring_set_down(r, names[2], 1), 0);
        cr_assert_eq(chring_set_ramp(r, names[3], 0.2, 0.2, 0), 0);
        chring_lease_t lease[20];
        for (int i = 0; i < 20; i++)
            cr_assert_eq(chring_acquire(r, &i, sizeof i, &lease[i]), 0);
        add_or_fail(r, names[1], 1, NULL); /* no change */
        cr_assert_eq(digest_of(r), d, "%s: health, ramps, loads and no-ops leave it", pn);
        for (int i = 0; i < 20; i++)
            chring_release(r, &lease[i]);
        cr_assert_eq(chring_set_down(r, names[2], 0), 0);

        uint64_t seen[4] = {d};
        cr_assert_eq(chring_set_weight(r, names[0], 2), 0);
        seen[1] = digest_of(r);
        cr_assert_eq(chring_remove(r, names[5]), 0);
        seen[2] = digest_of(r);
        char extra[32];
        member_name(extra, sizeof extra, profiles[p], 40);
        add_or_fail(r, extra, 1, NULL);
        seen[3] = digest_of(r);
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < a; b++)
                cr_assert_neq(seen[a], seen[b], "%s: changes %d and %d give one digest", pn, a, b);
        /* Back to the first membership: the first digest. */
        cr_assert_eq(chring_remove(r, extra), 0);
        add_or_fail(r, names[5], 1, NULL);
        cr_assert_eq(chring_set_weight(r, names[0], 1), 0);
        if (profiles[p] != CHRING_PROFILE_FNV16)
            cr_assert_eq(digest_of(r), d, "%s: the same placement again", pn);
        chring_free(&r);
    }
}

Test(digest, profile_and_parameters_enter_it)
{
    chring_t *a = new_ring(CHRING_PROFILE_HASH64, 160), *b = new_ring(CHRING_PROFILE_HASH64, 100),
             *c = new_ring(CHRING_PROFILE_XXH3, 160), *e = new_ring(CHRING_PROFILE_HASH64, 0);
    cr_assert_neq(digest_of(a), digest_of(c), "empty rings of two profiles differ");
    cr_assert_eq(digest_of(a), digest_of(e), "empty rings of one profile agree");
    add_or_fail(a, "x", 1, NULL);
    add_or_fail(b, "x", 1, NULL);
    cr_assert_neq(digest_of(a), digest_of(b), "vnodes");
    cr_assert_eq(chring_snap_digest(NULL), 0u);
    chring_free(&a);
    chring_free(&b);
    chring_free(&c);
    chring_free(&e);
}

/* ---- diff ------------------------------------------------------------------------------- */

struct arc {
    uint64_t from, to;
    const chring_member_t *was, *now;
};

struct arcs {
    struct arc *v;
    size_t n, cap;
};

static int collect(uint64_t from, uint64_t to, const chring_member_t *was,
                   const chring_member_t *now, void *ctx)
{
    struct arcs *a = ctx;
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 64;
        a->v = realloc(a->v, a->cap * sizeof *a->v);
        cr_assert_not_null(a->v);
    }
    a->v[a->n++] = (struct arc){from, to, was, now};
    return 0;
}

static const char *name_or_empty(const chring_member_t *m)
{
    return m ? chring_member_name(m) : "";
}

static bool same(const chring_member_t *a, const chring_member_t *b)
{
    return strcmp(name_or_empty(a), name_or_empty(b)) == 0;
}

/* The diff's arcs against the owners of every position of a 16-bit ring, and their sum against
 * chring_snap_moved. */
static void brute_force_16(const char *label, const chring_snap_t *a, const chring_snap_t *b)
{
    struct arcs got = {0};
    cr_assert_eq(chring_snap_diff(a, b, collect, &got), 0);
    /* The arcs brute force finds: maximal runs of positions with one (was, now) pair, was != now. */
    struct arcs want = {0};
    for (uint64_t h = 0; h < 65536; h++) {
        const chring_member_t *was = chring_snap_lookup_hash(a, h), *now = chring_snap_lookup_hash(b, h);
        if (same(was, now))
            continue;
        struct arc *last = want.n ? &want.v[want.n - 1] : NULL;
        if (last && last->to + 1 == h && same(last->was, was) && same(last->now, now))
            last->to = h;
        else
            collect(h, h, was, now, &want);
    }
    cr_assert_eq(got.n, want.n, "%s: %zu arcs, brute force %zu", label, got.n, want.n);
    uint64_t total = 0;
    for (size_t k = 0; k < want.n; k++) {
        cr_assert_eq(got.v[k].from, want.v[k].from, "%s: arc %zu from", label, k);
        cr_assert_eq(got.v[k].to, want.v[k].to, "%s: arc %zu to", label, k);
        cr_assert(same(got.v[k].was, want.v[k].was) && same(got.v[k].now, want.v[k].now),
                  "%s: arc %zu owners", label, k);
        total += want.v[k].to - want.v[k].from + 1;
    }
    cr_assert_float_eq(chring_snap_moved(a, b), (double)total / 65536.0, 1e-15,
                       "%s: moved is the arcs' sum", label);
    free(got.v);
    free(want.v);
}

static uint64_t hash16(const void *data, size_t len, void *ctx)
{
    (void)ctx;
    return chring_hash64(data, len) & 0xffff;
}

Test(diff, arcs_match_a_brute_force_comparison_of_owners_on_16_bit_rings)
{
    for (int kind = 0; kind < 2; kind++) {
        chring_config_t cfg;
        chring_config_default(&cfg);
        if (kind == 0) {
            cfg.profile = CHRING_PROFILE_FNV16;
            cfg.vnodes = 8;
        } else {
            cfg.profile = CHRING_PROFILE_CUSTOM;
            cfg.hash = hash16;
            cfg.hash_bits = 16;
            cfg.vnodes = 20;
        }
        chring_t *r = ring_create(&cfg);
        char name[16];
        for (int i = 0; i < 6; i++) {
            snprintf(name, sizeof name, "m%d", i);
            add_or_fail(r, name, 1, NULL);
        }
        const chring_snap_t *before = chring_snap_hold(r);
        cr_assert_eq(chring_snap_diff(before, before, collect, &(struct arcs){0}), 0);
        brute_force_16("itself", before, before);
        /* A join, a removal, a weight change, and all three at once. */
        add_or_fail(r, "new", 2, NULL);
        const chring_snap_t *joined = chring_snap_hold(r);
        brute_force_16("join", before, joined);
        brute_force_16("join, backwards", joined, before);
        cr_assert_eq(chring_remove(r, "m2"), 0);
        cr_assert_eq(chring_set_weight(r, "m4", 3), 0);
        const chring_snap_t *after = chring_snap_hold(r);
        brute_force_16("remove and reweight", joined, after);
        brute_force_16("all", before, after);
        /* An empty snapshot against a full one. */
        chring_t *empty = ring_create(&cfg);
        const chring_snap_t *none = chring_snap_hold(empty);
        brute_force_16("to empty", after, none);
        brute_force_16("from empty", none, after);
        chring_snap_put(empty, none);
        chring_free(&empty);
        chring_snap_put(r, before);
        chring_snap_put(r, joined);
        chring_snap_put(r, after);
        chring_free(&r);
    }
}

/* Wider rings: each arc's ends and neighbours, and random positions, against the lookups. */
static void check_sampled(const char *label, const chring_snap_t *a, const chring_snap_t *b,
                          uint64_t max, uint64_t *rng)
{
    struct arcs got = {0};
    cr_assert_eq(chring_snap_diff(a, b, collect, &got), 0);
    long double total = 0;
    for (size_t k = 0; k < got.n; k++) {
        struct arc *x = &got.v[k];
        cr_assert_leq(x->from, x->to, "%s: arc %zu", label, k);
        cr_assert_leq(x->to, max);
        if (k > 0)
            cr_assert_gt(x->from, got.v[k - 1].to, "%s: arcs in ring order", label);
        const uint64_t probe[] = {x->from, x->to, x->from + (x->to - x->from) / 2};
        for (int q = 0; q < 3; q++) {
            cr_assert(same(chring_snap_lookup_hash(a, probe[q]), x->was), "%s: was at %" PRIu64,
                      label, probe[q]);
            cr_assert(same(chring_snap_lookup_hash(b, probe[q]), x->now), "%s: now at %" PRIu64,
                      label, probe[q]);
        }
        cr_assert(!same(x->was, x->now));
        /* Maximal: just outside, the pair differs (or the owners agree). */
        if (x->from > 0 && !(k > 0 && got.v[k - 1].to + 1 == x->from)) {
            uint64_t o = x->from - 1;
            cr_assert(same(chring_snap_lookup_hash(a, o), chring_snap_lookup_hash(b, o)),
                      "%s: %" PRIu64 " before arc %zu has moved too", label, o, k);
        }
        if (x->to < max && !(k + 1 < got.n && got.v[k + 1].from == x->to + 1)) {
            uint64_t o = x->to + 1;
            cr_assert(same(chring_snap_lookup_hash(a, o), chring_snap_lookup_hash(b, o)),
                      "%s: %" PRIu64 " after arc %zu has moved too", label, o, k);
        }
        total += (long double)(x->to - x->from) + 1;
    }
    /* Random positions: moved exactly when inside an arc. */
    for (int t = 0; t < 20000; t++) {
        *rng = *rng * 6364136223846793005u + 1442695040888963407u;
        uint64_t h = (*rng >> 7) & max;
        size_t lo = 0, hi = got.n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (got.v[mid].to < h)
                lo = mid + 1;
            else
                hi = mid;
        }
        bool inside = lo < got.n && got.v[lo].from <= h;
        cr_assert_eq(inside, !same(chring_snap_lookup_hash(a, h), chring_snap_lookup_hash(b, h)),
                     "%s: position %" PRIu64, label, h);
    }
    double moved = chring_snap_moved(a, b);
    double sum = (double)(total / ((long double)max + 1));
    cr_assert_float_eq(moved, sum, 1e-12, "%s: moved %.17g, arcs %.17g", label, moved, sum);
    free(got.v);
}

Test(diff, arcs_match_the_lookups_in_every_profile)
{
    uint64_t rng = 12345;
    for (size_t p = 0; p < NPROFILES; p++) {
        const char *pn = chring_profile_name(profiles[p]);
        chring_t *r = new_ring(profiles[p], 0);
        char names[7][32];
        for (int i = 0; i < 7; i++) {
            member_name(names[i], sizeof names[i], profiles[p], i);
            add_or_fail(r, names[i], 1 + (uint32_t)i % 2, NULL);
        }
        const chring_snap_t *a = chring_snap_hold(r);
        uint64_t max = chring_snap_hash_bits(a) == 64 ? UINT64_MAX
                                                       : (UINT64_C(1) << chring_snap_hash_bits(a)) - 1;
        cr_assert_eq(chring_remove(r, names[3]), 0);
        char extra[32];
        member_name(extra, sizeof extra, profiles[p], 9);
        add_or_fail(r, extra, 2, NULL);
        const chring_snap_t *b = chring_snap_hold(r);
        check_sampled(pn, a, b, max, &rng);
        check_sampled(pn, b, a, max, &rng);
        /* Health does not enter it. */
        cr_assert_eq(chring_set_down(r, names[0], 1), 0);
        check_sampled(pn, a, a, max, &rng);
        struct arcs none = {0};
        cr_assert_eq(chring_snap_diff(a, a, collect, &none), 0);
        cr_assert_eq(none.n, 0u, "%s: a snapshot against itself", pn);
        chring_snap_put(r, a);
        chring_snap_put(r, b);
        chring_free(&r);
    }
}

/* haproxy's nearest point: the share of every member sums to 1 and matches sampled owners. */
Test(diff, haproxy_share_follows_the_nearest_point_rule)
{
    chring_t *r = new_ring(CHRING_PROFILE_HAPROXY, 0);
    add_or_fail(r, "1", 1, NULL);
    add_or_fail(r, "2", 3, NULL);
    add_or_fail(r, "3", 2, NULL);
    const chring_snap_t *s = chring_snap_enter(r);
    double sum = 0;
    uint64_t rng = 99;
    size_t count[3] = {0};
    const int samples = 200000;
    for (int t = 0; t < samples; t++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        const chring_member_t *m = chring_snap_lookup_hash(s, rng >> 32);
        count[chring_member_name(m)[0] - '1']++;
    }
    for (size_t j = 0; j < 3; j++) {
        const chring_member_t *m = chring_snap_member(s, j);
        double share = chring_member_share(s, m);
        sum += share;
        double p = (double)count[chring_member_name(m)[0] - '1'] / samples;
        cr_assert_float_eq(share, p, 5 * sqrt(p * (1 - p) / samples) + 1e-9,
                           "member %s: share %g, sampled %g", chring_member_name(m), share, p);
    }
    cr_assert_float_eq(sum, 1.0, 1e-12);
    chring_snap_exit(r, s);
    chring_free(&r);
}

/* varnish: the arc above the last point belongs to the last point, and a ring of two points
 * gives everything to point 1; shares follow that rule (few points, so the top arc is wide). */
Test(diff, varnish_share_follows_its_top_arc_rule)
{
    for (uint32_t vnodes = 1; vnodes <= 3; vnodes += 2) {
        chring_t *r = new_ring(CHRING_PROFILE_VARNISH, vnodes);
        const char *names[] = {"b1", "b2", "b3"};
        size_t n = vnodes == 1 ? 2 : 3; /* vnodes 1, two members: the two-point ring */
        for (size_t j = 0; j < n; j++)
            add_or_fail(r, names[j], 1, NULL);
        const chring_snap_t *s = chring_snap_enter(r);
        uint64_t rng = 7;
        size_t count[3] = {0};
        const int samples = 200000;
        for (int t = 0; t < samples; t++) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            const chring_member_t *m = chring_snap_lookup_hash(s, rng >> 32);
            count[chring_member_name(m)[1] - '1']++;
        }
        double sum = 0;
        for (size_t j = 0; j < n; j++) {
            const chring_member_t *m = chring_snap_member(s, j);
            double share = chring_member_share(s, m);
            sum += share;
            double p = (double)count[chring_member_name(m)[1] - '1'] / samples;
            cr_assert_float_eq(share, p, 5 * sqrt(p * (1 - p) / samples) + 1e-9,
                               "vnodes %u, member %s: share %g, sampled %g", vnodes,
                               chring_member_name(m), share, p);
        }
        cr_assert_float_eq(sum, 1.0, 1e-12);
        chring_snap_exit(r, s);
        chring_free(&r);
    }
}

static int stop_at_second(uint64_t from, uint64_t to, const chring_member_t *was,
                          const chring_member_t *now, void *ctx)
{
    (void)from, (void)to, (void)was, (void)now;
    return ++*(int *)ctx == 2 ? 77 : 0;
}

Test(diff, a_non_zero_return_stops_the_walk_and_bad_input)
{
    chring_t *r = new_ring(CHRING_PROFILE_HASH64, 0);
    add_or_fail(r, "a", 1, NULL);
    const chring_snap_t *a = chring_snap_hold(r);
    add_or_fail(r, "b", 1, NULL);
    const chring_snap_t *b = chring_snap_hold(r);
    int calls = 0;
    cr_assert_eq(chring_snap_diff(a, b, stop_at_second, &calls), 77);
    cr_assert_eq(calls, 2);
    cr_assert_eq(chring_snap_diff(NULL, b, stop_at_second, &calls), -EINVAL);
    cr_assert_eq(chring_snap_diff(a, NULL, stop_at_second, &calls), -EINVAL);
    cr_assert_eq(chring_snap_diff(a, b, NULL, NULL), -EINVAL);
    chring_t *x = new_ring(CHRING_PROFILE_XXH3, 0);
    const chring_snap_t *xs = chring_snap_hold(x);
    cr_assert_eq(chring_snap_diff(a, xs, stop_at_second, &calls), -EINVAL, "profiles differ");
    chring_snap_put(x, xs);
    chring_free(&x);
    chring_snap_put(r, a);
    chring_snap_put(r, b);
    chring_free(&r);
}
