/* The object layer: every type round-trips, wrong types and indexes are
 * refused, scalars update atomically, replaced items are freed, stale
 * references and damaged graphs give errors, JSON output is exact. These
 * tests run on a private test space (tests/space-heap.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shmobj.h"
#include "space-heap.h"
/* the format's hashes, to make keys that collide */
#include "../lib/object/encoding/format.h"
#include "test-util.h"

#define SEG(sp) ((shmobj_segment *)(sp))

static int setup(void **state)
{
    *state = space_heap_create(8u << 20);
    return *state == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    /* Whatever a test did, the heap under it stays consistent. */
    assert_int_equal(space_heap_check(*state), 0);
    space_heap_destroy(*state);
    return 0;
}

static shmobj_ref put(void **state, shmobj_value v)
{
    shmobj_ref r = 0;
    assert_int_equal(shmobj_obj_put(SEG(*state), &v, &r), 0);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), 0);
    return r;
}

static void json_is(const shmobj_view *v, const char *want)
{
    char buf[4096];
    size_t len = 0;
    assert_int_equal(shmobj_view_json(v, buf, sizeof buf, &len), 0);
    assert_string_equal(buf, want);
    assert_int_equal(len, strlen(want));
}

static void test_obj_put_scalars_roundtrip(void **state)
{
    shmobj_view v;
    int64_t i;
    uint64_t u;
    double d;
    int b;
    shmobj_ref r = put(state, SHMOBJ_VAL_INT(-42));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_view_type(&v), SHMOBJ_TYPE_INT);
    assert_int_equal(shmobj_int_get(&v, &i), 0);
    assert_int_equal(i, -42);

    r = put(state, SHMOBJ_VAL_UINT(UINT64_MAX));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_uint_get(&v, &u), 0);
    assert_true(u == UINT64_MAX);
    json_is(&v, "18446744073709551615");

    assert_int_equal(shmobj_obj_put_double(SEG(*state), 3000.0, &r), 0);
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_double_get(&v, &d), 0);
    assert_true(d == 3000.0);
    json_is(&v, "3000.0");

    r = put(state, SHMOBJ_VAL_BOOL(1));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_bool_get(&v, &b), 0);
    assert_int_equal(b, 1);
    json_is(&v, "true");

    r = put(state, SHMOBJ_VAL_NULL);
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_view_type(&v), SHMOBJ_TYPE_NULL);
    json_is(&v, "null");
}

static void test_obj_put_str_roundtrip(void **state)
{
    shmobj_view v;
    const char *s;
    size_t n;
    shmobj_ref r;
    assert_int_equal(shmobj_obj_put_str(SEG(*state), "h\xc3\xa9llo", SHMOBJ_STRLEN, &r), 0);
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(v.type, SHMOBJ_TYPE_STR);
    assert_int_equal(shmobj_str_get(&v, &s, &n), 0);
    assert_int_equal(n, 6);
    assert_string_equal(s, "h\xc3\xa9llo");
    assert_int_equal(shmobj_view_len(&v, &n), 0);
    assert_int_equal(n, 6);

    /* embedded NUL with an explicit length, still NUL-terminated */
    r = put(state, SHMOBJ_VAL_STRN("a\0b", 3));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_str_get(&v, &s, &n), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(s, "a\0b", 4);
    json_is(&v, "\"a\\u0000b\"");

    /* empty */
    r = put(state, SHMOBJ_VAL_STR(""));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_str_get(&v, &s, &n), 0);
    assert_int_equal(n, 0);
    assert_string_equal(s, "");
}

static void test_obj_put_str_invalid_utf8(void **state)
{
    shmobj_ref r;
    static const char *bad[] = {"\xff", "\xc3", "\xc0\x80", "\xed\xa0\x80",
                                "\xf4\x90\x80\x80", "abcdefgh\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(shmobj_obj_put_str(SEG(*state), bad[i], SHMOBJ_STRLEN, &r),
                         SHMOBJ_EINVAL);
    assert_int_equal(space_heap_live(*state), 0);
}

static void test_obj_put_bytes_roundtrip(void **state)
{
    uint8_t data[300];
    const void *p;
    size_t n;
    shmobj_view v;
    shmobj_ref r;
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7);
    assert_int_equal(shmobj_obj_put_bytes(SEG(*state), data, sizeof data, &r), 0);
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(v.type, SHMOBJ_TYPE_BYTES);
    assert_int_equal(shmobj_bytes_get(&v, &p, &n), 0);
    assert_int_equal(n, sizeof data);
    assert_memory_equal(p, data, sizeof data);
    json_is(&v, "{\"$bytes\":300}");
    r = put(state, SHMOBJ_VAL_BYTES("\x01\xab", 2));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    json_is(&v, "{\"$bytes\":2,\"hex\":\"01ab\"}");
}

static void test_obj_put_buffer_roundtrip(void **state)
{
    float data[6] = {1, 2, 3, 4, 5, 6};
    uint64_t shape[2] = {2, 3};
    shmobj_view v;
    shmobj_ref r;
    void *dp;
    shmobj_buffer_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_obj_put_buffer(SEG(*state), SHMOBJ_DTYPE_F32, 2, shape,
                                           data, &r, &dp), 0);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), 0);
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(v.type, SHMOBJ_TYPE_BUFFER);
    assert_int_equal(shmobj_buffer_get(&v, &info), 0);
    assert_ptr_equal(info.data, dp);
    assert_int_equal((uintptr_t)info.data % 64, 0);
    assert_int_equal(info.dtype, SHMOBJ_DTYPE_F32);
    assert_int_equal(info.ndim, 2);
    assert_int_equal(info.itemsize, 4);
    assert_int_equal(info.nbytes, 24);
    assert_int_equal(info.shape[0], 2);
    assert_int_equal(info.shape[1], 3);
    assert_int_equal(info.strides[0], 12);
    assert_int_equal(info.strides[1], 4);
    assert_memory_equal(info.data, data, sizeof data);
    /* mutable in place */
    ((float *)info.data)[5] = 60;
    assert_int_equal(shmobj_buffer_get(&v, &info), 0);
    assert_true(((float *)info.data)[5] == 60);
    json_is(&v, "{\"$buffer\":\"f32\",\"shape\":[2,3]}");

    /* empty, filled in place (zero copy) */
    uint64_t big[1] = {1000};
    assert_int_equal(shmobj_obj_put_buffer(SEG(*state), SHMOBJ_DTYPE_I64, 1, big,
                                           NULL, &r, &dp), 0);
    assert_int_equal((uintptr_t)dp % 64, 0);
    for (int64_t i = 0; i < 1000; i++)
        ((int64_t *)dp)[i] = i;
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_buffer_get(&v, &info), 0);
    assert_int_equal(((int64_t *)info.data)[999], 999);

    /* strided (a column view of a 3x4 u8 matrix) and 0-d */
    uint8_t m[12] = {0};
    uint64_t cs[1] = {3};
    int64_t cst[1] = {4};
    shmobj_buffer_desc bd = {m, 9 /* reaches bytes 0, 4, 8 */, cs, cst,
                             SHMOBJ_DTYPE_U8, 1};
    shmobj_value sv = {.type = SHMOBJ_TYPE_BUFFER, .v = {.buf = &bd}};
    r = put(state, sv);
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_buffer_get(&v, &info), 0);
    assert_int_equal(info.strides[0], 4);
    bd.nbytes = 8; /* too short for the last element */
    assert_int_equal(shmobj_obj_put(SEG(*state), &sv, &r), SHMOBJ_EINVAL);
    double one = 1.0;
    r = put(state, SHMOBJ_VAL_BUFFER(SHMOBJ_DTYPE_F64, 0, NULL, &one));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_buffer_get(&v, &info), 0);
    assert_int_equal(info.nbytes, 8);
    json_is(&v, "{\"$buffer\":\"f64\",\"shape\":[]}");

    /* bad dtype, too many dimensions */
    assert_int_equal(shmobj_obj_put_buffer(SEG(*state), 99, 1, big, NULL, &r, NULL),
                     SHMOBJ_EINVAL);
    uint64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(shmobj_obj_put_buffer(SEG(*state), SHMOBJ_DTYPE_U8, 9, nine,
                                           NULL, &r, NULL), SHMOBJ_EINVAL);
}

/* shmobj_value.reserved must be 0, at the root and inside containers, so
 * that a later release can give it a meaning without old callers' garbage
 * being read as one. */
static void test_obj_put_reserved_nonzero_einval(void **state)
{
    shmobj_ref r;
    shmobj_value v = SHMOBJ_VAL_INT(5);
    v.reserved = 1;
    assert_int_equal(shmobj_obj_put(SEG(*state), &v, &r), SHMOBJ_EINVAL);
    shmobj_value items[2] = {SHMOBJ_VAL_INT(1), SHMOBJ_VAL_STR("x")};
    items[1].reserved = 7;
    shmobj_value list = {.type = SHMOBJ_TYPE_LIST, .v = {.c = {items, 2, NULL}}};
    assert_int_equal(shmobj_obj_put(SEG(*state), &list, &r), SHMOBJ_EINVAL);
    items[1].reserved = 0;
    assert_int_equal(shmobj_obj_put(SEG(*state), &list, &r), 0);
    assert_int_equal(shmobj_obj_free(SEG(*state), r), 0);
}

static void test_obj_put_list_roundtrip(void **state)
{
    shmobj_view v, it, it2;
    size_t n;
    int64_t x;
    shmobj_ref r = put(state, SHMOBJ_VAL_LIST_OF(
        SHMOBJ_VAL_INT(1), SHMOBJ_VAL_STR("two"), SHMOBJ_VAL_NULL,
        SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_DOUBLE(0.5), SHMOBJ_VAL_BOOL(0)),
        SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_INT(7))));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(v.type, SHMOBJ_TYPE_LIST);
    assert_int_equal(shmobj_view_len(&v, &n), 0);
    assert_int_equal(n, 5);
    assert_int_equal(shmobj_view_item(&v, 0, &it), 0);
    assert_int_equal(shmobj_int_get(&it, &x), 0);
    assert_int_equal(x, 1);
    assert_int_equal(shmobj_view_item(&v, 3, &it), 0);
    assert_int_equal(it.type, SHMOBJ_TYPE_LIST);
    assert_int_equal(shmobj_view_item(&it, 1, &it2), 0);
    assert_int_equal(it2.type, SHMOBJ_TYPE_BOOL);
    assert_int_equal(shmobj_view_item(&v, 4, &it), 0);
    assert_int_equal(it.type, SHMOBJ_TYPE_TUPLE);
    json_is(&v, "[1,\"two\",null,[0.5,false],[7]]");

    /* empty list */
    r = put(state, SHMOBJ_VAL_LIST(NULL, 0));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_view_len(&v, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(shmobj_view_item(&v, 0, &it), SHMOBJ_ERANGE);
    json_is(&v, "[]");
}

static void test_obj_put_dict_roundtrip(void **state)
{
    uint8_t data[4096];
    memset(data, 1, sizeof data);
    shmobj_view v, it, k;
    int64_t x;
    double d;
    size_t i;
    shmobj_ref r = put(state, SHMOBJ_VAL_DICT_OF(
        SHMOBJ_VAL_STR("websites"),
        SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("https://a.example"),
                           SHMOBJ_VAL_STR("https://b.example")),
        SHMOBJ_VAL_STR("avg_salary"), SHMOBJ_VAL_DOUBLE(3000.0),
        SHMOBJ_VAL_STR("employees"), SHMOBJ_VAL_INT(10),
        SHMOBJ_VAL_STR("in_a_good_state"), SHMOBJ_VAL_BOOL(1),
        SHMOBJ_VAL_STR("data"), SHMOBJ_VAL_BYTES(data, sizeof data)));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(v.type, SHMOBJ_TYPE_DICT);
    assert_int_equal(shmobj_field_get(&v, "employees", &it), 0);
    assert_int_equal(shmobj_int_get(&it, &x), 0);
    assert_int_equal(x, 10);
    assert_int_equal(shmobj_field_get(&v, "avg_salary", &it), 0);
    assert_int_equal(shmobj_double_get(&it, &d), 0);
    assert_true(d == 3000.0);
    assert_int_equal(shmobj_field_get(&v, "nope", &it), SHMOBJ_ENOTFOUND);
    shmobj_value key = SHMOBJ_VAL_STR("data");
    assert_int_equal(shmobj_view_index(&v, &key, &i), 0);
    assert_int_equal(i, 4);
    assert_int_equal(shmobj_view_key(&v, 4, &k), 0);
    assert_int_equal(k.type, SHMOBJ_TYPE_STR);
    /* keys are immutable, a bytes key of the same content is another key */
    assert_int_equal(shmobj_view_set(&k, &key), SHMOBJ_EACCES);
    key = SHMOBJ_VAL_BYTES("data", 4);
    assert_int_equal(shmobj_view_index(&v, &key, &i), SHMOBJ_ENOTFOUND);
    json_is(&v, "{\"websites\":[\"https://a.example\",\"https://b.example\"],"
                "\"avg_salary\":3000.0,\"employees\":10,\"in_a_good_state\":true,"
                "\"data\":{\"$bytes\":4096}}");

    /* int and bytes keys */
    r = put(state, SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_INT(-5), SHMOBJ_VAL_STR("neg"),
                                      SHMOBJ_VAL_BYTES("\x00\x01", 2), SHMOBJ_VAL_INT(2),
                                      SHMOBJ_VAL_INT(5), SHMOBJ_VAL_NULL));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    key = SHMOBJ_VAL_INT(5);
    assert_int_equal(shmobj_view_get(&v, &key, &it), 0);
    assert_int_equal(it.type, SHMOBJ_TYPE_NULL);
    key = SHMOBJ_VAL_BYTES("\x00\x01", 2);
    assert_int_equal(shmobj_view_get(&v, &key, &it), 0);
    assert_int_equal(shmobj_int_get(&it, &x), 0);
    assert_int_equal(x, 2);
    json_is(&v, "{\"-5\":\"neg\",\"$bytes:0001\":2,\"5\":null}");
    key = SHMOBJ_VAL_DOUBLE(1.0);
    assert_int_equal(shmobj_view_get(&v, &key, &it), SHMOBJ_EINVAL);

    /* a large dict: every key found through the index */
    enum { N = 2000 };
    static shmobj_value kv[2 * N];
    static char names[N][12];
    for (int j = 0; j < N; j++) {
        snprintf(names[j], sizeof names[j], "k%d", j);
        kv[2 * j] = SHMOBJ_VAL_STR(names[j]);
        kv[2 * j + 1] = SHMOBJ_VAL_INT(j);
    }
    r = put(state, SHMOBJ_VAL_DICT(kv, N));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    for (int j = 0; j < N; j++) {
        assert_int_equal(shmobj_field_get(&v, names[j], &it), 0);
        assert_int_equal(shmobj_int_get(&it, &x), 0);
        assert_int_equal(x, j);
    }
}

static void test_obj_put_dict_duplicate_key(void **state)
{
    shmobj_ref r;
    shmobj_value d = SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_STR("a"), SHMOBJ_VAL_INT(1),
                                        SHMOBJ_VAL_STR("a"), SHMOBJ_VAL_INT(2));
    assert_int_equal(shmobj_obj_put(SEG(*state), &d, &r), SHMOBJ_EINVAL);
    shmobj_value bad = SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_DOUBLE(1), SHMOBJ_VAL_INT(1));
    assert_int_equal(shmobj_obj_put(SEG(*state), &bad, &r), SHMOBJ_EINVAL);
    shmobj_value s = SHMOBJ_VAL_SET_OF(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_INT(1));
    assert_int_equal(shmobj_obj_put(SEG(*state), &s, &r), SHMOBJ_EINVAL);
    assert_int_equal(space_heap_live(*state), 0);
}

static void test_obj_put_set_roundtrip(void **state)
{
    shmobj_view v, it;
    size_t i;
    shmobj_ref r = put(state, SHMOBJ_VAL_SET_OF(SHMOBJ_VAL_STR("x"), SHMOBJ_VAL_INT(3),
                                                SHMOBJ_VAL_BYTES("y", 1)));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(v.type, SHMOBJ_TYPE_SET);
    shmobj_value k = SHMOBJ_VAL_INT(3);
    assert_int_equal(shmobj_view_index(&v, &k, &i), 0);
    assert_int_equal(i, 1);
    k = SHMOBJ_VAL_INT(4);
    assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_ENOTFOUND);
    k = SHMOBJ_VAL_STR("x");
    assert_int_equal(shmobj_view_get(&v, &k, &it), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_view_item(&v, 1, &it), 0);
    assert_int_equal(shmobj_int_set(&it, 9), SHMOBJ_EACCES);
    json_is(&v, "[\"x\",3,{\"$bytes\":1,\"hex\":\"79\"}]");
}

