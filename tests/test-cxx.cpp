// shmobj.hpp over the whole library: mutable containers and their
// iterators while other writers change them, records declared from a C++
// struct, completion, topics, the map's ranges, the error_code forms, and
// objects that share their segment so that every order of destruction is
// safe (and leaves the survivors working).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" { // this cmocka.h declares its functions without it
#include <cmocka.h>
}

#include <shmobj.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

// tests/test-util.h is C only; what this program needs of it.
#define TEST_MS (INT64_C(1000000))

namespace {

std::string unique_name(const char *tag)
{
    static unsigned counter;
    return std::string("shmobj-test-cxx-") + tag + "-" + std::to_string(getpid()) + "-" +
           std::to_string(counter++);
}

shmobj::segment make_segment(const char *tag)
{
    return shmobj::segment::create(unique_name(tag), 4u << 20, 64u << 20, SHMOBJ_BACKEND_MEMFD);
}

// The status a call threw (0 when it did not throw).
template <class Fn> int thrown(Fn &&fn)
{
    try {
        fn();
    } catch (const shmobj::error &e) {
        return e.status();
    }
    return 0;
}

// ---- mutable containers ----------------------------------------------------

// A list, a dict and a set nested in one object change through their
// wrappers, and range-for sees what they hold.
void test_cxx_mutable_roundtrip(void **)
{
    shmobj::segment seg = make_segment("mut");
    shmobj::ref r = seg.put(shmobj::dict({{shmobj::str("log"), shmobj::mlist()},
                                          {shmobj::str("counts"), shmobj::mdict()},
                                          {shmobj::str("tags"), shmobj::mset()}}));
    shmobj::view top = seg.get(r);
    shmobj::mutable_list log(top["log"]);
    shmobj::mutable_dict counts(top["counts"]);
    shmobj::mutable_set tags(top["tags"]);

    log.append(1);
    log.append("two");
    log.append(3.5);
    log.append(shmobj::list({shmobj::integer(4), shmobj::integer(5)}));
    log.insert(0, nullptr);
    assert_int_equal(log.size(), 5);
    assert_int_equal(log[0].type(), SHMOBJ_TYPE_NULL);
    assert_int_equal(log.get_int(1), 1);
    assert_true(log[2].as_str() == "two");
    log.set(2, std::string("deux"));
    assert_true(log.at(2).as_str() == "deux");
    std::vector<int> types;
    for (const shmobj::view &v : log)
        types.push_back(v.type());
    assert_true((types == std::vector<int>{SHMOBJ_TYPE_NULL, SHMOBJ_TYPE_INT, SHMOBJ_TYPE_STR,
                                           SHMOBJ_TYPE_DOUBLE, SHMOBJ_TYPE_LIST}));
    shmobj::ref popped = log.pop();
    assert_int_equal(seg.get(popped)[1].as_int(), 5);
    seg.free(popped);
    log.erase(0);
    assert_int_equal(log.size(), 3);
    assert_int_equal(thrown([&] { log.at(3); }), SHMOBJ_ERANGE);

    counts.set("a", 1);
    counts.set(7, "seven");
    counts.set(shmobj::key_view::bytes("\x01\x02", 2), 2.5);
    counts.set("nested", shmobj::mdict());
    assert_int_equal(counts.size(), 4);
    assert_int_equal(counts.add("a", 10), 1);
    assert_int_equal(counts.get_int("a").value(), 11);
    assert_false(counts.get_int("absent").has_value());
    assert_true(counts[7].as_str() == "seven");
    assert_true(counts.contains("nested"));
    assert_false(counts.get("absent").has_value());
    assert_int_equal(thrown([&] { counts["absent"]; }), SHMOBJ_ENOTFOUND);
    assert_int_equal(thrown([&] { counts.add("absent", 1); }), SHMOBJ_ENOTFOUND);
    shmobj::mutable_dict(counts["nested"]).set("deep", true);
    std::vector<std::string> keys;
    for (const auto &[k, v] : counts) { // insertion order
        keys.push_back(k.type() == SHMOBJ_TYPE_INT ? std::to_string(k.as_int())
                                                   : std::string(k.type() == SHMOBJ_TYPE_STR
                                                                     ? k.as_str()
                                                                     : "bytes"));
        assert_true(v.type() != 0);
    }
    assert_true((keys == std::vector<std::string>{"a", "7", "bytes", "nested"}));
    assert_true(counts.erase("a"));
    assert_false(counts.erase("a"));
    assert_true(top.json().find(R"("nested":{"deep":true})") != std::string::npos);

    assert_true(tags.add("red"));
    assert_false(tags.add("red"));
    assert_true(tags.add(42));
    assert_true(tags.contains(42));
    std::size_t n = 0;
    for (const shmobj::view &m : tags)
        n += m.type() == SHMOBJ_TYPE_STR || m.type() == SHMOBJ_TYPE_INT;
    assert_int_equal(n, 2);
    assert_true(tags.erase("red"));
    tags.clear();
    assert_true(tags.empty());

    // a view of another kind is refused, by both forms
    assert_int_equal(thrown([&] { shmobj::mutable_list{top["counts"]}; }), SHMOBJ_ETYPE);
    std::error_code ec;
    shmobj::mutable_set wrong(top["log"], ec);
    assert_true(ec == SHMOBJ_ETYPE);
    assert_false(static_cast<bool>(wrong));
    seg.free(r);
}

// A list shortened under its iterator ends the loop where the list now
// ends; a dict whose other keys come and go during the loop still gives
// every key present throughout exactly once; a container freed under its
// iterator ends it with SHMOBJ_ESTALE (thrown, or set by the error_code
// form), never with a crash or a read of freed memory.
void test_cxx_mutable_iteration_while_changing(void **)
{
    shmobj::segment seg = make_segment("mut-iter");
    shmobj::ref lr = seg.put(shmobj::mlist());
    shmobj::mutable_list list(seg.get(lr));
    for (int i = 0; i < 10; i++)
        list.append(i);
    std::vector<std::int64_t> seen;
    for (const shmobj::view &v : list) {
        seen.push_back(v.as_int());
        if (seen.size() == 3)
            for (int k = 0; k < 5; k++)
                list.erase(list.size() - 1); // drop 9..5
    }
    assert_true((seen == std::vector<std::int64_t>{0, 1, 2, 3, 4}));

    shmobj::ref dr = seg.put(shmobj::mdict());
    shmobj::mutable_dict dict(seg.get(dr));
    for (int i = 0; i < 64; i++)
        dict.set(i, i);
    std::set<std::int64_t> kept;
    int step = 0;
    for (const auto &kv : dict) {
        std::int64_t k = kv.first.as_int();
        if (k % 2 == 0)
            assert_true(kept.insert(k).second); // never twice
        // another writer: deletes odd keys, adds new ones, replaces values
        if (step < 32) { // a loop that adds a key per step would never end
            dict.erase(2 * step + 1);
            dict.set(1000 + step, step);
        }
        dict.set(0, step);
        step++;
    }
    assert_true(step >= 32 && step <= 64 + 32);
    for (int i = 0; i < 64; i += 2)
        assert_true(kept.count(i) == 1);

    std::size_t before_free = 0;
    int status = thrown([&] {
        for (const shmobj::view &v : list) {
            (void)v;
            if (++before_free == 2)
                seg.free(lr);
        }
    });
    assert_int_equal(status, SHMOBJ_ESTALE);
    assert_int_equal(before_free, 2);

    std::error_code ec;
    std::size_t steps = 0;
    for (const auto &kv : dict.items(ec)) {
        (void)kv;
        if (++steps == 3)
            seg.free(dr);
    }
    assert_true(ec == SHMOBJ_ESTALE);
    assert_int_equal(steps, 3);
    // a freed container's own calls answer SHMOBJ_ESTALE too
    dict.set("x", 1, ec);
    assert_true(ec == SHMOBJ_ESTALE);
}

// ---- records ---------------------------------------------------------------

struct reading {
    std::int64_t id;
    double temp;
    bool ok;
    std::uint64_t count;
    char sensor[12];
    std::uint8_t raw[4];
    shmobj::link_ref prev;
    const char *note;
};

const shmobj::record_type<reading> reading_type{
    SHMOBJ_HPP_FIELD(reading, id),     SHMOBJ_HPP_FIELD(reading, temp),
    SHMOBJ_HPP_FIELD(reading, ok),     SHMOBJ_HPP_FIELD(reading, count),
    SHMOBJ_HPP_FIELD(reading, sensor), SHMOBJ_HPP_FIELD(reading, raw),
    SHMOBJ_HPP_FIELD(reading, prev),   SHMOBJ_HPP_FIELD(reading, note),
};

// A struct declared once as a record type puts and reads back whole; its
// fields are read and updated in place by name and by position; a shape
// of another table and a record of another shape are refused.
void test_cxx_record_type_roundtrip(void **)
{
    static_assert(std::is_same_v<decltype(reading_type.fields()), const std::vector<shmobj_field> &>);
    assert_int_equal(reading_type.fields()[4].kind, SHMOBJ_TYPE_STR);
    assert_int_equal(reading_type.fields()[4].capacity, 12);
    assert_int_equal(reading_type.fields()[5].kind, SHMOBJ_TYPE_BYTES);
    assert_int_equal(reading_type.fields()[6].kind, SHMOBJ_TYPE_LINK);
    assert_int_equal(reading_type.index("temp").value(), 1);
    assert_false(reading_type.index("nope").has_value());

    shmobj::segment seg = make_segment("rec");
    shmobj::ref target = seg.put(shmobj::str("previous"));
    shmobj::ref shape = reading_type.make_shape(seg);
    reading in{7, 21.5, true, 3, "boiler-7", {1, 2, 3, 4}, {target}, "checked"};
    shmobj::ref r = reading_type.put(seg, shape, in);
    shmobj::view v = seg.get(r);
    assert_int_equal(v.type(), SHMOBJ_TYPE_RECORD);
    assert_int_equal(v.size(), 8);
    assert_true(v["sensor"].as_str() == "boiler-7");
    assert_true(v["prev"].follow().as_str() == "previous");
    v["temp"].set(22.25);
    v[*reading_type.index("count")].add(std::uint64_t{2});

    reading out = reading_type.get(v);
    assert_int_equal(out.id, 7);
    assert_true(out.temp == 22.25);
    assert_true(out.ok);
    assert_int_equal(out.count, 5);
    assert_string_equal(out.sensor, "boiler-7");
    assert_memory_equal(out.raw, in.raw, 4);
    assert_int_equal(out.prev.target, target);
    assert_string_equal(out.note, "checked");

    // a string that fills its char array (no NUL) reads back whole
    reading too_long = in;
    std::memset(too_long.sensor, 'x', sizeof too_long.sensor); // no NUL: 12 bytes, fits
    shmobj::ref r2 = reading_type.put(seg, shape, too_long);
    assert_int_equal(reading_type.get(seg.get(r2)).sensor[11], 'x');
    seg.free(r2);

    // a shape made from another table is refused before c is read
    struct other {
        std::int64_t id;
    };
    const shmobj::record_type<other> other_type{SHMOBJ_HPP_FIELD(other, id)};
    std::error_code ec;
    other o{1};
    other_type.put(seg, shape, o, ec);
    assert_true(ec == SHMOBJ_EINVAL);
    // and reading a record of another shape into a struct is SHMOBJ_ETYPE
    other_type.get(v, ec);
    assert_true(ec == SHMOBJ_ETYPE);
    assert_int_equal(thrown([&] { seg.free(shape); }), SHMOBJ_EINUSE);
    seg.free(r);
    seg.free(shape);
    seg.free(target);
}

// ---- tables ----------------------------------------------------------------

struct sample {
    std::int64_t id;
    double value;
    char tag[8];
};

const shmobj::record_type<sample> sample_type{SHMOBJ_HPP_FIELD(sample, id),
                                              SHMOBJ_HPP_FIELD(sample, value),
                                              SHMOBJ_HPP_FIELD(sample, tag)};

// A table of a struct declared once: rows appended one at a time and in
// a run read back whole, past a growth, in order by range-for; fields
// added to atomically; a column read as a strided buffer; a row too small
// for the shape and a struct with a pointer field are refused; the table
// outlives the segment object it came from.
void test_cxx_table_roundtrip(void **)
{
    shmobj::table<sample> tab;
    shmobj::ref shape, t;
    {
        shmobj::segment seg = make_segment("tab");
        shape = sample_type.make_shape(seg);
        t = shmobj::table<sample>::make(seg, shape, 4);
        tab = shmobj::table<sample>(seg.get(t));
        assert_int_equal(tab.append(sample{0, 0.0, "a"}), 0);
        std::vector<sample> more;
        for (std::int64_t i = 1; i < 10; i++)
            more.push_back(sample{i, 0.5 * static_cast<double>(i), "b"});
        assert_int_equal(tab.append(more.data(), more.size()), 1);
        // a row must hold every field of the shape where it says
        struct tiny {
            std::int64_t id;
        };
        std::error_code ec;
        shmobj::table<tiny>::make(seg, shape, 4, ec);
        assert_true(ec == SHMOBJ_EINVAL);
        // a const char * field has no fixed size
        shmobj::ref rshape = reading_type.make_shape(seg);
        shmobj::table<reading>::make(seg, rshape, 4, ec);
        assert_true(ec == SHMOBJ_EINVAL);
        seg.free(rshape);
    } // the segment object goes; the table's view keeps the segment
    assert_int_equal(tab.size(), 10);
    std::int64_t want = 0;
    for (const sample &r : tab) {
        assert_int_equal(r.id, want);
        assert_true(r.value == 0.5 * static_cast<double>(want));
        want++;
    }
    assert_int_equal(want, 10);
    assert_int_equal(tab.add(3, 0, 100), 3);
    assert_int_equal(tab[3].id, 103);
    assert_true(tab.add_double(2, 1, 1.0) == 1.0);
    assert_true(tab.get(2).value == 2.0);
    std::uint64_t seen = 0;
    double sum = 0;
    while (seen < 10) {
        shmobj_buffer_info col = tab.column(1, seen);
        assert_int_equal(col.strides[0], sizeof(sample));
        for (std::uint64_t i = 0; i < col.shape[0]; i++)
            sum += *reinterpret_cast<const double *>(static_cast<const unsigned char *>(col.data) +
                                                     i * sizeof(sample));
        seen += col.shape[0];
    }
    assert_true(sum == 0.5 * 45 + 1.0);
    assert_int_equal(thrown([&] { tab.get(10); }), SHMOBJ_ERANGE);
}

// ---- completion ------------------------------------------------------------

// A tracked reference is the sender's again once done; a wait times out
// while it is not; untrack says whether it was done; wait_all covers
// every reference the handle put.
void test_cxx_completion(void **)
{
    shmobj::segment seg = make_segment("done");
    shmobj::queue sender = shmobj::queue::create(seg, "jobs", 8);
    shmobj::queue worker = shmobj::queue::open(seg, "jobs");
    shmobj::ref job = seg.put(shmobj::dict({{shmobj::str("n"), shmobj::integer(6)},
                                            {shmobj::str("out"), shmobj::integer(0)}}));
    assert_true(sender.put_tracked(job));
    assert_true(sender.wait_done(job, 0) == shmobj::completion::timed_out);
    std::thread consumer([&] {
        shmobj::ref got = worker.take(1000 * TEST_MS).value();
        shmobj::view v = seg.get(got);
        v["out"].set(v["n"].as_int() * 7);
        worker.done(got);
    });
    assert_true(sender.wait_done(job, 5000 * TEST_MS) == shmobj::completion::done);
    consumer.join();
    assert_int_equal(seg.get(job)["out"].as_int(), 42);
    // released: a second wait knows it no more
    assert_int_equal(thrown([&] { sender.wait_done(job, 0); }), SHMOBJ_ENOTFOUND);

    // untrack of one not done: false, and the consumer's done is then told
    assert_true(sender.put_tracked(job, 0));
    assert_false(sender.untrack(job));
    shmobj::ref got = worker.take(0).value();
    std::error_code ec;
    worker.done(got, ec);
    assert_true(ec == SHMOBJ_ESTALE);

    // several at once, then wait_all
    std::vector<shmobj::ref> jobs;
    for (int i = 0; i < 4; i++) {
        jobs.push_back(seg.put(shmobj::integer(i)));
        assert_true(sender.put_tracked(jobs.back(), 0));
    }
    assert_true(sender.wait_all(0) == shmobj::completion::timed_out);
    while (std::optional<shmobj::ref> t = worker.take(0))
        worker.done(*t);
    assert_true(sender.wait_all(1000 * TEST_MS) == shmobj::completion::done);
    for (shmobj::ref j : jobs)
        seg.free(j);
    seg.free(job);
}

// A consumer process that dies between its take and its done makes the
// sender's wait end with peer_dead, the reference the sender's again.
void test_cxx_completion_peer_dead(void **)
{
    std::string name = unique_name("dead");
    shmobj::segment seg = shmobj::segment::create(name, 4u << 20);
    shmobj::queue q = shmobj::queue::create(seg, "jobs", 8);
    shmobj::ref job = seg.put(shmobj::str("work"));
    assert_true(q.put_tracked(job));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(20);
        try {
            shmobj::segment s = shmobj::segment::open(name, 5000 * TEST_MS);
            shmobj::queue w = shmobj::queue::open(s, "jobs");
            _exit(w.take(5000 * TEST_MS) ? 0 : 1); // dies without done()
        } catch (...) {
            _exit(2);
        }
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_true(q.wait_done(job, 10000 * TEST_MS) == shmobj::completion::peer_dead);
    seg.free(job);
    shmobj::segment::destroy(name);
}

// ---- services --------------------------------------------------------------

// A server process answers each call with its own request's bytes
// doubled; a call nobody answers in time says SHMOBJ_ETIMEDOUT; a request
// given back unanswered makes its call SHMOBJ_ENOTFOUND; the service
// handle outlives the segment object it came from.
void test_cxx_service_call_take_reply(void **)
{
    std::string name = unique_name("svc");
    shmobj::service svc;
    {
        shmobj::segment seg = shmobj::segment::create(name, 4u << 20);
        svc = shmobj::service::create(seg, "echo", 8);
    }
    std::error_code ec;
    svc.call("nobody", 50 * TEST_MS, ec);
    assert_true(ec == SHMOBJ_ETIMEDOUT);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(20);
        try {
            shmobj::segment s = shmobj::segment::open(name, 5000 * TEST_MS);
            shmobj::service server = shmobj::service::open(s, "echo", 5000 * TEST_MS);
            for (int i = 0; i < 3; i++) {
                auto req = server.take(5000 * TEST_MS);
                if (!req)
                    _exit(1);
                if (req->bytes() == "give back") {
                    server.release(*req);
                    continue;
                }
                std::string twice(req->bytes());
                twice += req->bytes();
                server.reply(*req, twice);
            }
            _exit(0);
        } catch (...) {
            _exit(2);
        }
    }
    assert_true(svc.call("ab", 5000 * TEST_MS) == "abab");
    svc.call("give back", 5000 * TEST_MS, ec);
    assert_true(ec == SHMOBJ_ENOTFOUND);
    assert_true(svc.call("xyz", 5000 * TEST_MS) == "xyzxyz");
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_false(svc.take(0).has_value());
    shmobj::segment::destroy(name);
}

