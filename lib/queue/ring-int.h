/* What the ring's sources share (ring.c, ring-claim.c, ring-sleep.c): the
 * slot words, this process's claim records and the wake-ups, inline where
 * the put and take paths use them, and the calls one source makes into
 * another. Nothing here is part of the bytes (ring.h holds those); only the
 * ring's sources include it, and queue-io.c, whose public put and take
 * inline the plain cases (ring_put_plain(), ring_take_plain()) so that a
 * message that goes through at once costs one call, not two.
 *
 *   ring.c        set-up, the non-blocking put, take, peek and batches
 *   ring-claim.c  the readers of claim records: who is alive, stall
 *                 tracking, the recovery of slots whose claimant died
 *   ring-sleep.c  sleeper records and their repair, futile wakes, and the
 *                 blocking put, take and peek (spin, then sleep) */
#ifndef SHMOBJ_QUEUE_RING_INT_H
#define SHMOBJ_QUEUE_RING_INT_H

#include <stdint.h>

#include "cpu.h"
#include "os.h"
#include "ring.h"
#include "step.h"


/* We are about to CAS this line: ask for it in exclusive state at once
 * (one cross-core transfer instead of a shared copy and then an upgrade),
 * and early, so the transfer overlaps the stores still draining before our
 * locked instructions. PREFETCHW is a no-op on x86 CPUs that lack it; the
 * compiler's __builtin_prefetch emits it only when told the CPU has it. */
static inline void prefetch_for_write(const volatile void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("prefetchw %0" : : "m"(*(const volatile char *)p));
#else
    __builtin_prefetch((const void *)p, 1, 3);
#endif
}

/* ---- slot words ----------------------------------------------------------- */

static inline uint64_t m_empty(uint64_t p) { return (p << 2) | 1u; }
static inline uint64_t m_skipped(uint64_t p) { return (p << 2) | 3u; }
static inline bool is_value(uint64_t w) { return (w & 1u) == 0; }
static inline uint64_t value_ref(uint64_t w) { return w & ~(uint64_t)15; }
static inline uint64_t lap_tag(const struct shmobj__ring *r, uint64_t p)
{
    return ((p >> r->cap_log2) & 7u) << 1;
}
/* A message published at p: bit 0 clear, p's lap tag, and a reference
 * that is not null (a word of 0 is damage: put never accepts 0). */
static inline bool is_value_at(const struct shmobj__ring *r, uint64_t w,
                               uint64_t p)
{
    return w > 15u && (w & 15u) == lap_tag(r, p);
}
/* ---- who am I: the segment's attachment tokens ---------------------------- */

/* Looks this process's token up for fork count `forks` (ring-claim.c). */
void shmobj__ring_self_lookup(struct shmobj__ring *r, uint64_t forks);

static inline uint32_t self_token(struct shmobj__ring *r)
{
    uint64_t forks = (uint64_t)shmobj__os_forks_seen() + 1;
    if (atomic_load_explicit(&r->self_forks, memory_order_acquire) != forks)
        shmobj__ring_self_lookup(r, forks);
    return atomic_load_explicit(&r->self_token, memory_order_relaxed);
}

/* The claim record (ring.h) of lap `lap` in `role` for `token`, a token
 * already kept to SHMOBJ__RING_CLAIM_TOKEN (self_token() is): what the
 * hot paths store, without the mask shmobj__ring_claim_word() applies. */
static inline uint64_t claim_of(uint64_t lap, unsigned role, uint32_t token)
{
    return lap << 32 | (uint64_t)role << 31 | token;
}

/* Record token as the claimant of (role, pos) in pos's slot s: one store
 * on the line the hand-over writes next. Relaxed: the hand-over (a CAS,
 * or a batch's first CAS before its plain stores) releases it. */
static inline void claim_record_in(const struct shmobj__ring *r,
                                   struct shmobj__ring_slot *s, unsigned role,
                                   uint64_t pos, uint32_t token)
{
    atomic_store_explicit(&s->claim, shmobj__ring_claim_word(r, role, pos, token),
                          memory_order_relaxed);
}

static inline void claim_record(struct shmobj__ring *r, unsigned role,
                                uint64_t pos)
{
    uint32_t token = self_token(r);
    claim_record_in(r, &r->slots[pos & r->mask], role, pos, token);
}

/* ---- wake-ups ---------------------------------------------------------------- */

#define SLEEPER_REPAIR_MIN 64u        /* futile wakes before a first repair */
#define SLEEPER_REPAIR_MAX (1u << 20) /* ... and at most, while repairs find nothing */

/* Bump the event and wake its sleepers, counting a wake that woke nobody
 * (ring-sleep.c); out of line: a busy queue's put and take only read the
 * waiter count. */
void shmobj__ring_wake(struct shmobj__ring *r, _Atomic uint32_t *event);

static inline void wake_side(struct shmobj__ring *r, _Atomic uint32_t *waiters,
                             _Atomic uint32_t *event)
{
    if (atomic_load_explicit(waiters, memory_order_seq_cst) != 0)
        shmobj__ring_wake(r, event);
}

