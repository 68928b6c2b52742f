/* The operating-system interface of libshmobj: the only layer that calls
 * shm_open, mmap, futex, clocks, inotify and pthread mutexes. Every function
 * returns 0 or a negative SHMOBJ_E* code; SHMOBJ_ESYS leaves errno set. */
#ifndef SHMOBJ_OS_H
#define SHMOBJ_OS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- clocks and deadlines ------------------------------------------------ */

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t shmobj__os_now_ns(void);

/* Turn a relative timeout (negative: forever, 0: do not wait) into an
 * absolute monotonic deadline; UINT64_MAX means forever. */
uint64_t shmobj__os_deadline(int64_t timeout_ns);

/* ---- futexes on shared memory ------------------------------------------- */

/* Sleep while *word == expected, until woken or the monotonic deadline
 * passes. Returns 0 when woken or when the word had already changed (the
 * caller re-checks its condition), SHMOBJ_ETIMEDOUT past the deadline.
 * Process-shared (no FUTEX_PRIVATE_FLAG): the word may live in a segment. */
int shmobj__os_futex_wait(_Atomic uint32_t *word, uint32_t expected,
                          uint64_t deadline);

/* Wake up to `count` sleepers on word (INT32_MAX: all). */
void shmobj__os_futex_wake(_Atomic uint32_t *word, int count);

/* ---- robust process-shared mutexes -------------------------------------- */

/* Bytes reserved for a mutex in shared structures. The layout signature of
 * a segment records the C library and sizeof(pthread_mutex_t) so processes
 * with another mutex layout are refused. */
#define SHMOBJ__OS_MUTEX_SIZE 64
typedef struct shmobj__os_mutex {
    _Alignas(16) unsigned char bytes[SHMOBJ__OS_MUTEX_SIZE];
} shmobj__os_mutex;

int shmobj__os_mutex_init(shmobj__os_mutex *m);
/* 0 when locked; SHMOBJ_EOWNERDEAD when locked but the previous owner died
 * inside its critical section: repair the guarded state, then call
 * shmobj__os_mutex_consistent() before unlocking. SHMOBJ_ECORRUPT when the
 * mutex was left unrecoverable. */
int shmobj__os_mutex_lock(shmobj__os_mutex *m);
/* Non-blocking form: SHMOBJ_EBUSY when held by another. */
int shmobj__os_mutex_trylock(shmobj__os_mutex *m);
void shmobj__os_mutex_consistent(shmobj__os_mutex *m);
void shmobj__os_mutex_unlock(shmobj__os_mutex *m);

/* ---- processes ----------------------------------------------------------- */

/* A process identity that survives pid reuse: pid plus its start time in
 * clock ticks since boot (field 22 of /proc/<pid>/stat). */
typedef struct shmobj__os_proc {
    uint32_t pid;
    uint32_t reserved;
    uint64_t start_time;
} shmobj__os_proc;

/* The calling process's identity (cached per pid, so cheap after fork). */
int shmobj__os_proc_self(shmobj__os_proc *out);

/* False when that process has exited (or its pid now names another). */
bool shmobj__os_proc_alive(const shmobj__os_proc *p);

/* A value to put in layout signatures: identifies the C library and its
 * pthread_mutex_t size. */
uint64_t shmobj__os_libc_signature(void);

#endif /* SHMOBJ_OS_H */
