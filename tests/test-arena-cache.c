/* The processes' allocation caches of the segment heap (lib/segment/
 * seg-cache.h, lib/arena/arena-cache-inline.h): a block a handle frees
 * waits in its cache, used in the heap with CACHED set, for the handle's
 * next allocation of its size. These tests hold what a user relies on:
 * a reference to a cached block is stale; the check and the statistics
 * see cached blocks as free; a process killed with a full cache, even
 * holding the segment lock, leaks nothing once the heap is repaired; a
 * forked child never takes its parent's cached blocks; threads share one
 * handle's cache; a segment whose blocks were all freed serves a large
 * block again. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "seg-cache.h"
#include "segment.h"
#include "shmobj.h"
#include "test-stall.h"
#include "test-util.h"

#define MiB (UINT64_C(1) << 20)
#define OFF(r) ((r) & ((UINT64_C(1) << 48) - 1))
#define GEN(r) ((uint16_t)((r) >> 48))

struct fixture {
    char name[96];
    shmobj_segment *seg;
};

static int setup_sized(void **state, uint64_t initial, uint64_t max)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    test_name(f->name, sizeof f->name, "acache");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = initial;
    o.max_size = max;
    if (shmobj_segment_create(f->name, &o, &f->seg) != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int setup(void **state) { return setup_sized(state, 4 * MiB, 64 * MiB); }
static int setup_fixed(void **state) { return setup_sized(state, 1 * MiB, 1 * MiB); }

static int teardown(void **state)
{
    struct fixture *f = *state;
    shmobj_segment_close(f->seg);
    (void)shmobj_segment_destroy(f->name, 0);
    free(f);
    return 0;
}

/* The header word of the block a reference names (bit 2: CACHED). */
static uint64_t word_of(shmobj_segment *seg, shmobj_ref r)
{
    return atomic_load((_Atomic uint64_t *)(void *)(seg->space.base + OFF(r) - 8));
}

static void *shared_page(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    return p;
}

static shmobj_arena_stats stats_of(shmobj_segment *seg)
{
    shmobj_arena_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_arena_stats_get(seg, &st), 0);
    return st;
}

/* ---- references ------------------------------------------------------------ */

/* A freed block waits in the cache: the reference to it is stale for
 * every call, and so is the reference its next allocation will hand out
 * (a guess of the bumped generation) while it waits; the allocation of
 * its size then takes it back with that generation. */
static void test_cache_stale_reference_refused(void **state)
{
    struct fixture *f = *state;
    shmobj_ref r, guess, again;
    void *p;
    size_t usable;
    assert_int_equal(shmobj_arena_alloc(f->seg, 200, 0, &r, &p), 0);
    assert_int_equal(shmobj_arena_free(f->seg, r), 0);
    assert_true((word_of(f->seg, r) & 4) != 0); /* cached, not in the lists */
    assert_int_equal(shmobj_arena_ptr(f->seg, r, &p, &usable), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_arena_free(f->seg, r), SHMOBJ_ESTALE);
    guess = OFF(r) | (shmobj_ref)(uint16_t)(GEN(r) + 1) << 48;
    assert_int_equal(shmobj_arena_ptr(f->seg, guess, &p, &usable), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_arena_free(f->seg, guess), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_arena_alloc(f->seg, 200, 0, &again, &p), 0);
    assert_int_equal(again, guess);
    assert_true((word_of(f->seg, again) & 4) == 0);
    assert_int_equal(shmobj_arena_ptr(f->seg, again, &p, &usable), 0);
    assert_int_equal(shmobj_arena_ptr(f->seg, r, &p, &usable), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_arena_free(f->seg, again), 0);
    assert_int_equal(shmobj_arena_check(f->seg, NULL), 0);
}

/* ---- check and statistics -------------------------------------------------- */

