/* Named queues in a segment: create, open, close and destroy, the layout
 * of a queue's block, and the handle.
 *
 * Invariants kept here:
 * - A queue is one 64-byte aligned heap block holding a ring (ring.h), a
 *   retire FIFO (retire.h) and its completion records (track.h),
 *   published as the root named exactly as the queue (one namespace for
 *   every kind of root), and only once all three are written. A handle
 *   validates the block (its generation, its size, the ring header, the
 *   FIFO's header, the records' header) once at open and afterwards
 *   addresses it only through the validated view.
 * - A handle writes into its queue's block only while the ring's identity
 *   word is the one it opened (ring.h): destroy clears it first, so a
 *   stale handle writes nothing there (SHMOBJ_ESTALE); what fails on the
 *   ring also checks the block's generation (shmobj__queue_gone()).
 * - Destroy wakes every sleeper and listener and waits (bounded) for the
 *   sleepers to leave before the block goes back to the heap. */
#include <stdlib.h>
#include <string.h>

#include "mix.h"
#include "os.h"
#include "queue-internal.h"
#include "shmobj/segment.h"

/* Whether the queue of this handle still exists, judged the slow way: 0
 * live; SHMOBJ_ESTALE when the ring's identity is no longer the one this
 * handle opened (destroyed: 0, or re-created in the same block: another
 * identity) or its block was freed (the heap's generation), whatever the
 * bytes left there say. */
int shmobj__queue_gone(shmobj_queue *q)
{
    if (!shmobj__ring_live(&q->ring))
        return SHMOBJ_ESTALE;
    int rc = q->sp->ops->check(q->sp, q->ref, NULL);
    return rc == 0 || rc == SHMOBJ_ESTALE ? rc : SHMOBJ_ECORRUPT;
}

/* A ring operation did not succeed: tell a queue that went away from a
 * full, empty or damaged one. */
__attribute__((noinline, cold)) int shmobj__queue_op_status(shmobj_queue *q,
                                                           int rc)
{
    int gone = shmobj__queue_gone(q);
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
 * to pay for the FIFO's lock, to half this core's L2 of data, from where a
 * block being written passes through the writer's L2 to the L3 anyway;
 * twice the L2 of them, so that the oldest has left the consumer's L2.
 * Both bounds get an eighth of the L2 more for the message headers and the
 * heap's rounding: a message of half the L2 of data (1 MiB on a 2 MiB L2)
 * is a block of more than half the L2, and four of them (a consumer two
 * messages ahead) must fit the budget, or the FIFO trims the blocks it is
 * about to reuse and every allocation falls back to the heap, which hands
 * out the block freed last, still in the consumer's L2.
 *
 * A message allocation reuses a retired block once one L2 of bytes, or
 * for a copy-in where the FIFO can hold them one and a half L2, were
 * retired after it: after one L2 of reads the consumer's L2 still holds
 * part of the block (its replacement is not LRU), and the copy has to take
 * each line it finds there from the other core. (A producer writing in
 * place with plain stores measured slower after the longer wait:
 * queue-msg.c, msg_alloc().)
 * Measured on a 2 MiB-L2 machine, W1 copy-in at SCHED_FIFO, median GiB/s
 * of 7 runs reusing after 1, 1.25, 1.5 and 1.75 L2: 64 KiB 11.8, 12.8,
 * 13.1, 13.4; 400 KB 14.1 after one L2, 14.9 after one and a half. The
 * longer wait applies to the block sizes of which the FIFO can keep that
 * much and the block and three more (a consumer behind), within its budget
 * and its 64 entries less four: from a sixtieth of one and a half L2
 * (52 KiB on a 2 MiB L2) to a third of the rest of the budget (437 KB).
 * Other sizes wait one L2: waiting longer than the FIFO can hold would
 * send every allocation to the heap. */
#define QUEUE_RETIRE_MIN (32u << 10)

/* Open a handle of the queue in block ref: SHMOBJ_ESTALE when the block
 * was freed or the queue is being destroyed, SHMOBJ_ETYPE when the block
 * is something else (no ring magic), SHMOBJ_ECORRUPT / SHMOBJ_EVERSION
 * when it says it is a ring but is not a sound one. */
static int handle_new(shmobj_segment *seg, shmobj_ref ref, shmobj_queue **out)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    uint64_t usable = 0;
    void *mem;
    int rc = shmobj__space_block(sp, ref, &mem, &usable);
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
    q->retire_max = l2 / 2 + l2 / 8;
    q->retire_budget = 2 * l2 + l2 / 8;
    q->recycle_cold = l2;
    q->recycle_far = l2 + l2 / 2;
    q->plain_max = 4 * l2;
    q->serial = (uint32_t)ring_ident(ref ^ (uint64_t)(uintptr_t)q);
    q->notify_slot = -1;
    q->notify_rfd = -1;
    q->notify_wfd = -1;
    for (unsigned i = 0; i < SHMOBJ__RING_NOTIFY_MAX; i++)
        q->peers[i].wfd = -1;
    shmobj__os_pmutex_init(&q->lock);
    shmobj__space_hold(sp); /* the handle outlives the segment's close */
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

void shmobj_queue_close(shmobj_queue *q)
{
    if (q == NULL)
        return;
    /* After the segment handle's close too: this handle's hold kept the
     * mapping, so its records and listener slot are given back. */
    shmobj__queue_track_drop_all(q);
    shmobj__queue_notify_drop(q);
    shmobj__os_pmutex_destroy(&q->lock);
    struct shmobj__space *sp = q->sp;
    free(q);
    shmobj__space_release(sp);
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
    shmobj__queue_notify_fire(q);
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
    if (seg != NULL && shmobj__space_of_seg(seg)->readonly)
        return SHMOBJ_ERDONLY;
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
    shmobj__queue_notify_forget_dead(q);
    unsigned n;
    (void)shmobj__queue_retire_drain(q, &n);
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
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    atomic_store_explicit(&q->spin_ns, spin_ns, memory_order_relaxed);
    return 0;
}

int shmobj_queue_capacity(shmobj_queue *q, uint32_t *capacity)
{
    if (q == NULL || capacity == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    *capacity = (uint32_t)q->ring.capacity;
    return 0;
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

void shmobj__queue_recycle_hold_set(shmobj_queue *q, uint64_t ns)
{
    q->recycle_hold_ns = ns;
}

void shmobj__queue_retire_hold_set(shmobj_queue *q, uint64_t ns)
{
    q->retire_hold_ns = ns;
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
