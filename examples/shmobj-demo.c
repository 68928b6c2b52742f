/* libshmobj in one program: a producer and a consumer process share a
 * segment and its default queue.
 *
 * 1. The producer sends a stream of typed objects (the seed's company
 *    record: a dict with a list of URLs, a double, an int and a bool), each
 *    put with completion (shmobj_queue_put_tracked(): the object itself
 *    travels, no envelope). The consumer reads each in place, increments
 *    its "employees" field atomically and marks it done; the producer waits
 *    for the completion, sees the update, and frees the object.
 * 2. The producer builds a large tensor-like buffer (a float32 matrix in a
 *    dict) directly in the segment and sends it several times; the
 *    consumer reads every element in place (no copy), stores the sum in the
 *    dict's "sum" field and marks it done; the producer checks the sum.
 *
 * It prints messages/s for the objects and GiB/s for the tensor.
 * usage: shmobj-demo [objects [tensor_MiB [rounds]]] */
#include <shmobj.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SECOND INT64_C(1000000000)
#define WINDOW 64 /* objects in flight */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define CHECK(what, expr)                                                      \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ != 0) {                                                        \
            fprintf(stderr, "%s: %s: %s\n", role, what, shmobj_strerror(rc_)); \
            return 1;                                                          \
        }                                                                      \
    } while (0)

/* ---- consumer ------------------------------------------------------------ */

static int consumer(const char *name)
{
    const char *role = "consumer";
    shmobj_segment *seg = NULL;
    shmobj_queue *q = NULL;
    CHECK("open segment", shmobj_segment_open(name, SHMOBJ_BACKEND_SHM,
                                              10 * SECOND, &seg));
    CHECK("open queue", shmobj_queue_open(seg, SHMOBJ_QUEUE_DEFAULT, &q));
    shmobj_queue_spin_set(q, 50000); /* 50 us before sleeping */
    unsigned long objects = 0, tensors = 0;
    for (;;) {
        /* the message is the object: a company record, a tensor, or the
         * int that says stop; the consumer borrows it until its done */
        shmobj_ref obj;
        CHECK("take", shmobj_queue_take_timed(q, &obj, 10 * SECOND));
        shmobj_view v, item;
        CHECK("object", shmobj_obj_get(seg, obj, &v));
        if (shmobj_view_type(&v) == SHMOBJ_TYPE_INT) {
            CHECK("done", shmobj_queue_done(q, obj));
            break;
        }
        if (shmobj_field_get(&v, "websites", &item) == 0) {
            /* read in place, update a field atomically */
            const char *url;
            size_t len;
            shmobj_view urls, first;
            CHECK("websites", shmobj_field_get(&v, "websites", &urls));
            CHECK("url", shmobj_view_item(&urls, 0, &first));
            CHECK("url", shmobj_str_get(&first, &url, &len));
            if (len == 0)
                return 1;
            CHECK("employees", shmobj_field_get(&v, "employees", &item));
            CHECK("add", shmobj_int_add(&item, 1, NULL));
            objects++;
        } else {
            /* the tensor: read every element where it lies */
            shmobj_buffer_info bi = {.struct_size = sizeof bi};
            CHECK("data", shmobj_field_get(&v, "data", &item));
            CHECK("buffer", shmobj_buffer_get(&item, &bi));
            const float *x = bi.data;
            size_t n = (size_t)(bi.nbytes / sizeof(float));
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            size_t i = 0;
            for (; i + 4 <= n; i += 4) {
                s0 += x[i];
                s1 += x[i + 1];
                s2 += x[i + 2];
                s3 += x[i + 3];
            }
            for (; i < n; i++)
                s0 += x[i];
            CHECK("sum", shmobj_field_get(&v, "sum", &item));
            CHECK("set sum", shmobj_double_set(&item, s0 + s1 + s2 + s3));
            tensors++;
        }
        CHECK("done", shmobj_queue_done(q, obj));
    }
    printf("consumer %d: %lu objects updated, %lu tensors summed, in place\n",
           (int)getpid(), objects, tensors);
    fflush(stdout);
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
    return 0;
}

