/* The shared map: the API on one process, a model check against a plain
 * reference over a million mixed operations, processes writing and reading
 * a million keys at once, iteration under concurrent writes and growth,
 * writers killed at random points, damaged tables and oversized entries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "map-layout.h"
#include "segment.h"
#include "shmobj.h"
#include "shmobj/map.h"
#include "shmobj_htcore.h"
#include "space.h"
#include "test-util.h"
#include "test-shared.h"

#define MiB (UINT64_C(1) << 20)

struct shmobj__map_ctl *shmobj__map_control(shmobj_map *map);
void shmobj__map_read_delay_set(shmobj_map *map, uint64_t ns);
void shmobj__map_free_hook_set(shmobj_map *map, void (*fn)(void *, uint64_t), void *arg);

static unsigned kill_rounds = 200;

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint64_t rnd(void)
{
    return test_xorshift(&rng_state);
}

struct fixture {
    char name[96];
    shmobj_segment *seg;
    shmobj_map *map;
};

static shmobj_segment *seg_make(struct fixture *f, uint64_t initial, uint64_t max)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = initial;
    o.max_size = max;
    test_name(f->name, sizeof f->name, "map");
    assert_int_equal(shmobj_segment_create(f->name, &o, &f->seg), 0);
    return f->seg;
}

static int setup_small(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    seg_make(f, 16 * MiB, 256 * MiB);
    assert_int_equal(shmobj_map_create(f->seg, "m", &f->map), 0);
    *state = f;
    return 0;
}

static int setup_big(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    seg_make(f, 64 * MiB, 1024 * MiB);
    assert_int_equal(shmobj_map_create(f->seg, "m", &f->map), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    shmobj_map_close(f->map);
    shmobj_segment_close(f->seg);
    shmobj_segment_destroy(f->name, SHMOBJ_BACKEND_SHM);
    free(f);
    return 0;
}

/* A child process's own attachment to the fixture's map. */
static shmobj_map *child_open(struct fixture *f, shmobj_segment **seg)
{
    shmobj_map *m = NULL;
    if (shmobj_segment_open(f->name, SHMOBJ_BACKEND_SHM, 5000 * TEST_MS, seg) != 0)
        return NULL;
    if (shmobj_map_open(*seg, "m", &m) != 0)
        return NULL;
    return m;
}

/* Heap bytes a fresh segment of the fixture's sizes holds before any map:
 * the segment's own blocks. */
static uint64_t seg_fixed_used(uint64_t initial, uint64_t max)
{
    struct fixture g = {0};
    seg_make(&g, initial, max);
    uint64_t n = heap_used(g.seg);
    shmobj_segment_close(g.seg);
    shmobj_segment_destroy(g.name, SHMOBJ_BACKEND_SHM);
    return n;
}

/* ---- the API on one process ---------------------------------------------------- */

