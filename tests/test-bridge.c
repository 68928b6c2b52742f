/*
 * The NATS JetStream bridge (doc/bridge.md): two "hosts" on one machine,
 * each a segment with its own shmobj-bridge process, and a nats-server
 * with JetStream started by each test on a free loopback port with its
 * store in a temporary folder. The failure tests restart the server, kill
 * the bridges at random points, fill the receiving queue, send a message
 * larger than the server takes, offer wrong credentials, and kill a node
 * of a three-node cluster (SHMOBJ_BRIDGE_CLUSTER=0 skips that one), and
 * lose a delivery on its way. Every wait is bounded.
 *
 * usage: test-bridge SHMOBJ_BRIDGE_PATH
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <nats/nats.h>
#include <shmobj.h>

#include "shmobj-bridge.h"
#include "test-util.h"

static const char *bridge_path;
static char nats_path[256];
static char tmpdir[256];
static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* Every process a test starts, and every segment it makes, so that a test
 * that fails half-way leaves no server, bridge or segment behind (its
 * teardown ends them); a child also dies with the test process itself. */
static pid_t kids[64];
static unsigned nkids;
static char segs[8][64];
static unsigned nsegs;

static void kid_add(pid_t pid)
{
    if (nkids < sizeof kids / sizeof kids[0])
        kids[nkids++] = pid;
}

static void kid_gone(pid_t pid)
{
    for (unsigned i = 0; i < nkids; i++)
        if (kids[i] == pid) {
            kids[i] = kids[--nkids];
            return;
        }
}

static void seg_add(const char *name)
{
    if (nsegs < sizeof segs / sizeof segs[0])
        snprintf(segs[nsegs++], sizeof segs[0], "%s", name);
}

static void child_setup(void)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

