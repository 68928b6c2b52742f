/* Facts about an open segment and waits on them: the attached count and
 * its wait, whether the name still names the segment, prefaulting, the
 * info call. Nothing here writes to the segment, so every call works on a
 * read-only handle too (which holds no attachment slot: it counts no
 * handle of its own and is not counted). */
#include <stddef.h>

#include "extstruct.h"
#include "segment.h"

/* How often a wait without news looks at the name again. */
#define LINK_CHECK_NS (UINT64_C(50) * 1000000)

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

int shmobj_segment_wait_attached(shmobj_segment *seg, unsigned count,
                                 int64_t timeout_ns)
{
    if (seg == NULL)
        return SHMOBJ_EINVAL;
    uint64_t deadline = shmobj__os_deadline(timeout_ns);
    uint32_t self;
    /* a read-only handle has no slot to claim first (and none to skip) */
    int rc = seg->space.readonly ? 0 : shmobj__seg_procs_self(seg, &self);
    if (rc != 0)
        return rc;
    for (;;) {
        /* Read the sequence before counting: an attach after the count
         * changes it and the futex wait returns at once. A death changes
         * nothing in the segment, so the wait is sliced to notice it. */
        uint32_t seq =
            atomic_load_explicit(&seg->hdr->attach_seq, memory_order_acquire);
        if (shmobj__seg_procs_count(seg, seg->proc_slot) >= count)
            return 0;
        uint64_t now = shmobj__os_now_ns();
        if (now >= deadline)
            return shmobj__segment_linked(seg) ? SHMOBJ_ETIMEDOUT
                                               : SHMOBJ_EREPLACED;
        rc = shmobj__os_futex_wait(&seg->hdr->attach_seq, seq,
                                   min_u64(deadline, now + LINK_CHECK_NS));
        if (rc != 0 && rc != SHMOBJ_ETIMEDOUT)
            return rc;
        /* a slice passed with nobody new: a wait without a deadline must
         * still end when the name was removed (the consumers it waits for
         * can no longer find the segment) */
        if (rc == SHMOBJ_ETIMEDOUT && !shmobj__segment_linked(seg))
            return SHMOBJ_EREPLACED;
    }
}

bool shmobj__segment_linked(shmobj_segment *seg)
{
    if (seg->backend == SHMOBJ_BACKEND_MEMFD || seg->name == NULL)
        return true; /* no name to lose */
    return shmobj__os_fd_named(seg->fd, seg->name, seg->backend) != 0;
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
    if (seg->space.readonly)
        return shmobj__os_prefault_ro(seg->space.base, size);
    return shmobj__os_prefault(seg->space.base, size);
}

int shmobj_segment_info_get(shmobj_segment *seg, shmobj_segment_info *info)
{
    /* The first release's struct ended before creator_pid. */
    if (seg == NULL || info == NULL ||
        !shmobj__ext_out_ok(info, offsetof(shmobj_segment_info, creator_pid)))
        return SHMOBJ_EINVAL;
    shmobj_segment_info i = {0};
    i.format_version = seg->hdr->format_version;
    i.size = atomic_load_explicit(&seg->hdr->size, memory_order_acquire);
    i.max_size = seg->max_size;
    i.attached = shmobj__seg_procs_count(seg, UINT32_MAX);
    i.backend = seg->backend;
    i.creator_pid = seg->hdr->creator_pid;
    i.created_ns = seg->hdr->created_ns;
    if (shmobj__segment_linked(seg))
        i.flags |= SHMOBJ_SEGMENT_INFO_LINKED;
    if (seg->creator ||
        shmobj__os_live_probe(atomic_load(&seg->live_fd),
                              SHMOBJ__SEG_LIVE_CREATOR))
        i.flags |= SHMOBJ_SEGMENT_INFO_CREATOR_ATTACHED;
    if (seg->space.readonly)
        i.flags |= SHMOBJ_SEGMENT_INFO_READONLY;
    i.page_size = seg->page_size;
    shmobj__ext_out(info, &i, sizeof i);
    return 0;
}
