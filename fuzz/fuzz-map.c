/* Fuzz target for the map's readers of untrusted segment bytes: get,
 * contains, views, iteration, count, statistics and the full check; then
 * its writers on the same bytes (set, delete, add, clear, a second
 * handle's open), after which the heap must pass its own check.
 *
 * A map with a few hundred keys is built once in a memfd segment and its
 * bytes are saved. Each input is a list of edits, each one naming a region
 * of the map (the control block, a shard's lock word, a shard's table, an
 * entry), an offset in it and up to 16 bytes to write there. After the
 * edits every reader runs; then the saved bytes are put back. Properties
 * (abort on violation): nothing crashes or reads outside the mapping, and
 * every call returns 0 or one of the codes its documentation lists
 * (SHMOBJ_ENOTFOUND, SHMOBJ_ECORRUPT); a key read back whole has the value
 * that was stored, or a damaged one of a length inside its block.
 *
 * The shard lock words are edited too (a region each): check() takes every
 * shard's lock, and the library's lock must refuse a word of garbage
 * (SHMOBJ_ECORRUPT) or take it over from a dead owner and repair the shard,
 * at once: the whole exercise must end within FUZZ_EXERCISE_MAX_NS. A word that
 * names a live handle of this process is set to 0 first: it is
 * indistinguishable from a lock held by that handle, which a locker rightly
 * waits for (10 s, then SHMOBJ_EBUSY).
 *
 * Built with libFuzzer (-fsanitize=fuzzer) and, with -DFUZZ_STANDALONE, as
 * a plain program (fuzz-edits.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "map-layout.h"
#include "shmobj.h"
#include "shmobj/map.h"
#include "space.h"

#define KEYS 300
#define FUZZ_NAME "fuzz-map"
#define FUZZ_REGIONS_MAX (4 * KEYS + 64 * 4 + 8)
#include "fuzz-edits.h"

struct shmobj__map_ctl *shmobj__map_control(shmobj_map *map);

static shmobj_segment *seg;
static shmobj_map *map;

/* Keys of 10 to 40 bytes, and every tenth one of over 64 (the get's
 * general path, as are its 96-byte values). */
#define KEY_MAX 128
#define LONG_KEY(i) ((i) % 10 == 3)
#define VALUE_WORDS 12
static int key_of(int i, char *key)
{
    if (LONG_KEY(i))
        return sprintf(key, "fuzz-long-key-%d-%070d", i, i);
    return sprintf(key, "fuzz-key-%d%.*s", i, i % 23, "abcdefghijklmnopqrstuvw");
}

static size_t value_len_of(int i)
{
    return LONG_KEY(i) ? VALUE_WORDS * 8 : (i & 1) ? 8 : 24;
}

static void fuzz_setup(void)
{
    seg = fuzz_segment();
    if (shmobj_map_create(seg, "m", &map) != 0)
        fuzz_die("set-up failed");
    for (int i = 0; i < KEYS; i++) {
        char key[KEY_MAX];
        uint64_t v[VALUE_WORDS];
        for (int w = 0; w < VALUE_WORDS; w++)
            v[w] = (uint64_t)i * (uint64_t)(2 * w + 1);
        int kl = key_of(i, key);
        /* values of 8 bytes (add), 24 bytes, and 96 with the long keys */
        if (shmobj_map_set(map, key, (size_t)kl, v, value_len_of(i)) != 0)
            fuzz_die("set-up failed");
    }
    for (int i = 0; i < KEYS; i += 7) {
        char key[KEY_MAX];
        int kl = key_of(i, key);
        if (shmobj_map_del(map, key, (size_t)kl) != 0)
            fuzz_die("set-up failed");
    }
    /* Regions: control block header and reader slots, each shard's lock
     * word, each shard's fields after its lock, each table, each entry. */
    struct shmobj__map_ctl *c = shmobj__map_control(map);
    fuzz_region_add(c, offsetof(struct shmobj__map_ctl, shards_));
    for (unsigned s = 0; s < SHMOBJ__MAP_SHARDS; s++)
        fuzz_region_add(&c->shards_[s].lock, 8);
    for (unsigned s = 0; s < SHMOBJ__MAP_SHARDS; s++) {
        struct shmobj__map_shard *sh = &c->shards_[s];
        void *p;
        size_t n;
        fuzz_region_add((uint8_t *)sh + offsetof(struct shmobj__map_shard, seq),
                   sizeof *sh - offsetof(struct shmobj__map_shard, seq));
        if (shmobj_arena_ptr(seg, atomic_load(&sh->table), &p, &n) == 0)
            fuzz_region_add(p, n);
    }
    for (int i = 0; i < KEYS; i++) {
        char key[KEY_MAX];
        shmobj_map_view v;
        int kl = key_of(i, key);
        if (shmobj_map_get_view(map, key, (size_t)kl, &v) == 0) {
            fuzz_region_add((uint8_t *)(uintptr_t)v.key - SHMOBJ__MAP_ENTRY_HEADER,
                       (size_t)shmobj__map_entry_size((uint32_t)v.key_len,
                                                      (uint32_t)v.value_len));
            shmobj_map_view_release(&v);
        }
    }
    fuzz_save();
}

static int status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_ENOTFOUND || rc == SHMOBJ_ECORRUPT;
}

/* Clear every shard lock word that names a live handle (see above). */
static void keep_locks_off_live(void)
{
    struct shmobj__space *sp = (struct shmobj__space *)seg;
    struct shmobj__map_ctl *c = shmobj__map_control(map);
    for (unsigned s = 0; s < SHMOBJ__MAP_SHARDS; s++) {
        _Atomic uint32_t *w = &c->shards_[s].lock.word;
        uint32_t owner = atomic_load(w) & UINT32_C(0x7fffffff);
        if (owner != 0 && sp->ops->live->owner_state(sp, owner) > 0)
            atomic_store(w, 0);
    }
}

