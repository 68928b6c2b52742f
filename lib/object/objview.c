/* Views: reading objects in place, and atomic updates of scalar slots.
 *
 * Invariants kept here:
 * - Every offset, count and length read from the segment is checked against
 *   the extent of the block it was found in (the tree header's size, itself
 *   checked against the arena's usable size) before anything is followed,
 *   and copied into the view once: later reads use the copy, so a value
 *   changed by another process after the check cannot widen an access.
 * - An OBJ payload inside the current block is an inline object and must
 *   carry the block's generation; anywhere else it must name a live object
 *   block (arena generation check), whose root names an inline object. So
 *   following one reference costs O(1), whatever the object's size.
 * - Slot tags never change, so a scalar view may read or update its slot
 *   at any time with one atomic operation.
 * - A view remembers the generations of the blocks it points into. Every
 *   call that writes through a view, or returns data read through it,
 *   first compares the generation in the arena header of the block it is
 *   about to touch with the remembered one (one load) and answers
 *   SHMOBJ_ESTALE when the block was freed, so a view kept past a free
 *   never reads or changes the object built in its place afterwards. Reads
 *   of a scalar compare after loading the value instead, so the value
 *   returned was loaded before any free of its block became visible. */
#include <math.h>
#include <string.h>

#include "objfmt.h"

/* The public structs' sizes are ABI. */
_Static_assert(sizeof(shmobj_view) == 80, "shmobj_view is 80 bytes");
_Static_assert(sizeof(shmobj_value) == 32, "shmobj_value is 32 bytes");
_Static_assert(sizeof(shmobj_buffer_desc) == 40, "shmobj_buffer_desc is 40 bytes");

static inline struct shmobj__space *space_of(const shmobj_view *v)
{
    return (struct shmobj__space *)v->seg;
}

static inline uint64_t off_of(struct shmobj__space *sp, const void *p)
{
    return (uint64_t)((const uint8_t *)p - sp->base);
}

/* Is the block holding the view's object (its items, bytes, index) still
 * the one the view was made from? */
static inline int obj_live(const shmobj_view *v)
{
    return shmobj__blk_live(space_of(v), v->obj_blk, v->obj_gen);
}

/* The same for the block holding the view's slot (scalars, short keys,
 * the slot a replacement writes). */
static inline int slot_live(const shmobj_view *v)
{
    return shmobj__blk_live(space_of(v), v->slot_blk, v->slot_gen);
}

int shmobj__tree_open(struct shmobj__space *sp, shmobj__ref ref, int from_caller,
                      uint64_t *blk, uint64_t *blen)
{
    uint64_t usable = 0, off = shmobj__ref_off(ref);
    void *p;
    if (ref == 0)
        return SHMOBJ_EINVAL;
    int rc = sp->ops->check(sp, ref, &usable);
    /* The arena finds no block at that offset. A caller's reference that
     * names no block is not one of this segment's; one read from a slot
     * means the graph is damaged. */
    if (rc == SHMOBJ_ECORRUPT)
        return from_caller ? SHMOBJ_EINVAL : SHMOBJ_ECORRUPT;
    if (rc != 0)
        return rc;
    if (!shmobj__aligned(off, 16))
        return from_caller ? SHMOBJ_EINVAL : SHMOBJ_ECORRUPT;
    /* A live block. It holds an object exactly when it begins with the
     * tree magic; anything else is another kind of block (raw allocation,
     * map, queue, message), not damage, unless it was reached from a slot.
     * A block with the magic whose header disagrees (another version, a
     * size beyond the block) is a damaged object. */
    if (usable < SHMOBJ__PREFIX)
        return from_caller ? SHMOBJ_ETYPE : SHMOBJ_ECORRUPT;
    rc = shmobj__space_at(sp, off, SHMOBJ__PREFIX, &p);
    if (rc != 0)
        return rc;
    const struct shmobj__tree *t = p;
    uint32_t magic = t->magic;
    uint16_t version = t->version;
    uint64_t size = t->size;
    if (magic != SHMOBJ__TREE_MAGIC)
        return from_caller ? SHMOBJ_ETYPE : SHMOBJ_ECORRUPT;
    if (version != SHMOBJ__TREE_VERSION || size < SHMOBJ__PREFIX || size > usable)
        return SHMOBJ_ECORRUPT;
    rc = shmobj__space_at(sp, off, size, &p);
    if (rc != 0)
        return rc;
    *blk = off;
    *blen = size;
    return 0;
}

/* Bytes of an object's fixed body (after its 16-byte header), or
 * SHMOBJ_ECORRUPT when the header is inconsistent. `rem` is the room left in
 * the block after the header. */
static inline __attribute__((always_inline)) int
body_size(const struct shmobj__obj *h, uint64_t rem, uint64_t *out)
{
    uint64_t n = h->count, cap = h->len, a, b;
    switch (h->tag) {
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES:
        if (h->count != 0 || !shmobj__add_ok(h->len, 1, out))
            return SHMOBJ_ECORRUPT;
        break;
    case SHMOBJ_TYPE_BUFFER:
        if (h->ndim > SHMOBJ_BUFFER_MAXDIM || shmobj__dtype_size(h->dtype) == 0)
            return SHMOBJ_ECORRUPT;
        *out = sizeof(struct shmobj__bufhdr) + 16u * h->ndim;
        break;
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_TUPLE:
        *out = 16 * n;
        break;
    case SHMOBJ_TYPE_STRUCT:
        if (!(h->flags & SHMOBJ__OBJ_NAMES)) {
            *out = 16 * n;
            break;
        }
        /* A named struct is laid out like a dict. */
        /* fall through */
    case SHMOBJ_TYPE_DICT:
    case SHMOBJ_TYPE_SET:
        if (cap != shmobj__index_cap(n))
            return SHMOBJ_ECORRUPT;
        a = (h->tag == SHMOBJ_TYPE_SET ? 16 : 32) * n;
        if (!shmobj__mul_ok(cap, 8, &b) || !shmobj__add_ok(a, b, out))
            return SHMOBJ_ECORRUPT;
        break;
    default:
        return SHMOBJ_ECORRUPT;
    }
    return *out <= rem ? 0 : SHMOBJ_ECORRUPT;
}

