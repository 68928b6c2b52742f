/* The segment's heap: the space operations (alloc, free, check, usable)
 * the layers above use, this process's allocation cache in front of them
 * (seg-cache.h), their segment lock's fast path, and the public raw-block
 * calls of shmobj/arena.h. Growth and repair are in seg-grow.c, the
 * statistics and the check in seg-heap-stats.c. */
#include <string.h>

#include "arena-inline.h"
#include "extstruct.h"
#include "racy.h"
#include "seg-cache.h"
#include "segment.h"
#include "step.h"

/* The segment lock around one allocator call. Its uncontended case is
 * inline: this handle's token is current in this process (the fast path
 * of shmobj__seg_procs_self()), one CAS takes the free word
 * (shmobj__os_lock_try()), and the view already covers the heap's
 * published size (two loads). Anything else (a forked child not attached
 * yet, a held or dead owner's word, a view to widen) takes the general
 * shmobj__segment_lock(), which waits, repairs and widens. Of the ~190
 * instructions an allocation spent around the arena core, the calls
 * through seg-lock.c and seg-procs.c were most. The core itself is inline
 * here too (arena-inline.h): its call, its prologue and its checks of
 * what this file has just checked (the out-parameters, the constant
 * arena offset) cost 57 instructions per allocation and 25 per free. */
static inline __attribute__((always_inline)) int heap_lock(shmobj_segment *seg)
{
    /* attached_gen first, with acquire: it is stored (release) after the
     * token, so the token read after it is the one of this process. */
    bool attached = atomic_load_explicit(&seg->attached_gen,
                                         memory_order_acquire) ==
                    shmobj__os_forks_seen();
    uint32_t self = atomic_load_explicit(&seg->token, memory_order_relaxed);
    if (__builtin_expect(
            attached && self != 0 && shmobj__os_lock_try(&seg->hdr->lock, self),
            1)) {
        if (__builtin_expect(
                atomic_load_explicit(&seg->hdr->size, memory_order_acquire) <=
                    shmobj__seg_mapped(seg),
                1))
            return 0;
        /* Held, but the view must widen first: let go and take the
         * general path, which does that (and its failure) in one place. */
        shmobj__os_lock_release(&seg->hdr->lock);
    }
    return shmobj__segment_lock(seg);
}

static inline __attribute__((always_inline)) void heap_unlock(shmobj_segment *seg)
{
    shmobj__os_lock_release(&seg->hdr->lock); /* = shmobj__segment_unlock */
}

/* The allocation once the arena said SHMOBJ_ENOMEM: grow, then try again.
 * Kept out of line so the hot path stays short. */
static __attribute__((noinline)) int alloc_grown(shmobj_segment *seg,
                                                 uint64_t size, uint64_t align,
                                                 uint64_t *off, uint16_t *gen)
{
    /* Cached blocks first (this handle's, dead processes'): a segment
     * whose every block was freed serves a large block again. */
    if (shmobj__seg_cache_reclaim_locked(seg)) {
        int rc = shmobj__arena_alloc(seg->space.base, shmobj__seg_mapped(seg),
                                     SHMOBJ__SEG_ARENA_OFF, size, align, off,
                                     gen);
        if (rc != SHMOBJ_ENOMEM)
            return rc;
    }
    int rc = shmobj__seg_heap_grow(seg, shmobj__arena_fit_size(size, align));
    if (rc != 0)
        return SHMOBJ_ENOMEM;
    return shmobj__arena_alloc(seg->space.base, shmobj__seg_mapped(seg),
                               SHMOBJ__SEG_ARENA_OFF, size, align, off, gen);
}

/* Read the page after the block just allocated, once per page, outside
 * the lock. The heap hands out a free block's front and splits off the
 * rest, so the next allocation, by whichever process, writes its header
 * and the rest's there, under the segment lock. A process's first access
 * to a page of the shared object is a fault (on a virtual machine with
 * shadow page tables, an exit to the host: ~3 us on the 2-CPU AMD EPYC
 * one); with several writers each process meets almost every page first
 * in that write, so the faults lengthened the one critical section every
 * writer needs. Read here, the page is mapped by the time this process
 * writes it. A read cannot disturb the header another process writes
 * there meanwhile; the page lies within this view (mapped), which the
 * object always backs. */
