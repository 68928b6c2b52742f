/* What the table's files share (table.c: the calls; table-check.c: check,
 * free and the JSON printer's cells): the checked reading of a table's
 * control block, of a field's place in a row, and of a row's place in its
 * chunk. The bytes are in format.h ("tables") and doc/format-object.md.
 *
 * Invariants kept here:
 * - What a call uses of the control block (row size, rows of chunk 0) is
 *   read once into a struct tab and checked there; the field descriptors
 *   are read from the shape (checked whole when the view was made) and
 *   each field's bytes checked to lie inside the row, with the 8-byte
 *   kinds aligned (so an atomic never straddles a word), on every use.
 * - A row's address is computed from those copies and the chunk's
 *   reference, and the bytes handed out (a row, a run of rows) are
 *   checked to lie in the mapped segment, in a chunk of the reference's
 *   generation: a damaged directory or length gives SHMOBJ_ECORRUPT,
 *   never an access outside the segment. */
#ifndef SHMOBJ_OBJECT_TABLE_LAYOUT_H
#define SHMOBJ_OBJECT_TABLE_LAYOUT_H

#include "slot-read.h"

/* A table view's control block and what was read of it, checked. */
struct shmobj__tab {
    struct shmobj__space *sp;
    struct shmobj__table *t;
    uint64_t row_size; /* 1..SHMOBJ__TABLE_ROW_MAX */
    uint64_t chunk0;   /* 1..SHMOBJ__TABLE_CHUNK0_MAX */
};

/* A field's place in a row. */
struct shmobj__tcol {
    unsigned kind;  /* the shape's kind */
    uint64_t off;   /* its first byte in the row */
    uint64_t width; /* its bytes: 1 (BOOL), 8, or the capacity (STR, BYTES) */
};

/* The place in a row of size row_size of the field descriptor d: 0, or -1
 * for a kind a table cannot hold or a place that does not fit. */
static inline int shmobj__tab_field_place(const struct shmobj__field *d, uint64_t row_size,
                                          struct shmobj__tcol *c)
{
    c->kind = d->kind;
    c->off = d->c_off;
    switch (d->kind) {
    case SHMOBJ_TYPE_BOOL:
        c->width = 1;
        break;
    case SHMOBJ_TYPE_INT:
    case SHMOBJ_TYPE_UINT:
    case SHMOBJ_TYPE_DOUBLE:
    case SHMOBJ_TYPE_LINK:
        /* aligned in every row: chunks are 64-aligned */
        if (!shmobj__aligned(d->c_off, 8) || !shmobj__aligned(row_size, 8))
            return -1;
        c->width = 8;
        break;
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES:
        if (d->cap == 0)
            return -1;
        c->width = d->cap;
        break;
    default:
        return -1;
    }
    return shmobj__range_ok(c->off, c->width, row_size) ? 0 : -1;
}

/* The descriptor of field i (< count) of the shape of table view v. */
static inline void shmobj__tab_desc(const struct shmobj__space *sp, const shmobj_view *v,
                                    uint64_t i, struct shmobj__field *d)
{
    const uint8_t *so = sp->base + shmobj__ref_off(v->len) + SHMOBJ__PREFIX;
    memcpy(d, so + shmobj__shape_descs() + 16 * i, sizeof *d);
}

/* Open the table view v of the space sp (the walks' views name no
 * segment): SHMOBJ_EINVAL (NULL), SHMOBJ_ETYPE, SHMOBJ_ESTALE, or
 * SHMOBJ_ECORRUPT for a control block that is not a table's. */
static inline int shmobj__tab_open_in(struct shmobj__space *sp, const shmobj_view *v,
                                      struct shmobj__tab *o)
{
    if (v == NULL)
        return SHMOBJ_EINVAL;
    if (v->type != SHMOBJ_TYPE_TABLE)
        return SHMOBJ_ETYPE;
    if (!shmobj__blk_live(sp, v->obj_blk, v->obj_gen))
        return SHMOBJ_ESTALE;
    /* a table is its block's value and nothing else's: its free frees its
     * chunks, which an inline copy would share (the view's make checked
     * that the control block fits in the block) */
    if (shmobj__off_of(sp, v->obj) != v->obj_blk + SHMOBJ__PREFIX)
        return SHMOBJ_ECORRUPT;
    struct shmobj__table *t = (void *)((uint8_t *)v->obj + 16);
    uint32_t version = t->version, rs = t->row_size;
    uint64_t c0 = t->chunk0;
    if (version != SHMOBJ__TABLE_VERSION || rs == 0 || rs > SHMOBJ__TABLE_ROW_MAX || c0 == 0 ||
        c0 > SHMOBJ__TABLE_CHUNK0_MAX)
        return SHMOBJ_ECORRUPT;
    *o = (struct shmobj__tab){sp, t, rs, c0};
    return 0;
}

