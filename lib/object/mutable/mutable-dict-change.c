/* Mutable dicts and sets: the changes (set, add, delete, clear, the
 * atomic add of an int value), each made by the lock holder, except an
 * add to an int value and the store of an int over an int, which the
 * owner of the control block's adder word may make without the lock.
 *
 * Invariants kept here (with those of mutable-section.c and mutable-dict-table.c):
 * - Before a change the holder records its intent (op, at, the blocks it
 *   brings in spare and spare2, those it takes out in retired and
 *   retired2) and clears it last, so the repair (mutable-dict-table.c) frees what
 *   no pair holds and keeps what one does.
 * - A new pair is written at len inside a writer section, with its order
 *   (the container's next) and its index entry; a replaced value's child
 *   is freed after the section that replaced it, a deleted pair's after
 *   the lock (the section that made it a hole is over, and nothing else
 *   names them).
 * - Children are built before the lock where they can be (a value's, and
 *   the key's of a key that looked absent), so that the lock is not held
 *   across the builder's allocation; one the change did not take (the key
 *   was there by then) is freed after the lock. A kill before the lock
 *   leaks them, as any block not yet handed to the container.
 * - An int value's add is one atomic read-modify-write of its slot, and
 *   an int stored over an int one atomic store: a reader sees the value
 *   before or after it, so neither needs a section; without the lock they
 *   are made only by the adder word's owner, in a slot found while seq
 *   held a value s that seq still has once the word is taken, which
 *   nothing moves, frees or replaces until the word is clear. An answer
 *   that changes nothing (an absent key, a value that is no int) is a
 *   read's, given without the word or the lock.
 *
 * The protocol step by step, its memory orders and what a stalled or
 * killed process leaves: doc/protocols.md, section 4. */
#include "mutable.h"

/* The add of an int value, the lock held or the adder word owned: the
 * value slot of the key's pair, an atomic fetch-add. */
static inline __attribute__((always_inline)) int
add_found(struct shmobj__slot *vs, int64_t delta, int64_t *old)
{
    if (vs->tag != SHMOBJ__SLOT_INT)
        return SHMOBJ_ETYPE;
    /* one atomic add: a reader sees the value before or after it, so no
     * writer section is needed */
    uint64_t o = atomic_fetch_add_explicit(&vs->payload, (uint64_t)delta, memory_order_acq_rel);
    if (old != NULL)
        *old = (int64_t)o;
    return 0;
}

/* Where a set's lock-free find saw its key absent (have: in a body),
 * while seq held s: the empty index entry a new key takes. */
struct absent_at {
    uint64_t s;
    int have;
    struct shmobj__mdbody b;
    uint64_t len, free_at;
};

/* A change of an int value without the lock: the fetch-add of delta, or
 * with store the store of delta over an int. 1 when it cannot be made so
 * (a writer holds the lock, or a section opened before or during it;
 * another adder owns the word; a space without tokens; for a store, a
 * value that is not an int: the lock's path replaces it), 2 for a store
 * to a key absent while seq held (the lock's path inserts it), else its
 * result.
 *
 * The key is found first, as a reader finds it: the pair and its value's
 * tag are kept only if seq held (value s, even) across their read, and an
 * answer that needs no change (absent, not an int, damage) is given then,
 * without the word. Only a change takes the adder word (CAS from 0), and
 * it is made only if seq is still s after the CAS: then no section began
 * since the find (one that began and ended moved seq past s), and one
 * that begins later sees the word, since the CAS and the load of seq are
 * the adder's store-then-load and the writer's odd store, its fence and
 * its load of the word are the other side of it; so whatever would move,
 * free or replace the value slot waits for the word to clear, and a lock
 * holder may meanwhile only append pairs or make this one a hole (the
 * change then comes before the delete) or store an int over this int
 * (the change lands before or after it, in an int).
 *
 * Why the word, and not a reader's check of seq before and after the
 * atomic: a check after it comes too late, since a rebuild or a clear
 * that began between the find and the atomic may have freed the body,
 * and the heap may have handed its bytes to another block, which the
 * add would then change; nothing can undo that. The writer must know of
 * the add before it frees, so the add announces itself first (the word)
 * and the writer waits for it (shmobj__mut_adders_drain). The CAS is
 * also the barrier between the word's store and the load of seq that the
 * two sides' store-then-load needs; a plain store would need the
 * writer's cross-process barrier (membarrier, as the library's lock
 * makes) instead. Measured on C1 (one adder, its word's line in its own
 * cache) a plain store in its place made no difference beyond the
 * noise, so the word stays a CAS. */
