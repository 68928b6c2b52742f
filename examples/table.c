/* A table: many records of one C struct, appended by several processes,
 * counted in place, read a column at a time.
 *
 *   table [WORKERS [ROWS]]     (defaults 4 and 10000)
 *
 * The parent makes a segment, a shape from its struct's field table
 * (SHMOBJ_FIELD_OF takes each offset with offsetof) and a table of that
 * shape, and publishes it as the root "readings". Each worker process
 * appends ROWS rows of its own, then adds 1 to the "seen" field of every
 * row of the table atomically (rows of the other workers too, whatever
 * they have appended so far). The parent then reads the "value" column
 * as a strided array, run by run, checks its sum, and checks that no
 * worker's row was lost and that each worker's rows are in the order it
 * appended them. */
#include <shmobj.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct reading {
    int64_t worker;
    int64_t seq;
    double value;
    int64_t seen;
    char sensor[16];
};

static int fail(const char *what, int rc)
{
    fprintf(stderr, "table: %s: %s\n", what, shmobj_strerror(rc));
    return 1;
}

static int worker(const char *name, int64_t w, int64_t rows)
{
    shmobj_segment *seg;
    shmobj_ref ref;
    shmobj_view t;
    size_t seen;
    uint64_t len;
    int rc = shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 10000000000, &seg);
    if (rc != 0)
        return fail("open", rc);
    rc = shmobj_segment_root_get(seg, "readings", &ref);
    if (rc == 0)
        rc = shmobj_obj_get(seg, ref, &t);
    if (rc == 0) /* the field's position, by name, once */
        rc = shmobj_table_index(&t, "seen", &seen);
    for (int64_t i = 0; rc == 0 && i < rows; i++) {
        struct reading r = {w, i, (double)i, 0, ""};
        snprintf(r.sensor, sizeof r.sensor, "sensor-%" PRId64, w);
        rc = shmobj_table_append(&t, &r, 1, sizeof r, NULL);
    }
    if (rc == 0)
        rc = shmobj_table_len(&t, &len);
    for (uint64_t i = 0; rc == 0 && i < len; i++)
        rc = shmobj_table_int_add(&t, i, seen, 1, NULL); /* atomic, lock-free */
    if (rc != 0)
        fail("worker", rc);
    shmobj_segment_close(seg);
    return rc != 0;
}

int main(int argc, char **argv)
{
    int workers = argc > 1 ? atoi(argv[1]) : 4;
    int64_t rows = argc > 2 ? atoll(argv[2]) : 10000;
    if (workers < 1 || workers > 64 || rows < 1) {
        fprintf(stderr, "usage: %s [WORKERS [ROWS]]\n", argv[0]);
        return 2;
    }
    char name[64];
    snprintf(name, sizeof name, "shmobj-example-table-%ld", (long)getpid());
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 4u << 20;
    o.max_size = 256u << 20;
    shmobj_segment *seg;
    int rc = shmobj_segment_create(name, &o, &seg);
    if (rc != 0)
        return fail("create", rc);
    const shmobj_field fields[] = {
        SHMOBJ_FIELD_OF(struct reading, worker, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_OF(struct reading, seq, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_OF(struct reading, value, SHMOBJ_TYPE_DOUBLE),
        SHMOBJ_FIELD_OF(struct reading, seen, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_STR_OF(struct reading, sensor),
    };
    shmobj_ref shape = SHMOBJ_REF_NULL, ref = SHMOBJ_REF_NULL;
    shmobj_view t;
    rc = shmobj_shape_put(seg, fields, 5, &shape);
    if (rc == 0) /* room for 1,024 rows; it grows by chunks that never move */
        rc = shmobj_table_put(seg, shape, sizeof(struct reading), 1024, &ref);
    if (rc == 0)
        rc = shmobj_obj_get(seg, ref, &t);
    if (rc == 0)
        rc = shmobj_segment_root_set(seg, "readings", ref);
    if (rc != 0)
        return fail("table", rc);
    pid_t pids[64];
    for (int w = 0; w < workers; w++) {
        pids[w] = fork();
        if (pids[w] == 0)
            _exit(worker(name, w, rows));
    }
    int bad = 0;
    for (int w = 0; w < workers; w++) {
        int st;
        bad |= waitpid(pids[w], &st, 0) != pids[w] || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    /* the value column, run after run (one run per chunk), in place */
    uint64_t len = 0, runs = 0;
    double sum = 0;
    shmobj_table_len(&t, &len);
    for (uint64_t i = 0; !bad && i < len;) {
        shmobj_buffer_info col = {.struct_size = sizeof col};
        rc = shmobj_table_column_get(&t, 2, i, &col);
        if (rc != 0)
            return fail("column", rc);
        for (uint64_t r = 0; r < col.shape[0]; r++)
            sum += *(const double *)((const char *)col.data + r * (uint64_t)col.strides[0]);
        i += col.shape[0];
        runs++;
    }
    /* every row whole, each worker's in its order, none lost */
    int64_t next[64] = {0};
    for (uint64_t i = 0; !bad && i < len; i++) {
        struct reading r;
        rc = shmobj_table_get(&t, i, &r, sizeof r);
        if (rc != 0 || r.worker < 0 || r.worker >= workers || r.seq != next[r.worker]++ ||
            r.seen < 1 || r.seen > workers)
            bad = 1;
    }
    double want = (double)workers * (double)rows * (double)(rows - 1) / 2;
    if (!bad && (len != (uint64_t)workers * (uint64_t)rows || sum != want))
        bad = 1;
    printf("table: %" PRIu64 " rows from %d processes in %" PRIu64
           " chunks, value column sum %.0f: %s\n",
           len, workers, runs, sum, bad ? "WRONG" : "ok");
    shmobj_segment_root_del(seg, "readings");
    shmobj_obj_free(seg, ref); /* the table and its chunks */
    shmobj_shape_free(seg, shape);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    return bad;
}
