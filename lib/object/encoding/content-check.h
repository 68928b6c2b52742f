/* Validation of the content of strings and buffers: UTF-8 and the extent a
 * buffer's shape and strides reach. One home for both, used by the writer
 * (on the caller's description), the views (a buffer's extent), the
 * checker and the JSON printer (on segment bytes), so what is written and
 * what is accepted when read are judged by the same code. */
#ifndef SHMOBJ_OBJECT_CONTENT_CHECK_H
#define SHMOBJ_OBJECT_CONTENT_CHECK_H

#include <stdint.h>

#include "bytes.h"

/* Is the UTF-8 in [s, s + n) well formed (no overlong forms, surrogates or
 * values beyond U+10FFFF)? */
int shmobj__utf8_ok(const uint8_t *s, uint64_t n);

/* The same, with the all-ASCII case of short strings (keys, names, URLs)
 * decided inline by one OR of two overlapping loads. */
static inline int shmobj__utf8_ok_inline(const uint8_t *s, uint64_t n)
{
    uint64_t acc;
    if (n >= 8 && n <= 16)
        acc = shmobj__load64(s) | shmobj__load64(s + n - 8);
    else if (n > 16 && n <= 32)
        acc = shmobj__load64(s) | shmobj__load64(s + 8) | shmobj__load64(s + n - 16) |
              shmobj__load64(s + n - 8);
    else if (n >= 4 && n < 8)
        acc = shmobj__load32(s) | shmobj__load32(s + n - 4);
    else if (n == 0)
        return 1;
    else
        return shmobj__utf8_ok(s, n);
    return (acc & UINT64_C(0x8080808080808080)) == 0 || shmobj__utf8_ok(s, n);
}

/* Does every element that shape and strides (bytes, >= 0) reach lie in
 * nbytes? A shape with a zero extent reaches no element. */
int shmobj__buffer_extent_ok(unsigned ndim, const uint64_t *shape,
                             const int64_t *strides, uint64_t itemsize,
                             uint64_t nbytes);

#endif /* SHMOBJ_OBJECT_CONTENT_CHECK_H */
