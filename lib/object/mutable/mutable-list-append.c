/* The growable list's reservations and appends: the append without the
 * lock (reserve a place, claim its slot, write, publish len), the growth
 * of chunks without the lock, the judging of places that hold len back,
 * the closing and reopening of the reservations by a lock holder, and the
 * put under the lock (append, insert). The changes under the lock are
 * mutable-list-change.c's, the repair mutable-list-repair.c's, the reads
 * mutable-list-read.c's.
 *
 * The protocol, its invariants (len a published prefix that only grows
 * without the lock, with an epoch every lock holder advances; chunks
 * never moved; places settled or skipped, never lost nor written twice;
 * each process's items in its calls' order), the memory orders and what a
 * stalled or killed process leaves at each named step are in
 * doc/protocols.md, section 3, "The growable list". */
#include "mutable-list.h"

#include "cpu.h"
#include "step.h"

/* A closer asks a claimant's liveness every LIST_CLOSE_LIVENESS spins and
 * gives up (SHMOBJ_EBUSY) after LIST_CLOSE_SPINS (some seconds) or
 * LIST_CLOSE_NS (the library's lock bound), whichever comes first: an
 * append takes well under a microsecond unless its process is
 * descheduled, and on a loaded machine each of the yields between spins
 * may last a time slice, so the count alone would bound nothing. */
#define LIST_CLOSE_LIVENESS 1024
#define LIST_CLOSE_SPINS (UINT64_C(1) << 26)
#define LIST_CLOSE_NS (UINT64_C(10000000000))
/* An append whose place is LIST_HOLE_SLACK (or a multiple) past a hole
 * holding len back judges the hole; a reader judges it when it has been
 * stuck LIST_JUDGE_NS since first seen. */
#define LIST_HOLE_SLACK 1024
#define LIST_JUDGE_NS (UINT64_C(20000000))
/* Tries of an append without the lock whose claims failed (its places
 * were skipped while it was descheduled) before it takes the lock. */
#define LIST_CLAIM_TRIES 8
/* A bound of the publish loop and of the places a closer settles past its
 * count (stalled claimants of emptied slots). */
#define LIST_PUBLISH_MAX (UINT64_C(1) << 40)
/* How far appenders run ahead of len (past a place a stalled appender
 * holds) before they take the lock, whose closer settles that place: what
 * is written unpublished stays far below LIST_OUTSTANDING_MAX, the bound
 * a closer accepts before it calls the count damage. */
#define LIST_RUNAHEAD (UINT64_C(1) << 16)
#define LIST_LATE_MAX 64
#define LIST_OUTSTANDING_MAX (UINT64_C(1) << 20)

/* The monotonic clock of a space with live operations (every caller
 * checked they exist). */
static uint64_t list_now_ns(struct shmobj__mc *c)
{
    return c->sp->ops->live->now_ns(c->sp);
}

/* ---- places: reserve, claim, write, publish, skip ------------------------- */

/* The slot of place p, its chunk made (or being made) by whoever needs it
 * first. SHMOBJ_ECORRUPT for a place beyond the directory or whose chunk's
 * predecessor is missing; rc of the growth. */
static int list_grow(struct shmobj__mc *c, struct shmobj__mlapps *a, unsigned k);

static int list_place(struct shmobj__mc *c, struct shmobj__mlapps *a, uint64_t p,
                      struct lslot *ls)
{
    uint64_t w;
    unsigned k = chunk_of(p, &w);
    if (p > SHMOBJ__MLIST_LEN_MASK || k >= SHMOBJ__MLIST_CHUNKS)
        return SHMOBJ_ECORRUPT;
    _Atomic uint64_t *dir = list_dir(c->m);
    if (atomic_load_explicit(&dir[k], memory_order_acquire) == 0) {
        /* chunks are made in order; the one before may be missing still
         * when the appender whose place opened it stalled or died first
         * (every appender makes its place's chunk before it reserves
         * again, so two in a row are missing only past damage or more
         * appends reserved at once than the chunk before holds) */
        unsigned from = k;
        if (k > 0 && atomic_load_explicit(&dir[k - 1], memory_order_acquire) == 0) {
            if (k > 1 && atomic_load_explicit(&dir[k - 2], memory_order_acquire) == 0)
                return SHMOBJ_ECORRUPT;
            from = k - 1;
        }
        if (a == NULL)
            return SHMOBJ_ECORRUPT;
        for (unsigned g = from; g <= k; g++) {
            int rc = list_grow(c, a, g);
            if (rc != 0)
                return rc;
        }
    }
    return list_slot(c, p, ls);
}

