/*
 * shmobj_htcore.c - the open-addressing core (see shmobj_htcore.h).
 *
 * Invariants kept here:
 *  - count, tombstones and growth_left always describe the control bytes:
 *    growth_left = empty slots - (slots - slots * 7/8), so full + deleted
 *    never exceed 7/8 of the slots and every probe meets an empty group;
 *  - an entry lives in the first group of its probe sequence that had a
 *    free (empty or deleted) slot when it was inserted; every group before
 *    it was full then and, because deletion in a group without an empty
 *    slot leaves a tombstone, never regains an empty slot until the table
 *    is rebuilt. Hence a lookup may stop at the first group with an empty
 *    slot, and a deletion may write "empty" when its group has one;
 *  - every index is masked into the table and every loop is bounded by the
 *    number of groups or slots, whatever the bytes say, so a caller racing a
 *    writer (and validating afterwards) cannot be led out of bounds;
 *  - the bytes hold no pointers: the handle's pointers are rebuilt by
 *    attach in each process.
 * Only <stddef.h>, <stdint.h> and <string.h> are used (plus <emmintrin.h>
 * when SSE2 is available and not disabled with SHMOBJ_HTCORE_NO_SSE2).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shmobj_htcore.h"

#define HT_GROUP SHMOBJ_HTCORE_GROUP
#define HT_EMPTY ((unsigned char)SHMOBJ_HTCORE_CTRL_EMPTY)
#define HT_DELETED ((unsigned char)SHMOBJ_HTCORE_CTRL_DELETED)

/* ---- the hash ------------------------------------------------------------ */

SHMOBJ_HTCORE_FN uint64_t shmobj_htcore_hash64(const void *key, size_t len,
                                               uint64_t seed)
{
    return shmobj_htcore_hash64_mixed(key, len, shmobj_htcore_seed_mix(seed));
}

SHMOBJ_HTCORE_FN uint64_t shmobj_htcore_hash(const shmobj_htcore *t,
                                             const void *key, size_t len)
{
    return shmobj_htcore_hash64(key, len, t->seed);
}

/* Ref slots: value << 20 | hash bits 7..26. */
#define HT_REF_HBITS SHMOBJ_HTCORE_REF_HASH_BITS
#define HT_REF_HMASK ((UINT64_C(1) << HT_REF_HBITS) - 1)
#define HT_REF_MAX_GROUPS (UINT64_C(1) << HT_REF_HBITS)
#define ht_ref_bits shmobj_htcore_ref_word_bits

/* The tag bits of a hash (SwissTable's H2); its position bits (H1) pick
 * the home group, shmobj_htcore_probe_home(). */
#define ht_h2 shmobj_htcore_tag

/* ---- groups of 16 control bytes ------------------------------------------- */

/* Each returns a 16-bit mask, bit i for slot i of the group, exact (no
 * false positives), the same with and without SSE2: the header's inline
 * pieces, which the map's lookups use too. */
static unsigned ht_match(const unsigned char *g, unsigned char tag)
{
    uint32_t empty;
    return shmobj_htcore_group_match(g, tag, &empty);
}
static unsigned ht_match_empty(const unsigned char *g)
{
    uint32_t empty;
    (void)shmobj_htcore_group_match(g, HT_EMPTY, &empty);
    return empty;
}
#define ht_match_free shmobj_htcore_group_free
#define ht_ctz shmobj_htcore_ctz

/* ---- shape ---------------------------------------------------------------- */

static uint64_t ht_limit(uint64_t slots)
{
    return slots / SHMOBJ_HTCORE_LOAD_DEN * SHMOBJ_HTCORE_LOAD_NUM;
}

/* Slots for a capacity: the smallest power of two >= 16 whose 7/8 holds it;
 * 0 when that would not fit in 64 bits. */
static uint64_t ht_slots_for(uint64_t capacity)
{
    uint64_t s = SHMOBJ_HTCORE_MIN_SLOTS;
    while (ht_limit(s) < capacity) {
        if (s > (UINT64_MAX >> 2))
            return 0;
        s <<= 1;
    }
    return s;
}

