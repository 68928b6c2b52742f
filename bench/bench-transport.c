/*
 * bench-transport - the libc peers of workloads W1 (bulk messages) and W2
 * (64-byte messages) of doc/benchmarks.md: memcpy, pipe, Unix stream socket
 * and a hand-written single-producer/single-consumer ring in a MAP_SHARED
 * mapping that waits either by busy-spinning or on a futex.
 *
 * Every subject moves the same bytes and the consumer reads every one of
 * them with bench_sum64(); the producer sums what it sent and the run fails
 * unless both sums agree. Each message carries its sequence number in its
 * first word, so no two messages are the same. The consumer runs in the
 * parent on the first allowed CPU, the producer in a child on the second.
 * The clock starts in the producer after both sides met at a barrier (all
 * buffers allocated and faulted in) and stops in the consumer after the
 * last byte was summed; CLOCK_MONOTONIC is system-wide.
 *
 * shm-floor (W1) is not a transport to beat but the floor of a handoff of
 * whole messages between two processes, with no library: the producer
 * memcpy()s each message into one of a few message-sized buffers of a
 * MAP_SHARED mapping (as many as our queue's W1 capacity: bytes in flight
 * about 2 MiB, at least 2) and sets the buffer's flag; the consumer waits
 * for the flag, sums the buffer and clears the flag. Both spin. What a
 * queue adds over it is the queue; what it loses against `memcpy` (one
 * process) is the second core reading lines the first one wrote.
 *
 * The rings are meant to be the strong, honest bar a queue must clear:
 * head and tail on their own cache lines, each side keeps a private copy of
 * the other's index and rereads the shared one only when that copy says
 * full/empty; the futex variant keeps a waiter count per index so the
 * other side issues FUTEX_WAKE only when somebody actually sleeps, and it
 * never spins (it is the "sleeping" baseline).
 */
#include "bench-util.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#define CACHELINE 64

/* ---- shared control block: barrier, clock, checksums ------------------ */

struct ctl {
    alignas(CACHELINE) atomic_uint arrived; /* processes at the barrier */
    alignas(CACHELINE) uint64_t t0_ns;      /* producer: start of the timed part */
    uint64_t t1_ns;                         /* consumer: end of the timed part */
    uint64_t sent_sum;                      /* producer: sum of all words sent */
    uint64_t recv_sum;                      /* consumer: sum of all words read */
};

static void ctl_barrier(struct ctl *c)
{
    atomic_fetch_add(&c->arrived, 1);
    while (atomic_load(&c->arrived) < 2)
        bench_spin_once();
}

/* ---- SPSC ring -------------------------------------------------------- */

/*
 * Slot counters run freely modulo 2^32 (nslots is a power of two well below
 * 2^31, so head - tail is always the fill level) and are the futex words.
 */
struct ring {
    alignas(CACHELINE) atomic_uint head;         /* slots published; producer writes */
    alignas(CACHELINE) atomic_uint tail;         /* slots released; consumer writes */
    alignas(CACHELINE) atomic_ullong head_waiters; /* consumer asleep on head: 1 << 32 | seen, or 0 */
    alignas(CACHELINE) atomic_ullong tail_waiters; /* producer asleep on tail: 1 << 32 | seen, or 0 */
    alignas(CACHELINE) unsigned char data[];     /* nslots * slot bytes */
};

/* One side's private view: its own index and its copy of the other's. */
struct ring_end {
    struct ring *r;
    unsigned char *data;
    uint32_t pos;   /* own index (head for the producer, tail for the consumer) */
    uint32_t cache; /* last value read of the other side's index */
    uint32_t n, mask;
    uint32_t batch; /* consumer: store tail once per this many slots (power of 2) */
    size_t slot;
    int futex;
};

static size_t ring_bytes(uint32_t nslots, size_t slot)
{
    return sizeof(struct ring) + (size_t)nslots * slot;
}

static struct ring *ring_create(uint32_t nslots, size_t slot)
{
    return (struct ring *)bench_shared_alloc(ring_bytes(nslots, slot));
}

