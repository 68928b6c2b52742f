/* Topics: lifecycle and bad input, fan-out exactly once per subscriber
 * under several publisher processes, history replay, the overwrite
 * policy's missed counts, the block policy's timeouts, 1,024 subscribers,
 * loans read in place, the pollable descriptor, dead subscribers and
 * publishers given back by repair (no leaked block), kill loops, damaged
 * records, and a process stopped at every named step of the topic's
 * protocols while others go on. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "shmobj.h"
#include "test-stall.h"
#include "test-util.h"
#include "topic-int.h"

#define MiB (UINT64_C(1) << 20)
#define SEC (INT64_C(1000000000))

struct fixture {
    char name[96];
    shmobj_segment *seg;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    test_name(f->name, sizeof f->name, "topic");
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

static uint64_t used_blocks(shmobj_segment *seg)
{
    shmobj_arena_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_arena_stats_get(seg, &st), 0);
    return st.used_blocks;
}

static void *shared_alloc(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 0, n);
    return p;
}

/* A message of the tests: which publisher, its count. */
struct tmsg {
    uint32_t pub;
    uint32_t check;
    uint64_t n;
};

static uint32_t tmsg_check(uint32_t pub, uint64_t n)
{
    return (uint32_t)((n * 2654435761u) ^ pub ^ 0x5a5a5a5au);
}

static int pub_one(shmobj_topic *t, uint32_t pub, uint64_t n, int64_t timeout)
{
    struct tmsg m = {.pub = pub, .check = tmsg_check(pub, n), .n = n};
    return shmobj_topic_publish(t, &m, sizeof m, timeout);
}

static shmobj_topic_config cfg_of(uint32_t cap, uint32_t hist, uint32_t subs,
                                  uint32_t policy)
{
    shmobj_topic_config c;
    shmobj_topic_config_init(&c);
    c.capacity = cap;
    c.history = hist;
    c.subscribers = subs;
    c.policy = policy;
    return c;
}

/* ---- lifecycle and bad input ----------------------------------------------- */

static void test_topic_create_open_destroy_roundtrip(void **state)
{
    struct fixture *f = *state;
    shmobj_topic *a = NULL, *b = NULL, *c = NULL;
    shmobj_topic_config cfg = cfg_of(16, 2, 8, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "news", &cfg, &a), 0);
    assert_int_equal(shmobj_topic_create(f->seg, "news", &cfg, &b), SHMOBJ_EEXIST);
    assert_int_equal(shmobj_topic_open(f->seg, "news", &b), 0);
    assert_int_equal(shmobj_topic_open_or_create(f->seg, "news", NULL, &c), 0);
    assert_int_equal(shmobj_topic_open(f->seg, "nothing", &c), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_topic_open_timed(f->seg, "nothing", 1000, &c),
                     SHMOBJ_ETIMEDOUT);
    shmobj_topic_sub *s;
    assert_int_equal(shmobj_topic_subscribe(b, &s), 0);
    assert_int_equal(pub_one(a, 1, 7, 0), 0);
    shmobj_topic_msg m;
    assert_int_equal(shmobj_topic_take(s, &m, SEC), 0);
    assert_int_equal(m.len, sizeof(struct tmsg));
    assert_int_equal(((const struct tmsg *)m.data)->n, 7);
    assert_int_equal(shmobj_topic_release(s, &m), 0);
    assert_int_equal(shmobj_topic_destroy(f->seg, "news"), 0);
    /* every handle's next call says the topic is gone */
    assert_int_equal(pub_one(a, 1, 8, 0), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_topic_try_take(s, &m), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_topic_subscribe(a, &s), SHMOBJ_ESTALE);
    shmobj_topic_unsubscribe(s);
    shmobj_topic_close(a);
    shmobj_topic_close(b);
    shmobj_topic_close(c);
    assert_int_equal(shmobj_topic_destroy(f->seg, "news"), SHMOBJ_ENOTFOUND);
}

static void test_topic_create_bad_input_refused(void **state)
{
    struct fixture *f = *state;
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(12, 0, 8, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "x", &cfg, &t), SHMOBJ_EINVAL);
    cfg = cfg_of(8, 8, 8, SHMOBJ_TOPIC_BLOCK); /* history must be < capacity */
    assert_int_equal(shmobj_topic_create(f->seg, "x", &cfg, &t), SHMOBJ_EINVAL);
    cfg = cfg_of(8, 0, 0, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "x", &cfg, &t), SHMOBJ_EINVAL);
    cfg = cfg_of(8, 0, 8, 7);
    assert_int_equal(shmobj_topic_create(f->seg, "x", &cfg, &t), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_topic_create(f->seg, "", NULL, &t), SHMOBJ_EINVAL);
    /* a root of another kind is no topic */
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "q", 8, 0, &q), 0);
    assert_int_equal(shmobj_topic_open(f->seg, "q", &t), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_topic_destroy(f->seg, "q"), SHMOBJ_ETYPE);
    shmobj_queue_close(q);
    /* a reference that is no block, a freed block, a bad release */
    assert_int_equal(shmobj_topic_create(f->seg, "t", NULL, &t), 0);
    int rc = shmobj_topic_publish_ref(t, 12345 * 16, 8, 0);
    assert_true(rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE);
    shmobj_ref r;
    assert_int_equal(shmobj_arena_alloc(f->seg, 64, 16, &r, NULL), 0);
    assert_int_equal(shmobj_arena_free(f->seg, r), 0);
    assert_int_equal(shmobj_topic_publish_ref(t, r, 8, 0), SHMOBJ_ESTALE);
    shmobj_topic_sub *s;
    assert_int_equal(shmobj_topic_subscribe(t, &s), 0);
    shmobj_topic_msg m = {.seq = 5};
    assert_int_equal(shmobj_topic_release(s, &m), SHMOBJ_EINVAL);
    shmobj_topic_loan loan = {.ref = 999, .slot = 3};
    assert_int_equal(shmobj_topic_loan_publish(t, &loan, 1, 0), SHMOBJ_EINVAL);
    /* a message whose header no longer carries the topic's stamp, or a
     * slot that says more bytes than the loan had: damage, told */
    assert_int_equal(shmobj_topic_loan_get(t, 32, &loan), 0);
    ((uint8_t *)loan.data - SHMOBJ__TOPIC_MSG_HEADER)[0] ^= 1;
    assert_int_equal(shmobj_topic_loan_publish(t, &loan, 32, 0), 0);
    shmobj_topic_msg bad;
    assert_int_equal(shmobj_topic_try_take(s, &bad), SHMOBJ_ECORRUPT);
    assert_ptr_equal(bad.data, NULL);
    assert_int_equal(shmobj_topic_loan_get(t, 32, &loan), 0);
    assert_int_equal(shmobj_topic_loan_publish(t, &loan, 32, 0), 0);
    uint64_t head = atomic_load(&t->hdr->head);
    atomic_store(&t->slots[(head - 1) & (t->capacity - 1)].len, 33);
    assert_int_equal(shmobj_topic_try_take(s, &bad), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_topic_release(s, &bad), 0);
    shmobj_topic_unsubscribe(s);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "t"), 0);
}

