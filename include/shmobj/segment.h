/**
 * @file shmobj/segment.h
 * @brief Named shared-memory segments: create, open, close, destroy, grow.
 *
 * A segment is a region of shared memory with a versioned header, a heap
 * (see shmobj/arena.h) and a directory of named roots. One process creates
 * it; others open it by name, waiting until the creator has finished
 * setting it up. Every reference stored inside is an offset, so each process
 * may map the segment at a different address.
 */
#ifndef SHMOBJ_SEGMENT_H
#define SHMOBJ_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "shmobj/arena.h"
#include "shmobj/types.h"

#include "shmobj/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Backing store of a segment. */
enum shmobj_backend {
    SHMOBJ_BACKEND_SHM = 0,  /**< named POSIX shared memory (/dev/shm) */
    SHMOBJ_BACKEND_FILE = 1, /**< a file path (tmpfs, hugetlbfs, disk) */
    SHMOBJ_BACKEND_MEMFD = 2 /**< anonymous memfd: share by fork or fd passing */
};

/** @brief Flags of shmobj_segment_options.flags. */
enum shmobj_segment_flag {
    /** replace an existing segment of the same name instead of failing
     *  (only a segment: see shmobj_segment_destroy()) */
    SHMOBJ_SEGMENT_REPLACE = 1u << 0,
    /** map all the pages of the new segment into the creating process at
     *  once (see shmobj_segment_prefault()) */
    SHMOBJ_SEGMENT_PREFAULT = 1u << 1,
    /** back the segment with huge pages where the system offers them, and
     *  fall back to normal pages where it does not: a memfd takes them
     *  from the huge-page pool (MFD_HUGETLB), or else transparent huge
     *  pages; shm and files on tmpfs take transparent huge pages where
     *  shmem_enabled or the mount's huge= option allows them (every
     *  process that opens the segment advises its mapping too). A file on
     *  hugetlbfs has huge pages with or without this flag. Sizes are
     *  rounded up to the page size; shmobj_segment_info.page_size tells
     *  what was obtained. Pool pages are reserved at creation and growth
     *  like any others: a short pool is SHMOBJ_ENOMEM, never a SIGBUS
     *  @since 0.2 */
    SHMOBJ_SEGMENT_HUGE = 1u << 2,
    /** SHMOBJ_SEGMENT_HUGE without the fall-back: a memfd must get its
     *  pages from the pool (SHMOBJ_ENOMEM when the pool is short,
     *  SHMOBJ_ENOTSUP without hugetlbfs), shm and tmpfs files must be
     *  allowed transparent huge pages (SHMOBJ_ENOTSUP otherwise), other
     *  files must be on hugetlbfs (SHMOBJ_ENOTSUP). Implies
     *  SHMOBJ_SEGMENT_HUGE @since 0.2 */
    SHMOBJ_SEGMENT_HUGE_REQUIRE = 1u << 3,
    /** for shmobj_segment_open_flags() only: attach read-only, even where
     *  the caller may write (see "Read-only handles" at
     *  shmobj_segment_open_flags()) @since 0.4 */
    SHMOBJ_SEGMENT_RDONLY = 1u << 4,
    /** for shmobj_segment_open_flags() only: attach read-write or fail
     *  with SHMOBJ_EACCES, never fall back to a read-only handle
     *  @since 0.4 */
    SHMOBJ_SEGMENT_RDWR = 1u << 5
};

/** @brief Longest segment name, in bytes, without the terminating NUL. */
#define SHMOBJ_NAME_MAX 200

/** @brief Options for shmobj_segment_create(). Set them up with
 *  shmobj_segment_options_init() and change what you need. */
typedef struct shmobj_segment_options {
    /** sizeof(shmobj_segment_options), set by shmobj_segment_options_init().
     *  A program built against a later, longer struct may pass its size if
     *  the fields this release does not know are 0 (doc/versioning.md) */
    uint32_t struct_size;
    uint32_t backend;      /**< enum shmobj_backend */
    uint32_t flags;        /**< enum shmobj_segment_flag bits */
    /** permission bits of the backing object (not narrowed by the umask);
     *  default 0600. A process with read and write permission attaches
     *  read-write; one with read permission only attaches read-only (see
     *  shmobj_segment_open_flags()): 0660 lets the group use the segment,
     *  0640 lets it read, 0644 lets everyone read, and under 0600 everyone
     *  else gets SHMOBJ_EACCES */
    uint32_t mode;
    /** bytes backed at creation, rounded up to the page size; default
     *  64 MiB. The smallest segment is 32 KiB of header and tables plus
     *  four pages of heap (48 KiB with 4 KiB pages) */
    uint64_t initial_size;
    /** address space reserved and largest size the segment may grow to;
     *  default (0) equals initial_size: the segment does not grow */
    uint64_t max_size;
} shmobj_segment_options;

