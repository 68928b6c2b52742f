/* bench-sweep: how cost grows with size and with processes
 * (doc/benchmarks.md, "How cost grows"). bench/sweep runs it and prints
 * the curves; it speaks the protocol of bench/README.md, but is built as
 * `shmobj-sweep` so that bench/run (which runs every `bench-*`) does not
 * pick its minutes up.
 *
 *   S1-map-100K, S1-map-1M, S1-map-10M
 *          the map at n items of the H1-16 shape (16-byte keys "%016zu",
 *          8-byte values i * 7 + 3): set all n, then 1,000,000 gets
 *          (200,000 with --quick) of random keys, every value compared.
 *          Subjects `shmobj` (shared memory, 4 KiB pages) and
 *          `shmobj-huge` (a memfd of 2 MiB pool pages, as bench-map's:
 *          as root it raises nr_hugepages for the run and restores it).
 *          Metrics set-ns, get-ns (mean per operation, wall clock),
 *          set-cpu-ns, get-cpu-ns (CPU time of the process per
 *          operation), bytes/item.
 *   S2-msg-4K ... S2-msg-64M
 *          messages of 4 KiB to 64 MiB from a producer process to a
 *          consumer process through a queue, copied in with
 *          shmobj_queue_put_copy(), every byte read and summed by the
 *          consumer; 1 GiB in all (256 MiB with --quick), at least 8
 *          messages. Subjects `shmobj-copy` and `shmobj-huge-copy` (the
 *          segment of pool pages). Metrics GiB/s, us/msg,
 *          consumer-cpu-us/msg.
 *   S3-map-1p ... S3-map-16p
 *          P processes on one map of 200,000 items (H1-16 shape), each
 *          doing 400,000 operations (100,000 with --quick): 9 gets of
 *          random keys for 1 set of a key of its own (rewriting the same
 *          value, so every get can be checked). Subject `shmobj`.
 *          Metrics Mops/s (all processes), Mops/s-per-proc,
 *          cpu-ns/op (CPU time per operation, which oversubscription
 *          does not inflate), wrong (values that did not match: must
 *          be 0).
 *   S3-queue-1p ... S3-queue-16p
 *          P processes on one queue of 1,024 slots with 64-byte messages:
 *          P/2 producers and P/2 consumers (1p: one process putting 64
 *          then taking 64), 1,000,000 messages in all (250,000 with
 *          --quick). Subject `shmobj`. Metrics Mmsgs/s, Mmsgs/s-per-proc,
 *          cpu-ns/msg, lost (messages sent and never taken, or a
 *          checksum that differs: must be 0).
 *
 * Processes are not pinned: with more processes than CPUs the scheduler
 * shares them out, which is what the sweep is meant to show. */
#include "bench-heap.h"
#include "bench-pool.h"
#include "bench-util.h"

#include "shmobj.h"
#include "shmobj/map.h"
#include "shmobj/queue.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define SEC INT64_C(1000000000)

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench-sweep: %s: %s\n", what, rc ? shmobj_strerror(rc) : "failed");
    exit(1);
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A segment of `size` bytes (growth to 4x): shm by name, or with `huge` a
 * memfd of pool pages. BENCH_SKIP when huge pages cannot be had. */
static int segment_make(uint64_t size, int huge, char *name, size_t nlen,
                        shmobj_segment **seg)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = size;
    o.max_size = size * 4;
    snprintf(name, nlen, "bench-sweep-%ld", (long)getpid());
    if (huge) {
        o.backend = SHMOBJ_BACKEND_MEMFD;
        o.flags = SHMOBJ_SEGMENT_HUGE_REQUIRE;
        if (!pool_ensure(size + size / 4))
            return bench_skip("huge pages: the pool is short (raise " NR_HUGEPAGES
                              " or run as root)");
    } else {
        shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    }
    int rc = shmobj_segment_create(name, &o, seg);
    if (huge && (rc == SHMOBJ_ENOMEM || rc == SHMOBJ_ENOTSUP))
        return bench_skip("huge pages: %s", shmobj_strerror(rc));
    if (rc != 0)
        die("segment create", rc);
    return 0;
}

