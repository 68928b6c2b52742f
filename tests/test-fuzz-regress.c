/* Findings of the fuzz targets (fuzz/), each reduced to the smallest input
 * that shows it, as a test of the behaviour the documentation promises.
 *
 * test_segment_root_del_lock_impossible: fuzz-segment, input
 * fuzz/corpus/fuzz-segment/lock-impossible. A segment lock word that no
 * live lock can hold (a token of generation 0) makes the lock return
 * SHMOBJ_ECORRUPT, and shmobj_segment_root_del() passes it on; its
 * documentation (include/shmobj/segment.h) did not list that code. The
 * test holds the call to the codes it documents now.
 *
 * test_queue_trim_retire_lock_threads_live_documented: fuzz-queue, its
 * retire FIFO lock word set to a live handle's token (the target clears
 * such a word now, as a live holder is rightly waited for).
 * shmobj_queue_trim() waits the default 10 s bound for it and returns
 * SHMOBJ_EBUSY, which its documentation (include/shmobj/queue.h) did not
 * list. The handle is the caller's own, so the process has a second thread
 * that could hold it; with none (test_queue_trim_retire_lock_self_alone
 * _ecorrupt), nobody can, and the word is refused at once.
 *
 * test_queue_trim_retire_lock_impossible_ecorrupt and
 * test_queue_trim_retire_lock_dead_taken_over: fuzz-queue, inputs
 * fuzz/corpus/fuzz-queue/retire-lock-impossible and retire-lock-dead. A
 * word no lock can hold is refused at once; a dead owner's word is taken
 * over and the FIFO repaired, so trim succeeds and the lock is free
 * again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>

#include "queue-internal.h"
#include "segment.h"
#include "shmobj.h"
#include "test-util.h"

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

/* The codes shmobj_queue_trim() documents. */
static int trim_documented(int rc)
{
    return rc == 0 || rc == SHMOBJ_EINVAL || rc == SHMOBJ_ESTALE ||
           rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_EBUSY;
}

/* A queue whose retire FIFO holds one 40 KiB block, and the FIFO's lock
 * word. */
static _Atomic uint32_t *queue_with_retired(shmobj_segment *seg, shmobj_queue **q)
{
    assert_int_equal(shmobj_queue_create(seg, "q", 8, 0, q), 0);
    (*q)->retire_min = 32u << 10;
    (*q)->retire_max = 64u << 10;
    (*q)->retire_budget = 4 * (40u << 10);
    shmobj_ref r, t;
    assert_int_equal(shmobj_queue_msg_alloc(*q, 40u << 10, 0, &r, NULL), 0);
    assert_int_equal(shmobj_queue_put(*q, r), 0);
    assert_int_equal(shmobj_queue_try_take(*q, &t), 0);
    assert_int_equal(shmobj_queue_msg_done(*q, t), 0);
    uint64_t blocks, bytes;
    shmobj__retire_count(shmobj__queue_retire(*q), &blocks, &bytes);
    assert_int_equal(blocks, 1);
    return &shmobj__queue_retire(*q)->lock.word;
}

static _Atomic int idle_stop;

static void *idle_thread(void *p)
{
    (void)p;
    while (!atomic_load(&idle_stop))
        test_sleep_ms(1);
    return NULL;
}

static void test_queue_trim_retire_lock_threads_live_documented(void **state)
{
    (void)state;
    shmobj_segment *seg = create_small();
    shmobj_queue *q;
    _Atomic uint32_t *w = queue_with_retired(seg, &q);
    struct shmobj__space *sp = (struct shmobj__space *)seg;
    /* held, says the word, by us: with another thread in the process, one
     * that may hold it */
    pthread_t t;
    atomic_store(&idle_stop, 0);
    assert_int_equal(pthread_create(&t, NULL, idle_thread, NULL), 0);
    atomic_store(w, sp->ops->live->token(sp));
    int rc = shmobj_queue_trim(q); /* waits the default bound: 10 s */
    atomic_store(&idle_stop, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    atomic_store(w, 0);
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
    if (!trim_documented(rc))
        fail_msg("trim returned %d (%s), which its documentation does not list",
                 rc, shmobj_errname(rc));
    assert_int_equal(rc, SHMOBJ_EBUSY);
}

/* Our own token in the word of a process with no other thread: nobody can
 * hold it, so it is refused at once. */
static void test_queue_trim_retire_lock_self_alone_ecorrupt(void **state)
{
    (void)state;
    shmobj_segment *seg = create_small();
    shmobj_queue *q;
    _Atomic uint32_t *w = queue_with_retired(seg, &q);
    struct shmobj__space *sp = (struct shmobj__space *)seg;
    atomic_store(w, sp->ops->live->token(sp));
    assert_int_equal(shmobj_queue_trim(q), SHMOBJ_ECORRUPT);
    atomic_store(w, 0);
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
}

static void test_queue_trim_retire_lock_impossible_ecorrupt(void **state)
{
    (void)state;
    shmobj_segment *seg = create_small();
    shmobj_queue *q;
    _Atomic uint32_t *w = queue_with_retired(seg, &q);
    atomic_store(w, 5); /* slot 5, generation 0: no token has it */
    assert_int_equal(shmobj_queue_trim(q), SHMOBJ_ECORRUPT);
    atomic_store(w, 0);
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
}

static void test_queue_trim_retire_lock_dead_taken_over(void **state)
{
    (void)state;
    shmobj_segment *seg = create_small();
    shmobj_queue *q;
    _Atomic uint32_t *w = queue_with_retired(seg, &q);
    atomic_store(w, 5 | 1u << 10); /* slot 5, generation 1: nobody attached */
    assert_int_equal(shmobj_queue_trim(q), 0);
    assert_int_equal(atomic_load(w), 0); /* taken over, then released */
    uint64_t blocks, bytes;
    shmobj__retire_count(shmobj__queue_retire(q), &blocks, &bytes);
    assert_int_equal(blocks, 0);
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segment_root_del_lock_impossible),
        cmocka_unit_test(test_queue_trim_retire_lock_threads_live_documented),
        cmocka_unit_test(test_queue_trim_retire_lock_self_alone_ecorrupt),
        cmocka_unit_test(test_queue_trim_retire_lock_impossible_ecorrupt),
        cmocka_unit_test(test_queue_trim_retire_lock_dead_taken_over),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
