/*
 * B1: messages from a local queue on host A to a local queue on host B
 * through the NATS bridges and one local `nats-server -js` (doc/benchmarks.md,
 * doc/bridge.md). The peer, nats-direct, is what a user writes without us:
 * a publisher on the NATS C client sending the same messages asynchronously
 * to JetStream (with a Nats-Msg-Id each, as the bridge does, so both get the
 * same de-duplication) and a durable consumer with explicit acks and the
 * same bound on unacknowledged messages receiving them. Each run starts its
 * own server with its store in a fresh temporary folder and makes the
 * stream the same way for both subjects.
 *
 * Figures: Kmsgs/s and MiB/s for N messages sent as fast as the sender can
 * (from the first send to the last receive; the receiver reads every byte),
 * then latency-median-us and latency-p99-us of single messages sent one at
 * a time (send to receive, one clock for both processes).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <nats/nats.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <shmobj.h>

#include "bench-util.h"

#define WINDOW 256 /* publishes awaiting their ack, both subjects */
#define BATCH 64   /* unacknowledged deliveries, both subjects */

struct server {
    pid_t pid;
    int port;
    char dir[256];
    char url[64];
};

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    close(fd);
    return ntohs(a.sin_port);
}

static int port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static const char *nats_server_path(void)
{
    static const char *c[] = {"/usr/sbin/nats-server", "/usr/bin/nats-server",
                              "/usr/local/bin/nats-server"};
    for (size_t i = 0; i < 3; i++)
        if (access(c[i], X_OK) == 0)
            return c[i];
    return NULL;
}

