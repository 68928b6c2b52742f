// The README's exchange in C++17 with shmobj.hpp: a consumer thread that
// starts first and waits, a producer that sends a typed record with
// completion, a map, and errors as exceptions.
//
//   hello [NAME]
#include <shmobj.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>

namespace {

constexpr std::int64_t wait_ns = 5'000'000'000;

// B: may start before A; waits for the segment, the queue and the map.
void consume(const std::string &name)
{
    auto seg = shmobj::segment::open(name, wait_ns);
    auto q = shmobj::queue::open(seg, "records", wait_ns);
    auto m = shmobj::map::open(seg, "cache", wait_ns);
    std::optional<shmobj::ref> msg = q.take(wait_ns);
    if (!msg)
        throw shmobj::error(SHMOBJ_ETIMEDOUT, "no record came");
    auto [data, len] = q.msg_data(*msg);
    shmobj::ref obj;
    std::memcpy(&obj, data, sizeof obj);
    (void)len;
    shmobj::view rec = seg.get(obj); // read in place
    rec["employees"].add(std::int64_t{1}); // atomic, seen by the producer at once
    std::printf("consumer: %s from %.*s, cache says %s\n", rec.json().c_str(),
                static_cast<int>(rec["city"].as_str().size()), rec["city"].as_str().data(),
                m.get("key").value_or("nothing").c_str());
    q.msg_done(*msg); // wakes the producer
}

void consumer(const std::string &name, bool *ok)
{
    try {
        consume(name);
        *ok = true;
    } catch (const shmobj::error &e) {
        std::fprintf(stderr, "consumer: %s (%s)\n", e.what(), e.name());
    }
}

// A: creates the segment (growable to 1 GiB), a map and a queue, sends a
// record with completion and checks what the consumer did to it.
bool produce(const std::string &name)
{
    auto seg = shmobj::segment::create(name, 4u << 20, 1ull << 30);
    auto m = shmobj::map::open_or_create(seg, "cache");
    m.set("key", "value");
    auto q = shmobj::queue::create(seg, "records", 64);
    // builders own their storage: no dangling C compound literals
    shmobj::value desc = shmobj::dict({
        {shmobj::str("employees"), shmobj::integer(10)},
        {shmobj::str("avg_salary"), shmobj::real(3000.0)},
        {shmobj::str("city"), shmobj::str("Oslo")},
        {shmobj::str("tags"), shmobj::list({shmobj::str("a"), shmobj::integer(2)})},
    });
    shmobj::ref obj = seg.put(desc);
    auto [msg, data] = q.msg_alloc(sizeof obj, SHMOBJ_QUEUE_MSG_TRACK);
    std::memcpy(data, &obj, sizeof obj);
    q.put(msg);
    bool done = q.msg_wait_done(msg, wait_ns);
    std::int64_t employees = seg.get(obj)["employees"].as_int();
    std::printf("producer: done %d, employees now %lld\n", done,
                static_cast<long long>(employees));
    q.msg_free(msg);
    seg.free(obj);
    try {
        seg.get(obj); // freed: the library refuses the stale reference
        return false;
    } catch (const shmobj::error &e) {
        std::printf("producer: a freed object gives %s\n", e.name());
        if (e.code() != SHMOBJ_ESTALE)
            return false;
    }
    return done && employees == 11;
}

} // namespace

int main(int argc, char **argv)
{
    std::string name = argc > 1 ? argv[1] : "hello-cxx-" + std::to_string(getpid());
    bool consumed = false, produced = false;
    std::thread b(consumer, name, &consumed); // B starts first
    try {
        produced = produce(name);
    } catch (const shmobj::error &e) {
        std::fprintf(stderr, "producer: %s (%s)\n", e.what(), e.name());
    }
    b.join(); // a consumer left without a record gives up after wait_ns
    shmobj::segment::destroy(name);
    return consumed && produced ? 0 : 1;
}