/* ---- order, history, zero copy ---------------------------------------------- */

static void test_topic_history_replay_order(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(8, 4, 8, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "h", &cfg, &t), 0);
    for (uint64_t i = 0; i < 10; i++)
        assert_int_equal(pub_one(t, 1, i, 0), 0);
    shmobj_topic_stats st;
    assert_int_equal(shmobj_topic_stats_get(t, &st), 0);
    assert_true(st.retained <= 8);
    shmobj_topic_sub *s;
    assert_int_equal(shmobj_topic_subscribe(t, &s), 0);
    assert_int_equal(pub_one(t, 1, 10, 0), 0);
    shmobj_topic_msg m;
    for (uint64_t want = 6; want <= 10; want++) {
        assert_int_equal(shmobj_topic_try_take(s, &m), 0);
        assert_int_equal(((const struct tmsg *)m.data)->n, want);
        assert_int_equal(m.seq, want);
        assert_int_equal(m.missed, 0);
        assert_int_equal(shmobj_topic_release(s, &m), 0);
    }
    assert_int_equal(shmobj_topic_try_take(s, &m), SHMOBJ_EEMPTY);
    assert_int_equal(shmobj_topic_take(s, &m, 1000), SHMOBJ_ETIMEDOUT);
    shmobj_topic_unsubscribe(s);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "h"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
}

static void test_topic_loan_read_in_place(void **state)
{
    struct fixture *f = *state;
    shmobj_topic *t;
    assert_int_equal(shmobj_topic_create(f->seg, "z", NULL, &t), 0);
    shmobj_topic_sub *s1, *s2;
    assert_int_equal(shmobj_topic_subscribe(t, &s1), 0);
    assert_int_equal(shmobj_topic_subscribe(t, &s2), 0);
    shmobj_topic_loan loan;
    assert_int_equal(shmobj_topic_loan_get(t, 4096, &loan), 0);
    memset(loan.data, 0xab, 4096);
    shmobj_ref ref = loan.ref;
    assert_int_equal(shmobj_topic_loan_publish(t, &loan, 4000, 0), 0);
    shmobj_topic_msg a, b;
    assert_int_equal(shmobj_topic_try_take(s1, &a), 0);
    assert_int_equal(shmobj_topic_try_take(s2, &b), 0);
    /* one block, read in place by both */
    assert_int_equal(a.ref, ref);
    assert_int_equal(b.ref, ref);
    assert_ptr_equal(a.data, b.data);
    assert_int_equal(a.len, 4000);
    assert_int_equal(((const uint8_t *)a.data)[3999], 0xab);
    /* a block handed over by reference */
    shmobj_ref r;
    assert_int_equal(shmobj_arena_alloc(f->seg, 100, 16, &r, NULL), 0);
    assert_int_equal(shmobj_topic_publish_ref(t, r, 100, 0), 0);
    assert_int_equal(shmobj_topic_try_take(s1, &a), 0);
    assert_int_equal(a.ref, r);
    /* a loan cancelled goes back */
    uint64_t b0 = used_blocks(f->seg);
    assert_int_equal(shmobj_topic_loan_get(t, 100, &loan), 0);
    assert_int_equal(shmobj_topic_loan_cancel(t, &loan), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    shmobj_topic_unsubscribe(s1);
    shmobj_topic_unsubscribe(s2);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "z"), 0);
}

/* ---- policies ---------------------------------------------------------------- */

static void test_topic_block_full_times_out(void **state)
{
    struct fixture *f = *state;
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(4, 0, 8, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "b", &cfg, &t), 0);
    shmobj_topic_sub *s;
    assert_int_equal(shmobj_topic_subscribe(t, &s), 0);
    for (uint64_t i = 0; i < 4; i++)
        assert_int_equal(pub_one(t, 1, i, 0), 0);
    assert_int_equal(pub_one(t, 1, 4, 0), SHMOBJ_EFULL);
    assert_int_equal(pub_one(t, 1, 4, 5 * TEST_MS), SHMOBJ_ETIMEDOUT);
    shmobj_topic_msg m[4];
    unsigned n;
    assert_int_equal(shmobj_topic_take_batch(s, m, 4, &n, 0), 0);
    assert_int_equal(n, 4);
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(((const struct tmsg *)m[i].data)->n, i);
    /* taken but held: still no room */
    assert_int_equal(pub_one(t, 1, 4, 0), SHMOBJ_EFULL);
    assert_int_equal(shmobj_topic_release(s, &m[1]), 0); /* 0 and 1 */
    assert_int_equal(pub_one(t, 1, 4, 0), 0);
    assert_int_equal(pub_one(t, 1, 5, 0), 0);
    assert_int_equal(pub_one(t, 1, 6, 0), SHMOBJ_EFULL);
    shmobj_topic_unsubscribe(s); /* leaving releases what it held */
    assert_int_equal(pub_one(t, 1, 6, 0), 0);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "b"), 0);
}

static void test_topic_overwrite_missed_counted(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(8, 2, 8, SHMOBJ_TOPIC_OVERWRITE);
    assert_int_equal(shmobj_topic_create(f->seg, "o", &cfg, &t), 0);
    shmobj_topic_sub *slow, *held;
    assert_int_equal(shmobj_topic_subscribe(t, &slow), 0);
    assert_int_equal(shmobj_topic_subscribe(t, &held), 0);
    /* `held` keeps message 0 in hand: it must never be overwritten */
    assert_int_equal(pub_one(t, 1, 0, 0), 0);
    shmobj_topic_msg h0;
    assert_int_equal(shmobj_topic_try_take(held, &h0), 0);
    for (uint64_t i = 1; i < 8; i++)
        assert_int_equal(pub_one(t, 1, i, 0), 0);
    assert_int_equal(pub_one(t, 1, 8, 0), SHMOBJ_EFULL);
    assert_int_equal(((const struct tmsg *)h0.data)->n, 0);
    assert_int_equal(shmobj_topic_release(held, &h0), 0);
    shmobj_topic_unsubscribe(held);
    for (uint64_t i = 8; i < 100; i++)
        assert_int_equal(pub_one(t, 1, i, 0), 0);
    /* the slow subscriber: every message is taken or counted as missed, in
     * order, never a silent gap */
    uint64_t got = 0, missed = 0, expect = 0;
    shmobj_topic_msg m;
    while (shmobj_topic_try_take(slow, &m) == 0) {
        const struct tmsg *x = m.data;
        assert_int_equal(x->n, expect + m.missed);
        assert_int_equal(x->check, tmsg_check(1, x->n));
        assert_int_equal(m.seq, x->n);
        missed += m.missed;
        expect = x->n + 1;
        got++;
        assert_int_equal(shmobj_topic_release(slow, &m), 0);
    }
    assert_int_equal(got + missed, 100);
    assert_true(missed > 0);
    shmobj_topic_stats st;
    assert_int_equal(shmobj_topic_stats_get(t, &st), 0);
    assert_int_equal(st.missed, missed);
    shmobj_topic_unsubscribe(slow);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "o"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
}

