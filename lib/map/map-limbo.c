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
 *    one (shmobj__map_limbo_walk), whatever a damaged link says.
 *  - Retired memory never holds a full segment hostage: an allocation of
 *    the map that fails first reclaims every shard's limbo, waiting a
 *    bounded time for the readers the epochs say may still see it
 *    (shmobj__map_reclaim_all). */
#include <stdatomic.h>
#include <string.h>

#include "map-internal.h"
#include "step.h"

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
    SHMOBJ__STEP("map.reclaim.freeing");
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
    SHMOBJ__STEP("map.retire.linked");
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

/* How long an allocation that failed waits, at most, for readers to leave
 * the epochs that hold retired memory back: a read section is short, but
 * a reader preempted inside one (more processes than CPUs) may be off
 * its CPU for some scheduler ticks. A guard held longer (a view, a
 * cursor) keeps what was retired after it until it is released. */
#define MAP_RECLAIM_WAIT_NS (UINT64_C(50) * 1000000)
#define MAP_RECLAIM_YIELDS 8 /* rounds that only yield before sleeping */

int shmobj__map_reclaim_all(shmobj_map *m)
{
    struct shmobj__map_ctl *c = m->ctl;
    uint64_t deadline = 0;
    int freed = 0;
    for (unsigned round = 0;; round++) {
        unsigned left = 0;
        for (unsigned i = 0; i < SHMOBJ__MAP_SHARDS; i++) {
            struct shmobj__map_shard *s = &c->shards_[i];
            if (atomic_load(&s->limbo_head[0]) == 0 &&
                atomic_load(&s->limbo_head[1]) == 0 &&
                atomic_load(&s->limbo_head[2]) == 0)
                continue;
            if (shmobj__map_shard_lock(m, s) != 0)
                continue; /* stale or damaged: nothing to win there */
            SHMOBJ__STEP("map.reclaim.locked");
            uint64_t before = atomic_load(&s->limbo_len);
            reclaim(m, s, 1);
            uint64_t after = atomic_load(&s->limbo_len);
            if (after < before)
                freed = 1;
            for (unsigned li = 0; li < 3; li++)
                if (atomic_load(&s->limbo_head[li]) != 0)
                    left++;
            shard_unlock(m, s);
        }
        if (left == 0)
            return freed;
        uint64_t now = shmobj__os_now_ns();
        if (deadline == 0)
            deadline = now + MAP_RECLAIM_WAIT_NS;
        if (now >= deadline)
            return freed;
        /* readers still in an older epoch: let them run */
        if (round < MAP_RECLAIM_YIELDS) {
            m->sp->ops->live->pause(m->sp);
        } else {
            _Atomic uint32_t nap = 0;
            (void)shmobj__os_futex_wait(&nap, 0, now + 1000000 < deadline
                                                     ? now + 1000000
                                                     : deadline);
        }
    }
}
