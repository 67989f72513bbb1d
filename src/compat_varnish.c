/* Varnish 7.1's shard director (vmod_directors `directors.shard()`) placement (docs/design.md
 * §2.1, docs/compat.md).
 *
 * SPDX-License-Identifier: MIT
 *
 * Every step reproduces what the shard director computes, so that a VCL switching from
 * directors.shard to chring keeps every cached object where it is:
 *
 *   points  replica j (j = 0 .. replicas * weight - 1) of a backend with identity `ident` (its
 *           VCL name unless given) sits at the little-endian 32-bit word of the last 4 bytes of
 *           SHA-256(ident followed by j in decimal), Varnish's VRT_HashStrands32;
 *   keys    `by = URL` (and the default `by = HASH` on the client side) hashes the URL the same
 *           way, SHA-256 and the last 4 bytes little-endian.
 *
 * The lookup's two quirks (keys above the highest point start at the last point; a ring of two
 * points starts every key at point 1) are the profile's start rule, applied in find.h.  SHA-256
 * comes from libmd; it is not re-written here.  Pure functions, any thread. */
#include "internal.h"
#include "compat.h"

#include <sha2.h>
#include <stdint.h>
#include <string.h>

/* The last four bytes of a SHA-256 digest, little-endian (VRT_HashStrands32). */
static uint32_t digest_tail(const uint8_t d[SHA256_DIGEST_LENGTH])
{
    const uint8_t *b = d + SHA256_DIGEST_LENGTH - 4;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

uint32_t chring__varnish_hash(const void *key, size_t len)
{
    SHA2_CTX ctx;
    uint8_t d[SHA256_DIGEST_LENGTH];
    SHA256Init(&ctx);
    SHA256Update(&ctx, key, len);
    SHA256Final(d, &ctx);
    return digest_tail(d);
}

void chring__varnish_points(const char *ident, size_t len, uint64_t count, uint64_t *out)
{
    /* The identity's prefix of the hash state is computed once and copied for each replica. */
    SHA2_CTX prefix;
    SHA256Init(&prefix);
    SHA256Update(&prefix, (const uint8_t *)ident, len);
    for (uint64_t j = 0; j < count; j++) {
        char digits[10];
        size_t nd = chring__put_decimal(digits, (uint32_t)j);
        SHA2_CTX ctx = prefix;
        uint8_t d[SHA256_DIGEST_LENGTH];
        SHA256Update(&ctx, (const uint8_t *)digits, nd);
        SHA256Final(d, &ctx);
        out[j] = digest_tail(d);
    }
}
