/* The views room of the object layer (lib/object/views/): the generic
 * walks over any value, which hand the mutable kinds to the mutable room:
 * navigation (this file), lookups, fields, atomic scalars, JSON, the
 * check of a graph and its free. The top room: it sees mutable, read and
 * encoding (doc/architecture.md, "The object layer's rooms").
 *
 * Navigation: from a reference or a view to the views of its items and
 * keys, and the reads of string, bytes and buffer content in place.
 *
 * Invariants kept here:
 * - A reference is followed only after shmobj__tree_open() found a live
 *   object block at it whose header agrees with the arena's block; the
 *   views then check everything they read against that block's extent
 *   (slot-read.h).
 * - A view remembers the generations of the blocks it points into. Every
 *   call that returns data read through a view first compares the
 *   generation in the arena header of the block it is about to touch with
 *   the remembered one (one load) and answers SHMOBJ_ESTALE when the block
 *   was freed, so a view kept past a free never reads the object built in
 *   its place afterwards.
 * - Positions are checked against the count the view copied when it was
 *   made, and addresses computed from the view's copies, never from bytes
 *   read again (a buffer's data offset, read again, is checked again). */
#include <string.h>

#include "extstruct.h"
#include "mutable.h"
#include "slot-read.h"
#include "content-check.h"
#include "shmobj/table.h"

/* The public structs' sizes are ABI. */
_Static_assert(sizeof(shmobj_view) == 80, "shmobj_view is 80 bytes");
_Static_assert(sizeof(shmobj_value) == 32, "shmobj_value is 32 bytes");
_Static_assert(sizeof(shmobj_buffer_desc) == 40, "shmobj_buffer_desc is 40 bytes");

/* For bindings that allocate views as opaque bytes: the size they must
 * give, from the library they load rather than from a header copy. */
size_t shmobj_view_size(void)
{
    return sizeof(shmobj_view);
}

/* shmobj__tree_open(), which also says in *rootrec whether the block
 * holds a record alone of version 3 (shmobj__tree_rootrec). */
static inline __attribute__((always_inline)) int
tree_open_inline(struct shmobj__space *sp, shmobj__ref ref, int from_caller, uint64_t *blk,
                 uint64_t *blen, int *rootrec)
{
    uint64_t usable = 0, off = shmobj__ref_off(ref);
    void *p;
    if (ref == 0)
        return SHMOBJ_EINVAL;
    int rc = sp->ops->check(sp, ref, &usable);
    /* The arena finds no block at that offset. A caller's reference that
     * names no block is not one of this segment's; one read from a slot
     * means the graph is damaged. */
    if (rc == SHMOBJ_ECORRUPT)
        return from_caller ? SHMOBJ_EINVAL : SHMOBJ_ECORRUPT;
    if (rc != 0)
        return rc;
    if (!shmobj__aligned(off, 16))
        return from_caller ? SHMOBJ_EINVAL : SHMOBJ_ECORRUPT;
    /* A live block. It holds an object exactly when it begins with the
     * tree magic; anything else is another kind of block (raw allocation,
     * map, queue, message), not damage, unless it was reached from a slot.
     * A block with the magic whose header disagrees (another version, a
     * size beyond the block) is a damaged object. */
    if (usable < SHMOBJ__PREFIX)
        return from_caller ? SHMOBJ_ETYPE : SHMOBJ_ECORRUPT;
    rc = shmobj__space_at(sp, off, SHMOBJ__PREFIX, &p);
    if (rc != 0)
        return rc;
    const struct shmobj__tree *t = p;
    uint32_t magic = t->magic;
    uint16_t version = t->version;
    uint64_t size = t->size;
    if (magic != SHMOBJ__TREE_MAGIC)
        return from_caller ? SHMOBJ_ETYPE : SHMOBJ_ECORRUPT;
    /* a record alone (version 3) keeps its shape where the size was: its
     * extent is the block's (ROOTREC is set before the block is published
     * and never cleared) */
    *rootrec = shmobj__tree_rootrec(
        version, atomic_load_explicit(&((struct shmobj__tree *)t)->flags, memory_order_relaxed));
    if (*rootrec)
        size = usable;
    if (!shmobj__tree_version_ok(version) || size < SHMOBJ__PREFIX || size > usable)
        return SHMOBJ_ECORRUPT;
    rc = shmobj__space_at(sp, off, size, &p);
    if (rc != 0)
        return rc;
    *blk = off;
    *blen = size;
    return 0;
}

