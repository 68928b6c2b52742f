/* The growable list's pieces its files share: the appends and the
 * reservations (mutable-list-append.c), the locked changes
 * (mutable-list-change.c), the repair (mutable-list-repair.c) and the
 * reads, free and check (mutable-list-read.c): where an item lives, the
 * slot's tag and payload, len and the reservation counter, the growth
 * block, and the list's lock, which closes the reservations. The protocol
 * and its invariants: doc/protocols.md, "The growable list". */
#ifndef SHMOBJ_OBJECT_MUTABLE_LIST_H
#define SHMOBJ_OBJECT_MUTABLE_LIST_H

#include "mutable.h"

/* ---- the list ------------------------------------------------------------ */

static inline _Atomic uint64_t *list_dir(struct shmobj__mut *m)
{
    return (_Atomic uint64_t *)(void *)((uint8_t *)m + sizeof *m);
}

/* The reference of the list's growth block: a word of the control block
 * that no append writes. */
static inline _Atomic uint64_t *apps_ref(struct shmobj__mut *m)
{
    return &m->retired2;
}

/* Chunk and place in it of item p. */
static inline unsigned chunk_of(uint64_t p, uint64_t *within)
{
    uint64_t q = p / SHMOBJ__MLIST_CHUNK0 + 1;
    unsigned k = 63u - (unsigned)__builtin_clzll(q);
    *within = p - SHMOBJ__MLIST_CHUNK0 * ((UINT64_C(1) << k) - 1);
    return k;
}

static inline uint64_t chunk_bytes(unsigned k)
{
    return (uint64_t)16 * SHMOBJ__MLIST_CHUNK0 << k;
}

/* Where item p lives: the slot, and its chunk's offset, extent and
 * generation (for views). SHMOBJ_ECORRUPT when the chunk is missing or is
 * not a live block that fits it (list_chunk_fits()). */
struct lslot {
    struct shmobj__slot *s;
    uint64_t blk, blen;
    uint16_t gen;
};

/* Does the block `ref` hold chunk k: 16-aligned, mapped, live with its
 * generation, and of a usable size the allocation of chunk_bytes(k) gives
 * (at least that, less than twice)? Everything an append follows to the
 * place it writes is checked so against the list's own directory: a
 * damaged entry naming another object's block of another size, a
 * misaligned or stale one, is damage (SHMOBJ_ECORRUPT), never a store.
 * One load of the block's header, as the generation's check alone. */
static inline __attribute__((always_inline)) int
list_chunk_fits(struct shmobj__space *sp, uint64_t ref, unsigned k, uint64_t *off)
{
    void *p;
    uint64_t o = shmobj__ref_off(ref), need = chunk_bytes(k);
    if (!shmobj__aligned(o, 16) || o < 16 || shmobj__space_at(sp, o - 16, need + 16, &p) != 0)
        return SHMOBJ_ECORRUPT;
    uint64_t u = shmobj__arena_usable_if(sp->base, o, shmobj__ref_gen(ref));
    if (u < need || u >= 2 * need)
        return SHMOBJ_ECORRUPT; /* a published chunk is never freed */
    *off = o;
    return 0;
}

static inline __attribute__((always_inline)) int list_slot(struct shmobj__mc *c, uint64_t p,
                                                         struct lslot *out)
{
    uint64_t w, off;
    unsigned k = chunk_of(p, &w);
    if (k >= SHMOBJ__MLIST_CHUNKS)
        return SHMOBJ_ECORRUPT;
    uint64_t ref = atomic_load_explicit(&list_dir(c->m)[k], memory_order_acquire);
    if (ref == 0 || list_chunk_fits(c->sp, ref, k, &off) != 0)
        return SHMOBJ_ECORRUPT;
    out->s = (struct shmobj__slot *)(void *)(c->sp->base + off + 16 * w);
    out->blk = off;
    out->blen = chunk_bytes(k);
    out->gen = shmobj__ref_gen(ref);
    return 0;
}

static inline void slot_copy(struct shmobj__slot *to, struct shmobj__slot *from)
{
    shmobj__mut_slot_put(to, from->tag, from->reserved0,
                         atomic_load_explicit(&from->payload, memory_order_relaxed));
}

static inline shmobj__ref slot_child(struct shmobj__slot *s)
{
    return shmobj__mut_child_of(s->tag,
                                atomic_load_explicit(&s->payload, memory_order_relaxed));
}

/* A slot's tag as appenders publish it (acquire: the payload stored
 * before it is seen). */
static inline uint8_t slot_tag(struct shmobj__slot *s)
{
    return atomic_load_explicit((_Atomic uint8_t *)(void *)&s->tag, memory_order_acquire);
}

/* Publish an item into a slot no reader takes yet (lock held): the
 * payload, then the first word (the tag, release). */
static inline void slot_publish(struct shmobj__slot *s, uint8_t tag, uint64_t payload)
{
    atomic_store_explicit(&s->payload, payload, memory_order_relaxed);
    atomic_store_explicit((_Atomic uint64_t *)(void *)s, tag, memory_order_release);
}