static void test_map_set_get_basic(void **state)
{
    struct fixture *f = *state;
    shmobj_map *m = f->map, *m2;
    char buf[64];
    size_t len = 0;
    uint64_t n;

    assert_int_equal(shmobj_map_create(f->seg, "m", &m2), SHMOBJ_EEXIST);
    assert_int_equal(shmobj_map_open(f->seg, "nope", &m2), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_map_get(m, "a", 1, buf, sizeof buf, &len), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_map_set(m, "a", 1, "hello", 5), 0);
    assert_int_equal(shmobj_map_get(m, "a", 1, buf, sizeof buf, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "hello", 5);
    /* too small a buffer: ENOBUFS and the length needed */
    len = 0;
    assert_int_equal(shmobj_map_get(m, "a", 1, buf, 2, &len), SHMOBJ_ENOBUFS);
    assert_int_equal(len, 5);
    assert_int_equal(shmobj_map_get(m, "a", 1, NULL, 0, &len), SHMOBJ_ENOBUFS);
    /* replace, empty key, empty value */
    assert_int_equal(shmobj_map_set(m, "a", 1, "bye", 3), 0);
    assert_int_equal(shmobj_map_get(m, "a", 1, buf, sizeof buf, &len), 0);
    assert_int_equal(len, 3);
    assert_int_equal(shmobj_map_set(m, NULL, 0, "empty-key", 9), 0);
    assert_int_equal(shmobj_map_set(m, "e", 1, NULL, 0), 0);
    assert_int_equal(shmobj_map_get(m, "e", 1, NULL, 0, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(shmobj_map_get(m, NULL, 0, buf, sizeof buf, &len), 0);
    assert_int_equal(len, 9);
    assert_int_equal(shmobj_map_contains(m, "a", 1), 0);
    assert_int_equal(shmobj_map_contains(m, "b", 1), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_map_count(m, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(shmobj_map_del(m, "a", 1), 0);
    assert_int_equal(shmobj_map_del(m, "a", 1), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_map_count(m, &n), 0);
    assert_int_equal(n, 2);

    /* add: creates, adds, refuses values that are not 8 bytes */
    int64_t r = 0;
    assert_int_equal(shmobj_map_add(m, "ctr", 3, 5, &r), 0);
    assert_int_equal(r, 5);
    assert_int_equal(shmobj_map_add(m, "ctr", 3, -7, &r), 0);
    assert_int_equal(r, -2);
    assert_int_equal(shmobj_map_get(m, "ctr", 3, &r, sizeof r, &len), 0);
    assert_int_equal(r, -2);
    assert_int_equal(shmobj_map_add(m, "e", 1, 1, &r), SHMOBJ_ETYPE);

    /* a second handle in the same process sees the same map */
    assert_int_equal(shmobj_map_open(f->seg, "m", &m2), 0);
    assert_int_equal(shmobj_map_get(m2, "ctr", 3, &r, sizeof r, NULL), 0);
    assert_int_equal(r, -2);
    shmobj_map_close(m2);
    shmobj_map_close(NULL);

    /* bad arguments */
    assert_int_equal(shmobj_map_set(NULL, "a", 1, "b", 1), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_map_set(m, NULL, 1, "b", 1), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_map_get(m, "a", 1, NULL, 4, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_map_count(m, NULL), SHMOBJ_EINVAL);

    assert_int_equal(shmobj_map_check(m), 0);
    assert_int_equal(shmobj_map_clear(m), 0);
    assert_int_equal(shmobj_map_count(m, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(shmobj_map_contains(m, "ctr", 3), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_map_check(m), 0);
}

/* shmobj_map_get() finds keys of every length from 0 to 80 (the call-free
 * path's limit of 64 and past it), copies values of every length from 0 to
 * 80 into buffers of exactly that size (heap blocks, so that a sanitizer
 * build sees a byte written past them), and tells a stored key that
 * differs from the one asked for in any single byte: the entry's key is
 * changed in place, so the table's hash bits still lead the get to it and
 * only the comparison of the bytes can say no. */
static void test_map_get_every_key_and_value_length(void **state)
{
    struct fixture *f = *state;
    shmobj_map *m = f->map;
    enum { MAXLEN = 80 };
    for (size_t klen = 0; klen <= MAXLEN; klen++) {
        uint8_t *key = malloc(klen + 1), val[MAXLEN];
        size_t vlen = (klen * 7 + 3) % (MAXLEN + 1), len = 0;
        assert_non_null(key);
        for (size_t i = 0; i < klen; i++)
            key[i] = (uint8_t)(rnd() | 1);
        for (size_t i = 0; i < vlen; i++)
            val[i] = (uint8_t)rnd();
        assert_int_equal(shmobj_map_set(m, key, klen, val, vlen), 0);
        /* every value length with this key, into a buffer of exactly it */
        for (size_t vl = 0; vl <= MAXLEN; vl += klen % 4 == 0 ? 1 : 9) {
            uint8_t v2[MAXLEN];
            for (size_t i = 0; i < vl; i++)
                v2[i] = (uint8_t)rnd();
            assert_int_equal(shmobj_map_set(m, key, klen, v2, vl), 0);
            uint8_t *buf = malloc(vl + 1);
            assert_non_null(buf);
            assert_int_equal(shmobj_map_get(m, key, klen, buf, vl, &len), 0);
            assert_int_equal(len, vl);
            assert_memory_equal(buf, v2, vl);
            if (vl > 0) /* one byte short: ENOBUFS, the length needed */
                assert_int_equal(shmobj_map_get(m, key, klen, buf, vl - 1, &len),
                                 SHMOBJ_ENOBUFS);
            assert_int_equal(len, vl);
            free(buf);
        }
        assert_int_equal(shmobj_map_set(m, key, klen, val, vlen), 0);
        /* a stored key one byte off, at every position */
        shmobj_map_view view;
        assert_int_equal(shmobj_map_get_view(m, key, klen, &view), 0);
        uint8_t *stored = (uint8_t *)(uintptr_t)view.key;
        for (size_t i = 0; i < klen; i++) {
            uint8_t buf[MAXLEN];
            stored[i] ^= 0x20;
            assert_int_equal(shmobj_map_get(m, key, klen, buf, sizeof buf, &len),
                             SHMOBJ_ENOTFOUND);
            assert_int_equal(shmobj_map_contains(m, key, klen), SHMOBJ_ENOTFOUND);
            stored[i] ^= 0x20;
        }
        shmobj_map_view_release(&view);
        uint8_t buf[MAXLEN];
        assert_int_equal(shmobj_map_get(m, key, klen, buf, sizeof buf, &len), 0);
        assert_int_equal(len, vlen);
        assert_memory_equal(buf, val, vlen);
        free(key);
    }
    assert_int_equal(shmobj_map_check(m), 0);
}

/* A batch answers each request as a single get would: present and
 * absent keys, values of many lengths, buffers too small, bad requests
 * among good ones, batches of every length around the internal group. */
static void test_map_get_many_matches_single_gets(void **state)
{
    struct fixture *f = *state;
    shmobj_map *m = f->map;
    enum { KEYS = 3000, REQS = 37 };
    char keys[2 * KEYS][24];
    for (int i = 0; i < 2 * KEYS; i++) {
        int kl = snprintf(keys[i], sizeof keys[i], "k%d", i);
        if (i < KEYS) { /* values of 0..63 bytes; the rest stay absent */
            char v[64];
            memset(v, 'a' + i % 26, sizeof v);
            assert_int_equal(shmobj_map_set(m, keys[i], (size_t)kl, v, (size_t)(i % 64)), 0);
        }
    }
    shmobj_map_get_req reqs[REQS];
    char bufs[REQS][64], one[64];
    for (int round = 0; round < 400; round++) {
        size_t n = (size_t)(rnd() % (REQS + 1));
        for (size_t j = 0; j < n; j++) {
            int i = (int)(rnd() % (2 * KEYS));
            reqs[j].key = keys[i];
            reqs[j].key_len = strlen(keys[i]);
            reqs[j].buf = bufs[j];
            reqs[j].buf_len = rnd() % 4 == 0 ? rnd() % 64 : 64;
            if (rnd() % 16 == 0) { /* a bad request: a buffer length with no buffer */
                reqs[j].buf = NULL;
                reqs[j].buf_len = 1;
            }
        }
        assert_int_equal(shmobj_map_get_many(m, reqs, n), 0);
        for (size_t j = 0; j < n; j++) {
            size_t len = 0;
            int rc = shmobj_map_get(m, reqs[j].key, reqs[j].key_len,
                                    reqs[j].buf ? one : NULL, reqs[j].buf_len, &len);
            assert_int_equal(reqs[j].status, rc);
            if (rc == 0 || rc == SHMOBJ_ENOBUFS)
                assert_int_equal(reqs[j].value_len, len);
            else
                assert_int_equal(reqs[j].value_len, 0);
            if (rc == 0)
                assert_memory_equal(reqs[j].buf, one, len);
        }
    }
    assert_int_equal(shmobj_map_get_many(m, NULL, 0), 0);
    assert_int_equal(shmobj_map_get_many(m, NULL, 1), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_map_get_many(NULL, reqs, 1), SHMOBJ_EINVAL);
}

/* A batch of sets answers each request as a single set would, in order
 * for one key (the later value stays), refusing bad requests alone. */
static void test_map_set_many_matches_single_sets(void **state)
{
    struct fixture *f = *state;
    shmobj_map *m = f->map;
    enum { KEYS = 500, REQS = 41 };
    char keys[KEYS][24];
    uint64_t model[KEYS];
    bool present[KEYS] = {false};
    for (int i = 0; i < KEYS; i++)
        snprintf(keys[i], sizeof keys[i], "k%d", i);
    shmobj_map_set_req reqs[REQS];
    uint64_t vals[REQS];
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)(rnd() % (REQS + 1));
        for (size_t j = 0; j < n; j++) {
            int i = (int)(rnd() % KEYS);
            vals[j] = rnd();
            reqs[j] = (shmobj_map_set_req){keys[i], strlen(keys[i]), &vals[j], 8, 77, 0};
            if (rnd() % 16 == 0) /* a bad request: a value length with no value */
                reqs[j].value = NULL;
        }
        assert_int_equal(shmobj_map_set_many(m, reqs, n), 0);
        for (size_t j = 0; j < n; j++) {
            int i = atoi((const char *)reqs[j].key + 1);
            if (reqs[j].value == NULL) {
                assert_int_equal(reqs[j].status, SHMOBJ_EINVAL);
                continue;
            }
            assert_int_equal(reqs[j].status, 0);
            model[i] = vals[j]; /* in request order: the later one stays */
            present[i] = true;
        }
        for (int i = 0; i < KEYS; i++) {
            uint64_t got = 0;
            int rc = shmobj_map_get(m, keys[i], strlen(keys[i]), &got, 8, NULL);
            assert_int_equal(rc, present[i] ? 0 : SHMOBJ_ENOTFOUND);
            if (present[i])
                assert_true(got == model[i]);
        }
    }
    uint64_t count = 0, want = 0;
    for (int i = 0; i < KEYS; i++)
        want += present[i];
    assert_int_equal(shmobj_map_count(m, &count), 0);
    assert_int_equal(count, want);
    assert_int_equal(shmobj_map_check(m), 0);
    assert_int_equal(shmobj_map_set_many(m, NULL, 0), 0);
    assert_int_equal(shmobj_map_set_many(m, NULL, 1), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_map_set_many(NULL, reqs, 1), SHMOBJ_EINVAL);
}

/* A view stays intact while the key is replaced and deleted. */
static void test_map_view_survives_replace(void **state)
{
    struct fixture *f = *state;
    shmobj_map *m = f->map;
    shmobj_map_view v;
    char big[1000];
    memset(big, 'x', sizeof big);
    assert_int_equal(shmobj_map_set(m, "k", 1, big, sizeof big), 0);
    assert_int_equal(shmobj_map_get_view(m, "k", 1, &v), 0);
    assert_int_equal(v.value_len, sizeof big);
    assert_int_equal(v.key_len, 1);
    assert_memory_equal(v.key, "k", 1);
    /* churn enough to reclaim retired memory many times over */
    for (int i = 0; i < 2000; i++) {
        char val[1000];
        memset(val, 'a' + i % 26, sizeof val);
        assert_int_equal(shmobj_map_set(m, "k", 1, val, sizeof val), 0);
        assert_int_equal(shmobj_map_set(m, "other", 5, val, sizeof val), 0);
    }
    assert_int_equal(shmobj_map_del(m, "k", 1), 0);
    assert_memory_equal(v.value, big, sizeof big);
    shmobj_map_view_release(&v);
    shmobj_map_view_release(&v); /* cleared: a second release is harmless */
    assert_int_equal(shmobj_map_get_view(m, "k", 1, &v), SHMOBJ_ENOTFOUND);
    /* with no guard held, the next reclaims free retired memory: a shard
     * keeps only what it retired since its last one (of 4 MB retired) */
    for (int i = 0; i < 200; i++) {
        assert_int_equal(shmobj_map_set(m, "k", 1, big, sizeof big), 0);
        assert_int_equal(shmobj_map_set(m, "other", 5, big, sizeof big), 0);
    }
    shmobj_map_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_map_stats_get(m, &st), 0);
    assert_true(st.pending_bytes < 300000);
    assert_int_equal(shmobj_map_check(m), 0);
}

/* ---- model check against a reference ---------------------------------------------- */

#define REF_KEYS 20000
struct ref_item {
    unsigned char present;
    unsigned char len;
    unsigned char val[120];
};

#define REF_KEY_MAX 128
static size_t key_of(uint64_t k, char *key)
{
    /* lengths 1..90, distinct per k: short keys, and from 65 on the ones
     * a get compares by its general path */
    int pad = (int)(k % 86);
    return (size_t)sprintf(key, "%.*s%llu", pad,
                           "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
                           "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk",
                           (unsigned long long)k);
}

static void test_map_random_vs_reference(void **state)
{
    struct fixture *f = *state;
    shmobj_map *m = f->map;
    struct ref_item *ref = calloc(REF_KEYS, sizeof *ref);
    uint64_t live = 0;
    assert_non_null(ref);
    for (long op = 0; op < 1000000; op++) {
        uint64_t k = rnd() % REF_KEYS;
        char key[REF_KEY_MAX], buf[128];
        size_t klen = key_of(k, key), len;
        int r = (int)(rnd() % 100);
        if (r < 40) {
            unsigned char vlen = (unsigned char)(rnd() % 120);
            unsigned char val[120];
            for (int i = 0; i < vlen; i++)
                val[i] = (unsigned char)rnd();
            assert_int_equal(shmobj_map_set(m, key, klen, val, vlen), 0);
            if (!ref[k].present)
                live++;
            ref[k].present = 1;
            ref[k].len = vlen;
            memcpy(ref[k].val, val, vlen);
        } else if (r < 75) {
            /* a third of the gets into a buffer that may be too short */
            size_t cap = rnd() % 3 == 0 ? (size_t)(rnd() % sizeof buf) : sizeof buf;
            int rc = shmobj_map_get(m, key, klen, buf, cap, &len);
            if (!ref[k].present) {
                assert_int_equal(rc, SHMOBJ_ENOTFOUND);
            } else if (ref[k].len > cap) {
                assert_int_equal(rc, SHMOBJ_ENOBUFS);
                assert_int_equal(len, ref[k].len);
            } else {
                assert_int_equal(rc, 0);
                assert_int_equal(len, ref[k].len);
                assert_memory_equal(buf, ref[k].val, len);
            }
        } else if (r < 95) {
            int rc = shmobj_map_del(m, key, klen);
            assert_int_equal(rc, ref[k].present ? 0 : SHMOBJ_ENOTFOUND);
            if (ref[k].present)
                live--;
            ref[k].present = 0;
        } else if (r < 99) {
            assert_int_equal(shmobj_map_contains(m, key, klen),
                             ref[k].present ? 0 : SHMOBJ_ENOTFOUND);
        } else {
            uint64_t n;
            assert_int_equal(shmobj_map_count(m, &n), 0);
            assert_int_equal(n, live);
        }
        if (op % 250000 == 0)
            assert_int_equal(shmobj_map_check(m), 0);
    }
    /* iteration returns exactly the reference's keys and values */
    unsigned char *seen = calloc(REF_KEYS, 1);
    shmobj_map_iter *it;
    const void *kp, *vp;
    size_t kl, vl;
    uint64_t n = 0;
    assert_int_equal(shmobj_map_iter_open(m, &it), 0);
    int rc;
    while ((rc = shmobj_map_iter_next(it, &kp, &kl, &vp, &vl)) == 0) {
        char key[REF_KEY_MAX];
        memcpy(key, kp, kl);
        key[kl] = '\0';
        uint64_t k = strtoull(key + strspn(key, "k"), NULL, 10);
        assert_true(k < REF_KEYS);
        assert_true(ref[k].present);
        assert_false(seen[k]);
        assert_int_equal(vl, ref[k].len);
        assert_memory_equal(vp, ref[k].val, vl);
        seen[k] = 1;
        n++;
    }
    assert_int_equal(rc, SHMOBJ_ENOTFOUND);
    shmobj_map_iter_close(it);
    assert_int_equal(n, live);
    shmobj_map_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_map_stats_get(m, &st), 0);
    assert_int_equal(st.count, live);
    assert_true(st.load_factor > 0.2 && st.load_factor <= 0.875);
    assert_true(st.probe_mean >= 1.0 && st.probe_mean < 2.0);
    assert_int_equal(shmobj_map_check(m), 0);
    free(seen);
    free(ref);
}

/* ---- many processes ------------------------------------------------------------ */

struct writer_arg {
    struct fixture *f;
    uint64_t from, to;
    _Atomic uint64_t *progress; /* keys committed so far */
    _Atomic uint64_t *stop;
};

static int key16(uint64_t i, char *key)
{
    return sprintf(key, "key-%012llu", (unsigned long long)i);
}

/* Write keys [from, to), reading each back; then read all of them again. */
static int writer_main(void *p)
{
    struct writer_arg *a = p;
    shmobj_segment *seg;
    shmobj_map *m = child_open(a->f, &seg);
    if (m == NULL)
        return 10;
    for (uint64_t i = a->from; i < a->to; i++) {
        char key[32];
        uint64_t v = i * 7 + 1, got = 0;
        int kl = key16(i, key);
        if (shmobj_map_set(m, key, (size_t)kl, &v, 8) != 0)
            return 11;
        if (shmobj_map_get(m, key, (size_t)kl, &got, 8, NULL) != 0 || got != v)
            return 12;
        if (a->progress != NULL)
            atomic_store(a->progress, i + 1);
    }
    for (uint64_t i = a->from; i < a->to; i++) {
        char key[32];
        uint64_t got = 0;
        int kl = key16(i, key);
        if (shmobj_map_get(m, key, (size_t)kl, &got, 8, NULL) != 0 || got != i * 7 + 1)
            return 13;
    }
    shmobj_map_close(m);
    shmobj_segment_close(seg);
    return 0;
}

static void test_map_two_procs_million_keys(void **state)
{
    struct fixture *f = *state;
    enum { N = 1000000 };
    struct writer_arg a = {f, 0, N / 2, NULL, NULL}, b = {f, N / 2, N, NULL, NULL};
    pid_t pa = test_child_start(writer_main, &a, 120);
    pid_t pb = test_child_start(writer_main, &b, 120);
    assert_int_equal(test_child_wait(pa), 0);
    assert_int_equal(test_child_wait(pb), 0);
    uint64_t n;
    assert_int_equal(shmobj_map_count(f->map, &n), 0);
    assert_int_equal(n, N);
    for (uint64_t i = 0; i < N; i++) {
        char key[32];
        uint64_t got = 0;
        int kl = key16(i, key);
        assert_int_equal(shmobj_map_get(f->map, key, (size_t)kl, &got, 8, NULL), 0);
        assert_true(got == i * 7 + 1);
    }
    assert_int_equal(shmobj_map_check(f->map), 0);
}

/* A reader process follows a writer process that makes every table grow
 * many times: every key the writer has committed is found at once. */
static int follower_main(void *p)
{
    struct writer_arg *a = p;
    shmobj_segment *seg;
    shmobj_map *m = child_open(a->f, &seg);
    uint64_t checked = 0;
    if (m == NULL)
        return 10;
    while (checked < a->to) {
        uint64_t done = atomic_load(a->progress);
        if (done == checked) {
            sched_yield();
            continue;
        }
        /* the newest committed key, and a random older one */
        for (uint64_t i = checked; i < done; i += 97) {
            char key[32];
            uint64_t got = 0, j = rnd() % done;
            int kl = key16(i, key);
            if (shmobj_map_get(m, key, (size_t)kl, &got, 8, NULL) != 0 || got != i * 7 + 1)
                return 20;
            kl = key16(j, key);
            if (shmobj_map_get(m, key, (size_t)kl, &got, 8, NULL) != 0 || got != j * 7 + 1)
                return 21;
        }
        checked = done;
    }
    shmobj_map_close(m);
    shmobj_segment_close(seg);
    return 0;
}

static void test_map_growth_across_processes(void **state)
{
    struct fixture *f = *state;
    _Atomic uint64_t *progress = shared_page(4096);
    struct writer_arg w = {f, 0, 300000, progress, NULL};
    pid_t pw = test_child_start(writer_main, &w, 120);
    pid_t pr = test_child_start(follower_main, &w, 120);
    assert_int_equal(test_child_wait(pw), 0);
    assert_int_equal(test_child_wait(pr), 0);
    shmobj_map_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_map_stats_get(f->map, &st), 0);
    assert_int_equal(st.count, 300000);
    assert_true(st.slots >= 300000);
    assert_int_equal(shmobj_map_check(f->map), 0);
    munmap((void *)progress, 4096);
}

/* Churn: insert and delete keys of another name space, growing tables. */
static int churn_main(void *p)
{
    struct writer_arg *a = p;
    shmobj_segment *seg;
    shmobj_map *m = child_open(a->f, &seg);
    uint64_t round = 0;
    if (m == NULL)
        return 10;
    atomic_store(a->progress, 1);
    while (!atomic_load(a->stop)) {
        for (uint64_t i = 0; i < 5000; i++) {
            char key[40];
            int kl = sprintf(key, "churn-%llu-%llu", (unsigned long long)round,
                             (unsigned long long)i);
            if (shmobj_map_set(m, key, (size_t)kl, &i, 8) != 0)
                return 11;
        }
        for (uint64_t i = 0; i < 5000; i++) {
            char key[40];
            int kl = sprintf(key, "churn-%llu-%llu", (unsigned long long)round,
                             (unsigned long long)i);
            if (i % 3 != 0 && shmobj_map_del(m, key, (size_t)kl) != 0)
                return 12;
        }
        /* and rewrite stable keys in place (same value: still "present") */
        for (uint64_t i = round % 50; i < 20000; i += 50) {
            char key[32];
            uint64_t v = i;
            int kl = sprintf(key, "stable-%llu", (unsigned long long)i);
            if (shmobj_map_set(m, key, (size_t)kl, &v, 8) != 0)
                return 13;
        }
        round++;
    }
    shmobj_map_close(m);
    shmobj_segment_close(seg);
    return 0;
}

static void test_map_iterate_under_concurrent_writes(void **state)
{
    struct fixture *f = *state;
    enum { STABLE = 20000 };
    for (uint64_t i = 0; i < STABLE; i++) {
        char key[32];
        int kl = sprintf(key, "stable-%llu", (unsigned long long)i);
        assert_int_equal(shmobj_map_set(f->map, key, (size_t)kl, &i, 8), 0);
    }
    _Atomic uint64_t *shared = shared_page(4096);
    struct writer_arg w = {f, 0, 0, &shared[0], &shared[1]};
    pid_t pc = test_child_start(churn_main, &w, 120);
    while (atomic_load(&shared[0]) == 0)
        test_sleep_ms(1);
    unsigned char *seen = malloc(STABLE);
    for (int pass = 0; pass < 20; pass++) {
        shmobj_map_iter *it;
        const void *kp, *vp;
        size_t kl, vl;
        int rc;
        memset(seen, 0, STABLE);
        assert_int_equal(shmobj_map_iter_open(f->map, &it), 0);
        while ((rc = shmobj_map_iter_next(it, &kp, &kl, &vp, &vl)) == 0) {
            if (kl > 7 && memcmp(kp, "stable-", 7) == 0) {
                char key[32];
                memcpy(key, kp, kl);
                key[kl] = '\0';
                uint64_t i = strtoull(key + 7, NULL, 10), v;
                assert_true(i < STABLE);
                assert_int_equal(seen[i], 0); /* never twice */
                assert_int_equal(vl, 8);
                memcpy(&v, vp, 8);
                assert_true(v == i);
                seen[i] = 1;
            }
        }
        assert_int_equal(rc, SHMOBJ_ENOTFOUND);
        shmobj_map_iter_close(it);
        for (uint64_t i = 0; i < STABLE; i++)
            assert_int_equal(seen[i], 1); /* never missed */
    }
    atomic_store(&shared[1], 1);
    assert_int_equal(test_child_wait(pc), 0);
    assert_int_equal(shmobj_map_check(f->map), 0);
    free(seen);
    munmap((void *)shared, 4096);
}

/* Gets racing a writer that replaces and deletes the same keys, so the
 * memory of every value a reader looks at is freed and reused under it:
 * each get returns a whole value that was set (its length, key and version
 * agree) or ENOTFOUND, never a mix of two values or bytes of reused memory.
 * The reader's unguarded tries wait 50 us between finding an entry and
 * copying its value, so the writer does free and reuse blocks in that
 * window. */
enum { CHURN_KEYS = 4, CHURN_MAX = 4096 };

static size_t churn_value(uint64_t key, uint64_t version, unsigned char *v)
{
    size_t n = 16 + (size_t)(version * 61 % (CHURN_MAX - 15)); /* 16..CHURN_MAX */
    memcpy(v, &key, 8);
    memcpy(v + 8, &version, 8);
    memset(v + 16, (int)(version & 0xff), n - 16);
    return n;
}

/* Replace and delete the churn keys through m until told to stop. */
static int replace_loop(shmobj_map *m, struct writer_arg *a)
{
    atomic_store(a->progress, 1);
    for (uint64_t version = 1; !atomic_load(a->stop); version++) {
        uint64_t k = version % CHURN_KEYS;
        char key[16];
        unsigned char v[CHURN_MAX];
        int kl = sprintf(key, "r%llu", (unsigned long long)k);
        int rc = version % 5 == 0 ? shmobj_map_del(m, key, (size_t)kl)
                                  : shmobj_map_set(m, key, (size_t)kl, v,
                                                   churn_value(k, version, v));
        if (rc != 0 && rc != SHMOBJ_ENOTFOUND)
            return 11;
    }
    return 0;
}

static int replacer_main(void *p)
{
    struct writer_arg *a = p;
    shmobj_segment *seg;
    shmobj_map *m = child_open(a->f, &seg);
    if (m == NULL)
        return 10;
    int rc = replace_loop(m, a);
    shmobj_map_close(m);
    shmobj_segment_close(seg);
    return rc;
}

/* Get the churn keys at random: every value found is whole (its length,
 * key and version agree); at least 1,000 are found. */
static void read_churn(shmobj_map *m)
{
    uint64_t found = 0;
    for (uint64_t i = 0; i < 200000 && (i < 20000 || found < 1000); i++) {
        uint64_t k = rnd() % CHURN_KEYS, version;
        char key[16];
        unsigned char v[CHURN_MAX], want[CHURN_MAX];
        size_t len = 0;
        int kl = sprintf(key, "r%llu", (unsigned long long)k);
        int rc = shmobj_map_get(m, key, (size_t)kl, v, sizeof v, &len);
        if (rc == SHMOBJ_ENOTFOUND)
            continue;
        assert_int_equal(rc, 0);
        assert_true(len >= 16);
        memcpy(&version, v + 8, 8);
        assert_int_equal(churn_value(k, version, want), len);
        assert_memory_equal(v, want, len);
        found++;
    }
    assert_true(found >= 1000);
}

static void test_map_get_while_values_are_replaced(void **state)
{
    struct fixture *f = *state;
    _Atomic uint64_t *shared = shared_page(4096);
    struct writer_arg w = {f, 0, 0, &shared[0], &shared[1]};
    pid_t pc = test_child_start(replacer_main, &w, 120);
    while (atomic_load(&shared[0]) == 0)
        test_sleep_ms(1);
    shmobj__map_read_delay_set(f->map, 50000);
    read_churn(f->map);
    atomic_store(&shared[1], 1);
    assert_int_equal(test_child_wait(pc), 0);
    assert_int_equal(shmobj_map_check(f->map), 0);
    munmap((void *)shared, 4096);
}

static int replacer_thread(void *p)
{
    struct writer_arg *a = p;
    return replace_loop(a->f->map, a);
}

/* Insert fresh keys until told to stop: the tables grow, and each growth
 * makes the threads sharing the handle refresh its cached shapes. */
static int grower_thread(void *p)
{
    struct writer_arg *a = p;
    for (uint64_t i = 0; i < 200000 && !atomic_load(a->stop); i++) {
        char key[16];
        int kl = sprintf(key, "g%llu", (unsigned long long)i);
        if (shmobj_map_set(a->f->map, key, (size_t)kl, &i, sizeof i) != 0)
            return 12;
    }
    return 0;
}

/* The same with the writers as threads of this process, sharing the
 * reader's handle, one of them growing the tables: the cache of shapes in
 * the handle is rewritten under the reader. */
static void test_map_threads_shared_handle_get_while_replaced_and_grown(void **state)
{
    struct fixture *f = *state;
    _Atomic uint64_t progress = 0, stop = 0;
    struct writer_arg w = {f, 0, 0, &progress, &stop};
    struct test_thread rep, grow;
    assert_int_equal(test_thread_start(&rep, replacer_thread, &w), 0);
    assert_int_equal(test_thread_start(&grow, grower_thread, &w), 0);
    while (atomic_load(&progress) == 0)
        test_sleep_ms(1);
    read_churn(f->map);
    atomic_store(&stop, 1);
    assert_int_equal(test_thread_wait(&rep), 0);
    assert_int_equal(test_thread_wait(&grow), 0);
    assert_int_equal(shmobj_map_check(f->map), 0);
}

/* Threads sharing one handle write at once: each sets and deletes keys of
 * its own, and all add to the same counters. Nothing is lost, every key
 * left has its last value. (Writers only: the optimistic reads race with
 * writers by design, validated afterwards, which the thread sanitizer
 * cannot follow.) */
enum { TW_KEYS = 4000, TW_THREADS = 3 };

struct tw_arg {
    shmobj_map *m;
    int id;
};

static int tw_writer(void *p)
{
    struct tw_arg *a = p;
    for (int i = 0; i < TW_KEYS; i++) {
        char key[32];
        uint64_t v = (uint64_t)a->id << 32 | (uint64_t)i;
        int kl = sprintf(key, "t%d-%d", a->id, i);
        if (shmobj_map_set(a->m, key, (size_t)kl, &v, sizeof v) != 0)
            return 1;
        if (i % 3 == 0 && shmobj_map_del(a->m, key, (size_t)kl) != 0)
            return 2;
        kl = sprintf(key, "c%d", i % 7);
        if (shmobj_map_add(a->m, key, (size_t)kl, 1, NULL) != 0)
            return 3;
    }
    return 0;
}

static void test_map_threads_writers_lose_nothing(void **state)
{
    struct fixture *f = *state;
    for (int c = 0; c < 7; c++) {
        char key[8];
        int64_t zero = 0;
        int kl = sprintf(key, "c%d", c);
        assert_int_equal(shmobj_map_set(f->map, key, (size_t)kl, &zero, sizeof zero), 0);
    }
    struct tw_arg args[TW_THREADS];
    struct test_thread t[TW_THREADS];
    for (int k = 0; k < TW_THREADS; k++) {
        args[k] = (struct tw_arg){f->map, k};
        assert_int_equal(test_thread_start(&t[k], tw_writer, &args[k]), 0);
    }
    for (int k = 0; k < TW_THREADS; k++)
        assert_int_equal(test_thread_wait(&t[k]), 0);
    int64_t total = 0;
    for (int c = 0; c < 7; c++) {
        char key[8];
        int64_t x = 0;
        int kl = sprintf(key, "c%d", c);
        assert_int_equal(shmobj_map_get(f->map, key, (size_t)kl, &x, sizeof x, NULL), 0);
        total += x;
    }
    assert_int_equal(total, TW_THREADS * TW_KEYS);
    for (int k = 0; k < TW_THREADS; k++)
        for (int i = 0; i < TW_KEYS; i++) {
            char key[32];
            uint64_t v = 0;
            int kl = sprintf(key, "t%d-%d", k, i);
            int rc = shmobj_map_get(f->map, key, (size_t)kl, &v, sizeof v, NULL);
            if (i % 3 == 0) {
                assert_int_equal(rc, SHMOBJ_ENOTFOUND);
            } else {
                assert_int_equal(rc, 0);
                assert_int_equal(v, (uint64_t)k << 32 | (uint64_t)i);
            }
        }
    uint64_t n;
    assert_int_equal(shmobj_map_count(f->map, &n), 0);
    assert_int_equal(n, 7 + TW_THREADS * (TW_KEYS - (TW_KEYS + 2) / 3));
    assert_int_equal(shmobj_map_check(f->map), 0);
}

/* Two processes add to the same counters: no addition is lost. */
static int adder_main(void *p)
{
    struct writer_arg *a = p;
    shmobj_segment *seg;
    shmobj_map *m = child_open(a->f, &seg);
    if (m == NULL)
        return 10;
    for (uint64_t i = 0; i < a->to; i++) {
        char key[16];
        int kl = sprintf(key, "c%llu", (unsigned long long)(i % 10));
        if (shmobj_map_add(m, key, (size_t)kl, 1, NULL) != 0)
            return 11;
    }
    shmobj_map_close(m);
    shmobj_segment_close(seg);
    return 0;
}

static void test_map_add_two_procs_no_lost_increment(void **state)
{
    struct fixture *f = *state;
    struct writer_arg a = {f, 0, 100000, NULL, NULL};
    pid_t p1 = test_child_start(adder_main, &a, 60);
    pid_t p2 = test_child_start(adder_main, &a, 60);
    assert_int_equal(test_child_wait(p1), 0);
    assert_int_equal(test_child_wait(p2), 0);
    for (int i = 0; i < 10; i++) {
        char key[16];
        int64_t v = 0;
        int kl = sprintf(key, "c%d", i);
        assert_int_equal(shmobj_map_get(f->map, key, (size_t)kl, &v, 8, NULL), 0);
        assert_int_equal(v, 20000);
    }
}

/* ---- crashes ------------------------------------------------------------------- */

struct kill_arg {
    struct fixture *f;
    _Atomic uint64_t *committed; /* ops finished */
    uint64_t start;
    int batch; /* the two sets of an op in one batch */
};

#define HOT 64

/* Operation i of the kill test: set key i, set a hot key to i (both in
 * one shmobj_map_set_many() when `batch`), and delete a key of long ago,
 * so that replacements and deletions are killed too. */
static int kill_op_as(shmobj_map *m, uint64_t i, int batch)
{
    char key[32], hot[32];
    int kl = key16(i, key), hl = sprintf(hot, "hot-%llu", (unsigned long long)(i % HOT));
    uint64_t v = i * 7 + 1;
    if (batch) {
        shmobj_map_set_req r[2] = {{key, (size_t)kl, &v, 8, 0, 0}, {hot, (size_t)hl, &i, 8, 0, 0}};
        if (shmobj_map_set_many(m, r, 2) != 0 || r[0].status != 0 || r[1].status != 0)
            return 14;
    } else {
        if (shmobj_map_set(m, key, (size_t)kl, &v, 8) != 0)
            return 11;
        if (shmobj_map_set(m, hot, (size_t)hl, &i, 8) != 0)
            return 12;
    }
    if (i >= 1000 && i % 2 == 0) {
        kl = key16(i - 1000, key);
        int rc = shmobj_map_del(m, key, (size_t)kl);
        if (rc != 0 && rc != SHMOBJ_ENOTFOUND)
            return 13;
    }
    return 0;
}

static int kill_op(shmobj_map *m, uint64_t i)
{
    return kill_op_as(m, i, 0);
}

static int killed_writer_main(void *p)
{
    struct kill_arg *a = p;
    shmobj_segment *seg;
    shmobj_map *m = child_open(a->f, &seg);
    if (m == NULL)
        return 10;
    for (uint64_t i = a->start;; i++) {
        int rc = kill_op_as(m, i, a->batch);
        if (rc != 0)
            return rc;
        atomic_store(a->committed, i + 1);
    }
}

static void kill_writer_loop(struct fixture *f, unsigned rounds, int batch)
{
    _Atomic uint64_t *committed = shared_page(4096);
    uint64_t next = 0;
    for (unsigned round = 0; round < rounds; round++) {
        struct kill_arg a = {f, committed, next, batch};
        pid_t pid = test_child_start(killed_writer_main, &a, 60);
        /* let it run a random while, then kill it anywhere */
        uint64_t until = next + 1 + rnd() % 3000;
        while (atomic_load(committed) < until) {
            int st;
            assert_int_equal(waitpid(pid, &st, WNOHANG), 0);
            sched_yield();
        }
        for (unsigned spin = (unsigned)(rnd() % 20000); spin > 0; spin--)
            __asm__ __volatile__("" ::: "memory");
        kill(pid, SIGKILL);
        assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
        uint64_t c = atomic_load(committed);
        /* every key set by a committed operation is readable with its
         * value, unless a committed operation deleted it; op c may be half
         * done */
        for (uint64_t i = c > 3000 ? c - 3000 : 0; i < c; i++) {
            char key[32];
            uint64_t got = 0;
            int kl = key16(i, key);
            int rc = shmobj_map_get(f->map, key, (size_t)kl, &got, 8, NULL);
            if (i % 2 == 0 && i + 1000 <= c)
                continue;
            assert_int_equal(rc, 0);
            assert_true(got == i * 7 + 1);
        }
        for (uint64_t h = 0; h < HOT && c > HOT; h++) {
            char key[32];
            uint64_t got = 0, last = c - 1 - ((c - 1 - h) % HOT);
            int kl = sprintf(key, "hot-%llu", (unsigned long long)h);
            assert_int_equal(shmobj_map_get(f->map, key, (size_t)kl, &got, 8, NULL), 0);
            /* the committed value, or the one the dead writer was setting */
            assert_true(got == last || (got == c && c % HOT == h));
        }
        if (round % 10 == 0 || round + 1 == rounds)
            assert_int_equal(shmobj_map_check(f->map), 0);
        /* finish op c here, so the next round starts from a known state */
        assert_int_equal(kill_op(f->map, c), 0);
        next = c + 1;
        atomic_store(committed, next);
    }
    assert_int_equal(shmobj_map_check(f->map), 0);
    /* memory: beyond what the map holds (live data, tables, retired
     * blocks), each kill leaks at most one block, which is no bigger than
     * the biggest table (doc/format-map.md) */
    shmobj_map_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_map_stats_get(f->map, &st), 0);
    uint64_t held = heap_used(f->seg) - seg_fixed_used(64 * MiB, 1024 * MiB);
    uint64_t biggest = 0;
    for (unsigned i = 0; i < SHMOBJ__MAP_SHARDS; i++) {
        void *p;
        size_t n;
        shmobj_ref t = atomic_load(&shmobj__map_control(f->map)->shards_[i].table);
        assert_int_equal(shmobj_arena_ptr(f->seg, t, &p, &n), 0);
        if (n + 16 > biggest)
            biggest = n + 16;
    }
    assert_true(held >= st.total_bytes);
    assert_true(held - st.total_bytes <= (uint64_t)rounds * biggest);
    munmap((void *)committed, 4096);
}

static void test_map_kill_writer_loop(void **state)
{
    kill_writer_loop(*state, kill_rounds, 0);
}

/* The same with each op's two sets in one shmobj_map_set_many(): a kill
 * inside a batch leaves each set whole or undone, and leaks at most one
 * block. */
static void test_map_kill_batch_writer_loop(void **state)
{
    kill_writer_loop(*state, kill_rounds / 2, 1);
}

/* ---- bad input ------------------------------------------------------------------- */

static void test_map_too_large_enomem(void **state)
{
    (void)state;
    struct fixture f = {0};
    shmobj_map *m;
    seg_make(&f, 4 * MiB, 8 * MiB);
    assert_int_equal(shmobj_map_create(f.seg, "m", &m), 0);
    size_t big = 16 * MiB;
    char *buf = calloc(1, big);
    assert_int_equal(shmobj_map_set(m, "k", 1, buf, big), SHMOBJ_ENOMEM);
    assert_int_equal(shmobj_map_set(m, buf, big, "v", 1), SHMOBJ_ENOMEM);
    /* the map is still fine, and fills up with ENOMEM, not a crash */
    int rc = 0;
    uint64_t i;
    for (i = 0; rc == 0 && i < 1000000; i++) {
        char key[32];
        int kl = key16(i, key);
        rc = shmobj_map_set(m, key, (size_t)kl, buf, 200);
    }
    assert_int_equal(rc, SHMOBJ_ENOMEM);
    assert_true(i > 1000);
    assert_int_equal(shmobj_map_check(m), 0);
    assert_int_equal(shmobj_map_get(m, "key-000000000000", 16, buf, 200, NULL), 0);
    free(buf);
    shmobj_map_close(m);
    shmobj_segment_close(f.seg);
    shmobj_segment_destroy(f.name, SHMOBJ_BACKEND_SHM);
}

/* The table block of the shard that holds key. */
static uint8_t *table_of(struct fixture *f, const char *key, uint64_t *usable)
{
    struct shmobj__map_ctl *c = shmobj__map_control(f->map);
    uint64_t h = shmobj_htcore_hash64(key, strlen(key), c->seed);
    shmobj_ref t = atomic_load(&c->shards_[h >> SHMOBJ__MAP_SHARD_SHIFT].table);
    void *p;
    size_t n;
    assert_int_equal(shmobj_arena_ptr(f->seg, t, &p, &n), 0);
    *usable = n;
    return p;
}

static void test_map_damaged_table_ecorrupt(void **state)
{
    struct fixture *f = *state;
    shmobj_map *m = f->map;
    char buf[64];
    for (int i = 0; i < 1000; i++) {
        char key[32];
        int kl = sprintf(key, "d%d", i);
        assert_int_equal(shmobj_map_set(m, key, (size_t)kl, "value", 5), 0);
    }
    uint64_t usable;
    uint8_t *t = table_of(f, "d7", &usable);
    uint8_t *save = malloc(usable);
    memcpy(save, t, usable);
    shmobj_htcore ht;
    assert_int_equal(shmobj_htcore_attach(&ht, t + SHMOBJ__MAP_TABLE_PREFIX,
                                          usable - SHMOBJ__MAP_TABLE_PREFIX), 0);

    /* 1. every slot's reference replaced by garbage: the key's lookup
     * reaches a bad reference -> ECORRUPT; check and iteration say so too */
    for (uint64_t i = 0; i <= ht.mask; i++) {
        /* the entry references (top 44 bits) become garbage; the hash bits
         * stay, so lookups still reach them */
        uint8_t *slot = ht.groups + (i / 16) * ht.group_bytes + 16 + (i % 16) * ht.stride;
        uint64_t v;
        memcpy(&v, slot, 8);
        v = (rnd() << 20) | (v & 0xfffff);
        memcpy(slot, &v, 8);
    }
    assert_int_equal(shmobj_map_get(m, "d7", 2, buf, sizeof buf, NULL), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_map_check(m), SHMOBJ_ECORRUPT);
    shmobj_map_iter *it;
    int rc;
    assert_int_equal(shmobj_map_iter_open(m, &it), 0);
    while ((rc = shmobj_map_iter_next(it, NULL, NULL, NULL, NULL)) == 0)
        ;
    assert_int_equal(rc, SHMOBJ_ECORRUPT);
    shmobj_map_iter_close(it);
    memcpy(t, save, usable);
    assert_int_equal(shmobj_map_check(m), 0);

    /* 2. a damaged table header */
    t[SHMOBJ__MAP_TABLE_PREFIX + 24] ^= 0xff; /* slots */
    assert_int_equal(shmobj_map_get(m, "d7", 2, buf, sizeof buf, NULL), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_map_set(m, "d7", 2, "x", 1), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_map_check(m), SHMOBJ_ECORRUPT);
    memcpy(t, save, usable);

    /* 3. random bytes all over the table, many times: never a crash */
    for (int round = 0; round < 300; round++) {
        for (int j = 0; j < 8; j++)
            t[rnd() % usable] = (uint8_t)rnd();
        for (int i = 0; i < 40; i++) {
            char key[32];
            int kl = sprintf(key, "d%d", (int)(rnd() % 1000));
            rc = shmobj_map_get(m, key, (size_t)kl, buf, sizeof buf, NULL);
            assert_true(rc == 0 || rc == SHMOBJ_ENOTFOUND || rc == SHMOBJ_ECORRUPT);
        }
        rc = shmobj_map_check(m);
        assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT);
        memcpy(t, save, usable);
    }
    assert_int_equal(shmobj_map_check(m), 0);

    /* 4. a damaged entry header: lengths beyond the block */
    {
        shmobj_map_view v;
        assert_int_equal(shmobj_map_get_view(m, "d7", 2, &v), 0);
        struct shmobj__map_entry *e =
            (struct shmobj__map_entry *)((uint8_t *)(uintptr_t)v.key - SHMOBJ__MAP_ENTRY_HEADER);
        shmobj_map_view_release(&v);
        uint32_t kl = e->key_len;
        e->key_len = 0x7fffffff;
        assert_int_equal(shmobj_map_check(m), SHMOBJ_ECORRUPT);
        rc = shmobj_map_get(m, "d7", 2, buf, sizeof buf, NULL);
        assert_true(rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ENOTFOUND);
        e->key_len = kl;
    }
    assert_int_equal(shmobj_map_check(m), 0);

    /* 5. a shard's table reference damaged, seen by this handle (its cache
     * of the shard's table is warm) and by a fresh one (cold): small
     * values, one off the real table, unaligned, and far beyond the
     * segment: every get says ECORRUPT, never crashes or reads the value
     * through the wrong reference */
    {
        uint64_t h = shmobj_htcore_hash64("d7", 2, shmobj__map_control(m)->seed);
        struct shmobj__map_shard *sh = &shmobj__map_control(m)->shards_[h >> SHMOBJ__MAP_SHARD_SHIFT];
        uint64_t good = atomic_load(&sh->table);
        const uint64_t bad[] = {1, 8, 63, 64, good + 1, good + 64, good ^ (UINT64_C(1) << 47),
                                good | 63, UINT64_MAX & ~UINT64_C(63)};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            shmobj_map *cold;
            assert_int_equal(shmobj_map_open(f->seg, "m", &cold), 0);
            atomic_store(&sh->table, bad[i]);
            assert_int_equal(shmobj_map_get(m, "d7", 2, buf, sizeof buf, NULL), SHMOBJ_ECORRUPT);
            assert_int_equal(shmobj_map_get(cold, "d7", 2, buf, sizeof buf, NULL), SHMOBJ_ECORRUPT);
            atomic_store(&sh->table, good);
            shmobj_map_close(cold);
        }
        assert_int_equal(shmobj_map_get(m, "d7", 2, buf, sizeof buf, NULL), 0);
    }

    /* 6. a damaged control block: open refuses it */
    struct shmobj__map_ctl *c = shmobj__map_control(m);
    shmobj_map *m2;
    c->seed ^= 1;
    assert_int_equal(shmobj_map_open(f->seg, "m", &m2), SHMOBJ_ECORRUPT);
    c->seed ^= 1;
    c->version = 99;
    assert_int_equal(shmobj_map_open(f->seg, "m", &m2), SHMOBJ_EVERSION);
    c->version = SHMOBJ__MAP_VERSION;
    assert_int_equal(shmobj_map_open(f->seg, "m", &m2), 0);
    shmobj_map_close(m2);
    free(save);
}

