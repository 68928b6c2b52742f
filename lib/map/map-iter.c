/* Cursors: iteration shard by shard.
 *
 * Invariants kept here:
 *  - A cursor holds a read guard while it returns a shard's entries, so
 *    every entry it copied a reference of stays allocated until it moves
 *    to the next shard or is closed.
 *  - A shard's entry references are copied in one consistent step: a
 *    validated read section, or under the lock after MAP_ITER_LOCK_AFTER
 *    attempts that raced writers. A key lives in one shard for ever and a
 *    consistent table holds it once, so a key present for the whole
 *    iteration is returned exactly once.
 *  - Every error moves the cursor on (past the shard, or to the end when
 *    the map is gone), so a loop until ENOTFOUND ends. */
#include <stdlib.h>
#include <string.h>

#include "map-internal.h"

/* Bytes of one copied entry in a read-only cursor's buffer. */
static size_t copy_size(const struct ent *e)
{
    return 8 + (((size_t)e->klen + 7) & ~(size_t)7) + (((size_t)e->vlen + 7) & ~(size_t)7);
}

/* A read-only cursor's copy of the entries it.refs[0 .. n) name, made
 * inside the caller's read section (the bytes are judged only if it
 * held): refs[i] becomes the entry's offset in it->copy. */
static int copy_entries(shmobj_map_iter *it)
{
    it->copy_len = 0;
    for (size_t i = 0; i < it->n; i++) {
        struct ent e;
        int rc = shmobj__map_entry_peek(it->map, it->refs[i], &e);
        if (rc != 0)
            return SHMOBJ_ECORRUPT;
        size_t need = copy_size(&e);
        if (need > SIZE_MAX - it->copy_len)
            return SHMOBJ_ENOMEM;
        if (it->copy_len + need > it->copy_cap) {
            size_t ncap = it->copy_cap ? it->copy_cap : 4096;
            while (ncap < it->copy_len + need)
                ncap = ncap > SIZE_MAX / 2 ? it->copy_len + need : ncap * 2;
            uint8_t *nb = realloc(it->copy, ncap);
            if (nb == NULL)
                return SHMOBJ_ENOMEM;
            it->copy = nb;
            it->copy_cap = ncap;
        }
        uint8_t *p = it->copy + it->copy_len;
        memcpy(p, &e.klen, 4);
        memcpy(p + 4, &e.vlen, 4);
        memcpy(p + 8, ent_key(&e), e.klen);
        memcpy(p + 8 + ((e.klen + 7) & ~(size_t)7), ent_value(&e), e.vlen);
        it->refs[i] = it->copy_len;
        it->copy_len += need;
    }
    return 0;
}

/* Copy the entry refs of one shard's table, consistently: inside a
 * validated read section, or under the lock when writers keep racing. The
 * cursor's guard, taken before, keeps every copied entry alive. A
 * read-only handle's cursor has no guard and may not lock: it copies the
 * entries themselves inside the section, and tries only optimistically
 * (a writer that stays inside its section ends it in SHMOBJ_EBUSY, see
 * shmobj__map_wait_writer()). */
static int snapshot(shmobj_map_iter *it, struct shmobj__map_shard *s)
{
    shmobj_map *m = it->map;
    int ro = m->reader == NULL;
    unsigned spins = 0;
    for (unsigned tries = 0;; tries++) {
        int locked = !ro && tries >= MAP_ITER_LOCK_AFTER;
        if (ro && tries >= MAP_RO_SNAPSHOT_TRIES)
            return SHMOBJ_EBUSY; /* writers kept changing the shard */
        uint64_t q1 = 0;
        if (locked) {
            int rc = shmobj__map_shard_lock(m, s);
            if (rc != 0)
                return rc;
        } else {
            q1 = atomic_load_explicit(&s->seq, memory_order_acquire);
            if (q1 & 1) {
                int rc = shmobj__map_wait_writer(m, s, &spins);
                if (rc != 0)
                    return rc;
                tries--;
                continue;
            }
        }
        shmobj_htcore ht;
        int rc = shmobj__map_table_get(m, (unsigned)(s - m->ctl->shards_),
                                        atomic_load_explicit(&s->table, memory_order_acquire),
                                        &ht);
        it->n = 0;
        it->pos = 0;
        if (rc == 0 && ht.mask + 1 > it->cap) {
            size_t ncap = (size_t)(ht.mask + 1);
            uint64_t *nr = realloc(it->refs, ncap * sizeof *nr);
            if (nr == NULL) {
                rc = SHMOBJ_ENOMEM;
            } else {
                it->refs = nr;
                it->cap = ncap;
            }
        }
        if (rc == 0) {
            uint64_t i = 0;
            while (it->n < it->cap && shmobj_htcore_next(&ht, &i) == 0) {
                it->refs[it->n++] = shmobj_htcore_ref_value(&ht, i);
                i++;
            }
        }
        if (rc == 0 && ro)
            rc = copy_entries(it);
        if (locked) {
            shard_unlock(m, s);
        } else {
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&s->seq, memory_order_relaxed) != q1)
                continue;
        }
        return rc;
    }
}

