/* Measuring, the first pass of a put (value-put.c) and shmobj_obj_size:
 * the bytes of the block a value description needs, without writing
 * anything. Read from the top: the entries, then each kind of value from
 * the slot down to its bytes, in the order the writer (value-write.c)
 * takes them.
 *
 * Invariants kept here:
 * - A lean walk of the description that only adds up the sizes the
 *   writer (value-write.c) will use, with the same structural checks: types,
 *   depth, counts, lengths and NULL pointers (through shmobj__desc_mem and
 *   shmobj__desc_key, the writer's own resolution), buffer layouts
 *   (shmobj__desc_buffer, the writer's too). So shmobj_obj_size() refuses
 *   what a put would.
 * - Content checks (UTF-8, duplicate keys) are the writer's; the writer
 *   also stops at the size measured here, so the two can never disagree by
 *   more than an error.
 * - Every sum is overflow-checked and bounded by SHMOBJ__MAX_BLOCK. */
#include "value-build.h"

/* Each kind of value, in the order this file defines them. */
static inline int measure_slot(const shmobj_value *v, int depth, uint64_t *cur, int *need64);
static int measure_obj(const shmobj_value *v, int depth, uint64_t *cur, int *need64);
static inline int measure_container(const shmobj_value *v, int depth, uint64_t pos,
                                    uint64_t *cur, int *need64);
static int measure_record(const shmobj_value *v, int depth, uint64_t pos, uint64_t *cur,
                          int *need64);
static int measure_packed(const shmobj_value *v, uint64_t pos, uint64_t *cur);
static int measure_buffer(const shmobj_value *v, uint64_t pos, uint64_t *cur, int *need64);
static inline int measure_mem(uint64_t n, int depth, uint64_t *cur);