static void test_obj_put_struct_roundtrip(void **state)
{
    static const char *const names[] = {"id", "name", "health"};
    shmobj_view v, it, k;
    int64_t x;
    const char *s;
    shmobj_ref r = put(state, SHMOBJ_VAL_STRUCT(
        SHMOBJ__VALS(SHMOBJ_VAL_INT(7), SHMOBJ_VAL_STR("bob"), SHMOBJ_VAL_INT(100)),
        3, names));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(v.type, SHMOBJ_TYPE_STRUCT);
    assert_int_equal(shmobj_view_item(&v, 2, &it), 0);
    assert_int_equal(shmobj_int_add(&it, 5, &x), 0);
    assert_int_equal(x, 100);
    assert_int_equal(shmobj_field_get(&v, "health", &it), 0);
    assert_int_equal(shmobj_int_get(&it, &x), 0);
    assert_int_equal(x, 105);
    assert_int_equal(shmobj_view_key(&v, 1, &k), 0);
    assert_int_equal(shmobj_str_get(&k, &s, NULL), 0);
    assert_string_equal(s, "name");
    json_is(&v, "{\"id\":7,\"name\":\"bob\",\"health\":105}");

    /* without names: by index only */
    r = put(state, SHMOBJ_VAL_STRUCT(SHMOBJ__VALS(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_INT(2)),
                                     2, NULL));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_field_get(&v, "id", &it), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_view_key(&v, 0, &k), SHMOBJ_ETYPE);
    json_is(&v, "[1,2]");

    static const char *const holes[] = {"a", NULL};
    shmobj_value h = SHMOBJ_VAL_STRUCT(SHMOBJ__VALS(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_INT(2)),
                                       2, holes);
    assert_int_equal(shmobj_obj_put(SEG(*state), &h, &r), SHMOBJ_EINVAL);
    static const char *const dup[] = {"a", "a"};
    shmobj_value d = SHMOBJ_VAL_STRUCT(SHMOBJ__VALS(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_INT(2)),
                                       2, dup);
    assert_int_equal(shmobj_obj_put(SEG(*state), &d, &r), SHMOBJ_EINVAL);
}

static void test_view_item_wrong_type(void **state)
{
    shmobj_view v, it;
    size_t n;
    int64_t x;
    double d;
    const char *s;
    const void *p;
    shmobj_buffer_info info = {.struct_size = sizeof info};
    shmobj_ref r = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_DOUBLE(2)));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 2, &it), SHMOBJ_ERANGE);
    assert_int_equal(shmobj_view_item(&v, SIZE_MAX, &it), SHMOBJ_ERANGE);
    assert_int_equal(shmobj_field_get(&v, "a", &it), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_view_key(&v, 0, &it), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_str_get(&v, &s, &n), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_bytes_get(&v, &p, &n), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_buffer_get(&v, &info), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_int_get(&v, &x), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_view_item(&v, 0, &it), 0);
    assert_int_equal(shmobj_double_get(&it, &d), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_view_item(&it, 0, &it), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_view_len(&it, &n), SHMOBJ_ETYPE);
    shmobj_value sv = SHMOBJ_VAL_STR("x");
    assert_int_equal(shmobj_view_set(&it, &sv), SHMOBJ_ETYPE);
    sv = SHMOBJ_VAL_UINT(1);
    assert_int_equal(shmobj_view_set(&it, &sv), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_view_item(NULL, 0, &it), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_view_type(NULL), 0);
    assert_int_equal(shmobj_int_add(NULL, 1, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_obj_get(SEG(*state), SHMOBJ_REF_NULL, &v), SHMOBJ_EINVAL);
}

static void test_int_add_updates_in_place(void **state)
{
    shmobj_view v, a, b, c;
    int64_t x;
    uint64_t u;
    double d;
    int bo;
    shmobj_ref r = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(0), SHMOBJ_VAL_UINT(5),
                                                 SHMOBJ_VAL_DOUBLE(1.5), SHMOBJ_VAL_BOOL(0),
                                                 SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_INT(1))));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 0, &a), 0);
    assert_int_equal(shmobj_view_item(&v, 0, &b), 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(shmobj_int_add(&a, 1, NULL), 0);
    assert_int_equal(shmobj_int_get(&b, &x), 0); /* another view sees it */
    assert_int_equal(x, 1000);
    x = 999;
    assert_int_equal(shmobj_int_cas(&a, &x, 5), SHMOBJ_EBUSY);
    assert_int_equal(x, 1000);
    assert_int_equal(shmobj_int_cas(&a, &x, 5), 0);
    assert_int_equal(shmobj_int_set(&a, INT64_MAX), 0);
    assert_int_equal(shmobj_int_add(&a, 1, NULL), 0); /* wraps, no UB */
    assert_int_equal(shmobj_int_get(&a, &x), 0);
    assert_true(x == INT64_MIN);

    assert_int_equal(shmobj_view_item(&v, 1, &c), 0);
    assert_int_equal(shmobj_uint_add(&c, 10, &u), 0);
    assert_int_equal(u, 5);
    u = 15;
    assert_int_equal(shmobj_uint_cas(&c, &u, 1), 0);
    assert_int_equal(shmobj_uint_set(&c, 2), 0);
    assert_int_equal(shmobj_uint_get(&c, &u), 0);
    assert_int_equal(u, 2);

    assert_int_equal(shmobj_view_item(&v, 2, &c), 0);
    assert_int_equal(shmobj_double_add(&c, 1.0, &d), 0);
    assert_true(d == 1.5);
    assert_int_equal(shmobj_double_get(&c, &d), 0);
    assert_true(d == 2.5);
    assert_int_equal(shmobj_double_set(&c, -1.0), 0);
    shmobj_value dv = SHMOBJ_VAL_DOUBLE(4.25);
    assert_int_equal(shmobj_view_set(&c, &dv), 0);
    assert_int_equal(shmobj_double_get(&c, &d), 0);
    assert_true(d == 4.25);

    assert_int_equal(shmobj_view_item(&v, 3, &c), 0);
    assert_int_equal(shmobj_bool_set(&c, 7), 0);
    assert_int_equal(shmobj_bool_get(&c, &bo), 0);
    assert_int_equal(bo, 1);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), 0);

    /* the one-call item forms */
    assert_int_equal(shmobj_item_int_add(&v, 0, 2, &x), 0);
    assert_true(x == INT64_MIN);
    assert_int_equal(shmobj_item_int_get(&v, 0, &x), 0);
    assert_true(x == INT64_MIN + 2);
    assert_int_equal(shmobj_item_int_add(&v, 1, 1, NULL), SHMOBJ_ETYPE); /* uint */
    assert_int_equal(shmobj_item_int_add(&v, 4, 1, NULL), SHMOBJ_ETYPE); /* tuple */
    assert_int_equal(shmobj_item_int_add(&v, 5, 1, NULL), SHMOBJ_ERANGE);
    assert_int_equal(shmobj_item_int_get(&v, 5, &x), SHMOBJ_ERANGE);
    assert_int_equal(shmobj_item_int_add(NULL, 0, 1, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_view_item(&v, 4, &c), 0);
    assert_int_equal(shmobj_item_int_get(&c, 0, &x), 0);
    assert_int_equal(x, 1);
    assert_int_equal(shmobj_item_int_add(&c, 0, 1, NULL), SHMOBJ_EACCES);
    assert_int_equal(shmobj_view_item(&v, 0, &c), 0);
    assert_int_equal(shmobj_item_int_add(&c, 0, 1, NULL), SHMOBJ_ETYPE); /* a scalar */

    /* tuple items are immutable */
    assert_int_equal(shmobj_view_item(&v, 4, &c), 0);
    assert_int_equal(shmobj_view_item(&c, 0, &c), 0);
    assert_int_equal(shmobj_int_add(&c, 1, NULL), SHMOBJ_EACCES);
    assert_int_equal(shmobj_int_set(&c, 1), SHMOBJ_EACCES);
    x = 1;
    assert_int_equal(shmobj_int_cas(&c, &x, 2), SHMOBJ_EACCES);

    /* a top-level counter */
    assert_int_equal(shmobj_obj_put_int(SEG(*state), 41, &r), 0);
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_int_add(&v, 1, NULL), 0);
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_int_get(&v, &x), 0);
    assert_int_equal(x, 42);
}

static void test_view_set_replaces_and_frees(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_view v, it, again;
    const char *s;
    shmobj_ref r = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("old"), SHMOBJ_VAL_NULL,
                                                 SHMOBJ_VAL_INT(1)));
    assert_int_equal(space_heap_live(sp), 1);
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 0, &it), 0);
    shmobj_value nv = SHMOBJ_VAL_STR("new");
    assert_int_equal(shmobj_view_set(&it, &nv), 0);
    assert_int_equal(space_heap_live(sp), 2); /* the old one was inline */
    assert_int_equal(shmobj_str_get(&it, &s, NULL), 0);
    assert_string_equal(s, "new");
    assert_int_equal(shmobj_view_item(&v, 0, &again), 0);
    assert_int_equal(shmobj_str_get(&again, &s, NULL), 0);
    assert_string_equal(s, "new");
    /* replacing a separate item frees it */
    nv = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_STR("deep"));
    assert_int_equal(shmobj_view_set(&it, &nv), 0);
    assert_int_equal(space_heap_live(sp), 2);
    assert_int_equal(it.type, SHMOBJ_TYPE_LIST);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), 0);
    /* a nested replacement inside the separate block */
    shmobj_view deep;
    assert_int_equal(shmobj_view_item(&it, 1, &deep), 0);
    nv = SHMOBJ_VAL_STR("deeper");
    assert_int_equal(shmobj_view_set(&deep, &nv), 0);
    assert_int_equal(space_heap_live(sp), 3);
    json_is(&v, "[[1,\"deeper\"],null,1]");
    /* null slot takes an object; object slot takes null */
    assert_int_equal(shmobj_view_item(&v, 1, &it), 0);
    nv = SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_STR("k"), SHMOBJ_VAL_INT(1));
    assert_int_equal(shmobj_view_set(&it, &nv), 0);
    assert_int_equal(space_heap_live(sp), 4);
    nv = SHMOBJ_VAL_NULL;
    assert_int_equal(shmobj_view_set(&it, &nv), 0);
    assert_int_equal(space_heap_live(sp), 3);
    assert_int_equal(it.type, SHMOBJ_TYPE_NULL);
    /* the root itself */
    nv = SHMOBJ_VAL_STR("root");
    shmobj_view root;
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &root), 0);
    assert_int_equal(shmobj_view_set(&root, &nv), 0);
    assert_int_equal(space_heap_live(sp), 2);
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &root), 0);
    json_is(&root, "\"root\"");
    assert_int_equal(shmobj_obj_check(SEG(sp), r), 0);
    /* freeing the top frees the whole tree */
    assert_int_equal(shmobj_obj_free(SEG(sp), r), 0);
    assert_int_equal(space_heap_live(sp), 0);
}

static void test_obj_get_stale_ref(void **state)
{
    shmobj_view v;
    shmobj_ref r = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1)));
    assert_int_equal(shmobj_obj_free(SEG(*state), r), 0);
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_free(SEG(*state), r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), SHMOBJ_ESTALE);
    /* a reference with another generation */
    r = put(state, SHMOBJ_VAL_INT(1));
    shmobj_ref other = r ^ (UINT64_C(1) << 50);
    assert_int_equal(shmobj_obj_get(SEG(*state), other, &v), SHMOBJ_ESTALE);
    /* not a block at all: refused (inside a payload, the bytes there may
     * pass for a freed block's header) */
    int rc = shmobj_obj_get(SEG(*state), r + 16, &v);
    assert_true(rc == SHMOBJ_EINVAL || rc == SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_get(SEG(*state), UINT64_C(1) << 40, &v), SHMOBJ_EINVAL);
    /* freed and reused: the old reference is refused, the new one works */
    shmobj_ref a = put(state, SHMOBJ_VAL_STR("first"));
    assert_int_equal(shmobj_obj_free(SEG(*state), a), 0);
    shmobj_ref b = put(state, SHMOBJ_VAL_STR("again"));
    assert_int_equal(shmobj_obj_get(SEG(*state), a, &v), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_get(SEG(*state), b, &v), 0);
    json_is(&v, "\"again\"");
}

/* One description for the stale-view test: every kind of value a view can
 * name, with values that differ between the two objects built from it. */
static shmobj_value stale_tree(int64_t k, shmobj_value *items, float *fdata,
                               const uint64_t *shape)
{
    static const char *const names[] = {"a", "b"};
    static shmobj_value fields[2], list[2];
    static shmobj_buffer_desc bd;
    fields[0] = SHMOBJ_VAL_INT(k);
    fields[1] = SHMOBJ_VAL_INT(k + 1);
    list[0] = SHMOBJ_VAL_INT(k);
    list[1] = SHMOBJ_VAL_NULL;
    bd = (shmobj_buffer_desc){fdata, 0, shape, NULL, SHMOBJ_DTYPE_F32, 1};
    int n = 0;
    items[n++] = SHMOBJ_VAL_STR("int");
    items[n++] = SHMOBJ_VAL_INT(k);
    items[n++] = SHMOBJ_VAL_STR("uint");
    items[n++] = SHMOBJ_VAL_UINT((uint64_t)k);
    items[n++] = SHMOBJ_VAL_STR("double");
    items[n++] = SHMOBJ_VAL_DOUBLE((double)k);
    items[n++] = SHMOBJ_VAL_STR("bool");
    items[n++] = SHMOBJ_VAL_BOOL(k & 1);
    items[n++] = SHMOBJ_VAL_STR("str");
    items[n++] = SHMOBJ_VAL_STR(k == 1 ? "first object" : "other object");
    items[n++] = SHMOBJ_VAL_STR("bytes");
    items[n++] = SHMOBJ_VAL_BYTES(k == 1 ? "abcd" : "wxyz", 4);
    items[n++] = SHMOBJ_VAL_STR("buffer");
    items[n++] = (shmobj_value){.type = SHMOBJ_TYPE_BUFFER, .v = {.buf = &bd}};
    items[n++] = SHMOBJ_VAL_STR("list");
    items[n++] = SHMOBJ_VAL_LIST(list, 2);
    items[n++] = SHMOBJ_VAL_STR("a longer key than seven bytes");
    items[n++] = SHMOBJ_VAL_STRUCT(fields, 2, names);
    return SHMOBJ_VAL_DICT(items, n / 2);
}

/* The typed field reads give what the two calls they replace give: the
 * value, ETYPE for a field of another type, ENOTFOUND for a missing name,
 * and ESTALE once the record was freed. The deprecated name still works. */
