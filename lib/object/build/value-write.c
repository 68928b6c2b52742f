/* The put (the public calls are in value-put.c) and its writing pass.
 * Read from the top: shmobj__obj_put() measures the value
 * (value-measure.c), allocates its block, writes it, and takes what its
 * records and adopted objects need (references.c); below it, the writing
 * pass, from the root slot down to the bytes: objects, containers and
 * their keys, records, packed tuples, buffers, strings, then the stores
 * of slots and bytes.
 *
 * Invariants kept here:
 * - The writer never moves its cursor past the size measured
 *   (shmobj__wr.lim) and the put fails unless it ends exactly there, so a
 *   description that changes between the passes (another thread) gives
 *   SHMOBJ_EINVAL, never a write outside the block.
 * - Every object starts 16-aligned relative to the block, buffer data
 *   64-aligned; the block is allocated 64-aligned when it holds a buffer,
 *   so block-relative alignment is segment alignment.
 * - Keys enter their index through the probe every reader walks
 *   (index-probe.h), and a key equal to an earlier one (same kind and bytes)
 *   refuses the put: readers never meet two equal keys.
 * - Content is checked on the caller's bytes (UTF-8 of strings and keys,
 *   record fields against their shape, buffer extents), before or while
 *   they are copied, never read back from the block.
 * - A put either returns a reference to a block fully written, whose
 *   claims are all taken, or frees the block and gives back every claim;
 *   nothing is published here. */
#include <string.h>

#include "value-build.h"
#include "index-probe.h"
#include "shape-read.h"

/* The writing pass, in the order this file defines it. */
static inline int write_value(struct shmobj__wr *w, const shmobj_value *val);
static inline int emit_slot(struct shmobj__wr *w, const shmobj_value *v, uint64_t slot_rel,
                            int depth);
static int emit_obj(struct shmobj__wr *w, const shmobj_value *v, int depth, uint64_t *rel);
static inline int emit_container(struct shmobj__wr *w, const shmobj_value *v, int depth,
                                 uint64_t pos, struct shmobj__obj *h);
static int emit_keys(struct shmobj__wr *w, const shmobj_value *v, unsigned type, size_t n,
                     uint64_t keys_rel, uint64_t stride, uint64_t *ix, uint64_t cap,
                     int depth);
static int index_add(uint64_t *ix, uint64_t cap, const shmobj_value *v, size_t i,
                     const shmobj_key *k);
static int desc_key_equal(const shmobj_key *a, const shmobj_key *b);
static int emit_record(struct shmobj__wr *w, const shmobj_value *v, int depth, uint64_t *rel);
static int emit_packed(struct shmobj__wr *w, const shmobj_value *v, uint64_t pos,
                       struct shmobj__obj *h);
static int emit_ptup(struct shmobj__wr *w, const shmobj_value *v, int depth,
                     uint64_t slot_rel);
static int emit_packed_body(const shmobj_value *v, uint64_t n, uint8_t *o, uint64_t body);
static int emit_buffer(struct shmobj__wr *w, const shmobj_value *v, uint64_t pos,
                       struct shmobj__obj *h);
static inline int emit_mem(struct shmobj__wr *w, const shmobj_value *v, int depth,
                           uint64_t *rel);
static inline int emit_mem_raw(struct shmobj__wr *w, unsigned type, const uint8_t *p,
                               uint64_t n, int depth, uint64_t *rel);
/* The stores. */
static inline void put_slot(uint8_t *at, uint8_t tag, uint8_t r0, uint64_t pl);
static inline void put_words(uint8_t *at, uint64_t w0, uint64_t w1);
static inline void put_istr(uint8_t *at, unsigned kind, uint64_t len, uint64_t rel);
static inline void copy_bytes(uint8_t *o, const uint8_t *p, uint64_t n);
static int advance(struct shmobj__wr *w, uint64_t pos, uint64_t a, uint64_t b);