static __attribute__((noinline)) void touch_ahead(shmobj_segment *seg,
                                                  uint64_t page)
{
    atomic_store_explicit(&seg->ahead_page, page, memory_order_relaxed);
    uint64_t at = page << __builtin_ctzll(seg->page);
    if (at < shmobj__seg_mapped(seg)) {
        /* the byte's value is never used: a writer may change it at once */
        SHMOBJ__RACY_BEGIN();
        (void)*(volatile const uint8_t *)((const uint8_t *)seg->space.base + at);
        SHMOBJ__RACY_END();
    }
}

/* Raise the untouched mark past the block at off, of generation gen, for
 * a request of size bytes (lock held). A block exceeds its request by
 * less than a step (the arena splits off any rest that could be a
 * block), so one far below the mark needs no look at its size. */
static inline __attribute__((always_inline)) void
heap_mark_touched(shmobj_segment *seg, uint64_t off, uint16_t gen, uint64_t size, uint64_t u)
{
    /* Past the block and the header and links a split or a later merge
     * leaves at its end. */
    if (__builtin_expect(off + size + SHMOBJ__SEG_UNTOUCHED_STEP > u, 0))
        shmobj__seg_untouched_raise(
            seg, off + shmobj__arena_usable_if(seg->space.base, off, gen) + 64);
}

/* Refill class c by carving (arena-cache-inline.h): n blocks of the
 * class's floor, bs bytes, allocated as one run, cut into cached blocks
 * and pushed last first, so that the cache hands them out in address
 * order. false when the heap has no free run that long. */
static bool heap_refill_carve(shmobj_segment *seg, struct shmobj__seg_cache *k, unsigned c,
                              unsigned n)
{
    uint8_t *base = seg->space.base;
    uint64_t bs = seg_cache_floor(c), off = 0;
    uint16_t gen = 0;
    if (shmobj__arena_alloc_inline(base, shmobj__seg_mapped(seg), SHMOBJ__SEG_ARENA_OFF,
                                   n * bs - HDR, 16, &off, &gen) != 0)
        return false;
    heap_mark_touched(seg, off, gen, n * bs - HDR,
                      atomic_load_explicit(&seg->hdr->untouched, memory_order_relaxed));
    /* the run's size: n * bs, or 16 bytes more (a rest too small to split
     * off), which its last block takes; any other word was written by a
     * process that ignores the lock: the run is left as it is */
    uint64_t h = off - HDR, end = off + shmobj__arena_usable_if(base, off, gen);
    if (end - h != n * bs && end - h != n * bs + 16)
        return true;
    uint64_t hs[SEG_CACHE_REFILL];
    uint16_t gs[SEG_CACHE_REFILL];
    gs[0] = shmobj__arena_carve_start(base, h, k->token);
    hs[0] = h;
    for (unsigned i = 1; i < n; i++) {
        SHMOBJ__STEP("segment.cache.refill");
        gs[i] = shmobj__arena_carve_cut(base, hs[i - 1], bs, k->token);
        hs[i] = hs[i - 1] + bs;
    }
    shmobj__arena_carve_end(base, end, end - hs[n - 1]);
    if (end - hs[n - 1] != bs) {
        /* of another class (the stack is one class's): out of the cache
         * as a block is taken back, and freed */
        n--;
        if (shmobj__arena_cache_get(base, hs[n], gs[n], bs) == 0)
            (void)shmobj__arena_free_inline(base, shmobj__seg_mapped(seg),
                                            SHMOBJ__SEG_ARENA_OFF, hs[n] + HDR, gs[n]);
    }
    while (n > 0) {
        n--;
        seg_cache_push(k, c, hs[n], gs[n]);
    }
    return true;
}

/* After a miss of cache class c served under the lock: more blocks of
 * the class, allocated now and put into this handle's cache, so that the
 * next allocations of the class take no lock. Only from free blocks (no
 * growth for them); nothing when another thread has the cache. Blocks of
 * up to SEG_CACHE_CARVE_MAX bytes for requests aligned to 16 are carved
 * from one run; others are allocated block by block, each aligned as
 * asked. There, a kill between a block's allocation and its put leaves
 * that one block used (doc/format-arena.md); those put are a dead
 * process's cached blocks, which a repair frees. */
