/* References between objects (adopt, link) and shared shapes with their
 * records: ownership, staleness, lookups by name and position, the use
 * count that keeps a shape from being freed under its records, the
 * checker's view of damaged shapes and records, and JSON. These tests run
 * on a private test space (tests/space-heap.c), the cross-process one on a
 * segment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "shmobj.h"
#include "space-heap.h"
#include "test-util.h"

#define SEG(sp) ((shmobj_segment *)(sp))
#define OFF(r) ((r) & ((UINT64_C(1) << 48) - 1))

static int setup(void **state)
{
    *state = space_heap_create(8u << 20);
    return *state == NULL ? -1 : 0;
}

static int teardown(void **state)
{
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
}

/* ---- adopt --------------------------------------------------------------- */

/* An adopted object is read through its container as if written inline,
 * belongs to it (a direct free is refused) and goes with it. */
static void test_adopt_put_container_owns_object(void **state)
{
    struct shmobj__space *sp = *state;
    uint64_t live0 = space_heap_live(sp);
    shmobj_ref inner = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(7), SHMOBJ_VAL_STR("seven")));
    shmobj_ref outer = put(state, SHMOBJ_VAL_DICT_OF(SHMOBJ_VAL_STR("inner"), SHMOBJ_VAL_ADOPT(inner),
                                                     SHMOBJ_VAL_STR("n"), SHMOBJ_VAL_INT(1)));
    shmobj_view v, it, x;
    int64_t i;
    assert_int_equal(shmobj_obj_get(SEG(sp), outer, &v), 0);
    assert_int_equal(shmobj_field_get(&v, "inner", &it), 0);
    assert_int_equal(shmobj_view_type(&it), SHMOBJ_TYPE_LIST);
    assert_int_equal(shmobj_view_item(&it, 0, &x), 0);
    assert_int_equal(shmobj_int_get(&x, &i), 0);
    assert_int_equal(i, 7);
    json_is(&v, "{\"inner\":[7,\"seven\"],\"n\":1}");
    /* owned by the container now */
    assert_int_equal(shmobj_obj_free(SEG(sp), inner), SHMOBJ_EACCES);
    assert_int_equal(space_heap_live(sp), live0 + 2);
    assert_int_equal(shmobj_obj_free(SEG(sp), outer), 0);
    /* freeing the container freed what it adopted */
    assert_int_equal(space_heap_live(sp), live0);
    assert_int_equal(shmobj_obj_get(SEG(sp), inner, &v), SHMOBJ_ESTALE);
}

/* An object can have one owner: a second adoption is refused, also twice
 * in one description, and a refused put takes its marks back. */
static void test_adopt_put_owned_twice_eowned(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref a = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1)));
    shmobj_ref b = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(2)));
    shmobj_ref r = 0;
    uint64_t live = space_heap_live(sp);
    shmobj_value twice = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_ADOPT(b), SHMOBJ_VAL_ADOPT(a),
                                            SHMOBJ_VAL_ADOPT(a));
    assert_int_equal(shmobj_obj_put(SEG(sp), &twice, &r), SHMOBJ_EOWNED);
    assert_int_equal(space_heap_live(sp), live);
    /* neither stayed marked: both can be adopted, and freed, still */
    shmobj_ref c1 = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_ADOPT(a), SHMOBJ_VAL_ADOPT(b)));
    shmobj_value again = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_ADOPT(a));
    assert_int_equal(shmobj_obj_put(SEG(sp), &again, &r), SHMOBJ_EOWNED);
    assert_int_equal(shmobj_obj_free(SEG(sp), c1), 0);
    assert_int_equal(space_heap_live(sp), live - 2);
}

/* What cannot be adopted: a shape, a scalar top-level value, nothing. */
static void test_adopt_put_shape_or_scalar_refused(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_field f[] = {{"x", SHMOBJ_TYPE_INT, 0, 0}};
    shmobj_ref shape, r, n = put(state, SHMOBJ_VAL_INT(5));
    assert_int_equal(shmobj_shape_put(SEG(sp), f, 1, &shape), 0);
    shmobj_value v = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_ADOPT(shape));
    assert_int_equal(shmobj_obj_put(SEG(sp), &v, &r), SHMOBJ_ETYPE);
    v = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_ADOPT(n));
    assert_int_equal(shmobj_obj_put(SEG(sp), &v, &r), SHMOBJ_ETYPE);
    v = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_ADOPT(SHMOBJ_REF_NULL));
    assert_int_equal(shmobj_obj_put(SEG(sp), &v, &r), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_obj_free(SEG(sp), n), 0);
    v = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_ADOPT(n));
    assert_int_equal(shmobj_obj_put(SEG(sp), &v, &r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
}

/* A replaced adopted item is freed like any separate block. */
static void test_adopt_view_set_frees_adopted(void **state)
{
    struct shmobj__space *sp = *state;
    uint64_t live0 = space_heap_live(sp);
    shmobj_ref a = put(state, SHMOBJ_VAL_STR("adopted"));
    shmobj_ref c = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_ADOPT(a)));
    shmobj_view v, it;
    assert_int_equal(shmobj_obj_get(SEG(sp), c, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 0, &it), 0);
    shmobj_value nul = SHMOBJ_VAL_NULL;
    assert_int_equal(shmobj_view_set(&it, &nul), 0);
    assert_int_equal(space_heap_live(sp), live0 + 1);
    assert_int_equal(shmobj_obj_get(SEG(sp), a, &v), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_free(SEG(sp), c), 0);
}

/* ---- link ---------------------------------------------------------------- */

/* Following a link gives its target while it lives and SHMOBJ_ESTALE once
 * it was freed, also after another object took its place. */
static void test_link_follow_freed_target_estale(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref t = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(42)));
    shmobj_ref c = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_LINK(t), SHMOBJ_VAL_INT(1)));
    shmobj_view v, l, tv, x;
    shmobj_ref got;
    int64_t i;
    assert_int_equal(shmobj_obj_get(SEG(sp), c, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 0, &l), 0);
    assert_int_equal(shmobj_view_type(&l), SHMOBJ_TYPE_LINK);
    assert_int_equal(shmobj_link_get(&l, &got), 0);
    assert_true(got == t);
    assert_int_equal(shmobj_view_follow(&l, &tv), 0);
    assert_int_equal(shmobj_view_item(&tv, 0, &x), 0);
    assert_int_equal(shmobj_int_get(&x, &i), 0);
    assert_int_equal(i, 42);
    /* a view that is no link is copied */
    assert_int_equal(shmobj_view_follow(&x, &tv), 0);
    assert_int_equal(shmobj_int_get(&tv, &i), 0);
    /* the link does not own its target */
    assert_int_equal(shmobj_obj_free(SEG(sp), t), 0);
    assert_int_equal(shmobj_view_follow(&l, &tv), SHMOBJ_ESTALE);
    shmobj_ref t2 = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(43)));
    assert_true(OFF(t2) == OFF(t)); /* reused in place */
    assert_int_equal(shmobj_view_follow(&l, &tv), SHMOBJ_ESTALE);
    /* a dangling link is not damage */
    assert_int_equal(shmobj_obj_check(SEG(sp), c), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), c), 0);
    /* and freeing the container left the target alone */
    assert_int_equal(shmobj_obj_get(SEG(sp), t2, &v), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), t2), 0);
}

