/* The shape room of the object layer (lib/object/shape/), above the
 * builder: it makes and frees shapes, and puts records from C structs
 * through the builder's put (which writes records itself,
 * build/value-write.c).
 *
 * Shapes and records: a shape (field names, kinds and string capacities)
 * built once in a block of its own, records that hold only their slots and
 * name their shape, and the use count that keeps a shape from being freed
 * while records name it.
 *
 * Invariants kept here:
 * - A shape is written whole before its reference leaves
 *   shmobj_shape_put() and never changes afterwards, but for its use
 *   count: the names, descriptors and index are read by every process
 *   without a lock.
 * - A record is read only through a shape found whole with exactly the
 *   record's number of fields: within the mapped segment, of the
 *   reference's generation, its header and body within its own extent
 *   (shmobj__shape_open_light() of read/shape-read.h;
 *   shmobj__shape_open() adds the arena's check of the block, for the
 *   checker and for errors); what a view needs of the shape is copied
 *   into the view then, so later lookups never use a length or capacity
 *   read again.
 * - A record holds one use of its shape from before its block is returned
 *   by a put (taken as it is written, references.c) to the moment it is
 *   unreachable (its block freed, or its slot replaced:
 *   shmobj__free_children); the free of a shape succeeds only by the
 *   compare-and-swap of a count of 0 to CLOSING, after which no use is
 *   taken, so no live record names a freed shape unless a process died
 *   between the two steps of a free of its block (then its reads give
 *   SHMOBJ_ESTALE). A record is checked against its shape as it is
 *   written (build/value-write.c). */
#include <stdlib.h>
#include <string.h>

#include "value-build.h"
#include "index-probe.h"
#include "shape-read.h"
#include "content-check.h"

