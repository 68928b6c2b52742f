/* The inline readers of the views: from a slot to a view, from an OBJ
 * payload to the object it names, with every check, and the liveness of
 * a view's blocks. Inline because they are the hot half of every access
 * (shmobj_view_item, the lookups' value views); the layer's other files
 * reach them out of line through shmobj__view_slot/shmobj__view_follow
 * (view-navigate.c).
 *
 * Invariants kept here:
 * - Every offset, count and length read from the segment is checked against
 *   the extent of the block it was found in (the tree header's size, itself
 *   checked against the arena's usable size) before anything is followed,
 *   and copied into the view once: later reads use the copy, so a value
 *   changed by another process after the check cannot widen an access.
 * - An OBJ payload inside the current block is an inline object and must
 *   carry the block's generation; anywhere else it must name a live object
 *   block (arena generation check), whose root names an inline object. So
 *   following one reference costs O(1), whatever the object's size.
 * - A view of a slot replaced while it is followed follows the new value
 *   (at most SHMOBJ__FOLLOW_RETRIES times): an error stands only for a slot that
 *   still names what failed. */
#ifndef SHMOBJ_OBJECT_SLOT_READ_H
#define SHMOBJ_OBJECT_SLOT_READ_H

#include "layer-interface.h"

static inline struct shmobj__space *shmobj__space_of(const shmobj_view *v)
{
    return shmobj__space_of_seg(v->seg);
}

/* SHMOBJ_ERDONLY when the view's segment is attached read-only (space.h):
 * the first check of every write through a view, before any byte of the
 * segment is touched. */
static inline int shmobj__view_writable(const shmobj_view *v)
{
    return v != NULL && v->seg != NULL && shmobj__space_of(v)->readonly
               ? SHMOBJ_ERDONLY
               : 0;
}

static inline uint64_t shmobj__off_of(struct shmobj__space *sp, const void *p)
{
    return (uint64_t)((const uint8_t *)p - sp->base);
}

/* Is the block holding the view's object (its items, bytes, index) still
 * the one the view was made from? */
static inline int shmobj__obj_live(const shmobj_view *v)
{
    return shmobj__blk_live(shmobj__space_of(v), v->obj_blk, v->obj_gen);
}

/* The checks a call reading the object of a view of one kind opens
 * with, in this order: a NULL view or out-parameter SHMOBJ_EINVAL, a view
 * of another kind SHMOBJ_ETYPE, a freed block SHMOBJ_ESTALE. */
static inline int shmobj__obj_of_kind(const shmobj_view *v, const void *out, unsigned type)
{
    if (v == NULL || out == NULL)
        return SHMOBJ_EINVAL;
    if (v->type != type)
        return SHMOBJ_ETYPE;
    return shmobj__obj_live(v) ? 0 : SHMOBJ_ESTALE;
}

/* The same for the block holding the view's slot (scalars, short keys,
 * the slot a replacement writes). */
static inline int shmobj__slot_live(const shmobj_view *v)
{
    return shmobj__blk_live(shmobj__space_of(v), v->slot_blk, v->slot_gen);
}

/* Bytes of an object's fixed body (after its 16-byte header), or
 * SHMOBJ_ECORRUPT when the header is inconsistent. `rem` is the room left in
 * the block after the header. */
