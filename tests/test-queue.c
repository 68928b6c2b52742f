/* Message queues: lifecycle, full/empty, timeouts, peek, blocking wake-ups,
 * completion, copy-in, the retire FIFO of done message blocks, the pollable
 * descriptor, 2 producers x 2 consumers x 1,000,000 messages across
 * processes (exactly once, per-producer order), slots of dead producers and
 * consumers, and SIGKILL at random moments. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "os.h"
#include "queue-internal.h"
#include "ring.h"
#include "shmobj.h"
#include "test-util.h"
#include "test-stall.h"

#ifndef TEST_KILL_ITERATIONS
#define TEST_KILL_ITERATIONS 200
#endif

#define MiB (UINT64_C(1) << 20)
#define SEC (INT64_C(1000000000))

struct fixture {
    char name[96];
    shmobj_segment *seg;
};

/* Give this handle's cached blocks back to the heap's free lists (its
 * statistics do), so that the heap hands the blocks freed last out first
 * again: the tests that make a new structure take a destroyed one's place
 * rely on it. */
static void heap_uncache(shmobj_segment *seg)
{
    shmobj_arena_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_arena_stats_get(seg, &st), 0);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    test_name(f->name, sizeof f->name, "queue");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 64 * MiB;
    if (shmobj_segment_create(f->name, &o, &f->seg) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    shmobj_segment_close(f->seg);
    shmobj_segment_destroy(f->name, SHMOBJ_BACKEND_SHM);
    free(f);
    return 0;
}

/* A message value for tests that need no heap block: 16-aligned, non-zero,
 * encoding (producer, sequence). */
static inline shmobj_ref msg_of(unsigned producer, uint64_t seq)
{
    return (((uint64_t)producer << 40) | seq) << 4;
}
static inline unsigned msg_producer(shmobj_ref r) { return (unsigned)(r >> 44); }
static inline uint64_t msg_seq(shmobj_ref r)
{
    return (r >> 4) & ((UINT64_C(1) << 40) - 1);
}

/* Shared scratch memory for children to report through. */
static void *shared_alloc(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    assert_true(p != MAP_FAILED);
    return p;
}

static uint64_t used_blocks(shmobj_segment *seg)
{
    shmobj_arena_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_arena_stats_get(seg, &st), 0);
    return st.used_blocks;
}

/* ---- lifecycle ------------------------------------------------------------ */

static void test_queue_create_open_close_roundtrip(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *a = NULL, *b = NULL;
    assert_int_equal(shmobj_queue_create(f->seg, "jobs", 8, 0, &a), 0);
    assert_int_equal(shmobj_queue_create(f->seg, "jobs", 8, 0, &b),
                     SHMOBJ_EEXIST);
    assert_int_equal(shmobj_queue_open(f->seg, "jobs", &b), 0);
    uint32_t cap = 0;
    assert_int_equal(shmobj_queue_capacity(b, &cap), 0);
    assert_int_equal(cap, 8);
    assert_int_equal(shmobj_queue_put(a, msg_of(1, 1)), 0);
    shmobj_ref r = 0;
    assert_int_equal(shmobj_queue_take(b, &r), 0);
    assert_int_equal(r, msg_of(1, 1));
    shmobj_queue_close(b);
    shmobj_queue_close(a);
    shmobj_queue_close(NULL);
    assert_int_equal(shmobj_queue_destroy(f->seg, "jobs"), 0);
    assert_int_equal(shmobj_queue_open(f->seg, "jobs", &b), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_queue_destroy(f->seg, "jobs"), SHMOBJ_ENOTFOUND);
}

static void test_queue_create_bad_arguments(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q = NULL;
    char longname[SHMOBJ_QUEUE_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    assert_int_equal(shmobj_queue_create(NULL, "a", 8, 0, &q), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_create(f->seg, "", 8, 0, &q), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_create(f->seg, longname, 8, 0, &q),
                     SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_create(f->seg, "a", 6, 0, &q), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_create(f->seg, "a", 1, 0, &q), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_create(f->seg, "a", 8, 1, &q), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_create(f->seg, SHMOBJ_QUEUE_DEFAULT, 2, 0, &q),
                     0);
    assert_int_equal(shmobj_queue_put(q, 0), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_put(q, 24), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_take(q, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_put(NULL, 16), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_spin_set(NULL, 0), SHMOBJ_EINVAL);
    assert_false(shmobj_queue_has_messages(NULL));
    shmobj_queue_close(q);
}

/* A root that names something other than a queue is refused as the wrong
 * kind (SHMOBJ_ETYPE): a raw block, a map; a ring header that says it is a
 * queue but does not fit its block is damage (SHMOBJ_ECORRUPT). */
static void test_queue_open_not_a_queue_etype(void **state)
{
    struct fixture *f = *state;
    shmobj_ref r;
    void *p;
    assert_int_equal(shmobj_arena_alloc(f->seg, 4096, 64, &r, NULL), 0);
    assert_int_equal(shmobj_arena_ptr(f->seg, r, &p, NULL), 0);
    memset(p, 0x5a, 4096);
    assert_int_equal(shmobj_segment_root_set(f->seg, "bogus", r), 0);
    shmobj_queue *q = NULL;
    assert_int_equal(shmobj_queue_open(f->seg, "bogus", &q), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_queue_destroy(f->seg, "bogus"), SHMOBJ_ETYPE);
    /* a block too small to hold a ring header is not a queue either */
    shmobj_ref tiny;
    assert_int_equal(shmobj_arena_alloc(f->seg, 16, 16, &tiny, NULL), 0);
    assert_int_equal(shmobj_segment_root_set(f->seg, "tiny", tiny), 0);
    assert_int_equal(shmobj_queue_open(f->seg, "tiny", &q), SHMOBJ_ETYPE);
    shmobj_map *m;
    assert_int_equal(shmobj_map_create(f->seg, "amap", &m), 0);
    assert_int_equal(shmobj_queue_open(f->seg, "amap", &q), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_queue_destroy(f->seg, "amap"), SHMOBJ_ETYPE);
    shmobj_map_close(m);
    /* a ring header with a capacity larger than its block */
    shmobj_queue *good = NULL;
    assert_int_equal(shmobj_queue_create(f->seg, "small", 4, 0, &good), 0);
    struct shmobj__ring_hdr *h = shmobj__queue_ring(good)->hdr;
    h->capacity = 1u << 20;
    h->cap_log2 = 20;
    assert_int_equal(shmobj_queue_open(f->seg, "small", &q), SHMOBJ_ECORRUPT);
    h->capacity = 4;
    h->cap_log2 = 2;
    h->version = 99;
    assert_int_equal(shmobj_queue_open(f->seg, "small", &q), SHMOBJ_EVERSION);
    h->version = SHMOBJ__RING_VERSION;
    assert_int_equal(shmobj_queue_open(f->seg, "small", &q), 0);
    shmobj_queue_close(q);
    shmobj_queue_close(good);
}

static void test_queue_damaged_slot_corrupt(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "dmg", 4, 0, &q), 0);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    assert_int_equal(shmobj_queue_put(q, msg_of(1, 1)), 0);
    /* the next free slot holds a word no state of its position has: a put
     * reports the damage instead of waiting for ever */
    uint64_t e = atomic_load(&r->hdr->enq_pos);
    uint64_t good = atomic_load(&r->slots[e & r->mask].word);
    atomic_store(&r->slots[e & r->mask].word, (UINT64_C(12345) << 2) | 1);
    assert_int_equal(shmobj_queue_try_put(q, msg_of(1, 2)), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_queue_put_timed(q, msg_of(1, 2), SEC), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_queue_put(q, msg_of(1, 2)), SHMOBJ_ECORRUPT);
    atomic_store(&r->slots[e & r->mask].word, good);
    assert_int_equal(shmobj_queue_try_put(q, msg_of(1, 2)), 0);

    /* the same at the head: takes and peeks report it instead of waiting
     * for a message that can never come out */
    uint64_t d = atomic_load(&r->hdr->deq_pos);
    good = atomic_load(&r->slots[d & r->mask].word);
    atomic_store(&r->slots[d & r->mask].word, (UINT64_C(777) << 2) | 3);
    shmobj_ref m;
    assert_int_equal(shmobj_queue_try_take(q, &m), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_queue_take_timed(q, &m, SEC), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_queue_try_peek(q, &m), SHMOBJ_ECORRUPT);
    atomic_store(&r->slots[d & r->mask].word, good);
    assert_int_equal(shmobj_queue_try_take(q, &m), 0);
    assert_int_equal(m, msg_of(1, 1));
    shmobj_queue_close(q);
}

/* ---- full / empty / order / timeouts / peek ------------------------------ */

static void test_queue_try_put_full_and_empty(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "fe", 4, 0, &q), 0);
    shmobj_ref r;
    assert_int_equal(shmobj_queue_try_take(q, &r), SHMOBJ_EEMPTY);
    for (uint64_t lap = 0; lap < 5; lap++) {
        for (uint64_t i = 1; i <= 4; i++)
            assert_int_equal(shmobj_queue_try_put(q, msg_of(0, lap * 4 + i)), 0);
        assert_int_equal(shmobj_queue_try_put(q, msg_of(0, 99)), SHMOBJ_EFULL);
        assert_int_equal(shmobj_queue_put_timed(q, msg_of(0, 99), 0),
                         SHMOBJ_EFULL);
        uint64_t n = 0;
        assert_int_equal(shmobj_queue_count(q, &n), 0);
        assert_int_equal(n, 4);
        for (uint64_t i = 1; i <= 4; i++) {
            assert_int_equal(shmobj_queue_try_take(q, &r), 0);
            assert_int_equal(r, msg_of(0, lap * 4 + i)); /* FIFO */
        }
        assert_int_equal(shmobj_queue_try_take(q, &r), SHMOBJ_EEMPTY);
        assert_int_equal(shmobj_queue_take_timed(q, &r, 0), SHMOBJ_EEMPTY);
    }
    shmobj_queue_close(q);
}

/* A timed call that gives up must have waited until its deadline: the
 * deadline, taken on the monotonic clock before the call, has passed when
 * it returns (an upper bound of the wait, whatever the machine's speed). */
#define EXPECT_TIMEOUT(call, timeout)                                          \
    do {                                                                       \
        uint64_t deadline_ = shmobj__os_now_ns() + (uint64_t)(timeout);        \
        assert_int_equal((call), SHMOBJ_ETIMEDOUT);                            \
        assert_true(shmobj__os_now_ns() >= deadline_);                         \
    } while (0)

static void test_queue_timed_times_out(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "to", 2, 0, &q), 0);
    shmobj_ref r;
    EXPECT_TIMEOUT(shmobj_queue_take_timed(q, &r, 30 * TEST_MS), 30 * TEST_MS);
    EXPECT_TIMEOUT(shmobj_queue_peek_timed(q, &r, 10 * TEST_MS), 10 * TEST_MS);
    assert_int_equal(shmobj_queue_put(q, msg_of(0, 1)), 0);
    assert_int_equal(shmobj_queue_put(q, msg_of(0, 2)), 0);
    EXPECT_TIMEOUT(shmobj_queue_put_timed(q, msg_of(0, 3), 20 * TEST_MS), 20 * TEST_MS);
    /* with a spin first */
    assert_int_equal(shmobj_queue_spin_set(q, 5 * TEST_MS), 0);
    EXPECT_TIMEOUT(shmobj_queue_put_timed(q, msg_of(0, 3), 20 * TEST_MS), 20 * TEST_MS);
    assert_int_equal(shmobj_queue_spin_set(q, -1), 0);
    EXPECT_TIMEOUT(shmobj_queue_put_timed(q, msg_of(0, 3), 10 * TEST_MS), 10 * TEST_MS);
    shmobj_queue_close(q);
}

static void test_queue_peek_keeps_message(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "pk", 4, 0, &q), 0);
    shmobj_ref r = 0;
    assert_false(shmobj_queue_has_messages(q));
    assert_int_equal(shmobj_queue_try_peek(q, &r), SHMOBJ_EEMPTY);
    assert_int_equal(shmobj_queue_put(q, msg_of(2, 7)), 0);
    assert_int_equal(shmobj_queue_put(q, msg_of(2, 8)), 0);
    assert_true(shmobj_queue_has_messages(q));
    assert_int_equal(shmobj_queue_peek(q, &r), 0);
    assert_int_equal(r, msg_of(2, 7));
    assert_int_equal(shmobj_queue_try_peek(q, &r), 0);
    assert_int_equal(r, msg_of(2, 7));
    uint64_t n;
    assert_int_equal(shmobj_queue_count(q, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(shmobj_queue_take(q, &r), 0);
    assert_int_equal(r, msg_of(2, 7));
    assert_int_equal(shmobj_queue_peek_timed(q, &r, SEC), 0);
    assert_int_equal(r, msg_of(2, 8));
    assert_int_equal(shmobj_queue_take(q, &r), 0);
    assert_false(shmobj_queue_has_messages(q));
    shmobj_queue_close(q);
}

/* ---- blocking wake-ups across processes ------------------------------------ */

struct wake_arg {
    shmobj_queue *q;
    unsigned delay_ms;
};

static int late_putter(void *p)
{
    struct wake_arg *a = p;
    test_sleep_ms(a->delay_ms);
    return shmobj_queue_put(a->q, msg_of(3, 1)) == 0 ? 0 : 1;
}

static int late_taker(void *p)
{
    struct wake_arg *a = p;
    test_sleep_ms(a->delay_ms);
    shmobj_ref r;
    return shmobj_queue_take(a->q, &r) == 0 && r == msg_of(0, 1) ? 0 : 1;
}

static void test_queue_take_sleeps_until_put(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "wk", 2, 0, &q), 0);
    struct wake_arg a = {q, 50};
    pid_t c = test_child_start(late_putter, &a, 10);
    shmobj_ref r = 0;
    assert_int_equal(shmobj_queue_take_timed(q, &r, 10 * SEC), 0);
    assert_int_equal(r, msg_of(3, 1));
    assert_int_equal(test_child_wait(c), 0);

    /* a producer sleeping on a full queue is woken by a take */
    assert_int_equal(shmobj_queue_put(q, msg_of(0, 1)), 0);
    assert_int_equal(shmobj_queue_put(q, msg_of(0, 2)), 0);
    c = test_child_start(late_taker, &a, 10);
    assert_int_equal(shmobj_queue_put_timed(q, msg_of(0, 3), 10 * SEC), 0);
    assert_int_equal(test_child_wait(c), 0);
    assert_int_equal(shmobj_queue_take(q, &r), 0);
    assert_int_equal(r, msg_of(0, 2));
    assert_int_equal(shmobj_queue_take(q, &r), 0);
    assert_int_equal(r, msg_of(0, 3));
    shmobj_queue_close(q);
}

/* A child that sleeps in a blocking take (side 0) or put (side 1) until it
 * is killed or given what it waits for. */
struct sleeper_arg {
    shmobj_queue *q;
    int side;
};

static int blocking_sleeper(void *p)
{
    struct sleeper_arg *a = p;
    shmobj_ref r;
    if (a->side == 0)
        return shmobj_queue_take(a->q, &r) == 0 && r == msg_of(5, 1) ? 0 : 1;
    return shmobj_queue_put(a->q, msg_of(5, 2)) == 0 ? 0 : 1;
}

/* Wait until n processes sleep on `side` (0 consumers, 1 producers) of the
 * ring: counted in the total and in their sleeper records. */
static void wait_sleepers(struct shmobj__ring_hdr *h, unsigned side, uint32_t n)
{
    _Atomic uint32_t *total = side ? &h->prod_waiters : &h->cons_waiters;
    for (int i = 0; i < 5000; i++) {
        uint32_t recorded = 0;
        for (unsigned j = 0; j < SHMOBJ__RING_SLEEPERS; j++)
            recorded += atomic_load(&h->sleepers[j].count[side]);
        if (atomic_load(total) == n && recorded == n)
            return;
        test_sleep_ms(1);
    }
    fail_msg("%u sleepers expected on side %u", n, side);
}

/* A consumer killed while asleep in take, and a producer killed while
 * asleep in put on a full queue, leave their counts in the waiter totals;
 * the other side's wakes then wake nobody, and after a bounded number of
 * them the counts are taken back, so puts and takes stop paying a futex
 * wake each. A live sleeper's count is never taken back. */
static void test_queue_killed_sleepers_counts_taken_back(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "ks", 2, 0, &q), 0);
    struct shmobj__ring_hdr *h = shmobj__queue_ring(q)->hdr;
    shmobj_ref r;

    /* consumers */
    struct sleeper_arg a = {q, 0};
    pid_t c = test_child_start(blocking_sleeper, &a, 20);
    wait_sleepers(h, 0, 1);
    kill(c, SIGKILL);
    assert_int_equal(test_child_wait(c), 128 + SIGKILL);
    assert_int_equal(atomic_load(&h->cons_waiters), 1);
    for (unsigned i = 0; i < 10000 && atomic_load(&h->cons_waiters) != 0; i++) {
        assert_int_equal(shmobj_queue_try_put(q, msg_of(1, i + 1)), 0);
        assert_int_equal(shmobj_queue_try_take(q, &r), 0);
    }
    assert_int_equal(atomic_load(&h->cons_waiters), 0);

    /* producers: fill the queue, then a child sleeps in put */
    assert_int_equal(shmobj_queue_try_put(q, msg_of(1, 1)), 0);
    assert_int_equal(shmobj_queue_try_put(q, msg_of(1, 2)), 0);
    a.side = 1;
    c = test_child_start(blocking_sleeper, &a, 20);
    wait_sleepers(h, 1, 1);
    kill(c, SIGKILL);
    assert_int_equal(test_child_wait(c), 128 + SIGKILL);
    for (unsigned i = 0; i < 10000 && atomic_load(&h->prod_waiters) != 0; i++) {
        assert_int_equal(shmobj_queue_try_take(q, &r), 0);
        assert_int_equal(shmobj_queue_try_put(q, r), 0);
    }
    assert_int_equal(atomic_load(&h->prod_waiters), 0);
    assert_int_equal(shmobj_queue_try_take(q, &r), 0);
    assert_int_equal(shmobj_queue_try_take(q, &r), 0);

    /* a live sleeper keeps its count through a repair, and is woken */
    a.side = 0;
    c = test_child_start(blocking_sleeper, &a, 20);
    wait_sleepers(h, 0, 1);
    assert_false(shmobj__ring_sleepers_repair(shmobj__queue_ring(q)));
    assert_int_equal(atomic_load(&h->cons_waiters), 1);
    assert_int_equal(shmobj_queue_put(q, msg_of(5, 1)), 0);
    assert_int_equal(test_child_wait(c), 0);
    assert_int_equal(atomic_load(&h->cons_waiters), 0);
    shmobj_queue_close(q);
}

/* ---- completion and copy-in ------------------------------------------------ */

struct done_arg {
    shmobj_queue *q;
    shmobj_segment *seg;
    unsigned count;
    unsigned delay_ms;
};

/* Takes `count` message blocks, checks their bytes, increments the first
 * 8-byte word in place, marks them done. */
static int done_consumer(void *p)
{
    struct done_arg *a = p;
    test_sleep_ms(a->delay_ms);
    for (unsigned i = 0; i < a->count; i++) {
        shmobj_ref r;
        if (shmobj_queue_take_timed(a->q, &r, 10 * SEC) != 0)
            return 1;
        void *data;
        size_t len;
        if (shmobj_queue_msg_data(a->q, r, &data, &len) != 0)
            return 2;
        if (len < 64 || ((uintptr_t)data & 63u) != 0)
            return 3;
        unsigned char *b = data;
        for (size_t k = 8; k < len; k++)
            if (b[k] != (unsigned char)(k * 7 + i))
                return 4;
        uint64_t v;
        memcpy(&v, b, 8);
        v += 1;
        memcpy(b, &v, 8);
        if (shmobj_queue_msg_done(a->q, r) != 0)
            return 5;
    }
    return 0;
}

static void fill(unsigned char *b, size_t len, unsigned i)
{
    memset(b, 0, 8);
    for (size_t k = 8; k < len; k++)
        b[k] = (unsigned char)(k * 7 + i);
}

/* Copy-in writes large messages with streaming stores or memcpy in pieces by
 * size: every size, odd lengths and unaligned sources arrive intact. */
static void test_queue_put_copy_large_sizes_intact(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "big", 4, 0, &q), 0);
    static const size_t sizes[] = {32u << 10, (32u << 10) + 13, 300000 + 1,
                                   (600u << 10) + 7, 1u << 20, (5u << 20) + 3};
    size_t max = (5u << 20) + 3 + 1;
    unsigned char *src = malloc(max);
    assert_non_null(src);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *from = src + (i & 1); /* odd addresses too */
        fill(from, n, (unsigned)i);
        assert_int_equal(shmobj_queue_put_copy(q, from, n, 0, 0, NULL), 0);
        shmobj_ref ref;
        void *data;
        size_t len;
        assert_int_equal(shmobj_queue_try_take(q, &ref), 0);
        assert_int_equal(shmobj_queue_msg_data(q, ref, &data, &len), 0);
        assert_int_equal(len, n);
        assert_memory_equal(data, from, n);
        assert_int_equal(shmobj_queue_msg_done(q, ref), 0);
    }
    free(src);
    shmobj_queue_close(q);
}

static void test_queue_msg_completion_roundtrip(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "done", 8, 0, &q), 0);
    uint64_t blocks0 = used_blocks(f->seg);

    /* zero-copy tracked: fill in place, wait for done, read the update */
    enum { N = 4 };
    shmobj_ref refs[N];
    for (unsigned i = 0; i < N; i++) {
        void *data;
        assert_int_equal(shmobj_queue_msg_alloc(q, 1000 + i, SHMOBJ_QUEUE_MSG_TRACK,
                                                &refs[i], &data),
                         0);
        fill(data, 1000 + i, i);
        assert_int_equal(shmobj_queue_put(q, refs[i]), 0);
    }
    /* nobody consumes yet */
    assert_int_equal(shmobj_queue_msg_wait_done(q, refs[0], 0), SHMOBJ_ETIMEDOUT);
    assert_int_equal(shmobj_queue_msg_wait_done(q, refs[0], 20 * TEST_MS),
                     SHMOBJ_ETIMEDOUT);
    struct done_arg a = {q, f->seg, N, 30};
    pid_t c = test_child_start(done_consumer, &a, 20);
    for (unsigned i = 0; i < N; i++) {
        assert_int_equal(shmobj_queue_msg_wait_done(q, refs[i], 10 * SEC), 0);
        void *data;
        size_t len;
        assert_int_equal(shmobj_queue_msg_data(q, refs[i], &data, &len), 0);
        assert_int_equal(len, 1000 + i);
        uint64_t v;
        memcpy(&v, data, 8);
        assert_int_equal(v, 1); /* the consumer's update is visible */
    }
    assert_int_equal(test_child_wait(c), 0);
    /* reuse one block: reset, put again, wait again */
    assert_int_equal(shmobj_queue_msg_reset(q, refs[0]), 0);
    assert_int_equal(shmobj_queue_msg_reset(q, refs[0]), SHMOBJ_EINVAL);
    {
        void *data;
        assert_int_equal(shmobj_queue_msg_data(q, refs[0], &data, NULL), 0);
        fill(data, 1000, 0);
    }
    assert_int_equal(shmobj_queue_put(q, refs[0]), 0);
    a.count = 1;
    a.delay_ms = 0;
    c = test_child_start(done_consumer, &a, 20);
    assert_int_equal(shmobj_queue_msg_wait_done(q, refs[0], 10 * SEC), 0);
    assert_int_equal(test_child_wait(c), 0);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(shmobj_queue_msg_free(q, refs[i]), 0);
    assert_int_equal(used_blocks(f->seg), blocks0);
    assert_int_equal(shmobj_queue_msg_free(q, refs[0]), SHMOBJ_ESTALE);

    /* copy-in, untracked: the consumer's done frees */
    unsigned char buf[3000];
    for (unsigned i = 0; i < N; i++) {
        fill(buf, sizeof buf - i, i);
        assert_int_equal(shmobj_queue_put_copy(q, buf, sizeof buf - i, 0,
                                               SHMOBJ_FOREVER, NULL),
                         0);
    }
    a.count = N;
    c = test_child_start(done_consumer, &a, 20);
    assert_int_equal(test_child_wait(c), 0);
    assert_int_equal(used_blocks(f->seg), blocks0);

    /* tracked, the sender gives up: the consumer's done frees */
    shmobj_ref t;
    fill(buf, 100, 0);
    assert_int_equal(shmobj_queue_put_copy(q, buf, 100, SHMOBJ_QUEUE_MSG_TRACK,
                                           SHMOBJ_FOREVER, &t),
                     0);
    assert_int_equal(shmobj_queue_msg_wait_done(q, t, TEST_MS), SHMOBJ_ETIMEDOUT);
    assert_int_equal(shmobj_queue_msg_free(q, t), 0);
    assert_true(used_blocks(f->seg) > blocks0);
    a.count = 1;
    c = test_child_start(done_consumer, &a, 20);
    assert_int_equal(test_child_wait(c), 0);
    assert_int_equal(used_blocks(f->seg), blocks0);

    /* argument checks */
    assert_int_equal(shmobj_queue_put_copy(q, NULL, 10, 0, 0, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_put_copy(q, buf, 10, SHMOBJ_QUEUE_MSG_TRACK, 0,
                                           NULL),
                     SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_msg_alloc(q, 10, 0x80, &t, NULL), SHMOBJ_EINVAL);
    /* a full queue: put_copy sends nothing and frees its block */
    shmobj_queue *small;
    assert_int_equal(shmobj_queue_create(f->seg, "done2", 2, 0, &small), 0);
    uint64_t b1 = used_blocks(f->seg);
    assert_int_equal(shmobj_queue_put_copy(small, buf, 10, 0, 0, NULL), 0);
    assert_int_equal(shmobj_queue_put_copy(small, buf, 10, 0, 0, NULL), 0);
    assert_int_equal(shmobj_queue_put_copy(small, buf, 10, 0, 0, NULL),
                     SHMOBJ_EFULL);
    assert_int_equal(shmobj_queue_put_copy(small, buf, 10, 0, TEST_MS, NULL),
                     SHMOBJ_ETIMEDOUT);
    assert_int_equal(used_blocks(f->seg), b1 + 2);
    shmobj_queue_close(small);
    shmobj_queue_close(q);
}

