/* The optimistic reads: get (the hot path), contains, views and the count.
 *
 * Invariants kept here:
 *  - A read takes no lock unless a writer holds it up: it copies the
 *    shard's seq (even), reads, and keeps what it read only if seq is
 *    unchanged; after MAP_SPIN_LIMIT spins on an odd seq it queues on the
 *    shard lock, which also repairs a shard whose writer died.
 *  - Everything read from the segment is bounds-checked against the
 *    mapping before use; a failed check in a try whose seq moved is a
 *    retry, in one whose seq held it is SHMOBJ_ECORRUPT.
 *  - The unguarded try (lookup_fast) keeps nothing past its section: a
 *    block is freed only after it was unlinked, which moves seq, so a try
 *    that read a freed block is discarded. Every other read holds a guard,
 *    so what a view points to stays allocated until it is released.
 *  - The hot get path (shmobj_map_get for keys of up to 64 bytes) calls
 *    nothing: the hash, htcore's probe pieces and everything of this file
 *    it uses are inlined into it. */
#include <string.h>

#include "cpu.h"
#include "map-internal.h"
#include "step.h"

/* ThreadSanitizer: the reads of an optimistic section (between the two
 * loads of a shard's seq) race with writers by design and are kept only
 * when seq held, which the sanitizer cannot follow. Its builds ignore the
 * reads of those sections alone (writes, atomics and everything outside a
 * section stay tracked); other builds compile these to nothing. */
#if defined(MAP_TSAN)
#define MAP_SECTION_BEGIN() SHMOBJ__RACY_BEGIN()
#define MAP_SECTION_END() SHMOBJ__RACY_END()
#else
#define MAP_SECTION_BEGIN() ((void)0)
#define MAP_SECTION_END() ((void)0)
#endif

/* Is the shard inside a section that no live process holds its lock for?
 * A writer holds the lock for its whole section, so a lock word seen free
 * or dead between two loads of the same odd seq (acquire: a release of the
 * lock after that section would have shown a later seq) means its writer
 * died there, or the words are damage: only a writable handle's repair
 * ends it. */
static bool section_orphaned(shmobj_map *m, struct shmobj__map_shard *s)
{
    uint64_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
    uint32_t w = atomic_load_explicit(&s->lock.word, memory_order_acquire);
    return (q & 1) != 0 && !shmobj__space_token_alive(m->sp, w & ~UINT32_C(0x80000000)) &&
           atomic_load_explicit(&s->seq, memory_order_acquire) == q;
}

/* Wait out a writer section: spin briefly, then queue on the lock (which
 * also repairs the shard when its writer died inside the section). An
 * error means the shard cannot be repaired, or the map is gone: the reader
 * gives up with it. */
int shmobj__map_wait_writer(shmobj_map *m, struct shmobj__map_shard *s,
                            unsigned *spins)
{
    if (++*spins < MAP_SPIN_LIMIT) {
        shmobj__cpu_relax();
        return 0;
    }
    /* A read-only handle may not queue on the lock (nor repair): it
     * sleeps in 1 ms steps, and gives up after MAP_RO_WAIT_STEPS of them
     * with the shard still inside a section (a writer stopped there)
     * rather than wait on it for ever; at once when the section is
     * orphaned (section_orphaned()). */
    if (m->sp->readonly) {
        uint32_t waited = *spins - MAP_SPIN_LIMIT;
        if (waited >= MAP_RO_WAIT_STEPS || (waited % 16 == 0 && section_orphaned(m, s)))
            return SHMOBJ_EBUSY;
        shmobj__os_sleep_ns(UINT64_C(1000000));
        return map_stale(m);
    }
    *spins = 0;
    int rc = shmobj__map_shard_lock(m, s);
    if (rc == 0)
        shard_unlock(m, s);
    else if (rc != SHMOBJ_ECORRUPT && rc != SHMOBJ_ESTALE)
        shmobj__os_yield();
    return rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE ? rc : 0;
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
            if (shmobj__map_entry_peek(m, v, e) != 0)
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
            int rc = shmobj__map_wait_writer(m, s, &spins);
            if (rc != 0)
                return rc;
            continue;
        }
        shmobj_htcore ht;
        MAP_SECTION_BEGIN();
        int rc = shmobj__map_table_get(m, (unsigned)(s - m->ctl->shards_),
                                        atomic_load_explicit(&s->table, memory_order_acquire),
                                        &ht);
        if (rc == 0)
            rc = table_find(m, &ht, hash, key, klen, e);
        SHMOBJ__STEP("map.get.guarded_found");
        if (rc == 0 && buf != NULL && e->vlen <= buf_len)
            copy_value(buf, ent_value(e), e->vlen);
        MAP_SECTION_END();
        SHMOBJ__STEP("map.get.guarded_copied");
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

