/* Tables, what the generic walks call (graph-check.c, graph-free.c,
 * json-print.c, through layer-interface.h): the check of a whole table,
 * its free, and the cells the JSON printer prints.
 *
 * Invariants kept here:
 * - The check proves what the calls of table.c only bound: the shape's
 *   block with the arena and its layout for rows of this size (fields of a
 *   kind a table holds, inside the row, 8-byte kinds aligned, no two
 *   overlapping), every chunk a live arena block of the reference's
 *   generation large enough for its rows, chunks made in order and none
 *   named twice, a length within them, and in every published row a bool
 *   of 0 or 1 and strings of UTF-8. Its work is bounded by the budget:
 *   one unit per 16 bytes of rows, and one per run of rows.
 * - The free takes each chunk out of the directory (an exchange with 0)
 *   before it frees it, so a free repeated after a process died in one
 *   frees no chunk twice; the shape's use goes back last. */
#include <string.h>

#include "content-check.h"
#include "table-layout.h"

int shmobj__table_cell(const shmobj_view *t, uint64_t row, size_t field,
                       struct shmobj__cell *out)
{
    struct shmobj__tab o;
    struct shmobj__tcol c;
    uint8_t *p;
    int rc = shmobj__tab_open(t, &o);
    if (rc == 0)
        rc = shmobj__tab_col(t, &o, field, &c);
    uint64_t len = rc == 0 ? atomic_load_explicit(&o.t->len, memory_order_acquire) : 0;
    if (rc == 0 && row >= len)
        rc = SHMOBJ_ERANGE;
    if (rc == 0)
        rc = shmobj__tab_row(&o, row, len, &p, NULL);
    if (rc != 0)
        return rc;
    p += c.off;
    *out = (struct shmobj__cell){.kind = c.kind, .p = p, .n = c.width};
    if (c.kind == SHMOBJ_TYPE_BOOL)
        out->bits = *p;
    else if (c.width == 8 && c.kind != SHMOBJ_TYPE_STR && c.kind != SHMOBJ_TYPE_BYTES)
        out->bits = atomic_load_explicit((_Atomic uint64_t *)(void *)p, memory_order_acquire);
    else if (c.kind == SHMOBJ_TYPE_STR)
        out->n = (uint64_t)strnlen((const char *)p, (size_t)c.width);
    return 0;
}

/* Is ref, read from the directory of table view t, the table's own block
 * or its shape's? Never a chunk: a free of it would free what the table
 * is made of. */
static bool not_a_chunk(const shmobj_view *t, uint64_t ref)
{
    uint64_t off = shmobj__ref_off(ref);
    return off == t->obj_blk || off == shmobj__ref_off(t->len);
}

int shmobj__table_free(struct shmobj__space *sp, const shmobj_view *t)
{
    struct shmobj__tab o;
    int rc = shmobj__tab_open_in(sp, t, &o), first = rc;
    if (rc != 0)
        return rc;
    for (unsigned k = 0; k < SHMOBJ__TABLE_CHUNKS; k++) {
        uint64_t ref = atomic_exchange_explicit(&o.t->dir[k], 0, memory_order_acq_rel);
        if (ref == 0)
            continue;
        if (not_a_chunk(t, ref)) {
            first = first != 0 ? first : SHMOBJ_ECORRUPT;
            continue;
        }
        rc = sp->ops->free(sp, ref);
        if (rc != 0 && first == 0)
            first = rc;
    }
    shmobj__shape_unuse_view(sp, t);
    return first;
}

/* Every chunk: live blocks of the arena large enough, made in order, none
 * named twice, none the table's own block or its shape's; the rows they
 * hold into *cap. */
