/* bench-map: the shared map on the hash-table workloads of doc/benchmarks.md.
 *
 *   H1-64  1,000,000 items (200,000 with --quick), 64-byte keys "%064zu"
 *          and 64-byte values "%064llu" of i * 7 + 3;
 *   H1-16  the same count, 16-byte keys "%016zu", 8-byte values i * 7 + 3;
 *          subject `shmobj`: set all (one process), get all in a random
 *          order verifying every value, iterate all reading every byte.
 *          Metrics set-Mops/s, get-Mops/s, iter-Mops/s, bytes/item (heap
 *          bytes the map holds, block headers included, divided by the
 *          items), keys-seen (distinct keys the iteration returned).
 *          Subject `shmobj-batch`: the same, the sets made 16 at a time
 *          with shmobj_map_set_many() and the gets 16 at a time with
 *          shmobj_map_get_many() (same order, every value compared).
 *          Subject `shmobj-huge`: `shmobj` in a memfd segment of 2 MiB
 *          pages from the huge-page pool (SHMOBJ_SEGMENT_HUGE_REQUIRE);
 *          as root it adds to /proc/sys/vm/nr_hugepages the pages the
 *          run needs and puts the old count back at exit, elsewhere a
 *          short pool skips it (exit 77).
 *          Subject `shmobj-prefetch` (not listed, run by hand): the
 *          same, each get preceded by shmobj_map_prefetch() of the key 6
 *          gets later.
 *   H2     the H1-64 data set, many processes:
 *          shmobj-1proc  one reader process does n gets in random order;
 *          shmobj-2proc  two reader processes, pinned to different CPUs,
 *                        n gets each at once: get-Mops/s is their total;
 *          shmobj-Nproc  four processes insert disjoint quarters at once,
 *                        then the parent counts and looks every key up:
 *                        keys-missing (must be 0), and set-Mops/s total;
 *          shmobj-1w     the same inserts made by one writer process
 *                        alone: what the four writers are measured against
 *                        (on 2 CPUs they must not do worse);
 *          shmobj-8w, shmobj-16w
 *                        8 and 16 writer processes, each its own part of
 *                        the keys: many more writers than CPUs.
 *          Writer k is pinned to CPU k modulo the CPUs allowed.
 *
 * Keys, values and the get orders are prepared before any timing, the same
 * way as the private-table peer (bench/peers-h1.c) so the figures compare.
 *
 * Protocol (bench/README.md) through bench_main() of bench-util.h. */
#include "bench-heap.h"
#include "bench-pool.h"
#include "bench-util.h"

#include "shmobj.h"
#include "shmobj/map.h"

static double now_s(void)
{
    return (double)bench_now_ns() * 1e-9;
}

#define report(ctx, metric, v) bench_report(ctx, metric, v)

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench-map: %s: %s\n", what, rc ? shmobj_strerror(rc) : "failed");
    exit(1);
}

/* ---- the data set (as bench/peers-h1.c prepares it) -------------------------- */

