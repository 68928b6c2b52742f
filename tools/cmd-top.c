/* shmobj top: live figures, one frame per interval: the heap, per queue
 * its depth, rates and waiting threads (of live processes only), per map
 * its entries and their net change, per topic its publish rate, its
 * subscribers and each one's lag. Handles of the roots are kept open
 * between frames and let go when a root goes away. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shmobj-tool.h"

static const char *const usage_top =
    "usage: shmobj top [-i SECONDS] [-n COUNT] [-e N] NAME\n"
    "\n"
    "Shows live figures every interval: per queue the depth, messages put\n"
    "and taken per second and the threads waiting (consumers/producers, of\n"
    "live processes only: one killed while it waited is not counted); per\n"
    "map its entries and their net change per second; per topic the\n"
    "messages published per second, the live subscribers, the records of\n"
    "dead ones and the largest lag, then each subscriber's lag (messages\n"
    "published it has not taken); and the heap's use.\n"
    "A map keeps no operation counters, so top cannot show its gets, sets\n"
    "or deletes per second: reads, replacing sets and a set undone by a\n"
    "delete leave CHANGE/S at 0. The screen is cleared between frames only\n"
    "when the output is a terminal.\n"
    "  -i SECONDS  interval (default 1, fractions allowed)\n"
    "  -n COUNT    stop after COUNT frames (default: until interrupted)\n"
    "  -e N        subscribers listed per topic (default 8; 'all' every one)\n";

static volatile sig_atomic_t stop_now;

static void on_signal(int sig)
{
    (void)sig;
    stop_now = 1;
}

/* Figures of one root between two frames. */
struct top_root {
    char name[SHMOBJ_ROOT_NAME_MAX + 1];
    shmobj_ref ref;
    unsigned kind;
    bool seen; /* in this frame's directory */
    shmobj_queue *q;
    shmobj_map *m;
    shmobj_topic *t;
    uint64_t puts, takes, count; /* at the previous frame */
    bool have_prev;
};

#define TOP_ROOTS 128

struct frame {
    shmobj_segment *seg;
    struct top_root *roots;
    unsigned nroots;
    double dt;
    uint64_t entries;
    bool head_q, head_m, head_t;
};

static struct top_root *top_find(struct frame *fr, const shmobj_root_info *ri)
{
    for (unsigned i = 0; i < fr->nroots; i++)
        if (strcmp(fr->roots[i].name, ri->name) == 0 && fr->roots[i].ref == ri->ref)
            return &fr->roots[i];
    if (fr->nroots >= TOP_ROOTS)
        return NULL;
    struct top_root *e = &fr->roots[fr->nroots++];
    memset(e, 0, sizeof *e);
    memcpy(e->name, ri->name, sizeof e->name);
    e->ref = ri->ref;
    e->kind = ri->kind;
    return e;
}

static void top_drop(struct top_root *e)
{
    shmobj_queue_close(e->q);
    shmobj_map_close(e->m);
    shmobj_topic_close(e->t);
    e->q = NULL;
    e->m = NULL;
    e->t = NULL;
}

static void rate(char *buf, size_t len, const struct top_root *e, double dt,
                 uint64_t now, uint64_t before)
{
    if (e->have_prev && dt > 0)
        snprintf(buf, len, "%.0f", (double)(now - before) / dt);
    else
        snprintf(buf, len, "-");
}

static void top_queue(struct frame *fr, struct top_root *e)
{
    if (e->q == NULL && shmobj_queue_open(fr->seg, e->name, &e->q) != 0)
        return;
    shmobj_queue_stats st = {.struct_size = sizeof st};
    if (shmobj_queue_stats_get(e->q, &st) != 0)
        return;
    if (!fr->head_q) {
        printf("%-20s %8s %8s %12s %12s %9s %8s %8s\n", "QUEUE", "DEPTH", "CAP",
               "PUT/S", "TAKE/S", "WAIT C/P", "SKIPPED", "RESCUED");
        fr->head_q = true;
    }
    char pr[24], tr[24], w[24];
    rate(pr, sizeof pr, e, fr->dt, st.puts, e->puts);
    rate(tr, sizeof tr, e, fr->dt, st.takes, e->takes);
    snprintf(w, sizeof w, "%" PRIu32 "/%" PRIu32, st.consumers_waiting,
             st.producers_waiting);
    printf("%-20s %8" PRIu64 " %8" PRIu32 " %12s %12s %9s %8" PRIu64 " %8" PRIu64
           "\n",
           e->name, st.depth, st.capacity, pr, tr, w, st.skipped, st.rescued);
    e->puts = st.puts;
    e->takes = st.takes;
    e->have_prev = true;
}

