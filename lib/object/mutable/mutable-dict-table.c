/* Mutable dicts and sets: the table core (bodies, key comparison, the
 * probe, the index and its rebuild, the growth of a body) and the repair
 * after a writer's death; the changes are in mutable-dict-change.c, the reads,
 * iteration, free and check in mutable-dict-read.c.
 *
 * Invariants kept here (with those of mutable-section.c, whose lock, sections and
 * optimistic reads these use):
 * - A body is written whole before it is published (the control block's
 *   body, inside a writer section) and grows only by a rebuild into a new
 *   body: the old one is freed after the new one is published, and a
 *   reader of the old one retries. The rebuild records the new body's
 *   pairs in the intent's at before it publishes, so that a repair after
 *   a kill between the stores of body and len gives len that number, not
 *   the old body's.
 * - Pairs are appended at len and never move inside a body: a delete
 *   turns the pair into a hole (its key slot's tag, one store), whose
 *   index entry stays until the next rebuild, so the probe of index-probe.h,
 *   the fixed dicts' own, is never cut short and needs no tombstone. A
 *   rebuild copies the live pairs in order, with their orders.
 * - A repair rebuilds the index from the pairs and recounts them, so a
 *   writer killed between a pair's publication (len) and its index entry
 *   leaves a key that is found; blocks recorded in the intent are freed
 *   unless the pair they were for holds them, and only those its op
 *   names: after a repair every block field of the intent is 0, so the
 *   fields a later intent's repair reads are that intent's own.
 * - A key slot holds an int, a short str or (in a version 3 body only) a
 *   medium str itself, and only a longer key names a child; the index is
 *   rebuilt from the slots' bytes alone for all three, so a pair whose
 *   key and value are inline needs no intent to be repaired.
 *
 * The protocol step by step, its memory orders and what a stalled or
 * killed process leaves: doc/protocols.md, section 4. */
#include "key-lookup.h"
#include "mutable.h"
#include "content-check.h"




/* The arena proves the block and its size (the check, rebuilds, repairs,
 * frees). */
static int body_open(struct shmobj__mc *c, shmobj__ref ref, struct shmobj__mdbody *b)
{
    uint64_t usable = 0;
    if (shmobj__mut_block(c->sp, ref, sizeof(struct shmobj__mbody), &b->off, &usable) != 0)
        return SHMOBJ_ECORRUPT; /* a published body is never freed */
    return shmobj__mdict_body_fill(c, ref, usable, b);
}

/* The body and len, read once: 0 with b filled, 1 for no body, or an
 * error. len is checked against the body's places. */
int shmobj__mdict_body_how(struct shmobj__mc *c, struct shmobj__mdbody *b, uint64_t *len,
                           int strong)
{
    shmobj__ref ref = atomic_load_explicit(&c->m->body, memory_order_acquire);
    uint64_t n = atomic_load_explicit(&c->m->len, memory_order_acquire);
    if (ref == 0)
        return n == 0 ? 1 : SHMOBJ_ECORRUPT;
    int rc = strong ? body_open(c, ref, b) : shmobj__mdict_body_open_fast(c, ref, b);
    if (rc != 0)
        return rc;
    if (n > b->pcap)
        return SHMOBJ_ECORRUPT;
    *len = n;
    return 0;
}

int shmobj__mdict_places(struct shmobj__mc *c, uint64_t *count)
{
    struct shmobj__mdbody b;
    uint64_t len = 0, n = atomic_load_explicit(&c->m->count, memory_order_acquire);
    int rc = shmobj__mdict_body_now(c, &b, &len);
    if (rc < 0)
        return rc;
    if (n > len)
        return SHMOBJ_ECORRUPT;
    *count = n;
    return 0;
}

/* The view of a key held in a child of body b: a str or a bytes. */
static int key_child(struct shmobj__mc *c, const struct shmobj__mdbody *b, uint64_t pl,
                     shmobj_view *v)
{
    int rc = shmobj__view_follow(c->sp, pl, b->off, b->size, b->gen, v);
    if (rc != 0)
        return rc;
    return v->type != SHMOBJ_TYPE_STR && v->type != SHMOBJ_TYPE_BYTES ? SHMOBJ_ECORRUPT : 0;
}



