/* What the map's sources share: the process-local handle, the checked
 * copy of an entry, the shape cache's encoding, and the small steps every
 * path takes inline (the seeded hash, the stale-map check, writer
 * sections, intent records, the shard lock's release). The bytes in the
 * segment are described in map-layout.h; each source keeps one job:
 *
 *   map-table.c   block, entry and table access; the per-handle shape cache
 *   map-epoch.c   epochs, read guards and the reader slots that hold them
 *   map-limbo.c   retirement to the limbo lists and reclaim
 *   map-repair.c  the shard lock and the repair after its owner died
 *   map-read.c    the optimistic reads: get (the hot path), contains, views
 *   map-batch.c   batched gets and prefetch hints
 *   map-write.c   set, add, del, clear and table growth
 *   map-iter.c    cursors
 *   map-watch.c   watches of a key (shmobj/watch.h)
 *   map.c         create, open, close, statistics and the check
 *
 * Invariants every source keeps (doc/format-map.md gives the reasoning):
 *  - A key lives in shard hash >> 58 of the map's seeded hash, for ever.
 *  - A shard's table and the entries it references change only under the
 *    shard lock and only inside a writer section (seq odd, write_begin()
 *    to write_end()); readers accept what they read only if seq held.
 *  - Nothing read from the segment is used before it is bounds-checked,
 *    and it is read once into a local (struct ent) first.
 *  - Unlinked blocks are retired, never freed at once; they are freed when
 *    no guarded reader can still see them.
 *  - Functions that the hot get path calls are static inline here or live
 *    in map-read.c beside it, so the split into files adds no call to it;
 *    what is out of line here was out of line before. */
#ifndef SHMOBJ_MAP_INTERNAL_H
#define SHMOBJ_MAP_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arena.h"
#include "bytes.h"
#include "map-layout.h"
#include "os.h"
#include "shmobj/map.h"
#include "shmobj_htcore.h"
#include "space.h"

/* The optimistic reads race with writers by design: what they read is
 * used only if the shard's sequence counter held, a check the thread
 * sanitizer cannot follow. In its builds the public read calls run with
 * its reads ignored (writes, atomics and locks are still tracked); other
 * builds compile the calls unchanged. */
#include "racy.h"
#if defined(SHMOBJ__TSAN)
#define MAP_TSAN 1
#define MAP_READS_LINKAGE static
#define MAP_READS_NAME(name) name##_reads
#else
#define MAP_READS_LINKAGE
#define MAP_READS_NAME(name) name
#endif

struct shmobj_map {
    struct shmobj__space *sp;
    shmobj_segment *seg;
    /* The handle's own hold (1 until shmobj_map_close()) plus one per
     * open cursor and unreleased view: the handle, its reader slot and its
     * hold on the segment's space go when the last is released
     * (shmobj__map_release()), so a cursor or view outlives its map's
     * close and the map its segment's. */
    _Atomic uint32_t holds;
    struct shmobj__map_ctl *ctl;
    shmobj__ref ctl_ref;
    struct shmobj__map_reader *reader; /* this handle's guard slot */
    uint64_t seed;
    uint64_t seed_mixed;    /* shmobj_htcore_seed_mix(seed) */
    const uint8_t *base;    /* the segment's mapping (sp->base, fixed) */
    uint64_t read_delay_ns; /* tests: widens the unguarded read's window */
    uint64_t hot_klen_lim;  /* keys shorter than this take shmobj_map_get()'s
                               call-free path: MAP_HOT_MAX + 1, or 0
                               while read_delay_ns is set */
    /* tests: called after each entry that
     * shmobj__map_table_free_entries() frees (to stop or kill the process
     * inside a deep free) */
    void (*free_hook)(void *arg, uint64_t ref);
    void *free_hook_arg;
    /* Per shard, a cache of its table's validated shape, so that a lookup
     * need not validate the table block each time: the shape in one word
     * (see shape_make() in map-table.c), which threads sharing the handle
     * read whole without a lock, and the table header's word 7 (stride,
     * check) as it was then. A thread may read a shape and a check word of
     * different tables while another rewrites them: the check then fails
     * and the table is validated again. 0 until validated. */
    _Atomic uint64_t shape[SHMOBJ__MAP_SHARDS];
    _Atomic uint64_t shape_check[SHMOBJ__MAP_SHARDS];
};