/* ---- 2 producers x 2 consumers x 1,000,000 --------------------------------- */

#define MP_PER_PRODUCER 1000000u

struct mp_shared {
    _Atomic uint64_t received[2];       /* per consumer */
    _Atomic uint64_t sum;               /* of sequence numbers */
    _Atomic uint32_t stop;              /* set after both producers end */
    _Atomic uint8_t seen[2][MP_PER_PRODUCER + 1];
};

struct mp_arg {
    shmobj_queue *q;
    struct mp_shared *sh;
    unsigned id;
};

static int mp_producer(void *p)
{
    struct mp_arg *a = p;
    for (uint64_t i = 1; i <= MP_PER_PRODUCER; i++)
        if (shmobj_queue_put_timed(a->q, msg_of(a->id, i), 30 * SEC) != 0)
            return 1;
    return 0;
}

static int mp_consumer(void *p)
{
    struct mp_arg *a = p;
    uint64_t last[2] = {0, 0}, n = 0;
    for (;;) {
        shmobj_ref r;
        int rc = shmobj_queue_take_timed(a->q, &r, 20 * TEST_MS);
        if (rc == SHMOBJ_ETIMEDOUT) {
            if (atomic_load(&a->sh->stop))
                break;
            continue;
        }
        if (rc != 0)
            return 1;
        unsigned pr = msg_producer(r);
        uint64_t s = msg_seq(r);
        if (pr > 1 || s == 0 || s > MP_PER_PRODUCER)
            return 2; /* not a message anyone sent */
        if (s <= last[pr])
            return 3; /* a producer's order broken */
        last[pr] = s;
        if (atomic_exchange(&a->sh->seen[pr][s], 1) != 0)
            return 4; /* delivered twice */
        n++;
        atomic_fetch_add_explicit(&a->sh->sum, s, memory_order_relaxed);
    }
    atomic_store(&a->sh->received[a->id], n);
    return 0;
}

/* Every message of both producers arrived exactly once, none is left. */
static void mp_check(struct mp_shared *sh, shmobj_queue *q)
{
    assert_int_equal(sh->received[0] + sh->received[1], 2 * MP_PER_PRODUCER);
    uint64_t n = MP_PER_PRODUCER;
    assert_int_equal(sh->sum, n * (n + 1));
    for (unsigned pr = 0; pr < 2; pr++)
        for (uint64_t s = 1; s <= n; s++)
            if (sh->seen[pr][s] != 1)
                fail_msg("message %u/%llu lost", pr, (unsigned long long)s);
    uint64_t left;
    assert_int_equal(shmobj_queue_count(q, &left), 0);
    assert_int_equal(left, 0);
}

static void test_queue_mpmc_2x2_exactly_once(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "mpmc", 1024, 0, &q), 0);
    struct mp_shared *sh = shared_alloc(sizeof *sh);
    struct mp_arg args[4] = {{q, sh, 0}, {q, sh, 1}, {q, sh, 0}, {q, sh, 1}};
    pid_t cons[2], prod[2];
    for (unsigned i = 0; i < 2; i++)
        cons[i] = test_child_start(mp_consumer, &args[2 + i], 280);
    for (unsigned i = 0; i < 2; i++)
        prod[i] = test_child_start(mp_producer, &args[i], 280);
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(test_child_wait(prod[i]), 0);
    atomic_store(&sh->stop, 1);
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(test_child_wait(cons[i]), 0);
    mp_check(sh, q);
    munmap(sh, sizeof *sh);
    shmobj_queue_close(q);
}

/* The same with threads sharing one handle, for the thread sanitizer. */
/* The same with batches: producers put runs of 1..64 with put_many, one
 * consumer takes runs with take_many, the other one message at a time, so
 * batches and single calls share the ring. */
static int mp_batch_producer(void *p)
{
    struct mp_arg *a = p;
    uint64_t rng = 0x9e3779b97f4a7c15ull + a->id;
    shmobj_ref run[64];
    for (uint64_t i = 1; i <= MP_PER_PRODUCER;) {
        size_t n = 1 + test_xorshift(&rng) % 64;
        if (n > MP_PER_PRODUCER + 1 - i)
            n = MP_PER_PRODUCER + 1 - i;
        for (size_t k = 0; k < n; k++)
            run[k] = msg_of(a->id, i + k);
        size_t put = 0;
        if (shmobj_queue_put_many(a->q, run, n, 30 * SEC, &put) != 0 || put != n)
            return 1;
        i += n;
    }
    return 0;
}

static int mp_batch_consumer(void *p)
{
    struct mp_arg *a = p;
    uint64_t last[2] = {0, 0}, n = 0;
    shmobj_ref got[48];
    for (;;) {
        size_t k = 0;
        int rc = a->id == 0 ? shmobj_queue_take_many(a->q, got, 48, 20 * TEST_MS, &k)
                            : shmobj_queue_take_timed(a->q, &got[0], 20 * TEST_MS);
        if (a->id != 0 && rc == 0)
            k = 1;
        if (rc == SHMOBJ_ETIMEDOUT) {
            if (atomic_load(&a->sh->stop))
                break;
            continue;
        }
        if (rc != 0 || k == 0 || k > 48)
            return 1;
        for (size_t j = 0; j < k; j++) {
            shmobj_ref r = got[j];
            unsigned pr = msg_producer(r);
            uint64_t s = msg_seq(r);
            if (pr > 1 || s == 0 || s > MP_PER_PRODUCER)
                return 2;
            if (s <= last[pr])
                return 3;
            last[pr] = s;
            if (atomic_exchange(&a->sh->seen[pr][s], 1) != 0)
                return 4;
            n++;
            atomic_fetch_add_explicit(&a->sh->sum, s, memory_order_relaxed);
        }
    }
    atomic_store(&a->sh->received[a->id], n);
    return 0;
}

static void test_queue_batch_mpmc_2x2_exactly_once(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "mpmcb", 256, 0, &q), 0);
    struct mp_shared *sh = shared_alloc(sizeof *sh);
    struct mp_arg args[4] = {{q, sh, 0}, {q, sh, 1}, {q, sh, 0}, {q, sh, 1}};
    pid_t cons[2], prod[2];
    for (unsigned i = 0; i < 2; i++)
        cons[i] = test_child_start(mp_batch_consumer, &args[2 + i], 280);
    for (unsigned i = 0; i < 2; i++)
        prod[i] = test_child_start(mp_batch_producer, &args[i], 280);
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(test_child_wait(prod[i]), 0);
    atomic_store(&sh->stop, 1);
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(test_child_wait(cons[i]), 0);
    mp_check(sh, q);
    munmap(sh, sizeof *sh);
    shmobj_queue_close(q);
}

/* Batches stop where a single call would: a full queue puts a prefix, an
 * empty one takes nothing, a bad reference sends nothing at all, and what
 * goes in comes out in order. */
static void test_queue_batch_full_empty_prefix(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "batch", 8, 0, &q), 0);
    shmobj_ref in[12], out[16];
    for (unsigned i = 0; i < 12; i++)
        in[i] = msg_of(3, i + 1);
    size_t n = 99;
    assert_int_equal(shmobj_queue_put_many(q, in, 0, 0, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(shmobj_queue_take_many(q, out, 16, 0, &n), SHMOBJ_EEMPTY);
    assert_int_equal(n, 0);
    assert_int_equal(shmobj_queue_take_many(q, out, 16, 20 * TEST_MS, &n),
                     SHMOBJ_ETIMEDOUT);
    /* a bad reference anywhere: nothing is sent */
    shmobj_ref bad[3] = {in[0], 8, in[1]};
    assert_int_equal(shmobj_queue_put_many(q, bad, 3, 0, &n), SHMOBJ_EINVAL);
    assert_int_equal(n, 0);
    uint64_t count;
    assert_int_equal(shmobj_queue_count(q, &count), 0);
    assert_int_equal(count, 0);
    /* one single put first, then a batch that overflows the capacity */
    assert_int_equal(shmobj_queue_put(q, in[0]), 0);
    assert_int_equal(shmobj_queue_put_many(q, in + 1, 11, 0, &n), SHMOBJ_EFULL);
    assert_int_equal(n, 7);
    assert_int_equal(shmobj_queue_put_many(q, in + 8, 4, 20 * TEST_MS, &n),
                     SHMOBJ_ETIMEDOUT);
    assert_int_equal(n, 0);
    /* take 3, then all that is left (5), in order */
    assert_int_equal(shmobj_queue_take_many(q, out, 3, 0, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(shmobj_queue_take_many(q, out + 3, 16, SHMOBJ_FOREVER, &n), 0);
    assert_int_equal(n, 5);
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(out[i], in[i]);
    /* wrap around the ring several times with odd run lengths */
    uint64_t next_in = 1, next_out = 1;
    for (unsigned round = 0; round < 200; round++) {
        size_t want = 1 + round % 8, put;
        shmobj_ref run[8];
        for (size_t k = 0; k < want; k++)
            run[k] = msg_of(4, next_in + k);
        assert_int_equal(shmobj_queue_put_many(q, run, want, 0, &put), 0);
        assert_int_equal(put, want);
        next_in += want;
        size_t got;
        assert_int_equal(shmobj_queue_take_many(q, out, 1 + round % 5, 0, &got), 0);
        for (size_t k = 0; k < got; k++)
            assert_int_equal(out[k], msg_of(4, next_out++));
        int rc = shmobj_queue_take_many(q, out, 16, 0, &got);
        assert_true(rc == 0 || (rc == SHMOBJ_EEMPTY && got == 0 &&
                                next_out == next_in));
        for (size_t k = 0; k < got; k++)
            assert_int_equal(out[k], msg_of(4, next_out++));
        assert_int_equal(next_out, next_in); /* everything came out */
    }
    assert_int_equal(next_in, next_out);
    assert_int_equal(shmobj_queue_take_many(q, out, 0, 0, &n), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_put_many(NULL, in, 1, 0, &n), SHMOBJ_EINVAL);
    shmobj_queue_close(q);
}

/* A batch put whose positions consumers skipped while it was stalled
 * after its claim (alive, but it never recorded itself in time) finds its
 * first publish refused, steps over the rest of its run itself and puts
 * the whole batch again: every message arrives once, in order. */
struct batch_stall_arg {
    shmobj_queue *q;
    shmobj_ref in[4];
};

static int batch_stall_producer(void *p)
{
    struct batch_stall_arg *a = p;
    size_t n = 0;
    int rc = shmobj_queue_put_many(a->q, a->in, 4, 5 * SEC, &n);
    return rc == 0 && n == 4 ? 0 : 1;
}

static void test_queue_batch_put_skipped_while_stalled_puts_again(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q, *qp;
    assert_int_equal(shmobj_queue_create(f->seg, "bstall", 16, 0, &q), 0);
    assert_int_equal(shmobj_queue_open(f->seg, "bstall", &qp), 0);
    shmobj__queue_stall_set(q, 2 * (uint64_t)TEST_MS);
    /* the first batch of qp stays 300 ms between its claim and its first
     * claim record: consumers resolve an unrecorded claim after 10 stall
     * periods (20 ms) */
    shmobj__queue_put_hold_set(qp, 300 * (uint64_t)TEST_MS);
    struct batch_stall_arg a = {qp, {msg_of(2, 1), msg_of(2, 2), msg_of(2, 3), msg_of(2, 4)}};
    struct test_thread t;
    assert_int_equal(test_thread_start(&t, batch_stall_producer, &a), 0);
    /* take once the run is claimed: a consumer asleep on an empty ring
     * would only wake at the publish */
    struct shmobj__ring *ring = shmobj__queue_ring(q);
    uint64_t give_up = shmobj__os_now_ns() + 5 * (uint64_t)SEC;
    while (atomic_load(&ring->hdr->enq_pos) < 4 && shmobj__os_now_ns() < give_up)
        sched_yield();
    for (unsigned i = 0; i < 4; i++) {
        shmobj_ref r;
        assert_int_equal(shmobj_queue_take_timed(q, &r, 5 * SEC), 0);
        assert_int_equal(r, a.in[i]);
    }
    assert_int_equal(test_thread_wait(&t), 0);
    assert_true(atomic_load(&ring->hdr->skipped) >= 1); /* it was skipped */
    uint64_t n;
    assert_int_equal(shmobj_queue_count(q, &n), 0);
    assert_int_equal(n, 0);
    shmobj_ref r;
    assert_int_equal(shmobj_queue_try_take(q, &r), SHMOBJ_EEMPTY);
    shmobj_queue_close(qp);
    shmobj_queue_close(q);
}

static void test_queue_threads_mpmc_exactly_once(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "mpmct", 1024, 0, &q), 0);
    /* a short spin: waits end in futex sleeps too */
    assert_int_equal(shmobj_queue_spin_set(q, 2000), 0);
    struct mp_shared *sh = shared_alloc(sizeof *sh);
    struct mp_arg args[4] = {{q, sh, 0}, {q, sh, 1}, {q, sh, 0}, {q, sh, 1}};
    struct test_thread cons[2], prod[2];
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(test_thread_start(&cons[i], mp_consumer, &args[2 + i]), 0);
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(test_thread_start(&prod[i], mp_producer, &args[i]), 0);
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(test_thread_wait(&prod[i]), 0);
    atomic_store(&sh->stop, 1);
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(test_thread_wait(&cons[i]), 0);
    mp_check(sh, q);
    munmap(sh, sizeof *sh);
    shmobj_queue_close(q);
}

/* ---- dead producers and consumers, deterministic ------------------------- */

/* A token no handle holds: slot 1023 at a generation it never had (the
 * fixture's segment has far fewer attachments). */
#define DEAD_TOKEN (1023u | 999u << 10)

/* Record token as the claimant of (role, pos), as that claimant would. */
static void claim_set(struct shmobj__ring *r, unsigned role, uint64_t pos,
                      uint32_t token)
{
    atomic_store(&r->slots[pos & r->mask].claim,
                 shmobj__ring_claim_word(r, role, pos, token));
}

static void test_queue_take_skips_dead_producer_slot(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "deadp", 4, 0, &q), 0);
    shmobj__queue_stall_set(q, 5 * (uint64_t)TEST_MS);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    /* a producer claimed position 0, recorded itself, then died */
    atomic_store(&r->hdr->enq_pos, 1);
    claim_set(r, SHMOBJ__RING_ROLE_PRODUCER, 0, DEAD_TOKEN);
    assert_int_equal(shmobj_queue_put(q, msg_of(1, 1)), 0);
    shmobj_ref m;
    assert_int_equal(shmobj_queue_try_take(q, &m), SHMOBJ_EEMPTY);
    assert_int_equal(shmobj_queue_take_timed(q, &m, 5 * SEC), 0);
    assert_int_equal(m, msg_of(1, 1));
    assert_int_equal(atomic_load(&r->hdr->skipped), 1);

    /* a producer that died before recording itself: resolved later */
    uint64_t e = atomic_fetch_add(&r->hdr->enq_pos, 1);
    assert_int_equal(shmobj_queue_put(q, msg_of(1, 2)), 0);
    assert_int_equal(shmobj_queue_take_timed(q, &m, 5 * SEC), 0);
    assert_int_equal(m, msg_of(1, 2));
    assert_int_equal(atomic_load(&r->hdr->skipped), 2);
    (void)e;

    /* a live producer's slot is not skipped, and a producer that was
     * skipped while alive retries (its CAS fails): simulate the latter
     * with the token of a second handle of ours, attached */
    e = atomic_fetch_add(&r->hdr->enq_pos, 1);
    shmobj_segment *other;
    assert_int_equal(shmobj_segment_open(f->name, SHMOBJ_BACKEND_SHM, SEC, &other), 0);
    struct shmobj__space *osp = shmobj__space_of_seg(other);
    claim_set(r, SHMOBJ__RING_ROLE_PRODUCER, e, osp->ops->live->token(osp));
    assert_int_equal(shmobj_queue_take_timed(q, &m, 50 * TEST_MS),
                     SHMOBJ_ETIMEDOUT);
    assert_int_equal(atomic_load(&r->hdr->skipped), 2);
    /* publish it by hand, as the live producer would */
    atomic_store(&r->slots[e & r->mask].word,
                 msg_of(1, 3) | (((e >> r->cap_log2) & 7u) << 1));
    assert_int_equal(shmobj_queue_take_timed(q, &m, SEC), 0);
    assert_int_equal(m, msg_of(1, 3));
    shmobj_segment_close(other);
    shmobj_queue_close(q);
}

/* A claim naming this handle's own token, in a process with no other
 * thread: no put of ours is under way (each publishes before it returns),
 * so only damage put it there, and the slot is skipped after the stall
 * period like a dead producer's, instead of holding up every take. */
static void test_queue_take_skips_own_token_claim_alone(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "selfp", 4, 0, &q), 0);
    shmobj__queue_stall_set(q, 5 * (uint64_t)TEST_MS);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    struct shmobj__space *sp = shmobj__space_of_seg(f->seg);
    atomic_store(&r->hdr->enq_pos, 1);
    claim_set(r, SHMOBJ__RING_ROLE_PRODUCER, 0, sp->ops->live->token(sp));
    assert_int_equal(shmobj_queue_put(q, msg_of(1, 1)), 0);
    shmobj_ref m;
    assert_int_equal(shmobj_queue_take_timed(q, &m, 5 * SEC), 0);
    assert_int_equal(m, msg_of(1, 1));
    assert_int_equal(atomic_load(&r->hdr->skipped), 1);
    shmobj_queue_close(q);
}

/* take_many steps over the slot of a producer that died after its claim
 * (after the stall period, as a single take does) and delivers the rest. */
static void test_queue_batch_take_skips_dead_producer_slot(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "deadpb", 8, 0, &q), 0);
    shmobj__queue_stall_set(q, 5 * (uint64_t)TEST_MS);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    assert_int_equal(shmobj_queue_put(q, msg_of(1, 1)), 0);
    /* a producer claimed position 1, recorded itself, then died */
    atomic_store(&r->hdr->enq_pos, 2);
    claim_set(r, SHMOBJ__RING_ROLE_PRODUCER, 1, DEAD_TOKEN);
    shmobj_ref in[3] = {msg_of(1, 2), msg_of(1, 3), msg_of(1, 4)}, out[8];
    size_t n;
    assert_int_equal(shmobj_queue_put_many(q, in, 3, 0, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(shmobj_queue_take_many(q, out, 8, 0, &n), 0);
    assert_int_equal(n, 1); /* position 1 is not resolved yet */
    assert_int_equal(out[0], msg_of(1, 1));
    uint64_t t0 = shmobj__os_now_ns();
    size_t got = 0;
    while (got < 3 && shmobj__os_now_ns() - t0 < 5 * (uint64_t)SEC) {
        assert_int_equal(shmobj_queue_take_many(q, out + got, 8, SEC, &n), 0);
        got += n;
    }
    assert_int_equal(got, 3);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(out[i], in[i]);
    assert_int_equal(atomic_load(&r->hdr->skipped), 1);
    shmobj_queue_close(q);
}

static void test_queue_put_rescues_dead_consumer_slot(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "deadc", 2, 0, &q), 0);
    shmobj__queue_stall_set(q, 5 * (uint64_t)TEST_MS);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    assert_int_equal(shmobj_queue_put(q, msg_of(0, 1)), 0);
    assert_int_equal(shmobj_queue_put(q, msg_of(0, 2)), 0);
    /* a consumer claimed position 0 and died before releasing the slot */
    atomic_store(&r->hdr->deq_pos, 1);
    claim_set(r, SHMOBJ__RING_ROLE_CONSUMER, 0, DEAD_TOKEN);
    assert_int_equal(shmobj_queue_try_put(q, msg_of(0, 3)), SHMOBJ_EFULL);
    assert_int_equal(shmobj_queue_put_timed(q, msg_of(0, 3), 5 * SEC), 0);
    assert_int_equal(atomic_load(&r->hdr->rescued), 1);
    shmobj_ref m;
    assert_int_equal(shmobj_queue_take(q, &m), 0);
    assert_int_equal(m, msg_of(0, 2));
    assert_int_equal(shmobj_queue_take(q, &m), 0);
    assert_int_equal(m, msg_of(0, 3));
    assert_int_equal(shmobj_queue_try_take(q, &m), SHMOBJ_EEMPTY);
    shmobj_queue_close(q);
}

/* ---- batches that hand slots over with plain stores ------------------------ */

/* A batch (put_many, take_many) records itself for its whole run, hands
 * the first slot over by CAS and the others with plain stores: the other
 * side reaches them only through the first, so it finds them recorded by
 * a live claimant and leaves them alone. These tests cover the cases where
 * that is not so (the run was resolved before its records, the claimant
 * died mid-run) and the edges (wrap-around, a consumer asleep). */

struct ring_batch_take_arg {
    shmobj_queue *q;
    shmobj_ref out[4];
    size_t n;
};

static int ring_batch_taker(void *p)
{
    struct ring_batch_take_arg *a = p;
    return shmobj_queue_take_many(a->q, a->out, 4, 0, &a->n);
}

/* A batch take that stalls between its claim and its records (alive, but
 * unrecorded for 10 stall periods) has its slots released for it by a
 * producer, which then puts new messages there. Its first release CAS
 * fails, so it hands the rest over by CAS too, and those fail: plain
 * stores would overwrite the new messages with EMPTY markers and lose
 * them. It still returns the four it claimed. */
static void test_ring_threads_batch_take_rescued_while_stalled(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q, *qp;
    assert_int_equal(shmobj_queue_create(f->seg, "rbtake", 4, 0, &q), 0);
    assert_int_equal(shmobj_queue_open(f->seg, "rbtake", &qp), 0);
    shmobj__queue_stall_set(qp, 2 * (uint64_t)TEST_MS);
    struct shmobj__ring *ring = shmobj__queue_ring(q);
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(shmobj_queue_try_put(q, msg_of(1, i + 1)), 0);
    /* the producer resolves each unrecorded slot after 20 ms: four of them
     * fit in the hold with room to spare */
    ring->test_take_many_hold_ns = 2 * (uint64_t)SEC;
    struct ring_batch_take_arg a = {q, {0}, 0};
    struct test_thread t;
    assert_int_equal(test_thread_start(&t, ring_batch_taker, &a), 0);
    uint64_t give_up = shmobj__os_now_ns() + 5 * (uint64_t)SEC;
    while (atomic_load(&ring->hdr->deq_pos) < 4 && shmobj__os_now_ns() < give_up)
        sched_yield();
    assert_int_equal(atomic_load(&ring->hdr->deq_pos), 4);
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(shmobj_queue_put_timed(qp, msg_of(2, i + 1), 5 * SEC), 0);
    assert_int_equal(atomic_load(&ring->hdr->rescued), 4);
    assert_int_equal(test_thread_wait(&t), 0);
    assert_int_equal(a.n, 4);
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(a.out[i], msg_of(1, i + 1));
    shmobj_ref r;
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(shmobj_queue_try_take(q, &r), 0);
        assert_int_equal(r, msg_of(2, i + 1));
    }
    assert_int_equal(shmobj_queue_try_take(q, &r), SHMOBJ_EEMPTY);
    shmobj_queue_close(qp);
    shmobj_queue_close(q);
}

/* A batch put that died mid-run: it claimed positions 0..3, recorded
 * itself for all of them, published 0 and died before the plain stores of
 * 1..3. A consumer takes 0, skips the three dead positions one stall
 * period each, and delivers what comes after. */
