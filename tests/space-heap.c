/* A shmobj__space over a private buffer with a bump allocator: each block
 * has a 16-byte header (magic, generation, live flag, size) just before its
 * payload, so check/free detect stale and bogus references like the arena
 * does. Blocks are never reused; that is enough for the object layer's
 * tests, which only need generation and liveness checks. */
#include "space-heap.h"

#include <stdlib.h>
#include <string.h>

#define HEAP_MAGIC UINT32_C(0x50414548)

struct blkhdr {
    uint32_t magic;
    uint16_t gen;
    uint16_t live;
    uint64_t size;
};

struct heap {
    struct shmobj__space sp;
    uint64_t size;
    uint64_t top;
    uint64_t live;
    uint16_t next_gen;
};

static struct blkhdr *hdr_of(struct shmobj__space *sp, uint64_t off)
{
    struct heap *h = (struct heap *)sp;
    if (off < 64 || off > h->size || (off & 15) != 0)
        return NULL;
    struct blkhdr *b = (struct blkhdr *)(sp->base + off - 16);
    return b->magic == HEAP_MAGIC ? b : NULL;
}

static int h_alloc(struct shmobj__space *sp, uint64_t size, uint64_t align,
                   shmobj__ref *out)
{
    struct heap *h = (struct heap *)sp;
    uint64_t pay;
    if (align < 16)
        align = 16;
    if (!shmobj__align_up(h->top + 16, align, &pay) || size > h->size ||
        pay > h->size - size)
        return SHMOBJ_ENOMEM;
    struct blkhdr *b = (struct blkhdr *)(sp->base + pay - 16);
    if (++h->next_gen == 0)
        h->next_gen = 1;
    b->magic = HEAP_MAGIC;
    b->gen = h->next_gen;
    b->live = 1;
    b->size = size;
    shmobj__align_up(pay + size, 16, &h->top);
    h->live++;
    *out = shmobj__ref_make(pay, b->gen);
    return 0;
}

static int h_check(struct shmobj__space *sp, shmobj__ref ref, uint64_t *usable)
{
    struct blkhdr *b = hdr_of(sp, shmobj__ref_off(ref));
    if (b == NULL || b->size > ((struct heap *)sp)->size)
        return SHMOBJ_ECORRUPT;
    if (!b->live || b->gen != shmobj__ref_gen(ref))
        return SHMOBJ_ESTALE;
    if (!shmobj__range_ok(shmobj__ref_off(ref), b->size, ((struct heap *)sp)->size))
        return SHMOBJ_ECORRUPT;
    *usable = b->size;
    return 0;
}

static int h_free(struct shmobj__space *sp, shmobj__ref ref)
{
    uint64_t usable;
    int rc = h_check(sp, ref, &usable);
    if (rc != 0)
        return rc;
    struct blkhdr *b = hdr_of(sp, shmobj__ref_off(ref));
    b->live = 0;
    b->gen++;
    ((struct heap *)sp)->live--;
    return 0;
}

static const struct shmobj__space_ops heap_ops = {
    .extend = NULL, .alloc = h_alloc, .free = h_free, .check = h_check,
};

struct shmobj__space *space_heap_create(uint64_t size)
{
    struct heap *h = calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    size = (size + 4095) & ~(uint64_t)4095;
    h->sp.base = aligned_alloc(4096, size);
    if (h->sp.base == NULL) {
        free(h);
        return NULL;
    }
    memset(h->sp.base, 0, size);
    atomic_init(&h->sp.mapped, size);
    h->sp.ops = &heap_ops;
    h->size = size;
    h->top = 64; /* offset 0 is the null reference */
    return &h->sp;
}

void space_heap_destroy(struct shmobj__space *sp)
{
    if (sp == NULL)
        return;
    free(sp->base);
    free(sp);
}

uint64_t space_heap_live(struct shmobj__space *sp)
{
    return ((struct heap *)sp)->live;
}
