// P1 peer `boost-4sub`: fan-out through Boost.Interprocess, as its users
// write it: one boost::interprocess::message_queue per subscriber, the
// publisher send()ing each message into every queue (a copy each), each
// subscriber receive()ing into a private buffer and reading every byte.
// The queues wait on a process-shared mutex and condition variable: a
// sleeping transport. Same control block, source, sums and clock as
// bench-topic.c (bench-fanout.h).
//
// Run by bench-topic (`--run P1-64 boost-4sub`), which lists the subject;
// this program's own --list prints nothing so it is not listed twice.
// Queues are named with the pid and removed at the end.
#include "bench-fanout.h"
#include "peers-util.h"

#include <boost/interprocess/ipc/message_queue.hpp>

#include <memory>
#include <string>
#include <vector>

namespace bip = boost::interprocess;

namespace {

constexpr unsigned kSubs = 4;

std::string queue_name(unsigned k)
{
    return "shmobj-bench-p1-" + std::to_string(static_cast<long>(getpid())) + "-" +
           std::to_string(k);
}

struct job {
    fanout_ctl *ctl;
    std::string name;
    unsigned id;
    size_t size;
    uint64_t count;
};

int subscriber(void *arg)
{
    job *j = static_cast<job *>(arg);
    try {
        bip::message_queue q(bip::open_only, j->name.c_str());
        std::vector<uint64_t> buf(j->size / sizeof(uint64_t));
        fanout_wait_go(j->ctl);
        uint64_t sum = 0;
        for (uint64_t got = 0; got < j->count; got++) {
            bip::message_queue::size_type n = 0;
            unsigned prio = 0;
            q.receive(buf.data(), j->size, n, prio);
            if (n != j->size)
                return 3;
            sum += bench_sum64(buf.data(), j->size);
        }
        j->ctl->t_end[j->id] = bench_now_ns();
        j->ctl->sum[j->id] = sum;
        return 0;
    } catch (const bip::interprocess_exception &) {
        return 2;
    }
}

int p1_boost(const bench_ctx *ctx)
{
    size_t size;
    uint64_t count;
    fanout_size(ctx, &size, &count);
    uint64_t rest;
    uint64_t *src = fanout_source(size, &rest);
    auto *ctl = static_cast<fanout_ctl *>(bench_shared_alloc(sizeof(fanout_ctl)));
    if (src == nullptr || ctl == nullptr)
        return bench_fail("out of memory");
    std::vector<std::unique_ptr<bip::message_queue>> q;
    std::vector<std::string> names;
    int rc = 0;
    try {
        for (unsigned k = 0; k < kSubs; k++) {
            names.push_back(queue_name(k));
            bip::message_queue::remove(names[k].c_str());
            q.emplace_back(new bip::message_queue(bip::create_only, names[k].c_str(),
                                                  size >= (1u << 20) ? 4 : 1024, size));
        }
        pid_t pid[kSubs];
        job jobs[kSubs];
        for (unsigned k = 0; k < kSubs; k++) {
            jobs[k] = job{ctl, names[k], k, size, count};
            pid[k] = bench_fork(subscriber, &jobs[k]);
            if (pid[k] < 0)
                throw bip::interprocess_exception("fork");
        }
        fanout_start_clock(ctl, kSubs);
        for (uint64_t i = 0; i < count; i++) {
            src[0] = i;
            for (unsigned k = 0; k < kSubs; k++)
                q[k]->send(src, size, 0);
        }
        src[0] = 0;
        for (unsigned k = 0; k < kSubs; k++)
            if (bench_wait(pid[k], 300000) != 0)
                rc = -1;
    } catch (const bip::interprocess_exception &e) {
        rc = -1;
        std::fprintf(stderr, "boost-4sub: %s\n", e.what());
    }
    for (const std::string &n : names)
        bip::message_queue::remove(n.c_str());
    if (rc != 0)
        return bench_fail("boost-4sub: transfer failed");
    if (fanout_report(ctx, ctl, kSubs, size, count, rest) != 0)
        return bench_fail("boost-4sub: a subscriber read a wrong sum");
    bench_shared_free(ctl, sizeof(fanout_ctl));
    free(src);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    static const bench_entry table[] = {{"P1-64", "boost-4sub", p1_boost, 0},
                                        {"P1-1MiB", "boost-4sub", p1_boost, 0},
                                        {nullptr, nullptr, nullptr, 0}};
    return peers_helper_main(argc, argv, table);
}
