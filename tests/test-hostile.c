/* Hostile segments: every call a user can make, on a segment of which one
 * 8-byte word was changed by a process with write access.
 *
 * test_hostile_sweep_every_call_documented builds one small file-backed
 * segment holding one of each kind (a map with items, a queue with
 * messages in flight and a tracked reference, a topic with history, a
 * loan and a dead subscriber's held messages, a service with calls given
 * up, waiting from a dead client and held by a dead server, every object
 * kind with the mutable list, dict and set, a shape and its records, links
 * and an adopted child, a raw block, a watch of a map key and one of the
 * dict in the watch table), closes it and keeps its bytes. Each case
 * writes those bytes with one word replaced by a hostile value (0, all
 * ones, the segment's size, the word's own offset with the word's
 * generation bits, the word plus 16: a reference one slot off, the
 * reference of a live block of another kind: a map's, a queue's, an
 * object's, a shape's, a raw block's, and the attachment token the child
 * will get: the caller's own token in a lock word, an adder, appender or
 * claim record) into a fresh file, and a forked child opens it and
 * calls every read and write path of every kind (wait-sets included). The property: each call
 * returns 0 or one of the codes its documentation (the @retval lines of
 * include/shmobj/<area>.h, read at run time) lists, and the child ends
 * (no crash, no abort, no hang: it is killed after HOSTILE_CASE_S). A
 * failure names the word's offset, the value and the call.
 *
 * Which words: every word of the segment's used extent whose value is
 * not 0, and one zero word in 16, times the hostile values; a strided
 * subset of them, HOSTILE_CASES by default (a few seconds), or
 * SHMOBJ_HOSTILE_CASES of them (0: all) with SHMOBJ_HOSTILE_SEED moving
 * the stride's start. The `shmobj` tool's ls, stat, dump and check run on
 * one case in HOSTILE_CLI_EVERY (SHMOBJ_HOSTILE_CLI_EVERY) and must exit
 * with a status of their own (0, 1 or 2), never by a signal.
 *
 * The walks of a graph grown by other processes: a list another process
 * grew far past this process's mapping is freed and printed whole
 * (test_mlist_free_grown_elsewhere_frees, test_mlist_json_grown_elsewhere
 * _prints): their work budget counts the segment as it is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "shmobj.h"
#include "space.h"
#include "test-util.h"

#define HOSTILE_CASES 300
#define HOSTILE_CLI_EVERY 50
#define HOSTILE_MULTI_CASES 200
#define HOSTILE_CASE_S 20
/* The tool's four commands: a read-only reader that meets a map shard
 * inside a writer's section (a damaged odd seq) waits up to 10 s for it,
 * then says SHMOBJ_EBUSY (it may neither lock nor repair), and dump reads
 * the map twice; 60 s still catches a hang. */
#define HOSTILE_CLI_S 60
#define SEG_BYTES (1u << 20)
#define MAX_FAILS 40

/* ---- the documented codes of each public call ----------------------------- */

struct doc {
    char name[64];
    int codes[32];
    unsigned n;
};
static struct doc docs[400];
static unsigned ndocs;