/* A topic destroyed under blocked callers: a taker asleep on an empty topic
 * and a publisher waiting on a full one both wake with SHMOBJ_ESTALE. */
static void test_topic_destroy_wakes_blocked_callers_stale(void **state)
{
    struct fixture *f = *state;
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(2, 0, 8, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "w", &cfg, &t), 0);
    shmobj_topic_sub *full;
    assert_int_equal(shmobj_topic_subscribe(t, &full), 0);
    assert_int_equal(pub_one(t, 1, 0, 0), 0);
    assert_int_equal(pub_one(t, 1, 1, 0), 0);
    pid_t taker = fork();
    if (taker == 0) {
        shmobj_topic_sub *s;
        shmobj_topic_msg m;
        if (shmobj_topic_subscribe(t, &s) != 0)
            _exit(1);
        shmobj_topic_spin_set(s, 0);
        _exit(shmobj_topic_take(s, &m, 20 * SEC) == SHMOBJ_ESTALE ? 0 : 2);
    }
    pid_t pub = fork();
    if (pub == 0)
        _exit(pub_one(t, 1, 2, 20 * SEC) == SHMOBJ_ESTALE ? 0 : 3);
    /* both asleep (or about to be): then destroy */
    for (unsigned i = 0; i < 2000; i++) {
        if (atomic_load(&t->hdr->sub_waiters) == 1 &&
            atomic_load(&t->hdr->pub_waiters) == 1)
            break;
        test_sleep_ms(1);
    }
    assert_int_equal(shmobj_topic_destroy(f->seg, "w"), 0);
    assert_int_equal(test_child_wait(taker), 0);
    assert_int_equal(test_child_wait(pub), 0);
    shmobj_topic_unsubscribe(full);
    shmobj_topic_close(t);
}

/* ---- 1,024 subscribers ---------------------------------------------------------- */

static void test_topic_subscribers_1024_then_full(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(16, 0, 1024, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "k", &cfg, &t), 0);
    shmobj_topic_sub **s = calloc(1024, sizeof *s);
    for (unsigned i = 0; i < 1024; i++)
        assert_int_equal(shmobj_topic_subscribe(t, &s[i]), 0);
    shmobj_topic_sub *extra;
    assert_int_equal(shmobj_topic_subscribe(t, &extra), SHMOBJ_EFULL);
    for (uint64_t k = 0; k < 3; k++)
        assert_int_equal(pub_one(t, 2, k, 0), 0);
    for (unsigned i = 0; i < 1024; i++)
        for (uint64_t k = 0; k < 3; k++) {
            shmobj_topic_msg m;
            assert_int_equal(shmobj_topic_try_take(s[i], &m), 0);
            assert_int_equal(((const struct tmsg *)m.data)->n, k);
            assert_int_equal(shmobj_topic_release(s[i], &m), 0);
        }
    shmobj_topic_unsubscribe(s[500]);
    assert_int_equal(shmobj_topic_subscribe(t, &s[500]), 0);
    for (unsigned i = 0; i < 1024; i++)
        shmobj_topic_unsubscribe(s[i]);
    free(s);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "k"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
}

/* ---- the pollable descriptor -------------------------------------------------- */

static void test_topic_notify_fd_readable_after_publish(void **state)
{
    struct fixture *f = *state;
    shmobj_topic *t;
    assert_int_equal(shmobj_topic_create(f->seg, "n", NULL, &t), 0);
    shmobj_topic_sub *s;
    assert_int_equal(shmobj_topic_subscribe(t, &s), 0);
    int fd;
    int rc = shmobj_topic_notify_fd(s, &fd);
    if (rc == SHMOBJ_ENOTSUP) {
        shmobj_topic_unsubscribe(s);
        shmobj_topic_close(t);
        skip();
    }
    assert_int_equal(rc, 0);
    assert_int_equal(shmobj_topic_notify_arm(s), 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0);
    pid_t pid = fork();
    if (pid == 0) {
        shmobj_topic *c;
        if (shmobj_topic_open(f->seg, "n", &c) != 0)
            _exit(1);
        _exit(pub_one(c, 3, 1, SEC) == 0 ? 0 : 2);
    }
    assert_int_equal(poll(&p, 1, 5000), 1);
    assert_int_equal(test_child_wait(pid), 0);
    shmobj_topic_msg m;
    assert_int_equal(shmobj_topic_try_take(s, &m), 0);
    assert_int_equal(shmobj_topic_release(s, &m), 0);
    /* armed with a message already there: readable at once */
    assert_int_equal(pub_one(t, 3, 2, 0), 0);
    assert_int_equal(shmobj_topic_notify_arm(s), 0);
    assert_int_equal(poll(&p, 1, 0), 1);
    shmobj_topic_unsubscribe(s);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "n"), 0);
}

/* ---- many processes ------------------------------------------------------------ */

/* Shared books of a multi-process test. */
#define MAXP 8
struct book {
    _Atomic unsigned joined;  /* subscribers ready */
    _Atomic unsigned go;
    _Atomic uint64_t acked[MAXP];    /* publishes acknowledged per publisher */
    _Atomic uint64_t seen[MAXP][MAXP]; /* [sub][pub] messages taken in order */
    _Atomic unsigned fail[MAXP];
    _Atomic unsigned stop;
};

struct run {
    struct fixture *f;
    struct book *bk;
    const char *topic;
    unsigned id;
    unsigned pubs;
    uint64_t count;   /* per publisher */
    const char *step; /* to stall at, or NULL */
    unsigned nth;
    enum test_stall_action action;
    bool subscribe_too;
};

static bool wait_flag(_Atomic unsigned *w, unsigned v)
{
    for (unsigned i = 0; i < 20000; i++) {
        if (atomic_load(w) >= v)
            return true;
        test_sleep_ms(1);
    }
    return false;
}

/* A subscriber: takes until it has count messages of every publisher,
 * checking per-publisher order, the total order (seq grows by one plus
 * what was missed) and every byte. */