static int server_start(struct server *s)
{
    const char *path = nats_server_path();
    if (path == NULL)
        return BENCH_SKIP;
    snprintf(s->dir, sizeof s->dir, "%s/shmobj-b1-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(s->dir) == NULL || (s->port = free_port()) < 0)
        return 1;
    snprintf(s->url, sizeof s->url, "nats://127.0.0.1:%d", s->port);
    char p[16];
    snprintf(p, sizeof p, "%d", s->port);
    s->pid = fork();
    if (s->pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(path, "nats-server", "-js", "-a", "127.0.0.1", "-p", p, "-sd", s->dir,
              (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 400 && !port_open(s->port); i++)
        usleep(10000);
    return port_open(s->port) ? 0 : 1;
}

static void server_stop(struct server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s->dir);
}

/* The stream both subjects use: file storage, a 2-minute de-duplication
 * window (the bridge's own when it makes one). */
static int stream_make(const char *url)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamInfo *si = NULL;
    natsStatus st = natsConnection_ConnectTo(&nc, url);
    if (st == NATS_OK)
        st = natsConnection_JetStream(&js, nc, NULL);
    if (st == NATS_OK) {
        jsStreamConfig sc;
        jsStreamConfig_Init(&sc);
        sc.Name = "B1";
        const char *subj[1] = {"b1"};
        sc.Subjects = subj;
        sc.SubjectsLen = 1;
        sc.Duplicates = 120 * (int64_t)1000000000;
        st = js_AddStream(&si, js, &sc, NULL, NULL);
    }
    jsStreamInfo_Destroy(si);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return st == NATS_OK ? 0 : 1;
}

struct params {
    size_t size;
    uint64_t n;      /* throughput messages */
    uint64_t rounds; /* latency samples */
};

static void params_of(const bench_ctx *ctx, struct params *p)
{
    p->size = ctx->arg;
    if (p->size <= 1024) {
        p->n = ctx->quick ? 20000 : 100000;
        p->rounds = ctx->quick ? 300 : 1000;
    } else {
        p->n = ctx->quick ? 2000 : 10000;
        p->rounds = ctx->quick ? 200 : 500;
    }
}

/* A message: its number, its send time, then filler; the receiver checks
 * the number and sums every word. */
static void fill(unsigned char *m, size_t size, uint64_t i)
{
    uint64_t t = bench_now_ns();
    memcpy(m, &i, 8);
    memcpy(m + 8, &t, 8);
    for (size_t k = 16; k + 8 <= size; k += 8)
        memcpy(m + k, &i, 8);
}

static void report(const bench_ctx *ctx, const struct params *p, uint64_t t_ns,
                   uint64_t *lat, uint64_t rounds)
{
    double secs = (double)t_ns / 1e9;
    bench_report(ctx, "Kmsgs/s", (double)p->n / secs / 1e3);
    bench_report(ctx, "MiB/s", (double)p->n * (double)p->size / secs / 1048576.0);
    bench_report(ctx, "latency-median-us", (double)bench_percentile(lat, rounds, 50) / 1e3);
    bench_report(ctx, "latency-p99-us", (double)bench_percentile(lat, rounds, 99) / 1e3);
}

/* ---- shmobj-bridge --------------------------------------------------------- */

static pid_t bridge_start(const char *seg, const char *name, const char *url,
                          const char *route)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(SHMOBJ_BRIDGE_PATH, "shmobj-bridge", "--segment", seg, "--name", name,
              "--url", url, "--route", route, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int take_check(shmobj_queue *q, uint64_t want, size_t size, uint64_t *sent_at)
{
    shmobj_ref ref;
    int rc = shmobj_queue_take_timed(q, &ref, 30000000000);
    if (rc != 0)
        return bench_fail("take: %s", shmobj_strerror(rc));
    void *d;
    size_t len;
    if ((rc = shmobj_queue_msg_data(q, ref, &d, &len)) != 0 || len != size)
        return bench_fail("message: %s, %zu bytes", shmobj_strerror(rc), len);
    uint64_t i;
    memcpy(&i, d, 8);
    memcpy(sent_at, (char *)d + 8, 8);
    volatile uint64_t sum = bench_sum64(d, len);
    (void)sum;
    shmobj_queue_msg_done(q, ref);
    return i == want ? 0 : bench_fail("message %llu where %llu was due",
                                      (unsigned long long)i, (unsigned long long)want);
}

static int run_bridge(const bench_ctx *ctx)
{
    struct params p;
    params_of(ctx, &p);
    struct server s;
    int rc = server_start(&s);
    if (rc != 0) {
        server_stop(&s);
        return rc == BENCH_SKIP ? bench_skip("nats-server is not installed") :
                                  bench_fail("nats-server did not start");
    }
    if (stream_make(s.url) != 0) {
        server_stop(&s);
        return bench_fail("cannot make the stream");
    }
    char na[64], nb[64];
    snprintf(na, sizeof na, "shmobj-b1a-%ld", (long)getpid());
    snprintf(nb, sizeof nb, "shmobj-b1b-%ld", (long)getpid());
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.max_size = 1ull << 30;
    shmobj_segment *a = NULL, *b = NULL;
    shmobj_queue *qa = NULL, *qb = NULL;
    pid_t ba = -1, bb = -1;
    uint64_t *lat = bench_alloc(p.rounds * sizeof *lat);
    unsigned char *m = bench_alloc(p.size);
    if ((rc = shmobj_segment_create(na, &o, &a)) != 0 ||
        (rc = shmobj_segment_create(nb, &o, &b)) != 0 ||
        (rc = shmobj_queue_create(a, "q", 1024, 0, &qa)) != 0 ||
        (rc = shmobj_queue_create(b, "q", 1024, 0, &qb)) != 0) {
        rc = bench_fail("segments: %s", shmobj_strerror(rc));
        goto out;
    }
    char route[128];
    snprintf(route, sizeof route, "queue:q -> stream:B1/b1 window=%d", WINDOW);
    ba = bridge_start(na, "b1a", s.url, route);
    snprintf(route, sizeof route, "stream:B1/b1 -> queue:q batch=%d", BATCH);
    bb = bridge_start(nb, "b1b", s.url, route);
    /* warm up: the routes are up once one message went through */
    fill(m, p.size, 0);
    uint64_t t0;
    if ((rc = shmobj_queue_put_copy(qa, m, p.size, 0, SHMOBJ_FOREVER, NULL)) != 0 ||
        (rc = take_check(qb, 0, p.size, &t0)) != 0)
        goto out;
    /* throughput: a sending thread would be this one; the receiver runs in
     * a forked process so the two do not share a CPU's time slices */
    pid_t rx = fork();
    if (rx == 0) {
        for (uint64_t i = 1; i <= p.n; i++)
            if (take_check(qb, i, p.size, &t0) != 0)
                _exit(1);
        _exit(0);
    }
    uint64_t start = bench_now_ns();
    for (uint64_t i = 1; i <= p.n; i++) {
        fill(m, p.size, i);
        if ((rc = shmobj_queue_put_copy(qa, m, p.size, 0, SHMOBJ_FOREVER, NULL)) != 0) {
            rc = bench_fail("put: %s", shmobj_strerror(rc));
            goto out;
        }
    }
    int st = 0;
    waitpid(rx, &st, 0);
    uint64_t t = bench_now_ns() - start;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        rc = bench_fail("receiver failed");
        goto out;
    }
    for (uint64_t r = 0; r < p.rounds; r++) {
        uint64_t i = p.n + 1 + r, sent;
        fill(m, p.size, i);
        if ((rc = shmobj_queue_put_copy(qa, m, p.size, 0, SHMOBJ_FOREVER, NULL)) != 0 ||
            (rc = take_check(qb, i, p.size, &sent)) != 0)
            goto out;
        lat[r] = bench_now_ns() - sent;
    }
    report(ctx, &p, t, lat, p.rounds);
    rc = 0;
out:
    if (ba > 0) {
        kill(ba, SIGTERM);
        waitpid(ba, NULL, 0);
    }
    if (bb > 0) {
        kill(bb, SIGTERM);
        waitpid(bb, NULL, 0);
    }
    shmobj_queue_close(qa);
    shmobj_queue_close(qb);
    shmobj_segment_close(a);
    shmobj_segment_close(b);
    shmobj_segment_destroy(na, SHMOBJ_BACKEND_SHM);
    shmobj_segment_destroy(nb, SHMOBJ_BACKEND_SHM);
    server_stop(&s);
    free(lat);
    free(m);
    return rc;
}

/* ---- nats-direct ------------------------------------------------------------ */

static void on_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *arg)
{
    (void)js;
    (void)pa;
    if (pae != NULL)
        atomic_fetch_add((_Atomic uint64_t *)arg, 1);
    natsMsg_Destroy(msg);
}

