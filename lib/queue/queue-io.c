/* Put, take and peek: the hot paths, their waits and their batches.
 *
 * Invariants kept here:
 * - Every call tries the ring once before it computes a deadline or
 *   enters a wait loop; what fails goes through shmobj__queue_op_status()
 *   (out of line, cold), which tells a queue that went away from a full,
 *   empty or damaged one.
 * - The ring (ring.h) is reached only through the handle's validated view
 *   and only with values shmobj__ring_value_ok() accepts; a batch checks
 *   every reference before it sends any.
 * - After every publish, one seq_cst load of hdr.armed decides whether a
 *   listener is woken (queue-notify.c); nothing else is added to a put.
 * - A single put or take whose message goes through at once is one call:
 *   the argument checks and the ring's plain case (ring-int.h) inline in
 *   the public function; whatever that case does not finish (a bad
 *   argument, a full, empty, destroyed or damaged ring, a lost race) goes
 *   to put_timed() / take_timed() out of line, which start over and give
 *   every answer the whole path gives. */
#include "os.h"
#include "queue-internal.h"
#include "ring-int.h"

/* After a publish: wake the armed listeners, if any (queue-notify.c). */
static inline void after_put(shmobj_queue *q)
{
    /* seq_cst: pairs with the arm's increment + fence + peek (Dekker) */
    if (atomic_load_explicit(&q->ring.hdr->armed, memory_order_seq_cst) != 0)
        shmobj__queue_notify_fire(q);
}

static __attribute__((noinline)) int put_timed_at(shmobj_queue *q,
                                                  shmobj_ref ref,
                                                  int64_t timeout_ns,
                                                  uint64_t *at)
{
    if (q == NULL || !shmobj__ring_value_ok(ref))
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    if (q->sp->readonly)
        return SHMOBJ_ERDONLY;
    /* one try first: a queue with room needs no deadline and no wait
     * loop (the blocking path tries again before it waits) */
    int rc = shmobj__ring_try_put_at(&q->ring, ref, at);
    if (rc == SHMOBJ_EFULL && timeout_ns != 0)
        rc = shmobj__ring_put_at(
            &q->ring, ref,
            atomic_load_explicit(&q->spin_ns, memory_order_relaxed),
            shmobj__os_deadline(timeout_ns), at);
    if (rc != 0)
        return shmobj__queue_op_status(q, rc);
    after_put(q);
    return 0;
}

static __attribute__((noinline)) int put_timed(shmobj_queue *q, shmobj_ref ref,
                                               int64_t timeout_ns)
{
    uint64_t at;
    return put_timed_at(q, ref, timeout_ns, &at);
}

/* put_timed() for the other sources (put_copy, tracked puts). */
int shmobj__queue_put_timed(shmobj_queue *q, shmobj_ref ref, int64_t timeout_ns,
                            uint64_t *at)
{
    return put_timed_at(q, ref, timeout_ns, at);
}

/* After a plain put that found sleepers or listeners: wake them. */
static __attribute__((noinline)) int put_wake(shmobj_queue *q)
{
    wake_consumers(&q->ring);
    after_put(q);
    return 0;
}

/* The plain case of the public puts: 0 when ref was published (and the
 * sleepers and listeners woken), else what put_timed() says. Inline and
 * calling nothing until it returns (put_wake() and put_timed() are tail
 * calls): the common case saves no register. */
static inline int put_plain(shmobj_queue *q, shmobj_ref ref, int64_t timeout_ns)
{
    uint64_t at;
    if (__builtin_expect(q != NULL && shmobj__ring_value_ok(ref) &&
                             !shmobj__space_closed(q->sp) && !q->sp->readonly &&
                             ring_put_plain(&q->ring, ref, &at),
                         1)) {
        /* both seq_cst, in this order, as wake_consumers() then
         * after_put() would load them */
        if (__builtin_expect(ring_put_woken(&q->ring) ||
                                 atomic_load_explicit(&q->ring.hdr->armed,
                                                      memory_order_seq_cst) != 0,
                             0))
            return put_wake(q);
        return 0;
    }
    return put_timed(q, ref, timeout_ns);
}

int shmobj_queue_put(shmobj_queue *q, shmobj_ref ref)
{
    return put_plain(q, ref, SHMOBJ_FOREVER);
}

int shmobj_queue_try_put(shmobj_queue *q, shmobj_ref ref)
{
    return put_plain(q, ref, 0);
}

int shmobj_queue_put_timed(shmobj_queue *q, shmobj_ref ref, int64_t timeout_ns)
{
    return put_plain(q, ref, timeout_ns);
}

/* A read-only handle's peek: it may not count itself among the sleepers
 * (a write), so it looks again every RO_PEEK_SLICE_NS until a message is
 * there or the deadline passes. */
