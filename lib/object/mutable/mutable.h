/* The mutable room of the object layer (lib/object/mutable/): the
 * containers that change in place, one file per container and side. It
 * sees the read core and the encoding, never the views or the builder
 * (items are built through shmobj__obj_put, declared in the read core).
 * Its protocols are doc/protocols.md's sections 2 to 4.
 *
 * What the mutable containers' files share (mutable-section.c: the
 * control block, the lock, writer sections, optimistic reads, items, and
 * the entry points of the rest of the layer; mutable-list-*.c: the list;
 * mutable-dict-table.c: the dict and set table core and repair;
 * mutable-dict-change.c: their changes; mutable-dict-read.c: their reads,
 * iteration, free and check) and what they offer the rest of the layer
 * (the views, the checker, the free, JSON).
 *
 * Invariants kept by what this header defines:
 * - Everything a reader takes from a container is read inside
 *   shmobj__mut_read(): between an even sequence value and the same value
 *   read again, so a reader never keeps what a writer changed under it.
 *   Memory freed by a writer stays mapped, and every offset is
 *   bounds-checked before it is read, so reading an old body costs a
 *   retry, never a fault.
 * - Every change is made by the lock holder (shmobj__mut_lock), inside a
 *   writer section for anything a reader could see half done, and after
 *   its intent is recorded (struct shmobj__mut, format.h), so the next
 *   locker after its death can finish or undo it (shmobj__mut_repair). */
#ifndef SHMOBJ_OBJECT_MUTABLE_H
#define SHMOBJ_OBJECT_MUTABLE_H

#include "key-lookup.h"
#include "step.h"

/* A checked handle on a container, made from its view: the control block
 * and the space. */
struct shmobj__mc {
    struct shmobj__space *sp;
    struct shmobj__mut *m;
    const shmobj_view *v;
    unsigned type;
};

/* Check the view names a live mutable container of one of the kinds in
 * the mask (1 << type) and fill c. */
static inline int shmobj__mut_open(const shmobj_view *v, unsigned kinds,
                                   struct shmobj__mc *c)
{
    if (v == NULL)
        return SHMOBJ_EINVAL;
    if (v->type >= 32 || !(kinds & (1u << v->type)) || v->obj == NULL)
        return SHMOBJ_ETYPE;
    if (!shmobj__obj_live(v))
        return SHMOBJ_ESTALE;
    c->sp = shmobj__space_of(v);
    /* the view checked the header lies in its block (shmobj__body_size):
     * the control block must follow it there */
    uint64_t rel = shmobj__off_of(c->sp, v->obj) - v->obj_blk;
    if (v->count != 0 || v->len != 0 || rel > v->obj_blen ||
        v->obj_blen - rel < 16 + shmobj__mut_body_bytes(v->type))
        return SHMOBJ_ECORRUPT;
    c->m = (struct shmobj__mut *)((uint8_t *)v->obj + sizeof(struct shmobj__obj));
    c->v = v;
    c->type = v->type;
    return 0;
}

/* Take the container's lock, repairing it when its holder died (or left
 * an intent behind). 0, or the lock's error. */
int shmobj__mut_lock(struct shmobj__mc *c);
void shmobj__mut_unlock(struct shmobj__mc *c);

/* Clear the adder word of a dict (struct shmobj__mut) when it names a
 * dead handle (lock held). */
void shmobj__mut_adder_reap(struct shmobj__mc *c);
/* Wait, inside a writer section (lock held), until no lock-free int add
 * of a dict is under way, so that value slots may move, be freed or be
 * replaced: 0, or SHMOBJ_EBUSY after some seconds of a live adder. */
int shmobj__mut_adders_drain(struct shmobj__mc *c);

/* After a change made without the lock (an append, an int add): wake the
 * container's watchers (space.h; one load when nobody watches). The
 * changes under the lock are reported by shmobj__mut_unlock(). */
