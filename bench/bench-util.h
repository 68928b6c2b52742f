/*
 * bench-util.h - shared helpers of every bench-* program (header only).
 *
 * The protocol a bench program speaks (bench/README.md) lives in
 * bench_main(): a program declares a table of {workload, subject, fn, arg}
 * and calls bench_main(argc, argv, table). The rest are the small tools
 * every benchmark needs and should share so that figures stay comparable:
 * one clock, one way to pin, one way to fork a peer process and bound the
 * wait for it, one checksum loop (bench_sum64) that every consumer uses to
 * "read every byte", one PRNG, one percentile rule and one output format.
 *
 * Everything is static inline, compiles as C11 and as C++ (the Boost peers
 * include it), and needs nothing but libc. Nothing here runs in the
 * library; exiting and printing are fine.
 */
#ifndef SHMOBJ_BENCH_UTIL_H
#define SHMOBJ_BENCH_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/** Exit status of `--run` when the subject is not available here. */
#define BENCH_SKIP 77

/** Default bound on one `--run` (seconds; SIGALRM ends the process). */
#define BENCH_ALARM_S 900

/** What one `--run` is asked to do. */
typedef struct bench_ctx {
    const char *workload; /* e.g. "W1-1MiB" */
    const char *subject;  /* e.g. "pipe" */
    int quick;            /* 1 when --quick: smaller totals, same work */
    uintptr_t arg;        /* the table entry's arg (size, variant, ...) */
} bench_ctx;

/**
 * One benchmark repetition. Print the figures with bench_report() and
 * return 0; return bench_skip(...) when the subject is not available
 * (exit 77); return bench_fail(...) (any other non-zero) on error, e.g. a
 * checksum mismatch.
 */
typedef int (*bench_fn)(const bench_ctx *ctx);

typedef struct bench_entry {
    const char *workload;
    const char *subject;
    bench_fn fn;
    uintptr_t arg;
} bench_entry;

/* ---- clock ------------------------------------------------------------ */

/** Monotonic, system-wide clock in ns (comparable across processes). */
static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- messages --------------------------------------------------------- */

/** Print one line on stderr from a format and its va_list. */
static inline void bench_vmsg(const char *fmt, va_list ap)
{
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

#if defined(__GNUC__)
#define BENCH_PRINTF __attribute__((format(printf, 1, 2)))
#else
#define BENCH_PRINTF
#endif

/** Print a reason on stderr and return BENCH_SKIP; use as `return bench_skip(...)`. */
BENCH_PRINTF static inline int bench_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bench_vmsg(fmt, ap);
    va_end(ap);
    return BENCH_SKIP;
}

/** Print an error on stderr and return 1; use as `return bench_fail(...)`. */
BENCH_PRINTF static inline int bench_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bench_vmsg(fmt, ap);
    va_end(ap);
    return 1;
}

/**
 * Print one figure: `BENCH <workload> <subject> <metric> <value>`.
 * Values of 1000 and above are printed as integers, smaller ones with 4
 * significant digits; metric names must not contain spaces.
 */
static inline void bench_report(const bench_ctx *ctx, const char *metric, double value)
{
    double a = value < 0 ? -value : value;
    if (a >= 1000.0 || value == (double)(int64_t)value)
        printf("BENCH %s %s %s %.0f\n", ctx->workload, ctx->subject, metric, value);
    else
        printf("BENCH %s %s %s %.4g\n", ctx->workload, ctx->subject, metric, value);
    fflush(stdout);
}

/* ---- CPUs ------------------------------------------------------------- */

/** Number of CPUs this process may run on (at least 1). */
static inline int bench_ncpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

/**
 * Pin the calling thread/process to the k-th CPU it is allowed on (k taken
 * modulo the count). The two processes of a pair call it with 0 and 1 so
 * they land on different cores whenever there are two. Returns 0 or -1.
 */
static inline int bench_pin(int k)
{
    cpu_set_t set, one;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    int n = CPU_COUNT(&set);
    if (n <= 0)
        return -1;
    k %= n;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        if (k-- == 0) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            return sched_setaffinity(0, sizeof one, &one);
        }
    }
    return -1;
}

/** Spin-loop hint. */
static inline void bench_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/**
 * One round of a busy-wait loop. On a single CPU a spinner would only burn
 * the time slice of the process it waits for, so there it yields instead.
 */
static inline void bench_spin_once(void)
{
    static int ncpu = 0;
    if (ncpu == 0)
        ncpu = bench_ncpus();
    if (ncpu < 2)
        sched_yield();
    else
        bench_relax();
}

/* ---- processes -------------------------------------------------------- */