/* Is a live grower making the chunk of place n? Its appender's place in
 * that chunk is unclaimed while it does (a chunk of megabytes takes a
 * while to zero), and is not skipped meanwhile. */
static int list_growing(struct shmobj__mc *c, struct shmobj__mlapps *a, uint64_t n)
{
    uint64_t w;
    unsigned k = chunk_of(n, &w);
    for (unsigned j = 0; a != NULL && j < SHMOBJ__MLGROW_RECS; j++) {
        uint64_t t = atomic_load_explicit(&a->g[j].tok, memory_order_acquire);
        if (t != 0 && atomic_load_explicit(&a->g[j].k, memory_order_relaxed) <= k &&
            shmobj__space_token_holder_alive(c->sp, t))
            return 1;
    }
    return 0;
}

/* Skip the place whose slot s held w0 (a dead claimant's claim, or 0 for
 * one unclaimed too long): claim it with our token by a CAS from w0, then
 * give it a null. 1 when it was skipped (by us or anyone: it is written
 * now), 0 when its claimant got it first. */
static int list_skip(struct shmobj__mc *c, struct shmobj__slot *s, uint64_t w0)
{
    uint64_t tok = c->sp->ops->live != NULL ? c->sp->ops->live->token(c->sp) : 0;
    if (tok == 0 ||
        !atomic_compare_exchange_strong_explicit(slot_w0(s), &w0, slot_claim(tok),
                                                 memory_order_seq_cst,
                                                 memory_order_acquire))
        return tag_written((uint8_t)w0);
    SHMOBJ__STEP("mlist.skip.claimed");
    atomic_store_explicit(&s->payload, 0, memory_order_relaxed);
    atomic_store_explicit(slot_w0(s), SHMOBJ__SLOT_OBJ, memory_order_seq_cst);
    return 1;
}

/* Judge the hole holding len back while len's word (epoch and place) is
 * v, its slot s, without waiting: the first sighting records v and the
 * time in the growth block; later ones skip it once its claimant is dead
 * (asked every LIST_JUDGE_NS) or once it stayed unclaimed
 * SHMOBJ__MLIST_UNCLAIMED_NS. The epoch tells a place reused after a
 * removal (a lock holder moved the epoch) from the hole seen there before,
 * which may have been settled long ago. force: judge now (a publisher
 * LIST_HOLE_SLACK past it). */
static void list_judge(struct shmobj__mc *c, struct shmobj__mlapps *a, uint64_t v,
                       struct shmobj__slot *s, int force)
{
    if (c->sp->ops->live == NULL)
        return;
    uint64_t now = list_now_ns(c), n = v & SHMOBJ__MLIST_LEN_MASK;
    if (atomic_load_explicit(&a->stuck_at, memory_order_relaxed) != v + 1) {
        atomic_store_explicit(&a->stuck_ns, now, memory_order_relaxed);
        atomic_store_explicit(&a->stuck_at, v + 1, memory_order_relaxed);
        if (!force)
            return;
    }
    uint64_t since = now - atomic_load_explicit(&a->stuck_ns, memory_order_relaxed);
    uint64_t w0 = atomic_load_explicit(slot_w0(s), memory_order_acquire);
    uint8_t tag = (uint8_t)w0;
    if (tag == SHMOBJ__SLOT_CLAIM && (force || since >= LIST_JUDGE_NS)) {
        if (!shmobj__space_token_holder_alive(c->sp, w0 >> 32))
            (void)list_skip(c, s, w0);
        else
            atomic_store_explicit(&a->stuck_ns, now - since / 2, memory_order_relaxed);
    } else if (tag == 0 && since >= SHMOBJ__MLIST_UNCLAIMED_NS) {
        if (!list_growing(c, a, n))
            (void)list_skip(c, s, 0);
        else
            atomic_store_explicit(&a->stuck_ns, now, memory_order_relaxed);
    }
}

