/* Segment lifecycle: create, open (with the creator/consumer handshake),
 * close, destroy, info.
 *
 * Handshake. The creator makes the object with O_EXCL and at once takes
 * the OFD lock on SHMOBJ__SEG_LIVE_CREATOR, so its liveness is visible
 * from the first instant; then it sizes and reserves the object, writes
 * magic, format version and header size, the rest of the header, seals
 * it, attaches, and last stores state = READY (release) and wakes the
 * futex. An opener waits for the name (inotify), for the size (inotify),
 * judges the magic, then waits for READY (futex) in slices that look at
 * the creator's lock, so a creator that died at any step is reported
 * (SHMOBJ_ENOTREADY) instead of waited for. Nothing trusts the header's
 * other fields before READY.
 *
 * Pages. A segment asked for huge pages gets them from the hugetlb pool
 * (memfd, or any file on hugetlbfs: then every size and mapping length is
 * a multiple of the huge page, which the kernel demands), or as
 * transparent huge pages (tmpfs, where its policy allows: the mapping is
 * aligned and advised, the pages reserved through it), or falls back to
 * system pages. Either way every page of `size` is reserved before the
 * heap may hand it out. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "extstruct.h"
#include "segment.h"
#include "shmobj/version.h"

#define DEFAULT_SIZE (UINT64_C(64) << 20)

void (*shmobj__seg_create_hook)(int step);
void (*shmobj__seg_open_hook)(void);

static void step(int n)
{
    if (shmobj__seg_create_hook != NULL)
        shmobj__seg_create_hook(n);
}
/* How often a waiting opener checks that the creator is still alive. */
#define CREATOR_CHECK_NS (UINT64_C(50) * 1000000)

void shmobj_segment_options_init(shmobj_segment_options *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->backend = SHMOBJ_BACKEND_SHM;
    opts->mode = 0600;
    opts->initial_size = DEFAULT_SIZE;
}

/* Names of shm objects and memfds: 1..SHMOBJ_NAME_MAX of [A-Za-z0-9._-],
 * no leading dot (so no "." or ".." and no hidden files). Files: any
 * non-empty path shorter than PATH_MAX. */
