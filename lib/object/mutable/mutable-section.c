/* Mutable containers: the control block's lock, writer sections and
 * optimistic reads, items and their children, and what the rest of the
 * layer calls on any mutable kind (length, items, free, check), which
 * hands each kind to its own file (the list: mutable-list-*.c; dicts and
 * sets: mutable-dict-table.c and the files it names).
 *
 * Invariants kept here:
 * - A container's control block never moves (it is part of the object
 *   block the builder wrote); what grows lives in blocks it names.
 * - Only the holder of the container's lock writes it. Before anything a
 *   reader could see half done, the holder opens a writer section (seq
 *   odd) and closes it after (seq even); before anything at all it records
 *   its intent (op, at, progress, old_len, spare, retired), which it
 *   clears last.
 * - Readers read inside shmobj__mut_read(): what they read counts only if
 *   seq was even and unchanged across it. A writer that frees memory does
 *   so inside or after a section, so a reader that read it retries; the
 *   memory stays mapped and every offset is checked, so the read of an old
 *   block never faults.
 * - The next locker after a holder's death (EOWNERDEAD), or after a holder
 *   that left an intent behind, repairs from the intent (the kind's own
 *   repair), then clears the intent and closes a section left open. A
 *   repeated free of a block already freed is refused by the arena's
 *   generation check, so repairs may repeat.
 * - Children (blocks of items that are not scalars) are owned by exactly
 *   one place: a replaced, deleted or cleared item's child is freed once,
 *   a popped one handed over.
 *
 * The protocol step by step, its memory orders and what a stalled or
 * killed process leaves: doc/protocols.md, section 2. */
#include "mutable.h"

#include "cpu.h"

/* Optimistic tries of a read before it takes the lock. */
#define MUT_READ_TRIES 512
/* A lock holder waiting for a lock-free add asks the adder's liveness
 * every MUT_DRAIN_LIVENESS spins, and gives up (SHMOBJ_EBUSY, its
 * section left to the next locker's repair) after MUT_DRAIN_SPINS, some
 * seconds: an add takes well under a microsecond unless its process is
 * descheduled. */
#define MUT_DRAIN_LIVENESS 1024
#define MUT_DRAIN_SPINS (UINT64_C(1) << 26)

static int repair(struct shmobj__mc *c)
{
    /* Inside a section (the dead holder's, or a new one): readers retry
     * across the repair's moves and its rebuilt index, and a dict's adds
     * without the lock are over before it frees or moves anything. */
    if (!(atomic_load_explicit(&c->m->seq, memory_order_relaxed) & 1))
        shmobj__mut_wbegin(c->m);
    int rc = shmobj__mut_adders_drain(c);
    if (rc != 0)
        return rc;
    rc = c->type == SHMOBJ_TYPE_MLIST ? shmobj__mlist_repair(c) : shmobj__mdict_repair(c);
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

/* Clear the adder word if it still holds w, a token that names no add
 * under way: that add did or did not happen, and nobody makes it now. */
static void adder_clear(struct shmobj__mc *c, uint64_t w)
{
    (void)atomic_compare_exchange_strong_explicit(&c->m->adder, &w, 0, memory_order_relaxed,
                                                  memory_order_relaxed);
}

void shmobj__mut_adder_reap(struct shmobj__mc *c)
{
    uint64_t w = atomic_load_explicit(&c->m->adder, memory_order_relaxed);
    if (w != 0 && c->sp->ops->live != NULL && !shmobj__space_token_alive(c->sp, w))
        adder_clear(c, w); /* a dead handle's */
}

int shmobj__mut_adders_drain(struct shmobj__mc *c)
{
    if (c->type != SHMOBJ_TYPE_MDICT || c->sp->ops->live == NULL)
        return 0;
    /* seq is odd: an adder that owns the word now read seq before this
     * fence and may be about to add; any later one sees seq odd */
    atomic_thread_fence(memory_order_seq_cst);
    for (uint64_t i = 0;; i++) {
        uint64_t w = atomic_load_explicit(&c->m->adder, memory_order_acquire);
        if (w == 0)
            return 0;
        if (i % MUT_DRAIN_LIVENESS == MUT_DRAIN_LIVENESS - 1) {
            /* a dead handle's, or our own token with no other thread here
             * to hold it (damage) */
            if (!shmobj__space_token_holder_alive(c->sp, w))
                adder_clear(c, w);
            if (i >= MUT_DRAIN_SPINS)
                return SHMOBJ_EBUSY;
            /* a live adder this slow was descheduled between its find and
             * its atomic: let it run */
            c->sp->ops->live->pause(c->sp);
        }
        shmobj__cpu_relax();
    }
}

/* The lock is taken to change the container (a read takes it only after
 * many failed optimistic tries) and not every change moves seq (an append
 * under the lock publishes by len alone): its watchers are woken after
 * every hold, a read's included (a spurious wake-up, which shmobj/watch.h
 * allows). */
void shmobj__mut_unlock(struct shmobj__mc *c)
{
    raw_unlock(c, 0);
    shmobj__mut_changed(c);
}

/* shmobj__mut_read() for a read-only handle, which may not take the
 * lock: optimistic tries only, giving the processor away between them
 * after the first MUT_READ_TRIES, until MUT_RO_READ_NS has passed with
 * the container always inside a section (a writer stopped or dead in it:
 * only a writer's lock repairs) and then SHMOBJ_EBUSY. */
#define MUT_RO_READ_NS (UINT64_C(10) * 1000000000)

static int read_ro(struct shmobj__mc *c, int (*reader)(struct shmobj__mc *, void *),
                   void *arg)
{
    struct shmobj__mut *m = c->m;
    const struct shmobj__space_live_ops *live = c->sp->ops->live;
    uint64_t deadline = 0;
    for (unsigned t = 0;; t++) {
        uint64_t s = atomic_load_explicit(&m->seq, memory_order_acquire);
        if (!(s & 1)) {
            int rc = reader(c, arg);
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&m->seq, memory_order_relaxed) == s)
                return shmobj__obj_live(c->v) ? rc : SHMOBJ_ESTALE;
        }
        if (t < MUT_READ_TRIES || live == NULL) {
            if (live == NULL && t >= MUT_READ_TRIES)
                return SHMOBJ_EBUSY;
            shmobj__cpu_relax();
            continue;
        }
        if (!shmobj__obj_live(c->v))
            return SHMOBJ_ESTALE;
        uint64_t now = live->now_ns(c->sp);
        if (deadline == 0)
            deadline = now + MUT_RO_READ_NS;
        else if (now >= deadline)
            return SHMOBJ_EBUSY;
        live->pause(c->sp);
    }
}