/* Move len over every written slot from where it is (not past the
 * reservations): 0, or 1 when it stopped at a hole (len's word then, epoch
 * and place, in *hole, its slot in *hs). The seq_cst loads pair with the
 * appenders' seq_cst CAS of their tags. */
static int list_publish(struct shmobj__mc *c, uint64_t mine, struct shmobj__slot *ms,
                        uint64_t *hole, struct shmobj__slot **hs)
{
    struct shmobj__mut *m = c->m;
    for (uint64_t i = 0; i < LIST_PUBLISH_MAX; i++) {
        uint64_t v = atomic_load_explicit(&m->len, memory_order_seq_cst);
        uint64_t n = v & SHMOBJ__MLIST_LEN_MASK;
        uint64_t r = atomic_load_explicit(list_res(m), memory_order_relaxed);
        if ((r & SHMOBJ__MLIST_CLOSED) || n >= r)
            return 0; /* a lock holder settles them, or nothing to publish */
        struct lslot ls;
        /* the caller's own place: its slot known (chunks never move), its
         * tag loaded again all the same (a lock holder may have emptied
         * it since) */
        if (n == mine)
            ls.s = ms;
        else if (list_slot(c, n, &ls) != 0)
            return 0; /* its chunk not made yet: nothing written there */
        uint8_t tag = atomic_load_explicit((_Atomic uint8_t *)(void *)&ls.s->tag,
                                           memory_order_seq_cst);
        if (!tag_written(tag)) {
            *hole = v;
            *hs = ls.s;
            return 1;
        }
        SHMOBJ__STEP("mlist.publish.seen");
        (void)atomic_compare_exchange_strong_explicit(&m->len, &v, v + 1, memory_order_seq_cst,
                                                      memory_order_relaxed);
    }
    return 0;
}

void shmobj__mlist_help(struct shmobj__mc *c)
{
    /* A read-only handle may not publish: it reads the published prefix */
    if (c->sp->readonly)
        return;
    struct shmobj__mut *m = c->m;
    uint64_t r = atomic_load_explicit(list_res(m), memory_order_relaxed);
    if ((r & SHMOBJ__MLIST_CLOSED) || list_len(m) >= r)
        return;
    struct shmobj__mlapps *a = list_apps(c);
    uint64_t hole;
    struct shmobj__slot *hs;
    for (int t = 0; a != NULL && t < 2 && list_publish(c, UINT64_MAX, NULL, &hole, &hs) == 1;
         t++)
        list_judge(c, a, hole, hs, 0);
}

/* An append without the lock of a scalar or null (tag, payload): 0 when
 * done, 1 when it must take the lock (no live operations or token, no
 * growth block, the reservations closed, its claims failed), or an
 * error. */