static inline __attribute__((always_inline)) int
int_try_unlocked(struct shmobj__mc *c, const shmobj_key *key, int64_t v, int store, int64_t *old,
                 struct absent_at *ab)
{
    const struct shmobj__space_live_ops *live = c->sp->ops->live;
    struct shmobj__mdbody b;
    uint64_t len = 0, pair = 0, free_at = 0;
    if (live == NULL)
        return 1;
    /* the token first: nothing of the find is live across its call */
    uint64_t tok = live->token(c->sp), z = 0;
    uint64_t s = atomic_load_explicit(&c->m->seq, memory_order_acquire);
    if (s & 1)
        return 1;
    int rc = shmobj__mdict_body_now(c, &b, &len), have = rc == 0;
    if (rc == 1)
        rc = SHMOBJ_ENOTFOUND;
    else if (rc == 0)
        rc = shmobj__mdict_find(c, &b, len, key, &pair, store ? &free_at : NULL, NULL);
    uint8_t tag = rc == 0 ? b.pairs[2 * pair + 1].tag : 0;
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&c->m->seq, memory_order_relaxed) != s)
        return 1;
    if (rc == SHMOBJ_ENOTFOUND && store) {
        /* absent while seq held: the lock's path inserts, at free_at if
         * seq is still s then */
        if (have) {
            ab->s = s;
            ab->have = 1;
            ab->b = b;
            ab->len = len;
            ab->free_at = free_at;
        }
        return 2;
    }
    if (rc != 0)
        return rc;
    if (tag != SHMOBJ__SLOT_INT)
        return store ? 1 : SHMOBJ_ETYPE;
    /* a writer holds the lock: its section would send this change to the
     * lock anyway, after both had moved the adder word's line */
    if (atomic_load_explicit((_Atomic uint32_t *)(void *)c->m->lock, memory_order_relaxed) != 0)
        return 1;
    SHMOBJ__STEP("mdict.int.found");
    if (tok == 0 || !atomic_compare_exchange_strong_explicit(&c->m->adder, &z, tok,
                                                             memory_order_seq_cst,
                                                             memory_order_relaxed))
        return 1;
    SHMOBJ__STEP("mdict.int.owned");
    if (atomic_load_explicit(&c->m->seq, memory_order_seq_cst) != s) {
        rc = 1;
    } else if (!store) {
        rc = add_found(&b.pairs[2 * pair + 1], v, old);
    } else {
        atomic_store_explicit(&b.pairs[2 * pair + 1].payload, (uint64_t)v, memory_order_release);
        rc = 0;
    }
    SHMOBJ__STEP("mdict.int.added");
    atomic_store_explicit(&c->m->adder, 0, memory_order_release);
    if (rc == 0)
        shmobj__mut_changed(c);
    return rc;
}

/* The key slot of a new pair: inline when the key fits (an int, a short
 * string, a medium string in a version 3 body), else a child built for
 * it. */
struct key_slot {
    uint8_t tag;
    uint64_t w0; /* the slot's first word: the tag, a short key's length or
                  * a medium key's first bytes */
    uint64_t payload;
    shmobj__ref child;
    int used; /* an insert took it */
};

/* Is k a str key that a version 3 body holds in its slot (8 to 14 bytes,
 * the last not NUL)? */
static int key_medium(const shmobj_key *k)
{
    return k->type == SHMOBJ_TYPE_STR && shmobj__mstr_fits(k->ptr, k->len);
}

