/* The huge-page pool for the benchmarks' huge-page subjects: as root, a
 * run adds the pool pages it needs to /proc/sys/vm/nr_hugepages and puts
 * the old count back at exit, on its alarm or on a signal. Header-only,
 * for bench-map.c and bench-sweep.c. */
#ifndef BENCH_POOL_H
#define BENCH_POOL_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NR_HUGEPAGES "/proc/sys/vm/nr_hugepages"
static long pool_saved = -1;

static long pool_read(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    char line[256];
    long v = -1;
    size_t n = key ? strlen(key) : 0;
    while (f && fgets(line, sizeof line, f)) {
        if (key == NULL) {
            v = strtol(line, NULL, 10);
            break;
        }
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    }
    if (f)
        fclose(f);
    return v;
}

static void pool_restore(void)
{
    if (pool_saved < 0)
        return;
    FILE *f = fopen(NR_HUGEPAGES, "w");
    if (f) {
        fprintf(f, "%ld\n", pool_saved);
        fclose(f);
    }
    pool_saved = -1;
}

static void pool_signal(int sig)
{
    pool_restore();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Make `bytes` of free huge pages available when root can; false when
 * the pool stays short. */
static int pool_ensure(uint64_t bytes)
{
    long kb = pool_read("/proc/meminfo", "Hugepagesize");
    long free_ = pool_read("/proc/meminfo", "HugePages_Free");
    long total = pool_read(NR_HUGEPAGES, NULL);
    if (kb <= 0 || free_ < 0 || total < 0)
        return 0;
    long need = (long)(bytes / ((uint64_t)kb * 1024)) + 1;
    if (free_ >= need)
        return 1;
    FILE *f = fopen(NR_HUGEPAGES, "w");
    if (f == NULL)
        return 0;
    if (pool_saved < 0) {
        pool_saved = total;
        atexit(pool_restore);
        /* the alarm of bench_main and the timeout of bench/run end the
         * run with a signal: give the pages back then too */
        signal(SIGALRM, pool_signal);
        signal(SIGTERM, pool_signal);
        signal(SIGINT, pool_signal);
    }
    fprintf(f, "%ld\n", total + need - free_);
    fclose(f);
    return pool_read("/proc/meminfo", "HugePages_Free") >= need;
}

#endif
