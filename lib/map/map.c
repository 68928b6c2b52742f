/* The shared map: htcore ref-mode tables in a segment, 64 shards, each with
 * a lock for writers (the library's own, through space.h) and a sequence
 * counter for readers that take no lock unless a writer holds them up.
 *
 * Invariants kept here (doc/format-map.md gives the reasoning in full):
 *  - A key lives in shard hash >> 58 of the map's seeded hash, for ever; so
 *    a consistent view of one shard holds each present key exactly once.
 *  - A shard's table and the entries it references change only under the
 *    shard lock, and only inside a writer section (seq odd). A reader copies
 *    seq (even), reads, and accepts what it read only if seq is unchanged;
 *    anything it reads is bounds-checked first, and a failed check inside a
 *    section whose seq changed is a retry, not an error.
 *  - Entries are immutable once linked, except an 8-byte value changed by
 *    atomic addition. Replacing or deleting an entry, and replacing a table,
 *    retire the old block to the shard's limbo lists; it is freed only when
 *    the epoch has advanced twice past its retirement, i.e. when no reader
 *    that could have seen it still holds a guard. Readers never touch freed
 *    memory, and views stay valid until released.
 *  - A table grows by building a new one while the old one stays readable
 *    (readers proceed), then publishing it with one store inside a short
 *    writer section.
 *  - Before a lock holder changes anything it records its intent in the
 *    shard; the next locker after a crash (EOWNERDEAD) repairs the shard
 *    from the intent and a scan of the table, so a kill at any instruction
 *    loses nothing that was committed and leaks at most one block. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "bytes.h"
#include "cpu.h"
#include "map-layout.h"
#include "os.h"
#include "shmobj/map.h"
#include "shmobj/segment.h"
#include "shmobj_htcore.h"
#include "space.h"

/* The optimistic reads race with writers by design: what they read is
 * used only if the shard's sequence counter held, a check the thread
 * sanitizer cannot follow. In its builds the public read calls run with
 * its reads ignored (writes, atomics and locks are still tracked); other
 * builds compile the calls unchanged. */
#if defined(__SANITIZE_THREAD__)
#define MAP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MAP_TSAN 1
#endif
#endif
#if defined(MAP_TSAN)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#define MAP_READS_LINKAGE static
#define MAP_READS_NAME(name) name##_reads
#else
#define MAP_READS_LINKAGE
#define MAP_READS_NAME(name) name
#endif

struct shmobj_map {
    struct shmobj__space *sp;
    shmobj_segment *seg;
    struct shmobj__map_ctl *ctl;
    shmobj__ref ctl_ref;
    struct shmobj__map_reader *reader; /* this handle's guard slot */
    uint64_t seed;
    uint64_t seed_mixed;    /* shmobj_htcore_seed_mix(seed) */
    const uint8_t *base;    /* the segment's mapping (sp->base, fixed) */
    uint64_t read_delay_ns; /* tests: widens the unguarded read's window */
    /* tests: called after each entry free_table_entries() frees (to stop
     * or kill the process inside a deep free) */
    void (*free_hook)(void *arg, uint64_t ref);
    void *free_hook_arg;
    /* Per shard, a cache of its table's validated shape, so that a lookup
     * need not validate the table block each time: the shape in one word
     * (see shape_make()), which threads sharing the handle read whole
     * without a lock, and the table header's word 7 (stride, check) as it
     * was then. A thread may read a shape and a check word of different
     * tables while another rewrites them: the check then fails and the
     * table is validated again. 0 until validated. */
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
};

/* A bounds-checked entry, copied to locals once. */
struct ent {
    const uint8_t *p; /* payload */
    uint32_t klen, vlen;
    uint64_t hash_gen;
    shmobj__ref ref;  /* full reference (generation from hash_gen) */
};

static uint64_t slot_of(shmobj__ref ref)
{
    return shmobj__ref_off(ref) >> SHMOBJ__MAP_SLOT_SHIFT;
}

#define MAP_SPIN_LIMIT 256       /* reader spins on an odd seq before it
                                    queues on the lock */
#define MAP_RECLAIM_EVERY 64     /* retirements between reclaim attempts */
#define MAP_LIVENESS_AFTER 4096  /* retired items before checking whether a
                                    blocking reader died */
#define MAP_MIN_CAPACITY 16
#define MAP_ITER_LOCK_AFTER 8    /* optimistic snapshot attempts */

static struct shmobj__map_shard *shard_of(const shmobj_map *m, uint64_t hash)
{
    return &m->ctl->shards_[hash >> SHMOBJ__MAP_SHARD_SHIFT];
}

/* ---- blocks --------------------------------------------------------------- */

