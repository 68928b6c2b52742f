/**
 * @file shmobj/map.h
 * @brief A hash table in a segment, shared by every process that opens it.
 *
 * Keys and values are byte strings of any length (each stored once, in one
 * heap block with a 16-byte header). Many processes read and write at once:
 * reads are optimistic and take no lock while no writer holds them up (a
 * sequence counter per shard, retried when a writer raced; a reader that
 * finds its shard in a writer's section for 256 spins queues on that
 * shard's lock, which also repairs the shard if its writer died), writers
 * take one of 64 striped locks (the library's own, see doc/format.md), and the
 * table of a shard grows by rehashing into a new region that is published
 * with one atomic store. Memory that readers may still see (replaced
 * entries, old tables) is freed only once no reader can be inside it
 * (epochs). A process killed anywhere leaves the map usable with every
 * committed key readable. See doc/format-map.md for the bytes.
 *
 * A map handle belongs to the process that opened it (after fork(), open
 * the map again in the child); its threads may share it. At most
 * SHMOBJ_MAP_HANDLES_MAX handles, over all processes, have one map open at
 * once (each holds a slot of read guards in the map).
 *
 * A map is destroyed by taking its root away and freeing its control block
 * (shmobj_segment_root_del(), shmobj_arena_free()). Every call through a
 * handle still open on it then returns SHMOBJ_ESTALE (and
 * shmobj_map_close() writes nothing into the freed block), with one
 * exception: a copy-out read (shmobj_map_get(), shmobj_map_get_many(),
 * shmobj_map_contains()) first makes one unguarded try on the handle's
 * cached table shapes, and that try notices only once the freed block's
 * bytes change (a shard's table reference or sequence counter no longer
 * agreeing with the cache, as when the memory is reused): until then it
 * may answer from the map's last tables, never from another owner's data.
 */
#ifndef SHMOBJ_MAP_H
#define SHMOBJ_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "shmobj/api.h"
#include "shmobj/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Handles that may have one map open at once, over all processes
 *  (shmobj_map_open() beyond it: SHMOBJ_EFULL). */
#define SHMOBJ_MAP_HANDLES_MAX 1024

/** @brief An open shared map (one per process and open). Opaque. */
typedef struct shmobj_map shmobj_map;

/** @brief A cursor over the entries of a map. Opaque. */
typedef struct shmobj_map_iter shmobj_map_iter;

/**
 * @brief A zero-copy view of one entry, see shmobj_map_get_view().
 *
 * The pointers stay valid, and the bytes unchanged (except an 8-byte value
 * changed by shmobj_map_add(), atomically), until shmobj_map_view_release().
 */
typedef struct shmobj_map_view {
    const void *value; /**< the value's first byte, 16-byte aligned */
    size_t value_len;  /**< bytes of value */
    const void *key;   /**< the key's first byte */
    size_t key_len;    /**< bytes of key */
    shmobj_map *map_;  /**< internal: the map holding the guard */
    uint64_t guard_;   /**< internal: the read guard */
} shmobj_map_view;

/** @brief One lookup of shmobj_map_get_many(): what shmobj_map_get() takes
 *  and gives, in one record. */
typedef struct shmobj_map_get_req {
    const void *key;  /**< in: key bytes (may be NULL when key_len is 0) */
    size_t key_len;   /**< in: bytes of key */
    void *buf;        /**< in: where the value goes (may be NULL when buf_len is 0) */
    size_t buf_len;   /**< in: bytes available at buf */
    size_t value_len; /**< out: the value's length (also on SHMOBJ_ENOBUFS) */
    int status;       /**< out: what shmobj_map_get() would return */
    uint32_t reserved_; /**< internal */
} shmobj_map_get_req;

/** @brief One set of a batch, see shmobj_map_set_many(). @since 0.4 */
typedef struct shmobj_map_set_req {
    const void *key;   /**< in: key bytes (may be NULL when key_len is 0) */
    size_t key_len;    /**< in: bytes of key, at most UINT32_MAX */
    const void *value; /**< in: value bytes (may be NULL when value_len is 0) */
    size_t value_len;  /**< in: bytes of value, at most UINT32_MAX */
    int status;        /**< out: what shmobj_map_set() would return */
    uint32_t reserved_; /**< internal */
} shmobj_map_set_req;

