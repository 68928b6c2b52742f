/* Mutable dicts and sets: bodies, lookups, changes, iteration, the repair
 * after a writer's death, and the check.
 *
 * Invariants kept here (with those of objmut.c, whose lock, sections and
 * optimistic reads these use):
 * - A body is written whole before it is published (the control block's
 *   body, inside a writer section) and grows only by a rebuild into a new
 *   body: the old one is freed after the new one is published, and a
 *   reader of the old one retries.
 * - Pairs are appended at len and never move inside a body: a delete
 *   turns the pair into a hole (its key slot's tag, one store), whose
 *   index entry stays until the next rebuild, so the probe of objindex.h,
 *   the fixed dicts' own, is never cut short and needs no tombstone. A
 *   rebuild copies the live pairs in order, with their orders.
 * - orders[p] ascends with p and orders only grow, so an iteration that
 *   resumes at the first pair whose order is past the last it returned
 *   sees every key present throughout exactly once, whatever rebuilds
 *   happened in between.
 * - A repair rebuilds the index from the pairs and recounts them, so a
 *   writer killed between a pair's publication (len) and its index entry
 *   leaves a key that is found; blocks recorded in the intent are freed
 *   unless the pair they were for holds them. */
#include "objlookup.h"
#include "objmut.h"
#include "objvalid.h"

#define MD_KINDS (1u << SHMOBJ_TYPE_MDICT | 1u << SHMOBJ_TYPE_MSET)
#define MD_MAX_PLACES (UINT64_C(1) << 31)

/* A checked body: its header copied, its parts' addresses. */
struct body {
    uint64_t off, size;
    uint16_t gen;
    uint64_t cap, pcap;
    uint64_t *ix;
    struct shmobj__slot *pairs; /* key slot 2p, value slot 2p + 1 */
    uint64_t *orders;
};

static uint64_t body_bytes(uint64_t cap, uint64_t pcap)
{
    return sizeof(struct shmobj__mbody) + 8 * cap + 40 * pcap;
}

/* strong: the arena proves the block and its size (the check, rebuilds,
 * repairs, frees); else the hot paths' checks (shmobj__mut_block_fast). */
static int body_open_how(struct shmobj__mc *c, shmobj__ref ref, struct body *b, int strong)
{
    uint64_t usable = UINT64_MAX;
    int rc = strong ? shmobj__mut_block(c->sp, ref, sizeof(struct shmobj__mbody), &b->off,
                                        &usable)
                    : shmobj__mut_block_fast(c->sp, ref, sizeof(struct shmobj__mbody), &b->off);
    if (rc != 0)
        return SHMOBJ_ECORRUPT; /* a published body is never freed */
    struct shmobj__mbody h;
    memcpy(&h, c->sp->base + b->off, sizeof h);
    if (h.magic != SHMOBJ__MBODY_MAGIC || h.kind != c->type || h.cap < 2 ||
        (h.cap & (h.cap - 1)) != 0 || h.pcap == 0 || h.pcap > MD_MAX_PLACES ||
        4 * h.pcap > 3 * h.cap || h.cap > (UINT64_C(1) << 33))
        return SHMOBJ_ECORRUPT;
    b->size = body_bytes(h.cap, h.pcap);
    if (b->size > usable)
        return SHMOBJ_ECORRUPT;
    void *p;
    rc = shmobj__space_at(c->sp, b->off, b->size, &p);
    if (rc != 0)
        return rc;
    b->gen = shmobj__ref_gen(ref);
    b->cap = h.cap;
    b->pcap = h.pcap;
    b->ix = (uint64_t *)(void *)((uint8_t *)p + sizeof h);
    b->pairs = (struct shmobj__slot *)(void *)(b->ix + h.cap);
    b->orders = (uint64_t *)(void *)(b->pairs + 2 * h.pcap);
    return 0;
}

static int body_open(struct shmobj__mc *c, shmobj__ref ref, struct body *b)
{
    return body_open_how(c, ref, b, 1);
}

/* The body and len, read once: 0 with b filled, 1 for no body, or an
 * error. len is checked against the body's places. */
static int body_now_how(struct shmobj__mc *c, struct body *b, uint64_t *len, int strong)
{
    shmobj__ref ref = atomic_load_explicit(&c->m->body, memory_order_acquire);
    uint64_t n = atomic_load_explicit(&c->m->len, memory_order_acquire);
    if (ref == 0)
        return n == 0 ? 1 : SHMOBJ_ECORRUPT;
    int rc = body_open_how(c, ref, b, strong);
    if (rc != 0)
        return rc;
    if (n > b->pcap)
        return SHMOBJ_ECORRUPT;
    *len = n;
    return 0;
}

