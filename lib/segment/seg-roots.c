/* Named roots: a fixed directory of (name, reference) pairs in the segment
 * so that unrelated processes find shared objects by name. Small (128
 * entries) and scanned linearly under the segment lock: lookups are rare
 * (once per object and process), so simplicity wins over speed. */
#include <string.h>

#include "segment.h"

static struct shmobj__seg_root *roots(shmobj_segment *seg)
{
    return (struct shmobj__seg_root *)(seg->space.base + SHMOBJ__SEG_ROOTS_OFF);
}

static bool root_name_ok(const char *name)
{
    if (name == NULL)
        return false;
    size_t n = strnlen(name, SHMOBJ__SEG_ROOT_NAME);
    return n > 0 && n < SHMOBJ__SEG_ROOT_NAME;
}

/* The entry holding name, or NULL. The stored name may be unterminated in
 * a damaged segment; comparing at most the field's width stays inside it. */
static struct shmobj__seg_root *find(shmobj_segment *seg, const char *name)
{
    struct shmobj__seg_root *r = roots(seg);
    for (unsigned i = 0; i < SHMOBJ__SEG_ROOTS; i++)
        if (r[i].ref != 0 && strncmp(r[i].name, name, SHMOBJ__SEG_ROOT_NAME) == 0)
            return &r[i];
    return NULL;
}

/* Publish ref under name; with `replace` false an existing name is left
 * alone and reported, so two creators racing for one name cannot both win.
 * A reference to a freed block (its generation no longer the block's) is
 * refused; the check runs under the lock every free takes, so the block
 * cannot be freed between the check and the publish. */
static int root_put(shmobj_segment *seg, const char *name, shmobj_ref ref,
                    bool replace)
{
    if (seg == NULL || !root_name_ok(name) || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__segment_lock(seg);
    if (rc != 0)
        return rc;
    if (seg->space.ops->check(&seg->space, ref, NULL) == SHMOBJ_ESTALE) {
        shmobj__segment_unlock(seg);
        return SHMOBJ_ESTALE;
    }
    struct shmobj__seg_root *e = find(seg, name);
    if (e != NULL && !replace) {
        shmobj__segment_unlock(seg);
        return SHMOBJ_EEXIST;
    }
    if (e == NULL) {
        struct shmobj__seg_root *r = roots(seg);
        for (unsigned i = 0; i < SHMOBJ__SEG_ROOTS && e == NULL; i++)
            if (r[i].ref == 0)
                e = &r[i];
        if (e != NULL) {
            /* ref stays 0 until the name is complete: a writer killed here
             * leaves a free entry, not a half-named root. */
            memset(e->name, 0, sizeof e->name);
            memcpy(e->name, name, strlen(name));
        }
    }
    if (e != NULL)
        __atomic_store_n(&e->ref, ref, __ATOMIC_RELEASE);
    shmobj__segment_unlock(seg);
    return e != NULL ? 0 : SHMOBJ_EFULL;
}

int shmobj_segment_root_set(shmobj_segment *seg, const char *name,
                            shmobj_ref ref)
{
    return root_put(seg, name, ref, true);
}

int shmobj_segment_root_add(shmobj_segment *seg, const char *name,
                            shmobj_ref ref)
{
    return root_put(seg, name, ref, false);
}

int shmobj_segment_root_get(shmobj_segment *seg, const char *name,
                            shmobj_ref *ref)
{
    if (seg == NULL || !root_name_ok(name) || ref == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__segment_lock(seg);
    if (rc != 0)
        return rc;
    struct shmobj__seg_root *e = find(seg, name);
    if (e != NULL)
        *ref = e->ref;
    shmobj__segment_unlock(seg);
    return e != NULL ? 0 : SHMOBJ_ENOTFOUND;
}

int shmobj_segment_root_del(shmobj_segment *seg, const char *name)
{
    if (seg == NULL || !root_name_ok(name))
        return SHMOBJ_EINVAL;
    int rc = shmobj__segment_lock(seg);
    if (rc != 0)
        return rc;
    struct shmobj__seg_root *e = find(seg, name);
    if (e != NULL)
        __atomic_store_n(&e->ref, 0, __ATOMIC_RELEASE);
    shmobj__segment_unlock(seg);
    return e != NULL ? 0 : SHMOBJ_ENOTFOUND;
}
