/* Validation of an object graph read from an untrusted segment.
 *
 * Invariants kept here:
 * - The walk is bounded: nesting (containers and separate blocks) by
 *   SHMOBJ_OBJ_MAXDEPTH, total work (slots visited plus index probes) by a
 *   budget proportional to the mapped segment, so a hostile graph with
 *   cycles, shared subtrees or degenerate indexes costs at most linear time
 *   in the segment size before it is refused.
 * - Every walk's budget (check, free, replace, JSON) is widened here, and
 *   only here, once: when it runs out, to a budget of the segment as it is
 *   now (shmobj__work_widen), so a graph other processes grew past this
 *   process's view is walked whole, and a hostile one still costs at most
 *   two budgets of the segment's size.
 * - It reads the segment only through the same checked paths as the views
 *   (shmobj__view_slot / shmobj__view_follow), and adds what views skip for
 *   O(1) access: UTF-8 of strings, buffer extents, bool payloads, key kinds
 *   and the consistency of every index with its keys. */
#include <string.h>

#include "layer-interface.h"
#include "mutable.h"
#include "content-check.h"

struct ck {
    struct shmobj__space *sp;
    uint64_t budget;
};

int shmobj__work_widen(struct shmobj__space *sp, uint64_t *budget, uint64_t n)
{
    if (sp == NULL || (*budget & SHMOBJ__WORK_WIDENED))
        return SHMOBJ_ECORRUPT;
    /* The system call (extend's size of the object) only here, where the
     * budget ran out: the common walk never pays it. */
    if (sp->ops->extend != NULL)
        (void)sp->ops->extend(sp, 0);
    uint64_t fresh = shmobj__work_budget(sp);
    if (fresh < n) {
        *budget = SHMOBJ__WORK_WIDENED;
        return SHMOBJ_ECORRUPT;
    }
    *budget = SHMOBJ__WORK_WIDENED | (fresh - n);
    return 0;
}

static int spend(struct ck *c, uint64_t n)
{
    return shmobj__work_take(c->sp, &c->budget, n);
}

static int ck_obj(struct ck *c, const shmobj_view *v, int depth);
static int ck_slot(struct ck *c, uint64_t slot_off, const shmobj_view *parent,
                   int ro, int kind, int depth);

/* An item slot of a mutable container (mutable-section.c's walk), in the block
 * [blk, blk + blen) of generation gen. */
struct ck_mut {
    struct ck *c;
    int depth;
};

static int ck_mut_child(void *ctx, uint64_t slot_off, uint64_t blk, uint64_t blen,
                        uint16_t gen, int kind)
{
    struct ck_mut *m = ctx;
    shmobj_view parent = {.obj_blk = blk, .obj_blen = blen, .obj_gen = gen};
    return ck_slot(m->c, slot_off, &parent, 1, kind, m->depth);
}

/* kind: 0 any value, 1 a key (INT or STR/BYTES inline), 2 a field name (STR
 * inline). */
