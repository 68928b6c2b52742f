/* Named queues in a segment, message blocks with completion, and the
 * pollable descriptor.
 *
 * Invariants kept here:
 * - A queue is one 64-byte aligned heap block holding a ring (ring.h) and
 *   a retire FIFO (retire.h), published as the root named exactly as the
 *   queue (one namespace for every kind of root). A handle validates the
 *   block (its generation, its size, the ring header, the FIFO's header)
 *   once at open and afterwards addresses it only through the validated
 *   view.
 * - A handle writes into its queue's block only while the ring's identity
 *   word is the one it opened (ring.h): destroy clears it first, so a
 *   stale handle writes nothing there (SHMOBJ_ESTALE); what fails on the
 *   ring also checks the block's generation (queue_gone()).
 * - A message block is a heap block that starts with struct shmobj__qmsg.
 *   Every access goes through msg_get(), which checks the reference's
 *   generation and size and the header's magic, length and state before
 *   use, reading each field once and handing out those copies.
 * - A message block's `state` moves PENDING -> DONE (consumer) or
 *   PENDING -> ABANDONED (sender gave up) exactly once, by CAS; whoever
 *   arrives second gives the block back, moving it to FREED by CAS first,
 *   so it is given back exactly once and refused ever after, also while
 *   it waits, still allocated, in the retire FIFO.
 * - Freeing a message block means msg_release(): blocks of the sizes that
 *   gain from it wait in the queue's retire FIFO (retire.h, behind the
 *   ring in the same block) and reach the heap later, the others at once.
 * - Notify registrations (ring.h, shmobj__ring_notify) change state by CAS;
 *   hdr.armed counts the ARMED ones so that a put reads one word, and writes
 *   to a pipe only when some consumer armed its descriptor. */
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "os-notify.h"
#include "mix.h"
#include "os.h"
#include "queue-internal.h"
#include "shmobj/arena.h"
#include "shmobj/segment.h"

/* ---- message blocks -------------------------------------------------------- */

#define QMSG_MAGIC 0x47534d51u /* "QMSG" */
enum { QMSG_PENDING = 0, QMSG_DONE = 1, QMSG_ABANDONED = 2, QMSG_FREED = 3 };

struct shmobj__qmsg {
    uint32_t magic;          /* QMSG_MAGIC, written once by the allocator */
    /* futex word: QMSG_PENDING -> QMSG_DONE (consumer, CAS, release) or
     * -> QMSG_ABANDONED (sender, CAS); DONE -> PENDING by msg_reset; any
     * of them -> QMSG_FREED (CAS) by whoever gives the block back, before
     * it goes to the retire FIFO or the heap: a block in the FIFO is still
     * allocated, and FREED is what refuses every later use of it */
    _Atomic uint32_t state;
    /* senders sleeping (or about to) on state; seq_cst, paired with the
     * consumer's CAS as for the ring's waiter counts */
    _Atomic uint32_t waiters;
    uint32_t flags;          /* SHMOBJ_QUEUE_MSG_* given at allocation */
    uint64_t len;            /* bytes of data after the header */
    uint64_t reserved[5];    /* zero */
};
_Static_assert(sizeof(struct shmobj__qmsg) == SHMOBJ_QUEUE_MSG_HEADER,
               "message header");
_Static_assert(offsetof(struct shmobj__qmsg, magic) == 0, "qmsg magic");
_Static_assert(offsetof(struct shmobj__qmsg, state) == 4, "qmsg state");
_Static_assert(offsetof(struct shmobj__qmsg, waiters) == 8, "qmsg waiters");
_Static_assert(offsetof(struct shmobj__qmsg, flags) == 12, "qmsg flags");
_Static_assert(offsetof(struct shmobj__qmsg, len) == 16, "qmsg len");
_Static_assert(offsetof(struct shmobj__qmsg, reserved) == 24, "qmsg reserved");

/* A message block, checked: its header, and copies of the fields that
 * were validated (each read once from shared memory, so a writer racing
 * the check cannot change what the caller uses afterwards). */
struct msg {
    struct shmobj__qmsg *m;
    uint64_t len;    /* validated: fits the block */
    uint64_t usable; /* the block's usable size */
    uint32_t flags;
};

/* Whether off lies inside the segment's bytes (asking the kernel when it
 * lies beyond this process's view). */
static __attribute__((noinline, cold)) bool in_segment(struct shmobj__space *sp,
                                                       uint64_t off)
{
    void *p;
    return shmobj__space_at(sp, off, 1, &p) == 0;
}

/* Check message block ref: SHMOBJ_EINVAL when it names no block of this
 * segment (unaligned, or beyond its bytes), SHMOBJ_ESTALE when the block
 * was freed (generation) or given back (state FREED), SHMOBJ_ETYPE when
 * it is a live block but not a message block, SHMOBJ_ECORRUPT when its
 * header is inconsistent. */
static inline __attribute__((always_inline)) int msg_get(shmobj_queue *q,
                                                         shmobj_ref ref,
                                                         struct msg *out)
{
    struct shmobj__space *sp = q->sp;
    uint64_t off = shmobj__ref_off(ref);
    if ((off & 15u) != 0) /* no heap block starts there */
        return SHMOBJ_EINVAL;
    uint64_t usable = 0;
    int rc = sp->ops->check(sp, ref, &usable);
    if (rc == SHMOBJ_ECORRUPT && !in_segment(sp, off))
        return SHMOBJ_EINVAL;
    if (rc != 0)
        return rc;
    /* message blocks are 64-byte aligned and hold their header */
    if ((off & (SHMOBJ_QUEUE_MSG_ALIGN - 1)) != 0 ||
        usable < sizeof(struct shmobj__qmsg))
        return SHMOBJ_ETYPE;
    void *p;
    rc = shmobj__space_at(sp, off, usable, &p);
    if (rc != 0)
        return rc;
    struct shmobj__qmsg *m = p;
    if (__atomic_load_n(&m->magic, __ATOMIC_RELAXED) != QMSG_MAGIC)
        return SHMOBJ_ETYPE;
    uint64_t len = __atomic_load_n(&m->len, __ATOMIC_RELAXED);
    uint32_t flags = __atomic_load_n(&m->flags, __ATOMIC_RELAXED);
    uint32_t state = atomic_load_explicit(&m->state, memory_order_acquire);
    if (len > usable - sizeof(struct shmobj__qmsg))
        return SHMOBJ_ECORRUPT;
    if (state >= QMSG_FREED) /* given back, or no state at all */
        return state == QMSG_FREED ? SHMOBJ_ESTALE : SHMOBJ_ECORRUPT;
    *out = (struct msg){m, len, usable, flags};
    return 0;
}

