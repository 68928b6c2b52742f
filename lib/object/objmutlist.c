/* The growable list: chunks, appends, inserts, sets, removals, clears,
 * its repair after a writer's death (its reads, free and check are
 * objmutlread.c's).
 *
 * Invariants kept here (with those of objmut.c, whose lock, sections and
 * optimistic reads these use):
 * - Chunks never move once published: chunk k holds CHUNK0 << k items, so
 *   growth adds a chunk and copies nothing.
 * - Slots past len have tag 0 (chunks are zeroed when made, and a slot a
 *   removal or a clear gives up is zeroed), but for the slot at len that
 *   an appender killed before len's store wrote, until the next append
 *   overwrites it or the next locker zeroes it; len covers only published
 *   items: a reader never
 *   meets a place being written (version 3 of the list; a version 2 list
 *   reserved places below len first, and its readers' wait for a tag is
 *   kept for such a list until its next locker makes it version 3).
 * - An append of an item with no child takes no lock and, once its
 *   process has the list's tail, no atomic read-modify-write of a line
 *   another appender writes: it CASes its token into its appender word
 *   (objfmt.h, struct shmobj__mlapps; the word's own line), loads
 *   `closing` and `owner` (the block's first line, which only lock
 *   holders and tail takers write), and when `owner` names its word it
 *   writes the slot at len (payload, then the tag, release), stores
 *   len + 1 (release) and gives its word back (release). Only the holder
 *   of the tail's word writes len or the slot at len without the lock, so
 *   the stores need no CAS, and one process appending in a row keeps the
 *   len line, the slot lines and its word in its own cache (with a CAS
 *   of len per append, two processes appending at once moved the len
 *   line and, adjacent places being written by both, the slot line
 *   between their cores at nearly every append: in a run of two
 *   processes on two cores where 40% of consecutive places had different
 *   writers, an append cost about 105 ns of CPU, against 32 ns alone).
 * - The tail changes hands by a CAS of `owner` from the word seen to the
 *   taker's own word, made while the taker holds its word, after which
 *   the taker waits until the old word is no longer held by the holder it
 *   saw (or that holder is dead). Both sides are seq_cst (the appender's
 *   CAS of its word then its load of `owner`; the taker's CAS of `owner`
 *   then its load of the old word), so an appender that saw the tail as
 *   its own is seen holding its word and waited for, and one that comes
 *   later sees the new owner: two appenders never write len at once. The
 *   taker's wait also ends when a third word took the tail from it (two
 *   takers would otherwise wait for each other's words), and it then
 *   gives its word back without appending.
 * - A taker first waits while the tail's appender keeps appending, for up
 *   to a turn (LIST_TURN_SPINS pauses, reading only lines the appender
 *   does not write, and len twice: two misses for the appender), so that
 *   two processes appending in loops take turns of many appends each
 *   instead of moving the lines at every append; a tail whose len did
 *   not move over the first LIST_IDLE_SPINS pauses (its appender returned
 *   and appends no more, or died) is taken at once. A dead appender that
 *   held the tail is not waited for: it either stored len (its item is
 *   committed) or not (nothing happened; the tag it may have written at
 *   len is overwritten by the next append or zeroed by the next locker).
 *   Per-process order holds because len only grows under its one writer.
 * - Every lock holder closes the appender words before it reads or changes
 *   anything, so while it holds them no append without the lock is under
 *   way; a word left by a dead handle is taken over after every live one
 *   is closed (a tag it left at len zeroed; in a version 2 list its
 *   place, when below len and still tag 0, is given a null). The words
 *   are given back before the unlock; `owner` stays as it was.
 * - An append under the lock writes the slot, then len (release): a holder
 *   that dies between the two leaves a tag past len, which the repair
 *   zeroes.
 * - The repair rolls the moves of an insert or delete forward (each step
 *   copies a slot and then advances progress, so a step repeated is the
 *   same step), finishes a clear's frees, and frees each recorded block
 *   unless the place it was for holds it. */
#include "objmutlist.h"

#include "cpu.h"