/* A slot damaged to name a payload in the last bytes of the mapping, whose
 * header claims the key and a 64-byte value: the part of the entry past
 * the mapping is never read (the bytes after it are not backed, so a read
 * there faults), a get answers ECORRUPT, and the get of a fake entry that
 * fits answers its bytes or ECORRUPT; put back, the key reads again. */
static void test_map_get_entry_at_mapping_end_bounded(void **state)
{
    struct fixture *f = *state;
    shmobj_map *m = f->map;
    assert_int_equal(shmobj_map_set(m, "d7", 2, "value", 5), 0);
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(f->seg, &info), 0);
    struct shmobj__map_ctl *c = shmobj__map_control(m);
    uint64_t h = shmobj_htcore_hash64("d7", 2, c->seed);
    shmobj_ref tref = atomic_load(&c->shards_[h >> SHMOBJ__MAP_SHARD_SHIFT].table);
    uint64_t usable;
    uint8_t *t = table_of(f, "d7", &usable);
    uint8_t *base = t - shmobj__ref_off(tref);
    shmobj_htcore ht;
    assert_int_equal(shmobj_htcore_attach(&ht, t + SHMOBJ__MAP_TABLE_PREFIX,
                                          usable - SHMOBJ__MAP_TABLE_PREFIX), 0);
    /* the slot of "d7": the one whose entry holds that key */
    uint8_t *slot = NULL;
    uint64_t word = 0;
    for (uint64_t i = 0; i <= ht.mask && slot == NULL; i++) {
        uint8_t *s = ht.groups + (i / 16) * ht.group_bytes + 16 + (i % 16) * ht.stride;
        uint64_t v, off;
        memcpy(&v, s, 8);
        off = (v >> 20) << SHMOBJ__MAP_SLOT_SHIFT;
        if (v == 0 || off < 16 || off + 32 > info.size)
            continue;
        struct shmobj__map_entry e;
        memcpy(&e, base + off, sizeof e);
        if (e.key_len == 2 && memcmp(base + off + SHMOBJ__MAP_ENTRY_HEADER, "d7", 2) == 0) {
            slot = s;
            word = v;
        }
    }
    assert_non_null(slot);
    uint8_t save[160], value[64], buf[64];
    memcpy(save, base + info.size - sizeof save, sizeof save);
    memset(value, 'v', sizeof value);
    for (uint64_t back = 16; back <= sizeof save; back += 16) {
        uint64_t off = info.size - back;
        struct shmobj__map_entry e = {.key_len = 2, .value_len = 64, .hash_gen = 0};
        uint64_t room = back - SHMOBJ__MAP_ENTRY_HEADER;
        memcpy(base + off, &e, sizeof e);
        if (room >= 2)
            memcpy(base + off + SHMOBJ__MAP_ENTRY_HEADER, "d7", 2);
        if (back >= SHMOBJ__MAP_ENTRY_HEADER + 16 + 64)
            memcpy(base + off + SHMOBJ__MAP_ENTRY_HEADER + 16, value, 64);
        uint64_t w = ((off >> SHMOBJ__MAP_SLOT_SHIFT) << 20) | (word & 0xfffff);
        memcpy(slot, &w, 8);
        size_t len = 0;
        int rc = shmobj_map_get(m, "d7", 2, buf, sizeof buf, &len);
        if (back < SHMOBJ__MAP_ENTRY_HEADER + 16 + 64)
            assert_int_equal(rc, SHMOBJ_ECORRUPT);
        else
            assert_true(rc == SHMOBJ_ECORRUPT ||
                        (rc == 0 && len == 64 && memcmp(buf, value, 64) == 0));
        memcpy(base + info.size - sizeof save, save, sizeof save);
    }
    memcpy(slot, &word, 8);
    size_t len = 0;
    assert_int_equal(shmobj_map_get(m, "d7", 2, buf, sizeof buf, &len), 0);
    assert_memory_equal(buf, "value", 5);
    assert_int_equal(shmobj_map_check(m), 0);
}

