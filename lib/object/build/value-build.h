/* The build room of the object layer (lib/object/build/): a put (the
 * calls in value-put.c, the walk at the top of value-write.c) measures
 * the value the caller describes (value-measure.c), allocates one block
 * of that size, writes the value into it (value-write.c) and takes what
 * its records and adopted objects need (references.c); value-replace.c
 * replaces a value in place. It sees
 * the read core and the encoding (doc/architecture.md, "The object
 * layer's rooms").
 *
 * What the builder's files share: the two passes walk the same
 * description, and every question both must answer alike about it (the
 * layout of a container, a packed tuple, a buffer; where a key lives) is
 * answered once, here.
 *
 * Invariant kept by what this header defines: the writer never moves its
 * cursor past the size the measure found (struct shmobj__wr.lim), and a
 * put fails unless it ends exactly there, so a description that changes
 * between the passes (another thread) gives SHMOBJ_EINVAL, never a write
 * outside the block. */
#ifndef SHMOBJ_OBJECT_VALUE_BUILD_H
#define SHMOBJ_OBJECT_VALUE_BUILD_H

#include "layer-interface.h"
#include "content-check.h"

/* Largest block the builder writes: references carry 48-bit offsets. */
#define SHMOBJ__MAX_BLOCK (UINT64_C(1) << 46)

/* What a put has taken beyond its block while writing it (a use of each
 * record's shape, the ADOPTED mark of each adopted block), to give back if
 * it fails. Past SHMOBJ__CLAIM_LOG entries the log is given back at once
 * and the put takes everything by a walk of the block once written
 * (shmobj__claim): a block of many records pays one walk, a record one
 * atomic add. */
#define SHMOBJ__CLAIM_LOG 16
struct shmobj__claims {
    shmobj__ref ref[SHMOBJ__CLAIM_LOG]; /* the shape or the adopted block */
    uint8_t record[SHMOBJ__CLAIM_LOG];  /* 1: a shape's use; 0: a mark */
    unsigned n;                         /* entries */
    int after;                          /* overflowed: claim by a walk */
};

/* The writing pass over one block. */
struct shmobj__wr {
    uint8_t *blk;     /* this process's address of the block */
    uint64_t blk_off; /* segment offset of the block */
    uint16_t gen;     /* its generation */
    uint64_t cur;     /* next free byte, relative to the block */
    uint64_t lim;     /* bytes the cursor may reach (the block's size) */
    struct shmobj__space *sp;  /* the space records' shapes, adopted and
                                * linked objects are checked in */
    struct shmobj__claims *cl; /* what the put took */
};

/* The bits of shmobj__measure()'s *need64: what the block will hold. */
#define SHMOBJ__M_ALIGN64 0x1 /* a buffer: allocate 64-aligned */
#define SHMOBJ__M_RECORDS 0x2 /* records below the top: shape uses to take */
#define SHMOBJ__M_ADOPTS 0x4  /* adopted objects: marks to take */
#define SHMOBJ__M_ROOTREC 0x8 /* the block's value is a record */

/* Key i of the keyed description v (a dict's key, a set's member, a named
 * struct's field name, which is a str of SHMOBJ_STRLEN bytes) described
 * as shmobj__desc_key() does: the one place the builder's passes and its
 * duplicate test read a key. shmobj__desc_key_of() takes v's kind, items
 * and names read once (a writer's stores to its block could alias them). */
static inline __attribute__((always_inline)) int
shmobj__desc_key_of(unsigned type, const shmobj_value *items, const char *const *names,
                    size_t i, shmobj_key *key)
{
    switch (type) {
    case SHMOBJ_TYPE_SET:
        return shmobj__desc_key(&items[i], key);
    case SHMOBJ_TYPE_DICT:
        return shmobj__desc_key(&items[2 * i], key);
    default:
        key->type = SHMOBJ_TYPE_STR;
        key->i = 0;
        key->ptr = names[i];
        return shmobj__desc_mem(SHMOBJ_TYPE_STR, key->ptr, SHMOBJ_STRLEN, &key->len);
    }
}

static inline __attribute__((always_inline)) int
shmobj__desc_key_at(const shmobj_value *v, size_t i, shmobj_key *key)
{
    return shmobj__desc_key_of(v->type, v->v.c.items, v->v.c.names, i, key);
}

/* Is the described key dk one a writer holds in its slot (an int, a short
 * or a medium string key), so that it takes no bytes after the slots? The
 * measure and the writer ask this one question. */