int shmobj__tree_open(struct shmobj__space *sp, shmobj__ref ref, int from_caller,
                      uint64_t *blk, uint64_t *blen)
{
    int rootrec;
    return tree_open_inline(sp, ref, from_caller, blk, blen, &rootrec);
}

int shmobj__view_follow_separate(struct shmobj__space *sp, uint64_t p, shmobj_view *out)
{
    uint64_t ob, oblen, off;
    uint16_t gen = shmobj__ref_gen(p);
    /* A block of its own (an item replaced after creation). */
    int rc = shmobj__tree_open(sp, p, 0, &ob, &oblen);
    if (rc != 0)
        return rc;
    const struct shmobj__tree *t = (const void *)(sp->base + ob);
    const struct shmobj__slot *root = (const void *)(t + 1);
    uint8_t rtag = root->tag;
    if (shmobj__tree_rootrec(t->version, atomic_load_explicit(
                                             &((struct shmobj__tree *)t)->flags,
                                             memory_order_relaxed)))
        /* an adopted record alone, version 3: its header is the tree
         * header's */
        return shmobj__rootrec_view(sp, ob, oblen, gen, out);
    if (rtag == SHMOBJ__SLOT_RECORD) {
        /* an adopted record put alone: in its root slot's place */
        off = ob + sizeof(struct shmobj__tree);
    } else {
        uint64_t q = atomic_load_explicit(&((struct shmobj__slot *)root)->payload,
                                          memory_order_acquire);
        off = shmobj__ref_off(q);
        if (rtag != SHMOBJ__SLOT_OBJ || shmobj__ref_gen(q) != gen || off < ob ||
            off - ob >= oblen)
            return SHMOBJ_ECORRUPT;
    }
    return shmobj__view_obj_at(sp, off, ob, oblen, gen, out);
}

int shmobj__view_follow(struct shmobj__space *sp, uint64_t p, uint64_t blk,
                        uint64_t blen, uint16_t bgen, shmobj_view *out)
{
    return shmobj__view_follow_inline(sp, p, blk, blen, bgen, out);
}

int shmobj__view_refollow(struct shmobj__space *sp, struct shmobj__slot *s, uint64_t p,
                          int rc, uint64_t blk, uint64_t blen, uint16_t bgen,
                          shmobj_view *out)
{
    for (unsigned tries = 0;; tries++) {
        /* An error stands only for a slot that still names what failed. */
        uint64_t now = atomic_load_explicit(&s->payload, memory_order_acquire);
        if (now == p)
            return rc;
        /* Replaced under us every time: the value we could follow is
         * gone, which is staleness, not damage. */
        if (tries == SHMOBJ__FOLLOW_RETRIES)
            return SHMOBJ_ESTALE;
        p = now;
        if (p == 0)
            return shmobj__view_no_obj(out, SHMOBJ_TYPE_NULL);
        rc = shmobj__view_follow_inline(sp, p, blk, blen, bgen, out);
        if (rc == 0)
            return 0;
    }
}

