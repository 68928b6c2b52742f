/*
 * bench-queue - libshmobj's message queue on workloads W1 (bulk messages)
 * and W2 (64-byte messages) of doc/benchmarks.md, measured exactly like the
 * peers of bench-transport: consumer in the parent on the first allowed
 * CPU, producer in a child on the second; the clock starts in the producer
 * after both met at a barrier and stops in the consumer after the last byte
 * was summed with bench_sum64(); the run fails unless the consumer's sum
 * equals the producer's. Message i carries i in its first 8-byte word.
 *
 * Subjects:
 *   shmobj-copy      W1: the producer copies each message from private
 *                    memory with shmobj_queue_put_copy(); the consumer
 *                    takes it, reads every byte in place, and marks it done
 *                    (which frees it).
 *   shmobj-zerocopy  W1: the producer allocates each message block in the
 *                    segment (shmobj_queue_msg_alloc()) and builds the
 *                    message there, in place, from a 64 KiB pattern it
 *                    generated once (no private copy of a larger message
 *                    exists), with the stores include/shmobj/queue.h tells
 *                    a producer of outbound buffers to use, those of
 *                    shmobj_queue_put_copy(): memcpy of 64 KiB pieces,
 *                    streaming stores beyond 4 times the L2 (see
 *                    fill_streams()); the consumer as above.
 *   Both W1 subjects let waiting sides spin up to 100 us before they sleep
 *   (shmobj_queue_spin_set()): back-to-back messages then never pay a
 *   futex wake-up, an idle queue still costs no CPU.
 *   shmobj-spin      W2: 64-byte message blocks recycled through a second
 *                    queue (the zero-copy idiom for small messages); both
 *                    sides spin up to 20 us while waiting, then sleep
 *                    (shmobj_queue_spin_set(), see W2_SPIN_NS).
 *   shmobj-sleep     W2: the same, both sides sleep on the queue's futex.
 *   shmobj-batch     W2: as shmobj-spin, with every take and put of the
 *                    stream a batch of up to W2_BATCH references
 *                    (shmobj_queue_take_many(), shmobj_queue_put_many());
 *                    ping-pong with batches of one.
 *
 * Tuning (environment): BENCH_QUEUE_CAP (W1 queue capacity),
 * BENCH_QUEUE_CHUNK (bytes the zero-copy producer writes per step).
 */
#include "bench-util.h"

#include <stdalign.h>
#include <stdatomic.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <shmobj.h>

#define GIB (1024.0 * 1024.0 * 1024.0)
#define SEC INT64_C(1000000000)

/* ---- shared control block --------------------------------------------- */

struct ctl {
    alignas(64) atomic_uint arrived; /* processes at the barrier */
    alignas(64) uint64_t t0_ns;      /* producer: start of the timed part */
    uint64_t t1_ns;                  /* consumer: end of the timed part */
    uint64_t sent_sum;               /* producer: sum of all words sent */
    uint64_t recv_sum;               /* consumer: sum of all words read */
};

static void ctl_barrier(struct ctl *c)
{
    atomic_fetch_add(&c->arrived, 1);
    while (atomic_load(&c->arrived) < 2)
        bench_spin_once();
}

static size_t env_size(const char *name, size_t dflt)
{
    const char *s = getenv(name);
    if (s == NULL || *s == '\0')
        return dflt;
    return (size_t)strtoull(s, NULL, 0);
}

/* A segment private to this run: memfd, shared with the child by fork. */
static int segment_new(uint64_t size, shmobj_segment **seg)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.initial_size = size;
    return shmobj_segment_create("bench-queue", &o, seg);
}

/* ---- W1 ------------------------------------------------------------------ */

#define W1_SPIN_NS 100000

/* Write n bytes (a multiple of 64, dst 64-byte aligned) from src with
 * streaming stores (to memory, not kept in this core's cache), AVX2 where
 * the processor has it: the library's copy-in does the same beyond 4
 * times the L2. Below that both use memcpy, whose "rep movsb" writes whole
 * lines without reading them first; vector stores read every line of the
 * block first, and measured at a quarter to a third of the speed in one
 * series of runs, within a tenth of it in another (doc/benchmarks.md,
 * W1). */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void stream_avx2(void *dst, const void *src,
                                                        size_t n)
{
    __m256i *d = (__m256i *)dst;
    const __m256i *s = (const __m256i *)src;
    for (size_t i = 0; i < n / 32; i += 2) {
        __m256i a = _mm256_loadu_si256(s + i), b = _mm256_loadu_si256(s + i + 1);
        _mm256_stream_si256(d + i, a);
        _mm256_stream_si256(d + i + 1, b);
    }
}
#endif

