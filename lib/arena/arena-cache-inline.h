/* The arena's side of the processes' allocation caches (the caches
 * themselves live in process memory, lib/segment/seg-cache.h): moving a
 * used block into a cache and back out, without the heap's lock. Only
 * the block's header word and payload change; the block stays used in the
 * chain, so the lock holders' allocations and frees, which never merge a
 * used block, leave it alone but for its PREV_FREE flag
 * (prev_free_mark()). arena-internal.h has the bytes (CACHED, the cached
 * block payload) and the argument why no change of the word is lost.
 * Also here: the carving of a run into cached blocks, under the lock. */
#ifndef SHMOBJ_ARENA_CACHE_INLINE_H
#define SHMOBJ_ARENA_CACHE_INLINE_H

#include "arena-inline.h"
#include "step.h"

/* Move the used block whose payload starts at off, with generation gen,
 * into the allocation cache of the process whose token is `token`, without
 * the lock: one compare-and-swap sets CACHED and bumps the generation as a
 * free does (every reference to the block is stale from here), then the
 * token and CACHE_MAGIC go to its payload, for a repair to judge it by.
 * The swap is what decides between two frees of one block: the loser
 * finds CACHED or another generation and has written nothing.
 * 0 with the block's header offset and new generation; 1 when the block
 * is not of `bsize` bytes (the size the caller chose its place in the
 * cache for) or anything about it or the view looks wrong: the caller
 * then frees it the locked way, which widens the view and gives the
 * precise error. */
