/**
 * @file shmobj/topic.h
 * @brief Topics: publish once, every subscriber reads every message in
 *        place, in one order, with history for late joiners.
 *
 * A topic is a named ring of message references in a segment. A message
 * is one heap block of the segment (a loan filled in place, a copy, or any
 * block handed over by reference); publishing puts its reference in the
 * next slot of the ring, in one total order across every publisher. Each
 * subscriber has a cursor: it takes the messages published after it joined,
 * in that order, reads them in place and releases them. A block goes back
 * to the heap once every subscriber that could see it released it and it
 * left the history (the last `history` messages, given first to a
 * subscriber that joins late).
 *
 * A subscriber that falls behind by the ring's capacity holds the
 * publishers up (SHMOBJ_TOPIC_BLOCK: they wait, with a timeout) or loses
 * its oldest unread messages (SHMOBJ_TOPIC_OVERWRITE: the next message it
 * takes says how many it missed). Messages a subscriber holds (taken, not
 * yet released) are never overwritten.
 *
 * A process that dies holding messages, or with a loan not yet published,
 * gives them back through repair, judged by the segment's process table
 * (not by pids). The format and the protocols: doc/format-topic.md.
 *
 * @note A topic handle may be used by many threads at once. A subscriber
 *       handle is used by one thread at a time.
 */
#ifndef SHMOBJ_TOPIC_H
#define SHMOBJ_TOPIC_H

#include <stddef.h>
#include <stdint.h>

#include "shmobj/api.h"
#include "shmobj/error.h"
#include "shmobj/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief A process's handle of a topic (publishing and joining). */
typedef struct shmobj_topic shmobj_topic;
/** @brief One subscriber of a topic. */
typedef struct shmobj_topic_sub shmobj_topic_sub;

/** @brief Longest topic name in bytes, without the NUL. */
#define SHMOBJ_TOPIC_NAME_MAX 47
/** @brief Largest ring capacity (messages). */
#define SHMOBJ_TOPIC_CAPACITY_MAX (1u << 20)
/** @brief Most subscribers one topic can be made for. */
#define SHMOBJ_TOPIC_SUBSCRIBERS_MAX 65536u
/** @brief Loans (allocated, not yet published messages) one topic can
 *         have outstanding at once, across all its publishers. */
#define SHMOBJ_TOPIC_LOANS_MAX 256u

/** @brief What a publisher does when a subscriber is a whole ring behind. */
enum shmobj_topic_policy {
    /** wait (with the publish's timeout) until the slowest subscriber
     *  released enough */
    SHMOBJ_TOPIC_BLOCK = 0,
    /** drop the slowest subscriber's oldest unread messages; it is told how
     *  many (shmobj_topic_msg.missed) */
    SHMOBJ_TOPIC_OVERWRITE = 1
};

/** @brief How a topic is made (shmobj_topic_config_init() gives defaults). */
typedef struct shmobj_topic_config {
    /** ring slots: a power of two in 2..SHMOBJ_TOPIC_CAPACITY_MAX, larger
     *  than history (default 256) */
    uint32_t capacity;
    /** messages kept for late joiners, less than capacity (default 0) */
    uint32_t history;
    /** subscribers at most, 1..SHMOBJ_TOPIC_SUBSCRIBERS_MAX (default 1024) */
    uint32_t subscribers;
    /** enum shmobj_topic_policy (default SHMOBJ_TOPIC_BLOCK) */
    uint32_t policy;
} shmobj_topic_config;

/** @brief A message being built in place before it is published. */
typedef struct shmobj_topic_loan {
    shmobj_ref ref; /**< the message block */
    void *data;     /**< its bytes, in this process */
    uint64_t size;  /**< bytes asked for (the block may be larger) */
    uint32_t slot;  /**< internal: the loan's record */
} shmobj_topic_loan;

/** @brief A message taken by a subscriber, read in place. */
typedef struct shmobj_topic_msg {
    const void *data; /**< its bytes, valid until released */
    uint64_t len;     /**< its length in bytes */
    shmobj_ref ref;   /**< its block */
    uint64_t seq;     /**< its place in the topic's order (0, 1, ...) */
    /** messages this subscriber lost just before this one (overwrite
     *  policy; always 0 under SHMOBJ_TOPIC_BLOCK) */
    uint64_t missed;
} shmobj_topic_msg;

/** @brief Figures of a topic, for tools and tests. `subscribers` and
 *         `max_lag` count the records of dead subscribers too, until
 *         repair frees them; shmobj_topic_subscribers_get() tells them
 *         apart. */