static inline __attribute__((always_inline)) int
view_follow(struct shmobj__space *sp, uint64_t p, uint64_t blk, uint64_t blen,
            uint16_t bgen, shmobj_view *out)
{
    uint64_t off = shmobj__ref_off(p);
    uint16_t gen = shmobj__ref_gen(p);
    uint64_t ob = blk, oblen = blen;
    if (off >= blk && off - blk < blen) {
        if (gen != bgen)
            return SHMOBJ_ECORRUPT;
    } else {
        /* A block of its own (an item replaced after creation). */
        int rc = shmobj__tree_open(sp, p, 0, &ob, &oblen);
        if (rc != 0)
            return rc;
        const struct shmobj__slot *root =
            (const void *)(sp->base + ob + sizeof(struct shmobj__tree));
        uint64_t q = atomic_load_explicit(
            &((struct shmobj__slot *)root)->payload, memory_order_acquire);
        off = shmobj__ref_off(q);
        if (root->tag != SHMOBJ__SLOT_OBJ || shmobj__ref_gen(q) != gen ||
            off < ob || off - ob >= oblen)
            return SHMOBJ_ECORRUPT;
    }
    /* off lies in [ob, ob + oblen). */
    uint64_t rel = off - ob, body;
    if (!shmobj__aligned(off, 16) || oblen - rel < 16)
        return SHMOBJ_ECORRUPT;
    const struct shmobj__obj *hp = (const void *)(sp->base + off);
    struct shmobj__obj h;
    memcpy(&h, hp, sizeof h);
    int rc = body_size(&h, oblen - rel - 16, &body);
    if (rc != 0)
        return rc;
    if (h.tag == SHMOBJ_TYPE_BUFFER) {
        const struct shmobj__bufhdr *bh = (const void *)(hp + 1);
        uint64_t dr = bh->data_rel;
        if (dr < 16 + body || dr > oblen - rel || h.len > oblen - rel - dr ||
            !shmobj__aligned(off + dr, SHMOBJ__DATA_ALIGN))
            return SHMOBJ_ECORRUPT;
    } else if ((h.tag == SHMOBJ_TYPE_STR || h.tag == SHMOBJ_TYPE_BYTES) &&
               ((const uint8_t *)(hp + 1))[h.len] != 0) {
        return SHMOBJ_ECORRUPT;
    }
    out->obj = hp;
    out->obj_blk = ob;
    out->obj_blen = oblen;
    out->obj_gen = (uint16_t)(ob == blk ? bgen : gen);
    out->type = h.tag;
    out->count = h.count;
    out->len = h.len;
    out->dtype = h.dtype;
    out->ndim = h.ndim;
    out->flags |= (uint8_t)(h.flags & SHMOBJ__OBJ_NAMES ? SHMOBJ__VIEW_NAMES : 0);
    return 0;
}

int shmobj__view_follow(struct shmobj__space *sp, uint64_t p, uint64_t blk,
                        uint64_t blen, uint16_t bgen, shmobj_view *out)
{
    return view_follow(sp, p, blk, blen, bgen, out);
}

/* Times a view follows a slot's value anew after finding it replaced
 * under it (each time by another process's shmobj_view_set()). */
#define FOLLOW_RETRIES 64

static inline __attribute__((always_inline)) int
view_slot(struct shmobj__space *sp, uint64_t slot_off, uint64_t blk,
          uint64_t blen, uint16_t bgen, int ro, shmobj_view *out)
{
    struct shmobj__slot *s = (void *)(sp->base + slot_off);
    uint8_t tag = s->tag;
    out->seg = (shmobj_segment *)sp;
    out->slot = s;
    out->obj = NULL;
    out->slot_blk = blk;
    out->slot_blen = blen;
    out->slot_gen = bgen;
    out->slot_tag = tag;
    out->flags = (uint8_t)(ro ? SHMOBJ__VIEW_RO : 0);
    out->count = 0;
    out->len = 0;
    switch (tag) {
    case SHMOBJ__SLOT_BOOL:
    case SHMOBJ__SLOT_INT:
    case SHMOBJ__SLOT_UINT:
    case SHMOBJ__SLOT_DOUBLE:
        out->type = tag;
        return 0;
    case SHMOBJ__SLOT_OBJ: {
        uint64_t p = atomic_load_explicit(&s->payload, memory_order_acquire);
        for (unsigned tries = 0;; tries++) {
            if (p == 0) {
                out->type = SHMOBJ_TYPE_NULL;
                return 0;
            }
            int rc = view_follow(sp, p, blk, blen, bgen, out);
            if (rc == 0)
                return 0;
            /* Another process may have replaced the value (and freed its
             * block) while we followed it: then follow the new one. An
             * error stands only for a slot that still names what failed. */
            uint64_t now = atomic_load_explicit(&s->payload, memory_order_acquire);
            if (now == p)
                return rc;
            /* Replaced under us every time: the value we could follow is
             * gone, which is staleness, not damage. */
            if (tries == FOLLOW_RETRIES)
                return SHMOBJ_ESTALE;
            p = now;
        }
    }
    case SHMOBJ__SLOT_SSTR: {
        uint8_t n = s->reserved0;
        if (n > SHMOBJ__SSTR_MAX || ((const uint8_t *)&s->payload)[n] != 0)
            return SHMOBJ_ECORRUPT;
        out->type = SHMOBJ_TYPE_STR;
        out->len = n;
        out->flags |= SHMOBJ__VIEW_RO;
        return 0;
    }
    default:
        return SHMOBJ_ECORRUPT;
    }
}

int shmobj__view_slot(struct shmobj__space *sp, uint64_t slot_off, uint64_t blk,
                      uint64_t blen, uint16_t bgen, int ro, shmobj_view *out)
{
    return view_slot(sp, slot_off, blk, blen, bgen, ro, out);
}

