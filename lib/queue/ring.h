/* The bounded multi-producer / multi-consumer ring behind every queue.
 *
 * It lives in memory the caller gives (an arena block of a segment, or a
 * MAP_SHARED mapping in tests), holds only 64-bit words and positions, and
 * never follows a pointer read from that memory: a slot index is always
 * `position & mask`, with the mask taken from the process-local view that
 * shmobj__ring_attach() validated once.
 *
 * Slot words (one 64-bit word carries both the message and its state, so
 * every hand-over is a single CAS and a process that died or stalled can
 * never scribble over a later lap):
 *
 *   EMPTY(p)   = (p << 2) | 1   free, waiting for the producer of position p
 *   SKIPPED(p) = (p << 2) | 3   the producer of p died (or stalled) before
 *                               publishing; consumers step over it
 *   value      = ref | (lap(p) & 7) << 1   a message published at p; refs
 *                               have their low 4 bits clear (16-byte aligned
 *                               offsets), bit 0 tells values from markers
 *
 * A producer claims position e with a CAS on enq_pos, records itself as the
 * claimant in the slot's claim word, and publishes with CAS(word, EMPTY(e),
 * value). A consumer claims position d with a CAS on deq_pos once the word
 * holds a value or SKIPPED(d), records itself in the same claim word, and
 * releases the slot with CAS(word, seen, EMPTY(d + capacity)). Because
 * both hand-overs are CASes on
 * lap-tagged words, a third process may resolve a stuck slot (mark it
 * SKIPPED, or release it for the next lap) without ever racing the stuck
 * process into a lost or duplicated message: whoever comes second fails its
 * CAS. A producer whose slot was skipped simply claims a new position, so
 * its message is not lost and its own order is kept. */
#ifndef SHMOBJ_QUEUE_RING_H
#define SHMOBJ_QUEUE_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "space.h"

#define SHMOBJ__RING_MAGIC 0x474e5251u /* "QRNG" little-endian */
/* 3: the queue block carries a retire FIFO behind the ring (retire.h);
 * 4: line 0 carries the block's identity (hdr.ident); 5: attachment
 * tokens in records; 6: completion records behind the FIFO (track.h);
 * 7: the claim record in its slot, one word for both roles (no claim
 * arrays); 8: completion records anywhere in their table (track.h
 * version 2), each with the position it was published at */
#define SHMOBJ__RING_VERSION 8u
#define SHMOBJ__RING_CAP_MIN 2u
#define SHMOBJ__RING_CAP_MAX (1u << 24)
#define SHMOBJ__RING_NOTIFY_MAX 8

/* One consumer's registration for a pollable descriptor (32 bytes). */
enum {
    SHMOBJ__NOTIFY_FREE = 0,  /* unused */
    SHMOBJ__NOTIFY_BUSY = 1,  /* being written by its registering process */
    SHMOBJ__NOTIFY_IDLE = 2,  /* registered, not waiting */
    SHMOBJ__NOTIFY_ARMED = 3  /* waiting: the next put writes to its pipe */
};
struct shmobj__ring_notify {
    /* SHMOBJ__NOTIFY_*; FREE->BUSY by CAS (registering consumer), BUSY->IDLE
     * and IDLE->ARMED by the owner (seq_cst, see hdr.armed), ARMED->IDLE by
     * CAS of the producer that signals; anyone may CAS a dead owner's entry
     * back to FREE. */
    _Atomic uint32_t state;
    /* pid of the owner, as its namespace numbers it: the /proc path of its
     * pipe; written in BUSY, read-only afterwards */
    _Atomic uint32_t pid;
    /* attachment token of the owner's segment handle (format.md): its
     * liveness; written in BUSY, read-only afterwards */
    _Atomic uint64_t token;
    /* inode number of the owner's pipe: a producer that opens
     * /proc/<pid>/fd/<fd> writes only if this matches */
    _Atomic uint64_t ino;
    /* descriptor number of the pipe's read end in the owner */
    _Atomic int32_t fd;
    uint32_t reserved; /* zero */
};
_Static_assert(sizeof(struct shmobj__ring_notify) == 32, "notify layout");
_Static_assert(offsetof(struct shmobj__ring_notify, state) == 0, "notify state");
_Static_assert(offsetof(struct shmobj__ring_notify, pid) == 4, "notify pid");
_Static_assert(offsetof(struct shmobj__ring_notify, token) == 8, "notify token");
_Static_assert(offsetof(struct shmobj__ring_notify, ino) == 16, "notify ino");
_Static_assert(offsetof(struct shmobj__ring_notify, fd) == 24, "notify fd");