static void test_ring_batch_put_died_mid_run_skipped(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "rbputd", 8, 0, &q), 0);
    shmobj__queue_stall_set(q, 2 * (uint64_t)TEST_MS);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    atomic_store(&r->hdr->enq_pos, 4);
    for (uint64_t p = 0; p < 4; p++)
        claim_set(r, SHMOBJ__RING_ROLE_PRODUCER, p, DEAD_TOKEN);
    atomic_store(&r->slots[0].word, msg_of(3, 1));
    assert_int_equal(shmobj_queue_put(q, msg_of(3, 2)), 0);
    shmobj_ref m;
    assert_int_equal(shmobj_queue_take_timed(q, &m, 5 * SEC), 0);
    assert_int_equal(m, msg_of(3, 1));
    assert_int_equal(shmobj_queue_take_timed(q, &m, 5 * SEC), 0);
    assert_int_equal(m, msg_of(3, 2));
    assert_int_equal(atomic_load(&r->hdr->skipped), 3);
    assert_int_equal(shmobj_queue_try_take(q, &m), SHMOBJ_EEMPTY);
    shmobj_queue_close(q);
}

/* A batch take that died mid-run: it claimed positions 0..3 of a full
 * ring, recorded itself, released slot 0 and died before the plain stores
 * of 1..3. Producers put into slot 0 at once and release 1..3 for it one
 * stall period each (their messages are lost with the dead consumer). */
static void test_ring_batch_take_died_mid_run_rescued(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "rbtaked", 4, 0, &q), 0);
    shmobj__queue_stall_set(q, 2 * (uint64_t)TEST_MS);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(shmobj_queue_try_put(q, msg_of(4, i + 1)), 0);
    atomic_store(&r->hdr->deq_pos, 4);
    for (uint64_t p = 0; p < 4; p++)
        claim_set(r, SHMOBJ__RING_ROLE_CONSUMER, p, DEAD_TOKEN);
    atomic_store(&r->slots[0].word, (uint64_t)4 << 2 | 1); /* EMPTY(4) */
    assert_int_equal(shmobj_queue_try_put(q, msg_of(5, 1)), 0);
    assert_int_equal(shmobj_queue_try_put(q, msg_of(5, 2)), SHMOBJ_EFULL);
    for (unsigned i = 1; i < 4; i++)
        assert_int_equal(shmobj_queue_put_timed(q, msg_of(5, i + 1), 5 * SEC), 0);
    assert_int_equal(atomic_load(&r->hdr->rescued), 3);
    shmobj_ref out[8];
    size_t n;
    assert_int_equal(shmobj_queue_take_many(q, out, 8, 0, &n), 0);
    assert_int_equal(n, 4);
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(out[i], msg_of(5, i + 1));
    shmobj_queue_close(q);
}

/* Runs of 1..7 through a ring of 8, so runs cross the end of the slot
 * array and the lap boundary at every offset, and runs as long as the
 * ring: every message comes out once, in order, and full and empty are
 * where the counts say. */
static void test_ring_batch_wraps_at_every_offset(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "rbwrap", 8, 0, &q), 0);
    shmobj_ref in[8], out[8];
    uint64_t next_in = 1, next_out = 1;
    for (unsigned round = 0; round < 200; round++) {
        size_t want = 1 + round % 7, n;
        for (size_t i = 0; i < want; i++)
            in[i] = msg_of(6, next_in + i);
        assert_int_equal(shmobj_queue_put_many(q, in, want, 0, &n), 0);
        assert_int_equal(n, want);
        next_in += want;
        size_t k = 1 + (round * 5) % 8;
        assert_int_equal(shmobj_queue_take_many(q, out, k, 0, &n), 0);
        assert_true(n >= 1 && n <= k);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(out[i], msg_of(6, next_out + i));
        next_out += n;
        uint64_t c;
        assert_int_equal(shmobj_queue_count(q, &c), 0);
        assert_int_equal(c, next_in - next_out);
        if (c > 1) { /* drain: keep room for the next run (up to 7) */
            assert_int_equal(shmobj_queue_take_many(q, out, 8, 0, &n), 0);
            assert_int_equal(n, c);
            for (size_t i = 0; i < n; i++)
                assert_int_equal(out[i], msg_of(6, next_out + i));
            next_out += n;
        }
    }
    /* a run as long as the ring, then one more: full exactly there */
    size_t n;
    for (size_t i = 0; i < 8; i++)
        in[i] = msg_of(7, i + 1);
    assert_int_equal(shmobj_queue_put_many(q, in, 8, 0, &n), next_in == next_out ? 0 : SHMOBJ_EFULL);
    if (next_in == next_out) {
        assert_int_equal(shmobj_queue_try_put(q, msg_of(7, 9)), SHMOBJ_EFULL);
        assert_int_equal(shmobj_queue_take_many(q, out, 8, 0, &n), 0);
        assert_int_equal(n, 8);
        for (size_t i = 0; i < 8; i++)
            assert_int_equal(out[i], msg_of(7, i + 1));
    }
    shmobj_ref r;
    assert_int_equal(shmobj_queue_try_take(q, &r), SHMOBJ_EEMPTY);
    shmobj_queue_close(q);
}

/* A consumer asleep in take_many (no spin) is woken by a batch put whose
 * later slots go by plain stores, and a producer asleep on a full ring by
 * a batch take: each wait ends with what the other side handed over, not
 * at its timeout. */
struct ring_sleep_arg {
    shmobj_queue *q;
    int put;
    shmobj_ref out[8];
    size_t n;
    int rc;
};

static int ring_batch_sleeper(void *p)
{
    struct ring_sleep_arg *a = p;
    if (a->put) {
        a->rc = shmobj_queue_put_timed(a->q, msg_of(8, 99), 10 * SEC);
        a->n = 1;
    } else {
        a->rc = shmobj_queue_take_many(a->q, a->out, 8, 10 * SEC, &a->n);
    }
    return 0;
}

static void test_ring_threads_batch_wakes_sleepers(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "rbsleep", 8, 0, &q), 0);
    assert_int_equal(shmobj_queue_spin_set(q, 0), 0);
    struct shmobj__ring_hdr *h = shmobj__queue_ring(q)->hdr;
    shmobj_ref in[8];
    size_t n;
    for (unsigned i = 0; i < 8; i++)
        in[i] = msg_of(8, i + 1);
    for (unsigned round = 0; round < 20; round++) {
        /* a consumer asleep on the empty ring, woken by a batch put */
        struct ring_sleep_arg a = {q, 0, {0}, 0, -1};
        struct test_thread t;
        assert_int_equal(test_thread_start(&t, ring_batch_sleeper, &a), 0);
        wait_sleepers(h, 0, 1);
        uint64_t t0 = shmobj__os_now_ns();
        assert_int_equal(shmobj_queue_put_many(q, in, 6, 0, &n), 0);
        assert_int_equal(n, 6);
        assert_int_equal(test_thread_wait(&t), 0);
        assert_int_equal(a.rc, 0);
        assert_true(shmobj__os_now_ns() - t0 < 5 * (uint64_t)SEC);
        assert_true(a.n >= 1);
        shmobj_ref out[8];
        size_t more = 0;
        if (a.n < 6)
            assert_int_equal(shmobj_queue_take_many(q, out, 8, 0, &more), 0);
        assert_int_equal(a.n + more, 6);
        /* a producer asleep on the full ring, woken by a batch take */
        assert_int_equal(shmobj_queue_put_many(q, in, 8, 0, &n), 0);
        struct ring_sleep_arg b = {q, 1, {0}, 0, -1};
        assert_int_equal(test_thread_start(&t, ring_batch_sleeper, &b), 0);
        wait_sleepers(h, 1, 1);
        t0 = shmobj__os_now_ns();
        assert_int_equal(shmobj_queue_take_many(q, out, 8, 0, &n), 0);
        assert_int_equal(n, 8);
        assert_int_equal(test_thread_wait(&t), 0);
        assert_int_equal(b.rc, 0);
        assert_true(shmobj__os_now_ns() - t0 < 5 * (uint64_t)SEC);
        shmobj_ref r;
        assert_int_equal(shmobj_queue_try_take(q, &r), 0);
        assert_int_equal(r, msg_of(8, 99));
    }
    shmobj_queue_close(q);
}

/* An empty or full try answers from the slot word for a while after the
 * other side's position said empty (full), but reads it again often
 * enough for recovery: a consumer that only polls try_take still skips
 * the slot of a producer that died after its claim, and a producer that
 * only polls try_put still releases the slot of a consumer that died
 * holding it. */
static void test_ring_polling_tries_still_resolve_dead_claimants(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "rbpoll", 2, 0, &q), 0);
    shmobj__queue_stall_set(q, 2 * (uint64_t)TEST_MS);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    shmobj_ref m;
    /* found empty first, so the next tries are answered from the slot */
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(shmobj_queue_try_take(q, &m), SHMOBJ_EEMPTY);
    /* then a producer claims position 0, records itself and dies */
    claim_set(r, SHMOBJ__RING_ROLE_PRODUCER, 0, DEAD_TOKEN);
    atomic_store(&r->hdr->enq_pos, 1);
    assert_int_equal(shmobj_queue_try_put(q, msg_of(9, 1)), 0);
    int rc = SHMOBJ_EEMPTY;
    uint64_t give_up = shmobj__os_now_ns() + 5 * (uint64_t)SEC;
    while (rc == SHMOBJ_EEMPTY && shmobj__os_now_ns() < give_up)
        if ((rc = shmobj_queue_try_take(q, &m)) == SHMOBJ_EEMPTY)
            test_sleep_ms(1);
    assert_int_equal(rc, 0);
    assert_int_equal(m, msg_of(9, 1));
    assert_int_equal(atomic_load(&r->hdr->skipped), 1);

    /* full: found full first, then the consumer of position 2 (slot 0)
     * claims it and dies before releasing */
    assert_int_equal(shmobj_queue_try_put(q, msg_of(9, 2)), 0);
    assert_int_equal(shmobj_queue_try_put(q, msg_of(9, 3)), 0);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(shmobj_queue_try_put(q, msg_of(9, 4)), SHMOBJ_EFULL);
    claim_set(r, SHMOBJ__RING_ROLE_CONSUMER, 2, DEAD_TOKEN);
    atomic_store(&r->hdr->deq_pos, 3);
    rc = SHMOBJ_EFULL;
    give_up = shmobj__os_now_ns() + 5 * (uint64_t)SEC;
    while (rc == SHMOBJ_EFULL && shmobj__os_now_ns() < give_up)
        if ((rc = shmobj_queue_try_put(q, msg_of(9, 4))) == SHMOBJ_EFULL)
            test_sleep_ms(1);
    assert_int_equal(rc, 0);
    assert_int_equal(atomic_load(&r->hdr->rescued), 1);
    assert_int_equal(shmobj_queue_try_take(q, &m), 0);
    assert_int_equal(m, msg_of(9, 3));
    assert_int_equal(shmobj_queue_try_take(q, &m), 0);
    assert_int_equal(m, msg_of(9, 4));
    assert_int_equal(shmobj_queue_try_take(q, &m), SHMOBJ_EEMPTY);
    shmobj_queue_close(q);
}

/* ---- SIGKILL at random moments ---------------------------------------------- */

#define KILL_MAX_SEQ (1u << 20)

struct kill_shared {
    _Atomic uint32_t stop;
    _Atomic uint64_t taken;
    _Atomic uint8_t seen[64][KILL_MAX_SEQ];
};

struct kill_arg {
    shmobj_queue *q;
    struct kill_shared *sh;
    unsigned id;
};

static int kill_producer(void *p)
{
    struct kill_arg *a = p;
    shmobj_queue_spin_set(a->q, -1); /* stay busy: kills land mid-put */
    for (uint64_t i = 1; i < KILL_MAX_SEQ; i++)
        if (shmobj_queue_put_timed(a->q, msg_of(a->id, i), 30 * SEC) != 0)
            return 1;
    return 0;
}

/* Records each message in the shared table right after taking it; a kill
 * between the two loses that one message (the queue's documented loss). */
static int kill_consumer(void *p)
{
    struct kill_arg *a = p;
    shmobj__queue_stall_set(a->q, 2 * (uint64_t)TEST_MS);
    shmobj_queue_spin_set(a->q, 200000); /* mostly busy: kills land mid-take */
    /* A take's window between claim and release is a few instructions:
     * the consumers that are killed widen it, so kills land there on any
     * machine (the last, draining consumer does not). */
    if (a->id != 0)
        shmobj__queue_take_hold_set(a->q, 100 * (uint64_t)TEST_MS / 1000);
    /* The alarm test_child_start() set bounds one take, not the run: the
     * run lasts as long as the parent's rounds, which a loaded machine
     * stretches. Each take that returns starts the guard again; a parent
     * that went away ends the consumer. */
    unsigned guard = alarm(0);
    pid_t parent = getppid();
    for (;;) {
        shmobj_ref r;
        alarm(guard);
        if (getppid() != parent)
            return 4;
        int rc = shmobj_queue_take_timed(a->q, &r, 10 * TEST_MS);
        if (rc == SHMOBJ_ETIMEDOUT) {
            if (atomic_load(&a->sh->stop))
                return 0;
            continue;
        }
        if (rc != 0)
            return 1;
        unsigned pr = msg_producer(r);
        uint64_t s = msg_seq(r);
        if (pr >= 64 || s == 0 || s >= KILL_MAX_SEQ)
            return 2;
        if (atomic_exchange(&a->sh->seen[pr][s], 1) != 0)
            return 3; /* duplicate */
        atomic_fetch_add(&a->sh->taken, 1);
    }
}

/* Each producer's received messages must be exactly 1..k: nothing it
 * published is lost or duplicated, and its order is kept. The consumer may
 * still be recording while this reads: a message found after the first
 * gap is a failure only if the gap is still there once it was found (it
 * was recorded first, so a gap that closed meanwhile was only late). */
static uint64_t contiguous(struct kill_shared *sh, unsigned pr)
{
    for (;;) {
        uint64_t k = 0, s;
        while (k + 1 < KILL_MAX_SEQ && sh->seen[pr][k + 1])
            k++;
        for (s = k + 1; s < KILL_MAX_SEQ && !sh->seen[pr][s]; s++)
            ;
        if (s == KILL_MAX_SEQ)
            return k;
        if (!sh->seen[pr][k + 1])
            fail_msg("producer %u: message %llu after a gap at %llu", pr,
                     (unsigned long long)s, (unsigned long long)(k + 1));
    }
}

/* Whether the child forked when its side's position was `from` (and now
 * stopped; it is the only process of its side) is inside a put between
 * its claim and its publish, or inside a take between its claim and its
 * release: a position it claimed (from on; the earlier ones were claimed
 * by processes that are dead by now) is in that state. */
static bool put_in_flight(const struct shmobj__ring *r, uint64_t from)
{
    uint64_t d = atomic_load(&r->hdr->deq_pos), e = atomic_load(&r->hdr->enq_pos);
    for (uint64_t p = d > from ? d : from; p < e; p++)
        if (atomic_load(&r->slots[p & r->mask].word) == ((p << 2) | 1))
            return true; /* EMPTY(p), though p was claimed */
    return false;
}

static bool take_in_flight(const struct shmobj__ring *r, uint64_t from)
{
    uint64_t d = atomic_load(&r->hdr->deq_pos);
    uint64_t p = d > r->capacity ? d - r->capacity : 0;
    for (p = p > from ? p : from; p < d; p++) {
        uint64_t w = atomic_load(&r->slots[p & r->mask].word);
        uint64_t lap = ((p >> r->cap_log2) & 7) << 1;
        if (((w & 1) == 0 && w > 15 && (w & 14) == lap) || w == ((p << 2) | 3))
            return true; /* p's message or marker, not released */
    }
    return false;
}

/* Kill child p at a random moment; with `aim`, stop it first at the
 * moment its side's position (`pos`) first moves away from pos0 (its value
 * when the child was forked), then at random moments (up to 200 times),
 * until it is caught inside an operation, so that short runs exercise the
 * recovery too. The first stop is the likeliest catch: a forked child's
 * first claim records its identity, which it has to look up then (the
 * parent's was forgotten at the fork), so it spends longer between its
 * claim and its publish or release than any later operation. Between two
 * stops the child runs until the position moves, so on a busy machine it
 * is not stopped again before it ran at all. True when the kill landed
 * inside an operation, as in_flight() judged it while the child was
 * stopped. */
static bool kill_inside(pid_t p, const struct shmobj__ring *r, bool aim,
                        bool (*in_flight)(const struct shmobj__ring *, uint64_t),
                        const _Atomic uint64_t *pos, uint64_t pos0)
{
    bool inside = false;
    unsigned max_tries = aim ? 200u : 1u;
    for (unsigned tries = 0; tries < max_tries && !inside; tries++) {
        if (aim) {
            uint64_t seen = tries == 0 ? pos0 : atomic_load(pos);
            uint64_t t0 = shmobj__os_now_ns();
            while (atomic_load(pos) == seen &&
                   shmobj__os_now_ns() - t0 < 100 * (uint64_t)TEST_MS)
                ;
            if (atomic_load(pos) == seen)
                aim = false; /* no work left to catch it in: kill it now */
        }
        if (!aim || tries > 0) {
            struct timespec ts = {0, (long)(rand() % (aim ? 100 : 3000)) * 1000L};
            if (tries > 0 && !aim)
                ts.tv_nsec = 0;
            nanosleep(&ts, NULL);
        }
        kill(p, SIGSTOP);
        siginfo_t si;
        memset(&si, 0, sizeof si);
        assert_int_equal(waitid(P_PID, (id_t)p, &si, WSTOPPED | WEXITED | WNOWAIT), 0);
        if (si.si_code != CLD_STOPPED)
            break; /* it ended by itself */
        /* take the stop's report, or the next wait would see it again */
        assert_int_equal(waitid(P_PID, (id_t)p, &si, WSTOPPED), 0);
        inside = in_flight(r, pos0);
        if (!inside && aim && tries + 1 < max_tries)
            kill(p, SIGCONT);
        if (!aim)
            break;
    }
    kill(p, SIGKILL);
    return inside;
}

/* Make this process look itself up once, so that the children it forks
 * from now on each look themselves up at their first claim (see
 * kill_inside()). */
static void self_known(shmobj_segment *seg)
{
    shmobj_queue *w;
    shmobj_ref r;
    assert_int_equal(shmobj_queue_create(seg, "self", 2, 0, &w), 0);
    assert_int_equal(shmobj_queue_put(w, msg_of(0, 1)), 0);
    assert_int_equal(shmobj_queue_take(w, &r), 0);
    shmobj_queue_close(w);
    assert_int_equal(shmobj_queue_destroy(seg, "self"), 0);
}

static void test_queue_kill_producers_randomly(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    self_known(f->seg);
    assert_int_equal(shmobj_queue_create(f->seg, "killp", 64, 0, &q), 0);
    shmobj__queue_stall_set(q, 2 * (uint64_t)TEST_MS);
    struct kill_shared *sh = shared_alloc(sizeof *sh);
    struct kill_arg ca = {q, sh, 0};
    pid_t cons = test_child_start(kill_consumer, &ca, 60);
    unsigned rounds = TEST_KILL_ITERATIONS, landed = 0;
    srand((unsigned)getpid());
    for (unsigned i = 0; i < rounds; i++) {
        struct kill_arg pa = {q, sh, i % 63};
        memset((void *)sh->seen[pa.id], 0, sizeof sh->seen[pa.id]);
        atomic_thread_fence(memory_order_seq_cst);
        uint64_t e0 = atomic_load(&shmobj__queue_ring(q)->hdr->enq_pos);
        pid_t p = test_child_start(kill_producer, &pa, 60);
        assert_true(p > 0);
        /* every other round aims at the window between claim and publish */
        landed += kill_inside(p, shmobj__queue_ring(q), i % 2 == 0, put_in_flight,
                              &shmobj__queue_ring(q)->hdr->enq_pos, e0);
        int rc = test_child_wait(p);
        assert_true(rc == 128 + SIGKILL || rc == 0);
        /* wait until the consumer caught up, then check the producer */
        uint64_t t0 = shmobj__os_now_ns(), left = 1;
        while (left != 0 && shmobj__os_now_ns() - t0 < 20 * (uint64_t)SEC) {
            shmobj_queue_count(q, &left);
            test_sleep_ms(1);
        }
        assert_int_equal(left, 0);
        test_sleep_ms(2);
        contiguous(sh, pa.id);
    }
    /* the queue still works for a producer that is not killed */
    struct kill_arg last = {q, sh, 63};
    memset((void *)sh->seen[63], 0, sizeof sh->seen[63]);
    for (uint64_t s = 1; s <= 1000; s++)
        assert_int_equal(shmobj_queue_put_timed(q, msg_of(63, s), 10 * SEC), 0);
    uint64_t t0 = shmobj__os_now_ns();
    while (contiguous(sh, 63) < 1000 &&
           shmobj__os_now_ns() - t0 < 20 * (uint64_t)SEC)
        test_sleep_ms(1);
    assert_int_equal(contiguous(sh, 63), 1000);
    (void)last;
    /* some kills landed between a claim and its publish, and each left a
     * slot that consumers skipped */
    uint64_t skipped = atomic_load(&shmobj__queue_ring(q)->hdr->skipped);
    print_message("kill producers: %u rounds, %u inside a put, %llu slots skipped\n",
                  rounds, landed, (unsigned long long)skipped);
    assert_true(landed >= 1);
    assert_true(skipped >= landed);
    atomic_store(&sh->stop, 1);
    assert_int_equal(test_child_wait(cons), 0);
    munmap(sh, sizeof *sh);
    shmobj_queue_close(q);
}

static void test_queue_kill_consumers_randomly(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    self_known(f->seg);
    assert_int_equal(shmobj_queue_create(f->seg, "killc", 64, 0, &q), 0);
    shmobj__queue_stall_set(q, 2 * (uint64_t)TEST_MS);
    struct kill_shared *sh = shared_alloc(sizeof *sh);
    struct kill_arg pa = {q, sh, 0};
    pid_t prod = test_child_start(kill_producer, &pa, 280);
    unsigned rounds = TEST_KILL_ITERATIONS, landed = 0, kills = 0;
    srand((unsigned)getpid() + 1);
    /* A take's window is short: a run whose rounds all missed it goes on
     * aiming (bounded) rather than proving nothing. */
    uint64_t give_up = shmobj__os_now_ns() + 100 * (uint64_t)SEC;
    for (unsigned i = 0; i < rounds || (landed == 0 && i < rounds + 2000 &&
                                        shmobj__os_now_ns() < give_up);
         i++) {
        kills++;
        struct kill_arg ca = {q, sh, 1}; /* 1: widen the take's window */
        uint64_t d0 = atomic_load(&shmobj__queue_ring(q)->hdr->deq_pos);
        pid_t c = test_child_start(kill_consumer, &ca, 60);
        assert_true(c > 0);
        /* the first rounds aim at the window between claim and release
         * (all of them would let the consumers drain the producer's
         * stream before the last rounds) */
        landed += kill_inside(c, shmobj__queue_ring(q), landed < 2, take_in_flight,
                              &shmobj__queue_ring(q)->hdr->deq_pos, d0);
        int rc = test_child_wait(c);
        assert_true(rc == 128 + SIGKILL);
    }
    /* a last consumer drains everything the producer sends */
    struct kill_arg ca = {q, sh, 0};
    pid_t c = test_child_start(kill_consumer, &ca, 60);
    assert_int_equal(test_child_wait(prod), 0);
    atomic_store(&sh->stop, 1);
    assert_int_equal(test_child_wait(c), 0);
    /* every message arrived at most once (each consumer checks), and at
     * most one per killed consumer is missing */
    uint64_t missing = 0;
    for (uint64_t s = 1; s < KILL_MAX_SEQ; s++)
        missing += sh->seen[0][s] == 0;
    assert_true(missing <= kills);
    /* some kills landed between a claim and its release, and each lost
     * the one message it had claimed */
    assert_true(landed >= 1);
    assert_true(missing >= landed);
    print_message("kill consumers: %u rounds, %u inside a take, %llu lost, %llu slots released\n",
                  kills, landed, (unsigned long long)missing,
                  (unsigned long long)atomic_load(&shmobj__queue_ring(q)->hdr->rescued));
    munmap(sh, sizeof *sh);
    shmobj_queue_close(q);
}

/* ---- completion for any reference ------------------------------------------ */

struct track_arg {
    shmobj_queue *q;
    shmobj_segment *seg;
    unsigned count;
    int ready; /* write end of a pipe to the parent, or -1 */
};

/* Take `count` tracked references: add 1 to an object's "n" field, or to
 * the first word of a raw block, then mark each done. */
