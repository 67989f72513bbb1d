/* Point and key hashing of the compatibility profiles (docs/design.md §2.1): ketama and nginx.
 *
 * SPDX-License-Identifier: MIT
 *
 * Both profiles exist to reproduce, bit for bit, rings that fleets already run, so every step
 * below copies the reference implementation rather than what would be cleanest:
 *
 *   ketama  libmemcached's update_continuum() in weighted ketama mode
 *           (MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED), which is also libketama's and twemproxy's layout;
 *   nginx   ngx_http_upstream_init_chash() of ngx_http_upstream_hash_module (`hash $key
 *           consistent`), itself compatible with Cache::Memcached::Fast.
 *
 * MD5 comes from libmd and CRC-32 from zlib; neither is re-written here.  All functions are pure
 * and may be called from any thread.
 */
#include "internal.h"
#include "compat.h"

#include <math.h>
#include <md5.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

/* libmemcached's MEMCACHED_POINTS_PER_SERVER_KETAMA: points per server at an equal share. */
#define KETAMA_POINTS_PER_SERVER 160
/* Each MD5 digest yields four 32-bit points. */
#define KETAMA_POINTS_PER_HASH 4

/* ------------------------------------------------------------------------------------------- *
 * ketama
 * ------------------------------------------------------------------------------------------- */

static uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

uint32_t chring__ketama_digests(uint32_t weight, uint64_t total_weight, size_t members)
{
    /* libmemcached computes, with pct, the constants and live_servers all in float:
     *
     *     float pct = (float)weight / (float)total_weight;
     *     floorf((float)(pct * 160 / 4 * (float)live_servers + 0.0000000001))
     *
     * The rounding of each float step is what gives 39 digests instead of 40 at some equal-weight
     * memberships (25 members: 1/25 is not exact in binary, 0.04f * 160 / 4 * 25 lands just
     * below 40).  A compiler allowed to keep excess precision (x87, FLT_EVAL_METHOD 2) would carry
     * the product in long double and round differently, so every intermediate is stored in a
     * volatile float, which forces a rounding to single precision at each step. */
    if (weight == 0 || total_weight == 0 || members == 0)
        return 0;
    volatile float pct = (float)weight / (float)total_weight;
    volatile float scaled = pct * (float)KETAMA_POINTS_PER_SERVER;
    volatile float per_hash = scaled / (float)KETAMA_POINTS_PER_HASH;
    volatile float spread = per_hash * (float)members;
    /* libmemcached adds the epsilon as a double and rounds back to float; docs/design.md §2.1
     * writes 1e-10f.  Both leave any spread >= 1 unchanged (1e-10 is far below half an ulp there)
     * and cannot lift a spread < 1 to 1, so the floor is the same either way. */
    volatile float nudged = spread + 1e-10f;
    float digests = floorf(nudged);
    /* A float at or above 2^32 does not fit the result; such a member's point count is rejected
     * by the caller long before (CHRING_POINTS_MAX), so saturating is enough. */
    if (!(digests < 4294967296.0f))
        return UINT32_MAX;
    return (uint32_t)digests;
}

void chring__ketama_points(const char *name, size_t len, uint32_t digests, uint32_t *out)
{
    /* libmemcached hashes the label "<host>-<k>" (or "<host>:<port>-<k>" for a non-default
     * port; the caller's name already carries that choice) with k counted from 0, and takes all
     * four little-endian words of each digest, in order x = 0..3. */
    for (uint32_t k = 0; k < digests; k++) {
        char suffix[16];
        suffix[0] = '-';
        size_t n = 1 + chring__put_decimal(suffix + 1, k);

        MD5_CTX ctx;
        unsigned char digest[MD5_DIGEST_LENGTH];
        MD5Init(&ctx);
        MD5Update(&ctx, (const unsigned char *)name, len);
        MD5Update(&ctx, (const unsigned char *)suffix, n);
        MD5Final(digest, &ctx);
        for (int x = 0; x < KETAMA_POINTS_PER_HASH; x++)
            out[(size_t)k * KETAMA_POINTS_PER_HASH + (size_t)x] = le32(digest + 4 * x);
    }
}