static int ck_slot(struct ck *c, uint64_t slot_off, const shmobj_view *parent,
                   int ro, int kind, int depth)
{
    shmobj_view v;
    int rc = spend(c, 1);
    if (rc != 0)
        return rc;
    if (depth > SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_ECORRUPT;
    rc = shmobj__view_slot(c->sp, slot_off, parent->obj_blk, parent->obj_blen,
                           parent->obj_gen, ro, &v);
    if (rc != 0)
        return rc;
    if (v.slot_tag == SHMOBJ__SLOT_BOOL &&
        atomic_load_explicit(&((struct shmobj__slot *)v.slot)->payload,
                             memory_order_relaxed) > 1)
        return SHMOBJ_ECORRUPT;
    if (v.slot_tag == SHMOBJ__SLOT_SSTR || v.slot_tag == SHMOBJ__SLOT_MSTR) {
        /* short and medium strings only as keys, and valid UTF-8 like any
         * string */
        const char *sp;
        if (kind == 0 || shmobj_str_get(&v, &sp, NULL) != 0 ||
            !shmobj__utf8_ok((const uint8_t *)sp, v.len))
            return SHMOBJ_ECORRUPT;
        return 0;
    }
    if (v.slot_tag == SHMOBJ__SLOT_LINK) {
        /* a link is not followed (links may form cycles): it is well
         * formed when it is a value and names something */
        return kind == 0 && atomic_load_explicit(&((struct shmobj__slot *)v.slot)->payload,
                                                 memory_order_relaxed) != 0
                   ? 0
                   : SHMOBJ_ECORRUPT;
    }
    if (v.slot_tag == SHMOBJ__SLOT_ISTR)
        return kind == 0 && (v.type == SHMOBJ_TYPE_BYTES ||
                             shmobj__utf8_ok((const uint8_t *)v.obj + 16, v.len))
                   ? 0
                   : SHMOBJ_ECORRUPT;
    if (kind != 0) {
        int ok = v.type == SHMOBJ_TYPE_STR ||
                 (kind == 1 && (v.type == SHMOBJ_TYPE_BYTES || v.type == SHMOBJ_TYPE_INT));
        /* Keys are written with their container: never a block of their own. */
        if (!ok || (v.obj != NULL && v.obj_blk != parent->obj_blk))
            return SHMOBJ_ECORRUPT;
    }
    if (v.obj == NULL)
        return 0;
    return ck_obj(c, &v, depth + 1);
}

/* A packed tuple of strings: exactly count NUL-terminated strings of
 * valid UTF-8 fill its len bytes (a string costs one unit more per 64
 * bytes, as a string value does). */
static int ck_packed(struct ck *c, const shmobj_view *v)
{
    const uint8_t *b = (const uint8_t *)v->obj + 16;
    uint64_t at = 0, n = v->len;
    int rc = spend(c, v->count + n / 64);
    if (rc != 0)
        return rc;
    for (uint64_t i = 0; i < v->count; i++) {
        const uint8_t *z = at < n ? memchr(b + at, 0, (size_t)(n - at)) : NULL;
        if (z == NULL || !shmobj__utf8_ok(b + at, (uint64_t)(z - (b + at))))
            return SHMOBJ_ECORRUPT;
        at = (uint64_t)(z - b) + 1;
    }
    return at == n ? 0 : SHMOBJ_ECORRUPT;
}

static int ck_index(struct ck *c, const shmobj_view *v, uint64_t index_off)
{
    uint64_t n = v->count, cap = v->len, used = 0;
    const uint64_t *ix = (const void *)(c->sp->base + index_off);
    int rc = spend(c, cap);
    if (rc != 0)
        return rc;
    for (uint64_t pos = 0; pos < cap; pos++) {
        uint64_t e = ix[pos];
        if (e == 0)
            continue;
        if ((e & UINT32_MAX) - 1 >= n)
            return SHMOBJ_ECORRUPT;
        used++;
    }
    if (used != n)
        return SHMOBJ_ECORRUPT;
    /* Every key must be found at its own position: this proves the index
     * reaches every key and that no two keys are equal. */
    for (uint64_t i = 0; i < n; i++) {
        shmobj_view k;
        shmobj_key kd = {.type = 0};
        size_t found;
        uint64_t probes = 0;
        rc = shmobj_view_key(v, (size_t)i, &k);
        if (rc != 0)
            return rc;
        /* (these fail only when the block was freed meanwhile) */
        kd.type = k.type;
        kd.len = k.len;
        if (k.type == SHMOBJ_TYPE_INT) {
            kd.len = 0;
            rc = shmobj_int_get(&k, &kd.i);
        } else if (k.type == SHMOBJ_TYPE_STR) {
            const char *s = NULL;
            rc = shmobj_str_get(&k, &s, NULL);
            kd.ptr = s;
        } else {
            rc = shmobj_bytes_get(&k, &kd.ptr, NULL);
        }
        if (rc != 0)
            return rc;
        /* the key as a lookup describes it: the same hash and word */
        shmobj__key_prepare(&kd);
        rc = shmobj__index_find(v, &kd, &found, &probes);
        int rc2 = spend(c, probes);
        if (rc2 != 0)
            return rc2;
        if (rc != 0)
            return rc == SHMOBJ_ENOTFOUND ? SHMOBJ_ECORRUPT : rc;
        if (found != i)
            return SHMOBJ_ECORRUPT;
    }
    return 0;
}

/* The descriptor of field i of the shape whose header is at `o`, checked. */
static int ck_desc(const uint8_t *o, uint64_t i, struct shmobj__field *d)
{
    memcpy(d, o + shmobj__shape_descs() + 16 * i, sizeof *d);
    return shmobj__field_ok(d->kind, d->cap) && d->reserved0 == 0 && d->reserved1 == 0
               ? 0
               : SHMOBJ_ECORRUPT;
}

/* A shape: its descriptors, its names (strings, keys of its block) and
 * their index. */
static int ck_shape(struct ck *c, const shmobj_view *v, int depth)
{
    uint64_t o = (uint64_t)((const uint8_t *)v->obj - c->sp->base), n = v->count;
    struct shmobj__field d;
    int rc = spend(c, n);
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        rc = ck_desc(v->obj, i, &d);
        if (rc == 0)
            rc = ck_slot(c, o + shmobj__shape_names(n) + 16 * i, v, 1, 2, depth);
    }
    return rc != 0 ? rc : ck_index(c, v, o + shmobj__shape_index(n));
}