static void test_field_typed_get_by_name(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_value items[18];
    float fdata[4] = {1, 2, 3, 4};
    uint64_t shape[1] = {4};
    shmobj_ref a = put(state, stale_tree(3, items, fdata, shape));
    shmobj_view root, it;
    assert_int_equal(shmobj_obj_get(SEG(sp), a, &root), 0);
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    int b = 0;
    const char *str = NULL;
    size_t len = 0;
    assert_int_equal(shmobj_field_int_get(&root, "int", &i), 0);
    assert_int_equal(i, 3);
    assert_int_equal(shmobj_field_uint_get(&root, "uint", &u), 0);
    assert_int_equal(u, 3);
    assert_int_equal(shmobj_field_double_get(&root, "double", &d), 0);
    assert_true(d == 3.0);
    assert_int_equal(shmobj_field_bool_get(&root, "bool", &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(shmobj_field_str_get(&root, "str", &str, &len), 0);
    assert_string_equal(str, "other object");
    assert_int_equal(len, strlen("other object"));
    assert_int_equal(shmobj_field_int_get(&root, "double", &i), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_field_str_get(&root, "int", &str, NULL), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_field_int_get(&root, "nope", &i), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_field_int_get(&root, "int", NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_field_int_get(NULL, "int", &i), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_view_get_str(&root, "int", &it), 0);
    assert_int_equal(shmobj_int_get(&it, &i), 0);
    assert_int_equal(i, 3);
    assert_int_equal(shmobj_obj_free(SEG(sp), a), 0);
    assert_int_equal(shmobj_field_int_get(&root, "int", &i), SHMOBJ_ESTALE);
}

/* Views kept over a free: the object is freed and another one is built in
 * the same block (same offset, the next generation). Every write and every
 * read that returns data through a view of the old object gives
 * SHMOBJ_ESTALE, and the new object's bytes stay exactly as they were. */
static void test_view_ops_after_free_and_reuse_stale(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_value items[18];
    float fdata[4] = {1, 2, 3, 4};
    uint64_t shape[1] = {4};
    shmobj_ref a = put(state, stale_tree(1, items, fdata, shape));
    shmobj_view root, vi, vu, vd, vb, vs, vy, vbuf, vl, vnull, vst, key, lkey;
    assert_int_equal(shmobj_obj_get(SEG(sp), a, &root), 0);
    assert_int_equal(shmobj_field_get(&root, "int", &vi), 0);
    assert_int_equal(shmobj_field_get(&root, "uint", &vu), 0);
    assert_int_equal(shmobj_field_get(&root, "double", &vd), 0);
    assert_int_equal(shmobj_field_get(&root, "bool", &vb), 0);
    assert_int_equal(shmobj_field_get(&root, "str", &vs), 0);
    assert_int_equal(shmobj_field_get(&root, "bytes", &vy), 0);
    assert_int_equal(shmobj_field_get(&root, "buffer", &vbuf), 0);
    assert_int_equal(shmobj_field_get(&root, "list", &vl), 0);
    assert_int_equal(shmobj_view_item(&vl, 1, &vnull), 0);
    assert_int_equal(shmobj_field_get(&root, "a longer key than seven bytes", &vst), 0);
    assert_int_equal(shmobj_view_key(&root, 0, &key), 0);  /* a short key */
    assert_int_equal(shmobj_view_key(&root, 8, &lkey), 0); /* a str object */
    /* A block after it keeps the freed block whole (not merged into the
     * free rest of the heap), so the new object reuses it exactly and the
     * arena gives it the next generation. */
    shmobj_ref spacer = put(state, SHMOBJ_VAL_INT(0));
    assert_int_equal(shmobj_obj_free(SEG(sp), a), 0);
    fdata[0] = 100;
    shmobj_ref b = put(state, stale_tree(2, items, fdata, shape));
    /* the premise: the new object took the old one's block */
    assert_int_equal(b & ((UINT64_C(1) << 48) - 1), a & ((UINT64_C(1) << 48) - 1));
    assert_int_not_equal(b, a);
    const uint8_t *blk = sp->base + (b & ((UINT64_C(1) << 48) - 1));
    uint64_t used;
    memcpy(&used, blk + 8, sizeof used); /* tree header: size */
    uint8_t *before = malloc(used);
    assert_non_null(before);
    memcpy(before, blk, used);

    int64_t x = 0;
    uint64_t u = 0;
    double d = 0;
    int bo = 0;
    size_t n = 0, i = 0;
    const char *s = NULL;
    const void *p = NULL;
    char buf[256];
    shmobj_view it;
    shmobj_buffer_info info = {.struct_size = sizeof info};
    shmobj_key k;
    shmobj_value kd = SHMOBJ_VAL_STR("int");
    assert_int_equal(shmobj_key_init(&k, &kd), 0);
    shmobj_value nv = SHMOBJ_VAL_STR("written through a stale view");
    shmobj_value ni = SHMOBJ_VAL_INT(77);
    /* the container */
    assert_int_equal(shmobj_view_item(&root, 0, &it), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_key(&root, 0, &it), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_index(&root, &kd, &i), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_index_key(&root, &k, &i), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_get(&root, &kd, &it), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_field_get(&root, "int", &it), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_get_key(&root, &k, &it), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_key_int_add(&root, &k, 1000, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_item_int_add(&root, 0, 1000, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_item_int_get(&root, 0, &x), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_len(&root, &n), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_json(&root, buf, sizeof buf, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_set(&root, &nv), SHMOBJ_ESTALE);
    /* scalars */
    assert_int_equal(shmobj_int_get(&vi, &x), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_int_set(&vi, 1000), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_int_add(&vi, 1000, NULL), SHMOBJ_ESTALE);
    x = 2;
    assert_int_equal(shmobj_int_cas(&vi, &x, 1000), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_set(&vi, &ni), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_json(&vi, buf, sizeof buf, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_uint_get(&vu, &u), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_uint_set(&vu, 1000), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_uint_add(&vu, 1000, NULL), SHMOBJ_ESTALE);
    u = 2;
    assert_int_equal(shmobj_uint_cas(&vu, &u, 1000), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_double_get(&vd, &d), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_double_set(&vd, 1000.0), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_double_add(&vd, 1000.0, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_bool_get(&vb, &bo), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_bool_set(&vb, 1), SHMOBJ_ESTALE);
    /* strings, bytes, buffers, keys */
    assert_int_equal(shmobj_str_get(&vs, &s, &n), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_len(&vs, &n), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_bytes_get(&vy, &p, &n), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_buffer_get(&vbuf, &info), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_str_get(&key, &s, &n), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_str_get(&lkey, &s, &n), SHMOBJ_ESTALE);
    /* nested containers and a null item */
    assert_int_equal(shmobj_view_item(&vl, 0, &it), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_item_int_add(&vl, 0, 1000, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_item_int_get(&vl, 0, &x), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_set(&vnull, &nv), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_view_json(&vnull, buf, sizeof buf, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_item_int_add(&vst, 1, 1000, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_field_get(&vst, "b", &it), SHMOBJ_ESTALE);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(shmobj_view_json_write(&root, f), SHMOBJ_ESTALE);
    fclose(f);

    /* nothing reached the new object, and nothing was allocated or freed */
    assert_memory_equal(blk, before, used);
    assert_int_equal(space_heap_live(sp), 2);
    assert_int_equal(shmobj_obj_check(SEG(sp), b), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), spacer), 0);
    free(before);
}

/* What a reference names decides the error: a live block that holds no
 * object is the wrong kind (SHMOBJ_ETYPE), a reference that names no block
 * of the segment is a bad argument (SHMOBJ_EINVAL), and only an object
 * block whose own bytes disagree is damage (SHMOBJ_ECORRUPT). */
#define expect_ref_refused(sp, r, want)                                     \
    do {                                                                    \
        shmobj_view v_;                                                     \
        assert_int_equal(shmobj_obj_get(SEG(sp), (r), &v_), (want));        \
        assert_int_equal(shmobj_obj_check(SEG(sp), (r)), (want));           \
        assert_int_equal(shmobj_obj_free(SEG(sp), (r)), (want));            \
    } while (0)

static void test_obj_get_wrong_kind_or_foreign_ref(void **state)
{
    struct shmobj__space *sp = *state;
    void *p = NULL;
    /* raw arena blocks: zeroed, random-looking, and too small for a header */
    shmobj__ref raw, tiny;
    assert_int_equal(sp->ops->alloc(sp, 256, 16, &raw), 0);
    assert_int_equal(shmobj__space_at(sp, shmobj__ref_off(raw), 256, &p), 0);
    memset(p, 0, 256);
    expect_ref_refused(sp, raw, SHMOBJ_ETYPE);
    memset(p, 0xa5, 256);
    expect_ref_refused(sp, raw, SHMOBJ_ETYPE);
    assert_int_equal(sp->ops->alloc(sp, 8, 16, &tiny), 0);
    expect_ref_refused(sp, tiny, SHMOBJ_ETYPE);
    /* both were left alone */
    assert_int_equal(sp->ops->free(sp, tiny), 0);
    assert_int_equal(sp->ops->free(sp, raw), 0);

    /* references that name no block: beyond the heap, unaligned, below it */
    shmobj_ref r = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1)));
    uint16_t gen = (uint16_t)(r >> 48);
    expect_ref_refused(sp, UINT64_C(1) << 40, SHMOBJ_EINVAL);
    expect_ref_refused(sp, ((UINT64_C(1) << 40) + 16) | (uint64_t)gen << 48, SHMOBJ_EINVAL);
    expect_ref_refused(sp, r + 8, SHMOBJ_EINVAL);
    expect_ref_refused(sp, r + 1, SHMOBJ_EINVAL);
    expect_ref_refused(sp, 16, SHMOBJ_EINVAL);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), 0);

    /* an object block whose header is inconsistent: damage */
    uint8_t *blk = sp->base + (r & ((UINT64_C(1) << 48) - 1));
    uint8_t saved[16];
    memcpy(saved, blk, 16);
    blk[4] = 4; /* a version after this library's */
    expect_ref_refused(sp, r, SHMOBJ_ECORRUPT);
    blk[4] = 0; /* no version */
    expect_ref_refused(sp, r, SHMOBJ_ECORRUPT);
    blk[4] = 1; /* version 1 (no medium keys) is read as it was */
    assert_int_equal(shmobj_obj_check(SEG(sp), r), 0);
    memcpy(blk, saved, 16);
    /* (a free of a block with a bad size and no replaced items need not
     * read the size: it is not asked here) */
    shmobj_view dv;
    uint64_t huge = UINT64_C(1) << 40; /* size beyond the block */
    memcpy(blk + 8, &huge, sizeof huge);
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &dv), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    uint64_t small = 16; /* size below the header and root */
    memcpy(blk + 8, &small, sizeof small);
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &dv), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    memcpy(blk, saved, 16);

    /* inside a graph, a slot naming a block that is not an object is
     * damage of the graph, whatever the block is */
    shmobj_view v, it;
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), 0);
    assert_int_equal(sp->ops->alloc(sp, 256, 16, &raw), 0);
    assert_int_equal(shmobj__space_at(sp, shmobj__ref_off(raw), 256, &p), 0);
    memset(p, 0, 256);
    uint8_t *item = blk + 48; /* item 0 of the list: tag, then payload */
    uint8_t saved_item[16];
    memcpy(saved_item, item, 16);
    item[0] = 0x40;
    memcpy(item + 8, &raw, sizeof raw);
    assert_int_equal(shmobj_view_item(&v, 0, &it), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    uint64_t foreign = UINT64_C(1) << 40;
    memcpy(item + 8, &foreign, sizeof foreign);
    assert_int_equal(shmobj_view_item(&v, 0, &it), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    memcpy(item, saved_item, 16);
    assert_int_equal(sp->ops->free(sp, raw), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), r), 0);
}

static void test_obj_put_depth_limit(void **state)
{
    shmobj_value chain[SHMOBJ_OBJ_MAXDEPTH + 1];
    shmobj_ref r;
    chain[0] = SHMOBJ_VAL_INT(1);
    for (int i = 1; i <= SHMOBJ_OBJ_MAXDEPTH; i++)
        chain[i] = SHMOBJ_VAL_LIST(&chain[i - 1], 1);
    assert_int_equal(shmobj_obj_put(SEG(*state), &chain[SHMOBJ_OBJ_MAXDEPTH], &r),
                     0);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), 0);
    shmobj_value deeper = SHMOBJ_VAL_LIST(&chain[SHMOBJ_OBJ_MAXDEPTH], 1);
    assert_int_equal(shmobj_obj_put(SEG(*state), &deeper, &r), SHMOBJ_EINVAL);
    size_t n;
    assert_int_equal(shmobj_obj_size(&deeper, &n), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_obj_size(&chain[1], &n), 0);
    assert_int_equal(n, 32 + 16 + 16); /* prefix, list header, one slot */
    shmobj_value bad = {.type = 99};
    assert_int_equal(shmobj_obj_size(&bad, &n), SHMOBJ_EINVAL);
}

enum { CLS_OTHER, CLS_TAG, CLS_SCALAR };

/* Mark, in cls (one byte per byte of the block at blk), the tags of every
 * slot and heap object a view reaches and the payloads of int and double
 * values (value: not a key or set member, whose bytes the index hashes). */
static void classify(const shmobj_view *v, const uint8_t *blk, size_t size, int value,
                     uint8_t *cls)
{
    size_t so = (size_t)((const uint8_t *)v->slot - blk);
    assert_true(so + 16 <= size);
    cls[so] = CLS_TAG;
    if (value && (v->slot_tag == SHMOBJ_TYPE_INT || v->slot_tag == SHMOBJ_TYPE_DOUBLE))
        memset(cls + so + 8, CLS_SCALAR, 8);
    if (v->obj == NULL)
        return;
    cls[(const uint8_t *)v->obj - blk] = CLS_TAG;
    size_t n;
    if (v->type == SHMOBJ_TYPE_STR || v->type == SHMOBJ_TYPE_BYTES ||
        shmobj_view_len(v, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        shmobj_view it;
        assert_int_equal(shmobj_view_item(v, i, &it), 0);
        classify(&it, blk, size, v->type != SHMOBJ_TYPE_SET, cls);
        if (shmobj_view_key(v, i, &it) == 0)
            classify(&it, blk, size, 0, cls);
    }
}

/* A tuple of strings below the root keeps its header in its slot
 * (format version 3): 16 bytes less than with a header, read back, printed
 * and checked like any packed tuple; replaced by a block of its own (the
 * slot's mark then counts no more) and back; a damaged count, length or
 * last NUL is SHMOBJ_ECORRUPT for the readers and the checker. */
static void test_obj_tuple_in_slot_read_replace_damage(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_value tup = SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("ab"), SHMOBJ_VAL_STR(""),
                                           SHMOBJ_VAL_STR("cde"));
    shmobj_value list = SHMOBJ_VAL_LIST_OF(tup, SHMOBJ_VAL_INT(1));
    size_t bytes;
    assert_int_equal(shmobj_obj_size(&list, &bytes), 0);
    /* tree header, root slot, the list's header and 2 slots, then the
     * tuple's 3 + 1 + 4 body bytes */
    assert_int_equal(bytes, 32 + 16 + 32 + 8);
    shmobj_ref r = put(state, list);
    shmobj_view v, t, it;
    const char *s;
    size_t n;
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 0, &t), 0);
    assert_int_equal(t.type, SHMOBJ_TYPE_TUPLE);
    assert_int_equal(shmobj_view_len(&t, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(shmobj_view_item(&t, 2, &it), 0);
    assert_int_equal(shmobj_str_get(&it, &s, &n), 0);
    assert_string_equal(s, "cde");
    assert_int_equal(shmobj_view_item(&t, 3, &it), SHMOBJ_ERANGE);
    json_is(&v, "[[\"ab\",\"\",\"cde\"],1]");
    /* damage of the slot's header, one field at a time */
    uint8_t *slot = (uint8_t *)t.slot, saved[16];
    memcpy(saved, slot, 16);
    assert_int_equal(slot[1], SHMOBJ_TYPE_TUPLE);
    slot[2] = 0; /* no item */
    assert_int_equal(shmobj_view_item(&v, 0, &t), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    memcpy(slot, saved, 16);
    slot[6] = 1; /* a body past the block */
    assert_int_equal(shmobj_view_item(&v, 0, &t), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    memcpy(slot, saved, 16);
    slot[4] = 7; /* a body whose last byte is not a NUL */
    assert_int_equal(shmobj_view_item(&v, 0, &t), SHMOBJ_ECORRUPT);
    memcpy(slot, saved, 16);
    slot[2] = 4; /* more items than NULs */
    assert_int_equal(shmobj_view_item(&v, 0, &t), 0);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    memcpy(slot, saved, 16);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), 0);
    /* replaced: a block of its own (a tuple at its root has a header),
     * the mark left in the slot */
    assert_int_equal(shmobj_view_item(&v, 0, &t), 0);
    shmobj_value other = SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("x"));
    assert_int_equal(shmobj_view_set(&t, &other), 0);
    assert_int_equal(slot[1], SHMOBJ_TYPE_TUPLE);
    assert_int_equal(shmobj_view_item(&v, 0, &t), 0);
    assert_true(t.obj_blk != v.obj_blk);
    assert_int_equal(shmobj_view_item(&t, 0, &it), 0);
    assert_int_equal(shmobj_str_get(&it, &s, &n), 0);
    assert_string_equal(s, "x");
    assert_int_equal(shmobj_obj_check(SEG(sp), r), 0);
    shmobj_value null = SHMOBJ_VAL_NULL;
    assert_int_equal(shmobj_view_set(&t, &null), 0);
    assert_int_equal(shmobj_view_item(&v, 0, &t), 0);
    assert_int_equal(t.type, SHMOBJ_TYPE_NULL);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), r), 0);
}

/* Damage one thing at a time and expect check (and the readers) to refuse
 * it without crashing. */