static int stats_child(void *arg)
{
    const char *name = arg;
    shmobj_segment *s;
    if (shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &s) != 0)
        return 10;
    shmobj_arena_stats st = {.struct_size = sizeof st};
    uint64_t bad = 0;
    int rc = shmobj_arena_check(s, &bad);
    if (rc != 0)
        return 11;
    if (shmobj_arena_stats_get(s, &st) != 0)
        return 12;
    /* the parent's cached blocks are free bytes, not used ones */
    shmobj_segment_close(s);
    return st.used_bytes == 0 && st.free_bytes + st.used_bytes == st.total_bytes ? 0 : 13;
}

/* Blocks in the cache are checked as sound and counted free, by this
 * process and by another one, whose statistics cannot give them back. */
static void test_cache_stats_and_check_see_cached_blocks(void **state)
{
    struct fixture *f = *state;
    shmobj_arena_stats before = stats_of(f->seg);
    assert_int_equal(before.used_bytes, 0);
    shmobj_ref r[64];
    for (int i = 0; i < 64; i++)
        assert_int_equal(shmobj_arena_alloc(f->seg, 16 + (size_t)i * 48, 0, &r[i], NULL), 0);
    for (int i = 0; i < 64; i++)
        assert_int_equal(shmobj_arena_free(f->seg, r[i]), 0);
    unsigned cached = 0;
    for (int i = 0; i < 64; i++)
        cached += (word_of(f->seg, r[i]) & 4) != 0;
    assert_true(cached > 16);
    uint64_t bad = 1;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    assert_int_equal(test_child_wait(test_child_start(stats_child, f->name, 30)), 0);
    /* this handle's statistics give its own blocks back first: exact */
    shmobj_arena_stats after = stats_of(f->seg);
    assert_int_equal(after.used_bytes, 0);
    assert_int_equal(after.free_blocks, before.free_blocks);
    assert_int_equal(after.largest_free, before.largest_free);
    for (int i = 0; i < 64; i++)
        assert_true((word_of(f->seg, r[i]) & 4) == 0 || GEN(r[i]) == 0);
}

/* ---- kills ----------------------------------------------------------------- */

struct kill_arg {
    const char *name;
    _Atomic int *ready; /* shared: the child's cache is full */
    int hold_lock;      /* die inside the segment lock */
};

static shmobj_segment *killed_seg;
static int die_in_lock;

static void die_holding_lock(shmobj_segment *seg, shmobj__os_lock *l, int phase)
{
    if (die_in_lock && seg == killed_seg && l == &seg->hdr->lock &&
        phase == SHMOBJ__SEG_LOCK_TAKEN)
        raise(SIGKILL);
}

/* Fill the cache (blocks of many sizes freed), then wait to be killed, or
 * die holding the segment lock (an allocation too large for the cache). */
static int fill_and_die(void *p)
{
    struct kill_arg *a = p;
    shmobj_segment *s;
    if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 0, &s) != 0)
        return 10;
    shmobj_ref r[400];
    for (int i = 0; i < 400; i++)
        if (shmobj_arena_alloc(s, 16 + (size_t)(i * 37) % 4000, 0, &r[i], NULL) != 0)
            return 11;
    for (int i = 0; i < 400; i++)
        if (shmobj_arena_free(s, r[i]) != 0)
            return 12;
    if (atomic_load(&s->cache.bitmap) == 0 || s->cache.bytes < 128 * 1024)
        return 13; /* nothing left to prove: the cache must be full */
    if (a->hold_lock) {
        killed_seg = s;
        die_in_lock = 1;
        shmobj__seg_lock_hook = die_holding_lock;
        shmobj_arena_stats st = {.struct_size = sizeof st};
        (void)shmobj_arena_stats_get(s, &st); /* takes the lock */
        return 14;
    }
    atomic_store(a->ready, 1);
    for (;;)
        pause();
}

static void expect_all_free(shmobj_segment *seg)
{
    shmobj_arena_stats st = stats_of(seg);
    assert_int_equal(st.used_bytes, 0);
    assert_int_equal(st.used_blocks, 0);
    /* one free block, no cached one: largest_free counts no cached block */
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.largest_free + 16, st.free_bytes);
    assert_int_equal(shmobj_arena_check(seg, NULL), 0);
}

