/**
 * @file shmobj/arena.h
 * @brief Raw blocks of a segment's heap, and offset <-> pointer conversion.
 *
 * The heap of a segment is an O(1) two-level segregated-fit allocator with
 * boundary-tag coalescing. Blocks are addressed by 64-bit references (an
 * offset and a generation), valid in every process that opens the segment.
 * How long a reference to a freed block goes on being refused with
 * SHMOBJ_ESTALE is stated with ::shmobj_ref.
 */
#ifndef SHMOBJ_ARENA_PUBLIC_H
#define SHMOBJ_ARENA_PUBLIC_H

#include <stddef.h>
#include <stdint.h>

#include "shmobj/api.h"
#include "shmobj/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Heap statistics, see shmobj_arena_stats_get(). */
typedef struct shmobj_arena_stats {
    uint32_t struct_size;   /**< sizeof(shmobj_arena_stats), set by caller */
    uint32_t reserved0;     /**< zero */
    uint64_t total_bytes;   /**< bytes of heap, headers included */
    uint64_t used_bytes;    /**< bytes in live blocks, headers included */
    /** bytes in free blocks, headers included; blocks waiting in the
     *  allocation caches of processes count as free */
    uint64_t free_bytes;
    uint64_t largest_free;  /**< usable bytes of the largest free block */
    uint64_t used_blocks;   /**< live blocks */
    uint64_t free_blocks;   /**< free blocks, cached ones included */
    /** 0..1000: 1000 * (1 - largest_free / free_bytes), 0 when no free bytes */
    uint32_t fragmentation_permille;
    uint32_t reserved1;     /**< zero */
} shmobj_arena_stats;

/** @brief Cache-line alignment, for buffers that consumers read with SIMD. */
#define SHMOBJ_ALIGN_CACHELINE 64

/**
 * @brief Allocate a raw block in the segment's heap.
 *
 * Grows a growable segment when no free block fits.
 * @param[in] seg segment
 * @param[in] size bytes wanted (1 or more)
 * @param[in] align alignment, a power of two up to 4096 (0 means 16)
 * @param[out] ref reference to the block
 * @param[out] ptr this process's address of the block, or NULL when not
 *             wanted (saves a shmobj_arena_ptr() call)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, size 0, or a bad alignment
 * @retval SHMOBJ_ENOMEM no room even at the maximum size; see
 *         shmobj_arena_stats_get() for the largest free block
 * @retval SHMOBJ_ECORRUPT the heap is damaged
 * @retval SHMOBJ_EBUSY another live process held the segment lock for
 *         longer than 10 s (it is stopped, or the lock word was damaged to
 *         name it)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (takes the segment lock, unless the
 *       handle's allocation cache serves the call). A block of up to 7,664
 *       bytes aligned to at most 64 is rounded up to its size class (at
 *       most 1/8 more above 512 bytes; shmobj_arena_ptr() tells the usable
 *       size), and one such block that this handle freed may be handed
 *       out again without the segment lock (doc/format-arena.md).
 * @since 0.1
 */
SHMOBJ_API int shmobj_arena_alloc(shmobj_segment *seg, size_t size,
                                  size_t align, shmobj_ref *ref, void **ptr);

/**
 * @brief Free a block.
 * @param[in] seg segment
 * @param[in] ref reference from shmobj_arena_alloc()
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL seg or null ref
 * @retval SHMOBJ_ESTALE the block was already freed (perhaps reused)
 * @retval SHMOBJ_ECORRUPT ref does not name a block of this heap
 * @retval SHMOBJ_EBUSY another live process held the segment lock for
 *         longer than 10 s (it is stopped, or the lock word was damaged to
 *         name it)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (takes the segment lock, unless the
 *       block, of at most 7,696 bytes, goes to the handle's allocation
 *       cache: then every reference to it is stale at once, as after any
 *       free, and the handle's close or a full heap gives it back to all).
 * @since 0.1
 */
SHMOBJ_API int shmobj_arena_free(shmobj_segment *seg, shmobj_ref ref);

/**
 * @brief This process's address of a block, bounds- and generation-checked.
 * @param[in] seg segment
 * @param[in] ref reference to a live block
 * @param[out] ptr address of its first byte
 * @param[out] usable bytes usable at ptr (may exceed the size asked for);
 *             may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or null ref
 * @retval SHMOBJ_ESTALE the block was freed
 * @retval SHMOBJ_ECORRUPT ref is not a block of this segment
 * @note Thread- and process-safe; lock-free. The pointer is valid until the
 *       block is freed or the handle closed.
 * @since 0.1
 */
SHMOBJ_API int shmobj_arena_ptr(shmobj_segment *seg, shmobj_ref ref,
                                void **ptr, size_t *usable);

/**
 * @brief Heap statistics.
 * @param[in] seg segment
 * @param[in,out] stats struct_size set by the caller, the rest filled
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or struct_size too small
 * @retval SHMOBJ_ECORRUPT the heap is damaged
 * @retval SHMOBJ_EBUSY another live process held the segment lock for
 *         longer than 10 s (it is stopped, or the lock word was damaged to
 *         name it)
 * @note Thread- and process-safe (takes the segment lock; walks the heap).
 *       A writable handle first gives the blocks its own allocation cache
 *       holds back to the free lists, so that one process's figures are
 *       exact; other processes' cached blocks count in free_bytes and
 *       free_blocks but not in largest_free.
 * @since 0.1
 */
SHMOBJ_API int shmobj_arena_stats_get(shmobj_segment *seg,
                                      shmobj_arena_stats *stats);

/**
 * @brief Walk and validate every block and free list.
 * @param[in] seg segment
 * @param[out] bad_off offset of the first bad block on SHMOBJ_ECORRUPT; may be
 *             NULL
 * @retval 0 the heap is consistent
 * @retval SHMOBJ_EINVAL seg is NULL
 * @retval SHMOBJ_ECORRUPT it is not
 * @retval SHMOBJ_EBUSY another live process held the segment lock for
 *         longer than 10 s (it is stopped, or the lock word was damaged to
 *         name it)
 * @note Thread- and process-safe (takes the segment lock).
 * @since 0.1
 */
SHMOBJ_API int shmobj_arena_check(shmobj_segment *seg, uint64_t *bad_off);

#ifdef __cplusplus
}
#endif
#endif /* SHMOBJ_ARENA_PUBLIC_H */