/* A closer asks an appender's liveness every LIST_CLOSE_LIVENESS spins and
 * gives up (SHMOBJ_EBUSY) after LIST_CLOSE_SPINS, some seconds: an append
 * takes well under a microsecond unless its process is descheduled. */
#define LIST_CLOSE_LIVENESS 1024
#define LIST_CLOSE_SPINS (UINT64_C(1) << 26)

/* The tail's turn: an appender that finds the tail another word's waits up
 * to LIST_TURN_SPINS pauses (about 20 us where a pause takes 40 cycles)
 * while that word's appender keeps appending, then takes it; a tail whose
 * len did not move in the first LIST_IDLE_SPINS is taken at once. After
 * LIST_TAIL_ROUNDS tries without the tail an append takes the lock. */
#define LIST_TURN_SPINS 1024
#define LIST_IDLE_SPINS 16
#define LIST_TAIL_ROUNDS 16

/* ---- the appender words -------------------------------------------------- */

/* Give the closed words back (lock held: only its holder closes them, and
 * appenders CAS from 0 only, so a plain store does). */
static void list_open(struct shmobj__mc *c)
{
    uint32_t magic;
    struct shmobj__mlapps *a = list_apps_any(c, &magic);
    if (a == NULL)
        return;
    for (unsigned j = 0; j < SHMOBJ__MLAPP_WORDS; j++)
        if (atomic_load_explicit(&a->w[j].word, memory_order_relaxed) == SHMOBJ__MLAPP_CLOSED)
            atomic_store_explicit(&a->w[j].word, 0, memory_order_release);
    if (atomic_load_explicit(&a->closing, memory_order_relaxed) != 0)
        atomic_store_explicit(&a->closing, 0, memory_order_release);
}

void shmobj__mlist_unlock(struct shmobj__mc *c)
{
    list_open(c);
    shmobj__mut_unlock(c);
}

/* Version 2: give a null item to place p when a dead appender reserved
 * it and never published it (every live appender closed out: a tag 0
 * below len is nobody's now). len is loaded first (acquire), so an `at`
 * stored before the CAS that reserved p is seen. */
static void list_orphan_fill(struct shmobj__mc *c, _Atomic uint64_t *atp)
{
    struct lslot ls;
    uint64_t n = atomic_load_explicit(&c->m->len, memory_order_acquire);
    uint64_t p = atomic_load_explicit(atp, memory_order_relaxed);
    if (p < n && list_slot(c, p, &ls) == 0 && slot_tag(ls.s) == 0)
        slot_publish(ls.s, SHMOBJ__SLOT_OBJ, 0);
}

/* Version 3: a dead appender that held the tail may have written the slot
 * at len and died before len's store; the tag goes back to 0 (every live
 * appender closed out: nobody writes there now). */
static void list_tail_zero(struct shmobj__mc *c)
{
    struct lslot ls;
    uint64_t n = atomic_load_explicit(&c->m->len, memory_order_acquire);
    if (n < (UINT64_C(1) << 44) && list_slot(c, n, &ls) == 0 && slot_tag(ls.s) != 0)
        slot_zero(ls.s);
}

/* Close every appender word (lock held): wait for live appenders to finish,
 * then take over the words of dead ones, settling what they left (version
 * 2: a null at a reserved place; version 3: a tag at len), and make a
 * version 2 block version 3. 0, SHMOBJ_EBUSY after some seconds of a live
 * appender (the words given back), SHMOBJ_ECORRUPT for a damaged block. */
