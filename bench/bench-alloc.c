/* Benchmark A1 (BENCH.md): the allocator.
 *
 * A live set of 10,000 blocks is filled, then replaced at random: each step
 * frees one random live block and allocates a new one of a size uniform in
 * 16..4096 bytes. Every free and every allocation counts as one operation;
 * 10,000,000 operations (--quick: 1,000,000). All subjects draw the same
 * random sequence. Each new block gets a stamp at both ends that is verified
 * before the block is freed, so a subject cannot skip work. A warm-up of
 * one fifth more steps runs first, untimed, for every subject alike.
 *
 * Latency: every 16th allocation is timed on its own (CLOCK_MONOTONIC, so
 * the figure includes one clock read, ~20 ns, for every subject alike);
 * p99.9 of those samples is reported.
 *
 * Subjects: `shmobj` (shmobj_arena_alloc/free on a segment: robust
 * process-shared lock, generation-checked reference, shmobj_arena_ptr to
 * reach the bytes), `shmobj-core` (the arena core behind a process-shared
 * robust pthread mutex, no segment), `shmobj-nolock` (the core alone: what
 * the lock costs), `glibc-malloc`. Peers whose libraries
 * replace malloc, or need C++, are separate executables built from this
 * file (bench-alloc-jemalloc, bench-alloc-mimalloc, bench-alloc-boost);
 * this program runs them when asked and exits 77 when one was not built.
 *
 * Protocol: `--list`; `--run A1 <subject> [--quick]` prints
 * `BENCH A1 <subject> <metric> <value>` lines. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(BENCH_PEER_JEMALLOC)
#include <jemalloc/jemalloc.h>
#define PEER_NAME "jemalloc"
#elif defined(BENCH_PEER_MIMALLOC)
#include <mimalloc.h>
#define PEER_NAME "mimalloc"
#elif defined(BENCH_PEER_BOOST)
#define PEER_NAME "boost"
int bench_boost_open(size_t bytes);
void *bench_boost_alloc(size_t n);
void bench_boost_free(void *p);
void bench_boost_close(void);
#else
#include "arena.h"
#include "shmobj.h"
#endif

#define LIVE 10000
#define OPS_FULL 10000000u
#define OPS_QUICK 1000000u
#define SAMPLE_EVERY 16u
#define WARMUP_FRACTION 5u
#define MIN_SIZE 16u
#define MAX_SIZE 4096u
#define HEAP_BYTES (256u << 20)

struct slot {
    void *p;
    uint64_t handle; /* a shmobj reference or header offset; unused by peers */
    uint32_t size;
    uint32_t stamp;
};