/* Give a slot up: its first word 0 (no reader takes it: past len, or in a
 * section), then the payload. */
static inline void slot_zero(struct shmobj__slot *s)
{
    atomic_store_explicit((_Atomic uint64_t *)(void *)s, 0, memory_order_relaxed);
    atomic_store_explicit(&s->payload, 0, memory_order_relaxed);
}

/* The first word of a slot (tag, reserved0..2): what appends CAS. */
static inline _Atomic uint64_t *slot_w0(struct shmobj__slot *s)
{
    return (_Atomic uint64_t *)(void *)s;
}

/* The claim word of a handle's token. */
static inline uint64_t slot_claim(uint64_t tok)
{
    return SHMOBJ__SLOT_CLAIM | tok << 32;
}

/* Is a slot's tag an item's (written), not 0 or a claim? */
static inline int tag_written(uint8_t tag)
{
    return tag != 0 && tag != SHMOBJ__SLOT_CLAIM;
}

/* Is tag one an item of a list holds (what shmobj__mut_item_make() and
 * the appends write: scalars, an object or null, a link)? */
static inline int list_item_tag(uint8_t tag)
{
    return tag == SHMOBJ__SLOT_BOOL || tag == SHMOBJ_TYPE_INT || tag == SHMOBJ_TYPE_UINT ||
           tag == SHMOBJ_TYPE_DOUBLE || tag == SHMOBJ__SLOT_OBJ || tag == SHMOBJ__SLOT_LINK;
}

/* The list's reservation counter (the control block's count). */
static inline _Atomic uint64_t *list_res(struct shmobj__mut *m)
{
    return &m->count;
}

/* Published items (len without its epoch). */
static inline uint64_t list_len(struct shmobj__mut *m)
{
    return atomic_load_explicit(&m->len, memory_order_acquire) & SHMOBJ__MLIST_LEN_MASK;
}

/* Store len = n keeping its epoch (lock held), release. */
static inline void list_len_put(struct shmobj__mut *m, uint64_t n)
{
    uint64_t e = atomic_load_explicit(&m->len, memory_order_relaxed) & ~SHMOBJ__MLIST_LEN_MASK;
    atomic_store_explicit(&m->len, e | n, memory_order_release);
}

/* The growth block named by the control block, checked as the hot path
 * checks blocks (a live block of its size, 64-aligned, its magic and
 * record count); NULL when there is none (never written under the lock)
 * or it is damaged. */
static inline __attribute__((always_inline)) struct shmobj__mlapps *
list_apps(struct shmobj__mc *c)
{
    shmobj__ref ref = atomic_load_explicit(apps_ref(c->m), memory_order_acquire);
    uint64_t off;
    if (ref == 0 ||
        shmobj__mut_block_fast(c->sp, ref, sizeof(struct shmobj__mlapps), &off) != 0 ||
        !shmobj__aligned(off, 64))
        return NULL;
    struct shmobj__mlapps *a = (struct shmobj__mlapps *)(void *)(c->sp->base + off);
    return a->magic == SHMOBJ__MLIST_MAGIC && a->recs == SHMOBJ__MLGROW_RECS ? a : NULL;
}

/* shmobj__mlist_help() (mutable.h): publish what is written past len, and
 * settle a hole at len that has been stuck long enough (its claimant
 * dead, or nobody claimed it for SHMOBJ__MLIST_UNCLAIMED_NS): readers call
 * it before they read len, so that items a dead appender's place held
 * back become visible. Never waits. */

/* Take the list's lock and close its reservations, every reserved place
 * written or skipped and published (the lock's answers, or SHMOBJ_EBUSY
 * while a live appender keeps a place claimed); reopen them and release
 * it. */
int shmobj__mlist_lock(struct shmobj__mc *c);
void shmobj__mlist_unlock(struct shmobj__mc *c);

/* What the list's files offer each other (doc/protocols.md, "The growable
 * list"): */
/* Close the reservations (lock held): every place below the count settled
 * and published, len at that count with the next epoch
 * (mutable-list-append.c). 0, SHMOBJ_EBUSY, or an error. */
int shmobj__mlist_close(struct shmobj__mc *c);
/* Reopen the reservations at len (lock held). */
void shmobj__mlist_open(struct shmobj__mc *c);
/* A writer's call on a list: open, make the item, lock
 * (mutable-list-change.c). On success the caller holds the lock,
 * reservations closed. */
int shmobj__mlist_begin(const shmobj_view *list, const shmobj_value *val,
                        struct shmobj__mc *c, struct shmobj__mitem *it);
/* Roll an insert's (insert != 0) or a delete's moves forward from the
 * recorded progress, and finish a clear's frees (mutable-list-repair.c). */
int shmobj__mlist_move_finish(struct shmobj__mc *c, int insert);
int shmobj__mlist_clear_finish(struct shmobj__mc *c);

#endif
