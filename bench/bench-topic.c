/*
 * bench-topic - workload P1 of doc/benchmarks.md: fan-out. One publisher
 * process, N subscriber processes, each subscriber reading every byte of
 * every message (bench_sum64) and checking the sum at the end.
 *
 * Subjects:
 *   shmobj-<N>sub     a topic (N = 1, 2, 4, 8): the publisher writes each
 *                     message once, into a loan, and publishes it by
 *                     reference; every subscriber reads it in place.
 *   queue-copy-4sub   one shmobj queue per subscriber, the message copied
 *                     into each (shmobj_queue_put_copy): what a user does
 *                     without topics.
 *   ring-copy-4sub    one single-producer/single-consumer ring per
 *                     subscriber in a shared mapping, the message memcpy'd
 *                     into each: the same ring design as bench-transport's
 *                     shm-ring (indexes on their own lines, cached copies
 *                     of the other side's index), waiting by a short spin
 *                     then sched_yield, since 5 processes share 2 CPUs.
 *   unix-socket-4sub  a Unix stream socket pair per subscriber.
 *   boost-4sub        a Boost.Interprocess message_queue per subscriber,
 *                     the message sent into each: in bench-topic-boost
 *                     (C++), which this program execs for that subject.
 *
 * Every message is the same pattern with its sequence number in the first
 * word, so the expected sum is known to both sides. The publisher produces
 * each message once from a private source buffer (one memcpy); the copy
 * peers then copy it into each subscriber's channel. The clock starts in
 * the publisher after every subscriber joined (a barrier) and stops when
 * the slowest subscriber has summed its last message: Mmsgs/s and GiB/s
 * are those of the slowest subscriber.
 *
 * shmobj-1sub on P1-64 also measures a ping-pong over two topics (round
 * trip, publish to take of the echo, the taker spinning), comparable with
 * W2's shmobj-spin.
 */
#include "bench-fanout.h"
#include "peers-util.h"

#include <stdatomic.h>
#include <sys/socket.h>

#include "shmobj.h"

#define MAXSUB FANOUT_MAXSUB
#define CACHELINE 64

struct job {
    const bench_ctx *ctx;
    struct fanout_ctl *ctl;
    unsigned nsub, id;
    size_t size;
    uint64_t count;
    shmobj_segment *seg;
    shmobj_topic *topic;
    shmobj_queue *q[MAXSUB];
    struct ring *ring[MAXSUB];
    int sock[MAXSUB][2];
};

static void wait_go(struct fanout_ctl *c)
{
    fanout_wait_go(c);
}

static void start_clock(struct job *j)
{
    fanout_start_clock(j->ctl, j->nsub);
}

static int segment_new(uint64_t size, shmobj_segment **seg)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.initial_size = size;
    return shmobj_segment_create("bench-topic", &o, seg);
}

/* ---- the topic ------------------------------------------------------------- */

static int topic_sub(void *arg)
{
    struct job *j = arg;
    shmobj_topic_sub *s;
    if (shmobj_topic_subscribe(j->topic, &s) != 0)
        return 2;
    /* more subscribers than CPUs: a spinning one keeps the CPU from the
     * others (the ring peer yields for the same reason) */
    if (j->nsub + 1 > (unsigned)bench_ncpus())
        shmobj_topic_spin_set(s, 0);
    wait_go(j->ctl);
    uint64_t sum = 0, got = 0;
    shmobj_topic_msg m[64];
    while (got < j->count) {
        unsigned n;
        int rc = shmobj_topic_take_batch(s, m, 64, &n, SHMOBJ_FOREVER);
        if (rc != 0)
            return 3;
        for (unsigned i = 0; i < n; i++) {
            if (m[i].len != j->size)
                return 4;
            sum += bench_sum64(m[i].data, j->size);
        }
        got += n;
        if (shmobj_topic_release(s, &m[n - 1]) != 0)
            return 5;
    }
    j->ctl->t_end[j->id] = bench_now_ns();
    j->ctl->sum[j->id] = sum;
    shmobj_topic_unsubscribe(s);
    return 0;
}

