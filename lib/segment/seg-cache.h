/* The allocation cache of a segment handle in this process: its fast
 * paths, inlined into the heap's allocation and free (seg-heap.c).
 *
 * A block this handle frees, when small (a block of at most
 * SEG_CACHE_MAX_BLOCK bytes) and the cache is under SEG_CACHE_MAX_BYTES,
 * stays used in the heap with CACHED set and its generation bumped as a
 * free bumps it (shmobj__arena_cache_put()), and its header offset goes on
 * a stack of its size class here; an allocation of at most
 * SEG_CACHE_MAX_REQ bytes and at most 64-byte alignment takes the
 * smallest cached block whose class is sure to hold it (and whose payload
 * is so aligned) (shmobj__arena_cache_get()). Either
 * touches no shared lock and no line of the heap's control block: two
 * compare-and-swaps on the block's own header word and one on the
 * process-local try-lock. Anything else (a miss, a full class or cache, a
 * thread that finds the cache taken, a view to widen, a forked child not
 * attached yet, any doubt about the block) takes the locked heap.
 *
 * Invariants: every slot names a block this handle cached with the
 * generation recorded beside it, unless a repair judged this process dead
 * and freed it (then the block's word shows it, and the get forgets the
 * slot); `bytes` is the sum of the slots' class floors, so it is at most
 * the cached bytes; the blocks were cached under (forks, token), and a
 * process where either differs (a forked child) never hands them out. */
#ifndef SHMOBJ_SEG_CACHE_H
#define SHMOBJ_SEG_CACHE_H

#include <string.h>

#include "arena-cache-inline.h"
#include "segment.h"

/* Requests the cache serves: up to the last class's floor (7,680) less
 * the header: the A1 workload's range (16..4096 bytes), E1's objects of
 * about 4.5 KiB and most of the layers' own allocations. */
#define SEG_CACHE_MAX_REQ 7664u
/* Their blocks: header, rounding up to a class (seg_cache_round(): 7,664
 * bytes ask for a block of 7,680), and a tail too small to split off. */
#define SEG_CACHE_MAX_BLOCK (7680u + 16u)
/* What one process may hold back from the others, and so what a kill
 * leaves cached until a repair gives it back (doc/format-arena.md). */
#define SEG_CACHE_MAX_BYTES (UINT64_C(512) << 10)
/* The largest alignment served (the layers' queue messages and tables ask
 * for 64): a class's top block serves when its payload has it. */
#define SEG_CACHE_MAX_ALIGN 64u
/* A miss served under the segment lock also fills its class with up to
 * SEG_CACHE_REFILL more blocks, of at most SEG_CACHE_REFILL_BYTES in all
 * (seg_cache_refill_count()): a process that only allocates (inserts
 * into a map, puts to a queue) then takes the lock once per so many
 * allocations, not once per allocation. */
#define SEG_CACHE_REFILL 8u
#define SEG_CACHE_REFILL_BYTES 4096u
/* The largest blocks a refill carves from one run (seg-heap.c) rather
 * than allocates one by one: below it the free lists' search is most of
 * a small block's cost (a refill of 8 cost 2,800 instructions, carved
 * 840). Above it, carving cost the allocation workload (A1) 6% at the
 * same instruction count: a run comes from one free block of 4 KiB or
 * more, where blocks allocated one by one reuse the smaller ones freed. */
#define SEG_CACHE_CARVE_MAX 512u

/* The class of a cached block of `s` bytes (a multiple of 16, 32 to
 * SEG_CACHE_MAX_BLOCK): below 512 one per 16 bytes; from 512 on, eight per
 * power of two. */
static inline unsigned seg_cache_class(uint64_t s)
{
    if (s < 512)
        return (unsigned)(s >> 4);
    unsigned f = msb64(s);
    return 32u + (f - 9u) * 8u + (unsigned)((s >> (f - 3u)) & 7u);
}

/* The smallest size of class c's blocks (c < 64). */
#define SEG_CACHE_F8(f)                                                        \
    (1u << (f)), (9u << ((f) - 3)), (10u << ((f) - 3)), (11u << ((f) - 3)),    \
        (12u << ((f) - 3)), (13u << ((f) - 3)), (14u << ((f) - 3)),            \
        (15u << ((f) - 3))
static const uint16_t seg_cache_floors[SHMOBJ__SEG_CACHE_CLASSES] = {
    0,   16,  32,  48,  64,  80,  96,  112, 128, 144, 160,
    176, 192, 208, 224, 240, 256, 272, 288, 304, 320, 336,
    352, 368, 384, 400, 416, 432, 448, 464, 480, 496,
    SEG_CACHE_F8(9), SEG_CACHE_F8(10), SEG_CACHE_F8(11), SEG_CACHE_F8(12)};

