/* A 64-bit integer mixer (the murmur3 finaliser): every input bit affects
 * every output bit. Deterministic and unseeded, so every process computes
 * the same value: the object layer's dict indexes and the arena's
 * free-list fingerprints rely on that. */
#ifndef SHMOBJ_MIX_H
#define SHMOBJ_MIX_H

#include <stdint.h>

static inline uint64_t shmobj__mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

#endif /* SHMOBJ_MIX_H */