/** @brief Statistics of a map, see shmobj_map_stats_get(). */
typedef struct shmobj_map_stats {
    uint32_t struct_size;  /**< sizeof(shmobj_map_stats), set by the caller */
    uint32_t shards;       /**< number of shards (lock stripes) */
    uint64_t count;        /**< entries */
    uint64_t slots;        /**< table slots, all shards */
    uint64_t tombstones;   /**< deleted slots not yet dropped by a rehash */
    double load_factor;    /**< count / slots */
    double probe_mean;     /**< mean groups read to find a present key */
    uint64_t probe_max;    /**< most groups read to find a present key */
    uint64_t table_bytes;  /**< heap bytes of the tables, headers included */
    uint64_t entry_bytes;  /**< heap bytes of the entries, headers included */
    uint64_t pending_bytes; /**< heap bytes retired (replaced or deleted
                                 entries, old tables, a cleared table with
                                 its entries), not yet freed */
    uint64_t total_bytes;  /**< every heap byte the map holds: its control
                                block, table_bytes, entry_bytes and
                                pending_bytes, block headers included */
    double bytes_per_item; /**< total_bytes / count (0 when empty) */
} shmobj_map_stats;

/**
 * @brief Create an empty map in a segment and publish it under a root name.
 * @param[in] seg segment
 * @param[in] name root name (1..SHMOBJ_ROOT_NAME_MAX bytes)
 * @param[out] out the new handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_EEXIST a root of that name exists
 * @retval SHMOBJ_ENOMEM no room in the segment, or no memory for the handle
 * @retval SHMOBJ_EFULL the segment's root directory is full
 * @retval SHMOBJ_ECORRUPT the segment is damaged
 * @retval SHMOBJ_ESYS a system call failed (errno is kept)
 * @retval SHMOBJ_EBUSY another live process held the shard's or the
 *         segment's lock for longer than 10 s (it is stopped, or the lock
 *         word was damaged to name it)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe. Two processes creating the same name at
 *       once: the name is published create-only, under the segment lock,
 *       so exactly one succeeds and the other gets SHMOBJ_EEXIST (see
 *       shmobj_map_open_or_create()).
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_create(shmobj_segment *seg, const char *name,
                                 shmobj_map **out);

/**
 * @brief Open a map published under a root name.
 * @param[in] seg segment
 * @param[in] name root name given to shmobj_map_create()
 * @param[out] out the new handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_ENOTFOUND no root of that name
 * @retval SHMOBJ_ETYPE the root names a block that is not a map (a queue,
 *         an object, a raw allocation: its first 8 bytes are not the map's
 *         magic)
 * @retval SHMOBJ_ESTALE the root names a freed block
 * @retval SHMOBJ_EVERSION the map has another format version
 * @retval SHMOBJ_ECORRUPT the root names a map control block whose bytes
 *         are inconsistent (check word, sizes, alignment), or no block
 * @retval SHMOBJ_EFULL SHMOBJ_MAP_HANDLES_MAX handles have the map open
 *         already (slots of processes that died are taken back first)
 * @retval SHMOBJ_ENOMEM no memory for the handle
 * @retval SHMOBJ_ESYS a system call failed (errno is kept)
 * @retval SHMOBJ_EBUSY another live process held the segment lock (which
 *         the root look-up takes) for longer than 10 s
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_open(shmobj_segment *seg, const char *name,
                               shmobj_map **out);

/**
 * @brief Open a map by root name, waiting until it exists.
 *
 * For a process that may start before the map's creator: waits with
 * shmobj_segment_root_wait() (asleep on a futex the root directory's
 * changes wake, never polling) until a root of that name exists, then
 * opens it as shmobj_map_open() does.
 * @param[in] seg segment
 * @param[in] name root name given to shmobj_map_create()
 * @param[in] timeout_ns 0 (look once), SHMOBJ_FOREVER, or nanoseconds
 * @param[out] out the new handle
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_ETIMEDOUT no root of that name appeared in time
 * @retval SHMOBJ_ETYPE the root names a block that is not a map
 * @retval SHMOBJ_ESTALE the root names a freed block
 * @retval SHMOBJ_EVERSION the map has another format version
 * @retval SHMOBJ_ECORRUPT the root names a map control block whose bytes
 *         are inconsistent, or no block; or the segment lock is damaged
 * @retval SHMOBJ_EFULL SHMOBJ_MAP_HANDLES_MAX handles have the map open
 *         already, or the segment handle, inherited through fork(), could
 *         not attach anew
 * @retval SHMOBJ_ENOMEM no memory for the handle
 * @retval SHMOBJ_ESYS a system call failed (errno is kept)
 * @retval SHMOBJ_EBUSY with SHMOBJ_FOREVER only: another live process held
 *         the segment lock for longer than 10 s
 * @note Thread- and process-safe.
 * @since 0.2
 */
