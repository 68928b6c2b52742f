/* shmobj: the command-line tool that looks into libshmobj segments.
 *
 * Built on the public API alone, like any program of the library's users.
 * What each command may do to a segment is part of its contract: `ls`
 * only peeks (shmobj_segment_peek: a read-only descriptor and mapping, no
 * attachment, no lock, no wait), `stat`, `dump`, `check` and `top` attach
 * as a reader (an attachment slot, the segment lock for the root
 * directory and heap walks, a map's reader slot) and change none of the
 * application's data, and
 * `rm` removes a name only after the peek found a segment behind it and
 * only while the name still refers to the file it opened before the peek.
 * Exit status: 0 success, 1 the segment (or what was asked of it) is
 * damaged, 2 it could not be looked at (missing, foreign, unreadable, not
 * ready, busy, bad usage). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <shmobj.h>

#include "shmobj-tool.h"

#define EXIT_DAMAGED 1
#define EXIT_CANNOT 2

static const char *prog = "shmobj";

/* ---- naming a segment ---------------------------------------------------- */

/* A NAME on the command line: a POSIX shm name ("demo", "/demo" or
 * "/dev/shm/demo"), or a path to a file-backed segment (any other name
 * with a slash in it). */
struct target {
    const char *arg; /* as given, for messages */
    char name[4096];
    unsigned backend;
};

static bool target_parse(const char *arg, struct target *t)
{
    t->arg = arg;
    const char *n = arg;
    if (strncmp(n, "/dev/shm/", 9) == 0)
        n += 9;
    else if (n[0] == '/' && strchr(n + 1, '/') == NULL)
        n += 1;
    t->backend = strchr(n, '/') != NULL || strcmp(n, ".") == 0 ||
                         strcmp(n, "..") == 0
                     ? SHMOBJ_BACKEND_FILE
                     : SHMOBJ_BACKEND_SHM;
    if (t->backend == SHMOBJ_BACKEND_FILE)
        n = arg;
    size_t len = strlen(n);
    if (len == 0 || len >= sizeof t->name)
        return false;
    memcpy(t->name, n, len + 1);
    return true;
}

/* Say why a segment cannot be used, in the words of the user, and give
 * the exit status that goes with it. */
static int why(const struct target *t, int rc)
{
    const char *msg;
    int status = EXIT_CANNOT;
    switch (rc) {
    case SHMOBJ_ENOTFOUND:
        msg = "no such segment";
        break;
    case SHMOBJ_EACCES:
        msg = "permission denied (reading a segment needs read permission, "
              "attaching to it read and write)";
        break;
    case SHMOBJ_ENOTSEG:
        msg = "not a libshmobj segment (another program's file); left alone";
        break;
    case SHMOBJ_ENOTREADY:
        msg = "not a segment yet and nobody is setting it up (empty or all "
              "zero: a creator that died at once, or another program's file)";
        break;
    case SHMOBJ_ETIMEDOUT:
        msg = "still being set up by its creator";
        break;
    case SHMOBJ_ECORRUPT:
        msg = "damaged: its header does not check out";
        status = EXIT_DAMAGED;
        break;
    case SHMOBJ_EVERSION:
        msg = "made by a libshmobj of another format version";
        break;
    case SHMOBJ_ELAYOUT:
        msg = "made by a differently built process (pointer size, byte "
              "order or lock format)";
        break;
    case SHMOBJ_EINVAL:
        msg = "not a valid segment name (shm names are [A-Za-z0-9._-], "
              "files are paths with a slash)";
        break;
    default:
        msg = shmobj_strerror(rc);
        break;
    }
    fprintf(stderr, "%s: %s: %s\n", prog, t->arg, msg);
    return status;
}

/* Attach to a segment to look at it; a message and an exit status when
 * that cannot be done. A segment the peek finds stale is reported as
 * such rather than as "not ready". Commands that only read pass
 * SHMOBJ_SEGMENT_RDONLY: they then take no lock and write nothing, so a
 * stuck lock holder does not stop them; check passes 0 and is read-write
 * where the user may write (it may then repair) and read-only elsewhere. */
static int attach(const struct target *t, unsigned flags, shmobj_segment **seg)
{
    int rc = shmobj_segment_open_flags(t->name, t->backend, flags, 0, seg);
    if (rc == 0)
        return 0;
    if (rc == SHMOBJ_ENOTREADY) {
        shmobj_segment_peek_info pi = {.struct_size = sizeof pi};
        if (shmobj_segment_peek(t->name, t->backend, &pi) == 0 &&
            (pi.flags & SHMOBJ_SEGMENT_PEEK_STALE)) {
            fprintf(stderr,
                    "%s: %s: stale: its creator died during set-up; "
                    "remove it with '%s rm %s'\n",
                    prog, t->arg, prog, t->arg);
            return EXIT_CANNOT;
        }
    }
    return why(t, rc);
}

/* ---- small printing helpers ---------------------------------------------- */

/* Bytes for people: "8.0 MiB"; with `tight`, "8.0MiB", so that a column
 * of `ls` is one word. */
static const char *bytes_fmt(uint64_t n, char *buf, size_t len, bool tight)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    unsigned u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    const char *sep = tight ? "" : " ";
    if (u == 0)
        snprintf(buf, len, "%" PRIu64 "%sB", n, sep);
    else
        snprintf(buf, len, "%.1f%s%s", v, sep, unit[u]);
    return buf;
}

static const char *bytes_h(uint64_t n, char *buf, size_t len)
{
    return bytes_fmt(n, buf, len, false);
}