static int sub_main(struct run *r, shmobj_topic *t, shmobj_topic_sub *s)
{
    uint64_t next[MAXP] = {0};
    uint64_t total = 0, want = r->count * r->pubs, lastseq = 0;
    bool first = true;
    while (total < want) {
        shmobj_topic_msg m[8];
        unsigned n;
        int rc = shmobj_topic_take_batch(s, m, 8, &n, 10 * SEC);
        if (rc != 0)
            return 10 + (rc < 0 ? -rc : rc);
        for (unsigned i = 0; i < n; i++) {
            const struct tmsg *x = m[i].data;
            if (m[i].len != sizeof *x || x->pub >= r->pubs ||
                x->check != tmsg_check(x->pub, x->n))
                return 3;
            if (!first && m[i].seq != lastseq + 1 + m[i].missed)
                return 4;
            if (m[i].missed != 0)
                return 5; /* block policy: nothing lost */
            first = false;
            lastseq = m[i].seq;
            if (x->n != next[x->pub])
                return 6; /* a duplicate or a gap of that publisher */
            next[x->pub]++;
            atomic_store(&r->bk->seen[r->id][x->pub], next[x->pub]);
            total++;
        }
        if (shmobj_topic_release(s, &m[n - 1]) != 0)
            return 7;
    }
    (void)t;
    return 0;
}

static int pub_main(struct run *r, shmobj_topic *t)
{
    for (uint64_t i = 0; i < r->count; i++) {
        int rc = pub_one(t, r->id, i, 10 * SEC);
        if (rc != 0)
            return 20 + (rc < 0 ? -rc : rc);
        atomic_store(&r->bk->acked[r->id], i + 1);
    }
    return 0;
}

/* Publisher id r->id (0..pubs-1) and, with subscribe_too, a subscriber
 * with the same id; others are subscribers only (ids from pubs). */
static int worker(void *arg)
{
    struct run *r = arg;
    shmobj_topic *t;
    if (shmobj_topic_open(r->f->seg, r->topic, &t) != 0)
        return 1;
    bool pub = r->id < r->pubs;
    shmobj_topic_sub *s = NULL;
    if (r->step != NULL)
        test_stall_arm(r->step, r->nth, r->action, 0);
    if (!pub || r->subscribe_too) {
        if (shmobj_topic_subscribe(t, &s) != 0)
            return 2;
        atomic_fetch_add(&r->bk->joined, 1);
    }
    if (!wait_flag(&r->bk->go, 1))
        return 8;
    int rc = 0;
    if (pub && s != NULL) {
        /* publish and take in turns, so a block policy never waits on us */
        struct run pr = *r;
        uint64_t nx[MAXP] = {0}, total = 0, want = r->count * r->pubs;
        for (uint64_t i = 0; i < r->count || total < want;) {
            if (i < r->count) {
                rc = pub_one(t, r->id, i, 0);
                if (rc == 0) {
                    atomic_store(&r->bk->acked[r->id], ++i);
                } else if (rc != SHMOBJ_EFULL) {
                    return 20 + (rc < 0 ? -rc : rc);
                }
            }
            shmobj_topic_msg m;
            int trc = shmobj_topic_take(s, &m, i < r->count ? 0 : 10 * SEC);
            if (trc == SHMOBJ_EEMPTY)
                continue;
            if (trc != 0)
                return 30 + (trc < 0 ? -trc : trc);
            const struct tmsg *x = m.data;
            if (x->pub >= r->pubs || x->n != nx[x->pub] ||
                x->check != tmsg_check(x->pub, x->n))
                return 31;
            nx[x->pub]++;
            total++;
            if (shmobj_topic_release(s, &m) != 0)
                return 32;
        }
        (void)pr;
        shmobj_topic_unsubscribe(s);
    } else if (pub) {
        rc = pub_main(r, t);
    } else {
        rc = sub_main(r, t, s);
        shmobj_topic_unsubscribe(s);
    }
    shmobj_topic_close(t);
    return rc;
}

static void test_topic_fanout_three_publishers_exactly_once(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(32, 0, 16, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "fan", &cfg, &t), 0);
    struct book *bk = shared_alloc(sizeof *bk);
    struct run r[6];
    pid_t pid[6];
    for (unsigned i = 0; i < 6; i++) {
        r[i] = (struct run){.f = f, .bk = bk, .topic = "fan", .id = i,
                            .pubs = 3, .count = 3000};
        pid[i] = test_child_start(worker, &r[i], 60);
    }
    assert_true(wait_flag(&bk->joined, 3));
    atomic_store(&bk->go, 1);
    for (unsigned i = 0; i < 6; i++)
        assert_int_equal(test_child_wait(pid[i]), 0);
    for (unsigned s = 3; s < 6; s++)
        for (unsigned p = 0; p < 3; p++)
            assert_int_equal(atomic_load(&bk->seen[s][p]), 3000);
    assert_int_equal(shmobj_topic_repair(t, NULL), 0);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "fan"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    munmap(bk, sizeof *bk);
}

/* The overwrite policy under real concurrency: two publisher processes,
 * three subscriber processes of which two are slowed down; each subscriber
 * sees one order (every seq is the previous + 1 + what it was told it
 * missed), every publisher's messages in its order without duplicates, and
 * takes + missed = everything published after it joined. */
struct ow_book {
    _Atomic unsigned joined, go, pubs_done;
    _Atomic uint64_t got[3], missed[3];
};

static int ow_sub(shmobj_topic *t, struct ow_book *bk, unsigned id)
{
    shmobj_topic_sub *s;
    if (shmobj_topic_subscribe(t, &s) != 0)
        return 1;
    shmobj_topic_spin_set(s, 0);
    atomic_fetch_add(&bk->joined, 1);
    if (!wait_flag(&bk->go, 1))
        return 2;
    uint64_t next[2] = {0, 0}, last = 0, got = 0, missed = 0;
    bool first = true;
    for (;;) {
        shmobj_topic_msg m;
        int rc = shmobj_topic_take(s, &m, 50 * TEST_MS);
        if (rc == SHMOBJ_ETIMEDOUT && atomic_load(&bk->pubs_done) == 2) {
            /* nothing more will come: count what was dropped at the end */
            if (shmobj_topic_try_take(s, &m) == SHMOBJ_EEMPTY)
                break;
            continue;
        }
        if (rc == SHMOBJ_ETIMEDOUT)
            continue;
        if (rc != 0)
            return 3;
        const struct tmsg *x = m.data;
        if (x->pub >= 2 || x->check != tmsg_check(x->pub, x->n))
            return 4;
        if (first ? m.seq != m.missed : m.seq != last + 1 + m.missed)
            return 5;
        if (x->n < next[x->pub])
            return 6; /* out of order or twice */
        next[x->pub] = x->n + 1;
        first = false;
        last = m.seq;
        got++;
        missed += m.missed;
        if (id != 0 && got % 7 == 0)
            test_sleep_ms(1); /* slow */
        if (shmobj_topic_release(s, &m) != 0)
            return 7;
    }
    atomic_store(&bk->got[id], got);
    atomic_store(&bk->missed[id], missed);
    shmobj_topic_unsubscribe(s);
    return 0;
}

