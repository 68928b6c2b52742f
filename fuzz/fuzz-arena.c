/* Fuzz target for the arena's readers of untrusted heap bytes: the heap
 * check, statistics, lock-free reference checks and rebuild.
 *
 * Two input shapes, chosen by the first byte:
 *  - raw (even): the rest of the input is the arena (control block and
 *    heap) as is; bit 1 repairs the magic and heap start so the fuzzer gets
 *    past the first gate cheaply;
 *  - edited (odd): a valid arena is built by a short op sequence the input
 *    describes, then damaged by word edits the input describes.
 * The buffer is exactly `mapped` bytes of malloc'd memory, so ASan reports
 * any read outside [base, base + mapped). Properties (abort on violation):
 * nothing crashes; a check failure names an offset inside the mapping; after
 * a successful rebuild the check passes, and still passes after an alloc
 * and a free.
 *
 * Built twice: with libFuzzer (-fsanitize=fuzzer) and, with
 * -DFUZZ_STANDALONE, as a plain program that runs N random and mutated
 * inputs (argument: N, default 2000) or replays the files it is given. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "shmobj/error.h"

#define EDIT_HEAP 16384u
#define MAX_RAW (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void expect(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz-arena: property violated: %s\n", what);
        abort();
    }
}

static void exercise(uint8_t *buf, uint64_t mapped, const uint64_t *offs,
                     const uint16_t *gens, int n)
{
    uint64_t bad = UINT64_MAX, usable = 0;
    int rc = shmobj__arena_check(buf, mapped, 0, &bad);
    expect(rc == 0 || (rc == SHMOBJ_ECORRUPT && bad < mapped),
           "check reports an offset inside the mapping");
    shmobj_arena_stats st;
    memset(&st, 0, sizeof(st));
    st.struct_size = sizeof(st);
    if (shmobj__arena_stats(buf, mapped, 0, &st) == 0)
        expect(st.used_bytes + st.free_bytes == st.total_bytes || rc != 0,
               "stats add up on a clean heap");
    for (int i = 0; i < n; i++)
        (void)shmobj__arena_check_ref(buf, mapped, 0, offs[i], gens[i], &usable);

    if (shmobj__arena_rebuild(buf, mapped, 0) != 0)
        return;
    expect(shmobj__arena_check(buf, mapped, 0, &bad) == 0, "check after rebuild");
    uint64_t off;
    uint16_t gen;
    if (shmobj__arena_alloc(buf, mapped, 0, 48, 64, &off, &gen) == 0) {
        expect(shmobj__arena_check_ref(buf, mapped, 0, off, gen, &usable) == 0 &&
                   usable >= 48,
               "fresh block passes check_ref");
        memset(buf + off, 0x5a, 48);
        expect(shmobj__arena_check(buf, mapped, 0, &bad) == 0, "check after alloc");
        expect(shmobj__arena_free(buf, mapped, 0, off, gen) == 0, "free after alloc");
        expect(shmobj__arena_free(buf, mapped, 0, off, gen) == SHMOBJ_ESTALE,
               "double free is stale");
    }
    expect(shmobj__arena_check(buf, mapped, 0, &bad) == 0, "check after free");
}

static int run_raw(const uint8_t *data, size_t size)
{
    uint64_t cs = shmobj__arena_control_size();
    size_t len = size - 1;
    if (len > MAX_RAW)
        len = MAX_RAW;
    uint64_t mapped = cs + len;
    uint8_t *buf = malloc(mapped);
    if (buf == NULL)
        return 0;
    memset(buf, 0, cs);
    memcpy(buf, data + 1, len < cs ? len : cs);
    if (len > cs)
        memcpy(buf + cs, data + 1 + cs, len - cs);
    /* Bytes past the input (when shorter than the control block) stay 0. */
    if ((data[0] & 2) != 0) {
        uint64_t magic = UINT64_C(0x31414e52414d4853), hs = (cs + 15) & ~UINT64_C(15);
        memcpy(buf, &magic, 8);
        memcpy(buf + 8, &hs, 8);
    }
    uint64_t offs[4];
    uint16_t gens[4];
    for (int i = 0; i < 4; i++) {
        uint32_t x = 0;
        if (size >= (size_t)(4 * i + 5))
            memcpy(&x, data + size - 4 * (size_t)i - 4, 4);
        offs[i] = cs + (x % (len + 64)) - 16;
        gens[i] = (uint16_t)(x >> 16);
    }
    exercise(buf, mapped, offs, gens, 4);
    free(buf);
    return 0;
}