static int track_consumer(void *p)
{
    struct track_arg *a = p;
    for (unsigned i = 0; i < a->count; i++) {
        shmobj_ref r;
        if (shmobj_queue_take_timed(a->q, &r, 10 * SEC) != 0)
            return 1;
        shmobj_view v, n;
        if (shmobj_obj_get(a->seg, r, &v) == 0) {
            if (shmobj_field_get(&v, "n", &n) != 0 ||
                shmobj_int_add(&n, 1, NULL) != 0)
                return 2;
        } else {
            void *raw;
            if (shmobj_arena_ptr(a->seg, r, &raw, NULL) != 0)
                return 3;
            (*(uint64_t *)raw)++;
        }
        if (shmobj_queue_done(a->q, r) != 0)
            return 4;
        /* done twice: refused (EINVAL), or the sender released the
         * record in between (ENOTFOUND) */
        int again = shmobj_queue_done(a->q, r);
        if (again != SHMOBJ_EINVAL && again != SHMOBJ_ENOTFOUND)
            return 5;
    }
    return 0;
}

static shmobj_ref put_counter_obj(shmobj_segment *seg, int64_t n)
{
    shmobj_value val = SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_STR("n"), SHMOBJ_VAL_INT(n));
    shmobj_ref r;
    assert_int_equal(shmobj_obj_put(seg, &val, &r), 0);
    return r;
}

static int64_t counter_of(shmobj_segment *seg, shmobj_ref r)
{
    shmobj_view v, n;
    int64_t x;
    assert_int_equal(shmobj_obj_get(seg, r, &v), 0);
    assert_int_equal(shmobj_field_get(&v, "n", &n), 0);
    assert_int_equal(shmobj_int_get(&n, &x), 0);
    return x;
}

/* An object and a raw block travel with completion and no envelope: the
 * consumer updates each in place and marks it done, the sender's wait sees
 * the update, frees them, and the heap holds exactly what it held before. */
static void test_queue_tracked_object_done_roundtrip(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "track", 8, 0, &q), 0);
    uint64_t blocks0 = used_blocks(f->seg);
    shmobj_ref obj = put_counter_obj(f->seg, 41);
    shmobj_ref raw;
    void *rp;
    assert_int_equal(shmobj_arena_alloc(f->seg, 64, 16, &raw, &rp), 0);
    memset(rp, 0, 64);
    assert_int_equal(shmobj_queue_put_tracked(q, obj, SHMOBJ_FOREVER), 0);
    assert_int_equal(shmobj_queue_put_tracked(q, raw, 0), 0);
    /* tracked twice before its release: refused, nothing sent */
    assert_int_equal(shmobj_queue_put_tracked(q, obj, 0), SHMOBJ_EEXIST);
    uint64_t n;
    assert_int_equal(shmobj_queue_count(q, &n), 0);
    assert_int_equal(n, 2);
    /* nobody consumes yet */
    assert_int_equal(shmobj_queue_wait_done(q, obj, 0), SHMOBJ_ETIMEDOUT);
    assert_int_equal(shmobj_queue_wait_done(q, obj, 20 * TEST_MS), SHMOBJ_ETIMEDOUT);
    /* one block more than before: the object; one for the raw block */
    assert_int_equal(used_blocks(f->seg), blocks0 + 2);
    struct track_arg a = {q, f->seg, 2, -1};
    pid_t c = test_child_start(track_consumer, &a, 20);
    assert_int_equal(shmobj_queue_wait_done(q, obj, 10 * SEC), 0);
    assert_int_equal(counter_of(f->seg, obj), 42);
    assert_int_equal(shmobj_queue_wait_done(q, raw, 10 * SEC), 0);
    assert_int_equal(*(uint64_t *)rp, 1);
    assert_int_equal(test_child_wait(c), 0);
    /* released by the wait: the queue knows them no more */
    assert_int_equal(shmobj_queue_wait_done(q, obj, 0), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_queue_done(q, obj), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_queue_untrack(q, obj), SHMOBJ_ENOTFOUND);
    /* an untracked put needs no done */
    assert_int_equal(shmobj_queue_put(q, obj), 0);
    shmobj_ref got;
    assert_int_equal(shmobj_queue_take(q, &got), 0);
    assert_int_equal(got, obj);
    assert_int_equal(shmobj_queue_done(q, got), SHMOBJ_ENOTFOUND);
    /* the sender owns them again: free, and the heap is as before */
    assert_int_equal(shmobj_obj_free(f->seg, obj), 0);
    assert_int_equal(shmobj_arena_free(f->seg, raw), 0);
    assert_int_equal(used_blocks(f->seg), blocks0);
    assert_int_equal(shmobj_queue_put_tracked(q, 0, 0), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_done(NULL, obj), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_wait_all(NULL, 0), SHMOBJ_EINVAL);
    shmobj_queue_close(q);
}

/* wait_all waits for every reference this handle tracks and releases them
 * all; another handle's references are not its business; a put that fails
 * leaves no record behind. */
static void test_queue_tracked_wait_all_releases_everything(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q, *q2;
    assert_int_equal(shmobj_queue_create(f->seg, "all", 16, 0, &q), 0);
    assert_int_equal(shmobj_queue_open(f->seg, "all", &q2), 0);
    assert_int_equal(shmobj_queue_wait_all(q, 0), 0); /* nothing tracked */
    /* a full queue: the tracked put fails and records nothing */
    for (unsigned i = 0; i < 16; i++)
        assert_int_equal(shmobj_queue_try_put(q, msg_of(9, i + 1)), 0);
    shmobj_ref extra = put_counter_obj(f->seg, 7);
    assert_int_equal(shmobj_queue_put_tracked(q, extra, 0), SHMOBJ_EFULL);
    assert_int_equal(shmobj_queue_wait_done(q, extra, 0), SHMOBJ_ENOTFOUND);
    for (unsigned i = 0; i < 16; i++) { /* take the fillers back out */
        shmobj_ref r;
        assert_int_equal(shmobj_queue_try_take(q, &r), 0);
    }
    enum { N = 12 };
    shmobj_ref objs[N];
    for (unsigned i = 0; i < N; i++) {
        objs[i] = put_counter_obj(f->seg, (int64_t)i);
        assert_int_equal(shmobj_queue_put_tracked(q, objs[i], SHMOBJ_FOREVER), 0);
    }
    shmobj_ref other = put_counter_obj(f->seg, 100);
    assert_int_equal(shmobj_queue_put_tracked(q2, other, SHMOBJ_FOREVER), 0);
    assert_int_equal(shmobj_queue_wait_all(q, 0), SHMOBJ_ETIMEDOUT);
    assert_int_equal(shmobj_queue_wait_all(q, 20 * TEST_MS), SHMOBJ_ETIMEDOUT);
    struct track_arg a = {q, f->seg, N + 1, -1};
    pid_t c = test_child_start(track_consumer, &a, 20);
    assert_int_equal(shmobj_queue_wait_all(q, 10 * SEC), 0);
    for (unsigned i = 0; i < N; i++) {
        assert_int_equal(counter_of(f->seg, objs[i]), (int64_t)i + 1);
        assert_int_equal(shmobj_queue_wait_done(q, objs[i], 0), SHMOBJ_ENOTFOUND);
        assert_int_equal(shmobj_obj_free(f->seg, objs[i]), 0);
    }
    assert_int_equal(test_child_wait(c), 0);
    /* other belongs to q2: still tracked there until its own wait */
    assert_int_equal(shmobj_queue_wait_done(q, other, 0), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_queue_wait_all(q2, 10 * SEC), 0);
    assert_int_equal(counter_of(f->seg, other), 101);
    assert_int_equal(shmobj_queue_wait_all(q, 0), 0);
    assert_int_equal(shmobj_obj_free(f->seg, other), 0);
    assert_int_equal(shmobj_obj_free(f->seg, extra), 0);
    shmobj_queue_close(q2);
    shmobj_queue_close(q);
}

/* Closing a handle stops tracking what it still tracks, as untrack would:
 * a done record is released at once, a pending one is handed to the
 * consumer's done. Nothing stays held by a handle that is gone. */
static void test_queue_tracked_close_untracks(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q, *q2;
    assert_int_equal(shmobj_queue_create(f->seg, "trackclose", 8, 0, &q), 0);
    assert_int_equal(shmobj_queue_open(f->seg, "trackclose", &q2), 0);
    shmobj_ref a = put_counter_obj(f->seg, 0), b = put_counter_obj(f->seg, 0);
    assert_int_equal(shmobj_queue_put_tracked(q2, a, 0), 0);
    assert_int_equal(shmobj_queue_put_tracked(q2, b, 0), 0);
    shmobj_ref got;
    assert_int_equal(shmobj_queue_take(q, &got), 0);
    assert_int_equal(got, a);
    assert_int_equal(shmobj_queue_done(q, got), 0); /* a: done, b: pending */
    shmobj_queue_close(q2);
    /* a's record is free: it can be tracked again at once */
    assert_int_equal(shmobj_queue_put_tracked(q, a, 0), 0);
    /* b's is the consumer's now: its done is told the sender gave up */
    assert_int_equal(shmobj_queue_put_tracked(q, b, 0), SHMOBJ_EEXIST);
    assert_int_equal(shmobj_queue_take(q, &got), 0);
    assert_int_equal(got, b);
    assert_int_equal(shmobj_queue_done(q, got), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_take(q, &got), 0);
    assert_int_equal(got, a);
    assert_int_equal(shmobj_queue_done(q, got), 0);
    assert_int_equal(shmobj_queue_wait_all(q, 0), 0);
    assert_int_equal(shmobj_obj_free(f->seg, a), 0);
    assert_int_equal(shmobj_obj_free(f->seg, b), 0);
    shmobj_queue_close(q);
}

/* Take one tracked reference, tell the parent, and wait to be killed. */
static int track_take_and_hold(void *p)
{
    struct track_arg *a = p;
    shmobj_ref r;
    char b = 1;
    if (shmobj_queue_take_timed(a->q, &r, 10 * SEC) != 0 || write(a->ready, &b, 1) != 1)
        return 1;
    for (;;)
        pause();
}

/* A consumer killed while it holds a tracked object never marks it done:
 * the sender's wait learns that the consumer which took it died and says
 * SHMOBJ_EPEERDEAD with the record released, and the sender frees the
 * object: nothing leaks, and a live consumer's later done of an abandoned
 * reference is told the sender gave up. */
static void test_queue_tracked_consumer_killed_holding(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "trackkill", 8, 0, &q), 0);
    uint64_t blocks0 = used_blocks(f->seg);
    shmobj_ref obj = put_counter_obj(f->seg, 1);
    assert_int_equal(shmobj_queue_put_tracked(q, obj, SHMOBJ_FOREVER), 0);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    struct track_arg a = {q, f->seg, 1, pfd[1]};
    pid_t c = test_child_start(track_take_and_hold, &a, 20);
    char b;
    struct pollfd pl = {.fd = pfd[0], .events = POLLIN};
    assert_int_equal(poll(&pl, 1, 10000), 1);
    assert_int_equal(read(pfd[0], &b, 1), 1);
    kill(c, SIGKILL);
    assert_int_equal(test_child_wait(c), 128 + SIGKILL);
    /* the wait learns that the consumer which took it died, well before
     * its deadline (a wait slice), and gives the reference back */
    assert_int_equal(shmobj_queue_wait_done(q, obj, 5 * SEC), SHMOBJ_EPEERDEAD);
    assert_int_equal(shmobj_queue_wait_done(q, obj, 0), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_queue_untrack(q, obj), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_queue_wait_all(q, 0), 0); /* nothing tracked now */
    assert_int_equal(counter_of(f->seg, obj), 1);     /* never updated */
    assert_int_equal(shmobj_obj_free(f->seg, obj), 0);
    assert_int_equal(used_blocks(f->seg), blocks0);

    /* a live consumer whose sender gave up: its done says so, once */
    shmobj_ref raw;
    void *rp;
    assert_int_equal(shmobj_arena_alloc(f->seg, 64, 16, &raw, &rp), 0);
    assert_int_equal(shmobj_queue_put_tracked(q, raw, 0), 0);
    shmobj_ref got;
    assert_int_equal(shmobj_queue_take(q, &got), 0);
    assert_int_equal(shmobj_queue_untrack(q, raw), SHMOBJ_EINUSE);
    assert_int_equal(shmobj_queue_done(q, got), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_done(q, got), SHMOBJ_ENOTFOUND);
    /* the record is free again: the same block can be tracked anew */
    assert_int_equal(shmobj_queue_put_tracked(q, raw, 0), 0);
    assert_int_equal(shmobj_queue_take(q, &got), 0);
    assert_int_equal(shmobj_queue_done(q, got), 0);
    assert_int_equal(shmobj_queue_untrack(q, raw), 0); /* done: released */
    assert_int_equal(shmobj_arena_free(f->seg, raw), 0);
    close(pfd[0]);
    close(pfd[1]);
    shmobj_queue_close(q);
}

/* The same for a tracked message block sent with put_copy: the sender's
 * msg_wait_done says SHMOBJ_EPEERDEAD once the consumer that took it died,
 * the block is the sender's again (done on the dead consumer's behalf) and
 * msg_free gives it back: nothing leaks. A consumer that is only slow
 * (alive) is waited for. */
static void test_queue_msg_consumer_killed_holding_epeerdead(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "msgkill", 8, 0, &q), 0);
    uint64_t blocks0 = used_blocks(f->seg);
    char text[100] = "hello";
    shmobj_ref msg;
    assert_int_equal(shmobj_queue_put_copy(q, text, sizeof text,
                                           SHMOBJ_QUEUE_MSG_TRACK, 0, &msg), 0);
    /* not taken yet: nobody to be dead */
    assert_int_equal(shmobj_queue_msg_wait_done(q, msg, 250 * TEST_MS),
                     SHMOBJ_ETIMEDOUT);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    struct track_arg a = {q, f->seg, 1, pfd[1]};
    pid_t c = test_child_start(track_take_and_hold, &a, 20);
    char b;
    struct pollfd pl = {.fd = pfd[0], .events = POLLIN};
    assert_int_equal(poll(&pl, 1, 10000), 1);
    assert_int_equal(read(pfd[0], &b, 1), 1);
    /* taken by a live consumer: waited for */
    assert_int_equal(shmobj_queue_msg_wait_done(q, msg, 250 * TEST_MS),
                     SHMOBJ_ETIMEDOUT);
    kill(c, SIGKILL);
    assert_int_equal(test_child_wait(c), 128 + SIGKILL);
    assert_int_equal(shmobj_queue_msg_wait_done(q, msg, 5 * SEC), SHMOBJ_EPEERDEAD);
    assert_int_equal(shmobj_queue_msg_wait_done(q, msg, 0), 0); /* done now */
    assert_int_equal(shmobj_queue_msg_free(q, msg), 0);

    /* a block written in place and put with shmobj_queue_put(): its
     * sender's wait, begun while the block still waited in the ring,
     * found where it is and learns the same */
    void *data;
    assert_int_equal(shmobj_queue_msg_alloc(q, 64, SHMOBJ_QUEUE_MSG_TRACK, &msg, &data), 0);
    assert_int_equal(shmobj_queue_put(q, msg), 0);
    assert_int_equal(shmobj_queue_msg_wait_done(q, msg, 150 * TEST_MS),
                     SHMOBJ_ETIMEDOUT);
    c = test_child_start(track_take_and_hold, &a, 20);
    assert_int_equal(poll(&pl, 1, 10000), 1);
    assert_int_equal(read(pfd[0], &b, 1), 1);
    kill(c, SIGKILL);
    assert_int_equal(test_child_wait(c), 128 + SIGKILL);
    assert_int_equal(shmobj_queue_msg_wait_done(q, msg, 5 * SEC), SHMOBJ_EPEERDEAD);
    assert_int_equal(shmobj_queue_msg_free(q, msg), 0);
    assert_int_equal(shmobj_queue_trim(q), 0);
    assert_int_equal(used_blocks(f->seg), blocks0);
    close(pfd[0]);
    close(pfd[1]);
    shmobj_queue_close(q);
}

/* Waits without a deadline end when the segment's name is removed
 * (shmobj_segment_destroy(), as `shmobj rm` does): a take, a wait for a
 * tracked reference nobody took and a wait for a tracked message each
 * return SHMOBJ_EREPLACED a wait slice or so after the removal, in
 * children that would otherwise sleep until the test's alarm kills them. */
struct removed_arg {
    shmobj_queue *q;
    shmobj_ref ref;
    int kind; /* 0 take, 1 wait_done, 2 msg_wait_done */
    int ready;
};

static int wait_forever_until_removed(void *p)
{
    struct removed_arg *a = p;
    char b = 1;
    /* a tracked reference is waited for by the process that put it */
    if ((a->kind == 1 && shmobj_queue_put_tracked(a->q, a->ref, 0) != 0) ||
        write(a->ready, &b, 1) != 1)
        return 1;
    shmobj_ref r;
    int rc = a->kind == 0   ? shmobj_queue_take(a->q, &r)
             : a->kind == 1 ? shmobj_queue_wait_done(a->q, a->ref, SHMOBJ_FOREVER)
                            : shmobj_queue_msg_wait_done(a->q, a->ref, SHMOBJ_FOREVER);
    return rc == SHMOBJ_EREPLACED ? 0 : 100 + (rc < 0 ? -rc : rc);
}

static void test_queue_wait_forever_segment_removed_ereplaced(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q, *t;
    assert_int_equal(shmobj_queue_create(f->seg, "gone", 8, 0, &q), 0);
    assert_int_equal(shmobj_queue_create(f->seg, "gonetrack", 8, 0, &t), 0);
    shmobj_ref obj = msg_of(3, 1), msg;
    char text[16] = "x";
    assert_int_equal(shmobj_queue_put_copy(t, text, sizeof text,
                                           SHMOBJ_QUEUE_MSG_TRACK, 0, &msg), 0);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    struct removed_arg args[3] = {
        {q, 0, 0, pfd[1]}, {t, obj, 1, pfd[1]}, {t, msg, 2, pfd[1]}};
    pid_t c[3];
    for (unsigned i = 0; i < 3; i++)
        c[i] = test_child_start(wait_forever_until_removed, &args[i], 10);
    for (unsigned i = 0; i < 3; i++) {
        char b;
        assert_int_equal(read(pfd[0], &b, 1), 1);
    }
    test_sleep_ms(50); /* let them go to sleep (not needed for correctness) */
    assert_int_equal(shmobj_segment_destroy(f->name, SHMOBJ_BACKEND_SHM), 0);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(test_child_wait(c[i]), 0); /* not 128 + SIGALRM */
    close(pfd[0]);
    close(pfd[1]);
    shmobj_queue_close(t);
    shmobj_queue_close(q);
}

/* A sender asleep in wait_done on a queue that is destroyed wakes and
 * leaves with SHMOBJ_ESTALE, long before its timeout. */
static int track_wait_forever(void *p)
{
    struct track_arg *a = p;
    shmobj_ref obj = put_counter_obj(a->seg, 0);
    char b = 1;
    if (shmobj_queue_put_tracked(a->q, obj, 0) != 0 || write(a->ready, &b, 1) != 1)
        return 1;
    return shmobj_queue_wait_done(a->q, obj, 15 * SEC) == SHMOBJ_ESTALE ? 0 : 2;
}

static void test_queue_tracked_waiter_woken_by_destroy(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "trackdes", 8, 0, &q), 0);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    struct track_arg a = {q, f->seg, 1, pfd[1]};
    pid_t c = test_child_start(track_wait_forever, &a, 10);
    char b;
    assert_int_equal(read(pfd[0], &b, 1), 1);
    test_sleep_ms(20); /* let it go to sleep (not needed for correctness) */
    assert_int_equal(shmobj_queue_destroy(f->seg, "trackdes"), 0);
    assert_int_equal(test_child_wait(c), 0); /* not 128 + SIGALRM */
    assert_int_equal(shmobj_queue_wait_all(q, 0), SHMOBJ_ESTALE);
    close(pfd[0]);
    close(pfd[1]);
    shmobj_queue_close(q);
}

/* The documented count of completion records (twice the capacity, 64 to
 * 8,192) can all be held at once, at every size: exactly that many
 * tracked references taken and not yet done, then one more is refused
 * with SHMOBJ_ETRACKFULL (nothing sent); completions give room back, as
 * much as they released. */
static void tracked_fill_to_documented(shmobj_segment *seg, uint32_t cap,
                                       uint32_t records)
{
    char name[32];
    snprintf(name, sizeof name, "trackcap%u", cap);
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(seg, name, cap, 0, &q), 0);
    shmobj_ref got;
    for (uint32_t i = 0; i < records; i++) {
        int rc = shmobj_queue_put_tracked(q, msg_of(cap, i + 1), 0);
        if (rc != 0)
            fail_msg("capacity %u: tracked put %u of %u documented: %s", cap,
                     i + 1, records, shmobj_errname(rc));
        assert_int_equal(shmobj_queue_try_take(q, &got), 0); /* held, not done */
        assert_int_equal(got, msg_of(cap, i + 1));
    }
    assert_int_equal(shmobj_queue_put_tracked(q, msg_of(cap, records + 1), 0),
                     SHMOBJ_ETRACKFULL);
    uint64_t n;
    assert_int_equal(shmobj_queue_count(q, &n), 0);
    assert_int_equal(n, 0); /* nothing sent */
    /* a quarter done and released: exactly that much room again */
    uint32_t back = records / 4;
    for (uint32_t i = 0; i < back; i++) {
        assert_int_equal(shmobj_queue_done(q, msg_of(cap, 2 * i + 1)), 0);
        assert_int_equal(shmobj_queue_wait_done(q, msg_of(cap, 2 * i + 1), 0), 0);
    }
    for (uint32_t i = 0; i < back; i++) {
        assert_int_equal(shmobj_queue_put_tracked(q, msg_of(cap, records + 2 + i), 0), 0);
        assert_int_equal(shmobj_queue_try_take(q, &got), 0);
    }
    assert_int_equal(shmobj_queue_put_tracked(q, msg_of(cap, 2 * records), 0),
                     SHMOBJ_ETRACKFULL);
    /* everything done: every record comes back */
    for (uint32_t i = 0; i < records; i++)
        if (i % 2 != 0 || i / 2 >= back)
            assert_int_equal(shmobj_queue_done(q, msg_of(cap, i + 1)), 0);
    for (uint32_t i = 0; i < back; i++)
        assert_int_equal(shmobj_queue_done(q, msg_of(cap, records + 2 + i)), 0);
    assert_int_equal(shmobj_queue_wait_all(q, 0), 0);
    for (uint32_t i = 0; i < records; i++) {
        assert_int_equal(shmobj_queue_put_tracked(q, msg_of(cap, 3 * records + i), 0), 0);
        assert_int_equal(shmobj_queue_try_take(q, &got), 0);
    }
    assert_int_equal(shmobj_queue_put_tracked(q, msg_of(cap, 4 * records), 0),
                     SHMOBJ_ETRACKFULL);
    shmobj_queue_close(q); /* gives its pending records up */
    assert_int_equal(shmobj_queue_destroy(seg, name), 0);
}

static void test_queue_tracked_full_at_documented_capacity(void **state)
{
    struct fixture *f = *state;
    tracked_fill_to_documented(f->seg, 16, 64);
    tracked_fill_to_documented(f->seg, 64, 128);
    tracked_fill_to_documented(f->seg, 1024, 2048);
    tracked_fill_to_documented(f->seg, 4096, 8192);
}

/* ---- stalled processes at every step ------------------------------------------ */

/* Every named step of the ring's claims (put, publish, take, release, the
 * batches) and of completion (tracked record claim and release, done,
 * the wait) is walked with one process stopped there (SIGSTOP) while two
 * more producers and two more consumers (or senders) go on, then resumed;
 * more processes than CPUs, in a second run all on one CPU. The stop
 * lasts longer than the ring's ten stall periods, so the others resolve
 * the stopped process's slot as they would a dead claimant's, and the
 * stopped process finds its slot resolved when it resumes. Afterwards
 * every acknowledged put was taken exactly once, each consumer saw each
 * producer's messages in order, and every completion was delivered. */
/* fewer messages where the kill rounds are fewer (sanitizer and valgrind
 * builds run everything many times slower) */
enum { STALL_PRODUCERS = 3, STALL_COUNT = TEST_KILL_ITERATIONS >= 200 ? 300 : 60,
       STALL_HOLD_MS = 300 };

struct stall_shared {
    _Atomic uint64_t acked[STALL_PRODUCERS];      /* puts acknowledged */
    _Atomic uint64_t taken;                       /* messages taken, all */
    _Atomic uint32_t seen[STALL_PRODUCERS][STALL_COUNT + 1];
    _Atomic uint32_t order_bad, bad;
    /* 0 while the others of the stopped one's side wait for it to stop
     * (a batch finds its runs only while it has the ring to itself) */
    _Atomic uint32_t go;
};

struct stall_arg {
    shmobj_queue *q;
    struct stall_shared *sh;
    unsigned id;       /* producer (sender) number */
    bool batch;        /* put_many / take_many */
    bool completion;   /* senders wait for completion, consumers mark done */
    bool pin;          /* all on one CPU */
    const char *step;  /* armed in this process, or NULL */
    unsigned nth;
    bool wait_go;      /* start once sh->go is set */
};

/* Hold back until the stopped process has stopped (stall_walk() sets
 * go), bounded by the child's alarm. */