static int teardown(void **state)
{
    (void)state;
    for (unsigned i = 0; i < nkids; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    nkids = 0;
    for (unsigned i = 0; i < nsegs; i++)
        shmobj_segment_destroy(segs[i], SHMOBJ_BACKEND_SHM);
    nsegs = 0;
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void msleep(long ms)
{
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000};
    nanosleep(&ts, NULL);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static bool port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Start nats-server -js on port with its store in dir; extra: a config
 * file (or NULL). Returns once the port answers. */
static pid_t nats_start(int port, const char *dir, const char *conf)
{
    char p[16], log[512];
    snprintf(p, sizeof p, "%d", port);
    snprintf(log, sizeof log, "%s.log", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        child_setup();
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        if (conf != NULL && strstr(conf, "node") != NULL) /* store in its file */
            execl(nats_path, "nats-server", "-js", "-a", "127.0.0.1", "-p", p,
                  "-c", conf, (char *)NULL);
        else if (conf != NULL)
            execl(nats_path, "nats-server", "-js", "-a", "127.0.0.1", "-p", p, "-sd", dir,
                  "-c", conf, (char *)NULL);
        else
            execl(nats_path, "nats-server", "-js", "-a", "127.0.0.1", "-p", p, "-sd", dir,
                  (char *)NULL);
        _exit(127);
    }
    kid_add(pid);
    for (int i = 0; i < 200 && !port_open(port); i++)
        msleep(25);
    assert_true(port_open(port));
    return pid;
}

static int reap(pid_t pid, int sig, int seconds)
{
    int st = 0;
    if (sig)
        kill(pid, sig);
    for (int i = 0; i < seconds * 100; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            kid_gone(pid);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        msleep(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    kid_gone(pid);
    fail_msg("process %ld did not end within %d s", (long)pid, seconds);
    return -1;
}

/* Start a bridge: segment, name, url, up to two routes; its stdout (status
 * lines) and stderr go to tmpdir/NAME.out and .err. */
static pid_t bridge_start(const char *seg, const char *name, const char *url,
                          const char *r1, const char *r2)
{
    char out[512], err[512];
    snprintf(out, sizeof out, "%s/%s.out", tmpdir, name);
    snprintf(err, sizeof err, "%s/%s.err", tmpdir, name);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        child_setup();
        int fo = open(out, O_WRONLY | O_CREAT | O_APPEND, 0600);
        int fe = open(err, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fo, 1);
        dup2(fe, 2);
        if (r2 != NULL)
            execl(bridge_path, "shmobj-bridge", "--segment", seg, "--name", name, "--url",
                  url, "--status", "0.2", "--route", r1, "--route", r2, (char *)NULL);
        else
            execl(bridge_path, "shmobj-bridge", "--segment", seg, "--name", name, "--url",
                  url, "--status", "0.2", "--route", r1, (char *)NULL);
        _exit(127);
    }
    kid_add(pid);
    return pid;
}

static bool file_has(const char *name, const char *ext, const char *needle)
{
    char path[512], buf[65536];
    snprintf(path, sizeof path, "%s/%s.%s", tmpdir, name, ext);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, needle) != NULL;
}

/* A test's world: a server, two segments ("hosts") A and B. */
struct world {
    int port;
    char url[64];
    char store[300];
    pid_t nats;
    char seg_a[64], seg_b[64];
    shmobj_segment *a, *b;
};

static void world_up(struct world *w, const char *conf)
{
    memset(w, 0, sizeof *w);
    w->port = free_port();
    snprintf(w->url, sizeof w->url, "nats://127.0.0.1:%d", w->port);
    snprintf(w->store, sizeof w->store, "%s/js-%d", tmpdir, w->port);
    w->nats = nats_start(w->port, w->store, conf);
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    test_name(w->seg_a, sizeof w->seg_a, "bra");
    test_name(w->seg_b, sizeof w->seg_b, "brb");
    seg_add(w->seg_a);
    seg_add(w->seg_b);
    assert_int_equal(shmobj_segment_create(w->seg_a, &o, &w->a), 0);
    assert_int_equal(shmobj_segment_create(w->seg_b, &o, &w->b), 0);
}

static void world_down(struct world *w)
{
    if (w->nats > 0)
        reap(w->nats, SIGTERM, 10);
    shmobj_segment_close(w->a);
    shmobj_segment_close(w->b);
    shmobj_segment_destroy(w->seg_a, SHMOBJ_BACKEND_SHM);
    shmobj_segment_destroy(w->seg_b, SHMOBJ_BACKEND_SHM);
}

static void put_msg(shmobj_queue *q, unsigned i, size_t len)
{
    char buf[4096];
    assert_true(len <= sizeof buf && len >= 12);
    memset(buf, 'a' + (int)(i % 26), len);
    snprintf(buf, 12, "m%010u", i);
    assert_int_equal(shmobj_queue_put_copy(q, buf, len, 0, 5000000000, NULL), 0);
}

/* Take until every one of n messages was seen or `seconds` passed without
 * progress; counts duplicates and checks each body. */
static unsigned take_all(shmobj_queue *q, unsigned n, unsigned total,
                         unsigned char *seen, unsigned *dups, int seconds)
{
    unsigned got = 0;
    int64_t idle_since = now_ns();
    while (got < n && now_ns() - idle_since < (int64_t)seconds * 1000000000) {
        shmobj_ref ref;
        int rc = shmobj_queue_take_timed(q, &ref, 100000000);
        if (rc == SHMOBJ_ETIMEDOUT)
            continue;
        assert_int_equal(rc, 0);
        void *d;
        size_t len;
        assert_int_equal(shmobj_queue_msg_data(q, ref, &d, &len), 0);
        assert_true(len >= 12);
        unsigned i = (unsigned)strtoul((char *)d + 1, NULL, 10);
        if (i >= total)
            fail_msg("a message of %zu bytes that was never sent: '%.*s'", len,
                     (int)(len < 40 ? len : 40), (char *)d);
        assert_int_equal(((char *)d)[len - 1], 'a' + (int)(i % 26));
        if (seen[i]++)
            (*dups)++;
        else
            got++;
        shmobj_queue_msg_done(q, ref);
        idle_since = now_ns();
    }
    return got;
}

/* ---- without a server -------------------------------------------------- */

static void test_bridge_config_bad_lines_einval(void **state)
{
    (void)state;
    shmobj_bridge_config *c;
    char err[512];
    assert_int_equal(shmobj_bridge_config_new(&c), 0);
    assert_int_equal(shmobj_bridge_config_line(c, "route queue:a -> queue:b", err, sizeof err),
                     SHMOBJ_EINVAL);
    assert_non_null(strstr(err, "no route goes"));
    assert_int_equal(shmobj_bridge_config_line(c, "route stream:S -> queue:b", err, sizeof err),
                     SHMOBJ_EINVAL);
    assert_int_equal(shmobj_bridge_config_line(c, "route queue:a -> stream:S/x window=0",
                                               err, sizeof err), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_bridge_config_line(c, "route queue:a -> stream:S/x colour=red",
                                               err, sizeof err), SHMOBJ_EINVAL);
    assert_non_null(strstr(err, "unknown route option"));
    assert_int_equal(shmobj_bridge_config_line(c, "colour red", err, sizeof err),
                     SHMOBJ_EINVAL);
    assert_int_equal(shmobj_bridge_config_line(c, "# a comment", err, sizeof err), 0);
    assert_int_equal(shmobj_bridge_config_line(c, "route queue:a -> stream:S/x", err,
                                               sizeof err), 0);
    assert_int_equal(shmobj_bridge_config_line(c, "route queue:a -> stream:T/y", err,
                                               sizeof err), SHMOBJ_EINVAL);
    assert_non_null(strstr(err, "two routes"));
    assert_int_equal(shmobj_bridge_config_line(c, "route map:m <-> kv:B", err, sizeof err), 0);
    assert_int_equal(shmobj_bridge_config_file(c, "/nonexistent/bridge.conf", err,
                                               sizeof err), SHMOBJ_ENOTFOUND);
    shmobj_bridge *b;
    /* no segment, no url */
    assert_int_equal(shmobj_bridge_start(c, NULL, NULL, &b, err, sizeof err), SHMOBJ_EINVAL);
    assert_non_null(strstr(err, "segment"));
    shmobj_bridge_config_free(c);
}

static void test_bridge_cbor_round_trip_same_object(void **state)
{
    (void)state;
    char name[64];
    shmobj_segment *seg;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    assert_int_equal(shmobj_segment_create(test_name(name, sizeof name, "brc"), &o, &seg), 0);
    seg_add(name);
    float f[6] = {1, 2, 3, 4, 5, 6};
    uint64_t shape[2] = {2, 3};
    shmobj_value items[2] = {SHMOBJ_VAL_INT(-5), SHMOBJ_VAL_STR("x")};
    const char *names[2] = {"n", "s"};
    shmobj_value rec = SHMOBJ_VAL_DICT_OF(
        SHMOBJ_VAL_STR("websites"), SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("a.com"), SHMOBJ_VAL_NULL),
        SHMOBJ_VAL_STR("avg_salary"), SHMOBJ_VAL_DOUBLE(3000.5),
        SHMOBJ_VAL_STR("big"), SHMOBJ_VAL_UINT(UINT64_MAX),
        SHMOBJ_VAL_STR("small"), SHMOBJ_VAL_UINT(7),
        SHMOBJ_VAL_STR("ok"), SHMOBJ_VAL_BOOL(1),
        SHMOBJ_VAL_STR("data"), SHMOBJ_VAL_BYTES("\0\1\2", 3),
        SHMOBJ_VAL_STR("t"), SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_INT(-1)),
        SHMOBJ_VAL_STR("set"), SHMOBJ_VAL_SET_OF(SHMOBJ_VAL_INT(3), SHMOBJ_VAL_STR("k")),
        SHMOBJ_VAL_STR("st"), SHMOBJ_VAL_STRUCT(items, 2, names),
        SHMOBJ_VAL_STR("m"), SHMOBJ_VAL_BUFFER(SHMOBJ_DTYPE_F32, 2, shape, f));
    shmobj_ref ref, back;
    assert_int_equal(shmobj_obj_put(seg, &rec, &ref), 0);
    void *data;
    size_t len;
    assert_int_equal(shmobj_bridge_obj_encode(seg, ref, &data, &len), 0);
    assert_int_equal(shmobj_bridge_obj_decode(seg, data, len, &back), 0);
    shmobj_view v1, v2, x;
    assert_int_equal(shmobj_obj_get(seg, ref, &v1), 0);
    assert_int_equal(shmobj_obj_get(seg, back, &v2), 0);
    char j1[4096], j2[4096];
    size_t l1 = 0, l2 = 0;
    assert_int_equal(shmobj_view_json(&v1, j1, sizeof j1, &l1), 0);
    assert_int_equal(shmobj_view_json(&v2, j2, sizeof j2, &l2), 0);
    assert_string_equal(j1, j2);
    /* the kinds JSON does not show stay what they were */
    assert_int_equal(shmobj_field_get(&v2, "small", &x), 0);
    assert_int_equal(shmobj_view_type(&x), SHMOBJ_TYPE_UINT);
    assert_int_equal(shmobj_field_get(&v2, "t", &x), 0);
    assert_int_equal(shmobj_view_type(&x), SHMOBJ_TYPE_TUPLE);
    assert_int_equal(shmobj_field_get(&v2, "set", &x), 0);
    assert_int_equal(shmobj_view_type(&x), SHMOBJ_TYPE_SET);
    assert_int_equal(shmobj_field_get(&v2, "st", &x), 0);
    assert_int_equal(shmobj_view_type(&x), SHMOBJ_TYPE_STRUCT);
    assert_int_equal(shmobj_field_get(&v2, "m", &x), 0);
    shmobj_buffer_info bi = {.struct_size = sizeof bi};
    assert_int_equal(shmobj_buffer_get(&x, &bi), 0);
    assert_int_equal(bi.dtype, SHMOBJ_DTYPE_F32);
    assert_int_equal(bi.ndim, 2);
    assert_int_equal(bi.shape[1], 3);
    assert_memory_equal(bi.data, f, sizeof f);
    /* every cut and every flipped byte: an error or an object, never a crash */
    for (size_t cut = 0; cut < len; cut++)
        assert_int_not_equal(shmobj_bridge_obj_decode(seg, data, cut, &back), 0);
    unsigned char *bad = malloc(len);
    for (size_t i = 0; i < len; i++) {
        memcpy(bad, data, len);
        bad[i] ^= (unsigned char)(1 + test_xorshift(&rng) % 255);
        if (shmobj_bridge_obj_decode(seg, bad, len, &back) == 0)
            shmobj_obj_free(seg, back);
    }
    free(bad);
    free(data);
    /* kinds outside the profile are refused, not sent half */
    shmobj_value ml = SHMOBJ_VAL_MLIST();
    assert_int_equal(shmobj_obj_put(seg, &ml, &ref), 0);
    assert_int_equal(shmobj_bridge_obj_encode(seg, ref, &data, &len), SHMOBJ_ENOTSUP);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* ---- two hosts, one server ----------------------------------------------- */

static void test_bridge_queue_to_queue_two_hosts(void **state)
{
    (void)state;
    struct world w;
    world_up(&w, NULL);
    pid_t ba = bridge_start(w.seg_a, "qa", w.url, "queue:jobs -> stream:JOBS/jobs", NULL);
    pid_t bb = bridge_start(w.seg_b, "qb", w.url, "stream:JOBS/jobs -> queue:jobs", NULL);
    shmobj_queue *qa, *qb;
    assert_int_equal(shmobj_queue_open_or_create(w.a, "jobs", 1024, 0, &qa), 0);
    assert_int_equal(shmobj_queue_open_or_create(w.b, "jobs", 1024, 0, &qb), 0);
    enum { N = 2000 };
    for (unsigned i = 0; i < N; i++)
        put_msg(qa, i, 12 + i % 500);
    /* a typed object crosses as one and is rebuilt */
    shmobj_value rec = SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_STR("employees"), SHMOBJ_VAL_INT(10),
                                          SHMOBJ_VAL_STR("avg_salary"), SHMOBJ_VAL_DOUBLE(3000.0));
    shmobj_ref ref;
    assert_int_equal(shmobj_obj_put(w.a, &rec, &ref), 0);
    assert_int_equal(shmobj_queue_put(qa, ref), 0);
    unsigned char *seen = calloc(N, 1);
    unsigned dups = 0, last = 0;
    /* in order: one route, one stream, one consumer */
    for (unsigned got = 0; got < N; got++) {
        assert_int_equal(shmobj_queue_take_timed(qb, &ref, 20000000000), 0);
        void *d;
        size_t len;
        assert_int_equal(shmobj_queue_msg_data(qb, ref, &d, &len), 0);
        unsigned i = (unsigned)strtoul((char *)d + 1, NULL, 10);
        assert_int_equal(i, got);
        assert_int_equal(len, 12 + i % 500);
        last = i;
        shmobj_queue_msg_done(qb, ref);
    }
    (void)last;
    assert_int_equal(shmobj_queue_take_timed(qb, &ref, 20000000000), 0);
    shmobj_view v, f;
    assert_int_equal(shmobj_obj_get(w.b, ref, &v), 0);
    assert_int_equal(shmobj_field_get(&v, "employees", &f), 0);
    int64_t e = 0;
    assert_int_equal(shmobj_int_get(&f, &e), 0);
    assert_int_equal(e, 10);
    /* the local side gave every message back once JetStream had it */
    uint64_t count = 1;
    for (int i = 0; i < 100 && count != 0; i++) {
        shmobj_queue_count(qa, &count);
        msleep(20);
    }
    assert_int_equal(count, 0);
    assert_int_equal(reap(ba, SIGTERM, 10), 0);
    assert_int_equal(reap(bb, SIGTERM, 10), 0);
    assert_true(file_has("qa", "out", "jobs.out msgs=2001"));
    assert_true(file_has("qb", "out", "jobs.in msgs=2001"));
    free(seen);
    (void)dups;
    shmobj_queue_close(qa);
    shmobj_queue_close(qb);
    world_down(&w);
}

