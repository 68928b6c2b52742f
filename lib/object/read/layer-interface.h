/* The object layer's internal interface: what its files share beyond the
 * bytes (format.h). Nothing here is seen outside lib/object.
 *
 * The read room: the inline core every other room reads through. Its
 * headers sit above the encoding room and below the mutable containers,
 * the builder, the shapes and the generic views, so the rooms' includes
 * form a DAG (doc/architecture.md, "The object layer's rooms"):
 *
 *     encoding/format.h         the layout, constants and the format's hashes
 *     encoding/content-check.h  UTF-8 and buffer-extent validation
 *     encoding/index-probe.h    the one probe of every index   (format.h)
 *     read/layer-interface.h    this: views' flags, liveness, key
 *                               descriptions, the functions one room
 *                               offers the others  (format.h, space.h, arena.h)
 *     read/slot-read.h          the inline readers of a slot and an object
 *     read/key-lookup.h         the inline key comparisons and lookups
 *     read/shape-read.h         the light check of a shape, its use count
 *     build/value-build.h       what the builder's files share
 *     mutable/mutable.h         what the mutable containers share
 *
 * and every .c file includes the one of them it needs most (which brings
 * the rest it depends on).
 *
 * Invariants kept by what this header defines:
 * - A description's string is resolved in one place
 *   (shmobj__desc_mem): SHMOBJ_STRLEN only for a str with a pointer, a
 *   NULL pointer only with length 0. The measure, the writer, keys and
 *   lookups all call it, so they refuse and accept the same descriptions.
 * - A key is described to every lookup as a shmobj_key prepared by
 *   shmobj__key_prepare(): its hash, and for a str of up to
 *   SHMOBJ__SSTR_MAX bytes the word a short key slot holds.
 * - The work bound of every walk over a graph (free, replace, check, JSON)
 *   is shmobj__work_budget(). */
#ifndef SHMOBJ_OBJECT_LAYER_INTERFACE_H
#define SHMOBJ_OBJECT_LAYER_INTERFACE_H

#include <string.h>

#include "arena.h"
#include "format.h"
#include "space.h"

/* shmobj_view.flags */
#define SHMOBJ__VIEW_RO 0x01    /* the slot is immutable (tuple item, key) */
#define SHMOBJ__VIEW_NAMES 0x02 /* a struct with field names */
/* An item of a mutable container (mutable-section.c): its slot may be given an
 * item of another kind, so a scalar read compares the tag again. */
#define SHMOBJ__VIEW_MUT 0x04
/* A packed tuple of strings (SHMOBJ__OBJ_PACKED): its items are found in
 * its bytes, not in slots. */
#define SHMOBJ__VIEW_PACKED 0x08

/* Is the block whose payload starts at `blk` still the one a view saw,
 * with generation `gen`? One load of the arena's block header word (the 8
 * bytes before the payload; bits 48-63 hold the generation, see
 * doc/format-arena.md), which the arena bumps when it frees the block: a
 * view of a freed block, or of one built again at the same offset, fails
 * this test. `blk` was checked when the view was made (a live block of the
 * mapped segment, so blk - 8 is mapped too). The answer can be outdated at
 * once: a free may follow it. Relaxed: a free that happens before the call
 * is seen by coherence alone, and no order between this load and the
 * caller's accesses would make a free racing the call safe (a scalar read
 * that checks after its load orders the two with that load's acquire). */
static inline int shmobj__blk_live(const struct shmobj__space *sp, uint64_t blk,
                                   uint16_t gen)
{
    return shmobj__arena_gen_is(sp->base, blk, gen);
}

/* Units of work a walk over a graph may spend: every slot takes 16 bytes
 * of the segment, so a well-formed graph has fewer slots than this, and a
 * damaged one (cycles, shared subtrees) is refused in time linear in the
 * segment's size. Taken from this process's view of the segment, which
 * costs no system call; a walk spends it only through shmobj__work_take()
 * and shmobj__work_have(), which widen it once when it runs out. */
static inline uint64_t shmobj__work_budget(struct shmobj__space *sp)
{
    return atomic_load_explicit(&sp->mapped, memory_order_relaxed) / 16 + 64;
}

/* Set in a budget widened once already (shmobj__work_widen). */
#define SHMOBJ__WORK_WIDENED (UINT64_C(1) << 63)

/* A budget that ran out may be too small only because other processes
 * grew the segment past this process's view (a mutable list's newer
 * chunks and children): widen it once to a full budget of the segment as
 * it is now (extend(0)), then refuse. A walk spends at most two budgets of
 * the segment's size, linear still; sp NULL is never widened (content-check.c).
 * 0 with n units charged, or SHMOBJ_ECORRUPT. */