/* The codes of a writer (set, del, add, clear) on a damaged map: nothing
 * else, and ENOTFOUND only from a delete. */
static int write_ok(int rc, int del)
{
    return rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ENOMEM || rc == SHMOBJ_ESTALE ||
           (del && rc == SHMOBJ_ENOTFOUND);
}

/* The writers on what the edits left: replaces, deletes, an insert, an
 * add, a second handle's open and get, and a clear; then the heap must
 * still pass its check (nothing freed twice, no block's header written
 * over). */
static void writers(void)
{
    for (int i = 1; i < KEYS; i += 37) {
        char key[KEY_MAX];
        uint64_t v[VALUE_WORDS] = {(uint64_t)i};
        int kl = key_of(i, key);
        fuzz_expect(write_ok(shmobj_map_set(map, key, (size_t)kl, v, value_len_of(i)), 0),
                    "set status");
        kl = key_of(i + 1, key);
        fuzz_expect(write_ok(shmobj_map_del(map, key, (size_t)kl), 1), "del status");
    }
    fuzz_expect(write_ok(shmobj_map_set(map, "a new key", 9, "new", 3), 0), "insert status");
    char key[KEY_MAX];
    int kl = key_of(5, key); /* an 8-byte value */
    int rc = shmobj_map_add(map, key, (size_t)kl, 1, NULL);
    fuzz_expect(write_ok(rc, 0) || rc == SHMOBJ_ETYPE, "add status");
    shmobj_map *m2;
    rc = shmobj_map_open(seg, "m", &m2);
    fuzz_expect(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_EVERSION ||
                    rc == SHMOBJ_ETYPE || rc == SHMOBJ_ENOTFOUND || rc == SHMOBJ_ESTALE,
                "open status");
    if (rc == 0) {
        uint64_t buf[VALUE_WORDS];
        size_t len;
        kl = key_of(2, key);
        rc = shmobj_map_get(m2, key, (size_t)kl, buf, sizeof buf, &len);
        fuzz_expect(status_ok(rc) || rc == SHMOBJ_ENOBUFS, "second handle's get status");
        shmobj_map_close(m2);
    }
    fuzz_expect(write_ok(shmobj_map_clear(map), 0), "clear status");
    uint64_t bad = 0;
    fuzz_expect(shmobj_arena_check(seg, &bad) == 0, "heap intact");
}

static void fuzz_exercise(void)
{
    keep_locks_off_live();
    long long t0 = fuzz_now_ns();
    for (int i = 0; i < KEYS; i++) {
        char key[KEY_MAX];
        uint64_t buf[VALUE_WORDS];
        size_t len = 0;
        shmobj_map_view v;
        int kl = key_of(i, key);
        int rc = shmobj_map_get(map, key, (size_t)kl, buf, sizeof buf, &len);
        fuzz_expect(status_ok(rc) || rc == SHMOBJ_ENOBUFS, "get status");
        rc = shmobj_map_contains(map, key, (size_t)kl);
        fuzz_expect(status_ok(rc), "contains status");
        rc = shmobj_map_get_view(map, key, (size_t)kl, &v);
        fuzz_expect(status_ok(rc), "view status");
        if (rc == 0) {
            /* touch every byte the view claims: ASan checks the bounds */
            volatile uint8_t sum = 0;
            for (size_t j = 0; j < v.value_len; j++)
                sum ^= ((const uint8_t *)v.value)[j];
            for (size_t j = 0; j < v.key_len; j++)
                sum ^= ((const uint8_t *)v.key)[j];
            (void)sum;
            shmobj_map_view_release(&v);
        }
    }
    /* the same lookups as batches */
    shmobj_map_get_req reqs[KEYS];
    char keys[KEYS][KEY_MAX];
    uint64_t bufs[KEYS][VALUE_WORDS];
    for (int i = 0; i < KEYS; i++) {
        reqs[i].key = keys[i];
        reqs[i].key_len = (size_t)key_of(i, keys[i]);
        reqs[i].buf = bufs[i];
        reqs[i].buf_len = sizeof bufs[i];
    }
    fuzz_expect(shmobj_map_get_many(map, reqs, KEYS) == 0, "get_many");
    for (int i = 0; i < KEYS; i++)
        fuzz_expect(status_ok(reqs[i].status) || reqs[i].status == SHMOBJ_ENOBUFS,
               "get_many status");
    shmobj_map_iter *it;
    if (shmobj_map_iter_open(map, &it) == 0) {
        const void *k, *val;
        size_t kl, vl;
        int rc, steps = 0;
        while ((rc = shmobj_map_iter_next(it, &k, &kl, &val, &vl)) == 0 && steps++ < 4 * KEYS) {
            volatile uint8_t sum = 0;
            for (size_t j = 0; j < kl; j++)
                sum ^= ((const uint8_t *)k)[j];
            for (size_t j = 0; j < vl; j++)
                sum ^= ((const uint8_t *)val)[j];
            (void)sum;
        }
        fuzz_expect(status_ok(rc), "iteration status");
        shmobj_map_iter_close(it);
    }
    uint64_t n;
    fuzz_expect(shmobj_map_count(map, &n) == 0, "count");
    int rc = shmobj_map_check(map);
    fuzz_expect(rc == 0 || rc == SHMOBJ_ECORRUPT, "check status");
    shmobj_map_stats st = {.struct_size = sizeof st};
    rc = shmobj_map_stats_get(map, &st);
    fuzz_expect(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE, "stats status");
    writers();
    fuzz_expect(fuzz_now_ns() - t0 < FUZZ_EXERCISE_MAX_NS, "bounded: no lock word waited on");
}
