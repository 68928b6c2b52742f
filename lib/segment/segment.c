/* Segment lifecycle: create, open (with the creator/consumer handshake),
 * close, destroy, and the table of attached processes.
 *
 * Handshake. The creator makes the object with O_EXCL, sizes and reserves
 * it, records itself as creator, writes and seals the header, and last
 * stores state = READY (release) and wakes the futex. An opener waits for
 * the name (inotify), for the size (inotify), then for READY (futex, in
 * slices so it notices a creator that died) before it trusts any other
 * field. No step polls with sleeps. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "segment.h"
#include "shmobj/version.h"

#define DEFAULT_SIZE (UINT64_C(64) << 20)
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

static struct shmobj__seg_proc *proc_table(shmobj_segment *seg)
{
    return (struct shmobj__seg_proc *)(seg->space.base + SHMOBJ__SEG_PROCS_OFF);
}

static shmobj_segment *handle_new(int fd, unsigned backend, void *base,
                                  uint64_t max_size, uint64_t mapped)
{
    shmobj_segment *seg = calloc(1, sizeof *seg);
    if (seg == NULL)
        return NULL;
    seg->space.base = base;
    atomic_init(&seg->space.mapped, mapped);
    seg->space.ops = &shmobj__segment_space_ops;
    seg->space.impl = seg;
    seg->hdr = base;
    seg->max_size = max_size;
    seg->fd = fd;
    seg->backend = backend;
    seg->proc_slot = UINT32_MAX;
    pthread_mutex_init(&seg->view_lock, NULL);
    return seg;
}

static void handle_free(shmobj_segment *seg)
{
    shmobj__os_unmap(seg->space.base, seg->max_size);
    if (seg->fd >= 0)
        close(seg->fd);
    pthread_mutex_destroy(&seg->view_lock);
    free(seg);
}

static void attach_changed(shmobj_segment *seg)
{
    atomic_fetch_add_explicit(&seg->hdr->attach_seq, 1, memory_order_release);
    shmobj__os_futex_wake(&seg->hdr->attach_seq, INT32_MAX);
}

/* Record this handle in the process table, reusing entries of processes
 * that died without detaching. */
static int attach(shmobj_segment *seg)
{
    int rc = shmobj__os_proc_self(&seg->self);
    if (rc != 0)
        return rc;
    rc = shmobj__segment_lock(seg);
    if (rc != 0)
        return rc;
    struct shmobj__seg_proc *t = proc_table(seg);
    uint32_t slot = UINT32_MAX;
    for (uint32_t i = 0; i < SHMOBJ__SEG_PROCS && slot == UINT32_MAX; i++) {
        shmobj__os_proc p = {.pid = atomic_load(&t[i].pid),
                             .start_time = t[i].start_time};
        if (p.pid == 0 || !shmobj__os_proc_alive(&p))
            slot = i;
    }
    if (slot != UINT32_MAX) {
        t[slot].start_time = seg->self.start_time;
        atomic_store_explicit(&t[slot].pid, seg->self.pid, memory_order_release);
        seg->proc_slot = slot;
    }
    shmobj__segment_unlock(seg);
    if (slot == UINT32_MAX)
        return SHMOBJ_EFULL;
    attach_changed(seg);
    return 0;
}

static void detach(shmobj_segment *seg)
{
    if (seg->proc_slot == UINT32_MAX)
        return;
    /* A forked child closing an inherited handle must not erase its
     * parent's entry. */
    struct shmobj__seg_proc *e = &proc_table(seg)[seg->proc_slot];
    if (shmobj__segment_lock(seg) == 0) {
        if (atomic_load(&e->pid) == seg->self.pid &&
            e->start_time == seg->self.start_time &&
            (uint32_t)getpid() == seg->self.pid)
            atomic_store_explicit(&e->pid, 0, memory_order_release);
        shmobj__segment_unlock(seg);
    }
    attach_changed(seg);
}

