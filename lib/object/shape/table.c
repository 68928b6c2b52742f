/* Tables: records of one shape stored row after row, as the C struct the
 * shape was made from lays them out (shmobj/table.h), in chunks that never
 * move. This file holds the calls; the check, the free and the JSON
 * printer's cells are in table-check.c, what both read in table-layout.h.
 *
 * Invariants kept here:
 * - A table is built whole (control block, first chunk, a use of its
 *   shape) before its reference leaves shmobj_table_put(); its row size,
 *   chunk geometry and shape never change afterwards.
 * - Only the holder of the table's lock writes rows past the length, makes
 *   chunks and stores the length: rows first, then the length with a
 *   release store, so a reader that loads the length (acquire) sees every
 *   row below it whole. The length never goes down and a row never moves;
 *   after its publication a row changes only through the atomic updates
 *   of its 8-byte fields, which take no lock.
 * - A holder killed anywhere leaves nothing to repair: rows it wrote past
 *   the length are not published (the next append writes over them), and
 *   a chunk it published before the length reached it is simply the next
 *   chunk. At most the chunk it allocated and had not yet published
 *   leaks. The protocol, its steps and memory orders: doc/protocols.md,
 *   section 9.
 * - An append reads exactly n x row_size bytes of the caller's, a copy
 *   writes exactly row_size, whatever the segment says. */
#include <string.h>

#include "value-build.h"
#include "key-lookup.h"
#include "content-check.h"
#include "extstruct.h"
#include "step.h"
#include "table-layout.h"
#include "shmobj/table.h"

_Static_assert(sizeof(shmobj_table_info) == 40, "shmobj_table_info is 40 bytes");

/* Check the layout the shape at si gives rows of row_size bytes: every
 * field a kind a table holds, inside the row, 8-byte kinds aligned, no two
 * overlapping (a bitmap of the row's bytes). */
static int layout_ok(struct shmobj__space *sp, const struct shmobj__shape_info *si,
                     uint64_t row_size)
{
    uint64_t used[SHMOBJ__TABLE_ROW_MAX / 64];
    memset(used, 0, (size_t)((row_size + 63) / 64) * sizeof used[0]);
    const uint8_t *descs = sp->base + si->blk + SHMOBJ__PREFIX + shmobj__shape_descs();
    for (uint64_t i = 0; i < si->count; i++) {
        struct shmobj__field d;
        struct shmobj__tcol c;
        memcpy(&d, descs + 16 * i, sizeof d);
        if (shmobj__tab_field_place(&d, row_size, &c) != 0)
            return 0;
        for (uint64_t b = c.off; b < c.off + c.width; b++) {
            if (used[b / 64] >> (b % 64) & 1)
                return 0;
            used[b / 64] |= UINT64_C(1) << (b % 64);
        }
    }
    return 1;
}

int shmobj_table_put(shmobj_segment *seg, shmobj_ref shape, size_t row_size,
                     uint64_t capacity, shmobj_ref *table)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    struct shmobj__shape_info si;
    uint64_t bytes;
    if (sp == NULL || table == NULL || shape == SHMOBJ_REF_NULL || row_size == 0 ||
        row_size > SHMOBJ__TABLE_ROW_MAX || capacity == 0 ||
        capacity > SHMOBJ__TABLE_CHUNK0_MAX)
        return SHMOBJ_EINVAL;
    /* before the shape's use is taken: a store a read-only mapping faults */
    int rc = shmobj__space_writable(sp);
    if (rc == 0)
        rc = shmobj__shape_open(sp, shape, 1, &si);
    if (rc != 0)
        return rc;
    if (!layout_ok(sp, &si, row_size))
        return SHMOBJ_EINVAL;
    /* capacity and row_size are below 2^33 and 2^17 */
    bytes = capacity * row_size;
    if (bytes > SHMOBJ__MAX_BLOCK)
        return SHMOBJ_ENOMEM;
    rc = shmobj__shape_use(sp, shape);
    if (rc != 0)
        return rc;
    shmobj__ref chunk, r;
    void *p;
    rc = sp->ops->alloc(sp, bytes, 64, &chunk);
    if (rc == 0) {
        /* a free walks the block (RECORDS) to free the chunks and give the
         * shape's use back */
        rc = shmobj__tree_new(sp, SHMOBJ__PREFIX + 16 + sizeof(struct shmobj__table), 16,
                              SHMOBJ__TREE_RECORDS, &r, &p);
        if (rc != 0)
            (void)sp->ops->free(sp, chunk);
    }
    if (rc != 0) {
        shmobj__shape_unuse(sp, shape);
        return rc;
    }
    uint8_t *b = p;
    uint64_t blk = shmobj__ref_off(r);
    struct shmobj__slot *root = (void *)(b + sizeof(struct shmobj__tree));
    memset(root, 0, sizeof *root);
    root->tag = SHMOBJ__SLOT_OBJ;
    atomic_store_explicit(&root->payload, shmobj__ref_make(blk + SHMOBJ__PREFIX, shmobj__ref_gen(r)),
                          memory_order_relaxed);
    struct shmobj__obj h = {.tag = SHMOBJ_TYPE_TABLE, .count = si.count, .len = shape};
    memcpy(b + SHMOBJ__PREFIX, &h, sizeof h);
    struct shmobj__table *t = (void *)(b + SHMOBJ__PREFIX + 16);
    memset(t, 0, sizeof *t);
    t->version = SHMOBJ__TABLE_VERSION;
    t->row_size = (uint32_t)row_size;
    t->chunk0 = capacity;
    atomic_store_explicit(&t->dir[0], chunk, memory_order_relaxed);
    /* nobody sees the block before the caller publishes r */
    *table = r;
    return 0;
}