SHMOBJ_API int shmobj_map_open_timed(shmobj_segment *seg, const char *name,
                                     int64_t timeout_ns, shmobj_map **out);

/**
 * @brief Open a map by root name, creating it when it does not exist.
 *
 * The way several peer processes start when any of them may be first:
 * each calls this, and all end up with handles of one map. Creates as
 * shmobj_map_create(); when a root of that name exists, opens it instead.
 * When the name goes away between the two steps (a creator that failed
 * after publishing takes its root back; a destroy), tries again, up to 16
 * rounds.
 * @param[in] seg segment
 * @param[in] name root name (1..SHMOBJ_ROOT_NAME_MAX bytes)
 * @param[out] out the new handle
 * @retval 0 success (created or opened)
 * @retval SHMOBJ_EINVAL NULL argument or bad name
 * @retval SHMOBJ_ETYPE a root of that name names a block that is not a map
 * @retval SHMOBJ_ESTALE the root named a freed block in every round
 * @retval SHMOBJ_ENOTFOUND the name was published and removed again in
 *         every round
 * @retval SHMOBJ_EVERSION the existing map has another format version
 * @retval SHMOBJ_ECORRUPT the existing map's control block is
 *         inconsistent, or the segment is damaged
 * @retval SHMOBJ_EFULL the segment's root directory is full, or
 *         SHMOBJ_MAP_HANDLES_MAX handles have the map open already
 * @retval SHMOBJ_ENOMEM no room in the segment, or no memory for the handle
 * @retval SHMOBJ_ESYS a system call failed (errno is kept)
 * @retval SHMOBJ_EBUSY another live process held the shard's or the
 *         segment's lock for longer than 10 s
 * @note Thread- and process-safe: of peers racing, exactly one creates the
 *       map and every other one opens it.
 * @since 0.2
 */
SHMOBJ_API int shmobj_map_open_or_create(shmobj_segment *seg, const char *name,
                                         shmobj_map **out);

/**
 * @brief Close a handle (the map stays in the segment).
 *
 * May come before or after the close of the segment handle it was opened
 * through, and before or after its views are released and its cursors
 * closed: the handle's slot (and its hold on the segment) goes with the
 * last of them. Once the segment handle is closed, every call on the map,
 * its cursors and views but this close, shmobj_map_iter_close() and
 * shmobj_map_view_release() returns SHMOBJ_ESTALE.
 * @param[in] map handle, or NULL (nothing happens)
 * @note Not thread-safe with other uses of the same handle. Gives the
 *       handle's slot back, unless the map was destroyed (then nothing is
 *       written).
 * @since 0.1
 */
SHMOBJ_API void shmobj_map_close(shmobj_map *map);

