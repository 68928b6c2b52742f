/* The arena allocator core: two-level segregated fit (TLSF) over a region
 * the caller owns, addressed only by offsets from `base`.
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
 *     +8      u64 word         bit 0 USED, bit 1 PREV_FREE, bits 2-3 zero,
 *                              bits 4-47 block size (a multiple of 16,
 *                              header included; 0 only in the sentinel),
 *                              bits 48-63 generation
 *   free block payload:
 *     +16     u64 next_free    header offset of the next block on the list
 *     +24     u64 prev_free    header offset of the previous one; not
 *                              kept (any value) in the first block of a list
 *
 *   Size classes (block sizes): below 512 bytes class (0, size / 16); from
 *   512 on, f = floor(log2 size), class (f - 8, the five bits of size after
 *   its top bit). A block is at least 32 bytes (header + two links).
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
#include "arena.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "bounds.h"
#include "extstruct.h"
#include "mix.h"
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
#define F_RESERVED UINT64_C(0xc)
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

/* A header a split makes keeps the generation bits found at its offset. A
 * merge leaves the headers it swallows in place (free headers, holding the
 * generation the next allocation there hands out, as free() bumped it), and
 * while the offset stays inside free blocks nothing writes those bits but a
 * split there and the back link of a free block starting 16 bytes before.
 * So a header made again at an offset continues that offset's count; once
 * the offset has been inside an allocated block's payload the bits are
 * whatever its owner left. gen_at() reads them for a header handed out at
 * once (after an alignment gap); a free tail's header is written by
 * st_keep_gen() around them, so the common split loads no cold line (a
 * store miss waits in the store buffer, a load miss stalls the allocation:
 * reading the tail's header cost 13% of the A1 rate). */
static inline uint16_t gen_at(const uint8_t *base, uint64_t h)
{
    return w_gen(ld(base, WORD(h)));
}

/* Store a header word's bits 0-47 and leave its generation (bits 48-63) as
 * it is. Two stores, not one: used only for a header that no commit
 * exposes yet (a split's tail, written before the split's commit), so a
 * kill between them leaves payload bytes. A lock-free reader meanwhile sees
 * the low half first, with USED clear. */
