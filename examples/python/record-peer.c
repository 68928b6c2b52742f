/* The C side of the Python example (record.py).
 *
 *   record-peer make NAME     create the segment NAME and publish a record
 *                             under the root "record", then exit (the
 *                             segment stays for the Python process)
 *   record-peer check NAME    check what Python changed, print the record
 *                             as JSON, and remove the segment
 *   record-peer destroy NAME  remove the segment */
#include <shmobj.h>
#include <stdio.h>
#include <string.h>

static int check(const char *name)
{
    shmobj_segment *seg = NULL;
    shmobj_ref ref;
    shmobj_view rec, f;
    int64_t reads = 0;
    double temperature = 0;
    int rc = shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &seg);
    if (rc == 0)
        rc = shmobj_segment_root_get(seg, "record", &ref);
    if (rc == 0)
        rc = shmobj_obj_get(seg, ref, &rec);
    if (rc == 0)
        rc = shmobj_field_get(&rec, "reads", &f);
    if (rc == 0)
        rc = shmobj_int_get(&f, &reads);
    if (rc == 0)
        rc = shmobj_field_get(&rec, "temperature", &f);
    if (rc == 0)
        rc = shmobj_double_get(&f, &temperature);
    if (rc == 0) {
        shmobj_view_json_write(&rec, stdout);
        putchar('\n');
    }
    if (rc != 0)
        fprintf(stderr, "check: %s\n", shmobj_strerror(rc));
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    /* record.py adds 1 to reads and sets the temperature to 22.25 */
    return rc != 0 || reads != 1 || temperature != 22.25;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s make|check|destroy NAME\n", argv[0]);
        return 2;
    }
    const char *name = argv[2];
    if (strcmp(argv[1], "check") == 0)
        return check(name);
    if (strcmp(argv[1], "destroy") == 0)
        return shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM) != 0;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1u << 20;
    shmobj_segment *seg = NULL;
    int rc = shmobj_segment_create(name, &o, &seg);
    if (rc != 0) {
        fprintf(stderr, "make: %s\n", shmobj_strerror(rc));
        return 1;
    }
    shmobj_value rec = SHMOBJ_VAL_DICT_OF(
        SHMOBJ_VAL_STR("sensor"), SHMOBJ_VAL_STR("boiler-7"),
        SHMOBJ_VAL_STR("reads"), SHMOBJ_VAL_INT(0),
        SHMOBJ_VAL_STR("temperature"), SHMOBJ_VAL_DOUBLE(21.5),
        SHMOBJ_VAL_STR("limits"), SHMOBJ_VAL_LIST_OF(SHMOBJ_VAL_INT(5), SHMOBJ_VAL_INT(95)),
        SHMOBJ_VAL_STR("enabled"), SHMOBJ_VAL_BOOL(1));
    shmobj_ref ref;
    rc = shmobj_obj_put(seg, &rec, &ref);
    if (rc == 0)
        rc = shmobj_segment_root_set(seg, "record", ref);
    if (rc != 0)
        fprintf(stderr, "make: %s\n", shmobj_strerror(rc));
    shmobj_segment_close(seg);
    return rc != 0;
}
