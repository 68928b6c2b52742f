/* The lock-free MPMC ring (see ring.h for the slot words).
 *
 * Invariants kept here:
 * - deq_pos <= enq_pos <= deq_pos + capacity at every instant; both only grow.
 * - A slot's word moves forward only: EMPTY(p) -> value(p) | SKIPPED(p) ->
 *   EMPTY(p + capacity), each step one CAS whose expected value names p, so a
 *   process acting on an old view of the slot fails instead of corrupting it.
 * - Indices come from `pos & mask` with the mask of the local view; nothing
 *   read from the ring is used to compute an address.
 * - Every operation compares the header's identity word with the view's
 *   before it writes: a view of a destroyed ring (whose block the heap may
 *   have given to someone else) writes nothing and returns SHMOBJ_ESTALE.
 * - A slot word of 0 is no state: values carry a non-zero reference.
 * - Wake-ups cost nothing when nobody sleeps: the publishing CAS (seq_cst)
 *   and the seq_cst load of the waiter count pair with the sleeper's
 *   increment + fence + re-check (Dekker), so a sleeper either sees the
 *   message or the publisher sees the sleeper.
 * - A claimed slot whose claimant died is resolved by the other side after
 *   stall_ns: the claimant recorded (token, position) in its role's claim
 *   array right after its claim (not in the slot's line, which the other
 *   side may be spinning on); a dead claimant is one whose token the
 *   segment's attachment slots no longer call alive (seg-procs.c). A
 *   claimant that never got to record itself is
 *   resolved after SHMOBJ__RING_UNKNOWN_STALLS periods: safe even if it is
 *   alive, because its own CAS then fails and it retries (producer) or has
 *   already got its message (consumer). */
#include "ring.h"

#include <limits.h>
#include <string.h>

#include "cpu.h"
#include "os.h"
#include "shmobj/error.h"

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

/* ---- who am I, and who is alive: the segment's attachment tokens ---------- */

/* This process's token (0 when unknown) and pid, looked up once per fork
 * generation: a claim record is written on every put and take. */
static __attribute__((noinline, cold)) void self_lookup(struct shmobj__ring *r,
                                                         uint64_t forks)
{
    atomic_store_explicit(&r->self_token, r->sp->ops->live->token(r->sp),
                          memory_order_relaxed);
    atomic_store_explicit(&r->self_pid, shmobj__os_pid(), memory_order_relaxed);
    atomic_store_explicit(&r->self_forks, forks, memory_order_release);
}

static inline uint32_t self_token(struct shmobj__ring *r)
{
    uint64_t forks = (uint64_t)shmobj__os_forks_seen() + 1;
    if (atomic_load_explicit(&r->self_forks, memory_order_acquire) != forks)
        self_lookup(r, forks);
    return atomic_load_explicit(&r->self_token, memory_order_relaxed);
}

uint32_t shmobj__ring_self_token(struct shmobj__ring *r)
{
    return self_token(r);
}

/* Record (token, pid) as the claimant of (role, pos). */
static inline void claim_record_as(struct shmobj__ring *r, unsigned role,
                                   uint64_t pos, uint32_t token, uint32_t pid)
{
    struct shmobj__ring_claim *c = &r->claims[role][pos & r->mask];
    atomic_store_explicit(&c->token, token, memory_order_relaxed);
    atomic_store_explicit(&c->pid, pid, memory_order_relaxed);
    atomic_store_explicit(&c->tag, pos, memory_order_release);
}

static inline void claim_record(struct shmobj__ring *r, unsigned role,
                                uint64_t pos)
{
    uint32_t token = self_token(r);
    claim_record_as(r, role, pos, token,
                    atomic_load_explicit(&r->self_pid, memory_order_relaxed));
}

/* 1: the claimant of (role, pos) is recorded and alive; 0: recorded and
 * dead; -1: not recorded (it never got that far, or the record was
 * overwritten by a later claimant). */