int shmobj_segment_create(const char *name, const shmobj_segment_options *opts,
                          shmobj_segment **out)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    if (out == NULL)
        return SHMOBJ_EINVAL;
    *out = NULL;
    if (opts != NULL) {
        if (opts->struct_size < sizeof o)
            return SHMOBJ_EINVAL;
        o = *opts;
    }
    if (o.backend > SHMOBJ_BACKEND_MEMFD || !name_ok(name, o.backend) ||
        (o.flags & ~(unsigned)(SHMOBJ_SEGMENT_REPLACE | SHMOBJ_SEGMENT_PREFAULT)) != 0 ||
        (o.mode & ~07777u) != 0)
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

    int fd;
    int rc = shmobj__os_obj_create(name, o.backend, o.mode,
                                   (o.flags & SHMOBJ_SEGMENT_REPLACE) != 0, &fd);
    if (rc != 0)
        return rc;
    void *base = NULL;
    rc = shmobj__os_fd_grow(fd, size);
    if (rc == 0)
        rc = shmobj__os_map(fd, max, &base);
    shmobj_segment *seg = NULL;
    if (rc == 0) {
        seg = handle_new(fd, o.backend, base, max, size);
        if (seg == NULL) {
            shmobj__os_unmap(base, max);
            rc = SHMOBJ_ENOMEM;
        }
    }
    if (rc != 0) {
        close(fd);
        if (o.backend != SHMOBJ_BACKEND_MEMFD)
            (void)shmobj__os_obj_unlink(name, o.backend);
        return rc;
    }

    struct shmobj__seg_header *h = seg->hdr;
    /* Creator identity first: an opener that finds us dead from here on
     * reports ENOTREADY instead of waiting for its whole timeout. */
    (void)shmobj__os_proc_self(&h->creator);
    h->header_size = sizeof *h;
    h->layout_sig = shmobj__seg_layout_signature();
    h->max_size = max;
    h->arena_off = SHMOBJ__SEG_ARENA_OFF;
    h->procs_off = SHMOBJ__SEG_PROCS_OFF;
    h->roots_off = SHMOBJ__SEG_ROOTS_OFF;
    h->procs_max = SHMOBJ__SEG_PROCS;
    h->roots_max = SHMOBJ__SEG_ROOTS;
    h->backend = o.backend;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->created_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    h->format_version = SHMOBJ_FORMAT_VERSION;
    rc = shmobj__os_mutex_init(&h->lock);
    if (rc == 0)
        rc = shmobj__seg_heap_init(seg, size);
    if (rc == 0 && (o.flags & SHMOBJ_SEGMENT_PREFAULT) != 0)
        rc = shmobj__os_prefault(seg->space.base, size);
    if (rc == 0) {
        atomic_store_explicit(&h->size, size, memory_order_relaxed);
        shmobj__seg_header_seal(h);
        h->magic = SHMOBJ__SEG_MAGIC;
        atomic_store_explicit(&h->state, SHMOBJ__SEG_STATE_READY,
                              memory_order_release);
        shmobj__os_futex_wake(&h->state, INT32_MAX);
        rc = attach(seg);
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

/* Wait for READY, giving up when the recorded creator has died. */
static int wait_ready(struct shmobj__seg_header *h, uint64_t deadline)
{
    for (;;) {
        if (atomic_load_explicit(&h->state, memory_order_acquire) ==
            SHMOBJ__SEG_STATE_READY)
            return 0;
        shmobj__os_proc creator = h->creator;
        if (creator.pid != 0 && !shmobj__os_proc_alive(&creator))
            return SHMOBJ_ENOTREADY;
        uint64_t now = shmobj__os_now_ns();
        if (now >= deadline)
            return SHMOBJ_ETIMEDOUT;
        uint64_t slice = deadline - now < CREATOR_CHECK_NS
                             ? deadline
                             : now + CREATOR_CHECK_NS;
        int rc = shmobj__os_futex_wait(&h->state, SHMOBJ__SEG_STATE_INIT, slice);
        if (rc != 0 && rc != SHMOBJ_ETIMEDOUT)
            return rc;
    }
}

/* Attach to the object behind fd (owned by this call from here on). */
static int open_fd(int fd, const char *name, unsigned backend,
                   uint64_t deadline, shmobj_segment **out)
{
    uint64_t file_size;
    int rc = shmobj__os_fd_size(fd, &file_size);
    if (rc == 0 && file_size < SHMOBJ__SEG_HEADER_SIZE) {
        /* Created but not sized yet: the creator is between O_EXCL and
         * ftruncate. */
        rc = name != NULL ? shmobj__os_obj_wait_size(name, backend, fd,
                                                      SHMOBJ__SEG_HEADER_SIZE,
                                                      deadline)
                          : SHMOBJ_ENOTREADY;
        if (rc == 0)
            rc = shmobj__os_fd_size(fd, &file_size);
    }
    void *base = NULL;
    if (rc == 0)
        rc = shmobj__os_map(fd, SHMOBJ__SEG_HEADER_SIZE, &base);
    if (rc != 0) {
        close(fd);
        return rc;
    }
    struct shmobj__seg_header *h = base;
    rc = wait_ready(h, deadline);
    uint64_t max = 0;
    if (rc == 0) {
        rc = shmobj__os_fd_size(fd, &file_size);
        if (rc == 0)
            rc = shmobj__seg_header_validate(h, file_size);
        max = h->max_size;
    }
    shmobj__os_unmap(base, SHMOBJ__SEG_HEADER_SIZE);
    if (rc == 0)
        rc = shmobj__os_map(fd, max, &base);
    if (rc != 0) {
        close(fd);
        return rc;
    }
    shmobj_segment *seg = handle_new(fd, backend, base, max, file_size);
    if (seg == NULL) {
        shmobj__os_unmap(base, max);
        close(fd);
        return SHMOBJ_ENOMEM;
    }
    /* Validate again on the real mapping: the header could have been
     * rewritten between the two mappings. */
    rc = shmobj__seg_header_validate(seg->hdr, file_size);
    if (rc == 0 && seg->hdr->max_size != max)
        rc = SHMOBJ_ECORRUPT;
    if (rc == 0)
        rc = attach(seg);
    if (rc != 0) {
        handle_free(seg);
        return rc;
    }
    *out = seg;
    return 0;
}

int shmobj_segment_open(const char *name, unsigned backend, int64_t timeout_ns,
                        shmobj_segment **out)
{
    if (out == NULL)
        return SHMOBJ_EINVAL;
    *out = NULL;
    if (backend > SHMOBJ_BACKEND_FILE || !name_ok(name, backend))
        return SHMOBJ_EINVAL;
    uint64_t deadline = shmobj__os_deadline(timeout_ns);
    int fd;
    int rc;
    while ((rc = shmobj__os_obj_open(name, backend, &fd)) == SHMOBJ_ENOTFOUND &&
           timeout_ns != 0) {
        rc = shmobj__os_obj_wait_exists(name, backend, deadline);
        if (rc != 0)
            return rc;
    }
    if (rc != 0)
        return rc;
    return open_fd(fd, name, backend, deadline, out);
}

int shmobj_segment_open_fd(int fd, int64_t timeout_ns, shmobj_segment **out)
{
    if (out == NULL)
        return SHMOBJ_EINVAL;
    *out = NULL;
    if (fd < 0)
        return SHMOBJ_EINVAL;
    int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0)
        return errno == EBADF ? SHMOBJ_EINVAL : SHMOBJ_ESYS;
    return open_fd(dup_fd, NULL, SHMOBJ_BACKEND_MEMFD,
                   shmobj__os_deadline(timeout_ns), out);
}