static int topic_pub(struct job *j, const uint64_t *src)
{
    for (uint64_t i = 0; i < j->count; i++) {
        shmobj_topic_loan loan;
        if (shmobj_topic_loan_get(j->topic, j->size, &loan) != 0)
            return -1;
        memcpy(loan.data, src, j->size);
        ((uint64_t *)loan.data)[0] = i;
        if (shmobj_topic_loan_publish(j->topic, &loan, j->size, SHMOBJ_FOREVER) != 0)
            return -1;
    }
    return 0;
}

#define PING_WARMUP 1000

static int ping_child(void *arg)
{
    struct job *j = arg;
    shmobj_topic *ping, *pong;
    if (shmobj_topic_open(j->seg, "ping", &ping) != 0 ||
        shmobj_topic_open(j->seg, "pong", &pong) != 0)
        return 2;
    shmobj_topic_sub *s;
    if (shmobj_topic_subscribe(ping, &s) != 0)
        return 2;
    shmobj_topic_spin_set(s, 1000000000);
    bench_pin(1); /* as W2's ping-pong: one side per CPU */
    wait_go(j->ctl);
    for (uint64_t i = 0; i < j->count + PING_WARMUP; i++) {
        shmobj_topic_msg m;
        if (shmobj_topic_take(s, &m, SHMOBJ_FOREVER) != 0)
            return 3;
        shmobj_topic_loan loan;
        if (shmobj_topic_loan_get(pong, m.len, &loan) != 0)
            return 4;
        memcpy(loan.data, m.data, m.len);
        if (shmobj_topic_release(s, &m) != 0 ||
            shmobj_topic_loan_publish(pong, &loan, m.len, SHMOBJ_FOREVER) != 0)
            return 5;
    }
    shmobj_topic_unsubscribe(s);
    return 0;
}

static int pingpong(struct job *parent, uint64_t rounds, uint64_t *samples)
{
    struct job j = *parent;
    shmobj_topic_config cfg;
    shmobj_topic_config_init(&cfg);
    cfg.capacity = 64;
    shmobj_topic *ping, *pong;
    if (shmobj_topic_create(j.seg, "ping", &cfg, &ping) != 0 ||
        shmobj_topic_create(j.seg, "pong", &cfg, &pong) != 0)
        return -1;
    shmobj_topic_sub *s;
    if (shmobj_topic_subscribe(pong, &s) != 0)
        return -1;
    shmobj_topic_spin_set(s, 1000000000);
    memset(j.ctl, 0, sizeof *j.ctl);
    j.count = rounds;
    j.nsub = 1;
    pid_t pid = bench_fork(ping_child, &j);
    if (pid < 0)
        return -1;
    bench_pin(0);
    start_clock(&j);
    uint64_t msg[8] = {0};
    int rc = 0;
    for (uint64_t i = 0; i < rounds + PING_WARMUP && rc == 0; i++) {
        msg[0] = i;
        uint64_t t0 = bench_now_ns();
        shmobj_topic_loan loan;
        shmobj_topic_msg m;
        if (shmobj_topic_loan_get(ping, sizeof msg, &loan) != 0) {
            rc = -1;
            break;
        }
        memcpy(loan.data, msg, sizeof msg);
        if (shmobj_topic_loan_publish(ping, &loan, sizeof msg, SHMOBJ_FOREVER) != 0 ||
            shmobj_topic_take(s, &m, SHMOBJ_FOREVER) != 0) {
            rc = -1;
            break;
        }
        uint64_t echo = ((const uint64_t *)m.data)[0];
        shmobj_topic_release(s, &m);
        uint64_t t1 = bench_now_ns();
        if (echo != i)
            rc = -1;
        if (i >= PING_WARMUP)
            samples[i - PING_WARMUP] = t1 - t0;
    }
    int st = bench_wait(pid, 120000);
    shmobj_topic_unsubscribe(s);
    shmobj_topic_close(ping);
    shmobj_topic_close(pong);
    return rc == 0 && st == 0 ? 0 : -1;
}