static int list_close(struct shmobj__mc *c)
{
    if (atomic_load_explicit(apps_ref(c->m), memory_order_relaxed) == 0)
        return 0; /* no appenders block: appends take the lock */
    uint32_t magic;
    struct shmobj__mlapps *a = list_apps_any(c, &magic);
    if (a == NULL)
        return SHMOBJ_ECORRUPT;
    unsigned dead = 0;
    /* appenders that take a word from now on give it back at once: a word
     * its owner keeps taking in a loop is free between two appends */
    atomic_store_explicit(&a->closing, 1, memory_order_seq_cst);
    for (unsigned j = 0; j < SHMOBJ__MLAPP_WORDS; j++) {
        _Atomic uint64_t *w = &a->w[j].word;
        for (uint64_t i = 0;; i++) {
            uint64_t x = atomic_load_explicit(w, memory_order_acquire);
            if (x == SHMOBJ__MLAPP_CLOSED)
                break;
            if (x == 0) {
                if (atomic_compare_exchange_strong_explicit(w, &x, SHMOBJ__MLAPP_CLOSED,
                                                            memory_order_seq_cst,
                                                            memory_order_acquire))
                    break;
                continue;
            }
            if (i % LIST_CLOSE_LIVENESS == LIST_CLOSE_LIVENESS - 1) {
                if (c->sp->ops->live == NULL || !shmobj__space_token_holder_alive(c->sp, x)) {
                    /* kept until every live word is closed (below) */
                    dead |= 1u << j;
                    break;
                }
                if (i >= LIST_CLOSE_SPINS) {
                    list_open(c);
                    return SHMOBJ_EBUSY;
                }
                /* a live appender this slow was descheduled: let it run */
                c->sp->ops->live->pause(c->sp);
            }
            shmobj__cpu_relax();
        }
    }
    /* A dead word is taken over only after its place is settled: a closer
     * that dies in between leaves it for the next one. */
    for (unsigned j = 0; j < SHMOBJ__MLAPP_WORDS; j++) {
        if (!(dead & (1u << j)))
            continue;
        uint64_t x = atomic_load_explicit(&a->w[j].word, memory_order_acquire);
        if (magic == SHMOBJ__MLIST_MAGIC)
            list_tail_zero(c);
        else
            list_orphan_fill(c, &a->w[j].at);
        (void)atomic_compare_exchange_strong_explicit(&a->w[j].word, &x, SHMOBJ__MLAPP_CLOSED,
                                                      memory_order_seq_cst,
                                                      memory_order_relaxed);
    }
    if (magic == SHMOBJ__MLIST_MAGIC_V2) {
        /* no version 2 appender is under way, and none of this library
         * appends to a version 2 block: the tail belongs to no word yet,
         * and the words' places are forgotten. Published to appenders by
         * list_open()'s release stores of the words. */
        atomic_store_explicit(&a->owner, 0, memory_order_relaxed);
        for (unsigned j = 0; j < SHMOBJ__MLAPP_WORDS; j++)
            atomic_store_explicit(&a->w[j].at, 0, memory_order_relaxed);
        a->magic = SHMOBJ__MLIST_MAGIC;
    }
    return 0;
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
    if (rc == 0 && !insert) {
        /* the place given up goes back to tag 0 (slots past len) */
        rc = list_slot(c, n - 1, &to);
        if (rc == 0)
            slot_zero(to.s);
    }
    if (rc != 0)
        return rc;
    n = insert ? n + 1 : n - 1;
    atomic_store_explicit(&m->len, n, memory_order_relaxed);
    return 0;
}

/* Free the children of items [0, progress) of a cleared list and zero
 * their slots, from the top, progress following. */
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
    int rc = list_close(c);
    if (rc != 0)
        return rc;
    uint64_t op = atomic_load_explicit(&m->op, memory_order_relaxed);
    uint64_t len = atomic_load_explicit(&m->len, memory_order_relaxed);
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
        /* an appenders block being made (spare2) */
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
        rc = list_clear_finish(c);
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
     * intent for an item without a child) left a tag at len, which the
     * next append's readers would take for its item before it is written. */
    len = atomic_load_explicit(&m->len, memory_order_relaxed);
    if (len < (UINT64_C(1) << 44) && list_slot(c, len, &ls) == 0 && ls.s->tag != 0)
        slot_zero(ls.s);
    list_open(c);
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
        /* every slot past len has tag 0 */
        memset(c->sp->base + shmobj__ref_off(r), 0, (size_t)chunk_bytes(k));
        /* beyond len: no reader looks at it before a later release of len */
        atomic_store_explicit(&list_dir(m)[k], r, memory_order_release);
        atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    return rc;
}

