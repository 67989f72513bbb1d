/* chring benchmark harness: Maglev hashing, a baseline a user would pick instead of a ring.
 *
 * SPDX-License-Identifier: MIT
 *
 * Written from the paper: D. E. Eisenbud et al., "Maglev: A Fast and Reliable Software Network
 * Load Balancer", NSDI 2016, section 3.4 (pseudocode listing 1).  Each backend's name gives two
 * hashes, offset = h1 mod M and skip = h2 mod (M - 1) + 1; its preference list is the permutation
 * offset, offset + skip, offset + 2 skip, ... (mod M, M prime so every slot appears once).
 * Backends take turns, in name order, each claiming the next slot of its list that is still free,
 * until the table of M slots is full.  A lookup is one load: table[hash mod M].  Backends are
 * taken in name order, as Envoy does, so that the table depends on the set of names only.
 */
#ifndef CHRING_BENCH_MAGLEV_H
#define CHRING_BENCH_MAGLEV_H

#include <stddef.h>
#include <stdint.h>

/* Envoy's default table size (a prime), and the largest it accepts. */
#define MAGLEV_ENVOY_DEFAULT 65537u
#define MAGLEV_ENVOY_MAX 5000011u

/* A backend as the harness's tables (Maglev, jump hash) know it: its name and a dense id. */
typedef struct bench_backend {
    char name[16];
    unsigned id;
    unsigned pad[3]; /* 32 bytes: one owner per half line, like a small struct a proxy keeps */
} bench_backend_t;

typedef struct maglev {
    const bench_backend_t **table; /* M slots, each the owner of the keys hashing to it */
    uint64_t size;                 /* M, a prime */
} maglev_t;

/* The table size the harness uses for n backends: Envoy's default 65537 while it is at least
 * 100 entries per backend (the paper asks for M much larger than N), otherwise the smallest prime
 * >= 100 n, capped at Envoy's largest table size 5000011. */
uint64_t maglev_scaled_size(size_t n);
/* Whether x is prime (trial division; x < 2^32 here). */
int maglev_is_prime(uint64_t x);

/* Builds the table of `size` slots (a prime > n) over the n backends (n >= 1; any order: the
 * build sorts them by name).  Exits on allocation failure. */
void maglev_build(maglev_t *m, const bench_backend_t *const *backends, size_t n, uint64_t size);
void maglev_free(maglev_t *m);

/* Bytes the lookup structure holds: the table (8 bytes per slot). */
static inline size_t maglev_bytes(const maglev_t *m)
{
    return (size_t)m->size * sizeof *m->table;
}

static inline const bench_backend_t *maglev_lookup(const maglev_t *m, uint64_t h)
{
    return m->table[h % m->size];
}

/* Slots per backend: writes the smallest and the largest count over the n backends (ids 0 ..
 * n - 1 must be the backends' ids).  The paper's property: every backend gets floor(M / n) or
 * ceil(M / n) slots. */
void maglev_slot_counts(const maglev_t *m, size_t n, uint64_t *min, uint64_t *max);

#endif
