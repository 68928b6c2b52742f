/* The pollable descriptor: a consumer's registration in the ring's notify
 * table with its pipe, the arm that asks for one wake-up, and the
 * producers' cached write ends of the listeners' pipes (the peers).
 *
 * Invariants kept here:
 * - Notify registrations (ring.h, shmobj__ring_notify) change state by CAS;
 *   an entry's fields are written only by whoever moved it to BUSY, and
 *   published by the release store that ends BUSY. An entry is reclaimed
 *   from its owner only when the owner's token was judged dead.
 * - hdr.armed counts the ARMED entries, changed with every move into or
 *   out of ARMED, so that a put reads one word, and writes to a pipe only
 *   when some consumer armed its descriptor; one write per arm.
 * - An arm that finds a message already there makes the descriptor
 *   readable itself (seq_cst increment, fence, peek; the put side loads
 *   armed seq_cst after its publish), so no message is missed.
 * - The handle's notify fields and peers change only under its lock; a
 *   peer's cached descriptor is used only while the entry still names
 *   the same process, descriptor and pipe. */
#include "os-notify.h"
#include "os.h"
#include "queue-internal.h"

static void notify_signal_entry(shmobj_queue *q, unsigned i)
{
    struct shmobj__ring_notify *n = &q->ring.hdr->notify[i];
    uint32_t pid = atomic_load_explicit(&n->pid, memory_order_relaxed);
    int32_t fd = atomic_load_explicit(&n->fd, memory_order_relaxed);
    uint64_t ino = atomic_load_explicit(&n->ino, memory_order_relaxed);
    shmobj__os_pmutex_lock(&q->lock);
    if (q->notify_slot == (int)i && q->notify_wfd >= 0) {
        shmobj__os_notify_signal(q->notify_wfd); /* our own descriptor */
        shmobj__os_pmutex_unlock(&q->lock);
        return;
    }
    struct shmobj__queue_peer *p = &q->peers[i];
    if (p->wfd < 0 || p->pid != pid || p->fd != fd || p->ino != ino) {
        shmobj__os_notify_close(p->wfd);
        p->wfd = -1;
        p->pid = pid;
        p->fd = fd;
        p->ino = ino;
        if (shmobj__os_notify_open(pid, fd, ino, &p->wfd) != 0)
            p->wfd = -1;
    }
    shmobj__os_notify_signal(p->wfd);
    shmobj__os_pmutex_unlock(&q->lock);
}

/* After a publish: wake every armed listener (one write each per arm). */
void shmobj__queue_notify_fire(shmobj_queue *q)
{
    struct shmobj__ring_hdr *h = q->ring.hdr;
    for (unsigned i = 0; i < SHMOBJ__RING_NOTIFY_MAX; i++) {
        struct shmobj__ring_notify *n = &h->notify[i];
        uint32_t expect = SHMOBJ__NOTIFY_ARMED;
        if (atomic_load_explicit(&n->state, memory_order_relaxed) != expect ||
            !atomic_compare_exchange_strong_explicit(
                &n->state, &expect, SHMOBJ__NOTIFY_IDLE,
                memory_order_acq_rel, memory_order_relaxed))
            continue;
        atomic_fetch_sub_explicit(&h->armed, 1, memory_order_seq_cst);
        notify_signal_entry(q, i);
    }
}

/* Take entry i away from whatever state it is in (for reclaiming a dead
 * owner's entry or dropping our own): true when we now hold it BUSY. */
static bool notify_seize(struct shmobj__ring_hdr *h, unsigned i,
                         uint32_t seen)
{
    struct shmobj__ring_notify *n = &h->notify[i];
    if (!atomic_compare_exchange_strong_explicit(
            &n->state, &seen, SHMOBJ__NOTIFY_BUSY, memory_order_acq_rel,
            memory_order_relaxed))
        return false;
    if (seen == SHMOBJ__NOTIFY_ARMED)
        atomic_fetch_sub_explicit(&h->armed, 1, memory_order_seq_cst);
    return true;
}