static void stall_wait_go(const struct stall_arg *a)
{
    while (a->wait_go && atomic_load(&a->sh->go) == 0)
        test_sleep_ms(1);
}

static int stall_producer(void *p)
{
    struct stall_arg *a = p;
    if (a->pin)
        test_stall_pin(0);
    if (a->step != NULL)
        test_stall_arm(a->step, a->nth, TEST_STALL_STOP, 0);
    stall_wait_go(a);
    for (uint64_t i = 1; i <= STALL_COUNT;) {
        if (a->batch) {
            shmobj_ref refs[8];
            size_t n = STALL_COUNT + 1 - i < 8 ? STALL_COUNT + 1 - i : 8, put = 0;
            for (size_t k = 0; k < n; k++)
                refs[k] = msg_of(a->id, i + k);
            int rc = shmobj_queue_put_many(a->q, refs, n, 10 * SEC, &put);
            i += put;
            atomic_store(&a->sh->acked[a->id], i - 1);
            if (rc != 0)
                return 10;
        } else {
            if (shmobj_queue_put_timed(a->q, msg_of(a->id, i), 10 * SEC) != 0)
                return 11;
            atomic_store(&a->sh->acked[a->id], i);
            i++;
        }
    }
    return 0;
}

/* A sender of completion: even messages as tracked references (any
 * 16-aligned value: the consumer only marks them done), odd ones as
 * tracked copies; it waits for each before the next. */
static int stall_sender(void *p)
{
    struct stall_arg *a = p;
    if (a->pin)
        test_stall_pin(0);
    if (a->step != NULL)
        test_stall_arm(a->step, a->nth, TEST_STALL_STOP, 0);
    for (uint64_t i = 1; i <= STALL_COUNT; i++) {
        shmobj_ref r = msg_of(a->id, i);
        if (i % 2 == 0) {
            if (shmobj_queue_put_tracked(a->q, r, 10 * SEC) != 0)
                return 20;
            atomic_store(&a->sh->acked[a->id], i);
            int rc = shmobj_queue_wait_done(a->q, r, 10 * SEC);
            if (rc != 0)
                return 21;
        } else {
            uint64_t body[2] = {a->id, i};
            shmobj_ref m;
            if (shmobj_queue_put_copy(a->q, body, sizeof body,
                                      SHMOBJ_QUEUE_MSG_TRACK, 10 * SEC, &m) != 0)
                return 22;
            atomic_store(&a->sh->acked[a->id], i);
            if (shmobj_queue_msg_wait_done(a->q, m, 10 * SEC) != 0)
                return 23;
            if (shmobj_queue_msg_free(a->q, m) != 0)
                return 24;
        }
    }
    return 0;
}

/* Count one message taken (producer, sequence), checking the order this
 * consumer sees each producer's messages in. */
static void stall_seen(struct stall_arg *a, uint64_t *last, unsigned prod,
                       uint64_t seq)
{
    if (prod >= STALL_PRODUCERS || seq == 0 || seq > STALL_COUNT) {
        atomic_fetch_add(&a->sh->bad, 1);
        return;
    }
    atomic_fetch_add(&a->sh->seen[prod][seq], 1);
    if (seq <= last[prod])
        atomic_fetch_add(&a->sh->order_bad, 1);
    last[prod] = seq;
}

static int stall_consumer(void *p)
{
    struct stall_arg *a = p;
    if (a->pin)
        test_stall_pin(0);
    if (a->step != NULL)
        test_stall_arm(a->step, a->nth, TEST_STALL_STOP, 0);
    stall_wait_go(a);
    uint64_t last[STALL_PRODUCERS] = {0};
    const uint64_t total = (uint64_t)STALL_PRODUCERS * STALL_COUNT;
    unsigned n = 0;
    while (atomic_load(&a->sh->taken) < total) {
        shmobj_ref refs[8];
        size_t got = 0;
        int rc;
        if (a->batch) {
            test_sleep_ms(1); /* let a run of messages gather */
            rc = shmobj_queue_take_many(a->q, refs, 8, 100 * TEST_MS, &got);
        } else {
            rc = shmobj_queue_take_timed(a->q, &refs[0], 100 * TEST_MS);
            got = rc == 0;
        }
        if (rc == SHMOBJ_ETIMEDOUT)
            continue;
        if (rc != 0)
            return 30;
        for (size_t k = 0; k < got; k++) {
            shmobj_ref r = refs[k];
            if (!a->completion) {
                stall_seen(a, last, msg_producer(r), msg_seq(r));
            } else if (shmobj_queue_done(a->q, r) == 0) {
                stall_seen(a, last, msg_producer(r), msg_seq(r));
            } else {
                void *d;
                size_t len;
                if (shmobj_queue_msg_data(a->q, r, &d, &len) != 0 ||
                    len != 2 * sizeof(uint64_t))
                    return 31;
                uint64_t body[2];
                memcpy(body, d, sizeof body);
                stall_seen(a, last, (unsigned)body[0], body[1]);
                if (++n % 4 == 0)
                    test_sleep_ms(1); /* a slow consumer: senders sleep */
                if (shmobj_queue_msg_done(a->q, r) != 0)
                    return 32;
            }
            atomic_fetch_add(&a->sh->taken, 1);
        }
    }
    return 0;
}

struct stall_case {
    const char *step;
    bool consumer;   /* the stopped process is a consumer */
    bool batch;      /* it uses the batch calls */
    bool completion; /* the completion harness */
    unsigned nth;
};

static const struct stall_case stall_cases[] = {
    {"queue.put.claimed", false, false, false, 2},
    {"queue.put.recorded", false, false, false, 2},
    {"queue.put.published", false, false, false, 2},
    {"queue.take.claimed", true, false, false, 2},
    {"queue.take.recorded", true, false, false, 2},
    {"queue.take.released", true, false, false, 2},
    {"queue.put_many.claimed", false, true, false, 2},
    {"queue.put_many.recorded", false, true, false, 2},
    {"queue.put_many.first", false, true, false, 2},
    {"queue.take_many.claimed", true, true, false, 2},
    {"queue.take_many.recorded", true, true, false, 2},
    {"queue.take_many.first", true, true, false, 2},
    {"queue.track.claimed", false, false, true, 3},
    {"queue.track.waited", false, false, true, 3},
    {"queue.track.release", false, false, true, 3},
    {"queue.wait.counted", false, false, true, 3},
    {"queue.track.done", true, false, true, 3},
    {"queue.msg.done", true, false, true, 3},
};

/* One walk of a step: true when the armed process stopped there, false
 * when it ended first (whether a process reaches a step depends on how
 * they interleave: the caller tries again). */
static bool stall_walk(shmobj_segment *seg, const struct stall_case *c, bool pin)
{
    struct stall_shared *sh = shared_alloc(sizeof *sh);
    memset(sh, 0, sizeof *sh);
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(seg, "stall", c->batch ? 64 : 8, 0, &q), 0);
    struct stall_arg args[STALL_PRODUCERS + 2];
    pid_t pids[STALL_PRODUCERS + 2];
    /* producers 0..2, consumers 3..4; the stopped one is producer 0 or
     * consumer 3. Its peers of the same role start once it stopped when
     * they could starve it of its nth call: the batch callers, and the
     * other consumer (on one CPU under valgrind it took every message
     * before the stopped one's second take, four walks in a row). */
    for (unsigned i = 0; i < STALL_PRODUCERS + 2; i++) {
        bool cons = i >= STALL_PRODUCERS;
        bool stopped = cons ? (c->consumer && i == STALL_PRODUCERS)
                            : (!c->consumer && i == 0);
        args[i] = (struct stall_arg){q, sh, i, stopped && c->batch,
                                     c->completion, pin,
                                     stopped ? c->step : NULL, c->nth,
                                     !stopped && cons == c->consumer &&
                                         (c->batch || c->consumer)};
        int (*fn)(void *) = cons ? stall_consumer
                            : c->completion ? stall_sender : stall_producer;
        pids[i] = test_child_start(fn, &args[i], 30);
    }
    pid_t stopped = pids[c->consumer ? STALL_PRODUCERS : 0];
    int status = 0;
    int w = test_stall_wait_stopped(stopped, 10000, &status);
    atomic_store(&sh->go, 1);
    if (w != 1) {
        for (unsigned i = 0; i < STALL_PRODUCERS + 2; i++)
            kill(pids[i], SIGKILL);
        for (unsigned i = 0; i < STALL_PRODUCERS + 2; i++)
            test_child_wait(pids[i]);
        if (w != 0)
            fail_msg("%s%s: the armed process never stopped", c->step,
                     pin ? " (one CPU)" : "");
        shmobj_queue_close(q);
        assert_int_equal(shmobj_queue_destroy(seg, "stall"), 0);
        munmap(sh, sizeof *sh);
        return false;
    }
    /* the others go on while it is stopped; then it goes on too */
    uint64_t before = atomic_load(&sh->taken);
    test_sleep_ms(STALL_HOLD_MS);
    uint64_t during = atomic_load(&sh->taken) - before;
    test_stall_resume(stopped);
    for (unsigned i = 0; i < STALL_PRODUCERS + 2; i++) {
        int rc = test_child_wait(pids[i]);
        if (rc != 0)
            fail_msg("%s%s: process %u ended with %d", c->step,
                     pin ? " (one CPU)" : "", i, rc);
    }
    for (unsigned p = 0; p < STALL_PRODUCERS; p++) {
        assert_int_equal(atomic_load(&sh->acked[p]), STALL_COUNT);
        for (unsigned k = 1; k <= STALL_COUNT; k++)
            if (atomic_load(&sh->seen[p][k]) != 1)
                fail_msg("%s%s: message %u of producer %u taken %u times",
                         c->step, pin ? " (one CPU)" : "", k, p,
                         (unsigned)atomic_load(&sh->seen[p][k]));
    }
    assert_int_equal(atomic_load(&sh->order_bad), 0);
    assert_int_equal(atomic_load(&sh->bad), 0);
    uint64_t n = 1;
    assert_int_equal(shmobj_queue_count(q, &n), 0);
    assert_int_equal(n, 0);
    print_message("%-26s%s: %4llu taken while stopped\n", c->step,
                  pin ? " (one CPU)" : "", (unsigned long long)during);
    shmobj_queue_close(q);
    assert_int_equal(shmobj_queue_destroy(seg, "stall"), 0);
    munmap(sh, sizeof *sh);
    return true;
}

/* stall_walk() until the armed process stopped at the step, 4 tries. */
static void stall_step(shmobj_segment *seg, const struct stall_case *c, bool pin)
{
    for (int attempt = 0; attempt < 4; attempt++)
        if (stall_walk(seg, c, pin))
            return;
    fail_msg("%s%s: the armed process ended without reaching the step, 4 times", c->step,
             pin ? " (one CPU)" : "");
}

static void test_queue_stall_every_step_exactly_once(void **state)
{
    struct fixture *f = *state;
    for (size_t i = 0; i < sizeof stall_cases / sizeof stall_cases[0]; i++)
        stall_step(f->seg, &stall_cases[i], false);
}

static void test_queue_stall_every_step_one_cpu_exactly_once(void **state)
{
    struct fixture *f = *state;
    for (size_t i = 0; i < sizeof stall_cases / sizeof stall_cases[0]; i++)
        stall_step(f->seg, &stall_cases[i], true);
}

/* ---- pollable descriptor ----------------------------------------------------- */

struct poll_arg {
    shmobj_queue *q;
    unsigned count;
};

static int poll_consumer(void *p)
{
    struct poll_arg *a = p;
    int fd;
    if (shmobj_queue_notify_fd(a->q, &fd) != 0)
        return 1;
    unsigned got = 0;
    while (got < a->count) {
        if (shmobj_queue_notify_arm(a->q) != 0)
            return 2;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, 5000);
        if (n <= 0)
            return 3; /* nothing woke us */
        shmobj_ref r;
        while (shmobj_queue_try_take(a->q, &r) == 0) {
            if (r != msg_of(5, got + 1))
                return 4;
            got++;
        }
    }
    return 0;
}

struct armed_arg {
    shmobj_queue *q;
    int ready; /* write end of a pipe to the parent */
};

/* Arm, receive one message, arm again, tell the parent, then wait to be
 * killed while armed. */
static int arm_and_wait(void *p)
{
    struct armed_arg *a = p;
    int fd;
    char b = 1;
    if (shmobj_queue_notify_fd(a->q, &fd) != 0 || shmobj_queue_notify_arm(a->q) != 0 ||
        write(a->ready, &b, 1) != 1)
        return 1;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    shmobj_ref r;
    if (poll(&pfd, 1, 5000) != 1 || shmobj_queue_take(a->q, &r) != 0 ||
        shmobj_queue_notify_arm(a->q) != 0 || write(a->ready, &b, 1) != 1)
        return 2;
    for (;;)
        pause();
}

/* A consumer that dies while armed leaves a pipe without readers: the
 * producer's next put must neither die of SIGPIPE nor fail. */
static void test_queue_notify_dead_listener_no_sigpipe(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "armed", 16, 0, &q), 0);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    struct armed_arg a = {q, ready[1]};
    pid_t c = test_child_start(arm_and_wait, &a, 30);
    char b;
    assert_int_equal(read(ready[0], &b, 1), 1);
    assert_int_equal(shmobj_queue_put(q, msg_of(6, 1)), 0);
    assert_int_equal(read(ready[0], &b, 1), 1);
    kill(c, SIGKILL);
    assert_int_equal(test_child_wait(c), 128 + SIGKILL);
    assert_int_equal(shmobj_queue_put(q, msg_of(6, 2)), 0);
    assert_int_equal(shmobj_queue_put(q, msg_of(6, 3)), 0);
    shmobj_ref r;
    assert_int_equal(shmobj_queue_take(q, &r), 0);
    assert_int_equal(r, msg_of(6, 2));
    close(ready[0]);
    close(ready[1]);
    shmobj_queue_close(q);
}

static void test_queue_notify_fd_wakes_poll(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "poll", 16, 0, &q), 0);
    /* in one process: not readable until armed and a message comes */
    int fd;
    assert_int_equal(shmobj_queue_notify_arm(q), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_notify_fd(q, &fd), 0);
    int fd2;
    assert_int_equal(shmobj_queue_notify_fd(q, &fd2), 0);
    assert_int_equal(fd, fd2);
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    assert_int_equal(shmobj_queue_put(q, msg_of(5, 1)), 0);
    assert_int_equal(poll(&pfd, 1, 0), 0); /* not armed: no write */
    assert_int_equal(shmobj_queue_notify_arm(q), 0);
    assert_int_equal(poll(&pfd, 1, 0), 1); /* a message waits already */
    shmobj_ref r;
    assert_int_equal(shmobj_queue_take(q, &r), 0);
    assert_int_equal(shmobj_queue_notify_arm(q), 0);
    assert_int_equal(poll(&pfd, 1, 0), 0);
    assert_int_equal(shmobj_queue_put(q, msg_of(5, 2)), 0);
    assert_int_equal(poll(&pfd, 1, 0), 1);
    assert_int_equal(shmobj_queue_take(q, &r), 0);
    shmobj_queue_close(q);

    /* across processes: a consumer child polls, the parent puts with
     * pauses so that the child sleeps in poll() between messages */
    assert_int_equal(shmobj_queue_open(f->seg, "poll", &q), 0);
    struct poll_arg a = {q, 50};
    pid_t c = test_child_start(poll_consumer, &a, 60);
    for (unsigned i = 1; i <= a.count; i++) {
        if (i % 5 == 0)
            test_sleep_ms(10);
        assert_int_equal(shmobj_queue_put(q, msg_of(5, i)), 0);
    }
    assert_int_equal(test_child_wait(c), 0);
    /* the child died without closing: its registration is reclaimed */
    shmobj_queue *qs[SHMOBJ__RING_NOTIFY_MAX];
    for (unsigned i = 0; i < SHMOBJ__RING_NOTIFY_MAX; i++) {
        assert_int_equal(shmobj_queue_open(f->seg, "poll", &qs[i]), 0);
        assert_int_equal(shmobj_queue_notify_fd(qs[i], &fd), 0);
    }
    shmobj_queue *extra;
    assert_int_equal(shmobj_queue_open(f->seg, "poll", &extra), 0);
    assert_int_equal(shmobj_queue_notify_fd(extra, &fd), SHMOBJ_EFULL);
    shmobj_queue_close(qs[0]);
    assert_int_equal(shmobj_queue_notify_fd(extra, &fd), 0);
    shmobj_queue_close(extra);
    for (unsigned i = 1; i < SHMOBJ__RING_NOTIFY_MAX; i++)
        shmobj_queue_close(qs[i]);
    shmobj_queue_close(q);
}

/* ---- retired message blocks ---------------------------------------------- */

/* Send one fresh message of len bytes through q and mark it done; its
 * reference. */
static shmobj_ref send_done(shmobj_queue *q, size_t len)
{
    shmobj_ref r, t;
    void *data;
    assert_int_equal(shmobj_queue_msg_alloc(q, len, 0, &r, &data), 0);
    memset(data, 0x11, len);
    assert_int_equal(shmobj_queue_put(q, r), 0);
    assert_int_equal(shmobj_queue_try_take(q, &t), 0);
    assert_int_equal(t, r);
    assert_int_equal(shmobj_queue_msg_done(q, t), 0);
    return r;
}

static uint64_t retired_blocks(shmobj_queue *q)
{
    uint64_t blocks, bytes;
    shmobj__retire_count(shmobj__queue_retire(q), &blocks, &bytes);
    return blocks;
}

/* Fixed thresholds, whatever this machine's L2: 32 KiB to 1 MiB blocks,
 * 256 KiB of them kept. */
static void retire_fix(shmobj_queue *q)
{
    q->retire_min = 32u << 10;
    q->retire_max = 1u << 20;
    q->retire_budget = 256u << 10;
    q->recycle_cold = UINT64_MAX; /* the FIFO alone: no reuse (below) */
}

static void test_queue_retire_holds_recent_blocks_then_frees(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "ret", 8, 0, &q), 0);
    retire_fix(q);
    uint64_t b0 = used_blocks(f->seg);

    /* small and large blocks go back to the heap at once */
    send_done(q, 1000);
    send_done(q, 2u << 20);
    assert_int_equal(used_blocks(f->seg), b0);
    assert_int_equal(retired_blocks(q), 0);

    /* a 64 KiB block is held back: the next one is another block */
    shmobj_ref prev = send_done(q, 64u << 10);
    assert_int_equal(used_blocks(f->seg), b0 + 1);
    assert_int_equal(retired_blocks(q), 1);
    for (int i = 0; i < 20; i++) {
        shmobj_ref r = send_done(q, 64u << 10);
        assert_true(r != prev);
        prev = r;
        /* at most the budget's worth (plus the newest) stays retired */
        uint64_t n = retired_blocks(q);
        assert_true(n >= 1 && n <= 4);
        assert_int_equal(used_blocks(f->seg), b0 + n);
    }
    assert_int_equal(shmobj_queue_trim(q), 0);
    assert_int_equal(retired_blocks(q), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    assert_int_equal(shmobj_queue_trim(NULL), SHMOBJ_EINVAL);

    /* a tracked message freed by its sender after done is retired too */
    shmobj_ref r, t;
    assert_int_equal(shmobj_queue_msg_alloc(q, 64u << 10, SHMOBJ_QUEUE_MSG_TRACK, &r, NULL), 0);
    assert_int_equal(shmobj_queue_put(q, r), 0);
    assert_int_equal(shmobj_queue_try_take(q, &t), 0);
    assert_int_equal(shmobj_queue_msg_done(q, t), 0);
    assert_int_equal(shmobj_queue_msg_wait_done(q, r, 0), 0);
    assert_int_equal(shmobj_queue_msg_free(q, r), 0);
    assert_int_equal(retired_blocks(q), 1);
    shmobj_queue_close(q);

    /* destroy gives every retired block back */
    assert_int_equal(shmobj_queue_destroy(f->seg, "ret"), 0);
    assert_int_equal(used_blocks(f->seg), b0 - 1);
}

/* Over its budget, the FIFO gives back a quarter of the budget at once, so
 * that the heap's lock and lists move to the consumer's core once per
 * burst rather than once per message: with a budget of 16 blocks the
 * count falls to at most 12 each time it overflows, and never exceeds the
 * budget. */
static void test_queue_retire_frees_in_bursts(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "burst", 8, 0, &q), 0);
    retire_fix(q);
    send_done(q, 64u << 10);
    uint64_t usable, blocks, bytes;
    shmobj__retire_count(shmobj__queue_retire(q), &blocks, &usable);
    q->retire_budget = 16 * usable;
    uint64_t b0 = used_blocks(f->seg) - 1, lowest = UINT64_MAX, bursts = 0, last = 1;
    for (int i = 0; i < 200; i++) {
        send_done(q, 64u << 10);
        shmobj__retire_count(shmobj__queue_retire(q), &blocks, &bytes);
        assert_true(blocks >= 1 && blocks <= 16);
        assert_true(bytes <= q->retire_budget);
        assert_int_equal(used_blocks(f->seg), b0 + blocks);
        if (blocks < last) {
            bursts++;
            if (blocks < lowest)
                lowest = blocks;
            assert_true(last - blocks >= 4); /* a burst, not one block */
        }
        last = blocks;
    }
    assert_true(bursts >= 10);
    assert_true(lowest <= 12);
    assert_int_equal(shmobj_queue_trim(q), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    shmobj_queue_close(q);
}

static void test_queue_retire_trimmed_when_segment_full(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "retfull", 8, 0, &q), 0);
    retire_fix(q);
    q->retire_budget = UINT64_MAX; /* keep all 64 */
    for (int i = 0; i < 64; i++)
        send_done(q, 900u << 10);
    assert_int_equal(retired_blocks(q), 64);
    /* 56 MiB of the 64 MiB segment are retired: a 32 MiB message fits
     * only once they are given back, which msg_alloc does by itself */
    shmobj_ref r;
    assert_int_equal(shmobj_queue_msg_alloc(q, 32u << 20, 0, &r, NULL), 0);
    assert_int_equal(retired_blocks(q), 0);
    assert_int_equal(shmobj_queue_msg_free(q, r), 0);
    shmobj_queue_close(q);
}

static void test_queue_retire_damage_and_dead_owner(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q, *q2;
    assert_int_equal(shmobj_queue_create(f->seg, "retdmg", 8, 0, &q), 0);
    retire_fix(q);
    struct shmobj__retire *rt = shmobj__queue_retire(q);

    /* a damaged header: the queue does not open */
    rt->magic ^= 1;
    assert_int_equal(shmobj_queue_open(f->seg, "retdmg", &q2), SHMOBJ_ECORRUPT);
    rt->magic ^= 1;
    assert_int_equal(shmobj_queue_open(f->seg, "retdmg", &q2), 0);
    shmobj_queue_close(q2);

    /* a process died holding the FIFO's lock: the next one recovers it */
    pid_t pid = fork();
    if (pid == 0) {
        struct shmobj__space *sp = shmobj__space_of_seg(f->seg);
        _exit(sp->ops->live->lock(sp, &rt->lock, 0) == 0 ? 0 : 1);
    }
    assert_int_equal(test_child_wait(pid), 0);
    uint64_t b0 = used_blocks(f->seg);
    send_done(q, 64u << 10);
    assert_int_equal(retired_blocks(q), 1);
    assert_int_equal(used_blocks(f->seg), b0 + 1);

    /* damaged positions: the FIFO starts over (leaking, never freeing
     * twice or out of bounds) */
    rt->tail = rt->head + 1000;
    send_done(q, 64u << 10);
    assert_int_equal(retired_blocks(q), 1);
    assert_int_equal(shmobj_queue_trim(q), 0);
    assert_int_equal(retired_blocks(q), 0);
    shmobj_queue_close(q);
}

/* Threads sending and taking 40 KiB message blocks through one handle:
 * the retire FIFO and the heap are shared between them. */
enum { RT_MESSAGES = 3000 };

struct rt_arg {
    shmobj_queue *q;
    _Atomic uint32_t *stop;
};

static int rt_sender(void *p)
{
    struct rt_arg *a = p;
    for (int i = 0; i < RT_MESSAGES; i++) {
        shmobj_ref r;
        void *data;
        if (shmobj_queue_msg_alloc(a->q, 40u << 10, 0, &r, &data) != 0)
            return 1;
        memset(data, 0x5a, 256);
        if (shmobj_queue_put_timed(a->q, r, 30 * SEC) != 0)
            return 2;
    }
    return 0;
}

static int rt_receiver(void *p)
{
    struct rt_arg *a = p;
    for (;;) {
        shmobj_ref r;
        void *data;
        size_t len;
        int rc = shmobj_queue_take_timed(a->q, &r, 10 * TEST_MS);
        if (rc == SHMOBJ_ETIMEDOUT) {
            if (atomic_load(a->stop))
                return 0;
            continue;
        }
        if (rc != 0 || shmobj_queue_msg_data(a->q, r, &data, &len) != 0 ||
            len != (40u << 10) || ((unsigned char *)data)[255] != 0x5a ||
            shmobj_queue_msg_done(a->q, r) != 0)
            return 3;
    }
}

