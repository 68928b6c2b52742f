/* shmobj stat: the segment's header facts, heap figures, attached
 * processes, and every root with what it holds: a queue's figures (its
 * waiting threads counted among live processes only), a map's figures and
 * first entries, an object's type and size with its first members (each
 * container's size, mutable ones included), a topic's figures and each
 * subscriber's lag. Listings are bounded by -e. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "shmobj-tool.h"

static const char *const usage_stat =
    "usage: shmobj stat [-e N] NAME\n"
    "\n"
    "Attaches to the segment and prints its header facts, heap figures and\n"
    "fragmentation, the other attached processes (pid, token, since when),\n"
    "and every root with its kind and what it holds:\n"
    "  queue   depth, capacity, totals, skipped/rescued counters, threads\n"
    "          waiting (of live processes only: one killed while it waited\n"
    "          is not counted), descriptors\n"
    "  map     count, load, bytes per item, then its entries (KEY = VALUE;\n"
    "          text in quotes, other bytes in hex, 8 bytes also as int64)\n"
    "  object  type and size (len of every container, mutable ones too, or\n"
    "          dtype and shape), then its members with their types and sizes\n"
    "  topic   messages published and kept, capacity, history, loans,\n"
    "          then each subscriber: pid, lag (messages not yet taken),\n"
    "          held (taken, not released), missed; a subscriber whose\n"
    "          process died is listed as dead, not as a live one\n"
    "  -e N, --entries N  list at most N entries, members or subscribers\n"
    "                     per root (default 10; 0 none; 'all' every one)\n";

#define INDENT "      "

static void stat_object(shmobj_segment *seg, const shmobj_root_info *ri,
                        uint64_t entries)
{
    shmobj_view v;
    int rc = shmobj_obj_get(seg, ri->ref, &v);
    if (rc != 0) {
        printf("  (%s)\n", shmobj_strerror(rc));
        return;
    }
    printf(" type %s ", shmobj_tool_type_name(shmobj_view_type(&v)));
    shmobj_tool_value_brief(stdout, &v);
    printf("\n");
    shmobj_tool_members_text(stdout, &v, entries, INDENT);
}

static void stat_queue(shmobj_segment *seg, const shmobj_root_info *ri)
{
    shmobj_queue *q = NULL;
    int rc = shmobj_queue_open(seg, ri->name, &q);
    shmobj_queue_stats st = {.struct_size = sizeof st};
    if (rc == 0)
        rc = shmobj_queue_stats_get(q, &st);
    if (rc != 0) {
        printf(" (%s)", shmobj_strerror(rc));
    } else {
        printf(" depth %" PRIu64 "/%" PRIu32 ", puts %" PRIu64 ", takes %" PRIu64
               ", skipped %" PRIu64 ", rescued %" PRIu64,
               st.depth, st.capacity, st.puts, st.takes, st.skipped, st.rescued);
        if (st.consumers_waiting || st.producers_waiting)
            printf(", waiting %" PRIu32 " consumers %" PRIu32 " producers",
                   st.consumers_waiting, st.producers_waiting);
        if (st.listeners)
            printf(", %" PRIu32 " descriptors (%" PRIu32 " armed)", st.listeners,
                   st.armed);
        if (st.retired_blocks)
            printf(", %" PRIu64 " retired blocks", st.retired_blocks);
    }
    printf("\n");
    shmobj_queue_close(q);
}

static void stat_map(shmobj_segment *seg, const shmobj_root_info *ri,
                     uint64_t entries)
{
    shmobj_map *m = NULL;
    int rc = shmobj_map_open(seg, ri->name, &m);
    shmobj_map_stats st = {.struct_size = sizeof st};
    if (rc == 0)
        rc = shmobj_map_stats_get(m, &st);
    if (rc != 0) {
        printf(" (%s)\n", shmobj_strerror(rc));
    } else {
        char b[32];
        printf(" count %" PRIu64 ", load %.2f, %.1f bytes/item, %s in all",
               st.count, st.load_factor, st.bytes_per_item,
               shmobj_tool_bytes(st.total_bytes, b, sizeof b, false));
        if (st.pending_bytes)
            printf(", %" PRIu64 " bytes retired", st.pending_bytes);
        printf("\n");
        if (entries > 0)
            (void)shmobj_tool_map_entries_text(stdout, m, entries, INDENT);
    }
    shmobj_map_close(m);
}

/* A service: the calls waiting for a server. */
static void stat_service(shmobj_segment *seg, const shmobj_root_info *ri)
{
    uint32_t pending = 0;
    int rc = shmobj_tool_service_pending(seg, ri->name, &pending);
    if (rc != 0)
        printf(" (%s)\n", shmobj_strerror(rc));
    else
        printf(" %" PRIu32 " call%s waiting (queue %s%s)\n", pending,
               shmobj_tool_plural(pending), ri->name, "/calls");
}

