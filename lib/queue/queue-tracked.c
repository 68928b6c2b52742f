/* The queue's calls for tracked references: a put that makes a completion
 * record, the consumer's done, the sender's waits and its giving up, over
 * the records of track.h.
 *
 * Invariants kept here:
 * - A record is made (PENDING) and visible before its reference can be
 *   taken, and dropped again when the put failed: nobody saw it.
 * - A sender reaches only the records of its own token and handle serial;
 *   it empties a record only from DONE, and hands one it stops tracking
 *   to the consumer by CAS PENDING -> ABANDONED, so of a done and a
 *   giving-up racing, exactly one party empties the record.
 * - q->tracked counts the records this handle holds, as a hint: waits and
 *   close skip the table walk when it is 0.
 * - Only the process that made the records drops them at close: a forked
 *   child's copy of the handle names no record of its own. */
#include "os.h"
#include "queue-internal.h"
#include "step.h"

/* Sleep (after the handle's spin) while the record is pending, up to the
 * deadline: the state seen, or SHMOBJ_ETIMEDOUT / SHMOBJ_EREPLACED, or
 * SHMOBJ_ESTALE once the queue was destroyed (its destroy wakes us). When
 * the consumer that took the reference died (SHMOBJ_EPEERDEAD), the
 * record is taken back from PENDING and freed: the reference is the
 * sender's again. A done that came first wins that CAS; then the state
 * it left is the answer. */
static int track_wait(shmobj_queue *q, uint32_t idx, int64_t timeout_ns,
                      uint64_t deadline, uint32_t *seen)
{
    struct shmobj__track_rec *r = &q->track->rec[idx];
    int rc = shmobj__queue_wait_while(q, &r->state, &r->waiters,
                                      SHMOBJ__TRACK_PENDING, true, timeout_ns,
                                      deadline, &r->pos, NULL, 0, seen);
    if (rc != SHMOBJ_EPEERDEAD)
        return rc;
    if (shmobj__track_release(q->track, idx, SHMOBJ__TRACK_PENDING)) {
        atomic_fetch_sub_explicit(&q->tracked, 1, memory_order_relaxed);
        *seen = SHMOBJ__TRACK_FREE;
        return SHMOBJ_EPEERDEAD;
    }
    *seen = atomic_load_explicit(&r->state, memory_order_acquire);
    return 0;
}

/* Every call on a tracked reference first: SHMOBJ_EINVAL for no queue or
 * a reference no ring carries, the queue's status once it is gone. */
static int track_enter(shmobj_queue *q, shmobj_ref ref)
{
    if (q == NULL || !shmobj__ring_value_ok(ref))
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    if (!shmobj__ring_live(&q->ring))
        return shmobj__queue_op_status(q, SHMOBJ_ESTALE);
    return 0;
}

/* The record of ref that this handle made (after track_enter()'s checks),
 * or SHMOBJ_ENOTFOUND. */
static int track_mine(shmobj_queue *q, shmobj_ref ref, uint32_t *idx)
{
    int rc = track_enter(q, ref);
    if (rc != 0)
        return rc;
    uint32_t me = shmobj__ring_self_token(&q->ring);
    int64_t k = me == 0 ? -1
                        : shmobj__track_find(q->track, q->track_count, ref, me,
                                             q->serial);
    if (k < 0)
        return SHMOBJ_ENOTFOUND;
    *idx = (uint32_t)k;
    return 0;
}

/* The sender is done with record idx, last seen DONE: empty it. */
static void track_drop(shmobj_queue *q, uint32_t idx, uint32_t from)
{
    if (shmobj__track_release(q->track, idx, from))
        atomic_fetch_sub_explicit(&q->tracked, 1, memory_order_relaxed);
}

int shmobj_queue_put_tracked(shmobj_queue *q, shmobj_ref ref,
                             int64_t timeout_ns)
{
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    int rc = track_enter(q, ref);
    if (rc != 0)
        return rc;
    uint32_t me = shmobj__ring_self_token(&q->ring);
    if (me == 0) /* no attachment token: nothing could judge the record */
        return SHMOBJ_ENOTSUP;
    uint32_t idx;
    rc = shmobj__track_add(q->sp, q->track, q->track_count, ref, me,
                               q->serial, &idx);
    if (rc != 0)
        return rc; /* SHMOBJ_EEXIST, SHMOBJ_ETRACKFULL */
    /* visible before the reference can be taken: a consumer's done finds it */
    atomic_store_explicit(&q->track->rec[idx].state, SHMOBJ__TRACK_PENDING,
                          memory_order_release);
    atomic_fetch_add_explicit(&q->tracked, 1, memory_order_relaxed);
    uint64_t at;
    rc = shmobj__queue_put_timed(q, ref, timeout_ns, &at);
    if (rc != 0) /* never in the queue: nobody else saw the record */
        track_drop(q, idx, SHMOBJ__TRACK_PENDING);
    else /* where its wait finds who took it */
        atomic_store_explicit(&q->track->rec[idx].pos, (uint32_t)(at + 1),
                              memory_order_release);
    return rc;
}