/* Two objects linking each other: JSON marks the links, check and free
 * stay bounded, following goes round. */
static void test_link_cycle_json_check_bounded(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref t0 = put(state, SHMOBJ_VAL_INT(0));
    shmobj_ref a = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_LINK(t0)));
    shmobj_ref b = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_LINK(a)));
    shmobj_view va, l, f, g;
    char want[64];
    assert_int_equal(shmobj_obj_get(SEG(sp), a, &va), 0);
    assert_int_equal(shmobj_view_item(&va, 0, &l), 0);
    shmobj_value lb = SHMOBJ_VAL_LINK(b), i1 = SHMOBJ_VAL_INT(1);
    assert_int_equal(shmobj_view_set(&l, &i1), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_view_set(&l, &lb), 0);
    snprintf(want, sizeof want, "[{\"$link\":%llu}]", (unsigned long long)OFF(b));
    json_is(&va, want);
    assert_int_equal(shmobj_obj_check(SEG(sp), a), 0);
    assert_int_equal(shmobj_obj_check(SEG(sp), b), 0);
    /* a -> b -> a */
    assert_int_equal(shmobj_view_follow(&l, &f), 0);
    assert_int_equal(shmobj_view_item(&f, 0, &g), 0);
    assert_int_equal(shmobj_view_follow(&g, &f), 0);
    assert_ptr_equal(f.obj, va.obj);
    assert_int_equal(shmobj_obj_free(SEG(sp), a), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), b), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), t0), 0);
}

/* ---- shapes and records ---------------------------------------------------- */

static const shmobj_field player_fields[] = {
    {"id", SHMOBJ_TYPE_INT, 0, 0},
    {"name", SHMOBJ_TYPE_STR, 16, 0},
    {"health", SHMOBJ_TYPE_INT, 0, 0},
    {"pos_x", SHMOBJ_TYPE_DOUBLE, 0, 0},
    {"alive", SHMOBJ_TYPE_BOOL, 0, 0},
    {"a_rather_long_field_name", SHMOBJ_TYPE_UINT, 0, 0},
    {"inventory", SHMOBJ_TYPE_NULL, 0, 0},
};
#define PLAYER_N (sizeof player_fields / sizeof player_fields[0])

static shmobj_ref player_shape(void **state)
{
    shmobj_ref s = 0;
    assert_int_equal(shmobj_shape_put(SEG(*state), player_fields, PLAYER_N, &s), 0);
    assert_int_equal(shmobj_obj_check(SEG(*state), s), 0);
    return s;
}

static shmobj_value player(shmobj_ref shape, shmobj_value *items, int64_t id, const char *name)
{
    items[0] = SHMOBJ_VAL_INT(id);
    items[1] = SHMOBJ_VAL_STR(name);
    items[2] = SHMOBJ_VAL_INT(100);
    items[3] = SHMOBJ_VAL_DOUBLE(1.5);
    items[4] = SHMOBJ_VAL_BOOL(1);
    items[5] = SHMOBJ_VAL_UINT(9);
    items[6] = SHMOBJ_VAL_NULL;
    return SHMOBJ_VAL_RECORD(shape, items, PLAYER_N);
}

/* A record is read by name (plain, prepared key, counter by key) and by
 * position, its names come from the shape, JSON prints them. */
static void test_record_get_by_name_and_index(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref shape = player_shape(state);
    shmobj_value items[PLAYER_N];
    shmobj_ref r = put(state, player(shape, items, 7, "bob"));
    shmobj_view v, f, k;
    shmobj_key key;
    shmobj_value kd = SHMOBJ_VAL_STR("health"), kl = SHMOBJ_VAL_STR("a_rather_long_field_name");
    int64_t x, old;
    size_t n, i;
    const char *s;
    uint64_t u;
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), 0);
    assert_int_equal(shmobj_view_type(&v), SHMOBJ_TYPE_RECORD);
    assert_int_equal(shmobj_view_len(&v, &n), 0);
    assert_int_equal(n, PLAYER_N);
    assert_int_equal(shmobj_field_get(&v, "name", &f), 0);
    assert_int_equal(shmobj_str_get(&f, &s, &n), 0);
    assert_string_equal(s, "bob");
    assert_int_equal(n, 3);
    assert_int_equal(shmobj_field_get(&v, "a_rather_long_field_name", &f), 0);
    assert_int_equal(shmobj_uint_get(&f, &u), 0);
    assert_int_equal(u, 9);
    assert_int_equal(shmobj_view_get(&v, &kl, &f), 0);
    assert_int_equal(shmobj_view_index(&v, &kd, &i), 0);
    assert_int_equal(i, 2);
    assert_int_equal(shmobj_field_get(&v, "nope", &f), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_key_init(&key, &kd), 0);
    assert_int_equal(shmobj_view_index_key(&v, &key, &i), 0);
    assert_int_equal(i, 2);
    assert_int_equal(shmobj_view_key_int_add(&v, &key, 5, &old), 0);
    assert_int_equal(old, 100);
    assert_int_equal(shmobj_view_get_key(&v, &key, &f), 0);
    assert_int_equal(shmobj_int_get(&f, &x), 0);
    assert_int_equal(x, 105);
    assert_int_equal(shmobj_item_int_add(&v, 0, 1, &old), 0);
    assert_int_equal(old, 7);
    assert_int_equal(shmobj_item_int_get(&v, 0, &x), 0);
    assert_int_equal(x, 8);
    assert_int_equal(shmobj_item_int_add(&v, 1, 1, NULL), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_item_int_add(&v, PLAYER_N, 1, NULL), SHMOBJ_ERANGE);
    assert_int_equal(shmobj_view_item(&v, 3, &f), 0);
    assert_int_equal(shmobj_view_type(&f), SHMOBJ_TYPE_DOUBLE);
    assert_int_equal(shmobj_view_key(&v, 5, &k), 0);
    assert_int_equal(shmobj_str_get(&k, &s, NULL), 0);
    assert_string_equal(s, "a_rather_long_field_name");
    shmobj_ref got;
    assert_int_equal(shmobj_record_shape(&v, &got), 0);
    assert_true(got == shape);
    json_is(&v, "{\"id\":8,\"name\":\"bob\",\"health\":105,\"pos_x\":1.5,\"alive\":true,"
                "\"a_rather_long_field_name\":9,\"inventory\":null}");
    /* the object field takes any object */
    assert_int_equal(shmobj_view_item(&v, 6, &f), 0);
    shmobj_value inv = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("sword"));
    assert_int_equal(shmobj_view_set(&f, &inv), 0);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), r), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
}

/* A counter by prepared name on a record takes the same answers whatever
 * the name's length (a short key slot or a str object of the shape) and
 * however it misses: an int field adds, a field of another kind is
 * ETYPE, an unknown name ENOTFOUND, a freed record ESTALE. */
