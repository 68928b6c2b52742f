/* Waiting for named roots: shmobj_segment_root_wait() and the timed opens
 * of queues and maps built on it (a process that starts before the
 * creator of what it needs), and open_or_create of queues and maps (peers
 * that start in any order, racing to create one queue and one map). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "segment.h"
#include "shmobj.h"
#include "test-util.h"

#define MiB (UINT64_C(1) << 20)
#define WAIT_NS (10000 * TEST_MS) /* bound of every wait that must succeed */

static shmobj_segment *create_small(const char *name)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 4 * MiB;
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    return seg;
}

static void drop(shmobj_segment *seg, const char *name)
{
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* What a child that waits for a root is told and reports. */
struct waiter {
    const char *seg_name;
    const char *root;
    int kind; /* 0: root_wait, 1: queue_open_timed, 2: map_open_timed */
};

/* Voluntary context switches of this (single-threaded) process so far. */
static long switches(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_nvcsw;
}

/* Child: open the segment, then wait for the root. Exit 0 when found and
 * usable, 1 on an error, 2 when the wait took many sleeps (a poll), 3 when
 * it ended only near its timeout (no wake-up came). */
static int waiter_main(void *arg)
{
    const struct waiter *w = arg;
    shmobj_segment *seg;
    if (shmobj_segment_open(w->seg_name, SHMOBJ_BACKEND_SHM, WAIT_NS, &seg) != 0)
        return 1;
    long before = switches();
    uint64_t start = shmobj__os_now_ns();
    int rc = 1;
    if (w->kind == 0) {
        shmobj_ref ref = 0;
        rc = shmobj_segment_root_wait(seg, w->root, WAIT_NS, &ref);
        int64_t x = 0;
        shmobj_view v;
        if (rc == 0)
            rc = shmobj_obj_get(seg, ref, &v) == 0 &&
                         shmobj_int_get(&v, &x) == 0 && x == 42
                     ? 0
                     : 1;
    } else if (w->kind == 1) {
        shmobj_queue *q;
        rc = shmobj_queue_open_timed(seg, w->root, WAIT_NS, &q);
        shmobj_ref m = 0;
        if (rc == 0) {
            rc = shmobj_queue_take_timed(q, &m, WAIT_NS);
            shmobj_queue_close(q);
        }
    } else {
        shmobj_map *m;
        rc = shmobj_map_open_timed(seg, w->root, WAIT_NS, &m);
        char v[8] = {0};
        size_t vlen = 0;
        if (rc == 0) {
            /* The map is published by its create, before the creator's
             * set: the key may come a moment after the open. That wait
             * is not the open's, so it is left out of the figures. */
            long sw0 = switches();
            uint64_t t0 = shmobj__os_now_ns(), until = t0 + (uint64_t)WAIT_NS;
            while ((rc = shmobj_map_get(m, "k", 1, v, sizeof v, &vlen)) ==
                       SHMOBJ_ENOTFOUND &&
                   shmobj__os_now_ns() < until)
                test_sleep_ms(1);
            before += switches() - sw0;
            start += shmobj__os_now_ns() - t0;
            if (rc == 0 && (vlen != 1 || v[0] != 'v'))
                rc = 1;
            shmobj_map_close(m);
        }
    }
    long slept = switches() - before;
    uint64_t took = shmobj__os_now_ns() - start;
    shmobj_segment_close(seg);
    if (rc != 0)
        return 1;
    /* Woken by the change, not found by a last look at the deadline: */
    if (took >= (uint64_t)WAIT_NS / 2)
        return 3;
    /* The creator publishes about 200 ms after the child attached: a
     * wait that polled every few milliseconds would have slept dozens of
     * times; one woken by the change sleeps a handful (the futex, a lock
     * wait or two, the queue's take). */
    return slept < 20 ? 0 : 2;
}

/* Start a waiter (B), wait until it is attached, give it time to fall
 * asleep, then let `publish` create what it waits for (A). */
static void b_first(int kind, void (*publish)(shmobj_segment *, const char *))
{
    char name[96];
    test_name(name, sizeof name, "bfirst");
    shmobj_segment *seg = create_small(name);
    struct waiter w = {name, "late", kind};
    pid_t pid = test_child_start(waiter_main, &w, 30);
    assert_int_equal(shmobj_segment_wait_attached(seg, 1, WAIT_NS), 0);
    test_sleep_ms(200);
    publish(seg, "late");
    assert_int_equal(test_child_wait(pid), 0);
    drop(seg, name);
}

static void publish_int(shmobj_segment *seg, const char *root)
{
    shmobj_ref ref;
    assert_int_equal(shmobj_obj_put_int(seg, 42, &ref), 0);
    /* another root first: a change of the directory that is not the
     * awaited name must not end the wait */
    shmobj_ref other;
    assert_int_equal(shmobj_obj_put_int(seg, 7, &other), 0);
    assert_int_equal(shmobj_segment_root_add(seg, "unrelated", other), 0);
    assert_int_equal(shmobj_segment_root_add(seg, root, ref), 0);
}

static void publish_queue(shmobj_segment *seg, const char *root)
{
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(seg, root, 8, 0, &q), 0);
    shmobj_ref ref;
    assert_int_equal(shmobj_obj_put_int(seg, 1, &ref), 0);
    assert_int_equal(shmobj_queue_put(q, ref), 0);
    shmobj_queue_close(q);
}