/* A process with threads asleep on the ring (32 bytes): how many of them
 * are counted in cons_waiters and prod_waiters. A process killed while
 * asleep leaves its count in those totals, and then every put (or take)
 * would pay a futex wake for nobody; a waker whose wakes keep waking
 * nobody finds such a record, sees its owner dead, and takes its count back
 * (shmobj__ring_sleepers_repair()). A sleeper adds to the total before its
 * record and takes from its record before the total, so a record never
 * holds more than its process contributes: taking it back can never
 * hide a live sleeper. */
#define SHMOBJ__RING_SLEEPERS 8
#define SHMOBJ__RING_SLEEPER_BUSY UINT64_MAX /* owner: being claimed or repaired */
struct shmobj__ring_sleeper {
    /* attachment token of the owning segment handle (format.md); 0 free;
     * SHMOBJ__RING_SLEEPER_BUSY while a handle claims it (CAS from 0) or a
     * waker repairs it (CAS from a dead owner) */
    _Atomic uint64_t owner;
    /* the owner's token again, written before owner; 0 while claimed */
    _Atomic uint64_t token;
    /* [0] its consumers counted in cons_waiters, [1] its producers counted
     * in prod_waiters */
    _Atomic uint32_t count[2];
    uint64_t reserved; /* zero */
};
_Static_assert(sizeof(struct shmobj__ring_sleeper) == 32, "sleeper layout");
_Static_assert(offsetof(struct shmobj__ring_sleeper, owner) == 0, "sleeper owner");
_Static_assert(offsetof(struct shmobj__ring_sleeper, token) == 8, "sleeper token");
_Static_assert(offsetof(struct shmobj__ring_sleeper, count) == 16, "sleeper counts");

/* A slot: its word (see above) and its claim record, four to a cache line:
 * a consumer behind a full queue reads four messages per line it pulls,
 * while a producer and a consumer working on neighbouring positions share
 * a line with only three others. Its line is the only one of the ring
 * either side writes per message besides its own position, and the only
 * one both sides write: the claim record rides on the line the hand-over
 * moves anyway.
 *
 * The claim record says who claimed the slot's position last, producer or
 * consumer (their claims of one slot come in turn: the producer of p, the
 * consumer of p, the producer of p + capacity, ...):
 *
 *   claim = (lap(p) mod 2^32) << 32 | role << 31 | token
 *
 * with lap(p) = p >> cap_log2, role 0 for a producer and 1 for a consumer,
 * and token the attachment token (format.md; 31 bits, 0: unknown) of the
 * claimant's segment handle. One word, written with one store: a reader
 * gets the lap, the role and the token of one claimant, never a mix. */
struct shmobj__ring_slot {
    /* value or marker; every change is a CAS (seq_cst) except the initial
     * EMPTY(i) written by init and the hand-over of the slots after the
     * first of a batch's run (release stores, then a fence: ring.c) */
    _Atomic uint64_t word;
    /* the claim record (above); 0 at init (no claimant: token 0). Written
     * (relaxed) by the winner of the claiming CAS on enq_pos / deq_pos
     * before it hands the slot over (the hand-over's release orders it);
     * read by the other side only when judging a stuck slot (ring-claim.c) */
    _Atomic uint64_t claim;
};
_Static_assert(sizeof(struct shmobj__ring_slot) == 16, "slot layout");
_Static_assert(offsetof(struct shmobj__ring_slot, word) == 0, "slot word");
_Static_assert(offsetof(struct shmobj__ring_slot, claim) == 8, "slot claim");