static void segment_drop(shmobj_segment *seg, const char *name)
{
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* ---- keys of the H1-16 shape --------------------------------------------- */

static char *keys_make(size_t n)
{
    char *k = malloc(n * 16);
    if (!k)
        die("out of memory", 0);
    for (size_t i = 0; i < n; i++)
        bench_decimal(k + i * 16, 16, i);
    return k;
}

static uint64_t value_of(size_t i)
{
    return (uint64_t)i * 7 + 3;
}

/* ---- S1: the map's size curve --------------------------------------------- */

static int run_s1(const bench_ctx *ctx)
{
    size_t n = (size_t)ctx->arg;
    size_t gets = ctx->quick ? 200000 : 1000000;
    int huge = strcmp(ctx->subject, "shmobj-huge") == 0;
    char *keys = keys_make(n);
    uint32_t *order = malloc(gets * sizeof *order);
    if (!order)
        die("out of memory", 0);
    bench_rng rng;
    bench_rng_seed(&rng, 0x5eed1234abcdULL);
    for (size_t j = 0; j < gets; j++)
        order[j] = (uint32_t)bench_rng_below(&rng, n);
    char name[64];
    shmobj_segment *seg;
    int rc = segment_make((uint64_t)n * (16 + 8 + 96) + (64u << 20), huge, name,
                          sizeof name, &seg);
    if (rc != 0)
        return rc;
    uint64_t used0 = bench_heap_used(seg);
    shmobj_map *m;
    if ((rc = shmobj_map_create(seg, "sweep", &m)) != 0)
        die("map create", rc);
    double c0 = cpu_s();
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        uint64_t v = value_of(i);
        if ((rc = shmobj_map_set(m, keys + i * 16, 16, &v, 8)) != 0)
            die("set", rc);
    }
    uint64_t t1 = bench_now_ns();
    double c1 = cpu_s();
    size_t bad = 0;
    for (size_t j = 0; j < gets; j++) {
        size_t i = order[j], len = 0;
        uint64_t v = 0;
        if (shmobj_map_get(m, keys + i * 16, 16, &v, sizeof v, &len) != 0 ||
            len != 8 || v != value_of(i))
            bad++;
    }
    uint64_t t2 = bench_now_ns();
    double c2 = cpu_s();
    if (bad != 0)
        return bench_fail("%zu wrong values", bad);
    bench_report(ctx, "set-ns", (double)(t1 - t0) / (double)n);
    bench_report(ctx, "get-ns", (double)(t2 - t1) / (double)gets);
    /* CPU time per operation: what a loaded machine's waits do not inflate */
    bench_report(ctx, "set-cpu-ns", (c1 - c0) * 1e9 / (double)n);
    bench_report(ctx, "get-cpu-ns", (c2 - c1) * 1e9 / (double)gets);
    bench_report(ctx, "bytes/item",
                 (double)(long long)((double)(bench_heap_used(seg) - used0) / (double)n + 0.5));
    shmobj_map_close(m);
    segment_drop(seg, name);
    free(keys);
    free(order);
    return 0;
}

/* ---- S2: the message size curve ------------------------------------------- */

struct s2_ctl {
    volatile int ready;
    volatile uint64_t t0, sent_sum;
};

struct s2_job {
    shmobj_queue *q;
    struct s2_ctl *ctl;
    size_t size;
    uint64_t count;
};

