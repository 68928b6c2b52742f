/**
 * @file shmobj/queue.h
 * @brief Message queues between processes: bounded, FIFO, multi-producer and
 *        multi-consumer, carrying references, with completion back to the
 *        sender and a pollable descriptor.
 *
 * A queue lives in a segment under a name; any process attached to the
 * segment opens it by that name. The name is the queue's root name, exactly
 * as given: queues, maps and the roots an application publishes with
 * shmobj_segment_root_set() share one namespace, so a name belongs to one
 * root of one kind. Creating a queue whose name any root already has gives
 * SHMOBJ_EEXIST; opening or destroying as a queue a root of another kind
 * gives SHMOBJ_ETYPE. A message is one shmobj_ref: usually a
 * block of the segment's heap (a raw block, an object, or a *message block*
 * from shmobj_queue_msg_alloc()), so bulk data travels without a copy: the
 * producer fills the block in place and puts its reference, the consumer
 * reads it in place. How a producer should write a large message for a
 * consumer on another core depends on its size against the producer's L2
 * cache, and shmobj_queue_put_copy() follows this rule: up to 4 times the
 * L2, cached stores, so the message reaches the consumer through the
 * shared L3 rather than through memory, best those of the C library's
 * memcpy in pieces of 16 to 256 KiB, whose "rep movsb" writes whole lines
 * without reading them first. Plain stores read every line before they
 * write it, and so does glibc's memcpy of a piece larger than the L2 on
 * AMD processors: a 1 MiB message copied in one call moved at a third of
 * the speed of one copied 64 KiB at a time, as put_copy does (messages
 * up to half the L2 come back through the queue's retire FIFO,
 * see shmobj_queue_trim(), after they have left the consumer's caches);
 * beyond, streaming (non-temporal) stores, as the messages in flight no
 * longer fit in the L3.
 *
 * **Fast path.** put and take are lock-free (a CAS on a position and a CAS
 * on the slot) and make no system call unless a process sleeps on the other
 * side. Blocking forms sleep on a futex and use no CPU; a handle may ask for
 * a bounded spin first (shmobj_queue_spin_set()) for the lowest latency.
 *
 * **Completion.** A message block allocated with SHMOBJ_QUEUE_MSG_TRACK
 * carries a completion word: the consumer calls shmobj_queue_msg_done(), the
 * sender waits with shmobj_queue_msg_wait_done(). Who frees the block:
 * - untracked message block: the consumer, by shmobj_queue_msg_done();
 * - tracked message block: the sender, by shmobj_queue_msg_free() after the
 *   wait returned 0; a sender that gives up earlier also calls
 *   shmobj_queue_msg_free(), and the consumer's later
 *   shmobj_queue_msg_done() then frees it;
 * - a message block that was never put: its allocator, with
 *   shmobj_arena_free();
 * - any other reference (raw block, object): whatever the application
 *   agrees; the queue never frees what it carries. Put with
 *   shmobj_queue_put_tracked(), any reference has completion of its own,
 *   without a message block around it: the consumer calls
 *   shmobj_queue_done(), the sender waits with shmobj_queue_wait_done() or
 *   shmobj_queue_wait_all() and then frees it.
 * "Frees" means: gives back to the queue, which returns blocks of 32 KiB
 * up to half the L2 cache of data (blocks below 5/8 of the L2) to the heap
 * a little later (shmobj_queue_trim()).
 *
 * **Crashes.** A producer killed while putting: if it died before its
 * message was published, the message is not in the queue (consumers skip its
 * slot once they find the producer dead, after the queue's stall period of
 * 20 ms); if it died after, the message is delivered normally. The block it
 * had allocated for the message stays allocated (leaked) unless published.
 * A consumer killed while taking: either the message is still in the queue
 * (killed before its claim) or it is lost with the consumer (killed after:
 * from the queue's point of view it was delivered); producers release the
 * dead consumer's slot after the stall period. So a kill costs at most the
 * one message the dying process held, and never wedges the others. A
 * tracked message or reference whose consumer died is never marked done:
 * its sender's wait learns that the consumer which took it died and
 * returns SHMOBJ_EPEERDEAD (after a wait slice of 100 ms, and within one
 * slice of the death), with the message or reference the sender's again.
 * It tells by the ring position the message went through:
 * shmobj_queue_put_tracked() and shmobj_queue_put_copy() record it; for a
 * tracked message block put with shmobj_queue_put(), the sender's wait
 * finds it when the block still waited in the queue as the wait began
 * (among the last 4,096 messages put). A wait that knows no position, or
 * whose consumer's claim the ring has already overwritten with a later
 * lap's, ends at its deadline. A process killed while sleeping in a blocking call
 * leaves the count of sleepers too high; the other side then makes a
 * needless futex-wake system call per operation (correct, a little slower)
 * until one of its handles, after 64 such calls, finds the dead process in
 * the queue's sleeper records and takes its count back (up to 8 processes
 * with sleepers at once are recorded; see doc/format-queue.md).
 *
 * **Destroyed queues.** shmobj_queue_destroy() first clears the ring's
 * identity word, then wakes every thread asleep on the queue and every
 * armed descriptor, waits (up to 100 ms) for the sleepers to leave, and
 * frees the ring. Every call on a handle of that queue, in any process,
 * that starts after the identity was cleared returns SHMOBJ_ESTALE without
 * writing anything, also once the heap has given the block to something
 * else (a new queue in the same block has another identity): put and take
 * compare that word with the handle's copy first (one load of a line
 * nobody writes), a blocking call does so on every retry and after every
 * wake-up, and every call that does not succeed also checks the block's
 * generation. A call already past that compare when the destroy runs may
 * still complete on the freed block: destroy a queue only once no process
 * uses it, and close the handles, which still works on a stale one.
 *
 * **Event loops.** shmobj_queue_notify_fd() hands a consumer a descriptor
 * that becomes readable when messages wait; shmobj_queue_notify_arm() before
 * each poll() tells producers to write to it. It is the read end of a FIFO
 * in /dev/shm named by its inode, which producers open by name (no pid:
 * it works between PID namespaces and, mode 0622, between users; where
 * /dev/shm cannot hold a FIFO, a pipe reached through `/proc/PID/fd/N`),
 * and they write one byte only when the consumer armed it, so a busy queue
 * costs no system call per message.
 */
#ifndef SHMOBJ_QUEUE_H
#define SHMOBJ_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shmobj/api.h"
#include "shmobj/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief A process's handle of a queue. Opaque. */
typedef struct shmobj_queue shmobj_queue;

