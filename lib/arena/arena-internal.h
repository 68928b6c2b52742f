/* The arena's bytes and the helpers its sources share (arena.c: init,
 * allocation, free, reference checks, growth; arena-walk.c: the heap walk,
 * check, rebuild and statistics; arena-inline.h: the allocation and the
 * free). Only lib/arena/ includes this header, and the segment's heap
 * through arena-inline.h, whose inline allocation and free it calls; the
 * other layers see arena.h alone.
 *
 * Invariants kept between calls (the heap check verifies each one):
 *  - The heap is a chain of blocks from heap_start to a 16-byte sentinel at
 *    heap_end - 16; each block's size word says where the next one starts.
 *  - Every block's prev_size equals the size of the block before it (the
 *    boundary tag, kept for used and free neighbours alike), and its
 *    PREV_FREE flag says whether that block is free.
 *  - No two free blocks are adjacent (immediate coalescing).
 *  - Every free block is on exactly one free list, the one of its size
 *    class; a bitmap bit is set exactly when its list is non-empty.
 *  - A block's generation is bumped on every free, so a reference kept
 *    across a free no longer matches. A merge leaves the headers it
 *    swallows in place, and a header a split makes at an offset takes the
 *    generation found there (gen_at()): allocations at one offset take
 *    consecutive generations for as long as its bytes hold its last header.
 *  - A used block's generation (bits 48-63 of its word) is written only by
 *    its owner (a renewal, shmobj__arena_gen_renew()), by its own free and
 *    by its move into a process's cache; a lock holder changes a used
 *    neighbour's PREV_FREE flag by an atomic read-modify-write
 *    (prev_free_mark()), never by a store of a word it loaded before.
 *  - CACHED is set only in a used block: the block sits in the allocation
 *    cache of the process whose token its payload holds (see "cached
 *    blocks" below). Its owner sets and clears the flag without the lock,
 *    by a compare-and-swap of the whole word; every other writer of that
 *    word (prev_free_mark(), the rebuild's mark_low()) changes it by an
 *    atomic read-modify-write as well, so no change of either is lost.
 *
 * Byte layout (integers in host byte order, positions are offsets from
 * base; doc/format-arena.md restates it):
 *
 *   control block at arena_off (struct arena_ctl, 10432 bytes):
 *     +0      u64 magic        "SHMARNA1"; written last by init
 *     +8      u64 heap_start   arena_off + 10432 rounded up to 16
 *     +16     u64 heap_end     end of the heap (exclusive); the sentinel
 *                              header sits at heap_end - 16
 *     +24     u64 fl_bitmap    bit f set <=> sl_bitmap[f] != 0
 *     +32     u32 sl_bitmap[40] bit s set <=> heads[f][s] != 0
 *     +192    u64 heads[40][32] header offset of the first free block of
 *                              class (f, s); 0 = empty list
 *
 *   block header at h (16 bytes; payload at h + 16, 16-byte aligned):
 *     +0      u64 prev_size    size of the previous block (0 for the first)
 *     +8      u64 word         bit 0 USED, bit 1 PREV_FREE, bit 2
 *                              CACHED (only with USED), bit 3 zero,
 *                              bits 4-47 block size (a multiple of 16,
 *                              header included; 0 only in the sentinel),
 *                              bits 48-63 generation
 *   free block payload:
 *     +16     u64 next_free    header offset of the next block on the list
 *     +24     u64 prev_free    header offset of the previous one; not
 *                              kept (any value) in the first block of a list
 *
 *   cached block payload (a used block with CACHED set):
 *     +16     u32 token        attachment token of the process whose
 *                              cache holds it (seg-procs.c)
 *     +20     u32 magic        CACHE_MAGIC "CAC1"; both written by the
 *                              owner just after it set CACHED (a carved
 *                              block's token before it), so a repair
 *                              frees the block only when both say a
 *                              dead process holds it
 *
 *   Size classes (block sizes): below 512 bytes class (0, size / 16); from
 *   512 on, f = floor(log2 size), class (f - 8, the five bits of size after
 *   its top bit). A block is at least 32 bytes (header + two links).
 */
#ifndef SHMOBJ_ARENA_INTERNAL_H
#define SHMOBJ_ARENA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "bounds.h"
#include "shmobj/error.h"

#define ARENA_MAGIC UINT64_C(0x31414e52414d4853) /* "SHMARNA1" */

#define ALIGN_SHIFT 4
#define HDR 16u              /* header bytes */
#define MIN_BLOCK 32u        /* header + two free-list links */
#define SL_LOG 5
#define SL_COUNT 32
#define FL_SHIFT (SL_LOG + ALIGN_SHIFT) /* 9: first size with f > 0 is 512 */
#define SMALL_BLOCK (UINT64_C(1) << FL_SHIFT)
#define FL_MAX 48            /* block sizes and offsets stay below 2^48 */
#define FL_COUNT (FL_MAX - FL_SHIFT + 1) /* 40 */
#define OFF_LIMIT (UINT64_C(1) << FL_MAX)
#define MAX_ALIGN 4096u