static void stat_topic(shmobj_segment *seg, const shmobj_root_info *ri,
                       uint64_t entries)
{
    shmobj_topic *t = NULL;
    int rc = shmobj_topic_open(seg, ri->name, &t);
    shmobj_topic_stats st;
    shmobj_topic_sub_info *subs = NULL;
    size_t n = 0;
    if (rc == 0)
        rc = shmobj_topic_stats_get(t, &st);
    if (rc == 0)
        rc = shmobj_tool_topic_subs(t, &subs, &n);
    if (rc != 0) {
        printf(" (%s)\n", shmobj_strerror(rc));
        shmobj_topic_close(t);
        return;
    }
    size_t dead = 0;
    uint64_t max_lag = 0;
    for (size_t i = 0; i < n; i++) {
        if (subs[i].flags & SHMOBJ_TOPIC_SUB_DEAD)
            dead++;
        else if (subs[i].lag > max_lag)
            max_lag = subs[i].lag;
    }
    printf(" published %" PRIu64 ", kept %" PRIu64 ", capacity %" PRIu32
           ", history %" PRIu32 ", %zu subscriber%s",
           st.published, st.retained, st.capacity, st.history, n - dead,
           shmobj_tool_plural(n - dead));
    if (dead)
        printf(" (and %zu dead)", dead);
    printf(", max lag %" PRIu64 ", loans %" PRIu32 ", missed %" PRIu64 "\n",
           max_lag, st.loans, st.missed);
    for (size_t i = 0; i < n && i < entries; i++) {
        printf(INDENT "subscriber ");
        shmobj_tool_sub_text(stdout, seg, &subs[i]);
        printf("\n");
    }
    if (n > entries)
        printf(INDENT "... %zu more (-e N or -e all shows more)\n",
               n - (size_t)entries);
    free(subs);
    shmobj_topic_close(t);
}

static void stat_head(shmobj_segment *seg, const struct target *t)
{
    char a[32], b[32], c[48];
    shmobj_segment_info si = {.struct_size = sizeof si};
    if (shmobj_segment_info_get(seg, &si) != 0)
        return;
    printf("segment %s\n", t->arg);
    printf("  backend %s, format %" PRIu32 ", size %s of at most %s\n",
           shmobj_tool_backend_name(si.backend), si.format_version,
           shmobj_tool_bytes(si.size, a, sizeof a, false),
           shmobj_tool_bytes(si.max_size, b, sizeof b, false));
    printf("  created %s by pid %" PRIu32 " (%s)%s\n",
           shmobj_tool_time(si.created_ns, c, sizeof c), si.creator_pid,
           (si.flags & SHMOBJ_SEGMENT_INFO_CREATOR_ATTACHED) ? "attached" : "gone",
           (si.flags & SHMOBJ_SEGMENT_INFO_LINKED) ? "" : ", name removed");
}

static void stat_procs(shmobj_segment *seg)
{
    static shmobj_segment_proc procs[1024];
    char c[48];
    size_t n = 0;
    int rc = shmobj_segment_procs_get(seg, procs, 1024, &n);
    if (rc != 0 && rc != SHMOBJ_ENOBUFS)
        return;
    size_t shown = n < 1024 ? n : 1024, others = 0;
    for (size_t i = 0; i < shown; i++)
        others += !(procs[i].flags & SHMOBJ_SEGMENT_PROC_SELF);
    printf("processes (%zu attached besides this tool)\n", others);
    for (size_t i = 0; i < shown; i++) {
        if (procs[i].flags & SHMOBJ_SEGMENT_PROC_SELF)
            continue;
        printf("  pid %-8" PRIu32 " token %-10" PRIu32 " slot %-4" PRIu32
               " since %s%s\n",
               procs[i].pid, procs[i].token, procs[i].slot,
               shmobj_tool_time(procs[i].attached_ns, c, sizeof c),
               (procs[i].flags & SHMOBJ_SEGMENT_PROC_CREATOR) ? " creator" : "");
    }
}