int shmobj_shape_put(shmobj_segment *seg, const shmobj_field *fields, size_t n,
                     shmobj_ref *shape)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    if (sp == NULL || fields == NULL || shape == NULL || n == 0 || n > SHMOBJ__SHAPE_MAX)
        return SHMOBJ_EINVAL;
    /* Names are few and a shape is built once: the index grows (up to 16
     * times the smallest, 8 KiB at most) until no two names start their
     * probe at the same entry, so a lookup by name reads one entry and one
     * name (shmobj__record_hit_short). */
    uint64_t base_cap = shmobj__index_cap(n), cap = base_cap;
    while (cap * 2 <= SHMOBJ__SHAPE_CAP_GROWTH * base_cap && cap * 2 * 8 <= 8192) {
        uint64_t seen[8192 / 8 / 64] = {0};
        int clash = 0;
        for (size_t i = 0; i < n && !clash; i++) {
            const char *nm = fields[i].name;
            if (nm == NULL)
                break; /* refused below */
            uint64_t at = shmobj__hash_mem(SHMOBJ_TYPE_STR, nm, strlen(nm)) & (cap - 1);
            clash = (seen[at / 64] >> (at % 64)) & 1;
            seen[at / 64] |= UINT64_C(1) << (at % 64);
        }
        if (!clash)
            break;
        cap *= 2;
    }
    uint64_t body = 16 + 32 * (uint64_t)n + 8 * cap;
    uint64_t size = SHMOBJ__PREFIX + 16 + body;
    /* the names longer than a short or medium key are str objects after the
     * index */
    for (size_t i = 0; i < n; i++) {
        const char *nm = fields[i].name;
        if (nm == NULL || !shmobj__field_ok(fields[i].kind, fields[i].capacity))
            return SHMOBJ_EINVAL;
        uint64_t len = strlen(nm);
        if (!shmobj__utf8_ok((const uint8_t *)nm, len) || len >= SHMOBJ__MAX_BLOCK)
            return SHMOBJ_EINVAL;
        if (len > SHMOBJ__SSTR_MAX && !shmobj__mstr_fits((const uint8_t *)nm, len))
            size = ((size + 15) & ~UINT64_C(15)) + 17 + len;
        if (size > SHMOBJ__MAX_BLOCK)
            return SHMOBJ_EINVAL;
    }
    /* a multiple of 16: record views keep the extent in 16-byte units */
    size = (size + 15) & ~UINT64_C(15);
    if (size / 16 > UINT32_MAX)
        return SHMOBJ_EINVAL;
    shmobj__ref r;
    void *p;
    int rc = shmobj__tree_new(sp, size, 16, SHMOBJ__TREE_SHAPE, &r, &p);
    if (rc != 0)
        return rc;
    uint8_t *b = p;
    uint64_t blk = shmobj__ref_off(r);
    uint16_t gen = shmobj__ref_gen(r);
    struct shmobj__tree *t = p;
    memset(b + sizeof *t, 0, (size_t)(SHMOBJ__PREFIX + 16 + body - sizeof *t));
    struct shmobj__slot *root = (void *)(b + sizeof *t);
    root->tag = SHMOBJ__SLOT_OBJ;
    atomic_store_explicit(&root->payload, shmobj__ref_make(blk + SHMOBJ__PREFIX, gen),
                          memory_order_relaxed);
    uint8_t *o = b + SHMOBJ__PREFIX;
    struct shmobj__obj h = {.tag = SHMOBJ_TYPE_SHAPE, .count = (uint32_t)n, .len = cap};
    memcpy(o, &h, sizeof h);
    uint64_t *ix = (uint64_t *)(o + shmobj__shape_index(n));
    uint64_t cur = SHMOBJ__PREFIX + 16 + body;
    for (size_t i = 0; i < n; i++) {
        const char *nm = fields[i].name;
        uint64_t len = strlen(nm), hash = shmobj__hash_mem(SHMOBJ_TYPE_STR, nm, len);
        struct shmobj__field d = {.kind = (uint8_t)fields[i].kind, .cap = fields[i].capacity,
                                  .c_off = fields[i].offset};
        memcpy(o + shmobj__shape_descs() + 16 * i, &d, sizeof d);
        struct shmobj__slot *ns = (void *)(o + shmobj__shape_names(n) + 16 * i);
        if (len <= SHMOBJ__SSTR_MAX) {
            ns->tag = SHMOBJ__SLOT_SSTR;
            ns->reserved0 = (uint8_t)len;
            atomic_store_explicit(&ns->payload, shmobj__pack_short((const uint8_t *)nm, len),
                                  memory_order_relaxed);
        } else if (shmobj__mstr_fits((const uint8_t *)nm, len)) {
            /* a medium name: in its slot too */
            uint64_t w0 = shmobj__mstr_w0((const uint8_t *)nm);
            memcpy(ns, &w0, sizeof w0);
            atomic_store_explicit(&ns->payload, shmobj__mstr_w1((const uint8_t *)nm, len),
                                  memory_order_relaxed);
        } else {
            cur = (cur + 15) & ~UINT64_C(15);
            struct shmobj__obj sh = {.tag = SHMOBJ_TYPE_STR, .len = len};
            memcpy(b + cur, &sh, sizeof sh);
            memcpy(b + cur + 16, nm, (size_t)len);
            b[cur + 16 + len] = 0;
            ns->tag = SHMOBJ__SLOT_OBJ;
            atomic_store_explicit(&ns->payload, shmobj__ref_make(blk + cur, gen),
                                  memory_order_relaxed);
            cur += 17 + len;
        }
        /* enter the name with the probe every lookup walks; an equal
         * name met on the way refuses the shape */
        struct shmobj__probe pr;
        uint64_t item;
        shmobj__probe_start(&pr, ix, cap, hash);
        for (;;) {
            int step = shmobj__probe_next(&pr, i, &item);
            if (step == SHMOBJ__PROBE_EMPTY) {
                ix[shmobj__probe_pos(&pr)] = shmobj__index_entry(i, hash);
                break;
            }
            if (step != SHMOBJ__PROBE_HIT || strcmp(fields[item].name, nm) == 0) {
                (void)sp->ops->free(sp, r);
                return SHMOBJ_EINVAL;
            }
        }
    }
    if (cur < size)
        memset(b + cur, 0, (size_t)(size - cur));
    *shape = r;
    return 0;
}