int shmobj_obj_size(const shmobj_value *val, size_t *bytes)
{
    uint64_t size;
    int need64;
    if (val == NULL || bytes == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__measure(val, &size, &need64);
    if (rc == 0)
        *bytes = (size_t)size;
    return rc;
}

int shmobj__measure(const shmobj_value *val, uint64_t *size, int *need64)
{
    /* A record that is the block's value has the tree header for its own
     * (version 3): its slots start at 16. */
    uint64_t cur = val->type == SHMOBJ_TYPE_RECORD ? 0 : SHMOBJ__PREFIX;
    *need64 = 0;
    if (val->type == SHMOBJ_TYPE_ADOPT)
        return SHMOBJ_EINVAL; /* nothing to put: the object is there */
    int rc = measure_slot(val, 0, &cur, need64);
    if (rc != 0)
        return rc;
    *size = cur;
    return 0;
}

static inline __attribute__((always_inline)) int
measure_slot(const shmobj_value *v, int depth, uint64_t *cur, int *need64)
{
    if (v->reserved != 0)
        return SHMOBJ_EINVAL; /* kept 0 so that a later release may use it */
    switch (v->type) {
    case SHMOBJ_TYPE_BOOL:
        return v->v.b == 0 || v->v.b == 1 ? 0 : SHMOBJ_EINVAL;
    case SHMOBJ_TYPE_INT:
    case SHMOBJ_TYPE_UINT:
    case SHMOBJ_TYPE_DOUBLE:
    case SHMOBJ_TYPE_NULL:
        return 0;
    case SHMOBJ_TYPE_TUPLE: {
        /* below the root, a tuple of strings: its body only (its header
         * is in its slot), unaligned */
        uint64_t n;
        if (shmobj__desc_ptup(v, depth, &n)) {
            if (!shmobj__add_ok(*cur, n, cur) || *cur > SHMOBJ__MAX_BLOCK)
                return SHMOBJ_EINVAL;
            return 0;
        }
        return measure_obj(v, depth, cur, need64);
    }
    case SHMOBJ_TYPE_ADOPT:
        /* the slot only: the object is in its own block already */
        *need64 |= SHMOBJ__M_ADOPTS;
        /* fall through */
    case SHMOBJ_TYPE_LINK:
        return v->v.ref != 0 ? 0 : SHMOBJ_EINVAL;
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES: {
        /* inline: the leaves are most of a tree */
        uint64_t n;
        int rc = shmobj__desc_mem(v->type, v->v.s.ptr, v->v.s.len, &n);
        return rc != 0 ? rc : measure_mem(n, depth, cur);
    }
    default:
        return measure_obj(v, depth, cur, need64);
    }
}

static int measure_obj(const shmobj_value *v, int depth, uint64_t *cur, int *need64)
{
    uint64_t pos, n;
    int rc;
    if (depth >= SHMOBJ_OBJ_MAXDEPTH || *cur > SHMOBJ__MAX_BLOCK)
        return SHMOBJ_EINVAL;
    pos = (*cur + 15) & ~UINT64_C(15);
    switch (v->type) {
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES: {
        uint64_t len;
        rc = shmobj__desc_mem(v->type, v->v.s.ptr, v->v.s.len, &len);
        return rc != 0 ? rc : measure_mem(len, depth, cur);
    }
    case SHMOBJ_TYPE_BUFFER:
        return measure_buffer(v, pos, cur, need64);
    case SHMOBJ_TYPE_RECORD:
        return measure_record(v, depth, pos, cur, need64);
    case SHMOBJ_TYPE_LIST:
        return measure_container(v, depth, pos, cur, need64);
    case SHMOBJ_TYPE_DICT:
        return measure_container(v, depth, pos, cur, need64);
    case SHMOBJ_TYPE_TUPLE:
    case SHMOBJ_TYPE_STRUCT:
    case SHMOBJ_TYPE_SET:
        break;
    case SHMOBJ_TYPE_MLIST:
    case SHMOBJ_TYPE_MDICT:
    case SHMOBJ_TYPE_MSET:
        /* created empty: the header and the control block (format.h) */
        rc = shmobj__desc_mut_bytes(v, &n);
        if (rc != 0)
            return rc;
        *cur = pos + 16 + n;
        return 0;
    default:
        return SHMOBJ_EINVAL;
    }
    if (v->type == SHMOBJ_TYPE_TUPLE && (rc = measure_packed(v, pos, cur)) <= 0)
        return rc;
    return measure_container(v, depth, pos, cur, need64);
}

/* A fixed container (list, tuple with slots, struct, dict, set) at the
 * 16-aligned pos: its header, slots and index, then its keys' and its
 * values' bytes, in the order the writer writes them (keys first: the
 * cursor's alignment depends on it). Inlined once per kind the walk meets
 * most (list, dict), so each copy knows its kind. */
static inline __attribute__((always_inline)) int
measure_container(const shmobj_value *v, int depth, uint64_t pos, uint64_t *cur, int *need64)
{
    uint64_t n, cap, end;
    int rc;
    int keyed, values;
    rc = shmobj__desc_container(v, &n, &keyed, &values, &cap);
    if (rc != 0)
        return rc;
    /* n < 2^32: no overflow in 16 * n * 2 + 8 * cap */
    if (!shmobj__add_ok(pos, 16 + 16 * n * (uint64_t)(values + keyed) + 8 * cap, &end) ||
        end > SHMOBJ__MAX_BLOCK)
        return SHMOBJ_EINVAL;
    /* The cursor and the items in locals: the caller's *cur could alias
     * the description, which every store to it would make the loops read
     * again. */
    uint64_t c = end;
    const shmobj_value *items = v->v.c.items;
    depth++;
    if (keyed && v->type == SHMOBJ_TYPE_STRUCT) {
        const char *const *names = v->v.c.names;
        for (size_t i = 0; i < n; i++) {
            uint64_t kn;
            /* shmobj__desc_key_at() by kind: short and medium string keys
             * live in their slots */
            const char *nm = names[i];
            rc = shmobj__desc_mem(SHMOBJ_TYPE_STR, nm, SHMOBJ_STRLEN, &kn);
            if (rc == 0 && kn > SHMOBJ__SSTR_MAX && !shmobj__mstr_fits((const uint8_t *)nm, kn))
                rc = measure_mem(kn, depth, &c);
            if (rc != 0)
                return rc;
        }
    } else if (keyed) {
        size_t step = v->type == SHMOBJ_TYPE_SET ? 1 : 2;
        for (const shmobj_value *k = items, *e = items + step * n; k != e; k += step) {
            /* ints take no bytes */
            if (k->type == SHMOBJ_TYPE_INT)
                continue;
            shmobj_key dk;
            rc = shmobj__desc_key(k, &dk);
            if (rc == 0 && !shmobj__key_in_slot(&dk))
                rc = measure_mem(dk.len, depth, &c);
            if (rc != 0)
                return rc;
        }
    }
    if (values) {
        size_t step = v->type == SHMOBJ_TYPE_DICT ? 2 : 1;
        for (const shmobj_value *it = items + step - 1, *e = it + step * n; it != e;
             it += step) {
            rc = measure_slot(it, depth, &c, need64);
            if (rc != 0)
                return rc;
        }
    }
    *cur = c;
    return 0;
}

/* A record: its header and slots, then each field's bytes in field
 * order: a string's or bytes' inline (no header, no alignment, a NUL
 * after), any other value's as a slot's (shape.c writes the same). The
 * kinds are checked against the shape by the writer, which has the
 * segment. */
static int measure_record(const shmobj_value *v, int depth, uint64_t pos, uint64_t *cur,
                          int *need64)
{
    uint64_t n = v->v.r.count, end;
    const shmobj_value *items = v->v.r.items;
    if (n == 0 || n > SHMOBJ__SHAPE_MAX || items == NULL || v->v.r.shape == 0 ||
        !shmobj__add_ok(pos, 16 + 16 * n, &end) || end > SHMOBJ__MAX_BLOCK)
        return SHMOBJ_EINVAL;
    *cur = end;
    /* (depth 0: the block's value; a free need not walk for it) */
    *need64 |= depth == 0 ? SHMOBJ__M_ROOTREC : SHMOBJ__M_RECORDS;
    for (uint64_t i = 0; i < n; i++) {
        const shmobj_value *it = &items[i];
        int rc;
        if (it->type == SHMOBJ_TYPE_STR || it->type == SHMOBJ_TYPE_BYTES) {
            uint64_t len;
            rc = it->reserved != 0 ? SHMOBJ_EINVAL
                                   : shmobj__desc_mem(it->type, it->v.s.ptr, it->v.s.len, &len);
            if (rc == 0 && (len >= SHMOBJ__MAX_BLOCK || !shmobj__add_ok(*cur, len + 1, cur) ||
                            *cur > SHMOBJ__MAX_BLOCK))
                rc = SHMOBJ_EINVAL;
        } else {
            rc = measure_slot(it, depth + 1, cur, need64);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* A tuple written packed (shmobj__desc_packed): its header and its
 * strings' bytes from the 16-aligned pos; 1 when v is not one. Out of
 * line: the other containers' walk keeps its registers. */
static __attribute__((noinline)) int measure_packed(const shmobj_value *v, uint64_t pos,
                                                    uint64_t *cur)
{
    uint64_t n, end;
    if (!shmobj__desc_packed(v, &n))
        return 1;
    if (!shmobj__add_ok(pos, 16 + n, &end) || end > SHMOBJ__MAX_BLOCK)
        return SHMOBJ_EINVAL;
    *cur = end;
    return 0;
}

/* A buffer at the 16-aligned pos, laid out as the writer will
 * (shmobj__desc_buffer()). Out of line: rare and shape-heavy, and the
 * containers' walk keeps a small frame. */
static __attribute__((noinline)) int measure_buffer(const shmobj_value *v, uint64_t pos,
                                                    uint64_t *cur, int *need64)
{
    struct shmobj__buffer_layout l;
    uint64_t end;
    int rc = shmobj__desc_buffer(v, pos, &l);
    if (rc != 0)
        return rc;
    if (!shmobj__add_ok(pos, l.data_rel, &end) || !shmobj__add_ok(end, l.nbytes, &end) ||
        end > SHMOBJ__MAX_BLOCK)
        return SHMOBJ_EINVAL;
    *cur = end;
    *need64 |= SHMOBJ__M_ALIGN64;
    return 0;
}

/* Bytes of a str/bytes object of n bytes at the 16-aligned *cur. */
static inline int measure_mem(uint64_t n, int depth, uint64_t *cur)
{
    /* The cursor stays below 2^47 (every step checks it against
     * SHMOBJ__MAX_BLOCK, 2^46, but for a control block's few hundred
     * bytes), and n is checked below 2^46 before its sum counts: no
     * overflow. */
    uint64_t end = ((*cur + 15) & ~UINT64_C(15)) + 17 + n;
    if (depth >= SHMOBJ_OBJ_MAXDEPTH || n >= SHMOBJ__MAX_BLOCK || end > SHMOBJ__MAX_BLOCK)
        return SHMOBJ_EINVAL;
    *cur = end;
    return 0;
}