/* A read-only check's wait for a container no change is under way in:
 * 0, or SHMOBJ_EBUSY after MUT_RO_READ_NS (a writer stopped, or one that
 * died and left its intent for the next writer's repair). */
static int ro_quiet(struct shmobj__mc *c)
{
    const struct shmobj__space_live_ops *live = c->sp->ops->live;
    uint64_t deadline = 0;
    for (unsigned t = 0;; t++) {
        if (!(atomic_load_explicit(&c->m->seq, memory_order_acquire) & 1) &&
            atomic_load_explicit(&c->m->op, memory_order_relaxed) == SHMOBJ__MUT_OP_NONE)
            return 0;
        if (live == NULL)
            return SHMOBJ_EBUSY;
        if (t < MUT_READ_TRIES) {
            shmobj__cpu_relax();
            continue;
        }
        uint64_t now = live->now_ns(c->sp);
        if (deadline == 0)
            deadline = now + MUT_RO_READ_NS;
        else if (now >= deadline)
            return SHMOBJ_EBUSY;
        live->pause(c->sp);
    }
}

int shmobj__mut_read(struct shmobj__mc *c, int (*reader)(struct shmobj__mc *, void *),
                     void *arg)
{
    if (c->sp->readonly)
        return read_ro(c, reader, arg);
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
    *off = o; /* meaningful only on success, like every out-parameter */
    return shmobj__space_at(sp, o, need, &p);
}

