/* Fuzz target for the map's readers of untrusted segment bytes: get,
 * contains, views, iteration, count and the full check.
 *
 * A map with a few hundred keys is built once in a memfd segment and its
 * bytes are saved. Each input is a list of edits, each one naming a region
 * of the map (the control block except its mutexes, a shard's table, an
 * entry), an offset in it and up to 16 bytes to write there. After the
 * edits every reader runs; then the saved bytes are put back. Properties
 * (abort on violation): nothing crashes or reads outside the mapping, and
 * every call returns 0 or one of the codes its documentation lists
 * (SHMOBJ_ENOTFOUND, SHMOBJ_ECORRUPT); a key read back whole has the value
 * that was stored, or a damaged one of a length inside its block.
 *
 * The mutexes are not edited: a lock word of garbage may legitimately block
 * for ever, which no reader takes but check() does.
 *
 * Built with libFuzzer (-fsanitize=fuzzer) and, with -DFUZZ_STANDALONE, as
 * a plain program running N random inputs (argument: N, default 2000) or
 * replaying the files it is given. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
struct shmobj__map_ctl *shmobj__map_control(shmobj_map *map);

struct region {
    uint8_t *p;
    size_t len;
};

static shmobj_segment *seg;
static shmobj_map *map;
static uint8_t *saved;
static size_t saved_len;
static struct region regions[4 * KEYS + 64 * 3 + 8];
static size_t nregions;

static void expect(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz-map: property violated: %s\n", what);
        abort();
    }
}

static int key_of(int i, char *key)
{
    return sprintf(key, "fuzz-key-%d%.*s", i, i % 23, "abcdefghijklmnopqrstuvw");
}

static void add_region(void *p, size_t len)
{
    if (len > 0 && nregions < sizeof regions / sizeof regions[0]) {
        regions[nregions].p = p;
        regions[nregions].len = len;
        nregions++;
    }
}

static void setup(void)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.initial_size = 2u << 20;
    o.max_size = 2u << 20;
    if (shmobj_segment_create("fuzz-map", &o, &seg) != 0 ||
        shmobj_map_create(seg, "m", &map) != 0) {
        fprintf(stderr, "fuzz-map: set-up failed\n");
        exit(1);
    }
    for (int i = 0; i < KEYS; i++) {
        char key[64];
        uint64_t v[3] = {(uint64_t)i, (uint64_t)i * 3, (uint64_t)i * 5};
        int kl = key_of(i, key);
        /* values of 8 bytes (add) and 24 bytes */
        if (shmobj_map_set(map, key, (size_t)kl, v, (i & 1) ? 8 : 24) != 0)
            exit(1);
    }
    for (int i = 0; i < KEYS; i += 7) {
        char key[64];
        int kl = key_of(i, key);
        if (shmobj_map_del(map, key, (size_t)kl) != 0)
            exit(1);
    }
    /* Regions: control block header and reader slots, each shard's fields
     * after its mutex, each table, each entry. */
    struct shmobj__map_ctl *c = shmobj__map_control(map);
    add_region(c, offsetof(struct shmobj__map_ctl, shards_));
    for (unsigned s = 0; s < SHMOBJ__MAP_SHARDS; s++) {
        struct shmobj__map_shard *sh = &c->shards_[s];
        void *p;
        size_t n;
        add_region((uint8_t *)sh + offsetof(struct shmobj__map_shard, seq),
                   sizeof *sh - offsetof(struct shmobj__map_shard, seq));
        if (shmobj_arena_ptr(seg, atomic_load(&sh->table), &p, &n) == 0)
            add_region(p, n);
    }
    for (int i = 0; i < KEYS; i++) {
        char key[64];
        shmobj_map_view v;
        int kl = key_of(i, key);
        if (shmobj_map_get_view(map, key, (size_t)kl, &v) == 0) {
            add_region((uint8_t *)(uintptr_t)v.key - SHMOBJ__MAP_ENTRY_HEADER,
                       (size_t)shmobj__map_entry_size((uint32_t)v.key_len,
                                                      (uint32_t)v.value_len));
            shmobj_map_view_release(&v);
        }
    }
    struct shmobj__space *sp = (struct shmobj__space *)seg;
    saved_len = (size_t)atomic_load(&sp->mapped);
    saved = malloc(saved_len);
    if (saved == NULL)
        exit(1);
    memcpy(saved, sp->base, saved_len);
}

