/* C1 peers: shared-record increments done by other means than libshmobj.
 *
 * The workload (doc/benchmarks.md, C1): 3,000 records of 11 fields (id, name,
 * health, mana, pos x/y/z, rot x/y/z, inventory). The first process builds
 * them; a second process, pinned to another CPU, adds 1 to the 9 numeric
 * fields of every record, pass after pass, for about 1 s (0.2 s with
 * --quick); the first then reads every value back and checks it. The
 * incrementer runs its increments in record-then-field order and may stop
 * inside a pass, so after T increments counter k (flat index r * 9 + f) must
 * hold init(k) + T / 27000 + (k < T % 27000). Any difference is counted as
 * lost increments.
 *
 * Subjects:
 *   atomic     fetch-add on a flat int64 array in a MAP_SHARED mapping: the
 *              ceiling (no lookup, no lock, just the cache-line traffic).
 *   boost      Boost.Interprocess managed_shared_memory map; lives in
 *              bench-peers-c1-boost (C++), which this program execs.
 *   redis      INCR p:<id>:<field>, one round trip per increment, against a
 *              private redis-server started here.
 *   redis-P64  the same with 64 INCRs per round trip.
 *
 * Only the incrementing phase is timed; the metric is increments per
 * second in millions (Mincr/s).
 */
#include "peers-util.h"

#include <stdatomic.h>
#include <sys/mman.h>

#define C1_RECORDS 3000
#define C1_FIELDS 9
#define C1_COUNTERS (C1_RECORDS * C1_FIELDS)

static const char *const c1_fields[C1_FIELDS] = {
    "id", "health", "mana", "pos_x", "pos_y", "pos_z", "rot_x", "rot_y", "rot_z"};

/* Initial value of numeric field f of record r (distinct per counter, so a
 * write to the wrong counter shows up). */
static int64_t c1_init(int r, int f)
{
    return f == 0 ? (int64_t)r : (int64_t)r * 100 + f * 10;
}

/* Value counter k must hold after `total` increments in flat order. */
static int64_t c1_expect(int k, uint64_t total)
{
    return c1_init(k / C1_FIELDS, k % C1_FIELDS) + (int64_t)(total / C1_COUNTERS) +
           ((uint64_t)k < total % C1_COUNTERS ? 1 : 0);
}

/* Written by the incrementing child, read by the parent after it exits. */
struct c1_result {
    uint64_t increments;
    double seconds;
};