/* Free the blocks a retire FIFO gave out. One that no longer checks out
 * (a damaged FIFO) is dropped: the heap's own check reports the damage. */
static void free_retired(shmobj_queue *q, const uint64_t *refs, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        (void)q->sp->ops->free(q->sp, refs[i]);
}

/* Whether the queue of this handle still exists, judged the slow way: 0
 * live; SHMOBJ_ESTALE when the ring's identity is no longer the one this
 * handle opened (destroyed: 0, or re-created in the same block: another
 * identity) or its block was freed (the heap's generation), whatever the
 * bytes left there say. */
static int queue_gone(shmobj_queue *q)
{
    if (!shmobj__ring_live(&q->ring))
        return SHMOBJ_ESTALE;
    int rc = q->sp->ops->check(q->sp, q->ref, NULL);
    return rc == 0 || rc == SHMOBJ_ESTALE ? rc : SHMOBJ_ECORRUPT;
}

/* A ring operation did not succeed: tell a queue that went away from a
 * full, empty or damaged one. */
static __attribute__((noinline, cold)) int op_status(shmobj_queue *q, int rc)
{
    int gone = queue_gone(q);
    return gone != 0 ? gone : rc;
}

/* A new ring's identity: unique to this creation with overwhelming
 * probability (the block's reference, the time and the process, mixed), so
 * that a handle of a queue destroyed and re-created in the same block,
 * even with the same generation, tells the two apart. Never 0. */
static uint64_t ring_ident(shmobj_ref ref)
{
    static _Atomic uint64_t seq;
    uint64_t x = shmobj__mix64(ref ^ shmobj__mix64(shmobj__os_now_ns() ^
                                                   ((uint64_t)shmobj__os_pid() << 32) ^
                                                   atomic_fetch_add(&seq, 1)));
    return x != 0 ? x : 1;
}

/* Give back a message block whose work is done (its state is FREED
 * already): through the queue's retire FIFO when it is of the sizes that
 * gain from it (retire.h) and the queue still exists, else straight to the
 * heap. */
static int msg_release(shmobj_queue *q, shmobj_ref ref, uint64_t usable)
{
    /* the identity word tells a destroyed queue (as for put and take): the
     * heap's check of the queue's block cost as much again as the push */
    if (usable < q->retire_min || usable >= q->retire_max ||
        !shmobj__ring_live(&q->ring))
        return q->sp->ops->free(q->sp, ref);
    uint64_t out[SHMOBJ__RETIRE_OUT_MAX];
    unsigned n = 0;
    if (shmobj__retire_push(q->sp, q->retire, ref, usable, q->retire_budget, out,
                            &n) != 0)
        return q->sp->ops->free(q->sp, ref);
    free_retired(q, out, n);
    return 0;
}

/* Mark a block given back (from state `from`) and release it. The CAS
 * settles two racing callers: the second gets SHMOBJ_ESTALE. */
static int msg_give_back(shmobj_queue *q, shmobj_ref ref, const struct msg *g,
                         uint32_t from)
{
    uint32_t expect = from;
    if (!atomic_compare_exchange_strong_explicit(&g->m->state, &expect,
                                                 QMSG_FREED, memory_order_acq_rel,
                                                 memory_order_acquire))
        return expect == QMSG_FREED ? SHMOBJ_ESTALE : SHMOBJ_EINVAL;
    return msg_release(q, ref, g->usable);
}

/* Give every retired block back to the heap; how many there were in *n. */
static int retire_drain(shmobj_queue *q, unsigned *n)
{
    uint64_t out[SHMOBJ__RETIRE_OUT_MAX];
    int rc = shmobj__retire_drain(q->sp, q->retire, out, n);
    free_retired(q, out, *n);
    return rc;
}

int shmobj_queue_trim(shmobj_queue *q)
{
    if (q == NULL)
        return SHMOBJ_EINVAL;
    int rc = queue_gone(q);
    unsigned n;
    return rc != 0 ? rc : retire_drain(q, &n);
}

int shmobj_queue_msg_alloc(shmobj_queue *q, size_t len, unsigned flags,
                           shmobj_ref *ref, void **data)
{
    if (q == NULL || ref == NULL || (flags & ~SHMOBJ_QUEUE_MSG_TRACK) != 0 ||
        len > UINT64_MAX / 2)
        return SHMOBJ_EINVAL;
    struct shmobj__space *sp = q->sp;
    shmobj_ref r;
    uint64_t size = sizeof(struct shmobj__qmsg) + (uint64_t)len;
    int rc = sp->ops->alloc(sp, size, SHMOBJ_QUEUE_MSG_ALIGN, &r);
    unsigned freed = 0;
    if (rc == SHMOBJ_ENOMEM && queue_gone(q) == 0 && retire_drain(q, &freed) == 0 &&
        freed > 0)
        rc = sp->ops->alloc(sp, size, SHMOBJ_QUEUE_MSG_ALIGN, &r); /* room now? */
    if (rc != 0)
        return rc;
    void *p;
    rc = shmobj__space_at(sp, shmobj__ref_off(r),
                          sizeof(struct shmobj__qmsg) + (uint64_t)len, &p);
    if (rc != 0) {
        sp->ops->free(sp, r);
        return rc;
    }
    struct shmobj__qmsg *m = p;
    memset(m, 0, sizeof *m);
    m->flags = flags;
    m->len = len;
    atomic_store_explicit(&m->state, QMSG_PENDING, memory_order_relaxed);
    m->magic = QMSG_MAGIC; /* published by the put that hands it over */
    *ref = r;
    if (data != NULL)
        *data = m + 1;
    return 0;
}