static int code_of(const char *name)
{
#define HOSTILE_CODE(n, v, t)                                                          \
    if (strcmp(name, "SHMOBJ_" #n) == 0)                                               \
        return v;
    SHMOBJ_ERRNO_MAP(HOSTILE_CODE)
#undef HOSTILE_CODE
    return 1;
}

static const struct doc *doc_of(const char *name)
{
    for (unsigned i = 0; i < ndocs; i++)
        if (strcmp(docs[i].name, name) == 0)
            return &docs[i];
    return NULL;
}

/* Read the @retval lines before each SHMOBJ_API declaration of one
 * header. */
static void docs_read(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512];
    struct doc cur = {0};
    if (f == NULL)
        fail_msg("cannot read %s", path);
    while (fgets(line, sizeof line, f) != NULL) {
        char *p;
        if (strstr(line, "/**") != NULL)
            memset(&cur, 0, sizeof cur);
        if ((p = strstr(line, "@retval SHMOBJ_E")) != NULL && cur.n < 32) {
            char code[48];
            if (sscanf(p + 8, "%47[A-Z_]", code) == 1 && code_of(code) < 0)
                cur.codes[cur.n++] = code_of(code);
        }
        /* a description copied from another call brings its codes, as
         * does "@retval others as shmobj_a() and shmobj_b()" */
        if ((p = strstr(line, "@copydetails shmobj_")) != NULL ||
            (p = strstr(line, "@copydoc shmobj_")) != NULL ||
            (p = strstr(line, "@retval others as shmobj_")) != NULL) {
            char from[64];
            const struct doc *d;
            for (p = strstr(p, "shmobj_"); p != NULL; p = strstr(p + 1, "shmobj_"))
                if (sscanf(p, "%63[a-z_]", from) == 1 && (d = doc_of(from)) != NULL)
                    for (unsigned i = 0; i < d->n && cur.n < 32; i++)
                        cur.codes[cur.n++] = d->codes[i];
        }
        if (strncmp(line, "SHMOBJ_API", 10) == 0 && (p = strstr(line, "shmobj_")) != NULL &&
            ndocs < sizeof docs / sizeof docs[0]) {
            size_t k = strcspn(p, "(");
            if (k < sizeof cur.name) {
                memcpy(cur.name, p, k);
                cur.name[k] = 0;
                docs[ndocs++] = cur;
            }
            memset(&cur, 0, sizeof cur);
        }
    }
    fclose(f);
}

static void docs_load(void)
{
    static const char *const areas[] = {"arena", "map",   "object",  "queue",
                                        "segment", "table", "topic", "service",
                                        "waitset", "watch"};
    const char *dir = getenv("SHMOBJ_HOSTILE_HEADERS");
    char path[4096];
    if (dir == NULL)
        dir = "include/shmobj";
    for (size_t i = 0; i < sizeof areas / sizeof areas[0]; i++) {
        snprintf(path, sizeof path, "%s/%s.h", dir, areas[i]);
        docs_read(path);
    }
}

/* ---- what a child reports ------------------------------------------------- */

/* Shared with the parent: the call running now, and what went wrong. */
struct report {
    uint64_t calls; /* calls made, over every case */
    uint64_t token; /* the opener's attachment token (probe_main) */
    char call[64];
    char msg[192];
};
static struct report *rep;

static void note(const char *call)
{
    rep->calls++;
    snprintf(rep->call, sizeof rep->call, "%s", call);
}

/* The call's status must be 0 or a code its documentation lists. */
static int status(const char *call, int rc)
{
    if (rc == 0)
        return 0;
    const struct doc *d = doc_of(call);
    if (d == NULL) {
        snprintf(rep->msg, sizeof rep->msg, "%s: no documentation found", call);
        _exit(3);
    }
    for (unsigned i = 0; i < d->n; i++)
        if (d->codes[i] == rc)
            return rc;
    snprintf(rep->msg, sizeof rep->msg, "%s returned %s (%d), not documented", call,
             shmobj_errname(rc), rc);
    _exit(3);
}

#define CALL(fn, ...) (note(#fn), status(#fn, fn(__VA_ARGS__)))

/* ---- the segment ---------------------------------------------------------- */

/* The shape's C struct: its records are put from one (objects()). */
struct hrec {
    int64_t id;
    char name[16];
    double score;
    shmobj_ref friend_;
};

static const shmobj_field rec_fields[] = {
    {"id", SHMOBJ_TYPE_INT, 0, offsetof(struct hrec, id)},
    {"name", SHMOBJ_TYPE_STR, 16, offsetof(struct hrec, name)},
    {"score", SHMOBJ_TYPE_DOUBLE, 0, offsetof(struct hrec, score)},
    {"friend", SHMOBJ_TYPE_LINK, 0, offsetof(struct hrec, friend_)},
};

static char dir[256];
static uint8_t *image;
static uint64_t image_len, used_end;
static shmobj_ref tracked_ref;
/* live blocks of every kind, as hostile values: a word that names one is
 * a reference of the wrong kind, not a wild one */
static shmobj_ref live_refs[12];
static unsigned nlive;

/* ---- topics and services: their records as processes left them --------- */

enum { TOPIC_MSGS = 6 };

/* A subscriber that takes one message and dies holding it. */
static int topic_dead_sub(void *arg)
{
    shmobj_segment *seg;
    shmobj_topic *t;
    shmobj_topic_sub *sub;
    shmobj_topic_msg msg;
    if (shmobj_segment_open(arg, SHMOBJ_BACKEND_FILE, 0, &seg) != 0 ||
        shmobj_topic_open(seg, "t", &t) != 0 || shmobj_topic_subscribe(t, &sub) != 0 ||
        shmobj_topic_try_take(sub, &msg) != 0)
        return 1;
    return 0; /* no release, no close: the record is a dead one's */
}

/* A client whose call waits (killed while it does). */
static int service_client(void *arg)
{
    shmobj_segment *seg;
    shmobj_service *svc;
    shmobj_service_msg req = {0, "request", 7, SHMOBJ_SERVICE_BYTES, 0}, resp;
    if (shmobj_segment_open(arg, SHMOBJ_BACKEND_FILE, 0, &seg) != 0 ||
        shmobj_service_open(seg, "s", 0, &svc) != 0)
        return 1;
    (void)shmobj_service_call(svc, &req, SHMOBJ_FOREVER, &resp);
    return 0;
}

/* A server that takes one request and dies holding it. */
static int service_dead_server(void *arg)
{
    shmobj_segment *seg;
    shmobj_service *svc;
    shmobj_service_msg req;
    if (shmobj_segment_open(arg, SHMOBJ_BACKEND_FILE, 0, &seg) != 0 ||
        shmobj_service_open(seg, "s", 0, &svc) != 0 ||
        shmobj_service_take(svc, 2 * TEST_MS * 1000, &req) != 0)
        return 1;
    return 0;
}

/* A topic with history, messages held by a dead subscriber and a loan
 * outstanding; a service with a call given up, a call taken by a server
 * that died, and a call waiting from a client that died. */
static void build_topic_service(shmobj_segment *seg, const char *path)
{
    shmobj_topic_config cfg;
    shmobj_topic_config_init(&cfg);
    cfg.capacity = 8;
    cfg.history = 3;
    cfg.subscribers = 4;
    shmobj_topic *t;
    shmobj_topic_sub *sub;
    shmobj_topic_msg msg;
    assert_int_equal(shmobj_topic_create(seg, "t", &cfg, &t), 0);
    assert_int_equal(shmobj_topic_subscribe(t, &sub), 0);
    for (int i = 0; i < TOPIC_MSGS; i++) {
        char m[32];
        int n = snprintf(m, sizeof m, "message %d of the topic", i);
        assert_int_equal(shmobj_topic_publish(t, m, (size_t)n, 0), 0);
    }
    assert_int_equal(test_child_wait(test_child_start(topic_dead_sub, (void *)path, 10)), 0);
    assert_int_equal(shmobj_topic_try_take(sub, &msg), 0);
    assert_int_equal(shmobj_topic_release(sub, &msg), 0);
    shmobj_topic_unsubscribe(sub);
    shmobj_topic_loan loan;
    assert_int_equal(shmobj_topic_loan_get(t, 48, &loan), 0);
    memset(loan.data, 'l', 48);
    shmobj_topic_close(t); /* the loan stays recorded */

    shmobj_service *svc;
    shmobj_service_msg req = {0, "given up", 8, SHMOBJ_SERVICE_BYTES, 0}, resp;
    assert_int_equal(shmobj_service_create(seg, "s", 4, 0, &svc), 0);
    assert_int_equal(shmobj_service_call(svc, &req, TEST_MS, &resp), SHMOBJ_ETIMEDOUT);
    pid_t client = test_child_start(service_client, (void *)path, 10);
    test_sleep_ms(50);
    assert_int_equal(test_child_wait(test_child_start(service_dead_server, (void *)path, 10)),
                     0);
    kill(client, SIGKILL);
    test_child_wait(client);
    client = test_child_start(service_client, (void *)path, 10);
    test_sleep_ms(50);
    kill(client, SIGKILL);
    test_child_wait(client);
    shmobj_service_close(svc);
}

/* Watches the builder leaves registered while its image is taken (closed
 * by image_prepare()), so the sweep damages the watch table's entries
 * too, under every writer's look through them. */
static shmobj_watch *build_watches[2];

static void build(const char *path)
{
    shmobj_segment *seg;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_FILE;
    o.initial_size = SEG_BYTES;
    o.max_size = SEG_BYTES;
    assert_int_equal(shmobj_segment_create(path, &o, &seg), 0);

    shmobj_map *m;
    assert_int_equal(shmobj_map_create(seg, "m", &m), 0);
    for (int i = 0; i < 24; i++) {
        char k[32], v[64];
        snprintf(k, sizeof k, "key-%d", i);
        snprintf(v, sizeof v, i % 2 ? "v%d" : "a longer value for key %d", i);
        assert_int_equal(shmobj_map_set(m, k, strlen(k), v, strlen(v)), 0);
    }
    assert_int_equal(shmobj_map_del(m, "key-3", 5), 0);
    assert_int_equal(shmobj_map_add(m, "counter", 7, 5, NULL), 0);
    assert_int_equal(shmobj_watch_map_key(m, "key-5", 5, &build_watches[0]), 0);
    shmobj_map_close(m);

    /* the queue: a taken message not yet done, two waiting, a copy, a
     * tracked raw block */
    shmobj_queue *q;
    shmobj_ref r, t;
    void *d;
    assert_int_equal(shmobj_queue_create(seg, "q", 8, 0, &q), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(shmobj_queue_msg_alloc(q, 40 + (size_t)i,
                                                i == 1 ? SHMOBJ_QUEUE_MSG_TRACK : 0, &r, &d),
                         0);
        memset(d, 'a' + i, 40 + (size_t)i);
        assert_int_equal(shmobj_queue_put(q, r), 0);
    }
    assert_int_equal(shmobj_queue_try_take(q, &t), 0);
    assert_int_equal(shmobj_queue_put_copy(q, "copy", 4, 0, 0, NULL), 0);
    assert_int_equal(shmobj_arena_alloc(seg, 64, 16, &tracked_ref, NULL), 0);
    assert_int_equal(shmobj_queue_put_tracked(q, tracked_ref, 0), 0);
    shmobj_queue_close(q);
    build_topic_service(seg, path);

    /* the objects */
    shmobj_ref shape, target, adopted, rec, top, raw;
    assert_int_equal(shmobj_shape_put(seg, rec_fields, 4, &shape), 0);
    shmobj_value tv = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_STR("target"));
    assert_int_equal(shmobj_obj_put(seg, &tv, &target), 0);
    shmobj_value av = SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("adopted"), SHMOBJ_VAL_DOUBLE(2.5));
    assert_int_equal(shmobj_obj_put(seg, &av, &adopted), 0);
    shmobj_value items[4] = {SHMOBJ_VAL_INT(7), SHMOBJ_VAL_STR("bob"), SHMOBJ_VAL_DOUBLE(1.5),
                             SHMOBJ_VAL_LINK(target)};
    shmobj_value rv = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_RECORD(shape, items, 4),
                                         SHMOBJ_VAL_RECORD(shape, items, 4));
    assert_int_equal(shmobj_obj_put(seg, &rv, &rec), 0);
    /* a table of the same struct: three rows over two chunks */
    shmobj_ref tab;
    shmobj_view tv2;
    assert_int_equal(shmobj_table_put(seg, shape, sizeof(struct hrec), 2, &tab), 0);
    assert_int_equal(shmobj_obj_get(seg, tab, &tv2), 0);
    for (int i = 0; i < 3; i++) {
        struct hrec hr = {i, "row", 0.5 * i, target};
        assert_int_equal(shmobj_table_append(&tv2, &hr, 1, sizeof hr, NULL), 0);
    }
    assert_int_equal(shmobj_segment_root_set(seg, "table", tab), 0);
    static const char *const names[] = {"x", "y"};
    uint64_t bshape[2] = {2, 3};
    float fdata[6] = {1, 2, 3, 4, 5, 6};
    shmobj_value topv = SHMOBJ_VAL_DICT_OF(
        SHMOBJ_VAL_STR("int"), SHMOBJ_VAL_INT(-5), SHMOBJ_VAL_STR("uint"), SHMOBJ_VAL_UINT(5),
        SHMOBJ_VAL_STR("double"), SHMOBJ_VAL_DOUBLE(0.5), SHMOBJ_VAL_STR("bool"),
        SHMOBJ_VAL_BOOL(1), SHMOBJ_VAL_STR("null"), SHMOBJ_VAL_NULL, SHMOBJ_VAL_STR("short"),
        SHMOBJ_VAL_STR("abc"), SHMOBJ_VAL_STR("long"),
        SHMOBJ_VAL_STR("a string longer than any slot holds in place"), SHMOBJ_VAL_STR("bytes"),
        SHMOBJ_VAL_BYTES("\1\2\3", 3), SHMOBJ_VAL_STR("buffer"),
        SHMOBJ_VAL_BUFFER(SHMOBJ_DTYPE_F32, 2, bshape, fdata), SHMOBJ_VAL_STR("list"),
        SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("deep"))),
        SHMOBJ_VAL_STR("tuple"),
        SHMOBJ_VAL_TUPLE_OF(SHMOBJ_VAL_STR("red"), SHMOBJ_VAL_STR("green")),
        SHMOBJ_VAL_STR("set"), SHMOBJ_VAL_SET_OF(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_STR("x")),
        SHMOBJ_VAL_STR("struct"),
        SHMOBJ_VAL_STRUCT(SHMOBJ__VALS(SHMOBJ_VAL_INT(1), SHMOBJ_VAL_STR("y")), 2, names),
        SHMOBJ_VAL_INT(42), SHMOBJ_VAL_STR("int key"), SHMOBJ_VAL_STR("link"),
        SHMOBJ_VAL_LINK(target), SHMOBJ_VAL_STR("adopt"), SHMOBJ_VAL_ADOPT(adopted),
        SHMOBJ_VAL_STR("ml"), SHMOBJ_VAL_MLIST(), SHMOBJ_VAL_STR("md"), SHMOBJ_VAL_MDICT(),
        SHMOBJ_VAL_STR("ms"), SHMOBJ_VAL_MSET());
    assert_int_equal(shmobj_obj_put(seg, &topv, &top), 0);
    shmobj_view v, ml, md, ms;
    assert_int_equal(shmobj_obj_get(seg, top, &v), 0);
    assert_int_equal(shmobj_view_get_str(&v, "ml", &ml), 0);
    assert_int_equal(shmobj_view_get_str(&v, "md", &md), 0);
    assert_int_equal(shmobj_view_get_str(&v, "ms", &ms), 0);
    for (int i = 0; i < 12; i++) {
        char k[24];
        snprintf(k, sizeof k, i % 2 ? "key-%d" : "k%d", i);
        shmobj_value item = i % 3 == 0   ? SHMOBJ_VAL_INT(i)
                            : i % 3 == 1 ? SHMOBJ_VAL_STR(k)
                                         : SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_DOUBLE(i));
        assert_int_equal(shmobj_mlist_append(&ml, &item), 0);
        assert_int_equal(shmobj_mdict_set(&md, &SHMOBJ_VAL_STR(k), &item), 0);
        assert_int_equal(shmobj_mset_add(&ms, i % 2 ? &SHMOBJ_VAL_INT(i)
                                                    : &SHMOBJ_VAL_BYTES(k, strlen(k))),
                         0);
    }
    assert_int_equal(shmobj_mut_delete(&md, &SHMOBJ_VAL_STR("k4")), 0);
    assert_int_equal(shmobj_watch_container(&md, &build_watches[1]), 0);
    assert_int_equal(shmobj_mut_delete(&ms, &SHMOBJ_VAL_INT(7)), 0);
    assert_int_equal(shmobj_mlist_delete(&ml, 3), 0);
    assert_int_equal(shmobj_arena_alloc(seg, 100, 0, &raw, NULL), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "obj", top), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "shape", shape), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "target", target), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "rec", rec), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "raw", raw), 0);
    static const char *const kinds[] = {"m", "q", "obj", "shape", "target", "rec", "raw",
                                        "table", "t", "s"};
    nlive = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        assert_int_equal(shmobj_segment_root_get(seg, kinds[i], &live_refs[nlive++]), 0);
    live_refs[nlive++] = tracked_ref;
    shmobj_segment_close(seg);
}