static void publish_map(shmobj_segment *seg, const char *root)
{
    shmobj_map *m;
    assert_int_equal(shmobj_map_create(seg, root, &m), 0);
    assert_int_equal(shmobj_map_set(m, "k", 1, "v", 1), 0);
    shmobj_map_close(m);
}

/* B starts first and sleeps in root_wait; A's later add wakes it, and
 * it returns the reference A published (not the unrelated root's). */
static void test_root_wait_woken_by_later_add(void **state)
{
    (void)state;
    b_first(0, publish_int);
}

/* The timed opens: B first, woken by the creation of the queue or map,
 * and the handle works (a message taken, a key read). */
static void test_queue_open_timed_woken_by_later_create(void **state)
{
    (void)state;
    b_first(1, publish_queue);
}

static void test_map_open_timed_woken_by_later_create(void **state)
{
    (void)state;
    b_first(2, publish_map);
}

/* A root that exists is returned at once, also with a timeout of 0. */
static void test_root_wait_present_immediate(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "now");
    shmobj_segment *seg = create_small(name);
    shmobj_ref ref, got = 0;
    assert_int_equal(shmobj_obj_put_int(seg, 42, &ref), 0);
    assert_int_equal(shmobj_segment_root_add(seg, "here", ref), 0);
    assert_int_equal(shmobj_segment_root_wait(seg, "here", 0, &got), 0);
    assert_int_equal(got, ref);
    got = 0;
    assert_int_equal(shmobj_segment_root_wait(seg, "here", SHMOBJ_FOREVER, &got), 0);
    assert_int_equal(got, ref);
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(seg, "q", 8, 0, &q), 0);
    shmobj_queue_close(q);
    assert_int_equal(shmobj_queue_open_timed(seg, "q", 0, &q), 0);
    shmobj_queue_close(q);
    shmobj_map *m;
    assert_int_equal(shmobj_map_create(seg, "m", &m), 0);
    shmobj_map_close(m);
    assert_int_equal(shmobj_map_open_timed(seg, "m", 0, &m), 0);
    shmobj_map_close(m);
    drop(seg, name);
}

/* An absent root: SHMOBJ_ETIMEDOUT at once with 0, after the timeout
 * otherwise; a root that was deleted counts as absent. Bad arguments are
 * refused before any wait. */
static void test_root_wait_absent_timedout(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "absent");
    shmobj_segment *seg = create_small(name);
    shmobj_ref got = 0;
    assert_int_equal(shmobj_segment_root_wait(seg, "none", 0, &got),
                     SHMOBJ_ETIMEDOUT);
    assert_int_equal(shmobj_segment_root_wait(seg, "none", 20 * TEST_MS, &got),
                     SHMOBJ_ETIMEDOUT);
    shmobj_ref ref;
    assert_int_equal(shmobj_obj_put_int(seg, 1, &ref), 0);
    assert_int_equal(shmobj_segment_root_add(seg, "gone", ref), 0);
    assert_int_equal(shmobj_segment_root_del(seg, "gone"), 0);
    assert_int_equal(shmobj_segment_root_wait(seg, "gone", 20 * TEST_MS, &got),
                     SHMOBJ_ETIMEDOUT);
    shmobj_queue *q;
    shmobj_map *m;
    assert_int_equal(shmobj_queue_open_timed(seg, "none", 20 * TEST_MS, &q),
                     SHMOBJ_ETIMEDOUT);
    assert_int_equal(shmobj_map_open_timed(seg, "none", 20 * TEST_MS, &m),
                     SHMOBJ_ETIMEDOUT);
    assert_int_equal(shmobj_segment_root_wait(NULL, "x", 0, &got), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_segment_root_wait(seg, "", 0, &got), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_segment_root_wait(seg, "x", 0, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_open_timed(seg, NULL, 0, &q), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_map_open_timed(seg, "x", 0, NULL), SHMOBJ_EINVAL);
    drop(seg, name);
}

