/* The arena allocator core on plain malloc'd buffers (no segment): allocation
 * and alignment, exhaustion and growth, coalescing, a randomized model
 * against a shadow table, stale references, the heap check on damaged heaps,
 * and rebuild after torn operations, including a child process SIGKILLed in
 * the middle of allocating. */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "arena.h"
#include "shmobj/error.h"
#include "test-util.h"

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
    return test_xorshift(&rng_state);
}

static uint64_t rnd_below(uint64_t n) { return rnd() % n; }

struct heap {
    uint8_t *base;
    uint64_t mapped;
    uint64_t arena_off;
};

static struct heap heap_new(uint64_t mapped, uint64_t arena_off,
                            uint64_t heap_end)
{
    struct heap h;
    h.base = aligned_alloc(4096, (mapped + 4095) & ~(uint64_t)4095);
    assert_non_null(h.base);
    memset(h.base, 0xa5, mapped);
    h.mapped = mapped;
    h.arena_off = arena_off;
    assert_int_equal(shmobj__arena_init(h.base, mapped, arena_off, heap_end), 0);
    return h;
}

static int h_alloc(struct heap *h, uint64_t size, uint64_t align,
                   uint64_t *off, uint16_t *gen)
{
    return shmobj__arena_alloc(h->base, h->mapped, h->arena_off, size, align,
                               off, gen);
}

static int h_free(struct heap *h, uint64_t off, uint16_t gen)
{
    return shmobj__arena_free(h->base, h->mapped, h->arena_off, off, gen);
}

static int h_check(struct heap *h)
{
    uint64_t bad = 0;
    return shmobj__arena_check(h->base, h->mapped, h->arena_off, &bad);
}

static shmobj_arena_stats h_stats(struct heap *h)
{
    shmobj_arena_stats st;
    memset(&st, 0, sizeof(st));
    st.struct_size = sizeof(st);
    assert_int_equal(shmobj__arena_stats(h->base, h->mapped, h->arena_off, &st), 0);
    return st;
}

static uint8_t pattern_byte(uint64_t off, uint16_t gen, uint64_t i)
{
    return (uint8_t)((off * 31 + gen * 7 + i * 13) ^ (i >> 8));
}

static void fill(struct heap *h, uint64_t off, uint16_t gen, uint64_t len)
{
    for (uint64_t i = 0; i < len; i++)
        h->base[off + i] = pattern_byte(off, gen, i);
}

static int verify(const struct heap *h, uint64_t off, uint16_t gen, uint64_t len)
{
    for (uint64_t i = 0; i < len; i++)
        if (h->base[off + i] != pattern_byte(off, gen, i))
            return 0;
    return 1;
}

/* Header word of the block whose payload is at off (doc/format-arena.md). */
static uint64_t *hdr_word(struct heap *h, uint64_t off)
{
    return (uint64_t *)(void *)(h->base + off - 8);
}

struct live {
    uint64_t off, size;
    uint16_t gen;
};

/* ---- basics -------------------------------------------------------------- */

static void test_arena_init_region_too_small(void **state)
{
    (void)state;
    uint64_t cs = shmobj__arena_control_size();
    uint8_t *buf = aligned_alloc(64, cs + 4096);
    assert_non_null(buf);
    assert_int_equal(shmobj__arena_init(buf, cs + 4096, 0, cs + 16), SHMOBJ_EINVAL);
    assert_int_equal(shmobj__arena_init(buf, cs + 4096, 8, cs + 4096), SHMOBJ_EINVAL);
    assert_int_equal(shmobj__arena_init(buf, cs + 4096, 0, cs + 8192), SHMOBJ_EINVAL);
    assert_int_equal(shmobj__arena_init(NULL, cs + 4096, 0, cs + 4096), SHMOBJ_EINVAL);
    assert_int_equal(shmobj__arena_init(buf, cs + 4096, 0, cs + 4096), 0);
    free(buf);
}

static void test_arena_alloc_basic(void **state)
{
    (void)state;
    struct heap h = heap_new(1 << 20, 256, 1 << 20);
    shmobj_arena_stats st0 = h_stats(&h);
    assert_int_equal(st0.free_blocks, 1);
    assert_int_equal(st0.used_blocks, 0);
    assert_int_equal(st0.fragmentation_permille, 0);

    uint64_t off, usable;
    uint16_t gen;
    assert_int_equal(h_alloc(&h, 100, 0, &off, &gen), 0);
    assert_int_equal(off % 16, 0);
    assert_true(off >= 256 + shmobj__arena_control_size());
    assert_int_equal(shmobj__arena_check_ref(h.base, h.mapped, h.arena_off, off, gen, &usable), 0);
    assert_true(usable >= 100 && usable < 100 + 32);
    fill(&h, off, gen, usable);
    assert_int_equal(h_check(&h), 0);
    shmobj_arena_stats st = h_stats(&h);
    assert_int_equal(st.used_blocks, 1);
    assert_int_equal(st.used_bytes, usable + 16);
    assert_int_equal(st.used_bytes + st.free_bytes, st.total_bytes);

    assert_int_equal(h_alloc(&h, 0, 0, &off, &gen), SHMOBJ_EINVAL);
    assert_int_equal(h_free(&h, off, gen), 0);
    assert_int_equal(shmobj__arena_check_ref(h.base, h.mapped, h.arena_off, off, gen, &usable),
                     SHMOBJ_ESTALE);
    assert_int_equal(h_check(&h), 0);
    st = h_stats(&h);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.free_bytes, st0.free_bytes);
    free(h.base);
}