int shmobj__mut_item_make(struct shmobj__space *sp, const shmobj_value *val,
                          struct shmobj__mitem *it)
{
    it->child = 0;
    it->adopted = 0;
    if (val->reserved != 0)
        return SHMOBJ_EINVAL;
    switch (val->type) {
    case SHMOBJ_TYPE_LINK:
    case SHMOBJ_TYPE_ADOPT: {
        /* held as a fixed container's slot holds them (value-write.c): a link
         * in a link slot, an adopted object in an object slot naming its
         * block, which is then this item's child */
        int adopt = val->type == SHMOBJ_TYPE_ADOPT;
        int rc = shmobj__ref_take(sp, val->v.ref, adopt);
        if (rc != 0)
            return rc;
        it->tag = adopt ? SHMOBJ__SLOT_OBJ : SHMOBJ__SLOT_LINK;
        it->payload = val->v.ref;
        it->child = adopt ? val->v.ref : 0;
        it->adopted = (uint8_t)adopt;
        return 0;
    }
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

int shmobj__mut_item_value(uint8_t tag, uint64_t payload, shmobj_value *v)
{
    memset(v, 0, sizeof *v);
    switch (tag) {
    case SHMOBJ__SLOT_OBJ:
        if (payload != 0)
            return SHMOBJ_ECORRUPT; /* a child, not an inline item */
        v->type = SHMOBJ_TYPE_NULL;
        return 0;
    case SHMOBJ__SLOT_BOOL:
        v->type = SHMOBJ_TYPE_BOOL;
        v->v.b = payload != 0;
        return 0;
    case SHMOBJ__SLOT_INT:
    case SHMOBJ__SLOT_UINT:
    case SHMOBJ__SLOT_DOUBLE:
        v->type = tag; /* a scalar slot's tag is its kind */
        memcpy(&v->v, &payload, sizeof payload);
        return 0;
    case SHMOBJ__SLOT_LINK:
        v->type = SHMOBJ_TYPE_LINK;
        v->v.ref = payload;
        return 0;
    default:
        return SHMOBJ_ECORRUPT;
    }
}

void shmobj__mut_item_drop(struct shmobj__space *sp, const struct shmobj__mitem *it)
{
    if (it->adopted)
        shmobj__ref_unadopt(sp, it->child);
    else
        shmobj__mut_child_free(sp, it->child);
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
    if (shmobj__work_take(sp, budget, 1) != 0)
        return SHMOBJ_ECORRUPT;
    return shmobj__free_tree(sp, child, 0, depth + 1, budget);
}

int shmobj_mut_clear(const shmobj_view *cv)
{
    if (shmobj__view_writable(cv) != 0)
        return SHMOBJ_ERDONLY;
    struct shmobj__mc c;
    int rc = shmobj__mut_open(cv, 1u << SHMOBJ_TYPE_MLIST | 1u << SHMOBJ_TYPE_MDICT |
                                      1u << SHMOBJ_TYPE_MSET, &c);
    if (rc != 0)
        return rc;
    rc = shmobj__mut_lock(&c);
    if (rc != 0)
        return rc;
    rc = c.type == SHMOBJ_TYPE_MLIST ? shmobj__mlist_clear(&c) : shmobj__mdict_clear(&c);
    shmobj__mut_unlock(&c);
    return rc;
}

/* ---- what the rest of the layer calls ---------------------------------- */

#define MUT_ALL (1u << SHMOBJ_TYPE_MLIST | 1u << SHMOBJ_TYPE_MDICT | 1u << SHMOBJ_TYPE_MSET)

/* The length, checked: a list's last item lies in a chunk, a dict's or
 * set's count is at most its places in use. */
static int len_read(struct shmobj__mc *c, void *arg)
{
    uint64_t n = 0;
    int rc = c->type != SHMOBJ_TYPE_MLIST ? shmobj__mdict_places(c, &n)
                                          : shmobj__mlist_places(c, &n);
    if (rc != 0)
        return rc;
    *(uint64_t *)arg = n;
    return 0;
}

int shmobj__mut_len(const shmobj_view *v, size_t *len)
{
    struct shmobj__mc c;
    uint64_t n = 0;
    int rc = shmobj__mut_open(v, MUT_ALL, &c);
    if (rc == 0 && c.type == SHMOBJ_TYPE_MLIST)
        shmobj__mlist_help(&c); /* what appends wrote past len, published */
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
    return shmobj__mlist_free(&c, depth, budget);
}

/* The check of a read-only handle, which has no lock to take: it waits
 * (bounded) for a change under way to end, checks, and believes a finding
 * of damage only if no change began meanwhile (seq unmoved): a change
 * that ran under the check moves its words as it goes. A container
 * changed under every try gives SHMOBJ_EBUSY, never a false damage. */
static int check_ro(struct shmobj__mc *c, uint64_t *budget, shmobj__mut_child_fn child,
                    void *ctx)
{
    uint64_t b0 = *budget;
    for (unsigned t = 0; t < MUT_READ_TRIES; t++) {
        int rc = ro_quiet(c);
        if (rc != 0)
            return rc;
        uint64_t s = atomic_load_explicit(&c->m->seq, memory_order_acquire);
        rc = c->type != SHMOBJ_TYPE_MLIST ? shmobj__mdict_check(c, budget, child, ctx)
                                          : shmobj__mlist_check(c, budget, child, ctx);
        atomic_thread_fence(memory_order_acquire);
        if (rc == 0 || atomic_load_explicit(&c->m->seq, memory_order_relaxed) == s)
            return rc;
        *budget = b0; /* checked again from the start */
    }
    return SHMOBJ_EBUSY;
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
    if (sp->readonly)
        return check_ro(&c, budget, child, ctx);
    if ((atomic_load_explicit(&c.m->seq, memory_order_acquire) & 1) ||
        atomic_load_explicit(&c.m->op, memory_order_relaxed) != SHMOBJ__MUT_OP_NONE) {
        rc = shmobj__mut_lock(&c);
        if (rc != 0)
            return rc == SHMOBJ_EBUSY || rc == SHMOBJ_ETIMEDOUT ? rc : SHMOBJ_ECORRUPT;
        shmobj__mut_unlock(&c);
    }
    if (c.type != SHMOBJ_TYPE_MLIST)
        return shmobj__mdict_check(&c, budget, child, ctx);
    return shmobj__mlist_check(&c, budget, child, ctx);
}
