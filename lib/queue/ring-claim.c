/* The readers of the ring's claim records: who is alive, how long a slot
 * has been stuck, and the recovery of a slot whose claimant died (ring.h
 * for the slot words, doc/format-queue.md "Recovery").
 *
 * Invariants kept here:
 * - A claim record (one word in its slot, ring.h) is trusted only when it
 *   names the stuck position's lap, the role of the side that should have
 *   moved and a token: a record of the slot's previous lap, or of the
 *   other role at the same position (the producer's record stays in place
 *   until the consumer records itself), is no record. A claimant is dead
 *   when its attachment token is no longer alive (seg-procs.c), never by
 *   a pid.
 * - A stuck slot is resolved by one CAS from the exact word seen, so a
 *   claimant judged dead that was only slow fails its own CAS afterwards:
 *   nothing is lost or duplicated.
 * - A claimant that never recorded itself is resolved only after
 *   SHMOBJ__RING_UNKNOWN_STALLS periods; a live one is judged again one
 *   period later. */
#include "ring-int.h"

/* ---- who am I, and who is alive: the segment's attachment tokens ---------- */

/* This process's token (0 when unknown), looked up once per fork
 * generation: a claim record is written on every put and take. A token
 * with bits outside SHMOBJ__RING_CLAIM_TOKEN is none (format.md). */
__attribute__((noinline, cold)) void
shmobj__ring_self_lookup(struct shmobj__ring *r, uint64_t forks)
{
    uint32_t token = r->sp->ops->live->token(r->sp);
    if ((token & ~SHMOBJ__RING_CLAIM_TOKEN) != 0)
        token = 0;
    atomic_store_explicit(&r->self_token, token, memory_order_relaxed);
    atomic_store_explicit(&r->self_forks, forks, memory_order_release);
}

uint32_t shmobj__ring_self_token(struct shmobj__ring *r)
{
    return self_token(r);
}

/* 1: the claimant of (role, pos) is recorded and alive; 0: recorded and
 * dead; -1: not recorded (it never got that far, or the record was
 * overwritten by a later claimant of the slot, of either role). The
 * record is one word: its lap, role and token come from one claimant. */
static int claim_alive(struct shmobj__ring *r, unsigned role, uint64_t pos)
{
    uint64_t c = atomic_load_explicit(&r->slots[pos & r->mask].claim,
                                      memory_order_acquire);
    uint32_t token = shmobj__ring_claim_token(c);
    if (token == 0 || c != shmobj__ring_claim_word(r, role, pos, token))
        return -1;
    /* this side waits on the other's claim, never on one of its own: our
     * token there, with no other thread in this process, is damage */
    return shmobj__space_token_holder_alive(r->sp, token) ? 1 : 0;
}

/* Track how long this view has seen `pos` stuck; true once the claimant
 * should be judged (elapsed >= stall_ns). *elapsed gets the time so far. */
static bool stalled(struct shmobj__ring *r, _Atomic uint64_t *spos,
                    _Atomic uint64_t *since, uint64_t pos, uint64_t *elapsed)
{
    uint64_t now = shmobj__os_now_ns();
    if (atomic_load_explicit(spos, memory_order_relaxed) != pos + 1) {
        atomic_store_explicit(since, now, memory_order_relaxed);
        atomic_store_explicit(spos, pos + 1, memory_order_relaxed);
        return false;
    }
    *elapsed = now - atomic_load_explicit(since, memory_order_relaxed);
    return *elapsed >= r->stall_ns;
}

/* Whether the claimant of position pos on `side` (0 producers, 1
 * consumers) has held it past the stall period and is dead, so that its
 * slot may be taken over. A live claimant is judged again one period
 * later; one whose liveness cannot be told gets several periods. */
static bool claimant_gone(struct shmobj__ring *r, unsigned side, uint64_t pos,
                          _Atomic uint64_t *spos, _Atomic uint64_t *since)
{
    uint64_t elapsed = 0;
    if (!stalled(r, spos, since, pos, &elapsed))
        return false;
    int alive = claim_alive(r, side, pos);
    if (alive == 1) {
        atomic_store_explicit(since, shmobj__os_now_ns(), memory_order_relaxed);
        return false;
    }
    return alive == 0 || elapsed >= r->stall_ns * SHMOBJ__RING_UNKNOWN_STALLS;
}

/* The producer of d claimed it and has not published for a while: skip the
 * slot if that producer is dead. True when the slot changed (retry). */
bool shmobj__ring_resolve_producer(struct shmobj__ring *r,
                                   struct shmobj__ring_slot *s, uint64_t d)
{
    if (!claimant_gone(r, SHMOBJ__RING_ROLE_PRODUCER, d, &r->stall_pos, &r->stall_since))
        return false;
    uint64_t expect = m_empty(d);
    if (atomic_compare_exchange_strong_explicit(&s->word, &expect,
                                                m_skipped(d),
                                                memory_order_seq_cst,
                                                memory_order_relaxed)) {
        atomic_fetch_add_explicit(&r->hdr->skipped, 1, memory_order_relaxed);
        wake_consumers(r);
    }
    return true;
}

/* The consumer of p = e - capacity claimed it and has not released the slot
 * for a while: release it on its behalf if that consumer is dead (its
 * message is lost with it). True when the slot changed (retry). */
bool shmobj__ring_resolve_consumer(struct shmobj__ring *r,
                                   struct shmobj__ring_slot *s, uint64_t w,
                                   uint64_t e)
{
    uint64_t p = e - r->capacity;
    if (!claimant_gone(r, SHMOBJ__RING_ROLE_CONSUMER, p, &r->pstall_pos, &r->pstall_since))
        return false;
    uint64_t expect = w;
    if (atomic_compare_exchange_strong_explicit(&s->word, &expect, m_empty(e),
                                                memory_order_seq_cst,
                                                memory_order_relaxed)) {
        atomic_fetch_add_explicit(&r->hdr->rescued, 1, memory_order_relaxed);
        wake_producers(r);
    }
    return true;
}

/* ---- set-up ---------------------------------------------------------------- */

/* Tests only (shmobj__ring.test_hold_ns): stay inside a take's window. */
__attribute__((noinline, cold)) void shmobj__ring_test_hold(uint64_t ns)
{
    uint64_t end = shmobj__os_now_ns() + ns;
    while (shmobj__os_now_ns() < end)
        shmobj__cpu_relax();
}
