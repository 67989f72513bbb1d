/* Envoy's `ring_hash` load balancer with `hash_function: XX_HASH` (docs/design.md §2.1,
 * docs/compat.md): how many entries each host gets, and their positions.
 *
 * SPDX-License-Identifier: MIT
 *
 * Envoy normalises the host weights (w / sum, in double), scales them so that the lightest host
 * gets a whole number of entries at least minimum_ring_size * its share (capped by
 * maximum_ring_size), and hands out entries by running sums in host order: host j's entries are
 * those that bring the integer count of entries made so far up to the running target
 * scale * (nw_0 + ... + nw_j).  Every double step below is the one Envoy takes, in its order, so
 * the counts agree to the last entry (checked against Envoy's own unit tests, tests/compat).
 * Entry i of host `name` is XXH64("<name>_<i>", seed 0); XXH64 comes from libxxhash. */
#include "internal.h"
#include "compat.h"

#include <math.h>
#include <xxhash.h>

void chring__envoy_counts(uint32_t ring_min, uint32_t ring_max, const uint32_t *weights, size_t n,
                          uint32_t *out)
{
    if (n == 0)
        return;
    uint64_t sum = 0;
    for (size_t j = 0; j < n; j++)
        sum += weights[j];
    /* The normalised weights and their minimum (Envoy starts the minimum at 1.0). */
    double min_nw = 1.0;
    for (size_t j = 0; j < n; j++) {
        double nw = (double)weights[j] * 1.0 / (double)sum;
        if (nw < min_nw)
            min_nw = nw;
    }
    /* std::min(a, b): a unless b < a. */
    double a = ceil(min_nw * (double)ring_min) / min_nw;
    double b = (double)ring_max;
    double scale = b < a ? b : a;

    /* current counts whole entries, so "while (current < target) add one" stops at
     * max(current, ceil(target)). */
    double current = 0.0, target = 0.0;
    for (size_t j = 0; j < n; j++) {
        double nw = (double)weights[j] * 1.0 / (double)sum;
        target += scale * nw;
        double up = ceil(target);
        uint32_t c = 0;
        if (current < up) {
            c = (uint32_t)(up - current);
            current = up;
        }
        out[j] = c;
    }
}

uint64_t chring__envoy_points_bound(uint32_t ring_min, uint32_t ring_max, uint32_t weight,
                                    uint64_t total_weight)
{
    /* scale = min(ceil(min_nw * ring_min) / min_nw, ring_max) is below ring_min + 1 / min_nw, and
     * 1 / min_nw = W / w_min <= W; host j's count is at most ceil(scale * w_j / W) + 1, one more
     * for the rounding of the running sum. */
    if (total_weight == 0)
        return 0;
    double scale = (double)ring_min + (double)total_weight;
    if ((double)ring_max < scale)
        scale = (double)ring_max;
    return (uint64_t)ceil(scale * (double)weight / (double)total_weight) + 2;
}

void chring__envoy_positions(const char *name, size_t len, uint64_t count, uint64_t *out)
{
    char label[CHRING_NAME_MAX + 24];
    memcpy(label, name, len);
    label[len] = '_';
    for (uint64_t i = 0; i < count; i++) {
        size_t n = len + 1 + chring__put_decimal(label + len + 1, (uint32_t)i);
        out[i] = XXH64(label, n, 0);
    }
}

uint64_t chring__envoy_hash(const void *key, size_t len)
{
    return XXH64(key, len, 0);
}
