/* Writes: set, add, del, clear, and the growth of a shard's table.
 *
 * Invariants kept here:
 *  - Every change happens under the shard lock. A new entry is written
 *    before the lock is taken, so the critical section only links it (a
 *    batch writes each just before it links it, under the lock);
 *    linked entries are never changed (but for an 8-byte value that
 *    shmobj_map_add adds to atomically).
 *  - Before a change the lock holder records its intent (intent_op and
 *    the blocks it moves) in the shard, and clears it after: a kill at any
 *    instruction leaves what the repair needs (map-repair.c).
 *  - Each change of the table is one writer section; an unlinked entry or
 *    a replaced table is retired, never freed at once (map-limbo.c).
 *  - Growth builds the new table while readers keep using the old one
 *    (unchanged meanwhile), then publishes it with one store inside a
 *    short writer section.
 *  - After the lock is given back, a change is reported to the watchers
 *    of its key (map_changed(): one load when nobody watches). */
#include <stdatomic.h>
#include <string.h>

#include "map-internal.h"
#include "step.h"

struct find_ctx {
    shmobj_map *m;
    const void *key;
    size_t klen;
    struct ent e;
};

static int find_eq(void *ctx, uint64_t v)
{
    struct find_ctx *f = ctx;
    struct ent e;
    if (shmobj__map_entry_peek(f->m, v, &e) != 0)
        return SHMOBJ_ECORRUPT;
    if (e.klen != f->klen || !shmobj__mem_equal(ent_key(&e), f->key, f->klen))
        return 0;
    f->e = e;
    return 1;
}

/* Find key in the current table, under the lock; when free_idx is given,
 * also the slot an insert of the key would take (UINT64_MAX: none seen),
 * valid until the table changes. *tref gets the table's reference as read
 * once here: what ht describes, and what a growth retires. Inlined into
 * each write (as it always was: its ten arguments cost more than its body
 * when passed). */
static inline __attribute__((always_inline)) int
locked_find_free(shmobj_map *m, struct shmobj__map_shard *s, shmobj_htcore *ht,
                 shmobj__ref *tref, uint64_t hash, const void *key, size_t klen,
                 uint64_t *idx, struct ent *e, uint64_t *free_idx)
{
    struct find_ctx f = {m, key, klen, {0}};
    *tref = atomic_load(&s->table);
    int rc = shmobj__map_table_get(m, (unsigned)(s - m->ctl->shards_), *tref, ht);
    if (rc != 0)
        return rc;
    rc = shmobj_htcore_ref_find_free(ht, hash, find_eq, &f, idx, free_idx);
    if (rc == 0 && e != NULL)
        *e = f.e;
    return rc;
}

/* Find key in the current table, under the lock. */
static int locked_find(shmobj_map *m, struct shmobj__map_shard *s,
                       shmobj_htcore *ht, uint64_t hash, const void *key,
                       size_t klen, uint64_t *idx, struct ent *e)
{
    shmobj__ref tref;
    return locked_find_free(m, s, ht, &tref, hash, key, klen, idx, e, NULL);
}

/* Replace the shard's table *tref (which ht describes) by a bigger one
 * (or one of the same size without tombstones). Readers go on using the
 * old table while the new one is built; only the publication is a writer
 * section. */
static int grow(shmobj_map *m, struct shmobj__map_shard *s, shmobj_htcore *ht,
                shmobj__ref *tref)
{
    uint64_t count = shmobj_htcore_count(ht), cap = count * 2;
    shmobj__ref nref, oref = *tref;
    shmobj_htcore nt;
    if (cap < MAP_MIN_CAPACITY)
        cap = MAP_MIN_CAPACITY;
    int rc = shmobj__map_table_new(m, cap, &nref, &nt);
    if (rc != 0)
        return rc;
    atomic_store_explicit(&s->intent_table_old, oref, memory_order_relaxed);
    atomic_store_explicit(&s->intent_table, nref, memory_order_release);
    rc = shmobj_htcore_ref_rehash(&nt, ht, shmobj__map_slot_hash, m);
    if (rc != 0) {
        free_block(m, nref);
        atomic_store(&s->intent_table, 0);
        return SHMOBJ_ECORRUPT;
    }
    SHMOBJ__STEP("map.grow.built");
    write_begin(s);
    atomic_store_explicit(&s->table, nref, memory_order_release);
    write_end(s);
    SHMOBJ__STEP("map.grow.published");
    shmobj__map_retire(m, s, oref);
    atomic_store_explicit(&s->intent_table, 0, memory_order_release);
    *ht = nt;
    *tref = nref;
    return 0;
}