static inline __attribute__((always_inline)) int
shmobj__body_size(const struct shmobj__obj *h, uint64_t rem, uint64_t *out)
{
    uint64_t n = h->count, cap = h->len, a, b;
    switch (h->tag) {
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES:
        if (h->count != 0 || !shmobj__add_ok(h->len, 1, out))
            return SHMOBJ_ECORRUPT;
        break;
    case SHMOBJ_TYPE_BUFFER:
        if (h->ndim > SHMOBJ_BUFFER_MAXDIM || shmobj__dtype_size(h->dtype) == 0)
            return SHMOBJ_ECORRUPT;
        *out = sizeof(struct shmobj__bufhdr) + 16u * h->ndim;
        break;
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_TUPLE:
    /* The mutable kinds' count is 0 and their control block is checked
     * where it is used (shmobj__mut_open), so that this inline stays the
     * size it was on every view's path. */
    case SHMOBJ_TYPE_MLIST:
    case SHMOBJ_TYPE_MDICT:
    case SHMOBJ_TYPE_MSET:
        *out = 16 * n;
        if (h->flags & SHMOBJ__OBJ_PACKED) {
            /* a packed tuple of strings: len bytes, at least a NUL per
             * item (the follow checks the last byte is one) */
            if (h->tag != SHMOBJ_TYPE_TUPLE || h->flags != SHMOBJ__OBJ_PACKED || n == 0 ||
                cap < n)
                return SHMOBJ_ECORRUPT;
            *out = cap;
        }
        break;
    case SHMOBJ_TYPE_RECORD:
        /* len names the shape, checked by shmobj__record_view() */
        if (h->flags != 0 || h->dtype != 0 || h->ndim != 0)
            return SHMOBJ_ECORRUPT;
        *out = 16 * n;
        break;
    case SHMOBJ_TYPE_TABLE:
        /* a record's header (its shape checked the same way), then the
         * control block, whose fields are checked where they are used
         * (table.c) */
        if (h->flags != 0 || h->dtype != 0 || h->ndim != 0)
            return SHMOBJ_ECORRUPT;
        *out = sizeof(struct shmobj__table);
        break;
    case SHMOBJ_TYPE_SHAPE:
        /* cap a power of two from shmobj__index_cap(n) to GROWTH times it,
         * without computing it (every record view checks its shape): for a
         * power of two, cap >= index_cap(n) is cap >= 2 and 3 cap >= 4 n,
         * and cap <= GROWTH index_cap(n) is 3 cap < 8 GROWTH n (cap / (2
         * GROWTH) below index_cap(n)); 2^32 keeps the products exact */
        if (n == 0 || n > SHMOBJ__SHAPE_MAX || (cap & (cap - 1)) != 0 || cap < 2 ||
            cap > (UINT64_C(1) << 32) || 3 * cap < 4 * n ||
            3 * cap >= 8 * SHMOBJ__SHAPE_CAP_GROWTH * n)
            return SHMOBJ_ECORRUPT;
        *out = 16 + 32 * n + 8 * cap;
        break;
    case SHMOBJ_TYPE_STRUCT:
        if (!(h->flags & SHMOBJ__OBJ_NAMES)) {
            *out = 16 * n;
            break;
        }
        /* A named struct is laid out like a dict. */
        /* fall through */
    case SHMOBJ_TYPE_DICT:
    case SHMOBJ_TYPE_SET:
        if (cap != shmobj__index_cap(n))
            return SHMOBJ_ECORRUPT;
        a = (h->tag == SHMOBJ_TYPE_SET ? 16 : 32) * n;
        if (!shmobj__mul_ok(cap, 8, &b) || !shmobj__add_ok(a, b, out))
            return SHMOBJ_ECORRUPT;
        break;
    default:
        return SHMOBJ_ECORRUPT;
    }
    return *out <= rem ? 0 : SHMOBJ_ECORRUPT;
}

/* The view's object part for the object at segment offset off, which
 * lies in the block [ob, ob + oblen) of generation ogen: its header
 * checked against what is left of the block, then copied into out once. */
static inline __attribute__((always_inline)) int
shmobj__view_obj_at(struct shmobj__space *sp, uint64_t off, uint64_t ob, uint64_t oblen,
                    uint16_t ogen, shmobj_view *out)
{
    /* off lies in [ob, ob + oblen). */
    uint64_t rel = off - ob, body;
    if (!shmobj__aligned(off, 16) || oblen - rel < 16)
        return SHMOBJ_ECORRUPT;
    const struct shmobj__obj *hp = (const void *)(sp->base + off);
    struct shmobj__obj h;
    memcpy(&h, hp, sizeof h);
    int rc = shmobj__body_size(&h, oblen - rel - 16, &body);
    if (rc != 0)
        return rc;
    if (h.tag == SHMOBJ_TYPE_BUFFER) {
        const struct shmobj__bufhdr *bh = (const void *)(hp + 1);
        uint64_t dr = bh->data_rel;
        if (dr < 16 + body || dr > oblen - rel || h.len > oblen - rel - dr ||
            !shmobj__aligned(off + dr, SHMOBJ__DATA_ALIGN))
            return SHMOBJ_ECORRUPT;
    } else if ((h.tag == SHMOBJ_TYPE_STR || h.tag == SHMOBJ_TYPE_BYTES) &&
               ((const uint8_t *)(hp + 1))[h.len] != 0) {
        return SHMOBJ_ECORRUPT;
    } else if (h.tag == SHMOBJ_TYPE_TUPLE && (h.flags & SHMOBJ__OBJ_PACKED)) {
        /* its last item's NUL (body_size: len >= count >= 1) */
        if (((const uint8_t *)(hp + 1))[h.len - 1] != 0)
            return SHMOBJ_ECORRUPT;
        out->flags |= SHMOBJ__VIEW_PACKED;
    }
    out->obj = hp;
    out->obj_blk = ob;
    out->obj_blen = oblen;
    out->obj_gen = ogen;
    out->type = h.tag;
    out->count = h.count;
    out->len = h.len;
    out->dtype = h.dtype;
    out->ndim = h.ndim;
    out->flags |= (uint8_t)(h.flags & SHMOBJ__OBJ_NAMES ? SHMOBJ__VIEW_NAMES : 0);
    if (h.tag == SHMOBJ_TYPE_RECORD || h.tag == SHMOBJ_TYPE_TABLE)
        return shmobj__record_view(sp, &h, out); /* its shape, out of line */
    return 0;
}