/* ---- producer ------------------------------------------------------------ */

struct pending {
    shmobj_ref obj;
    int64_t employees;
};

/* Check the consumer's update of a record that is done, and free it (the
 * object is the producer's again once its completion came). */
static int check_record(shmobj_segment *seg, const struct pending *p)
{
    const char *role = "producer";
    shmobj_view v, item;
    int64_t employees;
    CHECK("object", shmobj_obj_get(seg, p->obj, &v));
    CHECK("employees", shmobj_field_get(&v, "employees", &item));
    CHECK("read", shmobj_int_get(&item, &employees));
    if (employees != p->employees + 1) {
        fprintf(stderr, "producer: update not seen\n");
        return 1;
    }
    CHECK("free", shmobj_obj_free(seg, p->obj));
    return 0;
}

/* Wait for one record's completion, then check and free it. */
static int finish_record(shmobj_segment *seg, shmobj_queue *q,
                         const struct pending *p)
{
    const char *role = "producer";
    CHECK("wait done", shmobj_queue_wait_done(q, p->obj, 10 * SECOND));
    return check_record(seg, p);
}

static int producer(const char *name, shmobj_segment *seg, shmobj_queue *q,
                    unsigned long nobj, unsigned tensor_mib, unsigned rounds)
{
    const char *role = "producer";
    shmobj_queue_spin_set(q, 50000);
    CHECK("wait for the consumer", shmobj_segment_wait_attached(seg, 1, 10 * SECOND));
    printf("producer %d: consumer attached to \"%s\"\n", (int)getpid(), name);

    /* 1. a stream of typed objects, each completed by the consumer */
    static struct pending win[WINDOW];
    double t0 = now_s();
    for (unsigned long i = 0; i < nobj; i++) {
        struct pending *p = &win[i % WINDOW];
        if (i >= WINDOW && finish_record(seg, q, p) != 0)
            return 1;
        shmobj_value rec = SHMOBJ_VAL_DICT_OF(
            SHMOBJ_VAL_STR("websites"),
            SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_STR("https://example.com"),
                               SHMOBJ_VAL_STR("https://example.org")),
            SHMOBJ_VAL_STR("avg_salary"), SHMOBJ_VAL_DOUBLE(3000.0),
            SHMOBJ_VAL_STR("employees"), SHMOBJ_VAL_INT((int64_t)i),
            SHMOBJ_VAL_STR("in_a_good_state"), SHMOBJ_VAL_BOOL(1));
        p->employees = (int64_t)i;
        CHECK("put object", shmobj_obj_put(seg, &rec, &p->obj));
        CHECK("send", shmobj_queue_put_tracked(q, p->obj, 10 * SECOND));
    }
    /* the last window: everything this handle sent, in one wait */
    CHECK("wait all", shmobj_queue_wait_all(q, 10 * SECOND));
    for (unsigned long i = nobj > WINDOW ? nobj - WINDOW : 0; i < nobj; i++)
        if (check_record(seg, &win[i % WINDOW]) != 0)
            return 1;
    double t1 = now_s();
    printf("objects: %lu dicts sent, updated in place by the consumer and "
           "completed: %.0f messages/s\n", nobj, (double)nobj / (t1 - t0));

    /* 2. a tensor built in place, sent without a copy, read in place */
    uint64_t side = 1;
    while ((side * 2) * (side * 2) * sizeof(float) <= (uint64_t)tensor_mib << 20)
        side *= 2;
    uint64_t shape[2] = {side, side};
    shmobj_value tv = SHMOBJ_VAL_DICT_OF(
        SHMOBJ_VAL_STR("name"), SHMOBJ_VAL_STR("weights"),
        SHMOBJ_VAL_STR("data"), SHMOBJ_VAL_BUFFER(SHMOBJ_DTYPE_F32, 2, shape, NULL),
        SHMOBJ_VAL_STR("sum"), SHMOBJ_VAL_DOUBLE(0.0));
    shmobj_ref tensor;
    CHECK("put tensor", shmobj_obj_put(seg, &tv, &tensor));
    shmobj_view v, item;
    shmobj_buffer_info bi = {.struct_size = sizeof bi};
    CHECK("tensor", shmobj_obj_get(seg, tensor, &v));
    CHECK("data", shmobj_field_get(&v, "data", &item));
    CHECK("buffer", shmobj_buffer_get(&item, &bi));
    float *x = bi.data;
    size_t n = (size_t)(bi.nbytes / sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(i & 1023) * 0.25f; /* exact in float and in sums */
    double expect = 0;
    for (size_t i = 0; i < 1024; i++)
        expect += (double)i * 0.25;
    expect *= (double)(n / 1024);
    t0 = now_s();
    for (unsigned r = 0; r < rounds; r++) {
        CHECK("send tensor", shmobj_queue_put_tracked(q, tensor, 10 * SECOND));
        CHECK("wait done", shmobj_queue_wait_done(q, tensor, 30 * SECOND));
        double sum;
        CHECK("sum", shmobj_field_get(&v, "sum", &item));
        CHECK("read sum", shmobj_double_get(&item, &sum));
        if (sum != expect) {
            fprintf(stderr, "producer: consumer's sum %.1f, expected %.1f\n", sum,
                    expect);
            return 1;
        }
        CHECK("reset sum", shmobj_double_set(&item, 0.0));
    }
    t1 = now_s();
    double gib = (double)bi.nbytes * rounds / (1024.0 * 1024.0 * 1024.0);
    printf("tensor: %llux%llu float32 (%.0f MiB) sent %u times, summed in place "
           "by the consumer: %.2f GiB/s\n",
           (unsigned long long)side, (unsigned long long)side,
           (double)bi.nbytes / (1 << 20), rounds, gib / (t1 - t0));
    CHECK("free tensor", shmobj_obj_free(seg, tensor));

    shmobj_ref stop;
    CHECK("stop", shmobj_obj_put_int(seg, 0, &stop));
    CHECK("send stop", shmobj_queue_put_tracked(q, stop, 10 * SECOND));
    CHECK("wait stop", shmobj_queue_wait_done(q, stop, 10 * SECOND));
    CHECK("free", shmobj_obj_free(seg, stop));
    return 0;
}

