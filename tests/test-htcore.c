/* The open-addressing core: random operations checked against a plain
 * reference in both modes, growth by rehash, tombstone churn, damaged
 * headers, and golden vectors that pin the hash function and the exact
 * bytes of a table built from fixed inputs (a vendored copy must agree). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shmobj_htcore.h"
#include "test-util.h"

/* xorshift64*: deterministic, so a failure replays. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
    return test_xorshift(&rng_state);
}

static void *xalloc(uint64_t n)
{
    void *p = NULL;
    assert_int_equal(posix_memalign(&p, 64, (size_t)n), 0);
    return p;
}

/* ---- inline mode ----------------------------------------------------------- */

struct itab {
    shmobj_htcore t;
    void *mem;
};

static void itab_make(struct itab *it, uint64_t cap, uint64_t seed)
{
    uint64_t bytes = shmobj_htcore_footprint(cap, 16);
    assert_true(bytes > 0);
    it->mem = xalloc(bytes);
    assert_int_equal(shmobj_htcore_init(&it->t, it->mem, bytes, cap, 8, 8, seed), 0);
}

/* Grow into a table twice the live count (or the same size when mostly
 * tombstones), as a user of the core would. */
static void itab_grow(struct itab *it)
{
    struct itab n;
    itab_make(&n, shmobj_htcore_count(&it->t) * 2 + 16, it->t.seed + 1);
    assert_int_equal(shmobj_htcore_rehash(&n.t, &it->t), 0);
    assert_int_equal(shmobj_htcore_count(&n.t), shmobj_htcore_count(&it->t));
    free(it->mem);
    *it = n;
}

static int itab_put(struct itab *it, uint64_t k, uint64_t v)
{
    int rc = shmobj_htcore_put(&it->t, &k, &v);
    if (rc == SHMOBJ_HTCORE_EFULL) {
        itab_grow(it);
        rc = shmobj_htcore_put(&it->t, &k, &v);
    }
    return rc;
}

static void test_htcore_inline_random_vs_reference(void **state)
{
    (void)state;
    enum { KEYS = 5000, OPS = 400000 };
    static uint64_t ref_val[KEYS];
    static unsigned char ref_has[KEYS];
    uint64_t ref_count = 0;
    struct itab it;
    memset(ref_has, 0, sizeof ref_has);
    itab_make(&it, 0, 42);
    for (long op = 0; op < OPS; op++) {
        uint64_t k = rnd() % KEYS, v, got;
        int r = (int)(rnd() % 10);
        if (r < 5) {
            v = rnd();
            assert_int_equal(itab_put(&it, k, v), 0);
            if (!ref_has[k])
                ref_count++;
            ref_has[k] = 1;
            ref_val[k] = v;
        } else if (r < 8) {
            int rc = shmobj_htcore_get(&it.t, &k, &got);
            if (ref_has[k]) {
                assert_int_equal(rc, 0);
                assert_true(got == ref_val[k]);
            } else {
                assert_int_equal(rc, SHMOBJ_HTCORE_ENOTFOUND);
            }
        } else {
            int rc = shmobj_htcore_del(&it.t, &k);
            assert_int_equal(rc, ref_has[k] ? 0 : SHMOBJ_HTCORE_ENOTFOUND);
            if (ref_has[k])
                ref_count--;
            ref_has[k] = 0;
        }
        assert_true(shmobj_htcore_count(&it.t) == ref_count);
        if (op % 50000 == 0)
            assert_int_equal(shmobj_htcore_check(&it.t, NULL, NULL), 0);
    }
    /* Iteration sees exactly the reference's keys, once each. */
    static unsigned char seen[KEYS];
    memset(seen, 0, sizeof seen);
    uint64_t i = 0, n = 0;
    while (shmobj_htcore_next(&it.t, &i) == 0) {
        const unsigned char *e = shmobj_htcore_entry(&it.t, i);
        uint64_t k, v;
        memcpy(&k, e, 8);
        memcpy(&v, e + 8, 8);
        assert_true(k < KEYS);
        assert_true(ref_has[k]);
        assert_false(seen[k]);
        assert_true(v == ref_val[k]);
        seen[k] = 1;
        n++;
        i++;
    }
    assert_true(n == ref_count);
    assert_int_equal(shmobj_htcore_check(&it.t, NULL, NULL), 0);
    free(it.mem);
}