/* The hot paths' body: lookups, sets, deletes, adds, iteration. */
static int body_now(struct shmobj__mc *c, struct body *b, uint64_t *len)
{
    return body_now_how(c, b, len, 0);
}

static inline uint64_t ld(const uint64_t *p)
{
    return atomic_load_explicit((_Atomic uint64_t *)(uintptr_t)p, memory_order_relaxed);
}

int shmobj__mdict_places(struct shmobj__mc *c, uint64_t *count)
{
    struct body b;
    uint64_t len = 0, n = atomic_load_explicit(&c->m->count, memory_order_acquire);
    int rc = body_now(c, &b, &len);
    if (rc < 0)
        return rc;
    if (n > len)
        return SHMOBJ_ECORRUPT;
    *count = n;
    return 0;
}

/* Does the key slot of pair p hold the prepared key k? 1, 0, or an error. */
static int key_eq(struct shmobj__mc *c, const struct body *b, uint64_t p, const shmobj_key *k)
{
    struct shmobj__slot *ks = &b->pairs[2 * p];
    uint8_t tag = ks->tag;
    uint64_t pl = atomic_load_explicit(&ks->payload, memory_order_relaxed);
    switch (tag) {
    case SHMOBJ__SLOT_HOLE:
        return 0;
    case SHMOBJ__SLOT_INT:
        return k->type == SHMOBJ_TYPE_INT && (int64_t)pl == k->i;
    case SHMOBJ__SLOT_SSTR:
        return shmobj__key_sstr_equal(ks->reserved0, pl, k);
    case SHMOBJ__SLOT_OBJ: {
        if (k->type == SHMOBJ_TYPE_INT ||
            (k->type == SHMOBJ_TYPE_STR && k->len <= SHMOBJ__SSTR_MAX))
            return 0; /* such keys are never held in a child */
        shmobj_view v;
        int rc = shmobj__view_follow(c->sp, pl, b->off, b->size, b->gen, &v);
        if (rc != 0)
            return rc;
        if (v.type != SHMOBJ_TYPE_STR && v.type != SHMOBJ_TYPE_BYTES)
            return SHMOBJ_ECORRUPT;
        return v.type == k->type && v.len == k->len &&
               shmobj__mem_equal((const uint8_t *)v.obj + 16, k->ptr, k->len);
    }
    default:
        return SHMOBJ_ECORRUPT;
    }
}

/* Find a key: its pair (0), or SHMOBJ_ENOTFOUND with the empty index
 * entry a new key takes in *free_at. */
static int find(struct shmobj__mc *c, const struct body *b, uint64_t len, const shmobj_key *k,
                uint64_t *pair, uint64_t *free_at, uint64_t *probes)
{
    struct shmobj__probe p;
    uint64_t item;
    shmobj__probe_start(&p, b->ix, b->cap, k->hash_);
    for (;;) {
        int step = shmobj__probe_next(&p, len, &item);
        if (probes != NULL)
            *probes = shmobj__probe_reads(&p, step);
        switch (step) {
        case SHMOBJ__PROBE_HIT: {
            int eq = key_eq(c, b, item, k);
            if (eq < 0)
                return eq;
            if (eq) {
                *pair = item;
                return 0;
            }
            break;
        }
        case SHMOBJ__PROBE_EMPTY:
            if (free_at != NULL)
                *free_at = shmobj__probe_pos(&p);
            return SHMOBJ_ENOTFOUND;
        default:
            return SHMOBJ_ECORRUPT;
        }
    }
}

/* The hash of the key held by key slot ks of body b (a live pair). */
static int slot_hash(struct shmobj__mc *c, const struct body *b, struct shmobj__slot *ks,
                     uint64_t *h)
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
    case SHMOBJ__SLOT_OBJ: {
        shmobj_view v;
        int rc = shmobj__view_follow(c->sp, pl, b->off, b->size, b->gen, &v);
        if (rc != 0)
            return rc;
        if (v.type != SHMOBJ_TYPE_STR && v.type != SHMOBJ_TYPE_BYTES)
            return SHMOBJ_ECORRUPT;
        *h = shmobj__hash_mem(v.type, (const uint8_t *)v.obj + 16, v.len);
        return 0;
    }
    default:
        return SHMOBJ_ECORRUPT;
    }
}

/* Enter pair p into the index (no equal key is in it). */
static int index_enter(struct shmobj__mc *c, const struct body *b, uint64_t len, uint64_t p)
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
static int reindex(struct shmobj__mc *c, const struct body *b, uint64_t len)
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

