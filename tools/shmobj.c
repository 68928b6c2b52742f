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
 * ready, busy, bad usage).
 *
 * This file names segments, says why one cannot be looked at, and holds
 * the small formatting the commands share; each command has a source of
 * its own (shmobj-tool.h lists them). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shmobj-tool.h"

const char *shmobj_tool_prog = "shmobj";

/* ---- naming a segment ---------------------------------------------------- */

bool shmobj_tool_target_parse(const char *arg, struct target *t)
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
int shmobj_tool_why(const struct target *t, int rc)
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
    fprintf(stderr, "%s: %s: %s\n", shmobj_tool_prog, t->arg, msg);
    return status;
}

/* Attach to a segment to look at it; a message and an exit status when
 * that cannot be done. A segment the peek finds stale is reported as
 * such rather than as "not ready". Commands that only read pass
 * SHMOBJ_SEGMENT_RDONLY: they then take no lock and write nothing, so a
 * stuck lock holder does not stop them; check passes 0 and is read-write
 * where the user may write (it may then repair) and read-only elsewhere. */
int shmobj_tool_attach(const struct target *t, unsigned flags, shmobj_segment **seg)
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
                    shmobj_tool_prog, t->arg, shmobj_tool_prog, t->arg);
            return EXIT_CANNOT;
        }
    }
    return shmobj_tool_why(t, rc);
}

/* ---- small printing helpers ---------------------------------------------- */

const char *shmobj_tool_bytes(uint64_t n, char *buf, size_t len, bool tight)
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

const char *shmobj_tool_time(uint64_t ns, char *buf, size_t len)
{
    time_t s = (time_t)(ns / 1000000000u);
    struct tm tm;
    if (ns == 0 || gmtime_r(&s, &tm) == NULL)
        snprintf(buf, len, "-");
    else
        strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buf;
}

const char *shmobj_tool_backend_name(unsigned b)
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
    case SHMOBJ_ROOT_TOPIC:
        return "topic";
    case SHMOBJ_ROOT_SERVICE:
        return "service";
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
                                  "mdict", "mset", "shape",  "record", "link",
                                  "adopt", "table"};
    return type > 0 && type < (int)(sizeof names / sizeof names[0])
               ? names[type]
               : "?";
}

bool shmobj_tool_is_help(const char *a)
{
    return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

int shmobj_tool_usage(const char *text, bool error)
{
    fputs(text, error ? stderr : stdout);
    return error ? EXIT_CANNOT : 0;
}

/* A command line that cannot be run: first what was wrong with it, on a
 * line of its own (the one a user or a script reads), then the usage. */
int shmobj_tool_usage_bad(const char *cmd, const char *text, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s %s: ", shmobj_tool_prog, cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return shmobj_tool_usage(text, true);
}

/* The ending of a count's noun: "1 map", "2 maps". */
const char *shmobj_tool_plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

int shmobj_tool_entries_opt(const char *cmd, const char *usage, int argc,
                            char **argv, int *i, uint64_t *entries)
{
    const char *a = argv[*i], *val;
    if (strncmp(a, "--entries=", 10) == 0) {
        val = a + 10;
    } else if (strcmp(a, "-e") == 0 || strcmp(a, "--entries") == 0) {
        if (*i + 1 >= argc) {
            shmobj_tool_usage_bad(cmd, usage, "option '%s' needs a value", a);
            return -1;
        }
        val = argv[++*i];
    } else {
        return 0;
    }
    if (strcmp(val, "all") == 0) {
        *entries = SHMOBJ_TOOL_ENTRIES_ALL;
        return 1;
    }
    char *end;
    unsigned long long n = strtoull(val, &end, 10);
    if (*val < '0' || *val > '9' || *end != '\0') {
        shmobj_tool_usage_bad(cmd, usage,
                              "bad number of entries '%s' (0 or more, or 'all')", val);
        return -1;
    }
    *entries = n;
    return 1;
}

/* ---- help and main ----------------------------------------------------------- */

static const char *const usage_main =
    "usage: shmobj COMMAND [ARGS]\n"
    "\n"
    "Look into libshmobj shared-memory segments.\n"
    "\n"
    "commands:\n"
    "  ls [-a] [NAME...]        the segments on this host, without attaching\n"
    "  stat [-e N] NAME         heap, attached processes, every root and what\n"
    "                           it holds (map entries, members, subscribers)\n"
    "  dump [--pretty] [-e N] NAME [ROOT]  objects, maps and topics as JSON\n"
    "  check NAME               integrity check of heap, maps, queues, topics,\n"
    "                           objects: what was found, and where\n"
    "  rm [-f] NAME...          remove segments (only segments)\n"
    "  top [-i SECONDS] [-n COUNT] [-e N] NAME   live figures\n"
    "\n"
    "NAME is a POSIX shm name (demo, /demo, /dev/shm/demo) or the path of a\n"
    "file-backed segment. 'shmobj COMMAND --help' tells more.\n"
    "exit status: 0 ok, 1 damaged, 2 could not look (missing, foreign,\n"
    "unreadable, not ready, busy: a live process kept the segment's lock\n"
    "for 10 s, bad usage).\n";

int main(int argc, char **argv)
{
    if (argc < 2)
        return shmobj_tool_usage(usage_main, true);
    const char *cmd = argv[1];
    if (shmobj_tool_is_help(cmd) || strcmp(cmd, "help") == 0)
        return shmobj_tool_usage(usage_main, false);
    if (strcmp(cmd, "--version") == 0) {
        printf("shmobj %s (segment format %u)\n", shmobj_version_string(),
               shmobj_format_version());
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"ls", shmobj_tool_ls},       {"stat", shmobj_tool_stat},
                {"dump", shmobj_tool_dump},   {"check", shmobj_tool_check},
                {"rm", shmobj_tool_rm},       {"top", shmobj_tool_top}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(cmd, cmds[i].name) == 0)
            return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown command '%s'\n", shmobj_tool_prog, cmd);
    return shmobj_tool_usage(usage_main, true);
}
