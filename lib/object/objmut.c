/* Mutable containers: the control block's lock, writer sections and
 * optimistic reads, items, and the growable list (dicts and sets are in
 * objmutdict.c).
 *
 * Invariants kept here:
 * - A container's control block never moves (it is part of the object
 *   block the builder wrote); what grows lives in blocks it names: list
 *   chunks, which never move once published either (chunk k holds
 *   CHUNK0 << k items, so growth adds a chunk and copies nothing), and
 *   dict bodies.
 * - Only the holder of the container's lock writes it. Before anything a
 *   reader could see half done, the holder opens a writer section (seq
 *   odd) and closes it after (seq even); before anything at all it records
 *   its intent (op, at, progress, old_len, spare, retired), which it
 *   clears last. A list append needs no section: the item is written past
 *   len and published by the release store of len.
 * - Readers read inside shmobj__mut_read(): what they read counts only if
 *   seq was even and unchanged across it. A writer that frees memory does
 *   so inside or after a section, so a reader that read it retries; the
 *   memory stays mapped and every offset is checked, so the read of an old
 *   block never faults.
 * - The next locker after a holder's death (EOWNERDEAD), or after a holder
 *   that left an intent behind, repairs from the intent: moves of a list
 *   insert or delete are rolled forward (each step copies a slot and then
 *   advances progress, so a step repeated is the same step), a clear's
 *   frees are finished, and each recorded block is freed unless the place
 *   it was for holds it. A repeated free of a block already freed is
 *   refused by the arena's generation check, so repairs may repeat.
 * - Children (blocks of items that are not scalars) are owned by exactly
 *   one place: a replaced, deleted or cleared item's child is freed once,
 *   a popped one handed over. */
#include "objmut.h"

#include "cpu.h"

/* Optimistic tries of a read before it takes the lock. */
#define MUT_READ_TRIES 512

int shmobj__mut_open(const shmobj_view *v, unsigned kinds, struct shmobj__mc *c)
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

static int list_repair(struct shmobj__mc *c);

static int repair(struct shmobj__mc *c)
{
    int rc = c->type == SHMOBJ_TYPE_MLIST ? list_repair(c) : shmobj__mdict_repair(c);
    if (rc != 0)
        return rc;
    atomic_store_explicit(&c->m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    if (atomic_load_explicit(&c->m->seq, memory_order_relaxed) & 1)
        shmobj__mut_wend(c->m);
    return 0;
}

static void raw_unlock(struct shmobj__mc *c, int broken)
{
    const struct shmobj__space_live_ops *live = c->sp->ops->live;
    struct shmobj__os_lock *l = (struct shmobj__os_lock *)(void *)c->m->lock;
    if (live == NULL)
        atomic_store_explicit((_Atomic uint32_t *)(void *)c->m->lock, 0,
                              memory_order_release);
    else if (broken)
        live->unlock_broken(c->sp, l);
    else
        live->unlock(c->sp, l);
}

int shmobj__mut_lock(struct shmobj__mc *c)
{
    const struct shmobj__space_live_ops *live = c->sp->ops->live;
    int rc;
    if (live == NULL) {
        /* A space without other processes (the layer's tests and fuzz
         * target): one try, the word's owner is this process. */
        uint32_t z = 0;
        rc = atomic_compare_exchange_strong_explicit(
                 (_Atomic uint32_t *)(void *)c->m->lock, &z, 1,
                 memory_order_acquire, memory_order_relaxed)
                 ? 0
                 : SHMOBJ_EBUSY;
    } else {
        rc = live->lock(c->sp, (struct shmobj__os_lock *)(void *)c->m->lock, 0);
    }
    if (rc != 0 && rc != SHMOBJ_EOWNERDEAD)
        return rc;
    /* freed while we waited: the bytes are someone else's now */
    if (!shmobj__obj_live(c->v)) {
        raw_unlock(c, 0);
        return SHMOBJ_ESTALE;
    }
    if (rc == SHMOBJ_EOWNERDEAD ||
        (atomic_load_explicit(&c->m->seq, memory_order_relaxed) & 1) ||
        atomic_load_explicit(&c->m->op, memory_order_relaxed) != SHMOBJ__MUT_OP_NONE) {
        rc = repair(c);
        if (rc != 0) {
            raw_unlock(c, 1);
            return rc;
        }
    }
    return 0;
}

void shmobj__mut_unlock(struct shmobj__mc *c)
{
    raw_unlock(c, 0);
}

int shmobj__mut_read(struct shmobj__mc *c, int (*reader)(struct shmobj__mc *, void *),
                     void *arg)
{
    struct shmobj__mut *m = c->m;
    for (unsigned t = 0; t < MUT_READ_TRIES; t++) {
        uint64_t s = atomic_load_explicit(&m->seq, memory_order_acquire);
        if (s & 1) {
            shmobj__cpu_relax();
            continue;
        }
        int rc = reader(c, arg);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&m->seq, memory_order_relaxed) == s)
            return shmobj__obj_live(c->v) ? rc : SHMOBJ_ESTALE;
    }
    /* A writer kept the container changing (or died inside a section):
     * read once under the lock, which repairs what a dead writer left. */
    if (!shmobj__obj_live(c->v))
        return SHMOBJ_ESTALE;
    int rc = shmobj__mut_lock(c);
    if (rc != 0)
        return rc;
    rc = reader(c, arg);
    shmobj__mut_unlock(c);
    return rc;
}

