/* Fuzz target for the queue's readers of untrusted segment bytes: open,
 * the non-blocking put, take and peek, their batches, message data, done,
 * copy-in, the retire FIFO and the completion records of tracked
 * references.
 *
 * A queue is built once in a memfd segment: a few message blocks retired
 * (so the FIFO has entries) and a few messages left waiting; its bytes are
 * saved. Each input is a list of edits, each one naming a region (the ring
 * header's positions and counters, the slots and claim records, the retire
 * FIFO and its lock word, a message block's header), an offset in it and up
 * to 16 bytes to write there. After the edits every operation runs; then
 * the saved bytes are put back. Properties (abort on violation): nothing
 * crashes or reads outside the mapping, every call returns 0 or one of the
 * codes its documentation lists, and the heap's own check still passes (no
 * block was freed twice).
 *
 * The notify and sleeper records are edited too (a region each, over
 * every field: state, pid, token, inode, descriptor; owner, token,
 * counts): a put acts on a notify record with system calls (it opens
 * /proc/<pid>/fd/<fd> and writes only to the registered pipe), a waker
 * takes a dead sleeper's count back. The handle the target keeps has a
 * registration of its own, armed, saved with the bytes; their readers run
 * after the edits: notify_fd and notify_arm on a fresh handle and on the
 * kept one, a put (which fires the armed records), a blocking take with a
 * 1 ms timeout on the drained ring (its sleeper record, its waits) and
 * shmobj__ring_sleepers_repair().
 *
 * The retire FIFO's lock word is a region too: retiring a block, trimming
 * and draining take that lock, and the library's lock must refuse a word
 * of garbage (SHMOBJ_ECORRUPT) or take it over from a dead owner and
 * repair the FIFO, at once: the whole exercise must end within
 * FUZZ_EXERCISE_MAX_NS. A word that names a live handle of this process is set
 * to 0 first: it is indistinguishable from a lock that handle holds, which
 * a locker rightly waits for (10 s, then SHMOBJ_EBUSY).
 *
 * Then a tracked message's round (put, take, done, wait, reset, free), the
 * queue's check and statistics and a timed peek, on the same bytes.
 *
 * Built with libFuzzer (-fsanitize=fuzzer) and, with -DFUZZ_STANDALONE, as
 * a plain program (fuzz-edits.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "queue-internal.h"
#include "shmobj.h"
#include "space.h"

#define FUZZ_NAME "fuzz-queue"
#include "fuzz-edits.h"

static shmobj_segment *seg;
static shmobj_queue *queue;
/* raw blocks put with completion, waiting in the ring behind the messages:
 * the exercise's takes mark them done, its sender side waits and
 * untracks */
static shmobj_ref tracked[2];

/* A message block's header as a region. */
static void add_message(shmobj_ref ref)
{
    void *p;
    if (shmobj_arena_ptr(seg, ref, &p, NULL) == 0)
        fuzz_region_add(p, SHMOBJ_QUEUE_MSG_HEADER);
}