int shmobj_obj_get(shmobj_segment *seg, shmobj_ref ref, shmobj_view *view)
{
    struct shmobj__space *sp = (struct shmobj__space *)seg;
    uint64_t blk, blen;
    if (sp == NULL || view == NULL || ref == SHMOBJ_REF_NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__tree_open(sp, ref, 1, &blk, &blen);
    if (rc != 0)
        return rc;
    return view_slot(sp, blk + sizeof(struct shmobj__tree), blk, blen,
                     shmobj__ref_gen(ref), 0, view);
}

int shmobj_view_type(const shmobj_view *view)
{
    return view == NULL ? 0 : view->type;
}

int shmobj_view_len(const shmobj_view *view, size_t *len)
{
    if (view == NULL || len == NULL)
        return SHMOBJ_EINVAL;
    size_t n;
    switch (view->type) {
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES:
    case SHMOBJ_TYPE_BUFFER:
        n = (size_t)view->len;
        break;
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_TUPLE:
    case SHMOBJ_TYPE_DICT:
    case SHMOBJ_TYPE_SET:
    case SHMOBJ_TYPE_STRUCT:
        n = view->count;
        break;
    default:
        return SHMOBJ_ETYPE;
    }
    /* A short string key lives in its slot; everything else in its object. */
    if (!(view->obj != NULL ? obj_live(view) : slot_live(view)))
        return SHMOBJ_ESTALE;
    *len = n;
    return 0;
}

int shmobj_view_item(const shmobj_view *view, size_t i, shmobj_view *item)
{
    if (view == NULL || item == NULL)
        return SHMOBJ_EINVAL;
    int ro = 0;
    switch (view->type) {
    case SHMOBJ_TYPE_TUPLE:
    case SHMOBJ_TYPE_SET:
        ro = 1;
        break;
    case SHMOBJ_TYPE_LIST:
    case SHMOBJ_TYPE_DICT:
    case SHMOBJ_TYPE_STRUCT:
        break;
    default:
        return SHMOBJ_ETYPE;
    }
    if (i >= view->count)
        return SHMOBJ_ERANGE;
    if (!obj_live(view))
        return SHMOBJ_ESTALE;
    struct shmobj__space *sp = space_of(view);
    /* body_size() checked that the body fits in the block. */
    uint64_t slot = off_of(sp, view->obj) + shmobj__value_rel(view->type, view->len, i);
    return view_slot(sp, slot, view->obj_blk, view->obj_blen, view->obj_gen, ro, item);
}

/* Offset of key slot 0, the distance between key slots, and the offset of
 * the index of a keyed object; SHMOBJ_ETYPE when it has none. */
static inline int keyed_layout(const shmobj_view *v, uint64_t *keys, uint64_t *stride,
                               uint64_t *index)
{
    uint64_t o = off_of(space_of(v), v->obj) + 16, n = v->count;
    switch (v->type) {
    case SHMOBJ_TYPE_DICT:
        *index = o;
        *keys = o + 8 * v->len;
        *stride = 32;
        return 0;
    case SHMOBJ_TYPE_SET:
        *keys = o;
        break;
    case SHMOBJ_TYPE_STRUCT:
        if (!(v->flags & SHMOBJ__VIEW_NAMES))
            return SHMOBJ_ETYPE;
        *keys = o + 16 * n;
        break;
    default:
        return SHMOBJ_ETYPE;
    }
    *stride = 16;
    *index = *keys + 16 * n;
    return 0;
}

int shmobj_view_key(const shmobj_view *view, size_t i, shmobj_view *key)
{
    uint64_t keys, stride, index;
    if (view == NULL || key == NULL)
        return SHMOBJ_EINVAL;
    int rc = keyed_layout(view, &keys, &stride, &index);
    if (rc != 0)
        return rc;
    if (i >= view->count)
        return SHMOBJ_ERANGE;
    if (!obj_live(view))
        return SHMOBJ_ESTALE;
    return shmobj__view_slot(space_of(view), keys + stride * (uint64_t)i,
                             view->obj_blk, view->obj_blen, view->obj_gen, 1,
                             key);
}

/* Does key slot `ks` (in the view's block) equal the key described by
 * (type, i, p, n)? 1 yes, 0 no, SHMOBJ_ECORRUPT when the slot is bad. */
static inline int key_equal(const shmobj_view *v, const struct shmobj__slot *ks,
                     unsigned type, int64_t i, const void *p, uint64_t n)
{
    struct shmobj__space *sp = space_of(v);
    uint64_t pl = atomic_load_explicit(&((struct shmobj__slot *)ks)->payload,
                                       memory_order_relaxed);
    /* the tag once: every branch below judges the same value */
    uint8_t kt = ks->tag;
    if (kt == SHMOBJ__SLOT_INT)
        return type == SHMOBJ_TYPE_INT && (int64_t)pl == i;
    if (kt == SHMOBJ__SLOT_SSTR) {
        uint8_t kn = ks->reserved0;
        if (kn > SHMOBJ__SSTR_MAX)
            return SHMOBJ_ECORRUPT;
        return type == SHMOBJ_TYPE_STR && kn == n &&
               shmobj__mem_equal((const uint8_t *)&pl, p, n);
    }
    if (kt != SHMOBJ__SLOT_OBJ)
        return SHMOBJ_ECORRUPT;
    /* Keys are always inline: the same block, its generation. */
    uint64_t off = shmobj__ref_off(pl), rel = off - v->obj_blk;
    if (off < v->obj_blk || rel >= v->obj_blen ||
        shmobj__ref_gen(pl) != v->obj_gen || !shmobj__aligned(off, 16) ||
        v->obj_blen - rel < 16)
        return SHMOBJ_ECORRUPT;
    const struct shmobj__obj *h = (const void *)(sp->base + off);
    uint8_t tag = h->tag;
    uint64_t len = h->len;
    if (tag != SHMOBJ_TYPE_STR && tag != SHMOBJ_TYPE_BYTES)
        return SHMOBJ_ECORRUPT;
    if (tag != type || len != n)
        return 0;
    if (n > v->obj_blen - rel - 16)
        return SHMOBJ_ECORRUPT;
    return shmobj__mem_equal((const uint8_t *)(h + 1), p, n);
}

/* key_equal() out of line, for the rare key slots of other kinds met by a
 * short string lookup. */
static __attribute__((noinline)) int key_equal_slow(const shmobj_view *v,
                                                    const struct shmobj__slot *ks,
                                                    const void *p, uint64_t n)
{
    return key_equal(v, ks, SHMOBJ_TYPE_STR, 0, p, n);
}

static int key_parts(const shmobj_value *key, int64_t *i, const void **p,
                     uint64_t *n, uint64_t *hash)
{
    switch (key->type) {
    case SHMOBJ_TYPE_INT:
        *i = key->v.i;
        *p = NULL;
        *n = 0;
        *hash = shmobj__hash_int(key->v.i);
        return 0;
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES:
        *i = 0;
        *p = key->v.s.ptr;
        *n = key->v.s.len;
        if (*n == SHMOBJ_STRLEN) {
            if (*p == NULL || key->type != SHMOBJ_TYPE_STR)
                return SHMOBJ_EINVAL;
            *n = strlen(*p);
        }
        if (*p == NULL && *n != 0)
            return SHMOBJ_EINVAL;
        *hash = shmobj__hash_mem(key->type, *p, *n);
        return 0;
    default:
        return SHMOBJ_EINVAL;
    }
}

static inline __attribute__((always_inline)) int
index_find(const shmobj_view *v, unsigned type, int64_t ki, const void *kp,
           uint64_t kn, uint64_t hash, size_t *out, uint64_t *probes)
{
    uint64_t keys, stride, index;
    int rc = keyed_layout(v, &keys, &stride, &index);
    if (rc != 0)
        return rc;
    uint64_t cap = v->len, n = v->count;
    if (cap == 0)
        return SHMOBJ_ENOTFOUND;
    struct shmobj__space *sp = space_of(v);
    const uint64_t *ix = (const void *)(sp->base + index);
    const uint8_t *ks = sp->base + keys;
    uint64_t pos = hash & (cap - 1);
    uint32_t tag = (uint32_t)(hash >> 32);
    /* At most cap probes, so a damaged index cannot loop forever. */
    for (uint64_t probe = 0; probe < cap; probe++) {
        if (probes != NULL)
            ++*probes;
        uint64_t e = ix[pos];
        if (e == 0)
            return SHMOBJ_ENOTFOUND;
        uint64_t item = (e & UINT32_MAX) - 1;
        if (item >= n)
            return SHMOBJ_ECORRUPT;
        if ((uint32_t)(e >> 32) == tag) {
            rc = key_equal(v, (const void *)(ks + stride * item), type, ki, kp, kn);
            if (rc < 0)
                return rc;
            if (rc == 1) {
                *out = (size_t)item;
                return 0;
            }
        }
        pos = (pos + 1) & (cap - 1);
    }
    return SHMOBJ_ENOTFOUND;
}

/* The lookup of a short string key (at most SHMOBJ__SSTR_MAX bytes) in a
 * dict, the common case of field names: the key is packed once into the
 * word a short string key slot holds, so comparing with such a slot is a
 * compare of its tag and length and one of its bytes. Other key slots (not
 * written by this library for short strings, but possible in a foreign
 * block) take the general comparison. The same checks, in the same order,
 * and so the same results as index_find(); the layout is the dict's
 * (body_size() checked that index and pairs lie in the block when the view
 * was made). */
static inline __attribute__((always_inline)) int
dict_find_short(const shmobj_view *v, const uint8_t *kp, uint64_t kn,
                uint64_t word, uint64_t hash, size_t *out)
{
    uint64_t cap = v->len;
    if (kn > SHMOBJ__SSTR_MAX)
        __builtin_unreachable(); /* the callers' condition */
    if (cap == 0)
        return SHMOBJ_ENOTFOUND;
    const uint64_t *ix = (const uint64_t *)((const uint8_t *)v->obj + 16);
    const uint8_t *pairs = (const uint8_t *)(ix + cap);
    /* Compare the key's bytes only, as key_equal() does. */
    uint64_t mask = kn == 0 ? 0 : ~UINT64_C(0) >> (64 - 8 * kn);
    uint64_t m = cap - 1, pos = hash & m, left = cap;
    uint32_t tag = (uint32_t)(hash >> 32);
    /* At most cap probes, so a damaged index cannot loop forever. */
    do {
        uint64_t e = ix[pos];
        if (e == 0)
            return SHMOBJ_ENOTFOUND;
        uint64_t item = (e & UINT32_MAX) - 1;
        if (item >= v->count)
            return SHMOBJ_ECORRUPT;
        if ((uint32_t)(e >> 32) == tag) {
            const struct shmobj__slot *k = (const void *)(pairs + 32 * item);
            if (k->tag == SHMOBJ__SLOT_SSTR) {
                uint8_t len = k->reserved0;
                if (len > SHMOBJ__SSTR_MAX)
                    return SHMOBJ_ECORRUPT;
                uint64_t pl = atomic_load_explicit(
                    &((struct shmobj__slot *)k)->payload, memory_order_relaxed);
                if (len == kn && (pl & mask) == word) {
                    *out = (size_t)item;
                    return 0;
                }
            } else {
                int rc = key_equal_slow(v, k, kp, kn);
                if (rc < 0)
                    return rc;
                if (rc == 1) {
                    *out = (size_t)item;
                    return 0;
                }
            }
        }
        pos = (pos + 1) & m;
    } while (--left != 0);
    return SHMOBJ_ENOTFOUND;
}

/* dict_find_short() for the common case, without calls (so it keeps few
 * registers and stays cheap to inline): 1 with *out set when the probe
 * meets the key among short string keys, else 0 and the caller runs
 * dict_find_short(), which decides everything else (absent, a key slot of
 * another kind, damage). It probes in the same order and steps over the
 * same entries, so a hit here is the hit dict_find_short() would return. */
static inline __attribute__((always_inline)) int
dict_hit_short(const shmobj_view *v, uint64_t kn, uint64_t word, uint64_t hash,
               size_t *out)
{
    uint64_t cap = v->len;
    if (cap == 0)
        return 0;
    const uint64_t *ix = (const uint64_t *)((const uint8_t *)v->obj + 16);
    const uint8_t *pairs = (const uint8_t *)(ix + cap);
    uint64_t m = cap - 1, pos = hash & m;
    uint32_t tag = (uint32_t)(hash >> 32);
    for (uint64_t left = cap; left != 0; left--, pos = (pos + 1) & m) {
        uint64_t e = ix[pos], item = (e & UINT32_MAX) - 1;
        if (e == 0 || item >= v->count)
            return 0;
        if ((uint32_t)(e >> 32) != tag)
            continue;
        const struct shmobj__slot *k = (const void *)(pairs + 32 * item);
        uint8_t kn_at = k->reserved0; /* read once: checked, then compared */
        if (k->tag != SHMOBJ__SLOT_SSTR || kn_at > SHMOBJ__SSTR_MAX)
            return 0;
        /* Writers NUL-pad short keys, as word is: equal words, equal keys.
         * A slot with other padding (damage) misses here, and
         * dict_find_short() decides. */
        uint64_t pl = atomic_load_explicit(&((struct shmobj__slot *)k)->payload,
                                           memory_order_relaxed);
        if (kn_at == kn && pl == word) {
            *out = (size_t)item;
            return 1;
        }
    }
    return 0;
}

/* The lookup of a longer string key in a dict: the same probe as
 * dict_find_short(), comparing with the str objects such keys are written
 * as (the checks of key_equal(), inline). */
static inline __attribute__((always_inline)) int
dict_find_long(const shmobj_view *v, const uint8_t *kp, uint64_t kn,
               uint64_t hash, size_t *out)
{
    uint64_t cap = v->len;
    if (cap == 0)
        return SHMOBJ_ENOTFOUND;
    struct shmobj__space *sp = space_of(v);
    const uint64_t *ix = (const uint64_t *)((const uint8_t *)v->obj + 16);
    const uint8_t *pairs = (const uint8_t *)(ix + cap);
    uint64_t m = cap - 1, pos = hash & m, left = cap;
    uint64_t blk = v->obj_blk, blen = v->obj_blen;
    uint32_t tag = (uint32_t)(hash >> 32);
    do {
        uint64_t e = ix[pos];
        if (e == 0)
            return SHMOBJ_ENOTFOUND;
        uint64_t item = (e & UINT32_MAX) - 1;
        if (item >= v->count)
            return SHMOBJ_ECORRUPT;
        if ((uint32_t)(e >> 32) == tag) {
            const struct shmobj__slot *k = (const void *)(pairs + 32 * item);
            int rc;
            if (k->tag == SHMOBJ__SLOT_OBJ) {
                uint64_t pl = atomic_load_explicit(&((struct shmobj__slot *)k)->payload,
                                                   memory_order_relaxed);
                /* Keys are always inline: the same block, its generation. */
                uint64_t off = shmobj__ref_off(pl), rel = off - blk;
                if (off < blk || rel >= blen || shmobj__ref_gen(pl) != v->obj_gen ||
                    !shmobj__aligned(off, 16) || blen - rel < 16)
                    return SHMOBJ_ECORRUPT;
                const struct shmobj__obj *h = (const void *)(sp->base + off);
                uint8_t ht = h->tag;
                uint64_t len = h->len;
                if (ht != SHMOBJ_TYPE_STR && ht != SHMOBJ_TYPE_BYTES)
                    return SHMOBJ_ECORRUPT;
                if (ht != SHMOBJ_TYPE_STR || len != kn)
                    rc = 0;
                else if (kn > blen - rel - 16)
                    return SHMOBJ_ECORRUPT;
                else
                    rc = shmobj__mem_equal((const uint8_t *)(h + 1), kp, kn);
            } else {
                rc = key_equal_slow(v, k, kp, kn);
                if (rc < 0)
                    return rc;
            }
            if (rc == 1) {
                *out = (size_t)item;
                return 0;
            }
        }
        pos = (pos + 1) & m;
    } while (--left != 0);
    return SHMOBJ_ENOTFOUND;
}

int shmobj__index_find(const shmobj_view *v, unsigned type, int64_t ki,
                       const void *kp, uint64_t kn, uint64_t hash, size_t *out,
                       uint64_t *probes)
{
    return index_find(v, type, ki, kp, kn, hash, out, probes);
}

/* dict_find_short() out of line, behind dict_hit_short(). */
static __attribute__((noinline)) int dict_find_short_ool(const shmobj_view *v,
                                                         const uint8_t *kp, uint64_t kn,
                                                         uint64_t word, uint64_t hash,
                                                         size_t *out)
{
    return dict_find_short(v, kp, kn, word, hash, out);
}

/* shmobj_view_index() for every key but a short string. */
static __attribute__((noinline)) int view_index_general(const shmobj_view *view,
                                                        const shmobj_value *key,
                                                        size_t *i)
{
    int64_t ki;
    const void *kp;
    uint64_t kn, hash;
    int rc = key_parts(key, &ki, &kp, &kn, &hash);
    if (rc != 0)
        return rc;
    return index_find(view, key->type, ki, kp, kn, hash, i, NULL);
}

int shmobj_view_index(const shmobj_view *view, const shmobj_value *key, size_t *i)
{
    if (view == NULL || key == NULL || i == NULL)
        return SHMOBJ_EINVAL;
    /* Views without an object (scalars, null) are refused by the lookup. */
    if (view->obj != NULL && !obj_live(view))
        return SHMOBJ_ESTALE;
    if (view->type == SHMOBJ_TYPE_DICT && key->type == SHMOBJ_TYPE_STR &&
        key->v.s.len <= SHMOBJ__SSTR_MAX && key->v.s.ptr != NULL) {
        const uint8_t *kp = key->v.s.ptr;
        uint64_t kn = key->v.s.len, word = shmobj__pack_short(kp, kn);
        uint64_t hash = shmobj__hash_mem(SHMOBJ_TYPE_STR, kp, kn);
        if (dict_hit_short(view, kn, word, hash, i))
            return 0;
        return dict_find_short_ool(view, kp, kn, word, hash, i);
    }
    return view_index_general(view, key, i);
}

int shmobj_key_init(shmobj_key *key, const shmobj_value *value)
{
    if (key == NULL || value == NULL)
        return SHMOBJ_EINVAL;
    memset(key, 0, sizeof *key);
    int rc = key_parts(value, &key->i, &key->ptr, &key->len, &key->hash_);
    if (rc != 0)
        return rc;
    if (value->type == SHMOBJ_TYPE_STR && key->len <= SHMOBJ__SSTR_MAX)
        key->word_ = shmobj__pack_short(key->ptr, key->len);
    key->type = value->type;
    return 0;
}

/* Is this a key shmobj_key_init() prepared? (Its kind says so; the rest is
 * the caller's memory, trusted like any pointer it passes.) */
static inline int key_ready(const shmobj_key *k)
{
    return k->type == SHMOBJ_TYPE_INT ||
           ((k->type == SHMOBJ_TYPE_STR || k->type == SHMOBJ_TYPE_BYTES) &&
            (k->ptr != NULL || k->len == 0));
}

/* find_key() out of line: the full probes. */
static __attribute__((noinline)) int find_key_general(const shmobj_view *view,
                                                      const shmobj_key *k, size_t *i)
{
    if (view->type == SHMOBJ_TYPE_DICT && k->type == SHMOBJ_TYPE_STR)
        return k->len <= SHMOBJ__SSTR_MAX
                   ? dict_find_short_ool(view, k->ptr, k->len, k->word_, k->hash_, i)
                   : dict_find_long(view, k->ptr, k->len, k->hash_, i);
    return index_find(view, k->type, k->i, k->ptr, k->len, k->hash_, i, NULL);
}

/* The position of a prepared key. A short string key of a dict (a field
 * name, the common case) is found inline; everything else takes the full
 * probe, out of line. */
static inline __attribute__((always_inline)) int
find_key(const shmobj_view *view, const shmobj_key *k, size_t *i)
{
    if (view->type == SHMOBJ_TYPE_DICT && k->type == SHMOBJ_TYPE_STR &&
        k->len <= SHMOBJ__SSTR_MAX && dict_hit_short(view, k->len, k->word_, k->hash_, i))
        return 0;
    return find_key_general(view, k, i);
}

int shmobj_view_index_key(const shmobj_view *view, const shmobj_key *key, size_t *i)
{
    if (view == NULL || key == NULL || i == NULL || !key_ready(key))
        return SHMOBJ_EINVAL;
    if (view->obj != NULL && !obj_live(view))
        return SHMOBJ_ESTALE;
    return find_key(view, key, i);
}

int shmobj_view_get(const shmobj_view *view, const shmobj_value *key,
                    shmobj_view *item)
{
    size_t i;
    if (item == NULL)
        return SHMOBJ_EINVAL;
    if (view != NULL && view->type == SHMOBJ_TYPE_SET)
        return SHMOBJ_ETYPE;
    int rc = shmobj_view_index(view, key, &i);
    if (rc != 0)
        return rc;
    return shmobj_view_item(view, i, item);
}

/* The view of value i of a dict or named struct whose index gave i (the
 * lookups refuse other kinds): values are mutable, i < count, and
 * body_size() checked the body fits. */
static inline int value_view(const shmobj_view *view, size_t i, shmobj_view *item)
{
    struct shmobj__space *sp = space_of(view);
    uint64_t slot = off_of(sp, view->obj) + shmobj__value_rel(view->type, view->len, i);
    return view_slot(sp, slot, view->obj_blk, view->obj_blen, view->obj_gen, 0, item);
}

int shmobj_view_get_str(const shmobj_view *view, const char *key,
                        shmobj_view *item)
{
    size_t i;
    if (view == NULL || key == NULL || item == NULL)
        return SHMOBJ_EINVAL;
    if (view->type == SHMOBJ_TYPE_SET)
        return SHMOBJ_ETYPE;
    if (view->obj != NULL && !obj_live(view))
        return SHMOBJ_ESTALE;
    /* Keys are short: a byte loop beats a call to strlen. Four bytes per
     * round, never reading past the NUL. */
    uint64_t n = 0;
    for (;;) {
        if (key[n] == '\0')
            break;
        if (key[n + 1] == '\0') {
            n += 1;
            break;
        }
        if (key[n + 2] == '\0') {
            n += 2;
            break;
        }
        if (key[n + 3] == '\0') {
            n += 3;
            break;
        }
        n += 4;
        if (n == 32) {
            n += strlen(key + 32);
            break;
        }
    }
    int rc;
    uint64_t hash = shmobj__hash_mem(SHMOBJ_TYPE_STR, key, n);
    if (view->type != SHMOBJ_TYPE_DICT)
        rc = index_find(view, SHMOBJ_TYPE_STR, 0, key, n, hash, &i, NULL);
    else if (n <= SHMOBJ__SSTR_MAX)
        rc = dict_find_short(view, (const uint8_t *)key, n,
                             shmobj__pack_short((const uint8_t *)key, n), hash, &i);
    else
        rc = dict_find_long(view, (const uint8_t *)key, n, hash, &i);
    if (rc != 0)
        return rc;
    return value_view(view, i, item);
}

int shmobj_view_get_key(const shmobj_view *view, const shmobj_key *key,
                        shmobj_view *item)
{
    size_t i;
    if (view == NULL || key == NULL || item == NULL || !key_ready(key))
        return SHMOBJ_EINVAL;
    if (view->type == SHMOBJ_TYPE_SET)
        return SHMOBJ_ETYPE;
    if (view->obj != NULL && !obj_live(view))
        return SHMOBJ_ESTALE;
    int rc = find_key(view, key, &i);
    if (rc != 0)
        return rc;
    return value_view(view, i, item);
}

/* ---- scalars ---------------------------------------------------------- */

static inline _Atomic uint64_t *scalar(const shmobj_view *v, unsigned tag)
{
    if (v == NULL || v->slot_tag != tag || v->slot == NULL)
        return NULL;
    return &((struct shmobj__slot *)v->slot)->payload;
}

#define SCALAR_OR_FAIL(v, tag, ptr)                                          \
    _Atomic uint64_t *ptr = scalar(v, tag);                                  \
    if (ptr == NULL)                                                         \
        return (v) == NULL ? SHMOBJ_EINVAL : SHMOBJ_ETYPE
#define WRITABLE_OR_FAIL(v)                                                  \
    if ((v)->flags & SHMOBJ__VIEW_RO)                                        \
        return SHMOBJ_EACCES
/* Before a write: the slot's block must still be the view's. */
#define LIVE_OR_FAIL(v)                                                      \
    if (!slot_live(v))                                                       \
        return SHMOBJ_ESTALE
/* After a read: the value loaded is returned only if the block was not
 * freed before the load (the acquire load of the value orders the check
 * after it). */
#define LOADED_OR_FAIL(v)                                                    \
    if (!slot_live(v))                                                       \
        return SHMOBJ_ESTALE

int shmobj_bool_get(const shmobj_view *view, int *out)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_BOOL, p);
    if (out == NULL)
        return SHMOBJ_EINVAL;
    uint64_t x = atomic_load_explicit(p, memory_order_acquire);
    LOADED_OR_FAIL(view);
    *out = x != 0;
    return 0;
}