/** @brief Name of the queue a segment's users share when they need just
 *         one. */
#define SHMOBJ_QUEUE_DEFAULT "default"

/** @brief Longest queue name, in bytes, without the terminating NUL: the
 *         longest root name (SHMOBJ_ROOT_NAME_MAX), since a queue's root
 *         is named exactly as the queue. */
#define SHMOBJ_QUEUE_NAME_MAX 47

/** @brief Largest capacity of a queue (messages). */
#define SHMOBJ_QUEUE_CAPACITY_MAX (1u << 24)

/** @brief Flags of shmobj_queue_msg_alloc() and shmobj_queue_put_copy(). */
enum shmobj_queue_msg_flag {
    /** the sender will wait for completion and free the message itself */
    SHMOBJ_QUEUE_MSG_TRACK = 1u << 0
};

/** @brief Bytes of header in front of a message block's data (the data is
 *         aligned to SHMOBJ_QUEUE_MSG_ALIGN). */
#define SHMOBJ_QUEUE_MSG_HEADER 64
/** @brief Alignment of a message block's data, in bytes. */
#define SHMOBJ_QUEUE_MSG_ALIGN 64

/* ---- lifecycle ------------------------------------------------------------ */

/**
 * @brief Create a named queue in a segment and open it.
 *
 * The queue's block (2,176 bytes, plus 16 bytes per message of capacity,
 * plus 32 bytes per completion record: twice the capacity, at least 64, at
 * most 8,192; 4.4 KiB for 16 messages, 82 KiB for 1,024) is allocated in the
 * segment's heap and published as the named root `name` (no prefix: one
 * namespace for every kind of root).
 * @param[in] seg segment
 * @param[in] name 1..SHMOBJ_QUEUE_NAME_MAX bytes, NUL-terminated
 * @param[in] capacity messages the queue holds: a power of two in
 *            2..SHMOBJ_QUEUE_CAPACITY_MAX
 * @param[in] flags 0 (no flags are defined yet)
 * @param[out] out the new handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, bad name, capacity or flags
 * @retval SHMOBJ_EEXIST a root of that name exists, of any kind (queue,
 *         map, or one set with shmobj_segment_root_set())
 * @retval SHMOBJ_ENOMEM no room in the segment, or no memory for the handle
 * @retval SHMOBJ_EFULL the segment's root directory is full
 * @retval SHMOBJ_ECORRUPT the segment is damaged
 * @retval SHMOBJ_EBUSY another live process held the segment lock (which
 *         the root look-up takes) for longer than 10 s
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe. Two processes creating the same name at
 *       once: the name is published create-only, under the segment lock,
 *       so exactly one succeeds and the other gets SHMOBJ_EEXIST.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_create(shmobj_segment *seg, const char *name,
                                   uint32_t capacity, unsigned flags,
                                   shmobj_queue **out);

/**
 * @brief Open an existing queue by name.
 * @param[in] seg segment
 * @param[in] name the queue's name
 * @param[out] out the new handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_ENOTFOUND no root of that name
 * @retval SHMOBJ_ETYPE the root names something else (a map, an object, a
 *         raw block)
 * @retval SHMOBJ_ECORRUPT the root names a ring that is not sound, or a
 *         block that is not a live block of the heap
 * @retval SHMOBJ_EVERSION the queue has another format version
 * @retval SHMOBJ_ESTALE the queue was destroyed (or is being destroyed)
 * @retval SHMOBJ_ENOMEM no memory for the handle
 * @retval SHMOBJ_EBUSY another live process held the segment lock (which
 *         the root look-up takes) for longer than 10 s
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_open(shmobj_segment *seg, const char *name,
                                 shmobj_queue **out);

/**
 * @brief Open a queue by name, waiting until it exists.
 *
 * For a process that may start before the queue's creator: waits with
 * shmobj_segment_root_wait() (asleep on a futex the root directory's
 * changes wake, never polling) until a root of that name exists, then
 * opens it as shmobj_queue_open() does.
 * @param[in] seg segment
 * @param[in] name the queue's name
 * @param[in] timeout_ns 0 (look once), SHMOBJ_FOREVER, or nanoseconds
 * @param[out] out the new handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_ETIMEDOUT no root of that name appeared in time
 * @retval SHMOBJ_ETYPE the root names something else (a map, an object, a
 *         raw block)
 * @retval SHMOBJ_ECORRUPT the root names a ring that is not sound, or a
 *         block that is not a live block of the heap; or the segment lock
 *         is damaged
 * @retval SHMOBJ_EVERSION the queue has another format version
 * @retval SHMOBJ_ESTALE the queue was destroyed (or is being destroyed)
 * @retval SHMOBJ_ENOMEM no memory for the handle
 * @retval SHMOBJ_EFULL the segment handle, inherited through fork(), could
 *         not attach anew
 * @retval SHMOBJ_EBUSY with SHMOBJ_FOREVER only: another live process held
 *         the segment lock for longer than 10 s
 * @note Thread- and process-safe.
 * @since 0.2
 */
SHMOBJ_API int shmobj_queue_open_timed(shmobj_segment *seg, const char *name,
                                       int64_t timeout_ns, shmobj_queue **out);

/**
 * @brief Open a queue by name, creating it when it does not exist.
 *
 * The way several peer processes start when any of them may be first:
 * each calls this with the same arguments, and all end up with handles of
 * one queue. Creates as shmobj_queue_create(); when a root of that name
 * exists (another process won the race, or created it earlier), opens it
 * instead. When the name goes away between the two steps (the queue was
 * destroyed meanwhile), tries again, up to 16 rounds. An existing queue is
 * opened whatever its capacity: shmobj_queue_capacity() tells it.
 * @param[in] seg segment
 * @param[in] name 1..SHMOBJ_QUEUE_NAME_MAX bytes, NUL-terminated
 * @param[in] capacity capacity of the queue if this call creates it: a
 *            power of two in 2..SHMOBJ_QUEUE_CAPACITY_MAX (checked always)
 * @param[in] flags 0 (no flags are defined yet)
 * @param[out] out the new handle
 * @retval 0 success (created or opened)
 * @retval SHMOBJ_EINVAL NULL argument, bad name, capacity or flags
 * @retval SHMOBJ_ETYPE a root of that name names something else than a
 *         queue (a map, an object, a raw block)
 * @retval SHMOBJ_ECORRUPT the root names a ring that is not sound, or the
 *         segment is damaged
 * @retval SHMOBJ_EVERSION the existing queue has another format version
 * @retval SHMOBJ_ESTALE the queue was being destroyed in every round
 * @retval SHMOBJ_ENOTFOUND the name was published and removed again in
 *         every round
 * @retval SHMOBJ_ENOMEM no room in the segment, or no memory for the handle
 * @retval SHMOBJ_EFULL the segment's root directory is full
 * @note Thread- and process-safe: of peers racing, exactly one creates the
 *       queue and every other one opens it.
 * @since 0.2
 */
