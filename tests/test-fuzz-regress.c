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
 * again.
 *
 * test_topic_take_slot_length_wrapping_ecorrupt: fuzz-topic, input
 * fuzz/corpus/fuzz-topic/slot-len-wrap. A slot whose length is 2^64 - 32,
 * with its loan's header claiming as much, made the take check 64 + len
 * bytes, which wrapped round to 32, and hand out a message of 2^64 - 32
 * bytes: its reader ran past the mapping. The take refuses it now.
 *
 * test_topic_loan_spare_header_too_large_not_lent: fuzz-topic, input
 * fuzz/corpus/fuzz-topic/spare-cap-large. A loan made from a spare block
 * trusted the block's header for its size, so a header claiming more
 * than the block has gave a loan whose writer wrote over the next block's
 * heap header. The heap judges a spare block now before it is lent.
 *
 * test_topic_loan_cancel_after_destroy_documented and
 * test_topic_destroy_other_version_documented: fuzz-topic, its identity
 * and version words damaged. shmobj_topic_loan_cancel() returned
 * SHMOBJ_ESTALE for a destroyed topic, and shmobj_topic_destroy()
 * SHMOBJ_EVERSION for another format's block (and SHMOBJ_ESTALE for one
 * being destroyed), none of which their documentation
 * (include/shmobj/topic.h) listed; it does now. */
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
#include "topic-int.h"

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

/* ---- topics ------------------------------------------------------------- */

static shmobj_topic *topic_small(shmobj_segment *seg, uint32_t capacity)
{
    shmobj_topic_config cfg;
    shmobj_topic_config_init(&cfg);
    cfg.capacity = capacity;
    cfg.subscribers = 2;
    shmobj_topic *t = NULL;
    assert_int_equal(shmobj_topic_create(seg, "t", &cfg, &t), 0);
    return t;
}

static void test_topic_take_slot_length_wrapping_ecorrupt(void **state)
{
    (void)state;
    shmobj_segment *seg = create_small();
    shmobj_topic *t = topic_small(seg, 8);
    shmobj_topic_sub *s;
    assert_int_equal(shmobj_topic_subscribe(t, &s), 0);
    shmobj_topic_loan l;
    assert_int_equal(shmobj_topic_loan_get(t, 64, &l), 0);
    memset(l.data, 'm', 64);
    assert_int_equal(shmobj_topic_loan_publish(t, &l, 64, 0), 0);
    /* 64 + (2^64 - 32) wraps to 32 bytes; the header agrees with the slot */
    struct shmobj__topic_slot *sl = &t->slots[0];
    void *p;
    assert_int_equal(shmobj_arena_ptr(seg, atomic_load(&sl->ref), &p, NULL), 0);
    ((struct shmobj__topic_msghdr *)p)->size = UINT64_MAX;
    atomic_store(&sl->len, UINT64_MAX - 31);
    shmobj_topic_msg m = {0};
    assert_int_equal(shmobj_topic_try_take(s, &m), SHMOBJ_ECORRUPT);
    assert_null(m.data);
    /* taken all the same, so it can be let go */
    assert_int_equal(shmobj_topic_release(s, &m), 0);
    shmobj_topic_unsubscribe(s);
    shmobj_topic_close(t);
    shmobj_segment_close(seg);
}

static void test_topic_loan_spare_header_too_large_not_lent(void **state)
{
    (void)state;
    shmobj_segment *seg = create_small();
    shmobj_topic *t = topic_small(seg, 4);
    shmobj_topic_sub *s;
    assert_int_equal(shmobj_topic_subscribe(t, &s), 0);
    /* round the ring: reclaim keeps the 9-byte messages' blocks as spares */
    for (int i = 0; i < 8; i++) {
        shmobj_topic_msg m;
        assert_int_equal(shmobj_topic_publish(t, "overwrite", 9, 0), 0);
        assert_int_equal(shmobj_topic_try_take(s, &m), 0);
        assert_int_equal(shmobj_topic_release(s, &m), 0);
    }
    /* every spare's header claims 155 bytes: room, it says, for a loan of
     * 40 bytes, which its block (64 + 9 bytes asked) has not */
    unsigned damaged = 0;
    for (uint32_t i = SHMOBJ_TOPIC_LOANS_MAX; i < SHMOBJ__TOPIC_LOANRECS; i++) {
        shmobj_ref r = atomic_load(&t->loans[i].ref);
        void *p;
        if (r != 0 && shmobj_arena_ptr(seg, r, &p, NULL) == 0) {
            ((struct shmobj__topic_msghdr *)p)->cap = 155;
            damaged++;
        }
    }
    assert_true(damaged > 0);
    shmobj_topic_loan l;
    assert_int_equal(shmobj_topic_loan_get(t, 40, &l), 0);
    void *p;
    size_t usable = 0;
    assert_int_equal(shmobj_arena_ptr(seg, l.ref, &p, &usable), 0);
    assert_true(usable >= SHMOBJ__TOPIC_MSG_HEADER + 40);
    memset(l.data, 0xff, 40);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(seg, &bad), 0);
    assert_int_equal(shmobj_topic_loan_cancel(t, &l), 0);
    shmobj_topic_unsubscribe(s);
    shmobj_topic_close(t);
    shmobj_segment_close(seg);
}

