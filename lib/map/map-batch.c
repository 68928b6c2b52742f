/* Batched gets and prefetch hints.
 *
 * Invariants kept here:
 *  - A hint reads through a cached shape word only, which was validated
 *    when cached, so what it reads lies inside the mapping (which never
 *    shrinks) even if the table was replaced and freed since; nothing a
 *    hint reads is trusted, and a prefetch never faults.
 *  - Every lookup of a batch is a full copy-out lookup with every check
 *    of a single get (shmobj__map_lookup_copy); the batch only orders the
 *    loads so that their misses overlap. */
#include "map-internal.h"

void shmobj_map_prefetch(shmobj_map *map, const void *key, size_t key_len)
{
    if (!key_ok(map, key, key_len))
        return;
    prefetch_hash(map, map_hash(map, key, key_len));
}

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
                int rc = shmobj__map_lookup_copy(map, hash[i], r[i].key, r[i].key_len,
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
    SHMOBJ__RACY_BEGIN();
    int rc = shmobj_map_get_many_reads(map, reqs, n);
    SHMOBJ__RACY_END();
    return rc;
}
#endif