static int block_at(shmobj_map *m, shmobj__ref ref, uint64_t min,
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
    if (block_at(m, ref, SHMOBJ__MAP_ENTRY_HEADER, &p, &usable) != 0)
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
static int entry_peek(shmobj_map *m, uint64_t slot, struct ent *e)
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
static int slot_entry(shmobj_map *m, uint64_t slot, struct ent *e)
{
    struct ent peek;
    if (entry_peek(m, slot, &peek) != 0)
        return SHMOBJ_ECORRUPT;
    return entry_at(m, peek.ref, e);
}

/* The hash of an entry's key, for tables beyond 2^20 groups and checks. */
static int slot_hash(void *ctx, uint64_t slot, uint64_t *hash)
{
    shmobj_map *m = ctx;
    struct ent e;
    if (entry_peek(m, slot, &e) != 0)
        return SHMOBJ_ECORRUPT;
    *hash = shmobj_htcore_hash64(e.p + SHMOBJ__MAP_ENTRY_HEADER, e.klen, m->seed);
    return 0;
}

static const uint8_t *ent_value(const struct ent *e)
{
    return e->p + shmobj__map_value_off(e->klen);
}
static const uint8_t *ent_key(const struct ent *e)
{
    return e->p + SHMOBJ__MAP_ENTRY_HEADER;
}

/* The htcore handle of a table block. */
static int table_at(shmobj_map *m, shmobj__ref ref, shmobj_htcore *ht)
{
    uint8_t *p;
    uint64_t usable;
    if (block_at(m, ref, SHMOBJ__MAP_TABLE_PREFIX + SHMOBJ_HTCORE_HEADER_SIZE,
                 &p, &usable) != 0)
        return SHMOBJ_ECORRUPT;
    if (shmobj_htcore_attach(ht, p + SHMOBJ__MAP_TABLE_PREFIX,
                             usable - SHMOBJ__MAP_TABLE_PREFIX) != 0 ||
        !(ht->flags & SHMOBJ_HTCORE_FLAG_REF))
        return SHMOBJ_ECORRUPT;
    return 0;
}

/* Bytes of one group of a map table (an htcore ref-mode group, whose
 * layout htcore's golden vectors pin). The lookups below read groups with
 * htcore's inline probe pieces only. */
#define MAP_GROUP_BYTES SHMOBJ_HTCORE_REF_GROUP_BYTES

/* A shape word: the table block's reference, whose offset is 64-aligned
 * (table_new() asks for that), with log2(groups) + 1 in the 6 low bits, so
 * never 0. The groups start SHMOBJ__MAP_TABLE_PREFIX +
 * SHMOBJ_HTCORE_HEADER_SIZE bytes into the block. A table of another form
 * (damage) is not cached: its shape is 0, as is that of a shard not yet
 * looked at, and nothing is read through a shape of 0. */
#define SHAPE_LOW UINT64_C(63)
#define SHAPE_GROUPS_AT (SHMOBJ__MAP_TABLE_PREFIX + SHMOBJ_HTCORE_HEADER_SIZE)

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

/* The handle shmobj_htcore_attach() built when the shape was made. */
static void shape_handle(const shmobj_map *m, uint64_t shape, shmobj_htcore *ht)
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

/* table_at() through the handle's cache: a hit needs the same block and
 * header fields that still say what they said at validation (damage to
 * them is noticed at once). */
static int table_get(shmobj_map *m, unsigned idx, shmobj__ref ref,
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
    int rc = table_at(m, ref, ht);
    if (rc == 0) {
        atomic_store_explicit(&m->shape_check[idx], header_word7(ht->hdr),
                              memory_order_relaxed);
        atomic_store_explicit(&m->shape[idx], shape_make(m, ref, ht),
                              memory_order_relaxed);
    }
    return rc;
}

/* Allocate and build an empty table for `capacity` entries. */
static int table_new(shmobj_map *m, uint64_t capacity, shmobj__ref *out,
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
    rc = block_at(m, ref, fp + SHMOBJ__MAP_TABLE_PREFIX, &p, NULL);
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

/* ---- read guards (epochs) ------------------------------------------------- */

/* SHMOBJ_ESTALE when the handle's control block is no longer the live
 * block it opened (the map was destroyed, its memory perhaps reused): then
 * nothing of the block may be read or written. One lock-free look at the
 * block's header; every path but the unguarded copy-out try makes it. */
static int map_stale(shmobj_map *m)
{
    /* The control block was validated at open and the mapping never
     * moves, so its header is readable: one load of its generation. */
    return shmobj__arena_gen_is(m->base, shmobj__ref_off(m->ctl_ref),
                                shmobj__ref_gen(m->ctl_ref))
               ? 0
               : SHMOBJ_ESTALE;
}

/* Enter: count ourselves in the parity of the current epoch, then confirm
 * the epoch did not move meanwhile (else a writer may have judged our
 * parity empty before we counted ourselves). seq_cst pairs with the
 * writer's loads in try_advance(). *g gets epoch + 1 (never 0);
 * SHMOBJ_ESTALE (no guard) when the map is gone. */
static int guard_enter(shmobj_map *m, uint64_t *g)
{
    if (map_stale(m) != 0)
        return SHMOBJ_ESTALE;
    _Atomic uint64_t *ep = &m->ctl->epoch;
    for (;;) {
        uint64_t e = atomic_load(ep);
        atomic_fetch_add(&m->reader->active[e & 1], 1);
        if (atomic_load(ep) == e) {
            *g = e + 1;
            return 0;
        }
        atomic_fetch_sub(&m->reader->active[e & 1], 1);
    }
}

static void guard_leave(shmobj_map *m, uint64_t g)
{
    atomic_fetch_sub_explicit(&m->reader->active[(g - 1) & 1], 1,
                              memory_order_release);
}

/* Who owns a reader slot. The one place that knows what an owner's
 * identity is: the attachment token of the handle's segment (seg-procs.c),
 * alive while that handle is attached, in any PID namespace. The token
 * takes the low 32 bits of the owner word, the slot's claim count the
 * high 32, and the `token` field holds it again (non-zero while the slot
 * is claimed and complete). */
static int owner_self(struct shmobj__space *sp, uint64_t *ident)
{
    uint32_t t = sp->ops->live->token(sp);
    if (t == 0)
        return SHMOBJ_EFULL; /* the segment's attachment table is full */
    *ident = t;
    return 0;
}

static bool owner_alive(struct shmobj__space *sp, uint64_t token)
{
    /* A token no live handle can have (damage) is not alive either. */
    return sp->ops->live->owner_state(sp, (uint32_t)token) ==
           SHMOBJ__OS_OWNER_ALIVE;
}

/* Give slot i back: its owner word was taken to 0 by the caller. */
static void reader_release(struct shmobj__map_ctl *c, unsigned i)
{
    struct shmobj__map_reader *r = &c->readers_[i];
    atomic_store(&r->active[0], 0);
    atomic_store(&r->active[1], 0);
    atomic_store(&r->token, 0);
    atomic_fetch_and(&c->claimed[i / 64], ~(UINT64_C(1) << (i % 64)));
}

/* Reset the slot of a reader process that died (holding guards or not).
 * Of two reapers, or a reaper and a new owner, the CAS on the owner word
 * lets one through. */
static void reader_reap(shmobj_map *m, unsigned i)
{
    struct shmobj__map_ctl *c = m->ctl;
    struct shmobj__map_reader *r = &c->readers_[i];
    uint64_t owner = atomic_load(&r->owner);
    if (owner == 0)
        return; /* free, being claimed, or being reaped */
    uint64_t token = atomic_load(&r->token);
    if (token == 0 || owner_alive(m->sp, token))
        return;
    if (atomic_compare_exchange_strong(&r->owner, &owner, 0))
        reader_release(c, i);
}

static inline unsigned ctz64(uint64_t x) /* x != 0 */
{
#if defined(__GNUC__)
    return (unsigned)__builtin_ctzll(x);
#else
    unsigned n = 0;
    while (!(x & 1u)) {
        x >>= 1;
        n++;
    }
    return n;
#endif
}

/* Move the epoch from e to e + 1 when no reader of epoch e - 1 remains.
 * Only claimed slots are looked at (a slot is claimed before its first
 * guard, so a reader the bitmap load missed entered at epoch e or later). */
static void try_advance(shmobj_map *m, int check_liveness)
{
    struct shmobj__map_ctl *c = m->ctl;
    uint64_t e = atomic_load(&c->epoch);
    for (unsigned w = 0; w < SHMOBJ__MAP_CLAIM_WORDS; w++) {
        for (uint64_t bits = atomic_load(&c->claimed[w]); bits != 0; bits &= bits - 1) {
            unsigned i = w * 64 + ctz64(bits);
            struct shmobj__map_reader *r = &c->readers_[i];
            if (atomic_load(&r->active[(e + 1) & 1]) != 0) {
                if (!check_liveness)
                    return;
                reader_reap(m, i);
                if (atomic_load(&r->active[(e + 1) & 1]) != 0)
                    return;
            }
        }
    }
    atomic_compare_exchange_strong(&c->epoch, &e, e + 1);
}

/* ---- writer sections ------------------------------------------------------ */

static void write_begin(struct shmobj__map_shard *s)
{
    uint64_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, q + 1, memory_order_relaxed);
    /* the odd seq is visible before any change of the table */
    atomic_thread_fence(memory_order_release);
}

static void write_end(struct shmobj__map_shard *s)
{
    uint64_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, q + 1, memory_order_release);
}

/* ---- retirement ------------------------------------------------------------ */

static void free_block(shmobj_map *m, shmobj__ref ref)
{
    /* ESTALE here means "already freed": a repair redoing a free. */
    (void)m->sp->ops->free(m->sp, ref);
}

/* Free every entry a table references (the deep retirement of clear()).
 * Each slot is erased before its entry is freed, so the table records the
 * progress: a repair that runs this again after a crash meets only entries
 * not yet freed. It must not meet a freed one: its reference is rebuilt
 * from the generation in the entry's own bytes, which, once the block is
 * reused, are the new owner's (a map entry of another owner would pass the
 * heap's check and be freed). A crash between the erase and the free leaks
 * that one entry. The table is retired past every reader (its epoch is two
 * behind), so nobody else reads the slots. */
static void free_table_entries(shmobj_map *m, shmobj__ref tref)
{
    shmobj_htcore ht;
    uint64_t i = 0;
    if (table_at(m, tref, &ht) != 0)
        return;
    while (shmobj_htcore_next(&ht, &i) == 0) {
        struct ent e;
        int ok = entry_peek(m, shmobj_htcore_ref_value(&ht, i), &e) == 0;
        shmobj_htcore_erase(&ht, i);
        if (ok) {
            free_block(m, e.ref);
            if (m->free_hook != NULL)
                m->free_hook(m->free_hook_arg, e.ref);
        }
        i++;
    }
}

/* Free one limbo list. Each item is recorded in intent_free before it
 * leaves the list, so a crash frees it at the repair (again: harmless). */
static void drain(shmobj_map *m, struct shmobj__map_shard *s, unsigned li)
{
    uint64_t budget = atomic_load(&s->limbo_len) + 1;
    uint64_t item = atomic_load(&s->limbo_head[li]);
    while (item != 0 && budget-- > 0) {
        shmobj__ref ref = item & ~SHMOBJ__MAP_RETIRE_DEEP;
        uint8_t *p;
        uint64_t next = 0;
        if (block_at(m, ref, SHMOBJ__MAP_LINK_OFF + 8, &p, NULL) == 0)
            memcpy(&next, p + SHMOBJ__MAP_LINK_OFF, 8);
        atomic_store_explicit(&s->intent_free, item, memory_order_release);
        atomic_store_explicit(&s->limbo_head[li], next, memory_order_release);
        if (item & SHMOBJ__MAP_RETIRE_DEEP)
            free_table_entries(m, ref);
        free_block(m, ref);
        atomic_store_explicit(&s->intent_free, 0, memory_order_release);
        uint64_t len = atomic_load(&s->limbo_len);
        if (len > 0)
            atomic_store(&s->limbo_len, len - 1);
        item = next;
    }
    if (item != 0) /* a cycle in a damaged list: drop the rest */
        atomic_store(&s->limbo_head[li], 0);
}