/* The codes shmobj_topic_loan_cancel() documents. */
static int cancel_documented(int rc)
{
    return rc == 0 || rc == SHMOBJ_EINVAL || rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT ||
           rc == SHMOBJ_ERDONLY;
}

static void test_topic_loan_cancel_after_destroy_documented(void **state)
{
    (void)state;
    shmobj_segment *seg = create_small();
    shmobj_topic *t = topic_small(seg, 8);
    shmobj_topic_loan l;
    assert_int_equal(shmobj_topic_loan_get(t, 64, &l), 0);
    /* the loan's block goes back to the heap with the topic */
    assert_int_equal(shmobj_topic_destroy(seg, "t"), 0);
    int rc = shmobj_topic_loan_cancel(t, &l);
    shmobj_topic_close(t);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(seg, &bad), 0);
    shmobj_segment_close(seg);
    if (!cancel_documented(rc))
        fail_msg("loan_cancel returned %d (%s), which its documentation does not list",
                 rc, shmobj_errname(rc));
    assert_int_equal(rc, SHMOBJ_ESTALE);
}

/* The codes shmobj_topic_destroy() documents. */
static int destroy_documented(int rc)
{
    return rc == 0 || rc == SHMOBJ_EINVAL || rc == SHMOBJ_ENOTFOUND || rc == SHMOBJ_ETYPE ||
           rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_EVERSION ||
           rc == SHMOBJ_EBUSY || rc == SHMOBJ_ENOMEM || rc == SHMOBJ_ERDONLY;
}

static void test_topic_destroy_other_version_documented(void **state)
{
    (void)state;
    shmobj_segment *seg = create_small();
    shmobj_topic *t = topic_small(seg, 8);
    t->hdr->version = 99;
    int rc = shmobj_topic_destroy(seg, "t");
    t->hdr->version = SHMOBJ__TOPIC_VERSION;
    /* identity 0: as a destroy leaves it until the name goes */
    uint64_t ident = atomic_load(&t->hdr->ident);
    atomic_store(&t->hdr->ident, 0);
    int rc_stale = shmobj_topic_destroy(seg, "t");
    atomic_store(&t->hdr->ident, ident);
    assert_int_equal(shmobj_topic_destroy(seg, "t"), 0);
    shmobj_topic_close(t);
    shmobj_segment_close(seg);
    if (!destroy_documented(rc) || !destroy_documented(rc_stale))
        fail_msg("destroy returned %s and %s, which its documentation does not list",
                 shmobj_errname(rc), shmobj_errname(rc_stale));
    assert_int_equal(rc, SHMOBJ_EVERSION);
    assert_int_equal(rc_stale, SHMOBJ_ESTALE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segment_root_del_lock_impossible),
        cmocka_unit_test(test_queue_trim_retire_lock_threads_live_documented),
        cmocka_unit_test(test_queue_trim_retire_lock_self_alone_ecorrupt),
        cmocka_unit_test(test_queue_trim_retire_lock_impossible_ecorrupt),
        cmocka_unit_test(test_queue_trim_retire_lock_dead_taken_over),
        cmocka_unit_test(test_topic_take_slot_length_wrapping_ecorrupt),
        cmocka_unit_test(test_topic_loan_spare_header_too_large_not_lent),
        cmocka_unit_test(test_topic_loan_cancel_after_destroy_documented),
        cmocka_unit_test(test_topic_destroy_other_version_documented),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
