/* A key/value store shared by forked workers.
 *
 *   kvstore [WORKERS] [KEYS]
 *
 * The parent creates a segment and the map "kv", then forks WORKERS
 * children. A map handle belongs to the process that opened it, so each
 * child opens the map again (the segment handle it inherited is fine: it
 * attaches anew on first use). Each child writes KEYS keys of its own,
 * reads keys the others wrote when it finds them, and counts its writes
 * in the shared counter "total" with shmobj_map_add(). The parent then
 * checks every key and the counter, and lists a few entries. */
#include <shmobj.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int worker(shmobj_segment *seg, int id, int workers, long keys)
{
    shmobj_map *m = NULL;
    int rc = shmobj_map_open(seg, "kv", &m); /* this process's own handle */
    long seen = 0;
    for (long k = 0; k < keys && rc == 0; k++) {
        char key[32], value[48];
        int kl = snprintf(key, sizeof key, "w%d:%ld", id, k);
        int vl = snprintf(value, sizeof value, "written by worker %d, item %ld", id, k);
        rc = shmobj_map_set(m, key, (size_t)kl, value, (size_t)vl);
        if (rc == 0)
            rc = shmobj_map_add(m, "total", 5, 1, NULL);
        /* a neighbour's key: there or not yet, never half-written */
        kl = snprintf(key, sizeof key, "w%d:%ld", (id + 1) % workers, k);
        size_t len = 0;
        int g = shmobj_map_get(m, key, (size_t)kl, value, sizeof value, &len);
        if (g == 0)
            seen++;
        else if (g != SHMOBJ_ENOTFOUND)
            rc = g;
    }
    if (rc != 0)
        fprintf(stderr, "worker %d: %s\n", id, shmobj_strerror(rc));
    else
        printf("worker %d: wrote %ld keys, found %ld of its neighbour's\n", id, keys, seen);
    fflush(stdout); /* _exit() does not */
    shmobj_map_close(m);
    return rc != 0;
}

int main(int argc, char **argv)
{
    int workers = argc > 1 ? atoi(argv[1]) : 4;
    long keys = argc > 2 ? strtol(argv[2], NULL, 10) : 10000;
    if (workers < 1 || keys < 1)
        return 2;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.initial_size = 8u << 20;
    o.max_size = 1ull << 30; /* the map grows the segment as it needs */
    shmobj_segment *seg = NULL;
    shmobj_map *m = NULL;
    int rc = shmobj_segment_create("kvstore-example", &o, &seg);
    if (rc == 0)
        rc = shmobj_map_create(seg, "kv", &m);
    if (rc != 0) {
        fprintf(stderr, "create: %s\n", shmobj_strerror(rc));
        return 1;
    }
    fflush(stdout);
    for (int w = 0; w < workers; w++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0)
            _exit(worker(seg, w, workers, keys));
    }
    int failed = 0, status;
    while (wait(&status) > 0)
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    /* every key is there with its value */
    for (int w = 0; w < workers && rc == 0; w++)
        for (long k = 0; k < keys && rc == 0; k++) {
            char key[32], want[48], got[48];
            int kl = snprintf(key, sizeof key, "w%d:%ld", w, k);
            int wl = snprintf(want, sizeof want, "written by worker %d, item %ld", w, k);
            size_t len = 0;
            rc = shmobj_map_get(m, key, (size_t)kl, got, sizeof got, &len);
            if (rc == 0 && (len != (size_t)wl || memcmp(got, want, len) != 0))
                rc = SHMOBJ_ECORRUPT;
        }
    int64_t total = 0;
    uint64_t count = 0;
    if (rc == 0)
        rc = shmobj_map_add(m, "total", 5, 0, &total);
    if (rc == 0)
        rc = shmobj_map_count(m, &count);
    shmobj_map_iter *it = NULL;
    if (rc == 0)
        rc = shmobj_map_iter_open(m, &it);
    for (int shown = 0; rc == 0 && shown < 3; shown++) {
        const void *key, *value;
        size_t kl, vl;
        if (shmobj_map_iter_next(it, &key, &kl, &value, &vl) != 0)
            break;
        printf("  %.*s -> %zu bytes\n", (int)kl, (const char *)key, vl);
    }
    shmobj_map_iter_close(it);
    int ok = rc == 0 && !failed && total == (int64_t)workers * keys &&
             count == (uint64_t)workers * (uint64_t)keys + 1;
    if (rc != 0)
        fprintf(stderr, "parent: %s\n", shmobj_strerror(rc));
    printf("parent: %" PRIu64 " entries, total %" PRId64 ": %s\n", count, total,
           ok ? "every key and every add is there" : "WRONG");
    shmobj_map_close(m);
    shmobj_segment_close(seg);
    return !ok;
}