// Typed objects both ways: a server process reads each request object in
// place and answers with an object (or, for a request of bytes, says
// SHMOBJ_ETYPE and answers with bytes); the client's response frees
// itself when it goes, and every block comes back to the heap.
void test_cxx_service_objects(void **)
{
    std::string name = unique_name("svco");
    shmobj::segment seg = shmobj::segment::create(name, 4u << 20);
    shmobj::service svc = shmobj::service::open_or_create(seg, "adder", 8);
    shmobj_arena_stats before{}, after{};
    before.struct_size = after.struct_size = sizeof before;
    assert_int_equal(shmobj_arena_stats_get(seg.c(), &before), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(20);
        try {
            shmobj::segment s = shmobj::segment::open(name, 5000 * TEST_MS);
            shmobj::service server = shmobj::service::open_or_create(s, "adder", 8);
            for (int i = 0; i < 2; i++) {
                auto req = server.take(5000 * TEST_MS);
                if (!req)
                    _exit(1);
                std::error_code ec;
                shmobj::view v = server.object(*req, ec);
                if (!req->is_object()) {
                    if (ec != SHMOBJ_ETYPE)
                        _exit(3);
                    server.reply(*req, "bytes");
                    continue;
                }
                std::int64_t sum = v["a"].as_int() + v["b"].as_int();
                server.reply_object(*req, shmobj::dict({{shmobj::str("sum"),
                                                         shmobj::integer(sum)}}));
            }
            _exit(0);
        } catch (...) {
            _exit(2);
        }
    }
    {
        shmobj::service::response r = svc.call_object(
            shmobj::dict({{shmobj::str("a"), shmobj::integer(20)},
                          {shmobj::str("b"), shmobj::integer(22)}}),
            5000 * TEST_MS);
        assert_true(r.is_object());
        assert_int_equal(r.object()["sum"].as_int(), 42);
        shmobj::service::response moved = std::move(r);
        assert_int_equal(moved.object()["sum"].as_int(), 42);
    }
    std::string bytes = svc.call("plain", 5000 * TEST_MS);
    assert_true(bytes == "bytes");
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    // a call that cannot be sent gives its object back
    std::error_code ec;
    shmobj::service none;
    shmobj::service::response r = none.call_object(shmobj::integer(1), 1, ec);
    assert_true(ec == SHMOBJ_EINVAL);
    assert_false(r.is_object());
    svc.call_object(shmobj::integer(1), 0, ec);
    assert_true(ec == SHMOBJ_EINVAL);
    assert_int_equal(shmobj_arena_stats_get(seg.c(), &after), 0);
    assert_int_equal(after.used_blocks, before.used_blocks);
    shmobj::segment::destroy(name);
}