int shmobj__obj_put(struct shmobj__space *sp, const shmobj_value *val,
                    shmobj__ref *out)
{
    uint64_t size;
    int need64;
    shmobj__ref r;
    void *p;
    /* 1. measure */
    int rc = shmobj__measure(val, &size, &need64);
    if (rc != 0)
        return rc;
    /* 2. allocate: a free walks blocks that hold records (their shapes'
     * uses) or adopted objects (separate blocks) */
    rc = shmobj__tree_new(sp, size, need64 & SHMOBJ__M_ALIGN64 ? SHMOBJ__DATA_ALIGN : 16,
                          (uint16_t)((need64 & SHMOBJ__M_RECORDS ? SHMOBJ__TREE_RECORDS : 0) |
                                     (need64 & SHMOBJ__M_ROOTREC ? SHMOBJ__TREE_ROOTREC : 0) |
                                     (need64 & SHMOBJ__M_ADOPTS ? SHMOBJ__TREE_SEPARATE : 0)),
                          &r, &p);
    if (rc != 0)
        return rc;
    struct shmobj__claims cl;
    cl.n = 0;
    cl.after = 0;
    /* 3. write it */
    struct shmobj__wr w = {p, shmobj__ref_off(r), shmobj__ref_gen(r), SHMOBJ__PREFIX, size,
                           sp, &cl};
    rc = write_value(&w, val);
    /* A description changed by another thread during the call could make
     * the second pass disagree with the first: refuse it. */
    if (rc == 0 && w.cur != size)
        rc = SHMOBJ_EINVAL;
    /* 4. claim: records took their shapes' uses and adopted objects their
     * marks as they were written (a failure gives them back); past the
     * log's size they are taken now, by a walk of the block */
    if (rc == 0 && cl.after)
        rc = shmobj__claim(sp, shmobj__ref_off(r), size, shmobj__ref_gen(r));
    else if (rc != 0)
        shmobj__claims_undo(sp, &cl);
    if (rc != 0) {
        (void)sp->ops->free(sp, r);
        return rc;
    }
    *out = r;
    return 0;
}

/* Write the value val into the block w describes (its tree header
 * written): a record alone has the tree header for its own header, any
 * other value goes into the root slot right after the tree header. */
static inline __attribute__((always_inline)) int write_value(struct shmobj__wr *w,
                                                             const shmobj_value *val)
{
    if (val->type == SHMOBJ_TYPE_RECORD) {
        /* its slots from 16 (shmobj__measure() counted so) */
        uint64_t rel;
        w->cur = 0;
        int rc = emit_record(w, val, 0, &rel);
        return rc == 0 && rel != 0 ? SHMOBJ_EINVAL : rc;
    }
    return emit_slot(w, val, sizeof(struct shmobj__tree), 0);
}

/* Inline in every loop: only containers and buffers cost a call. */
static inline __attribute__((always_inline)) int
emit_slot(struct shmobj__wr *w, const shmobj_value *v, uint64_t slot_rel, int depth)
{
    uint8_t tag = SHMOBJ__SLOT_OBJ;
    uint64_t pl = 0, rel;
    /* an object written inline sets rc (0 or an error); the other kinds
     * leave it 1 */
    int rc = 1;
    switch (v->type) {
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES:
        /* inline here: the leaves are most of a tree */
        rc = emit_mem(w, v, depth, &rel);
        break;
    case SHMOBJ_TYPE_BOOL:
        if (v->v.b != 0 && v->v.b != 1)
            return SHMOBJ_EINVAL;
        tag = SHMOBJ__SLOT_BOOL;
        pl = (uint64_t)v->v.b;
        break;
    case SHMOBJ_TYPE_INT:
        tag = SHMOBJ__SLOT_INT;
        pl = (uint64_t)v->v.i;
        break;
    case SHMOBJ_TYPE_UINT:
        tag = SHMOBJ__SLOT_UINT;
        pl = v->v.u;
        break;
    case SHMOBJ_TYPE_DOUBLE:
        tag = SHMOBJ__SLOT_DOUBLE;
        memcpy(&pl, &v->v.d, sizeof pl);
        break;
    case SHMOBJ_TYPE_NULL:
        break;
    case SHMOBJ_TYPE_TUPLE:
        /* below the root, a tuple of strings keeps its header in its slot */
        if (depth > 0 && (rc = emit_ptup(w, v, depth, slot_rel)) <= 0)
            return rc;
        rc = emit_obj(w, v, depth, &rel);
        break;
    case SHMOBJ_TYPE_ADOPT:
    case SHMOBJ_TYPE_LINK: {
        /* a reference to a block of its own: an adopted object is a
         * separate block of this one (the put sets SEPARATE), a link a
         * weak reference */
        int rr = shmobj__ref_check(w->sp, v->v.ref, v->type == SHMOBJ_TYPE_ADOPT);
        if (rr == 0 && v->type == SHMOBJ_TYPE_ADOPT)
            rr = shmobj__claim_now(w, 0, v->v.ref, NULL);
        if (rr != 0)
            return rr;
        tag = v->type == SHMOBJ_TYPE_ADOPT ? SHMOBJ__SLOT_OBJ : SHMOBJ__SLOT_LINK;
        pl = v->v.ref;
        break;
    }
    default:
        rc = emit_obj(w, v, depth, &rel);
        break;
    }
    if (rc <= 0) {
        if (rc != 0)
            return rc;
        pl = shmobj__ref_make(w->blk_off + rel, w->gen);
    }
    put_slot(w->blk + slot_rel, tag, 0, pl);
    return 0;
}

