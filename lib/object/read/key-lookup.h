/* The inline key lookups of the views: the comparisons of a key slot with
 * a prepared key, the one lookup over the probe of index-probe.h, and the
 * short-key fast path of the hot increments.
 *
 * Invariants kept here:
 * - Every lookup walks the index with shmobj__probe_next(), the walk the
 *   builder entered the keys with, so a key the builder placed is found
 *   by every reader and a probe reads at most cap entries.
 * - Each kind of key slot is compared in one place: an INT slot by its
 *   payload, a short string slot by its length and word (shmobj__key_sstr_equal),
 *   a medium string slot by its two words (shmobj__key_mstr_equal),
 *   an OBJ slot by the str or bytes object it names, after checking that
 *   object lies in the view's block (shmobj__key_obj_equal). The specialised
 *   lookups of string keys only choose which comparison runs inline; on
 *   any other slot they call the general one, so every lookup gives the
 *   same answer for the same bytes.
 * - A key slot's tag, length and payload are read once each; the checks
 *   and the comparison judge the same local values. */
#ifndef SHMOBJ_OBJECT_KEY_LOOKUP_H
#define SHMOBJ_OBJECT_KEY_LOOKUP_H

#include "index-probe.h"
#include "slot-read.h"

/* Does the short string key slot of length kn (read once by the caller)
 * and payload pl hold the prepared key k? Only its first kn bytes count,
 * as a short key's bytes are its first `len` payload bytes. 1 yes, 0 no,
 * SHMOBJ_ECORRUPT for a length no short key has. */
static inline __attribute__((always_inline)) int
shmobj__key_sstr_equal(uint8_t kn, uint64_t pl, const shmobj_key *k)
{
    if (kn > SHMOBJ__SSTR_MAX)
        return SHMOBJ_ECORRUPT;
    /* the mask of the key's length, which the slot's must equal (so 0..7
     * bytes when it is used: a longer key is never a short slot's, and its
     * mask is never computed) */
    uint64_t n = k->len;
    if (k->type != SHMOBJ_TYPE_STR || kn != n)
        return 0;
    uint64_t mask = n == 0 ? 0 : ~UINT64_C(0) >> (64 - 8 * n);
    return (pl & mask) == k->word_;
}

/* Does the medium string key slot ks, whose payload pl the caller read
 * once, hold the prepared key k? Its first word holds the tag and the
 * key's first 7 bytes, pl the rest (k->word_ for a key that can be held
 * so). 1 yes, 0 no, SHMOBJ_ECORRUPT for a payload no medium key has. */
static inline __attribute__((always_inline)) int
shmobj__key_mstr_equal(const struct shmobj__slot *ks, uint64_t pl, const shmobj_key *k)
{
    if (shmobj__mstr_len(pl) == 0)
        return SHMOBJ_ECORRUPT;
    if (k->type != SHMOBJ_TYPE_STR || pl != k->word_ || k->len < SHMOBJ__MSTR_MIN ||
        k->len > SHMOBJ__MSTR_MAX)
        return 0;
    /* equal second words and lengths in 8..14: the lengths are equal
     * (each is where its last non-zero byte lies) */
    return shmobj__load64((const uint8_t *)ks) == shmobj__mstr_w0(k->ptr);
}

/* Does the OBJ key slot with payload pl (read once by the caller) name a
 * str or bytes object of the view's block that holds k? Keys are always
 * inline: the same block, its generation. */
static inline __attribute__((always_inline)) int
shmobj__key_obj_equal_at(const struct shmobj__space *sp, uint64_t blk, uint64_t blen,
                         uint16_t gen, uint64_t pl, const shmobj_key *k)
{
    uint64_t off = shmobj__ref_off(pl), rel = off - blk;
    if (off < blk || rel >= blen || shmobj__ref_gen(pl) != gen ||
        !shmobj__aligned(off, 16) || blen - rel < 16)
        return SHMOBJ_ECORRUPT;
    const struct shmobj__obj *h = (const void *)(sp->base + off);
    uint8_t tag = h->tag;
    uint64_t len = h->len;
    if (tag != SHMOBJ_TYPE_STR && tag != SHMOBJ_TYPE_BYTES)
        return SHMOBJ_ECORRUPT;
    if (tag != k->type || len != k->len)
        return 0;
    if (len > blen - rel - 16)
        return SHMOBJ_ECORRUPT;
    return shmobj__mem_equal((const uint8_t *)(h + 1), k->ptr, len);
}