typedef struct shmobj_topic_stats {
    uint64_t published;    /**< messages published so far */
    uint64_t retained;     /**< messages whose blocks are still kept */
    uint32_t capacity;     /**< ring slots */
    uint32_t history;      /**< messages kept for late joiners */
    uint32_t subscribers;  /**< subscriber records in use */
    uint32_t loans;        /**< loans outstanding */
    uint64_t max_lag;      /**< most messages any subscriber has not taken */
    uint64_t missed;       /**< messages lost by all subscribers (overwrite) */
    uint32_t spares;       /**< released message blocks kept for new loans */
} shmobj_topic_stats;

/**
 * @brief Fill a configuration with the defaults: capacity 256, history 0,
 *        1,024 subscribers, SHMOBJ_TOPIC_BLOCK.
 * @param[out] cfg the configuration (nothing when NULL)
 * @since 0.3
 */
SHMOBJ_API void shmobj_topic_config_init(shmobj_topic_config *cfg);

/* ---- lifecycle ------------------------------------------------------------ */

/**
 * @brief Create a named topic in a segment and open it.
 *
 * The topic's block (256 bytes, 32 per ring slot, 64 per subscriber record,
 * 4.25 KiB of loan records: 76 KiB for 256 slots and 1,024 subscribers) is
 * published as the root `name` (one namespace for every kind of root).
 * @param[in] seg segment
 * @param[in] name 1..SHMOBJ_TOPIC_NAME_MAX bytes, NUL-terminated
 * @param[in] cfg the configuration (NULL: the defaults)
 * @param[out] out the new handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, bad name or configuration
 * @retval SHMOBJ_EEXIST a root of that name exists
 * @retval SHMOBJ_ENOMEM no room in the segment or for the handle
 * @retval SHMOBJ_EFULL the root directory is full
 * @retval SHMOBJ_ECORRUPT the segment is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_create(shmobj_segment *seg, const char *name,
                                   const shmobj_topic_config *cfg,
                                   shmobj_topic **out);

/**
 * @brief Open an existing topic by name.
 * @param[in] seg the segment
 * @param[in] name the topic's name (a root name of the segment)
 * @param[out] out the handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_ENOTFOUND no root of that name
 * @retval SHMOBJ_ETYPE the root is not a topic
 * @retval SHMOBJ_ESTALE the topic is being destroyed
 * @retval SHMOBJ_ECORRUPT the topic's block is damaged
 * @retval SHMOBJ_EVERSION the topic's block has another format version
 * @retval SHMOBJ_ENOMEM no memory for the handle
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_open(shmobj_segment *seg, const char *name,
                                 shmobj_topic **out);

/**
 * @brief Open a topic, waiting up to timeout_ns for another process to
 *        create it (the side that starts first need not create it).
 * @param[in] seg the segment
 * @param[in] name the topic's name (a root name of the segment)
 * @param[in] timeout_ns how long to wait: 0 not at all, negative for ever, else nanoseconds
 * @param[out] out the handle
 * @retval SHMOBJ_ETIMEDOUT it did not appear in time
 * @retval others as shmobj_topic_open()
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_open_timed(shmobj_segment *seg, const char *name,
                                       int64_t timeout_ns, shmobj_topic **out);

/**
 * @brief Open the topic, creating it with cfg when it does not exist.
 *        Of several processes doing this at once, one creates it and the
 *        others open it. An existing topic keeps its own configuration.
 * @param[in] seg the segment
 * @param[in] name the topic's name (a root name of the segment)
 * @param[in] cfg the configuration, used when it is created (NULL: the defaults)
 * @param[out] out the handle
 * @retval others as shmobj_topic_create() and shmobj_topic_open()
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_open_or_create(shmobj_segment *seg,
                                           const char *name,
                                           const shmobj_topic_config *cfg,
                                           shmobj_topic **out);

/**
 * @brief Close a handle. Its subscribers may be ended before or after it
 *        (each holds the handle until shmobj_topic_unsubscribe()), and it
 *        may be closed before or after its segment handle: from the
 *        segment's close on, calls through it and its subscribers return
 *        SHMOBJ_ESTALE. Loans not published stay recorded for this
 *        process: cancel them first, or repair gives them back once the
 *        process has ended.
 * @param[in] t the handle (nothing when NULL)
 * @since 0.3
 */
SHMOBJ_API void shmobj_topic_close(shmobj_topic *t);