/* 64 + slots + slots * stride, or 0 on overflow. */
static uint64_t ht_bytes(uint64_t slots, uint32_t stride)
{
    uint64_t body;
    if (slots == 0 || stride == 0 || slots > UINT64_MAX / ((uint64_t)stride + 1))
        return 0;
    body = slots * ((uint64_t)stride + 1);
    if (body > UINT64_MAX - SHMOBJ_HTCORE_HEADER_SIZE)
        return 0;
    return body + SHMOBJ_HTCORE_HEADER_SIZE;
}

SHMOBJ_HTCORE_FN uint64_t shmobj_htcore_footprint(uint64_t capacity,
                                                  uint32_t entry_size)
{
    uint64_t slots = ht_slots_for(capacity);
    if (entry_size == 0 || slots == 0)
        return 0;
    return ht_bytes(slots, entry_size);
}

static uint32_t ht_header_check(const shmobj_htcore_header *h)
{
    unsigned char buf[36];
    memcpy(buf, h, 32);
    memcpy(buf + 32, &h->stride, 4);
    return (uint32_t)shmobj_htcore_hash64(buf, sizeof buf, 0x5348544348454b31ULL);
}

static void ht_fill(shmobj_htcore *t, void *mem)
{
    shmobj_htcore_header *h = (shmobj_htcore_header *)mem;
    t->hdr = h;
    t->groups = (unsigned char *)mem + SHMOBJ_HTCORE_HEADER_SIZE;
    t->group_bytes = HT_GROUP + (uint64_t)HT_GROUP * h->stride;
    t->mask = h->slots - 1;
    t->seed = h->seed;
    t->key_size = h->key_size;
    t->value_size = h->value_size;
    t->stride = h->stride;
    t->flags = h->flags;
}

/* Every group: control bytes empty, slots zero. */
static void ht_wipe(shmobj_htcore *t)
{
    uint64_t g, ngroups = (t->mask + 1) / HT_GROUP;
    for (g = 0; g < ngroups; g++) {
        unsigned char *p = t->groups + g * t->group_bytes;
        memset(p, HT_EMPTY, HT_GROUP);
        memset(p + HT_GROUP, 0, (size_t)(t->group_bytes - HT_GROUP));
    }
}

static int ht_init(shmobj_htcore *t, void *mem, uint64_t mem_size,
                   uint64_t capacity, uint32_t key_size, uint32_t value_size,
                   uint32_t flags, uint64_t seed)
{
    shmobj_htcore_header *h = (shmobj_htcore_header *)mem;
    uint32_t stride;
    uint64_t slots, bytes;
    if (t == NULL || mem == NULL || ((uintptr_t)mem & 7u) != 0)
        return SHMOBJ_HTCORE_EINVAL;
    if (value_size > UINT32_MAX - key_size)
        return SHMOBJ_HTCORE_EINVAL;
    stride = key_size + value_size;
    slots = ht_slots_for(capacity);
    bytes = ht_bytes(slots, stride);
    if (bytes == 0 || bytes > mem_size)
        return SHMOBJ_HTCORE_EINVAL;
    memset(h, 0, SHMOBJ_HTCORE_HEADER_SIZE);
    h->magic = SHMOBJ_HTCORE_MAGIC;
    h->version = (uint16_t)SHMOBJ_HTCORE_VERSION;
    h->flags = (uint16_t)flags;
    h->key_size = key_size;
    h->value_size = value_size;
    h->seed = seed;
    h->slots = slots;
    h->count = 0;
    h->tombstones = 0;
    h->growth_left = ht_limit(slots);
    h->stride = stride;
    h->check = ht_header_check(h);
    ht_fill(t, mem);
    ht_wipe(t);
    return SHMOBJ_HTCORE_OK;
}

SHMOBJ_HTCORE_FN int shmobj_htcore_init(shmobj_htcore *t, void *mem,
                                        uint64_t mem_size, uint64_t capacity,
                                        uint32_t key_size,
                                        uint32_t value_size, uint64_t seed)
{
    if (key_size == 0)
        return SHMOBJ_HTCORE_EINVAL;
    return ht_init(t, mem, mem_size, capacity, key_size, value_size, 0, seed);
}

