/* The operating-system interface of libshmobj: the only layer that calls
 * shm_open, mmap, futex, fcntl locks, the monotonic clock and inotify, and
 * the home of the library's lock and of liveness. (Layers above keep a few
 * process-private pthread mutexes in their handles and read the realtime
 * clock for tools' timestamps.) Every function returns 0 or a negative
 * SHMOBJ_E* code; SHMOBJ_ESYS leaves errno set. */
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

/* ---- the processor -------------------------------------------------------- */

/* Bytes of one core's L2 cache (1 MiB when the system does not say). */
uint64_t shmobj__os_l2_cache_bytes(void);

/* ---- futexes on shared memory ------------------------------------------- */

/* Sleep while *word == expected, until woken or the monotonic deadline
 * passes. Returns 0 when woken or when the word had already changed (the
 * caller re-checks its condition), SHMOBJ_ETIMEDOUT past the deadline.
 * Process-shared (no FUTEX_PRIVATE_FLAG): the word may live in a segment. */
int shmobj__os_futex_wait(_Atomic uint32_t *word, uint32_t expected,
                          uint64_t deadline);

/* Wake up to `count` sleepers on word (INT32_MAX: all); returns how many
 * were woken (0 also on error). */
int shmobj__os_futex_wake(_Atomic uint32_t *word, int count);

/* ---- the library's lock (os-lock.c) ------------------------------------- */

/* A lock in shared memory whose bytes the library validates. The word is 0
 * when free, else the owner's token (31 bits, non-zero) with bit 31 set
 * while others may sleep. Padded to 64 bytes so it has a line of its own
 * in the structures that embed it. */
#define SHMOBJ__OS_LOCK_SIZE 64
/* Recorded by structures that embed locks: bumped when the meaning of the
 * word changes, so a build of another lock format refuses them. */
#define SHMOBJ__OS_LOCK_FORMAT UINT64_C(2)
typedef struct shmobj__os_lock {
    _Alignas(16) _Atomic uint32_t word; /* see above; CAS/exchange */
    uint32_t reserved;                  /* zero */
    uint8_t pad[SHMOBJ__OS_LOCK_SIZE - 8];
} shmobj__os_lock;

/* What a liveness callback says of a lock owner's token. */
enum {
    SHMOBJ__OS_OWNER_BAD = -1,  /* no live lock can hold this word */
    SHMOBJ__OS_OWNER_DEAD = 0,  /* its handle is gone: take the lock over */
    SHMOBJ__OS_OWNER_ALIVE = 1, /* still attached (or not known to be gone) */
};
typedef int (*shmobj__os_owner_fn)(void *ctx, uint32_t owner);

/* Default bound of a lock wait for calls that take no timeout: a live
 * owner holding a lock this long is stuck (stopped, or the lock word was
 * damaged to name it). */
#define SHMOBJ__OS_LOCK_DEFAULT_NS (UINT64_C(10) * 1000000000)

/* Take the lock for `self` (a token: non-zero, bit 31 clear), waiting at
 * most until the monotonic `deadline` (0: SHMOBJ__OS_LOCK_DEFAULT_NS from
 * the first wait). 0 when taken; SHMOBJ_EOWNERDEAD when taken from an
 * owner that died inside its critical section (repair the guarded state,
 * then carry on: the lock is held); SHMOBJ_ETIMEDOUT when a live owner kept
 * it past the deadline (SHMOBJ_EBUSY past the default bound);
 * SHMOBJ_ECORRUPT when the word names no possible owner; SHMOBJ_EINVAL for
 * a bad `self`. */
int shmobj__os_lock_acquire(shmobj__os_lock *l, uint32_t self,
                            uint64_t deadline, shmobj__os_owner_fn owner_state,
                            void *ctx);
void shmobj__os_lock_release(shmobj__os_lock *l);
/* The token in the word (0 when free), for tests and tools. */
uint32_t shmobj__os_lock_owner(const shmobj__os_lock *l);

/* ---- liveness (os-live.c) ---------------------------------------------- */

/* Hold an open-file-description write lock on one byte of the object
 * behind fd (the byte need not exist). The kernel drops it when the last
 * descriptor of that description closes, so also when the process dies.
 * 0 when held; SHMOBJ_EBUSY when another description holds it;
 * SHMOBJ_ENOTSUP when the file system has no such locks. */
