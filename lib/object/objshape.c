#include "objint.h"
int shmobj_shape_put(shmobj_segment *seg, const shmobj_field *f, size_t n, shmobj_ref *s) { (void)seg; (void)f; (void)n; (void)s; return SHMOBJ_ENOTSUP; }
int shmobj_shape_free(shmobj_segment *seg, shmobj_ref s) { (void)seg; (void)s; return SHMOBJ_ENOTSUP; }
int shmobj_record_put_struct(shmobj_segment *seg, shmobj_ref s, const void *c, shmobj_ref *r) { (void)seg; (void)s; (void)c; (void)r; return SHMOBJ_ENOTSUP; }
int shmobj_record_shape(const shmobj_view *v, shmobj_ref *s) { (void)v; (void)s; return SHMOBJ_ENOTSUP; }