struct data {
    size_t n, klen, vlen;
    char *keys, *vals;
    uint32_t *order;
};

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void shuffle(uint32_t *a, size_t n, uint64_t seed)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(splitmix(&seed) % i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static void prepare(struct data *d, int wide, size_t n)
{
    d->n = n;
    d->klen = wide ? 64 : 16;
    d->vlen = wide ? 64 : 8;
    d->keys = malloc(n * d->klen);
    d->vals = malloc(n * d->vlen);
    d->order = malloc(n * sizeof *d->order);
    if (!d->keys || !d->vals || !d->order)
        die("out of memory", 0);
    bench_h1_fill(d->keys, d->vals, n, d->klen, d->vlen);
    for (size_t i = 0; i < n; i++)
        d->order[i] = (uint32_t)i;
    shuffle(d->order, n, 0x5eed1234abcdULL);
}

static void data_free(struct data *d)
{
    free(d->keys);
    free(d->vals);
    free(d->order);
}

static const char *key_at(const struct data *d, size_t i) { return d->keys + i * d->klen; }
static const char *val_at(const struct data *d, size_t i) { return d->vals + i * d->vlen; }

/* ---- segment and map ------------------------------------------------------------ */

struct env {
    char name[64];
    shmobj_segment *seg;
    shmobj_map *map;
    uint64_t used0; /* heap bytes in use before the map */
};

/* the huge-page pool, for shmobj-huge: bench-pool.h; the heap account:
 * bench-heap.h */


/* The segment of a run: shared memory by name, or with `huge` a memfd of
 * pool pages (single-process runs only). 0, or BENCH_SKIP when huge pages
 * cannot be had here. */
static int env_open_pages(struct env *e, const struct data *d, int huge)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    /* room for the items up front (like the peers' memory), growth allowed */
    o.initial_size = (uint64_t)d->n * (d->klen + d->vlen + 96) + (64u << 20);
    o.max_size = o.initial_size * 4;
    snprintf(e->name, sizeof e->name, "bench-map-%ld", (long)getpid());
    if (huge) {
        o.backend = SHMOBJ_BACKEND_MEMFD;
        o.flags = SHMOBJ_SEGMENT_HUGE_REQUIRE;
        /* the initial size, plus growth of a quarter */
        if (!pool_ensure(o.initial_size + o.initial_size / 4))
            return bench_skip("shmobj-huge: the huge-page pool is short (%s)",
                              "raise " NR_HUGEPAGES " or run as root");
    } else {
        shmobj_segment_destroy(e->name, SHMOBJ_BACKEND_SHM);
    }
    int rc = shmobj_segment_create(e->name, &o, &e->seg);
    if (huge && (rc == SHMOBJ_ENOMEM || rc == SHMOBJ_ENOTSUP))
        return bench_skip("shmobj-huge: no huge-page segment: %s", shmobj_strerror(rc));
    if (rc != 0)
        die("segment create", rc);
    if (huge) {
        shmobj_segment_info info = {.struct_size = sizeof info};
        if (shmobj_segment_info_get(e->seg, &info) == 0)
            fprintf(stderr, "bench-map: segment of %llu-byte pages\n",
                    (unsigned long long)info.page_size);
    }
    e->used0 = bench_heap_used(e->seg);
    rc = shmobj_map_create(e->seg, "bench", &e->map);
    if (rc != 0)
        die("map create", rc);
    return 0;
}

static void env_open(struct env *e, const struct data *d)
{
    (void)env_open_pages(e, d, 0);
}

static void env_close(struct env *e)
{
    shmobj_map_close(e->map);
    shmobj_segment_close(e->seg);
    shmobj_segment_destroy(e->name, SHMOBJ_BACKEND_SHM);
}

static void set_range(shmobj_map *m, const struct data *d, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        int rc = shmobj_map_set(m, key_at(d, i), d->klen, val_at(d, i), d->vlen);
        if (rc != 0)
            die("set", rc);
    }
}

/* Requests per shmobj_map_set_many() call of the shmobj-batch subject. */
#define SET_BATCH 16

/* set_range() through shmobj_map_set_many(), SET_BATCH keys per call. */
static void set_range_batched(shmobj_map *m, const struct data *d, size_t from, size_t to)
{
    shmobj_map_set_req req[SET_BATCH];
    for (size_t j = from; j < to; j += SET_BATCH) {
        size_t k = to - j < SET_BATCH ? to - j : SET_BATCH;
        for (size_t i = 0; i < k; i++)
            req[i] = (shmobj_map_set_req){key_at(d, j + i), d->klen, val_at(d, j + i), d->vlen,
                                          0, 0};
        int rc = shmobj_map_set_many(m, req, k);
        for (size_t i = 0; i < k && rc == 0; i++)
            rc = req[i].status;
        if (rc != 0)
            die("set_many", rc);
    }
}

/* Keys ahead that the shmobj-prefetch variant hints (shmobj_map_prefetch). */
#define PREFETCH_AHEAD 6

/* n gets in the given order, every value compared; returns wrong values.
 * With `ahead`, the key `ahead` places later is hinted before each get. */
static size_t get_all_ahead(shmobj_map *m, const struct data *d,
                            const uint32_t *order, size_t ahead)
{
    size_t bad = 0;
    char buf[64];
    for (size_t j = 0; j < d->n; j++) {
        size_t i = order[j], len = 0;
        if (ahead > 0 && j + ahead < d->n)
            shmobj_map_prefetch(m, key_at(d, order[j + ahead]), d->klen);
        int rc = shmobj_map_get(m, key_at(d, i), d->klen, buf, sizeof buf, &len);
        if (rc != 0 || len != d->vlen || memcmp(buf, val_at(d, i), len) != 0)
            bad++;
    }
    return bad;
}