struct result {
    double seconds;
    uint64_t ops;
    uint64_t errors;
    uint64_t *lat;
    uint64_t nlat;
};

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t rnd(uint64_t *s)
{
    /* xorshift64*: cheap, and the same sequence for every subject. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

static inline void stamp(struct slot *s)
{
    memcpy(s->p, &s->stamp, 4);
    ((uint8_t *)s->p)[s->size - 1] = (uint8_t)s->stamp;
}

static inline int stamp_ok(const struct slot *s)
{
    uint32_t v;
    memcpy(&v, s->p, 4);
    return v == s->stamp && ((uint8_t *)s->p)[s->size - 1] == (uint8_t)s->stamp;
}

/* The workload, instantiated per subject so that its alloc and free inline
 * into the loop. ALLOC(size, &handle) yields a pointer or NULL;
 * FREE(p, handle) releases it. */
#define DEFINE_WORKLOAD(NAME, ALLOC, FREE)                                     \
    static int workload_##NAME(uint64_t nops, struct result *r)                \
    {                                                                          \
        static struct slot slots[LIVE];                                        \
        uint64_t seed = UINT64_C(0x9e3779b97f4a7c15);                          \
        uint64_t iters = nops / 2;                                             \
        r->lat = malloc(sizeof(uint64_t) * ((iters + iters / WARMUP_FRACTION) / SAMPLE_EVERY + 2));        \
        if (r->lat == NULL)                                                    \
            return -1;                                                         \
        r->nlat = 0;                                                           \
        r->errors = 0;                                                         \
        for (uint32_t i = 0; i < LIVE; i++) {                                  \
            struct slot *s = &slots[i];                                        \
            s->size = MIN_SIZE + (uint32_t)(((rnd(&seed) >> 32) *             \
                                             (MAX_SIZE - MIN_SIZE + 1)) >> 32); \
            s->p = ALLOC(s->size, &s->handle);                                 \
            if (s->p == NULL)                                                  \
                return -1;                                                     \
            s->stamp = i;                                                      \
            stamp(s);                                                          \
        }                                                                      \
        /* Warm-up: WARMUP_FRACTION more steps, untimed, so first touches  \
         * of fresh pages (costlier for shared memory than for private)    \
         * fall outside the measured steady state for every subject. */    \
        uint64_t t0 = 0, warm = iters / WARMUP_FRACTION;                      \
        for (uint64_t it = 0; it < iters + warm; it++) {                       \
            if (it == warm) {                                                  \
                t0 = now_ns();                                                 \
                r->nlat = 0;                                                   \
            }                                                                  \
            uint64_t x = rnd(&seed);                                           \
            struct slot *s = &slots[((x & 0xffffffffu) * LIVE) >> 32];         \
            uint32_t size = MIN_SIZE + (uint32_t)(((x >> 32) *                 \
                                                   (MAX_SIZE - MIN_SIZE + 1)) >> 32); \
            r->errors += !stamp_ok(s);                                         \
            FREE(s->p, s->handle);                                             \
            s->size = size;                                                    \
            s->stamp = (uint32_t)it;                                           \
            if (it % SAMPLE_EVERY == 0) {                                      \
                uint64_t a = now_ns();                                         \
                s->p = ALLOC(size, &s->handle);                                \
                r->lat[r->nlat++] = now_ns() - a;                              \
            } else {                                                           \
                s->p = ALLOC(size, &s->handle);                                \
            }                                                                  \
            if (s->p == NULL)                                                  \
                return -1;                                                     \
            stamp(s);                                                          \
        }                                                                      \
        uint64_t t1 = now_ns();                                                \
        for (uint32_t i = 0; i < LIVE; i++) {                                  \
            r->errors += !stamp_ok(&slots[i]);                                 \
            if (i % 2 == 1) /* keep half: the end state is fragmented */      \
                continue;                                                      \
            FREE(slots[i].p, slots[i].handle);                                 \
        }                                                                      \
        r->seconds = (double)(t1 - t0) / 1e9;                                  \
        r->ops = iters * 2;                                                    \
        return 0;                                                              \
    }

/* ---- subjects ------------------------------------------------------------ */

#if defined(BENCH_PEER_JEMALLOC)
#define J_ALLOC(n, h) mallocx((n), 0)
#define J_FREE(p, h) dallocx((p), 0)
DEFINE_WORKLOAD(peer, J_ALLOC, J_FREE)
static int peer_open(void) { return 0; }
static void peer_close(void) {}
#elif defined(BENCH_PEER_MIMALLOC)
#define M_ALLOC(n, h) mi_malloc(n)
#define M_FREE(p, h) mi_free(p)
DEFINE_WORKLOAD(peer, M_ALLOC, M_FREE)
static int peer_open(void) { return 0; }
static void peer_close(void) {}
#elif defined(BENCH_PEER_BOOST)
#define B_ALLOC(n, h) bench_boost_alloc(n)
#define B_FREE(p, h) bench_boost_free(p)
DEFINE_WORKLOAD(peer, B_ALLOC, B_FREE)
static int peer_open(void) { return bench_boost_open(HEAP_BYTES); }
static void peer_close(void) { bench_boost_close(); }
#else

/* glibc malloc: the handle is unused. */
#define G_ALLOC(n, h) malloc(n)
#define G_FREE(p, h) free(p)
DEFINE_WORKLOAD(glibc, G_ALLOC, G_FREE)

/* shmobj: the public API on a memfd segment. */
static shmobj_segment *g_seg;

static inline void *seg_alloc(size_t n, uint64_t *ref)
{
    void *p;
    if (shmobj_arena_alloc(g_seg, n, 0, ref) != 0 ||
        shmobj_arena_ptr(g_seg, *ref, &p, NULL) != 0)
        return NULL;
    return p;
}

static inline void seg_free(uint64_t ref)
{
    if (shmobj_arena_free(g_seg, ref) != 0)
        abort();
}
#define S_ALLOC(n, h) seg_alloc((n), (h))
#define S_FREE(p, h) seg_free(h)
DEFINE_WORKLOAD(shmobj, S_ALLOC, S_FREE)

/* shmobj-core: the allocator core behind a robust process-shared mutex in
 * a shared mapping (what the segment does, minus its bookkeeping). */
static uint8_t *g_base;
static pthread_mutex_t *g_lock;
#define CORE_ARENA_OFF 4096u

static inline void core_lock(void)
{
    int rc = pthread_mutex_lock(g_lock);
    if (rc == EOWNERDEAD) {
        (void)shmobj__arena_rebuild(g_base, HEAP_BYTES, CORE_ARENA_OFF);
        pthread_mutex_consistent(g_lock);
    } else if (rc != 0) {
        abort();
    }
}

static inline void *core_alloc(size_t n, uint64_t *h)
{
    uint64_t off;
    uint16_t gen;
    core_lock();
    int rc = shmobj__arena_alloc(g_base, HEAP_BYTES, CORE_ARENA_OFF, n, 16,
                                 &off, &gen);
    pthread_mutex_unlock(g_lock);
    if (rc != 0)
        return NULL;
    *h = off | (uint64_t)gen << 48;
    return g_base + off;
}

static inline void core_free(uint64_t h)
{
    core_lock();
    int rc = shmobj__arena_free(g_base, HEAP_BYTES, CORE_ARENA_OFF,
                                h & ((UINT64_C(1) << 48) - 1), (uint16_t)(h >> 48));
    pthread_mutex_unlock(g_lock);
    if (rc != 0)
        abort();
}
#define C_ALLOC(n, h) core_alloc((n), (h))
#define C_FREE(p, h) core_free(h)
DEFINE_WORKLOAD(core, C_ALLOC, C_FREE)

/* shmobj-nolock: the same core without the lock, to show what the lock
 * costs (not a configuration anyone should run with several processes). */
static inline void *bare_alloc(size_t n, uint64_t *h)
{
    uint64_t off;
    uint16_t gen;
    if (shmobj__arena_alloc(g_base, HEAP_BYTES, CORE_ARENA_OFF, n, 16, &off,
                            &gen) != 0)
        return NULL;
    *h = off | (uint64_t)gen << 48;
    return g_base + off;
}

static inline void bare_free(uint64_t h)
{
    if (shmobj__arena_free(g_base, HEAP_BYTES, CORE_ARENA_OFF,
                           h & ((UINT64_C(1) << 48) - 1), (uint16_t)(h >> 48)) != 0)
        abort();
}
#define N_ALLOC(n, h) bare_alloc((n), (h))
#define N_FREE(p, h) bare_free(h)
DEFINE_WORKLOAD(bare, N_ALLOC, N_FREE)

static int core_open(void)
{
    g_base = mmap(NULL, HEAP_BYTES, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_base == MAP_FAILED)
        return -1;
    g_lock = (pthread_mutex_t *)(void *)g_base;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(g_lock, &a);
    pthread_mutexattr_destroy(&a);
    return shmobj__arena_init(g_base, HEAP_BYTES, CORE_ARENA_OFF, HEAP_BYTES);
}

static int seg_open(void)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.initial_size = 64u << 20;
    o.max_size = HEAP_BYTES;
    return shmobj_segment_create("bench-alloc", &o, &g_seg);
}
#endif