static inline void st_keep_gen(uint8_t *base, uint64_t off, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    __atomic_store_n((uint32_t *)(void *)(base + off), (uint32_t)v,
                     __ATOMIC_RELAXED);
    __atomic_store_n((uint16_t *)(void *)(base + off + 4),
                     (uint16_t)(v >> 32), __ATOMIC_RELAXED);
#else
    __atomic_store_n((uint32_t *)(void *)(base + off + 4), (uint32_t)v,
                     __ATOMIC_RELAXED);
    __atomic_store_n((uint16_t *)(void *)(base + off + 2),
                     (uint16_t)(v >> 32), __ATOMIC_RELAXED);
#endif
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

/* Take h, the first block of list (fl, sl), off it: its class is known, so
 * nothing is recomputed. */
static inline int list_pop(uint8_t *base, struct arena_ctl *c, uint64_t hs,
                           uint64_t he, uint64_t h, unsigned fl, unsigned sl)
{
    uint64_t next = ld(base, NEXTF(h));
    if (next != 0 && !hdr_ok(next, hs, he))
        return SHMOBJ_ECORRUPT;
    c->heads[fl][sl] = next;
    if (next == 0)
        bits_clear(c, fl, sl);
    return 0;
}

static inline int list_remove(uint8_t *base, struct arena_ctl *c, uint64_t hs,
                              uint64_t he, uint64_t h, uint64_t size)
{
    unsigned fl, sl;
    mapping_insert(size, &fl, &sl);
    uint64_t next = ld(base, NEXTF(h));
    if (next != 0 && !hdr_ok(next, hs, he))
        return SHMOBJ_ECORRUPT;
    if (c->heads[fl][sl] == h) {
        c->heads[fl][sl] = next;
        if (next == 0)
            bits_clear(c, fl, sl);
        return 0;
    }
    uint64_t prev = ld(base, PREVF(h));
    if (prev == 0 || !hdr_ok(prev, hs, he))
        return SHMOBJ_ECORRUPT;
    if (next != 0)
        st(base, PREVF(next), prev);
    st(base, NEXTF(prev), next);
    return 0;
}

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
    struct arena_ctl *c;
    uint64_t hs, he;
    if (off == NULL || gen == NULL || size == 0)
        return SHMOBJ_EINVAL;
    if (align < 16)
        align = 16;
    if (align > MAX_ALIGN || (align & (align - 1)) != 0)
        return SHMOBJ_EINVAL;
    int rc = ctl_get(base, mapped, arena_off, &c, &hs, &he);
    if (rc != 0)
        return rc;
    if (size > he - hs)
        return SHMOBJ_ENOMEM;

    uint64_t bs = (size + HDR + 15) & ~UINT64_C(15);
    if (bs < MIN_BLOCK)
        bs = MIN_BLOCK;
    /* Worst leading gap for align >= 32 is align + 16 (a 16-byte gap is too
     * small for a free block and moves on by one more align). */
    uint64_t need = align > 16 ? bs + align + 16 : bs;

    /* Round the request up to the next class start so that any block of the
     * class found fits (the "good fit" of TLSF). */
    unsigned fl, sl;
    uint64_t want = need;
    if (want >= SMALL_BLOCK)
        want += (UINT64_C(1) << (msb64(want) - SL_LOG)) - 1;
    mapping_insert(want, &fl, &sl);
    if (fl >= FL_COUNT)
        return SHMOBJ_ENOMEM;
    uint32_t slmap = c->sl_bitmap[fl] & (~UINT32_C(0) << sl);
    if (slmap == 0) {
        uint64_t flmap = fl + 1 < 64 ? c->fl_bitmap & (~UINT64_C(0) << (fl + 1))
                                     : 0;
        if (flmap == 0)
            return SHMOBJ_ENOMEM;
        fl = (unsigned)__builtin_ctzll(flmap);
        if (fl >= FL_COUNT)
            return SHMOBJ_ECORRUPT;
        slmap = c->sl_bitmap[fl];
        if (slmap == 0)
            return SHMOBJ_ECORRUPT;
    }
    sl = (unsigned)__builtin_ctz(slmap);
    uint64_t h = c->heads[fl][sl];
    if (!hdr_ok(h, hs, he))
        return SHMOBJ_ECORRUPT;
    uint64_t w = ld(base, WORD(h));
    uint64_t s = w_size(w);
    if ((w & F_USED) != 0 || s < need || s > he - HDR - h)
        return SHMOBJ_ECORRUPT;
    uint64_t gap = 0;
    if (align > 16) {
        uint64_t p = h + HDR;
        gap = ((p + align - 1) & ~(align - 1)) - p;
        if (gap != 0 && gap < MIN_BLOCK)
            gap += align;
    }
    uint64_t a = h + gap;      /* header of the block we hand out */
    uint64_t rest = s - gap;
    uint64_t tail = rest - bs; /* rest >= bs: s >= need */
    if (tail < MIN_BLOCK) {
        bs = rest;
        tail = 0;
    }
    rc = list_pop(base, c, hs, he, h, fl, sl);
    if (rc != 0)
        return rc;
    uint64_t nx = h + s;       /* next block (perhaps the sentinel) */
    /* A header made by a split continues the generation of the last
     * header at that offset, which a merge left in place (see gen_at()). */
    uint16_t g = gap != 0 ? gen_at(base, a) : w_gen(w);

    /* New headers first, then the one store that commits the split. */
    if (tail != 0) {
        uint64_t t = a + bs;
        st(base, PREV(t), bs);
        st_keep_gen(base, WORD(t), w_make(tail, 0, 0));
        st(base, PREV(nx), tail);
    } else {
        st(base, PREV(nx), bs);
    }
    if (gap != 0) {
        st(base, PREV(a), gap);
        st(base, WORD(a), w_make(bs, F_USED | F_PREV_FREE, g));
        st_commit(base, WORD(h), w_make(gap, w & F_PREV_FREE, w_gen(w)));
        rc = list_insert(base, c, hs, he, h, gap);
        if (rc != 0)
            return rc;
    } else {
        st_commit(base, WORD(h), w_make(bs, F_USED | (w & F_PREV_FREE), g));
    }
    if (tail != 0) {
        rc = list_insert(base, c, hs, he, a + bs, tail);
        if (rc != 0)
            return rc;
    } else {
        st(base, WORD(nx), ld(base, WORD(nx)) & ~F_PREV_FREE);
    }
    *off = a + HDR;
    *gen = g;
    return 0;
}

/* The free block that ends where block h starts, found through h's
 * boundary tag and confirmed by its own header: its offset, size and header
 * word, or SHMOBJ_ECORRUPT when the two disagree. Reads only. */
