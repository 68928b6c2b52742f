/* Clocks and futexes.
 *
 * Futex words live in shared segments, so every futex call is the shared
 * (non-private) form. The locks built on them are in os-lock.c. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "os.h"
#include "shmobj/error.h"

_Static_assert(sizeof(_Atomic uint32_t) == sizeof(uint32_t), "futex word");

uint64_t shmobj__os_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t shmobj__os_deadline(int64_t timeout_ns)
{
    if (timeout_ns < 0)
        return UINT64_MAX;
    uint64_t now = shmobj__os_now_ns();
    uint64_t t = (uint64_t)timeout_ns;
    return t > UINT64_MAX - now ? UINT64_MAX : now + t;
}

int shmobj__os_futex_wait(_Atomic uint32_t *word, uint32_t expected,
                          uint64_t deadline)
{
    struct timespec ts, *tsp = NULL;
    if (deadline != UINT64_MAX) {
        /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time, so a
         * retry after EINTR does not stretch the wait. */
        ts.tv_sec = (time_t)(deadline / 1000000000u);
        ts.tv_nsec = (long)(deadline % 1000000000u);
        tsp = &ts;
    }
    long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET, expected,
                      tsp, NULL, FUTEX_BITSET_MATCH_ANY);
    if (rc == 0 || errno == EAGAIN || errno == EINTR)
        return 0;
    if (errno == ETIMEDOUT)
        return SHMOBJ_ETIMEDOUT;
    return SHMOBJ_ESYS;
}

int shmobj__os_futex_wake(_Atomic uint32_t *word, int count)
{
    long n = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, count, NULL, NULL, 0);
    return n > 0 ? (int)n : 0;
}