int shmobj__shape_open(struct shmobj__space *sp, shmobj__ref ref, int from_caller,
                       struct shmobj__shape_info *out)
{
    uint64_t blk, blen, body;
    int rc = shmobj__tree_open(sp, ref, from_caller, &blk, &blen);
    if (rc != 0)
        return rc;
    int wrong = from_caller ? SHMOBJ_ETYPE : SHMOBJ_ECORRUPT;
    struct shmobj__tree *t = (void *)(sp->base + blk);
    if (shmobj__tree_rootrec(t->version, atomic_load_explicit(&t->flags, memory_order_relaxed)))
        return wrong; /* a record alone (version 3) */
    const struct shmobj__slot *root = (const void *)(sp->base + blk + sizeof(struct shmobj__tree));
    uint64_t p = atomic_load_explicit(&((struct shmobj__slot *)root)->payload,
                                      memory_order_acquire);
    /* a shape's block holds the shape right after its root slot */
    if (root->tag != SHMOBJ__SLOT_OBJ ||
        p != shmobj__ref_make(blk + SHMOBJ__PREFIX, shmobj__ref_gen(ref)) ||
        blen < SHMOBJ__PREFIX + 16)
        return root->tag == SHMOBJ__SLOT_OBJ || root->tag == SHMOBJ__SLOT_RECORD ||
                       (root->tag >= SHMOBJ__SLOT_BOOL && root->tag <= SHMOBJ__SLOT_DOUBLE) ||
                       root->tag == SHMOBJ__SLOT_LINK
                   ? wrong
                   : SHMOBJ_ECORRUPT;
    const struct shmobj__obj *hp = (const void *)(sp->base + blk + SHMOBJ__PREFIX);
    struct shmobj__obj h;
    memcpy(&h, hp, sizeof h);
    if (h.tag != SHMOBJ_TYPE_SHAPE)
        return wrong;
    if (shmobj__body_size(&h, blen - SHMOBJ__PREFIX - 16, &body) != 0 || blen % 16 != 0 ||
        blen / 16 > UINT32_MAX)
        return SHMOBJ_ECORRUPT;
    *out = (struct shmobj__shape_info){.blk = blk, .blen = blen, .gen = shmobj__ref_gen(ref),
                                       .count = h.count, .cap = h.len, .obj = hp};
    return 0;
}

int shmobj__record_view(struct shmobj__space *sp, const struct shmobj__obj *h,
                        shmobj_view *out)
{
    struct shmobj__shape_info si;
    int rc = shmobj__shape_open_light(sp, h->len, &si);
    if (rc != 0)
        return rc;
    if (si.count != h->count)
        return SHMOBJ_ECORRUPT;
    out->len = h->len;
    out->ndim = (uint8_t)__builtin_ctzll(si.cap);
    shmobj__rec_set_extent(out, si.blen);
    return 0;
}

int shmobj__rootrec_view(struct shmobj__space *sp, uint64_t blk, uint64_t blen, uint16_t gen,
                         shmobj_view *out)
{
    struct shmobj__shape_info si;
    const struct shmobj__tree *t = (const void *)(sp->base + blk);
    shmobj__ref shape = t->size;
    int rc = shmobj__shape_open_light(sp, shape, &si);
    if (rc != 0)
        return rc;
    /* count < 2^16: no overflow */
    if (blen < 16 + 16 * (uint64_t)si.count)
        return SHMOBJ_ECORRUPT;
    out->obj = t; /* the slots at obj + 16 + 16 i, as behind a record header */
    out->obj_blk = blk;
    out->obj_blen = blen;
    out->obj_gen = gen;
    out->type = SHMOBJ_TYPE_RECORD;
    out->count = si.count;
    out->len = shape;
    out->ndim = (uint8_t)__builtin_ctzll(si.cap);
    shmobj__rec_set_extent(out, si.blen);
    return 0;
}