static struct c1_result *c1_result_map(void)
{
    void *p = mmap(NULL, sizeof(struct c1_result), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        peers_die("mmap: %s", strerror(errno));
    memset(p, 0, sizeof(struct c1_result));
    return (struct c1_result *)p;
}

/* Print the figures; a lost increment fails the run (exit 1) after them. */
static void c1_report(const char *subject, const struct c1_result *res, uint64_t lost)
{
    if (res->increments == 0 || res->seconds <= 0)
        peers_die("C1 %s: no increments measured", subject);
    peers_report("C1", subject, "Mincr/s", (double)res->increments / res->seconds / 1e6);
    peers_report("C1", subject, "lost-increments", (double)lost);
    if (lost)
        peers_die("C1 %s: %llu increments lost", subject, (unsigned long long)lost);
}

static uint64_t c1_absdiff(int64_t a, int64_t b)
{
    return a > b ? (uint64_t)(a - b) : (uint64_t)(b - a);
}

/* ---- atomic --------------------------------------------------------------- */

static int c1_atomic(double target)
{
    _Atomic int64_t *cnt = (_Atomic int64_t *)mmap(
        NULL, sizeof(int64_t) * C1_COUNTERS, PROT_READ | PROT_WRITE,
        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if ((void *)cnt == MAP_FAILED)
        peers_die("mmap: %s", strerror(errno));
    struct c1_result *res = c1_result_map();
    peers_pin(0);
    for (int k = 0; k < C1_COUNTERS; k++)
        atomic_init(&cnt[k], c1_init(k / C1_FIELDS, k % C1_FIELDS));

    pid_t pid = fork();
    if (pid < 0)
        peers_die("fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        peers_pin(1);
        uint64_t total = 0;
        double t0 = peers_now(), t;
        do {
            for (int r = 0; r < C1_RECORDS; r++) {
                _Atomic int64_t *rec = cnt + r * C1_FIELDS;
                for (int f = 0; f < C1_FIELDS; f++)
                    atomic_fetch_add_explicit(&rec[f], 1, memory_order_relaxed);
            }
            total += C1_COUNTERS;
            t = peers_now();
        } while (t - t0 < target);
        res->increments = total;
        res->seconds = t - t0;
        _exit(0);
    }
    if (peers_wait_child(pid, 60.0 + target * 10) != 0)
        peers_die("C1 atomic: incrementer failed");

    uint64_t lost = 0;
    for (int k = 0; k < C1_COUNTERS; k++)
        lost += c1_absdiff(c1_expect(k, res->increments),
                           atomic_load_explicit(&cnt[k], memory_order_acquire));
    c1_report("atomic", res, lost);
    munmap((void *)cnt, sizeof(int64_t) * C1_COUNTERS);
    munmap(res, sizeof *res);
    return 0;
}

/* ---- redis ---------------------------------------------------------------- */

/* Keys p:<id>:<field>, flat index r * 9 + f. */
static char (*c1_redis_keys(void))[24]
{
    char(*keys)[24] = malloc(sizeof(*keys) * C1_COUNTERS);
    if (!keys)
        peers_die("out of memory");
    for (int k = 0; k < C1_COUNTERS; k++)
        snprintf(keys[k], sizeof keys[k], "p:%d:%s", k / C1_FIELDS, c1_fields[k % C1_FIELDS]);
    return keys;
}

static void c1_redis_incrementer(int port, int pipeline, double target,
                                 struct c1_result *res)
{
    peers_pin(1);
    char(*keys)[24] = c1_redis_keys();
    struct peers_redis c;
    if (peers_redis_connect(&c, port) != 0)
        peers_die("redis: connect: %s", strerror(errno));
    uint64_t total = 0;
    int k = 0;
    double t0 = peers_now(), t;
    do {
        for (int i = 0; i < pipeline; i++) {
            peers_redis_cmd3(&c, "INCR", keys[k], 0, NULL, 0);
            if (++k == C1_COUNTERS)
                k = 0;
        }
        peers_redis_flush(&c);
        for (int i = 0; i < pipeline; i++) {
            struct peers_reply r = peers_redis_read(&c);
            if (r.type != ':')
                peers_die("redis: INCR: unexpected reply");
        }
        total += (uint64_t)pipeline;
        t = peers_now();
    } while (t - t0 < target);
    res->increments = total;
    res->seconds = t - t0;
    peers_redis_close(&c);
    free(keys);
}

static int c1_redis(const char *subject, int pipeline, double target)
{
    struct peers_redis_server srv;
    peers_redis_start(&srv, 0);
    peers_pin(0);
    struct c1_result *res = c1_result_map();
    char(*keys)[24] = c1_redis_keys();
    struct peers_redis c;
    if (peers_redis_connect(&c, srv.port) != 0)
        peers_die("redis: connect: %s", strerror(errno));

    /* Build the records: 9 numeric fields, a name and an inventory each. */
    for (int r = 0; r < C1_RECORDS; r++) {
        char val[C1_FIELDS][24], name[32], nkey[24], ikey[24];
        const char *argv[1 + 2 * (C1_FIELDS + 2)];
        size_t lens[1 + 2 * (C1_FIELDS + 2)];
        int a = 0;
        argv[a++] = "MSET";
        for (int f = 0; f < C1_FIELDS; f++) {
            snprintf(val[f], sizeof val[f], "%lld", (long long)c1_init(r, f));
            argv[a++] = keys[r * C1_FIELDS + f];
            argv[a++] = val[f];
        }
        snprintf(name, sizeof name, "player-%d", r);
        snprintf(nkey, sizeof nkey, "p:%d:name", r);
        snprintf(ikey, sizeof ikey, "p:%d:inventory", r);
        argv[a++] = nkey;
        argv[a++] = name;
        argv[a++] = ikey;
        argv[a++] = "sword,shield,potion";
        for (int i = 0; i < a; i++)
            lens[i] = strlen(argv[i]);
        peers_redis_cmdv(&c, a, argv, lens);
        if (r % 100 == 99 || r == C1_RECORDS - 1) {
            peers_redis_flush(&c);
            for (int i = 0; i <= r % 100; i++)
                (void)peers_redis_read(&c);
        }
    }

    pid_t pid = fork();
    if (pid < 0)
        peers_die("fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        peers_redis_close(&c);
        c1_redis_incrementer(srv.port, pipeline, target, res);
        _exit(0);
    }
    if (peers_wait_child(pid, 120.0 + target * 10) != 0) {
        peers_redis_stop(&srv);
        peers_die("C1 %s: incrementer failed", subject);
    }

    /* Read everything back, 900 keys per MGET. */
    uint64_t lost = 0;
    for (int k0 = 0; k0 < C1_COUNTERS; k0 += 900) {
        int n = C1_COUNTERS - k0 < 900 ? C1_COUNTERS - k0 : 900;
        const char *argv[901];
        size_t lens[901];
        argv[0] = "MGET";
        lens[0] = 4;
        for (int i = 0; i < n; i++) {
            argv[1 + i] = keys[k0 + i];
            lens[1 + i] = strlen(keys[k0 + i]);
        }
        peers_redis_cmdv(&c, n + 1, argv, lens);
        peers_redis_flush(&c);
        struct peers_reply arr = peers_redis_read(&c);
        if (arr.type != '*' || arr.num != n)
            peers_die("redis: MGET: unexpected reply");
        for (int i = 0; i < n; i++) {
            struct peers_reply v = peers_redis_read(&c);
            int64_t got = 0;
            if (v.type == '$' && v.len > 0 && v.len < 24) {
                char tmp[24];
                memcpy(tmp, v.str, (size_t)v.len);
                tmp[v.len] = 0;
                got = strtoll(tmp, NULL, 10);
            }
            lost += c1_absdiff(c1_expect(k0 + i, res->increments), got);
        }
    }
    peers_redis_close(&c);
    peers_redis_stop(&srv);
    c1_report(subject, res, lost);
    free(keys);
    munmap(res, sizeof *res);
    return 0;
}

/* ---- the protocol ------------------------------------------------------- */

static char **c1_argv; /* for the exec of the Boost helper */

static int c1_run(const bench_ctx *ctx)
{
    double target = ctx->quick ? 0.2 : 1.0;
    switch (ctx->arg) {
    case 0:
        return c1_atomic(target);
    case 1:
        peers_exec_sibling("bench-peers-c1-boost", c1_argv);
    default:
        return c1_redis(ctx->subject, (int)ctx->arg - 1, target);
    }
}

int main(int argc, char **argv)
{
    /* arg: 0 atomic, 1 boost (exec'd), else 1 + the redis pipeline depth */
    static const bench_entry table[] = {
        {"C1", "atomic", c1_run, 0},
        {"C1", "boost", c1_run, 1},
        {"C1", "redis", c1_run, 1 + 1},
        {"C1", "redis-P64", c1_run, 1 + 64},
        {NULL, NULL, NULL, 0},
    };
    c1_argv = argv;
    return bench_main(argc, argv, table);
}
