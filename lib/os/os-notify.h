/* Pollable wake-up descriptors shared between processes.
 *
 * A consumer creates a FIFO in /dev/shm named after its own inode number,
 * `/dev/shm/.shmobj-notify-<inode, 16 hex digits>`, holds its read end and
 * a write end of its own (so that the read end never polls as hung up
 * when a producer closes), and registers the inode number. A producer in
 * another process opens that name for writing: it needs no pid, so it
 * works between PID namespaces (containers that share /dev/shm) and, with
 * the FIFO's mode, between users. The FIFO is owner-read, world-write
 * (0622): writing one can only make the consumer poll readable, which is a
 * hint it checks anyway. The consumer unlinks it when it closes; the FIFO
 * of a consumer that died is unlinked by whoever reclaims its
 * registration (shmobj__os_notify_forget()).
 *
 * Where /dev/shm cannot hold a FIFO the consumer makes a pipe and
 * registers its own pid and descriptor besides the inode; a producer then
 * reaches the pipe through /proc/<pid>/fd/<fd> (same PID namespace only).
 *
 * Either way the producer checks that what it opened is a FIFO or pipe
 * with the registered inode number before it writes, so a stale or forged
 * registration cannot make it write into an unrelated file. */
#ifndef SHMOBJ_OS_NOTIFY_H
#define SHMOBJ_OS_NOTIFY_H

#include <stdint.h>

/* A non-blocking, close-on-exec FIFO (or, without /dev/shm, a pipe); *ino
 * identifies it. SHMOBJ_ESYS. */
int shmobj__os_notify_create(int *rfd, int *wfd, uint64_t *ino);

/* Open for writing (non-blocking) the FIFO of inode `ino`, or, when there
 * is no such FIFO, the pipe whose read end is descriptor `fd` of process
 * `pid`. SHMOBJ_ENOTFOUND when the consumer is gone or what is there is
 * not the registered FIFO or pipe (inode mismatch), SHMOBJ_ESYS
 * otherwise. */
int shmobj__os_notify_open(uint32_t pid, int32_t fd, uint64_t ino, int *wfd);

/* Close a consumer's read end made by shmobj__os_notify_create() and
 * unlink its FIFO. */
void shmobj__os_notify_destroy(int rfd);

/* Unlink the FIFO of inode `ino` left by a consumer that died (nothing
 * when there is none, or what is there is not a FIFO of that inode). */
void shmobj__os_notify_forget(uint64_t ino);

/* Make the pipe readable: write one byte; a full pipe is already readable.
 * Async-signal-safe. */
void shmobj__os_notify_signal(int wfd);

/* Read everything the pipe holds (non-blocking). */
void shmobj__os_notify_drain(int rfd);

/* Close a descriptor of this interface (negative: nothing). */
void shmobj__os_notify_close(int fd);

/* Wait until one of the n descriptors is readable or `timeout_ms` passed
 * (poll(2); -1: no bound); ready[i] set to 1 for each readable (or hung
 * up) one. How many are ready (0 at the timeout), or SHMOBJ_ESYS. */
int shmobj__os_notify_poll(const int *fds, unsigned n, int timeout_ms,
                           unsigned char *ready);

/* True when a FIFO can be made in /dev/shm or /proc/self/fd is available
 * (the mechanism works here). */
int shmobj__os_notify_supported(void);

#endif /* SHMOBJ_OS_NOTIFY_H */
