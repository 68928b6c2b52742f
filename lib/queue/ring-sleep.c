/* The ring's sleepers and its blocking operations (ring.h for the sleeper
 * records, doc/format-queue.md "Sleeper records").
 *
 * Invariants kept here:
 * - A sleeper adds itself to its side's total, then to its process's
 *   record; on waking it takes itself from its record, then from the
 *   total: a record never holds more than its process contributes, so
 *   taking a dead owner's record back can never hide a live sleeper.
 * - A sleeper counts itself, fences, reads the event word and tries the
 *   operation again before it sleeps on that word (Dekker with the other
 *   side's seq_cst CAS and waiter load): it sees the change or is woken.
 * - A sleeper whose slot is claimed by a process that may be dead wakes
 *   after one stall period to judge it.
 * - Every sleep is bounded by a wait slice (SHMOBJ__RING_WAIT_SLICE_NS)
 *   as well as by the deadline, so a wait without a deadline ends too:
 *   after each slice that passed without the operation going through,
 *   the segment's name is checked (a few system calls, only once a wait
 *   has lasted a slice) and a segment removed or replaced under its name
 *   ends the wait with SHMOBJ_EREPLACED, not its deadline.
 * - A wait woken by the ring's destroy leaves before counting itself in a
 *   block about to be freed (SHMOBJ_ESTALE). */
#include "ring-int.h"

#include "shmobj/error.h"

/* ---- sleepers -------------------------------------------------------------- */

/* Take `n` back from a waiter total, never below zero (a damaged total
 * must not wrap into "many sleepers"). */
static void waiters_sub(_Atomic uint32_t *waiters, uint32_t n)
{
    uint32_t w = atomic_load_explicit(waiters, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(waiters, &w, w > n ? w - n : 0,
                                                  memory_order_seq_cst,
                                                  memory_order_relaxed))
        ;
}

bool shmobj__ring_sleepers_repair(struct shmobj__ring *r)
{
    struct shmobj__ring_hdr *h = r->hdr;
    _Atomic uint32_t *waiters[2] = {&h->cons_waiters, &h->prod_waiters};
    bool took = false;
    for (unsigned i = 0; i < SHMOBJ__RING_SLEEPERS; i++) {
        struct shmobj__ring_sleeper *s = &h->sleepers[i];
        uint64_t o = atomic_load_explicit(&s->owner, memory_order_acquire);
        uint64_t t = atomic_load_explicit(&s->token, memory_order_relaxed);
        if (o == 0 || o == SHMOBJ__RING_SLEEPER_BUSY || t != o)
            continue; /* free, busy, or not yet complete */
        if (shmobj__space_token_alive(r->sp, o) ||
            !atomic_compare_exchange_strong_explicit(&s->owner, &o,
                                                     SHMOBJ__RING_SLEEPER_BUSY,
                                                     memory_order_acq_rel,
                                                     memory_order_relaxed))
            continue;
        for (unsigned side = 0; side < 2; side++) {
            uint32_t c = atomic_exchange_explicit(&s->count[side], 0,
                                                  memory_order_relaxed);
            if (c != 0) {
                waiters_sub(waiters[side], c);
                took = true;
            }
        }
        atomic_store_explicit(&s->token, 0, memory_order_relaxed);
        atomic_store_explicit(&s->owner, 0, memory_order_release);
    }
    return took;
}

/* A wake that woke nobody: the total may hold the count of a process killed
 * while asleep. Every so many such wakes, look for one; back off while
 * none is found (a live sleeper between counting itself and sleeping also
 * makes a wake futile). */
static void futile_wake(struct shmobj__ring *r)
{
    uint32_t n = atomic_fetch_add_explicit(&r->futile, 1, memory_order_relaxed) + 1;
    uint32_t after = atomic_load_explicit(&r->repair_after, memory_order_relaxed);
    if (n < after)
        return;
    atomic_store_explicit(&r->futile, 0, memory_order_relaxed);
    if (shmobj__ring_sleepers_repair(r))
        after = SLEEPER_REPAIR_MIN;
    else if (after < SLEEPER_REPAIR_MAX)
        after *= 2;
    atomic_store_explicit(&r->repair_after, after, memory_order_relaxed);
}

__attribute__((noinline)) void shmobj__ring_wake(struct shmobj__ring *r,
                                                 _Atomic uint32_t *event)
{
    atomic_fetch_add_explicit(event, 1, memory_order_seq_cst);
    if (shmobj__os_futex_wake(event, INT32_MAX) == 0)
        futile_wake(r);
}

/* This process's sleeper record, claimed on first use; NULL when all are
 * taken by live processes (its sleepers are then counted in the totals
 * only, and a kill of one of them cannot be repaired). */
