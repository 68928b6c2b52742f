/* Watches (shmobj/watch.h): a map key or a mutable container changed by
 * another process wakes the watch's descriptor; other keys do not; a
 * destroyed map or a freed container is reported stale; the table's
 * limit, the reuse of a killed watcher's entries, the wait-set, timeouts
 * and bad inputs. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shmobj.h"
#include "step.h"
#include "test-util.h"

#define MiB (UINT64_C(1) << 20)
#define SEC (INT64_C(1000000000))

struct fixture {
    char name[96];
    shmobj_segment *seg;
    shmobj_map *map;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    test_name(f->name, sizeof f->name, "watch");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 4 * MiB;
    if (shmobj_segment_create(f->name, &o, &f->seg) != 0 ||
        shmobj_map_create(f->seg, "m", &f->map) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    shmobj_map_close(f->map);
    shmobj_segment_close(f->seg);
    shmobj_segment_destroy(f->name, SHMOBJ_BACKEND_SHM);
    free(f);
    return 0;
}

static bool readable(shmobj_watch *w, int ms)
{
    int fd;
    assert_int_equal(shmobj_watch_fd(w, &fd), 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void set_int(shmobj_map *m, const char *key, int64_t v)
{
    assert_int_equal(shmobj_map_set(m, key, strlen(key), &v, sizeof v), 0);
}

/* ---- a child that changes the map after a while ------------------------ */

struct change {
    shmobj_segment *seg;
    const char *key;
    int del;          /* delete instead of set */
    unsigned ms;      /* wait before the change */
    const char *name; /* when set: open the segment by this name instead */
};

static int change_later(void *arg)
{
    struct change *c = arg;
    shmobj_map *m;
    shmobj_segment *own = NULL;
    if (c->name != NULL && shmobj_segment_open(c->name, SHMOBJ_BACKEND_SHM, 0, &own) != 0)
        return 4;
    if (shmobj_map_open(own != NULL ? own : c->seg, "m", &m) != 0)
        return 1;
    test_sleep_ms(c->ms);
    int64_t v = 7;
    int rc = c->del ? shmobj_map_del(m, c->key, strlen(c->key))
                    : shmobj_map_set(m, c->key, strlen(c->key), &v, sizeof v);
    shmobj_map_close(m);
    shmobj_segment_close(own);
    return rc == 0 ? 0 : 2;
}

static void test_watch_map_key_set_by_child_wakes_poll(void **state)
{
    struct fixture *f = *state;
    shmobj_watch *w;
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w), 0);
    assert_false(readable(w, 0));
    assert_int_equal(shmobj_watch_consume(w), SHMOBJ_EEMPTY);
    struct change c = {f->seg, "k", 0, 100, NULL};
    pid_t pid = test_child_start(change_later, &c, 10);
    assert_true(readable(w, 5000));
    assert_int_equal(test_child_wait(pid), 0);
    assert_int_equal(shmobj_watch_consume(w), 0);
    /* consumed and armed again: quiet until the next change */
    assert_false(readable(w, 0));
    assert_int_equal(shmobj_watch_consume(w), SHMOBJ_EEMPTY);
    /* a replace by the same process, and a delete by another */
    set_int(f->map, "k", 8);
    assert_true(readable(w, 1000));
    assert_int_equal(shmobj_watch_consume(w), 0);
    c.del = 1;
    pid = test_child_start(change_later, &c, 10);
    assert_true(readable(w, 5000));
    assert_int_equal(test_child_wait(pid), 0);
    assert_int_equal(shmobj_watch_consume(w), 0);
    shmobj_watch_close(w);
}