/* The same for a key slot of the view's block. */
static inline __attribute__((always_inline)) int
shmobj__key_obj_equal(const shmobj_view *v, uint64_t pl, const shmobj_key *k)
{
    return shmobj__key_obj_equal_at(shmobj__space_of(v), v->obj_blk, v->obj_blen, v->obj_gen,
                                    pl, k);
}

static inline uint64_t shmobj__key_payload(const struct shmobj__slot *ks)
{
    return atomic_load_explicit(&((struct shmobj__slot *)ks)->payload,
                                memory_order_relaxed);
}

/* Does key slot ks (in the view's block) hold the prepared key k? 1 yes, 0
 * no, SHMOBJ_ECORRUPT when the slot is bad. */
static inline __attribute__((always_inline)) int
shmobj__key_equal_inline(const shmobj_view *v, const struct shmobj__slot *ks, const shmobj_key *k)
{
    uint64_t pl = shmobj__key_payload(ks);
    uint8_t kt = ks->tag; /* once: every branch below judges the same value */
    switch (kt) {
    case SHMOBJ__SLOT_INT:
        return k->type == SHMOBJ_TYPE_INT && (int64_t)pl == k->i;
    case SHMOBJ__SLOT_SSTR:
        return shmobj__key_sstr_equal(ks->reserved0, pl, k);
    case SHMOBJ__SLOT_MSTR:
        return shmobj__key_mstr_equal(ks, pl, k);
    case SHMOBJ__SLOT_OBJ:
        return shmobj__key_obj_equal(v, pl, k);
    default:
        return SHMOBJ_ECORRUPT;
    }
}

/* shmobj__key_equal_inline() out of line, for the key slots of kinds a specialised
 * lookup does not expect. */
int shmobj__key_equal(const shmobj_view *v, const struct shmobj__slot *ks,
                      const shmobj_key *k);

/* Which comparison a lookup runs inline. */
enum shmobj__lookup_how {
    SHMOBJ__LOOKUP_ANY,   /* shmobj__key_equal_inline(): any key */
    SHMOBJ__LOOKUP_SHORT, /* a str of at most SHMOBJ__SSTR_MAX bytes: short key slots */
    SHMOBJ__LOOKUP_MEDIUM, /* a str of 8..14 bytes: medium key slots */
    SHMOBJ__LOOKUP_LONG   /* a longer str: the str objects such keys are written as */
};

/* The position of prepared key k in the index at ix of the keyed view v
 * whose key slots start at `keys`, `stride` bytes apart (the layout
 * shmobj__body_size() checked when the view was made). `how` (a constant)
 * picks the comparison inlined; any other slot takes shmobj__key_equal().
 * Counts the entries read into *probes when not NULL. */
static inline __attribute__((always_inline)) int
shmobj__lookup(const shmobj_view *v, const uint64_t *ix, const uint8_t *keys,
       uint64_t stride, const shmobj_key *k, enum shmobj__lookup_how how, size_t *out,
       uint64_t *probes)
{
    struct shmobj__probe p;
    uint64_t item;
    int rc, step;
    shmobj__probe_start(&p, ix, v->len, k->hash_);
    for (;;) {
        step = shmobj__probe_next(&p, v->count, &item);
        if (step != SHMOBJ__PROBE_HIT) {
            rc = step == SHMOBJ__PROBE_BAD ? SHMOBJ_ECORRUPT : SHMOBJ_ENOTFOUND;
            break;
        }
        const struct shmobj__slot *ks = (const void *)(keys + stride * item);
        if (how == SHMOBJ__LOOKUP_ANY) {
            rc = shmobj__key_equal_inline(v, ks, k);
        } else {
            uint8_t kt = ks->tag;
            if (how == SHMOBJ__LOOKUP_SHORT && kt == SHMOBJ__SLOT_SSTR)
                rc = shmobj__key_sstr_equal(ks->reserved0, shmobj__key_payload(ks), k);
            else if (how == SHMOBJ__LOOKUP_MEDIUM && kt == SHMOBJ__SLOT_MSTR)
                rc = shmobj__key_mstr_equal(ks, shmobj__key_payload(ks), k);
            else if (how == SHMOBJ__LOOKUP_LONG && kt == SHMOBJ__SLOT_OBJ)
                rc = shmobj__key_obj_equal(v, shmobj__key_payload(ks), k);
            else
                rc = shmobj__key_equal(v, ks, k);
        }
        if (rc == 1) {
            *out = (size_t)item;
            rc = 0;
            break;
        }
        if (rc < 0)
            break;
    }
    if (probes != NULL)
        *probes += shmobj__probe_reads(&p, step);
    return rc;
}

