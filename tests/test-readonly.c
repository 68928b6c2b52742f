/* Read-only handles: a segment attached for reading only.
 *
 * What these cases hold:
 * - a handle opened with SHMOBJ_SEGMENT_RDONLY (or by a process that may
 *   only read the object, or through a read-only descriptor) reads every
 *   kind of value, map, queue and topic, and every call that would write
 *   says SHMOBJ_ERDONLY;
 * - nothing it does changes a byte of the segment (the backing object is
 *   hashed before and after while no writer runs);
 * - a writer is never held up by it, even while it is stopped in the
 *   middle of its reads (it takes no lock and pins nothing);
 * - it sees what a writer adds after the segment grew;
 * - as another user (root drops to nobody in a child) a 0644 segment is
 *   attached read-only by the plain open, and a 0600 one not at all.
 * Each case forks the read-only side, so the parent's own handle is the
 * only writer. */
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "shmobj.h"
#include "test-util.h"

#define SEC (INT64_C(1000000000))
#define CHILD_SECONDS 60
#define MAP_KEYS 200
#define QUEUE_MSGS 3
/* The child's exit code when it could not become the stranger. */
#define CHILD_SETUP_FAILED 250

/* A failed check in a child: say where, and exit with 1. */
#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,  \
                    #cond);                                                  \
            return 1;                                                        \
        }                                                                    \
    } while (0)
