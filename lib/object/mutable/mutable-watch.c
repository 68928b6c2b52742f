/* Watches of a mutable container (shmobj/watch.h): the container is named
 * by its block and its place in it, the words its changes report (shmobj__mut_changed() after
 * a change made without the lock, shmobj__mut_unlock() after one made
 * under it); the table of watches and the handle's calls are the
 * segment's, reached through the space. A freed container is reported by
 * the segment's free itself. */
#include "mutable.h"
#include "shmobj/watch.h"

int shmobj_watch_container(const shmobj_view *container, shmobj_watch **out)
{
    struct shmobj__mc c;
    if (container == NULL || out == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__mut_open(container,
                              1u << SHMOBJ_TYPE_MLIST | 1u << SHMOBJ_TYPE_MDICT |
                                  1u << SHMOBJ_TYPE_MSET,
                              &c);
    if (rc != 0)
        return rc;
    if (c.sp->readonly)
        return SHMOBJ_ERDONLY;
    if (shmobj__space_closed(c.sp))
        return SHMOBJ_ESTALE;
    if (c.sp->ops->watch_open == NULL)
        return SHMOBJ_ENOTSUP;
    /* named by its block (whose free reports every watch of it) and its
     * place there, as shmobj__mut_changed() reports its changes */
    return c.sp->ops->watch_open(c.sp, shmobj__ref_make(container->obj_blk, container->obj_gen),
                                 shmobj__off_of(c.sp, container->obj), 0, out);
}