/* The content of rows a table refuses: a BOOL byte other than 0 or 1, a
 * STR field that is not UTF-8 up to its first NUL. Checked on the copy in
 * the segment, before it is published, so a caller's thread that changes
 * its rows during the call cannot slip bad bytes past the check. */
static int rows_ok(const shmobj_view *v, const struct shmobj__tab *o, const uint8_t *rows,
                   uint64_t n)
{
    for (uint64_t f = 0; f < v->count; f++) {
        struct shmobj__tcol c;
        int rc = shmobj__tab_col(v, o, (size_t)f, &c);
        if (rc != 0)
            return rc;
        if (c.kind != SHMOBJ_TYPE_BOOL && c.kind != SHMOBJ_TYPE_STR)
            continue;
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *x = rows + i * o->row_size + c.off;
            if (c.kind == SHMOBJ_TYPE_BOOL ? *x > 1
                                           : !shmobj__utf8_ok(x, (uint64_t)strnlen(
                                                                     (const char *)x,
                                                                     (size_t)c.width)))
                return SHMOBJ_EINVAL;
        }
    }
    return 0;
}

static void tab_unlock(const struct shmobj__tab *o)
{
    const struct shmobj__space_live_ops *live = o->sp->ops->live;
    if (live == NULL)
        atomic_store_explicit((_Atomic uint32_t *)(void *)o->t->lock, 0, memory_order_release);
    else
        live->unlock(o->sp, (struct shmobj__os_lock *)(void *)o->t->lock);
}

/* Take the table's lock. A dead holder's lock is taken over with nothing
 * to repair (see the opening paragraph). */
static int tab_lock(const shmobj_view *v, const struct shmobj__tab *o)
{
    const struct shmobj__space_live_ops *live = o->sp->ops->live;
    int rc;
    if (live == NULL) {
        /* a space without other processes (the layer's tests): one try */
        uint32_t z = 0;
        rc = atomic_compare_exchange_strong_explicit((_Atomic uint32_t *)(void *)o->t->lock,
                                                     &z, 1, memory_order_acquire,
                                                     memory_order_relaxed)
                 ? 0
                 : SHMOBJ_EBUSY;
    } else {
        rc = live->lock(o->sp, (struct shmobj__os_lock *)(void *)o->t->lock, 0);
    }
    if (rc == SHMOBJ_EOWNERDEAD)
        rc = 0;
    if (rc != 0)
        return rc;
    /* freed while we waited: the bytes are someone else's now */
    if (!shmobj__obj_live(v)) {
        tab_unlock(o);
        return SHMOBJ_ESTALE;
    }
    return 0;
}

/* Under the lock: make every chunk rows [len, end) need that is not made
 * yet, in order (a chunk is made by the append whose rows open it, so a
 * missing chunk before one that exists is damage). */
