/* The golden vectors of tests/test-htcore.c, rebuilt by a vendored copy.
 * Static functions in a header: each example program includes it once. */
#ifndef VENDOR_HTCORE_GOLDEN_H
#define VENDOR_HTCORE_GOLDEN_H

#include <stdint.h>
#include <string.h>

#include "shmobj_htcore.h"

static union {
    uint64_t align;
    unsigned char bytes[64 + 128 + 128 * 12];
} golden_mem;

static int golden_check(void)
{
    static const char text[] =
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!?";
    const uint16_t one = 1;
    shmobj_htcore t;
    uint64_t k;
    unsigned char key[8];
    int i;
    if (shmobj_htcore_hash64(text, 64, 0) != 0x17bddb8dc6df7d4eULL ||
        shmobj_htcore_hash64(text, 17, 0x5eed) != 0x5a733f2bad08c978ULL ||
        shmobj_htcore_hash64(text, 3, 0) != 0xc7eea752c75d6017ULL)
        return 1;
    if (*(const unsigned char *)&one != 1)
        return 0; /* the layout vector is for little-endian hosts */
    memset(golden_mem.bytes, 0xAA, sizeof golden_mem.bytes);
    if (shmobj_htcore_footprint(100, 12) != sizeof golden_mem.bytes ||
        shmobj_htcore_init(&t, golden_mem.bytes, sizeof golden_mem.bytes, 100,
                           8, 4, 0x5eed) != SHMOBJ_HTCORE_OK)
        return 1;
    for (k = 0; k < 100; k++) {
        uint32_t v = (uint32_t)(k * 3 + 1);
        for (i = 0; i < 8; i++)
            key[i] = (unsigned char)(k >> (8 * i));
        if (shmobj_htcore_put(&t, key, &v) != SHMOBJ_HTCORE_OK)
            return 1;
    }
    for (k = 0; k < 100; k += 3) {
        for (i = 0; i < 8; i++)
            key[i] = (unsigned char)(k >> (8 * i));
        if (shmobj_htcore_del(&t, key) != SHMOBJ_HTCORE_OK)
            return 1;
    }
    return shmobj_htcore_hash64(golden_mem.bytes, sizeof golden_mem.bytes, 0) ==
                   0x38705cd23733e723ULL
               ? 0
               : 1;
}

#endif
