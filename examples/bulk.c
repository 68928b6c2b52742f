/* Bulk bytes through a queue without a copy: message blocks.
 *
 *   bulk [COUNT] [BYTES]
 *
 * A forked consumer starts first and waits for the queue. The producer
 * creates it, then sends COUNT frames of BYTES each: it allocates a
 * message block (shmobj_queue_msg_alloc()), writes the frame straight into
 * the block's data and puts the block's reference. The consumer reads the
 * frame in place (shmobj_queue_msg_data()) and gives the block back with
 * shmobj_queue_msg_done(), which frees it: the bytes are written once and
 * never copied.
 *
 * Then one block is sent three times with completion
 * (SHMOBJ_QUEUE_MSG_TRACK): the producer waits until the consumer's
 * shmobj_queue_msg_done() (the same call on its side), rearms the block
 * with shmobj_queue_msg_reset(), fills it again and puts it again, and
 * frees it itself at the end with shmobj_queue_msg_free(). */
#include <shmobj.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_NS 10000000000 /* 10 s for each step of the other side */
#define ROUNDS 3            /* sends of the one tracked block */

static int fail(const char *who, const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s\n", who, what, shmobj_strerror(rc));
    return 1;
}

/* Frame i: every byte is (i + position) mod 251, so a byte out of place
 * or a frame out of order shows. */
static void fill(unsigned char *p, size_t n, long i)
{
    for (size_t j = 0; j < n; j++)
        p[j] = (unsigned char)(((size_t)i + j) % 251);
}

static int same(const unsigned char *p, size_t n, long i)
{
    for (size_t j = 0; j < n; j++)
        if (p[j] != (unsigned char)(((size_t)i + j) % 251))
            return 0;
    return 1;
}

static int consumer(shmobj_segment *seg, long count, size_t bytes)
{
    shmobj_queue *q = NULL;
    int rc = shmobj_queue_open_timed(seg, "frames", WAIT_NS, &q);
    for (long i = 0; i < count + ROUNDS && rc == 0; i++) {
        shmobj_ref m;
        void *data;
        size_t len = 0;
        rc = shmobj_queue_take_timed(q, &m, WAIT_NS);
        if (rc == 0)
            rc = shmobj_queue_msg_data(q, m, &data, &len); /* in place */
        if (rc == 0 && (len != bytes || !same(data, len, i)))
            rc = SHMOBJ_ECORRUPT;
        if (rc == 0) /* untracked: frees it; tracked: wakes the sender */
            rc = shmobj_queue_msg_done(q, m);
    }
    shmobj_queue_close(q);
    return rc != 0 ? fail("consumer", "take", rc) : 0;
}

static int producer(shmobj_segment *seg, long count, size_t bytes)
{
    shmobj_queue *q = NULL;
    int rc = shmobj_queue_create(seg, "frames", 64, 0, &q);
    if (rc != 0)
        return fail("producer", "create queue", rc);
    for (long i = 0; i < count && rc == 0; i++) {
        shmobj_ref m;
        void *data;
        rc = shmobj_queue_msg_alloc(q, bytes, 0, &m, &data);
        if (rc == 0) {
            fill(data, bytes, i); /* written once, where the consumer reads it */
            rc = shmobj_queue_put_timed(q, m, WAIT_NS);
            if (rc != 0) /* never put: still the allocator's to free */
                shmobj_queue_msg_free(q, m);
        }
    }
    shmobj_ref t = SHMOBJ_REF_NULL;
    void *data = NULL;
    if (rc == 0)
        rc = shmobj_queue_msg_alloc(q, bytes, SHMOBJ_QUEUE_MSG_TRACK, &t, &data);
    for (long r = 0; r < ROUNDS && rc == 0; r++) {
        if (r > 0) /* done: make it pending again before its next put */
            rc = shmobj_queue_msg_reset(q, t);
        if (rc == 0) {
            fill(data, bytes, count + r);
            rc = shmobj_queue_put_timed(q, t, WAIT_NS);
        }
        if (rc == 0) /* asleep until the consumer's msg_done */
            rc = shmobj_queue_msg_wait_done(q, t, WAIT_NS);
    }
    if (t != SHMOBJ_REF_NULL)
        shmobj_queue_msg_free(q, t);
    shmobj_queue_close(q);
    if (rc != 0)
        return fail("producer", "send", rc);
    printf("producer: %ld frames of %zu bytes, then one tracked block %d times, "
           "none copied\n", count, bytes, ROUNDS);
    return 0;
}

int main(int argc, char **argv)
{
    long count = argc > 1 ? atol(argv[1]) : 1000;
    long bytes = argc > 2 ? atol(argv[2]) : 65536;
    if (count < 0 || bytes < 1) {
        fprintf(stderr, "usage: %s [COUNT] [BYTES]\n", argv[0]);
        return 2;
    }
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD; /* shared with the forked consumer */
    o.initial_size = 16u << 20;
    o.max_size = 1ull << 30;
    shmobj_segment *seg;
    int rc = shmobj_segment_create("bulk-example", &o, &seg);
    if (rc != 0)
        return fail("producer", "create segment", rc);
    pid_t pid = fork(); /* the consumer starts first: it waits for the queue */
    if (pid == 0)
        _exit(consumer(seg, count, (size_t)bytes));
    int bad = pid < 0 ? fail("producer", "fork", SHMOBJ_ESYS)
                      : producer(seg, count, (size_t)bytes);
    int st = 0;
    if (pid > 0 && (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0))
        bad = 1;
    shmobj_segment_close(seg);
    return bad;
}
