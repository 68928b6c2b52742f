/* Building objects: measure a value tree, allocate one block, write it in
 * one pass; replacing items; freeing whole trees.
 *
 * Invariants kept here:
 * - Measuring (measure_*) is a lean walk that adds up the sizes the writer
 *   (emit_*) will use, with the same structural checks; the writer never
 *   moves its cursor past the size measured (struct wr.lim) and the put
 *   fails unless it ends exactly there, so a description that changes
 *   between the passes (another thread) gives SHMOBJ_EINVAL, never a write
 *   outside the block.
 * - Every object starts 16-aligned relative to the block, buffer data
 *   64-aligned; the block is allocated 64-aligned when it holds a buffer,
 *   so block-relative alignment is segment alignment.
 * - Nothing is published by this file except through atomic exchange of an
 *   OBJ slot payload (shmobj_view_set()); a new block is fully written
 *   before its reference leaves this process.
 * - A separately allocated item is freed exactly once: the exchange hands
 *   the old reference to exactly one replacer. */
#include <string.h>

#include "objfmt.h"

/* Largest block we build: references carry 48-bit offsets. */
#define MAX_BLOCK (UINT64_C(1) << 46)

int shmobj__utf8_ok(const uint8_t *s, uint64_t n)
{
    uint64_t i = 0;
    /* Fast path: all ASCII (one OR over the words, overlapping at the end). */
    if (n >= 8) {
        uint64_t acc = 0;
        for (; i + 8 <= n; i += 8)
            acc |= shmobj__load64(s + i);
        acc |= shmobj__load64(s + n - 8);
        if ((acc & UINT64_C(0x8080808080808080)) == 0)
            return 1;
        i = 0;
    }
    while (i < n) {
        /* Fast path: eight ASCII bytes at a time. */
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if ((w & UINT64_C(0x8080808080808080)) == 0) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        uint64_t need;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i - 1 < need)
            return 0;
        for (uint64_t k = 1; k <= need; k++) {
            uint8_t cc = s[i + k];
            if ((cc & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (cc & 0x3f);
        }
        /* Overlong forms, surrogates and values beyond U+10FFFF. */
        if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) ||
            (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
            return 0;
        i += need + 1;
    }
    return 1;
}

struct wr {
    uint8_t *blk;     /* this process's address of the block; NULL: measure */
    uint64_t blk_off; /* segment offset of the block */
    uint16_t gen;     /* its generation */
    uint64_t cur;     /* next free byte, relative to the block */
    uint64_t lim;     /* bytes the cursor may reach (the block's size) */
    int need64;       /* holds a buffer: allocate 64-aligned */
};

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
static int advance(struct wr *w, uint64_t pos, uint64_t a, uint64_t b)
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

/* A key as the description gives it: kind, int value or bytes. */
struct dkey {
    unsigned type;
    int64_t i;
    const void *p;
    uint64_t n;
};

static int desc_key(const shmobj_value *k, struct dkey *out)
{
    out->type = k->type;
    out->i = 0;
    out->p = NULL;
    out->n = 0;
    switch (k->type) {
    case SHMOBJ_TYPE_INT:
        out->i = k->v.i;
        return 0;
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES:
        out->p = k->v.s.ptr;
        out->n = k->v.s.len;
        if (out->n == SHMOBJ_STRLEN) {
            if (out->p == NULL || k->type != SHMOBJ_TYPE_STR)
                return SHMOBJ_EINVAL;
            out->n = strlen(out->p);
        }
        if (out->p == NULL && out->n != 0)
            return SHMOBJ_EINVAL;
        return 0;
    default:
        return SHMOBJ_EINVAL;
    }
}

static uint64_t dkey_hash(const struct dkey *k)
{
    return k->type == SHMOBJ_TYPE_INT ? shmobj__hash_int(k->i)
                                      : shmobj__hash_mem(k->type, k->p, k->n);
}

static int dkey_equal(const struct dkey *a, const struct dkey *b)
{
    if (a->type != b->type)
        return 0;
    if (a->type == SHMOBJ_TYPE_INT)
        return a->i == b->i;
    return a->n == b->n && (a->n == 0 || memcmp(a->p, b->p, (size_t)a->n) == 0);
}

/* Key i of a keyed description: set member, dict key or struct name. */
static shmobj_value key_of(const shmobj_value *v, size_t i)
{
    switch (v->type) {
    case SHMOBJ_TYPE_SET:
        return v->v.c.items[i];
    case SHMOBJ_TYPE_DICT:
        return v->v.c.items[2 * i];
    default: {
        /* STRLEN: measured (and a NULL name refused) by desc_key() */
        shmobj_value s = SHMOBJ_VAL_STRN(v->v.c.names[i], SHMOBJ_STRLEN);
        return s;
    }
    }
}

static inline int emit_slot(struct wr *w, const shmobj_value *v, uint64_t slot_rel,
                            int depth);
static inline int emit_mem_raw(struct wr *w, unsigned type, const uint8_t *p,
                               uint64_t n, int depth, uint64_t *rel);
static inline int emit_mem(struct wr *w, const shmobj_value *v, int depth,
                           uint64_t *rel);
static inline void put_slot(uint8_t *at, uint8_t tag, uint8_t r0, uint64_t pl);

/* Enter key i (description k) into the index; SHMOBJ_EINVAL when an
 * earlier key equals it. */
static int index_add(uint64_t *ix, uint64_t cap, const shmobj_value *v,
                     size_t i, const struct dkey *k)
{
    uint64_t h = dkey_hash(k), pos = h & (cap - 1);
    for (;;) {
        uint64_t e = ix[pos];
        if (e == 0) {
            ix[pos] = ((uint64_t)i + 1) | (h >> 32 << 32);
            return 0;
        }
        if ((e >> 32) == (h >> 32)) {
            struct dkey o;
            shmobj_value ov = key_of(v, (size_t)((e & UINT32_MAX) - 1));
            (void)desc_key(&ov, &o);
            if (dkey_equal(k, &o))
                return SHMOBJ_EINVAL;
        }
        pos = (pos + 1) & (cap - 1);
    }
}

/* Write the keys of a keyed object and enter each into the index at ix
 * (cap entries). */
static int emit_keys(struct wr *w, const shmobj_value *v, size_t n,
                     uint64_t keys_rel, uint64_t stride, uint64_t *ix, uint64_t cap,
                     int depth)
{
    const shmobj_value *items = v->v.c.items;
    memset(ix, 0, (size_t)(cap * 8));
    for (size_t i = 0; i < n; i++) {
        struct dkey dk;
        int rc;
        uint8_t *at = w->blk + keys_rel + stride * (uint64_t)i;
        if (v->type == SHMOBJ_TYPE_STRUCT) {
            const char *name = v->v.c.names[i];
            if (name == NULL)
                return SHMOBJ_EINVAL;
            dk.type = SHMOBJ_TYPE_STR;
            dk.i = 0;
            dk.p = name;
            dk.n = strlen(name);
        } else {
            rc = desc_key(v->type == SHMOBJ_TYPE_SET ? &items[i] : &items[2 * i], &dk);
            if (rc != 0)
                return rc;
        }
        if (dk.type == SHMOBJ_TYPE_INT) {
            put_slot(at, SHMOBJ__SLOT_INT, 0, (uint64_t)dk.i);
        } else if (dk.type == SHMOBJ_TYPE_STR && dk.n <= SHMOBJ__SSTR_MAX) {
            /* A short string key lives in its slot (no object to follow). */
            if (!shmobj__utf8_ok_inline(dk.p, dk.n))
                return SHMOBJ_EINVAL;
            /* packed in registers: bytes stored to a local and read back
             * as a word would stall on store forwarding */
            put_slot(at, SHMOBJ__SLOT_SSTR, (uint8_t)dk.n, shmobj__pack_short(dk.p, dk.n));
        } else {
            uint64_t rel;
            rc = emit_mem_raw(w, dk.type, dk.p, dk.n, depth, &rel);
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

static int emit_buffer(struct wr *w, const shmobj_value *v, uint64_t pos,
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

/* Write the heap object v at the next 16-aligned position;
 * *rel receives that position. */
static int emit_obj(struct wr *w, const shmobj_value *v, int depth, uint64_t *rel)
{
    uint64_t pos, n, cap, body;
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
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_TUPLE:
    case SHMOBJ_TYPE_STRUCT:
    case SHMOBJ_TYPE_DICT:
    case SHMOBJ_TYPE_SET: {
        n = v->v.c.count;
        if (n >= UINT32_MAX || (n > 0 && v->v.c.items == NULL))
            return SHMOBJ_EINVAL;
        int keyed = v->type == SHMOBJ_TYPE_DICT || v->type == SHMOBJ_TYPE_SET ||
                    (v->type == SHMOBJ_TYPE_STRUCT && v->v.c.names != NULL);
        int values = v->type != SHMOBJ_TYPE_SET;
        cap = keyed ? shmobj__index_cap(n) : 0;
        body = 16 * n * (uint64_t)(values + keyed) + 8 * cap;
        rc = advance(w, pos, 16, body);
        if (rc != 0)
            return rc;
        h.count = (uint32_t)n;
        h.len = cap;
        if (v->type == SHMOBJ_TYPE_STRUCT && keyed)
            h.flags = SHMOBJ__OBJ_NAMES;
        int dict = v->type == SHMOBJ_TYPE_DICT;
        /* dict: index, then (key, value) pairs; others: values, keys, index */
        uint64_t keys_rel = dict ? pos + 16 + 8 * cap : pos + 16 + (values ? 16 * n : 0);
        uint64_t index_rel = dict ? pos + 16 : keys_rel + 16 * n;
        uint64_t stride = dict ? 32 : 16;
        size_t step = dict ? 2 : 1;
        if (keyed) {
            uint64_t *ix = (uint64_t *)(w->blk + index_rel);
            rc = emit_keys(w, v, (size_t)n, keys_rel, stride, ix, cap, depth + 1);
            if (rc != 0)
                return rc;
        }
        if (values) {
            for (size_t i = 0; i < n; i++) {
                rc = emit_slot(w, &v->v.c.items[i * step + step - 1],
                               pos + shmobj__value_rel(v->type, cap, i), depth + 1);
                if (rc != 0)
                    return rc;
            }
        }
        break;
    }
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
static inline int emit_mem_raw(struct wr *w, unsigned type, const uint8_t *p,
                               uint64_t n, int depth, uint64_t *rel)
{
    uint64_t pos, end;
    if (depth >= SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_EINVAL;
    /* cur <= lim <= MAX_BLOCK: no overflow below once n < MAX_BLOCK. */
    pos = (w->cur + 15) & ~UINT64_C(15);
    if (n >= MAX_BLOCK || (end = pos + 17 + n) > w->lim)
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

static inline int emit_mem(struct wr *w, const shmobj_value *v, int depth,
                           uint64_t *rel)
{
    const uint8_t *p = (const uint8_t *)v->v.s.ptr;
    uint64_t n = v->v.s.len;
    if (n == SHMOBJ_STRLEN) {
        if (p == NULL || v->type != SHMOBJ_TYPE_STR)
            return SHMOBJ_EINVAL;
        n = strlen((const char *)p);
    }
    if (p == NULL && n != 0)
        return SHMOBJ_EINVAL;
    return emit_mem_raw(w, v->type, p, n, depth, rel);
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
emit_slot(struct wr *w, const shmobj_value *v, uint64_t slot_rel, int depth)
{
    uint8_t tag;
    uint64_t pl = 0, rel;
    switch (v->type) {
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES: {
        int rc = emit_mem(w, v, depth, &rel);
        if (rc != 0)
            return rc;
        tag = SHMOBJ__SLOT_OBJ;
        pl = shmobj__ref_make(w->blk_off + rel, w->gen);
        break;
    }
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
        tag = SHMOBJ__SLOT_OBJ;
        break;
    default: {
        int rc = emit_obj(w, v, depth, &rel);
        if (rc != 0)
            return rc;
        tag = SHMOBJ__SLOT_OBJ;
        pl = shmobj__ref_make(w->blk_off + rel, w->gen);
        break;
    }
    }
    put_slot(w->blk + slot_rel, tag, 0, pl);
    return 0;
}

/* ---- measuring ---------------------------------------------------------
 * A lean walk of the description that only adds up sizes, with the same
 * structural checks as the writer (types, depth, counts, lengths, NULL
 * pointers, buffer shapes), so shmobj_obj_size() refuses what a put would.
 * Content checks (UTF-8, duplicate keys) are the writer's; the writer also
 * stops at the size measured here, so the two can never disagree by more
 * than an error. */

static int measure_obj(const shmobj_value *v, int depth, uint64_t *cur, int *need64);

/* Bytes of a str/bytes object of n bytes at the 16-aligned *cur. */
static inline int measure_mem(uint64_t n, int depth, uint64_t *cur)
{
    uint64_t pos = (*cur + 15) & ~UINT64_C(15), end;
    if (depth >= SHMOBJ_OBJ_MAXDEPTH || n >= MAX_BLOCK || !shmobj__add_ok(pos, 17 + n, &end) || end > MAX_BLOCK)
        return SHMOBJ_EINVAL;
    *cur = end;
    return 0;
}

static inline __attribute__((always_inline)) int
measure_slot(const shmobj_value *v, int depth, uint64_t *cur, int *need64)
{
    switch (v->type) {
    case SHMOBJ_TYPE_BOOL:
        return v->v.b == 0 || v->v.b == 1 ? 0 : SHMOBJ_EINVAL;
    case SHMOBJ_TYPE_INT:
    case SHMOBJ_TYPE_UINT:
    case SHMOBJ_TYPE_DOUBLE:
    case SHMOBJ_TYPE_NULL:
        return 0;
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES: {
        /* desc_key() inline: the leaves are most of a tree */
        uint64_t n = v->v.s.len;
        if (n == SHMOBJ_STRLEN) {
            if (v->v.s.ptr == NULL || v->type != SHMOBJ_TYPE_STR)
                return SHMOBJ_EINVAL;
            n = strlen(v->v.s.ptr);
        }
        if (v->v.s.ptr == NULL && n != 0)
            return SHMOBJ_EINVAL;
        return measure_mem(n, depth, cur);
    }
    default:
        return measure_obj(v, depth, cur, need64);
    }
}

static int measure_obj(const shmobj_value *v, int depth, uint64_t *cur, int *need64)
{
    uint64_t pos, n, cap, end;
    int rc;
    if (depth >= SHMOBJ_OBJ_MAXDEPTH || *cur > MAX_BLOCK)
        return SHMOBJ_EINVAL;
    pos = (*cur + 15) & ~UINT64_C(15);
    switch (v->type) {
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES: {
        struct dkey k;
        rc = desc_key(v, &k);
        return rc != 0 ? rc : measure_mem(k.n, depth, cur);
    }
    case SHMOBJ_TYPE_BUFFER: {
        /* Rare and shape-heavy: the writer's own code, without a block. */
        struct wr w = {NULL, 0, 0, pos, MAX_BLOCK, 0};
        struct shmobj__obj h;
        rc = emit_buffer(&w, v, pos, &h);
        if (rc != 0)
            return rc;
        *cur = w.cur;
        *need64 = 1;
        return 0;
    }
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_TUPLE:
    case SHMOBJ_TYPE_STRUCT:
    case SHMOBJ_TYPE_DICT:
    case SHMOBJ_TYPE_SET:
        break;
    default:
        return SHMOBJ_EINVAL;
    }
    n = v->v.c.count;
    if (n >= UINT32_MAX || (n > 0 && v->v.c.items == NULL))
        return SHMOBJ_EINVAL;
    const shmobj_value *items = v->v.c.items;
    int keyed = v->type == SHMOBJ_TYPE_DICT || v->type == SHMOBJ_TYPE_SET ||
                (v->type == SHMOBJ_TYPE_STRUCT && v->v.c.names != NULL);
    int values = v->type != SHMOBJ_TYPE_SET;
    cap = keyed ? shmobj__index_cap(n) : 0;
    /* n < 2^32: no overflow in 16 * n * 2 + 8 * cap */
    if (!shmobj__add_ok(pos, 16 + 16 * n * (uint64_t)(values + keyed) + 8 * cap, &end) ||
        end > MAX_BLOCK)
        return SHMOBJ_EINVAL;
    *cur = end;
    depth++;
    if (keyed) {
        for (size_t i = 0; i < n; i++) {
            const shmobj_value *k;
            if (v->type == SHMOBJ_TYPE_STRUCT) {
                const char *name = v->v.c.names[i];
                if (name == NULL)
                    return SHMOBJ_EINVAL;
                uint64_t kn = strlen(name);
                rc = kn <= SHMOBJ__SSTR_MAX ? 0 : measure_mem(kn, depth, cur);
            } else {
                k = v->type == SHMOBJ_TYPE_SET ? &items[i] : &items[2 * i];
                if (k->type == SHMOBJ_TYPE_INT) {
                    rc = 0;
                } else {
                    struct dkey dk;
                    rc = desc_key(k, &dk);
                    if (rc == 0 && !(k->type == SHMOBJ_TYPE_STR && dk.n <= SHMOBJ__SSTR_MAX))
                        rc = measure_mem(dk.n, depth, cur);
                }
            }
            if (rc != 0)
                return rc;
        }
    }
    if (values) {
        size_t step = v->type == SHMOBJ_TYPE_DICT ? 2 : 1;
        for (size_t i = 0; i < n; i++) {
            rc = measure_slot(&items[i * step + step - 1], depth, cur, need64);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* Measure a description: the bytes of its block and whether it needs a
 * 64-aligned one. */
static int measure(const shmobj_value *val, uint64_t *size, int *need64)
{
    uint64_t cur = SHMOBJ__PREFIX;
    *need64 = 0;
    int rc = measure_slot(val, 0, &cur, need64);
    if (rc != 0)
        return rc;
    *size = cur;
    return 0;
}

int shmobj_obj_size(const shmobj_value *val, size_t *bytes)
{
    uint64_t size;
    int need64;
    if (val == NULL || bytes == NULL)
        return SHMOBJ_EINVAL;
    int rc = measure(val, &size, &need64);
    if (rc == 0)
        *bytes = (size_t)size;
    return rc;
}

int shmobj__obj_put(struct shmobj__space *sp, const shmobj_value *val,
                    shmobj__ref *out)
{
    uint64_t size;
    int need64;
    shmobj__ref r;
    void *p;
    int rc = measure(val, &size, &need64);
    if (rc != 0)
        return rc;
    rc = sp->ops->alloc(sp, size, need64 ? SHMOBJ__DATA_ALIGN : 16, &r);
    if (rc != 0)
        return rc;
    rc = shmobj__space_at(sp, shmobj__ref_off(r), size, &p);
    if (rc != 0) {
        (void)sp->ops->free(sp, r);
        return rc;
    }
    struct shmobj__tree *t = p;
    t->magic = SHMOBJ__TREE_MAGIC;
    t->version = SHMOBJ__TREE_VERSION;
    atomic_store_explicit(&t->flags, 0, memory_order_relaxed);
    t->size = size;
    struct wr w = {p, shmobj__ref_off(r), shmobj__ref_gen(r), SHMOBJ__PREFIX, size, 0};
    rc = emit_slot(&w, val, sizeof(struct shmobj__tree), 0);
    /* A description changed by another thread during the call could make
     * the second pass disagree with the first: refuse it. */
    if (rc == 0 && w.cur != size)
        rc = SHMOBJ_EINVAL;
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
    return shmobj__obj_put((struct shmobj__space *)seg, val, ref);
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

/* ---- freeing ---------------------------------------------------------- */

static int free_tree(struct shmobj__space *sp, shmobj__ref ref, int from_caller,
                     int depth, uint64_t *budget);

static int free_slot(struct shmobj__space *sp, struct shmobj__slot *s,
                     uint64_t blk, uint64_t blen, uint16_t gen, int depth,
                     uint64_t *budget);

/* Free what the items of a container reach outside its block. */
static int free_children(struct shmobj__space *sp, const shmobj_view *v,
                         int depth, uint64_t *budget)
{
    switch (v->type) {
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_TUPLE:
    case SHMOBJ_TYPE_STRUCT:
    case SHMOBJ_TYPE_DICT:
        break;
    default:
        return 0; /* sets, strings, bytes, buffers hold no references out */
    }
    if (depth >= SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_ECORRUPT;
    int first = 0;
    for (uint32_t i = 0; i < v->count; i++) {
        if (*budget == 0)
            return SHMOBJ_ECORRUPT;
        --*budget;
        struct shmobj__slot *item =
            (void *)((uint8_t *)v->obj + shmobj__value_rel(v->type, v->len, i));
        int rc = free_slot(sp, item, v->obj_blk, v->obj_blen, v->obj_gen,
                           depth + 1, budget);
        if (rc != 0 && first == 0)
            first = rc;
    }
    return first;
}

static int free_slot(struct shmobj__space *sp, struct shmobj__slot *s,
                     uint64_t blk, uint64_t blen, uint16_t gen, int depth,
                     uint64_t *budget)
{
    if (s->tag != SHMOBJ__SLOT_OBJ)
        return 0;
    uint64_t p = atomic_load_explicit(&s->payload, memory_order_acquire);
    if (p == 0)
        return 0;
    uint64_t off = shmobj__ref_off(p);
    if (!(off >= blk && off - blk < blen))
        return free_tree(sp, p, 0, depth + 1, budget);
    shmobj_view v = {0};
    int rc = shmobj__view_follow(sp, p, blk, blen, gen, &v);
    if (rc != 0)
        return rc;
    return free_children(sp, &v, depth, budget);
}

/* from_caller: ref is the caller's argument, not read from a slot (see
 * shmobj__tree_open()). */
static int free_tree(struct shmobj__space *sp, shmobj__ref ref, int from_caller,
                     int depth, uint64_t *budget)
{
    uint64_t blk, blen;
    if (depth > SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_ECORRUPT;
    int rc = shmobj__tree_open(sp, ref, from_caller, &blk, &blen);
    if (rc != 0)
        return rc;
    struct shmobj__tree *t = (void *)(sp->base + blk);
    /* A block none of whose slots was ever given a block of its own holds
     * no reference out: nothing to walk. */
    if (atomic_load_explicit(&t->flags, memory_order_acquire) & SHMOBJ__TREE_SEPARATE)
        rc = free_slot(sp, (void *)(sp->base + blk + sizeof(struct shmobj__tree)),
                       blk, blen, shmobj__ref_gen(ref), depth, budget);
    int rc2 = sp->ops->free(sp, ref);
    return rc2 != 0 ? rc2 : rc;
}

static uint64_t work_budget(struct shmobj__space *sp)
{
    /* Every slot takes 16 bytes of the segment: a well-formed graph has
     * fewer slots than that, so this bounds the work on a damaged one. */
    return atomic_load_explicit(&sp->mapped, memory_order_relaxed) / 16 + 64;
}

int shmobj_obj_free(shmobj_segment *seg, shmobj_ref ref)
{
    struct shmobj__space *sp = (struct shmobj__space *)seg;
    if (sp == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    /* Fast path: a block that never had a slot replaced holds no reference
     * out, so only the arena needs to see it (its free checks the
     * generation: a stale ref still gives SHMOBJ_ESTALE). The header read
     * here only decides between the paths and is bounds-checked; anything
     * unusual takes the full path, which checks everything. */
    uint64_t off = shmobj__ref_off(ref);
    uint64_t mapped = atomic_load_explicit(&sp->mapped, memory_order_acquire);
    if (shmobj__aligned(off, 16) && shmobj__range_ok(off, SHMOBJ__PREFIX, mapped)) {
        const struct shmobj__tree *t = (const void *)(sp->base + off);
        if (t->magic == SHMOBJ__TREE_MAGIC && t->version == SHMOBJ__TREE_VERSION &&
            !(atomic_load_explicit(&((struct shmobj__tree *)t)->flags,
                                   memory_order_acquire) & SHMOBJ__TREE_SEPARATE)) {
            int rc = sp->ops->free(sp, ref);
            if (rc != SHMOBJ_ESTALE && rc != SHMOBJ_ECORRUPT)
                return rc;
            /* Let the full path decide which error to report. */
        }
    }
    uint64_t budget = work_budget(sp);
    return free_tree(sp, ref, 1, 0, &budget);
}

int shmobj_view_set(shmobj_view *view, const shmobj_value *val)
{
    if (view == NULL || val == NULL || view->slot == NULL || view->seg == NULL)
        return SHMOBJ_EINVAL;
    if (view->flags & SHMOBJ__VIEW_RO)
        return SHMOBJ_EACCES;
    struct shmobj__space *sp = (struct shmobj__space *)view->seg;
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
    default:
        return SHMOBJ_ECORRUPT;
    }
    switch (val->type) {
    case SHMOBJ_TYPE_BOOL:
    case SHMOBJ_TYPE_INT:
    case SHMOBJ_TYPE_UINT:
    case SHMOBJ_TYPE_DOUBLE:
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
    uint64_t oo = shmobj__ref_off(old), budget = work_budget(sp);
    if (old != 0 && !(oo >= view->slot_blk && oo - view->slot_blk < view->slot_blen)) {
        rc = free_tree(sp, old, 0, 0, &budget);
    } else if (old != 0) {
        /* The old value's bytes stay in its parent's block, but items
         * replaced inside it since have blocks of their own: free those. */
        shmobj_view ov = {0};
        rc = shmobj__view_follow(sp, old, view->slot_blk, view->slot_blen,
                                 view->slot_gen, &ov);
        if (rc == 0)
            rc = free_children(sp, &ov, 0, &budget);
    }
    uint8_t ro = view->flags & SHMOBJ__VIEW_RO;
    int rc2 = shmobj__view_slot(sp, (uint64_t)((uint8_t *)s - sp->base),
                                view->slot_blk, view->slot_blen, view->slot_gen,
                                ro, view);
    return rc != 0 ? rc : rc2;
}
