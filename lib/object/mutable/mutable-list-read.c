/* The growable list's reads, its free and its check.
 *
 * Invariants kept here (with the list's protocol, doc/protocols.md, section 3):
 * - Every slot below len is written (len is a published prefix): a slot
 *   below len that is not (tag 0 or a claim) is damage, never a place
 *   being written, so a read never waits for an appender. A read past len
 *   first helps publish what appends wrote there (shmobj__mlist_help()).
 * - Free and check are bounded by the caller's budget; a list's place
 *   costs only its slot's unit. */
#include "mutable-list.h"

#include "cpu.h"
#include "step.h"

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
    if (g->i >= list_len(c->m))
        return SHMOBJ_ERANGE;
    SHMOBJ__STEP("mlist.read.len");
    int rc = list_slot(c, g->i, &ls);
    if (rc != 0)
        return rc;
    uint8_t tag = slot_tag(ls.s);
    if (!tag_written(tag))
        return SHMOBJ_ECORRUPT; /* below len: published */
    if (g->out != NULL) {
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

/* A read of item g->i; past len, once more after helping publish what
 * appends wrote there. */
static int list_get(struct shmobj__mc *c, struct lget *g)
{
    int rc = shmobj__mut_read(c, list_get_read, g);
    if (rc == SHMOBJ_ERANGE &&
        g->i < (atomic_load_explicit(list_res(c->m), memory_order_relaxed) &
                SHMOBJ__MLIST_LEN_MASK)) {
        shmobj__mlist_help(c);
        rc = shmobj__mut_read(c, list_get_read, g);
    }
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
    return list_get(&c, &g);
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
    rc = list_get(&c, &g);
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
    uint64_t n = list_len(c->m);
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
    uint64_t n = list_len(c.m);
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
            if (r == SHMOBJ_ECORRUPT && !shmobj__work_have(sp, budget))
                return r;
        }
        int r = sp->ops->free(sp, ref);
        if (r != 0 && first == 0)
            first = r;
    }
    shmobj__ref apps = atomic_load_explicit(apps_ref(c.m), memory_order_relaxed);
    struct shmobj__mlapps *a = list_apps(&c);
    for (unsigned j = 0; a != NULL && j < SHMOBJ__MLGROW_RECS; j++) {
        /* a chunk a grower that died made and never published (nobody
         * grows a list being freed) */
        shmobj__ref g = atomic_load_explicit(&a->g[j].ref, memory_order_relaxed);
        uint64_t k = atomic_load_explicit(&a->g[j].k, memory_order_relaxed), off;
        if (g != 0 && k < SHMOBJ__MLIST_CHUNKS &&
            atomic_load_explicit(&list_dir(c.m)[k], memory_order_relaxed) != g &&
            list_chunk_fits(sp, g, (unsigned)k, &off) == 0)
            (void)sp->ops->free(sp, g);
    }
    if (apps != 0) {
        int r = sp->ops->free(sp, apps);
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
    if (atomic_load_explicit(&m->body, memory_order_relaxed) != 0)
        return SHMOBJ_ECORRUPT;
    /* the growth block, when there is one, is a live block of its size */
    shmobj__ref apps = atomic_load_explicit(apps_ref(m), memory_order_relaxed);
    if (apps != 0) {
        uint64_t off, u;
        if (shmobj__mut_block(c.sp, apps, sizeof(struct shmobj__mlapps), &off, &u) != 0 ||
            list_apps(&c) == NULL)
            return SHMOBJ_ECORRUPT;
        /* places reserved and not published yet: the list as readers will
         * meet it once they are (live appenders finish, dead ones' places
         * are skipped), settled under the lock */
        uint64_t r = atomic_load_explicit(list_res(m), memory_order_acquire);
        /* ... and a counter left closed: its closer may have died holding
         * the lock, whose repair settles what that closer was doing (a
         * place it claimed at len reads as a null now, not after the next
         * writer's lock). A read-only handle may not lock: it checks the
         * published prefix, which is what its own reads meet. */
        if (!c.sp->readonly &&
            ((r & SHMOBJ__MLIST_CLOSED) || (r & SHMOBJ__MLIST_LEN_MASK) > list_len(m))) {
            rc = shmobj__mlist_lock(&c);
            if (rc != 0)
                return rc == SHMOBJ_EBUSY || rc == SHMOBJ_ETIMEDOUT ? rc : SHMOBJ_ECORRUPT;
            shmobj__mlist_unlock(&c);
        }
    }
    uint64_t n = list_len(m);
    /* chunks are live blocks of their size (past the items: allocated
     * capacity), or none */
    for (unsigned k = 0; k < SHMOBJ__MLIST_CHUNKS; k++) {
        uint64_t ref = atomic_load_explicit(&list_dir(m)[k], memory_order_relaxed), off, u;
        if (ref != 0 && shmobj__mut_block(c.sp, ref, chunk_bytes(k), &off, &u) != 0)
            return SHMOBJ_ECORRUPT;
    }
    for (uint64_t p = 0; p < n; p++) {
        struct lslot ls;
        /* A place is its slot, 16 bytes of a proven chunk, and the child's
         * walk of the slot charges its unit: charging the place too would
         * count 2 units per 16 bytes, and a list filling more than half of
         * the segment would exhaust a budget of a unit per 16 bytes. */
        if (!shmobj__work_have(c.sp, budget))
            return SHMOBJ_ECORRUPT;
        rc = list_slot(&c, p, &ls);
        if (rc == 0 && !tag_written(slot_tag(ls.s)))
            rc = SHMOBJ_ECORRUPT; /* below len: published */
        if (rc == 0)
            rc = child(ctx, shmobj__off_of(c.sp, ls.s), ls.blk, ls.blen, ls.gen, 0);
        if (rc != 0)
            return rc;
    }
    return 0;
}