static inline __attribute__((always_inline)) int shmobj__key_in_slot(const shmobj_key *dk)
{
    return dk->type == SHMOBJ_TYPE_INT ||
           (dk->type == SHMOBJ_TYPE_STR &&
            (dk->len <= SHMOBJ__SSTR_MAX || shmobj__mstr_fits(dk->ptr, dk->len)));
}

/* Is the description v a tuple the builder writes packed
 * (SHMOBJ__OBJ_PACKED): 1 to 2^32 - 2 str items, each well described and
 * without a NUL inside? 1 with *bytes the body's size (each item and its
 * NUL), or 0: written with slots (which also reports a bad item). The
 * measure and the writer ask this one question. */
static inline int shmobj__desc_packed(const shmobj_value *v, uint64_t *bytes)
{
    uint64_t n = v->v.c.count, total = 0;
    if (v->type != SHMOBJ_TYPE_TUPLE || n == 0 || n >= UINT32_MAX || v->v.c.items == NULL)
        return 0;
    for (uint64_t i = 0; i < n; i++) {
        const shmobj_value *it = &v->v.c.items[i];
        uint64_t len;
        if (it->type != SHMOBJ_TYPE_STR || it->reserved != 0 ||
            shmobj__desc_mem(SHMOBJ_TYPE_STR, it->v.s.ptr, it->v.s.len, &len) != 0 ||
            len >= SHMOBJ__MAX_BLOCK)
            return 0;
        /* (a length found by strlen has no NUL inside) */
        if (it->v.s.len != SHMOBJ_STRLEN && len > 0 && memchr(it->v.s.ptr, 0, len) != NULL)
            return 0;
        total += len + 1;
        if (total >= SHMOBJ__MAX_BLOCK)
            return 0;
    }
    *bytes = total;
    return 1;
}

/* Is the tuple description v, at depth (0: the block's value), one the
 * builder writes packed with its header in its slot (version 3,
 * SHMOBJ__SLOT_PTUP_MARK): below the root, packed (*bytes its body), at
 * most SHMOBJ__PTUP_MAX_COUNT items and a body below 2^32 bytes? Else it
 * is written as shmobj__desc_packed() says. The measure asks it here; the
 * writer (emit_ptup() in value-write.c) answers the same question item by
 * item as it copies them, in one pass. */
static inline int shmobj__desc_ptup(const shmobj_value *v, int depth, uint64_t *bytes)
{
    return depth > 0 && depth < SHMOBJ_OBJ_MAXDEPTH && v->v.c.count <= SHMOBJ__PTUP_MAX_COUNT &&
           shmobj__desc_packed(v, bytes) && *bytes < UINT32_MAX;
}

/* The layout of the fixed container description v (list, tuple, struct,
 * dict, set) that both passes use: its count n (< 2^32), whether it has
 * keys and an index of *cap entries, and whether it has values. */
static inline __attribute__((always_inline)) int
shmobj__desc_container(const shmobj_value *v, uint64_t *n, int *keyed, int *values,
                       uint64_t *cap)
{
    *n = v->v.c.count;
    if (*n >= UINT32_MAX || (*n > 0 && v->v.c.items == NULL))
        return SHMOBJ_EINVAL;
    *keyed = v->type == SHMOBJ_TYPE_DICT || v->type == SHMOBJ_TYPE_SET ||
             (v->type == SHMOBJ_TYPE_STRUCT && v->v.c.names != NULL);
    *values = v->type != SHMOBJ_TYPE_SET;
    *cap = *keyed ? shmobj__index_cap(*n) : 0;
    return 0;
}

/* The bytes after the header of the mutable container description v
 * (list, dict, set: created empty, their control block), or
 * SHMOBJ_EINVAL when it describes items. */
static inline int shmobj__desc_mut_bytes(const shmobj_value *v, uint64_t *bytes)
{
    if (v->v.c.count != 0)
        return SHMOBJ_EINVAL;
    *bytes = shmobj__mut_body_bytes(v->type);
    return 0;
}

/* The layout of the buffer description v whose object starts at the
 * 16-aligned block-relative pos: its data starts data_rel bytes after pos,
 * 64-aligned in the block (which a put allocates 64-aligned), after the
 * header, the buffer header, the shape and the strides. */
struct shmobj__buffer_layout {
    unsigned dtype, ndim;
    const uint64_t *shape;                 /* the caller's */
    int64_t strides[SHMOBJ_BUFFER_MAXDIM]; /* the caller's, or C order */
    uint64_t nbytes;                       /* bytes of data */
    uint64_t data_rel;                     /* from pos to the data */
};