static void test_topic_overwrite_processes_counted(void **state)
{
    struct fixture *f = *state;
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(16, 0, 8, SHMOBJ_TOPIC_OVERWRITE);
    assert_int_equal(shmobj_topic_create(f->seg, "ow", &cfg, &t), 0);
    struct ow_book *bk = shared_alloc(sizeof *bk);
    pid_t subs[3], pubs[2];
    for (unsigned i = 0; i < 3; i++) {
        subs[i] = fork();
        if (subs[i] == 0) {
            alarm(60);
            _exit(ow_sub(t, bk, i));
        }
    }
    assert_true(wait_flag(&bk->joined, 3));
    atomic_store(&bk->go, 1);
    for (unsigned p = 0; p < 2; p++) {
        pubs[p] = fork();
        if (pubs[p] == 0) {
            alarm(60);
            for (uint64_t i = 0; i < 3000; i++)
                if (pub_one(t, p, i, SEC) != 0)
                    _exit(1);
            atomic_fetch_add(&bk->pubs_done, 1);
            _exit(0);
        }
    }
    for (unsigned p = 0; p < 2; p++)
        assert_int_equal(test_child_wait(pubs[p]), 0);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(test_child_wait(subs[i]), 0);
    shmobj_topic_stats st;
    assert_int_equal(shmobj_topic_stats_get(t, &st), 0);
    for (unsigned i = 0; i < 3; i++)
        /* a subscriber's last message may come after what it missed, so
         * takes + missed is everything up to its last message */
        assert_true(atomic_load(&bk->got[i]) + atomic_load(&bk->missed[i]) <= 6000 &&
                    atomic_load(&bk->got[i]) + atomic_load(&bk->missed[i]) +
                            16 >= 6000);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "ow"), 0);
    munmap(bk, sizeof *bk);
}

/* ---- dead processes -------------------------------------------------------------- */

static void test_topic_dead_subscriber_released_by_repair(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(4, 1, 8, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "d", &cfg, &t), 0);
    uint64_t b1 = used_blocks(f->seg);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        shmobj_topic_sub *s;
        shmobj_topic_msg m;
        if (shmobj_topic_subscribe(t, &s) != 0)
            _exit(1);
        if (write(pfd[1], "j", 1) != 1)
            _exit(2);
        if (shmobj_topic_take(s, &m, 10 * SEC) != 0) /* held, never released */
            _exit(3);
        raise(SIGKILL);
    }
    char c;
    assert_int_equal(read(pfd[0], &c, 1), 1);
    assert_int_equal(pub_one(t, 1, 0, 0), 0);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    for (uint64_t i = 1; i < 4; i++)
        assert_int_equal(pub_one(t, 1, i, 0), 0);
    /* the dead subscriber holds message 0: the publisher judges it after
     * its stall bound and goes on */
    assert_int_equal(pub_one(t, 1, 4, 2 * SEC), 0);
    for (uint64_t i = 5; i < 20; i++)
        assert_int_equal(pub_one(t, 1, i, 0), 0);
    shmobj_topic_stats st;
    assert_int_equal(shmobj_topic_stats_get(t, &st), 0);
    assert_int_equal(st.subscribers, 0);
    /* kept: what the ring has not reclaimed yet, nothing else */
    assert_true(st.retained >= 1 && st.retained <= 4);
    assert_int_equal(used_blocks(f->seg), b1 + st.retained + st.spares);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "d"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    close(pfd[0]);
    close(pfd[1]);
}

static void test_topic_dead_publisher_loan_freed_by_repair(void **state)
{
    struct fixture *f = *state;
    shmobj_topic *t;
    assert_int_equal(shmobj_topic_create(f->seg, "l", NULL, &t), 0);
    uint64_t b0 = used_blocks(f->seg);
    pid_t pid = fork();
    if (pid == 0) {
        shmobj_topic_loan loan;
        if (shmobj_topic_loan_get(t, 1000, &loan) != 0)
            _exit(1);
        raise(SIGKILL);
    }
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    assert_int_equal(used_blocks(f->seg), b0 + 1);
    unsigned freed = 0;
    assert_int_equal(shmobj_topic_repair(t, &freed), 0);
    assert_int_equal(freed, 1);
    assert_int_equal(used_blocks(f->seg), b0);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "l"), 0);
}

/* Publishers killed at every step of a publish (in the lock, between the
 * slot and head, after head): the next locker repairs, no partial message
 * is ever seen, every acknowledged publish is seen exactly once by every
 * live subscriber, and no block leaks. */
static void test_topic_kill_loop_publishers_subscribers(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(16, 2, 32, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "kl", &cfg, &t), 0);
    uint64_t b1 = used_blocks(f->seg);
    static const char *const steps[] = {
        "topic.publish.locked", "topic.publish.slot", "topic.publish.head",
        "topic.loan.recorded", "topic.reclaim.freed", "topic.take.read",
        "topic.take.claimed", "topic.release.held", "topic.join.recorded",
        "topic.reclaim.spared", "topic.loan.reused",
    };
    enum { ROUNDS = 22 };
    shmobj_topic_sub *s;
    assert_int_equal(shmobj_topic_subscribe(t, &s), 0); /* the live one */
    uint64_t seq_expect = 0;
    for (unsigned round = 0; round < ROUNDS; round++) {
        const char *step = steps[round % (sizeof steps / sizeof *steps)];
        int pfd[2];
        assert_int_equal(pipe(pfd), 0);
        pid_t pid = fork();
        if (pid == 0) {
            close(pfd[0]);
            test_stall_arm(step, 1 + round % 3, TEST_STALL_KILL, 0);
            shmobj_topic_sub *cs;
            if (shmobj_topic_subscribe(t, &cs) != 0)
                _exit(1);
            for (uint64_t i = 0; i < 40; i++) {
                if (pub_one(t, 9, round * 1000 + i, SEC) != 0)
                    _exit(2);
                /* acknowledged: tell the parent */
                uint8_t b = 1;
                if (write(pfd[1], &b, 1) != 1)
                    _exit(3);
                shmobj_topic_msg m;
                while (shmobj_topic_try_take(cs, &m) == 0)
                    shmobj_topic_release(cs, &m);
            }
            _exit(0);
        }
        close(pfd[1]);
        /* the parent takes from its live subscriber while the child works */
        uint64_t acked = 0, got = 0;
        for (;;) {
            uint8_t buf[64];
            ssize_t k = read(pfd[0], buf, sizeof buf);
            if (k > 0)
                acked += (uint64_t)k;
            shmobj_topic_msg m;
            while (shmobj_topic_take(s, &m, 0) == 0) {
                const struct tmsg *x = m.data;
                assert_int_equal(x->check, tmsg_check(x->pub, x->n));
                assert_int_equal(m.seq, seq_expect);
                assert_int_equal(x->n, round * 1000 + got);
                seq_expect++;
                got++;
                assert_int_equal(shmobj_topic_release(s, &m), 0);
            }
            if (k <= 0)
                break;
        }
        close(pfd[0]);
        test_child_wait(pid);
        /* what the child published before it died, after its last ack */
        shmobj_topic_msg m;
        while (shmobj_topic_take(s, &m, 0) == 0) {
            const struct tmsg *x = m.data;
            assert_int_equal(m.seq, seq_expect);
            assert_int_equal(x->n, round * 1000 + got);
            seq_expect++;
            got++;
            assert_int_equal(shmobj_topic_release(s, &m), 0);
        }
        assert_true(got >= acked);
        assert_true(got <= acked + 1);
    }
    unsigned freed;
    assert_int_equal(shmobj_topic_repair(t, &freed), 0);
    shmobj_topic_stats st;
    assert_int_equal(shmobj_topic_stats_get(t, &st), 0);
    assert_int_equal(st.subscribers, 1);
    assert_int_equal(st.loans, 0);
    /* every block is a kept message: none leaked by the dead */
    assert_int_equal(used_blocks(f->seg), b1 + st.retained + st.spares);
    shmobj_topic_unsubscribe(s);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "kl"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
}

