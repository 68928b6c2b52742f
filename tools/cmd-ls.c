/* shmobj ls: the segments of the host, by a read-only peek each (no
 * attachment, lock or wait). Every column is named in the usage, and a
 * "-" (a figure the peek could not read) is explained under the table by
 * a note per reason that occurred, so no cell is left unexplained. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "shmobj-tool.h"

static const char *const usage_ls =
    "usage: shmobj ls [-a] [NAME...]\n"
    "\n"
    "Lists the libshmobj segments under /dev/shm (and the shm names or\n"
    "file-backed segments given), without attaching to them or changing\n"
    "them. Columns:\n"
    "  NAME     the shm name or the file's path\n"
    "  BACK     backend: shm, file or memfd\n"
    "  SIZE     bytes of the segment now (of the file, when not ready)\n"
    "  MAX      bytes it may grow to\n"
    "  USED     heap bytes in live blocks, headers included\n"
    "  CREATOR  pid of the process that created it (in its PID namespace)\n"
    "  ATT      handles attached now (by their locks, not by pids)\n"
    "  STATE    ready; setting-up (its creator is at work); stale (its\n"
    "           creator died before it was ready); orphaned (ready, nobody\n"
    "           attached); damaged (its header does not check out);\n"
    "           version (another format); layout (another build);\n"
    "           unreadable and empty (with -a)\n"
    "A '-' is a figure that could not be read; a note under the table says\n"
    "why for each row that has one.\n"
    "  -a  also list the files under /dev/shm that could not be judged\n"
    "      (unreadable ones, and empty ones nobody sets up)\n";

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

/* Why a row has a '-': one bit per reason, one note per bit. */
enum dash {
    DASH_NOT_READY = 1u << 0, /* setting-up, stale */
    DASH_DAMAGED = 1u << 1,
    DASH_VERSION = 1u << 2,
    DASH_LAYOUT = 1u << 3,
    DASH_UNREADABLE = 1u << 4,
    DASH_EMPTY = 1u << 5,
    DASH_USED = 1u << 6 /* ready, but the heap's walk gave no figure */
};

static const struct {
    unsigned bit;
    const char *text;
} dash_notes[] = {
    {DASH_NOT_READY, "setting-up, stale: MAX, USED, CREATOR and ATT are "
                     "written by the creator as it finishes; not there yet"},
    {DASH_DAMAGED, "damaged: the header failed its checksum, so none of its "
                   "figures is believed ('shmobj check NAME' says where)"},
    {DASH_VERSION, "version: made by a libshmobj of another segment format; "
                   "its header is not read past the format number"},
    {DASH_LAYOUT, "layout: made by a differently built library (pointer "
                  "size, byte order, lock format); its header is not read"},
    {DASH_UNREADABLE, "unreadable: no read permission; only the name is known"},
    {DASH_EMPTY, "empty: no bytes of a header (a creator that died at once, "
                 "or another program's file)"},
    {DASH_USED, "USED '-' on a ready segment: the heap changed under the "
                "look, or is damaged ('shmobj stat NAME' attaches and reads it)"},
};

struct ls_state {
    bool header_done; /* printed before the first row only */
    unsigned dashes;  /* enum dash bits of the rows printed */
};