static void test_obj_check_damaged_graph(void **state)
{
    struct shmobj__space *sp = *state;
    static const char *const names[] = {"a", "b"};
    shmobj_value tree = SHMOBJ_VAL_LIST_OF(
        SHMOBJ_VAL_STR("hello"),
        SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_STR("k"), SHMOBJ_VAL_INT(1),
                           SHMOBJ_VAL_INT(2), SHMOBJ_VAL_BOOL(1)),
        SHMOBJ_VAL_STRUCT(SHMOBJ__VALS(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_INT(2)), 2, names),
        SHMOBJ_VAL_SET_OF(SHMOBJ_VAL_INT(9)));
    size_t size;
    assert_int_equal(shmobj_obj_size(&tree, &size), 0);
    shmobj_ref r = put(state, tree);
    uint8_t *blk = sp->base + (r & ((UINT64_C(1) << 48) - 1));
    uint8_t *saved = malloc(size);
    memcpy(saved, blk, size);
    /* What each byte is: a tag (a flip that sets bit 7 makes an unknown tag,
     * always refused), a scalar value's payload (any value is well formed,
     * never refused), or something whose flips may or may not be caught. */
    uint8_t *cls = calloc(size, 1);
    shmobj_view root;
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &root), 0);
    classify(&root, blk, size, 1, cls);
    int refused = 0, must_refuse = 0, must_accept = 0;
    /* Flip each byte in turn (a full sweep of the block). */
    for (size_t i = 0; i < size; i++) {
        for (int pat = 0; pat < 3; pat++) {
            static const uint8_t pats[3] = {0xff, 0x01, 0x80};
            blk[i] ^= pats[pat];
            int rc = shmobj_obj_check(SEG(sp), r);
            if (i < 4) {
                /* without the tree magic the block is not an object */
                assert_int_equal(rc, SHMOBJ_ETYPE);
                must_refuse++;
            } else if (i == 4 && blk[4] >= 1 && blk[4] < 3 && blk[5] == 0) {
                /* an older version readers take, whose bytes this tree
                 * (no record, no tuple) has the same */
                assert_int_equal(rc, 0);
                must_accept++;
            } else if (i < 6) {
                assert_int_equal(rc, SHMOBJ_ECORRUPT); /* the version */
                must_refuse++;
            } else if (cls[i] == CLS_TAG && (pats[pat] & 0x80)) {
                assert_int_equal(rc, SHMOBJ_ECORRUPT);
                must_refuse++;
            } else if (cls[i] == CLS_SCALAR) {
                assert_int_equal(rc, 0);
                must_accept++;
            } else if (rc != 0) {
                assert_true(rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE);
            }
            refused += rc != 0;
            /* the readers never crash either */
            shmobj_view v;
            char buf[512];
            if (shmobj_obj_get(SEG(sp), r, &v) == 0)
                (void)shmobj_view_json(&v, buf, sizeof buf, NULL);
            memcpy(blk, saved, size);
        }
    }
    /* The walk found every tag and value of the tree: 19 tags (the root
     * slot; the list's header; a slot and a header each for the str, dict,
     * struct and set; the dict's 2 keys and 2 values, the struct's 2
     * fields and 2 names, the set's member) under 2 patterns each, the 6
     * bytes of magic and version under 3, and 3 int values (the dict's 1,
     * the struct's 1 and 2) of 8 bytes under 3. */
    /* (version 3 with its low bit flipped is version 2) */
    assert_int_equal(must_refuse, 3 * 6 - 1 + 2 * 19);
    assert_int_equal(must_accept, 3 * 8 * 3 + 1);
    assert_true(refused >= must_refuse);
    free(cls);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), 0);

    /* Specific damages with a known outcome. */
    shmobj_view v, it;
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), 0);
    /* list count beyond the block */
    ((uint32_t *)(blk + 32))[1] = 1000000;
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), SHMOBJ_ECORRUPT);
    memcpy(blk, saved, size);
    /* tree magic: no longer an object block */
    blk[0] ^= 1;
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), SHMOBJ_ETYPE);
    memcpy(blk, saved, size);
    /* a slot pointing to itself: a cycle, caught by the depth bound */
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), 0);
    uint64_t list_off = (uint64_t)((const uint8_t *)v.obj - sp->base);
    uint64_t *pl = (uint64_t *)(blk + 48 + 16 * 0 + 8); /* item 0 payload */
    uint16_t gen = (uint16_t)(r >> 48);
    blk[48] = 0x40;
    *pl = list_off | (uint64_t)gen << 48;
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    char buf[256];
    assert_int_equal(shmobj_view_json(&v, buf, sizeof buf, NULL), SHMOBJ_ECORRUPT);
    memcpy(blk, saved, size);
    /* a payload outside the block that names no block */
    *pl = (list_off + 4096) | (uint64_t)gen << 48;
    int rc = shmobj_view_item(&v, 0, &it);
    assert_true(rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE);
    memcpy(blk, saved, size);
    /* an unknown slot tag */
    blk[48] = 0x77;
    assert_int_equal(shmobj_view_item(&v, 0, &it), SHMOBJ_ECORRUPT);
    memcpy(blk, saved, size);
    free(saved);
}

static void test_view_json_enobufs(void **state)
{
    shmobj_view v;
    char buf[8];
    size_t len;
    shmobj_ref r = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("tab\there \"q\" \\ \x01"),
                                                 SHMOBJ_VAL_DOUBLE(0.1),
                                                 SHMOBJ_VAL_DOUBLE(1e300),
                                                 SHMOBJ_VAL_DOUBLE(1.0 / 0.0),
                                                 SHMOBJ_VAL_INT(INT64_MIN)));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    const char *want = "[\"tab\\there \\\"q\\\" \\\\ \\u0001\",0.1,1e+300,null,"
                       "-9223372036854775808]";
    json_is(&v, want);
    assert_int_equal(shmobj_view_json(&v, buf, sizeof buf, &len), SHMOBJ_ENOBUFS);
    assert_int_equal(len, strlen(want));
    assert_int_equal(strlen(buf), sizeof buf - 1);
    assert_memory_equal(buf, want, sizeof buf - 1);
    assert_int_equal(shmobj_view_json(&v, NULL, 0, &len), SHMOBJ_ENOBUFS);
    assert_int_equal(len, strlen(want));

    /* to a FILE* */
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(shmobj_view_json_write(&v, f), 0);
    long n = ftell(f);
    assert_int_equal(n, (long)strlen(want));
    rewind(f);
    char back[256] = {0};
    assert_int_equal(fread(back, 1, (size_t)n, f), (size_t)n);
    assert_string_equal(back, want);
    fclose(f);
    assert_int_equal(shmobj_view_json_write(&v, NULL), SHMOBJ_EINVAL);
}

/* A damaged dict whose value slots all name one large string: printing it
 * would write that string once per slot, output quadratic in the segment
 * size. The printer charges each string by its bytes, so it stops with
 * SHMOBJ_ECORRUPT having produced output proportional to the segment. */
static void test_view_json_shared_string_bounded(void **state)
{
    (void)state;
    enum { PAIRS = 4096, BIG = 256 << 10, SPACE = 1 << 20 };
    struct shmobj__space *sp = space_heap_create(SPACE);
    assert_non_null(sp);
    static shmobj_value kv[2 * (PAIRS + 1)];
    char *big = malloc(BIG + 1);
    assert_non_null(big);
    memset(big, 'x', BIG);
    big[BIG] = '\0';
    for (int j = 0; j < PAIRS; j++) {
        kv[2 * j] = SHMOBJ_VAL_INT(j);
        kv[2 * j + 1] = SHMOBJ_VAL_NULL;
    }
    kv[2 * PAIRS] = SHMOBJ_VAL_STR("big");
    kv[2 * PAIRS + 1] = SHMOBJ_VAL_STRN(big, BIG);
    shmobj_value dict = SHMOBJ_VAL_DICT(kv, PAIRS + 1);
    shmobj_ref r;
    shmobj_view v, it;
    assert_int_equal(shmobj_obj_put(SEG(sp), &dict, &r), 0);
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), 0);
    assert_int_equal(shmobj_field_get(&v, "big", &it), 0);
    /* every null value now names the big string (inline, so its offset and
     * the block's generation) */
    uint64_t target = (uint64_t)((const uint8_t *)it.obj - sp->base) | (r >> 48) << 48;
    for (int j = 0; j < PAIRS; j++) {
        shmobj_view val;
        assert_int_equal(shmobj_view_item(&v, (size_t)j, &val), 0);
        assert_int_equal(val.type, SHMOBJ_TYPE_NULL);
        memcpy((uint8_t *)val.slot + 8, &target, sizeof target);
    }
    char buf[64];
    size_t len = 0;
    assert_int_equal(shmobj_view_json(&v, buf, sizeof buf, &len), SHMOBJ_ECORRUPT);
    /* the bound object.h gives: 25 bytes of output per byte of the segment
     * and 25 KB (here about 25 MiB, against the 1 GiB the slots would
     * print) */
    assert_true(len <= (size_t)25 * SPACE + 25000);
    assert_true(len > BIG); /* it did print some before it stopped */
    FILE *f = fopen("/dev/null", "w");
    assert_non_null(f);
    assert_int_equal(shmobj_view_json_write(&v, f), SHMOBJ_ECORRUPT);
    fclose(f);
    free(big);
    space_heap_destroy(sp);
}

/* Doubles print the fewest significant digits that read back as the same
 * double: positional while the decimal exponent is in [-4, 16), with ".0"
 * when integral, d.ddde+XX otherwise. */
static void test_view_json_doubles_shortest(void **state)
{
    static const struct {
        double d;
        const char *text;
    } cases[] = {
        {0.1, "0.1"},
        {0.3, "0.3"},
        {1e300, "1e+300"},
        {5e-324, "5e-324"},
        {3000.0, "3000.0"},
        {100.0, "100.0"},
        {2.0 / 3.0, "0.6666666666666666"},
        {-0.0, "-0.0"},
        {0.0001, "0.0001"},
        {1e-7, "1e-07"},
        {1e15, "1000000000000000.0"},
        {1e16, "1e+16"},
        {123456789.125, "123456789.125"},
        {1.2345678901234568e17, "1.2345678901234568e+17"},
        {2.2250738585072014e-308, "2.2250738585072014e-308"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {-1.5, "-1.5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        shmobj_ref r;
        shmobj_view v;
        char buf[64];
        assert_int_equal(shmobj_obj_put_double(SEG(*state), cases[i].d, &r), 0);
        assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
        assert_int_equal(shmobj_view_json(&v, buf, sizeof buf, NULL), 0);
        assert_string_equal(buf, cases[i].text);
        /* it reads back as the same double, bit for bit */
        double back = strtod(buf, NULL);
        assert_memory_equal(&back, &cases[i].d, sizeof back);
        assert_int_equal(shmobj_obj_free(SEG(*state), r), 0);
    }
}

static void test_dtype_names(void **state)
{
    (void)state;
    assert_string_equal(shmobj_dtype_name(SHMOBJ_DTYPE_I8), "i8");
    assert_string_equal(shmobj_dtype_name(SHMOBJ_DTYPE_BOOL), "bool");
    assert_string_equal(shmobj_dtype_name(0), "?");
    assert_string_equal(shmobj_dtype_name(1000), "?");
    assert_int_equal(shmobj_dtype_size(SHMOBJ_DTYPE_F64), 8);
    assert_int_equal(shmobj_dtype_size(SHMOBJ_DTYPE_U16), 2);
    assert_int_equal(shmobj_dtype_size(77), 0);
}

/* ---- across processes, through a real segment ----------------------------- */

static const char *const xp_names[] = {"id", "name", "health", "pos"};

/* Every type in one tree. */
static shmobj_value xp_tree(float *fdata, const uint64_t *shape, const uint8_t *bytes)
{
    /* static: compound literals here would die with this function */
    static shmobj_value fields[4], items[20], pos[3], set[2], list[2];
    set[0] = SHMOBJ_VAL_STR("a");
    set[1] = SHMOBJ_VAL_INT(1);
    list[0] = SHMOBJ_VAL_STR("x");
    list[1] = SHMOBJ_VAL_INT(0);
    pos[0] = SHMOBJ_VAL_DOUBLE(1.5);
    pos[1] = SHMOBJ_VAL_DOUBLE(-2.0);
    pos[2] = SHMOBJ_VAL_DOUBLE(0.25);
    fields[0] = SHMOBJ_VAL_INT(7);
    fields[1] = SHMOBJ_VAL_STR("player-7");
    fields[2] = SHMOBJ_VAL_INT(100);
    fields[3] = SHMOBJ_VAL_TUPLE(pos, 3);
    int n = 0;
    items[n++] = SHMOBJ_VAL_STR("null");
    items[n++] = SHMOBJ_VAL_NULL;
    items[n++] = SHMOBJ_VAL_STR("bool");
    items[n++] = SHMOBJ_VAL_BOOL(0);
    items[n++] = SHMOBJ_VAL_STR("int");
    items[n++] = SHMOBJ_VAL_INT(-3);
    items[n++] = SHMOBJ_VAL_STR("uint");
    items[n++] = SHMOBJ_VAL_UINT(3);
    items[n++] = SHMOBJ_VAL_STR("double");
    items[n++] = SHMOBJ_VAL_DOUBLE(0.5);
    items[n++] = SHMOBJ_VAL_STR("bytes");
    items[n++] = SHMOBJ_VAL_BYTES(bytes, 4);
    items[n++] = SHMOBJ_VAL_STR("buffer");
    static shmobj_buffer_desc bd;
    bd = (shmobj_buffer_desc){fdata, 0, shape, NULL, SHMOBJ_DTYPE_F32, 2};
    items[n++] = (shmobj_value){.type = SHMOBJ_TYPE_BUFFER, .v = {.buf = &bd}};
    items[n++] = SHMOBJ_VAL_INT(42);
    items[n++] = SHMOBJ_VAL_SET(set, 2);
    items[n++] = SHMOBJ_VAL_STR("struct");
    items[n++] = SHMOBJ_VAL_STRUCT(fields, 4, xp_names);
    items[n++] = SHMOBJ_VAL_STR("list");
    items[n++] = SHMOBJ_VAL_LIST(list, 2);
    return SHMOBJ_VAL_DICT(items, 10);
}

#define XP_JSON_BEFORE                                                          \
    "{\"null\":null,\"bool\":false,\"int\":-3,\"uint\":3,\"double\":0.5,"            \
    "\"bytes\":{\"$bytes\":4,\"hex\":\"01020304\"},"                                \
    "\"buffer\":{\"$buffer\":\"f32\",\"shape\":[2,2]},\"42\":[\"a\",1],"               \
    "\"struct\":{\"id\":7,\"name\":\"player-7\",\"health\":100,"                      \
    "\"pos\":[1.5,-2.0,0.25]},\"list\":[\"x\",0]}"
#define XP_JSON_AFTER                                                           \
    "{\"null\":\"from child\",\"bool\":true,\"int\":-2,\"uint\":3,\"double\":1.0,"  \
    "\"bytes\":{\"$bytes\":4,\"hex\":\"01020304\"},"                                \
    "\"buffer\":{\"$buffer\":\"f32\",\"shape\":[2,2]},\"42\":[\"a\",1],"               \
    "\"struct\":{\"id\":7,\"name\":\"player-7\",\"health\":150,"                      \
    "\"pos\":[1.5,-2.0,0.25]},\"list\":[[\"replaced\"],0]}"

struct xp_arg {
    char name[96];
};

static shmobj_segment *xp_create(const char *name)
{
    shmobj_segment_options o;
    shmobj_segment *seg = NULL;
    shmobj_segment_options_init(&o);
    o.initial_size = 8u << 20;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    return seg;
}

/* The child: open by name, read everything, check it, change it. */
static int xp_child_mutate(void *arg)
{
    struct xp_arg *a = arg;
    shmobj_segment *seg;
    shmobj_ref ref;
    shmobj_view v, it, f;
    char buf[1024];
    if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 5000 * TEST_MS, &seg) != 0)
        return 10;
    if (shmobj_segment_root_get(seg, "tree", &ref) != 0 || shmobj_obj_check(seg, ref) != 0 ||
        shmobj_obj_get(seg, ref, &v) != 0)
        return 11;
    if (shmobj_view_json(&v, buf, sizeof buf, NULL) != 0 || strcmp(buf, XP_JSON_BEFORE) != 0)
        return 12;
    shmobj_buffer_info info = {.struct_size = sizeof info};
    if (shmobj_field_get(&v, "buffer", &it) != 0 || shmobj_buffer_get(&it, &info) != 0 ||
        ((float *)info.data)[3] != 4.0f || (uintptr_t)info.data % 64 != 0)
        return 13;
    ((float *)info.data)[3] = 40.0f;
    shmobj_value nv = SHMOBJ_VAL_STR("from child");
    if (shmobj_field_get(&v, "null", &it) != 0 || shmobj_view_set(&it, &nv) != 0)
        return 14;
    if (shmobj_field_get(&v, "bool", &it) != 0 || shmobj_bool_set(&it, 1) != 0)
        return 15;
    if (shmobj_field_get(&v, "int", &it) != 0 || shmobj_int_add(&it, 1, NULL) != 0)
        return 16;
    if (shmobj_field_get(&v, "double", &it) != 0 || shmobj_double_add(&it, 0.5, NULL) != 0)
        return 17;
    if (shmobj_field_get(&v, "struct", &it) != 0 || shmobj_field_get(&it, "health", &f) != 0 ||
        shmobj_int_add(&f, 50, NULL) != 0)
        return 18;
    nv = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("replaced"));
    if (shmobj_field_get(&v, "list", &it) != 0 || shmobj_view_item(&it, 0, &f) != 0 ||
        shmobj_view_set(&f, &nv) != 0)
        return 19;
    shmobj_segment_close(seg);
    return 0;
}

static void test_obj_cross_process_build_read_mutate(void **state)
{
    (void)state;
    struct xp_arg a;
    test_name(a.name, sizeof a.name, "obj");
    shmobj_segment *seg = xp_create(a.name);
    float fdata[4] = {1, 2, 3, 4};
    uint64_t shape[2] = {2, 2};
    uint8_t bytes[4] = {1, 2, 3, 4};
    shmobj_value tree = xp_tree(fdata, shape, bytes);
    shmobj_ref ref;
    shmobj_view v, it;
    char buf[1024];
    assert_int_equal(shmobj_obj_put(seg, &tree, &ref), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "tree", ref), 0);
    assert_int_equal(test_child_wait(test_child_start(xp_child_mutate, &a, 20)), 0);
    /* the parent sees every change the child made */
    assert_int_equal(shmobj_obj_check(seg, ref), 0);
    assert_int_equal(shmobj_obj_get(seg, ref, &v), 0);
    assert_int_equal(shmobj_view_json(&v, buf, sizeof buf, NULL), 0);
    assert_string_equal(buf, XP_JSON_AFTER);
    shmobj_buffer_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_field_get(&v, "buffer", &it), 0);
    assert_int_equal(shmobj_buffer_get(&it, &info), 0);
    assert_true(((float *)info.data)[3] == 40.0f);
    /* the whole tree, with the child's replacements, frees */
    shmobj_arena_stats st = {.struct_size = sizeof st}, st0 = {.struct_size = sizeof st0};
    assert_int_equal(shmobj_arena_stats_get(seg, &st), 0);
    assert_int_equal(shmobj_obj_free(seg, ref), 0);
    assert_int_equal(shmobj_arena_stats_get(seg, &st0), 0);
    assert_int_equal(st.used_blocks - st0.used_blocks, 3);
    assert_int_equal(shmobj_obj_get(seg, ref, &v), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_arena_check(seg, NULL), 0);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(a.name, SHMOBJ_BACKEND_SHM), 0);
}