/* Link a new entry (the lock is held, intent_new recorded, key absent). */
static int link_new(shmobj_map *m, struct shmobj__map_shard *s,
                    shmobj_htcore *ht, shmobj__ref tref, uint64_t hash,
                    shmobj__ref ref, uint64_t free_idx)
{
    /* Room first, outside the writer section. */
    if (ht->hdr->growth_left == 0 && ht->hdr->tombstones == 0) {
        int rc = grow(m, s, ht, &tref);
        if (rc != 0)
            return rc;
        free_idx = UINT64_MAX; /* a slot of the old table */
    }
    write_begin(s);
    /* the slot the find noted, else a probe of its own */
    int rc = free_idx != UINT64_MAX
                 ? shmobj_htcore_ref_insert_at(ht, free_idx, hash, slot_of(ref))
                 : shmobj_htcore_ref_insert(ht, hash, slot_of(ref), NULL);
    write_end(s);
    SHMOBJ__STEP("map.insert.linked");
    if (rc == SHMOBJ_HTCORE_EFULL) {
        rc = grow(m, s, ht, &tref);
        if (rc != 0)
            return rc;
        write_begin(s);
        rc = shmobj_htcore_ref_insert(ht, hash, slot_of(ref), NULL);
        write_end(s);
    }
    if (rc != 0)
        return SHMOBJ_ECORRUPT;
    atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
    return 0;
}

/* A new entry block holding key and value. */
static int entry_new(shmobj_map *m, uint64_t hash, const void *key,
                     size_t klen, const void *value, size_t vlen,
                     shmobj__ref *out)
{
    uint64_t size = shmobj__map_entry_size((uint32_t)klen, (uint32_t)vlen);
    shmobj__ref ref;
    uint8_t *p;
    struct shmobj__map_entry h = {(uint32_t)klen, (uint32_t)vlen, 0};
    int rc = m->sp->ops->alloc(m->sp, size, 16, &ref);
    if (rc != 0)
        return rc;
    h.hash_gen = (hash & ~SHMOBJ__MAP_GEN_MASK) | shmobj__ref_gen(ref);
    /* the heap just handed the block out: only its place in the mapping
     * needs finding, not its header checking */
    void *q;
    if (shmobj__space_at(m->sp, shmobj__ref_off(ref), size, &q) != 0) {
        free_block(m, ref);
        return SHMOBJ_ECORRUPT;
    }
    p = q;
    memcpy(p, &h, sizeof h);
    if (vlen > 0)
        memcpy(p + shmobj__map_value_off((uint32_t)klen), value, vlen);
    if (klen > 0)
        memcpy(p + SHMOBJ__MAP_ENTRY_HEADER, key, klen);
    *out = ref;
    return 0;
}

/* Replace or link the written entry ref of key (hash, shard s) under the
 * shard lock, its intent recorded and cleared around the change; frees ref
 * when it was not linked. */