static void image_load(const char *path)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    assert_true(fd >= 0 && fstat(fd, &st) == 0);
    image_len = (uint64_t)st.st_size;
    image = malloc(image_len);
    assert_non_null(image);
    assert_int_equal(pread(fd, image, image_len, 0), (ssize_t)image_len);
    close(fd);
    used_end = image_len;
    while (used_end >= 8 && memcmp(image + used_end - 8, "\0\0\0\0\0\0\0\0", 8) == 0)
        used_end -= 8;
}

/* The pristine bytes with n words replaced, into a fresh file. */
static void file_write_n(const char *path, const uint64_t *offs, const uint64_t *vals,
                         unsigned n)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, image, image_len, 0), (ssize_t)image_len);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(pwrite(fd, &vals[i], 8, (off_t)offs[i]), 8);
    close(fd);
}

static void file_write(const char *path, uint64_t off, uint64_t val)
{
    file_write_n(path, &off, &val, 1);
}

/* ---- the calls ------------------------------------------------------------ */

static unsigned walk_budget;

static void walk(shmobj_view *v, int depth);

static void walk_key(const shmobj_view *v, const shmobj_view *k)
{
    shmobj_value kd;
    const void *p;
    size_t kn, idx;
    int64_t x;
    shmobj_view it;
    shmobj_key pk;
    if (shmobj_view_type(k) == SHMOBJ_TYPE_INT && CALL(shmobj_int_get, k, &x) == 0)
        kd = SHMOBJ_VAL_INT(x);
    else if (shmobj_view_type(k) == SHMOBJ_TYPE_STR &&
             CALL(shmobj_str_get, k, (const char **)&p, &kn) == 0)
        kd = SHMOBJ_VAL_STRN(p, kn);
    else if (shmobj_view_type(k) == SHMOBJ_TYPE_BYTES && CALL(shmobj_bytes_get, k, &p, &kn) == 0)
        kd = SHMOBJ_VAL_BYTES(p, kn);
    else
        return;
    CALL(shmobj_view_index, v, &kd, &idx);
    CALL(shmobj_view_get, v, &kd, &it);
    if (kd.type == SHMOBJ_TYPE_STR) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(kn < 63 ? kn : 63), (const char *)p);
        CALL(shmobj_field_get, v, name, &it);
        int64_t i64;
        uint64_t u64;
        double dd;
        int b;
        const char *s;
        size_t sl;
        CALL(shmobj_field_int_get, v, name, &i64);
        CALL(shmobj_field_uint_get, v, name, &u64);
        CALL(shmobj_field_double_get, v, name, &dd);
        CALL(shmobj_field_bool_get, v, name, &b);
        CALL(shmobj_field_str_get, v, name, &s, &sl);
    }
    if (CALL(shmobj_key_init, &pk, &kd) == 0) {
        CALL(shmobj_view_get_key, v, &pk, &it);
        CALL(shmobj_view_index_key, v, &pk, &idx);
        CALL(shmobj_view_key_int_add, v, &pk, 0, NULL);
        if (shmobj_view_type(v) == SHMOBJ_TYPE_MDICT) {
            int64_t o;
            CALL(shmobj_mdict_get_int, v, &pk, &o);
            CALL(shmobj_mdict_int_add, v, &pk, 1, &o);
        }
    }
    if (shmobj_view_type(v) == SHMOBJ_TYPE_MDICT || shmobj_view_type(v) == SHMOBJ_TYPE_MSET) {
        CALL(shmobj_mut_contains, v, &kd);
        if (shmobj_view_type(v) == SHMOBJ_TYPE_MDICT)
            CALL(shmobj_mdict_get, v, &kd, &it);
    }
}