static __attribute__((noinline)) void heap_refill_locked(shmobj_segment *seg, unsigned c,
                                                         uint64_t size, uint64_t align)
{
    struct shmobj__seg_cache *k = &seg->cache;
    if (!seg_cache_enter(seg, k))
        return;
    unsigned n = seg_cache_refill_count(k, c);
    if (n >= 2 && align <= 16 && seg_cache_floor(c) <= SEG_CACHE_CARVE_MAX &&
        heap_refill_carve(seg, k, c, n)) {
        seg_cache_leave(k);
        return;
    }
    uint8_t *base = seg->space.base;
    uint64_t mapped = shmobj__seg_mapped(seg);
    for (; n > 0; n--) {
        uint64_t off = 0, h;
        uint16_t gen = 0, ng;
        if (shmobj__arena_alloc_inline(base, mapped, SHMOBJ__SEG_ARENA_OFF, size, align, &off,
                                       &gen) != 0)
            break;
        heap_mark_touched(seg, off, gen, size,
                          atomic_load_explicit(&seg->hdr->untouched, memory_order_relaxed));
        SHMOBJ__STEP("segment.cache.refill");
        uint64_t usable = shmobj__arena_usable_if(base, off, gen);
        /* a block of another class (a rest too small to split off made it
         * larger) is freed again: the stack is one class's */
        if (seg_cache_class(usable + HDR) != c ||
            shmobj__arena_cache_put(base, mapped, SHMOBJ__SEG_ARENA_OFF, off, gen, k->token,
                                    usable + HDR, &h, &ng) != 0) {
            (void)shmobj__arena_free_inline(base, mapped, SHMOBJ__SEG_ARENA_OFF, off, gen);
            break;
        }
        seg_cache_push(k, c, h, ng);
    }
    seg_cache_leave(k);
}

/* The locked allocation and free, when this process's cache cannot serve
 * (seg-cache.h): out of line, so that the cache's hit, most calls, saves
 * and restores none of the registers they need. c: the cache class of
 * the request, whose cache missed (SHMOBJ__SEG_CACHE_CLASSES: none). */
static __attribute__((noinline)) int
heap_alloc_locked(shmobj_segment *seg, uint64_t size, uint64_t align,
                  shmobj__ref *out, uint64_t *untouched, unsigned c)
{
    int rc = heap_lock(seg);
    if (rc != 0)
        return rc;
    uint64_t off = 0;
    uint16_t gen = 0;
    rc = shmobj__arena_alloc_inline(seg->space.base, shmobj__seg_mapped(seg),
                                    SHMOBJ__SEG_ARENA_OFF, size, align, &off,
                                    &gen);
    if (__builtin_expect(rc == SHMOBJ_ENOMEM, 0))
        rc = alloc_grown(seg, size, align, &off, &gen);
    if (rc == 0) {
        uint64_t u = atomic_load_explicit(&seg->hdr->untouched, memory_order_relaxed);
        if (untouched != NULL)
            *untouched = u;
        heap_mark_touched(seg, off, gen, size, u);
        if (c < SHMOBJ__SEG_CACHE_CLASSES)
            heap_refill_locked(seg, c, size, align);
    }
    heap_unlock(seg);
    if (rc == 0) {
        *out = shmobj__ref_make(off, gen);
        /* the page after the one of the block's end (pages are powers
         * of two; off + size lies within the mapping) */
        uint64_t page = ((off + size) >> __builtin_ctzll(seg->page)) + 1;
        if (page != atomic_load_explicit(&seg->ahead_page, memory_order_relaxed))
            touch_ahead(seg, page);
    }
    return rc;
}

/* After a free that found cache class c full (lock held): half of the
 * class's blocks go back to the heap with it, so that a process that
 * frees what others allocate (a queue's consumer) takes the lock once
 * per so many frees. A kill between a block's leaving the cache and its
 * free leaves that block in use (doc/format-arena.md). */
