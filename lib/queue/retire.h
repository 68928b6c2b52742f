/* Retired message blocks: a short FIFO, one per queue, of message blocks
 * whose work is done, held back a while before they return to the heap.
 *
 * Why: the heap hands out the block freed last first. A message block that
 * its consumer just read and freed is still in that consumer's private
 * caches, and the producer that gets it next has to take every line of it
 * back from the other core, one at a time. Measured with 64 KiB messages on
 * a 1 MiB-L2 machine: copied in at 6 GiB/s into the block freed last, at
 * 24 GiB/s into one freed 2 MiB of messages earlier, whose lines had left
 * the consumer's L2 for the shared L3. So a consumer retires such blocks
 * here, and the oldest ones go back to the heap once a budget of bytes
 * (about twice the L2) was retired after them.
 *
 * A message allocation of a fitting size takes the oldest block back from
 * here once the L2's worth of bytes (or one and a half L2, queue.c) was
 * retired after it (shmobj__retire_pop): the block gets a new generation in place under
 * this FIFO's lock, and neither the heap's lock nor its lists are touched
 * by either side while the blocks of a stream go round.
 *
 * The FIFO sits in the queue's block, behind the ring (format-queue.md),
 * guarded by the library's lock. Its updates are ordered so that a process
 * killed inside can only leak a block, never free one twice: an entry
 * counts once `tail` covers it, and one taken out is uncounted (`head`
 * moved) before the caller frees it. */
#ifndef SHMOBJ_QUEUE_RETIRE_H
#define SHMOBJ_QUEUE_RETIRE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "os.h"
#include "space.h"

#define SHMOBJ__RETIRE_MAGIC 0x44545251u /* "QRTD" little-endian */
#define SHMOBJ__RETIRE_VERSION 3u
#define SHMOBJ__RETIRE_CAP 64u

struct shmobj__retire_entry {
    uint64_t ref;   /* the message block (a heap reference) */
    uint64_t bytes; /* its usable size in bytes */
};
_Static_assert(sizeof(struct shmobj__retire_entry) == 16, "retire entry");
_Static_assert(offsetof(struct shmobj__retire_entry, ref) == 0, "entry ref");
_Static_assert(offsetof(struct shmobj__retire_entry, bytes) == 8, "entry bytes");

/* Written by the creator once (magic .. reserved1), then only by holders
 * of `lock`: consumers retiring a block, and anyone trimming. */
struct shmobj__retire {
    uint32_t magic;    /* SHMOBJ__RETIRE_MAGIC */
    uint32_t version;  /* SHMOBJ__RETIRE_VERSION */
    uint32_t capacity; /* SHMOBJ__RETIRE_CAP entries */
    uint32_t reserved0; /* zero */
    uint64_t reserved1[6]; /* zero */
    shmobj__os_lock lock;  /* the library's lock (os-lock.c); guards what
                              follows */
    /* positions (counters that only grow): entries [head, tail) are
     * retired, oldest first, at most SHMOBJ__RETIRE_CAP of them */
    uint64_t head;
    uint64_t tail;
    uint64_t bytes; /* sum of the retired entries' sizes */
    /* the entry a lock holder is taking out for reuse (shmobj__retire_pop),
     * its reference as retired; 0 when none. Set before the block's
     * generation is renewed and cleared after `head` moved past it, so the
     * next locker after the holder's death knows which entry was in
     * flight and keeps the block (format-queue.md, "Retire FIFO") */
    uint64_t taking;
    /* the block a lock holder is retiring (shmobj__retire_push), its
     * reference; 0 when none. Set before the block's state is moved to
     * given back and cleared once `tail` counts it, so the next locker
     * after the holder's death counts a block whose state says given back
     * and that no entry holds (format-queue.md, "Retire FIFO") */
    uint64_t putting;
    uint64_t reserved2[3]; /* zero */
    struct shmobj__retire_entry e[SHMOBJ__RETIRE_CAP]; /* position p at p % CAP */
};
_Static_assert(offsetof(struct shmobj__retire, magic) == 0, "retire magic");
_Static_assert(offsetof(struct shmobj__retire, version) == 4, "retire version");
_Static_assert(offsetof(struct shmobj__retire, capacity) == 8, "retire capacity");
_Static_assert(offsetof(struct shmobj__retire, lock) == 64, "retire lock");
_Static_assert(offsetof(struct shmobj__retire, head) == 128, "retire head");
_Static_assert(offsetof(struct shmobj__retire, tail) == 136, "retire tail");
_Static_assert(offsetof(struct shmobj__retire, bytes) == 144, "retire bytes");
_Static_assert(offsetof(struct shmobj__retire, taking) == 152, "retire taking");
_Static_assert(offsetof(struct shmobj__retire, putting) == 160, "retire putting");
_Static_assert(offsetof(struct shmobj__retire, e) == 192, "retire entries");
_Static_assert(sizeof(struct shmobj__retire) == 192 + 16 * SHMOBJ__RETIRE_CAP,
               "retire layout");