int shmobj_queue_msg_data(shmobj_queue *q, shmobj_ref ref, void **data,
                          size_t *len)
{
    if (q == NULL || data == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    struct msg g;
    int rc = msg_get(q, ref, &g);
    if (rc != 0)
        return rc;
    *data = g.m + 1;
    if (len != NULL)
        *len = (size_t)g.len; /* the length that was checked, not a re-read */
    return 0;
}

static void msg_wake(struct shmobj__qmsg *m)
{
    if (atomic_load_explicit(&m->waiters, memory_order_seq_cst) != 0)
        shmobj__os_futex_wake(&m->state, INT32_MAX);
}

int shmobj_queue_msg_done(shmobj_queue *q, shmobj_ref ref)
{
    if (q == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    struct msg g;
    int rc = msg_get(q, ref, &g);
    if (rc != 0)
        return rc;
    if ((g.flags & SHMOBJ_QUEUE_MSG_TRACK) == 0)
        return msg_give_back(q, ref, &g, QMSG_PENDING);
    uint32_t expect = QMSG_PENDING;
    if (atomic_compare_exchange_strong_explicit(&g.m->state, &expect, QMSG_DONE,
                                                memory_order_seq_cst,
                                                memory_order_acquire)) {
        msg_wake(g.m);
        return 0;
    }
    if (expect == QMSG_ABANDONED) /* the sender gave up: ours to give back */
        return msg_give_back(q, ref, &g, QMSG_ABANDONED);
    return expect == QMSG_FREED ? SHMOBJ_ESTALE : SHMOBJ_EINVAL; /* done already */
}

int shmobj_queue_msg_wait_done(shmobj_queue *q, shmobj_ref ref,
                               int64_t timeout_ns)
{
    if (q == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    struct msg g;
    int rc = msg_get(q, ref, &g);
    if (rc != 0)
        return rc;
    struct shmobj__qmsg *m = g.m;
    if ((g.flags & SHMOBJ_QUEUE_MSG_TRACK) == 0)
        return SHMOBJ_EINVAL;
    uint64_t deadline = shmobj__os_deadline(timeout_ns);
    uint32_t s = atomic_load_explicit(&m->state, memory_order_acquire);
    int64_t spin = atomic_load_explicit(&q->spin_ns, memory_order_relaxed);
    if (s == QMSG_PENDING && spin != 0 && timeout_ns != 0) {
        uint64_t end = spin < 0 ? deadline
                                : shmobj__os_now_ns() + (uint64_t)spin;
        for (unsigned i = 1; s == QMSG_PENDING; i++) {
            s = atomic_load_explicit(&m->state, memory_order_acquire);
            if ((i & 255u) == 0 && shmobj__os_now_ns() >= end)
                break;
        }
    }
    while (s == QMSG_PENDING) {
        uint64_t now = shmobj__os_now_ns();
        if (timeout_ns == 0)
            return SHMOBJ_ETIMEDOUT;
        /* A consumer of a segment replaced under its name will never mark
         * this done: say so at the deadline. */
        if (now >= deadline)
            return q->sp->ops->live->linked(q->sp) ? SHMOBJ_ETIMEDOUT
                                                   : SHMOBJ_EREPLACED;
        atomic_fetch_add_explicit(&m->waiters, 1, memory_order_seq_cst);
        atomic_thread_fence(memory_order_seq_cst);
        s = atomic_load_explicit(&m->state, memory_order_acquire);
        if (s == QMSG_PENDING)
            shmobj__os_futex_wait(&m->state, QMSG_PENDING, deadline);
        atomic_fetch_sub_explicit(&m->waiters, 1, memory_order_relaxed);
        s = atomic_load_explicit(&m->state, memory_order_acquire);
    }
    if (s == QMSG_FREED)
        return SHMOBJ_ESTALE;
    return s == QMSG_DONE ? 0 : SHMOBJ_EINVAL;
}

int shmobj_queue_msg_reset(shmobj_queue *q, shmobj_ref ref)
{
    if (q == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    struct msg g;
    int rc = msg_get(q, ref, &g);
    if (rc != 0)
        return rc;
    if ((g.flags & SHMOBJ_QUEUE_MSG_TRACK) == 0)
        return SHMOBJ_EINVAL;
    uint32_t expect = QMSG_DONE;
    if (!atomic_compare_exchange_strong_explicit(&g.m->state, &expect,
                                                 QMSG_PENDING,
                                                 memory_order_acq_rel,
                                                 memory_order_relaxed))
        return expect == QMSG_FREED ? SHMOBJ_ESTALE : SHMOBJ_EINVAL;
    return 0;
}

int shmobj_queue_msg_free(shmobj_queue *q, shmobj_ref ref)
{
    if (q == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    struct msg g;
    int rc = msg_get(q, ref, &g);
    if (rc != 0)
        return rc;
    if ((g.flags & SHMOBJ_QUEUE_MSG_TRACK) == 0)
        return msg_give_back(q, ref, &g, QMSG_PENDING);
    uint32_t expect = QMSG_PENDING;
    if (atomic_compare_exchange_strong_explicit(
            &g.m->state, &expect, QMSG_ABANDONED, memory_order_acq_rel,
            memory_order_acquire))
        return 0; /* the consumer's done will give it back */
    if (expect == QMSG_DONE)
        return msg_give_back(q, ref, &g, QMSG_DONE);
    /* abandoned (handed over) or given back already */
    return SHMOBJ_ESTALE;
}

/* ---- notify ---------------------------------------------------------------- */

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
static void notify_fire(shmobj_queue *q)
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

static inline void after_put(shmobj_queue *q)
{
    /* seq_cst: pairs with the arm's increment + fence + peek (Dekker) */
    if (atomic_load_explicit(&q->ring.hdr->armed, memory_order_seq_cst) != 0)
        notify_fire(q);
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
    if (q == NULL || fd == NULL)
        return SHMOBJ_EINVAL;
    int gone = queue_gone(q);
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
            if (!shmobj__space_token_alive(q->sp, owner) && notify_seize(h, i, s))
                slot = (int)i;
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
    if (q == NULL)
        return SHMOBJ_EINVAL;
    shmobj__os_pmutex_lock(&q->lock);
    int slot = q->notify_slot;
    shmobj__os_pmutex_unlock(&q->lock);
    if (slot < 0)
        return SHMOBJ_EINVAL;
    int gone = queue_gone(q);
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

static void notify_drop(shmobj_queue *q)
{
    /* a destroyed queue's block is not ours to write any more */
    if (q->notify_slot >= 0 && queue_gone(q) == 0) {
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
    shmobj__os_notify_close(q->notify_rfd);
    shmobj__os_notify_close(q->notify_wfd);
    for (unsigned i = 0; i < SHMOBJ__RING_NOTIFY_MAX; i++)
        shmobj__os_notify_close(q->peers[i].wfd);
}

/* ---- lifecycle ----------------------------------------------------------- */

/* A queue's root is the name its user gave: queues, maps and other roots
 * share one directory of names (doc/format.md), so a name belongs to one
 * root of one kind. */
static int name_ok(const char *name)
{
    if (name == NULL)
        return SHMOBJ_EINVAL;
    size_t n = strnlen(name, SHMOBJ_QUEUE_NAME_MAX + 1);
    return n == 0 || n > SHMOBJ_QUEUE_NAME_MAX ? SHMOBJ_EINVAL : 0;
}

/* Where a queue's retire FIFO starts in its block: behind the ring, on the
 * next cache line. */
static uint64_t retire_offset(uint32_t capacity)
{
    return (shmobj__ring_footprint(capacity) + 63u) & ~UINT64_C(63);
}

/* Where its completion records start: behind the FIFO (which ends on a
 * cache line: 192 + 16 * 64 bytes from a line). */
static uint64_t track_offset(uint32_t capacity)
{
    return retire_offset(capacity) + sizeof(struct shmobj__retire);
}

/* Bytes of a queue's block: its ring, its retire FIFO, then its completion
 * records (0 when capacity is invalid). */
static uint64_t queue_footprint(uint32_t capacity)
{
    if (shmobj__ring_footprint(capacity) == 0)
        return 0;
    return track_offset(capacity) +
           shmobj__track_bytes(shmobj__track_count(capacity));
}

/* Which message blocks go through the retire FIFO, and how many bytes of
 * them it keeps (retire.h): from 32 KiB, below which a block is too small
 * to pay for the FIFO's lock, to half this core's L2, from where a block
 * being written passes through the writer's L2 to the L3 anyway; twice the
 * L2 of them, so that the oldest has left the consumer's L2. */
#define QUEUE_RETIRE_MIN (32u << 10)

/* Open a handle of the queue in block ref: SHMOBJ_ESTALE when the block
 * was freed or the queue is being destroyed, SHMOBJ_ETYPE when the block
 * is something else (no ring magic), SHMOBJ_ECORRUPT / SHMOBJ_EVERSION
 * when it says it is a ring but is not a sound one. */
static int handle_new(shmobj_segment *seg, shmobj_ref ref, shmobj_queue **out)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    uint64_t usable = 0;
    int rc = sp->ops->check(sp, ref, &usable);
    if (rc != 0)
        return rc == SHMOBJ_ESTALE ? SHMOBJ_ESTALE : SHMOBJ_ECORRUPT;
    void *mem;
    rc = shmobj__space_at(sp, shmobj__ref_off(ref), usable, &mem);
    if (rc != 0)
        return rc;
    if (usable < sizeof(uint32_t) ||
        __atomic_load_n((const uint32_t *)mem, __ATOMIC_RELAXED) != SHMOBJ__RING_MAGIC)
        return SHMOBJ_ETYPE; /* a map, an object, a raw block: not a queue */
    if (((uintptr_t)mem & 63u) != 0)
        return SHMOBJ_ECORRUPT;
    shmobj_queue *q = calloc(1, sizeof *q);
    if (q == NULL)
        return SHMOBJ_ENOMEM;
    rc = shmobj__ring_attach(&q->ring, sp, mem, usable);
    if (rc == SHMOBJ_EINVAL)
        rc = SHMOBJ_ECORRUPT; /* a ring magic on a block too small for one */
    if (rc == 0 && q->ring.ident == 0)
        rc = SHMOBJ_ESTALE; /* being destroyed */
    if (rc == 0) {
        uint32_t cap = (uint32_t)q->ring.capacity;
        q->retire = (struct shmobj__retire *)((uint8_t *)mem + retire_offset(cap));
        q->track = (struct shmobj__track *)((uint8_t *)mem + track_offset(cap));
        q->track_count = shmobj__track_count(cap);
        rc = usable < queue_footprint(cap) ? SHMOBJ_ECORRUPT
                                           : shmobj__retire_check(q->retire);
        if (rc == 0)
            rc = shmobj__track_check(q->track, cap);
    }
    if (rc != 0) {
        free(q);
        return rc;
    }
    q->seg = seg;
    q->sp = sp;
    q->ref = ref;
    uint64_t l2 = shmobj__os_l2_cache_bytes();
    q->retire_min = QUEUE_RETIRE_MIN;
    q->retire_max = l2 / 2;
    q->retire_budget = 2 * l2;
    q->plain_max = 4 * l2;
    q->serial = (uint32_t)ring_ident(ref ^ (uint64_t)(uintptr_t)q);
    q->notify_slot = -1;
    q->notify_rfd = -1;
    q->notify_wfd = -1;
    for (unsigned i = 0; i < SHMOBJ__RING_NOTIFY_MAX; i++)
        q->peers[i].wfd = -1;
    shmobj__os_pmutex_init(&q->lock);
    *out = q;
    return 0;
}

int shmobj_queue_create(shmobj_segment *seg, const char *name,
                        uint32_t capacity, unsigned flags, shmobj_queue **out)
{
    if (seg == NULL || out == NULL || flags != 0 || name_ok(name) != 0)
        return SHMOBJ_EINVAL;
    uint64_t size = queue_footprint(capacity);
    if (size == 0)
        return SHMOBJ_EINVAL;
    shmobj_ref ref;
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    int rc = sp->ops->alloc(sp, size, 64, &ref);
    if (rc != 0)
        return rc;
    void *mem;
    rc = shmobj__space_at(sp, shmobj__ref_off(ref), size, &mem);
    if (rc == 0)
        rc = shmobj__ring_init(mem, size, capacity, flags, ring_ident(ref));
    if (rc == 0) {
        shmobj__retire_init(
            (struct shmobj__retire *)((uint8_t *)mem + retire_offset(capacity)));
        shmobj__track_init(
            (struct shmobj__track *)((uint8_t *)mem + track_offset(capacity)),
            shmobj__track_count(capacity));
    }
    shmobj_queue *q = NULL;
    if (rc == 0)
        rc = handle_new(seg, ref, &q);
    /* Published last and only if the name is still free: of two creators
     * racing, one gets SHMOBJ_EEXIST and frees its ring. */
    if (rc == 0)
        rc = shmobj_segment_root_add(seg, name, ref);
    if (rc != 0) {
        shmobj_queue_close(q);
        sp->ops->free(sp, ref);
        return rc;
    }
    *out = q;
    return 0;
}

int shmobj_queue_open(shmobj_segment *seg, const char *name,
                      shmobj_queue **out)
{
    if (seg == NULL || out == NULL || name_ok(name) != 0)
        return SHMOBJ_EINVAL;
    shmobj_ref ref;
    int rc = shmobj_segment_root_get(seg, name, &ref);
    if (rc != 0)
        return rc;
    return handle_new(seg, ref, out);
}

int shmobj_queue_open_timed(shmobj_segment *seg, const char *name,
                            int64_t timeout_ns, shmobj_queue **out)
{
    if (seg == NULL || out == NULL || name_ok(name) != 0)
        return SHMOBJ_EINVAL;
    shmobj_ref ref;
    int rc = shmobj_segment_root_wait(seg, name, timeout_ns, &ref);
    if (rc != 0)
        return rc;
    return handle_new(seg, ref, out);
}

/* Rounds of create-then-open before open_or_create gives up: each lost
 * round means another process published the name and took it away again
 * (a destroy, or a creator that failed after publishing), which a peer
 * start-up does not do for long. */
#define OPEN_OR_CREATE_ROUNDS 16

int shmobj_queue_open_or_create(shmobj_segment *seg, const char *name,
                                uint32_t capacity, unsigned flags,
                                shmobj_queue **out)
{
    if (seg == NULL || out == NULL || flags != 0 || name_ok(name) != 0 ||
        queue_footprint(capacity) == 0)
        return SHMOBJ_EINVAL;
    int rc = SHMOBJ_ENOTFOUND;
    for (unsigned i = 0; i < OPEN_OR_CREATE_ROUNDS; i++) {
        rc = shmobj_queue_create(seg, name, capacity, flags, out);
        if (rc != SHMOBJ_EEXIST)
            return rc;
        /* The winner publishes its ring only once it is complete, so an
         * existing root opens at once, unless it went away meanwhile. */
        rc = shmobj_queue_open(seg, name, out);
        if (rc != SHMOBJ_ENOTFOUND && rc != SHMOBJ_ESTALE)
            return rc;
    }
    return rc;
}

/* Untrack what this handle still tracks (see shmobj_queue_close()). Only
 * in the process that made the records: a forked child's copy of the
 * handle names no record of its own. */
static void track_drop_all(shmobj_queue *q)
{
    if (atomic_load_explicit(&q->tracked, memory_order_relaxed) == 0 ||
        atomic_load_explicit(&q->ring.self_forks, memory_order_acquire) !=
            (uint64_t)shmobj__os_forks_seen() + 1 ||
        !shmobj__ring_live(&q->ring))
        return;
    uint32_t me = atomic_load_explicit(&q->ring.self_token, memory_order_relaxed);
    for (uint32_t i = 0; i < q->track_count; i++) {
        struct shmobj__track_rec *r = &q->track->rec[i];
        uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
        if ((s != SHMOBJ__TRACK_PENDING && s != SHMOBJ__TRACK_DONE) ||
            atomic_load_explicit(&r->token, memory_order_relaxed) != me ||
            atomic_load_explicit(&r->handle, memory_order_relaxed) != q->serial)
            continue;
        if (s == SHMOBJ__TRACK_DONE ||
            !atomic_compare_exchange_strong_explicit(&r->state, &s,
                                                     SHMOBJ__TRACK_ABANDONED,
                                                     memory_order_acq_rel,
                                                     memory_order_acquire))
            /* done (also just now, when the CAS lost to the consumer) */
            (void)shmobj__track_release(q->track, i, SHMOBJ__TRACK_DONE);
    }
}

void shmobj_queue_close(shmobj_queue *q)
{
    if (q == NULL)
        return;
    track_drop_all(q);
    notify_drop(q);
    shmobj__os_pmutex_destroy(&q->lock);
    free(q);
}

/* How long a destroy waits for the threads asleep on the queue to leave
 * (they are woken at once; a count left by a process killed while asleep
 * never goes away, hence the bound). */
#define DESTROY_SLEEPERS_NS (100 * 1000 * 1000ull)

/* Wake every thread asleep on the ring and every armed listener: each
 * finds the identity cleared and returns SHMOBJ_ESTALE. Waits (bounded)
 * until the sleepers have left, so that none writes its count into the
 * block after the heap has given it away. */
static void destroy_wake(shmobj_queue *q)
{
    struct shmobj__ring_hdr *h = q->ring.hdr;
    uint64_t end = shmobj__os_now_ns() + DESTROY_SLEEPERS_NS;
    notify_fire(q);
    (void)shmobj__ring_sleepers_repair(&q->ring);
    for (;;) {
        /* senders waiting for a tracked reference: each wakes, finds the
         * identity cleared and leaves */
        bool senders = false;
        for (uint32_t i = 0; i < q->track_count; i++)
            if (atomic_load_explicit(&q->track->rec[i].waiters,
                                     memory_order_seq_cst) != 0) {
                senders = true;
                shmobj__os_futex_wake(&q->track->rec[i].state, INT32_MAX);
            }
        atomic_fetch_add_explicit(&h->put_event, 1, memory_order_seq_cst);
        atomic_fetch_add_explicit(&h->take_event, 1, memory_order_seq_cst);
        shmobj__os_futex_wake(&h->put_event, INT32_MAX);
        shmobj__os_futex_wake(&h->take_event, INT32_MAX);
        if ((!senders &&
             atomic_load_explicit(&h->cons_waiters, memory_order_seq_cst) == 0 &&
             atomic_load_explicit(&h->prod_waiters, memory_order_seq_cst) == 0) ||
            shmobj__os_now_ns() >= end)
            return;
        shmobj__os_sleep_ns(1000 * 1000);
    }
}

int shmobj_queue_destroy(shmobj_segment *seg, const char *name)
{
    if (seg == NULL || name_ok(name) != 0)
        return SHMOBJ_EINVAL;
    shmobj_ref ref;
    int rc = shmobj_segment_root_get(seg, name, &ref);
    if (rc != 0)
        return rc;
    /* make sure it is a queue before freeing anything */
    shmobj_queue *q;
    rc = handle_new(seg, ref, &q);
    if (rc != 0)
        return rc;
    /* from here every handle's next operation fails (SHMOBJ_ESTALE), a
     * second destroy and a late open too */
    atomic_store_explicit(&q->ring.hdr->ident, 0, memory_order_relaxed);
    destroy_wake(q);
    unsigned n;
    (void)retire_drain(q, &n);
    shmobj_queue_close(q);
    rc = shmobj_segment_root_del(seg, name);
    if (rc != 0)
        return rc;
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    return sp->ops->free(sp, ref);
}

int shmobj_queue_spin_set(shmobj_queue *q, int64_t spin_ns)
{
    if (q == NULL)
        return SHMOBJ_EINVAL;
    atomic_store_explicit(&q->spin_ns, spin_ns, memory_order_relaxed);
    return 0;
}

int shmobj_queue_capacity(shmobj_queue *q, uint32_t *capacity)
{
    if (q == NULL || capacity == NULL)
        return SHMOBJ_EINVAL;
    *capacity = (uint32_t)q->ring.capacity;
    return 0;
}

/* ---- messages ------------------------------------------------------------ */

static int put_timed(shmobj_queue *q, shmobj_ref ref, int64_t timeout_ns)
{
    if (q == NULL || !shmobj__ring_value_ok(ref))
        return SHMOBJ_EINVAL;
    /* one try first: a queue with room needs no deadline and no wait
     * loop (the blocking path tries again before it waits) */
    int rc = shmobj__ring_try_put(&q->ring, ref);
    if (rc == SHMOBJ_EFULL && timeout_ns != 0)
        rc = shmobj__ring_put(
            &q->ring, ref,
            atomic_load_explicit(&q->spin_ns, memory_order_relaxed),
            shmobj__os_deadline(timeout_ns));
    if (rc != 0)
        return op_status(q, rc);
    after_put(q);
    return 0;
}

int shmobj_queue_put(shmobj_queue *q, shmobj_ref ref)
{
    return put_timed(q, ref, SHMOBJ_FOREVER);
}

int shmobj_queue_try_put(shmobj_queue *q, shmobj_ref ref)
{
    return put_timed(q, ref, 0);
}

int shmobj_queue_put_timed(shmobj_queue *q, shmobj_ref ref, int64_t timeout_ns)
{
    return put_timed(q, ref, timeout_ns);
}

static int take_timed(shmobj_queue *q, shmobj_ref *ref, int64_t timeout_ns,
                      bool peek)
{
    if (q == NULL || ref == NULL)
        return SHMOBJ_EINVAL;
    uint64_t v;
    /* as put_timed(): one try before any deadline or wait loop */
    int rc = peek ? shmobj__ring_try_peek(&q->ring, &v)
                  : shmobj__ring_try_take(&q->ring, &v);
    if (rc == SHMOBJ_EEMPTY && timeout_ns != 0) {
        int64_t spin = atomic_load_explicit(&q->spin_ns, memory_order_relaxed);
        uint64_t deadline = shmobj__os_deadline(timeout_ns);
        rc = peek ? shmobj__ring_peek(&q->ring, &v, spin, deadline)
                  : shmobj__ring_take(&q->ring, &v, spin, deadline);
    }
    if (rc != 0)
        return op_status(q, rc);
    *ref = v;
    return 0;
}

int shmobj_queue_take(shmobj_queue *q, shmobj_ref *ref)
{
    return take_timed(q, ref, SHMOBJ_FOREVER, false);
}

int shmobj_queue_try_take(shmobj_queue *q, shmobj_ref *ref)
{
    return take_timed(q, ref, 0, false);
}

int shmobj_queue_take_timed(shmobj_queue *q, shmobj_ref *ref,
                            int64_t timeout_ns)
{
    return take_timed(q, ref, timeout_ns, false);
}

int shmobj_queue_peek(shmobj_queue *q, shmobj_ref *ref)
{
    return take_timed(q, ref, SHMOBJ_FOREVER, true);
}

int shmobj_queue_try_peek(shmobj_queue *q, shmobj_ref *ref)
{
    return take_timed(q, ref, 0, true);
}

int shmobj_queue_peek_timed(shmobj_queue *q, shmobj_ref *ref,
                            int64_t timeout_ns)
{
    return take_timed(q, ref, timeout_ns, true);
}

int shmobj_queue_put_many(shmobj_queue *q, const shmobj_ref *refs, size_t n,
                          int64_t timeout_ns, size_t *put)
{
    if (put != NULL)
        *put = 0;
    if (q == NULL || put == NULL || (refs == NULL && n > 0))
        return SHMOBJ_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!shmobj__ring_value_ok(refs[i]))
            return SHMOBJ_EINVAL; /* nothing sent */
    uint64_t deadline = 0;
    int rc = 0;
    size_t done = 0;
    while (done < n) {
        uint32_t chunk = n - done > UINT32_MAX ? UINT32_MAX : (uint32_t)(n - done);
        uint32_t k = 0;
        rc = shmobj__ring_try_put_many(&q->ring, refs + done, chunk, &k);
        done += k;
        if (k > 0)
            after_put(q);
        if (rc != SHMOBJ_EFULL || timeout_ns == 0)
            break;
        /* full: wait for room for the next one as put_timed() does, then
         * go on in batches */
        if (deadline == 0)
            deadline = shmobj__os_deadline(timeout_ns);
        rc = shmobj__ring_put(&q->ring, refs[done],
                              atomic_load_explicit(&q->spin_ns, memory_order_relaxed),
                              deadline);
        if (rc != 0)
            break;
        done++;
        after_put(q);
    }
    *put = done;
    if (rc != 0)
        return op_status(q, rc);
    return 0;
}

int shmobj_queue_take_many(shmobj_queue *q, shmobj_ref *refs, size_t max,
                           int64_t timeout_ns, size_t *taken)
{
    if (taken != NULL)
        *taken = 0;
    if (q == NULL || refs == NULL || taken == NULL || max == 0)
        return SHMOBJ_EINVAL;
    uint32_t chunk = max > UINT32_MAX ? UINT32_MAX : (uint32_t)max;
    uint32_t k = 0;
    _Static_assert(sizeof(shmobj_ref) == sizeof(uint64_t), "refs are words");
    int rc = shmobj__ring_try_take_many(&q->ring, (uint64_t *)refs, chunk, &k);
    if (rc == SHMOBJ_EEMPTY && timeout_ns != 0) {
        /* none yet: wait for one as take_timed() does, then take what
         * else is there */
        uint64_t v;
        rc = shmobj__ring_take(&q->ring, &v,
                               atomic_load_explicit(&q->spin_ns, memory_order_relaxed),
                               shmobj__os_deadline(timeout_ns));
        if (rc == 0) {
            refs[0] = v;
            k = 1;
            uint32_t more = 0;
            if (chunk > 1 &&
                shmobj__ring_try_take_many(&q->ring, (uint64_t *)refs + 1,
                                           chunk - 1, &more) == 0)
                k += more;
        }
    }
    if (rc != 0)
        return op_status(q, rc);
    *taken = k;
    return 0;
}

bool shmobj_queue_has_messages(shmobj_queue *q)
{
    uint64_t v;
    return q != NULL && shmobj__ring_try_peek(&q->ring, &v) == 0;
}

int shmobj_queue_count(shmobj_queue *q, uint64_t *count)
{
    if (q == NULL || count == NULL)
        return SHMOBJ_EINVAL;
    if (!shmobj__ring_live(&q->ring))
        return op_status(q, SHMOBJ_ESTALE);
    *count = shmobj__ring_count(&q->ring);
    return 0;
}

/* Copy a message into the segment. The stores are chosen by where the
 * message will be when the consumer, on another core, reads it:
 *   - up to 4 times this core's L2: plain stores. The message passes
 *     through our L2 to the shared L3 as it is written, where the consumer
 *     finds it. Below half the L2 this pays only because such blocks come
 *     back through the retire FIFO (retire.h) cold in the consumer's caches:
 *     into the block the consumer freed last, plain stores have to take
 *     every line back from its core, and streaming ones were faster;
 *   - beyond: streaming stores. The messages in flight overflow the L3, and
 *     plain stores would read every line from memory before writing it.
 * Measured on one 1 MiB-L2 machine, copy-in GiB/s, streaming / plain into
 * the block freed last: 64 KiB 16.5/7.8, 400 KB 18/11, 512 KiB 17.4/19,
 * 1 MiB 19.5/31.5, 2 MiB 15.3/22.4, 4 MiB 14.7/18.8, 8 MiB 12.2/10,
 * 16 MiB 12/9; plain into retired blocks: 64 KiB 26.7, 400 KB 33.8 (the
 * spinning shared-memory ring of W1, doc/benchmarks.md: 22-30). Both are vector
 * loops: the C library's memcpy of this size ("rep movsb") measured as slow
 * as the slow choice above. dst is 64-byte aligned (message data). */
#define COPY_VECTOR_MIN (32u << 10)
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2"))) static void copy_avx2(void *dst, const void *src,
                                                      size_t n64, int stream)
{
    __m256i *d = dst;
    const __m256i *s = src;
    for (size_t i = 0; i < n64; i++, d += 2, s += 2) {
        __m256i a = _mm256_loadu_si256(s), b = _mm256_loadu_si256(s + 1);
        if (stream) {
            _mm256_stream_si256(d, a);
            _mm256_stream_si256(d + 1, b);
        } else {
            _mm256_store_si256(d, a);
            _mm256_store_si256(d + 1, b);
        }
    }
}

static void copy_sse2(void *dst, const void *src, size_t n64, int stream)
{
    __m128i *d = dst;
    const __m128i *s = src;
    for (size_t i = 0; i < n64; i++, d += 4, s += 4) {
        __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1);
        __m128i c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
        if (stream) {
            _mm_stream_si128(d, a);
            _mm_stream_si128(d + 1, b);
            _mm_stream_si128(d + 2, c);
            _mm_stream_si128(d + 3, e);
        } else {
            _mm_store_si128(d, a);
            _mm_store_si128(d + 1, b);
            _mm_store_si128(d + 2, c);
            _mm_store_si128(d + 3, e);
        }
    }
}
#define HAVE_COPY_VECTOR 1
#endif

static void copy_in(const shmobj_queue *q, void *dst, const void *src, size_t len)
{
#if defined(HAVE_COPY_VECTOR)
    if (len >= COPY_VECTOR_MIN) {
        int stream = len > q->plain_max;
        size_t n = len / 64;
        if (__builtin_cpu_supports("avx2"))
            copy_avx2(dst, src, n, stream);
        else
            copy_sse2(dst, src, n, stream);
        _mm_sfence(); /* order any streaming stores before the publish */
        if (n * 64 < len)
            memcpy((char *)dst + n * 64, (const char *)src + n * 64,
                   len - n * 64);
        return;
    }
#endif
    (void)q;
    memcpy(dst, src, len);
}

int shmobj_queue_put_copy(shmobj_queue *q, const void *data, size_t len,
                          unsigned flags, int64_t timeout_ns, shmobj_ref *ref)
{
    if (q == NULL || (data == NULL && len > 0) ||
        ((flags & SHMOBJ_QUEUE_MSG_TRACK) != 0 && ref == NULL))
        return SHMOBJ_EINVAL;
    shmobj_ref r;
    void *p;
    int rc = shmobj_queue_msg_alloc(q, len, flags, &r, &p);
    if (rc != 0)
        return rc;
    if (len > 0)
        copy_in(q, p, data, len);
    rc = put_timed(q, r, timeout_ns);
    if (rc != 0) {
        q->sp->ops->free(q->sp, r);
        return rc;
    }
    if (ref != NULL)
        *ref = r;
    return 0;
}

/* ---- tracked references --------------------------------------------------- */

/* Sleep (after the handle's spin) while *state is `pending`, up to the
 * deadline: the state seen, or SHMOBJ_ETIMEDOUT / SHMOBJ_EREPLACED, or
 * SHMOBJ_ESTALE once the queue was destroyed (its destroy wakes us). */
static int track_wait(shmobj_queue *q, struct shmobj__track_rec *r,
                      int64_t timeout_ns, uint64_t deadline, uint32_t *seen)
{
    uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
    int64_t spin = atomic_load_explicit(&q->spin_ns, memory_order_relaxed);
    if (s == SHMOBJ__TRACK_PENDING && spin != 0 && timeout_ns != 0) {
        uint64_t end = spin < 0 ? deadline
                                : shmobj__os_now_ns() + (uint64_t)spin;
        for (unsigned i = 1; s == SHMOBJ__TRACK_PENDING; i++) {
            s = atomic_load_explicit(&r->state, memory_order_acquire);
            if ((i & 255u) == 0 && shmobj__os_now_ns() >= end)
                break;
        }
    }
    while (s == SHMOBJ__TRACK_PENDING) {
        if (!shmobj__ring_live(&q->ring))
            return SHMOBJ_ESTALE;
        if (timeout_ns == 0)
            return SHMOBJ_ETIMEDOUT;
        if (shmobj__os_now_ns() >= deadline)
            return q->sp->ops->live->linked(q->sp) ? SHMOBJ_ETIMEDOUT
                                                   : SHMOBJ_EREPLACED;
        atomic_fetch_add_explicit(&r->waiters, 1, memory_order_seq_cst);
        atomic_thread_fence(memory_order_seq_cst);
        s = atomic_load_explicit(&r->state, memory_order_acquire);
        if (s == SHMOBJ__TRACK_PENDING && shmobj__ring_live(&q->ring))
            shmobj__os_futex_wait(&r->state, SHMOBJ__TRACK_PENDING, deadline);
        atomic_fetch_sub_explicit(&r->waiters, 1, memory_order_relaxed);
        s = atomic_load_explicit(&r->state, memory_order_acquire);
    }
    *seen = s;
    return 0;
}

/* The record of ref that this handle made, or SHMOBJ_ENOTFOUND. */
static int track_mine(shmobj_queue *q, shmobj_ref ref, uint32_t *idx)
{
    uint32_t me = shmobj__ring_self_token(&q->ring);
    int64_t k = me == 0 ? -1
                        : shmobj__track_find(q->track, q->track_count, ref, me,
                                             q->serial);
    if (k < 0)
        return SHMOBJ_ENOTFOUND;
    *idx = (uint32_t)k;
    return 0;
}

/* The sender is done with record idx, last seen DONE: empty it. */
static void track_drop(shmobj_queue *q, uint32_t idx, uint32_t from)
{
    if (shmobj__track_release(q->track, idx, from))
        atomic_fetch_sub_explicit(&q->tracked, 1, memory_order_relaxed);
}

int shmobj_queue_put_tracked(shmobj_queue *q, shmobj_ref ref,
                             int64_t timeout_ns)
{
    if (q == NULL || !shmobj__ring_value_ok(ref))
        return SHMOBJ_EINVAL;
    if (!shmobj__ring_live(&q->ring))
        return op_status(q, SHMOBJ_ESTALE);
    uint32_t me = shmobj__ring_self_token(&q->ring);
    if (me == 0)
        return SHMOBJ_EBUSY; /* no attachment token: nothing could judge us */
    uint32_t idx;
    int rc = shmobj__track_add(q->sp, q->track, q->track_count, ref, me,
                               q->serial, &idx);
    if (rc != 0)
        return rc == SHMOBJ_EFULL ? SHMOBJ_EBUSY : rc;
    /* visible before the reference can be taken: a consumer's done finds it */
    atomic_store_explicit(&q->track->rec[idx].state, SHMOBJ__TRACK_PENDING,
                          memory_order_release);
    atomic_fetch_add_explicit(&q->tracked, 1, memory_order_relaxed);
    rc = put_timed(q, ref, timeout_ns);
    if (rc != 0) /* never in the queue: nobody else saw the record */
        track_drop(q, idx, SHMOBJ__TRACK_PENDING);
    return rc;
}

int shmobj_queue_done(shmobj_queue *q, shmobj_ref ref)
{
    if (q == NULL || !shmobj__ring_value_ok(ref))
        return SHMOBJ_EINVAL;
    if (!shmobj__ring_live(&q->ring))
        return op_status(q, SHMOBJ_ESTALE);
    int64_t k = shmobj__track_find(q->track, q->track_count, ref, 0, 0);
    if (k < 0)
        return SHMOBJ_ENOTFOUND;
    struct shmobj__track_rec *r = &q->track->rec[k];
    uint32_t expect = SHMOBJ__TRACK_PENDING;
    if (atomic_compare_exchange_strong_explicit(&r->state, &expect,
                                                SHMOBJ__TRACK_DONE,
                                                memory_order_seq_cst,
                                                memory_order_acquire)) {
        if (atomic_load_explicit(&r->waiters, memory_order_seq_cst) != 0)
            shmobj__os_futex_wake(&r->state, INT32_MAX);
        return 0;
    }
    /* the sender stopped tracking it: the record is ours to empty */
    if (expect == SHMOBJ__TRACK_ABANDONED &&
        shmobj__track_release(q->track, (uint32_t)k, SHMOBJ__TRACK_ABANDONED))
        return SHMOBJ_ESTALE;
    return expect == SHMOBJ__TRACK_DONE ? SHMOBJ_EINVAL : SHMOBJ_ENOTFOUND;
}

int shmobj_queue_wait_done(shmobj_queue *q, shmobj_ref ref, int64_t timeout_ns)
{
    if (q == NULL || !shmobj__ring_value_ok(ref))
        return SHMOBJ_EINVAL;
    if (!shmobj__ring_live(&q->ring))
        return op_status(q, SHMOBJ_ESTALE);
    uint32_t idx;
    int rc = track_mine(q, ref, &idx);
    if (rc != 0)
        return rc;
    uint32_t s;
    rc = track_wait(q, &q->track->rec[idx], timeout_ns,
                    shmobj__os_deadline(timeout_ns), &s);
    if (rc != 0)
        return rc;
    if (s != SHMOBJ__TRACK_DONE)
        return SHMOBJ_ENOTFOUND; /* released meanwhile by another thread */
    track_drop(q, idx, SHMOBJ__TRACK_DONE);
    return 0;
}

int shmobj_queue_untrack(shmobj_queue *q, shmobj_ref ref)
{
    if (q == NULL || !shmobj__ring_value_ok(ref))
        return SHMOBJ_EINVAL;
    if (!shmobj__ring_live(&q->ring))
        return op_status(q, SHMOBJ_ESTALE);
    uint32_t idx;
    int rc = track_mine(q, ref, &idx);
    if (rc != 0)
        return rc;
    struct shmobj__track_rec *r = &q->track->rec[idx];
    uint32_t expect = SHMOBJ__TRACK_PENDING;
    if (atomic_compare_exchange_strong_explicit(&r->state, &expect,
                                                SHMOBJ__TRACK_ABANDONED,
                                                memory_order_acq_rel,
                                                memory_order_acquire)) {
        atomic_fetch_sub_explicit(&q->tracked, 1, memory_order_relaxed);
        return SHMOBJ_EBUSY; /* the consumer's done empties the record */
    }
    if (expect == SHMOBJ__TRACK_DONE) {
        track_drop(q, idx, SHMOBJ__TRACK_DONE);
        return 0;
    }
    return SHMOBJ_ENOTFOUND; /* abandoned already */
}

int shmobj_queue_wait_all(shmobj_queue *q, int64_t timeout_ns)
{
    if (q == NULL)
        return SHMOBJ_EINVAL;
    if (!shmobj__ring_live(&q->ring))
        return op_status(q, SHMOBJ_ESTALE);
    if (atomic_load_explicit(&q->tracked, memory_order_relaxed) == 0)
        return 0;
    uint32_t me = shmobj__ring_self_token(&q->ring);
    uint64_t deadline = shmobj__os_deadline(timeout_ns);
    int rc = 0;
    for (uint32_t i = 0; i < q->track_count; i++) {
        struct shmobj__track_rec *r = &q->track->rec[i];
        uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
        if ((s != SHMOBJ__TRACK_PENDING && s != SHMOBJ__TRACK_DONE) ||
            atomic_load_explicit(&r->token, memory_order_relaxed) != me ||
            atomic_load_explicit(&r->handle, memory_order_relaxed) != q->serial)
            continue;
        if (rc == 0) {
            int w = track_wait(q, r, timeout_ns, deadline, &s);
            if (w != 0)
                rc = w; /* keep releasing what is done already */
        }
        if (s == SHMOBJ__TRACK_DONE)
            track_drop(q, i, SHMOBJ__TRACK_DONE);
        else if (rc == 0 && s == SHMOBJ__TRACK_PENDING)
            rc = SHMOBJ_ETIMEDOUT;
    }
    return rc == SHMOBJ_ESTALE ? op_status(q, rc) : rc;
}

/* ---- internals for tests ------------------------------------------------- */

void shmobj__queue_stall_set(shmobj_queue *q, uint64_t ns)
{
    q->ring.stall_ns = ns;
}

void shmobj__queue_take_hold_set(shmobj_queue *q, uint64_t ns)
{
    q->ring.test_hold_ns = ns;
}

void shmobj__queue_put_hold_set(shmobj_queue *q, uint64_t ns)
{
    q->ring.test_put_hold_ns = ns;
}

struct shmobj__ring *shmobj__queue_ring(shmobj_queue *q)
{
    return &q->ring;
}

struct shmobj__retire *shmobj__queue_retire(shmobj_queue *q)
{
    return q->retire;
}