static size_t get_all(shmobj_map *m, const struct data *d, const uint32_t *order)
{
    return get_all_ahead(m, d, order, 0);
}

/* Requests per shmobj_map_get_many() call of the shmobj-batch subject. */
#define GET_BATCH 16

/* get_all() through shmobj_map_get_many(), GET_BATCH keys per call. */
static size_t get_all_batched(shmobj_map *m, const struct data *d, const uint32_t *order)
{
    shmobj_map_get_req req[GET_BATCH];
    char bufs[GET_BATCH][64];
    size_t bad = 0;
    for (size_t j = 0; j < d->n; j += GET_BATCH) {
        size_t k = d->n - j < GET_BATCH ? d->n - j : GET_BATCH;
        for (size_t i = 0; i < k; i++) {
            req[i].key = key_at(d, order[j + i]);
            req[i].key_len = d->klen;
            req[i].buf = bufs[i];
            req[i].buf_len = sizeof bufs[i];
        }
        if (shmobj_map_get_many(m, req, k) != 0)
            return d->n;
        for (size_t i = 0; i < k; i++)
            if (req[i].status != 0 || req[i].value_len != d->vlen ||
                memcmp(bufs[i], val_at(d, order[j + i]), d->vlen) != 0)
                bad++;
    }
    return bad;
}

/* How run_h1 makes its gets (bench_entry.arg). */
enum { H1_SINGLE = 0, H1_BATCH = 1, H1_PREFETCH = 2, H1_HUGE = 3 };

/* ---- H1 ---------------------------------------------------------------------- */

static int run_h1(const bench_ctx *ctx)
{
    int wide = strcmp(ctx->workload, "H1-64") == 0;
    size_t n = ctx->quick ? 200000 : 1000000;
    struct data d;
    struct env e;
    prepare(&d, wide, n);
    int rc = env_open_pages(&e, &d, ctx->arg == H1_HUGE);
    if (rc != 0)
        return rc;

    double t0 = now_s();
    if (ctx->arg == H1_BATCH)
        set_range_batched(e.map, &d, 0, n);
    else
        set_range(e.map, &d, 0, n);
    double t1 = now_s();
    struct timespec c1, c2;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    size_t bad = ctx->arg == H1_BATCH ? get_all_batched(e.map, &d, d.order)
                 : get_all_ahead(e.map, &d, d.order,
                                 ctx->arg == H1_PREFETCH ? PREFETCH_AHEAD : 0);
    double t2 = now_s();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c2);
    /* diagnostic: CPU time per get, which a loaded machine's waits do not
     * inflate (the BENCH figures are wall-clock) */
    fprintf(stderr, "bench-map: %s %s: %.1f ns of CPU per get\n", ctx->workload, ctx->subject,
            ((double)(c2.tv_sec - c1.tv_sec) * 1e9 + (double)(c2.tv_nsec - c1.tv_nsec)) / (double)n);
    /* iterate: read every byte of key and value, count distinct keys */
    struct bench_h1_iter visit;
    if (bench_h1_iter_init(&visit, n) != 0)
        die("out of memory", 0);
    shmobj_map_iter *it;
    const void *k, *v;
    size_t kl, vl;
    rc = shmobj_map_iter_open(e.map, &it);
    if (rc != 0)
        die("iter open", rc);
    while ((rc = shmobj_map_iter_next(it, &k, &kl, &v, &vl)) == 0)
        bench_h1_visit(&visit, k, kl, v, vl);
    double t3 = now_s();
    size_t distinct = visit.distinct;
    uint64_t sum = visit.sum;
    bench_h1_iter_done(&visit);
    shmobj_map_iter_close(it);
    if (rc != SHMOBJ_ENOTFOUND)
        die("iterate", rc);
    if (bad != 0) {
        fprintf(stderr, "bench-map: %zu wrong values\n", bad);
        return 1;
    }
    if (sum == 0)
        fprintf(stderr, "bench-map: checksum 0\n");
    /* the map's own account of the memory it holds (reads only) */
    shmobj_map_stats st = {.struct_size = sizeof st};
    rc = shmobj_map_stats_get(e.map, &st);
    if (rc != 0)
        die("stats", rc);
    uint64_t used = bench_heap_used(e.seg) - e.used0;
    report(ctx, "set-Mops/s", (double)n / (t1 - t0) / 1e6);
    report(ctx, "get-Mops/s", (double)n / (t2 - t1) / 1e6);
    report(ctx, "iter-Mops/s", (double)n / (t3 - t2) / 1e6);
    report(ctx, "bytes/item", (double)(long long)((double)used / (double)n + 0.5));
    report(ctx, "keys-seen", (double)distinct);
    fprintf(stderr, "bench-map: %s load %.3f probe mean %.3f max %llu, %.1f B/item by map stats\n",
            ctx->workload, st.load_factor, st.probe_mean, (unsigned long long)st.probe_max, st.bytes_per_item);
    env_close(&e);
    data_free(&d);
    return 0;
}

