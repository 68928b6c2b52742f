/**
 * @file shmobj/arena.h
 * @brief Raw blocks of a segment's heap, and offset <-> pointer conversion.
 *
 * The heap of a segment is an O(1) two-level segregated-fit allocator with
 * boundary-tag coalescing. Blocks are addressed by 64-bit references (an
 * offset and a generation), valid in every process that opens the segment.
 */
#ifndef SHMOBJ_ARENA_PUBLIC_H
#define SHMOBJ_ARENA_PUBLIC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Heap statistics, see shmobj_arena_stats(). */
typedef struct shmobj_arena_stats {
    uint32_t struct_size;   /**< sizeof(shmobj_arena_stats), set by caller */
    uint32_t reserved0;     /**< zero */
    uint64_t total_bytes;   /**< bytes of heap, headers included */
    uint64_t used_bytes;    /**< bytes in live blocks, headers included */
    uint64_t free_bytes;    /**< bytes in free blocks, headers included */
    uint64_t largest_free;  /**< usable bytes of the largest free block */
    uint64_t used_blocks;   /**< live blocks */
    uint64_t free_blocks;   /**< free blocks */
    /** 0..1000: 1000 * (1 - largest_free / free_bytes), 0 when no free bytes */
    uint32_t fragmentation_permille;
    uint32_t reserved1;     /**< zero */
} shmobj_arena_stats;

#ifdef __cplusplus
}
#endif
#endif /* SHMOBJ_ARENA_PUBLIC_H */