/**
 * @brief Insert a key or replace its value.
 * @param[in] map map
 * @param[in] key key bytes (may be NULL when key_len is 0)
 * @param[in] key_len bytes of key, at most UINT32_MAX
 * @param[in] value value bytes (may be NULL when value_len is 0)
 * @param[in] value_len bytes of value, at most UINT32_MAX
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or a length above UINT32_MAX
 * @retval SHMOBJ_ENOMEM the segment has no room for the entry (or for a
 *         bigger table)
 * @retval SHMOBJ_ESTALE the map was destroyed, or its segment handle was
 *         closed
 * @retval SHMOBJ_ECORRUPT the map is damaged
 * @retval SHMOBJ_EBUSY another live process held the shard's or the
 *         segment's lock for longer than 10 s (it is stopped, or the lock
 *         word was damaged to name it)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe; readers see the old or the new value.
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_set(shmobj_map *map, const void *key, size_t key_len,
                              const void *value, size_t value_len);

/**
 * @brief Insert or replace many keys at once, for bulk loads.
 *
 * Each request is answered as shmobj_map_set() would answer it, into its
 * own `status`, in the order given (of two requests for one key, the later
 * value stays). The requests are taken in groups of 16: their keys' table
 * groups are loaded together, and the sets that fall in one shard share
 * one hold of its lock, so a batch costs less than as many single sets.
 * A batch is not atomic: a reader may see some of its keys set and not
 * others (the sets are made shard by shard), and a process killed inside
 * it leaves each request done whole or not at all and leaks at most one
 * block, as shmobj_map_set() does.
 * @param[in] map map
 * @param[in,out] reqs n requests
 * @param[in] n number of requests
 * @retval 0 every request was answered (see each status)
 * @retval SHMOBJ_EINVAL NULL map, or NULL reqs with n > 0 (nothing answered)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): every status says so, nothing was
 *         written
 * @note Thread- and process-safe; holds a shard's lock for up to 16 sets,
 *       so single writers of the same shard wait longer than behind one.
 * @since 0.4
 */
SHMOBJ_API int shmobj_map_set_many(shmobj_map *map, shmobj_map_set_req *reqs, size_t n);

/**
 * @brief Copy a value out.
 * @param[in] map map
 * @param[in] key key bytes
 * @param[in] key_len bytes of key
 * @param[out] buf where the value goes (may be NULL when buf_len is 0)
 * @param[in] buf_len bytes available at buf
 * @param[out] value_len the value's length (also on SHMOBJ_ENOBUFS); may be
 *             NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL map, or NULL key with key_len > 0
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ENOBUFS buf_len is smaller than the value (see value_len)
 * @retval SHMOBJ_ESTALE the map was destroyed (noticed as the file's
 *         introduction says), or its segment handle was closed
 * @retval SHMOBJ_ECORRUPT the map is damaged
 * @retval SHMOBJ_EBUSY on a read-only handle, which may neither lock nor
 *         repair: the key's shard stayed inside a writer's section, for
 *         10 s while a live process holds its lock, or at once when none
 *         does (its writer died there; a writable handle repairs it)
 * @note Thread- and process-safe. Takes no lock while no writer holds the
 *       key's shard (it retries when a writer raced); after 256 spins on a
 *       shard in a writer's section it queues on the shard's lock.
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_get(shmobj_map *map, const void *key, size_t key_len,
                              void *buf, size_t buf_len, size_t *value_len);

/**
 * @brief Copy many values out at once, overlapping their memory latency.
 *
 * Each request is answered as shmobj_map_get() would answer it, into its
 * own `status` and `value_len`; a batch is not one atomic snapshot (each
 * lookup is). The lookups are taken in groups whose table and entry lines
 * are fetched together before any of them is compared, so a batch of keys
 * spread over a large map costs much less than as many single gets.
 * @param[in] map map
 * @param[in,out] reqs n requests
 * @param[in] n number of requests
 * @retval 0 every request was answered (see each status)
 * @retval SHMOBJ_EINVAL NULL map, or NULL reqs with n > 0 (nothing answered)
 * @note Thread- and process-safe; locks like shmobj_map_get().
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_get_many(shmobj_map *map, shmobj_map_get_req *reqs,
                                   size_t n);

/**
 * @brief Hint that a key will be looked up soon: starts loading the part
 *        of the table it hashes to, so that lookups of many keys overlap
 *        their memory latency (call it a few keys ahead of
 *        shmobj_map_get()).
 * @param[in] map map (NULL: nothing happens)
 * @param[in] key key bytes
 * @param[in] key_len bytes of key
 * @note Thread- and process-safe; reads nothing it would have to validate
 *       (prefetches never fault) and changes nothing.
 * @since 0.1
 */
SHMOBJ_API void shmobj_map_prefetch(shmobj_map *map, const void *key,
                                    size_t key_len);

