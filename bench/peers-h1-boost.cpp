// H1 peer `boost`: a hash table in shared memory with Boost.Interprocess.
//
// What a Boost user writes: a managed_shared_memory segment holding a
// boost::unordered_map whose keys (and, for H1-64, values) are
// shared-memory strings, all allocated from the segment with an
// interprocess allocator. Hashing uses std::hash<std::string_view> (fast,
// what a modern C++ user picks) and the gets look up a std::string_view
// through unordered_map's compatible-key find, so no temporary string is
// built in the segment. The table grows by itself (no reserve), as ours and
// the private table do. bytes/item is segment bytes in use (size minus
// free) over n.
//
// Same data as peers-h1.c: H1-64 keys "%064d" of i, values "%064d" of
// i*7+3; H1-16 keys "%016d", 8-byte values i*7+3. Run by bench-peers-h1
// (`--run H1-* boost`), which lists the subject; this program's own --list
// prints nothing so the subject is not listed twice.
#include "peers-util.h"

#include <boost/interprocess/allocators/allocator.hpp>
#include <boost/interprocess/containers/string.hpp>
#include <boost/interprocess/managed_shared_memory.hpp>
#include <boost/unordered_map.hpp>

#include <functional>
#include <string_view>
#include <vector>

namespace bip = boost::interprocess;

