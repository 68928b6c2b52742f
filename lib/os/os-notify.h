/* Pollable wake-up descriptors shared between processes.
 *
 * A consumer creates a pipe and polls its read end. A producer in another
 * process reaches the same pipe by opening /proc/<pid>/fd/<fd> of the
 * consumer for writing (Linux re-opens the pipe behind it, as for a FIFO),
 * so no file is left behind when the consumer exits. The producer checks
 * that what it opened is a pipe with the registered inode number before it
 * writes, so a stale or forged registration cannot make it write into an
 * unrelated file. */
#ifndef SHMOBJ_OS_NOTIFY_H
#define SHMOBJ_OS_NOTIFY_H

#include <stdint.h>

/* A non-blocking, close-on-exec pipe; *ino identifies it. SHMOBJ_ESYS. */
int shmobj__os_notify_create(int *rfd, int *wfd, uint64_t *ino);

/* Open the pipe whose read end is descriptor `fd` of process `pid` for
 * writing (non-blocking). SHMOBJ_ENOTFOUND when the process or descriptor
 * is gone or no longer that pipe (inode mismatch), SHMOBJ_ESYS otherwise. */
int shmobj__os_notify_open(uint32_t pid, int32_t fd, uint64_t ino, int *wfd);

/* Make the pipe readable: write one byte; a full pipe is already readable.
 * Async-signal-safe. */
void shmobj__os_notify_signal(int wfd);

/* Read everything the pipe holds (non-blocking). */
void shmobj__os_notify_drain(int rfd);

/* Close a descriptor of this interface (negative: nothing). */
void shmobj__os_notify_close(int fd);

/* True when /proc/self/fd is available (the mechanism works here). */
int shmobj__os_notify_supported(void);

#endif /* SHMOBJ_OS_NOTIFY_H */
