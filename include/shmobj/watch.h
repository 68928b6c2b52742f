/**
 * @file shmobj/watch.h
 * @brief Being woken when a key of a shared map, or a mutable container,
 *        changes.
 *
 * A watch names one thing in a segment: a key of a map
 * (shmobj_watch_map_key()) or a mutable container, a growable list, a
 * mutable dict or a mutable set (shmobj_watch_container()). Every process
 * that changes it, through any handle, wakes the watch: a set, replace,
 * add or delete of the key (and a clear of the map), any change of the
 * container (an item set, appended, inserted, deleted or popped, a pair
 * set or deleted, an int added to in place, a clear), and the free of
 * the map's control block or of the container (a destroy).
 *
 * The watch is level-triggered: it reports whether anything changed since
 * the last shmobj_watch_consume(). Its descriptor (shmobj_watch_fd())
 * polls readable once a change happened after the last arm (a consume
 * arms, and so does the watch's creation), in the caller's own event loop
 * or in a wait-set (shmobj_waitset_add_watch()). The pattern:
 *
 *     shmobj_watch_map_key(map, "k", 1, &w);   // before reading the value
 *     read the value;
 *     for (;;) {
 *         shmobj_watch_wait(w, SHMOBJ_FOREVER);  // or poll the fd
 *         if (shmobj_watch_consume(w) == 0)
 *             read the value again;           // it may have changed again
 *     }
 *
 * No change that begins after the watch's creation returned is missed: the
 * arm, and the creation, look at the entry's change counter after they
 * announce themselves, as the writer looks at the announcement after it
 * counted (the creation's announcement is made visible to every writer by
 * membarrier(2); on a kernel without it, a change made while the watch is
 * being created may go unseen, the next one is seen). What a watch does
 * not promise:
 * - Wake-ups may be spurious. A map key is known by its 64-bit hash, so a
 *   change of another key of the same hash wakes it (rare: about one pair
 *   in 2^64), and any change of a container wakes all its watches. A
 *   change that leaves the value as it was still counts.
 * - Changes are counted, not described: read the value again.
 * - A process killed between counting a change and writing to the
 *   descriptor leaves the change counted but the descriptor quiet:
 *   shmobj_watch_wait() sees it at its next look, at most 100 ms later;
 *   a caller's own poll sees it at its next consume.
 *
 * Where watches live: a table of SHMOBJ_WATCH_MAX entries in the
 * segment's header page (doc/format.md), shared by all processes. A
 * watch holds an entry and a FIFO (as the queues' pollable descriptors
 * do: shmobj_queue_notify_fd()); a process that dies leaves its entries
 * to whoever next needs one. With no watch in a segment, a change of a
 * map or a container costs one load and a branch more.
 *
 * @note A watch belongs to the thread and process that made it: it is not
 *       safe to use from two threads at once, and a forked child must make
 *       its own. It holds its segment's mapping until it is closed; once
 *       the segment handle is closed its calls but shmobj_watch_close()
 *       return SHMOBJ_ESTALE. A read-only handle (SHMOBJ_SEGMENT_RDONLY)
 *       cannot watch: a watch writes its entry in the segment.
 */
#ifndef SHMOBJ_WATCH_H
#define SHMOBJ_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "shmobj/api.h"
#include "shmobj/error.h"
#include "shmobj/map.h"
#include "shmobj/object.h"
#include "shmobj/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Most watches open at once in one segment, over all processes. */
#define SHMOBJ_WATCH_MAX 56

/**
 * @brief Watch one key of a map: woken when it is set, replaced, added to
 *        or deleted, when the map is cleared, and when the map is
 *        destroyed.
 *
 * The key need not exist. The watch starts armed, with nothing consumed.
 * @param[in] map the map's handle
 * @param[in] key the key's bytes (NULL only when key_len is 0)
 * @param[in] key_len bytes in key
 * @param[out] out the watch (close it with shmobj_watch_close())
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL map or out, or NULL key with key_len > 0
 * @retval SHMOBJ_ERDONLY the map's segment was opened read-only
 * @retval SHMOBJ_ESTALE the map was destroyed, or its segment handle
 *         closed
 * @retval SHMOBJ_EFULL SHMOBJ_WATCH_MAX watches are open in the segment
 *         already (those of dead processes are taken back first), or no
 *         attachment slot is left for this process
 * @retval SHMOBJ_ENOTSUP the system cannot make the descriptor
 * @retval SHMOBJ_ENOMEM no memory for the handle
 * @retval SHMOBJ_ESYS the descriptor could not be made (errno is kept)
 * @since 0.4
 */