static inline shmobj__ref pair_child(const struct body *b, uint64_t p, int value)
{
    struct shmobj__slot *s = &b->pairs[2 * p + (value ? 1 : 0)];
    return shmobj__mut_child_of(s->tag, atomic_load_explicit(&s->payload, memory_order_relaxed));
}

/* Does live pair p (< len) hold block r in its key or value slot? */
static int pair_holds(const struct body *b, uint64_t len, uint64_t p, shmobj__ref r)
{
    if (p >= len || b->pairs[2 * p].tag == SHMOBJ__SLOT_HOLE)
        return 0;
    return pair_child(b, p, 0) == r || pair_child(b, p, 1) == r;
}

static void free_unless_held(struct shmobj__mc *c, const struct body *b, int have, uint64_t len,
                             uint64_t at, _Atomic uint64_t *rec)
{
    shmobj__ref r = atomic_load_explicit(rec, memory_order_relaxed);
    if (r != 0 && !(have && pair_holds(b, len, at, r)))
        shmobj__mut_child_free(c->sp, r);
    atomic_store_explicit(rec, 0, memory_order_relaxed);
}

/* Free the children of pairs [0, progress) of the cleared body `retired`,
 * then the body. */
static int clear_finish(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    shmobj__ref old = atomic_load_explicit(&m->retired, memory_order_relaxed);
    struct body ob;
    if (old != 0 && body_open(c, old, &ob) == 0) {
        uint64_t p = atomic_load_explicit(&m->progress, memory_order_relaxed);
        if (p > ob.pcap)
            p = ob.pcap;
        for (; p > 0; p--) {
            if (ob.pairs[2 * (p - 1)].tag != SHMOBJ__SLOT_HOLE) {
                shmobj__mut_child_free(c->sp, pair_child(&ob, p - 1, 0));
                shmobj__mut_child_free(c->sp, pair_child(&ob, p - 1, 1));
            }
            atomic_store_explicit(&m->progress, p - 1, memory_order_relaxed);
        }
        (void)c->sp->ops->free(c->sp, old);
    }
    atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
    return 0;
}

int shmobj__mdict_repair(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    uint64_t op = atomic_load_explicit(&m->op, memory_order_relaxed);
    uint64_t at = atomic_load_explicit(&m->at, memory_order_relaxed);
    struct body b;
    uint64_t len = 0;
    if (op == SHMOBJ__MUT_OP_CLEAR) {
        atomic_store_explicit(&m->body, 0, memory_order_relaxed);
        atomic_store_explicit(&m->len, 0, memory_order_relaxed);
        atomic_store_explicit(&m->count, 0, memory_order_relaxed);
        return clear_finish(c);
    }
    if (op == SHMOBJ__MUT_OP_REBUILD) {
        /* published (the body is the spare) or not: free the other one */
        shmobj__ref nb = atomic_load_explicit(&m->spare, memory_order_relaxed);
        shmobj__ref ob = atomic_load_explicit(&m->retired, memory_order_relaxed);
        shmobj__ref cur = atomic_load_explicit(&m->body, memory_order_relaxed);
        if (nb != 0 && nb != cur)
            (void)c->sp->ops->free(c->sp, nb);
        if (ob != 0 && ob != cur)
            (void)c->sp->ops->free(c->sp, ob);
        atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
        atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
    }
    int rc = body_now_how(c, &b, &len, 1);
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
    if (!have) {
        atomic_store_explicit(&m->count, 0, memory_order_relaxed);
        return 0;
    }
    return reindex(c, &b, len);
}

/* ---- changes (lock held) ------------------------------------------------- */

/* A body with room for one more pair: a new body of the live pairs when
 * there is none or its places are used up. */