// ---- topics ----------------------------------------------------------------

// Publish copies, loans and references; every subscription reads every
// message in order; a message releases itself when it goes, a loan not
// published is given back when it goes.
void test_cxx_topic(void **)
{
    shmobj::segment seg = make_segment("topic");
    shmobj_topic_config cfg;
    shmobj_topic_config_init(&cfg);
    cfg.capacity = 8;
    cfg.history = 2;
    shmobj::topic t = shmobj::topic::create(seg, "news", &cfg);
    assert_true(t.publish("early-0"));
    assert_true(t.publish("early-1"));
    assert_true(t.publish("early-2"));
    shmobj::subscription late = t.subscribe(); // gets the last two
    shmobj::topic reader = shmobj::topic::open(seg, "news");
    shmobj::subscription sub = reader.subscribe();
    {
        shmobj::topic_loan loan = t.loan(16);
        std::memcpy(loan.data(), "loaned", 6);
        assert_true(loan.publish(6));
        assert_false(static_cast<bool>(loan));
    }
    {
        shmobj::topic_loan dropped = t.loan(32);
        assert_int_equal(t.stats().loans, 1);
    }
    assert_int_equal(t.stats().loans, 0); // cancelled by its destructor
    shmobj::ref block = seg.put(shmobj::str("by reference"));
    assert_true(t.publish_ref(block, 16));

    std::vector<std::string> got;
    while (std::optional<shmobj::topic_message> m = late.take(0))
        got.push_back(std::string(m->bytes()));
    assert_int_equal(got.size(), 4); // the history of 2, then what came after
    assert_true(got[0] == "early-1" && got[1] == "early-2" && got[2] == "loaned");
    assert_int_equal(got[3].size(), 16);

    std::optional<shmobj::topic_message> m1 = sub.take(0);
    assert_true(m1.has_value() && m1->bytes() == "early-1" && m1->seq() == 1);
    std::vector<shmobj::topic_message> held;
    while (std::optional<shmobj::topic_message> m = sub.take(1 * TEST_MS))
        held.push_back(std::move(*m));
    assert_int_equal(held.size(), 3);
    assert_true(held[1].bytes() == "loaned" && held[1].seq() == 3);
    held.clear(); // released, and with the last one every earlier one
    m1->release(); // nothing left to do
    // the ring drains: five more fit a capacity of 8 only if all were released
    for (int i = 0; i < 7; i++) {
        assert_true(t.publish(std::to_string(i), 1000 * TEST_MS));
        sub.take(0);
        late.take(0);
    }
    std::error_code ec;
    shmobj::topic::open(seg, "absent", 0, ec);
    assert_true(ec == SHMOBJ_ENOTFOUND);
}

