/* Scalars: atomic reads and updates of bool, int, uint and double slots
 * in place, and the counter calls that find an int item and add to it in
 * one call.
 *
 * Invariants kept here:
 * - Slot tags never change, so a scalar view may read or update its slot
 *   at any time with one atomic operation: loads acquire, stores release,
 *   fetch-add and compare-and-swap acq_rel (a double's add is a CAS loop
 *   that never loses another process's add).
 * - Before a write the slot's block is checked to still be the view's
 *   (SHMOBJ_ESTALE otherwise). A read compares after loading the value
 *   instead, so the value returned was loaded before any free of its block
 *   became visible.
 * - Every accessor of a kind is generated from one table row (SCALARS
 *   below), so the kinds cannot drift apart in their checks, their order
 *   or their error codes: NULL view EINVAL, another kind ETYPE, read-only
 *   EACCES, NULL out-parameter EINVAL, freed block ESTALE. */
#include <string.h>

#include "key-lookup.h"

/* ---- one scalar slot through its view ---------------------------------- */

static inline _Atomic uint64_t *scalar(const shmobj_view *v, unsigned tag)
{
    if (v == NULL || v->slot_tag != tag || v->slot == NULL)
        return NULL;
    return &((struct shmobj__slot *)v->slot)->payload;
}

/* A kind's conversions between the C value and the payload's bits. */
static inline uint64_t bool_bits(int x) { return x != 0; }
static inline int bits_bool(uint64_t u) { return u != 0; }
static inline uint64_t int_bits(int64_t x) { return (uint64_t)x; }
static inline int64_t bits_int(uint64_t u) { return (int64_t)u; }
static inline uint64_t uint_bits(uint64_t x) { return x; }
static inline uint64_t bits_uint(uint64_t u) { return u; }