static void ls_row(struct ls_state *ls, const char *name, int rc,
                   const shmobj_segment_peek_info *pi, unsigned backend)
{
    char a[32], b[32], c[32], pid[16], att[16];
    if (!ls->header_done) {
        ls->header_done = true;
        printf("%-32s %-5s %10s %10s %10s %8s %4s %s\n", "NAME", "BACK",
               "SIZE", "MAX", "USED", "CREATOR", "ATT", "STATE");
    }
    bool ready = rc == 0 && (pi->flags & SHMOBJ_SEGMENT_PEEK_READY);
    bool used = ready && (pi->flags & SHMOBJ_SEGMENT_PEEK_USED_KNOWN);
    bool size = rc == 0 || pi->file_size;
    snprintf(pid, sizeof pid, "%" PRIu32, pi->creator_pid);
    snprintf(att, sizeof att, "%" PRIu32, pi->attached);
    printf("%-32s %-5s %10s %10s %10s %8s %4s %s\n", name,
           shmobj_tool_backend_name(ready ? pi->backend : backend),
           size ? shmobj_tool_bytes(ready ? pi->size : pi->file_size, a,
                                    sizeof a, true)
                : "-",
           ready ? shmobj_tool_bytes(pi->max_size, b, sizeof b, true) : "-",
           used ? shmobj_tool_bytes(pi->heap_used, c, sizeof c, true) : "-",
           ready ? pid : "-", ready ? att : "-", peek_state(rc, pi));
    if (ready && !used)
        ls->dashes |= DASH_USED;
    if (!ready) {
        ls->dashes |= rc == 0                   ? DASH_NOT_READY
                      : rc == SHMOBJ_ECORRUPT   ? DASH_DAMAGED
                      : rc == SHMOBJ_EVERSION   ? DASH_VERSION
                      : rc == SHMOBJ_ELAYOUT    ? DASH_LAYOUT
                      : rc == SHMOBJ_EACCES     ? DASH_UNREADABLE
                                                : DASH_EMPTY;
    }
}

static void ls_notes(const struct ls_state *ls)
{
    bool first = true;
    for (size_t i = 0; i < sizeof dash_notes / sizeof dash_notes[0]; i++) {
        if (!(ls->dashes & dash_notes[i].bit))
            continue;
        if (first)
            printf("'-': not known:\n");
        first = false;
        printf("  %s\n", dash_notes[i].text);
    }
}

/* A peek that found the header of a libshmobj segment, usable or not. */
static bool ours(int rc)
{
    return rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_EVERSION ||
           rc == SHMOBJ_ELAYOUT;
}

int shmobj_tool_ls(int argc, char **argv)
{
    bool all = false;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
        if (shmobj_tool_is_help(argv[i]))
            return shmobj_tool_usage(usage_ls, false);
        if (strcmp(argv[i], "-a") == 0 || strcmp(argv[i], "--all") == 0)
            all = true;
        else
            return shmobj_tool_usage_bad("ls", usage_ls, "unknown option '%s'",
                                         argv[i]);
    }
    struct ls_state ls = {0};
    int status = 0;
    if (i < argc) {
        for (; i < argc; i++) {
            struct target t;
            shmobj_segment_peek_info pi = {.struct_size = sizeof pi};
            if (!shmobj_tool_target_parse(argv[i], &t)) {
                status = shmobj_tool_why(&t, SHMOBJ_EINVAL);
                continue;
            }
            int rc = shmobj_segment_peek(t.name, t.backend, &pi);
            if (ours(rc)) {
                ls_row(&ls, t.arg, rc, &pi, t.backend);
                if (rc == SHMOBJ_ECORRUPT && status == 0)
                    status = EXIT_DAMAGED;
            } else {
                status = shmobj_tool_why(&t, rc);
            }
        }
        ls_notes(&ls);
        return status;
    }
    DIR *d = opendir("/dev/shm");
    if (d == NULL) {
        fprintf(stderr, "%s: /dev/shm: %s\n", shmobj_tool_prog, strerror(errno));
        return EXIT_CANNOT;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        shmobj_segment_peek_info pi = {.struct_size = sizeof pi};
        int rc = shmobj_segment_peek(e->d_name, SHMOBJ_BACKEND_SHM, &pi);
        if (ours(rc) || (all && (rc == SHMOBJ_EACCES || rc == SHMOBJ_ENOTREADY)))
            ls_row(&ls, e->d_name, rc, &pi, SHMOBJ_BACKEND_SHM);
    }
    closedir(d);
    ls_notes(&ls);
    return status;
}