SHMOBJ_HTCORE_FN int shmobj_htcore_init_ref(shmobj_htcore *t, void *mem,
                                            uint64_t mem_size,
                                            uint64_t capacity, uint64_t seed)
{
    return ht_init(t, mem, mem_size, capacity, 0, SHMOBJ_HTCORE_REF_SLOT,
                   SHMOBJ_HTCORE_FLAG_REF, seed);
}

SHMOBJ_HTCORE_FN int shmobj_htcore_attach(shmobj_htcore *t, void *mem,
                                          uint64_t mem_size)
{
    shmobj_htcore_header h;
    uint64_t bytes;
    if (t == NULL || mem == NULL || ((uintptr_t)mem & 7u) != 0)
        return SHMOBJ_HTCORE_EINVAL;
    if (mem_size < SHMOBJ_HTCORE_HEADER_SIZE)
        return SHMOBJ_HTCORE_ECORRUPT;
    /* One copy: every decision below uses the same bytes, whatever another
     * process writes meanwhile. */
    memcpy(&h, mem, sizeof h);
    if (h.magic != SHMOBJ_HTCORE_MAGIC)
        return SHMOBJ_HTCORE_ECORRUPT;
    if (h.version != SHMOBJ_HTCORE_VERSION)
        return SHMOBJ_HTCORE_EVERSION;
    if (h.check != ht_header_check(&h))
        return SHMOBJ_HTCORE_ECORRUPT;
    if (h.slots < SHMOBJ_HTCORE_MIN_SLOTS || (h.slots & (h.slots - 1)) != 0)
        return SHMOBJ_HTCORE_ECORRUPT;
    if (h.flags == SHMOBJ_HTCORE_FLAG_REF) {
        if (h.key_size != 0 || h.value_size != SHMOBJ_HTCORE_REF_SLOT ||
            h.stride != SHMOBJ_HTCORE_REF_SLOT)
            return SHMOBJ_HTCORE_ECORRUPT;
    } else if (h.flags == 0) {
        if (h.key_size == 0 || h.value_size > UINT32_MAX - h.key_size ||
            h.stride != h.key_size + h.value_size)
            return SHMOBJ_HTCORE_ECORRUPT;
    } else {
        return SHMOBJ_HTCORE_ECORRUPT;
    }
    bytes = ht_bytes(h.slots, h.stride);
    if (bytes == 0 || bytes > mem_size)
        return SHMOBJ_HTCORE_ECORRUPT;
    t->hdr = (shmobj_htcore_header *)mem;
    t->groups = (unsigned char *)mem + SHMOBJ_HTCORE_HEADER_SIZE;
    t->group_bytes = HT_GROUP + (uint64_t)HT_GROUP * h.stride;
    t->mask = h.slots - 1;
    t->seed = h.seed;
    t->key_size = h.key_size;
    t->value_size = h.value_size;
    t->stride = h.stride;
    t->flags = h.flags;
    return SHMOBJ_HTCORE_OK;
}

SHMOBJ_HTCORE_FN uint64_t shmobj_htcore_count(const shmobj_htcore *t)
{
    return t->hdr->count;
}

/* ---- probing ------------------------------------------------------------------ */

/* Group g: its 16 control bytes, then its 16 slots. */
static unsigned char *ht_gctrl(const shmobj_htcore *t, uint64_t g)
{
    return t->groups + (g & (t->mask / HT_GROUP)) * t->group_bytes;
}
static unsigned char *ht_ctrl(const shmobj_htcore *t, uint64_t index)
{
    return ht_gctrl(t, (index & t->mask) / HT_GROUP) + (index & (HT_GROUP - 1));
}
static unsigned char *ht_slot(const shmobj_htcore *t, uint64_t index)
{
    return ht_gctrl(t, (index & t->mask) / HT_GROUP) + HT_GROUP +
           (index & (HT_GROUP - 1)) * t->stride;
}

/* Walk the probe sequence of hash; for each slot whose tag matches, call
 * the comparison. Shared by both modes through a small switch, so the
 * inline path compares with memcmp without an indirect call. */
