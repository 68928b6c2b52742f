/* Process identity that survives pid reuse: (pid, start time). The start
 * time is field 22 of /proc/<pid>/stat, in clock ticks since boot; a pid
 * recycled by a new process has a later start time. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os.h"
#include "shmobj/error.h"

/* Reads the start time of pid; false when the process does not exist or
 * has already exited (a zombie waiting to be reaped holds nothing). */
static bool read_start_time(uint32_t pid, uint64_t *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    /* The command name (field 2) may hold spaces and parentheses: count
     * fields from the last ')'. */
    char *p = strrchr(buf, ')');
    if (p == NULL || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
        return false;
    /* After ')' come fields 3, 4, ...; the start time is field 22. */
    for (int field = 2; field < 22 && p != NULL; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL)
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p + 1, &end, 10);
    if (errno != 0 || end == p + 1)
        return false;
    *start = v;
    return true;
}

int shmobj__os_proc_self(shmobj__os_proc *out)
{
    /* Cached per pid: a forked child sees a different getpid() and reads
     * its own start time once. */
    static _Thread_local uint32_t cached_pid;
    static _Thread_local uint64_t cached_start;
    uint32_t pid = (uint32_t)getpid();
    if (pid != cached_pid) {
        uint64_t start;
        if (!read_start_time(pid, &start))
            return SHMOBJ_ESYS;
        cached_start = start;
        cached_pid = pid;
    }
    out->pid = pid;
    out->reserved = 0;
    out->start_time = cached_start;
    return 0;
}

bool shmobj__os_proc_alive(const shmobj__os_proc *p)
{
    if (p->pid == 0)
        return false;
    if (kill((pid_t)p->pid, 0) != 0 && errno == ESRCH)
        return false;
    uint64_t start;
    if (!read_start_time(p->pid, &start))
        return false; /* exited, or gone between the two checks */
    return start == p->start_time;
}