static void ring_end_init(struct ring_end *e, struct ring *r, uint32_t nslots, size_t slot, int futex)
{
    e->r = r;
    e->data = r->data;
    e->pos = 0;
    e->cache = 0;
    e->n = nslots;
    e->mask = nslots - 1;
    e->batch = 1;
    e->slot = slot;
    e->futex = futex;
}

/*
 * A sleeper announces itself in its waiters word as (1 << 32 | seen): "I
 * sleep until the index differs from seen". The waker, after storing a new
 * index v, wakes only a sleeper announced with seen != v and clears the
 * word while doing so; later stores then issue no FUTEX_WAKE while the
 * woken side is still on its way out of the kernel (about 15 us here). A
 * sleeper announced with seen == v has already read v, so that store is
 * no news to it and must not use up its wake.
 */
static void futex_sleep(atomic_uint *word, atomic_ullong *waiters, uint32_t seen)
{
    /* Dekker with the waker: announce before rereading the index here,
     * index store before reading the announcement there; all seq_cst.
     * FUTEX_WAIT rechecks the index in the kernel, so a wake that comes
     * before this side is queued is not lost either. */
    atomic_store(waiters, (1ull << 32) | seen);
    if (atomic_load(word) == seen)
        syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen, NULL, NULL, 0);
    atomic_store(waiters, 0);
}

static inline void ring_store_index(atomic_uint *word, atomic_ullong *waiters, uint32_t v, int futex)
{
    if (futex) {
        atomic_store(word, v);
        unsigned long long w = atomic_load(waiters);
        while (w != 0 && (uint32_t)w != v) {
            if (atomic_compare_exchange_weak(waiters, &w, 0)) {
                syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, 1, NULL, NULL, 0);
                break;
            }
        }
    } else {
        atomic_store_explicit(word, v, memory_order_release);
    }
}

/* Producer: the next free slot, waiting while the ring is full. */
static inline unsigned char *ring_claim(struct ring_end *e)
{
    if (e->pos - e->cache >= e->n) {
        e->cache = atomic_load_explicit(&e->r->tail, memory_order_acquire);
        while (e->pos - e->cache >= e->n) {
            if (e->futex)
                futex_sleep(&e->r->tail, &e->r->tail_waiters, e->cache);
            else
                bench_spin_once();
            e->cache = atomic_load_explicit(&e->r->tail, memory_order_acquire);
        }
    }
    return e->data + (size_t)(e->pos & e->mask) * e->slot;
}

static inline void ring_publish(struct ring_end *e)
{
    e->pos++;
    ring_store_index(&e->r->head, &e->r->head_waiters, e->pos, e->futex);
}

/* Consumer: the oldest published slot, waiting while the ring is empty. */
static inline const unsigned char *ring_peek(struct ring_end *e)
{
    if (e->pos == e->cache) {
        e->cache = atomic_load_explicit(&e->r->head, memory_order_acquire);
        while (e->pos == e->cache) {
            if (e->futex)
                futex_sleep(&e->r->head, &e->r->head_waiters, e->cache);
            else
                bench_spin_once();
            e->cache = atomic_load_explicit(&e->r->head, memory_order_acquire);
        }
    }
    return e->data + (size_t)(e->pos & e->mask) * e->slot;
}

static inline void ring_release(struct ring_end *e)
{
    e->pos++;
    if ((e->pos & (e->batch - 1)) != 0)
        return;
    ring_store_index(&e->r->tail, &e->r->tail_waiters, e->pos, e->futex);
}

/* Ring geometry; BENCH_RING_SLOT / BENCH_RING_SLOTS override W1's (tuning). */
static size_t env_size(const char *name, size_t dflt)
{
    const char *s = getenv(name);
    if (s == NULL || *s == '\0')
        return dflt;
    return (size_t)strtoull(s, NULL, 0);
}

/* ---- fd helpers ------------------------------------------------------- */