static int tab_grow(const struct shmobj__tab *o, uint64_t len, uint64_t end)
{
    uint64_t start, last_start;
    unsigned k = shmobj__tab_chunk_of(len, o->chunk0, &start);
    unsigned last = shmobj__tab_chunk_of(end - 1, o->chunk0, &last_start);
    for (; k <= last; k++) {
        uint64_t rows, bytes;
        if (k >= SHMOBJ__TABLE_CHUNKS)
            return SHMOBJ_ENOMEM;
        if (atomic_load_explicit(&o->t->dir[k], memory_order_relaxed) != 0)
            continue;
        if (k > 0 && atomic_load_explicit(&o->t->dir[k - 1], memory_order_relaxed) == 0)
            return SHMOBJ_ECORRUPT;
        if (!shmobj__tab_chunk_rows(o, k, &rows, &bytes) || bytes > SHMOBJ__MAX_BLOCK)
            return SHMOBJ_ENOMEM;
        shmobj__ref chunk;
        int rc = o->sp->ops->alloc(o->sp, bytes, 64, &chunk);
        if (rc != 0)
            return rc;
        /* killed here: the chunk leaks, the table is as it was */
        SHMOBJ__STEP("table.append.chunk");
        /* release: a reader that finds it finds its block's header too */
        atomic_store_explicit(&o->t->dir[k], chunk, memory_order_release);
    }
    return 0;
}

int shmobj_table_append(const shmobj_view *table, const void *rows, size_t n,
                        size_t row_size, uint64_t *first)
{
    struct shmobj__tab o;
    if (table == NULL || rows == NULL || n == 0)
        return SHMOBJ_EINVAL;
    int rc = shmobj__tab_open(table, &o);
    if (rc == 0)
        rc = shmobj__view_writable(table);
    if (rc != 0)
        return rc;
    if (row_size != o.row_size)
        return SHMOBJ_EINVAL;
    rc = tab_lock(table, &o);
    if (rc != 0)
        return rc;
    SHMOBJ__STEP("table.append.locked");
    uint64_t len = atomic_load_explicit(&o.t->len, memory_order_relaxed), end, i;
    const uint8_t *src = rows;
    if (!shmobj__add_ok(len, n, &end))
        rc = SHMOBJ_ENOMEM;
    if (rc == 0)
        rc = tab_grow(&o, len, end);
    for (i = len; rc == 0 && i < end;) {
        uint8_t *dst;
        uint64_t run;
        rc = shmobj__tab_row(&o, i, end, &dst, &run);
        if (rc == 0) {
            /* past the length: nobody reads these bytes yet */
            memcpy(dst, src, (size_t)(run * o.row_size));
            rc = rows_ok(table, &o, dst, run);
            src += run * o.row_size;
            i += run;
        }
    }
    if (rc == 0) {
        SHMOBJ__STEP("table.append.written");
        /* release: the rows before the length that exposes them */
        atomic_store_explicit(&o.t->len, end, memory_order_release);
        SHMOBJ__STEP("table.append.published");
    }
    tab_unlock(&o);
    if (rc == 0 && first != NULL)
        *first = len;
    return rc;
}

