/* Pollable descriptors without pids: the FIFO a waiter registers is
 * reached by its name in /dev/shm, so producers reach waiters in another
 * PID namespace (a queue's consumer, a topic's subscriber, a service's
 * server, each run under `unshare --pid --fork`); the FIFO goes when its
 * waiter closes, and a dead waiter's FIFO is removed by the next producer
 * that finds it without a reader, or by the repair. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shmobj.h"
#include "test-util.h"

#define MiB (UINT64_C(1) << 20)
#define SEC (INT64_C(1000000000))

struct fixture {
    char name[96];
    shmobj_segment *seg;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    test_name(f->name, sizeof f->name, "notify");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 4 * MiB;
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

/* The FIFO behind a descriptor, by its inode: whether its name exists. */
static bool fifo_exists(uint64_t ino)
{
    char path[96];
    snprintf(path, sizeof path, "/dev/shm/.shmobj-notify-%016llx",
             (unsigned long long)ino);
    struct stat st;
    return lstat(path, &st) == 0 && S_ISFIFO(st.st_mode) && (uint64_t)st.st_ino == ino;
}

static uint64_t fd_ino(int fd)
{
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    return (uint64_t)st.st_ino;
}

static bool readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* ---- the waiter, run in another PID namespace --------------------------------- */

/* argv: ns-waiter KIND SEGMENT READY_FD. Registers a descriptor, arms it,
 * tells the parent (one byte on READY_FD), and waits up to 10 s for it to
 * become readable; then takes (and for a service, answers). 0 when woken
 * through the descriptor. */
static int ns_waiter(const char *kind, const char *segname, int ready)
{
    if (getpid() != 1)
        return 40; /* not in a namespace of its own: the test means nothing */
    shmobj_segment *seg;
    if (shmobj_segment_open(segname, SHMOBJ_BACKEND_SHM, 5 * SEC, &seg) != 0)
        return 41;
    int fd = -1, rc = 0;
    shmobj_queue *q = NULL;
    shmobj_topic *t = NULL;
    shmobj_topic_sub *s = NULL;
    shmobj_service *svc = NULL;
    if (strcmp(kind, "queue") == 0) {
        rc = shmobj_queue_open(seg, "q", &q);
        if (rc == 0)
            rc = shmobj_queue_notify_fd(q, &fd);
        if (rc == 0)
            rc = shmobj_queue_notify_arm(q);
    } else if (strcmp(kind, "topic") == 0) {
        rc = shmobj_topic_open(seg, "t", &t);
        if (rc == 0)
            rc = shmobj_topic_subscribe(t, &s);
        if (rc == 0)
            rc = shmobj_topic_notify_fd(s, &fd);
        if (rc == 0)
            rc = shmobj_topic_notify_arm(s);
    } else {
        rc = shmobj_service_open(seg, "svc", SEC, &svc);
        if (rc == 0)
            rc = shmobj_service_notify_fd(svc, &fd);
        if (rc == 0)
            rc = shmobj_service_notify_arm(svc);
    }
    if (rc != 0)
        return 42;
    char b = 1;
    if (write(ready, &b, 1) != 1)
        return 43;
    if (!readable(fd, 10000))
        return 44; /* never woken */
    if (q != NULL) {
        shmobj_ref ref;
        rc = shmobj_queue_try_take(q, &ref);
        shmobj_queue_close(q);
    } else if (s != NULL) {
        shmobj_topic_msg m;
        rc = shmobj_topic_try_take(s, &m);
        if (rc == 0)
            rc = shmobj_topic_release(s, &m);
        shmobj_topic_unsubscribe(s);
        shmobj_topic_close(t);
    } else {
        shmobj_service_msg req;
        rc = shmobj_service_take(svc, 0, &req);
        shmobj_service_msg resp = {.data = "pong", .len = 4,
                                   .flags = SHMOBJ_SERVICE_BYTES};
        if (rc == 0)
            rc = shmobj_service_reply(svc, &req, &resp);
        shmobj_service_close(svc);
    }
    shmobj_segment_close(seg);
    return rc == 0 ? 0 : 45;
}

/* Start the waiter under unshare; its pid, and the read end of its ready
 * pipe in *ready. 0 when unshare is refused (then the test skips). */