/* ---- one queue per subscriber ------------------------------------------------ */

static int queue_sub(void *arg)
{
    struct job *j = arg;
    shmobj_queue *q = j->q[j->id];
    wait_go(j->ctl);
    uint64_t sum = 0, got = 0;
    shmobj_ref refs[64];
    while (got < j->count) {
        size_t n;
        if (shmobj_queue_take_many(q, refs, 64, SHMOBJ_FOREVER, &n) != 0)
            return 3;
        for (size_t i = 0; i < n; i++) {
            void *data;
            size_t len;
            if (shmobj_queue_msg_data(q, refs[i], &data, &len) != 0 || len != j->size)
                return 4;
            sum += bench_sum64(data, j->size);
            if (shmobj_queue_msg_done(q, refs[i]) != 0)
                return 5;
        }
        got += n;
    }
    j->ctl->t_end[j->id] = bench_now_ns();
    j->ctl->sum[j->id] = sum;
    return 0;
}

static int queue_pub(struct job *j, uint64_t *src)
{
    for (uint64_t i = 0; i < j->count; i++) {
        src[0] = i; /* the message is produced once ... */
        for (unsigned k = 0; k < j->nsub; k++) /* ... and copied into each */
            if (shmobj_queue_put_copy(j->q[k], src, j->size, 0, SHMOBJ_FOREVER, NULL) != 0)
                return -1;
    }
    src[0] = 0;
    return 0;
}

/* ---- one SPSC ring per subscriber ------------------------------------------ */

struct ring {
    alignas(CACHELINE) atomic_uint head; /* published; the publisher writes */
    alignas(CACHELINE) atomic_uint tail; /* released; the subscriber writes */
    alignas(CACHELINE) unsigned char data[];
};

static void ring_wait(unsigned *spins)
{
    if (++*spins < 256)
        bench_relax();
    else
        sched_yield();
}

static uint32_t ring_slots(size_t size)
{
    return size >= (1u << 20) ? 4 : 1024;
}

static int ring_sub(void *arg)
{
    struct job *j = arg;
    struct ring *r = j->ring[j->id];
    uint32_t n = ring_slots(j->size), pos = 0, head = 0;
    wait_go(j->ctl);
    uint64_t sum = 0;
    for (uint64_t got = 0; got < j->count; got++) {
        unsigned spins = 0;
        while (head == pos) {
            head = atomic_load_explicit(&r->head, memory_order_acquire);
            if (head == pos)
                ring_wait(&spins);
        }
        sum += bench_sum64(r->data + (size_t)(pos & (n - 1)) * j->size, j->size);
        pos++;
        atomic_store_explicit(&r->tail, pos, memory_order_release);
    }
    j->ctl->t_end[j->id] = bench_now_ns();
    j->ctl->sum[j->id] = sum;
    return 0;
}

static int ring_pub(struct job *j, uint64_t *src)
{
    uint32_t n = ring_slots(j->size);
    uint32_t tailc[MAXSUB] = {0};
    for (uint64_t i = 0; i < j->count; i++) {
        src[0] = i;
        uint32_t pos = (uint32_t)i;
        for (unsigned k = 0; k < j->nsub; k++) {
            struct ring *r = j->ring[k];
            unsigned spins = 0;
            while (pos - tailc[k] >= n) {
                tailc[k] = atomic_load_explicit(&r->tail, memory_order_acquire);
                if (pos - tailc[k] >= n)
                    ring_wait(&spins);
            }
            memcpy(r->data + (size_t)(pos & (n - 1)) * j->size, src, j->size);
            atomic_store_explicit(&r->head, pos + 1, memory_order_release);
        }
    }
    src[0] = 0;
    return 0;
}