static void fuzz_setup(void)
{
    seg = fuzz_segment();
    if (shmobj_queue_create(seg, "q", 8, 0, &queue) != 0)
        fuzz_die("set-up failed");
    /* fixed thresholds, whatever this machine's caches: 32 KiB blocks are
     * retired, 4 of them kept */
    queue->retire_min = 32u << 10;
    queue->retire_max = 64u << 10;
    queue->retire_budget = 4 * (40u << 10);
    /* and reused by a 40 KiB allocation once two were retired after it */
    queue->recycle_cold = 80u << 10;
    for (int i = 0; i < 6; i++) {
        shmobj_ref r, t;
        if (shmobj_queue_msg_alloc(queue, 40u << 10, 0, &r, NULL) != 0 ||
            shmobj_queue_put(queue, r) != 0 || shmobj_queue_try_take(queue, &t) != 0 ||
            shmobj_queue_msg_done(queue, t) != 0)
            fuzz_die("set-up failed");
    }
    for (int i = 0; i < 3; i++) {
        shmobj_ref r;
        void *d;
        if (shmobj_queue_msg_alloc(queue, 100 + (size_t)i, i == 1 ? SHMOBJ_QUEUE_MSG_TRACK : 0,
                                   &r, &d) != 0)
            fuzz_die("set-up failed");
        memset(d, 'a' + i, 100 + (size_t)i);
        if (shmobj_queue_put(queue, r) != 0)
            fuzz_die("set-up failed");
        add_message(r);
    }
    for (int i = 0; i < 2; i++)
        if (shmobj_arena_alloc(seg, 64, 16, &tracked[i], NULL) != 0 ||
            shmobj_queue_put_tracked(queue, tracked[i], 0) != 0)
            fuzz_die("set-up failed");
    int nfd;
    if (shmobj_queue_notify_fd(queue, &nfd) != 0 || shmobj_queue_notify_arm(queue) != 0)
        fuzz_die("set-up failed");
    struct shmobj__ring *ring = shmobj__queue_ring(queue);
    fuzz_region_add(ring->hdr, offsetof(struct shmobj__ring_hdr, notify));
    fuzz_region_add(ring->hdr->notify, sizeof ring->hdr->notify);
    fuzz_region_add(ring->hdr->sleepers, sizeof ring->hdr->sleepers);
    /* the waiter totals and armed count, which the records feed */
    fuzz_region_add(&ring->hdr->cons_waiters,
                    offsetof(struct shmobj__ring_hdr, take_event) + 4 -
                        offsetof(struct shmobj__ring_hdr, cons_waiters));
    fuzz_region_add(ring->slots, (size_t)ring->capacity * SHMOBJ__RING_SLOT_BYTES);
    struct shmobj__retire *rt = shmobj__queue_retire(queue);
    fuzz_region_add(rt, offsetof(struct shmobj__retire, lock));
    fuzz_region_add(&rt->head, sizeof *rt - offsetof(struct shmobj__retire, head));
    fuzz_region_add(&rt->lock, 8);
    for (uint64_t p = rt->head; p != rt->tail; p++)
        add_message(rt->e[p % SHMOBJ__RETIRE_CAP].ref);
    /* the completion records: header and every record */
    fuzz_region_add(queue->track, shmobj__track_bytes(queue->track_count));
    fuzz_save();
}

/* The codes a call on a message reference may return: a damaged slot
 * word may name any block, or none of this segment. */
static int ref_status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE ||
           rc == SHMOBJ_EINVAL || rc == SHMOBJ_ETYPE;
}

/* The codes of a ring operation: a damaged identity word reads as a
 * destroyed queue. */
static int ring_status_ok(int rc, int busy)
{
    return rc == 0 || rc == busy || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE;
}

/* Read every byte of a message, then mark it done. */
static void consume(shmobj_ref ref)
{
    void *d;
    size_t len;
    int rc = shmobj_queue_msg_data(queue, ref, &d, &len);
    fuzz_expect(ref_status_ok(rc), "msg_data status");
    if (rc == 0) {
        volatile uint8_t sum = 0;
        for (size_t j = 0; j < len; j++)
            sum ^= ((const uint8_t *)d)[j];
        (void)sum;
    }
    fuzz_expect(ref_status_ok(shmobj_queue_msg_done(queue, ref)), "msg_done status");
    rc = shmobj_queue_done(queue, ref);
    fuzz_expect(rc == 0 || rc == SHMOBJ_EINVAL || rc == SHMOBJ_ENOTFOUND ||
                    rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT,
                "done status");
}

/* The sender's side of completion records, then batches, on whatever the
 * edits left. */
