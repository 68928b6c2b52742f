/* The view of a segment that the layers above `common` share.
 *
 * `object`, `queue` and `map` must not depend on how a segment is mapped or
 * locked, and `object` may not depend on `segment` at all. So `segment`
 * implements this small interface and every public handle
 * (`shmobj_segment`) begins with a `struct shmobj__space`: a
 * `shmobj_segment *` converts to a `struct shmobj__space *` (C11 6.7.2.1p15,
 * a pointer to a struct is a pointer to its first member). Tests of
 * `object` implement it over a plain malloc'd buffer.
 *
 * References. A reference stored in shared memory is 64 bits: the low 48 bits
 * are the offset of an arena block's payload from the segment base, the high
 * 16 bits the block's generation at allocation time. The arena bumps a
 * block's generation whenever it is freed, so a reference to a freed or
 * reused block no longer matches and is refused with SHMOBJ_ESTALE instead of
 * being misread. 0 is the null reference. */
#ifndef SHMOBJ_SPACE_H
#define SHMOBJ_SPACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bounds.h"
#include "shmobj/error.h"
#include "shmobj/types.h"

typedef uint64_t shmobj__ref;

#define SHMOBJ__REF_OFF_BITS 48
#define SHMOBJ__REF_OFF_MASK ((UINT64_C(1) << SHMOBJ__REF_OFF_BITS) - 1)

static inline shmobj__ref shmobj__ref_make(uint64_t off, uint16_t gen)
{
    return (off & SHMOBJ__REF_OFF_MASK) |
           ((uint64_t)gen << SHMOBJ__REF_OFF_BITS);
}
static inline uint64_t shmobj__ref_off(shmobj__ref r)
{
    return r & SHMOBJ__REF_OFF_MASK;
}
static inline uint16_t shmobj__ref_gen(shmobj__ref r)
{
    return (uint16_t)(r >> SHMOBJ__REF_OFF_BITS);
}

struct shmobj__space;
struct shmobj__os_lock;

/* Who is alive, and the locks that depend on it (seg-procs.c, seg-lock.c).
 * A token names one attached handle (31 bits, never 0); records in shared
 * memory that belong to a live handle hold its token. */
struct shmobj__space_live_ops {
    /* This handle's token in the calling process (a forked child gets its
     * own on first use); 0 when none can be had. */
    uint32_t (*token)(struct shmobj__space *sp);
    /* SHMOBJ__OS_OWNER_ALIVE / _DEAD / _BAD (os.h) for a token read from
     * shared memory. ALIVE whenever it cannot be told. */
    int (*owner_state)(struct shmobj__space *sp, uint32_t token);
    /* Take a lock word of this space until the monotonic deadline (0: the
     * default bound, then SHMOBJ_EBUSY). 0, SHMOBJ_EOWNERDEAD (taken from a
     * dead owner: repair, then unlock), SHMOBJ_ETIMEDOUT, SHMOBJ_EBUSY,
     * SHMOBJ_ECORRUPT (the word names no possible owner). */
    int (*lock)(struct shmobj__space *sp, struct shmobj__os_lock *l,
                uint64_t deadline);
    void (*unlock)(struct shmobj__space *sp, struct shmobj__os_lock *l);
    /* Release after a failed repair: the next locker gets EOWNERDEAD. */
    void (*unlock_broken)(struct shmobj__space *sp, struct shmobj__os_lock *l);
    /* False once the segment's name was removed or names another segment:
     * a blocking wait on it would wait for a peer that moved on, so it
     * ends with SHMOBJ_EREPLACED. A few system calls: for wait slices. */
    bool (*linked)(struct shmobj__space *sp);
    /* Give the CPU to another thread or process (sched_yield): for a wait
     * on a peer that may be descheduled mid-step, which spinning alone
     * would keep off a busy CPU. */
    void (*pause)(struct shmobj__space *sp);
    /* True when the calling process has no thread but the caller: then no
     * record naming this handle's token can be held by anyone while the
     * caller waits on it. Reads /proc: for the slow path of a wait. */
    bool (*alone)(struct shmobj__space *sp);
    /* The monotonic clock in ns: for how long a record seen stuck has
     * been so (a list's place reserved and not written). */
    uint64_t (*now_ns)(struct shmobj__space *sp);
};