int shmobj__work_widen(struct shmobj__space *sp, uint64_t *budget, uint64_t n);

/* Charge n units of a walk's budget: 0, or SHMOBJ_ECORRUPT when even the
 * widened budget is spent. */
static inline int shmobj__work_take(struct shmobj__space *sp, uint64_t *budget, uint64_t n)
{
    if (__builtin_expect((*budget & ~SHMOBJ__WORK_WIDENED) >= n, 1)) {
        *budget -= n;
        return 0;
    }
    return shmobj__work_widen(sp, budget, n);
}

/* Is a unit left (widening the budget when needed)? Charges nothing. */
static inline int shmobj__work_have(struct shmobj__space *sp, uint64_t *budget)
{
    if (__builtin_expect((*budget & ~SHMOBJ__WORK_WIDENED) != 0, 1))
        return 1;
    if (shmobj__work_widen(sp, budget, 1) != 0)
        return 0;
    ++*budget; /* given back: only asked */
    return 1;
}

/* ---- descriptions of strings and keys --------------------------------- */

/* The length of the str or bytes description (type, p, len) into *n:
 * SHMOBJ_STRLEN is resolved with strlen for a str with a pointer; a NULL
 * pointer is refused unless the length is 0. */
static inline __attribute__((always_inline)) int
shmobj__desc_mem(unsigned type, const void *p, uint64_t len, uint64_t *n)
{
    if (len == SHMOBJ_STRLEN) {
        if (p == NULL || type != SHMOBJ_TYPE_STR)
            return SHMOBJ_EINVAL;
        len = strlen(p);
    }
    if (p == NULL && len != 0)
        return SHMOBJ_EINVAL;
    *n = len;
    return 0;
}

/* The kind and content of a key given as a value (an int, or a str or
 * bytes resolved by shmobj__desc_mem) into key's type, i, ptr and len;
 * SHMOBJ_EINVAL for any other kind. The private fields are not set. */
static inline int shmobj__desc_key(const shmobj_value *v, shmobj_key *key)
{
    key->type = v->type;
    key->i = 0;
    key->ptr = NULL;
    key->len = 0;
    switch (v->type) {
    case SHMOBJ_TYPE_INT:
        key->i = v->v.i;
        return 0;
    case SHMOBJ_TYPE_STR:
    case SHMOBJ_TYPE_BYTES:
        key->ptr = v->v.s.ptr;
        return shmobj__desc_mem(v->type, v->v.s.ptr, v->v.s.len, &key->len);
    default:
        return SHMOBJ_EINVAL;
    }
}

/* The hash of a described key (type, i, ptr, len): where it sits in an
 * index. */
static inline uint64_t shmobj__key_hash(const shmobj_key *key)
{
    return key->type == SHMOBJ_TYPE_INT ? shmobj__hash_int(key->i)
                                        : shmobj__hash_mem(key->type, key->ptr, key->len);
}

/* The word_ of a prepared str key of n bytes at p: for at most
 * SHMOBJ__SSTR_MAX bytes the word its short key slot holds, for a medium
 * key (shmobj__mstr_fits) the second word of its slot, else 0 (such a key
 * equals no key held in a slot: a short slot's length differs, and a
 * medium slot's second word is never 0). */
static inline uint64_t shmobj__key_word(const uint8_t *p, uint64_t n)
{
    if (n <= SHMOBJ__SSTR_MAX)
        return shmobj__pack_short(p, n);
    return shmobj__mstr_fits(p, n) ? shmobj__mstr_w1(p, n) : 0;
}

/* Fill the private fields of a described key: its hash, and the word_ of
 * shmobj__key_word() for a str (0 otherwise). */
static inline void shmobj__key_prepare(shmobj_key *key)
{
    key->reserved_ = 0;
    key->hash_ = shmobj__key_hash(key);
    key->word_ = key->type == SHMOBJ_TYPE_STR ? shmobj__key_word(key->ptr, key->len) : 0;
}

/* Is this a key shmobj_key_init() prepared? (Its kind says so; the rest is
 * the caller's memory, trusted like any pointer it passes.) */
static inline int shmobj__key_ready(const shmobj_key *k)
{
    return k->type == SHMOBJ_TYPE_INT ||
           ((k->type == SHMOBJ_TYPE_STR || k->type == SHMOBJ_TYPE_BYTES) &&
            (k->ptr != NULL || k->len == 0));
}