/* ---- one Unix socket per subscriber ------------------------------------------ */

static int sock_sub(void *arg)
{
    struct job *j = arg;
    int fd = j->sock[j->id][1];
    unsigned char *buf = bench_alloc(j->size);
    if (buf == NULL)
        return 2;
    wait_go(j->ctl);
    uint64_t sum = 0;
    for (uint64_t got = 0; got < j->count; got++) {
        size_t have = 0;
        while (have < j->size) {
            ssize_t k = read(fd, buf + have, j->size - have);
            if (k <= 0)
                return 3;
            have += (size_t)k;
        }
        sum += bench_sum64(buf, j->size);
    }
    j->ctl->t_end[j->id] = bench_now_ns();
    j->ctl->sum[j->id] = sum;
    free(buf);
    return 0;
}

static int sock_pub(struct job *j, uint64_t *src)
{
    for (uint64_t i = 0; i < j->count; i++) {
        src[0] = i;
        for (unsigned k = 0; k < j->nsub; k++) {
            const unsigned char *p = (const unsigned char *)src;
            size_t left = j->size;
            while (left > 0) {
                ssize_t w = write(j->sock[k][0], p, left);
                if (w <= 0)
                    return -1;
                p += w;
                left -= (size_t)w;
            }
        }
    }
    src[0] = 0;
    return 0;
}

/* ---- the run ----------------------------------------------------------------- */

enum kind { K_TOPIC, K_QUEUE, K_RING, K_SOCK };

static char **p1_argv; /* for the exec of the Boost peer */