static int ht_lookup(const shmobj_htcore *t, uint64_t hash, const void *key,
                     shmobj_htcore_eq_fn eq, void *ctx, uint64_t *index)
{
    uint64_t ngroups = (t->mask + 1) / HT_GROUP, gmask = ngroups - 1;
    uint64_t g = shmobj_htcore_probe_home(hash, gmask), step;
    unsigned char tag = ht_h2(hash);
#if defined(__GNUC__)
    {
        /* Almost every lookup ends in its home group: fetch the group's
         * slot lines together with its control bytes (they are
         * contiguous, on the same page), so the misses overlap instead of
         * following each other. */
        const unsigned char *gp = ht_gctrl(t, g);
        uint64_t span = t->group_bytes, off;
        if (span > 320)
            span = 320;
        for (off = 64; off < span; off += 64)
            __builtin_prefetch(gp + off);
    }
#endif
    for (step = 0; step < ngroups; step++) {
        const unsigned char *ctrl = ht_gctrl(t, g);
        unsigned m = ht_match(ctrl, tag);
        while (m != 0) {
            uint64_t idx = g * HT_GROUP + ht_ctz(m);
            m &= m - 1;
            if (key != NULL) {
                if (memcmp(ht_slot(t, idx), key, t->key_size) == 0) {
                    *index = idx;
                    return SHMOBJ_HTCORE_OK;
                }
            } else {
                uint64_t sv;
                int rc;
                memcpy(&sv, ht_slot(t, idx), sizeof sv);
                if ((sv & HT_REF_HMASK) != ht_ref_bits(hash))
                    continue;
                rc = eq(ctx, sv >> HT_REF_HBITS);
                if (rc < 0)
                    return rc;
                if (rc > 0) {
                    *index = idx;
                    return SHMOBJ_HTCORE_OK;
                }
            }
        }
        if (ht_match_empty(ctrl) != 0)
            return SHMOBJ_HTCORE_ENOTFOUND;
        g = shmobj_htcore_probe_next(g, step, gmask);
    }
    return SHMOBJ_HTCORE_ENOTFOUND;
}

/* The slot a new entry of this hash goes to: the first free slot of the
 * first group in its probe sequence that has one. */
static int ht_claim(shmobj_htcore *t, uint64_t hash, uint64_t *index)
{
    uint64_t ngroups = (t->mask + 1) / HT_GROUP, gmask = ngroups - 1;
    uint64_t g = shmobj_htcore_probe_home(hash, gmask), step;
    shmobj_htcore_header *h = t->hdr;
    for (step = 0; step < ngroups; step++) {
        unsigned m = ht_match_free(ht_gctrl(t, g));
        if (m != 0) {
            uint64_t idx = g * HT_GROUP + ht_ctz(m);
            if (*ht_ctrl(t, idx) == HT_EMPTY) {
                if (h->growth_left == 0)
                    return SHMOBJ_HTCORE_EFULL;
                h->growth_left--;
            } else {
                h->tombstones--;
            }
            *index = idx;
            return SHMOBJ_HTCORE_OK;
        }
        g = shmobj_htcore_probe_next(g, step, gmask);
    }
    return SHMOBJ_HTCORE_EFULL;
}

/* Mark a claimed slot full; the slot bytes are written before. */
static void ht_publish(shmobj_htcore *t, uint64_t idx, uint64_t hash)
{
    *ht_ctrl(t, idx) = ht_h2(hash);
    t->hdr->count++;
}

/* ---- inline mode ------------------------------------------------------------------ */

SHMOBJ_HTCORE_FN int shmobj_htcore_find(const shmobj_htcore *t,
                                        const void *key, uint64_t *index)
{
    if (t->flags & SHMOBJ_HTCORE_FLAG_REF)
        return SHMOBJ_HTCORE_EINVAL;
    return ht_lookup(t, shmobj_htcore_hash64(key, t->key_size, t->seed), key,
                     NULL, NULL, index);
}

SHMOBJ_HTCORE_FN int shmobj_htcore_put(shmobj_htcore *t, const void *key,
                                       const void *value)
{
    uint64_t hash, idx;
    int rc;
    if (t->flags & SHMOBJ_HTCORE_FLAG_REF)
        return SHMOBJ_HTCORE_EINVAL;
    hash = shmobj_htcore_hash64(key, t->key_size, t->seed);
    rc = ht_lookup(t, hash, key, NULL, NULL, &idx);
    if (rc == SHMOBJ_HTCORE_OK) {
        memcpy(ht_slot(t, idx) + t->key_size, value, t->value_size);
        return SHMOBJ_HTCORE_OK;
    }
    rc = ht_claim(t, hash, &idx);
    if (rc != SHMOBJ_HTCORE_OK)
        return rc;
    memcpy(ht_slot(t, idx), key, t->key_size);
    memcpy(ht_slot(t, idx) + t->key_size, value, t->value_size);
    ht_publish(t, idx, hash);
    return SHMOBJ_HTCORE_OK;
}

