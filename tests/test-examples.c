/* What the guide, the examples and language bindings rely on in the public
 * headers beyond the library's calls: the value macros of shmobj/object.h
 * evaluate their arguments once, and the sizes a binding allocates for
 * caller-held structs are the ones the library was built with. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <shmobj.h>

#include "test-util.h"

/* SHMOBJ_VAL_STR's argument is evaluated once: a description built from
 * `*p++` names the first string and moves p by one, and its length is that
 * string's. */
static void test_val_str_evaluates_once(void **state)
{
    (void)state;
    static const char *const words[] = {"first", "second-word"};
    const char *const *p = words;
    shmobj_value v = SHMOBJ_VAL_STR(*p++);
    assert_ptr_equal(p, words + 1);
    assert_int_equal(v.type, SHMOBJ_TYPE_STR);
    assert_ptr_equal(v.v.s.ptr, words[0]);
    assert_int_equal(v.v.s.len, strlen(words[0]));
    assert_int_equal(v.reserved, 0);
}

/* A description made by SHMOBJ_VAL_STR builds and reads back like one made
 * by hand, in a container too. */
static void test_val_str_put_reads_back(void **state)
{
    (void)state;
    char name[96];
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.initial_size = 1 << 20;
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_create(test_name(name, sizeof name, "vstr"), &o, &seg), 0);
    const char *key = "employees";
    shmobj_value rec = SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_STR(key), SHMOBJ_VAL_INT(10),
                                          SHMOBJ_VAL_STR("city"), SHMOBJ_VAL_STR("Oslo"));
    shmobj_ref ref;
    assert_int_equal(shmobj_obj_put(seg, &rec, &ref), 0);
    shmobj_view v, f;
    assert_int_equal(shmobj_obj_get(seg, ref, &v), 0);
    assert_int_equal(shmobj_field_get(&v, "city", &f), 0);
    const char *s = NULL;
    size_t len = 0;
    assert_int_equal(shmobj_str_get(&f, &s, &len), 0);
    assert_int_equal(len, 4);
    assert_string_equal(s, "Oslo");
    shmobj_value k = SHMOBJ_VAL_STR(key);
    int64_t n = 0;
    assert_int_equal(shmobj_view_get(&v, &k, &f), 0);
    assert_int_equal(shmobj_int_get(&f, &n), 0);
    assert_int_equal(n, 10);
    assert_int_equal(shmobj_obj_free(seg, ref), 0);
    shmobj_segment_close(seg);
}

/* shmobj_view_size() is the size of the struct the headers declare, so a
 * binding that allocates that many bytes for a view gives the library
 * enough room. */
static void test_view_size_matches_header(void **state)
{
    (void)state;
    assert_int_equal(shmobj_view_size(), sizeof(shmobj_view));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_val_str_evaluates_once),
        cmocka_unit_test(test_val_str_put_reads_back),
        cmocka_unit_test(test_view_size_matches_header),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
