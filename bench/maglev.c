/* chring benchmark harness: Maglev hashing (see maglev.h for the paper and the method).
 *
 * SPDX-License-Identifier: MIT
 */
#include "maglev.h"

#include <stdlib.h>
#include <string.h>

#include "chring.h"
#include "common.h"

int maglev_is_prime(uint64_t x)
{
    if (x < 2)
        return 0;
    if (x % 2 == 0)
        return x == 2;
    for (uint64_t d = 3; d * d <= x; d += 2)
        if (x % d == 0)
            return 0;
    return 1;
}

uint64_t maglev_scaled_size(size_t n)
{
    uint64_t want = (uint64_t)n * 100;
    if (want <= MAGLEV_ENVOY_DEFAULT)
        return MAGLEV_ENVOY_DEFAULT;
    if (want >= MAGLEV_ENVOY_MAX)
        return MAGLEV_ENVOY_MAX;
    while (!maglev_is_prime(want))
        want++;
    return want;
}

static int by_name(const void *a, const void *b)
{
    const bench_backend_t *x = *(const bench_backend_t *const *)a;
    const bench_backend_t *y = *(const bench_backend_t *const *)b;
    return strcmp(x->name, y->name);
}

/* A backend's walk along its preference list: the next slot to try and the step. */
typedef struct walk {
    uint64_t slot;
    uint64_t skip;
} walk_t;

void maglev_build(maglev_t *m, const bench_backend_t *const *backends, size_t n, uint64_t size)
{
    const bench_backend_t **sorted = malloc(n * sizeof *sorted);
    walk_t *walks = malloc(n * sizeof *walks);
    uint32_t *slot_owner = malloc(size * sizeof *slot_owner);
    uint64_t filled = 0;

    bench_require(n >= 1 && size > n && maglev_is_prime(size), "maglev: bad size %llu for %zu",
                  (unsigned long long)size, n);
    bench_require(sorted && walks && slot_owner, "out of memory");
    memcpy(sorted, backends, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_name);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(sorted[i]->name);
        /* Two different hashes of the name (the paper uses two unrelated functions; Envoy takes
         * xxHash64 with seeds 0 and 1): hash64, and FNV-1a 64 with its state offset, then Mix64. */
        uint64_t h1 = chring_hash64(sorted[i]->name, len);
        uint64_t h2 = chring_mix64(chring_fnv1a64(sorted[i]->name, len) ^ 0x9e3779b97f4a7c15ull);
        walks[i].slot = h1 % size;
        walks[i].skip = h2 % (size - 1) + 1;
    }
    memset(slot_owner, 0xff, size * sizeof *slot_owner);
    /* Listing 1: round-robin by preference until every slot is taken. */
    while (filled < size)
        for (size_t i = 0; i < n && filled < size; i++) {
            walk_t *w = &walks[i];
            while (slot_owner[w->slot] != UINT32_MAX) {
                w->slot += w->skip;
                if (w->slot >= size)
                    w->slot -= size;
            }
            slot_owner[w->slot] = (uint32_t)i;
            filled++;
        }
    m->table = malloc(size * sizeof *m->table);
    bench_require(m->table != NULL, "out of memory");
    for (uint64_t s = 0; s < size; s++)
        m->table[s] = sorted[slot_owner[s]];
    m->size = size;
    free(slot_owner);
    free(walks);
    free(sorted);
}

void maglev_free(maglev_t *m)
{
    free(m->table);
    m->table = NULL;
    m->size = 0;
}

void maglev_slot_counts(const maglev_t *m, size_t n, uint64_t *min, uint64_t *max)
{
    uint64_t *count = calloc(n, sizeof *count);
    bench_require(count != NULL, "out of memory");
    for (uint64_t s = 0; s < m->size; s++) {
        bench_require(m->table[s] != NULL && m->table[s]->id < n, "maglev: slot %llu unowned",
                      (unsigned long long)s);
        count[m->table[s]->id]++;
    }
    *min = UINT64_MAX;
    *max = 0;
    for (size_t i = 0; i < n; i++) {
        if (count[i] < *min)
            *min = count[i];
        if (count[i] > *max)
            *max = count[i];
    }
    free(count);
}