#define SHMOBJ__RING_ROLE_PRODUCER 0u
#define SHMOBJ__RING_ROLE_CONSUMER 1u
/* The token bits of a claim record (and the mask a token is kept to). */
#define SHMOBJ__RING_CLAIM_TOKEN 0x7fffffffu

/* The ring header (896 bytes), followed by `capacity` slots. Lines
 * written by different parties at high rates are kept apart. */
struct shmobj__ring_hdr {
    /* --- line 0: immutable after init (written once by the creator) --- */
    uint32_t magic;     /* SHMOBJ__RING_MAGIC */
    uint32_t version;   /* SHMOBJ__RING_VERSION */
    uint32_t capacity;  /* slots, a power of two in [CAP_MIN, CAP_MAX] */
    uint32_t cap_log2;  /* log2(capacity) */
    uint32_t slot_size; /* sizeof(struct shmobj__ring_slot): 16 */
    uint32_t hdr_size;  /* sizeof(struct shmobj__ring_hdr) */
    uint32_t flags;     /* creation flags (none defined yet: 0) */
    uint32_t reserved0; /* zero */
    /* a non-zero identity the creator chose, unique to this ring (the
     * queue mixes its block's reference, the time and the pid); written by
     * the creator before the magic, set to 0 (relaxed) by the queue's
     * destroy before the block is freed, never written otherwise. Every operation of a
     * view compares it with the view's copy before it writes anything: a
     * view whose ring was destroyed fails with SHMOBJ_ESTALE. The line is
     * otherwise read-only, so the compare hits this core's cache. */
    _Atomic uint64_t ident;
    uint8_t pad0[24];
    /* --- line 1: producers --- */
    /* next position a producer claims; only grows (CAS, relaxed: the slot
     * word carries the ordering) */
    _Atomic uint64_t enq_pos;
    uint8_t pad1[56];
    /* --- line 2: consumers --- */
    /* next position a consumer claims; only grows, never passes enq_pos */
    _Atomic uint64_t deq_pos;
    uint8_t pad2[56];
    /* --- line 3: read by every producer per put, written when a consumer
     * goes to sleep --- */
    /* consumers (take or peek) sleeping or about to sleep on put_event;
     * seq_cst on both sides (Dekker with the publishing CAS) */
    _Atomic uint32_t cons_waiters;
    /* futex word: bumped after a publish when cons_waiters > 0 */
    _Atomic uint32_t put_event;
    /* number of notify entries in state ARMED (seq_cst, as cons_waiters) */
    _Atomic uint32_t armed;
    uint32_t reserved3;
    uint8_t pad3[48];
    /* --- line 4: read by every consumer per take --- */
    /* producers sleeping or about to sleep on take_event */
    _Atomic uint32_t prod_waiters;
    /* futex word: bumped after a release when prod_waiters > 0 */
    _Atomic uint32_t take_event;
    uint8_t pad4[56];
    /* --- line 5: statistics (rare writes) --- */
    /* slots whose producer died or stalled and that consumers skipped */
    _Atomic uint64_t skipped;
    /* slots released on behalf of a consumer that died holding them */
    _Atomic uint64_t rescued;
    uint8_t pad5[48];
    /* --- lines 6..9: pollable-descriptor registrations --- */
    struct shmobj__ring_notify notify[SHMOBJ__RING_NOTIFY_MAX];
    /* --- lines 10..13: processes with sleepers --- */
    struct shmobj__ring_sleeper sleepers[SHMOBJ__RING_SLEEPERS];
};
_Static_assert(sizeof(struct shmobj__ring_hdr) == 896, "ring header layout");
_Static_assert(offsetof(struct shmobj__ring_hdr, magic) == 0, "magic");
_Static_assert(offsetof(struct shmobj__ring_hdr, version) == 4, "version");
_Static_assert(offsetof(struct shmobj__ring_hdr, capacity) == 8, "capacity");
_Static_assert(offsetof(struct shmobj__ring_hdr, cap_log2) == 12, "cap_log2");
_Static_assert(offsetof(struct shmobj__ring_hdr, slot_size) == 16, "slot_size");
_Static_assert(offsetof(struct shmobj__ring_hdr, hdr_size) == 20, "hdr_size");
_Static_assert(offsetof(struct shmobj__ring_hdr, flags) == 24, "flags");
_Static_assert(offsetof(struct shmobj__ring_hdr, ident) == 32, "ident");
_Static_assert(offsetof(struct shmobj__ring_hdr, enq_pos) == 64, "enq line");
_Static_assert(offsetof(struct shmobj__ring_hdr, deq_pos) == 128, "deq line");
_Static_assert(offsetof(struct shmobj__ring_hdr, cons_waiters) == 192, "l3");
_Static_assert(offsetof(struct shmobj__ring_hdr, put_event) == 196, "put_event");
_Static_assert(offsetof(struct shmobj__ring_hdr, armed) == 200, "armed");
_Static_assert(offsetof(struct shmobj__ring_hdr, prod_waiters) == 256, "l4");
_Static_assert(offsetof(struct shmobj__ring_hdr, take_event) == 260, "take_event");
_Static_assert(offsetof(struct shmobj__ring_hdr, skipped) == 320, "skipped");
_Static_assert(offsetof(struct shmobj__ring_hdr, rescued) == 328, "rescued");
_Static_assert(offsetof(struct shmobj__ring_hdr, notify) == 384, "notify");
_Static_assert(offsetof(struct shmobj__ring_hdr, sleepers) == 640, "sleepers");

