/* The live segment the tests of the shmobj tool look into, and the damage
 * they make it suffer.
 *
 *   test-cli-helper serve NAME SECONDS
 *       creates segment NAME with a queue "jobs", a map "cache", objects
 *       "config" (a dict), "weights" (a buffer) and "answer" (an int), and
 *       a raw block "blob" (NAME with a slash: a file-backed segment at
 *       that path), a queue "idle" nobody feeds, a mutable dict "state"
 *       holding a growable list of 3 and a set of 2, and a topic "news"
 *       of 5 messages whose one subscriber (the helper) took 2 of them;
 *       the map also holds a key of bytes that are not text, a text key
 *       that JSON must escape, and a counter the work adds to. Prints
 *       "ready PID" and keeps putting and
 *       taking messages and adding to the map until SECONDS passed or its
 *       standard input closes; then removes the segment.
 *   test-cli-helper wait-queue NAME
 *       takes from queue "idle" of segment NAME, asleep until killed.
 *   test-cli-helper wait-topic NAME
 *       joins topic "news" and sleeps in a take until killed.
 *   test-cli-helper damage-heap NAME ROOT
 *       sets bit 3 (always zero, doc/format-arena.md) of the header word of
 *       ROOT's block and prints the offset of that block's header.
 *   test-cli-helper damage-map NAME ROOT
 *       adds one to the count field of the table of shard 0 of map ROOT
 *       (doc/format-map.md) and prints the map's offset.
 * Exit status 0, or 1 with a message. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <shmobj.h>

#define SECOND INT64_C(1000000000)

static int fail(const char *what, int rc)
{
    fprintf(stderr, "test-cli-helper: %s: %s\n", what, shmobj_strerror(rc));
    return 1;
}

#define TRY(what, expr)                                                        \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ != 0)                                                          \
            return fail(what, rc_);                                            \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The objects beyond the first ones: a mutable dict of mutable
 * containers, a queue nobody feeds and a topic with a lagging subscriber
 * (kept open in *t and *sub). */
static int populate_more(shmobj_segment *seg, shmobj_map *m, shmobj_topic **t,
                         shmobj_topic_sub **sub)
{
    const unsigned char key[4] = {0xff, 0x00, 0x01, 0x02};
    TRY("binary key", shmobj_map_set(m, key, sizeof key, "\x01\x02", 2));
    const char *text = "say \"h\xc3\xa9\"\n\\";
    TRY("text key", shmobj_map_set(m, text, strlen(text), "a\tb", 3));
    TRY("counter", shmobj_map_add(m, "counter", 7, 0, NULL)); /* before ready */
    shmobj_queue *idle;
    TRY("idle", shmobj_queue_create(seg, "idle", 4, 0, &idle));
    shmobj_queue_close(idle);
    shmobj_value st = SHMOBJ_VAL_MDICT();
    shmobj_ref ref;
    TRY("state", shmobj_obj_put(seg, &st, &ref));
    TRY("state root", shmobj_segment_root_set(seg, "state", ref));
    shmobj_view v, list, set;
    TRY("state view", shmobj_obj_get(seg, ref, &v));
    shmobj_value k1 = SHMOBJ_VAL_STR("queue"), k2 = SHMOBJ_VAL_STR("seen");
    shmobj_value ml = SHMOBJ_VAL_MLIST(), ms = SHMOBJ_VAL_MSET();
    TRY("state list", shmobj_mdict_set(&v, &k1, &ml));
    TRY("state set", shmobj_mdict_set(&v, &k2, &ms));
    TRY("list view", shmobj_mdict_get(&v, &k1, &list));
    TRY("set view", shmobj_mdict_get(&v, &k2, &set));
    for (int i = 0; i < 3; i++) {
        shmobj_value x = SHMOBJ_VAL_INT(i);
        TRY("append", shmobj_mlist_append(&list, &x));
    }
    for (int i = 0; i < 2; i++) {
        shmobj_value x = SHMOBJ_VAL_INT(10 + i);
        TRY("add", shmobj_mset_add(&set, &x));
    }
    TRY("topic", shmobj_topic_create(seg, "news", NULL, t));
    TRY("subscribe", shmobj_topic_subscribe(*t, sub));
    for (int i = 0; i < 5; i++)
        TRY("publish", shmobj_topic_publish(*t, "hello", 5, 0));
    for (int i = 0; i < 2; i++) {
        shmobj_topic_msg msg;
        TRY("topic take", shmobj_topic_try_take(*sub, &msg));
        TRY("topic release", shmobj_topic_release(*sub, &msg));
    }
    shmobj_service *svc;
    TRY("service", shmobj_service_create(seg, "rpc", 4, 0, &svc));
    shmobj_service_close(svc);
    return 0;
}