static void fill_stream(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2")) {
        stream_avx2(dst, src, n);
        return;
    }
#endif
#if defined(__x86_64__)
    __m128i *d = (__m128i *)dst;
    const __m128i *s = (const __m128i *)src;
    for (size_t i = 0; i < n / 16; i += 4) {
        __m128i a = _mm_loadu_si128(s + i), b = _mm_loadu_si128(s + i + 1);
        __m128i c = _mm_loadu_si128(s + i + 2), e = _mm_loadu_si128(s + i + 3);
        _mm_stream_si128(d + i, a);
        _mm_stream_si128(d + i + 1, b);
        _mm_stream_si128(d + i + 2, c);
        _mm_stream_si128(d + i + 3, e);
    }
#else
    memcpy(dst, src, n);
#endif
}

/* Should a message of `size` bytes be written with streaming stores? The
 * rule of the library's copy-in (lib/queue/queue-msg.c, copy_in(), which gives
 * the measurements): cached stores up to 4 times this core's L2, streaming
 * beyond, where the messages in flight overflow the L3. (Smaller message
 * blocks come back from the queue's retire FIFO cold in the consumer's
 * caches, so plain stores do not fight it for the lines.) */
static int fill_streams(size_t size)
{
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    size_t l2b = l2 > 0 ? (size_t)l2 : (size_t)1 << 20;
    return size > 4 * l2b;
}

struct w1_job {
    int zerocopy;
    size_t size;
    uint64_t count;
    struct ctl *ctl;
    shmobj_segment *seg;
    shmobj_queue *q;
};

static int w1_producer(void *arg)
{
    struct w1_job *j = (struct w1_job *)arg;
    bench_pin(1);
    shmobj_queue_spin_set(j->q, W1_SPIN_NS);
    /* Map every page of the segment in before the clock starts, as the
     * peers fault their rings in: a forked process shares the segment's
     * pages but not the parent's page tables. */
    if (shmobj_segment_prefault(j->seg) != 0)
        return 2;
    uint64_t sent = 0, rest = 0;
    uint64_t *src = NULL;
    /* head: the pattern with word 0 set to the message's sequence number,
     * written as part of the first chunk (a separate store after the chunk
     * was streamed out would read its line back from memory) */
    alignas(64) static unsigned char pattern[64 << 10], head[64 << 10];
    size_t chunk = env_size("BENCH_QUEUE_CHUNK", sizeof pattern);
    if (chunk == 0 || chunk > sizeof pattern || chunk % 8 != 0)
        chunk = sizeof pattern;
    if (j->zerocopy) {
        bench_rng rng;
        bench_rng_seed(&rng, BENCH_W1_SEED);
        bench_rng_fill(&rng, pattern, sizeof pattern);
        /* the message: pattern repeated, word 0 the sequence number */
        for (size_t off = 0; off < j->size; off += chunk) {
            size_t n = j->size - off < chunk ? j->size - off : chunk;
            rest += bench_sum64(pattern, n);
        }
        uint64_t w0;
        memcpy(&w0, pattern, 8);
        rest -= w0;
        memcpy(head, pattern, sizeof head);
    } else if ((src = bench_w1_source(j->size, &rest)) == NULL) {
        return 3;
    }
    int stream = fill_streams(j->size);
    ctl_barrier(j->ctl);
    j->ctl->t0_ns = bench_now_ns();
    for (uint64_t i = 0; i < j->count; i++) {
        sent += rest + i;
        if (!j->zerocopy) {
            src[0] = i;
            int rc = shmobj_queue_put_copy(j->q, src, j->size, 0,
                                           SHMOBJ_FOREVER, NULL);
            if (rc != 0) {
                fprintf(stderr, "put_copy: %s\n", shmobj_strerror(rc));
                return 4;
            }
            continue;
        }
        shmobj_ref ref;
        unsigned char *data;
        int rc = shmobj_queue_msg_alloc(j->q, j->size, 0, &ref, (void **)&data);
        if (rc != 0) {
            fprintf(stderr, "msg_alloc: %s\n", shmobj_strerror(rc));
            return 5;
        }
        memcpy(head, &i, 8);
        for (size_t off = 0; off < j->size; off += chunk) {
            size_t n = j->size - off < chunk ? j->size - off : chunk;
            const unsigned char *from = off == 0 ? head : pattern;
            if (stream && n % 64 == 0)
                fill_stream(data + off, from, n);
            else
                memcpy(data + off, from, n);
        }
#if defined(__x86_64__)
        _mm_sfence(); /* any streaming stores before the publish */
#endif
        if (shmobj_queue_put(j->q, ref) != 0)
            return 6;
    }
    j->ctl->sent_sum = sent;
    free(src);
    return 0;
}