// ---- the map ---------------------------------------------------------------

// Values from strings, pointers and contiguous ranges; typed reads back;
// a value of the wrong size is SHMOBJ_ETYPE; range-for over the entries.
void test_cxx_map_ranges(void **)
{
    shmobj::segment seg = make_segment("map");
    shmobj::map m = shmobj::map::create(seg, "kv");
    const std::vector<float> v{1.5f, 2.5f, 3.5f};
    const std::array<std::uint16_t, 3> a{{7, 8, 9}};
    const double d = 0.125;
    m.set("floats", v);
    m.set("shorts", a);
    m.set("double", &d, sizeof d);
    m.set(std::string_view("bin\0key", 7), std::string("text"));
    m.set("long", std::string(300, 'L'));
    assert_true(m.get_array<float>("floats").value() == v);
    assert_int_equal(m.get_array<std::uint16_t>("shorts").value()[2], 9);
    assert_true(m.get_as<double>("double").value() == 0.125);
    assert_true(m.get(std::string_view("bin\0key", 7)).value() == "text");
    assert_int_equal(m.get("long")->size(), 300);
    assert_false(m.get_as<double>("absent").has_value());
    assert_int_equal(thrown([&] { m.get_as<std::uint64_t>("floats"); }), SHMOBJ_ETYPE);
    assert_int_equal(thrown([&] { m.get_array<double>("shorts"); }), SHMOBJ_ETYPE);
    {
        std::optional<shmobj::map_view> mv = m.get_view("floats");
        assert_int_equal(mv->size(), 12);
        float first = 0;
        std::memcpy(&first, mv->data(), sizeof first);
        assert_true(first == 1.5f);
    }
    std::set<std::string> keys;
    std::size_t bytes = 0;
    for (const shmobj::map::entry &e : m) {
        keys.insert(std::string(e.key));
        bytes += e.value.size();
    }
    assert_int_equal(keys.size(), 5);
    assert_int_equal(bytes, 12 + 6 + 8 + 4 + 300);
    std::error_code ec;
    std::size_t n = 0;
    for (const auto &e : m.items(ec))
        n += !e.key.empty();
    assert_false(static_cast<bool>(ec));
    assert_int_equal(n, 5);
    m.clear();
    assert_int_equal(m.size(), 0);
}