/* ---- stale handles, wrong kinds, many handles ------------------------------------- */

/* A child destroys map "s": takes the root away and frees the control
 * block; with reuse set it also allocates a block in its place and fills
 * it, as a later user of the memory would. */
struct destroy_arg {
    struct fixture *f;
    int reuse;
};

static int destroyer_main(void *p)
{
    struct destroy_arg *a = p;
    shmobj_segment *seg;
    shmobj_ref ref, again;
    if (shmobj_segment_open(a->f->name, SHMOBJ_BACKEND_SHM, 5000 * TEST_MS, &seg) != 0)
        return 10;
    if (shmobj_segment_root_get(seg, "s", &ref) != 0 || shmobj_segment_root_del(seg, "s") != 0)
        return 11;
    if (shmobj_arena_free(seg, ref) != 0)
        return 12;
    if (a->reuse) {
        void *q;
        size_t n;
        if (shmobj_arena_alloc(seg, sizeof(struct shmobj__map_ctl), 64, &again, NULL) != 0 ||
            shmobj_arena_ptr(seg, again, &q, &n) != 0)
            return 13;
        memset(q, 0x5a, n);
    }
    shmobj_segment_close(seg);
    return 0;
}

/* Every call through a handle whose map another process destroyed says
 * SHMOBJ_ESTALE; a get through the fast path may still answer from the
 * map's last tables until the control block's bytes change (reuse), and
 * says SHMOBJ_ESTALE from then on. */