static void test_record_key_int_add_names_long_and_short(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref shape = player_shape(state);
    shmobj_value items[PLAYER_N];
    shmobj_value rec = player(shape, items, 7, "bob");
    shmobj_ref r = put(state, rec);
    static const char *const names[] = {"id", "health", "alive", "a_rather_long_field_name",
                                        "nope", "a_rather_long_name_not_there"};
    static const int want[] = {0, 0, SHMOBJ_ETYPE, SHMOBJ_ETYPE, SHMOBJ_ENOTFOUND,
                               SHMOBJ_ENOTFOUND};
    shmobj_view v;
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), 0);
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        shmobj_key k;
        shmobj_value d = SHMOBJ_VAL_STR(names[n]);
        int64_t old = -1;
        assert_int_equal(shmobj_key_init(&k, &d), 0);
        assert_int_equal(shmobj_view_key_int_add(&v, &k, 2, &old), want[n]);
        if (want[n] == 0)
            assert_int_equal(old, n == 0 ? 7 : 100);
    }
    int64_t x;
    assert_int_equal(shmobj_field_int_get(&v, "health", &x), 0);
    assert_int_equal(x, 102);
    /* the long name of an int field: a shape of one, so the field is int */
    shmobj_field lf[] = {{"a_rather_long_counter_name", SHMOBJ_TYPE_INT, 0, 0}};
    shmobj_ref ls, lr;
    assert_int_equal(shmobj_shape_put(SEG(sp), lf, 1, &ls), 0);
    shmobj_value li[] = {SHMOBJ_VAL_INT(40)};
    shmobj_value lrec = SHMOBJ_VAL_RECORD(ls, li, 1);
    assert_int_equal(shmobj_obj_put(SEG(sp), &lrec, &lr), 0);
    shmobj_view lv;
    shmobj_key lk;
    shmobj_value ld = SHMOBJ_VAL_STR("a_rather_long_counter_name");
    int64_t old = 0;
    assert_int_equal(shmobj_obj_get(SEG(sp), lr, &lv), 0);
    assert_int_equal(shmobj_key_init(&lk, &ld), 0);
    assert_int_equal(shmobj_view_key_int_add(&lv, &lk, 2, &old), 0);
    assert_int_equal(old, 40);
    assert_int_equal(shmobj_field_int_get(&lv, "a_rather_long_counter_name", &x), 0);
    assert_int_equal(x, 42);
    assert_int_equal(shmobj_obj_free(SEG(sp), lr), 0);
    assert_int_equal(shmobj_view_key_int_add(&lv, &lk, 2, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_free(SEG(sp), r), 0);
    shmobj_value idd = SHMOBJ_VAL_STR("id");
    assert_int_equal(shmobj_key_init(&lk, &idd), 0);
    assert_int_equal(shmobj_view_key_int_add(&v, &lk, 2, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_shape_free(SEG(sp), ls), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
}

/* A record costs its slots, its header and its strings' capacity; the
 * named struct of the same fields pays names and an index on top. */
static void test_record_size_within_bound(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref shape = player_shape(state);
    shmobj_value items[PLAYER_N];
    shmobj_value rec = player(shape, items, 1, "alice");
    size_t bytes, sbytes;
    assert_int_equal(shmobj_obj_size(&rec, &bytes), 0);
    /* 16 per field + 32, plus the string's capacity and its NUL */
    assert_true(bytes <= 16 * PLAYER_N + 32 + 16 + 1);
    const char *names[PLAYER_N];
    for (size_t i = 0; i < PLAYER_N; i++)
        names[i] = player_fields[i].name;
    shmobj_value st = SHMOBJ_VAL_STRUCT(items, PLAYER_N, names);
    assert_int_equal(shmobj_obj_size(&st, &sbytes), 0);
    assert_true(bytes < sbytes);
    shmobj_ref r = put(state, rec);
    assert_int_equal(shmobj_obj_free(SEG(sp), r), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
}

/* The E1 benchmark's record of a shape (doc/benchmarks.md): two URLs in a
 * tuple, a double, an int, a bool and 4 KiB of bytes. Its block and the
 * arena's 16-byte block header take at most 16 per field + 32 + the bytes
 * of its strings and bytes, each with its NUL (the format's strings are
 * NUL-terminated): the record's own header, the tuple's and the root
 * slot's cost nothing beyond the 32. It reads back whole and checks. */
static void test_record_e1_shape_within_bound(void **state)
{
    struct shmobj__space *sp = *state;
    static const shmobj_field e1[] = {
        {"websites", SHMOBJ_TYPE_NULL, 0, 0},
        {"avg_salary", SHMOBJ_TYPE_DOUBLE, 0, 0},
        {"employees", SHMOBJ_TYPE_INT, 0, 0},
        {"in_a_good_state", SHMOBJ_TYPE_BOOL, 0, 0},
        {"data", SHMOBJ_TYPE_BYTES, 4096, 0},
    };
    static uint8_t data[4096];
    const char *u0 = "https://a.example.com", *u1 = "https://b.example.com";
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 31 + 7);
    shmobj_ref shape;
    assert_int_equal(shmobj_shape_put(SEG(sp), e1, 5, &shape), 0);
    const shmobj_value items[5] = {
        SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR(u0), SHMOBJ_VAL_STR(u1)),
        SHMOBJ_VAL_DOUBLE(3000.0), SHMOBJ_VAL_INT(10), SHMOBJ_VAL_BOOL(1),
        SHMOBJ_VAL_BYTES(data, sizeof data),
    };
    shmobj_value rec = SHMOBJ_VAL_RECORD(shape, items, 5);
    size_t bytes;
    assert_int_equal(shmobj_obj_size(&rec, &bytes), 0);
    size_t strings = strlen(u0) + 1 + strlen(u1) + 1 + sizeof data + 1;
    assert_true(bytes + 16 <= 16 * 5 + 32 + strings);
    shmobj_ref r = put(state, rec);
    shmobj_view v, f, it;
    const char *s;
    const void *p;
    size_t n;
    double d;
    int64_t x;
    int b;
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), 0);
    assert_int_equal(v.type, SHMOBJ_TYPE_RECORD);
    assert_int_equal(shmobj_field_get(&v, "websites", &f), 0);
    assert_int_equal(shmobj_view_len(&f, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(shmobj_view_item(&f, 0, &it), 0);
    assert_int_equal(shmobj_str_get(&it, &s, &n), 0);
    assert_string_equal(s, u0);
    assert_int_equal(shmobj_view_item(&f, 1, &it), 0);
    assert_int_equal(shmobj_str_get(&it, &s, &n), 0);
    assert_string_equal(s, u1);
    assert_int_equal(shmobj_field_get(&v, "avg_salary", &f), 0);
    assert_int_equal(shmobj_double_get(&f, &d), 0);
    assert_true(d == 3000.0);
    assert_int_equal(shmobj_field_get(&v, "employees", &f), 0);
    assert_int_equal(shmobj_int_get(&f, &x), 0);
    assert_int_equal(x, 10);
    assert_int_equal(shmobj_field_get(&v, "in_a_good_state", &f), 0);
    assert_int_equal(shmobj_bool_get(&f, &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(shmobj_field_get(&v, "data", &f), 0);
    assert_int_equal(shmobj_bytes_get(&f, &p, &n), 0);
    assert_int_equal(n, sizeof data);
    assert_memory_equal(p, data, sizeof data);
    assert_int_equal(shmobj_obj_free(SEG(sp), r), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
}

/* A record alone written by format version 2 (its tree header of the
 * usual kind, the record's own header at 16 in the root slot's place, its
 * slots from 32) is still read, checked and freed: made here from a
 * version 3 record's bytes. */
static void test_record_alone_version2_still_read(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref shape = player_shape(state);
    shmobj_value items[PLAYER_N];
    shmobj_value rec = player(shape, items, 7, "dan");
    size_t n3;
    assert_int_equal(shmobj_obj_size(&rec, &n3), 0);
    shmobj_ref r3 = put(state, rec), r2;
    assert_int_equal(sp->ops->alloc(sp, n3 + 16, 16, &r2), 0);
    uint8_t *b3 = sp->base + OFF(r3), *b2 = sp->base + OFF(r2);
    uint64_t size2 = n3 + 16;
    memcpy(b2, b3, 8);
    b2[4] = 2; /* version 2, ROOTREC kept */
    b2[5] = 0;
    memcpy(b2 + 8, &size2, 8);
    struct {
        uint8_t tag, flags, dtype, ndim;
        uint32_t count;
        uint64_t shape;
    } h = {SHMOBJ_TYPE_RECORD, 0, 0, 0, PLAYER_N, shape};
    memcpy(b2 + 16, &h, 16);
    memcpy(b2 + 32, b3 + 16, n3 - 16);
    /* the name's bytes moved 16 further: its slot's block offset too */
    uint64_t at;
    memcpy(&at, b2 + 32 + 16 + 8, 8);
    at += 16;
    memcpy(b2 + 32 + 16 + 8, &at, 8);
    shmobj_view v, f;
    const char *name;
    int64_t id;
    assert_int_equal(shmobj_obj_get(SEG(sp), r2, &v), 0);
    assert_int_equal(v.type, SHMOBJ_TYPE_RECORD);
    assert_int_equal(shmobj_field_get(&v, "name", &f), 0);
    assert_int_equal(shmobj_str_get(&f, &name, NULL), 0);
    assert_string_equal(name, "dan");
    assert_int_equal(shmobj_field_int_get(&v, "id", &id), 0);
    assert_int_equal(id, 7);
    assert_int_equal(shmobj_obj_check(SEG(sp), r2), 0);
    /* the version 3 record's use is the one the version 2 record gives
     * back: its block goes without a walk, the other's with one */
    assert_int_equal(sp->ops->free(sp, r3), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), r2), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
}

struct player_c {
    int64_t id;
    char name[16];
    double pos_x;
    bool alive;
    shmobj_ref inventory;
    shmobj_ref friend_;
};

/* A C program publishes its own struct through a field table, in one
 * call; the object field adopts a reference, the link links. */
static void test_record_put_struct_reads_c_struct(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_field f[] = {
        SHMOBJ_FIELD_OF(struct player_c, id, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_STR_OF(struct player_c, name),
        SHMOBJ_FIELD_OF(struct player_c, pos_x, SHMOBJ_TYPE_DOUBLE),
        SHMOBJ_FIELD_OF(struct player_c, alive, SHMOBJ_TYPE_BOOL),
        SHMOBJ_FIELD_OF(struct player_c, inventory, SHMOBJ_TYPE_NULL),
        SHMOBJ_FIELD_OF(struct player_c, friend_, SHMOBJ_TYPE_LINK),
    };
    shmobj_ref shape, r, r2;
    uint64_t live0 = space_heap_live(sp);
    assert_int_equal(shmobj_shape_put(SEG(sp), f, 6, &shape), 0);
    shmobj_ref inv = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("sword")));
    shmobj_ref pal = put(state, SHMOBJ_VAL_STR("pal"));
    struct player_c c = {.id = 3, .pos_x = -2.5, .alive = true, .inventory = inv, .friend_ = pal};
    memcpy(c.name, "sixteen-bytes-xx", 16); /* fills the array: no NUL */
    assert_int_equal(shmobj_record_put_struct(SEG(sp), shape, &c, &r), 0);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), 0);
    shmobj_view v, fv;
    char want[256];
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), 0);
    snprintf(want, sizeof want,
             "{\"id\":3,\"name\":\"sixteen-bytes-xx\",\"pos_x\":-2.5,\"alive\":true,"
             "\"inventory\":[\"sword\"],\"friend_\":{\"$link\":%llu}}",
             (unsigned long long)OFF(pal));
    json_is(&v, want);
    assert_int_equal(shmobj_field_get(&v, "friend_", &fv), 0);
    assert_int_equal(shmobj_view_follow(&fv, &fv), 0);
    assert_int_equal(shmobj_view_type(&fv), SHMOBJ_TYPE_STR);
    /* the inventory is the record's now */
    assert_int_equal(shmobj_record_put_struct(SEG(sp), shape, &c, &r2), SHMOBJ_EOWNED);
    c.inventory = SHMOBJ_REF_NULL;
    c.friend_ = SHMOBJ_REF_NULL;
    assert_int_equal(shmobj_record_put_struct(SEG(sp), shape, &c, &r2), SHMOBJ_EINVAL);
    c.friend_ = pal;
    strcpy(c.name, "short");
    assert_int_equal(shmobj_record_put_struct(SEG(sp), shape, &c, &r2), 0);
    assert_int_equal(shmobj_obj_get(SEG(sp), r2, &v), 0);
    snprintf(want, sizeof want,
             "{\"id\":3,\"name\":\"short\",\"pos_x\":-2.5,\"alive\":true,"
             "\"inventory\":null,\"friend_\":{\"$link\":%llu}}",
             (unsigned long long)OFF(pal));
    json_is(&v, want);
    assert_int_equal(shmobj_obj_free(SEG(sp), r), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), r2), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), pal), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
    assert_int_equal(space_heap_live(sp), live0);
}