int shmobj_bool_set(const shmobj_view *view, int x)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_BOOL, p);
    WRITABLE_OR_FAIL(view);
    LIVE_OR_FAIL(view);
    atomic_store_explicit(p, x != 0, memory_order_release);
    return 0;
}

int shmobj_int_get(const shmobj_view *view, int64_t *out)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_INT, p);
    if (out == NULL)
        return SHMOBJ_EINVAL;
    uint64_t x = atomic_load_explicit(p, memory_order_acquire);
    LOADED_OR_FAIL(view);
    *out = (int64_t)x;
    return 0;
}

int shmobj_int_set(const shmobj_view *view, int64_t x)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_INT, p);
    WRITABLE_OR_FAIL(view);
    LIVE_OR_FAIL(view);
    atomic_store_explicit(p, (uint64_t)x, memory_order_release);
    return 0;
}

int shmobj_int_add(const shmobj_view *view, int64_t delta, int64_t *old)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_INT, p);
    WRITABLE_OR_FAIL(view);
    LIVE_OR_FAIL(view);
    /* Unsigned arithmetic: wraps instead of signed-overflow UB. */
    uint64_t o = atomic_fetch_add_explicit(p, (uint64_t)delta, memory_order_acq_rel);
    if (old != NULL)
        *old = (int64_t)o;
    return 0;
}