static void test_map_calls_on_destroyed_map_estale(void **state)
{
    struct fixture *f = *state;
    for (int reuse = 0; reuse < 2; reuse++) {
        shmobj_map *m;
        char buf[16];
        size_t vl;
        assert_int_equal(shmobj_map_create(f->seg, "s", &m), 0);
        for (int i = 0; i < 200; i++) {
            char key[16];
            int kl = sprintf(key, "k%d", i);
            assert_int_equal(shmobj_map_set(m, key, (size_t)kl, "v", 1), 0);
        }
        assert_int_equal(shmobj_map_get(m, "k1", 2, buf, sizeof buf, &vl), 0);
        struct destroy_arg a = {f, reuse};
        assert_int_equal(test_child_wait(test_child_start(destroyer_main, &a, 60)), 0);

        int64_t r;
        uint64_t n;
        shmobj_map_view v;
        shmobj_map_iter *it;
        shmobj_map_stats st = {.struct_size = sizeof st};
        shmobj_map_get_req req = {.key = "k2", .key_len = 2, .buf = buf, .buf_len = sizeof buf};
        assert_int_equal(shmobj_map_set(m, "k1", 2, "w", 1), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_set(m, "new", 3, "w", 1), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_add(m, "c", 1, 1, &r), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_del(m, "k1", 2), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_clear(m), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_count(m, &n), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_stats_get(m, &st), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_check(m), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_get_view(m, "k1", 2, &v), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_iter_open(m, &it), 0);
        assert_int_equal(shmobj_map_iter_next(it, NULL, NULL, NULL, NULL), SHMOBJ_ESTALE);
        /* the cursor has ended: a loop until ENOTFOUND stops */
        assert_int_equal(shmobj_map_iter_next(it, NULL, NULL, NULL, NULL), SHMOBJ_ENOTFOUND);
        shmobj_map_iter_close(it);
        /* copy-out reads: once the control block's bytes changed (reuse)
         * the fast path notices; before, it may answer from the map's
         * last tables (or say ESTALE), never from another map's data */
        static const char long_key[] = "a key of more than sixty-four bytes, which takes the general path";
        int rc[4];
        rc[0] = shmobj_map_get(m, "k1", 2, buf, sizeof buf, &vl);
        rc[1] = shmobj_map_get(m, long_key, sizeof long_key - 1, buf, sizeof buf, &vl);
        rc[2] = shmobj_map_contains(m, "k3", 2);
        assert_int_equal(shmobj_map_get_many(m, &req, 1), 0);
        rc[3] = req.status;
        for (int i = 0; i < 4; i++) {
            if (reuse)
                assert_int_equal(rc[i], SHMOBJ_ESTALE);
            else
                assert_true(rc[i] == (i == 1 ? SHMOBJ_ENOTFOUND : 0) || rc[i] == SHMOBJ_ESTALE);
        }
        shmobj_map_close(m); /* writes nothing into the freed block */
        uint64_t bad = 0;
        assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    }
}

/* A cursor that meets a damaged shard reports it once and goes on with
 * the next shard: a loop until SHMOBJ_ENOTFOUND ends, and returns the
 * entries of every other shard. */
static void test_map_iter_moves_past_damaged_shard(void **state)
{
    struct fixture *f = *state;
    shmobj_map *m = f->map;
    for (int i = 0; i < 2000; i++) {
        char key[16];
        int kl = sprintf(key, "i%d", i);
        assert_int_equal(shmobj_map_set(m, key, (size_t)kl, "v", 1), 0);
    }
    struct shmobj__map_shard *sh = &shmobj__map_control(m)->shards_[5];
    uint64_t good = atomic_load(&sh->table), in_shard = atomic_load(&sh->count);
    atomic_store(&sh->table, good + 64);
    shmobj_map_iter *it;
    int rc;
    unsigned calls = 0, corrupt = 0, entries = 0;
    assert_int_equal(shmobj_map_iter_open(m, &it), 0);
    while ((rc = shmobj_map_iter_next(it, NULL, NULL, NULL, NULL)) != SHMOBJ_ENOTFOUND &&
           ++calls < 10000) {
        if (rc == SHMOBJ_ECORRUPT)
            corrupt++;
        else if (rc == 0)
            entries++;
        else
            fail_msg("iter_next: %s", shmobj_errname(rc));
    }
    shmobj_map_iter_close(it);
    assert_int_equal(rc, SHMOBJ_ENOTFOUND);
    assert_int_equal(corrupt, 1);
    assert_int_equal(entries, 2000 - in_shard);
    atomic_store(&sh->table, good);
    assert_int_equal(shmobj_map_check(m), 0);
}

/* A limbo list whose links form a cycle (damage) is walked a bounded
 * number of times by each of its three walkers: the check reports it,
 * the statistics end, and the reclaim that frees the list drops it, after
 * which the map checks clean again. */
static void test_map_limbo_cycle_walks_bounded(void **state)
{
    struct fixture *f = *state;
    shmobj_map *m = f->map;
    /* replacing one key retires its old entries to one shard's list */
    for (int i = 0; i < 5; i++)
        assert_int_equal(shmobj_map_set(m, "cyc", 3, &i, sizeof i), 0);
    uint64_t h = shmobj_htcore_hash64("cyc", 3, shmobj__map_control(m)->seed);
    struct shmobj__map_shard *sh = &shmobj__map_control(m)->shards_[h >> SHMOBJ__MAP_SHARD_SHIFT];
    unsigned li = 3;
    for (unsigned k = 0; k < 3; k++)
        if (atomic_load(&sh->limbo_head[k]) != 0)
            li = k;
    assert_true(li < 3);
    uint64_t head = atomic_load(&sh->limbo_head[li]), item = head, last = 0;
    unsigned n = 0;
    void *p = NULL;
    size_t len;
    while (item != 0 && n < 100) {
        assert_int_equal(shmobj_arena_ptr(f->seg, item, &p, &len), 0);
        last = item;
        memcpy(&item, (uint8_t *)p + SHMOBJ__MAP_LINK_OFF, 8);
        n++;
    }
    assert_true(n >= 4 && last != 0);
    assert_int_equal(shmobj_map_check(m), 0);
    memcpy((uint8_t *)p + SHMOBJ__MAP_LINK_OFF, &head, 8); /* last -> head */
    assert_int_equal(shmobj_map_check(m), SHMOBJ_ECORRUPT);
    shmobj_map_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_map_stats_get(m, &st), 0);
    /* clear retires every table and reclaims: the cyclic list is freed as
     * far as its count allows and dropped */
    assert_int_equal(shmobj_map_clear(m), 0);
    assert_int_equal(shmobj_map_set(m, "after", 5, "v", 1), 0);
    assert_int_equal(shmobj_map_clear(m), 0);
    assert_int_equal(shmobj_map_check(m), 0);
    int v = -1;
    size_t vl;
    assert_int_equal(shmobj_map_get(m, "cyc", 3, &v, sizeof v, &vl), SHMOBJ_ENOTFOUND);
}

/* shmobj_map_open on a root that names something consistent but not a
 * map (a queue, an object, a raw block) says SHMOBJ_ETYPE; a map control
 * block whose bytes disagree stays SHMOBJ_ECORRUPT. */
static void test_map_open_other_kind_etype(void **state)
{
    struct fixture *f = *state;
    shmobj_map *m;
    shmobj_queue *q;
    shmobj_ref obj, raw, big;
    void *p;
    size_t n;
    assert_int_equal(shmobj_queue_create(f->seg, "q", 64, 0, &q), 0);
    assert_int_equal(shmobj_map_open(f->seg, "q", &m), SHMOBJ_ETYPE); /* the queue's root */
    shmobj_value val = SHMOBJ_VAL_STR("not a map, but an object of some length");
    assert_int_equal(shmobj_obj_put(f->seg, &val, &obj), 0);
    assert_int_equal(shmobj_segment_root_set(f->seg, "o", obj), 0);
    assert_int_equal(shmobj_map_open(f->seg, "o", &m), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_arena_alloc(f->seg, 32, 16, &raw, NULL), 0);
    assert_int_equal(shmobj_arena_ptr(f->seg, raw, &p, &n), 0);
    memset(p, 0, n);
    assert_int_equal(shmobj_segment_root_set(f->seg, "r", raw), 0);
    assert_int_equal(shmobj_map_open(f->seg, "r", &m), SHMOBJ_ETYPE);
    assert_int_equal(shmobj_arena_alloc(f->seg, sizeof(struct shmobj__map_ctl), 64, &big, NULL), 0);
    assert_int_equal(shmobj_arena_ptr(f->seg, big, &p, &n), 0);
    memset(p, 0x11, n);
    assert_int_equal(shmobj_segment_root_set(f->seg, "b", big), 0);
    assert_int_equal(shmobj_map_open(f->seg, "b", &m), SHMOBJ_ETYPE);
    /* the map's magic with the rest wrong is damage, not another kind */
    memcpy(p, shmobj__map_control(f->map), 64);
    ((uint8_t *)p)[24] ^= 1; /* the seed: the check word disagrees */
    assert_int_equal(shmobj_map_open(f->seg, "b", &m), SHMOBJ_ECORRUPT);
    shmobj_queue_close(q);
}

/* Statistics count every heap block the map holds, retired ones
 * included: a map alone in its segment accounts for all the heap's used
 * bytes; and reading them changes nothing (two calls agree). */
static void test_map_stats_count_every_block(void **state)
{
    (void)state;
    struct fixture g = {0};
    shmobj_map *m;
    seg_make(&g, 16 * MiB, 256 * MiB);
    uint64_t fixed = heap_used(g.seg);
    assert_int_equal(shmobj_map_create(g.seg, "m", &m), 0);
    shmobj_map_stats a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
    assert_int_equal(shmobj_map_stats_get(m, &a), 0);
    assert_int_equal(a.total_bytes, heap_used(g.seg) - fixed);
    for (int i = 0; i < 5000; i++) {
        char key[16], v[100];
        int kl = sprintf(key, "s%d", i);
        memset(v, i, sizeof v);
        assert_int_equal(shmobj_map_set(m, key, (size_t)kl, v, (size_t)(i % 100)), 0);
    }
    /* a guard held here keeps everything retired from now on pending */
    shmobj_map_view view;
    assert_int_equal(shmobj_map_get_view(m, "s1", 2, &view), 0);
    for (int i = 0; i < 5000; i += 2) {
        char key[16];
        int kl = sprintf(key, "s%d", i);
        if (i % 4 == 0)
            assert_int_equal(shmobj_map_set(m, key, (size_t)kl, "replaced", 8), 0);
        else
            assert_int_equal(shmobj_map_del(m, key, (size_t)kl), 0);
    }
    assert_int_equal(shmobj_map_stats_get(m, &a), 0);
    assert_int_equal(shmobj_map_stats_get(m, &b), 0);
    assert_memory_equal(&a, &b, sizeof a);
    assert_true(a.pending_bytes > 0);
    assert_int_equal(a.total_bytes, heap_used(g.seg) - fixed);
    shmobj_ref cref;
    void *cp;
    size_t cn;
    assert_int_equal(shmobj_segment_root_get(g.seg, "m", &cref), 0);
    assert_int_equal(shmobj_arena_ptr(g.seg, cref, &cp, &cn), 0);
    assert_int_equal(a.total_bytes, cn + 16 + a.table_bytes + a.entry_bytes + a.pending_bytes);
    /* a cleared map's old tables and their entries wait as one item */
    assert_int_equal(shmobj_map_clear(m), 0);
    assert_int_equal(shmobj_map_stats_get(m, &a), 0);
    assert_int_equal(a.count, 0);
    assert_int_equal(a.entry_bytes, 0);
    assert_int_equal(a.total_bytes, heap_used(g.seg) - fixed);
    shmobj_map_view_release(&view);
    assert_int_equal(shmobj_map_set(m, "after", 5, "x", 1), 0);
    assert_int_equal(shmobj_map_stats_get(m, &a), 0);
    assert_int_equal(a.total_bytes, heap_used(g.seg) - fixed);
    shmobj_map_close(m);
    shmobj_segment_close(g.seg);
    shmobj_segment_destroy(g.name, SHMOBJ_BACKEND_SHM);
}

/* Many handles at once, from several processes: SHMOBJ_MAP_HANDLES_MAX
 * of them open and usable together, one more is SHMOBJ_EFULL, and the
 * slots of a process killed with its handles open are taken again. */
enum { MH_PROCS = 4 };

struct many_arg {
    struct fixture *f;
    unsigned handles;
    int id;
    _Atomic uint64_t *ready, *stop;
};