#define CHECK_RC(call, want)                                                 \
    do {                                                                     \
        int rc_ = (call);                                                    \
        if (rc_ != (want)) {                                                 \
            fprintf(stderr, "%s:%d: %s gave %s, not %s\n", __FILE__, __LINE__, \
                    #call, shmobj_errname(rc_), shmobj_errname(want));       \
            return 1;                                                        \
        }                                                                    \
    } while (0)

struct rec {
    int64_t x;
    double y;
};

static const shmobj_field rec_fields[] = {
    {"x", SHMOBJ_TYPE_INT, 0, offsetof(struct rec, x)},
    {"y", SHMOBJ_TYPE_DOUBLE, 0, offsetof(struct rec, y)},
};

struct fixture {
    char name[128];
    shmobj_segment *seg;
    shmobj_ref shape;
    shmobj_ref msgs[QUEUE_MSGS];
};

static void put_root(shmobj_segment *seg, const char *root, shmobj_ref ref)
{
    assert_int_equal(shmobj_segment_root_set(seg, root, ref), 0);
}

/* A segment holding one of each: a fixed dict with nested values, a
 * growable list, a mutable dict and set, a record, a map, a queue with
 * messages and a topic with messages. */
static void fixture_make(struct fixture *f, unsigned mode, uint64_t size,
                         uint64_t max)
{
    test_name(f->name, sizeof f->name, "rdonly");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.mode = mode;
    o.initial_size = size;
    o.max_size = max;
    assert_int_equal(shmobj_segment_create(f->name, &o, &f->seg), 0);
    shmobj_segment *seg = f->seg;
    shmobj_ref ref;

    const shmobj_value list[] = {SHMOBJ_VAL_INT(1), SHMOBJ_VAL_INT(2),
                                 SHMOBJ_VAL_INT(3)};
    const shmobj_value kv[] = {
        SHMOBJ_VAL_STR("n"), SHMOBJ_VAL_INT(5),
        SHMOBJ_VAL_STR("s"), SHMOBJ_VAL_STR("hello"),
        SHMOBJ_VAL_STR("l"), SHMOBJ_VAL_LIST(list, 3),
        SHMOBJ_VAL_STR("d"), SHMOBJ_VAL_DOUBLE(1.5),
        SHMOBJ_VAL_STR("b"), SHMOBJ_VAL_BYTES("\x01\x02\x03", 3),
    };
    const shmobj_value dict = SHMOBJ_VAL_DICT(kv, 5);
    assert_int_equal(shmobj_obj_put(seg, &dict, &ref), 0);
    put_root(seg, "obj", ref);

    shmobj_view v;
    const shmobj_value ml = SHMOBJ_VAL_MLIST();
    assert_int_equal(shmobj_obj_put(seg, &ml, &ref), 0);
    assert_int_equal(shmobj_obj_get(seg, ref, &v), 0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(shmobj_mlist_append(&v, &SHMOBJ_VAL_INT(i + 1)), 0);
    put_root(seg, "ml", ref);

    const shmobj_value md = SHMOBJ_VAL_MDICT();
    assert_int_equal(shmobj_obj_put(seg, &md, &ref), 0);
    assert_int_equal(shmobj_obj_get(seg, ref, &v), 0);
    assert_int_equal(shmobj_mdict_set(&v, &SHMOBJ_VAL_STR("a"), &SHMOBJ_VAL_INT(1)), 0);
    assert_int_equal(shmobj_mdict_set(&v, &SHMOBJ_VAL_STR("b"), &SHMOBJ_VAL_INT(2)), 0);
    put_root(seg, "md", ref);

    const shmobj_value ms = SHMOBJ_VAL_MSET();
    assert_int_equal(shmobj_obj_put(seg, &ms, &ref), 0);
    assert_int_equal(shmobj_obj_get(seg, ref, &v), 0);
    assert_int_equal(shmobj_mset_add(&v, &SHMOBJ_VAL_INT(7)), 0);
    put_root(seg, "ms", ref);

    assert_int_equal(shmobj_shape_put(seg, rec_fields, 2, &f->shape), 0);
    struct rec r = {42, 2.5};
    assert_int_equal(shmobj_record_put_struct(seg, f->shape, &r, &ref), 0);
    put_root(seg, "rec", ref);

    /* a table of two rows of the same struct */
    assert_int_equal(shmobj_table_put(seg, f->shape, sizeof(struct rec), 4, &ref), 0);
    assert_int_equal(shmobj_obj_get(seg, ref, &v), 0);
    struct rec rows[2] = {{5, 0.5}, {6, 1.5}};
    assert_int_equal(shmobj_table_append(&v, rows, 2, sizeof(struct rec), NULL), 0);
    put_root(seg, "tab", ref);

    /* a service: its table and its queue of calls */
    shmobj_service *svc;
    assert_int_equal(shmobj_service_create(seg, "svc", 4, 0, &svc), 0);
    shmobj_service_close(svc);

    shmobj_map *m;
    assert_int_equal(shmobj_map_create(seg, "m", &m), 0);
    for (int i = 0; i < MAP_KEYS; i++) {
        char key[32];
        int64_t val = i * 3;
        int n = snprintf(key, sizeof key, "key-%d", i);
        assert_int_equal(shmobj_map_set(m, key, (size_t)n, &val, sizeof val), 0);
    }
    shmobj_map_close(m);

    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(seg, "q", 16, 0, &q), 0);
    for (int i = 0; i < QUEUE_MSGS; i++) {
        assert_int_equal(shmobj_obj_put_int(seg, 100 + i, &f->msgs[i]), 0);
        assert_int_equal(shmobj_queue_put(q, f->msgs[i]), 0);
    }
    shmobj_queue_close(q);

    shmobj_topic *t;
    shmobj_topic_config cfg;
    shmobj_topic_config_init(&cfg);
    cfg.capacity = 8;
    cfg.history = 4;
    assert_int_equal(shmobj_topic_create(seg, "t", &cfg, &t), 0);
    assert_int_equal(shmobj_topic_publish(t, "one", 3, 0), 0);
    assert_int_equal(shmobj_topic_publish(t, "two", 3, 0), 0);
    shmobj_topic_close(t);
}

static void fixture_drop(struct fixture *f)
{
    shmobj_segment_close(f->seg);
    (void)shmobj_segment_destroy(f->name, SHMOBJ_BACKEND_SHM);
}

/* FNV-1a of every byte of the backing object, read through a descriptor
 * (not a mapping: the hash itself must not change what it hashes). */
static uint64_t object_hash(shmobj_segment *seg)
{
    int fd;
    assert_int_equal(shmobj_segment_fd(seg, &fd), 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    static unsigned char buf[1 << 16];
    for (off_t off = 0; off < st.st_size;) {
        ssize_t n = pread(fd, buf, sizeof buf, off);
        assert_true(n > 0);
        for (ssize_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * UINT64_C(0x100000001b3);
        off += n;
    }
    return h;
}

/* ---- what a read-only handle reads ------------------------------------- */

static int read_objects(shmobj_segment *seg)
{
    shmobj_ref ref;
    shmobj_view v, it;
    int64_t x;
    double d;
    size_t n;
    const char *s;

    CHECK_RC(shmobj_segment_root_get(seg, "obj", &ref), 0);
    CHECK_RC(shmobj_obj_check(seg, ref), 0);
    CHECK_RC(shmobj_obj_get(seg, ref, &v), 0);
    CHECK_RC(shmobj_view_get_str(&v, "n", &it), 0);
    CHECK_RC(shmobj_int_get(&it, &x), 0);
    CHECK(x == 5);
    CHECK_RC(shmobj_view_get_str(&v, "s", &it), 0);
    CHECK_RC(shmobj_str_get(&it, &s, &n), 0);
    CHECK(n == 5 && memcmp(s, "hello", 5) == 0);
    CHECK_RC(shmobj_view_get_str(&v, "d", &it), 0);
    CHECK_RC(shmobj_double_get(&it, &d), 0);
    CHECK(d == 1.5);
    CHECK_RC(shmobj_view_get_str(&v, "l", &it), 0);
    CHECK_RC(shmobj_view_len(&it, &n), 0);
    CHECK(n == 3);
    CHECK_RC(shmobj_item_int_get(&it, 2, &x), 0);
    CHECK(x == 3);
    char json[512];
    CHECK_RC(shmobj_view_json(&v, json, sizeof json, &n), 0);
    CHECK(strstr(json, "\"hello\"") != NULL);

    CHECK_RC(shmobj_segment_root_get(seg, "ml", &ref), 0);
    CHECK_RC(shmobj_obj_get(seg, ref, &v), 0);
    CHECK_RC(shmobj_view_len(&v, &n), 0);
    CHECK(n == 10);
    CHECK_RC(shmobj_mlist_get_int(&v, 4, &x), 0);
    CHECK(x == 5);
    CHECK_RC(shmobj_mlist_get(&v, 9, &it), 0);
    CHECK_RC(shmobj_int_get(&it, &x), 0);
    CHECK(x == 10);
    CHECK_RC(shmobj_view_json(&v, json, sizeof json, &n), 0);
    CHECK_RC(shmobj_obj_check(seg, ref), 0);

    CHECK_RC(shmobj_segment_root_get(seg, "md", &ref), 0);
    CHECK_RC(shmobj_obj_get(seg, ref, &v), 0);
    shmobj_key key;
    CHECK_RC(shmobj_key_init(&key, &SHMOBJ_VAL_STR("b")), 0);
    CHECK_RC(shmobj_mdict_get_int(&v, &key, &x), 0);
    CHECK(x == 2);
    CHECK_RC(shmobj_mdict_get(&v, &SHMOBJ_VAL_STR("a"), &it), 0);
    CHECK_RC(shmobj_mut_contains(&v, &SHMOBJ_VAL_STR("a")), 0);
    CHECK_RC(shmobj_mut_contains(&v, &SHMOBJ_VAL_STR("zz")), SHMOBJ_ENOTFOUND);
    shmobj_miter mi;
    shmobj_view mk, mv;
    unsigned pairs = 0;
    CHECK_RC(shmobj_miter_init(&v, &mi), 0);
    while (shmobj_miter_next(&mi, &mk, &mv) == 0)
        pairs++;
    CHECK(pairs == 2);
    CHECK_RC(shmobj_view_json(&v, json, sizeof json, &n), 0);
    CHECK(strstr(json, "\"a\"") != NULL);

    CHECK_RC(shmobj_segment_root_get(seg, "ms", &ref), 0);
    CHECK_RC(shmobj_obj_get(seg, ref, &v), 0);
    CHECK_RC(shmobj_mut_contains(&v, &SHMOBJ_VAL_INT(7)), 0);

    CHECK_RC(shmobj_segment_root_get(seg, "rec", &ref), 0);
    CHECK_RC(shmobj_obj_get(seg, ref, &v), 0);
    CHECK_RC(shmobj_field_int_get(&v, "x", &x), 0);
    CHECK(x == 42);
    CHECK_RC(shmobj_field_double_get(&v, "y", &d), 0);
    CHECK(d == 2.5);
    return 0;
}

static int read_map(shmobj_segment *seg)
{
    shmobj_map *m;
    CHECK_RC(shmobj_map_open(seg, "m", &m), 0);
    for (int i = 0; i < MAP_KEYS; i++) {
        char key[32];
        int64_t val = -1;
        size_t vlen = 0;
        int n = snprintf(key, sizeof key, "key-%d", i);
        CHECK_RC(shmobj_map_get(m, key, (size_t)n, &val, sizeof val, &vlen), 0);
        CHECK(vlen == sizeof val && val == i * 3);
    }
    CHECK_RC(shmobj_map_get(m, "absent", 6, NULL, 0, NULL), SHMOBJ_ENOTFOUND);
    CHECK_RC(shmobj_map_contains(m, "key-7", 5), 0);
    uint64_t count;
    CHECK_RC(shmobj_map_count(m, &count), 0);
    CHECK(count == MAP_KEYS);
    shmobj_map_iter *it;
    CHECK_RC(shmobj_map_iter_open(m, &it), 0);
    const void *k, *val;
    size_t klen, vlen;
    unsigned seen = 0;
    int64_t sum = 0;
    int rc;
    while ((rc = shmobj_map_iter_next(it, &k, &klen, &val, &vlen)) == 0) {
        int64_t x;
        CHECK(vlen == sizeof x && klen > 4 && memcmp(k, "key-", 4) == 0);
        memcpy(&x, val, sizeof x);
        sum += x;
        seen++;
    }
    CHECK_RC(rc, SHMOBJ_ENOTFOUND);
    shmobj_map_iter_close(it);
    CHECK(seen == MAP_KEYS);
    CHECK(sum == 3 * (int64_t)MAP_KEYS * (MAP_KEYS - 1) / 2);
    shmobj_map_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK_RC(shmobj_map_stats_get(m, &st), 0);
    CHECK(st.count == MAP_KEYS);
    CHECK_RC(shmobj_map_check(m), 0);
    shmobj_map_close(m);
    return 0;
}

static int read_queue_topic(shmobj_segment *seg, const shmobj_ref *msgs)
{
    shmobj_queue *q;
    shmobj_ref ref;
    uint64_t count;
    CHECK_RC(shmobj_queue_open(seg, "q", &q), 0);
    CHECK_RC(shmobj_queue_try_peek(q, &ref), 0);
    CHECK(ref == msgs[0]);
    CHECK_RC(shmobj_queue_peek_timed(q, &ref, 10 * TEST_MS), 0);
    CHECK(ref == msgs[0]);
    CHECK(shmobj_queue_has_messages(q));
    CHECK_RC(shmobj_queue_count(q, &count), 0);
    CHECK(count == QUEUE_MSGS);
    shmobj_queue_stats qs;
    memset(&qs, 0, sizeof qs);
    qs.struct_size = sizeof qs;
    CHECK_RC(shmobj_queue_stats_get(q, &qs), 0);
    CHECK(qs.depth == QUEUE_MSGS && qs.puts == QUEUE_MSGS);
    CHECK_RC(shmobj_queue_check(q, NULL), 0);
    shmobj_queue_close(q);

    shmobj_topic *t;
    CHECK_RC(shmobj_topic_open(seg, "t", &t), 0);
    shmobj_topic_stats ts;
    CHECK_RC(shmobj_topic_stats_get(t, &ts), 0);
    CHECK(ts.published == 2);
    shmobj_topic_close(t);
    return 0;
}

static int read_segment(shmobj_segment *seg)
{
    shmobj_segment_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK_RC(shmobj_segment_info_get(seg, &info), 0);
    CHECK(info.flags & SHMOBJ_SEGMENT_INFO_READONLY);
    CHECK(info.attached == 1); /* the writer's handle, not this one */
    shmobj_segment_proc procs[4];
    size_t n;
    CHECK_RC(shmobj_segment_procs_get(seg, procs, 4, &n), 0);
    CHECK(n == 1 && !(procs[0].flags & SHMOBJ_SEGMENT_PROC_SELF));
    uint32_t cursor = 0;
    unsigned roots = 0;
    shmobj_root_info ri;
    memset(&ri, 0, sizeof ri);
    ri.struct_size = sizeof ri;
    while (shmobj_segment_root_next(seg, &cursor, &ri) == 0)
        roots++;
    CHECK(roots == 11); /* obj ml md ms rec tab svc svc/calls m q t */
    shmobj_ref ref;
    CHECK_RC(shmobj_segment_root_wait(seg, "obj", 0, &ref), 0);
    CHECK_RC(shmobj_segment_root_wait(seg, "nope", 10 * TEST_MS, &ref),
             SHMOBJ_ETIMEDOUT);
    shmobj_arena_stats as;
    memset(&as, 0, sizeof as);
    as.struct_size = sizeof as;
    CHECK_RC(shmobj_arena_stats_get(seg, &as), 0);
    CHECK(as.used_bytes > 0);
    CHECK_RC(shmobj_arena_check(seg, NULL), 0);
    CHECK_RC(shmobj_segment_prefault(seg), 0);
    CHECK_RC(shmobj_segment_wait_attached(seg, 1, 0), 0);
    return 0;
}

/* ---- what a read-only handle may not do ------------------------------- */

static int writes_refused(shmobj_segment *seg, shmobj_ref shape)
{
    const int E = SHMOBJ_ERDONLY;
    shmobj_ref ref, any;
    shmobj_view v, it;
    int64_t x = 0;
    void *p;

    CHECK_RC(shmobj_segment_root_get(seg, "obj", &any), 0);
    CHECK_RC(shmobj_segment_root_set(seg, "new", any), E);
    CHECK_RC(shmobj_segment_root_add(seg, "new", any), E);
    CHECK_RC(shmobj_segment_root_del(seg, "obj"), E);
    CHECK_RC(shmobj_arena_alloc(seg, 64, 0, &ref, &p), E);
    CHECK_RC(shmobj_arena_free(seg, any), E);
    CHECK_RC(shmobj_obj_put_int(seg, 1, &ref), E);
    CHECK_RC(shmobj_obj_put_str(seg, "x", 1, &ref), E);
    CHECK_RC(shmobj_obj_free(seg, any), E);
    CHECK_RC(shmobj_shape_put(seg, rec_fields, 2, &ref), E);
    CHECK_RC(shmobj_shape_free(seg, shape), E);
    struct rec r = {1, 1.0};
    CHECK_RC(shmobj_record_put_struct(seg, shape, &r, &ref), E);

    CHECK_RC(shmobj_obj_get(seg, any, &v), 0);
    CHECK_RC(shmobj_view_get_str(&v, "n", &it), 0);
    CHECK_RC(shmobj_int_set(&it, 9), E);
    CHECK_RC(shmobj_int_add(&it, 1, NULL), E);
    CHECK_RC(shmobj_int_cas(&it, &x, 3), E);
    CHECK_RC(shmobj_view_set(&it, &SHMOBJ_VAL_INT(3)), E);
    shmobj_key key;
    CHECK_RC(shmobj_key_init(&key, &SHMOBJ_VAL_STR("n")), 0);
    CHECK_RC(shmobj_view_key_int_add(&v, &key, 1, NULL), E);
    CHECK_RC(shmobj_view_get_str(&v, "d", &it), 0);
    CHECK_RC(shmobj_double_set(&it, 2.0), E);
    CHECK_RC(shmobj_double_add(&it, 2.0, NULL), E);
    CHECK_RC(shmobj_view_get_str(&v, "l", &it), 0);
    CHECK_RC(shmobj_item_int_add(&it, 0, 1, NULL), E);

    CHECK_RC(shmobj_segment_root_get(seg, "rec", &ref), 0);
    CHECK_RC(shmobj_obj_get(seg, ref, &v), 0);
    CHECK_RC(shmobj_key_init(&key, &SHMOBJ_VAL_STR("x")), 0);
    CHECK_RC(shmobj_view_key_int_add(&v, &key, 1, NULL), E);

    /* a service: opened (its repair writes nothing), no call, take or
     * repair */
    shmobj_service *svc;
    shmobj_service_msg msg = {.data = "x", .len = 1, .flags = SHMOBJ_SERVICE_BYTES}, got;
    uint32_t pending = 0;
    CHECK_RC(shmobj_service_create(seg, "svc2", 4, 0, &svc), E);
    CHECK_RC(shmobj_service_open(seg, "svc", 0, &svc), 0);
    CHECK_RC(shmobj_service_pending(svc, &pending), 0);
    CHECK_RC(shmobj_service_call(svc, &msg, 1000000, &got), E);
    CHECK_RC(shmobj_service_take(svc, 0, &got), E);
    CHECK_RC(shmobj_service_repair(svc, NULL), E);
    shmobj_service_close(svc);

    /* a table: its rows read, nothing appended or changed */
    CHECK_RC(shmobj_segment_root_get(seg, "tab", &ref), 0);
    CHECK_RC(shmobj_obj_get(seg, ref, &v), 0);
    uint64_t rows = 0;
    struct rec row;
    double d = 0;
    CHECK_RC(shmobj_table_len(&v, &rows), 0);
    CHECK(rows == 2);
    CHECK_RC(shmobj_table_get(&v, 1, &row, sizeof row), 0);
    CHECK(row.x == 6);
    CHECK_RC(shmobj_table_int_get(&v, 0, 0, &x), 0);
    CHECK(x == 5);
    CHECK_RC(shmobj_table_append(&v, &row, 1, sizeof row, NULL), E);
    CHECK_RC(shmobj_table_int_set(&v, 0, 0, 9), E);
    CHECK_RC(shmobj_table_int_add(&v, 0, 0, 1, NULL), E);
    CHECK_RC(shmobj_table_int_cas(&v, 0, 0, &x, 3), E);
    CHECK_RC(shmobj_table_double_set(&v, 0, 1, 2.0), E);
    CHECK_RC(shmobj_table_double_add(&v, 0, 1, 2.0, &d), E);
    CHECK_RC(shmobj_table_put(seg, shape, sizeof row, 4, &ref), E);
    CHECK_RC(shmobj_table_int_get(&v, 0, 0, &x), 0);
    CHECK(x == 5);

    CHECK_RC(shmobj_segment_root_get(seg, "ml", &ref), 0);
    CHECK_RC(shmobj_obj_get(seg, ref, &v), 0);
    CHECK_RC(shmobj_mlist_append(&v, &SHMOBJ_VAL_INT(1)), E);
    CHECK_RC(shmobj_mlist_append(&v, &SHMOBJ_VAL_STR("a longer string item")), E);
    CHECK_RC(shmobj_mlist_insert(&v, 0, &SHMOBJ_VAL_INT(1)), E);
    CHECK_RC(shmobj_mlist_set(&v, 0, &SHMOBJ_VAL_INT(1)), E);
    CHECK_RC(shmobj_mlist_delete(&v, 0), E);
    CHECK_RC(shmobj_mlist_pop(&v, -1, &ref), E);
    CHECK_RC(shmobj_mut_clear(&v), E);

    CHECK_RC(shmobj_segment_root_get(seg, "md", &ref), 0);
    CHECK_RC(shmobj_obj_get(seg, ref, &v), 0);
    CHECK_RC(shmobj_mdict_set(&v, &SHMOBJ_VAL_STR("c"), &SHMOBJ_VAL_INT(3)), E);
    CHECK_RC(shmobj_key_init(&key, &SHMOBJ_VAL_STR("a")), 0);
    CHECK_RC(shmobj_mdict_int_add(&v, &key, 1, NULL), E);
    CHECK_RC(shmobj_mut_delete(&v, &SHMOBJ_VAL_STR("a")), E);
    CHECK_RC(shmobj_mut_clear(&v), E);
    CHECK_RC(shmobj_segment_root_get(seg, "ms", &ref), 0);
    CHECK_RC(shmobj_obj_get(seg, ref, &v), 0);
    CHECK_RC(shmobj_mset_add(&v, &SHMOBJ_VAL_INT(8)), E);

    shmobj_map *m;
    CHECK_RC(shmobj_map_create(seg, "m2", &m), E);
    CHECK_RC(shmobj_map_open(seg, "m", &m), 0);
    CHECK_RC(shmobj_map_set(m, "k", 1, "v", 1), E);
    shmobj_map_set_req req = {.key = "k", .key_len = 1, .value = "v", .value_len = 1};
    CHECK_RC(shmobj_map_set_many(m, &req, 1), E);
    CHECK(req.status == E);
    CHECK_RC(shmobj_map_add(m, "key-1", 5, 1, &x), E);
    CHECK_RC(shmobj_map_del(m, "key-1", 5), E);
    CHECK_RC(shmobj_map_clear(m), E);
    shmobj_map_view mv;
    CHECK_RC(shmobj_map_get_view(m, "key-1", 5, &mv), E);
    shmobj_map_close(m);

    shmobj_queue *q;
    size_t done;
    CHECK_RC(shmobj_queue_create(seg, "q2", 16, 0, &q), E);
    CHECK_RC(shmobj_queue_destroy(seg, "q"), E);
    CHECK_RC(shmobj_queue_open(seg, "q", &q), 0);
    CHECK_RC(shmobj_queue_put(q, any), E);
    CHECK_RC(shmobj_queue_try_put(q, any), E);
    CHECK_RC(shmobj_queue_put_timed(q, any, 0), E);
    CHECK_RC(shmobj_queue_take(q, &ref), E);
    CHECK_RC(shmobj_queue_try_take(q, &ref), E);
    CHECK_RC(shmobj_queue_take_timed(q, &ref, 0), E);
    CHECK_RC(shmobj_queue_put_many(q, &any, 1, 0, &done), E);
    CHECK_RC(shmobj_queue_take_many(q, &ref, 1, 0, &done), E);
    CHECK_RC(shmobj_queue_msg_alloc(q, 64, 0, &ref, &p), E);
    CHECK_RC(shmobj_queue_put_copy(q, "abc", 3, 0, 0, &ref), E);
    CHECK_RC(shmobj_queue_put_tracked(q, any, 0), E);
    CHECK_RC(shmobj_queue_msg_done(q, any), E);
    CHECK_RC(shmobj_queue_done(q, any), E);
    CHECK_RC(shmobj_queue_trim(q), E);
    int fd;
    CHECK_RC(shmobj_queue_notify_fd(q, &fd), E);
    shmobj_queue_close(q);

    shmobj_topic *t;
    shmobj_topic_sub *sub;
    shmobj_topic_loan loan;
    CHECK_RC(shmobj_topic_create(seg, "t2", NULL, &t), E);
    CHECK_RC(shmobj_topic_destroy(seg, "t"), E);
    CHECK_RC(shmobj_topic_open(seg, "t", &t), 0);
    CHECK_RC(shmobj_topic_publish(t, "x", 1, 0), E);
    CHECK_RC(shmobj_topic_publish_ref(t, any, 8, 0), E);
    CHECK_RC(shmobj_topic_loan_get(t, 16, &loan), E);
    CHECK_RC(shmobj_topic_subscribe(t, &sub), E);
    CHECK_RC(shmobj_topic_repair(t, NULL), E);
    shmobj_topic_close(t);
    return 0;
}

struct ro_job {
    const char *name;
    shmobj_ref shape;
    const shmobj_ref *msgs;
};

static int child_read_all(void *p)
{
    const struct ro_job *job = p;
    shmobj_segment *seg;
    CHECK_RC(shmobj_segment_open_flags(job->name, SHMOBJ_BACKEND_SHM,
                                       SHMOBJ_SEGMENT_RDONLY, 0, &seg), 0);
    int rc = read_objects(seg);
    if (rc == 0)
        rc = read_map(seg);
    if (rc == 0)
        rc = read_queue_topic(seg, job->msgs);
    if (rc == 0)
        rc = read_segment(seg);
    if (rc == 0)
        rc = writes_refused(seg, job->shape);
    /* and everything still reads the same after the refusals */
    if (rc == 0)
        rc = read_objects(seg);
    shmobj_segment_close(seg);
    return rc;
}

static void test_readonly_reads_work_writes_refused_bytes_unchanged(void **state)
{
    (void)state;
    struct fixture f;
    fixture_make(&f, 0600, UINT64_C(4) << 20, UINT64_C(4) << 20);
    uint64_t before = object_hash(f.seg);
    struct ro_job job = {f.name, f.shape, f.msgs};
    int code = test_child_wait(test_child_start(child_read_all, &job, CHILD_SECONDS));
    assert_int_equal(code, 0);
    assert_true(object_hash(f.seg) == before);
    /* the writer's view is as it was: the queue still holds its messages */
    shmobj_queue *q;
    uint64_t count;
    assert_int_equal(shmobj_queue_open(f.seg, "q", &q), 0);
    assert_int_equal(shmobj_queue_count(q, &count), 0);
    assert_int_equal(count, QUEUE_MSGS);
    shmobj_queue_close(q);
    fixture_drop(&f);
}

/* Bad flags are refused before anything is opened. */
static void test_readonly_open_flags_bad_einval(void **state)
{
    (void)state;
    shmobj_segment *seg = (shmobj_segment *)&seg;
    assert_int_equal(shmobj_segment_open_flags("x", SHMOBJ_BACKEND_SHM,
                                               SHMOBJ_SEGMENT_RDONLY | SHMOBJ_SEGMENT_RDWR,
                                               0, &seg),
                     SHMOBJ_EINVAL);
    assert_null(seg);
    assert_int_equal(shmobj_segment_open_flags("x", SHMOBJ_BACKEND_SHM,
                                               SHMOBJ_SEGMENT_HUGE, 0, &seg),
                     SHMOBJ_EINVAL);
    assert_int_equal(shmobj_segment_open_flags("x", SHMOBJ_BACKEND_SHM, 1u << 20,
                                               0, &seg),
                     SHMOBJ_EINVAL);
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.flags = SHMOBJ_SEGMENT_RDONLY;
    char name[128];
    test_name(name, sizeof name, "rdcreate");
    assert_int_equal(shmobj_segment_create(name, &o, &seg), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_segment_open_flags(name, SHMOBJ_BACKEND_SHM,
                                               SHMOBJ_SEGMENT_RDONLY, 0, &seg),
                     SHMOBJ_ENOTFOUND);
}

/* A descriptor opened for reading only gives a read-only handle. */
static void test_readonly_open_fd_rdonly_descriptor(void **state)
{
    (void)state;
    struct fixture f;
    fixture_make(&f, 0600, UINT64_C(1) << 20, UINT64_C(1) << 20);
    char path[256];
    snprintf(path, sizeof path, "/%s", f.name);
    int fd = shm_open(path, O_RDONLY, 0);
    assert_true(fd >= 0);
    shmobj_segment *seg;
    assert_int_equal(shmobj_segment_open_fd(fd, 0, &seg), 0);
    close(fd);
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(seg, &info), 0);
    assert_true(info.flags & SHMOBJ_SEGMENT_INFO_READONLY);
    assert_int_equal(info.attached, 1);
    assert_int_equal(read_objects(seg), 0);
    shmobj_ref ref;
    assert_int_equal(shmobj_obj_put_int(seg, 1, &ref), SHMOBJ_ERDONLY);
    shmobj_segment_close(seg);
    /* the writer's handle is read-write */
    assert_int_equal(shmobj_segment_info_get(f.seg, &info), 0);
    assert_false(info.flags & SHMOBJ_SEGMENT_INFO_READONLY);
    fixture_drop(&f);
}

/* ---- a stopped reader holds no writer up ----------------------------- */

/* Reads everything it can, round after round, until killed. */
static int child_read_forever(void *p)
{
    const struct ro_job *job = p;
    shmobj_segment *seg;
    CHECK_RC(shmobj_segment_open_flags(job->name, SHMOBJ_BACKEND_SHM,
                                       SHMOBJ_SEGMENT_RDONLY, 0, &seg), 0);
    shmobj_map *m;
    CHECK_RC(shmobj_map_open(seg, "m", &m), 0);
    shmobj_ref ref, mlref, mdref;
    shmobj_view ml, md;
    CHECK_RC(shmobj_segment_root_get(seg, "ml", &mlref), 0);
    CHECK_RC(shmobj_obj_get(seg, mlref, &ml), 0);
    CHECK_RC(shmobj_segment_root_get(seg, "md", &mdref), 0);
    CHECK_RC(shmobj_obj_get(seg, mdref, &md), 0);
    shmobj_key key;
    CHECK_RC(shmobj_key_init(&key, &SHMOBJ_VAL_STR("a")), 0);
    for (;;) {
        int64_t x;
        size_t n;
        char val[64];
        int rc = shmobj_map_get(m, "key-5", 5, val, sizeof val, &n);
        CHECK(rc == 0 || rc == SHMOBJ_ENOTFOUND);
        /* key-7 is 21 plus the writer's round, and never missing */
        CHECK_RC(shmobj_map_get(m, "key-7", 5, &x, sizeof x, &n), 0);
        CHECK(n == sizeof x && x >= 21 && x <= 21 + 16);
        shmobj_map_iter *it;
        CHECK_RC(shmobj_map_iter_open(m, &it), 0);
        const void *k, *v;
        size_t kl, vl;
        while (shmobj_map_iter_next(it, &k, &kl, &v, &vl) == 0)
            ;
        shmobj_map_iter_close(it);
        CHECK_RC(shmobj_view_len(&ml, &n), 0);
        CHECK_RC(shmobj_mlist_get_int(&ml, 0, &x), 0);
        rc = shmobj_mdict_get_int(&md, &key, &x);
        CHECK(rc == 0 || rc == SHMOBJ_ENOTFOUND);
        CHECK_RC(shmobj_segment_root_get(seg, "obj", &ref), 0);
        /* a check meeting a change waits for it, and finds no damage */
        CHECK_RC(shmobj_obj_check(seg, mlref), 0);
        CHECK_RC(shmobj_obj_check(seg, mdref), 0);
    }
}

/* The writer's work while the reader is stopped: every kind of change
 * that takes a lock the reader's read would have had to share. */
static void writer_round(struct fixture *f, int round)
{
    shmobj_map *m;
    assert_int_equal(shmobj_map_open(f->seg, "m", &m), 0);
    for (int i = 0; i < MAP_KEYS; i++) {
        char key[32];
        int64_t val = i * 3 + round;
        int n = snprintf(key, sizeof key, "key-%d", i);
        assert_int_equal(shmobj_map_set(m, key, (size_t)n, &val, sizeof val), 0);
    }
    assert_int_equal(shmobj_map_del(m, "key-5", 5), 0);
    int64_t five = 15;
    assert_int_equal(shmobj_map_set(m, "key-5", 5, &five, sizeof five), 0);
    shmobj_map_close(m);
    shmobj_ref ref;
    shmobj_view v;
    assert_int_equal(shmobj_segment_root_get(f->seg, "ml", &ref), 0);
    assert_int_equal(shmobj_obj_get(f->seg, ref, &v), 0);
    for (int i = 0; i < 20; i++)
        assert_int_equal(shmobj_mlist_append(&v, &SHMOBJ_VAL_STR("appended while stopped")), 0);
    assert_int_equal(shmobj_mlist_set(&v, 0, &SHMOBJ_VAL_INT(round)), 0);
    assert_int_equal(shmobj_segment_root_get(f->seg, "md", &ref), 0);
    assert_int_equal(shmobj_obj_get(f->seg, ref, &v), 0);
    assert_int_equal(shmobj_mdict_set(&v, &SHMOBJ_VAL_STR("a"), &SHMOBJ_VAL_INT(round)), 0);
    assert_int_equal(shmobj_mut_delete(&v, &SHMOBJ_VAL_STR("b")), 0);
    assert_int_equal(shmobj_mdict_set(&v, &SHMOBJ_VAL_STR("b"), &SHMOBJ_VAL_INT(2)), 0);
    assert_int_equal(shmobj_obj_put_int(f->seg, round, &ref), 0);
    assert_int_equal(shmobj_segment_root_set(f->seg, "last", ref), 0);
    shmobj_arena_stats as = {.struct_size = sizeof as};
    assert_int_equal(shmobj_arena_stats_get(f->seg, &as), 0);
}

static void test_readonly_stopped_reader_never_blocks_writer(void **state)
{
    (void)state;
    struct fixture f;
    fixture_make(&f, 0600, UINT64_C(8) << 20, UINT64_C(8) << 20);
    struct ro_job job = {f.name, f.shape, f.msgs};
    pid_t pid = test_child_start(child_read_forever, &job, CHILD_SECONDS);
    test_sleep_ms(100);
    for (int round = 0; round < 8; round++) {
        /* stopped wherever its loop of reads happens to be */
        assert_int_equal(kill(pid, SIGSTOP), 0);
        uint64_t t0 = (uint64_t)clock();
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        writer_round(&f, round);
        clock_gettime(CLOCK_MONOTONIC, &b);
        (void)t0;
        double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
        /* a lock the reader held would hold this up for its 10 s bound */
        assert_true(secs < 5.0);
        assert_int_equal(kill(pid, SIGCONT), 0);
        /* and once more with the reader running: its reads retry across
         * the changes and keep finding what was there */
        writer_round(&f, round);
        test_sleep_ms(20 + (unsigned)round * 7);
    }
    /* the reader is still reading happily: it was not killed by a check */
    int status;
    assert_int_equal(waitpid(pid, &status, WNOHANG), 0);
    kill(pid, SIGKILL);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    fixture_drop(&f);
}

/* ---- growth ------------------------------------------------------------ */

struct grow_job {
    const char *name;
    int go[2];   /* parent -> child: "the segment grew" */
    int back[2]; /* child -> parent: "the handle is open" */
};

static int child_see_growth(void *p)
{
    struct grow_job *job = p;
    shmobj_segment *seg;
    CHECK_RC(shmobj_segment_open_flags(job->name, SHMOBJ_BACKEND_SHM,
                                       SHMOBJ_SEGMENT_RDONLY, 0, &seg), 0);
    shmobj_segment_info info = {.struct_size = sizeof info};
    CHECK_RC(shmobj_segment_info_get(seg, &info), 0);
    uint64_t size0 = info.size;
    char c = 'o';
    CHECK(write(job->back[1], &c, 1) == 1);
    CHECK(read(job->go[0], &c, 1) == 1);
    shmobj_ref ref;
    CHECK_RC(shmobj_segment_root_get(seg, "big", &ref), 0);
    shmobj_view v;
    CHECK_RC(shmobj_obj_get(seg, ref, &v), 0);
    const char *s;
    size_t n;
    CHECK_RC(shmobj_str_get(&v, &s, &n), 0);
    CHECK(n == (size_t)(4 << 20));
    for (size_t i = 0; i < n; i += 4096)
        CHECK(s[i] == (char)('a' + (i / 4096) % 26));
    CHECK(s[n - 1] == 'z');
    CHECK_RC(shmobj_segment_info_get(seg, &info), 0);
    CHECK(info.size > size0);
    shmobj_arena_stats as = {.struct_size = sizeof as};
    CHECK_RC(shmobj_arena_stats_get(seg, &as), 0);
    CHECK_RC(shmobj_arena_check(seg, NULL), 0);
    shmobj_segment_close(seg);
    return 0;
}

static void test_readonly_reader_sees_growth(void **state)
{
    (void)state;
    char name[128];
    test_name(name, sizeof name, "rdgrow");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = UINT64_C(256) << 10;
    o.max_size = UINT64_C(64) << 20;
    shmobj_segment *seg;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    struct grow_job job = {.name = name};
    assert_int_equal(pipe(job.go), 0);
    assert_int_equal(pipe(job.back), 0);
    pid_t pid = test_child_start(child_see_growth, &job, CHILD_SECONDS);
    char c;
    assert_int_equal(read(job.back[0], &c, 1), 1);
    size_t n = (size_t)4 << 20;
    char *big = malloc(n);
    assert_non_null(big);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)('a' + (i / 4096) % 26);
    big[n - 1] = 'z';
    shmobj_ref ref;
    assert_int_equal(shmobj_obj_put_str(seg, big, n, &ref), 0);
    free(big);
    assert_int_equal(shmobj_segment_root_set(seg, "big", ref), 0);
    assert_int_equal(write(job.go[1], "g", 1), 1);
    assert_int_equal(test_child_wait(pid), 0);
    close(job.go[0]);
    close(job.go[1]);
    close(job.back[0]);
    close(job.back[1]);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* ---- as another user ---------------------------------------------------- */

static uid_t stranger_uid = 65534;
static gid_t stranger_gid = 65534;

static int need_root(void)
{
    if (geteuid() != 0) {
        print_message("not root: the cases as another user are skipped "
                      "(CI runs them as root)\n");
        return 0;
    }
    struct passwd *pw = getpwnam("nobody");
    if (pw != NULL) {
        stranger_uid = pw->pw_uid;
        stranger_gid = pw->pw_gid;
    }
    return 1;
}

static int become_stranger(void)
{
    gid_t none = stranger_gid;
    if (setgroups(1, &none) != 0 || setgid(stranger_gid) != 0 ||
        setuid(stranger_uid) != 0 || geteuid() != stranger_uid ||
        setuid(0) == 0)
        return -1;
    return 0;
}

static int child_stranger_0644(void *p)
{
    const struct ro_job *job = p;
    if (become_stranger() != 0)
        return CHILD_SETUP_FAILED;
    shmobj_segment *seg;
    /* the plain open, with no flag: it falls back to read-only */
    CHECK_RC(shmobj_segment_open(job->name, SHMOBJ_BACKEND_SHM, 0, &seg), 0);
    int rc = read_objects(seg);
    if (rc == 0)
        rc = read_map(seg);
    if (rc == 0)
        rc = read_queue_topic(seg, job->msgs);
    if (rc == 0)
        rc = read_segment(seg);
    if (rc == 0)
        rc = writes_refused(seg, job->shape);
    shmobj_segment_close(seg);
    if (rc != 0)
        return rc;
    /* asked to write, it is refused at the door */
    CHECK_RC(shmobj_segment_open_flags(job->name, SHMOBJ_BACKEND_SHM,
                                       SHMOBJ_SEGMENT_RDWR, 0, &seg),
             SHMOBJ_EACCES);
    /* and it may not remove the name */
    CHECK(shmobj_segment_destroy(job->name, SHMOBJ_BACKEND_SHM) == SHMOBJ_EACCES);
    return 0;
}

static void test_readonly_stranger_0644_falls_back(void **state)
{
    (void)state;
    if (!need_root())
        skip();
    struct fixture f;
    fixture_make(&f, 0644, UINT64_C(4) << 20, UINT64_C(4) << 20);
    uint64_t before = object_hash(f.seg);
    struct ro_job job = {f.name, f.shape, f.msgs};
    int code = test_child_wait(test_child_start(child_stranger_0644, &job, CHILD_SECONDS));
    if (code == CHILD_SETUP_FAILED)
        fail_msg("the child could not drop to uid %u", (unsigned)stranger_uid);
    assert_int_equal(code, 0);
    assert_true(object_hash(f.seg) == before);
    fixture_drop(&f);
}

static int child_stranger_0600(void *p)
{
    const struct ro_job *job = p;
    if (become_stranger() != 0)
        return CHILD_SETUP_FAILED;
    shmobj_segment *seg;
    CHECK_RC(shmobj_segment_open(job->name, SHMOBJ_BACKEND_SHM, 0, &seg),
             SHMOBJ_EACCES);
    CHECK_RC(shmobj_segment_open_flags(job->name, SHMOBJ_BACKEND_SHM,
                                       SHMOBJ_SEGMENT_RDONLY, 0, &seg),
             SHMOBJ_EACCES);
    return 0;
}

static void test_readonly_stranger_0600_eacces(void **state)
{
    (void)state;
    if (!need_root())
        skip();
    struct fixture f;
    fixture_make(&f, 0600, UINT64_C(1) << 20, UINT64_C(1) << 20);
    struct ro_job job = {f.name, f.shape, f.msgs};
    int code = test_child_wait(test_child_start(child_stranger_0600, &job, CHILD_SECONDS));
    if (code == CHILD_SETUP_FAILED)
        fail_msg("the child could not drop to uid %u", (unsigned)stranger_uid);
    assert_int_equal(code, 0);
    fixture_drop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readonly_reads_work_writes_refused_bytes_unchanged),
        cmocka_unit_test(test_readonly_open_flags_bad_einval),
        cmocka_unit_test(test_readonly_open_fd_rdonly_descriptor),
        cmocka_unit_test(test_readonly_stopped_reader_never_blocks_writer),
        cmocka_unit_test(test_readonly_reader_sees_growth),
        cmocka_unit_test(test_readonly_stranger_0644_falls_back),
        cmocka_unit_test(test_readonly_stranger_0600_eacces),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