int shmobj__view_ptup(struct shmobj__space *sp, struct shmobj__slot *s, uint64_t p,
                      uint64_t blk, uint64_t blen, uint16_t bgen, shmobj_view *out)
{
    uint64_t off = shmobj__ref_off(p), w0, rel = off - blk;
    int rc;
    if (!(off >= blk && rel < blen)) {
        /* replaced since it was written: a block of its own */
        rc = shmobj__view_follow_inline(sp, p, blk, blen, bgen, out);
        return rc == 0 ? 0 : shmobj__view_refollow(sp, s, p, rc, blk, blen, bgen, out);
    }
    /* The slot's first word was written with the block and never changes:
     * count (reserved1) and body bytes (reserved2). The body lies past the
     * slot's 16 bytes and inside the block, and ends with its last item's
     * NUL. */
    memcpy(&w0, s, sizeof w0);
    uint64_t n = (w0 >> 16) & 0xffff, len = w0 >> 32;
    if (shmobj__ref_gen(p) != bgen || n == 0 || len < n || rel < 16 || len > blen - rel ||
        sp->base[off + len - 1] != 0)
        return shmobj__view_refollow(sp, s, p, SHMOBJ_ECORRUPT, blk, blen, bgen, out);
    /* as if a header lay in the 16 bytes before the body (the view's
     * readers take a packed body at obj + 16) */
    out->obj = sp->base + off - 16;
    out->obj_blk = blk;
    out->obj_blen = blen;
    out->obj_gen = bgen;
    out->type = SHMOBJ_TYPE_TUPLE;
    out->count = (uint32_t)n;
    out->len = len;
    out->dtype = 0;
    out->ndim = 0;
    out->flags |= SHMOBJ__VIEW_PACKED;
    return 0;
}

int shmobj__view_slot(struct shmobj__space *sp, uint64_t slot_off, uint64_t blk,
                      uint64_t blen, uint16_t bgen, int ro, shmobj_view *out)
{
    return shmobj__view_slot_inline(sp, slot_off, blk, blen, bgen, ro, out);
}

/* The view of a record alone (version 3): its header is the tree
 * header, and the view's slot that header (read-only, as the root slot of
 * a version 2 record is). Out of line: obj_get's common path keeps its
 * registers. */
static __attribute__((noinline)) int view_rootrec(struct shmobj__space *sp, uint64_t blk,
                                                  uint64_t blen, uint16_t gen,
                                                  shmobj_view *out)
{
    out->seg = (shmobj_segment *)sp;
    out->slot = sp->base + blk;
    out->slot_blk = blk;
    out->slot_blen = blen;
    out->slot_gen = gen;
    out->slot_tag = SHMOBJ__SLOT_RECORD;
    out->flags = SHMOBJ__VIEW_RO;
    return shmobj__rootrec_view(sp, blk, blen, gen, out);
}

static inline __attribute__((always_inline)) int
view_root_inline(struct shmobj__space *sp, uint64_t blk, uint64_t blen, uint16_t gen,
                 shmobj_view *out)
{
    struct shmobj__tree *t = (void *)(sp->base + blk);
    if (__builtin_expect(
            shmobj__tree_rootrec(t->version, atomic_load_explicit(&t->flags,
                                                                  memory_order_relaxed)),
            0))
        return view_rootrec(sp, blk, blen, gen, out);
    return shmobj__view_slot_inline(sp, blk + sizeof(struct shmobj__tree), blk, blen, gen, 0,
                                    out);
}

int shmobj__view_root(struct shmobj__space *sp, uint64_t blk, uint64_t blen, uint16_t gen,
                      shmobj_view *out)
{
    return view_root_inline(sp, blk, blen, gen, out);
}

int shmobj_obj_get(shmobj_segment *seg, shmobj_ref ref, shmobj_view *view)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    uint64_t blk, blen;
    if (sp == NULL || view == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    int rootrec;
    int rc = tree_open_inline(sp, ref, 1, &blk, &blen, &rootrec);
    if (rc != 0)
        return rc;
    if (__builtin_expect(rootrec, 0))
        return view_rootrec(sp, blk, blen, shmobj__ref_gen(ref), view);
    return shmobj__view_slot_inline(sp, blk + sizeof(struct shmobj__tree), blk, blen,
                                    shmobj__ref_gen(ref), 0, view);
}

int shmobj_view_type(const shmobj_view *view)
{
    return view == NULL ? 0 : view->type;
}

