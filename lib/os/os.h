/* The operating-system interface of libshmobj: the only layer that calls
 * the system (shm_open, mmap, futex, fcntl locks, clocks, inotify, file
 * descriptors, threads), and the home of the library's lock and of
 * liveness. tests/check-layers.sh fails the build's tests when a layer
 * above calls the system itself. Every function returns 0 or a negative
 * SHMOBJ_E* code; SHMOBJ_ESYS leaves errno set. */
#ifndef SHMOBJ_OS_H
#define SHMOBJ_OS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
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
 * when free, else the owner's token (31 bits, non-zero; bit 31 is not
 * written and is ignored when the word is judged). Waiters that sleep
 * announce it in `sleepers` and sleep on that word, so that the release
 * can be one plain store (see os-lock.c). Padded to 64 bytes so it has a
 * line of its own in the structures that embed it. */
#define SHMOBJ__OS_LOCK_SIZE 64
/* Recorded by structures that embed locks: bumped when the meaning of the
 * word changes, so a build of another lock format refuses them. 3: waiters
 * sleep on `sleepers`, the release is a store (2: bit 31 of the word said
 * "contended" and the release was an exchange). */
#define SHMOBJ__OS_LOCK_FORMAT UINT64_C(3)
typedef struct shmobj__os_lock {
    _Alignas(16) _Atomic uint32_t word; /* owner's token or 0; taken by CAS
                                           (acquire), given back by a store
                                           (release) */
    _Atomic uint32_t sleepers; /* 1 while a waiter may sleep on it (futex):
                                  set by waiters before they sleep, cleared
                                  by the release that wakes one; relaxed,
                                  ordered by the barriers of os-lock.c */
    uint8_t pad[SHMOBJ__OS_LOCK_SIZE - 8];
} shmobj__os_lock;
_Static_assert(offsetof(shmobj__os_lock, sleepers) == 4, "lock layout");
_Static_assert(sizeof(shmobj__os_lock) == SHMOBJ__OS_LOCK_SIZE, "lock layout");

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
/* The uncontended case of shmobj__os_lock_acquire(), inline for the
 * allocator's hot path: one CAS of a free word to `self` (a valid token),
 * acquire on success. False when the word was not free: then call
 * shmobj__os_lock_acquire(), which waits, judges the owner and repairs. */
static inline bool shmobj__os_lock_try(shmobj__os_lock *l, uint32_t self)
{
    uint32_t w = 0;
    return atomic_compare_exchange_strong_explicit(&l->word, &w, self,
                                                   memory_order_acquire,
                                                   memory_order_relaxed);
}
/* Process fact, set once by os-lock.c: this process is registered for the
 * waiters' cross-process memory barrier (membarrier(2), global expedited),
 * so its release needs no fence of its own. */
extern _Atomic bool shmobj__os_lock_plain_release;
/* Out of line: the release of a process not (yet) registered (a fence
 * between the store and the look at `sleepers`; registers on first use),
 * and the wake of sleepers (clears `sleepers`, wakes `count` of them). */
void shmobj__os_lock_release_fenced(shmobj__os_lock *l);
void shmobj__os_lock_wake(shmobj__os_lock *l, int count);
/* Give the lock back: one release store of 0, then a look at `sleepers`
 * (a load of the line the store just wrote), and a wake only when someone
 * may sleep. No fence: a waiter makes one for both sides (os-lock.c). */
static inline void shmobj__os_lock_release(shmobj__os_lock *l)
{
    if (__builtin_expect(!atomic_load_explicit(&shmobj__os_lock_plain_release,
                                               memory_order_relaxed), 0)) {
        shmobj__os_lock_release_fenced(l);
        return;
    }
    atomic_store_explicit(&l->word, 0, memory_order_release);
    /* The compiler must not read `sleepers` before the store: the waiters'
     * barrier relies on program order here. */
    atomic_signal_fence(memory_order_seq_cst);
    if (__builtin_expect(atomic_load_explicit(&l->sleepers,
                                              memory_order_relaxed) != 0, 0))
        shmobj__os_lock_wake(l, 1);
}
/* The slow side of a two-party barrier (os-lock.c): a full fence here and
 * on every CPU running a process registered for the locks' barrier, so a
 * peer that stored and then loaded with only a compiler barrier between
 * (a lock's release, a watched structure's change) has its store visible
 * to this thread's next load, or loads what this thread stored before.
 * False when the kernel refused (only this CPU's fence was made). */
bool shmobj__os_barrier_everywhere(void);
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
/* True when this process has one thread, the caller's (/proc/self/stat);
 * false when it has more, or when that cannot be read. */
bool shmobj__os_threads_alone(void);

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

/* Open an existing backing object read-only, to attach to it read-only
 * (a process that may only read it). SHMOBJ_ENOTFOUND if absent. */
int shmobj__os_obj_open_ro(const char *name, unsigned backend, int *fd);

/* True when fd was opened for reading and writing (a descriptor passed
 * read-only can only be mapped read-only). */
bool shmobj__os_fd_writable(int fd);

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

