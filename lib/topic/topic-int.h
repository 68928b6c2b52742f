/* A topic's shared bytes, its handles, and what the topic's sources share.
 * The format and the protocols are described in doc/format-topic.md.
 *
 *   topic.c       create, open, close, destroy; validation; the lock,
 *                 reclaim and repair
 *   topic-pub.c   loans and publishing
 *   topic-sub.c   join, leave, take, release, the pollable descriptor
 *
 * One heap block, 64-byte aligned, holds (each part on its own lines):
 *   the header (3 cache lines + the lock's line)
 *   the ring: capacity slots of 32 bytes
 *   the subscriber records: subscribers x 64 bytes
 *   the loan records: SHMOBJ_TOPIC_LOANS_MAX x 16 bytes, then
 *   SHMOBJ__TOPIC_SPARES records of blocks kept for reuse (token 0 and a
 *   reference: the topic's; claimed by a loan with a CAS of the token)
 *
 * Sequences: message n (0, 1, ...) lives in slot n & (capacity - 1).
 * head is the next sequence to publish, tail the oldest message whose block
 * is still kept: tail <= head, head - tail <= capacity. A subscriber record
 * keeps next (its next message to take) and held (the oldest it has not
 * released): tail <= held <= next <= head while it is in use. */
#ifndef SHMOBJ_TOPIC_INT_H
#define SHMOBJ_TOPIC_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "os.h"
#include "shmobj/segment.h"
#include "shmobj/topic.h"
#include "space.h"

#define SHMOBJ__TOPIC_MAGIC UINT32_C(0x43504f54) /* "TOPC" */
#define SHMOBJ__TOPIC_VERSION UINT32_C(2)
/* Message blocks a reclaim keeps for the next loans instead of freeing. */
#define SHMOBJ__TOPIC_SPARES 16u
#define SHMOBJ__TOPIC_LOANRECS (SHMOBJ_TOPIC_LOANS_MAX + SHMOBJ__TOPIC_SPARES)

struct shmobj__topic_hdr {
    /* line 0: written at creation only (ident: and cleared by destroy) */
    uint32_t magic;
    uint32_t version;
    _Atomic uint64_t ident; /* non-zero while the topic lives */
    uint32_t capacity;
    uint32_t history;
    uint32_t subs_max;
    uint32_t policy;
    uint64_t lock_format;
    uint64_t bytes; /* the block's footprint */
    uint8_t pad0[64 - 48];
    /* line 1: the lock of publishing, joining, leaving, reclaim, repair */
    shmobj__os_lock lock;
    /* line 2: the publishers' side */
    _Atomic uint64_t head;
    _Atomic uint64_t tail;
    _Atomic uint32_t pub_event;   /* bumped when a publish may wake takers */
    _Atomic uint32_t sub_waiters; /* takers asleep on pub_event */
    _Atomic uint32_t armed;       /* subscriber descriptors armed */
    _Atomic uint32_t sub_hwm;     /* records [0, sub_hwm) were ever used */
    _Atomic uint64_t missed;      /* messages skipped (overwrite), total */
    _Atomic uint32_t sleepy;      /* a taker is about to sleep: set by it,
                                     cleared by the publisher that wakes */
    uint8_t pad2[64 - 44];
    /* line 3: the subscribers' side */
    _Atomic uint32_t rel_event;   /* bumped by releases publishers wait for */
    _Atomic uint32_t pub_waiters; /* publishers asleep on rel_event */
    uint8_t pad3[64 - 8];
};
_Static_assert(sizeof(struct shmobj__topic_hdr) == 256, "topic header");

struct shmobj__topic_slot {
    _Atomic uint64_t seq;  /* the sequence the slot holds (+1; 0: never) */
    _Atomic uint64_t ref;  /* the message block */
    _Atomic uint64_t len;  /* its length */
    _Atomic uint64_t kind; /* TOPIC_KIND_* */
};

/* What a slot's block is: a loan of this topic, whose first
 * SHMOBJ__TOPIC_MSG_HEADER bytes are a struct shmobj__topic_msghdr and
 * whose data follows; or any heap block handed over by reference, the
 * data at its start. */
enum { TOPIC_KIND_LOAN = 0, TOPIC_KIND_BLOCK = 1 };
#define SHMOBJ__TOPIC_MSG_HEADER 64u
struct shmobj__topic_msghdr {
    uint64_t stamp; /* shmobj__topic_stamp() of the topic that lent it */
    uint64_t size;  /* bytes of data the loan asked for */
    uint64_t cap;   /* the block's usable bytes, header included */
};
static inline uint64_t shmobj__topic_stamp(uint64_t ident)
{
    return ident ^ UINT64_C(0x544f5049434d5347); /* "TOPICMSG" */
}

enum { TOPIC_NOTIFY_NONE = 0, TOPIC_NOTIFY_IDLE = 1, TOPIC_NOTIFY_ARMED = 2 };

struct shmobj__topic_subrec {
    _Atomic uint64_t token;  /* the subscriber's handle token; 0: free */
    _Atomic uint64_t next;   /* next sequence to take */
    _Atomic uint64_t held;   /* oldest sequence not released */
    _Atomic uint64_t serial; /* names the join (a stale handle sees another) */
    _Atomic uint32_t notify; /* TOPIC_NOTIFY_* */
    _Atomic int32_t nfd;     /* the descriptor's read end in its process */
    _Atomic uint32_t npid;
    uint32_t pad0;
    _Atomic uint64_t nino;
    _Atomic uint64_t missed; /* messages this subscriber lost */
};
_Static_assert(sizeof(struct shmobj__topic_subrec) == 64, "topic record");

