/**
 * @file shmobj/service.h
 * @brief Request/response services: a client sends a request and gets the
 *        response to that request, with a timeout; many clients and many
 *        servers on one service.
 *
 * A service is a named pair in a segment: a queue of calls (the root
 * `NAME/calls`) and a table of the calls outstanding (the root `NAME`).
 * A client's shmobj_service_call() makes a call block, notes it in the
 * table, puts its reference in the queue and sleeps until a server has
 * answered that very call: the response travels in the call block, so it
 * cannot reach another client. A server takes calls with
 * shmobj_service_take() (or waits on a descriptor, shmobj_service_notify_fd())
 * and answers each with shmobj_service_reply().
 *
 * **What travels.** A request or a response (shmobj_service_msg) is bytes
 * (SHMOBJ_SERVICE_BYTES: copied into a block of the service), a raw block
 * of the segment (0: from shmobj_arena_alloc()) or a typed object
 * (SHMOBJ_SERVICE_OBJECT: from shmobj_obj_put()), the two last handed over
 * by reference, without a copy. A reference goes with the call: the
 * request is the server's from its take until its reply, which frees it;
 * the response is the client's once shmobj_service_call() returned 0, and
 * it gives it back with shmobj_service_release(). A reference that fails
 * to go (the call returned an error before the request was sent, the
 * reply returned an error) stays its owner's. Whatever is left when its
 * receiver is gone (a client that timed out or died, a server that died)
 * is freed by the service: a raw block with shmobj_arena_free(), an object
 * with shmobj_obj_free(). Send an object only when the object may be freed
 * that way (not one adopted into another).
 *
 * **Crashes.** A server killed with a call in hand (taken, not yet
 * answered) makes its client's shmobj_service_call() return
 * SHMOBJ_EPEERDEAD within a wait slice (100 ms) of the death, not a
 * timeout. A client killed or gone (timed out) leaves nothing behind:
 * the server that answers its call frees the request, the response and the
 * call, and what no server holds is freed by the repair
 * (shmobj_service_repair(), also run by shmobj_service_open() and by a
 * call that finds the table full), judged by the segment's process table.
 * One window is not covered: a server killed between the queue's take and
 * its claim of the call (a few instructions) leaves that call's client to
 * its timeout. The protocol: doc/protocols.md, "Services"; the bytes:
 * doc/format-service.md.
 *
 * @note A service handle may be used by many threads at once.
 */
#ifndef SHMOBJ_SERVICE_H
#define SHMOBJ_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "shmobj/api.h"
#include "shmobj/error.h"
#include "shmobj/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief A process's handle of a service (client, server, or both). */
typedef struct shmobj_service shmobj_service;

/** @brief Longest service name in bytes, without the NUL (its queue's
 *         root adds 6 bytes, "/calls", to the longest root name). */
#define SHMOBJ_SERVICE_NAME_MAX 41
/** @brief Largest capacity of a service (calls waiting in its queue). */
#define SHMOBJ_SERVICE_CAPACITY_MAX (1u << 16)
/** @brief Longest request or response of bytes (SHMOBJ_SERVICE_BYTES). */
#define SHMOBJ_SERVICE_BYTES_MAX (UINT64_C(1) << 40)

/** @brief What a shmobj_service_msg carries (its flags). */
enum shmobj_service_msg_flag {
    /** a typed object by reference (freed with shmobj_obj_free()) */
    SHMOBJ_SERVICE_OBJECT = 1u << 0,
    /** bytes: data and len; the service copies them into a block */
    SHMOBJ_SERVICE_BYTES = 1u << 1,
};

/** @brief A request or a response. */
typedef struct shmobj_service_msg {
    /** the block: a raw block or an object (set by the sender), or the
     *  block holding the bytes (set by the service) */
    shmobj_ref ref;
    /** the bytes (SHMOBJ_SERVICE_BYTES): read by the sender; set by the
     *  service for the receiver, valid until the message is freed */
    const void *data;
    /** bytes of data */
    size_t len;
    /** 0 (a raw block), SHMOBJ_SERVICE_OBJECT or SHMOBJ_SERVICE_BYTES */
    unsigned flags;
    /** set by shmobj_service_take(): the call to answer (internal) */
    shmobj_ref call;
} shmobj_service_msg;

/* ---- lifecycle ------------------------------------------------------------ */