/* ---- H2 ---------------------------------------------------------------------- */

static void pin(int k)
{
    (void)bench_pin(k);
}

/* The most processes an H2 subject forks (shmobj-16w). */
#define H2_MAX_PROCS 16

struct shared {
    volatile int ready, go;
    volatile double t_start[H2_MAX_PROCS], t_end[H2_MAX_PROCS];
    volatile size_t bad[H2_MAX_PROCS];
};

static shmobj_map *child_map(struct env *e, shmobj_segment **seg)
{
    shmobj_map *m = NULL;
    int rc = shmobj_segment_open(e->name, SHMOBJ_BACKEND_SHM, 5000000000LL, seg);
    if (rc == 0)
        rc = shmobj_map_open(*seg, "bench", &m);
    if (rc != 0)
        die("child open", rc);
    return m;
}

/* The first steps of an H2 child: its bound, its CPU, its own mapping. */
static shmobj_map *child_begin(struct env *e, int k, shmobj_segment **seg)
{
    alarm(300);
    pin(k);
    return child_map(e, seg);
}

/* The start line of an H2 run in its shared page: every child says it is
 * ready and spins until the parent, once all are, lets them go together. */
static struct shared *shared_make(void)
{
    struct shared *sh = bench_shared_alloc(sizeof *sh);
    if (sh == NULL)
        die("mmap", 0);
    return sh;
}

static void child_start(struct shared *sh)
{
    __atomic_fetch_add(&sh->ready, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE))
        ;
}

static void children_go(struct shared *sh, int n)
{
    while (__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) < n)
        usleep(1000);
    __atomic_store_n(&sh->go, 1, __ATOMIC_RELEASE);
}

/* From the first child's start to the last one's end. */
static double children_span(const struct shared *sh, int n)
{
    double t0 = sh->t_start[0], t1 = sh->t_end[0];
    for (int i = 1; i < n; i++) {
        if (sh->t_start[i] < t0)
            t0 = sh->t_start[i];
        if (sh->t_end[i] > t1)
            t1 = sh->t_end[i];
    }
    return t1 - t0;
}

static int wait_children(pid_t *pids, int n)
{
    int ok = 1;
    for (int i = 0; i < n; i++) {
        int st;
        if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            ok = 0;
    }
    return ok;
}

static int run_h2_readers(const bench_ctx *ctx)
{
    int readers = (int)ctx->arg;
    size_t n = ctx->quick ? 200000 : 1000000;
    struct data d;
    struct env e;
    prepare(&d, 1, n);
    env_open(&e, &d);
    set_range(e.map, &d, 0, n);
    struct shared *sh = shared_make();
    pid_t pids[2];
    for (int r = 0; r < readers; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            shmobj_segment *seg;
            shmobj_map *m = child_begin(&e, r, &seg);
            uint32_t *order = malloc(n * sizeof *order);
            memcpy(order, d.order, n * sizeof *order);
            shuffle(order, n, 0x1234 + (uint64_t)r);
            child_start(sh);
            struct timespec c0, c1;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
            sh->t_start[r] = now_s();
            sh->bad[r] = get_all(m, &d, order);
            sh->t_end[r] = now_s();
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
            /* diagnostic: the rate per CPU second, which machine load does
             * not distort (the BENCH figure is wall-clock) */
            fprintf(stderr, "bench-map: reader %d: %.3f M gets per CPU second, %.3f M/s wall\n", r,
                    (double)n / ((double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9) / 1e6,
                    (double)n / (sh->t_end[r] - sh->t_start[r]) / 1e6);
            shmobj_map_close(m);
            shmobj_segment_close(seg);
            _exit(0);
        }
    }
    children_go(sh, readers);
    if (!wait_children(pids, readers))
        die("reader process", 0);
    size_t bad = 0;
    for (int r = 0; r < readers; r++)
        bad += sh->bad[r];
    if (bad != 0) {
        fprintf(stderr, "bench-map: %zu wrong values\n", bad);
        return 1;
    }
    report(ctx, "get-Mops/s", (double)n * readers / children_span(sh, readers) / 1e6);
    bench_shared_free(sh, sizeof *sh);
    env_close(&e);
    data_free(&d);
    return 0;
}