/* This process's view of a ring: pointers and geometry validated once at
 * attach time, so nothing read from shared memory later can move an access
 * outside the ring. */
struct shmobj__ring {
    struct shmobj__ring_hdr *hdr;
    /* the segment: tokens and liveness of claimants and sleepers */
    struct shmobj__space *sp;
    /* this process's token for claim records (kept to
     * SHMOBJ__RING_CLAIM_TOKEN: 0 when the space gives none), and the fork
     * count it belongs to (a forked child looks it up again); threads may
     * race to refresh it with the same value */
    _Atomic uint64_t self_forks; /* fork count + 1; 0 not looked up yet */
    _Atomic uint32_t self_token;
    uint64_t ident; /* hdr->ident as it was at attach */
    struct shmobj__ring_slot *slots;
    uint64_t capacity;
    uint64_t mask;
    uint32_t cap_log2;
    /* how long a slot may stay claimed-but-unpublished (or taken-but-not-
     * released) before the claimant's liveness is checked (ns) */
    uint64_t stall_ns;
    /* stall tracking of this view (relaxed: a hint, threads may race) */
    _Atomic uint64_t stall_pos;
    _Atomic uint64_t stall_since;
    _Atomic uint64_t pstall_pos;
    _Atomic uint64_t pstall_since;
    /* the position (+ 1; 0: none yet) of this view's last empty try (a
     * take whose head slot holds EMPTY(head)) and last full try (a put
     * whose slot holds the previous lap), and how many tries there were
     * answered from the slot word alone (UINT32_MAX: the next tries look,
     * see quiet_try()). The other side's position line is what that side
     * writes on every claim: reading it on every empty or full try moved
     * it between the cores once per message of a ring that runs near empty
     * or full, and only recovery needs it (is the slot claimed by someone
     * who may be dead?). It is read on the SHMOBJ__RING_RECHECK-th try at
     * a position and on every try of a wait that sleeps, so the stall
     * timer of recovery starts at most that many tries late. (relaxed:
     * hints, threads may race) */
    _Atomic uint64_t empty_pos;
    _Atomic uint32_t empty_tries;
    _Atomic uint64_t full_pos;
    _Atomic uint32_t full_tries;
    /* this view's sleeper record: (token << 32) | (index + 1) of the
     * handle that found it, 0 none yet (a forked child, whose token
     * differs, finds its own) */
    _Atomic uint64_t sleeper;
    /* wakes that woke nobody since the last repair, and how many trigger
     * the next one (doubling while repairs find nothing) */
    _Atomic uint32_t futile;
    _Atomic uint32_t repair_after;
    /* tests: a take stays this long between its claim and its release, so
     * a kill test can land inside that window at will; 0 in the library */
    uint64_t test_hold_ns;
    /* tests: the next batch put stays this long between its claim and its
     * first claim record, once; 0 in the library */
    uint64_t test_put_hold_ns;
    /* tests: the next batch take stays this long between its claim and its
     * claim records, once; 0 in the library */
    uint64_t test_take_many_hold_ns;
};

