/* proto_compact: a prototype of a compact point layout for the 32-bit profiles (ketama, nginx,
 * murmur32, fnv32, haproxy) (issue 35, item 6; docs/design.md, "Appendix: a publish that
 * follows the change", last part).
 *
 * SPDX-License-Identifier: MIT
 *
 * A standalone program, not the library.  A ring of N members x V points at random 32-bit
 * positions (owner slots 0 .. N-1, ties ordered by slot) is laid out in each of these shapes,
 * and every shape is checked against a binary search of the sorted points before timing:
 *
 *   wide + buckets:    positions as the library stores them (a uint64_t each, the 32-bit value
 *                      shifted to the top), owner slots uint32_t, the prefix-bucket index (a
 *                      uint32_t per bucket, 2^k buckets, 1.25 to 2.5 a point): today's layout
 *                      below 65,536 points and for the haproxy profile;
 *   split + buckets:   uint32_t positions and uint16_t slots in two arrays, the same index;
 *   packed6 + buckets: one 6-byte record per point (position, slot), the same index;
 *   split, search:     4 + 2 bytes and a binary search, no index (6 bytes a point in all);
 *   packed6, search:   Pingora's ketama shape (6-byte records, binary search);
 *   wide + lines:      the library's line index (one 64-byte line per about 8 points, 16-bit
 *                      offsets and slots) over 8 + 4 points: today's layout from 65,536 points;
 *   split + lines:     the same lines over 4 + 2 points.
 *
 * For each: bytes a point, build time (sort of the hashed positions and the index; hashing the
 * labels, the same for all, left out), lookup ns in throughput (independent pre-hashed keys) and
 * latency (each key depends on the previous answer), thread CPU time, medians of interleaved
 * reps.
 *
 * Usage: proto_compact [--members N[,N...]] [--vnodes V] [--reps R] [--lookups M]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* -DPROTO_PLANT=1 plants a bug the check must catch (docs/bench.md, "Prototypes"): the packed
 * shape's bucket search forgets a crowded bucket's binary search. */
#ifndef PROTO_PLANT
#define PROTO_PLANT 0
#endif

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

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "proto_compact: out of memory\n");
        exit(2);
    }
    return p;
}

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "proto_compact: CHECK FAILED: %s\n", what);
        exit(1);
    }
}

/* A point as generated: (position, slot) in one word, slot low, so that sorting the words
 * orders by position then slot. */
static inline uint64_t key_of(uint32_t pos, uint32_t slot)
{
    return (uint64_t)pos << 32 | slot;
}

/* LSD radix sort of words by the slot's 16 bits then the position's 32 (bits 16-31 are 0):
 * three passes of 16 bits. */