/* shmobj__lookup() in the index of a dict: the index right after the header, the
 * pairs after it. */
static inline __attribute__((always_inline)) int
shmobj__dict_lookup(const shmobj_view *v, const shmobj_key *k, enum shmobj__lookup_how how,
            size_t *out)
{
    const uint64_t *ix = (const uint64_t *)((const uint8_t *)v->obj + 16);
    return shmobj__lookup(v, ix, (const uint8_t *)(ix + v->len), 32, k, how, out, NULL);
}

/* The hit paths of a dict's string lookups, without calls but the long
 * key's compare (so they keep few registers and stay cheap to inline): the
 * key slot, with *out set, when the probe of hash meets the key among key
 * slots of the kind `how` (a constant) names, else NULL, and the caller
 * runs the full lookup, which decides everything else (absent, a key slot
 * of another kind, damage). They walk the same probe, so a hit here is
 * the hit the full lookup would return. (A dict's value slot follows its
 * key slot: the pair is 32 bytes.) The key, by kind:
 * - SHORT: kn bytes (at most SHMOBJ__SSTR_MAX) packed as w1. Writers
 *   NUL-pad short keys, as w1 is: equal words, equal keys; a slot with
 *   other padding (damage) misses here, and the full lookup decides.
 * - MEDIUM: the two words w0, w1 (not 0) of its medium key slot: a word
 *   equal to w0 carries the medium tag, an equal second word is a medium
 *   key's (never 0, top byte 0).
 * - LONG: k, more than SHMOBJ__MSTR_MAX bytes, a str object of the
 *   dict's block: its length, then its bytes. */
static inline __attribute__((always_inline)) const struct shmobj__slot *
shmobj__dict_hit_as(const shmobj_view *v, enum shmobj__lookup_how how, uint64_t kn,
                    uint64_t w0, uint64_t w1, const shmobj_key *k, uint64_t hash, size_t *out)
{
    const uint64_t *ix = (const uint64_t *)((const uint8_t *)v->obj + 16);
    struct shmobj__probe p;
    uint64_t item;
    shmobj__probe_start(&p, ix, v->len, hash);
    while (shmobj__probe_next(&p, v->count, &item) == SHMOBJ__PROBE_HIT) {
        /* the pairs follow the index's cap entries */
        const struct shmobj__slot *ks =
            (const void *)((const uint8_t *)(p.ix + p.mask + 1) + 32 * item);
        int eq;
        if (how == SHMOBJ__LOOKUP_SHORT) {
            uint8_t kn_at = ks->reserved0; /* read once: checked, then compared */
            if (ks->tag != SHMOBJ__SLOT_SSTR || kn_at > SHMOBJ__SSTR_MAX)
                return NULL;
            eq = kn_at == kn && shmobj__key_payload(ks) == w1;
        } else if (how == SHMOBJ__LOOKUP_MEDIUM) {
            if (shmobj__load64((const uint8_t *)ks) != w0)
                return NULL;
            eq = shmobj__key_payload(ks) == w1;
        } else {
            if (ks->tag != SHMOBJ__SLOT_OBJ)
                return NULL;
            eq = shmobj__key_obj_equal(v, shmobj__key_payload(ks), k);
            if (eq < 0)
                return NULL;
        }
        if (__builtin_expect(eq, 1)) {
            *out = (size_t)item;
            return ks;
        }
    }
    return NULL;
}