/* The shape's field descriptors, as doc/format-object.md lays them out:
 * the shape at byte 32 of its block (after the tree header and the root
 * slot), its descriptors 16 bytes each from the shape's byte 32, the kind
 * at 0, the capacity at 4, the C offset at 8. */
static uint8_t *shape_desc(struct shmobj__space *sp, shmobj_ref shape, unsigned i)
{
    return sp->base + OFF(shape) + 32 + 32 + 16 * i;
}

/* What the README says a record costs: a 16-byte slot per field and a
 * 16-byte header, in a heap block with a 16-byte header of its own. A C
 * struct of five 8-byte fields (40 bytes) takes 112 bytes of heap. */
struct cost_row {
    int64_t id, count;
    double x, y;
    int64_t flags;
};

static void test_record_put_fields_costs_slots_and_header(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_field f[] = {SHMOBJ_FIELD_OF(struct cost_row, id, SHMOBJ_TYPE_INT),
                        SHMOBJ_FIELD_OF(struct cost_row, count, SHMOBJ_TYPE_INT),
                        SHMOBJ_FIELD_OF(struct cost_row, x, SHMOBJ_TYPE_DOUBLE),
                        SHMOBJ_FIELD_OF(struct cost_row, y, SHMOBJ_TYPE_DOUBLE),
                        SHMOBJ_FIELD_OF(struct cost_row, flags, SHMOBJ_TYPE_INT)};
    shmobj_ref shape, rec;
    assert_int_equal(shmobj_shape_put(SEG(sp), f, 5, &shape), 0);
    struct cost_row r = {1, 2, 3.0, 4.0, 5};
    assert_int_equal(sizeof r, 40);
    assert_int_equal(shmobj_record_put_fields(SEG(sp), shape, f, 5, &r, &rec), 0);
    uint64_t usable = 0;
    assert_int_equal(sp->ops->check(sp, rec, &usable), 0);
    assert_int_equal(usable, 16 * 5 + 16);
    shmobj_view v, x;
    assert_int_equal(shmobj_obj_get(SEG(sp), rec, &v), 0);
    assert_int_equal(shmobj_field_get(&v, "y", &x), 0);
    double y;
    assert_int_equal(shmobj_double_get(&x, &y), 0);
    assert_true(y == 4.0);
    assert_int_equal(shmobj_obj_free(SEG(sp), rec), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
}

/* shmobj_record_put_fields() reads the caller's struct where the caller's
 * own table says: a shape whose recorded offsets were damaged (here, far
 * outside any struct: shmobj_record_put_struct() would read there) still
 * gives the right record; a damaged kind or capacity, a table of another
 * length or kind is refused, and nothing is allocated. */
static void test_record_put_fields_reads_only_callers_table(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_field f[] = {
        SHMOBJ_FIELD_OF(struct player_c, id, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_STR_OF(struct player_c, name),
        SHMOBJ_FIELD_OF(struct player_c, pos_x, SHMOBJ_TYPE_DOUBLE),
        SHMOBJ_FIELD_OF(struct player_c, alive, SHMOBJ_TYPE_BOOL),
        SHMOBJ_FIELD_OF(struct player_c, inventory, SHMOBJ_TYPE_NULL),
        SHMOBJ_FIELD_OF(struct player_c, friend_, SHMOBJ_TYPE_LINK),
    };
    shmobj_ref shape, r, r2;
    assert_int_equal(shmobj_shape_put(SEG(sp), f, 6, &shape), 0);
    shmobj_ref pal = put(state, SHMOBJ_VAL_STR("pal"));
    struct player_c c = {.id = 3, .name = "ann", .pos_x = 1.5, .alive = true, .friend_ = pal};
    uint64_t far = UINT64_C(1) << 40;
    for (unsigned i = 0; i < 6; i++)
        memcpy(shape_desc(sp, shape, i) + 8, &far, 8);
    uint64_t live0 = space_heap_live(sp);
    assert_int_equal(shmobj_record_put_fields(SEG(sp), shape, f, 6, &c, &r), 0);
    shmobj_view v;
    char want[256];
    assert_int_equal(shmobj_obj_get(SEG(sp), r, &v), 0);
    snprintf(want, sizeof want,
             "{\"id\":3,\"name\":\"ann\",\"pos_x\":1.5,\"alive\":true,"
             "\"inventory\":null,\"friend_\":{\"$link\":%llu}}",
             (unsigned long long)OFF(pal));
    json_is(&v, want);
    assert_int_equal(shmobj_obj_free(SEG(sp), r), 0);
    /* a table that is not the shape's */
    assert_int_equal(shmobj_record_put_fields(SEG(sp), shape, f, 5, &c, &r2), SHMOBJ_EINVAL);
    shmobj_field g[6];
    memcpy(g, f, sizeof g);
    g[2].kind = SHMOBJ_TYPE_INT;
    assert_int_equal(shmobj_record_put_fields(SEG(sp), shape, g, 6, &c, &r2), SHMOBJ_EINVAL);
    memcpy(g, f, sizeof g);
    g[1].capacity = 8;
    assert_int_equal(shmobj_record_put_fields(SEG(sp), shape, g, 6, &c, &r2), SHMOBJ_EINVAL);
    /* a damaged kind (the id's integer would be read as a string pointer)
     * and a damaged capacity are refused */
    uint8_t *k0 = shape_desc(sp, shape, 0);
    k0[0] = SHMOBJ_TYPE_STR;
    assert_int_equal(shmobj_record_put_fields(SEG(sp), shape, f, 6, &c, &r2), SHMOBJ_EINVAL);
    k0[0] = SHMOBJ_TYPE_INT;
    uint32_t cap = 4096;
    memcpy(shape_desc(sp, shape, 1) + 4, &cap, 4);
    assert_int_equal(shmobj_record_put_fields(SEG(sp), shape, f, 6, &c, &r2), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_record_put_fields(SEG(sp), shape, NULL, 6, &c, &r2), SHMOBJ_EINVAL);
    assert_int_equal(space_heap_live(sp), live0);
    assert_int_equal(shmobj_obj_free(SEG(sp), pal), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
}

/* Values that do not fit the shape are refused. */
static void test_record_put_mismatch_einval(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref shape = player_shape(state), r;
    shmobj_value items[PLAYER_N];
    shmobj_value rec = player(shape, items, 1, "x");
    rec.v.r.count = PLAYER_N - 1;
    assert_int_equal(shmobj_obj_put(SEG(sp), &rec, &r), SHMOBJ_EINVAL);
    rec = player(shape, items, 1, "a name longer than 16");
    assert_int_equal(shmobj_obj_put(SEG(sp), &rec, &r), SHMOBJ_EINVAL);
    rec = player(shape, items, 1, "x");
    items[0] = SHMOBJ_VAL_UINT(1);
    assert_int_equal(shmobj_obj_put(SEG(sp), &rec, &r), SHMOBJ_EINVAL);
    rec = player(shape, items, 1, "x");
    items[6] = SHMOBJ_VAL_INT(1);
    assert_int_equal(shmobj_obj_put(SEG(sp), &rec, &r), SHMOBJ_EINVAL);
    rec = player(shape, items, 1, "x");
    rec.v.r.shape = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1)));
    assert_int_equal(shmobj_obj_put(SEG(sp), &rec, &r), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_obj_free(SEG(sp), rec.v.r.shape), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
}

static void test_shape_put_bad_fields_einval(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref s;
    shmobj_field dup[] = {{"a", SHMOBJ_TYPE_INT, 0, 0}, {"a", SHMOBJ_TYPE_INT, 0, 0}};
    shmobj_field kind[] = {{"a", SHMOBJ_TYPE_LIST, 0, 0}};
    shmobj_field cap[] = {{"a", SHMOBJ_TYPE_INT, 8, 0}};
    shmobj_field noname[] = {{NULL, SHMOBJ_TYPE_INT, 0, 0}};
    uint64_t live = space_heap_live(sp);
    assert_int_equal(shmobj_shape_put(SEG(sp), dup, 2, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_shape_put(SEG(sp), kind, 1, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_shape_put(SEG(sp), cap, 1, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_shape_put(SEG(sp), noname, 1, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_shape_put(SEG(sp), dup, 0, &s), SHMOBJ_EINVAL);
    assert_int_equal(space_heap_live(sp), live);
}

/* A shape in use cannot be freed; every way a record goes gives its use
 * back: a free, a free of the list holding it, a replacement. */
static void test_shape_free_in_use_einuse(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref shape = player_shape(state), r;
    shmobj_value items[3][PLAYER_N], recs[3];
    for (int i = 0; i < 3; i++)
        recs[i] = player(shape, items[i], i, "p");
    shmobj_ref one = put(state, recs[0]);
    shmobj_ref list = put(state, SHMOBJ_VAL_LIST(recs, 3));
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), SHMOBJ_EINUSE);
    assert_int_equal(shmobj_obj_free(SEG(sp), one), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), SHMOBJ_EINUSE);
    /* replace two of the list's records by null: their uses go at once */
    shmobj_view v, it;
    shmobj_value nul = SHMOBJ_VAL_NULL;
    assert_int_equal(shmobj_obj_get(SEG(sp), list, &v), 0);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(shmobj_view_item(&v, i, &it), 0);
        assert_int_equal(shmobj_view_set(&it, &nul), 0);
    }
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), SHMOBJ_EINUSE);
    assert_int_equal(shmobj_obj_free(SEG(sp), list), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), shape), 0); /* obj_free of a shape: the same */
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_put(SEG(sp), &recs[0], &r), SHMOBJ_ESTALE);
    shmobj_ref notshape = put(state, SHMOBJ_VAL_INT(1));
    assert_int_equal(shmobj_shape_free(SEG(sp), notshape), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_obj_free(SEG(sp), notshape), 0);
}