/**
 * @brief Fill options with defaults: shared memory, mode 0600, 64 MiB, no
 *        growth.
 * @param[out] opts options to fill
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API void shmobj_segment_options_init(shmobj_segment_options *opts);

/**
 * @brief Create a new segment and attach to it.
 *
 * Names of the shared-memory backend are 1..SHMOBJ_NAME_MAX bytes of
 * `[A-Za-z0-9._-]`, not starting with a dot; the file backend takes a path;
 * the memfd backend takes a description of the same form as a shm name.
 * The backing memory is reserved at once (fallocate, or a populating write
 * through the mapping for transparent huge pages), so a store that is too
 * small, or a huge-page pool that is short, fails here with SHMOBJ_ENOMEM
 * instead of a SIGBUS later.
 *
 * @param[in] name segment name (see above)
 * @param[in] opts options, or NULL for the defaults
 * @param[out] out the new handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL bad name (see above); initial_size below the
 *         smallest segment or above max_size; unknown flag bits or
 *         backend; mode bits beyond 07777; REPLACE with a memfd;
 *         struct_size below the first release's or a non-zero field this
 *         release does not know
 * @retval SHMOBJ_EEXIST a segment of that name exists (without
 *         SHMOBJ_SEGMENT_REPLACE; with it, the name was taken again under
 *         the call 8 times)
 * @retval SHMOBJ_ENOTSEG SHMOBJ_SEGMENT_REPLACE, and the name holds
 *         something that is not a segment (see shmobj_segment_destroy(),
 *         whose rule REPLACE follows): left alone
 * @retval SHMOBJ_EACCES the store refused creation
 * @retval SHMOBJ_ENOMEM the store has no room for initial_size (with
 *         SHMOBJ_SEGMENT_HUGE_REQUIRE: the huge-page pool is short), or no
 *         memory for the handle
 * @retval SHMOBJ_ENOTSUP SHMOBJ_SEGMENT_HUGE_REQUIRE, and the system gives
 *         this backend no huge pages
 * @retval SHMOBJ_ESYS another system call failed (errno is kept)
 * @note Thread-safe. The handle itself may be used from several threads where
 *       each function says so.
 * @since 0.1
 */
SHMOBJ_API int shmobj_segment_create(const char *name, const shmobj_segment_options *opts,
                          shmobj_segment **out);