static int prev_free(const uint8_t *base, uint64_t h, uint64_t hs,
                     uint64_t *pv, uint64_t *ps, uint64_t *wp)
{
    uint64_t s = ld(base, PREV(h));
    if (s < MIN_BLOCK || s > h - hs)
        return SHMOBJ_ECORRUPT;
    uint64_t w = ld(base, WORD(h - s));
    if ((w & F_USED) != 0 || w_size(w) != s)
        return SHMOBJ_ECORRUPT;
    *pv = h - s;
    *ps = s;
    *wp = w;
    return 0;
}

int shmobj__arena_free(uint8_t *base, uint64_t mapped, uint64_t arena_off,
                       uint64_t off, uint16_t gen)
{
    struct arena_ctl *c;
    uint64_t hs, he;
    int rc = ctl_get(base, mapped, arena_off, &c, &hs, &he);
    if (rc != 0)
        return rc;
    uint64_t h = off - HDR;
    if (off < HDR || !hdr_ok(h, hs, he))
        return SHMOBJ_ECORRUPT;
    uint64_t w = ld(base, WORD(h));
    if ((w & F_USED) == 0 || w_gen(w) != gen)
        return SHMOBJ_ESTALE;

    /* Validate everything this free will touch before the first store, so
     * that a bad offset can never damage the heap. */
    uint64_t s = w_size(w);
    if (s < MIN_BLOCK || s > he - HDR - h)
        return SHMOBJ_ECORRUPT;
    uint64_t nx = h + s;
    uint64_t wn = ld(base, WORD(nx));
    if (ld(base, PREV(nx)) != s || (wn & F_PREV_FREE) != 0)
        return SHMOBJ_ECORRUPT;
    uint64_t pv = 0, ps = 0, wp = 0;
    if ((w & F_PREV_FREE) != 0 &&
        prev_free(base, h, hs, &pv, &ps, &wp) != 0)
        return SHMOBJ_ECORRUPT;
    uint64_t ns = 0;
    if ((wn & F_USED) == 0) {
        ns = w_size(wn);
        if (ns < MIN_BLOCK || ns > he - HDR - nx)
            return SHMOBJ_ECORRUPT;
    }

    /* Commit the free: from here a walk sees a free block. */
    st_commit(base, WORD(h), w_make(s, w & F_PREV_FREE, (uint16_t)(gen + 1)));

    uint64_t start = h, size = s, flags = w & F_PREV_FREE;
    uint16_t sgen = (uint16_t)(gen + 1);
    if (pv != 0) {
        rc = list_remove(base, c, hs, he, pv, ps);
        if (rc != 0)
            return rc;
        start = pv;
        size += ps;
        flags = wp & F_PREV_FREE;
        sgen = w_gen(wp);
        st_commit(base, WORD(start), w_make(size, flags, sgen));
    }
    if (ns != 0) {
        rc = list_remove(base, c, hs, he, nx, ns);
        if (rc != 0)
            return rc;
        size += ns;
        st_commit(base, WORD(start), w_make(size, flags, sgen));
        /* The block after a free block already has PREV_FREE set: only its
         * boundary tag changes (a store, no load of a cold line). */
        st(base, PREV(nx + ns), size);
    } else {
        st(base, PREV(nx), size);
        st(base, WORD(nx), wn | F_PREV_FREE);
    }
    return list_insert(base, c, hs, he, start, size);
}