/* A process killed with a full cache, while it holds no lock: its blocks
 * count free at once, and the heap's repair (the one that follows a dead
 * lock owner, or an allocation that finds no free block) gives them back
 * to the lists. */
static void test_cache_killed_owner_blocks_reclaimed(void **state)
{
    struct fixture *f = *state;
    _Atomic int *ready = shared_page(4096);
    struct kill_arg a = {f->name, ready, 0};
    pid_t pid = test_child_start(fill_and_die, &a, 30);
    for (int i = 0; i < 20000 && atomic_load(ready) == 0; i++)
        test_sleep_ms(1);
    assert_int_equal(atomic_load(ready), 1);
    kill(pid, SIGKILL);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    shmobj_arena_stats st = stats_of(f->seg);
    assert_int_equal(st.used_bytes, 0);
    assert_true(st.free_blocks > 1); /* cached, not yet on the lists */
    assert_int_equal(shmobj_arena_check(f->seg, NULL), 0);
    assert_int_equal(shmobj__segment_lock(f->seg), 0);
    assert_int_equal(shmobj__seg_cache_rebuild(f->seg), 0);
    shmobj__segment_unlock(f->seg);
    expect_all_free(f->seg);
    munmap((void *)ready, 4096);
}

/* The same, killed inside the segment lock: the next locker's repair
 * frees the dead process's cached blocks with the rest. */
static void test_cache_killed_lock_holder_blocks_reclaimed(void **state)
{
    struct fixture *f = *state;
    _Atomic int *ready = shared_page(4096);
    struct kill_arg a = {f->name, ready, 1};
    assert_int_equal(test_child_wait(test_child_start(fill_and_die, &a, 30)), 128 + SIGKILL);
    expect_all_free(f->seg); /* the statistics take the lock: repair */
    munmap((void *)ready, 4096);
}

/* A segment at its maximum size that a dead process's cache holds most
 * of: an allocation that finds no free block walks the heap for dead
 * processes' cached blocks before it says SHMOBJ_ENOMEM. */
static void test_cache_killed_owner_blocks_serve_enomem(void **state)
{
    struct fixture *f = *state;
    _Atomic int *ready = shared_page(4096);
    struct kill_arg a = {f->name, ready, 0};
    pid_t pid = test_child_start(fill_and_die, &a, 30);
    for (int i = 0; i < 20000 && atomic_load(ready) == 0; i++)
        test_sleep_ms(1);
    assert_int_equal(atomic_load(ready), 1);
    kill(pid, SIGKILL);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    /* what no free block holds but the dead cache and the rest together */
    shmobj_arena_stats st = stats_of(f->seg);
    /* larger than any free block, smaller than the one all will make
     * (less the rounding to a size class, 1/32 of it) */
    uint64_t want = st.free_bytes - st.free_bytes / 16;
    assert_true(want > st.largest_free);
    shmobj_ref big;
    assert_int_equal(shmobj_arena_alloc(f->seg, want, 0, &big, NULL), 0);
    assert_int_equal(shmobj_arena_free(f->seg, big), 0);
    expect_all_free(f->seg);
    munmap((void *)ready, 4096);
}

/* ---- refills --------------------------------------------------------------- */

/* A process that only allocates: the miss that takes the lock also fills
 * the class (8 blocks of 128 bytes more, at most 4 KiB, carved from one
 * run and handed out in address order), so the next allocations of the
 * class come from the cache, each a block of its own that the heap's
 * check sees as sound; and the blocks go back whole. */
