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
    uint64_t cached_bytes, cached_blocks; /* in processes' caches, not in
                                             used_* */
    uint64_t sum, mix; /* order-free fingerprint of the free blocks' offsets */
};

/* What the rebuild's walk writes through: the caller's writable view of
 * the region and its control block, whose lists the caller has emptied;
 * and the judge of cached blocks' owners (NULL: none is freed). */
struct fix {
    uint8_t *base;
    struct arena_ctl *c;
    shmobj__arena_dead_fn dead;
    void *ctx;
};

/* Whether the cached block h, whose word was w, belongs to a process the
 * caller judges dead: its payload holds CACHE_MAGIC and a token that
 * fix->dead() calls dead. The payload's bytes are whatever its owner or
 * a user that wrote after its free left; they are read only to decide,
 * and the caller frees the block by a compare-and-swap from w, which
 * fails when the block left the cache since w was read (its owner took it
 * back: then it was alive), so the token read belongs to the caching that
 * w shows. */
static bool cached_dead(const struct fix *fix, uint64_t h)
{
    const uint32_t *p = (const uint32_t *)(const void *)(fix->base + h + HDR);
    uint32_t token = __atomic_load_n(&p[0], __ATOMIC_ACQUIRE);
    uint32_t magic = __atomic_load_n(&p[1], __ATOMIC_RELAXED);
    return magic == CACHE_MAGIC && fix->dead(fix->ctx, token);
}

/* The rebuild's flags of a used block or the sentinel: PREV_FREE as the
 * walk found, reserved bits cleared, the generation kept, and CACHED kept
 * on a used block only (a free block or the sentinel is in no cache). A
 * compare-and-swap, not a store: the block's owner may set or clear
 * CACHED, or renew the generation, meanwhile without the lock (see
 * prev_free_mark()). */
static void mark_low(uint8_t *base, uint64_t h, bool prev_free, bool sentinel)
{
    uint64_t *p = (uint64_t *)(void *)(base + WORD(h));
    uint64_t w = __atomic_load_n(p, __ATOMIC_RELAXED), nw;
    do {
        nw = (w & ~(F_PREV_FREE | F_RESERVED)) |
             (prev_free ? F_PREV_FREE : 0);
        if ((nw & F_USED) == 0 || sentinel)
            nw &= ~F_CACHED;
        if (nw == w)
            return;
    } while (!__atomic_compare_exchange_n(p, &w, nw, false, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
}

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
                        (w & F_RESERVED) != 0 ||
                        ((w & F_CACHED) != 0 && (is_free || end)))) ||
            (end ? s != 0 || is_free
                 : s < MIN_BLOCK || s > he - HDR - h ||
                       (strict && is_free && prev_free))) {
            *bad = h;
            return SHMOBJ_ECORRUPT;
        }
        if (fix != NULL && fix->dead != NULL && !end &&
            (w & (F_USED | F_CACHED)) == (F_USED | F_CACHED) &&
            cached_dead(fix, h)) {
            /* A dead process's cached block: free, with the generation
             * its caching bumped. */
            uint64_t fw = w_make(s, w & F_PREV_FREE, w_gen(w));
            if (__atomic_compare_exchange_n(
                    (uint64_t *)(void *)(fix->base + WORD(h)), &w, fw, false,
                    __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
                /* its magic goes, so that no stale one is found there
                 * when the offset holds a used block again */
                __atomic_store_n((uint32_t *)(void *)(fix->base + h + HDR + 4),
                                 0, __ATOMIC_RELAXED);
                w = fw;
                is_free = true;
            } else {
                w = ld(base, WORD(h)); /* its owner took it back */
            }
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
            mark_low(fix->base, h, prev_free, end);
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
        } else if ((w & F_CACHED) != 0) {
            wk->cached_bytes += s;
            wk->cached_blocks++;
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
    return shmobj__arena_rebuild_reclaim(base, mapped, arena_off, NULL, NULL);
}

int shmobj__arena_rebuild_reclaim(uint8_t *base, uint64_t mapped,
                                  uint64_t arena_off, shmobj__arena_dead_fn dead,
                                  void *ctx)
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
    const struct fix fix = {base, c, dead, ctx};
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
    /* A block in a process's cache is free to the application (it was
     * freed, and its next allocation by that process needs no lock): it
     * counts as free, but not as largest_free (only the cache's owner
     * can hand it out). */
    st.used_bytes = wk.used_bytes;
    st.free_bytes = wk.free_bytes + wk.cached_bytes;
    st.largest_free = wk.largest != 0 ? wk.largest - HDR : 0;
    st.used_blocks = wk.used_blocks;
    st.free_blocks = wk.free_blocks + wk.cached_blocks;
    /* Measured on block sizes, so one free block reads as 0 permille. */
    st.fragmentation_permille =
        st.free_bytes != 0
            ? (uint32_t)(1000 - (wk.largest * 1000) / st.free_bytes)
            : 0;
    shmobj__ext_out(out, &st, sizeof st);
    return 0;
}