uint32_t chring__ketama_hash(const void *key, size_t len)
{
    /* libhashkit's hashkit_md5(): the first digest word, assembled little-endian. */
    MD5_CTX ctx;
    unsigned char digest[MD5_DIGEST_LENGTH];
    MD5Init(&ctx);
    MD5Update(&ctx, (const unsigned char *)key, len);
    MD5Final(digest, &ctx);
    return le32(digest);
}

/* ------------------------------------------------------------------------------------------- *
 * nginx
 * ------------------------------------------------------------------------------------------- */

/* Splits a server address as nginx does before hashing it: "unix:" (any case) makes the rest the
 * host with no port; otherwise the text after the last ':' is the port if it is all digits
 * (possibly none: "host:" has an empty port), else there is no port and the whole name is the
 * host.  "[::1]:8080" splits at the last colon; "a:b:c" has no port. */
static void nginx_split(const char *name, size_t len, const char **host, size_t *host_len,
                        const char **port, size_t *port_len)
{
    static const char unix_prefix[] = "unix:";
    if (len >= 5) {
        size_t i = 0;
        while (i < 5) {
            char c = name[i];
            if (c >= 'A' && c <= 'Z')
                c = (char)(c - 'A' + 'a');
            if (c != unix_prefix[i])
                break;
            i++;
        }
        if (i == 5) {
            *host = name + 5;
            *host_len = len - 5;
            *port = NULL;
            *port_len = 0;
            return;
        }
    }
    for (size_t j = 0; j < len; j++) {
        char c = name[len - j - 1];
        if (c == ':') {
            *host = name;
            *host_len = len - j - 1;
            *port = name + len - j;
            *port_len = j;
            return;
        }
        if (c < '0' || c > '9')
            break;
    }
    *host = name;
    *host_len = len;
    *port = NULL;
    *port_len = 0;
}

/* zlib's crc32() takes a uInt length; names are at most 255 bytes, but stay correct for any
 * length by feeding it in pieces. */
static uLong crc32_update(uLong crc, const void *data, size_t len)
{
    const Bytef *p = (const Bytef *)data;
    while (len > 0) {
        uInt piece = len > 0x40000000u ? 0x40000000u : (uInt)len;
        crc = crc32(crc, p, piece);
        p += piece;
        len -= piece;
    }
    return crc;
}

void chring__nginx_points(const char *name, size_t len, uint32_t npoints, uint32_t *out)
{
    const char *host, *port;
    size_t host_len, port_len;
    nginx_split(name, len, &host, &host_len, &port, &port_len);

    /* nginx hashes crc32(HOST "\0" PORT PREV) where PREV is the previous point as 4 bytes in
     * memory order on a little-endian machine (and assembled little-endian on a big-endian one),
     * starting from 0.  zlib's crc32() continues a finished CRC, so the common prefix is hashed
     * once and every point continues from it. */
    static const unsigned char nul = 0;
    uLong base = crc32(0L, Z_NULL, 0);
    base = crc32_update(base, host, host_len);
    base = crc32_update(base, &nul, 1);
    if (port_len > 0)
        base = crc32_update(base, port, port_len);

    uint32_t prev = 0;
    for (uint32_t k = 0; k < npoints; k++) {
        unsigned char prev_bytes[4] = {
            (unsigned char)(prev & 0xff), (unsigned char)(prev >> 8 & 0xff),
            (unsigned char)(prev >> 16 & 0xff), (unsigned char)(prev >> 24)};
        uint32_t point = (uint32_t)crc32_update(base, prev_bytes, sizeof prev_bytes);
        out[k] = point;
        prev = point;
    }
}

uint32_t chring__nginx_hash(const void *key, size_t len)
{
    /* ngx_crc32_long(): the standard CRC-32 of the key bytes. */
    return (uint32_t)crc32_update(crc32(0L, Z_NULL, 0), key, len);
}