static inline void wake_consumers(struct shmobj__ring *r)
{
    wake_side(r, &r->hdr->cons_waiters, &r->hdr->put_event);
}

static inline void wake_producers(struct shmobj__ring *r)
{
    wake_side(r, &r->hdr->prod_waiters, &r->hdr->take_event);
}

/* ---- empty and full without the other side's line ------------------------ */

/* True when this try of an empty (full) ring at position p may be
 * answered from the slot word alone (shmobj__ring.empty_pos): the first
 * SHMOBJ__RING_RECHECK tries at a position, and as many after each look at
 * the other side's position that said empty (full); counts the try. */
static inline bool quiet_try(_Atomic uint64_t *pos, _Atomic uint32_t *tries,
                             uint64_t p)
{
    uint32_t n = atomic_load_explicit(tries, memory_order_relaxed);
    if (n == UINT32_MAX)
        return false; /* quiet_clear(): look */
    if (atomic_load_explicit(pos, memory_order_relaxed) != p + 1) {
        atomic_store_explicit(tries, 1, memory_order_relaxed);
        atomic_store_explicit(pos, p + 1, memory_order_relaxed);
        return true;
    }
    if (n >= SHMOBJ__RING_RECHECK)
        return false;
    atomic_store_explicit(tries, n + 1, memory_order_relaxed);
    return true;
}

/* The other side's position said empty (full) at p. */
static inline void quiet_mark(_Atomic uint64_t *pos, _Atomic uint32_t *tries,
                              uint64_t p)
{
    atomic_store_explicit(tries, 0, memory_order_relaxed);
    atomic_store_explicit(pos, p + 1, memory_order_relaxed);
}

/* The next tries read the other side's position until one finds it
 * saying empty (full) again (a wait about to sleep: its tries are far
 * apart, and the stall timer must run). */
static inline void quiet_clear(struct shmobj__ring *r)
{
    atomic_store_explicit(&r->empty_tries, UINT32_MAX, memory_order_relaxed);
    atomic_store_explicit(&r->full_tries, UINT32_MAX, memory_order_relaxed);
}

/* ---- the plain put and take, inline where they are called -------------- */

/* Tests only (shmobj__ring.test_hold_ns): stay inside a window ns long. */
void shmobj__ring_test_hold(uint64_t ns);

/* Claim position d holding w (a value or SKIPPED(d)) and release the slot.
 * True when claimed. */
static inline bool claim_and_release(struct shmobj__ring *r,
                                     struct shmobj__ring_slot *s, uint64_t *d,
                                     uint64_t w)
{
    struct shmobj__ring_hdr *h = r->hdr;
    uint64_t pos = *d;
    if (!atomic_compare_exchange_weak_explicit(&h->deq_pos, d, pos + 1,
                                               memory_order_relaxed,
                                               memory_order_relaxed))
        return false;
    SHMOBJ__STEP("queue.take.claimed");
    claim_record(r, SHMOBJ__RING_ROLE_CONSUMER, pos);
    SHMOBJ__STEP("queue.take.recorded");
    if (__builtin_expect(r->test_hold_ns != 0, 0))
        shmobj__ring_test_hold(r->test_hold_ns);
    uint64_t expect = w;
    /* fails only if a producer already released it on our behalf */
    atomic_compare_exchange_strong_explicit(&s->word, &expect,
                                            m_empty(pos + r->capacity),
                                            memory_order_seq_cst,
                                            memory_order_relaxed);
    SHMOBJ__STEP("queue.take.released");
    wake_producers(r);
    return true;
}

/* The plain cases below call nothing, so that the public put and take
 * they are inlined in keep no register across a call and save none: what
 * would need a call (this process's token not looked up since a fork, a
 * test's hold, a test's step hook: the whole try names every step) is
 * left to the whole try before anything is claimed, and the wake-up after
 * the hand-over is the caller's (ring_put_woken(), ring_take_woken()). */

/* Whether a test watches the steps (step.h): then the plain cases leave
 * everything to the whole try, whose steps it can stop at. */
static inline bool steps_watched(void)
{
    return __builtin_expect(
        __atomic_load_n(&shmobj__step_hook, __ATOMIC_RELAXED) != 0, 0);
}

/* This process's claim identity when it was looked up in this fork. */
static inline bool self_known(const struct shmobj__ring *r)
{
    return atomic_load_explicit(&r->self_forks, memory_order_acquire) ==
           (uint64_t)shmobj__os_forks_seen() + 1;
}

/* The plain case of a put: the ring is live, the slot of enq_pos is EMPTY,
 * our claim wins, our publish wins. True when v was published (at
 * position *at); then the caller wakes the consumers if ring_put_woken()
 * says so. False when any of those did not hold: nothing is published,
 * and what was done (a claim whose slot a consumer skipped) needs no
 * undoing, so the caller goes on with the whole try
 * (shmobj__ring_try_put()). */