static void walk_scalar(shmobj_view *v)
{
    int64_t x;
    uint64_t u;
    double d;
    int b;
    size_t n;
    shmobj_ref r;
    shmobj_view f;
    volatile uint8_t sink = 0;
    switch (shmobj_view_type(v)) {
    case SHMOBJ_TYPE_INT:
        CALL(shmobj_int_get, v, &x);
        CALL(shmobj_int_add, v, 1, &x);
        CALL(shmobj_int_cas, v, &x, x);
        CALL(shmobj_int_set, v, x);
        break;
    case SHMOBJ_TYPE_UINT:
        CALL(shmobj_uint_get, v, &u);
        CALL(shmobj_uint_add, v, 1, &u);
        CALL(shmobj_uint_cas, v, &u, u);
        CALL(shmobj_uint_set, v, u);
        break;
    case SHMOBJ_TYPE_DOUBLE:
        CALL(shmobj_double_get, v, &d);
        CALL(shmobj_double_add, v, 1, &d);
        CALL(shmobj_double_set, v, d);
        break;
    case SHMOBJ_TYPE_BOOL:
        CALL(shmobj_bool_get, v, &b);
        CALL(shmobj_bool_set, v, 1);
        break;
    case SHMOBJ_TYPE_STR: {
        const char *s;
        if (CALL(shmobj_str_get, v, &s, &n) == 0 && s[n] != 0) {
            snprintf(rep->msg, sizeof rep->msg, "a string view without its NUL");
            _exit(3);
        }
        break;
    }
    case SHMOBJ_TYPE_BYTES: {
        const void *p;
        if (CALL(shmobj_bytes_get, v, &p, &n) == 0 && n > 0)
            sink = ((const uint8_t *)p)[n - 1];
        break;
    }
    case SHMOBJ_TYPE_BUFFER: {
        shmobj_buffer_info info = {.struct_size = sizeof info};
        if (CALL(shmobj_buffer_get, v, &info) == 0 && info.nbytes > 0)
            sink = ((uint8_t *)info.data)[0] + ((uint8_t *)info.data)[info.nbytes - 1];
        break;
    }
    case SHMOBJ_TYPE_LINK:
        CALL(shmobj_link_get, v, &r);
        if (CALL(shmobj_view_follow, v, &f) == 0)
            walk(&f, SHMOBJ_OBJ_MAXDEPTH);
        break;
    case SHMOBJ_TYPE_RECORD:
        CALL(shmobj_record_shape, v, &r);
        break;
    default:
        break;
    }
    (void)sink;
}

static void walk(shmobj_view *v, int depth)
{
    size_t n;
    shmobj_view it, k;
    if (depth > SHMOBJ_OBJ_MAXDEPTH || walk_budget == 0)
        return;
    walk_budget--;
    walk_scalar(v);
    char buf[256];
    size_t len;
    CALL(shmobj_view_json, v, buf, sizeof buf, &len);
    if (CALL(shmobj_view_len, v, &n) != 0)
        return;
    int t = shmobj_view_type(v);
    if (t == SHMOBJ_TYPE_STR || t == SHMOBJ_TYPE_BYTES || t == SHMOBJ_TYPE_BUFFER)
        return;
    for (size_t i = 0; i < n && i < 64 && walk_budget > 0; i++) {
        if (CALL(shmobj_view_item, v, i, &it) == 0)
            walk(&it, depth + 1);
        int64_t x;
        CALL(shmobj_item_int_get, v, i, &x);
        CALL(shmobj_item_int_add, v, i, 0, NULL);
        if (CALL(shmobj_view_key, v, i, &k) == 0)
            walk_key(v, &k);
        if (t == SHMOBJ_TYPE_MLIST) {
            CALL(shmobj_mlist_get, v, i, &it);
            CALL(shmobj_mlist_get_int, v, i, &x);
        }
    }
    if (t == SHMOBJ_TYPE_MDICT || t == SHMOBJ_TYPE_MSET) {
        shmobj_miter mi;
        if (CALL(shmobj_miter_init, v, &mi) == 0)
            for (int j = 0; j < 100 && CALL(shmobj_miter_next, &mi, &k, &it) == 0; j++)
                ;
    }
}

/* The writers of the mutable containers in the graph. */
static void mut_writers(const shmobj_view *top)
{
    shmobj_view l, d, s;
    shmobj_ref out = 0;
    if (CALL(shmobj_view_get_str, top, "ml", &l) == 0) {
        CALL(shmobj_mlist_append, &l, &SHMOBJ_VAL_STR("appended"));
        CALL(shmobj_mlist_insert, &l, 1, &SHMOBJ_VAL_INT(5));
        if (CALL(shmobj_mlist_pop, &l, 0, &out) == 0 && out != 0)
            CALL(shmobj_obj_free, top->seg, out);
        CALL(shmobj_mlist_set, &l, 2, &SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_NULL));
        CALL(shmobj_mlist_delete, &l, 1);
    }
    if (CALL(shmobj_view_get_str, top, "md", &d) == 0) {
        shmobj_watch *w = NULL;
        CALL(shmobj_watch_container, &d, &w);
        CALL(shmobj_mdict_set, &d, &SHMOBJ_VAL_STR("key-1"), &SHMOBJ_VAL_INT(1));
        if (w != NULL) {
            CALL(shmobj_watch_consume, w);
            CALL(shmobj_watch_wait, w, 0);
            shmobj_watch_close(w);
        }
        CALL(shmobj_mdict_set, &d, &SHMOBJ_VAL_STR("new key"), &SHMOBJ_VAL_STR("x"));
        CALL(shmobj_mut_delete, &d, &SHMOBJ_VAL_STR("k0"));
    }
    if (CALL(shmobj_view_get_str, top, "ms", &s) == 0) {
        CALL(shmobj_mset_add, &s, &SHMOBJ_VAL_INT(1000));
        CALL(shmobj_mut_delete, &s, &SHMOBJ_VAL_INT(1));
    }
    shmobj_view it;
    if (CALL(shmobj_view_get_str, top, "int", &it) == 0)
        CALL(shmobj_view_set, &it, &SHMOBJ_VAL_INT(3));
    if (CALL(shmobj_view_get_str, top, "list", &it) == 0)
        CALL(shmobj_view_set, &it, &SHMOBJ_VAL_STR("replaced"));
    if (CALL(shmobj_view_get_str, top, "ms", &s) == 0)
        CALL(shmobj_mut_clear, &s);
}

/* Every table call on the table view t: reads, atomic updates, an append
 * from this program's struct, and a new table of its shape. */
static void table_calls(shmobj_segment *seg, const shmobj_view *t)
{
    uint64_t len = 0, run;
    size_t field = 0;
    struct hrec c = {1, "x", 2.0, 0};
    const void *p;
    int64_t x = 0;
    double d = 0;
    shmobj_ref r;
    volatile uint8_t sink = 0;
    shmobj_table_info info = {.struct_size = sizeof info};
    CALL(shmobj_table_len, t, &len);
    CALL(shmobj_table_info_get, t, &info);
    for (uint64_t i = 0; i < 4; i++) {
        CALL(shmobj_table_get, t, i, &c, sizeof c);
        if (CALL(shmobj_table_row_get, t, i, &p, &run) == 0)
            sink = ((const uint8_t *)p)[run * sizeof c - 1];
        for (size_t f = 0; f < 5; f++) {
            shmobj_buffer_info b = {.struct_size = sizeof b};
            if (CALL(shmobj_table_column_get, t, f, i, &b) == 0)
                sink = ((const uint8_t *)b.data)[b.nbytes - 1];
            CALL(shmobj_table_int_get, t, i, f, &x);
            CALL(shmobj_table_int_add, t, i, f, 1, &x);
            CALL(shmobj_table_int_cas, t, i, f, &x, x);
            CALL(shmobj_table_int_set, t, i, f, x);
            CALL(shmobj_table_double_get, t, i, f, &d);
            CALL(shmobj_table_double_add, t, i, f, 1, &d);
            CALL(shmobj_table_double_set, t, i, f, d);
        }
    }
    CALL(shmobj_table_index, t, "score", &field);
    CALL(shmobj_table_index, t, "nope", &field);
    struct hrec rows[3] = {{7, "seven", 7.0, 0}, {8, "eight", 8.0, 0}, {9, "nine", 9.0, 0}};
    CALL(shmobj_table_append, t, rows, 3, sizeof rows[0], NULL);
    if (CALL(shmobj_record_shape, t, &r) == 0 || CALL(shmobj_table_info_get, t, &info) == 0) {
        shmobj_ref nt;
        if (CALL(shmobj_table_put, seg, info.shape, sizeof(struct hrec), 4, &nt) == 0)
            CALL(shmobj_obj_free, seg, nt);
    }
    (void)sink;
}