/* Server killed and restarted while messages flow: the bridges reconnect;
 * nothing is lost, and JetStream's de-duplication absorbs the resends. */
static void test_bridge_server_restart_nothing_lost(void **state)
{
    (void)state;
    struct world w;
    world_up(&w, NULL);
    pid_t ba = bridge_start(w.seg_a, "ra", w.url, "queue:jobs -> stream:RJ/rj", NULL);
    pid_t bb = bridge_start(w.seg_b, "rb", w.url, "stream:RJ/rj -> queue:jobs", NULL);
    shmobj_queue *qa, *qb;
    assert_int_equal(shmobj_queue_open_or_create(w.a, "jobs", 1024, 0, &qa), 0);
    assert_int_equal(shmobj_queue_open_or_create(w.b, "jobs", 1024, 0, &qb), 0);
    enum { N = 3000 };
    unsigned char *seen = calloc(N, 1);
    unsigned dups = 0, got = 0;
    for (unsigned i = 0; i < N / 2; i++)
        put_msg(qa, i, 100);
    got += take_all(qb, N / 4, N, seen, &dups, 20);
    reap(w.nats, SIGKILL, 10);
    for (unsigned i = N / 2; i < N / 2 + 500; i++) /* while the server is away */
        put_msg(qa, i, 100);
    msleep(300);
    w.nats = nats_start(w.port, w.store, NULL);
    for (unsigned i = N / 2 + 500; i < N; i++)
        put_msg(qa, i, 100);
    got += take_all(qb, N - got, N, seen, &dups, 30);
    assert_int_equal(got, N);
    assert_int_equal(dups, 0);
    assert_int_equal(reap(ba, SIGTERM, 10), 0);
    assert_int_equal(reap(bb, SIGTERM, 10), 0);
    assert_true(file_has("ra", "err", "reconnected"));
    free(seen);
    shmobj_queue_close(qa);
    shmobj_queue_close(qb);
    world_down(&w);
}