/* The int slot of item i of a mutable container, or an error. Shares the
 * checks of shmobj_view_item() without filling a view. */
static inline int item_int_slot(const shmobj_view *v, size_t i, _Atomic uint64_t **out,
                                int write)
{
    /* the containers with value slots, as one bit test (this runs once
     * per counter increment) */
    const uint32_t with_items = 1u << SHMOBJ_TYPE_LIST | 1u << SHMOBJ_TYPE_TUPLE |
                                1u << SHMOBJ_TYPE_DICT | 1u << SHMOBJ_TYPE_STRUCT;
    if (v == NULL)
        return SHMOBJ_EINVAL;
    /* the view's fields once, before the header load (which the compiler
     * does not move other loads across) */
    unsigned type = v->type;
    if (type >= 32 || !(with_items >> type & 1u))
        return SHMOBJ_ETYPE;
    if (write && type == SHMOBJ_TYPE_TUPLE)
        return SHMOBJ_EACCES;
    if (i >= v->count)
        return SHMOBJ_ERANGE;
    struct shmobj__slot *s =
        (void *)((uint8_t *)v->obj + shmobj__value_rel(type, v->len, i));
    if (!obj_live(v))
        return SHMOBJ_ESTALE;
    uint8_t tag = s->tag;
    if (tag != SHMOBJ__SLOT_INT)
        return tag == SHMOBJ__SLOT_OBJ || tag == SHMOBJ__SLOT_BOOL ||
                       tag == SHMOBJ__SLOT_UINT || tag == SHMOBJ__SLOT_DOUBLE
                   ? SHMOBJ_ETYPE
                   : SHMOBJ_ECORRUPT;
    *out = &s->payload;
    return 0;
}

