/* The arena allocator core: O(1) two-level segregated fit over a region the
 * caller owns, addressed by offsets from `base` only.
 *
 * It never calls the operating system and never locks: the caller (the
 * segment layer) serialises calls with the segment lock and grows the region.
 * Every function takes (base, mapped, arena_off): `base` is this process's
 * address of offset 0, `mapped` how many bytes at base are readable, and
 * `arena_off` where the arena's control block lives. Nothing read from the
 * region is trusted: a damaged heap gives SHMOBJ_ECORRUPT, never a read
 * outside [base, base + mapped).
 *
 * Blocks carry at most 16 bytes of header, hold a 16-bit generation that is
 * bumped on every free and continued by a header a split makes at the same
 * offset (see space.h, references, and doc/format-arena.md, generations),
 * and payloads are aligned to 16 bytes at least. */
#ifndef SHMOBJ_ARENA_H
#define SHMOBJ_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#include "shmobj/arena.h" /* shmobj_arena_stats */

/* Whether the block whose payload starts at `off` still has generation
 * `gen` (bits 48-63 of the header word just before the payload; a free
 * bumps it): one relaxed load, for hot paths that validated `off` earlier
 * and so know its header is mapped. The answer can be outdated at once (a
 * free may follow); it says "stale" for every block freed before the
 * call, which coherence alone orders. */
static inline bool shmobj__arena_gen_is(const uint8_t *base, uint64_t off,
                                        uint16_t gen)
{
    const uint64_t *w = (const void *)(base + off - 8);
    return (uint16_t)(__atomic_load_n(w, __ATOMIC_RELAXED) >> 48) == gen;
}

/* The usable size of the block whose payload starts at `off` when it is in
 * use with generation `gen`, else 0: the header word shmobj__arena_gen_is()
 * reads, whose USED bit and size come with it (bits 0 and 4-47, see
 * doc/format-arena.md). For hot paths that then read at most that many
 * bytes, bounds-checked in the segment; unlike shmobj__arena_check_ref()
 * it does not compare the block's boundary tag, so a damaged header is
 * caught by the full check only. */
static inline uint64_t shmobj__arena_usable_if(const uint8_t *base,
                                               uint64_t off, uint16_t gen)
{
    const uint64_t *w = (const void *)(base + off - 8);
    uint64_t v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
    uint64_t size = v & UINT64_C(0x0000fffffffffff0);
    /* USED (bit 0) and not CACHED (bit 2): a block in a process's cache
     * is not live, whatever generation is asked for */
    if ((v & 5u) != 1u || (uint16_t)(v >> 48) != gen || size < 32)
        return 0;
    return size - 16;
}

/* Give the used block whose payload starts at `off`, and whose generation
 * is `gen`, the next generation in place, without the heap's lock: what a
 * free and an allocation at the same offset would have handed out, so
 * every reference to it made before is refused as stale (ESTALE), and the
 * block stays in use by its caller. One 16-bit release store to bits
 * 48-63 of its header word. Only the block's owner may call it, once at a
 * time, after it checked the block (shmobj__arena_usable_if() saying it
 * is in use with `gen`): the heap's lock holders never store those 16
 * bits of a used block they do not own (they change a used neighbour's
 * PREV_FREE flag by an atomic OR or AND, see prev_free_mark() in
 * arena-internal.h), so the store cannot be undone by one of them. Returns
 * the new generation. */
static inline uint16_t shmobj__arena_gen_renew(uint8_t *base, uint64_t off,
                                               uint16_t gen)
{
    uint16_t ng = (uint16_t)(gen + 1);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint16_t *g = (void *)(base + off - 8 + 6);
#else
    uint16_t *g = (void *)(base + off - 8);
#endif
    __atomic_store_n(g, ng, __ATOMIC_RELEASE);
    return ng;
}

/* Bytes the control block needs at arena_off (a constant). */
uint64_t shmobj__arena_control_size(void);

/* Build an empty arena: control block at arena_off, heap after it up to
 * heap_end (exclusive). SHMOBJ_EINVAL if the region is too small. */