/**
 * @brief Attach to an existing segment by name.
 *
 * When the name does not exist yet, or its creator is still setting it up,
 * waits up to timeout_ns for it (inotify and futex; no polling). A caller
 * that may read the segment but not write it gets a read-only handle
 * (see shmobj_segment_open_flags()). A creator
 * that died during set-up is detected: the call fails with
 * SHMOBJ_ENOTREADY and the stale name can be removed with
 * shmobj_segment_destroy().
 *
 * @param[in] name name as given to shmobj_segment_create()
 * @param[in] backend SHMOBJ_BACKEND_SHM or SHMOBJ_BACKEND_FILE
 * @param[in] timeout_ns 0 to fail at once, SHMOBJ_FOREVER, or nanoseconds
 * @param[out] out the new handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL bad name or backend
 * @retval SHMOBJ_ENOTFOUND no such segment (and timeout_ns is 0)
 * @retval SHMOBJ_ETIMEDOUT the segment did not appear or become ready in
 *         time (also an empty object made less than 0.2 s ago whose
 *         creator holds no lock yet, when the timeout is shorter than what
 *         remains of those 0.2 s: a creator takes its lock a few system
 *         calls after it creates the name)
 * @retval SHMOBJ_ENOTREADY nobody is setting it up: its creator died
 *         before finishing, or the object is empty or all zero (at once,
 *         whatever the timeout, once the object is 0.2 s old)
 * @retval SHMOBJ_ENOTSEG the object under that name is not a libshmobj
 *         segment (at once, whatever the timeout)
 * @retval SHMOBJ_EVERSION the segment has another format version
 * @retval SHMOBJ_ELAYOUT it was made by a differently built process
 * @retval SHMOBJ_ECORRUPT its header is damaged (e.g. a state that is
 *         neither set-up nor ready)
 * @retval SHMOBJ_EACCES the caller may not read the object
 * @retval SHMOBJ_EFULL the table of attached processes is full
 * @retval SHMOBJ_ENOMEM no memory for the handle
 * @retval SHMOBJ_ESYS another system call failed (errno is kept)
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_segment_open(const char *name, unsigned backend, int64_t timeout_ns,
                        shmobj_segment **out);

/**
 * @brief Attach to an existing segment by name, read-write or read-only.
 *
 * shmobj_segment_open() is this call with flags 0.
 *
 * Read-only handles. With SHMOBJ_SEGMENT_RDONLY, or without flags when
 * the backing object may be read but not written by the caller (a 0640
 * segment opened by its group, a 0644 one by anyone, a file on a
 * read-only mount), the handle is read-only: the object is opened and
 * mapped for reading only, and nothing the process does through the
 * handle, or through the maps, queues, topics and views opened on it, can
 * change a byte of the segment, take one of its locks or wait on a
 * writer without a bound. It records no attachment: it is not counted in
 * shmobj_segment_info.attached or listed by shmobj_segment_procs_get()
 * (it has no token), and its death leaves nothing to clean up.
 *
 * What works read-only: every view and read of objects (scalars,
 * strings, buffers, lists, dicts, records, mutable containers and their
 * iteration, JSON), the named roots (get, wait, next: read as a
 * sequence-counter reader), the map's copy-out reads (get, get_many,
 * contains, count, iteration, statistics, check), the queue's peeks,
 * count, statistics and check, the topic's statistics, the arena's
 * statistics and check, and the segment's info, procs, prefault and
 * wait_attached. A segment that a writer grows is seen grown, as by any
 * handle. Every call that would write answers SHMOBJ_ERDONLY before it
 * touches the segment: allocations and frees, puts, sets, adds and
 * deletes of objects, maps and mutable containers, the queue's puts,
 * takes, completions and notify descriptors, topic publishing,
 * subscribing and repair, root changes, and shmobj_map_get_view() (a
 * view pins its entry with a reader record the handle may not write:
 * copy the value out with shmobj_map_get()). A read that meets a writer
 * inside its change retries; a writer that stays inside it (stopped, or
 * dead: only a read-write handle repairs) makes the read give up with
 * SHMOBJ_EBUSY after the library's usual bound of 10 s instead of
 * waiting on it.
 *
 * @param[in] name name as given to shmobj_segment_create()
 * @param[in] backend SHMOBJ_BACKEND_SHM or SHMOBJ_BACKEND_FILE
 * @param[in] flags 0, SHMOBJ_SEGMENT_RDONLY or SHMOBJ_SEGMENT_RDWR
 * @param[in] timeout_ns 0 to fail at once, SHMOBJ_FOREVER, or nanoseconds
 * @param[out] out the new handle; shmobj_segment_info_get() tells whether
 *             it is read-only (SHMOBJ_SEGMENT_INFO_READONLY)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL bad name or backend, unknown flag bits, or both
 *         SHMOBJ_SEGMENT_RDONLY and SHMOBJ_SEGMENT_RDWR
 * @retval SHMOBJ_ENOTFOUND no such segment (and timeout_ns is 0)
 * @retval SHMOBJ_ETIMEDOUT as for shmobj_segment_open()
 * @retval SHMOBJ_ENOTREADY as for shmobj_segment_open()
 * @retval SHMOBJ_ENOTSEG the object under that name is not a libshmobj
 *         segment
 * @retval SHMOBJ_EVERSION the segment has another format version
 * @retval SHMOBJ_ELAYOUT it was made by a differently built process
 * @retval SHMOBJ_ECORRUPT its header is damaged
 * @retval SHMOBJ_EACCES the caller may not read the object (with
 *         SHMOBJ_SEGMENT_RDWR: may not read and write it)
 * @retval SHMOBJ_EFULL the table of attached processes is full (read-write
 *         handles only)
 * @retval SHMOBJ_ENOMEM no memory for the handle
 * @retval SHMOBJ_ESYS another system call failed (errno is kept)
 * @note Thread-safe.
 * @since 0.4
 */
SHMOBJ_API int shmobj_segment_open_flags(const char *name, unsigned backend,
                                         unsigned flags, int64_t timeout_ns,
                                         shmobj_segment **out);

