/* Overflow-safe range checks for offsets read from shared memory.
 *
 * Every offset and length that came out of a segment may be garbage written
 * by a buggy, dead or hostile process. These helpers are written so that no
 * intermediate sum can wrap: `off <= size && len <= size - off`. */
#ifndef SHMOBJ_BOUNDS_H
#define SHMOBJ_BOUNDS_H

#include <stdbool.h>
#include <stdint.h>

/* True when [off, off + len) lies inside [0, size). */
static inline bool shmobj__range_ok(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

/* True when x is a multiple of align (align a power of two). */
static inline bool shmobj__aligned(uint64_t x, uint64_t align)
{
    return (x & (align - 1)) == 0;
}

/* Round x up to a multiple of align (a power of two); false on overflow. */
static inline bool shmobj__align_up(uint64_t x, uint64_t align, uint64_t *out)
{
    if (x > UINT64_MAX - (align - 1))
        return false;
    *out = (x + align - 1) & ~(align - 1);
    return true;
}

/* a * b without wrap; false on overflow. */
static inline bool shmobj__mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* a + b without wrap; false on overflow. */
static inline bool shmobj__add_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

#endif /* SHMOBJ_BOUNDS_H */