static struct shmobj__ring_sleeper *sleeper_self(struct shmobj__ring *r)
{
    struct shmobj__ring_hdr *h = r->hdr;
    uint64_t me = self_token(r);
    if (me == 0)
        return NULL;
    uint64_t cached = atomic_load_explicit(&r->sleeper, memory_order_relaxed);
    if (cached >> 32 == me && (cached & UINT32_MAX) != 0)
        return &h->sleepers[(cached & UINT32_MAX) - 1];
    for (int round = 0; round < 2; round++) {
        /* a record this handle already holds (another queue handle on the
         * same segment handle) */
        for (unsigned i = 0; i < SHMOBJ__RING_SLEEPERS; i++) {
            struct shmobj__ring_sleeper *s = &h->sleepers[i];
            if (atomic_load_explicit(&s->owner, memory_order_acquire) == me &&
                atomic_load_explicit(&s->token, memory_order_relaxed) == me) {
                atomic_store_explicit(&r->sleeper, me << 32 | (i + 1),
                                      memory_order_relaxed);
                return s;
            }
        }
        for (unsigned i = 0; i < SHMOBJ__RING_SLEEPERS; i++) {
            struct shmobj__ring_sleeper *s = &h->sleepers[i];
            uint64_t free = 0;
            if (!atomic_compare_exchange_strong_explicit(&s->owner, &free,
                                                         SHMOBJ__RING_SLEEPER_BUSY,
                                                         memory_order_acq_rel,
                                                         memory_order_relaxed))
                continue;
            atomic_store_explicit(&s->count[0], 0, memory_order_relaxed);
            atomic_store_explicit(&s->count[1], 0, memory_order_relaxed);
            atomic_store_explicit(&s->token, me, memory_order_relaxed);
            atomic_store_explicit(&s->owner, me, memory_order_release);
            atomic_store_explicit(&r->sleeper, me << 32 | (i + 1),
                                  memory_order_relaxed);
            return s;
        }
        /* all taken: free the records of dead handles, then look again */
        if (round == 0)
            shmobj__ring_sleepers_repair(r);
    }
    return NULL;
}

/* ---- blocking operations --------------------------------------------------- */

enum op { OP_PUT, OP_TAKE, OP_PEEK };


/* True when the slot the operation waits for is claimed by a process that
 * has not finished with it (so it may be dead and never wake us). */
static bool slot_in_flight(const struct shmobj__ring *r, enum op op)
{
    const struct shmobj__ring_hdr *h = r->hdr;
    uint64_t d = atomic_load_explicit(&h->deq_pos, memory_order_acquire);
    uint64_t e = atomic_load_explicit(&h->enq_pos, memory_order_acquire);
    if (op != OP_PUT) {
        uint64_t w = atomic_load_explicit(&r->slots[d & r->mask].word,
                                          memory_order_acquire);
        return e > d && w == m_empty(d);
    }
    if (e < r->capacity || d <= e - r->capacity)
        return false;
    uint64_t w = atomic_load_explicit(&r->slots[e & r->mask].word,
                                      memory_order_acquire);
    return w != m_empty(e);
}

/* For OP_PUT, *v is the value to put, and *at gets its position. */
static inline int try_op(struct shmobj__ring *r, enum op op, uint64_t *v,
                         uint64_t *at)
{
    switch (op) {
    case OP_PUT:
        return shmobj__ring_try_put_at(r, *v, at);
    case OP_TAKE:
        return shmobj__ring_try_take(r, v);
    default:
        return shmobj__ring_try_peek(r, v);
    }
}

/* Spin until the slot the operation waits on changes (or a while passes),
 * touching only that slot's line and our own side's position, so a spinning
 * waiter does not pull the other side's position line away from it. */
static inline bool slot_ready(const struct shmobj__ring *r, enum op op,
                              uint64_t p, uint64_t w)
{
    if (op == OP_PUT)
        return w == m_empty(p);
    return is_value_at(r, w, p) || w == m_skipped(p);
}

static void spin_watch(const struct shmobj__ring *r, enum op op)
{
    const struct shmobj__ring_hdr *h = r->hdr;
    const _Atomic uint64_t *pos = op == OP_PUT ? &h->enq_pos : &h->deq_pos;
    uint64_t p = atomic_load_explicit(pos, memory_order_relaxed);
    const _Atomic uint64_t *word = &r->slots[p & r->mask].word;
    uint64_t w = atomic_load_explicit(word, memory_order_relaxed);
    for (unsigned i = 0; i < 64 && !slot_ready(r, op, p, w); i++) {
        /* more pauses between looks the longer we wait: each look may pull
         * the line away from the writer we are waiting for, while the first
         * looks come quickly for the lowest latency */
        unsigned pauses = 1u << (i / 8 < 4 ? i / 8 : 4);
        for (unsigned k = 0; k < pauses; k++)
            shmobj__cpu_relax();
        if (atomic_load_explicit(pos, memory_order_relaxed) != p)
            return;
        w = atomic_load_explicit(word, memory_order_relaxed);
    }
}

static int sleep_op(struct shmobj__ring *r, enum op op, uint64_t *v,
                    uint64_t deadline, uint64_t *at);

