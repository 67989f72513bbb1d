/* Hash functions and vnode labels (docs/design.md §2, §5, §10).
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
    "",
    "a",
    "ab",
    "abc",
    "abcd",
    "abcde",
    "foobar",
    "engine-0#7",
    "engine-0#8",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog",
    "\xff\x00\x80",
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