static void test_htcore_put_full_returns_efull(void **state)
{
    (void)state;
    struct itab it;
    itab_make(&it, 14, 1); /* 16 slots, 14 usable */
    uint64_t k, v = 0;
    for (k = 0; k < 14; k++)
        assert_int_equal(shmobj_htcore_put(&it.t, &k, &v), 0);
    assert_int_equal(shmobj_htcore_put(&it.t, &k, &v), SHMOBJ_HTCORE_EFULL);
    /* overwriting a present key still works when full */
    k = 3;
    v = 7;
    assert_int_equal(shmobj_htcore_put(&it.t, &k, &v), 0);
    assert_int_equal(shmobj_htcore_get(&it.t, &k, &v), 0);
    assert_true(v == 7);
    assert_int_equal(shmobj_htcore_check(&it.t, NULL, NULL), 0);
    free(it.mem);
}

/* Insert/delete cycles: tombstones are bounded by the load limit, and a
 * rehash into a table of the same size drops them, so probe lengths and
 * memory stay flat however long the churn runs. */
static void test_htcore_churn_does_not_degrade(void **state)
{
    (void)state;
    struct itab it;
    itab_make(&it, 1000, 7);
    uint64_t slots0 = it.t.mask + 1, base = 0;
    for (int round = 0; round < 300; round++) {
        for (uint64_t k = base; k < base + 500; k++)
            assert_int_equal(itab_put(&it, k, k), 0);
        for (uint64_t k = base; k < base + 500; k++)
            if (k % 5 != 0)
                assert_int_equal(shmobj_htcore_del(&it.t, &k), 0);
        for (uint64_t k = base; k < base + 500; k += 5)
            assert_int_equal(shmobj_htcore_del(&it.t, &k), 0);
        base += 500;
        assert_true(it.t.hdr->tombstones + it.t.hdr->count <=
                    (it.t.mask + 1) / 8 * 7);
    }
    for (uint64_t k = base; k < base + 500; k++)
        assert_int_equal(itab_put(&it, k, k), 0);
    shmobj_htcore_stats st;
    shmobj_htcore_stats_get(&it.t, &st);
    assert_true(st.count == 500);
    assert_true(st.slots <= slots0);
    /* mean probe length under 2 groups, worst within a few */
    assert_true(st.probe_total < 2 * st.count);
    assert_true(st.probe_max <= 8);
    assert_int_equal(shmobj_htcore_check(&it.t, NULL, NULL), 0);
    free(it.mem);
}

/* ---- ref mode ----------------------------------------------------------------- */

/* Entries live in a pool outside the table; slot values are pool index + 1. */
struct pool_entry {
    char key[40];
    size_t klen;
    uint64_t value;
};
static struct pool_entry *pool;
static uint64_t pool_n;

struct lookup {
    const char *key;
    size_t klen;
    uint64_t calls;
};

static int pool_eq(void *ctx, uint64_t v)
{
    struct lookup *l = ctx;
    l->calls++;
    if (v == 0 || v > pool_n)
        return SHMOBJ_HTCORE_ECORRUPT;
    const struct pool_entry *e = &pool[v - 1];
    return e->klen == l->klen && memcmp(e->key, l->key, l->klen) == 0;
}

static int pool_hash(void *ctx, uint64_t v, uint64_t *hash)
{
    uint64_t seed = *(uint64_t *)ctx;
    if (v == 0 || v > pool_n)
        return SHMOBJ_HTCORE_ECORRUPT;
    *hash = shmobj_htcore_hash64(pool[v - 1].key, pool[v - 1].klen, seed);
    return 0;
}

/* Grow a ref table into a new one of room for 2 * live + 16 entries. */
static void ref_grow(shmobj_htcore *t, void **mem, uint64_t *bytes, uint64_t live,
                     uint64_t *seed)
{
    uint64_t nb = shmobj_htcore_footprint(live * 2 + 16, SHMOBJ_HTCORE_REF_SLOT);
    void *nm = xalloc(nb);
    shmobj_htcore nt;
    assert_int_equal(shmobj_htcore_init_ref(&nt, nm, nb, live * 2 + 16, *seed), 0);
    assert_int_equal(shmobj_htcore_ref_rehash(&nt, t, pool_hash, seed), 0);
    free(*mem);
    *mem = nm;
    *bytes = nb;
    *t = nt;
}

/* Random ref-mode operations against a reference. A twin table takes the
 * same operations, its inserts through ref_find_free() and
 * ref_insert_at(): it must stay byte for byte the same. */
