/**
 * @file shmobj/api.h
 * @brief Export decoration of public functions.
 *
 * The library is built with hidden visibility; only declarations marked
 * SHMOBJ_API (and listed by the linker version script) are exported.
 */
#ifndef SHMOBJ_API_H
#define SHMOBJ_API_H

#if defined(SHMOBJ_BUILDING) && defined(__GNUC__)
#define SHMOBJ_API __attribute__((visibility("default")))
#else
#define SHMOBJ_API
#endif

#endif /* SHMOBJ_API_H */