static int check_chunks(const shmobj_view *t, const struct shmobj__tab *o, uint64_t *cap)
{
    uint64_t seen[SHMOBJ__TABLE_CHUNKS];
    unsigned n = 0;
    *cap = 0;
    for (unsigned k = 0; k < SHMOBJ__TABLE_CHUNKS; k++) {
        uint64_t ref = atomic_load_explicit(&o->t->dir[k], memory_order_acquire), rows, bytes,
                 usable = 0;
        if (ref == 0)
            continue;
        if (n != k || not_a_chunk(t, ref) || !shmobj__tab_chunk_rows(o, k, &rows, &bytes) ||
            o->sp->ops->check(o->sp, ref, &usable) != 0 || usable < bytes ||
            !shmobj__aligned(shmobj__ref_off(ref), 64))
            return SHMOBJ_ECORRUPT;
        for (unsigned j = 0; j < n; j++)
            if (shmobj__ref_off(seen[j]) == shmobj__ref_off(ref))
                return SHMOBJ_ECORRUPT;
        seen[n++] = ref;
        *cap += rows; /* each chunk's bytes fit the segment: no overflow */
    }
    return n == 0 ? SHMOBJ_ECORRUPT : 0;
}

/* The layout the shape gives rows of o's size, proven: kinds, places, no
 * overlap (the bits of the row's bytes). */
static int check_layout(const shmobj_view *t, const struct shmobj__tab *o)
{
    uint64_t used[SHMOBJ__TABLE_ROW_MAX / 64];
    memset(used, 0, (size_t)((o->row_size + 63) / 64) * sizeof used[0]);
    for (uint64_t f = 0; f < t->count; f++) {
        struct shmobj__field d;
        struct shmobj__tcol c;
        shmobj__tab_desc(o->sp, t, f, &d);
        if (!shmobj__field_ok(d.kind, d.cap) || d.reserved0 != 0 || d.reserved1 != 0 ||
            shmobj__tab_field_place(&d, o->row_size, &c) != 0)
            return SHMOBJ_ECORRUPT;
        for (uint64_t b = c.off; b < c.off + c.width; b++) {
            if (used[b / 64] >> (b % 64) & 1)
                return SHMOBJ_ECORRUPT;
            used[b / 64] |= UINT64_C(1) << (b % 64);
        }
    }
    return 0;
}

int shmobj__table_check(struct shmobj__space *sp, const shmobj_view *t, uint64_t *budget)
{
    struct shmobj__tab o;
    struct shmobj__shape_info si;
    uint64_t cap, len;
    int rc = shmobj__tab_open_in(sp, t, &o);
    if (rc == 0) /* the shape's block in full (views check it lighter) */
        rc = shmobj__shape_open(sp, t->len, 0, &si);
    if (rc == 0 && si.count != t->count)
        rc = SHMOBJ_ECORRUPT;
    if (rc == 0)
        rc = check_layout(t, &o);
    if (rc == 0)
        rc = check_chunks(t, &o, &cap);
    if (rc != 0)
        return rc;
    len = atomic_load_explicit(&o.t->len, memory_order_acquire);
    if (len > cap)
        return SHMOBJ_ECORRUPT;
    for (uint64_t i = 0; i < len;) {
        uint8_t *p;
        uint64_t run;
        rc = shmobj__tab_row(&o, i, len, &p, &run);
        if (rc != 0)
            return rc;
        /* a run costs its bytes / 16 units and one more: a well-formed
         * table fits (its rows lie in its chunks, whose bytes the arena
         * proved) */
        if (shmobj__work_take(sp, budget, 1 + run * o.row_size / 16) != 0)
            return SHMOBJ_ECORRUPT;
        for (uint64_t f = 0; f < t->count; f++) {
            struct shmobj__tcol c;
            rc = shmobj__tab_col(t, &o, (size_t)f, &c);
            if (rc != 0)
                return rc;
            if (c.kind != SHMOBJ_TYPE_BOOL && c.kind != SHMOBJ_TYPE_STR)
                continue;
            for (uint64_t r = 0; r < run; r++) {
                const uint8_t *x = p + r * o.row_size + c.off;
                if (c.kind == SHMOBJ_TYPE_BOOL ? *x > 1
                                               : !shmobj__utf8_ok(x, (uint64_t)strnlen(
                                                                         (const char *)x,
                                                                         (size_t)c.width)))
                    return SHMOBJ_ECORRUPT;
            }
        }
        i += run;
    }
    return 0;
}