int shmobj_queue_notify_fd(shmobj_queue *q, int *fd)
{
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (q == NULL || fd == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    int gone = shmobj__queue_gone(q);
    if (gone != 0)
        return gone; /* its registrations are in the freed block */
    shmobj__os_pmutex_lock(&q->lock);
    if (q->notify_slot >= 0) {
        *fd = q->notify_rfd;
        shmobj__os_pmutex_unlock(&q->lock);
        return 0;
    }
    int rc = SHMOBJ_ENOTSUP;
    if (!shmobj__os_notify_supported())
        goto out;
    uint32_t me = q->sp->ops->live->token(q->sp);
    if (me == 0) {
        rc = SHMOBJ_EFULL; /* no attachment slot for this process */
        goto out;
    }
    struct shmobj__ring_hdr *h = q->ring.hdr;
    int slot = -1;
    for (unsigned pass = 0; pass < 2 && slot < 0; pass++) {
        for (unsigned i = 0; i < SHMOBJ__RING_NOTIFY_MAX && slot < 0; i++) {
            struct shmobj__ring_notify *n = &h->notify[i];
            uint32_t s = atomic_load_explicit(&n->state, memory_order_acquire);
            if (pass == 0) {
                if (s == SHMOBJ__NOTIFY_FREE && notify_seize(h, i, s))
                    slot = (int)i;
                continue;
            }
            /* second pass: reclaim entries of processes that died */
            if (s != SHMOBJ__NOTIFY_IDLE && s != SHMOBJ__NOTIFY_ARMED)
                continue;
            uint64_t owner = atomic_load_explicit(&n->token, memory_order_relaxed);
            if (!shmobj__space_token_alive(q->sp, owner) && notify_seize(h, i, s)) {
                slot = (int)i;
                /* the dead listener's FIFO */
                shmobj__os_notify_forget(
                    atomic_load_explicit(&n->ino, memory_order_relaxed));
            }
        }
    }
    if (slot < 0) {
        rc = SHMOBJ_EFULL;
        goto out;
    }
    uint64_t ino;
    rc = shmobj__os_notify_create(&q->notify_rfd, &q->notify_wfd, &ino);
    struct shmobj__ring_notify *n = &h->notify[slot];
    if (rc != 0) {
        atomic_store_explicit(&n->state, SHMOBJ__NOTIFY_FREE,
                              memory_order_release);
        goto out;
    }
    atomic_store_explicit(&n->pid, shmobj__os_pid(), memory_order_relaxed);
    atomic_store_explicit(&n->token, me, memory_order_relaxed);
    atomic_store_explicit(&n->ino, ino, memory_order_relaxed);
    atomic_store_explicit(&n->fd, q->notify_rfd, memory_order_relaxed);
    atomic_store_explicit(&n->state, SHMOBJ__NOTIFY_IDLE, memory_order_release);
    q->notify_slot = slot;
    *fd = q->notify_rfd;
out:
    shmobj__os_pmutex_unlock(&q->lock);
    return rc;
}

int shmobj_queue_notify_arm(shmobj_queue *q)
{
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (q == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    shmobj__os_pmutex_lock(&q->lock);
    int slot = q->notify_slot;
    shmobj__os_pmutex_unlock(&q->lock);
    if (slot < 0)
        return SHMOBJ_EINVAL;
    int gone = shmobj__queue_gone(q);
    if (gone != 0)
        return gone;
    struct shmobj__ring_hdr *h = q->ring.hdr;
    struct shmobj__ring_notify *n = &h->notify[slot];
    shmobj__os_notify_drain(q->notify_rfd);
    uint32_t expect = SHMOBJ__NOTIFY_IDLE;
    if (atomic_compare_exchange_strong_explicit(&n->state, &expect,
                                                SHMOBJ__NOTIFY_ARMED,
                                                memory_order_acq_rel,
                                                memory_order_relaxed))
        atomic_fetch_add_explicit(&h->armed, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t v;
    if (shmobj__ring_try_peek(&q->ring, &v) == 0) {
        /* a message is there already: be readable now */
        expect = SHMOBJ__NOTIFY_ARMED;
        if (atomic_compare_exchange_strong_explicit(
                &n->state, &expect, SHMOBJ__NOTIFY_IDLE, memory_order_acq_rel,
                memory_order_relaxed))
            atomic_fetch_sub_explicit(&h->armed, 1, memory_order_seq_cst);
        shmobj__os_notify_signal(q->notify_wfd);
    }
    return 0;
}

void shmobj__queue_notify_forget_dead(shmobj_queue *q)
{
    struct shmobj__ring_hdr *h = q->ring.hdr;
    for (unsigned i = 0; i < SHMOBJ__RING_NOTIFY_MAX; i++) {
        struct shmobj__ring_notify *n = &h->notify[i];
        uint32_t s = atomic_load_explicit(&n->state, memory_order_acquire);
        uint64_t owner = atomic_load_explicit(&n->token, memory_order_relaxed);
        if ((s == SHMOBJ__NOTIFY_IDLE || s == SHMOBJ__NOTIFY_ARMED) &&
            !shmobj__space_token_alive(q->sp, owner))
            shmobj__os_notify_forget(atomic_load_explicit(&n->ino, memory_order_relaxed));
    }
}

void shmobj__queue_notify_drop(shmobj_queue *q)
{
    /* a destroyed queue's block is not ours to write any more */
    if (q->notify_slot >= 0 && shmobj__queue_gone(q) == 0) {
        struct shmobj__ring_hdr *h = q->ring.hdr;
        unsigned i = (unsigned)q->notify_slot;
        for (;;) {
            uint32_t s = atomic_load_explicit(&h->notify[i].state,
                                              memory_order_acquire);
            if (s != SHMOBJ__NOTIFY_IDLE && s != SHMOBJ__NOTIFY_ARMED)
                break; /* reclaimed by someone who thought us dead */
            if (notify_seize(h, i, s)) {
                atomic_store_explicit(&h->notify[i].state,
                                      SHMOBJ__NOTIFY_FREE,
                                      memory_order_release);
                break;
            }
        }
    }
    shmobj__os_notify_destroy(q->notify_rfd); /* and unlinks its FIFO */
    shmobj__os_notify_close(q->notify_wfd);
    for (unsigned i = 0; i < SHMOBJ__RING_NOTIFY_MAX; i++)
        shmobj__os_notify_close(q->peers[i].wfd);
}