/* The hot call of counter workloads: on a cache line of its own, so its
 * speed does not depend on where the linker put it. */
__attribute__((aligned(64))) int
shmobj_item_int_add(const shmobj_view *view, size_t i, int64_t delta, int64_t *old)
{
    _Atomic uint64_t *p;
    int rc = item_int_slot(view, i, &p, 1);
    if (rc != 0)
        return rc;
    uint64_t o = atomic_fetch_add_explicit(p, (uint64_t)delta, memory_order_acq_rel);
    if (old != NULL)
        *old = (int64_t)o;
    return 0;
}

int shmobj_view_key_int_add(const shmobj_view *view, const shmobj_key *key,
                            int64_t delta, int64_t *old)
{
    size_t i;
    _Atomic uint64_t *p;
    if (view == NULL || key == NULL || !key_ready(key))
        return SHMOBJ_EINVAL;
    if (view->type != SHMOBJ_TYPE_DICT && view->type != SHMOBJ_TYPE_STRUCT)
        return SHMOBJ_ETYPE;
    if (!obj_live(view))
        return SHMOBJ_ESTALE;
    p = NULL;
    if (view->type == SHMOBJ_TYPE_DICT && key->type == SHMOBJ_TYPE_STR &&
        key->len <= SHMOBJ__SSTR_MAX &&
        dict_hit_short(view, key->len, key->word_, key->hash_, &i)) {
        /* find_key()'s inline half, kept apart so that a hit goes to its
         * value slot with no further checks (11% fewer instructions per
         * increment): the slot lies in the body body_size() checked when
         * the view was made. */
        struct shmobj__slot *s =
            (void *)((uint8_t *)view->obj + shmobj__value_rel(SHMOBJ_TYPE_DICT, view->len, i));
        if (s->tag == SHMOBJ__SLOT_INT)
            p = &s->payload;
    }
    if (p == NULL) {
        int rc = find_key_general(view, key, &i);
        if (rc == 0)
            rc = item_int_slot(view, i, &p, 1);
        if (rc != 0)
            return rc;
    }
    uint64_t o = atomic_fetch_add_explicit(p, (uint64_t)delta, memory_order_acq_rel);
    if (old != NULL)
        *old = (int64_t)o;
    return 0;
}

