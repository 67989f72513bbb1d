/* The reference model of chring (see model.h).  Written for clarity, not speed.
 *
 * SPDX-License-Identifier: MIT
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zlib.h>
#include <md5.h>

/* ---- hashes (docs/design.md §2) ------------------------------------------------------------ */

uint64_t model_fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < len; i++) {
        h ^= (uint64_t)p[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

uint32_t model_fnv1a32(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint32_t h = UINT32_C(2166136261);
    for (size_t i = 0; i < len; i++) {
        h ^= (uint32_t)p[i];
        h *= UINT32_C(16777619);
    }
    return h;
}

uint64_t model_mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= UINT64_C(0xbf58476d1ce4e5b9);
    z ^= z >> 27;
    z *= UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return z;
}

static uint32_t rotl32(uint32_t x, unsigned r)
{
    return (x << r) | (x >> (32 - r));
}

static uint32_t murmur_scramble(uint32_t k)
{
    k *= UINT32_C(0xcc9e2d51);
    k = rotl32(k, 15);
    k *= UINT32_C(0x1b873593);
    return k;
}

/* MurmurHash3 x86 32, read byte by byte: a 4-byte little-endian word is assembled as bytes
 * arrive; full words are mixed into h, the tail (1 to 3 bytes) is scrambled once at the end. */
uint32_t model_murmur3_32(const void *data, size_t len, uint32_t seed)
{
    const unsigned char *p = data;
    uint32_t h = seed, word = 0;
    unsigned have = 0;
    for (size_t i = 0; i < len; i++) {
        word |= (uint32_t)p[i] << (8 * have);
        if (++have == 4) {
            h ^= murmur_scramble(word);
            h = rotl32(h, 13);
            h = h * 5 + UINT32_C(0xe6546b64);
            word = 0;
            have = 0;
        }
    }
    if (have > 0)
        h ^= murmur_scramble(word);
    h ^= (uint32_t)len;
    h ^= h >> 16;
    h *= UINT32_C(0x85ebca6b);
    h ^= h >> 13;
    h *= UINT32_C(0xc2b2ae35);
    h ^= h >> 16;
    return h;
}

static uint64_t width_mask(unsigned bits)
{
    return bits >= 64 ? UINT64_MAX : ((UINT64_C(1) << bits) - 1);
}

uint64_t model_hash(const model_cfg_t *cfg, const void *data, size_t len)
{
    if (len == 0)
        data = "";
    switch (cfg->profile) {
    case MODEL_HASH64: return model_mix64(model_fnv1a64(data, len));
    case MODEL_MURMUR32: return model_murmur3_32(data, len, 0);
    case MODEL_FNV32: return model_fnv1a32(data, len);
    case MODEL_FNV16: return model_fnv1a32(data, len) & 0xffffu;
    case MODEL_CUSTOM: return cfg->hash(data, len, cfg->hash_ctx) & width_mask(cfg->bits);
    case MODEL_XXH3: return XXH3_64bits(data, len);
    case MODEL_NGINX: return crc32(0L, (const Bytef *)data, (uInt)len);
    case MODEL_KETAMA: {
        uint8_t digest[MD5_DIGEST_LENGTH];
        MD5_CTX ctx;
        MD5Init(&ctx);
        MD5Update(&ctx, data, len);
        MD5Final(digest, &ctx);
        return (uint32_t)digest[0] | (uint32_t)digest[1] << 8 | (uint32_t)digest[2] << 16 |
               (uint32_t)digest[3] << 24;
    }
    }
    abort();
}

/* Decimal digits of i into buf; returns how many. */
static size_t decimal(char *buf, uint32_t i)
{
    char tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + i % 10);
        i /= 10;
    } while (i != 0);
    for (size_t k = 0; k < n; k++)
        buf[k] = tmp[n - 1 - k];
    return n;
}

size_t model_label(char *buf, const char *name, size_t len, uint32_t i)
{
    memcpy(buf, name, len);
    buf[len] = '#';
    return len + 1 + decimal(buf + len + 1, i);
}

