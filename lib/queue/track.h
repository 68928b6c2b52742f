/* Completion records of tracked references: a table, one per queue, in the
 * queue's block behind the retire FIFO (format-queue.md, "Completion
 * records").
 *
 * Why: any reference (an object, a raw block) may travel with completion
 * back to its sender without an envelope around it. The sender records the
 * reference here before it puts it (shmobj_queue_put_tracked()); the
 * consumer's shmobj_queue_done() finds the record by the reference alone
 * (probing from a hash of it, as far as the table's reach says) and marks
 * it done; the sender's wait sleeps on the record's state.
 *
 * A reference may live in any record of the table (version 2; version 1
 * kept it within 16 records of its home, so a put failed with most of the
 * table free): every record the documentation promises can be used. The
 * header's `reach` says how far from its home any record was ever placed,
 * so that a look-up probes only that far, not the whole table.
 *
 * A record belongs to the handle that made it (attachment token and a
 * serial of the queue handle). Records of a dead sender are reclaimed by
 * the next tracked put that finds no free record. */
#ifndef SHMOBJ_QUEUE_TRACK_H
#define SHMOBJ_QUEUE_TRACK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "space.h"

#define SHMOBJ__TRACK_MAGIC 0x4b525451u /* "QTRK" little-endian */
#define SHMOBJ__TRACK_VERSION 2u
#define SHMOBJ__TRACK_MIN 64u     /* records, at least */
#define SHMOBJ__TRACK_MAX 8192u   /* records, at most */
/* records a look-up probes at least (the reach of a new table) */
#define SHMOBJ__TRACK_REACH_MIN 16u

enum {
    SHMOBJ__TRACK_FREE = 0,      /* unused */
    SHMOBJ__TRACK_BUSY = 1,      /* being filled or emptied by one party */
    SHMOBJ__TRACK_PENDING = 2,   /* put, not done yet */
    SHMOBJ__TRACK_DONE = 3,      /* the consumer is done; the sender's now */
    SHMOBJ__TRACK_ABANDONED = 4  /* the sender stopped tracking it first */
};

/* One tracked reference (32 bytes). */
struct shmobj__track_rec {
    /* the reference tracked; written by the sender in BUSY, read by the
     * consumer after an acquire load of state */
    _Atomic uint64_t ref;
    /* SHMOBJ__TRACK_*: FREE -> BUSY by CAS (sender, or anyone reclaiming a
     * dead sender's record), BUSY -> PENDING (release) by the sender,
     * PENDING -> DONE (consumer, CAS, seq_cst: paired with waiters),
     * PENDING -> ABANDONED (sender, CAS), DONE -> BUSY (sender releasing),
     * ABANDONED -> BUSY (consumer releasing), BUSY -> FREE (release). Also
     * the futex word the sender sleeps on. */
    _Atomic uint32_t state;
    /* senders sleeping (or about to) on state; seq_cst */
    _Atomic uint32_t waiters;
    /* attachment token of the sender's segment handle (its liveness),
     * written in BUSY */
    _Atomic uint64_t token;
    /* serial of the sender's queue handle (tells the handles of one
     * process apart for shmobj_queue_wait_all()), written in BUSY */
    _Atomic uint32_t handle;
    /* the ring position the reference was published at, + 1, modulo
     * 2^32 (0: not known), written by the sender after its put; its wait
     * finds there who took it (the slot's claim record) */
    _Atomic uint32_t pos;
};
_Static_assert(sizeof(struct shmobj__track_rec) == 32, "track record");
_Static_assert(offsetof(struct shmobj__track_rec, ref) == 0, "track ref");
_Static_assert(offsetof(struct shmobj__track_rec, state) == 8, "track state");
_Static_assert(offsetof(struct shmobj__track_rec, waiters) == 12, "track waiters");
_Static_assert(offsetof(struct shmobj__track_rec, token) == 16, "track token");
_Static_assert(offsetof(struct shmobj__track_rec, handle) == 24, "track handle");
_Static_assert(offsetof(struct shmobj__track_rec, pos) == 28, "track pos");

/* The table: a 64-byte header written once by the creator, then records. */
struct shmobj__track {
    uint32_t magic;     /* SHMOBJ__TRACK_MAGIC */
    uint32_t version;   /* SHMOBJ__TRACK_VERSION */
    uint32_t count;     /* records, a power of two in [TRACK_MIN, TRACK_MAX] */
    uint32_t window;    /* records a reference may live in: count */
    /* how far from its home (records, the home itself counted) a record
     * was ever placed: at least SHMOBJ__TRACK_REACH_MIN, only grows (CAS),
     * at most count; raised before the record is published */
    _Atomic uint32_t reach;
    uint32_t reserved32;  /* zero */
    uint64_t reserved[5]; /* zero */
    struct shmobj__track_rec rec[]; /* count records */
};
_Static_assert(offsetof(struct shmobj__track, magic) == 0, "track magic");
_Static_assert(offsetof(struct shmobj__track, version) == 4, "track version");
_Static_assert(offsetof(struct shmobj__track, count) == 8, "track count");
_Static_assert(offsetof(struct shmobj__track, window) == 12, "track window");
_Static_assert(offsetof(struct shmobj__track, reach) == 16, "track reach");
_Static_assert(offsetof(struct shmobj__track, rec) == 64, "track records");

/* Records of a queue of `capacity` slots: twice the capacity (a consumer
 * may hold taken references as long as it likes), within [MIN, MAX]. */
uint32_t shmobj__track_count(uint32_t capacity);

/* Bytes of a table of `count` records. */
static inline uint64_t shmobj__track_bytes(uint32_t count)
{
    return sizeof(struct shmobj__track) +
           (uint64_t)count * sizeof(struct shmobj__track_rec);
}

void shmobj__track_init(struct shmobj__track *t, uint32_t count);

/* 0 when the header is the one a queue of `capacity` has, else
 * SHMOBJ_ECORRUPT. */
int shmobj__track_check(const struct shmobj__track *t, uint32_t capacity);

/* Record ref as tracked by (token, handle): its index in *idx. SHMOBJ_EEXIST
 * when ref is tracked already (not yet released), SHMOBJ_ETRACKFULL when
 * the table holds no free record (after reclaiming those of dead
 * senders). */
int shmobj__track_add(struct shmobj__space *sp, struct shmobj__track *t,
                      uint32_t count, uint64_t ref, uint32_t token,
                      uint32_t handle, uint32_t *idx);

/* Empty record idx that the caller holds in state `from` (BUSY, PENDING
 * never seen by anyone, DONE or ABANDONED): true when this call emptied it. */
bool shmobj__track_release(struct shmobj__track *t, uint32_t idx,
                           uint32_t from);

/* The record of ref in a live state (PENDING, DONE, ABANDONED), or -1. When
 * token is non-zero, only a record of that sender (token, handle). */
int64_t shmobj__track_find(struct shmobj__track *t, uint32_t count,
                           uint64_t ref, uint32_t token, uint32_t handle);

#endif /* SHMOBJ_QUEUE_TRACK_H */