/* ---- functions one file of the layer offers the others ---------------- */

/* view-navigate.c: check a reference to an object block and return its extent. A
 * reference the caller passed (from_caller) that names no block of the
 * segment gives SHMOBJ_EINVAL, and a live block that is not an object (no
 * tree magic) SHMOBJ_ETYPE; a reference read from a slot gives
 * SHMOBJ_ECORRUPT for both (the graph is damaged). An object block whose
 * header disagrees with itself or its block is SHMOBJ_ECORRUPT either
 * way. */
int shmobj__tree_open(struct shmobj__space *sp, shmobj__ref ref, int from_caller,
                      uint64_t *blk, uint64_t *blen);

/* view-navigate.c: resolve the OBJ slot payload `p` found in the block
 * [blk, blk + blen) with generation bgen: fill the view's object part
 * (obj, obj block, type, count, len, dtype, ndim) after checking
 * everything it read. */
int shmobj__view_follow(struct shmobj__space *sp, uint64_t p, uint64_t blk,
                        uint64_t blen, uint16_t bgen, shmobj_view *out);

/* view-navigate.c: the rest of a slot view whose follow of the OBJ payload p
 * (read from slot s) failed with rc: the slot is read again, and a value
 * replaced under the view is followed anew, up to SHMOBJ__FOLLOW_RETRIES
 * times (slot-read.h). Out of line: the first follow's callers keep their
 * registers. */
int shmobj__view_refollow(struct shmobj__space *sp, struct shmobj__slot *s, uint64_t p,
                          int rc, uint64_t blk, uint64_t blen, uint16_t bgen,
                          shmobj_view *out);

/* view-navigate.c: the view of the value of the object block [blk, blk + blen)
 * of generation gen, opened by shmobj__tree_open(): its root slot's, or a
 * record alone's (version 3, ROOTREC: its header is the tree header). */
int shmobj__view_root(struct shmobj__space *sp, uint64_t blk, uint64_t blen, uint16_t gen,
                      shmobj_view *out);

/* view-navigate.c: the object part of the view of the OBJ slot s (payload p, in
 * the block [blk, blk + blen) of generation bgen) whose reserved0 is
 * SHMOBJ__SLOT_PTUP_MARK: a packed tuple whose header is the slot's
 * reserved fields while p is inline, else (the slot was replaced) the
 * block p names, as any slot's. */
int shmobj__view_ptup(struct shmobj__space *sp, struct shmobj__slot *s, uint64_t p,
                      uint64_t blk, uint64_t blen, uint16_t bgen, shmobj_view *out);

/* view-navigate.c: fill a view of the slot at segment offset `slot_off` in the
 * block [blk, blk + blen) of generation bgen. `ro` marks immutable
 * slots. */
int shmobj__view_slot(struct shmobj__space *sp, uint64_t slot_off,
                      uint64_t blk, uint64_t blen, uint16_t bgen, int ro,
                      shmobj_view *out);

/* view-lookup.c: the position of a prepared key in the index of a dict, set
 * or named struct (the view's object checked live by the caller); counts
 * the index entries read into *probes when not NULL. The lookup every
 * public call ends in when its inline fast path does not decide, and the
 * one the checker proves every key against. */
int shmobj__index_find(const shmobj_view *v, const shmobj_key *key, size_t *out,
                       uint64_t *probes);

/* value-write.c: put a value tree into a new block (shmobj_obj_put without the
 * checks of its public arguments). */
int shmobj__obj_put(struct shmobj__space *sp, const shmobj_value *val,
                    shmobj__ref *out);

/* references.c: a reference given as a mutable container's item, taken as
 * its slot holds it. A link (adopt 0): checked as a put checks it. An
 * adoption (adopt 1): checked, then the block's ADOPTED mark taken
 * (SHMOBJ_EOWNED when another container holds it). shmobj__ref_unadopt()
 * gives the mark back: a change that failed after the take, or an item
 * handed to the caller (a pop). */
int shmobj__ref_take(struct shmobj__space *sp, shmobj__ref ref, int adopt);
void shmobj__ref_unadopt(struct shmobj__space *sp, shmobj__ref ref);

/* graph-free.c: free the block `ref` names and every separate block it
 * reaches; from_caller as for shmobj__tree_open(). Charges *budget one
 * unit per slot walked. */
int shmobj__free_tree(struct shmobj__space *sp, shmobj__ref ref, int from_caller,
                      int depth, uint64_t *budget);