static int w1_consume(struct w1_job *j, uint64_t *sum_out)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < j->count; i++) {
        shmobj_ref ref;
        void *data;
        size_t len;
        if (shmobj_queue_take_timed(j->q, &ref, 20 * SEC) != 0 ||
            shmobj_queue_msg_data(j->q, ref, &data, &len) != 0 ||
            len != j->size)
            return -1;
        sum += bench_sum64(data, len);
        if (shmobj_queue_msg_done(j->q, ref) != 0)
            return -1;
    }
    *sum_out = sum;
    return 0;
}

static int w1_run(const bench_ctx *ctx)
{
    const bench_w1_param *ws = bench_w1_param_of(ctx->workload);
    if (ws == NULL)
        return bench_fail("unknown W1 workload %s", ctx->workload);
    struct w1_job j;
    memset(&j, 0, sizeof j);
    j.zerocopy = strcmp(ctx->subject, "shmobj-zerocopy") == 0;
    j.size = ws->size;
    j.count = ctx->quick ? ws->quick_count : ws->count;
    j.ctl = (struct ctl *)bench_shared_alloc(sizeof(struct ctl));
    if (j.ctl == NULL)
        return bench_fail("mmap: %s", strerror(errno));
    /* Bound the bytes in flight to about 2 MiB (what stays in cache), at
     * least 2 messages. */
    size_t cap = env_size("BENCH_QUEUE_CAP", 0);
    if (cap == 0) {
        cap = 2;
        while (cap * j.size < (2u << 20) && cap < 64)
            cap *= 2;
    }
    /* room for twice the blocks that can be in flight: the heap's size
     * classes round a request up, so a free block must be a bit larger */
    uint64_t seg_size = 2 * (uint64_t)(cap + 2) * (j.size + 4096) + (16u << 20);
    shmobj_segment *seg = NULL;
    int rc = segment_new(seg_size, &seg);
    if (rc != 0)
        return bench_fail("segment: %s", shmobj_strerror(rc));
    rc = shmobj_queue_create(seg, "w1", (uint32_t)cap, 0, &j.q);
    if (rc != 0)
        return bench_fail("queue: %s", shmobj_strerror(rc));
    j.seg = seg;
    pid_t pid = bench_fork(w1_producer, &j);
    if (pid < 0)
        return bench_fail("fork: %s", strerror(errno));
    bench_pin(0);
    shmobj_queue_spin_set(j.q, W1_SPIN_NS);
    if (shmobj_segment_prefault(seg) != 0)
        return bench_fail("prefault failed");
    uint64_t sum = 0;
    ctl_barrier(j.ctl);
    rc = w1_consume(&j, &sum);
    j.ctl->t1_ns = bench_now_ns();
    int st = bench_wait(pid, 120000);
    if (rc != 0 || st != 0)
        return bench_fail("%s: transfer failed (consumer %d, producer exit %d)",
                          ctx->subject, rc, st);
    if (sum != j.ctl->sent_sum)
        return bench_fail("%s: checksum mismatch: read %" PRIu64 ", sent %" PRIu64,
                          ctx->subject, sum, j.ctl->sent_sum);
    double secs = (double)(j.ctl->t1_ns - j.ctl->t0_ns) / 1e9;
    bench_report(ctx, "GiB/s", (double)j.size * (double)j.count / GIB / secs);
    shmobj_queue_close(j.q);
    shmobj_segment_close(seg);
    bench_shared_free(j.ctl, sizeof(struct ctl));
    return 0;
}