/* Free what no reader can see any more: lists whose epoch is 2 behind. */
static void reclaim(shmobj_map *m, struct shmobj__map_shard *s, int liveness)
{
    try_advance(m, liveness);
    try_advance(m, liveness);
    uint64_t e = atomic_load(&m->ctl->epoch);
    for (unsigned li = 0; li < 3; li++)
        if (atomic_load(&s->limbo_head[li]) != 0 &&
            atomic_load(&s->limbo_epoch[li]) + 2 <= e)
            drain(m, s, li);
}

/* Put an unlinked block on the limbo list of the current epoch. The list
 * slot of epoch e last held epoch e - 3 or older: freeable now. */
static void retire(shmobj_map *m, struct shmobj__map_shard *s, uint64_t item)
{
    uint64_t e = atomic_load(&m->ctl->epoch);
    unsigned li = (unsigned)(e % 3);
    uint8_t *p;
    if (atomic_load(&s->limbo_epoch[li]) != e) {
        if (atomic_load(&s->limbo_head[li]) != 0)
            drain(m, s, li);
        atomic_store(&s->limbo_epoch[li], e);
    }
    if (block_at(m, item & ~SHMOBJ__MAP_RETIRE_DEEP, SHMOBJ__MAP_LINK_OFF + 8, &p, NULL) != 0)
        return; /* not a live block: nothing to free later */
    uint64_t head = atomic_load(&s->limbo_head[li]);
    memcpy(p + SHMOBJ__MAP_LINK_OFF, &head, 8);
    atomic_store_explicit(&s->limbo_head[li], item, memory_order_release);
    uint64_t len = atomic_fetch_add(&s->limbo_len, 1) + 1;
    if (len % MAP_RECLAIM_EVERY == 0 || (item & SHMOBJ__MAP_RETIRE_DEEP))
        reclaim(m, s, len >= MAP_LIVENESS_AFTER);
}

static int in_limbo_heads(struct shmobj__map_shard *s, uint64_t ref)
{
    for (unsigned li = 0; li < 3; li++)
        if ((atomic_load(&s->limbo_head[li]) & ~SHMOBJ__MAP_RETIRE_DEEP) == ref)
            return 1;
    return 0;
}

/* ---- locking and repair ------------------------------------------------------ */

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

static void clear_intent(struct shmobj__map_shard *s)
{
    atomic_store_explicit(&s->intent_op, 0, memory_order_release);
    atomic_store_explicit(&s->intent_new, 0, memory_order_relaxed);
    atomic_store_explicit(&s->intent_old, 0, memory_order_relaxed);
    atomic_store_explicit(&s->intent_table, 0, memory_order_relaxed);
    atomic_store_explicit(&s->intent_table_old, 0, memory_order_relaxed);
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
    if (table_at(m, cur, &ht) != 0) {
        /* The published table is unusable; a fully built new one (its
         * publication is the last step) may still be adopted. */
        if (tnew == 0 || table_at(m, tnew, &ht) != 0) {
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
        if (slot_entry(m, shmobj_htcore_ref_value(&ht, i), &e) != 0 ||
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
            if (told != 0 && !in_limbo_heads(s, told & ~SHMOBJ__MAP_RETIRE_DEEP))
                retire(m, s, told | (op == SHMOBJ__MAP_OP_CLEAR
                                         ? SHMOBJ__MAP_RETIRE_DEEP : 0));
        } else {
            free_block(m, tnew);
        }
    }
    if (op == SHMOBJ__MAP_OP_SET) {
        uint64_t n = atomic_load(&s->intent_new);
        uint64_t o = atomic_load(&s->intent_old);
        if (n != 0 && linked(&ht, n)) {
            if (o != 0 && !linked(&ht, o) && !in_limbo_heads(s, o))
                retire(m, s, o);
        } else if (n != 0) {
            free_block(m, n);
        }
    } else if (op == SHMOBJ__MAP_OP_DEL) {
        uint64_t o = atomic_load(&s->intent_old);
        if (o != 0 && !linked(&ht, o) && !in_limbo_heads(s, o))
            retire(m, s, o);
    }
    uint64_t f = atomic_load(&s->intent_free);
    if (f != 0) {
        if (!in_limbo_heads(s, f & ~SHMOBJ__MAP_RETIRE_DEEP)) {
            if (f & SHMOBJ__MAP_RETIRE_DEEP)
                free_table_entries(m, f & ~SHMOBJ__MAP_RETIRE_DEEP);
            free_block(m, f & ~SHMOBJ__MAP_RETIRE_DEEP);
        }
        atomic_store(&s->intent_free, 0);
    }
    clear_intent(s);
    return 0;
}

static int shard_lock(shmobj_map *m, struct shmobj__map_shard *s)
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

static void shard_unlock(shmobj_map *m, struct shmobj__map_shard *s)
{
    m->sp->ops->live->unlock(m->sp, &s->lock);
}

/* ---- optimistic reads ---------------------------------------------------------- */

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
    if (entry_peek(f->m, v, &e) != 0)
        return SHMOBJ_ECORRUPT;
    if (e.klen != f->klen || !shmobj__mem_equal(ent_key(&e), f->key, f->klen))
        return 0;
    f->e = e;
    return 1;
}

/* Wait out a writer section: spin briefly, then queue on the lock (which
 * also repairs the shard when its writer died inside the section). An
 * error means the shard cannot be repaired, or the map is gone: the reader
 * gives up with it. */
static int wait_writer(shmobj_map *m, struct shmobj__map_shard *s,
                       unsigned *spins)
{
    if (++*spins < MAP_SPIN_LIMIT) {
        shmobj__cpu_relax();
        return 0;
    }
    *spins = 0;
    int rc = shard_lock(m, s);
    if (rc == 0)
        shard_unlock(m, s);
    else if (rc != SHMOBJ_ECORRUPT && rc != SHMOBJ_ESTALE)
        sched_yield();
    return rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE ? rc : 0;
}

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

/* The reader's probe: shmobj_htcore_ref_find() with find_eq() inlined (no
 * indirect call per candidate, a shorter path). 0 with *e set, ENOTFOUND,
 * or ECORRUPT. */
static int table_find(shmobj_map *m, const shmobj_htcore *ht, uint64_t hash,
                      const void *key, size_t klen, struct ent *e)
{
    uint64_t gmask = ht->mask / SHMOBJ_HTCORE_GROUP;
    uint64_t g = shmobj_htcore_probe_home(hash, gmask);
    for (uint64_t step = 0; step <= gmask; step++) {
        const uint8_t *gp = ht->groups + g * ht->group_bytes;
        uint32_t r = shmobj_htcore_ref_candidates(gp, hash);
        uint32_t cand = r & (SHMOBJ_HTCORE_GROUP_END - 1);
        while (cand != 0) {
            uint64_t v = group_slot(gp, shmobj_htcore_ctz(cand));
            cand &= cand - 1;
            if (entry_peek(m, v, e) != 0)
                return SHMOBJ_ECORRUPT;
            if (e->klen == klen &&
                shmobj__mem_equal(ent_key(e), key, klen))
                return 0;
        }
        if (r & SHMOBJ_HTCORE_GROUP_END)
            break;
        g = shmobj_htcore_probe_next(g, step, gmask);
    }
    return SHMOBJ_ENOTFOUND;
}

/* Look a key up inside a validated read section (the caller holds a
 * guard). On success *e describes the entry; when buf is given and the
 * value fits, it is copied inside the section. */
