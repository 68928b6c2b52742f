// The whole library from C++17 with shmobj.hpp: a record type declared
// once from a struct, readings sent as records with completion, a worker
// process that files them into a mutable dict, list and set, counts them
// in the shared map and announces each on a topic, then answers a question
// sent as a typed object through a service, and a sender that reads it all
// back. The worker starts first and waits for the rest.
//
//   tour [NAME] [READINGS]
#include <shmobj.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

constexpr std::int64_t wait_ns = 10'000'000'000;

// A C++ struct, stored as a record: one 16-byte slot per field, the names
// once in the shape.
struct reading {
    std::int64_t id;
    double celsius;
    char sensor[16];
};
const shmobj::record_type<reading> reading_type{
    SHMOBJ_HPP_FIELD(reading, id),
    SHMOBJ_HPP_FIELD(reading, celsius),
    SHMOBJ_HPP_FIELD(reading, sensor),
};

// B: takes each reading, files it, marks it done (which wakes its sender).
int work(const std::string &name, int readings)
{
    auto seg = shmobj::segment::open(name, wait_ns);
    auto jobs = shmobj::queue::open(seg, "jobs", wait_ns);
    auto events = shmobj::topic::open(seg, "events", wait_ns);
    auto counts = shmobj::map::open(seg, "counts", wait_ns);
    auto ask = shmobj::service::open(seg, "ask", wait_ns);
    shmobj::view filed = seg.get(*seg.root_wait("filed", wait_ns));
    shmobj::mutable_dict by_sensor(filed["by_sensor"]); // sensor -> readings
    shmobj::mutable_list hot(filed["hot"]);             // ids above 30 C
    shmobj::mutable_set sensors(filed["sensors"]);      // every sensor seen

    for (int i = 0; i < readings; i++) {
        std::optional<shmobj::ref> r = jobs.take(wait_ns);
        if (!r)
            return 1;
        reading x = reading_type.get(seg.get(*r)); // the record, as a struct
        if (sensors.add(x.sensor))
            by_sensor.set(x.sensor, 0);
        by_sensor.add(x.sensor, 1);
        if (x.celsius > 30)
            hot.append(x.id);
        counts.add("readings", 1);
        std::string event = "filed " + std::to_string(x.id) + " from " + x.sensor;
        events.publish(event);
        jobs.done(*r); // the sender may free the record now
    }

    // one question, {"sensor": name}, read in place; the answer an object too
    std::optional<shmobj::service::request> q = ask.take(wait_ns);
    if (!q)
        return 1;
    std::string sensor(ask.object(*q)["sensor"].as_str());
    std::int64_t n = by_sensor.get_int(sensor).value_or(0);
    ask.reply_object(*q, shmobj::dict({{shmobj::str("sensor"), shmobj::str(sensor)},
                                       {shmobj::str("readings"), shmobj::integer(n)}}));
    return 0;
}

// A: makes everything, sends the readings tracked, and checks what came back.
bool send(const std::string &name, int readings)
{
    auto seg = shmobj::segment::create(name, 4u << 20, 256u << 20);
    auto counts = shmobj::map::create(seg, "counts");
    shmobj_topic_config cfg;
    shmobj_topic_config_init(&cfg);
    cfg.capacity = 64;
    auto events = shmobj::topic::create(seg, "events", &cfg);
    shmobj::subscription news = events.subscribe(); // before any is published
    shmobj::ref filed = seg.put(shmobj::dict({{shmobj::str("by_sensor"), shmobj::mdict()},
                                              {shmobj::str("hot"), shmobj::mlist()},
                                              {shmobj::str("sensors"), shmobj::mset()}}));
    seg.root_set("filed", filed);
    shmobj::ref shape = reading_type.make_shape(seg);
    auto jobs = shmobj::queue::create(seg, "jobs", 16);
    auto ask = shmobj::service::create(seg, "ask", 4);

    const char *names[] = {"boiler", "attic", "cellar"};
    for (int i = 0; i < readings; i++) {
        reading x{i, 15.0 + 2.0 * i, {}};
        std::snprintf(x.sensor, sizeof x.sensor, "%s", names[i % 3]);
        shmobj::ref r = reading_type.put(seg, shape, x);
        jobs.put_tracked(r);
        if (jobs.wait_done(r, wait_ns) != shmobj::completion::done)
            return false;
        seg.free(r); // done: no one reads it any more
    }

    // a question as a typed object; the answer frees itself when it goes
    shmobj::service::response a =
        ask.call_object(shmobj::dict({{shmobj::str("sensor"), shmobj::str("boiler")}}), wait_ns);
    std::int64_t boiler = a.object()["readings"].as_int();
    std::printf("boiler: %lld readings (asked)\n", static_cast<long long>(boiler));

    int events_seen = 0;
    while (std::optional<shmobj::topic_message> m = news.take(0)) {
        if (events_seen++ == 0)
            std::printf("first event: %.*s\n", static_cast<int>(m->size()),
                        static_cast<const char *>(m->data()));
    } // each message is released as it goes

    shmobj::view v = seg.get(filed);
    std::int64_t total = 0;
    for (const auto &[sensor, n] : shmobj::mutable_dict(v["by_sensor"])) {
        std::printf("%.*s: %lld\n", static_cast<int>(sensor.as_str().size()),
                    sensor.as_str().data(), static_cast<long long>(n.as_int()));
        total += n.as_int();
    }
    std::size_t hot = 0;
    for (const shmobj::view &id : shmobj::mutable_list(v["hot"]))
        hot += id.as_int() > 7; // 15 + 2 * id > 30
    std::printf("filed %s\n", v.json().c_str());
    std::optional<std::int64_t> counted = counts.get_as<std::int64_t>("readings");
    seg.free(shape); // its records are all freed
    return total == readings && events_seen == readings && counted == readings &&
           boiler == (readings + 2) / 3 &&
           hot == static_cast<std::size_t>(readings > 8 ? readings - 8 : 0);
}

} // namespace

int main(int argc, char **argv)
{
    std::string name = argc > 1 ? argv[1] : "tour-cxx-" + std::to_string(getpid());
    int readings = argc > 2 ? std::atoi(argv[2]) : 12;
    pid_t pid = fork(); // B starts first
    if (pid == 0) {
        int rc = 1;
        try {
            rc = work(name, readings);
        } catch (const shmobj::error &e) {
            std::fprintf(stderr, "worker: %s (%s)\n", e.what(), e.name());
        }
        std::fflush(stdout);
        _exit(rc);
    }
    bool sent = false;
    try {
        sent = send(name, readings);
    } catch (const shmobj::error &e) {
        std::fprintf(stderr, "sender: %s (%s)\n", e.what(), e.name());
    }
    int st = 0;
    bool worked = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
                  WEXITSTATUS(st) == 0;
    shmobj::segment::destroy(name);
    std::printf("%s\n", sent && worked ? "ok" : "FAILED");
    return sent && worked ? 0 : 1;
}