static pid_t start_in_namespace(const char *kind, const char *segname, int *ready)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = 0;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        char fdarg[16];
        snprintf(fdarg, sizeof fdarg, "%d", p[1]);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 2); /* unshare's own complaint, when refused */
        alarm(30);
        execlp("unshare", "unshare", "--pid", "--fork", exe, "ns-waiter", kind,
               segname, fdarg, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    /* ready, or the waiter (or unshare) ended */
    char b;
    ssize_t r;
    do
        r = read(p[0], &b, 1);
    while (r < 0 && errno == EINTR);
    if (r == 1) {
        *ready = p[0];
        return pid;
    }
    close(p[0]);
    int rc = test_child_wait(pid);
    if (rc == 1 || rc == 127) /* unshare refused or missing */
        return 0;
    fail_msg("the waiter in its namespace ended before it was ready: %d", rc);
    return 0;
}

static void test_notify_queue_waiter_in_other_pid_namespace(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "q", 16, 0, &q), 0);
    int ready;
    pid_t pid = start_in_namespace("queue", f->name, &ready);
    if (pid == 0) {
        shmobj_queue_close(q);
        skip(); /* unshare --pid --fork refused here */
    }
    shmobj_ref ref;
    assert_int_equal(shmobj_arena_alloc(f->seg, 16, 0, &ref, NULL), 0);
    assert_int_equal(shmobj_queue_put(q, ref), 0);
    assert_int_equal(test_child_wait(pid), 0);
    close(ready);
    shmobj_queue_close(q);
}

static void test_notify_topic_subscriber_in_other_pid_namespace(void **state)
{
    struct fixture *f = *state;
    shmobj_topic *t;
    assert_int_equal(shmobj_topic_create(f->seg, "t", NULL, &t), 0);
    int ready;
    pid_t pid = start_in_namespace("topic", f->name, &ready);
    if (pid == 0) {
        shmobj_topic_close(t);
        skip();
    }
    assert_int_equal(shmobj_topic_publish(t, "hello", 5, SEC), 0);
    assert_int_equal(test_child_wait(pid), 0);
    close(ready);
    shmobj_topic_close(t);
}

static void test_notify_service_server_in_other_pid_namespace(void **state)
{
    struct fixture *f = *state;
    shmobj_service *svc;
    assert_int_equal(shmobj_service_create(f->seg, "svc", 8, 0, &svc), 0);
    int ready;
    pid_t pid = start_in_namespace("service", f->name, &ready);
    if (pid == 0) {
        shmobj_service_close(svc);
        skip();
    }
    shmobj_service_msg req = {.data = "ping", .len = 4, .flags = SHMOBJ_SERVICE_BYTES};
    shmobj_service_msg resp;
    assert_int_equal(shmobj_service_call(svc, &req, 10 * SEC, &resp), 0);
    assert_int_equal(resp.len, 4);
    assert_memory_equal(resp.data, "pong", 4);
    assert_int_equal(shmobj_service_release(svc, &resp), 0);
    assert_int_equal(test_child_wait(pid), 0);
    close(ready);
    shmobj_service_close(svc);
}

/* ---- the FIFO's life ------------------------------------------------------------- */

static void test_notify_fifo_removed_on_close(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "q", 16, 0, &q), 0);
    int fd;
    assert_int_equal(shmobj_queue_notify_fd(q, &fd), 0);
    uint64_t ino = fd_ino(fd);
    assert_true(fifo_exists(ino));
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0622);
    shmobj_queue_close(q);
    assert_false(fifo_exists(ino));
    /* a topic subscriber's too */
    shmobj_topic *t;
    shmobj_topic_sub *s;
    assert_int_equal(shmobj_topic_create(f->seg, "t", NULL, &t), 0);
    assert_int_equal(shmobj_topic_subscribe(t, &s), 0);
    assert_int_equal(shmobj_topic_notify_fd(s, &fd), 0);
    ino = fd_ino(fd);
    assert_true(fifo_exists(ino));
    shmobj_topic_unsubscribe(s);
    assert_false(fifo_exists(ino));
    shmobj_topic_close(t);
}