static const char *time_h(uint64_t ns, char *buf, size_t len)
{
    time_t s = (time_t)(ns / 1000000000u);
    struct tm tm;
    if (ns == 0 || gmtime_r(&s, &tm) == NULL)
        snprintf(buf, len, "-");
    else
        strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buf;
}

static const char *backend_name(unsigned b)
{
    return b == SHMOBJ_BACKEND_SHM    ? "shm"
           : b == SHMOBJ_BACKEND_FILE ? "file"
           : b == SHMOBJ_BACKEND_MEMFD ? "memfd"
                                       : "?";
}

const char *shmobj_tool_kind_name(unsigned kind)
{
    switch (kind) {
    case SHMOBJ_ROOT_QUEUE:
        return "queue";
    case SHMOBJ_ROOT_MAP:
        return "map";
    case SHMOBJ_ROOT_OBJECT:
        return "object";
    case SHMOBJ_ROOT_RAW:
        return "raw";
    case SHMOBJ_ROOT_STALE:
        return "stale";
    default:
        return "bad";
    }
}

const char *shmobj_tool_type_name(int type)
{
    /* enum shmobj_type, then enum shmobj_type_ref: the numbers go on */
    static const char *names[] = {"?",    "null",  "bool",   "int",  "uint",
                                  "double", "str", "bytes",  "buffer", "list",
                                  "tuple", "dict", "set",    "struct", "mlist",
                                  "mdict", "mset", "shape",  "record", "link"};
    return type > 0 && type < (int)(sizeof names / sizeof names[0])
               ? names[type]
               : "?";
}