enum { XP_COUNTERS = 16, XP_ROUNDS = 20000 };

/* XP_ROUNDS times: 1 to each int counter it[0 .. XP_COUNTERS), 1.0 to the
 * double it[XP_COUNTERS]. 0, or the first failing step. */
static int add_rounds(const shmobj_view *it)
{
    for (int r = 0; r < XP_ROUNDS; r++) {
        for (size_t i = 0; i < XP_COUNTERS; i++)
            if (shmobj_int_add(&it[i], 1, NULL) != 0)
                return 12;
        if (shmobj_double_add(&it[XP_COUNTERS], 1.0, NULL) != 0)
            return 13;
    }
    return 0;
}

static int add_rounds_thread(void *arg)
{
    return add_rounds(arg);
}

static int xp_child_add(void *arg)
{
    struct xp_arg *a = arg;
    shmobj_segment *seg;
    shmobj_ref ref;
    shmobj_view v, it[XP_COUNTERS + 1];
    if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 5000 * TEST_MS, &seg) != 0 ||
        shmobj_segment_root_get(seg, "counters", &ref) != 0 ||
        shmobj_obj_get(seg, ref, &v) != 0)
        return 10;
    for (size_t i = 0; i <= XP_COUNTERS; i++)
        if (shmobj_view_item(&v, i, &it[i]) != 0)
            return 11;
    int rc = add_rounds(it);
    shmobj_segment_close(seg);
    return rc;
}

/* Every counter holds 2 * XP_ROUNDS: no increment was lost. */
static void counters_check(const shmobj_view *it)
{
    for (size_t i = 0; i < XP_COUNTERS; i++) {
        int64_t x;
        assert_int_equal(shmobj_int_get(&it[i], &x), 0);
        assert_int_equal(x, 2 * XP_ROUNDS);
    }
    double d;
    assert_int_equal(shmobj_double_get(&it[XP_COUNTERS], &d), 0);
    assert_true(d == 2.0 * XP_ROUNDS);
}

static void test_int_add_two_processes_no_lost_increment(void **state)
{
    (void)state;
    struct xp_arg a;
    shmobj_value vals[XP_COUNTERS + 1];
    shmobj_view v, it[XP_COUNTERS + 1];
    shmobj_ref ref;
    test_name(a.name, sizeof a.name, "add");
    shmobj_segment *seg = xp_create(a.name);
    for (size_t i = 0; i < XP_COUNTERS; i++)
        vals[i] = SHMOBJ_VAL_INT(0);
    vals[XP_COUNTERS] = SHMOBJ_VAL_DOUBLE(0);
    shmobj_value list = SHMOBJ_VAL_LIST(vals, XP_COUNTERS + 1);
    assert_int_equal(shmobj_obj_put(seg, &list, &ref), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "counters", ref), 0);
    assert_int_equal(shmobj_obj_get(seg, ref, &v), 0);
    for (size_t i = 0; i <= XP_COUNTERS; i++)
        assert_int_equal(shmobj_view_item(&v, i, &it[i]), 0);
    pid_t pid = test_child_start(xp_child_add, &a, 60);
    /* both processes add at once */
    assert_int_equal(add_rounds(it), 0);
    assert_int_equal(test_child_wait(pid), 0);
    counters_check(it);
    assert_int_equal(shmobj_obj_free(seg, ref), 0);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(a.name, SHMOBJ_BACKEND_SHM), 0);
}

/* The same with two threads sharing the views, for the thread sanitizer. */
static void test_int_add_threads_no_lost_increment(void **state)
{
    shmobj_value vals[XP_COUNTERS + 1];
    shmobj_view v, it[XP_COUNTERS + 1];
    for (size_t i = 0; i < XP_COUNTERS; i++)
        vals[i] = SHMOBJ_VAL_INT(0);
    vals[XP_COUNTERS] = SHMOBJ_VAL_DOUBLE(0);
    shmobj_ref ref = put(state, SHMOBJ_VAL_LIST(vals, XP_COUNTERS + 1));
    assert_int_equal(shmobj_obj_get(SEG(*state), ref, &v), 0);
    for (size_t i = 0; i <= XP_COUNTERS; i++)
        assert_int_equal(shmobj_view_item(&v, i, &it[i]), 0);
    struct test_thread t[2];
    for (int k = 0; k < 2; k++)
        assert_int_equal(test_thread_start(&t[k], add_rounds_thread, it), 0);
    for (int k = 0; k < 2; k++)
        assert_int_equal(test_thread_wait(&t[k]), 0);
    counters_check(it);
    assert_int_equal(shmobj_obj_free(SEG(*state), ref), 0);
}

enum { XP_SETS = 2000 };

/* Replace item 0 of the shared list again and again. What object.h allows
 * while another process replaces the same item: taking the item's view
 * succeeds, or gives SHMOBJ_ESTALE when the item was replaced under it
 * each of the 64 times it followed it; the replacement succeeds, with the
 * view refreshed to a string (every value either process writes is one),
 * or gives SHMOBJ_ESTALE for that same reason (the new value is in place).
 * SHMOBJ_ECORRUPT is damage, and nothing here damages the tree. */
static int xp_replace_loop(shmobj_segment *seg, shmobj_ref ref, const char *who)
{
    char text[64];
    for (int i = 0; i < XP_SETS; i++) {
        shmobj_view v, it;
        snprintf(text, sizeof text, "%s-%d", who, i);
        shmobj_value nv = SHMOBJ_VAL_STR(text);
        if (shmobj_obj_get(seg, ref, &v) != 0)
            return 20;
        int rc = shmobj_view_item(&v, 0, &it);
        if (rc == SHMOBJ_ESTALE)
            continue;
        if (rc != 0 || it.type != SHMOBJ_TYPE_STR)
            return 21;
        rc = shmobj_view_set(&it, &nv);
        if (rc == 0 && it.type != SHMOBJ_TYPE_STR)
            return 22;
        if (rc != 0 && rc != SHMOBJ_ESTALE)
            return 23;
    }
    return 0;
}

static int xp_child_replace(void *arg)
{
    struct xp_arg *a = arg;
    shmobj_segment *seg;
    shmobj_ref ref;
    if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 5000 * TEST_MS, &seg) != 0 ||
        shmobj_segment_root_get(seg, "list", &ref) != 0)
        return 10;
    int rc = xp_replace_loop(seg, ref, "child");
    shmobj_segment_close(seg);
    return rc;
}

/* Two processes replacing the same item at once: every old value is freed
 * exactly once (no block leaks, the heap stays consistent). */
static void test_view_set_two_processes_frees_each_once(void **state)
{
    (void)state;
    struct xp_arg a;
    shmobj_ref ref;
    shmobj_view v, it;
    test_name(a.name, sizeof a.name, "set");
    shmobj_segment *seg = xp_create(a.name);
    shmobj_arena_stats st0 = {.struct_size = sizeof st0}, st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_arena_stats_get(seg, &st0), 0);
    shmobj_value list = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("first"), SHMOBJ_VAL_INT(0));
    assert_int_equal(shmobj_obj_put(seg, &list, &ref), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "list", ref), 0);
    pid_t pid = test_child_start(xp_child_replace, &a, 60);
    assert_int_equal(xp_replace_loop(seg, ref, "parent"), 0);
    assert_int_equal(test_child_wait(pid), 0);
    assert_int_equal(shmobj_obj_check(seg, ref), 0);
    assert_int_equal(shmobj_obj_get(seg, ref, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 0, &it), 0);
    assert_int_equal(it.type, SHMOBJ_TYPE_STR);
    /* the list and the one value still in it, nothing else */
    assert_int_equal(shmobj_arena_stats_get(seg, &st), 0);
    assert_int_equal(st.used_blocks - st0.used_blocks, 2);
    assert_int_equal(shmobj_obj_free(seg, ref), 0);
    assert_int_equal(shmobj_arena_stats_get(seg, &st), 0);
    assert_int_equal(st.used_blocks, st0.used_blocks);
    assert_int_equal(shmobj_arena_check(seg, NULL), 0);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(a.name, SHMOBJ_BACKEND_SHM), 0);
}

static int xp_child_free(void *arg)
{
    struct xp_arg *a = arg;
    shmobj_segment *seg;
    shmobj_ref ref;
    if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 5000 * TEST_MS, &seg) != 0 ||
        shmobj_segment_root_get(seg, "msg", &ref) != 0)
        return 10;
    if (shmobj_obj_free(seg, ref) != 0)
        return 11;
    /* reuse the memory with something else */
    shmobj_ref other;
    if (shmobj_obj_put_str(seg, "someone else's data", SHMOBJ_STRLEN, &other) != 0)
        return 12;
    shmobj_segment_close(seg);
    return 0;
}

static void test_obj_get_stale_across_processes(void **state)
{
    (void)state;
    struct xp_arg a;
    shmobj_ref ref;
    shmobj_view v;
    test_name(a.name, sizeof a.name, "stale");
    shmobj_segment *seg = xp_create(a.name);
    assert_int_equal(shmobj_obj_put_str(seg, "message", SHMOBJ_STRLEN, &ref), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "msg", ref), 0);
    assert_int_equal(test_child_wait(test_child_start(xp_child_free, &a, 20)), 0);
    assert_int_equal(shmobj_obj_get(seg, ref, &v), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_check(seg, ref), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_free(seg, ref), SHMOBJ_ESTALE);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(a.name, SHMOBJ_BACKEND_SHM), 0);
}

/* In a real segment: the blocks of a map and of a queue message are live
 * blocks of another kind (SHMOBJ_ETYPE); references the segment never
 * made are SHMOBJ_EINVAL. */
static void test_obj_get_other_layers_blocks_wrong_type(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "kind");
    shmobj_segment *seg = xp_create(name);
    shmobj_map *m;
    shmobj_queue *q;
    shmobj_ref mref, msg, obj;
    shmobj_view v;
    assert_int_equal(shmobj_map_create(seg, "a-map", &m), 0);
    assert_int_equal(shmobj_segment_root_get(seg, "a-map", &mref), 0);
    assert_int_equal(shmobj_queue_create(seg, "a-queue", 8, 0, &q), 0);
    assert_int_equal(shmobj_queue_msg_alloc(q, 64, 0, &msg, NULL), 0);
    const shmobj_ref kinds[] = {mref, msg};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        assert_int_equal(shmobj_obj_get(seg, kinds[i], &v), SHMOBJ_ETYPE);
        assert_int_equal(shmobj_obj_check(seg, kinds[i]), SHMOBJ_ETYPE);
        assert_int_equal(shmobj_obj_free(seg, kinds[i]), SHMOBJ_ETYPE);
    }
    assert_int_equal(shmobj_obj_put_int(seg, 1, &obj), 0);
    const shmobj_ref foreign[] = {UINT64_C(1) << 46, obj + 8, 64};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        assert_int_equal(shmobj_obj_get(seg, foreign[i], &v), SHMOBJ_EINVAL);
        assert_int_equal(shmobj_obj_check(seg, foreign[i]), SHMOBJ_EINVAL);
        assert_int_equal(shmobj_obj_free(seg, foreign[i]), SHMOBJ_EINVAL);
    }
    /* the map and the message are intact */
    assert_int_equal(shmobj_map_set(m, "k", 1, "v", 1), 0);
    assert_int_equal(shmobj_map_check(m), 0);
    assert_int_equal(shmobj_queue_msg_free(q, msg), 0);
    assert_int_equal(shmobj_obj_free(seg, obj), 0);
    assert_int_equal(shmobj_arena_check(seg, NULL), 0);
    shmobj_map_close(m);
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* Lookups of short string keys (held in their slots) and of keys that look
 * alike: lengths 0..8, an embedded NUL, a bytes key of the same content,
 * an int key. Every path (index, get_str, get) agrees. */
/* Dict pairs name[j] -> j, in kv[0 .. 2n). */
static void names_to_positions(shmobj_value *kv, const char *const *names, int n)
{
    for (int j = 0; j < n; j++) {
        kv[2 * j] = SHMOBJ_VAL_STR(names[j]);
        kv[2 * j + 1] = SHMOBJ_VAL_INT(j);
    }
}

static void test_view_index_short_keys(void **state)
{
    static const char *const names[] = {"", "a", "ab", "abc", "abcd", "abcdefg", "abcdefgh"};
    enum { NS = sizeof names / sizeof names[0] };
    shmobj_value kv[2 * (NS + 4)];
    names_to_positions(kv, names, NS);
    kv[2 * NS] = SHMOBJ_VAL_STRN("a\0b", 3);
    kv[2 * NS + 1] = SHMOBJ_VAL_INT(100);
    kv[2 * NS + 2] = SHMOBJ_VAL_BYTES("ab", 2);
    kv[2 * NS + 3] = SHMOBJ_VAL_INT(101);
    kv[2 * NS + 4] = SHMOBJ_VAL_INT(7);
    kv[2 * NS + 5] = SHMOBJ_VAL_INT(102);
    kv[2 * NS + 6] = SHMOBJ_VAL_BYTES("abcdefghij", 10);
    kv[2 * NS + 7] = SHMOBJ_VAL_INT(103);
    shmobj_ref r = put(state, SHMOBJ_VAL_DICT(kv, NS + 4));
    shmobj_view v, it;
    size_t i;
    int64_t x;
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    for (int j = 0; j < NS; j++) {
        shmobj_value k = SHMOBJ_VAL_STR(names[j]);
        assert_int_equal(shmobj_view_index(&v, &k, &i), 0);
        assert_int_equal(i, j);
        k = SHMOBJ_VAL_STRN(names[j], SHMOBJ_STRLEN);
        assert_int_equal(shmobj_view_index(&v, &k, &i), 0);
        assert_int_equal(i, j);
        assert_int_equal(shmobj_field_get(&v, names[j], &it), 0);
        assert_int_equal(shmobj_int_get(&it, &x), 0);
        assert_int_equal(x, j);
        assert_int_equal(shmobj_view_get(&v, &k, &it), 0);
        assert_int_equal(shmobj_int_get(&it, &x), 0);
        assert_int_equal(x, j);
    }
    shmobj_value k = SHMOBJ_VAL_STRN("a\0b", 3);
    assert_int_equal(shmobj_view_index(&v, &k, &i), 0);
    assert_int_equal(i, NS);
    k = SHMOBJ_VAL_BYTES("ab", 2);
    assert_int_equal(shmobj_view_index(&v, &k, &i), 0);
    assert_int_equal(i, NS + 1);
    k = SHMOBJ_VAL_INT(7);
    assert_int_equal(shmobj_view_index(&v, &k, &i), 0);
    assert_int_equal(i, NS + 2);
    /* near misses: one byte off, a NUL in another place, other lengths */
    static const char *const misses[] = {"b", "ac", "abd", "abce", "abcdefh", "abcdef",
                                         "abcdefgi", "abcdefghi", "A"};
    for (size_t j = 0; j < sizeof misses / sizeof misses[0]; j++) {
        k = SHMOBJ_VAL_STR(misses[j]);
        assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_ENOTFOUND);
        assert_int_equal(shmobj_field_get(&v, misses[j], &it), SHMOBJ_ENOTFOUND);
    }
    k = SHMOBJ_VAL_STRN("a\0c", 3);
    assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_ENOTFOUND);
    k = SHMOBJ_VAL_STRN("a\0", 2);
    assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_ENOTFOUND);
    k = SHMOBJ_VAL_BYTES("abc", 3);
    assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_ENOTFOUND);
    /* a long bytes key is not found as a string, and the reverse */
    assert_int_equal(shmobj_field_get(&v, "abcdefghij", &it), SHMOBJ_ENOTFOUND);
    k = SHMOBJ_VAL_BYTES("abcdefghij", 10);
    assert_int_equal(shmobj_view_index(&v, &k, &i), 0);
    assert_int_equal(i, NS + 3);
    k = SHMOBJ_VAL_BYTES("abcdefgh", 8);
    assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_ENOTFOUND);
    k = SHMOBJ_VAL_BYTES("", 0);
    assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_ENOTFOUND);
    k = SHMOBJ_VAL_INT(8);
    assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_ENOTFOUND);
    /* a NULL pointer with length 0 is the empty string */
    k = SHMOBJ_VAL_STRN(NULL, 0);
    assert_int_equal(shmobj_view_index(&v, &k, &i), 0);
    assert_int_equal(i, 0);
    k = SHMOBJ_VAL_STRN(NULL, 1);
    assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_EINVAL);
    /* a damaged short key length is refused, not read past */
    shmobj_view kview;
    assert_int_equal(shmobj_view_key(&v, 3, &kview), 0);
    uint8_t *ks = kview.slot;
    assert_int_equal(ks[0], 0x41);
    ks[1] = 9;
    assert_int_equal(shmobj_field_get(&v, "abc", &it), SHMOBJ_ECORRUPT);
    ks[1] = 3;
    assert_int_equal(shmobj_field_get(&v, "abc", &it), 0);
    /* non-zero padding after a short key (writers NUL-pad): the inline
     * probe misses it, the full one still finds the key by its bytes */
    ks[8 + 6] = 0x7f;
    assert_int_equal(shmobj_field_get(&v, "abc", &it), 0);
    shmobj_key pk;
    shmobj_value pkv = SHMOBJ_VAL_STR("abc");
    assert_int_equal(shmobj_key_init(&pk, &pkv), 0);
    assert_int_equal(shmobj_view_index_key(&v, &pk, &i), 0);
    assert_int_equal(i, 3);
    ks[8 + 6] = 0;

    /* the same keys in a named struct and a set take the general path */
    static const char *const fields[] = {"", "a", "abcdefg", "abcdefgh"};
    r = put(state, SHMOBJ_VAL_STRUCT(SHMOBJ__VALS(SHMOBJ_VAL_INT(0), SHMOBJ_VAL_INT(1),
                                                  SHMOBJ_VAL_INT(2), SHMOBJ_VAL_INT(3)),
                                     4, fields));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    for (int j = 0; j < 4; j++) {
        k = SHMOBJ_VAL_STR(fields[j]);
        assert_int_equal(shmobj_view_index(&v, &k, &i), 0);
        assert_int_equal(i, j);
        assert_int_equal(shmobj_field_get(&v, fields[j], &it), 0);
        assert_int_equal(shmobj_int_get(&it, &x), 0);
        assert_int_equal(x, j);
    }
    assert_int_equal(shmobj_field_get(&v, "ab", &it), SHMOBJ_ENOTFOUND);
    r = put(state, SHMOBJ_VAL_SET_OF(SHMOBJ_VAL_STR("abc"), SHMOBJ_VAL_STR("abcdefgh")));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    k = SHMOBJ_VAL_STR("abc");
    assert_int_equal(shmobj_view_index(&v, &k, &i), 0);
    assert_int_equal(i, 0);
    k = SHMOBJ_VAL_STR("abd");
    assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_field_get(&v, "abc", &it), SHMOBJ_ETYPE);
}

