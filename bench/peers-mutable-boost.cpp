// L1 and D1 peer `boost` (bench/bench-mutable.c defines the workloads):
// what a Boost user writes to share a growable list or a string-keyed map
// between processes. A managed_shared_memory segment holds the container
// and one interprocess_mutex; every operation takes the mutex.
//   L1: bip::vector<int64_t>; two processes push_back 2,000,000 values
//       (200,000 with --quick) each, then this process reads every item
//       and checks each process's order.
//   D1: bip::map<shm string, int64_t> of 100,000 keys; two processes each
//       on its own half set, get (checked), add 1 and delete at random for
//       5 s (1 s with --quick); every key read back at the end.
// Run by bench-peers-mutable (`--run L1 boost`, `--run D1 boost`); this
// program's own --list prints nothing so the subjects are listed once.
#include "peers-util.h"

#include <sys/mman.h>

#include <boost/interprocess/allocators/allocator.hpp>
#include <boost/interprocess/containers/map.hpp>
#include <boost/interprocess/containers/string.hpp>
#include <boost/interprocess/containers/vector.hpp>
#include <boost/interprocess/managed_shared_memory.hpp>
#include <boost/interprocess/sync/interprocess_mutex.hpp>
#include <boost/interprocess/sync/scoped_lock.hpp>

#include <atomic>
#include <functional>
#include <string>

namespace bip = boost::interprocess;

