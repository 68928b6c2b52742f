/* The probe of a dict, set or named struct index: the one walk over index
 * entries in the layer. The builder enters keys with it, every lookup of
 * the views (the inline fast paths among them) finds keys with it, and the
 * checker proves each key is found where it is, through the views' lookup;
 * so where the writer puts a key and where a reader looks for it cannot
 * disagree. Only the comparison of the key met with the key sought differs
 * between them (a description's key for the builder, a key slot for the
 * readers: lib/object/read/key-lookup.h).
 *
 * Invariants kept here:
 * - The sequence is the format's: start at hash & (cap - 1), step by one,
 *   wrap at cap (doc/format-object.md, "Index").
 * - At most cap entries are read, so a damaged index (no empty entry)
 *   cannot loop; an entry naming an item at or past `count` stops the
 *   probe as damage before its item is touched.
 * - Each entry is read once; what is judged is the local copy. */
#ifndef SHMOBJ_OBJECT_INDEX_PROBE_H
#define SHMOBJ_OBJECT_INDEX_PROBE_H

#include <stdint.h>

#include "format.h"

/* What shmobj__probe_next() met. */
enum shmobj__probe_step {
    SHMOBJ__PROBE_HIT,   /* an entry whose stored half hash is the key's */
    SHMOBJ__PROBE_EMPTY, /* an empty entry, at .pos: the key is absent */
    SHMOBJ__PROBE_END,   /* cap entries read without an empty one */
    SHMOBJ__PROBE_BAD    /* an entry naming no item: damage */
};

/* A probe in progress. Lives in registers: callers keep it local. */
struct shmobj__probe {
    const uint64_t *ix; /* the index, cap entries */
    uint64_t mask;      /* cap - 1 */
    uint64_t at;        /* hash + reads so far (unmasked: entry at & mask) */
    uint64_t end;       /* hash + cap: no read at or past it */
    uint32_t tag;       /* the high half of the key's hash */
};

/* Start the probe for `hash` over the cap (a power of two, or 0 for an
 * empty index, which reads nothing) entries at ix. */
static inline __attribute__((always_inline)) void
shmobj__probe_start(struct shmobj__probe *p, const uint64_t *ix, uint64_t cap,
                    uint64_t hash)
{
    p->ix = ix;
    p->mask = cap - 1;
    p->at = hash;
    p->end = hash + cap;
    p->tag = (uint32_t)(hash >> 32);
}

/* Read entries until one decides: HIT with *item (< count) set; EMPTY
 * with the empty entry at shmobj__probe_pos() (where the builder enters a
 * new key); END; or BAD. Entries of other half hashes are stepped over. A
 * caller whose HIT was another key calls again to go on. */
static inline __attribute__((always_inline)) int
shmobj__probe_next(struct shmobj__probe *p, uint64_t count, uint64_t *item)
{
    for (; p->at != p->end; p->at++) {
        uint64_t e = p->ix[p->at & p->mask];
        if (e == 0)
            return SHMOBJ__PROBE_EMPTY;
        uint64_t it = (e & UINT32_MAX) - 1;
        if (it >= count)
            return SHMOBJ__PROBE_BAD;
        if ((uint32_t)(e >> 32) == p->tag) {
            *item = it;
            p->at++;
            return SHMOBJ__PROBE_HIT;
        }
    }
    return SHMOBJ__PROBE_END;
}

/* The entry an EMPTY step stopped at. */
static inline uint64_t shmobj__probe_pos(const struct shmobj__probe *p)
{
    return p->at & p->mask;
}

/* Entries the probe has read so far (the work the checker charges): the
 * reads before `at`, and the one it stopped at unless it ended. */
static inline uint64_t shmobj__probe_reads(const struct shmobj__probe *p, int step)
{
    uint64_t cap = p->mask + 1;
    return cap - (p->end - p->at) + (step == SHMOBJ__PROBE_EMPTY || step == SHMOBJ__PROBE_BAD);
}

#endif /* SHMOBJ_OBJECT_INDEX_PROBE_H */