static void test_cache_refill_serves_allocations_without_lock(void **state)
{
    struct fixture *f = *state;
    uint64_t size = 100;
    unsigned c = seg_cache_round(&size, 16);
    struct shmobj__seg_cache *k = &f->seg->cache;
    assert_int_equal(k->count[c], 0);
    enum { N = 40 };
    shmobj_ref r[N];
    for (int i = 0; i < N; i++) {
        void *p;
        assert_int_equal(shmobj_arena_alloc(f->seg, 100, 0, &r[i], &p), 0);
        memset(p, 0xa5, 100);
        /* one miss, then SEG_CACHE_REFILL hits: the count tells which */
        assert_int_equal(k->count[c], (SEG_CACHE_REFILL - i % (SEG_CACHE_REFILL + 1)));
        for (int j = 0; j < i; j++)
            assert_true(r[j] != r[i]);
        if (i % (SEG_CACHE_REFILL + 1) >= 2)
            assert_int_equal(OFF(r[i]), OFF(r[i - 1]) + 128);
    }
    assert_int_equal(shmobj_arena_check(f->seg, NULL), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(shmobj_arena_free(f->seg, r[i]), 0);
    expect_all_free(f->seg); /* the statistics give the cache back first */
}

/* A run that the heap hands out with a rest too small to split off (16
 * bytes) makes its last block 16 bytes larger, of another class: that
 * one goes back to the heap, and the class gets the seven others. The
 * heap of a fixed segment is cut down until its last free block holds
 * the call's block and such a run (1,168 bytes). */
static void test_cache_carved_run_with_a_longer_last_block(void **state)
{
    struct fixture *f = *state;
    shmobj_ref fill[2];
    shmobj_arena_stats st = stats_of(f->seg);
    assert_int_equal(st.free_blocks, 1);
    /* two steps: a free block is only given to a request a size class
     * below its own, so the exact cut is made in a small one */
    assert_int_equal(shmobj_arena_alloc(f->seg, st.largest_free - 24 * 1024, 0, &fill[0], NULL),
                     0);
    st = stats_of(f->seg);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(shmobj_arena_alloc(f->seg, st.largest_free - 1168, 0, &fill[1], NULL), 0);
    st = stats_of(f->seg);
    assert_int_equal(st.largest_free + 16, 1168);
    uint64_t size = 100;
    unsigned c = seg_cache_round(&size, 16);
    shmobj_ref r;
    assert_int_equal(shmobj_arena_alloc(f->seg, 100, 0, &r, NULL), 0);
    assert_int_equal(f->seg->cache.count[c], SEG_CACHE_REFILL - 1);
    st = stats_of(f->seg); /* gives the cache back first */
    assert_int_equal(shmobj_arena_check(f->seg, NULL), 0);
    assert_int_equal(st.used_blocks, 3);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.largest_free + 16, 1040);
    assert_int_equal(shmobj_arena_free(f->seg, r), 0);
    assert_int_equal(shmobj_arena_free(f->seg, fill[1]), 0);
    assert_int_equal(shmobj_arena_free(f->seg, fill[0]), 0);
    expect_all_free(f->seg);
}

/* A refill killed at its step's third pass, holding the segment lock:
 * the child allocates `size` bytes. */
struct refill_kill {
    const char *name;
    const char *step;
    uint64_t size;
};

static int refill_and_die(void *p)
{
    const struct refill_kill *a = p;
    shmobj_segment *s;
    if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 0, &s) != 0)
        return 10;
    test_stall_arm(a->step, 3, TEST_STALL_KILL, 0);
    shmobj_ref r;
    (void)shmobj_arena_alloc(s, a->size, 0, &r, NULL);
    return 11;
}

/* Kill a refill of `size`-byte requests at the third pass of `step`,
 * let the repair run: `blocks` blocks of `bytes` bytes in all stay used,
 * the heap checks clean and has `free_blocks` free blocks, cached ones
 * included (the statistics count a cached block as free, as what its
 * owner will hand out again). */
static void refill_killed_leaves(struct fixture *f, const char *step, uint64_t size,
                                 uint64_t blocks, uint64_t bytes, uint64_t free_blocks)
{
    struct refill_kill a = {f->name, step, size};
    assert_int_equal(test_child_wait(test_child_start(refill_and_die, &a, 30)), 128 + SIGKILL);
    shmobj_arena_stats st = stats_of(f->seg); /* takes the lock: repair */
    assert_int_equal(st.used_blocks, blocks);
    assert_int_equal(st.used_bytes, bytes);
    assert_int_equal(st.free_blocks, free_blocks);
    assert_int_equal(shmobj_arena_check(f->seg, NULL), 0);
}