static bool name_ok(const char *name, unsigned backend)
{
    if (name == NULL || name[0] == '\0')
        return false;
    size_t n = strnlen(name, 4096);
    if (backend == SHMOBJ_BACKEND_FILE)
        return n < 4096;
    if (n > SHMOBJ_NAME_MAX || name[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

static shmobj_segment *handle_new(int fd, unsigned backend, const char *name,
                                  void *base, uint64_t max_size,
                                  uint64_t mapped)
{
    shmobj_segment *seg = calloc(1, sizeof *seg);
    if (seg == NULL)
        return NULL;
    if (name != NULL && backend != SHMOBJ_BACKEND_MEMFD &&
        (seg->name = strdup(name)) == NULL) {
        free(seg);
        return NULL;
    }
    seg->space.base = base;
    seg->space.watch_used = shmobj__seg_watch_used(base);
    atomic_init(&seg->space.mapped, mapped);
    seg->space.ops = &shmobj__segment_space_ops;
    seg->space.impl = seg;
    atomic_init(&seg->space.holds, 1); /* the segment handle's own */
    seg->hdr = base;
    seg->max_size = max_size;
    seg->fd = fd;
    atomic_init(&seg->live_fd, -1);
    seg->backend = backend;
    seg->proc_slot = UINT32_MAX;
    shmobj__os_pmutex_init(&seg->view_lock);
    return seg;
}

/* Give the handle its own open file description for its OFD locks. */
static int live_open(shmobj_segment *seg)
{
    int fd = shmobj__seg_reopen(seg);
    if (fd < 0) {
        /* No second description to be had (a memfd without /proc): share
         * the mapping's and give up judging others dead (seg-procs.c). */
        fd = shmobj__os_fd_dup(seg->fd);
        if (fd < 0)
            return SHMOBJ_ESYS;
        seg->live_shared = true;
    }
    atomic_store(&seg->live_fd, fd);
    return 0;
}

/* A read-only handle takes no slot and holds no OFD lock: it records
 * nothing in the segment. Its own description (a duplicate of the
 * mapping's, which holds no lock either) serves to see others' locks, so
 * it judges liveness like any handle; the fork count is registered as
 * an attach would. */
static int ro_attach(shmobj_segment *seg)
{
    int fd = shmobj__os_fd_dup(seg->fd);
    if (fd < 0)
        return SHMOBJ_ESYS;
    atomic_store(&seg->live_fd, fd);
    atomic_store_explicit(&seg->attached_gen, shmobj__os_fork_generation(),
                          memory_order_release);
    return 0;
}

static void handle_free(shmobj_segment *seg)
{
    if (seg->space.base != NULL)
        shmobj__os_unmap(seg->space.base, seg->max_size);
    if (seg->fd >= 0)
        shmobj__os_fd_close(seg->fd);
    int live = atomic_load(&seg->live_fd);
    if (live >= 0)
        shmobj__os_fd_close(live); /* drops this handle's OFD locks */
    shmobj__os_pmutex_destroy(&seg->view_lock);
    free(seg->name);
    free(seg);
}

static unsigned log2_u64(uint64_t v)
{
    unsigned n = 0;
    while (v > 1) {
        v >>= 1;
        n++;
    }
    return n;
}

/* A memfd from the huge-page pool with *size bytes reserved, *size and
 * *max rounded up to its page. SHMOBJ_ENOMEM when the pool is short,
 * SHMOBJ_ENOTSUP without hugetlbfs. */
static int memfd_huge(const char *name, unsigned mode, uint64_t *size,
                      uint64_t *max, int *out)
{
    int fd;
    int rc = shmobj__os_memfd_create_huge(name, mode, &fd);
    if (rc != 0)
        return rc;
    uint64_t gran = 0;
    rc = shmobj__os_fd_page_size(fd, &gran);
    if (rc == 0 && (!shmobj__align_up(*size, gran, size) ||
                    !shmobj__align_up(*max, gran, max) ||
                    *max > SHMOBJ__SEG_MAX_SIZE))
        rc = SHMOBJ_EINVAL;
    if (rc == 0)
        rc = shmobj__os_fd_grow(fd, *size);
    if (rc != 0) {
        shmobj__os_fd_close(fd); /* gives the pool back what was reserved */
        return rc;
    }
    *out = fd;
    return 0;
}

/* Bytes to map to read the header of the object behind fd: a hugetlbfs
 * object maps and unmaps only in whole huge pages. */
static uint64_t header_map_len(int fd)
{
    uint64_t gran = SHMOBJ__SEG_HEADER_SIZE;
    if (shmobj__os_fd_page_size(fd, &gran) != 0 ||
        gran < SHMOBJ__SEG_HEADER_SIZE)
        gran = SHMOBJ__SEG_HEADER_SIZE;
    return gran;
}

/* Rounds of open, judge, unlink before destroy (or a create with REPLACE)
 * gives up on a name that another process replaces again and again. */
#define DESTROY_ROUNDS 8

static int destroy_checked(const char *name, unsigned backend);

int shmobj_segment_create(const char *name, const shmobj_segment_options *opts,
                          shmobj_segment **out)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    if (out == NULL)
        return SHMOBJ_EINVAL;
    *out = NULL;
    /* The options have not grown since the first release. */
    if (opts != NULL && !shmobj__ext_in(&o, sizeof o, opts, sizeof o))
        return SHMOBJ_EINVAL;
    if (o.backend > SHMOBJ_BACKEND_MEMFD || !name_ok(name, o.backend) ||
        (o.flags & ~(unsigned)(SHMOBJ_SEGMENT_REPLACE | SHMOBJ_SEGMENT_PREFAULT |
                               SHMOBJ_SEGMENT_HUGE |
                               SHMOBJ_SEGMENT_HUGE_REQUIRE)) != 0 ||
        (o.mode & ~07777u) != 0)
        return SHMOBJ_EINVAL;
    /* A memfd has no name that another segment could hold. */
    if (o.backend == SHMOBJ_BACKEND_MEMFD && (o.flags & SHMOBJ_SEGMENT_REPLACE))
        return SHMOBJ_EINVAL;
    uint64_t page = shmobj__os_page_size();
    uint64_t size, max;
    if (!shmobj__align_up(o.initial_size, page, &size) ||
        !shmobj__align_up(o.max_size ? o.max_size : o.initial_size, page,
                          &max))
        return SHMOBJ_EINVAL;
    /* The header, tables and arena control must fit with room for a heap. */
    if (size < SHMOBJ__SEG_ARENA_OFF + 4 * page || max < size ||
        max > SHMOBJ__SEG_MAX_SIZE)
        return SHMOBJ_EINVAL;

    bool huge = (o.flags & (SHMOBJ_SEGMENT_HUGE | SHMOBJ_SEGMENT_HUGE_REQUIRE)) != 0;
    bool require = (o.flags & SHMOBJ_SEGMENT_HUGE_REQUIRE) != 0;
    int fd = -1;
    int rc = SHMOBJ_ENOTSUP;
    if (huge && o.backend == SHMOBJ_BACKEND_MEMFD) {
        rc = memfd_huge(name, o.mode, &size, &max, &fd);
        /* An empty pool or no hugetlbfs: fall back unless insisted on. */
        if (rc != 0 && (require || (rc != SHMOBJ_ENOMEM && rc != SHMOBJ_ENOTSUP)))
            return rc;
    }
    /* REPLACE removes only a segment (destroy's rule); a name taken again
     * between that and the exclusive create is judged again. */
    bool replace = (o.flags & SHMOBJ_SEGMENT_REPLACE) != 0;
    for (unsigned i = 0; rc != 0 && i < DESTROY_ROUNDS; i++) {
        if (replace) {
            rc = destroy_checked(name, o.backend);
            /* A name this process may not remove (another user's in a
             * sticky directory) is left to the exclusive create, which
             * says it exists. */
            if (rc != 0 && rc != SHMOBJ_ENOTFOUND && rc != SHMOBJ_EACCES)
                return rc == SHMOBJ_EREPLACED ? SHMOBJ_EEXIST : rc;
        }
        rc = shmobj__os_obj_create(name, o.backend, o.mode, false, &fd);
        if (rc != 0 && (rc != SHMOBJ_EEXIST || !replace))
            return rc;
    }
    if (rc != 0)
        return rc;
    uint64_t gran = page, thp = 0;
    rc = shmobj__os_fd_page_size(fd, &gran);
    if (rc == 0 && gran > page &&
        (!shmobj__align_up(size, gran, &size) ||
         !shmobj__align_up(max, gran, &max) || max > SHMOBJ__SEG_MAX_SIZE))
        rc = SHMOBJ_EINVAL;
    if (rc == 0 && huge && gran == page) {
        thp = shmobj__os_thp_allowed(fd, o.backend) ? shmobj__os_thp_size() : 0;
        /* Whole huge pages: a partial one at the end would be small. */
        if (thp != 0 && (!shmobj__align_up(size, thp, &size) ||
                         !shmobj__align_up(max, thp, &max) ||
                         max > SHMOBJ__SEG_MAX_SIZE))
            rc = SHMOBJ_EINVAL;
        if (thp == 0 && require)
            rc = SHMOBJ_ENOTSUP;
    }
    if (rc != 0) {
        shmobj__os_fd_close(fd);
        if (o.backend != SHMOBJ_BACKEND_MEMFD)
            (void)shmobj__os_obj_unlink(name, o.backend);
        return rc;
    }
    /* From the first instant the name exists, the creator's OFD lock tells
     * openers that someone is setting the object up: a creator killed from
     * here on (during the long reservation of a large segment, say) is
     * seen as gone by the kernel dropping the lock. */
    step(SHMOBJ__SEG_STEP_CREATED);
    shmobj_segment *seg = handle_new(fd, o.backend, name, NULL, max, 0);
    if (seg == NULL) {
        rc = SHMOBJ_ENOMEM;
    } else {
        seg->page = thp != 0 ? thp : gran;
        seg->page_size = seg->page;
        seg->thp = thp != 0;
        rc = live_open(seg);
        if (rc == 0)
            rc = shmobj__os_live_hold(atomic_load(&seg->live_fd),
                                      SHMOBJ__SEG_LIVE_CREATOR);
        seg->creator = rc == 0;
    }
    void *base = NULL;
    if (rc == 0) {
        step(SHMOBJ__SEG_STEP_LOCKED);
        if (thp != 0) {
            /* Reserved through the advised mapping, so the pages are huge. */
            rc = shmobj__os_map_aligned(fd, max, thp, true, &base);
            if (rc == 0) {
                seg->space.base = base;
                rc = shmobj__os_fd_grow_mapped(fd, base, size);
            }
        } else {
            rc = shmobj__os_fd_grow(fd, size);
            if (rc == 0)
                rc = shmobj__os_map_aligned(fd, max, gran > page ? gran : 0,
                                            false, &base);
        }
    }
    if (rc != 0) {
        if (o.backend != SHMOBJ_BACKEND_MEMFD)
            (void)shmobj__os_obj_unlink(name, o.backend);
        if (seg != NULL)
            handle_free(seg); /* closes fd */
        else
            shmobj__os_fd_close(fd);
        return rc;
    }
    seg->space.base = base;
    seg->space.watch_used = shmobj__seg_watch_used(base);
    seg->hdr = base;
    atomic_store(&seg->space.mapped, size);

    step(SHMOBJ__SEG_STEP_SIZED);
    struct shmobj__seg_header *h = seg->hdr;
    /* What it is, first: an opener that maps the header from now on knows
     * it is a segment of this format being set up, not a foreign file. */
    h->format_version = SHMOBJ_FORMAT_VERSION;
    h->header_size = sizeof *h;
    __atomic_store_n(&h->magic, SHMOBJ__SEG_MAGIC, __ATOMIC_RELEASE);
    step(SHMOBJ__SEG_STEP_MAGIC);
    h->creator_pid = shmobj__os_pid();
    h->pages = (uint32_t)log2_u64(seg->page_size) |
               (seg->thp ? SHMOBJ__SEG_PAGES_THP : 0);
    h->layout_sig = shmobj__seg_layout_signature();
    h->max_size = max;
    h->arena_off = SHMOBJ__SEG_ARENA_OFF;
    h->procs_off = SHMOBJ__SEG_PROCS_OFF;
    h->roots_off = SHMOBJ__SEG_ROOTS_OFF;
    h->procs_max = SHMOBJ__SEG_PROCS;
    h->roots_max = SHMOBJ__SEG_ROOTS;
    h->backend = o.backend;
    h->created_ns = shmobj__os_realtime_ns();
    rc = shmobj__seg_heap_init(seg, size);
    if (rc == 0 && (o.flags & SHMOBJ_SEGMENT_PREFAULT) != 0)
        rc = shmobj__os_prefault(seg->space.base, size);
    if (rc == 0) {
        step(SHMOBJ__SEG_STEP_HEAP);
        atomic_store_explicit(&h->size, size, memory_order_relaxed);
        shmobj__seg_header_seal(h);
        rc = shmobj__seg_procs_attach(seg);
    }
    if (rc == 0) {
        step(SHMOBJ__SEG_STEP_ATTACHED);
        atomic_store_explicit(&h->state, SHMOBJ__SEG_STATE_READY,
                              memory_order_release);
        shmobj__os_futex_wake(&h->state, INT32_MAX);
        step(SHMOBJ__SEG_STEP_READY);
    }
    if (rc != 0) {
        if (o.backend != SHMOBJ_BACKEND_MEMFD)
            (void)shmobj__os_obj_unlink(name, o.backend);
        handle_free(seg);
        return rc;
    }
    *out = seg;
    return 0;
}

/* How long after an empty object was made (or last changed) an opener
 * that finds no creator still believes one may be setting it up: the
 * creator takes its lock a few system calls after creating the name, and
 * an opener woken by the creation can run in between. An empty object
 * older than this is abandoned, and SHMOBJ_ENOTREADY is said at once,
 * whatever the timeout; one younger, with a deadline that comes first,
 * is SHMOBJ_ETIMEDOUT (it may yet be set up). */
#define EMPTY_GRACE_NS (UINT64_C(200) * 1000000)

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static bool header_page_zero(const struct shmobj__seg_header *h)
{
    const volatile unsigned char *b = (const volatile unsigned char *)h;
    for (size_t i = 0; i < SHMOBJ__SEG_HEADER_SIZE; i++)
        if (b[i] != 0)
            return false;
    return true;
}

/* Someone holds the creator's OFD lock: the object is being set up. Asked
 * only where the answer matters, not for a segment that is READY. */
static bool creator_alive(int fd)
{
    return shmobj__os_live_probe(fd, SHMOBJ__SEG_LIVE_CREATOR) != 0;
}

/* Wait until the object behind fd is a ready segment of this format, or
 * say why it will not become one. The magic is judged before anything
 * else, and the creator's liveness comes from its OFD lock, so a foreign,
 * empty or abandoned object is an immediate error whatever the timeout. */
static int wait_ready(int fd, const char *name, unsigned backend,
                      uint64_t deadline)
{
    void *base = NULL;
    uint64_t grace = 0;
    uint64_t hdr_len = header_map_len(fd);
    int rc;
    for (;;) {
        uint64_t file_size;
        if ((rc = shmobj__os_fd_size(fd, &file_size)) != 0)
            break;
        uint64_t now = shmobj__os_now_ns();
        if (file_size < SHMOBJ__SEG_HEADER_SIZE) {
            bool creator = creator_alive(fd);
            if (file_size != 0 && !creator) {
                rc = SHMOBJ_ENOTSEG;
                break;
            }
            if (!creator) {
                /* The grace runs from the object's last change, not from
                 * this look: an object left empty long ago is abandoned. */
                uint64_t age = 0;
                if (grace == 0 && (rc = shmobj__os_fd_age_ns(fd, &age)) != 0)
                    break;
                if (grace == 0)
                    grace = now + (age < EMPTY_GRACE_NS ? EMPTY_GRACE_NS - age : 0);
                if (now >= grace || name == NULL) {
                    rc = SHMOBJ_ENOTREADY;
                    break;
                }
            }
            if (now >= deadline) {
                rc = SHMOBJ_ETIMEDOUT;
                break;
            }
            if (name == NULL) {
                rc = SHMOBJ_ENOTREADY;
                break;
            }
            /* inotify on the object: the creator's ftruncate wakes us;
             * slices so a creator that dies first is noticed. */
            rc = shmobj__os_obj_wait_size(
                name, backend, fd, SHMOBJ__SEG_HEADER_SIZE,
                min_u64(deadline, now + (grace ? grace - now : CREATOR_CHECK_NS)));
            if (rc != 0 && rc != SHMOBJ_ETIMEDOUT)
                break;
            continue;
        }
        /* Read-only: the wait only looks (and sleeps on the state's
         * futex, which needs no write access), and works through a
         * descriptor that may only read. */
        if (base == NULL && (rc = shmobj__os_map_ro(fd, hdr_len, &base)) != 0)
            break;
        struct shmobj__seg_header *h = base;
        uint64_t magic = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
        if (magic == SHMOBJ__SEG_MAGIC_SWAPPED) {
            rc = SHMOBJ_ELAYOUT;
            break;
        }
        if (magic == SHMOBJ__SEG_MAGIC) {
            if (__atomic_load_n(&h->format_version, __ATOMIC_RELAXED) !=
                SHMOBJ_FORMAT_VERSION) {
                rc = SHMOBJ_EVERSION;
                break;
            }
            uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
            if (state == SHMOBJ__SEG_STATE_READY) {
                rc = 0;
                break;
            }
            if (state != SHMOBJ__SEG_STATE_INIT) {
                rc = SHMOBJ_ECORRUPT;
                break;
            }
        } else if (magic != 0 || !header_page_zero(h)) {
            rc = SHMOBJ_ENOTSEG;
            break;
        }
        /* A segment being set up (or, with magic 0, about to be). */
        if (!creator_alive(fd)) {
            /* It may have finished and closed since state was read. */
            if (atomic_load_explicit(&h->state, memory_order_acquire) ==
                SHMOBJ__SEG_STATE_READY)
                continue;
            rc = SHMOBJ_ENOTREADY;
            break;
        }
        if (now >= deadline) {
            rc = SHMOBJ_ETIMEDOUT;
            break;
        }
        /* The creator wakes the state futex at READY; the slice bounds how
         * late its death (or its magic, with magic 0) is seen. */
        rc = shmobj__os_futex_wait(&h->state, SHMOBJ__SEG_STATE_INIT,
                                   min_u64(deadline, now + CREATOR_CHECK_NS));
        if (rc != 0 && rc != SHMOBJ_ETIMEDOUT)
            break;
    }
    if (base != NULL)
        shmobj__os_unmap(base, hdr_len);
    return rc;
}

/* Attach to the object behind fd (owned by this call from here on);
 * read-only when `ro`: the object is mapped PROT_READ and the handle
 * takes no attachment slot, no lock and writes nothing (space.h). */
static int open_fd(int fd, const char *name, unsigned backend, bool ro,
                   uint64_t deadline, shmobj_segment **out)
{
    int rc = wait_ready(fd, name, backend, deadline);
    uint64_t file_size = 0, max = 0, gran = 0, thp = 0;
    uint64_t hdr_len = header_map_len(fd);
    uint32_t pages = 0;
    void *base = NULL;
    if (rc == 0)
        rc = shmobj__os_fd_size(fd, &file_size);
    if (rc == 0 && shmobj__seg_open_hook != NULL)
        shmobj__seg_open_hook();
    if (rc == 0)
        rc = shmobj__os_fd_page_size(fd, &gran);
    if (rc == 0)
        rc = shmobj__os_map_ro(fd, hdr_len, &base);
    if (rc == 0) {
        const struct shmobj__seg_header *h = base;
        rc = shmobj__seg_header_validate_fd(h, fd, &file_size);
        max = h->max_size;
        pages = h->pages;
        if (rc == 0 && name == NULL)
            backend = h->backend; /* an inherited or passed descriptor */
        shmobj__os_unmap(base, hdr_len);
    }
    /* The kernel's granule, not the header's word, decides the lengths. */
    if (rc == 0 && max % gran != 0)
        rc = SHMOBJ_ECORRUPT;
    if (rc == 0 && (pages & SHMOBJ__SEG_PAGES_THP) != 0 &&
        gran == shmobj__os_page_size()) {
        thp = shmobj__os_thp_size();
        if (thp > max || max % thp != 0)
            thp = 0;
    }
    uint64_t align = thp != 0 ? thp : (gran > shmobj__os_page_size() ? gran : 0);
    if (rc == 0)
        rc = ro ? shmobj__os_map_aligned_ro(fd, max, align, thp != 0, &base)
                : shmobj__os_map_aligned(fd, max, align, thp != 0, &base);
    if (rc != 0) {
        shmobj__os_fd_close(fd);
        return rc;
    }
    shmobj_segment *seg = handle_new(fd, backend, name, base, max, file_size);
    if (seg == NULL) {
        shmobj__os_unmap(base, max);
        shmobj__os_fd_close(fd);
        return SHMOBJ_ENOMEM;
    }
    seg->page = thp != 0 ? thp : gran;
    seg->thp = thp != 0;
    seg->page_size = thp != 0 && !shmobj__os_thp_allowed(fd, backend) ? gran : seg->page;
    /* Validate again on the real mapping: the header could have been
     * rewritten between the two mappings. */
    rc = shmobj__seg_header_validate_fd(seg->hdr, fd, &file_size);
    if (rc == 0 && (seg->hdr->max_size != max || seg->hdr->backend != backend))
        rc = SHMOBJ_ECORRUPT;
    seg->space.readonly = ro;
    if (rc == 0 && ro)
        rc = ro_attach(seg);
    else if (rc == 0)
        rc = live_open(seg);
    if (rc == 0 && !ro)
        rc = shmobj__seg_procs_attach(seg);
    if (rc != 0) {
        handle_free(seg);
        return rc;
    }
    *out = seg;
    return 0;
}

/* Read-only, asked for or (without SHMOBJ_SEGMENT_RDWR) because the
 * object may only be read: the name is opened read-write first, and
 * read-only when that is refused (SHMOBJ_EACCES). */
int shmobj_segment_open_flags(const char *name, unsigned backend,
                              unsigned flags, int64_t timeout_ns,
                              shmobj_segment **out)
{
    if (out == NULL)
        return SHMOBJ_EINVAL;
    *out = NULL;
    const unsigned both = SHMOBJ_SEGMENT_RDONLY | SHMOBJ_SEGMENT_RDWR;
    if (backend > SHMOBJ_BACKEND_FILE || !name_ok(name, backend) ||
        (flags & ~both) != 0 || (flags & both) == both)
        return SHMOBJ_EINVAL;
    bool ro = (flags & SHMOBJ_SEGMENT_RDONLY) != 0;
    uint64_t deadline = shmobj__os_deadline(timeout_ns);
    int fd;
    int rc;
    for (;;) {
        rc = ro ? shmobj__os_obj_open_ro(name, backend, &fd)
                : shmobj__os_obj_open(name, backend, &fd);
        if (rc == SHMOBJ_EACCES && !ro && !(flags & SHMOBJ_SEGMENT_RDWR)) {
            ro = true;
            continue;
        }
        if (rc != SHMOBJ_ENOTFOUND || timeout_ns == 0)
            break;
        rc = shmobj__os_obj_wait_exists(name, backend, deadline);
        if (rc != 0)
            return rc;
    }
    if (rc != 0)
        return rc;
    return open_fd(fd, name, backend, ro, deadline, out);
}

int shmobj_segment_open(const char *name, unsigned backend, int64_t timeout_ns,
                        shmobj_segment **out)
{
    return shmobj_segment_open_flags(name, backend, 0, timeout_ns, out);
}

int shmobj_segment_open_fd(int fd, int64_t timeout_ns, shmobj_segment **out)
{
    if (out == NULL)
        return SHMOBJ_EINVAL;
    *out = NULL;
    if (fd < 0)
        return SHMOBJ_EINVAL;
    int dup_fd = shmobj__os_fd_dup(fd);
    if (dup_fd < 0)
        return errno == EBADF ? SHMOBJ_EINVAL : SHMOBJ_ESYS;
    /* The backend is the one the header records (any backend's object can
     * be passed as a descriptor). */
    return open_fd(dup_fd, NULL, SHMOBJ_BACKEND_MEMFD,
                   !shmobj__os_fd_writable(dup_fd),
                   shmobj__os_deadline(timeout_ns), out);
}

int shmobj_segment_fd(const shmobj_segment *seg, int *fd)
{
    if (seg == NULL || fd == NULL)
        return SHMOBJ_EINVAL;
    *fd = seg->fd;
    return 0;
}

/* The last hold is gone (the segment handle and every map and queue
 * opened on it are closed): detach and free. */
void shmobj__segment_drop(struct shmobj__space *sp)
{
    shmobj_segment *seg = sp->impl;
    shmobj__seg_cache_close(seg);
    shmobj__seg_procs_detach(seg);
    handle_free(seg);
}

/* Handles outlive their segment (space.h): what they still hold stays
 * mapped and attached until the last of them is closed; meanwhile they
 * answer SHMOBJ_ESTALE. */
void shmobj_segment_close(shmobj_segment *seg)
{
    if (seg == NULL)
        return;
    atomic_store_explicit(&seg->space.closed, 1, memory_order_relaxed);
    shmobj__space_release(&seg->space);
}

/* Whether the object behind fd is one a libshmobj creator made, or was
 * making, so that destroy may remove its name (and REPLACE overwrite it):
 * 0 for a segment's magic in either byte order (whatever its version or
 * state: a segment of another release or a damaged one is still ours to
 * remove); for an object whose creator holds its set-up lock; and for the
 * two states a creator that died during set-up leaves, which open
 * reports as SHMOBJ_ENOTREADY and which must stay removable: an empty
 * object, and one sized to whole pages, at least the smallest segment,
 * whose header page is all zero. Anything else is SHMOBJ_ENOTSEG. An
 * empty file, or a zero-filled one of such a size, made by another
 * program, is removed too: nothing in it tells it from an abandoned
 * segment. */
static int judge_ours(int fd)
{
    uint64_t size;
    int rc = shmobj__os_fd_size(fd, &size);
    if (rc != 0)
        return rc;
    if (size == 0 || creator_alive(fd))
        return 0;
    uint64_t hdr_len = header_map_len(fd);
    if (size < hdr_len)
        return SHMOBJ_ENOTSEG;
    void *base;
    if ((rc = shmobj__os_map_ro(fd, hdr_len, &base)) != 0)
        return rc;
    const struct shmobj__seg_header *h = base;
    uint64_t magic = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
    if (magic == SHMOBJ__SEG_MAGIC || magic == SHMOBJ__SEG_MAGIC_SWAPPED)
        rc = 0;
    else if (magic == 0 && header_page_zero(h) &&
             size % shmobj__os_page_size() == 0 &&
             size >= SHMOBJ__SEG_ARENA_OFF + 4 * shmobj__os_page_size())
        rc = 0;
    else
        rc = SHMOBJ_ENOTSEG;
    shmobj__os_unmap(base, hdr_len);
    return rc;
}

struct destroy_ctx {
    const char *name;
    unsigned backend;
};

/* With the object pinned by a read-only descriptor: judge it, then unlink
 * the name only if it still names that object. */
static int destroy_fd(int fd, void *arg)
{
    const struct destroy_ctx *d = arg;
    int rc = judge_ours(fd);
    if (rc == 0)
        rc = shmobj__os_obj_unlink_same(fd, d->name, d->backend);
    return rc;
}

/* Remove the name if it holds a segment (judge_ours()). The object is
 * opened by name and judged through that descriptor, then the name is
 * looked at again (device and inode) just before the unlink: a name
 * replaced meanwhile is judged afresh. What remains open is the moment
 * between that last look and the unlink, one system call: the kernel has
 * no call that unlinks a name only if it holds a given inode, so a
 * process that replaces the name exactly then loses its object. */
static int destroy_checked(const char *name, unsigned backend)
{
    struct destroy_ctx d = {name, backend};
    int rc = SHMOBJ_EREPLACED;
    for (unsigned i = 0; i < DESTROY_ROUNDS && rc == SHMOBJ_EREPLACED; i++)
        rc = shmobj__os_obj_with_ro(name, backend, destroy_fd, &d);
    return rc;
}

int shmobj_segment_destroy(const char *name, unsigned backend)
{
    if (backend > SHMOBJ_BACKEND_FILE || !name_ok(name, backend))
        return SHMOBJ_EINVAL;
    return destroy_checked(name, backend);
}

/* A look for tools (seg-peek.c): the name checked as an open checks it,
 * the object opened read-only by the os layer for the call's duration. */
int shmobj_segment_peek(const char *name, unsigned backend,
                        shmobj_segment_peek_info *info)
{
    if (info == NULL || !shmobj__ext_out_ok(info, sizeof *info) ||
        backend > SHMOBJ_BACKEND_FILE || !name_ok(name, backend))
        return SHMOBJ_EINVAL;
    shmobj_segment_peek_info ours = {.struct_size = sizeof ours};
    struct shmobj__seg_peek p = {.backend = backend, .info = &ours};
    int rc = shmobj__os_obj_with_ro(name, backend, shmobj__seg_peek_fd, &p);
    shmobj__ext_out(info, &ours, sizeof ours);
    return rc;
}