static void top_map(struct frame *fr, struct top_root *e)
{
    if (e->m == NULL && shmobj_map_open(fr->seg, e->name, &e->m) != 0) {
        e->m = NULL;
        return;
    }
    uint64_t count = 0;
    if (shmobj_map_count(e->m, &count) != 0)
        return;
    if (!fr->head_m) {
        printf("%-20s %12s %12s\n", "MAP", "ENTRIES", "CHANGE/S");
        fr->head_m = true;
    }
    char cr[24] = "-";
    if (e->have_prev && fr->dt > 0)
        snprintf(cr, sizeof cr, "%+.0f", ((double)count - (double)e->count) / fr->dt);
    printf("%-20s %12" PRIu64 " %12s\n", e->name, count, cr);
    e->count = count;
    e->have_prev = true;
}

static void top_topic(struct frame *fr, struct top_root *e)
{
    if (e->t == NULL && shmobj_topic_open(fr->seg, e->name, &e->t) != 0) {
        e->t = NULL;
        return;
    }
    shmobj_topic_stats st;
    shmobj_topic_sub_info *subs;
    size_t n;
    if (shmobj_topic_stats_get(e->t, &st) != 0 ||
        shmobj_tool_topic_subs(e->t, &subs, &n) != 0)
        return;
    size_t dead = 0;
    uint64_t max_lag = 0;
    for (size_t i = 0; i < n; i++) {
        if (subs[i].flags & SHMOBJ_TOPIC_SUB_DEAD)
            dead++;
        else if (subs[i].lag > max_lag)
            max_lag = subs[i].lag;
    }
    if (!fr->head_t) {
        printf("%-20s %12s %12s %6s %6s %10s %8s\n", "TOPIC", "PUBLISHED", "PUB/S",
               "SUBS", "DEAD", "MAXLAG", "MISSED");
        fr->head_t = true;
    }
    char pr[24];
    rate(pr, sizeof pr, e, fr->dt, st.published, e->puts);
    printf("%-20s %12" PRIu64 " %12s %6zu %6zu %10" PRIu64 " %8" PRIu64 "\n",
           e->name, st.published, pr, n - dead, dead, max_lag, st.missed);
    for (size_t i = 0; i < n && i < fr->entries; i++) {
        printf("  subscriber ");
        shmobj_tool_sub_text(stdout, fr->seg, &subs[i]);
        printf("\n");
    }
    if (n > fr->entries)
        printf("  ... %zu more subscribers (-e N or -e all shows more)\n",
               n - (size_t)fr->entries);
    free(subs);
    e->puts = st.published;
    e->have_prev = true;
}