static void test_arena_alloc_alignment_honoured(void **state)
{
    (void)state;
    struct heap h = heap_new(8 << 20, 0, 8 << 20);
    struct live l[200];
    int n = 0;
    for (uint64_t align = 16; align <= 4096; align *= 2) {
        for (int k = 0; k < 12; k++) {
            uint64_t size = 1 + rnd_below(3000);
            assert_int_equal(h_alloc(&h, size, align, &l[n].off, &l[n].gen), 0);
            assert_int_equal(l[n].off % align, 0);
            assert_int_equal((uintptr_t)(h.base + l[n].off) % align, 0);
            l[n].size = size;
            fill(&h, l[n].off, l[n].gen, size);
            n++;
        }
        assert_int_equal(h_check(&h), 0);
    }
    uint64_t off;
    uint16_t gen;
    assert_int_equal(h_alloc(&h, 10, 24, &off, &gen), SHMOBJ_EINVAL);
    assert_int_equal(h_alloc(&h, 10, 8192, &off, &gen), SHMOBJ_EINVAL);
    assert_int_equal(h_alloc(&h, 10, 8, &off, &gen), 0); /* means 16 */
    assert_int_equal(off % 16, 0);
    assert_int_equal(h_free(&h, off, gen), 0);
    for (int i = 0; i < n; i++) {
        assert_true(verify(&h, l[i].off, l[i].gen, l[i].size));
        assert_int_equal(h_free(&h, l[i].off, l[i].gen), 0);
    }
    assert_int_equal(h_check(&h), 0);
    assert_int_equal(h_stats(&h).free_blocks, 1);
    free(h.base);
}

static void test_arena_alloc_exhausted_enomem(void **state)
{
    (void)state;
    struct heap h = heap_new(256 << 10, 0, 256 << 10);
    struct live l[512];
    int n = 0;
    int rc;
    while ((rc = h_alloc(&h, 1000, 0, &l[n].off, &l[n].gen)) == 0)
        n++;
    assert_int_equal(rc, SHMOBJ_ENOMEM);
    assert_true(n > 200);
    shmobj_arena_stats st = h_stats(&h);
    assert_true(st.largest_free < 1000);
    assert_int_equal(h_check(&h), 0);
    /* What is left still serves a request that fits. */
    if (st.largest_free >= 16) {
        uint64_t off;
        uint16_t gen;
        assert_int_equal(h_alloc(&h, st.largest_free, 0, &off, &gen), 0);
        assert_int_equal(h_alloc(&h, 16, 0, &off, &gen), SHMOBJ_ENOMEM);
    }
    assert_int_equal(h_alloc(&h, UINT64_MAX / 2, 0, &l[n].off, &l[n].gen), SHMOBJ_ENOMEM);
    free(h.base);
}

/* The seed's story: ten integers, free every second one, ask for a block
 * larger than any hole. It fails cleanly on a full heap and succeeds once
 * the heap has grown. */
static void test_arena_alloc_fragmented_enomem_then_grow(void **state)
{
    (void)state;
    uint64_t cs = shmobj__arena_control_size();
    uint64_t heap_bytes = 10 * 32 + 16; /* ten 32-byte blocks + sentinel */
    uint64_t end = cs + heap_bytes;
    struct heap h = heap_new(end + 65536, 0, end);
    struct live l[10];
    for (int i = 0; i < 10; i++) {
        assert_int_equal(h_alloc(&h, sizeof(int), 0, &l[i].off, &l[i].gen), 0);
        *(int *)(void *)(h.base + l[i].off) = i * 1000;
    }
    uint64_t off;
    uint16_t gen;
    assert_int_equal(h_alloc(&h, 1, 0, &off, &gen), SHMOBJ_ENOMEM);
    for (int i = 0; i < 10; i += 2)
        assert_int_equal(h_free(&h, l[i].off, l[i].gen), 0);
    shmobj_arena_stats st = h_stats(&h);
    assert_int_equal(st.free_blocks, 5);
    assert_int_equal(st.largest_free, 16);
    assert_int_equal(st.free_bytes, 5 * 32);
    assert_int_equal(st.fragmentation_permille, 800);
    assert_int_equal(h_alloc(&h, 64, 0, &off, &gen), SHMOBJ_ENOMEM);
    assert_int_equal(h_check(&h), 0);

    assert_int_equal(shmobj__arena_grow(h.base, h.mapped, 0, end + 4096), 0);
    assert_int_equal(h_check(&h), 0);
    assert_int_equal(h_alloc(&h, 64, 0, &off, &gen), 0);
    for (int i = 1; i < 10; i += 2)
        assert_int_equal(*(int *)(void *)(h.base + l[i].off), i * 1000);
    assert_int_equal(h_check(&h), 0);
    /* Growing again while the last block is free merges into it. */
    st = h_stats(&h);
    uint64_t free_blocks = st.free_blocks;
    assert_int_equal(shmobj__arena_grow(h.base, h.mapped, 0, end + 8192), 0);
    st = h_stats(&h);
    assert_int_equal(st.free_blocks, free_blocks);
    assert_int_equal(h_check(&h), 0);
    assert_int_equal(shmobj__arena_grow(h.base, h.mapped, 0, end + 4096), SHMOBJ_EINVAL);
    assert_int_equal(shmobj__arena_grow(h.base, h.mapped, 0, h.mapped + 4096), SHMOBJ_EINVAL);
    free(h.base);
}

static void test_arena_free_all_random_order_coalesces(void **state)
{
    (void)state;
    struct heap h = heap_new(4 << 20, 0, 4 << 20);
    shmobj_arena_stats st0 = h_stats(&h);
    enum { N = 3000 };
    static struct live l[N];
    int n = 0;
    while (n < N && h_alloc(&h, 1 + rnd_below(2000), 16u << rnd_below(3),
                            &l[n].off, &l[n].gen) == 0)
        n++;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rnd_below((uint64_t)i + 1);
        struct live t = l[i];
        l[i] = l[j];
        l[j] = t;
    }
    for (int i = 0; i < n; i++) {
        assert_int_equal(h_free(&h, l[i].off, l[i].gen), 0);
        if (i % 500 == 0)
            assert_int_equal(h_check(&h), 0);
    }
    shmobj_arena_stats st = h_stats(&h);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.used_blocks, 0);
    assert_int_equal(st.free_bytes, st0.free_bytes);
    assert_int_equal(h_check(&h), 0);
    free(h.base);
}

/* ---- the model test -------------------------------------------------------- */

