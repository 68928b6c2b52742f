/* A struct of counters shared by several processes.
 *
 *   counter [WORKERS] [ROUNDS]
 *
 * The parent creates a segment and puts a named struct
 * {requests, errors, bytes, busy_time} under the root "stats". It forks
 * WORKERS children; each finds the struct by its root, prepares the field
 * names once, and adds to the fields ROUNDS times: atomic updates in place
 * that no process loses. The parent waits for the children and checks the
 * totals. A child uses the segment handle it inherited from fork(): the
 * library attaches it anew on first use. */
#include <shmobj.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int worker(shmobj_segment *seg, int id, long rounds)
{
    shmobj_ref ref;
    shmobj_view stats, busy;
    shmobj_key k_req, k_err, k_bytes;
    shmobj_value d_req = SHMOBJ_VAL_STR("requests"), d_err = SHMOBJ_VAL_STR("errors"),
                 d_bytes = SHMOBJ_VAL_STR("bytes");
    int rc = shmobj_segment_root_get(seg, "stats", &ref);
    if (rc == 0)
        rc = shmobj_obj_get(seg, ref, &stats);
    if (rc == 0)
        rc = shmobj_key_init(&k_req, &d_req);
    if (rc == 0)
        rc = shmobj_key_init(&k_err, &d_err);
    if (rc == 0)
        rc = shmobj_key_init(&k_bytes, &d_bytes);
    if (rc == 0)
        rc = shmobj_field_get(&stats, "busy_time", &busy);
    for (long i = 0; i < rounds && rc == 0; i++) {
        rc = shmobj_view_key_int_add(&stats, &k_req, 1, NULL);
        if (rc == 0 && i % 10 == 0)
            rc = shmobj_view_key_int_add(&stats, &k_err, 1, NULL);
        if (rc == 0)
            rc = shmobj_view_key_int_add(&stats, &k_bytes, 100 + id, NULL);
        if (rc == 0)
            rc = shmobj_double_add(&busy, 0.5, NULL);
    }
    if (rc != 0)
        fprintf(stderr, "worker %d: %s\n", id, shmobj_strerror(rc));
    return rc != 0;
}

int main(int argc, char **argv)
{
    int workers = argc > 1 ? atoi(argv[1]) : 4;
    long rounds = argc > 2 ? strtol(argv[2], NULL, 10) : 100000;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD; /* no name: shared with the children by fork */
    o.initial_size = 1u << 20;
    shmobj_segment *seg = NULL;
    int rc = shmobj_segment_create("counter-example", &o, &seg);
    if (rc != 0) {
        fprintf(stderr, "create: %s\n", shmobj_strerror(rc));
        return 1;
    }
    static const char *const names[] = {"requests", "errors", "bytes", "busy_time"};
    const shmobj_value fields[] = {SHMOBJ_VAL_INT(0), SHMOBJ_VAL_INT(0), SHMOBJ_VAL_INT(0),
                                   SHMOBJ_VAL_DOUBLE(0.0)};
    shmobj_value desc = SHMOBJ_VAL_STRUCT(fields, 4, names);
    shmobj_ref ref;
    rc = shmobj_obj_put(seg, &desc, &ref);
    if (rc == 0)
        rc = shmobj_segment_root_set(seg, "stats", ref);
    if (rc != 0) {
        fprintf(stderr, "put: %s\n", shmobj_strerror(rc));
        return 1;
    }
    for (int w = 0; w < workers; w++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0)
            _exit(worker(seg, w, rounds));
    }
    int failed = 0, status;
    while (wait(&status) > 0)
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    shmobj_view stats, f;
    int64_t requests = 0, errors = 0, bytes = 0;
    double busy = 0;
    rc = shmobj_obj_get(seg, ref, &stats);
    if (rc == 0)
        rc = shmobj_item_int_get(&stats, 0, &requests);
    if (rc == 0)
        rc = shmobj_item_int_get(&stats, 1, &errors);
    if (rc == 0)
        rc = shmobj_item_int_get(&stats, 2, &bytes);
    if (rc == 0)
        rc = shmobj_view_item(&stats, 3, &f);
    if (rc == 0)
        rc = shmobj_double_get(&f, &busy);
    int64_t want_bytes = 0;
    for (int w = 0; w < workers; w++)
        want_bytes += (int64_t)rounds * (100 + w);
    int ok = rc == 0 && !failed && requests == (int64_t)workers * rounds &&
             errors == (int64_t)workers * ((rounds + 9) / 10) && bytes == want_bytes &&
             busy == 0.5 * (double)workers * (double)rounds;
    printf("requests %" PRId64 ", errors %" PRId64 ", bytes %" PRId64 ", busy %.1f: %s\n",
           requests, errors, bytes, busy, ok ? "none lost" : "WRONG");
    shmobj_obj_free(seg, ref);
    shmobj_segment_close(seg);
    return !ok;
}
