/* The growable list's pieces its writers (objmutlist.c) and its readers,
 * free and check (objmutlread.c) share: where an item lives, the slot's
 * tag and payload, the appenders block, and the list's lock, which closes
 * the appender words (the invariants are objmutlist.c's). */
#ifndef SHMOBJ_OBJMUTLIST_H
#define SHMOBJ_OBJMUTLIST_H

#include "objmut.h"

/* What a read returns for a slot being written (never a caller's code),
 * and how many times a read retries one before it settles the list under
 * the lock. */
#define LIST_PENDING 1
#define LIST_READ_WAITS 4096

/* ---- the list ------------------------------------------------------------ */

static inline _Atomic uint64_t *list_dir(struct shmobj__mut *m)
{
    return (_Atomic uint64_t *)(void *)((uint8_t *)m + sizeof *m);
}

/* The reference of the list's appenders block: a word of the control
 * block that no append writes and that lies on another cache line than
 * len, which every append's CAS takes from the other cores. */
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
 * generation (for views). SHMOBJ_ECORRUPT when the chunk is missing or
 * is not a live block of its size. */
struct lslot {
    struct shmobj__slot *s;
    uint64_t blk, blen;
    uint16_t gen;
};

static inline __attribute__((always_inline)) int list_slot(struct shmobj__mc *c, uint64_t p,
                                                         struct lslot *out)
{
    uint64_t w, off;
    unsigned k = chunk_of(p, &w);
    if (k >= SHMOBJ__MLIST_CHUNKS)
        return SHMOBJ_ECORRUPT;
    uint64_t ref = atomic_load_explicit(&list_dir(c->m)[k], memory_order_acquire);
    if (ref == 0)
        return SHMOBJ_ECORRUPT;
    int rc = shmobj__mut_block_fast(c->sp, ref, chunk_bytes(k), &off);
    if (rc != 0)
        return SHMOBJ_ECORRUPT; /* a published chunk is never freed */
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

/* Publish an item into a slot no reader takes yet (tag 0): the payload,
 * then the tag (release). */
static inline void slot_publish(struct shmobj__slot *s, uint8_t tag, uint64_t payload)
{
    s->reserved0 = 0;
    s->reserved1 = 0;
    s->reserved2 = 0;
    atomic_store_explicit(&s->payload, payload, memory_order_relaxed);
    atomic_store_explicit((_Atomic uint8_t *)(void *)&s->tag, tag, memory_order_release);
}

/* Give a slot up: tag 0 (no reader takes it: past len, or in a section). */
static inline void slot_zero(struct shmobj__slot *s)
{
    atomic_store_explicit((_Atomic uint8_t *)(void *)&s->tag, 0, memory_order_relaxed);
    s->reserved0 = 0;
    s->reserved1 = 0;
    s->reserved2 = 0;
    atomic_store_explicit(&s->payload, 0, memory_order_relaxed);
}

/* The appenders block named by the control block, checked as the hot
 * path checks blocks (a live block of its size, 64-aligned); NULL when
 * there is none (a version 1 list, or one never written) or it is
 * damaged. Its magic is the caller's to judge. */
static inline __attribute__((always_inline)) struct shmobj__mlapps *
list_apps_block(struct shmobj__mc *c)
{
    shmobj__ref ref = atomic_load_explicit(apps_ref(c->m), memory_order_acquire);
    uint64_t off;
    if (ref == 0 ||
        shmobj__mut_block_fast(c->sp, ref, sizeof(struct shmobj__mlapps), &off) != 0 ||
        !shmobj__aligned(off, 64))
        return NULL;
    struct shmobj__mlapps *a = (struct shmobj__mlapps *)(void *)(c->sp->base + off);
    return a->words == SHMOBJ__MLAPP_WORDS ? a : NULL;
}

/* The appenders block of either version (SHMOBJ__MLIST_MAGIC or _V2 in
 * *magic); NULL when there is none or it is damaged. */
static inline struct shmobj__mlapps *list_apps_any(struct shmobj__mc *c, uint32_t *magic)
{
    struct shmobj__mlapps *a = list_apps_block(c);
    if (a == NULL)
        return NULL;
    *magic = a->magic;
    return *magic == SHMOBJ__MLIST_MAGIC || *magic == SHMOBJ__MLIST_MAGIC_V2 ? a : NULL;
}

/* The appenders block when it is version 3, the only one appended to
 * without the lock (a version 2 block is made version 3 by the next
 * locker); NULL otherwise. */
static inline __attribute__((always_inline)) struct shmobj__mlapps *
list_apps(struct shmobj__mc *c)
{
    struct shmobj__mlapps *a = list_apps_block(c);
    return a != NULL && a->magic == SHMOBJ__MLIST_MAGIC ? a : NULL;
}

/* Take the list's lock and close its appender words (the lock's answers,
 * or SHMOBJ_EBUSY while a live appender keeps a word); give them back and
 * release it. */
int shmobj__mlist_lock(struct shmobj__mc *c);
void shmobj__mlist_unlock(struct shmobj__mc *c);

#endif
