/* A tensor passed between processes without a copy.
 *
 *   tensor [ROWS] [COLS]
 *
 * The parent allocates a float32 buffer of ROWS x COLS in the segment and
 * fills it in place (no staging copy), then sends its reference to a
 * forked child through a queue, inside a tracked message. The child maps
 * the same bytes (shmobj_buffer_get() gives its own address of them),
 * sums them, scales them by 2 in place and marks the message done; the
 * parent, woken by the completion, checks the scaled data and frees the
 * buffer. The bytes of the tensor are never copied. */
#include <shmobj.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_NS 10000000000

static int child(shmobj_segment *seg)
{
    shmobj_queue *q = NULL;
    shmobj_ref msg, ref;
    void *data;
    size_t len;
    shmobj_view v;
    shmobj_buffer_info info;
    info.struct_size = sizeof info;
    int rc = shmobj_queue_open_timed(seg, "tensors", WAIT_NS, &q);
    if (rc == 0)
        rc = shmobj_queue_take_timed(q, &msg, WAIT_NS);
    if (rc == 0)
        rc = shmobj_queue_msg_data(q, msg, &data, &len);
    if (rc == 0) {
        memcpy(&ref, data, sizeof ref);
        rc = shmobj_obj_get(seg, ref, &v);
    }
    if (rc == 0)
        rc = shmobj_buffer_get(&v, &info);
    if (rc == 0 && (info.dtype != SHMOBJ_DTYPE_F32 || info.ndim != 2))
        rc = SHMOBJ_ETYPE;
    if (rc == 0) {
        float *x = info.data; /* C order: strides are cols * 4 and 4 */
        size_t n = (size_t)(info.shape[0] * info.shape[1]);
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            sum += x[i];
            x[i] *= 2.0f;
        }
        printf("child: %" PRIu64 " x %" PRIu64 " f32 at %p, sum %.0f\n", info.shape[0],
               info.shape[1], info.data, sum);
        rc = shmobj_queue_msg_done(q, msg);
    }
    if (rc != 0)
        fprintf(stderr, "child: %s\n", shmobj_strerror(rc));
    shmobj_queue_close(q);
    fflush(stdout); /* _exit() does not */
    return rc != 0;
}

int main(int argc, char **argv)
{
    uint64_t shape[2] = {argc > 1 ? strtoull(argv[1], NULL, 10) : 1024,
                         argc > 2 ? strtoull(argv[2], NULL, 10) : 1024};
    size_t n = (size_t)(shape[0] * shape[1]);
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.initial_size = 16u << 20;
    o.max_size = 4ull << 30; /* grows when a larger tensor needs it */
    shmobj_segment *seg = NULL;
    int rc = shmobj_segment_create("tensor-example", &o, &seg);
    if (rc != 0) {
        fprintf(stderr, "create: %s\n", shmobj_strerror(rc));
        return 1;
    }
    pid_t pid = fork(); /* the child starts first and waits for the queue */
    if (pid == 0)
        _exit(child(seg));
    shmobj_queue *q = NULL;
    shmobj_ref ref = 0, msg = 0;
    float *x = NULL;
    void *data;
    rc = shmobj_queue_create(seg, "tensors", 4, 0, &q);
    if (rc == 0) /* data NULL: allocated, left for us to fill in place */
        rc = shmobj_obj_put_buffer(seg, SHMOBJ_DTYPE_F32, 2, shape, NULL, &ref,
                                   (void **)&x);
    if (rc == 0) {
        for (size_t i = 0; i < n; i++)
            x[i] = (float)(i % 7);
        rc = shmobj_queue_msg_alloc(q, sizeof ref, SHMOBJ_QUEUE_MSG_TRACK, &msg, &data);
    }
    if (rc == 0) {
        memcpy(data, &ref, sizeof ref);
        rc = shmobj_queue_put(q, msg);
    }
    if (rc == 0)
        rc = shmobj_queue_msg_wait_done(q, msg, WAIT_NS);
    int ok = rc == 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = x[i] == 2.0f * (float)(i % 7); /* the child's writes, seen in place */
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (rc != 0)
        fprintf(stderr, "parent: %s\n", shmobj_strerror(rc));
    printf("parent: %zu floats scaled in place by the child: %s\n", n, ok ? "yes" : "NO");
    if (msg != 0)
        shmobj_queue_msg_free(q, msg);
    if (ref != 0)
        shmobj_obj_free(seg, ref);
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
    return !ok;
}
