// The C calls beside shmobj.hpp, from C++17: a consumer process started
// first, objects sent with completion (shmobj_queue_put_tracked), and a
// mutable dict inside the object, all through the C functions (tour.cpp
// does the same with the wrappers). Every class of shmobj.hpp gives its C
// handle with c(), so any C call takes it; shmobj::check() turns a status
// into an exception. C descriptions work in C++ too when their arrays are
// named (SHMOBJ_VAL_DICT(kv, n)): only the *_OF macros, which would build
// the array in a temporary, are refused.
//
//   jobs [NAME]
#include <shmobj.hpp>

#include <cstdio>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

constexpr std::int64_t wait_ns = 10'000'000'000;
constexpr int jobs = 16;

// B: waits for the segment and the queue, answers each job in place, and
// marks it done, which wakes its sender.
int consume(const std::string &name)
{
    auto seg = shmobj::segment::open(name, wait_ns);
    auto q = shmobj::queue::open(seg, "jobs", wait_ns);
    const shmobj_value by = SHMOBJ_VAL_STR("by"), me = SHMOBJ_VAL_STR("consumer");
    for (int i = 0; i < jobs; i++) {
        std::optional<shmobj::ref> r = q.take(wait_ns);
        if (!r)
            throw shmobj::error(SHMOBJ_ETIMEDOUT, "no job came");
        shmobj::view job = seg.get(*r);
        std::int64_t n = job["n"].as_int();
        job["square"].set(n * n);
        // a mutable dict changes through the C calls, on the C view
        shmobj::check(shmobj_mdict_set(job["notes"].c(), &by, &me), "shmobj_mdict_set");
        shmobj::check(shmobj_queue_done(q.c(), *r), "shmobj_queue_done");
    }
    return 0;
}

// A: creates the segment and the queue, sends the jobs tracked, waits for
// each and frees it.
bool produce(const std::string &name)
{
    auto seg = shmobj::segment::create(name, 4u << 20, 1ull << 30);
    auto q = shmobj::queue::create(seg, "jobs", 64);
    bool ok = true;
    for (int i = 0; i < jobs && ok; i++) {
        const shmobj_value kv[] = {
            SHMOBJ_VAL_STR("n"), SHMOBJ_VAL_INT(i),
            SHMOBJ_VAL_STR("square"), SHMOBJ_VAL_INT(-1),
            SHMOBJ_VAL_STR("notes"), SHMOBJ_VAL_MDICT(), // empty, mutable
        };
        const shmobj_value desc = SHMOBJ_VAL_DICT(kv, 3);
        shmobj::ref job = 0;
        shmobj::check(shmobj_obj_put(seg.c(), &desc, &job), "shmobj_obj_put");
        shmobj::check(shmobj_queue_put_tracked(q.c(), job, wait_ns), "shmobj_queue_put_tracked");
        shmobj::check(shmobj_queue_wait_done(q.c(), job, wait_ns), "shmobj_queue_wait_done");
        shmobj::view v = seg.get(job); // done: the consumer no longer reads it
        ok = v["square"].as_int() == std::int64_t{i} * i &&
             v["notes"].json() == R"({"by":"consumer"})";
        if (i == jobs - 1)
            std::printf("producer: last job %s\n", v.json().c_str());
        seg.free(job);
    }
    return ok;
}

} // namespace

int main(int argc, char **argv)
{
    std::string name = argc > 1 ? argv[1] : "jobs-cxx-" + std::to_string(getpid());
    pid_t pid = fork(); // B starts first
    if (pid == 0) {
        int rc = 1;
        try {
            rc = consume(name);
        } catch (const shmobj::error &e) {
            std::fprintf(stderr, "consumer: %s (%s)\n", e.what(), e.name());
        }
        std::fflush(stdout);
        _exit(rc);
    }
    bool produced = false;
    try {
        produced = produce(name);
    } catch (const shmobj::error &e) {
        std::fprintf(stderr, "producer: %s (%s)\n", e.what(), e.name());
    }
    int st = 0;
    bool consumed = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
                    WEXITSTATUS(st) == 0;
    shmobj::segment::destroy(name);
    return consumed && produced ? 0 : 1;
}