static int lookup(shmobj_map *m, uint64_t hash, const void *key, size_t klen,
                  struct ent *e, void *buf, size_t buf_len)
{
    struct shmobj__map_shard *s = shard_of(m, hash);
    unsigned spins = 0;
    for (;;) {
        uint64_t q1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (q1 & 1) {
            int rc = wait_writer(m, s, &spins);
            if (rc != 0)
                return rc;
            continue;
        }
        shmobj_htcore ht;
        int rc = table_get(m, (unsigned)(s - m->ctl->shards_),
                           atomic_load_explicit(&s->table, memory_order_acquire), &ht);
        if (rc == 0)
            rc = table_find(m, &ht, hash, key, klen, e);
        if (rc == 0 && buf != NULL && e->vlen <= buf_len)
            copy_value(buf, ent_value(e), e->vlen);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) == q1)
            return rc;
    }
}

/* Tests: hold an unguarded read between finding an entry and copying its
 * value, long enough for a writer to free and reuse the entry's block. */
static __attribute__((noinline, cold)) void read_delay(uint64_t ns)
{
    uint64_t until = shmobj__os_now_ns() + ns;
    while (shmobj__os_now_ns() < until)
        shmobj__cpu_relax();
}

/* The first group of the table of a validated shape word. */
static inline const uint8_t *shape_groups(const shmobj_map *m, uint64_t shape)
{
    return (const uint8_t *)shape_groups_addr(m, shape);
}

/* Keys the hot instance of lookup_fast() compares inline, and values it
 * copies inline: longer ones go to the general instance (memcmp, memcpy). */
#define MAP_HOT_MAX 64u

/* Copy a value of at most MAP_HOT_MAX bytes without a call; an 8-byte
 * value is read atomically (it may be added to). */
static inline void copy_value_short(uint8_t *dst, const uint8_t *v, uint32_t n)
{
    if (n == 8) {
        uint64_t x = atomic_load_explicit((_Atomic uint64_t *)(void *)v,
                                          memory_order_relaxed);
        memcpy(dst, &x, 8);
    } else if (n >= 16) { /* overlapping 16-byte moves cover 16..64 */
        memcpy(dst, v, 16);
        memcpy(dst + n - 16, v + n - 16, 16);
        if (n > 32) {
            memcpy(dst + 16, v + 16, 16);
            memcpy(dst + n - 32, v + n - 32, 16);
        }
    } else if (n >= 8) {
        memcpy(dst, v, 8);
        memcpy(dst + n - 8, v + n - 8, 8);
    } else if (n >= 4) {
        memcpy(dst, v, 4);
        memcpy(dst + n - 4, v + n - 4, 4);
    } else if (n > 0) {
        dst[0] = v[0];
        dst[n >> 1] = v[n >> 1];
        dst[n - 1] = v[n - 1];
    }
}

/* lookup() for the common case, as one short straight path without a
 * guard (a shorter path lets the processor overlap consecutive gets'
 * cache misses, so every instruction here counts): the shard is not being
 * written, its table's shape word is cached, and every offset lies in the
 * mapped part of the segment. Anything else, including what looks like
 * damage, returns MAP_FAST_NO and the caller runs lookup(), which sorts
 * it out. Otherwise 0 (value copied when it fits, *vlen set) or ENOTFOUND,
 * both from a validated read section: nothing read here outlives it, and
 * a block it read can only have been freed after being unlinked, which
 * moved `seq`, so the try is discarded.
 *
 * `hot` (a constant) selects the instance inlined into shmobj_map_get():
 * keys of at most MAP_HOT_MAX bytes (the caller checks), values copied
 * inline up to MAP_HOT_MAX bytes (longer ones return MAP_FAST_NO), and no
 * call at all, so the compiler keeps everything in registers. The general
 * instance compares and copies any length and holds the tests' delay.
 *
 * The home group's lines are fetched first, from the shape word before it
 * is validated (a prefetch never faults), so the miss is served while the
 * checks run. */
#define MAP_FAST_NO 1
static inline __attribute__((always_inline)) int
lookup_fast(shmobj_map *m, uint64_t hash, const void *key, size_t klen,
            void *buf, size_t buf_len, uint32_t *vlen, int hot)
{
    unsigned idx = (unsigned)(hash >> SHMOBJ__MAP_SHARD_SHIFT);
    uint64_t shape = atomic_load_explicit(&m->shape[idx], memory_order_relaxed);
    uint64_t gmask = shape_gmask(shape);
    uint64_t g = shmobj_htcore_probe_home(hash, gmask);
    /* an integer until the shape is validated */
    uintptr_t home = shape_groups_addr(m, shape) + (uintptr_t)(g * MAP_GROUP_BYTES);
#if defined(__GNUC__)
    __builtin_prefetch((const void *)home);
    __builtin_prefetch((const void *)(home + 64));
    __builtin_prefetch((const void *)(home + 128));
#endif
    struct shmobj__map_shard *s = &m->ctl->shards_[idx];
    uint64_t q1 = atomic_load_explicit(&s->seq, memory_order_acquire);
    shmobj__ref tref = atomic_load_explicit(&s->table, memory_order_acquire);
    /* Valid when the shard is not being written and still has the table
     * the shape was taken from: tref's low bits are then 0 and shape ^ tref
     * is exactly the shape's, 1..63 (so the shape is not 0); one compare
     * for all. The header may be read only then; its slot count must still
     * agree with the shape (damage is noticed). */
    uint64_t odd = (q1 & 1) | (tref & SHAPE_LOW);
    if ((((shape ^ tref) - 1) | (odd << 6)) >= SHAPE_LOW)
        return MAP_FAST_NO;
    const uint8_t *groups = shape_groups(m, shape), *gp = (const uint8_t *)home;
    if (shmobj_htcore_header_slots(groups - SHMOBJ_HTCORE_HEADER_SIZE) !=
        (gmask + 1) * SHMOBJ_HTCORE_GROUP)
        return MAP_FAST_NO;

    uint64_t mapped = atomic_load_explicit(&m->sp->mapped, memory_order_acquire);
    const uint8_t *base = m->base;
    int rc = SHMOBJ_ENOTFOUND;
    for (uint64_t step = 0;;) {
        uint32_t empty, tags = shmobj_htcore_group_match(gp, shmobj_htcore_tag(hash), &empty);
        for (; tags != 0; tags &= tags - 1) {
            uint64_t w = shmobj_htcore_ref_word(gp, shmobj_htcore_ctz(tags));
            if (!shmobj_htcore_ref_word_matches(w, hash))
                continue;
            uint64_t off = shmobj_htcore_ref_word_value(w) << SHMOBJ__MAP_SLOT_SHIFT;
            struct shmobj__map_entry h;
            /* off and mapped are multiples of 16: the header is inside */
            if (off < 16 || off >= mapped)
                return MAP_FAST_NO;
            const uint8_t *p = base + off;
#if defined(__GNUC__)
            __builtin_prefetch(p + 64);
            __builtin_prefetch(p + 128);
#endif
            memcpy(&h, p, sizeof h);
            if (h.key_len != klen)
                continue;
            if (shmobj__map_entry_size(h.key_len, h.value_len) > mapped - off)
                return MAP_FAST_NO;
            if (hot ? !shmobj__mem_equal(p + SHMOBJ__MAP_ENTRY_HEADER, key, klen)
                    : klen != 0 && memcmp(p + SHMOBJ__MAP_ENTRY_HEADER, key, klen) != 0)
                continue;
            const uint8_t *value = p + shmobj__map_value_off(h.key_len);
            if (hot && h.value_len > MAP_HOT_MAX)
                return MAP_FAST_NO;
            if (!hot && m->read_delay_ns != 0)
                read_delay(m->read_delay_ns);
            if (h.value_len <= buf_len) {
                if (hot)
                    copy_value_short(buf, value, h.value_len);
                else
                    copy_value(buf, value, h.value_len);
            }
            *vlen = h.value_len;
            rc = 0;
            goto done;
        }
        if (empty != 0 || step == gmask)
            break;
        if (hot) /* the key may be further on (rare): the general path */
            return MAP_FAST_NO;
        g = shmobj_htcore_probe_next(g, step, gmask);
        step++;
        gp = groups + g * MAP_GROUP_BYTES;
    }
done:
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&s->seq, memory_order_relaxed) != q1)
        return MAP_FAST_NO;
    return rc;
}

static int key_ok(const shmobj_map *m, const void *key, size_t klen)
{
    return m != NULL && (key != NULL || klen == 0) && klen <= UINT32_MAX;
}