#define RO_PEEK_SLICE_NS (UINT64_C(1000000))

static __attribute__((noinline)) int peek_ro(shmobj_queue *q, shmobj_ref *ref,
                                             int64_t timeout_ns)
{
    uint64_t v;
    uint64_t deadline = timeout_ns != 0 ? shmobj__os_deadline(timeout_ns) : 0;
    for (unsigned i = 1;; i++) {
        int rc = shmobj__ring_try_peek_ro(&q->ring, &v);
        if (rc == 0) {
            *ref = v;
            return 0;
        }
        if (rc != SHMOBJ_EEMPTY || timeout_ns == 0 ||
            shmobj__os_now_ns() >= deadline)
            return rc == SHMOBJ_EEMPTY && timeout_ns != 0 ? SHMOBJ_ETIMEDOUT
                                                          : shmobj__queue_op_status(q, rc);
        if (shmobj__space_closed(q->sp))
            return SHMOBJ_ESTALE;
        /* as a sleeper's wait: one without a deadline ends when the
         * segment's name was removed (nobody can put any more) */
        if (deadline == UINT64_MAX && i % 64 == 0 && !q->sp->ops->live->linked(q->sp))
            return SHMOBJ_EREPLACED;
        shmobj__os_sleep_ns(RO_PEEK_SLICE_NS);
    }
}

static __attribute__((noinline)) int take_timed(shmobj_queue *q, shmobj_ref *ref,
                                                int64_t timeout_ns, bool peek)
{
    if (q == NULL || ref == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    if (q->sp->readonly)
        return peek ? peek_ro(q, ref, timeout_ns) : SHMOBJ_ERDONLY;
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
        return shmobj__queue_op_status(q, rc);
    *ref = v;
    return 0;
}

/* After a plain take that found sleeping producers: wake them. */
static __attribute__((noinline)) int take_wake(shmobj_queue *q)
{
    wake_producers(&q->ring);
    return 0;
}

/* The plain case of the public takes: 0 with the message in *ref, else
 * what take_timed() says; as put_plain(), nothing is called but in tail. */
static inline int take_plain(shmobj_queue *q, shmobj_ref *ref,
                             int64_t timeout_ns)
{
    uint64_t v;
    if (__builtin_expect(q != NULL && ref != NULL && !shmobj__space_closed(q->sp) &&
                             !q->sp->readonly && ring_take_plain(&q->ring, &v),
                         1)) {
        *ref = v;
        if (__builtin_expect(ring_take_woken(&q->ring), 0))
            return take_wake(q);
        return 0;
    }
    return take_timed(q, ref, timeout_ns, false);
}

int shmobj_queue_take(shmobj_queue *q, shmobj_ref *ref)
{
    return take_plain(q, ref, SHMOBJ_FOREVER);
}

int shmobj_queue_try_take(shmobj_queue *q, shmobj_ref *ref)
{
    return take_plain(q, ref, 0);
}

int shmobj_queue_take_timed(shmobj_queue *q, shmobj_ref *ref,
                            int64_t timeout_ns)
{
    return take_plain(q, ref, timeout_ns);
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
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (q == NULL || put == NULL || (refs == NULL && n > 0))
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    /* every reference before any is sent: shmobj__ring_value_ok() of
     * them all, as the union of their low bits and the least of them (no
     * branch a reference) */
    uint64_t low = 0, least = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        low |= refs[i];
        least = refs[i] < least ? refs[i] : least;
    }
    if (n > 0 && !shmobj__ring_value_ok((low & 15u) | least))
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
        return shmobj__queue_op_status(q, rc);
    return 0;
}

int shmobj_queue_take_many(shmobj_queue *q, shmobj_ref *refs, size_t max,
                           int64_t timeout_ns, size_t *taken)
{
    if (taken != NULL)
        *taken = 0;
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (q == NULL || refs == NULL || taken == NULL || max == 0)
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
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
        return shmobj__queue_op_status(q, rc);
    *taken = k;
    return 0;
}

bool shmobj_queue_has_messages(shmobj_queue *q)
{
    uint64_t v;
    return q != NULL && !shmobj__space_closed(q->sp) &&
           (q->sp->readonly ? shmobj__ring_try_peek_ro(&q->ring, &v)
                            : shmobj__ring_try_peek(&q->ring, &v)) == 0;
}

int shmobj_queue_count(shmobj_queue *q, uint64_t *count)
{
    if (q == NULL || count == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    if (!shmobj__ring_live(&q->ring))
        return shmobj__queue_op_status(q, SHMOBJ_ESTALE);
    *count = shmobj__ring_count(&q->ring);
    return 0;
}