static int write_full(int fd, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_full(int fd, void *p, size_t n)
{
    unsigned char *b = (unsigned char *)p;
    while (n > 0) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

#define STREAM_BUF (256 * 1024)

/* Read `total` bytes from a stream in cache-sized pieces, summing every
 * 8-byte word (a word split between two reads is carried over). */
static int stream_consume(int fd, uint64_t total, uint64_t *sum_out)
{
    unsigned char *buf = (unsigned char *)bench_alloc(STREAM_BUF);
    if (buf == NULL)
        return -1;
    uint64_t got = 0, sum = 0;
    size_t have = 0;
    while (got < total) {
        size_t want = STREAM_BUF - have;
        if (want > total - got)
            want = (size_t)(total - got);
        ssize_t r = read(fd, buf + have, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(buf);
            return -1;
        }
        got += (uint64_t)r;
        have += (size_t)r;
        size_t whole = have & ~(size_t)7;
        sum += bench_sum64(buf, whole);
        if (have != whole)
            memmove(buf, buf + whole, have - whole);
        have -= whole;
    }
    free(buf);
    *sum_out = sum;
    return 0;
}

/* ---- W1: bulk messages ------------------------------------------------ */

#define GIB (1024.0 * 1024.0 * 1024.0)

enum transport { T_PIPE, T_SOCK, T_RING_SPIN, T_RING_FUTEX };

static enum transport transport_of(const char *subject)
{
    if (strcmp(subject, "pipe") == 0)
        return T_PIPE;
    if (strcmp(subject, "unix-socket") == 0)
        return T_SOCK;
    if (strcmp(subject, "shm-ring-spin") == 0)
        return T_RING_SPIN;
    return T_RING_FUTEX;
}

struct w1_job {
    enum transport t;
    size_t size;
    uint64_t count;
    struct ctl *ctl;
    int fd;                 /* pipe / socket: this side's end */
    struct ring *ring;
    uint32_t nslots;
    size_t slot;
};

static int w1_producer(void *arg)
{
    struct w1_job *j = (struct w1_job *)arg;
    bench_pin(1);
    uint64_t rest, sent = 0;
    uint64_t *src = bench_w1_source(j->size, &rest);
    if (src == NULL)
        return 3;
    struct ring_end e = {0};
    if (j->ring != NULL)
        ring_end_init(&e, j->ring, j->nslots, j->slot, j->t == T_RING_FUTEX);

    ctl_barrier(j->ctl);
    j->ctl->t0_ns = bench_now_ns();
    for (uint64_t i = 0; i < j->count; i++) {
        src[0] = i;
        sent += rest + src[0];
        if (j->ring == NULL) {
            if (write_full(j->fd, src, j->size) != 0)
                return 4;
            continue;
        }
        const unsigned char *from = (const unsigned char *)src;
        for (size_t off = 0; off < j->size; off += j->slot) {
            size_t len = j->size - off < j->slot ? j->size - off : j->slot;
            memcpy(ring_claim(&e), from + off, len);
            ring_publish(&e);
        }
    }
    j->ctl->sent_sum = sent;
    free(src);
    return 0;
}

static int w1_consume_ring(struct w1_job *j, uint64_t *sum_out)
{
    struct ring_end e = {0};
    ring_end_init(&e, j->ring, j->nslots, j->slot, j->t == T_RING_FUTEX);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < j->count; i++) {
        for (size_t off = 0; off < j->size; off += j->slot) {
            size_t len = j->size - off < j->slot ? j->size - off : j->slot;
            sum += bench_sum64(ring_peek(&e), len);
            ring_release(&e);
        }
    }
    *sum_out = sum;
    return 0;
}

/* ---- W1 floor: whole messages handed over through a shared buffer ----- */

/* One buffer's flag on its own line: 1 while it holds a message the
 * consumer has not summed (producer stores 1 with release after the copy,
 * consumer stores 0 with release after the sum). */
struct floor_flag {
    alignas(CACHELINE) atomic_uint full;
};

struct floor_job {
    size_t size;
    uint64_t count;
    uint32_t nbuf;
    struct ctl *ctl;
    struct floor_flag *flags; /* nbuf of them */
    unsigned char *bufs;      /* nbuf * size bytes, 64-byte aligned each */
};

/* Buffers: as many as the W1 queue's capacity (bench-queue.c: about
 * 2 MiB in flight, at least 2, at most 64), so both hand over alike. */
static uint32_t floor_nbuf(size_t size)
{
    uint32_t n = 2;
    while ((size_t)n * size < (2u << 20) && n < 64)
        n *= 2;
    return n;
}

static size_t floor_stride(size_t size)
{
    return (size + CACHELINE - 1) & ~(size_t)(CACHELINE - 1);
}

static int floor_producer(void *arg)
{
    struct floor_job *j = (struct floor_job *)arg;
    bench_pin(1);
    uint64_t rest, sent = 0;
    uint64_t *src = bench_w1_source(j->size, &rest);
    if (src == NULL)
        return 3;
    /* Map the buffers' pages in this process too before the clock starts
     * (a forked child shares the pages, not the parent's page tables), as
     * bench-queue prefaults its segment on both sides. */
    size_t bytes = (size_t)j->nbuf * floor_stride(j->size);
    for (size_t off = 0; off < bytes; off += 4096)
        ((volatile unsigned char *)j->bufs)[off] = 0;
    ctl_barrier(j->ctl);
    j->ctl->t0_ns = bench_now_ns();
    for (uint64_t i = 0; i < j->count; i++) {
        uint32_t b = (uint32_t)(i % j->nbuf);
        while (atomic_load_explicit(&j->flags[b].full, memory_order_acquire) != 0)
            bench_spin_once();
        src[0] = i;
        sent += rest + i;
        memcpy(j->bufs + (size_t)b * floor_stride(j->size), src, j->size);
        atomic_store_explicit(&j->flags[b].full, 1, memory_order_release);
    }
    j->ctl->sent_sum = sent;
    free(src);
    return 0;
}

static int w1_floor(const bench_ctx *ctx, const bench_w1_param *ws)
{
    struct floor_job j;
    memset(&j, 0, sizeof j);
    j.size = ws->size;
    j.count = ctx->quick ? ws->quick_count : ws->count;
    j.nbuf = floor_nbuf(j.size);
    size_t flags_bytes = j.nbuf * sizeof(struct floor_flag);
    size_t bufs_bytes = (size_t)j.nbuf * floor_stride(j.size);
    j.ctl = (struct ctl *)bench_shared_alloc(sizeof(struct ctl));
    j.flags = (struct floor_flag *)bench_shared_alloc(flags_bytes);
    j.bufs = (unsigned char *)bench_shared_alloc(bufs_bytes);
    if (j.ctl == NULL || j.flags == NULL || j.bufs == NULL)
        return bench_fail("mmap: %s", strerror(errno));
    pid_t pid = bench_fork(floor_producer, &j);
    if (pid < 0)
        return bench_fail("fork: %s", strerror(errno));
    bench_pin(0);
    uint64_t sum = 0;
    ctl_barrier(j.ctl);
    for (uint64_t i = 0; i < j.count; i++) {
        uint32_t b = (uint32_t)(i % j.nbuf);
        while (atomic_load_explicit(&j.flags[b].full, memory_order_acquire) == 0)
            bench_spin_once();
        sum += bench_sum64(j.bufs + (size_t)b * floor_stride(j.size), j.size);
        atomic_store_explicit(&j.flags[b].full, 0, memory_order_release);
    }
    j.ctl->t1_ns = bench_now_ns();
    int st = bench_wait(pid, 60000);
    if (st != 0)
        return bench_fail("shm-floor: producer exit %d", st);
    if (sum != j.ctl->sent_sum)
        return bench_fail("shm-floor: checksum mismatch: read %" PRIu64 ", sent %" PRIu64, sum,
                          j.ctl->sent_sum);
    double secs = (double)(j.ctl->t1_ns - j.ctl->t0_ns) / 1e9;
    bench_report(ctx, "GiB/s", (double)j.size * (double)j.count / GIB / secs);
    bench_shared_free(j.bufs, bufs_bytes);
    bench_shared_free(j.flags, flags_bytes);
    bench_shared_free(j.ctl, sizeof(struct ctl));
    return 0;
}

static int w1_memcpy(const bench_ctx *ctx, const bench_w1_param *ws)
{
    bench_pin(0);
    size_t size = ws->size;
    uint64_t count = ctx->quick ? ws->quick_count : ws->count;
    uint64_t rest;
    uint64_t *src = bench_w1_source(size, &rest);
    uint64_t *dst = (uint64_t *)bench_alloc(size);
    if (src == NULL || dst == NULL)
        return bench_fail("out of memory");
    memcpy(dst, src, size); /* warm both, as the transports' barrier does */
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < count; i++) {
        src[0] = i;
        memcpy(dst, src, size);
        bench_keep((uint64_t)(uintptr_t)dst);
    }
    uint64_t t1 = bench_now_ns();
    int ok = dst[0] == count - 1 && memcmp(dst, src, size) == 0;
    free(src);
    free(dst);
    if (!ok)
        return bench_fail("memcpy: destination differs from source");
    bench_report(ctx, "GiB/s", (double)size * (double)count / GIB / ((double)(t1 - t0) / 1e9));
    return 0;
}