static void test_htcore_ref_random_vs_reference(void **state)
{
    (void)state;
    enum { KEYS = 3000, OPS = 300000 };
    static uint64_t ref_slot[KEYS]; /* pool index + 1, 0 = absent */
    uint64_t seed = 0x1234, live = 0;
    pool = calloc(OPS + 1, sizeof *pool);
    assert_non_null(pool);
    pool_n = 0;
    memset(ref_slot, 0, sizeof ref_slot);
    uint64_t bytes = shmobj_htcore_footprint(0, SHMOBJ_HTCORE_REF_SLOT), tbytes = bytes;
    void *mem = xalloc(bytes), *tmem = xalloc(bytes);
    shmobj_htcore t, twin;
    assert_int_equal(shmobj_htcore_init_ref(&t, mem, bytes, 0, seed), 0);
    assert_int_equal(shmobj_htcore_init_ref(&twin, tmem, bytes, 0, seed), 0);
    for (long op = 0; op < OPS; op++) {
        uint64_t k = rnd() % KEYS, idx, tidx, tfree;
        char key[40];
        /* variable-length keys: 1..39 bytes */
        int klen = snprintf(key, sizeof key, "%.*s%llu", (int)(k % 24), "abcdefghijklmnopqrstuvwxyz",
                            (unsigned long long)k);
        struct lookup l = {key, (size_t)klen, 0};
        uint64_t h = shmobj_htcore_hash64(key, (size_t)klen, seed);
        int rc = shmobj_htcore_ref_find(&t, h, pool_eq, &l, &idx);
        assert_int_equal(shmobj_htcore_ref_find_free(&twin, h, pool_eq, &l, &tidx, &tfree), rc);
        int r = (int)(rnd() % 10);
        if (ref_slot[k]) {
            assert_int_equal(rc, 0);
            assert_true(shmobj_htcore_ref_value(&t, idx) == ref_slot[k]);
            assert_true(tidx == idx);
        } else {
            assert_int_equal(rc, SHMOBJ_HTCORE_ENOTFOUND);
        }
        if (r < 5) {
            struct pool_entry *e = &pool[pool_n++];
            memcpy(e->key, key, (size_t)klen);
            e->klen = (size_t)klen;
            e->value = rnd();
            if (rc == 0) {
                shmobj_htcore_ref_replace(&t, idx, pool_n);
                shmobj_htcore_ref_replace(&twin, idx, pool_n);
            } else {
                rc = shmobj_htcore_ref_insert(&t, h, pool_n, &idx);
                int trc = tfree == UINT64_MAX
                              ? SHMOBJ_HTCORE_EFULL
                              : shmobj_htcore_ref_insert_at(&twin, tfree, h, pool_n);
                assert_int_equal(trc, rc);
                if (rc == SHMOBJ_HTCORE_EFULL) {
                    ref_grow(&t, &mem, &bytes, live, &seed);
                    ref_grow(&twin, &tmem, &tbytes, live, &seed);
                    rc = shmobj_htcore_ref_insert(&t, h, pool_n, &idx);
                    assert_int_equal(shmobj_htcore_ref_find_free(&twin, h, pool_eq, &l, &tidx, &tfree),
                                     SHMOBJ_HTCORE_ENOTFOUND);
                    assert_int_equal(shmobj_htcore_ref_insert_at(&twin, tfree, h, pool_n), 0);
                }
                assert_int_equal(rc, 0);
                live++;
            }
            ref_slot[k] = pool_n;
        } else if (r < 8 && rc == 0) {
            shmobj_htcore_erase(&t, idx);
            shmobj_htcore_erase(&twin, idx);
            ref_slot[k] = 0;
            live--;
        }
        assert_true(shmobj_htcore_count(&t) == live);
        if (op % 997 == 0) {
            assert_true(tbytes == bytes);
            assert_memory_equal(tmem, mem, (size_t)bytes);
        }
        if (op % 50000 == 0)
            assert_int_equal(shmobj_htcore_check(&t, pool_hash, &seed), 0);
    }
    assert_memory_equal(tmem, mem, (size_t)bytes);
    /* a slot that is not free is refused, and so is one beyond the table */
    uint64_t full = 0;
    assert_int_equal(shmobj_htcore_next(&twin, &full), 0);
    assert_int_equal(shmobj_htcore_ref_insert_at(&twin, full, 1, 1), SHMOBJ_HTCORE_EINVAL);
    assert_int_equal(shmobj_htcore_ref_insert_at(&twin, twin.mask + 1, 1, 1), SHMOBJ_HTCORE_EINVAL);
    assert_memory_equal(tmem, mem, (size_t)bytes);
    assert_int_equal(shmobj_htcore_check(&t, pool_hash, &seed), 0);
    shmobj_htcore_stats st;
    shmobj_htcore_stats_get(&t, &st);
    assert_true(st.count == live);
    assert_true(st.probe_max >= 1);
    free(mem);
    free(tmem);
    free(pool);
    pool = NULL;
}

/* An eq callback's error stops the lookup with that status. */
static int eq_fail(void *ctx, uint64_t v)
{
    (void)ctx;
    (void)v;
    return SHMOBJ_HTCORE_ECORRUPT;
}

