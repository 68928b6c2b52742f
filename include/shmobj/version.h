/**
 * @file shmobj/version.h
 * @brief Library version (of the code) and format version (of the bytes).
 *
 * The two are independent: a library release that keeps the segment layout
 * keeps SHMOBJ_FORMAT_VERSION, and the ABI (soname) changes only when the
 * binary interface breaks.
 */
#ifndef SHMOBJ_VERSION_H
#define SHMOBJ_VERSION_H

#include "shmobj/api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SHMOBJ_VERSION_MAJOR 0 /**< incompatible API changes */
#define SHMOBJ_VERSION_MINOR 4 /**< compatible additions */
#define SHMOBJ_VERSION_PATCH 0 /**< fixes */
/** @brief The version as one number: major * 10000 + minor * 100 + patch. */
#define SHMOBJ_VERSION_NUMBER                                                  \
    (SHMOBJ_VERSION_MAJOR * 10000 + SHMOBJ_VERSION_MINOR * 100 +               \
     SHMOBJ_VERSION_PATCH)
/** @brief The version as a string, "major.minor.patch". */
#define SHMOBJ_VERSION_STRING "0.4.0"

/** @brief Version of the segment layout this library reads and writes. */
#define SHMOBJ_FORMAT_VERSION 6

/**
 * @brief Version of the library actually loaded (may differ from the headers
 *        a program was compiled with).
 * @return SHMOBJ_VERSION_NUMBER of the library.
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API unsigned shmobj_version(void);

/**
 * @brief The loaded library's version as a string.
 * @return a static string such as "0.4.0". Never NULL.
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API const char *shmobj_version_string(void);

/**
 * @brief The segment format version the loaded library reads and writes.
 * @return SHMOBJ_FORMAT_VERSION of the library.
 * @note Thread-safe.
 * @since 0.1
 */
SHMOBJ_API unsigned shmobj_format_version(void);

#ifdef __cplusplus
}
#endif
#endif /* SHMOBJ_VERSION_H */