static int set_pipe_size(int fd, int size)
{
    return fcntl(fd, F_SETPIPE_SZ, size) < 0 ? -1 : 0;
}

static void set_sock_bufs(int fd, int size)
{
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}

static int w1_run(const bench_ctx *ctx)
{
    const bench_w1_param *ws = bench_w1_param_of(ctx->workload);
    if (ws == NULL)
        return bench_fail("unknown W1 workload %s", ctx->workload);
    if (strcmp(ctx->subject, "memcpy") == 0)
        return w1_memcpy(ctx, ws);
    if (strcmp(ctx->subject, "shm-floor") == 0)
        return w1_floor(ctx, ws);

    struct w1_job j;
    memset(&j, 0, sizeof j);
    j.t = transport_of(ctx->subject);
    j.size = ws->size;
    j.count = ctx->quick ? ws->quick_count : ws->count;
    j.ctl = (struct ctl *)bench_shared_alloc(sizeof(struct ctl));
    if (j.ctl == NULL)
        return bench_fail("mmap: %s", strerror(errno));
    int fds[2] = {-1, -1};
    if (j.t == T_PIPE) {
        if (pipe(fds) != 0)
            return bench_fail("pipe: %s", strerror(errno));
        /* As large as an unprivileged process may ask: fewer wakeups. */
        set_pipe_size(fds[1], 1 << 20);
    } else if (j.t == T_SOCK) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)
            return bench_fail("socketpair: %s", strerror(errno));
        set_sock_bufs(fds[0], 4 << 20);
        set_sock_bufs(fds[1], 4 << 20);
    } else {
        j.slot = env_size("BENCH_RING_SLOT", 128 << 10);
        j.nslots = (uint32_t)env_size("BENCH_RING_SLOTS", 32);
        if (j.slot % 8 != 0 || j.nslots == 0 || (j.nslots & (j.nslots - 1)) != 0)
            return bench_fail("ring geometry: slot must be a multiple of 8, slots a power of 2");
        j.ring = ring_create(j.nslots, j.slot);
        if (j.ring == NULL)
            return bench_fail("mmap: %s", strerror(errno));
    }

    /* Parent = consumer on CPU 0, child = producer on CPU 1. The consumer
     * reads from fds[0] (pipe read end / one socket end). */
    j.fd = fds[1];
    pid_t pid = bench_fork(w1_producer, &j);
    if (pid < 0)
        return bench_fail("fork: %s", strerror(errno));
    if (fds[1] >= 0)
        close(fds[1]);
    bench_pin(0);
    uint64_t sum = 0;
    int rc;
    ctl_barrier(j.ctl);
    if (j.ring != NULL)
        rc = w1_consume_ring(&j, &sum);
    else
        rc = stream_consume(fds[0], (uint64_t)j.size * j.count, &sum);
    j.ctl->t1_ns = bench_now_ns();
    int st = bench_wait(pid, 60000);
    if (fds[0] >= 0)
        close(fds[0]);
    if (rc != 0 || st != 0)
        return bench_fail("%s: transfer failed (consumer %d, producer exit %d)", ctx->subject, rc, st);
    if (sum != j.ctl->sent_sum)
        return bench_fail("%s: checksum mismatch: read %" PRIu64 ", sent %" PRIu64, ctx->subject, sum,
                          j.ctl->sent_sum);
    double secs = (double)(j.ctl->t1_ns - j.ctl->t0_ns) / 1e9;
    bench_report(ctx, "GiB/s", (double)j.size * (double)j.count / GIB / secs);
    if (j.ring != NULL)
        bench_shared_free(j.ring, ring_bytes(j.nslots, j.slot));
    bench_shared_free(j.ctl, sizeof(struct ctl));
    return 0;
}