static inline uint64_t seg_cache_floor(unsigned c)
{
    return seg_cache_floors[c];
}

/* The first class whose every block holds `need` bytes. */
static inline unsigned seg_cache_want(uint64_t need)
{
    unsigned c = seg_cache_class(need);
    return c + (seg_cache_floor(c) != need);
}

/* The class a cacheable allocation of `size` bytes aligned to `align`
 * takes its block from, with the size it asks the heap for: its block
 * rounded up to the floor of the first class whose every block holds it,
 * less the header. Every block of that class then serves every request of
 * the class (as the size classes of mimalloc and jemalloc: at most 1/8
 * more bytes, none below 512), and a block freed into the cache serves the
 * next request of its class, not only one of its own size or less.
 * SHMOBJ__SEG_CACHE_CLASSES when the request is not for the cache. */
static inline unsigned seg_cache_round(uint64_t *size, uint64_t align)
{
    if (*size > SEG_CACHE_MAX_REQ || align > SEG_CACHE_MAX_ALIGN)
        return SHMOBJ__SEG_CACHE_CLASSES;
    uint64_t need = (*size + HDR + 15) & ~UINT64_C(15);
    if (need < MIN_BLOCK)
        need = MIN_BLOCK;
    unsigned c = seg_cache_want(need);
    *size = seg_cache_floor(c) - HDR;
    return c;
}

/* Take the cache for this thread, fit for use by this process's current
 * token: false when another thread has it or this process has no token
 * yet (the locked path attaches a forked child). Blocks cached under
 * another (forks, token) are forgotten, never handed out. */
static inline __attribute__((always_inline)) bool
seg_cache_enter(shmobj_segment *seg, struct shmobj__seg_cache *k)
{
    uint32_t forks = shmobj__os_forks_seen();
    if (atomic_load_explicit(&seg->attached_gen, memory_order_acquire) != forks)
        return false;
    uint32_t self = atomic_load_explicit(&seg->token, memory_order_relaxed);
    if (self == 0 ||
        atomic_exchange_explicit(&k->busy, 1, memory_order_acquire) != 0)
        return false;
    if (__builtin_expect(k->forks != forks || k->token != self, 0)) {
        atomic_store_explicit(&k->bitmap, 0, memory_order_relaxed);
        k->bytes = 0;
        memset(k->count, 0, sizeof k->count);
        k->forks = forks;
        k->token = self;
    }
    return true;
}

static inline void seg_cache_leave(struct shmobj__seg_cache *k)
{
    atomic_store_explicit(&k->busy, 0, memory_order_release);
}

static inline uint64_t seg_cache_bits(struct shmobj__seg_cache *k)
{
    return atomic_load_explicit(&k->bitmap, memory_order_relaxed);
}

/* How many blocks of class c a refill adds (the cache entered): within
 * the class's depth, the cache's bytes and SEG_CACHE_REFILL_BYTES. */
static inline unsigned seg_cache_refill_count(const struct shmobj__seg_cache *k, unsigned c)
{
    uint64_t f = seg_cache_floor(c), n = SEG_CACHE_REFILL_BYTES / f;
    if (n > SEG_CACHE_REFILL)
        n = SEG_CACHE_REFILL;
    uint64_t room = (uint64_t)(SHMOBJ__SEG_CACHE_DEPTH - k->count[c]);
    if (n > room)
        n = room;
    if (k->bytes + n * f > SEG_CACHE_MAX_BYTES)
        n = (SEG_CACHE_MAX_BYTES - k->bytes) / f;
    return (unsigned)n;
}

/* Push a block put into the cache (shmobj__arena_cache_put()) on class
 * c's stack, which has room. */
static inline void seg_cache_push(struct shmobj__seg_cache *k, unsigned c, uint64_t h,
                                  uint16_t gen)
{
    k->slot[c][k->count[c]++] = h | (uint64_t)gen << GEN_SHIFT;
    atomic_store_explicit(&k->bitmap, seg_cache_bits(k) | UINT64_C(1) << c,
                          memory_order_relaxed);
    k->bytes += seg_cache_floor(c);
}

/* Pop the top slot of class c: its header offset and generation. */
static inline uint64_t seg_cache_pop(struct shmobj__seg_cache *k, unsigned c)
{
    unsigned n = --k->count[c];
    if (n == 0)
        atomic_store_explicit(&k->bitmap, seg_cache_bits(k) & ~(UINT64_C(1) << c),
                              memory_order_relaxed);
    k->bytes -= seg_cache_floor(c);
    return k->slot[c][n];
}