/* The key's home group through the shard's cached shape, or NULL when
 * none is cached. The shape was validated when cached, so the group lies
 * in the mapping (which never shrinks), even if the table was replaced and
 * freed since: fit for hints, whose reads nothing trusts. */
static const uint8_t *home_group_hint(const shmobj_map *m, uint64_t hash)
{
    uint64_t shape = atomic_load_explicit(&m->shape[hash >> SHMOBJ__MAP_SHARD_SHIFT],
                                          memory_order_relaxed);
    if (shape == 0)
        return NULL;
    return shape_groups(m, shape) +
           shmobj_htcore_probe_home(hash, shape_gmask(shape)) * MAP_GROUP_BYTES;
}

static void prefetch_hash(shmobj_map *map, uint64_t hash)
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

void shmobj_map_prefetch(shmobj_map *map, const void *key, size_t key_len)
{
    if (!key_ok(map, key, key_len))
        return;
    prefetch_hash(map, map_hash(map, key, key_len));
}

/* lookup() under a guard, out of line: the fast path that is inlined into
 * every copy-out lookup stays short. */
static __attribute__((noinline)) int
lookup_guarded(shmobj_map *m, uint64_t hash, const void *key, size_t klen,
               void *buf, size_t buf_len, uint32_t *vlen)
{
    struct ent e;
    uint64_t g;
    int rc = guard_enter(m, &g);
    if (rc != 0)
        return rc;
    rc = lookup(m, hash, key, klen, &e, buf, buf_len);
    guard_leave(m, g);
    if (rc == 0)
        *vlen = e.vlen;
    return rc;
}

/* A copy-out lookup of any key: the general fast path, else lookup()
 * under a guard. 0 (value copied when it fits, *vlen set), ENOTFOUND or
 * an error. */
static int lookup_copy(shmobj_map *m, uint64_t hash, const void *key, size_t klen,
                       void *buf, size_t buf_len, uint32_t *vlen)
{
    int rc = lookup_fast(m, hash, key, klen, buf, buf_len, vlen, 0);
    if (rc != MAP_FAST_NO)
        return rc;
    return lookup_guarded(m, hash, key, klen, buf, buf_len, vlen);
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

/* shmobj_map_get() for every case the hot path leaves. */
static __attribute__((noinline)) int
get_general(shmobj_map *map, const void *key, size_t key_len, void *buf,
            size_t buf_len, size_t *value_len)
{
    if (!key_ok(map, key, key_len) || (buf == NULL && buf_len > 0))
        return SHMOBJ_EINVAL;
    uint32_t vlen = 0;
    int rc = lookup_copy(map, map_hash(map, key, key_len), key, key_len, buf,
                         buf_len, &vlen);
    return get_result(rc, vlen, buf_len, value_len);
}

/* flatten: the hash is inlined too (the compiler would call it) */
#if defined(__GNUC__)
__attribute__((flatten))
#endif
MAP_READS_LINKAGE int MAP_READS_NAME(shmobj_map_get)(shmobj_map *map, const void *key, size_t key_len,
                   void *buf, size_t buf_len, size_t *value_len)
{
    if (map != NULL && key != NULL && buf != NULL && key_len <= MAP_HOT_MAX &&
        map->read_delay_ns == 0) {
        uint32_t vlen = 0;
        int rc = lookup_fast(map, map_hash(map, key, key_len), key, key_len,
                             buf, buf_len, &vlen, 1);
        if (rc != MAP_FAST_NO)
            return get_result(rc, vlen, buf_len, value_len);
    }
    return get_general(map, key, key_len, buf, buf_len, value_len);
}

#if defined(MAP_TSAN)
int shmobj_map_get(shmobj_map *map, const void *key, size_t key_len, void *buf, size_t buf_len, size_t *value_len)
{
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    int rc = shmobj_map_get_reads(map, key, key_len, buf, buf_len, value_len);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    return rc;
}
#endif

/* Lookups a batch fetches together: enough to keep the memory system busy,
 * few enough that the lines of the first are still cached when it is
 * compared. */
#define MAP_BATCH 8

/* A hint for a batched lookup: start loading the entry of the first
 * candidate in the key's home group. Nothing read here is trusted: the
 * lookup that follows checks everything again. */
static void prefetch_entry(shmobj_map *m, uint64_t hash)
{
    const uint8_t *gp = home_group_hint(m, hash);
    if (gp == NULL)
        return;
    uint32_t cand = shmobj_htcore_ref_candidates(gp, hash) & (SHMOBJ_HTCORE_GROUP_END - 1);
    if (cand == 0)
        return;
    uint64_t off = group_slot(gp, shmobj_htcore_ctz(cand)) << SHMOBJ__MAP_SLOT_SHIFT;
    if (off >= atomic_load_explicit(&m->sp->mapped, memory_order_relaxed))
        return;
#if defined(__GNUC__)
    const uint8_t *p = m->base + off;
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);
    __builtin_prefetch(p + 128);
#endif
}

MAP_READS_LINKAGE int MAP_READS_NAME(shmobj_map_get_many)(shmobj_map *map, shmobj_map_get_req *reqs, size_t n)
{
    if (map == NULL || (reqs == NULL && n > 0))
        return SHMOBJ_EINVAL;
    for (size_t at = 0; at < n; at += MAP_BATCH) {
        shmobj_map_get_req *r = reqs + at;
        size_t k = n - at < MAP_BATCH ? n - at : MAP_BATCH;
        uint64_t hash[MAP_BATCH];
        /* three passes: home groups, then entries, then the lookups, each
         * pass's loads in flight together */
        for (size_t i = 0; i < k; i++) {
            r[i].value_len = 0;
            r[i].status = key_ok(map, r[i].key, r[i].key_len) &&
                                  (r[i].buf != NULL || r[i].buf_len == 0)
                              ? 0
                              : SHMOBJ_EINVAL;
            if (r[i].status != 0)
                continue;
            hash[i] = map_hash(map, r[i].key, r[i].key_len);
            prefetch_hash(map, hash[i]);
        }
        for (size_t i = 0; i < k; i++)
            if (r[i].status == 0)
                prefetch_entry(map, hash[i]);
        for (size_t i = 0; i < k; i++) {
            if (r[i].status == 0) {
                uint32_t vlen = 0;
                int rc = lookup_copy(map, hash[i], r[i].key, r[i].key_len,
                                     r[i].buf, r[i].buf_len, &vlen);
                r[i].status = get_result(rc, vlen, r[i].buf_len, &r[i].value_len);
            }
        }
    }
    return 0;
}

#if defined(MAP_TSAN)
int shmobj_map_get_many(shmobj_map *map, shmobj_map_get_req *reqs, size_t n)
{
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    int rc = shmobj_map_get_many_reads(map, reqs, n);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    return rc;
}
#endif

MAP_READS_LINKAGE int MAP_READS_NAME(shmobj_map_get_view)(shmobj_map *map, const void *key, size_t key_len,
                        shmobj_map_view *view)
{
    if (!key_ok(map, key, key_len) || view == NULL)
        return SHMOBJ_EINVAL;
    uint64_t hash = map_hash(map, key, key_len);
    struct ent e;
    uint64_t g;
    int rc = guard_enter(map, &g);
    if (rc == 0) {
        rc = lookup(map, hash, key, key_len, &e, NULL, 0);
        if (rc != 0)
            guard_leave(map, g);
    }
    if (rc != 0) {
        memset(view, 0, sizeof *view);
        return rc;
    }
    view->value = ent_value(&e);
    view->value_len = e.vlen;
    view->key = ent_key(&e);
    view->key_len = e.klen;
    view->map_ = map;
    view->guard_ = g;
    return 0;
}

#if defined(MAP_TSAN)
int shmobj_map_get_view(shmobj_map *map, const void *key, size_t key_len, shmobj_map_view *view)
{
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    int rc = shmobj_map_get_view_reads(map, key, key_len, view);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    return rc;
}
#endif

void shmobj_map_view_release(shmobj_map_view *view)
{
    if (view == NULL || view->map_ == NULL || view->guard_ == 0)
        return;
    guard_leave(view->map_, view->guard_);
    memset(view, 0, sizeof *view);
}

