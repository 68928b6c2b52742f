/* Oversubscription: 2, 4, 8 and 16 processes on 2 CPUs, all taking the
 * same locks (the segment's heap lock, a map's shard locks, a queue's
 * claims, a mutable container's lock), must all get through, and the
 * result must be exact: every key present with its own value, every
 * message taken exactly once, every append in place and in its writer's
 * order. Progress is what is checked, not speed: each child runs under an
 * alarm, and the test's timeout bounds the whole.
 *
 * The children are pinned to the first two CPUs the process may use (k
 * modulo 2), so on any machine the runnable processes outnumber the CPUs
 * up to eight to one: a lock holder is preempted while others want its lock,
 * the case where a waiter that burns the CPU its holder needs, or a
 * release that waits for a waiter the scheduler has not run yet, stalls
 * everyone. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "shmobj.h"
#include "test-util.h"
#include "test-shared.h"

#define MiB (UINT64_C(1) << 20)
/* The most processes of a test, and the counts every test runs with. */
#define PROCS 16
static const int procs_counts[] = {2, 4, 8, 16};
#define COUNTS (sizeof procs_counts / sizeof procs_counts[0])
/* What a child may take before its alarm fails the test: far more than a
 * loaded 2-CPU machine needs (a few seconds for all four tests). */
#define CHILD_SECONDS 120

struct fixture {
    char name[96];
    shmobj_segment *seg;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 32 * MiB;
    o.max_size = 512 * MiB;
    test_name(f->name, sizeof f->name, "oversub");
    assert_int_equal(shmobj_segment_create(f->name, &o, &f->seg), 0);
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

/* Pin the calling process to the k % 2-th CPU it may run on (all of them
 * when only one is allowed). */
static void pin_two(int k)
{
    cpu_set_t set, one;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    int n = CPU_COUNT(&set) < 2 ? CPU_COUNT(&set) : 2;
    if (n <= 0)
        return;
    int want = k % n;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set) || want-- != 0)
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        (void)sched_setaffinity(0, sizeof one, &one);
        return;
    }
}

/* The start line in a shared page: each child pins itself, counts itself
 * ready and sleeps in short naps until the parent lets all go at once. */
struct start {
    _Atomic int ready, go;
    _Atomic uint64_t taken; /* queue test: messages taken so far */
    _Atomic uint32_t seen[]; /* queue test: times each message was taken */
};

static void child_line_up(struct start *st, int k)
{
    pin_two(k);
    atomic_fetch_add(&st->ready, 1);
    while (!atomic_load(&st->go))
        test_sleep_ms(1);
}

/* Start n children, let them go once all are lined up, then collect
 * them: each must exit 0 (an alarm is 128 + SIGALRM). */
static void run_children(struct start *st, int n, int (*fn)(void *), void **args)
{
    pid_t pid[PROCS];
    atomic_store(&st->ready, 0);
    atomic_store(&st->go, 0);
    for (int k = 0; k < n; k++)
        pid[k] = test_child_start(fn, args[k], CHILD_SECONDS);
    while (atomic_load(&st->ready) < n)
        test_sleep_ms(1);
    atomic_store(&st->go, 1);
    for (int k = 0; k < n; k++)
        assert_int_equal(test_child_wait(pid[k]), 0);
}

/* ---- the map: sets of disjoint keys ---------------------------------------- */

#define MAP_KEYS 16000

struct map_arg {
    struct fixture *f;
    struct start *st;
    const char *name;
    int k, n;
};

static void map_key(int i, char *buf)
{
    snprintf(buf, 24, "key-%08d", i);
}

static int map_writer(void *p)
{
    struct map_arg *a = p;
    shmobj_segment *seg;
    shmobj_map *m;
    if (shmobj_segment_open(a->f->name, SHMOBJ_BACKEND_SHM, 5000 * TEST_MS, &seg) != 0)
        return 1;
    if (shmobj_map_open(seg, a->name, &m) != 0)
        return 2;
    child_line_up(a->st, a->k);
    for (int i = MAP_KEYS * a->k / a->n; i < MAP_KEYS * (a->k + 1) / a->n; i++) {
        char key[24];
        int64_t v = (int64_t)i * 7 + 3;
        map_key(i, key);
        if (shmobj_map_set(m, key, strlen(key), &v, sizeof v) != 0)
            return 3;
    }
    shmobj_map_close(m);
    shmobj_segment_close(seg);
    return 0;
}

static void map_round(struct fixture *f, struct start *st, int n);

/* 2, 4, 8 and 16 writers on 2 CPUs, each setting its own part of 16,000
 * keys of one map: every key is there with its own value, and nothing
 * else is. */
static void test_oversub_map_sets_all_present(void **state)
{
    struct fixture *f = *state;
    struct start *st = shared_page(4096);
    for (size_t c = 0; c < COUNTS; c++)
        map_round(f, st, procs_counts[c]);
    munmap(st, 4096);
}