static void test_queue_threads_retire_shared(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "rett", 16, 0, &q), 0);
    retire_fix(q);
    uint64_t b0 = used_blocks(f->seg);
    _Atomic uint32_t stop = 0;
    struct rt_arg a = {q, &stop};
    struct test_thread t[4];
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(test_thread_start(&t[i], i < 2 ? rt_sender : rt_receiver, &a), 0);
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(test_thread_wait(&t[i]), 0);
    atomic_store(&stop, 1);
    for (unsigned i = 2; i < 4; i++)
        assert_int_equal(test_thread_wait(&t[i]), 0);
    assert_int_equal(shmobj_queue_trim(q), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    shmobj_queue_close(q);
}

/* A child that sends 64 KiB messages to itself and retires them, until
 * killed; 1 on any error. */
static int retire_churn(void *arg)
{
    shmobj_queue *q = arg;
    for (;;) {
        shmobj_ref r, t;
        void *data;
        if (shmobj_queue_msg_alloc(q, 64u << 10, 0, &r, &data) != 0)
            return 1;
        memset(data, 0x22, 64);
        if (shmobj_queue_put(q, r) != 0 || shmobj_queue_try_take(q, &t) != 0 ||
            shmobj_queue_msg_done(q, t) != 0)
            return 1;
    }
}

/* Children churning 64 KiB messages through a queue of f's segment,
 * killed at random moments; thresholds set by fix (the children inherit
 * them). */
static void retire_kill_rounds(struct fixture *f, const char *name,
                               void (*fix)(shmobj_queue *))
{
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, name, 8, 0, &q), 0);
    shmobj__queue_stall_set(q, 2 * (uint64_t)TEST_MS);
    fix(q);
    uint64_t b0 = used_blocks(f->seg);
    unsigned rounds = TEST_KILL_ITERATIONS / 4;
    srand((unsigned)getpid());
    for (unsigned i = 0; i < rounds; i++) {
        pid_t p = test_child_start(retire_churn, q, 60);
        struct timespec ts = {0, (long)(rand() % 2000) * 1000L};
        nanosleep(&ts, NULL);
        kill(p, SIGKILL);
        assert_int_equal(test_child_wait(p), 128 + SIGKILL);
        /* the FIFO still works, and the heap is intact. The child's last
         * message may still be ahead of ours, or its slot claimed and
         * never published (skipped after the stall period). */
        shmobj_ref r, t;
        assert_int_equal(shmobj_queue_msg_alloc(q, 64u << 10, 0, &r, NULL), 0);
        assert_int_equal(shmobj_queue_put(q, r), 0);
        do {
            assert_int_equal(shmobj_queue_take_timed(q, &t, 5 * SEC), 0);
            assert_int_equal(shmobj_queue_msg_done(q, t), 0);
        } while (t != r);
        uint64_t bad = 0;
        assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    }
    /* what a kill can leak: the block it had allocated (or taken) and not
     * yet handed over, and the one it was moving in or out of the FIFO */
    assert_int_equal(shmobj_queue_trim(q), 0);
    uint64_t leaked = used_blocks(f->seg) - b0;
    print_message("%s kills: %u rounds, %llu blocks leaked\n", name, rounds,
                  (unsigned long long)leaked);
    assert_true(leaked <= 2 * (uint64_t)rounds);
    shmobj_queue_close(q);
}

static void test_queue_retire_survives_kills(void **state)
{
    retire_kill_rounds(*state, "retkill", retire_fix);
}

/* ---- retired blocks reused by message allocations ----------------------- */

/* The retire FIFO's thresholds of retire_fix(), and reuse of a retired
 * block once 128 KiB (two 64 KiB messages) were retired after it. */
static void recycle_fix(shmobj_queue *q)
{
    retire_fix(q);
    q->recycle_cold = 128u << 10;
}

/* A message allocation takes the oldest retired block, once enough bytes
 * were retired after it, instead of a block from the heap: the heap's
 * count of used blocks does not move, the block is the oldest one's, at
 * the next generation, and its header is a new message's. One retired
 * after less than that stays retired. */
static void test_queue_recycle_reuses_oldest_retired_block(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "recyc", 8, 0, &q), 0);
    recycle_fix(q);
    uint64_t b0 = used_blocks(f->seg);
    shmobj_ref r1 = send_done(q, 64u << 10);
    shmobj_ref r2 = send_done(q, 64u << 10);
    shmobj_ref r3 = send_done(q, 64u << 10);
    assert_true(r1 != r2 && r2 != r3 && r1 != r3);
    assert_int_equal(retired_blocks(q), 3);
    assert_int_equal(used_blocks(f->seg), b0 + 3);

    shmobj_ref n1;
    void *data;
    size_t len;
    assert_int_equal(shmobj_queue_msg_alloc(q, 64u << 10, 0, &n1, &data), 0);
    assert_int_equal(n1 & UINT64_C(0x0000ffffffffffff), r1 & UINT64_C(0x0000ffffffffffff));
    assert_int_equal((uint16_t)(n1 >> 48), (uint16_t)((r1 >> 48) + 1));
    assert_int_equal(retired_blocks(q), 2);
    assert_int_equal(used_blocks(f->seg), b0 + 3);
    assert_int_equal(shmobj_queue_msg_data(q, n1, &data, &len), 0);
    assert_int_equal(len, 64u << 10);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);

    /* r2 has only r3 (64 KiB) retired after it: a heap block */
    shmobj_ref n2;
    assert_int_equal(shmobj_queue_msg_alloc(q, 64u << 10, 0, &n2, NULL), 0);
    assert_true((n2 & UINT64_C(0x0000ffffffffffff)) != (r2 & UINT64_C(0x0000ffffffffffff)));
    assert_true((n2 & UINT64_C(0x0000ffffffffffff)) != (r3 & UINT64_C(0x0000ffffffffffff)));
    assert_int_equal(used_blocks(f->seg), b0 + 4);
    assert_int_equal(retired_blocks(q), 2);

    /* both go round as messages, and back into the FIFO */
    shmobj_ref t;
    assert_int_equal(shmobj_queue_put(q, n1), 0);
    assert_int_equal(shmobj_queue_put(q, n2), 0);
    assert_int_equal(shmobj_queue_try_take(q, &t), 0);
    assert_int_equal(t, n1);
    assert_int_equal(shmobj_queue_msg_done(q, t), 0);
    assert_int_equal(shmobj_queue_try_take(q, &t), 0);
    assert_int_equal(t, n2);
    assert_int_equal(shmobj_queue_msg_done(q, t), 0);
    /* four blocks are over the 256 KiB budget: the oldest went back */
    assert_int_equal(used_blocks(f->seg), b0 + retired_blocks(q));
    assert_true(retired_blocks(q) >= 2);
    assert_int_equal(shmobj_queue_trim(q), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    shmobj_queue_close(q);
}

/* A reference to a message kept after its done (a second done, a free, a
 * look at its data) is refused once its block was reused for another
 * message, and leaves the new message alone: the reuse gives the block a
 * new generation. */
static void test_queue_recycle_stale_ref_estale(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "recstale", 8, 0, &q), 0);
    recycle_fix(q);
    shmobj_ref old = send_done(q, 64u << 10);
    send_done(q, 64u << 10);
    send_done(q, 64u << 10);
    shmobj_ref now;
    void *data;
    size_t len;
    assert_int_equal(shmobj_queue_msg_alloc(q, 64u << 10, SHMOBJ_QUEUE_MSG_TRACK,
                                            &now, &data), 0);
    assert_int_equal(now & UINT64_C(0x0000ffffffffffff), old & UINT64_C(0x0000ffffffffffff));
    memset(data, 0x33, 64u << 10);
    assert_int_equal(shmobj_queue_msg_done(q, old), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_free(q, old), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_reset(q, old), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_wait_done(q, old, 0), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_data(q, old, &data, &len), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_arena_free(f->seg, old), SHMOBJ_ESTALE);
    /* the new message is untouched: still pending, its data intact */
    assert_int_equal(shmobj_queue_msg_wait_done(q, now, 0), SHMOBJ_ETIMEDOUT);
    assert_int_equal(shmobj_queue_msg_data(q, now, &data, &len), 0);
    assert_int_equal(len, 64u << 10);
    assert_int_equal(((unsigned char *)data)[0], 0x33);
    assert_int_equal(retired_blocks(q), 2);
    shmobj_ref t;
    assert_int_equal(shmobj_queue_put(q, now), 0);
    assert_int_equal(shmobj_queue_try_take(q, &t), 0);
    assert_int_equal(shmobj_queue_msg_done(q, t), 0);
    assert_int_equal(shmobj_queue_msg_wait_done(q, now, 0), 0);
    assert_int_equal(shmobj_queue_msg_free(q, now), 0);
    assert_int_equal(retired_blocks(q), 3);
    assert_int_equal(shmobj_queue_msg_done(q, old), SHMOBJ_ESTALE);
    assert_int_equal(retired_blocks(q), 3);
    assert_int_equal(shmobj_queue_trim(q), 0);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    shmobj_queue_close(q);
}

/* Reuse only fits a block to a message of its size: at least the message,
 * at most a quarter more. A smaller or much larger message comes from the
 * heap and leaves the FIFO as it was; messages of mixed sizes going round
 * arrive intact, and every block is back in the heap after a trim. */
static void test_queue_recycle_sizes_fit(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "recsize", 8, 0, &q), 0);
    recycle_fix(q);
    uint64_t b0 = used_blocks(f->seg);
    shmobj_ref r1 = send_done(q, 64u << 10);
    send_done(q, 64u << 10);
    send_done(q, 64u << 10);
    shmobj_ref a, b, c;
    size_t len;
    void *data;
    /* larger than the block: from the heap */
    assert_int_equal(shmobj_queue_msg_alloc(q, (64u << 10) + 1, 0, &a, NULL), 0);
    assert_int_equal(retired_blocks(q), 3);
    assert_int_equal(used_blocks(f->seg), b0 + 4);
    /* much smaller (the block would waste more than a quarter): the heap */
    assert_int_equal(shmobj_queue_msg_alloc(q, 40u << 10, 0, &b, NULL), 0);
    assert_int_equal(retired_blocks(q), 3);
    assert_int_equal(used_blocks(f->seg), b0 + 5);
    /* a little smaller: the oldest block, with the new length */
    assert_int_equal(shmobj_queue_msg_alloc(q, (64u << 10) - 200, 0, &c, NULL), 0);
    assert_int_equal(c & UINT64_C(0x0000ffffffffffff), r1 & UINT64_C(0x0000ffffffffffff));
    assert_int_equal(retired_blocks(q), 2);
    assert_int_equal(used_blocks(f->seg), b0 + 5);
    assert_int_equal(shmobj_queue_msg_data(q, c, &data, &len), 0);
    assert_int_equal(len, (64u << 10) - 200);
    assert_int_equal(shmobj_queue_msg_free(q, a), 0);
    assert_int_equal(shmobj_queue_msg_free(q, b), 0);
    assert_int_equal(shmobj_queue_msg_free(q, c), 0);

    /* mixed sizes round the queue, each checked on arrival */
    srand(7);
    unsigned reused = 0;
    for (unsigned i = 0; i < 3000; i++) {
        size_t n = (size_t)(20u << 10) + (size_t)(rand() % (100 << 10));
        uint64_t before = retired_blocks(q);
        shmobj_ref r, t;
        assert_int_equal(shmobj_queue_msg_alloc(q, n, 0, &r, &data), 0);
        reused += retired_blocks(q) < before;
        memset(data, (int)(i & 0xff), n);
        assert_int_equal(shmobj_queue_put(q, r), 0);
        assert_int_equal(shmobj_queue_try_take(q, &t), 0);
        assert_int_equal(shmobj_queue_msg_data(q, t, &data, &len), 0);
        assert_int_equal(len, n);
        assert_int_equal(((unsigned char *)data)[0], i & 0xff);
        assert_int_equal(((unsigned char *)data)[n - 1], i & 0xff);
        assert_int_equal(shmobj_queue_msg_done(q, t), 0);
        assert_true(used_blocks(f->seg) <= b0 + 64);
    }
    print_message("mixed sizes: %u of 3000 allocations reused a block\n", reused);
    assert_true(reused > 0);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    assert_int_equal(shmobj_queue_trim(q), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    shmobj_queue_close(q);
}

/* Destroying a queue gives back the blocks waiting for reuse; one reused
 * and in flight is its holder's. */
static void test_queue_recycle_destroy_frees_retired(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "recdes", 8, 0, &q), 0);
    recycle_fix(q);
    for (int i = 0; i < 3; i++)
        send_done(q, 64u << 10);
    shmobj_ref held;
    assert_int_equal(shmobj_queue_msg_alloc(q, 64u << 10, 0, &held, NULL), 0);
    assert_int_equal(retired_blocks(q), 2);
    shmobj_queue_close(q);
    assert_int_equal(shmobj_queue_destroy(f->seg, "recdes"), 0);
    assert_int_equal(used_blocks(f->seg), b0 + 1); /* the one held */
    assert_int_equal(shmobj_arena_free(f->seg, held), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
}

static int retire_done_child(void *arg)
{
    shmobj_queue *q = arg;
    shmobj_ref t;
    return shmobj_queue_try_take(q, &t) == 0 && shmobj_queue_msg_done(q, t) == 0
               ? 0
               : 1;
}

/* A consumer killed inside its done of a retired size, after the block's
 * state said given back and before the FIFO counted it: the next locker
 * finds the block named in the FIFO, given back and in no entry, and
 * counts it, so no block is lost and every one is back in the heap after
 * a trim. */
static void test_queue_retire_killed_inside_done_loses_no_block(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "retkill1", 8, 0, &q), 0);
    recycle_fix(q);
    uint64_t b0 = used_blocks(f->seg);
    struct shmobj__retire *rt = shmobj__queue_retire(q);
    for (int round = 0; round < 3; round++) {
        shmobj_ref r;
        assert_int_equal(shmobj_queue_msg_alloc(q, 64u << 10, 0, &r, NULL), 0);
        assert_int_equal(shmobj_queue_put(q, r), 0);
        uint64_t before = retired_blocks(q);
        shmobj__queue_retire_hold_set(q, 20 * SEC); /* the child's copy */
        pid_t p = test_child_start(retire_done_child, q, 60);
        shmobj__queue_retire_hold_set(q, 0);
        /* wait until it is inside: the block named, its state moved */
        for (int i = 0; i < 5000 && __atomic_load_n(&rt->putting, __ATOMIC_ACQUIRE) == 0; i++)
            test_sleep_ms(1);
        assert_int_equal(rt->putting, r);
        test_sleep_ms(20);
        kill(p, SIGKILL);
        assert_int_equal(test_child_wait(p), 128 + SIGKILL);
        assert_int_equal(retired_blocks(q), before);
        /* a second done of the dead consumer's message is refused */
        assert_int_equal(shmobj_queue_msg_done(q, r), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_queue_trim(q), 0);
        assert_int_equal(retired_blocks(q), 0);
        assert_int_equal(used_blocks(f->seg), b0);
        assert_int_equal(rt->putting, 0);
        uint64_t bad = 0;
        assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    }
    shmobj_queue_close(q);
}

/* The same with every allocation after the first few a reuse of a retired
 * block: a kill anywhere in the churn (inside a reuse included) leaves a
 * sound heap and FIFO, and leaks at most what a kill leaked without reuse
 * (the message the child held, and the block of a done it was inside). */
static void test_queue_recycle_survives_kills(void **state)
{
    retire_kill_rounds(*state, "reckill", recycle_fix);
}

static int recycle_alloc_child(void *arg)
{
    shmobj_queue *q = arg;
    shmobj_ref r;
    return shmobj_queue_msg_alloc(q, 64u << 10, 0, &r, NULL) == 0 ? 0 : 1;
}

/* A process killed inside a reuse, after the block left the FIFO and got
 * its new generation, before the reuse returned: the next locker of the
 * FIFO finds the entry it was taking and keeps the block there, so no
 * block is lost and every one is back in the heap after a trim. */
static void test_queue_recycle_killed_inside_loses_no_block(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "reckill1", 8, 0, &q), 0);
    recycle_fix(q);
    uint64_t b0 = used_blocks(f->seg);
    for (int round = 0; round < 3; round++) {
        while (retired_blocks(q) < 3)
            send_done(q, 64u << 10);
        struct shmobj__retire *rt = shmobj__queue_retire(q);
        shmobj__queue_recycle_hold_set(q, 20 * SEC); /* the child's copy */
        pid_t p = test_child_start(recycle_alloc_child, q, 60);
        shmobj__queue_recycle_hold_set(q, 0);
        /* wait until it is inside: the entry uncounted, the lock held */
        for (int i = 0; i < 5000 && retired_blocks(q) == 3; i++)
            test_sleep_ms(1);
        assert_int_equal(retired_blocks(q), 2);
        kill(p, SIGKILL);
        assert_int_equal(test_child_wait(p), 128 + SIGKILL);
        /* the next locker (this trim) repairs: the block is in the FIFO
         * again, so the trim gives all three back; the entry in flight is
         * cleared */
        assert_int_equal(shmobj_queue_trim(q), 0);
        assert_int_equal(retired_blocks(q), 0);
        assert_int_equal(used_blocks(f->seg), b0);
        assert_int_equal(rt->taking, 0);
        uint64_t bad = 0;
        assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    }
    shmobj_queue_close(q);
}

/* ---- stale handles, retired blocks, damage, kinds of roots ----------------- */

struct stale_sleeper_arg {
    shmobj_queue *q;
    int rc;
};

static int stale_sleeper(void *p)
{
    struct stale_sleeper_arg *a = p;
    shmobj_ref r;
    a->rc = shmobj_queue_take_timed(a->q, &r, 20 * SEC);
    return 0;
}

/* A handle whose queue was destroyed (here through another handle of the
 * same process) refuses every operation with SHMOBJ_ESTALE, before it
 * writes anything: also once the heap gave the ring's block to a new queue
 * of the same size, and also for a thread asleep in a take when the queue
 * goes. */
static void test_queue_ops_after_destroy_stale(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q, *h;
    assert_int_equal(shmobj_queue_create(f->seg, "gone", 8, 0, &q), 0);
    assert_int_equal(shmobj_queue_open(f->seg, "gone", &h), 0);
    assert_int_equal(shmobj_queue_put(q, msg_of(1, 1)), 0);
    struct stale_sleeper_arg sa = {h, 1};
    struct test_thread t;
    shmobj_queue *sleeper_q;
    assert_int_equal(shmobj_queue_open(f->seg, "gone", &sleeper_q), 0);
    shmobj_ref r;
    assert_int_equal(shmobj_queue_try_take(sleeper_q, &r), 0);
    sa.q = sleeper_q;
    assert_int_equal(test_thread_start(&t, stale_sleeper, &sa), 0);
    test_sleep_ms(20); /* let it sleep (it is not an error if it has not) */
    shmobj_queue_close(q);
    assert_int_equal(shmobj_queue_destroy(f->seg, "gone"), 0);
    assert_int_equal(test_thread_wait(&t), 0);
    assert_int_equal(sa.rc, SHMOBJ_ESTALE);
    shmobj_queue_close(sleeper_q);

    uint64_t n;
    uint32_t cap;
    int fd;
    assert_int_equal(shmobj_queue_try_put(h, msg_of(1, 2)), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_put(h, msg_of(1, 2)), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_put_timed(h, msg_of(1, 2), SEC), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_try_take(h, &r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_take_timed(h, &r, SEC), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_try_peek(h, &r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_peek_timed(h, &r, SEC), SHMOBJ_ESTALE);
    assert_false(shmobj_queue_has_messages(h));
    assert_int_equal(shmobj_queue_count(h, &n), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_trim(h), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_notify_fd(h, &fd), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_capacity(h, &cap), 0); /* the handle's own */

    /* the heap hands the block freed last out first: a new queue of the
     * same size takes the old one's place, and the stale handle must not
     * put into it or take from it */
    heap_uncache(f->seg);
    shmobj_queue *nq;
    assert_int_equal(shmobj_queue_create(f->seg, "new", 8, 0, &nq), 0);
    assert_int_equal(shmobj__queue_ring(nq)->hdr, shmobj__queue_ring(h)->hdr);
    assert_int_equal(shmobj_queue_put(nq, msg_of(2, 1)), 0);
    assert_int_equal(shmobj_queue_try_put(h, msg_of(1, 3)), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_try_take(h, &r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_count(nq, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(shmobj_queue_try_take(nq, &r), 0);
    assert_int_equal(r, msg_of(2, 1));
    /* message blocks still work through a stale handle: they belong to
     * the segment; a done one goes straight back to the heap */
    uint64_t b0 = used_blocks(f->seg);
    shmobj_ref m;
    assert_int_equal(shmobj_queue_msg_alloc(h, 64u << 10, 0, &m, NULL), 0);
    assert_int_equal(shmobj_queue_msg_done(h, m), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    shmobj_queue_close(h);
    shmobj_queue_close(nq);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
}

/* A retired message block (done, waiting in the retire FIFO before it
 * goes back to the heap) is refused like a freed one: a second done or
 * free must not queue it twice, and its data is no longer handed out. */
static void test_queue_msg_retired_twice_stale(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "twice", 8, 0, &q), 0);
    retire_fix(q);
    shmobj_ref r = send_done(q, 64u << 10);
    assert_int_equal(retired_blocks(q), 1);
    void *d;
    size_t len;
    assert_int_equal(shmobj_queue_msg_done(q, r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_free(q, r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_data(q, r, &d, &len), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_wait_done(q, r, 0), SHMOBJ_ESTALE);
    assert_int_equal(retired_blocks(q), 1);

    /* tracked: done, the sender's wait and free retire it; then nothing */
    shmobj_ref t, got;
    assert_int_equal(shmobj_queue_msg_alloc(q, 64u << 10, SHMOBJ_QUEUE_MSG_TRACK, &t, NULL), 0);
    assert_int_equal(shmobj_queue_put(q, t), 0);
    assert_int_equal(shmobj_queue_try_take(q, &got), 0);
    assert_int_equal(shmobj_queue_msg_done(q, got), 0);
    assert_int_equal(shmobj_queue_msg_done(q, got), SHMOBJ_EINVAL); /* done already */
    assert_int_equal(shmobj_queue_msg_wait_done(q, t, 0), 0);
    assert_int_equal(shmobj_queue_msg_free(q, t), 0);
    assert_int_equal(retired_blocks(q), 2);
    assert_int_equal(shmobj_queue_msg_free(q, t), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_done(q, t), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_reset(q, t), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_data(q, t, &d, NULL), SHMOBJ_ESTALE);
    assert_int_equal(retired_blocks(q), 2);

    /* tracked, the sender gave up first: the consumer's done retires it */
    assert_int_equal(shmobj_queue_msg_alloc(q, 64u << 10, SHMOBJ_QUEUE_MSG_TRACK, &t, NULL), 0);
    assert_int_equal(shmobj_queue_put(q, t), 0);
    assert_int_equal(shmobj_queue_msg_free(q, t), 0);
    assert_int_equal(shmobj_queue_try_take(q, &got), 0);
    assert_int_equal(shmobj_queue_msg_done(q, got), 0);
    assert_int_equal(retired_blocks(q), 3);
    assert_int_equal(shmobj_queue_msg_done(q, got), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_free(q, got), SHMOBJ_ESTALE);
    assert_int_equal(retired_blocks(q), 3);

    uint64_t b0 = used_blocks(f->seg);
    assert_int_equal(shmobj_queue_trim(q), 0);
    assert_int_equal(used_blocks(f->seg), b0 - 3);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    shmobj_queue_close(q);
}

/* A slot word of zero is no state of any position (put never accepts a
 * null reference): take, peek and put report damage instead of handing
 * out a null message or overwriting the word. */
static void test_queue_zeroed_slot_corrupt(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "zero", 4, 0, &q), 0);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    assert_int_equal(shmobj_queue_put(q, msg_of(1, 1)), 0);
    uint64_t d = atomic_load(&r->hdr->deq_pos);
    uint64_t good = atomic_load(&r->slots[d & r->mask].word);
    atomic_store(&r->slots[d & r->mask].word, 0);
    shmobj_ref m = 1;
    assert_int_equal(shmobj_queue_try_peek(q, &m), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_queue_try_take(q, &m), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_queue_take_timed(q, &m, SEC), SHMOBJ_ECORRUPT);
    assert_int_equal(m, 1); /* nothing was handed out */
    assert_int_equal(atomic_load(&r->hdr->deq_pos), d);
    atomic_store(&r->slots[d & r->mask].word, good);

    uint64_t e = atomic_load(&r->hdr->enq_pos);
    good = atomic_load(&r->slots[e & r->mask].word);
    atomic_store(&r->slots[e & r->mask].word, 0);
    assert_int_equal(shmobj_queue_try_put(q, msg_of(1, 2)), SHMOBJ_ECORRUPT);
    assert_int_equal(atomic_load(&r->slots[e & r->mask].word), 0);
    atomic_store(&r->slots[e & r->mask].word, good);
    assert_int_equal(shmobj_queue_try_take(q, &m), 0);
    assert_int_equal(m, msg_of(1, 1));
    shmobj_queue_close(q);
}

/* A child that keeps flipping a message block's length between its real
 * value and one far beyond the block, until stopped. */
struct len_flip {
    _Atomic uint64_t *len;
    uint64_t good, bad;
    _Atomic uint32_t *stop;
};

static int len_flipper(void *p)
{
    struct len_flip *a = p;
    while (!atomic_load_explicit(a->stop, memory_order_relaxed)) {
        atomic_store_explicit(a->len, a->bad, memory_order_relaxed);
        atomic_store_explicit(a->len, a->good, memory_order_relaxed);
    }
    return 0;
}

/* msg_data returns the length it validated, never one read again after
 * the check: with another process rewriting the length all the time, every
 * length it returns fits the block. */
static void test_queue_msg_data_len_read_once(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "len", 4, 0, &q), 0);
    shmobj_ref m;
    void *data;
    assert_int_equal(shmobj_queue_msg_alloc(q, 100, 0, &m, &data), 0);
    _Atomic uint32_t *stop = shared_alloc(sizeof *stop);
    struct len_flip a = {
        (_Atomic uint64_t *)(void *)((char *)data - SHMOBJ_QUEUE_MSG_HEADER + 16),
        100, UINT64_C(1) << 40, stop};
    assert_int_equal(atomic_load(a.len), 100);
    pid_t c = test_child_start(len_flipper, &a, 60);
    unsigned refused = 0, bad = 0;
    uint64_t t0 = shmobj__os_now_ns();
    for (unsigned i = 0; i < 2000000 && shmobj__os_now_ns() - t0 < 5 * (uint64_t)SEC; i++) {
        void *d;
        size_t len = 0;
        int rc = shmobj_queue_msg_data(q, m, &d, &len);
        if (rc == SHMOBJ_ECORRUPT)
            refused++;
        else if (rc != 0 || len != 100)
            bad++;
    }
    atomic_store(stop, 1);
    assert_int_equal(test_child_wait(c), 0);
    assert_int_equal(bad, 0);
    print_message("msg_data under a racing writer: %u refused\n", refused);
    munmap((void *)stop, sizeof *stop);
    assert_int_equal(shmobj_queue_msg_free(q, m), 0);
    shmobj_queue_close(q);
}

/* A live block that is not a message block is the wrong kind
 * (SHMOBJ_ETYPE); a reference that names no block of this segment
 * (unaligned, or beyond its bytes) is a bad argument (SHMOBJ_EINVAL); a
 * message header whose length does not fit its block is damage. */
static void test_queue_msg_not_a_message_etype(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "kind", 4, 0, &q), 0);
    shmobj_ref raw;
    void *rp, *d;
    assert_int_equal(shmobj_arena_alloc(f->seg, 256, 64, &raw, NULL), 0);
    assert_int_equal(shmobj_arena_ptr(f->seg, raw, &rp, NULL), 0);
    memset(rp, 0, 256);
    assert_int_equal(shmobj_queue_msg_data(q, raw, &d, NULL), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_queue_msg_done(q, raw), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_queue_msg_free(q, raw), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_queue_msg_reset(q, raw), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_queue_msg_wait_done(q, raw, 0), SHMOBJ_ETYPE);
    /* an object */
    shmobj_value v = SHMOBJ_VAL_STR("not a message");
    shmobj_ref obj;
    assert_int_equal(shmobj_obj_put(f->seg, &v, &obj), 0);
    assert_int_equal(shmobj_queue_msg_data(q, obj, &d, NULL), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_queue_msg_done(q, obj), SHMOBJ_ETYPE);
    /* references of no block of this segment */
    shmobj_ref unaligned = raw + 8;
    shmobj_ref beyond = (UINT64_C(1) << 40) | (raw & ~SHMOBJ__REF_OFF_MASK);
    assert_int_equal(shmobj_queue_msg_data(q, unaligned, &d, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_msg_done(q, unaligned), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_msg_free(q, unaligned), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_msg_data(q, beyond, &d, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_msg_done(q, beyond), SHMOBJ_EINVAL);
    /* a message whose length outgrows its block */
    shmobj_ref m;
    void *data;
    assert_int_equal(shmobj_queue_msg_alloc(q, 100, 0, &m, &data), 0);
    uint64_t *len = (uint64_t *)(void *)((char *)data - SHMOBJ_QUEUE_MSG_HEADER + 16);
    *len = UINT64_C(1) << 40;
    assert_int_equal(shmobj_queue_msg_data(q, m, &d, NULL), SHMOBJ_ECORRUPT);
    *len = 100;
    assert_int_equal(shmobj_queue_msg_free(q, m), 0);
    assert_int_equal(shmobj_arena_free(f->seg, raw), 0);
    shmobj_queue_close(q);
}

/* A reference whose block was given back and allocated again at the same
 * offset (another generation) is stale for every message call, also on
 * the path that checks a block by its heap header word alone. */
static void test_queue_msg_stale_after_block_reused(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "reuse", 4, 0, &q), 0);
    shmobj_ref old, now;
    void *d;
    size_t len;
    assert_int_equal(shmobj_queue_msg_alloc(q, 4000, 0, &old, NULL), 0);
    assert_int_equal(shmobj_queue_msg_free(q, old), 0); /* not retired: < 32 KiB */
    assert_int_equal(shmobj_queue_msg_alloc(q, 4000, 0, &now, NULL), 0);
    assert_int_equal(shmobj__ref_off(now), shmobj__ref_off(old));
    assert_true(now != old);
    assert_int_equal(shmobj_queue_msg_data(q, old, &d, &len), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_done(q, old), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_free(q, old), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_msg_data(q, now, &d, &len), 0);
    assert_int_equal(len, 4000);
    assert_int_equal(shmobj_queue_msg_free(q, now), 0);
    assert_int_equal(shmobj_queue_msg_data(q, now, &d, &len), SHMOBJ_ESTALE);
    shmobj_queue_close(q);
}