static inline __attribute__((always_inline)) int list_append_free(struct shmobj__mc *c,
                                                                uint8_t tag, uint64_t payload)
{
    const struct shmobj__space_live_ops *live = c->sp->ops->live;
    struct shmobj__mlapps *a;
    if (live == NULL || (a = list_apps(c)) == NULL)
        return 1;
    uint64_t tok = live->token(c->sp);
    if (tok == 0)
        return 1;
    struct shmobj__mut *m = c->m;
    for (unsigned t = 0; t < LIST_CLAIM_TRIES; t++) {
        /* len first: the count read after it is not below it while open */
        uint64_t n0 = list_len(m);
        if (atomic_load_explicit(list_res(m), memory_order_relaxed) - n0 >= LIST_RUNAHEAD)
            return 1; /* far past a stalled place (or closed): the lock waits for it */
        uint64_t p = atomic_fetch_add_explicit(list_res(m), 1, memory_order_seq_cst);
        uint64_t e0 = atomic_load_explicit(&m->len, memory_order_seq_cst) &
                      ~SHMOBJ__MLIST_LEN_MASK;
        SHMOBJ__STEP("mlist.append.reserved");
        if (p & SHMOBJ__MLIST_CLOSED)
            return 1; /* a lock holder holds the list */
        struct lslot ls;
        int rc = list_place(c, a, p, &ls);
        if (rc != 0)
            return rc;
        uint64_t z = 0, cl = slot_claim(tok);
        if (!atomic_compare_exchange_strong_explicit(slot_w0(ls.s), &z, cl, memory_order_acquire,
                                                     memory_order_relaxed))
            continue; /* skipped while we were away: another place */
        if ((atomic_load_explicit(&m->len, memory_order_seq_cst) & ~SHMOBJ__MLIST_LEN_MASK) !=
            e0) {
            /* a lock holder closed the reservations meanwhile and did not
             * wait for this place (it cannot have: it was not claimed), so
             * it skipped it and a removal emptied it again: writing here
             * would put this item after places this process takes next */
            atomic_store_explicit(slot_w0(ls.s), 0, memory_order_release);
            continue;
        }
        SHMOBJ__STEP("mlist.append.claimed");
        atomic_store_explicit(&ls.s->payload, payload, memory_order_relaxed);
        if (!atomic_compare_exchange_strong_explicit(slot_w0(ls.s), &cl, tag,
                                                     memory_order_seq_cst,
                                                     memory_order_relaxed))
            continue; /* judged dead: never for a live handle, but then again */
        SHMOBJ__STEP("mlist.append.written");
        uint64_t hole;
        struct shmobj__slot *hs;
        if (list_publish(c, p, ls.s, &hole, &hs) == 1 &&
            (hole & SHMOBJ__MLIST_LEN_MASK) < p &&
            (p - (hole & SHMOBJ__MLIST_LEN_MASK)) % LIST_HOLE_SLACK == 0)
            list_judge(c, a, hole, hs, 1);
        /* published by us or, past a hole, by the appender before us,
         * which reports it after its own publish */
        shmobj__mut_changed(c);
        return 0;
    }
    return 1;
}

/* ---- growth without the lock ------------------------------------------------ */

static int list_grow(struct shmobj__mc *c, struct shmobj__mlapps *a, unsigned k)
{
    struct shmobj__mut *m = c->m;
    _Atomic uint64_t *dir = &list_dir(m)[k];
    uint64_t tok = c->sp->ops->live != NULL ? c->sp->ops->live->token(c->sp) : 0;
    if (tok == 0)
        return SHMOBJ_ECORRUPT;
    for (uint64_t i = 0; atomic_load_explicit(dir, memory_order_acquire) == 0; i++) {
        for (unsigned j = 0; j < SHMOBJ__MLGROW_RECS; j++) {
            struct shmobj__mlgrow *g = &a->g[j];
            uint64_t z = 0;
            if (!atomic_compare_exchange_strong_explicit(&g->tok, &z, tok, memory_order_acq_rel,
                                                         memory_order_relaxed))
                continue;
            shmobj__ref r = 0;
            uint64_t dirty = 0;
            atomic_store_explicit(&g->k, k, memory_order_relaxed);
            int rc = atomic_load_explicit(dir, memory_order_acquire) != 0
                         ? 0
                         : shmobj__space_alloc_dirty(c->sp, chunk_bytes(k), 16, &r, &dirty);
            if (rc == 0 && r != 0) {
                atomic_store_explicit(&g->ref, r, memory_order_release);
                /* every slot of a new chunk is 0: not reserved, or not written */
                memset(c->sp->base + shmobj__ref_off(r), 0, (size_t)dirty);
                SHMOBJ__STEP("mlist.grow.made");
                uint64_t z2 = 0;
                if (!atomic_compare_exchange_strong_explicit(dir, &z2, r, memory_order_release,
                                                             memory_order_relaxed))
                    (void)c->sp->ops->free(c->sp, r);
                atomic_store_explicit(&g->ref, 0, memory_order_relaxed);
            }
            atomic_store_explicit(&g->tok, 0, memory_order_release);
            return rc;
        }
        /* every record in use: another grower makes it */
        if (i >= LIST_CLOSE_SPINS)
            return SHMOBJ_EBUSY;
        if (i % LIST_CLOSE_LIVENESS == LIST_CLOSE_LIVENESS - 1)
            c->sp->ops->live->pause(c->sp);
        shmobj__cpu_relax();
    }
    return 0;
}