static void map_round(struct fixture *f, struct start *st, int n)
{
    char name[16];
    shmobj_map *m;
    snprintf(name, sizeof name, "m%d", n);
    assert_int_equal(shmobj_map_create(f->seg, name, &m), 0);
    struct map_arg a[PROCS];
    void *args[PROCS];
    for (int k = 0; k < n; k++) {
        a[k] = (struct map_arg){f, st, name, k, n};
        args[k] = &a[k];
    }
    run_children(st, n, map_writer, args);
    uint64_t count = 0;
    assert_int_equal(shmobj_map_count(m, &count), 0);
    assert_int_equal(count, MAP_KEYS);
    for (int i = 0; i < MAP_KEYS; i++) {
        char key[24];
        int64_t v = 0;
        size_t len = 0;
        map_key(i, key);
        assert_int_equal(shmobj_map_get(m, key, strlen(key), &v, sizeof v, &len), 0);
        assert_int_equal(len, sizeof v);
        assert_int_equal(v, (int64_t)i * 7 + 3);
    }
    assert_int_equal(shmobj_map_check(m), 0);
    shmobj_map_close(m);
}

/* ---- the queue: puts and takes ---------------------------------------------- */

/* Messages of a round; half the processes put them, half take them. */
#define Q_TOTAL 8000

struct queue_arg {
    struct fixture *f;
    struct start *st;
    const char *name;
    int k, n;
};

static int queue_child(void *p)
{
    struct queue_arg *a = p;
    shmobj_queue *q;
    int putters = a->n / 2;
    if (shmobj_queue_open(a->f->seg, a->name, &q) != 0)
        return 1;
    child_line_up(a->st, a->k);
    if (a->k < putters) {
        for (uint32_t id = (uint32_t)(Q_TOTAL * a->k / putters);
             id < (uint32_t)(Q_TOTAL * (a->k + 1) / putters); id++)
            if (shmobj_queue_put_copy(q, &id, sizeof id, 0, SHMOBJ_FOREVER, NULL) != 0)
                return 2;
    } else {
        /* take until every message was taken by someone */
        while (atomic_load(&a->st->taken) < Q_TOTAL) {
            shmobj_ref ref;
            int rc = shmobj_queue_take_timed(q, &ref, 10 * TEST_MS);
            if (rc == SHMOBJ_ETIMEDOUT)
                continue;
            if (rc != 0)
                return 3;
            void *data;
            size_t len;
            uint32_t id;
            if (shmobj_queue_msg_data(q, ref, &data, &len) != 0 || len != sizeof id)
                return 4;
            memcpy(&id, data, sizeof id);
            if (id >= Q_TOTAL)
                return 5;
            atomic_fetch_add(&a->st->seen[id], 1);
            atomic_fetch_add(&a->st->taken, 1);
            if (shmobj_queue_msg_done(q, ref) != 0)
                return 6;
        }
    }
    shmobj_queue_close(q);
    return 0;
}

static void queue_round(struct fixture *f, struct start *st, int n)
{
    char name[16];
    shmobj_queue *q;
    snprintf(name, sizeof name, "q%d", n);
    /* smaller than what one producer sends: producers wait for room too */
    assert_int_equal(shmobj_queue_create(f->seg, name, 256, 0, &q), 0);
    atomic_store(&st->taken, 0);
    for (uint32_t i = 0; i < Q_TOTAL; i++)
        atomic_store(&st->seen[i], 0);
    struct queue_arg a[PROCS];
    void *args[PROCS];
    for (int k = 0; k < n; k++) {
        a[k] = (struct queue_arg){f, st, name, k, n};
        args[k] = &a[k];
    }
    run_children(st, n, queue_child, args);
    assert_int_equal(atomic_load(&st->taken), Q_TOTAL);
    for (uint32_t i = 0; i < Q_TOTAL; i++)
        if (atomic_load(&st->seen[i]) != 1)
            fail_msg("%d processes: message %u taken %u times", n, i,
                     atomic_load(&st->seen[i]));
    shmobj_ref ref;
    assert_int_equal(shmobj_queue_try_take(q, &ref), SHMOBJ_EEMPTY);
    shmobj_queue_close(q);
}

/* 1, 2, 4 and 8 producers and as many consumers on 2 CPUs, through one
 * queue: every message is taken exactly once. */
static void test_oversub_queue_every_message_once(void **state)
{
    struct fixture *f = *state;
    size_t bytes = sizeof(struct start) + Q_TOTAL * sizeof(_Atomic uint32_t);
    struct start *st = shared_page(bytes);
    for (size_t c = 0; c < COUNTS; c++)
        queue_round(f, st, procs_counts[c]);
    munmap(st, bytes);
}

/* ---- mutable containers: list appends, dict sets ----------------------------- */