static bool is_help(const char *a)
{
    return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

/* ---- help ------------------------------------------------------------------ */

static const char *const usage_main =
    "usage: shmobj COMMAND [ARGS]\n"
    "\n"
    "Look into libshmobj shared-memory segments.\n"
    "\n"
    "commands:\n"
    "  ls [-a] [NAME...]        the segments on this host, without attaching\n"
    "  stat NAME                heap, attached processes, every root\n"
    "  dump [--pretty] NAME [ROOT]  objects as JSON\n"
    "  check NAME               integrity check of heap, maps, queues, objects\n"
    "  rm [-f] NAME...          remove segments (only segments)\n"
    "  top [-i SECONDS] [-n COUNT] NAME   live figures\n"
    "\n"
    "NAME is a POSIX shm name (demo, /demo, /dev/shm/demo) or the path of a\n"
    "file-backed segment. 'shmobj COMMAND --help' tells more.\n"
    "exit status: 0 ok, 1 damaged, 2 could not look (missing, foreign,\n"
    "unreadable, not ready, busy: a live process kept the segment's lock\n"
    "for 10 s, bad usage).\n";

static const char *const usage_ls =
    "usage: shmobj ls [-a] [NAME...]\n"
    "\n"
    "Lists the libshmobj segments under /dev/shm (and the shm names or\n"
    "file-backed segments given), without attaching to them or changing\n"
    "them: name, backend, size, maximum size, heap bytes in use, creator\n"
    "pid, attached handles and state: ready, setting-up, stale (its creator\n"
    "died before it was ready), orphaned (ready, nobody attached), damaged,\n"
    "version (another format), layout (another build).\n"
    "  -a  also list the files under /dev/shm that could not be judged\n"
    "      (unreadable ones, and empty ones nobody sets up)\n";

static const char *const usage_stat =
    "usage: shmobj stat NAME\n"
    "\n"
    "Attaches to the segment and prints its header facts, heap figures and\n"
    "fragmentation, the other attached processes (pid, token, since when),\n"
    "and every root with its kind: queues with depth, capacity, totals and\n"
    "skipped/rescued counters; maps with count, load and bytes per item;\n"
    "objects with type and size.\n";

static const char *const usage_dump =
    "usage: shmobj dump [--pretty] NAME [ROOT]\n"
    "\n"
    "Writes the object published as ROOT as JSON (the library's JSON\n"
    "output); without ROOT, one JSON object with every root: objects as\n"
    "their JSON, queues, maps and raw blocks as a short description.\n"
    "  --pretty  indent the output\n";

static const char *const usage_check =
    "usage: shmobj check NAME\n"
    "\n"
    "Checks the whole segment: the heap's blocks and free lists, the root\n"
    "directory, every map (tables, entries, retired memory), every queue\n"
    "(ring header, slots, positions, retire FIFO) and every object graph.\n"
    "Prints each problem with the offset of the first bad byte found.\n"
    "exit status: 0 consistent, 1 damaged, 2 could not check.\n";

static const char *const usage_rm =
    "usage: shmobj rm [-f] NAME...\n"
    "\n"
    "Removes the names of segments. Each is looked at first (read-only);\n"
    "anything that is not a libshmobj segment is refused, and so is a name\n"
    "that came to hold another file while it was looked at. Processes\n"
    "still attached keep using it until they detach.\n"
    "  -f  also remove an empty or all-zero object nobody is setting up\n"
    "      (a creator that died before writing anything)\n";

static const char *const usage_top =
    "usage: shmobj top [-i SECONDS] [-n COUNT] NAME\n"
    "\n"
    "Shows live figures every interval: per queue the depth and messages\n"
    "put and taken per second, per map its entries and their net change per\n"
    "second, and the heap's use. A map keeps no operation counters, so top\n"
    "cannot show its gets, sets or deletes per second: reads, replacing\n"
    "sets and a set undone by a delete leave CHANGE/S at 0. The screen is\n"
    "cleared between frames only when the output is a terminal.\n"
    "  -i SECONDS  interval (default 1, fractions allowed)\n"
    "  -n COUNT    stop after COUNT frames (default: until interrupted)\n";

static int usage(const char *text, bool error)
{
    fputs(text, error ? stderr : stdout);
    return error ? EXIT_CANNOT : 0;
}

/* A command line that cannot be run: first what was wrong with it, on a
 * line of its own (the one a user or a script reads), then the usage. */
static int __attribute__((format(printf, 3, 4)))
usage_bad(const char *cmd, const char *text, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s %s: ", prog, cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return usage(text, true);
}

/* The ending of a count's noun: "1 map", "2 maps". */
static const char *plural(unsigned n)
{
    return n == 1 ? "" : "s";
}

/* ---- ls -------------------------------------------------------------------- */

static const char *peek_state(int rc, const shmobj_segment_peek_info *pi)
{
    switch (rc) {
    case 0:
        if (pi->flags & SHMOBJ_SEGMENT_PEEK_STALE)
            return "stale";
        if (!(pi->flags & SHMOBJ_SEGMENT_PEEK_READY))
            return "setting-up";
        if (pi->flags & SHMOBJ_SEGMENT_PEEK_ORPHANED)
            return "orphaned";
        return "ready";
    case SHMOBJ_ECORRUPT:
        return "damaged";
    case SHMOBJ_EVERSION:
        return "version";
    case SHMOBJ_ELAYOUT:
        return "layout";
    case SHMOBJ_EACCES:
        return "unreadable";
    case SHMOBJ_ENOTREADY:
        return "empty";
    default:
        return "?";
    }
}

/* Printed before the first row only, so a look that finds nothing prints
 * nothing but its message. */
static bool ls_header_done;

static void ls_header(void)
{
    if (ls_header_done)
        return;
    ls_header_done = true;
    printf("%-32s %-5s %10s %10s %10s %8s %4s %s\n", "NAME", "BACK", "SIZE",
           "MAX", "USED", "CREATOR", "ATT", "STATE");
}

static void ls_row(const char *name, int rc, const shmobj_segment_peek_info *pi,
                   unsigned backend)
{
    char a[32], b[32], c[32], pid[16], att[16];
    ls_header();
    bool ready = rc == 0 && (pi->flags & SHMOBJ_SEGMENT_PEEK_READY);
    snprintf(pid, sizeof pid, "%" PRIu32, pi->creator_pid);
    snprintf(att, sizeof att, "%" PRIu32, pi->attached);
    printf("%-32s %-5s %10s %10s %10s %8s %4s %s\n", name,
           backend_name(ready ? pi->backend : backend),
           rc == 0 || pi->file_size
               ? bytes_fmt(ready ? pi->size : pi->file_size, a, sizeof a, true)
               : "-",
           ready ? bytes_fmt(pi->max_size, b, sizeof b, true) : "-",
           ready && (pi->flags & SHMOBJ_SEGMENT_PEEK_USED_KNOWN)
               ? bytes_fmt(pi->heap_used, c, sizeof c, true)
               : "-",
           ready ? pid : "-", ready ? att : "-", peek_state(rc, pi));
}

/* A peek that found the header of a libshmobj segment, usable or not. */
static bool ours(int rc)
{
    return rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_EVERSION ||
           rc == SHMOBJ_ELAYOUT;
}

static int cmd_ls(int argc, char **argv)
{
    bool all = false;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
        if (is_help(argv[i]))
            return usage(usage_ls, false);
        if (strcmp(argv[i], "-a") == 0 || strcmp(argv[i], "--all") == 0)
            all = true;
        else
            return usage_bad("ls", usage_ls, "unknown option '%s'", argv[i]);
    }
    int status = 0;
    if (i < argc) {
        for (; i < argc; i++) {
            struct target t;
            shmobj_segment_peek_info pi = {.struct_size = sizeof pi};
            if (!target_parse(argv[i], &t)) {
                status = why(&t, SHMOBJ_EINVAL);
                continue;
            }
            int rc = shmobj_segment_peek(t.name, t.backend, &pi);
            if (ours(rc)) {
                ls_row(t.arg, rc, &pi, t.backend);
                if (rc == SHMOBJ_ECORRUPT && status == 0)
                    status = EXIT_DAMAGED;
            } else {
                status = why(&t, rc);
            }
        }
        return status;
    }
    DIR *d = opendir("/dev/shm");
    if (d == NULL) {
        fprintf(stderr, "%s: /dev/shm: %s\n", prog, strerror(errno));
        return EXIT_CANNOT;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        shmobj_segment_peek_info pi = {.struct_size = sizeof pi};
        int rc = shmobj_segment_peek(e->d_name, SHMOBJ_BACKEND_SHM, &pi);
        if (ours(rc) || (all && (rc == SHMOBJ_EACCES || rc == SHMOBJ_ENOTREADY)))
            ls_row(e->d_name, rc, &pi, SHMOBJ_BACKEND_SHM);
    }
    closedir(d);
    return status;
}

/* ---- stat ------------------------------------------------------------------ */

static void stat_object(shmobj_segment *seg, const shmobj_root_info *ri)
{
    shmobj_view v;
    int rc = shmobj_obj_get(seg, ri->ref, &v);
    if (rc != 0) {
        printf("  (%s)", shmobj_strerror(rc));
        return;
    }
    int type = shmobj_view_type(&v);
    printf(" type %s", shmobj_tool_type_name(type));
    size_t len;
    if (type == SHMOBJ_TYPE_BUFFER) {
        shmobj_buffer_info bi = {.struct_size = sizeof bi};
        if (shmobj_buffer_get(&v, &bi) == 0) {
            printf(" %s[", shmobj_dtype_name(bi.dtype));
            for (uint32_t d = 0; d < bi.ndim; d++)
                printf("%s%" PRIu64, d ? "," : "", bi.shape[d]);
            printf("]");
        }
    } else if (shmobj_view_len(&v, &len) == 0) {
        printf(" len %zu", len);
    }
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
    shmobj_queue_close(q);
}