/* The seeded hash of a key, inline (the hot paths hash every key). */
static inline uint64_t map_hash(const shmobj_map *m, const void *key, size_t klen)
{
    return shmobj_htcore_hash64_mixed(key, klen, m->seed_mixed);
}

struct shmobj_map_iter {
    shmobj_map *map;
    unsigned shard;       /* next shard to snapshot */
    uint64_t *refs;       /* snapshot of the current shard's entries */
    size_t n, cap, pos;
    uint64_t guard;       /* epoch + 1 of the held guard; 0 = none */
    /* A read-only handle's cursor holds no guard: it copies the shard's
     * entries (klen, vlen as two u32, key, value, each padded to 8)
     * inside the snapshot's validated section; refs[i] is then entry i's
     * offset in `copy`. */
    uint8_t *copy;
    size_t copy_len, copy_cap;
};

/* A bounds-checked entry, copied to locals once. */
struct ent {
    const uint8_t *p; /* payload */
    uint32_t klen, vlen;
    uint64_t hash_gen;
    shmobj__ref ref;  /* full reference (generation from hash_gen) */
};

static inline uint64_t slot_of(shmobj__ref ref)
{
    return shmobj__ref_off(ref) >> SHMOBJ__MAP_SLOT_SHIFT;
}

/* Keys the hot instance of map-read.c's lookup_fast() compares inline, and
 * values it copies inline: longer ones go to the general instance (memcmp,
 * memcpy). */
#define MAP_HOT_MAX 64u

#define MAP_SPIN_LIMIT 256       /* reader spins on an odd seq before it
                                    queues on the lock */
#define MAP_RECLAIM_EVERY 64     /* retirements between reclaim attempts */
#define MAP_LIVENESS_AFTER 4096  /* retired items before checking whether a
                                    blocking reader died */
