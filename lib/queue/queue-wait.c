/* The queue's one bounded wait on a completion word: a message block's
 * state (queue-msg.c) or a tracked reference's record (queue-tracked.c).
 *
 * Invariants kept here:
 * - The wait ends by the deadline: the handle's spin is cut at the
 *   deadline, and every sleep is a futex wait bounded by it and by the
 *   wait slice.
 * - No wake-up is missed: the waiter counts itself (seq_cst), fences and
 *   reads the word again before it sleeps; the party that changes the word
 *   does so with a seq_cst CAS and then reads the count (Dekker).
 * - At the deadline the segment's link decides the answer: a segment
 *   replaced under its name has peers that moved on (SHMOBJ_EREPLACED),
 *   else SHMOBJ_ETIMEDOUT. A wait without a deadline ends too: every sleep
 *   is bounded by a wait slice, and after each slice the segment's name is
 *   checked (SHMOBJ_EREPLACED once it is gone).
 * - A wait that knows the ring position of what it waits for learns who
 *   took it from that slot's claim record (one load, when it first goes to
 *   sleep and after each slice until found; a message block whose put
 *   recorded no position is looked for among the messages waiting in the
 *   ring, at most FIND_MAX of them, and its position kept) and, after
 *   each slice, asks
 *   whether that consumer is alive: SHMOBJ_EPEERDEAD only when the segment
 *   says the consumer's token is dead, never when it cannot tell. Nothing
 *   of this runs before the wait has slept a slice but the load.
 * - A wait on a word inside the queue's block stops once the ring is no
 *   longer the handle's (destroyed: SHMOBJ_ESTALE), before it counts
 *   itself in a block about to be freed; the destroy wakes such sleepers. */
#include "os.h"
#include "queue-internal.h"
#include "ring-int.h"

/* Slots a wait looks through for its message when nobody recorded where
 * it was put (a tracked block put with shmobj_queue_put()). */
#define FIND_MAX 4096u

/* Where `ref` waits in the ring now: its position + 1 (mod 2^32), or 0
 * when it is not among the last FIND_MAX messages published and not yet
 * taken. Loads only, from enq_pos back. */
static uint32_t find_published(shmobj_queue *q, uint64_t ref)
{
    struct shmobj__ring *r = &q->ring;
    if (ref == 0 || !shmobj__ring_live(r))
        return 0;
    uint64_t e = atomic_load_explicit(&r->hdr->enq_pos, memory_order_acquire);
    uint64_t d = atomic_load_explicit(&r->hdr->deq_pos, memory_order_acquire);
    if (e <= d)
        return 0;
    uint64_t n = e - d;
    if (n > r->capacity)
        n = r->capacity;
    if (n > FIND_MAX)
        n = FIND_MAX;
    for (uint64_t i = 1; i <= n; i++) {
        uint64_t p = e - i;
        if (atomic_load_explicit(&r->slots[p & r->mask].word,
                                 memory_order_acquire) == (ref | lap_tag(r, p)))
            return (uint32_t)(p + 1);
    }
    return 0;
}

/* The ring position + 1 of what the wait is for, from *pos1 or, when that
 * says nothing and the message still waits in the ring, found there and
 * kept in *pos1 (CAS from 0) for the sender's later waits. When ring is
 * not NULL, it names the ring the position is in (the low 32 bits of its
 * identity): a position in another queue's ring is none of this one's. */
static uint32_t pos_of(shmobj_queue *q, _Atomic uint32_t *pos1,
                       _Atomic uint32_t *ring, uint64_t ref)
{
    if (pos1 == NULL)
        return 0;
    uint32_t tag = (uint32_t)q->ring.ident;
    uint32_t p1 = atomic_load_explicit(pos1, memory_order_acquire);
    if (p1 != 0)
        return ring == NULL ||
                       atomic_load_explicit(ring, memory_order_relaxed) == tag
                   ? p1
                   : 0;
    if ((p1 = find_published(q, ref)) == 0)
        return 0;
    if (ring != NULL)
        atomic_store_explicit(ring, tag, memory_order_relaxed);
    uint32_t none = 0;
    if (!atomic_compare_exchange_strong_explicit(pos1, &none, p1,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire))
        return 0; /* another thread's wait found it first: look next time */
    return p1;
}

