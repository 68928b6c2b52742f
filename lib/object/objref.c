#include "objint.h"
int shmobj_view_follow(const shmobj_view *view, shmobj_view *target) { (void)view; (void)target; return SHMOBJ_ENOTSUP; }
int shmobj_link_get(const shmobj_view *view, shmobj_ref *ref) { (void)view; (void)ref; return SHMOBJ_ENOTSUP; }
