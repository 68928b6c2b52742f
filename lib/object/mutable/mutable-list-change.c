/* The growable list's changes under its lock: set, delete, pop and clear,
 * and the taking of the lock itself (the growth block made, the
 * reservations closed). Appends and inserts, with and without the lock,
 * are mutable-list-append.c's; the repair mutable-list-repair.c's. The
 * protocol is in doc/protocols.md, "The growable list". */
#include "mutable-list.h"

#include <string.h>

/* Make the growth block of a list that has none (lock held: no append
 * without the lock was ever made). Slots past len are zeroed first (a
 * dead holder's tag). A block that cannot be had leaves the list to
 * appends under the lock. */
static void list_apps_make(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    uint64_t n = list_len(m);
    shmobj__ref r;
    for (unsigned k = 0; k < SHMOBJ__MLIST_CHUNKS; k++) {
        uint64_t ref = atomic_load_explicit(&list_dir(m)[k], memory_order_relaxed), off;
        uint64_t start = SHMOBJ__MLIST_CHUNK0 * ((UINT64_C(1) << k) - 1);
        uint64_t items = (uint64_t)SHMOBJ__MLIST_CHUNK0 << k;
        if (ref == 0 || start + items <= n)
            continue;
        if (shmobj__mut_block_fast(c->sp, ref, chunk_bytes(k), &off) != 0)
            return; /* damage: the lock's way meets it */
        uint64_t from = n > start ? n - start : 0;
        memset(c->sp->base + off + 16 * from, 0, (size_t)(16 * (items - from)));
    }
    atomic_store_explicit(&m->at, 0, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_CHUNK, memory_order_relaxed);
    if (c->sp->ops->alloc(c->sp, sizeof(struct shmobj__mlapps), 64, &r) == 0) {
        atomic_store_explicit(&m->spare2, r, memory_order_relaxed);
        struct shmobj__mlapps *a =
            (struct shmobj__mlapps *)(void *)(c->sp->base + shmobj__ref_off(r));
        memset(a, 0, sizeof *a);
        a->magic = SHMOBJ__MLIST_MAGIC;
        a->recs = SHMOBJ__MLGROW_RECS;
        /* closed at len, nothing to settle: the holder reopens them at
         * its unlock */
        atomic_store_explicit(&a->closed_r, n | SHMOBJ__MLIST_SETTLED, memory_order_relaxed);
        atomic_store_explicit(list_res(m), n | SHMOBJ__MLIST_CLOSED, memory_order_relaxed);
        shmobj__mut_wbegin(m);
        atomic_store_explicit(apps_ref(m), r, memory_order_release);
        shmobj__mut_wend(m);
        atomic_store_explicit(&m->spare2, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
}

/* Lock a list for a change: the lock, its growth block made, the
 * reservations closed and every reserved place published. */
int shmobj__mlist_lock(struct shmobj__mc *c)
{
    int rc = shmobj__mut_lock(c);
    if (rc != 0)
        return rc;
    if (atomic_load_explicit(apps_ref(c->m), memory_order_relaxed) == 0)
        list_apps_make(c);
    rc = shmobj__mlist_close(c);
    if (rc != 0)
        shmobj__mut_unlock(c);
    return rc;
}

/* A writer's call on a list: open, make the item, lock. On success the
 * caller holds the lock, reservations closed. */
int shmobj__mlist_begin(const shmobj_view *list, const shmobj_value *val,
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
    rc = shmobj__mlist_lock(c);
    if (rc != 0 && val != NULL)
        shmobj__mut_item_drop(c->sp, it);
    return rc;
}

int shmobj_mlist_set(const shmobj_view *list, size_t i, const shmobj_value *val)
{
    if (shmobj__view_writable(list) != 0)
        return SHMOBJ_ERDONLY;
    struct shmobj__mc c;
    struct shmobj__mitem it;
    struct lslot ls;
    if (val == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__mlist_begin(list, val, &c, &it);
    if (rc != 0)
        return rc;
    struct shmobj__mut *m = c.m;
    if (i >= list_len(m))
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
    shmobj__mlist_unlock(&c);
    if (rc != 0)
        shmobj__mut_item_drop(c.sp, &it);
    return rc;
}

/* Remove item i (lock held); its child is handed to *child. */
static int list_remove(struct shmobj__mc *c, uint64_t i, shmobj__ref *child,
                       struct shmobj__mitem *was)
{
    struct shmobj__mut *m = c->m;
    uint64_t n = list_len(m);
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
    SHMOBJ__STEP("mlist.delete.intent");
    shmobj__mut_wbegin(m);
    rc = shmobj__mlist_move_finish(c, 0);
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
    if (shmobj__view_writable(list) != 0)
        return SHMOBJ_ERDONLY;
    struct shmobj__mc c;
    struct shmobj__mitem was;
    shmobj__ref child = 0;
    int rc = shmobj__mlist_begin(list, NULL, &c, NULL);
    if (rc != 0)
        return rc;
    rc = list_remove(&c, i, &child, &was);
    if (rc == 0) {
        shmobj__mut_child_free(c.sp, child);
        list_remove_done(&c);
    }
    shmobj__mlist_unlock(&c);
    return rc;
}

int shmobj_mlist_pop(const shmobj_view *list, int64_t i, shmobj_ref *out)
{
    if (shmobj__view_writable(list) != 0)
        return SHMOBJ_ERDONLY;
    struct shmobj__mc c;
    struct shmobj__mitem was;
    shmobj__ref child = 0, box = 0;
    struct lslot ls;
    int rc = shmobj__mlist_begin(list, NULL, &c, NULL);
    if (rc != 0)
        return rc;
    uint64_t n = list_len(c.m), at;
    if (i < 0 ? (uint64_t)-(i + 1) >= n : (uint64_t)i >= n) {
        shmobj__mlist_unlock(&c);
        return SHMOBJ_ERANGE;
    }
    at = i < 0 ? n - (uint64_t)-(i + 1) - 1 : (uint64_t)i;
    rc = list_slot(&c, at, &ls);
    if (rc == 0 && out != NULL && slot_child(ls.s) == 0) {
        /* a scalar, null or link goes to the caller in a block of its own,
         * made before anything changes (ENOMEM leaves the list as it was) */
        shmobj_value v;
        rc = shmobj__mut_item_value(ls.s->tag,
                                    atomic_load_explicit(&ls.s->payload, memory_order_relaxed), &v);
        if (rc == 0)
            rc = shmobj__obj_put(c.sp, &v, &box);
    }
    if (rc == 0)
        rc = list_remove(&c, at, &child, &was);
    if (rc == 0) {
        if (out == NULL)
            shmobj__mut_child_free(c.sp, child);
        else
            *out = child != 0 ? child : box;
        /* an adopted child is the caller's again: its mark cleared */
        if (out != NULL && child != 0)
            shmobj__mut_child_handover(c.sp, child);
        list_remove_done(&c);
    } else if (box != 0) {
        (void)c.sp->ops->free(c.sp, box);
    }
    shmobj__mlist_unlock(&c);
    return rc;
}

static int mlist_clear_closed(struct shmobj__mc *c);

int shmobj__mlist_clear(struct shmobj__mc *c)
{
    int rc = shmobj__mlist_close(c);
    if (rc != 0)
        return rc;
    rc = mlist_clear_closed(c);
    shmobj__mlist_open(c);
    return rc;
}

static int mlist_clear_closed(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    uint64_t n = list_len(m);
    atomic_store_explicit(&m->old_len, n, memory_order_relaxed);
    atomic_store_explicit(&m->progress, n, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_CLEAR, memory_order_relaxed);
    shmobj__mut_wbegin(m);
    list_len_put(m, 0);
    shmobj__mut_wend(m);
    int rc = shmobj__mlist_clear_finish(c);
    if (rc == 0)
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    return rc;
}

