/* Pollable wake-up descriptors (see os-notify.h).
 *
 * Every descriptor here is non-blocking and close-on-exec; writes never
 * block and a full pipe counts as signalled. A consumer's FIFO is made
 * under a random name and renamed to the name its inode gives only once
 * both its ends are open, so a producer never finds a FIFO of that name
 * without a reader. A producer opens a FIFO by name with O_NOFOLLOW and
 * writes only when what it opened is a FIFO of the registered inode.
 * Opening the peer's pipe of the /proc fallback follows the /proc link by
 * design, and the link's target is whatever the peer holds under that
 * number now, so it is looked at first through an O_PATH descriptor (which
 * opens nothing) and opened for writing only when it is a pipe (S_ISFIFO)
 * with the inode recorded at registration. */
#include "os-notify.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shmobj/error.h"

#define FIFO_DIR "/dev/shm/"
#define FIFO_PREFIX ".shmobj-notify-"
/* owner reads; anyone who may reach it writes (a wake-up is a hint) */
#define FIFO_MODE 0622

static void fifo_name(char *out, size_t n, uint64_t ino)
{
    snprintf(out, n, FIFO_DIR FIFO_PREFIX "%016llx", (unsigned long long)ino);
}

static void close_keep_errno(int fd)
{
    int e = errno;
    close(fd);
    errno = e;
}

/* A FIFO in /dev/shm named by its inode, both ends open: 0, or -1 (then
 * the caller makes a pipe). */
static int fifo_create(int *rfd, int *wfd, uint64_t *ino)
{
    char tmp[96], name[96];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    for (unsigned attempt = 0; attempt < 8; attempt++) {
        /* unique enough between namespaces, which may share pids */
        uint64_t x = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
                     (uint64_t)ts.tv_sec << 32 ^ (uint64_t)getpid() << 16 ^
                     (uint64_t)(uintptr_t)&ts ^ attempt * 0xbf58476d1ce4e5b9ull;
        snprintf(tmp, sizeof tmp, FIFO_DIR FIFO_PREFIX "new-%016llx",
                 (unsigned long long)x);
        if (mkfifo(tmp, 0600) == 0)
            break;
        if (errno != EEXIST)
            return -1;
        tmp[0] = 0;
    }
    if (tmp[0] == 0)
        return -1;
    int r = open(tmp, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    int w = r < 0 ? -1 : open(tmp, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (w < 0 || fstat(r, &st) != 0 || !S_ISFIFO(st.st_mode) ||
        fchmod(r, FIFO_MODE) != 0)
        goto fail;
    fifo_name(name, sizeof name, (uint64_t)st.st_ino);
    if (rename(tmp, name) != 0)
        goto fail;
    *rfd = r;
    *wfd = w;
    *ino = (uint64_t)st.st_ino;
    return 0;
fail:
    if (r >= 0)
        close_keep_errno(r);
    if (w >= 0)
        close_keep_errno(w);
    unlink(tmp);
    return -1;
}

void shmobj__os_notify_forget(uint64_t ino)
{
    char name[96];
    fifo_name(name, sizeof name, ino);
    struct stat st;
    if (lstat(name, &st) == 0 && S_ISFIFO(st.st_mode) && (uint64_t)st.st_ino == ino)
        unlink(name);
}

/* Open the FIFO of inode ino for writing: 0, SHMOBJ_ENOTFOUND (none of
 * that name: the caller may try the /proc way), or 1 (there, but not the
 * registered FIFO, or without a reader: its consumer is gone). */
static int fifo_open(uint64_t ino, int *wfd)
{
    char name[96];
    fifo_name(name, sizeof name, ino);
    int w = open(name, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    if (w < 0 && errno == ENXIO) {
        /* no reader: its consumer, which holds the read end as long as it
         * is registered, died; its FIFO goes now */
        shmobj__os_notify_forget(ino);
        return 1;
    }
    if (w < 0)
        return errno == ENOENT ? SHMOBJ_ENOTFOUND : 1;
    struct stat st;
    if (fstat(w, &st) != 0 || !S_ISFIFO(st.st_mode) || (uint64_t)st.st_ino != ino) {
        close(w);
        return 1;
    }
    *wfd = w;
    return 0;
}

void shmobj__os_notify_destroy(int rfd)
{
    if (rfd < 0)
        return;
    struct stat st;
    if (fstat(rfd, &st) == 0 && S_ISFIFO(st.st_mode))
        shmobj__os_notify_forget((uint64_t)st.st_ino);
    close(rfd);
}

int shmobj__os_notify_create(int *rfd, int *wfd, uint64_t *ino)
{
    if (fifo_create(rfd, wfd, ino) == 0)
        return 0;
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
    int f = fifo_open(ino, wfd);
    if (f == 0)
        return 0;
    if (f > 0 || pid == 0 || fd < 0)
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
    if (n < 0 && errno == EPIPE) {
        /* a FIFO without a reader is a dead consumer's: its name goes */
        struct stat st;
        if (fstat(wfd, &st) == 0 && S_ISFIFO(st.st_mode))
            shmobj__os_notify_forget((uint64_t)st.st_ino);
    }
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
    return access(FIFO_DIR, W_OK | X_OK) == 0 || access("/proc/self/fd", R_OK) == 0;
}

int shmobj__os_notify_poll(const int *fds, unsigned n, int timeout_ms,
                           unsigned char *ready)
{
    struct pollfd small[16];
    struct pollfd *p = n <= 16 ? small : calloc(n, sizeof *p);
    if (p == NULL) {
        errno = ENOMEM;
        return SHMOBJ_ESYS;
    }
    for (unsigned i = 0; i < n; i++)
        p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    int r;
    do
        r = poll(p, n, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r > 0)
        for (unsigned i = 0; i < n; i++)
            ready[i] = (p[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
    if (p != small) {
        int e = errno;
        free(p);
        errno = e;
    }
    return r < 0 ? SHMOBJ_ESYS : r;
}