#define MAP_MIN_CAPACITY 16
#define MAP_ITER_LOCK_AFTER 8    /* optimistic snapshot attempts */
#define MAP_RO_SNAPSHOT_TRIES 100000 /* a read-only cursor's tries of one shard */
#define MAP_RO_WAIT_STEPS 10000  /* 1 ms sleeps of a read-only reader on a
                                    shard inside a writer section before
                                    SHMOBJ_EBUSY (about the lock's 10 s) */

/* After a committed change of key hash `hash` (or, with
 * SHMOBJ__WATCH_WHOLE, of every key): wake the key's watchers (space.h;
 * map-watch.c makes them). */
static inline void map_changed(shmobj_map *m, uint64_t hash, unsigned flags)
{
    shmobj__space_changed(m->sp, shmobj__ref_off(m->ctl_ref), hash, flags);
}

static inline struct shmobj__map_shard *shard_of(const shmobj_map *m, uint64_t hash)
{
    return &m->ctl->shards_[hash >> SHMOBJ__MAP_SHARD_SHIFT];
}

static inline int key_ok(const shmobj_map *m, const void *key, size_t klen)
{
    return m != NULL && (key != NULL || klen == 0) && klen <= UINT32_MAX;
}

static inline const uint8_t *ent_value(const struct ent *e)
{
    return e->p + shmobj__map_value_off(e->klen);
}
static inline const uint8_t *ent_key(const struct ent *e)
{
    return e->p + SHMOBJ__MAP_ENTRY_HEADER;
}

/* ---- tables and the shape cache (map-table.c) ---------------------------- */

/* Bytes of one group of a map table (an htcore ref-mode group, whose
 * layout htcore's golden vectors pin). The lookups below read groups with
 * htcore's inline probe pieces only. */
#define MAP_GROUP_BYTES SHMOBJ_HTCORE_REF_GROUP_BYTES

/* A shape word: the table block's reference, whose offset is 64-aligned
 * (shmobj__map_table_new() asks for that), with log2(groups) + 1 in the 6
 * low bits, so never 0. The groups start SHMOBJ__MAP_TABLE_PREFIX +
 * SHMOBJ_HTCORE_HEADER_SIZE bytes into the block. A table of another form
 * (damage) is not cached: its shape is 0, as is that of a shard not yet
 * looked at, and nothing is read through a shape of 0. */
#define SHAPE_LOW UINT64_C(63)
#define SHAPE_GROUPS_AT (SHMOBJ__MAP_TABLE_PREFIX + SHMOBJ_HTCORE_HEADER_SIZE)

static inline uint64_t shape_gmask(uint64_t shape) /* groups - 1 */
{
    return (UINT64_C(1) << ((shape - 1) & SHAPE_LOW)) - 1;
}

/* The address of the first group of a shape's table, as an integer: a
 * shape read before it is validated may be 0, and its address then lies
 * far outside the mapping (only a prefetch may use it). */
static inline uintptr_t shape_groups_addr(const shmobj_map *m, uint64_t shape)
{
    return (uintptr_t)m->base + (uintptr_t)(shape & SHMOBJ__REF_OFF_MASK & ~SHAPE_LOW) +
           SHAPE_GROUPS_AT;
}

/* The table's header, from a validated shape word. */
static inline uint8_t *shape_header(const shmobj_map *m, uint64_t shape)
{
    return (uint8_t *)(shape_groups_addr(m, shape) - SHMOBJ_HTCORE_HEADER_SIZE);
}

/* The first group of the table of a validated shape word. */
static inline const uint8_t *shape_groups(const shmobj_map *m, uint64_t shape)
{
    return (const uint8_t *)shape_groups_addr(m, shape);
}

/* The handle shmobj_htcore_attach() built when the shape was made. */
static inline void shape_handle(const shmobj_map *m, uint64_t shape, shmobj_htcore *ht)
{
    uint8_t *hdr = shape_header(m, shape);
    ht->hdr = (shmobj_htcore_header *)(void *)hdr;
    ht->groups = hdr + SHMOBJ_HTCORE_HEADER_SIZE;
    ht->group_bytes = MAP_GROUP_BYTES;
    ht->mask = (shape_gmask(shape) + 1) * SHMOBJ_HTCORE_GROUP - 1;
    ht->seed = m->seed;
    ht->key_size = 0;
    ht->value_size = SHMOBJ_HTCORE_REF_SLOT;
    ht->stride = SHMOBJ_HTCORE_REF_SLOT;
    ht->flags = SHMOBJ_HTCORE_FLAG_REF;
}

/* Word 7 of a table header (stride and check value). */
static inline uint64_t header_word7(const shmobj_htcore_header *h)
{
    return shmobj_htcore_header_tail((const unsigned char *)h);
}

/* A heap block of at least min bytes, readable: ECORRUPT otherwise. */
int shmobj__map_block_at(shmobj_map *m, shmobj__ref ref, uint64_t min,
                         uint8_t **p, uint64_t *usable);
/* The entry a slot value names, checked for memory safety only. */
int shmobj__map_entry_peek(shmobj_map *m, uint64_t slot, struct ent *e);
/* The entry a slot value names, checked against its heap block. */
int shmobj__map_slot_entry(shmobj_map *m, uint64_t slot, struct ent *e);
/* htcore's hash callback: the hash of the key of a slot's entry. */
int shmobj__map_slot_hash(void *ctx, uint64_t slot, uint64_t *hash);
/* The htcore handle of a table block, validated. */
int shmobj__map_table_at(shmobj_map *m, shmobj__ref ref, shmobj_htcore *ht);
/* Validate the table of shard idx and cache its shape. */
int shmobj__map_table_refresh(shmobj_map *m, unsigned idx, shmobj__ref ref,
                              shmobj_htcore *ht);

/* shmobj__map_table_at() through the handle's shape cache of shard idx: a
 * hit needs the same block and header fields that still say what they
 * said at validation (damage to them is noticed at once). Inline: every
 * write runs it under the lock. */
static inline int shmobj__map_table_get(shmobj_map *m, unsigned idx, shmobj__ref ref,
                                        shmobj_htcore *ht)
{
    uint64_t shape = atomic_load_explicit(&m->shape[idx], memory_order_relaxed);
    if (shape != 0 && (shape & ~SHAPE_LOW) == ref) {
        shape_handle(m, shape, ht);
        const shmobj_htcore_header *h = ht->hdr;
        if (h->magic == SHMOBJ_HTCORE_MAGIC && h->version == SHMOBJ_HTCORE_VERSION &&
            h->flags == SHMOBJ_HTCORE_FLAG_REF && h->slots == ht->mask + 1 &&
            header_word7(h) ==
                atomic_load_explicit(&m->shape_check[idx], memory_order_relaxed))
            return 0;
    }
    return shmobj__map_table_refresh(m, idx, ref, ht);
}

/* A new empty table block for capacity entries. */
int shmobj__map_table_new(shmobj_map *m, uint64_t capacity, shmobj__ref *out,
                          shmobj_htcore *ht);

/* ---- epochs and read guards (map-epoch.c) -------------------------------- */

/* SHMOBJ_ESTALE when the handle's control block is no longer the live
 * block it opened (the map was destroyed, its memory perhaps reused): then
 * nothing of the block may be read or written. One lock-free look at the
 * block's header; every path but the unguarded copy-out try makes it. */
static inline int map_destroyed(shmobj_map *m)
{
    /* The control block was validated at open and the mapping never
     * moves, so its header is readable: one load of its generation. */
    return shmobj__arena_gen_is(m->base, shmobj__ref_off(m->ctl_ref),
                                shmobj__ref_gen(m->ctl_ref))
               ? 0
               : SHMOBJ_ESTALE;
}

/* SHMOBJ_ESTALE also once the segment handle was closed (the handle
 * outlives it, space.h, but answers nothing more). */
static inline int map_stale(shmobj_map *m)
{
    if (shmobj__space_closed(m->sp))
        return SHMOBJ_ESTALE;
    return map_destroyed(m);
}

static inline void shmobj__map_hold(shmobj_map *m)
{
    atomic_fetch_add_explicit(&m->holds, 1, memory_order_relaxed);
}

/* Release one hold; the last gives the reader slot back (unless the map
 * was destroyed), releases the segment and frees the handle. */
void shmobj__map_release(shmobj_map *m);

static inline void guard_leave(shmobj_map *m, uint64_t g)
{
    atomic_fetch_sub_explicit(&m->reader->active[(g - 1) & 1], 1,
                              memory_order_release);
}

/* Enter a read guard: *g gets epoch + 1; ESTALE when the map is gone. */
int shmobj__map_guard_enter(shmobj_map *m, uint64_t *g);
/* Move the epoch on when no reader of the epoch before remains; with
 * check_liveness, reap the slots of dead readers that hold it back. */
void shmobj__map_epoch_advance(shmobj_map *m, int check_liveness);
/* Claim a reader slot for a new handle (EFULL when none is free). */
int shmobj__map_reader_claim(shmobj_map *m);
/* Give reader slot i back once its owner word was taken to 0. */
void shmobj__map_reader_release(struct shmobj__map_ctl *c, unsigned i);

/* ---- writer sections ------------------------------------------------------ */

/* A shard's sequence counter is odd exactly while its lock holder changes
 * the table: readers that saw it even before and after their reads, with
 * the same value, read a table no writer touched meanwhile. */

static inline void write_begin(struct shmobj__map_shard *s)
{
    uint64_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, q + 1, memory_order_relaxed);
    /* the odd seq is visible before any change of the table */
    atomic_thread_fence(memory_order_release);
}

