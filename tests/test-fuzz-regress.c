/* Findings of the fuzz targets (fuzz/), each reduced to the smallest input
 * that shows it, as a test of the behaviour the documentation promises.
 *
 * test_segment_root_del_lock_impossible: fuzz-segment, input
 * fuzz/corpus/fuzz-segment/lock-impossible. A segment lock word that no
 * live lock can hold (a token of generation 0) makes the lock return
 * SHMOBJ_ECORRUPT, and shmobj_segment_root_del() passes it on; its
 * documentation (include/shmobj/segment.h) did not list that code. The
 * test holds the call to the codes it documents now. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "segment.h"
#include "shmobj.h"

static shmobj_segment *create_small(void)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.initial_size = 1u << 20;
    o.max_size = 1u << 20;
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_create("fuzz-regress", &o, &seg), 0);
    return seg;
}

/* The codes shmobj_segment_root_del() documents. */
static int root_del_documented(int rc)
{
    return rc == 0 || rc == SHMOBJ_EINVAL || rc == SHMOBJ_ENOTFOUND ||
           rc == SHMOBJ_EBUSY || rc == SHMOBJ_ECORRUPT;
}

static void test_segment_root_del_lock_impossible(void **state)
{
    (void)state;
    shmobj_segment *seg = create_small();
    shmobj_ref r;
    assert_int_equal(shmobj_arena_alloc(seg, 64, 0, &r, NULL), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "x", r), 0);
    /* slot 5, generation 0: no token has it */
    atomic_store(&seg->hdr->lock.word, 5);
    int rc = shmobj_segment_root_del(seg, "x");
    atomic_store(&seg->hdr->lock.word, 0);
    assert_int_equal(rc, SHMOBJ_ECORRUPT); /* refused at once, not waited on */
    shmobj_segment_close(seg);
    if (!root_del_documented(rc))
        fail_msg("root_del returned %d (%s), which its documentation does not list",
                 rc, shmobj_errname(rc));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segment_root_del_lock_impossible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
