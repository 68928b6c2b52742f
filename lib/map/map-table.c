/* Block, entry and table access, and the per-handle cache of each shard's
 * table shape.
 *
 * Invariants kept here:
 *  - Every block is reached through the heap's check of its reference
 *    (shmobj__map_block_at) or, on lookups, through bounds and alignment
 *    checks against the mapping (shmobj__map_entry_peek); an entry's header
 *    is copied once and only the copy (struct ent) is used.
 *  - A shape word is cached only for a table that htcore's attach
 *    validated and that has the map's own form (ref mode, the map's seed,
 *    64-aligned, groups where the block says); a hit also needs the
 *    header's magic, version, flags, slot count and tail word unchanged,
 *    so damage to them is noticed at once. Threads sharing a handle may
 *    race on the cache: a shape and a tail word of different tables fail
 *    the check and the table is validated again. */
#include <string.h>

#include "map-internal.h"

int shmobj__map_block_at(shmobj_map *m, shmobj__ref ref, uint64_t min,
                         uint8_t **p, uint64_t *usable)
{
    uint64_t n;
    void *q;
    if (ref == 0 || m->sp->ops->check(m->sp, ref, &n) != 0 || n < min)
        return SHMOBJ_ECORRUPT;
    if (shmobj__space_at(m->sp, shmobj__ref_off(ref), n, &q) != 0)
        return SHMOBJ_ECORRUPT;
    *p = q;
    if (usable != NULL)
        *usable = n;
    return 0;
}

static int entry_at(shmobj_map *m, shmobj__ref ref, struct ent *e)
{
    uint8_t *p;
    uint64_t usable;
    struct shmobj__map_entry h;
    if (shmobj__map_block_at(m, ref, SHMOBJ__MAP_ENTRY_HEADER, &p, &usable) != 0)
        return SHMOBJ_ECORRUPT;
    memcpy(&h, p, sizeof h);
    if (shmobj__map_entry_size(h.key_len, h.value_len) > usable)
        return SHMOBJ_ECORRUPT;
    e->p = p;
    e->klen = h.key_len;
    e->vlen = h.value_len;
    e->hash_gen = h.hash_gen;
    e->ref = ref;
    return 0;
}

/* The cheap form for lookups: bounds and alignment only, no look at the
 * heap block's header. Enough for memory safety; a reference that is
 * stale or wrong can only come from a racing writer (the caller's sequence
 * check discards what it read) or from damage (the lengths rarely fit, and
 * the key comparison fails). Writers, check() and repair use entry_at(). */
int shmobj__map_entry_peek(shmobj_map *m, uint64_t slot, struct ent *e)
{
    uint64_t off = slot << SHMOBJ__MAP_SLOT_SHIFT;
    uint64_t mapped = atomic_load_explicit(&m->sp->mapped, memory_order_acquire);
    void *q;
    struct shmobj__map_entry h;
    if (off < 16 || !shmobj__aligned(off, 16))
        return SHMOBJ_ECORRUPT;
    if (shmobj__range_ok(off, SHMOBJ__MAP_ENTRY_HEADER, mapped))
        q = m->sp->base + off; /* the common case: no call */
    else if (shmobj__space_at(m->sp, off, SHMOBJ__MAP_ENTRY_HEADER, &q) != 0)
        return SHMOBJ_ECORRUPT;
#if defined(__GNUC__)
    /* The key and value follow in the next lines: fetch them while the
     * header's miss is served (prefetches never fault). */
    __builtin_prefetch((const uint8_t *)q + 64);
    __builtin_prefetch((const uint8_t *)q + 128);
#endif
    memcpy(&h, q, sizeof h);
    uint64_t size = shmobj__map_entry_size(h.key_len, h.value_len);
    if (!shmobj__range_ok(off, size, mapped) &&
        shmobj__space_at(m->sp, off, size, &q) != 0)
        return SHMOBJ_ECORRUPT;
    e->p = q;
    e->klen = h.key_len;
    e->vlen = h.value_len;
    e->hash_gen = h.hash_gen;
    e->ref = shmobj__ref_make(off, (uint16_t)(h.hash_gen & SHMOBJ__MAP_GEN_MASK));
    return 0;
}

/* The full reference of the (linked, so intact) entry a slot names, checked
 * against its heap block: ECORRUPT when the slot or block is bad. */