static void test_watch_map_other_key_no_wake(void **state)
{
    struct fixture *f = *state;
    shmobj_watch *w;
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w), 0);
    /* other keys, from another process too */
    for (int i = 0; i < 200; i++) {
        char key[16];
        snprintf(key, sizeof key, "other-%d", i);
        set_int(f->map, key, i);
    }
    struct change c = {f->seg, "kk", 0, 0, NULL};
    assert_int_equal(test_child_wait(test_child_start(change_later, &c, 10)), 0);
    assert_int_equal(shmobj_map_del(f->map, "other-3", 7), 0);
    assert_false(readable(w, 100));
    assert_int_equal(shmobj_watch_consume(w), SHMOBJ_EEMPTY);
    /* an add to the key, then a clear of the map */
    int64_t r;
    assert_int_equal(shmobj_map_add(f->map, "k", 1, 5, &r), 0);
    assert_true(readable(w, 1000));
    assert_int_equal(shmobj_watch_consume(w), 0);
    assert_int_equal(shmobj_map_clear(f->map), 0);
    assert_true(readable(w, 1000));
    assert_int_equal(shmobj_watch_consume(w), 0);
    /* a delete of a key that is not there changes nothing */
    assert_int_equal(shmobj_map_del(f->map, "k", 1), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_watch_consume(w), SHMOBJ_EEMPTY);
    /* a batch of sets that includes the key */
    int64_t v = 1;
    shmobj_map_set_req reqs[2] = {{.key = "x", .key_len = 1, .value = &v, .value_len = 8},
                                  {.key = "k", .key_len = 1, .value = &v, .value_len = 8}};
    assert_int_equal(shmobj_map_set_many(f->map, reqs, 2), 0);
    assert_true(readable(w, 1000));
    assert_int_equal(shmobj_watch_consume(w), 0);
    shmobj_watch_close(w);
}

static void test_watch_map_destroyed_estale(void **state)
{
    struct fixture *f = *state;
    shmobj_watch *w;
    shmobj_ref ref;
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w), 0);
    assert_int_equal(shmobj_segment_root_get(f->seg, "m", &ref), 0);
    assert_int_equal(shmobj_segment_root_del(f->seg, "m"), 0);
    assert_int_equal(shmobj_arena_free(f->seg, ref), 0);
    /* woken, and told why, without waiting out the timeout */
    assert_true(readable(w, 1000));
    uint64_t t0 = now_ns();
    assert_int_equal(shmobj_watch_wait(w, 5 * SEC), SHMOBJ_ESTALE);
    assert_true(now_ns() - t0 < 1000 * 1000000ull);
    assert_int_equal(shmobj_watch_consume(w), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_watch_arm(w), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w), SHMOBJ_ESTALE);
    shmobj_watch_close(w);
}

/* ---- containers --------------------------------------------------------- */

static shmobj_ref make(shmobj_segment *seg, shmobj_value d, shmobj_view *v)
{
    shmobj_ref r;
    assert_int_equal(shmobj_obj_put(seg, &d, &r), 0);
    assert_int_equal(shmobj_obj_get(seg, r, v), 0);
    return r;
}

/* Woken by the change just made, then quiet once consumed (a macro: a
 * failure names the change's line). */
#define woken_once(w)                                                          \
    do {                                                                       \
        assert_true(readable((w), 1000));                                      \
        assert_int_equal(shmobj_watch_consume(w), 0);                          \
        assert_false(readable((w), 0));                                        \
    } while (0)

struct append {
    shmobj_segment *seg;
    shmobj_ref list;
};

static int append_later(void *arg)
{
    struct append *a = arg;
    shmobj_view l;
    if (shmobj_obj_get(a->seg, a->list, &l) != 0)
        return 1;
    test_sleep_ms(100);
    return shmobj_mlist_append(&l, &SHMOBJ_VAL_INT(42)) == 0 ? 0 : 2;
}

