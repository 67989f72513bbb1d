/* The library's allocator: malloc/free unless the application installs its own.
 * SPDX-License-Identifier: MIT */
#include "internal.h"

#include <stdlib.h>
#include <sys/mman.h>

static void *default_alloc(size_t size, void *ctx)
{
    (void)ctx;
    return malloc(size);
}

static void default_free(void *p, void *ctx)
{
    (void)ctx;
    free(p);
}

static chring_allocator_t allocator = {default_alloc, default_free, NULL};

int chring_set_allocator(const chring_allocator_t *a)
{
    if (a == NULL || (a->alloc == NULL && a->free == NULL)) {
        allocator.alloc = default_alloc;
        allocator.free = default_free;
        allocator.ctx = NULL;
        return 0;
    }
    if (a->alloc == NULL || a->free == NULL)
        return -EINVAL;
    allocator = *a;
    return 0;
}

void *chring__alloc(size_t size)
{
    return allocator.alloc(size ? size : 1, allocator.ctx);
}

void *chring__calloc(size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    void *p = chring__alloc(n * size);
    if (p != NULL)
        memset(p, 0, n * size);
    return p;
}

void chring__free(void *p)
{
    if (p != NULL)
        allocator.free(p, allocator.ctx);
}

/* Snapshot blocks of CHRING_MAP_MIN bytes and more, with the default allocator: mapped and
 * unmapped by the library itself, so that a block freed (by the trimmer, at rest) goes back to
 * the kernel at once.  Through malloc such a block stays in the process: glibc serves requests
 * below its mmap threshold (raised up to 32 MiB by every mapped chunk it frees) from its heap,
 * and keeps freed heap memory resident.  Measured (docs/bench.md §11e): the resident set a
 * second after three bursts of 20 publishes was 84-177 MB at 100,000 x 16 and 65-158 MB at
 * 10,000 x 160 where the library held 46 and 34.  With an installed allocator (a test hook) every
 * block goes through it; an allocator is installed while no ring exists (chring.h), so a block
 * is freed the way it was allocated.  Under AddressSanitizer blocks stay malloc's, whose
 * reports of a use after free are the sanitizer's. */
#define CHRING_MAP_MIN ((size_t)8 << 20)

/* Whether blocks are mapped at all: yes unless the environment's CHRING_MAP_BLOCKS is "0" (read
 * once), which leaves them to malloc as with an installed allocator (tests that count the heap
 * with mallinfo2, a comparison of the two). */
static bool map_blocks(void)
{
    static int mode; /* 0: not read yet; 1: no; 2: yes */
    int m = __atomic_load_n(&mode, __ATOMIC_RELAXED);
    if (m == 0) {
        const char *env = getenv("CHRING_MAP_BLOCKS");
        m = env != NULL && strcmp(env, "0") == 0 ? 1 : 2;
        __atomic_store_n(&mode, m, __ATOMIC_RELAXED);
    }
    return m == 2;
}

static bool block_mapped(size_t size)
{
#ifdef CHRING_ASAN
    (void)size;
    return false;
#else
    return size >= CHRING_MAP_MIN && allocator.alloc == default_alloc && map_blocks();
#endif
}

void *chring__alloc_block(size_t size)
{
    if (!block_mapped(size))
        return chring__alloc(size);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void chring__free_block(void *p, size_t size)
{
    if (p == NULL)
        return;
    if (block_mapped(size))
        (void)munmap(p, size);
    else
        chring__free(p);
}

/* Over-allocates and keeps the allocator's pointer just below the aligned block, so a custom
 * allocator needs no aligned variant. */
static void *alloc_aligned_to(size_t size, size_t align)
{
    if (size > SIZE_MAX - align - sizeof(void *))
        return NULL;
    char *raw = chring__alloc(size + align - 1 + sizeof(void *));
    if (raw == NULL)
        return NULL;
    uintptr_t at = ((uintptr_t)(raw + sizeof(void *)) + align - 1) & ~(uintptr_t)(align - 1);
    ((void **)at)[-1] = raw;
    return (void *)at;
}

void *chring__alloc_aligned(size_t size)
{
    return alloc_aligned_to(size, CHRING_DESTRUCTIVE);
}

/* Members (member.c): a cache line is what their hot words need, and half the slack of
 * CHRING_DESTRUCTIVE (docs/design.md §4, "What a member costs"). */
void *chring__alloc_line(size_t size)
{
    return alloc_aligned_to(size, CHRING_CACHELINE);
}

void chring__free_aligned(void *p)
{
    if (p != NULL)
        chring__free(((void **)p)[-1]);
}