static void test_arena_model_random_ops(void **state)
{
    (void)state;
    struct heap h = heap_new(16 << 20, 4096, 16 << 20);
    enum { SLOTS = 2048, OPS = 400000 };
    static struct live l[SLOTS];
    memset(l, 0, sizeof(l));
    uint64_t live = 0, enomem = 0;
    for (int op = 0; op < OPS; op++) {
        int i = (int)rnd_below(SLOTS);
        if (l[i].off != 0) {
            assert_true(verify(&h, l[i].off, l[i].gen, l[i].size));
            assert_int_equal(h_free(&h, l[i].off, l[i].gen), 0);
            l[i].off = 0;
            live--;
        } else {
            uint64_t r = rnd();
            uint64_t size = (r & 3) == 0 ? 1 + rnd_below(64 << 10)
                                         : 1 + rnd_below(4096);
            uint64_t align = (r & 0x30) == 0 ? 16u << rnd_below(9) : 0;
            int rc = h_alloc(&h, size, align, &l[i].off, &l[i].gen);
            if (rc == SHMOBJ_ENOMEM) {
                enomem++;
                l[i].off = 0;
                continue;
            }
            assert_int_equal(rc, 0);
            if (align != 0)
                assert_int_equal(l[i].off % align, 0);
            uint64_t usable;
            assert_int_equal(shmobj__arena_check_ref(h.base, h.mapped, h.arena_off,
                                                     l[i].off, l[i].gen, &usable), 0);
            assert_true(usable >= size);
            l[i].size = size;
            fill(&h, l[i].off, l[i].gen, size);
            live++;
        }
        if (op % 20000 == 0) {
            assert_int_equal(h_check(&h), 0);
            shmobj_arena_stats st = h_stats(&h);
            assert_int_equal(st.used_blocks, live);
            assert_int_equal(st.used_bytes + st.free_bytes, st.total_bytes);
        }
    }
    assert_int_equal(h_check(&h), 0);
    for (int i = 0; i < SLOTS; i++) {
        if (l[i].off != 0) {
            assert_true(verify(&h, l[i].off, l[i].gen, l[i].size));
            assert_int_equal(h_free(&h, l[i].off, l[i].gen), 0);
        }
    }
    assert_int_equal(h_stats(&h).free_blocks, 1);
    assert_int_equal(h_check(&h), 0);
    (void)enomem;
    free(h.base);
}

/* ---- stale references and garbage offsets ---------------------------------- */

static void test_arena_free_stale_and_double_estale(void **state)
{
    (void)state;
    struct heap h = heap_new(1 << 20, 0, 1 << 20);
    struct live a, b, c;
    assert_int_equal(h_alloc(&h, 64, 0, &a.off, &a.gen), 0);
    assert_int_equal(h_alloc(&h, 64, 0, &b.off, &b.gen), 0);
    assert_int_equal(h_alloc(&h, 64, 0, &c.off, &c.gen), 0);
    fill(&h, c.off, c.gen, 64);
    assert_int_equal(h_free(&h, a.off, (uint16_t)(a.gen + 1)), SHMOBJ_ESTALE);
    assert_int_equal(h_free(&h, a.off, a.gen), 0);
    assert_int_equal(h_free(&h, a.off, a.gen), SHMOBJ_ESTALE); /* double */
    assert_int_equal(h_check(&h), 0);
    /* b merges into a's hole: b's header is now inside a free block. */
    assert_int_equal(h_free(&h, b.off, b.gen), 0);
    assert_int_equal(h_free(&h, b.off, b.gen), SHMOBJ_ESTALE);
    assert_int_equal(h_free(&h, a.off, a.gen), SHMOBJ_ESTALE);
    assert_int_equal(h_check(&h), 0);
    /* The same offset handed out again: the old reference stays stale. */
    struct live a2;
    assert_int_equal(h_alloc(&h, 64, 0, &a2.off, &a2.gen), 0);
    assert_int_equal(a2.off, a.off);
    assert_true(a2.gen != a.gen);
    assert_int_equal(h_free(&h, a.off, a.gen), SHMOBJ_ESTALE);
    assert_int_equal(shmobj__arena_check_ref(h.base, h.mapped, 0, a.off, a.gen, NULL),
                     SHMOBJ_ESTALE);
    assert_int_equal(h_check(&h), 0);
    /* Not a block at all. */
    assert_int_equal(h_free(&h, 0, 0), SHMOBJ_ECORRUPT);
    assert_int_equal(h_free(&h, c.off + 8, c.gen), SHMOBJ_ECORRUPT);
    assert_int_equal(h_free(&h, h.mapped + 4096, 0), SHMOBJ_ECORRUPT);
    assert_int_equal(h_free(&h, UINT64_MAX - 15, 0), SHMOBJ_ECORRUPT);
    int rc = h_free(&h, c.off + 32, 0);
    assert_true(rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE);
    assert_int_equal(h_check(&h), 0);
    assert_true(verify(&h, c.off, c.gen, 64));
    /* A forged header inside a payload that looks used: refused, since its
     * boundary tag does not match. */
    uint64_t *forged = (uint64_t *)(void *)(h.base + c.off + 24);
    forged[0] = (UINT64_C(7) << 48) | 32 | 1;
    assert_int_equal(h_free(&h, c.off + 32, 7), SHMOBJ_ECORRUPT);
    assert_int_equal(h_check(&h), 0);
    free(h.base);
}

/* An offset made a block header by a split, swallowed by coalescing and
 * made a header again continues its own generations: every allocation at
 * that offset takes the generation after the previous one there, so every
 * reference handed out at it stays refused until the offset has been
 * handed out 65,536 times (16 bits; the last round shows the wrap is
 * exactly there). Both ways a split makes a header are covered: the tail
 * after an allocation and the block after an alignment gap. */
static void split_reuse_rounds(struct heap *h, uint64_t align)
{
    enum { REUSE = 8, ROUNDS = 65536 / REUSE + 1, KEEP = 512 };
    static uint16_t issued[KEEP];
    uint64_t t = 0;
    uint16_t first = 0, last = 0;
    uint32_t n = 0;
    for (int round = 0; round < ROUNDS; round++) {
        /* x takes the head of the only free block, so y is made by a
         * split: a tail, or the aligned block after a gap split off x's
         * remainder. */
        struct live x, y;
        assert_int_equal(h_alloc(h, 32, 0, &x.off, &x.gen), 0);
        for (int k = 0; k < REUSE; k++, n++) {
            assert_int_equal(h_alloc(h, 32, align, &y.off, &y.gen), 0);
            if (n == 0) {
                t = y.off;
                first = y.gen;
            }
            assert_int_equal(y.off, t);
            if (n < KEEP) {
                for (uint32_t i = 0; i < n; i++)
                    assert_int_equal(shmobj__arena_check_ref(h->base, h->mapped, 0, t,
                                                             issued[i], NULL),
                                     SHMOBJ_ESTALE);
                issued[n] = y.gen;
            }
            if (n != 0)
                assert_int_equal(y.gen, (uint16_t)(last + 1));
            last = y.gen;
            /* y merges with the free rest after it (its header stays). */
            assert_int_equal(h_free(h, y.off, y.gen), 0);
        }
        /* x merges with the free block at t: t is a header no longer. */
        assert_int_equal(h_free(h, x.off, x.gen), 0);
        assert_int_equal(shmobj__arena_check_ref(h->base, h->mapped, 0, t, last, NULL),
                         SHMOBJ_ESTALE);
    }
    assert_int_equal(h_check(h), 0);
    assert_int_equal(n, 65536 + REUSE);
    assert_int_equal((uint16_t)(last - first), REUSE - 1);
}