/* Both bridges SIGKILLed at random points and started again: every message
 * arrives; a duplicate only for a kill of the receiving bridge between a
 * put and its record (doc/bridge.md). */
static void test_bridge_killed_at_random_resumes(void **state)
{
    (void)state;
    struct world w;
    world_up(&w, NULL);
    const char *ra = "queue:jobs -> stream:KJ/kj window=64";
    const char *rb = "stream:KJ/kj -> queue:jobs batch=16 ack-wait-ms=1000";
    pid_t ba = bridge_start(w.seg_a, "ka", w.url, ra, NULL);
    pid_t bb = bridge_start(w.seg_b, "kb", w.url, rb, NULL);
    shmobj_queue *qa, *qb;
    assert_int_equal(shmobj_queue_open_or_create(w.a, "jobs", 1024, 0, &qa), 0);
    assert_int_equal(shmobj_queue_open_or_create(w.b, "jobs", 1024, 0, &qb), 0);
    enum { N = 4000, KILLS = 6 };
    unsigned char *seen = calloc(N, 1);
    unsigned dups = 0, got = 0, sent = 0, kills_b = 0;
    for (int k = 0; k < KILLS; k++) {
        for (unsigned end = sent + N / KILLS; sent < end; sent++)
            put_msg(qa, sent, 64);
        got += take_all(qb, (unsigned)(test_xorshift(&rng) % 200), N, seen, &dups, 10);
        msleep((long)(test_xorshift(&rng) % 40));
        if (k % 2 == 0) {
            reap(ba, SIGKILL, 5);
            ba = bridge_start(w.seg_a, "ka", w.url, ra, NULL);
        } else {
            reap(bb, SIGKILL, 5);
            bb = bridge_start(w.seg_b, "kb", w.url, rb, NULL);
            kills_b++;
        }
    }
    for (; sent < N; sent++)
        put_msg(qa, sent, 64);
    got += take_all(qb, N - got, N, seen, &dups, 30);
    for (unsigned i = 0; i < N; i++)
        if (!seen[i])
            fail_msg("message %u lost", i);
    assert_int_equal(got, N);
    assert_true(dups <= kills_b);
    assert_int_equal(reap(ba, SIGTERM, 10), 0);
    assert_int_equal(reap(bb, SIGTERM, 10), 0);
    free(seen);
    shmobj_queue_close(qa);
    shmobj_queue_close(qb);
    world_down(&w);
}

/* A full local queue holds the route up (no buffering beyond a batch): the
 * messages wait in the stream and all arrive, in order, once taken. */
static void test_bridge_full_local_queue_backpressure(void **state)
{
    (void)state;
    struct world w;
    world_up(&w, NULL);
    pid_t ba = bridge_start(w.seg_a, "fa", w.url, "queue:jobs -> stream:FJ/fj", NULL);
    pid_t bb = bridge_start(w.seg_b, "fb", w.url,
                            "stream:FJ/fj -> queue:small capacity=16 batch=8", NULL);
    shmobj_queue *qa, *qb;
    assert_int_equal(shmobj_queue_open_or_create(w.a, "jobs", 1024, 0, &qa), 0);
    assert_int_equal(shmobj_queue_open_or_create(w.b, "small", 16, 0, &qb), 0);
    enum { N = 400 };
    for (unsigned i = 0; i < N; i++)
        put_msg(qa, i, 200);
    uint64_t count = 0;
    for (int i = 0; i < 200 && count < 16; i++) {
        shmobj_queue_count(qb, &count);
        msleep(20);
    }
    assert_int_equal(count, 16);
    msleep(500);
    shmobj_queue_count(qb, &count);
    assert_int_equal(count, 16); /* full, nothing dropped, nothing forced in */
    for (unsigned i = 0; i < N; i++) {
        shmobj_ref ref;
        assert_int_equal(shmobj_queue_take_timed(qb, &ref, 20000000000), 0);
        void *d;
        size_t len;
        assert_int_equal(shmobj_queue_msg_data(qb, ref, &d, &len), 0);
        assert_int_equal(strtoul((char *)d + 1, NULL, 10), i);
        shmobj_queue_msg_done(qb, ref);
    }
    assert_int_equal(reap(ba, SIGTERM, 10), 0);
    assert_int_equal(reap(bb, SIGTERM, 10), 0);
    shmobj_queue_close(qa);
    shmobj_queue_close(qb);
    world_down(&w);
}

/* A message larger than the server's max_payload: a clear error, the failed
 * counter, the dead-letter queue; the messages around it go on. */
static void test_bridge_oversize_message_counted(void **state)
{
    (void)state;
    struct world w;
    char conf[512];
    snprintf(conf, sizeof conf, "%s/small.conf", tmpdir);
    FILE *f = fopen(conf, "w");
    fprintf(f, "max_payload: 65536\n");
    fclose(f);
    world_up(&w, conf);
    pid_t ba = bridge_start(w.seg_a, "oa", w.url, "queue:jobs -> stream:OJ/oj dead=jobs.dead",
                            NULL);
    pid_t bb = bridge_start(w.seg_b, "ob", w.url, "stream:OJ/oj -> queue:jobs", NULL);
    shmobj_queue *qa, *qb, *dead;
    assert_int_equal(shmobj_queue_open_or_create(w.a, "jobs", 1024, 0, &qa), 0);
    assert_int_equal(shmobj_queue_open_or_create(w.b, "jobs", 1024, 0, &qb), 0);
    put_msg(qa, 0, 100);
    size_t big = 100000;
    char *p = calloc(1, big);
    memcpy(p, "big", 3);
    assert_int_equal(shmobj_queue_put_copy(qa, p, big, 0, 5000000000, NULL), 0);
    put_msg(qa, 1, 100);
    shmobj_ref ref;
    for (unsigned i = 0; i < 2; i++) {
        assert_int_equal(shmobj_queue_take_timed(qb, &ref, 20000000000), 0);
        void *d;
        size_t len;
        assert_int_equal(shmobj_queue_msg_data(qb, ref, &d, &len), 0);
        assert_int_equal(strtoul((char *)d + 1, NULL, 10), i);
        shmobj_queue_msg_done(qb, ref);
    }
    assert_int_equal(shmobj_queue_open_timed(w.a, "jobs.dead", 5000000000, &dead), 0);
    assert_int_equal(shmobj_queue_take_timed(dead, &ref, 5000000000), 0);
    void *d;
    size_t len;
    assert_int_equal(shmobj_queue_msg_data(dead, ref, &d, &len), 0);
    assert_int_equal(len, big);
    msleep(300);
    assert_int_equal(reap(ba, SIGTERM, 10), 0);
    assert_int_equal(reap(bb, SIGTERM, 10), 0);
    assert_true(file_has("oa", "err", "larger than the server's max_payload"));
    assert_true(file_has("oa", "out", "failed=1"));
    free(p);
    shmobj_queue_close(dead);
    shmobj_queue_close(qa);
    shmobj_queue_close(qb);
    world_down(&w);
}