/* At most this many blocks come out of one push (or a drain). */
#define SHMOBJ__RETIRE_OUT_MAX (SHMOBJ__RETIRE_CAP + 1u)

/* Build an empty FIFO in r (64-byte aligned, zeroed or not). */
void shmobj__retire_init(struct shmobj__retire *r);

/* 0 when the header is one this code wrote, else SHMOBJ_ECORRUPT. */
int shmobj__retire_check(const struct shmobj__retire *r);

/* Where a message block keeps its completion state (a u32 at this
 * offset of its payload), and the state that says it was given back: the
 * repair after a death inside a push reads it (queue-msg.c asserts both
 * against its header). */
#define SHMOBJ__RETIRE_STATE_OFF 4u
#define SHMOBJ__RETIRE_STATE_GIVEN 3u

/* Give back block ref of `bytes` into the FIFO, under its lock: its state
 * word (*state, in the block) moves from `from` to
 * SHMOBJ__RETIRE_STATE_GIVEN by CAS; when the CAS fails, *seen is the
 * state found and nothing else is done. Otherwise (*seen == from) the
 * block is retired (a full FIFO first gives out its oldest quarter); then,
 * when more than `budget` bytes are retired, the oldest blocks are taken
 * out until three quarters of the budget stay. The blocks taken out are in
 * out[0 .. *n): the caller frees them. Lock errors (SHMOBJ_ECORRUPT,
 * SHMOBJ_EBUSY) come before the CAS: the block is the caller's still.
 * hold_ns > 0 (tests) waits that long between the CAS and the count. */
int shmobj__retire_push(struct shmobj__space *sp, struct shmobj__retire *r,
                        uint64_t ref, uint64_t bytes, _Atomic uint32_t *state,
                        uint32_t from, uint32_t *seen, uint64_t budget,
                        uint64_t hold_ns, uint64_t out[SHMOBJ__RETIRE_OUT_MAX],
                        unsigned *n);

/* Reuse a retired block (a message allocation of `need` bytes, the
 * block's usable size at least that and at most a quarter more): the
 * oldest entry, when it fits and at least `cold` bytes were retired after
 * it (so it has left the caches of the core that read it last). Under the
 * FIFO's lock, not the heap's, the block gets a new generation in place
 * (shmobj__arena_gen_renew()) and leaves the FIFO; *ref is its new
 * reference and *bytes its usable size, or *ref is 0 when no entry fits.
 * The block stays allocated throughout, so the heap counts it as used,
 * whoever holds it. hold_ns > 0 (tests) waits that long after the entry
 * was uncounted, inside the lock. Lock errors (SHMOBJ_ECORRUPT). */
int shmobj__retire_pop(struct shmobj__space *sp, struct shmobj__retire *r,
                       uint64_t need, uint64_t cold, uint64_t hold_ns,
                       uint64_t *ref, uint64_t *bytes);

/* Take every retired block out into out[0 .. *n). */
int shmobj__retire_drain(struct shmobj__space *sp, struct shmobj__retire *r,
                         uint64_t out[SHMOBJ__RETIRE_OUT_MAX], unsigned *n);

/* Blocks and bytes retired now (a racy snapshot, for tests and stats). */
void shmobj__retire_count(struct shmobj__retire *r, uint64_t *blocks,
                          uint64_t *bytes);

#endif /* SHMOBJ_QUEUE_RETIRE_H */