/* ---- W2: 64-byte messages --------------------------------------------- */

#define W2_RING_SLOTS 1024u
#define W2_PING_SLOTS 64u

struct w2_job {
    enum transport t;
    uint64_t stream_count, ping_count;
    struct ctl *ctl;
    int stream_fd;   /* producer's end of the one-way stream */
    int ping_fd[2];  /* this side's [read, write] ends for ping-pong */
    struct ring *stream_ring, *ping_ring, *pong_ring;
};

/* The child: the producer of the stream, then the echo side of ping-pong. */
static int w2_child(void *arg)
{
    struct w2_job *j = (struct w2_job *)arg;
    int futex = j->t == T_RING_FUTEX;
    bench_pin(1);
    alignas(CACHELINE) uint64_t msg[BENCH_W2_MSG / 8];
    uint64_t rest, sent = 0;
    bench_w2_message(msg, &rest);
    struct ring_end e = {0};
    if (j->stream_ring != NULL)
        ring_end_init(&e, j->stream_ring, W2_RING_SLOTS, BENCH_W2_MSG, futex);

    ctl_barrier(j->ctl);
    j->ctl->t0_ns = bench_now_ns();
    for (uint64_t i = 0; i < j->stream_count; i++) {
        msg[0] = i;
        sent += rest + i;
        if (j->stream_ring != NULL) {
            memcpy(ring_claim(&e), msg, BENCH_W2_MSG);
            ring_publish(&e);
        } else if (write_full(j->stream_fd, msg, BENCH_W2_MSG) != 0) {
            return 4;
        }
    }
    j->ctl->sent_sum = sent;

    /* Echo: receive, read, send the same 64 bytes back. */
    uint64_t total = (uint64_t)j->ping_count + BENCH_W2_PING_WARMUP;
    if (j->ping_ring != NULL) {
        struct ring_end in = {0}, out = {0};
        ring_end_init(&in, j->ping_ring, W2_PING_SLOTS, BENCH_W2_MSG, futex);
        ring_end_init(&out, j->pong_ring, W2_PING_SLOTS, BENCH_W2_MSG, futex);
        for (uint64_t i = 0; i < total; i++) {
            const unsigned char *p = ring_peek(&in);
            bench_keep(bench_sum64(p, BENCH_W2_MSG));
            memcpy(ring_claim(&out), p, BENCH_W2_MSG);
            ring_publish(&out);
            ring_release(&in);
        }
    } else {
        for (uint64_t i = 0; i < total; i++) {
            if (read_full(j->ping_fd[0], msg, BENCH_W2_MSG) != 0)
                return 5;
            bench_keep(bench_sum64(msg, BENCH_W2_MSG));
            if (write_full(j->ping_fd[1], msg, BENCH_W2_MSG) != 0)
                return 6;
        }
    }
    return 0;
}