static __attribute__((noinline)) void heap_drain_locked(shmobj_segment *seg, unsigned c)
{
    struct shmobj__seg_cache *k = &seg->cache;
    if (!seg_cache_enter(seg, k))
        return;
    uint8_t *base = seg->space.base;
    uint64_t mapped = shmobj__seg_mapped(seg);
    for (unsigned n = k->count[c] / 2; n > 0; n--) { /* each pops one */
        uint64_t h;
        uint16_t gen;
        /* a block a repair took from the cache is no longer this one's */
        if (seg_cache_take(base, k, c, seg_cache_floor(c), &h, &gen) != 0)
            continue;
        SHMOBJ__STEP("segment.cache.drain");
        (void)shmobj__arena_free_inline(base, mapped, SHMOBJ__SEG_ARENA_OFF, h + HDR, gen);
    }
    seg_cache_leave(k);
}

static __attribute__((noinline)) int heap_free_locked(shmobj_segment *seg,
                                                      shmobj__ref ref, unsigned full)
{
    int rc = heap_lock(seg);
    if (rc != 0)
        return rc;
    rc = shmobj__arena_free_inline(seg->space.base, shmobj__seg_mapped(seg),
                                   SHMOBJ__SEG_ARENA_OFF, shmobj__ref_off(ref),
                                   shmobj__ref_gen(ref));
    if (rc == 0 && full < SHMOBJ__SEG_CACHE_CLASSES)
        heap_drain_locked(seg, full);
    heap_unlock(seg);
    return rc;
}

/* An allocation: from this process's cache (seg-cache.h), else the
 * heap's. With `untouched` non-NULL, also the heap's untouched mark as it
 * was before this block: the block's bytes past it and past its first 64
 * read as zero (0, all of it may not, for a block from the cache). */
static inline __attribute__((always_inline)) int
heap_alloc(shmobj_segment *seg, uint64_t size, uint64_t align, shmobj__ref *out,
           uint64_t *untouched)
{
    unsigned c = seg_cache_round(&size, align);
    if (c < SHMOBJ__SEG_CACHE_CLASSES && seg_cache_alloc(seg, c, align, out) == 0) {
        if (untouched != NULL)
            *untouched = 0;
        return 0;
    }
    return heap_alloc_locked(seg, size, align, out, untouched, c);
}

static inline __attribute__((always_inline)) int heap_free(shmobj_segment *seg,
                                                           shmobj__ref ref)
{
    unsigned full = SHMOBJ__SEG_CACHE_CLASSES;
    if (seg_cache_free(seg, ref, &full) == 0)
        return 0;
    return heap_free_locked(seg, ref, full);
}

/* The layers' allocations and frees: refused with SHMOBJ_ESTALE once the
 * segment handle was closed (the handles that still hold the space answer
 * so). The check of a reference is not: a handle's close, after the
 * segment's, still judges that its block lives before it writes there. */
static int space_alloc(struct shmobj__space *sp, uint64_t size, uint64_t align,
                       shmobj__ref *out)
{
    if (__builtin_expect(shmobj__space_closed(sp) || sp->readonly, 0))
        return sp->readonly ? SHMOBJ_ERDONLY : SHMOBJ_ESTALE;
    return heap_alloc(sp->impl, size, align, out, NULL);
}

/* What of a new block may be non-zero: its first 64 bytes (a free block's
 * links) and what lies below the untouched mark. A large block from the
 * heap's top is thus neither written nor touched by a caller that zeroes
 * it: its pages stay unmapped in this process until used. */
static int space_alloc_dirty(struct shmobj__space *sp, uint64_t size, uint64_t align,
                             shmobj__ref *out, uint64_t *dirty)
{
    if (__builtin_expect(shmobj__space_closed(sp) || sp->readonly, 0))
        return sp->readonly ? SHMOBJ_ERDONLY : SHMOBJ_ESTALE;
    uint64_t untouched = 0;
    int rc = heap_alloc(sp->impl, size, align, out, &untouched);
    if (rc != 0)
        return rc;
    uint64_t off = shmobj__ref_off(*out);
    uint64_t d = untouched == 0 ? size /* unknown: all of it */
                 : untouched <= off ? 0
                                    : untouched - off;
    if (d < 64)
        d = 64;
    *dirty = d < size ? d : size;
    return 0;
}

static int space_free(struct shmobj__space *sp, shmobj__ref ref)
{
    if (__builtin_expect(shmobj__space_closed(sp) || sp->readonly, 0))
        return sp->readonly ? SHMOBJ_ERDONLY : SHMOBJ_ESTALE;
    return heap_free(sp->impl, ref);
}