/**
 * @brief Create a named service in a segment and open it.
 *
 * Makes the queue of calls (the root `NAME/calls`, of `capacity`
 * messages) and the table of calls outstanding (the root `NAME`: 64 bytes
 * plus 16 per call, twice `capacity` calls). Calls beyond that many at once
 * get SHMOBJ_EFULL.
 * @param[in] seg segment
 * @param[in] name 1..SHMOBJ_SERVICE_NAME_MAX bytes, NUL-terminated
 * @param[in] capacity calls that may wait in the queue: a power of two,
 *            2..SHMOBJ_SERVICE_CAPACITY_MAX
 * @param[in] flags 0
 * @param[out] out the new handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, bad name, capacity or flags
 * @retval SHMOBJ_EEXIST a root of that name (or of its queue's) exists; a
 *         creator that died half-way leaves its queue's, which
 *         shmobj_service_destroy() removes
 * @retval SHMOBJ_ENOMEM no room in the segment or for the handle
 * @retval SHMOBJ_EFULL the root directory is full
 * @retval SHMOBJ_ENOTSUP the segment has no process table (no liveness)
 * @retval SHMOBJ_ESTALE the segment handle was closed
 * @retval SHMOBJ_ECORRUPT the segment is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @since 0.4
 */
SHMOBJ_API int shmobj_service_create(shmobj_segment *seg, const char *name,
                                     uint32_t capacity, unsigned flags,
                                     shmobj_service **out);

/**
 * @brief Open an existing service by name, waiting up to a timeout until
 *        it exists; runs the repair (shmobj_service_repair()).
 * @param[in] seg segment
 * @param[in] name its name
 * @param[in] timeout_ns 0 (do not wait), SHMOBJ_FOREVER, or nanoseconds
 * @param[out] out the handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_ENOTFOUND no such service (timeout_ns 0)
 * @retval SHMOBJ_ETIMEDOUT it did not appear in time
 * @retval SHMOBJ_ETYPE the root of that name is not a service
 * @retval SHMOBJ_ENOMEM no memory for the handle
 * @retval SHMOBJ_ENOTSUP the segment has no process table
 * @retval SHMOBJ_ESTALE the service is being destroyed, or the segment
 *         handle was closed
 * @retval SHMOBJ_EREPLACED the segment's name was removed or replaced
 *         while the call waited
 * @retval SHMOBJ_EBUSY with SHMOBJ_FOREVER only: another live process held
 *         the segment's lock past its bound (see shmobj_segment_root_wait())
 * @retval SHMOBJ_EFULL a handle inherited through fork() could not attach
 *         (see shmobj_segment_root_wait())
 * @retval SHMOBJ_ECORRUPT the service's table or queue is damaged
 * @retval SHMOBJ_EVERSION the service's queue has another format version
 * @since 0.4
 */
SHMOBJ_API int shmobj_service_open(shmobj_segment *seg, const char *name,
                                   int64_t timeout_ns, shmobj_service **out);

/**
 * @brief Open a service, or create it when there is none: for processes
 *        that may start in any order. Of creators racing on one name, one
 *        creates and the others open what it made.
 * @param[in] seg segment
 * @param[in] name 1..SHMOBJ_SERVICE_NAME_MAX bytes, NUL-terminated
 * @param[in] capacity as shmobj_service_create(), used when it creates
 * @param[in] flags 0
 * @param[out] out the handle
 * @retval 0 success
 * @retval SHMOBJ_EEXIST the name stays taken without a service: the queue
 *         a creator that died half-way left (shmobj_service_destroy()
 *         removes it)
 * @retval others as shmobj_service_create() and shmobj_service_open()
 * @since 0.4
 */
SHMOBJ_API int shmobj_service_open_or_create(shmobj_segment *seg, const char *name,
                                             uint32_t capacity, unsigned flags,
                                             shmobj_service **out);

/**
 * @brief Close a handle (and its descriptor). Calls in flight elsewhere are
 *        not affected. NULL is accepted.
 * @param[in] svc the handle
 * @since 0.4
 */
SHMOBJ_API void shmobj_service_close(shmobj_service *svc);

