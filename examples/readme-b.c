/* process B: may start before A; waits up to 5 s for each step of A */
#include <shmobj.h>
#include <stdio.h>

#define WAIT_NS 5000000000

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "demo";
    shmobj_segment *seg;
    int rc = shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, WAIT_NS, &seg);
    if (rc != 0) {
        fprintf(stderr, "B: %s\n", shmobj_strerror(rc));
        return 1;
    }
    shmobj_queue *q = NULL;                   /* sleeps until A created it */
    rc = shmobj_queue_open_timed(seg, SHMOBJ_QUEUE_DEFAULT, WAIT_NS, &q);
    shmobj_ref obj;
    if (rc == 0)
        rc = shmobj_queue_take_timed(q, &obj, WAIT_NS);
    shmobj_view v, field;
    if (rc == 0)
        rc = shmobj_obj_get(seg, obj, &v);    /* read in place, no decode */
    if (rc == 0)
        rc = shmobj_field_get(&v, "employees", &field);
    if (rc == 0)
        rc = shmobj_int_add(&field, 1, NULL); /* atomic, seen by every process */
    shmobj_key k;                             /* a key looked up often: prepare it once */
    shmobj_value kd = SHMOBJ_VAL_STR("employees");
    if (rc == 0)
        rc = shmobj_key_init(&k, &kd);
    int64_t employees = 0;
    if (rc == 0)                              /* v["employees"] += 1, one call */
        rc = shmobj_view_key_int_add(&v, &k, 1, &employees);
    shmobj_map *m = NULL;                     /* A made it before it sent */
    if (rc == 0)
        rc = shmobj_map_open_or_create(seg, "cache", &m);
    char value[16];
    size_t len = 0;
    if (rc == 0)
        rc = shmobj_map_get(m, "key", 3, value, sizeof value, &len);
    if (rc == 0)
        printf("employees %lld, key %.*s\n", (long long)employees + 1,
               (int)len, value);
    else
        fprintf(stderr, "B: %s\n", shmobj_strerror(rc));
    shmobj_map_close(m);
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM); /* remove the name */
    return rc != 0;
}