/**
 * @brief Attach to a segment through a file descriptor (memfd passed over a
 *        Unix socket, or inherited). The descriptor is duplicated. A
 *        descriptor opened for reading only gives a read-only handle (see
 *        shmobj_segment_open_flags()).
 * @param[in] fd descriptor of the segment's backing object
 * @param[in] timeout_ns how long to wait for the creator's set-up
 * @param[out] out the new handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL fd is negative
 * @retval SHMOBJ_ETIMEDOUT the creator did not finish set-up in time
 * @retval SHMOBJ_ENOTREADY nobody is setting it up (its creator died
 *         before finishing, or the object is empty or all zero)
 * @retval SHMOBJ_ENOTSEG not a libshmobj segment
 * @retval SHMOBJ_EVERSION another format version
 * @retval SHMOBJ_ELAYOUT made by a differently built process
 * @retval SHMOBJ_ECORRUPT damaged header
 * @retval SHMOBJ_EFULL the table of attached processes is full
 * @retval SHMOBJ_ENOMEM no memory for the handle
 * @retval SHMOBJ_ESYS a system call failed (errno is kept)
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_segment_open_fd(int fd, int64_t timeout_ns, shmobj_segment **out);

/**
 * @brief The descriptor of the segment's backing object, for passing to
 *        another process (memfd backend) or for fstat.
 * @param[in] seg segment
 * @param[out] fd descriptor, owned by the handle (do not close it)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL seg or fd is NULL
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_segment_fd(const shmobj_segment *seg, int *fd);

/**
 * @brief Detach and free the handle. The segment itself stays (see
 *        shmobj_segment_destroy()).
 *
 * Handles opened through it may be closed before or after it: maps,
 * queues, map cursors and map views still open keep the mapping and the
 * attachment until the last of them is closed (the segment counts as
 * attached meanwhile), and from this call on they answer SHMOBJ_ESTALE to
 * every call but their close (for a queue: every call that allocates or
 * frees in the heap). Nothing may be called on `seg` afterwards; object
 * views (shmobj_view) hold nothing and are unusable once it is closed.
 * @param[in] seg segment, or NULL (nothing happens)
 * @note Not thread-safe with other uses of the same handle, or of the
 *       handles opened through it.
 * @since 0.1
 */
SHMOBJ_API void shmobj_segment_close(shmobj_segment *seg);

/**
 * @brief Remove a segment's name. Processes still attached keep using it;
 *        the memory is released when the last one detaches.
 *
 * Only a libshmobj segment's name is removed: the object is opened and
 * judged first (a segment's magic, of any format version or byte order,
 * or a creator still setting it up), and the name is unlinked only if it
 * still names the object judged. What a creator that died during set-up
 * leaves (an empty object, or one of whole pages, at least the smallest
 * segment's size, whose header page is all zero: what
 * shmobj_segment_open() reports as SHMOBJ_ENOTREADY) is removed too, so
 * that name can be created again; nothing tells such an object from
 * another program's empty or zero-filled one. A name replaced between the
 * check and the unlink is judged again; the one moment left open is the
 * single system call between the last look at the name and its unlink
 * (the system has no call that unlinks a name only if it holds a given
 * file).
 * @param[in] name segment name
 * @param[in] backend SHMOBJ_BACKEND_SHM or SHMOBJ_BACKEND_FILE
 * @retval 0 success
 * @retval SHMOBJ_EINVAL bad name or backend
 * @retval SHMOBJ_ENOTFOUND no such segment
 * @retval SHMOBJ_ENOTSEG the name holds something else (a file, another
 *         program's shared memory object, a symbolic link): left alone
 * @retval SHMOBJ_EREPLACED the name was replaced under the call again and
 *         again (8 times): left alone
 * @retval SHMOBJ_EACCES permission denied
 * @retval SHMOBJ_ESYS another system call failed (errno is kept)
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_segment_destroy(const char *name, unsigned backend);

/**
 * @brief Wait until at least `count` other processes have attached (opened
 *        the segment and not yet closed it or died).
 * @param[in] seg segment
 * @param[in] count number of attached processes besides the caller's handle
 * @param[in] timeout_ns 0, SHMOBJ_FOREVER or nanoseconds
 * @retval 0 that many are attached
 * @retval SHMOBJ_EINVAL seg is NULL
 * @retval SHMOBJ_ETIMEDOUT fewer attached in time
 * @retval SHMOBJ_EREPLACED the segment's name was removed or now names
 *         another segment: noticed at the deadline, or within 50 ms of the
 *         removal by a wait without one (nobody new can attach)
 * @retval SHMOBJ_ECORRUPT the table of processes is damaged
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_segment_wait_attached(shmobj_segment *seg, unsigned count,
                                 int64_t timeout_ns);

/** @brief Bits of shmobj_segment_info.flags. */
enum shmobj_segment_info_flag {
    /** the segment's name still refers to this segment (always set for
     *  memfd segments, which have no name): clear once it was removed
     *  with shmobj_segment_destroy() or replaced by a new segment made
     *  with SHMOBJ_SEGMENT_REPLACE */
    SHMOBJ_SEGMENT_INFO_LINKED = 1u << 0,
    /** the process that created the segment still has its handle open */
    SHMOBJ_SEGMENT_INFO_CREATOR_ATTACHED = 1u << 1,
    /** this handle is read-only (see shmobj_segment_open_flags()): it is
     *  not counted in `attached` @since 0.4 */
    SHMOBJ_SEGMENT_INFO_READONLY = 1u << 2
};