/* Write the heap object v at the next 16-aligned position;
 * *rel receives that position. */
static int emit_obj(struct shmobj__wr *w, const shmobj_value *v, int depth, uint64_t *rel)
{
    uint64_t pos, body;
    int rc;
    if (depth >= SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_EINVAL;
    if (!shmobj__align_up(w->cur, 16, &pos))
        return SHMOBJ_EINVAL;
    struct shmobj__obj h = {.tag = (uint8_t)v->type};
    switch (v->type) {
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES:
        return emit_mem(w, v, depth, rel);
    case SHMOBJ_TYPE_BUFFER:
        rc = emit_buffer(w, v, pos, &h);
        if (rc != 0)
            return rc;
        break;
    case SHMOBJ_TYPE_RECORD:
        return emit_record(w, v, depth, rel);
    case SHMOBJ_TYPE_TUPLE:
        if ((rc = emit_packed(w, v, pos, &h)) <= 0) {
            if (rc != 0)
                return rc;
            break;
        }
        /* fall through */
    case SHMOBJ_TYPE_STRUCT:
    case SHMOBJ_TYPE_SET:
        rc = emit_container(w, v, depth, pos, &h);
        if (rc != 0)
            return rc;
        break;
    /* a copy for each kind the writer meets most: each knows its kind */
    case SHMOBJ_TYPE_LIST:
        if ((rc = emit_container(w, v, depth, pos, &h)) != 0)
            return rc;
        break;
    case SHMOBJ_TYPE_DICT:
        if ((rc = emit_container(w, v, depth, pos, &h)) != 0)
            return rc;
        break;
    case SHMOBJ_TYPE_MLIST:
    case SHMOBJ_TYPE_MDICT:
    case SHMOBJ_TYPE_MSET:
        /* empty, its control block zeroed (format.h, "mutable containers");
         * its items will live in blocks of their own, so a free must walk
         * this block: SEPARATE from the start */
        rc = shmobj__desc_mut_bytes(v, &body);
        if (rc == 0)
            rc = advance(w, pos, 16, body);
        if (rc != 0)
            return rc;
        memset(w->blk + pos + 16, 0, (size_t)body);
        atomic_fetch_or_explicit(&((struct shmobj__tree *)(void *)w->blk)->flags,
                                 SHMOBJ__TREE_SEPARATE, memory_order_relaxed);
        break;
    default:
        return SHMOBJ_EINVAL;
    }
    /* the cursor passed pos + 16: the header lies in the block */
    memcpy(w->blk + pos, &h, sizeof h);
    *rel = pos;
    return 0;
}

/* The header fields h, slots, keys and index of the fixed container v
 * (list, tuple with slots, struct, dict, set) at the 16-aligned pos, then
 * its values. Inlined once per kind the writer meets most (list, dict),
 * so each copy knows its kind. */
static inline __attribute__((always_inline)) int
emit_container(struct shmobj__wr *w, const shmobj_value *v, int depth, uint64_t pos,
               struct shmobj__obj *h)
{
    uint64_t n, cap, body;
    int keyed, values, rc;
    /* read once: the stores below could alias the description */
    const unsigned type = v->type;
    const shmobj_value *items = v->v.c.items;
    rc = shmobj__desc_container(v, &n, &keyed, &values, &cap);
    if (rc != 0)
        return rc;
    body = 16 * n * (uint64_t)(values + keyed) + 8 * cap;
    rc = advance(w, pos, 16, body);
    if (rc != 0)
        return rc;
    h->count = (uint32_t)n;
    h->len = cap;
    if (type == SHMOBJ_TYPE_STRUCT && keyed)
        h->flags = SHMOBJ__OBJ_NAMES;
    int dict = type == SHMOBJ_TYPE_DICT;
    /* dict: index, then (key, value) pairs; others: values, keys, index */
    uint64_t keys_rel = dict ? pos + 16 + 8 * cap : pos + 16 + (values ? 16 * n : 0);
    uint64_t index_rel = dict ? pos + 16 : keys_rel + 16 * n;
    uint64_t stride = dict ? 32 : 16;
    size_t step = dict ? 2 : 1;
    if (keyed) {
        uint64_t *ix = (uint64_t *)(w->blk + index_rel);
        rc = emit_keys(w, v, type, (size_t)n, keys_rel, stride, ix, cap, depth + 1);
        if (rc != 0)
            return rc;
    }
    if (values) {
        /* value i at at0 + i * vstride (shmobj__value_rel) */
        uint64_t at0 = pos + shmobj__value_rel(type, cap, 0);
        uint64_t vstride = shmobj__value_rel(type, cap, 1) - shmobj__value_rel(type, cap, 0);
        const shmobj_value *it = &items[step - 1];
        for (size_t i = 0; i < n; i++, it += step) {
            rc = emit_slot(w, it, at0 + vstride * i, depth + 1);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* Write the keys of the keyed object v of kind type and enter each into
 * the index at ix (cap entries). Out of line: the containers' walk keeps
 * a small frame. */
static __attribute__((noinline)) int emit_keys(struct shmobj__wr *w, const shmobj_value *v,
                                               unsigned type, size_t n, uint64_t keys_rel,
                                               uint64_t stride, uint64_t *ix, uint64_t cap,
                                               int depth)
{
    /* read once: the stores below could alias the description */
    const shmobj_value *items = v->v.c.items;
    const char *const *names = v->v.c.names;
    /* most indexes are a few words: stores, not a call */
    if (cap <= 16) {
        for (uint64_t e = 0; e < cap; e++)
            ix[e] = 0;
    } else {
        memset(ix, 0, (size_t)(cap * 8));
    }
    for (size_t i = 0; i < n; i++) {
        shmobj_key dk;
        uint8_t *at = w->blk + keys_rel + stride * (uint64_t)i;
        int rc = shmobj__desc_key_of(type, items, names, i, &dk);
        if (rc != 0)
            return rc;
        if (dk.type == SHMOBJ_TYPE_INT) {
            put_slot(at, SHMOBJ__SLOT_INT, 0, (uint64_t)dk.i);
        } else if (dk.type == SHMOBJ_TYPE_STR && dk.len <= SHMOBJ__SSTR_MAX) {
            /* A short string key lives in its slot (no object to follow). */
            if (!shmobj__utf8_ok_inline(dk.ptr, dk.len))
                return SHMOBJ_EINVAL;
            /* packed in registers: bytes stored to a local and read back
             * as a word would stall on store forwarding */
            put_slot(at, SHMOBJ__SLOT_SSTR, (uint8_t)dk.len, shmobj__pack_short(dk.ptr, dk.len));
        } else if (shmobj__key_in_slot(&dk)) {
            /* a medium key: in its slot too, as two words */
            if (!shmobj__utf8_ok_inline(dk.ptr, dk.len))
                return SHMOBJ_EINVAL;
            put_words(at, shmobj__mstr_w0(dk.ptr), shmobj__mstr_w1(dk.ptr, dk.len));
        } else {
            uint64_t rel;
            rc = emit_mem_raw(w, dk.type, dk.ptr, dk.len, depth, &rel);
            if (rc != 0)
                return rc;
            put_slot(at, SHMOBJ__SLOT_OBJ, 0, shmobj__ref_make(w->blk_off + rel, w->gen));
        }
        rc = index_add(ix, cap, v, i, &dk);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Enter key i (described as k) of the keyed description v into the index
 * ix of cap entries, with the probe every reader will walk to find it;
 * SHMOBJ_EINVAL when an earlier key equals it. */
static int index_add(uint64_t *ix, uint64_t cap, const shmobj_value *v,
                     size_t i, const shmobj_key *k)
{
    struct shmobj__probe p;
    uint64_t h = shmobj__key_hash(k), item;
    shmobj__probe_start(&p, ix, cap, h);
    for (;;) {
        switch (shmobj__probe_next(&p, i, &item)) {
        case SHMOBJ__PROBE_EMPTY:
            ix[shmobj__probe_pos(&p)] = shmobj__index_entry(i, h);
            return 0;
        case SHMOBJ__PROBE_HIT: {
            shmobj_key o;
            /* (described without error when it was entered) */
            if (shmobj__desc_key_at(v, (size_t)item, &o) == 0 && desc_key_equal(k, &o))
                return SHMOBJ_EINVAL;
            break;
        }
        default:
            /* Neither: the index holds only keys 0..i-1, and cap keeps an
             * entry empty (shmobj__index_cap). */
            return SHMOBJ_EINVAL;
        }
    }
}

/* Do two described keys (shmobj__desc_key) name the same key? Kinds
 * differ: never (a str and bytes of the same bytes are two keys). */
static int desc_key_equal(const shmobj_key *a, const shmobj_key *b)
{
    if (a->type != b->type)
        return 0;
    if (a->type == SHMOBJ_TYPE_INT)
        return a->i == b->i;
    return a->len == b->len && (a->len == 0 || memcmp(a->ptr, b->ptr, (size_t)a->len) == 0);
}

/* Write the record v at the next 16-aligned position, or (depth 0) as the
 * block's value, its header the tree header; *rel receives its position.
 * Every field is checked against the shape's kind and capacity on the
 * caller's bytes as it is copied, and written in field order, as the
 * measure counted it: strings and bytes inline after the slots (no
 * header, a NUL after), other values as a container's slots hold them. */
static int emit_record(struct shmobj__wr *w, const shmobj_value *v, int depth, uint64_t *rel)
{
    struct shmobj__shape_info si;
    uint64_t n = v->v.r.count, pos, end;
    const shmobj_value *items = v->v.r.items;
    if (depth >= SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_EINVAL;
    /* The caller's shape: the light check of views suffices to write
     * through it (the use count is the shape's own word), and when it
     * fails the full one gives the precise error. */
    int rc = shmobj__shape_open_light(w->sp, v->v.r.shape, &si);
    if (rc != 0) {
        rc = shmobj__shape_open(w->sp, v->v.r.shape, 1, &si);
        if (rc != 0)
            return rc;
    }
    if (n != si.count || items == NULL)
        return SHMOBJ_EINVAL;
    /* the record's use, before its reference can leave the put */
    rc = shmobj__claim_now(w, 1, v->v.r.shape, shmobj__shape_uses(w->sp, &si));
    if (rc != 0)
        return rc;
    pos = (w->cur + 15) & ~UINT64_C(15);
    if (!shmobj__add_ok(pos, 16 + 16 * n, &end) || end > w->lim)
        return SHMOBJ_EINVAL;
    w->cur = end;
    const uint8_t *descs = (const uint8_t *)si.obj + shmobj__shape_descs();
    for (uint64_t i = 0; i < n; i++) {
        const shmobj_value *it = &items[i];
        struct shmobj__field d;
        uint64_t slot = pos + 16 + 16 * i;
        memcpy(&d, descs + 16 * i, sizeof d); /* once: judged and used as read */
        if (it->reserved != 0)
            return SHMOBJ_EINVAL;
        switch (d.kind) {
        case SHMOBJ_TYPE_STR:
        case SHMOBJ_TYPE_BYTES: {
            /* inline after the slots: no header, a NUL after */
            uint64_t len;
            if (it->type != d.kind)
                return SHMOBJ_EINVAL;
            rc = shmobj__desc_mem(it->type, it->v.s.ptr, it->v.s.len, &len);
            if (rc != 0)
                return rc;
            if ((d.cap != 0 && len > d.cap) || len >= UINT32_MAX || len >= w->lim ||
                w->cur > w->lim - len - 1)
                return SHMOBJ_EINVAL;
            if (d.kind == SHMOBJ_TYPE_STR && !shmobj__utf8_ok_inline(it->v.s.ptr, len))
                return SHMOBJ_EINVAL;
            if (len > 0)
                memcpy(w->blk + w->cur, it->v.s.ptr, (size_t)len);
            w->blk[w->cur + len] = 0;
            put_istr(w->blk + slot, d.kind, len, w->cur);
            w->cur += len + 1;
            continue;
        }
        case SHMOBJ_TYPE_BOOL:
        case SHMOBJ_TYPE_INT:
        case SHMOBJ_TYPE_UINT:
        case SHMOBJ_TYPE_DOUBLE: {
            /* the scalar slot here, the kind known: no call (a scalar
             * slot's tag is its kind) */
            uint64_t pl;
            if (it->type != d.kind)
                return SHMOBJ_EINVAL;
            if (d.kind == SHMOBJ_TYPE_BOOL) {
                if (it->v.b != 0 && it->v.b != 1)
                    return SHMOBJ_EINVAL;
                pl = (uint64_t)it->v.b;
            } else {
                memcpy(&pl, &it->v, sizeof pl); /* i, u and d share the bytes */
            }
            struct shmobj__slot *s = (void *)(w->blk + slot);
            s->tag = d.kind;
            s->reserved0 = 0;
            s->reserved1 = 0;
            s->reserved2 = 0;
            atomic_store_explicit(&s->payload, pl, memory_order_relaxed);
            continue;
        }
        case SHMOBJ_TYPE_LINK:
            if (it->type != d.kind)
                return SHMOBJ_EINVAL;
            break;
        case SHMOBJ_TYPE_NULL:
            /* an OBJ slot: null or any object but a string (strings go in
             * STR fields, inline) */
            switch (it->type) {
            case SHMOBJ_TYPE_BOOL:
            case SHMOBJ_TYPE_INT:
            case SHMOBJ_TYPE_UINT:
            case SHMOBJ_TYPE_DOUBLE:
            case SHMOBJ_TYPE_LINK:
            case SHMOBJ_TYPE_STR:
            case SHMOBJ_TYPE_BYTES:
                return SHMOBJ_EINVAL;
            default:
                break;
            }
            break;
        default:
            return SHMOBJ_ECORRUPT; /* a kind no shape is written with */
        }
        rc = emit_slot(w, it, slot, depth + 1);
        if (rc != 0)
            return rc;
    }
    if (depth == 0) {
        /* a record alone (version 3): at 0, its header the tree header,
         * which holds the shape in the size's place (the put checked its
         * size already: it ends here) */
        ((struct shmobj__tree *)(void *)w->blk)->size = v->v.r.shape;
    } else {
        struct shmobj__obj h = {.tag = SHMOBJ_TYPE_RECORD, .count = (uint32_t)n,
                                .len = v->v.r.shape};
        memcpy(w->blk + pos, &h, sizeof h);
    }
    *rel = pos;
    return 0;
}

/* Write the tuple v packed (shmobj__desc_packed) at pos, its header's
 * fields into h; 1 when v is not one. Out of line: the other containers'
 * path keeps its registers. */
static __attribute__((noinline)) int emit_packed(struct shmobj__wr *w, const shmobj_value *v,
                                                 uint64_t pos, struct shmobj__obj *h)
{
    uint64_t body;
    if (!shmobj__desc_packed(v, &body))
        return 1;
    h->flags = SHMOBJ__OBJ_PACKED;
    h->count = (uint32_t)v->v.c.count;
    h->len = body;
    int rc = advance(w, pos, 16, body);
    return rc != 0 ? rc : emit_packed_body(v, h->count, w->blk + pos + 16, body);
}

/* Write the tuple v below the root packed, its header in its slot at
 * slot_rel (shmobj__desc_ptup, SHMOBJ__SLOT_PTUP_MARK) and its body at
 * the cursor, unaligned; 1 when v is not one. One pass: each item is
 * judged as shmobj__desc_ptup() judges it and copied at once, so the
 * description is not walked a second time before its bytes are. An item
 * that makes it no packed tuple (it is then written with slots from the
 * same position) is met before the cursor moves, and whatever was copied
 * before it is overwritten. The measure's answer is the same question's:
 * a description changed since then gives a size the put refuses. */
static __attribute__((noinline)) int emit_ptup(struct shmobj__wr *w, const shmobj_value *v,
                                               int depth, uint64_t slot_rel)
{
    /* the count and items read once: the slot and the body agree on them */
    const uint64_t n = v->v.c.count;
    const shmobj_value *items = v->v.c.items;
    uint64_t pos = w->cur, at = 0;
    if (depth >= SHMOBJ_OBJ_MAXDEPTH || n == 0 || n > SHMOBJ__PTUP_MAX_COUNT || items == NULL)
        return 1;
    /* cur <= lim: the body may take what is left of the block, no more
     * (a slot layout of the same items takes more bytes than the packed
     * one, so a description the measure judged either way fits) */
    uint64_t room = w->lim - pos;
    uint8_t *o = w->blk + pos;
    for (uint64_t i = 0; i < n; i++) {
        const shmobj_value *it = &items[i];
        uint64_t len;
        if (it->type != SHMOBJ_TYPE_STR || it->reserved != 0 ||
            shmobj__desc_mem(SHMOBJ_TYPE_STR, it->v.s.ptr, it->v.s.len, &len) != 0 ||
            len >= SHMOBJ__MAX_BLOCK)
            return 1;
        /* (a length found by strlen has no NUL inside) */
        if (it->v.s.len != SHMOBJ_STRLEN && len > 0 && memchr(it->v.s.ptr, 0, len) != NULL)
            return 1;
        if (len >= room - at)
            return SHMOBJ_EINVAL;
        if (!shmobj__utf8_ok_inline(it->v.s.ptr, len))
            return SHMOBJ_EINVAL;
        copy_bytes(o + at, it->v.s.ptr, len);
        o[at + len] = 0;
        at += len + 1;
    }
    if (at >= UINT32_MAX)
        return 1; /* a body no slot can hold: slots, from pos again */
    w->cur = pos + at;
    put_words(w->blk + slot_rel,
              SHMOBJ__SLOT_OBJ | (uint64_t)SHMOBJ__SLOT_PTUP_MARK << 8 | n << 16 | at << 32,
              shmobj__ref_make(w->blk_off + pos, w->gen));
    return 0;
}

/* The body of a packed tuple of n items: each item's bytes and a NUL,
 * body bytes in all at o. Each length is checked against what is left of
 * the body, so a description changed since it was measured gives
 * SHMOBJ_EINVAL, never a write past it. */
static int emit_packed_body(const shmobj_value *v, uint64_t n, uint8_t *o, uint64_t body)
{
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        const shmobj_value *it = &v->v.c.items[i];
        uint64_t len;
        int rc = shmobj__desc_mem(SHMOBJ_TYPE_STR, it->v.s.ptr, it->v.s.len, &len);
        if (rc != 0)
            return rc;
        if (it->type != SHMOBJ_TYPE_STR || len >= body - at ||
            !shmobj__utf8_ok_inline(it->v.s.ptr, len))
            return SHMOBJ_EINVAL;
        copy_bytes(o + at, it->v.s.ptr, len);
        o[at + len] = 0;
        at += len + 1;
    }
    return at == body ? 0 : SHMOBJ_EINVAL;
}

/* Write the buffer v at the 16-aligned pos, as shmobj__desc_buffer()
 * lays it out, filling the header fields h a buffer sets. Out of line:
 * rare, and shape-heavy. */
static __attribute__((noinline)) int emit_buffer(struct shmobj__wr *w, const shmobj_value *v,
                                                 uint64_t pos, struct shmobj__obj *h)
{
    struct shmobj__buffer_layout l;
    int rc = shmobj__desc_buffer(v, pos, &l);
    if (rc == 0)
        rc = advance(w, pos, l.data_rel, l.nbytes);
    if (rc != 0)
        return rc;
    h->dtype = (uint8_t)l.dtype;
    h->ndim = (uint8_t)l.ndim;
    h->len = l.nbytes;
    uint8_t *o = w->blk + pos;
    struct shmobj__bufhdr bh = {l.data_rel, 0};
    memcpy(o + 16, &bh, sizeof bh);
    if (l.ndim > 0) {
        memcpy(o + 32, l.shape, 8u * l.ndim);
        memcpy(o + 32 + 8u * l.ndim, l.strides, 8u * l.ndim);
    }
    if (v->v.buf->data != NULL && l.nbytes > 0)
        memcpy(o + l.data_rel, v->v.buf->data, (size_t)l.nbytes);
    return 0;
}

static inline int emit_mem(struct shmobj__wr *w, const shmobj_value *v, int depth,
                           uint64_t *rel)
{
    uint64_t n;
    int rc = shmobj__desc_mem(v->type, v->v.s.ptr, v->v.s.len, &n);
    return rc != 0 ? rc : emit_mem_raw(w, v->type, v->v.s.ptr, n, depth, rel);
}

/* Write a str or bytes object (a leaf) of n bytes at p (n resolved, not
 * SHMOBJ_STRLEN) at the next 16-aligned position; the same checks as
 * emit_obj(), without its dispatch. */
static inline int emit_mem_raw(struct shmobj__wr *w, unsigned type, const uint8_t *p,
                               uint64_t n, int depth, uint64_t *rel)
{
    uint64_t pos, end;
    if (depth >= SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_EINVAL;
    /* cur <= lim <= SHMOBJ__MAX_BLOCK: no overflow below once
     * n < SHMOBJ__MAX_BLOCK. */
    pos = (w->cur + 15) & ~UINT64_C(15);
    if (n >= SHMOBJ__MAX_BLOCK || (end = pos + 17 + n) > w->lim)
        return SHMOBJ_EINVAL;
    /* Checked on the source: reading bytes just stored would stall on
     * store forwarding. */
    if (type == SHMOBJ_TYPE_STR && !shmobj__utf8_ok_inline(p, n))
        return SHMOBJ_EINVAL;
    uint8_t *o = w->blk + pos;
    struct shmobj__obj h = {.tag = (uint8_t)type, .len = n};
    memcpy(o, &h, sizeof h);
    copy_bytes(o + 16, p, n);
    o[16 + n] = 0;
    w->cur = end;
    *rel = pos;
    return 0;
}

static inline void put_slot(uint8_t *at, uint8_t tag, uint8_t r0, uint64_t pl)
{
    struct shmobj__slot *s = (void *)at;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* tag, reserved0 and the zero fields in one store */
    uint64_t head = (uint64_t)tag | (uint64_t)r0 << 8;
    memcpy(s, &head, sizeof head);
#else
    s->tag = tag;
    s->reserved0 = r0;
    s->reserved1 = 0;
    s->reserved2 = 0;
#endif
    atomic_store_explicit(&s->payload, pl, memory_order_relaxed);
}

/* Write the 16 bytes of a slot as two words (little-endian, as the format
 * reads them). */
static inline void put_words(uint8_t *at, uint64_t w0, uint64_t w1)
{
    struct shmobj__slot *s = (void *)at;
    memcpy(s, &w0, sizeof w0);
    atomic_store_explicit(&s->payload, w1, memory_order_relaxed);
}

/* Write the slot of a record's inline string or bytes of len bytes at
 * the block-relative rel. */
static inline void put_istr(uint8_t *at, unsigned kind, uint64_t len, uint64_t rel)
{
    struct shmobj__slot *s = (void *)at;
    s->tag = SHMOBJ__SLOT_ISTR;
    s->reserved0 = (uint8_t)kind;
    s->reserved1 = 0;
    s->reserved2 = (uint32_t)len;
    atomic_store_explicit(&s->payload, rel, memory_order_relaxed);
}

/* Copy n bytes to o: a few word moves for strings of up to 32 bytes instead
 * of a call to memcpy. [o, o + n) lies in the block (checked by the caller). */
static inline void copy_bytes(uint8_t *o, const uint8_t *p, uint64_t n)
{
    if (n >= 8 && n <= 16) {
        uint64_t a = shmobj__load64(p), b = shmobj__load64(p + n - 8);
        memcpy(o, &a, 8);
        memcpy(o + n - 8, &b, 8);
    } else if (n > 16 && n <= 32) {
        uint64_t a = shmobj__load64(p), b = shmobj__load64(p + 8);
        uint64_t c = shmobj__load64(p + n - 16), d = shmobj__load64(p + n - 8);
        memcpy(o, &a, 8);
        memcpy(o + 8, &b, 8);
        memcpy(o + n - 16, &c, 8);
        memcpy(o + n - 8, &d, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t a = (uint32_t)shmobj__load32(p), b = (uint32_t)shmobj__load32(p + n - 4);
        memcpy(o, &a, 4);
        memcpy(o + n - 4, &b, 4);
    } else if (n < 4) {
        for (uint64_t i = 0; i < n; i++)
            o[i] = p[i];
    } else {
        memcpy(o, p, (size_t)n);
    }
}

/* Move the cursor to pos + a + b, checking for overflow. */
static int advance(struct shmobj__wr *w, uint64_t pos, uint64_t a, uint64_t b)
{
    uint64_t end;
    /* The limit also keeps the writing pass inside its block should the
     * description change under it (another thread). */
    if (!shmobj__add_ok(pos, a, &end) || !shmobj__add_ok(end, b, &end) ||
        end > w->lim)
        return SHMOBJ_EINVAL;
    w->cur = end;
    return 0;
}
