/* The segment heap's growth, its view of the object, and the repair of
 * its lock after a holder died.
 *
 * Growth is ordered so that a process killed at any point leaves a state the
 * next locker can finish: (1) grow and reserve the backing object, (2) hand
 * the new bytes to the arena, (3) publish the new size in the header. Repair
 * redoes (2) and (3) from the object's real size; (2) is idempotent. */
#include "arena.h"
#include "seg-cache.h"
#include "segment.h"
#include "step.h"

/* Growth adds at least half the current size, so a run of allocations
 * grows the object O(log n) times. */
#define GROWTH_NUM 3
#define GROWTH_DEN 2

/* Widen this process's view to the heap's published size: another process
 * may have grown the segment, and the arena checks every block against its
 * heap end. The published size is not trusted: extend() checks it against
 * the object's real size. */
int shmobj__seg_sync_view(shmobj_segment *seg)
{
    uint64_t size = atomic_load_explicit(&seg->hdr->size, memory_order_acquire);
    if (size <= shmobj__seg_mapped(seg))
        return 0;
    return shmobj__segment_extend(&seg->space, size);
}

int shmobj__seg_heap_init(shmobj_segment *seg, uint64_t size)
{
    int rc = shmobj__arena_init(seg->space.base, shmobj__seg_mapped(seg),
                                SHMOBJ__SEG_ARENA_OFF, size);
    /* a new object reads as zero: no block has held any of it */
    if (rc == 0)
        atomic_store_explicit(&seg->hdr->untouched, SHMOBJ__SEG_ARENA_OFF,
                              memory_order_relaxed);
    return rc;
}

int shmobj__segment_extend(struct shmobj__space *sp, uint64_t end)
{
    shmobj_segment *seg = sp->impl;
    if (end > seg->max_size)
        return SHMOBJ_ECORRUPT;
    shmobj__os_pmutex_lock(&seg->view_lock);
    uint64_t file_size = 0;
    int rc = shmobj__os_fd_size(seg->fd, &file_size);
    if (rc == 0) {
        /* The whole maximum range is mapped already (os_map); what changes
         * is how much of it is backed by the object and safe to touch. */
        if (file_size > seg->max_size)
            file_size = seg->max_size;
        if (file_size > shmobj__seg_mapped(seg))
            atomic_store_explicit(&sp->mapped, file_size, memory_order_release);
        if (end > file_size)
            rc = SHMOBJ_ECORRUPT;
    }
    shmobj__os_pmutex_unlock(&seg->view_lock);
    return rc;
}

int shmobj__seg_heap_repair(shmobj_segment *seg)
{
    uint64_t file_size;
    int rc = shmobj__segment_extend(&seg->space, 0);
    if (rc == 0)
        rc = shmobj__os_fd_size(seg->fd, &file_size);
    if (rc != 0)
        return rc;
    if (file_size > seg->max_size)
        file_size = seg->max_size;
    uint8_t *base = seg->space.base;
    uint64_t mapped = shmobj__seg_mapped(seg);
    uint64_t heap = atomic_load(&seg->hdr->size);
    /* The dead holder may have made an allocation it did not mark, and the
     * rebuild writes free blocks' links: nothing of today's heap is
     * untouched any more. */
    shmobj__seg_untouched_raise(seg, file_size > heap ? file_size : heap);
    /* Finish a growth the dead owner started; a no-op when the arena
     * already spans the object. It may have died between truncating the
     * object larger and reserving the pages: adopt them only once they are
     * reserved, or a first touch could SIGBUS. */
    bool adopt = file_size > heap && shmobj__os_fd_grow(seg->fd, file_size) == 0;
    if (adopt)
        (void)shmobj__arena_grow(base, mapped, SHMOBJ__SEG_ARENA_OFF, file_size);
    rc = shmobj__seg_cache_rebuild(seg); /* and dead processes' caches */
    if (rc == 0 && adopt)
        atomic_store_explicit(&seg->hdr->size, file_size, memory_order_release);
    return rc;
}

int shmobj__segment_lock_until(shmobj_segment *seg, uint64_t deadline)
{
    int rc = shmobj__seg_lock_word(seg, &seg->hdr->lock, deadline);
    if (rc == SHMOBJ_EOWNERDEAD)
        rc = shmobj__seg_heap_repair(seg); /* idempotent: a repairer that
                                              dies is repaired again */
    else if (rc != 0)
        return rc;
    if (rc == 0)
        rc = shmobj__seg_sync_view(seg);
    if (rc != 0)
        shmobj__seg_unlock_broken(seg, &seg->hdr->lock);
    return rc;
}

int shmobj__segment_lock(shmobj_segment *seg)
{
    return shmobj__segment_lock_until(seg, 0);
}

void shmobj__segment_unlock(shmobj_segment *seg)
{
    shmobj__seg_unlock_word(seg, &seg->hdr->lock);
}

/* Grow the segment so that a free block of `fit` bytes (what
 * shmobj__arena_fit_size() says the retried allocation is sure to be
 * given, its size class's smallest block, not the bare request) lies at
 * the heap's end. Called with the lock held. SHMOBJ_ENOMEM only when even
 * the maximum size could not hold it. */
int shmobj__seg_heap_grow(shmobj_segment *seg, uint64_t fit)
{
    uint64_t size = atomic_load_explicit(&seg->hdr->size, memory_order_relaxed);
    if (size >= seg->max_size)
        return SHMOBJ_ENOMEM;
    SHMOBJ__STEP("segment.grow.locked");
    uint64_t page = shmobj__os_page_size();
    uint64_t want = size / GROWTH_DEN * GROWTH_NUM;
    uint64_t exact, min;
    /* exact: the block and the 16-byte alignment of the heap's new end;
     * min adds a page's slack and rounds to whole pages of the segment's
     * own size (a hugetlbfs object grows only by huge pages, and a partial
     * transparent one would be small). */
    if (!shmobj__add_ok(size, fit, &exact) ||
        !shmobj__add_ok(exact, 64, &exact) ||
        !shmobj__add_ok(exact, 2 * page + 4096, &min) ||
        !shmobj__align_up(min, seg->page, &min) ||
        !shmobj__align_up(want, seg->page, &want))
        return SHMOBJ_ENOMEM;
    if (want < min)
        want = min;
    if (want > seg->max_size)
        want = seg->max_size; /* the maximum, whole pages already */
    if (want < exact)
        return SHMOBJ_ENOMEM; /* even the maximum would not hold it */
    int rc = seg->thp ? shmobj__os_fd_grow_mapped(seg->fd, seg->space.base, want)
                      : shmobj__os_fd_grow(seg->fd, want);
    SHMOBJ__STEP("segment.grow.reserved");
    if (rc == 0)
        rc = shmobj__segment_extend(&seg->space, want);
    if (rc == 0)
        rc = shmobj__arena_grow(seg->space.base, shmobj__seg_mapped(seg),
                                SHMOBJ__SEG_ARENA_OFF, want);
    SHMOBJ__STEP("segment.grow.handed");
    if (rc == 0) {
        shmobj__seg_untouched_raise(seg, size); /* the old sentinel, now inside a block */
        atomic_store_explicit(&seg->hdr->size, want, memory_order_release);
    }
    return rc;
}