static int set_locked(shmobj_map *map, struct shmobj__map_shard *s, uint64_t hash,
                      const void *key, size_t key_len, shmobj__ref ref)
{
    shmobj_htcore ht;
    uint64_t idx;
    atomic_store_explicit(&s->intent_new, ref, memory_order_relaxed);
    atomic_store_explicit(&s->intent_op, SHMOBJ__MAP_OP_SET, memory_order_release);
    SHMOBJ__STEP("map.set.intent");
    struct ent oe;
    uint64_t free_idx;
    shmobj__ref tref;
    int rc = locked_find_free(map, s, &ht, &tref, hash, key, key_len, &idx, &oe, &free_idx);
    if (rc == 0) {
        uint64_t old = oe.ref;
        atomic_store_explicit(&s->intent_old, old, memory_order_release);
        write_begin(s);
        shmobj_htcore_ref_replace(&ht, idx, slot_of(ref));
        write_end(s);
        SHMOBJ__STEP("map.set.replaced");
        shmobj__map_retire(map, s, old);
    } else if (rc == SHMOBJ_ENOTFOUND) {
        rc = link_new(map, s, &ht, tref, hash, ref, free_idx);
        if (rc != 0) {
            clear_intent(s);
            free_block(map, ref);
        }
    } else {
        clear_intent(s);
        free_block(map, ref);
    }
    clear_intent(s);
    return rc;
}

static int set_once(shmobj_map *map, const void *key, size_t key_len,
                    const void *value, size_t value_len)
{
    uint64_t hash = map_hash(map, key, key_len);
    struct shmobj__map_shard *s = shard_of(map, hash);
    shmobj__ref ref;
    /* Start loading the key's group now; the miss overlaps the allocation.
     * The block is written before the lock is taken: the critical section
     * only links it. */
    prefetch_hash(map, hash);
    int rc = entry_new(map, hash, key, key_len, value, value_len, &ref);
    if (rc != 0)
        return rc;
    SHMOBJ__STEP("map.set.entry_written");
    rc = shmobj__map_shard_lock(map, s);
    if (rc != 0) {
        free_block(map, ref);
        return rc;
    }
    rc = set_locked(map, s, hash, key, key_len, ref);
    shard_unlock(map, s);
    if (rc == 0)
        map_changed(map, hash, 0);
    return rc;
}

/* An allocation that failed reclaims what the map itself retired (in any
 * shard) and tries once more: removed entries give their room back even
 * in a segment at its maximum. */