#define F_USED UINT64_C(1)
#define F_PREV_FREE UINT64_C(2)
#define F_CACHED UINT64_C(4)
#define F_RESERVED UINT64_C(0x8)
#define CACHE_MAGIC UINT32_C(0x31434143) /* "CAC1" */
#define SIZE_MASK UINT64_C(0x0000fffffffffff0)
#define GEN_SHIFT 48

struct arena_ctl {
    uint64_t magic;      /* ARENA_MAGIC; init writes it last (release) */
    uint64_t heap_start; /* bytes from base; 16-aligned; fixed at init */
    uint64_t heap_end;   /* bytes from base, exclusive; grows only (grow()
                            stores it with release, check_ref loads it
                            with acquire) */
    uint64_t fl_bitmap;  /* bit f: some list of first level f non-empty */
    uint32_t sl_bitmap[FL_COUNT];        /* bit s: heads[f][s] != 0 */
    uint64_t heads[FL_COUNT][SL_COUNT];  /* header offsets, 0 = empty */
};

_Static_assert(offsetof(struct arena_ctl, heap_start) == 8, "layout");
_Static_assert(offsetof(struct arena_ctl, heap_end) == 16, "layout");
_Static_assert(offsetof(struct arena_ctl, fl_bitmap) == 24, "layout");
_Static_assert(offsetof(struct arena_ctl, sl_bitmap) == 32, "layout");
_Static_assert(offsetof(struct arena_ctl, heads) == 192, "layout");
_Static_assert(sizeof(struct arena_ctl) == 10432, "layout");
_Static_assert(FL_COUNT <= 64, "fl_bitmap is 64 bits");

/* ---- raw access ---------------------------------------------------------- */

/* Header words are read lock-free by check_ref() in other threads and
 * processes while a lock holder may rewrite them: relaxed atomics make that
 * well defined and cost nothing on the targets we build for. */
static inline uint64_t ld(const uint8_t *base, uint64_t off)
{
    return __atomic_load_n((const uint64_t *)(const void *)(base + off),
                           __ATOMIC_RELAXED);
}
static inline void st(uint8_t *base, uint64_t off, uint64_t v)
{
    __atomic_store_n((uint64_t *)(void *)(base + off), v, __ATOMIC_RELAXED);
}
/* The store that commits a change of the block chain: release keeps every
 * header written before it ahead of it, so a process killed right after it
 * leaves a chain a walk can follow. (A plain store on x86 and arm64's
 * stlr; SIGKILL lands between instructions, so program order is what
 * matters.) */
static inline void st_commit(uint8_t *base, uint64_t off, uint64_t v)
{
    __atomic_store_n((uint64_t *)(void *)(base + off), v, __ATOMIC_RELEASE);
}

/* Set (on) or clear the PREV_FREE flag of the used block or sentinel
 * whose word is at `off`: the one way a lock holder changes the word of a
 * block it does not own (a neighbour of the block it allocates or frees).
 * Its owner may meanwhile, without the lock, renew its generation
 * (shmobj__arena_gen_renew() in arena.h) or set or clear CACHED by a
 * compare-and-swap (arena-inline.h, the cache). A store of a value loaded
 * before would undo either: a renewal undone makes a stale reference
 * valid again, a CACHED undone hands a cached block out twice or loses
 * it. An atomic OR / AND changes the one bit and keeps every other, and
 * the owner's compare-and-swap, meeting a word changed since its load,
 * fails and loads again: whichever comes second sees the first. */
static inline void prev_free_mark(uint8_t *base, uint64_t off, bool on)
{
    uint64_t *p = (uint64_t *)(void *)(base + off);
    if (on)
        __atomic_fetch_or(p, F_PREV_FREE, __ATOMIC_RELAXED);
    else
        __atomic_fetch_and(p, ~F_PREV_FREE, __ATOMIC_RELAXED);
}

#define PREV(h) (h)
#define WORD(h) ((h) + 8)
#define NEXTF(h) ((h) + 16)
#define PREVF(h) ((h) + 24)

static inline uint64_t w_size(uint64_t w) { return w & SIZE_MASK; }
static inline uint16_t w_gen(uint64_t w) { return (uint16_t)(w >> GEN_SHIFT); }
static inline uint64_t w_make(uint64_t size, uint64_t flags, uint16_t gen)
{
    return size | flags | ((uint64_t)gen << GEN_SHIFT);
}