/* Blocks of 128 bytes are carved from one run of 8: killed before its
 * third cut, the run's blocks and its rest are cached under the dead
 * process's token, which the repair frees; only the block its call was
 * allocating stays used (which a kill before any allocation returns
 * leaves too). */
static void test_cache_killed_in_carving_leaks_only_its_call(void **state)
{
    /* the run's blocks went back into the free block after them */
    refill_killed_leaves(*state, "segment.cache.refill", 100, 1, 128, 1);
}

/* Killed between the third cut's commit and the magic of the rest it
 * made: the rest (five blocks' bytes) is cached but carries no magic, so
 * no repair may take it for a dead process's, and it stays where it is
 * (doc/format-arena.md): the three blocks cut before it are one free
 * block, the rest a cached one, then the free block after the run. */
static void test_cache_killed_after_cut_leaks_the_rest(void **state)
{
    refill_killed_leaves(*state, "arena.carve.cut", 100, 1, 128, 3);
}

/* Blocks of 640 bytes are refilled one by one (above the carving's
 * limit): killed at the third, between its allocation and its put, the
 * block being put and the call's stay used; the two put are freed. */
static void test_cache_killed_in_refill_leaks_two_blocks(void **state)
{
    /* the two put are one free block, then the one being put, then the
     * free block after them */
    refill_killed_leaves(*state, "segment.cache.refill", 600, 2, 2 * 640, 2);
}

/* A process that frees more blocks of a class than its cache holds: the
 * free that finds the class full goes to the heap with half the class's
 * blocks, so the class never holds more than its depth and drops to half
 * of it at once; every block goes back whole. */
static void test_cache_full_class_drains_half(void **state)
{
    struct fixture *f = *state;
    uint64_t size = 100;
    unsigned c = seg_cache_round(&size, 16);
    struct shmobj__seg_cache *k = &f->seg->cache;
    enum { N = 80 };
    shmobj_ref r[N];
    for (int i = 0; i < N; i++)
        assert_int_equal(shmobj_arena_alloc(f->seg, 100, 0, &r[i], NULL), 0);
    int drains = 0;
    for (int i = 0; i < N; i++) {
        unsigned before = k->count[c];
        assert_int_equal(shmobj_arena_free(f->seg, r[i]), 0);
        if (before == SHMOBJ__SEG_CACHE_DEPTH) {
            assert_int_equal(k->count[c], SHMOBJ__SEG_CACHE_DEPTH / 2);
            drains++;
        } else {
            assert_int_equal(k->count[c], before + 1);
        }
        assert_true(k->count[c] <= SHMOBJ__SEG_CACHE_DEPTH);
    }
    assert_true(drains >= 2);
    assert_int_equal(shmobj_arena_check(f->seg, NULL), 0);
    expect_all_free(f->seg);
}

struct drain_arg {
    const char *name;
    _Atomic int *started; /* shared: frees begun */
};

/* Allocate 80 blocks of 100 bytes and free them in order, killed at the
 * first block a drain takes out of the cache (holding the segment lock). */
static int drain_and_die(void *p)
{
    struct drain_arg *a = p;
    shmobj_segment *s;
    if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 0, &s) != 0)
        return 10;
    shmobj_ref r[80];
    for (int i = 0; i < 80; i++)
        if (shmobj_arena_alloc(s, 100, 0, &r[i], NULL) != 0)
            return 11;
    test_stall_arm("segment.cache.drain", 1, TEST_STALL_KILL, 0);
    for (int i = 0; i < 80; i++) {
        atomic_store(a->started, i + 1);
        if (shmobj_arena_free(s, r[i]) != 0)
            return 12;
    }
    return 13;
}