SHMOBJ_API int shmobj_queue_open_or_create(shmobj_segment *seg,
                                           const char *name, uint32_t capacity,
                                           unsigned flags, shmobj_queue **out);

/**
 * @brief Close a handle (unregisters its pollable descriptor and closes it).
 *        The queue stays. Also the way to dispose of a handle whose queue
 *        was destroyed (it then touches nothing in the segment). References
 *        the handle still tracks (shmobj_queue_put_tracked()) are untracked
 *        as by shmobj_queue_untrack(): done ones are released, pending ones
 *        handed to the consumer's shmobj_queue_done().
 *
 * May come before or after the close of the segment handle it was opened
 * through: the handle keeps the mapping and the attachment until it is
 * closed, and from the segment's close on every other call through it
 * (puts, takes, peeks, message blocks, completion, statistics, the
 * descriptor) returns SHMOBJ_ESTALE (shmobj_queue_has_messages(): false).
 * @param[in] q handle, or NULL (nothing happens)
 * @note Not thread-safe with other uses of the same handle.
 * @since 0.1
 */
SHMOBJ_API void shmobj_queue_close(shmobj_queue *q);

/**
 * @brief Remove a queue: unpublish its name and free its ring. Messages
 *        still in it are not freed.
 * @param[in] seg segment
 * @param[in] name the queue's name
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_ENOTFOUND no root of that name
 * @retval SHMOBJ_ETYPE the root names something else than a queue
 * @retval SHMOBJ_ECORRUPT the root names a ring that is not sound
 * @retval SHMOBJ_EVERSION the queue has another format version
 * @retval SHMOBJ_ESTALE another call is destroying it
 * @retval SHMOBJ_ENOMEM no memory for a temporary handle
 * @retval SHMOBJ_EBUSY another live process held the segment lock (which
 *         the root look-up takes) for longer than 10 s
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Process-safe. Handles still open elsewhere get SHMOBJ_ESTALE from
 *       their next call (see "Destroyed queues" above); a call running at
 *       that moment may still complete on the freed block, so destroy a
 *       queue once nobody uses it. May wait up to 100 ms for threads asleep
 *       on the queue to leave.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_destroy(shmobj_segment *seg, const char *name);

/**
 * @brief Give the heap back the message blocks the queue holds retired.
 *
 * A message block of 32 KiB up to half the L2 cache of data (a block
 * below 5/8 of the L2, its header and rounding included) whose work is done
 * (shmobj_queue_msg_done(), shmobj_queue_msg_free()) does not return to
 * the heap at once: the queue keeps the last ones, about twice the L2 cache
 * in bytes (64 blocks at most), and frees the oldest as newer ones arrive.
 * A block freed at once would be the next one the heap hands out, while the
 * consumer that just read it still holds it in its own cache; a producer
 * writing it would have to take every line back from that core, which costs
 * several times the copy. shmobj_queue_msg_alloc() reuses the oldest of
 * them for a message it fits (at most a quarter larger) once the L2's
 * worth of bytes (for shmobj_queue_put_copy(), one and a half L2 where it
 * can hold that much) was retired after it, giving the block a new
 * generation, so a reference kept from its last message is stale. It trims by itself
 * when the segment is full, and shmobj_queue_destroy() always does; call
 * this to have the memory back for other uses at once.
 * @param[in] q queue
 * @retval 0 success (also when nothing was retired)
 * @retval SHMOBJ_EINVAL q is NULL
 * @retval SHMOBJ_ESTALE the queue was destroyed
 * @retval SHMOBJ_ECORRUPT the queue's lock was left unrecoverable, or its
 *         block no longer checks out in the heap
 * @retval SHMOBJ_EBUSY another live process held the queue's retire lock
 *         for longer than 10 s (it is stopped, or the lock word was damaged
 *         to name it)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Process-safe and thread-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_trim(shmobj_queue *q);

/**
 * @brief Let blocking calls on this handle spin before they sleep.
 * @param[in] q handle
 * @param[in] spin_ns 0 (default): sleep at once; > 0: spin up to that many
 *            nanoseconds first; negative: spin without limit, never sleep
 *            (lowest latency, burns a CPU while waiting)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL q is NULL
 * @note Thread-safe; applies to later calls.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_spin_set(shmobj_queue *q, int64_t spin_ns);

/* ---- messages --------------------------------------------------------- */