int shmobj__os_live_hold(int fd, uint64_t byte);
void shmobj__os_live_drop(int fd, uint64_t byte);
/* 1 when a description other than fd's holds the byte (or when that
 * cannot be told: never treat an unknown as gone), 0 when nobody does. */
int shmobj__os_live_probe(int fd, uint64_t byte);

/* Forks this process has gone through as a child: a handle made under
 * another value was inherited and must attach anew. */
uint32_t shmobj__os_fork_generation(void);
/* The same count for hot paths, inline: valid once shmobj__os_fork_generation()
 * was called in this process (every segment attach calls it, so any code
 * holding a handle may use this). */
extern _Atomic uint32_t shmobj__os_forks;
static inline uint32_t shmobj__os_forks_seen(void)
{
    return atomic_load_explicit(&shmobj__os_forks, memory_order_relaxed);
}
/* getpid(), without a system call after the first. */
uint32_t shmobj__os_pid(void);

/* ---- backing objects and mappings -------------------------------------- */

/* Backends, numbered as enum shmobj_backend (include/shmobj/segment.h). */
#define SHMOBJ__OS_SHM 0
#define SHMOBJ__OS_FILE 1
#define SHMOBJ__OS_MEMFD 2

/* Create a new backing object with O_CREAT | O_EXCL and `mode`; with
 * `replace`, an existing one of that name is unlinked first. memfd objects
 * have no name in any directory; `name` is only their description. */
int shmobj__os_obj_create(const char *name, unsigned backend, unsigned mode,
                          bool replace, int *fd);

/* Open an existing backing object read-write. SHMOBJ_ENOTFOUND if absent. */
int shmobj__os_obj_open(const char *name, unsigned backend, int *fd);

/* Open an existing backing object read-only, call fn(fd, ctx) and close
 * it again; fn's result, or the open's error as shmobj__os_obj_open gives
 * it. For tools that look at a segment without attaching to it
 * (shmobj_segment_peek): the descriptor cannot write, and is gone when
 * the call returns. */
int shmobj__os_obj_with_ro(const char *name, unsigned backend,
                           int (*fn)(int fd, void *ctx), void *ctx);

/* Remove a backing object's name. */
int shmobj__os_obj_unlink(const char *name, unsigned backend);

/* Sleep until `name` exists or the deadline passes (inotify on its
 * directory, no polling). 0 when it exists, SHMOBJ_ETIMEDOUT otherwise. */
int shmobj__os_obj_wait_exists(const char *name, unsigned backend,
                               uint64_t deadline);

/* Sleep until the object's size is at least `size` or the deadline passes
 * (inotify on the object). SHMOBJ_ENOTREADY for objects without a path. */
int shmobj__os_obj_wait_size(const char *name, unsigned backend, int fd,
                             uint64_t size, uint64_t deadline);

/* A new open file description of the object behind fd: by `name` (when
 * not NULL and it still names that object) or through /proc/self/fd.
 * SHMOBJ_ENOTSUP when neither gives the same object. */
int shmobj__os_fd_reopen(int fd, const char *name, unsigned backend,
                         int *out);

/* 1 while `name` still names the object behind fd (0 once it was
 * unlinked or replaced by another object; 1 also when it cannot be told). */
int shmobj__os_fd_named(int fd, const char *name, unsigned backend);

/* Current size of the object behind fd. */
int shmobj__os_fd_size(int fd, uint64_t *size);

/* Grow the object to `size` bytes and reserve its backing store
 * (posix_fallocate), so a full /dev/shm fails here with SHMOBJ_ENOMEM
 * instead of a SIGBUS on first touch. */
int shmobj__os_fd_grow(int fd, uint64_t size);

/* Map `max_size` bytes of fd shared and read-write. Pages beyond the
 * object's current size are reserved address space: the segment layer never
 * touches them before it has grown the object. */
int shmobj__os_map(int fd, uint64_t max_size, void **base);
void shmobj__os_unmap(void *base, uint64_t max_size);
/* Map `len` bytes of fd shared and read-only (a peek that must not be
 * able to change what it looks at). */
int shmobj__os_map_ro(int fd, uint64_t len, void **base);

/* Size of a page. */
uint64_t shmobj__os_page_size(void);

/* Map every page of [base, base + len) of a shared mapping into this
 * process, writable, so that first accesses take no page fault. Leaves the
 * bytes as they are. */
int shmobj__os_prefault(void *base, uint64_t len);

#endif /* SHMOBJ_OS_H */