/* Make the appenders block of a list that has none (lock held, words
 * closed: there are none). A version 1 list's slots past len may hold
 * old items: they are zeroed first. A block that cannot be had leaves
 * the list to appends under the lock. */
static void list_apps_make(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    uint64_t n = atomic_load_explicit(&m->len, memory_order_relaxed);
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
        a->words = SHMOBJ__MLAPP_WORDS; /* the tail belongs to no word yet: owner 0 */
        /* closed: the holder gives them back at its unlock */
        for (unsigned j = 0; j < SHMOBJ__MLAPP_WORDS; j++)
            atomic_store_explicit(&a->w[j].word, SHMOBJ__MLAPP_CLOSED, memory_order_relaxed);
        shmobj__mut_wbegin(m);
        atomic_store_explicit(apps_ref(m), r, memory_order_release);
        shmobj__mut_wend(m);
        atomic_store_explicit(&m->spare2, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
}

/* Lock a list for a change: the lock, its appenders block made, appends
 * without the lock closed out. */
int shmobj__mlist_lock(struct shmobj__mc *c)
{
    int rc = shmobj__mut_lock(c);
    if (rc != 0)
        return rc;
    if (atomic_load_explicit(apps_ref(c->m), memory_order_relaxed) == 0)
        list_apps_make(c);
    rc = list_close(c);
    if (rc != 0)
        shmobj__mut_unlock(c);
    return rc;
}

/* A writer's call on a list: open, make the item, lock. On success the
 * caller holds the lock, appender words closed. */
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
    rc = shmobj__mlist_lock(c);
    if (rc != 0 && val != NULL)
        shmobj__mut_item_drop(c->sp, it);
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
         * store leaves only a tag past len, which the repair zeroes, so no
         * intent */
        slot_publish(ls.s, it->tag, it->payload);
        atomic_store_explicit(&m->len, n + 1, memory_order_release);
        return 0;
    }
    atomic_store_explicit(&m->at, i, memory_order_relaxed);
    atomic_store_explicit(&m->spare, it->child, memory_order_relaxed);
    if (i == n) {
        /* append: written past len, published by len's release store */
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_PUT, memory_order_relaxed);
        slot_publish(ls.s, it->tag, it->payload);
        atomic_store_explicit(&m->len, n + 1, memory_order_release);
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

/* The slot of place n of an append without the lock, through the chunk
 * its word remembers when n lies in it (else the directory, and the word
 * remembers that chunk); NULL when n's chunk is not made (or is damaged). */
static inline __attribute__((always_inline)) struct shmobj__slot *
list_append_slot(struct shmobj__mc *c, struct shmobj__mlapp *w, uint64_t n)
{
    void *p;
    if (n - w->lo < w->hi - w->lo) {
        uint64_t at = w->off + 16 * (n - w->lo);
        return shmobj__space_at(c->sp, at, 16, &p) == 0 ? p : NULL;
    }
    struct lslot ls;
    uint64_t within;
    if (list_slot(c, n, &ls) != 0)
        return NULL;
    unsigned k = chunk_of(n, &within);
    w->lo = n - within;
    w->hi = w->lo + ((uint64_t)SHMOBJ__MLIST_CHUNK0 << k);
    w->off = ls.blk;
    return ls.s;
}

/* Wait, without a word, while the tail belongs to word `o` and its
 * appender keeps appending: up to a turn (LIST_TURN_SPINS), or until the
 * tail changes hands or a lock holder closes the words. A tail whose len
 * did not move over LIST_IDLE_SPINS is idle (its appender returned and
 * appends no more, or died), and is taken at once. */
static void list_turn_wait(struct shmobj__mc *c, struct shmobj__mlapps *a, uint64_t o)
{
    uint64_t n0 = atomic_load_explicit(&c->m->len, memory_order_relaxed);
    for (unsigned i = 0; i < LIST_TURN_SPINS; i++) {
        shmobj__cpu_relax();
        if (atomic_load_explicit(&a->owner, memory_order_relaxed) != o ||
            atomic_load_explicit(&a->closing, memory_order_relaxed) != 0)
            return;
        /* len's line is read once more only: each read costs the tail's
         * appender a miss */
        if (i == LIST_IDLE_SPINS && atomic_load_explicit(&c->m->len, memory_order_relaxed) == n0)
            return;
    }
}