/* shmobj__view_follow_inline() for a payload naming a block of its own
 * (an item replaced after creation, an adopted object): out of line, so
 * that the inline path keeps no call but the record's. */
int shmobj__view_follow_separate(struct shmobj__space *sp, uint64_t p, shmobj_view *out);

static inline __attribute__((always_inline)) int
shmobj__view_follow_inline(struct shmobj__space *sp, uint64_t p, uint64_t blk,
                           uint64_t blen, uint16_t bgen, shmobj_view *out)
{
    uint64_t off = shmobj__ref_off(p);
    if (!(off >= blk && off - blk < blen))
        return shmobj__view_follow_separate(sp, p, out);
    /* inline: the block's own generation */
    if (shmobj__ref_gen(p) != bgen)
        return SHMOBJ_ECORRUPT;
    return shmobj__view_obj_at(sp, off, blk, blen, bgen, out);
}

/* Times a view follows a slot's value anew after finding it replaced
 * under it (each time by another process's shmobj_view_set()). */
#define SHMOBJ__FOLLOW_RETRIES 64

/* The end of a slot's view of a value with no object (a scalar, null, a
 * link not followed): its kind, no items, no bytes. */
static inline __attribute__((always_inline)) int
shmobj__view_no_obj(shmobj_view *out, uint8_t type)
{
    out->count = 0;
    out->len = 0;
    out->type = type;
    return 0;
}

/* The same for a string held in the slot itself, n bytes. */
static inline __attribute__((always_inline)) int
shmobj__view_slot_str(shmobj_view *out, uint64_t n)
{
    out->count = 0;
    out->type = SHMOBJ_TYPE_STR;
    out->len = n;
    out->flags |= SHMOBJ__VIEW_RO;
    return 0;
}

