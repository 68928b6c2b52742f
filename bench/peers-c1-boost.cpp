// C1 peer `boost`: shared-record increments with Boost.Interprocess.
//
// What a Boost user writes to share keyed records between processes: a
// managed_shared_memory segment holding an interprocess map from the
// record's key ("player:<id>", a shared-memory string) to a struct of the 11
// fields (9 int64 numbers, a shared-memory string name, a shared-memory
// vector inventory), guarded by one interprocess_mutex. The incrementing
// process opens the segment by name (its own mapping), and for each record
// takes the lock, looks the record up by key and adds 1 to its 9 numeric
// fields. One lock and one lookup serve 9 increments, which is the
// favourable way to write it for Boost.
//
// Run by bench-peers-c1 (`--run C1 boost`), which lists the subject; this
// program's own --list prints nothing so the subject is not listed twice.
// Same verification rule as peers-c1.c: after T increments in flat order,
// counter k holds init(k) + T / 27000 + (k < T % 27000).
#include "peers-util.h"

#include <sys/mman.h>

#include <boost/interprocess/allocators/allocator.hpp>
#include <boost/interprocess/containers/map.hpp>
#include <boost/interprocess/containers/string.hpp>
#include <boost/interprocess/containers/vector.hpp>
#include <boost/interprocess/managed_shared_memory.hpp>
#include <boost/interprocess/sync/interprocess_mutex.hpp>
#include <boost/interprocess/sync/scoped_lock.hpp>

#include <functional>
#include <string>
#include <vector>

namespace bip = boost::interprocess;

