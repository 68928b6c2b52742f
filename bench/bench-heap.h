/* The heap bytes a segment's arena holds, for the bytes/item figures of
 * the programs that measure the map through the library (bench-map.c,
 * bench-sweep.c): the arena's own account, block headers included, read
 * without changing anything. Header-only; a failed read ends the program
 * (a figure without it would be wrong, not missing). */
#ifndef BENCH_HEAP_H
#define BENCH_HEAP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "shmobj.h"

static inline uint64_t bench_heap_used(shmobj_segment *seg)
{
    shmobj_arena_stats st = {.struct_size = sizeof st};
    int rc = shmobj_arena_stats_get(seg, &st);
    if (rc != 0) {
        fprintf(stderr, "arena stats: %s\n", shmobj_strerror(rc));
        exit(1);
    }
    return st.used_bytes;
}

#endif /* BENCH_HEAP_H */
