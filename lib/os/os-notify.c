/* Pollable wake-up descriptors (see os-notify.h).
 *
 * Every descriptor here is non-blocking and close-on-exec; writes never
 * block and a full pipe counts as signalled. Opening the peer's pipe
 * follows the /proc link by design, and the link's target is whatever the
 * peer holds under that number now, so it is looked at first through an
 * O_PATH descriptor (which opens nothing) and opened for writing only when
 * it is a pipe (S_ISFIFO) with the inode recorded at registration. */
#include "os-notify.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shmobj/error.h"

int shmobj__os_notify_create(int *rfd, int *wfd, uint64_t *ino)
{
    int p[2];
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
        return SHMOBJ_ESYS;
    struct stat st;
    if (fstat(p[0], &st) != 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        errno = e;
        return SHMOBJ_ESYS;
    }
    *rfd = p[0];
    *wfd = p[1];
    *ino = (uint64_t)st.st_ino;
    return 0;
}

int shmobj__os_notify_open(uint32_t pid, int32_t fd, uint64_t ino, int *wfd)
{
    if (pid == 0 || fd < 0)
        return SHMOBJ_ENOTFOUND;
    /* pid, fd and ino come from the segment, which may be damaged: look at
     * what the link names first (O_PATH opens nothing for reading or
     * writing, so a device or file there sees no open), and open for
     * writing only the pipe that was registered, through the pinned path
     * descriptor so it cannot be swapped in between. */
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/fd/%d", (unsigned)pid, (int)fd);
    int pfd = open(path, O_PATH | O_CLOEXEC);
    if (pfd < 0)
        return errno == ENOENT || errno == ENXIO || errno == ESRCH || errno == EACCES
                   ? SHMOBJ_ENOTFOUND
                   : SHMOBJ_ESYS;
    struct stat st;
    if (fstat(pfd, &st) != 0 || !S_ISFIFO(st.st_mode) ||
        (uint64_t)st.st_ino != ino) {
        close(pfd);
        return SHMOBJ_ENOTFOUND;
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", pfd);
    int w = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    int err = errno;
    close(pfd);
    if (w < 0)
        return err == ENOENT || err == ENXIO ? SHMOBJ_ENOTFOUND : SHMOBJ_ESYS;
    *wfd = w;
    return 0;
}

void shmobj__os_notify_signal(int wfd)
{
    if (wfd < 0)
        return;
    /* A listener that died leaves its pipe without a reader, and a write
     * to it raises SIGPIPE, whose default action would kill the producer.
     * Block it for this thread around the write, and take back a SIGPIPE
     * this write raised (not one that was already pending). */
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
    char b = 1;
    ssize_t n;
    do
        n = write(wfd, &b, 1);
    while (n < 0 && errno == EINTR);
    /* EAGAIN: the pipe is full, hence readable already; EPIPE: nobody
     * listens any more, nothing to wake */
    if (n < 0 && errno == EPIPE && !was_pending) {
        const struct timespec now = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &now) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void shmobj__os_notify_drain(int rfd)
{
    if (rfd < 0)
        return;
    char buf[256];
    for (;;) {
        ssize_t n = read(rfd, buf, sizeof buf);
        if (n > 0)
            continue;
        if (n < 0 && errno == EINTR)
            continue;
        break;
    }
}

void shmobj__os_notify_close(int fd)
{
    if (fd >= 0)
        close(fd);
}

int shmobj__os_notify_supported(void)
{
    return access("/proc/self/fd", R_OK) == 0;
}