static void objects(shmobj_segment *seg)
{
    static const char *const roots[] = {"obj", "rec", "table", "target", "shape"};
    shmobj_ref r;
    shmobj_view v;
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (CALL(shmobj_segment_root_get, seg, roots[i], &r) != 0)
            continue;
        CALL(shmobj_obj_check, seg, r);
        if (CALL(shmobj_obj_get, seg, r, &v) == 0) {
            walk_budget = 2000;
            walk(&v, 0);
            note("shmobj_view_json_write");
            FILE *f = fopen("/dev/null", "w");
            if (f != NULL) {
                status("shmobj_view_json_write", shmobj_view_json_write(&v, f));
                fclose(f);
            }
            if (i == 0)
                mut_writers(&v);
            if (i == 2)
                table_calls(seg, &v);
        }
        CALL(shmobj_obj_check, seg, r);
    }
    /* a record from a C struct of the (perhaps damaged) shape, read where
     * this program's table says (shmobj_record_put_struct(), deprecated,
     * reads where the shape's offsets say: a damaged shape makes it read
     * outside the struct, as its documentation warns, so it is not called
     * on a damaged segment) */
    if (CALL(shmobj_segment_root_get, seg, "shape", &r) == 0) {
        struct hrec c = {1, "x", 2.0, 0};
        (void)CALL(shmobj_segment_root_get, seg, "target", &c.friend_);
        shmobj_ref rr;
        if (CALL(shmobj_record_put_fields, seg, r, rec_fields, 4, &c, &rr) == 0)
            CALL(shmobj_obj_free, seg, rr);
    }
    for (size_t i = 0; i < 4; i++)
        if (CALL(shmobj_segment_root_get, seg, roots[i], &r) == 0)
            CALL(shmobj_obj_free, seg, r);
    if (CALL(shmobj_segment_root_get, seg, "shape", &r) == 0)
        CALL(shmobj_shape_free, seg, r);
}

static void map_calls(shmobj_segment *seg)
{
    shmobj_map *m;
    if (CALL(shmobj_map_open, seg, "m", &m) != 0)
        return;
    char buf[128];
    size_t len;
    uint64_t cnt;
    for (int i = 0; i < 26; i++) {
        char k[32];
        snprintf(k, sizeof k, "key-%d", i);
        CALL(shmobj_map_get, m, k, strlen(k), buf, sizeof buf, &len);
        CALL(shmobj_map_contains, m, k, strlen(k));
        shmobj_map_view mv;
        if (CALL(shmobj_map_get_view, m, k, strlen(k), &mv) == 0) {
            volatile uint8_t sink = mv.value_len ? ((const uint8_t *)mv.value)[mv.value_len - 1] : 0;
            (void)sink;
            shmobj_map_view_release(&mv);
        }
    }
    shmobj_map_get_req reqs[3] = {{"key-1", 5, buf, sizeof buf, 0, 0, 0},
                                  {"key-2", 5, buf, sizeof buf, 0, 0, 0},
                                  {"nope", 4, NULL, 0, 0, 0, 0}};
    CALL(shmobj_map_get_many, m, reqs, 3);
    CALL(shmobj_map_count, m, &cnt);
    shmobj_map_iter *it;
    if (CALL(shmobj_map_iter_open, m, &it) == 0) {
        const void *k, *val;
        size_t kl, vl;
        for (int j = 0; j < 200 && CALL(shmobj_map_iter_next, it, &k, &kl, &val, &vl) == 0; j++)
            ;
        shmobj_map_iter_close(it);
    }
    shmobj_map_stats st = {.struct_size = sizeof st};
    CALL(shmobj_map_stats_get, m, &st);
    CALL(shmobj_map_check, m);
    shmobj_watch *w = NULL;
    int fd;
    if (CALL(shmobj_watch_map_key, m, "key-5", 5, &w) == 0)
        CALL(shmobj_watch_fd, w, &fd);
    CALL(shmobj_map_set, m, "key-5", 5, "new", 3);
    if (w != NULL) {
        CALL(shmobj_watch_consume, w);
        CALL(shmobj_watch_arm, w);
        CALL(shmobj_watch_wait, w, 0);
        shmobj_watch_close(w);
    }
    CALL(shmobj_map_set, m, "fresh", 5, "value", 5);
    shmobj_map_set_req sets[3] = {{"key-7", 5, "v7", 2, 0, 0},
                                  {"fresh2", 6, "v", 1, 0, 0},
                                  {"key-7", 5, "again", 5, 0, 0}};
    CALL(shmobj_map_set_many, m, sets, 3);
    CALL(shmobj_map_del, m, "key-6", 5);
    CALL(shmobj_map_add, m, "counter", 7, 1, NULL);
    CALL(shmobj_map_check, m);
    CALL(shmobj_map_clear, m);
    shmobj_map_close(m);
}

/* Read and mark done a message. */
static void consume(shmobj_queue *q, shmobj_ref ref)
{
    void *d;
    size_t len;
    if (CALL(shmobj_queue_msg_data, q, ref, &d, &len) == 0) {
        volatile uint8_t sum = 0;
        for (size_t j = 0; j < len; j++)
            sum ^= ((const uint8_t *)d)[j];
        (void)sum;
    }
    CALL(shmobj_queue_done, q, ref);
}

static void queue_calls(shmobj_segment *seg)
{
    shmobj_queue *q;
    if (CALL(shmobj_queue_open, seg, "q", &q) != 0)
        return;
    uint64_t n;
    uint32_t cap;
    shmobj_ref ref, refs[8];
    size_t got;
    void *d;
    CALL(shmobj_queue_count, q, &n);
    CALL(shmobj_queue_capacity, q, &cap);
    note("shmobj_queue_has_messages");
    (void)shmobj_queue_has_messages(q);
    uint64_t bad;
    CALL(shmobj_queue_check, q, &bad);
    shmobj_queue_stats st = {.struct_size = sizeof st};
    CALL(shmobj_queue_stats_get, q, &st);
    if (CALL(shmobj_queue_try_peek, q, &ref) == 0)
        CALL(shmobj_queue_msg_data, q, ref, &d, NULL);
    for (int i = 0; i < 10 && CALL(shmobj_queue_try_take, q, &ref) == 0; i++)
        consume(q, ref);
    if (CALL(shmobj_queue_msg_alloc, q, 200, SHMOBJ_QUEUE_MSG_TRACK, &ref, &d) == 0) {
        memset(d, 'z', 200);
        if (CALL(shmobj_queue_try_put, q, ref) == 0) {
            shmobj_ref t;
            if (CALL(shmobj_queue_try_take, q, &t) == 0)
                CALL(shmobj_queue_msg_done, q, t);
            CALL(shmobj_queue_msg_wait_done, q, ref, 0);
            CALL(shmobj_queue_msg_reset, q, ref);
        }
        CALL(shmobj_queue_msg_free, q, ref);
    }
    CALL(shmobj_queue_put_copy, q, "hello", 5, 0, 0, NULL);
    CALL(shmobj_queue_put_tracked, q, tracked_ref, 0);
    CALL(shmobj_queue_put_many, q, refs, 0, 0, &got);
    if (CALL(shmobj_queue_take_many, q, refs, 8, 0, &got) == 0)
        for (size_t i = 0; i < got && i < 8; i++)
            consume(q, refs[i]);
    CALL(shmobj_queue_wait_done, q, tracked_ref, 0);
    CALL(shmobj_queue_untrack, q, tracked_ref);
    CALL(shmobj_queue_wait_all, q, 0);
    CALL(shmobj_queue_take_timed, q, &ref, 1000000);
    CALL(shmobj_queue_peek_timed, q, &ref, 1000000);
    int fd;
    if (CALL(shmobj_queue_notify_fd, q, &fd) == 0)
        CALL(shmobj_queue_notify_arm, q);
    CALL(shmobj_queue_put_copy, q, "n", 1, 0, 0, NULL);
    CALL(shmobj_queue_trim, q);
    CALL(shmobj_queue_check, q, &bad);
    shmobj_queue_close(q);
    CALL(shmobj_queue_destroy, seg, "q");
}