static inline bool ring_put_plain(struct shmobj__ring *r, uint64_t v,
                                  uint64_t *at)
{
    struct shmobj__ring_hdr *h = r->hdr;
    if (!shmobj__ring_live(r) || !self_known(r) || steps_watched())
        return false; /* destroyed (the block may be another's now), forked */
    uint64_t e = atomic_load_explicit(&h->enq_pos, memory_order_relaxed);
    struct shmobj__ring_slot *s = &r->slots[e & r->mask];
    prefetch_for_write(&s->word);
    /* the record and the value before the claim: the CAS makes the
     * compiler load the view's geometry again after it */
    uint64_t lap = e >> r->cap_log2;
    uint64_t claim = claim_of(lap, SHMOBJ__RING_ROLE_PRODUCER,
                              atomic_load_explicit(&r->self_token,
                                                   memory_order_relaxed));
    uint64_t value = v | (lap & 7u) << 1;
    if (__builtin_expect(
            atomic_load_explicit(&s->word, memory_order_acquire) == m_empty(e) &&
                atomic_compare_exchange_strong_explicit(
                    &h->enq_pos, &e, e + 1, memory_order_relaxed,
                    memory_order_relaxed),
            1)) {
        atomic_store_explicit(&s->claim, claim, memory_order_relaxed);
        uint64_t expect = m_empty(e);
        if (__builtin_expect(atomic_compare_exchange_strong_explicit(
                                 &s->word, &expect, value,
                                 memory_order_seq_cst, memory_order_relaxed),
                             1)) {
            *at = e;
            return true;
        }
        /* a consumer judged us dead and skipped the slot: claim anew */
    }
    return false;
}

/* After ring_put_plain() published: whether consumers sleep (the seq_cst
 * load of the Dekker pairing, see wake_side()); then wake_consumers(). */
static inline bool ring_put_woken(const struct shmobj__ring *r)
{
    return atomic_load_explicit(&r->hdr->cons_waiters, memory_order_seq_cst) != 0;
}

/* The plain case of a take: the ring is live, the head slot holds its
 * message and our claim wins; the message in *v, and the caller wakes the
 * producers if ring_take_woken() says so. False otherwise, with nothing
 * taken (empty, a lost race, a skipped slot, a stalled or dead producer,
 * damage, a test's hold: shmobj__ring_try_take() sorts them out). */
static inline bool ring_take_plain(struct shmobj__ring *r, uint64_t *v)
{
    struct shmobj__ring_hdr *h = r->hdr;
    if (!shmobj__ring_live(r) || !self_known(r) ||
        __builtin_expect(r->test_hold_ns != 0, 0) || steps_watched())
        return false;
    uint64_t d = atomic_load_explicit(&h->deq_pos, memory_order_relaxed);
    struct shmobj__ring_slot *s = &r->slots[d & r->mask];
    prefetch_for_write(&s->word);
    /* as in ring_put_plain(): what the CAS would make us load again */
    uint64_t lap = d >> r->cap_log2;
    uint64_t claim = claim_of(lap, SHMOBJ__RING_ROLE_CONSUMER,
                              atomic_load_explicit(&r->self_token,
                                                   memory_order_relaxed));
    uint64_t next = m_empty(d + r->capacity);
    uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
    if (__builtin_expect(!(w > 15u && (w & 15u) == (lap & 7u) << 1) ||
                             !atomic_compare_exchange_strong_explicit(
                                 &h->deq_pos, &d, d + 1, memory_order_relaxed,
                                 memory_order_relaxed),
                         0))
        return false; /* not a message of d (is_value_at()), or lost race */
    atomic_store_explicit(&s->claim, claim, memory_order_relaxed);
    uint64_t expect = w;
    /* fails only if a producer already released it on our behalf */
    atomic_compare_exchange_strong_explicit(&s->word, &expect, next,
                                            memory_order_seq_cst,
                                            memory_order_relaxed);
    *v = value_ref(w);
    return true;
}

/* After ring_take_plain() took: whether producers sleep; then
 * wake_producers(). */
static inline bool ring_take_woken(const struct shmobj__ring *r)
{
    return atomic_load_explicit(&r->hdr->prod_waiters, memory_order_seq_cst) != 0;
}

/* ---- recovery from dead claimants (ring-claim.c) -------------------------- */

/* True when the slot of head position d changed (its dead producer's slot
 * was skipped): retry. */
bool shmobj__ring_resolve_producer(struct shmobj__ring *r,
                                   struct shmobj__ring_slot *s, uint64_t d);

/* True when the slot of e (holding w, position e - capacity taken by a
 * dead consumer) was released for it: retry. */
bool shmobj__ring_resolve_consumer(struct shmobj__ring *r,
                                   struct shmobj__ring_slot *s, uint64_t w,
                                   uint64_t e);

/* Tests only: stay *ns inside a batch's window once, then never again. */
static inline void test_hold_once(uint64_t *ns)
{
    if (__builtin_expect(*ns != 0, 0)) {
        shmobj__ring_test_hold(*ns);
        *ns = 0;
    }
}

#endif /* SHMOBJ_QUEUE_RING_INT_H */