/* Items of a round, shared out among its processes. */
#define LIST_TOTAL 8000
#define DICT_TOTAL 4000

struct mut_arg {
    shmobj_view c;
    struct start *st;
    int k, n;
};

static int list_appender(void *p)
{
    struct mut_arg *a = p;
    child_line_up(a->st, a->k);
    for (int64_t i = 0; i < LIST_TOTAL / a->n; i++)
        if (shmobj_mlist_append(&a->c, &SHMOBJ_VAL_INT((int64_t)a->k << 32 | i)) != 0)
            return 1;
    return 0;
}

static void list_round(struct fixture *f, struct start *st, int n)
{
    shmobj_ref r;
    shmobj_view l;
    assert_int_equal(shmobj_obj_put(f->seg, &SHMOBJ_VAL_MLIST(), &r), 0);
    assert_int_equal(shmobj_obj_get(f->seg, r, &l), 0);
    struct mut_arg a[PROCS];
    void *args[PROCS];
    for (int k = 0; k < n; k++) {
        a[k] = (struct mut_arg){l, st, k, n};
        args[k] = &a[k];
    }
    run_children(st, n, list_appender, args);
    size_t len = 0;
    assert_int_equal(shmobj_view_len(&l, &len), 0);
    assert_int_equal(len, (size_t)(LIST_TOTAL / n * n));
    int64_t next[PROCS] = {0};
    for (size_t i = 0; i < len; i++) {
        int64_t x = -1;
        assert_int_equal(shmobj_mlist_get_int(&l, i, &x), 0);
        int64_t k = x >> 32;
        assert_true(k >= 0 && k < n);
        /* each writer's items in its order, none twice, none skipped */
        assert_int_equal(x & 0xffffffff, next[k]);
        next[k]++;
    }
    for (int k = 0; k < n; k++)
        assert_int_equal(next[k], LIST_TOTAL / n);
    assert_int_equal(shmobj_obj_check(f->seg, r), 0);
    assert_int_equal(shmobj_obj_free(f->seg, r), 0);
}

/* 2, 4, 8 and 16 appenders on 2 CPUs: the list holds every item once,
 * each writer's items in its own order. */
static void test_oversub_mlist_appends_all_in_order(void **state)
{
    struct fixture *f = *state;
    struct start *st = shared_page(4096);
    for (size_t c = 0; c < COUNTS; c++)
        list_round(f, st, procs_counts[c]);
    munmap(st, 4096);
}

static int dict_setter(void *p)
{
    struct mut_arg *a = p;
    child_line_up(a->st, a->k);
    for (int64_t i = DICT_TOTAL * a->k / a->n; i < DICT_TOTAL * (a->k + 1) / a->n; i++)
        if (shmobj_mdict_set(&a->c, &SHMOBJ_VAL_INT(i), &SHMOBJ_VAL_INT(i * 7 + 3)) != 0)
            return 1;
    return 0;
}

static void dict_round(struct fixture *f, struct start *st, int n)
{
    shmobj_ref r;
    shmobj_view d;
    assert_int_equal(shmobj_obj_put(f->seg, &SHMOBJ_VAL_MDICT(), &r), 0);
    assert_int_equal(shmobj_obj_get(f->seg, r, &d), 0);
    struct mut_arg a[PROCS];
    void *args[PROCS];
    for (int k = 0; k < n; k++) {
        a[k] = (struct mut_arg){d, st, k, n};
        args[k] = &a[k];
    }
    run_children(st, n, dict_setter, args);
    size_t len = 0;
    assert_int_equal(shmobj_view_len(&d, &len), 0);
    assert_int_equal(len, DICT_TOTAL);
    for (int64_t i = 0; i < DICT_TOTAL; i++) {
        shmobj_view v;
        int64_t x = -1;
        assert_int_equal(shmobj_mdict_get(&d, &SHMOBJ_VAL_INT(i), &v), 0);
        assert_int_equal(shmobj_int_get(&v, &x), 0);
        assert_int_equal(x, i * 7 + 3);
    }
    assert_int_equal(shmobj_obj_check(f->seg, r), 0);
    assert_int_equal(shmobj_obj_free(f->seg, r), 0);
}

/* 2, 4, 8 and 16 setters on 2 CPUs, each its own part of 4,000 keys of
 * one mutable dict: every key holds its own value, and the dict no other
 * key. */
static void test_oversub_mdict_sets_all_present(void **state)
{
    struct fixture *f = *state;
    struct start *st = shared_page(4096);
    for (size_t c = 0; c < COUNTS; c++)
        dict_round(f, st, procs_counts[c]);
    munmap(st, 4096);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_oversub_map_sets_all_present, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversub_queue_every_message_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_oversub_mlist_appends_all_in_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_oversub_mdict_sets_all_present, setup, teardown),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