/* A key held in a child, read on the hot paths: the child's block checked
 * as bodies are (its range mapped, its generation, one load: a key child
 * is freed only after the section that made its pair a hole, so a reader
 * that met a freed one retries), its tree header and root slot checked,
 * then the str or bytes object the root names, in the block: its kind,
 * its length and its bytes. The checker follows it with the arena's proof
 * (key_child). */
static int key_child_fast(struct shmobj__space *sp, uint64_t pl, struct shmobj__obj *h,
                          const uint8_t **bytes)
{
    uint64_t ob, size, off;
    void *p;
    if (shmobj__mut_block_fast(sp, pl, SHMOBJ__PREFIX + sizeof *h, &ob) != 0)
        return SHMOBJ_ECORRUPT;
    const struct shmobj__tree *t = (const void *)(sp->base + ob);
    const struct shmobj__slot *root = (const void *)(t + 1);
    size = t->size;
    uint64_t q = atomic_load_explicit(&((struct shmobj__slot *)root)->payload, memory_order_acquire);
    off = shmobj__ref_off(q);
    if (t->magic != SHMOBJ__TREE_MAGIC || !shmobj__tree_version_ok(t->version) ||
        root->tag != SHMOBJ__SLOT_OBJ || shmobj__ref_gen(q) != shmobj__ref_gen(pl) ||
        size < SHMOBJ__PREFIX + sizeof *h || off < ob + SHMOBJ__PREFIX ||
        !shmobj__aligned(off, 16) || off - ob > size - sizeof *h ||
        shmobj__space_at(sp, ob, size, &p) != 0)
        return SHMOBJ_ECORRUPT;
    memcpy(h, sp->base + off, sizeof *h);
    /* the bytes and their NUL lie in the block */
    if ((h->tag != SHMOBJ_TYPE_STR && h->tag != SHMOBJ_TYPE_BYTES) ||
        h->len >= size - (off - ob) - sizeof *h)
        return SHMOBJ_ECORRUPT;
    *bytes = sp->base + off + sizeof *h;
    return 0;
}

int shmobj__mdict_key_obj_eq(struct shmobj__space *sp, uint64_t pl, const shmobj_key *k)
{
    if (k->type == SHMOBJ_TYPE_INT || (k->type == SHMOBJ_TYPE_STR && k->len <= SHMOBJ__SSTR_MAX))
        return 0; /* such keys are never held in a child */
    struct shmobj__obj h;
    const uint8_t *bytes;
    int rc = key_child_fast(sp, pl, &h, &bytes);
    if (rc != 0)
        return rc;
    return h.tag == k->type && h.len == k->len && shmobj__mem_equal(bytes, k->ptr, k->len);
}

/* The hash of the key held by key slot ks of body b (a live pair). */
static int slot_hash(struct shmobj__mc *c, const struct shmobj__mdbody *b,
                     struct shmobj__slot *ks, uint64_t *h)
{
    uint64_t pl = atomic_load_explicit(&ks->payload, memory_order_relaxed);
    switch (ks->tag) {
    case SHMOBJ__SLOT_INT:
        *h = shmobj__hash_int((int64_t)pl);
        return 0;
    case SHMOBJ__SLOT_SSTR: {
        uint8_t n = ks->reserved0;
        if (n > SHMOBJ__SSTR_MAX)
            return SHMOBJ_ECORRUPT;
        *h = shmobj__hash_mem(SHMOBJ_TYPE_STR, &ks->payload, n);
        return 0;
    }
    case SHMOBJ__SLOT_MSTR: {
        /* the bytes from slot byte 1, their length where the last non-zero
         * byte of the payload lies */
        uint64_t n = shmobj__mstr_len(pl);
        if (n == 0 || !b->v3)
            return SHMOBJ_ECORRUPT;
        *h = shmobj__hash_mem(SHMOBJ_TYPE_STR, (const uint8_t *)ks + 1, n);
        return 0;
    }
    case SHMOBJ__SLOT_OBJ: {
        shmobj_view v;
        int rc = key_child(c, b, pl, &v);
        if (rc != 0)
            return rc;
        *h = shmobj__hash_mem(v.type, (const uint8_t *)v.obj + 16, v.len);
        return 0;
    }
    default:
        return SHMOBJ_ECORRUPT;
    }
}