/**
 * @brief Destroy a topic: its name goes, every message block it kept goes
 *        back to the heap, and every handle's next call fails with
 *        SHMOBJ_ESTALE (blocked calls wake). Data pointers of messages
 *        still held become invalid.
 * @param[in] seg the segment
 * @param[in] name the topic's name (a root name of the segment)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_ENOTFOUND no root of that name
 * @retval SHMOBJ_ETYPE the root is not a topic
 * @retval SHMOBJ_ESTALE the topic is being destroyed already
 * @retval SHMOBJ_ECORRUPT the topic is damaged
 * @retval SHMOBJ_EVERSION the topic's block has another format version
 * @retval SHMOBJ_EBUSY a live process held the topic's lock, or the
 *         segment lock, for 10 s
 * @retval SHMOBJ_ENOMEM no memory for a handle
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_destroy(shmobj_segment *seg, const char *name);

/**
 * @brief Give back what dead processes left: the records of subscribers
 *        and the loans of publishers whose handles are gone (judged by the
 *        segment's process table). Publishers and joiners do this by
 *        themselves when a dead subscriber holds them up or the records
 *        run out; this call is for tools and tests.
 * @param[in] t the handle
 * @param[out] freed records and loans given back (may be NULL)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL handle
 * @retval SHMOBJ_ESTALE the topic was destroyed
 * @retval SHMOBJ_ECORRUPT the topic's records are damaged
 * @retval SHMOBJ_EBUSY a live process held the topic's lock for 10 s
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_repair(shmobj_topic *t, unsigned *freed);

/**
 * @brief Read the topic's figures.
 * @param[in] t the topic handle
 * @param[out] st the figures
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ESTALE the topic was destroyed
 * @retval SHMOBJ_ECORRUPT the topic's counters are inconsistent
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_stats_get(shmobj_topic *t, shmobj_topic_stats *st);

/** @brief Bits of shmobj_topic_sub_info.flags. */
enum shmobj_topic_sub_flag {
    /** the handle that joined is gone (its process died, or closed its
     *  segment without leaving): the record waits for repair (publishers
     *  and joiners do it when they need it, or shmobj_topic_repair()) */
    SHMOBJ_TOPIC_SUB_DEAD = 1u << 0,
    /** its pollable descriptor is armed (shmobj_topic_notify_arm()) */
    SHMOBJ_TOPIC_SUB_ARMED = 1u << 1
};

/** @brief One subscriber of a topic, see shmobj_topic_subscribers_get(). */
typedef struct shmobj_topic_sub_info {
    /** attachment token of the segment handle it joined through (as
     *  shmobj_segment_proc.token names it) */
    uint32_t token;
    uint32_t flags;   /**< enum shmobj_topic_sub_flag bits */
    uint64_t next;    /**< sequence of the next message it will take */
    uint64_t lag;     /**< messages published that it has not taken yet */
    uint64_t held;    /**< messages it took and has not released yet */
    uint64_t missed;  /**< messages it lost (SHMOBJ_TOPIC_OVERWRITE) */
    uint32_t index;   /**< its record in the topic (informational) */
    uint32_t reserved; /**< 0 */
} shmobj_topic_sub_info;

/**
 * @brief The subscribers of a topic now: each one's lag, held messages
 *        and losses, and whether the process that joined is still alive.
 *
 * Lists the records in use, in record order. A subscriber whose process
 * died (killed while it waited, for instance) keeps its record until
 * repair, and is listed with SHMOBJ_TOPIC_SUB_DEAD, never as a live one.
 * @param[in] t the topic handle
 * @param[out] subs where the entries go (may be NULL when cap is 0)
 * @param[in] cap entries available at subs
 * @param[out] count subscribers in use (also on SHMOBJ_ENOBUFS)
 * @retval 0 success: subs[0 .. *count) filled
 * @retval SHMOBJ_EINVAL NULL t or count, or NULL subs with cap > 0
 * @retval SHMOBJ_ENOBUFS more than cap are in use: the first cap are
 *         filled, *count says how many there are
 * @retval SHMOBJ_ESTALE the topic was destroyed, or its segment handle was
 *         closed
 * @retval SHMOBJ_ECORRUPT the topic's counters are inconsistent
 * @note Thread- and process-safe; lock-free, writes nothing. A snapshot:
 *       subscribers come, go and move meanwhile.
 * @since 0.4
 */
SHMOBJ_API int shmobj_topic_subscribers_get(shmobj_topic *t,
                                            shmobj_topic_sub_info *subs,
                                            size_t cap, size_t *count);

/* ---- publishing ------------------------------------------------------------ */