static void test_arena_check_ref_stale_after_split_coalesce_reuse(void **state)
{
    (void)state;
    struct heap h = heap_new(1 << 20, 0, 1 << 20);
    split_reuse_rounds(&h, 0);
    free(h.base);
    h = heap_new(1 << 20, 0, 1 << 20);
    split_reuse_rounds(&h, 256);
    free(h.base);
}

/* Frees of random offsets and generations on a live heap: only a real live
 * block with its generation is freed; everything else is refused and the
 * heap and the live blocks' data stay intact. */
static void test_arena_free_garbage_never_corrupts(void **state)
{
    (void)state;
    struct heap h = heap_new(2 << 20, 0, 2 << 20);
    enum { N = 300 };
    static struct live l[N];
    for (int i = 0; i < N; i++) {
        assert_int_equal(h_alloc(&h, 1 + rnd_below(3000), 0, &l[i].off, &l[i].gen), 0);
        uint64_t usable;
        assert_int_equal(shmobj__arena_check_ref(h.base, h.mapped, 0, l[i].off, l[i].gen,
                                                 &usable), 0);
        l[i].size = usable;
        for (uint64_t k = 0; k < usable; k++) /* random payload bytes */
            h.base[l[i].off + k] = (uint8_t)rnd();
    }
    for (int i = 0; i < N; i += 4) { /* some free neighbours */
        assert_int_equal(h_free(&h, l[i].off, l[i].gen), 0);
        l[i].off = 0;
    }
    uint8_t *copy = malloc(h.mapped);
    assert_non_null(copy);
    memcpy(copy, h.base, h.mapped);
    for (int t = 0; t < 200000; t++) {
        uint64_t off = (t & 1) ? rnd_below(h.mapped) & ~(uint64_t)15 : rnd_below(h.mapped);
        uint16_t gen = (uint16_t)rnd();
        int k = 0;
        while (k < N && !(l[k].off == off && l[k].gen == gen))
            k++;
        if (k < N)
            continue; /* a real reference: not garbage (never seen so far) */
        int rc = h_free(&h, off, gen);
        assert_true(rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT);
    }
    /* Not a single byte changed. */
    assert_memory_equal(copy, h.base, h.mapped);
    assert_int_equal(h_check(&h), 0);
    free(copy);
    free(h.base);
}

static void test_arena_check_ref_garbage_offsets(void **state)
{
    (void)state;
    struct heap h = heap_new(1 << 20, 0, 1 << 20);
    struct live l[64];
    for (int i = 0; i < 64; i++) {
        assert_int_equal(h_alloc(&h, 1 + rnd_below(2000), 0, &l[i].off, &l[i].gen), 0);
        for (uint64_t k = 0; k < 16; k++) /* random payload bytes */
            h.base[l[i].off + k] = (uint8_t)rnd();
    }
    uint64_t usable;
    const uint64_t bad[] = {0, 1, 15, 16, 17, h.mapped, h.mapped - 16, h.mapped + 16,
                            UINT64_MAX, UINT64_MAX - 15, UINT64_C(1) << 48,
                            shmobj__arena_control_size()};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        for (unsigned g = 0; g < 4; g++)
            assert_int_not_equal(shmobj__arena_check_ref(h.base, h.mapped, 0, bad[i],
                                                         (uint16_t)g, &usable), 0);
    for (int i = 0; i < 20000; i++) {
        uint64_t off = rnd_below(h.mapped + 64);
        uint16_t g = (uint16_t)rnd();
        int rc = shmobj__arena_check_ref(h.base, h.mapped, 0, off, g, &usable);
        if (rc == 0) {
            /* Only a real block may pass. */
            int found = 0;
            for (int k = 0; k < 64; k++)
                found |= l[k].off == off && l[k].gen == g;
            assert_true(found);
        }
    }
    for (int i = 0; i < 64; i++)
        assert_int_equal(shmobj__arena_check_ref(h.base, h.mapped, 0, l[i].off,
                                                 l[i].gen, &usable), 0);
    /* A wrong arena offset or a mapping too small is refused. */
    assert_int_equal(shmobj__arena_check_ref(h.base, h.mapped, 16, l[0].off, l[0].gen,
                                             &usable), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj__arena_check_ref(h.base, 4096, 0, l[0].off, l[0].gen,
                                             &usable), SHMOBJ_ECORRUPT);
    free(h.base);
}

/* check_ref() takes no lock: run it in a second thread against a writer
 * that allocates and frees under a mutex (the thread sanitizer's suite runs
 * this test: its name holds "threads"). Pinned blocks (never freed) must
 * pass every time, whatever the writer does around them; references the
 * writer may free at any moment give 0 or SHMOBJ_ESTALE, never a crash. */
struct concurrent {
    struct heap h;
    pthread_mutex_t lock;
    _Atomic uint64_t refs[64]; /* off | gen << 48 of the writer's blocks */
    struct live pinned[16];
    atomic_int stop;
};