SHMOBJ_HTCORE_FN int shmobj_htcore_get(const shmobj_htcore *t,
                                       const void *key, void *value)
{
    uint64_t idx;
    int rc = shmobj_htcore_find(t, key, &idx);
    if (rc == SHMOBJ_HTCORE_OK)
        memcpy(value, ht_slot(t, idx) + t->key_size, t->value_size);
    return rc;
}

SHMOBJ_HTCORE_FN int shmobj_htcore_del(shmobj_htcore *t, const void *key)
{
    uint64_t idx;
    int rc = shmobj_htcore_find(t, key, &idx);
    if (rc == SHMOBJ_HTCORE_OK)
        shmobj_htcore_erase(t, idx);
    return rc;
}

SHMOBJ_HTCORE_FN void *shmobj_htcore_entry(const shmobj_htcore *t,
                                           uint64_t index)
{
    return ht_slot(t, index);
}

SHMOBJ_HTCORE_FN int shmobj_htcore_rehash(shmobj_htcore *dst,
                                          const shmobj_htcore *src)
{
    uint64_t i = 0;
    if ((dst->flags | src->flags) & SHMOBJ_HTCORE_FLAG_REF ||
        dst->key_size != src->key_size || dst->value_size != src->value_size)
        return SHMOBJ_HTCORE_EINVAL;
    while (shmobj_htcore_next(src, &i) == SHMOBJ_HTCORE_OK) {
        const unsigned char *e = ht_slot(src, i);
        uint64_t hash = shmobj_htcore_hash64(e, dst->key_size, dst->seed);
        uint64_t idx;
        int rc = ht_claim(dst, hash, &idx);
        if (rc != SHMOBJ_HTCORE_OK)
            return rc;
        memcpy(ht_slot(dst, idx), e, dst->stride);
        ht_publish(dst, idx, hash);
        i++;
    }
    return SHMOBJ_HTCORE_OK;
}

/* ---- ref mode ------------------------------------------------------------------ */

SHMOBJ_HTCORE_FN int shmobj_htcore_ref_find_free(const shmobj_htcore *t,
                                                 uint64_t hash,
                                                 shmobj_htcore_eq_fn eq,
                                                 void *ctx, uint64_t *index,
                                                 uint64_t *free_index)
{
    /* The generic walk of ht_lookup(), specialised for 8-byte ref slots:
     * this is the lookup a shared map's writers run on every change, so it
     * is kept short. The free slot it notes is the one ht_claim() would
     * take: the first free slot of the first group on the sequence that
     * has one. */
    uint64_t gmask, g, step, bits;
    unsigned char tag;
    if (!(t->flags & SHMOBJ_HTCORE_FLAG_REF) || eq == NULL)
        return SHMOBJ_HTCORE_EINVAL;
    if (free_index != NULL)
        *free_index = UINT64_MAX;
    gmask = t->mask / HT_GROUP;
    g = shmobj_htcore_probe_home(hash, gmask);
    bits = ht_ref_bits(hash);
    tag = ht_h2(hash);
    for (step = 0; step <= gmask; step++) {
        const unsigned char *gp = t->groups + g * t->group_bytes;
        unsigned m;
#if defined(__GNUC__)
        /* the group's slots follow its control bytes in the next lines */
        __builtin_prefetch(gp + 64);
        __builtin_prefetch(gp + 128);
#endif
        m = ht_match(gp, tag);
        while (m != 0) {
            unsigned j = ht_ctz(m);
            uint64_t sv;
            m &= m - 1;
            sv = shmobj_htcore_ref_word(gp, j);
            if ((sv & HT_REF_HMASK) == bits) {
                int rc = eq(ctx, sv >> HT_REF_HBITS);
                if (rc > 0) {
                    *index = g * HT_GROUP + j;
                    return SHMOBJ_HTCORE_OK;
                }
                if (rc < 0)
                    return rc;
            }
        }
        if (free_index != NULL && *free_index == UINT64_MAX) {
            unsigned f = ht_match_free(gp);
            if (f != 0)
                *free_index = g * HT_GROUP + ht_ctz(f);
        }
        if (ht_match_empty(gp) != 0)
            return SHMOBJ_HTCORE_ENOTFOUND;
        g = shmobj_htcore_probe_next(g, step, gmask);
    }
    return SHMOBJ_HTCORE_ENOTFOUND;
}