/**
 * @brief Allocate a message block of `size` bytes in the segment, to be
 *        filled in place and published with shmobj_topic_loan_publish().
 *        The loan is recorded in the topic, so a publisher that dies before
 *        publishing gives the block back through repair.
 * @param[in] t the handle
 * @param[in] size bytes (1 and up)
 * @param[out] loan the block
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, size 0 or above 2^47
 * @retval SHMOBJ_ENOMEM no room in the segment
 * @retval SHMOBJ_EFULL SHMOBJ_TOPIC_LOANS_MAX loans are outstanding
 * @retval SHMOBJ_ESTALE the topic was destroyed
 * @retval SHMOBJ_ECORRUPT the segment's heap is damaged (nothing was
 *         allocated)
 * @retval SHMOBJ_EBUSY every loan record was taken and a live process
 *         held the topic's lock for 10 s (the repair that gives dead
 *         publishers' loans back waits for it)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_loan_get(shmobj_topic *t, uint64_t size,
                                     shmobj_topic_loan *loan);

/**
 * @brief Publish a loan as a message of `len` bytes (at most its size).
 *        On success the block belongs to the topic; on failure it is still
 *        the caller's loan (publish again or cancel it).
 * @param[in] t the topic handle
 * @param[in,out] loan the loan (from shmobj_topic_loan_get())
 * @param[in] len bytes of the message
 * @param[in] timeout_ns under SHMOBJ_TOPIC_BLOCK, how long to wait for the
 *            slowest subscriber (negative: forever; 0: not at all)
 * @retval 0 published
 * @retval SHMOBJ_EINVAL NULL argument, len 0 or beyond the loan, or a loan
 *         not of this handle
 * @retval SHMOBJ_ETIMEDOUT a subscriber stayed a whole ring behind for the
 *         timeout (0 as timeout: SHMOBJ_EFULL)
 * @retval SHMOBJ_EFULL the ring is full of messages subscribers hold
 *         (timeout 0)
 * @retval SHMOBJ_ESTALE the topic was destroyed
 * @retval SHMOBJ_ECORRUPT the topic is damaged
 * @retval SHMOBJ_EBUSY a live process held the topic's lock for 10 s
 * @retval SHMOBJ_EREPLACED the segment's name now names another segment
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_loan_publish(shmobj_topic *t,
                                         shmobj_topic_loan *loan, uint64_t len,
                                         int64_t timeout_ns);

/**
 * @brief Give an unpublished loan's block back.
 * @param[in] t the topic handle
 * @param[in,out] loan the loan (from shmobj_topic_loan_get())
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or a loan not of this handle
 * @retval SHMOBJ_ESTALE the topic was destroyed (its loans' blocks went
 *         back with it), or the heap found the block freed already: the
 *         loan's record is cleared all the same
 * @retval SHMOBJ_ECORRUPT the heap refused the block as damaged: the
 *         loan's record is cleared all the same
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_loan_cancel(shmobj_topic *t,
                                        shmobj_topic_loan *loan);

/**
 * @brief Publish a copy of `len` bytes (a loan, one copy, a publish).
 * @param[in] t the topic handle
 * @param[in] data the bytes to copy into the message
 * @param[in] len bytes of the message
 * @param[in] timeout_ns how long to wait: 0 not at all, negative for ever, else nanoseconds
 * @retval others as shmobj_topic_loan_get() and shmobj_topic_loan_publish()
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_publish(shmobj_topic *t, const void *data,
                                    uint64_t len, int64_t timeout_ns);

/**
 * @brief Publish an existing heap block of the segment by reference (a
 *        typed object of one block, a raw block): on success it belongs
 *        to the topic, which frees it when every subscriber is done. The
 *        caller must not free it, nor publish it again (here or on another
 *        topic): the topic would free it twice.
 * @param[in] t the topic handle
 * @param[in] timeout_ns how long to wait: 0 not at all, negative for ever, else nanoseconds
 * @param[in] ref the block
 * @param[in] len bytes of the message, at most the block's usable size
 * @retval SHMOBJ_ESTALE the reference names a freed block, or the topic
 *         was destroyed
 * @retval SHMOBJ_ECORRUPT the reference names no block
 * @retval others as shmobj_topic_loan_publish()
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_publish_ref(shmobj_topic *t, shmobj_ref ref,
                                        uint64_t len, int64_t timeout_ns);

/* ---- subscribing ----------------------------------------------------------- */