int shmobj_table_len(const shmobj_view *table, uint64_t *rows)
{
    struct shmobj__tab o;
    if (rows == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__tab_open(table, &o);
    if (rc != 0)
        return rc;
    *rows = atomic_load_explicit(&o.t->len, memory_order_acquire);
    return 0;
}

/* Row i of an opened table, below the length loaded now (acquire: the
 * row is whole). */
static int row_in(const struct shmobj__tab *o, uint64_t i, uint8_t **p, uint64_t *run)
{
    uint64_t len = atomic_load_explicit(&o->t->len, memory_order_acquire);
    if (i >= len)
        return SHMOBJ_ERANGE;
    return shmobj__tab_row(o, i, len, p, run);
}

/* The same for a table view, opened first. */
static int row_of(const shmobj_view *table, uint64_t i, struct shmobj__tab *o, uint8_t **p,
                  uint64_t *run)
{
    int rc = shmobj__tab_open(table, o);
    return rc != 0 ? rc : row_in(o, i, p, run);
}

int shmobj_table_get(const shmobj_view *table, uint64_t row, void *out, size_t row_size)
{
    struct shmobj__tab o;
    uint8_t *p;
    if (table == NULL || out == NULL)
        return SHMOBJ_EINVAL;
    int rc = row_of(table, row, &o, &p, NULL);
    if (rc == 0 && row_size != o.row_size)
        rc = SHMOBJ_EINVAL;
    if (rc != 0)
        return rc;
    if (o.row_size % 8 == 0) {
        /* word by word, each an atomic load: an 8-byte field (aligned in
         * every row) updated meanwhile is never torn */
        for (uint64_t w = 0; w < o.row_size / 8; w++) {
            uint64_t x = atomic_load_explicit((_Atomic uint64_t *)(void *)(p + 8 * w),
                                              memory_order_relaxed);
            memcpy((uint8_t *)out + 8 * w, &x, sizeof x); /* out: any alignment */
        }
    } else {
        /* no 8-byte field in such a row: nothing is updated in place */
        memcpy(out, p, (size_t)o.row_size);
    }
    return 0;
}

int shmobj_table_row_get(const shmobj_view *table, uint64_t row, const void **p,
                         uint64_t *run)
{
    struct shmobj__tab o;
    uint8_t *q;
    uint64_t r;
    if (table == NULL || p == NULL)
        return SHMOBJ_EINVAL;
    int rc = row_of(table, row, &o, &q, &r);
    if (rc != 0)
        return rc;
    *p = q;
    if (run != NULL)
        *run = r;
    return 0;
}

int shmobj_table_index(const shmobj_view *table, const char *name, size_t *field)
{
    struct shmobj__tab o;
    if (name == NULL || field == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__tab_open(table, &o);
    if (rc != 0)
        return rc;
    shmobj_key k = {.type = SHMOBJ_TYPE_STR, .ptr = name, .len = strlen(name)};
    shmobj__key_prepare(&k);
    /* a table's view carries its shape's copies as a record's does */
    return shmobj__record_find(table, &k, field);
}

int shmobj_table_column_get(const shmobj_view *table, size_t field, uint64_t first,
                            shmobj_buffer_info *info)
{
    struct shmobj__tab o;
    struct shmobj__tcol c;
    uint8_t *p;
    uint64_t run;
    if (table == NULL || info == NULL || !shmobj__ext_out_ok(info, sizeof *info))
        return SHMOBJ_EINVAL;
    int rc = shmobj__tab_open(table, &o);
    if (rc == 0)
        rc = shmobj__tab_col(table, &o, field, &c);
    if (rc == 0)
        rc = row_in(&o, first, &p, &run);
    if (rc != 0)
        return rc;
    shmobj_buffer_info ours = {0};
    ours.data = p + c.off;
    ours.shape[0] = run;
    ours.strides[0] = (int64_t)o.row_size;
    ours.ndim = 1;
    switch (c.kind) {
    case SHMOBJ_TYPE_BOOL: ours.dtype = SHMOBJ_DTYPE_BOOL; break;
    case SHMOBJ_TYPE_INT: ours.dtype = SHMOBJ_DTYPE_I64; break;
    case SHMOBJ_TYPE_DOUBLE: ours.dtype = SHMOBJ_DTYPE_F64; break;
    case SHMOBJ_TYPE_UINT:
    case SHMOBJ_TYPE_LINK: ours.dtype = SHMOBJ_DTYPE_U64; break;
    default: /* STR, BYTES: rows of capacity bytes */
        ours.dtype = SHMOBJ_DTYPE_U8;
        ours.ndim = 2;
        ours.shape[1] = c.width;
        ours.strides[1] = 1;
    }
    ours.itemsize = (uint32_t)shmobj__dtype_size(ours.dtype);
    /* the run lies in its chunk (shmobj__tab_row checked its bytes) */
    ours.nbytes = (run - 1) * o.row_size + c.width;
    shmobj__ext_out(info, &ours, sizeof ours);
    return 0;
}

int shmobj_table_info_get(const shmobj_view *table, shmobj_table_info *info)
{
    struct shmobj__tab o;
    if (info == NULL || !shmobj__ext_out_ok(info, sizeof *info))
        return SHMOBJ_EINVAL;
    int rc = shmobj__tab_open(table, &o);
    if (rc != 0)
        return rc;
    shmobj_table_info ours = {.row_size = (uint32_t)o.row_size, .fields = table->count,
                              .shape = table->len};
    ours.rows = atomic_load_explicit(&o.t->len, memory_order_acquire);
    for (unsigned k = 0; k < SHMOBJ__TABLE_CHUNKS; k++) {
        uint64_t rows, bytes;
        if (atomic_load_explicit(&o.t->dir[k], memory_order_acquire) == 0)
            break;
        if (!shmobj__tab_chunk_rows(&o, k, &rows, &bytes) ||
            !shmobj__add_ok(ours.capacity, rows, &ours.capacity))
            return SHMOBJ_ECORRUPT;
        ours.chunks = k + 1;
    }
    if (ours.rows > ours.capacity)
        return SHMOBJ_ECORRUPT;
    shmobj__ext_out(info, &ours, sizeof ours);
    return 0;
}

/* The address of field `field` of row `row` of kind `kind` (INT also
 * takes UINT): the atomic calls' common opening; `write`: the call stores
 * there (SHMOBJ_ERDONLY on a read-only handle, whose mapping a store
 * would fault). */
static int cell_at(const shmobj_view *table, uint64_t row, size_t field, unsigned kind,
                   int write, _Atomic uint64_t **w)
{
    struct shmobj__tab o;
    struct shmobj__tcol c;
    uint8_t *p;
    int rc = shmobj__tab_open(table, &o);
    if (rc == 0 && write)
        rc = shmobj__view_writable(table);
    if (rc == 0)
        rc = shmobj__tab_col(table, &o, field, &c);
    if (rc == 0 && !(c.kind == kind || (kind == SHMOBJ_TYPE_INT && c.kind == SHMOBJ_TYPE_UINT)))
        rc = SHMOBJ_ETYPE;
    if (rc == 0)
        rc = row_in(&o, row, &p, NULL);
    if (rc != 0)
        return rc;
    /* 8-aligned: the chunk is 64-aligned, row size and offset multiples
     * of 8 (shmobj__tab_field_place) */
    *w = (_Atomic uint64_t *)(void *)(p + c.off);
    return 0;
}

int shmobj_table_int_get(const shmobj_view *table, uint64_t row, size_t field, int64_t *out)
{
    _Atomic uint64_t *w;
    int rc = out == NULL ? SHMOBJ_EINVAL : cell_at(table, row, field, SHMOBJ_TYPE_INT, 0, &w);
    if (rc == 0)
        *out = (int64_t)atomic_load_explicit(w, memory_order_acquire);
    return rc;
}

int shmobj_table_int_set(const shmobj_view *table, uint64_t row, size_t field, int64_t x)
{
    _Atomic uint64_t *w;
    int rc = cell_at(table, row, field, SHMOBJ_TYPE_INT, 1, &w);
    if (rc == 0)
        atomic_store_explicit(w, (uint64_t)x, memory_order_release);
    return rc;
}

int shmobj_table_int_add(const shmobj_view *table, uint64_t row, size_t field, int64_t delta,
                         int64_t *old)
{
    _Atomic uint64_t *w;
    int rc = cell_at(table, row, field, SHMOBJ_TYPE_INT, 1, &w);
    if (rc != 0)
        return rc;
    /* unsigned: wraps as a UINT field does, and an INT's overflow is
     * defined */
    uint64_t was = atomic_fetch_add_explicit(w, (uint64_t)delta, memory_order_acq_rel);
    if (old != NULL)
        *old = (int64_t)was;
    return 0;
}

int shmobj_table_int_cas(const shmobj_view *table, uint64_t row, size_t field,
                         int64_t *expected, int64_t desired)
{
    _Atomic uint64_t *w;
    int rc = expected == NULL ? SHMOBJ_EINVAL
                              : cell_at(table, row, field, SHMOBJ_TYPE_INT, 1, &w);
    if (rc != 0)
        return rc;
    uint64_t e = (uint64_t)*expected;
    if (atomic_compare_exchange_strong_explicit(w, &e, (uint64_t)desired, memory_order_acq_rel,
                                                memory_order_acquire))
        return 0;
    *expected = (int64_t)e;
    return SHMOBJ_EBUSY;
}

static double bits_double(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static uint64_t double_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

int shmobj_table_double_get(const shmobj_view *table, uint64_t row, size_t field, double *out)
{
    _Atomic uint64_t *w;
    int rc = out == NULL ? SHMOBJ_EINVAL : cell_at(table, row, field, SHMOBJ_TYPE_DOUBLE, 0, &w);
    if (rc == 0)
        *out = bits_double(atomic_load_explicit(w, memory_order_acquire));
    return rc;
}

int shmobj_table_double_set(const shmobj_view *table, uint64_t row, size_t field, double x)
{
    _Atomic uint64_t *w;
    int rc = cell_at(table, row, field, SHMOBJ_TYPE_DOUBLE, 1, &w);
    if (rc == 0)
        atomic_store_explicit(w, double_bits(x), memory_order_release);
    return rc;
}

int shmobj_table_double_add(const shmobj_view *table, uint64_t row, size_t field, double delta,
                            double *old)
{
    _Atomic uint64_t *w;
    int rc = cell_at(table, row, field, SHMOBJ_TYPE_DOUBLE, 1, &w);
    if (rc != 0)
        return rc;
    uint64_t was = atomic_load_explicit(w, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(w, &was, double_bits(bits_double(was) + delta),
                                                  memory_order_acq_rel, memory_order_relaxed))
        ;
    if (old != NULL)
        *old = bits_double(was);
    return 0;
}
