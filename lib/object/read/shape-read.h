/* Reading a shape: the light check every record's view, put and free
 * goes through, and the shape's use count. Part of the read room (below
 * the builder, which writes records through it, and the shape room, which
 * makes and frees shapes); shmobj__shape_open(), the full check with the
 * arena's walk, is in shape/shape.c.
 *
 * Invariant kept here: what a light check returns lies within the mapped
 * segment and within the shape block's own extent, so every read through
 * it stays inside the mapping however the bytes were damaged. */
#ifndef SHMOBJ_OBJECT_SHAPE_READ_H
#define SHMOBJ_OBJECT_SHAPE_READ_H

#include "slot-read.h"
#include "racy.h"

/* A shape checked without the arena's walk of the block's boundary tags,
 * for the hot paths (every record view: C1 takes one per record; a
 * record's put and free, which add to and take from its use count): the
 * shape's block must lie in the mapped segment, carry the reference's
 * generation (one load: a freed shape fails it), and hold a whole shape
 * in the extent its own tree header gives, itself bounded by the mapped
 * segment. So every later read
 * through the view stays inside the mapping, and a freed shape is
 * SHMOBJ_ESTALE; what only the arena's walk sees (a forged reference into
 * another block's bytes that look like a shape) is left to
 * shmobj_obj_check(), which opens shapes fully. */
static inline __attribute__((always_inline)) int
shmobj__shape_open_light(struct shmobj__space *sp, shmobj__ref ref,
                         struct shmobj__shape_info *out)
{
    uint64_t blk = shmobj__ref_off(ref), body;
    uint64_t mapped = atomic_load_explicit(&sp->mapped, memory_order_acquire);
    if (blk < 16 || !shmobj__aligned(blk, 16) ||
        !shmobj__range_ok(blk, SHMOBJ__PREFIX + 16, mapped))
        return SHMOBJ_ECORRUPT;
    if (!shmobj__blk_live(sp, blk, shmobj__ref_gen(ref)))
        return SHMOBJ_ESTALE;
    const struct shmobj__tree *t = (const void *)(sp->base + blk);
    const struct shmobj__slot *root = (const void *)(t + 1);
    /* A record put may race the shape's free: what is read here is kept
     * only if the use count taken afterwards says the shape was not being
     * freed (a racing free makes the put SHMOBJ_ESTALE). */
    SHMOBJ__RACY_BEGIN();
    uint64_t size = t->size;
    struct shmobj__obj h;
    memcpy(&h, sp->base + blk + SHMOBJ__PREFIX, sizeof h);
    bool bad = t->magic != SHMOBJ__TREE_MAGIC || !shmobj__tree_version_ok(t->version) ||
               !(atomic_load_explicit(&((struct shmobj__tree *)t)->flags,
                                      memory_order_relaxed) &
                 SHMOBJ__TREE_SHAPE) ||
               size % 16 != 0 || size / 16 > UINT32_MAX || size < SHMOBJ__PREFIX + 16 ||
               !shmobj__range_ok(blk, size, mapped) || root->tag != SHMOBJ__SLOT_OBJ ||
               h.tag != SHMOBJ_TYPE_SHAPE ||
               shmobj__body_size(&h, size - SHMOBJ__PREFIX - 16, &body) != 0;
    SHMOBJ__RACY_END();
    if (bad)
        return SHMOBJ_ECORRUPT;
    *out = (struct shmobj__shape_info){.blk = blk, .blen = size, .gen = shmobj__ref_gen(ref),
                                       .count = h.count, .cap = h.len,
                                       .obj = (const void *)(sp->base + blk + SHMOBJ__PREFIX)};
    return 0;
}

/* The use count of the shape si found: records naming it, and the
 * SHMOBJ__SHAPE_CLOSING bit of a free under way. */
static inline _Atomic uint64_t *shmobj__shape_uses(struct shmobj__space *sp,
                                                   const struct shmobj__shape_info *si)
{
    return &((struct shmobj__shape_meta *)(sp->base + si->blk + SHMOBJ__PREFIX +
                                           SHMOBJ__SHAPE_META))->uses;
}

#endif /* SHMOBJ_OBJECT_SHAPE_READ_H */
