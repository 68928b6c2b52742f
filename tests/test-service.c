/* Services: lifecycle and bad input, requests and responses of every kind
 * (bytes, raw blocks, objects), correlation with many client and server
 * processes (more than the CPUs), timeouts, a server killed with a call in
 * hand (SHMOBJ_EPEERDEAD, not a timeout), a client killed or gone leaving
 * nothing behind, the pollable descriptor, and a process stopped or killed
 * at every named step of the protocol while others go on. */
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

#define MiB (UINT64_C(1) << 20)
#define SEC (INT64_C(1000000000))

struct fixture {
    char name[96];
    shmobj_segment *seg;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    test_name(f->name, sizeof f->name, "svc");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 16 * MiB;
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

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A request and its answer: the answer names the request it answers. */
struct treq {
    uint32_t client;
    uint32_t seq;
    uint64_t check;
};
struct tresp {
    uint32_t client;
    uint32_t seq;
    uint32_t server;
    uint32_t pad;
    uint64_t check;
};

static uint64_t req_check(uint32_t client, uint32_t seq)
{
    return ((uint64_t)client << 32 | seq) * UINT64_C(0x9e3779b97f4a7c15);
}

static shmobj_service_msg bytes_msg(const void *p, size_t n)
{
    return (shmobj_service_msg){.data = p, .len = n, .flags = SHMOBJ_SERVICE_BYTES};
}

/* One call of client `client`, number seq: 0 when the answer is the one
 * to that request, else a code. */
static int call_one(shmobj_service *svc, uint32_t client, uint32_t seq,
                    int64_t timeout)
{
    struct treq q = {.client = client, .seq = seq, .check = req_check(client, seq)};
    shmobj_service_msg req = bytes_msg(&q, sizeof q), resp;
    int rc = shmobj_service_call(svc, &req, timeout, &resp);
    if (rc != 0)
        return rc;
    const struct tresp *a = resp.data;
    int bad = resp.len != sizeof *a || a->client != client || a->seq != seq ||
              a->check != ~req_check(client, seq);
    if (shmobj_service_release(svc, &resp) != 0)
        return 1000;
    return bad ? 1001 : 0;
}

/* Answer one request taken: the answer repeats who asked what. */
static int serve_one(shmobj_service *svc, uint32_t server, int64_t timeout)
{
    shmobj_service_msg req;
    int rc = shmobj_service_take(svc, timeout, &req);
    if (rc != 0)
        return rc;
    const struct treq *q = req.data;
    if (req.len != sizeof *q || q->check != req_check(q->client, q->seq))
        return 1002;
    struct tresp a = {.client = q->client, .seq = q->seq, .server = server,
                      .check = ~q->check};
    shmobj_service_msg resp = bytes_msg(&a, sizeof a);
    return shmobj_service_reply(svc, &req, &resp);
}

/* Serve whatever waits until the queue is empty (the parent, after a
 * test's children ended). */
static void serve_all(shmobj_service *svc)
{
    while (serve_one(svc, 99, 0) == 0) {
    }
}

/* ---- lifecycle and bad input ------------------------------------------------- */

static void test_service_create_open_destroy_roundtrip(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_service *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(shmobj_service_create(f->seg, "echo", 8, 0, &a), 0);
    assert_int_equal(shmobj_service_create(f->seg, "echo", 8, 0, &b), SHMOBJ_EEXIST);
    assert_int_equal(shmobj_service_open(f->seg, "echo", 0, &b), 0);
    assert_int_equal(shmobj_service_open(f->seg, "none", 0, &c), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_service_open(f->seg, "none", 1000000, &c),
                     SHMOBJ_ETIMEDOUT);
    /* a call answered in one process through two handles */
    shmobj_service_msg req, resp, got;
    assert_int_equal(shmobj_service_take(b, 0, &got), SHMOBJ_EEMPTY);
    assert_int_equal(shmobj_service_take(b, 1000000, &got), SHMOBJ_ETIMEDOUT);
    uint32_t n = 99;
    assert_int_equal(shmobj_service_pending(a, &n), 0);
    assert_int_equal(n, 0);
    pid_t pid = fork();
    if (pid == 0) {
        shmobj_service *s;
        if (shmobj_service_open(f->seg, "echo", SEC, &s) != 0)
            _exit(1);
        _exit(serve_one(s, 1, 5 * SEC) == 0 ? 0 : 2);
    }
    assert_int_equal(call_one(a, 7, 1, 5 * SEC), 0);
    assert_int_equal(test_child_wait(pid), 0);
    assert_int_equal(shmobj_service_pending(a, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(shmobj_service_destroy(f->seg, "echo"), 0);
    /* every handle's next call says the service is gone */
    req = bytes_msg("x", 1);
    assert_int_equal(shmobj_service_call(a, &req, SEC, &resp), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_service_take(b, 0, &got), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_service_repair(b, NULL), SHMOBJ_ESTALE);
    shmobj_service_close(a);
    shmobj_service_close(b);
    shmobj_service_close(NULL);
    assert_int_equal(shmobj_service_destroy(f->seg, "echo"), SHMOBJ_ENOTFOUND);
    assert_int_equal(used_blocks(f->seg), b0);
}

static void test_service_bad_input_refused(void **state)
{
    struct fixture *f = *state;
    shmobj_service *s = NULL;
    char longname[SHMOBJ_SERVICE_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    assert_int_equal(shmobj_service_create(NULL, "s", 8, 0, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_create(f->seg, NULL, 8, 0, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_create(f->seg, "", 8, 0, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_create(f->seg, longname, 8, 0, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_create(f->seg, "s", 6, 0, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_create(f->seg, "s", 1, 0, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_create(f->seg, "s",
                                           SHMOBJ_SERVICE_CAPACITY_MAX * 2, 0, &s),
                     SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_create(f->seg, "s", 8, 1, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_create(f->seg, "s", 8, 0, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_open(f->seg, "s", 0, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_destroy(f->seg, NULL), SHMOBJ_EINVAL);
    /* a root of another kind */
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(f->seg, "aqueue", 8, 0, &q), 0);
    assert_int_equal(shmobj_service_open(f->seg, "aqueue", 0, &s), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_service_destroy(f->seg, "aqueue"), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_service_create(f->seg, "aqueue", 8, 0, &s), SHMOBJ_EEXIST);
    shmobj_queue_close(q);
    assert_int_equal(shmobj_service_create(f->seg, "s", 8, 0, &s), 0);
    /* the calls' arguments */
    shmobj_service_msg req = bytes_msg("abc", 3), resp, got = {0};
    assert_int_equal(shmobj_service_call(NULL, &req, SEC, &resp), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_call(s, NULL, SEC, &resp), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_call(s, &req, SEC, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_call(s, &req, 0, &resp), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_call(s, &req, -5, &resp), SHMOBJ_EINVAL);
    req.flags = SHMOBJ_SERVICE_BYTES | SHMOBJ_SERVICE_OBJECT;
    assert_int_equal(shmobj_service_call(s, &req, SEC, &resp), SHMOBJ_EINVAL);
    req.flags = 1u << 7;
    assert_int_equal(shmobj_service_call(s, &req, SEC, &resp), SHMOBJ_EINVAL);
    req = bytes_msg(NULL, 4);
    assert_int_equal(shmobj_service_call(s, &req, SEC, &resp), SHMOBJ_EINVAL);
    /* a reference that is not a block, and a stale one */
    req = (shmobj_service_msg){.ref = 0};
    assert_int_equal(shmobj_service_call(s, &req, SEC, &resp), SHMOBJ_EINVAL);
    req.ref = 12345;
    assert_int_equal(shmobj_service_call(s, &req, SEC, &resp), SHMOBJ_EINVAL);
    shmobj_ref blk;
    assert_int_equal(shmobj_arena_alloc(f->seg, 64, 0, &blk, NULL), 0);
    assert_int_equal(shmobj_arena_free(f->seg, blk), 0);
    req.ref = blk;
    assert_int_equal(shmobj_service_call(s, &req, SEC, &resp), SHMOBJ_EINVAL);
    /* server side */
    assert_int_equal(shmobj_service_take(NULL, 0, &got), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_take(s, 0, NULL), SHMOBJ_EINVAL);
    resp = bytes_msg("r", 1);
    assert_int_equal(shmobj_service_reply(s, &got, &resp), SHMOBJ_EINVAL);
    got.call = blk; /* stale */
    assert_int_equal(shmobj_service_reply(s, &got, &resp), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_arena_alloc(f->seg, 64, 0, &blk, NULL), 0);
    got.call = blk; /* a block that is no call */
    assert_int_equal(shmobj_service_reply(s, &got, &resp), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_arena_free(f->seg, blk), 0);
    assert_int_equal(shmobj_service_release(s, NULL), SHMOBJ_EINVAL);
    got = (shmobj_service_msg){0};
    assert_int_equal(shmobj_service_release(s, &got), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_repair(NULL, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_pending(s, NULL), SHMOBJ_EINVAL);
    int fd;
    assert_int_equal(shmobj_service_notify_fd(NULL, &fd), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_notify_fd(s, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_notify_arm(NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_service_notify_arm(s), SHMOBJ_EINVAL);
    shmobj_service_close(s);
    assert_int_equal(shmobj_service_destroy(f->seg, "s"), 0);
}

/* A server answering a request that was not taken by it, or twice. */
static void test_service_reply_twice_refused(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_service *s;
    assert_int_equal(shmobj_service_create(f->seg, "twice", 4, 0, &s), 0);
    pid_t pid = fork();
    if (pid == 0) {
        shmobj_service *c;
        if (shmobj_service_open(f->seg, "twice", SEC, &c) != 0)
            _exit(1);
        _exit(call_one(c, 1, 1, 5 * SEC) == 0 ? 0 : 2);
    }
    shmobj_service_msg req, copy;
    assert_int_equal(shmobj_service_take(s, 5 * SEC, &req), 0);
    copy = req;
    const struct treq *q = req.data;
    struct tresp a = {.client = q->client, .seq = q->seq, .check = ~q->check};
    shmobj_service_msg resp = bytes_msg(&a, sizeof a);
    assert_int_equal(shmobj_service_reply(s, &req, &resp), 0);
    assert_int_equal(req.call, 0); /* cleared */
    assert_int_equal(shmobj_service_reply(s, &req, &resp), SHMOBJ_EINVAL);
    assert_int_equal(test_child_wait(pid), 0);
    /* the call is freed: its reference is refused */
    assert_int_equal(shmobj_service_reply(s, &copy, &resp), SHMOBJ_ESTALE);
    /* a request given back unanswered: its client is told so at once */
    pid = fork();
    if (pid == 0) {
        shmobj_service *c;
        if (shmobj_service_open(f->seg, "twice", SEC, &c) != 0)
            _exit(1);
        _exit(call_one(c, 1, 2, 20 * SEC) == SHMOBJ_ENOTFOUND ? 0 : 2);
    }
    assert_int_equal(shmobj_service_take(s, 5 * SEC, &req), 0);
    assert_int_equal(shmobj_service_release(s, &req), 0);
    assert_int_equal(req.call, 0);
    assert_int_equal(test_child_wait(pid), 0);
    shmobj_service_close(s);
    assert_int_equal(shmobj_service_destroy(f->seg, "twice"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
}

/* ---- what travels --------------------------------------------------------------- */

static void test_service_call_raw_block_and_object(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_service *s;
    assert_int_equal(shmobj_service_create(f->seg, "kinds", 4, 0, &s), 0);
    pid_t pid = fork();
    if (pid == 0) {
        shmobj_service *v;
        if (shmobj_service_open(f->seg, "kinds", SEC, &v) != 0)
            _exit(1);
        for (int i = 0; i < 3; i++) {
            shmobj_service_msg req;
            if (shmobj_service_take(v, 5 * SEC, &req) != 0)
                _exit(2);
            if (i == 2) { /* an echo of the block itself */
                shmobj_service_msg back = req;
                if (shmobj_service_reply(v, &req, &back) != 0)
                    _exit(10);
                continue;
            }
            shmobj_service_msg resp = {0};
            if (req.flags == 0) {
                /* a raw block: answer with an object holding its first word */
                uint64_t *p;
                if (shmobj_arena_ptr(f->seg, req.ref, (void **)&p, NULL) != 0)
                    _exit(3);
                shmobj_value val = SHMOBJ_VAL_INT((int64_t)*p + 1);
                if (shmobj_obj_put(f->seg, &val, &resp.ref) != 0)
                    _exit(4);
                resp.flags = SHMOBJ_SERVICE_OBJECT;
            } else if (req.flags == SHMOBJ_SERVICE_OBJECT) {
                shmobj_view view;
                int64_t x;
                if (shmobj_obj_get(f->seg, req.ref, &view) != 0 ||
                    shmobj_int_get(&view, &x) != 0)
                    _exit(5);
                if (shmobj_arena_alloc(f->seg, 8, 0, &resp.ref, NULL) != 0)
                    _exit(6);
                uint64_t *p;
                if (shmobj_arena_ptr(f->seg, resp.ref, (void **)&p, NULL) != 0)
                    _exit(7);
                *p = (uint64_t)x * 2;
            } else {
                _exit(8);
            }
            if (shmobj_service_reply(v, &req, &resp) != 0)
                _exit(9);
        }
        _exit(0);
    }
    shmobj_service_msg req = {0}, resp;
    uint64_t *p;
    assert_int_equal(shmobj_arena_alloc(f->seg, 8, 0, &req.ref, (void **)&p), 0);
    *p = 41;
    assert_int_equal(shmobj_service_call(s, &req, 5 * SEC, &resp), 0);
    assert_int_equal(resp.flags, SHMOBJ_SERVICE_OBJECT);
    shmobj_view view;
    int64_t x = 0;
    assert_int_equal(shmobj_obj_get(f->seg, resp.ref, &view), 0);
    assert_int_equal(shmobj_int_get(&view, &x), 0);
    assert_int_equal(x, 42);
    /* the request went with the call: its server freed it */
    assert_int_equal(shmobj_arena_free(f->seg, req.ref), SHMOBJ_ESTALE);
    /* the object answer goes back as the request of the next call */
    req = resp;
    assert_int_equal(shmobj_service_call(s, &req, 5 * SEC, &resp), 0);
    assert_int_equal(resp.flags, 0);
    assert_int_equal(shmobj_arena_ptr(f->seg, resp.ref, (void **)&p, NULL), 0);
    assert_int_equal(*p, 84);
    assert_int_equal(shmobj_service_release(s, &resp), 0);
    assert_int_equal(resp.ref, 0);
    /* a raw block sent back as its own answer */
    assert_int_equal(shmobj_arena_alloc(f->seg, 8, 0, &req.ref, (void **)&p), 0);
    *p = 7;
    req.flags = 0;
    assert_int_equal(shmobj_service_call(s, &req, 5 * SEC, &resp), 0);
    assert_int_equal(resp.ref, req.ref);
    assert_int_equal(shmobj_arena_ptr(f->seg, resp.ref, (void **)&p, NULL), 0);
    assert_int_equal(*p, 7);
    assert_int_equal(shmobj_service_release(s, &resp), 0);
    assert_int_equal(test_child_wait(pid), 0);
    shmobj_service_close(s);
    assert_int_equal(shmobj_service_destroy(f->seg, "kinds"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
}

/* ---- correlation ------------------------------------------------------------------ */

struct board {
    _Atomic uint32_t stop;
    _Atomic uint32_t served[8];
    _Atomic uint32_t ready;
};

struct role {
    struct fixture *f;
    struct board *bd;
    const char *name;
    uint32_t id;
    uint32_t calls;
    const char *step; /* armed when not NULL */
    unsigned nth;
    enum test_stall_action action;
};

static int server_main(void *arg)
{
    struct role *r = arg;
    shmobj_service *s;
    if (shmobj_service_open(r->f->seg, r->name, 5 * SEC, &s) != 0)
        return 1;
    test_stall_pin(r->id);
    if (r->step != NULL)
        test_stall_arm(r->step, r->nth, r->action, 0);
    atomic_fetch_add(&r->bd->ready, 1);
    while (atomic_load(&r->bd->stop) == 0) {
        int rc = serve_one(s, r->id, 50 * TEST_MS);
        if (rc == SHMOBJ_ETIMEDOUT)
            continue;
        if (rc != 0)
            return 10 + (rc < 0 ? -rc : rc);
        atomic_fetch_add(&r->bd->served[r->id % 8], 1);
    }
    shmobj_service_close(s);
    return 0;
}

static int client_main(void *arg)
{
    struct role *r = arg;
    shmobj_service *s;
    if (shmobj_service_open(r->f->seg, r->name, 5 * SEC, &s) != 0)
        return 1;
    /* a CPU other than its server's (ids 1 and 2 of the stall test): a
     * server woken on the client's CPU would answer before the client
     * looks, and the client's wait would never be reached */
    test_stall_pin(r->id);
    if (r->step != NULL)
        test_stall_arm(r->step, r->nth, r->action, 0);
    for (uint32_t i = 0; i < r->calls; i++) {
        int rc = call_one(s, r->id, i, 20 * SEC);
        if (rc != 0)
            return 10 + (rc < 0 ? -rc : rc % 100);
    }
    shmobj_service_close(s);
    return 0;
}

static void test_service_correlation_many_clients_many_servers(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_service *s;
    assert_int_equal(shmobj_service_create(f->seg, "many", 16, 0, &s), 0);
    struct board *bd = shared_alloc(sizeof *bd);
    enum { SERVERS = 3, CLIENTS = 6, CALLS = 400 };
    struct role r[SERVERS + CLIENTS];
    pid_t pid[SERVERS + CLIENTS];
    for (unsigned i = 0; i < SERVERS; i++) {
        r[i] = (struct role){.f = f, .bd = bd, .name = "many", .id = i};
        pid[i] = test_child_start(server_main, &r[i], 60);
    }
    for (unsigned i = 0; i < CLIENTS; i++) {
        r[SERVERS + i] = (struct role){.f = f, .bd = bd, .name = "many",
                                       .id = 100 + i, .calls = CALLS};
        pid[SERVERS + i] = test_child_start(client_main, &r[SERVERS + i], 60);
    }
    for (unsigned i = 0; i < CLIENTS; i++)
        assert_int_equal(test_child_wait(pid[SERVERS + i]), 0);
    atomic_store(&bd->stop, 1);
    uint32_t total = 0;
    for (unsigned i = 0; i < SERVERS; i++) {
        assert_int_equal(test_child_wait(pid[i]), 0);
        total += atomic_load(&bd->served[i]);
    }
    assert_int_equal(total, CLIENTS * CALLS);
    uint32_t n = 1;
    assert_int_equal(shmobj_service_pending(s, &n), 0);
    assert_int_equal(n, 0);
    shmobj_service_close(s);
    assert_int_equal(shmobj_service_destroy(f->seg, "many"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    munmap(bd, sizeof *bd);
}

/* ---- timeouts, deaths ------------------------------------------------------------ */

static void test_service_call_timeout_then_late_answer_freed(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_service *s;
    assert_int_equal(shmobj_service_create(f->seg, "late", 4, 0, &s), 0);
    /* nobody serves: the call times out, near its deadline */
    uint64_t t0 = now_ns();
    assert_int_equal(call_one(s, 1, 1, 200 * TEST_MS), SHMOBJ_ETIMEDOUT);
    uint64_t took = now_ns() - t0;
    assert_true(took >= 200 * 1000000ull && took < 2000 * 1000000ull);
    /* a server that comes later skips the call given up and frees it */
    shmobj_service_msg req;
    assert_int_equal(shmobj_service_take(s, 0, &req), SHMOBJ_EEMPTY);
    uint32_t n = 1;
    assert_int_equal(shmobj_service_pending(s, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(used_blocks(f->seg), b0 + 2); /* the queue and the table */
    /* a call taken, then given up, then answered: the answer is freed */
    pid_t pid = fork();
    if (pid == 0) {
        shmobj_service *c;
        if (shmobj_service_open(f->seg, "late", SEC, &c) != 0)
            _exit(1);
        _exit(call_one(c, 2, 2, 300 * TEST_MS) == SHMOBJ_ETIMEDOUT ? 0 : 2);
    }
    assert_int_equal(shmobj_service_take(s, 5 * SEC, &req), 0);
    assert_int_equal(test_child_wait(pid), 0);
    struct tresp a = {0};
    shmobj_service_msg resp = bytes_msg(&a, sizeof a);
    assert_int_equal(shmobj_service_reply(s, &req, &resp), 0);
    assert_int_equal(shmobj_service_pending(s, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(used_blocks(f->seg), b0 + 2);
    shmobj_service_close(s);
    assert_int_equal(shmobj_service_destroy(f->seg, "late"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
}

static int take_then_die(void *arg)
{
    struct role *r = arg;
    shmobj_service *s;
    if (shmobj_service_open(r->f->seg, r->name, 5 * SEC, &s) != 0)
        return 1;
    shmobj_service_msg req;
    if (shmobj_service_take(s, 10 * SEC, &req) != 0)
        return 2;
    raise(SIGKILL); /* with the request in hand */
    return 3;
}

static void test_service_server_killed_with_request_peerdead(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_service *s;
    assert_int_equal(shmobj_service_create(f->seg, "dies", 4, 0, &s), 0);
    struct role r = {.f = f, .name = "dies"};
    pid_t pid = test_child_start(take_then_die, &r, 30);
    uint64_t t0 = now_ns();
    /* a timeout far away: the death is told, not the timeout */
    assert_int_equal(call_one(s, 1, 1, 20 * SEC), SHMOBJ_EPEERDEAD);
    assert_true(now_ns() - t0 < 5 * 1000000000ull);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    uint32_t n = 1;
    assert_int_equal(shmobj_service_pending(s, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(used_blocks(f->seg), b0 + 2);
    shmobj_service_close(s);
    assert_int_equal(shmobj_service_destroy(f->seg, "dies"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
}

static int call_forever(void *arg)
{
    struct role *r = arg;
    shmobj_service *s;
    if (shmobj_service_open(r->f->seg, r->name, 5 * SEC, &s) != 0)
        return 1;
    atomic_fetch_add(&r->bd->ready, 1);
    (void)call_one(s, r->id, 0, SHMOBJ_FOREVER);
    return 2;
}

static bool wait_ready(struct board *bd, uint32_t n)
{
    for (int i = 0; i < 5000; i++) {
        if (atomic_load(&bd->ready) >= n)
            return true;
        test_sleep_ms(1);
    }
    return false;
}

static void test_service_client_killed_nothing_leaked(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_service *s;
    assert_int_equal(shmobj_service_create(f->seg, "gone", 8, 0, &s), 0);
    struct board *bd = shared_alloc(sizeof *bd);
    struct role r = {.f = f, .bd = bd, .name = "gone", .id = 5};
    uint32_t n = 0, freed = 0;
    /* killed while its call waits in the queue: the repair frees it, and
     * a server later skips the reference */
    pid_t pid = test_child_start(call_forever, &r, 30);
    assert_true(wait_ready(bd, 1));
    for (int i = 0; i < 1000 && n == 0; i++) {
        assert_int_equal(shmobj_service_pending(s, &n), 0);
        test_sleep_ms(1);
    }
    assert_int_equal(n, 1);
    kill(pid, SIGKILL);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    assert_int_equal(shmobj_service_repair(s, &freed), 0);
    assert_int_equal(freed, 1);
    shmobj_service_msg req;
    assert_int_equal(shmobj_service_take(s, 0, &req), SHMOBJ_EEMPTY);
    assert_int_equal(used_blocks(f->seg), b0 + 2);
    /* killed while a server holds its call: the answer is freed by the
     * repair once given */
    atomic_store(&bd->ready, 0);
    pid = test_child_start(call_forever, &r, 30);
    assert_int_equal(shmobj_service_take(s, 5 * SEC, &req), 0);
    kill(pid, SIGKILL);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    assert_int_equal(shmobj_service_repair(s, &freed), 0);
    assert_int_equal(freed, 0); /* a live server holds it */
    struct tresp a = {0};
    shmobj_service_msg resp = bytes_msg(&a, sizeof a);
    assert_int_equal(shmobj_service_reply(s, &req, &resp), 0);
    assert_int_equal(shmobj_service_repair(s, &freed), 0);
    assert_int_equal(freed, 1);
    assert_int_equal(shmobj_service_pending(s, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(used_blocks(f->seg), b0 + 2);
    shmobj_service_close(s);
    assert_int_equal(shmobj_service_destroy(f->seg, "gone"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    munmap(bd, sizeof *bd);
}

/* ---- the descriptor --------------------------------------------------------------- */

static void test_service_notify_fd_readable_when_called(void **state)
{
    struct fixture *f = *state;
    shmobj_service *s;
    assert_int_equal(shmobj_service_create(f->seg, "poll", 4, 0, &s), 0);
    int fd = -1;
    assert_int_equal(shmobj_service_notify_fd(s, &fd), 0);
    assert_int_equal(shmobj_service_notify_arm(s), 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0);
    pid_t pid = fork();
    if (pid == 0) {
        shmobj_service *c;
        if (shmobj_service_open(f->seg, "poll", SEC, &c) != 0)
            _exit(1);
        _exit(call_one(c, 3, 3, 5 * SEC) == 0 ? 0 : 2);
    }
    assert_int_equal(poll(&p, 1, 5000), 1);
    assert_int_equal(serve_one(s, 1, 0), 0);
    assert_int_equal(test_child_wait(pid), 0);
    shmobj_service_close(s);
    assert_int_equal(shmobj_service_destroy(f->seg, "poll"), 0);
}

/* ---- every step stopped and killed -------------------------------------------------- */

enum who { CLIENT, SERVER };

struct step_case {
    const char *step;
    enum who who;
    int killed_rc; /* the other client's result when `who` dies there */
    /* blocks a death there leaves: the response a client had collected
     * (its call freed, so only the dead process knew it), as any block a
     * process holds when it is killed */
    unsigned leaks;
    /* a client's step comes after the answer: the kill test serves the
     * call before the client dies, else only after (a client answered
     * at once would never reach its wait) */
    bool answered;
};

/* With a process killed at each step, the other side ends with a
 * documented result and, after the repair, nothing is left. */
static const struct step_case steps[] = {
    {"service.call.noted", CLIENT, 0, 0, false},
    {"service.call.sent", CLIENT, 0, 0, false},
    {"service.call.wait", CLIENT, 0, 0, false},
    {"service.call.collect", CLIENT, 0, 0, true},
    {"service.retire.parts", CLIENT, 0, 0, true},
    {"service.retire.call", CLIENT, 0, 1, true},
    {"service.take.taken", SERVER, SHMOBJ_ETIMEDOUT, 0, false},
    {"service.reply.stored", SERVER, SHMOBJ_EPEERDEAD, 0, false},
    {"service.reply.freed", SERVER, SHMOBJ_EPEERDEAD, 0, false},
    {"service.reply.published", SERVER, 0, 0, false},
};

static void test_service_kill_every_step_nothing_leaked(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    struct board *bd = shared_alloc(sizeof *bd);
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        const struct step_case *sc = &steps[k];
        shmobj_service *s;
        assert_int_equal(shmobj_service_create(f->seg, "kill", 4, 0, &s), 0);
        memset(bd, 0, sizeof *bd);
        struct role r = {.f = f, .bd = bd, .name = "kill", .id = 1, .calls = 1,
                         .step = sc->step, .nth = 1, .action = TEST_STALL_KILL};
        pid_t pid;
        int rc;
        if (sc->who == CLIENT) {
            pid = test_child_start(client_main, &r, 30);
            /* this process serves: the client dies at its step, after
             * the answer or before it is given */
            for (int i = 0; sc->answered && i < 100 && serve_one(s, 9, 50 * TEST_MS) != 0; i++)
                if (waitpid(pid, NULL, WNOHANG) == pid) {
                    pid = 0;
                    break;
                }
            if (pid != 0)
                assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
        } else {
            pid = test_child_start(server_main, &r, 30);
            rc = call_one(s, 7, 1, sc->killed_rc == SHMOBJ_ETIMEDOUT ? 500 * TEST_MS
                                                                     : 10 * SEC);
            assert_int_equal(rc, sc->killed_rc);
            if (rc == 0) {
                atomic_store(&bd->stop, 1);
            }
            rc = test_child_wait(pid);
            assert_true(rc == 128 + SIGKILL);
        }
        assert_int_equal(shmobj_service_repair(s, NULL), 0);
        serve_all(s);
        uint32_t n = 1;
        assert_int_equal(shmobj_service_pending(s, &n), 0);
        if (n != 0)
            fail_msg("step %s: %u calls left", sc->step, n);
        b0 += sc->leaks;
        if (used_blocks(f->seg) != b0 + 2)
            fail_msg("step %s: %lld blocks left", sc->step,
                     (long long)(used_blocks(f->seg) - b0 - 2));
        shmobj_service_close(s);
        assert_int_equal(shmobj_service_destroy(f->seg, "kill"), 0);
    }
    assert_int_equal(used_blocks(f->seg), b0);
    munmap(bd, sizeof *bd);
}

/* Five processes open-or-create one service at once: one creates, all
 * get a handle of that one service (each child's call is answered here),
 * and a root of another kind is refused as such. */
static int ooc_main(void *p)
{
    struct fixture *f = p;
    shmobj_service *s;
    if (shmobj_service_open_or_create(f->seg, "ooc", 8, 0, &s) != 0)
        return 1;
    int rc = call_one(s, 3, 1, 10 * SEC);
    shmobj_service_close(s);
    return rc == 0 ? 0 : 2;
}

static void test_service_open_or_create_racing_one_service(void **state)
{
    struct fixture *f = *state;
    pid_t pid[4];
    for (int i = 0; i < 4; i++)
        pid[i] = test_child_start(ooc_main, f, 30);
    shmobj_service *s;
    assert_int_equal(shmobj_service_open_or_create(f->seg, "ooc", 8, 0, &s), 0);
    for (int served = 0, i = 0; served < 4 && i < 400; i++)
        if (serve_one(s, 9, 50 * TEST_MS) == 0)
            served++;
    for (int i = 0; i < 4; i++)
        assert_int_equal(test_child_wait(pid[i]), 0);
    shmobj_service_close(s);
    assert_int_equal(shmobj_service_destroy(f->seg, "ooc"), 0);
    shmobj_ref r;
    assert_int_equal(shmobj_arena_alloc(f->seg, 16, 0, &r, NULL), 0);
    assert_int_equal(shmobj_segment_root_set(f->seg, "other", r), 0);
    assert_int_equal(shmobj_service_open_or_create(f->seg, "other", 8, 0, &s), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_service_open_or_create(f->seg, "", 8, 0, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_segment_root_del(f->seg, "other"), 0);
    assert_int_equal(shmobj_arena_free(f->seg, r), 0);
}

/* A creator killed between its queue and its service's name leaves only
 * the queue: a create says SHMOBJ_EEXIST and an open finds no service;
 * a destroy removes what is left, and the name is free again. */
static void test_service_creator_killed_halfway_destroy_cleans(void **state)
{
    struct fixture *f = *state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        test_stall_arm("service.create.queued", 1, TEST_STALL_KILL, 0);
        shmobj_service *s;
        (void)shmobj_service_create(f->seg, "half", 8, 0, &s);
        _exit(1);
    }
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    shmobj_service *svc = NULL;
    shmobj_ref r;
    assert_int_equal(shmobj_segment_root_get(f->seg, "half/calls", &r), 0);
    assert_int_equal(shmobj_service_create(f->seg, "half", 8, 0, &svc), SHMOBJ_EEXIST);
    assert_int_equal(shmobj_service_open(f->seg, "half", 0, &svc), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_service_open_or_create(f->seg, "half", 8, 0, &svc), SHMOBJ_EEXIST);
    assert_int_equal(shmobj_service_destroy(f->seg, "half"), 0);
    assert_int_equal(shmobj_segment_root_get(f->seg, "half/calls", &r), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_service_destroy(f->seg, "half"), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_service_create(f->seg, "half", 8, 0, &svc), 0);
    shmobj_service_close(svc);
    assert_int_equal(shmobj_service_destroy(f->seg, "half"), 0);
}

/* A process stopped at each step while another client and server go on;
 * resumed, it finishes, and nothing is left. */
static void test_service_stall_every_step_others_finish(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    struct board *bd = shared_alloc(sizeof *bd);
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        const struct step_case *sc = &steps[k];
        shmobj_service *s;
        assert_int_equal(shmobj_service_create(f->seg, "stall", 8, 0, &s), 0);
        memset(bd, 0, sizeof *bd);
        struct role stalled = {.f = f, .bd = bd, .name = "stall", .id = 1,
                               .calls = 60, .step = sc->step, .nth = 2,
                               .action = TEST_STALL_STOP};
        struct role server = {.f = f, .bd = bd, .name = "stall", .id = 2};
        struct role client = {.f = f, .bd = bd, .name = "stall", .id = 3,
                              .calls = 50};
        pid_t ps = test_child_start(server_main, sc->who == SERVER ? &stalled : &server, 60);
        pid_t pc = test_child_start(client_main, sc->who == CLIENT ? &stalled : &client, 60);
        pid_t stopped = sc->who == SERVER ? ps : pc;
        int st;
        int w = test_stall_wait_stopped(stopped, 10000, &st);
        if (w != 1)
            fail_msg("step %s: not reached (%d, status %d)", sc->step, w, st);
        /* the other side's partner goes on meanwhile */
        pid_t other;
        if (sc->who == SERVER) {
            struct role s2 = server;
            other = test_child_start(server_main, &s2, 60);
            /* the stalled server holds one call at most: the client's
             * next calls go through the other server, unless the client
             * waits on the stalled one's call; it then finishes later */
        } else {
            other = test_child_start(client_main, &client, 60);
            assert_int_equal(test_child_wait(other), 0);
        }
        test_stall_resume(stopped);
        if (sc->who == SERVER) {
            assert_int_equal(test_child_wait(pc), 0);
        } else {
            assert_int_equal(test_child_wait(pc), 0);
        }
        atomic_store(&bd->stop, 1);
        assert_int_equal(test_child_wait(ps), 0);
        if (sc->who == SERVER)
            assert_int_equal(test_child_wait(other), 0);
        uint32_t n = 1;
        assert_int_equal(shmobj_service_pending(s, &n), 0);
        if (n != 0)
            fail_msg("step %s: %u calls left", sc->step, n);
        shmobj_service_close(s);
        assert_int_equal(shmobj_service_destroy(f->seg, "stall"), 0);
        if (used_blocks(f->seg) != b0)
            fail_msg("step %s: %llu blocks left", sc->step,
                     (unsigned long long)(used_blocks(f->seg) - b0));
    }
    munmap(bd, sizeof *bd);
}

/* A client that gave up is stopped right after; the server that takes
 * its call frees it. And a repair killed after claiming a call leaves it
 * to the next repair. */
static int give_up_stopped(void *arg)
{
    struct role *r = arg;
    shmobj_service *s;
    if (shmobj_service_open(r->f->seg, r->name, 5 * SEC, &s) != 0)
        return 1;
    test_stall_arm("service.call.gone", 1, TEST_STALL_STOP, 0);
    return call_one(s, 1, 1, 100 * TEST_MS) == SHMOBJ_ETIMEDOUT ? 0 : 2;
}

static int repair_killed(void *arg)
{
    struct role *r = arg;
    shmobj_service *s;
    /* the open repairs too */
    test_stall_arm("service.repair.claimed", 1, TEST_STALL_KILL, 0);
    if (shmobj_service_open(r->f->seg, r->name, 5 * SEC, &s) != 0)
        return 1;
    (void)shmobj_service_repair(s, NULL);
    return 2;
}

static void test_service_stall_gone_and_repair_killed(void **state)
{
    struct fixture *f = *state;
    uint64_t b0 = used_blocks(f->seg);
    shmobj_service *s;
    assert_int_equal(shmobj_service_create(f->seg, "gone2", 4, 0, &s), 0);
    struct role r = {.f = f, .name = "gone2"};
    pid_t pid = test_child_start(give_up_stopped, &r, 30);
    int st;
    assert_int_equal(test_stall_wait_stopped(pid, 10000, &st), 1);
    shmobj_service_msg req;
    assert_int_equal(shmobj_service_take(s, 0, &req), SHMOBJ_EEMPTY);
    test_stall_resume(pid);
    assert_int_equal(test_child_wait(pid), 0);
    assert_int_equal(used_blocks(f->seg), b0 + 2);
    /* a call whose client died, and a repair killed once it claimed it */
    struct board *bd = shared_alloc(sizeof *bd);
    struct role c = {.f = f, .bd = bd, .name = "gone2", .id = 4};
    pid = test_child_start(call_forever, &c, 30);
    assert_true(wait_ready(bd, 1));
    uint32_t n = 0;
    for (int i = 0; i < 1000 && n == 0; i++) {
        assert_int_equal(shmobj_service_pending(s, &n), 0);
        test_sleep_ms(1);
    }
    kill(pid, SIGKILL);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    pid = test_child_start(repair_killed, &r, 30);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    assert_int_equal(shmobj_service_pending(s, &n), 0);
    assert_int_equal(n, 1);
    uint32_t freed = 0;
    assert_int_equal(shmobj_service_repair(s, &freed), 0);
    assert_int_equal(freed, 1);
    assert_int_equal(shmobj_service_take(s, 0, &req), SHMOBJ_EEMPTY);
    assert_int_equal(used_blocks(f->seg), b0 + 2);
    shmobj_service_close(s);
    assert_int_equal(shmobj_service_destroy(f->seg, "gone2"), 0);
    assert_int_equal(used_blocks(f->seg), b0);
    munmap(bd, sizeof *bd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(test_service_create_open_destroy_roundtrip),
        T(test_service_bad_input_refused),
        T(test_service_reply_twice_refused),
        T(test_service_call_raw_block_and_object),
        T(test_service_correlation_many_clients_many_servers),
        T(test_service_call_timeout_then_late_answer_freed),
        T(test_service_server_killed_with_request_peerdead),
        T(test_service_client_killed_nothing_leaked),
        T(test_service_notify_fd_readable_when_called),
        T(test_service_kill_every_step_nothing_leaked),
        T(test_service_creator_killed_halfway_destroy_cleans),
        T(test_service_open_or_create_racing_one_service),
        T(test_service_stall_every_step_others_finish),
        T(test_service_stall_gone_and_repair_killed),
#undef T
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