int shmobj__mut_block(struct shmobj__space *sp, shmobj__ref ref, uint64_t need,
                      uint64_t *off, uint64_t *usable)
{
    void *p;
    int rc = sp->ops->check(sp, ref, usable);
    if (rc != 0)
        return rc;
    uint64_t o = shmobj__ref_off(ref);
    if (!shmobj__aligned(o, 16) || *usable < need)
        return SHMOBJ_ECORRUPT;
    rc = shmobj__space_at(sp, o, need, &p);
    if (rc != 0)
        return rc;
    *off = o;
    return 0;
}

int shmobj__mut_block_fast(struct shmobj__space *sp, shmobj__ref ref, uint64_t need,
                           uint64_t *off)
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

int shmobj__mut_item_make(struct shmobj__space *sp, const shmobj_value *val,
                          struct shmobj__mitem *it)
{
    it->child = 0;
    if (val->reserved != 0)
        return SHMOBJ_EINVAL;
    switch (val->type) {
    case SHMOBJ_TYPE_BOOL:
        if (val->v.b != 0 && val->v.b != 1)
            return SHMOBJ_EINVAL;
        it->tag = SHMOBJ__SLOT_BOOL;
        it->payload = (uint64_t)val->v.b;
        return 0;
    case SHMOBJ_TYPE_INT:
    case SHMOBJ_TYPE_UINT:
    case SHMOBJ_TYPE_DOUBLE:
        it->tag = (uint8_t)val->type;
        memcpy(&it->payload, &val->v, sizeof it->payload); /* i, u, d share bytes */
        return 0;
    case SHMOBJ_TYPE_NULL:
        it->tag = SHMOBJ__SLOT_OBJ;
        it->payload = 0;
        return 0;
    default: {
        /* Any other kind, today's and those added later, is the builder's:
         * a block of its own. */
        shmobj__ref r;
        int rc = shmobj__obj_put(sp, val, &r);
        if (rc != 0)
            return rc;
        it->tag = SHMOBJ__SLOT_OBJ;
        it->payload = r;
        it->child = r;
        return 0;
    }
    }
}

void shmobj__mut_child_free(struct shmobj__space *sp, shmobj__ref child)
{
    uint64_t budget = shmobj__work_budget(sp);
    (void)shmobj__mut_child_free_in(sp, child, 1, &budget);
}

int shmobj__mut_child_free_in(struct shmobj__space *sp, shmobj__ref child, int depth,
                              uint64_t *budget)
{
    if (child == 0)
        return 0;
    if (*budget == 0)
        return SHMOBJ_ECORRUPT;
    --*budget;
    return shmobj__free_tree(sp, child, 0, depth + 1, budget);
}

/* ---- the list ------------------------------------------------------------ */

