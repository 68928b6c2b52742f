/* References between objects: the checks of adopted and linked objects,
 * the marks a put takes once its block is written, and following links.
 *
 * Invariants kept here:
 * - An adopted object is a separate block of its container, reached and
 *   freed as a replaced item is (graph-free.c), so an object has one owner:
 *   the ADOPTED bit of its block's tree header, taken by one atomic OR
 *   whose previous value must not have it (SHMOBJ_EOWNED otherwise). A
 *   mutable container takes the bit for an item it adopts before the item
 *   is published (shmobj__ref_take), gives it back when the change fails,
 *   and clears it when it hands the item to the caller (a pop).
 * - What a put takes beyond its own block (the ADOPTED marks, its records'
 *   shape uses) is taken as the writer meets it and logged
 *   (shmobj__claim_now); a put that fails gives the log back. Past the
 *   log's size the log is given back at once and everything is taken after
 *   the block is fully written, by one walk of that block in a fixed order
 *   (shmobj__claim), where a step that fails is followed by a second walk
 *   that gives back exactly the steps taken before it. So a failed put
 *   leaves no mark and no use behind (a process killed in between leaves
 *   them, and the blocks they name leak: never a freed block in use).
 * - A link is never followed by the library's own walks (free, check,
 *   JSON, claim): only shmobj_view_follow() follows one, checking the
 *   target's block and generation as shmobj_obj_get() does, and a target
 *   that is gone is SHMOBJ_ESTALE, never another object: whatever the old
 *   offset holds that is not a live object of the link's generation,
 *   consistent or not, since only the link's own bytes can be the link's
 *   damage (SHMOBJ_ECORRUPT). The check is the arena's O(1) one, so bytes
 *   of another block's payload that forge a whole block, tree header and
 *   root included, at that offset pass it (doc/format-arena.md). */
#include "value-build.h"
#include "slot-read.h"

int shmobj__ref_check(struct shmobj__space *sp, shmobj__ref ref, int adopt)
{
    uint64_t blk, blen;
    if (sp == NULL || ref == 0)
        return SHMOBJ_EINVAL;
    int rc = shmobj__tree_open(sp, ref, 1, &blk, &blen);
    if (rc != 0 || !adopt)
        return rc;
    struct shmobj__tree *t = (void *)(sp->base + blk);
    const struct shmobj__slot *root = (const void *)(t + 1);
    uint16_t flags = atomic_load_explicit(&t->flags, memory_order_acquire);
    uint8_t tag = root->tag;
    /* A shape would be freed with its container while records use it; a
     * scalar or null value cannot be a separate block's value. */
    if ((flags & SHMOBJ__TREE_SHAPE) ||
        !(tag == SHMOBJ__SLOT_RECORD || shmobj__tree_rootrec(t->version, flags) ||
          (tag == SHMOBJ__SLOT_OBJ &&
           atomic_load_explicit(&((struct shmobj__slot *)root)->payload,
                                memory_order_relaxed) != 0)))
        return SHMOBJ_ETYPE;
    return flags & SHMOBJ__TREE_ADOPTED ? SHMOBJ_EOWNED : 0;
}

/* ---- what a put takes once written ------------------------------------ */

struct claim {
    struct shmobj__space *sp;
    int undo;      /* 0: take; 1: give back the first `left` steps */
    uint64_t done; /* steps taken */
    uint64_t left; /* steps still to give back */
};

static int mark(struct shmobj__space *sp, shmobj__ref ref, int undo)
{
    uint64_t blk, blen;
    int rc = shmobj__tree_open(sp, ref, 0, &blk, &blen);
    if (rc != 0)
        return rc;
    struct shmobj__tree *t = (void *)(sp->base + blk);
    if (undo) {
        atomic_fetch_and_explicit(&t->flags, (uint16_t)~SHMOBJ__TREE_ADOPTED,
                                  memory_order_acq_rel);
        return 0;
    }
    uint16_t old = atomic_fetch_or_explicit(&t->flags, SHMOBJ__TREE_ADOPTED,
                                            memory_order_acq_rel);
    return old & SHMOBJ__TREE_ADOPTED ? SHMOBJ_EOWNED : 0;
}

int shmobj__ref_take(struct shmobj__space *sp, shmobj__ref ref, int adopt)
{
    int rc = shmobj__ref_check(sp, ref, adopt);
    if (rc != 0 || !adopt)
        return rc;
    return mark(sp, ref, 0);
}

void shmobj__ref_unadopt(struct shmobj__space *sp, shmobj__ref ref)
{
    if (ref != 0)
        (void)mark(sp, ref, 1);
}

/* One step: a record's shape use (record 1) or an adopted block's mark.
 * 1 when the giving back is complete (stop the walk). */
static int step(struct claim *c, int record, shmobj__ref ref)
{
    if (c->undo) {
        if (c->left == 0)
            return 1;
        c->left--;
        if (record)
            shmobj__shape_unuse(c->sp, ref);
        else
            (void)mark(c->sp, ref, 1);
        return 0;
    }
    int rc = record ? shmobj__shape_use(c->sp, ref) : mark(c->sp, ref, 0);
    if (rc == 0)
        c->done++;
    return rc;
}

