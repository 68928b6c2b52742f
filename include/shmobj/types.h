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

/**
 * @brief A reference to a block in a segment, valid in every process.
 *
 * The low 48 bits are the block's offset from the segment base, the high 16
 * bits its generation: a reference to a block that was freed (and perhaps
 * reused) is refused with SHMOBJ_ESTALE. 0 is the null reference.
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