static inline _Atomic uint64_t *list_dir(struct shmobj__mut *m)
{
    return (_Atomic uint64_t *)(void *)((uint8_t *)m + sizeof *m);
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

static int list_slot(struct shmobj__mc *c, uint64_t p, struct lslot *out)
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

/* Is the block `ref` what item `at` (below len) holds? */
static int list_holds(struct shmobj__mc *c, uint64_t at, shmobj__ref ref)
{
    struct lslot ls;
    if (at >= atomic_load_explicit(&c->m->len, memory_order_relaxed) ||
        list_slot(c, at, &ls) != 0)
        return 0;
    return slot_child(ls.s) == ref;
}

/* The recorded blocks after a put (append, set, insert) at `at`: kept
 * when the item holds them, freed otherwise. */
static void list_settle(struct shmobj__mc *c, uint64_t at)
{
    struct shmobj__mut *m = c->m;
    shmobj__ref sp_ = atomic_load_explicit(&m->spare, memory_order_relaxed);
    shmobj__ref rt = atomic_load_explicit(&m->retired, memory_order_relaxed);
    if (sp_ != 0 && !list_holds(c, at, sp_))
        shmobj__mut_child_free(c->sp, sp_);
    if (rt != 0 && !list_holds(c, at, rt))
        shmobj__mut_child_free(c->sp, rt);
    atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
    atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
}

/* Roll an insert forward from its progress: items [at, old_len) move up
 * by one (from the top, each step a slot copied and then progress moved
 * down), the new item goes to at, len becomes old_len + 1. */
static int list_insert_finish(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    uint64_t at = atomic_load_explicit(&m->at, memory_order_relaxed);
    uint64_t n = atomic_load_explicit(&m->old_len, memory_order_relaxed);
    uint64_t p = atomic_load_explicit(&m->progress, memory_order_relaxed);
    struct lslot to, from;
    if (at > n || p > n || p < at)
        return SHMOBJ_ECORRUPT;
    for (; p > at; p--) {
        int rc = list_slot(c, p, &to);
        if (rc == 0)
            rc = list_slot(c, p - 1, &from);
        if (rc != 0)
            return rc;
        slot_copy(to.s, from.s);
        atomic_store_explicit(&m->progress, p - 1, memory_order_relaxed);
    }
    int rc = list_slot(c, at, &to);
    if (rc != 0)
        return rc;
    shmobj__mut_slot_put(to.s,
                         (uint8_t)atomic_load_explicit(&m->item_tag, memory_order_relaxed), 0,
                         atomic_load_explicit(&m->item_payload, memory_order_relaxed));
    atomic_store_explicit(&m->len, n + 1, memory_order_relaxed);
    atomic_store_explicit(&m->count, n + 1, memory_order_relaxed);
    return 0;
}

/* Roll a removal forward: items (at, old_len) move down by one, len
 * becomes old_len - 1. */
static int list_remove_finish(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    uint64_t at = atomic_load_explicit(&m->at, memory_order_relaxed);
    uint64_t n = atomic_load_explicit(&m->old_len, memory_order_relaxed);
    uint64_t p = atomic_load_explicit(&m->progress, memory_order_relaxed);
    struct lslot to, from;
    if (at >= n || p < at || p >= n)
        return SHMOBJ_ECORRUPT;
    for (; p + 1 < n; p++) {
        int rc = list_slot(c, p, &to);
        if (rc == 0)
            rc = list_slot(c, p + 1, &from);
        if (rc != 0)
            return rc;
        slot_copy(to.s, from.s);
        atomic_store_explicit(&m->progress, p + 1, memory_order_relaxed);
    }
    atomic_store_explicit(&m->len, n - 1, memory_order_relaxed);
    atomic_store_explicit(&m->count, n - 1, memory_order_relaxed);
    return 0;
}

/* Free the children of items [0, progress) of a cleared list, from the
 * top, progress following. */
static int list_clear_finish(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    uint64_t p = atomic_load_explicit(&m->progress, memory_order_relaxed);
    for (; p > 0; p--) {
        struct lslot ls;
        int rc = list_slot(c, p - 1, &ls);
        if (rc != 0)
            return rc;
        shmobj__mut_child_free(c->sp, slot_child(ls.s));
        atomic_store_explicit(&m->progress, p - 1, memory_order_relaxed);
    }
    return 0;
}

static int list_repair(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    uint64_t op = atomic_load_explicit(&m->op, memory_order_relaxed);
    uint64_t len = atomic_load_explicit(&m->len, memory_order_relaxed);
    uint64_t at = atomic_load_explicit(&m->at, memory_order_relaxed);
    int rc = 0;
    switch (op) {
    case SHMOBJ__MUT_OP_NONE:
        break;
    case SHMOBJ__MUT_OP_CHUNK: {
        shmobj__ref s = atomic_load_explicit(&m->spare, memory_order_relaxed);
        if (at >= SHMOBJ__MLIST_CHUNKS)
            return SHMOBJ_ECORRUPT;
        if (s != 0 && atomic_load_explicit(&list_dir(m)[at], memory_order_relaxed) != s)
            (void)c->sp->ops->free(c->sp, s);
        atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
        break;
    }
    case SHMOBJ__MUT_OP_PUT:
        list_settle(c, at);
        break;
    case SHMOBJ__MUT_OP_INSERT:
        if (len == atomic_load_explicit(&m->old_len, memory_order_relaxed))
            rc = list_insert_finish(c);
        if (rc == 0)
            list_settle(c, at);
        break;
    case SHMOBJ__MUT_OP_REMOVE: {
        if (len == atomic_load_explicit(&m->old_len, memory_order_relaxed))
            rc = list_remove_finish(c);
        if (rc != 0)
            return rc;
        /* the item removed is nowhere now: its child goes (a pop's caller
         * died before it was handed over) */
        shmobj__mut_child_free(c->sp, atomic_load_explicit(&m->retired, memory_order_relaxed));
        atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
        break;
    }
    case SHMOBJ__MUT_OP_CLEAR:
        atomic_store_explicit(&m->len, 0, memory_order_relaxed);
        atomic_store_explicit(&m->count, 0, memory_order_relaxed);
        rc = list_clear_finish(c);
        break;
    default:
        return SHMOBJ_ECORRUPT;
    }
    if (rc != 0)
        return rc;
    /* A count that disagrees with len is damage a repair can settle. */
    atomic_store_explicit(&m->count, atomic_load_explicit(&m->len, memory_order_relaxed),
                          memory_order_relaxed);
    return 0;
}

/* Make sure the chunk holding item p exists (lock held). */
static int list_reserve(struct shmobj__mc *c, uint64_t p)
{
    struct shmobj__mut *m = c->m;
    uint64_t w;
    unsigned k = chunk_of(p, &w);
    if (k >= SHMOBJ__MLIST_CHUNKS)
        return SHMOBJ_ENOMEM;
    if (atomic_load_explicit(&list_dir(m)[k], memory_order_relaxed) != 0)
        return 0;
    shmobj__ref r;
    atomic_store_explicit(&m->at, k, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_CHUNK, memory_order_relaxed);
    int rc = c->sp->ops->alloc(c->sp, chunk_bytes(k), 16, &r);
    if (rc == 0) {
        atomic_store_explicit(&m->spare, r, memory_order_relaxed);
        /* beyond len: no reader looks at it before a later release of len */
        atomic_store_explicit(&list_dir(m)[k], r, memory_order_release);
        atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    return rc;
}

/* A writer's call on a list: open, make the item, lock. On success the
 * caller holds the lock. */
static int list_begin(const shmobj_view *list, const shmobj_value *val,
                      struct shmobj__mc *c, struct shmobj__mitem *it)
{
    int rc = shmobj__mut_open(list, 1u << SHMOBJ_TYPE_MLIST, c);
    if (rc != 0)
        return rc;
    if (val != NULL) {
        /* built before the lock is taken: the lock is held for the slot
         * stores only */
        rc = shmobj__mut_item_make(c->sp, val, it);
        if (rc != 0)
            return rc;
    }
    rc = shmobj__mut_lock(c);
    if (rc != 0 && val != NULL)
        shmobj__mut_child_free(c->sp, it->child);
    return rc;
}

static int list_put_new(struct shmobj__mc *c, uint64_t i, const struct shmobj__mitem *it)
{
    struct shmobj__mut *m = c->m;
    uint64_t n = atomic_load_explicit(&m->len, memory_order_relaxed);
    struct lslot ls;
    if (i > n)
        return SHMOBJ_ERANGE;
    if (n >= (UINT64_C(1) << 44))
        return SHMOBJ_ENOMEM;
    int rc = list_reserve(c, n);
    if (rc == 0)
        rc = list_slot(c, n, &ls);
    if (rc != 0)
        return rc;
    atomic_store_explicit(&m->at, i, memory_order_relaxed);
    atomic_store_explicit(&m->spare, it->child, memory_order_relaxed);
    if (i == n) {
        /* append: written past len, published by len's release store */
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_PUT, memory_order_relaxed);
        shmobj__mut_slot_put(ls.s, it->tag, 0, it->payload);
        atomic_store_explicit(&m->len, n + 1, memory_order_release);
        atomic_store_explicit(&m->count, n + 1, memory_order_relaxed);
    } else {
        atomic_store_explicit(&m->old_len, n, memory_order_relaxed);
        atomic_store_explicit(&m->progress, n, memory_order_relaxed);
        atomic_store_explicit(&m->item_tag, it->tag, memory_order_relaxed);
        atomic_store_explicit(&m->item_payload, it->payload, memory_order_relaxed);
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_INSERT, memory_order_relaxed);
        shmobj__mut_wbegin(m);
        rc = list_insert_finish(c);
        shmobj__mut_wend(m);
        if (rc != 0)
            return rc;
    }
    atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    return 0;
}