/* A record alone gives its shape's use back once, however often its
 * reference is freed: a second free, before or after its block was
 * reused, is SHMOBJ_ESTALE and leaves the other records' uses alone. */
static void test_record_free_twice_gives_one_use_back(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref shape = player_shape(state);
    shmobj_value items[2][PLAYER_N];
    shmobj_ref a = put(state, player(shape, items[0], 1, "a"));
    shmobj_ref b = put(state, player(shape, items[1], 2, "b"));
    assert_int_equal(shmobj_obj_free(SEG(sp), a), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), a), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), SHMOBJ_EINUSE);
    shmobj_ref c = put(state, player(shape, items[0], 3, "c"));
    assert_int_equal(OFF(c), OFF(a)); /* its block again */
    assert_int_equal(shmobj_obj_free(SEG(sp), a), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_obj_free(SEG(sp), b), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), SHMOBJ_EINUSE);
    assert_int_equal(shmobj_obj_free(SEG(sp), c), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
}

/* The checker holds records to their shape and shapes to themselves. */
static void test_record_check_damage_ecorrupt(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_ref shape = player_shape(state);
    shmobj_value items[PLAYER_N];
    shmobj_ref r = put(state, player(shape, items, 1, "bob"));
    uint8_t *rec = sp->base + OFF(r); /* a record alone: the tree header is its header */
    uint8_t *shp = sp->base + OFF(shape) + 32; /* the shape object */
    uint8_t save[16];
    /* a slot of the wrong kind: the INT id as a DOUBLE */
    assert_int_equal(rec[16], SHMOBJ_TYPE_INT);
    rec[16] = SHMOBJ_TYPE_DOUBLE;
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    rec[16] = SHMOBJ_TYPE_INT;
    /* a count other than the shape's (a record in a list has a header of
     * its own) */
    shmobj_value inlist = SHMOBJ_VAL_LIST_OF(player(shape, items, 2, "carol"));
    shmobj_ref lr = put(state, inlist);
    shmobj_view v, lv;
    assert_int_equal(shmobj_obj_get(SEG(sp), lr, &lv), 0);
    assert_int_equal(shmobj_view_item(&lv, 0, &v), 0);
    uint8_t *lrec = (uint8_t *)v.obj;
    assert_int_equal(lrec[0], SHMOBJ_TYPE_RECORD);
    lrec[4] = PLAYER_N - 1;
    assert_int_equal(shmobj_view_item(&lv, 0, &v), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_check(SEG(sp), lr), SHMOBJ_ECORRUPT);
    lrec[4] = PLAYER_N;
    assert_int_equal(shmobj_obj_check(SEG(sp), lr), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), lr), 0);
    /* a shape reference that names another object */
    memcpy(save, rec, 16);
    shmobj_ref other = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1)));
    memcpy(rec + 8, &other, 8);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    memcpy(rec, save, 16);
    /* the string longer than the shape's capacity */
    uint8_t *name = rec + 16 + 16;
    uint32_t len;
    memcpy(&len, name + 4, 4);
    assert_int_equal(len, 3);
    len = 17;
    memcpy(name + 4, &len, 4);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    len = 3;
    memcpy(name + 4, &len, 4);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), 0);
    /* a damaged shape: a field kind no shape has, then a name index entry */
    uint8_t *desc0 = shp + 32; /* after the header and the use count */
    assert_int_equal(desc0[0], SHMOBJ_TYPE_INT);
    desc0[0] = 0x77;
    assert_int_equal(shmobj_obj_check(SEG(sp), shape), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), SHMOBJ_ECORRUPT);
    desc0[0] = SHMOBJ_TYPE_INT;
    uint8_t *ix = shp + 32 + 32 * PLAYER_N;
    uint64_t e0;
    size_t pos = 0;
    while (memcpy(&e0, ix + 8 * pos, 8), e0 == 0)
        pos++;
    uint64_t bad = e0 ^ 1;
    memcpy(ix + 8 * pos, &bad, 8);
    assert_int_equal(shmobj_obj_check(SEG(sp), shape), SHMOBJ_ECORRUPT);
    memcpy(ix + 8 * pos, &e0, 8);
    assert_int_equal(shmobj_obj_check(SEG(sp), r), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), other), 0);
    assert_int_equal(shmobj_obj_free(SEG(sp), r), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
}

