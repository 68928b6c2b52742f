/* Index lookups: the position of a key in a dict, set or named struct, and
 * the views of the values found.
 *
 * Invariants kept here:
 * - Every lookup ends in shmobj__lookup() (key-lookup.h) over the one probe
 *   of index-probe.h: the public calls differ only in how the key arrives (a
 *   value, a C string, a key prepared once) and in which comparison runs
 *   inline, never in where they look or what they accept.
 * - A key is described by shmobj__desc_key() and prepared by
 *   shmobj__key_prepare() (layer-interface.h), the builder's own description of its
 *   keys, so a key is hashed and compared the way it was written.
 * - A lookup reads through a view only after checking that the view's
 *   object block is still the one it was made from (SHMOBJ_ESTALE
 *   otherwise); the index and the key slots lie in the body
 *   shmobj__body_size() checked when the view was made. */
#include <string.h>

#include "key-lookup.h"
#include "mutable.h"

int shmobj__key_equal(const shmobj_view *v, const struct shmobj__slot *ks,
                      const shmobj_key *k)
{
    return shmobj__key_equal_inline(v, ks, k);
}

/* The short string lookup of a dict, out of line behind
 * shmobj__dict_hit_short(). */
static __attribute__((noinline)) int dict_find_short(const shmobj_view *v,
                                                     const shmobj_key *k, size_t *out)
{
    return shmobj__dict_lookup(v, k, SHMOBJ__LOOKUP_SHORT, out);
}

int shmobj__index_find(const shmobj_view *v, const shmobj_key *k, size_t *out,
                       uint64_t *probes)
{
    uint64_t keys, stride, index;
    struct shmobj__space *sp = shmobj__space_of(v);
    shmobj_view sv;
    if (v->type == SHMOBJ_TYPE_RECORD) {
        /* A record's names are found in its shape's index (the shape
         * cannot be freed while the record uses it; a damaged record's
         * shape is checked live all the same). */
        shmobj__record_shape_view(v, &sv);
        if (!shmobj__obj_live(&sv))
            return SHMOBJ_ESTALE;
        v = &sv;
    }
    int rc = shmobj__keyed_layout(v, &keys, &stride, &index);
    if (rc != 0)
        return rc;
    const uint64_t *ix = (const void *)(sp->base + index);
    const uint8_t *ks = sp->base + keys;
    /* a dict's keys, or a record's field names in its shape */
    if ((v->type == SHMOBJ_TYPE_DICT || v->type == SHMOBJ_TYPE_SHAPE) &&
        k->type == SHMOBJ_TYPE_STR) {
        if (k->len <= SHMOBJ__SSTR_MAX)
            return shmobj__lookup(v, ix, ks, stride, k, SHMOBJ__LOOKUP_SHORT, out, probes);
        if (k->len <= SHMOBJ__MSTR_MAX)
            return shmobj__lookup(v, ix, ks, stride, k, SHMOBJ__LOOKUP_MEDIUM, out, probes);
        return shmobj__lookup(v, ix, ks, stride, k, SHMOBJ__LOOKUP_LONG, out, probes);
    }
    return shmobj__lookup(v, ix, ks, stride, k, SHMOBJ__LOOKUP_ANY, out, probes);
}

/* shmobj_view_index() for every key but a short string of a dict. */
static __attribute__((noinline)) int view_index_general(const shmobj_view *view,
                                                        const shmobj_value *key,
                                                        size_t *i)
{
    shmobj_key k;
    int rc = shmobj__desc_key(key, &k);
    if (rc != 0)
        return rc;
    shmobj__key_prepare(&k);
    return shmobj__index_find(view, &k, i, NULL);
}

int shmobj_view_index(const shmobj_view *view, const shmobj_value *key, size_t *i)
{
    if (view == NULL || key == NULL || i == NULL)
        return SHMOBJ_EINVAL;
    /* Views without an object (scalars, null) are refused by the lookup. */
    if (view->obj != NULL && !shmobj__obj_live(view))
        return SHMOBJ_ESTALE;
    if (view->type == SHMOBJ_TYPE_DICT && key->type == SHMOBJ_TYPE_STR &&
        key->v.s.len <= SHMOBJ__SSTR_MAX && key->v.s.ptr != NULL) {
        /* shmobj__key_prepare() by hand: the kind is known */
        shmobj_key k = {.type = SHMOBJ_TYPE_STR, .ptr = key->v.s.ptr, .len = key->v.s.len};
        k.word_ = shmobj__pack_short(k.ptr, k.len);
        k.hash_ = shmobj__hash_mem(SHMOBJ_TYPE_STR, k.ptr, k.len);
        if (shmobj__dict_hit_short(view, k.len, k.word_, k.hash_, i))
            return 0;
        return dict_find_short(view, &k, i);
    }
    return view_index_general(view, key, i);
}

