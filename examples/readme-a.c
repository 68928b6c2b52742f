/* process A: creates the segment, a map and a queue, sends one record */
#include <shmobj.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "demo";
    shmobj_segment *seg;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);          /* 64 MiB, mode 0600, no growth */
    o.max_size = 1ull << 30;                  /* may grow to 1 GiB */
    int rc = shmobj_segment_create(name, &o, &seg);
    if (rc != 0) {
        fprintf(stderr, "A: %s\n", shmobj_strerror(rc));
        return 1;
    }
    shmobj_map *m = NULL;                     /* a shared hash table: made by */
    rc = shmobj_map_open_or_create(seg, "cache", &m); /* whoever comes first */
    if (rc == 0)
        rc = shmobj_map_set(m, "key", 3, "value", 5);
    shmobj_queue *q = NULL;
    if (rc == 0)
        rc = shmobj_queue_create(seg, SHMOBJ_QUEUE_DEFAULT, 1024, 0, &q);
    shmobj_value rec = SHMOBJ_VAL_DICT_OF(
        SHMOBJ_VAL_STR("employees"), SHMOBJ_VAL_INT(10),
        SHMOBJ_VAL_STR("avg_salary"), SHMOBJ_VAL_DOUBLE(3000.0));
    shmobj_ref obj;
    if (rc == 0)
        rc = shmobj_obj_put(seg, &rec, &obj); /* measured, allocated once, written */
    if (rc == 0)
        rc = shmobj_queue_put(q, obj);
    if (rc != 0)
        fprintf(stderr, "A: %s\n", shmobj_strerror(rc));
    shmobj_queue_close(q);
    shmobj_map_close(m);
    shmobj_segment_close(seg);                /* the segment stays for B */
    return rc != 0;
}