SHMOBJ_HTCORE_FN int shmobj_htcore_ref_find(const shmobj_htcore *t,
                                            uint64_t hash,
                                            shmobj_htcore_eq_fn eq, void *ctx,
                                            uint64_t *index)
{
    return shmobj_htcore_ref_find_free(t, hash, eq, ctx, index, NULL);
}

SHMOBJ_HTCORE_FN uint32_t shmobj_htcore_ref_group(const shmobj_htcore *t,
                                                  uint64_t g, uint64_t hash)
{
    if (!(t->flags & SHMOBJ_HTCORE_FLAG_REF))
        return 0;
    return shmobj_htcore_ref_candidates(
        t->groups + (g & (t->mask / HT_GROUP)) * t->group_bytes, hash);
}

/* Write a ref slot claimed for hash, then its control byte. */
static void ht_ref_fill(shmobj_htcore *t, uint64_t idx, uint64_t hash, uint64_t value)
{
    uint64_t sv = value << HT_REF_HBITS | ht_ref_bits(hash);
    memcpy(ht_slot(t, idx), &sv, sizeof sv);
    ht_publish(t, idx, hash);
}

SHMOBJ_HTCORE_FN int shmobj_htcore_ref_insert(shmobj_htcore *t, uint64_t hash,
                                              uint64_t value, uint64_t *index)
{
    uint64_t idx;
    int rc;
    if (!(t->flags & SHMOBJ_HTCORE_FLAG_REF) ||
        (value >> SHMOBJ_HTCORE_REF_VALUE_BITS) != 0)
        return SHMOBJ_HTCORE_EINVAL;
    rc = ht_claim(t, hash, &idx);
    if (rc != SHMOBJ_HTCORE_OK)
        return rc;
    ht_ref_fill(t, idx, hash, value);
    if (index != NULL)
        *index = idx;
    return SHMOBJ_HTCORE_OK;
}

SHMOBJ_HTCORE_FN int shmobj_htcore_ref_insert_at(shmobj_htcore *t,
                                                 uint64_t index, uint64_t hash,
                                                 uint64_t value)
{
    shmobj_htcore_header *h = t->hdr;
    unsigned char *c;
    if (!(t->flags & SHMOBJ_HTCORE_FLAG_REF) || index > t->mask ||
        (value >> SHMOBJ_HTCORE_REF_VALUE_BITS) != 0)
        return SHMOBJ_HTCORE_EINVAL;
    c = ht_ctrl(t, index);
    if (*c == HT_EMPTY) {
        if (h->growth_left == 0)
            return SHMOBJ_HTCORE_EFULL;
        h->growth_left--;
    } else if (*c == HT_DELETED) {
        h->tombstones--;
    } else {
        return SHMOBJ_HTCORE_EINVAL; /* not free */
    }
    ht_ref_fill(t, index, hash, value);
    return SHMOBJ_HTCORE_OK;
}

SHMOBJ_HTCORE_FN uint64_t shmobj_htcore_ref_value(const shmobj_htcore *t,
                                                  uint64_t index)
{
    uint64_t v;
    memcpy(&v, ht_slot(t, index), sizeof v);
    return v >> HT_REF_HBITS;
}

/* What a ref slot knows of its hash: bits 0..26 (tag from the control
 * byte, the rest from the slot); enough to place it in up to 2^20 groups. */
static uint64_t ht_ref_partial(const shmobj_htcore *t, uint64_t index)
{
    uint64_t v;
    memcpy(&v, ht_slot(t, index), sizeof v);
    return (v & HT_REF_HMASK) << 7 | (*ht_ctrl(t, index) & 0x7fu);
}

