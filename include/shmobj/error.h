/**
 * @file shmobj/error.h
 * @brief Status codes shared by every libshmobj call.
 *
 * Every call that can fail returns an `int`: 0 on success or one of the
 * negative `SHMOBJ_E*` values below. The numbers are part of the ABI and
 * never change; new codes get new numbers.
 */
#ifndef SHMOBJ_ERROR_H
#define SHMOBJ_ERROR_H

#include "shmobj/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief The table of status codes: X(name, value, message).
 *
 * The enum, shmobj_strerror() and shmobj_errname() are all generated from
 * this one table so they cannot drift apart.
 */
#define SHMOBJ_ERRNO_MAP(X)                                                    \
    X(EINVAL, -1, "invalid argument")                                          \
    X(ENOMEM, -2, "out of memory: the segment or its backing store is full")   \
    X(ENOTFOUND, -3, "not found")                                              \
    X(EEXIST, -4, "already exists")                                            \
    X(ECORRUPT, -5, "segment data is damaged or inconsistent")                 \
    X(EVERSION, -6, "unsupported segment format version")                      \
    X(ELAYOUT, -7, "segment was made by a process with another memory layout") \
    X(ETIMEDOUT, -8, "timed out")                                              \
    X(EEMPTY, -9, "empty: no message waiting")                                 \
    X(EFULL, -10, "full: no room for another entry")                           \
    X(ETYPE, -11, "wrong object type")                                         \
    X(ERANGE, -12, "index or value out of range")                              \
    X(ESTALE, -13, "stale reference: the object was freed or reused")          \
    X(EACCES, -14, "permission denied")                                        \
    X(EBUSY, -15, "resource busy: a live process holds it too long")          \
    X(ENOTREADY, -16, "segment not ready: nobody is setting it up (its creator died during set-up)") \
    X(ENOBUFS, -17, "the caller's buffer is too small")                        \
    X(ENOTSUP, -18, "operation not supported")                                 \
    X(ESYS, -19, "system call failed (errno holds the cause)")                 \
    X(EOWNERDEAD, -20, "a process died holding a lock; state was recovered")   \
    X(ENOTSEG, -21, "not a libshmobj segment")                                 \
    X(EREPLACED, -22, "the segment's name was removed or now names another segment")

/** @brief Status codes. 0 is success; every error is negative. */
typedef enum shmobj_status {
    SHMOBJ_OK = 0, /**< success */
/** @cond INTERNAL */
#define SHMOBJ__ERR_ENUM(name, value, msg) SHMOBJ_##name = (value),
    SHMOBJ_ERRNO_MAP(SHMOBJ__ERR_ENUM)
#undef SHMOBJ__ERR_ENUM
    /** @endcond */
} shmobj_status;

/**
 * @brief Human-readable text for a status code.
 * @param[in] status a value returned by any libshmobj call
 * @return a static NUL-terminated string; "unknown error" for values outside
 *         the table. Never NULL.
 * @note Thread-safe and async-signal-safe.
 * @since 0.1
 */
SHMOBJ_API const char *shmobj_strerror(int status);

/**
 * @brief The symbolic name of a status code, e.g. "SHMOBJ_EINVAL".
 * @param[in] status a value returned by any libshmobj call
 * @return a static string; "SHMOBJ_OK" for 0 and "SHMOBJ_E?" for unknown
 *         values. Never NULL.
 * @note Thread-safe and async-signal-safe.
 * @since 0.1
 */
SHMOBJ_API const char *shmobj_errname(int status);

#ifdef __cplusplus
}
#endif
#endif /* SHMOBJ_ERROR_H */