// A watch of a key and of a list in a wait-set with a queue: each woken
// by its own change, consumed, and quiet again.
void test_cxx_watch_waitset(void **)
{
    shmobj::segment seg = make_segment("watch");
    shmobj::map m = shmobj::map::create(seg, "kv");
    shmobj::queue q = shmobj::queue::create(seg, "q", 8);
    shmobj::watch wk = shmobj::watch::map_key(m, "k");
    assert_true(wk.fd() >= 0);
    assert_false(wk.consume());
    assert_false(wk.wait(0));
    shmobj::waitset ws;
    int ktag = 0, qtag = 0;
    ws.add(wk, &ktag);
    ws.add(q, &qtag);
    assert_true(ws.wait(0).empty());
    m.set("other", std::string("x"));
    assert_true(ws.wait(0).empty());
    m.set("k", std::string("v"));
    std::vector<void *> ready = ws.wait(shmobj::forever);
    assert_int_equal(ready.size(), 1);
    assert_ptr_equal(ready[0], &ktag);
    assert_true(wk.wait(0));
    assert_true(wk.consume());
    assert_true(ws.wait(0).empty());
    // the watch taken out: its changes no longer wake the set
    ws.remove(wk);
    assert_int_equal(thrown([&] { ws.remove(wk); }), SHMOBJ_ENOTFOUND);
    m.set("k", std::string("w"));
    assert_true(ws.wait(0).empty());
    std::error_code ec;
    shmobj::watch bad = shmobj::watch::map_key(shmobj::map(), "k", ec);
    assert_int_equal(ec.value(), SHMOBJ_EINVAL);
    assert_false(static_cast<bool>(bad));
    assert_int_equal(thrown([&] { shmobj::watch::map_key(shmobj::map(), "k"); }), SHMOBJ_EINVAL);
}