static void test_watch_container_changes_wake(void **state)
{
    struct fixture *f = *state;
    shmobj_view l, d, s;
    shmobj_ref lr = make(f->seg, SHMOBJ_VAL_MLIST(), &l);
    shmobj_ref dr = make(f->seg, SHMOBJ_VAL_MDICT(), &d);
    shmobj_ref sr = make(f->seg, SHMOBJ_VAL_MSET(), &s);
    shmobj_watch *wl, *wd, *ws;
    assert_int_equal(shmobj_watch_container(&l, &wl), 0);
    assert_int_equal(shmobj_watch_container(&d, &wd), 0);
    assert_int_equal(shmobj_watch_container(&s, &ws), 0);
    /* the list: an append by another process (without the lock), an
     * append that takes the lock (a string), a set, a pop */
    struct append a = {f->seg, lr};
    pid_t pid = test_child_start(append_later, &a, 10);
    assert_true(readable(wl, 5000));
    assert_int_equal(test_child_wait(pid), 0);
    assert_int_equal(shmobj_watch_consume(wl), 0);
    assert_int_equal(shmobj_mlist_append(&l, &SHMOBJ_VAL_STR("a string")), 0);
    woken_once(wl);
    assert_int_equal(shmobj_mlist_set(&l, 0, &SHMOBJ_VAL_INT(1)), 0);
    woken_once(wl);
    shmobj_ref popped;
    assert_int_equal(shmobj_mlist_pop(&l, -1, &popped), 0);
    woken_once(wl);
    if (popped != SHMOBJ_REF_NULL)
        assert_int_equal(shmobj_obj_free(f->seg, popped), 0);
    /* the dict: a set, an int add without the lock, a delete */
    assert_int_equal(shmobj_mdict_set(&d, &SHMOBJ_VAL_STR("n"), &SHMOBJ_VAL_INT(1)), 0);
    woken_once(wd);
    shmobj_key k;
    assert_int_equal(shmobj_key_init(&k, &SHMOBJ_VAL_STR("n")), 0);
    assert_int_equal(shmobj_mdict_int_add(&d, &k, 2, NULL), 0);
    woken_once(wd);
    assert_int_equal(shmobj_mut_delete(&d, &SHMOBJ_VAL_STR("n")), 0);
    woken_once(wd);
    /* the set, and a clear */
    assert_int_equal(shmobj_mset_add(&s, &SHMOBJ_VAL_INT(3)), 0);
    woken_once(ws);
    assert_int_equal(shmobj_mut_clear(&s), 0);
    woken_once(ws);
    /* none of these woke the others */
    assert_false(readable(wl, 0));
    assert_int_equal(shmobj_watch_consume(wl), SHMOBJ_EEMPTY);
    /* reads change nothing */
    assert_int_equal(shmobj_mut_contains(&s, &SHMOBJ_VAL_INT(3)), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_watch_consume(ws), SHMOBJ_EEMPTY);
    /* a freed container: woken, and stale */
    assert_int_equal(shmobj_obj_free(f->seg, dr), 0);
    assert_true(readable(wd, 1000));
    assert_int_equal(shmobj_watch_consume(wd), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_watch_wait(wd, SEC), SHMOBJ_ESTALE);
    shmobj_watch_close(wl);
    shmobj_watch_close(wd);
    shmobj_watch_close(ws);
    assert_int_equal(shmobj_obj_free(f->seg, lr), 0);
    assert_int_equal(shmobj_obj_free(f->seg, sr), 0);
}

/* Two containers built in one graph (one block, perhaps): a change of one
 * wakes its own watch only, the graph's free both. */
static void test_watch_containers_in_one_graph(void **state)
{
    struct fixture *f = *state;
    shmobj_value items[2] = {SHMOBJ_VAL_MLIST(), SHMOBJ_VAL_MDICT()};
    shmobj_view g, l, d;
    shmobj_ref gr = make(f->seg, SHMOBJ_VAL_LIST(items, 2), &g);
    assert_int_equal(shmobj_view_item(&g, 0, &l), 0);
    assert_int_equal(shmobj_view_item(&g, 1, &d), 0);
    shmobj_watch *wl, *wd;
    assert_int_equal(shmobj_watch_container(&l, &wl), 0);
    assert_int_equal(shmobj_watch_container(&d, &wd), 0);
    assert_int_equal(shmobj_mlist_append(&l, &SHMOBJ_VAL_INT(1)), 0);
    woken_once(wl);
    assert_int_equal(shmobj_watch_consume(wd), SHMOBJ_EEMPTY);
    assert_int_equal(shmobj_mdict_set(&d, &SHMOBJ_VAL_INT(1), &SHMOBJ_VAL_INT(2)), 0);
    woken_once(wd);
    assert_int_equal(shmobj_watch_consume(wl), SHMOBJ_EEMPTY);
    assert_int_equal(shmobj_obj_free(f->seg, gr), 0);
    assert_true(readable(wl, 1000));
    assert_true(readable(wd, 1000));
    assert_int_equal(shmobj_watch_consume(wl), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_watch_consume(wd), SHMOBJ_ESTALE);
    shmobj_watch_close(wl);
    shmobj_watch_close(wd);
}

