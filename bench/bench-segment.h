/* The segment a bench program of ours puts its subjects in: named after
 * the program and its pid (a leftover of a killed earlier run of the same
 * pid is removed first), `size` bytes at the start, growing to `max`
 * (0: the library's default). NULL, with the reason on stderr, when it
 * cannot be made. Include after shmobj.h. */
#ifndef SHMOBJ_BENCH_SEGMENT_H
#define SHMOBJ_BENCH_SEGMENT_H

#include <stdio.h>
#include <unistd.h>

static inline shmobj_segment *bench_segment_new(char *name, size_t len, const char *program,
                                                uint64_t size, uint64_t max)
{
    shmobj_segment_options o;
    shmobj_segment *seg = NULL;
    shmobj_segment_options_init(&o);
    o.initial_size = size;
    if (max != 0)
        o.max_size = max;
    snprintf(name, len, "shmobj-bench-%s-%ld", program, (long)getpid());
    (void)shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    int rc = shmobj_segment_create(name, &o, &seg);
    if (rc != 0) {
        fprintf(stderr, "segment create: %s\n", shmobj_strerror(rc));
        return NULL;
    }
    return seg;
}

#endif /* SHMOBJ_BENCH_SEGMENT_H */