static inline void shmobj__mut_changed(struct shmobj__mc *c)
{
    /* the block, and the container in it (a graph's block may hold
     * several): the words shmobj_watch_container() registers */
    shmobj__space_changed(c->sp, c->v->obj_blk, shmobj__off_of(c->sp, c->v->obj), 0);
}

/* Writer section: readers retry what they read across it. */
static inline void shmobj__mut_wbegin(struct shmobj__mut *m)
{
    uint64_t s = atomic_load_explicit(&m->seq, memory_order_relaxed);
    atomic_store_explicit(&m->seq, s | 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

static inline void shmobj__mut_wend(struct shmobj__mut *m)
{
    uint64_t s = atomic_load_explicit(&m->seq, memory_order_relaxed);
    atomic_store_explicit(&m->seq, (s | 1) + 1, memory_order_release);
}

/* Run read(c, arg) optimistically until it ran with no writer in between
 * (then its result stands), falling back to running it under the lock
 * after many tries. The function must only read, check every offset, and
 * return 0 or an error; what it wrote to arg counts only when this
 * returns its result. */
int shmobj__mut_read(struct shmobj__mc *c, int (*read)(struct shmobj__mc *, void *),
                     void *arg);

/* An item as a slot holds it: a tag and a payload; child is the block
 * the payload names when the item has one (else 0), adopted when that
 * block is the caller's object the item adopts (not built for it). */
struct shmobj__mitem {
    uint8_t tag;
    uint64_t payload;
    shmobj__ref child;
    uint8_t adopted;
};

/* Make the item of a description: scalars and null inline, a link in its
 * slot (SHMOBJ__SLOT_LINK, the target's reference: owned by nobody), an
 * adopted object as the child it is (its ADOPTED mark taken: SHMOBJ_EOWNED
 * when another container holds it), anything else built into a child by
 * the builder (shmobj__obj_put). The values the fixed containers take,
 * held the way their slots hold them, so every reader, the check, the
 * JSON printer and the free treat a mutable container's slot as a fixed
 * one's. */
int shmobj__mut_item_make(struct shmobj__space *sp, const shmobj_value *val,
                          struct shmobj__mitem *it);
/* Undo shmobj__mut_item_make() for a change that did not take the item:
 * a built child freed, an adopted one's mark given back (the caller still
 * owns it). */
void shmobj__mut_item_drop(struct shmobj__space *sp, const struct shmobj__mitem *it);
/* The description of an item a slot holds without a child (a scalar,
 * null, a link), for a block of its own handed to the caller (a pop):
 * 0, or SHMOBJ_ECORRUPT for a tag no item has. */
int shmobj__mut_item_value(uint8_t tag, uint64_t payload, shmobj_value *v);
/* The child of an item handed to the caller as an object of its own (a
 * pop): an adopted one's mark cleared, so the caller may free it. */
static inline void shmobj__mut_child_handover(struct shmobj__space *sp, shmobj__ref child)
{
    shmobj__ref_unadopt(sp, child);
}

/* Free a child block (a whole object tree); 0 for none. Errors of a block
 * freed already (a repair repeating a free) are ignored. */
void shmobj__mut_child_free(struct shmobj__space *sp, shmobj__ref child);
/* The same inside a walk: its depth and budget. */
int shmobj__mut_child_free_in(struct shmobj__space *sp, shmobj__ref child, int depth,
                              uint64_t *budget);

/* Is this payload of a slot of this tag a child (a block of its own)? */
static inline shmobj__ref shmobj__mut_child_of(uint8_t tag, uint64_t payload)
{
    return tag == SHMOBJ__SLOT_OBJ ? payload : 0;
}

/* Store a slot's tag and payload (inside a writer section: a reader may
 * see the two change apart, and the section makes it retry). */
static inline void shmobj__mut_slot_put(struct shmobj__slot *s, uint8_t tag, uint8_t r0,
                                        uint64_t payload)
{
    s->tag = tag;
    s->reserved0 = r0;
    s->reserved1 = 0;
    s->reserved2 = 0;
    atomic_store_explicit(&s->payload, payload, memory_order_release);
}

/* Store a key slot whose first word is w0 (the tag in its low byte; a
 * medium key's first bytes above it) and payload (inside a writer
 * section, as shmobj__mut_slot_put). */
static inline void shmobj__mut_key_put(struct shmobj__slot *s, uint64_t w0, uint64_t payload)
{
    atomic_store_explicit((_Atomic uint64_t *)(void *)s, w0, memory_order_relaxed);
    atomic_store_explicit(&s->payload, payload, memory_order_release);
}

/* A checked reference to a raw block of at least `need` bytes: its
 * offset, or SHMOBJ_ECORRUPT / SHMOBJ_ESTALE. */
int shmobj__mut_block(struct shmobj__space *sp, shmobj__ref ref, uint64_t need,
                      uint64_t *off, uint64_t *usable);

/* The same on the hot paths: the range checked against the mapped
 * segment and the block's generation compared (one load), without the
 * arena's walk of its header; the check (shmobj__mut_check) proves each
 * block with shmobj__mut_block(). */
static inline int shmobj__mut_block_fast(struct shmobj__space *sp, shmobj__ref ref,
                                         uint64_t need, uint64_t *off)
{
    void *p;
    uint64_t o = shmobj__ref_off(ref), end;
    if (!shmobj__aligned(o, 16) || o < 16 || !shmobj__add_ok(need, 16, &end))
        return SHMOBJ_ECORRUPT;
    int rc = shmobj__space_at(sp, o - 16, end, &p);
    if (rc != 0)
        return rc;
    if (!shmobj__arena_gen_is(sp->base, o, shmobj__ref_gen(ref)))
        return SHMOBJ_ECORRUPT; /* a published block is never freed */
    *off = o;
    return 0;
}

/* ---- the list (mutable-list-*.c) ----------------------------------------- */

/* The repair of a list whose lock holder died (lock held). */
int shmobj__mlist_repair(struct shmobj__mc *c);
/* Clear a list (lock held). */
int shmobj__mlist_clear(struct shmobj__mc *c);
/* Publish what appends without the lock wrote past a list's len, and skip
 * a place holding it back whose claimant died (mutable-list.h). */
void shmobj__mlist_help(struct shmobj__mc *c);
/* The length of a list, checked against its chunks (inside a read). */
int shmobj__mlist_places(struct shmobj__mc *c, uint64_t *count);
/* Free every child and chunk (the container's own block stays). */
int shmobj__mlist_free(struct shmobj__mc *c, int depth, uint64_t *budget);

/* ---- dict and set (mutable-dict-table.c, mutable-dict-change.c, mutable-dict-read.c) ------------ */

#define SHMOBJ__MD_KINDS (1u << SHMOBJ_TYPE_MDICT | 1u << SHMOBJ_TYPE_MSET)

/* A checked body: its header copied, its parts' addresses. */
struct shmobj__mdbody {
    uint64_t off, size;
    uint16_t gen;
    uint64_t cap, pcap;
    uint64_t *ix;
    struct shmobj__slot *pairs; /* key slot 2p, value slot 2p + 1 */
    uint64_t *orders;
    int v3; /* version 3 (SHMOBJ__MBODY_MAGIC3): medium keys may be in slots */
};

#define SHMOBJ__MD_MAX_PLACES (UINT64_C(1) << 31)

static inline uint64_t shmobj__mdict_body_bytes(uint64_t cap, uint64_t pcap)
{
    return sizeof(struct shmobj__mbody) + 8 * cap + 40 * pcap;
}

/* A relaxed load of a word of a body that a writer may change. */
static inline uint64_t shmobj__mut_ld(const uint64_t *p)
{
    return atomic_load_explicit((_Atomic uint64_t *)(uintptr_t)p, memory_order_relaxed);
}

/* Fill b from the header of the body block at b->off (its first 32 bytes
 * mapped, at most `usable` bytes long): the header is copied once and
 * checked, the whole body mapped. */
static inline __attribute__((always_inline)) int
shmobj__mdict_body_fill(struct shmobj__mc *c, shmobj__ref ref, uint64_t usable,
                        struct shmobj__mdbody *b)
{
    struct shmobj__mbody h;
    void *p;
    /* each field read once (three loads, not a copy through the stack):
     * the magic and kind as the low five bytes of the first word */
    const uint64_t *hw = (const uint64_t *)(const void *)(c->sp->base + b->off);
    uint64_t w0 = shmobj__mut_ld(&hw[0]);
    h.magic = (uint32_t)w0;
    h.kind = (uint8_t)(w0 >> 32);
    h.cap = shmobj__mut_ld(&hw[1]);
    h.pcap = shmobj__mut_ld(&hw[2]);
    /* cap a power of two in [2, 2^33], pcap in [1, 2^31] and at most 3/4 of
     * cap (the unsigned differences wrap for 0) */
    if ((h.magic | UINT32_C(1) << 24) != SHMOBJ__MBODY_MAGIC3 || h.kind != c->type ||
        h.cap - 2 > (UINT64_C(1) << 33) - 2 || (h.cap & (h.cap - 1)) != 0 ||
        h.pcap - 1 > SHMOBJ__MD_MAX_PLACES - 1 || 4 * h.pcap > 3 * h.cap)
        return SHMOBJ_ECORRUPT;
    b->size = shmobj__mdict_body_bytes(h.cap, h.pcap);
    if (b->size > usable)
        return SHMOBJ_ECORRUPT;
    int rc = shmobj__space_at(c->sp, b->off, b->size, &p);
    if (rc != 0)
        return rc;
    b->gen = shmobj__ref_gen(ref);
    b->v3 = h.magic == SHMOBJ__MBODY_MAGIC3;
    b->cap = h.cap;
    b->pcap = h.pcap;
    b->ix = (uint64_t *)(void *)((uint8_t *)p + sizeof h);
    b->pairs = (struct shmobj__slot *)(void *)(b->ix + h.cap);
    b->orders = (uint64_t *)(void *)(b->pairs + 2 * h.pcap);
    return 0;
}

/* The hot paths' open of a body (shmobj__mut_block_fast's checks). */
static inline __attribute__((always_inline)) int
shmobj__mdict_body_open_fast(struct shmobj__mc *c, shmobj__ref ref, struct shmobj__mdbody *b)
{
    if (shmobj__mut_block_fast(c->sp, ref, sizeof(struct shmobj__mbody), &b->off) != 0)
        return SHMOBJ_ECORRUPT; /* a published body is never freed */
    return shmobj__mdict_body_fill(c, ref, UINT64_MAX, b);
}

/* The body and len, read once: 0 with b filled, 1 for no body, or an
 * error. len is checked against the body's places. strong: the arena
 * proves the block and its size (the check, rebuilds, repairs, frees);
 * else the hot paths' checks (shmobj__mut_block_fast). */
int shmobj__mdict_body_how(struct shmobj__mc *c, struct shmobj__mdbody *b, uint64_t *len,
                           int strong);

/* The hot paths' body: lookups, sets, deletes, adds, iteration. */
static inline __attribute__((always_inline)) int
shmobj__mdict_body_now(struct shmobj__mc *c, struct shmobj__mdbody *b, uint64_t *len)
{
    shmobj__ref ref = atomic_load_explicit(&c->m->body, memory_order_acquire);
    uint64_t n = atomic_load_explicit(&c->m->len, memory_order_acquire);
    if (ref == 0)
        return n == 0 ? 1 : SHMOBJ_ECORRUPT;
    int rc = shmobj__mdict_body_open_fast(c, ref, b);
    if (rc != 0)
        return rc;
    if (n > b->pcap)
        return SHMOBJ_ECORRUPT;
    *len = n;
    return 0;
}

/* The child held by the key (value 0) or value slot of pair p. */
static inline shmobj__ref shmobj__mdict_pair_child(const struct shmobj__mdbody *b, uint64_t p,
                                                   int value)
{
    struct shmobj__slot *s = &b->pairs[2 * p + (value ? 1 : 0)];
    return shmobj__mut_child_of(s->tag, atomic_load_explicit(&s->payload, memory_order_relaxed));
}

/* Does a key held in a child (payload pl of a key slot) equal the
 * prepared key k? 1, 0, or an error. It takes neither the body nor the
 * handle, so that a hot path's copies of them stay in registers (the
 * address of neither escapes to a call). */
int shmobj__mdict_key_obj_eq(struct shmobj__space *sp, uint64_t pl, const shmobj_key *k);

/* Does the key slot of pair p hold the prepared key k? 1, 0, or an error. */
static inline __attribute__((always_inline)) int
shmobj__mdict_key_eq(struct shmobj__mc *c, const struct shmobj__mdbody *b, uint64_t p,
                     const shmobj_key *k)
{
    struct shmobj__slot *ks = &b->pairs[2 * p];
    uint8_t tag = ks->tag;
    uint64_t pl = atomic_load_explicit(&ks->payload, memory_order_relaxed);
    switch (tag) {
    case SHMOBJ__SLOT_HOLE:
        return 0;
    case SHMOBJ__SLOT_INT:
        return k->type == SHMOBJ_TYPE_INT && (int64_t)pl == k->i;
    case SHMOBJ__SLOT_SSTR:
        /* A writer's short key slot is NUL-padded (the check proves it),
         * as a prepared key's word_ is: one compare of the words, with no
         * mask of the length (a slot with bytes past its length, which
         * the check reports, equals no key here). */
        if (ks->reserved0 > SHMOBJ__SSTR_MAX)
            return SHMOBJ_ECORRUPT;
        return k->type == SHMOBJ_TYPE_STR && k->len == ks->reserved0 && pl == k->word_;
    case SHMOBJ__SLOT_MSTR:
        /* the fixed containers' medium key compare: two words */
        return shmobj__key_mstr_equal(ks, pl, k);
    case SHMOBJ__SLOT_OBJ:
        return shmobj__mdict_key_obj_eq(c->sp, pl, k);
    default:
        return SHMOBJ_ECORRUPT;
    }
}

/* Find a key: its pair (0), or SHMOBJ_ENOTFOUND with the empty index
 * entry a new key takes in *free_at; *probes (when asked) counts the
 * index reads. */
static inline __attribute__((always_inline)) int
shmobj__mdict_find(struct shmobj__mc *c, const struct shmobj__mdbody *b, uint64_t len,
                   const shmobj_key *k, uint64_t *pair, uint64_t *free_at, uint64_t *probes)
{
    struct shmobj__probe p;
    uint64_t item;
    shmobj__probe_start(&p, b->ix, b->cap, k->hash_);
    for (;;) {
        int step = shmobj__probe_next(&p, len, &item);
        if (probes != NULL)
            *probes = shmobj__probe_reads(&p, step);
        switch (step) {
        case SHMOBJ__PROBE_HIT: {
            int eq = shmobj__mdict_key_eq(c, b, item, k);
            if (eq < 0)
                return eq;
            if (eq) {
                *pair = item;
                return 0;
            }
            break;
        }
        case SHMOBJ__PROBE_EMPTY:
            if (free_at != NULL)
                *free_at = shmobj__probe_pos(&p);
            return SHMOBJ_ENOTFOUND;
        default:
            return SHMOBJ_ECORRUPT;
        }
    }
}

/* A key's pair in the body as it is now: 0 with b, len and pair filled,
 * SHMOBJ_ENOTFOUND (no body, or no such key), or an error. */
static inline __attribute__((always_inline)) int
shmobj__mdict_locate(struct shmobj__mc *c, const shmobj_key *k, struct shmobj__mdbody *b,
                     uint64_t *len, uint64_t *pair)
{
    int rc = shmobj__mdict_body_now(c, b, len);
    if (rc == 1)
        return SHMOBJ_ENOTFOUND;
    return rc != 0 ? rc : shmobj__mdict_find(c, b, *len, k, pair, NULL, NULL);
}

/* A body with room for one more pair: a new body of the live pairs when
 * there is none or its places are used up (lock held). */
int shmobj__mdict_rebuild(struct shmobj__mc *c, struct shmobj__mdbody *b, uint64_t *len,
                          int have);
/* Open a dict or set of one of kinds for a call naming key kv: c filled,
 * the key made ready in k (kind, UTF-8, hash). */
int shmobj__mdict_begin(const shmobj_view *v, unsigned kinds, const shmobj_value *kv,
                        struct shmobj__mc *c, shmobj_key *k);
/* Open a dict for a call naming a prepared key (shmobj_key_init()). */
static inline __attribute__((always_inline)) int
shmobj__mdict_open_key(const shmobj_view *v, const shmobj_key *k, struct shmobj__mc *c)
{
    if (v == NULL || k == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__mut_open(v, 1u << SHMOBJ_TYPE_MDICT, c);
    if (rc != 0)
        return rc;
    return shmobj__key_ready(k) ? 0 : SHMOBJ_EINVAL;
}
/* Free the children of the pairs of a cleared body (the intent's retired
 * and progress), then the body (lock held). */
int shmobj__mdict_clear_finish(struct shmobj__mc *c);
/* Clear a dict or set (lock held). */
int shmobj__mdict_clear(struct shmobj__mc *c);


/* The repair of a dict or set whose lock holder died (lock held). */
int shmobj__mdict_repair(struct shmobj__mc *c);
/* The count of a dict or set, checked against its body (inside a read). */
int shmobj__mdict_places(struct shmobj__mc *c, uint64_t *count);
/* Lookup of a prepared key: a view of its value (dict) or member (set). */
int shmobj__mdict_lookup(const shmobj_view *v, const shmobj_key *k, shmobj_view *item);
/* Is key k in the dict or set, by an optimistic read: 0, SHMOBJ_ENOTFOUND,
 * or an error. */
int shmobj__mdict_has(struct shmobj__mc *c, const shmobj_key *k);
/* Free every child and the body (the container's own block stays). */
int shmobj__mdict_free(struct shmobj__space *sp, const shmobj_view *v, int depth,
                       uint64_t *budget);

/* ---- what the rest of the layer calls ---------------------------------- */

/* Live items of a mutable container view. */
int shmobj__mut_len(const shmobj_view *v, size_t *len);
/* Item i (list: position; dict: value of the i-th pair in order; set:
 * the i-th member), and key i (dict, set). */
int shmobj__mut_item(const shmobj_view *v, size_t i, shmobj_view *item);
int shmobj__mut_key(const shmobj_view *v, size_t i, shmobj_view *key);
/* Free what the container owns (graph-free.c's walk, whose depth and budget
 * the children's frees go on charging). */
int shmobj__mut_free(struct shmobj__space *sp, const shmobj_view *v, int depth,
                     uint64_t *budget);

/* The checker's walk: every place of the container is checked, and each
 * item slot is handed to child(ctx, slot_off, blk, blen, gen, kind) (kind
 * 0 a value, 1 a key) with the block holding the slot; budget is charged
 * one unit per place and index entry (a list's place is only its slot,
 * which the child charges). */
typedef int (*shmobj__mut_child_fn)(void *ctx, uint64_t slot_off, uint64_t blk,
                                    uint64_t blen, uint16_t gen, int kind);
int shmobj__mut_check(struct shmobj__space *sp, const shmobj_view *v, uint64_t *budget,
                      shmobj__mut_child_fn child, void *ctx);
int shmobj__mdict_check(struct shmobj__mc *c, uint64_t *budget, shmobj__mut_child_fn child,
                        void *ctx);
int shmobj__mlist_check(struct shmobj__mc *c, uint64_t *budget, shmobj__mut_child_fn child,
                        void *ctx);

/* Item and key views of a dict or set by rank (the i-th live pair). */
int shmobj__mdict_nth(const shmobj_view *v, size_t i, int want_key, shmobj_view *out);

#endif /* SHMOBJ_OBJECT_MUTABLE_H */