/* A dead grower's record (lock held): its block freed unless published. */
static void list_growers_reap(struct shmobj__mc *c, struct shmobj__mlapps *a)
{
    for (unsigned j = 0; j < SHMOBJ__MLGROW_RECS; j++) {
        struct shmobj__mlgrow *g = &a->g[j];
        uint64_t t = atomic_load_explicit(&g->tok, memory_order_acquire);
        if (t == 0 || c->sp->ops->live == NULL || shmobj__space_token_holder_alive(c->sp, t))
            continue;
        shmobj__ref r = atomic_load_explicit(&g->ref, memory_order_relaxed);
        uint64_t k = atomic_load_explicit(&g->k, memory_order_relaxed);
        uint64_t off;
        /* only a block that fits the chunk it was for (a damaged record
         * is forgotten, not followed) */
        if (r != 0 && k < SHMOBJ__MLIST_CHUNKS &&
            atomic_load_explicit(&list_dir(c->m)[k], memory_order_relaxed) != r &&
            list_chunk_fits(c->sp, r, (unsigned)k, &off) == 0)
            (void)c->sp->ops->free(c->sp, r);
        atomic_store_explicit(&g->ref, 0, memory_order_relaxed);
        (void)atomic_compare_exchange_strong_explicit(&g->tok, &t, 0, memory_order_release,
                                                      memory_order_relaxed);
    }
}

/* ---- the lock: closing and reopening the reservations --------------------- */

/* Reopen the reservations at len (lock held). */
void shmobj__mlist_open(struct shmobj__mc *c)
{
    if (list_apps(c) == NULL)
        return;
    SHMOBJ__STEP("mlist.open.opening");
    atomic_store_explicit(list_res(c->m), list_len(c->m), memory_order_release);
}

void shmobj__mlist_unlock(struct shmobj__mc *c)
{
    shmobj__mlist_open(c);
    shmobj__mut_unlock(c);
}

/* Settle place p (lock held, reservations closed): wait until it is
 * written while its claimant lives, skip it when the claimant is dead or
 * nobody claimed it by *deadline (set at the first unclaimed place). 0,
 * SHMOBJ_EBUSY after some seconds of a live claimant, or an error. */
static int list_settle_place(struct shmobj__mc *c, uint64_t p, uint64_t *deadline)
{
    struct lslot ls;
    int rc = list_place(c, list_apps(c), p, &ls);
    if (rc != 0)
        return rc;
    uint64_t give_up = 0;
    for (uint64_t i = 0;; i++) {
        uint64_t w0 = atomic_load_explicit(slot_w0(ls.s), memory_order_acquire);
        uint8_t tag = (uint8_t)w0;
        if (tag_written(tag))
            return 0;
        /* no writer leaves bytes beside a tag of 0: damage, which no skip
         * (a CAS from 0) could ever settle */
        if (tag == 0 && w0 != 0)
            return SHMOBJ_ECORRUPT;
        if (i % LIST_CLOSE_LIVENESS == LIST_CLOSE_LIVENESS - 1) {
            if (c->sp->ops->live == NULL)
                return SHMOBJ_ECORRUPT;
            uint64_t t = list_now_ns(c);
            if (give_up == 0)
                give_up = t + LIST_CLOSE_NS;
            else if (t >= give_up)
                return SHMOBJ_EBUSY;
            if (tag == SHMOBJ__SLOT_CLAIM &&
                !shmobj__space_token_holder_alive(c->sp, w0 >> 32)) {
                (void)list_skip(c, ls.s, w0);
                continue;
            }
            if (tag == 0) {
                uint64_t now = list_now_ns(c);
                if (*deadline == 0 || list_growing(c, list_apps(c), p))
                    *deadline = now + SHMOBJ__MLIST_UNCLAIMED_NS;
                else if (now >= *deadline) {
                    (void)list_skip(c, ls.s, 0);
                    continue;
                }
            }
            if (i >= LIST_CLOSE_SPINS)
                return SHMOBJ_EBUSY;
            /* a live appender this slow was descheduled: let it run */
            c->sp->ops->live->pause(c->sp);
        }
        shmobj__cpu_relax();
    }
}