/* graph-free.c: free the separate blocks the items of the container v reach
 * (v's own block stays). */
int shmobj__free_children(struct shmobj__space *sp, const shmobj_view *v,
                          int depth, uint64_t *budget);

/* ---- shapes and records (shape.c) ---------------------------------- */

/* A record view keeps what its shape's view needs, copied when it was made
 * (checked then): `len` the shape block's reference, `ndim` log2 of the
 * index capacity, and the shape block's extent in 16-byte units in the
 * four bytes `dtype` and `reserved` (a shape block is at most 64 GiB). */
static inline void shmobj__rec_set_extent(shmobj_view *v, uint64_t blen)
{
    uint32_t u = (uint32_t)(blen / 16);
    v->dtype = (uint8_t)u;
    v->reserved[0] = (uint8_t)(u >> 8);
    v->reserved[1] = (uint8_t)(u >> 16);
    v->reserved[2] = (uint8_t)(u >> 24);
}

static inline uint64_t shmobj__rec_extent(const shmobj_view *v)
{
    return 16 * (uint64_t)((uint32_t)v->dtype | (uint32_t)v->reserved[0] << 8 |
                           (uint32_t)v->reserved[1] << 16 | (uint32_t)v->reserved[2] << 24);
}

/* The view of the shape of record view rec (a view of type SHAPE: its
 * names and index are the record's keys), from rec's copies alone. */
static inline void shmobj__record_shape_view(const shmobj_view *rec, shmobj_view *sv)
{
    struct shmobj__space *sp = shmobj__space_of_seg(rec->seg);
    uint64_t blk = shmobj__ref_off(rec->len);
    /* every field a lookup or a key's view reads; the rest unset */
    sv->seg = rec->seg;
    sv->slot = NULL;
    sv->obj = sp->base + blk + SHMOBJ__PREFIX;
    sv->obj_blk = sv->slot_blk = blk;
    sv->obj_blen = sv->slot_blen = shmobj__rec_extent(rec);
    sv->obj_gen = sv->slot_gen = shmobj__ref_gen(rec->len);
    sv->len = UINT64_C(1) << rec->ndim;
    sv->count = rec->count;
    sv->type = SHMOBJ_TYPE_SHAPE;
    sv->flags = SHMOBJ__VIEW_RO;
    sv->slot_tag = SHMOBJ__SLOT_OBJ;
}

/* What shmobj__shape_open() found: a shape block and its checked layout. */
struct shmobj__shape_info {
    uint64_t blk, blen;                /* the block */
    uint16_t gen;                      /* its generation */
    uint32_t count;                    /* fields */
    uint64_t cap;                      /* index capacity */
    const struct shmobj__obj *obj;     /* the shape's header */
};

/* Check that `ref` names a shape block and its layout fits it; from_caller
 * as for shmobj__tree_open() (a block that is not a shape: ETYPE for the
 * caller's reference, ECORRUPT for one read from a record). */
int shmobj__shape_open(struct shmobj__space *sp, shmobj__ref ref, int from_caller,
                       struct shmobj__shape_info *out);

/* Fill the record part of a view from the record header h (copied and
 * checked by the caller): its shape, checked to hold h->count fields. */
int shmobj__record_view(struct shmobj__space *sp, const struct shmobj__obj *h,
                        shmobj_view *out);

/* Fill the object part of a view (obj, its block, type, count, len and
 * the shape's copies) of the record alone of the version 3 ROOTREC block
 * [blk, blk + blen) of generation gen: its shape is the tree header's
 * `size` word, checked as a record view's is, and its slots must fit. */
int shmobj__rootrec_view(struct shmobj__space *sp, uint64_t blk, uint64_t blen, uint16_t gen,
                         shmobj_view *out);

/* Take a use of a shape (SHMOBJ_ESTALE when it is being freed), give one
 * back (never below 0: a damaged count is left alone). */
int shmobj__shape_use(struct shmobj__space *sp, shmobj__ref shape);
void shmobj__shape_unuse(struct shmobj__space *sp, shmobj__ref shape);
/* The same for the shape of the record view rec, from its checked copy. */
void shmobj__shape_unuse_view(struct shmobj__space *sp, const shmobj_view *rec);

/* Free the shape block at ref (already opened as a tree at blk): refused
 * with SHMOBJ_EINUSE while records use it. */
int shmobj__shape_free(struct shmobj__space *sp, shmobj__ref ref, uint64_t blk);

#endif /* SHMOBJ_OBJECT_LAYER_INTERFACE_H */