/* fnv16 labels: "<name>" for point 0, "<i>-<name>" after. */
static size_t fnv16_label(char *buf, const char *name, size_t len, uint32_t i)
{
    if (i == 0) {
        memcpy(buf, name, len);
        return len;
    }
    size_t n = decimal(buf, i);
    buf[n++] = '-';
    memcpy(buf + n, name, len);
    return n + len;
}

int model_name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = memcmp(a, b, n);
    if (c != 0)
        return c < 0 ? -1 : 1;
    if (alen == blen)
        return 0;
    return alen < blen ? -1 : 1;
}

uint64_t model_points_per_weight(const model_cfg_t *cfg)
{
    if (cfg->profile == MODEL_KETAMA)
        return 0;
    return cfg->profile == MODEL_NGINX ? 160 : cfg->vnodes;
}

/* d_j = floor(pct * 160 / 4 * (float)N + 1e-10f), pct = (float)w_j / (float)W, every step in single
 * precision (docs/design.md §2.1), one operation per statement so that nothing is fused or
 * widened. */
uint32_t model_ketama_digests(uint32_t w, uint64_t total_weight, size_t n)
{
    volatile float pct = (float)w / (float)total_weight;
    volatile float x = pct * (float)160;
    x = x / (float)4;
    x = x * (float)n;
    x = x + 1e-10f;
    return (uint32_t)floorf(x);
}

uint64_t model_points(const model_cfg_t *cfg, const model_member_t *members, size_t n, size_t j)
{
    if (cfg->profile != MODEL_KETAMA)
        return model_points_per_weight(cfg) * members[j].weight;
    uint64_t total = 0;
    for (size_t k = 0; k < n; k++)
        total += members[k].weight;
    return 4 * (uint64_t)model_ketama_digests(members[j].weight, total, n);
}

/* ketama: the 4 points of digest k of "<name>-<k>" (little-endian words of its MD5). */
static void ketama_digest_points(const char *name, size_t len, uint32_t k, uint32_t out[4])
{
    char label[MODEL_NAME_MAX + 16];
    memcpy(label, name, len);
    label[len] = '-';
    size_t n = len + 1 + decimal(label + len + 1, k);
    uint8_t digest[MD5_DIGEST_LENGTH];
    MD5_CTX ctx;
    MD5Init(&ctx);
    MD5Update(&ctx, (const uint8_t *)label, n);
    MD5Final(digest, &ctx);
    for (int x = 0; x < 4; x++)
        out[x] = (uint32_t)digest[4 * x] | (uint32_t)digest[4 * x + 1] << 8 |
                 (uint32_t)digest[4 * x + 2] << 16 | (uint32_t)digest[4 * x + 3] << 24;
}

/* nginx: HOST and PORT of a server name (docs/design.md §2.1). */
static void nginx_split(const char *name, size_t len, size_t *host_off, size_t *host_len,
                        size_t *port_off, size_t *port_len)
{
    *port_len = 0;
    *port_off = len;
    if (len >= 5 && (name[0] | 0x20) == 'u' && (name[1] | 0x20) == 'n' && (name[2] | 0x20) == 'i' &&
        (name[3] | 0x20) == 'x' && name[4] == ':') {
        *host_off = 5;
        *host_len = len - 5;
        return;
    }
    *host_off = 0;
    *host_len = len;
    for (size_t j = len; j > 0; j--) {
        char c = name[j - 1];
        if (c == ':') {
            *host_len = j - 1;
            *port_off = j;
            *port_len = len - j;
            return;
        }
        if (c < '0' || c > '9')
            return;
    }
}

/* nginx: point k = crc32(HOST || "\0" || PORT || LE32(point k-1)), point -1 taken as 0. */
static uint32_t nginx_point(const char *name, size_t len, uint32_t prev)
{
    size_t ho, hl, po, pl;
    nginx_split(name, len, &ho, &hl, &po, &pl);
    unsigned char buf[MODEL_NAME_MAX + 8];
    size_t n = 0;
    memcpy(buf, name + ho, hl);
    n += hl;
    buf[n++] = 0;
    memcpy(buf + n, name + po, pl);
    n += pl;
    for (int b = 0; b < 4; b++)
        buf[n++] = (unsigned char)(prev >> (8 * b));
    return (uint32_t)crc32(0L, buf, (uInt)n);
}

