/* The shared map's lifecycle (create, open, close), its statistics and its
 * consistency check: htcore ref-mode tables in a segment, 64 shards, each
 * with a lock for writers and a sequence counter for readers that take no
 * lock unless a writer holds them up (map-internal.h lists the sources).
 *
 * Invariants kept here:
 *  - A map is published (its root added) only once its control block and
 *    every shard's table are built; of two creators racing for a name, one
 *    gets SHMOBJ_EEXIST and frees what it built.
 *  - A root's block is taken for a map only after its header was copied
 *    once and every field of the copy checked; only the copy is used.
 *  - A handle's close writes nothing to a destroyed map's bytes.
 *  - The statistics count every heap block the map holds (control block,
 *    tables, entries, limbo lists, block headers included) and change
 *    nothing, so two reads with no writes between them agree. */
#include <stdlib.h>
#include <string.h>

#include "extstruct.h"
#include "map-internal.h"
#include "shmobj/segment.h"

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
        if (shmobj__map_entry_peek(m, shmobj_htcore_ref_value(ht, i), &e) == 0)
            n += block_bytes(m, e.ref);
        i++;
    }
    return n;
}

/* Heap bytes of one retired item: the block, and for a cleared table the
 * entries it still holds. */
static void limbo_item_bytes(shmobj_map *m, struct shmobj__map_shard *s, unsigned li,
                             uint64_t item, uint64_t next, void *arg)
{
    shmobj__ref ref = item & ~SHMOBJ__MAP_RETIRE_DEEP;
    shmobj_htcore ht;
    uint64_t *n = arg;
    (void)s;
    (void)li;
    (void)next;
    *n += block_bytes(m, ref);
    if ((item & SHMOBJ__MAP_RETIRE_DEEP) && shmobj__map_table_at(m, ref, &ht) == 0)
        *n += table_entry_bytes(m, &ht);
}

/* Heap bytes on a shard's limbo lists. Reads only. */
static uint64_t limbo_bytes(shmobj_map *m, struct shmobj__map_shard *s)
{
    uint64_t n = 0;
    for (unsigned li = 0; li < 3; li++)
        (void)shmobj__map_limbo_walk(m, s, li, limbo_item_bytes, &n);
    return n;
}

/* Run fn on shard s as it is at one moment: under the shard's lock, or,
 * for a read-only handle (which may not take it), inside a read section
 * validated by the shard's seq like a lookup's (a writer that keeps the
 * shard inside its section ends it with SHMOBJ_EBUSY, as in
 * shmobj__map_wait_writer(), and one that keeps changing it with
 * SHMOBJ_EBUSY after MAP_RO_VISIT_TRIES tries). fn starts afresh on
 * each try. */
#define MAP_RO_VISIT_TRIES 100000

static int shard_visit(shmobj_map *m, struct shmobj__map_shard *s,
                       int (*fn)(shmobj_map *m, struct shmobj__map_shard *s, void *arg),
                       void *arg)
{
    if (!m->sp->readonly) {
        int rc = shmobj__map_shard_lock(m, s);
        if (rc != 0)
            return rc;
        rc = fn(m, s, arg);
        shard_unlock(m, s);
        return rc;
    }
    unsigned spins = 0;
    for (unsigned t = 0; t < MAP_RO_VISIT_TRIES; t++) {
        uint64_t q1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (q1 & 1) {
            int rc = shmobj__map_wait_writer(m, s, &spins);
            if (rc != 0)
                return rc;
            continue;
        }
        int rc = fn(m, s, arg);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) == q1)
            return rc;
    }
    return SHMOBJ_EBUSY;
}

struct shard_stats {
    shmobj_map_stats st;
    uint64_t probe_total;
};