/** @brief Facts about a segment, see shmobj_segment_info_get(). */
typedef struct shmobj_segment_info {
    uint32_t struct_size;    /**< sizeof(shmobj_segment_info), set by caller */
    uint32_t format_version; /**< SHMOBJ_FORMAT_VERSION of the segment */
    uint64_t size;           /**< bytes currently backed */
    uint64_t max_size;       /**< largest size it may grow to */
    uint32_t attached;       /**< handles attached now, caller's included
                                  (a read-only handle is not counted) */
    uint32_t backend;        /**< enum shmobj_backend */
    /** pid of the creating process, as its own PID namespace numbers it
     *  (informational: another namespace may number it differently)
     *  @since 0.2 */
    uint32_t creator_pid;
    uint32_t flags;          /**< enum shmobj_segment_info_flag bits @since 0.2 */
    /** creation time, CLOCK_REALTIME nanoseconds since the epoch
     *  @since 0.2 */
    uint64_t created_ns;
    /** bytes of one page of the segment's memory: the system page (4096),
     *  a huge-page pool's page (hugetlbfs, memfd with
     *  SHMOBJ_SEGMENT_HUGE), or the transparent huge page size where
     *  those were asked for and allowed (the kernel then gives them where
     *  it finds free 2 MiB ranges, and small pages elsewhere) @since 0.2 */
    uint64_t page_size;
} shmobj_segment_info;

/**
 * @brief Facts about a segment.
 *
 * A process attached to a segment keeps using it after its name was
 * removed or replaced, and a consumer waiting on it would wait for ever
 * for a producer that now uses the new segment. `flags` tells: when
 * SHMOBJ_SEGMENT_INFO_LINKED is clear, close the handle and open the name
 * again. Blocking waits on such a segment (queue takes, puts and
 * completion waits, shmobj_segment_wait_attached()) return
 * SHMOBJ_EREPLACED instead of SHMOBJ_ETIMEDOUT when their deadline passes.
 * A wait without a deadline waits for ever, as asked: give long waits a
 * timeout and look at the flags when it passes.
 * @param[in] seg segment
 * @param[in,out] info struct_size set by the caller, the rest filled (a
 *                caller built against 0.1 passes the shorter struct and
 *                gets its fields only)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or struct_size too small
 * @note Thread-safe. Costs a few system calls (it looks at the name).
 * @since 0.1
 */
SHMOBJ_API int shmobj_segment_info_get(shmobj_segment *seg, shmobj_segment_info *info);

/**
 * @brief Map every page of the segment's current size into this process
 *        now, so that first touches later take no page fault.
 *
 * A process maps the pages of a segment lazily: the first access to each
 * 4 KiB page (each huge page, in a segment of huge pages: far fewer) costs
 * a fault (about a microsecond), which a latency-sensitive
 * producer or consumer may rather pay up front, e.g. right after
 * shmobj_segment_open(). Touches no byte's value and is safe while other
 * processes use the segment. Pages added by later growth are not included:
 * call it again after the segment grew.
 * @param[in] seg segment
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL seg
 * @retval SHMOBJ_ENOMEM the system could not map the pages
 * @retval SHMOBJ_ECORRUPT the published size exceeds the backing object
 * @note Thread-safe. Costs time in proportion to the size (roughly
 *       0.1 s per GiB).
 * @since 0.1
 */
SHMOBJ_API int shmobj_segment_prefault(shmobj_segment *seg);

/** @brief Longest root name, in bytes, without the terminating NUL.
 *
 * Root names form one namespace for every kind of root: a queue's or a
 * map's root is named exactly as the queue or map, so one name names at
 * most one root, of one kind. */
#define SHMOBJ_ROOT_NAME_MAX 47

/**
 * @brief Publish a reference under a name so unrelated processes find it.
 *        Replaces an earlier reference of that name (which is not freed).
 * @param[in] seg segment
 * @param[in] name 1..SHMOBJ_ROOT_NAME_MAX bytes, NUL-terminated
 * @param[in] ref the reference to publish (not SHMOBJ_REF_NULL)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, empty or too long name, null ref
 * @retval SHMOBJ_ESTALE ref names a block of the heap that was freed (its
 *         generation is no longer the block's); nothing was published
 * @retval SHMOBJ_EFULL the root directory is full
 * @retval SHMOBJ_ECORRUPT the root directory is damaged
 * @retval SHMOBJ_EBUSY another live process held the segment lock for
 *         longer than 10 s (it is stopped, or the lock word was damaged to
 *         name it)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (takes the segment lock).
 * @since 0.1
 */
