/* Watches: the table of watch entries in the header page (seg-layout.h),
 * the wake-up of watchers after a change, and the watch handle's calls
 * (shmobj/watch.h). The map and the object layer make watches through the
 * space's watch_open and report changes through shmobj__space_changed()
 * (space.h); the free of a block reports it here (seg-heap.c).
 *
 * Invariants kept here:
 * - An entry changes state by CAS from the exact word seen; its fields are
 *   written only by whoever holds it BUSY and published by the release
 *   store that ends BUSY. The owner's token is in the state word in every
 *   state, so an entry of a dead process (BUSY ones included: a claimant
 *   killed while filling) is taken back with one CAS, by a claimant that
 *   finds no free entry.
 * - No lost wake-up. A writer counts a change (seq_cst fetch-add of
 *   `changes`) and then looks for ARMED (seq_cst CAS); the owner's arm
 *   stores ARMED (seq_cst CAS) and then loads `changes`: of two such
 *   pairs one side sees the other's store. A writer's look at the head's
 *   `used` word after its change is a plain load after a compiler
 *   barrier; the watcher's registration sets its bit and then makes the
 *   barrier on every CPU (shmobj__os_barrier_everywhere(), the locks'
 *   two-party barrier), so a change that began after the registration
 *   returned finds the bit.
 * - A writer writes to a watcher's FIFO once per arm (the ARMED -> IDLE
 *   CAS); one killed between its count and its write leaves the count,
 *   which the wait's next slice sees.
 * - Nothing a writer reads here can make it loop or write out of place:
 *   bits beyond the table are masked, states other than IDLE and ARMED
 *   are skipped, and a FIFO is written only after os-notify checked it is
 *   the registered one. */
#include <stdlib.h>

#include "os-notify.h"
#include "segment.h"
#include "shmobj/watch.h"
#include "step.h"

/* Each wait looks at the counter again after this long without a wake. */
#define WAIT_SLICE_NS (UINT64_C(100) * 1000000)

#define STATE_MASK UINT64_C(0xff)

struct shmobj_watch {
    struct shmobj__space *sp; /* held until the close */
    struct shmobj__seg_watch *e;
    uint64_t mine;            /* our token << 32: the state word's high half */
    shmobj__ref obj;          /* the watched block */
    uint64_t seen;            /* `changes` at the last consume */
    int rfd, wfd;             /* the FIFO's ends */
};

static inline struct shmobj__seg_watch_head *watch_head(uint8_t *base)
{
    return (struct shmobj__seg_watch_head *)(void *)(base + SHMOBJ__SEG_WATCH_OFF);
}

static inline struct shmobj__seg_watch *watch_entry(uint8_t *base, unsigned i)
{
    return (struct shmobj__seg_watch *)(void *)(base + SHMOBJ__SEG_WATCH_OFF + 64 +
                                                (size_t)i * 64);
}

static inline uint64_t state_word(uint64_t token, unsigned st)
{
    return token << 32 | st;
}

const _Atomic uint64_t *shmobj__seg_watch_used(void *base)
{
    static const _Atomic uint64_t none; /* a constant: nobody watches */
    return base == NULL ? &none : &watch_head(base)->used;
}

/* ---- the writers' side ------------------------------------------------- */

static void wake(struct shmobj__seg_watch *e)
{
    int wfd;
    if (shmobj__os_notify_open(atomic_load_explicit(&e->pid, memory_order_relaxed),
                               atomic_load_explicit(&e->fd, memory_order_relaxed),
                               atomic_load_explicit(&e->ino, memory_order_relaxed),
                               &wfd) != 0)
        return; /* its owner is gone: its entry is reclaimed later */
    shmobj__os_notify_signal(wfd);
    shmobj__os_notify_close(wfd);
}

/* space.ops.changed: count the change in every entry of block offset obj
 * (and key, unless either side watches the whole block), and wake those
 * armed. */