static inline __attribute__((always_inline)) int
shmobj__arena_cache_put(uint8_t *base, uint64_t mapped, uint64_t arena_off,
                        uint64_t off, uint16_t gen, uint32_t token,
                        uint64_t bsize, uint64_t *hdr, uint16_t *ngen)
{
    /* The caller read the block's word within its view
     * (shmobj__arena_usable_if(): used, not cached, generation gen, bsize
     * bytes); the swap below checks it again. What the put adds, as
     * shmobj__arena_check_ref() does: the block lies in the heap (after
     * the control block of an open arena, the header after it before the
     * heap's end, which lies in the view), and that header's boundary tag
     * agrees, so payload bytes that only look like a header are refused.
     * A damaged control block (its magic) sends the free the locked way,
     * which says SHMOBJ_ECORRUPT. */
    uint64_t h = off - HDR;
    const struct arena_ctl *c =
        (const struct arena_ctl *)(const void *)(base + arena_off);
    uint64_t he = __atomic_load_n(&c->heap_end, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&c->magic, __ATOMIC_RELAXED) != ARENA_MAGIC ||
        off < heap_start_for(arena_off) + HDR || (off & 15) != 0 ||
        he > mapped || h >= he || bsize < MIN_BLOCK ||
        bsize > he - HDR - h || ld(base, PREV(h + bsize)) != bsize)
        return 1;
    uint64_t *p = (uint64_t *)(void *)(base + WORD(h));
    uint64_t w = __atomic_load_n(p, __ATOMIC_RELAXED), nw;
    do {
        /* a lock holder may change PREV_FREE meanwhile: the swap fails
         * and the loop takes the new word */
        if ((w & (F_USED | F_CACHED)) != F_USED || w_gen(w) != gen ||
            w_size(w) != bsize)
            return 1;
        nw = (w | F_CACHED) + (UINT64_C(1) << GEN_SHIFT);
    } while (!__atomic_compare_exchange_n(p, &w, nw, false, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
    uint32_t *pl = (uint32_t *)(void *)(base + h + HDR);
    __atomic_store_n(&pl[0], token, __ATOMIC_RELAXED);
    __atomic_store_n(&pl[1], CACHE_MAGIC, __ATOMIC_RELEASE);
    *hdr = h;
    *ngen = w_gen(nw);
    return 0;
}

/* Take the block with header h back out of this process's cache, where it
 * was put with generation gen (h was checked then; the heap never
 * shrinks): CACHED cleared by a compare-and-swap, the block stays used
 * and is handed out with gen. SHMOBJ_ESTALE when it is no longer this
 * cache's (a repair judged the cache's owner dead and freed it; it may
 * have been allocated and cached anew since, with a later generation), or
 * is smaller than `need` bytes: the caller forgets it. */
static inline __attribute__((always_inline)) int
shmobj__arena_cache_get(uint8_t *base, uint64_t h, uint16_t gen,
                        uint64_t need)
{
    uint64_t *p = (uint64_t *)(void *)(base + WORD(h));
    uint64_t w = __atomic_load_n(p, __ATOMIC_RELAXED);
    do {
        /* The size too: a block this process cached keeps its size while
         * cached, but bytes another process wrote over the heap (or
         * restored, as the fuzz targets do) may show a CACHED header of
         * this generation and another size, which must never be handed
         * out for a request it cannot hold. */
        if ((w & (F_USED | F_CACHED)) != (F_USED | F_CACHED) ||
            w_gen(w) != gen || w_size(w) < need)
            return SHMOBJ_ESTALE;
    } while (!__atomic_compare_exchange_n(p, &w, w & ~F_CACHED, false,
                                          __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
    /* No stale magic beside this token once the block is used again: a
     * later put of it by another process, killed between its swap and its
     * token's store, must not leave a payload a repair would take for this
     * process's (and, this process dead, free under that put). */
    __atomic_store_n((uint32_t *)(void *)(base + h + HDR + 4), 0,
                     __ATOMIC_RELAXED);
    return 0;
}

/* Refill by carving (the heap's lock held): a run of blocks of one size,
 * allocated as one block, is cut front first into cached blocks, so that
 * the lock is held for one search of the free lists, not one per block.
 * A cut writes the rest's header inside the run before the one store that
 * shortens the front, so a walk can follow the chain at every point. Each
 * block is cached with its owner's token, CACHE_MAGIC and the generation
 * an allocation and a put there would give it, so a repair frees what a
 * killed carver leaves (doc/format-arena.md, "Carving", has the one
 * window that leaves the rest in use). */

/* The run just allocated at header h (used, not cached, only this
 * process knows it) becomes a cached block of `token`. Returns its
 * generation. */
static inline uint16_t shmobj__arena_carve_start(uint8_t *base, uint64_t h, uint32_t token)
{
    uint64_t w = ld(base, WORD(h));
    uint32_t *pl = (uint32_t *)(void *)(base + h + HDR);
    __atomic_store_n(&pl[0], token, __ATOMIC_RELAXED);
    /* the lock is held and the block in no cache: no other writer of
     * its word, so a store, not a swap */
    uint64_t nw = (w | F_CACHED) + (UINT64_C(1) << GEN_SHIFT);
    st_commit(base, WORD(h), nw);
    __atomic_store_n(&pl[1], CACHE_MAGIC, __ATOMIC_RELEASE);
    return w_gen(nw);
}

/* Cut the first bs bytes (a multiple of 16, at least MIN_BLOCK, and at
 * least MIN_BLOCK less than its size) off the cached run at header h of
 * this carver: they stay a cached block at h, and the rest becomes a
 * cached run at h + bs, whose generation this returns. */
static inline uint16_t shmobj__arena_carve_cut(uint8_t *base, uint64_t h, uint64_t bs,
                                               uint32_t token)
{
    uint64_t w = ld(base, WORD(h));
    uint64_t r = h + bs;
    uint16_t g = (uint16_t)(gen_at(base, r) + 1);
    st(base, PREV(r), bs);
    st(base, WORD(r), w_make(w_size(w) - bs, F_USED | F_CACHED, g));
    uint32_t *pl = (uint32_t *)(void *)(base + r + HDR);
    __atomic_store_n(&pl[0], token, __ATOMIC_RELAXED);
    /* The commit. The rest's magic only after it: written before, a kill
     * here would leave a header, a token and the magic inside the freed
     * run, and a block made later at r would show them while its own put
     * had not yet stored its token. */
    st_commit(base, WORD(h), w_make(bs, w & (F_USED | F_PREV_FREE | F_CACHED), w_gen(w)));
    SHMOBJ__STEP("arena.carve.cut");
    __atomic_store_n(&pl[1], CACHE_MAGIC, __ATOMIC_RELEASE);
    return g;
}

/* After the last cut: the tag of the block after the run (at `end`). */
static inline void shmobj__arena_carve_end(uint8_t *base, uint64_t end, uint64_t s)
{
    st(base, PREV(end), s);
}

#endif /* SHMOBJ_ARENA_CACHE_INLINE_H */
