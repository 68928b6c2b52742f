/* Mutable dicts and sets: lookups, iteration and ranks, the free of a
 * whole container and its check.
 *
 * Invariants kept here (with those of mutable-section.c and mutable-dict-table.c):
 * - Every read runs inside shmobj__mut_read() and keeps nothing unless the
 *   container's sequence held across it.
 * - orders[p] ascends with p and orders only grow, so an iteration that
 *   resumes at the first pair whose order is past the last it returned
 *   sees every key present throughout exactly once, whatever rebuilds
 *   happened in between.
 * - The free and the check prove every body with the arena (strong
 *   opens); the free takes no lock (nobody may use a container being
 *   freed).
 *
 * The protocol step by step, its memory orders and what a stalled or
 * killed process leaves: doc/protocols.md, section 4. */
#include "key-lookup.h"
#include "mutable.h"
#include "content-check.h"

/* ---- reads --------------------------------------------------------------- */

struct mget {
    const shmobj_key *k;
    shmobj_view *out; /* a view of the value (set: the member), or */
    int64_t *i;       /* an int value to read, or neither: contains */
    int want_key;
};

static int slot_view(struct shmobj__mc *c, const struct shmobj__mdbody *b,
                     struct shmobj__slot *s, shmobj_view *out)
{
    int rc = shmobj__view_slot(c->sp, shmobj__off_of(c->sp, s), b->off, b->size, b->gen, 1, out);
    out->flags |= SHMOBJ__VIEW_MUT;
    return rc;
}

static int get_read(struct shmobj__mc *c, void *arg)
{
    struct mget *g = arg;
    struct shmobj__mdbody b;
    uint64_t len = 0, pair;
    int rc = shmobj__mdict_locate(c, g->k, &b, &len, &pair);
    if (rc != 0)
        return rc;
    SHMOBJ__STEP("mdict.read.found");
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
    int rc = shmobj__mut_open(v, SHMOBJ__MD_KINDS, &c);
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
    int rc = shmobj__mdict_begin(dict, 1u << SHMOBJ_TYPE_MDICT, key, &c, &k);
    if (rc != 0)
        return rc;
    struct mget g = {&k, val, NULL, 0};
    return shmobj__mut_read(&c, get_read, &g);
}

/* shmobj_mdict_get_int() past its first try: the reads of
 * shmobj__mut_read() (its retries and its fall back to the lock). The
 * handle comes by value, so that the first try's copy in the caller never
 * has its address taken (it stays in registers). */
static __attribute__((noinline)) int get_int_retry(struct shmobj__mc c, const shmobj_key *key,
                                                   int64_t *out)
{
    int64_t x;
    struct mget g = {key, NULL, &x, 0};
    int rc = shmobj__mut_read(&c, get_read, &g);
    if (rc == 0)
        *out = x;
    return rc;
}

int shmobj_mdict_get_int(const shmobj_view *dict, const shmobj_key *key, int64_t *out)
{
    struct shmobj__mc c;
    struct shmobj__mdbody b;
    uint64_t len = 0, pair = 0, pl = 0;
    if (out == NULL)
        return SHMOBJ_EINVAL;
    int rc = shmobj__mdict_open_key(dict, key, &c);
    if (rc != 0)
        return rc;
    /* The first try of shmobj__mut_read() inline, get_read()'s work with
     * the same checks: kept only if seq held and the container is live */
    uint64_t s = atomic_load_explicit(&c.m->seq, memory_order_acquire);
    if (s & 1)
        return get_int_retry(c, key, out);
    rc = shmobj__mdict_locate(&c, key, &b, &len, &pair);
    uint8_t tag = 0;
    if (rc == 0) {
        struct shmobj__slot *vs = &b.pairs[2 * pair + 1];
        tag = vs->tag;
        pl = atomic_load_explicit(&vs->payload, memory_order_acquire);
    }
    SHMOBJ__STEP("mdict.read.int");
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&c.m->seq, memory_order_relaxed) != s)
        return get_int_retry(c, key, out);
    if (!shmobj__obj_live(dict))
        return SHMOBJ_ESTALE;
    if (rc != 0)
        return rc;
    if (tag != SHMOBJ__SLOT_INT)
        return SHMOBJ_ETYPE;
    *out = (int64_t)pl;
    return 0;
}

int shmobj__mdict_has(struct shmobj__mc *c, const shmobj_key *k)
{
    struct mget g = {k, NULL, NULL, 0};
    return shmobj__mut_read(c, get_read, &g);
}