static void test_htcore_ref_find_eq_error_propagates(void **state)
{
    (void)state;
    uint64_t bytes = shmobj_htcore_footprint(10, SHMOBJ_HTCORE_REF_SLOT), idx;
    void *mem = xalloc(bytes);
    shmobj_htcore t;
    assert_int_equal(shmobj_htcore_init_ref(&t, mem, bytes, 10, 0), 0);
    assert_int_equal(shmobj_htcore_ref_insert(&t, 99, UINT64_C(1) << 44, &idx),
                     SHMOBJ_HTCORE_EINVAL); /* values are 44 bits */
    assert_int_equal(shmobj_htcore_ref_insert(&t, 99, 5, &idx), 0);
    assert_int_equal(shmobj_htcore_ref_find(&t, 99, eq_fail, NULL, &idx),
                     SHMOBJ_HTCORE_ECORRUPT);
    free(mem);
}

/* ---- damage ------------------------------------------------------------------- */

static void test_htcore_attach_damaged_header(void **state)
{
    (void)state;
    struct itab it;
    shmobj_htcore t2;
    itab_make(&it, 100, 3);
    uint64_t bytes = shmobj_htcore_footprint(100, 16);
    assert_int_equal(shmobj_htcore_attach(&t2, it.mem, bytes), 0);
    assert_true(t2.mask == it.t.mask && t2.seed == 3);
    /* too small a region for the table it claims */
    assert_int_equal(shmobj_htcore_attach(&t2, it.mem, bytes - 1), SHMOBJ_HTCORE_ECORRUPT);
    assert_int_equal(shmobj_htcore_attach(&t2, it.mem, 10), SHMOBJ_HTCORE_ECORRUPT);
    /* every single-byte change of the immutable fields is refused */
    unsigned char *b = it.mem;
    for (int off = 0; off < 64; off++) {
        if (off >= 32 && off < 56)
            continue; /* counters: mutable, checked by shmobj_htcore_check */
        unsigned char save = b[off];
        b[off] ^= 0x10;
        int rc = shmobj_htcore_attach(&t2, it.mem, bytes);
        assert_true(rc == SHMOBJ_HTCORE_ECORRUPT || rc == SHMOBJ_HTCORE_EVERSION);
        b[off] = save;
    }
    /* a wrong counter or control byte is found by check and fixed by recount */
    it.t.hdr->count += 1;
    assert_int_equal(shmobj_htcore_check(&it.t, NULL, NULL), SHMOBJ_HTCORE_ECORRUPT);
    shmobj_htcore_recount(&it.t);
    assert_int_equal(shmobj_htcore_check(&it.t, NULL, NULL), 0);
    it.t.groups[5] = 0x90; /* control byte 5 of group 0 */
    assert_int_equal(shmobj_htcore_check(&it.t, NULL, NULL), SHMOBJ_HTCORE_ECORRUPT);
    shmobj_htcore_recount(&it.t);
    assert_int_equal(shmobj_htcore_check(&it.t, NULL, NULL), 0);
    free(it.mem);
}

/* Garbage control bytes never lead a lookup astray: random bytes over the
 * whole table, then lookups and iteration stay in bounds (ASan watches). */
static void test_htcore_lookup_garbage_stays_in_bounds(void **state)
{
    (void)state;
    struct itab it;
    itab_make(&it, 200, 5);
    for (int round = 0; round < 200; round++) {
        for (uint64_t i = 0; i <= it.t.mask; i++)
            it.t.groups[(i / 16) * it.t.group_bytes + i % 16] = (unsigned char)rnd();
        for (int j = 0; j < 50; j++) {
            uint64_t k = rnd(), v, idx = 0;
            (void)shmobj_htcore_get(&it.t, &k, &v);
            while (shmobj_htcore_next(&it.t, &idx) == 0)
                idx++;
        }
    }
    free(it.mem);
}

static void test_htcore_init_bad_args(void **state)
{
    (void)state;
    shmobj_htcore t;
    void *mem = xalloc(4096);
    assert_int_equal(shmobj_htcore_init(&t, mem, 4096, 10, 0, 8, 0), SHMOBJ_HTCORE_EINVAL);
    assert_int_equal(shmobj_htcore_init(&t, mem, 100, 10, 8, 8, 0), SHMOBJ_HTCORE_EINVAL);
    assert_int_equal(shmobj_htcore_init(&t, (char *)mem + 1, 4000, 10, 8, 8, 0), SHMOBJ_HTCORE_EINVAL);
    assert_true(shmobj_htcore_footprint(UINT64_MAX, 8) == 0);
    assert_true(shmobj_htcore_footprint(10, 0) == 0);
    assert_true(shmobj_htcore_footprint(0, 8) == 64 + 16 + 16 * 8);
    assert_true(shmobj_htcore_footprint(14, 8) == 64 + 16 + 16 * 8);
    assert_true(shmobj_htcore_footprint(15, 8) == 64 + 32 + 32 * 8);
    /* an inline operation on a ref table is refused */
    assert_int_equal(shmobj_htcore_init_ref(&t, mem, 4096, 10, 0), 0);
    uint64_t k = 0, idx;
    assert_int_equal(shmobj_htcore_find(&t, &k, &idx), SHMOBJ_HTCORE_EINVAL);
    free(mem);
}