/* Lay out the buffer description v at pos (above), checking its dtype,
 * dimensions, shape and strides: SHMOBJ_EINVAL for a bad one. */
static inline int shmobj__desc_buffer(const shmobj_value *v, uint64_t pos,
                                      struct shmobj__buffer_layout *l)
{
    const shmobj_buffer_desc *b = v->v.buf;
    if (b == NULL)
        return SHMOBJ_EINVAL;
    unsigned nd = b->ndim;
    uint64_t isz = shmobj__dtype_size(b->dtype), fixed, start;
    const uint64_t *shape = b->shape;
    if (isz == 0 || nd > SHMOBJ_BUFFER_MAXDIM || (nd > 0 && shape == NULL))
        return SHMOBJ_EINVAL;
    l->dtype = b->dtype;
    l->ndim = nd;
    l->shape = shape;
    if (b->strides == NULL) {
        uint64_t acc = isz;
        for (unsigned d = nd; d-- > 0;) {
            if (acc > INT64_MAX)
                return SHMOBJ_EINVAL;
            l->strides[d] = (int64_t)acc;
            if (!shmobj__mul_ok(acc, shape[d], &acc))
                return SHMOBJ_EINVAL;
        }
        l->nbytes = acc;
        if (b->nbytes != 0 && b->nbytes != acc)
            return SHMOBJ_EINVAL;
    } else {
        if (nd > 0)
            memcpy(l->strides, b->strides, 8u * nd);
        l->nbytes = b->nbytes;
        if (!shmobj__buffer_extent_ok(nd, shape, l->strides, isz, l->nbytes))
            return SHMOBJ_EINVAL;
    }
    fixed = 16 + sizeof(struct shmobj__bufhdr) + 16u * nd;
    if (!shmobj__add_ok(pos, fixed, &start) ||
        !shmobj__align_up(start, SHMOBJ__DATA_ALIGN, &start))
        return SHMOBJ_EINVAL;
    l->data_rel = start - pos;
    return 0;
}

/* value-measure.c: the bytes of the block a description needs, and in
 * *need64 the SHMOBJ__M_* bits of what it holds. */
int shmobj__measure(const shmobj_value *val, uint64_t *size, int *need64);

/* Allocate an object block of size bytes (align: 16, or 64 for buffers)
 * and write its tree header with flags; *r and *p receive its reference
 * and this process's address of it (a put's and a shape's). */
static inline __attribute__((always_inline)) int
shmobj__tree_new(struct shmobj__space *sp, uint64_t size, uint64_t align, uint16_t flags,
                 shmobj__ref *r, void **p)
{
    int rc = sp->ops->alloc(sp, size, align, r);
    if (rc != 0)
        return rc;
    rc = shmobj__space_at(sp, shmobj__ref_off(*r), size, p);
    if (rc != 0) {
        (void)sp->ops->free(sp, *r);
        return rc;
    }
    struct shmobj__tree *t = *p;
    t->magic = SHMOBJ__TREE_MAGIC;
    t->version = SHMOBJ__TREE_VERSION;
    /* nobody sees the block yet */
    atomic_store_explicit(&t->flags, flags, memory_order_relaxed);
    t->size = size;
    return 0;
}

/* references.c: check the reference an ADOPT (adopt 1) or LINK description
 * gives: a live object block of the space; an adopted one must hold an
 * object (not a scalar, null or a shape) and be owned by nobody yet. */
int shmobj__ref_check(struct shmobj__space *sp, shmobj__ref ref, int adopt);

/* references.c: take a use of a shape (record 1; `uses` its count) or the
 * ADOPTED mark of the block `ref` names, and log it in w->cl; past the
 * log's size, nothing (shmobj__claim will). */
int shmobj__claim_now(struct shmobj__wr *w, int record, shmobj__ref ref,
                      _Atomic uint64_t *uses);

/* references.c: give back what the log holds (a put that failed). */
void shmobj__claims_undo(struct shmobj__space *sp, struct shmobj__claims *cl);

/* references.c: after a block was written, take what its records and adopted
 * objects need (a use of each record's shape, the ADOPTED mark of each
 * adopted block); on failure give back what was taken and return the
 * error. */
int shmobj__claim(struct shmobj__space *sp, uint64_t blk, uint64_t blen, uint16_t gen);

#endif /* SHMOBJ_OBJECT_VALUE_BUILD_H */