MAP_READS_LINKAGE int MAP_READS_NAME(shmobj_map_contains)(shmobj_map *map, const void *key, size_t key_len)
{
    if (!key_ok(map, key, key_len))
        return SHMOBJ_EINVAL;
    uint32_t vlen;
    return lookup_copy(map, map_hash(map, key, key_len), key,
                       key_len, NULL, 0, &vlen);
}

#if defined(MAP_TSAN)
int shmobj_map_contains(shmobj_map *map, const void *key, size_t key_len)
{
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    int rc = shmobj_map_contains_reads(map, key, key_len);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    return rc;
}
#endif

int shmobj_map_count(shmobj_map *map, uint64_t *count)
{
    if (map == NULL || count == NULL)
        return SHMOBJ_EINVAL;
    if (map_stale(map) != 0)
        return SHMOBJ_ESTALE;
    uint64_t n = 0;
    for (unsigned i = 0; i < SHMOBJ__MAP_SHARDS; i++)
        n += atomic_load_explicit(&map->ctl->shards_[i].count, memory_order_relaxed);
    *count = n;
    return 0;
}

/* ---- writes -------------------------------------------------------------------- */

/* Find key in the current table, under the lock; when free_idx is given,
 * also the slot an insert of the key would take (UINT64_MAX: none seen),
 * valid until the table changes. *tref gets the table's reference as read
 * once here: what ht describes, and what a growth retires. */