/* ---- W2 ------------------------------------------------------------------ */

#define W2_STREAM 4000000u
#define W2_STREAM_QUICK 1000000u
#define W2_POOL 1024u /* message blocks in circulation for the stream */
/* shmobj-spin: the queue's bounded spin. Every ping-pong wait ends within
 * it, so latency is that of pure spinning; a stream side that runs dry for
 * longer sleeps instead of fighting the other side for the lines it is
 * writing, which makes the stream faster than unbounded spinning. */
#define W2_SPIN_NS 20000

/* shmobj-batch: references per take_many / put_many of the stream */
#define W2_BATCH 32

struct w2_job {
    int spin;
    int batch;
    uint64_t stream_count, ping_count;
    struct ctl *ctl;
    shmobj_queue *work, *back; /* stream: producer -> consumer, and return */
    shmobj_queue *ping, *pong;
    shmobj_ref ping_msg;
};

static void w2_spin(struct w2_job *j, shmobj_queue *q)
{
    shmobj_queue_spin_set(q, j->spin ? W2_SPIN_NS : 0);
}

/* The child: producer of the stream, then the echo side of ping-pong. */
static int w2_child(void *arg)
{
    struct w2_job *j = (struct w2_job *)arg;
    bench_pin(1);
    alignas(64) uint64_t msg[BENCH_W2_MSG / 8];
    uint64_t rest, sent = 0;
    bench_w2_message(msg, &rest);
    w2_spin(j, j->work);
    w2_spin(j, j->back);
    w2_spin(j, j->ping);
    w2_spin(j, j->pong);
    ctl_barrier(j->ctl);
    j->ctl->t0_ns = bench_now_ns();
    for (uint64_t i = 0; j->batch && i < j->stream_count;) {
        shmobj_ref refs[W2_BATCH];
        size_t n, put;
        size_t want = j->stream_count - i < W2_BATCH ? (size_t)(j->stream_count - i)
                                                     : W2_BATCH;
        if (shmobj_queue_take_many(j->back, refs, want, SHMOBJ_FOREVER, &n) != 0)
            return 4;
        for (size_t k = 0; k < n; k++, i++) {
            void *data;
            if (shmobj_queue_msg_data(j->work, refs[k], &data, NULL) != 0)
                return 4;
            msg[0] = i;
            sent += rest + i;
            memcpy(data, msg, BENCH_W2_MSG);
        }
        if (shmobj_queue_put_many(j->work, refs, n, SHMOBJ_FOREVER, &put) != 0)
            return 5;
    }
    for (uint64_t i = 0; !j->batch && i < j->stream_count; i++) {
        shmobj_ref ref;
        void *data;
        if (shmobj_queue_take(j->back, &ref) != 0 ||
            shmobj_queue_msg_data(j->work, ref, &data, NULL) != 0)
            return 4;
        msg[0] = i;
        sent += rest + i;
        memcpy(data, msg, BENCH_W2_MSG);
        if (shmobj_queue_put(j->work, ref) != 0)
            return 5;
    }
    j->ctl->sent_sum = sent;
    /* echo: receive, read, send the same block back */
    uint64_t total = j->ping_count + BENCH_W2_PING_WARMUP;
    for (uint64_t i = 0; i < total; i++) {
        shmobj_ref ref;
        void *data;
        size_t n;
        if ((j->batch ? shmobj_queue_take_many(j->ping, &ref, 1, SHMOBJ_FOREVER, &n)
                      : shmobj_queue_take(j->ping, &ref)) != 0 ||
            shmobj_queue_msg_data(j->ping, ref, &data, NULL) != 0)
            return 6;
        bench_keep(bench_sum64(data, BENCH_W2_MSG));
        if ((j->batch ? shmobj_queue_put_many(j->pong, &ref, 1, SHMOBJ_FOREVER, &n)
                      : shmobj_queue_put(j->pong, ref)) != 0)
            return 7;
    }
    return 0;
}