SHMOBJ_API int shmobj_segment_root_set(shmobj_segment *seg, const char *name,
                                       shmobj_ref ref);

/**
 * @brief Publish a reference under a name that must not exist yet: of two
 *        processes adding the same name at once, exactly one succeeds.
 * @param[in] seg segment
 * @param[in] name 1..SHMOBJ_ROOT_NAME_MAX bytes, NUL-terminated
 * @param[in] ref the reference to publish (not SHMOBJ_REF_NULL)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, empty or too long name, null ref
 * @retval SHMOBJ_ESTALE ref names a freed block, as for
 *         shmobj_segment_root_set()
 * @retval SHMOBJ_EEXIST a root of that name exists (it is left unchanged)
 * @retval SHMOBJ_EFULL the root directory is full
 * @retval SHMOBJ_ECORRUPT the root directory is damaged
 * @retval SHMOBJ_EBUSY another live process held the segment lock for
 *         longer than 10 s (it is stopped, or the lock word was damaged to
 *         name it)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (takes the segment lock).
 * @since 0.1
 */
SHMOBJ_API int shmobj_segment_root_add(shmobj_segment *seg, const char *name,
                                       shmobj_ref ref);

/**
 * @brief Look up a named root.
 * @param[in] seg segment
 * @param[in] name root name
 * @param[out] ref the published reference
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_ENOTFOUND no root of that name
 * @retval SHMOBJ_ECORRUPT the root directory is damaged
 * @retval SHMOBJ_EBUSY another live process held the segment lock for
 *         longer than 10 s (it is stopped, or the lock word was damaged to
 *         name it)
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_segment_root_get(shmobj_segment *seg, const char *name,
                                       shmobj_ref *ref);

/**
 * @brief Wait until a named root exists, then return its reference.
 *
 * For a process that may start before the one that publishes the root:
 * returns at once when the root exists, else sleeps until the root
 * directory changes (every shmobj_segment_root_add(),
 * shmobj_segment_root_set() and shmobj_segment_root_del(), and so every
 * queue or map creation, wakes the sleepers through a futex in the
 * segment's header), looks again, and so on until the root appears or the
 * timeout passes. It never polls: between changes of the directory it
 * uses no CPU. shmobj_queue_open_timed() and shmobj_map_open_timed() are
 * built on it.
 * @param[in] seg segment
 * @param[in] name root name, 1..SHMOBJ_ROOT_NAME_MAX bytes
 * @param[in] timeout_ns 0 to look once, SHMOBJ_FOREVER, or nanoseconds
 * @param[out] ref the published reference
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_ETIMEDOUT no root of that name appeared in time (also
 *         when another process held the segment lock past the deadline)
 * @retval SHMOBJ_ECORRUPT the segment lock's word or the published size
 *         of the heap is damaged
 * @retval SHMOBJ_EFULL the handle, inherited through fork(), could not
 *         attach anew: the table of attached processes is full
 * @retval SHMOBJ_EBUSY with SHMOBJ_FOREVER only: another live process
 *         held the segment lock for longer than 10 s (it is stopped, or
 *         the lock word was damaged to name it)
 * @note Thread- and process-safe. Segments written only by builds older
 *       than 0.2 do not wake the sleepers: their roots are found at the
 *       first look or at the next change made by a newer build.
 * @since 0.2
 */
SHMOBJ_API int shmobj_segment_root_wait(shmobj_segment *seg, const char *name,
                                        int64_t timeout_ns, shmobj_ref *ref);

/**
 * @brief Remove a named root (the object it names is not freed).
 * @param[in] seg segment
 * @param[in] name root name
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_ENOTFOUND no root of that name
 * @retval SHMOBJ_EBUSY another live process held the segment lock for
 *         longer than 10 s (it is stopped, or the lock word was damaged to
 *         name it)
 * @retval SHMOBJ_ECORRUPT the root directory or the segment lock is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (takes the segment lock).
 * @since 0.1
 */
SHMOBJ_API int shmobj_segment_root_del(shmobj_segment *seg, const char *name);

/* ---- looking into a segment (tools) -------------------------------------- */