static void stat_map(shmobj_segment *seg, const shmobj_root_info *ri)
{
    shmobj_map *m = NULL;
    int rc = shmobj_map_open(seg, ri->name, &m);
    shmobj_map_stats st = {.struct_size = sizeof st};
    if (rc == 0)
        rc = shmobj_map_stats_get(m, &st);
    if (rc != 0) {
        printf(" (%s)", shmobj_strerror(rc));
    } else {
        char b[32];
        printf(" count %" PRIu64 ", load %.2f, %.1f bytes/item, %s in all",
               st.count, st.load_factor, st.bytes_per_item,
               bytes_h(st.total_bytes, b, sizeof b));
        if (st.pending_bytes)
            printf(", %" PRIu64 " bytes retired", st.pending_bytes);
    }
    shmobj_map_close(m);
}

static int cmd_stat(int argc, char **argv)
{
    if (argc == 2 && is_help(argv[1]))
        return usage(usage_stat, false);
    if (argc != 2)
        return usage_bad("stat", usage_stat, argc < 2 ? "NAME missing" : "one NAME expected");
    struct target t;
    if (!target_parse(argv[1], &t))
        return why(&t, SHMOBJ_EINVAL);
    shmobj_segment *seg;
    int status = attach(&t, SHMOBJ_SEGMENT_RDONLY, &seg);
    if (status != 0)
        return status;
    char a[32], b[32], c[48];
    shmobj_segment_info si = {.struct_size = sizeof si};
    if (shmobj_segment_info_get(seg, &si) == 0) {
        printf("segment %s\n", t.arg);
        printf("  backend %s, format %" PRIu32 ", size %s of at most %s\n",
               backend_name(si.backend), si.format_version,
               bytes_h(si.size, a, sizeof a), bytes_h(si.max_size, b, sizeof b));
        printf("  created %s by pid %" PRIu32 " (%s)%s\n",
               time_h(si.created_ns, c, sizeof c), si.creator_pid,
               (si.flags & SHMOBJ_SEGMENT_INFO_CREATOR_ATTACHED) ? "attached"
                                                                 : "gone",
               (si.flags & SHMOBJ_SEGMENT_INFO_LINKED) ? "" : ", name removed");
    }
    shmobj_arena_stats hs = {.struct_size = sizeof hs};
    int rc = shmobj_arena_stats_get(seg, &hs);
    if (rc == 0) {
        printf("heap\n");
        printf("  %s in all, %s used in %" PRIu64 " blocks, %s free in %" PRIu64
               " blocks\n",
               bytes_h(hs.total_bytes, a, sizeof a),
               bytes_h(hs.used_bytes, b, sizeof b), hs.used_blocks,
               bytes_h(hs.free_bytes, c, sizeof c), hs.free_blocks);
        printf("  largest free block %s, fragmentation %.1f%%\n",
               bytes_h(hs.largest_free, a, sizeof a),
               hs.fragmentation_permille / 10.0);
    } else {
        printf("heap\n  %s\n", shmobj_strerror(rc));
        status = rc == SHMOBJ_ECORRUPT ? EXIT_DAMAGED : EXIT_CANNOT;
        if (rc != SHMOBJ_ECORRUPT)
            fprintf(stderr, "%s: %s: heap: %s\n", prog, t.arg, shmobj_strerror(rc));
    }
    /* The heap's walk and the root directory's take the same lock: when a
     * live process kept it past the library's bound, the roots would cost
     * the user another 10 s for the same answer. */
    bool lock_busy = rc == SHMOBJ_EBUSY;
    shmobj_segment_proc procs[1024];
    size_t n = 0;
    rc = shmobj_segment_procs_get(seg, procs, 1024, &n);
    if (rc == 0 || rc == SHMOBJ_ENOBUFS) {
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
                   time_h(procs[i].attached_ns, c, sizeof c),
                   (procs[i].flags & SHMOBJ_SEGMENT_PROC_CREATOR) ? " creator"
                                                                  : "");
        }
    }
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
                fprintf(stderr, "%s: %s: roots: %s\n", prog, t.arg,
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
               bytes_h(ri.bytes, a, sizeof a));
        if (ri.kind == SHMOBJ_ROOT_QUEUE)
            stat_queue(seg, &ri);
        else if (ri.kind == SHMOBJ_ROOT_MAP)
            stat_map(seg, &ri);
        else if (ri.kind == SHMOBJ_ROOT_OBJECT)
            stat_object(seg, &ri);
        printf("\n");
    }
    if (roots == 0 && walked)
        printf("  (none)\n");
    shmobj_segment_close(seg);
    return status;
}

/* ---- dump ------------------------------------------------------------------ */