static int key_slot_make(struct shmobj__mc *c, const shmobj_key *k, int v3, struct key_slot *ks)
{
    ks->child = 0;
    ks->used = 0;
    if (k->type == SHMOBJ_TYPE_INT) {
        ks->tag = SHMOBJ__SLOT_INT;
        ks->w0 = SHMOBJ__SLOT_INT;
        ks->payload = (uint64_t)k->i;
    } else if (k->type == SHMOBJ_TYPE_STR && k->len <= SHMOBJ__SSTR_MAX) {
        ks->tag = SHMOBJ__SLOT_SSTR;
        ks->w0 = SHMOBJ__SLOT_SSTR | k->len << 8;
        ks->payload = k->word_;
    } else if (v3 && key_medium(k)) {
        ks->tag = SHMOBJ__SLOT_MSTR;
        ks->w0 = shmobj__mstr_w0(k->ptr);
        ks->payload = shmobj__mstr_w1(k->ptr, k->len);
    } else {
        shmobj_value d = {.type = k->type, .v = {.s = {k->ptr, (size_t)k->len}}};
        int rc = shmobj__obj_put(c->sp, &d, &ks->child);
        if (rc != 0)
            return rc;
        ks->tag = SHMOBJ__SLOT_OBJ;
        ks->w0 = SHMOBJ__SLOT_OBJ;
        ks->payload = ks->child;
    }
    return 0;
}

/* Before the lock: a key that needs a child and that a read finds absent
 * (it will most likely be inserted) has its child built now, so that the
 * lock is not held across the builder's allocation (the segment's lock).
 * ks->tag 0: none built (the insert builds its own). A medium key needs
 * none (every body made now is version 3; in a version 2 one the insert
 * builds it under the lock). */
static void key_slot_early(struct shmobj__mc *c, const shmobj_key *k, int absent,
                           struct key_slot *ks)
{
    ks->tag = 0;
    ks->child = 0;
    ks->used = 0;
    if (k->type == SHMOBJ_TYPE_INT ||
        (k->type == SHMOBJ_TYPE_STR && k->len <= SHMOBJ__SSTR_MAX) || key_medium(k))
        return;
    if ((absent || shmobj__mdict_has(c, k) == SHMOBJ_ENOTFOUND) &&
        key_slot_make(c, k, 0, ks) != 0)
        ks->tag = 0;
}

/* After the lock: the early child when no insert took it. */
static void key_slot_done(struct shmobj__mc *c, const struct key_slot *ks)
{
    if (ks->tag != 0 && !ks->used)
        shmobj__mut_child_free(c->sp, ks->child);
}

/* Insert key k (absent) with the value item it; the key's slot is pre
 * when an early one was built (pre->tag != 0), else built here. */