/** @brief Bits of shmobj_segment_peek_info.flags. */
enum shmobj_segment_peek_flag {
    /** the creator finished setting the segment up: the header is
     *  complete and was validated */
    SHMOBJ_SEGMENT_PEEK_READY = 1u << 0,
    /** the creating process still has its handle open (or is still
     *  setting the segment up), as its OFD lock says */
    SHMOBJ_SEGMENT_PEEK_CREATOR_ALIVE = 1u << 1,
    /** stale: not ready and its creator is gone, so nobody will make it
     *  ready (shmobj_segment_open() gives SHMOBJ_ENOTREADY); remove it
     *  with shmobj_segment_destroy() */
    SHMOBJ_SEGMENT_PEEK_STALE = 1u << 2,
    /** orphaned: ready, but no handle is attached to it any more (its
     *  name and memory stay until someone destroys it) */
    SHMOBJ_SEGMENT_PEEK_ORPHANED = 1u << 3,
    /** heap_used holds a figure (clear when the heap changed under the
     *  walk or is damaged, see shmobj_segment_peek()) */
    SHMOBJ_SEGMENT_PEEK_USED_KNOWN = 1u << 4
};

/** @brief What shmobj_segment_peek() finds. */
typedef struct shmobj_segment_peek_info {
    uint32_t struct_size;    /**< sizeof(shmobj_segment_peek_info), set by
                                  the caller */
    uint32_t flags;          /**< enum shmobj_segment_peek_flag bits */
    uint64_t file_size;      /**< bytes of the backing object */
    uint64_t size;           /**< bytes the heap uses (0 when not ready) */
    uint64_t max_size;       /**< largest size it may grow to (0 when not
                                  ready) */
    uint64_t heap_used;      /**< bytes in live heap blocks, headers
                                  included (with
                                  SHMOBJ_SEGMENT_PEEK_USED_KNOWN) */
    uint64_t created_ns;     /**< creation time, CLOCK_REALTIME ns (0 when
                                  not ready) */
    uint32_t format_version; /**< SHMOBJ_FORMAT_VERSION of the segment */
    uint32_t backend;        /**< enum shmobj_backend the creator recorded */
    /** pid of the creating process in its own PID namespace (0 when not
     *  ready); informational, liveness comes from OFD locks */
    uint32_t creator_pid;
    uint32_t attached;       /**< handles attached now */
} shmobj_segment_peek_info;

/**
 * @brief Look at a segment by name without attaching to it.
 *
 * For tools that list segments: opens the backing object read-only, maps
 * it read-only, judges the header as shmobj_segment_open() would, counts
 * the attached handles by their OFD locks and walks the heap for its use,
 * and never waits, writes or takes a lock: what it looks at is left
 * exactly as it was. A segment that is still being set up, or whose
 * creator died during set-up, is reported with 0 and its flags, not
 * waited for.
 * @param[in] name name as given to shmobj_segment_create()
 * @param[in] backend SHMOBJ_BACKEND_SHM or SHMOBJ_BACKEND_FILE
 * @param[in,out] info struct_size set by the caller, the rest filled
 * @retval 0 a libshmobj segment, ready or not (see info->flags)
 * @retval SHMOBJ_EINVAL NULL info, struct_size too small, bad name or
 *         backend
 * @retval SHMOBJ_ENOTFOUND no such name
 * @retval SHMOBJ_EACCES the caller may not read it
 * @retval SHMOBJ_ENOTSEG the object is not a libshmobj segment (another
 *         program's file, or a symlink under /dev/shm)
 * @retval SHMOBJ_ENOTREADY the object is empty or all zero and nobody is
 *         setting it up: a creator that died before writing anything, or
 *         an empty file of someone else's
 * @retval SHMOBJ_EVERSION the segment has another format version
 * @retval SHMOBJ_ELAYOUT it was made by a differently built process
 * @retval SHMOBJ_ECORRUPT its header is damaged, or names another
 *         backend than the one given (a copy of a segment made for another)
 * @retval SHMOBJ_ENOMEM no address space to map it
 * @retval SHMOBJ_ESYS another system call failed (errno is kept)
 * @note Thread- and process-safe. The figures are a snapshot: the heap
 *       walk takes no lock, so heap_used is left out (flag clear) when
 *       another process changed the heap during the walk.
 * @since 0.2
 */
SHMOBJ_API int shmobj_segment_peek(const char *name, unsigned backend,
                                   shmobj_segment_peek_info *info);

/** @brief Bits of shmobj_segment_proc.flags. */
enum shmobj_segment_proc_flag {
    /** this is the caller's own handle */
    SHMOBJ_SEGMENT_PROC_SELF = 1u << 0,
    /** this handle created the segment and still has it open (for other
     *  processes' handles told by the creator's pid, so informational) */
    SHMOBJ_SEGMENT_PROC_CREATOR = 1u << 1
};