/* Write a root name as a JSON string. */
static void json_name(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static int dump_root(shmobj_segment *seg, const shmobj_root_info *ri, FILE *f)
{
    if (ri->kind == SHMOBJ_ROOT_OBJECT) {
        shmobj_view v;
        int rc = shmobj_obj_get(seg, ri->ref, &v);
        if (rc == 0)
            rc = shmobj_view_json_write(&v, f);
        return rc;
    }
    if (ri->kind == SHMOBJ_ROOT_QUEUE) {
        shmobj_queue *q = NULL;
        shmobj_queue_stats st = {.struct_size = sizeof st};
        int rc = shmobj_queue_open(seg, ri->name, &q);
        if (rc == 0)
            rc = shmobj_queue_stats_get(q, &st);
        shmobj_queue_close(q);
        if (rc != 0)
            return rc;
        fprintf(f, "{\"$queue\":{\"capacity\":%" PRIu32 ",\"depth\":%" PRIu64
                   ",\"puts\":%" PRIu64 ",\"takes\":%" PRIu64 "}}",
                st.capacity, st.depth, st.puts, st.takes);
        return 0;
    }
    if (ri->kind == SHMOBJ_ROOT_MAP) {
        shmobj_map *m;
        uint64_t count = 0;
        int rc = shmobj_map_open(seg, ri->name, &m);
        if (rc == 0) {
            rc = shmobj_map_count(m, &count);
            shmobj_map_close(m);
        }
        if (rc != 0)
            return rc;
        fprintf(f, "{\"$map\":{\"count\":%" PRIu64 "}}", count);
        return 0;
    }
    if (ri->kind == SHMOBJ_ROOT_RAW) {
        fprintf(f, "{\"$raw\":%" PRIu64 "}", ri->bytes);
        return 0;
    }
    return ri->kind == SHMOBJ_ROOT_STALE ? SHMOBJ_ESTALE : SHMOBJ_ECORRUPT;
}

static int cmd_dump(int argc, char **argv)
{
    bool pretty = false;
    const char *args[2];
    int nargs = 0;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i]))
            return usage(usage_dump, false);
        if (strcmp(argv[i], "--pretty") == 0 || strcmp(argv[i], "-p") == 0)
            pretty = true;
        else if (argv[i][0] == '-' && argv[i][1] != '\0')
            return usage_bad("dump", usage_dump, "unknown option '%s'", argv[i]);
        else if (nargs < 2)
            args[nargs++] = argv[i];
        else
            return usage_bad("dump", usage_dump, "too many arguments");
    }
    if (nargs < 1)
        return usage_bad("dump", usage_dump, "NAME missing");
    struct target t;
    if (!target_parse(args[0], &t))
        return why(&t, SHMOBJ_EINVAL);
    shmobj_segment *seg;
    int status = attach(&t, SHMOBJ_SEGMENT_RDONLY, &seg);
    if (status != 0)
        return status;
    /* Compact JSON into memory first: --pretty re-indents it, and a dump
     * that fails half-way prints nothing but its error. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL) {
        fprintf(stderr, "%s: %s\n", prog, strerror(errno));
        shmobj_segment_close(seg);
        return EXIT_CANNOT;
    }
    int rc = 0;
    if (nargs == 2) {
        shmobj_ref ref;
        rc = shmobj_segment_root_get(seg, args[1], &ref);
        shmobj_root_info ri = {.struct_size = sizeof ri};
        uint32_t cur = 0;
        /* the kind of that root, from the directory (past damaged entries) */
        while (rc == 0) {
            int r = shmobj_segment_root_next(seg, &cur, &ri);
            if (r == SHMOBJ_ECORRUPT)
                continue;
            if (r != 0) {
                rc = r;
                break;
            }
            if (strcmp(ri.name, args[1]) == 0)
                break;
        }
        if (rc == 0)
            rc = dump_root(seg, &ri, f);
        if (rc == SHMOBJ_ENOTFOUND || rc == SHMOBJ_EINVAL)
            fprintf(stderr, "%s: %s: no root named '%s'\n", prog, t.arg, args[1]);
        else if (rc != 0)
            fprintf(stderr, "%s: %s: root '%s': %s\n", prog, t.arg, args[1],
                    shmobj_strerror(rc));
    } else {
        fputc('{', f);
        uint32_t cur = 0;
        shmobj_root_info ri = {.struct_size = sizeof ri};
        bool first = true;
        int r;
        while (rc == 0 &&
               (r = shmobj_segment_root_next(seg, &cur, &ri)) != SHMOBJ_ENOTFOUND) {
            if (r != 0) {
                rc = r;
                fprintf(stderr, "%s: %s: root directory entry %" PRIu32 ": %s\n",
                        prog, t.arg, cur - 1, shmobj_strerror(r));
                break;
            }
            if (!first)
                fputc(',', f);
            first = false;
            json_name(f, ri.name);
            fputc(':', f);
            r = dump_root(seg, &ri, f);
            if (r == SHMOBJ_ESTALE) {
                fputs("{\"$stale\":true}", f);
            } else if (r != 0) {
                rc = r;
                fprintf(stderr, "%s: %s: root '%s': %s\n", prog, t.arg, ri.name,
                        shmobj_strerror(r));
            }
        }
        fputc('}', f);
    }
    fclose(f);
    if (rc == 0) {
        if (pretty)
            shmobj_tool_json_pretty(text, len, stdout);
        else
            fwrite(text, 1, len, stdout);
        fputc('\n', stdout);
    }
    free(text);
    shmobj_segment_close(seg);
    if (rc == 0)
        return 0;
    return rc == SHMOBJ_ECORRUPT ? EXIT_DAMAGED : EXIT_CANNOT;
}

/* ---- check ----------------------------------------------------------------- */

struct check_state {
    const struct target *t;
    unsigned bad;
    unsigned queues, maps, objects, others;
};