/* Pop the top slot of class c and take its block back out of the cache
 * (shmobj__arena_cache_get(), at least `need` bytes): 0 with its header
 * offset and generation, the block used again and this process's, or
 * SHMOBJ_ESTALE when a repair took it (the slot is forgotten). */
static inline __attribute__((always_inline)) int
seg_cache_take(uint8_t *base, struct shmobj__seg_cache *k, unsigned c, uint64_t need,
               uint64_t *h, uint16_t *gen)
{
    uint64_t e = seg_cache_pop(k, c);
    *h = e & SIZE_MASK;
    *gen = (uint16_t)(e >> GEN_SHIFT);
    return shmobj__arena_cache_get(base, *h, *gen, need);
}

/* An allocation from the cache of a request of class c (seg_cache_round():
 * every block of class c holds it): 0 with *out, or 1 (go the locked way).
 * It takes a block of class c or c + 1: at most a class more than asked
 * for (1/8 above 512, 16 bytes below), as the layers size their blocks
 * by the request (a chunk of a mutable list is "at least its bytes, less
 * than twice"). */
static inline __attribute__((always_inline)) int
seg_cache_alloc(shmobj_segment *seg, unsigned c, uint64_t align,
                shmobj__ref *out)
{
    struct shmobj__seg_cache *k = &seg->cache;
    /* Nothing cached of these classes (a process that only allocates, as
     * a queue's producer): no try-lock taken. A stale answer costs one
     * miss, or one pass through the cache. */
    if ((seg_cache_bits(k) & (UINT64_C(3) << c)) == 0 || !seg_cache_enter(seg, k))
        return 1;
    uint64_t need = seg_cache_floor(c);
    uint64_t m = seg_cache_bits(k) & (UINT64_C(3) << c);
    while (m != 0) {
        c = (unsigned)__builtin_ctzll(m);
        if (align > 16 &&
            ((k->slot[c][k->count[c] - 1] + HDR) & (align - 1)) != 0) {
            m &= m - 1; /* its top block is not aligned so: the next class */
            continue;
        }
        uint64_t h;
        uint16_t gen;
        if (__builtin_expect(seg_cache_take(seg->space.base, k, c, need, &h, &gen) == 0, 1)) {
            seg_cache_leave(k);
            *out = shmobj__ref_make(h + HDR, gen);
            return 0;
        }
        m &= seg_cache_bits(k); /* a repair took it: the next */
    }
    seg_cache_leave(k);
    return 1;
}

/* A free into the cache: 0 when it took the block, or 1 (go the locked
 * way, which also gives every error). *full: the class whose stack was
 * full, for the locked free to drain (SHMOBJ__SEG_CACHE_CLASSES: none). */
static inline __attribute__((always_inline)) int
seg_cache_free(shmobj_segment *seg, shmobj__ref ref, unsigned *full)
{
    uint64_t off = shmobj__ref_off(ref);
    uint16_t gen = shmobj__ref_gen(ref);
    uint8_t *base = seg->space.base;
    uint64_t mapped = shmobj__seg_mapped(seg);
    /* Its header word lies within this view: its size, read first to pick
     * the class, is checked again by the put. */
    if (off < SHMOBJ__SEG_ARENA_OFF + HDR || (off & 15) != 0 || off > mapped)
        return 1;
    uint64_t usable = shmobj__arena_usable_if(base, off, gen);
    if (usable == 0 || usable + HDR > SEG_CACHE_MAX_BLOCK)
        return 1;
    struct shmobj__seg_cache *k = &seg->cache;
    unsigned c = seg_cache_class(usable + HDR);
    if (!seg_cache_enter(seg, k))
        return 1;
    uint64_t h;
    uint16_t ng;
    if (k->count[c] >= SHMOBJ__SEG_CACHE_DEPTH) {
        *full = c;
        seg_cache_leave(k);
        return 1;
    }
    if (k->bytes + seg_cache_floor(c) > SEG_CACHE_MAX_BYTES ||
        shmobj__arena_cache_put(base, mapped, SHMOBJ__SEG_ARENA_OFF, off, gen,
                                k->token, usable + HDR, &h, &ng) != 0) {
        seg_cache_leave(k);
        return 1;
    }
    seg_cache_push(k, c, h, ng);
    seg_cache_leave(k);
    return 0;
}

#endif /* SHMOBJ_SEG_CACHE_H */
