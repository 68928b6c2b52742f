/* Writing: a value description into one new block, in one pass after the
 * measure (value-measure.c) sized it; the public put calls.
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
 *   buffer extents), before or while they are copied, never read back
 *   from the block.
 * - A new block is fully written before its reference leaves this call;
 *   nothing is published here. */
#include <string.h>

#include "value-build.h"
#include "index-probe.h"
#include "content-check.h"

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

static inline int emit_slot(struct shmobj__wr *w, const shmobj_value *v, uint64_t slot_rel,
                            int depth);
static inline int emit_mem_raw(struct shmobj__wr *w, unsigned type, const uint8_t *p,
                               uint64_t n, int depth, uint64_t *rel);
static inline int emit_mem(struct shmobj__wr *w, const shmobj_value *v, int depth,
                           uint64_t *rel);
static inline void put_slot(uint8_t *at, uint8_t tag, uint8_t r0, uint64_t pl);

/* Write the 16 bytes of a slot as two words (little-endian, as the format
 * reads them). */
static inline void put_words(uint8_t *at, uint64_t w0, uint64_t w1)
{
    struct shmobj__slot *s = (void *)at;
    memcpy(s, &w0, sizeof w0);
    atomic_store_explicit(&s->payload, w1, memory_order_relaxed);
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

int shmobj__emit_buffer(struct shmobj__wr *w, const shmobj_value *v, uint64_t pos,
                        struct shmobj__obj *h)
{
    const shmobj_buffer_desc *b = v->v.buf;
    if (b == NULL)
        return SHMOBJ_EINVAL;
    unsigned nd = b->ndim, dt = b->dtype;
    uint64_t isz = shmobj__dtype_size(dt), nb, dr;
    int64_t st[SHMOBJ_BUFFER_MAXDIM];
    const uint64_t *shape = b->shape;
    if (isz == 0 || nd > SHMOBJ_BUFFER_MAXDIM || (nd > 0 && shape == NULL))
        return SHMOBJ_EINVAL;
    if (b->strides == NULL) {
        uint64_t acc = isz;
        for (unsigned d = nd; d-- > 0;) {
            if (acc > INT64_MAX)
                return SHMOBJ_EINVAL;
            st[d] = (int64_t)acc;
            if (!shmobj__mul_ok(acc, shape[d], &acc))
                return SHMOBJ_EINVAL;
        }
        nb = acc;
        if (b->nbytes != 0 && b->nbytes != nb)
            return SHMOBJ_EINVAL;
    } else {
        if (nd > 0)
            memcpy(st, b->strides, 8u * nd);
        nb = b->nbytes;
        if (!shmobj__buffer_extent_ok(nd, shape, st, isz, nb))
            return SHMOBJ_EINVAL;
    }
    uint64_t fixed = 16 + sizeof(struct shmobj__bufhdr) + 16u * nd, start;
    if (!shmobj__add_ok(pos, fixed, &start) ||
        !shmobj__align_up(start, SHMOBJ__DATA_ALIGN, &start))
        return SHMOBJ_EINVAL;
    dr = start - pos;
    int rc = advance(w, pos, dr, nb);
    if (rc != 0)
        return rc;
    w->need64 = 1;
    h->dtype = (uint8_t)dt;
    h->ndim = (uint8_t)nd;
    h->len = nb;
    if (w->blk != NULL) {
        uint8_t *o = w->blk + pos;
        struct shmobj__bufhdr bh = {dr, 0};
        memcpy(o + 16, &bh, sizeof bh);
        if (nd > 0) {
            memcpy(o + 32, shape, 8u * nd);
            memcpy(o + 32 + 8u * nd, st, 8u * nd);
        }
        if (b->data != NULL && nb > 0)
            memcpy(o + dr, b->data, (size_t)nb);
    }
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
 * the cursor, unaligned; 1 when v is not one. */
static __attribute__((noinline)) int emit_ptup(struct shmobj__wr *w, const shmobj_value *v,
                                               int depth, uint64_t slot_rel)
{
    uint64_t body, pos = w->cur;
    if (!shmobj__desc_ptup(v, depth, &body))
        return 1;
    /* the count read once: the slot and the body agree on it */
    uint64_t n = v->v.c.count;
    if (n == 0 || n > SHMOBJ__PTUP_MAX_COUNT)
        return SHMOBJ_EINVAL;
    int rc = advance(w, pos, 0, body);
    if (rc == 0)
        rc = emit_packed_body(v, n, w->blk + pos, body);
    if (rc != 0)
        return rc;
    put_words(w->blk + slot_rel,
              SHMOBJ__SLOT_OBJ | (uint64_t)SHMOBJ__SLOT_PTUP_MARK << 8 | n << 16 | body << 32,
              shmobj__ref_make(w->blk_off + pos, w->gen));
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
        rc = shmobj__emit_buffer(w, v, pos, &h);
        if (rc != 0)
            return rc;
        break;
    case SHMOBJ_TYPE_RECORD:
        return shmobj__emit_record(w, v, depth, rel);
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

static inline int emit_mem(struct shmobj__wr *w, const shmobj_value *v, int depth,
                           uint64_t *rel)
{
    uint64_t n;
    int rc = shmobj__desc_mem(v->type, v->v.s.ptr, v->v.s.len, &n);
    return rc != 0 ? rc : emit_mem_raw(w, v->type, v->v.s.ptr, n, depth, rel);
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

int shmobj__emit_value(struct shmobj__wr *w, const shmobj_value *v, uint64_t slot_rel,
                       int depth)
{
    return emit_slot(w, v, slot_rel, depth);
}

int shmobj__obj_put(struct shmobj__space *sp, const shmobj_value *val,
                    shmobj__ref *out)
{
    uint64_t size;
    int need64;
    shmobj__ref r;
    void *p;
    int rc = shmobj__measure(val, &size, &need64);
    if (rc != 0)
        return rc;
    /* A free walks blocks that hold records (their shapes' uses) or
     * adopted objects (separate blocks). */
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
    struct shmobj__wr w = {p, shmobj__ref_off(r), shmobj__ref_gen(r), SHMOBJ__PREFIX, size, 0,
                           sp, &cl};
    if (val->type == SHMOBJ_TYPE_RECORD) {
        /* its header the tree header, its slots from 16 (shmobj__measure()
         * counted so) */
        uint64_t rel;
        w.cur = 0;
        rc = shmobj__emit_record(&w, val, 0, &rel);
        if (rc == 0 && rel != 0)
            rc = SHMOBJ_EINVAL;
    } else {
        rc = emit_slot(&w, val, sizeof(struct shmobj__tree), 0);
    }
    /* A description changed by another thread during the call could make
     * the second pass disagree with the first: refuse it. */
    if (rc == 0 && w.cur != size)
        rc = SHMOBJ_EINVAL;
    /* Records took their shapes' uses and adopted objects their marks as
     * they were written (a failure gives them back); past the log's size
     * they are taken now, by a walk of the block. */
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

int shmobj_obj_put(shmobj_segment *seg, const shmobj_value *val, shmobj_ref *ref)
{
    if (seg == NULL || val == NULL || ref == NULL)
        return SHMOBJ_EINVAL;
    return shmobj__obj_put(shmobj__space_of_seg(seg), val, ref);
}

int shmobj_obj_put_int(shmobj_segment *seg, int64_t x, shmobj_ref *ref)
{
    shmobj_value v = SHMOBJ_VAL_INT(x);
    return shmobj_obj_put(seg, &v, ref);
}

int shmobj_obj_put_double(shmobj_segment *seg, double x, shmobj_ref *ref)
{
    shmobj_value v = SHMOBJ_VAL_DOUBLE(x);
    return shmobj_obj_put(seg, &v, ref);
}

int shmobj_obj_put_str(shmobj_segment *seg, const char *s, size_t len,
                       shmobj_ref *ref)
{
    if (s == NULL)
        return SHMOBJ_EINVAL;
    shmobj_value v = SHMOBJ_VAL_STRN(s, len);
    return shmobj_obj_put(seg, &v, ref);
}

int shmobj_obj_put_bytes(shmobj_segment *seg, const void *p, size_t n,
                         shmobj_ref *ref)
{
    if (p == NULL && n != 0)
        return SHMOBJ_EINVAL;
    shmobj_value v = SHMOBJ_VAL_BYTES(p, n);
    return shmobj_obj_put(seg, &v, ref);
}

int shmobj_obj_put_buffer(shmobj_segment *seg, unsigned dtype, unsigned ndim,
                          const uint64_t *shape, const void *data,
                          shmobj_ref *ref, void **out_data)
{
    shmobj_value v = SHMOBJ_VAL_BUFFER(dtype, ndim, shape, data);
    int rc = shmobj_obj_put(seg, &v, ref);
    if (rc != 0 || out_data == NULL)
        return rc;
    /* The layout is ours: root slot -> the buffer right after the prefix. */
    shmobj_view view;
    shmobj_buffer_info info = {.struct_size = sizeof info};
    rc = shmobj_obj_get(seg, *ref, &view);
    if (rc == 0)
        rc = shmobj_buffer_get(&view, &info);
    if (rc != 0) {
        (void)shmobj_obj_free(seg, *ref);
        return rc;
    }
    *out_data = info.data;
    return 0;
}