void shmobj__seg_watch_changed(struct shmobj__space *sp, uint64_t obj, uint64_t key,
                               unsigned flags)
{
    uint64_t used = atomic_load_explicit(&watch_head(sp->base)->used, memory_order_acquire) &
                    SHMOBJ__SEG_WATCH_ALL;
    while (used != 0) {
        unsigned i = (unsigned)__builtin_ctzll(used);
        used &= used - 1;
        struct shmobj__seg_watch *e = watch_entry(sp->base, i);
        uint64_t st = atomic_load_explicit(&e->state, memory_order_acquire);
        unsigned s = (unsigned)(st & STATE_MASK);
        if (s != SHMOBJ__SEG_WATCH_IDLE && s != SHMOBJ__SEG_WATCH_ARMED)
            continue;
        if (shmobj__ref_off(atomic_load_explicit(&e->obj, memory_order_relaxed)) != obj)
            continue;
        if (!(flags & SHMOBJ__WATCH_WHOLE) &&
            !(atomic_load_explicit(&e->flags, memory_order_relaxed) & SHMOBJ__WATCH_WHOLE) &&
            atomic_load_explicit(&e->key, memory_order_relaxed) != key)
            continue;
        atomic_fetch_add_explicit(&e->changes, 1, memory_order_seq_cst);
        SHMOBJ__STEP("watch.changed.counted");
        /* armed now (by this owner or the next: a spurious wake-up at
         * worst)? one write per arm */
        st = atomic_load_explicit(&e->state, memory_order_seq_cst);
        if ((st & STATE_MASK) == SHMOBJ__SEG_WATCH_ARMED &&
            atomic_compare_exchange_strong_explicit(
                &e->state, &st, (st & ~STATE_MASK) | SHMOBJ__SEG_WATCH_IDLE,
                memory_order_seq_cst, memory_order_relaxed))
            wake(e);
    }
}

/* ---- registration ------------------------------------------------------ */

/* Claim an entry for token `tok`: a free one, else one whose owner is
 * dead (its FIFO unlinked). The entry is BUSY for us, or NULL. */
static struct shmobj__seg_watch *claim(struct shmobj__space *sp, uint64_t tok)
{
    for (unsigned pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < SHMOBJ__SEG_WATCHES; i++) {
            struct shmobj__seg_watch *e = watch_entry(sp->base, i);
            uint64_t st = atomic_load_explicit(&e->state, memory_order_acquire);
            unsigned s = (unsigned)(st & STATE_MASK);
            if (pass == 0 ? st != 0
                          : s > SHMOBJ__SEG_WATCH_ARMED ||
                                shmobj__space_token_alive(sp, st >> 32))
                continue;
            if (!atomic_compare_exchange_strong_explicit(
                    &e->state, &st, state_word(tok, SHMOBJ__SEG_WATCH_BUSY),
                    memory_order_acq_rel, memory_order_relaxed))
                continue;
            if (s == SHMOBJ__SEG_WATCH_IDLE || s == SHMOBJ__SEG_WATCH_ARMED)
                shmobj__os_notify_forget(atomic_load_explicit(&e->ino, memory_order_relaxed));
            return e;
        }
    }
    return NULL;
}

static unsigned index_of(struct shmobj__space *sp, const struct shmobj__seg_watch *e)
{
    return (unsigned)(((const uint8_t *)e - (sp->base + SHMOBJ__SEG_WATCH_OFF + 64)) / 64);
}

/* space.ops.watch_open (the map's and the object layer's watches) */
int shmobj__seg_watch_open(struct shmobj__space *sp, shmobj__ref obj, uint64_t key,
                           unsigned flags, shmobj_watch **out)
{
    if (sp->readonly)
        return SHMOBJ_ERDONLY;
    if (shmobj__space_closed(sp))
        return SHMOBJ_ESTALE;
    if (!shmobj__os_notify_supported())
        return SHMOBJ_ENOTSUP;
    uint64_t tok = sp->ops->live->token(sp);
    if (tok == 0)
        return SHMOBJ_EFULL; /* no attachment slot for this process */
    shmobj_watch *w = calloc(1, sizeof *w);
    if (w == NULL)
        return SHMOBJ_ENOMEM;
    struct shmobj__seg_watch *e = claim(sp, tok);
    if (e == NULL) {
        free(w);
        return SHMOBJ_EFULL;
    }
    uint64_t ino;
    int rc = shmobj__os_notify_create(&w->rfd, &w->wfd, &ino);
    if (rc != 0) {
        atomic_store_explicit(&e->state, 0, memory_order_release);
        free(w);
        return rc;
    }
    atomic_store_explicit(&e->obj, obj, memory_order_relaxed);
    atomic_store_explicit(&e->key, key, memory_order_relaxed);
    atomic_store_explicit(&e->flags, flags, memory_order_relaxed);
    atomic_store_explicit(&e->ino, ino, memory_order_relaxed);
    atomic_store_explicit(&e->pid, shmobj__os_pid(), memory_order_relaxed);
    atomic_store_explicit(&e->fd, w->rfd, memory_order_relaxed);
    w->seen = atomic_load_explicit(&e->changes, memory_order_relaxed);
    /* armed from the start: the first change makes the descriptor readable */
    atomic_store_explicit(&e->state, state_word(tok, SHMOBJ__SEG_WATCH_ARMED),
                          memory_order_seq_cst);
    atomic_fetch_or_explicit(&watch_head(sp->base)->used, UINT64_C(1) << index_of(sp, e),
                             memory_order_seq_cst);
    /* writers load `used` with a compiler barrier only: make their
     * changes so far visible, or our bit visible to their next look */
    (void)shmobj__os_barrier_everywhere();
    shmobj__space_hold(sp);
    w->sp = sp;
    w->e = e;
    w->mine = tok << 32;
    w->obj = obj;
    *out = w;
    return 0;
}