static int many_main(void *p)
{
    struct many_arg *a = p;
    shmobj_segment *seg;
    shmobj_map **h = calloc(a->handles, sizeof *h);
    if (h == NULL || shmobj_segment_open(a->f->name, SHMOBJ_BACKEND_SHM, 5000 * TEST_MS, &seg) != 0)
        return 10;
    for (unsigned i = 0; i < a->handles; i++) {
        char key[32];
        uint64_t v = 0;
        int kl = sprintf(key, "h%d-%u", a->id, i);
        if (shmobj_map_open(seg, "m", &h[i]) != 0)
            return 11;
        if (shmobj_map_set(h[i], key, (size_t)kl, &i, sizeof i) != 0)
            return 12;
        shmobj_map_view view;
        if (shmobj_map_get_view(h[i], key, (size_t)kl, &view) != 0)
            return 13;
        memcpy(&v, view.value, sizeof v);
        shmobj_map_view_release(&view);
        if (v != i)
            return 14;
    }
    atomic_fetch_add(a->ready, 1);
    for (int t = 0; t < 60000 && atomic_load(a->stop) == 0; t++)
        test_sleep_ms(1);
    for (unsigned i = 0; i < a->handles; i++)
        shmobj_map_close(h[i]);
    shmobj_segment_close(seg);
    free(h);
    return 0;
}

static void test_map_open_many_handles_from_processes(void **state)
{
    struct fixture *f = *state;
    _Atomic uint64_t *shared = shared_page(4096);
    unsigned per = (SHMOBJ_MAP_HANDLES_MAX - 1) / MH_PROCS; /* f->map holds one */
    struct many_arg a[MH_PROCS];
    pid_t pid[MH_PROCS];
    for (int k = 0; k < MH_PROCS; k++) {
        a[k] = (struct many_arg){f, per, k, &shared[0], &shared[1]};
        pid[k] = test_child_start(many_main, &a[k], 120);
    }
    for (int t = 0; t < 60000 && atomic_load(&shared[0]) < MH_PROCS; t++)
        test_sleep_ms(1);
    assert_int_equal(atomic_load(&shared[0]), MH_PROCS);
    unsigned left = SHMOBJ_MAP_HANDLES_MAX - 1 - per * MH_PROCS;
    shmobj_map *mine[8], *extra;
    assert_true(left <= 8);
    for (unsigned i = 0; i < left; i++)
        assert_int_equal(shmobj_map_open(f->seg, "m", &mine[i]), 0);
    assert_true(SHMOBJ_MAP_HANDLES_MAX > 1000);
    assert_int_equal(shmobj_map_open(f->seg, "m", &extra), SHMOBJ_EFULL);
    /* writes through every handle were seen through every other */
    char buf[8];
    size_t vl;
    for (int k = 0; k < MH_PROCS; k++)
        for (unsigned i = 0; i < per; i += 37) {
            char key[32];
            uint64_t v = 0;
            int kl = sprintf(key, "h%d-%u", k, i);
            assert_int_equal(shmobj_map_get(f->map, key, (size_t)kl, &v, sizeof v, &vl), 0);
            assert_int_equal(v, i);
        }
    /* a process killed with its handles open: its slots are reclaimed */
    kill(pid[0], SIGKILL);
    assert_int_equal(test_child_wait(pid[0]), 128 + SIGKILL);
    assert_int_equal(shmobj_map_open(f->seg, "m", &extra), 0);
    shmobj_map_close(extra);
    atomic_store(&shared[1], 1);
    for (int k = 1; k < MH_PROCS; k++)
        assert_int_equal(test_child_wait(pid[k]), 0);
    for (unsigned i = 0; i < left; i++)
        shmobj_map_close(mine[i]);
    (void)buf;
    assert_int_equal(shmobj_map_check(f->map), 0);
    munmap((void *)shared, 4096);
}

/* ---- crash repair of a deep free ------------------------------------------------------ */

/* The writer killed inside a deep free: after `after` entries are freed
 * (their references noted in the shared page) it kills itself. */
struct deep_kill {
    _Atomic uint64_t *freed; /* [0] count, then refs */
    uint64_t after;
};

static void deep_kill_hook(void *arg, uint64_t ref)
{
    struct deep_kill *d = arg;
    uint64_t k = atomic_fetch_add(&d->freed[0], 1);
    atomic_store(&d->freed[1 + k], ref);
    if (k + 1 == d->after)
        raise(SIGKILL);
}

static int deep_clearer_main(void *p)
{
    struct fixture *f = ((void **)p)[0];
    struct deep_kill *d = ((void **)p)[1];
    shmobj_segment *seg;
    shmobj_map *m = child_open(f, &seg);
    if (m == NULL)
        return 10;
    shmobj__map_free_hook_set(m, deep_kill_hook, d);
    (void)shmobj_map_clear(m);
    return 11; /* the hook should have killed us */
}

/* A writer killed while a cleared table's entries are being freed, after
 * another map has taken some of those blocks: the repair that follows
 * frees what the dead writer had not freed, and no block of the other
 * map. */
static void test_map_repair_of_deep_free_spares_reused_blocks(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 3000; i++) {
        char key[16];
        uint64_t v = (uint64_t)i;
        int kl = sprintf(key, "e%011d", i); /* 12-byte keys, 8-byte values */
        assert_int_equal(shmobj_map_set(f->map, key, (size_t)kl, &v, sizeof v), 0);
    }
    shmobj_map *other;
    assert_int_equal(shmobj_map_create(f->seg, "other", &other), 0);
    _Atomic uint64_t *freed = shared_page(65536);
    struct deep_kill d = {freed, 6};
    void *arg[2] = {f, &d};
    assert_int_equal(test_child_wait(test_child_start(deep_clearer_main, arg, 60)), 128 + SIGKILL);
    assert_int_equal(atomic_load(&freed[0]), d.after);
    /* The dead writer's frees went to its allocation cache: the heap's
     * repair gives them back, for the other map to take. */
    assert_int_equal(shmobj__segment_lock(f->seg), 0);
    assert_int_equal(shmobj__seg_cache_rebuild(f->seg), 0);
    shmobj__segment_unlock(f->seg);
    /* the other map's new entries, of the same size, take the freed blocks */
    const uint8_t *ctl = (const uint8_t *)shmobj__map_control(f->map);
    shmobj_ref cref;
    assert_int_equal(shmobj_segment_root_get(f->seg, "m", &cref), 0);
    const uint8_t *base = ctl - (cref & ((UINT64_C(1) << 48) - 1));
    unsigned reused = 0;
    for (int i = 0; i < 64; i++) {
        char key[16];
        uint64_t v = 1000000 + (uint64_t)i;
        int kl = sprintf(key, "o%011d", i);
        shmobj_map_view view;
        assert_int_equal(shmobj_map_set(other, key, (size_t)kl, &v, sizeof v), 0);
        assert_int_equal(shmobj_map_get_view(other, key, (size_t)kl, &view), 0);
        uint64_t off = (uint64_t)((const uint8_t *)view.key - SHMOBJ__MAP_ENTRY_HEADER - base);
        shmobj_map_view_release(&view);
        for (uint64_t k = 0; k < d.after; k++)
            if ((atomic_load(&freed[1 + k]) & ((UINT64_C(1) << 48) - 1)) == off)
                reused++;
    }
    assert_true(reused > 0); /* the window is reproduced */
    /* the next locker of the dead writer's shard repairs it */
    assert_int_equal(shmobj_map_check(f->map), 0);
    assert_int_equal(shmobj_map_check(other), 0);
    for (int i = 0; i < 64; i++) {
        char key[16];
        uint64_t v = 0;
        int kl = sprintf(key, "o%011d", i);
        assert_int_equal(shmobj_map_get(other, key, (size_t)kl, &v, sizeof v, NULL), 0);
        assert_int_equal(v, 1000000 + (uint64_t)i);
    }
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(f->seg, &bad), 0);
    assert_int_equal(shmobj_map_clear(f->map), 0);
    assert_int_equal(shmobj_map_check(other), 0);
    shmobj_map_close(other);
    munmap((void *)freed, 65536);
}

/* ---- a full map gives room back (issue 29, defect 11) ---------------- */

/* Fill a map of 1,000-byte values until the segment, at its maximum, has
 * no room; returns how many keys went in. */
static uint64_t fill_until_full(shmobj_map *m, const char *val)
{
    uint64_t n = 0;
    for (;; n++) {
        char key[32];
        int kl = key16(n, key);
        int rc = shmobj_map_set(m, key, (size_t)kl, val, 1000);
        if (rc == SHMOBJ_ENOMEM)
            return n;
        assert_int_equal(rc, 0);
    }
}

/* Deleting entries of a full map makes room for as many again: an
 * allocation that fails first reclaims what the map itself retired. With
 * 100 (then 1,000) of the values deleted, 50 inserts of the same size all
 * succeed, and the map checks. */
static void test_map_full_segment_gives_room_back(void **state)
{
    (void)state;
    struct fixture f = {0};
    shmobj_map *m;
    seg_make(&f, 8 * MiB, 16 * MiB);
    assert_int_equal(shmobj_map_create(f.seg, "m", &m), 0);
    char val[1000];
    memset(val, 'v', sizeof val);
    uint64_t n = fill_until_full(m, val);
    assert_true(n > 5000);
    static const unsigned deleted[] = {100, 1000};
    uint64_t next = n + 1000000; /* new keys from here on */
    uint64_t base = 0;
    for (size_t r = 0; r < 2; r++) {
        for (unsigned i = 0; i < deleted[r]; i++) {
            char key[32];
            int kl = key16(base + i, key);
            assert_int_equal(shmobj_map_del(m, key, (size_t)kl), 0);
        }
        base += deleted[r];
        unsigned ok = 0;
        for (unsigned i = 0; i < 50; i++) {
            char key[32];
            int kl = key16(next++, key);
            if (shmobj_map_set(m, key, (size_t)kl, val, 1000) == 0)
                ok++;
        }
        if (ok != 50)
            fail_msg("%u of 50 inserts after %u of %llu values deleted", ok,
                     deleted[r], (unsigned long long)n);
        assert_int_equal(shmobj_map_check(m), 0);
    }
    /* the keys not deleted are all there */
    char got[1000];
    for (uint64_t i = base; i < n; i++) {
        char key[32];
        int kl = key16(i, key);
        assert_int_equal(shmobj_map_get(m, key, (size_t)kl, got, sizeof got, NULL), 0);
    }
    shmobj_map_close(m);
    shmobj_segment_close(f.seg);
    shmobj_segment_destroy(f.name, SHMOBJ_BACKEND_SHM);
}

/* Fill until 16 keys in a row (of different shards) find no room: a
 * failure may be one shard's table growth while entries still fit. Keys
 * 0..*next-1 were tried (not all went in). */
static void fill_strict(shmobj_map *m, const char *val, uint64_t *next)
{
    uint64_t k = 0;
    for (unsigned fails = 0; fails < 16; k++) {
        char key[32];
        int kl = key16(k, key);
        int rc = shmobj_map_set(m, key, (size_t)kl, val, 1000);
        if (rc == SHMOBJ_ENOMEM) {
            fails++;
            continue;
        }
        assert_int_equal(rc, 0);
        fails = 0;
    }
    *next = k;
}

/* A reader's guard holds what was retired after it: the failing insert
 * waits for it only a bounded time, then says SHMOBJ_ENOMEM; once the
 * guard is released the room comes back. */
static void test_map_full_segment_guard_held_bounded_enomem(void **state)
{
    (void)state;
    struct fixture f = {0};
    shmobj_map *m;
    seg_make(&f, 8 * MiB, 8 * MiB);
    assert_int_equal(shmobj_map_create(f.seg, "m", &m), 0);
    char val[1000];
    memset(val, 'w', sizeof val);
    uint64_t n;
    fill_strict(m, val, &n);
    char key[32];
    int kl = key16(0, key);
    shmobj_map_view v;
    assert_int_equal(shmobj_map_get_view(m, key, (size_t)kl, &v), 0);
    for (unsigned i = 1, gone = 0; gone < 200; i++) {
        kl = key16(i, key);
        int rc = shmobj_map_del(m, key, (size_t)kl);
        assert_true(rc == 0 || rc == SHMOBJ_ENOTFOUND);
        gone += rc == 0;
    }
    kl = key16(n + 5, key);
    assert_int_equal(shmobj_map_set(m, key, (size_t)kl, val, 1000), SHMOBJ_ENOMEM);
    shmobj_map_view_release(&v);
    unsigned ok = 0;
    for (unsigned i = 0; i < 50; i++) {
        kl = key16(n + 10 + i, key);
        if (shmobj_map_set(m, key, (size_t)kl, val, 1000) == 0)
            ok++;
    }
    assert_int_equal(ok, 50);
    assert_int_equal(shmobj_map_check(m), 0);
    shmobj_map_close(m);
    shmobj_segment_close(f.seg);
    shmobj_segment_destroy(f.name, SHMOBJ_BACKEND_SHM);
}

/* ---- handles outlive their segment (issue 29, defect 7) --------------- */

enum close_kind { CK_SEG, CK_MAP, CK_ITER, CK_VIEW, CK_COUNT };

static uint32_t attached_now(shmobj_segment *obs)
{
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(obs, &info), 0);
    return info.attached;
}

/* What a handle still open answers once its segment handle is closed:
 * SHMOBJ_ESTALE to everything but its close, and a view's bytes stay
 * readable until it is released. */