static int direct_publish(jsCtx *js, const unsigned char *m, size_t size, uint64_t i)
{
    natsMsg *msg = NULL;
    char id[32];
    snprintf(id, sizeof id, "direct.%llu", (unsigned long long)i);
    natsStatus st = natsMsg_Create(&msg, "b1", NULL, (const char *)m, (int)size);
    if (st == NATS_OK)
        st = natsMsgHeader_Set(msg, "Nats-Msg-Id", id);
    if (st == NATS_OK)
        st = js_PublishMsgAsync(js, &msg, NULL);
    natsMsg_Destroy(msg);
    return st == NATS_OK ? 0 : bench_fail("publish: %s", natsStatus_GetText(st));
}

static int direct_take(natsSubscription *sub, uint64_t want, size_t size, uint64_t *sent_at)
{
    natsMsg *msg = NULL;
    natsStatus st = natsSubscription_NextMsg(&msg, sub, 30000);
    if (st != NATS_OK)
        return bench_fail("receive: %s", natsStatus_GetText(st));
    const unsigned char *d = (const unsigned char *)natsMsg_GetData(msg);
    size_t len = (size_t)natsMsg_GetDataLength(msg);
    uint64_t i = 0;
    if (len == size) {
        memcpy(&i, d, 8);
        memcpy(sent_at, d + 8, 8);
        volatile uint64_t sum = bench_sum64(d, len);
        (void)sum;
    }
    natsMsg_Ack(msg, NULL);
    natsMsg_Destroy(msg);
    return len == size && i == want ? 0 : bench_fail("message %llu where %llu was due",
                                                     (unsigned long long)i,
                                                     (unsigned long long)want);
}

static int direct_consumer(const char *url, natsConnection **nc, natsSubscription **sub)
{
    jsCtx *js = NULL;
    natsStatus st = natsConnection_ConnectTo(nc, url);
    if (st == NATS_OK)
        st = natsConnection_JetStream(&js, *nc, NULL);
    if (st == NATS_OK) {
        jsSubOptions so;
        jsSubOptions_Init(&so);
        so.Stream = "B1";
        so.ManualAck = true;
        so.Config.Durable = "direct";
        so.Config.AckPolicy = js_AckExplicit;
        so.Config.MaxAckPending = BATCH;
        st = js_SubscribeSync(sub, js, "b1", NULL, &so, NULL);
    }
    jsCtx_Destroy(js);
    return st == NATS_OK ? 0 : 1;
}

