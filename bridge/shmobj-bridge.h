/**
 * @file shmobj-bridge.h
 * @brief The NATS JetStream bridge (libshmobj-bridge): routes that carry a
 *        segment's queues, topics and maps to JetStream streams and
 *        key-value buckets and back, so programs on other hosts see them.
 *
 * A bridge attaches to one segment and one NATS server (or cluster) and
 * runs its routes, each in a thread of its own, until shmobj_bridge_stop().
 * The routes, their delivery semantics and failure modes are described in
 * doc/bridge.md, with the configuration lines that shmobj-bridge, this
 * library's command, and shmobj_bridge_config_line() take. Link with `pkg-config --libs shmobj-bridge`.
 *
 * Every call that can fail returns 0 or a negative SHMOBJ_E* status
 * (shmobj/error.h) and, where it takes an `err` buffer, writes there a
 * sentence for a person (the NATS server's own words included).
 */
#ifndef SHMOBJ_BRIDGE_H
#define SHMOBJ_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#include <shmobj.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Marks the calls libshmobj-bridge exports (the rest is hidden). */
#if defined(__GNUC__)
#define SHMOBJ_BRIDGE_API __attribute__((visibility("default")))
#else
#define SHMOBJ_BRIDGE_API
#endif

/** @brief A bridge's configuration, built line by line. Opaque. */
typedef struct shmobj_bridge_config shmobj_bridge_config;
/** @brief A running bridge. Opaque. */
typedef struct shmobj_bridge shmobj_bridge;

/** @brief Counters of one route, since the bridge started. */
typedef struct shmobj_bridge_stats {
    uint64_t msgs;     /**< messages (or keys) moved */
    uint64_t bytes;    /**< their payload bytes */
    uint64_t inflight; /**< published, not yet acknowledged by JetStream */
    uint64_t retried;  /**< sent again (no ack in time, a server that came
                            back, a map conflict resolved for the bucket) */
    uint64_t failed;   /**< refused for good (oversize, an encoding the
                            other side lacks, a local put that failed) */
} shmobj_bridge_stats;

/** @brief Where the bridge writes what it has to say (one line, no
 *         newline); NULL keeps it silent. */
typedef void (*shmobj_bridge_log_fn)(void *arg, const char *line);

/**
 * @brief Make an empty configuration.
 * @param[out] out the configuration; free it with shmobj_bridge_config_free()
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ENOMEM no memory
 * @since 0.4
 */
SHMOBJ_BRIDGE_API int shmobj_bridge_config_new(shmobj_bridge_config **out);

/**
 * @brief Add one configuration line: `KEY VALUE` (segment, url, creds,
 *        tls, tls-ca, tls-cert, tls-key, name) or `route SPEC [OPTION=VALUE...]`.
 *        Empty lines and lines starting with `#` are ignored.
 * @param[in,out] cfg the configuration
 * @param[in] line the line (NUL-terminated)
 * @param[out] err where a sentence on what is wrong goes; may be NULL
 * @param[in] err_len bytes at err
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, unknown key, a malformed route
 * @retval SHMOBJ_ERANGE a name or subject too long
 * @retval SHMOBJ_ENOMEM no memory
 * @since 0.4
 */
SHMOBJ_BRIDGE_API int shmobj_bridge_config_line(shmobj_bridge_config *cfg, const char *line,
                              char *err, size_t err_len);

/**
 * @brief Read a configuration file, one line at a time as
 *        shmobj_bridge_config_line() takes them.
 * @param[in,out] cfg the configuration
 * @param[in] path the file
 * @param[out] err where a sentence on what is wrong goes (with the line's
 *             number); may be NULL
 * @param[in] err_len bytes at err
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or a bad line
 * @retval SHMOBJ_ERANGE a name or subject too long
 * @retval SHMOBJ_ENOTFOUND no such file
 * @retval SHMOBJ_ESYS the file could not be read (errno tells why)
 * @retval SHMOBJ_ENOMEM no memory
 * @since 0.4
 */
SHMOBJ_BRIDGE_API int shmobj_bridge_config_file(shmobj_bridge_config *cfg, const char *path,
                              char *err, size_t err_len);

/**
 * @brief Free a configuration.
 * @param[in] cfg the configuration, or NULL (nothing happens)
 * @since 0.4
 */
SHMOBJ_BRIDGE_API void shmobj_bridge_config_free(shmobj_bridge_config *cfg);