static int populate(shmobj_segment *seg, shmobj_queue **q, shmobj_map **m)
{
    TRY("queue", shmobj_queue_create(seg, "jobs", 64, 0, q));
    TRY("map", shmobj_map_create(seg, "cache", m));
    for (int i = 0; i < 100; i++) {
        char k[16];
        int n = snprintf(k, sizeof k, "key%d", i);
        TRY("map set", shmobj_map_set(*m, k, (size_t)n, "value", 5));
    }
    shmobj_value cfg = SHMOBJ_VAL_DICT_OF(
        SHMOBJ_VAL_STR("name"), SHMOBJ_VAL_STR("cli"),
        SHMOBJ_VAL_STR("workers"), SHMOBJ_VAL_INT(4),
        SHMOBJ_VAL_STR("ratio"), SHMOBJ_VAL_DOUBLE(0.5),
        SHMOBJ_VAL_STR("tags"),
        SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("a"), SHMOBJ_VAL_STR("b")));
    shmobj_ref ref;
    TRY("config", shmobj_obj_put(seg, &cfg, &ref));
    TRY("config root", shmobj_segment_root_set(seg, "config", ref));
    uint64_t shape[2] = {4, 8};
    TRY("weights", shmobj_obj_put_buffer(seg, SHMOBJ_DTYPE_F32, 2, shape, NULL,
                                         &ref, NULL));
    TRY("weights root", shmobj_segment_root_set(seg, "weights", ref));
    TRY("answer", shmobj_obj_put_int(seg, 42, &ref));
    TRY("answer root", shmobj_segment_root_set(seg, "answer", ref));
    TRY("blob", shmobj_arena_alloc(seg, 256, 0, &ref, NULL));
    TRY("blob root", shmobj_segment_root_set(seg, "blob", ref));
    shmobj_value events = SHMOBJ_VAL_MLIST();
    TRY("events", shmobj_obj_put(seg, &events, &ref));
    TRY("events root", shmobj_segment_root_set(seg, "events", ref));
    const shmobj_field fields[] = {{"x", SHMOBJ_TYPE_DOUBLE, 0, 0}};
    const double x = 1.5;
    shmobj_ref pos_shape;
    TRY("shape", shmobj_shape_put(seg, fields, 1, &pos_shape));
    TRY("position", shmobj_record_put_fields(seg, pos_shape, fields, 1, &x, &ref));
    TRY("position root", shmobj_segment_root_set(seg, "position", ref));
    return 0;
}

