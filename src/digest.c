/* Agreement, observable: a 64-bit digest of a snapshot's placement (docs/design.md §3).
 * SPDX-License-Identifier: MIT
 *
 * The digest covers exactly what places keys: the profile (its name), its parameters that the
 * profile uses (hash width; vnodes where the profile takes it; envoy's ring size bounds) and
 * every point in ring order as (position in the profile's width, member name).  Health, loads,
 * udata, versions and the order members joined in do not enter it (a ring is a function of its
 * membership, fnv16's documented join-order rule aside, whose points do show it).  Two
 * snapshots that place every key alike list the same points, so they have the same digest in any
 * process on any machine; any placement difference changes a point and so the digest, but for a
 * 2^-64 chance.
 *
 * Encoding, so that another implementation can reproduce it: the bytes
 *   "chring-digest-1" NUL, profile name NUL, bits (1 byte), vnodes (4 bytes LE, 0 where the profile
 *   ignores it), ring_size_min and ring_size_max (4 bytes LE each, 0 but for envoy), then per
 *   point: position (8 bytes LE), name length (1 byte), name bytes
 * cut into 4096-byte blocks (the last one shorter, possibly empty only when the whole is), and
 * d = 0; for each block d = XXH3_64bits_withSeed(block, length, d).  No allocation: the blocks
 * are built in a stack buffer. */
#include "internal.h"

#include <xxhash.h>

#define BLOCK 4096

struct digest {
    unsigned char buf[BLOCK];
    size_t used;
    uint64_t d;
};

static void put(struct digest *g, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len > 0) {
        size_t room = BLOCK - g->used;
        size_t n = len < room ? len : room;
        memcpy(g->buf + g->used, p, n);
        g->used += n;
        p += n;
        len -= n;
        if (g->used == BLOCK) {
            g->d = XXH3_64bits_withSeed(g->buf, BLOCK, g->d);
            g->used = 0;
        }
    }
}

static void put_le(struct digest *g, uint64_t v, unsigned bytes)
{
    unsigned char b[8];
    for (unsigned k = 0; k < bytes; k++)
        b[k] = (unsigned char)(v >> (8 * k));
    put(g, b, bytes);
}

uint64_t chring_snap_digest(const chring_snap_t *s)
{
    if (s == NULL)
        return 0;
    struct digest g;
    g.used = 0;
    g.d = 0;
    static const char tag[] = "chring-digest-1";
    put(&g, tag, sizeof tag); /* with its NUL */
    const char *name = s->prof.desc->name;
    put(&g, name, strlen(name) + 1);
    put_le(&g, s->prof.bits, 1);
    put_le(&g, s->prof.desc->uses_vnodes ? s->prof.vnodes : 0, 4);
    bool envoy = s->prof.id == CHRING_PROFILE_ENVOY;
    put_le(&g, envoy ? s->prof.ring_size_min : 0, 4);
    put_le(&g, envoy ? s->prof.ring_size_max : 0, 4);
    for (size_t i = 0; i < s->npoints; i++) {
        const chring_member_t *m = s->slot_member[chring__owner(s, i)];
        put_le(&g, chring__pos(s, i) >> s->prof.shift, 8);
        put_le(&g, m->name_len, 1);
        put(&g, m->name, m->name_len);
    }
    if (g.used > 0)
        g.d = XXH3_64bits_withSeed(g.buf, g.used, g.d);
    return g.d;
}