/**
 * @brief Attach to the segment, connect to NATS, check every route's
 *        stream, bucket and local object, and start the routes.
 * @param[in] cfg the configuration (copied; free it when you like)
 * @param[in] log where messages go while the bridge runs; may be NULL
 * @param[in] log_arg passed to log
 * @param[out] out the running bridge
 * @param[out] err where a sentence on what went wrong goes; may be NULL
 * @param[in] err_len bytes at err
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument, no segment, no url or no route
 * @retval SHMOBJ_EACCES the server refused the credentials
 * @retval SHMOBJ_ETIMEDOUT no server answered
 * @retval SHMOBJ_ENOTSUP the server has no JetStream
 * @retval SHMOBJ_ESYS another failure to connect or to set up a route
 * @retval SHMOBJ_ENOMEM no memory
 * @retval others the segment's open (shmobj_segment_open())
 * @since 0.4
 */
SHMOBJ_BRIDGE_API int shmobj_bridge_start(const shmobj_bridge_config *cfg,
                        shmobj_bridge_log_fn log, void *log_arg,
                        shmobj_bridge **out, char *err, size_t err_len);

/**
 * @brief Routes of a running bridge.
 * @param[in] b the bridge
 * @return the number of routes (0 for NULL)
 * @since 0.4
 */
SHMOBJ_BRIDGE_API unsigned shmobj_bridge_route_count(const shmobj_bridge *b);

/**
 * @brief Counters and name of route i.
 * @param[in] b the bridge
 * @param[in] i the route, 0 .. shmobj_bridge_route_count() - 1
 * @param[out] st its counters
 * @param[out] name its name (valid while the bridge is); may be NULL
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ERANGE no such route
 * @since 0.4
 */
SHMOBJ_BRIDGE_API int shmobj_bridge_stats_get(shmobj_bridge *b, unsigned i,
                            shmobj_bridge_stats *st, const char **name);

/**
 * @brief One status line: every route's counters, and its last error.
 * @param[in] b the bridge
 * @param[out] buf the line, NUL-terminated (cut to fit)
 * @param[in] cap bytes at buf
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument or cap 0
 * @since 0.4
 */
SHMOBJ_BRIDGE_API int shmobj_bridge_status_line(shmobj_bridge *b, char *buf, size_t cap);

/**
 * @brief Whether a route has ended on an error it cannot get over (its
 *        local object destroyed, the segment gone).
 * @param[in] b the bridge
 * @retval 0 every route runs
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval others the error that ended the first route that ended
 * @since 0.4
 */
SHMOBJ_BRIDGE_API int shmobj_bridge_check(shmobj_bridge *b);

/**
 * @brief Stop the routes (each finishes the message in its hands and
 *        waits up to 2 s for the acknowledgements of what it published),
 *        disconnect and detach, and free the bridge.
 * @param[in] b the bridge, or NULL (nothing happens)
 * @since 0.4
 */
SHMOBJ_BRIDGE_API void shmobj_bridge_stop(shmobj_bridge *b);

/**
 * @brief Encode a typed object in the bridge's wire encoding (CBOR,
 *        profile cbor-1 of doc/bridge.md).
 * @param[in] seg the segment
 * @param[in] ref the object
 * @param[out] data the bytes, to free with free()
 * @param[out] len their count
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ENOTSUP the object holds a kind the profile lacks
 *         (mutable containers, records, links)
 * @retval SHMOBJ_ENOMEM no memory
 * @retval others shmobj_obj_get() and the views' errors
 * @since 0.4
 */
SHMOBJ_BRIDGE_API int shmobj_bridge_obj_encode(shmobj_segment *seg, shmobj_ref ref, void **data,
                             size_t *len);

/**
 * @brief Build the object a cbor-1 encoding describes in a segment.
 * @param[in] seg the segment
 * @param[in] data the bytes
 * @param[in] len their count
 * @param[out] ref the new object (the caller owns it)
 * @retval 0 success
 * @retval SHMOBJ_EINVAL NULL argument
 * @retval SHMOBJ_ECORRUPT the bytes are not one cbor-1 value
 * @retval SHMOBJ_ENOTSUP a CBOR item the profile lacks
 * @retval SHMOBJ_ERANGE nesting deeper than SHMOBJ_OBJ_MAXDEPTH
 * @retval SHMOBJ_ENOMEM no memory, or no room in the segment
 * @retval others shmobj_obj_put()
 * @since 0.4
 */
SHMOBJ_BRIDGE_API int shmobj_bridge_obj_decode(shmobj_segment *seg, const void *data, size_t len,
                             shmobj_ref *ref);

#ifdef __cplusplus
}
#endif

#endif