/* Many records in one put (past the log of uses a put keeps) and records
 * nested in records: every use is taken, and given back by the free; a put
 * that fails late (an adopted object owned already) takes none. */
static void test_shape_uses_many_records_counted(void **state)
{
    struct shmobj__space *sp = *state;
    enum { N = 40 };
    shmobj_ref shape = player_shape(state), r;
    static shmobj_value items[N][PLAYER_N], inner[PLAYER_N], recs[N + 1];
    for (int i = 0; i < N; i++)
        recs[i] = player(shape, items[i], i, "p");
    /* the last one holds another record in its object field */
    items[N - 1][6] = player(shape, inner, 99, "inner");
    shmobj_ref list = put(state, SHMOBJ_VAL_LIST(recs, N));
    shmobj_view v, it, f;
    int64_t x;
    assert_int_equal(shmobj_obj_get(SEG(sp), list, &v), 0);
    assert_int_equal(shmobj_view_item(&v, N - 1, &it), 0);
    assert_int_equal(shmobj_field_get(&it, "inventory", &f), 0);
    assert_int_equal(shmobj_view_type(&f), SHMOBJ_TYPE_RECORD);
    assert_int_equal(shmobj_item_int_get(&f, 0, &x), 0);
    assert_int_equal(x, 99);
    /* a put that fails after its records were written takes no use */
    shmobj_ref owned = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1)));
    shmobj_ref owner = put(state, SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_ADOPT(owned)));
    recs[N] = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_ADOPT(owned));
    uint64_t live = space_heap_live(sp);
    assert_int_equal(shmobj_obj_put(SEG(sp), &SHMOBJ_VAL_LIST(recs, N + 1), &r), SHMOBJ_EOWNED);
    assert_int_equal(space_heap_live(sp), live);
    assert_int_equal(shmobj_obj_free(SEG(sp), owner), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), SHMOBJ_EINUSE);
    assert_int_equal(shmobj_obj_free(SEG(sp), list), 0);
    assert_int_equal(shmobj_shape_free(SEG(sp), shape), 0);
}