/**
 * @brief Remove a service: unpublish its names and free its queue, its
 *        table and every call still in the table (with their requests and
 *        responses). Destroy a service only once no process uses it: a
 *        call waiting elsewhere returns SHMOBJ_ESTALE at its next wait
 *        slice.
 * Also removes what a creator that died half-way left: its queue's name
 * without the service's.
 * @param[in] seg segment
 * @param[in] name its name
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL seg or bad name
 * @retval SHMOBJ_ENOTFOUND no such service (nor a half-made one's queue)
 * @retval SHMOBJ_ETYPE the root of that name is not a service
 * @retval SHMOBJ_ESTALE the segment handle was closed
 * @retval SHMOBJ_ECORRUPT the service is damaged
 * @since 0.4
 */
SHMOBJ_API int shmobj_service_destroy(shmobj_segment *seg, const char *name);

/* ---- client ----------------------------------------------------------------- */

/**
 * @brief Send a request and wait for the response to it.
 * @param[in] svc the handle
 * @param[in] req the request: bytes (SHMOBJ_SERVICE_BYTES, data and len),
 *            or a raw block or object by reference (ref), which the service
 *            owns from this call's success or its SHMOBJ_ETIMEDOUT on
 * @param[in] timeout_ns SHMOBJ_FOREVER or nanoseconds (more than 0) for the
 *            whole call: room in the queue, the server's work, the answer
 * @param[out] resp the response on success: the caller's, to give back
 *             with shmobj_service_release()
 * @retval 0 the response to this request is in *resp
 * @retval SHMOBJ_EINVAL NULL argument, timeout_ns 0 or below (other than
 *         SHMOBJ_FOREVER), unknown flags, NULL data with len > 0, len
 *         beyond SHMOBJ_SERVICE_BYTES_MAX, both flags, or a null or stale
 *         request reference (nothing sent)
 * @retval SHMOBJ_EFULL every entry of the call table is in use (nothing
 *         sent)
 * @retval SHMOBJ_ETIMEDOUT no response in time: the call is given up; the
 *         server that answers it later, or the repair, frees the request and
 *         its response
 * @retval SHMOBJ_EPEERDEAD the server that took the request died before
 *         answering it; the request was freed
 * @retval SHMOBJ_ENOTFOUND the server gave the request back unanswered
 *         (shmobj_service_release()); the request was freed
 * @retval SHMOBJ_ENOMEM no room in the segment for the call (nothing sent)
 * @retval SHMOBJ_ENOTSUP this process has no attachment token (nothing sent)
 * @retval SHMOBJ_EREPLACED the segment's name was removed or replaced while
 *         the call waited for room (nothing sent), or, seen after a wait
 *         slice, while it waited for the answer (the call is given up as
 *         at a timeout)
 * @retval SHMOBJ_ESTALE the service was destroyed, or the segment handle
 *         was closed (before or while the call waited: then the call is
 *         given up as at a timeout)
 * @retval SHMOBJ_ECORRUPT the call block or the queue is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @note Thread- and process-safe. The wait sleeps on a futex and looks at
 *       the server's liveness once per slice of 100 ms.
 * @since 0.4
 */
SHMOBJ_API int shmobj_service_call(shmobj_service *svc,
                                   const shmobj_service_msg *req,
                                   int64_t timeout_ns, shmobj_service_msg *resp);

/**
 * @brief Give back a response (client: frees its block as its flags say),
 *        or a request taken and not to be answered (server: frees it, and
 *        its client's shmobj_service_call() returns SHMOBJ_ENOTFOUND).
 * @param[in] svc the handle
 * @param[in,out] msg a message from shmobj_service_call() or
 *            shmobj_service_take(); cleared on success
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, a null reference, or a request not
 *         taken by this process (or answered already)
 * @retval SHMOBJ_ESTALE the block (or the request's call) was freed already
 * @retval SHMOBJ_ECORRUPT the block is not one the heap knows, or the
 *         request's call is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @since 0.4
 */
SHMOBJ_API int shmobj_service_release(shmobj_service *svc,
                                      shmobj_service_msg *msg);

/* ---- server ----------------------------------------------------------------- */

/**
 * @brief Take the next request, waiting up to a timeout.
 * @param[in] svc the handle
 * @param[in] timeout_ns 0 (do not wait), SHMOBJ_FOREVER, or nanoseconds
 * @param[out] req the request: the server's until its
 *             shmobj_service_reply() (bytes: data and len are valid until
 *             then)
 * @retval 0 a request is in *req
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_EEMPTY no call waits (timeout_ns 0)
 * @retval SHMOBJ_ETIMEDOUT none came in time
 * @retval SHMOBJ_ENOTSUP this process has no attachment token
 * @retval SHMOBJ_EREPLACED the segment's name was removed or replaced while
 *         the call waited
 * @retval SHMOBJ_ESTALE the service was destroyed or the segment handle
 *         closed
 * @retval SHMOBJ_ECORRUPT the queue is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @note Thread- and process-safe. Calls given up by their clients, and
 *       damaged ones, are freed or skipped here and never handed out.
 * @since 0.4
 */
