/* Freeing: a whole object tree, and the separate blocks its replaced
 * items were given.
 *
 * Invariants kept here:
 * - Inline objects go with their block; only the separate blocks (slots
 *   replaced by shmobj_view_set) are reached by a walk, and only from a
 *   block whose SEPARATE flag says one of its slots was ever replaced, so
 *   freeing a tree that never changed costs one arena free (a record
 *   alone: that free, then its shape's use given back).
 * - The walk reads the segment through the views' checked paths
 *   (shmobj__tree_open, shmobj__view_follow) and is bounded in depth
 *   (SHMOBJ_OBJ_MAXDEPTH) and in work (shmobj__work_budget), so a damaged
 *   graph is refused, never followed in a cycle.
 * - The first error met is returned, but the walk goes on to the other
 *   items: what can be freed is freed. */
#include <string.h>

#include "layer-interface.h"
#include "mutable.h"

static int free_slot(struct shmobj__space *sp, struct shmobj__slot *s,
                     uint64_t blk, uint64_t blen, uint16_t gen, int depth,
                     uint64_t *budget);

/* Free what the items of a container reach outside its block. */
int shmobj__free_children(struct shmobj__space *sp, const shmobj_view *v,
                          int depth, uint64_t *budget)
{
    switch (v->type) {
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_TUPLE:
    case SHMOBJ_TYPE_STRUCT:
    case SHMOBJ_TYPE_DICT:
    case SHMOBJ_TYPE_RECORD:
        if (v->flags & SHMOBJ__VIEW_PACKED)
            return 0; /* a packed tuple holds strings only */
        break;
    case SHMOBJ_TYPE_MLIST:
    case SHMOBJ_TYPE_MDICT:
    case SHMOBJ_TYPE_MSET:
        /* their items live in blocks of their own (mutable-section.c) */
        return shmobj__mut_free(sp, v, depth, budget);
    case SHMOBJ_TYPE_TABLE:
        /* its chunks and its shape's use (table-check.c) */
        return shmobj__table_free(sp, v);
    default:
        return 0; /* sets, strings, bytes, buffers hold no references out */
    }
    if (depth >= SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_ECORRUPT;
    int first = 0;
    for (uint32_t i = 0; i < v->count; i++) {
        if (shmobj__work_take(sp, budget, 1) != 0)
            return SHMOBJ_ECORRUPT;
        struct shmobj__slot *item =
            (void *)((uint8_t *)v->obj + shmobj__value_rel(v->type, v->len, i));
        int rc = free_slot(sp, item, v->obj_blk, v->obj_blen, v->obj_gen,
                           depth + 1, budget);
        if (rc != 0 && first == 0)
            first = rc;
    }
    /* A record gone (its block freed, or replaced) gives its shape's use
     * back, after what it reached was freed. */
    if (v->type == SHMOBJ_TYPE_RECORD)
        shmobj__shape_unuse_view(sp, v);
    return first;
}

static int free_slot(struct shmobj__space *sp, struct shmobj__slot *s,
                     uint64_t blk, uint64_t blen, uint16_t gen, int depth,
                     uint64_t *budget)
{
    if (s->tag == SHMOBJ__SLOT_RECORD) {
        /* a record in its block's root slot's place */
        shmobj_view v = {0};
        int rc = shmobj__view_slot(sp, (uint64_t)((uint8_t *)s - sp->base), blk, blen, gen,
                                   0, &v);
        return rc != 0 ? rc : shmobj__free_children(sp, &v, depth, budget);
    }
    if (s->tag != SHMOBJ__SLOT_OBJ)
        return 0; /* scalars, links (weak) and a record's inline strings */
    uint64_t p = atomic_load_explicit(&s->payload, memory_order_acquire);
    if (p == 0)
        return 0;
    uint64_t off = shmobj__ref_off(p);
    if (!(off >= blk && off - blk < blen))
        return shmobj__free_tree(sp, p, 0, depth + 1, budget);
    if (s->reserved0 == SHMOBJ__SLOT_PTUP_MARK)
        return 0; /* a packed tuple with its header in the slot: strings */
    shmobj_view v = {0};
    int rc = shmobj__view_follow(sp, p, blk, blen, gen, &v);
    if (rc != 0)
        return rc;
    return shmobj__free_children(sp, &v, depth, budget);
}

/* from_caller: ref is the caller's argument, not read from a slot (see
 * shmobj__tree_open()). */
int shmobj__free_tree(struct shmobj__space *sp, shmobj__ref ref, int from_caller,
                      int depth, uint64_t *budget)
{
    uint64_t blk, blen;
    if (depth > SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_ECORRUPT;
    int rc = shmobj__tree_open(sp, ref, from_caller, &blk, &blen);
    if (rc != 0)
        return rc;
    struct shmobj__tree *t = (void *)(sp->base + blk);
    uint16_t flags = atomic_load_explicit(&t->flags, memory_order_acquire);
    /* An adopted object belongs to its container, which frees it; a shape
     * is freed only when no record uses it (and never from a slot: shapes
     * are not adopted). */
    if (flags & SHMOBJ__TREE_SHAPE)
        return from_caller ? shmobj__shape_free(sp, ref, blk) : SHMOBJ_ECORRUPT;
    if (from_caller && (flags & SHMOBJ__TREE_ADOPTED))
        return SHMOBJ_EACCES;
    /* A block none of whose slots was ever given a block of its own holds
     * no reference out, and one without records no shape's use: nothing to
     * walk. */
    const struct shmobj__slot *root = (const void *)(t + 1);
    int rootrec = shmobj__tree_rootrec(t->version, flags);
    if (!(flags & (SHMOBJ__TREE_SEPARATE | SHMOBJ__TREE_RECORDS)) &&
        (rootrec || ((flags & SHMOBJ__TREE_ROOTREC) && root->tag == SHMOBJ__SLOT_RECORD))) {
        /* a record alone whose fields reach no other block: its use
         * back, without a walk (the header is the tree header, version 3,
         * or the root slot's bytes) */
        shmobj__ref shape;
        memcpy(&shape, rootrec ? (const uint8_t *)&t->size : (const uint8_t *)root + 8,
               sizeof shape);
        shmobj__shape_unuse(sp, shape);
    } else if (rootrec) {
        shmobj_view v = {0};
        rc = shmobj__view_root(sp, blk, blen, shmobj__ref_gen(ref), &v);
        if (rc == 0)
            rc = shmobj__free_children(sp, &v, depth, budget);
    } else if (flags & (SHMOBJ__TREE_SEPARATE | SHMOBJ__TREE_RECORDS | SHMOBJ__TREE_ROOTREC))
        rc = free_slot(sp, (void *)(sp->base + blk + sizeof(struct shmobj__tree)),
                       blk, blen, shmobj__ref_gen(ref), depth, budget);
    int rc2 = sp->ops->free(sp, ref);
    if (rc2 == 0) /* its mutable containers' watchers find them stale */
        shmobj__space_changed(sp, blk, 0, SHMOBJ__WATCH_WHOLE);
    return rc2 != 0 ? rc2 : rc;
}

int shmobj_obj_free(shmobj_segment *seg, shmobj_ref ref)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    if (sp == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    if (sp->readonly)
        return SHMOBJ_ERDONLY;
    /* Fast path: a block that never had a slot replaced holds no reference
     * out, so only the arena needs to see it (its free checks the
     * generation: a stale ref still gives SHMOBJ_ESTALE). The header read
     * here only decides between the paths and is bounds-checked; anything
     * unusual takes the full path, which checks everything. */
    uint64_t off = shmobj__ref_off(ref);
    uint64_t mapped = atomic_load_explicit(&sp->mapped, memory_order_acquire);
    if (shmobj__aligned(off, 16) && shmobj__range_ok(off, SHMOBJ__PREFIX, mapped)) {
        const struct shmobj__tree *t = (const void *)(sp->base + off);
        /* any flag (separate blocks, records, adopted, a shape) takes the
         * full path, but ROOTREC alone: a record alone (version 3) whose
         * fields reach no other block, which gives its shape's use back
         * after the arena freed it */
        uint16_t flags = atomic_load_explicit(&((struct shmobj__tree *)t)->flags,
                                              memory_order_acquire);
        uint16_t version = t->version;
        if (t->magic == SHMOBJ__TREE_MAGIC && shmobj__tree_version_ok(version) &&
            (flags == 0 ||
             (flags == SHMOBJ__TREE_ROOTREC && shmobj__tree_rootrec(version, flags)))) {
            /* Read before the free, used only after it succeeded: the
             * arena's free checks the generation under the heap's lock,
             * so a block it frees was ours until then, and its header,
             * written once by the put, still named its shape. Given back
             * after the free, a crash in between leaves the shape one use
             * too many (it is never freed), never a record whose shape
             * is gone. */
            shmobj__ref shape;
            memcpy(&shape, (const uint8_t *)&t->size, sizeof shape);
            int rc = sp->ops->free(sp, ref);
            if (rc == 0) {
                if (flags != 0)
                    shmobj__shape_unuse(sp, shape); /* checks the shape */
                shmobj__space_changed(sp, off, 0, SHMOBJ__WATCH_WHOLE);
            }
            if (rc != SHMOBJ_ESTALE && rc != SHMOBJ_ECORRUPT)
                return rc;
            /* Let the full path decide which error to report. */
        }
    }
    uint64_t budget = shmobj__work_budget(sp);
    return shmobj__free_tree(sp, ref, 1, 0, &budget);
}