/* Every call of a subscriber, a publisher and a wait-set on the topic. */
static void topic_calls(shmobj_segment *seg)
{
    shmobj_topic *t;
    if (CALL(shmobj_topic_open, seg, "t", &t) != 0)
        return;
    shmobj_topic_stats st;
    CALL(shmobj_topic_stats_get, t, &st);
    shmobj_topic_sub_info infos[8];
    size_t n;
    CALL(shmobj_topic_subscribers_get, t, infos, 8, &n);
    shmobj_topic_sub *sub;
    if (CALL(shmobj_topic_subscribe, t, &sub) == 0) {
        shmobj_topic_msg msgs[4];
        for (int i = 0; i < 12 && CALL(shmobj_topic_try_take, sub, &msgs[0]) == 0; i++) {
            volatile uint8_t sum = 0;
            for (uint64_t j = 0; j < msgs[0].len && j < 4096; j++)
                sum ^= ((const uint8_t *)msgs[0].data)[j];
            (void)sum;
            CALL(shmobj_topic_release, sub, &msgs[0]);
        }
        CALL(shmobj_topic_publish, t, "fresh", 5, TEST_MS);
        unsigned got;
        if (CALL(shmobj_topic_take_batch, sub, msgs, 4, &got, TEST_MS) == 0)
            for (unsigned i = 0; i < got && i < 4; i++)
                CALL(shmobj_topic_release, sub, &msgs[i]);
        CALL(shmobj_topic_take, sub, &msgs[0], TEST_MS);
        int fd;
        if (CALL(shmobj_topic_notify_fd, sub, &fd) == 0)
            CALL(shmobj_topic_notify_arm, sub);
        shmobj_waitset *ws;
        if (CALL(shmobj_waitset_create, &ws) == 0) {
            void *tags[2];
            if (CALL(shmobj_waitset_add_topic, ws, sub, sub) == 0)
                CALL(shmobj_waitset_wait, ws, 0, tags, 2, &n);
            shmobj_waitset_destroy(ws);
        }
        note("shmobj_topic_unsubscribe");
        shmobj_topic_unsubscribe(sub);
    }
    shmobj_topic_loan loan;
    if (CALL(shmobj_topic_loan_get, t, 64, &loan) == 0) {
        memset(loan.data, 'x', 64);
        CALL(shmobj_topic_loan_publish, t, &loan, 64, TEST_MS);
    }
    if (CALL(shmobj_topic_loan_get, t, 16, &loan) == 0)
        CALL(shmobj_topic_loan_cancel, t, &loan);
    unsigned freed;
    CALL(shmobj_topic_repair, t, &freed);
    CALL(shmobj_topic_stats_get, t, &st);
    note("shmobj_topic_close");
    shmobj_topic_close(t);
    CALL(shmobj_topic_destroy, seg, "t");
}

/* Every call of a server and a client on the service. */
static void service_calls(shmobj_segment *seg)
{
    shmobj_service *svc;
    if (CALL(shmobj_service_open, seg, "s", 0, &svc) != 0)
        return;
    uint32_t count;
    CALL(shmobj_service_pending, svc, &count);
    shmobj_service_msg req;
    for (int i = 0; i < 4 && CALL(shmobj_service_take, svc, 0, &req) == 0; i++) {
        volatile uint8_t sum = 0;
        for (size_t j = 0; req.data != NULL && j < req.len && j < 4096; j++)
            sum ^= ((const uint8_t *)req.data)[j];
        (void)sum;
        if (i % 2 == 0) {
            shmobj_service_msg resp = {0, "answer", 6, SHMOBJ_SERVICE_BYTES, 0};
            CALL(shmobj_service_reply, svc, &req, &resp);
        } else {
            CALL(shmobj_service_release, svc, &req);
        }
    }
    shmobj_service_msg call = {0, "no server", 9, SHMOBJ_SERVICE_BYTES, 0}, resp;
    if (CALL(shmobj_service_call, svc, &call, TEST_MS, &resp) == 0)
        CALL(shmobj_service_release, svc, &resp);
    int fd;
    if (CALL(shmobj_service_notify_fd, svc, &fd) == 0)
        CALL(shmobj_service_notify_arm, svc);
    shmobj_waitset *ws;
    if (CALL(shmobj_waitset_create, &ws) == 0) {
        void *tags[2];
        size_t n;
        if (CALL(shmobj_waitset_add_service, ws, svc, svc) == 0)
            CALL(shmobj_waitset_wait, ws, 0, tags, 2, &n);
        shmobj_waitset_destroy(ws);
    }
    uint32_t freed;
    CALL(shmobj_service_repair, svc, &freed);
    CALL(shmobj_service_pending, svc, &count);
    note("shmobj_service_close");
    shmobj_service_close(svc);
    CALL(shmobj_service_destroy, seg, "s");
}

static void segment_calls(shmobj_segment *seg, const char *path)
{
    shmobj_segment_peek_info pi = {.struct_size = sizeof pi};
    CALL(shmobj_segment_peek, path, SHMOBJ_BACKEND_FILE, &pi);
    shmobj_segment_info si = {.struct_size = sizeof si};
    CALL(shmobj_segment_info_get, seg, &si);
    shmobj_segment_proc procs[8];
    size_t np;
    CALL(shmobj_segment_procs_get, seg, procs, 8, &np);
    shmobj_arena_stats as = {.struct_size = sizeof as};
    CALL(shmobj_arena_stats_get, seg, &as);
    uint64_t bad;
    CALL(shmobj_arena_check, seg, &bad);
    uint32_t cursor = 0;
    shmobj_root_info ri = {.struct_size = sizeof ri};
    for (int i = 0; i < 200 && CALL(shmobj_segment_root_next, seg, &cursor, &ri) == 0; i++)
        ;
}

static void after_calls(shmobj_segment *seg)
{
    shmobj_ref r, nr;
    void *p;
    size_t us;
    uint64_t bad;
    if (CALL(shmobj_segment_root_get, seg, "raw", &r) == 0) {
        CALL(shmobj_arena_ptr, seg, r, &p, &us);
        CALL(shmobj_arena_free, seg, r);
    }
    CALL(shmobj_segment_root_del, seg, "raw");
    if (CALL(shmobj_arena_alloc, seg, 1000, 0, &nr, &p) == 0) {
        memset(p, 1, 1000);
        CALL(shmobj_segment_root_add, seg, "new", nr);
    }
    CALL(shmobj_obj_put_str, seg, "fresh", 5, &r);
    CALL(shmobj_segment_root_wait, seg, "new", 0, &r);
    CALL(shmobj_arena_check, seg, &bad);
}

static int child_main(void *arg)
{
    const char *path = arg;
    shmobj_segment *seg;
    note("shmobj_segment_open");
    if (CALL(shmobj_segment_open, path, SHMOBJ_BACKEND_FILE, 0, &seg) != 0)
        return 0;
    segment_calls(seg, path);
    map_calls(seg);
    queue_calls(seg);
    topic_calls(seg);
    service_calls(seg);
    objects(seg);
    after_calls(seg);
    note("shmobj_segment_close");
    shmobj_segment_close(seg);
    return 0;
}

/* The shmobj tool's commands on the file: statuses of their own only. */
static int cli_main(void *arg)
{
    const char *path = arg;
    const char *tool = getenv("SHMOBJ_HOSTILE_TOOL");
    static const char *const cmds[] = {"ls", "stat", "dump", "check"};
    if (tool == NULL)
        return 0;
    for (size_t i = 0; i < 4; i++) {
        char call[64];
        snprintf(call, sizeof call, "shmobj %s", cmds[i]);
        note(call);
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            dup2(null, 2);
            execl(tool, tool, cmds[i], path, (char *)NULL);
            _exit(127);
        }
        int st = test_child_wait(pid);
        if (st > 2) {
            snprintf(rep->msg, sizeof rep->msg, "%s exited with %d", call, st);
            return 3;
        }
    }
    return 0;
}

static uint64_t word_at(uint64_t off)
{
    uint64_t w;
    memcpy(&w, image + off, 8);
    return w;
}