int shmobj__shape_use(struct shmobj__space *sp, shmobj__ref shape)
{
    struct shmobj__shape_info si;
    int rc = shmobj__shape_open(sp, shape, 0, &si);
    if (rc != 0)
        return rc;
    _Atomic uint64_t *u = shmobj__shape_uses(sp, &si);
    uint64_t old = atomic_fetch_add_explicit(u, 1, memory_order_acq_rel);
    if (old & SHMOBJ__SHAPE_CLOSING) {
        /* its free began first: the record may not name it */
        atomic_fetch_sub_explicit(u, 1, memory_order_acq_rel);
        return SHMOBJ_ESTALE;
    }
    return 0;
}

static void unuse_at(_Atomic uint64_t *u)
{
    uint64_t cur = atomic_load_explicit(u, memory_order_relaxed);
    /* never below 0: a count damaged to 0 stays there */
    while ((cur & ~SHMOBJ__SHAPE_CLOSING) != 0 &&
           !atomic_compare_exchange_weak_explicit(u, &cur, cur - 1, memory_order_acq_rel,
                                                  memory_order_relaxed))
        ;
}

void shmobj__shape_unuse(struct shmobj__space *sp, shmobj__ref shape)
{
    struct shmobj__shape_info si;
    if (shmobj__shape_open_light(sp, shape, &si) != 0)
        return; /* gone already (damage, or a free that a dead process began) */
    unuse_at(shmobj__shape_uses(sp, &si));
}

void shmobj__shape_unuse_view(struct shmobj__space *sp, const shmobj_view *rec)
{
    /* the view checked the shape's layout when it was made */
    uint64_t blk = shmobj__ref_off(rec->len);
    if (!shmobj__blk_live(sp, blk, shmobj__ref_gen(rec->len)))
        return;
    unuse_at(&((struct shmobj__shape_meta *)(sp->base + blk + SHMOBJ__PREFIX +
                                             SHMOBJ__SHAPE_META))->uses);
}

int shmobj__shape_free(struct shmobj__space *sp, shmobj__ref ref, uint64_t blk)
{
    struct shmobj__shape_info si;
    (void)blk;
    int rc = shmobj__shape_open(sp, ref, 1, &si);
    if (rc != 0)
        return rc;
    uint64_t expect = 0;
    if (!atomic_compare_exchange_strong_explicit(shmobj__shape_uses(sp, &si), &expect,
                                                 SHMOBJ__SHAPE_CLOSING, memory_order_acq_rel,
                                                 memory_order_acquire))
        return expect & SHMOBJ__SHAPE_CLOSING ? SHMOBJ_ESTALE : SHMOBJ_EINUSE;
    return sp->ops->free(sp, ref);
}

int shmobj_shape_free(shmobj_segment *seg, shmobj_ref shape)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    if (sp == NULL || shape == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    return shmobj__shape_free(sp, shape, shmobj__ref_off(shape));
}

/* The value of one field of a C struct: its kind and capacity, `at` where
 * its bytes are. */