/** @brief One attached handle, see shmobj_segment_procs_get(). */
typedef struct shmobj_segment_proc {
    /** pid of its process, as that process's PID namespace numbers it
     *  (informational) */
    uint32_t pid;
    /** its attachment token: the word that names it in lock words and
     *  in the records it owns (doc/format.md, "Process table") */
    uint32_t token;
    uint64_t attached_ns; /**< when it attached, CLOCK_REALTIME ns */
    uint32_t slot;        /**< its index in the process table */
    uint32_t flags;       /**< enum shmobj_segment_proc_flag bits */
} shmobj_segment_proc;

/**
 * @brief The handles attached to a segment now.
 *
 * Lists every slot of the process table whose handle is alive by its OFD
 * lock (the caller's own handle included, flagged), in slot order.
 * @param[in] seg segment
 * @param[out] procs where the entries go (may be NULL when cap is 0)
 * @param[in] cap entries available at procs
 * @param[out] count handles attached (also on SHMOBJ_ENOBUFS)
 * @retval 0 success: procs[0 .. *count) filled
 * @retval SHMOBJ_EINVAL NULL seg or count, or NULL procs with cap > 0
 * @retval SHMOBJ_ENOBUFS more than cap are attached: the first cap are
 *         filled, *count says how many there are
 * @note Thread- and process-safe; lock-free (one fcntl per occupied
 *       slot). A snapshot: handles come and go meanwhile.
 * @since 0.2
 */
SHMOBJ_API int shmobj_segment_procs_get(shmobj_segment *seg,
                                        shmobj_segment_proc *procs,
                                        size_t cap, size_t *count);

/** @brief What a root names, as told by the first bytes of its block. */
enum shmobj_root_kind {
    SHMOBJ_ROOT_RAW = 0,    /**< a live block that is none of the others */
    SHMOBJ_ROOT_QUEUE = 1,  /**< a queue (shmobj/queue.h) */
    SHMOBJ_ROOT_MAP = 2,    /**< a map (shmobj/map.h) */
    SHMOBJ_ROOT_OBJECT = 3, /**< a typed object (shmobj/object.h) */
    SHMOBJ_ROOT_STALE = 4,  /**< the block it names was freed */
    SHMOBJ_ROOT_BAD = 5,    /**< the reference names no block of the heap */
    /** a topic (shmobj/topic.h); before 0.4 a topic was told as RAW
     *  @since 0.4 */
    SHMOBJ_ROOT_TOPIC = 6,
    /** a service's table of calls (shmobj/service.h); its queue of calls
     *  is the root `NAME/calls`, told as a queue
     *  @since 0.4 */
    SHMOBJ_ROOT_SERVICE = 7
};

/** @brief One named root, see shmobj_segment_root_next(). */
typedef struct shmobj_root_info {
    uint32_t struct_size; /**< sizeof(shmobj_root_info), set by the caller */
    uint32_t kind;        /**< enum shmobj_root_kind */
    shmobj_ref ref;       /**< the published reference */
    uint64_t bytes;       /**< usable bytes of its block (0 unless live) */
    char name[SHMOBJ_ROOT_NAME_MAX + 1]; /**< NUL-terminated */
} shmobj_root_info;

/**
 * @brief The next named root of the segment's directory.
 *
 * Start with *cursor = 0 and call until SHMOBJ_ENOTFOUND. The kind comes
 * from the block's magic (a queue's ring, a map's control block, an
 * object's header, a topic's header, a service's table); whether the root
 * is sound is what opening or checking it as that kind says.
 * @param[in] seg segment
 * @param[in,out] cursor position in the directory: 0 at first, moved past
 *                the entry returned (or past a damaged one)
 * @param[in,out] info struct_size set by the caller, the rest filled
 * @retval 0 success
 * @retval SHMOBJ_ENOTFOUND no more roots
 * @retval SHMOBJ_EINVAL NULL argument or struct_size too small
 * @retval SHMOBJ_ECORRUPT the entry at the cursor has a name that is
 *         empty or not terminated within its field (the cursor moved past
 *         it), or the
 *         segment lock's word or the published size of the heap is
 *         damaged
 * @retval SHMOBJ_EFULL the handle, inherited through fork(), could not
 *         attach anew: the table of attached processes is full
 * @retval SHMOBJ_EBUSY another live process held the segment lock for
 *         longer than 10 s (it is stopped, or the lock word was damaged to
 *         name it)
 * @note Thread- and process-safe (takes the segment lock for each entry).
 *       Roots added or removed during a walk may or may not be seen; the
 *       others are seen once each.
 * @since 0.2
 */
SHMOBJ_API int shmobj_segment_root_next(shmobj_segment *seg, uint32_t *cursor,
                                        shmobj_root_info *info);

#ifdef __cplusplus
}
#endif
#endif /* SHMOBJ_SEGMENT_H */
