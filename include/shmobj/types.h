/**
 * @file shmobj/types.h
 * @brief Handle and reference types shared by every area of the API.
 */
#ifndef SHMOBJ_TYPES_H
#define SHMOBJ_TYPES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief An attached segment (one per process and attach). Opaque. */
typedef struct shmobj_segment shmobj_segment;

/** @brief A watch on a map's key or a mutable container (shmobj/watch.h).
 *  Opaque. @since 0.4 */
typedef struct shmobj_watch shmobj_watch;

/**
 * @brief A reference to a block in a segment, valid in every process.
 *
 * The low 48 bits are the block's offset from the segment base, the high 16
 * bits its generation: a reference to a block that was freed is refused with
 * SHMOBJ_ESTALE. Allocations at one offset take consecutive generations, so
 * the reference stays refused through the next 65,535 allocations at its
 * offset and the 65,536th makes it valid again; this holds while the bytes of
 * the block's header are not overwritten, that is unless another allocated
 * block's payload (or a free-list link) has covered the offset since. After
 * that the count there goes on from what those bytes hold, and the reference
 * is refused only if they differ from its generation (doc/format-arena.md,
 * "Generations"). 0 is the null reference.
 */
typedef uint64_t shmobj_ref;

/** @brief The null reference. */
#define SHMOBJ_REF_NULL ((shmobj_ref)0)

/** @brief Wait without limit (a timeout value). */
#define SHMOBJ_FOREVER (-1)

#ifdef __cplusplus
}
#endif
#endif /* SHMOBJ_TYPES_H */