struct shmobj__space_ops {
    /* Make [0, end) readable in this process (the segment may have grown in
     * another process). SHMOBJ_ECORRUPT when end is beyond the segment's
     * maximum or its current size: the offset that asked for it is bad. */
    int (*extend)(struct shmobj__space *sp, uint64_t end);
    /* Allocate a block of at least `size` bytes aligned to `align` (a power
     * of two, 16 at least) and return a reference to it. Takes the segment
     * lock; may grow the segment. SHMOBJ_ENOMEM when full. */
    int (*alloc)(struct shmobj__space *sp, uint64_t size, uint64_t align,
                 shmobj__ref *out);
    /* As alloc, and *dirty: how many of the block's first bytes may hold
     * anything; the bytes past them read as zero. The heap knows which of
     * its space no block ever held (it reads as zero, as the backing
     * object was made), so zeroing a large block from there costs
     * nothing: no write, and no page touched before it is used. NULL:
     * every byte may (shmobj__space_alloc_dirty()). */
    int (*alloc_dirty)(struct shmobj__space *sp, uint64_t size, uint64_t align,
                       shmobj__ref *out, uint64_t *dirty);
    /* Free the block a reference names. SHMOBJ_ESTALE if the generation no
     * longer matches, SHMOBJ_ECORRUPT if it does not name a live block. */
    int (*free)(struct shmobj__space *sp, shmobj__ref ref);
    /* Check that a reference names a live block with its generation and
     * return its usable size: SHMOBJ_ESTALE / SHMOBJ_ECORRUPT otherwise.
     * Lock-free: reads the block header only. */
    int (*check)(struct shmobj__space *sp, shmobj__ref ref, uint64_t *usable);
    /* The usable size of the block a reference names when its header word
     * says it is in use with the reference's generation, else 0: one load,
     * without the boundary tag check() also compares, for hot paths that
     * then stay within that many bytes, bounds-checked. NULL: check() is
     * used (shmobj__space_usable()). */
    uint64_t (*usable)(struct shmobj__space *sp, shmobj__ref ref);
    /* Liveness and locks; NULL in spaces without other processes (the
     * object layer's tests). */
    const struct shmobj__space_live_ops *live;
    /* Called once the last hold is released (shmobj__space_release()):
     * the owner frees the space. NULL: nothing to free. */
    void (*drop)(struct shmobj__space *sp);
    /* Watches (shmobj/watch.h, seg-watch.c). `watch_open` registers this
     * process's interest in the block `obj` names (a reference), for the
     * key hash `key` or, with SHMOBJ__WATCH_WHOLE in flags, for any change
     * of the block: SHMOBJ_ENOTSUP where the space has none (NULL).
     * `changed` wakes the watchers of block offset `obj` (of key hash
     * `key`, or all of them with SHMOBJ__WATCH_WHOLE); called only through
     * shmobj__space_changed(), which reads one word first. */
    int (*watch_open)(struct shmobj__space *sp, shmobj__ref obj, uint64_t key,
                      unsigned flags, shmobj_watch **out);
    void (*changed)(struct shmobj__space *sp, uint64_t obj, uint64_t key,
                    unsigned flags);
};

/* flags of watch_open and changed: the whole block, not one key of it. */
#define SHMOBJ__WATCH_WHOLE 1u

/* Handles outlive their segment. A handle of a layer above (a map, a
 * queue, a map's cursor or view through its map) holds the space while it
 * is open, so the segment handle's close leaves the mapping, the
 * descriptors and the attachment in place until the last of them is
 * closed (then `drop` frees them). From the segment's close on, `closed`
 * is set: the handles' calls but their close answer SHMOBJ_ESTALE, and
 * the space's alloc and free refuse with it too (its check does not: a
 * close still judges the blocks it writes to). */
struct shmobj__space {
    uint8_t *base;             /* this process's address of offset 0 */
    _Atomic uint64_t mapped;   /* bytes at base known to be backed; grows */
    /* Set (1) by the owner's close; beside `mapped`, which the hot reads
     * load anyway, so their look at it costs no other line. */
    _Atomic uint32_t closed;
    /* Holds: the owner's own (the segment handle's: 1 while it is open)
     * plus one per open handle of a layer above. */
    _Atomic uint32_t holds;
    /* Set once, before the handle is handed out, and never changed: the
     * segment is mapped read-only in this process (a handle opened with
     * SHMOBJ_SEGMENT_RDONLY, or by a process that may only read it). Every
     * call that would store a byte, take a lock or claim a record answers
     * SHMOBJ_ERDONLY before it touches the segment: a store through the
     * mapping would fault. The space's alloc, free and lock refuse, and
     * its token is 0. */
    bool readonly;
    const struct shmobj__space_ops *ops;
    void *impl;                /* owner's private data */
    /* The word that says whether anyone watches anything in this space
     * (seg-layout.h, struct shmobj__seg_watch_head: a bit per watch
     * entry in use); a space without watches points it at a zero word of
     * its own. Set before the handle is handed out, never changed. */
    const _Atomic uint64_t *watch_used;
};

/* After a committed change of block offset `obj` (key hash `key`, or the
 * whole block with SHMOBJ__WATCH_WHOLE): wake its watchers. With nobody
 * watching anything in the segment this is two loads and a branch; the
 * compiler barrier keeps the load after the change's stores in program
 * order, which the watcher's barrier at its registration relies on
 * (seg-watch.c). */
static inline void shmobj__space_changed(struct shmobj__space *sp, uint64_t obj,
                                         uint64_t key, unsigned flags)
{
    atomic_signal_fence(memory_order_seq_cst);
    if (__builtin_expect(atomic_load_explicit(sp->watch_used, memory_order_relaxed) != 0,
                         0))
        sp->ops->changed(sp, obj, key, flags);
}

static inline void shmobj__space_hold(struct shmobj__space *sp)
{
    atomic_fetch_add_explicit(&sp->holds, 1, memory_order_relaxed);
}