static void damaged(struct check_state *cs, const char *what, const char *name,
                    uint64_t off, int rc)
{
    cs->bad++;
    printf("%s%s%s%s: damaged at offset %" PRIu64 " (0x%" PRIx64 "): %s\n", what,
           name ? " '" : "", name ? name : "", name ? "'" : "", off, off,
           shmobj_strerror(rc));
}

static uint64_t ref_off(shmobj_ref r)
{
    return r & ((UINT64_C(1) << 48) - 1);
}

static int check_root(shmobj_segment *seg, const shmobj_root_info *ri,
                      struct check_state *cs)
{
    uint64_t bad = ref_off(ri->ref);
    int rc = 0;
    switch (ri->kind) {
    case SHMOBJ_ROOT_QUEUE: {
        cs->queues++;
        shmobj_queue *q;
        rc = shmobj_queue_open(seg, ri->name, &q);
        if (rc == 0) {
            rc = shmobj_queue_check(q, &bad);
            shmobj_queue_close(q);
        }
        if (rc != 0 && rc != SHMOBJ_EBUSY)
            damaged(cs, "queue", ri->name, bad, rc);
        break;
    }
    case SHMOBJ_ROOT_MAP: {
        cs->maps++;
        shmobj_map *m;
        rc = shmobj_map_open(seg, ri->name, &m);
        if (rc == 0) {
            rc = shmobj_map_check(m);
            shmobj_map_close(m);
        }
        if (rc != 0 && rc != SHMOBJ_EBUSY && rc != SHMOBJ_EFULL)
            damaged(cs, "map", ri->name, bad, rc);
        break;
    }
    case SHMOBJ_ROOT_OBJECT:
        cs->objects++;
        rc = shmobj_obj_check(seg, ri->ref);
        if (rc != 0)
            damaged(cs, "object", ri->name, bad, rc);
        break;
    case SHMOBJ_ROOT_STALE:
        /* the application freed what it had published and kept the name:
         * a dangling root, not damage of the segment */
        cs->others++;
        printf("root '%s': names a freed block (a dangling root, not damage)\n",
               ri->name);
        break;
    case SHMOBJ_ROOT_BAD:
        rc = SHMOBJ_ECORRUPT;
        damaged(cs, "root", ri->name, bad, rc);
        break;
    default:
        cs->others++;
        break;
    }
    return rc;
}

static int cmd_check(int argc, char **argv)
{
    if (argc == 2 && is_help(argv[1]))
        return usage(usage_check, false);
    if (argc != 2)
        return usage_bad("check", usage_check, argc < 2 ? "NAME missing" : "one NAME expected");
    struct target t;
    if (!target_parse(argv[1], &t))
        return why(&t, SHMOBJ_EINVAL);
    shmobj_segment *seg;
    int status = attach(&t, 0, &seg);
    if (status == EXIT_DAMAGED)
        printf("header: damaged at offset 0 (0x0)\n");
    if (status != 0)
        return status;
    struct check_state cs = {.t = &t};
    bool incomplete = false;
    shmobj_segment_info si = {.struct_size = sizeof si};
    if (shmobj_segment_info_get(seg, &si) == 0 &&
        (si.flags & SHMOBJ_SEGMENT_INFO_READONLY))
        printf("%s: read-only: not repaired (this user may only read it)\n", t.arg);
    uint64_t bad = 0;
    int rc = shmobj_arena_check(seg, &bad);
    if (rc == SHMOBJ_ECORRUPT)
        damaged(&cs, "heap", NULL, bad, rc);
    else if (rc != 0) {
        fprintf(stderr, "%s: %s: heap: %s\n", prog, t.arg, shmobj_strerror(rc));
        incomplete = true;
    }
    uint32_t cur = 0;
    shmobj_root_info ri = {.struct_size = sizeof ri};
    unsigned roots = 0;
    while ((rc = shmobj_segment_root_next(seg, &cur, &ri)) != SHMOBJ_ENOTFOUND) {
        if (rc == SHMOBJ_ECORRUPT) {
            cs.bad++;
            printf("root directory: entry %" PRIu32 " damaged (its name)\n",
                   cur - 1);
            continue;
        }
        if (rc != 0) {
            fprintf(stderr, "%s: %s: root directory: %s\n", prog, t.arg,
                    shmobj_strerror(rc));
            incomplete = true;
            break;
        }
        roots++;
        rc = check_root(seg, &ri, &cs);
        if (rc == SHMOBJ_EBUSY || rc == SHMOBJ_EFULL) {
            fprintf(stderr, "%s: %s: %s '%s': %s\n", prog, t.arg,
                    shmobj_tool_kind_name(ri.kind), ri.name, shmobj_strerror(rc));
            incomplete = true;
        }
    }
    shmobj_segment_close(seg);
    if (cs.bad > 0) {
        printf("%s: damaged (%u problem%s)\n", t.arg, cs.bad, plural(cs.bad));
        return EXIT_DAMAGED;
    }
    if (incomplete)
        return EXIT_CANNOT;
    printf("%s: ok: heap, %u root%s (%u queue%s, %u map%s, %u object%s, %u other%s)\n",
           t.arg, roots, plural(roots), cs.queues, plural(cs.queues), cs.maps,
           plural(cs.maps), cs.objects, plural(cs.objects), cs.others, plural(cs.others));
    return 0;
}

/* ---- rm -------------------------------------------------------------------- */

/* The file a name refers to, by descriptor or by a fresh look at the
 * name: two are the same file when device and inode agree. */
struct file_id {
    dev_t dev;
    ino_t ino;
};

static bool same_file(const struct file_id *a, const struct file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino;
}

/* The path stat() takes for a name: glibc keeps POSIX shm objects in
 * /dev/shm, as shm_open() finds them. */