/* Keys of more than 14 bytes are str objects of the dict's block: each is
 * found by shmobj_field_get() among many of its kind (equal lengths, equal
 * prefixes), a near miss or a bytes key of the same bytes is not, and a
 * long key slot naming memory outside its block is damage, not a miss. */
static void test_field_get_long_keys_found_missed_or_damaged(void **state)
{
    static const char *const names[] = {
        "in_a_good_state", "in_a_good_statf", "in_a_good_state_too", "fifteen_bytes_a",
        "fifteen_bytes_b", "a key well past sixteen bytes", "sixteen_bytes_ab",
        "the seventeenth!"};
    enum { NL = sizeof names / sizeof names[0] };
    shmobj_value kv[2 * (NL + 1)];
    names_to_positions(kv, names, NL);
    kv[2 * NL] = SHMOBJ_VAL_BYTES("fifteen_bytes_c", 15);
    kv[2 * NL + 1] = SHMOBJ_VAL_INT(NL);
    shmobj_ref r = put(state, SHMOBJ_VAL_DICT(kv, NL + 1));
    shmobj_view v, it, kview;
    int64_t x;
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    for (int j = 0; j < NL; j++) {
        assert_int_equal(shmobj_field_get(&v, names[j], &it), 0);
        assert_int_equal(shmobj_int_get(&it, &x), 0);
        assert_int_equal(x, j);
    }
    static const char *const misses[] = {"in_a_good_statd", "in_a_good_state_", "fifteen_bytes_c",
                                         "a key well past sixteen byteS", "sixteen_bytes_a"};
    for (size_t j = 0; j < sizeof misses / sizeof misses[0]; j++)
        assert_int_equal(shmobj_field_get(&v, misses[j], &it), SHMOBJ_ENOTFOUND);
    /* key 0's slot names a str object; point it below its block */
    assert_int_equal(shmobj_view_key(&v, 0, &kview), 0);
    uint8_t *ks = kview.slot;
    assert_int_equal(ks[0], 0x40);
    uint64_t pl;
    memcpy(&pl, ks + 8, 8);
    uint64_t bad = (pl & ~UINT64_C(0xffffffffffff)) | 16;
    memcpy(ks + 8, &bad, 8);
    assert_int_equal(shmobj_field_get(&v, names[0], &it), SHMOBJ_ECORRUPT);
    memcpy(ks + 8, &pl, 8);
    assert_int_equal(shmobj_field_get(&v, names[0], &it), 0);
}

/* A prepared key finds what its description finds, in dicts (short and
 * long string keys, bytes and integer keys), named structs and sets, and
 * misses what it misses; keys that were not prepared are refused. */
static void expect_same_lookup(const shmobj_view *v, const shmobj_value *desc)
{
    shmobj_key key;
    shmobj_view a, b;
    size_t i = 99, j = 98;
    assert_int_equal(shmobj_key_init(&key, desc), 0);
    int rc = shmobj_view_index(v, desc, &i);
    assert_int_equal(shmobj_view_index_key(v, &key, &j), rc);
    if (rc == 0)
        assert_int_equal(i, j);
    rc = shmobj_view_get(v, desc, &a);
    assert_int_equal(shmobj_view_get_key(v, &key, &b), rc);
    if (rc == 0)
        assert_ptr_equal(a.slot, b.slot);
}

static void test_view_prepared_keys(void **state)
{
    static const char *const strs[] = {"", "a", "id", "health", "abcdefg", "abcdefgh",
                                       "in_a_good_state", "a key longer than sixteen bytes"};
    enum { NS = sizeof strs / sizeof strs[0] };
    shmobj_value kv[2 * (NS + 2)];
    names_to_positions(kv, strs, NS);
    kv[2 * NS] = SHMOBJ_VAL_BYTES("health", 6);
    kv[2 * NS + 1] = SHMOBJ_VAL_INT(100);
    kv[2 * NS + 2] = SHMOBJ_VAL_INT(-5);
    kv[2 * NS + 3] = SHMOBJ_VAL_INT(101);
    shmobj_ref r = put(state, SHMOBJ_VAL_DICT(kv, NS + 2));
    shmobj_view v, it;
    int64_t x;
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    for (int j = 0; j < NS; j++) {
        shmobj_value d = SHMOBJ_VAL_STR(strs[j]);
        expect_same_lookup(&v, &d);
        d = SHMOBJ_VAL_STRN(strs[j], SHMOBJ_STRLEN);
        expect_same_lookup(&v, &d);
        shmobj_key key;
        assert_int_equal(shmobj_key_init(&key, &d), 0);
        assert_int_equal(shmobj_view_get_key(&v, &key, &it), 0);
        assert_int_equal(shmobj_int_get(&it, &x), 0);
        assert_int_equal(x, j);
    }
    const shmobj_value others[] = {
        SHMOBJ_VAL_BYTES("health", 6), SHMOBJ_VAL_INT(-5), SHMOBJ_VAL_INT(5),
        SHMOBJ_VAL_BYTES("id", 2), SHMOBJ_VAL_STRN("healt", 5), SHMOBJ_VAL_STRN("abcdefgi", 8),
        SHMOBJ_VAL_STRN("a key longer than sixteen bytez", 31), SHMOBJ_VAL_STRN("b", 1)};
    for (size_t j = 0; j < sizeof others / sizeof others[0]; j++)
        expect_same_lookup(&v, &others[j]);

    /* add by key: the value under the key changes, and only it */
    shmobj_key hk;
    int64_t before;
    shmobj_value hd = SHMOBJ_VAL_STR("health");
    assert_int_equal(shmobj_key_init(&hk, &hd), 0);
    assert_int_equal(shmobj_view_key_int_add(&v, &hk, 10, &before), 0);
    assert_int_equal(before, 3);
    assert_int_equal(shmobj_field_get(&v, "health", &it), 0);
    assert_int_equal(shmobj_int_get(&it, &x), 0);
    assert_int_equal(x, 13);
    assert_int_equal(shmobj_field_get(&v, "id", &it), 0);
    assert_int_equal(shmobj_int_get(&it, &x), 0);
    assert_int_equal(x, 2);
    hd = SHMOBJ_VAL_STR("nope");
    assert_int_equal(shmobj_key_init(&hk, &hd), 0);
    assert_int_equal(shmobj_view_key_int_add(&v, &hk, 1, NULL), SHMOBJ_ENOTFOUND);

    /* named struct and set: the general probe */
    static const char *const fields[] = {"id", "health", "in_a_good_state"};
    r = put(state, SHMOBJ_VAL_STRUCT(SHMOBJ__VALS(SHMOBJ_VAL_INT(0), SHMOBJ_VAL_INT(1),
                                                  SHMOBJ_VAL_INT(2)),
                                     3, fields));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    for (int j = 0; j < NS; j++) {
        shmobj_value d = SHMOBJ_VAL_STR(strs[j]);
        expect_same_lookup(&v, &d);
    }
    hd = SHMOBJ_VAL_STR("health");
    assert_int_equal(shmobj_key_init(&hk, &hd), 0);
    assert_int_equal(shmobj_view_key_int_add(&v, &hk, 5, &before), 0);
    assert_int_equal(before, 1);
    assert_int_equal(shmobj_item_int_get(&v, 1, &x), 0);
    assert_int_equal(x, 6);
    r = put(state, SHMOBJ_VAL_SET_OF(SHMOBJ_VAL_STR("health"), SHMOBJ_VAL_INT(3)));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    shmobj_key key;
    size_t i;
    shmobj_value d = SHMOBJ_VAL_INT(3);
    assert_int_equal(shmobj_key_init(&key, &d), 0);
    assert_int_equal(shmobj_view_index_key(&v, &key, &i), 0);
    assert_int_equal(i, 1);
    assert_int_equal(shmobj_view_get_key(&v, &key, &it), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_view_key_int_add(&v, &key, 1, NULL), SHMOBJ_ETYPE);

    /* bad keys and views */
    d = SHMOBJ_VAL_DOUBLE(1.0);
    assert_int_equal(shmobj_key_init(&key, &d), SHMOBJ_EINVAL);
    d = SHMOBJ_VAL_STRN(NULL, 3);
    assert_int_equal(shmobj_key_init(&key, &d), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_key_init(NULL, &d), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_key_init(&key, NULL), SHMOBJ_EINVAL);
    memset(&key, 0, sizeof key); /* never prepared */
    assert_int_equal(shmobj_view_index_key(&v, &key, &i), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_view_get_key(&v, &key, &it), SHMOBJ_EINVAL);
    d = SHMOBJ_VAL_STR("health");
    assert_int_equal(shmobj_key_init(&key, &d), 0);
    assert_int_equal(shmobj_view_index_key(NULL, &key, &i), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_view_index_key(&v, &key, NULL), SHMOBJ_EINVAL);
    r = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1)));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_view_index_key(&v, &key, &i), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_view_get_key(&v, &key, &it), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_view_key_int_add(&v, &key, 1, NULL), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_view_key_int_add(NULL, &key, 1, NULL), SHMOBJ_EINVAL);
    /* a value that is not an int */
    r = put(state, SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_STR("health"), SHMOBJ_VAL_STR("full")));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_view_key_int_add(&v, &key, 1, NULL), SHMOBJ_ETYPE);
}

/* Freeing: an unchanged block, a block with a replaced item, a stale
 * reference and a block that is not an object. */
static void test_obj_free_paths(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_view v, it;
    shmobj_ref r = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("x"), SHMOBJ_VAL_NULL));
    assert_int_equal(shmobj_obj_free(SEG(sp), r), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), SHMOBJ_ESTALE);

    r = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("x"), SHMOBJ_VAL_NULL));
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 1, &it), 0);
    shmobj_value nv = SHMOBJ_VAL_STR("a separate block");
    assert_int_equal(shmobj_view_set(&it, &nv), 0);
    shmobj_ref sep;
    memcpy(&sep, (const uint8_t *)it.slot + 8, sizeof sep); /* the slot's payload */
    assert_int_equal(shmobj_obj_free(SEG(sp), r), 0);
    /* the separate block went with its parent */
    assert_int_equal(shmobj_obj_get(SEG(sp), sep, &v), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_free(SEG(sp), r), SHMOBJ_ESTALE);

    /* an arena block that holds no object is refused and left alone */
    shmobj__ref raw;
    void *p = NULL;
    assert_int_equal(sp->ops->alloc(sp, 64, 16, &raw), 0);
    assert_int_equal(shmobj__space_at(sp, shmobj__ref_off(raw), 64, &p), 0);
    memset(p, 0, 64);
    assert_int_equal(shmobj_obj_free(SEG(sp), raw), SHMOBJ_ETYPE);
    assert_int_equal(sp->ops->free(sp, raw), 0);
}

/* ---- keys that collide in an index ------------------------------------
 * The builder enters keys with the index probe, the views find them with
 * it and the checker proves each key is found at its place; keys that
 * share a start position, and pairs that also share the high half of
 * their hash (the part an entry keeps), make every probe step over
 * entries and compare keys. The hashes are the format's (format.h). */

/* A candidate key: kind, int value or bytes (up to 15), and its hash. */
struct ckey {
    unsigned type;
    int64_t i;
    char s[16];
    uint8_t n;
    uint64_t hash;
};

static void ckey_make(struct ckey *k, unsigned type, uint64_t x, unsigned n)
{
    static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    memset(k, 0, sizeof *k);
    k->type = type;
    if (type == SHMOBJ_TYPE_INT) {
        k->i = (int64_t)x;
        k->hash = shmobj__hash_int(k->i);
        return;
    }
    /* n bytes, the counter's digits after a fixed prefix */
    k->n = (uint8_t)n;
    memset(k->s, '_', n);
    k->s[0] = 'k';
    for (unsigned j = 1; j < n && x != 0; j++, x /= 36)
        k->s[j] = digits[x % 36];
    k->hash = shmobj__hash_mem(type, k->s, n);
}

static shmobj_value ckey_value(const struct ckey *k)
{
    if (k->type == SHMOBJ_TYPE_INT) {
        shmobj_value i = SHMOBJ_VAL_INT(k->i);
        return i;
    }
    shmobj_value v = SHMOBJ_VAL_BYTES(k->s, k->n);
    v.type = k->type;
    return v;
}

static int ckey_by_tag(const void *a, const void *b)
{
    uint64_t x = ((const struct ckey *)a)->hash >> 32, y = ((const struct ckey *)b)->hash >> 32;
    return x < y ? -1 : x > y;
}

/* Keys of one kind whose probes all start at entry 0 of a 16-entry index:
 * out[0] and out[1] also share the high half of their hash; out[2..] do
 * not. Returns how many it found (up to max). */
static size_t colliding_keys(unsigned type, unsigned n, struct ckey *out, size_t max)
{
    enum { CANDS = 1 << 18 };
    struct ckey *c = malloc(CANDS * sizeof *c);
    size_t got = 0, found = 0;
    assert_non_null(c);
    /* distinct keys: ints, or strings of n - 1 digits after the prefix */
    uint64_t end = UINT64_C(1) << 26;
    if (type != SHMOBJ_TYPE_INT) {
        end = 1;
        for (unsigned j = 1; j < n && end < (UINT64_C(1) << 26); j++)
            end *= 36;
    }
    for (uint64_t x = 1; got < CANDS && x < end; x++) {
        ckey_make(&c[got], type, x, n);
        if ((c[got].hash & 15) == 0)
            got++;
    }
    qsort(c, got, sizeof *c, ckey_by_tag);
    for (size_t j = 0; j + 1 < got && found == 0; j++) {
        if (c[j].hash >> 32 == c[j + 1].hash >> 32) {
            out[0] = c[j];
            out[1] = c[j + 1];
            found = 2;
            /* the others: distinct tags, away from the pair */
            for (size_t m = 0; m < got && found < max; m += got / 16) {
                if (c[m].hash >> 32 != c[j].hash >> 32)
                    out[found++] = c[m];
            }
        }
    }
    free(c);
    return found;
}

/* Every key of keys[0..n) is found at its position j (values are j) by
 * every lookup; the absent keys are not found. */
