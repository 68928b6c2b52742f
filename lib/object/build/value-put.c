/* The put calls: a value the caller describes becomes one new block.
 * Each ends in shmobj__obj_put(), at the top of value-write.c, which
 * goes down in one direction:
 *
 *   1. measure: the bytes the block needs, with every structural check
 *      (value-measure.c, shmobj__measure());
 *   2. allocate the block and write its tree header (shmobj__tree_new(),
 *      value-build.h);
 *   3. write the value into it, checking content on the caller's bytes
 *      (the rest of value-write.c);
 *   4. take what its records and adopted objects need: a use of each
 *      record's shape, the ADOPTED mark of each adopted block
 *      (references.c).
 *
 * What both passes must answer alike about a description (a container's
 * layout, a packed tuple, a buffer's layout, where a key lives) is
 * answered once, in value-build.h, which both read. */
#include "value-build.h"

int shmobj_obj_put(shmobj_segment *seg, const shmobj_value *val, shmobj_ref *ref)
{
    if (seg == NULL || val == NULL || ref == NULL)
        return SHMOBJ_EINVAL;
    return shmobj__obj_put(shmobj__space_of_seg(seg), val, ref);
}

int shmobj_obj_put_int(shmobj_segment *seg, int64_t x, shmobj_ref *ref)
{
    shmobj_value v = SHMOBJ_VAL_INT(x);
    return shmobj_obj_put(seg, &v, ref);
}

int shmobj_obj_put_double(shmobj_segment *seg, double x, shmobj_ref *ref)
{
    shmobj_value v = SHMOBJ_VAL_DOUBLE(x);
    return shmobj_obj_put(seg, &v, ref);
}

int shmobj_obj_put_str(shmobj_segment *seg, const char *s, size_t len,
                       shmobj_ref *ref)
{
    if (s == NULL)
        return SHMOBJ_EINVAL;
    shmobj_value v = SHMOBJ_VAL_STRN(s, len);
    return shmobj_obj_put(seg, &v, ref);
}

int shmobj_obj_put_bytes(shmobj_segment *seg, const void *p, size_t n,
                         shmobj_ref *ref)
{
    if (p == NULL && n != 0)
        return SHMOBJ_EINVAL;
    shmobj_value v = SHMOBJ_VAL_BYTES(p, n);
    return shmobj_obj_put(seg, &v, ref);
}

int shmobj_obj_put_buffer(shmobj_segment *seg, unsigned dtype, unsigned ndim,
                          const uint64_t *shape, const void *data,
                          shmobj_ref *ref, void **out_data)
{
    shmobj_value v = SHMOBJ_VAL_BUFFER(dtype, ndim, shape, data);
    int rc = shmobj_obj_put(seg, &v, ref);
    if (rc != 0 || out_data == NULL)
        return rc;
    /* The layout is ours: root slot -> the buffer right after the prefix. */
    shmobj_view view;
    shmobj_buffer_info info = {.struct_size = sizeof info};
    rc = shmobj_obj_get(seg, *ref, &view);
    if (rc == 0)
        rc = shmobj_buffer_get(&view, &info);
    if (rc != 0) {
        (void)shmobj_obj_free(seg, *ref);
        return rc;
    }
    *out_data = info.data;
    return 0;
}