/**
 * @brief Put a message, waiting while the queue is full.
 * @param[in] q handle
 * @param[in] ref a reference to a block of the segment (its offset is a
 *            multiple of 16, as every heap block's is)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL q is NULL, ref is null or not 16-byte aligned
 * @retval SHMOBJ_ECORRUPT the ring's next slot holds a word no live queue
 *         can (damage), or its block no longer checks out; nothing was sent
 * @retval SHMOBJ_ESTALE the queue was destroyed (nothing was written)
 * @retval SHMOBJ_EREPLACED the segment's name was removed or now names
 *         another segment while the call waited (checked after every wait
 *         slice of 100 ms): its peers moved on; nothing was sent
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe, lock-free while there is room. Waits
 *       without limit for a peer, but not for a segment that is gone (see
 *       SHMOBJ_EREPLACED).
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_put(shmobj_queue *q, shmobj_ref ref);

/**
 * @brief Put a message if there is room now.
 * @param[in] q handle
 * @param[in] ref as for shmobj_queue_put()
 * @retval 0 success
 * @retval SHMOBJ_EINVAL q is NULL, ref is null or not 16-byte aligned
 * @retval SHMOBJ_EFULL the queue is full
 * @retval SHMOBJ_ECORRUPT as for shmobj_queue_put()
 * @retval SHMOBJ_ESTALE as for shmobj_queue_put()
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe, lock-free, never blocks.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_try_put(shmobj_queue *q, shmobj_ref ref);

/**
 * @brief Put a message, waiting up to a timeout for room.
 * @param[in] q handle
 * @param[in] ref as for shmobj_queue_put()
 * @param[in] timeout_ns 0 (do not wait), SHMOBJ_FOREVER, or nanoseconds
 * @retval 0 success
 * @retval SHMOBJ_EINVAL q is NULL, ref is null or not 16-byte aligned
 * @retval SHMOBJ_EFULL the queue is full and timeout_ns is 0
 * @retval SHMOBJ_ETIMEDOUT still full when the timeout passed
 * @retval SHMOBJ_EREPLACED at the deadline, or after any wait slice of
 *         100 ms while the call waited, the segment's name was
 *         removed or now names another segment (shmobj_segment_info_get()):
 *         its peers moved on
 * @retval SHMOBJ_ECORRUPT as for shmobj_queue_put()
 * @retval SHMOBJ_ESTALE as for shmobj_queue_put(), also when the queue was
 *         destroyed while the caller waited
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_put_timed(shmobj_queue *q, shmobj_ref ref,
                                      int64_t timeout_ns);

/**
 * @brief Take the oldest message, waiting while the queue is empty.
 * @param[in] q handle
 * @param[out] ref the message
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ECORRUPT the ring's head slot holds a word no live queue
 *         can (a word of 0 included: no message is null), or the queue's
 *         block no longer checks out (damage); nothing was taken
 * @retval SHMOBJ_ESTALE the queue was destroyed, also while the caller
 *         waited (nothing was written)
 * @retval SHMOBJ_EREPLACED the segment's name was removed or now names
 *         another segment while the call waited (checked after every wait
 *         slice of 100 ms): its peers moved on; nothing was taken
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe, lock-free while messages wait. Waits
 *       without limit for a peer, but not for a segment that is gone (see
 *       SHMOBJ_EREPLACED).
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_take(shmobj_queue *q, shmobj_ref *ref);

/**
 * @brief Take the oldest message if there is one now.
 *
 * A message whose put has claimed a slot but not yet published it counts as
 * not there yet.
 * @param[in] q handle
 * @param[out] ref the message
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_EEMPTY no message waiting
 * @retval SHMOBJ_ECORRUPT the ring's head slot holds a word no live queue
 *         can (a word of 0 included: no message is null), or the queue's
 *         block no longer checks out (damage); nothing was taken
 * @retval SHMOBJ_ESTALE the queue was destroyed, also while the caller
 *         waited (nothing was written)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe, lock-free, never blocks.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_try_take(shmobj_queue *q, shmobj_ref *ref);

/**
 * @brief Take the oldest message, waiting up to a timeout for one.
 * @param[in] q handle
 * @param[out] ref the message
 * @param[in] timeout_ns 0 (do not wait), SHMOBJ_FOREVER, or nanoseconds
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_EEMPTY no message and timeout_ns is 0
 * @retval SHMOBJ_ETIMEDOUT none came before the timeout
 * @retval SHMOBJ_EREPLACED at the deadline, or after any wait slice of
 *         100 ms while the call waited, the segment's name was
 *         removed or now names another segment (shmobj_segment_info_get()):
 *         its peers moved on
 * @retval SHMOBJ_ECORRUPT the ring's head slot holds a word no live queue
 *         can (a word of 0 included: no message is null), or the queue's
 *         block no longer checks out (damage); nothing was taken
 * @retval SHMOBJ_ESTALE the queue was destroyed, also while the caller
 *         waited (nothing was written)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_take_timed(shmobj_queue *q, shmobj_ref *ref,
                                       int64_t timeout_ns);

/**
 * @brief Put several messages in one call, in order: each exactly as
 *        shmobj_queue_put_timed() would put it, with one claim of the
 *        ring's position for a run of free slots instead of one per
 *        message.
 *
 * Waits (up to one deadline for the whole call) while the queue is full;
 * stops at the first message that could not be put, with the ones before
 * it put. Another producer's messages may come between two runs of a
 * batch; a batch's own order is kept.
 * @param[in] q handle
 * @param[in] refs the messages, each as for shmobj_queue_put()
 * @param[in] n how many (0 allowed)
 * @param[in] timeout_ns 0 (do not wait), SHMOBJ_FOREVER, or nanoseconds
 * @param[out] put how many were put (a prefix of refs), also on error
 * @retval 0 all n were put
 * @retval SHMOBJ_EINVAL q or put is NULL, refs is NULL with n > 0, or some
 *         ref is null or not 16-byte aligned (nothing was put)
 * @retval SHMOBJ_EFULL the queue was full and timeout_ns is 0 (*put were
 *         put)
 * @retval SHMOBJ_ETIMEDOUT still full when the timeout passed (*put were
 *         put)
 * @retval SHMOBJ_EREPLACED at the deadline, or after any wait slice of
 *         100 ms while the call waited, the segment's name was
 *         removed or now names another segment (*put were put)
 * @retval SHMOBJ_ECORRUPT as for shmobj_queue_put() (*put were put)
 * @retval SHMOBJ_ESTALE the queue was destroyed (*put were put)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe, lock-free while there is room.
 * @since 0.2
 */
SHMOBJ_API int shmobj_queue_put_many(shmobj_queue *q, const shmobj_ref *refs,
                                     size_t n, int64_t timeout_ns, size_t *put);

/**
 * @brief Take up to `max` messages in one call, oldest first: each exactly
 *        as shmobj_queue_take_timed() would take it, with one claim of the
 *        ring's position for a run of waiting messages.
 *
 * Waits (up to timeout_ns) only while no message is there; then takes
 * every message waiting, up to max, without waiting for more.
 * @param[in] q handle
 * @param[out] refs room for max messages
 * @param[in] max at least 1
 * @param[in] timeout_ns 0 (do not wait), SHMOBJ_FOREVER, or nanoseconds
 * @param[out] taken how many were taken (at least 1 on success; 0 on error)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, or max is 0
 * @retval SHMOBJ_EEMPTY no message and timeout_ns is 0
 * @retval SHMOBJ_ETIMEDOUT none came before the timeout
 * @retval SHMOBJ_EREPLACED at the deadline, or after any wait slice of
 *         100 ms while the call waited, the segment's name was
 *         removed or now names another segment: its peers moved on
 * @retval SHMOBJ_ECORRUPT as for shmobj_queue_take() (nothing was taken)
 * @retval SHMOBJ_ESTALE the queue was destroyed, also while the caller
 *         waited (nothing was taken)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe, lock-free while messages wait. A message
 *       that a damaged slot follows is delivered; the damage is reported by
 *       the next call.
 * @since 0.2
 */