/* The largest entry payload the hot instance reads: the header, a key and
 * a value of MAP_HOT_MAX bytes each. Every mapping that holds a map is
 * larger than that plus 16 (its control block alone is), which the hot
 * instance's single bounds compare relies on. */
#define MAP_HOT_ENTRY (SHMOBJ__MAP_ENTRY_HEADER + 2u * MAP_HOT_MAX)
_Static_assert(sizeof(struct shmobj__map_ctl) >= 16 + MAP_HOT_ENTRY,
               "the hot bounds compare cannot wrap");

/* Copy a value of at most MAP_HOT_MAX bytes without a call; an 8-byte
 * value is read atomically (it may be added to). The longest values are
 * tested for first: one compare on the way to them. */
static inline void copy_value_short(uint8_t *dst, const uint8_t *v, uint32_t n)
{
    if (n > 32) { /* overlapping 16-byte moves cover 33..64 */
        memcpy(dst, v, 16);
        memcpy(dst + 16, v + 16, 16);
        memcpy(dst + n - 32, v + n - 32, 16);
        memcpy(dst + n - 16, v + n - 16, 16);
    } else if (n >= 16) {
        memcpy(dst, v, 16);
        memcpy(dst + n - 16, v + n - 16, 16);
    } else if (n == 8) {
        uint64_t x = atomic_load_explicit((_Atomic uint64_t *)(void *)v,
                                          memory_order_relaxed);
        memcpy(dst, &x, 8);
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

/* 0 when the n <= MAP_HOT_MAX bytes at a and b are equal, else not 0,
 * without a call: the longest keys are tested for first, and every length
 * gives a word the caller tests once (no flag to merge from each path). */
static inline uint64_t key_diff_short(const uint8_t *a, const uint8_t *b, size_t n)
{
#if defined(__SSE2__)
    if (n > 32) { /* overlapping 16-byte blocks cover 33..64 */
        __m128i eq = _mm_and_si128(
            _mm_and_si128(shmobj__eq16(a, b), shmobj__eq16(a + 16, b + 16)),
            _mm_and_si128(shmobj__eq16(a + n - 32, b + n - 32),
                          shmobj__eq16(a + n - 16, b + n - 16)));
        return (uint32_t)_mm_movemask_epi8(eq) ^ 0xffffu;
    }
    if (n > 16)
        return (uint32_t)_mm_movemask_epi8(_mm_and_si128(
                   shmobj__eq16(a, b), shmobj__eq16(a + n - 16, b + n - 16))) ^
               0xffffu;
#else
    if (n > 16) {
        uint64_t d = (shmobj__load64(a + n - 8) ^ shmobj__load64(b + n - 8)) |
                     (shmobj__load64(a + n - 16) ^ shmobj__load64(b + n - 16));
        for (size_t i = 0; i + 16 < n; i += 16)
            d |= (shmobj__load64(a + i) ^ shmobj__load64(b + i)) |
                 (shmobj__load64(a + i + 8) ^ shmobj__load64(b + i + 8));
        return d;
    }
#endif
    if (n >= 8)
        return (shmobj__load64(a) ^ shmobj__load64(b)) |
               (shmobj__load64(a + n - 8) ^ shmobj__load64(b + n - 8));
    if (n >= 4)
        return (shmobj__load32(a) ^ shmobj__load32(b)) |
               (shmobj__load32(a + n - 4) ^ shmobj__load32(b + n - 4));
    if (n > 0)
        return (uint64_t)((a[0] ^ b[0]) | (a[n >> 1] ^ b[n >> 1]) | (a[n - 1] ^ b[n - 1]));
    return 0;
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
 * call at all, so the compiler keeps everything in registers; it tells a
 * value too long for the buffer by SHMOBJ_ENOBUFS (*vlen set), so that
 * the caller's result needs no compare on the path that copied. The general
 * instance compares and copies any length and holds the tests' delay.
 *
 * The home group's lines are fetched first, from the shape word before it
 * is validated (a prefetch never faults), so the miss is served while the
 * checks run. */
#define MAP_FAST_NO 1
static inline __attribute__((always_inline)) int
lookup_fast_section(shmobj_map *m, uint64_t hash, const void *key, size_t klen,
                    void *buf, size_t buf_len, uint32_t *vlen, int hot)
{
    unsigned idx = (unsigned)(hash >> SHMOBJ__MAP_SHARD_SHIFT);
    /* The handle's fields first: the acquire loads below would make the
     * compiler load them again after each (an older, smaller `mapped` only
     * sends more reads the general way) */
    const uint8_t *base = m->base;
    struct shmobj__map_shard *s = &m->ctl->shards_[idx];
    uint64_t mapped = atomic_load_explicit(&m->sp->mapped, memory_order_acquire);
    /* the segment handle was closed: the guarded path says SHMOBJ_ESTALE
     * (the flag shares mapped's line) */
    if (shmobj__space_closed(m->sp))
        return MAP_FAST_NO;
    uint64_t shape = atomic_load_explicit(&m->shape[idx], memory_order_relaxed);
    uint64_t gmask = shape_gmask(shape);
    uint64_t g = shmobj_htcore_probe_home(hash, gmask);
    /* an integer until the shape is validated */
    uintptr_t groups_at = (uintptr_t)base +
                          (uintptr_t)(shape & SHMOBJ__REF_OFF_MASK & ~SHAPE_LOW) + SHAPE_GROUPS_AT;
    uintptr_t home = groups_at + (uintptr_t)(g * MAP_GROUP_BYTES);
#if defined(__GNUC__)
    __builtin_prefetch((const void *)home);
    __builtin_prefetch((const void *)(home + 64));
    __builtin_prefetch((const void *)(home + 128));
#endif
    /* The header's slot count must agree with the shape (damage is
     * noticed). It is read before the shape is validated, while the group
     * count is still in a register: any shape this handle cached (or 0)
     * names a header inside the mapping, which never shrinks, and the
     * count of a table is written once, before its publication, so a
     * header of another table fails below with the table reference. */
    if (shmobj_htcore_header_slots((const uint8_t *)groups_at - SHMOBJ_HTCORE_HEADER_SIZE) !=
        (gmask + 1) * SHMOBJ_HTCORE_GROUP)
        return MAP_FAST_NO;
    uint64_t q1 = atomic_load_explicit(&s->seq, memory_order_acquire);
    shmobj__ref tref = atomic_load_explicit(&s->table, memory_order_acquire);
    /* Valid when the shard is not being written and still has the table
     * the shape was taken from: tref's low bits are then 0 and shape ^ tref
     * is exactly the shape's, 1..63 (so the shape is not 0); one compare
     * for all. */
    uint64_t odd = (q1 & 1) | (tref & SHAPE_LOW);
    if ((((shape ^ tref) - 1) | (odd << 6)) >= SHAPE_LOW)
        return MAP_FAST_NO;
    const uint8_t *groups = (const uint8_t *)groups_at;
    const uint8_t *gp = (const uint8_t *)home;

    int rc = SHMOBJ_ENOTFOUND;
    for (uint64_t step = 0;;) {
        uint32_t empty;
        uint32_t tags = shmobj_htcore_group_match(gp, shmobj_htcore_tag(hash), &empty);
        for (; tags != 0; tags &= tags - 1) {
            uint64_t w = shmobj_htcore_ref_word(gp, shmobj_htcore_ctz(tags));
            if (!shmobj_htcore_ref_word_matches(w, hash))
                continue;
            uint64_t off = shmobj_htcore_ref_word_value(w) << SHMOBJ__MAP_SLOT_SHIFT;
            struct shmobj__map_entry h;
            /* off and mapped are multiples of 16: the header is inside.
             * The hot instance reads at most MAP_HOT_ENTRY bytes (its key
             * and value lengths are checked against MAP_HOT_MAX before
             * use), so one compare bounds everything it reads: an entry
             * that ends closer to the mapping's end goes the general way */
            if (hot ? off - 16 > mapped - (16 + MAP_HOT_ENTRY)
                    : off < 16 || off >= mapped)
                return MAP_FAST_NO;
            const uint8_t *p = base + off;
#if defined(__GNUC__)
            __builtin_prefetch(p + 64);
            __builtin_prefetch(p + 128);
#endif
            memcpy(&h, p, sizeof h);
            if (h.key_len != (uint32_t)klen) /* klen <= UINT32_MAX (key_ok) */
                continue;
            if (!hot && shmobj__map_entry_size(h.key_len, h.value_len) > mapped - off)
                return MAP_FAST_NO;
            if (hot ? key_diff_short(p + SHMOBJ__MAP_ENTRY_HEADER, key, klen) != 0
                    : klen != 0 && memcmp(p + SHMOBJ__MAP_ENTRY_HEADER, key, klen) != 0)
                continue;
            /* klen, equal to h.key_len, needs no widening */
            const uint8_t *value = p + shmobj__map_value_off(klen);
            if (hot && h.value_len > MAP_HOT_MAX)
                return MAP_FAST_NO;
            if (!hot && m->read_delay_ns != 0)
                read_delay(m->read_delay_ns);
            /* found, not yet copied: the entry may be replaced, freed and
             * its block reused before the copy */
            SHMOBJ__STEP("map.get.fast_found");
            *vlen = h.value_len;
            if (h.value_len <= buf_len) {
                if (hot)
                    copy_value_short(buf, value, h.value_len);
                else
                    copy_value(buf, value, h.value_len);
                /* copied, not yet judged: a writer may replace, free and
                 * reuse the entry before the sequence is read again */
                SHMOBJ__STEP("map.get.fast_copied");
                /* the section ends on each way out, so that the caller's
                 * result folds into the path that knows the value fit */
                atomic_thread_fence(memory_order_acquire);
                if (atomic_load_explicit(&s->seq, memory_order_relaxed) != q1)
                    return MAP_FAST_NO;
                return 0;
            }
            rc = hot ? SHMOBJ_ENOBUFS : 0;
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

/* The section above, its reads ignored by ThreadSanitizer (the same code
 * in other builds). */
static inline __attribute__((always_inline)) int
lookup_fast(shmobj_map *m, uint64_t hash, const void *key, size_t klen,
            void *buf, size_t buf_len, uint32_t *vlen, int hot)
{
    MAP_SECTION_BEGIN();
    int rc = lookup_fast_section(m, hash, key, klen, buf, buf_len, vlen, hot);
    MAP_SECTION_END();
    return rc;
}

/* lookup() under a guard, out of line: the fast path that is inlined into
 * every copy-out lookup stays short. */
static __attribute__((noinline)) int
lookup_guarded(shmobj_map *m, uint64_t hash, const void *key, size_t klen,
               void *buf, size_t buf_len, uint32_t *vlen)
{
    struct ent e;
    uint64_t g;
    int rc;
    if (m->reader == NULL) {
        /* Read-only, no guard to hold: lookup() copies the value inside
         * its validated section, which is all a copy-out needs (a block
         * is freed only after its unlink moved seq). */
        rc = map_stale(m);
        if (rc == 0)
            rc = lookup(m, hash, key, klen, &e, buf, buf_len);
        if (rc == 0)
            *vlen = e.vlen;
        return rc;
    }
    rc = shmobj__map_guard_enter(m, &g);
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
int shmobj__map_lookup_copy(shmobj_map *m, uint64_t hash, const void *key, size_t klen,
                            void *buf, size_t buf_len, uint32_t *vlen)
{
    int rc = lookup_fast(m, hash, key, klen, buf, buf_len, vlen, 0);
    if (rc != MAP_FAST_NO)
        return rc;
    return lookup_guarded(m, hash, key, klen, buf, buf_len, vlen);
}

/* shmobj_map_get() for every case the hot path leaves. */
static __attribute__((noinline)) int
get_general(shmobj_map *map, const void *key, size_t key_len, void *buf,
            size_t buf_len, size_t *value_len)
{
    if (!key_ok(map, key, key_len) || (buf == NULL && buf_len > 0))
        return SHMOBJ_EINVAL;
    uint32_t vlen = 0;
    int rc = shmobj__map_lookup_copy(map, map_hash(map, key, key_len), key, key_len, buf,
                                     buf_len, &vlen);
    return get_result(rc, vlen, buf_len, value_len);
}

/* flatten: the hash is inlined too (the compiler would call it) */
#if defined(__GNUC__)
__attribute__((flatten))
#endif
int shmobj_map_get(shmobj_map *map, const void *key, size_t key_len,
                   void *buf, size_t buf_len, size_t *value_len)
{
    /* hot_klen_lim: MAP_HOT_MAX + 1, or 0 while a test's read delay is
     * set (one compare for both) */
    if (map != NULL && key != NULL && key_len < map->hot_klen_lim && buf != NULL) {
        uint32_t vlen = 0;
        int rc = lookup_fast(map, map_hash(map, key, key_len), key, key_len,
                             buf, buf_len, &vlen, 1);
        if (rc != MAP_FAST_NO) {
            /* 0 (copied) or ENOBUFS (too long): vlen is the value's */
            if (rc != SHMOBJ_ENOTFOUND && value_len != NULL)
                *value_len = vlen;
            return rc;
        }
    }
    return get_general(map, key, key_len, buf, buf_len, value_len);
}

int shmobj_map_get_view(shmobj_map *map, const void *key, size_t key_len,
                        shmobj_map_view *view)
{
    if (!key_ok(map, key, key_len) || view == NULL)
        return SHMOBJ_EINVAL;
    uint64_t hash = map_hash(map, key, key_len);
    struct ent e;
    uint64_t g;
    int rc = shmobj__map_guard_enter(map, &g);
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
    shmobj__map_hold(map); /* the view outlives the map's close */
    return 0;
}

void shmobj_map_view_release(shmobj_map_view *view)
{
    if (view == NULL || view->map_ == NULL || view->guard_ == 0)
        return;
    shmobj_map *map = view->map_;
    guard_leave(map, view->guard_);
    memset(view, 0, sizeof *view);
    shmobj__map_release(map);
}

int shmobj_map_contains(shmobj_map *map, const void *key, size_t key_len)
{
    if (!key_ok(map, key, key_len))
        return SHMOBJ_EINVAL;
    uint32_t vlen;
    return shmobj__map_lookup_copy(map, map_hash(map, key, key_len), key,
                                   key_len, NULL, 0, &vlen);
}

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