static int s2_producer(void *p)
{
    struct s2_job *j = p;
    uint64_t *src = bench_alloc(j->size);
    if (!src)
        return 3;
    bench_rng rng;
    bench_rng_seed(&rng, 42);
    bench_rng_fill(&rng, src, j->size);
    uint64_t rest = bench_sum64(src, j->size) - src[0], sent = 0;
    __atomic_fetch_add(&j->ctl->ready, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&j->ctl->ready, __ATOMIC_ACQUIRE) < 2)
        bench_relax();
    j->ctl->t0 = bench_now_ns();
    for (uint64_t i = 0; i < j->count; i++) {
        src[0] = i;
        sent += rest + i;
        if (shmobj_queue_put_copy(j->q, src, j->size, 0, 20 * SEC, NULL) != 0)
            return 4;
    }
    j->ctl->sent_sum = sent;
    free(src);
    return 0;
}

static int run_s2(const bench_ctx *ctx)
{
    size_t size = (size_t)ctx->arg;
    int huge = strcmp(ctx->subject, "shmobj-huge-copy") == 0;
    double total = ctx->quick ? 256.0 * 1024 * 1024 : GIB;
    uint64_t count = (uint64_t)(total / (double)size);
    if (count < 8)
        count = 8;
    size_t cap = 2;
    while (cap * size < (2u << 20) && cap < 64)
        cap *= 2;
    char name[64];
    shmobj_segment *seg;
    int rc = segment_make(2 * (uint64_t)(cap + 2) * (size + 4096) + (16u << 20), huge,
                          name, sizeof name, &seg);
    if (rc != 0)
        return rc;
    struct s2_job j = {.size = size, .count = count};
    j.ctl = bench_shared_alloc(sizeof *j.ctl);
    if ((rc = shmobj_queue_create(seg, "s2", (uint32_t)cap, 0, &j.q)) != 0)
        die("queue create", rc);
    if (shmobj_segment_prefault(seg) != 0)
        die("prefault", 0);
    pid_t pid = bench_fork(s2_producer, &j);
    if (pid < 0)
        die("fork", 0);
    __atomic_fetch_add(&j.ctl->ready, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&j.ctl->ready, __ATOMIC_ACQUIRE) < 2)
        bench_relax();
    double c0 = cpu_s();
    uint64_t sum = 0;
    for (uint64_t i = 0; i < count; i++) {
        shmobj_ref ref;
        void *data;
        size_t len;
        if (shmobj_queue_take_timed(j.q, &ref, 20 * SEC) != 0 ||
            shmobj_queue_msg_data(j.q, ref, &data, &len) != 0 || len != size)
            return bench_fail("take failed");
        sum += bench_sum64(data, len);
        if (shmobj_queue_msg_done(j.q, ref) != 0)
            return bench_fail("done failed");
    }
    uint64_t t1 = bench_now_ns();
    double c1 = cpu_s();
    int st = bench_wait(pid, 120000);
    if (st != 0 || sum != j.ctl->sent_sum)
        return bench_fail("producer exit %d, sums %llu / %llu", st,
                          (unsigned long long)sum, (unsigned long long)j.ctl->sent_sum);
    double secs = (double)(t1 - j.ctl->t0) * 1e-9;
    bench_report(ctx, "GiB/s", (double)size * (double)count / GIB / secs);
    bench_report(ctx, "us/msg", secs * 1e6 / (double)count);
    /* the consumer's CPU time per message: its read of every byte, and
     * its waits when it spins */
    bench_report(ctx, "consumer-cpu-us/msg", (c1 - c0) * 1e6 / (double)count);
    shmobj_queue_close(j.q);
    segment_drop(seg, name);
    bench_shared_free(j.ctl, sizeof *j.ctl);
    return 0;
}

/* ---- S3: the process curves ------------------------------------------------ */

#define S3_MAX 16

struct s3_ctl {
    volatile int ready, go;
    volatile uint64_t taken;                 /* S3-queue: messages taken */
    volatile double t0[S3_MAX], t1[S3_MAX], cpu[S3_MAX];
    volatile uint64_t ops[S3_MAX], wrong[S3_MAX], sum[S3_MAX];
};

struct s3_job {
    struct s3_ctl *ctl;
    const char *name;
    const char *keys;
    size_t n, ops;
    int procs, me;
    uint64_t total; /* S3-queue */
};

