/* Sorting points: a snapshot's (position, owner) pairs in ring order, the input of its index
 * (index.c).
 * SPDX-License-Identifier: MIT */
#include "internal.h"

/* Stable LSD radix sort of (pos, owner) pairs by pos, 8 bits a pass; passes whose byte is the
 * same for every key are skipped (the low 32 bits of a 32-bit profile's shifted positions, when
 * they are sorted as 64-bit keys).  Stability keeps the generation order (member rank) among
 * equal positions, which is the tie rule of docs/design.md §1.  The result ends in (pos, owner);
 * (tpos, towner) is scratch of the same size.  One body for the two widths of positions
 * (docs/design.md §4.1, "Points"): KEY is uint64_t or uint32_t. */
#define SORT_POINTS(KEY, n, pos, owner, tpos, towner)                                              \
    do {                                                                                           \
        KEY *src_p = (pos), *dst_p = (tpos);                                                       \
        uint32_t *src_o = (owner), *dst_o = (towner);                                              \
        for (unsigned shift = 0; shift < 8 * sizeof(KEY); shift += 8) {                            \
            size_t count[256] = {0};                                                               \
            for (size_t i = 0; i < (n); i++)                                                       \
                count[(src_p[i] >> shift) & 0xff]++;                                               \
            bool skip = false;                                                                     \
            for (unsigned b = 0; b < 256; b++)                                                     \
                if (count[b] == (n))                                                               \
                    skip = true;                                                                   \
            if (skip)                                                                              \
                continue;                                                                          \
            size_t sum = 0;                                                                        \
            for (unsigned b = 0; b < 256; b++) {                                                   \
                size_t c = count[b];                                                               \
                count[b] = sum;                                                                    \
                sum += c;                                                                          \
            }                                                                                      \
            for (size_t i = 0; i < (n); i++) {                                                     \
                size_t at = count[(src_p[i] >> shift) & 0xff]++;                                   \
                dst_p[at] = src_p[i];                                                              \
                dst_o[at] = src_o[i];                                                              \
            }                                                                                      \
            KEY *tp = src_p;                                                                       \
            src_p = dst_p;                                                                         \
            dst_p = tp;                                                                            \
            uint32_t *to = src_o;                                                                  \
            src_o = dst_o;                                                                         \
            dst_o = to;                                                                            \
        }                                                                                          \
        if (src_p != (pos)) {                                                                      \
            memcpy((pos), src_p, (n) * sizeof(KEY));                                               \
            memcpy((owner), src_o, (n) * sizeof *src_o);                                           \
        }                                                                                          \
    } while (0)

void chring__sort_points(size_t n, uint64_t *pos, uint32_t *owner, uint64_t *tpos, uint32_t *towner)
{
    SORT_POINTS(uint64_t, n, pos, owner, tpos, towner);
}

void chring__sort_points32(size_t n, uint32_t *pos, uint32_t *owner, uint32_t *tpos,
                           uint32_t *towner)
{
    SORT_POINTS(uint32_t, n, pos, owner, tpos, towner);
}