static int register_then_die(void *arg)
{
    shmobj_segment *seg = arg;
    shmobj_queue *q;
    int fd;
    if (shmobj_queue_open(seg, "q", &q) != 0 || shmobj_queue_notify_fd(q, &fd) != 0 ||
        shmobj_queue_notify_arm(q) != 0)
        return 1;
    uint64_t ino = 0;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return 2;
    ino = (uint64_t)st.st_ino;
    /* hand the inode to the parent through the exit path: a file */
    char path[96];
    snprintf(path, sizeof path, "/dev/shm/.shmobj-test-ino-%d", (int)getppid());
    FILE *out = fopen(path, "w");
    if (out == NULL)
        return 3;
    fprintf(out, "%llu\n", (unsigned long long)ino);
    fclose(out);
    raise(SIGKILL);
    return 4;
}

static void test_notify_dead_waiter_fifo_removed(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "q", 16, 0, &q), 0);
    pid_t pid = test_child_start(register_then_die, f->seg, 10);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    char path[96];
    snprintf(path, sizeof path, "/dev/shm/.shmobj-test-ino-%d", (int)getpid());
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    unsigned long long ino = 0;
    assert_int_equal(fscanf(in, "%llu", &ino), 1);
    fclose(in);
    unlink(path);
    assert_true(fifo_exists(ino)); /* left by the killed waiter */
    /* the next put signals the armed entry, finds no reader, removes it */
    shmobj_ref ref;
    assert_int_equal(shmobj_arena_alloc(f->seg, 16, 0, &ref, NULL), 0);
    assert_int_equal(shmobj_queue_put(q, ref), 0);
    assert_false(fifo_exists(ino));
    shmobj_queue_close(q);
}

/* The listener of the test below; `armed` (shared) counts its arms, so
 * that each put comes after one: a listener that started late would else
 * drain every message in its first round and wait in vain in its second. */
struct listen_arg {
    shmobj_segment *seg;
    _Atomic int *armed;
};

static int listen_armed(void *arg)
{
    struct listen_arg *a = arg;
    shmobj_queue *q;
    int fd;
    if (shmobj_queue_open(a->seg, "q2", &q) != 0 || shmobj_queue_notify_fd(q, &fd) != 0)
        return 1;
    for (int i = 0; i < 3; i++) {
        if (shmobj_queue_notify_arm(q) != 0)
            return 2;
        atomic_fetch_add(a->armed, 1);
        if (!readable(fd, 5000))
            return 2;
        shmobj_ref ref;
        while (shmobj_queue_try_take(q, &ref) == 0) {
        }
    }
    if (shmobj_queue_notify_arm(q) != 0)
        return 3;
    struct stat st;
    char path[96];
    snprintf(path, sizeof path, "/dev/shm/.shmobj-test-ino2-%d", (int)getppid());
    FILE *out = fstat(fd, &st) == 0 ? fopen(path, "w") : NULL;
    if (out == NULL)
        return 5;
    fprintf(out, "%llu\n", (unsigned long long)st.st_ino);
    fclose(out);
    raise(SIGKILL); /* armed, its FIFO known to the producer */
    return 4;
}

/* A producer that kept the FIFO of a listener open (it signalled it
 * before) finds it without a reader at its next write: the name goes. And
 * a queue destroyed with a dead listener's registration removes its FIFO. */
static void test_notify_dead_waiter_fifo_removed_by_cached_writer(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "q2", 16, 0, &q), 0);
    _Atomic int *armed = mmap(NULL, sizeof *armed, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(armed != MAP_FAILED);
    atomic_store(armed, 0);
    struct listen_arg a = {f->seg, armed};
    pid_t pid = test_child_start(listen_armed, &a, 20);
    shmobj_ref ref;
    for (int i = 0; i < 3; i++) {
        for (int w = 0; w < 5000 && atomic_load(armed) <= i; w++)
            test_sleep_ms(1);
        assert_int_equal(shmobj_arena_alloc(f->seg, 16, 0, &ref, NULL), 0);
        assert_int_equal(shmobj_queue_put(q, ref), 0);
    }
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    munmap((void *)armed, sizeof *armed);
    char path[96];
    snprintf(path, sizeof path, "/dev/shm/.shmobj-test-ino2-%d", (int)getpid());
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    unsigned long long ino = 0;
    assert_int_equal(fscanf(in, "%llu", &ino), 1);
    fclose(in);
    unlink(path);
    assert_true(fifo_exists(ino));
    assert_int_equal(shmobj_arena_alloc(f->seg, 16, 0, &ref, NULL), 0);
    assert_int_equal(shmobj_queue_put(q, ref), 0);
    assert_false(fifo_exists(ino));
    shmobj_queue_close(q);
    assert_int_equal(shmobj_queue_destroy(f->seg, "q2"), 0);
}