/* A record against its shape: as many slots as fields (the view checked
 * that), each of its field's kind, strings within their capacity. */
static int ck_record(struct ck *c, const shmobj_view *v, int depth)
{
    shmobj_view sv, f;
    struct shmobj__shape_info si;
    /* the shape's block in full (views check it lighter, shape.c) */
    int src = shmobj__shape_open(c->sp, v->len, 0, &si);
    if (src != 0)
        return src;
    shmobj__record_shape_view(v, &sv);
    uint64_t o = (uint64_t)((const uint8_t *)v->obj - c->sp->base);
    for (uint64_t i = 0; i < v->count; i++) {
        struct shmobj__field d;
        uint64_t slot = o + 16 + 16 * i;
        int rc = ck_desc(sv.obj, i, &d);
        if (rc == 0)
            rc = shmobj__view_slot(c->sp, slot, v->obj_blk, v->obj_blen, v->obj_gen, 0, &f);
        if (rc != 0)
            return rc;
        int ok;
        switch (d.kind) {
        case SHMOBJ_TYPE_STR:
        case SHMOBJ_TYPE_BYTES:
            ok = f.slot_tag == SHMOBJ__SLOT_ISTR && f.type == d.kind &&
                 (d.cap == 0 || f.len <= d.cap);
            break;
        case SHMOBJ_TYPE_LINK:
            ok = f.slot_tag == SHMOBJ__SLOT_LINK;
            break;
        case SHMOBJ_TYPE_NULL:
            ok = f.slot_tag == SHMOBJ__SLOT_OBJ;
            break;
        default:
            ok = f.slot_tag == d.kind; /* the scalars' tags are their kinds */
        }
        if (!ok)
            return SHMOBJ_ECORRUPT;
        rc = ck_slot(c, slot, v, 0, 0, depth);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int ck_obj(struct ck *c, const shmobj_view *v, int depth)
{
    uint64_t o = (uint64_t)((const uint8_t *)v->obj - c->sp->base);
    uint64_t n = v->count;
    int rc;
    if (depth > SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_ECORRUPT;
    switch (v->type) {
    case SHMOBJ_TYPE_STR:
        rc = spend(c, v->len / 64);
        if (rc != 0)
            return rc;
        return shmobj__utf8_ok((const uint8_t *)v->obj + 16, v->len) ? 0
                                                                     : SHMOBJ_ECORRUPT;
    case SHMOBJ_TYPE_BYTES:
        return 0;
    case SHMOBJ_TYPE_BUFFER: {
        shmobj_buffer_info info = {.struct_size = sizeof info};
        return shmobj_buffer_get(v, &info);
    }
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_TUPLE:
        if (v->flags & SHMOBJ__VIEW_PACKED)
            return ck_packed(c, v);
        for (uint64_t i = 0; i < n; i++) {
            rc = ck_slot(c, o + 16 + 16 * i, v, v->type == SHMOBJ_TYPE_TUPLE, 0, depth);
            if (rc != 0)
                return rc;
        }
        return 0;
    case SHMOBJ_TYPE_SET:
        for (uint64_t i = 0; i < n; i++) {
            rc = ck_slot(c, o + 16 + 16 * i, v, 1, 1, depth);
            if (rc != 0)
                return rc;
        }
        return ck_index(c, v, o + 16 + 16 * n);
    case SHMOBJ_TYPE_DICT:
        for (uint64_t i = 0; i < n; i++) {
            uint64_t pair = o + 16 + 8 * v->len + 32 * i;
            rc = ck_slot(c, pair, v, 1, 1, depth);
            if (rc == 0)
                rc = ck_slot(c, pair + 16, v, 0, 0, depth);
            if (rc != 0)
                return rc;
        }
        return ck_index(c, v, o + 16);
    case SHMOBJ_TYPE_STRUCT: {
        int keyed = (v->flags & SHMOBJ__VIEW_NAMES) != 0;
        for (uint64_t i = 0; i < n; i++) {
            rc = ck_slot(c, o + 16 + 16 * i, v, 0, 0, depth);
            if (rc != 0)
                return rc;
            if (keyed) {
                rc = ck_slot(c, o + 16 + 16 * (n + i), v, 1, 2, depth);
                if (rc != 0)
                    return rc;
            }
        }
        return keyed ? ck_index(c, v, o + 16 + 32 * n) : 0;
    }
    case SHMOBJ_TYPE_RECORD:
        return ck_record(c, v, depth);
    case SHMOBJ_TYPE_SHAPE:
        return ck_shape(c, v, depth);
    case SHMOBJ_TYPE_TABLE:
        return shmobj__table_check(c->sp, v, &c->budget);
    case SHMOBJ_TYPE_MLIST:
    case SHMOBJ_TYPE_MDICT:
    case SHMOBJ_TYPE_MSET: {
        struct ck_mut m = {c, depth};
        return shmobj__mut_check(c->sp, v, &c->budget, ck_mut_child, &m);
    }
    default:
        return SHMOBJ_ECORRUPT;
    }
}

int shmobj_obj_check(shmobj_segment *seg, shmobj_ref ref)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    shmobj_view root;
    if (sp == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    struct ck c = {sp, shmobj__work_budget(sp)};
    int rc = shmobj_obj_get(seg, ref, &root);
    if (rc != 0)
        return rc;
    /* flags this format has, and a shape's block flagged as one (a free
     * takes a shape's protocol by the flag) */
    uint16_t flags = atomic_load_explicit(
        &((struct shmobj__tree *)(sp->base + root.slot_blk))->flags, memory_order_acquire);
    if ((flags & ~(SHMOBJ__TREE_SEPARATE | SHMOBJ__TREE_RECORDS | SHMOBJ__TREE_ADOPTED |
                   SHMOBJ__TREE_SHAPE | SHMOBJ__TREE_ROOTREC)) != 0 ||
        !(flags & SHMOBJ__TREE_SHAPE) != (root.type != SHMOBJ_TYPE_SHAPE))
        return SHMOBJ_ECORRUPT;
    if (root.slot_tag == SHMOBJ__SLOT_BOOL &&
        atomic_load_explicit(&((struct shmobj__slot *)root.slot)->payload,
                             memory_order_relaxed) > 1)
        return SHMOBJ_ECORRUPT;
    return root.obj == NULL ? 0 : ck_obj(&c, &root, 1);
}