int shmobj_map_iter_open(shmobj_map *map, shmobj_map_iter **out)
{
    if (map == NULL || out == NULL)
        return SHMOBJ_EINVAL;
    /* its segment handle was closed (a destroyed map's cursor opens, and
     * its first step says SHMOBJ_ESTALE) */
    if (shmobj__space_closed(map->sp))
        return SHMOBJ_ESTALE;
    shmobj_map_iter *it = calloc(1, sizeof *it);
    if (it == NULL)
        return SHMOBJ_ENOMEM;
    it->map = map;
    shmobj__map_hold(map); /* the cursor outlives the map's close */
    *out = it;
    return 0;
}

MAP_READS_LINKAGE int MAP_READS_NAME(shmobj_map_iter_next)(shmobj_map_iter *it, const void **key,
                         size_t *key_len, const void **value,
                         size_t *value_len)
{
    if (it == NULL)
        return SHMOBJ_EINVAL;
    /* its segment handle was closed: nothing more, every time */
    if (shmobj__space_closed(it->map->sp))
        return SHMOBJ_ESTALE;
    while (it->pos == it->n) {
        if (it->guard != 0) {
            guard_leave(it->map, it->guard);
            it->guard = 0;
        }
        if (it->shard >= SHMOBJ__MAP_SHARDS)
            return SHMOBJ_ENOTFOUND;
        /* read-only: no guard (the snapshot copies), the map's state only */
        int rc = it->map->reader == NULL ? map_stale(it->map)
                                         : shmobj__map_guard_enter(it->map, &it->guard);
        if (rc == 0) {
            rc = snapshot(it, &it->map->ctl->shards_[it->shard]);
            if (rc != 0 && it->guard != 0) {
                guard_leave(it->map, it->guard);
                it->guard = 0;
            }
        }
        if (rc != 0) {
            /* Every error moves the cursor on, so that a loop until
             * ENOTFOUND ends: past this shard (its entries are not
             * returned), or to the end when the map is gone. */
            it->n = it->pos = 0;
            it->shard = rc == SHMOBJ_ESTALE ? SHMOBJ__MAP_SHARDS : it->shard + 1;
            return rc;
        }
        it->shard++;
    }
    if (it->map->reader == NULL) {
        const uint8_t *p = it->copy + it->refs[it->pos++];
        uint32_t kl, vl;
        memcpy(&kl, p, 4);
        memcpy(&vl, p + 4, 4);
        if (key != NULL)
            *key = p + 8;
        if (key_len != NULL)
            *key_len = kl;
        if (value != NULL)
            *value = p + 8 + ((kl + 7) & ~(size_t)7);
        if (value_len != NULL)
            *value_len = vl;
        return 0;
    }
    struct ent e;
#if defined(__GNUC__)
    /* Entries of one shard lie far apart: start loading a few ahead so
     * their misses overlap (a prefetch never faults, whatever the value). */
    if (it->pos + 8 < it->n) {
        const uint8_t *ahead = it->map->sp->base +
                               (it->refs[it->pos + 8] << SHMOBJ__MAP_SLOT_SHIFT);
        __builtin_prefetch(ahead);
        __builtin_prefetch(ahead + 64);
        __builtin_prefetch(ahead + 128);
    }
#endif
    if (shmobj__map_entry_peek(it->map, it->refs[it->pos++], &e) != 0)
        return SHMOBJ_ECORRUPT;
    if (key != NULL)
        *key = ent_key(&e);
    if (key_len != NULL)
        *key_len = e.klen;
    if (value != NULL)
        *value = ent_value(&e);
    if (value_len != NULL)
        *value_len = e.vlen;
    return 0;
}

#if defined(MAP_TSAN)
int shmobj_map_iter_next(shmobj_map_iter *it, const void **key, size_t *key_len, const void **value, size_t *value_len)
{
    SHMOBJ__RACY_BEGIN();
    int rc = shmobj_map_iter_next_reads(it, key, key_len, value, value_len);
    SHMOBJ__RACY_END();
    return rc;
}
#endif

void shmobj_map_iter_close(shmobj_map_iter *it)
{
    if (it == NULL)
        return;
    if (it->guard != 0)
        guard_leave(it->map, it->guard);
    shmobj__map_release(it->map);
    free(it->refs);
    free(it->copy);
    free(it);
}