static int shard_stats(shmobj_map *map, struct shmobj__map_shard *s, void *arg)
{
    struct shard_stats *r = arg;
    shmobj_map_stats *st = &r->st;
    shmobj_htcore ht;
    shmobj_htcore_stats hs;
    memset(r, 0, sizeof *r);
    shmobj__ref tref = atomic_load(&s->table);
    int rc = shmobj__map_table_at(map, tref, &ht);
    if (rc == 0) {
        shmobj_htcore_stats_get(&ht, &hs);
        st->count = hs.count;
        st->slots = hs.slots;
        st->tombstones = hs.tombstones;
        r->probe_total = hs.probe_total;
        st->probe_max = hs.probe_max;
        st->table_bytes = block_bytes(map, tref);
        st->entry_bytes = table_entry_bytes(map, &ht);
        st->pending_bytes = limbo_bytes(map, s);
    }
    return rc;
}

int shmobj_map_stats_get(shmobj_map *map, shmobj_map_stats *out)
{
    /* Unchanged since the first release. */
    if (map == NULL || out == NULL || !shmobj__ext_out_ok(out, sizeof *out))
        return SHMOBJ_EINVAL;
    shmobj_map_stats ours = {0}, *st = &ours;
    st->shards = SHMOBJ__MAP_SHARDS;
    uint64_t probe_total = 0;
    /* Counted as held, not changed: no reclaiming here (it would make two
     * calls in a row disagree). */
    for (unsigned i = 0; i < SHMOBJ__MAP_SHARDS; i++) {
        struct shard_stats r;
        int rc = shard_visit(map, &map->ctl->shards_[i], shard_stats, &r);
        if (rc != 0)
            return rc;
        st->count += r.st.count;
        st->slots += r.st.slots;
        st->tombstones += r.st.tombstones;
        probe_total += r.probe_total;
        if (r.st.probe_max > st->probe_max)
            st->probe_max = r.st.probe_max;
        st->table_bytes += r.st.table_bytes;
        st->entry_bytes += r.st.entry_bytes;
        st->pending_bytes += r.st.pending_bytes;
    }
    st->total_bytes = block_bytes(map, map->ctl_ref) + st->table_bytes +
                      st->entry_bytes + st->pending_bytes;
    if (st->slots > 0)
        st->load_factor = (double)st->count / (double)st->slots;
    if (st->count > 0) {
        st->probe_mean = (double)probe_total / (double)st->count;
        st->bytes_per_item = (double)st->total_bytes / (double)st->count;
    }
    shmobj__ext_out(out, st, sizeof *st);
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
    if (shmobj__map_slot_entry(c->m, v, &e) != 0)
        return SHMOBJ_ECORRUPT;
    uint64_t h = shmobj_htcore_hash64(ent_key(&e), e.klen, c->m->seed);
    if ((h & ~SHMOBJ__MAP_GEN_MASK) != (e.hash_gen & ~SHMOBJ__MAP_GEN_MASK) ||
        (h >> SHMOBJ__MAP_SHARD_SHIFT) != c->shard)
        return SHMOBJ_ECORRUPT;
    *hash = h;
    return 0;
}

static int shard_check(shmobj_map *map, struct shmobj__map_shard *s, void *arg)
{
    struct check_ctx *c = arg;
    shmobj_htcore ht;
    int rc = shmobj__map_table_at(map, atomic_load(&s->table), &ht);
    if (rc == 0)
        rc = shmobj_htcore_check(&ht, check_hash, c);
    if (rc == 0 && atomic_load(&s->count) != shmobj_htcore_count(&ht))
        rc = SHMOBJ_ECORRUPT;
    if (rc == 0 && (atomic_load(&s->seq) & 1))
        rc = SHMOBJ_ECORRUPT;
    for (unsigned li = 0; rc == 0 && li < 3; li++)
        rc = shmobj__map_limbo_walk(map, s, li, NULL, NULL);
    return rc;
}