int main(int argc, char **argv)
{
    unsigned long nobj = argc > 1 ? strtoul(argv[1], NULL, 10) : 50000;
    unsigned tensor_mib = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 64;
    unsigned rounds = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 16;
    if (tensor_mib == 0 || tensor_mib > 1024 || rounds == 0) {
        fprintf(stderr, "usage: %s [objects [tensor_MiB (1..1024) [rounds]]]\n",
                argv[0]);
        return 2;
    }
    const char *role = "producer";
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines in order with the child's */
    char name[64];
    snprintf(name, sizeof name, "shmobj-demo-%d", (int)getpid());
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = ((uint64_t)tensor_mib << 20) + (64u << 20);
    shmobj_segment *seg = NULL;
    shmobj_queue *q = NULL;
    CHECK("create segment", shmobj_segment_create(name, &o, &seg));
    int rc = shmobj_queue_create(seg, SHMOBJ_QUEUE_DEFAULT, 256, 0, &q);
    if (rc != 0) {
        fprintf(stderr, "producer: create queue: %s\n", shmobj_strerror(rc));
        shmobj_segment_close(seg);
        shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
        return 1;
    }
    printf("producer %d: created segment \"%s\" and its default queue\n",
           (int)getpid(), name);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        /* a fresh attach by name, as an unrelated process would */
        _exit(consumer(name));
    }
    rc = child < 0 ? 1 : producer(name, seg, q, nobj, tensor_mib, rounds);
    int status = 1;
    if (child > 0) {
        if (rc != 0)
            kill(child, SIGKILL);
        waitpid(child, &status, 0);
    }
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    return rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