int shmobj_key_init(shmobj_key *key, const shmobj_value *value)
{
    if (key == NULL || value == NULL)
        return SHMOBJ_EINVAL;
    memset(key, 0, sizeof *key);
    int rc = shmobj__desc_key(value, key);
    if (rc != 0) {
        key->type = 0; /* not prepared: refused by every lookup */
        return rc;
    }
    shmobj__key_prepare(key);
    return 0;
}

/* shmobj__record_find() out of line, for the calls whose dict paths must
 * stay small (inlined, it would push the value's view out of line). */
static __attribute__((noinline)) int record_find(const shmobj_view *view,
                                                 const shmobj_key *k, size_t *i)
{
    return shmobj__record_find(view, k, i);
}

/* The position of a prepared key. A short string key of a dict (a field
 * name, the common case) is found inline; everything else takes the full
 * lookup, out of line. */
static inline __attribute__((always_inline)) int
find_key(const shmobj_view *view, const shmobj_key *k, size_t *i)
{
    if (view->type == SHMOBJ_TYPE_RECORD) {
        if (k->type == SHMOBJ_TYPE_STR &&
            shmobj__blk_live(shmobj__space_of(view), shmobj__ref_off(view->len),
                             shmobj__ref_gen(view->len)) &&
            shmobj__record_hit(view, k, i) != NULL)
            return 0;
        return shmobj__record_find(view, k, i);
    }
    if (view->type == SHMOBJ_TYPE_DICT && k->type == SHMOBJ_TYPE_STR) {
        if (k->len <= SHMOBJ__SSTR_MAX) {
            if (shmobj__dict_hit_short(view, k->len, k->word_, k->hash_, i))
                return 0;
        } else if (k->len <= SHMOBJ__MSTR_MAX && shmobj__dict_hit_medium(view, k, i)) {
            return 0;
        }
    }
    return shmobj__index_find(view, k, i, NULL);
}

int shmobj_view_index_key(const shmobj_view *view, const shmobj_key *key, size_t *i)
{
    if (view == NULL || key == NULL || i == NULL || !shmobj__key_ready(key))
        return SHMOBJ_EINVAL;
    if (view->obj != NULL && !shmobj__obj_live(view))
        return SHMOBJ_ESTALE;
    return find_key(view, key, i);
}

int shmobj_view_get(const shmobj_view *view, const shmobj_value *key,
                    shmobj_view *item)
{
    size_t i;
    if (item == NULL)
        return SHMOBJ_EINVAL;
    if (view != NULL && (view->type == SHMOBJ_TYPE_SET || view->type == SHMOBJ_TYPE_MSET))
        return SHMOBJ_ETYPE;
    if (view != NULL && view->type == SHMOBJ_TYPE_MDICT)
        return shmobj_mdict_get(view, key, item);
    int rc = shmobj_view_index(view, key, &i);
    if (rc != 0)
        return rc;
    return shmobj_view_item(view, i, item);
}

/* The view of value i of a dict or named struct whose index gave i (the
 * lookups refuse other kinds): values are mutable, i < count, and
 * shmobj__body_size() checked the body fits. */
static inline __attribute__((always_inline)) int
value_view(const shmobj_view *view, size_t i, shmobj_view *item)
{
    struct shmobj__space *sp = shmobj__space_of(view);
    uint64_t slot = shmobj__off_of(sp, view->obj) +
                    shmobj__value_rel(view->type, view->len, i);
    return shmobj__view_slot_inline(sp, slot, view->obj_blk, view->obj_blen,
                                    view->obj_gen, 0, item);
}

/* The mutable kinds, out of line: the fixed dicts' path stays as it was. */
static __attribute__((noinline, cold)) int get_str_mut(const shmobj_view *view,
                                                       const char *key, shmobj_view *item)
{
    if (view->type != SHMOBJ_TYPE_MDICT)
        return SHMOBJ_ETYPE;
    shmobj_value kv = SHMOBJ_VAL_STR(key);
    return shmobj_mdict_get(view, &kv, item);
}

int shmobj_view_get_str(const shmobj_view *view, const char *key,
                        shmobj_view *item)
{
    return shmobj_field_get(view, key, item);
}