static void s3_start(struct s3_job *j)
{
    __atomic_fetch_add(&j->ctl->ready, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&j->ctl->go, __ATOMIC_ACQUIRE))
        sched_yield();
    j->ctl->t0[j->me] = (double)bench_now_ns() * 1e-9;
    j->ctl->cpu[j->me] = cpu_s();
}

static void s3_end(struct s3_job *j, uint64_t ops)
{
    j->ctl->t1[j->me] = (double)bench_now_ns() * 1e-9;
    j->ctl->cpu[j->me] = cpu_s() - j->ctl->cpu[j->me];
    j->ctl->ops[j->me] = ops;
}

static shmobj_segment *s3_open(const struct s3_job *j)
{
    shmobj_segment *seg;
    int rc = shmobj_segment_open(j->name, SHMOBJ_BACKEND_SHM, 5 * SEC, &seg);
    if (rc != 0)
        die("open", rc);
    return seg;
}

static int s3_map_child(void *p)
{
    struct s3_job *j = p;
    shmobj_segment *seg = s3_open(j);
    shmobj_map *m;
    int rc = shmobj_map_open(seg, "sweep", &m);
    if (rc != 0)
        return 10;
    bench_rng rng;
    bench_rng_seed(&rng, 0x1234 + (uint64_t)j->me);
    /* the keys this process writes: its share of 0..n-1 */
    size_t from = j->n * (size_t)j->me / (size_t)j->procs;
    size_t to = j->n * (size_t)(j->me + 1) / (size_t)j->procs;
    uint64_t wrong = 0;
    s3_start(j);
    for (size_t k = 0; k < j->ops; k++) {
        if (k % 10 == 9 && to > from) {
            size_t i = from + (size_t)bench_rng_below(&rng, to - from);
            uint64_t v = value_of(i);
            if (shmobj_map_set(m, j->keys + i * 16, 16, &v, 8) != 0)
                wrong++;
            continue;
        }
        size_t i = (size_t)bench_rng_below(&rng, j->n), len = 0;
        uint64_t v = 0;
        if (shmobj_map_get(m, j->keys + i * 16, 16, &v, sizeof v, &len) != 0 ||
            len != 8 || v != value_of(i))
            wrong++;
    }
    s3_end(j, j->ops);
    j->ctl->wrong[j->me] = wrong;
    shmobj_map_close(m);
    shmobj_segment_close(seg);
    return 0;
}

/* P/2 producers put their messages; consumers take until all are taken.
 * Word 0 of a message: producer << 40 | sequence; the sum of what was
 * taken must equal the sum of what was sent. */