/* Queues and maps share one namespace of root names, the names their
 * users gave: a map and a queue of one name cannot both exist, opening one
 * as the other is the wrong kind, and a map named "q:x" is no queue "x". */
static void test_queue_root_names_shared_with_maps(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q, *q2;
    shmobj_map *m, *m2;
    assert_int_equal(shmobj_map_create(f->seg, "q:x", &m), 0);
    assert_int_equal(shmobj_queue_create(f->seg, "x", 4, 0, &q), 0);
    shmobj_ref ref;
    assert_int_equal(shmobj_segment_root_get(f->seg, "x", &ref), 0);
    assert_int_equal(shmobj_queue_open(f->seg, "x", &q2), 0);
    shmobj_queue_close(q2);
    /* one name, one root, whatever its kind */
    assert_int_equal(shmobj_map_create(f->seg, "x", &m2), SHMOBJ_EEXIST);
    assert_int_equal(shmobj_queue_create(f->seg, "q:x", 4, 0, &q2), SHMOBJ_EEXIST);
    assert_int_equal(shmobj_queue_open(f->seg, "q:x", &q2), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_queue_destroy(f->seg, "q:x"), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_map_open(f->seg, "x", &m2) != 0, 1);
    shmobj_map_close(m);
    shmobj_queue_close(q);
    assert_int_equal(shmobj_queue_destroy(f->seg, "x"), 0);
    assert_int_equal(shmobj_segment_root_get(f->seg, "x", &ref), SHMOBJ_ENOTFOUND);
    /* the longest root name is a queue name too */
    char longest[SHMOBJ_ROOT_NAME_MAX + 1];
    memset(longest, 'n', SHMOBJ_ROOT_NAME_MAX);
    longest[SHMOBJ_ROOT_NAME_MAX] = 0;
    assert_int_equal(SHMOBJ_QUEUE_NAME_MAX, SHMOBJ_ROOT_NAME_MAX);
    assert_int_equal(shmobj_queue_create(f->seg, longest, 4, 0, &q), 0);
    assert_int_equal(shmobj_segment_root_get(f->seg, longest, &ref), 0);
    shmobj_queue_close(q);
}

/* The root directory refuses a reference to a freed block (its
 * generation no longer matches the block's header). */
static void test_segment_root_set_freed_stale(void **state)
{
    struct fixture *f = *state;
    shmobj_ref r, now;
    assert_int_equal(shmobj_arena_alloc(f->seg, 256, 16, &r, NULL), 0);
    assert_int_equal(shmobj_segment_root_set(f->seg, "freed", r), 0);
    assert_int_equal(shmobj_segment_root_del(f->seg, "freed"), 0);
    assert_int_equal(shmobj_arena_free(f->seg, r), 0);
    assert_int_equal(shmobj_segment_root_set(f->seg, "freed", r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_segment_root_add(f->seg, "freed", r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_segment_root_get(f->seg, "freed", &now), SHMOBJ_ENOTFOUND);
    /* the same offset allocated again: the old reference is still refused,
     * the new one is published */
    shmobj_ref again;
    assert_int_equal(shmobj_arena_alloc(f->seg, 256, 16, &again, NULL), 0);
    assert_int_equal(shmobj_segment_root_set(f->seg, "freed", r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_segment_root_set(f->seg, "freed", again), 0);
    assert_int_equal(shmobj_segment_root_get(f->seg, "freed", &now), 0);
    assert_int_equal(now, again);
}

/* ---- single calls: the checks of the inline plain case ------------------- */

/* Every single put, take and peek refuses a bad argument with
 * SHMOBJ_EINVAL even when the ring would serve it at once (room for a put,
 * a message for a take), and moves nothing. */
static void test_queue_single_calls_bad_arguments_einval(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "plainarg", 4, 0, &q), 0);
    assert_int_equal(shmobj_queue_put(q, msg_of(1, 1)), 0);
    const shmobj_ref bad[] = {0, 8, msg_of(1, 2) | 1, msg_of(1, 2) | 15};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(shmobj_queue_put(q, bad[i]), SHMOBJ_EINVAL);
        assert_int_equal(shmobj_queue_try_put(q, bad[i]), SHMOBJ_EINVAL);
        assert_int_equal(shmobj_queue_put_timed(q, bad[i], SEC), SHMOBJ_EINVAL);
    }
    assert_int_equal(shmobj_queue_put(NULL, msg_of(1, 2)), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_try_put(NULL, msg_of(1, 2)), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_put_timed(NULL, msg_of(1, 2), SEC), SHMOBJ_EINVAL);
    shmobj_ref r = 0;
    assert_int_equal(shmobj_queue_take(NULL, &r), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_try_take(NULL, &r), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_take_timed(NULL, &r, SEC), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_take(q, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_try_take(q, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_take_timed(q, NULL, SEC), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_peek(q, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_try_peek(NULL, &r), SHMOBJ_EINVAL);
    assert_int_equal(r, 0);
    /* nothing went in or out: the one message is still there, alone */
    uint64_t n = 0;
    assert_int_equal(shmobj_queue_count(q, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(shmobj_queue_try_take(q, &r), 0);
    assert_int_equal(r, msg_of(1, 1));
    assert_int_equal(shmobj_queue_try_take(q, &r), SHMOBJ_EEMPTY);
    shmobj_queue_close(q);
}

enum { PLAIN_PUT, PLAIN_TAKE };
struct plain_block_arg {
    shmobj_queue *q;
    int op;   /* PLAIN_PUT or PLAIN_TAKE, with SHMOBJ_FOREVER */
    int want; /* the status the call must return */
};

static int plain_block_child(void *p)
{
    struct plain_block_arg *a = p;
    shmobj_ref r;
    int rc = a->op == PLAIN_PUT ? shmobj_queue_put(a->q, msg_of(3, 1))
                                : shmobj_queue_take(a->q, &r);
    return rc == a->want ? 0 : 1;
}

/* Run a blocking put or take in a child killed after 10 s: a call that
 * waited instead of answering fails the test instead of hanging it. */
static void plain_block_expect(shmobj_queue *q, int op, int want)
{
    struct plain_block_arg a = {q, op, want};
    assert_int_equal(test_child_wait(test_child_start(plain_block_child, &a, 10)), 0);
}

/* The blocking put and take (SHMOBJ_FOREVER) answer at once, without
 * waiting, for a ring whose slot is damaged (SHMOBJ_ECORRUPT) and for a
 * queue destroyed under the handle (SHMOBJ_ESTALE), even when the ring's
 * block now holds a new queue with room and a message. */
static void test_queue_single_blocking_calls_corrupt_and_stale(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q, *h;
    assert_int_equal(shmobj_queue_create(f->seg, "plainblk", 4, 0, &q), 0);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    assert_int_equal(shmobj_queue_put(q, msg_of(1, 1)), 0);
    uint64_t e = atomic_load(&r->hdr->enq_pos);
    uint64_t good = atomic_load(&r->slots[e & r->mask].word);
    atomic_store(&r->slots[e & r->mask].word, (UINT64_C(12345) << 2) | 1);
    plain_block_expect(q, PLAIN_PUT, SHMOBJ_ECORRUPT);
    atomic_store(&r->slots[e & r->mask].word, good);
    uint64_t d = atomic_load(&r->hdr->deq_pos);
    good = atomic_load(&r->slots[d & r->mask].word);
    atomic_store(&r->slots[d & r->mask].word, (UINT64_C(777) << 2) | 3);
    plain_block_expect(q, PLAIN_TAKE, SHMOBJ_ECORRUPT);
    atomic_store(&r->slots[d & r->mask].word, good);

    assert_int_equal(shmobj_queue_open(f->seg, "plainblk", &h), 0);
    shmobj_queue_close(q);
    assert_int_equal(shmobj_queue_destroy(f->seg, "plainblk"), 0);
    plain_block_expect(h, PLAIN_PUT, SHMOBJ_ESTALE);
    plain_block_expect(h, PLAIN_TAKE, SHMOBJ_ESTALE);
    heap_uncache(f->seg);
    shmobj_queue *nq;
    assert_int_equal(shmobj_queue_create(f->seg, "plainnew", 4, 0, &nq), 0);
    assert_int_equal(shmobj__queue_ring(nq)->hdr, shmobj__queue_ring(h)->hdr);
    assert_int_equal(shmobj_queue_put(nq, msg_of(2, 1)), 0);
    plain_block_expect(h, PLAIN_PUT, SHMOBJ_ESTALE);
    plain_block_expect(h, PLAIN_TAKE, SHMOBJ_ESTALE);
    uint64_t n = 0;
    assert_int_equal(shmobj_queue_count(nq, &n), 0);
    assert_int_equal(n, 1);
    shmobj_queue_close(nq);
    shmobj_queue_close(h);
}

struct plain_token_arg {
    shmobj_queue *q;
    uint32_t parent_token;
};

static int plain_token_child(void *p)
{
    struct plain_token_arg *a = p;
    struct shmobj__ring *r = shmobj__queue_ring(a->q);
    uint64_t e = atomic_load(&r->hdr->enq_pos);
    if (shmobj_queue_put(a->q, msg_of(4, 1)) != 0)
        return 1;
    uint32_t mine = shmobj__ring_self_token(r);
    uint64_t rec = shmobj__ring_claim_token(atomic_load(&r->slots[e & r->mask].claim));
    if (mine == 0 || mine == a->parent_token)
        return 2;
    return rec == mine ? 0 : 3;
}

/* A put of a forked child whose parent's handle already put through the
 * plain case records the child's own attachment token as the claimant,
 * not the parent's: the plain case still looks the token up again after a
 * fork (a dead claimant is judged by that record). */
static void test_queue_single_put_after_fork_records_own_token(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "plaintok", 8, 0, &q), 0);
    assert_int_equal(shmobj_queue_put(q, msg_of(1, 1)), 0);
    struct plain_token_arg a = {q, shmobj__ring_self_token(shmobj__queue_ring(q))};
    assert_int_not_equal(a.parent_token, 0);
    assert_int_equal(test_child_wait(test_child_start(plain_token_child, &a, 10)), 0);
    shmobj_ref m;
    assert_int_equal(shmobj_queue_try_take(q, &m), 0);
    assert_int_equal(shmobj_queue_try_take(q, &m), 0);
    assert_int_equal(m, msg_of(4, 1));
    shmobj_queue_close(q);
}

/* A handle that already put and took (so its own claim identity is known,
 * and its calls take the plain case) refuses every single put and take
 * with SHMOBJ_ESTALE once its queue was destroyed, also when the heap gave
 * the ring's block to a new queue of the same size with room and a
 * message: nothing goes into or out of the new queue through it. */
static void test_queue_single_calls_used_handle_stale_after_destroy(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q, *h;
    assert_int_equal(shmobj_queue_create(f->seg, "plainuse", 4, 0, &q), 0);
    assert_int_equal(shmobj_queue_open(f->seg, "plainuse", &h), 0);
    shmobj_ref r = 0;
    assert_int_equal(shmobj_queue_put(h, msg_of(1, 1)), 0);
    assert_int_equal(shmobj_queue_take(h, &r), 0);
    shmobj_queue_close(q);
    assert_int_equal(shmobj_queue_destroy(f->seg, "plainuse"), 0);
    heap_uncache(f->seg);
    shmobj_queue *nq;
    assert_int_equal(shmobj_queue_create(f->seg, "plainuse2", 4, 0, &nq), 0);
    assert_int_equal(shmobj__queue_ring(nq)->hdr, shmobj__queue_ring(h)->hdr);
    assert_int_equal(shmobj_queue_put(nq, msg_of(2, 1)), 0);
    r = 0;
    assert_int_equal(shmobj_queue_try_put(h, msg_of(1, 2)), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_put_timed(h, msg_of(1, 2), SEC), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_put(h, msg_of(1, 2)), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_try_take(h, &r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_take_timed(h, &r, SEC), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_take(h, &r), SHMOBJ_ESTALE);
    assert_int_equal(r, 0);
    uint64_t n = 0;
    assert_int_equal(shmobj_queue_count(nq, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(shmobj_queue_try_take(nq, &r), 0);
    assert_int_equal(r, msg_of(2, 1));
    shmobj_queue_close(nq);
    shmobj_queue_close(h);
}

/* ---- bulk messages: the W1 sizes with the handle's own thresholds -------- */

/* Half this core's L2, the message size of the tests below; skips the
 * test when two such messages would not fit the fixture's segment. */
static size_t half_l2_len(void)
{
    size_t len = (size_t)(shmobj__os_l2_cache_bytes() / 2);
    if (len > (4u << 20)) {
        print_message("L2 of %zu bytes: too large for this segment\n", 2 * len);
        skip();
    }
    return len;
}

/* A stream of messages of half this core's L2 of data (1 MiB on a 2 MiB
 * L2: a power of two, as bulk messages often are) goes round through the
 * retire FIFO with the thresholds the handle derives from the machine: no
 * allocation gets the block whose message was done last (the heap's
 * choice, still in the consumer's caches), later ones reuse retired
 * blocks, and no block is lost. Such a block is half the L2 and a header. */
static void test_queue_recycle_half_l2_messages_go_round(void **state)
{
    struct fixture *f = *state;
    size_t len = half_l2_len();
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "half-l2", 8, 0, &q), 0);
    uint64_t b0 = used_blocks(f->seg);
    const uint64_t off_mask = UINT64_C(0x0000ffffffffffff);
    shmobj_ref seen[16];
    unsigned hot = 0, reused = 0;
    for (unsigned i = 0; i < 16; i++) {
        seen[i] = send_done(q, len);
        if (i > 0 && (seen[i] & off_mask) == (seen[i - 1] & off_mask))
            hot++;
        for (unsigned k = 0; k + 1 < i; k++)
            if ((seen[k] & off_mask) == (seen[i] & off_mask)) {
                reused++;
                break;
            }
    }
    print_message("%zu-byte messages: %u of 15 got the block done just before, "
                  "%u reused an older one\n", len, hot, reused);
    assert_int_equal(hot, 0);
    assert_true(reused >= 8);
    assert_true(retired_blocks(q) > 0);
    assert_int_equal(used_blocks(f->seg), b0 + retired_blocks(q));
    assert_int_equal(shmobj_queue_trim(q), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    shmobj_queue_close(q);
}

/* The same messages with the consumer two messages behind (two puts, then
 * two takes and dones, as a queue of two holds them): after a first round,
 * every allocation takes a retired block rather than one from the heap.
 * The FIFO's budget has room for four such blocks, so a done that makes it
 * four trims nothing, and the oldest of them still has the L2's worth
 * retired after it for the next allocation. */
static void test_queue_recycle_half_l2_consumer_two_behind_no_heap(void **state)
{
    struct fixture *f = *state;
    size_t len = half_l2_len();
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "half-l2-two", 8, 0, &q), 0);
    for (unsigned i = 0; i < 3; i++)
        send_done(q, len);
    unsigned heap = 0;
    for (unsigned round = 0; round < 8; round++) {
        shmobj_ref r[2], t;
        void *data;
        for (unsigned k = 0; k < 2; k++) {
            uint64_t before = retired_blocks(q);
            assert_int_equal(shmobj_queue_msg_alloc(q, len, 0, &r[k], &data), 0);
            if (round > 0 && retired_blocks(q) >= before)
                heap++; /* not taken from the FIFO */
            memset(data, (int)round, len);
            assert_int_equal(shmobj_queue_put(q, r[k]), 0);
        }
        for (unsigned k = 0; k < 2; k++) {
            assert_int_equal(shmobj_queue_try_take(q, &t), 0);
            assert_int_equal(t, r[k]);
            assert_int_equal(shmobj_queue_msg_done(q, t), 0);
        }
    }
    print_message("%u of 14 allocations of %zu bytes after the first round "
                  "came from the heap\n", heap, len);
    assert_int_equal(heap, 0);
    assert_int_equal(shmobj_queue_trim(q), 0);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    shmobj_queue_close(q);
}

/* ---- the claim record on its slot's line (ring format 7) ------------------ */

/* The ring's bytes (header, slots and whatever the format keeps behind
 * them for the ring) as they are now, to compare after one operation. */
static uint8_t *ring_snapshot(struct shmobj__ring *r)
{
    uint64_t n = shmobj__ring_footprint((uint32_t)r->capacity);
    uint8_t *copy = malloc(n);
    assert_non_null(copy);
    memcpy(copy, r->hdr, n);
    return copy;
}

/* Every 64-byte line of the ring that differs from `before` is one of
 * allowed[0 .. n) (line numbers from the ring's start); frees before. */
static void ring_changed_only(struct shmobj__ring *r, uint8_t *before,
                              const uint64_t *allowed, unsigned n)
{
    uint64_t bytes = shmobj__ring_footprint((uint32_t)r->capacity);
    const uint8_t *now = (const uint8_t *)r->hdr;
    for (uint64_t line = 0; line * 64 < bytes; line++) {
        uint64_t len = bytes - line * 64 < 64 ? bytes - line * 64 : 64;
        if (memcmp(before + line * 64, now + line * 64, len) == 0)
            continue;
        bool ok = false;
        for (unsigned i = 0; i < n; i++)
            ok = ok || allowed[i] == line;
        if (!ok)
            fail_msg("line %llu of the ring (byte %llu) was written",
                     (unsigned long long)line, (unsigned long long)line * 64);
    }
    free(before);
}

/* The line of position p's slot, and the 8 bytes after its word (format 7:
 * the claim record, read here by offset so that the test reads the bytes
 * any build would write). */
static uint64_t slot_line(struct shmobj__ring *r, uint64_t p)
{
    return (sizeof(struct shmobj__ring_hdr) + (p & r->mask) * 16) / 64;
}
static uint64_t slot_claim_bytes(struct shmobj__ring *r, uint64_t p)
{
    uint64_t v;
    memcpy(&v, (const uint8_t *)r->hdr + sizeof(struct shmobj__ring_hdr) +
                   (p & r->mask) * 16 + 8,
           8);
    return v;
}
/* The claim record format 7 gives (role 0 producer, 1 consumer). */
static uint64_t claim_expected(struct shmobj__ring *r, unsigned role, uint64_t p,
                               uint32_t token)
{
    return (p >> r->cap_log2) << 32 | (uint64_t)role << 31 | token;
}

/* Format 7: 16 bytes a slot, its claim record included, and no claim
 * arrays behind the slots (format 8 kept them, and changed only the
 * completion records: a table of version 2 whose window is the whole
 * table, with its reach). */
static void test_ring_format_7_slot_holds_its_claim(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "v7fmt", 8, 0, &q), 0);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    assert_int_equal(r->hdr->version, 8);
    assert_int_equal(q->track->version, 2);
    assert_int_equal(q->track->count, 64);
    assert_int_equal(q->track->window, 64);
    assert_int_equal(atomic_load(&q->track->reach), 16);
    assert_int_equal(r->hdr->slot_size, 16);
    assert_int_equal(r->hdr->hdr_size, 896);
    uint32_t caps[] = {2, 8, 1024, 1u << 24};
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(shmobj__ring_footprint(caps[i]), 896 + 16 * (uint64_t)caps[i]);
    shmobj_queue_close(q);
}

/* A single put writes its side's position and its slot's line and no
 * other line of the ring (its claim record is on that line); so does a
 * single take; at every slot of the line, across the wrap. The record
 * names the position's lap, the role and the handle's token. */
static void test_ring_single_put_take_write_one_line_each(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "v7one", 8, 0, &q), 0);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    uint32_t me = shmobj__ring_self_token(r);
    assert_int_not_equal(me, 0);
    for (uint64_t i = 0; i < 20; i++) {
        uint64_t e = atomic_load(&r->hdr->enq_pos);
        uint8_t *before = ring_snapshot(r);
        assert_int_equal(shmobj_queue_put(q, msg_of(1, i + 1)), 0);
        uint64_t put_lines[] = {offsetof(struct shmobj__ring_hdr, enq_pos) / 64,
                                slot_line(r, e)};
        ring_changed_only(r, before, put_lines, 2);
        assert_int_equal(slot_claim_bytes(r, e), claim_expected(r, 0, e, me));

        shmobj_ref m;
        before = ring_snapshot(r);
        assert_int_equal(shmobj_queue_take(q, &m), 0);
        assert_int_equal(m, msg_of(1, i + 1));
        uint64_t take_lines[] = {offsetof(struct shmobj__ring_hdr, deq_pos) / 64,
                                 slot_line(r, e)};
        ring_changed_only(r, before, take_lines, 2);
        assert_int_equal(slot_claim_bytes(r, e), claim_expected(r, 1, e, me));
    }
    shmobj_queue_close(q);
}

