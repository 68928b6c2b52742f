/* Calls about this process only: its descriptors, its threads, the wall
 * clock. Nothing here touches shared memory or another process, so none of
 * it needs a liveness rule; it lives here so that lib/os stays the one
 * layer that calls the system. */
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "os.h"

void shmobj__os_fd_close(int fd)
{
    if (fd >= 0)
        (void)close(fd);
}

int shmobj__os_fd_dup(int fd)
{
    return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

uint64_t shmobj__os_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void shmobj__os_yield(void)
{
    (void)sched_yield();
}

void shmobj__os_sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    (void)nanosleep(&ts, NULL);
}

void shmobj__os_pmutex_init(shmobj__os_pmutex *m)
{
    (void)pthread_mutex_init(&m->m, NULL);
}

void shmobj__os_pmutex_destroy(shmobj__os_pmutex *m)
{
    (void)pthread_mutex_destroy(&m->m);
}

void shmobj__os_pmutex_lock(shmobj__os_pmutex *m)
{
    (void)pthread_mutex_lock(&m->m);
}

void shmobj__os_pmutex_unlock(shmobj__os_pmutex *m)
{
    (void)pthread_mutex_unlock(&m->m);
}

bool shmobj__os_threads_alone(void)
{
    /* /proc/self/stat: "pid (comm) state ppid ...", num_threads the 20th
     * field; comm may hold spaces and parentheses, so count from its last
     * ')'. */
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return false;
    /* after ')': field 3 (state) ... field 20 (num_threads) */
    for (int field = 2; field < 20 && p != NULL; field++)
        p = strchr(p + 1, ' ');
    return p != NULL && strtol(p + 1, NULL, 10) == 1;
}
