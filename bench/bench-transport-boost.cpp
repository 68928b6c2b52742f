/*
 * bench-transport-boost - the Boost.Interprocess peer (`boost`) of W1 and
 * W2: boost::interprocess::message_queue, used the way its users do: one
 * send() per message, receive() into a private buffer, then the consumer
 * reads every byte (bench_sum64) and the sums of both sides must agree.
 * Same processes, pinning, barrier, clock and message contents as
 * bench-transport.c (see bench/README.md).
 *
 * message_queue copies twice (sender's buffer -> queue, queue -> receiver's
 * buffer) and waits on a process-shared mutex and condition variable, so it
 * is a sleeping transport. Queues are named with the pid and removed at the
 * end, also after an error.
 */
#include "bench-util.h"

#include <boost/interprocess/ipc/message_queue.hpp>

#include <string>
#include <vector>

namespace bip = boost::interprocess;

namespace {

#define GIB (1024.0 * 1024.0 * 1024.0)
#define W2_STREAM_DEPTH 1024u
#define W2_PING_DEPTH 64u

struct alignas(64) ctl {
    unsigned arrived;   // processes at the barrier (atomic builtins)
    uint64_t t0_ns;     // producer: start of the timed part
    uint64_t t1_ns;     // consumer: end of the timed part
    uint64_t sent_sum;  // producer: sum of all words sent
};

void ctl_barrier(ctl *c)
{
    __atomic_fetch_add(&c->arrived, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&c->arrived, __ATOMIC_SEQ_CST) < 2)
        bench_spin_once();
}

std::string queue_name(const char *what)
{
    return "shmobj-bench-" + std::to_string((long)getpid()) + "-" + what;
}

// Removes the named queue when the parent leaves the scope.
struct queue_guard {
    std::string name;
    explicit queue_guard(std::string n) : name(std::move(n)) { bip::message_queue::remove(name.c_str()); }
    ~queue_guard() { bip::message_queue::remove(name.c_str()); }
};

/* ---- W1 ---------------------------------------------------------------- */

struct w1_job {
    const char *name;
    size_t size;
    uint64_t count;
    ctl *c;
};

int w1_producer(void *arg)
{
    w1_job *j = static_cast<w1_job *>(arg);
    bench_pin(1);
    try {
        bip::message_queue mq(bip::open_only, j->name);
        uint64_t rest, sent = 0;
        uint64_t *src = bench_w1_source(j->size, &rest);
        if (src == nullptr)
            return 3;
        ctl_barrier(j->c);
        j->c->t0_ns = bench_now_ns();
        for (uint64_t i = 0; i < j->count; i++) {
            src[0] = i;
            sent += rest + i;
            mq.send(src, j->size, 0);
        }
        j->c->sent_sum = sent;
        free(src);
    } catch (const std::exception &e) {
        fprintf(stderr, "boost producer: %s\n", e.what());
        return 4;
    }
    return 0;
}

int w1_run(const bench_ctx *ctx)
{
    const bench_w1_param *ws = bench_w1_param_of(ctx->workload);
    if (ws == nullptr)
        return bench_fail("unknown W1 workload %s", ctx->workload);
    ctl *c = static_cast<ctl *>(bench_shared_alloc(sizeof(ctl)));
    if (c == nullptr)
        return bench_fail("mmap: %s", strerror(errno));
    // Queue depth: about 4 MiB of messages, at least 2, at most 16.
    size_t depth = ((size_t)4 << 20) / ws->size;
    depth = depth < 2 ? 2 : depth > 16 ? 16 : depth;
    queue_guard g(queue_name("w1"));
    w1_job j = {g.name.c_str(), ws->size, ctx->quick ? ws->quick_count : ws->count, c};
    uint64_t sum = 0;
    pid_t pid;
    try {
        bip::message_queue mq(bip::create_only, g.name.c_str(), depth, ws->size);
        unsigned char *buf = static_cast<unsigned char *>(bench_alloc(ws->size));
        if (buf == nullptr)
            return bench_fail("out of memory");
        pid = bench_fork(w1_producer, &j);
        if (pid < 0)
            return bench_fail("fork: %s", strerror(errno));
        bench_pin(0);
        ctl_barrier(c);
        for (uint64_t i = 0; i < j.count; i++) {
            bip::message_queue::size_type got = 0;
            unsigned prio = 0;
            mq.receive(buf, ws->size, got, prio);
            if (got != ws->size) {
                kill(pid, SIGKILL);
                bench_wait(pid, 10000);
                return bench_fail("boost: message %llu has %zu bytes, expected %zu", (unsigned long long)i,
                                  (size_t)got, ws->size);
            }
            sum += bench_sum64(buf, ws->size);
        }
        c->t1_ns = bench_now_ns();
        free(buf);
    } catch (const bip::interprocess_exception &e) {
        return bench_skip("boost message_queue unavailable: %s", e.what());
    }
    int st = bench_wait(pid, 60000);
    if (st != 0)
        return bench_fail("boost: producer exit %d", st);
    if (sum != c->sent_sum)
        return bench_fail("boost: checksum mismatch: read %llu, sent %llu", (unsigned long long)sum,
                          (unsigned long long)c->sent_sum);
    double secs = (double)(c->t1_ns - c->t0_ns) / 1e9;
    bench_report(ctx, "GiB/s", (double)ws->size * (double)j.count / GIB / secs);
    bench_shared_free(c, sizeof(ctl));
    return 0;
}

/* ---- W2 ---------------------------------------------------------------- */

struct w2_job {
    const char *stream, *ping, *pong;
    uint64_t stream_count, ping_count;
    ctl *c;
};