int shmobj_mut_contains(const shmobj_view *cv, const shmobj_value *key)
{
    struct shmobj__mc c;
    shmobj_key k;
    int rc = shmobj__mdict_begin(cv, SHMOBJ__MD_KINDS, key, &c, &k);
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

/* Do the orders of places [0, len) ascend, each below the container's
 * next order? Asked once, at the end of an iteration (the binary search
 * of each step trusts them, and a damaged order it skipped over shows
 * here), so an iteration pays it once. */
static int orders_ascend(struct shmobj__mc *c, const struct shmobj__mdbody *b, uint64_t len)
{
    uint64_t next = atomic_load_explicit(&c->m->order, memory_order_relaxed), prev = 0;
    for (uint64_t p = 0; p < len; p++) {
        uint64_t o = shmobj__mut_ld(&b->orders[p]);
        if ((p > 0 && o <= prev) || o >= next)
            return 0;
        prev = o;
    }
    return 1;
}

static int next_read(struct shmobj__mc *c, void *arg)
{
    struct mnext *n = arg;
    struct shmobj__mdbody b;
    uint64_t len = 0, p;
    int rc = shmobj__mdict_body_now(c, &b, &len);
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
            if (shmobj__mut_ld(&b.orders[mid]) < n->from)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (p = lo; p < len && b.pairs[2 * p].tag == SHMOBJ__SLOT_HOLE; p++)
            ;
        if (p == len)
            return orders_ascend(c, &b, len) ? SHMOBJ_ENOTFOUND : SHMOBJ_ECORRUPT;
    }
    SHMOBJ__STEP("mdict.iter.found");
    n->found = shmobj__mut_ld(&b.orders[p]);
    /* The cursor only moves forward, and never past the container's next
     * order: a damaged order cannot send it back (a cycle) or hold it in
     * place, so an iteration returns each place at most once and ends. */
    if (n->rank == UINT64_MAX &&
        (n->found < n->from ||
         n->found >= atomic_load_explicit(&c->m->order, memory_order_relaxed)))
        return SHMOBJ_ECORRUPT;
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
    int rc = shmobj__mut_open(&it->c, SHMOBJ__MD_KINDS, &c);
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
    int rc = shmobj__mut_open(v, SHMOBJ__MD_KINDS, &c);
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
    struct shmobj__mdbody b;
    uint64_t len = 0;
    int rc = shmobj__mut_open(v, SHMOBJ__MD_KINDS, &c);
    if (rc != 0)
        return rc;
    rc = shmobj__mdict_body_how(&c, &b, &len, 1);
    if (rc == 1)
        return 0;
    if (rc != 0)
        return rc;
    int first = 0;
    for (uint64_t p = 0; p < len; p++) {
        if (b.pairs[2 * p].tag == SHMOBJ__SLOT_HOLE)
            continue;
        int r = shmobj__mut_child_free_in(sp, shmobj__mdict_pair_child(&b, p, 0), depth, budget);
        int r2 = shmobj__mut_child_free_in(sp, shmobj__mdict_pair_child(&b, p, 1), depth, budget);
        if (first == 0)
            first = r != 0 ? r : r2;
        if (!shmobj__work_have(sp, budget))
            return SHMOBJ_ECORRUPT;
    }
    int r = sp->ops->free(sp, atomic_load_explicit(&c.m->body, memory_order_relaxed));
    return first != 0 ? first : r;
}

int shmobj__mdict_check(struct shmobj__mc *c, uint64_t *budget, shmobj__mut_child_fn child,
                        void *ctx)
{
    struct shmobj__mdbody b;
    uint64_t len = 0, live = 0;
    int rc = shmobj__mdict_body_how(c, &b, &len, 1);
    if (rc == 1)
        return atomic_load_explicit(&c->m->count, memory_order_relaxed) == 0 ? 0
                                                                              : SHMOBJ_ECORRUPT;
    if (rc != 0)
        return rc;
    if (shmobj__work_take(c->sp, budget, b.cap + len) != 0)
        return SHMOBJ_ECORRUPT;
    uint64_t used = 0;
    for (uint64_t e = 0; e < b.cap; e++) {
        uint64_t x = shmobj__mut_ld(&b.ix[e]);
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
        if (shmobj__mut_ld(&b.orders[p]) >= order ||
            (p > 0 && shmobj__mut_ld(&b.orders[p]) <= shmobj__mut_ld(&b.orders[p - 1])))
            return SHMOBJ_ECORRUPT;
        if (ks->tag == SHMOBJ__SLOT_HOLE)
            continue;
        live++;
        /* the key: its kind, and that the index finds it at its place */
        shmobj_key k = {.type = 0};
        uint64_t pl = atomic_load_explicit(&ks->payload, memory_order_relaxed), at = UINT64_MAX, probes = 0;
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
        case SHMOBJ__SLOT_MSTR:
            /* version 3 only; the bytes from slot byte 1, NUL-padded, the
             * last one not NUL (what shmobj__mstr_len() measures) */
            if (!b.v3 || (k.len = shmobj__mstr_len(pl)) == 0)
                return SHMOBJ_ECORRUPT;
            k.type = SHMOBJ_TYPE_STR;
            k.ptr = (const uint8_t *)ks + 1;
            break;
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
        rc = shmobj__mdict_find(c, &b, len, &k, &at, NULL, &probes);
        if (shmobj__work_take(c->sp, budget, probes) != 0)
            return SHMOBJ_ECORRUPT;
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