static int run_edited(const uint8_t *data, size_t size)
{
    uint64_t cs = shmobj__arena_control_size();
    uint64_t mapped = cs + EDIT_HEAP;
    uint8_t *buf = malloc(mapped);
    if (buf == NULL)
        return 0;
    memset(buf, 0, mapped);
    if (shmobj__arena_init(buf, mapped, 0, mapped) != 0)
        abort();
    enum { SLOTS = 32 };
    uint64_t offs[SLOTS];
    uint16_t gens[SLOTS];
    int n = 0;
    size_t pos = 1;
    size_t nops = size > 1 ? data[1] % 48u : 0;
    pos = 2;
    for (size_t k = 0; k < nops && pos < size; k++, pos++) {
        uint8_t b = data[pos];
        if ((b & 1) == 0 || n == 0) {
            if (n < SLOTS &&
                shmobj__arena_alloc(buf, mapped, 0, 1 + (uint64_t)b * 13u % 1500u,
                                    16u << ((b >> 5) & 3), &offs[n], &gens[n]) == 0)
                n++;
        } else {
            int i = (b >> 1) % n;
            expect(shmobj__arena_free(buf, mapped, 0, offs[i], gens[i]) == 0,
                   "free of a live block");
            offs[i] = offs[n - 1];
            gens[i] = gens[n - 1];
            n--;
        }
    }
    uint64_t bad;
    expect(shmobj__arena_check(buf, mapped, 0, &bad) == 0, "check of a built heap");
    uint64_t words = mapped / 8;
    for (; pos + 4 <= size; pos += 4) {
        uint64_t idx = ((uint64_t)data[pos] | (uint64_t)data[pos + 1] << 8) % words;
        uint8_t kind = data[pos + 2], val = data[pos + 3];
        uint64_t v;
        memcpy(&v, buf + idx * 8, 8);
        switch (kind & 3) {
        case 0: v ^= UINT64_C(1) << (val & 63); break;
        case 1: v = (uint64_t)val * 16u; break;
        case 2: v = n > 0 ? offs[val % n] - 16 + (kind >> 2) * 16u : cs + val * 16u; break;
        default: v = (uint64_t)val << (kind >> 2); break;
        }
        memcpy(buf + idx * 8, &v, 8);
    }
    exercise(buf, mapped, offs, gens, n);
    free(buf);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    return (data[0] & 1) == 0 ? run_raw(data, size) : run_edited(data, size);
}

#ifdef FUZZ_STANDALONE
#include "test-util.h"
static uint64_t rng = 0x2545f4914f6cdd1du;
static uint64_t rnd(void)
{
    return test_xorshift(&rng);
}

/* A raw arena image: a valid heap built here, so that mutations start from
 * something the check accepts. */
static size_t valid_raw(uint8_t *out, size_t cap)
{
    uint64_t cs = shmobj__arena_control_size();
    uint64_t mapped = cs + 4096 + rnd() % 8192;
    if (mapped + 1 > cap)
        return 0;
    /* Built in an aligned scratch heap (a mapping is page aligned), then
     * copied behind the selector byte of the input format. */
    static _Alignas(64) uint8_t buf[1 << 16];
    if (mapped > sizeof buf)
        return 0;
    memset(buf, 0, mapped);
    if (shmobj__arena_init(buf, mapped, 0, mapped) != 0)
        return 0;
    uint64_t off;
    uint16_t gen;
    for (int i = 0; i < 20; i++)
        if (shmobj__arena_alloc(buf, mapped, 0, 1 + rnd() % 500, 16, &off, &gen) == 0 &&
            (rnd() & 1))
            (void)shmobj__arena_free(buf, mapped, 0, off, gen);
    out[0] = 0;
    memcpy(out + 1, buf, mapped);
    return mapped + 1;
}

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return 1;
    static uint8_t data[MAX_RAW + 1];
    size_t n = fread(data, 1, sizeof(data), f);
    fclose(f);
    return LLVMFuzzerTestOneInput(data, n);
}

int main(int argc, char **argv)
{
    long iters = 2000;
    if (argc > 1) {
        char *end;
        long v = strtol(argv[1], &end, 10);
        if (*end != '\0') {
            for (int i = 1; i < argc; i++)
                if (run_file(argv[i]) != 0)
                    return 1;
            return 0;
        }
        iters = v;
    }
    static uint8_t data[65536];
    for (long it = 0; it < iters; it++) {
        size_t size;
        switch (it % 3) {
        case 0: /* edited heap: random op and edit bytes */
            size = 2 + rnd() % 256;
            for (size_t i = 0; i < size; i++)
                data[i] = (uint8_t)rnd();
            data[0] |= 1;
            break;
        case 1: /* valid raw image with a few random word edits */
            size = valid_raw(data, sizeof(data));
            if (size == 0)
                continue;
            for (int e = (int)(rnd() % 6); e > 0; e--) {
                size_t p = 1 + (rnd() % (size - 1)) / 8 * 8;
                if (p + 8 > size)
                    continue;
                uint64_t v = rnd() & 1 ? rnd() % (size + 64) : rnd();
                memcpy(data + p, &v, 8);
            }
            break;
        default: /* random bytes with a valid magic */
            size = 1 + rnd() % 16384;
            for (size_t i = 0; i < size; i++)
                data[i] = (uint8_t)rnd();
            data[0] = 2;
            break;
        }
        LLVMFuzzerTestOneInput(data, size);
    }
    printf("fuzz-arena: %ld inputs, no finding\n", iters);
    return 0;
}
#endif