int shmobj_map_set(shmobj_map *map, const void *key, size_t key_len,
                   const void *value, size_t value_len)
{
    if (map != NULL && map->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (!key_ok(map, key, key_len) || (value == NULL && value_len > 0) ||
        value_len > UINT32_MAX)
        return SHMOBJ_EINVAL;
    int rc = set_once(map, key, key_len, value, value_len);
    if (rc == SHMOBJ_ENOMEM && shmobj__map_reclaim_all(map))
        rc = set_once(map, key, key_len, value, value_len);
    return rc;
}

/* Sets a batch sorts by shard at a time: enough that a shard's lock is
 * taken once for several of them (64 shards), few enough for the stack. */
#define SET_BATCH 256

/* The sets r[idx[0..k)] (validated, hashes in hash[]), all of shard s, in
 * that order under one hold of its lock. Each entry is written just before
 * it is linked, so that a kill leaks at most one, as a single set's does. */
static void set_shard_run(shmobj_map *map, struct shmobj__map_shard *s, shmobj_map_set_req *r,
                          const uint64_t *hash, const uint16_t *idx, size_t k)
{
    int rc = shmobj__map_shard_lock(map, s);
    for (size_t j = 0; j < k; j++) {
        size_t i = idx[j];
        if (j + 1 < k)
            prefetch_hash(map, hash[idx[j + 1]]);
        if (rc == 0) {
            shmobj__ref ref;
            r[i].status = entry_new(map, hash[i], r[i].key, r[i].key_len, r[i].value,
                                    r[i].value_len, &ref);
            if (r[i].status == 0)
                r[i].status = set_locked(map, s, hash[i], r[i].key, r[i].key_len, ref);
        } else {
            r[i].status = rc;
        }
    }
    if (rc == 0) {
        shard_unlock(map, s);
        for (size_t j = 0; j < k; j++)
            if (r[idx[j]].status == 0)
                map_changed(map, hash[idx[j]], 0);
    }
}

int shmobj_map_set_many(shmobj_map *map, shmobj_map_set_req *reqs, size_t n)
{
    if (map == NULL || (reqs == NULL && n > 0))
        return SHMOBJ_EINVAL;
    if (map->sp->readonly) {
        for (size_t i = 0; i < n; i++)
            reqs[i].status = SHMOBJ_ERDONLY;
        return SHMOBJ_ERDONLY;
    }
    for (size_t at = 0; at < n; at += SET_BATCH) {
        shmobj_map_set_req *r = reqs + at;
        size_t k = n - at < SET_BATCH ? n - at : SET_BATCH;
        uint64_t hash[SET_BATCH];
        uint16_t idx[SET_BATCH];
        unsigned start[SHMOBJ__MAP_SHARDS + 1] = {0};
        /* a counting sort by shard, stable: one key's sets keep their order */
        for (size_t i = 0; i < k; i++) {
            r[i].status = key_ok(map, r[i].key, r[i].key_len) &&
                                  (r[i].value != NULL || r[i].value_len == 0) &&
                                  r[i].value_len <= UINT32_MAX
                              ? 0
                              : SHMOBJ_EINVAL;
            if (r[i].status == 0) {
                hash[i] = map_hash(map, r[i].key, r[i].key_len);
                start[(hash[i] >> SHMOBJ__MAP_SHARD_SHIFT) + 1]++;
            }
        }
        for (unsigned sh = 0; sh < SHMOBJ__MAP_SHARDS; sh++)
            start[sh + 1] += start[sh];
        unsigned fill[SHMOBJ__MAP_SHARDS];
        memcpy(fill, start, sizeof fill);
        for (size_t i = 0; i < k; i++)
            if (r[i].status == 0)
                idx[fill[hash[i] >> SHMOBJ__MAP_SHARD_SHIFT]++] = (uint16_t)i;
        for (unsigned sh = 0; sh < SHMOBJ__MAP_SHARDS; sh++)
            if (start[sh + 1] > start[sh])
                set_shard_run(map, &map->ctl->shards_[sh], r, hash, idx + start[sh],
                              start[sh + 1] - start[sh]);
        /* a full segment: as shmobj_map_set(), once more after a reclaim */
        for (size_t i = 0; i < k; i++)
            if (r[i].status == SHMOBJ_ENOMEM && shmobj__map_reclaim_all(map))
                r[i].status = set_once(map, r[i].key, r[i].key_len, r[i].value, r[i].value_len);
    }
    return 0;
}

static int add_once(shmobj_map *map, const void *key, size_t key_len,
                    int64_t delta, int64_t *result)
{
    uint64_t hash = map_hash(map, key, key_len), idx;
    struct shmobj__map_shard *s = shard_of(map, hash);
    shmobj_htcore ht;
    struct ent e;
    uint64_t free_idx;
    shmobj__ref tref;
    int rc = shmobj__map_shard_lock(map, s);
    if (rc != 0)
        return rc;
    rc = locked_find_free(map, s, &ht, &tref, hash, key, key_len, &idx, &e, &free_idx);
    if (rc == 0) {
        if (e.vlen != 8) {
            rc = SHMOBJ_ETYPE;
        } else {
            /* In place: the entry stays linked while we hold the lock, and
             * readers load 8-byte values atomically. */
            uint64_t v = atomic_fetch_add((_Atomic uint64_t *)(void *)ent_value(&e),
                                          (uint64_t)delta) + (uint64_t)delta;
            if (result != NULL)
                memcpy(result, &v, 8);
        }
    } else if (rc == SHMOBJ_ENOTFOUND) {
        shmobj__ref ref;
        rc = entry_new(map, hash, key, key_len, &delta, 8, &ref);
        if (rc == 0) {
            atomic_store_explicit(&s->intent_new, ref, memory_order_relaxed);
            atomic_store_explicit(&s->intent_op, SHMOBJ__MAP_OP_SET,
                                  memory_order_release);
            rc = link_new(map, s, &ht, tref, hash, ref, free_idx);
            if (rc != 0) {
                clear_intent(s);
                free_block(map, ref);
            } else if (result != NULL) {
                *result = delta;
            }
            clear_intent(s);
        }
    }
    shard_unlock(map, s);
    if (rc == 0)
        map_changed(map, hash, 0);
    return rc;
}

int shmobj_map_add(shmobj_map *map, const void *key, size_t key_len,
                   int64_t delta, int64_t *result)
{
    if (map != NULL && map->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (!key_ok(map, key, key_len))
        return SHMOBJ_EINVAL;
    int rc = add_once(map, key, key_len, delta, result);
    if (rc == SHMOBJ_ENOMEM && shmobj__map_reclaim_all(map))
        rc = add_once(map, key, key_len, delta, result);
    return rc;
}

int shmobj_map_del(shmobj_map *map, const void *key, size_t key_len)
{
    if (map != NULL && map->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (!key_ok(map, key, key_len))
        return SHMOBJ_EINVAL;
    uint64_t hash = map_hash(map, key, key_len), idx;
    struct shmobj__map_shard *s = shard_of(map, hash);
    shmobj_htcore ht;
    int rc = shmobj__map_shard_lock(map, s);
    if (rc != 0)
        return rc;
    struct ent oe;
    rc = locked_find(map, s, &ht, hash, key, key_len, &idx, &oe);
    if (rc == 0) {
        uint64_t old = oe.ref;
        atomic_store_explicit(&s->intent_old, old, memory_order_relaxed);
        atomic_store_explicit(&s->intent_op, SHMOBJ__MAP_OP_DEL, memory_order_release);
        SHMOBJ__STEP("map.del.intent");
        write_begin(s);
        shmobj_htcore_erase(&ht, idx);
        write_end(s);
        SHMOBJ__STEP("map.del.erased");
        atomic_fetch_sub_explicit(&s->count, 1, memory_order_relaxed);
        shmobj__map_retire(map, s, old);
        clear_intent(s);
    }
    shard_unlock(map, s);
    if (rc == 0)
        map_changed(map, hash, 0);
    return rc;
}

int shmobj_map_clear(shmobj_map *map)
{
    if (map != NULL && map->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (map == NULL)
        return SHMOBJ_EINVAL;
    for (unsigned i = 0; i < SHMOBJ__MAP_SHARDS; i++) {
        struct shmobj__map_shard *s = &map->ctl->shards_[i];
        shmobj__ref nref, oref;
        shmobj_htcore nt;
        int rc = shmobj__map_shard_lock(map, s);
        if (rc != 0)
            return rc;
        oref = atomic_load(&s->table);
        rc = shmobj__map_table_new(map, MAP_MIN_CAPACITY, &nref, &nt);
        if (rc == SHMOBJ_ENOMEM) {
            /* room retired by the map itself first (no lock held then) */
            shard_unlock(map, s);
            if (!shmobj__map_reclaim_all(map))
                return rc;
            rc = shmobj__map_shard_lock(map, s);
            if (rc != 0)
                return rc;
            oref = atomic_load(&s->table);
            rc = shmobj__map_table_new(map, MAP_MIN_CAPACITY, &nref, &nt);
        }
        if (rc != 0) {
            shard_unlock(map, s);
            return rc;
        }
        atomic_store_explicit(&s->intent_table_old, oref, memory_order_relaxed);
        atomic_store_explicit(&s->intent_table, nref, memory_order_relaxed);
        atomic_store_explicit(&s->intent_op, SHMOBJ__MAP_OP_CLEAR, memory_order_release);
        write_begin(s);
        atomic_store_explicit(&s->table, nref, memory_order_release);
        atomic_store_explicit(&s->count, 0, memory_order_relaxed);
        write_end(s);
        shmobj__map_retire(map, s, oref | SHMOBJ__MAP_RETIRE_DEEP);
        clear_intent(s);
        shard_unlock(map, s);
        map_changed(map, 0, SHMOBJ__WATCH_WHOLE);
    }
    return 0;
}