static int s3_queue_child(void *p)
{
    struct s3_job *j = p;
    shmobj_segment *seg = s3_open(j);
    shmobj_queue *q;
    if (shmobj_queue_open(seg, "sweep", &q) != 0)
        return 10;
    uint64_t msg[8] = {0}, ops = 0, sum = 0;
    int producers = j->procs == 1 ? 1 : j->procs / 2;
    uint64_t per = j->total / (uint64_t)producers;
    s3_start(j);
    if (j->procs == 1) {
        /* alone: put 64, take 64, and again */
        for (uint64_t s = 0; s < per; s += 64) {
            uint64_t k = per - s < 64 ? per - s : 64;
            for (uint64_t i = 0; i < k; i++) {
                msg[0] = s + i;
                if (shmobj_queue_put_copy(q, msg, sizeof msg, 0, 5 * SEC, NULL) != 0)
                    return 11;
                j->ctl->sum[0] += s + i;
            }
            for (uint64_t i = 0; i < k; i++) {
                shmobj_ref ref;
                void *data;
                if (shmobj_queue_take_timed(q, &ref, 5 * SEC) != 0 ||
                    shmobj_queue_msg_data(q, ref, &data, NULL) != 0)
                    return 12;
                memcpy(msg, data, 8);
                sum += msg[0];
                shmobj_queue_msg_done(q, ref);
                ops++;
            }
        }
        j->ctl->sum[0] -= sum;
        __atomic_fetch_add(&j->ctl->taken, ops, __ATOMIC_SEQ_CST);
    } else if (j->me < producers) {
        for (uint64_t s = 0; s < per; s++) {
            msg[0] = (uint64_t)j->me << 40 | s;
            if (shmobj_queue_put_copy(q, msg, sizeof msg, 0, 20 * SEC, NULL) != 0)
                return 11;
            sum += msg[0];
            ops++;
        }
        __atomic_fetch_add(&j->ctl->sum[0], sum, __ATOMIC_SEQ_CST);
    } else {
        uint64_t all = per * (uint64_t)producers;
        while (__atomic_load_n(&j->ctl->taken, __ATOMIC_ACQUIRE) < all) {
            shmobj_ref ref;
            void *data;
            int rc = shmobj_queue_take_timed(q, &ref, 100 * 1000000);
            if (rc == SHMOBJ_ETIMEDOUT)
                continue;
            if (rc != 0 || shmobj_queue_msg_data(q, ref, &data, NULL) != 0)
                return 12;
            memcpy(msg, data, 8);
            sum += msg[0];
            shmobj_queue_msg_done(q, ref);
            ops++;
            __atomic_fetch_add(&j->ctl->taken, 1, __ATOMIC_SEQ_CST);
        }
        __atomic_fetch_sub(&j->ctl->sum[0], sum, __ATOMIC_SEQ_CST);
    }
    s3_end(j, ops);
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
    return 0;
}

static int run_s3(const bench_ctx *ctx)
{
    int procs = (int)ctx->arg;
    int queue = strncmp(ctx->workload, "S3-queue", 8) == 0;
    struct s3_job j;
    memset(&j, 0, sizeof j);
    j.procs = procs;
    j.n = 200000;
    j.ops = ctx->quick ? 100000 : 400000;
    j.total = ctx->quick ? 250000 : 1000000;
    j.ctl = bench_shared_alloc(sizeof *j.ctl);
    char name[64];
    shmobj_segment *seg;
    int rc = segment_make(queue ? 64u << 20 : (uint64_t)j.n * 200 + (64u << 20), 0,
                          name, sizeof name, &seg);
    if (rc != 0)
        return rc;
    j.name = name;
    shmobj_map *m = NULL;
    shmobj_queue *q = NULL;
    char *keys = NULL;
    if (queue) {
        if ((rc = shmobj_queue_create(seg, "sweep", 1024, 0, &q)) != 0)
            die("queue create", rc);
    } else {
        keys = keys_make(j.n);
        j.keys = keys;
        if ((rc = shmobj_map_create(seg, "sweep", &m)) != 0)
            die("map create", rc);
        for (size_t i = 0; i < j.n; i++) {
            uint64_t v = value_of(i);
            if ((rc = shmobj_map_set(m, keys + i * 16, 16, &v, 8)) != 0)
                die("set", rc);
        }
    }
    pid_t pids[S3_MAX];
    for (int k = 0; k < procs; k++) {
        j.me = k;
        pids[k] = bench_fork(queue ? s3_queue_child : s3_map_child, &j);
        if (pids[k] < 0)
            die("fork", 0);
    }
    while (__atomic_load_n(&j.ctl->ready, __ATOMIC_ACQUIRE) < procs)
        usleep(1000);
    __atomic_store_n(&j.ctl->go, 1, __ATOMIC_RELEASE);
    int failed = 0;
    for (int k = 0; k < procs; k++)
        if (bench_wait(pids[k], 600000) != 0)
            failed = 1;
    if (failed)
        return bench_fail("a child failed");
    double t0 = j.ctl->t0[0], t1 = j.ctl->t1[0], cpu = 0;
    uint64_t ops = 0, wrong = 0;
    for (int k = 0; k < procs; k++) {
        if (j.ctl->t0[k] < t0)
            t0 = j.ctl->t0[k];
        if (j.ctl->t1[k] > t1)
            t1 = j.ctl->t1[k];
        cpu += j.ctl->cpu[k];
        ops += j.ctl->ops[k];
        wrong += j.ctl->wrong[k];
    }
    if (queue) {
        /* every message counted once, by its consumer (1p: by itself) */
        uint64_t moved = __atomic_load_n(&j.ctl->taken, __ATOMIC_ACQUIRE);
        int producers = procs == 1 ? 1 : procs / 2;
        uint64_t sent = j.total / (uint64_t)producers * (uint64_t)producers;
        uint64_t lost = (sent > moved ? sent - moved : moved - sent) + (j.ctl->sum[0] != 0);
        bench_report(ctx, "Mmsgs/s", (double)moved / (t1 - t0) / 1e6);
        bench_report(ctx, "Mmsgs/s-per-proc", (double)moved / (t1 - t0) / 1e6 / procs);
        bench_report(ctx, "cpu-ns/msg", cpu * 1e9 / (double)moved);
        bench_report(ctx, "lost", (double)lost);
        shmobj_queue_close(q);
    } else {
        bench_report(ctx, "Mops/s", (double)ops / (t1 - t0) / 1e6);
        bench_report(ctx, "Mops/s-per-proc", (double)ops / (t1 - t0) / 1e6 / procs);
        bench_report(ctx, "cpu-ns/op", cpu * 1e9 / (double)ops);
        bench_report(ctx, "wrong", (double)wrong);
        if ((rc = shmobj_map_check(m)) != 0)
            die("check", rc);
        shmobj_map_close(m);
        free(keys);
    }
    segment_drop(seg, name);
    bench_shared_free(j.ctl, sizeof *j.ctl);
    return wrong == 0 ? 0 : 1;
}