/**
 * @brief Join the topic. The subscriber first gets the last `history`
 *        messages still kept, then every message published after.
 * @param[in] t the topic handle
 * @param[out] out the new subscriber
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_EFULL every subscriber record is held by a live
 *         subscriber (the topic's `subscribers` limit)
 * @retval SHMOBJ_ESTALE the topic was destroyed
 * @retval SHMOBJ_ENOMEM no memory for the handle
 * @retval SHMOBJ_ECORRUPT the topic is damaged
 * @retval SHMOBJ_EBUSY a live process held the topic's lock for 10 s
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_subscribe(shmobj_topic *t, shmobj_topic_sub **out);

/**
 * @brief Leave: every message the subscriber holds is released, its record
 *        is freed and the handle closed.
 * @param[in] s the subscriber (nothing when NULL)
 * @since 0.3
 */
SHMOBJ_API void shmobj_topic_unsubscribe(shmobj_topic_sub *s);

/**
 * @brief How long a blocking take spins before it sleeps (default 20 us):
 *        spinning answers faster, sleeping leaves the CPU to others.
 * @param[in] s the subscriber
 * @param[in] spin_ns nanoseconds (negative: 0)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL handle
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_spin_set(shmobj_topic_sub *s, int64_t spin_ns);

/**
 * @brief Take the next message, waiting up to timeout_ns for one.
 * @param[in] s the subscriber
 * @param[in] timeout_ns negative: forever; 0: do not wait
 * @param[out] msg the message, to be read in place, then released
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_EEMPTY no message (timeout 0)
 * @retval SHMOBJ_ETIMEDOUT no message within the timeout
 * @retval SHMOBJ_ESTALE the topic was destroyed, or the subscriber's record
 *         was taken back (judged dead by repair)
 * @retval SHMOBJ_ECORRUPT the topic's records are damaged
 * @retval SHMOBJ_EREPLACED the segment's name now names another segment
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_take(shmobj_topic_sub *s, shmobj_topic_msg *msg,
                                 int64_t timeout_ns);

/**
 * @brief shmobj_topic_take() without waiting.
 * @param[in] s the subscriber
 * @param[out] msg the message, to be read in place, then released
 * @retval 0 a message was taken
 * @retval SHMOBJ_EEMPTY none is there yet
 * @retval others as shmobj_topic_take()
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_try_take(shmobj_topic_sub *s, shmobj_topic_msg *msg);

/**
 * @brief Take up to `max` messages: waits up to timeout_ns for the first,
 *        then takes what is there without waiting.
 * @param[in] s the subscriber
 * @param[out] msgs room for `max` messages
 * @param[in] max the most messages to take
 * @param[in] timeout_ns how long to wait: 0 not at all, negative for ever, else nanoseconds
 * @param[out] n how many were taken
 * @retval 0 at least one taken
 * @retval SHMOBJ_EINVAL NULL argument or max 0
 * @retval others as shmobj_topic_take()
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_take_batch(shmobj_topic_sub *s,
                                       shmobj_topic_msg *msgs, unsigned max,
                                       unsigned *n, int64_t timeout_ns);

/**
 * @brief Release a message taken, and with it every message taken before
 *        it: their bytes may go away after this.
 * @param[in] s the subscriber
 * @param[in] msg a message this subscriber took
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, or a message not taken by s
 * @retval SHMOBJ_ESTALE the topic was destroyed or the record taken back
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_release(shmobj_topic_sub *s,
                                    const shmobj_topic_msg *msg);

/**
 * @brief A descriptor that polls readable once a message is there for this
 *        subscriber after shmobj_topic_notify_arm(). Owned by the handle.
 * @param[in] s the subscriber
 * @param[out] fd the descriptor (the subscriber's: do not close it)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ENOTSUP the system has neither /dev/shm nor /proc/self/fd
 * @retval SHMOBJ_ESTALE the topic was destroyed
 * @retval SHMOBJ_ESYS the pipe could not be made
 * @note The descriptor is a FIFO in /dev/shm that publishers open by name:
 *       it works between PID namespaces that share /dev/shm and between
 *       users (mode 0622). Without /dev/shm it is a pipe reached through
 *       /proc/PID/fd, within one PID namespace.
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_notify_fd(shmobj_topic_sub *s, int *fd);

/**
 * @brief Ask for one wake-up: the descriptor becomes readable when a
 *        message is there (at once when one already is). Call again after
 *        each wake-up, then take until SHMOBJ_EEMPTY.
 * @param[in] s the subscriber
 * @retval 0 success
 * @retval SHMOBJ_EINVAL no descriptor was asked for
 * @retval SHMOBJ_ESTALE the topic was destroyed
 * @since 0.3
 */
SHMOBJ_API int shmobj_topic_notify_arm(shmobj_topic_sub *s);

#ifdef __cplusplus
}
#endif

#endif /* SHMOBJ_TOPIC_H */