SHMOBJ_API int shmobj_watch_map_key(shmobj_map *map, const void *key, size_t key_len,
                                    shmobj_watch **out);

/**
 * @brief Watch a mutable container (a growable list, a mutable dict or a
 *        mutable set): woken by every change of it, and when it is freed.
 *
 * The watch starts armed, with nothing consumed. Changes of objects the
 * container holds (a nested container's items, a scalar changed in place
 * through a view of an item) are not changes of the container: watch
 * those on their own.
 * @param[in] container a view of the container
 * @param[out] out the watch (close it with shmobj_watch_close())
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL container or out
 * @retval SHMOBJ_ETYPE the view is not of a mutable container
 * @retval SHMOBJ_ERDONLY the segment was opened read-only
 * @retval SHMOBJ_ESTALE the container was freed, or its segment handle
 *         closed
 * @retval SHMOBJ_ECORRUPT the view's object does not check out
 * @retval SHMOBJ_EFULL SHMOBJ_WATCH_MAX watches are open in the segment
 *         already (those of dead processes are taken back first), or no
 *         attachment slot is left for this process
 * @retval SHMOBJ_ENOTSUP the system cannot make the descriptor, or the
 *         view is not in a segment
 * @retval SHMOBJ_ENOMEM no memory for the handle
 * @retval SHMOBJ_ESYS the descriptor could not be made (errno is kept)
 * @since 0.4
 */
SHMOBJ_API int shmobj_watch_container(const shmobj_view *container, shmobj_watch **out);

/**
 * @brief The watch's pollable descriptor: readable once a change happened
 *        after the last arm (shmobj_watch_consume() and
 *        shmobj_watch_arm() arm).
 *
 * Poll it for reading (poll, epoll, select, an event loop); do not read,
 * write or close it: it belongs to the watch. A wake-up is a hint: call
 * shmobj_watch_consume() to learn whether something changed.
 * @param[in] w the watch
 * @param[out] fd the descriptor
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL w or fd
 * @since 0.4
 */
SHMOBJ_API int shmobj_watch_fd(shmobj_watch *w, int *fd);

/**
 * @brief Arm the descriptor: it becomes readable at the next change, or at
 *        once when a change is not consumed yet. Changes nothing else.
 * @param[in] w the watch
 * @retval 0 armed
 * @retval SHMOBJ_EINVAL NULL w
 * @retval SHMOBJ_ESTALE the watched map or container was destroyed, the
 *         segment handle was closed, or the watch's entry was taken by a
 *         process that judged this one dead (the descriptor is made
 *         readable so that a poll returns)
 * @since 0.4
 */
SHMOBJ_API int shmobj_watch_arm(shmobj_watch *w);

/**
 * @brief Take the changes made since the last consume, and arm the
 *        descriptor.
 * @param[in] w the watch
 * @retval 0 something changed since the last consume (or since the
 *         watch's creation): read the value again
 * @retval SHMOBJ_EEMPTY nothing changed
 * @retval SHMOBJ_EINVAL NULL w
 * @retval SHMOBJ_ESTALE the watched map or container was destroyed, the
 *         segment handle was closed, or the watch's entry was taken by a
 *         process that judged this one dead
 * @since 0.4
 */
SHMOBJ_API int shmobj_watch_consume(shmobj_watch *w);

/**
 * @brief Wait until something changed since the last consume, without
 *        consuming it.
 *
 * Arms the descriptor and polls it in slices of 100 ms, looking at the
 * change counter between them (so a writer killed before its wake-up
 * costs at most a slice).
 * @param[in] w the watch
 * @param[in] timeout_ns 0 (look once), SHMOBJ_FOREVER, or nanoseconds
 * @retval 0 something changed since the last consume
 * @retval SHMOBJ_ETIMEDOUT nothing changed in time
 * @retval SHMOBJ_EINVAL NULL w
 * @retval SHMOBJ_ESTALE the watched map or container was destroyed, the
 *         segment handle was closed, or the watch's entry was taken by a
 *         process that judged this one dead
 * @retval SHMOBJ_ESYS poll failed (errno is kept)
 * @since 0.4
 */
SHMOBJ_API int shmobj_watch_wait(shmobj_watch *w, int64_t timeout_ns);

/**
 * @brief Give the watch's entry back, close its descriptor and free the
 *        handle. NULL is accepted.
 * @param[in] w the watch
 * @since 0.4
 */
SHMOBJ_API void shmobj_watch_close(shmobj_watch *w);

#ifdef __cplusplus
}
#endif

#endif /* SHMOBJ_WATCH_H */