static void *check_ref_reader(void *arg)
{
    struct concurrent *cc = arg;
    uint64_t bad = 0, n = 0;
    while (!atomic_load(&cc->stop)) {
        for (int i = 0; i < 16; i++) {
            int rc = shmobj__arena_check_ref(cc->h.base, cc->h.mapped, 0, cc->pinned[i].off,
                                             cc->pinned[i].gen, NULL);
            if (rc != 0) {
                bad++;
                print_error("pinned %d rc %d\n", i, rc);
            }
        }
        for (int i = 0; i < 64; i++) {
            uint64_t r = atomic_load(&cc->refs[i]);
            if (r == 0)
                continue;
            int rc = shmobj__arena_check_ref(cc->h.base, cc->h.mapped, 0,
                                             r & ((UINT64_C(1) << 48) - 1),
                                             (uint16_t)(r >> 48), NULL);
            if (rc != 0 && rc != SHMOBJ_ESTALE) {
                bad++;
                print_error("ref %d rc %d\n", i, rc);
            }
        }
        n++;
    }
    if (bad != 0)
        print_error("check_ref: %llu wrong answers in %llu rounds\n",
                    (unsigned long long)bad, (unsigned long long)n);
    return (void *)(uintptr_t)(bad != 0);
}

static void test_arena_threads_check_ref_with_writer(void **state)
{
    (void)state;
    static struct concurrent cc;
    memset(&cc, 0, sizeof(cc));
    cc.h = heap_new(4 << 20, 0, 4 << 20);
    pthread_mutex_init(&cc.lock, NULL);
    for (int i = 0; i < 16; i++)
        assert_int_equal(h_alloc(&cc.h, 1 + rnd_below(500), 0, &cc.pinned[i].off,
                                 &cc.pinned[i].gen), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, check_ref_reader, &cc), 0);
    for (int op = 0; op < 200000; op++) {
        int i = (int)rnd_below(64);
        uint64_t r = atomic_load(&cc.refs[i]);
        pthread_mutex_lock(&cc.lock);
        if (r != 0) {
            assert_int_equal(h_free(&cc.h, r & ((UINT64_C(1) << 48) - 1),
                                    (uint16_t)(r >> 48)), 0);
            atomic_store(&cc.refs[i], 0);
        } else {
            uint64_t off;
            uint16_t gen;
            if (h_alloc(&cc.h, 1 + rnd_below(2000), 16u << rnd_below(3), &off, &gen) == 0)
                atomic_store(&cc.refs[i], off | (uint64_t)gen << 48);
        }
        pthread_mutex_unlock(&cc.lock);
    }
    atomic_store(&cc.stop, 1);
    void *ret;
    assert_int_equal(pthread_join(t, &ret), 0);
    assert_int_equal((uintptr_t)ret, 0);
    assert_int_equal(h_check(&cc.h), 0);
    pthread_mutex_destroy(&cc.lock);
    free(cc.h.base);
}

/* ---- damaged heaps ------------------------------------------------------------ */

/* The check names the first bad block. */
static void test_arena_check_reports_bad_block(void **state)
{
    (void)state;
    struct heap h = heap_new(1 << 20, 0, 1 << 20);
    struct live l[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(h_alloc(&h, 100, 0, &l[i].off, &l[i].gen), 0);
    assert_int_equal(h_free(&h, l[3].off, l[3].gen), 0);
    uint64_t bad = 0;
    uint64_t *w = hdr_word(&h, l[5].off);
    uint64_t saved = *w;
    *w = (saved & ~UINT64_C(0x0000fffffffffff0)) | (UINT64_C(1) << 40);
    assert_int_equal(shmobj__arena_check(h.base, h.mapped, 0, &bad), SHMOBJ_ECORRUPT);
    assert_int_equal(bad, l[5].off - 16);
    *w = saved;
    /* A wrong boundary tag is reported at the block that carries it. */
    uint64_t *tag = (uint64_t *)(void *)(h.base + l[6].off - 16);
    *tag += 16;
    assert_int_equal(shmobj__arena_check(h.base, h.mapped, 0, &bad), SHMOBJ_ECORRUPT);
    assert_int_equal(bad, l[6].off - 16);
    *tag -= 16;
    /* A free block marked used: its neighbour's PREV_FREE flag gives it away. */
    uint64_t *w3 = hdr_word(&h, l[3].off);
    *w3 |= 1;
    assert_int_equal(shmobj__arena_check(h.base, h.mapped, 0, &bad), SHMOBJ_ECORRUPT);
    assert_int_equal(bad, l[4].off - 16);
    *w3 &= ~UINT64_C(1);
    /* A bad magic is reported at the control block. */
    h.base[0] ^= 1;
    assert_int_equal(shmobj__arena_check(h.base, h.mapped, 0, &bad), SHMOBJ_ECORRUPT);
    assert_int_equal(bad, 0);
    assert_int_equal(shmobj__arena_rebuild(h.base, h.mapped, 0), SHMOBJ_ECORRUPT);
    h.base[0] ^= 1;
    assert_int_equal(h_check(&h), 0);
    free(h.base);
}

/* Build a heap with live blocks, then copy it into an exact-size malloc'd
 * buffer (so ASan sees any read past `mapped`) and damage it. */
static void test_arena_check_damaged_never_crashes(void **state)
{
    (void)state;
    const uint64_t mapped = shmobj__arena_control_size() + 64 * 1024;
    struct heap h = heap_new(mapped, 0, mapped);
    struct live l[256];
    int n = 0;
    for (int i = 0; i < 400 && n < 256; i++) {
        if (n > 0 && (rnd() & 3) == 0) {
            int k = (int)rnd_below((uint64_t)n);
            assert_int_equal(h_free(&h, l[k].off, l[k].gen), 0);
            l[k] = l[--n];
        } else if (h_alloc(&h, 1 + rnd_below(600), 16u << rnd_below(3), &l[n].off,
                           &l[n].gen) == 0) {
            n++;
        }
    }
    assert_int_equal(h_check(&h), 0);
    uint8_t *buf = malloc(mapped);
    assert_non_null(buf);
    int caught = 0, repaired = 0;
    for (int round = 0; round < 3000; round++) {
        memcpy(buf, h.base, mapped);
        int edits = 1 + (int)rnd_below(4);
        for (int e = 0; e < edits; e++) {
            uint64_t pos;
            if ((rnd() & 1) != 0) /* a header or link of a live block */
                pos = l[rnd_below((uint64_t)n)].off - 16 + rnd_below(32);
            else if ((rnd() & 3) == 0) /* the control block */
                pos = rnd_below(shmobj__arena_control_size());
            else
                pos = rnd_below(mapped);
            pos &= ~(uint64_t)7;
            if (pos + 8 > mapped)
                continue;
            uint64_t v;
            switch (rnd() & 3) {
            case 0: v = rnd(); break;
            case 1: v = rnd_below(mapped + 64); break;
            case 2: memcpy(&v, buf + pos, 8); v ^= UINT64_C(1) << rnd_below(64); break;
            default: v = 0; break;
            }
            memcpy(buf + pos, &v, 8);
        }
        uint64_t bad = UINT64_MAX;
        int rc = shmobj__arena_check(buf, mapped, 0, &bad);
        if (rc != 0) {
            assert_int_equal(rc, SHMOBJ_ECORRUPT);
            assert_true(bad < mapped);
            caught++;
        }
        shmobj_arena_stats st;
        st.struct_size = sizeof(st);
        (void)shmobj__arena_stats(buf, mapped, 0, &st);
        uint64_t usable;
        for (int k = 0; k < 4 && n > 0; k++) {
            struct live *x = &l[rnd_below((uint64_t)n)];
            (void)shmobj__arena_check_ref(buf, mapped, 0, x->off, x->gen, &usable);
        }
        if (shmobj__arena_rebuild(buf, mapped, 0) == 0) {
            assert_int_equal(shmobj__arena_check(buf, mapped, 0, &bad), 0);
            repaired++;
            uint64_t off;
            uint16_t gen;
            if (shmobj__arena_alloc(buf, mapped, 0, 100, 64, &off, &gen) == 0)
                assert_int_equal(shmobj__arena_free(buf, mapped, 0, off, gen), 0);
            assert_int_equal(shmobj__arena_check(buf, mapped, 0, &bad), 0);
        }
    }
    assert_true(caught > 100);
    assert_true(repaired > 100);
    free(buf);
    free(h.base);
}

/* ---- rebuild after torn operations -------------------------------------------- */

static void setup_live(struct heap *h, struct live *l, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(h_alloc(h, 1 + rnd_below(3000), 0, &l[i].off, &l[i].gen), 0);
        l[i].size = 1 + rnd_below(16); /* bytes we fill (>= 1, <= usable) */
        fill(h, l[i].off, l[i].gen, l[i].size);
    }
}