/* ---- building a snapshot ------------------------------------------------------------------- */

/* qsort has no context argument: the members being sorted against are passed through here.
 * The model's users are single-threaded (model.h). */
static const model_member_t *sort_members;

static int point_cmp(const void *pa, const void *pb)
{
    const model_point_t *a = pa, *b = pb;
    if (a->pos != b->pos)
        return a->pos < b->pos ? -1 : 1;
    const model_member_t *ma = &sort_members[a->member], *mb = &sort_members[b->member];
    int c = model_name_cmp(ma->name, ma->len, mb->name, mb->len);
    if (c != 0)
        return c;
    if (a->index != b->index)
        return a->index < b->index ? -1 : 1;
    return 0;
}

static int by_name_cmp(const void *pa, const void *pb)
{
    const model_member_t *ma = &sort_members[*(const uint32_t *)pa];
    const model_member_t *mb = &sort_members[*(const uint32_t *)pb];
    return model_name_cmp(ma->name, ma->len, mb->name, mb->len);
}

int model_build(model_snap_t *out, const model_cfg_t *cfg, const model_member_t *members, size_t n)
{
    memset(out, 0, sizeof *out);
    out->cfg = *cfg;
    uint64_t total = 0;
    for (size_t j = 0; j < n; j++) {
        total += model_points(cfg, members, n, j);
        out->total_weight += members[j].weight;
    }
    if (total > MODEL_RING_POINTS_MAX)
        return -1;
    out->members = calloc(n ? n : 1, sizeof *out->members);
    out->by_name = calloc(n ? n : 1, sizeof *out->by_name);
    out->member_points = calloc(n ? n : 1, sizeof *out->member_points);
    out->points = calloc(total ? total : 1, sizeof *out->points);
    if (!out->members || !out->by_name || !out->member_points || !out->points) {
        model_snap_free(out);
        return -1;
    }
    memcpy(out->members, members, n * sizeof *members);
    out->nmembers = n;
    char label[MODEL_NAME_MAX + 16];
    unsigned char *taken = NULL;
    if (cfg->profile == MODEL_FNV16) {
        taken = calloc(65536, 1);
        if (!taken) {
            model_snap_free(out);
            return -1;
        }
    }
    size_t np = 0;
    for (size_t j = 0; j < n; j++) {
        uint64_t count = model_points(cfg, members, n, j);
        uint32_t chain = 0, words[4];
        for (uint32_t i = 0; i < count; i++) {
            if (cfg->profile == MODEL_KETAMA) {
                if (i % 4 == 0)
                    ketama_digest_points(members[j].name, members[j].len, i / 4, words);
                out->points[np].pos = words[i % 4];
                out->points[np].member = (uint32_t)j;
                out->points[np].index = i;
                out->member_points[j]++;
                np++;
                continue;
            }
            if (cfg->profile == MODEL_NGINX) {
                chain = nginx_point(members[j].name, members[j].len, chain);
                out->points[np].pos = chain;
                out->points[np].member = (uint32_t)j;
                out->points[np].index = i;
                out->member_points[j]++;
                np++;
                continue;
            }
            size_t llen = cfg->profile == MODEL_FNV16
                              ? fnv16_label(label, members[j].name, members[j].len, i)
                              : model_label(label, members[j].name, members[j].len, i);
            uint64_t pos = model_hash(cfg, label, llen);
            if (taken) {
                /* fnv16: members in join order, points in index order; a taken position is
                 * skipped. */
                if (taken[pos])
                    continue;
                taken[pos] = 1;
            }
            out->points[np].pos = pos;
            out->points[np].member = (uint32_t)j;
            out->points[np].index = i;
            out->member_points[j]++;
            np++;
        }
    }
    free(taken);
    out->npoints = np;
    sort_members = out->members;
    qsort(out->points, np, sizeof *out->points, point_cmp);
    if (cfg->profile == MODEL_NGINX) {
        /* Of equal positions only the first (by name, then index) is kept. */
        size_t kept = 0;
        for (size_t i = 0; i < np; i++) {
            if (kept > 0 && out->points[kept - 1].pos == out->points[i].pos) {
                out->member_points[out->points[i].member]--;
                continue;
            }
            out->points[kept++] = out->points[i];
        }
        np = kept;
        out->npoints = np;
    }
    for (size_t j = 0; j < n; j++)
        out->by_name[j] = (uint32_t)j;
    qsort(out->by_name, n, sizeof *out->by_name, by_name_cmp);
    sort_members = NULL;
    return 0;
}