/* Release one hold; the last one drops the space (ops->drop). */
static inline void shmobj__space_release(struct shmobj__space *sp)
{
    if (atomic_fetch_sub_explicit(&sp->holds, 1, memory_order_acq_rel) == 1 &&
        sp->ops->drop != NULL)
        sp->ops->drop(sp);
}

/* Whether the owner (the segment handle) was closed: the handles still
 * open on it answer SHMOBJ_ESTALE. */
static inline bool shmobj__space_closed(const struct shmobj__space *sp)
{
    return atomic_load_explicit(&sp->closed, memory_order_relaxed) != 0;
}

/* SHMOBJ_ERDONLY when the space is mapped read-only (see `readonly`): the
 * first check of every call of the layers above that writes. */
static inline int shmobj__space_writable(const struct shmobj__space *sp)
{
    return sp->readonly ? SHMOBJ_ERDONLY : 0;
}

/* The one conversion of a segment handle to its space. Every shmobj_segment
 * begins with its space (lib/segment/segment.h asserts the offset at
 * compile time; tests/space-heap.c's stand-in is built the same way), and
 * tests/check-layers.sh refuses the cast written anywhere else, so the
 * layout the layers above rely on is checked, not assumed. */
static inline struct shmobj__space *shmobj__space_of_seg(shmobj_segment *seg)
{
    return (struct shmobj__space *)(void *)seg;
}

/* Whether a record's owner word (a token, widened to 64 bits in shared
 * memory) names a live handle of this space: a word no token can be is
 * damage, not a live owner (owner_state() is positive only for ALIVE). */
static inline bool shmobj__space_token_alive(struct shmobj__space *sp,
                                             uint64_t word)
{
    return word != 0 && word <= UINT32_MAX &&
           sp->ops->live->owner_state(sp, (uint32_t)word) > 0;
}

/* shmobj__space_token_alive() for a record the caller waits on and, by
 * its construction, never holds itself while it waits (a lock holder
 * draining the adds and appends made without the lock, a ring side
 * judging a stalled claimant): there the caller's own token, in a process
 * with no other thread, names no holder at all. Only damage puts it
 * there, and waiting for it would wait out the whole bound. Another
 * thread of this process may hold it, so it is alive while one exists.
 * The slow path of a wait only (it may read /proc). The library's lock
 * word judges its own token by the same rule (os-lock.c), below this
 * interface. */
static inline bool shmobj__space_token_holder_alive(struct shmobj__space *sp,
                                                    uint64_t word)
{
    const struct shmobj__space_live_ops *live = sp->ops->live;
    return shmobj__space_token_alive(sp, word) &&
           (word != live->token(sp) || !live->alone(sp));
}

/* Allocate a block and say how many of its first bytes may be non-zero
 * (see alloc_dirty in struct shmobj__space_ops): a caller that needs it
 * zeroed clears that many, no more. */
static inline int shmobj__space_alloc_dirty(struct shmobj__space *sp, uint64_t size,
                                            uint64_t align, shmobj__ref *out,
                                            uint64_t *dirty)
{
    *dirty = size;
    if (sp->ops->alloc_dirty != NULL)
        return sp->ops->alloc_dirty(sp, size, align, out, dirty);
    return sp->ops->alloc(sp, size, align, out);
}

/* The usable size of a reference's block, from its header word (see
 * usable in struct shmobj__space_ops), or 0. */
static inline uint64_t shmobj__space_usable(struct shmobj__space *sp, shmobj__ref ref)
{
    uint64_t u = 0;
    if (sp->ops->usable != NULL)
        return sp->ops->usable(sp, ref);
    return sp->ops->check(sp, ref, &u) == 0 ? u : 0;
}

/* Bounds-check [off, off + len) and return a pointer to it, extending this
 * process's view first when the range lies beyond it. Use this for every
 * offset read from shared memory. */
static inline int shmobj__space_at(struct shmobj__space *sp, uint64_t off,
                                   uint64_t len, void **out)
{
    uint64_t mapped = atomic_load_explicit(&sp->mapped, memory_order_acquire);
    if (!shmobj__range_ok(off, len, mapped)) {
        uint64_t end;
        if (!shmobj__add_ok(off, len, &end) || sp->ops->extend == NULL)
            return SHMOBJ_ECORRUPT;
        int rc = sp->ops->extend(sp, end);
        if (rc != 0)
            return rc;
    }
    *out = sp->base + off;
    return 0;
}

/* The live block ref names: this process's address of it and its usable
 * bytes. SHMOBJ_ESTALE for a freed block, SHMOBJ_ECORRUPT for a reference
 * to no block; the first step of opening a named structure (a queue, a
 * topic, a service) before its magic is read. */
static inline int shmobj__space_block(struct shmobj__space *sp, shmobj__ref ref, void **mem,
                                      uint64_t *usable)
{
    int rc = sp->ops->check(sp, ref, usable);
    if (rc != 0)
        return rc == SHMOBJ_ESTALE ? SHMOBJ_ESTALE : SHMOBJ_ECORRUPT;
    return shmobj__space_at(sp, shmobj__ref_off(ref), *usable, mem);
}

#endif /* SHMOBJ_SPACE_H */