SHMOBJ_API int shmobj_queue_take_many(shmobj_queue *q, shmobj_ref *refs,
                                      size_t max, int64_t timeout_ns,
                                      size_t *taken);

/**
 * @brief Read the oldest message without removing it, waiting for one.
 * @param[in] q handle
 * @param[out] ref the message at the head
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ECORRUPT the ring's head slot holds a word no live queue
 *         can (a word of 0 included: no message is null), or the queue's
 *         block no longer checks out (damage); nothing was taken
 * @retval SHMOBJ_ESTALE the queue was destroyed, also while the caller
 *         waited (nothing was written)
 * @note Thread- and process-safe. With several consumers the message may be
 *       taken by another one right after; peek is a snapshot. Waits
 *       without limit, as shmobj_queue_take() does.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_peek(shmobj_queue *q, shmobj_ref *ref);

/**
 * @brief Read the oldest message without removing it, if there is one.
 * @param[in] q handle
 * @param[out] ref the message at the head
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_EEMPTY no message waiting
 * @retval SHMOBJ_ECORRUPT the ring's head slot holds a word no live queue
 *         can (a word of 0 included: no message is null), or the queue's
 *         block no longer checks out (damage); nothing was taken
 * @retval SHMOBJ_ESTALE the queue was destroyed, also while the caller
 *         waited (nothing was written)
 * @note Thread- and process-safe, lock-free; a snapshot (see
 *       shmobj_queue_peek()).
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_try_peek(shmobj_queue *q, shmobj_ref *ref);

/**
 * @brief Read the oldest message without removing it, waiting up to a
 *        timeout for one.
 * @param[in] q handle
 * @param[out] ref the message at the head
 * @param[in] timeout_ns 0 (do not wait), SHMOBJ_FOREVER, or nanoseconds
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_EEMPTY no message and timeout_ns is 0
 * @retval SHMOBJ_ETIMEDOUT none came before the timeout
 * @retval SHMOBJ_EREPLACED at the deadline, or after any wait slice of
 *         100 ms while the call waited, the segment's name was
 *         removed or now names another segment (shmobj_segment_info_get()):
 *         its peers moved on
 * @retval SHMOBJ_ECORRUPT the ring's head slot holds a word no live queue
 *         can (a word of 0 included: no message is null), or the queue's
 *         block no longer checks out (damage); nothing was taken
 * @retval SHMOBJ_ESTALE the queue was destroyed, also while the caller
 *         waited (nothing was written)
 * @note Thread- and process-safe; a snapshot (see shmobj_queue_peek()).
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_peek_timed(shmobj_queue *q, shmobj_ref *ref,
                                       int64_t timeout_ns);

/**
 * @brief Whether a message is waiting at the head (one try_take would
 *        succeed right now, unless another consumer is faster).
 * @param[in] q handle
 * @return true when a message waits; false when none does, q is NULL or
 *         the queue was destroyed
 * @note Thread- and process-safe, lock-free.
 * @since 0.1
 */
SHMOBJ_API bool shmobj_queue_has_messages(shmobj_queue *q);

/**
 * @brief Messages in the queue, counting puts in progress.
 * @param[in] q handle
 * @param[out] count number of messages (at most the capacity)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ESTALE the queue was destroyed
 * @note Thread- and process-safe, lock-free; a snapshot.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_count(shmobj_queue *q, uint64_t *count);

/**
 * @brief The queue's capacity.
 * @param[in] q handle
 * @param[out] capacity messages the queue holds
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_capacity(shmobj_queue *q, uint32_t *capacity);

/* ---- message blocks, bulk data and completion ----------------------------- */