/* Damaged bytes cannot stretch a wait past its timeout: a directory full
 * of unterminated names and a root_seq that moves under the waiter (as a
 * damaged or foreign writer would make it) still end in SHMOBJ_ETIMEDOUT
 * (the cmocka program's own timeout catches a hang). */
struct churn {
    shmobj_segment *seg;
    _Atomic int stop;
};

static int churn_main(void *arg)
{
    struct churn *c = arg;
    while (!atomic_load(&c->stop)) {
        atomic_fetch_add(&c->seg->hdr->root_seq, 1);
        shmobj__os_futex_wake(&c->seg->hdr->root_seq, INT32_MAX);
        test_sleep_ms(1);
    }
    return 0;
}

static void test_root_wait_damaged_bounded(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "damaged");
    shmobj_segment *seg = create_small(name);
    struct shmobj__seg_root *r =
        (struct shmobj__seg_root *)((uint8_t *)seg->hdr + SHMOBJ__SEG_ROOTS_OFF);
    for (unsigned i = 0; i < SHMOBJ__SEG_ROOTS; i++) {
        memset(r[i].name, 'x', sizeof r[i].name); /* no NUL anywhere */
        r[i].ref = UINT64_C(0xdeadbeefdeadbeef);
    }
    shmobj_ref got = 0;
    assert_int_equal(shmobj_segment_root_wait(seg, "absent", 20 * TEST_MS, &got),
                     SHMOBJ_ETIMEDOUT);
    struct churn c = {seg, 0};
    struct test_thread t;
    assert_int_equal(test_thread_start(&t, churn_main, &c), 0);
    assert_int_equal(shmobj_segment_root_wait(seg, "absent", 50 * TEST_MS, &got),
                     SHMOBJ_ETIMEDOUT);
    atomic_store(&c.stop, 1);
    assert_int_equal(test_thread_wait(&t), 0);
    memset(r, 0, SHMOBJ__SEG_ROOTS * sizeof *r);
    drop(seg, name);
}

/* Peers racing: each of PEERS processes calls open_or_create for one
 * queue and one map at the same moment (all attached first), puts one
 * message and sets one key. Every call succeeds, and the queue and the
 * map the parent opens afterwards hold all the messages and keys: they
 * all had the same queue and map. */
#define PEERS 4
#define RACE_ROUNDS 12

struct peer {
    const char *seg_name;
    char qname[32];
    char mname[32];
    int id;
    int start_fd;  /* read end of the start pipe */
    int start_wfd; /* its write end, which the peer closes */
};

static int peer_main(void *arg)
{
    const struct peer *p = arg;
    shmobj_segment *seg;
    if (shmobj_segment_open(p->seg_name, SHMOBJ_BACKEND_SHM, WAIT_NS, &seg) != 0)
        return 1;
    /* start together: the parent closes the pipe once every peer is
     * attached, and the end of file reaches them all at once */
    close(p->start_wfd);
    char c;
    int rc = read(p->start_fd, &c, 1) == 0 ? 0 : SHMOBJ_ESYS;
    shmobj_queue *q = NULL;
    shmobj_map *m = NULL;
    if (rc == 0)
        rc = shmobj_queue_open_or_create(seg, p->qname, 16, 0, &q);
    if (rc == 0)
        rc = shmobj_map_open_or_create(seg, p->mname, &m);
    shmobj_ref ref;
    if (rc == 0)
        rc = shmobj_obj_put_int(seg, p->id, &ref);
    if (rc == 0)
        rc = shmobj_queue_put(q, ref);
    char key = (char)('a' + p->id);
    if (rc == 0)
        rc = shmobj_map_set(m, &key, 1, "1", 1);
    shmobj_queue_close(q);
    shmobj_map_close(m);
    shmobj_segment_close(seg);
    return rc == 0 ? 0 : 10 - rc;
}