static void radix(uint64_t *a, size_t n)
{
    static const unsigned shifts[] = {0, 32, 48};
    uint64_t *tmp = xmalloc(n * sizeof *tmp);
    size_t *count = xmalloc(65536 * sizeof *count);
    unsigned passes = 0;
    for (unsigned p = 0; p < 3; p++, passes++) {
        unsigned shift = shifts[p];
        memset(count, 0, 65536 * sizeof *count);
        for (size_t i = 0; i < n; i++)
            count[(a[i] >> shift) & 0xffff]++;
        size_t sum = 0;
        for (size_t d = 0; d < 65536; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            tmp[count[(a[i] >> shift) & 0xffff]++] = a[i];
        uint64_t *t = a;
        a = tmp;
        tmp = t;
    }
    if (passes % 2) { /* the data is in tmp's buffer, which is the caller's a: copy back */
        memcpy(tmp, a, n * sizeof *a);
        free(a);
    } else {
        free(tmp);
    }
    free(count);
}

/* ---- the shapes --------------------------------------------------------------------------- */

struct __attribute__((packed)) rec6 {
    uint32_t pos;
    uint16_t slot;
};
_Static_assert(sizeof(struct rec6) == 6, "6 bytes a point");

#define LINE_ENTRIES 15
#define LINE_POINTS 14
#define LINE_LOAD 8
#define LINE_FULL UINT32_C(0x80000000)
#define LINE_PAD UINT16_C(0xffff)
struct line {
    uint32_t first;
    uint16_t off[LINE_ENTRIES];
    uint16_t slot[LINE_ENTRIES];
};
_Static_assert(sizeof(struct line) == 64, "one cache line");

struct ring {
    size_t n;
    unsigned kbits; /* 2^kbits buckets */
    uint32_t *index;
    uint64_t *wpos; /* wide: pos << 32, + 3 sentinels */
    uint32_t *wown;
    uint32_t *spos; /* split: + 3 sentinels */
    uint16_t *sown;
    struct rec6 *p6; /* packed, + 3 sentinels */
    size_t nlines;
    struct line *lines; /* nlines + 1 */
};

static inline size_t bsearch32(const uint32_t *pos, size_t lo, size_t hi, uint32_t h)
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

static inline size_t bsearch64(const uint64_t *pos, size_t lo, size_t hi, uint64_t h)
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

static inline size_t bsearch6(const struct rec6 *p, size_t lo, size_t hi, uint32_t h)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p[mid].pos < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The bucket-index search of the library (find.h): the bucket's first three points compared at
 * once, a binary search up to the next bucket for a crowded one. */
static inline uint32_t wide_bucket(const struct ring *r, uint32_t h)
{
    size_t b = h >> (32 - r->kbits);
    size_t i = r->index[b];
    uint64_t h64 = (uint64_t)h << 32;
    const uint64_t *pos = r->wpos;
    size_t below = (size_t)(pos[i] < h64) + (size_t)(pos[i + 1] < h64);
    if (__builtin_expect(pos[i + 2] < h64, 0))
        i = bsearch64(pos, i + 3, r->index[b + 1], h64);
    else
        i += below;
    return r->wown[i == r->n ? 0 : i];
}

static inline uint32_t split_bucket(const struct ring *r, uint32_t h)
{
    size_t b = h >> (32 - r->kbits);
    size_t i = r->index[b];
    const uint32_t *pos = r->spos;
    size_t below = (size_t)(pos[i] < h) + (size_t)(pos[i + 1] < h);
    if (__builtin_expect(pos[i + 2] < h, 0))
        i = bsearch32(pos, i + 3, r->index[b + 1], h);
    else
        i += below;
    return r->sown[i == r->n ? 0 : i];
}

static inline uint32_t packed_bucket(const struct ring *r, uint32_t h)
{
    size_t b = h >> (32 - r->kbits);
    size_t i = r->index[b];
    const struct rec6 *p = r->p6;
    size_t below = (size_t)(p[i].pos < h) + (size_t)(p[i + 1].pos < h);
    if (__builtin_expect(p[i + 2].pos < h, 0) && !PROTO_PLANT)
        i = bsearch6(p, i + 3, r->index[b + 1], h);
    else
        i += below;
    return p[i == r->n ? 0 : i].slot;
}

static inline uint32_t split_search(const struct ring *r, uint32_t h)
{
    size_t i = bsearch32(r->spos, 0, r->n, h);
    return r->sown[i == r->n ? 0 : i];
}

static inline uint32_t packed_search(const struct ring *r, uint32_t h)
{
    size_t i = bsearch6(r->p6, 0, r->n, h);
    return r->p6[i == r->n ? 0 : i].slot;
}

static inline unsigned line_below(const struct line *l, uint16_t k)
{
#if defined(__SSE2__)
    const __m128i key = _mm_set1_epi16((short)k), zero = _mm_setzero_si128();
    __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)&l->off[0]);
    __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)&l->off[8]);
    unsigned ge = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_subs_epu16(key, lo), zero)) |
                  (((unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_subs_epu16(key, hi), zero)) &
                    0x3fffu) << 16) |
                  (1u << 30);
    return (unsigned)__builtin_ctz(ge) / 2;
#else
    unsigned e = 0;
    while (l->off[e] < k)
        e++;
    return e;
#endif
}