static int w2_consume_ring(struct w2_job *j, uint64_t *sum_out)
{
    struct ring_end e = {0};
    ring_end_init(&e, j->stream_ring, W2_RING_SLOTS, BENCH_W2_MSG, j->t == T_RING_FUTEX);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < j->stream_count; i++) {
        sum += bench_sum64(ring_peek(&e), BENCH_W2_MSG);
        ring_release(&e);
    }
    *sum_out = sum;
    return 0;
}

/* The parent's ping side: one round trip per sample; counts echoes that
 * do not match what was sent. */
static int w2_ping(struct w2_job *j, uint64_t *samples, uint64_t *bad)
{
    int futex = j->t == T_RING_FUTEX;
    alignas(CACHELINE) uint64_t msg[BENCH_W2_MSG / 8], back[BENCH_W2_MSG / 8];
    uint64_t rest;
    bench_w2_message(msg, &rest);
    struct ring_end out = {0}, in = {0};
    if (j->ping_ring != NULL) {
        ring_end_init(&out, j->ping_ring, W2_PING_SLOTS, BENCH_W2_MSG, futex);
        ring_end_init(&in, j->pong_ring, W2_PING_SLOTS, BENCH_W2_MSG, futex);
    }
    uint64_t total = (uint64_t)j->ping_count + BENCH_W2_PING_WARMUP;
    *bad = 0;
    for (uint64_t i = 0; i < total; i++) {
        msg[0] = i;
        uint64_t t0 = bench_now_ns();
        uint64_t got;
        if (j->ping_ring != NULL) {
            memcpy(ring_claim(&out), msg, BENCH_W2_MSG);
            ring_publish(&out);
            got = bench_sum64(ring_peek(&in), BENCH_W2_MSG);
            ring_release(&in);
        } else {
            if (write_full(j->ping_fd[1], msg, BENCH_W2_MSG) != 0 || read_full(j->ping_fd[0], back, BENCH_W2_MSG) != 0)
                return -1;
            got = bench_sum64(back, BENCH_W2_MSG);
        }
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
    j.t = transport_of(ctx->subject);
    if (j.t == T_RING_SPIN)
        j.stream_count = ctx->quick ? BENCH_W2_STREAM_SPIN_QUICK : BENCH_W2_STREAM_SPIN;
    else
        j.stream_count = ctx->quick ? BENCH_W2_STREAM_SLEEP_QUICK : BENCH_W2_STREAM_SLEEP;
    j.ping_count = ctx->quick ? BENCH_W2_PING_QUICK : BENCH_W2_PING;
    j.ctl = (struct ctl *)bench_shared_alloc(sizeof(struct ctl));
    uint64_t *samples = (uint64_t *)bench_alloc(j.ping_count * sizeof(uint64_t));
    if (j.ctl == NULL || samples == NULL)
        return bench_fail("out of memory");

    /* parent ends: stream_in; ping_out -> child's in; child's out -> pong_in */
    int stream[2] = {-1, -1}, a[2] = {-1, -1}, b[2] = {-1, -1};
    int parent_ping[2] = {-1, -1};
    if (j.t == T_PIPE) {
        if (pipe(stream) != 0 || pipe(a) != 0 || pipe(b) != 0)
            return bench_fail("pipe: %s", strerror(errno));
        j.stream_fd = stream[1];
        j.ping_fd[0] = a[0]; /* child reads a, writes b */
        j.ping_fd[1] = b[1];
        parent_ping[0] = b[0];
        parent_ping[1] = a[1];
    } else if (j.t == T_SOCK) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, stream) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, a) != 0)
            return bench_fail("socketpair: %s", strerror(errno));
        j.stream_fd = stream[1];
        j.ping_fd[0] = j.ping_fd[1] = a[1];
        parent_ping[0] = parent_ping[1] = a[0];
    } else {
        j.stream_ring = ring_create(W2_RING_SLOTS, BENCH_W2_MSG);
        j.ping_ring = ring_create(W2_PING_SLOTS, BENCH_W2_MSG);
        j.pong_ring = ring_create(W2_PING_SLOTS, BENCH_W2_MSG);
        if (j.stream_ring == NULL || j.ping_ring == NULL || j.pong_ring == NULL)
            return bench_fail("mmap: %s", strerror(errno));
    }

    pid_t pid = bench_fork(w2_child, &j);
    if (pid < 0)
        return bench_fail("fork: %s", strerror(errno));
    j.ping_fd[0] = parent_ping[0];
    j.ping_fd[1] = parent_ping[1];
    /* Close the child's ends so a dead child means EOF here, not a hang. */
    if (j.t == T_PIPE) {
        close(stream[1]);
        close(a[0]);
        close(b[1]);
    } else if (j.t == T_SOCK) {
        close(stream[1]);
        close(a[1]);
    }
    bench_pin(0);
    uint64_t sum = 0, bad = 0;
    int rc;
    ctl_barrier(j.ctl);
    if (j.stream_ring != NULL)
        rc = w2_consume_ring(&j, &sum);
    else
        rc = stream_consume(stream[0], j.stream_count * BENCH_W2_MSG, &sum);
    j.ctl->t1_ns = bench_now_ns();
    if (rc == 0)
        rc = w2_ping(&j, samples, &bad);
    int st = bench_wait(pid, 60000);
    if (rc != 0 || st != 0)
        return bench_fail("%s: transfer failed (parent %d, child exit %d)", ctx->subject, rc, st);
    if (sum != j.ctl->sent_sum)
        return bench_fail("%s: checksum mismatch: read %" PRIu64 ", sent %" PRIu64, ctx->subject, sum,
                          j.ctl->sent_sum);
    if (bad != 0)
        return bench_fail("%s: %" PRIu64 " ping-pong echoes differ from what was sent", ctx->subject, bad);
    double secs = (double)(j.ctl->t1_ns - j.ctl->t0_ns) / 1e9;
    bench_report(ctx, "Mmsgs/s", (double)j.stream_count / 1e6 / secs);
    bench_report(ctx, "pingpong-median-ns", (double)bench_percentile(samples, j.ping_count, 50));
    bench_report(ctx, "pingpong-p99-ns", (double)bench_percentile(samples, j.ping_count, 99));
    free(samples);
    return 0;
}

