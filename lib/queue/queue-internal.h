/* The queue handle, what the queue's sources share, and internals the
 * tests reach. The shared bytes are described in ring.h, retire.h and
 * track.h; each source keeps one job:
 *
 *   queue.c          create, open, close, destroy; the block's layout and
 *                    the handle; whether a queue went away
 *   queue-io.c       put, take and peek, their waits and batches (the hot
 *                    paths)
 *   queue-msg.c      message blocks and their completion, the retire path,
 *                    put_copy's copy-in
 *   queue-notify.c   the pollable descriptor and the producers' peer pipes
 *   queue-tracked.c  the calls for tracked references (over track.c)
 *   queue-stats.c    figures and a consistency check, for tools
 *   queue-wait.c     the bounded wait on a completion word (a message's
 *                    state, a tracked reference's record)
 *   ring.c, retire.c, track.c: the ring, the retire FIFO, the records
 *                    (the ring's own sources share ring-int.h: ring.c,
 *                    ring-claim.c, ring-sleep.c)
 *
 * What the put and take paths call across files is out of line here and
 * was out of line before (the failure status, a listener's wake-up). */
#ifndef SHMOBJ_QUEUE_INTERNAL_H
#define SHMOBJ_QUEUE_INTERNAL_H

#include <stdatomic.h>

#include "os.h"
#include "retire.h"
#include "ring.h"
#include "shmobj/queue.h"
#include "space.h"
#include "track.h"

/* A producer's cached write end of one listener's pipe (notify entry i). */
struct shmobj__queue_peer {
    uint32_t pid;
    int32_t fd;
    uint64_t ino;
    int wfd; /* -1 when not open */
};

struct shmobj_queue {
    struct shmobj__space *sp; /* the segment, as seen by the layers above */
    shmobj_segment *seg;
    struct shmobj__ring ring; /* validated view of the shared ring */
    shmobj_ref ref;           /* the ring's block */
    struct shmobj__retire *retire; /* in the same block, behind the ring */
    /* completion records of tracked references (track.h), behind the
     * FIFO; track_count validated at open */
    struct shmobj__track *track;
    uint32_t track_count;
    uint32_t serial; /* this handle's name in the records it makes */
    _Atomic uint64_t tracked; /* records this handle holds (a hint) */
    _Atomic int64_t spin_ns;  /* see shmobj_queue_spin_set() */
    /* message blocks retired (retire.h) from retire_min to below
     * retire_max bytes, retire_budget bytes of them kept */
    uint64_t retire_min, retire_max, retire_budget;
    /* message allocations reuse a retired block once this many bytes were
     * retired after it (shmobj__retire_pop(); UINT64_MAX: never); tests
     * make the reuse stay recycle_hold_ns inside the FIFO's lock */
    uint64_t recycle_cold, recycle_hold_ns;
    /* or this many, when more, for a copy-in's block of a size of which
     * the FIFO can keep that many bytes after one, the block and three
     * more (queue.c) */
    uint64_t recycle_far;
    /* tests: a retiring done stays retire_hold_ns inside the FIFO's lock
     * between its CAS and the count */
    uint64_t retire_hold_ns;
    /* copy-in: larger messages are written with streaming stores, the
     * others with memcpy (queue-msg.c, copy_in()) */
    uint64_t plain_max;
    /* guards the notify fields and peers (slow path only) */
    shmobj__os_pmutex lock;
    int notify_slot; /* our registration in ring.hdr->notify, or -1 */
    int notify_rfd;  /* our pipe, or -1 */
    int notify_wfd;
    struct shmobj__queue_peer peers[SHMOBJ__RING_NOTIFY_MAX];
};

/* Shorten the stall period (tests of dead producers and consumers). */
void shmobj__queue_stall_set(shmobj_queue *q, uint64_t ns);
/* Make this handle's takes stay `ns` between claim and release (kill tests
 * aim there). */
