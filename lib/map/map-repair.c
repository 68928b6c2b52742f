/* The shard lock and the repair of a shard whose lock holder died.
 *
 * Invariants kept here:
 *  - Whoever takes a shard's lock from a dead owner (EOWNERDEAD), or finds
 *    seq odd with the lock free, repairs the shard before anything else:
 *    seq odd while it works and even after, every slot naming a valid
 *    entry of this shard, counters recounted, and every block the dead
 *    writer was moving (the shard's intent record) linked, retired or
 *    freed, never two of these.
 *  - Each step is idempotent, so a repair killed half-way is repaired the
 *    same way; a repair that fails leaves the lock to be taken over and
 *    repaired again by the next locker.
 *  - A destroyed map's lock is not touched (its bytes are someone else's). */
#include "map-internal.h"

static int linked(const shmobj_htcore *ht, uint64_t ref)
{
    uint64_t i = 0;
    while (shmobj_htcore_next(ht, &i) == 0) {
        if (shmobj_htcore_ref_value(ht, i) == slot_of(ref))
            return 1;
        i++;
    }
    return 0;
}

/* The previous lock owner died. Make the shard consistent: even seq, a
 * table whose every slot names a valid entry of this shard, counters that
 * match, and every block the dead writer was moving either linked, retired
 * or freed. Idempotent: a crash during repair is repaired again. */
static int shard_repair(shmobj_map *m, struct shmobj__map_shard *s)
{
    shmobj_htcore ht;
    uint64_t q = atomic_load(&s->seq), i = 0;
    unsigned idx = (unsigned)(s - m->ctl->shards_);
    /* Readers must keep retrying while we repair: seq odd until the table
     * is consistent again (it is odd already when the owner died inside a
     * writer section). */
    if (!(q & 1))
        write_begin(s);

    uint64_t op = atomic_load(&s->intent_op);
    uint64_t tnew = atomic_load(&s->intent_table);
    uint64_t told = atomic_load(&s->intent_table_old);
    uint64_t cur = atomic_load(&s->table);
    if (shmobj__map_table_at(m, cur, &ht) != 0) {
        /* The published table is unusable; a fully built new one (its
         * publication is the last step) may still be adopted. */
        if (tnew == 0 || shmobj__map_table_at(m, tnew, &ht) != 0) {
            write_end(s);
            return SHMOBJ_ECORRUPT;
        }
        atomic_store(&s->table, tnew);
        cur = tnew;
    }
    /* Slots whose entry is gone or damaged are dropped. */
    while (shmobj_htcore_next(&ht, &i) == 0) {
        struct ent e;
        uint64_t h;
        if (shmobj__map_slot_entry(m, shmobj_htcore_ref_value(&ht, i), &e) != 0 ||
            (h = shmobj_htcore_hash64(e.p + SHMOBJ__MAP_ENTRY_HEADER,
                                      e.klen, m->seed)) >> SHMOBJ__MAP_SHARD_SHIFT != idx ||
            (h & ~SHMOBJ__MAP_GEN_MASK) != (e.hash_gen & ~SHMOBJ__MAP_GEN_MASK))
            shmobj_htcore_erase(&ht, i);
        i++;
    }
    shmobj_htcore_recount(&ht);
    atomic_store(&s->count, shmobj_htcore_count(&ht));
    write_end(s);

    if (tnew != 0) {
        if (cur == tnew) {
            if (told != 0 && !shmobj__map_in_limbo(s, told & ~SHMOBJ__MAP_RETIRE_DEEP))
                shmobj__map_retire(m, s, told | (op == SHMOBJ__MAP_OP_CLEAR
                                   ? SHMOBJ__MAP_RETIRE_DEEP : 0));
        } else {
            free_block(m, tnew);
        }
    }
    if (op == SHMOBJ__MAP_OP_SET) {
        uint64_t n = atomic_load(&s->intent_new);
        uint64_t o = atomic_load(&s->intent_old);
        if (n != 0 && linked(&ht, n)) {
            if (o != 0 && !linked(&ht, o) && !shmobj__map_in_limbo(s, o))
                shmobj__map_retire(m, s, o);
        } else if (n != 0) {
            free_block(m, n);
        }
    } else if (op == SHMOBJ__MAP_OP_DEL) {
        uint64_t o = atomic_load(&s->intent_old);
        if (o != 0 && !linked(&ht, o) && !shmobj__map_in_limbo(s, o))
            shmobj__map_retire(m, s, o);
    }
    uint64_t f = atomic_load(&s->intent_free);
    if (f != 0) {
        if (!shmobj__map_in_limbo(s, f & ~SHMOBJ__MAP_RETIRE_DEEP)) {
            if (f & SHMOBJ__MAP_RETIRE_DEEP)
                shmobj__map_table_free_entries(m, f & ~SHMOBJ__MAP_RETIRE_DEEP);
            free_block(m, f & ~SHMOBJ__MAP_RETIRE_DEEP);
        }
        atomic_store(&s->intent_free, 0);
    }
    clear_intent(s);
    return 0;
}

int shmobj__map_shard_lock(shmobj_map *m, struct shmobj__map_shard *s)
{
    /* a destroyed map's lock is someone else's bytes now: not touched */
    if (map_stale(m) != 0)
        return SHMOBJ_ESTALE;
    const struct shmobj__space_live_ops *live = m->sp->ops->live;
    int rc = live->lock(m->sp, &s->lock, 0);
    if (rc == SHMOBJ_EOWNERDEAD || (rc == 0 && (atomic_load(&s->seq) & 1))) {
        /* Its owner died inside (or a damaged seq says a change is under
         * way): repair; a repair that fails leaves the lock to be taken
         * over and repaired again by the next locker. */
        rc = shard_repair(m, s);
        if (rc != 0)
            live->unlock_broken(m->sp, &s->lock);
    }
    return rc;
}