static void expect_keys_found(const shmobj_view *v, const struct ckey *keys, size_t n,
                              const struct ckey *absent, size_t nabsent)
{
    for (size_t j = 0; j < n; j++) {
        shmobj_value d = ckey_value(&keys[j]);
        shmobj_key key;
        shmobj_view it;
        size_t at = 99;
        int64_t x;
        assert_int_equal(shmobj_view_index(v, &d, &at), 0);
        assert_int_equal(at, j);
        assert_int_equal(shmobj_key_init(&key, &d), 0);
        assert_int_equal(shmobj_view_index_key(v, &key, &at), 0);
        assert_int_equal(at, j);
        expect_same_lookup(v, &d);
        if (v->type == SHMOBJ_TYPE_SET)
            continue;
        assert_int_equal(shmobj_view_get_key(v, &key, &it), 0);
        assert_int_equal(shmobj_int_get(&it, &x), 0);
        assert_int_equal(x, (int64_t)j);
        if (keys[j].type == SHMOBJ_TYPE_STR) {
            assert_int_equal(shmobj_field_get(v, keys[j].s, &it), 0);
            assert_int_equal(shmobj_int_get(&it, &x), 0);
            assert_int_equal(x, (int64_t)j);
        }
        int64_t old = -1;
        assert_int_equal(shmobj_view_key_int_add(v, &key, 0, &old), 0);
        assert_int_equal(old, (int64_t)j);
    }
    for (size_t j = 0; j < nabsent; j++) {
        shmobj_value d = ckey_value(&absent[j]);
        shmobj_key key;
        shmobj_view it;
        size_t at = 99;
        assert_int_equal(shmobj_view_index(v, &d, &at), SHMOBJ_ENOTFOUND);
        assert_int_equal(shmobj_key_init(&key, &d), 0);
        assert_int_equal(shmobj_view_index_key(v, &key, &at), SHMOBJ_ENOTFOUND);
        if (v->type == SHMOBJ_TYPE_SET)
            continue;
        assert_int_equal(shmobj_view_key_int_add(v, &key, 1, NULL), SHMOBJ_ENOTFOUND);
        if (absent[j].type == SHMOBJ_TYPE_STR)
            assert_int_equal(shmobj_field_get(v, absent[j].s, &it), SHMOBJ_ENOTFOUND);
    }
}

/* Build keys[0..n) as a dict (values their positions), a set and, when
 * they are all strings, a named struct; check each; look every key up. */
static void expect_index_agrees(void **state, const struct ckey *keys, size_t n,
                                const struct ckey *absent, size_t nabsent)
{
    shmobj_value kv[64], members[32];
    const char *names[32];
    int strings = 1;
    assert_true(n <= 32);
    for (size_t j = 0; j < n; j++) {
        kv[2 * j] = ckey_value(&keys[j]);
        kv[2 * j + 1] = SHMOBJ_VAL_INT((int64_t)j);
        members[j] = kv[2 * j];
        names[j] = keys[j].s;
        strings &= keys[j].type == SHMOBJ_TYPE_STR;
    }
    shmobj_view v;
    shmobj_ref r = put(state, SHMOBJ_VAL_DICT(kv, n)); /* checks it too */
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    expect_keys_found(&v, keys, n, absent, nabsent);
    assert_int_equal(shmobj_obj_free(SEG(*state), r), 0);
    r = put(state, SHMOBJ_VAL_SET(members, n));
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    expect_keys_found(&v, keys, n, absent, nabsent);
    assert_int_equal(shmobj_obj_free(SEG(*state), r), 0);
    if (strings) {
        shmobj_value vals[32];
        for (size_t j = 0; j < n; j++)
            vals[j] = SHMOBJ_VAL_INT((int64_t)j);
        r = put(state, SHMOBJ_VAL_STRUCT(vals, n, names));
        assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
        expect_keys_found(&v, keys, n, absent, nabsent);
        assert_int_equal(shmobj_obj_free(SEG(*state), r), 0);
    }
}

static void test_obj_index_colliding_keys_build_lookup_check_agree(void **state)
{
    /* ints, short string keys (held in their slots), long string keys and
     * bytes keys (str and bytes objects) */
    static const unsigned kinds[][2] = {{SHMOBJ_TYPE_INT, 0},
                                        {SHMOBJ_TYPE_STR, 7},
                                        {SHMOBJ_TYPE_STR, 12},
                                        {SHMOBJ_TYPE_BYTES, 6}};
    struct ckey all[32], keys[32];
    size_t nall = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        struct ckey got[6];
        size_t n = colliding_keys(kinds[k][0], kinds[k][1], got, 6);
        /* a pair sharing start and half hash, and others sharing the start */
        assert_true(n >= 4);
        for (size_t j = 0; j < 3; j++) {
            assert_int_equal(got[j].hash & 15, 0);
            if (j > 0)
                assert_true(got[j].hash != got[0].hash);
        }
        assert_true(got[0].hash >> 32 == got[1].hash >> 32);
        /* one kind alone: both of the pair, then the first without the
         * second, which its probe meets before any empty entry */
        expect_index_agrees(state, got, n, NULL, 0);
        expect_index_agrees(state, got, 1, &got[1], 1);
        struct ckey rev[6];
        for (size_t j = 0; j < n; j++)
            rev[j] = got[n - 1 - j];
        expect_index_agrees(state, rev, n, NULL, 0);
        for (size_t j = 0; j < 3; j++)
            all[nall++] = got[j];
    }
    /* the kinds together in one cluster: 12 keys, a 16-entry index, every
     * probe starting at entry 0; the second of each pair absent */
    size_t n = 0;
    struct ckey absent[4];
    for (size_t k = 0; k < 4; k++) {
        keys[n++] = all[3 * k];
        keys[n++] = all[3 * k + 2];
        absent[k] = all[3 * k + 1];
    }
    expect_index_agrees(state, keys, n, absent, 4);
    for (size_t k = 0; k < 4; k++)
        keys[n++] = absent[k];
    expect_index_agrees(state, keys, n, NULL, 0);
    /* A key equal to an earlier colliding one is refused; the same bytes
     * as another kind (a str and a bytes) are two keys. */
    shmobj_value kv[2 * 13];
    for (size_t j = 0; j < n; j++) {
        kv[2 * j] = ckey_value(&keys[j]);
        kv[2 * j + 1] = SHMOBJ_VAL_INT((int64_t)j);
    }
    shmobj_ref r;
    for (size_t j = 0; j < n; j++) {
        kv[2 * n] = ckey_value(&keys[j]);
        kv[2 * n + 1] = SHMOBJ_VAL_INT(0);
        shmobj_value d = SHMOBJ_VAL_DICT(kv, n + 1);
        assert_int_equal(shmobj_obj_put(SEG(*state), &d, &r), SHMOBJ_EINVAL);
        if (keys[j].type == SHMOBJ_TYPE_INT)
            continue;
        kv[2 * n].type = keys[j].type == SHMOBJ_TYPE_STR ? SHMOBJ_TYPE_BYTES : SHMOBJ_TYPE_STR;
        assert_int_equal(shmobj_obj_put(SEG(*state), &d, &r), 0);
        assert_int_equal(shmobj_obj_check(SEG(*state), r), 0);
        assert_int_equal(shmobj_obj_free(SEG(*state), r), 0);
    }
}

/* Medium string keys (format version 2): a str key of 8..14 bytes whose
 * last byte is not NUL is held in its slot, so it takes no bytes after the
 * slots; every lookup finds it, its view reads it as a NUL-terminated
 * string, the checker and the JSON printer take it, and a damaged one is
 * SHMOBJ_ECORRUPT. Keys of 7 and 15 bytes, and one of 9 ending in NUL,
 * keep their old forms beside them. */
/* shmobj_field_get() measures its key and derives its slot word itself:
 * every length from 0 to 40 bytes (short, medium and object keys, and
 * the boundaries between them) is found, and a key one byte shorter or
 * with its last byte changed is another key or none. */
static void test_field_get_key_every_length(void **state)
{
    enum { NK = 41 };
    static char names[NK][NK + 1];
    shmobj_value kv[2 * NK];
    for (int j = 0; j < NK; j++) {
        for (int b = 0; b < j; b++)
            names[j][b] = (char)('a' + (b * 7 + j) % 26);
        names[j][j] = '\0';
        kv[2 * j] = SHMOBJ_VAL_STR(names[j]);
        kv[2 * j + 1] = SHMOBJ_VAL_INT(j);
    }
    shmobj_ref r = put(state, SHMOBJ_VAL_DICT(kv, NK));
    shmobj_view v, it;
    int64_t x;
    char miss[NK + 1];
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    for (int j = 0; j < NK; j++) {
        assert_int_equal(shmobj_field_get(&v, names[j], &it), 0);
        assert_int_equal(shmobj_int_get(&it, &x), 0);
        assert_int_equal(x, j);
        if (j == 0)
            continue;
        memcpy(miss, names[j], (size_t)j + 1);
        miss[j - 1] = '#'; /* in no key */
        assert_int_equal(shmobj_field_get(&v, miss, &it), SHMOBJ_ENOTFOUND);
        miss[j - 1] = '\0'; /* a prefix: no key of that length has it */
        assert_int_equal(shmobj_field_get(&v, miss, &it),
                         j == 1 ? 0 : SHMOBJ_ENOTFOUND);
    }
}

static void test_dict_key_medium_roundtrip_and_damage(void **state)
{
    static const char *const names[] = {"abcdefgh", "avg_salary", "employees",
                                        "in_a_good_sta", "in_a_good_stat", "abcdefg",
                                        "in_a_good_state"};
    enum { NS = sizeof names / sizeof names[0] };
    shmobj_value kv[2 * (NS + 1)];
    names_to_positions(kv, names, NS);
    kv[2 * NS] = SHMOBJ_VAL_STRN("abcdefgh\0", 9);
    kv[2 * NS + 1] = SHMOBJ_VAL_INT(100);
    /* the medium keys take no bytes: the dict's size is that of the same
     * dict with 1-byte keys but for one pair more and the two str objects
     * of the 15-byte key and of the key ending in NUL */
    static const char *const tiny[] = {"a", "b", "c", "d", "e", "f", "g"};
    shmobj_value tv[2 * NS];
    names_to_positions(tv, tiny, NS);
    shmobj_value d = SHMOBJ_VAL_DICT(kv, NS + 1), td = SHMOBJ_VAL_DICT(tv, NS);
    size_t dsize, tsize;
    assert_int_equal(shmobj_obj_size(&d, &dsize), 0);
    assert_int_equal(shmobj_obj_size(&td, &tsize), 0);
    /* NS + 1 pairs against NS: the index is 16 entries for both, one pair
     * more (32), two str objects (16 + 15 + 1, then 16 + 9 + 1) */
    assert_int_equal(dsize, tsize + 32 + 32 + 26);
    shmobj_ref r = put(state, d);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), 0);
    shmobj_view v, it, kview;
    size_t i;
    int64_t x;
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    for (int j = 0; j < NS; j++) {
        shmobj_value k = SHMOBJ_VAL_STR(names[j]);
        shmobj_key pk;
        assert_int_equal(shmobj_view_index(&v, &k, &i), 0);
        assert_int_equal(i, j);
        assert_int_equal(shmobj_field_get(&v, names[j], &it), 0);
        assert_int_equal(shmobj_int_get(&it, &x), 0);
        assert_int_equal(x, j);
        assert_int_equal(shmobj_key_init(&pk, &k), 0);
        assert_int_equal(shmobj_view_get_key(&v, &pk, &it), 0);
        assert_int_equal(shmobj_int_get(&it, &x), 0);
        assert_int_equal(x, j);
        /* the key's view: its bytes, a NUL after them */
        const char *ks;
        size_t kn;
        assert_int_equal(shmobj_view_key(&v, (size_t)j, &kview), 0);
        assert_int_equal(shmobj_str_get(&kview, &ks, &kn), 0);
        assert_int_equal(kn, strlen(names[j]));
        assert_string_equal(ks, names[j]);
    }
    shmobj_value k = SHMOBJ_VAL_STRN("abcdefgh\0", 9);
    assert_int_equal(shmobj_view_index(&v, &k, &i), 0);
    assert_int_equal(i, NS);
    /* the forms: medium for 8..14 bytes, short for 7, an object for 15
     * and for the key ending in NUL */
    static const uint8_t tags[NS + 1] = {0x44, 0x44, 0x44, 0x44, 0x44, 0x41, 0x40, 0x40};
    for (int j = 0; j <= NS; j++) {
        assert_int_equal(shmobj_view_key(&v, (size_t)j, &kview), 0);
        assert_int_equal(((const uint8_t *)kview.slot)[0], tags[j]);
    }
    /* near misses of medium keys: a byte off, one shorter or longer, a
     * trailing NUL, the same bytes as bytes */
    static const char *const misses[] = {"abcdefgi", "bbcdefgh", "abcdefghi", "avg_salar",
                                         "avg_salaryy", "in_a_good_st"};
    for (size_t j = 0; j < sizeof misses / sizeof misses[0]; j++) {
        k = SHMOBJ_VAL_STR(misses[j]);
        shmobj_key pk;
        assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_ENOTFOUND);
        assert_int_equal(shmobj_field_get(&v, misses[j], &it), SHMOBJ_ENOTFOUND);
        assert_int_equal(shmobj_key_init(&pk, &k), 0);
        assert_int_equal(shmobj_view_get_key(&v, &pk, &it), SHMOBJ_ENOTFOUND);
    }
    k = SHMOBJ_VAL_STRN("avg_salary\0", 11);
    assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_ENOTFOUND);
    k = SHMOBJ_VAL_BYTES("avg_salary", 10);
    assert_int_equal(shmobj_view_index(&v, &k, &i), SHMOBJ_ENOTFOUND);
    char json[512];
    size_t jn;
    assert_int_equal(shmobj_view_json(&v, json, sizeof json, &jn), 0);
    assert_non_null(strstr(json, "\"avg_salary\":1"));
    assert_non_null(strstr(json, "\"in_a_good_stat\":4"));
    /* damage: second word all zero, byte 15 set */
    assert_int_equal(shmobj_view_key(&v, 1, &kview), 0);
    uint8_t *ks = kview.slot, saved[16];
    memcpy(saved, ks, 16);
    memset(ks + 8, 0, 8);
    assert_int_equal(shmobj_view_key(&v, 1, &kview), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), SHMOBJ_ECORRUPT);
    memcpy(ks, saved, 16);
    ks[15] = 'x';
    assert_int_equal(shmobj_view_key(&v, 1, &kview), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), SHMOBJ_ECORRUPT);
    /* a lookup that meets it is refused, not read past */
    assert_int_equal(shmobj_field_get(&v, "avg_salary", &it), SHMOBJ_ECORRUPT);
    shmobj_key dk;
    k = SHMOBJ_VAL_STR("avg_salary");
    assert_int_equal(shmobj_key_init(&dk, &k), 0);
    assert_int_equal(shmobj_view_get_key(&v, &dk, &it), SHMOBJ_ECORRUPT);
    memcpy(ks, saved, 16);
    /* invalid UTF-8 in a medium key's bytes: the checker refuses it */
    ks[3] = 0xff;
    assert_int_equal(shmobj_obj_check(SEG(*state), r), SHMOBJ_ECORRUPT);
    memcpy(ks, saved, 16);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), 0);
    /* invalid UTF-8 in a described medium key is refused by the put */
    kv[0] = SHMOBJ_VAL_STRN("abc\xff" "defgh", 8);
    shmobj_ref bad;
    assert_int_equal(shmobj_obj_put(SEG(*state), &d, &bad), SHMOBJ_EINVAL);
}

/* The measure counts a keyed container's key objects before its values'
 * bytes, as the writer lays them out: a dict whose value is a packed tuple
 * in its slot (unaligned bytes) and whose keys are str objects (16-aligned)
 * measures the bytes the put writes, and the put succeeds (a put whose
 * writer ends anywhere else refuses the description). Set members and
 * struct names count the same way. */
static void test_obj_size_keys_before_values_as_written(void **state)
{
    shmobj_value kv[] = {
        SHMOBJ_VAL_STR("a key of seventeen"),
        SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("abc"), SHMOBJ_VAL_STR("de")),
        SHMOBJ_VAL_STR("k"), SHMOBJ_VAL_STR("sixteen byte key"),
        SHMOBJ_VAL_STR("another long key!"), SHMOBJ_VAL_INT(3),
    };
    shmobj_value d = SHMOBJ_VAL_DICT(kv, 3);
    size_t size;
    assert_int_equal(shmobj_obj_size(&d, &size), 0);
    /* tree header and root (32), the dict's header, index (4 entries) and
     * pairs (16 + 32 + 96), the keys' str objects (16 + 18 + 1 at 176, 16 +
     * 17 + 1 at 224), then the tuple's bytes (4 + 3, unaligned, at 258) and
     * the value's str object (16 + 16 + 1 at 272) */
    assert_int_equal(size, 305);
    shmobj_ref r = put(state, d);
    shmobj_view v, it, s;
    assert_int_equal(shmobj_obj_check(SEG(*state), r), 0);
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_field_get(&v, "a key of seventeen", &it), 0);
    assert_int_equal(shmobj_view_item(&it, 1, &s), 0);
    const char *p;
    assert_int_equal(shmobj_str_get(&s, &p, NULL), 0);
    assert_string_equal(p, "de");
    assert_int_equal(shmobj_field_get(&v, "k", &it), 0);
    assert_int_equal(shmobj_str_get(&it, &p, NULL), 0);
    assert_string_equal(p, "sixteen byte key");
    static const char *const names[] = {"a name of seventeen", "b"};
    shmobj_value fields[] = {
        SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("x")),
        SHMOBJ_VAL_STR("y"),
    };
    shmobj_value st = SHMOBJ_VAL_STRUCT(fields, 2, names);
    assert_int_equal(shmobj_obj_size(&st, &size), 0);
    /* 32, the struct's header, values, names and index (16 + 32 + 32 +
     * 32), the long name's str object at 144 (16 + 19 + 1), the tuple's 2
     * bytes at 180, the value's str object at 192 (16 + 1 + 1) */
    assert_int_equal(size, 210);
    shmobj_ref rs = put(state, st);
    assert_int_equal(shmobj_obj_check(SEG(*state), rs), 0);
}