int shmobj__arena_init(uint8_t *base, uint64_t mapped, uint64_t arena_off,
                       uint64_t heap_end);

/* Allocate `size` bytes aligned to `align` (power of two, 16..4096; smaller
 * values mean 16). Returns the payload offset and its generation.
 * SHMOBJ_ENOMEM when no free block fits. */
int shmobj__arena_alloc(uint8_t *base, uint64_t mapped, uint64_t arena_off,
                        uint64_t size, uint64_t align, uint64_t *off,
                        uint16_t *gen);

/* Free the block whose payload starts at off and whose generation is gen.
 * SHMOBJ_ESTALE on a generation mismatch or an already free block,
 * SHMOBJ_ECORRUPT when off is not a block of this arena. */
int shmobj__arena_free(uint8_t *base, uint64_t mapped, uint64_t arena_off,
                       uint64_t off, uint16_t gen);

/* Lock-free check of a payload offset: is it a live block with this
 * generation? Returns its usable size. Reads the control block's bounds,
 * the block's header and the next block's boundary tag, all bounds-checked,
 * so it is safe to call without the lock (the answer may be outdated at
 * once). SHMOBJ_ESTALE when the block is free or has another generation,
 * SHMOBJ_ECORRUPT when off cannot be a block of this arena. */
int shmobj__arena_check_ref(const uint8_t *base, uint64_t mapped,
                            uint64_t arena_off, uint64_t off, uint16_t gen,
                            uint64_t *usable);

/* Extend the heap to new_heap_end (rounded down to 16; the caller has made
 * the bytes readable); the new space joins the last block if that one is
 * free. 0 when new_heap_end equals the current end; SHMOBJ_EINVAL when it
 * is smaller, beyond `mapped`, or adds fewer than 32 bytes. */
int shmobj__arena_grow(uint8_t *base, uint64_t mapped, uint64_t arena_off,
                       uint64_t new_heap_end);

/* Walk every block and free list; SHMOBJ_ECORRUPT with *bad_off set to the
 * offset of the first bad block or control field (bad_off may be NULL).
 * Work is bounded by the heap size whatever the bytes hold; never reads
 * outside [base, base + mapped). */
int shmobj__arena_check(const uint8_t *base, uint64_t mapped,
                        uint64_t arena_off, uint64_t *bad_off);

/* Rebuild the free lists and bitmaps from a walk of the block headers (crash
 * recovery after a process died holding the lock): recomputes boundary tags
 * and flags, merges adjacent free blocks, finishes a torn grow. Writes
 * nothing and returns SHMOBJ_ECORRUPT when the size chain itself is broken.
 * Afterwards shmobj__arena_check() passes. */
int shmobj__arena_rebuild(uint8_t *base, uint64_t mapped, uint64_t arena_off);

/* Judge of a cached block's owner for shmobj__arena_rebuild_reclaim():
 * true when the process whose attachment token is `token` is dead, so that
 * nothing but the heap can give its cached blocks back. */
typedef bool (*shmobj__arena_dead_fn)(void *ctx, uint32_t token);

/* shmobj__arena_rebuild(), which also frees every block of a process's
 * allocation cache (CACHED) whose owner `dead` judges dead (NULL: none).
 * Safe while live processes take blocks out of their caches and put
 * blocks in, without the lock: the caller holds the lock, which keeps
 * every other change of the chain out. */
int shmobj__arena_rebuild_reclaim(uint8_t *base, uint64_t mapped,
                                  uint64_t arena_off, shmobj__arena_dead_fn dead,
                                  void *ctx);

/* Fill statistics (see shmobj_arena_stats; out->struct_size set by the
 * caller). Walks the heap. Blocks in processes' allocation caches count as
 * free bytes and free blocks, never as largest_free. fragmentation_permille compares the largest free
 * block with all free bytes, both headers included, so a single free block
 * reads 0. */
int shmobj__arena_stats(const uint8_t *base, uint64_t mapped,
                        uint64_t arena_off, shmobj_arena_stats *out);

#endif /* SHMOBJ_ARENA_H */