/* The same for a view a caller gave. */
static inline int shmobj__tab_open(const shmobj_view *v, struct shmobj__tab *o)
{
    return v == NULL ? SHMOBJ_EINVAL : shmobj__tab_open_in(shmobj__space_of(v), v, o);
}

/* The place of field `field` of table view v: SHMOBJ_ERANGE past the
 * shape's fields, SHMOBJ_ECORRUPT for a descriptor no table holds. */
static inline int shmobj__tab_col(const shmobj_view *v, const struct shmobj__tab *o,
                                  size_t field, struct shmobj__tcol *c)
{
    struct shmobj__field d;
    if (field >= v->count)
        return SHMOBJ_ERANGE;
    shmobj__tab_desc(o->sp, v, field, &d);
    return shmobj__tab_field_place(&d, o->row_size, c) == 0 ? 0 : SHMOBJ_ECORRUPT;
}

/* The chunk holding row i, and the first row it holds. Chunk k holds
 * chunk0 << k rows from chunk0 * (2^k - 1) on, so k = log2(i / chunk0 +
 * 1), and the first row is at most i (no overflow). */
static inline unsigned shmobj__tab_chunk_of(uint64_t i, uint64_t chunk0, uint64_t *start)
{
    if (i < chunk0) {
        /* chunk 0, a table's only chunk when it was made large enough:
         * no division on the common path */
        *start = 0;
        return 0;
    }
    unsigned k = 63u - (unsigned)__builtin_clzll(i / chunk0 + 1);
    *start = chunk0 * ((UINT64_C(1) << k) - 1);
    return k;
}

/* Rows of chunk k (< SHMOBJ__TABLE_CHUNKS) into *rows: false when the
 * count or its bytes overflow. */
static inline bool shmobj__tab_chunk_rows(const struct shmobj__tab *o, unsigned k,
                                          uint64_t *rows, uint64_t *bytes)
{
    if (k >= SHMOBJ__TABLE_CHUNKS || o->chunk0 > (UINT64_MAX >> k))
        return false;
    *rows = o->chunk0 << k;
    return shmobj__mul_ok(*rows, o->row_size, bytes);
}

/* This process's address of row i, which lies below `limit` (the length
 * a reader loaded, or what a writer is about to publish); *run receives
 * the rows from i on in the same chunk below limit (when run is not NULL),
 * all of which are checked to lie in the segment. */
static inline int shmobj__tab_row(const struct shmobj__tab *o, uint64_t i, uint64_t limit,
                                  uint8_t **p, uint64_t *run)
{
    uint64_t start, rows, bytes, span = 1;
    unsigned k = shmobj__tab_chunk_of(i, o->chunk0, &start);
    if (!shmobj__tab_chunk_rows(o, k, &rows, &bytes))
        return SHMOBJ_ECORRUPT;
    uint64_t ref = atomic_load_explicit(&o->t->dir[k], memory_order_acquire);
    uint64_t within = i - start, coff = shmobj__ref_off(ref);
    if (run != NULL) {
        /* i < limit and within < rows */
        span = rows - within < limit - i ? rows - within : limit - i;
        *run = span;
    }
    void *q;
    /* (within + span) * row_size <= bytes: no overflow */
    if (coff < 64 || !shmobj__aligned(coff, 64) ||
        shmobj__space_at(o->sp, coff, (within + span) * o->row_size, &q) != 0)
        return SHMOBJ_ECORRUPT;
    /* chunks live as long as their table: another generation is damage */
    if (!shmobj__blk_live(o->sp, coff, shmobj__ref_gen(ref)))
        return SHMOBJ_ECORRUPT;
    *p = (uint8_t *)q + within * o->row_size;
    return 0;
}

#endif /* SHMOBJ_OBJECT_TABLE_LAYOUT_H */