static void tracked_readers(void)
{
    for (int i = 0; i < 2; i++) {
        int rc = shmobj_queue_wait_done(queue, tracked[i], 0);
        fuzz_expect(rc == 0 || rc == SHMOBJ_ETIMEDOUT || rc == SHMOBJ_ENOTFOUND ||
                        rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT,
                    "wait_done status");
        rc = shmobj_queue_untrack(queue, tracked[i]);
        fuzz_expect(rc == 0 || rc == SHMOBJ_EINUSE || rc == SHMOBJ_ENOTFOUND ||
                        rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT,
                    "untrack status");
    }
    int rc = shmobj_queue_wait_all(queue, 0);
    fuzz_expect(rc == 0 || rc == SHMOBJ_ETIMEDOUT || rc == SHMOBJ_ESTALE ||
                    rc == SHMOBJ_ECORRUPT,
                "wait_all status");
    rc = shmobj_queue_put_tracked(queue, tracked[1], 0);
    fuzz_expect(ring_status_ok(rc, SHMOBJ_EFULL) || rc == SHMOBJ_EEXIST ||
                    rc == SHMOBJ_ETRACKFULL,
                "put_tracked status");
    shmobj_ref in[3] = {tracked[0], tracked[1], tracked[0]}, out[8];
    size_t n = 0;
    rc = shmobj_queue_put_many(queue, in, 3, 0, &n);
    fuzz_expect(ring_status_ok(rc, SHMOBJ_EFULL) && n <= 3 && (rc != 0 || n == 3),
                "put_many status");
    rc = shmobj_queue_take_many(queue, out, 8, 0, &n);
    fuzz_expect(ring_status_ok(rc, SHMOBJ_EEMPTY) && n <= 8 && (rc != 0 || n >= 1),
                "take_many status");
    for (size_t i = 0; rc == 0 && i < n; i++)
        fuzz_expect(out[i] != 0, "take_many of a null reference");
}

/* The codes of notify_fd and notify_arm. */
static int notify_status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_EFULL || rc == SHMOBJ_ESTALE ||
           rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ENOTSUP || rc == SHMOBJ_ESYS;
}

/* The readers of the notify and sleeper records, on a drained ring. */
static void notify_readers(void)
{
    int fd;
    shmobj_queue *q2;
    int rc = shmobj_queue_open(seg, "q", &q2);
    if (rc == 0) {
        rc = shmobj_queue_notify_fd(q2, &fd);
        fuzz_expect(notify_status_ok(rc), "notify_fd status");
        if (rc == 0) {
            rc = shmobj_queue_notify_arm(q2);
            fuzz_expect(rc == 0 || rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT,
                        "notify_arm status");
        }
        shmobj_queue_close(q2);
    }
    /* the kept handle's registration: already made, so notify_fd answers
     * from the handle; arm reads its (damaged) record */
    rc = shmobj_queue_notify_fd(queue, &fd);
    fuzz_expect(notify_status_ok(rc), "notify_fd (kept) status");
    rc = shmobj_queue_notify_arm(queue);
    fuzz_expect(rc == 0 || rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT,
                "notify_arm (kept) status");
    /* a put fires every armed record, then the take empties the ring */
    shmobj_ref ref;
    rc = shmobj_queue_put_copy(queue, "n", 1, 0, 0, NULL);
    fuzz_expect(ring_status_ok(rc, SHMOBJ_EFULL) || rc == SHMOBJ_ENOMEM,
                "put_copy (notify) status");
    while (shmobj_queue_try_take(queue, &ref) == 0)
        consume(ref);
    rc = shmobj_queue_take_timed(queue, &ref, 1000000);
    fuzz_expect(ring_status_ok(rc, SHMOBJ_ETIMEDOUT), "take_timed status");
    if (rc == 0)
        consume(ref);
    (void)shmobj__ring_sleepers_repair(shmobj__queue_ring(queue));
}

/* Clear the retire lock word when it names a live handle (see above). */
static void keep_lock_off_live(void)
{
    struct shmobj__space *sp = (struct shmobj__space *)seg;
    _Atomic uint32_t *w = &shmobj__queue_retire(queue)->lock.word;
    uint32_t owner = atomic_load(w) & UINT32_C(0x7fffffff);
    if (owner != 0 && sp->ops->live->owner_state(sp, owner) > 0)
        atomic_store(w, 0);
}

/* A tracked message's whole round on what the edits left: put, taken,
 * marked done, waited for, reset for another use, freed. */