/* ---- many watchers, the limit, a killed watcher ------------------------- */

static void test_watch_many_watchers_and_limit(void **state)
{
    struct fixture *f = *state;
    shmobj_watch *w[SHMOBJ_WATCH_MAX + 1];
    for (int i = 0; i < SHMOBJ_WATCH_MAX; i++)
        assert_int_equal(shmobj_watch_map_key(f->map, i % 2 ? "odd" : "even", i % 2 ? 3 : 4,
                                              &w[i]),
                         0);
    /* one past the table */
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w[SHMOBJ_WATCH_MAX]),
                     SHMOBJ_EFULL);
    set_int(f->map, "odd", 1);
    for (int i = 0; i < SHMOBJ_WATCH_MAX; i++) {
        assert_int_equal(readable(w[i], i % 2 ? 1000 : 0), i % 2);
        assert_int_equal(shmobj_watch_consume(w[i]), i % 2 ? 0 : SHMOBJ_EEMPTY);
    }
    /* a closed watch's entry is free again */
    shmobj_watch_close(w[5]);
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w[5]), 0);
    for (int i = 0; i < SHMOBJ_WATCH_MAX; i++)
        shmobj_watch_close(w[i]);
}

struct holder {
    shmobj_segment *seg;
    int n;
    int ready[2];
};

static int hold_watches(void *arg)
{
    struct holder *h = arg;
    shmobj_map *m;
    if (shmobj_map_open(h->seg, "m", &m) != 0)
        return 1;
    for (int i = 0; i < h->n; i++) {
        shmobj_watch *w;
        if (shmobj_watch_map_key(m, "k", 1, &w) != 0)
            return 2;
    }
    char c = 1;
    if (write(h->ready[1], &c, 1) != 1)
        return 3;
    for (;;)
        pause();
}

static void test_watch_killed_watcher_entries_reused(void **state)
{
    struct fixture *f = *state;
    struct holder h = {f->seg, SHMOBJ_WATCH_MAX, {-1, -1}};
    assert_int_equal(pipe(h.ready), 0);
    pid_t pid = test_child_start(hold_watches, &h, 20);
    char c;
    assert_int_equal(read(h.ready[0], &c, 1), 1);
    shmobj_watch *w;
    /* the child holds every entry: the table is full while it lives */
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w), SHMOBJ_EFULL);
    kill(pid, SIGKILL);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    /* its entries are taken back by whoever needs them */
    shmobj_watch *ws[SHMOBJ_WATCH_MAX];
    for (int i = 0; i < SHMOBJ_WATCH_MAX; i++)
        assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &ws[i]), 0);
    set_int(f->map, "k", 1);
    for (int i = 0; i < SHMOBJ_WATCH_MAX; i++) {
        assert_true(readable(ws[i], 1000));
        assert_int_equal(shmobj_watch_consume(ws[i]), 0);
        shmobj_watch_close(ws[i]);
    }
    close(h.ready[0]);
    close(h.ready[1]);
}

/* ---- the wait-set, timeouts ---------------------------------------------- */