/**
 * @brief Read a value in place, without copying, under a read guard.
 *
 * While the guard is held the entry's memory is not freed or reused, even
 * when another process replaces or deletes the key; release it soon, since
 * it holds back the freeing of all retired memory of the map.
 * @param[in] map map
 * @param[in] key key bytes
 * @param[in] key_len bytes of key
 * @param[out] view filled with pointers to the value and key
 * @retval 0 success: call shmobj_map_view_release(view) when done
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ENOTFOUND no such key (no guard is held)
 * @retval SHMOBJ_ESTALE the map was destroyed, or its segment handle was
 *         closed (no guard is held)
 * @retval SHMOBJ_ECORRUPT the map is damaged (no guard is held)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe; locks like shmobj_map_get().
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_get_view(shmobj_map *map, const void *key,
                                   size_t key_len, shmobj_map_view *view);

/**
 * @brief Release the guard of a view from shmobj_map_get_view(). Also
 *        after its map's or its segment's close (see shmobj_map_close()).
 * @param[in] view view, or NULL (nothing happens); cleared
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API void shmobj_map_view_release(shmobj_map_view *view);

/**
 * @brief Remove a key.
 * @param[in] map map
 * @param[in] key key bytes
 * @param[in] key_len bytes of key
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ENOTFOUND no such key
 * @retval SHMOBJ_ESTALE the map was destroyed, or its segment handle was
 *         closed
 * @retval SHMOBJ_ECORRUPT the map is damaged
 * @retval SHMOBJ_EBUSY another live process held the shard's or the
 *         segment's lock for longer than 10 s (it is stopped, or the lock
 *         word was damaged to name it)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_del(shmobj_map *map, const void *key, size_t key_len);

/**
 * @brief Whether a key is present.
 * @param[in] map map
 * @param[in] key key bytes
 * @param[in] key_len bytes of key
 * @retval 0 present
 * @retval SHMOBJ_ENOTFOUND absent
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ESTALE the map was destroyed (noticed as in
 *         shmobj_map_get()), or its segment handle was closed
 * @retval SHMOBJ_ECORRUPT the map is damaged
 * @note Thread- and process-safe; locks like shmobj_map_get().
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_contains(shmobj_map *map, const void *key,
                                   size_t key_len);

/**
 * @brief Add to an integer value atomically.
 *
 * The value must be 8 bytes (an int64_t in host byte order); an absent key
 * is created with the value `delta`.
 * @param[in] map map
 * @param[in] key key bytes
 * @param[in] key_len bytes of key
 * @param[in] delta amount to add (wraps around like unsigned arithmetic)
 * @param[out] result the value after the addition; may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ETYPE the value is not 8 bytes long
 * @retval SHMOBJ_ENOMEM no room for a new entry
 * @retval SHMOBJ_ESTALE the map was destroyed, or its segment handle was
 *         closed
 * @retval SHMOBJ_ECORRUPT the map is damaged
 * @retval SHMOBJ_EBUSY another live process held the shard's or the
 *         segment's lock for longer than 10 s (it is stopped, or the lock
 *         word was damaged to name it)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe: concurrent additions are never lost.
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_add(shmobj_map *map, const void *key, size_t key_len,
                              int64_t delta, int64_t *result);

/**
 * @brief Number of entries.
 * @param[in] map map
 * @param[out] count entries (a sum over shards, each exact at its moment)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ESTALE the map was destroyed, or its segment handle was
 *         closed
 * @note Thread- and process-safe, lock-free.
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_count(shmobj_map *map, uint64_t *count);

/**
 * @brief Remove every entry (shard by shard; not one atomic step).
 * @param[in] map map
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL map
 * @retval SHMOBJ_ENOMEM no room for the new empty tables
 * @retval SHMOBJ_ESTALE the map was destroyed, or its segment handle was
 *         closed
 * @retval SHMOBJ_ECORRUPT the map is damaged
 * @retval SHMOBJ_EBUSY another live process held the shard's or the
 *         segment's lock for longer than 10 s (it is stopped, or the lock
 *         word was damaged to name it)
 * @retval SHMOBJ_ERDONLY the segment is attached read-only (see
 *         shmobj_segment_open_flags()): nothing was written
 * @note Thread- and process-safe.
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_clear(shmobj_map *map);

/**
 * @brief Start iterating over the entries.
 *
 * Every key present for the whole iteration is returned exactly once, even
 * while other processes write and tables grow; keys added or removed
 * meanwhile may or may not be returned (each at most once).
 * @param[in] map map
 * @param[out] out the cursor; free it with shmobj_map_iter_close()
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ENOMEM no memory for the cursor
 * @retval SHMOBJ_ESTALE the map's segment handle was closed
 * @note Thread-safe; a cursor is used by one thread at a time.
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_iter_open(shmobj_map *map, shmobj_map_iter **out);

/**
 * @brief The next entry.
 *
 * The pointers stay valid until the next call or shmobj_map_iter_close();
 * the cursor holds a read guard meanwhile (see shmobj_map_get_view()).
 *
 * Every error moves the cursor on, so a loop that calls this until
 * SHMOBJ_ENOTFOUND always ends: after SHMOBJ_ECORRUPT or SHMOBJ_ENOMEM
 * about a shard the cursor is past that shard (its entries are not
 * returned) and the next call goes on with the next one; after
 * SHMOBJ_ESTALE the cursor has ended (next calls: SHMOBJ_ENOTFOUND).
 * @param[in] it cursor
 * @param[out] key the key's first byte; may be NULL
 * @param[out] key_len bytes of key; may be NULL
 * @param[out] value the value's first byte; may be NULL
 * @param[out] value_len bytes of value; may be NULL
 * @retval 0 an entry was returned
 * @retval SHMOBJ_ENOTFOUND no more entries
 * @retval SHMOBJ_EINVAL NULL cursor
 * @retval SHMOBJ_ENOMEM no memory for the cursor's snapshot of a shard
 *         (that shard is skipped)
 * @retval SHMOBJ_ESTALE the map was destroyed (the cursor has ended), or
 *         its segment handle was closed (every call)
 * @retval SHMOBJ_ECORRUPT a shard or an entry is damaged (that shard, or
 *         that entry, is skipped)
 * @note A cursor is used by one thread at a time.
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_iter_next(shmobj_map_iter *it, const void **key,
                                    size_t *key_len, const void **value,
                                    size_t *value_len);

/**
 * @brief Free a cursor and release its guard. Also after its map's or its
 *        segment's close (see shmobj_map_close()).
 * @param[in] it cursor, or NULL (nothing happens)
 * @since 0.1
 */
