/* Shared by the fuzz targets that damage a live structure in place (the map
 * and the queue): regions of its bytes, inputs that are lists of edits to
 * them, the segment's bytes saved and put back, and the driver that runs
 * random inputs without libFuzzer.
 *
 * An input is a list of edits: u16 region, u32 offset, u8 length (0..15 ->
 * 1..16), then that many bytes to write at the offset (both taken modulo
 * the region). A target defines fuzz_setup(), which builds its structure
 * in fuzz_segment(), registers its regions and saves the segment once
 * (fuzz_save()), and fuzz_exercise(), which runs its readers and checks
 * each property with fuzz_expect(). Per input, the edits are applied, the
 * readers run and the saved bytes are put back.
 *
 * FUZZ_NAME names the target in messages. With FUZZ_STANDALONE, main()
 * runs N random inputs (argument: N, default 2000) or replays the files it
 * is given. */
#ifndef SHMOBJ_FUZZ_EDITS_H
#define SHMOBJ_FUZZ_EDITS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shmobj.h"
#include "space.h"

#ifndef FUZZ_NAME
#error "define FUZZ_NAME before including fuzz-edits.h"
#endif
#ifndef FUZZ_REGIONS_MAX
#define FUZZ_REGIONS_MAX 64
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_expect(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "%s: property violated: %s\n", FUZZ_NAME, what);
        abort();
    }
}

static void fuzz_die(const char *what)
{
    fprintf(stderr, "%s: %s\n", FUZZ_NAME, what);
    exit(1);
}

/* The bound of one input's exercise in the targets whose readers take
 * locks: far above what an exercise takes, far below the 10 s a live
 * holder is waited for. */
#define FUZZ_EXERCISE_MAX_NS (3 * 1000000000ll)

static inline long long fuzz_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static shmobj_segment *fuzz_seg;

/* The segment a target builds its structure in: 2 MiB of memfd, fixed. */
static inline shmobj_segment *fuzz_segment(void)
{
    shmobj_segment *seg;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.initial_size = 2u << 20;
    o.max_size = 2u << 20;
    if (shmobj_segment_create(FUZZ_NAME, &o, &seg) != 0)
        fuzz_die("no segment");
    fuzz_seg = seg;
    return seg;
}

static uint8_t *fuzz_saved;
static size_t fuzz_saved_len;

/* Keep a copy of every byte the segment maps. */
static void fuzz_save(void)
{
    struct shmobj__space *sp = shmobj__space_of_seg(fuzz_seg);
    fuzz_saved_len = (size_t)atomic_load(&sp->mapped);
    fuzz_saved = malloc(fuzz_saved_len);
    if (fuzz_saved == NULL)
        fuzz_die("out of memory");
    memcpy(fuzz_saved, sp->base, fuzz_saved_len);
}

static void fuzz_restore(void)
{
    memcpy((shmobj__space_of_seg(fuzz_seg))->base, fuzz_saved, fuzz_saved_len);
}

struct fuzz_region {
    uint8_t *p;
    size_t len;
};

static struct fuzz_region fuzz_regions[FUZZ_REGIONS_MAX];
static size_t fuzz_nregions;

static void fuzz_region_add(void *p, size_t len)
{
    if (len > 0 && fuzz_nregions < FUZZ_REGIONS_MAX) {
        fuzz_regions[fuzz_nregions].p = p;
        fuzz_regions[fuzz_nregions].len = len;
        fuzz_nregions++;
    }
}

static void fuzz_edits_apply(const uint8_t *data, size_t size)
{
    while (size >= 7 && fuzz_nregions > 0) {
        size_t r = ((size_t)data[0] | (size_t)data[1] << 8) % fuzz_nregions;
        const struct fuzz_region *g = &fuzz_regions[r];
        size_t off = ((size_t)data[2] | (size_t)data[3] << 8 |
                      (size_t)data[4] << 16 | (size_t)data[5] << 24) % g->len;
        size_t len = (size_t)(data[6] & 15) + 1;
        data += 7;
        size -= 7;
        if (len > size)
            len = size;
        if (len > g->len - off)
            len = g->len - off;
        memcpy(g->p + off, data, len);
        data += len;
        size -= len;
    }
}

/* The target's own parts: build the structure in fuzz_segment(), register
 * its regions and fuzz_save(); run every reader with fuzz_expect(). */
static void fuzz_setup(void);
static void fuzz_exercise(void);
/* With FUZZ_CHECK_RESTORED, the target's fuzz_check_restored() runs after
 * each input's bytes are put back: the structure must work as before. */
#ifdef FUZZ_CHECK_RESTORED
static void fuzz_check_restored(void);
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fuzz_seg == NULL)
        fuzz_setup();
    fuzz_edits_apply(data, size);
    fuzz_exercise();
    fuzz_restore();
#ifdef FUZZ_CHECK_RESTORED
    fuzz_check_restored();
#endif
    return 0;
}

#ifdef FUZZ_STANDALONE
#include "test-util.h"
static uint64_t fuzz_rng = 0x9e3779b97f4a7c15u;
static uint64_t fuzz_rnd(void)
{
    return test_xorshift(&fuzz_rng);
}

static int fuzz_run_file(const char *path)
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
            if (fuzz_run_file(argv[i]) != 0)
                return 1;
        return 0;
    }
    long runs = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
    uint8_t data[512];
    for (long i = 0; i < runs; i++) {
        /* 1..8 edits: small ones mostly, a few word-sized with values that
         * look like offsets, lengths or references */
        size_t n = 0;
        int edits = 1 + (int)(fuzz_rnd() % 8);
        for (int e = 0; e < edits; e++) {
            uint64_t r = fuzz_rnd(), w = fuzz_rnd();
            data[n++] = (uint8_t)r;
            data[n++] = (uint8_t)(r >> 8);
            for (int b = 0; b < 4; b++)
                data[n++] = (uint8_t)(r >> (16 + 8 * b));
            int len = (int)(fuzz_rnd() % 16) + 1;
            data[n++] = (uint8_t)(len - 1);
            switch (fuzz_rnd() % 4) {
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
    printf("%s: %ld inputs, no property violated\n", FUZZ_NAME, runs);
    return 0;
}
#endif

#endif /* SHMOBJ_FUZZ_EDITS_H */