static int insert_new(struct shmobj__mc *c, const shmobj_key *k, const struct shmobj__mitem *it,
                      struct key_slot *pre, const struct shmobj__mdbody *bp, uint64_t len, int have,
                      uint64_t free_at)
{
    struct shmobj__mut *m = c->m;
    struct shmobj__mdbody b;
    uint64_t pair;
    int rc;
    if (have)
        b = *bp;
    /* the caller's find gave free_at in this body; a new one is probed
     * anew */
    if (!have || len == b.pcap) {
        rc = shmobj__mdict_rebuild(c, &b, &len, have);
        if (rc != 0)
            return rc;
        rc = shmobj__mdict_find(c, &b, len, k, &pair, &free_at, NULL);
        if (rc != SHMOBJ_ENOTFOUND)
            return rc == 0 ? SHMOBJ_ECORRUPT : rc;
    }
    struct key_slot own, *ks = pre;
    if (ks->tag == 0) {
        rc = key_slot_make(c, k, b.v3, &own);
        if (rc != 0)
            return rc;
        ks = &own;
    }
    uint64_t kw0 = ks->w0, kpl = ks->payload;
    shmobj__ref kchild = ks->child;
    ks->used = 1;
    /* An intent only when a block comes in: the repair after a kill
     * anywhere in the lock (the next locker's EOWNERDEAD, or seq odd)
     * rebuilds the index from the pairs below len and recounts them,
     * which is all an insert of inline items needs; the intent's repair
     * adds the freeing of blocks no pair holds. */
    int blocks = it->child != 0 || kchild != 0;
    if (blocks) {
        atomic_store_explicit(&m->at, len, memory_order_relaxed);
        atomic_store_explicit(&m->spare, it->child, memory_order_relaxed);
        atomic_store_explicit(&m->spare2, kchild, memory_order_relaxed);
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_PUT, memory_order_relaxed);
    }
    SHMOBJ__STEP("mdict.insert.intent");
    uint64_t o = atomic_load_explicit(&m->order, memory_order_relaxed);
    shmobj__mut_wbegin(m);
    shmobj__mut_key_put(&b.pairs[2 * len], kw0, kpl);
    shmobj__mut_slot_put(&b.pairs[2 * len + 1], it->tag, 0, it->payload);
    atomic_store_explicit((_Atomic uint64_t *)(void *)&b.orders[len], o, memory_order_relaxed);
    atomic_store_explicit(&m->order, o + 1, memory_order_relaxed);
    atomic_store_explicit(&m->len, len + 1, memory_order_relaxed);
    atomic_store_explicit(&m->count, atomic_load_explicit(&m->count, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit((_Atomic uint64_t *)(void *)&b.ix[free_at],
                          shmobj__index_entry(len, k->hash_), memory_order_relaxed);
    shmobj__mut_wend(m);
    SHMOBJ__STEP("mdict.insert.published");
    if (blocks) {
        atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
        atomic_store_explicit(&m->spare2, 0, memory_order_relaxed);
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    }
    return 0;
}

/* Set (or add, with exist_err) key k to item it (lock held); pre: as
 * insert_new(). */
static int put_locked(struct shmobj__mc *c, const shmobj_key *k, const struct shmobj__mitem *it,
                      int exist_err, struct key_slot *pre, const struct absent_at *ab)
{
    struct shmobj__mut *m = c->m;
    struct shmobj__mdbody b;
    uint64_t len = 0, pair, free_at = 0;
    /* seen absent in this body while seq held ab->s, and seq still has
     * it: no key, len or body changed since (each changes inside a
     * section), so the key is absent and free_at the entry it takes */
    if (ab != NULL && ab->have && atomic_load_explicit(&m->seq, memory_order_relaxed) == ab->s)
        return insert_new(c, k, it, pre, &ab->b, ab->len, 1, ab->free_at);
    int rc = shmobj__mdict_body_now(c, &b, &len);
    if (rc < 0)
        return rc;
    int have = rc == 0;
    if (have) {
        rc = shmobj__mdict_find(c, &b, len, k, &pair, &free_at, NULL);
        if (rc == 0) {
            if (exist_err)
                return SHMOBJ_EEXIST;
            struct shmobj__slot *vs = &b.pairs[2 * pair + 1];
            /* an int over an int is the lock-free store's one atomic store:
             * an add without the lock that found this slot lands before or
             * after it, both in an int, so it needs no wait for the adder
             * word (nor an intent: no block comes or goes) */
            if (vs->tag == SHMOBJ__SLOT_INT && it->tag == SHMOBJ__SLOT_INT) {
                atomic_store_explicit(&vs->payload, it->payload, memory_order_release);
                return 0;
            }
            shmobj__ref old = shmobj__mdict_pair_child(&b, pair, 1);
            atomic_store_explicit(&m->at, pair, memory_order_relaxed);
            atomic_store_explicit(&m->spare, it->child, memory_order_relaxed);
            atomic_store_explicit(&m->retired, old, memory_order_relaxed);
            atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_PUT, memory_order_relaxed);
            shmobj__mut_wbegin(m);
            /* an add without the lock must not land in the new value */
            rc = shmobj__mut_adders_drain(c);
            if (rc != 0) {
                shmobj__mut_wend(m);
                atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
                atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
                atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
                return rc;
            }
            SHMOBJ__STEP("mdict.replace.drained");
            shmobj__mut_slot_put(vs, it->tag, 0, it->payload);
            shmobj__mut_wend(m);
            SHMOBJ__STEP("mdict.replace.stored");
            atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
            shmobj__mut_child_free(c->sp, old);
            atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
            atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
            return 0;
        }
        if (rc != SHMOBJ_ENOTFOUND)
            return rc;
    }
    return insert_new(c, k, it, pre, &b, len, have, free_at);
}

