/**
 * @file shmobj/waitset.h
 * @brief Waiting on several queues, topic subscribers, services and
 *        watches in one call.
 *
 * A wait-set holds members, each a queue (its consumers' side), a topic
 * subscriber, a service (its servers' side) or a watch (shmobj/watch.h),
 * with a tag of the caller's.
 * shmobj_waitset_wait() arms every member's descriptor
 * (shmobj_queue_notify_fd(), shmobj_topic_notify_fd(),
 * shmobj_service_notify_fd()), polls them all, and returns the tags of the
 * members that have something: the caller then takes from those with a
 * timeout of 0 until SHMOBJ_EEMPTY (a watch: shmobj_watch_consume()).
 * Readiness is a hint (another consumer
 * may take first), and a member whose queue, topic or service was
 * destroyed is reported ready too (its take says SHMOBJ_ESTALE).
 *
 * The same loop written by hand over the descriptors, in an event loop of
 * the caller's (epoll, libuv, asyncio), works the same way: arm, poll,
 * take until empty.
 *
 * @note A wait-set is one thread's: it is not safe to use from two threads
 *       at once. The descriptors it arms belong to the members' handles.
 * @note A wait-set keeps its members' handles, not copies: each member's
 *       handle (queue, subscriber, service, watch) must stay open while it
 *       is in the set. Take a member out with shmobj_waitset_remove()
 *       before closing its handle, or close the members after
 *       shmobj_waitset_destroy().
 */
#ifndef SHMOBJ_WAITSET_H
#define SHMOBJ_WAITSET_H

#include <stddef.h>
#include <stdint.h>

#include "shmobj/api.h"
#include "shmobj/error.h"
#include "shmobj/queue.h"
#include "shmobj/service.h"
#include "shmobj/topic.h"
#include "shmobj/types.h"
#include "shmobj/watch.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief A set of things to wait on. Opaque. */
typedef struct shmobj_waitset shmobj_waitset;

/** @brief Most members of one wait-set. */
#define SHMOBJ_WAITSET_MAX 256

/**
 * @brief Make an empty wait-set.
 * @param[out] out the wait-set
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL out
 * @retval SHMOBJ_ENOMEM no memory
 * @since 0.4
 */
SHMOBJ_API int shmobj_waitset_create(shmobj_waitset **out);

/**
 * @brief Free a wait-set (not its members). NULL is accepted.
 * @param[in] ws the wait-set
 * @since 0.4
 */
SHMOBJ_API void shmobj_waitset_destroy(shmobj_waitset *ws);

/**
 * @brief Add a queue: ready when messages wait in it.
 * @param[in] ws the wait-set
 * @param[in] q the queue's handle (registers its descriptor, see
 *            shmobj_queue_notify_fd())
 * @param[in] tag returned by shmobj_waitset_wait() when it is ready
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL ws or q
 * @retval SHMOBJ_EFULL SHMOBJ_WAITSET_MAX members already, or 8 handles
 *         already listen on the queue
 * @retval SHMOBJ_ESTALE the queue was destroyed
 * @retval SHMOBJ_ENOTSUP the system cannot make the descriptor
 * @retval SHMOBJ_ECORRUPT the queue no longer checks out
 * @retval SHMOBJ_ESYS the descriptor could not be made (errno is kept)
 * @since 0.4
 */
SHMOBJ_API int shmobj_waitset_add_queue(shmobj_waitset *ws, shmobj_queue *q,
                                        void *tag);

/**
 * @brief Add a topic subscriber: ready when a message is there for it.
 * @param[in] ws the wait-set
 * @param[in] sub the subscriber (registers its descriptor, see
 *            shmobj_topic_notify_fd())
 * @param[in] tag returned by shmobj_waitset_wait() when it is ready
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL ws or sub
 * @retval SHMOBJ_EFULL SHMOBJ_WAITSET_MAX members already
 * @retval SHMOBJ_ESTALE the topic was destroyed
 * @retval SHMOBJ_ENOTSUP the system cannot make the descriptor
 * @retval SHMOBJ_ESYS the descriptor could not be made (errno is kept)
 * @since 0.4
 */
SHMOBJ_API int shmobj_waitset_add_topic(shmobj_waitset *ws,
                                        shmobj_topic_sub *sub, void *tag);

/**
 * @brief Add a service's servers' side: ready when calls wait.
 * @param[in] ws the wait-set
 * @param[in] svc the service's handle (registers its descriptor, see
 *            shmobj_service_notify_fd())
 * @param[in] tag returned by shmobj_waitset_wait() when it is ready
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL ws or svc
 * @retval SHMOBJ_EFULL SHMOBJ_WAITSET_MAX members already, or 8 handles
 *         already listen on the service
 * @retval SHMOBJ_ESTALE the service was destroyed
 * @retval SHMOBJ_ENOTSUP the system cannot make the descriptor
 * @retval SHMOBJ_ECORRUPT the service's queue no longer checks out
 * @retval SHMOBJ_ESYS the descriptor could not be made (errno is kept)
 * @since 0.4
 */
SHMOBJ_API int shmobj_waitset_add_service(shmobj_waitset *ws,
                                          shmobj_service *svc, void *tag);

/**
 * @brief Add a watch: ready when its map key or container changed since
 *        its last shmobj_watch_consume().
 * @param[in] ws the wait-set
 * @param[in] w the watch (its descriptor, see shmobj_watch_fd())
 * @param[in] tag returned by shmobj_waitset_wait() when it is ready
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL ws or w
 * @retval SHMOBJ_EFULL SHMOBJ_WAITSET_MAX members already
 * @note A watch whose map or container was destroyed is reported ready
 *       (its consume says SHMOBJ_ESTALE).
 * @since 0.4
 */
SHMOBJ_API int shmobj_waitset_add_watch(shmobj_waitset *ws, shmobj_watch *w, void *tag);

/**
 * @brief Take a member out of the set; the others keep their order.
 *
 * After it returns, the member's handle may be closed. Its descriptor
 * stays its handle's (see shmobj_queue_notify_fd()): the set made none.
 * @param[in] ws the wait-set
 * @param[in] member the handle given to an add call (a shmobj_queue, a
 *            shmobj_topic_sub, a shmobj_service or a shmobj_watch)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL ws or member
 * @retval SHMOBJ_ENOTFOUND the handle is not a member of this set
 * @since 0.4
 */
SHMOBJ_API int shmobj_waitset_remove(shmobj_waitset *ws, const void *member);

/**
 * @brief Wait until at least one member is ready, or the timeout passes.
 *
 * Arms every member, then polls their descriptors in slices of 100 ms (a
 * producer that died half-way through a put is noticed only by a take, so
 * each slice arms again), until one is readable.
 * @param[in] ws the wait-set
 * @param[in] timeout_ns 0 (look once), SHMOBJ_FOREVER, or nanoseconds
 * @param[out] tags the tags of the members ready, in the order they were
 *             added
 * @param[in] max room in tags (1 or more)
 * @param[out] n how many tags were written
 * @retval 0 at least one member is ready (*n of them, at most max)
 * @retval SHMOBJ_EINVAL NULL argument, max 0, or an empty wait-set
 * @retval SHMOBJ_ETIMEDOUT none was ready in time (*n is 0)
 * @retval SHMOBJ_ESYS poll failed (errno is kept)
 * @since 0.4
 */
SHMOBJ_API int shmobj_waitset_wait(shmobj_waitset *ws, int64_t timeout_ns,
                                   void **tags, size_t max, size_t *n);

#ifdef __cplusplus
}
#endif

#endif /* SHMOBJ_WAITSET_H */