static void assert_live_intact(struct heap *h, struct live *l, int n)
{
    for (int i = 0; i < n; i++) {
        if (l[i].off == 0)
            continue;
        assert_int_equal(shmobj__arena_check_ref(h->base, h->mapped, h->arena_off,
                                                 l[i].off, l[i].gen, NULL), 0);
        assert_true(verify(h, l[i].off, l[i].gen, l[i].size));
    }
}

static void test_arena_rebuild_free_lists_damaged(void **state)
{
    (void)state;
    struct heap h = heap_new(4 << 20, 0, 4 << 20);
    enum { N = 400 };
    static struct live l[N];
    setup_live(&h, l, N);
    for (int i = 0; i < N; i += 3) {
        assert_int_equal(h_free(&h, l[i].off, l[i].gen), 0);
        l[i].off = 0;
    }
    shmobj_arena_stats before = h_stats(&h);
    assert_int_equal(h_check(&h), 0);

    /* Scribble over bitmaps, heads and every free block's links. */
    uint8_t *ctl = h.base;
    for (uint64_t i = 24; i < shmobj__arena_control_size(); i++)
        ctl[i] = (uint8_t)rnd();
    assert_int_equal(h_check(&h), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj__arena_rebuild(h.base, h.mapped, 0), 0);
    assert_int_equal(h_check(&h), 0);
    shmobj_arena_stats after = h_stats(&h);
    assert_int_equal(after.free_bytes, before.free_bytes);
    assert_int_equal(after.free_blocks, before.free_blocks);
    assert_live_intact(&h, l, N);

    /* A cycle in a free list: the check terminates and reports it. */
    uint64_t off1, off2;
    uint16_t g1, g2;
    assert_int_equal(h_alloc(&h, 40, 0, &off1, &g1), 0);
    assert_int_equal(h_alloc(&h, 40, 0, &off2, &g2), 0);
    uint64_t sep;
    uint16_t gsep;
    assert_int_equal(h_alloc(&h, 40, 0, &sep, &gsep), 0);
    assert_int_equal(h_free(&h, off1, g1), 0);
    assert_int_equal(h_check(&h), 0);
    uint64_t *link = (uint64_t *)(void *)(h.base + off1); /* next_free */
    *link = off1 - 16;
    uint64_t bad = 0;
    assert_int_equal(shmobj__arena_check(h.base, h.mapped, 0, &bad), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj__arena_rebuild(h.base, h.mapped, 0), 0);
    assert_int_equal(h_check(&h), 0);
    assert_live_intact(&h, l, N);
    free(h.base);
}

/* A free killed after its commit but before the merge: two adjacent free
 * blocks, stale PREV_FREE flag and boundary tag. */
static void test_arena_rebuild_torn_free_merges(void **state)
{
    (void)state;
    struct heap h = heap_new(1 << 20, 0, 1 << 20);
    enum { N = 50 };
    struct live l[N];
    setup_live(&h, l, N);
    assert_int_equal(h_free(&h, l[10].off, l[10].gen), 0);
    shmobj_arena_stats before = h_stats(&h);
    /* Clear the USED bit of block 11 and bump its generation, as the free's
     * commit store does, and stop there. */
    uint64_t *w = hdr_word(&h, l[11].off);
    *w = (*w & ~UINT64_C(1)) + (UINT64_C(1) << 48);
    uint64_t size11 = *w & UINT64_C(0x0000fffffffffff0);
    l[11].off = 0;
    l[10].off = 0;
    assert_int_equal(h_check(&h), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj__arena_rebuild(h.base, h.mapped, 0), 0);
    assert_int_equal(h_check(&h), 0);
    shmobj_arena_stats after = h_stats(&h);
    assert_int_equal(after.free_blocks, before.free_blocks);
    assert_int_equal(after.free_bytes, before.free_bytes + size11);
    assert_live_intact(&h, l, N);
    free(h.base);
}

/* Damage to the sentinel's flags: CACHED (only a used block below the
 * sentinel may carry it) and a reserved bit. The rebuild clears both, so
 * the check passes after it (found by fuzz-arena: it kept CACHED on the
 * sentinel, which the check refuses). */
