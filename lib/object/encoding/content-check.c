/* Validation of string and buffer content (content-check.h).
 *
 * Invariants kept here:
 * - shmobj__utf8_ok accepts exactly the well-formed UTF-8 of Unicode
 *   (RFC 3629): no overlong form, no surrogate, nothing beyond U+10FFFF,
 *   no truncated sequence; it reads only [s, s + n).
 * - shmobj__buffer_extent_ok computes the last byte an element can reach
 *   with overflow-checked arithmetic, so a hostile shape or stride is
 *   refused, never wrapped into range. */
#include <string.h>

#include "bounds.h"
#include "content-check.h"

int shmobj__utf8_ok(const uint8_t *s, uint64_t n)
{
    uint64_t i = 0;
    /* Fast path: all ASCII (one OR over the words, overlapping at the end). */
    if (n >= 8) {
        uint64_t acc = 0;
        for (; i + 8 <= n; i += 8)
            acc |= shmobj__load64(s + i);
        acc |= shmobj__load64(s + n - 8);
        if ((acc & UINT64_C(0x8080808080808080)) == 0)
            return 1;
        i = 0;
    }
    while (i < n) {
        /* Fast path: eight ASCII bytes at a time. */
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if ((w & UINT64_C(0x8080808080808080)) == 0) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        uint64_t need;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i - 1 < need)
            return 0;
        for (uint64_t k = 1; k <= need; k++) {
            uint8_t cc = s[i + k];
            if ((cc & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (cc & 0x3f);
        }
        /* Overlong forms, surrogates and values beyond U+10FFFF. */
        if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) ||
            (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
            return 0;
        i += need + 1;
    }
    return 1;
}

int shmobj__buffer_extent_ok(unsigned ndim, const uint64_t *shape,
                             const int64_t *strides, uint64_t itemsize,
                             uint64_t nbytes)
{
    uint64_t last = 0, t;
    for (unsigned d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            return 1; /* no element at all */
    }
    for (unsigned d = 0; d < ndim; d++) {
        if (strides[d] < 0 ||
            !shmobj__mul_ok(shape[d] - 1, (uint64_t)strides[d], &t) ||
            !shmobj__add_ok(last, t, &last))
            return 0;
    }
    return shmobj__add_ok(last, itemsize, &t) && t <= nbytes;
}
