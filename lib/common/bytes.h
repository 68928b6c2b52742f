/* Loads and comparisons of short byte strings (keys, names), inlined: a
 * few word loads instead of a call to memcmp, which for keys of a few dozen
 * bytes costs more than the comparison itself. Unaligned loads go through
 * memcpy, which compilers turn into one instruction. */
#ifndef SHMOBJ_BYTES_H
#define SHMOBJ_BYTES_H

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static inline uint64_t shmobj__load64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline uint64_t shmobj__load32(const uint8_t *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

#if defined(__SSE2__)
/* Byte-wise equality of the 16 bytes at a and b, as a mask vector. */
static inline __m128i shmobj__eq16(const uint8_t *a, const uint8_t *b)
{
    return _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)a),
                          _mm_loadu_si128((const __m128i *)(const void *)b));
}
#endif

/* Are the n bytes at a and b equal? Up to 64 bytes by overlapping word
 * (or SSE2 block) loads, longer by memcmp. */
static inline int shmobj__mem_equal(const uint8_t *a, const uint8_t *b, uint64_t n)
{
    if (n >= 8 && n <= 16)
        return ((shmobj__load64(a) ^ shmobj__load64(b)) |
                (shmobj__load64(a + n - 8) ^ shmobj__load64(b + n - 8))) == 0;
    if (n > 16 && n <= 64) {
#if defined(__SSE2__)
        /* overlapping 16-byte blocks: [0,16) and [n-16,n), and for n > 32
         * also [16,32) and [n-32,n-16) */
        __m128i eq = _mm_and_si128(shmobj__eq16(a, b), shmobj__eq16(a + n - 16, b + n - 16));
        if (n > 32)
            eq = _mm_and_si128(eq, _mm_and_si128(shmobj__eq16(a + 16, b + 16),
                                                 shmobj__eq16(a + n - 32, b + n - 32)));
        return _mm_movemask_epi8(eq) == 0xffff;
#else
        uint64_t d = (shmobj__load64(a + n - 8) ^ shmobj__load64(b + n - 8)) |
                     (shmobj__load64(a + n - 16) ^ shmobj__load64(b + n - 16));
        for (uint64_t i = 0; i + 16 < n; i += 16)
            d |= (shmobj__load64(a + i) ^ shmobj__load64(b + i)) |
                 (shmobj__load64(a + i + 8) ^ shmobj__load64(b + i + 8));
        return d == 0;
#endif
    }
    if (n >= 4 && n < 8)
        return ((shmobj__load32(a) ^ shmobj__load32(b)) |
                (shmobj__load32(a + n - 4) ^ shmobj__load32(b + n - 4))) == 0;
    if (n < 4)
        return n == 0 || (a[0] == b[0] && a[n >> 1] == b[n >> 1] && a[n - 1] == b[n - 1]);
    return memcmp(a, b, (size_t)n) == 0;
}

#endif /* SHMOBJ_BYTES_H */