static int struct_item(uint8_t kind, uint32_t cap, const uint8_t *at, shmobj_value *item)
{
    shmobj_ref r;
    switch (kind) {
    case SHMOBJ_TYPE_BOOL: {
        /* a C bool's byte, read as a byte (any non-zero is true) */
        uint8_t b;
        memcpy(&b, at, 1);
        *item = SHMOBJ_VAL_BOOL(b != 0);
        return 0;
    }
    case SHMOBJ_TYPE_INT:
    case SHMOBJ_TYPE_UINT:
    case SHMOBJ_TYPE_DOUBLE:
        /* the C member's 8 bytes are the description's, whichever of the
         * three it is */
        *item = SHMOBJ_VAL_UINT(0);
        item->type = kind;
        memcpy(&item->v, at, 8);
        return 0;
    case SHMOBJ_TYPE_STR:
        if (cap != 0) {
            const void *z = memchr(at, 0, cap);
            *item = SHMOBJ_VAL_STRN(at, z != NULL ? (size_t)((const uint8_t *)z - at) : (size_t)cap);
            return 0;
        } else {
            const char *s;
            memcpy(&s, at, sizeof s);
            if (s == NULL)
                return SHMOBJ_EINVAL;
            *item = SHMOBJ_VAL_STRN(s, strlen(s));
            return 0;
        }
    case SHMOBJ_TYPE_BYTES:
        if (cap == 0)
            return SHMOBJ_EINVAL;
        *item = SHMOBJ_VAL_BYTES(at, cap);
        return 0;
    case SHMOBJ_TYPE_LINK:
        memcpy(&r, at, sizeof r);
        if (r == SHMOBJ_REF_NULL)
            return SHMOBJ_EINVAL;
        *item = SHMOBJ_VAL_LINK(r);
        return 0;
    case SHMOBJ_TYPE_NULL:
        memcpy(&r, at, sizeof r);
        *item = r == SHMOBJ_REF_NULL ? SHMOBJ_VAL_NULL : SHMOBJ_VAL_ADOPT(r);
        return 0;
    default:
        return SHMOBJ_ECORRUPT;
    }
}

/* A record of `shape` from the C struct `c`. With `fields` (the caller's
 * own table, nfields long), each field is read where that table says, once
 * its count, kinds and capacities were found to be the shape's: the
 * caller's memory is read only where the caller said. Without it, where
 * the shape's recorded offsets say (shmobj_record_put_struct()). */
static int record_from_struct(shmobj_segment *seg, shmobj_ref shape, const shmobj_field *fields,
                              size_t nfields, const void *c, shmobj_ref *ref)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    struct shmobj__shape_info si;
    shmobj_value local[32], *items = local;
    if (sp == NULL || c == NULL || ref == NULL || shape == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__shape_open(sp, shape, 1, &si);
    if (rc != 0)
        return rc;
    if (fields != NULL && nfields != si.count)
        return SHMOBJ_EINVAL;
    if (si.count > sizeof local / sizeof local[0]) {
        items = malloc(si.count * sizeof *items);
        if (items == NULL)
            return SHMOBJ_ENOMEM;
    }
    const uint8_t *descs = (const uint8_t *)si.obj + shmobj__shape_descs();
    const uint8_t *src = c;
    for (uint32_t i = 0; i < si.count && rc == 0; i++) {
        struct shmobj__field d;
        memcpy(&d, descs + 16 * i, sizeof d);
        uint64_t off = d.c_off;
        if (fields != NULL) {
            if (fields[i].kind != d.kind || fields[i].capacity != d.cap) {
                rc = SHMOBJ_EINVAL;
                break;
            }
            off = fields[i].offset;
        }
        rc = struct_item(d.kind, d.cap, src + off, &items[i]);
    }
    if (rc == 0) {
        shmobj_value rec = SHMOBJ_VAL_RECORD(shape, items, si.count);
        rc = shmobj__obj_put(sp, &rec, ref);
    }
    if (items != local)
        free(items);
    return rc;
}

int shmobj_record_put_fields(shmobj_segment *seg, shmobj_ref shape, const shmobj_field *fields,
                             size_t nfields, const void *c, shmobj_ref *ref)
{
    if (fields == NULL)
        return SHMOBJ_EINVAL;
    return record_from_struct(seg, shape, fields, nfields, c, ref);
}

int shmobj_record_put_struct(shmobj_segment *seg, shmobj_ref shape, const void *c,
                             shmobj_ref *ref)
{
    return record_from_struct(seg, shape, NULL, 0, c, ref);
}

int shmobj_record_shape(const shmobj_view *view, shmobj_ref *shape)
{
    int rc = shmobj__obj_of_kind(view, shape, SHMOBJ_TYPE_RECORD);
    if (rc != 0)
        return rc;
    *shape = view->len;
    return 0;
}