/* The consumer hands blocks back W2_RETURN at a time: the producer has
 * W2_POOL of them, and returning them in runs keeps the two processes from
 * taking turns on the same line of the return queue for every message. */
#define W2_RETURN 32

static int w2_consume(struct w2_job *j, uint64_t *sum_out)
{
    uint64_t sum = 0;
    shmobj_ref held[W2_RETURN];
    unsigned nheld = 0;
    size_t batch = env_size("BENCH_QUEUE_W2_RETURN", W2_RETURN);
    if (batch == 0 || batch > W2_RETURN)
        batch = W2_RETURN;
    for (uint64_t i = 0; j->batch && i < j->stream_count;) {
        shmobj_ref refs[W2_BATCH];
        size_t n, put;
        if (shmobj_queue_take_many(j->work, refs, W2_BATCH, SHMOBJ_FOREVER, &n) != 0)
            return -1;
        for (size_t k = 0; k < n; k++) {
            void *data;
            if (shmobj_queue_msg_data(j->work, refs[k], &data, NULL) != 0)
                return -1;
            sum += bench_sum64(data, BENCH_W2_MSG);
        }
        i += n;
        if (shmobj_queue_put_many(j->back, refs, n, SHMOBJ_FOREVER, &put) != 0)
            return -1;
    }
    for (uint64_t i = 0; !j->batch && i < j->stream_count; i++) {
        shmobj_ref ref;
        void *data;
        if (shmobj_queue_take(j->work, &ref) != 0 ||
            shmobj_queue_msg_data(j->work, ref, &data, NULL) != 0)
            return -1;
        sum += bench_sum64(data, BENCH_W2_MSG);
        held[nheld++] = ref;
        if (nheld == batch || i + 1 == j->stream_count) {
            for (unsigned k = 0; k < nheld; k++)
                if (shmobj_queue_put(j->back, held[k]) != 0)
                    return -1;
            nheld = 0;
        }
    }
    *sum_out = sum;
    return 0;
}

static int w2_pingpong(struct w2_job *j, uint64_t *samples, uint64_t *bad)
{
    alignas(64) uint64_t msg[BENCH_W2_MSG / 8];
    uint64_t rest;
    bench_w2_message(msg, &rest);
    uint64_t total = j->ping_count + BENCH_W2_PING_WARMUP;
    *bad = 0;
    void *data;
    if (shmobj_queue_msg_data(j->ping, j->ping_msg, &data, NULL) != 0)
        return -1;
    for (uint64_t i = 0; i < total; i++) {
        msg[0] = i;
        uint64_t t0 = bench_now_ns();
        memcpy(data, msg, BENCH_W2_MSG);
        shmobj_ref ref;
        size_t n;
        if (j->batch) {
            if (shmobj_queue_put_many(j->ping, &j->ping_msg, 1, SHMOBJ_FOREVER, &n) != 0 ||
                shmobj_queue_take_many(j->pong, &ref, 1, SHMOBJ_FOREVER, &n) != 0 ||
                ref != j->ping_msg)
                return -1;
        } else if (shmobj_queue_put(j->ping, j->ping_msg) != 0 ||
                   shmobj_queue_take(j->pong, &ref) != 0 || ref != j->ping_msg)
            return -1;
        uint64_t got = bench_sum64(data, BENCH_W2_MSG);
        uint64_t t1 = bench_now_ns();
        if (got != rest + i)
            (*bad)++;
        if (i >= BENCH_W2_PING_WARMUP)
            samples[i - BENCH_W2_PING_WARMUP] = t1 - t0;
    }
    return 0;
}

