/* The queue's one bounded wait on a completion word: a message block's
 * state (queue-msg.c) or a tracked reference's record (queue-tracked.c).
 *
 * Invariants kept here:
 * - The wait ends by the deadline: the handle's spin is cut at the
 *   deadline, and every sleep is a futex wait bounded by it.
 * - No wake-up is missed: the waiter counts itself (seq_cst), fences and
 *   reads the word again before it sleeps; the party that changes the word
 *   does so with a seq_cst CAS and then reads the count (Dekker).
 * - At the deadline the segment's link decides the answer: a segment
 *   replaced under its name has peers that moved on (SHMOBJ_EREPLACED),
 *   else SHMOBJ_ETIMEDOUT.
 * - A wait on a word inside the queue's block stops once the ring is no
 *   longer the handle's (destroyed: SHMOBJ_ESTALE), before it counts
 *   itself in a block about to be freed; the destroy wakes such sleepers. */
#include "os.h"
#include "queue-internal.h"

int shmobj__queue_wait_while(shmobj_queue *q, _Atomic uint32_t *word,
                             _Atomic uint32_t *waiters, uint32_t pending,
                             bool in_ring, int64_t timeout_ns,
                             uint64_t deadline, uint32_t *seen)
{
    uint32_t s = atomic_load_explicit(word, memory_order_acquire);
    int64_t spin = atomic_load_explicit(&q->spin_ns, memory_order_relaxed);
    if (s == pending && spin != 0 && timeout_ns != 0) {
        uint64_t end = spin < 0 ? deadline
                                : shmobj__os_now_ns() + (uint64_t)spin;
        for (unsigned i = 1; s == pending; i++) {
            s = atomic_load_explicit(word, memory_order_acquire);
            if ((i & 255u) == 0 && shmobj__os_now_ns() >= end)
                break;
        }
    }
    while (s == pending) {
        if (in_ring && !shmobj__ring_live(&q->ring))
            return SHMOBJ_ESTALE;
        if (timeout_ns == 0)
            return SHMOBJ_ETIMEDOUT;
        if (shmobj__os_now_ns() >= deadline)
            return q->sp->ops->live->linked(q->sp) ? SHMOBJ_ETIMEDOUT
                                                   : SHMOBJ_EREPLACED;
        atomic_fetch_add_explicit(waiters, 1, memory_order_seq_cst);
        atomic_thread_fence(memory_order_seq_cst);
        s = atomic_load_explicit(word, memory_order_acquire);
        if (s == pending && (!in_ring || shmobj__ring_live(&q->ring)))
            shmobj__os_futex_wait(word, pending, deadline);
        atomic_fetch_sub_explicit(waiters, 1, memory_order_relaxed);
        s = atomic_load_explicit(word, memory_order_acquire);
    }
    *seen = s;
    return 0;
}