static void expect_stale(shmobj_map *m, shmobj_map_iter *it,
                         const shmobj_map_view *v)
{
    char buf[64];
    const void *k, *val;
    size_t kl, vl;
    if (m != NULL) {
        assert_int_equal(shmobj_map_get(m, "k1", 2, buf, sizeof buf, NULL), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_contains(m, "k1", 2), SHMOBJ_ESTALE);
        shmobj_map_get_req req = {.key = "k2", .key_len = 2, .buf = buf, .buf_len = sizeof buf};
        assert_int_equal(shmobj_map_get_many(m, &req, 1), 0);
        assert_int_equal(req.status, SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_set(m, "k9", 2, "x", 1), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_del(m, "k1", 2), SHMOBJ_ESTALE);
        int64_t r;
        assert_int_equal(shmobj_map_add(m, "n", 1, 1, &r), SHMOBJ_ESTALE);
        uint64_t n;
        assert_int_equal(shmobj_map_count(m, &n), SHMOBJ_ESTALE);
        assert_int_equal(shmobj_map_check(m), SHMOBJ_ESTALE);
        shmobj_map_view v2;
        assert_int_equal(shmobj_map_get_view(m, "k1", 2, &v2), SHMOBJ_ESTALE);
        shmobj_map_iter *it2;
        assert_int_equal(shmobj_map_iter_open(m, &it2), SHMOBJ_ESTALE);
    }
    if (it != NULL)
        assert_int_equal(shmobj_map_iter_next(it, &k, &kl, &val, &vl), SHMOBJ_ESTALE);
    if (v != NULL) {
        assert_int_equal(v->value_len, 8);
        assert_memory_equal(v->value, "value-k0", 8);
    }
}

/* Close a segment, a map, a cursor and a view in each of the 24 orders:
 * nothing reads freed memory (the old order segment-then-map did, and
 * crashed), the handles left answer SHMOBJ_ESTALE once the segment is
 * closed, and the segment stays attached exactly until the last of them
 * is closed. */
static void test_map_close_orders_every_handle_kind(void **state)
{
    (void)state;
    struct fixture f = {0};
    seg_make(&f, 4 * MiB, 4 * MiB);
    shmobj_segment *obs = f.seg; /* an observer handle, closed last */
    char name[96];
    memcpy(name, f.name, sizeof name);
    {
        shmobj_map *m;
        assert_int_equal(shmobj_map_create(obs, "m", &m), 0);
        for (int i = 0; i < 100; i++) {
            char key[16], val[16];
            snprintf(key, sizeof key, "k%d", i);
            snprintf(val, sizeof val, "value-k%d", i);
            assert_int_equal(shmobj_map_set(m, key, strlen(key), val, strlen(val)), 0);
        }
        shmobj_map_close(m);
    }
    for (unsigned perm = 0; perm < 24; perm++) {
        /* the perm-th order of the four kinds (Lehmer code) */
        unsigned order[CK_COUNT], pool[CK_COUNT] = {CK_SEG, CK_MAP, CK_ITER, CK_VIEW};
        unsigned left = CK_COUNT, code = perm;
        for (unsigned i = 0; i < CK_COUNT; i++) {
            unsigned fact = 1;
            for (unsigned j = 2; j < left; j++)
                fact *= j;
            unsigned pick = code / fact;
            code %= fact;
            order[i] = pool[pick];
            for (unsigned j = pick; j + 1 < left; j++)
                pool[j] = pool[j + 1];
            left--;
        }
        shmobj_segment *seg = NULL;
        assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &seg), 0);
        assert_int_equal(attached_now(obs), 2);
        shmobj_map *m = NULL;
        assert_int_equal(shmobj_map_open(seg, "m", &m), 0);
        shmobj_map_iter *it = NULL;
        assert_int_equal(shmobj_map_iter_open(m, &it), 0);
        const void *k, *val;
        size_t kl, vl;
        assert_int_equal(shmobj_map_iter_next(it, &k, &kl, &val, &vl), 0);
        shmobj_map_view v;
        assert_int_equal(shmobj_map_get_view(m, "k0", 2, &v), 0);
        bool seg_closed = false, view_held = true;
        for (unsigned i = 0; i < CK_COUNT; i++) {
            switch (order[i]) {
            case CK_SEG:
                shmobj_segment_close(seg);
                seg_closed = true;
                break;
            case CK_MAP:
                shmobj_map_close(m);
                m = NULL;
                break;
            case CK_ITER:
                shmobj_map_iter_close(it);
                it = NULL;
                break;
            case CK_VIEW:
                shmobj_map_view_release(&v);
                view_held = false;
                break;
            }
            bool any_left = i + 1 < CK_COUNT;
            if (seg_closed) {
                expect_stale(m, it, view_held ? &v : NULL);
                /* attached while anything of it is open */
                assert_int_equal(attached_now(obs), any_left ? 2 : 1);
            } else {
                assert_int_equal(attached_now(obs), 2);
            }
        }
        /* every reader slot was given back: the map opens as often as
         * there are slots */
        shmobj_map *h[SHMOBJ_MAP_HANDLES_MAX];
        unsigned got = 0;
        while (got < SHMOBJ_MAP_HANDLES_MAX && shmobj_map_open(obs, "m", &h[got]) == 0)
            got++;
        assert_int_equal(got, SHMOBJ_MAP_HANDLES_MAX);
        while (got > 0)
            shmobj_map_close(h[--got]);
    }
    shmobj_segment_close(obs);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* ---- stalled processes at every step (issue 29) ---------------------- */

#include "test-stall.h"

#define STALL_KEYS 6000u   /* keys of each worker */
#define STALL_OPS 12000u   /* operations of each worker */
#define STALL_WORKERS_MAX 4

/* What a worker knows was acknowledged: per key of its own, 0 (absent)
 * or the version its last acknowledged set stored. One writer per key,
 * read by the parent after every worker ended. */
struct stall_model {
    uint64_t ver[STALL_WORKERS_MAX][STALL_KEYS];
    uint64_t done[STALL_WORKERS_MAX]; /* operations completed */
    uint32_t ready;                    /* workers at the start line */
};

#define STALL_HOT 32u /* keys every worker changes often, others read */

struct stall_val {
    uint64_t id;   /* worker << 32 | key */
    uint64_t ver;
    uint64_t sum;  /* mixes both: a torn or foreign value does not match */
    char pad[40];  /* 64 bytes: still the hot path's size */
};

static uint64_t stall_sum(uint64_t id, uint64_t ver)
{
    uint64_t x = id * 0x9e3779b97f4a7c15ULL ^ ver * 0xc2b2ae3d27d4eb4fULL;
    return x ^ (x >> 29);
}

/* Keys of every third key of a worker are longer than the hot path's, so
 * the general path and the guarded one are walked too. */
static size_t stall_key(unsigned w, unsigned j, char *key)
{
    if (j % 3 == 0)
        return (size_t)sprintf(key, "stall-key-of-worker-%u-number-%u-which-is-longer-than-sixty-four-bytes", w, j);
    return (size_t)sprintf(key, "s%u.%u", w, j);
}

static void stall_value(unsigned w, unsigned j, uint64_t ver, struct stall_val *v)
{
    memset(v, 0, sizeof *v);
    v->id = (uint64_t)w << 32 | j;
    v->ver = ver;
    v->sum = stall_sum(v->id, ver);
}

/* A value read for key (w, j): its own, whole. */
static bool stall_value_ok(const void *p, size_t len, unsigned w, unsigned j)
{
    struct stall_val v;
    if (len != sizeof v)
        return false;
    memcpy(&v, p, sizeof v);
    return v.id == ((uint64_t)w << 32 | j) && v.sum == stall_sum(v.id, v.ver) && v.ver != 0;
}

struct stall_job {
    struct fixture *f;
    struct stall_model *model;
    unsigned w, workers;
    const char *step; /* armed in this worker, or NULL */
    unsigned nth;
    int pin;          /* pin to CPU 0 */
    uint64_t seed;
};

static int stall_worker(void *p)
{
    struct stall_job *job = p;
    if (job->pin)
        test_stall_pin(0);
    shmobj_segment *seg;
    shmobj_map *m = child_open(job->f, &seg);
    if (m == NULL)
        return 10;
    uint64_t rs = job->seed;
    uint64_t *ver = job->model->ver[job->w];
    char key[128];
    struct stall_val v, got;
    /* Every hot key present, then all start together: a worker that ran
     * its whole loop before the others began would read nothing of
     * theirs (one CPU for all of them is the pinned case). */
    for (unsigned j = 0; j < STALL_HOT; j++) {
        size_t kl = stall_key(job->w, j, key);
        stall_value(job->w, j, 1, &v);
        if (shmobj_map_set(m, key, kl, &v, sizeof v) != 0)
            return 11;
        ver[j] = 1;
    }
    __atomic_fetch_add(&job->model->ready, 1, __ATOMIC_ACQ_REL);
    for (unsigned ms = 0; __atomic_load_n(&job->model->ready, __ATOMIC_ACQUIRE) < job->workers; ms++) {
        if (ms > 60000)
            return 12;
        test_sleep_ms(1);
    }
    if (job->step != NULL)
        test_stall_arm(job->step, job->nth, TEST_STALL_STOP, 0);
    for (unsigned op = 0; op < STALL_OPS; op++) {
        uint64_t r = test_xorshift(&rs);
        /* a quarter of the work on a few hot keys, so that a key a stopped
         * reader found is replaced, and its block freed and reused, while
         * it is stopped */
        unsigned j = (unsigned)((r & 3) == 0 ? (r >> 2) % STALL_HOT : (r >> 2) % STALL_KEYS);
        size_t kl = stall_key(job->w, j, key);
        unsigned what = (unsigned)(r >> 32) % 10;
        int rc;
        if (what < 5) { /* set: insert or replace */
            uint64_t nv = ver[j] + 1;
            stall_value(job->w, j, nv, &v);
            rc = shmobj_map_set(m, key, kl, &v, sizeof v);
            if (rc != 0)
                return 20;
            __atomic_store_n(&ver[j], nv, __ATOMIC_RELEASE);
        } else if (what < 7) { /* delete */
            rc = shmobj_map_del(m, key, kl);
            if (rc != (ver[j] ? 0 : SHMOBJ_ENOTFOUND))
                return 21;
            __atomic_store_n(&ver[j], 0, __ATOMIC_RELEASE);
        } else if (what < 8 && job->step == NULL) { /* own key: exactly the model */
            size_t vl = 0;
            rc = shmobj_map_get(m, key, kl, &got, sizeof got, &vl);
            if (ver[j] == 0 ? rc != SHMOBJ_ENOTFOUND
                            : rc != 0 || !stall_value_ok(&got, vl, job->w, j) ||
                                  got.ver != ver[j])
                return 22;
        } else { /* another worker's key: absent or its own whole value (the
                  * stopped worker reads only the others' hot keys, which
                  * change under it while it is stopped) */
            unsigned ow = (unsigned)(r >> 40) % job->workers;
            unsigned oj = (unsigned)(r >> 48) % ((r & 4) ? STALL_HOT : STALL_KEYS);
            if (job->step != NULL) {
                ow = 1 + (unsigned)(r >> 40) % (job->workers - 1);
                oj = (unsigned)(r >> 48) % STALL_HOT;
                what = 8 + (what & 1);
            }
            kl = stall_key(ow, oj, key);
            if (what == 8) {
                size_t vl = 0;
                rc = shmobj_map_get(m, key, kl, &got, sizeof got, &vl);
                if (rc != SHMOBJ_ENOTFOUND && (rc != 0 || !stall_value_ok(&got, vl, ow, oj)))
                    return 23;
            } else {
                shmobj_map_view mv;
                rc = shmobj_map_get_view(m, key, kl, &mv);
                if (rc == 0) {
                    bool ok = stall_value_ok(mv.value, mv.value_len, ow, oj) &&
                              mv.key_len == kl && memcmp(mv.key, key, kl) == 0;
                    shmobj_map_view_release(&mv);
                    if (!ok)
                        return 24;
                } else if (rc != SHMOBJ_ENOTFOUND) {
                    return 25;
                }
            }
        }
        __atomic_store_n(&job->model->done[job->w], op + 1, __ATOMIC_RELAXED);
    }
    test_stall_disarm();
    shmobj_map_close(m);
    shmobj_segment_close(seg);
    return 0;
}

/* Every acknowledged key present exactly once with its last value, the
 * others absent, and the map whole. */
static void stall_check(struct fixture *f, const struct stall_model *model,
                        unsigned workers)
{
    char key[128];
    struct stall_val got;
    uint64_t present = 0;
    for (unsigned w = 0; w < workers; w++)
        for (unsigned j = 0; j < STALL_KEYS; j++) {
            size_t kl = stall_key(w, j, key), vl = 0;
            int rc = shmobj_map_get(f->map, key, kl, &got, sizeof got, &vl);
            if (model->ver[w][j] == 0) {
                assert_int_equal(rc, SHMOBJ_ENOTFOUND);
            } else {
                assert_int_equal(rc, 0);
                assert_true(stall_value_ok(&got, vl, w, j));
                assert_int_equal(got.ver, model->ver[w][j]);
                present++;
            }
        }
    /* each present exactly once: the cursor returns each key once, so
     * counting every key it returns and matching the model is enough */
    uint8_t *seen = calloc(STALL_WORKERS_MAX * STALL_KEYS, 1);
    shmobj_map_iter *it;
    assert_int_equal(shmobj_map_iter_open(f->map, &it), 0);
    const void *k, *val;
    size_t kl, vl;
    uint64_t n = 0;
    while (shmobj_map_iter_next(it, &k, &kl, &val, &vl) == 0) {
        struct stall_val v;
        assert_int_equal(vl, sizeof v);
        memcpy(&v, val, sizeof v);
        unsigned w = (unsigned)(v.id >> 32), j = (unsigned)v.id;
        assert_true(w < workers && j < STALL_KEYS);
        assert_true(stall_value_ok(val, vl, w, j));
        assert_int_equal(seen[w * STALL_KEYS + j], 0);
        seen[w * STALL_KEYS + j] = 1;
        n++;
    }
    shmobj_map_iter_close(it);
    free(seen);
    assert_int_equal(n, present);
    uint64_t count = 0;
    assert_int_equal(shmobj_map_count(f->map, &count), 0);
    assert_int_equal(count, present);
    assert_int_equal(shmobj_map_check(f->map), 0);
}

/* One process stopped at `step` (its nth arrival) while the others go on
 * for a while, then resumed; the model checked once all ended. 1 when the
 * armed process reached the step, 0 when its work ended first (the rare
 * steps depend on how the processes interleave: the caller tries again
 * with another seed). */
