/* Helpers of the cmocka tests that share figures with forked children and
 * account for a segment's heap (include after <cmocka.h> and shmobj.h). */
#ifndef SHMOBJ_TEST_SHARED_H
#define SHMOBJ_TEST_SHARED_H

#include <string.h>
#include <sys/mman.h>

/* Anonymous shared memory, zeroed, for counters between parent and
 * children. */
static inline void *shared_page(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 0, n);
    return p;
}

/* Heap bytes in live blocks, headers included. */
static inline uint64_t heap_used(shmobj_segment *seg)
{
    shmobj_arena_stats a = {.struct_size = sizeof a};
    assert_int_equal(shmobj_arena_stats_get(seg, &a), 0);
    return a.used_bytes;
}

#endif /* SHMOBJ_TEST_SHARED_H */