static void name_path(const struct target *t, char *path, size_t size)
{
    if (t->backend == SHMOBJ_BACKEND_SHM)
        snprintf(path, size, "/dev/shm/%s", t->name);
    else
        snprintf(path, size, "%s", t->name);
}

static bool name_id(const struct target *t, struct file_id *id)
{
    char path[sizeof t->name + 16];
    struct stat st;
    name_path(t, path, sizeof path);
    if (stat(path, &st) != 0)
        return false;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    return true;
}

/* Remove one name if a segment is behind it. The file is pinned first by
 * a read-only descriptor and named by device and inode; the peek judges
 * what the name holds, and the name is unlinked only if it still refers
 * to the pinned file, looked at again after the peek and just before the
 * unlink. What the OS leaves open is the moment between that last look
 * and the unlink (no call unlinks a name only if it holds a given inode). */
static int rm_one(const struct target *t, bool force)
{
    int fd = t->backend == SHMOBJ_BACKEND_SHM
                 ? shm_open(t->name, O_RDONLY | O_CLOEXEC, 0)
                 : open(t->name, O_RDONLY | O_CLOEXEC);
    struct file_id pinned = {0};
    if (fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) != 0) {
            close(fd);
            fd = -1;
        } else {
            pinned.dev = st.st_dev;
            pinned.ino = st.st_ino;
        }
    }
    shmobj_segment_peek_info pi = {.struct_size = sizeof pi};
    int rc = shmobj_segment_peek(t->name, t->backend, &pi);
    if (!ours(rc) && !(force && rc == SHMOBJ_ENOTREADY)) {
        if (fd >= 0)
            close(fd);
        if (rc == SHMOBJ_ENOTREADY)
            fprintf(stderr,
                    "%s: %s: refused: empty or all zero, nobody sets it "
                    "up; not known to be a segment (-f removes it)\n",
                    prog, t->arg);
        else
            why(t, rc);
        return EXIT_CANNOT;
    }
    /* A name the tool could not open but the peek could (it appeared in
     * between, or the open failed for want of a descriptor) has no pinned
     * file to compare with: refused like a replaced one. */
    struct file_id now;
    bool kept = fd >= 0 && name_id(t, &now) && same_file(&pinned, &now);
    if (kept)
        rc = shmobj_segment_destroy(t->name, t->backend);
    if (fd >= 0)
        close(fd);
    if (!kept) {
        fprintf(stderr,
                "%s: %s: refused: the name was replaced while it was looked "
                "at; left alone\n",
                prog, t->arg);
        return EXIT_CANNOT;
    }
    if (rc != 0) {
        why(t, rc);
        return EXIT_CANNOT;
    }
    return 0;
}

static int cmd_rm(int argc, char **argv)
{
    bool force = false;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
        if (is_help(argv[i]))
            return usage(usage_rm, false);
        if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--force") == 0)
            force = true;
        else if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else
            return usage_bad("rm", usage_rm, "unknown option '%s'", argv[i]);
    }
    if (i >= argc)
        return usage_bad("rm", usage_rm, "NAME missing");
    int status = 0;
    for (; i < argc; i++) {
        struct target t;
        if (!target_parse(argv[i], &t)) {
            status = why(&t, SHMOBJ_EINVAL);
            continue;
        }
        if (rm_one(&t, force) != 0)
            status = EXIT_CANNOT;
    }
    return status;
}

/* ---- top ------------------------------------------------------------------- */

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
    uint64_t puts, takes, count; /* at the previous frame */
    bool have_prev;
};

#define TOP_ROOTS 128

static struct top_root *top_find(struct top_root *r, unsigned *n,
                                 const shmobj_root_info *ri)
{
    for (unsigned i = 0; i < *n; i++)
        if (strcmp(r[i].name, ri->name) == 0 && r[i].ref == ri->ref)
            return &r[i];
    if (*n >= TOP_ROOTS)
        return NULL;
    struct top_root *e = &r[(*n)++];
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
    e->q = NULL;
    e->m = NULL;
}