/* After word `mine` took the tail from word `o` (j + 1 of word j): wait
 * until that word is no longer held by whoever held it then, so that an
 * append which saw the tail as its own before the CAS is over (it stored
 * len, then its word, release). The wait ends too when another word took
 * the tail meanwhile: two takers each holding its word and waiting for
 * the other's would otherwise wait for ever. 0, or SHMOBJ_EBUSY after
 * some seconds of a live holder. A dead holder is not waited for: what
 * it left at len (a tag without len's store) is overwritten by the next
 * append. */
static int list_tail_drain(struct shmobj__mc *c, struct shmobj__mlapps *a, uint64_t o,
                           uint64_t mine)
{
    if (o == 0 || o > SHMOBJ__MLAPP_WORDS)
        return 0; /* no word had it (or a damaged owner): nobody appends */
    _Atomic uint64_t *ow = &a->w[o - 1].word;
    uint64_t x = atomic_load_explicit(ow, memory_order_seq_cst);
    if (x == 0 || x == SHMOBJ__MLAPP_CLOSED)
        return 0;
    for (uint64_t i = 0; atomic_load_explicit(ow, memory_order_acquire) == x; i++) {
        if (atomic_load_explicit(&a->owner, memory_order_relaxed) != mine)
            return 0;
        if (i % LIST_CLOSE_LIVENESS == LIST_CLOSE_LIVENESS - 1) {
            if (!shmobj__space_token_holder_alive(c->sp, x))
                return 0;
            if (i >= LIST_CLOSE_SPINS)
                return SHMOBJ_EBUSY;
            c->sp->ops->live->pause(c->sp);
        }
        shmobj__cpu_relax();
    }
    return 0;
}

/* The append of the holder of word w, the tail's: nobody else writes len
 * or the slot at len until a taker has seen w given back. len's acquire
 * load sees the previous appender's slot and len (given with its word's
 * release store, or by a lock holder's). Gives the word back. */
static inline __attribute__((always_inline)) int
list_tail_append(struct shmobj__mc *c, struct shmobj__mlapp *w, uint8_t tag, uint64_t payload)
{
    uint64_t n = atomic_load_explicit(&c->m->len, memory_order_acquire);
    struct shmobj__slot *s;
    int rc = 0;
    if (n >= (UINT64_C(1) << 44))
        rc = SHMOBJ_ENOMEM;
    else if ((s = list_append_slot(c, w, n)) == NULL)
        rc = 1; /* a chunk to make, or damage: the lock's way */
    else {
        slot_publish(s, tag, payload);
        atomic_store_explicit(&c->m->len, n + 1, memory_order_release);
    }
    atomic_store_explicit(&w->word, 0, memory_order_release);
    return rc;
}

/* list_append_free() when its token's word was taken or the tail is
 * another word's: any free word, then the tail (its turn waited out
 * once). */