static int run_direct(const bench_ctx *ctx)
{
    struct params p;
    params_of(ctx, &p);
    struct server s;
    int rc = server_start(&s);
    if (rc != 0) {
        server_stop(&s);
        return rc == BENCH_SKIP ? bench_skip("nats-server is not installed") :
                                  bench_fail("nats-server did not start");
    }
    uint64_t *lat = bench_alloc(p.rounds * sizeof *lat);
    unsigned char *m = bench_alloc(p.size);
    natsConnection *nc = NULL, *cnc = NULL;
    natsSubscription *sub = NULL;
    jsCtx *js = NULL;
    _Atomic uint64_t errors = 0;
    if (stream_make(s.url) != 0 || natsConnection_ConnectTo(&nc, s.url) != NATS_OK) {
        rc = bench_fail("cannot make the stream");
        goto out;
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = WINDOW;
    jo.PublishAsync.AckHandler = on_ack;
    jo.PublishAsync.AckHandlerClosure = &errors;
    if (natsConnection_JetStream(&js, nc, &jo) != NATS_OK ||
        direct_consumer(s.url, &cnc, &sub) != 0) {
        rc = bench_fail("cannot start the consumer");
        goto out;
    }
    uint64_t t0;
    fill(m, p.size, 0);
    if ((rc = direct_publish(js, m, p.size, 0)) != 0 ||
        (rc = direct_take(sub, 0, p.size, &t0)) != 0)
        goto out;
    /* the receiver in a forked process, as for the bridge: its own
     * connection and the same durable consumer */
    natsSubscription_Destroy(sub);
    sub = NULL;
    natsConnection_Destroy(cnc);
    cnc = NULL;
    fflush(stdout);
    pid_t rx = fork();
    if (rx == 0) {
        natsConnection *rnc = NULL;
        natsSubscription *rsub = NULL;
        if (direct_consumer(s.url, &rnc, &rsub) != 0)
            _exit(1);
        for (uint64_t i = 1; i <= p.n; i++)
            if (direct_take(rsub, i, p.size, &t0) != 0)
                _exit(1);
        natsSubscription_Destroy(rsub);
        natsConnection_Destroy(rnc);
        _exit(0);
    }
    uint64_t start = bench_now_ns();
    for (uint64_t i = 1; i <= p.n; i++) {
        fill(m, p.size, i);
        if ((rc = direct_publish(js, m, p.size, i)) != 0)
            goto out;
    }
    int st = 0;
    waitpid(rx, &st, 0);
    uint64_t t = bench_now_ns() - start;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || atomic_load(&errors) != 0) {
        rc = bench_fail("receiver failed or publishes were refused");
        goto out;
    }
    if (direct_consumer(s.url, &cnc, &sub) != 0) {
        rc = bench_fail("cannot start the consumer again");
        goto out;
    }
    for (uint64_t r = 0; r < p.rounds; r++) {
        uint64_t i = p.n + 1 + r, sent;
        fill(m, p.size, i);
        if ((rc = direct_publish(js, m, p.size, i)) != 0 ||
            (rc = direct_take(sub, i, p.size, &sent)) != 0)
            goto out;
        lat[r] = bench_now_ns() - sent;
    }
    report(ctx, &p, t, lat, p.rounds);
    rc = 0;
out:
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(cnc);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    server_stop(&s);
    free(lat);
    free(m);
    return rc;
}

int main(int argc, char **argv)
{
    static const bench_entry table[] = {
        {"B1-1K", "shmobj-bridge", run_bridge, 1024},
        {"B1-1K", "nats-direct", run_direct, 1024},
        {"B1-64K", "shmobj-bridge", run_bridge, 65536},
        {"B1-64K", "nats-direct", run_direct, 65536},
        {NULL, NULL, NULL, 0}};
    return bench_main(argc, argv, table);
}