static int serve(const char *name, double seconds)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 8u << 20;
    o.max_size = 64u << 20;
    /* a path names a file-backed segment */
    unsigned backend = strchr(name, '/') ? SHMOBJ_BACKEND_FILE : SHMOBJ_BACKEND_SHM;
    o.backend = backend;
    shmobj_segment *seg;
    TRY("create", shmobj_segment_create(name, &o, &seg));
    shmobj_queue *q = NULL;
    shmobj_map *m = NULL;
    shmobj_topic *t = NULL;
    shmobj_topic_sub *sub = NULL;
    if (populate(seg, &q, &m) != 0 || populate_more(seg, m, &t, &sub) != 0) {
        shmobj_segment_close(seg);
        shmobj_segment_destroy(name, backend);
        return 1;
    }
    shmobj_ref msg;
    TRY("message", shmobj_obj_put_int(seg, 7, &msg));
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    double end = now_s() + seconds;
    int rc = 0;
    while (rc == 0 && now_s() < end) {
        /* a little work every 10 ms: rates for `top`, little CPU */
        for (int i = 0; i < 100 && rc == 0; i++) {
            shmobj_ref got;
            rc = shmobj_queue_put(q, msg);
            if (rc == 0)
                rc = shmobj_queue_take(q, &got);
            if (rc == 0)
                rc = shmobj_map_add(m, "counter", 7, 1, NULL);
        }
        /* one message left waiting, so the depth is not always 0 */
        if (rc == 0)
            (void)shmobj_queue_try_put(q, msg);
        struct pollfd p = {.fd = 0, .events = POLLIN};
        if (poll(&p, 1, 10) > 0) {
            char c;
            if (read(0, &c, 1) <= 0)
                break; /* stdin closed: the test is done */
        }
        shmobj_ref got;
        (void)shmobj_queue_try_take(q, &got);
    }
    if (rc != 0)
        fail("work", rc);
    shmobj_topic_unsubscribe(sub);
    shmobj_topic_close(t);
    shmobj_queue_close(q);
    shmobj_map_close(m);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, backend);
    return rc != 0;
}

/* Asleep in a take (of queue "idle", or of topic "news") until killed. */
static int wait_in(const char *name, int topic)
{
    shmobj_segment *seg;
    TRY("open", shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 5 * SECOND, &seg));
    if (topic) {
        shmobj_topic *t;
        shmobj_topic_sub *sub;
        shmobj_topic_msg msg;
        TRY("topic", shmobj_topic_open(seg, "news", &t));
        TRY("subscribe", shmobj_topic_subscribe(t, &sub));
        printf("waiting %d\n", (int)getpid());
        fflush(stdout);
        TRY("topic take", shmobj_topic_take(sub, &msg, -1));
    } else {
        shmobj_queue *q;
        shmobj_ref ref;
        TRY("queue", shmobj_queue_open(seg, "idle", &q));
        printf("waiting %d\n", (int)getpid());
        fflush(stdout);
        TRY("take", shmobj_queue_take(q, &ref));
    }
    return 1; /* woken: nothing ever comes */
}

static int damage(const char *name, const char *root, int map)
{
    shmobj_segment *seg;
    TRY("open", shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 5 * SECOND, &seg));
    shmobj_ref ref;
    TRY("root", shmobj_segment_root_get(seg, root, &ref));
    uint8_t *p;
    TRY("ptr", shmobj_arena_ptr(seg, ref, (void **)&p, NULL));
    uint64_t off = ref & ((UINT64_C(1) << 48) - 1);
    if (!map) {
        p[-8] |= 8; /* header word, bit 3 must be zero (bit 2: CACHED) */
        printf("%llu\n", (unsigned long long)(off - 16));
    } else {
        /* shard 0 at 65,792, its table reference at +72 */
        shmobj_ref table;
        memcpy(&table, p + 65792 + 72, sizeof table);
        uint8_t *t;
        TRY("table", shmobj_arena_ptr(seg, table, (void **)&t, NULL));
        uint64_t count;
        memcpy(&count, t + 64 + 32, sizeof count); /* after the 64-byte prefix */
        count++;
        memcpy(t + 64 + 32, &count, sizeof count);
        printf("%llu\n", (unsigned long long)off);
    }
    shmobj_segment_close(seg);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "serve") == 0)
        return serve(argv[2], atof(argv[3]));
    if (argc == 3 && strcmp(argv[1], "wait-queue") == 0)
        return wait_in(argv[2], 0);
    if (argc == 3 && strcmp(argv[1], "wait-topic") == 0)
        return wait_in(argv[2], 1);
    if (argc == 4 && strcmp(argv[1], "damage-heap") == 0)
        return damage(argv[2], argv[3], 0);
    if (argc == 4 && strcmp(argv[1], "damage-map") == 0)
        return damage(argv[2], argv[3], 1);
    fprintf(stderr, "usage: test-cli-helper serve NAME SECONDS | "
                    "wait-queue NAME | wait-topic NAME | "
                    "damage-heap NAME ROOT | damage-map NAME ROOT\n");
    return 2;
}
