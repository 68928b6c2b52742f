/* The lock-free MPMC ring (see ring.h for the slot words).
 *
 * Invariants kept here:
 * - deq_pos <= enq_pos <= deq_pos + capacity at every instant; both only grow.
 * - A slot's word moves forward only: EMPTY(p) -> value(p) | SKIPPED(p) ->
 *   EMPTY(p + capacity), each step one CAS whose expected value names p, so a
 *   process acting on an old view of the slot fails instead of corrupting it;
 *   only a batch's claimant, recorded and alive, hands the slots after the
 *   first of its run over with plain stores (see "batches" below).
 * - An empty or full try reads the other side's position (the line that
 *   side writes on every claim) only on the SHMOBJ__RING_RECHECK-th try at
 *   one position (again that many tries after a look that said empty or
 *   full; on every try once one said a claimant is in the way) and on
 *   every try of a wait about to sleep; otherwise it answers from the slot
 *   word, which says no message (no room) as well.
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
 *   stall_ns: the claimant recorded (lap, role, token) in the slot's claim
 *   word right after its claim, one store on the line its hand-over
 *   writes next, so a put or take writes no line of the ring but its
 *   position's and its slot's; a dead claimant is one whose token the
 *   segment's attachment slots no longer call alive (seg-procs.c). A
 *   claimant that never got to record itself is
 *   resolved after SHMOBJ__RING_UNKNOWN_STALLS periods: safe even if it is
 *   alive, because its own CAS then fails and it retries (producer) or has
 *   already got its message (consumer). */
#include "ring-int.h"

#include <string.h>

#include "shmobj/error.h"


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
    for (uint32_t i = 0; i < capacity; i++) {
        atomic_init(&slots[i].word, m_empty(i));
        atomic_init(&slots[i].claim, 0); /* token 0: nobody recorded */
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
    r->capacity = cap;
    r->mask = cap - 1;
    r->cap_log2 = log2;
    r->stall_ns = SHMOBJ__RING_STALL_NS;
    r->repair_after = SLEEPER_REPAIR_MIN;
    return 0;
}

/* ---- non-blocking operations --------------------------------------------- */

/* Everything of a put but the plain case (below): a full ring, a lost
 * race, a stale position, a slot skipped under us, damage. */
