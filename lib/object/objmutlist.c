/* The growable list: chunks, appends, inserts, sets, removals, clears,
 * reads, its repair after a writer's death, its free and its check.
 *
 * Invariants kept here (with those of objmut.c, whose lock, sections and
 * optimistic reads these use):
 * - Chunks never move once published: chunk k holds CHUNK0 << k items, so
 *   growth adds a chunk and copies nothing.
 * - A list append needs no section: the item is written past len and
 *   published by the release store of len.
 * - The repair rolls the moves of an insert or delete forward (each step
 *   copies a slot and then advances progress, so a step repeated is the
 *   same step), finishes a clear's frees, and frees each recorded block
 *   unless the place it was for holds it. */
#include "objmut.h"

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

/* Move items by one place towards end, from progress p: each step copies
 * item p - 1 (up) or p + 1 (down) to p and then moves progress there, so a
 * step repeated after a death is the same step. */
static int list_shift(struct shmobj__mc *c, uint64_t p, uint64_t end, int up)
{
    struct lslot to, from;
    while (p != end) {
        uint64_t src = up ? p - 1 : p + 1;
        int rc = list_slot(c, p, &to);
        if (rc == 0)
            rc = list_slot(c, src, &from);
        if (rc != 0)
            return rc;
        slot_copy(to.s, from.s);
        p = src;
        atomic_store_explicit(&c->m->progress, p, memory_order_relaxed);
    }
    return 0;
}

/* Roll an insert or a removal forward from its progress: for an insert,
 * items [at, old_len) move up by one and the new item goes to at; for a
 * removal, items (at, old_len) move down by one; len becomes old_len + 1
 * or old_len - 1. */
static int list_move_finish(struct shmobj__mc *c, int insert)
{
    struct shmobj__mut *m = c->m;
    uint64_t at = atomic_load_explicit(&m->at, memory_order_relaxed);
    uint64_t n = atomic_load_explicit(&m->old_len, memory_order_relaxed);
    uint64_t p = atomic_load_explicit(&m->progress, memory_order_relaxed);
    struct lslot to;
    if (insert ? at > n || p > n || p < at : at >= n || p < at || p >= n)
        return SHMOBJ_ECORRUPT;
    int rc = list_shift(c, p, insert ? at : n - 1, insert);
    if (rc == 0 && insert) {
        rc = list_slot(c, at, &to);
        if (rc == 0)
            shmobj__mut_slot_put(
                to.s, (uint8_t)atomic_load_explicit(&m->item_tag, memory_order_relaxed), 0,
                atomic_load_explicit(&m->item_payload, memory_order_relaxed));
    }
    if (rc != 0)
        return rc;
    n = insert ? n + 1 : n - 1;
    atomic_store_explicit(&m->len, n, memory_order_relaxed);
    atomic_store_explicit(&m->count, n, memory_order_relaxed);
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

int shmobj__mlist_repair(struct shmobj__mc *c)
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
            rc = list_move_finish(c, 1);
        if (rc == 0)
            list_settle(c, at);
        break;
    case SHMOBJ__MUT_OP_REMOVE: {
        if (len == atomic_load_explicit(&m->old_len, memory_order_relaxed))
            rc = list_move_finish(c, 0);
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
    if (i == n && it->child == 0) {
        /* append of an item with no child: a holder that dies before len's
         * store leaves nothing to free or finish, so no intent (the
         * control block's intent line stays in its cache) */
        shmobj__mut_slot_put(ls.s, it->tag, 0, it->payload);
        atomic_store_explicit(&m->len, n + 1, memory_order_release);
        atomic_store_explicit(&m->count, n + 1, memory_order_relaxed);
        return 0;
    }
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
        rc = list_move_finish(c, 1);
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
    rc = list_move_finish(c, 0);
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

int shmobj__mlist_clear(struct shmobj__mc *c)
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


/* ---- free and check ------------------------------------------------------ */

/* The list's places: len, whose last item must lie in a chunk (inside a
 * read). */
int shmobj__mlist_places(struct shmobj__mc *c, uint64_t *count)
{
    struct lslot ls;
    /* len is what an append publishes (count follows it, outside any
     * section) */
    uint64_t n = atomic_load_explicit(&c->m->len, memory_order_acquire);
    if (n > 0 && list_slot(c, n - 1, &ls) != 0)
        return SHMOBJ_ECORRUPT;
    *count = n;
    return 0;
}

int shmobj__mlist_free(struct shmobj__mc *cp, int depth, uint64_t *budget)
{
    struct shmobj__mc c = *cp;
    struct shmobj__space *sp = c.sp;
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


int shmobj__mlist_check(struct shmobj__mc *cp, uint64_t *budget, shmobj__mut_child_fn child,
                        void *ctx)
{
    struct shmobj__mc c = *cp;
    int rc;
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