static inline void write_end(struct shmobj__map_shard *s)
{
    uint64_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, q + 1, memory_order_release);
}

/* ---- retirement (map-limbo.c) -------------------------------------------- */

static inline void free_block(shmobj_map *m, shmobj__ref ref)
{
    /* ESTALE here means "already freed": a repair redoing a free. */
    (void)m->sp->ops->free(m->sp, ref);
}

/* Put an unlinked block (| SHMOBJ__MAP_RETIRE_DEEP for a cleared table)
 * on the limbo list of the current epoch; reclaims now and then. */
void shmobj__map_retire(shmobj_map *m, struct shmobj__map_shard *s, uint64_t item);
/* Free what the map retired in every shard, waiting (bounded) for the
 * readers the epochs say may still see it: what an allocation that
 * failed does before it gives up. Called with no shard lock held (it
 * takes each in turn). 1 when something was freed (worth a retry). */
int shmobj__map_reclaim_all(shmobj_map *m);
/* Whether ref heads one of the shard's limbo lists. */
int shmobj__map_in_limbo(struct shmobj__map_shard *s, uint64_t ref);
/* Free the entries a (retired, unreadable) table references. */
void shmobj__map_table_free_entries(shmobj_map *m, shmobj__ref tref);
/* Walk limbo list li of shard s, at most limbo_len + 1 items (a damaged
 * list may hold a cycle): fn (NULL: none) gets each item and the link read
 * from it before the call, so it may free the item. 0 at the list's end;
 * SHMOBJ_ECORRUPT when an item is no live block (the walk stops after
 * giving it to fn, with a next of 0) or the list is longer than the budget
 * (the walk stops before the item past it). */