static int status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_ENOTFOUND || rc == SHMOBJ_ECORRUPT;
}

static void exercise(void)
{
    for (int i = 0; i < KEYS; i++) {
        char key[64];
        uint64_t buf[4];
        size_t len = 0;
        shmobj_map_view v;
        int kl = key_of(i, key);
        int rc = shmobj_map_get(map, key, (size_t)kl, buf, sizeof buf, &len);
        expect(status_ok(rc) || rc == SHMOBJ_ENOBUFS, "get status");
        rc = shmobj_map_contains(map, key, (size_t)kl);
        expect(status_ok(rc), "contains status");
        rc = shmobj_map_get_view(map, key, (size_t)kl, &v);
        expect(status_ok(rc), "view status");
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
    char keys[KEYS][64];
    uint64_t bufs[KEYS][4];
    for (int i = 0; i < KEYS; i++) {
        reqs[i].key = keys[i];
        reqs[i].key_len = (size_t)key_of(i, keys[i]);
        reqs[i].buf = bufs[i];
        reqs[i].buf_len = sizeof bufs[i];
    }
    expect(shmobj_map_get_many(map, reqs, KEYS) == 0, "get_many");
    for (int i = 0; i < KEYS; i++)
        expect(status_ok(reqs[i].status) || reqs[i].status == SHMOBJ_ENOBUFS,
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
        expect(status_ok(rc), "iteration status");
        shmobj_map_iter_close(it);
    }
    uint64_t n;
    expect(shmobj_map_count(map, &n) == 0, "count");
    int rc = shmobj_map_check(map);
    expect(rc == 0 || rc == SHMOBJ_ECORRUPT, "check status");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (seg == NULL)
        setup();
    /* edits: u16 region, u32 offset, u8 length (0..15 -> 1..16), bytes */
    while (size >= 7) {
        size_t r = ((size_t)data[0] | (size_t)data[1] << 8) % nregions;
        size_t off = ((size_t)data[2] | (size_t)data[3] << 8 |
                      (size_t)data[4] << 16 | (size_t)data[5] << 24) % regions[r].len;
        size_t len = (size_t)(data[6] & 15) + 1;
        data += 7;
        size -= 7;
        if (len > size)
            len = size;
        if (len > regions[r].len - off)
            len = regions[r].len - off;
        memcpy(regions[r].p + off, data, len);
        data += len;
        size -= len;
    }
    exercise();
    struct shmobj__space *sp = (struct shmobj__space *)seg;
    memcpy(sp->base, saved, saved_len);
    return 0;
}

#ifdef FUZZ_STANDALONE
static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * UINT64_C(2685821657736338717);
}

static int run_file(const char *path)
{
    static uint8_t data[1 << 16];
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return 1;
    size_t n = fread(data, 1, sizeof data, f);
    fclose(f);
    return LLVMFuzzerTestOneInput(data, n);
}

int main(int argc, char **argv)
{
    if (argc > 1 && access(argv[1], R_OK) == 0) {
        for (int i = 1; i < argc; i++)
            if (run_file(argv[i]) != 0)
                return 1;
        return 0;
    }
    long runs = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
    uint8_t data[512];
    for (long i = 0; i < runs; i++) {
        /* 1..8 edits: small ones mostly, a few word-sized with values that
         * look like offsets, lengths or references */
        size_t n = 0;
        int edits = 1 + (int)(rnd() % 8);
        for (int e = 0; e < edits; e++) {
            uint64_t r = rnd(), w = rnd();
            data[n++] = (uint8_t)r;
            data[n++] = (uint8_t)(r >> 8);
            for (int b = 0; b < 4; b++)
                data[n++] = (uint8_t)(r >> (16 + 8 * b));
            int len = (int)(rnd() % 16) + 1;
            data[n++] = (uint8_t)(len - 1);
            switch (rnd() % 4) {
            case 0: w &= 0xff; break;            /* small number */
            case 1: w &= 0xfffff0; break;        /* offset-like */
            case 2: w = ~(uint64_t)0; break;     /* all ones */
            default: break;                      /* random */
            }
            for (int b = 0; b < len; b++)
                data[n++] = (uint8_t)(w >> (8 * (b % 8)));
        }
        if (LLVMFuzzerTestOneInput(data, n) != 0)
            return 1;
    }
    printf("fuzz-map: %ld inputs, no property violated\n", runs);
    return 0;
}
#endif