// ---- errors ----------------------------------------------------------------

// Every error_code form sets the library's code and throws nothing; the
// throwing form throws the same code; ordinary outcomes are neither.
void test_cxx_error_code_forms(void **)
{
    std::error_code ec;
    shmobj::segment none = shmobj::segment::open(unique_name("absent"), 0, SHMOBJ_BACKEND_SHM, ec);
    assert_true(ec == SHMOBJ_ENOTFOUND);
    assert_true(ec.category() == shmobj::category());
    assert_false(static_cast<bool>(none));
    assert_int_equal(thrown([&] { shmobj::segment::open(unique_name("absent")); }),
                     SHMOBJ_ENOTFOUND);
    shmobj::segment::create("bad/name", nullptr, ec);
    assert_true(ec == SHMOBJ_EINVAL);

    shmobj::segment seg = make_segment("ec");
    shmobj::ref r = seg.put(shmobj::dict({{shmobj::str("n"), shmobj::integer(1)}}), ec);
    assert_false(static_cast<bool>(ec));
    shmobj::view v = seg.get(r, ec);
    assert_false(static_cast<bool>(ec));
    v["n"].set(1.5, ec);
    assert_true(ec == SHMOBJ_ETYPE);
    v["n"].set(std::int64_t{2}, ec);
    assert_false(static_cast<bool>(ec));
    std::int64_t expected = 1;
    assert_false(v["n"].compare_exchange(expected, std::int64_t{5}, ec));
    assert_false(static_cast<bool>(ec));
    assert_int_equal(expected, 2);
    assert_true(v["n"].compare_exchange(expected, std::int64_t{5}));
    assert_int_equal(v["n"].as_int(), 5);
    assert_false(v.find("absent", ec).has_value());
    assert_false(static_cast<bool>(ec)); // absent is an outcome, not an error
    seg.free(r);
    v.size(ec);
    assert_true(ec == SHMOBJ_ESTALE);
    seg.get(r, ec);
    assert_true(ec == SHMOBJ_ESTALE);

    shmobj::queue q = shmobj::queue::create(seg, "q", 2);
    shmobj::queue::create(seg, "q", 2, ec);
    assert_true(ec == SHMOBJ_EEXIST);
    assert_false(q.take(0, ec).has_value());
    assert_false(static_cast<bool>(ec));
    q.put(0, ec);
    assert_true(ec == SHMOBJ_EINVAL);
    shmobj::map::open(seg, "q", 0, ec);
    assert_true(ec == SHMOBJ_ETYPE);
    shmobj::queue empty;
    empty.put(16, ec);
    assert_true(ec == SHMOBJ_EINVAL);
}