int shmobj__map_limbo_walk(shmobj_map *m, struct shmobj__map_shard *s, unsigned li,
                           void (*fn)(shmobj_map *m, struct shmobj__map_shard *s,
                                      unsigned li, uint64_t item, uint64_t next,
                                      void *arg),
                           void *arg);

/* ---- the shard lock and repair (map-repair.c) ---------------------------- */

static inline void clear_intent(struct shmobj__map_shard *s)
{
    atomic_store_explicit(&s->intent_op, 0, memory_order_release);
    atomic_store_explicit(&s->intent_new, 0, memory_order_relaxed);
    atomic_store_explicit(&s->intent_old, 0, memory_order_relaxed);
    atomic_store_explicit(&s->intent_table, 0, memory_order_relaxed);
    atomic_store_explicit(&s->intent_table_old, 0, memory_order_relaxed);
}

/* Take a shard's lock, repairing the shard first when its owner died
 * (or a damaged seq says a change is under way). */
int shmobj__map_shard_lock(shmobj_map *m, struct shmobj__map_shard *s);

static inline void shard_unlock(shmobj_map *m, struct shmobj__map_shard *s)
{
    m->sp->ops->live->unlock(m->sp, &s->lock);
}

/* ---- reads (map-read.c, map-batch.c) ------------------------------------- */

/* Copy a value; an 8-byte value is read atomically (it may be added to). */
static inline void copy_value(void *dst, const uint8_t *value, uint32_t vlen)
{
    if (vlen == 8) {
        uint64_t v = atomic_load_explicit((_Atomic uint64_t *)(void *)value,
                                          memory_order_relaxed);
        memcpy(dst, &v, 8);
    } else if (vlen > 0) {
        memcpy(dst, value, vlen);
    }
}

/* The value of slot j of the group at gp: an entry's payload offset / 16. */
static inline uint64_t group_slot(const uint8_t *gp, unsigned j)
{
    return shmobj_htcore_ref_word_value(shmobj_htcore_ref_word(gp, j));
}

/* shmobj_map_get()'s result from a lookup's. */
static inline int get_result(int rc, uint32_t vlen, size_t buf_len, size_t *value_len)
{
    if (rc != 0)
        return rc;
    if (value_len != NULL)
        *value_len = vlen;
    return vlen <= buf_len ? 0 : SHMOBJ_ENOBUFS;
}

/* The key's home group through the shard's cached shape, or NULL when
 * none is cached. The shape was validated when cached, so the group lies
 * in the mapping (which never shrinks), even if the table was replaced and
 * freed since: fit for hints, whose reads nothing trusts. */
static inline const uint8_t *home_group_hint(const shmobj_map *m, uint64_t hash)
{
    uint64_t shape = atomic_load_explicit(&m->shape[hash >> SHMOBJ__MAP_SHARD_SHIFT],
                                          memory_order_relaxed);
    if (shape == 0)
        return NULL;
    return shape_groups(m, shape) +
           shmobj_htcore_probe_home(hash, shape_gmask(shape)) * MAP_GROUP_BYTES;
}

static inline void prefetch_hash(shmobj_map *map, uint64_t hash)
{
    /* Only a hint: a stale shape prefetches a useless line, and a prefetch
     * never faults. No lock, no guard, no validation needed. */
    const uint8_t *gp = home_group_hint(map, hash);
    if (gp == NULL)
        return;
#if defined(__GNUC__)
    __builtin_prefetch(gp);
    __builtin_prefetch(gp + 64);
    __builtin_prefetch(gp + 128);
#else
    (void)gp;
#endif
}

/* Wait out a writer section of shard s (spin, then queue on its lock):
 * 0 to try again, or the error that ends the read. */
int shmobj__map_wait_writer(shmobj_map *m, struct shmobj__map_shard *s,
                            unsigned *spins);
/* A copy-out lookup: the unguarded try, else a guarded one. 0 (value
 * copied when it fits, *vlen set), ENOTFOUND or an error. */
int shmobj__map_lookup_copy(shmobj_map *m, uint64_t hash, const void *key,
                            size_t klen, void *buf, size_t buf_len, uint32_t *vlen);

#endif /* SHMOBJ_MAP_INTERNAL_H */
