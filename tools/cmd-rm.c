/* shmobj rm: removes the names of segments, and only of segments: each
 * name is pinned and peeked at first, and removed only while it still
 * names the file that was looked at. */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shmobj-tool.h"

/* A peek that found the header of a libshmobj segment, usable or not. */
static bool ours(int rc)
{
    return rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_EVERSION ||
           rc == SHMOBJ_ELAYOUT;
}

static const char *const usage_rm =
    "usage: shmobj rm [-f] NAME...\n"
    "\n"
    "Removes the names of segments. Each is looked at first (read-only);\n"
    "anything that is not a libshmobj segment is refused, and so is a name\n"
    "that came to hold another file while it was looked at. Processes\n"
    "still attached keep using it until they detach.\n"
    "  -f  also remove an empty or all-zero object nobody is setting up\n"
    "      (a creator that died before writing anything)\n";

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
                    shmobj_tool_prog, t->arg);
        else
            shmobj_tool_why(t, rc);
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
                shmobj_tool_prog, t->arg);
        return EXIT_CANNOT;
    }
    if (rc != 0) {
        shmobj_tool_why(t, rc);
        return EXIT_CANNOT;
    }
    return 0;
}

int shmobj_tool_rm(int argc, char **argv)
{
    bool force = false;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
        if (shmobj_tool_is_help(argv[i]))
            return shmobj_tool_usage(usage_rm, false);
        if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--force") == 0)
            force = true;
        else if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else
            return shmobj_tool_usage_bad("rm", usage_rm, "unknown option '%s'", argv[i]);
    }
    if (i >= argc)
        return shmobj_tool_usage_bad("rm", usage_rm, "NAME missing");
    int status = 0;
    for (; i < argc; i++) {
        struct target t;
        if (!shmobj_tool_target_parse(argv[i], &t)) {
            status = shmobj_tool_why(&t, SHMOBJ_EINVAL);
            continue;
        }
        if (rm_one(&t, force) != 0)
            status = EXIT_CANNOT;
    }
    return status;
}