/* The owner by the line alone; ties and full lines search the points (wide or split). */
static inline uint32_t line_lookup(const struct ring *r, uint32_t h, bool split)
{
    uint64_t at = (uint64_t)h * r->nlines;
    const struct line *l = &r->lines[at >> 32];
    uint16_t k = (uint16_t)((uint32_t)at >> 16);
    unsigned below = line_below(l, k);
    if (__builtin_expect((l->first & LINE_FULL) != 0 || l->off[below] == k, 0)) {
        size_t lo = l->first & ~LINE_FULL, hi = l[1].first & ~LINE_FULL, i;
        if (split) {
            i = bsearch32(r->spos, lo, hi, h);
            return r->sown[i == r->n ? 0 : i];
        }
        i = bsearch64(r->wpos, lo, hi, (uint64_t)h << 32);
        return r->wown[i == r->n ? 0 : i];
    }
    return l->slot[below];
}

enum shape { WIDE_B, SPLIT_B, PACKED_B, SPLIT_S, PACKED_S, WIDE_L, SPLIT_L, NSHAPES };
static const char *const shape_name[NSHAPES] = {
    "wide 8+4 + buckets (today < 65,536 points, haproxy)",
    "split 4+2 + buckets",
    "packed 6 + buckets",
    "split 4+2, binary search",
    "packed 6, binary search (Pingora's shape)",
    "wide 8+4 + lines (today >= 65,536 points)",
    "split 4+2 + lines",
};

static inline uint32_t lookup(const struct ring *r, enum shape s, uint32_t h)
{
    switch (s) {
    case WIDE_B: return wide_bucket(r, h);
    case SPLIT_B: return split_bucket(r, h);
    case PACKED_B: return packed_bucket(r, h);
    case SPLIT_S: return split_search(r, h);
    case PACKED_S: return packed_search(r, h);
    case WIDE_L: return line_lookup(r, h, false);
    default: return line_lookup(r, h, true);
    }
}