/**
 * @brief Allocate a message block: SHMOBJ_QUEUE_MSG_HEADER bytes of header
 *        (completion word, length) and `len` bytes of data aligned to
 *        SHMOBJ_QUEUE_MSG_ALIGN, which the caller fills in place before
 *        putting the reference.
 * @param[in] q handle (names the segment)
 * @param[in] len bytes of data (0 allowed)
 * @param[in] flags 0 or SHMOBJ_QUEUE_MSG_TRACK (see the file's description
 *            of who frees what)
 * @param[out] ref the message block
 * @param[out] data this process's address of its data; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL q or ref, unknown flags, len too large
 * @retval SHMOBJ_ENOMEM no room in the segment
 * @retval SHMOBJ_ECORRUPT the heap is damaged
 * @retval SHMOBJ_ESTALE the segment handle was closed (and no retired
 *         block was reused)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (takes the segment lock, or the queue's
 *       retire lock when it reuses a retired block, see
 *       shmobj_queue_trim()). Works on a handle whose queue was destroyed
 *       (message blocks belong to the segment).
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_msg_alloc(shmobj_queue *q, size_t len,
                                      unsigned flags, shmobj_ref *ref,
                                      void **data);

/**
 * @brief The data of a message block, bounds- and generation-checked.
 * @param[in] q handle
 * @param[in] ref a message block
 * @param[out] data this process's address of the data
 * @param[out] len bytes of data; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, or ref names no block of this
 *         segment (its offset is not 16-byte aligned or lies beyond the
 *         segment)
 * @retval SHMOBJ_ESTALE the block was freed, or given back (done or
 *         freed, and waiting in the queue's retire FIFO)
 * @retval SHMOBJ_ETYPE ref names a live block that is not a message block
 * @retval SHMOBJ_ECORRUPT the block's message header is inconsistent (its
 *         length does not fit the block, its state is none), or the heap
 *         does not recognise the block
 * @note Thread- and process-safe, lock-free. The pointer is valid until the
 *       block is given back. The length returned is the one that was
 *       checked against the block, read once.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_msg_data(shmobj_queue *q, shmobj_ref ref,
                                     void **data, size_t *len);

/**
 * @brief Mark a message block done (consumer side). Frees an untracked
 *        block; wakes the sender of a tracked one (or frees it when the
 *        sender gave up waiting).
 * @param[in] q handle
 * @param[in] ref a message block the caller took from a queue
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL q or null ref, ref names no block of this
 *         segment, or the tracked message is already done
 * @retval SHMOBJ_ESTALE the block was freed or given back (see
 *         shmobj_queue_msg_data())
 * @retval SHMOBJ_ETYPE ref names a live block that is not a message block
 * @retval SHMOBJ_ECORRUPT as for shmobj_queue_msg_data()
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe. Call it once per message: a second call
 *       on an untracked block, or on a tracked one whose sender gave up,
 *       gets SHMOBJ_ESTALE, also while the block waits in the retire FIFO.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_msg_done(shmobj_queue *q, shmobj_ref ref);

/**
 * @brief Wait until the consumer marked a tracked message block done
 *        (sender side). Sleeps on a futex (after the handle's spin, if
 *        any).
 * @param[in] q handle
 * @param[in] ref a message block allocated with SHMOBJ_QUEUE_MSG_TRACK
 * @param[in] timeout_ns 0 (just check), SHMOBJ_FOREVER, or nanoseconds
 * @retval 0 the message is done; free it with shmobj_queue_msg_free() or
 *         reuse it (then it must be re-armed with shmobj_queue_msg_reset())
 * @retval SHMOBJ_EPEERDEAD the consumer that took it died before marking it
 *         done (see "Crashes" above; told after a wait slice of 100 ms):
 *         the block is marked done on its behalf, and the sender frees it
 *         with shmobj_queue_msg_free() or puts it again (after
 *         shmobj_queue_msg_reset())
 * @retval SHMOBJ_EINVAL NULL q or null ref, ref names no block of this
 *         segment, the block is not tracked, or its sender gave up
 * @retval SHMOBJ_ETIMEDOUT not done in time (also with timeout_ns 0)
 * @retval SHMOBJ_EREPLACED at the deadline, or after any wait slice of
 *         100 ms while the call waited, the segment's name was
 *         removed or now names another segment (shmobj_segment_info_get()):
 *         its peers moved on
 * @retval SHMOBJ_ESTALE the block was freed or given back (see
 *         shmobj_queue_msg_data())
 * @retval SHMOBJ_ETYPE ref names a live block that is not a message block
 * @retval SHMOBJ_ECORRUPT as for shmobj_queue_msg_data()
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_msg_wait_done(shmobj_queue *q, shmobj_ref ref,
                                          int64_t timeout_ns);

/**
 * @brief Make a done tracked message block pending again so the sender can
 *        put it once more (reuse without reallocating).
 * @param[in] q handle
 * @param[in] ref a tracked message block whose wait returned 0
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL q or null ref, ref names no block of this
 *         segment, not tracked, or not done
 * @retval SHMOBJ_ESTALE the block was freed or given back (see
 *         shmobj_queue_msg_data())
 * @retval SHMOBJ_ETYPE ref names a live block that is not a message block
 * @retval SHMOBJ_ECORRUPT as for shmobj_queue_msg_data()
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_msg_reset(shmobj_queue *q, shmobj_ref ref);

/**
 * @brief Release the sender's hold on a message block: frees a tracked block
 *        that is done; a tracked block still pending is freed by the
 *        consumer's later shmobj_queue_msg_done(). An untracked block is
 *        freed at once (use this only for one that was never put).
 * @param[in] q handle
 * @param[in] ref a message block
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL q or null ref, or ref names no block of this
 *         segment
 * @retval SHMOBJ_ESTALE the block was already freed, given back, or
 *         handed over to the consumer by an earlier call
 * @retval SHMOBJ_ETYPE ref names a live block that is not a message block
 * @retval SHMOBJ_ECORRUPT as for shmobj_queue_msg_data()
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe (may take the segment lock).
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_msg_free(shmobj_queue *q, shmobj_ref ref);

/**
 * @brief Copy-in helper: allocate a message block of `len` bytes, copy
 *        `data` into it (memcpy), and put it, waiting up to timeout_ns for
 *        room.
 * @param[in] q handle
 * @param[in] data bytes to send (may be NULL when len is 0)
 * @param[in] len number of bytes
 * @param[in] flags 0 (the consumer frees it with shmobj_queue_msg_done()) or
 *            SHMOBJ_QUEUE_MSG_TRACK (the sender waits and frees)
 * @param[in] timeout_ns 0 (do not wait), SHMOBJ_FOREVER, or nanoseconds
 * @param[out] ref the message block put; may be NULL (then flags must not
 *             ask for tracking)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL q, NULL data with len > 0, unknown flags, or
 *         tracking without ref
 * @retval SHMOBJ_ENOMEM no room in the segment
 * @retval SHMOBJ_EFULL the queue is full and timeout_ns is 0 (nothing sent)
 * @retval SHMOBJ_ETIMEDOUT still full at the timeout (nothing sent)
 * @retval SHMOBJ_EREPLACED at the deadline, or after any wait slice of
 *         100 ms while the call waited, the segment's name was
 *         removed or now names another segment (shmobj_segment_info_get()):
 *         its peers moved on
 * @retval SHMOBJ_ECORRUPT the heap or the ring is damaged (nothing sent)
 * @retval SHMOBJ_ESTALE the queue was destroyed, or the segment handle
 *         was closed (nothing sent)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe. The consumer reads the bytes with
 *       shmobj_queue_msg_data(). The copy is memcpy in pieces of 64 KiB
 *       up to 4 times the L2; beyond, on x86-64, a loop of streaming
 *       stores (see the file's description).
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_put_copy(shmobj_queue *q, const void *data,
                                     size_t len, unsigned flags,
                                     int64_t timeout_ns, shmobj_ref *ref);

/* ---- completion for any reference ------------------------------------------ */