static int run_h2_writers(const bench_ctx *ctx)
{
    int writers = (int)ctx->arg;
    size_t n = ctx->quick ? 200000 : 1000000;
    struct data d;
    struct env e;
    prepare(&d, 1, n);
    env_open(&e, &d);
    struct shared *sh = shared_make();
    pid_t pids[H2_MAX_PROCS];
    for (int w = 0; w < writers; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            shmobj_segment *seg;
            shmobj_map *m = child_begin(&e, w, &seg);
            child_start(sh);
            sh->t_start[w] = now_s();
            set_range(m, &d, n * (size_t)w / (size_t)writers,
                      n * (size_t)(w + 1) / (size_t)writers);
            sh->t_end[w] = now_s();
            shmobj_map_close(m);
            shmobj_segment_close(seg);
            _exit(0);
        }
    }
    children_go(sh, writers);
    if (!wait_children(pids, writers))
        die("writer process", 0);
    double span = children_span(sh, writers);
    uint64_t count = 0;
    shmobj_map_count(e.map, &count);
    size_t missing = get_all(e.map, &d, d.order);
    if (count != n && missing == 0)
        missing = n > count ? n - count : count - n;
    report(ctx, "set-Mops/s", (double)n / span / 1e6);
    report(ctx, "keys-missing", (double)missing);
    int rc = shmobj_map_check(e.map);
    if (rc != 0)
        die("check", rc);
    bench_shared_free(sh, sizeof *sh);
    env_close(&e);
    data_free(&d);
    return 0;
}

/* ---- protocol ------------------------------------------------------------------ */

static const bench_entry table[] = {
    {"H1-64", "shmobj", run_h1, H1_SINGLE},
    {"H1-16", "shmobj", run_h1, H1_SINGLE},
    {"H1-64", "shmobj-batch", run_h1, H1_BATCH},
    {"H1-16", "shmobj-batch", run_h1, H1_BATCH},
    {"H1-64", "shmobj-huge", run_h1, H1_HUGE},
    /* shmobj-prefetch (each get preceded by shmobj_map_prefetch() of the
     * key PREFETCH_AHEAD gets later) measured no better than shmobj in
     * wall-clock runs on 2 loaded CPUs; it stays runnable by hand:
     * `bench-map --run H1-64 shmobj-prefetch`. */
    {"H2", "shmobj-1proc", run_h2_readers, 1},
    {"H2", "shmobj-2proc", run_h2_readers, 2},
    {"H2", "shmobj-Nproc", run_h2_writers, 4},
    {"H2", "shmobj-1w", run_h2_writers, 1},
    {"H2", "shmobj-8w", run_h2_writers, 8},
    {"H2", "shmobj-16w", run_h2_writers, 16},
    {NULL, NULL, NULL, 0},
};

static const bench_entry by_hand[] = {
    {"H1-64", "shmobj-prefetch", run_h1, H1_PREFETCH},
    {"H1-16", "shmobj-prefetch", run_h1, H1_PREFETCH},
    {NULL, NULL, NULL, 0},
};

int main(int argc, char **argv)
{
    /* unlisted variants: only an exact --run of one of them selects it */
    for (int i = 1; i + 2 < argc; i++)
        if (strcmp(argv[i], "--run") == 0 && strcmp(argv[i + 2], "shmobj-prefetch") == 0)
            return bench_main(argc, argv, by_hand);
    return bench_main(argc, argv, table);
}