/* A process killed inside a drain: the repair frees its cached blocks,
 * and what stays in use is the blocks it had not freed and the one the
 * drain had taken out of the cache. */
static void test_cache_killed_in_drain_leaks_one_block(void **state)
{
    struct fixture *f = *state;
    _Atomic int *started = shared_page(4096);
    struct drain_arg a = {f->name, started};
    assert_int_equal(test_child_wait(test_child_start(drain_and_die, &a, 30)), 128 + SIGKILL);
    int freed = atomic_load(started); /* the last of them was killed in its drain */
    assert_true(freed > SHMOBJ__SEG_CACHE_DEPTH / 2 && freed < 80);
    shmobj_arena_stats st = stats_of(f->seg); /* takes the lock: repair */
    assert_int_equal(st.used_blocks, (uint64_t)(80 - freed + 1));
    assert_int_equal(st.used_bytes, (uint64_t)(80 - freed + 1) * 128);
    assert_int_equal(shmobj_arena_check(f->seg, NULL), 0);
    munmap((void *)started, 4096);
}

/* ---- a process stopped in a refill or a drain --------------------------------- */

#define CHURN_BLOCKS 40 /* per round: more than a class holds, so frees drain */

struct churn_arg {
    const char *name;
    int who;
    unsigned pin; /* 1: on one CPU */
    const char *stop_at; /* NULL, or the step to stop at once */
};

/* Rounds of CHURN_BLOCKS allocations of 100 bytes, each stamped with
 * (who, round, i) and read back before all are freed: a block handed to
 * two processes at once shows another's stamp. */
static int churn_proc(void *p)
{
    struct churn_arg *a = p;
    if (a->pin)
        test_stall_pin(0);
    shmobj_segment *s;
    if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 0, &s) != 0)
        return 10;
    if (a->stop_at != NULL)
        test_stall_arm(a->stop_at, 1, TEST_STALL_STOP, 0);
    for (uint64_t round = 0; round < 200; round++) {
        shmobj_ref r[CHURN_BLOCKS];
        uint64_t *pl[CHURN_BLOCKS];
        for (int i = 0; i < CHURN_BLOCKS; i++) {
            if (shmobj_arena_alloc(s, 100, 0, &r[i], (void **)&pl[i]) != 0)
                return 11;
            pl[i][0] = (uint64_t)a->who << 48 | round << 16 | (uint64_t)i;
        }
        for (int i = 0; i < CHURN_BLOCKS; i++)
            if (pl[i][0] != ((uint64_t)a->who << 48 | round << 16 | (uint64_t)i))
                return 12;
        for (int i = 0; i < CHURN_BLOCKS; i++)
            if (shmobj_arena_free(s, r[i]) != 0)
                return 13;
    }
    shmobj_segment_close(s);
    return 0;
}

/* One process stopped at a step of the refill or the drain (holding the
 * segment lock, its cache half filled or half drained) while four others
 * (five processes on two CPUs, or all on one) allocate and free the same
 * class; then resumed. Every process finishes, no block is handed to two
 * at once, and once all have closed the heap checks clean with every
 * block free again. */
static void cache_stall_walk(struct fixture *f, unsigned pin)
{
    static const char *const steps[] = {"segment.cache.refill", "arena.carve.cut",
                                        "segment.cache.drain"};
    for (size_t st = 0; st < sizeof steps / sizeof *steps; st++) {
        struct churn_arg sa = {f->name, 1, pin, steps[st]};
        pid_t sp = test_child_start(churn_proc, &sa, 60);
        int status = 0;
        assert_int_equal(test_stall_wait_stopped(sp, 20000, &status), 1);
        struct churn_arg wa[4];
        pid_t wp[4];
        for (int w = 0; w < 4; w++) {
            wa[w] = (struct churn_arg){f->name, 2 + w, pin, NULL};
            wp[w] = test_child_start(churn_proc, &wa[w], 60);
        }
        test_sleep_ms(100);
        test_stall_resume(sp);
        for (int w = 0; w < 4; w++)
            assert_int_equal(test_child_wait(wp[w]), 0);
        assert_int_equal(test_child_wait(sp), 0);
        assert_int_equal(shmobj_arena_check(f->seg, NULL), 0);
        expect_all_free(f->seg);
    }
}

