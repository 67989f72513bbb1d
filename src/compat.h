/* Point and key hashing of the compatibility profiles (docs/design.md §2.1): ketama and nginx
 * (compat.c), haproxy (compat_haproxy.c), envoy (compat_envoy.c) and varnish
 * (compat_varnish.c).  Internal to the library; pure functions, any thread. */
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

/* haproxy: parses a member name as a HAProxy server id (decimal, no leading zero, 1 .. 2^31 - 1).
 * Returns 0 and *id, or -EINVAL. */
int chring__haproxy_id(const char *name, size_t len, uint32_t *id);
/* haproxy: HAProxy's full_hash() 32-bit avalanche. */
uint32_t chring__haproxy_avalanche(uint32_t a);
/* haproxy: the sdbm hash of the key bytes, modulo 2^32. */
uint32_t chring__haproxy_sdbm(const void *key, size_t len);
/* haproxy: a key's position for plain `hash-type consistent`: avalanche(sdbm(key)). */
uint32_t chring__haproxy_hash(const void *key, size_t len);
/* haproxy: 16 nodes per unit of weight; a weight above 256 returns more than CHRING_POINTS_MAX. */
uint64_t chring__haproxy_points(uint32_t weight);
/* haproxy: node k (k < count) of the server whose id is the name at avalanche(id * 4096 + k),
 * modulo 2^32. */
void chring__haproxy_positions(const char *name, size_t len, uint64_t count, uint64_t *out);

/* envoy: the entries of each of n hosts (in the ring's host order, weights[j] >= 1) for Envoy's
 * minimum_ring_size ring_min and maximum_ring_size ring_max, into out[0 .. n-1]. */
void chring__envoy_counts(uint32_t ring_min, uint32_t ring_max, const uint32_t *weights, size_t n,
                          uint32_t *out);
/* envoy: an upper bound of one host's entries, for the limit checks made before a build. */
uint64_t chring__envoy_points_bound(uint32_t ring_min, uint32_t ring_max, uint32_t weight,
                                    uint64_t total_weight);
/* envoy: entry i (i < count) of host `name` at XXH64("<name>_<i>", seed 0). */
void chring__envoy_positions(const char *name, size_t len, uint64_t count, uint64_t *out);
/* envoy: a key's position, XXH64(key, seed 0). */
uint64_t chring__envoy_hash(const void *key, size_t len);

/* varnish: a key's position, the little-endian u32 of the last 4 bytes of SHA-256(key). */
uint32_t chring__varnish_hash(const void *key, size_t len);
/* varnish: replica j (j < count) of the backend whose identity is `ident` at
 * chring__varnish_hash(ident followed by j in decimal). */
void chring__varnish_points(const char *ident, size_t len, uint64_t count, uint64_t *out);

#endif