static int rebuild(struct shmobj__mc *c, struct body *b, uint64_t *len, int have)
{
    struct shmobj__mut *m = c->m;
    uint64_t live = have ? atomic_load_explicit(&m->count, memory_order_relaxed) : 0;
    uint64_t pcap = live < 4 ? 8 : 2 * live, cap;
    if (pcap > MD_MAX_PLACES)
        pcap = MD_MAX_PLACES;
    if (live >= pcap)
        return SHMOBJ_ERANGE;
    cap = shmobj__index_cap(pcap);
    shmobj__ref nr, old = have ? atomic_load_explicit(&m->body, memory_order_relaxed) : 0;
    atomic_store_explicit(&m->retired, old, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_REBUILD, memory_order_relaxed);
    int rc = c->sp->ops->alloc(c->sp, body_bytes(cap, pcap), 16, &nr);
    if (rc != 0) {
        atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
        return rc;
    }
    atomic_store_explicit(&m->spare, nr, memory_order_relaxed);
    void *p;
    rc = shmobj__space_at(c->sp, shmobj__ref_off(nr), body_bytes(cap, pcap), &p);
    if (rc != 0)
        return rc; /* the intent frees it */
    struct shmobj__mbody h = {SHMOBJ__MBODY_MAGIC, (uint8_t)c->type, 0, 0, cap, pcap, 0};
    memcpy(p, &h, sizeof h);
    struct body nb;
    rc = body_open(c, nr, &nb);
    if (rc != 0)
        return rc;
    memset(nb.ix, 0, 8 * cap);
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
    shmobj__mut_wbegin(m);
    atomic_store_explicit(&m->body, nr, memory_order_relaxed);
    atomic_store_explicit(&m->len, j, memory_order_relaxed);
    atomic_store_explicit(&m->count, j, memory_order_relaxed);
    shmobj__mut_wend(m);
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

/* Insert key k (absent; its empty entry free_at) with the value item it. */
static int insert_new(struct shmobj__mc *c, const shmobj_value *kv, const shmobj_key *k,
                      const struct shmobj__mitem *it)
{
    struct shmobj__mut *m = c->m;
    struct body b;
    uint64_t len = 0, pair, free_at = 0;
    int rc = body_now(c, &b, &len);
    if (rc < 0)
        return rc;
    int have = rc == 0;
    if (!have || len == b.pcap) {
        rc = rebuild(c, &b, &len, have);
        if (rc != 0)
            return rc;
    }
    rc = find(c, &b, len, k, &pair, &free_at, NULL);
    if (rc != SHMOBJ_ENOTFOUND)
        return rc == 0 ? SHMOBJ_ECORRUPT : rc;
    /* the key's slot: inline when it fits, else a child */
    uint8_t ktag, r0 = 0;
    uint64_t kpl;
    shmobj__ref kchild = 0;
    if (k->type == SHMOBJ_TYPE_INT) {
        ktag = SHMOBJ__SLOT_INT;
        kpl = (uint64_t)k->i;
    } else if (k->type == SHMOBJ_TYPE_STR && k->len <= SHMOBJ__SSTR_MAX) {
        ktag = SHMOBJ__SLOT_SSTR;
        r0 = (uint8_t)k->len;
        kpl = k->word_;
    } else {
        shmobj_value d = {.type = k->type, .v = {.s = {k->ptr, (size_t)k->len}}};
        (void)kv;
        rc = shmobj__obj_put(c->sp, &d, &kchild);
        if (rc != 0)
            return rc;
        ktag = SHMOBJ__SLOT_OBJ;
        kpl = kchild;
    }
    atomic_store_explicit(&m->at, len, memory_order_relaxed);
    atomic_store_explicit(&m->spare, it->child, memory_order_relaxed);
    atomic_store_explicit(&m->spare2, kchild, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_PUT, memory_order_relaxed);
    uint64_t o = atomic_load_explicit(&m->order, memory_order_relaxed);
    shmobj__mut_wbegin(m);
    shmobj__mut_slot_put(&b.pairs[2 * len], ktag, r0, kpl);
    shmobj__mut_slot_put(&b.pairs[2 * len + 1], it->tag, 0, it->payload);
    atomic_store_explicit((_Atomic uint64_t *)(void *)&b.orders[len], o, memory_order_relaxed);
    atomic_store_explicit(&m->order, o + 1, memory_order_relaxed);
    atomic_store_explicit(&m->len, len + 1, memory_order_relaxed);
    atomic_store_explicit(&m->count, atomic_load_explicit(&m->count, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit((_Atomic uint64_t *)(void *)&b.ix[free_at],
                          shmobj__index_entry(len, k->hash_), memory_order_relaxed);
    shmobj__mut_wend(m);
    atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
    atomic_store_explicit(&m->spare2, 0, memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    return 0;
}

/* Set (or add, with exist_err) key kv to item it (lock held). */
static int put_locked(struct shmobj__mc *c, const shmobj_value *kv, const shmobj_key *k,
                      const struct shmobj__mitem *it, int exist_err)
{
    struct shmobj__mut *m = c->m;
    struct body b;
    uint64_t len = 0, pair;
    int rc = body_now(c, &b, &len);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        rc = find(c, &b, len, k, &pair, NULL, NULL);
        if (rc == 0) {
            if (exist_err)
                return SHMOBJ_EEXIST;
            struct shmobj__slot *vs = &b.pairs[2 * pair + 1];
            shmobj__ref old = pair_child(&b, pair, 1);
            atomic_store_explicit(&m->at, pair, memory_order_relaxed);
            atomic_store_explicit(&m->spare, it->child, memory_order_relaxed);
            atomic_store_explicit(&m->retired, old, memory_order_relaxed);
            atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_PUT, memory_order_relaxed);
            shmobj__mut_wbegin(m);
            shmobj__mut_slot_put(vs, it->tag, 0, it->payload);
            shmobj__mut_wend(m);
            atomic_store_explicit(&m->spare, 0, memory_order_relaxed);
            shmobj__mut_child_free(c->sp, old);
            atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
            atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
            return 0;
        }
        if (rc != SHMOBJ_ENOTFOUND)
            return rc;
    }
    return insert_new(c, kv, k, it);
}

static int md_begin(const shmobj_view *v, unsigned kinds, const shmobj_value *kv,
                    struct shmobj__mc *c, shmobj_key *k)
{
    if (v == NULL || kv == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__mut_open(v, kinds, c);
    if (rc != 0)
        return rc;
    return key_desc(kv, k);
}

int shmobj_mdict_set(const shmobj_view *dict, const shmobj_value *key, const shmobj_value *val)
{
    struct shmobj__mc c;
    shmobj_key k;
    struct shmobj__mitem it;
    if (val == NULL)
        return SHMOBJ_EINVAL;
    int rc = md_begin(dict, 1u << SHMOBJ_TYPE_MDICT, key, &c, &k);
    if (rc != 0)
        return rc;
    rc = shmobj__mut_item_make(c.sp, val, &it);
    if (rc != 0)
        return rc;
    rc = shmobj__mut_lock(&c);
    if (rc == 0) {
        rc = put_locked(&c, key, &k, &it, 0);
        shmobj__mut_unlock(&c);
    }
    if (rc != 0)
        shmobj__mut_child_free(c.sp, it.child);
    return rc;
}

int shmobj_mset_add(const shmobj_view *set, const shmobj_value *key)
{
    struct shmobj__mc c;
    shmobj_key k;
    struct shmobj__mitem it = {SHMOBJ__SLOT_OBJ, 0, 0};
    int rc = md_begin(set, 1u << SHMOBJ_TYPE_MSET, key, &c, &k);
    if (rc != 0)
        return rc;
    rc = shmobj__mut_lock(&c);
    if (rc != 0)
        return rc;
    rc = put_locked(&c, key, &k, &it, 1);
    shmobj__mut_unlock(&c);
    return rc;
}

int shmobj_mut_delete(const shmobj_view *cv, const shmobj_value *key)
{
    struct shmobj__mc c;
    shmobj_key k;
    struct body b;
    uint64_t len = 0, pair;
    int rc = md_begin(cv, MD_KINDS, key, &c, &k);
    if (rc != 0)
        return rc;
    rc = shmobj__mut_lock(&c);
    if (rc != 0)
        return rc;
    struct shmobj__mut *m = c.m;
    rc = body_now(&c, &b, &len);
    if (rc == 1)
        rc = SHMOBJ_ENOTFOUND;
    else if (rc == 0)
        rc = find(&c, &b, len, &k, &pair, NULL, NULL);
    if (rc == 0) {
        shmobj__ref kc = pair_child(&b, pair, 0), vc = pair_child(&b, pair, 1);
        atomic_store_explicit(&m->at, pair, memory_order_relaxed);
        atomic_store_explicit(&m->retired, kc, memory_order_relaxed);
        atomic_store_explicit(&m->retired2, vc, memory_order_relaxed);
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_REMOVE, memory_order_relaxed);
        shmobj__mut_wbegin(m);
        /* the commit: one store makes the pair a hole */
        b.pairs[2 * pair].tag = SHMOBJ__SLOT_HOLE;
        atomic_store_explicit(&m->count, atomic_load_explicit(&m->count, memory_order_relaxed) - 1,
                              memory_order_relaxed);
        shmobj__mut_wend(m);
        shmobj__mut_child_free(c.sp, kc);
        shmobj__mut_child_free(c.sp, vc);
        atomic_store_explicit(&m->retired, 0, memory_order_relaxed);
        atomic_store_explicit(&m->retired2, 0, memory_order_relaxed);
        atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    }
    shmobj__mut_unlock(&c);
    return rc;
}

int shmobj__mdict_clear(struct shmobj__mc *c);
int shmobj__mdict_clear(struct shmobj__mc *c)
{
    struct shmobj__mut *m = c->m;
    shmobj__ref old = atomic_load_explicit(&m->body, memory_order_relaxed);
    atomic_store_explicit(&m->retired, old, memory_order_relaxed);
    atomic_store_explicit(&m->progress, atomic_load_explicit(&m->len, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_CLEAR, memory_order_relaxed);
    shmobj__mut_wbegin(m);
    atomic_store_explicit(&m->body, 0, memory_order_relaxed);
    atomic_store_explicit(&m->len, 0, memory_order_relaxed);
    atomic_store_explicit(&m->count, 0, memory_order_relaxed);
    shmobj__mut_wend(m);
    int rc = clear_finish(c);
    atomic_store_explicit(&m->op, SHMOBJ__MUT_OP_NONE, memory_order_relaxed);
    return rc;
}

int shmobj_mdict_int_add(const shmobj_view *dict, const shmobj_key *key, int64_t delta,
                         int64_t *old)
{
    struct shmobj__mc c;
    struct body b;
    uint64_t len = 0, pair;
    if (dict == NULL || key == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__mut_open(dict, 1u << SHMOBJ_TYPE_MDICT, &c);
    if (rc != 0)
        return rc;
    if (!shmobj__key_ready(key))
        return SHMOBJ_EINVAL;
    rc = shmobj__mut_lock(&c);
    if (rc != 0)
        return rc;
    rc = body_now(&c, &b, &len);
    if (rc == 1)
        rc = SHMOBJ_ENOTFOUND;
    else if (rc == 0)
        rc = find(&c, &b, len, key, &pair, NULL, NULL);
    if (rc == 0) {
        struct shmobj__slot *vs = &b.pairs[2 * pair + 1];
        if (vs->tag != SHMOBJ__SLOT_INT) {
            rc = SHMOBJ_ETYPE;
        } else {
            /* one atomic add: a reader sees the value before or after it,
             * so no writer section is needed */
            uint64_t o = atomic_fetch_add_explicit(&vs->payload, (uint64_t)delta,
                                                   memory_order_acq_rel);
            if (old != NULL)
                *old = (int64_t)o;
        }
    }
    shmobj__mut_unlock(&c);
    return rc;
}

/* ---- reads --------------------------------------------------------------- */

struct mget {
    const shmobj_key *k;
    shmobj_view *out; /* a view of the value (set: the member), or */
    int64_t *i;       /* an int value to read, or neither: contains */
    int want_key;
};

static int slot_view(struct shmobj__mc *c, const struct body *b, struct shmobj__slot *s,
                     shmobj_view *out)
{
    int rc = shmobj__view_slot(c->sp, shmobj__off_of(c->sp, s), b->off, b->size, b->gen, 1, out);
    out->flags |= SHMOBJ__VIEW_MUT;
    return rc;
}

static int get_read(struct shmobj__mc *c, void *arg)
{
    struct mget *g = arg;
    struct body b;
    uint64_t len = 0, pair;
    int rc = body_now(c, &b, &len);
    if (rc == 1)
        return SHMOBJ_ENOTFOUND;
    if (rc == 0)
        rc = find(c, &b, len, g->k, &pair, NULL, NULL);
    if (rc != 0)
        return rc;
    struct shmobj__slot *s = &b.pairs[2 * pair + (g->want_key ? 0 : 1)];
    if (g->i != NULL) {
        uint8_t tag = s->tag;
        uint64_t pl = atomic_load_explicit(&s->payload, memory_order_acquire);
        if (tag != SHMOBJ__SLOT_INT)
            return SHMOBJ_ETYPE;
        *g->i = (int64_t)pl;
        return 0;
    }
    return g->out != NULL ? slot_view(c, &b, s, g->out) : 0;
}

int shmobj__mdict_lookup(const shmobj_view *v, const shmobj_key *k, shmobj_view *item)
{
    struct shmobj__mc c;
    int rc = shmobj__mut_open(v, MD_KINDS, &c);
    if (rc != 0)
        return rc;
    struct mget g = {k, item, NULL, c.type == SHMOBJ_TYPE_MSET};
    return shmobj__mut_read(&c, get_read, &g);
}

int shmobj_mdict_get(const shmobj_view *dict, const shmobj_value *key, shmobj_view *val)
{
    struct shmobj__mc c;
    shmobj_key k;
    if (val == NULL)
        return SHMOBJ_EINVAL;
    int rc = md_begin(dict, 1u << SHMOBJ_TYPE_MDICT, key, &c, &k);
    if (rc != 0)
        return rc;
    struct mget g = {&k, val, NULL, 0};
    return shmobj__mut_read(&c, get_read, &g);
}

int shmobj_mdict_get_int(const shmobj_view *dict, const shmobj_key *key, int64_t *out)
{
    struct shmobj__mc c;
    int64_t x;
    if (dict == NULL || key == NULL || out == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__mut_open(dict, 1u << SHMOBJ_TYPE_MDICT, &c);
    if (rc != 0)
        return rc;
    if (!shmobj__key_ready(key))
        return SHMOBJ_EINVAL;
    struct mget g = {key, NULL, &x, 0};
    rc = shmobj__mut_read(&c, get_read, &g);
    if (rc == 0)
        *out = x;
    return rc;
}

int shmobj_mut_contains(const shmobj_view *cv, const shmobj_value *key)
{
    struct shmobj__mc c;
    shmobj_key k;
    int rc = md_begin(cv, MD_KINDS, key, &c, &k);
    if (rc != 0)
        return rc;
    struct mget g = {&k, NULL, NULL, 0};
    return shmobj__mut_read(&c, get_read, &g);
}

/* ---- iteration and ranks ------------------------------------------------- */

struct mnext {
    uint64_t from;   /* the smallest order wanted */
    uint64_t rank;   /* or: the rank wanted (UINT64_MAX: by order) */
    shmobj_view *key, *val;
    uint64_t found;  /* the order of the pair returned */
};

static int next_read(struct shmobj__mc *c, void *arg)
{
    struct mnext *n = arg;
    struct body b;
    uint64_t len = 0, p;
    int rc = body_now(c, &b, &len);
    if (rc == 1)
        return SHMOBJ_ENOTFOUND;
    if (rc != 0)
        return rc;
    if (n->rank != UINT64_MAX) {
        uint64_t live = atomic_load_explicit(&c->m->count, memory_order_relaxed);
        if (n->rank >= live)
            return SHMOBJ_ERANGE;
        if (live == len) {
            p = n->rank; /* no holes: rank is place */
        } else {
            uint64_t seen = 0;
            for (p = 0; p < len; p++) {
                if (b.pairs[2 * p].tag == SHMOBJ__SLOT_HOLE)
                    continue;
                if (seen++ == n->rank)
                    break;
            }
            if (p == len)
                return SHMOBJ_ERANGE;
        }
    } else {
        /* the first place whose order is n->from or more (orders ascend) */
        uint64_t lo = 0, hi = len;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (ld(&b.orders[mid]) < n->from)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (p = lo; p < len && b.pairs[2 * p].tag == SHMOBJ__SLOT_HOLE; p++)
            ;
        if (p == len)
            return SHMOBJ_ENOTFOUND;
    }
    n->found = ld(&b.orders[p]);
    if (n->key != NULL && (rc = slot_view(c, &b, &b.pairs[2 * p], n->key)) != 0)
        return rc;
    if (n->val != NULL && (rc = slot_view(c, &b, &b.pairs[2 * p + 1], n->val)) != 0)
        return rc;
    return 0;
}

int shmobj_miter_init(const shmobj_view *cv, shmobj_miter *it)
{
    if (cv == NULL || it == NULL)
        return SHMOBJ_EINVAL;
    if (cv->type != SHMOBJ_TYPE_MDICT && cv->type != SHMOBJ_TYPE_MSET)
        return SHMOBJ_ETYPE;
    it->c = *cv;
    it->next_order = 0;
    it->reserved = 0;
    return 0;
}

int shmobj_miter_next(shmobj_miter *it, shmobj_view *key, shmobj_view *val)
{
    struct shmobj__mc c;
    if (it == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__mut_open(&it->c, MD_KINDS, &c);
    if (rc != 0)
        return rc;
    struct mnext n = {it->next_order, UINT64_MAX, key, val, 0};
    rc = shmobj__mut_read(&c, next_read, &n);
    if (rc == 0)
        it->next_order = n.found + 1;
    return rc;
}

int shmobj__mdict_nth(const shmobj_view *v, size_t i, int want_key, shmobj_view *out)
{
    struct shmobj__mc c;
    int rc = shmobj__mut_open(v, MD_KINDS, &c);
    if (rc != 0)
        return rc;
    struct mnext n = {0, (uint64_t)i, want_key ? out : NULL, want_key ? NULL : out, 0};
    rc = shmobj__mut_read(&c, next_read, &n);
    return rc == SHMOBJ_ENOTFOUND ? SHMOBJ_ERANGE : rc;
}

/* ---- free and check ------------------------------------------------------ */

int shmobj__mdict_free(struct shmobj__space *sp, const shmobj_view *v, int depth,
                       uint64_t *budget)
{
    struct shmobj__mc c;
    struct body b;
    uint64_t len = 0;
    int rc = shmobj__mut_open(v, MD_KINDS, &c);
    if (rc != 0)
        return rc;
    rc = body_now_how(&c, &b, &len, 1);
    if (rc == 1)
        return 0;
    if (rc != 0)
        return rc;
    int first = 0;
    for (uint64_t p = 0; p < len; p++) {
        if (b.pairs[2 * p].tag == SHMOBJ__SLOT_HOLE)
            continue;
        int r = shmobj__mut_child_free_in(sp, pair_child(&b, p, 0), depth, budget);
        int r2 = shmobj__mut_child_free_in(sp, pair_child(&b, p, 1), depth, budget);
        if (first == 0)
            first = r != 0 ? r : r2;
        if (*budget == 0)
            return SHMOBJ_ECORRUPT;
    }
    int r = sp->ops->free(sp, atomic_load_explicit(&c.m->body, memory_order_relaxed));
    return first != 0 ? first : r;
}

int shmobj__mdict_check(struct shmobj__mc *c, uint64_t *budget, shmobj__mut_child_fn child,
                        void *ctx)
{
    struct body b;
    uint64_t len = 0, live = 0;
    int rc = body_now_how(c, &b, &len, 1);
    if (rc == 1)
        return atomic_load_explicit(&c->m->count, memory_order_relaxed) == 0 ? 0
                                                                              : SHMOBJ_ECORRUPT;
    if (rc != 0)
        return rc;
    if (*budget < b.cap + len)
        return SHMOBJ_ECORRUPT;
    *budget -= b.cap + len;
    uint64_t used = 0;
    for (uint64_t e = 0; e < b.cap; e++) {
        uint64_t x = ld(&b.ix[e]);
        if (x == 0)
            continue;
        if ((x & UINT32_MAX) - 1 >= len)
            return SHMOBJ_ECORRUPT;
        used++;
    }
    if (used > len)
        return SHMOBJ_ECORRUPT;
    uint64_t order = atomic_load_explicit(&c->m->order, memory_order_relaxed);
    for (uint64_t p = 0; p < len; p++) {
        struct shmobj__slot *ks = &b.pairs[2 * p], *vs = ks + 1;
        if (ld(&b.orders[p]) >= order || (p > 0 && ld(&b.orders[p]) <= ld(&b.orders[p - 1])))
            return SHMOBJ_ECORRUPT;
        if (ks->tag == SHMOBJ__SLOT_HOLE)
            continue;
        live++;
        /* the key: its kind, and that the index finds it at its place */
        shmobj_key k = {.type = 0};
        uint64_t pl = atomic_load_explicit(&ks->payload, memory_order_relaxed), at, probes = 0;
        switch (ks->tag) {
        case SHMOBJ__SLOT_INT:
            k.type = SHMOBJ_TYPE_INT;
            k.i = (int64_t)pl;
            break;
        case SHMOBJ__SLOT_SSTR: {
            /* its bytes, NUL-padded: the views read it as a C string */
            if (ks->reserved0 > SHMOBJ__SSTR_MAX ||
                (pl >> (8 * ks->reserved0)) != 0)
                return SHMOBJ_ECORRUPT;
            k.type = SHMOBJ_TYPE_STR;
            k.ptr = &ks->payload;
            k.len = ks->reserved0;
            break;
        }
        case SHMOBJ__SLOT_OBJ: {
            shmobj_view kv;
            rc = shmobj__view_follow(c->sp, pl, b.off, b.size, b.gen, &kv);
            if (rc != 0)
                return rc == SHMOBJ_ESTALE ? SHMOBJ_ECORRUPT : rc;
            if ((kv.type != SHMOBJ_TYPE_STR && kv.type != SHMOBJ_TYPE_BYTES) ||
                (kv.type == SHMOBJ_TYPE_STR && kv.len <= SHMOBJ__SSTR_MAX))
                return SHMOBJ_ECORRUPT;
            k.type = kv.type;
            k.ptr = (const uint8_t *)kv.obj + 16;
            k.len = kv.len;
            break;
        }
        default:
            return SHMOBJ_ECORRUPT;
        }
        if (k.type == SHMOBJ_TYPE_STR && !shmobj__utf8_ok(k.ptr, k.len))
            return SHMOBJ_ECORRUPT;
        shmobj__key_prepare(&k);
        rc = find(c, &b, len, &k, &at, NULL, &probes);
        if (*budget < probes)
            return SHMOBJ_ECORRUPT;
        *budget -= probes;
        if (rc != 0 || at != p)
            return SHMOBJ_ECORRUPT;
        if (c->type == SHMOBJ_TYPE_MSET) {
            if (vs->tag != SHMOBJ__SLOT_OBJ ||
                atomic_load_explicit(&vs->payload, memory_order_relaxed) != 0)
                return SHMOBJ_ECORRUPT;
            continue;
        }
        rc = child(ctx, shmobj__off_of(c->sp, vs), b.off, b.size, b.gen, 0);
        if (rc != 0)
            return rc;
    }
    if (live != atomic_load_explicit(&c->m->count, memory_order_relaxed))
        return SHMOBJ_ECORRUPT;
    return 0;
}