/* ---- the watch's calls ------------------------------------------------- */

/* 0, or SHMOBJ_ESTALE: the segment handle closed, the entry no longer
 * ours, or the watched block freed. */
static int watch_live(shmobj_watch *w)
{
    if (shmobj__space_closed(w->sp))
        return SHMOBJ_ESTALE;
    uint64_t st = atomic_load_explicit(&w->e->state, memory_order_acquire);
    if ((st & ~STATE_MASK) != w->mine)
        return SHMOBJ_ESTALE;
    uint64_t usable;
    return w->sp->ops->check(w->sp, w->obj, &usable) == 0 ? 0 : SHMOBJ_ESTALE;
}

int shmobj_watch_fd(shmobj_watch *w, int *fd)
{
    if (w == NULL || fd == NULL)
        return SHMOBJ_EINVAL;
    *fd = w->rfd;
    return 0;
}

int shmobj_watch_arm(shmobj_watch *w)
{
    if (w == NULL)
        return SHMOBJ_EINVAL;
    int rc = watch_live(w);
    if (rc != 0) {
        shmobj__os_notify_signal(w->wfd); /* a poll on it returns */
        return rc;
    }
    shmobj__os_notify_drain(w->rfd);
    uint64_t st = w->mine | SHMOBJ__SEG_WATCH_IDLE;
    (void)atomic_compare_exchange_strong_explicit(&w->e->state, &st,
                                                  w->mine | SHMOBJ__SEG_WATCH_ARMED,
                                                  memory_order_seq_cst, memory_order_relaxed);
    if (atomic_load_explicit(&w->e->changes, memory_order_seq_cst) != w->seen)
        shmobj__os_notify_signal(w->wfd); /* not consumed yet: readable now */
    return 0;
}

int shmobj_watch_consume(shmobj_watch *w)
{
    if (w == NULL)
        return SHMOBJ_EINVAL;
    int rc = watch_live(w);
    if (rc != 0)
        return rc;
    uint64_t c = atomic_load_explicit(&w->e->changes, memory_order_seq_cst);
    rc = c != w->seen ? 0 : SHMOBJ_EEMPTY;
    w->seen = c;
    int arm = shmobj_watch_arm(w);
    return arm != 0 ? arm : rc;
}

int shmobj_watch_wait(shmobj_watch *w, int64_t timeout_ns)
{
    if (w == NULL)
        return SHMOBJ_EINVAL;
    uint64_t deadline = shmobj__os_deadline(timeout_ns);
    for (;;) {
        int rc = shmobj_watch_arm(w);
        if (rc != 0)
            return rc;
        if (atomic_load_explicit(&w->e->changes, memory_order_seq_cst) != w->seen)
            return 0;
        uint64_t now = shmobj__os_now_ns();
        if (now >= deadline)
            return SHMOBJ_ETIMEDOUT;
        uint64_t left = deadline - now;
        if (left > WAIT_SLICE_NS)
            left = WAIT_SLICE_NS;
        unsigned char ready;
        /* rounded up: a wait of 1 ns still sleeps up to 1 ms */
        rc = shmobj__os_notify_poll(&w->rfd, 1, (int)((left + 999999) / 1000000), &ready);
        if (rc < 0)
            return rc;
    }
}

void shmobj_watch_close(shmobj_watch *w)
{
    if (w == NULL)
        return;
    struct shmobj__seg_watch *e = w->e;
    for (;;) {
        uint64_t st = atomic_load_explicit(&e->state, memory_order_acquire);
        if ((st & ~STATE_MASK) != w->mine)
            break; /* taken by someone who judged us dead */
        if (atomic_compare_exchange_strong_explicit(&e->state, &st,
                                                    w->mine | SHMOBJ__SEG_WATCH_BUSY,
                                                    memory_order_acq_rel,
                                                    memory_order_relaxed)) {
            atomic_fetch_and_explicit(&watch_head(w->sp->base)->used,
                                      ~(UINT64_C(1) << index_of(w->sp, e)),
                                      memory_order_relaxed);
            atomic_store_explicit(&e->state, 0, memory_order_release);
            break;
        }
    }
    shmobj__os_notify_destroy(w->rfd); /* and unlinks the FIFO */
    shmobj__os_notify_close(w->wfd);
    shmobj__space_release(w->sp);
    free(w);
}