int shmobj__map_slot_entry(shmobj_map *m, uint64_t slot, struct ent *e)
{
    struct ent peek;
    if (shmobj__map_entry_peek(m, slot, &peek) != 0)
        return SHMOBJ_ECORRUPT;
    return entry_at(m, peek.ref, e);
}

/* The hash of an entry's key, for tables beyond 2^20 groups and checks. */
int shmobj__map_slot_hash(void *ctx, uint64_t slot, uint64_t *hash)
{
    shmobj_map *m = ctx;
    struct ent e;
    if (shmobj__map_entry_peek(m, slot, &e) != 0)
        return SHMOBJ_ECORRUPT;
    *hash = shmobj_htcore_hash64(e.p + SHMOBJ__MAP_ENTRY_HEADER, e.klen, m->seed);
    return 0;
}

/* The htcore handle of a table block. */
int shmobj__map_table_at(shmobj_map *m, shmobj__ref ref, shmobj_htcore *ht)
{
    uint8_t *p;
    uint64_t usable;
    if (shmobj__map_block_at(m, ref, SHMOBJ__MAP_TABLE_PREFIX + SHMOBJ_HTCORE_HEADER_SIZE,
                             &p, &usable) != 0)
        return SHMOBJ_ECORRUPT;
    if (shmobj_htcore_attach(ht, p + SHMOBJ__MAP_TABLE_PREFIX,
                             usable - SHMOBJ__MAP_TABLE_PREFIX) != 0 ||
        !(ht->flags & SHMOBJ_HTCORE_FLAG_REF))
        return SHMOBJ_ECORRUPT;
    return 0;
}

static uint64_t shape_make(const shmobj_map *m, shmobj__ref ref, const shmobj_htcore *ht)
{
    uint64_t off = shmobj__ref_off(ref);
    uint64_t groups = (ht->mask + 1) / SHMOBJ_HTCORE_GROUP;
    unsigned lg = 0;
    while ((UINT64_C(1) << lg) < groups)
        lg++;
    if ((off & SHAPE_LOW) != 0 || ht->groups != m->base + off + SHAPE_GROUPS_AT ||
        ht->group_bytes != MAP_GROUP_BYTES || lg + 1 > SHAPE_LOW ||
        ht->seed != m->seed || ht->key_size != 0 ||
        ht->value_size != SHMOBJ_HTCORE_REF_SLOT || ht->stride != SHMOBJ_HTCORE_REF_SLOT ||
        ht->flags != SHMOBJ_HTCORE_FLAG_REF)
        return 0;
    return ref | (lg + 1);
}

/* The miss of shmobj__map_table_get(): validate the table and cache its
 * shape (0 when it is not of the map's form: then nothing is read
 * through it) and tail word. */
int shmobj__map_table_refresh(shmobj_map *m, unsigned idx, shmobj__ref ref,
                              shmobj_htcore *ht)
{
    int rc = shmobj__map_table_at(m, ref, ht);
    if (rc == 0) {
        atomic_store_explicit(&m->shape_check[idx], header_word7(ht->hdr),
                              memory_order_relaxed);
        atomic_store_explicit(&m->shape[idx], shape_make(m, ref, ht),
                              memory_order_relaxed);
    }
    return rc;
}

/* Allocate and build an empty table for `capacity` entries. */
int shmobj__map_table_new(shmobj_map *m, uint64_t capacity, shmobj__ref *out,
                          shmobj_htcore *ht)
{
    uint64_t fp = shmobj_htcore_footprint(capacity, SHMOBJ_HTCORE_REF_SLOT);
    shmobj__ref ref;
    uint8_t *p;
    if (fp == 0 || fp > UINT64_MAX - SHMOBJ__MAP_TABLE_PREFIX)
        return SHMOBJ_ENOMEM;
    int rc = m->sp->ops->alloc(m->sp, fp + SHMOBJ__MAP_TABLE_PREFIX, 64, &ref);
    if (rc != 0)
        return rc;
    rc = shmobj__map_block_at(m, ref, fp + SHMOBJ__MAP_TABLE_PREFIX, &p, NULL);
    if (rc == 0) {
        memset(p, 0, SHMOBJ__MAP_TABLE_PREFIX);
        rc = shmobj_htcore_init_ref(ht, p + SHMOBJ__MAP_TABLE_PREFIX, fp,
                                    capacity, m->seed);
    }
    if (rc != 0) {
        (void)m->sp->ops->free(m->sp, ref);
        return SHMOBJ_ECORRUPT;
    }
    *out = ref;
    return 0;
}
