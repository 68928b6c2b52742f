/* A shmobj__space over a private buffer, allocating with the real arena
 * core (lib/arena): the object layer's tests and fuzz target run without a
 * segment (doc/architecture.md: object never calls the operating system),
 * yet exercise the same allocator, generations and stale-reference checks
 * as a segment. One thread only: there is no lock. */
#include "space-heap.h"

#include <stdlib.h>
#include <string.h>

#include "arena.h"

#define ARENA_OFF 64 /* offset 0 stays unused: 0 is the null reference */

struct heap {
    struct shmobj__space sp;
    uint64_t size;
    uint64_t live;
    _Atomic uint64_t no_watch; /* space.watch_used: nobody watches */
};

static int h_alloc(struct shmobj__space *sp, uint64_t size, uint64_t align,
                   shmobj__ref *out)
{
    struct heap *h = (struct heap *)sp;
    uint64_t off;
    uint16_t gen;
    int rc = shmobj__arena_alloc(sp->base, h->size, ARENA_OFF, size, align,
                                 &off, &gen);
    if (rc != 0)
        return rc;
    h->live++;
    *out = shmobj__ref_make(off, gen);
    return 0;
}

static int h_check(struct shmobj__space *sp, shmobj__ref ref, uint64_t *usable)
{
    struct heap *h = (struct heap *)sp;
    return shmobj__arena_check_ref(sp->base, h->size, ARENA_OFF,
                                   shmobj__ref_off(ref), shmobj__ref_gen(ref),
                                   usable);
}

static int h_free(struct shmobj__space *sp, shmobj__ref ref)
{
    struct heap *h = (struct heap *)sp;
    int rc = shmobj__arena_free(sp->base, h->size, ARENA_OFF,
                                shmobj__ref_off(ref), shmobj__ref_gen(ref));
    if (rc == 0)
        h->live--;
    return rc;
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
    h->sp.watch_used = &h->no_watch;
    h->size = size;
    if (shmobj__arena_init(h->sp.base, size, ARENA_OFF, size) != 0) {
        free(h->sp.base);
        free(h);
        return NULL;
    }
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

int space_heap_check(struct shmobj__space *sp)
{
    uint64_t bad;
    return shmobj__arena_check(sp->base, ((struct heap *)sp)->size, ARENA_OFF, &bad);
}
