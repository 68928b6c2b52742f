/* Liveness through open-file-description (OFD) locks on the segment's
 * backing object.
 *
 * Each attached handle holds a write lock on one byte of its segment's
 * file, far beyond any data (the bytes of a lock need not exist). The kernel
 * drops the lock when the last descriptor of that open file description is
 * closed, which includes the death of the process by any signal, so "is the
 * byte locked?" answers "is its owner still attached?" without pids. That
 * works across PID namespaces (two containers sharing /dev/shm see the same
 * file) and cannot be fooled by pid reuse, and it needs no /proc.
 *
 * A probe from the description that holds the lock sees no conflict: the
 * callers treat their own bytes as alive before they probe. A probe that
 * fails for any reason other than "unlocked" answers "alive": memory is
 * never reclaimed because liveness could not be seen. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "os.h"
#include "shmobj/error.h"

static int ofd_lock(int fd, int cmd, short type, uint64_t byte,
                    struct flock *out)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)byte;
    fl.l_len = 1;
    fl.l_pid = 0; /* required for OFD commands */
    int rc;
    do
        rc = fcntl(fd, cmd, &fl);
    while (rc != 0 && errno == EINTR);
    if (out != NULL)
        *out = fl;
    return rc;
}

int shmobj__os_live_hold(int fd, uint64_t byte)
{
    if (byte > (uint64_t)INT64_MAX)
        return SHMOBJ_EINVAL;
    if (ofd_lock(fd, F_OFD_SETLK, F_WRLCK, byte, NULL) == 0)
        return 0;
    if (errno == EAGAIN || errno == EACCES)
        return SHMOBJ_EBUSY;
    if (errno == EINVAL || errno == ENOLCK || errno == EOPNOTSUPP)
        return SHMOBJ_ENOTSUP;
    return SHMOBJ_ESYS;
}

void shmobj__os_live_drop(int fd, uint64_t byte)
{
    if (byte <= (uint64_t)INT64_MAX)
        (void)ofd_lock(fd, F_OFD_SETLK, F_UNLCK, byte, NULL);
}

int shmobj__os_live_probe(int fd, uint64_t byte)
{
    struct flock fl;
    if (byte > (uint64_t)INT64_MAX ||
        ofd_lock(fd, F_OFD_GETLK, F_WRLCK, byte, &fl) != 0)
        return 1; /* unknown: alive */
    return fl.l_type == F_UNLCK ? 0 : 1;
}

/* Forks seen by this process: handles compare it with the value they
 * attached under, so a child notices it inherited them. */
_Atomic uint32_t shmobj__os_forks;
/* getpid() is a system call; records that name their writer's pid for
 * tools read this copy, renewed in a forked child. */
static _Atomic uint32_t own_pid;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_child(void)
{
    atomic_store_explicit(&own_pid, (uint32_t)getpid(), memory_order_relaxed);
    atomic_fetch_add_explicit(&shmobj__os_forks, 1, memory_order_relaxed);
}

static void fork_register(void)
{
    atomic_store_explicit(&own_pid, (uint32_t)getpid(), memory_order_relaxed);
    (void)pthread_atfork(NULL, NULL, fork_child);
}

uint32_t shmobj__os_fork_generation(void)
{
    pthread_once(&fork_once, fork_register);
    return atomic_load_explicit(&shmobj__os_forks, memory_order_relaxed);
}

uint32_t shmobj__os_pid(void)
{
    pthread_once(&fork_once, fork_register);
    return atomic_load_explicit(&own_pid, memory_order_relaxed);
}