int shmobj_view_len(const shmobj_view *view, size_t *len)
{
    if (view == NULL || len == NULL)
        return SHMOBJ_EINVAL;
    size_t n;
    switch (view->type) {
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES:
    case SHMOBJ_TYPE_BUFFER:
        n = (size_t)view->len;
        break;
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_TUPLE:
    case SHMOBJ_TYPE_DICT:
    case SHMOBJ_TYPE_SET:
    case SHMOBJ_TYPE_STRUCT:
    case SHMOBJ_TYPE_RECORD:
    case SHMOBJ_TYPE_SHAPE:
        n = view->count;
        break;
    case SHMOBJ_TYPE_MLIST:
    case SHMOBJ_TYPE_MDICT:
    case SHMOBJ_TYPE_MSET:
        return shmobj__mut_len(view, len);
    case SHMOBJ_TYPE_TABLE: {
        /* its rows */
        uint64_t rows;
        int rc = shmobj_table_len(view, &rows);
        if (rc == 0)
            *len = (size_t)rows;
        return rc;
    }
    default:
        return SHMOBJ_ETYPE;
    }
    /* A short string key lives in its slot; everything else in its object. */
    if (!(view->obj != NULL ? shmobj__obj_live(view) : shmobj__slot_live(view)))
        return SHMOBJ_ESTALE;
    *len = n;
    return 0;
}

/* The view of item i (< count, checked) of the packed tuple of strings
 * view: the i-th NUL-terminated string of its bytes, found by walking the
 * NULs before it, each within the len bytes the view was made with. */
static __attribute__((noinline)) int packed_item(const shmobj_view *view, size_t i,
                                                 shmobj_view *item)
{
    const uint8_t *b = (const uint8_t *)view->obj + 16;
    uint64_t n = view->len, at = 0;
    for (size_t j = 0;; j++) {
        const uint8_t *z = at < n ? memchr(b + at, 0, (size_t)(n - at)) : NULL;
        if (z == NULL)
            return SHMOBJ_ECORRUPT; /* fewer strings than items */
        uint64_t len = (uint64_t)(z - (b + at));
        if (j == i) {
            *item = *view;
            item->obj = b + at - 16; /* the views' readers take obj + 16 */
            item->type = SHMOBJ_TYPE_STR;
            item->count = 0;
            item->len = len;
            item->flags = SHMOBJ__VIEW_RO;
            item->dtype = 0;
            item->ndim = 0;
            return 0;
        }
        at += len + 1;
    }
}

int shmobj_view_item(const shmobj_view *view, size_t i, shmobj_view *item)
{
    if (view == NULL || item == NULL)
        return SHMOBJ_EINVAL;
    int ro = 0;
    switch (view->type) {
    case SHMOBJ_TYPE_TUPLE:
    case SHMOBJ_TYPE_SET:
        ro = 1;
        break;
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_DICT:
    case SHMOBJ_TYPE_STRUCT:
    case SHMOBJ_TYPE_RECORD: /* slots at 16 + 16 i, like a list's */
        break;
    case SHMOBJ_TYPE_MLIST:
    case SHMOBJ_TYPE_MDICT:
    case SHMOBJ_TYPE_MSET:
        return shmobj__mut_item(view, i, item);
    default:
        return SHMOBJ_ETYPE;
    }
    if (i >= view->count)
        return SHMOBJ_ERANGE;
    if (!shmobj__obj_live(view))
        return SHMOBJ_ESTALE;
    if (view->flags & SHMOBJ__VIEW_PACKED)
        return packed_item(view, i, item);
    struct shmobj__space *sp = shmobj__space_of(view);
    /* shmobj__body_size() checked that the body fits in the block. */
    uint64_t slot = shmobj__off_of(sp, view->obj) + shmobj__value_rel(view->type, view->len, i);
    return shmobj__view_slot_inline(sp, slot, view->obj_blk, view->obj_blen,
                                    view->obj_gen, ro, item);
}