/* ---- golden vectors ------------------------------------------------------------- */

/* The hash of fixed inputs. These numbers are the format: a change breaks
 * every table ever written, and every vendored copy. */
static void test_htcore_hash_golden(void **state)
{
    (void)state;
    static const char text[] =
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!?";
    static const struct {
        size_t len;
        uint64_t seed;
        uint64_t hash;
    } v[] = {
        {0, 0x0, 0x0409638ee2bde459ULL},
        {1, 0x0, 0xc08581513804b5e4ULL},
        {2, 0x0, 0xf5ebb4e19d3b6100ULL},
        {3, 0x0, 0xc7eea752c75d6017ULL},
        {4, 0x0, 0x08a5921f81499232ULL},
        {5, 0x0, 0x9bd264b73b99ddc8ULL},
        {7, 0x0, 0xb4d15186e225a25bULL},
        {8, 0x0, 0x168bb1137954ab51ULL},
        {9, 0x0, 0xec2c4b6920a9792aULL},
        {15, 0x0, 0x63dd8b1e7d280b3bULL},
        {16, 0x0, 0xc304e72c387cd229ULL},
        {17, 0x0, 0xb496f8f306600195ULL},
        {31, 0x0, 0xf4ff78b5693a8385ULL},
        {32, 0x0, 0x98f622c7c169da49ULL},
        {33, 0x0, 0x2fa38cc17ae792b0ULL},
        {47, 0x0, 0x3785ca53b90ea76eULL},
        {48, 0x0, 0x64b212499080b877ULL},
        {49, 0x0, 0xb7ff074db2b8a3feULL},
        {63, 0x0, 0x54394858df451913ULL},
        {64, 0x0, 0x17bddb8dc6df7d4eULL},
        {0, 0x5eed, 0x941ce192e5b3186eULL},
        {1, 0x5eed, 0x3a4980e6d90d14bcULL},
        {2, 0x5eed, 0x670429ffba4c257cULL},
        {3, 0x5eed, 0x88bd39def58f1817ULL},
        {4, 0x5eed, 0x07aa20e46e6026f1ULL},
        {5, 0x5eed, 0xbc6b93a6446c60f4ULL},
        {7, 0x5eed, 0x7cb54d577daa1039ULL},
        {8, 0x5eed, 0xfa962a8283dc4e03ULL},
        {9, 0x5eed, 0xa8458d08e3f9e380ULL},
        {15, 0x5eed, 0xbc8d8ab534c1f1daULL},
        {16, 0x5eed, 0x9980e4afd37f28e0ULL},
        {17, 0x5eed, 0x5a733f2bad08c978ULL},
        {31, 0x5eed, 0x68db2b9709a111b9ULL},
        {32, 0x5eed, 0x05d980030d167733ULL},
        {33, 0x5eed, 0x293447c103091817ULL},
        {47, 0x5eed, 0x7110fe7ed69cb98dULL},
        {48, 0x5eed, 0xe9d8ac740f378d8bULL},
        {49, 0x5eed, 0xbe9dbff38921dfb1ULL},
        {63, 0x5eed, 0x8d7b498de40dbb63ULL},
        {64, 0x5eed, 0x90fcd063ecd9b3d7ULL},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint64_t h = shmobj_htcore_hash64(text, v[i].len, v[i].seed);
        if (h != v[i].hash)
            print_error("len %zu seed %llu: got 0x%016llx\n", v[i].len,
                        (unsigned long long)v[i].seed, (unsigned long long)h);
        assert_true(h == v[i].hash);
        /* the two-step inline form gives the same hash */
        assert_true(shmobj_htcore_hash64_mixed(text, v[i].len,
                                               shmobj_htcore_seed_mix(v[i].seed)) == h);
    }
}

/* A table built from fixed inputs with a fixed seed has exactly these bytes
 * (digest of the whole footprint, and a few fields). Little-endian hosts
 * only: the header is in host byte order. */