/* ---- a process stopped at every step ------------------------------------------------ */

/* One process is stopped at `step` while two others publish and take;
 * resumed, all three finish and every subscriber saw every message of
 * every publisher exactly once, in one order. Four processes on one CPU
 * (pinned): more processes than CPUs. */
static void stall_case(struct fixture *f, const char *step, unsigned nth,
                       uint32_t capacity)
{
    uint64_t b0 = used_blocks(f->seg);
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(capacity, 2, 16, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "st", &cfg, &t), 0);
    struct book *bk = shared_alloc(sizeof *bk);
    struct run r[4];
    pid_t pid[4];
    for (unsigned i = 0; i < 4; i++) {
        r[i] = (struct run){.f = f, .bk = bk, .topic = "st", .id = i,
                            .pubs = 2, .count = 300, .subscribe_too = true,
                            .action = TEST_STALL_STOP};
        if (i == 0) {
            r[i].step = step;
            r[i].nth = nth;
        }
        pid[i] = test_child_start(worker, &r[i], 60);
    }
    /* the stalled one may stop before everyone joined (a join step: the
     * others wait for the lock), or once they work */
    int stopped = -1;
    bool went = false;
    for (unsigned ms = 0; ms < 20000 && stopped != 1; ms++) {
        if (!went && atomic_load(&bk->joined) == 4) {
            atomic_store(&bk->go, 1);
            went = true;
        }
        int st;
        stopped = test_stall_wait_stopped(pid[0], 1, &st);
        if (stopped == 0)
            fail_msg("%s: the process ended without stopping there", step);
    }
    if (stopped != 1)
        fail_msg("%s: the process did not stop there", step);
    test_stall_resume(pid[0]);
    if (!went) {
        assert_true(wait_flag(&bk->joined, 4));
        atomic_store(&bk->go, 1);
    }
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(test_child_wait(pid[i]), 0);
    assert_int_equal(shmobj_topic_repair(t, NULL), 0);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "st"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    munmap(bk, sizeof *bk);
}

static void test_topic_stall_every_step_others_finish(void **state)
{
    struct fixture *f = *state;
    test_stall_pin(0);
    static const struct {
        const char *step;
        unsigned nth;
        uint32_t capacity;
    } cases[] = {
        {"topic.join.locked", 1, 16},    {"topic.join.recorded", 1, 16},
        {"topic.loan.recorded", 5, 16},  {"topic.publish.locked", 5, 16},
        {"topic.publish.slot", 7, 16},   {"topic.publish.head", 9, 16},
        {"topic.reclaim.spared", 5, 16},
        {"topic.loan.reused", 4, 16},    {"topic.take.read", 11, 16},
        {"topic.take.claimed", 13, 16},  {"topic.release.held", 17, 16},
        {"topic.leave.locked", 1, 16},   {"topic.leave.cleared", 1, 16},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof *cases; i++)
        stall_case(f, cases[i].step, cases[i].nth, cases[i].capacity);
}

/* Wake-ups of sleeping takers: a taker stopped just after it said it
 * would sleep (topic.take.sleepy) while a message is published takes it
 * once resumed; then, 21 times, the taker goes to sleep and one message is
 * published: the first publish after a taker went to sleep wakes it, so
 * each take returns within a fraction of the 100 ms slice that a lost
 * wake-up costs (the median is checked, not each round: a loaded machine
 * may delay one). */
struct sleepy_book {
    _Atomic unsigned joined, fail;
    _Atomic uint64_t pub_ns, lat_ns[21];
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_topic_sleeping_taker_woken_by_first_publish(void **state)
{
    struct fixture *f = *state;
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(16, 0, 8, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "sl", &cfg, &t), 0);
    struct sleepy_book *bk = shared_alloc(sizeof *bk);
    pid_t pid = fork();
    if (pid == 0) {
        shmobj_topic_sub *s;
        if (shmobj_topic_subscribe(t, &s) != 0)
            _exit(1);
        shmobj_topic_spin_set(s, 0); /* straight to sleep */
        atomic_store(&bk->joined, 1);
        test_stall_arm("topic.take.sleepy", 1, TEST_STALL_STOP, 0);
        for (uint64_t i = 0; i < 22; i++) {
            shmobj_topic_msg m;
            if (shmobj_topic_take(s, &m, 10 * SEC) != 0)
                _exit(2);
            uint64_t now = mono_ns();
            if (((const struct tmsg *)m.data)->n != i)
                _exit(3);
            if (i > 0)
                atomic_store(&bk->lat_ns[i - 1], now - atomic_load(&bk->pub_ns));
            shmobj_topic_release(s, &m);
        }
        shmobj_topic_unsubscribe(s);
        _exit(0);
    }
    assert_true(wait_flag(&bk->joined, 1));
    int st = 0;
    assert_int_equal(test_stall_wait_stopped(pid, 20000, &st), 1);
    assert_int_equal(pub_one(t, 0, 0, SEC), 0);
    test_stall_resume(pid);
    for (uint64_t i = 1; i < 22; i++) {
        test_sleep_ms(20); /* it takes message i - 1 and sleeps again */
        atomic_store(&bk->pub_ns, mono_ns());
        assert_int_equal(pub_one(t, 0, i, SEC), 0);
        while (atomic_load(&bk->lat_ns[i - 1]) == 0 && waitpid(pid, &st, WNOHANG) == 0)
            test_sleep_ms(1);
    }
    assert_int_equal(test_child_wait(pid), 0);
    uint64_t lat[21];
    for (unsigned i = 0; i < 21; i++)
        lat[i] = atomic_load(&bk->lat_ns[i]);
    qsort(lat, 21, sizeof *lat, cmp_u64);
    print_message("  wake-up after a publish: median %llu us, worst %llu us\n",
                  (unsigned long long)lat[10] / 1000, (unsigned long long)lat[20] / 1000);
    assert_true(lat[10] < 50 * 1000000ull);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "sl"), 0);
    munmap(bk, sizeof *bk);
}