/**
 * @brief Put any reference (an object from shmobj_obj_put(), a raw block
 *        from shmobj_arena_alloc(), a message block) with completion: the
 *        consumer marks it done with shmobj_queue_done(), this handle waits
 *        with shmobj_queue_wait_done() or shmobj_queue_wait_all(). No
 *        envelope is allocated.
 *
 * The queue records the reference in one of its completion records (twice
 * its capacity of them, 64 to 8,192; every one of them may be in use at
 * once, whatever the references), owned by this handle, then puts it as
 * shmobj_queue_put_timed() does; a put that fails leaves no record. A
 * record is held from this put until the sender's wait returned 0 or
 * SHMOBJ_EPEERDEAD, or its untrack.
 *
 * Ownership: the reference stays the sender's. The consumer borrows it
 * from its take to its shmobj_queue_done() and frees nothing; after
 * shmobj_queue_wait_done() (or shmobj_queue_wait_all()) returned 0 the
 * sender may free it (shmobj_obj_free(), shmobj_arena_free()) or put it
 * again. A sender that stops waiting calls shmobj_queue_untrack(). The
 * queue never frees a tracked reference.
 *
 * Crashes: the rules of the queue apply ("Crashes" above). A consumer
 * killed after its take never marks the reference done: the sender's wait
 * learns that the consumer which took it died and returns
 * SHMOBJ_EPEERDEAD with the record released (the reference is the
 * sender's again), one wait slice after the death at the latest
 * (shmobj_queue_wait_done()). A sender killed with references tracked
 * leaves their records, which a later tracked put reclaims when it needs
 * them.
 * @param[in] q handle
 * @param[in] ref as for shmobj_queue_put()
 * @param[in] timeout_ns 0 (do not wait), SHMOBJ_FOREVER, or nanoseconds
 * @retval 0 success
 * @retval SHMOBJ_EINVAL q is NULL, ref is null or not 16-byte aligned
 * @retval SHMOBJ_EEXIST ref is tracked on this queue already (not yet
 *         released by its sender's wait or untrack)
 * @retval SHMOBJ_ETRACKFULL every completion record of the queue is held
 *         (by live senders: too many tracked references outstanding);
 *         nothing sent. Wait for earlier ones (shmobj_queue_wait_done(),
 *         shmobj_queue_wait_all()) or untrack them, then put again
 * @retval SHMOBJ_ENOTSUP this process has no attachment token in the
 *         segment (its table of attached handles is full), so no record
 *         could be judged later; nothing sent
 * @retval SHMOBJ_EFULL the queue is full and timeout_ns is 0 (nothing sent)
 * @retval SHMOBJ_ETIMEDOUT still full when the timeout passed (nothing sent)
 * @retval SHMOBJ_EREPLACED at the deadline, or after any wait slice of
 *         100 ms while the call waited, the segment's name was
 *         removed or now names another segment (nothing sent)
 * @retval SHMOBJ_ECORRUPT as for shmobj_queue_put()
 * @retval SHMOBJ_ESTALE the queue was destroyed (nothing sent)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe. Lock-free while there is room.
 * @since 0.2
 */
SHMOBJ_API int shmobj_queue_put_tracked(shmobj_queue *q, shmobj_ref ref,
                                        int64_t timeout_ns);

/**
 * @brief Mark a reference put with shmobj_queue_put_tracked() done
 *        (consumer side) and wake its sender. Frees nothing: after this the
 *        consumer must not use the reference any more.
 * @param[in] q handle of the queue it came from
 * @param[in] ref the reference taken
 * @retval 0 success
 * @retval SHMOBJ_EINVAL q is NULL, ref is null or not 16-byte aligned, or
 *         ref was marked done already
 * @retval SHMOBJ_ENOTFOUND ref is not tracked on this queue (put with
 *         shmobj_queue_put(), or released by its sender)
 * @retval SHMOBJ_ESTALE its sender stopped tracking it
 *         (shmobj_queue_untrack()) before this call; this call emptied the
 *         record; or the queue was destroyed
 * @retval SHMOBJ_ECORRUPT the queue's block no longer checks out
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe, lock-free.
 * @since 0.2
 */
SHMOBJ_API int shmobj_queue_done(shmobj_queue *q, shmobj_ref ref);

/**
 * @brief Wait until the consumer marked a reference this handle put with
 *        shmobj_queue_put_tracked() done (sender side); then release its
 *        record: the reference is the sender's again.
 * @param[in] q the handle that put it
 * @param[in] ref the reference
 * @param[in] timeout_ns 0 (just check), SHMOBJ_FOREVER, or nanoseconds
 * @retval 0 done; the record is released, ref may be freed or put again
 * @retval SHMOBJ_EPEERDEAD the consumer that took ref died before marking
 *         it done (told after a wait slice of 100 ms, within a slice of the
 *         death): the record is released, ref is the sender's again
 * @retval SHMOBJ_EINVAL q is NULL, ref is null or not 16-byte aligned
 * @retval SHMOBJ_ENOTFOUND this handle tracks no such reference (never
 *         put tracked, released already, or untracked)
 * @retval SHMOBJ_ETIMEDOUT not done in time (also with timeout_ns 0); the
 *         record stays: wait again, or shmobj_queue_untrack()
 * @retval SHMOBJ_EREPLACED at the deadline, or after any wait slice of
 *         100 ms while the call waited, the segment's name was
 *         removed or now names another segment: its peers moved on
 * @retval SHMOBJ_ESTALE the queue was destroyed, also while the caller
 *         waited
 * @retval SHMOBJ_ECORRUPT the queue's block no longer checks out
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe. Sleeps on a futex after the handle's spin
 *       (shmobj_queue_spin_set()).
 * @since 0.2
 */
SHMOBJ_API int shmobj_queue_wait_done(shmobj_queue *q, shmobj_ref ref,
                                      int64_t timeout_ns);

/**
 * @brief Wait until every reference this handle put with
 *        shmobj_queue_put_tracked() and has not released yet is done, and
 *        release their records.
 * @param[in] q handle
 * @param[in] timeout_ns 0 (just check), SHMOBJ_FOREVER, or nanoseconds: a
 *            deadline for the whole call
 * @retval 0 everything is done (or nothing was tracked); every record is
 *         released
 * @retval SHMOBJ_EPEERDEAD everything is done or released, and the
 *         consumer of at least one died before marking it done (as for
 *         shmobj_queue_wait_done()): every record is released
 * @retval SHMOBJ_EINVAL q is NULL
 * @retval SHMOBJ_ETIMEDOUT some were not done in time; those that were are
 *         released, the others stay tracked
 * @retval SHMOBJ_EREPLACED at the deadline, or after any wait slice of
 *         100 ms while the call waited, the segment's name was
 *         removed or now names another segment: its peers moved on
 * @retval SHMOBJ_ESTALE the queue was destroyed, also while the caller
 *         waited
 * @retval SHMOBJ_ECORRUPT the queue's block no longer checks out
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread-safe with the handle's other calls. Looks through every
 *       completion record of the queue once, unless the handle holds none.
 * @since 0.2
 */
SHMOBJ_API int shmobj_queue_wait_all(shmobj_queue *q, int64_t timeout_ns);