static void tracked_message(void)
{
    shmobj_ref ref, t;
    void *d;
    int rc = shmobj_queue_msg_alloc(queue, 64, SHMOBJ_QUEUE_MSG_TRACK, &ref, &d);
    fuzz_expect(rc == 0 || rc == SHMOBJ_ENOMEM || rc == SHMOBJ_ECORRUPT, "tracked alloc status");
    if (rc != 0)
        return;
    memset(d, 't', 64);
    rc = shmobj_queue_try_put(queue, ref);
    fuzz_expect(ring_status_ok(rc, SHMOBJ_EFULL), "tracked put status");
    if (rc == 0) {
        while (shmobj_queue_try_take(queue, &t) == 0) {
            if (t == ref)
                fuzz_expect(ref_status_ok(shmobj_queue_msg_done(queue, t)), "msg_done status");
            else
                consume(t);
        }
        rc = shmobj_queue_msg_wait_done(queue, ref, 0);
        fuzz_expect(ref_status_ok(rc) || rc == SHMOBJ_ETIMEDOUT, "msg_wait_done status");
        rc = shmobj_queue_msg_reset(queue, ref);
        fuzz_expect(ref_status_ok(rc), "msg_reset status");
    }
    rc = shmobj_queue_msg_free(queue, ref);
    fuzz_expect(ref_status_ok(rc), "msg_free status");
}

static void fuzz_exercise(void)
{
    keep_lock_off_live();
    long long t0 = fuzz_now_ns();
    shmobj_queue *q2;
    int rc = shmobj_queue_open(seg, "q", &q2);
    fuzz_expect(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_EVERSION ||
                    rc == SHMOBJ_ETYPE || rc == SHMOBJ_ESTALE,
                "open status");
    if (rc == 0)
        shmobj_queue_close(q2);

    uint64_t n;
    rc = shmobj_queue_count(queue, &n);
    fuzz_expect((rc == 0 && n <= 8) || rc == SHMOBJ_ESTALE, "count");
    (void)shmobj_queue_has_messages(queue);
    shmobj_ref ref;
    rc = shmobj_queue_try_peek(queue, &ref);
    fuzz_expect(ring_status_ok(rc, SHMOBJ_EEMPTY), "peek status");
    if (rc == 0) {
        void *d;
        fuzz_expect(ref_status_ok(shmobj_queue_msg_data(queue, ref, &d, NULL)), "peek data");
    }
    for (int i = 0; i < 10; i++) {
        rc = shmobj_queue_try_take(queue, &ref);
        fuzz_expect(ring_status_ok(rc, SHMOBJ_EEMPTY), "take status");
        fuzz_expect(rc != 0 || ref != 0, "take of a null reference");
        if (rc != 0)
            break;
        consume(ref);
    }
    void *d;
    rc = shmobj_queue_msg_alloc(queue, 200, 0, &ref, &d);
    fuzz_expect(rc == 0 || rc == SHMOBJ_ENOMEM || rc == SHMOBJ_ECORRUPT, "alloc status");
    if (rc == 0) {
        memset(d, 'z', 200);
        rc = shmobj_queue_try_put(queue, ref);
        fuzz_expect(ring_status_ok(rc, SHMOBJ_EFULL), "put status");
        if (rc != 0)
            fuzz_expect(shmobj_queue_msg_free(queue, ref) == 0, "free of an unsent message");
    }
    static uint8_t big[40u << 10];
    rc = shmobj_queue_put_copy(queue, big, sizeof big, 0, 0, NULL);
    fuzz_expect(ring_status_ok(rc, SHMOBJ_EFULL) || rc == SHMOBJ_ENOMEM, "put_copy status");
    while (shmobj_queue_try_take(queue, &ref) == 0)
        consume(ref);
    tracked_readers();
    while (shmobj_queue_try_take(queue, &ref) == 0)
        consume(ref);
    notify_readers();
    tracked_message();
    uint64_t bad_off;
    rc = shmobj_queue_check(queue, &bad_off);
    fuzz_expect(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE, "check status");
    shmobj_queue_stats st = {.struct_size = sizeof st};
    rc = shmobj_queue_stats_get(queue, &st);
    fuzz_expect(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE, "stats status");
    rc = shmobj_queue_peek_timed(queue, &ref, 1000000);
    fuzz_expect(ring_status_ok(rc, SHMOBJ_ETIMEDOUT) || rc == SHMOBJ_EEMPTY, "peek_timed status");
    rc = shmobj_queue_trim(queue);
    fuzz_expect(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE, "trim status");
    uint64_t bad = 0;
    fuzz_expect(shmobj_arena_check(seg, &bad) == 0, "heap intact");
    fuzz_expect(fuzz_now_ns() - t0 < FUZZ_EXERCISE_MAX_NS, "bounded: no lock word waited on");
}
