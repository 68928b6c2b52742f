/* Facts about the processor that tune copies: cache sizes. */
#include <unistd.h>

#include "os.h"

uint64_t shmobj__os_l2_cache_bytes(void)
{
    /* sysconf reads the cache description the C library found (cpuid or
     * sysfs); some virtual machines report none. */
    long n = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return n > 0 ? (uint64_t)n : UINT64_C(1) << 20;
}