void shmobj__queue_take_hold_set(shmobj_queue *q, uint64_t ns);
/* Make this handle's next batch put stay `ns` between its claim and its
 * first claim record, once (tests of a batch skipped while stalled). */
void shmobj__queue_put_hold_set(shmobj_queue *q, uint64_t ns);
/* Make this handle's reuses of retired blocks stay `ns` inside the FIFO's
 * lock after the block left it (kill tests aim there). */
void shmobj__queue_recycle_hold_set(shmobj_queue *q, uint64_t ns);
/* Make this handle's retiring dones stay `ns` inside the FIFO's lock after
 * the block's state said given back, before the FIFO counts it. */
void shmobj__queue_retire_hold_set(shmobj_queue *q, uint64_t ns);
struct shmobj__ring *shmobj__queue_ring(shmobj_queue *q);
struct shmobj__retire *shmobj__queue_retire(shmobj_queue *q);

/* Between the queue's sources. */

/* queue.c: 0 while the queue of q exists, else SHMOBJ_ESTALE (destroyed,
 * re-created or its block freed) or SHMOBJ_ECORRUPT; judged the slow way. */
int shmobj__queue_gone(shmobj_queue *q);
/* queue.c: the status of a ring operation that failed with rc: that of a
 * queue gone, else rc. */
__attribute__((cold)) int shmobj__queue_op_status(shmobj_queue *q, int rc);
/* queue-io.c: put ref, waiting up to timeout_ns for room (0: try once);
 * the ring position it was published at in *at. */
int shmobj__queue_put_timed(shmobj_queue *q, shmobj_ref ref, int64_t timeout_ns,
                            uint64_t *at);
/* queue-msg.c: give every retired message block back to the heap; how
 * many there were in *n. */
int shmobj__queue_retire_drain(shmobj_queue *q, unsigned *n);
/* queue-notify.c: wake every armed listener (one write each per arm). */
void shmobj__queue_notify_fire(shmobj_queue *q);
/* queue-notify.c: unlink the FIFOs of registered listeners that died
 * (a destroy: nobody reclaims their entries any more). */
void shmobj__queue_notify_forget_dead(shmobj_queue *q);
/* queue-notify.c: give up the handle's registration (unless the queue is
 * gone) and close its pipe and its peers' write ends. */
void shmobj__queue_notify_drop(shmobj_queue *q);
/* queue-tracked.c: untrack what the handle still tracks (at close). */
void shmobj__queue_track_drop_all(shmobj_queue *q);
/* queue-wait.c: wait (the handle's spin, then a futex, in wait slices)
 * while *word is `pending`, counted in *waiters while asleep, up to the
 * absolute deadline (timeout_ns 0: do not wait). pos1, when not NULL,
 * holds the ring position + 1 (mod 2^32, 0 unknown) of what the wait is
 * for; when it is 0 and ref is not, the wait looks for ref in the ring
 * and keeps the position it finds there. ring, when not NULL, holds the
 * low 32 bits of the identity of the ring *pos1 is a position of. 0 with the word seen in *seen, else SHMOBJ_ETIMEDOUT,
 * SHMOBJ_EREPLACED (the segment was removed or replaced under its name:
 * at the deadline or after a slice), SHMOBJ_EPEERDEAD (the consumer that
 * took it died; the word still `pending`, in *seen), or SHMOBJ_ESTALE
 * when in_ring (the word is in the queue's block) and the queue was
 * destroyed. */
int shmobj__queue_wait_while(shmobj_queue *q, _Atomic uint32_t *word,
                             _Atomic uint32_t *waiters, uint32_t pending,
                             bool in_ring, int64_t timeout_ns,
                             uint64_t deadline, _Atomic uint32_t *pos1,
                             _Atomic uint32_t *ring, uint64_t ref,
                             uint32_t *seen);

#endif /* SHMOBJ_QUEUE_INTERNAL_H */