/**
 * Fork a child that runs fn(arg) and _exit()s with its return value. The
 * child dies with its parent (PR_SET_PDEATHSIG), so a parent killed by its
 * alarm never leaves a spinner behind. Returns the pid, or -1.
 */
static inline pid_t bench_fork(int (*fn)(void *), void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(111);
    _exit(fn(arg) & 0xff);
}

/**
 * Wait at most timeout_ms for the child; kill it (SIGKILL) when the time is
 * up. Returns its exit status (0..255), 128+signal when it was killed by a
 * signal, or -1 on timeout / error.
 */
static inline int bench_wait(pid_t pid, int timeout_ms)
{
    uint64_t deadline = bench_now_ns() + (uint64_t)timeout_ms * 1000000u;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (WIFEXITED(st))
                return WEXITSTATUS(st);
            if (WIFSIGNALED(st))
                return 128 + WTERMSIG(st);
            return -1;
        }
        if (r < 0 && errno != EINTR)
            return -1;
        if (bench_now_ns() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        struct timespec ts = {0, 1000000}; /* 1 ms */
        nanosleep(&ts, NULL);
    }
}

/* ---- memory ----------------------------------------------------------- */

/**
 * A MAP_SHARED|MAP_ANONYMOUS mapping, zero filled and pre-faulted, to be
 * created before fork() so parent and child share it. NULL on failure.
 */
static inline void *bench_shared_alloc(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memset(p, 0, size); /* fault every page in now, outside any timing */
    return p;
}

static inline void bench_shared_free(void *p, size_t size)
{
    if (p != NULL)
        munmap(p, size);
}

/** Private, 64-byte aligned, pre-faulted buffer; free with free(). */
static inline void *bench_alloc(size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 64) != 0)
        return NULL;
    memset(p, 0, size);
    return p;
}

/**
 * Sum of the 8-byte words of [p, p+n): the "read every byte" loop of every
 * consumer, so all subjects pay the same price for it. n must be a
 * multiple of 8; p may be unaligned.
 */
static inline uint64_t bench_sum64(const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, w;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        memcpy(&w, b + i, 8);
        s0 += w;
        memcpy(&w, b + i + 8, 8);
        s1 += w;
        memcpy(&w, b + i + 16, 8);
        s2 += w;
        memcpy(&w, b + i + 24, 8);
        s3 += w;
    }
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, b + i, 8);
        s0 += w;
    }
    return s0 + s1 + s2 + s3;
}

/** Keep a value alive so the compiler cannot drop the work producing it. */
static inline void bench_keep(uint64_t v)
{
    __asm__ __volatile__("" : : "r"(v) : "memory");
}

/* ---- PRNG: splitmix64 seeding xoshiro256** ----------------------------- */

typedef struct bench_rng {
    uint64_t s[4];
} bench_rng;

static inline uint64_t bench_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static inline void bench_rng_seed(bench_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = bench_splitmix64(&seed);
}