struct shmobj__topic_loanrec {
    _Atomic uint64_t token; /* 0: free */
    _Atomic uint64_t ref;   /* the block lent (0 while being allocated) */
};

struct shmobj_topic {
    struct shmobj__space *sp;
    shmobj_segment *seg;
    shmobj_ref ref;
    uint64_t ident;
    struct shmobj__topic_hdr *hdr;
    struct shmobj__topic_slot *slots;
    struct shmobj__topic_subrec *subs;
    struct shmobj__topic_loanrec *loans;
    uint32_t capacity, history, subs_max, policy;
    _Atomic uint64_t serials; /* joins of this handle */
    _Atomic uint32_t holds;   /* the handle's own (until its close) and one
                                 per subscription made through it: the last
                                 release frees it and releases its hold on
                                 the segment's space */
    uint64_t stall_ns;        /* a live subscriber this long behind is
                                 judged (liveness) by a waiting publisher */
    _Atomic uint32_t spare_at; /* the spare record this handle last filled
                                  or took: where its next look starts */
};

/* Spare record k of SHMOBJ__TOPIC_SPARES, counted from where this
 * handle's last look at the spares ended. */
static inline struct shmobj__topic_loanrec *shmobj__topic_spare(shmobj_topic *t, uint32_t k,
                                                                uint32_t *index)
{
    uint32_t at = atomic_load_explicit(&t->spare_at, memory_order_relaxed);
    *index = SHMOBJ_TOPIC_LOANS_MAX + (at + k) % SHMOBJ__TOPIC_SPARES;
    return &t->loans[*index];
}

/* Where the next look at the spares starts. */
static inline void shmobj__topic_spare_seen(shmobj_topic *t, uint32_t index)
{
    atomic_store_explicit(&t->spare_at, index - SHMOBJ_TOPIC_LOANS_MAX, memory_order_relaxed);
}

struct shmobj_topic_sub {
    shmobj_topic *t;
    struct shmobj__topic_subrec *rec;
    uint64_t serial;
    uint64_t next;    /* what this handle last saw of rec->next */
    uint64_t held;    /* what this handle last stored in rec->held */
    uint64_t taken;   /* messages taken and not released */
    uint64_t missed_pending; /* lost, to be told with the next message */
    int64_t spin_ns;  /* spin before sleeping in a blocking take */
    int nrfd, nwfd;   /* the pollable descriptor, or -1 */
};

/* Bytes of a topic's block for a valid configuration, else 0. */
uint64_t shmobj__topic_footprint(uint32_t capacity, uint32_t subs);

/* 0 while the topic of t lives, SHMOBJ_ESTALE once destroyed. */
static inline int shmobj__topic_live(shmobj_topic *t)
{
    return atomic_load_explicit(&t->hdr->ident, memory_order_relaxed) == t->ident
               ? 0
               : SHMOBJ_ESTALE;
}

/* At the entry of every call through a handle: the topic still there and
 * its segment handle not closed (handles outlive their segment, and answer
 * SHMOBJ_ESTALE from its close on, as maps and queues do). */
static inline int shmobj__topic_usable(shmobj_topic *t)
{
    return shmobj__space_closed(t->sp) ? SHMOBJ_ESTALE : shmobj__topic_live(t);
}

/* Drop one hold of a topic handle (topic.c). */
void shmobj__topic_release(shmobj_topic *t);

/* Take the topic's lock (deadline 0: the default bound); a dead owner's
 * half-done work is repaired before it returns 0. */
int shmobj__topic_lock(shmobj_topic *t, uint64_t deadline);
void shmobj__topic_unlock(shmobj_topic *t);

/* Under the lock: free the blocks of messages every subscriber released
 * that left the history; 0 or a negative code. With `for_loans`, the walk
 * stops once the spare records are full and it gave at least one block to
 * them: the rest stay in the ring, to be spares for later loans, and a
 * publisher that sends messages of one size then allocates nothing (and
 * reads the subscribers' records once per batch of spares, not per
 * message). */
int shmobj__topic_reclaim(shmobj_topic *t, bool for_loans);

/* Under the lock: free the records of dead subscribers (those that hold
 * sequences below `below`, or all when below is UINT64_MAX) and the loans
 * of dead publishers; how many in *freed. */
int shmobj__topic_repair_locked(shmobj_topic *t, uint64_t below,
                                unsigned *freed);

/* A record's index, checked. */
static inline bool shmobj__topic_hwm(shmobj_topic *t, uint32_t *hwm)
{
    uint32_t h = atomic_load_explicit(&t->hdr->sub_hwm, memory_order_acquire);
    *hwm = h;
    return h <= t->subs_max;
}

/* Wake publishers waiting for releases (topic-sub.c after a release). */
void shmobj__topic_wake_publishers(shmobj_topic *t);
/* Signal the armed descriptors (topic-pub.c after a publish). */
void shmobj__topic_notify_fire(shmobj_topic *t);

/* Tests: shorten the time a publisher waits before judging a subscriber. */
void shmobj__topic_stall_set(shmobj_topic *t, uint64_t ns);

#endif /* SHMOBJ_TOPIC_INT_H */