static int locked_find_free(shmobj_map *m, struct shmobj__map_shard *s,
                            shmobj_htcore *ht, shmobj__ref *tref, uint64_t hash,
                            const void *key, size_t klen, uint64_t *idx,
                            struct ent *e, uint64_t *free_idx)
{
    struct find_ctx f = {m, key, klen, {0}};
    *tref = atomic_load(&s->table);
    int rc = table_get(m, (unsigned)(s - m->ctl->shards_), *tref, ht);
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
    int rc = table_new(m, cap, &nref, &nt);
    if (rc != 0)
        return rc;
    atomic_store_explicit(&s->intent_table_old, oref, memory_order_relaxed);
    atomic_store_explicit(&s->intent_table, nref, memory_order_release);
    rc = shmobj_htcore_ref_rehash(&nt, ht, slot_hash, m);
    if (rc != 0) {
        free_block(m, nref);
        atomic_store(&s->intent_table, 0);
        return SHMOBJ_ECORRUPT;
    }
    write_begin(s);
    atomic_store_explicit(&s->table, nref, memory_order_release);
    write_end(s);
    retire(m, s, oref);
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

int shmobj_map_set(shmobj_map *map, const void *key, size_t key_len,
                   const void *value, size_t value_len)
{
    if (!key_ok(map, key, key_len) || (value == NULL && value_len > 0) ||
        value_len > UINT32_MAX)
        return SHMOBJ_EINVAL;
    uint64_t hash = map_hash(map, key, key_len), idx;
    struct shmobj__map_shard *s = shard_of(map, hash);
    shmobj__ref ref;
    shmobj_htcore ht;
    /* Start loading the key's group now; the miss overlaps the allocation.
     * The block is written before the lock is taken: the critical section
     * only links it. */
    prefetch_hash(map, hash);
    int rc = entry_new(map, hash, key, key_len, value, value_len, &ref);
    if (rc != 0)
        return rc;
    rc = shard_lock(map, s);
    if (rc != 0) {
        free_block(map, ref);
        return rc;
    }
    atomic_store_explicit(&s->intent_new, ref, memory_order_relaxed);
    atomic_store_explicit(&s->intent_op, SHMOBJ__MAP_OP_SET, memory_order_release);
    struct ent oe;
    uint64_t free_idx;
    shmobj__ref tref;
    rc = locked_find_free(map, s, &ht, &tref, hash, key, key_len, &idx, &oe, &free_idx);
    if (rc == 0) {
        uint64_t old = oe.ref;
        atomic_store_explicit(&s->intent_old, old, memory_order_release);
        write_begin(s);
        shmobj_htcore_ref_replace(&ht, idx, slot_of(ref));
        write_end(s);
        retire(map, s, old);
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
    shard_unlock(map, s);
    return rc;
}

int shmobj_map_add(shmobj_map *map, const void *key, size_t key_len,
                   int64_t delta, int64_t *result)
{
    if (!key_ok(map, key, key_len))
        return SHMOBJ_EINVAL;
    uint64_t hash = map_hash(map, key, key_len), idx;
    struct shmobj__map_shard *s = shard_of(map, hash);
    shmobj_htcore ht;
    struct ent e;
    uint64_t free_idx;
    shmobj__ref tref;
    int rc = shard_lock(map, s);
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
    return rc;
}

int shmobj_map_del(shmobj_map *map, const void *key, size_t key_len)
{
    if (!key_ok(map, key, key_len))
        return SHMOBJ_EINVAL;
    uint64_t hash = map_hash(map, key, key_len), idx;
    struct shmobj__map_shard *s = shard_of(map, hash);
    shmobj_htcore ht;
    int rc = shard_lock(map, s);
    if (rc != 0)
        return rc;
    struct ent oe;
    rc = locked_find(map, s, &ht, hash, key, key_len, &idx, &oe);
    if (rc == 0) {
        uint64_t old = oe.ref;
        atomic_store_explicit(&s->intent_old, old, memory_order_relaxed);
        atomic_store_explicit(&s->intent_op, SHMOBJ__MAP_OP_DEL, memory_order_release);
        write_begin(s);
        shmobj_htcore_erase(&ht, idx);
        write_end(s);
        atomic_fetch_sub_explicit(&s->count, 1, memory_order_relaxed);
        retire(map, s, old);
        clear_intent(s);
    }
    shard_unlock(map, s);
    return rc;
}

int shmobj_map_clear(shmobj_map *map)
{
    if (map == NULL)
        return SHMOBJ_EINVAL;
    for (unsigned i = 0; i < SHMOBJ__MAP_SHARDS; i++) {
        struct shmobj__map_shard *s = &map->ctl->shards_[i];
        shmobj__ref nref, oref;
        shmobj_htcore nt;
        int rc = shard_lock(map, s);
        if (rc != 0)
            return rc;
        oref = atomic_load(&s->table);
        rc = table_new(map, MAP_MIN_CAPACITY, &nref, &nt);
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
        retire(map, s, oref | SHMOBJ__MAP_RETIRE_DEEP);
        clear_intent(s);
        shard_unlock(map, s);
    }
    return 0;
}

/* ---- iteration ------------------------------------------------------------------- */

/* Copy the entry refs of one shard's table, consistently: inside a
 * validated read section, or under the lock when writers keep racing. The
 * cursor's guard, taken before, keeps every copied entry alive. */
static int snapshot(shmobj_map_iter *it, struct shmobj__map_shard *s)
{
    shmobj_map *m = it->map;
    unsigned spins = 0;
    for (unsigned tries = 0;; tries++) {
        int locked = tries >= MAP_ITER_LOCK_AFTER;
        uint64_t q1 = 0;
        if (locked) {
            int rc = shard_lock(m, s);
            if (rc != 0)
                return rc;
        } else {
            q1 = atomic_load_explicit(&s->seq, memory_order_acquire);
            if (q1 & 1) {
                int rc = wait_writer(m, s, &spins);
                if (rc != 0)
                    return rc;
                tries--;
                continue;
            }
        }
        shmobj_htcore ht;
        int rc = table_get(m, (unsigned)(s - m->ctl->shards_),
                           atomic_load_explicit(&s->table, memory_order_acquire), &ht);
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
    shmobj_map_iter *it = calloc(1, sizeof *it);
    if (it == NULL)
        return SHMOBJ_ENOMEM;
    it->map = map;
    *out = it;
    return 0;
}

MAP_READS_LINKAGE int MAP_READS_NAME(shmobj_map_iter_next)(shmobj_map_iter *it, const void **key,
                         size_t *key_len, const void **value,
                         size_t *value_len)
{
    if (it == NULL)
        return SHMOBJ_EINVAL;
    while (it->pos == it->n) {
        if (it->guard != 0) {
            guard_leave(it->map, it->guard);
            it->guard = 0;
        }
        if (it->shard >= SHMOBJ__MAP_SHARDS)
            return SHMOBJ_ENOTFOUND;
        int rc = guard_enter(it->map, &it->guard);
        if (rc == 0) {
            rc = snapshot(it, &it->map->ctl->shards_[it->shard]);
            if (rc != 0) {
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
    if (entry_peek(it->map, it->refs[it->pos++], &e) != 0)
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
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    int rc = shmobj_map_iter_next_reads(it, key, key_len, value, value_len);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    return rc;
}
#endif

void shmobj_map_iter_close(shmobj_map_iter *it)
{
    if (it == NULL)
        return;
    if (it->guard != 0)
        guard_leave(it->map, it->guard);
    free(it->refs);
    free(it);
}

/* ---- statistics and checks -------------------------------------------------------- */

static uint64_t block_bytes(shmobj_map *m, shmobj__ref ref)
{
    uint64_t usable = 0;
    if (m->sp->ops->check(m->sp, ref, &usable) != 0)
        return 0;
    return usable + 16; /* the arena's block header */
}

/* Heap bytes of the entries a table references. */
static uint64_t table_entry_bytes(shmobj_map *m, const shmobj_htcore *ht)
{
    uint64_t i = 0, n = 0;
    while (shmobj_htcore_next(ht, &i) == 0) {
        struct ent e;
        if (entry_peek(m, shmobj_htcore_ref_value(ht, i), &e) == 0)
            n += block_bytes(m, e.ref);
        i++;
    }
    return n;
}

/* Heap bytes on a shard's limbo lists: each retired block, and for a
 * cleared table the entries it still holds. Reads only. */
static uint64_t limbo_bytes(shmobj_map *m, struct shmobj__map_shard *s)
{
    uint64_t n = 0;
    for (unsigned li = 0; li < 3; li++) {
        uint64_t item = atomic_load(&s->limbo_head[li]);
        uint64_t budget = atomic_load(&s->limbo_len) + 1;
        while (item != 0 && budget-- > 0) {
            uint8_t *p;
            shmobj__ref ref = item & ~SHMOBJ__MAP_RETIRE_DEEP;
            shmobj_htcore ht;
            n += block_bytes(m, ref);
            if ((item & SHMOBJ__MAP_RETIRE_DEEP) && table_at(m, ref, &ht) == 0)
                n += table_entry_bytes(m, &ht);
            item = 0;
            if (block_at(m, ref, SHMOBJ__MAP_LINK_OFF + 8, &p, NULL) == 0)
                memcpy(&item, p + SHMOBJ__MAP_LINK_OFF, 8);
        }
    }
    return n;
}

int shmobj_map_stats_get(shmobj_map *map, shmobj_map_stats *st)
{
    if (map == NULL || st == NULL || st->struct_size < sizeof *st)
        return SHMOBJ_EINVAL;
    uint32_t size = st->struct_size;
    memset(st, 0, sizeof *st);
    st->struct_size = size;
    st->shards = SHMOBJ__MAP_SHARDS;
    uint64_t probe_total = 0;
    /* Counted as held, not changed: no reclaiming here (it would make two
     * calls in a row disagree). */
    for (unsigned i = 0; i < SHMOBJ__MAP_SHARDS; i++) {
        struct shmobj__map_shard *s = &map->ctl->shards_[i];
        shmobj_htcore ht;
        shmobj_htcore_stats hs;
        int rc = shard_lock(map, s);
        if (rc != 0)
            return rc;
        shmobj__ref tref = atomic_load(&s->table);
        rc = table_at(map, tref, &ht);
        if (rc == 0) {
            shmobj_htcore_stats_get(&ht, &hs);
            st->count += hs.count;
            st->slots += hs.slots;
            st->tombstones += hs.tombstones;
            probe_total += hs.probe_total;
            if (hs.probe_max > st->probe_max)
                st->probe_max = hs.probe_max;
            st->table_bytes += block_bytes(map, tref);
            st->entry_bytes += table_entry_bytes(map, &ht);
            st->pending_bytes += limbo_bytes(map, s);
        }
        shard_unlock(map, s);
        if (rc != 0)
            return rc;
    }
    st->total_bytes = block_bytes(map, map->ctl_ref) + st->table_bytes +
                      st->entry_bytes + st->pending_bytes;
    if (st->slots > 0)
        st->load_factor = (double)st->count / (double)st->slots;
    if (st->count > 0) {
        st->probe_mean = (double)probe_total / (double)st->count;
        st->bytes_per_item = (double)st->total_bytes / (double)st->count;
    }
    return 0;
}

struct check_ctx {
    shmobj_map *m;
    unsigned shard;
};

/* htcore's check asks for each entry's hash: recompute it from the key. */
static int check_hash(void *ctx, uint64_t v, uint64_t *hash)
{
    struct check_ctx *c = ctx;
    struct ent e;
    if (slot_entry(c->m, v, &e) != 0)
        return SHMOBJ_ECORRUPT;
    uint64_t h = shmobj_htcore_hash64(ent_key(&e), e.klen, c->m->seed);
    if ((h & ~SHMOBJ__MAP_GEN_MASK) != (e.hash_gen & ~SHMOBJ__MAP_GEN_MASK) ||
        (h >> SHMOBJ__MAP_SHARD_SHIFT) != c->shard)
        return SHMOBJ_ECORRUPT;
    *hash = h;
    return 0;
}

int shmobj_map_check(shmobj_map *map)
{
    if (map == NULL)
        return SHMOBJ_EINVAL;
    for (unsigned i = 0; i < SHMOBJ__MAP_SHARDS; i++) {
        struct shmobj__map_shard *s = &map->ctl->shards_[i];
        struct check_ctx c = {map, i};
        shmobj_htcore ht;
        int rc = shard_lock(map, s);
        if (rc != 0)
            return rc;
        rc = table_at(map, atomic_load(&s->table), &ht);
        if (rc == 0)
            rc = shmobj_htcore_check(&ht, check_hash, &c);
        if (rc == 0 && atomic_load(&s->count) != shmobj_htcore_count(&ht))
            rc = SHMOBJ_ECORRUPT;
        if (rc == 0 && (atomic_load(&s->seq) & 1))
            rc = SHMOBJ_ECORRUPT;
        for (unsigned li = 0; rc == 0 && li < 3; li++) {
            uint64_t item = atomic_load(&s->limbo_head[li]);
            uint64_t budget = atomic_load(&s->limbo_len) + 1;
            while (item != 0 && rc == 0) {
                uint8_t *p;
                if (budget-- == 0 ||
                    block_at(map, item & ~SHMOBJ__MAP_RETIRE_DEEP, SHMOBJ__MAP_LINK_OFF + 8, &p, NULL) != 0)
                    rc = SHMOBJ_ECORRUPT;
                else
                    memcpy(&item, p + SHMOBJ__MAP_LINK_OFF, 8);
            }
        }
        shard_unlock(map, s);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- create, open, close ------------------------------------------------------------ */

static uint64_t ctl_check(const struct shmobj__map_ctl *c)
{
    return shmobj_htcore_hash64(c, offsetof(struct shmobj__map_ctl, check),
                                UINT64_C(0x4d4150434845434b));
}

/* Claim a guard slot for this handle: set a clear bit of the bitmap, then
 * fill the slot. When every bit is set, reap the slots of dead owners
 * and look once more. */
static int reader_claim(shmobj_map *m)
{
    struct shmobj__map_ctl *c = m->ctl;
    uint64_t ident;
    int rc = owner_self(m->sp, &ident);
    if (rc != 0)
        return rc;
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned w = 0; w < SHMOBJ__MAP_CLAIM_WORDS; w++) {
            uint64_t bits = atomic_load(&c->claimed[w]);
            if (pass == 1) {
                for (uint64_t b = bits; b != 0; b &= b - 1)
                    reader_reap(m, w * 64 + ctz64(b));
                bits = atomic_load(&c->claimed[w]);
            }
            while (bits != UINT64_MAX) {
                unsigned j = ctz64(~bits);
                if (!atomic_compare_exchange_strong(&c->claimed[w], &bits,
                                                    bits | (UINT64_C(1) << j)))
                    continue; /* bits reloaded */
                struct shmobj__map_reader *r = &c->readers_[w * 64 + j];
                uint64_t n = atomic_fetch_add(&r->claims, 1) + 1;
                atomic_store(&r->active[0], 0);
                atomic_store(&r->active[1], 0);
                atomic_store(&r->token, ident);
                atomic_store(&r->owner, (n << 32) | (ident & UINT32_MAX));
                m->reader = r;
                return 0;
            }
        }
    }
    return SHMOBJ_EFULL;
}

/* Check a root's block and attach to it as a map: SHMOBJ_ETYPE for a
 * consistent block of another kind (its first word is not the map's
 * magic), SHMOBJ_EVERSION, SHMOBJ_ECORRUPT for a map control block whose
 * bytes disagree. The header is copied once and only the copy is used. */
static int map_attach(shmobj_segment *seg, shmobj__ref ref, shmobj_map **out)
{
    struct shmobj__space *sp = (struct shmobj__space *)seg;
    struct shmobj__map_ctl hdr;
    uint64_t usable;
    void *q;
    int rc = sp->ops->check(sp, ref, &usable);
    if (rc != 0)
        return rc == SHMOBJ_ESTALE ? rc : SHMOBJ_ECORRUPT;
    if (shmobj__space_at(sp, shmobj__ref_off(ref), usable, &q) != 0)
        return SHMOBJ_ECORRUPT;
    if (usable < sizeof hdr.magic)
        return SHMOBJ_ETYPE;
    memcpy(&hdr.magic, q, sizeof hdr.magic);
    if (hdr.magic != SHMOBJ__MAP_MAGIC)
        return SHMOBJ_ETYPE;
    const size_t hlen = offsetof(struct shmobj__map_ctl, pad0);
    if (usable < hlen)
        return SHMOBJ_ECORRUPT;
    memcpy(&hdr, q, hlen);
    if (hdr.version != SHMOBJ__MAP_VERSION)
        return SHMOBJ_EVERSION;
    if (usable < sizeof(struct shmobj__map_ctl) || ((uintptr_t)q & 63) != 0 ||
        hdr.check != ctl_check(&hdr) || hdr.shards != SHMOBJ__MAP_SHARDS ||
        hdr.readers != SHMOBJ__MAP_READERS ||
        hdr.ctl_size != sizeof(struct shmobj__map_ctl) ||
        hdr.lock_format != SHMOBJ__OS_LOCK_FORMAT)
        return SHMOBJ_ECORRUPT;
    shmobj_map *m = calloc(1, sizeof *m);
    if (m == NULL)
        return SHMOBJ_ENOMEM;
    m->seg = seg;
    m->sp = sp;
    m->base = sp->base;
    m->ctl_ref = ref;
    m->ctl = q;
    m->seed = hdr.seed;
    m->seed_mixed = shmobj_htcore_seed_mix(hdr.seed);
    rc = reader_claim(m);
    if (rc != 0) {
        free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int shmobj_map_create(shmobj_segment *seg, const char *name, shmobj_map **out)
{
    shmobj_ref existing;
    shmobj__ref ref;
    uint8_t *p;
    if (seg == NULL || name == NULL || out == NULL)
        return SHMOBJ_EINVAL;
    /* A cheap early answer; root_add below is what settles a race. */
    int rc = shmobj_segment_root_get(seg, name, &existing);
    if (rc == 0)
        return SHMOBJ_EEXIST;
    if (rc != SHMOBJ_ENOTFOUND)
        return rc;
    struct shmobj__space *sp = (struct shmobj__space *)seg;
    rc = sp->ops->alloc(sp, sizeof(struct shmobj__map_ctl), 64, &ref);
    if (rc != 0)
        return rc;
    /* A provisional handle (no guard slot) for the helpers below. */
    shmobj_map *t = calloc(1, sizeof *t);
    if (t == NULL) {
        (void)sp->ops->free(sp, ref);
        return SHMOBJ_ENOMEM;
    }
    t->sp = sp;
    t->seg = seg;
    t->ctl_ref = ref;
    rc = block_at(t, ref, sizeof(struct shmobj__map_ctl), &p, NULL);
    if (rc != 0) {
        (void)sp->ops->free(sp, ref);
        free(t);
        return rc;
    }
    struct shmobj__map_ctl *c = (struct shmobj__map_ctl *)(void *)p;
    memset(c, 0, sizeof *c);
    /* The seed only has to differ between maps and be unknown to whoever
     * picks the keys; the clock, the pid, the handle's token and the
     * address mixed will do. */
    uint64_t mix[3] = {shmobj__os_now_ns(),
                       ((uint64_t)getpid() << 32) ^ sp->ops->live->token(sp),
                       (uint64_t)(uintptr_t)c ^ ref};
    c->magic = SHMOBJ__MAP_MAGIC;
    c->version = SHMOBJ__MAP_VERSION;
    c->shards = SHMOBJ__MAP_SHARDS;
    c->readers = SHMOBJ__MAP_READERS;
    c->ctl_size = sizeof *c;
    c->seed = shmobj_htcore_hash64(mix, sizeof mix, 0);
    c->lock_format = SHMOBJ__OS_LOCK_FORMAT;
    c->check = ctl_check(c);
    atomic_store(&c->epoch, 2);
    t->ctl = c;
    t->seed = c->seed;
    for (unsigned i = 0; i < SHMOBJ__MAP_SHARDS && rc == 0; i++) {
        struct shmobj__map_shard *s = &c->shards_[i];
        shmobj__ref tref;
        shmobj_htcore ht;
        /* the lock is free as zeroed above */
        rc = table_new(t, MAP_MIN_CAPACITY, &tref, &ht);
        if (rc == 0)
            atomic_store(&s->table, tref);
    }
    /* Published only if the name is still free: of two creators racing,
     * one gets SHMOBJ_EEXIST and frees what it built. */
    bool published = false;
    if (rc == 0)
        rc = shmobj_segment_root_add(seg, name, ref);
    if (rc == 0) {
        published = true;
        rc = map_attach(seg, ref, out);
    }
    if (rc != 0) {
        for (unsigned i = 0; i < SHMOBJ__MAP_SHARDS; i++)
            if (atomic_load(&c->shards_[i].table) != 0)
                free_block(t, atomic_load(&c->shards_[i].table));
        if (published) /* never the root of a creator that won a race */
            (void)shmobj_segment_root_del(seg, name);
        (void)sp->ops->free(sp, ref);
    }
    free(t);
    return rc;
}

int shmobj_map_open(shmobj_segment *seg, const char *name, shmobj_map **out)
{
    shmobj_ref ref;
    if (seg == NULL || name == NULL || out == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj_segment_root_get(seg, name, &ref);
    if (rc != 0)
        return rc;
    return map_attach(seg, ref, out);
}

void shmobj_map_close(shmobj_map *map)
{
    if (map == NULL)
        return;
    /* A destroyed map's slot is someone else's bytes now: not touched. */
    if (map_stale(map) == 0) {
        struct shmobj__map_reader *r = map->reader;
        uint64_t owner = atomic_load(&r->owner);
        if (owner != 0 && atomic_compare_exchange_strong(&r->owner, &owner, 0))
            reader_release(map->ctl, (unsigned)(r - map->ctl->readers_));
    }
    free(map);
}

/* For tests: make this handle's unguarded reads wait `ns` between finding
 * an entry and copying its value (0: no wait). */
void shmobj__map_read_delay_set(shmobj_map *map, uint64_t ns);
void shmobj__map_read_delay_set(shmobj_map *map, uint64_t ns)
{
    map->read_delay_ns = ns;
}

/* For tests: call fn(arg, ref) after each entry a deep free (the limbo
 * item of a cleared table) frees, NULL: none. */
void shmobj__map_free_hook_set(shmobj_map *map, void (*fn)(void *, uint64_t), void *arg);
void shmobj__map_free_hook_set(shmobj_map *map, void (*fn)(void *, uint64_t), void *arg)
{
    map->free_hook = fn;
    map->free_hook_arg = arg;
}

/* For tests and the fuzz target: the control block of a handle. */
struct shmobj__map_ctl *shmobj__map_control(shmobj_map *map);
struct shmobj__map_ctl *shmobj__map_control(shmobj_map *map)
{
    return map->ctl;
}
