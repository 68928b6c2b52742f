/* A look at a segment for tools (shmobj_segment_peek), without attaching.
 *
 * The look must neither change the segment nor be held up by it: the
 * object is opened read-only (by the os layer, for the length of the
 * call), its pages are mapped read-only, no lock word is touched and no
 * wait is made. The header is judged by the rules wait_ready() and
 * open_fd() in segment.c apply, each answered at once: magic first (a
 * foreign object is SHMOBJ_ENOTSEG), then format version and state, and
 * for a READY segment the full validation and the backend. Liveness comes
 * from OFD locks seen through the peeker's own description, which holds
 * none, so every lock it sees is another handle's. The heap walk is the
 * arena's bounds-checked statistics over the read-only mapping: a heap
 * another process changes meanwhile can only make it fail (then the
 * figure is left out), never read outside [0, size). */
#include <string.h>

#include "arena.h"
#include "segment.h"
#include "shmobj/version.h"

/* The header page is all zero: a creator between sizing the object and
 * writing its magic (or one that died there), as wait_ready() sees it. */
static bool page_zero(const struct shmobj__seg_header *h)
{
    const volatile unsigned char *b = (const volatile unsigned char *)h;
    for (size_t i = 0; i < SHMOBJ__SEG_HEADER_SIZE; i++)
        if (b[i] != 0)
            return false;
    return true;
}

/* Handles whose slot byte is locked, among the slots with a pid. */
static uint32_t attached(int fd, const uint8_t *base)
{
    const struct shmobj__seg_proc *t =
        (const struct shmobj__seg_proc *)(base + SHMOBJ__SEG_PROCS_OFF);
    uint32_t n = 0;
    for (uint32_t i = 0; i < SHMOBJ__SEG_PROCS; i++)
        if (atomic_load_explicit(&t[i].pid, memory_order_relaxed) != 0 &&
            shmobj__os_live_probe(fd, SHMOBJ__SEG_LIVE_BASE + i))
            n++;
    return n;
}

/* Judge the header page mapped at h of the object behind fd, of
 * *file_size bytes (read again if it grew since); fills what a READY
 * header tells and returns its size in *size. */
static int judge(const struct shmobj__seg_header *h, int fd, uint64_t *file_size,
                 bool creator, unsigned backend, shmobj_segment_peek_info *info,
                 uint64_t *size)
{
    uint64_t magic = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
    uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
    if (magic == SHMOBJ__SEG_MAGIC_SWAPPED)
        return SHMOBJ_ELAYOUT;
    if (magic != SHMOBJ__SEG_MAGIC) {
        if (magic != 0 || !page_zero(h))
            return SHMOBJ_ENOTSEG;
        return creator ? 0 : SHMOBJ_ENOTREADY; /* all zero */
    }
    info->format_version = __atomic_load_n(&h->format_version, __ATOMIC_RELAXED);
    if (info->format_version != SHMOBJ_FORMAT_VERSION)
        return SHMOBJ_EVERSION;
    if (state == SHMOBJ__SEG_STATE_INIT)
        return 0; /* being set up, or abandoned: the caller tells which */
    if (state != SHMOBJ__SEG_STATE_READY)
        return SHMOBJ_ECORRUPT;
    int rc = shmobj__seg_header_validate_fd(h, fd, file_size);
    if (rc != 0)
        return rc;
    /* as open_fd(): a segment is opened through the backend it was made
     * for (a copy of a shm segment in a file is not one) */
    if (h->backend != backend)
        return SHMOBJ_ECORRUPT;
    info->flags |= SHMOBJ_SEGMENT_PEEK_READY;
    info->max_size = h->max_size;
    info->backend = h->backend;
    info->creator_pid = h->creator_pid;
    info->created_ns = h->created_ns;
    *size = atomic_load_explicit(&h->size, memory_order_acquire);
    info->size = *size;
    return 0;
}

int shmobj__seg_peek_fd(int fd, void *ctx)
{
    struct shmobj__seg_peek *p = ctx;
    shmobj_segment_peek_info *info = p->info;
    uint64_t file_size;
    int rc = shmobj__os_fd_size(fd, &file_size);
    if (rc != 0)
        return rc;
    if (shmobj__seg_open_hook != NULL)
        shmobj__seg_open_hook();
    info->file_size = file_size;
    bool creator = shmobj__os_live_probe(fd, SHMOBJ__SEG_LIVE_CREATOR) != 0;
    if (creator)
        info->flags |= SHMOBJ_SEGMENT_PEEK_CREATOR_ALIVE;
    uint64_t size = 0;
    if (file_size < SHMOBJ__SEG_HEADER_SIZE) {
        if (!creator)
            return file_size == 0 ? SHMOBJ_ENOTREADY : SHMOBJ_ENOTSEG;
    } else {
        void *hp;
        if ((rc = shmobj__os_map_ro(fd, SHMOBJ__SEG_HEADER_SIZE, &hp)) != 0)
            return rc;
        rc = judge(hp, fd, &file_size, creator, p->backend, info, &size);
        shmobj__os_unmap(hp, SHMOBJ__SEG_HEADER_SIZE);
        info->file_size = file_size;
        if (rc != 0)
            return rc;
    }
    if (!(info->flags & SHMOBJ_SEGMENT_PEEK_READY)) {
        if (!creator)
            info->flags |= SHMOBJ_SEGMENT_PEEK_STALE;
        return 0;
    }
    /* Validated: size lies within the object and past the arena's
     * control block. Map just that much for the table and the heap. */
    void *base;
    if ((rc = shmobj__os_map_ro(fd, size, &base)) != 0)
        return rc;
    info->attached = attached(fd, base);
    if (info->attached == 0)
        info->flags |= SHMOBJ_SEGMENT_PEEK_ORPHANED;
    shmobj_arena_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    if (shmobj__arena_stats(base, size, SHMOBJ__SEG_ARENA_OFF, &st) == 0) {
        info->heap_used = st.used_bytes;
        info->flags |= SHMOBJ_SEGMENT_PEEK_USED_KNOWN;
    }
    shmobj__os_unmap(base, size);
    return 0;
}