int shmobj_segment_fd(const shmobj_segment *seg, int *fd)
{
    if (seg == NULL || fd == NULL)
        return SHMOBJ_EINVAL;
    *fd = seg->fd;
    return 0;
}

void shmobj_segment_close(shmobj_segment *seg)
{
    if (seg == NULL)
        return;
    detach(seg);
    handle_free(seg);
}

int shmobj_segment_destroy(const char *name, unsigned backend)
{
    if (backend > SHMOBJ_BACKEND_FILE || !name_ok(name, backend))
        return SHMOBJ_EINVAL;
    return shmobj__os_obj_unlink(name, backend);
}

/* Live entries of the process table other than `self_slot`. */
static unsigned count_attached(shmobj_segment *seg, uint32_t self_slot)
{
    struct shmobj__seg_proc *t = proc_table(seg);
    unsigned n = 0;
    for (uint32_t i = 0; i < SHMOBJ__SEG_PROCS; i++) {
        shmobj__os_proc p = {.pid = atomic_load(&t[i].pid),
                             .start_time = t[i].start_time};
        if (i != self_slot && p.pid != 0 && shmobj__os_proc_alive(&p))
            n++;
    }
    return n;
}

int shmobj_segment_wait_attached(shmobj_segment *seg, unsigned count,
                                 int64_t timeout_ns)
{
    if (seg == NULL)
        return SHMOBJ_EINVAL;
    uint64_t deadline = shmobj__os_deadline(timeout_ns);
    for (;;) {
        /* Read the sequence before counting: an attach after the count
         * changes it and the futex wait returns at once. */
        uint32_t seq =
            atomic_load_explicit(&seg->hdr->attach_seq, memory_order_acquire);
        if (count_attached(seg, seg->proc_slot) >= count)
            return 0;
        int rc = shmobj__os_futex_wait(&seg->hdr->attach_seq, seq, deadline);
        if (rc != 0)
            return rc;
    }
}

int shmobj_segment_prefault(shmobj_segment *seg)
{
    if (seg == NULL)
        return SHMOBJ_EINVAL;
    uint64_t size = atomic_load_explicit(&seg->hdr->size, memory_order_acquire);
    /* widen this process's view to the published size first */
    int rc = shmobj__segment_extend(&seg->space, size);
    if (rc != 0)
        return rc;
    return shmobj__os_prefault(seg->space.base, size);
}

int shmobj_segment_info_get(shmobj_segment *seg, shmobj_segment_info *info)
{
    if (seg == NULL || info == NULL || info->struct_size < sizeof *info)
        return SHMOBJ_EINVAL;
    info->format_version = seg->hdr->format_version;
    info->size = atomic_load_explicit(&seg->hdr->size, memory_order_acquire);
    info->max_size = seg->max_size;
    info->attached = count_attached(seg, UINT32_MAX);
    info->backend = seg->backend;
    return 0;
}
