/* Message blocks: allocation, completion, and the way back to the heap
 * through the retire FIFO; the copy-in of put_copy.
 *
 * Invariants kept here:
 * - A message block is a heap block that starts with struct shmobj__qmsg.
 *   Every access goes through msg_get(), which checks the reference's
 *   generation and size and the header's magic, length and state before
 *   use, reading each field once and handing out those copies.
 * - A message block's `state` moves PENDING -> DONE (consumer) or
 *   PENDING -> ABANDONED (sender gave up) exactly once, by CAS; whoever
 *   arrives second gives the block back, moving it to FREED by CAS first,
 *   so it is given back exactly once and refused ever after, also while
 *   it waits, still allocated, in the retire FIFO.
 * - Freeing a message block means msg_give_back(): blocks of the sizes
 *   that gain from it wait in the queue's retire FIFO (retire.h, behind the
 *   ring in the same block) and reach the heap later, the others at once.
 *   The FIFO is pushed to only while the ring's identity is the one the
 *   handle opened, so a destroyed queue's block is not written.
 * - A message allocation of those sizes first takes a block back from the
 *   FIFO (shmobj__retire_pop()), which renews its generation: a reference
 *   to the message it held before is stale, and its state FREED is
 *   overwritten only after that. */
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "arena.h" /* shmobj__arena_usable_if */
#include "os.h"
#include "queue-internal.h"
#include "step.h"

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
    /* the ring position a tracked message was published at, + 1, modulo
     * 2^32 (0: not known: not put yet, or put with shmobj_queue_put()
     * and not found in the ring by a wait yet), written by put_copy after
     * its put, or by the sender's wait (CAS from 0) that found the block
     * still waiting in the ring; the wait finds there who took it (the
     * slot's claim record) */
    _Atomic uint32_t pos;
    /* the low 32 bits of the identity of the ring that position is in
     * (the queue it was put on), written before pos; a wait through
     * another queue's handle does not read the position there */
    _Atomic uint32_t ring;
    uint64_t reserved[4];    /* zero */
};
_Static_assert(sizeof(struct shmobj__qmsg) == SHMOBJ_QUEUE_MSG_HEADER,
               "message header");
_Static_assert(offsetof(struct shmobj__qmsg, magic) == 0, "qmsg magic");
_Static_assert(offsetof(struct shmobj__qmsg, state) == 4, "qmsg state");
_Static_assert(offsetof(struct shmobj__qmsg, waiters) == 8, "qmsg waiters");
_Static_assert(offsetof(struct shmobj__qmsg, flags) == 12, "qmsg flags");
_Static_assert(offsetof(struct shmobj__qmsg, len) == 16, "qmsg len");
_Static_assert(offsetof(struct shmobj__qmsg, pos) == 24, "qmsg pos");
_Static_assert(offsetof(struct shmobj__qmsg, ring) == 28, "qmsg ring");
_Static_assert(offsetof(struct shmobj__qmsg, reserved) == 32, "qmsg reserved");
_Static_assert(offsetof(struct shmobj__qmsg, state) == SHMOBJ__RETIRE_STATE_OFF,
               "the retire FIFO's repair reads the state there");
_Static_assert(QMSG_FREED == SHMOBJ__RETIRE_STATE_GIVEN, "given back");

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

/* Check message block ref: SHMOBJ_EINVAL when there is no queue or it
 * names no block of this segment (unaligned, or beyond its bytes), SHMOBJ_ESTALE when the block
 * was freed (generation) or given back (state FREED), SHMOBJ_ETYPE when
 * it is a live block but not a message block, SHMOBJ_ECORRUPT when its
 * header is inconsistent. */
static int msg_get_slow(struct shmobj__space *sp, shmobj_ref ref, struct msg *out);