int shmobj_mdict_set(const shmobj_view *dict, const shmobj_value *key, const shmobj_value *val)
{
    if (shmobj__view_writable(dict) != 0)
        return SHMOBJ_ERDONLY;
    struct shmobj__mc c;
    shmobj_key k;
    struct shmobj__mitem it;
    if (val == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__mdict_begin(dict, 1u << SHMOBJ_TYPE_MDICT, key, &c, &k);
    if (rc != 0)
        return rc;
    /* an int over an int: one atomic store, without the lock when it can
     * (on copies of the handle and key whose addresses no call takes) */
    int absent = 0;
    struct absent_at ab;
    ab.have = 0;
    if (val->type == SHMOBJ_TYPE_INT && val->reserved == 0) {
        struct shmobj__mc fc = c;
        shmobj_key fk = k;
        rc = int_try_unlocked(&fc, &fk, val->v.i, 1, NULL, &ab);
        if (rc == 0)
            return 0;
        absent = rc == 2;
        if (absent)
            SHMOBJ__STEP("mdict.set.absent");
    }
    rc = shmobj__mut_item_make(c.sp, val, &it);
    if (rc != 0)
        return rc;
    struct key_slot pre;
    key_slot_early(&c, &k, absent, &pre);
    rc = shmobj__mut_lock(&c);
    if (rc == 0) {
        rc = put_locked(&c, &k, &it, 0, &pre, &ab);
        shmobj__mut_unlock(&c);
    }
    key_slot_done(&c, &pre);
    if (rc != 0)
        shmobj__mut_item_drop(c.sp, &it);
    return rc;
}

int shmobj_mset_add(const shmobj_view *set, const shmobj_value *key)
{
    if (shmobj__view_writable(set) != 0)
        return SHMOBJ_ERDONLY;
    struct shmobj__mc c;
    shmobj_key k;
    struct shmobj__mitem it = {SHMOBJ__SLOT_OBJ, 0, 0, 0};
    int rc = shmobj__mdict_begin(set, 1u << SHMOBJ_TYPE_MSET, key, &c, &k);
    if (rc != 0)
        return rc;
    struct key_slot pre;
    key_slot_early(&c, &k, 0, &pre);
    rc = shmobj__mut_lock(&c);
    if (rc == 0) {
        rc = put_locked(&c, &k, &it, 1, &pre, NULL);
        shmobj__mut_unlock(&c);
    }
    key_slot_done(&c, &pre);
    return rc;
}

int shmobj_mut_delete(const shmobj_view *cv, const shmobj_value *key)
{
    if (shmobj__view_writable(cv) != 0)
        return SHMOBJ_ERDONLY;
    struct shmobj__mc c;
    shmobj_key k;
    struct shmobj__mdbody b;
    uint64_t len = 0, pair;
    int rc = shmobj__mdict_begin(cv, SHMOBJ__MD_KINDS, key, &c, &k);
    if (rc != 0)
        return rc;
    /* An absent key needs no lock: a read that held seq saw it absent, and
     * the delete takes effect there. The first try of that read is made
     * here (shmobj__mut_read()'s, which the others are): a present key
     * found while seq held s is still at that pair once the lock is had if
     * seq is still s, since every change of a key, of len or of the body
     * is made inside a section, and the lock holder does not find it
     * again. */
    uint64_t s = atomic_load_explicit(&c.m->seq, memory_order_acquire);
    int seen = 0;
    b.pairs = NULL; /* set when seen (the compiler cannot tell) */
    pair = 0;
    if (!(s & 1)) {
        rc = shmobj__mdict_locate(&c, &k, &b, &len, &pair);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&c.m->seq, memory_order_relaxed) == s) {
            if (!shmobj__obj_live(cv))
                return SHMOBJ_ESTALE;
            if (rc == SHMOBJ_ENOTFOUND)
                return SHMOBJ_ENOTFOUND;
            seen = rc == 0;
        }
    }
    if (!seen && shmobj__mdict_has(&c, &k) == SHMOBJ_ENOTFOUND)
        return SHMOBJ_ENOTFOUND;
    SHMOBJ__STEP("mdict.delete.seen");
    rc = shmobj__mut_lock(&c);
    if (rc != 0)
        return rc;
    struct shmobj__mut *m = c.m;
    shmobj__ref kc = 0, vc = 0;
    if (!seen || atomic_load_explicit(&m->seq, memory_order_relaxed) != s)
        rc = shmobj__mdict_locate(&c, &k, &b, &len, &pair);
    else
        rc = 0;
    if (rc == 0) {
        kc = shmobj__mdict_pair_child(&b, pair, 0);
        vc = shmobj__mdict_pair_child(&b, pair, 1);
        /* an intent only when the pair holds a block (as an insert's):
         * the repair after a kill in the lock recounts the pairs, all
         * that the hole of an inline key and value needs */
        int blocks = kc != 0 || vc != 0;
        if (blocks) {
            atomic_store_explicit(&m->at, pair, memory_order_relaxed);
            atomic_store_explicit(&m->retired, kc, memory_order_relaxed);
            atomic_store_explicit(&m->retired2, vc, memory_order_relaxed);
            atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_REMOVE, memory_order_relaxed);
        }
        shmobj__mut_wbegin(m);
        /* the commit: one store makes the pair a hole */
        b.pairs[2 * pair].tag = SHMOBJ__SLOT_HOLE;
        atomic_store_explicit(&m->count, atomic_load_explicit(&m->count, memory_order_relaxed) - 1,
                              memory_order_relaxed);
        shmobj__mut_wend(m);
        SHMOBJ__STEP("mdict.delete.hole");
        if (blocks) {
            atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
            atomic_store_explicit(&m->retired2, 0, memory_order_relaxed);
            atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
        }
    }
    shmobj__mut_unlock(&c);
    SHMOBJ__STEP("mdict.delete.unlocked");
    /* The hole's children are the delete's alone once the section is
     * over (no pair names them: a rebuild copies only live pairs, a clear
     * frees only theirs), so they are freed after the lock, which is not
     * held across the heap's; a kill before the frees leaks them. */
    shmobj__mut_child_free(c.sp, kc);
    shmobj__mut_child_free(c.sp, vc);
    return rc;
}