int w2_child(void *arg)
{
    w2_job *j = static_cast<w2_job *>(arg);
    bench_pin(1);
    try {
        bip::message_queue stream(bip::open_only, j->stream);
        bip::message_queue ping(bip::open_only, j->ping);
        bip::message_queue pong(bip::open_only, j->pong);
        alignas(64) uint64_t msg[BENCH_W2_MSG / 8];
        uint64_t rest, sent = 0;
        bench_w2_message(msg, &rest);
        ctl_barrier(j->c);
        j->c->t0_ns = bench_now_ns();
        for (uint64_t i = 0; i < j->stream_count; i++) {
            msg[0] = i;
            sent += rest + i;
            stream.send(msg, BENCH_W2_MSG, 0);
        }
        j->c->sent_sum = sent;
        uint64_t total = j->ping_count + BENCH_W2_PING_WARMUP;
        for (uint64_t i = 0; i < total; i++) {
            bip::message_queue::size_type got = 0;
            unsigned prio = 0;
            ping.receive(msg, BENCH_W2_MSG, got, prio);
            if (got != BENCH_W2_MSG)
                return 5;
            bench_keep(bench_sum64(msg, BENCH_W2_MSG));
            pong.send(msg, BENCH_W2_MSG, 0);
        }
    } catch (const std::exception &e) {
        fprintf(stderr, "boost child: %s\n", e.what());
        return 4;
    }
    return 0;
}

int w2_run(const bench_ctx *ctx)
{
    ctl *c = static_cast<ctl *>(bench_shared_alloc(sizeof(ctl)));
    if (c == nullptr)
        return bench_fail("mmap: %s", strerror(errno));
    queue_guard gs(queue_name("stream")), gp(queue_name("ping")), gq(queue_name("pong"));
    w2_job j = {gs.name.c_str(), gp.name.c_str(), gq.name.c_str(), ctx->quick ? BENCH_W2_STREAM_SLEEP_QUICK : BENCH_W2_STREAM_SLEEP,
                ctx->quick ? BENCH_W2_PING_QUICK : BENCH_W2_PING, c};
    std::vector<uint64_t> samples(j.ping_count);
    uint64_t sum = 0, bad = 0;
    pid_t pid;
    try {
        bip::message_queue stream(bip::create_only, j.stream, W2_STREAM_DEPTH, BENCH_W2_MSG);
        bip::message_queue ping(bip::create_only, j.ping, W2_PING_DEPTH, BENCH_W2_MSG);
        bip::message_queue pong(bip::create_only, j.pong, W2_PING_DEPTH, BENCH_W2_MSG);
        pid = bench_fork(w2_child, &j);
        if (pid < 0)
            return bench_fail("fork: %s", strerror(errno));
        bench_pin(0);
        alignas(64) uint64_t msg[BENCH_W2_MSG / 8], back[BENCH_W2_MSG / 8];
        uint64_t rest;
        bench_w2_message(msg, &rest);
        ctl_barrier(c);
        for (uint64_t i = 0; i < j.stream_count; i++) {
            bip::message_queue::size_type got = 0;
            unsigned prio = 0;
            stream.receive(back, BENCH_W2_MSG, got, prio);
            if (got != BENCH_W2_MSG)
                bad++;
            sum += bench_sum64(back, BENCH_W2_MSG);
        }
        c->t1_ns = bench_now_ns();
        uint64_t total = j.ping_count + BENCH_W2_PING_WARMUP;
        for (uint64_t i = 0; i < total; i++) {
            msg[0] = i;
            uint64_t t0 = bench_now_ns();
            ping.send(msg, BENCH_W2_MSG, 0);
            bip::message_queue::size_type got = 0;
            unsigned prio = 0;
            pong.receive(back, BENCH_W2_MSG, got, prio);
            uint64_t s = bench_sum64(back, BENCH_W2_MSG);
            uint64_t t1 = bench_now_ns();
            if (got != BENCH_W2_MSG || s != rest + i)
                bad++;
            if (i >= BENCH_W2_PING_WARMUP)
                samples[i - BENCH_W2_PING_WARMUP] = t1 - t0;
        }
    } catch (const bip::interprocess_exception &e) {
        return bench_skip("boost message_queue unavailable: %s", e.what());
    }
    int st = bench_wait(pid, 60000);
    if (st != 0)
        return bench_fail("boost: child exit %d", st);
    if (sum != c->sent_sum)
        return bench_fail("boost: checksum mismatch: read %llu, sent %llu", (unsigned long long)sum,
                          (unsigned long long)c->sent_sum);
    if (bad != 0)
        return bench_fail("boost: %llu messages differ from what was sent", (unsigned long long)bad);
    double secs = (double)(c->t1_ns - c->t0_ns) / 1e9;
    bench_report(ctx, "Mmsgs/s", (double)j.stream_count / 1e6 / secs);
    bench_report(ctx, "pingpong-median-ns", (double)bench_percentile(samples.data(), samples.size(), 50));
    bench_report(ctx, "pingpong-p99-ns", (double)bench_percentile(samples.data(), samples.size(), 99));
    bench_shared_free(c, sizeof(ctl));
    return 0;
}

const bench_entry table[] = {
    {"W1-400K", "boost", w1_run, 0},
    {"W1-64K", "boost", w1_run, 0},
    {"W1-1MiB", "boost", w1_run, 0},
    {"W1-16MiB", "boost", w1_run, 0},
    {"W2", "boost", w2_run, 0},
    {nullptr, nullptr, nullptr, 0},
};

} // namespace

int main(int argc, char **argv)
{
    return bench_main(argc, argv, table);
}