static __attribute__((noinline)) int put_slow(struct shmobj__ring *r,
                                              uint64_t v, uint64_t *at)
{
    struct shmobj__ring_hdr *h = r->hdr;
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
            SHMOBJ__STEP("queue.put.claimed");
            claim_record_in(r, s, SHMOBJ__RING_ROLE_PRODUCER, e,
                            self_token(r));
            SHMOBJ__STEP("queue.put.recorded");
            uint64_t expect = m_empty(e);
            if (atomic_compare_exchange_strong_explicit(
                    &s->word, &expect, v | lap_tag(r, e),
                    memory_order_seq_cst, memory_order_relaxed)) {
                SHMOBJ__STEP("queue.put.published");
                wake_consumers(r);
                *at = e;
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
                if (quiet_try(&r->full_pos, &r->full_tries, e))
                    return SHMOBJ_EFULL; /* as it was a moment ago */
                uint64_t d = atomic_load_explicit(&h->deq_pos,
                                                  memory_order_acquire);
                if (d <= p) {
                    quiet_mark(&r->full_pos, &r->full_tries, e);
                    return SHMOBJ_EFULL; /* p not taken yet */
                }
                if (w != m_empty(p) &&
                    shmobj__ring_resolve_consumer(r, s, w, e))
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

/* The plain case (ring_put_plain(), ring-int.h), else put_slow(). */
int shmobj__ring_try_put_at(struct shmobj__ring *r, uint64_t v, uint64_t *at)
{
    if (__builtin_expect(ring_put_plain(r, v, at), 1)) {
        if (ring_put_woken(r))
            shmobj__ring_wake(r, &r->hdr->put_event);
        return 0;
    }
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE; /* destroyed: the block may be another's now */
    return put_slow(r, v, at);
}

int shmobj__ring_try_put(struct shmobj__ring *r, uint64_t v)
{
    uint64_t at;
    return shmobj__ring_try_put_at(r, v, &at);
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

/* Everything of a take but the plain case (below). */
static __attribute__((noinline)) int take_slow(struct shmobj__ring *r,
                                               uint64_t *v)
{
    struct shmobj__ring_hdr *h = r->hdr;
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
            /* d is not published yet: empty, or claimed by a producer
             * that has not published; only recovery tells them apart */
            if (quiet_try(&r->empty_pos, &r->empty_tries, d))
                return SHMOBJ_EEMPTY;
            uint64_t e = atomic_load_explicit(&h->enq_pos,
                                              memory_order_acquire);
            if (e <= d) {
                uint64_t d2 = atomic_load_explicit(&h->deq_pos,
                                                   memory_order_relaxed);
                if (d2 == d) {
                    quiet_mark(&r->empty_pos, &r->empty_tries, d);
                    return SHMOBJ_EEMPTY;
                }
                d = d2;
                continue;
            }
            /* claimed by a producer that has not published yet */
            if (shmobj__ring_resolve_producer(r, s, d))
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

/* The plain case (ring_take_plain(), ring-int.h), else take_slow(). */
int shmobj__ring_try_take(struct shmobj__ring *r, uint64_t *v)
{
    if (__builtin_expect(ring_take_plain(r, v), 1)) {
        if (ring_take_woken(r))
            shmobj__ring_wake(r, &r->hdr->take_event);
        return 0;
    }
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE;
    return take_slow(r, v);
}

/* ---- batches ----------------------------------------------------------------- */

/* A batch claims a run of positions with one CAS on its side's position,
 * records itself as the claimant of every position of the run, and then
 * hands the slots over: the first with one CAS naming its position, the
 * others with plain (release) stores, and one fence before the wake-up
 * check. A run is only what was seen ready before the claim (EMPTY(p) for
 * a put; a value of p or SKIPPED(p) for a take).
 *
 * Why the stores are safe: the other side changes a slot claimed by
 * somebody else only after it judged that claimant dead, or unrecorded for
 * SHMOBJ__RING_UNKNOWN_STALLS periods (ring-claim.c). It reaches the slot
 * of position p + 1 of the run only after the slot of p was handed over,
 * so only after the first CAS, which comes after the records: from then on
 * it finds every position of the run recorded by a live claimant and
 * leaves the slots alone. If the first CAS fails, the run was resolved
 * while this process stalled before its records, and every other slot of
 * it goes by CAS as the single operation's would; so do all of them when
 * this process has no token (records that name nobody are resolved after
 * the unknown-claimant stalls even if their claimant lives). Whatever is
 * not the plain case (the first slot not ready, damage, a stalled
 * claimant) goes through the single operation, so its answers are the
 * single call's. */

#define RING_BATCH_MAX 64u /* positions claimed at once */

/* A run of positions [p, p + k), k <= capacity, lies in at most two
 * stretches of consecutive slots: from p's slot to the ring's end, then
 * from slot 0. Within a stretch the lap is one, so a claim record and a
 * lap tag are one value for all its slots and a marker grows by 4 a slot:
 * the loops below walk the slots by pointer and add, instead of masking,
 * shifting and tagging every position (callgrind: about a third of a
 * batch's instructions went there). */
static inline uint32_t stretch_len(uint64_t p, uint32_t k, uint64_t mask)
{
    uint64_t to_end = mask + 1 - (p & mask);
    return to_end < k ? (uint32_t)to_end : k;
}

/* Write the claim records of the run [p, p + k) for `token` in `role`. */
static inline void run_records(struct shmobj__ring_slot *slots, uint64_t mask,
                               uint32_t log2, uint64_t p, uint32_t k,
                               unsigned role, uint32_t token)
{
    for (uint32_t j = 0; j < k;) {
        uint32_t len = stretch_len(p + j, k - j, mask);
        struct shmobj__ring_slot *s = &slots[(p + j) & mask], *end = s + len;
        uint64_t c = claim_of((p + j) >> log2, role, token);
        for (; s != end; s++)
            atomic_store_explicit(&s->claim, c, memory_order_relaxed);
        j += len;
    }
}

/* How many slots from position p on (at most want) hold EMPTY of their
 * position: what a batch put may claim. */
static inline uint32_t run_empty(const struct shmobj__ring_slot *slots,
                                 uint64_t mask, uint64_t p, uint32_t want)
{
    uint32_t k = 0;
    while (k < want) {
        uint32_t len = stretch_len(p + k, want - k, mask);
        const struct shmobj__ring_slot *s = &slots[(p + k) & mask];
        uint64_t expect = m_empty(p + k);
        for (uint32_t i = 0; i < len; i++, expect += 4)
            if (atomic_load_explicit(&s[i].word, memory_order_acquire) != expect)
                return k + i;
        k += len;
    }
    return k;
}

/* How many slots from position p on (at most want) hold a message of
 * their position or SKIPPED of it, copied to seen[]: what a batch take may
 * claim. */
static inline uint32_t run_ready(const struct shmobj__ring_slot *slots,
                                 uint64_t mask, uint32_t log2, uint64_t p,
                                 uint32_t want, uint64_t *seen)
{
    uint64_t *out = seen;
    for (uint32_t k = 0; k < want;) {
        uint32_t len = stretch_len(p + k, want - k, mask);
        const struct shmobj__ring_slot *s = &slots[(p + k) & mask];
        const struct shmobj__ring_slot *end = s + len;
        uint64_t tag = (((p + k) >> log2) & 7u) << 1; /* lap_tag() */
        uint64_t skip = m_skipped(p + k);
        for (; s != end; s++, out++, skip += 4) {
            uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
            /* is_value_at() with the stretch's tag, or SKIPPED */
            if (!(w > 15u && (w & 15u) == tag) && w != skip)
                return (uint32_t)(out - seen);
            *out = w;
        }
        k += len;
    }
    return (uint32_t)(out - seen);
}

/* Hand the slots of [p, p + k) over with release stores: each gets
 * src[i] with its lap tag (a put). */
static inline void run_publish(struct shmobj__ring_slot *slots, uint64_t mask,
                               uint32_t log2, uint64_t p, uint32_t k,
                               const uint64_t *src)
{
    for (uint32_t j = 0; j < k;) {
        uint32_t len = stretch_len(p + j, k - j, mask);
        struct shmobj__ring_slot *s = &slots[(p + j) & mask];
        uint64_t tag = (((p + j) >> log2) & 7u) << 1;
        for (uint32_t i = 0; i < len; i++)
            atomic_store_explicit(&s[i].word, src[j + i] | tag,
                                  memory_order_release);
        j += len;
    }
}

/* Release the slots of [p, p + k) with release stores (EMPTY of the next
 * lap, a take) and copy out the messages among seen[0 .. k) to v on;
 * returns the end of what it wrote (SKIPPED markers are no message). */
static inline uint64_t *run_release(struct shmobj__ring_slot *slots,
                                    uint64_t mask, uint64_t cap, uint64_t p,
                                    uint32_t k, const uint64_t *seen,
                                    uint64_t *v)
{
    for (uint32_t j = 0; j < k;) {
        uint32_t len = stretch_len(p + j, k - j, mask);
        struct shmobj__ring_slot *s = &slots[(p + j) & mask], *end = s + len;
        uint64_t next = m_empty(p + j + cap);
        for (; s != end; s++, seen++, next += 4) {
            uint64_t w = *seen;
            atomic_store_explicit(&s->word, next, memory_order_release);
            if (is_value(w)) /* a SKIPPED marker is no message */
                *v++ = value_ref(w);
        }
        j += len;
    }
    return v;
}

int shmobj__ring_try_put_many(struct shmobj__ring *r, const uint64_t *v,
                              uint32_t n, uint32_t *done)
{
    struct shmobj__ring_hdr *h = r->hdr;
    *done = 0;
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE;
    /* the view's geometry in registers: the seq_cst CASes below would
     * make the compiler load it again for every message */
    struct shmobj__ring_slot *slots = r->slots;
    uint64_t mask = r->mask;
    uint32_t log2 = r->cap_log2;
    uint32_t most = r->capacity < RING_BATCH_MAX ? (uint32_t)r->capacity
                                                 : RING_BATCH_MAX;
    while (*done < n) {
        uint64_t e = atomic_load_explicit(&h->enq_pos, memory_order_relaxed);
        uint32_t want = n - *done < most ? n - *done : most;
        uint32_t k = run_empty(slots, mask, e, want);
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
        SHMOBJ__STEP("queue.put_many.claimed");
        test_hold_once(&r->test_put_hold_ns);
        const uint64_t *src = v + *done;
        uint32_t token = self_token(r); /* once per run */
        /* the run's records, on the lines its hand-over writes next */
        run_records(slots, mask, log2, e, k, SHMOBJ__RING_ROLE_PRODUCER, token);
        SHMOBJ__STEP("queue.put_many.recorded");
        uint32_t i = 0;
        uint64_t expect = m_empty(e);
        if (atomic_compare_exchange_strong_explicit(
                &slots[e & mask].word, &expect, src[0] | ((e >> log2) & 7u) << 1,
                memory_order_seq_cst, memory_order_relaxed)) {
            SHMOBJ__STEP("queue.put_many.first");
            i = 1;
            if (__builtin_expect(token != 0, 1)) {
                run_publish(slots, mask, log2, e + 1, k - 1, src + 1);
                i = k;
                /* the stores before the waiter load (Dekker, see
                 * wake_side()) */
                atomic_thread_fence(memory_order_seq_cst);
            }
            for (; i < k; i++) {
                uint64_t p = e + i;
                expect = m_empty(p);
                if (!atomic_compare_exchange_strong_explicit(
                        &slots[p & mask].word, &expect,
                        src[i] | ((p >> log2) & 7u) << 1, memory_order_seq_cst,
                        memory_order_relaxed))
                    break; /* judged dead and skipped: the rest goes anew */
            }
        }
        /* positions claimed but not published after a skip: step them
         * over ourselves (EMPTY(p) -> SKIPPED(p)) rather than leave
         * consumers to wait 10 stall periods for each (order holds either
         * way: the messages go again at later positions) */
        for (uint32_t j = i + 1; j < k; j++) {
            uint64_t p = e + j;
            expect = m_empty(p);
            atomic_compare_exchange_strong_explicit(
                &slots[p & mask].word, &expect, m_skipped(p),
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
    /* the view's geometry in registers, as in put_many (the acquire loads
     * of the scan would make the compiler load it again for every slot) */
    struct shmobj__ring_slot *slots = r->slots;
    uint64_t mask = r->mask, cap = r->capacity;
    uint32_t log2 = r->cap_log2;
    uint32_t most = cap < RING_BATCH_MAX ? (uint32_t)cap : RING_BATCH_MAX;
    while (*got < n) {
        uint64_t d = atomic_load_explicit(&h->deq_pos, memory_order_relaxed);
        uint32_t want = n - *got < most ? n - *got : most;
        uint32_t k = run_ready(slots, mask, log2, d, want, seen);
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
        SHMOBJ__STEP("queue.take_many.claimed");
        test_hold_once(&r->test_take_many_hold_ns);
        uint32_t token = self_token(r); /* once per run */
        run_records(slots, mask, log2, d, k, SHMOBJ__RING_ROLE_CONSUMER, token);
        SHMOBJ__STEP("queue.take_many.recorded");
        if (__builtin_expect(r->test_hold_ns != 0, 0))
            shmobj__ring_test_hold(r->test_hold_ns);
        uint64_t expect = seen[0];
        /* fails only if a producer already released it on our behalf;
         * then so may it have the others: they go by CAS too */
        bool plain = atomic_compare_exchange_strong_explicit(
                         &slots[d & mask].word, &expect, m_empty(d + cap),
                         memory_order_seq_cst, memory_order_relaxed) &&
                     token != 0;
        SHMOBJ__STEP("queue.take_many.first");
        uint32_t out = *got;
        if (is_value(seen[0]))
            v[out++] = value_ref(seen[0]);
        if (plain) {
            out = (uint32_t)(run_release(slots, mask, cap, d + 1, k - 1, seen + 1,
                                         v + out) - v);
            /* the stores before the waiter load (see wake_side()) */
            atomic_thread_fence(memory_order_seq_cst);
        } else {
            for (uint32_t i = 1; i < k; i++) {
                expect = seen[i];
                atomic_compare_exchange_strong_explicit(
                    &slots[(d + i) & mask].word, &expect, m_empty(d + i + cap),
                    memory_order_seq_cst, memory_order_relaxed);
                if (is_value(seen[i]))
                    v[out++] = value_ref(seen[i]);
            }
        }
        *got = out;
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
            if (e > d && shmobj__ring_resolve_producer(r, s, d))
                continue;
        }
        uint64_t d2 = atomic_load_explicit(&h->deq_pos, memory_order_acquire);
        if (d2 == d)
            return head_may_wait(r, w, d) ? SHMOBJ_EEMPTY : SHMOBJ_ECORRUPT;
        d = d2;
    }
}

#define PEEK_RO_TRIES 10000

int shmobj__ring_try_peek_ro(struct shmobj__ring *r, uint64_t *v)
{
    struct shmobj__ring_hdr *h = r->hdr;
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE;
    for (unsigned t = 0; t < PEEK_RO_TRIES; t++) {
        uint64_t d0 = atomic_load_explicit(&h->deq_pos, memory_order_acquire);
        uint64_t d = d0, w = 0;
        /* the head is the first slot from d0 on that is not skipped;
         * bounded by the ring's capacity */
        for (uint64_t k = 0; k < r->capacity; k++, d++) {
            w = atomic_load_explicit(&r->slots[d & r->mask].word,
                                     memory_order_acquire);
            if (w != m_skipped(d))
                break;
        }
        bool found = is_value_at(r, w, d);
        /* still the head: nothing was taken between the loads */
        if (atomic_load_explicit(&h->deq_pos, memory_order_acquire) == d0) {
            if (!found)
                return SHMOBJ_EEMPTY;
            *v = value_ref(w);
            return 0;
        }
    }
    return SHMOBJ_EBUSY;
}

uint64_t shmobj__ring_count(const struct shmobj__ring *r)
{
    uint64_t d = atomic_load_explicit(&r->hdr->deq_pos, memory_order_acquire);
    uint64_t e = atomic_load_explicit(&r->hdr->enq_pos, memory_order_acquire);
    if (e <= d)
        return 0;
    return e - d > r->capacity ? r->capacity : e - d;
}