static void test_queue_map_open_or_create_race_one_each(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "race");
    shmobj_segment *seg = create_small(name);
    for (int round = 0; round < RACE_ROUNDS; round++) {
        struct peer p[PEERS];
        pid_t pid[PEERS];
        int start[2];
        assert_int_equal(pipe(start), 0);
        for (int i = 0; i < PEERS; i++) {
            p[i].start_fd = start[0];
            p[i].start_wfd = start[1];
            p[i].seg_name = name;
            snprintf(p[i].qname, sizeof p[i].qname, "q%d", round);
            snprintf(p[i].mname, sizeof p[i].mname, "m%d", round);
            p[i].id = i;
            pid[i] = test_child_start(peer_main, &p[i], 30);
        }
        assert_int_equal(shmobj_segment_wait_attached(seg, PEERS, WAIT_NS), 0);
        close(start[1]);
        close(start[0]);
        for (int i = 0; i < PEERS; i++)
            assert_int_equal(test_child_wait(pid[i]), 0);
        shmobj_queue *q;
        shmobj_map *m;
        assert_int_equal(shmobj_queue_open(seg, p[0].qname, &q), 0);
        assert_int_equal(shmobj_map_open(seg, p[0].mname, &m), 0);
        uint64_t n = 0;
        assert_int_equal(shmobj_queue_count(q, &n), 0);
        assert_int_equal(n, PEERS);
        assert_int_equal(shmobj_map_count(m, &n), 0);
        assert_int_equal(n, PEERS);
        for (int i = 0; i < PEERS; i++) {
            char key = (char)('a' + i);
            assert_int_equal(shmobj_map_contains(m, &key, 1), 0);
        }
        shmobj_queue_close(q);
        shmobj_map_close(m);
    }
    drop(seg, name);
}

/* open_or_create on an existing object opens it (the existing queue's
 * capacity wins), and on a root of another kind gives SHMOBJ_ETYPE, as
 * the timed opens do. */
static void test_queue_map_open_or_create_etype(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "etype");
    shmobj_segment *seg = create_small(name);
    shmobj_queue *q;
    shmobj_map *m;
    assert_int_equal(shmobj_queue_open_or_create(seg, "q", 8, 0, &q), 0);
    shmobj_queue_close(q);
    assert_int_equal(shmobj_queue_open_or_create(seg, "q", 64, 0, &q), 0);
    uint32_t cap = 0;
    assert_int_equal(shmobj_queue_capacity(q, &cap), 0);
    assert_int_equal(cap, 8);
    shmobj_queue_close(q);
    assert_int_equal(shmobj_map_open_or_create(seg, "m", &m), 0);
    assert_int_equal(shmobj_map_set(m, "k", 1, "v", 1), 0);
    shmobj_map_close(m);
    assert_int_equal(shmobj_map_open_or_create(seg, "m", &m), 0);
    assert_int_equal(shmobj_map_contains(m, "k", 1), 0);
    shmobj_map_close(m);

    shmobj_ref raw;
    assert_int_equal(shmobj_obj_put_int(seg, 5, &raw), 0);
    assert_int_equal(shmobj_segment_root_add(seg, "raw", raw), 0);
    assert_int_equal(shmobj_queue_open_or_create(seg, "raw", 8, 0, &q), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_map_open_or_create(seg, "raw", &m), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_queue_open_or_create(seg, "m", 8, 0, &q), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_map_open_or_create(seg, "q", &m), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_queue_open_timed(seg, "m", 0, &q), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_map_open_timed(seg, "q", 0, &m), SHMOBJ_ETYPE);
    /* bad arguments are refused before anything is created */
    assert_int_equal(shmobj_queue_open_or_create(seg, "new", 3, 0, &q), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_open_or_create(seg, "q", 8, 1, &q), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_map_open_or_create(seg, NULL, &m), SHMOBJ_EINVAL);
    shmobj_ref ref;
    assert_int_equal(shmobj_segment_root_get(seg, "new", &ref), SHMOBJ_ENOTFOUND);
    drop(seg, name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_root_wait_woken_by_later_add),
        cmocka_unit_test(test_queue_open_timed_woken_by_later_create),
        cmocka_unit_test(test_map_open_timed_woken_by_later_create),
        cmocka_unit_test(test_root_wait_present_immediate),
        cmocka_unit_test(test_root_wait_absent_timedout),
        cmocka_unit_test(test_root_wait_damaged_bounded),
        cmocka_unit_test(test_queue_map_open_or_create_race_one_each),
        cmocka_unit_test(test_queue_map_open_or_create_etype),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