static inline __attribute__((always_inline)) int msg_get(shmobj_queue *q,
                                                         shmobj_ref ref,
                                                         struct msg *out)
{
    if (q == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    struct shmobj__space *sp = q->sp;
    uint64_t off = shmobj__ref_off(ref);
    if ((off & 15u) != 0) /* no heap block starts there */
        return SHMOBJ_EINVAL;
    /* A reference whose block is in use with its generation: the heap's
     * header word (one load) gives the block's size, and the message
     * header read once says the rest. What does not fit goes the slow way
     * (msg_get_slow). */
    uint64_t mapped = atomic_load_explicit(&sp->mapped, memory_order_acquire);
    uint64_t fast = 0;
    if ((off & (SHMOBJ_QUEUE_MSG_ALIGN - 1)) == 0 && off != 0 &&
        shmobj__range_ok(off, sizeof(struct shmobj__qmsg), mapped))
        fast = shmobj__arena_usable_if(sp->base, off, shmobj__ref_gen(ref));
    if (fast >= sizeof(struct shmobj__qmsg) &&
        shmobj__range_ok(off, fast, mapped)) {
        struct shmobj__qmsg *m = (struct shmobj__qmsg *)(void *)(sp->base + off);
        uint64_t len = __atomic_load_n(&m->len, __ATOMIC_RELAXED);
        uint32_t flags = __atomic_load_n(&m->flags, __ATOMIC_RELAXED);
        uint32_t state = atomic_load_explicit(&m->state, memory_order_acquire);
        if (__atomic_load_n(&m->magic, __ATOMIC_RELAXED) == QMSG_MAGIC &&
            len <= fast - sizeof(struct shmobj__qmsg) && state < QMSG_FREED) {
            *out = (struct msg){m, len, fast, flags};
            return 0;
        }
    }
    return msg_get_slow(sp, ref, out);
}

/* Out of line, so that the callers' common case above saves no registers:
 * the heap's whole check, which gives every answer. */
static __attribute__((noinline)) int msg_get_slow(struct shmobj__space *sp, shmobj_ref ref,
                                                  struct msg *out)
{
    uint64_t off = shmobj__ref_off(ref);
    void *p;
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

/* Mark a block given back (from state `from`) and release it: through
 * the queue's retire FIFO when it is of the sizes that gain from it
 * (retire.h) and the queue still exists, else straight to the heap. The
 * CAS settles two racing callers: the second gets SHMOBJ_ESTALE. A block
 * for the FIFO has its CAS made under the FIFO's lock, with the block
 * named in it first, so a death between the CAS and the count leaves the
 * block to the next locker instead of losing it. */
static int msg_give_back(shmobj_queue *q, shmobj_ref ref, const struct msg *g,
                         uint32_t from)
{
    uint32_t expect = from;
    /* the identity word tells a destroyed queue (as for put and take): the
     * heap's check of the queue's block cost as much again as the push */
    if (g->usable >= q->retire_min && g->usable < q->retire_max &&
        shmobj__ring_live(&q->ring)) {
        uint64_t out[SHMOBJ__RETIRE_OUT_MAX];
        unsigned n = 0;
        if (shmobj__retire_push(q->sp, q->retire, ref, g->usable, &g->m->state,
                                from, &expect, q->retire_budget,
                                q->retire_hold_ns, out, &n) == 0) {
            if (expect != from)
                return expect == QMSG_FREED ? SHMOBJ_ESTALE : SHMOBJ_EINVAL;
            free_retired(q, out, n);
            return 0;
        }
        expect = from; /* the FIFO's lock failed: the heap takes it */
    }
    if (!atomic_compare_exchange_strong_explicit(&g->m->state, &expect,
                                                 QMSG_FREED, memory_order_acq_rel,
                                                 memory_order_acquire))
        return expect == QMSG_FREED ? SHMOBJ_ESTALE : SHMOBJ_EINVAL;
    return q->sp->ops->free(q->sp, ref);
}

/* Give every retired block back to the heap; how many there were in *n. */
int shmobj__queue_retire_drain(shmobj_queue *q, unsigned *n)
{
    uint64_t out[SHMOBJ__RETIRE_OUT_MAX];
    int rc = shmobj__retire_drain(q->sp, q->retire, out, n);
    free_retired(q, out, *n);
    return rc;
}

int shmobj_queue_trim(shmobj_queue *q)
{
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (q == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    int rc = shmobj__queue_gone(q);
    unsigned n;
    return rc != 0 ? rc : shmobj__queue_retire_drain(q, &n);
}

/* Write a new message header (published by the put that hands it over). */
static inline void msg_init(struct shmobj__qmsg *m, size_t len, unsigned flags)
{
    memset(m, 0, sizeof *m);
    m->flags = flags;
    m->len = len;
    atomic_store_explicit(&m->state, QMSG_PENDING, memory_order_relaxed);
    m->magic = QMSG_MAGIC;
}

/* A message block of the sizes the retire FIFO holds is first sought
 * there (shmobj__retire_pop(): the oldest retired block, when it fits and
 * has gone cold), which costs the FIFO's lock instead of the heap's lock,
 * lists and, later, the free of a block; else it comes from the heap.
 * A block for a copy-in (memcpy, which writes whole lines without reading
 * them) waits longer where the FIFO can hold it (queue.c): a producer
 * writing in place with plain stores reads every line first, and measured
 * slower into blocks that waited longer (W1-400K zero-copy, median of 9
 * runs: 11.6 GiB/s after one L2, 11.1 after one and a half). */
static int msg_alloc(shmobj_queue *q, size_t len, unsigned flags, bool copy_in,
                     shmobj_ref *ref, void **data)
{
    if (q == NULL || ref == NULL || (flags & ~SHMOBJ_QUEUE_MSG_TRACK) != 0 ||
        len > UINT64_MAX / 2)
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    struct shmobj__space *sp = q->sp;
    shmobj_ref r;
    uint64_t size = sizeof(struct shmobj__qmsg) + (uint64_t)len;
    if (size + size / 4 >= q->retire_min && size < q->retire_max &&
        shmobj__ring_live(&q->ring)) {
        uint64_t usable;
        uint64_t cold = q->recycle_cold, far = q->recycle_far;
        if (copy_in && far > cold && far <= (SHMOBJ__RETIRE_CAP - 4) * size &&
            far + 3 * size <= q->retire_budget)
            cold = far;
        if (shmobj__retire_pop(sp, q->retire, size, cold,
                               q->recycle_hold_ns, &r, &usable) == 0 &&
            r != 0) {
            /* a retired block, renewed: in the segment (the FIFO checked
             * it) and 64-byte aligned (every message block is) */
            struct shmobj__qmsg *m =
                (struct shmobj__qmsg *)(void *)(sp->base + shmobj__ref_off(r));
            msg_init(m, len, flags);
            *ref = r;
            if (data != NULL)
                *data = m + 1;
            return 0;
        }
    }
    int rc = sp->ops->alloc(sp, size, SHMOBJ_QUEUE_MSG_ALIGN, &r);
    unsigned freed = 0;
    if (rc == SHMOBJ_ENOMEM && shmobj__queue_gone(q) == 0 &&
        shmobj__queue_retire_drain(q, &freed) == 0 && freed > 0)
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
    msg_init(m, len, flags);
    *ref = r;
    if (data != NULL)
        *data = m + 1;
    return 0;
}

int shmobj_queue_msg_alloc(shmobj_queue *q, size_t len, unsigned flags,
                           shmobj_ref *ref, void **data)
{
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    return msg_alloc(q, len, flags, false, ref, data);
}

int shmobj_queue_msg_data(shmobj_queue *q, shmobj_ref ref, void **data,
                          size_t *len)
{
    if (data == NULL)
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
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
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
        SHMOBJ__STEP("queue.msg.done");
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
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    struct msg g;
    int rc = msg_get(q, ref, &g);
    if (rc != 0)
        return rc;
    struct shmobj__qmsg *m = g.m;
    if ((g.flags & SHMOBJ_QUEUE_MSG_TRACK) == 0)
        return SHMOBJ_EINVAL;
    /* a message block is not in the queue's block: its wait outlives a
     * destroy of the queue */
    uint32_t s;
    rc = shmobj__queue_wait_while(q, &m->state, &m->waiters, QMSG_PENDING,
                                  false, timeout_ns,
                                  shmobj__os_deadline(timeout_ns), &m->pos,
                                  &m->ring, ref, &s);
    if (rc == SHMOBJ_EPEERDEAD) {
        /* the consumer that took it died: done on its behalf, so the
         * sender frees it (shmobj_queue_msg_free()) or puts it again; a
         * done that came first wins the CAS */
        uint32_t expect = QMSG_PENDING;
        if (atomic_compare_exchange_strong_explicit(&m->state, &expect,
                                                    QMSG_DONE,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire))
            return SHMOBJ_EPEERDEAD;
        s = expect;
        rc = 0;
    }
    if (rc != 0)
        return rc;
    if (s == QMSG_FREED)
        return SHMOBJ_ESTALE;
    return s == QMSG_DONE ? 0 : SHMOBJ_EINVAL;
}

int shmobj_queue_msg_reset(shmobj_queue *q, shmobj_ref ref)
{
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    struct msg g;
    int rc = msg_get(q, ref, &g);
    if (rc != 0)
        return rc;
    if ((g.flags & SHMOBJ_QUEUE_MSG_TRACK) == 0)
        return SHMOBJ_EINVAL;
    uint32_t expect = QMSG_DONE;
    /* its next put is not necessarily put_copy's: the last position
     * would name the taker of the last trip */
    if (atomic_load_explicit(&g.m->state, memory_order_acquire) == QMSG_DONE) {
        atomic_store_explicit(&g.m->pos, 0, memory_order_relaxed);
        atomic_store_explicit(&g.m->ring, 0, memory_order_relaxed);
    }
    if (!atomic_compare_exchange_strong_explicit(&g.m->state, &expect,
                                                 QMSG_PENDING,
                                                 memory_order_acq_rel,
                                                 memory_order_relaxed))
        return expect == QMSG_FREED ? SHMOBJ_ESTALE : SHMOBJ_EINVAL;
    return 0;
}

int shmobj_queue_msg_free(shmobj_queue *q, shmobj_ref ref)
{
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
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

/* Copy a message into the segment. The stores are chosen by where the
 * message will be when the consumer, on another core, reads it:
 *   - up to 4 times this core's L2: the C library's memcpy, in pieces of
 *     COPY_PIECE bytes. Its copy of such a piece is "rep movsb" where the
 *     processor has fast strings, whose fast-strings stores can write
 *     whole lines without first reading them from wherever they are. One
 *     memcpy of the whole message is not: glibc stops using "rep movsb"
 *     at the L2's size on AMD processors (its rep_movsb_stop_threshold)
 *     and copies with vector stores beyond, and on a 1 MiB-L2 AMD EPYC a
 *     1 MiB W1 copy-in measured 6.3 GiB/s in one memcpy against 21-23 in
 *     pieces of 64 or 256 KiB (16 KiB: 18-19; 400 KB and 64 KiB messages
 *     unchanged, 13-15 and 18-19 either way). Vector stores read every
 *     line of the block before they write it (from the L3, or from the
 *     consumer's core when the block is still there). The message passes through our L2 to the
 *     shared L3 as it is written, where the consumer finds it;
 *   - beyond: streaming stores. The messages in flight overflow the L3, and
 *     plain stores would read every line from memory before writing it.
 * Measured on a 2 MiB-L2, 260 MiB-L3 machine (W1 end to end, the consumer
 * in another process summing, median GiB/s of 5 to 9 runs at SCHED_FIFO):
 * memcpy / the vector loop with plain stores: 64 KiB 12.2 / 11.0 (AVX-512
 * stores 10.3), 400 KB 14.1 / 10.2 (streaming 8.0-8.4), 1 MiB 11.5 / 9.1;
 * W1-16MiB streaming 6.7-8.0, memcpy 6.9-9.1 (no clear gain: the
 * streaming stores stay), plain vector stores 5.7-6.0 earlier. On a
 * 1 MiB-L2 machine, earlier, into the block freed last (before the retire
 * FIFO), "rep movsb" measured as slow as plain vector stores, and
 * streaming stores were faster up to 512 KiB; the blocks a copy-in gets
 * now come back through the FIFO cold in the consumer's caches
 * (retire.h). dst is 64-byte aligned (message data). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2"))) static void stream_avx2(void *dst, const void *src,
                                                        size_t n64)
{
    __m256i *d = dst;
    const __m256i *s = src;
    for (size_t i = 0; i < n64; i++, d += 2, s += 2) {
        __m256i a = _mm256_loadu_si256(s), b = _mm256_loadu_si256(s + 1);
        _mm256_stream_si256(d, a);
        _mm256_stream_si256(d + 1, b);
    }
}

static void stream_sse2(void *dst, const void *src, size_t n64)
{
    __m128i *d = dst;
    const __m128i *s = src;
    for (size_t i = 0; i < n64; i++, d += 4, s += 4) {
        __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1);
        __m128i c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
        _mm_stream_si128(d, a);
        _mm_stream_si128(d + 1, b);
        _mm_stream_si128(d + 2, c);
        _mm_stream_si128(d + 3, e);
    }
}
#define HAVE_COPY_STREAM 1
#endif

/* Long enough for any C library's "rep movsb" (glibc starts at 2 to 8
 * KiB), short enough to stay under every L2 it stops at. */
#define COPY_PIECE ((size_t)64 << 10)

static void copy_in(const shmobj_queue *q, void *dst, const void *src, size_t len)
{
#if defined(HAVE_COPY_STREAM)
    if (len > q->plain_max) {
        size_t n = len / 64;
        if (__builtin_cpu_supports("avx2"))
            stream_avx2(dst, src, n);
        else
            stream_sse2(dst, src, n);
        _mm_sfence(); /* order the streaming stores before the publish */
        if (n * 64 < len)
            memcpy((char *)dst + n * 64, (const char *)src + n * 64,
                   len - n * 64);
        return;
    }
#endif
    (void)q;
    for (size_t off = 0; off < len; off += COPY_PIECE) {
        size_t n = len - off < COPY_PIECE ? len - off : COPY_PIECE;
        memcpy((char *)dst + off, (const char *)src + off, n);
    }
}

int shmobj_queue_put_copy(shmobj_queue *q, const void *data, size_t len,
                          unsigned flags, int64_t timeout_ns, shmobj_ref *ref)
{
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (q == NULL || (data == NULL && len > 0) ||
        ((flags & SHMOBJ_QUEUE_MSG_TRACK) != 0 && ref == NULL))
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    shmobj_ref r;
    void *p;
    int rc = msg_alloc(q, len, flags, true, &r, &p);
    if (rc != 0)
        return rc;
    if (len > 0)
        copy_in(q, p, data, len);
    uint64_t at;
    rc = shmobj__queue_put_timed(q, r, timeout_ns, &at);
    if (rc != 0) {
        q->sp->ops->free(q->sp, r);
        return rc;
    }
    /* where the sender's wait finds who took it; the block is the
     * sender's until this call returns (a done only marks it) */
    if ((flags & SHMOBJ_QUEUE_MSG_TRACK) != 0) {
        struct shmobj__qmsg *m = (struct shmobj__qmsg *)p - 1;
        atomic_store_explicit(&m->ring, (uint32_t)q->ring.ident,
                              memory_order_relaxed);
        atomic_store_explicit(&m->pos, (uint32_t)(at + 1), memory_order_release);
    }
    if (ref != NULL)
        *ref = r;
    return 0;
}