/* The short string key of kn bytes packed as `word` (the hot increments'
 * case). */
static inline __attribute__((always_inline)) const struct shmobj__slot *
shmobj__dict_hit_short(const shmobj_view *v, uint64_t kn, uint64_t word,
                       uint64_t hash, size_t *out)
{
    return shmobj__dict_hit_as(v, SHMOBJ__LOOKUP_SHORT, kn, 0, word, NULL, hash, out);
}

/* A medium string key given by its two slot words (w1 not 0) and its
 * hash, in registers (no shmobj_key in memory: a lookup by a C string). */
static inline __attribute__((always_inline)) const struct shmobj__slot *
shmobj__dict_hit_mwords(const shmobj_view *v, uint64_t w0, uint64_t w1, uint64_t hash,
                        size_t *out)
{
    return shmobj__dict_hit_as(v, SHMOBJ__LOOKUP_MEDIUM, 0, w0, w1, NULL, hash, out);
}

/* A prepared medium string key k (8..14 bytes, k->word_ its slot's second
 * word; 0 for a key no slot holds). */
static inline __attribute__((always_inline)) const struct shmobj__slot *
shmobj__dict_hit_medium(const shmobj_view *v, const shmobj_key *k, size_t *out)
{
    if (k->word_ == 0)
        return NULL; /* not a key held in a slot */
    return shmobj__dict_hit_mwords(v, shmobj__mstr_w0(k->ptr), k->word_, k->hash_, out);
}

/* A prepared string key k of more than 14 bytes. */
static inline __attribute__((always_inline)) const struct shmobj__slot *
shmobj__dict_hit_long(const shmobj_view *v, const shmobj_key *k, size_t *out)
{
    return shmobj__dict_hit_as(v, SHMOBJ__LOOKUP_LONG, 0, 0, 0, k, k->hash_, out);
}

/* The name slot in the shape of record view rec that the first index
 * entry the probe of hash reads names (field *it), or NULL when that entry
 * is empty, holds another hash or names no field (the full lookup says). */
static inline __attribute__((always_inline)) const struct shmobj__slot *
shmobj__record_probe1(const shmobj_view *rec, uint64_t hash, uint64_t *it)
{
    struct shmobj__space *sp = shmobj__space_of(rec);
    uint64_t n = rec->count, mask = (UINT64_C(1) << rec->ndim) - 1;
    const uint8_t *so = sp->base + shmobj__ref_off(rec->len) + SHMOBJ__PREFIX;
    uint64_t e = ((const uint64_t *)(so + shmobj__shape_index(n)))[hash & mask];
    *it = (e & UINT32_MAX) - 1;
    if ((uint32_t)(e >> 32) != (uint32_t)(hash >> 32) || *it >= n)
        return NULL;
    return (const void *)(so + shmobj__shape_names(n) + 16 * *it);
}

/* The common case of a record's lookups, without calls: the value slot of
 * field *out when the first index entry the probe of the string key k
 * reads names it (a shape spreads its names so that it does), else NULL
 * and the caller runs shmobj__record_find(), which decides everything
 * else. The record's block and its shape's are checked live by the
 * caller. This one is for a name of at most 7 bytes given by its prepared
 * word and hash (kn <= 7, a short key slot of the shape): no call
 * anywhere, so its callers keep few registers. */
static inline __attribute__((always_inline)) struct shmobj__slot *
shmobj__record_hit_short(const shmobj_view *rec, uint64_t kn, uint64_t word, uint64_t hash,
                         size_t *out)
{
    uint64_t it;
    const struct shmobj__slot *ks = shmobj__record_probe1(rec, hash, &it);
    /* writers NUL-pad short keys, as the prepared word is */
    if (ks == NULL || ks->tag != SHMOBJ__SLOT_SSTR || ks->reserved0 != kn ||
        shmobj__key_payload(ks) != word)
        return NULL;
    *out = (size_t)it;
    return (struct shmobj__slot *)((uint8_t *)rec->obj + 16 + 16 * it);
}