/* Close the reservations (lock held): every place reserved settled and
 * published, len at the next epoch, the counter closed until shmobj__mlist_open().
 * 0, SHMOBJ_EBUSY after some seconds of a live claimant (reopened),
 * SHMOBJ_ECORRUPT for a damaged block or counter. */
int shmobj__mlist_close(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    if (atomic_load_explicit(apps_ref(m), memory_order_relaxed) == 0)
        return 0; /* no growth block: appends take the lock */
    struct shmobj__mlapps *a = list_apps(c);
    if (a == NULL)
        return SHMOBJ_ECORRUPT;
    /* The count as it is now, recorded before the counter closes: a closer
     * killed between the close and the exact count's store leaves this
     * one, never an older close's (which, past removals, would name
     * places nobody reserved) */
    uint64_t now = atomic_load_explicit(list_res(m), memory_order_seq_cst);
    if (!(now & SHMOBJ__MLIST_CLOSED))
        atomic_store_explicit(&a->closed_r, now, memory_order_relaxed);
    uint64_t was = atomic_fetch_or_explicit(list_res(m), SHMOBJ__MLIST_CLOSED,
                                            memory_order_seq_cst);
    uint64_t r;
    if (!(was & SHMOBJ__MLIST_CLOSED)) {
        r = was;
        SHMOBJ__STEP("mlist.close.counter_closed");
        atomic_store_explicit(&a->closed_r, r, memory_order_relaxed);
    } else {
        /* a closer died holding it: its count, or len where publishers
         * that read the count before the close moved len past it; len
         * alone when it had settled them all (its removals since then
         * emptied places below its count that nobody holds) */
        r = atomic_load_explicit(&a->closed_r, memory_order_relaxed);
        if ((r & SHMOBJ__MLIST_SETTLED) || r < list_len(m))
            r = list_len(m);
    }
    SHMOBJ__STEP("mlist.close.closed");
    uint64_t n = list_len(m), deadline = 0, w;
    /* outstanding places: LIST_RUNAHEAD past len and one per append
     * under way, far fewer than LIST_OUTSTANDING_MAX */
    if (r < n || r - n > LIST_OUTSTANDING_MAX || r > SHMOBJ__MLIST_LEN_MASK ||
        chunk_of(r - (r > 0), &w) >= SHMOBJ__MLIST_CHUNKS)
        return SHMOBJ_ECORRUPT;
    list_growers_reap(c, a);
    int rc = 0;
    uint64_t p = n;
    /* a place whose chunk is not made yet is made first (its appender may
     * have died before it did): giving such places up instead would let
     * an appender still making the chunk write its item past places its
     * own later appends take */
    for (; p < r && rc == 0; p++)
        rc = list_settle_place(c, p, &deadline);
    /* past the count: a slow appender whose skipped place was emptied
     * again (a removal) may have claimed it after all (not while a dead
     * holder's intent is to be repaired: its moves wrote past len) */
    int intent = atomic_load_explicit(&m->op, memory_order_relaxed) != SHMOBJ__MUT_OP_NONE;
    for (unsigned late = 0; rc == 0 && !intent && late < LIST_LATE_MAX; late++, p++) {
        struct lslot ls;
        uint64_t cw;
        unsigned k = chunk_of(p, &cw);
        if (k >= SHMOBJ__MLIST_CHUNKS ||
            atomic_load_explicit(&list_dir(m)[k], memory_order_acquire) == 0 ||
            list_slot(c, p, &ls) != 0 ||
            atomic_load_explicit(slot_w0(ls.s), memory_order_acquire) == 0)
            break;
        /* published on no reservation: only an item's own tag may be (the
         * kinds shmobj__mut_item_make() writes); anything else is damage,
         * never to become an item */
        uint64_t w0 = atomic_load_explicit(slot_w0(ls.s), memory_order_acquire);
        uint8_t tag = (uint8_t)w0;
        if (tag_written(tag) && !list_item_tag(tag)) {
            rc = SHMOBJ_ECORRUPT;
            break;
        }
        /* a dead claimant past the count (a holder killed after claiming
         * the slot at len, an appender of an older epoch) reserved no
         * place now: its slot goes back to 0, never to a null nobody put */
        if (tag == SHMOBJ__SLOT_CLAIM && c->sp->ops->live != NULL &&
            !shmobj__space_token_holder_alive(c->sp, w0 >> 32)) {
            (void)atomic_compare_exchange_strong_explicit(slot_w0(ls.s), &w0, 0,
                                                          memory_order_seq_cst,
                                                          memory_order_relaxed);
            break;
        }
        rc = list_settle_place(c, p, &deadline);
    }
    if (rc != 0) {
        /* what is settled is published; the count reopened as it was */
        atomic_store_explicit(list_res(m), r, memory_order_release);
        return rc;
    }
    SHMOBJ__STEP("mlist.close.settled");
    uint64_t e = atomic_load_explicit(&m->len, memory_order_relaxed) & ~SHMOBJ__MLIST_LEN_MASK;
    atomic_store_explicit(&m->len, (e + (UINT64_C(1) << SHMOBJ__MLIST_LEN_BITS)) | p,
                          memory_order_release);
    atomic_store_explicit(&a->closed_r, p | SHMOBJ__MLIST_SETTLED, memory_order_relaxed);
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
    uint64_t dirty;
    int rc = shmobj__space_alloc_dirty(c->sp, chunk_bytes(k), 16, &r, &dirty);
    if (rc == 0) {
        atomic_store_explicit(&m->spare, r, memory_order_relaxed);
        /* every slot past len has tag 0 */
        memset(c->sp->base + shmobj__ref_off(r), 0, (size_t)dirty);
        /* beyond len: no reader looks at it before a later release of len;
         * a CAS, as a grower without the lock (a slow one) publishes */
        uint64_t z = 0;
        if (!atomic_compare_exchange_strong_explicit(&list_dir(m)[k], &z, r,
                                                     memory_order_release,
                                                     memory_order_relaxed))
            (void)c->sp->ops->free(c->sp, r);
        atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    return rc;
}

/* The slot at len, which a put (append or insert) under the lock writes:
 * its chunk made, and claimed by a CAS from 0, since a slow appender whose
 * skipped place was emptied again may claim it too; such a claim is
 * settled and published first (*n moves on). */
static int list_end_take(struct shmobj__mc *c, uint64_t *n, struct lslot *ls)
{
    const struct shmobj__space_live_ops *live = c->sp->ops->live;
    uint64_t tok = live != NULL && list_apps(c) != NULL ? live->token(c->sp) : 0, deadline = 0;
    for (unsigned t = 0; t < LIST_LATE_MAX; t++) {
        if (*n >= SHMOBJ__MLIST_LEN_MASK)
            return SHMOBJ_ENOMEM;
        int rc = list_reserve(c, *n);
        if (rc == 0)
            rc = list_slot(c, *n, ls);
        if (rc != 0 || tok == 0)
            return rc;
        uint64_t z = 0;
        if (atomic_compare_exchange_strong_explicit(slot_w0(ls->s), &z, slot_claim(tok),
                                                    memory_order_acquire,
                                                    memory_order_relaxed))
            return 0;
        rc = list_settle_place(c, *n, &deadline);
        if (rc != 0)
            return rc;
        list_len_put(c->m, ++*n);
    }
    return SHMOBJ_EBUSY;
}

static int list_put_new(struct shmobj__mc *c, uint64_t i, const struct shmobj__mitem *it)
{
    struct shmobj__mut *m = c->m;
    uint64_t n = list_len(m);
    struct lslot ls;
    if (i > n)
        return SHMOBJ_ERANGE;
    if (n >= (UINT64_C(1) << 44))
        return SHMOBJ_ENOMEM;
    int append = i == n;
    int rc = list_end_take(c, &n, &ls);
    if (rc != 0)
        return rc;
    if (append)
        i = n;
    if (i == n && it->child == 0) {
        /* append of an item with no child: a holder that dies before len's
         * store leaves only a tag past len, which the repair zeroes, so no
         * intent */
        slot_publish(ls.s, it->tag, it->payload);
        list_len_put(m, n + 1);
        return 0;
    }
    atomic_store_explicit(&m->at, i, memory_order_relaxed);
    atomic_store_explicit(&m->spare, it->child, memory_order_relaxed);
    if (i == n) {
        /* append: written past len, published by len's release store */
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_PUT, memory_order_relaxed);
        slot_publish(ls.s, it->tag, it->payload);
        list_len_put(m, n + 1);
    } else {
        atomic_store_explicit(&m->old_len, n, memory_order_relaxed);
        atomic_store_explicit(&m->progress, n, memory_order_relaxed);
        atomic_store_explicit(&m->item_tag, it->tag, memory_order_relaxed);
        atomic_store_explicit(&m->item_payload, it->payload, memory_order_relaxed);
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_INSERT, memory_order_relaxed);
        SHMOBJ__STEP("mlist.insert.intent");
        shmobj__mut_wbegin(m);
        rc = shmobj__mlist_move_finish(c, 1);
        shmobj__mut_wend(m);
        if (rc != 0)
            return rc;
    }
    atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    return 0;
}