static void top_frame(shmobj_segment *seg, const struct target *t,
                      struct top_root *roots, unsigned *nroots, double dt,
                      unsigned frame)
{
    char a[32], b[32], c[48];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    printf("shmobj top %s  %s  frame %u\n", t->arg,
           time_h((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec, c,
                  sizeof c),
           frame);
    shmobj_segment_info si = {.struct_size = sizeof si};
    shmobj_arena_stats hs = {.struct_size = sizeof hs};
    size_t procs = 0;
    (void)shmobj_segment_procs_get(seg, NULL, 0, &procs);
    if (shmobj_segment_info_get(seg, &si) == 0 &&
        shmobj_arena_stats_get(seg, &hs) == 0)
        printf("heap %s used of %s (%.1f%%), %" PRIu64
               " blocks, fragmentation %.1f%%, %zu processes besides this one\n",
               bytes_h(hs.used_bytes, a, sizeof a),
               bytes_h(hs.total_bytes, b, sizeof b),
               hs.total_bytes ? 100.0 * (double)hs.used_bytes / (double)hs.total_bytes
                              : 0.0,
               hs.used_blocks, hs.fragmentation_permille / 10.0,
               procs > 0 ? procs - 1 : 0);
    for (unsigned i = 0; i < *nroots; i++)
        roots[i].seen = false;
    uint32_t cur = 0;
    shmobj_root_info ri = {.struct_size = sizeof ri};
    int rc;
    bool head_q = false, head_m = false;
    while ((rc = shmobj_segment_root_next(seg, &cur, &ri)) != SHMOBJ_ENOTFOUND) {
        if (rc != 0)
            continue;
        if (ri.kind != SHMOBJ_ROOT_QUEUE && ri.kind != SHMOBJ_ROOT_MAP)
            continue;
        struct top_root *e = top_find(roots, nroots, &ri);
        if (e == NULL)
            continue;
        e->seen = true;
        if (e->kind == SHMOBJ_ROOT_QUEUE) {
            if (e->q == NULL && shmobj_queue_open(seg, e->name, &e->q) != 0)
                continue;
            shmobj_queue_stats st = {.struct_size = sizeof st};
            if (shmobj_queue_stats_get(e->q, &st) != 0)
                continue;
            if (!head_q) {
                printf("%-20s %8s %8s %12s %12s %8s %8s\n", "QUEUE", "DEPTH",
                       "CAP", "PUT/S", "TAKE/S", "SKIPPED", "RESCUED");
                head_q = true;
            }
            char pr[24] = "-", tr[24] = "-";
            if (e->have_prev && dt > 0) {
                snprintf(pr, sizeof pr, "%.0f", (double)(st.puts - e->puts) / dt);
                snprintf(tr, sizeof tr, "%.0f", (double)(st.takes - e->takes) / dt);
            }
            printf("%-20s %8" PRIu64 " %8" PRIu32 " %12s %12s %8" PRIu64
                   " %8" PRIu64 "\n",
                   e->name, st.depth, st.capacity, pr, tr, st.skipped, st.rescued);
            e->puts = st.puts;
            e->takes = st.takes;
            e->have_prev = true;
        } else {
            if (e->m == NULL && shmobj_map_open(seg, e->name, &e->m) != 0) {
                e->m = NULL;
                continue;
            }
            uint64_t count = 0;
            if (shmobj_map_count(e->m, &count) != 0)
                continue;
            if (!head_m) {
                printf("%-20s %12s %12s\n", "MAP", "ENTRIES", "CHANGE/S");
                head_m = true;
            }
            char cr[24] = "-";
            if (e->have_prev && dt > 0)
                snprintf(cr, sizeof cr, "%+.0f",
                         ((double)count - (double)e->count) / dt);
            printf("%-20s %12" PRIu64 " %12s\n", e->name, count, cr);
            e->count = count;
            e->have_prev = true;
        }
    }
    /* roots that went away: let their handles go */
    for (unsigned i = 0; i < *nroots; i++)
        if (!roots[i].seen) {
            top_drop(&roots[i]);
            roots[i] = roots[--*nroots];
            i--;
        }
    if (!head_q && !head_m)
        printf("(no queues or maps)\n");
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmd_top(int argc, char **argv)
{
    double interval = 1.0;
    long count = 0;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i]))
            return usage(usage_top, false);
        if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
            char *end;
            interval = strtod(argv[++i], &end);
            if (*end != '\0' || !(interval > 0) || interval > 86400)
                return usage_bad("top", usage_top,
                                 "bad interval '%s' (seconds, more than 0, at most 86400)",
                                 argv[i]);
        } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            char *end;
            count = strtol(argv[++i], &end, 10);
            if (*end != '\0' || count < 0)
                return usage_bad("top", usage_top, "bad count '%s' (frames, 0 or more)", argv[i]);
        } else if (strcmp(argv[i], "-i") == 0 || strcmp(argv[i], "-n") == 0) {
            return usage_bad("top", usage_top, "option '%s' needs a value", argv[i]);
        } else if (argv[i][0] == '-') {
            return usage_bad("top", usage_top, "unknown option '%s'", argv[i]);
        } else if (name != NULL) {
            return usage_bad("top", usage_top, "one NAME expected");
        } else {
            name = argv[i];
        }
    }
    if (name == NULL)
        return usage_bad("top", usage_top, "NAME missing");
    struct target t;
    if (!target_parse(name, &t))
        return why(&t, SHMOBJ_EINVAL);
    shmobj_segment *seg;
    int status = attach(&t, SHMOBJ_SEGMENT_RDONLY, &seg);
    if (status != 0)
        return status;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    bool tty = isatty(STDOUT_FILENO);
    static struct top_root roots[TOP_ROOTS];
    unsigned nroots = 0;
    double last = mono_s();
    for (unsigned frame = 1; !stop_now; frame++) {
        double now = mono_s();
        if (tty)
            fputs("\033[H\033[2J", stdout);
        else if (frame > 1)
            fputc('\n', stdout);
        top_frame(seg, &t, roots, &nroots, now - last, frame);
        fflush(stdout);
        last = now;
        if (count > 0 && frame >= (unsigned long)count)
            break;
        struct timespec ts = {.tv_sec = (time_t)interval,
                              .tv_nsec = (long)((interval - (double)(time_t)interval) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stop_now)
            ;
    }
    for (unsigned i = 0; i < nroots; i++)
        top_drop(&roots[i]);
    shmobj_segment_close(seg);
    return 0;
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(usage_main, true);
    const char *cmd = argv[1];
    if (is_help(cmd) || strcmp(cmd, "help") == 0)
        return usage(usage_main, false);
    if (strcmp(cmd, "--version") == 0) {
        printf("shmobj %s (segment format %u)\n", shmobj_version_string(),
               shmobj_format_version());
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"ls", cmd_ls},       {"stat", cmd_stat}, {"dump", cmd_dump},
                {"check", cmd_check}, {"rm", cmd_rm},     {"top", cmd_top}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(cmd, cmds[i].name) == 0)
            return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
    return usage(usage_main, true);
}