static void test_watch_waitset_with_queue(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    shmobj_watch *w;
    shmobj_waitset *ws;
    int qtag, wtag;
    void *tags[4];
    size_t n;
    assert_int_equal(shmobj_queue_create(f->seg, "q", 16, 0, &q), 0);
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w), 0);
    assert_int_equal(shmobj_waitset_create(&ws), 0);
    assert_int_equal(shmobj_waitset_add_watch(NULL, w, &wtag), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_waitset_add_watch(ws, NULL, &wtag), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_waitset_add_queue(ws, q, &qtag), 0);
    assert_int_equal(shmobj_waitset_add_watch(ws, w, &wtag), 0);
    assert_int_equal(shmobj_waitset_wait(ws, 0, tags, 4, &n), SHMOBJ_ETIMEDOUT);
    /* the key set by another process, while we sleep */
    struct change c = {f->seg, "k", 0, 100, NULL};
    pid_t pid = test_child_start(change_later, &c, 10);
    assert_int_equal(shmobj_waitset_wait(ws, 5 * SEC, tags, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_ptr_equal(tags[0], &wtag);
    assert_int_equal(test_child_wait(pid), 0);
    /* ready until consumed */
    assert_int_equal(shmobj_waitset_wait(ws, 0, tags, 4, &n), 0);
    assert_int_equal(shmobj_watch_consume(w), 0);
    assert_int_equal(shmobj_waitset_wait(ws, 0, tags, 4, &n), SHMOBJ_ETIMEDOUT);
    /* a message, then both */
    shmobj_ref ref;
    assert_int_equal(shmobj_arena_alloc(f->seg, 16, 0, &ref, NULL), 0);
    assert_int_equal(shmobj_queue_put(q, ref), 0);
    assert_int_equal(shmobj_waitset_wait(ws, SEC, tags, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_ptr_equal(tags[0], &qtag);
    set_int(f->map, "k", 2);
    assert_int_equal(shmobj_waitset_wait(ws, SEC, tags, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_ptr_equal(tags[0], &qtag);
    assert_ptr_equal(tags[1], &wtag);
    assert_int_equal(shmobj_queue_try_take(q, &ref), 0);
    assert_int_equal(shmobj_arena_free(f->seg, ref), 0);
    shmobj_waitset_destroy(ws);
    shmobj_watch_close(w);
    shmobj_queue_close(q);
}

static void test_watch_wait_timeouts(void **state)
{
    struct fixture *f = *state;
    shmobj_watch *w;
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w), 0);
    assert_int_equal(shmobj_watch_wait(w, 0), SHMOBJ_ETIMEDOUT);
    uint64_t t0 = now_ns();
    assert_int_equal(shmobj_watch_wait(w, 250 * TEST_MS), SHMOBJ_ETIMEDOUT);
    uint64_t took = now_ns() - t0;
    assert_true(took >= 240 * 1000000ull && took < 2000 * 1000000ull);
    /* a change by another process (through a handle of its own) ends the
     * wait early; the wait does not consume it */
    struct change c = {f->seg, "k", 0, 100, f->name};
    pid_t pid = test_child_start(change_later, &c, 10);
    t0 = now_ns();
    assert_int_equal(shmobj_watch_wait(w, 5 * SEC), 0);
    assert_true(now_ns() - t0 < 3 * 1000000000ull);
    assert_int_equal(test_child_wait(pid), 0);
    assert_int_equal(shmobj_watch_wait(w, 0), 0);
    assert_int_equal(shmobj_watch_consume(w), 0);
    assert_int_equal(shmobj_watch_wait(w, 0), SHMOBJ_ETIMEDOUT);
    shmobj_watch_close(w);
}

/* A writer killed after it counted a change and before it wrote to the
 * watcher's FIFO: the descriptor stays quiet, but the wait's next look at
 * the counter (a slice of 100 ms) sees the change. */
static void die_at_count(const char *step)
{
    if (strcmp(step, "watch.changed.counted") == 0)
        raise(SIGKILL);
}

static int change_and_die(void *arg)
{
    shmobj__step_hook = die_at_count;
    return change_later(arg);
}

static void test_watch_writer_killed_before_wake_bounded(void **state)
{
    struct fixture *f = *state;
    shmobj_watch *w;
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w), 0);
    /* the wait is asleep when the writer counts and dies */
    struct change c = {f->seg, "k", 0, 150, NULL};
    pid_t pid = test_child_start(change_and_die, &c, 10);
    uint64_t t0 = now_ns();
    assert_int_equal(shmobj_watch_wait(w, 5 * SEC), 0);
    assert_true(now_ns() - t0 < 1000 * 1000000ull);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    /* the key's change was committed before the count */
    int64_t v = 0;
    size_t len = 0;
    assert_int_equal(shmobj_map_get(f->map, "k", 1, &v, sizeof v, &len), 0);
    assert_int_equal(v, 7);
    assert_int_equal(shmobj_watch_consume(w), 0);
    shmobj_watch_close(w);
}

/* Many writers on one key's entry, more processes than CPUs, all pinned to
 * one CPU, and one writer stopped at watch.changed.counted (its change
 * counted, its wake-up not yet written) while the others go on: every
 * round of the watcher's waits ends within the bound, and the change of
 * the stopped writer, once it is resumed and done, is not lost. */
enum { STALL_WRITERS = 5, STALL_SETS = 200 };

static void stop_at_count(const char *step)
{
    static int stopped;
    if (!stopped && strcmp(step, "watch.changed.counted") == 0) {
        stopped = 1;
        raise(SIGSTOP);
    }
}

static int writer_on_one_cpu(void *arg)
{
    struct change *c = arg;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    (void)sched_setaffinity(0, sizeof one, &one);
    shmobj_map *m;
    if (shmobj_map_open(c->seg, "m", &m) != 0)
        return 1;
    for (int64_t i = 0; i < (c->del ? 1 : STALL_SETS); i++)
        if (shmobj_map_set(m, c->key, strlen(c->key), &i, sizeof i) != 0)
            return 2;
    shmobj_map_close(m);
    return 0;
}

static int staller_on_one_cpu(void *arg)
{
    shmobj__step_hook = stop_at_count;
    return writer_on_one_cpu(arg);
}

static void test_watch_writers_on_one_cpu_one_stopped(void **state)
{
    struct fixture *f = *state;
    shmobj_watch *w;
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w), 0);
    struct change many = {f->seg, "k", 0, 0, NULL}, once = {f->seg, "k", 1, 0, NULL};
    pid_t stalled = test_child_start(staller_on_one_cpu, &once, 30);
    int st;
    /* stopped at the step: its change counted, its wake-up not written */
    assert_int_equal(waitpid(stalled, &st, WUNTRACED), stalled);
    assert_true(WIFSTOPPED(st));
    assert_int_equal(shmobj_watch_consume(w), 0); /* the counted change */
    pid_t pids[STALL_WRITERS];
    for (int i = 0; i < STALL_WRITERS; i++)
        pids[i] = test_child_start(writer_on_one_cpu, &many, 30);
    /* the others go on and wake the watcher, the stopped one aside */
    assert_int_equal(shmobj_watch_wait(w, 10 * SEC), 0);
    assert_int_equal(shmobj_watch_consume(w), 0);
    for (int i = 0; i < STALL_WRITERS; i++)
        assert_int_equal(test_child_wait(pids[i]), 0);
    (void)shmobj_watch_consume(w);
    assert_int_equal(shmobj_watch_consume(w), SHMOBJ_EEMPTY);
    /* resumed, it writes its wake-up and ends; nothing is counted twice
     * and no later change is missed */
    assert_int_equal(kill(stalled, SIGCONT), 0);
    assert_int_equal(test_child_wait(stalled), 0);
    assert_int_equal(shmobj_watch_consume(w), SHMOBJ_EEMPTY);
    set_int(f->map, "k", 99);
    assert_int_equal(shmobj_watch_wait(w, 5 * SEC), 0);
    assert_int_equal(shmobj_watch_consume(w), 0);
    assert_int_equal(shmobj_watch_consume(w), SHMOBJ_EEMPTY);
    shmobj_watch_close(w);
}