static inline uint64_t double_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static inline double bits_double(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* The checks every accessor opens with, in this order. */
#define SCALAR_OR_FAIL(v, tag, ptr)                                          \
    _Atomic uint64_t *ptr = scalar(v, tag);                                  \
    if (ptr == NULL)                                                         \
        return (v) == NULL ? SHMOBJ_EINVAL : SHMOBJ_ETYPE
#define WRITABLE_OR_FAIL(v)                                                  \
    if ((v)->flags & SHMOBJ__VIEW_RO)                                        \
        return SHMOBJ_EACCES;                                                \
    if (shmobj__view_writable(v) != 0)                                       \
        return SHMOBJ_ERDONLY
/* Before a write: the slot's block must still be the view's. After a read:
 * the value loaded is returned only if the block was not freed before the
 * load (the acquire load of the value orders the check after it). */
#define LIVE_OR_FAIL(v)                                                      \
    if (!shmobj__slot_live(v) ||                                             \
        ((v)->flags & SHMOBJ__VIEW_MUT &&                                    \
         ((struct shmobj__slot *)(v)->slot)->tag != (v)->slot_tag))          \
        return SHMOBJ_ESTALE

/* shmobj_<kind>_get and shmobj_<kind>_set. */
#define SCALAR_GET_SET(kind, TAG, ctype)                                     \
    int shmobj_##kind##_get(const shmobj_view *view, ctype *out)             \
    {                                                                        \
        SCALAR_OR_FAIL(view, TAG, p);                                        \
        if (out == NULL)                                                     \
            return SHMOBJ_EINVAL;                                            \
        uint64_t x = atomic_load_explicit(p, memory_order_acquire);          \
        LIVE_OR_FAIL(view);                                                  \
        *out = bits_##kind(x);                                               \
        return 0;                                                            \
    }                                                                        \
    int shmobj_##kind##_set(const shmobj_view *view, ctype x)                \
    {                                                                        \
        SCALAR_OR_FAIL(view, TAG, p);                                        \
        WRITABLE_OR_FAIL(view);                                              \
        LIVE_OR_FAIL(view);                                                  \
        atomic_store_explicit(p, kind##_bits(x), memory_order_release);      \
        return 0;                                                            \
    }

/* shmobj_<kind>_add (a fetch-add: unsigned arithmetic wraps instead of
 * signed-overflow UB) and shmobj_<kind>_cas, for the integer kinds. */
#define SCALAR_ADD_CAS(kind, TAG, ctype)                                     \
    int shmobj_##kind##_add(const shmobj_view *view, ctype delta, ctype *old) \
    {                                                                        \
        SCALAR_OR_FAIL(view, TAG, p);                                        \
        WRITABLE_OR_FAIL(view);                                              \
        LIVE_OR_FAIL(view);                                                  \
        uint64_t o = atomic_fetch_add_explicit(p, kind##_bits(delta),        \
                                               memory_order_acq_rel);        \
        if (old != NULL)                                                     \
            *old = bits_##kind(o);                                           \
        return 0;                                                            \
    }                                                                        \
    int shmobj_##kind##_cas(const shmobj_view *view, ctype *expected,        \
                            ctype desired)                                   \
    {                                                                        \
        SCALAR_OR_FAIL(view, TAG, p);                                        \
        WRITABLE_OR_FAIL(view);                                              \
        if (expected == NULL)                                                \
            return SHMOBJ_EINVAL;                                            \
        LIVE_OR_FAIL(view);                                                  \
        uint64_t e = kind##_bits(*expected);                                 \
        if (atomic_compare_exchange_strong_explicit(p, &e, kind##_bits(desired), \
                                                    memory_order_acq_rel,    \
                                                    memory_order_acquire))   \
            return 0;                                                        \
        *expected = bits_##kind(e);                                          \
        return SHMOBJ_EBUSY;                                                 \
    }

/* The table: every kind gets get and set; the integers add and cas. */
SCALAR_GET_SET(bool, SHMOBJ__SLOT_BOOL, int)
SCALAR_GET_SET(int, SHMOBJ__SLOT_INT, int64_t)
SCALAR_GET_SET(uint, SHMOBJ__SLOT_UINT, uint64_t)
SCALAR_GET_SET(double, SHMOBJ__SLOT_DOUBLE, double)
SCALAR_ADD_CAS(int, SHMOBJ__SLOT_INT, int64_t)
SCALAR_ADD_CAS(uint, SHMOBJ__SLOT_UINT, uint64_t)

int shmobj_double_add(const shmobj_view *view, double delta, double *old)
{
    SCALAR_OR_FAIL(view, SHMOBJ__SLOT_DOUBLE, p);
    WRITABLE_OR_FAIL(view);
    LIVE_OR_FAIL(view);
    uint64_t o = atomic_load_explicit(p, memory_order_relaxed);
    /* A CAS loop: the failed CAS reloads o, so every retry adds to the
     * value another process just stored and no add is lost. */
    while (!atomic_compare_exchange_weak_explicit(p, &o,
                                                  double_bits(bits_double(o) + delta),
                                                  memory_order_acq_rel,
                                                  memory_order_relaxed))
        ;
    if (old != NULL)
        *old = bits_double(o);
    return 0;
}

/* ---- int items of containers, by position or by key -------------------- */

/* The add every counter call ends with, once its slot is found. */
static inline __attribute__((always_inline)) int
int_add_at(_Atomic uint64_t *p, int64_t delta, int64_t *old)
{
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
                                1u << SHMOBJ_TYPE_DICT | 1u << SHMOBJ_TYPE_STRUCT |
                                1u << SHMOBJ_TYPE_RECORD;
    if (v == NULL)
        return SHMOBJ_EINVAL;
    /* the view's fields once, before the header load (which the compiler
     * does not move other loads across) */
    unsigned type = v->type;
    if (type >= 32 || !(with_items >> type & 1u))
        return SHMOBJ_ETYPE;
    if (write && type == SHMOBJ_TYPE_TUPLE)
        return SHMOBJ_EACCES;
    if (write && shmobj__view_writable(v) != 0)
        return SHMOBJ_ERDONLY;
    if (i >= v->count)
        return SHMOBJ_ERANGE;
    if (v->flags & SHMOBJ__VIEW_PACKED)
        return SHMOBJ_ETYPE; /* a packed tuple's items are strings */
    struct shmobj__slot *s =
        (void *)((uint8_t *)v->obj + shmobj__value_rel(type, v->len, i));
    if (!shmobj__obj_live(v))
        return SHMOBJ_ESTALE;
    uint8_t tag = s->tag;
    if (tag != SHMOBJ__SLOT_INT)
        return tag == SHMOBJ__SLOT_OBJ || tag == SHMOBJ__SLOT_BOOL ||
                       tag == SHMOBJ__SLOT_UINT || tag == SHMOBJ__SLOT_DOUBLE ||
                       tag == SHMOBJ__SLOT_LINK || tag == SHMOBJ__SLOT_ISTR
                   ? SHMOBJ_ETYPE
                   : SHMOBJ_ECORRUPT;
    *out = &s->payload;
    return 0;
}

/* Add to int item i of the container v (its checks, then the add). */
static inline __attribute__((always_inline)) int
item_add(const shmobj_view *v, size_t i, int64_t delta, int64_t *old)
{
    _Atomic uint64_t *p;
    int rc = item_int_slot(v, i, &p, 1);
    return rc != 0 ? rc : int_add_at(p, delta, old);
}

/* The hot call of counter workloads: on a cache line of its own, so its
 * speed does not depend on where the linker put it. */
__attribute__((aligned(64))) int
shmobj_item_int_add(const shmobj_view *view, size_t i, int64_t delta, int64_t *old)
{
    return item_add(view, i, delta, old);
}

/* shmobj_view_key_int_add() on a record, everything but its common case:
 * every check, the full lookup of the name in the shape's index, the
 * record's slot (i < count: the record's body was checked to hold it when
 * the view was made). */
static __attribute__((noinline)) int
record_key_int_add_full(const shmobj_view *view, const shmobj_key *key, int64_t delta,
                        int64_t *old)
{
    size_t i;
    if (key == NULL || !shmobj__key_ready(key))
        return SHMOBJ_EINVAL;
    if (!shmobj__obj_live(view))
        return SHMOBJ_ESTALE;
    int rc = shmobj__record_find(view, key, &i);
    return rc != 0 ? rc : item_add(view, i, delta, old);
}

/* The common case of counters by name on records, without calls (so it
 * keeps few registers): a prepared string key of at most 7 bytes (a short
 * key slot of the shape: no compare of a str object, whose call would make
 * this path save five registers) whose first index entry in the shape
 * names the field, an int slot. Anything else, from the start, is the
 * full call's. */
static __attribute__((noinline)) int
record_key_int_add(const shmobj_view *view, const shmobj_key *key, int64_t delta,
                   int64_t *old)
{
    size_t i;
    struct shmobj__slot *s;
    uint64_t kn;
    if (key != NULL && key->type == SHMOBJ_TYPE_STR && (kn = key->len) <= SHMOBJ__SSTR_MAX &&
        (key->ptr != NULL || kn == 0) && shmobj__obj_live(view) &&
        shmobj__blk_live(shmobj__space_of(view), shmobj__ref_off(view->len),
                         shmobj__ref_gen(view->len)) &&
        (s = shmobj__record_hit_short(view, kn, key->word_, key->hash_, &i)) != NULL &&
        s->tag == SHMOBJ__SLOT_INT) {
        return int_add_at(&s->payload, delta, old);
    }
    return record_key_int_add_full(view, key, delta, old);
}

/* shmobj_view_key_int_add() on anything but a record. */
static __attribute__((noinline)) int
key_int_add_keyed(const shmobj_view *view, const shmobj_key *key, int64_t delta, int64_t *old)
{
    size_t i;
    if (view == NULL || key == NULL || !shmobj__key_ready(key))
        return SHMOBJ_EINVAL;
    if (view->type != SHMOBJ_TYPE_DICT && view->type != SHMOBJ_TYPE_STRUCT)
        return SHMOBJ_ETYPE;
    if (!shmobj__obj_live(view))
        return SHMOBJ_ESTALE;
    const struct shmobj__slot *ks;
    if (view->type == SHMOBJ_TYPE_DICT && key->type == SHMOBJ_TYPE_STR &&
        key->len <= SHMOBJ__SSTR_MAX &&
        (ks = shmobj__dict_hit_short(view, key->len, key->word_, key->hash_, &i)) != NULL) {
        /* The lookups' inline half, kept apart so that a hit goes to its
         * value slot with no further checks (11% fewer instructions per
         * increment): the pair lies in the body shmobj__body_size()
         * checked when the view was made. */
        struct shmobj__slot *s = (struct shmobj__slot *)ks + 1;
        if (s->tag == SHMOBJ__SLOT_INT)
            return int_add_at(&s->payload, delta, old);
    }
    int rc = shmobj__index_find(view, key, &i, NULL);
    return rc != 0 ? rc : item_add(view, i, delta, old);
}

/* Records and the other keyed kinds go separate ways at once (two tail
 * calls), so that neither pays for the other's registers. */
int shmobj_view_key_int_add(const shmobj_view *view, const shmobj_key *key,
                            int64_t delta, int64_t *old)
{
    if (shmobj__view_writable(view) != 0)
        return SHMOBJ_ERDONLY;
    if (view != NULL && view->type == SHMOBJ_TYPE_RECORD)
        return record_key_int_add(view, key, delta, old);
    return key_int_add_keyed(view, key, delta, old);
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
    if (!shmobj__obj_live(view))
        return SHMOBJ_ESTALE;
    *out = (int64_t)x;
    return 0;
}