namespace {

constexpr int kRecords = 3000;
constexpr int kFields = 9;
constexpr int kCounters = kRecords * kFields;

using SegmentManager = bip::managed_shared_memory::segment_manager;
using CharAlloc = bip::allocator<char, SegmentManager>;
using ShmString = bip::basic_string<char, std::char_traits<char>, CharAlloc>;
using IntAlloc = bip::allocator<int32_t, SegmentManager>;
using ShmIntVec = bip::vector<int32_t, IntAlloc>;

struct Record {
    int64_t id, health, mana, pos_x, pos_y, pos_z, rot_x, rot_y, rot_z;
    ShmString name;
    ShmIntVec inventory;
    explicit Record(const CharAlloc &a)
        : id(0), health(0), mana(0), pos_x(0), pos_y(0), pos_z(0), rot_x(0),
          rot_y(0), rot_z(0), name(a), inventory(IntAlloc(a.get_segment_manager()))
    {
    }
    int64_t *field(int f)
    {
        int64_t *const fs[kFields] = {&id,    &health, &mana,  &pos_x, &pos_y,
                                      &pos_z, &rot_x,  &rot_y, &rot_z};
        return fs[f];
    }
};

using MapValue = std::pair<const ShmString, Record>;
using MapAlloc = bip::allocator<MapValue, SegmentManager>;
using RecordMap = bip::map<ShmString, Record, std::less<ShmString>, MapAlloc>;

int64_t c1_init(int r, int f)
{
    return f == 0 ? (int64_t)r : (int64_t)r * 100 + f * 10;
}

int64_t c1_expect(int k, uint64_t total)
{
    return c1_init(k / kFields, k % kFields) + (int64_t)(total / kCounters) +
           ((uint64_t)k < total % kCounters ? 1 : 0);
}

struct Result {
    uint64_t increments;
    double seconds;
};

void make_key(char *buf, size_t n, int r)
{
    snprintf(buf, n, "player:%d", r);
}

// The second process: open the segment by name, increment for `target` s.
int incrementer(const char *segname, double target, Result *res)
{
    peers_pin(1);
    bip::managed_shared_memory seg(bip::open_only, segname);
    RecordMap *map = seg.find<RecordMap>("records").first;
    bip::interprocess_mutex *mtx = seg.find<bip::interprocess_mutex>("lock").first;
    if (!map || !mtx)
        return 1;
    CharAlloc alloc(seg.get_segment_manager());
    std::vector<ShmString> keys;
    keys.reserve(kRecords);
    for (int r = 0; r < kRecords; r++) {
        char k[32];
        make_key(k, sizeof k, r);
        keys.emplace_back(k, alloc);
    }
    uint64_t total = 0;
    double t0 = peers_now(), t;
    do {
        for (int r = 0; r < kRecords; r++) {
            bip::scoped_lock<bip::interprocess_mutex> lock(*mtx);
            RecordMap::iterator it = map->find(keys[r]);
            if (it == map->end())
                return 1;
            Record &rec = it->second;
            rec.id += 1;
            rec.health += 1;
            rec.mana += 1;
            rec.pos_x += 1;
            rec.pos_y += 1;
            rec.pos_z += 1;
            rec.rot_x += 1;
            rec.rot_y += 1;
            rec.rot_z += 1;
        }
        total += kCounters;
        t = peers_now();
    } while (t - t0 < target);
    res->increments = total;
    res->seconds = t - t0;
    return 0;
}

// The segment is removed on every way out, exit() from peers_die included
// (only by the process that created it, not by the forked incrementer).
char g_segname[64];
pid_t g_owner;

void cleanup()
{
    if (g_segname[0] && getpid() == g_owner)
        bip::shared_memory_object::remove(g_segname);
}

int run(double target)
{
    char *segname = g_segname;
    snprintf(segname, sizeof g_segname, "shmobj-bench-c1-boost-%d", (int)getpid());
    g_owner = getpid();
    atexit(cleanup);
    bip::shared_memory_object::remove(segname);
    void *resmem = mmap(NULL, sizeof(Result), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (resmem == MAP_FAILED)
        peers_die("mmap: %s", strerror(errno));
    Result *res = static_cast<Result *>(resmem);
    res->increments = 0;
    res->seconds = 0;
    peers_pin(0);

    uint64_t lost = 0;
    int ok = 0;
    try {
        bip::managed_shared_memory seg(bip::create_only, segname, 16u << 20);
        CharAlloc alloc(seg.get_segment_manager());
        seg.construct<bip::interprocess_mutex>("lock")();
        RecordMap *map = seg.construct<RecordMap>("records")(std::less<ShmString>(),
                                                             MapAlloc(seg.get_segment_manager()));
        for (int r = 0; r < kRecords; r++) {
            char k[32], name[32];
            make_key(k, sizeof k, r);
            snprintf(name, sizeof name, "player-%d", r);
            Record rec(alloc);
            for (int f = 0; f < kFields; f++)
                *rec.field(f) = c1_init(r, f);
            rec.name = name;
            rec.inventory.push_back(1);
            rec.inventory.push_back(2);
            rec.inventory.push_back(3);
            map->insert(MapValue(ShmString(k, alloc), rec));
        }

        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            peers_die("fork: %s", strerror(errno));
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            int rc = 1;
            try {
                rc = incrementer(segname, target, res);
            } catch (const std::exception &e) {
                fprintf(stderr, "boost: incrementer: %s\n", e.what());
            }
            _exit(rc);
        }
        if (peers_wait_child(pid, 60.0 + target * 10) == 0) {
            ok = 1;
            bip::scoped_lock<bip::interprocess_mutex> lock(
                *seg.find<bip::interprocess_mutex>("lock").first);
            for (int r = 0; r < kRecords; r++) {
                char k[32], name[32];
                make_key(k, sizeof k, r);
                snprintf(name, sizeof name, "player-%d", r);
                RecordMap::iterator it = map->find(ShmString(k, alloc));
                if (it == map->end()) {
                    lost += kFields;
                    continue;
                }
                Record &rec = it->second;
                for (int f = 0; f < kFields; f++) {
                    int64_t want = c1_expect(r * kFields + f, res->increments);
                    int64_t got = *rec.field(f);
                    lost += (uint64_t)(want > got ? want - got : got - want);
                }
                if (rec.name != name || rec.inventory.size() != 3)
                    lost += kFields; /* record corrupted: count it lost */
            }
        }
    } catch (const std::exception &e) {
        bip::shared_memory_object::remove(segname);
        peers_skip("boost: %s", e.what());
    }
    bip::shared_memory_object::remove(segname);
    if (!ok || res->increments == 0)
        peers_die("C1 boost: incrementer failed");
    peers_report("C1", "boost", "Mincr/s", (double)res->increments / res->seconds / 1e6);
    peers_report("C1", "boost", "lost-increments", (double)lost);
    if (lost)
        peers_die("C1 boost: %llu increments lost", (unsigned long long)lost);
    munmap(resmem, sizeof(Result));
    return 0;
}

} // namespace

static int c1_boost_run(const bench_ctx *ctx)
{
    return run(ctx->quick ? 0.2 : 1.0);
}

int main(int argc, char **argv)
{
    // Listed by bench-peers-c1, which execs this program for `--run C1
    // boost`; an empty --list keeps the subject from being listed twice.
    if (argc == 2 && strcmp(argv[1], "--list") == 0)
        return 0;
    static const bench_entry table[] = {
        {"C1", "boost", c1_boost_run, 0},
        {NULL, NULL, NULL, 0},
    };
    return bench_main(argc, argv, table);
}