// ---- destruction orders ------------------------------------------------------

// Uses what is still alive of a set of objects, after some were destroyed:
// each must still work (they share the segment).
struct fleet {
    std::optional<shmobj::segment> seg;
    std::optional<shmobj::map> map;
    std::optional<shmobj::queue> queue;
    std::optional<shmobj::topic> topic;
    std::optional<shmobj::subscription> sub;
    std::optional<shmobj::view> view;
    std::optional<shmobj::map_view> map_view;
    std::optional<shmobj::map::iterator> cursor;
    std::optional<shmobj::topic_message> message;
    std::optional<shmobj::topic_loan> loan;
    std::optional<shmobj::mutable_list> list;
    std::uint64_t round = 0;

    void build()
    {
        seg = make_segment("order");
        map = shmobj::map::create(*seg, "m");
        map->set("k", "value");
        map->set("j", "other");
        queue = shmobj::queue::create(*seg, "q", 4);
        topic = shmobj::topic::create(*seg, "t");
        sub = topic->subscribe();
        shmobj::ref r = seg->put(shmobj::dict({{shmobj::str("n"), shmobj::integer(0)},
                                               {shmobj::str("l"), shmobj::mlist()}}));
        view = seg->get(r);
        list = shmobj::mutable_list((*view)["l"]);
        map_view = map->get_view("k");
        cursor = map->begin();
        topic->publish("first");
        message = sub->take(0);
        loan = topic->loan(8);
    }