static void test_arena_rebuild_clears_sentinel_flags(void **state)
{
    (void)state;
    uint64_t cs = shmobj__arena_control_size();
    uint64_t end = cs + 16384;
    struct heap h = heap_new(end, 0, end);
    enum { N = 4 };
    struct live l[N];
    for (int i = 0; i < N; i++) { /* fixed sizes: the tests' generator is left alone */
        assert_int_equal(h_alloc(&h, 100 + 500 * (uint64_t)i, 0, &l[i].off, &l[i].gen), 0);
        l[i].size = 8;
        fill(&h, l[i].off, l[i].gen, l[i].size);
    }
    uint64_t *sentinel = (uint64_t *)(void *)(h.base + end - 8);
    for (uint64_t flags = 4; flags <= 12; flags += 4) {
        *sentinel |= flags;
        assert_int_equal(h_check(&h), SHMOBJ_ECORRUPT);
        assert_int_equal(shmobj__arena_rebuild(h.base, h.mapped, 0), 0);
        assert_int_equal(h_check(&h), 0);
        assert_live_intact(&h, l, N);
    }
    free(h.base);
}

/* A grow killed after the old sentinel became a block and before heap_end
 * was published (format: doc/format-arena.md). */
static void test_arena_rebuild_torn_grow_completes(void **state)
{
    (void)state;
    uint64_t cs = shmobj__arena_control_size();
    uint64_t end = cs + 8192;
    struct heap h = heap_new(end + 8192, 0, end);
    enum { N = 4 };
    struct live l[N];
    setup_live(&h, l, N);
    uint64_t d = 4096, os = end - 16, ns = end + d - 16;
    uint64_t *p = (uint64_t *)(void *)h.base;
    uint64_t ws = p[(os + 8) / 8];
    p[ns / 8] = d;
    p[(ns + 8) / 8] = 1 | 2;
    p[(os + 8) / 8] = d | (ws & 2);
    assert_int_equal(h_check(&h), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj__arena_rebuild(h.base, h.mapped, 0), 0);
    assert_int_equal(h_check(&h), 0);
    assert_int_equal(h_stats(&h).total_bytes, end + d - 16 - ((cs + 15) & ~(uint64_t)15));
    assert_live_intact(&h, l, N);
    uint64_t off;
    uint16_t gen;
    assert_int_equal(h_alloc(&h, 4000, 0, &off, &gen), 0);
    assert_int_equal(h_check(&h), 0);
    free(h.base);
}

/* Where the killed child stands (a second shared mapping): how many calls
 * it has made, and whether it is inside one (set before each call, cleared
 * after it). */
struct kill_probe {
    _Atomic uint64_t calls;
    atomic_int inside;
};

