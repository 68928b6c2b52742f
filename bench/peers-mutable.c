/* Peers of the mutable containers' workloads (doc/benchmarks.md, L1, D1;
 * bench/bench-mutable.c has the workload definitions):
 *   D1 redis-P64  a private redis-server (peers-util.h: its unix-domain
 *                 socket, no persistence); two client processes, each on
 *                 its own half of the 100,000 keys, send SET, GET, INCRBY 1
 *                 and DEL drawn at random in pipelines of 64, check every
 *                 GET reply against their model, and at the end every key
 *                 is read back (lost-updates). Exits 77 without redis-server.
 *   L1 boost, D1 boost  run by bench-peers-mutable-boost (exec'd; its own
 *                 --list is empty so the subjects are listed once).
 * Does not use libshmobj. */
#include "peers-util.h"

#include <sys/mman.h>

#define D1_KEYS 100000

static char **mut_argv;

struct d1_shared {
    double t0[2], t1[2];
    uint64_t ops[2], bad[2];
    int64_t model[D1_KEYS];
};

static int d1_key(int k, char *buf)
{
    return bench_d1_key(k, buf);
}

static void d1_client(struct d1_shared *sh, int who, int port, double target)
{
    struct peers_redis c;
    bench_rng rng;
    peers_pin(who + 1);
    bench_rng_seed(&rng, 1234 + (uint64_t)who);
    if (peers_redis_connect(&c, port) != 0)
        peers_die("redis: connect: %s", strerror(errno));
    enum { P = 64 };
    int kind[P], key[P];
    int64_t expect[P];
    uint64_t ops = 0, bad = 0;
    double t0 = peers_now(), t;
    do {
        for (int i = 0; i < P; i++) {
            uint64_t r = bench_rng_next(&rng);
            int k = (int)((r >> 8) % (D1_KEYS / 2)) * 2 + who;
            char kb[16], vb[32];
            int kl = d1_key(k, kb);
            int64_t *mv = &sh->model[k];
            kind[i] = (int)(r & 3);
            key[i] = k;
            if (kind[i] == 0) {
                int64_t v = (int64_t)(r >> 16);
                snprintf(vb, sizeof vb, "%lld", (long long)v);
                const char *argv[3] = {"SET", kb, vb};
                size_t lens[3] = {3, (size_t)kl, strlen(vb)};
                peers_redis_cmdv(&c, 3, argv, lens);
                *mv = v;
            } else if (kind[i] == 1) {
                const char *argv[2] = {"GET", kb};
                size_t lens[2] = {3, (size_t)kl};
                peers_redis_cmdv(&c, 2, argv, lens);
                expect[i] = *mv;
            } else if (kind[i] == 2) {
                const char *argv[3] = {"INCRBY", kb, "1"};
                size_t lens[3] = {6, (size_t)kl, 1};
                peers_redis_cmdv(&c, 3, argv, lens);
                *mv = *mv == INT64_MIN ? 1 : *mv + 1;
            } else {
                const char *argv[2] = {"DEL", kb};
                size_t lens[2] = {3, (size_t)kl};
                peers_redis_cmdv(&c, 2, argv, lens);
                *mv = INT64_MIN;
            }
        }
        peers_redis_flush(&c);
        for (int i = 0; i < P; i++) {
            struct peers_reply r = peers_redis_read(&c);
            if (kind[i] == 1) {
                if (r.type == '$' && r.len < 0)
                    bad += expect[i] != INT64_MIN;
                else if (r.type == '$')
                    bad += expect[i] != strtoll(r.str, NULL, 10);
                else
                    bad++;
            }
            (void)key;
        }
        ops += P;
        t = peers_now();
    } while (t - t0 < target);
    sh->t0[who] = t0;
    sh->t1[who] = t;
    sh->ops[who] = ops;
    sh->bad[who] = bad;
    peers_redis_close(&c);
}

static int d1_redis(const bench_ctx *ctx)
{
    struct peers_redis_server srv;
    peers_redis_start(&srv, 0);
    struct d1_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        peers_die("mmap");
    struct peers_redis c;
    if (peers_redis_connect(&c, srv.port) != 0)
        peers_die("redis: connect");
    /* every key present at the start, value its number */
    for (int k0 = 0; k0 < D1_KEYS; k0 += 64) {
        int end = k0 + 64 < D1_KEYS ? k0 + 64 : D1_KEYS;
        for (int k = k0; k < end; k++) {
            char kb[16], vb[16];
            int kl = d1_key(k, kb);
            snprintf(vb, sizeof vb, "%d", k);
            const char *argv[3] = {"SET", kb, vb};
            size_t lens[3] = {3, (size_t)kl, strlen(vb)};
            peers_redis_cmdv(&c, 3, argv, lens);
            sh->model[k] = k;
        }
        peers_redis_flush(&c);
        for (int k = k0; k < end; k++)
            (void)peers_redis_read(&c);
    }
    double target = ctx->quick ? 1.0 : 5.0;
    pid_t pid[2];
    for (int w = 0; w < 2; w++) {
        pid[w] = fork();
        if (pid[w] == 0) {
            d1_client(sh, w, srv.port, target);
            _exit(0);
        }
    }
    for (int w = 0; w < 2; w++)
        if (peers_wait_child(pid[w], 120.0) != 0)
            peers_die("redis: client failed");
    uint64_t lost = sh->bad[0] + sh->bad[1];
    for (int k0 = 0; k0 < D1_KEYS; k0 += 64) {
        int end = k0 + 64 < D1_KEYS ? k0 + 64 : D1_KEYS;
        for (int k = k0; k < end; k++) {
            char kb[16];
            int kl = d1_key(k, kb);
            const char *argv[2] = {"GET", kb};
            size_t lens[2] = {3, (size_t)kl};
            peers_redis_cmdv(&c, 2, argv, lens);
        }
        peers_redis_flush(&c);
        for (int k = k0; k < end; k++) {
            struct peers_reply r = peers_redis_read(&c);
            if (r.type == '$' && r.len < 0)
                lost += sh->model[k] != INT64_MIN;
            else
                lost += sh->model[k] != strtoll(r.str, NULL, 10);
        }
    }
    peers_redis_close(&c);
    peers_redis_stop(&srv);
    double s0 = sh->t1[0] - sh->t0[0], s1 = sh->t1[1] - sh->t0[1];
    bench_report(ctx, "Mops/s", (double)(sh->ops[0] + sh->ops[1]) / (s0 > s1 ? s0 : s1) / 1e6);
    bench_report(ctx, "lost-updates", (double)lost);
    return lost != 0 ? bench_fail("redis: %llu lost updates", (unsigned long long)lost) : 0;
}

static int run(const bench_ctx *ctx)
{
    if (ctx->arg == 1)
        peers_exec_sibling("bench-peers-mutable-boost", mut_argv);
    return d1_redis(ctx);
}

int main(int argc, char **argv)
{
    static const bench_entry table[] = {
        {"L1", "boost", run, 1},
        {"D1", "boost", run, 1},
        {"D1", "redis-P64", run, 0},
        {NULL, NULL, NULL, 0},
    };
    mut_argv = argv;
    return bench_main(argc, argv, table);
}