/* A word that is not 0, or one zero word in 16 near one that is not (the
 * long zero runs of free memory and empty tables hold nothing to damage
 * that their first words do not). */
static int word_picked(uint64_t off)
{
    if (word_at(off) != 0)
        return 1;
    if ((off / 8) % 16 != 0)
        return 0;
    for (uint64_t o = off >= 64 ? off - 64 : 0; o <= off + 64 && o + 8 <= image_len; o += 8)
        if (word_at(o) != 0)
            return 1;
    return 0;
}

enum { NVALS = 7 };

/* The attachment token a child opening the pristine bytes gets (each
 * case's child takes the same slot of the same table): a word naming the
 * caller's own handle, which no call of the library may wait on when the
 * caller does not hold it (doc/reliability.md). */
static uint64_t opener_token;

static int probe_main(void *arg)
{
    shmobj_segment *seg;
    if (shmobj_segment_open(arg, SHMOBJ_BACKEND_FILE, 0, &seg) != 0)
        return 1;
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    rep->token = sp->ops->live->token(sp);
    shmobj_segment_close(seg);
    return rep->token != 0 ? 0 : 1;
}

/* Hostile value number k (< NVALS) for the word at off: 0, all ones, the
 * segment's size, the word's own offset with its generation bits, the word
 * plus 16 (a reference one slot off), a live block of another kind, the
 * opener's token. */
static uint64_t hostile_value(unsigned k, uint64_t off)
{
    uint64_t orig = word_at(off);
    switch (k) {
    case 0: return 0;
    case 1: return ~UINT64_C(0);
    case 2: return image_len;
    case 3: return (orig & ~((UINT64_C(1) << 48) - 1)) | off;
    case 4: return orig + 16;
    case 5: return live_refs[(off / 8) % nlive];
    default: return opener_token;
    }
}

/* One damaged file, already written: the calls in a child, then, with
 * `cli`, the tool's commands on the same damage written afresh (the calls
 * may have changed the file). The child's status: 0 when every call kept
 * its documentation. */
static int run_case(const char *path, int cli, const uint64_t *offs, const uint64_t *vals,
                    unsigned n)
{
    memset(rep->call, 0, sizeof rep->call);
    memset(rep->msg, 0, sizeof rep->msg);
    int st = test_child_wait(test_child_start(child_main, (void *)path, HOSTILE_CASE_S));
    if (st == 0 && cli) {
        file_write_n(path, offs, vals, n);
        st = test_child_wait(test_child_start(cli_main, (void *)path, HOSTILE_CLI_S));
    }
    /* SHMOBJ_HOSTILE_KEEP=DIR keeps each failing case's damaged bytes */
    const char *keep = getenv("SHMOBJ_HOSTILE_KEEP");
    if (st != 0 && keep != NULL) {
        static unsigned kept;
        char name[400];
        snprintf(name, sizeof name, "%s/hostile-%u-%d", keep, kept++, (int)getpid());
        file_write_n(name, offs, vals, n);
    }
    return st;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    return s != NULL && *s != 0 ? strtoull(s, NULL, 0) : dflt;
}

/* Build the pristine segment, keep its bytes, and list its picked words
 * (every non-zero one, and one zero word in 16); path gets the damaged
 * file's name. */
static uint64_t *image_prepare(char *path, size_t path_len, size_t *nw)
{
    char base[300];
    snprintf(base, sizeof base, "%s/pristine", dir);
    snprintf(path, path_len, "%s/damaged", dir);
    build(base);
    image_load(base);
    for (int i = 0; i < 2; i++)
        shmobj_watch_close(build_watches[i]);
    unlink(base);
    file_write_n(path, NULL, NULL, 0);
    assert_int_equal(test_child_wait(test_child_start(probe_main, path, HOSTILE_CASE_S)), 0);
    opener_token = rep->token;
    uint64_t *words = malloc(used_end / 8 * sizeof *words);
    assert_non_null(words);
    *nw = 0;
    for (uint64_t off = 0; off + 8 <= used_end; off += 8)
        if (word_picked(off))
            words[(*nw)++] = off;
    return words;
}

static void test_hostile_sweep_every_call_documented(void **state)
{
    (void)state;
    char path[300];
    size_t nw;
    uint64_t *words = image_prepare(path, sizeof path, &nw);
    uint64_t total = (uint64_t)nw * NVALS;
    uint64_t cases = env_u64("SHMOBJ_HOSTILE_CASES", HOSTILE_CASES);
    uint64_t cli_every = env_u64("SHMOBJ_HOSTILE_CLI_EVERY", HOSTILE_CLI_EVERY);
    uint64_t seed = env_u64("SHMOBJ_HOSTILE_SEED", 1);
    if (cases == 0 || cases > total)
        cases = total;
    uint64_t step = total / cases;
    char fails[MAX_FAILS][400];
    unsigned nfails = 0;
    uint64_t run = 0;
    for (uint64_t c = (seed * 7919) % step; c < total && nfails < MAX_FAILS; c += step, run++) {
        uint64_t off = words[c / NVALS], orig = word_at(off);
        uint64_t val = hostile_value(c % NVALS, off);
        if (val == orig)
            continue;
        file_write(path, off, val);
        int st = run_case(path, cli_every != 0 && run % cli_every == 0, &off, &val, 1);
        if (st != 0)
            snprintf(fails[nfails++], sizeof fails[0],
                     "word %#llx = %#llx (was %#llx): status %d in %s%s%s",
                     (unsigned long long)off, (unsigned long long)val,
                     (unsigned long long)orig, st, rep->call, rep->msg[0] ? ": " : "",
                     rep->msg);
    }
    unlink(path);
    free(words);
    free(image);
    for (unsigned i = 0; i < nfails; i++)
        print_error("%s\n", fails[i]);
    print_message("%llu cases of %llu (%zu words, used extent %llu bytes), %llu calls\n",
                  (unsigned long long)run, (unsigned long long)total, nw,
                  (unsigned long long)used_end, (unsigned long long)rep->calls);
    assert_int_equal(nfails, 0);
}