void model_snap_free(model_snap_t *s)
{
    free(s->members);
    free(s->by_name);
    free(s->points);
    free(s->member_points);
    memset(s, 0, sizeof *s);
}

long model_find(const model_snap_t *s, const char *name, size_t len)
{
    for (size_t j = 0; j < s->nmembers; j++)
        if (model_name_cmp(s->members[j].name, s->members[j].len, name, len) == 0)
            return (long)j;
    return -1;
}

/* ---- lookups ------------------------------------------------------------------------------- */

/* The first point whose position is >= h (npoints if none). */
static size_t lower_bound(const model_snap_t *s, uint64_t h)
{
    size_t lo = 0, hi = s->npoints;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->points[mid].pos < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

long model_owner_point(const model_snap_t *s, uint64_t h)
{
    if (s->npoints == 0)
        return -1;
    size_t i = lower_bound(s, h & width_mask(s->cfg.bits));
    return i == s->npoints ? 0 : (long)i;
}

size_t model_lookup_n(const model_snap_t *s, uint64_t h, uint32_t *out, size_t n)
{
    long start = model_owner_point(s, h);
    size_t got = 0;
    if (start < 0)
        return 0;
    for (size_t k = 0; k < s->npoints && got < n; k++) {
        uint32_t m = s->points[((size_t)start + k) % s->npoints].member;
        int seen = 0;
        for (size_t q = 0; q < got; q++)
            if (out[q] == m)
                seen = 1;
        if (!seen)
            out[got++] = m;
    }
    return got;
}

/* ---- exact fractions ----------------------------------------------------------------------- */

__extension__ typedef unsigned __int128 u128; /* exact counts of up to 2^64 positions */

static u128 ring_size(unsigned bits)
{
    return (u128)1 << bits;
}

static double fraction(u128 count, unsigned bits)
{
    /* count <= 2^bits; long double keeps 64 bits of it before the division by a power of 2. */
    return (double)ldexpl((long double)count, -(int)bits);
}

double model_share(const model_snap_t *s, size_t member)
{
    if (s->npoints == 0)
        return 0.0;
    u128 owned = 0;
    uint64_t last = s->points[s->npoints - 1].pos;
    for (size_t i = 0; i < s->npoints; i++) {
        if (i > 0 && s->points[i].pos == s->points[i - 1].pos)
            continue; /* only the first point at a position owns keys */
        u128 arc;
        if (i == 0)
            arc = ring_size(s->cfg.bits) - last + s->points[0].pos;
        else
            arc = s->points[i].pos - s->points[i - 1].pos;
        if (s->points[i].member == member)
            owned += arc;
    }
    return fraction(owned, s->cfg.bits);
}

void model_shares(const model_snap_t *s, double *out)
{
    u128 *owned = calloc(s->nmembers ? s->nmembers : 1, sizeof *owned);
    if (!owned)
        abort();
    if (s->npoints > 0) {
        uint64_t last = s->points[s->npoints - 1].pos;
        for (size_t i = 0; i < s->npoints; i++) {
            if (i > 0 && s->points[i].pos == s->points[i - 1].pos)
                continue;
            u128 arc = i == 0 ? ring_size(s->cfg.bits) - last + s->points[0].pos
                              : (u128)(s->points[i].pos - s->points[i - 1].pos);
            owned[s->points[i].member] += arc;
        }
    }
    for (size_t j = 0; j < s->nmembers; j++)
        out[j] = fraction(owned[j], s->cfg.bits);
    free(owned);
}

static const model_member_t *owner_at(const model_snap_t *s, uint64_t u)
{
    return &s->members[s->points[model_owner_point(s, u)].member];
}

double model_moved(const model_snap_t *a, const model_snap_t *b)
{
    if (a->cfg.profile != b->cfg.profile || a->cfg.bits != b->cfg.bits)
        return NAN;
    if (a->npoints == 0 && b->npoints == 0)
        return 0.0;
    if (a->npoints == 0 || b->npoints == 0)
        return 1.0;
    /* The union of both position sets cuts the ring into arcs (u[k-1], u[k]] (and the wrapping
     * arc ending at u[0]); within one arc each snapshot has a single owner: the owner of u[k]. */
    size_t nu = 0, na = a->npoints, nb = b->npoints;
    uint64_t *u = malloc((na + nb) * sizeof *u);
    if (!u)
        abort();
    size_t i = 0, j = 0;
    while (i < na || j < nb) {
        uint64_t v;
        if (j >= nb || (i < na && a->points[i].pos <= b->points[j].pos))
            v = a->points[i++].pos;
        else
            v = b->points[j++].pos;
        if (nu == 0 || u[nu - 1] != v)
            u[nu++] = v;
    }
    u128 differ = 0;
    for (size_t k = 0; k < nu; k++) {
        u128 arc = k == 0 ? ring_size(a->cfg.bits) - u[nu - 1] + u[0] : (u128)(u[k] - u[k - 1]);
        const model_member_t *oa = owner_at(a, u[k]), *ob = owner_at(b, u[k]);
        if (model_name_cmp(oa->name, oa->len, ob->name, ob->len) != 0)
            differ += arc;
    }
    free(u);
    return fraction(differ, a->cfg.bits);
}

/* ---- bounded loads (docs/design.md §3) ----------------------------------------------------- */

double model_balance(double c)
{
    if (isnan(c) || isinf(c) || c < 1.0)
        return 1.0;
    return c;
}

double model_capacity(double c, uint64_t m, uint64_t w, uint64_t total_weight)
{
    if (total_weight == 0)
        return 0.0;
    double x = model_balance(c) * (double)(m + 1);
    x = x * (double)w;
    x = x / (double)total_weight;
    return ceil(x);
}

double model_capacity_plain(double c, uint64_t m, uint64_t n)
{
    if (n == 0)
        return 0.0;
    double x = model_balance(c) * (double)(m + 1);
    x = x / (double)n;
    return ceil(x);
}

long model_walk(const model_snap_t *s, uint64_t h, double c, uint64_t m, const uint64_t *loads,
                long *owner, int *saturated)
{
    return model_walk_skip(s, h, c, m, loads, NULL, owner, saturated);
}

long model_walk_skip(const model_snap_t *s, uint64_t h, double c, uint64_t m, const uint64_t *loads,
                     const unsigned char *skip, long *owner, int *saturated)
{
    return model_walk_health(s, h, c, m, loads, skip, NULL, NULL, owner, saturated);
}

/* ---- reported load (docs/design.md §3) -------------------------------------------------------- */

uint64_t model_report_count(uint64_t local, uint64_t reported, uint64_t local_at_report)
{
    /* max(local, reported + local - local_at_report) without wrapping: the report adds what it
     * exceeds local_at_report by, or nothing. */
    if (reported <= local_at_report)
        return local;
    uint64_t excess = reported - local_at_report;
    if (excess > UINT64_C(0xffffffff))
        excess = UINT64_C(0xffffffff);
    return local + excess;
}

/* ---- health and warm-up (docs/design.md §3) ------------------------------------------------ */

uint64_t model_up_weight(const model_snap_t *s, const unsigned char *down)
{
    uint64_t w = 0;
    for (size_t j = 0; j < s->nmembers; j++)
        if (!down || !down[j])
            w += s->members[j].weight;
    return w;
}

long model_owner_up(const model_snap_t *s, uint64_t h, const unsigned char *down)
{
    long start = model_owner_point(s, h);
    if (start < 0)
        return -1;
    for (size_t k = 0; k < s->npoints; k++) {
        uint32_t j = s->points[((size_t)start + k) % s->npoints].member;
        if (!down || !down[j])
            return (long)j;
    }
    return -1;
}

long model_first_up_unskipped(const model_snap_t *s, uint64_t h, const unsigned char *skip,
                              const unsigned char *down)
{
    long start = model_owner_point(s, h);
    if (start < 0)
        return -1;
    for (size_t k = 0; k < s->npoints; k++) {
        uint32_t j = s->points[((size_t)start + k) % s->npoints].member;
        if (skip && skip[j])
            return -1;
        if (down && down[j])
            continue;
        return (long)j;
    }
    return -1;
}

size_t model_lookup_n_up(const model_snap_t *s, uint64_t h, const unsigned char *down,
                         uint32_t *out, size_t n)
{
    long start = model_owner_point(s, h);
    size_t got = 0;
    if (start < 0)
        return 0;
    for (size_t k = 0; k < s->npoints && got < n; k++) {
        uint32_t m = s->points[((size_t)start + k) % s->npoints].member;
        int seen = down && down[m];
        for (size_t q = 0; q < got; q++)
            if (out[q] == m)
                seen = 1;
        if (!seen)
            out[got++] = m;
    }
    return got;
}

double model_scaled_capacity(double cap, double scale)
{
    return scale >= 1.0 ? cap : ceil(scale * cap);
}

/* ---- effective weights (docs/design.md §3) ---------------------------------------------------- */

double model_effective_sum(const model_snap_t *s, const unsigned char *down, const double *scale)
{
    /* In name order, as the library sums them (src/effective.c): a double sum depends on its
     * order, and a capacity that is an integer in exact arithmetic (28 / (28 / 3)) rounds up or
     * not by the last bit of E. */
    double sum = 0.0;
    for (size_t k = 0; k < s->nmembers; k++) {
        size_t j = s->by_name[k];
        if (down && down[j])
            continue;
        double w = (double)s->members[j].weight;
        sum += scale && scale[j] < 1.0 ? scale[j] * w : w;
    }
    return sum;
}

double model_effective_capacity(double c, uint64_t m, double e, double sum)
{
    if (!(e > 0.0) || !(sum > 0.0))
        return 0.0;
    double x = model_balance(c) * (double)(m + 1);
    x = x * e;
    x = x / sum;
    return ceil(x);
}

long model_walk_health(const model_snap_t *s, uint64_t h, double c, uint64_t m,
                       const uint64_t *loads, const unsigned char *skip, const unsigned char *down,
                       const double *scale, long *owner, int *saturated)
{
    long start = model_owner_point(s, h);
    *saturated = 0;
    *owner = -1;
    if (start < 0)
        return -1;
    *owner = (long)s->points[start].member;
    double sum = model_effective_sum(s, down, scale);
    long least = -1, parked = -1;
    for (size_t k = 0; k < s->npoints; k++) {
        uint32_t j = s->points[((size_t)start + k) % s->npoints].member;
        if (skip && skip[j])
            continue; /* passed over as if full; it still counts in n, E and m */
        if (down && down[j])
            continue; /* out of service: walked past, not counted in n and E */
        double sc = scale ? scale[j] : 1.0;
        uint64_t w = s->members[j].weight;
        if (sc <= 0.0) {
            if (parked < 0 || loads[j] * s->members[parked].weight < loads[parked] * w)
                parked = (long)j; /* admits nothing; the last resort */
            continue;
        }
        double e = sc < 1.0 ? sc * (double)w : (double)w;
        double cap = model_effective_capacity(c, m, e, sum);
        if ((scale && loads[j] == 0) || (double)loads[j] < cap)
            return (long)j;
        if (least < 0 || loads[j] * s->members[least].weight < loads[least] * w)
            least = (long)j; /* least loaded relative to its weight */
    }
    if (least < 0)
        least = parked;
    if (least < 0)
        return -1; /* every member met is skipped or down */
    *saturated = 1;
    return least;
}

/* ---- self-test against docs/design.md §10 -------------------------------------------------- */

static uint64_t table_hash(const void *data, size_t len, void *ctx)
{
    static const struct {
        const char *s;
        uint64_t v;
    } table[] = {{"a#0", 10}, {"b#0", 30}, {"c#0", 50}, {"a#1", 60}, {"b#1", 80}, {"c#1", 95},
                 {"k1", 5},   {"k2", 55},  {"k3", 85},  {"k4", 97},  {"k5", 30}};
    (void)ctx;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strlen(table[i].s) == len && memcmp(table[i].s, data, len) == 0)
            return table[i].v;
    return 0;
}