SHMOBJ_API void shmobj_map_iter_close(shmobj_map_iter *it);

/**
 * @brief Statistics: size, load, probe lengths, memory per item.
 * @param[in] map map
 * @param[in,out] stats struct_size set by the caller, the rest filled
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or struct_size too small
 * @retval SHMOBJ_ESTALE the map was destroyed, or its segment handle was
 *         closed
 * @retval SHMOBJ_ECORRUPT the map is damaged
 * @retval SHMOBJ_EBUSY another live process held the shard's or the
 *         segment's lock for longer than 10 s (it is stopped, or the lock
 *         word was damaged to name it)
 * @note Thread- and process-safe; takes each shard's lock in turn and
 *       walks every entry, so it costs as much as an iteration. Reads
 *       only: it frees no retired memory, so two calls with no writes
 *       between them agree (a shard whose writer died is repaired by the
 *       lock, as by any locker).
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_stats_get(shmobj_map *map, shmobj_map_stats *stats);

/**
 * @brief Check the whole map: control block, every table against its
 *        entries (bounds, generations, hashes, shard placement, counters)
 *        and the lists of retired memory.
 * @param[in] map map
 * @retval 0 consistent
 * @retval SHMOBJ_EINVAL NULL map
 * @retval SHMOBJ_ESTALE the map was destroyed, or its segment handle was
 *         closed
 * @retval SHMOBJ_ECORRUPT something is damaged
 * @retval SHMOBJ_EBUSY another live process held the shard's or the
 *         segment's lock for longer than 10 s (it is stopped, or the lock
 *         word was damaged to name it)
 * @note Thread- and process-safe; takes each shard's lock in turn.
 * @since 0.1
 */
SHMOBJ_API int shmobj_map_check(shmobj_map *map);

#ifdef __cplusplus
}
#endif
#endif /* SHMOBJ_MAP_H */
