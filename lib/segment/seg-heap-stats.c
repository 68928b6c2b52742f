/* The heap's statistics and check for the API: under the segment lock
 * for a writable handle (which first gives its own cached blocks back, so
 * that largest_free sees them), by a repeated lock-free walk for a
 * read-only one, which may not take the lock. */
#include "extstruct.h"
#include "seg-cache.h"
#include "segment.h"

/* A read-only handle may not take the lock: it walks the heap as it is,
 * as shmobj_segment_peek() does. A walk that a writer's change made fail
 * is tried again; the same failure at the same place twice in a row is
 * the heap's, and failures that keep moving are SHMOBJ_EBUSY. */
#define RO_WALK_TRIES 8

static int ro_walk(shmobj_segment *seg, shmobj_arena_stats *stats,
                   uint64_t *bad_off)
{
    int last = 0;
    uint64_t last_bad = 0;
    for (unsigned i = 0; i < RO_WALK_TRIES; i++) {
        int rc = shmobj__seg_sync_view(seg);
        uint64_t bad = 0;
        if (rc == 0)
            rc = stats != NULL
                     ? shmobj__arena_stats(seg->space.base, shmobj__seg_mapped(seg),
                                           SHMOBJ__SEG_ARENA_OFF, stats)
                     : shmobj__arena_check(seg->space.base, shmobj__seg_mapped(seg),
                                           SHMOBJ__SEG_ARENA_OFF, &bad);
        if (bad_off != NULL)
            *bad_off = bad;
        if (rc == 0 || (i > 0 && rc == last && bad == last_bad))
            return rc;
        last = rc;
        last_bad = bad;
        shmobj__os_sleep_ns(UINT64_C(1000000));
    }
    return SHMOBJ_EBUSY;
}

int shmobj_arena_stats_get(shmobj_segment *seg, shmobj_arena_stats *stats)
{
    if (seg == NULL || stats == NULL || !shmobj__ext_out_ok(stats, sizeof *stats))
        return SHMOBJ_EINVAL;
    if (seg->space.readonly)
        return ro_walk(seg, stats, NULL);
    int rc = shmobj__segment_lock(seg);
    if (rc != 0)
        return rc;
    (void)shmobj__seg_cache_flush_locked(seg); /* largest_free sees them */
    rc = shmobj__arena_stats(seg->space.base, shmobj__seg_mapped(seg),
                             SHMOBJ__SEG_ARENA_OFF, stats);
    shmobj__segment_unlock(seg);
    return rc;
}

int shmobj_arena_check(shmobj_segment *seg, uint64_t *bad_off)
{
    if (seg == NULL)
        return SHMOBJ_EINVAL;
    uint64_t bad = 0;
    if (seg->space.readonly)
        return ro_walk(seg, NULL, bad_off != NULL ? bad_off : &bad);
    int rc = shmobj__segment_lock(seg);
    if (rc != 0)
        return rc;
    rc = shmobj__arena_check(seg->space.base, shmobj__seg_mapped(seg),
                             SHMOBJ__SEG_ARENA_OFF, &bad);
    shmobj__segment_unlock(seg);
    if (bad_off != NULL)
        *bad_off = bad;
    return rc;
}