/* Enter pair p into the index (no equal key is in it). */
static int index_enter(struct shmobj__mc *c, const struct shmobj__mdbody *b, uint64_t len,
                       uint64_t p)
{
    uint64_t h, item;
    struct shmobj__probe pr;
    int rc = slot_hash(c, b, &b->pairs[2 * p], &h);
    if (rc != 0)
        return rc;
    shmobj__probe_start(&pr, b->ix, b->cap, h);
    for (;;) {
        switch (shmobj__probe_next(&pr, len, &item)) {
        case SHMOBJ__PROBE_HIT:
            break;
        case SHMOBJ__PROBE_EMPTY:
            atomic_store_explicit((_Atomic uint64_t *)(void *)&b->ix[shmobj__probe_pos(&pr)],
                                  shmobj__index_entry(p, h), memory_order_relaxed);
            return 0;
        default:
            return SHMOBJ_ECORRUPT;
        }
    }
}

/* Index rebuilt from the live pairs, count and order recomputed (lock
 * held, inside a section or in a repair). */
static int reindex(struct shmobj__mc *c, const struct shmobj__mdbody *b, uint64_t len)
{
    uint64_t live = 0;
    memset(b->ix, 0, 8 * b->cap);
    for (uint64_t p = 0; p < len; p++) {
        if (b->pairs[2 * p].tag == SHMOBJ__SLOT_HOLE)
            continue;
        if (p > 0 && b->orders[p] <= b->orders[p - 1])
            return SHMOBJ_ECORRUPT;
        int rc = index_enter(c, b, len, p);
        if (rc != 0)
            return rc;
        live++;
    }
    atomic_store_explicit(&c->m->count, live, memory_order_relaxed);
    uint64_t o = atomic_load_explicit(&c->m->order, memory_order_relaxed);
    if (len > 0 && o <= b->orders[len - 1])
        atomic_store_explicit(&c->m->order, b->orders[len - 1] + 1, memory_order_relaxed);
    return 0;
}

/* Does live pair p (< len) hold block r in its key or value slot? */
static int pair_holds(const struct shmobj__mdbody *b, uint64_t len, uint64_t p, shmobj__ref r)
{
    if (p >= len || b->pairs[2 * p].tag == SHMOBJ__SLOT_HOLE)
        return 0;
    return shmobj__mdict_pair_child(b, p, 0) == r || shmobj__mdict_pair_child(b, p, 1) == r;
}

static void free_unless_held(struct shmobj__mc *c, const struct shmobj__mdbody *b, int have,
                             uint64_t len, uint64_t at, _Atomic uint64_t *rec)
{
    shmobj__ref r = atomic_load_explicit(rec, memory_order_relaxed);
    if (r != 0 && !(have && pair_holds(b, len, at, r)))
        shmobj__mut_child_free(c->sp, r);
    atomic_store_explicit(rec, 0, memory_order_relaxed);
}

/* Free the children of pairs [0, progress) of the cleared body `retired`,
 * then the body. */
int shmobj__mdict_clear_finish(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    shmobj__ref old = atomic_load_explicit(&m->retired, memory_order_relaxed);
    struct shmobj__mdbody ob;
    if (old != 0 && body_open(c, old, &ob) == 0) {
        uint64_t p = atomic_load_explicit(&m->progress, memory_order_relaxed);
        if (p > ob.pcap)
            p = ob.pcap;
        for (; p > 0; p--) {
            if (ob.pairs[2 * (p - 1)].tag != SHMOBJ__SLOT_HOLE) {
                shmobj__mut_child_free(c->sp, shmobj__mdict_pair_child(&ob, p - 1, 0));
                shmobj__mut_child_free(c->sp, shmobj__mdict_pair_child(&ob, p - 1, 1));
            }
            atomic_store_explicit(&m->progress, p - 1, memory_order_relaxed);
        }
        (void)c->sp->ops->free(c->sp, old);
    }
    atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
    return 0;
}