/* ---- bad inputs ---------------------------------------------------------- */

static void test_watch_bad_inputs(void **state)
{
    struct fixture *f = *state;
    shmobj_watch *w;
    int fd;
    assert_int_equal(shmobj_watch_map_key(NULL, "k", 1, &w), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_watch_map_key(f->map, NULL, 1, &w), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_watch_container(NULL, &w), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_watch_fd(NULL, &fd), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_watch_arm(NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_watch_consume(NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_watch_wait(NULL, 0), SHMOBJ_EINVAL);
    shmobj_watch_close(NULL);
    /* the empty key is a key */
    assert_int_equal(shmobj_watch_map_key(f->map, NULL, 0, &w), 0);
    assert_int_equal(shmobj_watch_fd(w, NULL), SHMOBJ_EINVAL);
    shmobj_watch_close(w);
    /* not a mutable container */
    shmobj_view v, fl;
    shmobj_ref ir = make(f->seg, SHMOBJ_VAL_INT(3), &v);
    shmobj_value items[1] = {SHMOBJ_VAL_INT(1)};
    shmobj_ref lr = make(f->seg, SHMOBJ_VAL_LIST(items, 1), &fl);
    assert_int_equal(shmobj_watch_container(&v, &w), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_watch_container(&fl, &w), SHMOBJ_ETYPE);
    shmobj_view ml;
    shmobj_ref mr = make(f->seg, SHMOBJ_VAL_MLIST(), &ml);
    assert_int_equal(shmobj_watch_container(&ml, NULL), SHMOBJ_EINVAL);
    /* a freed container */
    assert_int_equal(shmobj_obj_free(f->seg, mr), 0);
    assert_int_equal(shmobj_watch_container(&ml, &w), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_free(f->seg, ir), 0);
    assert_int_equal(shmobj_obj_free(f->seg, lr), 0);
    /* a read-only handle may not write its entry */
    shmobj_segment *ro;
    shmobj_map *rm;
    assert_int_equal(shmobj_segment_open_flags(f->name, SHMOBJ_BACKEND_SHM,
                                               SHMOBJ_SEGMENT_RDONLY, 0, &ro),
                     0);
    assert_int_equal(shmobj_map_open(ro, "m", &rm), 0);
    assert_int_equal(shmobj_watch_map_key(rm, "k", 1, &w), SHMOBJ_ERDONLY);
    shmobj_view rol;
    shmobj_ref rlr = make(f->seg, SHMOBJ_VAL_MLIST(), &ml);
    assert_int_equal(shmobj_obj_get(ro, rlr, &rol), 0);
    assert_int_equal(shmobj_watch_container(&rol, &w), SHMOBJ_ERDONLY);
    shmobj_map_close(rm);
    shmobj_segment_close(ro);
    assert_int_equal(shmobj_obj_free(f->seg, rlr), 0);
}

static void test_watch_segment_closed_estale(void **state)
{
    struct fixture *f = *state;
    shmobj_watch *w;
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w), 0);
    shmobj_segment_close(f->seg);
    f->seg = NULL;
    assert_int_equal(shmobj_watch_consume(w), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_watch_wait(w, SEC), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_watch_map_key(f->map, "k", 1, &w), SHMOBJ_ESTALE);
    shmobj_watch_close(w); /* still frees it, after the segment's close */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(test_watch_map_key_set_by_child_wakes_poll),
        T(test_watch_map_other_key_no_wake),
        T(test_watch_map_destroyed_estale),
        T(test_watch_container_changes_wake),
        T(test_watch_containers_in_one_graph),
        T(test_watch_many_watchers_and_limit),
        T(test_watch_killed_watcher_entries_reused),
        T(test_watch_waitset_with_queue),
        T(test_watch_wait_timeouts),
        T(test_watch_writer_killed_before_wake_bounded),
        T(test_watch_bad_inputs),
        T(test_watch_segment_closed_estale),
        T(test_watch_writers_on_one_cpu_one_stopped),
#undef T
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