/* The same for any prepared string key k (a medium name is compared by
 * its two words, a longer one is a str object of the shape's block,
 * compared by a call). */
static inline __attribute__((always_inline)) struct shmobj__slot *
shmobj__record_hit(const shmobj_view *rec, const shmobj_key *k, size_t *out)
{
    if (k->len <= SHMOBJ__SSTR_MAX)
        return shmobj__record_hit_short(rec, k->len, k->word_, k->hash_, out);
    uint64_t it;
    const struct shmobj__slot *ks = shmobj__record_probe1(rec, k->hash_, &it);
    if (ks != NULL && k->len <= SHMOBJ__MSTR_MAX) {
        /* an equal second word is never 0 (k->word_ of a key held so) */
        if (ks->tag != SHMOBJ__SLOT_MSTR || k->word_ == 0 ||
            shmobj__key_payload(ks) != k->word_ ||
            shmobj__load64((const uint8_t *)ks) != shmobj__mstr_w0(k->ptr))
            return NULL;
        *out = (size_t)it;
        return (struct shmobj__slot *)((uint8_t *)rec->obj + 16 + 16 * it);
    }
    if (ks == NULL || ks->tag != SHMOBJ__SLOT_OBJ ||
        shmobj__key_obj_equal_at(shmobj__space_of(rec), shmobj__ref_off(rec->len),
                                 shmobj__rec_extent(rec), shmobj__ref_gen(rec->len),
                                 shmobj__key_payload(ks), k) != 1)
        return NULL;
    *out = (size_t)it;
    return (struct shmobj__slot *)((uint8_t *)rec->obj + 16 + 16 * it);
}

/* The position of prepared key k among the fields of the record view rec,
 * in its shape's index (the layout the view checked and copied when it was
 * made): the lookup of every name on a record. The names are short key
 * slots or str objects of the shape's block; an INT or BYTES key is no
 * field name (ENOTFOUND after the probe, as in a named struct). The shape
 * is checked live first (it cannot be freed while the record uses it; a
 * damaged record may name one freed). */
static inline __attribute__((always_inline)) int
shmobj__record_find(const shmobj_view *rec, const shmobj_key *k, size_t *out)
{
    struct shmobj__space *sp = shmobj__space_of(rec);
    uint64_t sblk = shmobj__ref_off(rec->len), n = rec->count, item;
    uint16_t sgen = shmobj__ref_gen(rec->len);
    if (!shmobj__blk_live(sp, sblk, sgen))
        return SHMOBJ_ESTALE;
    const uint8_t *so = sp->base + sblk + SHMOBJ__PREFIX;
    const uint8_t *names = so + shmobj__shape_names(n);
    struct shmobj__probe p;
    int step, rc;
    shmobj__probe_start(&p, (const uint64_t *)(so + shmobj__shape_index(n)),
                        UINT64_C(1) << rec->ndim, k->hash_);
    while ((step = shmobj__probe_next(&p, n, &item)) == SHMOBJ__PROBE_HIT) {
        const struct shmobj__slot *ks = (const void *)(names + 16 * item);
        uint8_t kt = ks->tag; /* once */
        if (kt == SHMOBJ__SLOT_SSTR)
            rc = shmobj__key_sstr_equal(ks->reserved0, shmobj__key_payload(ks), k);
        else if (kt == SHMOBJ__SLOT_MSTR)
            rc = shmobj__key_mstr_equal(ks, shmobj__key_payload(ks), k);
        else if (kt == SHMOBJ__SLOT_OBJ)
            rc = k->type == SHMOBJ_TYPE_INT
                     ? 0
                     : shmobj__key_obj_equal_at(sp, sblk, shmobj__rec_extent(rec), sgen,
                                                shmobj__key_payload(ks), k);
        else
            rc = SHMOBJ_ECORRUPT;
        if (rc == 1) {
            *out = (size_t)item;
            return 0;
        }
        if (rc < 0)
            return rc;
    }
    return step == SHMOBJ__PROBE_BAD ? SHMOBJ_ECORRUPT : SHMOBJ_ENOTFOUND;
}

#endif /* SHMOBJ_OBJECT_KEY_LOOKUP_H */