/* Two takers asleep and the publisher, all on one CPU: the one publish
 * that clears sleepy must wake both (a wake of one would leave the other
 * to its 100 ms slice), and a taker that went back to sleep after the
 * other's wake-up must be seen by the next publish. Medians per taker. */
struct sleepy2_book {
    _Atomic unsigned joined;
    _Atomic uint64_t pub_ns, lat_ns[2][15];
};

static void test_topic_two_sleeping_takers_one_cpu_both_woken(void **state)
{
    struct fixture *f = *state;
    cpu_set_t was;
    assert_int_equal(sched_getaffinity(0, sizeof was, &was), 0);
    test_stall_pin(0); /* the children inherit it */
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(16, 0, 8, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "sl2", &cfg, &t), 0);
    struct sleepy2_book *bk = shared_alloc(sizeof *bk);
    pid_t pid[2];
    for (unsigned w = 0; w < 2; w++) {
        pid[w] = fork();
        if (pid[w] == 0) {
            shmobj_topic_sub *s;
            if (shmobj_topic_subscribe(t, &s) != 0)
                _exit(1);
            shmobj_topic_spin_set(s, 0); /* straight to sleep */
            atomic_fetch_add(&bk->joined, 1);
            for (uint64_t i = 0; i < 15; i++) {
                shmobj_topic_msg m;
                if (shmobj_topic_take(s, &m, 10 * SEC) != 0)
                    _exit(2);
                uint64_t now = mono_ns();
                if (((const struct tmsg *)m.data)->n != i)
                    _exit(3);
                atomic_store(&bk->lat_ns[w][i], now - atomic_load(&bk->pub_ns));
                shmobj_topic_release(s, &m);
            }
            shmobj_topic_unsubscribe(s);
            _exit(0);
        }
    }
    assert_true(wait_flag(&bk->joined, 2));
    int st = 0;
    for (uint64_t i = 0; i < 15; i++) {
        test_sleep_ms(20); /* both take message i - 1 and sleep again */
        atomic_store(&bk->pub_ns, mono_ns());
        assert_int_equal(pub_one(t, 0, i, SEC), 0);
        for (unsigned w = 0; w < 2; w++)
            while (atomic_load(&bk->lat_ns[w][i]) == 0 && waitpid(pid[w], &st, WNOHANG) == 0)
                test_sleep_ms(1);
    }
    for (unsigned w = 0; w < 2; w++) {
        assert_int_equal(test_child_wait(pid[w]), 0);
        uint64_t lat[15];
        for (unsigned i = 0; i < 15; i++)
            lat[i] = atomic_load(&bk->lat_ns[w][i]);
        qsort(lat, 15, sizeof *lat, cmp_u64);
        print_message("  taker %u: wake-up after a publish: median %llu us, worst %llu us\n", w,
                      (unsigned long long)lat[7] / 1000, (unsigned long long)lat[14] / 1000);
        assert_true(lat[7] < 50 * 1000000ull);
    }
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "sl2"), 0);
    munmap(bk, sizeof *bk);
    assert_int_equal(sched_setaffinity(0, sizeof was, &was), 0);
}

/* A publisher stopped in a reclaim that frees blocks (the spare records
 * full: blocks handed over by reference never take a spare back), while a
 * subscriber process goes on taking; resumed, every message arrives once
 * and in order, and no block is lost or freed twice. */
static void test_topic_stall_reclaim_freed_no_loss(void **state)
{
    struct fixture *f = *state;
    test_stall_pin(0);
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(8, 0, 8, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "rf", &cfg, &t), 0);
    uint64_t b1 = used_blocks(f->seg);
    struct book *bk = shared_alloc(sizeof *bk);
    pid_t sub = fork();
    if (sub == 0) {
        shmobj_topic_sub *s;
        if (shmobj_topic_subscribe(t, &s) != 0)
            _exit(1);
        atomic_store(&bk->joined, 1);
        for (uint64_t i = 0; i < 60; i++) {
            shmobj_topic_msg m;
            if (shmobj_topic_take(s, &m, 10 * SEC) != 0)
                _exit(2);
            if (((const struct tmsg *)m.data)->n != i)
                _exit(3);
            shmobj_topic_release(s, &m);
        }
        shmobj_topic_unsubscribe(s);
        _exit(0);
    }
    assert_true(wait_flag(&bk->joined, 1));
    pid_t pub = fork();
    if (pub == 0) {
        test_stall_arm("topic.reclaim.freed", 1, TEST_STALL_STOP, 0);
        for (uint64_t i = 0; i < 60; i++) {
            shmobj_ref r;
            void *p;
            if (shmobj_arena_alloc(f->seg, sizeof(struct tmsg), 16, &r, &p) != 0)
                _exit(1);
            struct tmsg m = {.pub = 1, .check = tmsg_check(1, i), .n = i};
            memcpy(p, &m, sizeof m);
            if (shmobj_topic_publish_ref(t, r, sizeof m, 10 * SEC) != 0)
                _exit(2);
        }
        _exit(0);
    }
    assert_int_equal(test_stall_wait_stopped(pub, 20000, NULL), 1);
    test_sleep_ms(100); /* the subscriber takes what is there */
    test_stall_resume(pub);
    assert_int_equal(test_child_wait(pub), 0);
    assert_int_equal(test_child_wait(sub), 0);
    assert_int_equal(shmobj_topic_repair(t, NULL), 0);
    shmobj_topic_stats st;
    assert_int_equal(shmobj_topic_stats_get(t, &st), 0);
    assert_int_equal(st.spares, 16);
    assert_int_equal(used_blocks(f->seg), b1 + st.retained + st.spares);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "rf"), 0);
    munmap(bk, sizeof *bk);
}

/* A publisher stopped while it moves a slow subscriber forward (overwrite
 * policy): the subscriber keeps taking, and what it takes plus what it is
 * told it missed is every message, in order. */
