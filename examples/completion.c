/* Producer and consumer of typed objects, with completion.
 *
 *   completion consumer NAME COUNT    (may start first: it waits)
 *   completion producer NAME COUNT
 *
 * The producer creates the segment and the queue "jobs", then sends COUNT
 * objects, each put tracked (shmobj_queue_put_tracked: no envelope): the
 * consumer reads the object in place, writes its answer into it, and marks
 * it done; the producer, woken by that, reads the answer and frees the
 * object. At most WINDOW objects are in flight; at the end the producer
 * waits for everything it sent with shmobj_queue_wait_all(). Every wait
 * sleeps (inotify, futexes); nothing polls. */
#include <shmobj.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_NS 10000000000 /* 10 s for each step of the other side */
#define WINDOW 8

static int fail(const char *who, const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s\n", who, what, shmobj_strerror(rc));
    return 1;
}

static int consumer(const char *name, long count)
{
    shmobj_segment *seg = NULL;
    shmobj_queue *q = NULL;
    /* waits for the segment to be created and set up, then for the queue */
    int rc = shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, WAIT_NS, &seg);
    if (rc != 0)
        return fail("consumer", "open segment", rc);
    rc = shmobj_queue_open_timed(seg, "jobs", WAIT_NS, &q);
    if (rc != 0) {
        shmobj_segment_close(seg);
        return fail("consumer", "open queue", rc);
    }
    shmobj_key k_n, k_square; /* field names prepared once */
    shmobj_value d_n = SHMOBJ_VAL_STR("n"), d_square = SHMOBJ_VAL_STR("square");
    shmobj_key_init(&k_n, &d_n);
    shmobj_key_init(&k_square, &d_square);
    for (long i = 0; i < count && rc == 0; i++) {
        shmobj_ref obj;
        shmobj_view job, field;
        int64_t n = 0;
        rc = shmobj_queue_take_timed(q, &obj, WAIT_NS);
        if (rc == 0)
            rc = shmobj_obj_get(seg, obj, &job); /* in place: no copy */
        if (rc == 0)
            rc = shmobj_view_get_key(&job, &k_n, &field);
        if (rc == 0)
            rc = shmobj_int_get(&field, &n);
        if (rc == 0)
            rc = shmobj_view_get_key(&job, &k_square, &field);
        if (rc == 0)
            rc = shmobj_int_set(&field, n * n); /* the answer, in place */
        if (rc == 0)
            rc = shmobj_queue_done(q, obj); /* wakes the producer */
    }
    if (rc != 0)
        fail("consumer", "take", rc);
    else
        printf("consumer: answered %ld jobs\n", count);
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
    return rc != 0;
}

struct flight {
    shmobj_ref obj;
    int64_t n;
};

/* Check the answer of an object the consumer is done with, and free it. */
static int settle_done(shmobj_segment *seg, struct flight *f)
{
    shmobj_view job, field;
    int64_t square = 0;
    int rc = shmobj_obj_get(seg, f->obj, &job);
    if (rc == 0)
        rc = shmobj_field_get(&job, "square", &field);
    if (rc == 0)
        rc = shmobj_int_get(&field, &square);
    if (rc == 0 && square != f->n * f->n)
        rc = SHMOBJ_ECORRUPT;
    /* done: the consumer no longer reads it, the sender frees it */
    int rc2 = shmobj_obj_free(seg, f->obj);
    return rc != 0 ? rc : rc2;
}

/* Wait for the oldest object in flight, then settle it. */
static int settle(shmobj_segment *seg, shmobj_queue *q, struct flight *f)
{
    int rc = shmobj_queue_wait_done(q, f->obj, WAIT_NS);
    return rc != 0 ? rc : settle_done(seg, f);
}

static int producer(const char *name, long count)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 4u << 20;
    shmobj_segment *seg = NULL;
    shmobj_queue *q = NULL;
    int rc = shmobj_segment_create(name, &o, &seg);
    if (rc != 0)
        return fail("producer", "create segment", rc);
    rc = shmobj_queue_create(seg, "jobs", 64, 0, &q);
    if (rc != 0) {
        shmobj_segment_close(seg);
        shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
        return fail("producer", "create queue", rc);
    }
    struct flight ring[WINDOW];
    long sent = 0, settled = 0;
    while (rc == 0 && sent < count) {
        if (sent - settled == WINDOW) { /* the window is full: oldest first */
            rc = settle(seg, q, &ring[settled % WINDOW]);
            settled++;
            continue;
        }
        struct flight *f = &ring[sent % WINDOW];
        f->n = sent;
        shmobj_value job = SHMOBJ_VAL_DICT_OF(
            SHMOBJ_VAL_STR("n"), SHMOBJ_VAL_INT(f->n),
            SHMOBJ_VAL_STR("square"), SHMOBJ_VAL_INT(-1),
            SHMOBJ_VAL_STR("from"), SHMOBJ_VAL_STR("producer"));
        rc = shmobj_obj_put(seg, &job, &f->obj);
        if (rc == 0)
            rc = shmobj_queue_put_tracked(q, f->obj, WAIT_NS);
        if (rc != 0)
            shmobj_obj_free(seg, f->obj); /* not sent: still ours alone */
        else
            sent++;
    }
    /* The rest in one wait: everything this handle sent is done. */
    if (rc == 0)
        rc = shmobj_queue_wait_all(q, WAIT_NS);
    while (rc == 0 && settled < sent) {
        rc = settle_done(seg, &ring[settled % WINDOW]);
        settled++;
    }
    if (rc != 0)
        fail("producer", "send", rc);
    else
        printf("producer: %ld jobs answered, every object freed by its sender\n", count);
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    return rc != 0;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "producer") != 0 && strcmp(argv[1], "consumer") != 0)) {
        fprintf(stderr, "usage: %s producer|consumer NAME COUNT\n", argv[0]);
        return 2;
    }
    long count = strtol(argv[3], NULL, 10);
    return argv[1][0] == 'p' ? producer(argv[2], count) : consumer(argv[2], count);
}