    void use()
    {
        round++;
        if (map) {
            map->set("k2", "v");
            assert_true(map->get("k2").value() == "v");
        }
        if (queue) {
            std::optional<shmobj::ref> got;
            shmobj::ref r = queue->msg_alloc(4).first;
            queue->put(r);
            got = queue->take(0);
            assert_true(got.has_value() && *got == r);
            queue->msg_done(r);
        }
        if (topic)
            topic->publish("more", 0); // the ring may be full of held messages
        if (sub && !message)
            sub->take(0); // released at once (with it, any message taken before)
        if (view)
            assert_int_equal((*view)["n"].add(std::int64_t{1}), static_cast<std::int64_t>(round - 1));
        if (list)
            list->append(static_cast<std::int64_t>(round));
        if (map_view)
            assert_true(map_view->value() == "value");
        if (cursor)
            assert_true((*cursor)->key == "k" || (*cursor)->key == "j");
        if (message)
            assert_true(message->bytes() == "first");
        if (loan)
            std::memcpy(loan->data(), "loan", 4);
    }
};

// Every order of destruction of segment, map, queue, topic, subscription
// and view (720), and every order of segment, map view, map cursor, topic
// message, loan and mutable list (720): none crashes (under the
// sanitizers: reads no unmapped or freed memory), and after each
// destruction the objects still alive work.
void test_cxx_every_destruction_order(void **)
{
    for (int group = 0; group < 2; group++) {
        std::array<int, 6> order{{0, 1, 2, 3, 4, 5}};
        unsigned orders = 0;
        do {
            fleet f;
            f.build();
            if (group == 1) { // the first group's other members go first, in a fixed order
                f.view.reset();
                f.sub.reset();
                f.queue.reset();
                f.topic.reset();
                f.map.reset();
            }
            f.use();
            for (int k : order) {
                switch (group * 6 + k) {
                case 0: f.seg.reset(); break;
                case 1: f.map.reset(); break;
                case 2: f.queue.reset(); break;
                case 3: f.topic.reset(); break;
                case 4: f.sub.reset(); break;
                case 5: f.view.reset(); break;
                case 6: f.seg.reset(); break;
                case 7: f.map_view.reset(); break;
                case 8: f.cursor.reset(); break;
                case 9: f.message.reset(); break;
                case 10: f.loan.reset(); break;
                case 11: f.list.reset(); break;
                }
                f.use();
            }
            if (group == 0) { // what the first group left
                f.map_view.reset();
                f.cursor.reset();
                f.message.reset();
                f.loan.reset();
                f.list.reset();
            }
            orders++;
        } while (std::next_permutation(order.begin(), order.end()));
        assert_int_equal(orders, 720);
    }
}

} // namespace

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cxx_mutable_roundtrip),
        cmocka_unit_test(test_cxx_mutable_iteration_while_changing),
        cmocka_unit_test(test_cxx_record_type_roundtrip),
        cmocka_unit_test(test_cxx_table_roundtrip),
        cmocka_unit_test(test_cxx_completion),
        cmocka_unit_test(test_cxx_completion_peer_dead),
        cmocka_unit_test(test_cxx_service_call_take_reply),
        cmocka_unit_test(test_cxx_service_objects),
        cmocka_unit_test(test_cxx_topic),
        cmocka_unit_test(test_cxx_map_ranges),
        cmocka_unit_test(test_cxx_watch_waitset),
        cmocka_unit_test(test_cxx_error_code_forms),
        cmocka_unit_test(test_cxx_every_destruction_order),
    };
    cmocka_set_test_filter(std::getenv("SHMOBJ_TEST_FILTER"));
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
