/* Locks of a segment: the library's lock word (os-lock.c) with this
 * segment's attachment slots as the judge of who is alive.
 *
 * Every lock in a segment (the segment lock, the map's shard locks, the
 * queue's retire lock) goes through here, so they share one wait policy:
 * a deadline always (the caller's, or SHMOBJ__OS_LOCK_DEFAULT_NS), the
 * owner's liveness looked at while waiting (once a wait is long, and an
 * alive verdict kept a few milliseconds), and SHMOBJ_EOWNERDEAD handed to
 * exactly one waiter when the owner's handle is gone. */
#include "segment.h"

/* How long an owner judged alive is taken to be so by this handle's lock
 * waits: a dead owner is noticed at most this much later. */
#define OWNER_SEEN_MS 10

static int owner_state(void *ctx, uint32_t owner)
{
    shmobj_segment *seg = ctx;
    _Atomic uint64_t *seen = &seg->owners_seen[owner % 64];
    uint32_t now_ms = (uint32_t)(shmobj__os_now_ns() / 1000000);
    uint64_t v = atomic_load_explicit(seen, memory_order_relaxed);
    /* (owner is never 0, the empty entry's token) */
    if ((uint32_t)(v >> 32) == owner && (int32_t)((uint32_t)v - now_ms) > 0)
        return SHMOBJ__OS_OWNER_ALIVE;
    int state = shmobj__seg_procs_state(seg, owner);
    if (state == SHMOBJ__OS_OWNER_ALIVE)
        atomic_store_explicit(seen, (uint64_t)owner << 32 | (uint32_t)(now_ms + OWNER_SEEN_MS),
                              memory_order_relaxed);
    return state;
}

/* Tests only (segment.h), never set by the library: a kill test stops a
 * holder inside its critical section. Costs one load and a branch never
 * taken per lock and per unlock. */
void (*shmobj__seg_lock_hook)(shmobj_segment *seg, shmobj__os_lock *l,
                              int phase);

int shmobj__seg_lock_word(shmobj_segment *seg, shmobj__os_lock *l,
                          uint64_t deadline)
{
    uint32_t self;
    int rc = shmobj__seg_procs_self(seg, &self);
    if (rc != 0)
        return rc;
    rc = shmobj__os_lock_acquire(l, self, deadline, owner_state, seg);
    if (__builtin_expect(shmobj__seg_lock_hook != NULL, 0) &&
        (rc == 0 || rc == SHMOBJ_EOWNERDEAD))
        shmobj__seg_lock_hook(seg, l, SHMOBJ__SEG_LOCK_TAKEN);
    return rc;
}

void shmobj__seg_unlock_word(shmobj_segment *seg, shmobj__os_lock *l)
{
    if (__builtin_expect(shmobj__seg_lock_hook != NULL, 0))
        shmobj__seg_lock_hook(seg, l, SHMOBJ__SEG_LOCK_RELEASING);
    shmobj__os_lock_release(l);
}

void shmobj__seg_unlock_broken(shmobj_segment *seg, shmobj__os_lock *l)
{
    /* Our slot with a generation it does not have: the next locker finds
     * the "owner" gone and repairs again, as after a death. */
    uint32_t self = atomic_load_explicit(&seg->token, memory_order_relaxed);
    uint32_t gen = ((self >> SHMOBJ__SEG_SLOT_BITS) - 1) & SHMOBJ__SEG_GEN_MAX;
    if (gen == 0)
        gen = SHMOBJ__SEG_GEN_MAX;
    uint32_t dead = (self & (SHMOBJ__SEG_PROCS - 1)) | gen << SHMOBJ__SEG_SLOT_BITS;
    /* An exchange, a full barrier: `sleepers` is read after the word is
     * seen, as the plain release's waiters' barrier would order it. Every
     * sleeper wakes to judge the dead token. */
    atomic_exchange_explicit(&l->word, dead, memory_order_seq_cst);
    if (atomic_load_explicit(&l->sleepers, memory_order_relaxed) != 0)
        shmobj__os_lock_wake(l, INT32_MAX);
}

/* ---- the space operations of the layers above ---- */

static uint32_t space_token(struct shmobj__space *sp)
{
    shmobj_segment *seg = sp->impl;
    uint32_t t;
    /* shmobj__seg_procs_self()'s common case without its call: the lock-free
     * adds of a mutable dict ask for the token on every add */
    if (atomic_load_explicit(&seg->attached_gen, memory_order_acquire) == shmobj__os_forks_seen())
        return atomic_load_explicit(&seg->token, memory_order_relaxed);
    return shmobj__seg_procs_self(seg, &t) == 0 ? t : 0;
}

static int space_owner_state(struct shmobj__space *sp, uint32_t token)
{
    return shmobj__seg_procs_state(sp->impl, token);
}

static int space_lock(struct shmobj__space *sp, struct shmobj__os_lock *l,
                      uint64_t deadline)
{
    return shmobj__seg_lock_word(sp->impl, l, deadline);
}

static void space_unlock(struct shmobj__space *sp, struct shmobj__os_lock *l)
{
    shmobj__seg_unlock_word(sp->impl, l);
}

static void space_unlock_broken(struct shmobj__space *sp,
                                struct shmobj__os_lock *l)
{
    shmobj__seg_unlock_broken(sp->impl, l);
}

static bool space_linked(struct shmobj__space *sp)
{
    return shmobj__segment_linked(sp->impl);
}

static void space_pause(struct shmobj__space *sp)
{
    (void)sp;
    shmobj__os_yield();
}

static bool space_alone(struct shmobj__space *sp)
{
    (void)sp;
    return shmobj__os_threads_alone();
}

static uint64_t space_now_ns(struct shmobj__space *sp)
{
    (void)sp;
    return shmobj__os_now_ns();
}

const struct shmobj__space_live_ops shmobj__segment_live_ops = {
    .token = space_token,
    .owner_state = space_owner_state,
    .lock = space_lock,
    .unlock = space_unlock,
    .unlock_broken = space_unlock_broken,
    .linked = space_linked,
    .pause = space_pause,
    .alone = space_alone,
    .now_ns = space_now_ns,
};
