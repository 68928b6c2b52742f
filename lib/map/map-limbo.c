/* Retirement: unlinked entries and replaced tables wait on per-shard limbo
 * lists until no reader can see them, then return to the heap.
 *
 * Invariants kept here (all under the shard lock):
 *  - A block retired at epoch r is freed only once the epoch has reached
 *    r + 2: every guard that could have seen it linked has been left. The
 *    list of epoch e (slot e % 3) last held epoch e - 3 or older, so it is
 *    freeable when shmobj__map_retire() meets it again.
 *  - Each item is recorded in intent_free before it leaves its list, so a
 *    kill while freeing it is finished by the repair (a second free of the
 *    same reference is refused by the heap by its generation).
 *  - A cleared table's entries are freed slot by slot, each slot erased
 *    before its entry is freed, so a repair that runs the deep free again
 *    meets only entries not yet freed.
 *  - Every walk of a list is bounded by the shard's count of items plus
 *    one (shmobj__map_limbo_walk), whatever a damaged link says. */
#include <stdatomic.h>
#include <string.h>

#include "map-internal.h"

/* Free every entry a table references (the deep retirement of clear()).
 * Each slot is erased before its entry is freed, so the table records the
 * progress: a repair that runs this again after a crash meets only entries
 * not yet freed. It must not meet a freed one: its reference is rebuilt
 * from the generation in the entry's own bytes, which, once the block is
 * reused, are the new owner's (a map entry of another owner would pass the
 * heap's check and be freed). A crash between the erase and the free leaks
 * that one entry. The table is retired past every reader (its epoch is two
 * behind), so nobody else reads the slots. */
void shmobj__map_table_free_entries(shmobj_map *m, shmobj__ref tref)
{
    shmobj_htcore ht;
    uint64_t i = 0;
    if (shmobj__map_table_at(m, tref, &ht) != 0)
        return;
    while (shmobj_htcore_next(&ht, &i) == 0) {
        struct ent e;
        int ok = shmobj__map_entry_peek(m, shmobj_htcore_ref_value(&ht, i), &e) == 0;
        shmobj_htcore_erase(&ht, i);
        if (ok) {
            free_block(m, e.ref);
            if (m->free_hook != NULL)
                m->free_hook(m->free_hook_arg, e.ref);
        }
        i++;
    }
}

int shmobj__map_limbo_walk(shmobj_map *m, struct shmobj__map_shard *s, unsigned li,
                           void (*fn)(shmobj_map *m, struct shmobj__map_shard *s,
                                      unsigned li, uint64_t item, uint64_t next,
                                      void *arg),
                           void *arg)
{
    uint64_t budget = atomic_load(&s->limbo_len) + 1;
    uint64_t item = atomic_load(&s->limbo_head[li]);
    while (item != 0) {
        if (budget-- == 0)
            return SHMOBJ_ECORRUPT; /* more items than the shard counts */
        uint8_t *p;
        uint64_t next = 0;
        int live = shmobj__map_block_at(m, item & ~SHMOBJ__MAP_RETIRE_DEEP,
                                        SHMOBJ__MAP_LINK_OFF + 8, &p, NULL) == 0;
        if (live)
            memcpy(&next, p + SHMOBJ__MAP_LINK_OFF, 8);
        if (fn != NULL)
            fn(m, s, li, item, next, arg);
        if (!live)
            return SHMOBJ_ECORRUPT;
        item = next;
    }
    return 0;
}

/* Free one item of limbo list li. It is recorded in intent_free before it
 * leaves the list, so a crash frees it at the repair (again: harmless). */
static void drain_item(shmobj_map *m, struct shmobj__map_shard *s, unsigned li,
                       uint64_t item, uint64_t next, void *arg)
{
    shmobj__ref ref = item & ~SHMOBJ__MAP_RETIRE_DEEP;
    (void)arg;
    atomic_store_explicit(&s->intent_free, item, memory_order_release);
    atomic_store_explicit(&s->limbo_head[li], next, memory_order_release);
    if (item & SHMOBJ__MAP_RETIRE_DEEP)
        shmobj__map_table_free_entries(m, ref);
    free_block(m, ref);
    atomic_store_explicit(&s->intent_free, 0, memory_order_release);
    uint64_t len = atomic_load(&s->limbo_len);
    if (len > 0)
        atomic_store(&s->limbo_len, len - 1);
}

/* Free one limbo list. */
static void drain(shmobj_map *m, struct shmobj__map_shard *s, unsigned li)
{
    /* a cycle in a damaged list: drop the rest */
    if (shmobj__map_limbo_walk(m, s, li, drain_item, NULL) != 0)
        atomic_store(&s->limbo_head[li], 0);
}

/* Free what no reader can see any more: lists whose epoch is 2 behind. */
static void reclaim(shmobj_map *m, struct shmobj__map_shard *s, int liveness)
{
    shmobj__map_epoch_advance(m, liveness);
    shmobj__map_epoch_advance(m, liveness);
    uint64_t e = atomic_load(&m->ctl->epoch);
    for (unsigned li = 0; li < 3; li++)
        if (atomic_load(&s->limbo_head[li]) != 0 &&
            atomic_load(&s->limbo_epoch[li]) + 2 <= e)
            drain(m, s, li);
}

/* Put an unlinked block on the limbo list of the current epoch. The list
 * slot of epoch e last held epoch e - 3 or older: freeable now. */
void shmobj__map_retire(shmobj_map *m, struct shmobj__map_shard *s, uint64_t item)
{
    uint64_t e = atomic_load(&m->ctl->epoch);
    unsigned li = (unsigned)(e % 3);
    uint8_t *p;
    if (atomic_load(&s->limbo_epoch[li]) != e) {
        if (atomic_load(&s->limbo_head[li]) != 0)
            drain(m, s, li);
        atomic_store(&s->limbo_epoch[li], e);
    }
    if (shmobj__map_block_at(m, item & ~SHMOBJ__MAP_RETIRE_DEEP, SHMOBJ__MAP_LINK_OFF + 8,
                             &p, NULL) != 0)
        return; /* not a live block: nothing to free later */
    uint64_t head = atomic_load(&s->limbo_head[li]);
    memcpy(p + SHMOBJ__MAP_LINK_OFF, &head, 8);
    atomic_store_explicit(&s->limbo_head[li], item, memory_order_release);
    uint64_t len = atomic_fetch_add(&s->limbo_len, 1) + 1;
    if (len % MAP_RECLAIM_EVERY == 0 || (item & SHMOBJ__MAP_RETIRE_DEEP))
        reclaim(m, s, len >= MAP_LIVENESS_AFTER);
}

int shmobj__map_in_limbo(struct shmobj__map_shard *s, uint64_t ref)
{
    for (unsigned li = 0; li < 3; li++)
        if ((atomic_load(&s->limbo_head[li]) & ~SHMOBJ__MAP_RETIRE_DEEP) == ref)
            return 1;
    return 0;
}
