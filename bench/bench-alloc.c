/* Benchmark A1: the allocator.
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
 * p99.9 of those samples is reported. `cpu-Mops/s` is the same rate per
 * CPU second of the process, steadier than wall time on a busy host.
 *
 * Subjects: `shmobj` (shmobj_arena_alloc/free on a segment: the segment
 * lock, a generation-checked reference and the address, both returned by
 * the allocation), `shmobj-core` (the arena core behind a process-shared
 * robust pthread mutex, no segment), `shmobj-nolock` (the core alone: what
 * the lock costs), `glibc-malloc`. Peers whose libraries
 * replace malloc, or need C++, are separate executables built from this
 * file (bench-alloc-jemalloc, bench-alloc-mimalloc, bench-alloc-boost),
 * each listing its own subject; this program lists a peer only when its
 * executable was not built (its --run then exits 77 saying so).
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

#include "bench-util.h"

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
    double seconds;     /* wall clock of the timed steps */
    double cpu_seconds; /* CPU time of the same: robust to a busy host */
    uint64_t ops;
    uint64_t errors;
    uint64_t *lat;
    uint64_t nlat;
};

#define SEED UINT64_C(0xa1a1a1a1)

static inline uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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
        bench_rng rng;                                                         \
        bench_rng_seed(&rng, SEED);                                            \
        uint64_t iters = nops / 2;                                             \
        r->lat = malloc(sizeof(uint64_t) * ((iters + iters / WARMUP_FRACTION) / SAMPLE_EVERY + 2));        \
        if (r->lat == NULL)                                                    \
            return -1;                                                         \
        r->nlat = 0;                                                           \
        r->errors = 0;                                                         \
        for (uint32_t i = 0; i < LIVE; i++) {                                  \
            struct slot *s = &slots[i];                                        \
            s->size = MIN_SIZE +                                               \
                      (uint32_t)bench_rng_below(&rng, MAX_SIZE - MIN_SIZE + 1); \
            s->p = ALLOC(s->size, &s->handle);                                 \
            if (s->p == NULL)                                                  \
                return -1;                                                     \
            s->stamp = i;                                                      \
            stamp(s);                                                          \
        }                                                                      \
        /* Warm-up: WARMUP_FRACTION more steps, untimed, so first touches  \
         * of fresh pages (costlier for shared memory than for private)    \
         * fall outside the measured steady state for every subject. */    \
        uint64_t t0 = 0, c0 = 0, warm = iters / WARMUP_FRACTION;              \
        for (uint64_t it = 0; it < iters + warm; it++) {                       \
            if (it == warm) {                                                  \
                c0 = cpu_ns();                                                 \
                t0 = bench_now_ns();                                           \
                r->nlat = 0;                                                   \
            }                                                                  \
            struct slot *s = &slots[bench_rng_below(&rng, LIVE)];              \
            uint32_t size = MIN_SIZE +                                         \
                            (uint32_t)bench_rng_below(&rng, MAX_SIZE - MIN_SIZE + 1); \
            r->errors += !stamp_ok(s);                                         \
            FREE(s->p, s->handle);                                             \
            s->size = size;                                                    \
            s->stamp = (uint32_t)it;                                           \
            if (it % SAMPLE_EVERY == 0) {                                      \
                uint64_t a = bench_now_ns();                                         \
                s->p = ALLOC(size, &s->handle);                                \
                r->lat[r->nlat++] = bench_now_ns() - a;                              \
            } else {                                                           \
                s->p = ALLOC(size, &s->handle);                                \
            }                                                                  \
            if (s->p == NULL)                                                  \
                return -1;                                                     \
            stamp(s);                                                          \
        }                                                                      \
        uint64_t t1 = bench_now_ns();                                          \
        r->cpu_seconds = (double)(cpu_ns() - c0) / 1e9;                        \
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
    if (shmobj_arena_alloc(g_seg, n, 0, ref, &p) != 0)
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

static int report(const bench_ctx *ctx, int rc, struct result *r)
{
    if (rc != 0)
        return bench_fail("bench-alloc: %s: allocation failed", ctx->subject);
    if (r->errors != 0)
        return bench_fail("bench-alloc: %s: %llu blocks lost their contents",
                          ctx->subject, (unsigned long long)r->errors);
    bench_report(ctx, "Mops/s", (double)r->ops / r->seconds / 1e6);
    /* The same per CPU second: on a shared virtual machine the wall-clock
     * figure swings with the neighbours; this one much less. */
    bench_report(ctx, "cpu-Mops/s", (double)r->ops / r->cpu_seconds / 1e6);
    bench_report(ctx, "p999-ns", (double)bench_percentile(r->lat, r->nlat, 99.9));
    free(r->lat);
    return 0;
}