int shmobj__mdict_clear(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    shmobj__ref old = atomic_load_explicit(&m->body, memory_order_relaxed);
    atomic_store_explicit(&m->retired, old, memory_order_relaxed);
    atomic_store_explicit(&m->progress, atomic_load_explicit(&m->len, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_CLEAR, memory_order_relaxed);
    shmobj__mut_wbegin(m);
    /* the old body is freed below: no add without the lock may be in it */
    int rc = shmobj__mut_adders_drain(c);
    if (rc != 0) {
        shmobj__mut_wend(m);
        atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
        return rc;
    }
    atomic_store_explicit(&m->body, 0, memory_order_relaxed);
    atomic_store_explicit(&m->len, 0, memory_order_relaxed);
    atomic_store_explicit(&m->count, 0, memory_order_relaxed);
    shmobj__mut_wend(m);
    rc = shmobj__mdict_clear_finish(c);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    return rc;
}

/* The add under the lock: another adder, a writer, or a space without
 * tokens. The handle comes by value, so that the lock-free path's copy in
 * the caller never has its address taken (it stays in registers). */
static __attribute__((noinline)) int int_add_locked(struct shmobj__mc c, const shmobj_key *key,
                                                    int64_t delta, int64_t *old)
{
    struct shmobj__mdbody b;
    uint64_t len = 0, pair;
    int rc = shmobj__mut_lock(&c);
    if (rc != 0)
        return rc;
    shmobj__mut_adder_reap(&c);
    rc = shmobj__mdict_locate(&c, key, &b, &len, &pair);
    SHMOBJ__STEP("mdict.int.locked");
    if (rc == 0)
        rc = add_found(&b.pairs[2 * pair + 1], delta, old);
    shmobj__mut_unlock(&c);
    return rc;
}

int shmobj_mdict_int_add(const shmobj_view *dict, const shmobj_key *key, int64_t delta,
                         int64_t *old)
{
    if (shmobj__view_writable(dict) != 0)
        return SHMOBJ_ERDONLY;
    struct shmobj__mc c;
    int rc = shmobj__mdict_open_key(dict, key, &c);
    if (rc != 0)
        return rc;
    rc = int_try_unlocked(&c, key, delta, 0, old, NULL);
    if (rc != 1)
        return rc;
    return int_add_locked(c, key, delta, old);
}