/* A server that refuses the credentials: the bridge says so at start. */
static void test_bridge_bad_credentials_clear_error(void **state)
{
    (void)state;
    struct world w;
    char conf[512];
    snprintf(conf, sizeof conf, "%s/auth.conf", tmpdir);
    FILE *f = fopen(conf, "w");
    fprintf(f, "authorization { user: bridge, password: right }\n");
    fclose(f);
    world_up(&w, conf);
    char url[128];
    snprintf(url, sizeof url, "nats://bridge:wrong@127.0.0.1:%d", w.port);
    pid_t b = bridge_start(w.seg_a, "ca", url, "queue:jobs -> stream:CJ/cj", NULL);
    assert_int_equal(reap(b, 0, 10), 1);
    assert_true(file_has("ca", "err", "uthorization"));
    assert_true(file_has("ca", "err", "EACCES"));
    /* a credentials file that is not there */
    char path[64] = "/nonexistent/user.creds";
    pid_t pid = fork();
    if (pid == 0) {
        child_setup();
        char out[512];
        snprintf(out, sizeof out, "%s/cb.err", tmpdir);
        int fe = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fe, 2);
        execl(bridge_path, "shmobj-bridge", "--segment", w.seg_a, "--url", w.url, "--creds",
              path, "--route", "queue:jobs -> stream:CJ/cj", (char *)NULL);
        _exit(127);
    }
    kid_add(pid);
    assert_int_equal(reap(pid, 0, 10), 1);
    assert_true(file_has("cb", "err", "credentials"));
    /* the right ones work */
    snprintf(url, sizeof url, "nats://bridge:right@127.0.0.1:%d", w.port);
    b = bridge_start(w.seg_a, "cc", url, "queue:jobs -> stream:CJ/cj", NULL);
    msleep(500);
    assert_int_equal(reap(b, SIGTERM, 10), 0);
    world_down(&w);
}

static bool map_wait(shmobj_map *m, const char *k, const char *want, int ms)
{
    char buf[256];
    for (int i = 0; i < ms / 20; i++) {
        size_t len = 0;
        int rc = shmobj_map_get(m, k, strlen(k), buf, sizeof buf, &len);
        if (want == NULL ? rc == SHMOBJ_ENOTFOUND
                         : rc == 0 && len == strlen(want) && memcmp(buf, want, len) == 0)
            return true;
        msleep(20);
    }
    return false;
}

/* A map on each host mirrored both ways through one bucket: sets and
 * deletes cross either way, keys that are no bucket key too. */
static void test_bridge_map_kv_both_ways(void **state)
{
    (void)state;
    struct world w;
    world_up(&w, NULL);
    shmobj_map *ma, *mb;
    assert_int_equal(shmobj_map_open_or_create(w.a, "cache", &ma), 0);
    assert_int_equal(shmobj_map_open_or_create(w.b, "cache", &mb), 0);
    assert_int_equal(shmobj_map_set(ma, "before", 6, "start", 5), 0);
    pid_t ba = bridge_start(w.seg_a, "ma", w.url, "map:cache <-> kv:CACHE interval-ms=20", NULL);
    pid_t bb = bridge_start(w.seg_b, "mb", w.url, "map:cache <-> kv:CACHE interval-ms=20", NULL);
    assert_true(map_wait(mb, "before", "start", 10000));
    assert_int_equal(shmobj_map_set(ma, "k1", 2, "v1", 2), 0);
    assert_true(map_wait(mb, "k1", "v1", 5000));
    assert_int_equal(shmobj_map_set(mb, "k1", 2, "v2", 2), 0);
    assert_true(map_wait(ma, "k1", "v2", 5000));
    assert_int_equal(shmobj_map_set(ma, "a key with spaces", 17, "x", 1), 0);
    assert_true(map_wait(mb, "a key with spaces", "x", 5000));
    assert_int_equal(shmobj_map_del(mb, "k1", 2), 0);
    assert_true(map_wait(ma, "k1", NULL, 5000));
    assert_int_equal(shmobj_map_del(ma, "a key with spaces", 17), 0);
    assert_true(map_wait(mb, "a key with spaces", NULL, 5000));
    /* both hosts write one key while A's bridge is away: the bucket's
     * revision (B's write) wins over A's write it never saw */
    assert_int_equal(reap(ba, SIGTERM, 10), 0);
    assert_int_equal(shmobj_map_set(mb, "k2", 2, "from-b", 6), 0);
    msleep(300); /* B's bridge sends it */
    assert_int_equal(shmobj_map_set(ma, "k2", 2, "from-a", 6), 0);
    ba = bridge_start(w.seg_a, "ma", w.url, "map:cache <-> kv:CACHE interval-ms=20", NULL);
    assert_true(map_wait(ma, "k2", "from-b", 10000));
    msleep(300);
    assert_true(map_wait(mb, "k2", "from-b", 1000));
    assert_int_equal(reap(ba, SIGTERM, 10), 0);
    assert_int_equal(reap(bb, SIGTERM, 10), 0);
    shmobj_map_close(ma);
    shmobj_map_close(mb);
    world_down(&w);
}