static inline uint64_t bench_rng_next(bench_rng *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5;
    uint64_t result = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/** Uniform in [0, n) (n > 0), Lemire's multiply-shift (bias < n / 2^64). */
static inline uint64_t bench_rng_below(bench_rng *r, uint64_t n)
{
    __extension__ typedef unsigned __int128 bench_u128;
    return (uint64_t)(((bench_u128)bench_rng_next(r) * n) >> 64);
}

/** Fill a buffer with PRNG bytes. */
static inline void bench_rng_fill(bench_rng *r, void *p, size_t n)
{
    unsigned char *b = (unsigned char *)p;
    while (n >= 8) {
        uint64_t v = bench_rng_next(r);
        memcpy(b, &v, 8);
        b += 8;
        n -= 8;
    }
    if (n) {
        uint64_t v = bench_rng_next(r);
        memcpy(b, &v, n);
    }
}

/* ---- D1's keys ---------------------------------------------------------- */

/**
 * The D1 key of number k (0 <= k < 1,000,000): "key-%06d" written by hand
 * into buf (at least 11 bytes: ten characters and a NUL); returns 10.
 * Every D1 subject (bench-mutable.c, peers-mutable.c,
 * peers-mutable-boost.cpp) formats its keys with this one function, so
 * all do the same work per operation; snprintf cost about 920
 * instructions a key, as much as the library's whole call.
 */
static inline int bench_d1_key(int k, char *buf)
{
    memcpy(buf, "key-", 4);
    for (int i = 9; i >= 4; i--) {
        buf[i] = (char)('0' + k % 10);
        k /= 10;
    }
    buf[10] = '\0';
    return 10;
}

/* ---- percentiles ------------------------------------------------------ */

static inline int bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/**
 * The p-th percentile (0 <= p <= 100) of n samples by the nearest-rank
 * rule; sorts the array in place. Returns 0 when n == 0.
 */
static inline uint64_t bench_percentile(uint64_t *samples, size_t n, double p)
{
    if (n == 0)
        return 0;
    qsort(samples, n, sizeof *samples, bench_cmp_u64);
    double rank = p / 100.0 * (double)n;
    size_t k = (size_t)rank;
    if ((double)k < rank)
        k++; /* ceil */
    if (k == 0)
        k = 1;
    if (k > n)
        k = n;
    return samples[k - 1];
}

/* ---- workload parameters shared by the programs of W1 and W2 ---------- */

/*
 * W1 message i (0-based) of a repetition: `size` bytes, 8-byte word 0 holds
 * i, the other words are bench_rng_fill() bytes of seed BENCH_W1_SEED. The
 * consumer sums every word of every message with bench_sum64() and the run
 * fails unless the sum equals the producer's. W2 messages are BENCH_W2_MSG
 * bytes built the same way (seed BENCH_W2_SEED).
 */
#define BENCH_W1_SEED 0x5eed0001u
#define BENCH_W2_SEED 0x5eed0002u
#define BENCH_W2_MSG 64
/* 20,000 timed round trips (200 samples above the 99th percentile);
 * 100,000 took ~9.5 s a repetition for each sleeping subject (95 us a
 * round trip on the 2-CPU machine), most of a full bench/run. Alternated
 * 3 times on a loaded machine, shm-ring-futex's medians of 20,000 and of
 * 100,000 fell within each other's spread; shmobj-sleep's of 20,000 came
 * out 15-27% lower, so compare W2 sleeping figures across this change
 * with care. */
#define BENCH_W2_PING 20000u       /* timed round trips per repetition */
#define BENCH_W2_PING_QUICK 5000u  /* the same with --quick */
#define BENCH_W2_PING_WARMUP 1000u /* untimed round trips first */
/* W2 messages streamed per repetition: spinning transports move ~10x more
 * per second than those that sleep or enter the kernel per message. */
#define BENCH_W2_STREAM_SPIN 4000000u
#define BENCH_W2_STREAM_SPIN_QUICK 1000000u
#define BENCH_W2_STREAM_SLEEP 1000000u
#define BENCH_W2_STREAM_SLEEP_QUICK 100000u

typedef struct bench_w1_param {
    const char *workload;
    size_t size;          /* message bytes (a multiple of 8) */
    uint64_t count;       /* messages per repetition, 1 GiB (seed: 1,000) */
    uint64_t quick_count; /* the same with --quick, ~256 MiB */
} bench_w1_param;

/** The W1 sizes, ending with a NULL workload. */
static inline const bench_w1_param *bench_w1_params(void)
{
    static const bench_w1_param p[] = {
        {"W1-400K", 400000, 1000, 640},
        {"W1-64K", 64u << 10, 16384, 4096},
        {"W1-1MiB", 1u << 20, 1024, 256},
        {"W1-16MiB", 16u << 20, 64, 16},
        {NULL, 0, 0, 0},
    };
    return p;
}

/** The parameters of a W1 workload id, or NULL. */
static inline const bench_w1_param *bench_w1_param_of(const char *workload)
{
    for (const bench_w1_param *p = bench_w1_params(); p->workload != NULL; p++)
        if (strcmp(p->workload, workload) == 0)
            return p;
    return NULL;
}

/** The W1 producer's message source of `size` bytes (see above); word 0
 *  is restamped per message. Sets *rest_sum to the sum of words 1..;
 *  NULL when out of memory. */
static inline uint64_t *bench_w1_source(size_t size, uint64_t *rest_sum)
{
    uint64_t *src = (uint64_t *)bench_alloc(size);
    if (src == NULL)
        return NULL;
    bench_rng rng;
    bench_rng_seed(&rng, BENCH_W1_SEED);
    bench_rng_fill(&rng, src, size);
    *rest_sum = bench_sum64(src + 1, size - 8);
    return src;
}

/** Fill a W2 message (BENCH_W2_MSG bytes); *rest_sum: sum of words 1... */
static inline void bench_w2_message(uint64_t *msg, uint64_t *rest_sum)
{
    bench_rng rng;
    bench_rng_seed(&rng, BENCH_W2_SEED);
    bench_rng_fill(&rng, msg, BENCH_W2_MSG);
    *rest_sum = bench_sum64(msg + 1, BENCH_W2_MSG - 8);
}

/* ---- the protocol ----------------------------------------------------- */

/** `v` in decimal, zero-padded to exactly `width` bytes (no terminator):
 *  what snprintf("%0<width>llu") writes for a v of at most width digits,
 *  at a small fraction of its cost (the H1 data sets format 2,000,000 of
 *  these per run, untimed but not free). */
static inline void bench_decimal(char *out, size_t width, uint64_t v)
{
    size_t j = width;
    for (; j > 0 && v != 0; v /= 10)
        out[--j] = (char)('0' + v % 10);
    memset(out, '0', j);
}

/** H1 items i = 0..n-1: key i is i in decimal zero-padded to klen bytes
 *  (16 or 64); value i is i * 7 + 3, as 8 little-endian bytes when vlen
 *  is 8, else in decimal zero-padded to vlen bytes. keys holds n * klen
 *  bytes, vals n * vlen. Every H1 program builds its data set with this. */
static inline void bench_h1_fill(char *keys, char *vals, size_t n, size_t klen, size_t vlen)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)i * 7 + 3;
        bench_decimal(keys + i * klen, klen, i);
        if (vlen == 8)
            memcpy(vals + i * vlen, &v, 8);
        else
            bench_decimal(vals + i * vlen, vlen, v);
    }
}