/* What the intent's op did not free is forgotten: a holder writes its
 * blocks before its op, so one killed in between left blocks that are
 * where they were (the value a replace had not replaced, the key a delete
 * had not deleted, the body a clear had not cleared) or were never handed
 * over (a leak); kept, they would be freed by the repair of a later
 * intent that never named them. (retired is a clear's, and its finish
 * clears it.) */
static void forget_blocks(struct shmobj__mut *m)
{
    atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
    atomic_store_explicit(&m->spare2, 0, memory_order_relaxed);
    if (atomic_load_explicit(&m->op, memory_order_relaxed) != SHMOBJ__MUT_OP_CLEAR)
        atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
    atomic_store_explicit(&m->retired2, 0, memory_order_relaxed);
}

int shmobj__mdict_repair(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    uint64_t op = atomic_load_explicit(&m->op, memory_order_relaxed);
    uint64_t at = atomic_load_explicit(&m->at, memory_order_relaxed);
    struct shmobj__mdbody b;
    uint64_t len = 0;
    if (op == SHMOBJ__MUT_OP_CLEAR) {
        atomic_store_explicit(&m->body, 0, memory_order_relaxed);
        atomic_store_explicit(&m->len, 0, memory_order_relaxed);
        atomic_store_explicit(&m->count, 0, memory_order_relaxed);
        forget_blocks(m); /* a clear names retired alone */
        return shmobj__mdict_clear_finish(c);
    }
    if (op == SHMOBJ__MUT_OP_REBUILD) {
        /* published (the body is the spare) or not: free the other one */
        shmobj__ref nb = atomic_load_explicit(&m->spare, memory_order_relaxed);
        shmobj__ref ob = atomic_load_explicit(&m->retired, memory_order_relaxed);
        shmobj__ref cur = atomic_load_explicit(&m->body, memory_order_relaxed);
        /* Published, len perhaps not yet: a holder killed between the two
         * stores left the old body's len, which counts places of the new
         * body that hold no pair (or lie past it). The new body's pairs are
         * the number recorded in at before its publication. */
        if (nb != 0 && nb == cur)
            atomic_store_explicit(&m->len, at, memory_order_relaxed);
        if (nb != 0 && nb != cur)
            (void)c->sp->ops->free(c->sp, nb);
        if (ob != 0 && ob != cur)
            (void)c->sp->ops->free(c->sp, ob);
        atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
        atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
    }
    int rc = shmobj__mdict_body_how(c, &b, &len, 1);
    if (rc < 0)
        return rc;
    int have = rc == 0;
    switch (op) {
    case SHMOBJ__MUT_OP_NONE:
    case SHMOBJ__MUT_OP_REBUILD:
        break;
    case SHMOBJ__MUT_OP_PUT:
        free_unless_held(c, &b, have, len, at, &m->spare);
        free_unless_held(c, &b, have, len, at, &m->spare2);
        free_unless_held(c, &b, have, len, at, &m->retired);
        break;
    case SHMOBJ__MUT_OP_REMOVE:
        free_unless_held(c, &b, have, len, at, &m->retired);
        free_unless_held(c, &b, have, len, at, &m->retired2);
        break;
    default:
        return SHMOBJ_ECORRUPT;
    }
    forget_blocks(m);
    if (!have) {
        atomic_store_explicit(&m->count, 0, memory_order_relaxed);
        return 0;
    }
    return reindex(c, &b, len);
}

/* ---- changes (lock held) ------------------------------------------------- */

/* A body with room for one more pair: a new body of the live pairs when
 * there is none or its places are used up. */