static double run(const struct ring *r, enum shape s, size_t m, bool latency, uint64_t seed,
                  uint64_t *sink)
{
    uint64_t st = seed, acc = 0, h = seed;
    uint64_t t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    for (size_t q = 0; q < m; q++) {
        uint32_t key = latency ? (uint32_t)(h = mix64(h + acc)) : (uint32_t)mix64(st += 0x9e3779b97f4a7c15ull);
        uint32_t o = lookup(r, s, key);
        acc = latency ? o : acc + o;
    }
    *sink += acc;
    return (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / (double)m;
}

/* Builds the index over sorted words (pos << 32 | slot) for one shape's positions. */
static void build_index(struct ring *r, const uint32_t *pos32)
{
    size_t nb = (size_t)1 << r->kbits;
    memset(r->index, 0, (nb + 1) * sizeof *r->index);
    for (size_t i = 0; i < r->n; i++)
        r->index[(pos32[i] >> (32 - r->kbits)) + 1]++;
    for (size_t b = 0; b < nb; b++)
        r->index[b + 1] += r->index[b];
}

static void build_lines(struct ring *r, const uint32_t *pos32, const uint32_t *own)
{
    size_t i = 0, n = r->n;
    for (size_t b = 0; b < r->nlines; b++) {
        struct line *l = &r->lines[b];
        size_t end = i;
        while (end < n && (((uint64_t)pos32[end] * r->nlines) >> 32) == b)
            end++;
        size_t count = end - i, listed = count <= LINE_POINTS ? count : 0;
        l->first = (uint32_t)i | (count > LINE_POINTS ? LINE_FULL : 0);
        for (size_t e = 0; e < listed; e++) {
            l->off[e] = (uint16_t)((uint32_t)((uint64_t)pos32[i + e] * r->nlines) >> 16);
            l->slot[e] = (uint16_t)own[i + e];
        }
        uint16_t next = (uint16_t)own[end == n ? 0 : end];
        for (size_t e = listed; e < LINE_ENTRIES; e++) {
            l->off[e] = LINE_PAD;
            l->slot[e] = next;
        }
        i = end;
    }
    memset(&r->lines[r->nlines], 0xff, sizeof(struct line));
    r->lines[r->nlines].first = (uint32_t)n;
}

static void size_run(uint32_t nmembers, uint32_t vnodes, int reps, size_t lookups)
{
    const size_t n = (size_t)nmembers * vnodes;
    check(nmembers <= 65535, "16-bit slots: at most 65,535 members");
    struct ring r = {.n = n};
    unsigned k = 0;
    while (((size_t)2 << k) <= 5 * n / 2)
        k++;
    r.kbits = k;
    r.nlines = n / LINE_LOAD;
    /* hashed positions, as a build has them before its sort */
    uint64_t *gen = xmalloc(n * sizeof *gen);
    for (uint32_t m = 0, q = 0; m < nmembers; m++)
        for (uint32_t i = 0; i < vnodes; i++)
            gen[q++] = key_of((uint32_t)mix64((uint64_t)m << 20 | i), m);
    uint64_t *w = xmalloc(n * sizeof *w);
    double build_ms[NSHAPES];
    memset(build_ms, 0, sizeof build_ms);
    r.index = xmalloc((((size_t)1 << k) + 1) * sizeof *r.index);
    r.wpos = xmalloc((n + 3) * sizeof *r.wpos);
    r.wown = xmalloc(n * sizeof *r.wown);
    r.spos = xmalloc((n + 3) * sizeof *r.spos);
    r.sown = xmalloc(n * sizeof *r.sown);
    r.p6 = xmalloc((n + 3) * sizeof *r.p6);
    r.lines = aligned_alloc(64, (r.nlines + 1) * sizeof *r.lines);
    check(r.lines != NULL, "lines");
    uint32_t *tmp32 = xmalloc(n * sizeof *tmp32), *own32 = xmalloc(n * sizeof *own32);
    /* the builds, 5 times each (medians): the sort, then the shape filled and indexed */
    double bt[NSHAPES][5];
    for (int rep = 0; rep < 5; rep++) {
        for (int s = 0; s < NSHAPES; s++) {
            memcpy(w, gen, n * sizeof *w);
            uint64_t t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
            /* the same sort for every shape (position, then slot: one order), so that the
             * build times differ by what each shape writes */
            radix(w, n);
            switch (s) {
            case WIDE_B:
            case WIDE_L:
                for (size_t i = 0; i < n; i++) {
                    r.wpos[i] = w[i] & UINT64_C(0xffffffff00000000);
                    r.wown[i] = (uint32_t)w[i];
                    tmp32[i] = (uint32_t)(w[i] >> 32);
                }
                for (int e = 0; e < 3; e++)
                    r.wpos[n + e] = UINT64_MAX;
                if (s == WIDE_B)
                    build_index(&r, tmp32);
                else
                    build_lines(&r, tmp32, r.wown);
                break;
            case SPLIT_B:
            case SPLIT_S:
            case SPLIT_L:
                for (size_t i = 0; i < n; i++) {
                    r.spos[i] = (uint32_t)(w[i] >> 32);
                    r.sown[i] = (uint16_t)w[i];
                }
                for (int e = 0; e < 3; e++)
                    r.spos[n + e] = UINT32_MAX;
                if (s == SPLIT_B)
                    build_index(&r, r.spos);
                else if (s == SPLIT_L) {
                    for (size_t i = 0; i < n; i++)
                        own32[i] = r.sown[i];
                    build_lines(&r, r.spos, own32);
                }
                break;
            default:
                for (size_t i = 0; i < n; i++)
                    r.p6[i] = (struct rec6){(uint32_t)(w[i] >> 32), (uint16_t)w[i]};
                for (int e = 0; e < 3; e++)
                    r.p6[n + e] = (struct rec6){UINT32_MAX, 0};
                if (s == PACKED_B) {
                    for (size_t i = 0; i < n; i++)
                        tmp32[i] = r.p6[i].pos;
                    build_index(&r, tmp32);
                }
                break;
            }
            bt[s][rep] = (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / 1e6;
        }
    }
    for (int s = 0; s < NSHAPES; s++)
        build_ms[s] = bench_median(bt[s], 5);
    /* after the last rep every array holds the ring; the index and the lines are the last
     * built (packed's, split's), equal to the others' (the same sorted points) */
    free(gen);
    free(w);
    free(tmp32);
    free(own32);
    /* the check: every shape against a binary search of the split positions */
    for (size_t q = 0; q < 400000; q++) {
        uint32_t h = (uint32_t)mix64(q * 0x9e3779b97f4a7c15ull + 5);
        if (q < 32)
            h = q < 8 ? UINT32_MAX - (uint32_t)q : q < 16 ? (uint32_t)q - 8 : r.spos[(q * 7919) % n];
        size_t i = bsearch32(r.spos, 0, n, h);
        uint32_t want = r.sown[i == n ? 0 : i];
        for (int s = 0; s < NSHAPES; s++)
            check(lookup(&r, (enum shape)s, h) == want, shape_name[s]);
    }
    /* the index now holds packed's buckets, which equal split's and wide's (same positions) */
    size_t nb = (size_t)1 << k;
    double idx = (double)(nb + 1) * 4 / (double)n, lines = (double)(r.nlines + 1) * 64 / (double)n;
    double bytes[NSHAPES] = {12 + idx, 6 + idx, 6 + idx, 6, 6, 12 + lines, 6 + lines};

    double res[NSHAPES][2][15];
    uint64_t sink = 0;
    int rp = reps > 15 ? 15 : reps;
    for (int rep = 0; rep < rp; rep++)
        for (int lat = 0; lat < 2; lat++)
            for (int s = 0; s < NSHAPES; s++)
                res[s][lat][rep] = run(&r, (enum shape)s, lookups, lat, 11 + (uint64_t)rep, &sink);
    printf("\n## %u x %u: %zu points (32-bit positions, ties by slot), %zu buckets, %zu lines; load average %.2f\n\n",
           nmembers, vnodes, n, nb, r.nlines, bench_loadavg());
    printf("| shape | bytes a point | build ms (sort + index; median of 5) | lookup ns, throughput | lookup ns, latency | throughput / wide + buckets | latency / wide + buckets |\n|---|---|---|---|---|---|---|\n");
    double base[2] = {0, 0};
    for (int s = 0; s < NSHAPES; s++) {
        double tp = bench_median(res[s][0], (size_t)rp), lt = bench_median(res[s][1], (size_t)rp);
        if (s == 0) {
            base[0] = tp;
            base[1] = lt;
        }
        printf("| %s | %.2f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", shape_name[s], bytes[s],
               build_ms[s], tp, lt, tp / base[0], lt / base[1]);
    }
    printf("\n# checked: 400000 keys (round the wrap and at points' own positions included), every shape's owner equals a binary search's; load average %.2f\n",
           bench_loadavg());
    if (sink == 42)
        printf("#\n");
    free(r.index);
    free(r.wpos);
    free(r.wown);
    free(r.spos);
    free(r.sown);
    free(r.p6);
    free(r.lines);
}

int main(int argc, char **argv)
{
    unsigned members[8] = {1000, 10000};
    size_t nm = 2, lookups = 2000000;
    unsigned vnodes = 160;
    int reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--members") && i + 1 < argc) {
            nm = 0;
            for (char *s = argv[++i]; *s && nm < 8;) {
                char *end;
                members[nm++] = (unsigned)strtoul(s, &end, 10);
                s = *end == ',' ? end + 1 : end;
                if (end == s && *s)
                    break;
            }
        } else if (!strcmp(argv[i], "--vnodes") && i + 1 < argc)
            vnodes = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lookups") && i + 1 < argc)
            lookups = (size_t)atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--members N[,N...]] [--vnodes V] [--reps R] [--lookups M]\n",
                    argv[0]);
            return 2;
        }
    }
    if (nm == 0 || vnodes == 0 || reps < 1 || lookups == 0) {
        fprintf(stderr, "proto_compact: bad arguments\n");
        return 2;
    }
    printf("# proto_compact: compact point layouts for the 32-bit profiles (docs/design.md, appendix)\n");
    printf("# 2 shared vCPUs: ratios come from one interleaved run; load average %.2f at the start\n",
           bench_loadavg());
    for (size_t k = 0; k < nm; k++)
        size_run(members[k], vnodes, reps, lookups);
    return 0;
}