static int w2_run(const bench_ctx *ctx)
{
    struct w2_job j;
    memset(&j, 0, sizeof j);
    j.batch = strcmp(ctx->subject, "shmobj-batch") == 0;
    j.spin = j.batch || strcmp(ctx->subject, "shmobj-spin") == 0;
    j.stream_count = ctx->quick ? W2_STREAM_QUICK : W2_STREAM;
    j.ping_count = ctx->quick ? BENCH_W2_PING_QUICK : BENCH_W2_PING;
    j.ctl = (struct ctl *)bench_shared_alloc(sizeof(struct ctl));
    uint64_t *samples = (uint64_t *)bench_alloc(j.ping_count * sizeof(uint64_t));
    if (j.ctl == NULL || samples == NULL)
        return bench_fail("out of memory");
    shmobj_segment *seg = NULL;
    int rc = segment_new(16u << 20, &seg);
    if (rc == 0)
        rc = shmobj_queue_create(seg, "work", W2_POOL, 0, &j.work);
    if (rc == 0)
        rc = shmobj_queue_create(seg, "back", W2_POOL, 0, &j.back);
    if (rc == 0)
        rc = shmobj_queue_create(seg, "ping", 64, 0, &j.ping);
    if (rc == 0)
        rc = shmobj_queue_create(seg, "pong", 64, 0, &j.pong);
    for (unsigned i = 0; rc == 0 && i < W2_POOL; i++) {
        shmobj_ref ref;
        void *p;
        rc = shmobj_queue_msg_alloc(j.back, BENCH_W2_MSG, 0, &ref, &p);
        if (rc == 0) {
            memset(p, 0, BENCH_W2_MSG);
            rc = shmobj_queue_put(j.back, ref);
        }
    }
    if (rc == 0)
        rc = shmobj_queue_msg_alloc(j.ping, BENCH_W2_MSG, 0, &j.ping_msg, NULL);
    if (rc != 0)
        return bench_fail("set-up: %s", shmobj_strerror(rc));

    pid_t pid = bench_fork(w2_child, &j);
    if (pid < 0)
        return bench_fail("fork: %s", strerror(errno));
    bench_pin(0);
    w2_spin(&j, j.work);
    w2_spin(&j, j.back);
    w2_spin(&j, j.ping);
    w2_spin(&j, j.pong);
    uint64_t sum = 0, bad = 0;
    ctl_barrier(j.ctl);
    rc = w2_consume(&j, &sum);
    j.ctl->t1_ns = bench_now_ns();
    if (rc == 0)
        rc = w2_pingpong(&j, samples, &bad);
    int st = bench_wait(pid, 120000);
    if (rc != 0 || st != 0)
        return bench_fail("%s: transfer failed (parent %d, child exit %d)",
                          ctx->subject, rc, st);
    if (sum != j.ctl->sent_sum)
        return bench_fail("%s: checksum mismatch: read %" PRIu64 ", sent %" PRIu64,
                          ctx->subject, sum, j.ctl->sent_sum);
    if (bad != 0)
        return bench_fail("%s: %" PRIu64 " ping-pong echoes differ", ctx->subject,
                          bad);
    double secs = (double)(j.ctl->t1_ns - j.ctl->t0_ns) / 1e9;
    bench_report(ctx, "Mmsgs/s", (double)j.stream_count / 1e6 / secs);
    bench_report(ctx, "pingpong-median-ns",
                 (double)bench_percentile(samples, j.ping_count, 50));
    bench_report(ctx, "pingpong-p99-ns",
                 (double)bench_percentile(samples, j.ping_count, 99));
    free(samples);
    shmobj_queue_close(j.work);
    shmobj_queue_close(j.back);
    shmobj_queue_close(j.ping);
    shmobj_queue_close(j.pong);
    shmobj_segment_close(seg);
    bench_shared_free(j.ctl, sizeof(struct ctl));
    return 0;
}

static const bench_entry table[] = {
    {"W1-400K", "shmobj-copy", w1_run, 0},
    {"W1-400K", "shmobj-zerocopy", w1_run, 0},
    {"W1-64K", "shmobj-copy", w1_run, 0},
    {"W1-64K", "shmobj-zerocopy", w1_run, 0},
    {"W1-1MiB", "shmobj-copy", w1_run, 0},
    {"W1-1MiB", "shmobj-zerocopy", w1_run, 0},
    {"W1-16MiB", "shmobj-copy", w1_run, 0},
    {"W1-16MiB", "shmobj-zerocopy", w1_run, 0},
    {"W2", "shmobj-spin", w2_run, 0},
    {"W2", "shmobj-sleep", w2_run, 0},
    {"W2", "shmobj-batch", w2_run, 0},
    {NULL, NULL, NULL, 0},
};

int main(int argc, char **argv)
{
    return bench_main(argc, argv, table);
}