/* A topic on A reaches a topic on B through a stream. */
static void test_bridge_topic_to_topic(void **state)
{
    (void)state;
    struct world w;
    world_up(&w, NULL);
    shmobj_topic *ta, *tb;
    shmobj_topic_config tc;
    shmobj_topic_config_init(&tc);
    assert_int_equal(shmobj_topic_open_or_create(w.a, "ticks", &tc, &ta), 0);
    assert_int_equal(shmobj_topic_open_or_create(w.b, "ticks", &tc, &tb), 0);
    shmobj_topic_sub *sub;
    assert_int_equal(shmobj_topic_subscribe(tb, &sub), 0);
    pid_t ba = bridge_start(w.seg_a, "ta", w.url, "topic:ticks -> stream:TT/tt", NULL);
    pid_t bb = bridge_start(w.seg_b, "tb", w.url, "stream:TT/tt -> topic:ticks", NULL);
    shmobj_topic_stats st = {0};
    for (int i = 0; i < 500 && st.subscribers == 0; i++) {
        msleep(20); /* the bridge's subscription exists before we publish */
        assert_int_equal(shmobj_topic_stats_get(ta, &st), 0);
    }
    assert_int_equal(st.subscribers, 1);
    enum { N = 500 };
    for (unsigned i = 0; i < N; i++) {
        char m[32];
        int n = snprintf(m, sizeof m, "tick %u", i);
        int rc = shmobj_topic_publish(ta, m, (uint64_t)n, 20000000000);
        if (rc != 0) {
            shmobj_topic_stats_get(ta, &st);
            fail_msg("publish %u: %s (subscribers %u, lag %llu)", i, shmobj_strerror(rc),
                     st.subscribers, (unsigned long long)st.max_lag);
        }
    }
    for (unsigned i = 0; i < N; i++) {
        shmobj_topic_msg msg;
        assert_int_equal(shmobj_topic_take(sub, &msg, 20000000000), 0);
        char want[32];
        snprintf(want, sizeof want, "tick %u", i);
        assert_int_equal(msg.len, strlen(want));
        assert_memory_equal(msg.data, want, msg.len);
        shmobj_topic_release(sub, &msg);
    }
    assert_int_equal(reap(ba, SIGTERM, 10), 0);
    assert_int_equal(reap(bb, SIGTERM, 10), 0);
    shmobj_topic_unsubscribe(sub);
    shmobj_topic_close(ta);
    shmobj_topic_close(tb);
    world_down(&w);
}

/* A delivery lost on its way (as to a cluster node that dies with it)
 * comes again after the ack wait, behind later messages the bridge put
 * already: it is put then, not taken for a redelivery of one put before.
 * The test plays the lost delivery: it binds the durable consumer first,
 * receives the stream's first message and drops it unacknowledged. */