static __attribute__((noinline)) int list_append_other(struct shmobj__mc *c,
                                                      struct shmobj__mlapps *a, uint64_t tok,
                                                      uint8_t tag, uint64_t payload)
{
    int waited = 0;
    for (unsigned round = 0; round < LIST_TAIL_ROUNDS; round++) {
        struct shmobj__mlapp *w = NULL;
        unsigned j;
        for (unsigned t = 0; t < SHMOBJ__MLAPP_WORDS; t++) {
            j = (unsigned)((tok + t) % SHMOBJ__MLAPP_WORDS);
            uint64_t z = 0;
            if (atomic_compare_exchange_strong_explicit(&a->w[j].word, &z, tok,
                                                        memory_order_seq_cst,
                                                        memory_order_relaxed)) {
                w = &a->w[j];
                break;
            }
            if (z == SHMOBJ__MLAPP_CLOSED)
                return 1; /* a lock holder closes them all */
        }
        if (w == NULL)
            return 1;
        if (atomic_load_explicit(&a->closing, memory_order_seq_cst) != 0) {
            /* a lock holder is closing the words: let it */
            atomic_store_explicit(&w->word, 0, memory_order_release);
            return 1;
        }
        /* seq_cst after the word's CAS: a taker that CASes owner away and
         * then loads this word either is seen here or sees the word */
        uint64_t o = atomic_load_explicit(&a->owner, memory_order_seq_cst);
        int rc = 0;
        if (o == j + 1)
            return list_tail_append(c, w, tag, payload);
        if (o != 0 && o <= SHMOBJ__MLAPP_WORDS && !waited) {
            /* another word's tail: let its appender have its turn */
            atomic_store_explicit(&w->word, 0, memory_order_release);
            list_turn_wait(c, a, o);
            waited = 1;
            continue;
        }
        if (atomic_compare_exchange_strong_explicit(&a->owner, &o, j + 1, memory_order_seq_cst,
                                                    memory_order_relaxed) &&
            (rc = list_tail_drain(c, a, o, j + 1)) == 0 &&
            atomic_load_explicit(&a->owner, memory_order_seq_cst) == j + 1)
            return list_tail_append(c, w, tag, payload);
        /* another word took it meanwhile, or its holder is stuck */
        atomic_store_explicit(&w->word, 0, memory_order_release);
        if (rc != 0)
            return rc;
        waited = 0;
    }
    return 1;
}

/* An append without the lock of a scalar or null (tag, payload): 0 when
 * done, 1 when it must take the lock (no token, no appenders block of
 * version 3, every word taken or closed, the chunk of its place not made
 * yet, the tail not had in LIST_TAIL_ROUNDS), or an error. The common
 * case, inline: the word of its token is free and holds the tail. */
static inline __attribute__((always_inline)) int list_append_free(struct shmobj__mc *c,
                                                                uint8_t tag, uint64_t payload)
{
    const struct shmobj__space_live_ops *live = c->sp->ops->live;
    struct shmobj__mlapps *a;
    if (live == NULL || (a = list_apps(c)) == NULL)
        return 1;
    uint64_t tok = live->token(c->sp), z = 0;
    if (tok == 0)
        return 1;
    unsigned j = (unsigned)(tok % SHMOBJ__MLAPP_WORDS);
    struct shmobj__mlapp *w = &a->w[j];
    if (atomic_compare_exchange_strong_explicit(&w->word, &z, tok, memory_order_seq_cst,
                                                memory_order_relaxed)) {
        if (atomic_load_explicit(&a->closing, memory_order_seq_cst) != 0) {
            /* a lock holder is closing the words: let it */
            atomic_store_explicit(&w->word, 0, memory_order_release);
            return 1;
        }
        /* seq_cst after the word's CAS (list_append_other()) */
        if (atomic_load_explicit(&a->owner, memory_order_seq_cst) == j + 1)
            return list_tail_append(c, w, tag, payload);
        atomic_store_explicit(&w->word, 0, memory_order_release);
    } else if (z == SHMOBJ__MLAPP_CLOSED) {
        return 1; /* a lock holder closes them all */
    }
    return list_append_other(c, a, tok, tag, payload);
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
        rc = list_begin(list, val, &c, &it);
        if (rc != 0)
            return rc;
    }
    uint64_t at = append ? atomic_load_explicit(&c.m->len, memory_order_relaxed) : i;
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
    shmobj__mlist_unlock(&c);
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
    int rc = list_close(c);
    if (rc != 0)
        return rc;
    rc = mlist_clear_closed(c);
    list_open(c);
    return rc;
}

static int mlist_clear_closed(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    uint64_t n = atomic_load_explicit(&m->len, memory_order_relaxed);
    atomic_store_explicit(&m->old_len, n, memory_order_relaxed);
    atomic_store_explicit(&m->progress, n, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_CLEAR, memory_order_relaxed);
    shmobj__mut_wbegin(m);
    atomic_store_explicit(&m->len, 0, memory_order_relaxed);
    shmobj__mut_wend(m);
    int rc = list_clear_finish(c);
    if (rc == 0)
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    return rc;
}