static inline unsigned msb64(uint64_t x) /* x != 0 */
{
    return 63u - (unsigned)__builtin_clzll(x);
}

/* x rotated right by 4 bits: a multiple of 16 becomes x / 16, anything
 * else a number of at least 2^60. So "ror4(x) <= lim / 16" is "x is a
 * multiple of 16 and x <= lim" (lim a multiple of 16) in one compare. */
static inline uint64_t ror4(uint64_t x)
{
    return x >> 4 | x << 60;
}
/* ---- size classes -------------------------------------------------------- */

static inline void mapping_insert(uint64_t size, unsigned *fl, unsigned *sl)
{
    if (size < SMALL_BLOCK) {
        *fl = 0;
        *sl = (unsigned)(size >> ALIGN_SHIFT);
    } else {
        unsigned f = msb64(size);
        *sl = (unsigned)(size >> (f - SL_LOG)) ^ SL_COUNT;
        *fl = f - (FL_SHIFT - 1);
    }
}

/* ---- control block ------------------------------------------------------- */

static inline uint64_t heap_start_for(uint64_t arena_off)
{
    return (arena_off + sizeof(struct arena_ctl) + 15) & ~UINT64_C(15);
}

/* Validate the control block's fixed fields against the mapping. On
 * success *hs and *he hold the heap bounds; the sentinel is at he - 16 and
 * every real block header h satisfies hs <= h <= he - 16 - MIN_BLOCK. */
static inline __attribute__((always_inline)) int
ctl_get(const uint8_t *base, uint64_t mapped, uint64_t arena_off,
                   struct arena_ctl **out, uint64_t *hs, uint64_t *he)
{
    if (base == NULL || (arena_off & 15) != 0 ||
        !shmobj__range_ok(arena_off, sizeof(struct arena_ctl), mapped))
        return SHMOBJ_ECORRUPT;
    struct arena_ctl *c = (struct arena_ctl *)(void *)(base + arena_off);
    if (__atomic_load_n(&c->magic, __ATOMIC_ACQUIRE) != ARENA_MAGIC)
        return SHMOBJ_ECORRUPT;
    uint64_t s = c->heap_start;
    uint64_t e = __atomic_load_n(&c->heap_end, __ATOMIC_ACQUIRE);
    /* e must be a multiple of 16 in [s + 48, min(mapped, 2^48 - 16)]. */
    uint64_t top = mapped < OFF_LIMIT ? mapped & ~UINT64_C(15) : OFF_LIMIT - 16;
    if (s != heap_start_for(arena_off) || top < s + MIN_BLOCK + HDR ||
        ror4(e - s - (MIN_BLOCK + HDR)) > (top - s - (MIN_BLOCK + HDR)) >> 4)
        return SHMOBJ_ECORRUPT;
    *out = c;
    *hs = s;
    *he = e;
    return 0;
}

/* Could h be the header of a real (non-sentinel) block? A multiple of 16
 * in [hs, he - 16 - MIN_BLOCK] (hs is one, and he - hs >= 48: ctl_get). */
static inline bool hdr_ok(uint64_t h, uint64_t hs, uint64_t he)
{
    return ror4(h - hs) <= (he - hs - HDR - MIN_BLOCK) >> 4;
}

/* ---- free lists ---------------------------------------------------------- */

static inline void bits_set(struct arena_ctl *c, unsigned fl, unsigned sl)
{
    c->sl_bitmap[fl] |= 1u << sl;
    c->fl_bitmap |= UINT64_C(1) << fl;
}

static inline void bits_clear(struct arena_ctl *c, unsigned fl, unsigned sl)
{
    uint32_t m = c->sl_bitmap[fl] & ~(1u << sl);
    c->sl_bitmap[fl] = m;
    if (m == 0)
        c->fl_bitmap &= ~(UINT64_C(1) << fl);
}

/* The first block of a list needs no back link: it is known by
 * heads[f][s], and leaving its prev_free alone saves a store to a line
 * nobody else touches (paid in full at the lock's release barrier). */
static inline int list_insert(uint8_t *base, struct arena_ctl *c, uint64_t hs,
                              uint64_t he, uint64_t h, uint64_t size)
{
    unsigned fl, sl;
    mapping_insert(size, &fl, &sl);
    uint64_t first = c->heads[fl][sl];
    if (first != 0) {
        if (!hdr_ok(first, hs, he))
            return SHMOBJ_ECORRUPT;
        st(base, PREVF(first), h);
    }
    st(base, NEXTF(h), first);
    c->heads[fl][sl] = h;
    /* A non-empty list has its bits set already: two stores fewer to the
     * control block's lines, which every process's allocations share. */
    if (first == 0)
        bits_set(c, fl, sl);
    return 0;
}

#endif /* SHMOBJ_ARENA_INTERNAL_H */