int shmobj_item_int_get(const shmobj_view *view, size_t i, int64_t *out)
{
    _Atomic uint64_t *p;
    if (out == NULL)
        return SHMOBJ_EINVAL;
    int rc = item_int_slot(view, i, &p, 0);
    if (rc != 0)
        return rc;
    uint64_t x = atomic_load_explicit(p, memory_order_acquire);
    if (!obj_live(view))
        return SHMOBJ_ESTALE;
    *out = (int64_t)x;
    return 0;
}

int shmobj_int_cas(const shmobj_view *view, int64_t *expected, int64_t desired)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_INT, p);
    WRITABLE_OR_FAIL(view);
    if (expected == NULL)
        return SHMOBJ_EINVAL;
    LIVE_OR_FAIL(view);
    uint64_t e = (uint64_t)*expected;
    if (atomic_compare_exchange_strong_explicit(p, &e, (uint64_t)desired,
                                                memory_order_acq_rel,
                                                memory_order_acquire))
        return 0;
    *expected = (int64_t)e;
    return SHMOBJ_EBUSY;
}

int shmobj_uint_get(const shmobj_view *view, uint64_t *out)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_UINT, p);
    if (out == NULL)
        return SHMOBJ_EINVAL;
    uint64_t x = atomic_load_explicit(p, memory_order_acquire);
    LOADED_OR_FAIL(view);
    *out = x;
    return 0;
}

