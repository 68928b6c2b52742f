/* The arena allocator core: two-level segregated fit (TLSF) over a region
 * the caller owns, addressed only by offsets from `base`: init, allocation,
 * free, the lock-free reference check and growth. The bytes, the size
 * classes and the free-list helpers are in arena-internal.h; the bodies of
 * the allocation and the free, inline for the segment's hot path, in
 * arena-inline.h; the heap walk, check, rebuild and statistics in
 * arena-walk.c.
 *
 * Every call leaves the invariants of arena-internal.h true when it
 * returns, and validates everything it will write before its first store,
 * so a bad offset or damaged bytes give SHMOBJ_ECORRUPT and never damage
 * the heap further.
 *
 * Crash windows. Every change of the block chain is committed by one
 * aligned 8-byte store to a size word, made only after every header it
 * exposes has been written; a process killed between two stores leaves one
 * of these states, each of which rebuild() repairs by a walk of the size
 * chain (it trusts sizes and USED bits, recomputes everything else):
 *  - free lists or bitmaps half-updated (a block unlinked, not relinked) ->
 *    lists and bitmaps are rebuilt from the walk;
 *  - prev_size or PREV_FREE not yet updated after a split or merge ->
 *    recomputed;
 *  - a freed block not yet merged with a free neighbour -> re-merged;
 *  - a split whose new headers were written but not yet committed -> the
 *    old block is still whole, the stray headers are payload bytes;
 *  - grow() killed after turning the old sentinel into a block but before
 *    publishing heap_end -> heap_end is taken from the new sentinel.
 * rebuild() writes nothing unless a read-only walk first finds the size
 * chain intact, so on a heap damaged some other way it fails with
 * SHMOBJ_ECORRUPT and leaves the bytes as they were. A block that alloc()
 * marked used but never returned to its caller is lost (it stays
 * allocated); nothing committed before the kill is.
 */
#include "arena-inline.h"

#include <string.h>

/* ---- API ------------------------------------------------------------------ */

uint64_t shmobj__arena_control_size(void)
{
    return sizeof(struct arena_ctl);
}

int shmobj__arena_init(uint8_t *base, uint64_t mapped, uint64_t arena_off,
                       uint64_t heap_end)
{
    if (base == NULL || (arena_off & 15) != 0 || heap_end > mapped ||
        heap_end >= OFF_LIMIT ||
        !shmobj__range_ok(arena_off, sizeof(struct arena_ctl), mapped))
        return SHMOBJ_EINVAL;
    uint64_t hs = heap_start_for(arena_off);
    uint64_t he = heap_end & ~UINT64_C(15);
    if (he < hs || he - hs < MIN_BLOCK + HDR)
        return SHMOBJ_EINVAL;

    struct arena_ctl *c = (struct arena_ctl *)(void *)(base + arena_off);
    __atomic_store_n(&c->magic, 0, __ATOMIC_RELAXED);
    memset(&c->fl_bitmap, 0,
           sizeof(*c) - offsetof(struct arena_ctl, fl_bitmap));
    c->heap_start = hs;
    c->heap_end = he;

    uint64_t size = he - HDR - hs;
    st(base, PREV(hs), 0);
    st(base, WORD(hs), w_make(size, 0, 0));
    st(base, PREV(he - HDR), size);
    st(base, WORD(he - HDR), w_make(0, F_USED | F_PREV_FREE, 0));
    int rc = list_insert(base, c, hs, he, hs, size);
    if (rc != 0)
        return rc;
    /* Publish last: a reader never sees a half-built arena as valid. */
    __atomic_store_n(&c->magic, ARENA_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

int shmobj__arena_alloc(uint8_t *base, uint64_t mapped, uint64_t arena_off,
                        uint64_t size, uint64_t align, uint64_t *off,
                        uint16_t *gen)
{
    return shmobj__arena_alloc_inline(base, mapped, arena_off, size, align,
                                      off, gen);
}

int shmobj__arena_free(uint8_t *base, uint64_t mapped, uint64_t arena_off,
                       uint64_t off, uint16_t gen)
{
    return shmobj__arena_free_inline(base, mapped, arena_off, off, gen);
}

int shmobj__arena_check_ref(const uint8_t *base, uint64_t mapped,
                            uint64_t arena_off, uint64_t off, uint16_t gen,
                            uint64_t *usable)
{
    struct arena_ctl *c;
    uint64_t hs, he, h, w;
    int rc = used_block(base, mapped, arena_off, off, gen, __ATOMIC_ACQUIRE,
                        &c, &hs, &he, &h, &w);
    if (rc != 0)
        return rc;
    uint64_t s = w_size(w);
    if (s >= MIN_BLOCK && s <= he - HDR - h &&
        __atomic_load_n((const uint64_t *)(const void *)(base + PREV(h + s)),
                        __ATOMIC_ACQUIRE) == s) {
        if (usable != NULL)
            *usable = s - HDR;
        return 0;
    }
    /* Inconsistent. If the header changed meanwhile, a lock holder freed
     * the block while we looked (a stale reference, not a damaged heap);
     * the acquire loads keep this re-read after the boundary-tag read. */
    return ld(base, WORD(h)) != w ? SHMOBJ_ESTALE : SHMOBJ_ECORRUPT;
}

int shmobj__arena_grow(uint8_t *base, uint64_t mapped, uint64_t arena_off,
                       uint64_t new_heap_end)
{
    struct arena_ctl *c;
    uint64_t hs, he;
    int rc = ctl_get(base, mapped, arena_off, &c, &hs, &he);
    if (rc != 0)
        return rc;
    uint64_t ne = new_heap_end & ~UINT64_C(15);
    if (ne == he)
        return 0;
    if (ne < he || new_heap_end > mapped || ne >= OFF_LIMIT ||
        ne - he < MIN_BLOCK)
        return SHMOBJ_EINVAL;
    uint64_t d = ne - he;
    uint64_t os = he - HDR; /* old sentinel, becomes a free block */
    uint64_t ws = ld(base, WORD(os));
    if (w_size(ws) != 0 || (ws & F_USED) == 0)
        return SHMOBJ_ECORRUPT;
    uint64_t last = 0, ls = 0, wl = 0;
    if ((ws & F_PREV_FREE) != 0 &&
        prev_free(base, os, hs, &last, &ls, &wl) != 0)
        return SHMOBJ_ECORRUPT;
    uint64_t nsent = ne - HDR;
    st(base, PREV(nsent), d);
    st(base, WORD(nsent), w_make(0, F_USED | F_PREV_FREE, 0));
    st_commit(base, WORD(os), w_make(d, ws & F_PREV_FREE, (uint16_t)(w_gen(ws) + 1)));
    __atomic_store_n(&c->heap_end, ne, __ATOMIC_RELEASE); /* commit */
    he = ne;
    if (last != 0) {
        rc = list_remove(base, c, hs, he, last, ls);
        if (rc != 0)
            return rc;
        st_commit(base, WORD(last), w_make(ls + d, wl & F_PREV_FREE, w_gen(wl)));
        st(base, PREV(nsent), ls + d);
        return list_insert(base, c, hs, he, last, ls + d);
    }
    return list_insert(base, c, hs, he, os, d);
}
