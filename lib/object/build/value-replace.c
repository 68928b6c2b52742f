/* Replacing: shmobj_view_set, the one call that changes what an OBJ slot
 * names (scalars are replaced in place like any scalar store).
 *
 * Invariants kept here:
 * - The new value is written into a block of its own, fully, and the
 *   slot's block is marked SEPARATE (atomic OR, release) before the new
 *   reference is published, so a free of that block walks it and finds
 *   the new block.
 * - The reference is published by one atomic exchange: exactly one
 *   replacer receives each old reference, so a separate block is freed
 *   exactly once. An old inline value's bytes stay in its parent's block
 *   (freed with it); the separate blocks reached from them are freed at
 *   once.
 * - A view kept past a free of its slot's block is refused
 *   (SHMOBJ_ESTALE) before anything is written or freed. */
#include <string.h>

#include "value-build.h"

int shmobj_view_set(shmobj_view *view, const shmobj_value *val)
{
    if (view == NULL || val == NULL || view->slot == NULL || view->seg == NULL)
        return SHMOBJ_EINVAL;
    if (view->flags & SHMOBJ__VIEW_RO)
        return SHMOBJ_EACCES;
    struct shmobj__space *sp = shmobj__space_of_seg(view->seg);
    if (sp->readonly)
        return SHMOBJ_ERDONLY;
    struct shmobj__slot *s = view->slot;
    /* A view kept past a free of the slot's block would write into (and
     * free what is reachable from) whatever was built there since. */
    if (!shmobj__blk_live(sp, view->slot_blk, view->slot_gen))
        return SHMOBJ_ESTALE;
    uint64_t pl = 0;
    switch (view->slot_tag) {
    case SHMOBJ__SLOT_BOOL:
    case SHMOBJ__SLOT_INT:
    case SHMOBJ__SLOT_UINT:
    case SHMOBJ__SLOT_DOUBLE:
        if (val->type != view->slot_tag)
            return SHMOBJ_ETYPE;
        if (val->type == SHMOBJ_TYPE_BOOL)
            pl = val->v.b != 0;
        else
            memcpy(&pl, &val->v, sizeof pl); /* i, u and d share the bytes */
        atomic_store_explicit(&s->payload, pl, memory_order_release);
        return 0;
    case SHMOBJ__SLOT_OBJ:
        break;
    case SHMOBJ__SLOT_LINK: {
        /* a link takes another link: one store, nothing owned or freed */
        if (val->type != SHMOBJ_TYPE_LINK)
            return SHMOBJ_ETYPE;
        int rc = shmobj__ref_check(sp, val->v.ref, 0);
        if (rc != 0)
            return rc;
        atomic_store_explicit(&s->payload, val->v.ref, memory_order_release);
        return 0;
    }
    case SHMOBJ__SLOT_ISTR:
    case SHMOBJ__SLOT_RECORD:
        return SHMOBJ_EACCES; /* a record's inline string; a record's header */
    default:
        return SHMOBJ_ECORRUPT;
    }
    switch (val->type) {
    case SHMOBJ_TYPE_BOOL:
    case SHMOBJ_TYPE_INT:
    case SHMOBJ_TYPE_UINT:
    case SHMOBJ_TYPE_DOUBLE:
    case SHMOBJ_TYPE_LINK: /* an object's slot never becomes a link */
        return SHMOBJ_ETYPE;
    case SHMOBJ_TYPE_NULL:
        break;
    default: {
        int rc = shmobj__obj_put(sp, val, &pl);
        if (rc != 0)
            return rc;
        /* Mark the slot's block before the reference is published, so a
         * free of that block walks it and finds the new block. */
        struct shmobj__tree *t = (void *)(sp->base + view->slot_blk);
        atomic_fetch_or_explicit(&t->flags, SHMOBJ__TREE_SEPARATE, memory_order_release);
    }
    }
    /* One exchange: exactly one replacer receives each old reference. */
    uint64_t old = atomic_exchange_explicit(&s->payload, pl, memory_order_acq_rel);
    int rc = 0;
    uint64_t oo = shmobj__ref_off(old), budget = shmobj__work_budget(sp);
    if (old != 0 && !(oo >= view->slot_blk && oo - view->slot_blk < view->slot_blen)) {
        rc = shmobj__free_tree(sp, old, 0, 0, &budget);
    } else if (old != 0 && s->reserved0 != SHMOBJ__SLOT_PTUP_MARK) {
        /* (a packed tuple with its header in the slot holds strings only) */
        /* The old value's bytes stay in its parent's block, but items
         * replaced inside it since have blocks of their own: free those. */
        shmobj_view ov = {0};
        rc = shmobj__view_follow(sp, old, view->slot_blk, view->slot_blen,
                                 view->slot_gen, &ov);
        if (rc == 0)
            rc = shmobj__free_children(sp, &ov, 0, &budget);
    }
    uint8_t ro = view->flags & SHMOBJ__VIEW_RO;
    int rc2 = shmobj__view_slot(sp, (uint64_t)((uint8_t *)s - sp->base),
                                view->slot_blk, view->slot_blen, view->slot_gen,
                                ro, view);
    return rc != 0 ? rc : rc2;
}