static uint64_t ops_of(const bench_ctx *ctx)
{
    bench_pin(bench_ncpus() - 1);
    return ctx->quick ? OPS_QUICK : OPS_FULL;
}

#ifdef PEER_NAME
static int run_peer(const bench_ctx *ctx)
{
    uint64_t nops = ops_of(ctx);
    if (peer_open() != 0)
        return bench_skip("bench-alloc: %s: cannot set up", ctx->subject);
    struct result r;
    int rc = workload_peer(nops, &r);
    peer_close();
    return report(ctx, rc, &r);
}

int main(int argc, char **argv)
{
    static const bench_entry table[] = {
        {"A1", PEER_NAME, run_peer, 0},
        {NULL, NULL, NULL, 0},
    };
    return bench_main(argc, argv, table);
}
#else
static void report_largest(const bench_ctx *ctx, const shmobj_arena_stats *st)
{
    bench_report(ctx, "largest-free-ratio",
                 st->free_bytes ? (double)(st->largest_free + 16) / (double)st->free_bytes
                                : 1.0);
}

static int run_glibc(const bench_ctx *ctx)
{
    struct result r;
    uint64_t nops = ops_of(ctx);
    int rc = workload_glibc(nops, &r);
    return report(ctx, rc, &r);
}

static int run_core(const bench_ctx *ctx)
{
    struct result r;
    uint64_t nops = ops_of(ctx);
    if (core_open() != 0)
        return bench_fail("bench-alloc: cannot map the heap");
    int rc = ctx->arg ? workload_bare(nops, &r) : workload_core(nops, &r);
    rc = report(ctx, rc, &r);
    shmobj_arena_stats st;
    memset(&st, 0, sizeof(st));
    st.struct_size = sizeof(st);
    if (rc == 0 && shmobj__arena_stats(g_base, HEAP_BYTES, CORE_ARENA_OFF, &st) == 0)
        report_largest(ctx, &st);
    return rc;
}

static int run_shmobj(const bench_ctx *ctx)
{
    struct result r;
    uint64_t nops = ops_of(ctx);
    int orc = seg_open();
    if (orc != 0)
        return bench_fail("bench-alloc: segment: %s", shmobj_strerror(orc));
    int rc = workload_shmobj(nops, &r);
    rc = report(ctx, rc, &r);
    shmobj_arena_stats st;
    memset(&st, 0, sizeof(st));
    st.struct_size = sizeof(st);
    if (rc == 0 && shmobj_arena_stats_get(g_seg, &st) == 0)
        report_largest(ctx, &st);
    shmobj_segment_close(g_seg);
    return rc;
}

static const char *const peers[] = {"jemalloc", "mimalloc", "boost"};
static char **g_argv;

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

static int run_sibling(const bench_ctx *ctx)
{
    char *path = peer_path(ctx->subject);
    if (path == NULL)
        return bench_skip("bench-alloc: %s not available (not installed when built)",
                          ctx->subject);
    fflush(stdout);
    execv(path, g_argv);
    return bench_skip("bench-alloc: cannot run %s: %s", path, strerror(errno));
}

int main(int argc, char **argv)
{
    bench_entry table[8] = {
        {"A1", "shmobj", run_shmobj, 0},
        {"A1", "shmobj-core", run_core, 0},
        {"A1", "shmobj-nolock", run_core, 1},
        {"A1", "glibc-malloc", run_glibc, 0},
    };
    /* A peer that was built lists itself (bench/run finds every bench-*
     * program); one that was not is listed here so that the runner reports
     * it as skipped, with the reason. --run of a built peer still works
     * from here. */
    size_t n = 4;
    for (size_t i = 0; i < sizeof(peers) / sizeof(peers[0]); i++) {
        int asked = argc >= 4 && strcmp(argv[1], "--run") == 0 &&
                    strcmp(argv[3], peers[i]) == 0;
        if (peer_path(peers[i]) == NULL || asked)
            table[n++] = (bench_entry){"A1", peers[i], run_sibling, 0};
    }
    table[n] = (bench_entry){NULL, NULL, NULL, 0};
    g_argv = argv;
    return bench_main(argc, argv, table);
}
#endif