int shmobj__arena_check_ref(const uint8_t *base, uint64_t mapped,
                            uint64_t arena_off, uint64_t off, uint16_t gen,
                            uint64_t *usable)
{
    struct arena_ctl *c;
    uint64_t hs, he;
    int rc = ctl_get(base, mapped, arena_off, &c, &hs, &he);
    if (rc != 0)
        return rc;
    uint64_t h = off - HDR;
    if (off < HDR || !hdr_ok(h, hs, he))
        return SHMOBJ_ECORRUPT;
    uint64_t w = __atomic_load_n((const uint64_t *)(const void *)(base + WORD(h)),
                                 __ATOMIC_ACQUIRE);
    if ((w & F_USED) == 0 || w_gen(w) != gen)
        return SHMOBJ_ESTALE;
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

/* ---- walks ----------------------------------------------------------------- */

struct walk {
    uint64_t used_bytes, free_bytes, largest, used_blocks, free_blocks;
    uint64_t sum, mix; /* order-free fingerprint of the free blocks' offsets */
};


/* Walk the block chain. strict: also verify boundary tags, flags and
 * coalescing (the check); otherwise only the size chain (stats, rebuild).
 * Work is bounded: every step advances by at least MIN_BLOCK bytes. */
static int walk_blocks(const uint8_t *base, uint64_t hs, uint64_t he,
                       bool strict, struct walk *wk, uint64_t *bad)
{
    memset(wk, 0, sizeof(*wk));
    uint64_t h = hs, prev_size = 0;
    bool prev_free = false;
    for (;;) {
        uint64_t w = ld(base, WORD(h));
        uint64_t s = w_size(w);
        bool is_free = (w & F_USED) == 0;
        if (strict && (ld(base, PREV(h)) != prev_size ||
                       ((w & F_PREV_FREE) != 0) != prev_free ||
                       (w & F_RESERVED) != 0)) {
            *bad = h;
            return SHMOBJ_ECORRUPT;
        }
        if (h == he - HDR) {
            if (s != 0 || is_free) {
                *bad = h;
                return SHMOBJ_ECORRUPT;
            }
            return 0;
        }
        if (s < MIN_BLOCK || s > he - HDR - h || (strict && is_free && prev_free)) {
            *bad = h;
            return SHMOBJ_ECORRUPT;
        }
        if (is_free) {
            wk->free_bytes += s;
            wk->free_blocks++;
            if (s > wk->largest)
                wk->largest = s;
            wk->sum += h;
            wk->mix ^= shmobj__mix64(h);
        } else {
            wk->used_bytes += s;
            wk->used_blocks++;
        }
        prev_size = s;
        prev_free = is_free;
        h += s;
    }
}

int shmobj__arena_check(const uint8_t *base, uint64_t mapped,
                        uint64_t arena_off, uint64_t *bad_off)
{
    struct arena_ctl *c;
    uint64_t hs, he, bad = arena_off;
    int rc = ctl_get(base, mapped, arena_off, &c, &hs, &he);
    if (rc != 0)
        goto fail;
    struct walk wk;
    rc = walk_blocks(base, hs, he, true, &wk, &bad);
    if (rc != 0)
        goto fail;

    /* Free lists: each node a free block of the list's class, back links
     * consistent, at most as many nodes as the walk found (so a cycle ends),
     * and the same set of blocks (count + two fingerprints). */
    const uint64_t ctl_bad = arena_off + offsetof(struct arena_ctl, fl_bitmap);
    rc = SHMOBJ_ECORRUPT;
    /* Each control word is read once: the answer is about one value even
     * if a process that ignores the lock writes meanwhile. */
    const uint64_t flmap = c->fl_bitmap;
    if ((flmap >> FL_COUNT) != 0) {
        bad = ctl_bad;
        goto fail;
    }
    uint64_t n_seen = 0, sum = 0, mix = 0;
    for (unsigned fl = 0; fl < FL_COUNT; fl++) {
        const uint32_t slmap = c->sl_bitmap[fl];
        if (((flmap >> fl) & 1) != (slmap != 0)) {
            bad = ctl_bad;
            goto fail;
        }
        for (unsigned sl = 0; sl < SL_COUNT; sl++) {
            uint64_t n = c->heads[fl][sl], prev = 0;
            if (((slmap >> sl) & 1) != (n != 0)) {
                bad = arena_off + offsetof(struct arena_ctl, heads) +
                      (uint64_t)(fl * SL_COUNT + sl) * 8;
                goto fail;
            }
            while (n != 0) {
                if (n_seen >= wk.free_blocks || !hdr_ok(n, hs, he)) {
                    bad = prev != 0 ? prev : arena_off +
                          offsetof(struct arena_ctl, heads) +
                          (uint64_t)(fl * SL_COUNT + sl) * 8;
                    goto fail;
                }
                uint64_t w = ld(base, WORD(n));
                unsigned f2, s2;
                mapping_insert(w_size(w), &f2, &s2);
                if ((w & F_USED) != 0 || w_size(w) < MIN_BLOCK ||
                    f2 != fl || s2 != sl ||
                    (prev != 0 && ld(base, PREVF(n)) != prev)) {
                    bad = n;
                    goto fail;
                }
                n_seen++;
                sum += n;
                mix ^= shmobj__mix64(n);
                prev = n;
                n = ld(base, NEXTF(n));
            }
        }
    }
    if (n_seen != wk.free_blocks || sum != wk.sum || mix != wk.mix) {
        bad = ctl_bad;
        goto fail;
    }
    return 0;
fail:
    if (bad_off != NULL)
        *bad_off = bad;
    return SHMOBJ_ECORRUPT;
}

int shmobj__arena_rebuild(uint8_t *base, uint64_t mapped, uint64_t arena_off)
{
    struct arena_ctl *c;
    uint64_t hs, he, bad;
    int rc = ctl_get(base, mapped, arena_off, &c, &hs, &he);
    if (rc != 0)
        return rc;

    /* A grow() killed between turning the old sentinel into a block and
     * publishing heap_end: the block at the old sentinel runs to a new
     * sentinel that already holds its boundary tag. Finish the grow. */
    uint64_t os = he - HDR, ws = ld(base, WORD(os)), d = w_size(ws);
    if (d != 0 && (ws & F_USED) == 0 && d >= MIN_BLOCK &&
        shmobj__range_ok(os, d + HDR, mapped) && os + d + HDR < OFF_LIMIT) {
        uint64_t ns = os + d, wsn = ld(base, WORD(ns));
        if (w_size(wsn) == 0 && (wsn & F_USED) != 0 && ld(base, PREV(ns)) == d) {
            he = ns + HDR;
            __atomic_store_n(&c->heap_end, he, __ATOMIC_RELEASE);
        }
    }

    /* Read-only pass first: write nothing unless the size chain holds. */
    struct walk wk;
    rc = walk_blocks(base, hs, he, false, &wk, &bad);
    if (rc != 0)
        return rc;

    c->fl_bitmap = 0;
    memset(c->sl_bitmap, 0, sizeof(c->sl_bitmap));
    memset(c->heads, 0, sizeof(c->heads));
    uint64_t h = hs, prev_size = 0, run = 0, run_size = 0;
    bool prev_free = false;
    for (;;) {
        uint64_t w = ld(base, WORD(h));
        uint64_t s = w_size(w);
        /* The walk above checked this size, but it is read again here, so
         * it is checked again before it moves h: bytes changed in between
         * (by a process ignoring the lock) must not send the walk outside
         * the heap or keep it from ending. */
        if (h != he - HDR && (s < MIN_BLOCK || s > he - HDR - h))
            return SHMOBJ_ECORRUPT;
        bool is_free = (w & F_USED) == 0 && h != he - HDR;
        if (is_free && prev_free) {
            /* A free not yet merged: fold this block into the run. */
            run_size += s;
            uint64_t wr = ld(base, WORD(run));
            st_commit(base, WORD(run), w_make(run_size, wr & F_PREV_FREE, w_gen(wr)));
            prev_size = run_size;
            h += s;
            continue;
        }
        if (prev_free) {
            rc = list_insert(base, c, hs, he, run, run_size);
            if (rc != 0)
                return rc;
        }
        st(base, PREV(h), prev_size);
        st(base, WORD(h), (w & ~(F_PREV_FREE | F_RESERVED)) |
                              (prev_free ? F_PREV_FREE : 0));
        if (h == he - HDR)
            return 0;
        if (is_free) {
            run = h;
            run_size = s;
        }
        prev_size = s;
        prev_free = is_free;
        h += s;
    }
}

int shmobj__arena_stats(const uint8_t *base, uint64_t mapped,
                        uint64_t arena_off, shmobj_arena_stats *out)
{
    struct arena_ctl *c;
    uint64_t hs, he, bad;
    /* Unchanged since the first release. */
    if (out == NULL || !shmobj__ext_out_ok(out, sizeof *out))
        return SHMOBJ_EINVAL;
    int rc = ctl_get(base, mapped, arena_off, &c, &hs, &he);
    if (rc != 0)
        return rc;
    struct walk wk;
    rc = walk_blocks(base, hs, he, false, &wk, &bad);
    if (rc != 0)
        return rc;
    shmobj_arena_stats st = {0};
    st.total_bytes = he - HDR - hs;
    st.used_bytes = wk.used_bytes;
    st.free_bytes = wk.free_bytes;
    st.largest_free = wk.largest != 0 ? wk.largest - HDR : 0;
    st.used_blocks = wk.used_blocks;
    st.free_blocks = wk.free_blocks;
    /* Measured on block sizes, so one free block reads as 0 permille. */
    st.fragmentation_permille =
        wk.free_bytes != 0
            ? (uint32_t)(1000 - (wk.largest * 1000) / wk.free_bytes)
            : 0;
    shmobj__ext_out(out, &st, sizeof st);
    return 0;
}
