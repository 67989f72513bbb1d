/* Point and key hashing of the compatibility profiles (docs/design.md §2.1): ketama and nginx.
 * Internal to the library; pure functions, any thread. */
#ifndef CHRING_COMPAT_H
#define CHRING_COMPAT_H

#include <stddef.h>
#include <stdint.h>

/* ketama: the number of MD5 digests d_j of a member of weight `weight` among `members` members
 * of total weight `total_weight`, in single precision exactly as libmemcached computes it:
 * d_j = floor(pct * 160 / 4 * (float)N + 1e-10f), pct = (float)w_j / (float)W.
 * Each digest gives 4 points. */
uint32_t chring__ketama_digests(uint32_t weight, uint64_t total_weight, size_t members);

/* ketama: writes the 4 * digests point positions of member `name` (len bytes) into out, in point
 * index order: for k = 0 .. digests-1, MD5("<name>-<k>"), then words x = 0..3 (little-endian). */
void chring__ketama_points(const char *name, size_t len, uint32_t digests, uint32_t *out);

/* ketama: a key's position, the first little-endian 32-bit word of MD5(key). */
uint32_t chring__ketama_hash(const void *key, size_t len);

/* nginx: writes the npoints (160 * weight) point positions of the server `name` (len bytes) into
 * out, in chain order: point 0 = crc32(HOST "\0" PORT LE32(0)), point k = crc32(HOST "\0" PORT
 * LE32(point k-1)), HOST/PORT split as docs/design.md §2.1 says. */
void chring__nginx_points(const char *name, size_t len, uint32_t npoints, uint32_t *out);

/* nginx: a key's position, zlib crc32(key). */
uint32_t chring__nginx_hash(const void *key, size_t len);

#endif