/* shmobj_field_get() past its hit path: the key of n bytes (hash h)
 * prepared in memory for the full lookups, which decide everything the
 * hit path left (another kind of view, a long key, a miss, damage). */
static __attribute__((noinline)) int field_get_full(const shmobj_view *view, const char *key,
                                                    uint64_t n, uint64_t h,
                                                    shmobj_view *item)
{
    size_t i;
    int rc;
    /* shmobj__key_prepare() by hand: the kind is known */
    shmobj_key k = {.type = SHMOBJ_TYPE_STR, .ptr = key, .len = n};
    k.hash_ = h;
    /* shmobj__key_word() without shmobj__mstr_fits()'s test of the last
     * byte: a C string's bytes before its NUL are never NUL */
    k.word_ = n <= SHMOBJ__SSTR_MAX   ? shmobj__pack_short((const uint8_t *)key, n)
              : n <= SHMOBJ__MSTR_MAX ? shmobj__mstr_w1((const uint8_t *)key, n)
                                      : 0;
    if (view->type == SHMOBJ_TYPE_RECORD)
        rc = record_find(view, &k, &i);
    else if (view->type != SHMOBJ_TYPE_DICT)
        rc = shmobj__index_find(view, &k, &i, NULL);
    else if (n > SHMOBJ__MSTR_MAX)
        rc = shmobj__dict_lookup(view, &k, SHMOBJ__LOOKUP_LONG, &i);
    else if (n > SHMOBJ__SSTR_MAX)
        rc = shmobj__dict_lookup(view, &k, SHMOBJ__LOOKUP_MEDIUM, &i);
    else
        rc = dict_find_short(view, &k, &i);
    if (rc != 0)
        return rc;
    return value_view(view, i, item);
}

int shmobj_field_get(const shmobj_view *view, const char *key,
                     shmobj_view *item)
{
    size_t i;
    if (view == NULL || key == NULL || item == NULL)
        return SHMOBJ_EINVAL;
    if (view->type == SHMOBJ_TYPE_SET)
        return SHMOBJ_ETYPE;
    if ((unsigned)view->type - SHMOBJ_TYPE_MLIST <= SHMOBJ_TYPE_MSET - SHMOBJ_TYPE_MLIST)
        return get_str_mut(view, key, item);
    if (view->obj != NULL && !shmobj__obj_live(view))
        return SHMOBJ_ESTALE;
    /* The C library's strlen reads a vector per step: for the names of
     * records (4 to 15 bytes) fewer instructions than a byte loop. */
    uint64_t n = strlen(key);
    uint64_t h = shmobj__hash_mem(SHMOBJ_TYPE_STR, key, n);
    /* A dict's key found among key slots of its own kind: the key stays
     * in registers (a C string's bytes before its NUL are never NUL, so
     * its medium words need no test of the last byte). */
    if (view->type == SHMOBJ_TYPE_DICT) {
        const uint8_t *s = (const uint8_t *)key;
        const struct shmobj__slot *hit;
        if (n <= SHMOBJ__SSTR_MAX) {
            hit = shmobj__dict_hit_short(view, n, shmobj__pack_short(s, n), h, &i);
        } else if (n <= SHMOBJ__MSTR_MAX) {
            hit = shmobj__dict_hit_mwords(view, shmobj__mstr_w0(s), shmobj__mstr_w1(s, n), h,
                                          &i);
        } else {
            const shmobj_key k = {.type = SHMOBJ_TYPE_STR, .ptr = key, .len = n, .hash_ = h};
            hit = shmobj__dict_hit_long(view, &k, &i);
        }
        if (hit != NULL)
            return value_view(view, i, item);
    }
    return field_get_full(view, key, n, h, item);
}

int shmobj_view_get_key(const shmobj_view *view, const shmobj_key *key,
                        shmobj_view *item)
{
    size_t i;
    if (view == NULL || key == NULL || item == NULL || !shmobj__key_ready(key))
        return SHMOBJ_EINVAL;
    if (view->type == SHMOBJ_TYPE_SET || view->type == SHMOBJ_TYPE_MSET)
        return SHMOBJ_ETYPE;
    if (view->type == SHMOBJ_TYPE_MDICT)
        return shmobj__mdict_lookup(view, key, item);
    if (view->obj != NULL && !shmobj__obj_live(view))
        return SHMOBJ_ESTALE;
    int rc = find_key(view, key, &i);
    if (rc != 0)
        return rc;
    return value_view(view, i, item);
}