/**
 * @brief Stop tracking a reference this handle put with
 *        shmobj_queue_put_tracked() (sender side), e.g. after a wait timed
 *        out.
 * @param[in] q the handle that put it
 * @param[in] ref the reference
 * @retval 0 it was done: the record is released, ref is the sender's
 * @retval SHMOBJ_EINUSE it was not done: the record is handed to the
 *         consumer's shmobj_queue_done(), which releases it (and gets
 *         SHMOBJ_ESTALE). A consumer may still be using ref; the sender
 *         frees it only when it knows none does (the consumer died, or the
 *         application says so)
 * @retval SHMOBJ_EINVAL q is NULL, ref is null or not 16-byte aligned
 * @retval SHMOBJ_ENOTFOUND this handle tracks no such reference
 * @retval SHMOBJ_ESTALE the queue was destroyed
 * @retval SHMOBJ_ECORRUPT the queue's block no longer checks out
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe, lock-free.
 * @since 0.2
 */
SHMOBJ_API int shmobj_queue_untrack(shmobj_queue *q, shmobj_ref ref);

/* ---- event loops -------------------------------------------------------- */

/**
 * @brief A descriptor that becomes readable when messages wait, for poll,
 *        epoll, libuv or an asyncio reader. Registers this handle as a
 *        listener of the queue (at most 8 handles per queue at once; those of
 *        dead processes are reclaimed).
 *
 * Use it like this: shmobj_queue_notify_arm(); poll() for POLLIN (with a
 * timeout, see below); take messages with shmobj_queue_try_take() until
 * SHMOBJ_EEMPTY; repeat. Readability is a hint: another consumer may have
 * taken the message first. A producer that died half-way through a put is
 * noticed only by a take, so give poll() a timeout (e.g. 100 ms).
 * @param[in] q handle
 * @param[out] fd the descriptor, owned by the handle (do not close or read
 *             it; shmobj_queue_close() closes it)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_EFULL 8 live handles already listen on this queue
 * @retval SHMOBJ_ESTALE the queue was destroyed
 * @retval SHMOBJ_ECORRUPT the queue's block no longer checks out
 * @retval SHMOBJ_ENOTSUP neither /dev/shm nor /proc is available
 * @retval SHMOBJ_ESYS creating the pipe failed (errno is kept)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread-safe. Linux only. The registration belongs to the process
 *       that made it: a child forked afterwards opens its own handle with
 *       shmobj_queue_open() before it asks for a descriptor.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_notify_fd(shmobj_queue *q, int *fd);

/**
 * @brief Prepare the descriptor of shmobj_queue_notify_fd() for the next
 *        poll(): empty it, then ask producers to make it readable at their
 *        next put. When a message already waits, the descriptor is made
 *        readable at once, so polling after this call never misses one.
 * @param[in] q handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL q is NULL or shmobj_queue_notify_fd() was not called
 * @retval SHMOBJ_ESTALE the queue was destroyed
 * @retval SHMOBJ_ECORRUPT the queue's block no longer checks out
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread-safe. Producers write to the descriptor once per arm, not
 *       once per message.
 * @since 0.1
 */
SHMOBJ_API int shmobj_queue_notify_arm(shmobj_queue *q);

/* ---- statistics and checks (tools) ---------------------------------------- */

/** @brief Figures of a queue, see shmobj_queue_stats_get(). */
typedef struct shmobj_queue_stats {
    uint32_t struct_size; /**< sizeof(shmobj_queue_stats), set by the caller */
    uint32_t capacity;    /**< messages it holds */
    uint64_t depth;       /**< messages waiting or being put or taken now */
    /** positions producers claimed since creation: every put, including
     *  one under way and one whose producer died before publishing */
    uint64_t puts;
    /** positions consumers claimed since creation: every take, including
     *  the skipped slots */
    uint64_t takes;
    uint64_t skipped;  /**< slots consumers skipped: their producer died or
                            stalled before publishing */
    uint64_t rescued;  /**< slots producers released for a consumer that
                            died holding them */
    /** consumer threads of live processes asleep or about to be (a
     *  process killed while asleep is left out once it is gone; see the
     *  note of shmobj_queue_stats_get()) */
    uint32_t consumers_waiting;
    /** producer threads of live processes asleep or about to be */
    uint32_t producers_waiting;
    uint32_t listeners;  /**< pollable descriptors registered */
    uint32_t armed;      /**< of them, armed (waiting for a message) */
    uint64_t retired_blocks; /**< done message blocks held back from the
                                  heap (shmobj_queue_trim()) */
    uint64_t retired_bytes;  /**< their usable bytes */
} shmobj_queue_stats;

/**
 * @brief Figures of a queue: depth, capacity, totals, crash counters.
 *
 * Each figure is one relaxed load of the queue's own counters (no counter
 * is kept for this call: puts and takes are the ring's positions), so
 * they are a snapshot of moving values: two calls a second apart give the
 * messages per second as the difference of `takes`. The waiting threads
 * leave out those of processes that died asleep: their counts stay in the
 * queue's totals until a later wake-up repairs them (see "Crashes"
 * above), and this call subtracts what the sleeper records of dead
 * handles hold (a process that found all 8 records taken is counted in
 * the totals only, and stays counted).
 * @param[in] q queue
 * @param[in,out] stats struct_size set by the caller, the rest filled
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or struct_size too small
 * @retval SHMOBJ_ESTALE the queue was destroyed
 * @note Thread- and process-safe; lock-free, writes nothing.
 * @since 0.2
 */
SHMOBJ_API int shmobj_queue_stats_get(shmobj_queue *q, shmobj_queue_stats *stats);

/**
 * @brief Check a queue's bytes: its ring header against the handle's
 *        validated copy, every slot word, the claim positions and the
 *        retire FIFO.
 *
 * A slot must hold a marker of a position it can hold (EMPTY or SKIPPED
 * of a position equal to its index modulo the capacity) or a message (a
 * reference of the segment's size, its low bits the lap tag); the
 * consumers' position may not pass the producers'; the retire FIFO's
 * header and positions must be ones the library writes.
 * @param[in] q queue
 * @param[out] bad_off on SHMOBJ_ECORRUPT, the segment offset of the first
 *             bad word; may be NULL
 * @retval 0 consistent
 * @retval SHMOBJ_EINVAL NULL q
 * @retval SHMOBJ_ESTALE the queue was destroyed
 * @retval SHMOBJ_ECORRUPT something is damaged (see bad_off)
 * @note Thread- and process-safe; lock-free, writes nothing. Reads what
 *       producers and consumers change meanwhile: each word is judged
 *       alone, so a live queue never reads as damaged.
 * @since 0.2
 */
SHMOBJ_API int shmobj_queue_check(shmobj_queue *q, uint64_t *bad_off);

#ifdef __cplusplus
}
#endif
#endif /* SHMOBJ_QUEUE_H */