int shmobj_map_check(shmobj_map *map)
{
    if (map == NULL)
        return SHMOBJ_EINVAL;
    for (unsigned i = 0; i < SHMOBJ__MAP_SHARDS; i++) {
        struct check_ctx c = {map, i};
        int rc = shard_visit(map, &map->ctl->shards_[i], shard_check, &c);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static uint64_t ctl_check(const struct shmobj__map_ctl *c)
{
    return shmobj_htcore_hash64(c, offsetof(struct shmobj__map_ctl, check),
                                UINT64_C(0x4d4150434845434b));
}

/* Check a root's block and attach to it as a map: SHMOBJ_ETYPE for a
 * consistent block of another kind (its first word is not the map's
 * magic), SHMOBJ_EVERSION, SHMOBJ_ECORRUPT for a map control block whose
 * bytes disagree. The header is copied once and only the copy is used. */
static int map_attach(shmobj_segment *seg, shmobj__ref ref, shmobj_map **out)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
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
    m->hot_klen_lim = MAP_HOT_MAX + 1;
    m->ctl_ref = ref;
    m->ctl = q;
    m->seed = hdr.seed;
    m->seed_mixed = shmobj_htcore_seed_mix(hdr.seed);
    atomic_init(&m->holds, 1);
    /* A read-only handle claims no reader slot (it would write one): its
     * reads copy out inside validated sections and hold nothing. */
    rc = sp->readonly ? 0 : shmobj__map_reader_claim(m);
    if (rc != 0) {
        free(m);
        return rc;
    }
    shmobj__space_hold(sp);
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
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
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
    rc = shmobj__map_block_at(t, ref, sizeof(struct shmobj__map_ctl), &p, NULL);
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
                       ((uint64_t)shmobj__os_pid() << 32) ^ sp->ops->live->token(sp),
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
        rc = shmobj__map_table_new(t, MAP_MIN_CAPACITY, &tref, &ht);
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

int shmobj_map_open_timed(shmobj_segment *seg, const char *name,
                          int64_t timeout_ns, shmobj_map **out)
{
    shmobj_ref ref;
    if (seg == NULL || name == NULL || out == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj_segment_root_wait(seg, name, timeout_ns, &ref);
    if (rc != 0)
        return rc;
    return map_attach(seg, ref, out);
}

/* Rounds of create-then-open before open_or_create gives up: a round is
 * lost only when the name was published and then taken away again (a
 * winner that failed after publishing deletes its root and frees the
 * block, a destroy), which a peer start-up does not do for long. */
#define OPEN_OR_CREATE_ROUNDS 16

int shmobj_map_open_or_create(shmobj_segment *seg, const char *name,
                              shmobj_map **out)
{
    if (seg == NULL || name == NULL || out == NULL)
        return SHMOBJ_EINVAL;
    int rc = SHMOBJ_ENOTFOUND;
    for (unsigned i = 0; i < OPEN_OR_CREATE_ROUNDS; i++) {
        rc = shmobj_map_create(seg, name, out);
        if (rc != SHMOBJ_EEXIST)
            return rc;
        rc = shmobj_map_open(seg, name, out);
        if (rc != SHMOBJ_ENOTFOUND && rc != SHMOBJ_ESTALE)
            return rc;
    }
    return rc;
}

void shmobj__map_release(shmobj_map *map)
{
    if (atomic_fetch_sub_explicit(&map->holds, 1, memory_order_acq_rel) != 1)
        return;
    /* A destroyed map's slot is someone else's bytes now: not touched.
     * After the segment's close the mapping is still there (this handle
     * holds it), so the slot is given back. */
    if (map->reader != NULL && map_destroyed(map) == 0) {
        struct shmobj__map_reader *r = map->reader;
        uint64_t owner = atomic_load(&r->owner);
        if (owner != 0 && atomic_compare_exchange_strong(&r->owner, &owner, 0))
            shmobj__map_reader_release(map->ctl, (unsigned)(r - map->ctl->readers_));
    }
    struct shmobj__space *sp = map->sp;
    free(map);
    shmobj__space_release(sp);
}

void shmobj_map_close(shmobj_map *map)
{
    if (map == NULL)
        return;
    shmobj__map_release(map);
}

/* For tests: make this handle's unguarded reads wait `ns` between finding
 * an entry and copying its value (0: no wait). */
void shmobj__map_read_delay_set(shmobj_map *map, uint64_t ns);
void shmobj__map_read_delay_set(shmobj_map *map, uint64_t ns)
{
    map->read_delay_ns = ns;
    map->hot_klen_lim = ns != 0 ? 0 : MAP_HOT_MAX + 1;
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