/* The token of the consumer that claimed ring position p1 - 1 (p1: the
 * position + 1, modulo 2^32; 0 unknown), or 0 when the slot's claim
 * record names no consumer of that position (not taken yet, or the
 * record was overwritten by a later lap). */
static uint32_t taker_of(shmobj_queue *q, uint32_t p1)
{
    struct shmobj__ring *r = &q->ring;
    if (p1 == 0 || !shmobj__ring_live(r))
        return 0; /* unknown, or a ring destroyed: its slots are no more */
    uint32_t p = p1 - 1;
    uint64_t c = atomic_load_explicit(&r->slots[p & r->mask].claim,
                                      memory_order_acquire);
    uint32_t token = shmobj__ring_claim_token(c);
    /* the record's 32 lap bits against the lap bits pos1 carries */
    uint64_t lap_mask = (UINT64_C(1) << (32 - r->cap_log2)) - 1;
    if (token == 0 || ((c >> 31) & 1u) != SHMOBJ__RING_ROLE_CONSUMER ||
        ((c >> 32) & lap_mask) != ((uint64_t)(p >> r->cap_log2) & lap_mask))
        return 0;
    return token;
}

int shmobj__queue_wait_while(shmobj_queue *q, _Atomic uint32_t *word,
                             _Atomic uint32_t *waiters, uint32_t pending,
                             bool in_ring, int64_t timeout_ns,
                             uint64_t deadline, _Atomic uint32_t *pos1,
                             _Atomic uint32_t *ring, uint64_t ref,
                             uint32_t *seen)
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
    const struct shmobj__space_live_ops *live = q->sp->ops->live;
    uint64_t slice_end = 0; /* none before the first sleep */
    uint32_t taker = 0;
    while (s == pending) {
        if (in_ring && !shmobj__ring_live(&q->ring))
            return SHMOBJ_ESTALE;
        if (timeout_ns == 0)
            return SHMOBJ_ETIMEDOUT;
        uint64_t now = shmobj__os_now_ns();
        if (now >= deadline)
            return live->linked(q->sp) ? SHMOBJ_ETIMEDOUT : SHMOBJ_EREPLACED;
        if (slice_end == 0) {
            slice_end = now + SHMOBJ__RING_WAIT_SLICE_NS;
            taker = taker_of(q, pos_of(q, pos1, ring, ref));
        } else if (now >= slice_end) {
            /* a slice passed: is the segment still there, and is the
             * consumer that took it? */
            if (!live->linked(q->sp))
                return SHMOBJ_EREPLACED;
            if (taker == 0)
                taker = taker_of(q, pos_of(q, pos1, ring, ref));
            if (taker != 0 &&
                live->owner_state(q->sp, taker) == SHMOBJ__OS_OWNER_DEAD) {
                *seen = atomic_load_explicit(word, memory_order_acquire);
                if (*seen == pending)
                    return SHMOBJ_EPEERDEAD;
                s = *seen;
                break;
            }
            slice_end = shmobj__os_now_ns() + SHMOBJ__RING_WAIT_SLICE_NS;
        }
        uint64_t until = deadline < slice_end ? deadline : slice_end;
        atomic_fetch_add_explicit(waiters, 1, memory_order_seq_cst);
        SHMOBJ__STEP("queue.wait.counted");
        atomic_thread_fence(memory_order_seq_cst);
        s = atomic_load_explicit(word, memory_order_acquire);
        if (s == pending && (!in_ring || shmobj__ring_live(&q->ring)))
            shmobj__os_futex_wait(word, pending, until);
        atomic_fetch_sub_explicit(waiters, 1, memory_order_relaxed);
        s = atomic_load_explicit(word, memory_order_acquire);
    }
    *seen = s;
    return 0;
}