int shmobj_tool_stat(int argc, char **argv)
{
    uint64_t entries = 10;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (shmobj_tool_is_help(argv[i]))
            return shmobj_tool_usage(usage_stat, false);
        int o = shmobj_tool_entries_opt("stat", usage_stat, argc, argv, &i, &entries);
        if (o < 0)
            return EXIT_CANNOT;
        if (o > 0)
            continue;
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return shmobj_tool_usage_bad("stat", usage_stat, "unknown option '%s'",
                                         argv[i]);
        if (name != NULL)
            return shmobj_tool_usage_bad("stat", usage_stat, "one NAME expected");
        name = argv[i];
    }
    if (name == NULL)
        return shmobj_tool_usage_bad("stat", usage_stat, "NAME missing");
    struct target t;
    if (!shmobj_tool_target_parse(name, &t))
        return shmobj_tool_why(&t, SHMOBJ_EINVAL);
    shmobj_segment *seg;
    int status = shmobj_tool_attach(&t, SHMOBJ_SEGMENT_RDONLY, &seg);
    if (status != 0)
        return status;
    char a[32], b[32], c[48];
    stat_head(seg, &t);
    shmobj_arena_stats hs = {.struct_size = sizeof hs};
    int rc = shmobj_arena_stats_get(seg, &hs);
    if (rc == 0) {
        printf("heap\n");
        printf("  %s in all, %s used in %" PRIu64 " blocks, %s free in %" PRIu64
               " blocks\n",
               shmobj_tool_bytes(hs.total_bytes, a, sizeof a, false),
               shmobj_tool_bytes(hs.used_bytes, b, sizeof b, false), hs.used_blocks,
               shmobj_tool_bytes(hs.free_bytes, c, sizeof c, false), hs.free_blocks);
        printf("  largest free block %s, fragmentation %.1f%%\n",
               shmobj_tool_bytes(hs.largest_free, a, sizeof a, false),
               hs.fragmentation_permille / 10.0);
    } else {
        printf("heap\n  %s\n", shmobj_strerror(rc));
        status = rc == SHMOBJ_ECORRUPT ? EXIT_DAMAGED : EXIT_CANNOT;
        if (rc != SHMOBJ_ECORRUPT)
            fprintf(stderr, "%s: %s: heap: %s\n", shmobj_tool_prog, t.arg,
                    shmobj_strerror(rc));
    }
    /* The heap's walk and the root directory's take the same lock: when a
     * live process kept it past the library's bound, the roots would cost
     * the user another 10 s for the same answer. */
    bool lock_busy = rc == SHMOBJ_EBUSY;
    stat_procs(seg);
    printf("roots\n");
    uint32_t cur = 0;
    shmobj_root_info ri = {.struct_size = sizeof ri};
    unsigned roots = 0;
    bool walked = !lock_busy;
    if (lock_busy)
        printf("  not read: the segment lock is held (see heap)\n");
    while (walked &&
           (rc = shmobj_segment_root_next(seg, &cur, &ri)) != SHMOBJ_ENOTFOUND) {
        if (rc != 0 && rc != SHMOBJ_ECORRUPT) {
            /* not an entry's fault: the walk itself could not go on */
            printf("  not read: %s\n", shmobj_strerror(rc));
            if (status == 0)
                fprintf(stderr, "%s: %s: roots: %s\n", shmobj_tool_prog, t.arg,
                        shmobj_strerror(rc));
            if (status != EXIT_DAMAGED)
                status = EXIT_CANNOT;
            walked = false;
            break;
        }
        if (rc != 0) {
            printf("  entry %" PRIu32 ": %s\n", cur - 1, shmobj_strerror(rc));
            status = EXIT_DAMAGED;
            continue;
        }
        roots++;
        printf("  %-20s %-6s %s", ri.name, shmobj_tool_kind_name(ri.kind),
               shmobj_tool_bytes(ri.bytes, a, sizeof a, false));
        if (ri.kind == SHMOBJ_ROOT_QUEUE)
            stat_queue(seg, &ri);
        else if (ri.kind == SHMOBJ_ROOT_MAP)
            stat_map(seg, &ri, entries);
        else if (ri.kind == SHMOBJ_ROOT_OBJECT)
            stat_object(seg, &ri, entries);
        else if (ri.kind == SHMOBJ_ROOT_TOPIC)
            stat_topic(seg, &ri, entries);
        else if (ri.kind == SHMOBJ_ROOT_SERVICE)
            stat_service(seg, &ri);
        else
            printf("\n");
    }
    if (roots == 0 && walked)
        printf("  (none)\n");
    shmobj_segment_close(seg);
    return status;
}