/* splitmix64: the multi-word cases' numbers, the same for a given seed. */
static uint64_t next_rand(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Several words changed at once: fields that must agree (a length and its
 * body, a count and its table, a position and its slot, a block's size and
 * its neighbour's) changed together, which no single-word case makes. Each
 * case changes 2 to 8 words: the first a picked word, each other either
 * any word within 256 bytes of it (one structure's fields) or another
 * picked word; each gets a hostile value, a random word, or the original
 * with one bit flipped. HOSTILE_MULTI_CASES cases by default,
 * SHMOBJ_HOSTILE_MULTI_CASES to change it, SHMOBJ_HOSTILE_SEED to move
 * them, SHMOBJ_HOSTILE_MULTI_FIRST to start at a failing case,
 * SHMOBJ_HOSTILE_REPLAY=FILE to run one kept case's bytes; the property is
 * the single-word sweep's. */
static void test_hostile_words_together_every_call_documented(void **state)
{
    (void)state;
    char path[300];
    size_t nw;
    uint64_t *words = image_prepare(path, sizeof path, &nw);
    uint64_t cases = env_u64("SHMOBJ_HOSTILE_MULTI_CASES", HOSTILE_MULTI_CASES);
    uint64_t cli_every = env_u64("SHMOBJ_HOSTILE_CLI_EVERY", HOSTILE_CLI_EVERY);
    uint64_t x = env_u64("SHMOBJ_HOSTILE_SEED", 1);
    uint64_t first = env_u64("SHMOBJ_HOSTILE_MULTI_FIRST", 0);
    char fails[MAX_FAILS][400];
    unsigned nfails = 0;
    const char *replay = getenv("SHMOBJ_HOSTILE_REPLAY");
    if (replay != NULL) {
        /* one kept case's bytes (SHMOBJ_HOSTILE_KEEP) instead of the cases */
        free(image);
        image_load(replay);
        file_write_n(path, NULL, NULL, 0);
        int st = run_case(path, 1, NULL, NULL, 0);
        if (st != 0)
            print_error("%s: status %d in %s%s%s\n", replay, st, rep->call,
                        rep->msg[0] ? ": " : "", rep->msg);
        unlink(path);
        free(words);
        free(image);
        assert_int_equal(st, 0);
        return;
    }
    for (uint64_t c = 0; c < cases && nfails < MAX_FAILS; c++) {
        uint64_t offs[8], vals[8];
        unsigned n = 2 + (unsigned)(next_rand(&x) % 7);
        offs[0] = words[next_rand(&x) % nw];
        for (unsigned i = 1; i < n; i++) {
            if (next_rand(&x) % 2 == 0) {
                int64_t d = (int64_t)(next_rand(&x) % 65) - 32;
                int64_t o = (int64_t)offs[0] + 8 * d;
                offs[i] = o < 0 ? 0 : (uint64_t)o + 8 > used_end ? used_end - 8 : (uint64_t)o;
            } else {
                offs[i] = words[next_rand(&x) % nw];
            }
        }
        for (unsigned i = 0; i < n; i++) {
            unsigned k = (unsigned)(next_rand(&x) % (NVALS + 2));
            vals[i] = k < NVALS ? hostile_value(k, offs[i])
                      : k == NVALS ? next_rand(&x)
                                   : word_at(offs[i]) ^ UINT64_C(1) << (next_rand(&x) % 64);
        }
        if (c < first)
            continue;
        file_write_n(path, offs, vals, n);
        int st = run_case(path, cli_every != 0 && c % cli_every == 0, offs, vals, n);
        if (st != 0) {
            int at = snprintf(fails[nfails], sizeof fails[0], "case %llu: status %d in %s%s%s; words",
                              (unsigned long long)c, st, rep->call, rep->msg[0] ? ": " : "",
                              rep->msg);
            for (unsigned i = 0; i < n && at > 0 && (size_t)at < sizeof fails[0]; i++)
                at += snprintf(fails[nfails] + at, sizeof fails[0] - (size_t)at, " %#llx=%#llx",
                               (unsigned long long)offs[i], (unsigned long long)vals[i]);
            nfails++;
        }
    }
    unlink(path);
    free(words);
    free(image);
    for (unsigned i = 0; i < nfails; i++)
        print_error("%s\n", fails[i]);
    print_message("%llu cases of 2 to 8 words, %llu calls\n", (unsigned long long)cases,
                  (unsigned long long)rep->calls);
    assert_int_equal(nfails, 0);
}

/* ---- walks of a list grown by another process ----------------------------- */

#define GROWN_ITEMS 100000

struct grown {
    char name[64];
    shmobj_segment *seg;
    shmobj_ref top; /* [mlist]: the list as an item, for a replace */
    shmobj_view l;
};

static int grow_child(void *p)
{
    struct grown *g = p;
    for (int i = 0; i < GROWN_ITEMS; i++)
        if (shmobj_mlist_append(&g->l, &SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(i))) != 0)
            return 1;
    return 0;
}

/* A list in a segment of 1 MiB as this process maps it, grown by a child
 * to 100,000 items, each a list of its own (a child block, which a free
 * walks): 1.6 MB of slots and about 6 MB of children, past this process's
 * mapping, and more items than a work budget taken from that mapping
 * (1 MiB / 16, 65,600 units) allows. */
static void grown_make_in(struct grown *g, int in_mlist)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1u << 20;
    o.max_size = 256u << 20;
    test_name(g->name, sizeof g->name, "hostile-grow");
    assert_int_equal(shmobj_segment_create(g->name, &o, &g->seg), 0);
    shmobj_value top = SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_MLIST());
    shmobj_view v;
    assert_int_equal(shmobj_obj_put(g->seg, in_mlist ? &SHMOBJ_VAL_MLIST() : &top, &g->top), 0);
    assert_int_equal(shmobj_obj_get(g->seg, g->top, &v), 0);
    if (in_mlist) {
        assert_int_equal(shmobj_mlist_append(&v, &SHMOBJ_VAL_MLIST()), 0);
        assert_int_equal(shmobj_mlist_get(&v, 0, &g->l), 0);
    } else {
        assert_int_equal(shmobj_view_item(&v, 0, &g->l), 0);
    }
    assert_int_equal(test_child_wait(test_child_start(grow_child, g, 120)), 0);
}

static void grown_make(struct grown *g)
{
    grown_make_in(g, 0);
}

static void grown_done(struct grown *g)
{
    shmobj_segment_close(g->seg);
    shmobj_segment_destroy(g->name, SHMOBJ_BACKEND_SHM);
}

/* Freeing a list grown elsewhere frees it whole: the budget of the free
 * counts the segment as it is. */
static void test_mlist_free_grown_elsewhere_frees(void **state)
{
    (void)state;
    struct grown g;
    grown_make(&g);
    shmobj_arena_stats after = {.struct_size = sizeof after};
    assert_int_equal(shmobj_obj_free(g.seg, g.top), 0);
    /* every chunk went back: the heap holds far less than the list did
     * (no call before the free: the statistics read the whole segment) */
    assert_int_equal(shmobj_arena_stats_get(g.seg, &after), 0);
    assert_true(after.used_bytes < (1u << 20));
    grown_done(&g);
}

/* The JSON of a list grown elsewhere is the whole list. */
static void test_mlist_json_grown_elsewhere_prints(void **state)
{
    (void)state;
    struct grown g;
    grown_make(&g);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(shmobj_view_json_write(&g.l, f), 0);
    assert_int_equal(fclose(f), 0);
    assert_true(len > 20 && memcmp(text, "[[0],[1],[2],", 13) == 0);
    assert_string_equal(text + len - 9, ",[99999]]");
    free(text);
    size_t need = 0;
    assert_int_equal(shmobj_view_json(&g.l, NULL, 0, &need), SHMOBJ_ENOBUFS);
    assert_int_equal(need, len);
    grown_done(&g);
}

/* Replacing a list grown elsewhere by null (shmobj_view_set on its slot:
 * nothing is allocated, which would have shown this process the segment
 * as it is) frees the old list whole. */
static void test_mlist_replace_grown_elsewhere_frees(void **state)
{
    (void)state;
    struct grown g;
    grown_make(&g);
    shmobj_view v, slot;
    shmobj_arena_stats after = {.struct_size = sizeof after};
    assert_int_equal(shmobj_obj_get(g.seg, g.top, &v), 0);
    assert_int_equal(shmobj_view_item(&v, 0, &slot), 0);
    assert_int_equal(shmobj_view_set(&slot, &SHMOBJ_VAL_NULL), 0);
    assert_int_equal(shmobj_arena_stats_get(g.seg, &after), 0);
    assert_true(after.used_bytes < (1u << 20));
    assert_int_equal(shmobj_obj_check(g.seg, g.top), 0);
    assert_int_equal(shmobj_obj_free(g.seg, g.top), 0);
    grown_done(&g);
}

/* The same list as the item of a mutable list, replaced by null there
 * (shmobj_mlist_set, whose free of the old child reports nothing): the
 * old list is freed whole. */
static void test_mlist_set_grown_elsewhere_child_frees(void **state)
{
    (void)state;
    struct grown g;
    grown_make_in(&g, 1);
    shmobj_view outer;
    shmobj_arena_stats after = {.struct_size = sizeof after};
    assert_int_equal(shmobj_obj_get(g.seg, g.top, &outer), 0);
    assert_int_equal(shmobj_mlist_set(&outer, 0, &SHMOBJ_VAL_NULL), 0);
    assert_int_equal(shmobj_arena_stats_get(g.seg, &after), 0);
    assert_true(after.used_bytes < (1u << 20));
    assert_int_equal(shmobj_obj_free(g.seg, g.top), 0);
    grown_done(&g);
}

static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/shmobj-hostile-XXXXXX", tmp != NULL ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL)
        return -1;
    rep = mmap(NULL, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (rep == MAP_FAILED)
        return -1;
    docs_load();
    return ndocs > 100 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    rmdir(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_sweep_every_call_documented),
        cmocka_unit_test(test_hostile_words_together_every_call_documented),
        cmocka_unit_test(test_mlist_free_grown_elsewhere_frees),
        cmocka_unit_test(test_mlist_json_grown_elsewhere_prints),
        cmocka_unit_test(test_mlist_replace_grown_elsewhere_frees),
        cmocka_unit_test(test_mlist_set_grown_elsewhere_child_frees),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, setup, teardown);
}
