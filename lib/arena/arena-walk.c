/* The arena's walks: the heap check, the rebuild after a crash and the
 * statistics, all over the block chain (arena-internal.h has the bytes).
 *
 * Invariants: every walk's work is bounded by the heap size whatever the
 * bytes hold (each step advances by at least MIN_BLOCK, and a list walk by
 * at most as many nodes as the chain has free blocks); nothing is read
 * outside [base, base + mapped); the check and the statistics write
 * nothing; the rebuild writes nothing unless a read-only walk first finds
 * the size chain intact, and re-checks every size it reads again before it
 * moves on, so bytes changed meanwhile cannot send it outside the heap.
 */
#include "arena-internal.h"

#include <string.h>

#include "extstruct.h"
#include "mix.h"

/* ---- walks ----------------------------------------------------------------- */

struct walk {
    uint64_t used_bytes, free_bytes, largest, used_blocks, free_blocks;
    uint64_t sum, mix; /* order-free fingerprint of the free blocks' offsets */
};

/* What the rebuild's walk writes through: the caller's writable view of
 * the region and its control block, whose lists the caller has emptied. */
struct fix {
    uint8_t *base;
    struct arena_ctl *c;
};

/* Walk the block chain: the one loop of the check, the statistics and the
 * rebuild. strict: also verify boundary tags, flags and coalescing (the
 * check); otherwise only the size chain. fix (the rebuild; NULL for the
 * others): rewrite every boundary tag and PREV_FREE flag, merge free
 * neighbours and put each free block on its list. Every size is checked
 * before it moves h, in every mode: a rebuild reads each word again after
 * its read-only pass, and bytes changed in between (by a process ignoring
 * the lock) must not send it outside the heap or keep it from ending.
 * Work is bounded: every step advances by at least MIN_BLOCK bytes. */
static int walk_blocks(const uint8_t *base, uint64_t hs, uint64_t he,
                       bool strict, const struct fix *fix, struct walk *wk,
                       uint64_t *bad)
{
    memset(wk, 0, sizeof(*wk));
    uint64_t h = hs, prev_size = 0, run = 0, run_size = 0;
    bool prev_free = false;
    for (;;) {
        uint64_t w = ld(base, WORD(h));
        uint64_t s = w_size(w);
        bool is_free = (w & F_USED) == 0;
        bool end = h == he - HDR;
        if ((strict && (ld(base, PREV(h)) != prev_size ||
                        ((w & F_PREV_FREE) != 0) != prev_free ||
                        (w & F_RESERVED) != 0)) ||
            (end ? s != 0 || is_free
                 : s < MIN_BLOCK || s > he - HDR - h ||
                       (strict && is_free && prev_free))) {
            *bad = h;
            return SHMOBJ_ECORRUPT;
        }
        if (fix != NULL) {
            if (is_free && prev_free) {
                /* A free not yet merged: fold this block into the run. */
                run_size += s;
                uint64_t wr = ld(base, WORD(run));
                st_commit(fix->base, WORD(run),
                          w_make(run_size, wr & F_PREV_FREE, w_gen(wr)));
                prev_size = run_size;
                h += s;
                continue;
            }
            if (prev_free) {
                int rc = list_insert(fix->base, fix->c, hs, he, run, run_size);
                if (rc != 0) {
                    *bad = run;
                    return rc;
                }
            }
            st(fix->base, PREV(h), prev_size);
            /* the low half only: a used block's owner may renew its
             * generation meanwhile (arena.h) */
            st_low(fix->base, WORD(h), (w & ~(F_PREV_FREE | F_RESERVED)) |
                                           (prev_free ? F_PREV_FREE : 0));
        }
        if (end)
            return 0;
        if (is_free) {
            run = h;
            run_size = s;
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

/* The control block's check, then a read-only walk of the chain it bounds
 * (the check's and the statistics'). */
static int walk_heap(const uint8_t *base, uint64_t mapped, uint64_t arena_off,
                     bool strict, struct arena_ctl **c, uint64_t *hs,
                     uint64_t *he, struct walk *wk, uint64_t *bad)
{
    int rc = ctl_get(base, mapped, arena_off, c, hs, he);
    if (rc != 0)
        return rc;
    return walk_blocks(base, *hs, *he, strict, NULL, wk, bad);
}

int shmobj__arena_check(const uint8_t *base, uint64_t mapped,
                        uint64_t arena_off, uint64_t *bad_off)
{
    struct arena_ctl *c;
    uint64_t hs, he, bad = arena_off;
    struct walk wk;
    int rc = walk_heap(base, mapped, arena_off, true, &c, &hs, &he, &wk, &bad);
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
    rc = walk_blocks(base, hs, he, false, NULL, &wk, &bad);
    if (rc != 0)
        return rc;

    c->fl_bitmap = 0;
    memset(c->sl_bitmap, 0, sizeof(c->sl_bitmap));
    memset(c->heads, 0, sizeof(c->heads));
    const struct fix fix = {base, c};
    return walk_blocks(base, hs, he, false, &fix, &wk, &bad);
}

int shmobj__arena_stats(const uint8_t *base, uint64_t mapped,
                        uint64_t arena_off, shmobj_arena_stats *out)
{
    struct arena_ctl *c;
    uint64_t hs, he, bad;
    /* Unchanged since the first release. */
    if (out == NULL || !shmobj__ext_out_ok(out, sizeof *out))
        return SHMOBJ_EINVAL;
    struct walk wk;
    int rc = walk_heap(base, mapped, arena_off, false, &c, &hs, &he, &wk, &bad);
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
