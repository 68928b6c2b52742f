/* Structs that grow at their end: every public struct that begins with
 * `uint32_t struct_size` (doc/versioning.md). The caller sets struct_size
 * to the size it was built with; that may be smaller than ours (an older
 * program) or larger (a program built against a newer release). The rules,
 * in one place so every such struct keeps them alike:
 *
 * - a size below the struct's first release is a wrong argument;
 * - input: the caller's prefix is read over our defaults; bytes the caller
 *   has beyond what we know must be 0 (a non-zero one asks for something
 *   this release cannot do, and silently ignoring it would be a lie);
 * - output: we fill our whole struct privately and copy out the part the
 *   caller has room for; the caller's bytes beyond what we know read 0;
 *   struct_size is left as the caller set it. */
#ifndef SHMOBJ_EXTSTRUCT_H
#define SHMOBJ_EXTSTRUCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The size the caller declared in the struct at p. */
static inline uint32_t shmobj__ext_size(const void *p)
{
    uint32_t n;
    memcpy(&n, p, sizeof n);
    return n;
}

/* Copy an input struct of the caller over dst (ours, `known` bytes, already
 * holding the defaults). `first` is the struct's first-release size.
 * Returns false when the size is too small or an unknown byte is set. */
static inline bool shmobj__ext_in(void *dst, size_t known, const void *src,
                                  size_t first)
{
    uint32_t given = shmobj__ext_size(src);
    if (given < first)
        return false;
    const unsigned char *s = src;
    for (size_t i = known; i < given; i++)
        if (s[i] != 0)
            return false;
    uint32_t keep = shmobj__ext_size(dst);
    memcpy(dst, src, given < known ? given : known);
    /* dst now speaks for this release's layout. */
    memcpy(dst, &keep, sizeof keep);
    return true;
}

/* Is the output struct at p large enough to be filled at all? */
static inline bool shmobj__ext_out_ok(const void *p, size_t first)
{
    return shmobj__ext_size(p) >= first;
}

/* Copy our filled struct (`known` bytes, its struct_size ignored) to the
 * caller's, as far as the caller has room, and zero the caller's tail. */
static inline void shmobj__ext_out(void *dst, const void *ours, size_t known)
{
    uint32_t given = shmobj__ext_size(dst);
    size_t n = given < known ? given : known;
    if (n > sizeof given)
        memcpy((unsigned char *)dst + sizeof given,
               (const unsigned char *)ours + sizeof given, n - sizeof given);
    if (given > known)
        memset((unsigned char *)dst + known, 0, given - known);
}

#endif
