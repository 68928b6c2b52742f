/* A C struct published through a shape, read by field name in another
 * process.
 *
 *   shape reader NAME    (may start first: it waits for the segment and
 *                         for the record)
 *   shape writer NAME
 *
 * The writer creates the segment, builds a shape from its own struct's
 * field table (SHMOBJ_FIELD_OF and SHMOBJ_FIELD_STR_OF, which take the
 * offsets with offsetof), puts one record straight from a value of that
 * struct in one call, and publishes it as the root "position". The reader
 * knows the field names only: it reads x, y and tag by name, adds 1 to
 * hits atomically, prints the record as JSON and publishes the root "seen"
 * to say it is done. The writer, asleep until "seen" appears, reads the
 * hit, shows that the shape cannot be freed while its record exists, then
 * frees the record and the shape, and removes the segment's name. */
#include <shmobj.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define WAIT_NS 10000000000 /* 10 s for each step of the other side */

/* The writer's own C struct: the shape is made from its field table. */
struct position {
    double x, y;
    int64_t hits;
    char tag[16];
};

static int fail(const char *who, const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s\n", who, what, shmobj_strerror(rc));
    return 1;
}

static int writer(const char *name)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1u << 20;
    shmobj_segment *seg;
    int rc = shmobj_segment_create(name, &o, &seg);
    if (rc != 0)
        return fail("writer", "create segment", rc);
    const shmobj_field fields[] = {
        SHMOBJ_FIELD_OF(struct position, x, SHMOBJ_TYPE_DOUBLE),
        SHMOBJ_FIELD_OF(struct position, y, SHMOBJ_TYPE_DOUBLE),
        SHMOBJ_FIELD_OF(struct position, hits, SHMOBJ_TYPE_INT),
        SHMOBJ_FIELD_STR_OF(struct position, tag), /* at most 16 bytes */
    };
    struct position p = {1.5, -2.0, 0, "start"};
    shmobj_ref shape = SHMOBJ_REF_NULL, rec = SHMOBJ_REF_NULL, seen;
    rc = shmobj_shape_put(seg, fields, sizeof fields / sizeof fields[0], &shape);
    if (rc == 0)
        rc = shmobj_record_put_fields(seg, shape, fields, sizeof fields / sizeof fields[0], &p,
                                      &rec); /* one call */
    if (rc == 0)
        rc = shmobj_segment_root_set(seg, "position", rec);
    if (rc == 0) /* asleep until the reader publishes "seen" */
        rc = shmobj_segment_root_wait(seg, "seen", WAIT_NS, &seen);
    shmobj_view v;
    int64_t hits = 0;
    if (rc == 0)
        rc = shmobj_obj_get(seg, rec, &v);
    if (rc == 0)
        rc = shmobj_field_int_get(&v, "hits", &hits);
    int busy = SHMOBJ_OK;
    if (rc == 0) /* a shape counts its records: refused while one exists */
        busy = shmobj_shape_free(seg, shape);
    if (rc == 0 && busy != SHMOBJ_EINUSE)
        rc = busy == 0 ? SHMOBJ_ECORRUPT : busy;
    /* the roots name the record, they do not own it: take them away first */
    if (rc == 0)
        rc = shmobj_segment_root_del(seg, "seen");
    if (rc == 0)
        rc = shmobj_segment_root_del(seg, "position");
    if (rc == 0)
        rc = shmobj_obj_free(seg, rec); /* gives the shape its use back */
    if (rc == 0)
        rc = shmobj_shape_free(seg, shape);
    if (rc == 0 && hits != 1)
        rc = SHMOBJ_ECORRUPT;
    if (rc != 0)
        fail("writer", "record", rc);
    else
        printf("writer: the reader hit the record once; record and shape freed\n");
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    return rc != 0;
}

static int reader(const char *name)
{
    shmobj_segment *seg;
    int rc = shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, WAIT_NS, &seg);
    if (rc != 0)
        return fail("reader", "open segment", rc);
    shmobj_ref rec;
    shmobj_view v;
    rc = shmobj_segment_root_wait(seg, "position", WAIT_NS, &rec);
    if (rc == 0)
        rc = shmobj_obj_get(seg, rec, &v);
    double x = 0, y = 0;
    const char *tag = NULL;
    size_t tag_len = 0;
    if (rc == 0) /* by name, through the shape's index: no C struct here */
        rc = shmobj_field_double_get(&v, "x", &x);
    if (rc == 0)
        rc = shmobj_field_double_get(&v, "y", &y);
    if (rc == 0)
        rc = shmobj_field_str_get(&v, "tag", &tag, &tag_len);
    shmobj_key k_hits;
    shmobj_value d_hits = SHMOBJ_VAL_STR("hits");
    if (rc == 0)
        rc = shmobj_key_init(&k_hits, &d_hits);
    int64_t before = 0;
    if (rc == 0) /* atomic, seen by the writer at once */
        rc = shmobj_view_key_int_add(&v, &k_hits, 1, &before);
    if (rc == 0) {
        printf("reader: x %.1f y %.1f tag %.*s, hits %" PRId64 " -> %" PRId64 ": ",
               x, y, (int)tag_len, tag, before, before + 1);
        rc = shmobj_view_json_write(&v, stdout);
        printf("\n");
        fflush(stdout);
    }
    if (rc == 0) /* any root will do as a signal: it wakes root_wait() */
        rc = shmobj_segment_root_set(seg, "seen", rec);
    if (rc != 0)
        fail("reader", "read", rc);
    shmobj_segment_close(seg);
    return rc != 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "writer") != 0 && strcmp(argv[1], "reader") != 0)) {
        fprintf(stderr, "usage: %s writer|reader NAME\n", argv[0]);
        return 2;
    }
    return argv[1][0] == 'w' ? writer(argv[2]) : reader(argv[2]);
}