/* ---- wait-sets ----------------------------------------------------------------- */

static int caller(void *arg)
{
    shmobj_segment *seg = arg;
    shmobj_service *svc;
    if (shmobj_service_open(seg, "svc", 5 * SEC, &svc) != 0)
        return 1;
    shmobj_service_msg req = {.data = "ping", .len = 4, .flags = SHMOBJ_SERVICE_BYTES};
    shmobj_service_msg resp;
    int rc = shmobj_service_call(svc, &req, 10 * SEC, &resp);
    if (rc == 0)
        rc = shmobj_service_release(svc, &resp);
    return rc == 0 ? 0 : 2;
}

static int put_later(void *arg)
{
    shmobj_segment *seg = arg;
    shmobj_queue *q;
    if (shmobj_queue_open(seg, "q", &q) != 0)
        return 1;
    test_sleep_ms(150);
    shmobj_ref ref;
    if (shmobj_arena_alloc(seg, 16, 0, &ref, NULL) != 0)
        return 2;
    return shmobj_queue_put(q, ref) == 0 ? 0 : 3;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_waitset_queue_topic_service_one_call(void **state)
{
    struct fixture *f = *state;
    shmobj_queue *q;
    shmobj_topic *t;
    shmobj_topic_sub *sub;
    shmobj_service *svc;
    assert_int_equal(shmobj_queue_create(f->seg, "q", 16, 0, &q), 0);
    assert_int_equal(shmobj_topic_create(f->seg, "t", NULL, &t), 0);
    assert_int_equal(shmobj_topic_subscribe(t, &sub), 0);
    assert_int_equal(shmobj_service_create(f->seg, "svc", 8, 0, &svc), 0);
    shmobj_waitset *ws;
    void *tags[4];
    size_t n = 9;
    int qtag, ttag, stag;
    assert_int_equal(shmobj_waitset_create(&ws), 0);
    /* bad input */
    assert_int_equal(shmobj_waitset_create(NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_waitset_wait(ws, 0, tags, 4, &n), SHMOBJ_EINVAL); /* empty */
    assert_int_equal(shmobj_waitset_add_queue(NULL, q, &qtag), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_waitset_add_queue(ws, NULL, &qtag), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_waitset_add_topic(ws, NULL, &ttag), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_waitset_add_service(ws, NULL, &stag), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_waitset_add_queue(ws, q, &qtag), 0);
    assert_int_equal(shmobj_waitset_add_topic(ws, sub, &ttag), 0);
    assert_int_equal(shmobj_waitset_add_service(ws, svc, &stag), 0);
    assert_int_equal(shmobj_waitset_wait(ws, 0, NULL, 4, &n), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_waitset_wait(ws, 0, tags, 0, &n), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_waitset_wait(ws, 0, tags, 4, NULL), SHMOBJ_EINVAL);
    /* nothing yet: the timeout, near its length */
    assert_int_equal(shmobj_waitset_wait(ws, 0, tags, 4, &n), SHMOBJ_ETIMEDOUT);
    assert_int_equal(n, 0);
    uint64_t t0 = now_ns();
    assert_int_equal(shmobj_waitset_wait(ws, 250 * TEST_MS, tags, 4, &n),
                     SHMOBJ_ETIMEDOUT);
    uint64_t took = now_ns() - t0;
    assert_true(took >= 240 * 1000000ull && took < 2000 * 1000000ull);
    /* a put by another process, while we sleep */
    pid_t pid = test_child_start(put_later, f->seg, 10);
    assert_int_equal(shmobj_waitset_wait(ws, 5 * SEC, tags, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_ptr_equal(tags[0], &qtag);
    assert_int_equal(test_child_wait(pid), 0);
    shmobj_ref ref;
    assert_int_equal(shmobj_queue_try_take(q, &ref), 0);
    assert_int_equal(shmobj_arena_free(f->seg, ref), 0);
    /* a publish already there before the wait */
    assert_int_equal(shmobj_topic_publish(t, "x", 1, SEC), 0);
    assert_int_equal(shmobj_waitset_wait(ws, 5 * SEC, tags, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_ptr_equal(tags[0], &ttag);
    shmobj_topic_msg m;
    assert_int_equal(shmobj_topic_try_take(sub, &m), 0);
    assert_int_equal(shmobj_topic_release(sub, &m), 0);
    /* a call to the service */
    pid = test_child_start(caller, f->seg, 20);
    assert_int_equal(shmobj_waitset_wait(ws, 5 * SEC, tags, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_ptr_equal(tags[0], &stag);
    shmobj_service_msg req;
    assert_int_equal(shmobj_service_take(svc, 0, &req), 0);
    shmobj_service_msg resp = {.data = "pong", .len = 4, .flags = SHMOBJ_SERVICE_BYTES};
    assert_int_equal(shmobj_service_reply(svc, &req, &resp), 0);
    assert_int_equal(test_child_wait(pid), 0);
    /* two at once: both reported, in the order added */
    assert_int_equal(shmobj_arena_alloc(f->seg, 16, 0, &ref, NULL), 0);
    assert_int_equal(shmobj_queue_put(q, ref), 0);
    assert_int_equal(shmobj_topic_publish(t, "y", 1, SEC), 0);
    assert_int_equal(shmobj_waitset_wait(ws, SEC, tags, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_ptr_equal(tags[0], &qtag);
    assert_ptr_equal(tags[1], &ttag);
    assert_int_equal(shmobj_waitset_wait(ws, SEC, tags, 1, &n), 0);
    assert_int_equal(n, 1);
    /* a member destroyed is reported ready; its take tells why */
    assert_int_equal(shmobj_queue_try_take(q, &ref), 0);
    assert_int_equal(shmobj_arena_free(f->seg, ref), 0);
    assert_int_equal(shmobj_topic_try_take(sub, &m), 0);
    assert_int_equal(shmobj_topic_release(sub, &m), 0);
    assert_int_equal(shmobj_service_destroy(f->seg, "svc"), 0);
    assert_int_equal(shmobj_waitset_wait(ws, SEC, tags, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_ptr_equal(tags[0], &stag);
    assert_int_equal(shmobj_service_take(svc, 0, &req), SHMOBJ_ESTALE);
    /* the destroyed member taken out: the others, quiet, keep their order */
    assert_int_equal(shmobj_waitset_remove(ws, svc), 0);
    assert_int_equal(shmobj_waitset_remove(ws, svc), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_waitset_remove(NULL, q), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_waitset_remove(ws, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_waitset_wait(ws, 0, tags, 4, &n), SHMOBJ_ETIMEDOUT);
    assert_int_equal(shmobj_topic_publish(t, "z", 1, SEC), 0);
    assert_int_equal(shmobj_waitset_wait(ws, SEC, tags, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_ptr_equal(tags[0], &ttag);
    assert_int_equal(shmobj_waitset_remove(ws, sub), 0);
    assert_int_equal(shmobj_waitset_wait(ws, 0, tags, 4, &n), SHMOBJ_ETIMEDOUT);
    assert_int_equal(shmobj_waitset_remove(ws, q), 0);
    assert_int_equal(shmobj_waitset_wait(ws, 0, tags, 4, &n), SHMOBJ_EINVAL); /* empty */
    assert_int_equal(shmobj_waitset_add_queue(ws, q, &qtag), 0);
    assert_int_equal(shmobj_topic_try_take(sub, &m), 0);
    assert_int_equal(shmobj_topic_release(sub, &m), 0);
    shmobj_waitset_destroy(ws);
    shmobj_waitset_destroy(NULL);
    shmobj_service_close(svc);
    shmobj_topic_unsubscribe(sub);
    shmobj_topic_close(t);
    shmobj_queue_close(q);
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "ns-waiter") == 0)
        return ns_waiter(argv[2], argv[3], atoi(argv[4]));
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(test_notify_queue_waiter_in_other_pid_namespace),
        T(test_notify_topic_subscriber_in_other_pid_namespace),
        T(test_notify_service_server_in_other_pid_namespace),
        T(test_notify_fifo_removed_on_close),
        T(test_notify_dead_waiter_fifo_removed),
        T(test_notify_dead_waiter_fifo_removed_by_cached_writer),
        T(test_waitset_queue_topic_service_one_call),
#undef T
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
