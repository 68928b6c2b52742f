// shmobj.hpp: its builders own what their C descriptions point to, its
// handles close themselves, and its errors are exceptions whose codes
// compare with the SHMOBJ_E* values.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" { // this cmocka.h declares its functions without it
#include <cmocka.h>
}

#include <shmobj.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

// tests/test-util.h is C only; what this program needs of it.
#define TEST_MS (INT64_C(1000000))

namespace {

shmobj::segment make_segment(const char *tag)
{
    std::string name = std::string("shmobj-test-") + tag + "-" + std::to_string(getpid());
    return shmobj::segment::create(name, 4u << 20, 0, SHMOBJ_BACKEND_MEMFD);
}

// A description built in one expression and put later reads back whole:
// its arrays and strings live in the value, not in temporaries (the C
// macros' compound literals would have died at the end of the expression).
void test_hpp_value_outlives_expression(void **)
{
    shmobj::segment seg = make_segment("hpp-val");
    std::string long_text(200, 'x');
    shmobj::value v = shmobj::dict({
        {shmobj::str("name"), shmobj::str(long_text)},
        {shmobj::str("items"), shmobj::list({shmobj::integer(1), shmobj::real(2.5),
                                             shmobj::tuple({shmobj::str("t"), shmobj::null()})})},
        {shmobj::integer(7), shmobj::structure({{"hits", shmobj::uinteger(3)},
                                                {"on", shmobj::boolean(true)}})},
    });
    long_text.assign(200, 'y'); // the value holds its own copy
    std::vector<std::string> scribble(64, std::string(300, 'z')); // reuse freed memory
    shmobj::ref r = seg.put(v);
    shmobj::view rec = seg.get(r);
    assert_int_equal(rec.size(), 3);
    assert_true(rec["name"].as_str() == std::string(200, 'x'));
    assert_int_equal(rec["items"][0].as_int(), 1);
    assert_true(rec["items"][1].as_double() == 2.5);
    assert_true(rec["items"][2][0].as_str() == "t");
    assert_int_equal(rec["items"][2][1].type(), SHMOBJ_TYPE_NULL);
    assert_int_equal(rec[2]["hits"].as_uint(), 3);
    assert_true(rec[2]["on"].as_bool());
    assert_int_equal(rec[2].key(0).as_str().size(), 4);
    assert_true(rec.json().find("\"hits\":3") != std::string::npos);
    seg.free(r);
}

// Scalars update in place by kind; a failed call throws shmobj::error whose
// code compares equal to the status, and an absent key is nullopt.
void test_hpp_errors_are_exceptions(void **)
{
    shmobj::segment seg = make_segment("hpp-err");
    shmobj::ref r = seg.put(shmobj::dict({{shmobj::str("n"), shmobj::integer(1)},
                                          {shmobj::str("d"), shmobj::real(0.5)},
                                          {shmobj::str("s"), shmobj::str("fixed")}}));
    shmobj::view v = seg.get(r);
    assert_int_equal(v["n"].add(std::int64_t{4}), 1);
    v["d"].set(1.25);
    assert_true(v["d"].add(0.25) == 1.25);
    assert_true(v["d"].as_double() == 1.5);
    assert_false(v.find("absent").has_value());
    int status = 0;
    try {
        v["n"].set(2.0); // an int slot takes no double
    } catch (const shmobj::error &e) {
        status = e.status();
        assert_true(e.code() == SHMOBJ_ETYPE);
        assert_string_equal(e.name(), "SHMOBJ_ETYPE");
    }
    assert_int_equal(status, SHMOBJ_ETYPE);
    seg.free(r);
    status = 0;
    try {
        seg.get(r);
    } catch (const std::system_error &e) {
        status = e.code().value();
        assert_true(e.code().category() == shmobj::category());
    }
    assert_int_equal(status, SHMOBJ_ESTALE);
}

// The queue's timed take is nullopt when nothing comes, and tracked
// messages complete; the map copies, guards and counts.
void test_hpp_queue_map_roundtrip(void **)
{
    shmobj::segment seg = make_segment("hpp-qm");
    shmobj::queue q = shmobj::queue::create(seg, "q", 8);
    assert_false(q.take(0).has_value());
    assert_false(q.take(1 * TEST_MS).has_value());
    auto [msg, data] = q.msg_alloc(5, SHMOBJ_QUEUE_MSG_TRACK);
    std::memcpy(data, "hello", 5);
    q.put(msg);
    shmobj::queue q2 = shmobj::queue::open(seg, "q", 0);
    std::optional<shmobj::ref> got = q2.take(1000 * TEST_MS);
    assert_true(got.has_value());
    auto [p, len] = q2.msg_data(*got);
    assert_int_equal(len, 5);
    assert_memory_equal(p, "hello", 5);
    assert_false(q.msg_wait_done(msg, 0));
    q2.msg_done(*got);
    assert_true(q.msg_wait_done(msg, 1000 * TEST_MS));
    q.msg_free(msg);

    shmobj::map m = shmobj::map::open_or_create(seg, "m");
    m.set("k", std::string(100, 'v'));
    assert_true(m.get("k").value() == std::string(100, 'v'));
    assert_false(m.get("nope").has_value());
    assert_int_equal(m.add("c", 2), 2);
    assert_int_equal(m.add("c", 3), 5);
    {
        std::optional<shmobj::map_view> mv = m.get_view("k");
        assert_true(mv.has_value());
        assert_int_equal(mv->value().size(), 100);
    }
    std::size_t seen = 0;
    m.for_each([&](std::string_view, std::string_view) { seen++; });
    assert_int_equal(seen, 2);
    assert_int_equal(m.size(), 2);
    assert_true(m.erase("k"));
    assert_false(m.erase("k"));
    assert_false(seg.root_get("absent").has_value());
    assert_false(seg.root_wait("absent", 1 * TEST_MS).has_value());
}

} // namespace

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hpp_value_outlives_expression),
        cmocka_unit_test(test_hpp_errors_are_exceptions),
        cmocka_unit_test(test_hpp_queue_map_roundtrip),
    };
    cmocka_set_test_filter(std::getenv("SHMOBJ_TEST_FILTER"));
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