#define EXPECT(cond) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "model self-test failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            return -1; \
        } \
    } while (0)

static model_member_t mm(const char *name, uint32_t weight, int obj)
{
    model_member_t m;
    memset(&m, 0, sizeof m);
    m.len = strlen(name);
    memcpy(m.name, name, m.len);
    m.weight = weight;
    m.obj = obj;
    return m;
}

static const char *owner_name(const model_snap_t *s, const char *key)
{
    long p = model_owner_point(s, model_hash(&s->cfg, key, strlen(key)));
    return p < 0 ? NULL : s->members[s->points[p].member].name;
}

int model_selftest(void)
{
    EXPECT(model_fnv1a64("", 0) == UINT64_C(0xcbf29ce484222325));
    EXPECT(model_fnv1a64("a", 1) == UINT64_C(0xaf63dc4c8601ec8c));
    EXPECT(model_fnv1a64("foobar", 6) == UINT64_C(0x85944171f73967e8));
    EXPECT(model_mix64(model_fnv1a64("", 0)) == UINT64_C(0xf52a15e9a9b5e89b));
    EXPECT(model_mix64(model_fnv1a64("a", 1)) == UINT64_C(0x02c0bdbf481420f8));
    EXPECT(model_mix64(model_fnv1a64("foobar", 6)) == UINT64_C(0x404da9e3b74078c2));
    EXPECT(model_murmur3_32("", 0, 0) == 0);
    EXPECT(model_murmur3_32("test", 4, 0) == UINT32_C(3127628307));
    EXPECT(model_murmur3_32("Hello, world!", 13, 0) == UINT32_C(3224780355));

    EXPECT(model_capacity_plain(1.25, 3, 3) == 2.0);
    EXPECT(model_capacity_plain(1.25, 0, 8) == 1.0);
    EXPECT(model_capacity_plain(1.25, 7, 8) == 2.0);
    EXPECT(model_capacity_plain(1.25, 100, 8) == 16.0);
    EXPECT(model_capacity_plain(1.25, 10, 0) == 0.0);
    EXPECT(model_capacity_plain(0.5, 5, 2) == 3.0);

    /* The worked example: a 10, b 30, c 50, a 60, b 80, c 95. */
    model_cfg_t cfg = {MODEL_CUSTOM, 64, 2, table_hash, NULL};
    model_member_t abc[3] = {mm("c", 1, 2), mm("a", 1, 0), mm("b", 1, 1)};
    model_snap_t s;
    EXPECT(model_build(&s, &cfg, abc, 3) == 0);
    EXPECT(s.npoints == 6);
    static const uint64_t pos[6] = {10, 30, 50, 60, 80, 95};
    static const char owners[6] = {'a', 'b', 'c', 'a', 'b', 'c'};
    for (size_t i = 0; i < 6; i++) {
        EXPECT(s.points[i].pos == pos[i]);
        EXPECT(s.members[s.points[i].member].name[0] == owners[i]);
    }
    EXPECT(strcmp(owner_name(&s, "k1"), "a") == 0);
    EXPECT(strcmp(owner_name(&s, "k2"), "a") == 0);
    EXPECT(strcmp(owner_name(&s, "k3"), "c") == 0);
    EXPECT(strcmp(owner_name(&s, "k4"), "a") == 0);
    EXPECT(strcmp(owner_name(&s, "k5"), "b") == 0);
    const uint64_t loads[3] = {1, 2, 0}; /* join order c, a, b: a=2, b=0, c=1 */
    long owner;
    int sat;
    long j = model_walk(&s, 5, 1.25, 3, loads, &owner, &sat);
    EXPECT(j >= 0 && strcmp(s.members[j].name, "b") == 0 && !sat);
    j = model_walk(&s, 85, 1.25, 3, loads, &owner, &sat);
    EXPECT(j >= 0 && strcmp(s.members[j].name, "c") == 0);
    /* Retries (chring_acquire_skip): skipping b, k1 goes on to c; skipping b and c leaves only
     * a, which is full (saturation); skipping everything finds nothing.  Join order c, a, b. */
    const unsigned char skip_b[3] = {0, 0, 1}, skip_bc[3] = {1, 0, 1}, skip_all[3] = {1, 1, 1};
    j = model_walk_skip(&s, 5, 1.25, 3, loads, skip_b, &owner, &sat);
    EXPECT(j >= 0 && strcmp(s.members[j].name, "c") == 0 && !sat);
    EXPECT(owner >= 0 && strcmp(s.members[owner].name, "a") == 0);
    j = model_walk_skip(&s, 5, 1.25, 3, loads, skip_bc, &owner, &sat);
    EXPECT(j >= 0 && strcmp(s.members[j].name, "a") == 0 && sat);
    j = model_walk_skip(&s, 5, 1.25, 3, loads, skip_all, &owner, &sat);
    EXPECT(j == -1 && owner >= 0 && strcmp(s.members[owner].name, "a") == 0);
    EXPECT(s.members[s.by_name[0]].name[0] == 'a' && s.members[s.by_name[2]].name[0] == 'c');
    double sum = 0;
    for (size_t m = 0; m < 3; m++)
        sum += model_share(&s, m);
    EXPECT(fabs(sum - 1.0) < 1e-12);
    model_snap_free(&s);

    /* fnv16: alpha, beta, gamma at weight 2, V = 1. */
    model_cfg_t f16 = {MODEL_FNV16, 16, 1, NULL, NULL};
    model_member_t greek[3] = {mm("alpha", 2, 0), mm("beta", 2, 1), mm("gamma", 2, 2)};
    EXPECT(model_build(&s, &f16, greek, 3) == 0);
    EXPECT(model_hash(&f16, "orange", 6) == 29675);
    EXPECT(strcmp(owner_name(&s, "orange"), "alpha") == 0);
    long p = model_owner_point(&s, 29675);
    EXPECT(s.points[p].pos == 39205 && s.points[p].index == 1);
    EXPECT(strcmp(owner_name(&s, "apple"), "beta") == 0);
    model_snap_free(&s);

    /* moved: removing one of two members moves exactly its share. */
    model_cfg_t h64 = {MODEL_HASH64, 64, 4, NULL, NULL};
    model_member_t two[2] = {mm("x", 1, 0), mm("y", 2, 1)};
    model_snap_t s2;
    EXPECT(model_build(&s, &h64, two, 2) == 0);
    EXPECT(model_build(&s2, &h64, two, 1) == 0);
    EXPECT(fabs(model_moved(&s, &s2) - model_share(&s, 1)) < 1e-15);
    EXPECT(model_moved(&s, &s) == 0.0);
    model_snap_free(&s);
    model_snap_free(&s2);

    /* nginx: the HOST/PORT split. */
    size_t ho, hl, po, pl;
    nginx_split("10.0.0.1:80", 11, &ho, &hl, &po, &pl);
    EXPECT(ho == 0 && hl == 8 && po == 9 && pl == 2);
    nginx_split("UNIX:/run/a.sock", 16, &ho, &hl, &po, &pl);
    EXPECT(ho == 5 && hl == 11 && pl == 0);
    nginx_split("host:", 5, &ho, &hl, &po, &pl);
    EXPECT(hl == 4 && pl == 0 && po == 5);
    nginx_split("a:b", 3, &ho, &hl, &po, &pl);
    EXPECT(hl == 3 && pl == 0);
    nginx_split("1234", 4, &ho, &hl, &po, &pl);
    EXPECT(hl == 4 && pl == 0);

    /* ketama: 40 digests at equal weights, 39 for 25 members (docs/design.md §2.1). */
    EXPECT(model_ketama_digests(1, 4, 4) == 40);
    EXPECT(model_ketama_digests(1, 25, 25) == 39);
    return 0;
}
