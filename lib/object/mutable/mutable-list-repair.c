/* The growable list's repair after a lock holder's death, and the moves
 * and frees it shares with the locked changes (mutable-list-change.c):
 * an insert's or delete's moves rolled forward, a clear's frees finished,
 * every recorded block freed unless the place it was for holds it. The
 * protocol, its intents and what a death at each step leaves are in
 * doc/protocols.md, "The growable list". */
#include "mutable-list.h"

/* Is the block `ref` what item `at` (below len) holds? */
static int list_holds(struct shmobj__mc *c, uint64_t at, shmobj__ref ref)
{
    struct lslot ls;
    if (at >= list_len(c->m) ||
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
        SHMOBJ__STEP("mlist.move.step");
    }
    return 0;
}

/* Roll an insert or a removal forward from its progress: for an insert,
 * items [at, old_len) move up by one and the new item goes to at; for a
 * removal, items (at, old_len) move down by one; len becomes old_len + 1
 * or old_len - 1. */
int shmobj__mlist_move_finish(struct shmobj__mc *c, int insert)
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
    if (rc == 0 && !insert) {
        /* the place given up goes back to tag 0 (slots past len) */
        rc = list_slot(c, n - 1, &to);
        if (rc == 0)
            slot_zero(to.s);
    }
    if (rc != 0)
        return rc;
    n = insert ? n + 1 : n - 1;
    list_len_put(m, n);
    return 0;
}

/* Free the children of items [0, progress) of a cleared list and zero
 * their slots, from the top, progress following. */
int shmobj__mlist_clear_finish(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    uint64_t p = atomic_load_explicit(&m->progress, memory_order_relaxed);
    for (; p > 0; p--) {
        struct lslot ls;
        int rc = list_slot(c, p - 1, &ls);
        if (rc != 0)
            return rc;
        shmobj__mut_child_free(c->sp, slot_child(ls.s));
        slot_zero(ls.s);
        atomic_store_explicit(&m->progress, p - 1, memory_order_relaxed);
    }
    return 0;
}

int shmobj__mlist_repair(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    /* appends without the lock over, and dead appenders' places settled,
     * before anything moves */
    int rc = shmobj__mlist_close(c);
    if (rc != 0)
        return rc;
    uint64_t op = atomic_load_explicit(&m->op, memory_order_relaxed);
    uint64_t len = list_len(m);
    uint64_t at = atomic_load_explicit(&m->at, memory_order_relaxed);
    struct lslot ls;
    switch (op) {
    case SHMOBJ__MUT_OP_NONE:
        break;
    case SHMOBJ__MUT_OP_CHUNK: {
        shmobj__ref s = atomic_load_explicit(&m->spare, memory_order_relaxed);
        if (at >= SHMOBJ__MLIST_CHUNKS)
            return SHMOBJ_ECORRUPT;
        if (s != 0 && atomic_load_explicit(&list_dir(m)[at], memory_order_relaxed) != s)
            (void)c->sp->ops->free(c->sp, s);
        /* a growth block being made (spare2) */
        s = atomic_load_explicit(&m->spare2, memory_order_relaxed);
        if (s != 0 && atomic_load_explicit(apps_ref(m), memory_order_relaxed) != s)
            (void)c->sp->ops->free(c->sp, s);
        atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
        atomic_store_explicit(&m->spare2, 0, memory_order_relaxed);
        break;
    }
    case SHMOBJ__MUT_OP_PUT:
        /* an append's slot written past len is given up with the rest
         * (below) */
        list_settle(c, at);
        break;
    case SHMOBJ__MUT_OP_INSERT:
        if (len == atomic_load_explicit(&m->old_len, memory_order_relaxed))
            rc = shmobj__mlist_move_finish(c, 1);
        if (rc == 0)
            list_settle(c, at);
        break;
    case SHMOBJ__MUT_OP_REMOVE: {
        if (len == atomic_load_explicit(&m->old_len, memory_order_relaxed))
            rc = shmobj__mlist_move_finish(c, 0);
        if (rc != 0)
            return rc;
        /* the item removed is nowhere now: its child goes (a pop's caller
         * died before it was handed over) */
        shmobj__mut_child_free(c->sp, atomic_load_explicit(&m->retired, memory_order_relaxed));
        atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
        break;
    }
    case SHMOBJ__MUT_OP_CLEAR:
        list_len_put(m, 0);
        rc = shmobj__mlist_clear_finish(c);
        break;
    default:
        return SHMOBJ_ECORRUPT;
    }
    if (rc != 0)
        return rc;
    /* Blocks the op did not free are forgotten: a holder killed between
     * writing them and its op left them where they were (the old child of
     * an item shmobj_mlist_set() had not replaced) or never handed over,
     * and no later intent's repair may free them */
    atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
    atomic_store_explicit(&m->spare2, 0, memory_order_relaxed);
    atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
    /* A holder that died between an append's slot and len's store (with no
     * intent for an item without a child) left a tag at len: published by
     * the next close (shmobj__mlist_close()'s places past its count), or zeroed
     * here when this repair's intent kept the close from it. */
    len = list_len(m);
    if (op != SHMOBJ__MUT_OP_NONE && len < SHMOBJ__MLIST_LEN_MASK &&
        list_slot(c, len, &ls) == 0 && tag_written(ls.s->tag))
        slot_zero(ls.s);
    shmobj__mlist_open(c);
    return 0;
}
