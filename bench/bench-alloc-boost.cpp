// Boost.Interprocess peer of benchmark A1: managed_shared_memory's
// allocate/deallocate (rbtree best fit behind its interprocess mutex), used
// by bench-alloc.c built with -DBENCH_PEER_BOOST.
#include <boost/interprocess/managed_shared_memory.hpp>

#include <cstdio>
#include <new>
#include <unistd.h>

namespace bip = boost::interprocess;

static bip::managed_shared_memory *seg;
static char name[64];

extern "C" int bench_boost_open(size_t bytes)
{
    std::snprintf(name, sizeof(name), "shmobj-bench-alloc-%d", (int)getpid());
    bip::shared_memory_object::remove(name);
    try {
        seg = new bip::managed_shared_memory(bip::create_only, name, bytes);
    } catch (...) {
        return -1;
    }
    return 0;
}

extern "C" void *bench_boost_alloc(size_t n)
{
    return seg->allocate(n, std::nothrow);
}

extern "C" void bench_boost_free(void *p)
{
    seg->deallocate(p);
}

extern "C" void bench_boost_close(void)
{
    delete seg;
    seg = nullptr;
    bip::shared_memory_object::remove(name);
}