static int list_insert_at(const shmobj_view *list, int append, size_t i,
                          const shmobj_value *val)
{
    struct shmobj__mc c;
    struct shmobj__mitem it;
    if (val == NULL)
        return list == NULL ? SHMOBJ_EINVAL : SHMOBJ_EINVAL;
    int rc = list_begin(list, val, &c, &it);
    if (rc != 0)
        return rc;
    uint64_t at = append ? atomic_load_explicit(&c.m->len, memory_order_relaxed) : i;
    rc = list_put_new(&c, at, &it);
    shmobj__mut_unlock(&c);
    if (rc != 0)
        shmobj__mut_child_free(c.sp, it.child);
    return rc;
}

int shmobj_mlist_append(const shmobj_view *list, const shmobj_value *val)
{
    return list_insert_at(list, 1, 0, val);
}

int shmobj_mlist_insert(const shmobj_view *list, size_t i, const shmobj_value *val)
{
    return list_insert_at(list, 0, i, val);
}

int shmobj_mlist_set(const shmobj_view *list, size_t i, const shmobj_value *val)
{
    struct shmobj__mc c;
    struct shmobj__mitem it;
    struct lslot ls;
    if (val == NULL)
        return SHMOBJ_EINVAL;
    int rc = list_begin(list, val, &c, &it);
    if (rc != 0)
        return rc;
    struct shmobj__mut *m = c.m;
    if (i >= atomic_load_explicit(&m->len, memory_order_relaxed))
        rc = SHMOBJ_ERANGE;
    else
        rc = list_slot(&c, i, &ls);
    if (rc == 0) {
        atomic_store_explicit(&m->at, i, memory_order_relaxed);
        atomic_store_explicit(&m->spare, it.child, memory_order_relaxed);
        shmobj__ref old = slot_child(ls.s);
        atomic_store_explicit(&m->retired, old, memory_order_relaxed);
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_PUT, memory_order_relaxed);
        shmobj__mut_wbegin(m);
        shmobj__mut_slot_put(ls.s, it.tag, 0, it.payload);
        shmobj__mut_wend(m);
        atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
        shmobj__mut_child_free(c.sp, old);
        atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    }
    shmobj__mut_unlock(&c);
    if (rc != 0)
        shmobj__mut_child_free(c.sp, it.child);
    return rc;
}