/* A shape prints its names and kinds. */
static void test_shape_json_names_kinds(void **state)
{
    struct shmobj__space *sp = *state;
    shmobj_field f[] = {{"id", SHMOBJ_TYPE_INT, 0, 0},
                        {"a_longer_name", SHMOBJ_TYPE_STR, 4, 0},
                        {"next", SHMOBJ_TYPE_LINK, 0, 0}};
    shmobj_ref s;
    shmobj_view v, k;
    size_t n;
    assert_int_equal(shmobj_shape_put(SEG(sp), f, 3, &s), 0);
    assert_int_equal(shmobj_obj_get(SEG(sp), s, &v), 0);
    assert_int_equal(shmobj_view_type(&v), SHMOBJ_TYPE_SHAPE);
    assert_int_equal(shmobj_view_len(&v, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(shmobj_view_key(&v, 1, &k), 0);
    json_is(&k, "\"a_longer_name\"");
    json_is(&v, "{\"$shape\":{\"id\":\"int\",\"a_longer_name\":\"str\",\"next\":\"link\"}}");
    assert_int_equal(shmobj_shape_free(SEG(sp), s), 0);
}

struct race {
    struct shmobj__space *sp;
    shmobj_ref shape;
    _Atomic int freed;   /* the shape's free succeeded */
    int after_free_ok;   /* puts that succeeded after the free was seen */
};

static int race_putter(void *p)
{
    struct race *r = p;
    shmobj_value items[PLAYER_N];
    shmobj_value rec = player(r->shape, items, 1, "racer");
    for (int i = 0; i < 20000; i++) {
        int seen = atomic_load(&r->freed);
        shmobj_ref ref;
        int rc = shmobj_obj_put(SEG(r->sp), &rec, &ref);
        if (rc == SHMOBJ_ESTALE || rc == SHMOBJ_EINVAL)
            return 0; /* the shape is gone (or its block reused) */
        if (rc != 0)
            return 1;
        if (seen)
            r->after_free_ok++;
        if (shmobj_obj_check(SEG(r->sp), ref) != 0 || shmobj_obj_free(SEG(r->sp), ref) != 0)
            return 2;
    }
    return 0;
}

static int race_freer(void *p)
{
    struct race *r = p;
    for (int i = 0; i < 1000000; i++) {
        int rc = shmobj_shape_free(SEG(r->sp), r->shape);
        if (rc == 0) {
            atomic_store(&r->freed, 1);
            return 0;
        }
        if (rc != SHMOBJ_EINUSE)
            return 1;
    }
    return 3; /* the putter never let go: impossible, it frees each record */
}

/* A shape freed while another thread puts and frees records of it: the
 * free waits for a moment without records, and from then on every put is
 * refused; no record ever names a freed shape. */
static void test_shape_free_threads_racing_put(void **state)
{
    (void)state;
    char name[96];
    shmobj_segment_options o;
    shmobj_segment *seg = NULL;
    shmobj_view v;
    /* a segment: the test space has no lock for two threads */
    test_name(name, sizeof name, "race");
    shmobj_segment_options_init(&o);
    o.initial_size = 4u << 20;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    struct race r = {(struct shmobj__space *)seg, 0, 0, 0};
    assert_int_equal(shmobj_shape_put(seg, player_fields, PLAYER_N, &r.shape), 0);
    struct test_thread t[2];
    assert_int_equal(test_thread_start(&t[0], race_putter, &r), 0);
    assert_int_equal(test_thread_start(&t[1], race_freer, &r), 0);
    assert_int_equal(test_thread_wait(&t[0]), 0);
    assert_int_equal(test_thread_wait(&t[1]), 0);
    assert_int_equal(atomic_load(&r.freed), 1);
    assert_int_equal(r.after_free_ok, 0);
    assert_int_not_equal(shmobj_obj_get(seg, r.shape, &v), 0);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* ---- across processes ------------------------------------------------------ */

struct xp_arg {
    char name[96];
};

#define XP_ROUNDS 20000

static int xp_child(void *arg)
{
    struct xp_arg *a = arg;
    shmobj_segment *seg;
    shmobj_ref ref;
    shmobj_view v;
    shmobj_key k;
    shmobj_value kd = SHMOBJ_VAL_STR("health");
    if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 5000 * TEST_MS, &seg) != 0)
        return 10;
    if (shmobj_segment_root_wait(seg, "rec", 5000 * TEST_MS, &ref) != 0 ||
        shmobj_obj_get(seg, ref, &v) != 0 || shmobj_key_init(&k, &kd) != 0)
        return 11;
    for (int i = 0; i < XP_ROUNDS; i++)
        if (shmobj_view_key_int_add(&v, &k, 1, NULL) != 0)
            return 12;
    shmobj_segment_close(seg);
    return 0;
}

/* Two processes add to a record's field by prepared name: nothing lost,
 * and the shape, put by one process, is read by the other. */
static void test_record_key_int_add_two_processes(void **state)
{
    (void)state;
    struct xp_arg a;
    shmobj_segment_options o;
    shmobj_segment *seg = NULL;
    shmobj_ref shape, ref;
    shmobj_value items[PLAYER_N];
    shmobj_view v;
    shmobj_key k;
    shmobj_value kd = SHMOBJ_VAL_STR("health");
    int64_t x;
    test_name(a.name, sizeof a.name, "shape");
    shmobj_segment_options_init(&o);
    o.initial_size = 4u << 20;
    assert_int_equal(shmobj_segment_create(a.name, &o, &seg), 0);
    assert_int_equal(shmobj_shape_put(seg, player_fields, PLAYER_N, &shape), 0);
    shmobj_value rec = player(shape, items, 1, "bob");
    assert_int_equal(shmobj_obj_put(seg, &rec, &ref), 0);
    pid_t pid = test_child_start(xp_child, &a, 60);
    assert_int_equal(shmobj_segment_root_set(seg, "rec", ref), 0);
    assert_int_equal(shmobj_obj_get(seg, ref, &v), 0);
    assert_int_equal(shmobj_key_init(&k, &kd), 0);
    for (int i = 0; i < XP_ROUNDS; i++)
        assert_int_equal(shmobj_view_key_int_add(&v, &k, 1, NULL), 0);
    assert_int_equal(test_child_wait(pid), 0);
    assert_int_equal(shmobj_item_int_get(&v, 2, &x), 0);
    assert_int_equal(x, 100 + 2 * XP_ROUNDS);
    assert_int_equal(shmobj_obj_check(seg, ref), 0);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(a.name, SHMOBJ_BACKEND_SHM), 0);
}

