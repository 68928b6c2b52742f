/* The allocation cache's slow paths (seg-cache.h has the fast ones): the
 * flush of a handle's cache back to the heap, the reclaim of dead
 * processes' cached blocks, and the judge of their owners.
 *
 * Invariants: a flush runs with the segment lock held and the cache's
 * try-lock taken, so no other thread of this process uses the cache and
 * no other process changes the chain; a cached block goes back through
 * the heap's ordinary free, after shmobj__arena_cache_get() took it out
 * of the cache (a block a repair freed meanwhile is skipped). The reclaim
 * frees only blocks whose payload names a token the process table calls
 * dead (never on a guess: "alive" when liveness cannot be seen). */
#include "seg-cache.h"

/* The dead-process walk is a rebuild of the whole heap: at most this often
 * per handle, so that allocations failing at the maximum size stay cheap.
 * A dead process holds at most SEG_CACHE_MAX_BYTES back until then. */
#define SEG_CACHE_RECLAIM_NS UINT64_C(100000000)
/* How long a close waits for the segment lock to give its blocks back. */
#define SEG_CACHE_CLOSE_NS INT64_C(100000000)

bool shmobj__seg_cache_flush_locked(shmobj_segment *seg)
{
    struct shmobj__seg_cache *k = &seg->cache;
    if (!seg_cache_enter(seg, k))
        return false;
    bool any = false;
    while (seg_cache_bits(k) != 0) {
        unsigned c = (unsigned)__builtin_ctzll(seg_cache_bits(k));
        uint64_t h;
        uint16_t gen;
        if (seg_cache_take(seg->space.base, k, c, MIN_BLOCK, &h, &gen) != 0)
            continue;
        /* An error leaves the block used: the heap check names it. */
        if (shmobj__arena_free(seg->space.base, shmobj__seg_mapped(seg),
                               SHMOBJ__SEG_ARENA_OFF, h + HDR, gen) == 0)
            any = true;
    }
    seg_cache_leave(k);
    return any;
}

/* Verdicts of one walk, so that a dead process's many blocks cost one
 * probe of its slot, not one each. */
#define VERDICTS 8
struct verdicts {
    shmobj_segment *seg;
    unsigned n;
    uint32_t token[VERDICTS];
    bool dead[VERDICTS];
};

static bool verdict(void *ctx, uint32_t token)
{
    struct verdicts *v = ctx;
    for (unsigned i = 0; i < v->n && i < VERDICTS; i++)
        if (v->token[i] == token)
            return v->dead[i];
    bool dead = shmobj__seg_cache_owner_dead(v->seg, token);
    unsigned i = v->n++ % VERDICTS;
    v->token[i] = token;
    v->dead[i] = dead;
    return dead;
}

bool shmobj__seg_cache_owner_dead(void *ctx, uint32_t token)
{
    return shmobj__seg_procs_state(ctx, token) == SHMOBJ__OS_OWNER_DEAD;
}

int shmobj__seg_cache_rebuild(shmobj_segment *seg)
{
    struct verdicts v = {.seg = seg};
    return shmobj__arena_rebuild_reclaim(seg->space.base, shmobj__seg_mapped(seg),
                                         SHMOBJ__SEG_ARENA_OFF, verdict, &v);
}

bool shmobj__seg_cache_reclaim_locked(shmobj_segment *seg)
{
    bool any = shmobj__seg_cache_flush_locked(seg);
    uint64_t now = shmobj__os_now_ns();
    struct shmobj__seg_cache *k = &seg->cache;
    /* the stamp is a hint: a race between threads costs one walk more */
    uint64_t last = __atomic_load_n(&k->reclaim_ns, __ATOMIC_RELAXED);
    if (last != 0 && now - last < SEG_CACHE_RECLAIM_NS)
        return any;
    __atomic_store_n(&k->reclaim_ns, now, __ATOMIC_RELAXED);
    return shmobj__seg_cache_rebuild(seg) == 0 || any;
}

void shmobj__seg_cache_close(shmobj_segment *seg)
{
    if (seg->space.readonly || seg_cache_bits(&seg->cache) == 0)
        return;
    /* A forked child's inherited cache holds its parent's blocks: the
     * flush finds them foreign (seg_cache_enter()) and gives none back;
     * but it must not attach the child just to find that out. */
    if (atomic_load_explicit(&seg->attached_gen, memory_order_acquire) !=
        shmobj__os_forks_seen())
        return;
    /* A close does not wait long for a lock another process holds: left
     * cached, the blocks are a detached token's, which the next rebuild
     * gives back. */
    if (shmobj__segment_lock_until(seg, shmobj__os_deadline(SEG_CACHE_CLOSE_NS)) != 0)
        return;
    (void)shmobj__seg_cache_flush_locked(seg);
    shmobj__segment_unlock(seg);
}
