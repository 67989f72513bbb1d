/* Hash functions, vnode labels, capacities and error names (SPEC §2, §3, §5, §10).
 *
 * SPDX-License-Identifier: MIT
 */
#include "chring_test.h"

/* MurmurHash3 x86 32-bit, written from Austin Appleby's public-domain description, as an
 * independent reference for strings beyond the published vectors. */
static uint32_t rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

static uint32_t ref_murmur3_32(const void *data, size_t len, uint32_t seed)
{
    const unsigned char *p = data;
    const uint32_t c1 = 0xcc9e2d51u, c2 = 0x1b873593u;
    uint32_t h = seed;
    size_t blocks = len / 4;
    for (size_t i = 0; i < blocks; i++) {
        uint32_t k = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                     (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
        h = rotl32(h, 13);
        h = h * 5 + 0xe6546b64u;
    }
    const unsigned char *tail = p + blocks * 4;
    uint32_t k = 0;
    switch (len & 3) {
    case 3:
        k ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        k ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        k ^= tail[0];
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
    }
    h ^= (uint32_t)len;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

static const char *const sample_strings[] = {
    "", "a", "ab", "abc", "abcd", "abcde", "foobar", "engine-0#7", "engine-0#8",
    "Hello, world!", "The quick brown fox jumps over the lazy dog", "\xff\x00\x80",
};
#define SAMPLE_COUNT (sizeof sample_strings / sizeof sample_strings[0])

Test(hash, fnv1a64_matches_spec_vectors)
{
    cr_assert_eq(chring_fnv1a64("", 0), 0xcbf29ce484222325ull, "FNV1a64(\"\")");
    cr_assert_eq(chring_fnv1a64(NULL, 0), 0xcbf29ce484222325ull, "FNV1a64(NULL, 0)");
    cr_assert_eq(chring_fnv1a64("a", 1), 0xaf63dc4c8601ec8cull, "FNV1a64(\"a\")");
    cr_assert_eq(chring_fnv1a64("foobar", 6), 0x85944171f73967e8ull, "FNV1a64(\"foobar\")");
}

Test(hash, fnv1a64_matches_reference_implementation)
{
    for (size_t i = 0; i < SAMPLE_COUNT; i++) {
        size_t len = strlen(sample_strings[i]);
        cr_assert_eq(chring_fnv1a64(sample_strings[i], len), ref_fnv1a64(sample_strings[i], len),
                     "FNV1a64 of sample %zu", i);
    }
    /* Bytes above 0x7f are unsigned: a signed char would sign-extend before the xor. */
    const unsigned char high[] = {0xff, 0x80, 0x00, 0xfe};
    cr_assert_eq(chring_fnv1a64(high, 4), ref_fnv1a64(high, 4), "FNV1a64 of high bytes");
}

Test(hash, fnv1a32_matches_published_vectors)
{
    cr_assert_eq(chring_fnv1a32("", 0), 0x811c9dc5u, "FNV1a32(\"\")");
    cr_assert_eq(chring_fnv1a32("a", 1), 0xe40c292cu, "FNV1a32(\"a\")");
    cr_assert_eq(chring_fnv1a32("foobar", 6), 0xbf9cf968u, "FNV1a32(\"foobar\")");
    for (size_t i = 0; i < SAMPLE_COUNT; i++) {
        size_t len = strlen(sample_strings[i]);
        cr_assert_eq(chring_fnv1a32(sample_strings[i], len), ref_fnv1a32(sample_strings[i], len),
                     "FNV1a32 of sample %zu", i);
    }
    const unsigned char high[] = {0xff, 0x80, 0x00, 0xfe};
    cr_assert_eq(chring_fnv1a32(high, 4), ref_fnv1a32(high, 4), "FNV1a32 of high bytes");
}

Test(hash, mix64_is_the_splitmix64_finalizer)
{
    /* Values computed by hand (Python, arbitrary-precision integers reduced mod 2^64). */
    cr_assert_eq(chring_mix64(0), 0ull, "Mix64(0)");
    cr_assert_eq(chring_mix64(1), 0x5692161d100b05e5ull, "Mix64(1)");
    cr_assert_eq(chring_mix64(0x0123456789abcdefull), 0xb2c058e4ebb5112cull, "Mix64(0x0123..)");
    uint64_t z = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 1000; i++) {
        cr_assert_eq(chring_mix64(z), ref_mix64(z), "Mix64(%#llx)", (unsigned long long)z);
        z = z * 6364136223846793005ull + 1442695040888963407ull;
    }
}

Test(hash, hash64_matches_spec_vectors)
{
    cr_assert_eq(chring_hash64("", 0), 0xf52a15e9a9b5e89bull, "Hash64(\"\")");
    cr_assert_eq(chring_hash64("a", 1), 0x02c0bdbf481420f8ull, "Hash64(\"a\")");
    cr_assert_eq(chring_hash64("foobar", 6), 0x404da9e3b74078c2ull, "Hash64(\"foobar\")");
    for (size_t i = 0; i < SAMPLE_COUNT; i++) {
        size_t len = strlen(sample_strings[i]);
        cr_assert_eq(chring_hash64(sample_strings[i], len), ref_hash64(sample_strings[i], len),
                     "Hash64 of sample %zu", i);
        cr_assert_eq(chring_hash64(sample_strings[i], len),
                     chring_mix64(chring_fnv1a64(sample_strings[i], len)),
                     "Hash64 = Mix64(FNV1a64) for sample %zu", i);
    }
}

Test(hash, murmur3_32_matches_published_vectors)
{
    cr_assert_eq(chring_murmur3_32("", 0, 0), 0u, "murmur3(\"\")");
    cr_assert_eq(chring_murmur3_32("test", 4, 0), 3127628307u, "murmur3(\"test\")");
    cr_assert_eq(chring_murmur3_32("Hello, world!", 13, 0), 3224780355u, "murmur3(Hello)");
}

Test(hash, murmur3_32_matches_reference_for_every_tail_length_and_seed)
{
    const uint32_t seeds[] = {0, 1, 0x9747b28cu};
    for (size_t s = 0; s < 3; s++) {
        for (size_t i = 0; i < SAMPLE_COUNT; i++) {
            size_t len = strlen(sample_strings[i]);
            cr_assert_eq(chring_murmur3_32(sample_strings[i], len, seeds[s]),
                         ref_murmur3_32(sample_strings[i], len, seeds[s]),
                         "murmur3 of sample %zu seed %u", i, seeds[s]);
        }
    }
    const unsigned char high[] = {0xff, 0x80, 0x00, 0xfe, 0x81, 0x90, 0xa0};
    for (size_t len = 0; len <= sizeof high; len++)
        cr_assert_eq(chring_murmur3_32(high, len, 0), ref_murmur3_32(high, len, 0),
                     "murmur3 of %zu high bytes", len);
}

Test(hash, vnode_label_writes_name_hash_index)
{
    char buf[64];
    cr_assert_eq(chring_vnode_label(buf, sizeof buf, "a", 0), 3, "length of a#0");
    cr_assert_str_eq(buf, "a#0", "label");
    cr_assert_eq(chring_vnode_label(buf, sizeof buf, "engine-0", 159), 12, "length");
    cr_assert_str_eq(buf, "engine-0#159", "label");
    cr_assert_eq(chring_vnode_label(buf, sizeof buf, "x", 4294967295u), 12, "length of max index");
    cr_assert_str_eq(buf, "x#4294967295", "decimal, no padding");
    cr_assert_eq(chring_vnode_label(buf, sizeof buf, "n", 10), 4, "length");
    cr_assert_str_eq(buf, "n#10", "label");
}

Test(hash, vnode_label_reports_enospc_when_cap_is_short)
{
    char buf[16];
    memset(buf, 'Z', sizeof buf);
    /* "abc#12" is 6 bytes and needs a 7-byte buffer with its NUL. */
    cr_assert_eq(chring_vnode_label(buf, 7, "abc", 12), 6, "exact fit");
    cr_assert_str_eq(buf, "abc#12", "exact fit");
    cr_assert_eq(chring_vnode_label(buf, 6, "abc", 12), -ENOSPC, "one byte short");
    cr_assert_eq(chring_vnode_label(buf, 1, "abc", 12), -ENOSPC, "cap 1");
    cr_assert_eq(chring_vnode_label(buf, 0, "abc", 12), -ENOSPC, "cap 0");
    /* The buffer is never overrun. */
    cr_assert_eq(buf[7], 'Z', "byte past the cap written");
}

Test(hash, vnode_label_rejects_null_arguments)
{
    char buf[16];
    cr_assert_eq(chring_vnode_label(NULL, 16, "a", 0), -EINVAL, "NULL buf");
    cr_assert_eq(chring_vnode_label(buf, sizeof buf, NULL, 0), -EINVAL, "NULL name");
}

Test(capacity, spec_reference_cases)
{
    cr_assert_eq(chring_capacity(3, 3, 1.25), 2u, "(3,3,1.25)");
    cr_assert_eq(chring_capacity(0, 8, 1.25), 1u, "(0,8,1.25)");
    cr_assert_eq(chring_capacity(7, 8, 1.25), 2u, "(7,8,1.25)");
    cr_assert_eq(chring_capacity(100, 8, 1.25), 16u, "(100,8,1.25)");
    cr_assert_eq(chring_capacity(10, 0, 1.25), 0u, "(10,0,1.25): no members");
    cr_assert_eq(chring_capacity(5, 2, 0.5), 3u, "(5,2,0.5): c acts as 1");
}

Test(capacity, c_below_one_nan_infinite_or_negative_acts_as_one)
{
    for (uint64_t m = 0; m < 200; m += 7) {
        for (uint64_t n = 1; n < 12; n++) {
            uint64_t one = chring_capacity(m, n, 1.0);
            cr_assert_eq(one, (uint64_t)ceil((double)(m + 1) / (double)n), "c = 1");
            cr_assert_eq(chring_capacity(m, n, 0.5), one, "c = 0.5, m=%llu n=%llu",
                         (unsigned long long)m, (unsigned long long)n);
            cr_assert_eq(chring_capacity(m, n, 0.0), one, "c = 0");
            cr_assert_eq(chring_capacity(m, n, -2.0), one, "c = -2");
            cr_assert_eq(chring_capacity(m, n, NAN), one, "c = NaN");
            cr_assert_eq(chring_capacity(m, n, INFINITY), one, "c = inf");
            cr_assert_eq(chring_capacity(m, n, -INFINITY), one, "c = -inf");
        }
    }
}

Test(capacity, is_computed_in_ieee_double_as_written)
{
    /* 1.1 * 50 is 55.000000000000007 in double, so the normative double formula gives 56 where
     * exact arithmetic would give 55. */
    cr_assert_eq(chring_capacity(49, 1, 1.1), 56u, "ceil(1.1 * 50 / 1) in double");
    for (uint64_t m = 0; m < 300; m += 3) {
        for (uint64_t n = 1; n < 20; n++) {
            const double cs[] = {1.0, 1.1, 1.25, 1.3, 2.0, 3.7};
            for (size_t i = 0; i < 6; i++) {
                double expect = ceil(cs[i] * (double)(m + 1) / (double)n);
                cr_assert_eq(chring_capacity(m, n, cs[i]), (uint64_t)expect,
                             "m=%llu n=%llu c=%g", (unsigned long long)m, (unsigned long long)n,
                             cs[i]);
            }
        }
    }
}

Test(capacity, weighted_is_left_to_right_double)
{
    /* Left to right: ceil(((1.1 * 10) * 5) / 11) = 5; ceil(1.1 * (10 * 5 / 11)) would be 6. */
    cr_assert_eq(chring_capacity_weighted(9, 5, 11, 1.1), 5u, "(9,5,11,1.1)");
    /* ceil(((1.1 * 12) * 5) / 6) = 11; ceil(1.1 * 12 * (5 / 6)) would be 12. */
    cr_assert_eq(chring_capacity_weighted(11, 5, 6, 1.1), 11u, "(11,5,6,1.1)");
    /* 3 leases, weight 2 of 4, c = 1.25: ceil(1.25 * 4 * 2 / 4) = 3. */
    cr_assert_eq(chring_capacity_weighted(3, 2, 4, 1.25), 3u, "(3,2,4,1.25)");
    cr_assert_eq(chring_capacity_weighted(10, 1, 0, 1.25), 0u, "total weight 0");
    cr_assert_eq(chring_capacity_weighted(5, 1, 2, 0.5), 3u, "c below 1 acts as 1");
    cr_assert_eq(chring_capacity_weighted(5, 1, 2, NAN), 3u, "NaN acts as 1");
    cr_assert_eq(chring_capacity_weighted(5, 1, 2, INFINITY), 3u, "inf acts as 1");
    for (uint64_t m = 0; m < 100; m += 3)
        for (uint64_t w = 1; w < 5; w++)
            for (uint64_t tw = w; tw < 14; tw++) {
                double expect = ceil(1.25 * (double)(m + 1) * (double)w / (double)tw);
                cr_assert_eq(chring_capacity_weighted(m, w, tw, 1.25), (uint64_t)expect,
                             "m=%llu w=%llu W=%llu", (unsigned long long)m,
                             (unsigned long long)w, (unsigned long long)tw);
            }
}

Test(capacity, weighted_with_unit_weights_equals_unweighted)
{
    const double cs[] = {1.0, 1.1, 1.25, 2.0};
    for (size_t i = 0; i < 4; i++)
        for (uint64_t m = 0; m < 500; m += 11)
            for (uint64_t n = 1; n < 17; n++)
                cr_assert_eq(chring_capacity_weighted(m, 1, n, cs[i]), chring_capacity(m, n, cs[i]),
                             "m=%llu n=%llu c=%g", (unsigned long long)m, (unsigned long long)n,
                             cs[i]);
}

Test(errors, strerror_names_each_errno_distinctly)
{
    const int errs[] = {-EINVAL, -ENOMEM, -ENOENT, -ENAMETOOLONG, -ENOSPC, -E2BIG, -ERANGE, -EEXIST};
    const size_t count = sizeof errs / sizeof errs[0];
    const char *unknown = chring_strerror(-123456);
    cr_assert_not_null(unknown, "strerror of an unknown value");
    cr_assert_str_eq(unknown, "unknown error", "as documented in the header");
    cr_assert_not_null(chring_strerror(0), "strerror(0)");
    cr_assert_str_eq(chring_strerror(0), "success", "as documented in the header");
    for (size_t i = 0; i < count; i++) {
        const char *text = chring_strerror(errs[i]);
        cr_assert_not_null(text, "strerror(%d)", errs[i]);
        cr_assert_gt(strlen(text), 0u, "strerror(%d) is empty", errs[i]);
        cr_assert_str_neq(text, unknown, "strerror(%d) is the unknown text", errs[i]);
        cr_assert_str_neq(text, "success", "strerror(%d) says success", errs[i]);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(text, chring_strerror(errs[j]), "%d and %d share a name", errs[i],
                              errs[j]);
    }
}

Test(errors, strerror_of_positive_or_huge_values_is_safe)
{
    cr_assert_not_null(chring_strerror(1 << 30), "huge positive");
    cr_assert_not_null(chring_strerror(-(1 << 30)), "huge negative");
    cr_assert_not_null(chring_strerror(-2147483647 - 1), "INT_MIN");
}

Test(profiles, names_round_trip)
{
    const chring_profile_t all[] = {CHRING_PROFILE_HASH64, CHRING_PROFILE_MURMUR32,
                                    CHRING_PROFILE_FNV32,  CHRING_PROFILE_FNV16,
                                    CHRING_PROFILE_XXH3,   CHRING_PROFILE_KETAMA,
                                    CHRING_PROFILE_NGINX,  CHRING_PROFILE_CUSTOM};
    const char *const names[] = {"hash64", "murmur32", "fnv32", "fnv16", "xxh3", "ketama", "nginx"};
    for (size_t i = 0; i < 7; i++) {
        const char *name = chring_profile_name(all[i]);
        cr_assert_not_null(name, "name of profile %d", (int)all[i]);
        cr_assert_str_eq(name, names[i], "SPEC §7 spells it so");
    }
    for (size_t i = 0; i < 8; i++) {
        chring_profile_t parsed = (chring_profile_t)99;
        cr_assert_eq(chring_profile_parse(chring_profile_name(all[i]), &parsed), 0, "parse %s",
                     chring_profile_name(all[i]));
        cr_assert_eq(parsed, all[i], "round trip of %s", chring_profile_name(all[i]));
    }
    chring_profile_t out;
    cr_assert_null(chring_profile_name((chring_profile_t)77), "unknown profile value");
    cr_assert_eq(chring_profile_parse("sha1", &out), -EINVAL, "unknown name");
    cr_assert_eq(chring_profile_parse(NULL, &out), -EINVAL, "NULL name");
    cr_assert_eq(chring_profile_parse("hash64", NULL), -EINVAL, "NULL out");
}

Test(config, defaults_are_documented_values)
{
    chring_config_t cfg;
    memset(&cfg, 0xab, sizeof cfg);
    chring_config_default(&cfg);
    cr_assert_eq(cfg.profile, CHRING_PROFILE_HASH64, "profile");
    cr_assert_eq(cfg.vnodes, 160u, "vnodes");
    cr_assert_float_eq(cfg.balance, 1.25, 0.0, "balance");
    cr_assert(cfg.retire == NULL, "retire");
    cr_assert(cfg.hash == NULL, "hash");
    chring_config_default(NULL);
}

Test(version, runtime_version_matches_header)
{
    cr_assert_eq(chring_version_number(), (unsigned)CHRING_VERSION_NUMBER, "version number");
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", CHRING_VERSION_MAJOR, CHRING_VERSION_MINOR,
             CHRING_VERSION_PATCH);
    cr_assert_str_eq(chring_version(), expect, "version string");
}