static int p1_run(const bench_ctx *ctx)
{
    struct job j;
    memset(&j, 0, sizeof j);
    j.ctx = ctx;
    fanout_size(ctx, &j.size, &j.count);
    bool big = j.size >= (1u << 20);
    enum kind kind;
    const char *s = ctx->subject;
    if (strncmp(s, "shmobj-", 7) == 0) {
        kind = K_TOPIC;
        j.nsub = (unsigned)atoi(s + 7);
    } else if (strcmp(s, "queue-copy-4sub") == 0) {
        kind = K_QUEUE;
        j.nsub = 4;
    } else if (strcmp(s, "ring-copy-4sub") == 0) {
        kind = K_RING;
        j.nsub = 4;
    } else if (strcmp(s, "unix-socket-4sub") == 0) {
        kind = K_SOCK;
        j.nsub = 4;
    } else {
        peers_exec_sibling("bench-topic-boost", p1_argv);
    }
    if (j.nsub == 0 || j.nsub > MAXSUB)
        return bench_fail("bad subject %s", s);
    uint64_t rest;
    uint64_t *src = fanout_source(j.size, &rest);
    j.ctl = bench_shared_alloc(sizeof *j.ctl);
    if (src == NULL || j.ctl == NULL)
        return bench_fail("out of memory");
    int rc = 0;
    if (kind == K_TOPIC || kind == K_QUEUE) {
        rc = segment_new(big ? (UINT64_C(64) << 20) : (UINT64_C(32) << 20), &j.seg);
        if (rc != 0)
            return bench_fail("segment: %s", shmobj_strerror(rc));
        /* first touches of the heap's pages are no part of a transfer */
        if (shmobj_segment_prefault(j.seg) != 0)
            return bench_fail("prefault failed");
    }
    if (kind == K_TOPIC) {
        shmobj_topic_config cfg;
        shmobj_topic_config_init(&cfg);
        cfg.capacity = big ? 16 : 4096;
        rc = shmobj_topic_create(j.seg, "p1", &cfg, &j.topic);
    } else if (kind == K_QUEUE) {
        char name[16];
        for (unsigned k = 0; k < j.nsub && rc == 0; k++) {
            snprintf(name, sizeof name, "q%u", k);
            rc = shmobj_queue_create(j.seg, name, big ? 4 : 1024, 0, &j.q[k]);
        }
    } else if (kind == K_RING) {
        for (unsigned k = 0; k < j.nsub; k++) {
            j.ring[k] = bench_shared_alloc(sizeof(struct ring) +
                                           (size_t)ring_slots(j.size) * j.size);
            if (j.ring[k] == NULL)
                return bench_fail("out of memory");
        }
    } else {
        for (unsigned k = 0; k < j.nsub; k++)
            if (socketpair(AF_UNIX, SOCK_STREAM, 0, j.sock[k]) != 0)
                return bench_fail("socketpair: %s", strerror(errno));
    }
    if (rc != 0)
        return bench_fail("set-up: %s", shmobj_strerror(rc));
    int (*sub)(void *) = kind == K_TOPIC ? topic_sub
                         : kind == K_QUEUE ? queue_sub
                         : kind == K_RING ? ring_sub : sock_sub;
    pid_t pid[MAXSUB];
    for (unsigned k = 0; k < j.nsub; k++) {
        j.id = k;
        pid[k] = bench_fork(sub, &j);
        if (pid[k] < 0)
            return bench_fail("fork: %s", strerror(errno));
    }
    start_clock(&j);
    rc = kind == K_TOPIC ? topic_pub(&j, src)
         : kind == K_QUEUE ? queue_pub(&j, src)
         : kind == K_RING ? ring_pub(&j, src) : sock_pub(&j, src);
    int bad = rc != 0;
    for (unsigned k = 0; k < j.nsub; k++)
        if (bench_wait(pid[k], 300000) != 0)
            bad = 1;
    if (bad)
        return bench_fail("%s: transfer failed", s);
    if (fanout_report(ctx, j.ctl, j.nsub, j.size, j.count, rest) != 0)
        return bench_fail("%s: a subscriber read a wrong sum", s);
    if (kind == K_TOPIC && j.nsub == 1 && !big) {
        uint64_t rounds = ctx->quick ? 20000 : 100000;
        uint64_t *samples = bench_alloc(rounds * sizeof *samples);
        if (samples == NULL || pingpong(&j, rounds, samples) != 0)
            return bench_fail("%s: ping-pong failed", s);
        bench_report(ctx, "pingpong-median-ns",
                     (double)bench_percentile(samples, rounds, 50));
        bench_report(ctx, "pingpong-p99-ns",
                     (double)bench_percentile(samples, rounds, 99));
        free(samples);
    }
    if (j.topic != NULL)
        shmobj_topic_close(j.topic);
    for (unsigned k = 0; k < j.nsub; k++) {
        if (j.q[k] != NULL)
            shmobj_queue_close(j.q[k]);
        if (j.ring[k] != NULL)
            bench_shared_free(j.ring[k], sizeof(struct ring) +
                                             (size_t)ring_slots(j.size) * j.size);
        if (kind == K_SOCK) {
            close(j.sock[k][0]);
            close(j.sock[k][1]);
        }
    }
    if (j.seg != NULL)
        shmobj_segment_close(j.seg);
    bench_shared_free(j.ctl, sizeof *j.ctl);
    free(src);
    return 0;
}

#define P1(w)                                                                  \
    {w, "shmobj-1sub", p1_run, 0}, {w, "shmobj-2sub", p1_run, 0},        \
    {w, "shmobj-4sub", p1_run, 0}, {w, "shmobj-8sub", p1_run, 0},        \
    {w, "queue-copy-4sub", p1_run, 0}, {w, "ring-copy-4sub", p1_run, 0}, \
    {w, "unix-socket-4sub", p1_run, 0}, {w, "boost-4sub", p1_run, 0}

int main(int argc, char **argv)
{
    static const bench_entry table[] = {P1("P1-64"), P1("P1-1MiB"),
                                        {NULL, NULL, NULL, 0}};
    p1_argv = argv;
    return bench_main(argc, argv, table);
}