static void test_bridge_lost_delivery_put_later(void **state)
{
    (void)state;
    struct world w;
    world_up(&w, NULL);
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(natsConnection_ConnectTo(&nc, w.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    const char *subjects[] = {"gp"};
    sc.Name = "GP";
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    assert_int_equal(js_AddStream(NULL, js, &sc, NULL, &jerr), NATS_OK);
    enum { N = 40 };
    char body[100];
    memset(body, 'a', sizeof body);
    snprintf(body, 12, "m%010u", 0u);
    assert_int_equal(js_Publish(NULL, js, "gp", body, sizeof body, NULL, &jerr), NATS_OK);
    natsSubscription *lost = NULL;
    assert_int_equal(natsConnection_SubscribeSync(&lost, nc, "gp-deliver"), NATS_OK);
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = "GPD";
    cc.DeliverSubject = "gp-deliver";
    cc.FilterSubject = "gp";
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = 3000000000; /* the route's ack-wait-ms=3000 */
    cc.MaxAckPending = 64;
    cc.MaxDeliver = -1;
    assert_int_equal(js_AddConsumer(NULL, js, "GP", &cc, NULL, &jerr), NATS_OK);
    natsMsg *m = NULL;
    assert_int_equal(natsSubscription_NextMsg(&m, lost, 5000), NATS_OK);
    natsMsg_Destroy(m); /* never acknowledged: "lost on its way" */
    natsSubscription_Unsubscribe(lost);
    natsSubscription_Destroy(lost);
    for (unsigned i = 1; i < N; i++) {
        memset(body, 'a' + (int)(i % 26), sizeof body);
        snprintf(body, 12, "m%010u", i);
        assert_int_equal(js_Publish(NULL, js, "gp", body, sizeof body, NULL, &jerr), NATS_OK);
    }
    shmobj_queue *qb;
    assert_int_equal(shmobj_queue_open_or_create(w.b, "jobs", 1024, 0, &qb), 0);
    pid_t bb = bridge_start(w.seg_b, "gpb", w.url,
                            "stream:GP/gp -> queue:jobs durable=GPD ack-wait-ms=3000", NULL);
    unsigned char seen[N] = {0};
    unsigned dups = 0;
    unsigned got = take_all(qb, N, N, seen, &dups, 15);
    if (!seen[0])
        print_message("the first message, delivered again after the others, was not put\n");
    assert_int_equal(got, N);
    assert_int_equal(dups, 0);
    assert_int_equal(reap(bb, SIGTERM, 10), 0);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    shmobj_queue_close(qb);
    world_down(&w);
}

static unsigned state_keys(shmobj_map *m, const char *prefix)
{
    shmobj_map_iter *it;
    unsigned n = 0;
    const void *k, *v;
    size_t kl, vl;
    assert_int_equal(shmobj_map_iter_open(m, &it), 0);
    while (shmobj_map_iter_next(it, &k, &kl, &v, &vl) == 0)
        if (kl >= strlen(prefix) && memcmp(k, prefix, strlen(prefix)) == 0)
            n++;
    shmobj_map_iter_close(it);
    return n;
}

/* A route that takes one subject of a stream with two sees gaps in the
 * stream's sequences: it puts every message of its subject once, and the
 * sequences it records above its floor go once the server's ack floor
 * passes them (they would otherwise grow without end). */
static void test_bridge_stream_of_two_subjects_floor_rises(void **state)
{
    (void)state;
    struct world w;
    world_up(&w, NULL);
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(natsConnection_ConnectTo(&nc, w.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    const char *subjects[] = {"gx.a", "gx.b"};
    sc.Name = "GX";
    sc.Subjects = subjects;
    sc.SubjectsLen = 2;
    assert_int_equal(js_AddStream(NULL, js, &sc, NULL, &jerr), NATS_OK);
    enum { N = 60 };
    char body[100];
    for (unsigned i = 0; i < 2 * N; i++) {
        unsigned id = i / 2;
        memset(body, 'a' + (int)(id % 26), sizeof body);
        snprintf(body, 12, "m%010u", id);
        assert_int_equal(js_Publish(NULL, js, i % 2 ? "gx.b" : "gx.a", body, sizeof body, NULL,
                                    &jerr), NATS_OK);
    }
    shmobj_queue *qb;
    shmobj_map *st;
    assert_int_equal(shmobj_queue_open_or_create(w.b, "jobs", 1024, 0, &qb), 0);
    assert_int_equal(shmobj_map_open_or_create(w.b, "shmobj-bridge", &st), 0);
    pid_t bb = bridge_start(w.seg_b, "gxb", w.url, "stream:GX/gx.a -> queue:jobs", NULL);
    unsigned char seen[N] = {0};
    unsigned dups = 0;
    assert_int_equal(take_all(qb, N, N, seen, &dups, 15), N);
    unsigned above = N;
    for (int i = 0; i < 100 && above > 0; i++) {
        msleep(100);
        above = state_keys(st, "in:jobs.in:");
    }
    assert_int_equal(above, 0);
    assert_int_equal(state_keys(st, "in:jobs.in"), 1); /* the floor */
    /* killed and started again: nothing is put twice */
    assert_int_equal(reap(bb, SIGKILL, 10), 128 + SIGKILL);
    bb = bridge_start(w.seg_b, "gxb", w.url, "stream:GX/gx.a -> queue:jobs", NULL);
    assert_int_equal(take_all(qb, 1, N, seen, &dups, 2), 0);
    assert_int_equal(dups, 0);
    assert_int_equal(reap(bb, SIGTERM, 10), 0);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    shmobj_map_close(st);
    shmobj_queue_close(qb);
    world_down(&w);
}

/* The consumer's deliveries as the cluster counts them: more deliveries
 * than messages are redeliveries (of deliveries lost with the node, or of
 * acks lost with it). */
static void consumer_line(const char *url, const char *stream, const char *durable)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    if (natsConnection_ConnectTo(&nc, url) == NATS_OK &&
        natsConnection_JetStream(&js, nc, NULL) == NATS_OK &&
        js_GetConsumerInfo(&ci, js, stream, durable, NULL, &jerr) == NATS_OK) {
        print_message("consumer %s: %llu deliveries of %llu messages\n", durable,
                      (unsigned long long)ci->Delivered.Consumer,
                      (unsigned long long)ci->Delivered.Stream);
        jsConsumerInfo_Destroy(ci);
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}

/* What a shortfall of the cluster test is: the ids still missing, the
 * stream's and the consumer's state as the cluster sees them, which of the
 * missing ids the stream holds, and the bridges' last status lines. */
static void cluster_report(const char *url, const unsigned char *seen, unsigned n,
                           const char *stream, const char *durable)
{
    unsigned miss = 0;
    print_message("missing ids:");
    for (unsigned i = 0; i < n; i++)
        if (!seen[i] && miss++ < 40)
            print_message(" %u", i);
    print_message(" (%u in all)\n", miss);
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    if (natsConnection_ConnectTo(&nc, url) != NATS_OK ||
        natsConnection_JetStream(&js, nc, NULL) != NATS_OK) {
        print_message("no connection to the cluster: %s\n", nats_GetLastError(NULL));
        natsConnection_Destroy(nc);
        return;
    }
    jsStreamInfo *si = NULL;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    if (js_GetStreamInfo(&si, js, stream, NULL, &jerr) == NATS_OK) {
        print_message("stream %s: msgs %llu first %llu last %llu\n", stream,
                      (unsigned long long)si->State.Msgs,
                      (unsigned long long)si->State.FirstSeq,
                      (unsigned long long)si->State.LastSeq);
        unsigned char *in_stream = calloc(n, 1);
        for (uint64_t q = si->State.FirstSeq; q <= si->State.LastSeq; q++) {
            natsMsg *m = NULL;
            if (js_GetMsg(&m, js, stream, q, NULL, &jerr) != NATS_OK)
                continue;
            unsigned i = (unsigned)strtoul(natsMsg_GetData(m) + 1, NULL, 10);
            if (i < n) {
                if (!seen[i])
                    print_message("missing id %u is stream sequence %llu\n", i,
                                  (unsigned long long)q);
                in_stream[i] = 1;
            }
            natsMsg_Destroy(m);
        }
        for (unsigned i = 0; i < n; i++)
            if (!in_stream[i])
                print_message("id %u is not in the stream\n", i);
        free(in_stream);
        jsStreamInfo_Destroy(si);
    } else {
        print_message("stream info: %s\n", nats_GetLastError(NULL));
    }
    if (js_GetConsumerInfo(&ci, js, stream, durable, NULL, &jerr) == NATS_OK) {
        print_message("consumer %s: delivered %llu/%llu ack floor %llu/%llu ack pending %lld "
                      "redelivered %lld pending %llu\n", durable,
                      (unsigned long long)ci->Delivered.Consumer,
                      (unsigned long long)ci->Delivered.Stream,
                      (unsigned long long)ci->AckFloor.Consumer,
                      (unsigned long long)ci->AckFloor.Stream, (long long)ci->NumAckPending,
                      (long long)ci->NumRedelivered, (unsigned long long)ci->NumPending);
        jsConsumerInfo_Destroy(ci);
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "tail -n 1 '%s/cla.out' '%s/clb.out'; cat '%s/cla.err' '%s/clb.err'",
             tmpdir, tmpdir, tmpdir, tmpdir);
    if (system(cmd) != 0)
        print_message("no bridge output\n");
}

/* Three nodes on loopback; the stream has three replicas; the node the
 * bridges were told of first dies while messages flow, and none is lost.
 * Deliveries that were on their way through the dead node come again
 * after the ack wait, behind later ones: the inbound route used to take
 * them for redeliveries of messages it had put and acknowledged them
 * without a put (47 of 1,000 lost in one run under load; what
 * test_bridge_lost_delivery_put_later checks without a cluster). On a
 * shortfall the test says which ids are missing, whether the stream has
 * them, and what the consumer delivered. In the default suite (a run takes
 * 3 to 33 s, median 9 s, on a loaded 2-CPU machine); SHMOBJ_BRIDGE_CLUSTER=0
 * skips it. */
static void test_bridge_cluster_node_dies(void **state)
{
    (void)state;
    const char *run = getenv("SHMOBJ_BRIDGE_CLUSTER");
    if (run != NULL && strcmp(run, "0") == 0) {
        print_message("skipped: SHMOBJ_BRIDGE_CLUSTER=0\n");
        skip();
    }
    int port[3], cport[3];
    pid_t node[3];
    char conf[3][512], dir[3][512], url[256];
    for (int i = 0; i < 3; i++) {
        port[i] = free_port();
        cport[i] = free_port();
    }
    for (int i = 0; i < 3; i++) {
        snprintf(conf[i], sizeof conf[i], "%s/node%d.conf", tmpdir, i);
        snprintf(dir[i], sizeof dir[i], "%s/node%d", tmpdir, i);
        FILE *f = fopen(conf[i], "w");
        fprintf(f, "server_name: n%d\njetstream { store_dir: \"%s\" }\n"
                   "cluster { name: c1, listen: 127.0.0.1:%d, routes: [", i, dir[i], cport[i]);
        for (int j = 0; j < 3; j++)
            fprintf(f, "%snats-route://127.0.0.1:%d", j ? ", " : "", cport[j]);
        fprintf(f, "] }\n");
        fclose(f);
    }
    for (int i = 0; i < 3; i++)
        node[i] = nats_start(port[i], dir[i], conf[i]);
    msleep(1500); /* the nodes find each other and elect a leader */
    snprintf(url, sizeof url, "nats://127.0.0.1:%d,nats://127.0.0.1:%d,nats://127.0.0.1:%d",
             port[0], port[1], port[2]);
    struct world w;
    memset(&w, 0, sizeof w);
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    test_name(w.seg_a, sizeof w.seg_a, "bca");
    test_name(w.seg_b, sizeof w.seg_b, "bcb");
    seg_add(w.seg_a);
    seg_add(w.seg_b);
    assert_int_equal(shmobj_segment_create(w.seg_a, &o, &w.a), 0);
    assert_int_equal(shmobj_segment_create(w.seg_b, &o, &w.b), 0);
    /* the cluster elects its JetStream leader: the bridges retry until then */
    pid_t ba = bridge_start(w.seg_a, "cla", url, "queue:jobs -> stream:CL/cl replicas=3", NULL);
    /* a delivery lost with the node comes again after the ack wait */
    pid_t bb = bridge_start(w.seg_b, "clb", url,
                            "stream:CL/cl -> queue:jobs replicas=3 durable=CLD ack-wait-ms=2000",
                            NULL);
    shmobj_queue *qa, *qb;
    assert_int_equal(shmobj_queue_open_or_create(w.a, "jobs", 1024, 0, &qa), 0);
    assert_int_equal(shmobj_queue_open_or_create(w.b, "jobs", 1024, 0, &qb), 0);
    enum { N = 1000 };
    unsigned char *seen = calloc(N, 1);
    unsigned dups = 0, got = 0;
    for (unsigned i = 0; i < N / 2; i++)
        put_msg(qa, i, 100);
    got += take_all(qb, N / 4, N, seen, &dups, 40);
    int64_t kill_at = now_ns();
    reap(node[0], SIGKILL, 10);
    for (unsigned i = N / 2; i < N; i++)
        put_msg(qa, i, 100);
    got += take_all(qb, N - got, N, seen, &dups, 40);
    print_message("%u of %u messages %.1f s after the kill\n", got, N,
                  (double)(now_ns() - kill_at) / 1e9);
    consumer_line(url, "CL", "CLD");
    if (got < N) {
        cluster_report(url, seen, N, "CL", "CLD");
        unsigned late = take_all(qb, N - got, N, seen, &dups, 40);
        print_message("%u more arrived in the next 40 s\n", late);
        got += late;
        if (late)
            cluster_report(url, seen, N, "CL", "CLD");
    }
    assert_int_equal(got, N);
    assert_int_equal(dups, 0);
    assert_int_equal(reap(ba, SIGTERM, 10), 0);
    assert_int_equal(reap(bb, SIGTERM, 10), 0);
    for (int i = 1; i < 3; i++)
        reap(node[i], SIGTERM, 10);
    free(seen);
    shmobj_queue_close(qa);
    shmobj_queue_close(qb);
    world_down(&w);
}

static int rm_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

int main(int argc, char **argv)
{
    bridge_path = argc > 1 ? argv[1] : getenv("SHMOBJ_BRIDGE");
    const char *cands[] = {"/usr/sbin/nats-server", "/usr/bin/nats-server",
                           "/usr/local/bin/nats-server"};
    const char *env = getenv("NATS_SERVER");
    if (env != NULL)
        snprintf(nats_path, sizeof nats_path, "%s", env);
    for (size_t i = 0; nats_path[0] == 0 && i < 3; i++)
        if (access(cands[i], X_OK) == 0)
            snprintf(nats_path, sizeof nats_path, "%s", cands[i]);
    if (bridge_path == NULL || nats_path[0] == 0) {
        printf("skipped: nats-server not found (install the Debian package nats-server)\n");
        return 77;
    }
    snprintf(tmpdir, sizeof tmpdir, "%s/shmobj-bridge-test-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_bridge_config_bad_lines_einval, teardown),
        cmocka_unit_test_teardown(test_bridge_cbor_round_trip_same_object, teardown),
        cmocka_unit_test_teardown(test_bridge_queue_to_queue_two_hosts, teardown),
        cmocka_unit_test_teardown(test_bridge_server_restart_nothing_lost, teardown),
        cmocka_unit_test_teardown(test_bridge_killed_at_random_resumes, teardown),
        cmocka_unit_test_teardown(test_bridge_full_local_queue_backpressure, teardown),
        cmocka_unit_test_teardown(test_bridge_oversize_message_counted, teardown),
        cmocka_unit_test_teardown(test_bridge_bad_credentials_clear_error, teardown),
        cmocka_unit_test_teardown(test_bridge_map_kv_both_ways, teardown),
        cmocka_unit_test_teardown(test_bridge_topic_to_topic, teardown),
        cmocka_unit_test_teardown(test_bridge_lost_delivery_put_later, teardown),
        cmocka_unit_test_teardown(test_bridge_stream_of_two_subjects_floor_rises, teardown),
        cmocka_unit_test_teardown(test_bridge_cluster_node_dies, teardown),
    };
    test_filter_from_env();
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (rc == 0)
        rm_tree(tmpdir);
    else
        fprintf(stderr, "logs kept in %s\n", tmpdir);
    return rc;
}