/* ---- driver ---------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int report(const char *subject, int rc, struct result *r)
{
    if (rc != 0) {
        fprintf(stderr, "bench-alloc: %s: allocation failed\n", subject);
        return 1;
    }
    if (r->errors != 0) {
        fprintf(stderr, "bench-alloc: %s: %llu blocks lost their contents\n",
                subject, (unsigned long long)r->errors);
        return 1;
    }
    qsort(r->lat, r->nlat, sizeof(uint64_t), cmp_u64);
    uint64_t p999 = r->nlat ? r->lat[(r->nlat - 1) * 999 / 1000] : 0;
    printf("BENCH A1 %s Mops/s %.2f\n", subject, (double)r->ops / r->seconds / 1e6);
    printf("BENCH A1 %s p999-ns %llu\n", subject, (unsigned long long)p999);
    free(r->lat);
    return 0;
}

#ifdef PEER_NAME
int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--list") == 0) {
        printf("A1 %s\n", PEER_NAME);
        return 0;
    }
    if (argc < 4 || strcmp(argv[1], "--run") != 0 || strcmp(argv[2], "A1") != 0 ||
        strcmp(argv[3], PEER_NAME) != 0) {
        fprintf(stderr, "usage: %s --list | --run A1 %s [--quick]\n", argv[0], PEER_NAME);
        return 2;
    }
    uint64_t nops = argc > 4 && strcmp(argv[4], "--quick") == 0 ? OPS_QUICK : OPS_FULL;
    if (peer_open() != 0) {
        fprintf(stderr, "bench-alloc: %s: cannot set up\n", PEER_NAME);
        return 77;
    }
    struct result r;
    int rc = workload_peer(nops, &r);
    peer_close();
    return report(PEER_NAME, rc, &r);
}
#else
static const char *const peers[] = {"jemalloc", "mimalloc", "boost"};

/* The sibling executable that runs a peer, or NULL when it was not built. */
static char *peer_path(const char *peer)
{
    static char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 64);
    if (n <= 0)
        return NULL;
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    if (slash == NULL)
        return NULL;
    snprintf(slash + 1, 64, "bench-alloc-%s", peer);
    return access(path, X_OK) == 0 ? path : NULL;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--list") == 0) {
        printf("A1 shmobj\nA1 shmobj-core\nA1 shmobj-nolock\nA1 glibc-malloc\n");
        for (size_t i = 0; i < sizeof(peers) / sizeof(peers[0]); i++)
            if (peer_path(peers[i]) != NULL)
                printf("A1 %s\n", peers[i]);
        return 0;
    }
    if (argc < 4 || strcmp(argv[1], "--run") != 0 || strcmp(argv[2], "A1") != 0) {
        fprintf(stderr, "usage: %s --list | --run A1 <subject> [--quick]\n", argv[0]);
        return 2;
    }
    const char *subject = argv[3];
    int quick = argc > 4 && strcmp(argv[4], "--quick") == 0;
    uint64_t nops = quick ? OPS_QUICK : OPS_FULL;
    struct result r;
    int rc;
    if (strcmp(subject, "glibc-malloc") == 0) {
        rc = workload_glibc(nops, &r);
        return report(subject, rc, &r);
    }
    if (strcmp(subject, "shmobj-core") == 0 || strcmp(subject, "shmobj-nolock") == 0) {
        if (core_open() != 0) {
            fprintf(stderr, "bench-alloc: cannot map the heap\n");
            return 1;
        }
        rc = subject[7] == 'c' ? workload_core(nops, &r) : workload_bare(nops, &r);
        int out = report(subject, rc, &r);
        shmobj_arena_stats st;
        memset(&st, 0, sizeof(st));
        st.struct_size = sizeof(st);
        if (out == 0 && shmobj__arena_stats(g_base, HEAP_BYTES, CORE_ARENA_OFF, &st) == 0)
            printf("BENCH A1 %s largest-free-ratio %.3f\n", subject,
                   st.free_bytes ? (double)(st.largest_free + 16) / (double)st.free_bytes : 1.0);
        return out;
    }
    if (strcmp(subject, "shmobj") == 0) {
        int orc = seg_open();
        if (orc != 0) {
            fprintf(stderr, "bench-alloc: segment: %s\n", shmobj_strerror(orc));
            return 1;
        }
        rc = workload_shmobj(nops, &r);
        int out = report(subject, rc, &r);
        shmobj_arena_stats st;
        memset(&st, 0, sizeof(st));
        st.struct_size = sizeof(st);
        if (out == 0 && shmobj_arena_stats_get(g_seg, &st) == 0)
            printf("BENCH A1 %s largest-free-ratio %.3f\n", subject,
                   st.free_bytes ? (double)(st.largest_free + 16) / (double)st.free_bytes : 1.0);
        shmobj_segment_close(g_seg);
        return out;
    }
    for (size_t i = 0; i < sizeof(peers) / sizeof(peers[0]); i++) {
        if (strcmp(subject, peers[i]) != 0)
            continue;
        char *path = peer_path(peers[i]);
        if (path == NULL) {
            fprintf(stderr, "bench-alloc: %s not available (not installed when built)\n",
                    subject);
            return 77;
        }
        fflush(stdout);
        execv(path, argv);
        fprintf(stderr, "bench-alloc: cannot run %s: %s\n", path, strerror(errno));
        return 77;
    }
    fprintf(stderr, "bench-alloc: unknown subject %s\n", subject);
    return 77;
}
#endif