/* ---- protocol ------------------------------------------------------------- */

#define K 1024u
#define M (1024u * 1024u)

static const bench_entry table[] = {
    {"S1-map-100K", "shmobj", run_s1, 100000},
    {"S1-map-100K", "shmobj-huge", run_s1, 100000},
    {"S1-map-1M", "shmobj", run_s1, 1000000},
    {"S1-map-1M", "shmobj-huge", run_s1, 1000000},
    {"S1-map-10M", "shmobj", run_s1, 10000000},
    {"S1-map-10M", "shmobj-huge", run_s1, 10000000},
    {"S2-msg-4K", "shmobj-copy", run_s2, 4 * K},
    {"S2-msg-4K", "shmobj-huge-copy", run_s2, 4 * K},
    {"S2-msg-64K", "shmobj-copy", run_s2, 64 * K},
    {"S2-msg-64K", "shmobj-huge-copy", run_s2, 64 * K},
    {"S2-msg-1M", "shmobj-copy", run_s2, M},
    {"S2-msg-1M", "shmobj-huge-copy", run_s2, M},
    {"S2-msg-16M", "shmobj-copy", run_s2, 16 * M},
    {"S2-msg-16M", "shmobj-huge-copy", run_s2, 16 * M},
    {"S2-msg-64M", "shmobj-copy", run_s2, 64 * M},
    {"S2-msg-64M", "shmobj-huge-copy", run_s2, 64 * M},
    {"S3-map-1p", "shmobj", run_s3, 1},
    {"S3-map-2p", "shmobj", run_s3, 2},
    {"S3-map-4p", "shmobj", run_s3, 4},
    {"S3-map-8p", "shmobj", run_s3, 8},
    {"S3-map-16p", "shmobj", run_s3, 16},
    {"S3-queue-1p", "shmobj", run_s3, 1},
    {"S3-queue-2p", "shmobj", run_s3, 2},
    {"S3-queue-4p", "shmobj", run_s3, 4},
    {"S3-queue-8p", "shmobj", run_s3, 8},
    {"S3-queue-16p", "shmobj", run_s3, 16},
    {NULL, NULL, NULL, 0},
};

int main(int argc, char **argv)
{
    return bench_main(argc, argv, table);
}