/* Tries of an empty (full) ring at one position answered from the slot
 * word alone before the other side's position is read again. */
#define SHMOBJ__RING_RECHECK 64u

/* A sleeping wait wakes at least this often; once a slice passed without
 * its operation going through, it checks that the segment still has its
 * name (SHMOBJ_EREPLACED when not), and a wait for a completion asks
 * whether the consumer it waits for is alive (SHMOBJ_EPEERDEAD). */
#define SHMOBJ__RING_WAIT_SLICE_NS (100 * 1000 * 1000ull)

/* Default for shmobj__ring.stall_ns. */
#define SHMOBJ__RING_STALL_NS (20 * 1000 * 1000ull)
/* A slot whose claimant never recorded itself is resolved after this many
 * stall periods (the claimant died between its claim and its record). */
#define SHMOBJ__RING_UNKNOWN_STALLS 10

/* Bytes per slot, its claim record included. */
#define SHMOBJ__RING_SLOT_BYTES sizeof(struct shmobj__ring_slot)

/* The claim record naming `token` as the claimant of position pos in
 * `role` (SHMOBJ__RING_ROLE_*). */
static inline uint64_t shmobj__ring_claim_word(const struct shmobj__ring *r,
                                               unsigned role, uint64_t pos,
                                               uint32_t token)
{
    return (pos >> r->cap_log2) << 32 | (uint64_t)(role & 1u) << 31 |
           (token & SHMOBJ__RING_CLAIM_TOKEN);
}

/* The token a claim record names (0: unknown). */
static inline uint32_t shmobj__ring_claim_token(uint64_t claim)
{
    return (uint32_t)claim & SHMOBJ__RING_CLAIM_TOKEN;
}

/* The position a claim record read from slot `index` names, for tools and
 * tests: the one of that slot whose lap agrees with the record's 32 lap
 * bits and lies nearest `near` (a position of the ring now). *role gets
 * the record's role. */
static inline uint64_t shmobj__ring_claim_pos(const struct shmobj__ring *r,
                                              uint64_t claim, uint64_t index,
                                              uint64_t near, unsigned *role)
{
    *role = (unsigned)(claim >> 31) & 1u;
    const uint64_t half = (uint64_t)1 << 31, epoch = (uint64_t)1 << 32;
    uint64_t near_lap = near >> r->cap_log2;
    uint64_t lap = (near_lap & ~(uint64_t)UINT32_MAX) | claim >> 32;
    if (lap > near_lap + half && lap >= epoch)
        lap -= epoch;
    else if (lap + half < near_lap)
        lap += epoch;
    return lap << r->cap_log2 | (index & r->mask);
}

/* Bytes needed for a ring of `capacity` slots; 0 when capacity is invalid. */
uint64_t shmobj__ring_footprint(uint32_t capacity);

/* Build an empty ring in mem (size bytes, 64-byte aligned) whose identity
 * word is ident (non-zero). */
int shmobj__ring_init(void *mem, uint64_t size, uint32_t capacity,
                      uint32_t flags, uint64_t ident);

/* Validate the ring in mem (size bytes readable) and fill the view, whose
 * ident is the header's as read here (the caller judges it).
 * SHMOBJ_ECORRUPT / SHMOBJ_EVERSION on a bad header. */
int shmobj__ring_attach(struct shmobj__ring *r, struct shmobj__space *sp,
                        void *mem, uint64_t size);

/* Whether the ring still carries the identity this view attached to: false
 * once the ring was destroyed (or its block reused). One load of a line
 * nobody writes while the ring lives. */