static void test_cache_stall_refill_and_drain(void **state)
{
    cache_stall_walk(*state, 0);
}

static void test_cache_stall_refill_and_drain_one_cpu(void **state)
{
    cache_stall_walk(*state, 1);
}

/* ---- fork ------------------------------------------------------------------ */

struct fork_arg {
    shmobj_segment *seg;
    shmobj_ref *cached;
    int n;
};

static int child_allocates(void *p)
{
    struct fork_arg *a = p;
    shmobj_ref r[32];
    for (int i = 0; i < a->n; i++) {
        if (shmobj_arena_alloc(a->seg, 100 + (size_t)i * 64, 0, &r[i], NULL) != 0)
            return 10;
        for (int j = 0; j < a->n; j++)
            if (OFF(r[i]) == OFF(a->cached[j]))
                return 11; /* a block of the parent's cache */
    }
    for (int i = 0; i < a->n; i++)
        if (shmobj_arena_free(a->seg, r[i]) != 0)
            return 12;
    /* and what it freed it takes back itself */
    for (int i = 0; i < a->n; i++)
        if (shmobj_arena_alloc(a->seg, 100 + (size_t)i * 64, 0, &r[i], NULL) != 0)
            return 13;
    for (int i = 0; i < a->n; i++)
        if (shmobj_arena_free(a->seg, r[i]) != 0)
            return 14;
    shmobj_segment_close(a->seg);
    return 0;
}

/* A forked child using the handle it inherited never allocates a block of
 * its parent's cache (its own copy of the cache is forgotten), and the
 * parent still takes its cached blocks back afterwards. */