namespace {

using SegmentManager = bip::managed_shared_memory::segment_manager;
using Int64Alloc = bip::allocator<int64_t, SegmentManager>;
using ShmVec = bip::vector<int64_t, Int64Alloc>;
using CharAlloc = bip::allocator<char, SegmentManager>;
using ShmString = bip::basic_string<char, std::char_traits<char>, CharAlloc>;
using PairAlloc = bip::allocator<std::pair<const ShmString, int64_t>, SegmentManager>;
using ShmMap = bip::map<ShmString, int64_t, std::less<ShmString>, PairAlloc>;

constexpr int kKeys = 100000;

struct Shared {
    double t0[2], t1[2];
    uint64_t ops[2], bad[2];
    int64_t model[kKeys];
};

std::string seg_name()
{
    return "shmobj-bench-mutable-boost-" + std::to_string(getpid());
}

int key_of(int k, char *buf)
{
    return bench_d1_key(k, buf);
}

int l1_boost(const bench_ctx *ctx)
{
    const uint64_t n = ctx->quick ? 200000 : 2000000;
    std::string name = seg_name();
    bip::shared_memory_object::remove(name.c_str());
    bip::managed_shared_memory seg(bip::create_only, name.c_str(),
                                   (size_t)(2 * n * 8 * 3 + (64u << 20)));
    ShmVec *v = seg.construct<ShmVec>("l1")(seg.get_segment_manager());
    bip::interprocess_mutex *mu = seg.construct<bip::interprocess_mutex>("mu")();
    auto *sh = static_cast<Shared *>(bench_shared_alloc(sizeof(Shared)));
    auto *go = static_cast<std::atomic<int> *>(bench_shared_alloc(64));
    if (sh == nullptr || go == nullptr)
        peers_die("boost: no shared memory for the figures");
    go->store(0);
    pid_t pid[2];
    for (int w = 0; w < 2; w++) {
        pid[w] = fork();
        if (pid[w] == 0) {
            peers_pin(w + 1);
            bip::managed_shared_memory s2(bip::open_only, name.c_str());
            ShmVec *cv = s2.find<ShmVec>("l1").first;
            bip::interprocess_mutex *cm = s2.find<bip::interprocess_mutex>("mu").first;
            while (go->load() == 0)
                bench_relax();
            sh->t0[w] = peers_now();
            for (uint64_t i = 0; i < n; i++) {
                bip::scoped_lock<bip::interprocess_mutex> g(*cm);
                cv->push_back((int64_t)((uint64_t)w << 32 | i));
            }
            sh->t1[w] = peers_now();
            _exit(0);
        }
    }
    peers_pin(0);
    go->store(1);
    for (int w = 0; w < 2; w++)
        if (peers_wait_child(pid[w], 600.0) != 0)
            peers_die("boost: appender failed");
    uint64_t next[2] = {0, 0}, misorder = 0;
    double r0 = peers_now();
    size_t len;
    {
        bip::scoped_lock<bip::interprocess_mutex> g(*mu);
        len = v->size();
    }
    for (size_t i = 0; i < len; i++) {
        int64_t x;
        {
            bip::scoped_lock<bip::interprocess_mutex> g(*mu);
            x = (*v)[i];
        }
        uint64_t who = (uint64_t)x >> 32, sq = (uint64_t)x & 0xffffffffu;
        if (who > 1 || sq != next[who])
            misorder++;
        else
            next[who]++;
    }
    double r1 = peers_now();
    double t0 = sh->t0[0] < sh->t0[1] ? sh->t0[0] : sh->t0[1];
    double t1 = sh->t1[0] > sh->t1[1] ? sh->t1[0] : sh->t1[1];
    bip::shared_memory_object::remove(name.c_str());
    if (misorder != 0)
        return bench_fail("boost: %llu items out of order", (unsigned long long)misorder);
    bench_report(ctx, "Mappend/s", (double)(2 * n) / (t1 - t0) / 1e6);
    bench_report(ctx, "Mread/s", (double)len / (r1 - r0) / 1e6);
    bench_report(ctx, "lost-items", (double)(2 * n - len));
    return 0;
}

int d1_boost(const bench_ctx *ctx)
{
    std::string name = seg_name();
    bip::shared_memory_object::remove(name.c_str());
    bip::managed_shared_memory seg(bip::create_only, name.c_str(), 256u << 20);
    ShmMap *m = seg.construct<ShmMap>("d1")(std::less<ShmString>(), seg.get_segment_manager());
    bip::interprocess_mutex *mu = seg.construct<bip::interprocess_mutex>("mu")();
    auto *sh = static_cast<Shared *>(bench_shared_alloc(sizeof(Shared)));
    auto *go = static_cast<std::atomic<int> *>(bench_shared_alloc(64));
    if (sh == nullptr || go == nullptr)
        peers_die("boost: no shared memory for the figures");
    go->store(0);
    for (int k = 0; k < kKeys; k++) {
        char kb[16];
        int kl = key_of(k, kb);
        m->emplace(ShmString(kb, (size_t)kl, seg.get_segment_manager()), (int64_t)k);
        sh->model[k] = k;
    }
    double target = ctx->quick ? 1.0 : 5.0;
    pid_t pid[2];
    for (int w = 0; w < 2; w++) {
        pid[w] = fork();
        if (pid[w] == 0) {
            peers_pin(w + 1);
            bip::managed_shared_memory s2(bip::open_only, name.c_str());
            ShmMap *cm = s2.find<ShmMap>("d1").first;
            bip::interprocess_mutex *cmu = s2.find<bip::interprocess_mutex>("mu").first;
            ShmString key(s2.get_segment_manager());
            bench_rng rng;
            bench_rng_seed(&rng, 1234 + (uint64_t)w);
            uint64_t ops = 0, bad = 0;
            while (go->load() == 0)
                bench_relax();
            double t0 = peers_now(), t;
            do {
                for (int b = 0; b < 256; b++) {
                    uint64_t r = bench_rng_next(&rng);
                    int k = (int)((r >> 8) % (kKeys / 2)) * 2 + w;
                    char kb[16];
                    int kl = key_of(k, kb);
                    int64_t *mv = &sh->model[k];
                    bip::scoped_lock<bip::interprocess_mutex> g(*cmu);
                    key.assign(kb, (size_t)kl);
                    switch (r & 3) {
                    case 0: {
                        int64_t v = (int64_t)(r >> 16);
                        auto it = cm->find(key);
                        if (it != cm->end())
                            it->second = v;
                        else
                            cm->emplace(key, v);
                        *mv = v;
                        break;
                    }
                    case 1: {
                        auto it = cm->find(key);
                        bad += it == cm->end() ? *mv != INT64_MIN : *mv != it->second;
                        break;
                    }
                    case 2: {
                        auto it = cm->find(key);
                        if (it != cm->end())
                            it->second += 1;
                        else
                            cm->emplace(key, (int64_t)1);
                        *mv = *mv == INT64_MIN ? 1 : *mv + 1;
                        break;
                    }
                    default:
                        cm->erase(key);
                        *mv = INT64_MIN;
                        break;
                    }
                    ops++;
                }
                t = peers_now();
            } while (t - t0 < target);
            sh->t0[w] = t0;
            sh->t1[w] = t;
            sh->ops[w] = ops;
            sh->bad[w] = bad;
            _exit(0);
        }
    }
    peers_pin(0);
    go->store(1);
    for (int w = 0; w < 2; w++)
        if (peers_wait_child(pid[w], 120.0) != 0)
            peers_die("boost: worker failed");
    uint64_t lost = sh->bad[0] + sh->bad[1];
    ShmString key(seg.get_segment_manager());
    for (int k = 0; k < kKeys; k++) {
        char kb[16];
        int kl = key_of(k, kb);
        key.assign(kb, (size_t)kl);
        auto it = m->find(key);
        lost += it == m->end() ? sh->model[k] != INT64_MIN : sh->model[k] != it->second;
    }
    (void)mu;
    bip::shared_memory_object::remove(name.c_str());
    double s0 = sh->t1[0] - sh->t0[0], s1 = sh->t1[1] - sh->t0[1];
    bench_report(ctx, "Mops/s", (double)(sh->ops[0] + sh->ops[1]) / (s0 > s1 ? s0 : s1) / 1e6);
    bench_report(ctx, "lost-updates", (double)lost);
    return lost != 0 ? bench_fail("boost: %llu lost updates", (unsigned long long)lost) : 0;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0)
        return 0;
    static const bench_entry table[] = {
        {"L1", "boost", l1_boost, 0},
        {"D1", "boost", d1_boost, 0},
        {NULL, NULL, NULL, 0},
    };
    return bench_main(argc, argv, table);
}