int shmobj_view_key(const shmobj_view *view, size_t i, shmobj_view *key)
{
    uint64_t keys, stride, index;
    shmobj_view sv;
    if (view == NULL || key == NULL)
        return SHMOBJ_EINVAL;
    if (view->type == SHMOBJ_TYPE_RECORD || view->type == SHMOBJ_TYPE_TABLE) {
        /* a record's names (a table's fields) are its shape's */
        if (i >= view->count)
            return SHMOBJ_ERANGE;
        if (!shmobj__obj_live(view))
            return SHMOBJ_ESTALE;
        shmobj__record_shape_view(view, &sv);
        view = &sv;
    }
    if (view->type == SHMOBJ_TYPE_MDICT || view->type == SHMOBJ_TYPE_MSET)
        return shmobj__mut_key(view, i, key);
    int rc = shmobj__keyed_layout(view, &keys, &stride, &index);
    if (rc != 0)
        return rc;
    if (i >= view->count)
        return SHMOBJ_ERANGE;
    if (!shmobj__obj_live(view))
        return SHMOBJ_ESTALE;
    return shmobj__view_slot(shmobj__space_of(view), keys + stride * (uint64_t)i,
                             view->obj_blk, view->obj_blen, view->obj_gen, 1,
                             key);
}

int shmobj_str_get(const shmobj_view *view, const char **s, size_t *len)
{
    if (view == NULL || s == NULL)
        return SHMOBJ_EINVAL;
    if (view->type != SHMOBJ_TYPE_STR)
        return SHMOBJ_ETYPE;
    if (view->obj == NULL) {
        /* a short or a medium key, held in its slot: its bytes from
         * payload byte 0 or slot byte 1 */
        if (!shmobj__slot_live(view))
            return SHMOBJ_ESTALE;
        *s = view->slot_tag == SHMOBJ__SLOT_SSTR
                 ? (const char *)&((struct shmobj__slot *)view->slot)->payload
                 : (const char *)view->slot + 1;
    } else {
        if (!shmobj__obj_live(view))
            return SHMOBJ_ESTALE;
        *s = (const char *)view->obj + 16;
    }
    if (len != NULL)
        *len = (size_t)view->len;
    return 0;
}

int shmobj_bytes_get(const shmobj_view *view, const void **p, size_t *len)
{
    int rc = shmobj__obj_of_kind(view, p, SHMOBJ_TYPE_BYTES);
    if (rc != 0)
        return rc;
    *p = (const uint8_t *)view->obj + 16;
    if (len != NULL)
        *len = (size_t)view->len;
    return 0;
}

size_t shmobj_dtype_size(unsigned dtype)
{
    return shmobj__dtype_size(dtype);
}

const char *shmobj_dtype_name(unsigned dtype)
{
    static const char *const names[] = {
        "?", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
        "f32", "f64", "bool",
    };
    return dtype < sizeof names / sizeof names[0] ? names[dtype] : "?";
}

int shmobj_buffer_get(const shmobj_view *view, shmobj_buffer_info *out)
{
    /* Unchanged since the first release. */
    if (view == NULL || out == NULL || !shmobj__ext_out_ok(out, sizeof *out))
        return SHMOBJ_EINVAL;
    if (view->type != SHMOBJ_TYPE_BUFFER)
        return SHMOBJ_ETYPE;
    if (!shmobj__obj_live(view))
        return SHMOBJ_ESTALE;
    const uint8_t *o = view->obj;
    const struct shmobj__bufhdr *bh = (const void *)(o + 16);
    const uint64_t *shape = (const void *)(bh + 1);
    const int64_t *strides = (const void *)(shape + view->ndim);
    unsigned nd = view->ndim;
    uint64_t dr = bh->data_rel;
    /* data_rel was checked when the view was made; reread and recheck it
     * here against the same extent, and take shape/strides once. */
    uint64_t rel = (uint64_t)(o - shmobj__space_of(view)->base) - view->obj_blk;
    if (dr > view->obj_blen - rel || view->len > view->obj_blen - rel - dr)
        return SHMOBJ_ECORRUPT;
    shmobj_buffer_info ours = {0}, *info = &ours;
    info->dtype = view->dtype;
    info->ndim = nd;
    info->itemsize = (uint32_t)shmobj__dtype_size(view->dtype);
    info->nbytes = view->len;
    info->data = (void *)(o + dr);
    memcpy(info->shape, shape, 8u * nd);
    memcpy(info->strides, strides, 8u * nd);
    if (!shmobj__buffer_extent_ok(nd, info->shape, info->strides,
                                  info->itemsize, info->nbytes))
        return SHMOBJ_ECORRUPT;
    shmobj__ext_out(out, info, sizeof *info);
    return 0;
}