/* Remove item i (lock held); its child is handed to *child. */
static int list_remove(struct shmobj__mc *c, uint64_t i, shmobj__ref *child,
                       struct shmobj__mitem *was)
{
    struct shmobj__mut *m = c->m;
    uint64_t n = atomic_load_explicit(&m->len, memory_order_relaxed);
    struct lslot ls;
    if (i >= n)
        return SHMOBJ_ERANGE;
    int rc = list_slot(c, i, &ls);
    if (rc != 0)
        return rc;
    was->tag = ls.s->tag;
    was->payload = atomic_load_explicit(&ls.s->payload, memory_order_relaxed);
    was->child = slot_child(ls.s);
    *child = was->child;
    atomic_store_explicit(&m->at, i, memory_order_relaxed);
    atomic_store_explicit(&m->old_len, n, memory_order_relaxed);
    atomic_store_explicit(&m->progress, i, memory_order_relaxed);
    atomic_store_explicit(&m->retired, was->child, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_REMOVE, memory_order_relaxed);
    shmobj__mut_wbegin(m);
    rc = list_remove_finish(c);
    shmobj__mut_wend(m);
    return rc;
}

static void list_remove_done(struct shmobj__mc *c)
{
    atomic_store_explicit(&c->m->retired, 0, memory_order_relaxed);
    atomic_store_explicit(&c->m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
}

int shmobj_mlist_delete(const shmobj_view *list, size_t i)
{
    struct shmobj__mc c;
    struct shmobj__mitem was;
    shmobj__ref child = 0;
    int rc = list_begin(list, NULL, &c, NULL);
    if (rc != 0)
        return rc;
    rc = list_remove(&c, i, &child, &was);
    if (rc == 0) {
        shmobj__mut_child_free(c.sp, child);
        list_remove_done(&c);
    }
    shmobj__mut_unlock(&c);
    return rc;
}

int shmobj_mlist_pop(const shmobj_view *list, int64_t i, shmobj_ref *out)
{
    struct shmobj__mc c;
    struct shmobj__mitem was;
    shmobj__ref child = 0, box = 0;
    struct lslot ls;
    int rc = list_begin(list, NULL, &c, NULL);
    if (rc != 0)
        return rc;
    uint64_t n = atomic_load_explicit(&c.m->len, memory_order_relaxed), at;
    if (i < 0 ? (uint64_t)-(i + 1) >= n : (uint64_t)i >= n) {
        shmobj__mut_unlock(&c);
        return SHMOBJ_ERANGE;
    }
    at = i < 0 ? n - (uint64_t)-(i + 1) - 1 : (uint64_t)i;
    rc = list_slot(&c, at, &ls);
    if (rc == 0 && out != NULL && slot_child(ls.s) == 0) {
        /* a scalar or null goes to the caller in a block of its own, made
         * before anything changes (ENOMEM leaves the list as it was) */
        shmobj_value v = {.type = ls.s->tag == SHMOBJ__SLOT_OBJ ? SHMOBJ_TYPE_NULL : ls.s->tag};
        uint64_t pl = atomic_load_explicit(&ls.s->payload, memory_order_relaxed);
        if (v.type == SHMOBJ_TYPE_BOOL)
            v.v.b = pl != 0;
        else
            memcpy(&v.v, &pl, sizeof pl);
        rc = v.type <= SHMOBJ_TYPE_DOUBLE ? shmobj__obj_put(c.sp, &v, &box) : SHMOBJ_ECORRUPT;
    }
    if (rc == 0)
        rc = list_remove(&c, at, &child, &was);
    if (rc == 0) {
        if (out == NULL)
            shmobj__mut_child_free(c.sp, child);
        else
            *out = child != 0 ? child : box;
        list_remove_done(&c);
    } else if (box != 0) {
        (void)c.sp->ops->free(c.sp, box);
    }
    shmobj__mut_unlock(&c);
    return rc;
}

static int list_clear(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    uint64_t n = atomic_load_explicit(&m->len, memory_order_relaxed);
    atomic_store_explicit(&m->old_len, n, memory_order_relaxed);
    atomic_store_explicit(&m->progress, n, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_CLEAR, memory_order_relaxed);
    shmobj__mut_wbegin(m);
    atomic_store_explicit(&m->len, 0, memory_order_relaxed);
    atomic_store_explicit(&m->count, 0, memory_order_relaxed);
    shmobj__mut_wend(m);
    int rc = list_clear_finish(c);
    if (rc == 0)
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    return rc;
}

int shmobj__mdict_clear(struct shmobj__mc *c);

int shmobj_mut_clear(const shmobj_view *cv)
{
    struct shmobj__mc c;
    int rc = shmobj__mut_open(cv, 1u << SHMOBJ_TYPE_MLIST | 1u << SHMOBJ_TYPE_MDICT |
                                      1u << SHMOBJ_TYPE_MSET, &c);
    if (rc != 0)
        return rc;
    rc = shmobj__mut_lock(&c);
    if (rc != 0)
        return rc;
    rc = c.type == SHMOBJ_TYPE_MLIST ? list_clear(&c) : shmobj__mdict_clear(&c);
    shmobj__mut_unlock(&c);
    return rc;
}

/* ---- list reads ------------------------------------------------------------ */

struct lget {
    uint64_t i;
    shmobj_view *item; /* a view to fill, or */
    int64_t *out;      /* an int to read */
};

static int list_get_read(struct shmobj__mc *c, void *arg)
{
    struct lget *g = arg;
    struct lslot ls;
    if (g->i >= atomic_load_explicit(&c->m->len, memory_order_acquire))
        return SHMOBJ_ERANGE;
    int rc = list_slot(c, g->i, &ls);
    if (rc != 0)
        return rc;
    if (g->out != NULL) {
        uint8_t tag = ls.s->tag;
        uint64_t pl = atomic_load_explicit(&ls.s->payload, memory_order_relaxed);
        if (tag != SHMOBJ__SLOT_INT)
            return SHMOBJ_ETYPE;
        *g->out = (int64_t)pl;
        return 0;
    }
    rc = shmobj__view_slot(c->sp, shmobj__off_of(c->sp, ls.s), ls.blk, ls.blen, ls.gen, 1,
                           g->item);
    g->item->flags |= SHMOBJ__VIEW_MUT;
    return rc;
}

int shmobj_mlist_get(const shmobj_view *list, size_t i, shmobj_view *item)
{
    struct shmobj__mc c;
    if (item == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__mut_open(list, 1u << SHMOBJ_TYPE_MLIST, &c);
    if (rc != 0)
        return rc;
    struct lget g = {i, item, NULL};
    return shmobj__mut_read(&c, list_get_read, &g);
}

int shmobj_mlist_get_int(const shmobj_view *list, size_t i, int64_t *out)
{
    struct shmobj__mc c;
    int64_t x;
    if (out == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__mut_open(list, 1u << SHMOBJ_TYPE_MLIST, &c);
    if (rc != 0)
        return rc;
    struct lget g = {i, NULL, &x};
    rc = shmobj__mut_read(&c, list_get_read, &g);
    if (rc == 0)
        *out = x;
    return rc;
}

/* ---- what the rest of the layer calls ---------------------------------- */

#define MUT_ALL (1u << SHMOBJ_TYPE_MLIST | 1u << SHMOBJ_TYPE_MDICT | 1u << SHMOBJ_TYPE_MSET)

/* The length, checked: a list's last item lies in a chunk, a dict's or
 * set's count is at most its places in use. */
static int len_read(struct shmobj__mc *c, void *arg)
{
    uint64_t n = atomic_load_explicit(&c->m->count, memory_order_acquire);
    struct lslot ls;
    if (c->type != SHMOBJ_TYPE_MLIST) {
        int rc = shmobj__mdict_places(c, &n);
        if (rc != 0)
            return rc;
    } else {
        /* len is what an append publishes (count follows it, outside any
         * section) */
        n = atomic_load_explicit(&c->m->len, memory_order_acquire);
        if (n > 0 && list_slot(c, n - 1, &ls) != 0)
            return SHMOBJ_ECORRUPT;
    }
    *(uint64_t *)arg = n;
    return 0;
}

int shmobj__mut_len(const shmobj_view *v, size_t *len)
{
    struct shmobj__mc c;
    uint64_t n = 0;
    int rc = shmobj__mut_open(v, MUT_ALL, &c);
    if (rc == 0)
        rc = shmobj__mut_read(&c, len_read, &n);
    if (rc == 0)
        *len = (size_t)n;
    return rc;
}

int shmobj__mut_item(const shmobj_view *v, size_t i, shmobj_view *item)
{
    if (v->type == SHMOBJ_TYPE_MLIST)
        return shmobj_mlist_get(v, i, item);
    return shmobj__mdict_nth(v, i, v->type == SHMOBJ_TYPE_MSET, item);
}

int shmobj__mut_key(const shmobj_view *v, size_t i, shmobj_view *key)
{
    if (v->type == SHMOBJ_TYPE_MLIST)
        return SHMOBJ_ETYPE;
    return shmobj__mdict_nth(v, i, 1, key);
}

int shmobj__mut_free(struct shmobj__space *sp, const shmobj_view *v, int depth,
                     uint64_t *budget)
{
    struct shmobj__mc c;
    if (depth >= SHMOBJ_OBJ_MAXDEPTH)
        return SHMOBJ_ECORRUPT;
    /* the walk's views name no segment (shmobj__view_follow) */
    shmobj_view vv = *v;
    vv.seg = (shmobj_segment *)sp;
    int rc = shmobj__mut_open(&vv, MUT_ALL, &c);
    if (rc != 0)
        return rc;
    if (c.type != SHMOBJ_TYPE_MLIST)
        return shmobj__mdict_free(sp, &vv, depth, budget);
    /* Nobody may use a container being freed (shmobj_obj_free()): no lock.
     * Children first, then the chunks; what is damaged is skipped. */
    uint64_t n = atomic_load_explicit(&c.m->len, memory_order_relaxed);
    int first = 0;
    for (unsigned k = 0; k < SHMOBJ__MLIST_CHUNKS; k++) {
        uint64_t ref = atomic_load_explicit(&list_dir(c.m)[k], memory_order_relaxed);
        uint64_t start = SHMOBJ__MLIST_CHUNK0 * ((UINT64_C(1) << k) - 1), off, usable;
        if (ref == 0)
            continue;
        if (shmobj__mut_block(sp, ref, chunk_bytes(k), &off, &usable) != 0) {
            first = first ? first : SHMOBJ_ECORRUPT;
            continue;
        }
        for (uint64_t w = 0; w < ((uint64_t)SHMOBJ__MLIST_CHUNK0 << k) && start + w < n; w++) {
            int r = shmobj__mut_child_free_in(
                sp, slot_child((struct shmobj__slot *)(void *)(sp->base + off + 16 * w)), depth,
                budget);
            if (r != 0 && first == 0)
                first = r;
            if (r == SHMOBJ_ECORRUPT && *budget == 0)
                return r;
        }
        int r = sp->ops->free(sp, ref);
        if (r != 0 && first == 0)
            first = r;
    }
    return first;
}

int shmobj__mut_check(struct shmobj__space *sp, const shmobj_view *v, uint64_t *budget,
                      shmobj__mut_child_fn child, void *ctx)
{
    struct shmobj__mc c;
    shmobj_view vv = *v;
    vv.seg = (shmobj_segment *)sp;
    int rc = shmobj__mut_open(&vv, MUT_ALL, &c);
    if (rc != 0)
        return rc;
    /* A change under way, or left by a dead writer: what readers would
     * meet is the container after the lock's repair, so check that (a
     * repair that fails is damage). */
    if ((atomic_load_explicit(&c.m->seq, memory_order_acquire) & 1) ||
        atomic_load_explicit(&c.m->op, memory_order_relaxed) != SHMOBJ__MUT_OP_NONE) {
        rc = shmobj__mut_lock(&c);
        if (rc != 0)
            return rc == SHMOBJ_EBUSY || rc == SHMOBJ_ETIMEDOUT ? rc : SHMOBJ_ECORRUPT;
        shmobj__mut_unlock(&c);
    }
    if (c.type != SHMOBJ_TYPE_MLIST)
        return shmobj__mdict_check(&c, budget, child, ctx);
    struct shmobj__mut *m = c.m;
    uint64_t n = atomic_load_explicit(&m->len, memory_order_acquire);
    if (atomic_load_explicit(&m->count, memory_order_relaxed) != n ||
        atomic_load_explicit(&m->body, memory_order_relaxed) != 0)
        return SHMOBJ_ECORRUPT;
    /* chunks are live blocks of their size (past the items: allocated
     * capacity), or none */
    for (unsigned k = 0; k < SHMOBJ__MLIST_CHUNKS; k++) {
        uint64_t ref = atomic_load_explicit(&list_dir(m)[k], memory_order_relaxed), off, u;
        if (ref != 0 && shmobj__mut_block(c.sp, ref, chunk_bytes(k), &off, &u) != 0)
            return SHMOBJ_ECORRUPT;
    }
    for (uint64_t p = 0; p < n; p++) {
        struct lslot ls;
        if (*budget == 0)
            return SHMOBJ_ECORRUPT;
        --*budget;
        rc = list_slot(&c, p, &ls);
        if (rc == 0)
            rc = child(ctx, shmobj__off_of(c.sp, ls.s), ls.blk, ls.blen, ls.gen, 0);
        if (rc != 0)
            return rc;
    }
    return 0;
}