/* The tag and payload of a scalar or null for an append without the lock:
 * 0, 1 for a value of another kind (the builder's), or SHMOBJ_EINVAL. */
static inline __attribute__((always_inline)) int list_scalar(const shmobj_value *val,
                                                           uint8_t *tag, uint64_t *payload)
{
    if (val->reserved != 0)
        return SHMOBJ_EINVAL;
    switch (val->type) {
    case SHMOBJ_TYPE_INT:
    case SHMOBJ_TYPE_UINT:
    case SHMOBJ_TYPE_DOUBLE:
        *tag = (uint8_t)val->type;
        memcpy(payload, &val->v, sizeof *payload); /* i, u, d share bytes */
        return 0;
    case SHMOBJ_TYPE_NULL:
        *tag = SHMOBJ__SLOT_OBJ;
        *payload = 0;
        return 0;
    default:
        return 1; /* bool's check, and the builder's kinds: shmobj__mut_item_make */
    }
}

static int list_insert_at(const shmobj_view *list, int append, size_t i,
                          const shmobj_value *val)
{
    struct shmobj__mc c;
    struct shmobj__mitem it;
    if (val == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__view_writable(list) != 0)
        return SHMOBJ_ERDONLY;
    int rc;
    if (append) {
        rc = shmobj__mut_open(list, 1u << SHMOBJ_TYPE_MLIST, &c);
        if (rc != 0)
            return rc;
        uint8_t tag;
        uint64_t pl;
        rc = list_scalar(val, &tag, &pl);
        if (rc == 0) {
            rc = list_append_free(&c, tag, pl);
            if (rc <= 0)
                return rc;
        } else if (rc < 0) {
            return rc;
        }
        rc = shmobj__mut_item_make(c.sp, val, &it);
        if (rc != 0)
            return rc;
        rc = shmobj__mlist_lock(&c);
        if (rc != 0) {
            shmobj__mut_item_drop(c.sp, &it);
            return rc;
        }
    } else {
        rc = shmobj__mlist_begin(list, val, &c, &it);
        if (rc != 0)
            return rc;
    }
    uint64_t at = append ? list_len(c.m) : i;
    rc = list_put_new(&c, at, &it);
    shmobj__mlist_unlock(&c);
    if (rc != 0)
        shmobj__mut_item_drop(c.sp, &it);
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