/** H1: the index i back from a key, whose bytes are i in decimal,
 *  zero-padded; SIZE_MAX for anything else. */
static inline size_t bench_h1_key_index(const char *k, size_t klen)
{
    size_t i = 0;
    for (size_t j = 0; j < klen; j++) {
        if (k[j] < '0' || k[j] > '9')
            return SIZE_MAX;
        i = i * 10 + (size_t)(k[j] - '0');
    }
    return i;
}

/** H1 iteration: the work every subject does for each item it visits, so
 *  that iter-Mops/s compares the structures and not the loops: every byte
 *  of key and value read into a sum, and the key counted once if it is
 *  one of the workload's (keys-seen is `distinct`). */
struct bench_h1_iter {
    unsigned char *seen; /* n flags */
    size_t n, distinct;
    uint64_t sum;
};

static inline int bench_h1_iter_init(struct bench_h1_iter *it, size_t n)
{
    it->seen = (unsigned char *)calloc(n ? n : 1, 1);
    it->n = n;
    it->distinct = 0;
    it->sum = 0;
    return it->seen != NULL ? 0 : -1;
}

static inline void bench_h1_visit(struct bench_h1_iter *it, const void *k, size_t kl,
                                  const void *v, size_t vl)
{
    const unsigned char *kb = (const unsigned char *)k, *vb = (const unsigned char *)v;
    for (size_t j = 0; j < kl; j++)
        it->sum += kb[j];
    for (size_t j = 0; j < vl; j++)
        it->sum += vb[j];
    size_t i = bench_h1_key_index((const char *)k, kl);
    if (i < it->n && !it->seen[i]) {
        it->seen[i] = 1;
        it->distinct++;
    }
}

static inline void bench_h1_iter_done(struct bench_h1_iter *it)
{
    free(it->seen);
    it->seen = NULL;
}

static inline void bench_usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s --list\n"
            "       %s --run <workload> <subject> [--quick]\n"
            "--list prints '<workload> <subject>' lines; --run runs one repetition\n"
            "and prints 'BENCH <workload> <subject> <metric> <value>' lines\n"
            "(exit 0), or exits 77 when the subject is not available here.\n",
            prog, prog);
}

/**
 * The whole command line of a bench program. table ends with an entry whose
 * workload is NULL. Returns the process exit status: 0, 77 (skip), 1
 * (failure) or 2 (usage).
 */
static inline int bench_main(int argc, char **argv, const bench_entry *table)
{
    const char *workload = NULL, *subject = NULL;
    int list = 0, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) {
            list = 1;
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--run") == 0 && i + 2 < argc) {
            workload = argv[++i];
            subject = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            bench_usage(argv[0]);
            return 0;
        } else {
            bench_usage(argv[0]);
            return 2;
        }
    }
    if (list) {
        for (const bench_entry *e = table; e->workload != NULL; e++)
            printf("%s %s\n", e->workload, e->subject);
        return 0;
    }
    if (workload == NULL) {
        bench_usage(argv[0]);
        return 2;
    }
    for (const bench_entry *e = table; e->workload != NULL; e++) {
        if (strcmp(e->workload, workload) != 0 || strcmp(e->subject, subject) != 0)
            continue;
        bench_ctx ctx;
        ctx.workload = e->workload;
        ctx.subject = e->subject;
        ctx.quick = quick;
        ctx.arg = e->arg;
        alarm(BENCH_ALARM_S);
        int rc = e->fn(&ctx);
        fflush(stdout);
        return rc == 0 ? 0 : rc == BENCH_SKIP ? BENCH_SKIP : (rc & 0xff) ? (rc & 0xff) : 1;
    }
    fprintf(stderr, "%s: no such workload/subject: %s %s\n", argv[0], workload, subject);
    return 2;
}

#endif /* SHMOBJ_BENCH_UTIL_H */
