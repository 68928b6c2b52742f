/* Clocks, futexes and robust mutexes.
 *
 * Futex words live in shared segments, so every futex call is the shared
 * (non-private) form. Mutexes are process-shared and robust: a process that
 * dies holding one hands the next locker EOWNERDEAD instead of a deadlock,
 * and that locker repairs the guarded state before marking it consistent. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "os.h"
#include "shmobj/error.h"

_Static_assert(sizeof(pthread_mutex_t) <= SHMOBJ__OS_MUTEX_SIZE,
               "pthread_mutex_t must fit the space reserved in segments");
_Static_assert(_Alignof(pthread_mutex_t) <= 16, "mutex alignment");
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

int shmobj__os_mutex_init(shmobj__os_mutex *m)
{
    pthread_mutexattr_t attr;
    memset(m, 0, sizeof *m);
    if (pthread_mutexattr_init(&attr) != 0)
        return SHMOBJ_ESYS;
    int rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (rc == 0)
        rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = pthread_mutex_init((pthread_mutex_t *)m->bytes, &attr);
    pthread_mutexattr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        return SHMOBJ_ESYS;
    }
    return 0;
}

static int mutex_status(int rc)
{
    switch (rc) {
    case 0:
        return 0;
    case EOWNERDEAD:
        return SHMOBJ_EOWNERDEAD;
    case EBUSY:
        return SHMOBJ_EBUSY;
    case ENOTRECOVERABLE:
        return SHMOBJ_ECORRUPT;
    default:
        errno = rc;
        return SHMOBJ_ESYS;
    }
}

int shmobj__os_mutex_lock(shmobj__os_mutex *m)
{
    return mutex_status(pthread_mutex_lock((pthread_mutex_t *)m->bytes));
}

int shmobj__os_mutex_trylock(shmobj__os_mutex *m)
{
    return mutex_status(pthread_mutex_trylock((pthread_mutex_t *)m->bytes));
}

void shmobj__os_mutex_consistent(shmobj__os_mutex *m)
{
    pthread_mutex_consistent((pthread_mutex_t *)m->bytes);
}

void shmobj__os_mutex_unlock(shmobj__os_mutex *m)
{
    pthread_mutex_unlock((pthread_mutex_t *)m->bytes);
}

uint64_t shmobj__os_libc_signature(void)
{
    /* High byte: which C library laid out pthread_mutex_t; low bytes: its
     * size. A glibc and a musl process must refuse each other's segments. */
#if defined(__GLIBC__)
    uint64_t libc = 1;
#elif defined(__BIONIC__)
    uint64_t libc = 3;
#else
    uint64_t libc = 2; /* musl and others: no identifying macro */
#endif
    return (libc << 56) | (uint64_t)sizeof(pthread_mutex_t);
}