/* Below the root, a tuple of strings is written packed with its header
 * in its slot, in one pass over its items: an item met part-way that
 * makes it no packed tuple (a NUL inside, another kind) has it written
 * with slots from the same place, over the bytes copied before it, and
 * the put's size is the measure's; bad UTF-8 there refuses the put. */
static void test_tuple_below_root_packed_or_slots_one_pass(void **state)
{
    static const char *const a = "https://a.example.com";
    shmobj_value cases[3] = {
        SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR(a), SHMOBJ_VAL_STR("ab")),
        SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR(a), SHMOBJ_VAL_STRN("a\0b", 3)),
        SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR(a), SHMOBJ_VAL_INT(1)),
    };
    /* the tree header and root, the list's header and 3 slots; the first
     * tuple packed, 22 + 3 body bytes; the others 16-aligned, a header and
     * 2 slots, then their strings as objects (16 + bytes + NUL, aligned) */
    size_t size, want = 32 + 64 + 25 + 7 + (48 + 38 + 10 + 20) + 12 + (48 + 38);
    shmobj_value list = SHMOBJ_VAL_LIST(cases, 3);
    assert_int_equal(shmobj_obj_size(&list, &size), 0);
    assert_int_equal(size, want);
    shmobj_ref r = put(state, list);
    shmobj_view v, t, it;
    const char *s;
    size_t n;
    int64_t x;
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(shmobj_view_item(&v, i, &t), 0);
        assert_int_equal(shmobj_view_type(&t), SHMOBJ_TYPE_TUPLE);
        assert_int_equal(shmobj_view_len(&t, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(shmobj_view_item(&t, 0, &it), 0);
        assert_int_equal(shmobj_str_get(&it, &s, &n), 0);
        assert_int_equal(n, strlen(a));
        assert_string_equal(s, a);
        assert_int_equal(shmobj_view_item(&t, 1, &it), 0);
        if (i == 2) {
            assert_int_equal(shmobj_int_get(&it, &x), 0);
            assert_int_equal(x, 1);
            continue;
        }
        assert_int_equal(shmobj_str_get(&it, &s, &n), 0);
        assert_int_equal(n, i == 0 ? 2 : 3);
        assert_memory_equal(s, i == 0 ? "ab" : "a\0b", n + 1);
    }
    assert_int_equal(shmobj_obj_free(SEG(*state), r), 0);
    /* bad UTF-8 after a good item: refused, nothing left behind */
    uint64_t live = space_heap_live(*state);
    shmobj_value bad = SHMOBJ_VAL_LIST_OF(
        SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR(a), SHMOBJ_VAL_STRN("a\xff", 2)));
    assert_int_equal(shmobj_obj_put(SEG(*state), &bad, &r), SHMOBJ_EINVAL);
    assert_int_equal(space_heap_live(*state), live);
}

/* A tuple whose items are all strings without a NUL inside is written
 * packed (format version 2): a header and the strings back to back, each
 * with its NUL, no slot per item. It reads as any tuple (its length, its
 * items as NUL-terminated strings, immutable), prints and checks; other
 * tuples keep their slots; damaged bytes are SHMOBJ_ECORRUPT. */
static void test_tuple_of_str_packed_roundtrip_and_damage(void **state)
{
    shmobj_value t = SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("https://a.example.com"),
                                         SHMOBJ_VAL_STR(""), SHMOBJ_VAL_STRN("xyz", 2));
    size_t size;
    assert_int_equal(shmobj_obj_size(&t, &size), 0);
    /* tree header and root, the tuple's header, 21 + 1, 0 + 1, 2 + 1 bytes */
    assert_int_equal(size, 32 + 16 + 22 + 1 + 3);
    /* a NUL inside an item, or an item not a string: slots as before */
    shmobj_value nul = SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("ab"), SHMOBJ_VAL_STRN("a\0b", 3));
    shmobj_value mixed = SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("ab"), SHMOBJ_VAL_INT(1));
    assert_int_equal(shmobj_obj_size(&nul, &size), 0);
    assert_int_equal(size, 32 + 16 + 32 + 19 + 13 + 20); /* (13: to 16-align) */
    assert_int_equal(shmobj_obj_size(&mixed, &size), 0);
    assert_int_equal(size, 32 + 16 + 32 + 19);
    shmobj_ref rn = put(state, nul);
    shmobj_view nv, it;
    const char *s;
    size_t n;
    assert_int_equal(shmobj_obj_get(SEG(*state), rn, &nv), 0);
    assert_int_equal(shmobj_view_item(&nv, 1, &it), 0);
    assert_int_equal(shmobj_str_get(&it, &s, &n), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(s, "a\0b", 4);

    shmobj_ref r = put(state, t);
    shmobj_view v;
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(v.type, SHMOBJ_TYPE_TUPLE);
    assert_int_equal(shmobj_view_len(&v, &n), 0);
    assert_int_equal(n, 3);
    static const char *const want[] = {"https://a.example.com", "", "xy"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(shmobj_view_item(&v, i, &it), 0);
        assert_int_equal(shmobj_str_get(&it, &s, &n), 0);
        assert_int_equal(n, strlen(want[i]));
        assert_string_equal(s, want[i]);
        /* immutable, and no int */
        shmobj_value nv2 = SHMOBJ_VAL_STR("x");
        assert_int_equal(shmobj_view_set(&it, &nv2), SHMOBJ_EACCES);
        int64_t x;
        assert_int_equal(shmobj_item_int_get(&v, i, &x), SHMOBJ_ETYPE);
    }
    assert_int_equal(shmobj_view_item(&v, 3, &it), SHMOBJ_ERANGE);
    char json[128];
    size_t jn;
    assert_int_equal(shmobj_view_json(&v, json, sizeof json, &jn), 0);
    assert_string_equal(json, "[\"https://a.example.com\",\"\",\"xy\"]");
    /* damage: the header's count past the strings there are, the last NUL
     * gone, a NUL count of 0, a list marked packed, bad UTF-8 */
    uint8_t *h = (uint8_t *)v.obj, saved[64];
    memcpy(saved, h, sizeof saved);
    h[4] = 4; /* count */
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 3, &it), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), SHMOBJ_ECORRUPT);
    memcpy(h, saved, sizeof saved);
    h[16 + 21 + 1 + 1 + 2] = 'z'; /* the last NUL */
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), SHMOBJ_ECORRUPT);
    memcpy(h, saved, sizeof saved);
    h[16 + 21] = 'z'; /* the first NUL: two strings where three were */
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 2, &it), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), SHMOBJ_ECORRUPT);
    memcpy(h, saved, sizeof saved);
    h[4] = 0; /* no items */
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), SHMOBJ_ECORRUPT);
    memcpy(h, saved, sizeof saved);
    h[0] = SHMOBJ_TYPE_LIST;
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), SHMOBJ_ECORRUPT);
    memcpy(h, saved, sizeof saved);
    h[16 + 3] = 0xff;
    assert_int_equal(shmobj_obj_check(SEG(*state), r), SHMOBJ_ECORRUPT);
    memcpy(h, saved, sizeof saved);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), 0);
    /* bad UTF-8 in a described item is refused by the put */
    shmobj_value bad = SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STRN("a\xff", 2));
    shmobj_ref rb;
    assert_int_equal(shmobj_obj_put(SEG(*state), &bad, &rb), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_obj_free(SEG(*state), r), 0);
    assert_int_equal(shmobj_obj_free(SEG(*state), rn), 0);
    /* a free that walks its block (an item replaced) passes over a packed
     * tuple's bytes: they name nothing */
    shmobj_value outer = SHMOBJ_VAL_LIST_OF(
        SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("\x40\x40\x40\x40\x40\x40\x40\x40\x40\x40"
                                           "\x40\x40\x40\x40\x40\x40\x40\x40\x40\x40")),
        SHMOBJ_VAL_NULL);
    shmobj_ref ro = put(state, outer);
    shmobj_value repl = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1));
    assert_int_equal(shmobj_obj_get(SEG(*state), ro, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 1, &it), 0);
    assert_int_equal(shmobj_view_set(&it, &repl), 0);
    assert_int_equal(shmobj_obj_check(SEG(*state), ro), 0);
    assert_int_equal(shmobj_obj_free(SEG(*state), ro), 0);
}

/* ---- a stale link over reused space ------------------------------------ */

/* What a stale link's follow meets at its old offset once the target's
 * block was freed and a bytes object's payload was laid over it: bytes that
 * look like a used block header of the link's generation. */
enum forged {
    FORGED_BAD_TAG,   /* used header, boundary tag that disagrees */
    FORGED_NO_MAGIC,  /* a consistent block that is no object */
    FORGED_BAD_TREE,  /* the tree magic, an impossible version */
    FORGED_BAD_ROOT   /* a tree header whose root slot is impossible */
};

static void forge(uint8_t *at, uint16_t gen, enum forged how)
{
    const uint64_t s = 64; /* the forged block's size, header included */
    uint64_t w = s | 1u /* USED */ | (uint64_t)gen << 48;
    memset(at, 0, s + 16);
    memcpy(at + 8, &w, 8);
    uint64_t tag = how == FORGED_BAD_TAG ? s + 16 : s;
    memcpy(at + s, &tag, 8); /* the next header's prev_size */
    if (how == FORGED_BAD_TAG || how == FORGED_NO_MAGIC) {
        memset(at + 16, 0x5a, 16);
        return;
    }
    struct shmobj__tree t = {.magic = SHMOBJ__TREE_MAGIC,
                             .version = how == FORGED_BAD_TREE ? 0x7fff
                                                               : SHMOBJ__TREE_VERSION,
                             .size = SHMOBJ__PREFIX};
    memcpy(at + 16, &t, sizeof t);
    uint8_t slot[16] = {how == FORGED_BAD_ROOT ? 0xee : SHMOBJ__SLOT_INT};
    uint64_t seven = 7;
    memcpy(slot + 8, &seven, 8);
    memcpy(at + 32, slot, sizeof slot);
}

/* A link whose target was freed gives SHMOBJ_ESTALE whatever lies at the
 * target's old offset now, also bytes of another object's payload made to
 * look like a block of the link's generation, consistent or not, with the
 * tree magic or without: never SHMOBJ_ECORRUPT, the link's own bytes being
 * fine. (Bytes that forge a whole object, header, tree and root, pass
 * the O(1) check: see shmobj_view_follow().) */
static void test_link_follow_forged_reuse_estale(void **state)
{
    struct shmobj__space *sp = *state;
    static uint8_t data[1024];
    for (enum forged how = FORGED_BAD_TAG; how <= FORGED_BAD_ROOT; how++) {
        memset(data, 0, sizeof data);
        shmobj_ref a = put(state, SHMOBJ_VAL_BYTES(data, 512));
        shmobj_ref t = put(state, SHMOBJ_VAL_LIST_OF(
            SHMOBJ_VAL_INT(42), SHMOBJ_VAL_INT(1), SHMOBJ_VAL_INT(2),
            SHMOBJ_VAL_INT(3), SHMOBJ_VAL_INT(4), SHMOBJ_VAL_INT(5),
            SHMOBJ_VAL_INT(6), SHMOBJ_VAL_INT(7), SHMOBJ_VAL_INT(8),
            SHMOBJ_VAL_INT(9), SHMOBJ_VAL_INT(10), SHMOBJ_VAL_INT(11)));
        shmobj_ref c = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_LINK(t)));
        shmobj_view v, l, tv;
        assert_int_equal(shmobj_obj_get(SEG(sp), c, &v), 0);
        assert_int_equal(shmobj_view_item(&v, 0, &l), 0);
        assert_int_equal(shmobj_view_follow(&l, &tv), 0);
        /* a and t merge when freed; a bytes object of both their sizes
         * takes their place, t's old header inside its payload */
        assert_int_equal(shmobj_obj_free(SEG(sp), a), 0);
        assert_int_equal(shmobj_obj_free(SEG(sp), t), 0);
        shmobj_ref b = put(state, SHMOBJ_VAL_BYTES(data, 512 + 128));
        assert_true(shmobj__ref_off(b) == shmobj__ref_off(a));
        assert_int_equal(shmobj_obj_get(SEG(sp), b, &v), 0);
        const void *p;
        size_t len;
        assert_int_equal(shmobj_bytes_get(&v, &p, &len), 0);
        uint64_t h = shmobj__ref_off(t) - 16;
        uint64_t at = h - (uint64_t)((const uint8_t *)p - sp->base);
        assert_true(at + 80 <= len);
        /* the same bytes again, forged where t's header was */
        assert_int_equal(shmobj_obj_free(SEG(sp), b), 0);
        forge(data + at, (uint16_t)(t >> 48), how);
        b = put(state, SHMOBJ_VAL_BYTES(data, 512 + 128));
        assert_true(shmobj__ref_off(b) == shmobj__ref_off(a));
        assert_int_equal(shmobj_obj_get(SEG(sp), b, &v), 0);
        assert_int_equal(shmobj_bytes_get(&v, &p, &len), 0);
        assert_memory_equal((const uint8_t *)p + at, data + at, 80);
        assert_int_equal(shmobj_view_follow(&l, &tv), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_obj_free(SEG(sp), c), 0);
        assert_int_equal(shmobj_obj_free(SEG(sp), b), 0);
    }
}

/* A link slot whose reference no put writes (0, an offset off the 16-byte
 * grid) is the link's own damage: SHMOBJ_ECORRUPT, not a target gone. */
static void test_link_follow_impossible_ref_ecorrupt(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref t = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(42)));
    shmobj_ref c = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_LINK(t)));
    shmobj_view v, l, tv;
    assert_int_equal(shmobj_obj_get(SEG(sp), c, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 0, &l), 0);
    _Atomic uint64_t *ref = &((struct shmobj__slot *)l.slot)->payload;
    atomic_store(ref, t + 8);
    assert_int_equal(shmobj_view_follow(&l, &tv), SHMOBJ_ECORRUPT);
    atomic_store(ref, 0);
    assert_int_equal(shmobj_view_follow(&l, &tv), SHMOBJ_ECORRUPT);
    atomic_store(ref, t);
    assert_int_equal(shmobj_view_follow(&l, &tv), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), c), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), t), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_obj_put_scalars_roundtrip),
        T(test_obj_put_str_roundtrip),
        T(test_obj_put_str_invalid_utf8),
        T(test_obj_put_bytes_roundtrip),
        T(test_obj_put_buffer_roundtrip),
        T(test_obj_put_reserved_nonzero_einval),
        T(test_obj_put_list_roundtrip),
        T(test_obj_put_dict_roundtrip),
        T(test_obj_put_dict_duplicate_key),
        T(test_view_index_short_keys),
        T(test_field_get_long_keys_found_missed_or_damaged),
        T(test_obj_size_keys_before_values_as_written),
        T(test_dict_key_medium_roundtrip_and_damage),
        T(test_field_get_key_every_length),
        T(test_tuple_of_str_packed_roundtrip_and_damage),
        T(test_tuple_below_root_packed_or_slots_one_pass),
        T(test_view_prepared_keys),
        T(test_obj_index_colliding_keys_build_lookup_check_agree),
        T(test_obj_free_paths),
        T(test_obj_put_set_roundtrip),
        T(test_obj_put_struct_roundtrip),
        T(test_view_item_wrong_type),
        T(test_int_add_updates_in_place),
        T(test_view_set_replaces_and_frees),
        T(test_obj_get_stale_ref),
        T(test_field_typed_get_by_name),
        T(test_view_ops_after_free_and_reuse_stale),
        T(test_obj_get_wrong_kind_or_foreign_ref),
        T(test_obj_put_depth_limit),
        T(test_obj_check_damaged_graph),
        T(test_obj_tuple_in_slot_read_replace_damage),
        T(test_view_json_enobufs),
        T(test_view_json_shared_string_bounded),
        T(test_view_json_doubles_shortest),
        T(test_dtype_names),
        cmocka_unit_test(test_obj_cross_process_build_read_mutate),
        cmocka_unit_test(test_int_add_two_processes_no_lost_increment),
        T(test_int_add_threads_no_lost_increment),
        cmocka_unit_test(test_obj_get_stale_across_processes),
        cmocka_unit_test(test_view_set_two_processes_frees_each_once),
        cmocka_unit_test(test_obj_get_other_layers_blocks_wrong_type),
        T(test_link_follow_forged_reuse_estale),
        T(test_link_follow_impossible_ref_ecorrupt),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