static int space_check(struct shmobj__space *sp, shmobj__ref ref,
                       uint64_t *usable)
{
    shmobj_segment *seg = sp->impl;
    uint64_t off = shmobj__ref_off(ref);
    /* The block may lie in a part another process grew: widen the view
     * before judging the reference. */
    if (shmobj__seg_sync_view(seg) != 0 ||
        (off >= shmobj__seg_mapped(seg) && shmobj__segment_extend(sp, off + 1) != 0))
        return SHMOBJ_ECORRUPT;
    int rc = shmobj__arena_check_ref(sp->base, shmobj__seg_mapped(seg),
                                     SHMOBJ__SEG_ARENA_OFF, off,
                                     shmobj__ref_gen(ref), usable);
    /* Growth hands the heap its new bytes before it publishes the size
     * (see shmobj__seg_heap_grow()), so a heap end beyond this view may be that moment of
     * another process's growth, not damage: widen the view to the
     * object's real size and judge once more (the failing path only). */
    if (rc == SHMOBJ_ECORRUPT && shmobj__segment_extend(sp, 0) == 0)
        rc = shmobj__arena_check_ref(sp->base, shmobj__seg_mapped(seg),
                                     SHMOBJ__SEG_ARENA_OFF, off,
                                     shmobj__ref_gen(ref), usable);
    return rc;
}

static uint64_t space_usable(struct shmobj__space *sp, shmobj__ref ref)
{
    uint64_t off = shmobj__ref_off(ref);
    /* its header word lies in the heap, within this view */
    if (off < SHMOBJ__SEG_ARENA_OFF + 16 || (off & 15) != 0 || off > shmobj__seg_mapped(sp->impl))
        return 0;
    return shmobj__arena_usable_if(sp->base, off, shmobj__ref_gen(ref));
}

const struct shmobj__space_ops shmobj__segment_space_ops = {
    .extend = shmobj__segment_extend,
    .alloc = space_alloc,
    .alloc_dirty = space_alloc_dirty,
    .free = space_free,
    .check = space_check,
    .usable = space_usable,
    .live = &shmobj__segment_live_ops,
    .drop = shmobj__segment_drop,
    .watch_open = shmobj__seg_watch_open,
    .changed = shmobj__seg_watch_changed,
};

static bool align_ok(size_t align)
{
    return align == 0 || (align <= 4096 && (align & (align - 1)) == 0);
}

int shmobj_arena_alloc(shmobj_segment *seg, size_t size, size_t align,
                       shmobj_ref *ref, void **ptr)
{
    if (seg == NULL || ref == NULL || size == 0 || !align_ok(align))
        return SHMOBJ_EINVAL;
    if (seg->space.readonly)
        return SHMOBJ_ERDONLY;
    int rc = heap_alloc(seg, size, align < 16 ? 16 : align, ref, NULL);
    /* The arena placed the block inside this process's view (the lock
     * synchronised the view first), so its address needs no check. */
    if (rc == 0 && ptr != NULL)
        *ptr = seg->space.base + shmobj__ref_off(*ref);
    return rc;
}

int shmobj_arena_free(shmobj_segment *seg, shmobj_ref ref)
{
    if (seg == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    if (seg->space.readonly)
        return SHMOBJ_ERDONLY;
    int rc = heap_free(seg, ref);
    /* a destroyed map (its control block freed): its watchers find it
     * stale (seg-watch.c). The layers' own frees (space_free) are not
     * watched blocks but for objects, whose free reports itself. */
    if (rc == 0)
        shmobj__space_changed(&seg->space, shmobj__ref_off(ref), 0, SHMOBJ__WATCH_WHOLE);
    return rc;
}

int shmobj_arena_ptr(shmobj_segment *seg, shmobj_ref ref, void **ptr,
                     size_t *usable)
{
    if (seg == NULL || ptr == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    uint64_t n;
    int rc = space_check(&seg->space, ref, &n);
    if (rc != 0)
        return rc;
    *ptr = seg->space.base + shmobj__ref_off(ref);
    if (usable != NULL)
        *usable = (size_t)n;
    return 0;
}
