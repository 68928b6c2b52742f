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
 * The one source of the numbers: shmobj_strerror() and shmobj_errname() are
 * generated from it, and the documented enum ::shmobj_status below is
 * checked against it at compile time, so none of them can drift apart.
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
    X(EBUSY, -15, "busy: a live process held a lock past the wait's bound")   \
    X(ENOTREADY, -16, "segment not ready: nobody is setting it up (its creator died during set-up)") \
    X(ENOBUFS, -17, "the caller's buffer is too small")                        \
    X(ENOTSUP, -18, "operation not supported")                                 \
    X(ESYS, -19, "system call failed (errno holds the cause)")                 \
    X(EOWNERDEAD, -20, "a process died holding a lock; state was recovered")   \
    X(ENOTSEG, -21, "not a libshmobj segment")                                 \
    X(EREPLACED, -22, "the segment's name was removed or now names another segment") \
    X(EINUSE, -23, "still in use: other objects refer to it (free or detach them first)") \
    X(EOWNED, -24, "the object already belongs to a container: adopt it once, or link to it") \
    X(ETRACKFULL, -25, "the completion table is full: wait for or drop earlier tracked messages") \
    X(EPEERDEAD, -26, "the process this call waited for died before answering") \
    X(ERDONLY, -27, "the segment is attached read-only: this call would write to it")

/**
 * @brief Status codes. 0 is success; every error is negative.
 *
 * The numbers are stable: each is part of the ABI, stays what it is in
 * every later release and is never given to another condition (a new
 * condition gets the next free number). shmobj_strerror() gives the text of
 * the table SHMOBJ_ERRNO_MAP, shmobj_errname() the name. This enum is
 * written out by hand so that each value has its documentation; the table
 * stays the one source of numbers, checked against the enum below at
 * compile time in every program that includes this header.
 */
typedef enum shmobj_status {
    /** 0: success */
    SHMOBJ_OK = 0,
    /** -1: an argument is NULL, out of its range or malformed; nothing was done */
    SHMOBJ_EINVAL = -1,
    /** -2: the segment, its backing store or the process has no room for what was asked */
    SHMOBJ_ENOMEM = -2,
    /** -3: no such segment, root, key or entry */
    SHMOBJ_ENOTFOUND = -3,
    /** -4: a segment or root of that name exists already */
    SHMOBJ_EEXIST = -4,
    /** -5: bytes read from the segment fail a check (damage, or a hostile peer); nothing was read outside the segment */
    SHMOBJ_ECORRUPT = -5,
    /** -6: the segment or structure has another format version */
    SHMOBJ_EVERSION = -6,
    /** -7: the segment was made by a build with another pointer size, byte order or lock format */
    SHMOBJ_ELAYOUT = -7,
    /** -8: the deadline passed before the wait was satisfied */
    SHMOBJ_ETIMEDOUT = -8,
    /** -9: a non-blocking take or peek found no message */
    SHMOBJ_EEMPTY = -9,
    /** -10: a queue, the root directory, the table of attached processes or another fixed table is full */
    SHMOBJ_EFULL = -10,
    /** -11: the value, root or block is of another kind than the call needs */
    SHMOBJ_ETYPE = -11,
    /** -12: an index or value lies outside its container or type */
    SHMOBJ_ERANGE = -12,
    /** -13: the reference or view names a block that was freed (or a queue that was destroyed) */
    SHMOBJ_ESTALE = -13,
    /** -14: permission denied, or the value is immutable */
    SHMOBJ_EACCES = -14,
    /** -15: a live process held a lock past the bound of the wait (10 s by default), or a compare-and-swap found another value */
    SHMOBJ_EBUSY = -15,
    /** -16: the segment is not set up and nobody is setting it up (its creator died during set-up) */
    SHMOBJ_ENOTREADY = -16,
    /** -17: the caller's buffer is too small; the length needed is returned */
    SHMOBJ_ENOBUFS = -17,
    /** -18: the operation is not supported here (e.g. no /proc) */
    SHMOBJ_ENOTSUP = -18,
    /** -19: a system call failed; errno holds its cause */
    SHMOBJ_ESYS = -19,
    /** -20: a process died holding a lock; the caller took the lock over and the structure it guards was repaired */
    SHMOBJ_EOWNERDEAD = -20,
    /** -21: the object under that name is not a libshmobj segment */
    SHMOBJ_ENOTSEG = -21,
    /** -22: the wait ended and the segment's name was removed or now names another segment: its peers moved on */
    SHMOBJ_EREPLACED = -22,
    /** -23: the thing cannot be freed or destroyed while other objects refer to it (a shape that still has records); free or detach them first */
    SHMOBJ_EINUSE = -23,
    /** -24: the object to adopt already belongs to a container; adopt it once, or store a link to it */
    SHMOBJ_EOWNED = -24,
    /** -25: the queue's completion table has no free record; wait for, take back or drop earlier tracked messages */
    SHMOBJ_ETRACKFULL = -25,
    /** -26: the process the call was waiting for (a consumer that owed a completion, a lock holder) died; what it held was released */
    SHMOBJ_EPEERDEAD = -26,
    /** -27: the segment is attached read-only (opened with SHMOBJ_SEGMENT_RDONLY, or by a process that may only read it): the call would write to the segment, take one of its locks or record an attachment in it; nothing was done @since 0.4 */
    SHMOBJ_ERDONLY = -27,
} shmobj_status;

/** @cond INTERNAL */
/* Every entry of the table names a value of the enum with the same number
 * (a code added to the table only, or numbered differently, does not
 * compile), and the table's N codes add up to those of -1 .. -N, so that,
 * being distinct, they are exactly -1 .. -N. That they are distinct, and
 * that the enum holds no value the table lacks, is checked by the test
 * `docs-errors` (tests/check-docs.sh) on the documented enum. */
#if defined(__cplusplus)
#define SHMOBJ__STATIC_ASSERT static_assert
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define SHMOBJ__STATIC_ASSERT _Static_assert
#endif
#ifdef SHMOBJ__STATIC_ASSERT
#define SHMOBJ__ERR_CHECK(name, value, msg)                                    \
    SHMOBJ__STATIC_ASSERT(SHMOBJ_##name == (value),                             \
                          "SHMOBJ_" #name " differs from SHMOBJ_ERRNO_MAP");
SHMOBJ_ERRNO_MAP(SHMOBJ__ERR_CHECK)
#define SHMOBJ__ERR_ONE(name, value, msg) +1
#define SHMOBJ__ERR_SUM(name, value, msg) +(value)
SHMOBJ__STATIC_ASSERT(0 SHMOBJ_ERRNO_MAP(SHMOBJ__ERR_SUM) ==
                          -((0 SHMOBJ_ERRNO_MAP(SHMOBJ__ERR_ONE)) *
                            ((0 SHMOBJ_ERRNO_MAP(SHMOBJ__ERR_ONE)) + 1) / 2),
                      "SHMOBJ_ERRNO_MAP skips or repeats a number");
#undef SHMOBJ__ERR_CHECK
#undef SHMOBJ__ERR_ONE
#undef SHMOBJ__ERR_SUM
#undef SHMOBJ__STATIC_ASSERT
#endif
/** @endcond */

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