SHMOBJ_API int shmobj_service_take(shmobj_service *svc, int64_t timeout_ns,
                                   shmobj_service_msg *req);

/**
 * @brief Answer a request taken with shmobj_service_take(): free the
 *        request and hand the response to the client that sent it.
 * @param[in] svc the handle
 * @param[in,out] req the request taken; cleared on success
 * @param[in] resp the response: bytes (SHMOBJ_SERVICE_BYTES), or a raw
 *            block or object by reference, the client's (or, when the
 *            client gave up or died, freed) once this returns 0; the
 *            request itself may be sent back (req, or its ref), then it is
 *            not freed
 * @retval 0 answered (also when the client had gone: then the response was
 *         freed)
 * @retval SHMOBJ_EINVAL NULL argument, req not taken by this process (or
 *         answered already), unknown or both flags, NULL data with len > 0,
 *         or a null or stale response reference
 * @retval SHMOBJ_ENOMEM no room in the segment for the bytes (the request
 *         is still the caller's: answer again or release it)
 * @retval SHMOBJ_ESTALE the call was freed (the service destroyed)
 * @retval SHMOBJ_ECORRUPT the call block is damaged
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @note Thread- and process-safe, lock-free apart from the allocation of
 *       bytes.
 * @since 0.4
 */
SHMOBJ_API int shmobj_service_reply(shmobj_service *svc,
                                    shmobj_service_msg *req,
                                    const shmobj_service_msg *resp);

/**
 * @brief Free what dead or departed processes left in the call table:
 *        calls whose client died or gave up and that no live server holds,
 *        with their requests and responses.
 * @param[in] svc the handle
 * @param[out] freed calls freed; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL svc
 * @retval SHMOBJ_ENOTSUP this process has no attachment token
 * @retval SHMOBJ_ESTALE the service was destroyed or the segment handle
 *         closed
 * @retval SHMOBJ_ERDONLY the segment is attached read-only
 * @note Thread- and process-safe, lock-free (each call is claimed by one
 *       compare-and-swap). Reads the process table: a few system calls per
 *       call examined.
 * @since 0.4
 */
SHMOBJ_API int shmobj_service_repair(shmobj_service *svc, uint32_t *freed);

/**
 * @brief Calls outstanding: entries of the call table in use (waiting,
 *        being served, or answered and not yet collected).
 * @param[in] svc the handle
 * @param[out] count the number
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ESTALE the service was destroyed or the segment handle
 *         closed
 * @since 0.4
 */
SHMOBJ_API int shmobj_service_pending(shmobj_service *svc, uint32_t *count);

/**
 * @brief A descriptor that becomes readable when calls wait, for poll,
 *        epoll or an event loop (the descriptor of the service's queue:
 *        see shmobj_queue_notify_fd()). Arm it with
 *        shmobj_service_notify_arm() before each poll, then take with
 *        timeout 0 until SHMOBJ_EEMPTY.
 * @param[in] svc the handle
 * @param[out] fd the descriptor, owned by the handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_EFULL 8 live handles already listen on this service
 * @retval SHMOBJ_ENOTSUP the system cannot make the descriptor
 * @retval SHMOBJ_ESTALE the service was destroyed
 * @retval SHMOBJ_ECORRUPT the queue no longer checks out
 * @retval SHMOBJ_ESYS creating the descriptor failed (errno is kept)
 * @since 0.4
 */
SHMOBJ_API int shmobj_service_notify_fd(shmobj_service *svc, int *fd);

/**
 * @brief Ask for a wake-up of the descriptor when a call waits (at once
 *        when one already does).
 * @param[in] svc the handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL svc, or no descriptor was asked for
 * @retval SHMOBJ_ESTALE the service was destroyed
 * @retval SHMOBJ_ECORRUPT the queue no longer checks out
 * @since 0.4
 */
SHMOBJ_API int shmobj_service_notify_arm(shmobj_service *svc);

#ifdef __cplusplus
}
#endif

#endif /* SHMOBJ_SERVICE_H */