static int host_is_le(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static void test_htcore_layout_golden(void **state)
{
    (void)state;
    if (!host_is_le())
        skip();
    uint64_t bytes = shmobj_htcore_footprint(100, 12);
    assert_true(bytes == 64 + 128 + 128 * 12);
    void *mem = xalloc(bytes);
    memset(mem, 0xAA, (size_t)bytes);
    shmobj_htcore t;
    assert_int_equal(shmobj_htcore_init(&t, mem, bytes, 100, 8, 4, 0x5eed), 0);
    for (uint64_t k = 0; k < 100; k++) {
        uint32_t v = (uint32_t)(k * 3 + 1);
        unsigned char key[8];
        for (int i = 0; i < 8; i++)
            key[i] = (unsigned char)(k >> (8 * i));
        assert_int_equal(shmobj_htcore_put(&t, key, &v), 0);
    }
    for (uint64_t k = 0; k < 100; k += 3) {
        unsigned char key[8];
        for (int i = 0; i < 8; i++)
            key[i] = (unsigned char)(k >> (8 * i));
        assert_int_equal(shmobj_htcore_del(&t, key), 0);
    }
    const unsigned char *b = mem;
    uint64_t digest = shmobj_htcore_hash64(mem, (size_t)bytes, 0);
    assert_memory_equal(b, "SHTC\x01\x00\x00\x00\x08\x00\x00\x00\x04\x00\x00\x00", 16);
    assert_true(t.hdr->count == 66);
    assert_true(t.hdr->check == 0xd22145c9u);
    assert_true(t.hdr->tombstones == 10);
    assert_true(t.hdr->growth_left == 36);
    if (digest != 0x38705cd23733e723ULL)
        print_error("layout digest 0x%016llx\n", (unsigned long long)digest);
    assert_true(digest == 0x38705cd23733e723ULL);
    free(mem);
}

/* The golden ref-mode table: 50 keys (k as 8 little-endian bytes, seed
 * 0x5eed) whose values are k * 16 + 1, in a region first filled with 0xAA. */
static void *golden_ref_table(shmobj_htcore *t, uint64_t *bytes)
{
    *bytes = shmobj_htcore_footprint(50, SHMOBJ_HTCORE_REF_SLOT);
    void *mem = xalloc(*bytes);
    memset(mem, 0xAA, (size_t)*bytes);
    assert_int_equal(shmobj_htcore_init_ref(t, mem, *bytes, 50, 0x5eed), 0);
    for (uint64_t k = 0; k < 50; k++) {
        unsigned char key[8];
        for (int i = 0; i < 8; i++)
            key[i] = (unsigned char)(k >> (8 * i));
        uint64_t h = shmobj_htcore_hash64(key, 8, 0x5eed);
        assert_int_equal(shmobj_htcore_ref_insert(t, h, k * 16 + 1, NULL), 0);
    }
    return mem;
}

/* The same for a ref-mode table: slots of value << 20 | hash bits. */
static void test_htcore_ref_layout_golden(void **state)
{
    (void)state;
    if (!host_is_le())
        skip();
    uint64_t bytes;
    shmobj_htcore t;
    void *mem = golden_ref_table(&t, &bytes);
    assert_true(bytes == 64 + 64 + 64 * 8);
    uint64_t digest = shmobj_htcore_hash64(mem, (size_t)bytes, 0);
    if (digest != 0x1417ad217b82c205ULL)
        print_error("ref layout digest 0x%016llx\n", (unsigned long long)digest);
    assert_true(t.hdr->check == 0xbcae1571u);
    assert_true(digest == 0x1417ad217b82c205ULL);
    free(mem);
}

/* ---- the inline probe pieces ------------------------------------------------ */

/* What the bytes of format-map.md say, read one byte at a time: the
 * reference the inline pieces are held to. */
static uint32_t naive_match(const unsigned char *ctrl, unsigned char byte)
{
    uint32_t m = 0;
    for (unsigned j = 0; j < SHMOBJ_HTCORE_GROUP; j++)
        m |= (uint32_t)(ctrl[j] == byte) << j;
    return m;
}

static uint64_t naive_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Control bytes of fixed content give these masks (tags, empty, free),
 * and random ones the masks a byte-by-byte reading gives. */
static void test_htcore_group_match_golden(void **state)
{
    (void)state;
    static const unsigned char ctrl[16] = {0x05, 0x80, 0x05, 0xFE, 0x7F, 0x80, 0x00, 0x05,
                                           0x11, 0x22, 0xFE, 0x80, 0x05, 0x7F, 0x33, 0x80};
    uint32_t empty = 0;
    assert_int_equal(shmobj_htcore_tag(UINT64_C(0x1234567890abcd85)), 0x05);
    assert_int_equal(shmobj_htcore_group_match(ctrl, 0x05, &empty), 0x1085);
    assert_int_equal(empty, 0x8822);
    assert_int_equal(shmobj_htcore_group_match(ctrl, 0x7F, &empty), 0x2010);
    assert_int_equal(shmobj_htcore_group_match(ctrl, 0x00, &empty), 0x0040);
    assert_int_equal(shmobj_htcore_group_match(ctrl, 0x44, &empty), 0);
    assert_int_equal(empty, 0x8822);
    assert_int_equal(shmobj_htcore_group_free(ctrl), 0x8C2A);
    assert_int_equal(shmobj_htcore_ctz(0x1085), 0);
    assert_int_equal(shmobj_htcore_ctz(0x8000), 15);
    assert_int_equal(shmobj_htcore_ctz(0x10000), 16);
    unsigned char g[16];
    for (int round = 0; round < 20000; round++) {
        for (int j = 0; j < 16; j++) {
            uint64_t r = rnd();
            /* mostly the three kinds a table holds, sometimes any byte */
            g[j] = (unsigned char)(r % 4 == 0 ? SHMOBJ_HTCORE_CTRL_EMPTY
                                   : r % 4 == 1 ? SHMOBJ_HTCORE_CTRL_DELETED
                                   : r % 4 == 2 ? (r >> 8) % 4
                                                : r >> 8);
        }
        unsigned char tag = (unsigned char)(rnd() % 4);
        uint32_t free_ref = 0;
        for (unsigned j = 0; j < 16; j++)
            free_ref |= (uint32_t)(g[j] >= 0x80) << j;
        assert_int_equal(shmobj_htcore_group_match(g, tag, &empty), naive_match(g, tag));
        assert_int_equal(empty, naive_match(g, SHMOBJ_HTCORE_CTRL_EMPTY));
        assert_int_equal(shmobj_htcore_group_free(g), free_ref);
    }
}

/* The probe sequence: from the home group (hash bits 7 on), triangular
 * steps that visit every group once; and the core places entries along
 * that very sequence (what a caller's own probe relies on). */
static void test_htcore_probe_sequence_golden(void **state)
{
    (void)state;
    static const uint64_t want[8] = {5, 6, 0, 3, 7, 4, 2, 1};
    uint64_t hash = UINT64_C(0xabcdef0000000000) | 5u << 7 | 0x33;
    uint64_t g = shmobj_htcore_probe_home(hash, 7);
    for (uint64_t step = 0; step < 8; step++) {
        assert_true(g == want[step]);
        g = shmobj_htcore_probe_next(g, step, 7);
    }
    assert_true(shmobj_htcore_probe_home(hash, 0) == 0);
    assert_true(shmobj_htcore_probe_home(UINT64_C(0x1234) << 7, 0xffff) == 0x1234);
    /* every group once, in a table of 1024 groups */
    static unsigned char seen[1024];
    memset(seen, 0, sizeof seen);
    g = shmobj_htcore_probe_home(rnd(), 1023);
    for (uint64_t step = 0; step < 1024; step++) {
        assert_int_equal(seen[g], 0);
        seen[g] = 1;
        g = shmobj_htcore_probe_next(g, step, 1023);
    }
    /* 48 entries of one home group in a table of 4 groups: 16 in each of
     * the first three groups of the sequence, at the lowest free slots */
    uint64_t bytes = shmobj_htcore_footprint(56, SHMOBJ_HTCORE_REF_SLOT);
    void *mem = xalloc(bytes);
    shmobj_htcore t;
    assert_int_equal(shmobj_htcore_init_ref(&t, mem, bytes, 56, 7), 0);
    assert_true(t.mask + 1 == 64);
    for (uint64_t i = 0; i < 48; i++) {
        uint64_t idx, h = (i << 32) | 2u << 7 | (i % 128);
        assert_int_equal(shmobj_htcore_ref_insert(&t, h, i + 1, &idx), 0);
        uint64_t grp = shmobj_htcore_probe_home(h, 3);
        for (uint64_t step = 0; step < i / 16; step++)
            grp = shmobj_htcore_probe_next(grp, step, 3);
        assert_true(idx == grp * 16 + i % 16);
    }
    free(mem);
}

/* The golden ref table of test_htcore_ref_layout_golden, read with the
 * inline pieces as the map reads its tables: every key is found by its
 * own walk of the probe sequence at the index shmobj_htcore_ref_find()
 * gives, keys never inserted end at a group with an empty slot, the
 * candidates agree with a byte-by-byte reading and with
 * shmobj_htcore_ref_group(), and a digest of them is pinned. */
struct golden_key_ctx {
    uint64_t want;
};
static int golden_eq(void *ctx, uint64_t v)
{
    return v == ((struct golden_key_ctx *)ctx)->want;
}

static void test_htcore_ref_candidates_golden(void **state)
{
    (void)state;
    if (!host_is_le())
        skip();
    uint64_t bytes;
    shmobj_htcore t;
    void *mem = golden_ref_table(&t, &bytes);
    assert_true(shmobj_htcore_hash64(mem, (size_t)bytes, 0) == 0x1417ad217b82c205ULL);
    const unsigned char *table = mem;
    assert_true(SHMOBJ_HTCORE_REF_GROUP_BYTES == 144);
    assert_true(t.group_bytes == SHMOBJ_HTCORE_REF_GROUP_BYTES);
    assert_true(shmobj_htcore_header_slots(table) == 64);
    assert_true(shmobj_htcore_header_tail(table) ==
                (SHMOBJ_HTCORE_REF_SLOT | (uint64_t)0xbcae1571u << 32));
    const unsigned char *groups = table + SHMOBJ_HTCORE_HEADER_SIZE;
    uint64_t gmask = (t.mask + 1) / SHMOBJ_HTCORE_GROUP - 1, digest = 0;
    for (uint64_t k = 0; k < 100; k++) {
        unsigned char key[8];
        for (int i = 0; i < 8; i++)
            key[i] = (unsigned char)(k >> (8 * i));
        uint64_t h = shmobj_htcore_hash64(key, 8, 0x5eed), found = UINT64_MAX;
        uint64_t g = shmobj_htcore_probe_home(h, gmask), step;
        for (step = 0; step <= gmask; step++) {
            const unsigned char *gp = groups + g * SHMOBJ_HTCORE_REF_GROUP_BYTES;
            uint32_t cand = shmobj_htcore_ref_candidates(gp, h), naive = 0;
            for (unsigned j = 0; j < 16; j++) {
                uint64_t w = naive_le64(gp + 16 + 8 * j);
                assert_true(shmobj_htcore_ref_word(gp, j) == w);
                if (gp[j] == (h & 0x7f) && (w & 0xfffff) == ((h >> 7) & 0xfffff))
                    naive |= 1u << j;
                assert_int_equal(shmobj_htcore_ref_word_matches(w, h),
                                 (w & 0xfffff) == shmobj_htcore_ref_word_bits(h));
            }
            if (naive_match(gp, SHMOBJ_HTCORE_CTRL_EMPTY) != 0)
                naive |= SHMOBJ_HTCORE_GROUP_END;
            assert_int_equal(cand, naive);
            assert_int_equal(shmobj_htcore_ref_group(&t, g, h), cand);
            digest = shmobj_htcore_hash64(&cand, sizeof cand, digest ^ g);
            for (uint32_t c = cand & (SHMOBJ_HTCORE_GROUP_END - 1); c != 0; c &= c - 1) {
                uint64_t v = shmobj_htcore_ref_word_value(
                    shmobj_htcore_ref_word(gp, shmobj_htcore_ctz(c)));
                if (v == k * 16 + 1)
                    found = g * 16 + shmobj_htcore_ctz(c);
            }
            if (found != UINT64_MAX || (cand & SHMOBJ_HTCORE_GROUP_END))
                break;
            g = shmobj_htcore_probe_next(g, step, gmask);
        }
        struct golden_key_ctx c = {k * 16 + 1};
        uint64_t idx;
        int rc = shmobj_htcore_ref_find(&t, h, golden_eq, &c, &idx);
        if (k < 50) {
            assert_int_equal(rc, 0);
            assert_true(found == idx);
        } else {
            assert_int_equal(rc, SHMOBJ_HTCORE_ENOTFOUND);
            assert_true(found == UINT64_MAX);
            assert_true(step <= gmask); /* ended at a group with an empty slot */
        }
    }
    if (digest != 0xb936147a8c358bbaULL)
        print_error("candidates digest 0x%016llx\n", (unsigned long long)digest);
    assert_true(digest == 0xb936147a8c358bbaULL);
    free(mem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_htcore_inline_random_vs_reference),
        cmocka_unit_test(test_htcore_put_full_returns_efull),
        cmocka_unit_test(test_htcore_churn_does_not_degrade),
        cmocka_unit_test(test_htcore_ref_random_vs_reference),
        cmocka_unit_test(test_htcore_ref_find_eq_error_propagates),
        cmocka_unit_test(test_htcore_attach_damaged_header),
        cmocka_unit_test(test_htcore_lookup_garbage_stays_in_bounds),
        cmocka_unit_test(test_htcore_init_bad_args),
        cmocka_unit_test(test_htcore_hash_golden),
        cmocka_unit_test(test_htcore_layout_golden),
        cmocka_unit_test(test_htcore_ref_layout_golden),
        cmocka_unit_test(test_htcore_group_match_golden),
        cmocka_unit_test(test_htcore_probe_sequence_golden),
        cmocka_unit_test(test_htcore_ref_candidates_golden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