SHMOBJ_HTCORE_FN void shmobj_htcore_ref_replace(shmobj_htcore *t,
                                                uint64_t index,
                                                uint64_t value)
{
    uint64_t v;
    memcpy(&v, ht_slot(t, index), sizeof v);
    v = (value << HT_REF_HBITS) | (v & HT_REF_HMASK);
    memcpy(ht_slot(t, index), &v, sizeof v);
}

SHMOBJ_HTCORE_FN int shmobj_htcore_ref_rehash(shmobj_htcore *dst,
                                              const shmobj_htcore *src,
                                              shmobj_htcore_hash_fn hash_fn,
                                              void *ctx)
{
    uint64_t i = 0;
    int partial = (dst->mask + 1) / HT_GROUP <= HT_REF_MAX_GROUPS;
    if (!(dst->flags & src->flags & SHMOBJ_HTCORE_FLAG_REF) ||
        (!partial && hash_fn == NULL))
        return SHMOBJ_HTCORE_EINVAL;
    while (shmobj_htcore_next(src, &i) == SHMOBJ_HTCORE_OK) {
        uint64_t hash = ht_ref_partial(src, i), idx;
        int rc;
        if (!partial) {
            rc = hash_fn(ctx, shmobj_htcore_ref_value(src, i), &hash);
            if (rc < 0)
                return rc;
        }
        rc = ht_claim(dst, hash, &idx);
        if (rc != SHMOBJ_HTCORE_OK)
            return rc;
        memcpy(ht_slot(dst, idx), ht_slot(src, i), SHMOBJ_HTCORE_REF_SLOT);
        ht_publish(dst, idx, hash);
        i++;
    }
    return SHMOBJ_HTCORE_OK;
}

/* ---- both modes ------------------------------------------------------------------ */

SHMOBJ_HTCORE_FN void shmobj_htcore_erase(shmobj_htcore *t, uint64_t index)
{
    uint64_t idx = index & t->mask;
    shmobj_htcore_header *h = t->hdr;
    unsigned char *c = ht_ctrl(t, idx);
    if (*c >= 0x80)
        return; /* not full: nothing to erase */
    /* Empty again only when the group already has an empty slot: then no
     * probe ever went past this group (see the invariants above). */
    if (ht_match_empty(ht_gctrl(t, idx / HT_GROUP)) != 0) {
        *c = HT_EMPTY;
        h->growth_left++;
    } else {
        *c = HT_DELETED;
        h->tombstones++;
    }
    h->count--;
}

SHMOBJ_HTCORE_FN int shmobj_htcore_next(const shmobj_htcore *t,
                                        uint64_t *index)
{
    uint64_t i = *index, n = t->mask + 1;
    while (i < n) {
        if ((i & (HT_GROUP - 1)) == 0) {
            /* a whole group at once: skip it when nothing in it is full */
            unsigned full = ~ht_match_free(ht_gctrl(t, i / HT_GROUP)) & 0xffffu;
            if (full == 0) {
                i += HT_GROUP;
                continue;
            }
            i += ht_ctz(full);
            *index = i;
            return SHMOBJ_HTCORE_OK;
        }
        if (*ht_ctrl(t, i) < 0x80) {
            *index = i;
            return SHMOBJ_HTCORE_OK;
        }
        i++;
    }
    return SHMOBJ_HTCORE_ENOTFOUND;
}

SHMOBJ_HTCORE_FN void shmobj_htcore_clear(shmobj_htcore *t)
{
    uint64_t n = t->mask + 1;
    ht_wipe(t);
    t->hdr->count = 0;
    t->hdr->tombstones = 0;
    t->hdr->growth_left = ht_limit(n);
}

SHMOBJ_HTCORE_FN void shmobj_htcore_recount(shmobj_htcore *t)
{
    uint64_t n = t->mask + 1, i, full = 0, del = 0, empty = 0;
    for (i = 0; i < n; i++) {
        unsigned char c = *ht_ctrl(t, i);
        if (c < 0x80) {
            full++;
        } else if (c == HT_EMPTY) {
            empty++;
        } else {
            /* any other byte is damage: make it a tombstone, which keeps
             * every probe that passes through it going */
            *ht_ctrl(t, i) = HT_DELETED;
            del++;
        }
    }
    t->hdr->count = full;
    t->hdr->tombstones = del;
    t->hdr->growth_left =
        empty > n - ht_limit(n) ? empty - (n - ht_limit(n)) : 0;
}