/* The parent's wait for the child to be in its loop, bounded. */
static void wait_calls(struct kill_probe *p, uint64_t n)
{
    for (int i = 0; atomic_load(&p->calls) < n; i++) {
        assert_true(i < 100000); /* 10 s */
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

/* A child allocates and frees in a tight loop on a shared mapping and is
 * SIGKILLed at a random moment once it is in that loop (so a slow fork does
 * not let a round's kill land before the first call); the parent rebuilds
 * (as the next locker of the robust mutex would), the check passes and the
 * parent's blocks keep their data. Some kills must land inside a call, and
 * some must leave a heap that only the rebuild repairs: a test that never
 * tears the heap proves nothing about the repair. */
static void test_arena_rebuild_after_sigkill(void **state)
{
    (void)state;
    const uint64_t mapped = 64u << 20;
    struct heap h;
    h.base = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(h.base != MAP_FAILED);
    h.mapped = mapped;
    h.arena_off = 0;
    struct kill_probe *probe = mmap(NULL, sizeof(*probe), PROT_READ | PROT_WRITE,
                                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(probe != MAP_FAILED);
    /* The heap starts at a quarter of the mapping; the child grows it. */
    assert_int_equal(shmobj__arena_init(h.base, mapped, 0, mapped / 4), 0);
    enum { N = 64, ROUNDS = 150, WARM_CALLS = 64 };
    struct live l[N];
    setup_live(&h, l, N);
    uint64_t grown = mapped / 4;
    int torn = 0;   /* kills that left a state only rebuild could fix */
    int inside = 0; /* kills that landed inside a call */
    for (int round = 0; round < ROUNDS; round++) {
        uint64_t seed = rnd();
        atomic_store(&probe->calls, 0);
        atomic_store(&probe->inside, 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            rng_state = seed | 1;
            struct live c[32];
            memset(c, 0, sizeof(c));
            alarm(10);
            for (;;) {
                int i = (int)rnd_below(32);
                int rc = 0;
                atomic_store(&probe->inside, 1);
                if (c[i].off != 0) {
                    rc = h_free(&h, c[i].off, c[i].gen) != 0 ? 3 : 0;
                    c[i].off = 0;
                } else if (h_alloc(&h, 1 + rnd_below(4096), 16u << rnd_below(4),
                                   &c[i].off, &c[i].gen) != 0) {
                    c[i].off = 0;
                }
                atomic_store(&probe->inside, 0);
                if (rc != 0)
                    _exit(rc);
                atomic_fetch_add(&probe->calls, 1);
                if ((rnd() & 255) == 0) {
                    uint64_t end; /* heap_end: control block +16 */
                    memcpy(&end, h.base + 16, 8);
                    atomic_store(&probe->inside, 1);
                    if (end + 4096 <= mapped &&
                        shmobj__arena_grow(h.base, mapped, 0, end + 4096) != 0)
                        _exit(4);
                    atomic_store(&probe->inside, 0);
                }
            }
        }
        wait_calls(probe, WARM_CALLS);
        struct timespec ts = {0, (long)(rnd_below(500) * 1000)};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        inside += atomic_load(&probe->inside);
        torn += h_check(&h) != 0;
        assert_int_equal(shmobj__arena_rebuild(h.base, mapped, 0), 0);
        assert_int_equal(h_check(&h), 0);
        assert_live_intact(&h, l, N);
        uint64_t end;
        memcpy(&end, h.base + 16, 8);
        assert_true(end >= grown);
        grown = end;
        /* The parent keeps working on the repaired heap. */
        int k = (int)rnd_below(N);
        assert_int_equal(h_free(&h, l[k].off, l[k].gen), 0);
        assert_int_equal(h_alloc(&h, 1 + rnd_below(3000), 0, &l[k].off, &l[k].gen), 0);
        l[k].size = 8;
        fill(&h, l[k].off, l[k].gen, 8);
    }
    assert_true(grown > mapped / 4);
    print_message("%d of %d kills inside a call, %d left a torn heap, all repaired\n",
                  inside, (int)ROUNDS, torn);
    assert_true(inside > 0);
    assert_true(torn > 0);
    munmap(probe, sizeof(*probe));
    munmap(h.base, mapped);
}

/* ---- generation renewed in place ------------------------------------------ */

/* A used block renewed by its owner (a retired message block reused by
 * the queue) refuses every reference made before, as a free and an
 * allocation at the same offset would, and stays in use: its free takes
 * the new generation, and the offset's count goes on from there. */
static void test_arena_gen_renew_refuses_old_refs(void **state)
{
    (void)state;
    struct heap h = heap_new(1 << 20, 0, 1 << 20);
    uint64_t a, x, z;
    uint16_t ga, gx, gz;
    assert_int_equal(h_alloc(&h, 1000, 0, &a, &ga), 0);
    assert_int_equal(h_alloc(&h, 4000, 64, &x, &gx), 0);
    assert_int_equal(h_alloc(&h, 1000, 0, &z, &gz), 0);
    uint64_t usable = 0;
    assert_int_equal(shmobj__arena_check_ref(h.base, h.mapped, 0, x, gx, &usable), 0);
    uint16_t ng = shmobj__arena_gen_renew(h.base, x, gx);
    assert_int_equal(ng, (uint16_t)(gx + 1));
    assert_int_equal(shmobj__arena_check_ref(h.base, h.mapped, 0, x, gx, NULL),
                     SHMOBJ_ESTALE);
    assert_int_equal(shmobj__arena_usable_if(h.base, x, gx), 0);
    assert_int_equal(shmobj__arena_usable_if(h.base, x, ng), usable);
    assert_int_equal(h_free(&h, x, gx), SHMOBJ_ESTALE);
    assert_int_equal(h_check(&h), 0);
    /* the neighbours come and go: the renewal stays */
    assert_int_equal(h_free(&h, a, ga), 0);
    assert_int_equal(h_free(&h, z, gz), 0);
    assert_int_equal(shmobj__arena_rebuild(h.base, h.mapped, 0), 0);
    assert_int_equal(h_alloc(&h, 1000, 0, &a, &ga), 0);
    assert_int_equal(shmobj__arena_check_ref(h.base, h.mapped, 0, x, ng, NULL), 0);
    assert_int_equal(h_free(&h, x, ng), 0);
    assert_int_equal(h_free(&h, x, ng), SHMOBJ_ESTALE);
    assert_int_equal(h_check(&h), 0);
    free(h.base);
}

struct renew_arg {
    struct heap *h;
    uint64_t x;
    uint16_t gen;
    unsigned rounds;
    _Atomic int lost;
};

static void *renewer(void *p)
{
    struct renew_arg *a = p;
    for (unsigned i = 0; i < a->rounds; i++) {
        a->gen = shmobj__arena_gen_renew(a->h->base, a->x, a->gen);
        if (shmobj__arena_usable_if(a->h->base, a->x, a->gen) == 0)
            atomic_fetch_add(&a->lost, 1);
    }
    return NULL;
}

/* The owner renews its block while another thread, the heap's one writer
 * here, allocates and frees the block before it, which flips the renewed
 * block's PREV_FREE flag each time: no renewal may be undone by a store of
 * a header word loaded before it. */
static void test_arena_threads_gen_renew_races_neighbour_flag(void **state)
{
    (void)state;
    struct heap h = heap_new(1 << 20, 0, 1 << 20);
    uint64_t p, x, z;
    uint16_t gp, gz;
    assert_int_equal(h_alloc(&h, 1000, 0, &p, &gp), 0);
    struct renew_arg a = {.h = &h, .rounds = 2000000};
    assert_int_equal(h_alloc(&h, 1000, 0, &x, &a.gen), 0);
    assert_int_equal(h_alloc(&h, 1000, 0, &z, &gz), 0);
    a.x = x;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, renewer, &a), 0);
    for (unsigned i = 0; i < a.rounds / 4; i++) {
        assert_int_equal(h_free(&h, p, gp), 0);
        assert_int_equal(h_alloc(&h, 1000, 0, &p, &gp), 0);
    }
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&a.lost), 0);
    assert_int_equal((uint16_t)(*hdr_word(&h, x) >> 48), a.gen);
    assert_int_equal(h_check(&h), 0);
    free(h.base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arena_init_region_too_small),
        cmocka_unit_test(test_arena_alloc_basic),
        cmocka_unit_test(test_arena_alloc_alignment_honoured),
        cmocka_unit_test(test_arena_alloc_exhausted_enomem),
        cmocka_unit_test(test_arena_alloc_fragmented_enomem_then_grow),
        cmocka_unit_test(test_arena_free_all_random_order_coalesces),
        cmocka_unit_test(test_arena_model_random_ops),
        cmocka_unit_test(test_arena_free_stale_and_double_estale),
        cmocka_unit_test(test_arena_check_ref_stale_after_split_coalesce_reuse),
        cmocka_unit_test(test_arena_free_garbage_never_corrupts),
        cmocka_unit_test(test_arena_check_ref_garbage_offsets),
        cmocka_unit_test(test_arena_threads_check_ref_with_writer),
        cmocka_unit_test(test_arena_check_reports_bad_block),
        cmocka_unit_test(test_arena_check_damaged_never_crashes),
        cmocka_unit_test(test_arena_rebuild_free_lists_damaged),
        cmocka_unit_test(test_arena_rebuild_torn_free_merges),
        cmocka_unit_test(test_arena_rebuild_clears_sentinel_flags),
        cmocka_unit_test(test_arena_rebuild_torn_grow_completes),
        cmocka_unit_test(test_arena_rebuild_after_sigkill),
        cmocka_unit_test(test_arena_gen_renew_refuses_old_refs),
        cmocka_unit_test(test_arena_threads_gen_renew_races_neighbour_flag),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