static const bench_entry table[] = {
    {"W1-400K", "memcpy", w1_run, 0},
    {"W1-400K", "pipe", w1_run, 0},
    {"W1-400K", "unix-socket", w1_run, 0},
    {"W1-400K", "shm-ring-spin", w1_run, 0},
    {"W1-400K", "shm-ring-futex", w1_run, 0},
    {"W1-400K", "shm-floor", w1_run, 0},
    {"W1-64K", "memcpy", w1_run, 0},
    {"W1-64K", "pipe", w1_run, 0},
    {"W1-64K", "unix-socket", w1_run, 0},
    {"W1-64K", "shm-ring-spin", w1_run, 0},
    {"W1-64K", "shm-ring-futex", w1_run, 0},
    {"W1-64K", "shm-floor", w1_run, 0},
    {"W1-1MiB", "memcpy", w1_run, 0},
    {"W1-1MiB", "pipe", w1_run, 0},
    {"W1-1MiB", "unix-socket", w1_run, 0},
    {"W1-1MiB", "shm-ring-spin", w1_run, 0},
    {"W1-1MiB", "shm-ring-futex", w1_run, 0},
    {"W1-1MiB", "shm-floor", w1_run, 0},
    {"W1-16MiB", "memcpy", w1_run, 0},
    {"W1-16MiB", "pipe", w1_run, 0},
    {"W1-16MiB", "unix-socket", w1_run, 0},
    {"W1-16MiB", "shm-ring-spin", w1_run, 0},
    {"W1-16MiB", "shm-ring-futex", w1_run, 0},
    {"W1-16MiB", "shm-floor", w1_run, 0},
    {"W2", "pipe", w2_run, 0},
    {"W2", "unix-socket", w2_run, 0},
    {"W2", "shm-ring-spin", w2_run, 0},
    {"W2", "shm-ring-futex", w2_run, 0},
    {NULL, NULL, NULL, 0},
};

int main(int argc, char **argv)
{
    return bench_main(argc, argv, table);
}
