/* Yardstick for W1: `sysbench memory --memory-oper=write`, subject
 * `sysbench-write` of W1-400K.
 *
 * sysbench writes one block over and over in one thread (sequential
 * access, no second process, nothing read back): the rate at which this
 * machine takes writes of about the message size, printed next to the
 * transports so a reader can compare like with like. sysbench takes only
 * powers of two as block sizes: the one nearest the message size on a log
 * scale is used (512 KiB for 400,000 bytes). It writes as many bytes as
 * one W1-400K repetition delivers (1,000 x 400,000; 640 with --quick;
 * sysbench rounds down to whole blocks) and its "MiB/sec" figure becomes
 * the W1 metric, GiB/s (2^30 bytes per second).
 *
 * The sysbench program is found on PATH (Debian package `sysbench`; bench/run
 * installs it when it can); without it the subject exits 77 (skipped).
 *
 * Protocol: `--list`; `--run W1-400K sysbench-write [--quick]`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "bench-util.h"

static int run_sysbench(const bench_ctx *ctx)
{
    const bench_w1_param *p = bench_w1_param_of(ctx->workload);
    if (p == NULL)
        return bench_fail("bench-sysbench: no W1 parameters for %s", ctx->workload);
    if (system("command -v sysbench >/dev/null 2>&1") != 0)
        return bench_skip("bench-sysbench: sysbench is not installed");
    unsigned long long total =
        (unsigned long long)p->size * (ctx->quick ? p->quick_count : p->count);
    size_t block = 1;
    while (block * 2 <= p->size)
        block *= 2;
    if ((double)p->size > (double)block * 1.41421356) /* nearer 2 x block */
        block *= 2;
    char cmd[256];
    /* --time=0: stop at the byte total, not at a duration. */
    snprintf(cmd, sizeof cmd,
             "sysbench memory --threads=1 --time=0 --memory-oper=write "
             "--memory-access-mode=seq --memory-block-size=%zuK "
             "--memory-total-size=%llu run 2>&1",
             block >> 10, total);
    FILE *f = popen(cmd, "r");
    if (f == NULL)
        return bench_skip("bench-sysbench: cannot start sysbench");
    char line[512];
    double mib_s = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        /* "409.60 MiB transferred (12345.67 MiB/sec)" */
        char *paren = strstr(line, "MiB transferred (");
        if (paren != NULL)
            mib_s = strtod(paren + strlen("MiB transferred ("), NULL);
    }
    int st = pclose(f);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return bench_fail("bench-sysbench: sysbench failed (status %d)", st);
    if (!(mib_s > 0))
        return bench_fail("bench-sysbench: no \"MiB/sec\" figure in sysbench's output");
    bench_report(ctx, "GiB/s", mib_s / 1024.0);
    return 0;
}

int main(int argc, char **argv)
{
    static const bench_entry table[] = {
        {"W1-400K", "sysbench-write", run_sysbench, 0},
        {NULL, NULL, NULL, 0},
    };
    return bench_main(argc, argv, table);
}