static void test_cache_forked_child_never_takes_parent_blocks(void **state)
{
    struct fixture *f = *state;
    enum { N = 20 };
    shmobj_ref r[N];
    for (int i = 0; i < N; i++)
        assert_int_equal(shmobj_arena_alloc(f->seg, 100 + (size_t)i * 64, 0, &r[i], NULL), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(shmobj_arena_free(f->seg, r[i]), 0);
    struct fork_arg a = {f->seg, r, N};
    assert_int_equal(test_child_wait(test_child_start(child_allocates, &a, 30)), 0);
    shmobj_ref back[N];
    for (int i = N - 1; i >= 0; i--) {
        assert_int_equal(shmobj_arena_alloc(f->seg, 100 + (size_t)i * 64, 0, &back[i], NULL), 0);
        int mine = 0;
        for (int j = 0; j < N; j++)
            mine += OFF(back[i]) == OFF(r[j]);
        assert_int_equal(mine, 1); /* one of its own cached blocks */
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(shmobj_arena_free(f->seg, back[i]), 0);
    assert_int_equal(shmobj_arena_check(f->seg, NULL), 0);
    shmobj_arena_stats st = stats_of(f->seg);
    assert_int_equal(st.used_bytes, 0);
}

/* ---- threads --------------------------------------------------------------- */

struct thread_arg {
    shmobj_segment *seg;
    unsigned id;
    _Atomic unsigned long *handed; /* blocks handed out, all threads */
};

/* Each live block holds its owner's stamp: a block handed to two threads
 * at once shows the other's stamp at its free. */
static int churn(void *p)
{
    struct thread_arg *a = p;
    uint64_t rng = 0x9e3779b97f4a7c15u * (a->id + 1);
    enum { LIVE = 64 };
    shmobj_ref r[LIVE] = {0};
    uint64_t *ptr[LIVE] = {0};
    for (int i = 0; i < 50000; i++) {
        unsigned k = (unsigned)(test_xorshift(&rng) % LIVE);
        if (r[k] != 0) {
            if (ptr[k][0] != ((uint64_t)a->id << 32 | k))
                return 10;
            if (shmobj_arena_free(a->seg, r[k]) != 0)
                return 11;
        }
        void *q;
        /* few classes, so that the threads meet on the same stacks */
        size_t n = 16 + (size_t)(test_xorshift(&rng) % 64);
        if (shmobj_arena_alloc(a->seg, n, 0, &r[k], &q) != 0)
            return 12;
        ptr[k] = q;
        ptr[k][0] = (uint64_t)a->id << 32 | k;
        atomic_fetch_add(a->handed, 1);
    }
    for (int k = 0; k < LIVE; k++)
        if (ptr[k][0] != ((uint64_t)a->id << 32 | (unsigned)k) ||
            shmobj_arena_free(a->seg, r[k]) != 0)
            return 13;
    return 0;
}

/* Four threads allocate and free on one handle: its cache serves one at a
 * time, no block is handed to two of them and none is lost. */
static void test_cache_threads_share_one_handle(void **state)
{
    struct fixture *f = *state;
    _Atomic unsigned long handed = 0;
    struct test_thread t[4];
    struct thread_arg a[4];
    for (unsigned i = 0; i < 4; i++) {
        a[i] = (struct thread_arg){f->seg, i, &handed};
        assert_int_equal(test_thread_start(&t[i], churn, &a[i]), 0);
    }
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(test_thread_wait(&t[i]), 0);
    assert_int_equal(atomic_load(&handed), 4 * 50000);
    /* every block back: none lost from the cache's stacks (it would stay
     * cached, out of the one free block, for as long as this process) */
    expect_all_free(f->seg);
}

/* ---- a full segment --------------------------------------------------------- */

/* A segment that cannot grow, filled with small blocks and then emptied
 * (a quarter megabyte of them waits in the cache): the largest block the
 * empty heap holds is served again. */
static void test_cache_full_segment_serves_big_block_after_frees(void **state)
{
    struct fixture *f = *state;
    shmobj_arena_stats empty = stats_of(f->seg);
    enum { MAXN = 8192 };
    shmobj_ref *r = calloc(MAXN, sizeof *r);
    assert_non_null(r);
    int n = 0;
    while (n < MAXN && shmobj_arena_alloc(f->seg, 100 + (size_t)(n % 7) * 16, 0, &r[n], NULL) == 0)
        n++;
    assert_true(n > 1000 && n < MAXN);
    /* every 37th first, into the cache, spread over the heap; then the
     * rest (their classes full, to the lists) */
    for (int i = 0; i < n; i += 37)
        assert_int_equal(shmobj_arena_free(f->seg, r[i]), 0);
    for (int i = 0; i < n; i++)
        if (i % 37 != 0)
            assert_int_equal(shmobj_arena_free(f->seg, r[i]), 0);
    assert_true(f->seg->cache.bytes > 0);
    shmobj_ref big;
    uint64_t want = empty.largest_free - empty.largest_free / 16;
    assert_int_equal(shmobj_arena_alloc(f->seg, want, 0, &big, NULL), 0);
    assert_int_equal(shmobj_arena_free(f->seg, big), 0);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cache_stale_reference_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_stats_and_check_see_cached_blocks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cache_killed_owner_blocks_reclaimed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_killed_lock_holder_blocks_reclaimed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cache_killed_owner_blocks_serve_enomem, setup_fixed,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cache_refill_serves_allocations_without_lock,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_carved_run_with_a_longer_last_block,
                                        setup_fixed, teardown),
        cmocka_unit_test_setup_teardown(test_cache_killed_in_carving_leaks_only_its_call, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cache_killed_after_cut_leaks_the_rest, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cache_killed_in_refill_leaks_two_blocks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cache_full_class_drains_half, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_killed_in_drain_leaks_one_block, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cache_stall_refill_and_drain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_stall_refill_and_drain_one_cpu, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cache_forked_child_never_takes_parent_blocks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cache_threads_share_one_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_full_segment_serves_big_block_after_frees,
                                        setup_fixed, teardown),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