static int claim_walk(struct claim *c, const shmobj_view *v, int depth)
{
    int rc;
    if (depth > SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_ECORRUPT;
    if (v->type == SHMOBJ_TYPE_RECORD && (rc = step(c, 1, v->len)) != 0)
        return rc;
    switch (v->type) {
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES:
    case SHMOBJ_TYPE_BUFFER:
    case SHMOBJ_TYPE_SET: /* members are keys: never adopted, never records */
        return 0;
    default:
        break;
    }
    if (v->obj == NULL)
        return 0;
    for (uint32_t i = 0; i < v->count; i++) {
        shmobj_view it;
        /* kinds without items refuse at once: nothing to walk */
        if (shmobj_view_item(v, i, &it) != 0)
            return 0;
        if (it.obj == NULL)
            continue;
        if (it.obj_blk != v->obj_blk) {
            /* a block of its own in a block just written: adopted */
            uint64_t ref = atomic_load_explicit(&((struct shmobj__slot *)it.slot)->payload,
                                                memory_order_acquire);
            rc = step(c, 0, ref);
        } else {
            rc = claim_walk(c, &it, depth + 1);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

int shmobj__claim_now(struct shmobj__wr *w, int record, shmobj__ref ref,
                      _Atomic uint64_t *uses)
{
    struct shmobj__claims *cl = w->cl;
    if (cl == NULL || cl->after)
        return 0;
    if (cl->n == SHMOBJ__CLAIM_LOG) {
        /* many: give the log back and take everything once written */
        shmobj__claims_undo(w->sp, cl);
        cl->after = 1;
        return 0;
    }
    int rc;
    if (record) {
        uint64_t old = atomic_fetch_add_explicit(uses, 1, memory_order_acq_rel);
        rc = 0;
        if (old & SHMOBJ__SHAPE_CLOSING) {
            atomic_fetch_sub_explicit(uses, 1, memory_order_acq_rel);
            rc = SHMOBJ_ESTALE;
        }
    } else {
        rc = mark(w->sp, ref, 0);
    }
    if (rc == 0) {
        cl->ref[cl->n] = ref;
        cl->record[cl->n] = (uint8_t)record;
        cl->n++;
    }
    return rc;
}

void shmobj__claims_undo(struct shmobj__space *sp, struct shmobj__claims *cl)
{
    while (cl->n > 0) {
        cl->n--;
        if (cl->record[cl->n])
            shmobj__shape_unuse(sp, cl->ref[cl->n]);
        else
            (void)mark(sp, cl->ref[cl->n], 1);
    }
}

int shmobj__claim(struct shmobj__space *sp, uint64_t blk, uint64_t blen, uint16_t gen)
{
    shmobj_view root;
    struct claim c = {sp, 0, 0, 0};
    int rc = shmobj__view_root(sp, blk, blen, gen, &root);
    if (rc == 0)
        rc = claim_walk(&c, &root, 0);
    if (rc != 0 && c.done > 0) {
        c.undo = 1;
        c.left = c.done;
        (void)claim_walk(&c, &root, 0);
    }
    return rc;
}

/* ---- links ------------------------------------------------------------- */

int shmobj_view_follow(const shmobj_view *view, shmobj_view *target)
{
    if (view == NULL || target == NULL)
        return SHMOBJ_EINVAL;
    if (view->slot_tag != SHMOBJ__SLOT_LINK || view->type != SHMOBJ_TYPE_LINK) {
        if (target != view)
            *target = *view;
        return 0;
    }
    struct shmobj__space *sp = shmobj__space_of(view);
    uint64_t ref = atomic_load_explicit(&((struct shmobj__slot *)view->slot)->payload,
                                        memory_order_acquire);
    if (!shmobj__slot_live(view))
        return SHMOBJ_ESTALE;
    uint64_t blk, blen;
    int rc = shmobj__tree_open(sp, ref, 1, &blk, &blen);
    if (rc == 0) {
        rc = shmobj__view_root(sp, blk, blen, shmobj__ref_gen(ref), target);
        return rc == SHMOBJ_ECORRUPT ? SHMOBJ_ESTALE : rc;
    }
    /* A put links only an object's reference: nonzero, 16-aligned. Any
     * other value is the link slot's own damage. (Judged here, off the
     * path of a target found: tree_open refuses such a value too.) */
    if (ref == 0 || !shmobj__aligned(shmobj__ref_off(ref), 16))
        return SHMOBJ_ECORRUPT;
    /* The link is weak: once its target was freed, the old offset holds
     * whatever the heap put there since, a free block's or a merged
     * block's bytes or another object's payload, which may look like a
     * block header of the link's generation, consistent or not, with or
     * without the tree magic, its root possible or not. None of that is
     * damage of the link, and the arena's own damage is
     * shmobj_segment_check()'s to report: a target that is not a live
     * object of the link's generation is gone. */
    if (rc == SHMOBJ_EINVAL || rc == SHMOBJ_ETYPE || rc == SHMOBJ_ECORRUPT)
        return SHMOBJ_ESTALE;
    return rc;
}

int shmobj_link_get(const shmobj_view *view, shmobj_ref *ref)
{
    if (view == NULL || ref == NULL)
        return SHMOBJ_EINVAL;
    if (view->slot_tag != SHMOBJ__SLOT_LINK || view->type != SHMOBJ_TYPE_LINK)
        return SHMOBJ_ETYPE;
    uint64_t r = atomic_load_explicit(&((struct shmobj__slot *)view->slot)->payload,
                                      memory_order_acquire);
    if (!shmobj__slot_live(view))
        return SHMOBJ_ESTALE;
    *ref = r;
    return 0;
}