static inline __attribute__((always_inline)) int
shmobj__view_slot_inline(struct shmobj__space *sp, uint64_t slot_off, uint64_t blk,
                         uint64_t blen, uint16_t bgen, int ro, shmobj_view *out)
{
    struct shmobj__slot *s = (void *)(sp->base + slot_off);
    uint8_t tag = s->tag;
    out->seg = (shmobj_segment *)sp;
    out->slot = s;
    out->obj = NULL;
    out->slot_blk = blk;
    out->slot_blen = blen;
    out->slot_gen = bgen;
    out->slot_tag = tag;
    out->flags = (uint8_t)(ro ? SHMOBJ__VIEW_RO : 0);
    /* count and len are stored once per kind below: the follow of an OBJ
     * slot (most views) sets both itself */
    switch (tag) {
    case SHMOBJ__SLOT_BOOL:
    case SHMOBJ__SLOT_INT:
    case SHMOBJ__SLOT_UINT:
    case SHMOBJ__SLOT_DOUBLE:
        return shmobj__view_no_obj(out, tag);
    case SHMOBJ__SLOT_OBJ: {
        uint64_t p = atomic_load_explicit(&s->payload, memory_order_acquire);
        if (p == 0)
            return shmobj__view_no_obj(out, SHMOBJ_TYPE_NULL);
        if (__builtin_expect(s->reserved0 == SHMOBJ__SLOT_PTUP_MARK, 0))
            return shmobj__view_ptup(sp, s, p, blk, blen, bgen, out); /* out of line */
        int rc = shmobj__view_follow_inline(sp, p, blk, blen, bgen, out);
        if (__builtin_expect(rc == 0, 1))
            return 0;
        /* Another process may have replaced the value (and freed its
         * block) while we followed it: shmobj__view_refollow() follows the
         * new one. No loop here: the first follow keeps its registers. */
        return shmobj__view_refollow(sp, s, p, rc, blk, blen, bgen, out);
    }
    case SHMOBJ__SLOT_SSTR: {
        uint8_t n = s->reserved0;
        if (n > SHMOBJ__SSTR_MAX || ((const uint8_t *)&s->payload)[n] != 0)
            return SHMOBJ_ECORRUPT;
        return shmobj__view_slot_str(out, n);
    }
    case SHMOBJ__SLOT_MSTR: {
        /* the bytes from slot byte 1, a NUL after them in the slot */
        uint64_t n = shmobj__mstr_len(atomic_load_explicit(&s->payload, memory_order_relaxed));
        if (n == 0)
            return SHMOBJ_ECORRUPT;
        return shmobj__view_slot_str(out, n);
    }
    case SHMOBJ__SLOT_LINK:
        /* not followed here: shmobj_view_follow() does, on request */
        return shmobj__view_no_obj(out, SHMOBJ_TYPE_LINK);
    case SHMOBJ__SLOT_ISTR: {
        /* A record's string or bytes in its block: the view's object is
         * the 16 bytes before them, as if they had a header (the view's
         * readers take the bytes at obj + 16). */
        uint8_t kind = s->reserved0;
        uint64_t n = s->reserved2, at = atomic_load_explicit(&s->payload, memory_order_relaxed);
        if ((kind != SHMOBJ_TYPE_STR && kind != SHMOBJ_TYPE_BYTES) || at < SHMOBJ__PREFIX ||
            at >= blen || n >= blen - at || sp->base[blk + at + n] != 0)
            return SHMOBJ_ECORRUPT;
        out->obj = sp->base + blk + at - 16;
        out->obj_blk = blk;
        out->obj_blen = blen;
        out->obj_gen = bgen;
        out->type = kind;
        out->count = 0;
        out->len = n;
        out->flags |= SHMOBJ__VIEW_RO;
        return 0;
    }
    case SHMOBJ__SLOT_RECORD:
        /* A record that is its block's value sits in the root slot's
         * place: follow it there, and nowhere else. */
        if (slot_off != blk + sizeof(struct shmobj__tree))
            return SHMOBJ_ECORRUPT;
        out->flags |= SHMOBJ__VIEW_RO; /* the slot is the record's header */
        /* out of line: a second inline copy of the follow would push the
         * callers of this function (the lookups' value views) out of line */
        return shmobj__view_follow(sp, shmobj__ref_make(slot_off, bgen), blk, blen, bgen, out);
    default:
        return SHMOBJ_ECORRUPT;
    }
}

/* Offset of key slot 0, the distance between key slots, and the offset of
 * the index of a keyed object; SHMOBJ_ETYPE when it has none. */
static inline int shmobj__keyed_layout(const shmobj_view *v, uint64_t *keys,
                                       uint64_t *stride, uint64_t *index)
{
    uint64_t o = shmobj__off_of(shmobj__space_of(v), v->obj) + 16, n = v->count;
    switch (v->type) {
    case SHMOBJ_TYPE_DICT:
        *index = o;
        *keys = o + 8 * v->len;
        *stride = 32;
        return 0;
    case SHMOBJ_TYPE_SET:
        *keys = o;
        break;
    case SHMOBJ_TYPE_SHAPE:
        *keys = o + 16 + 16 * n; /* after the use count and the descriptors */
        break;
    case SHMOBJ_TYPE_STRUCT:
        if (!(v->flags & SHMOBJ__VIEW_NAMES))
            return SHMOBJ_ETYPE;
        *keys = o + 16 * n;
        break;
    default:
        return SHMOBJ_ETYPE;
    }
    *stride = 16;
    *index = *keys + 16 * n;
    return 0;
}

#endif /* SHMOBJ_OBJECT_SLOT_READ_H */
