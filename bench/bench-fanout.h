/*
 * bench-fanout.h - what every program of workload P1 (fan-out) shares, in
 * C and C++: the control block in a shared mapping (barrier, clock, each
 * subscriber's end time and sum), the message source, the expected sum,
 * and the sizes and counts of P1-64 and P1-1MiB. bench-topic.c runs the
 * topic and the copying peers; bench-topic-boost.cpp the Boost peer.
 */
#ifndef BENCH_FANOUT_H
#define BENCH_FANOUT_H

#include "bench-util.h"

#ifndef __cplusplus
#include <stdalign.h>
#endif

#define FANOUT_MAXSUB 8

/* Written with the __atomic builtins, which both languages have. */
struct fanout_ctl {
    alignas(64) unsigned ready; /* subscribers at the barrier */
    alignas(64) unsigned go;    /* set by the publisher once all are there */
    alignas(64) uint64_t t0_ns;
    uint64_t t_end[FANOUT_MAXSUB];
    uint64_t sum[FANOUT_MAXSUB];
    int failed[FANOUT_MAXSUB];
};

/* A subscriber: arrive, then wait for the publisher's start. */
static inline void fanout_wait_go(struct fanout_ctl *c)
{
    __atomic_fetch_add(&c->ready, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&c->go, __ATOMIC_SEQ_CST) == 0)
        sched_yield();
}

/* The publisher: once nsub subscribers arrived, start the clock. */
static inline void fanout_start_clock(struct fanout_ctl *c, unsigned nsub)
{
    while (__atomic_load_n(&c->ready, __ATOMIC_SEQ_CST) < nsub)
        sched_yield();
    c->t0_ns = bench_now_ns();
    __atomic_store_n(&c->go, 1, __ATOMIC_SEQ_CST);
}

/* Message i is this buffer with i in its first word; *rest is the sum of
 * the other words. */
static inline uint64_t *fanout_source(size_t size, uint64_t *rest)
{
    uint64_t *p = (uint64_t *)bench_alloc(size);
    if (p == NULL)
        return NULL;
    bench_rng r;
    bench_rng_seed(&r, 42);
    bench_rng_fill(&r, p, size);
    p[0] = 0;
    *rest = bench_sum64(p, size);
    return p;
}

/* What a subscriber's sum of count messages must be. */
static inline uint64_t fanout_expected_sum(uint64_t count, uint64_t rest)
{
    return count * (count - 1) / 2 + count * rest;
}

/* The message size and count of the workload. */
static inline void fanout_size(const bench_ctx *ctx, size_t *size, uint64_t *count)
{
    int big = strcmp(ctx->workload, "P1-1MiB") == 0;
    *size = big ? (1u << 20) : 64;
    *count = big ? (ctx->quick ? 200 : 2000) : (ctx->quick ? 30000 : 1000000);
}

/* The slowest subscriber's rates, after every sum was checked: Mmsgs/s,
 * and GiB/s for 1 MiB messages. 0, or -1 for a wrong sum. */
static inline int fanout_report(const bench_ctx *ctx, const struct fanout_ctl *c,
                                unsigned nsub, size_t size, uint64_t count, uint64_t rest)
{
    uint64_t want = fanout_expected_sum(count, rest), end = 0;
    for (unsigned k = 0; k < nsub; k++) {
        if (c->sum[k] != want)
            return -1;
        if (c->t_end[k] > end)
            end = c->t_end[k];
    }
    double secs = (double)(end - c->t0_ns) / 1e9;
    bench_report(ctx, "Mmsgs/s", (double)count / 1e6 / secs);
    if (size >= (1u << 20))
        bench_report(ctx, "GiB/s", (double)count * (double)size / secs / (double)(1u << 30));
    return 0;
}

#endif