/* A batch writes its side's position and the lines of its run's slots,
 * nothing else of the ring: the run's claim records are on those lines. */
static void test_ring_batch_put_take_write_only_their_slot_lines(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "v7batch", 16, 0, &q), 0);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    uint32_t me = shmobj__ring_self_token(r);
    assert_int_not_equal(me, 0);
    shmobj_ref in[7], out[7];
    for (uint64_t round = 0; round < 9; round++) {
        uint64_t e = atomic_load(&r->hdr->enq_pos);
        for (unsigned i = 0; i < 7; i++)
            in[i] = msg_of(2, round * 7 + i + 1);
        uint64_t lines[9];
        unsigned n = 0;
        lines[n++] = offsetof(struct shmobj__ring_hdr, enq_pos) / 64;
        for (uint64_t p = e; p < e + 7; p++)
            lines[n++] = slot_line(r, p);
        uint8_t *before = ring_snapshot(r);
        size_t done;
        assert_int_equal(shmobj_queue_put_many(q, in, 7, 0, &done), 0);
        assert_int_equal(done, 7);
        ring_changed_only(r, before, lines, n);
        for (uint64_t p = e; p < e + 7; p++)
            assert_int_equal(slot_claim_bytes(r, p), claim_expected(r, 0, p, me));

        lines[0] = offsetof(struct shmobj__ring_hdr, deq_pos) / 64;
        before = ring_snapshot(r);
        assert_int_equal(shmobj_queue_take_many(q, out, 7, 0, &done), 0);
        assert_int_equal(done, 7);
        ring_changed_only(r, before, lines, n);
        for (unsigned i = 0; i < 7; i++)
            assert_int_equal(out[i], in[i]);
        for (uint64_t p = e; p < e + 7; p++)
            assert_int_equal(slot_claim_bytes(r, p), claim_expected(r, 1, p, me));
    }
    shmobj_queue_close(q);
}

/* Right after a put, the slot's one claim record is the producer's, with
 * a live token. A consumer that claimed the position and died before it
 * recorded itself leaves that record in place: a producer behind it must
 * not take it for the consumer's (the role tells them apart) and releases
 * the slot once the unknown claimant's stall periods are over. */
static void test_ring_producer_record_not_taken_for_consumer(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "v7role", 2, 0, &q), 0);
    shmobj__queue_stall_set(q, 2 * (uint64_t)TEST_MS);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    assert_int_equal(shmobj_queue_put(q, msg_of(3, 1)), 0);
    assert_int_equal(shmobj_queue_put(q, msg_of(3, 2)), 0);
    /* a consumer claimed position 0 and died before its record */
    atomic_store(&r->hdr->deq_pos, 1);
    assert_int_equal(slot_claim_bytes(r, 0),
                     claim_expected(r, 0, 0, shmobj__ring_self_token(r)));
    assert_int_equal(shmobj_queue_put_timed(q, msg_of(3, 3), 5 * SEC), 0);
    assert_int_equal(atomic_load(&r->hdr->rescued), 1);
    shmobj_ref m;
    assert_int_equal(shmobj_queue_take(q, &m), 0);
    assert_int_equal(m, msg_of(3, 2));
    assert_int_equal(shmobj_queue_take(q, &m), 0);
    assert_int_equal(m, msg_of(3, 3));
    shmobj_queue_close(q);
}

/* A record of the slot's previous lap naming a live handle is not the
 * record of this lap's claimant: a producer that claimed position 2 and
 * died before recording itself is skipped once the unknown claimant's
 * stall periods are over, though the record (of position 0, producer,
 * live token) names the same slot and role. */
static void test_ring_previous_lap_record_not_taken_for_claimant(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "v7lap", 2, 0, &q), 0);
    shmobj__queue_stall_set(q, 2 * (uint64_t)TEST_MS);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    shmobj_ref m;
    for (unsigned i = 0; i < 2; i++) {
        assert_int_equal(shmobj_queue_put(q, msg_of(4, i + 1)), 0);
        assert_int_equal(shmobj_queue_take(q, &m), 0);
    }
    uint64_t rec = claim_expected(r, 0, 0, shmobj__ring_self_token(r));
    memcpy((uint8_t *)r->hdr + sizeof(struct shmobj__ring_hdr) + 8, &rec, 8);
    atomic_store(&r->hdr->enq_pos, 3); /* position 2 claimed, never recorded */
    assert_int_equal(shmobj_queue_put(q, msg_of(4, 3)), 0);
    assert_int_equal(shmobj_queue_take_timed(q, &m, 5 * SEC), 0);
    assert_int_equal(m, msg_of(4, 3));
    assert_int_equal(atomic_load(&r->hdr->skipped), 1);
    shmobj_queue_close(q);
}

/* shmobj__ring_claim_pos() gives back the position a record names, from
 * the record's 32 lap bits and a position near it, on either side of a
 * 2^32-lap boundary, with its role. */
static void test_ring_claim_pos_names_the_recorded_position(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "v7pos", 8, 0, &q), 0);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    const uint64_t epoch = (uint64_t)8 << 32; /* positions of 2^32 laps */
    uint64_t ps[] = {0, 5, 8 * 1000 + 3, epoch - 1, epoch, epoch + 6,
                     3 * epoch + 2};
    for (unsigned i = 0; i < sizeof ps / sizeof ps[0]; i++)
        for (unsigned role = 0; role < 2; role++)
            for (int64_t near = -20; near <= 20; near += 5) {
                uint64_t p = ps[i];
                if ((int64_t)p + near < 0)
                    continue;
                uint64_t c = shmobj__ring_claim_word(r, role, p, 77);
                unsigned got_role = 9;
                assert_int_equal(shmobj__ring_claim_pos(r, c, p & r->mask,
                                                        p + (uint64_t)near,
                                                        &got_role),
                                 p);
                assert_int_equal(got_role, role);
                assert_int_equal(shmobj__ring_claim_token(c), 77);
            }
    shmobj_queue_close(q);
}

/* ---- W1 copy-in: how long a retired block waits before its reuse --------- */

static uint64_t retired_bytes(shmobj_queue *q)
{
    uint64_t blocks, bytes;
    shmobj__retire_count(shmobj__queue_retire(q), &blocks, &bytes);
    return bytes;
}

/* This core's L2, skipping the test when one and a half of it in messages
 * would not fit the fixture's segment. */
static uint64_t cold_l2(void)
{
    uint64_t l2 = shmobj__os_l2_cache_bytes();
    if (l2 > (8u << 20)) {
        print_message("L2 of %llu bytes: too large for this segment\n",
                      (unsigned long long)l2);
        skip();
    }
    return l2;
}

/* A 32nd of the L2 (W1-64K's 64 KiB on a 2 MiB L2), for a stream on q;
 * skips when that is under the retire FIFO's floor (blocks that small go
 * to the heap: a 256 KiB L2, as valgrind reports one). */
static size_t l2_32nd_len(shmobj_queue *q, uint64_t l2)
{
    size_t len = (size_t)(l2 / 32);
    if (len < q->retire_min) {
        print_message("L2 of %llu bytes: a 32nd of it is under the retire FIFO's floor\n",
                      (unsigned long long)l2);
        shmobj_queue_close(q);
        skip();
    }
    return len;
}

/* A message of len bytes copied in with put_copy, taken and marked done;
 * its reference. */
static shmobj_ref send_copy_done(shmobj_queue *q, size_t len)
{
    static unsigned char buf[1u << 20];
    assert_true(len <= sizeof buf);
    memset(buf, 0x22, len);
    shmobj_ref r, t;
    assert_int_equal(shmobj_queue_put_copy(q, buf, len, 0, 0, &r), 0);
    assert_int_equal(shmobj_queue_try_take(q, &t), 0);
    assert_int_equal(t, r);
    assert_int_equal(shmobj_queue_msg_done(q, t), 0);
    return r;
}

/* On a new queue (an empty retire FIFO), with the handle's own thresholds,
 * a stream of messages of len bytes, copied in (copy) or allocated and
 * written in place, each taken and marked done before the next: the bytes
 * retired after the first message's block when an allocation got that
 * block again (0: not within max messages). */
static uint64_t bytes_after_first_at_reuse(shmobj_queue *q, size_t len,
                                           bool copy, unsigned max)
{
    const uint64_t off_mask = UINT64_C(0x0000ffffffffffff);
    shmobj_ref first = copy ? send_copy_done(q, len) : send_done(q, len);
    uint64_t first_bytes = retired_bytes(q);
    assert_int_equal(retired_blocks(q), 1);
    for (unsigned i = 0; i < max; i++) {
        uint64_t before = retired_bytes(q);
        shmobj_ref r = copy ? send_copy_done(q, len) : send_done(q, len);
        if ((r & off_mask) == (first & off_mask))
            return before - first_bytes;
    }
    return 0;
}

/* On the new queue q, a stream of len-byte messages (copied in, or written
 * in place): the first block is reused once at least lo and less than hi
 * bytes were retired after it; then the queue is trimmed, the heap checked
 * and q closed. */
static void reuse_between(struct fixture *f, shmobj_queue *q, size_t len, bool copy,
                          unsigned max, uint64_t lo, uint64_t hi)
{
    uint64_t after = bytes_after_first_at_reuse(q, len, copy, max);
    print_message("%zu-byte messages%s: the first block reused after %llu bytes "
                  "retired (lo %llu, hi %llu)\n", len, copy ? "" : " in place",
                  (unsigned long long)after, (unsigned long long)lo, (unsigned long long)hi);
    assert_true(after >= lo);
    assert_true(after < hi);
    assert_int_equal(shmobj_queue_trim(q), 0);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    shmobj_queue_close(q);
}

/* Messages of a 32nd of the L2 (W1-64K's 64 KiB on a 2 MiB L2) copied in:
 * a retired block is reused once one and a half L2 of bytes were retired
 * after it, not one L2, and as soon as that is so. After one L2 of reads
 * the consumer's L2 still holds part of the block (its replacement is not
 * LRU), and the copy has to take each line it finds there from the other
 * core: W1-64K copy-in measured 11.8 GiB/s reusing after one L2, 13.1
 * after one and a half. */
static void test_queue_recycle_l2_32nd_waits_one_and_a_half_l2(void **state)
{
    struct fixture *f = *state;
    uint64_t l2 = cold_l2();
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "cold-64k", 8, 0, &q), 0);
    size_t len = l2_32nd_len(q, l2);
    reuse_between(f, q, len, true, 200, l2 + l2 / 2,
                  l2 + l2 / 2 + 2 * (len + SHMOBJ_QUEUE_MSG_HEADER) + len / 4);
}

/* The same with messages of W1-400K's size on a 2 MiB L2 (400,000 bytes,
 * scaled to this L2) copied in: the FIFO keeps one and a half L2 after
 * such a block, the block and three more within its budget. */
static void test_queue_recycle_400k_waits_one_and_a_half_l2(void **state)
{
    struct fixture *f = *state;
    uint64_t l2 = cold_l2();
    size_t len = (size_t)(l2 * 400000 / (2u << 20));
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "cold-400k", 8, 0, &q), 0);
    reuse_between(f, q, len, true, 40, l2 + l2 / 2,
                  l2 + l2 / 2 + 2 * (len + SHMOBJ_QUEUE_MSG_HEADER) + len / 4);
}

/* Messages of half the L2, copied in, keep the L2 as their wait: the
 * FIFO's budget (twice the L2 and an eighth) has no room for one and a half
 * L2 after such a block and three more, and waiting longer would send
 * every allocation to the heap
 * (test_queue_recycle_half_l2_consumer_two_behind_no_heap). */
static void test_queue_recycle_half_l2_waits_one_l2(void **state)
{
    struct fixture *f = *state;
    size_t len = half_l2_len();
    uint64_t l2 = shmobj__os_l2_cache_bytes();
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "cold-half", 8, 0, &q), 0);
    reuse_between(f, q, len, true, 8, l2, l2 + l2 / 2);
}

/* Copied-in messages of W1-400K's size (scaled to this L2) with the
 * consumer two messages behind (two puts, then two takes and dones): once
 * the FIFO holds one and a half L2 after its oldest block, every copy-in
 * takes a retired block, none comes from the heap. The FIFO's budget has
 * room for the block and three more besides the one and a half L2, so the
 * dones of a consumer behind trim nothing it is about to reuse. */
static void test_queue_recycle_400k_consumer_two_behind_no_heap(void **state)
{
    struct fixture *f = *state;
    uint64_t l2 = cold_l2();
    size_t len = (size_t)(l2 * 400000 / (2u << 20));
    static unsigned char buf[1u << 20];
    assert_true(len <= sizeof buf);
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "cold-400k-two", 8, 0, &q), 0);
    unsigned heap = 0;
    for (unsigned round = 0; round < 24; round++) {
        shmobj_ref r[2], t;
        for (unsigned k = 0; k < 2; k++) {
            uint64_t before = retired_blocks(q);
            memset(buf, (int)round, len);
            assert_int_equal(shmobj_queue_put_copy(q, buf, len, 0, 0, &r[k]), 0);
            if (round >= 8 && retired_blocks(q) >= before)
                heap++; /* not taken from the FIFO */
        }
        for (unsigned k = 0; k < 2; k++) {
            assert_int_equal(shmobj_queue_try_take(q, &t), 0);
            assert_int_equal(t, r[k]);
            assert_int_equal(shmobj_queue_msg_done(q, t), 0);
        }
    }
    print_message("%u of 32 copy-ins of %zu bytes after the first 8 rounds "
                  "came from the heap\n", heap, len);
    assert_int_equal(heap, 0);
    assert_int_equal(shmobj_queue_trim(q), 0);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    shmobj_queue_close(q);
}

/* Messages of a 32nd of the L2 allocated and written in place
 * (shmobj_queue_msg_alloc) keep the L2 as their wait: a producer's plain
 * stores read every line before writing it, and W1-400K zero-copy
 * measured slower into blocks that waited one and a half L2 (11.1 GiB/s
 * against 11.6, median of 9 runs). */
static void test_queue_recycle_msg_alloc_waits_one_l2(void **state)
{
    struct fixture *f = *state;
    uint64_t l2 = cold_l2();
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "cold-zc", 8, 0, &q), 0);
    size_t len = l2_32nd_len(q, l2);
    reuse_between(f, q, len, false, 200, l2, l2 + 2 * (len + SHMOBJ_QUEUE_MSG_HEADER) + len / 4);
}

/* ---- batches walk their run by stretches of consecutive slots ------------- */

/* The slot word at position p's slot, read by offset as any build lays it
 * out (format 7: the word, then the claim record). */
static uint64_t slot_word_bytes(struct shmobj__ring *r, uint64_t p)
{
    uint64_t v;
    memcpy(&v, (const uint8_t *)r->hdr + sizeof(struct shmobj__ring_hdr) +
                   (p & r->mask) * 16,
           8);
    return v;
}

/* A run as long as the ring, started at every slot, and runs that end
 * exactly at the ring's end or start exactly at slot 0: every slot of the
 * run gets its own position's lap tag and claim record in the stretch
 * before the ring's end and in the one after it (the lap of the second is
 * one more), after a batch put and after a batch take. */
static void test_ring_batch_run_across_the_end_tags_each_lap(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "rbstretch", 8, 0, &q), 0);
    struct shmobj__ring *r = shmobj__queue_ring(q);
    uint32_t me = shmobj__ring_self_token(r);
    assert_int_not_equal(me, 0);
    shmobj_ref in[8], out[8];
    uint64_t seq = 1;
    for (unsigned round = 0; round < 40; round++) {
        uint64_t e = atomic_load(&r->hdr->enq_pos);
        /* the whole ring from anywhere, then up to the ring's end, then
         * from slot 0 on (where the run before ended) */
        size_t len = round % 3 == 0   ? 8
                     : round % 3 == 1 ? 8 - (e & 7)
                                      : 1 + round % 7;
        for (size_t i = 0; i < len; i++)
            in[i] = msg_of(5, seq + i);
        size_t n;
        assert_int_equal(shmobj_queue_put_many(q, in, len, 0, &n), 0);
        assert_int_equal(n, len);
        for (uint64_t p = e; p < e + len; p++) {
            uint64_t lap = p >> r->cap_log2;
            assert_int_equal(slot_word_bytes(r, p),
                             msg_of(5, seq + (p - e)) | (lap & 7) << 1);
            assert_int_equal(slot_claim_bytes(r, p), claim_expected(r, 0, p, me));
        }
        assert_int_equal(shmobj_queue_take_many(q, out, 8, 0, &n), 0);
        assert_int_equal(n, len);
        for (uint64_t p = e; p < e + len; p++) {
            assert_int_equal(out[p - e], msg_of(5, seq + (p - e)));
            assert_int_equal(slot_word_bytes(r, p), ((p + 8) << 2) | 1);
            assert_int_equal(slot_claim_bytes(r, p), claim_expected(r, 1, p, me));
        }
        seq += len;
    }
    shmobj_ref m;
    assert_int_equal(shmobj_queue_try_take(q, &m), SHMOBJ_EEMPTY);
    shmobj_queue_close(q);
}

/* A batch put with a null or misaligned reference at any place, among
 * good ones, sends nothing and says EINVAL (the references are all
 * checked before the first goes). */
static void test_queue_batch_put_bad_ref_anywhere_sends_nothing(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "bbad", 16, 0, &q), 0);
    const shmobj_ref bads[] = {0, 1, 8, 15, msg_of(1, 1) | 4, UINT64_MAX};
    for (unsigned b = 0; b < sizeof bads / sizeof bads[0]; b++)
        for (size_t at = 0; at < 5; at++) {
            shmobj_ref in[5];
            for (size_t i = 0; i < 5; i++)
                in[i] = i == at ? bads[b] : msg_of(2, i + 1);
            size_t n = 99;
            assert_int_equal(shmobj_queue_put_many(q, in, 5, 0, &n), SHMOBJ_EINVAL);
            assert_int_equal(n, 0);
            uint64_t count = 99;
            assert_int_equal(shmobj_queue_count(q, &count), 0);
            assert_int_equal(count, 0);
        }
    /* the good ones alone go, in order */
    shmobj_ref in[5], out[5];
    for (size_t i = 0; i < 5; i++)
        in[i] = msg_of(2, i + 1);
    size_t n;
    assert_int_equal(shmobj_queue_put_many(q, in, 5, 0, &n), 0);
    assert_int_equal(n, 5);
    assert_int_equal(shmobj_queue_take_many(q, out, 5, 0, &n), 0);
    assert_int_equal(n, 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(out[i], in[i]);
    shmobj_queue_close(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(test_queue_create_open_close_roundtrip),
        T(test_queue_create_bad_arguments),
        T(test_queue_open_not_a_queue_etype),
        T(test_queue_damaged_slot_corrupt),
        T(test_queue_try_put_full_and_empty),
        T(test_queue_timed_times_out),
        T(test_queue_peek_keeps_message),
        T(test_queue_take_sleeps_until_put),
        T(test_queue_killed_sleepers_counts_taken_back),
        T(test_queue_msg_completion_roundtrip),
        T(test_queue_tracked_object_done_roundtrip),
        T(test_queue_tracked_wait_all_releases_everything),
        T(test_queue_tracked_consumer_killed_holding),
        T(test_queue_tracked_close_untracks),
        T(test_queue_tracked_full_at_documented_capacity),
        T(test_queue_msg_consumer_killed_holding_epeerdead),
        T(test_queue_wait_forever_segment_removed_ereplaced),
        T(test_queue_stall_every_step_exactly_once),
        T(test_queue_stall_every_step_one_cpu_exactly_once),
        T(test_queue_tracked_waiter_woken_by_destroy),
        T(test_queue_put_copy_large_sizes_intact),
        T(test_queue_retire_holds_recent_blocks_then_frees),
        T(test_queue_retire_trimmed_when_segment_full),
        T(test_queue_retire_frees_in_bursts),
        T(test_queue_msg_stale_after_block_reused),
        T(test_queue_retire_damage_and_dead_owner),
        T(test_queue_retire_survives_kills),
        T(test_queue_take_skips_dead_producer_slot),
        T(test_queue_take_skips_own_token_claim_alone),
        T(test_queue_put_rescues_dead_consumer_slot),
        T(test_queue_notify_fd_wakes_poll),
        T(test_queue_notify_dead_listener_no_sigpipe),
        T(test_queue_mpmc_2x2_exactly_once),
        T(test_queue_batch_mpmc_2x2_exactly_once),
        T(test_queue_batch_full_empty_prefix),
        T(test_queue_batch_put_skipped_while_stalled_puts_again),
        T(test_queue_batch_take_skips_dead_producer_slot),
        T(test_ring_threads_batch_take_rescued_while_stalled),
        T(test_ring_batch_put_died_mid_run_skipped),
        T(test_ring_batch_take_died_mid_run_rescued),
        T(test_ring_batch_wraps_at_every_offset),
        T(test_ring_threads_batch_wakes_sleepers),
        T(test_ring_polling_tries_still_resolve_dead_claimants),
        T(test_queue_threads_mpmc_exactly_once),
        T(test_queue_threads_retire_shared),
        T(test_queue_kill_producers_randomly),
        T(test_queue_kill_consumers_randomly),
        T(test_queue_recycle_reuses_oldest_retired_block),
        T(test_queue_recycle_stale_ref_estale),
        T(test_queue_recycle_sizes_fit),
        T(test_queue_recycle_destroy_frees_retired),
        T(test_queue_recycle_killed_inside_loses_no_block),
        T(test_queue_recycle_survives_kills),
        T(test_queue_retire_killed_inside_done_loses_no_block),
    T(test_queue_ops_after_destroy_stale),
        T(test_queue_msg_retired_twice_stale),
        T(test_queue_zeroed_slot_corrupt),
        T(test_queue_msg_data_len_read_once),
        T(test_queue_msg_not_a_message_etype),
        T(test_queue_root_names_shared_with_maps),
        T(test_segment_root_set_freed_stale),
        T(test_queue_single_calls_bad_arguments_einval),
        T(test_queue_single_blocking_calls_corrupt_and_stale),
        T(test_queue_single_put_after_fork_records_own_token),
        T(test_queue_single_calls_used_handle_stale_after_destroy),
        T(test_queue_recycle_half_l2_messages_go_round),
        T(test_queue_recycle_half_l2_consumer_two_behind_no_heap),
        T(test_ring_format_7_slot_holds_its_claim),
        T(test_ring_single_put_take_write_one_line_each),
        T(test_ring_batch_put_take_write_only_their_slot_lines),
        T(test_ring_producer_record_not_taken_for_consumer),
        T(test_ring_previous_lap_record_not_taken_for_claimant),
        T(test_ring_claim_pos_names_the_recorded_position),
        T(test_queue_recycle_l2_32nd_waits_one_and_a_half_l2),
        T(test_queue_recycle_400k_waits_one_and_a_half_l2),
        T(test_queue_recycle_half_l2_waits_one_l2),
        T(test_queue_recycle_msg_alloc_waits_one_l2),
        T(test_queue_recycle_400k_consumer_two_behind_no_heap),
        T(test_ring_batch_run_across_the_end_tags_each_lap),
        T(test_queue_batch_put_bad_ref_anywhere_sends_nothing),
#undef T
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
