/* The allocation and the free of the arena core, as inline functions: the
 * out-of-line shmobj__arena_alloc() and shmobj__arena_free() of arena.c
 * are these, and the segment's public calls (lib/segment/seg-heap.c)
 * inline them behind the segment lock, so that an allocation or a free is
 * one function, not two with a call, a second prologue and the checks of
 * arguments the caller has just checked between them. Also here: the
 * free-list and block helpers they share with arena.c's reference check
 * and growth.
 *
 * They keep the invariants of arena-internal.h, validate everything they
 * will write before their first store (a bad offset or damaged bytes give
 * SHMOBJ_ECORRUPT and never damage the heap further), and commit every
 * change of the block chain by one release store, leaving only the crash
 * windows listed at the top of arena.c. */
#ifndef SHMOBJ_ARENA_INLINE_H
#define SHMOBJ_ARENA_INLINE_H

#include "arena-internal.h"

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

/* The size class an allocation of `need` block bytes searches from: the
 * request rounded up to the next class start, so that any block of the
 * class found fits (the "good fit" of TLSF). A value in that class;
 * class_floor() gives its smallest block size. */
static inline uint64_t class_want(uint64_t need)
{
    if (need < SMALL_BLOCK)
        return need;
    return need + (UINT64_C(1) << (msb64(need) - SL_LOG)) - 1;
}

/* The smallest block size of the class an allocation of `need` block bytes
 * searches from: a free block smaller than this is never given to the
 * request, even when it would hold it. */
static inline uint64_t class_floor(uint64_t need)
{
    uint64_t want = class_want(need);
    if (want < SMALL_BLOCK)
        return want;
    return want & ~((UINT64_C(1) << (msb64(want) - SL_LOG)) - 1);
}

/* Block bytes an allocation of `size` bytes aligned to `align` needs:
 * header, rounding, and the worst leading gap for align >= 32 (align + 16:
 * a 16-byte gap is too small for a free block and moves on by one more
 * align). */
static inline uint64_t block_need(uint64_t size, uint64_t align, uint64_t *bs_out)
{
    uint64_t bs = (size + HDR + 15) & ~UINT64_C(15);
    if (bs < MIN_BLOCK)
        bs = MIN_BLOCK;
    *bs_out = bs;
    return align > 16 ? bs + align + 16 : bs;
}

/* The size of the smallest free block that an allocation of (size, align)
 * is sure to be given: what growth must add to the heap for the retry to
 * succeed (the request alone is not enough, see class_floor()).
 * UINT64_MAX when no heap could hold it. */
static inline uint64_t shmobj__arena_fit_size(uint64_t size, uint64_t align)
{
    if (align < 16)
        align = 16;
    if (size == 0 || size >= OFF_LIMIT || align > MAX_ALIGN)
        return UINT64_MAX;
    uint64_t bs;
    return class_floor(block_need(size, align, &bs));
}

static inline __attribute__((always_inline)) int
shmobj__arena_alloc_inline(uint8_t *base, uint64_t mapped, uint64_t arena_off,
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

    uint64_t bs;
    uint64_t need = block_need(size, align, &bs);
    /* Search from the class whose every block fits (class_want()). */
    unsigned fl, sl;
    mapping_insert(class_want(need), &fl, &sl);
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
        prev_free_mark(base, WORD(nx), false);
    }
    *off = a + HDR;
    *gen = g;
    return 0;
}

/* The used block whose payload starts at off and whose generation is gen,
 * in an arena whose control block checks: its header h and header word w
 * (loaded with `order`: the lock-free reference check pairs an acquire
 * with a free's commit). SHMOBJ_ECORRUPT when off cannot be a block,
 * SHMOBJ_ESTALE when the block is free, sits in a process's cache (its
 * generation was bumped as a free bumps it, and CACHED says it is not
 * live even for the reference its next allocation will hand out) or has
 * another generation. */
static inline __attribute__((always_inline)) int
used_block(const uint8_t *base, uint64_t mapped, uint64_t arena_off,
           uint64_t off, uint16_t gen, int order, struct arena_ctl **c,
           uint64_t *hs, uint64_t *he, uint64_t *h, uint64_t *w)
{
    int rc = ctl_get(base, mapped, arena_off, c, hs, he);
    if (rc != 0)
        return rc;
    *h = off - HDR;
    if (off < HDR || !hdr_ok(*h, *hs, *he))
        return SHMOBJ_ECORRUPT;
    *w = __atomic_load_n((const uint64_t *)(const void *)(base + WORD(*h)),
                         order);
    if ((*w & (F_USED | F_CACHED)) != F_USED || w_gen(*w) != gen)
        return SHMOBJ_ESTALE;
    return 0;
}

/* The free block that ends where block h starts, found through h's
 * boundary tag and confirmed by its own header: its offset, size and header
 * word, or SHMOBJ_ECORRUPT when the two disagree. Reads only. */
static inline int prev_free(const uint8_t *base, uint64_t h, uint64_t hs,
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

static inline __attribute__((always_inline)) int
shmobj__arena_free_inline(uint8_t *base, uint64_t mapped, uint64_t arena_off,
                          uint64_t off, uint16_t gen)
{
    struct arena_ctl *c;
    uint64_t hs, he, h, w;
    int rc = used_block(base, mapped, arena_off, off, gen, __ATOMIC_RELAXED,
                        &c, &hs, &he, &h, &w);
    if (rc != 0)
        return rc;

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
        prev_free_mark(base, WORD(nx), true);
    }
    return list_insert(base, c, hs, he, start, size);
}

#endif /* SHMOBJ_ARENA_INLINE_H */