static int stall_run(const char *step, unsigned nth, unsigned workers, int pin, unsigned attempt)
{
    struct fixture f = {0};
    /* small: the segment and every shard's table grow while they work */
    seg_make(&f, 1 * MiB, 256 * MiB);
    assert_int_equal(shmobj_map_create(f.seg, "m", &f.map), 0);
    struct stall_model *model = shared_page(sizeof *model);
    struct stall_job jobs[STALL_WORKERS_MAX];
    pid_t pids[STALL_WORKERS_MAX];
    for (unsigned w = 0; w < workers; w++) {
        jobs[w] = (struct stall_job){&f, model, w, workers, w == 0 ? step : NULL,
                                     nth, pin, 0x1234567ULL * (w + 1) + nth + 7919ULL * attempt};
        pids[w] = test_child_start(stall_worker, &jobs[w], 120);
    }
    int status = 0;
    int r = test_stall_wait_stopped(pids[0], 60000, &status);
    if (r < 0)
        fail_msg("step %s: the armed worker did not stop in time", step);
    if (r == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
        fail_msg("step %s: the armed worker ended with status %#x", step, (unsigned)status);
    /* The others work meanwhile: 8,000 operations more, or to their end,
     * or until they stop making progress (they wait for a lock the
     * stopped one holds: it must be resumed well before their lock's
     * bound of some seconds), 3 s at most. */
    uint64_t before = 0, last = 0;
    for (unsigned w = 1; w < workers; w++)
        before += __atomic_load_n(&model->done[w], __ATOMIC_RELAXED);
    last = before;
    for (unsigned ms = 0, idle = 0; ms < 3000 && idle < 300; ms++) {
        uint64_t now = 0;
        unsigned ended = 0;
        for (unsigned w = 1; w < workers; w++) {
            uint64_t d = __atomic_load_n(&model->done[w], __ATOMIC_RELAXED);
            now += d;
            ended += d == STALL_OPS;
        }
        if (now >= before + 8000 || ended == workers - 1)
            break;
        idle = now == last ? idle + 1 : 0;
        last = now;
        test_sleep_ms(1);
    }
    if (r == 1)
        test_stall_resume(pids[0]);
    for (unsigned w = r == 1 ? 0 : 1; w < workers; w++) {
        int rc = test_child_wait(pids[w]);
        if (rc != 0)
            fail_msg("step %s: worker %u exited with %d", step, w, rc);
    }
    stall_check(&f, model, workers);
    munmap(model, sizeof *model);
    shmobj_map_close(f.map);
    shmobj_segment_close(f.seg);
    shmobj_segment_destroy(f.name, SHMOBJ_BACKEND_SHM);
    return r == 1;
}

/* stall_run() until the armed process reached the step, 4 tries. */
static void stall_step(const char *step, unsigned nth, unsigned workers, int pin)
{
    for (unsigned attempt = 0; attempt < 4; attempt++)
        if (stall_run(step, nth, workers, pin, attempt))
            return;
    fail_msg("step %s: never reached in 4 runs", step);
}

/* Every step of the map's protocols with its arrival to stop at: often
 * reached steps later (in the middle of the work), rare ones first. */
static const struct {
    const char *step;
    unsigned nth;
} map_steps[] = {
    {"map.get.fast_found", 50},    {"map.get.fast_copied", 50},
    {"map.get.guarded_found", 50}, {"map.get.guarded_copied", 50},
    {"map.guard.counted", 100},    {"map.set.entry_written", 300},
    {"map.set.intent", 300},       {"map.set.replaced", 200},
    {"map.insert.linked", 200},    {"map.del.intent", 100},
    {"map.del.erased", 100},       {"map.grow.built", 1},
    {"map.grow.published", 1},    {"map.retire.linked", 200},
    {"map.reclaim.freeing", 1},    {"map.epoch.scanned", 1},
};

static void test_map_stall_every_step(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof map_steps / sizeof map_steps[0]; i++)
        stall_step(map_steps[i].step, map_steps[i].nth, 3, 0);
}

/* The same with four processes on one CPU. */
static void test_map_stall_every_step_pinned(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof map_steps / sizeof map_steps[0]; i++)
        stall_step(map_steps[i].step, map_steps[i].nth, 4, 1);
}

/* A full map: workers delete and insert 1,000-byte values, so a set that
 * finds no room reclaims what was retired; one stopped inside that
 * reclaim, holding a shard's lock, while the others go on. Every
 * acknowledged change is there once resumed, nothing else. */
#define RECL_KEYS 12000u

struct recl_model {
    uint64_t ver[RECL_KEYS]; /* 0: absent */
    uint64_t done[STALL_WORKERS_MAX];
    uint32_t ready;
};

static void recl_value(uint64_t i, uint64_t ver, char *v)
{
    memset(v, (int)(i + ver), 1000);
    uint64_t w[3] = {i, ver, stall_sum(i, ver)};
    memcpy(v, w, sizeof w);
}

static bool recl_value_ok(const char *v, size_t len, uint64_t i, uint64_t ver)
{
    char want[1000];
    recl_value(i, ver, want);
    return len == 1000 && memcmp(v, want, 1000) == 0;
}

struct recl_job {
    struct fixture *f;
    struct recl_model *model;
    unsigned w, workers;
    uint64_t n;
    const char *step;
};

static int recl_worker(void *p)
{
    struct recl_job *job = p;
    shmobj_segment *seg;
    shmobj_map *m = child_open(job->f, &seg);
    if (m == NULL)
        return 10;
    __atomic_fetch_add(&job->model->ready, 1, __ATOMIC_ACQ_REL);
    for (unsigned ms = 0; __atomic_load_n(&job->model->ready, __ATOMIC_ACQUIRE) < job->workers; ms++) {
        if (ms > 60000)
            return 12;
        test_sleep_ms(1);
    }
    if (job->step != NULL)
        test_stall_arm(job->step, 1, TEST_STALL_STOP, 0);
    uint64_t rs = 0x9876543ULL + job->w;
    char key[32], v[1000];
    for (unsigned op = 0; op < 600; op++) {
        uint64_t i = test_xorshift(&rs) % job->n;
        i -= i % job->workers;
        i += job->w; /* the worker's own keys */
        if (i >= job->n)
            continue;
        int kl = key16(i, key);
        uint64_t *ver = &job->model->ver[i];
        if (*ver != 0) {
            if (shmobj_map_del(m, key, (size_t)kl) != 0)
                return 20;
            __atomic_store_n(ver, 0, __ATOMIC_RELEASE);
        }
        /* a key of another worker's, deleted meanwhile, may have taken
         * the room: ENOMEM is an answer, not an acknowledgement */
        uint64_t nv = op + 2;
        recl_value(i, nv, v);
        int rc = shmobj_map_set(m, key, (size_t)kl, v, 1000);
        if (rc == 0)
            __atomic_store_n(ver, nv, __ATOMIC_RELEASE);
        else if (rc != SHMOBJ_ENOMEM)
            return 21;
        __atomic_store_n(&job->model->done[job->w], op + 1, __ATOMIC_RELAXED);
    }
    test_stall_disarm();
    shmobj_map_close(m);
    shmobj_segment_close(seg);
    return 0;
}

static void recl_run(unsigned workers)
{
    struct fixture f = {0};
    seg_make(&f, 4 * MiB, 4 * MiB);
    assert_int_equal(shmobj_map_create(f.seg, "m", &f.map), 0);
    struct recl_model *model = shared_page(sizeof *model);
    char key[32], v[1000];
    uint64_t n = 0;
    for (unsigned fails = 0; fails < 16 && n < RECL_KEYS; n++) {
        int kl = key16(n, key);
        recl_value(n, 1, v);
        int rc = shmobj_map_set(f.map, key, (size_t)kl, v, 1000);
        if (rc == SHMOBJ_ENOMEM) {
            fails++;
            continue;
        }
        assert_int_equal(rc, 0);
        fails = 0;
        model->ver[n] = 1;
    }
    assert_true(n < RECL_KEYS); /* full */
    struct recl_job jobs[STALL_WORKERS_MAX];
    pid_t pids[STALL_WORKERS_MAX];
    for (unsigned w = 0; w < workers; w++) {
        jobs[w] = (struct recl_job){&f, model, w, workers, n, w == 0 ? "map.reclaim.locked" : NULL};
        pids[w] = test_child_start(recl_worker, &jobs[w], 120);
    }
    int status = 0;
    int r = test_stall_wait_stopped(pids[0], 60000, &status);
    if (r != 1)
        fail_msg("map.reclaim.locked: the armed worker %s (status %#x)",
                 r == 0 ? "ended without reaching it" : "did not stop in time",
                 (unsigned)status);
    /* the others work until they wait for the lock it holds (or end) */
    uint64_t last = 0;
    for (unsigned ms = 0, idle = 0; ms < 3000 && idle < 300; ms++) {
        uint64_t now = 0;
        for (unsigned w = 1; w < workers; w++)
            now += __atomic_load_n(&model->done[w], __ATOMIC_RELAXED);
        idle = now == last ? idle + 1 : 0;
        last = now;
        test_sleep_ms(1);
    }
    if (r == 1)
        test_stall_resume(pids[0]);
    for (unsigned w = r == 1 ? 0 : 1; w < workers; w++) {
        int rc = test_child_wait(pids[w]);
        if (rc != 0)
            fail_msg("map.reclaim.locked: worker %u exited with %d", w, rc);
    }
    uint64_t present = 0;
    for (uint64_t i = 0; i < n; i++) {
        int kl = key16(i, key);
        size_t vl = 0;
        int rc = shmobj_map_get(f.map, key, (size_t)kl, v, sizeof v, &vl);
        if (model->ver[i] == 0) {
            assert_int_equal(rc, SHMOBJ_ENOTFOUND);
        } else {
            assert_int_equal(rc, 0);
            assert_true(recl_value_ok(v, vl, i, model->ver[i]));
            present++;
        }
    }
    uint64_t count = 0;
    assert_int_equal(shmobj_map_count(f.map, &count), 0);
    assert_int_equal(count, present);
    assert_int_equal(shmobj_map_check(f.map), 0);
    munmap(model, sizeof *model);
    shmobj_map_close(f.map);
    shmobj_segment_close(f.seg);
    shmobj_segment_destroy(f.name, SHMOBJ_BACKEND_SHM);
}

static void test_map_stall_reclaim_when_full(void **state)
{
    (void)state;
    recl_run(3);
}

/* A shard left inside a writer's section (its seq odd) with no live
 * process holding its lock: a read-only handle, which may not repair it,
 * says SHMOBJ_EBUSY at once instead of waiting out its 10 s bound (no
 * writer will ever end that section); a writable handle repairs it. */
static void test_map_readonly_reader_gives_up_at_once_on_a_dead_section(void **state)
{
    struct fixture *f = *state;
    char buf[16];
    assert_int_equal(shmobj_map_set(f->map, "d7", 2, "v", 1), 0);
    struct shmobj__map_ctl *c = shmobj__map_control(f->map);
    uint64_t h = shmobj_htcore_hash64("d7", 2, c->seed);
    struct shmobj__map_shard *sh = &c->shards_[h >> SHMOBJ__MAP_SHARD_SHIFT];
    atomic_fetch_add(&sh->seq, 1); /* odd: a section no live writer is in */
    shmobj_segment *ro;
    shmobj_map *rm;
    assert_int_equal(shmobj_segment_open_flags(f->name, SHMOBJ_BACKEND_SHM,
                                               SHMOBJ_SEGMENT_RDONLY, 0, &ro), 0);
    assert_int_equal(shmobj_map_open(ro, "m", &rm), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(shmobj_map_get(rm, "d7", 2, buf, sizeof buf, NULL), SHMOBJ_EBUSY);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (t1.tv_sec - t0.tv_sec > 5)
        fail_msg("the read-only get waited %lld s for a section nobody will end",
                 (long long)(t1.tv_sec - t0.tv_sec));
    shmobj_map_close(rm);
    shmobj_segment_close(ro);
    /* a writable handle's reader queues on the lock, repairs, and reads */
    size_t len = 0;
    assert_int_equal(shmobj_map_get(f->map, "d7", 2, buf, sizeof buf, &len), 0);
    assert_int_equal(len, 1);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        kill_rounds = (unsigned)strtoul(argv[1], NULL, 10);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_map_set_get_basic, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_get_every_key_and_value_length, setup_small,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_map_set_many_matches_single_sets, setup_small,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_map_get_many_matches_single_gets, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_view_survives_replace, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_random_vs_reference, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_two_procs_million_keys, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_map_growth_across_processes, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_map_iterate_under_concurrent_writes, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_get_while_values_are_replaced, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_threads_shared_handle_get_while_replaced_and_grown, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_add_two_procs_no_lost_increment, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_threads_writers_lose_nothing, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_kill_writer_loop, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_map_kill_batch_writer_loop, setup_big, teardown),
        cmocka_unit_test(test_map_too_large_enomem),
        cmocka_unit_test(test_map_full_segment_gives_room_back),
        cmocka_unit_test(test_map_full_segment_guard_held_bounded_enomem),
        cmocka_unit_test(test_map_close_orders_every_handle_kind),
        cmocka_unit_test(test_map_stall_every_step),
        cmocka_unit_test(test_map_stall_every_step_pinned),
        cmocka_unit_test(test_map_stall_reclaim_when_full),
        cmocka_unit_test_setup_teardown(test_map_damaged_table_ecorrupt, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_get_entry_at_mapping_end_bounded, setup_small,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_map_calls_on_destroyed_map_estale, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_iter_moves_past_damaged_shard, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_limbo_cycle_walks_bounded, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_open_other_kind_etype, setup_small, teardown),
        cmocka_unit_test(test_map_stats_count_every_block),
        cmocka_unit_test_setup_teardown(test_map_open_many_handles_from_processes, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_repair_of_deep_free_spares_reused_blocks, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_map_readonly_reader_gives_up_at_once_on_a_dead_section,
                                        setup_small, teardown),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