static void top_frame(struct frame *fr, const struct target *t, unsigned frame)
{
    char a[32], b[32], c[48];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    printf("shmobj top %s  %s  frame %u\n", t->arg,
           shmobj_tool_time((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec,
                            c, sizeof c),
           frame);
    shmobj_segment_info si = {.struct_size = sizeof si};
    shmobj_arena_stats hs = {.struct_size = sizeof hs};
    size_t procs = 0;
    (void)shmobj_segment_procs_get(fr->seg, NULL, 0, &procs);
    if (shmobj_segment_info_get(fr->seg, &si) == 0 &&
        shmobj_arena_stats_get(fr->seg, &hs) == 0)
        printf("heap %s used of %s (%.1f%%), %" PRIu64
               " blocks, fragmentation %.1f%%, %zu processes besides this one\n",
               shmobj_tool_bytes(hs.used_bytes, a, sizeof a, false),
               shmobj_tool_bytes(hs.total_bytes, b, sizeof b, false),
               hs.total_bytes ? 100.0 * (double)hs.used_bytes / (double)hs.total_bytes
                              : 0.0,
               hs.used_blocks, hs.fragmentation_permille / 10.0,
               procs > 0 ? procs - 1 : 0);
    for (unsigned i = 0; i < fr->nroots; i++)
        fr->roots[i].seen = false;
    fr->head_q = fr->head_m = fr->head_t = false;
    uint32_t cur = 0;
    shmobj_root_info ri = {.struct_size = sizeof ri};
    int rc;
    /* queues, then maps, then topics: one table each */
    static const unsigned order[] = {SHMOBJ_ROOT_QUEUE, SHMOBJ_ROOT_MAP,
                                     SHMOBJ_ROOT_TOPIC};
    for (unsigned pass = 0; pass < 3; pass++) {
        cur = 0;
        while ((rc = shmobj_segment_root_next(fr->seg, &cur, &ri)) !=
               SHMOBJ_ENOTFOUND) {
            if (rc != 0 && rc != SHMOBJ_ECORRUPT)
                break;
            if (rc != 0 || ri.kind != order[pass])
                continue;
            struct top_root *e = top_find(fr, &ri);
            if (e == NULL)
                continue;
            e->seen = true;
            if (e->kind == SHMOBJ_ROOT_QUEUE)
                top_queue(fr, e);
            else if (e->kind == SHMOBJ_ROOT_MAP)
                top_map(fr, e);
            else
                top_topic(fr, e);
        }
    }
    /* roots that went away: let their handles go */
    for (unsigned i = 0; i < fr->nroots; i++)
        if (!fr->roots[i].seen) {
            top_drop(&fr->roots[i]);
            fr->roots[i] = fr->roots[--fr->nroots];
            i--;
        }
    if (!fr->head_q && !fr->head_m && !fr->head_t)
        printf("(no queues, maps or topics)\n");
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int shmobj_tool_top(int argc, char **argv)
{
    double interval = 1.0;
    long count = 0;
    uint64_t entries = 8;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (shmobj_tool_is_help(argv[i]))
            return shmobj_tool_usage(usage_top, false);
        int o = shmobj_tool_entries_opt("top", usage_top, argc, argv, &i, &entries);
        if (o < 0)
            return EXIT_CANNOT;
        if (o > 0)
            continue;
        if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
            char *end;
            interval = strtod(argv[++i], &end);
            if (*end != '\0' || !(interval > 0) || interval > 86400)
                return shmobj_tool_usage_bad(
                    "top", usage_top,
                    "bad interval '%s' (seconds, more than 0, at most 86400)", argv[i]);
        } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            char *end;
            count = strtol(argv[++i], &end, 10);
            if (*end != '\0' || count < 0)
                return shmobj_tool_usage_bad("top", usage_top,
                                             "bad count '%s' (frames, 0 or more)",
                                             argv[i]);
        } else if (strcmp(argv[i], "-i") == 0 || strcmp(argv[i], "-n") == 0) {
            return shmobj_tool_usage_bad("top", usage_top, "option '%s' needs a value",
                                         argv[i]);
        } else if (argv[i][0] == '-') {
            return shmobj_tool_usage_bad("top", usage_top, "unknown option '%s'",
                                         argv[i]);
        } else if (name != NULL) {
            return shmobj_tool_usage_bad("top", usage_top, "one NAME expected");
        } else {
            name = argv[i];
        }
    }
    if (name == NULL)
        return shmobj_tool_usage_bad("top", usage_top, "NAME missing");
    struct target t;
    if (!shmobj_tool_target_parse(name, &t))
        return shmobj_tool_why(&t, SHMOBJ_EINVAL);
    shmobj_segment *seg;
    int status = shmobj_tool_attach(&t, &seg);
    if (status != 0)
        return status;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    bool tty = isatty(STDOUT_FILENO);
    static struct top_root roots[TOP_ROOTS];
    struct frame fr = {.seg = seg, .roots = roots, .entries = entries};
    double last = mono_s();
    for (unsigned frame = 1; !stop_now; frame++) {
        double now = mono_s();
        if (tty)
            fputs("\033[H\033[2J", stdout);
        else if (frame > 1)
            fputc('\n', stdout);
        fr.dt = now - last;
        top_frame(&fr, &t, frame);
        fflush(stdout);
        last = now;
        if (count > 0 && frame >= (unsigned long)count)
            break;
        struct timespec ts = {.tv_sec = (time_t)interval,
                              .tv_nsec = (long)((interval - (double)(time_t)interval) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stop_now)
            ;
    }
    for (unsigned i = 0; i < fr.nroots; i++)
        top_drop(&roots[i]);
    shmobj_segment_close(seg);
    return 0;
}