int shmobj__mdict_rebuild(struct shmobj__mc *c, struct shmobj__mdbody *b, uint64_t *len, int have)
{
    struct shmobj__mut *m = c->m;
    uint64_t live = have ? atomic_load_explicit(&m->count, memory_order_relaxed) : 0;
    uint64_t pcap = live < 4 ? 8 : 2 * live, cap;
    if (pcap > SHMOBJ__MD_MAX_PLACES)
        pcap = SHMOBJ__MD_MAX_PLACES;
    if (live >= pcap)
        return SHMOBJ_ERANGE;
    cap = shmobj__index_cap(pcap);
    shmobj__ref nr, old = have ? atomic_load_explicit(&m->body, memory_order_relaxed) : 0;
    atomic_store_explicit(&m->retired, old, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_REBUILD, memory_order_relaxed);
    int rc = c->sp->ops->alloc(c->sp, shmobj__mdict_body_bytes(cap, pcap), 16, &nr);
    if (rc != 0) {
        atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
        return rc;
    }
    atomic_store_explicit(&m->spare, nr, memory_order_relaxed);
    SHMOBJ__STEP("mdict.rebuild.allocated");
    void *p;
    rc = shmobj__space_at(c->sp, shmobj__ref_off(nr), shmobj__mdict_body_bytes(cap, pcap), &p);
    if (rc != 0)
        return rc; /* the intent frees it */
    struct shmobj__mbody h = {SHMOBJ__MBODY_MAGIC3, (uint8_t)c->type, 0, 0, cap, pcap, 0};
    memcpy(p, &h, sizeof h);
    struct shmobj__mdbody nb;
    rc = body_open(c, nr, &nb);
    if (rc != 0)
        return rc;
    memset(nb.ix, 0, 8 * cap);
    /* The copy is made inside the section, once no add without the lock
     * is under way: one after it would land in the old body. */
    shmobj__mut_wbegin(m);
    rc = shmobj__mut_adders_drain(c);
    if (rc != 0) {
        shmobj__mut_wend(m);
        (void)c->sp->ops->free(c->sp, nr);
        atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
        atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
        return rc;
    }
    uint64_t j = 0;
    for (uint64_t q = 0; have && q < *len; q++) {
        if (b->pairs[2 * q].tag == SHMOBJ__SLOT_HOLE)
            continue;
        if (j == pcap)
            return SHMOBJ_ECORRUPT; /* count disagreed with the pairs */
        memcpy(&nb.pairs[2 * j], &b->pairs[2 * q], 32);
        nb.orders[j] = b->orders[q];
        j++;
    }
    for (uint64_t q = 0; q < j; q++) {
        rc = index_enter(c, &nb, j, q);
        if (rc != 0)
            return rc;
    }
    SHMOBJ__STEP("mdict.rebuild.copied");
    /* the new body's len, for a repair after a kill between the store of
     * body and that of len */
    atomic_store_explicit(&m->at, j, memory_order_relaxed);
    atomic_store_explicit(&m->body, nr, memory_order_relaxed);
    atomic_store_explicit(&m->len, j, memory_order_relaxed);
    atomic_store_explicit(&m->count, j, memory_order_relaxed);
    shmobj__mut_wend(m);
    SHMOBJ__STEP("mdict.rebuild.published");
    atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
    if (old != 0)
        (void)c->sp->ops->free(c->sp, old);
    atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    *b = nb;
    *len = j;
    return 0;
}

/* A key description made ready: kind, UTF-8, hash. */
static int key_desc(const shmobj_value *kv, shmobj_key *k)
{
    if (kv->reserved != 0)
        return SHMOBJ_EINVAL;
    int rc = shmobj__desc_key(kv, k);
    if (rc != 0)
        return rc;
    if (k->type == SHMOBJ_TYPE_STR && !shmobj__utf8_ok(k->ptr, k->len))
        return SHMOBJ_EINVAL;
    shmobj__key_prepare(k);
    return 0;
}

int shmobj__mdict_begin(const shmobj_view *v, unsigned kinds, const shmobj_value *kv,
                        struct shmobj__mc *c, shmobj_key *k)
{
    if (v == NULL || kv == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__mut_open(v, kinds, c);
    if (rc != 0)
        return rc;
    return key_desc(kv, k);
}