static int claim_alive(struct shmobj__ring *r, unsigned role, uint64_t pos)
{
    struct shmobj__ring_claim *c = &r->claims[role][pos & r->mask];
    uint64_t t1 = atomic_load_explicit(&c->tag, memory_order_acquire);
    uint64_t token = atomic_load_explicit(&c->token, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    uint64_t t2 = atomic_load_explicit(&c->tag, memory_order_relaxed);
    if (t1 != pos || t2 != pos || token == 0)
        return -1;
    return shmobj__space_token_alive(r->sp, token) ? 1 : 0;
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

/* ---- sleepers -------------------------------------------------------------- */

#define SLEEPER_REPAIR_MIN 64u        /* futile wakes before a first repair */
#define SLEEPER_REPAIR_MAX (1u << 20) /* ... and at most, while repairs find nothing */

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

static void wake_side(struct shmobj__ring *r, _Atomic uint32_t *waiters,
                      _Atomic uint32_t *event)
{
    if (atomic_load_explicit(waiters, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(event, 1, memory_order_seq_cst);
        if (shmobj__os_futex_wake(event, INT32_MAX) == 0)
            futile_wake(r);
    }
}

static void wake_consumers(struct shmobj__ring *r)
{
    wake_side(r, &r->hdr->cons_waiters, &r->hdr->put_event);
}

static void wake_producers(struct shmobj__ring *r)
{
    wake_side(r, &r->hdr->prod_waiters, &r->hdr->take_event);
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
static bool resolve_producer(struct shmobj__ring *r,
                             struct shmobj__ring_slot *s, uint64_t d)
{
    if (!claimant_gone(r, 0, d, &r->stall_pos, &r->stall_since))
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
static bool resolve_consumer(struct shmobj__ring *r,
                             struct shmobj__ring_slot *s, uint64_t w,
                             uint64_t e)
{
    uint64_t p = e - r->capacity;
    if (!claimant_gone(r, 1, p, &r->pstall_pos, &r->pstall_since))
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

uint64_t shmobj__ring_footprint(uint32_t capacity)
{
    if (capacity < SHMOBJ__RING_CAP_MIN || capacity > SHMOBJ__RING_CAP_MAX ||
        (capacity & (capacity - 1)) != 0)
        return 0;
    return sizeof(struct shmobj__ring_hdr) +
           (uint64_t)capacity * SHMOBJ__RING_SLOT_BYTES;
}

int shmobj__ring_init(void *mem, uint64_t size, uint32_t capacity,
                      uint32_t flags, uint64_t ident)
{
    uint64_t need = shmobj__ring_footprint(capacity);
    if (mem == NULL || need == 0 || size < need || ident == 0 ||
        ((uintptr_t)mem & 63u) != 0)
        return SHMOBJ_EINVAL;
    struct shmobj__ring_hdr *h = mem;
    memset(h, 0, sizeof(*h));
    h->capacity = capacity;
    h->cap_log2 = (uint32_t)__builtin_ctz(capacity);
    h->slot_size = SHMOBJ__RING_SLOT_BYTES;
    h->hdr_size = sizeof(struct shmobj__ring_hdr);
    h->flags = flags;
    h->version = SHMOBJ__RING_VERSION;
    atomic_init(&h->ident, ident);
    struct shmobj__ring_slot *slots =
        (struct shmobj__ring_slot *)((uint8_t *)mem + sizeof(*h));
    struct shmobj__ring_claim *claims =
        (struct shmobj__ring_claim *)(slots + capacity);
    for (uint32_t i = 0; i < capacity; i++)
        atomic_init(&slots[i].word, m_empty(i));
    for (uint32_t i = 0; i < 2 * capacity; i++) {
        atomic_init(&claims[i].tag, UINT64_MAX);
        atomic_init(&claims[i].token, 0);
        atomic_init(&claims[i].pid, 0);
        claims[i].reserved0 = 0;
        claims[i].reserved1 = 0;
    }
    /* the magic last: a reader that sees it sees a complete ring */
    atomic_thread_fence(memory_order_release);
    h->magic = SHMOBJ__RING_MAGIC;
    return 0;
}

int shmobj__ring_attach(struct shmobj__ring *r, struct shmobj__space *sp,
                        void *mem, uint64_t size)
{
    if (r == NULL || sp == NULL || sp->ops->live == NULL || mem == NULL ||
        size < sizeof(struct shmobj__ring_hdr))
        return SHMOBJ_EINVAL;
    struct shmobj__ring_hdr *h = mem;
    /* copy the immutable fields once; validate the copies */
    uint32_t magic = h->magic, version = h->version, cap = h->capacity;
    uint32_t log2 = h->cap_log2, ssize = h->slot_size, hsize = h->hdr_size;
    atomic_thread_fence(memory_order_acquire);
    uint64_t ident = atomic_load_explicit(&h->ident, memory_order_relaxed);
    if (magic != SHMOBJ__RING_MAGIC)
        return SHMOBJ_ECORRUPT;
    if (version != SHMOBJ__RING_VERSION)
        return SHMOBJ_EVERSION;
    uint64_t need = shmobj__ring_footprint(cap);
    if (need == 0 || log2 >= 32 || (1u << log2) != cap ||
        ssize != SHMOBJ__RING_SLOT_BYTES ||
        hsize != sizeof(struct shmobj__ring_hdr) || size < need)
        return SHMOBJ_ECORRUPT;
    memset(r, 0, sizeof(*r));
    r->hdr = h;
    r->sp = sp;
    r->ident = ident;
    r->slots = (struct shmobj__ring_slot *)((uint8_t *)mem + sizeof(*h));
    r->claims[0] = (struct shmobj__ring_claim *)(r->slots + cap);
    r->claims[1] = r->claims[0] + cap;
    r->capacity = cap;
    r->mask = cap - 1;
    r->cap_log2 = log2;
    r->stall_ns = SHMOBJ__RING_STALL_NS;
    r->repair_after = SLEEPER_REPAIR_MIN;
    return 0;
}

/* ---- non-blocking operations --------------------------------------------- */

int shmobj__ring_try_put(struct shmobj__ring *r, uint64_t v)
{
    struct shmobj__ring_hdr *h = r->hdr;
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE; /* destroyed: the block may be another's now */
    uint64_t e = atomic_load_explicit(&h->enq_pos, memory_order_relaxed);
    for (;;) {
        struct shmobj__ring_slot *s = &r->slots[e & r->mask];
        prefetch_for_write(&s->word);
        uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
        if (w == m_empty(e)) {
            if (!atomic_compare_exchange_weak_explicit(
                    &h->enq_pos, &e, e + 1, memory_order_relaxed,
                    memory_order_relaxed))
                continue; /* e now holds the current position */
            claim_record(r, 0, e);
            uint64_t expect = m_empty(e);
            if (atomic_compare_exchange_strong_explicit(
                    &s->word, &expect, v | lap_tag(r, e),
                    memory_order_seq_cst, memory_order_relaxed)) {
                wake_consumers(r);
                return 0;
            }
            /* a consumer judged us dead and skipped the slot: claim anew */
            e = atomic_load_explicit(&h->enq_pos, memory_order_relaxed);
            continue;
        }
        /* Is the slot still in the previous lap? Then nobody could have
         * claimed e (words only move forward and we read w after e), so
         * the ring is full at e — or the consumer of e - capacity holds
         * the slot without having released it yet. */
        if (e >= r->capacity) {
            uint64_t p = e - r->capacity;
            bool prev_marker = !is_value(w) && (w >> 2) == p;
            bool prev_value = is_value_at(r, w, p);
            if (prev_marker || prev_value) {
                uint64_t d = atomic_load_explicit(&h->deq_pos,
                                                  memory_order_acquire);
                if (d > p && w != m_empty(p) && resolve_consumer(r, s, w, e))
                    continue;
                return SHMOBJ_EFULL;
            }
        }
        /* stale position: another producer moved on. If none did, the
         * word fits no state that slot can hold while e is unclaimed (we
         * read it after e, with acquire: a later lap would show in
         * enq_pos): the ring is damaged, and waiting would never end. */
        uint64_t now = atomic_load_explicit(&h->enq_pos, memory_order_relaxed);
        if (now == e)
            return SHMOBJ_ECORRUPT;
        e = now;
    }
}

/* Claim position d holding w (a value or SKIPPED(d)) and release the slot.
 * True when claimed. */
/* Tests only (shmobj__ring.test_hold_ns): stay inside a take's window. */
static __attribute__((noinline, cold)) void test_hold(uint64_t ns)
{
    uint64_t end = shmobj__os_now_ns() + ns;
    while (shmobj__os_now_ns() < end)
        shmobj__cpu_relax();
}

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
    claim_record(r, 1, pos);
    if (__builtin_expect(r->test_hold_ns != 0, 0))
        test_hold(r->test_hold_ns);
    uint64_t expect = w;
    /* fails only if a producer already released it on our behalf */
    atomic_compare_exchange_strong_explicit(&s->word, &expect,
                                            m_empty(pos + r->capacity),
                                            memory_order_seq_cst,
                                            memory_order_relaxed);
    wake_producers(r);
    return true;
}

/* Can the slot of head position d hold w while nobody has claimed d and
 * its message is not there yet? Only EMPTY(d) (not published yet), or the
 * previous lap's message or marker that its consumer has not released
 * yet. Anything else, seen with deq_pos still at d after w was read with
 * acquire (a later lap would have moved deq_pos), is damage. */
static inline bool head_may_wait(const struct shmobj__ring *r, uint64_t w,
                                 uint64_t d)
{
    if (w == m_empty(d))
        return true;
    if (d < r->capacity)
        return false;
    uint64_t p = d - r->capacity;
    return is_value_at(r, w, p) || w == m_skipped(p);
}

int shmobj__ring_try_take(struct shmobj__ring *r, uint64_t *v)
{
    struct shmobj__ring_hdr *h = r->hdr;
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE;
    uint64_t d = atomic_load_explicit(&h->deq_pos, memory_order_relaxed);
    for (;;) {
        struct shmobj__ring_slot *s = &r->slots[d & r->mask];
        prefetch_for_write(&s->word);
        uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
        if (is_value_at(r, w, d)) {
            if (!claim_and_release(r, s, &d, w))
                continue;
            *v = value_ref(w);
            return 0;
        }
        if (w == m_skipped(d)) {
            uint64_t pos = d;
            if (claim_and_release(r, s, &d, w))
                d = pos + 1;
            continue;
        }
        if (w == m_empty(d)) {
            uint64_t e = atomic_load_explicit(&h->enq_pos,
                                              memory_order_acquire);
            if (e <= d) {
                uint64_t d2 = atomic_load_explicit(&h->deq_pos,
                                                   memory_order_relaxed);
                if (d2 == d)
                    return SHMOBJ_EEMPTY;
                d = d2;
                continue;
            }
            /* claimed by a producer that has not published yet */
            if (resolve_producer(r, s, d))
                continue;
            return SHMOBJ_EEMPTY;
        }
        if (d >= r->capacity && is_value_at(r, w, d - r->capacity))
            return SHMOBJ_EEMPTY; /* previous lap not released yet */
        uint64_t d2 = atomic_load_explicit(&h->deq_pos, memory_order_relaxed);
        if (d2 == d) /* in transition (callers retry), or damaged */
            return head_may_wait(r, w, d) ? SHMOBJ_EEMPTY : SHMOBJ_ECORRUPT;
        d = d2;
    }
}

/* ---- batches ----------------------------------------------------------------- */

/* A batch claims a run of positions with one CAS on its side's position
 * and then does, per position, what the single operation does after its
 * claim: record the claim, then one CAS on the slot naming the position.
 * A run is only what was seen ready before the claim (EMPTY(p) for a put;
 * a value of p or SKIPPED(p) for a take); the words of claimed positions
 * cannot change meanwhile except by the recovery of a claimant judged
 * dead, which the slot CAS detects. Whatever is not the plain case (the
 * first slot not ready, damage, a stalled claimant) goes through the
 * single operation, so its answers are the single call's. */

#define RING_BATCH_MAX 64u /* positions claimed at once */

int shmobj__ring_try_put_many(struct shmobj__ring *r, const uint64_t *v,
                              uint32_t n, uint32_t *done)
{
    struct shmobj__ring_hdr *h = r->hdr;
    *done = 0;
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE;
    while (*done < n) {
        uint64_t e = atomic_load_explicit(&h->enq_pos, memory_order_relaxed);
        uint32_t want = n - *done;
        if (want > RING_BATCH_MAX)
            want = RING_BATCH_MAX;
        if (want > r->capacity)
            want = (uint32_t)r->capacity;
        uint32_t k = 0;
        while (k < want &&
               atomic_load_explicit(&r->slots[(e + k) & r->mask].word,
                                    memory_order_acquire) == m_empty(e + k))
            k++;
        if (k <= 1) {
            int rc = shmobj__ring_try_put(r, v[*done]);
            if (rc != 0)
                return rc;
            ++*done;
            continue;
        }
        if (!atomic_compare_exchange_weak_explicit(&h->enq_pos, &e, e + k,
                                                   memory_order_relaxed,
                                                   memory_order_relaxed))
            continue;
        if (__builtin_expect(r->test_put_hold_ns != 0, 0)) {
            test_hold(r->test_put_hold_ns);
            r->test_put_hold_ns = 0;
        }
        const uint64_t *src = v + *done;
        uint32_t token = self_token(r); /* once per run */
        uint32_t pid = atomic_load_explicit(&r->self_pid, memory_order_relaxed);
        uint32_t i = 0;
        for (; i < k; i++) {
            uint64_t p = e + i;
            claim_record_as(r, 0, p, token, pid);
            uint64_t expect = m_empty(p);
            if (!atomic_compare_exchange_strong_explicit(
                    &r->slots[p & r->mask].word, &expect, src[i] | lap_tag(r, p),
                    memory_order_seq_cst, memory_order_relaxed))
                break; /* judged dead and skipped: the rest goes anew */
        }
        /* positions claimed but not published after a skip: step them
         * over ourselves (EMPTY(p) -> SKIPPED(p)) rather than leave
         * consumers to wait 10 stall periods for each (order holds either
         * way: the messages go again at later positions) */
        for (uint32_t j = i + 1; j < k; j++) {
            uint64_t p = e + j;
            uint64_t expect = m_empty(p);
            atomic_compare_exchange_strong_explicit(
                &r->slots[p & r->mask].word, &expect, m_skipped(p),
                memory_order_seq_cst, memory_order_relaxed);
        }
        *done += i;
        wake_consumers(r);
    }
    return 0;
}

int shmobj__ring_try_take_many(struct shmobj__ring *r, uint64_t *v,
                               uint32_t n, uint32_t *got)
{
    struct shmobj__ring_hdr *h = r->hdr;
    *got = 0;
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE;
    uint64_t seen[RING_BATCH_MAX];
    while (*got < n) {
        uint64_t d = atomic_load_explicit(&h->deq_pos, memory_order_relaxed);
        uint32_t want = n - *got;
        if (want > RING_BATCH_MAX)
            want = RING_BATCH_MAX;
        if (want > r->capacity)
            want = (uint32_t)r->capacity;
        uint32_t k = 0;
        for (; k < want; k++) {
            uint64_t p = d + k;
            uint64_t w = atomic_load_explicit(&r->slots[p & r->mask].word,
                                              memory_order_acquire);
            if (!is_value_at(r, w, p) && w != m_skipped(p))
                break;
            seen[k] = w;
        }
        if (k <= 1) {
            if (k == 0 && *got > 0)
                return 0;
            int rc = shmobj__ring_try_take(r, &v[*got]);
            if (rc != 0)
                return *got > 0 ? 0 : rc; /* the next call sees it again */
            ++*got;
            continue;
        }
        if (!atomic_compare_exchange_weak_explicit(&h->deq_pos, &d, d + k,
                                                   memory_order_relaxed,
                                                   memory_order_relaxed))
            continue;
        uint32_t token = self_token(r); /* once per run */
        uint32_t pid = atomic_load_explicit(&r->self_pid, memory_order_relaxed);
        for (uint32_t i = 0; i < k; i++) {
            uint64_t p = d + i;
            claim_record_as(r, 1, p, token, pid);
            uint64_t expect = seen[i];
            /* fails only if a producer already released it on our behalf */
            atomic_compare_exchange_strong_explicit(
                &r->slots[p & r->mask].word, &expect, m_empty(p + r->capacity),
                memory_order_seq_cst, memory_order_relaxed);
            if (is_value(seen[i]))
                v[(*got)++] = value_ref(seen[i]);
        }
        wake_producers(r);
    }
    return 0;
}

int shmobj__ring_try_peek(struct shmobj__ring *r, uint64_t *v)
{
    struct shmobj__ring_hdr *h = r->hdr;
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE;
    uint64_t d = atomic_load_explicit(&h->deq_pos, memory_order_acquire);
    for (;;) {
        struct shmobj__ring_slot *s = &r->slots[d & r->mask];
        uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
        if (is_value_at(r, w, d)) {
            /* still the head? Otherwise it was taken meanwhile */
            uint64_t d2 = atomic_load_explicit(&h->deq_pos,
                                               memory_order_acquire);
            if (d2 == d) {
                *v = value_ref(w);
                return 0;
            }
            d = d2;
            continue;
        }
        if (w == m_skipped(d)) {
            /* step over it for everybody: nothing is lost */
            uint64_t pos = d;
            if (claim_and_release(r, s, &d, w))
                d = pos + 1;
            continue;
        }
        if (w == m_empty(d)) {
            uint64_t e = atomic_load_explicit(&h->enq_pos,
                                              memory_order_acquire);
            if (e > d && resolve_producer(r, s, d))
                continue;
        }
        uint64_t d2 = atomic_load_explicit(&h->deq_pos, memory_order_acquire);
        if (d2 == d)
            return head_may_wait(r, w, d) ? SHMOBJ_EEMPTY : SHMOBJ_ECORRUPT;
        d = d2;
    }
}

uint64_t shmobj__ring_count(const struct shmobj__ring *r)
{
    uint64_t d = atomic_load_explicit(&r->hdr->deq_pos, memory_order_acquire);
    uint64_t e = atomic_load_explicit(&r->hdr->enq_pos, memory_order_acquire);
    if (e <= d)
        return 0;
    return e - d > r->capacity ? r->capacity : e - d;
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

static inline int try_op(struct shmobj__ring *r, enum op op, uint64_t *v)
{
    switch (op) {
    case OP_PUT:
        return shmobj__ring_try_put(r, *v);
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
                    uint64_t deadline);

static int wait_op(struct shmobj__ring *r, enum op op, uint64_t *v,
                   int64_t spin_ns, uint64_t deadline)
{
    int busy = op == OP_PUT ? SHMOBJ_EFULL : SHMOBJ_EEMPTY;
    int rc = try_op(r, op, v);
    if (rc != busy)
        return rc;
    if (spin_ns != 0) {
        uint64_t now = shmobj__os_now_ns();
        uint64_t end = spin_ns < 0 ? UINT64_MAX : now + (uint64_t)spin_ns;
        if (end > deadline)
            end = deadline;
        for (;;) {
            spin_watch(r, op);
            rc = try_op(r, op, v);
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
    return sleep_op(r, op, v, deadline);
}

/* The sleeping part of wait_op(), out of line: the spinning part above is
 * the hot path of a busy queue. */
static __attribute__((noinline)) int sleep_op(struct shmobj__ring *r,
                                              enum op op, uint64_t *v,
                                              uint64_t deadline)
{
    int busy = op == OP_PUT ? SHMOBJ_EFULL : SHMOBJ_EEMPTY;
    int rc;
    struct shmobj__ring_hdr *h = r->hdr;
    unsigned side = op == OP_PUT ? 1 : 0;
    _Atomic uint32_t *waiters = side ? &h->prod_waiters : &h->cons_waiters;
    _Atomic uint32_t *event = side ? &h->take_event : &h->put_event;
    struct shmobj__ring_sleeper *me = sleeper_self(r);
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
        rc = try_op(r, op, v);
        uint64_t now = shmobj__os_now_ns();
        if (rc == busy && now < deadline) {
            /* A claimed-but-unfinished slot may belong to a dead process
             * that will never wake us: wake up in time to judge it. (No
             * other slicing: a futex wait with a timeout arms a kernel
             * timer, which made every sleep of a busy queue dearer.) */
            uint64_t until = deadline;
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
    }
}

int shmobj__ring_put(struct shmobj__ring *r, uint64_t v, int64_t spin_ns,
                     uint64_t deadline)
{
    return wait_op(r, OP_PUT, &v, spin_ns, deadline);
}

int shmobj__ring_take(struct shmobj__ring *r, uint64_t *v, int64_t spin_ns,
                      uint64_t deadline)
{
    return wait_op(r, OP_TAKE, v, spin_ns, deadline);
}

int shmobj__ring_peek(struct shmobj__ring *r, uint64_t *v, int64_t spin_ns,
                      uint64_t deadline)
{
    return wait_op(r, OP_PEEK, v, spin_ns, deadline);
}
