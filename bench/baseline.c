/* chring benchmark harness: the baselines' searches.
 *
 * SPDX-License-Identifier: MIT
 *
 * Both searches are kept out of line (noinline) so that their compiled code can be checked with
 * `objdump -d --no-show-raw-insn bench/chring-bench-lookup` (functions base_search_branchy and
 * base_search_branchless); see the notes above each one for what gcc 12 -O3 produced.
 */
#include "baseline.h"

#include <stdlib.h>

#include "common.h"

void base_ring_copy(base_ring_t *b, const chring_snap_t *s)
{
    size_t n = chring_snap_points(s);
    bench_require(n > 0, "base_ring_copy: empty snapshot");
    b->pos = malloc(n * sizeof *b->pos);
    b->owner = malloc(n * sizeof *b->owner);
    bench_require(b->pos && b->owner, "out of memory");
    b->n = n;
    for (size_t i = 0; i < n; i++) {
        int err = chring_snap_point(s, i, &b->pos[i], &b->owner[i]);
        bench_require(err == 0, "chring_snap_point(%zu): %s", i, chring_strerror(err));
        bench_require(i == 0 || b->pos[i - 1] <= b->pos[i], "snapshot points not sorted at %zu", i);
    }
}

void base_ring_free(base_ring_t *b)
{
    free(b->pos);
    free(b->owner);
    b->pos = NULL;
    b->owner = NULL;
    b->n = 0;
}

/* Checked with objdump -d (gcc 12.2, -O3, x86-64): the loop compiles to
 *     cmp %rdx,(%rdi,%rax,8); jb ...
 * a conditional jump on the loaded position, the classic search that mispredicts about half of
 * its steps.  (Had a compiler turned it into cmov, this baseline would be faster than what users of
 * a typical lower_bound get.) */
__attribute__((noinline)) size_t base_search_branchy(const uint64_t *pos, size_t n, uint64_t h)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pos[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Branchless lower bound.  The plain ternary form
 *     base = (base[half - 1] < h) ? base + half : base;
 * is compiled by gcc 12.2 -O3 into "cmp; jae; add" (a data-dependent branch, checked with
 * objdump -d), so the mask form below is used.  objdump -d of this function shows each step as
 *     cmp %rdx,-0x8(%r8,%rax,8); sbb %rcx,%rcx; sub; and %rax,%rcx; lea (%r8,%rcx,8),%r8
 * and the final step as cmp; adc: no conditional jump except the loop's exit test "cmp $0x1,%rsi;
 * ja", which depends only on n and is predicted. */
__attribute__((noinline)) size_t base_search_branchless(const uint64_t *pos, size_t n, uint64_t h)
{
    const uint64_t *base = pos;
    size_t len = n;
    while (len > 1) {
        size_t half = len >> 1;
        size_t mask = (size_t)0 - (size_t)(base[half - 1] < h);
        base += half & mask;
        len -= half;
    }
    return (size_t)(base - pos) + (size_t)(*base < h);
}