static int wait_op(struct shmobj__ring *r, enum op op, uint64_t *v,
                   int64_t spin_ns, uint64_t deadline, uint64_t *at)
{
    int busy = op == OP_PUT ? SHMOBJ_EFULL : SHMOBJ_EEMPTY;
    int rc = try_op(r, op, v, at);
    if (rc != busy)
        return rc;
    if (spin_ns != 0) {
        uint64_t now = shmobj__os_now_ns();
        uint64_t end = spin_ns < 0 ? UINT64_MAX : now + (uint64_t)spin_ns;
        if (end > deadline)
            end = deadline;
        for (;;) {
            spin_watch(r, op);
            rc = try_op(r, op, v, at);
            if (rc != busy)
                return rc;
            if (shmobj__os_now_ns() >= end)
                break;
        }
        if (spin_ns < 0)
            return SHMOBJ_ETIMEDOUT;
    }
    /* Expired (a zero timeout, or the spin used it up): no need to count
     * ourselves as a sleeper. */
    if (shmobj__os_now_ns() >= deadline)
        return SHMOBJ_ETIMEDOUT;
    return sleep_op(r, op, v, deadline, at);
}

/* The sleeping part of wait_op(), out of line: the spinning part above is
 * the hot path of a busy queue. */
static __attribute__((noinline)) int sleep_op(struct shmobj__ring *r,
                                              enum op op, uint64_t *v,
                                              uint64_t deadline, uint64_t *at)
{
    int busy = op == OP_PUT ? SHMOBJ_EFULL : SHMOBJ_EEMPTY;
    int rc;
    struct shmobj__ring_hdr *h = r->hdr;
    unsigned side = op == OP_PUT ? 1 : 0;
    _Atomic uint32_t *waiters = side ? &h->prod_waiters : &h->cons_waiters;
    _Atomic uint32_t *event = side ? &h->take_event : &h->put_event;
    struct shmobj__ring_sleeper *me = sleeper_self(r);
    /* the end of the current wait slice: the segment's name is checked
     * once it passed */
    uint64_t slice_end = shmobj__os_now_ns() + SHMOBJ__RING_WAIT_SLICE_NS;
    for (;;) {
        /* woken by a destroy: leave before counting ourselves in a block
         * that is about to be freed */
        if (!shmobj__ring_live(r))
            return SHMOBJ_ESTALE;
        /* the total first, then our record (see struct shmobj__ring_sleeper) */
        atomic_fetch_add_explicit(waiters, 1, memory_order_seq_cst);
        if (me != NULL)
            atomic_fetch_add_explicit(&me->count[side], 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
        uint32_t ev = atomic_load_explicit(event, memory_order_seq_cst);
        quiet_clear(r); /* this try judges a stalled claimant */
        rc = try_op(r, op, v, at);
        uint64_t now = shmobj__os_now_ns();
        if (rc == busy && now < deadline && now < slice_end) {
            /* A claimed-but-unfinished slot may belong to a dead process
             * that will never wake us: wake up in time to judge it. And
             * wake at the slice's end to look at the segment's name. */
            uint64_t until = deadline < slice_end ? deadline : slice_end;
            if (r->stall_ns < until - now && slot_in_flight(r, op))
                until = now + r->stall_ns;
            shmobj__os_futex_wait(event, ev, until);
        }
        /* our record first, then the total */
        if (me != NULL)
            atomic_fetch_sub_explicit(&me->count[side], 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(waiters, 1, memory_order_relaxed);
        if (rc != busy)
            return rc;
        if (now >= deadline)
            /* a segment replaced under its name has peers that moved on */
            return r->sp->ops->live->linked(r->sp) ? SHMOBJ_ETIMEDOUT
                                                   : SHMOBJ_EREPLACED;
        if (now >= slice_end) {
            /* a slice passed without the operation going through */
            if (!r->sp->ops->live->linked(r->sp))
                return SHMOBJ_EREPLACED;
            slice_end = shmobj__os_now_ns() + SHMOBJ__RING_WAIT_SLICE_NS;
        }
    }
}

int shmobj__ring_put_at(struct shmobj__ring *r, uint64_t v, int64_t spin_ns,
                        uint64_t deadline, uint64_t *at)
{
    return wait_op(r, OP_PUT, &v, spin_ns, deadline, at);
}

int shmobj__ring_put(struct shmobj__ring *r, uint64_t v, int64_t spin_ns,
                     uint64_t deadline)
{
    uint64_t at;
    return wait_op(r, OP_PUT, &v, spin_ns, deadline, &at);
}

int shmobj__ring_take(struct shmobj__ring *r, uint64_t *v, int64_t spin_ns,
                      uint64_t deadline)
{
    uint64_t at;
    return wait_op(r, OP_TAKE, v, spin_ns, deadline, &at);
}

int shmobj__ring_peek(struct shmobj__ring *r, uint64_t *v, int64_t spin_ns,
                      uint64_t deadline)
{
    uint64_t at;
    return wait_op(r, OP_PEEK, v, spin_ns, deadline, &at);
}