namespace {

using SegmentManager = bip::managed_shared_memory::segment_manager;
using CharAlloc = bip::allocator<char, SegmentManager>;
using ShmString = bip::basic_string<char, std::char_traits<char>, CharAlloc>;

std::string_view view(const ShmString &s)
{
    return std::string_view(s.data(), s.size());
}

struct KeyHash {
    size_t operator()(const ShmString &s) const { return std::hash<std::string_view>()(view(s)); }
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

struct KeyEq {
    bool operator()(const ShmString &a, const ShmString &b) const { return view(a) == view(b); }
    bool operator()(std::string_view a, const ShmString &b) const { return a == view(b); }
    bool operator()(const ShmString &a, std::string_view b) const { return view(a) == b; }
};

template <class V>
using ShmMap = boost::unordered_map<ShmString, V, KeyHash, KeyEq,
                                    bip::allocator<std::pair<const ShmString, V>, SegmentManager>>;

struct Data {
    const char *workload;
    size_t n, klen, vlen;
    std::vector<char> keys, vals;
    std::vector<uint32_t> order;
};

void prepare(Data &d, const char *workload, size_t n)
{
    d.workload = workload;
    d.n = n;
    bool big = strcmp(workload, "H1-64") == 0;
    d.klen = big ? 64 : 16;
    d.vlen = big ? 64 : 8;
    d.keys.resize(n * d.klen);
    d.vals.resize(n * d.vlen);
    d.order.resize(n);
    bench_h1_fill(d.keys.data(), d.vals.data(), n, d.klen, d.vlen);
    for (size_t i = 0; i < n; i++)
        d.order[i] = (uint32_t)i;
    peers_shuffle_u32(d.order.data(), n, 0x5eed1234abcdULL);
}

// Value type adapters: shared string for H1-64, uint64_t for H1-16.
ShmString make_value(const char *p, size_t len, const CharAlloc &a, ShmString *)
{
    return ShmString(p, len, a);
}
uint64_t make_value(const char *p, size_t, const CharAlloc &, uint64_t *)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
bool same_value(const ShmString &v, const char *p, size_t len)
{
    return v.size() == len && memcmp(v.data(), p, len) == 0;
}
bool same_value(uint64_t v, const char *p, size_t)
{
    return memcmp(&v, p, 8) == 0;
}
const void *value_bytes(const ShmString &v, size_t *len)
{
    *len = v.size();
    return v.data();
}
const void *value_bytes(const uint64_t &v, size_t *len)
{
    *len = sizeof v;
    return &v;
}

template <class V>
void run_table(const Data &d, bip::managed_shared_memory &seg)
{
    using Map = ShmMap<V>;
    CharAlloc alloc(seg.get_segment_manager());
    size_t used0 = seg.get_size() - seg.get_free_memory();
    Map *map = seg.construct<Map>("table")(0, KeyHash(), KeyEq(),
                                           typename Map::allocator_type(seg.get_segment_manager()));
    size_t n = d.n;
    V *tag = nullptr;

    double t0 = peers_now();
    for (size_t i = 0; i < n; i++) {
        map->emplace(ShmString(&d.keys[i * d.klen], d.klen, alloc),
                     make_value(&d.vals[i * d.vlen], d.vlen, alloc, tag));
    }
    double t1 = peers_now();
    size_t bad = 0;
    for (size_t j = 0; j < n; j++) {
        size_t i = d.order[j];
        auto it = map->find(std::string_view(&d.keys[i * d.klen], d.klen), KeyHash(), KeyEq());
        if (it == map->end() || !same_value(it->second, &d.vals[i * d.vlen], d.vlen))
            bad++;
    }
    double t2 = peers_now();
    struct bench_h1_iter iter;
    if (bench_h1_iter_init(&iter, n) != 0)
        peers_die("out of memory");
    for (const auto &kv : *map) {
        size_t vl;
        const void *v = value_bytes(kv.second, &vl);
        bench_h1_visit(&iter, kv.first.data(), kv.first.size(), v, vl);
    }
    double t3 = peers_now();
    size_t seen = iter.distinct;
    uint64_t sum = iter.sum;
    bench_h1_iter_done(&iter);
    if (bad)
        peers_die("boost: %zu wrong values", bad);
    if (sum == 0)
        fprintf(stderr, "boost: checksum 0\n");
    double bytes = (double)(seg.get_size() - seg.get_free_memory() - used0);
    const char *w = d.workload;
    peers_report(w, "boost", "set-Mops/s", (double)n / (t1 - t0) / 1e6);
    peers_report(w, "boost", "get-Mops/s", (double)n / (t2 - t1) / 1e6);
    peers_report(w, "boost", "iter-Mops/s", (double)n / (t3 - t2) / 1e6);
    peers_report(w, "boost", "bytes/item", (double)(long long)(bytes / (double)n + 0.5));
    peers_report(w, "boost", "keys-seen", (double)seen);
}

// The segment is removed on every way out, exit() from peers_die included.
char g_segname[64];

void cleanup()
{
    if (g_segname[0])
        bip::shared_memory_object::remove(g_segname);
}

int run(const char *workload, size_t n)
{
    Data d;
    prepare(d, workload, n);
    char *segname = g_segname;
    snprintf(segname, sizeof g_segname, "shmobj-bench-h1-boost-%d", (int)getpid());
    atexit(cleanup);
    bip::shared_memory_object::remove(segname);
    try {
        // Sparse: only the pages the allocator touches cost memory.
        bip::managed_shared_memory seg(bip::create_only, segname,
                                       n * 512 + (size_t(64) << 20));
        if (d.vlen == 64)
            run_table<ShmString>(d, seg);
        else
            run_table<uint64_t>(d, seg);
    } catch (const std::exception &e) {
        bip::shared_memory_object::remove(segname);
        peers_die("boost: %s", e.what());
    }
    bip::shared_memory_object::remove(segname);
    return 0;
}

} // namespace

static int h1_boost_run(const bench_ctx *ctx)
{
    return run(ctx->workload, ctx->quick ? 200000 : 1000000);
}

// Listed by bench-peers-h1, which execs this program for `--run H1-*
// boost`.
static const bench_entry h1_boost_table[] = {
    {"H1-64", "boost", h1_boost_run, 0},
    {"H1-16", "boost", h1_boost_run, 0},
    {NULL, NULL, NULL, 0},
};

int main(int argc, char **argv)
{
    return peers_helper_main(argc, argv, h1_boost_table);
}