static void test_topic_stall_overwrite_skip_counted(void **state)
{
    struct fixture *f = *state;
    test_stall_pin(0);
    shmobj_topic *t;
    shmobj_topic_config cfg = cfg_of(8, 0, 8, SHMOBJ_TOPIC_OVERWRITE);
    assert_int_equal(shmobj_topic_create(f->seg, "sk", &cfg, &t), 0);
    shmobj_topic_sub *s;
    assert_int_equal(shmobj_topic_subscribe(t, &s), 0);
    pid_t pid = fork();
    if (pid == 0) {
        test_stall_arm("topic.skip.moved", 2, TEST_STALL_STOP, 0);
        for (uint64_t i = 0; i < 200; i++)
            if (pub_one(t, 1, i, SEC) != 0)
                _exit(1);
        _exit(0);
    }
    assert_int_equal(test_stall_wait_stopped(pid, 20000, NULL), 1);
    /* a second publisher cannot go on (the stopped one holds the lock);
     * the subscriber takes what is there meanwhile */
    uint64_t got = 0, missed = 0, expect = 0;
    shmobj_topic_msg m;
    while (shmobj_topic_try_take(s, &m) == 0) {
        const struct tmsg *x = m.data;
        assert_int_equal(x->n, expect + m.missed);
        missed += m.missed;
        expect = x->n + 1;
        got++;
        assert_int_equal(shmobj_topic_release(s, &m), 0);
    }
    test_stall_resume(pid);
    assert_int_equal(test_child_wait(pid), 0);
    while (shmobj_topic_try_take(s, &m) == 0) {
        const struct tmsg *x = m.data;
        assert_int_equal(x->n, expect + m.missed);
        missed += m.missed;
        expect = x->n + 1;
        got++;
        assert_int_equal(shmobj_topic_release(s, &m), 0);
    }
    assert_int_equal(got + missed, 200);
    shmobj_topic_unsubscribe(s);
    shmobj_topic_close(t);
    assert_int_equal(shmobj_topic_destroy(f->seg, "sk"), 0);
}

/* ---- damage ------------------------------------------------------------------------ */

/* Random damage to the topic's shared bytes: every call returns a code,
 * none hangs or crashes (the child is killed by an alarm if one hangs). */
static int damage_main(void *arg)
{
    struct fixture *f = arg;
    uint64_t rng = 0x1234567 ^ (uint64_t)getpid();
    for (unsigned round = 0; round < 300; round++) {
        shmobj_topic *t;
        shmobj_topic_config cfg = cfg_of(8, 2, 4, round & 1);
        if (shmobj_topic_create(f->seg, "dm", &cfg, &t) != 0)
            return 1;
        shmobj_topic_sub *s = NULL;
        (void)shmobj_topic_subscribe(t, &s);
        for (uint64_t i = 0; i < 5; i++)
            (void)pub_one(t, 1, i, 0);
        uint8_t *bytes = (uint8_t *)t->hdr;
        uint64_t len = t->hdr->bytes;
        for (unsigned k = 0; k < 4; k++) {
            uint64_t at = test_xorshift(&rng) % len;
            /* leave the lock word alone: a damaged owner token is the
             * lock's own test (it waits out its bound) */
            if (at >= offsetof(struct shmobj__topic_hdr, lock) &&
                at < offsetof(struct shmobj__topic_hdr, lock) + SHMOBJ__OS_LOCK_SIZE)
                continue;
            bytes[at] ^= (uint8_t)(1u + test_xorshift(&rng) % 255);
        }
        shmobj_topic *o = NULL;
        (void)shmobj_topic_open(f->seg, "dm", &o);
        shmobj_topic_close(o);
        for (unsigned i = 0; i < 6; i++) {
            shmobj_topic_msg m;
            if (s != NULL && shmobj_topic_try_take(s, &m) == 0)
                (void)shmobj_topic_release(s, &m);
            (void)pub_one(t, 1, 100 + i, 0);
        }
        shmobj_topic_stats st;
        (void)shmobj_topic_stats_get(t, &st);
        (void)shmobj_topic_repair(t, NULL);
        shmobj_topic_sub *s2 = NULL;
        if (shmobj_topic_subscribe(t, &s2) == 0)
            shmobj_topic_unsubscribe(s2);
        shmobj_topic_unsubscribe(s);
        shmobj_topic_close(t);
        /* the damaged block is not given back (its bytes may name blocks
         * that are not its own): the name only */
        (void)shmobj_segment_root_del(f->seg, "dm");
    }
    return 0;
}

static void test_topic_damaged_records_no_hang(void **state)
{
    struct fixture *f = *state;
    pid_t pid = test_child_start(damage_main, f, 120);
    assert_int_equal(test_child_wait(pid), 0);
}

/* Handles outlive their segment, and a subscription its topic handle: the
 * segment handle, the topic handle and a subscription closed in each of
 * the 6 orders; after the segment's close, calls through the others
 * answer SHMOBJ_ESTALE; the message published before is there for
 * another handle. */
static void test_topic_close_orders_every_handle_kind(void **state)
{
    struct fixture *f = *state;
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                     {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    shmobj_topic *keep;
    shmobj_topic_config cfg = cfg_of(16, 0, 8, SHMOBJ_TOPIC_BLOCK);
    assert_int_equal(shmobj_topic_create(f->seg, "orders", &cfg, &keep), 0);
    for (int o = 0; o < 6; o++) {
        shmobj_segment *seg;
        shmobj_topic *t;
        shmobj_topic_sub *s;
        shmobj_topic_msg msg;
        assert_int_equal(shmobj_segment_open(f->name, SHMOBJ_BACKEND_SHM, 0, &seg), 0);
        assert_int_equal(shmobj_topic_open(seg, "orders", &t), 0);
        assert_int_equal(shmobj_topic_subscribe(t, &s), 0);
        assert_int_equal(shmobj_topic_publish(t, "m", 1, 0), 0);
        bool seg_closed = false, t_closed = false, s_closed = false;
        for (int k = 0; k < 3; k++) {
            switch (orders[o][k]) {
            case 0:
                shmobj_segment_close(seg);
                seg_closed = true;
                break;
            case 1:
                shmobj_topic_close(t);
                t_closed = true;
                break;
            default:
                shmobj_topic_unsubscribe(s);
                s_closed = true;
                break;
            }
            if (seg_closed && !t_closed)
                assert_int_equal(shmobj_topic_publish(t, "x", 1, 0), SHMOBJ_ESTALE);
            if (seg_closed && !s_closed)
                assert_int_equal(shmobj_topic_try_take(s, &msg), SHMOBJ_ESTALE);
        }
    }
    shmobj_topic_close(keep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(test_topic_create_open_destroy_roundtrip),
        T(test_topic_close_orders_every_handle_kind),
        T(test_topic_create_bad_input_refused),
        T(test_topic_history_replay_order),
        T(test_topic_loan_read_in_place),
        T(test_topic_block_full_times_out),
        T(test_topic_overwrite_missed_counted),
        T(test_topic_destroy_wakes_blocked_callers_stale),
        T(test_topic_subscribers_1024_then_full),
        T(test_topic_notify_fd_readable_after_publish),
        T(test_topic_fanout_three_publishers_exactly_once),
        T(test_topic_overwrite_processes_counted),
        T(test_topic_dead_subscriber_released_by_repair),
        T(test_topic_dead_publisher_loan_freed_by_repair),
        T(test_topic_kill_loop_publishers_subscribers),
        T(test_topic_stall_every_step_others_finish),
        T(test_topic_stall_reclaim_freed_no_loss),
        T(test_topic_sleeping_taker_woken_by_first_publish),
        T(test_topic_two_sleeping_takers_one_cpu_both_woken),
        T(test_topic_stall_overwrite_skip_counted),
        T(test_topic_damaged_records_no_hang),
#undef T
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