/* Probe length (in groups) of the entry at idx with this hash, or 0 when it
 * is not reachable from its home group. */
static uint64_t ht_probe_len(const shmobj_htcore *t, uint64_t hash,
                             uint64_t idx)
{
    uint64_t ngroups = (t->mask + 1) / HT_GROUP, gmask = ngroups - 1;
    uint64_t g = shmobj_htcore_probe_home(hash, gmask), target = idx / HT_GROUP, step;
    for (step = 0; step < ngroups; step++) {
        if (g == target)
            return step + 1;
        if (ht_match_empty(ht_gctrl(t, g)) != 0)
            return 0;
        g = shmobj_htcore_probe_next(g, step, gmask);
    }
    return 0;
}

/* The hash of the entry at idx as far as the table knows it (partial in
 * ref mode). */
static uint64_t ht_entry_hash(const shmobj_htcore *t, uint64_t idx)
{
    if (t->flags & SHMOBJ_HTCORE_FLAG_REF)
        return ht_ref_partial(t, idx);
    return shmobj_htcore_hash64(ht_slot(t, idx), t->key_size, t->seed);
}

/* Whether ht_entry_hash() places entries of this table. */
static int ht_hash_known(const shmobj_htcore *t)
{
    return !(t->flags & SHMOBJ_HTCORE_FLAG_REF) ||
           (t->mask + 1) / HT_GROUP <= HT_REF_MAX_GROUPS;
}

SHMOBJ_HTCORE_FN void shmobj_htcore_stats_get(const shmobj_htcore *t,
                                              shmobj_htcore_stats *out)
{
    uint64_t i = 0;
    memset(out, 0, sizeof *out);
    out->slots = t->mask + 1;
    out->count = t->hdr->count;
    out->tombstones = t->hdr->tombstones;
    out->growth_left = t->hdr->growth_left;
    out->bytes = ht_bytes(t->mask + 1, t->stride);
    while (ht_hash_known(t) && shmobj_htcore_next(t, &i) == SHMOBJ_HTCORE_OK) {
        uint64_t len = ht_probe_len(t, ht_entry_hash(t, i), i);
        out->probe_total += len;
        if (len > out->probe_max)
            out->probe_max = len;
        i++;
    }
}

SHMOBJ_HTCORE_FN int shmobj_htcore_check(const shmobj_htcore *t,
                                         shmobj_htcore_hash_fn hash_fn,
                                         void *ctx)
{
    uint64_t n = t->mask + 1, i, full = 0, del = 0, empty = 0;
    const shmobj_htcore_header *h = t->hdr;
    for (i = 0; i < n; i++) {
        unsigned char c = *ht_ctrl(t, i);
        if (c < 0x80) {
            uint64_t hash = ht_entry_hash(t, i);
            if ((t->flags & SHMOBJ_HTCORE_FLAG_REF) && hash_fn != NULL) {
                uint64_t eh, sv;
                int rc = hash_fn(ctx, shmobj_htcore_ref_value(t, i), &eh);
                if (rc < 0)
                    return rc;
                memcpy(&sv, ht_slot(t, i), sizeof sv);
                if ((sv & HT_REF_HMASK) != ht_ref_bits(eh))
                    return SHMOBJ_HTCORE_ECORRUPT;
                hash = eh;
            } else if (!ht_hash_known(t)) {
                return SHMOBJ_HTCORE_EINVAL;
            }
            if (c != ht_h2(hash) || ht_probe_len(t, hash, i) == 0)
                return SHMOBJ_HTCORE_ECORRUPT;
            full++;
        } else if (c == HT_EMPTY) {
            empty++;
        } else if (c == HT_DELETED) {
            del++;
        } else {
            return SHMOBJ_HTCORE_ECORRUPT;
        }
    }
    if (full != h->count || del != h->tombstones)
        return SHMOBJ_HTCORE_ECORRUPT;
    if (empty < n - ht_limit(n) ||
        h->growth_left != empty - (n - ht_limit(n)))
        return SHMOBJ_HTCORE_ECORRUPT;
    return SHMOBJ_HTCORE_OK;
}