int shmobj_uint_set(const shmobj_view *view, uint64_t x)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_UINT, p);
    WRITABLE_OR_FAIL(view);
    LIVE_OR_FAIL(view);
    atomic_store_explicit(p, x, memory_order_release);
    return 0;
}

int shmobj_uint_add(const shmobj_view *view, uint64_t delta, uint64_t *old)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_UINT, p);
    WRITABLE_OR_FAIL(view);
    LIVE_OR_FAIL(view);
    uint64_t o = atomic_fetch_add_explicit(p, delta, memory_order_acq_rel);
    if (old != NULL)
        *old = o;
    return 0;
}

int shmobj_uint_cas(const shmobj_view *view, uint64_t *expected, uint64_t desired)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_UINT, p);
    WRITABLE_OR_FAIL(view);
    if (expected == NULL)
        return SHMOBJ_EINVAL;
    LIVE_OR_FAIL(view);
    if (atomic_compare_exchange_strong_explicit(p, expected, desired,
                                                memory_order_acq_rel,
                                                memory_order_acquire))
        return 0;
    return SHMOBJ_EBUSY;
}

static inline uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static inline double bitsd(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

int shmobj_double_get(const shmobj_view *view, double *out)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_DOUBLE, p);
    if (out == NULL)
        return SHMOBJ_EINVAL;
    uint64_t x = atomic_load_explicit(p, memory_order_acquire);
    LOADED_OR_FAIL(view);
    *out = bitsd(x);
    return 0;
}

int shmobj_double_set(const shmobj_view *view, double x)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_DOUBLE, p);
    WRITABLE_OR_FAIL(view);
    LIVE_OR_FAIL(view);
    atomic_store_explicit(p, dbits(x), memory_order_release);
    return 0;
}

int shmobj_double_add(const shmobj_view *view, double delta, double *old)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_DOUBLE, p);
    WRITABLE_OR_FAIL(view);
    LIVE_OR_FAIL(view);
    uint64_t o = atomic_load_explicit(p, memory_order_relaxed);
    /* A CAS loop: the failed CAS reloads o, so every retry adds to the
     * value another process just stored and no add is lost. */
    while (!atomic_compare_exchange_weak_explicit(p, &o, dbits(bitsd(o) + delta),
                                                  memory_order_acq_rel,
                                                  memory_order_relaxed))
        ;
    if (old != NULL)
        *old = bitsd(o);
    return 0;
}

int shmobj_str_get(const shmobj_view *view, const char **s, size_t *len)
{
    if (view == NULL || s == NULL)
        return SHMOBJ_EINVAL;
    if (view->type != SHMOBJ_TYPE_STR)
        return SHMOBJ_ETYPE;
    if (view->slot_tag == SHMOBJ__SLOT_SSTR) {
        if (!slot_live(view))
            return SHMOBJ_ESTALE;
        *s = (const char *)&((struct shmobj__slot *)view->slot)->payload;
    } else {
        if (!obj_live(view))
            return SHMOBJ_ESTALE;
        *s = (const char *)view->obj + 16;
    }
    if (len != NULL)
        *len = (size_t)view->len;
    return 0;
}

int shmobj_bytes_get(const shmobj_view *view, const void **p, size_t *len)
{
    if (view == NULL || p == NULL)
        return SHMOBJ_EINVAL;
    if (view->type != SHMOBJ_TYPE_BYTES)
        return SHMOBJ_ETYPE;
    if (!obj_live(view))
        return SHMOBJ_ESTALE;
    *p = (const uint8_t *)view->obj + 16;
    if (len != NULL)
        *len = (size_t)view->len;
    return 0;
}

size_t shmobj_dtype_size(unsigned dtype)
{
    return shmobj__dtype_size(dtype);
}

const char *shmobj_dtype_name(unsigned dtype)
{
    static const char *const names[] = {
        "?", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
        "f32", "f64", "bool",
    };
    return dtype < sizeof names / sizeof names[0] ? names[dtype] : "?";
}

/* Check that every element a shape and strides reach lies in nbytes. */
int shmobj__buffer_extent_ok(unsigned ndim, const uint64_t *shape,
                             const int64_t *strides, uint64_t itemsize,
                             uint64_t nbytes)
{
    uint64_t last = 0, t;
    for (unsigned d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            return 1; /* no element at all */
    }
    for (unsigned d = 0; d < ndim; d++) {
        if (strides[d] < 0 ||
            !shmobj__mul_ok(shape[d] - 1, (uint64_t)strides[d], &t) ||
            !shmobj__add_ok(last, t, &last))
            return 0;
    }
    return shmobj__add_ok(last, itemsize, &t) && t <= nbytes;
}

int shmobj_buffer_get(const shmobj_view *view, shmobj_buffer_info *info)
{
    if (view == NULL || info == NULL || info->struct_size < sizeof *info)
        return SHMOBJ_EINVAL;
    if (view->type != SHMOBJ_TYPE_BUFFER)
        return SHMOBJ_ETYPE;
    if (!obj_live(view))
        return SHMOBJ_ESTALE;
    const uint8_t *o = view->obj;
    const struct shmobj__bufhdr *bh = (const void *)(o + 16);
    const uint64_t *shape = (const void *)(bh + 1);
    const int64_t *strides = (const void *)(shape + view->ndim);
    unsigned nd = view->ndim;
    uint64_t dr = bh->data_rel;
    /* data_rel was checked when the view was made; reread and recheck it
     * here against the same extent, and take shape/strides once. */
    uint64_t rel = (uint64_t)(o - space_of(view)->base) - view->obj_blk;
    if (dr > view->obj_blen - rel || view->len > view->obj_blen - rel - dr)
        return SHMOBJ_ECORRUPT;
    info->dtype = view->dtype;
    info->ndim = nd;
    info->itemsize = (uint32_t)shmobj__dtype_size(view->dtype);
    info->nbytes = view->len;
    info->data = (void *)(o + dr);
    memset(info->shape, 0, sizeof info->shape);
    memset(info->strides, 0, sizeof info->strides);
    memcpy(info->shape, shape, 8u * nd);
    memcpy(info->strides, strides, 8u * nd);
    if (!shmobj__buffer_extent_ok(nd, info->shape, info->strides,
                                  info->itemsize, info->nbytes))
        return SHMOBJ_ECORRUPT;
    return 0;
}