/* Unlink `name` if it still names the object behind fd (a look at the
 * name, then the unlink: the kernel has no call that unlinks a name only
 * if it holds a given inode, so a name replaced between the two system
 * calls is not seen). SHMOBJ_EREPLACED when it names another object (a
 * regular file), SHMOBJ_ENOTSEG when it names no regular file (a
 * symbolic link to the object, say: the object is not what it names),
 * SHMOBJ_ENOTFOUND when it names nothing. */
int shmobj__os_obj_unlink_same(int fd, const char *name, unsigned backend);

/* 1 while `name` still names the object behind fd (0 once it was
 * unlinked or replaced by another object; 1 also when it cannot be told). */
int shmobj__os_fd_named(int fd, const char *name, unsigned backend);

/* Current size of the object behind fd. */
int shmobj__os_fd_size(int fd, uint64_t *size);

/* Nanoseconds since the object behind fd last changed its size or
 * attributes (its status change time, on the realtime clock the kernel
 * stamps it with); 0 when that time lies ahead of now. */
int shmobj__os_fd_age_ns(int fd, uint64_t *age);

/* Grow the object to `size` bytes and reserve its backing store
 * (fallocate), so a full /dev/shm or an empty huge-page pool fails here
 * with SHMOBJ_ENOMEM instead of a SIGBUS on first touch. */
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

/* ---- huge pages ---------------------------------------------------------- */

/* A memfd backed by the huge-page pool (MFD_HUGETLB), sealed against
 * shrinking like every memfd. SHMOBJ_ENOTSUP when the kernel has no
 * hugetlbfs; an empty pool shows only when the object is reserved
 * (shmobj__os_fd_grow gives SHMOBJ_ENOMEM). */
int shmobj__os_memfd_create_huge(const char *name, unsigned mode, int *fd);

/* The page size of the object behind fd: a hugetlbfs file's huge page
 * size, else the system's. Sizes and mapping lengths of the object must be
 * multiples of it. */
int shmobj__os_fd_page_size(int fd, uint64_t *page);

/* Bytes of a transparent huge page (2 MiB on x86-64), 0 without them. */
uint64_t shmobj__os_thp_size(void);

/* True when the kernel gives the tmpfs object behind fd transparent huge
 * pages in a mapping advised with MADV_HUGEPAGE: shmem_enabled (and its
 * PMD-size entry) for memfd, the mount's huge= option for shm and files,
 * overridden by "force" and "deny". */
bool shmobj__os_thp_allowed(int fd, unsigned backend);

/* Map `len` bytes of fd shared and read-write as shmobj__os_map, at an
 * address aligned to `align` (a power of two; 0 for any page), advised
 * for transparent huge pages when `thp`. */
int shmobj__os_map_aligned(int fd, uint64_t len, uint64_t align, bool thp,
                           void **base);

/* shmobj__os_map_aligned() mapped read-only (PROT_READ): a store through
 * it faults, so nothing this process does can change the object. */
int shmobj__os_map_aligned_ro(int fd, uint64_t len, uint64_t align, bool thp,
                              void **base);

/* Grow the object to `size` bytes as shmobj__os_fd_grow, reserving the new
 * pages through the caller's mapping at `base` (which covers `size`) with
 * a populating write, so that a mapping advised for transparent huge pages
 * gets them: fallocate would reserve small pages. SHMOBJ_ENOMEM when the
 * store is full (the object keeps its old size). */
int shmobj__os_fd_grow_mapped(int fd, void *base, uint64_t size);

/* Map every page of [base, base + len) of a shared mapping into this
 * process, writable, so that first accesses take no page fault. Leaves the
 * bytes as they are. */
int shmobj__os_prefault(void *base, uint64_t len);

/* shmobj__os_prefault() for a read-only mapping: the pages are read in
 * (MADV_POPULATE_READ, or a load of each), never written. */
int shmobj__os_prefault_ro(const void *base, uint64_t len);

/* ---- this process only (lib/os/os-local.c) -------------------------------- */

/* Close a descriptor this library opened; errors are of no use here (the
 * descriptor is gone either way on Linux). */
void shmobj__os_fd_close(int fd);
/* A close-on-exec duplicate of fd, or -1 with errno set. */
int shmobj__os_fd_dup(int fd);
/* CLOCK_REALTIME in nanoseconds: timestamps shown to people, never a
 * deadline. */
uint64_t shmobj__os_realtime_ns(void);
/* Give the processor to another thread once. */
void shmobj__os_yield(void);
/* Sleep for ns nanoseconds (interrupted sleeps end early). */
void shmobj__os_sleep_ns(uint64_t ns);

/* A mutex between the threads of one process, for handle state that never
 * lives in shared memory. Never fails once initialised. */
typedef struct shmobj__os_pmutex {
    pthread_mutex_t m;
} shmobj__os_pmutex;
void shmobj__os_pmutex_init(shmobj__os_pmutex *m);
void shmobj__os_pmutex_destroy(shmobj__os_pmutex *m);
void shmobj__os_pmutex_lock(shmobj__os_pmutex *m);
void shmobj__os_pmutex_unlock(shmobj__os_pmutex *m);

#endif /* SHMOBJ_OS_H */