static inline bool shmobj__ring_live(const struct shmobj__ring *r)
{
    return atomic_load_explicit(&r->hdr->ident, memory_order_relaxed) == r->ident;
}

/* True when v may travel through a ring (non-zero, low 4 bits clear): a
 * slot word that is a value always carries a non-zero reference, so a word
 * of 0 is damage, never a message. */
static inline bool shmobj__ring_value_ok(uint64_t v)
{
    return v != 0 && (v & 15u) == 0;
}

/* Non-blocking operations: 0, SHMOBJ_EFULL, SHMOBJ_EEMPTY,
 * SHMOBJ_ECORRUPT when the slot they need holds a word no live ring can,
 * and SHMOBJ_ESTALE, before touching anything, when the ring's identity is
 * no longer the view's (shmobj__ring_live()). */
int shmobj__ring_try_put(struct shmobj__ring *r, uint64_t v);
/* shmobj__ring_try_put() that says at which position v was published. */
int shmobj__ring_try_put_at(struct shmobj__ring *r, uint64_t v, uint64_t *at);
int shmobj__ring_try_take(struct shmobj__ring *r, uint64_t *v);
int shmobj__ring_try_peek(struct shmobj__ring *r, uint64_t *v);
/* shmobj__ring_try_peek() writing nothing, for a read-only handle: it
 * steps over skipped slots in its own look instead of for everybody, and
 * leaves a stalled producer's slot to a writer (what lies behind it is
 * not seen until then). SHMOBJ_EEMPTY also when the head cannot be told
 * from damage (shmobj_queue_check() judges that); SHMOBJ_EBUSY when
 * consumers moved the head under every one of many looks. */
int shmobj__ring_try_peek_ro(struct shmobj__ring *r, uint64_t *v);

/* Batches: put v[0 .. n) in order, or take up to n, each message exactly
 * as the single operation would; *done / *got says how many. put_many
 * returns what the single try_put returned for the first message that did
 * not fit (SHMOBJ_EFULL, ...), with the ones before it put; take_many
 * returns 0 once it took at least one, else what try_take returned. */
int shmobj__ring_try_put_many(struct shmobj__ring *r, const uint64_t *v,
                              uint32_t n, uint32_t *done);
int shmobj__ring_try_take_many(struct shmobj__ring *r, uint64_t *v,
                               uint32_t n, uint32_t *got);

/* Blocking operations: spin up to spin_ns (negative: spin without limit,
 * never sleep), then sleep on a futex until the absolute monotonic deadline
 * (UINT64_MAX: forever), in wait slices. 0, SHMOBJ_ETIMEDOUT,
 * SHMOBJ_EREPLACED (the segment's name was removed or names another
 * segment: at the deadline, or after a slice), or what a non-blocking try
 * returned other than full / empty (a sleeper woken by the ring's destroy
 * gets SHMOBJ_ESTALE). */
int shmobj__ring_put(struct shmobj__ring *r, uint64_t v, int64_t spin_ns,
                     uint64_t deadline);
/* shmobj__ring_put() that says at which position v was published. */
int shmobj__ring_put_at(struct shmobj__ring *r, uint64_t v, int64_t spin_ns,
                        uint64_t deadline, uint64_t *at);
int shmobj__ring_take(struct shmobj__ring *r, uint64_t *v, int64_t spin_ns,
                      uint64_t deadline);
int shmobj__ring_peek(struct shmobj__ring *r, uint64_t *v, int64_t spin_ns,
                      uint64_t deadline);

/* Take back the sleeper counts of processes that died asleep; true when
 * some count was taken back. Run by wakers whose wakes keep waking nobody,
 * and by a process that finds every sleeper record taken. */
bool shmobj__ring_sleepers_repair(struct shmobj__ring *r);

/* This process's attachment token for records it writes (0 unknown),
 * looked up once per fork generation. */
uint32_t shmobj__ring_self_token(struct shmobj__ring *r);

/* Messages claimed or waiting (enq_pos - deq_pos, at most capacity). */
uint64_t shmobj__ring_count(const struct shmobj__ring *r);

#endif /* SHMOBJ_QUEUE_RING_H */
