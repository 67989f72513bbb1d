/* The library's allocator: malloc/free unless the application installs its own.
 * SPDX-License-Identifier: MIT */
#include "internal.h"

#include <stdlib.h>

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