int shmobj_queue_done(shmobj_queue *q, shmobj_ref ref)
{
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    int rc = track_enter(q, ref);
    if (rc != 0)
        return rc;
    int64_t k = shmobj__track_find(q->track, q->track_count, ref, 0, 0);
    if (k < 0)
        return SHMOBJ_ENOTFOUND;
    struct shmobj__track_rec *r = &q->track->rec[k];
    uint32_t expect = SHMOBJ__TRACK_PENDING;
    if (atomic_compare_exchange_strong_explicit(&r->state, &expect,
                                                SHMOBJ__TRACK_DONE,
                                                memory_order_seq_cst,
                                                memory_order_acquire)) {
        SHMOBJ__STEP("queue.track.done");
        if (atomic_load_explicit(&r->waiters, memory_order_seq_cst) != 0)
            shmobj__os_futex_wake(&r->state, INT32_MAX);
        return 0;
    }
    /* the sender stopped tracking it: the record is ours to empty */
    if (expect == SHMOBJ__TRACK_ABANDONED &&
        shmobj__track_release(q->track, (uint32_t)k, SHMOBJ__TRACK_ABANDONED))
        return SHMOBJ_ESTALE;
    return expect == SHMOBJ__TRACK_DONE ? SHMOBJ_EINVAL : SHMOBJ_ENOTFOUND;
}

int shmobj_queue_wait_done(shmobj_queue *q, shmobj_ref ref, int64_t timeout_ns)
{
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    uint32_t idx;
    int rc = track_mine(q, ref, &idx);
    if (rc != 0)
        return rc;
    uint32_t s;
    rc = track_wait(q, idx, timeout_ns, shmobj__os_deadline(timeout_ns), &s);
    if (rc != 0)
        return rc;
    if (s != SHMOBJ__TRACK_DONE)
        return SHMOBJ_ENOTFOUND; /* released meanwhile by another thread */
    SHMOBJ__STEP("queue.track.waited");
    track_drop(q, idx, SHMOBJ__TRACK_DONE);
    return 0;
}

int shmobj_queue_untrack(shmobj_queue *q, shmobj_ref ref)
{
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    uint32_t idx;
    int rc = track_mine(q, ref, &idx);
    if (rc != 0)
        return rc;
    struct shmobj__track_rec *r = &q->track->rec[idx];
    uint32_t expect = SHMOBJ__TRACK_PENDING;
    if (atomic_compare_exchange_strong_explicit(&r->state, &expect,
                                                SHMOBJ__TRACK_ABANDONED,
                                                memory_order_acq_rel,
                                                memory_order_acquire)) {
        atomic_fetch_sub_explicit(&q->tracked, 1, memory_order_relaxed);
        return SHMOBJ_EINUSE; /* the consumer's done empties the record */
    }
    if (expect == SHMOBJ__TRACK_DONE) {
        track_drop(q, idx, SHMOBJ__TRACK_DONE);
        return 0;
    }
    return SHMOBJ_ENOTFOUND; /* abandoned already */
}

int shmobj_queue_wait_all(shmobj_queue *q, int64_t timeout_ns)
{
    if (q != NULL && q->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (q == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    if (!shmobj__ring_live(&q->ring))
        return shmobj__queue_op_status(q, SHMOBJ_ESTALE);
    if (atomic_load_explicit(&q->tracked, memory_order_relaxed) == 0)
        return 0;
    uint32_t me = shmobj__ring_self_token(&q->ring);
    uint64_t deadline = shmobj__os_deadline(timeout_ns);
    int rc = 0, peer = 0;
    for (uint32_t i = 0; i < q->track_count; i++) {
        struct shmobj__track_rec *r = &q->track->rec[i];
        uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
        if ((s != SHMOBJ__TRACK_PENDING && s != SHMOBJ__TRACK_DONE) ||
            atomic_load_explicit(&r->token, memory_order_relaxed) != me ||
            atomic_load_explicit(&r->handle, memory_order_relaxed) != q->serial)
            continue;
        if (rc == 0) {
            int w = track_wait(q, i, timeout_ns, deadline, &s);
            if (w == SHMOBJ_EPEERDEAD)
                peer = w; /* released; wait for the others all the same */
            else if (w != 0)
                rc = w; /* keep releasing what is done already */
        }
        if (s == SHMOBJ__TRACK_DONE)
            track_drop(q, i, SHMOBJ__TRACK_DONE);
        else if (rc == 0 && s == SHMOBJ__TRACK_PENDING)
            rc = SHMOBJ_ETIMEDOUT;
    }
    if (rc == 0)
        rc = peer;
    return rc == SHMOBJ_ESTALE ? shmobj__queue_op_status(q, rc) : rc;
}

/* Untrack what this handle still tracks (see shmobj_queue_close()). Only
 * in the process that made the records: a forked child's copy of the
 * handle names no record of its own. */
void shmobj__queue_track_drop_all(shmobj_queue *q)
{
    if (atomic_load_explicit(&q->tracked, memory_order_relaxed) == 0 ||
        atomic_load_explicit(&q->ring.self_forks, memory_order_acquire) !=
            (uint64_t)shmobj__os_forks_seen() + 1 ||
        !shmobj__ring_live(&q->ring))
        return;
    uint32_t me = atomic_load_explicit(&q->ring.self_token, memory_order_relaxed);
    for (uint32_t i = 0; i < q->track_count; i++) {
        struct shmobj__track_rec *r = &q->track->rec[i];
        uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
        if ((s != SHMOBJ__TRACK_PENDING && s != SHMOBJ__TRACK_DONE) ||
            atomic_load_explicit(&r->token, memory_order_relaxed) != me ||
            atomic_load_explicit(&r->handle, memory_order_relaxed) != q->serial)
            continue;
        if (s == SHMOBJ__TRACK_DONE ||
            !atomic_compare_exchange_strong_explicit(&r->state, &s,
                                                     SHMOBJ__TRACK_ABANDONED,
                                                     memory_order_acq_rel,
                                                     memory_order_acquire))
            /* done (also just now, when the CAS lost to the consumer) */
            (void)shmobj__track_release(q->track, i, SHMOBJ__TRACK_DONE);
    }
}