/* ---- a process killed between the steps ------------------------------------ */

struct kill_shared {
    _Atomic uint64_t published; /* the child's newest record, 0 before */
    _Atomic int started;
};

struct kill_arg {
    char name[96];
    shmobj_ref shape;
    struct kill_shared *sh;
};

/* Put records of the shape, publish each, free the one before: killed at
 * any instruction. */
static int kill_child(void *p)
{
    struct kill_arg *a = p;
    shmobj_segment *seg;
    shmobj_value items[PLAYER_N];
    if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 5000 * TEST_MS, &seg) != 0)
        return 10;
    shmobj_value rec = player(a->shape, items, 5, "killed");
    atomic_store(&a->sh->started, 1);
    for (;;) {
        shmobj_ref r, old = atomic_load(&a->sh->published);
        if (shmobj_obj_put(seg, &rec, &r) != 0)
            return 11;
        atomic_store(&a->sh->published, r);
        if (old != 0 && shmobj_obj_free(seg, old) != 0)
            return 12;
    }
}

/* Whenever the killed process stopped, the record it published is whole
 * and holds its use (the shape's free is refused while it lives); once it
 * is freed the shape frees, or stays allocated for good when the kill
 * landed between a use taken and a record published (a leak, never a
 * record naming a freed shape). */
static void test_shape_uses_process_killed_anywhere(void **state)
{
    (void)state;
    struct kill_arg a;
    shmobj_segment_options o;
    shmobj_segment *seg = NULL;
    int freed = 0, leaked = 0;
    test_name(a.name, sizeof a.name, "kill");
    shmobj_segment_options_init(&o);
    o.initial_size = 4u << 20;
    assert_int_equal(shmobj_segment_create(a.name, &o, &seg), 0);
    a.sh = mmap(NULL, sizeof *a.sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(a.sh != MAP_FAILED);
    uint64_t rng = 0x5eed;
    for (int round = 0; round < 20; round++) {
        assert_int_equal(shmobj_shape_put(seg, player_fields, PLAYER_N, &a.shape), 0);
        atomic_store(&a.sh->published, 0);
        atomic_store(&a.sh->started, 0);
        pid_t pid = test_child_start(kill_child, &a, 30);
        for (int w = 0; w < 5000 && !atomic_load(&a.sh->started); w++)
            test_sleep_ms(1);
        test_sleep_ms((unsigned)(test_xorshift(&rng) % 5));
        kill(pid, SIGKILL);
        assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
        shmobj_ref r = atomic_load(&a.sh->published);
        if (r != 0) {
            shmobj_view v;
            int64_t x;
            assert_int_equal(shmobj_obj_check(seg, r), 0);
            assert_int_equal(shmobj_obj_get(seg, r, &v), 0);
            assert_int_equal(shmobj_item_int_get(&v, 0, &x), 0);
            assert_int_equal(x, 5);
            assert_int_equal(shmobj_shape_free(seg, a.shape), SHMOBJ_EINUSE);
            assert_int_equal(shmobj_obj_free(seg, r), 0);
        }
        int rc = shmobj_shape_free(seg, a.shape);
        assert_true(rc == 0 || rc == SHMOBJ_EINUSE);
        if (rc == 0)
            freed++;
        else
            leaked++;
    }
    /* a kill lands inside a put now and then, not every time */
    assert_int_equal(freed + leaked, 20);
    assert_true(freed > 0);
    munmap(a.sh, sizeof *a.sh);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(a.name, SHMOBJ_BACKEND_SHM), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* A record's any-object field given a tuple of strings holds it packed
 * (its header in the field's slot, the strings' bytes after the record's
 * own), so the record alone costs 16 per field + 16 + the strings' bytes
 * and NULs; its items read back, and the field stays replaceable like any
 * object field. */
static void test_record_tuple_of_str_packed_replaceable(void **state)
{
    shmobj_ref shape = player_shape(state);
    shmobj_value items[PLAYER_N];
    shmobj_value rec = player(shape, items, 1, "alice");
    items[6] = SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("https://a.example.com"),
                                   SHMOBJ_VAL_STR("https://b.example.com"));
    size_t bytes;
    assert_int_equal(shmobj_obj_size(&rec, &bytes), 0);
    /* 16 per field + 16 (the tree header is the record's), the name
     * "alice" and its NUL, then 21 + 1 bytes twice (the tuple's header is
     * in its slot) */
    assert_int_equal(bytes, 16 * PLAYER_N + 16 + 6 + 44);
    shmobj_ref r = put(state, rec);
    shmobj_view v, f, it;
    const char *s;
    size_t n;
    assert_int_equal(shmobj_obj_get(SEG(*state), r, &v), 0);
    assert_int_equal(shmobj_field_get(&v, "inventory", &f), 0);
    assert_int_equal(f.type, SHMOBJ_TYPE_TUPLE);
    assert_int_equal(shmobj_view_len(&f, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(shmobj_view_item(&f, 1, &it), 0);
    assert_int_equal(shmobj_str_get(&it, &s, &n), 0);
    assert_string_equal(s, "https://b.example.com");
    shmobj_value list = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(5));
    assert_int_equal(shmobj_view_set(&f, &list), 0);
    assert_int_equal(shmobj_field_get(&v, "inventory", &f), 0);
    assert_int_equal(f.type, SHMOBJ_TYPE_LIST);
    assert_int_equal(shmobj_obj_check(SEG(*state), r), 0);
    assert_int_equal(shmobj_obj_free(SEG(*state), r), 0);
    assert_int_equal(shmobj_shape_free(SEG(*state), shape), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_adopt_put_container_owns_object),
        T(test_record_tuple_of_str_packed_replaceable),
        T(test_adopt_put_owned_twice_eowned),
        T(test_adopt_put_shape_or_scalar_refused),
        T(test_adopt_view_set_frees_adopted),
        T(test_link_follow_freed_target_estale),
        T(test_link_cycle_json_check_bounded),
        T(test_record_get_by_name_and_index),
        T(test_record_key_int_add_names_long_and_short),
        T(test_record_size_within_bound),
        T(test_record_e1_shape_within_bound),
        T(test_record_alone_version2_still_read),
        T(test_record_put_struct_reads_c_struct),
        T(test_record_put_fields_reads_only_callers_table),
        T(test_record_put_fields_costs_slots_and_header),
        T(test_record_put_mismatch_einval),
        T(test_shape_put_bad_fields_einval),
        T(test_shape_free_in_use_einuse),
        T(test_record_free_twice_gives_one_use_back),
        T(test_record_check_damage_ecorrupt),
        T(test_shape_uses_many_records_counted),
        T(test_shape_json_names_kinds),
        cmocka_unit_test(test_shape_free_threads_racing_put),
        cmocka_unit_test(test_record_key_int_add_two_processes),
        cmocka_unit_test(test_shape_uses_process_killed_anywhere),

    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
