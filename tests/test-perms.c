/* Permissions and names, seen by another user.
 *
 * The program runs as root (CI does); each case forks a child that drops
 * to an unprivileged identity (nobody's uid and gid, with one chosen
 * supplementary group) and reports the status the library gave it as its
 * exit code, so the parent asserts what a stranger can and cannot do to a
 * segment root made. Not root: every case is skipped.
 *
 * What the library does, as these cases hold it:
 * - opening a segment opens its object read-write (the opener maps it
 *   shared and writes its attachment) where the mode grants read and
 *   write, and read-only where it grants reading alone: 0600 keeps
 *   everyone else out, 0640 lets the group read (a read-only handle; with
 *   SHMOBJ_SEGMENT_RDWR it is kept out), and 0660 lets the group write;
 * - creating never takes over an existing name: O_EXCL refuses another
 *   user's object (SHMOBJ_EEXIST, the object untouched), and refuses a
 *   symlink at the path, dangling or not, so a creator is never led to
 *   write through a link someone planted;
 * - opening the file backend follows symlinks, as any path a caller names:
 *   the kernel checks the permissions of the target, and the target must
 *   hold a segment (anything else is SHMOBJ_ENOTSEG, left unchanged);
 *   a shm name never follows one (shm_open opens with O_NOFOLLOW);
 * - shm names are 1..SHMOBJ_NAME_MAX bytes of [A-Za-z0-9._-] without a
 *   leading dot: create, open and destroy refuse anything else with
 *   SHMOBJ_EINVAL before any system call. */
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "shmobj.h"
#include "test-util.h"

/* Groups no account on the machine is expected to use: the child is given
 * GROUP_IN; GROUP_OUT is a group it does not have. */
#define GROUP_IN 47101
#define GROUP_OUT 47102
#define SEG_SIZE (UINT64_C(1) << 20)
#define CHILD_SECONDS 20
/* The child's exit code when it could not become the stranger. */
#define CHILD_SETUP_FAILED 250

static const char precious[] = "root's data, not to be overwritten\n";

static uid_t stranger_uid = 65534;
static gid_t stranger_gid = 65534;

static void require_root(void)
{
    if (geteuid() != 0)
        skip();
    struct passwd *pw = getpwnam("nobody");
    if (pw != NULL) {
        stranger_uid = pw->pw_uid;
        stranger_gid = pw->pw_gid;
    }
}

/* Drop to the stranger with `group` as its one supplementary group. */
static int become_stranger(gid_t group)
{
    if (setgroups(1, &group) != 0 || setgid(stranger_gid) != 0 ||
        setuid(stranger_uid) != 0 || geteuid() != stranger_uid ||
        setuid(0) == 0) /* the drop must not be undoable */
        return -1;
    return 0;
}

/* A status as an exit code: 0 stays 0, SHMOBJ_E* becomes its magnitude. */
static int status_code(int rc)
{
    return rc <= 0 && rc > -CHILD_SETUP_FAILED ? -rc : CHILD_SETUP_FAILED - 1;
}

enum child_op { OP_OPEN, OP_OPEN_RDWR, OP_CREATE, OP_CREATE_REPLACE };

struct child_job {
    enum child_op op;
    const char *name;
    unsigned backend;
};

static int child_main(void *p)
{
    const struct child_job *job = p;
    if (become_stranger(GROUP_IN) != 0)
        return CHILD_SETUP_FAILED;
    shmobj_segment *seg = NULL;
    int rc;
    if (job->op == OP_OPEN) {
        rc = shmobj_segment_open(job->name, job->backend, 0, &seg);
        /* a read-only handle says so, and refuses a write */
        shmobj_segment_info info = {.struct_size = sizeof info};
        shmobj_ref ref;
        if (rc == 0 && shmobj_segment_info_get(seg, &info) == 0 &&
            (info.flags & SHMOBJ_SEGMENT_INFO_READONLY) &&
            shmobj_obj_put_int(seg, 1, &ref) != SHMOBJ_ERDONLY)
            rc = CHILD_SETUP_FAILED - 2;
    } else if (job->op == OP_OPEN_RDWR) {
        rc = shmobj_segment_open_flags(job->name, job->backend,
                                       SHMOBJ_SEGMENT_RDWR, 0, &seg);
    } else {
        shmobj_segment_options o;
        shmobj_segment_options_init(&o);
        o.backend = job->backend;
        o.initial_size = SEG_SIZE;
        o.mode = 0666;
        if (job->op == OP_CREATE_REPLACE)
            o.flags |= SHMOBJ_SEGMENT_REPLACE;
        rc = shmobj_segment_create(job->name, &o, &seg);
    }
    shmobj_segment_close(seg);
    return status_code(rc);
}

/* The status the stranger got for job, as a (negative) SHMOBJ_E* or 0. */
static int as_stranger(enum child_op op, const char *name, unsigned backend)
{
    struct child_job job = {.op = op, .name = name, .backend = backend};
    int code = test_child_wait(test_child_start(child_main, &job,
                                                CHILD_SECONDS));
    if (code == CHILD_SETUP_FAILED)
        fail_msg("the child could not drop to uid %u", (unsigned)stranger_uid);
    return -code;
}

static shmobj_segment *make_segment(const char *name, unsigned backend,
                                    unsigned mode)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = backend;
    o.mode = mode;
    o.initial_size = SEG_SIZE;
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    return seg;
}

/* Give the shm object behind name to `group`, as its owner would. */
static void chgrp_shm(const char *name, gid_t group)
{
    char path[256];
    snprintf(path, sizeof path, "/%s", name);
    int fd = shm_open(path, O_RDWR, 0);
    assert_true(fd >= 0);
    assert_int_equal(fchown(fd, (uid_t)-1, group), 0);
    close(fd);
}

static void test_perms_open_0600_stranger_eacces(void **state)
{
    (void)state;
    require_root();
    char name[128];
    test_name(name, sizeof name, "p600");
    shmobj_segment *seg = make_segment(name, SHMOBJ_BACKEND_SHM, 0600);
    chgrp_shm(name, GROUP_IN); /* even the child's group: 0600 says owner */
    assert_int_equal(as_stranger(OP_OPEN, name, SHMOBJ_BACKEND_SHM),
                     SHMOBJ_EACCES);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* Read permission alone gives a read-only handle (test-readonly.c holds
 * what it may do); asked to write, the group is kept out. */
static void test_perms_open_0640_group_readonly(void **state)
{
    (void)state;
    require_root();
    char name[128];
    test_name(name, sizeof name, "p640");
    shmobj_segment *seg = make_segment(name, SHMOBJ_BACKEND_SHM, 0640);
    chgrp_shm(name, GROUP_IN);
    assert_int_equal(as_stranger(OP_OPEN, name, SHMOBJ_BACKEND_SHM), 0);
    assert_int_equal(as_stranger(OP_OPEN_RDWR, name, SHMOBJ_BACKEND_SHM),
                     SHMOBJ_EACCES);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

static void test_perms_open_0660_group_ok(void **state)
{
    (void)state;
    require_root();
    char name[128];
    test_name(name, sizeof name, "p660");
    shmobj_segment *seg = make_segment(name, SHMOBJ_BACKEND_SHM, 0660);
    chgrp_shm(name, GROUP_IN);
    assert_int_equal(as_stranger(OP_OPEN, name, SHMOBJ_BACKEND_SHM), 0);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

static void test_perms_open_0660_other_group_eacces(void **state)
{
    (void)state;
    require_root();
    char name[128];
    test_name(name, sizeof name, "p660o");
    shmobj_segment *seg = make_segment(name, SHMOBJ_BACKEND_SHM, 0660);
    chgrp_shm(name, GROUP_OUT);
    assert_int_equal(as_stranger(OP_OPEN, name, SHMOBJ_BACKEND_SHM),
                     SHMOBJ_EACCES);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* A stranger cannot take a name root holds, with or without REPLACE (root's
 * object in sticky /dev/shm is not the stranger's to unlink), and root's
 * object is the same object, of the same size and mode, still a segment
 * holding what root put in it. */
static void test_perms_create_stranger_name_eexist(void **state)
{
    (void)state;
    require_root();
    char name[128], path[256];
    test_name(name, sizeof name, "pexcl");
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    shmobj_segment *seg = make_segment(name, SHMOBJ_BACKEND_SHM, 0666);
    shmobj_ref ref;
    assert_int_equal(shmobj_segment_root_set(seg, "mark", 42), 0);
    struct stat before, after;
    assert_int_equal(stat(path, &before), 0);
    assert_int_equal(as_stranger(OP_CREATE, name, SHMOBJ_BACKEND_SHM),
                     SHMOBJ_EEXIST);
    assert_int_equal(as_stranger(OP_CREATE_REPLACE, name, SHMOBJ_BACKEND_SHM),
                     SHMOBJ_EEXIST);
    assert_int_equal(stat(path, &after), 0);
    assert_true(after.st_ino == before.st_ino);
    assert_true(after.st_size == before.st_size);
    assert_true(after.st_mode == before.st_mode);
    assert_true(after.st_uid == 0);
    shmobj_segment *again = NULL;
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &again),
                     0);
    assert_int_equal(shmobj_segment_root_get(again, "mark", &ref), 0);
    assert_int_equal(ref, 42);
    shmobj_segment_close(again);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* A directory both users may write in (not sticky, so the kernel's
 * protected_symlinks does not decide for the library). */
struct fdir {
    char dir[64];
    char target[128];
    char link[128];
};

static void fdir_make(struct fdir *d)
{
    snprintf(d->dir, sizeof d->dir, "/tmp/shmobj-perms-XXXXXX");
    assert_non_null(mkdtemp(d->dir));
    assert_int_equal(chmod(d->dir, 0777), 0);
    snprintf(d->target, sizeof d->target, "%s/target", d->dir);
    snprintf(d->link, sizeof d->link, "%s/seg", d->dir);
}

/* Root's file, writable by anyone: only the library's refusal keeps it. */
static void fdir_target(struct fdir *d)
{
    int fd = open(d->target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    assert_true(fd >= 0);
    assert_int_equal(fchmod(fd, 0666), 0);
    assert_int_equal(write(fd, precious, sizeof precious),
                     (ssize_t)sizeof precious);
    close(fd);
}

static void assert_target_untouched(const struct fdir *d)
{
    char buf[sizeof precious + 16];
    int fd = open(d->target, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    assert_int_equal(n, (ssize_t)sizeof precious);
    assert_memory_equal(buf, precious, sizeof precious);
}

static void fdir_remove(struct fdir *d)
{
    (void)unlink(d->link);
    (void)unlink(d->target);
    assert_int_equal(rmdir(d->dir), 0);
}

static int create_file_seg(const char *path, unsigned flags)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_FILE;
    o.initial_size = SEG_SIZE;
    o.flags = flags;
    shmobj_segment *seg = NULL;
    int rc = shmobj_segment_create(path, &o, &seg);
    shmobj_segment_close(seg);
    return rc;
}

static void test_perms_create_file_symlink_refused(void **state)
{
    (void)state;
    require_root();
    struct fdir d;
    fdir_make(&d);
    fdir_target(&d);
    assert_int_equal(symlink(d.target, d.link), 0);
    /* Root, to whom permissions are no obstacle, and the stranger. */
    assert_int_equal(create_file_seg(d.link, 0), SHMOBJ_EEXIST);
    assert_target_untouched(&d);
    assert_int_equal(as_stranger(OP_CREATE, d.link, SHMOBJ_BACKEND_FILE),
                     SHMOBJ_EEXIST);
    assert_target_untouched(&d);
    struct stat st;
    assert_int_equal(lstat(d.link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    /* REPLACE replaces only a segment: neither the link nor what it
     * points to is one (shmobj_segment_destroy()'s rule). */
    assert_int_equal(create_file_seg(d.link, SHMOBJ_SEGMENT_REPLACE),
                     SHMOBJ_ENOTSEG);
    assert_target_untouched(&d);
    assert_int_equal(lstat(d.link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    fdir_remove(&d);
}

/* A dangling link would have the creator make a file where the link's
 * owner chose: refused, and nothing appears there. */
static void test_perms_create_file_dangling_symlink_refused(void **state)
{
    (void)state;
    require_root();
    struct fdir d;
    fdir_make(&d);
    assert_int_equal(symlink(d.target, d.link), 0);
    assert_int_equal(create_file_seg(d.link, 0), SHMOBJ_EEXIST);
    assert_int_equal(as_stranger(OP_CREATE, d.link, SHMOBJ_BACKEND_FILE),
                     SHMOBJ_EEXIST);
    struct stat st;
    assert_int_equal(lstat(d.target, &st), -1);
    assert_int_equal(errno, ENOENT);
    fdir_remove(&d);
}

/* Open follows a link to a segment (the target's permissions apply) and
 * refuses, without writing, a link to anything else. */
static void test_perms_open_file_symlink_follows(void **state)
{
    (void)state;
    require_root();
    struct fdir d;
    fdir_make(&d);
    char real[160];
    snprintf(real, sizeof real, "%s/real", d.dir);
    shmobj_segment *seg = make_segment(real, SHMOBJ_BACKEND_FILE, 0666);
    assert_int_equal(symlink(real, d.link), 0);
    shmobj_segment *via = NULL;
    assert_int_equal(shmobj_segment_open(d.link, SHMOBJ_BACKEND_FILE, 0, &via),
                     0);
    shmobj_segment_close(via);
    assert_int_equal(as_stranger(OP_OPEN, d.link, SHMOBJ_BACKEND_FILE), 0);
    shmobj_segment_close(seg);
    assert_int_equal(unlink(d.link), 0);
    assert_int_equal(unlink(real), 0);

    fdir_target(&d);
    assert_int_equal(symlink(d.target, d.link), 0);
    assert_int_equal(shmobj_segment_open(d.link, SHMOBJ_BACKEND_FILE, 0, &via),
                     SHMOBJ_ENOTSEG);
    assert_int_equal(as_stranger(OP_OPEN, d.link, SHMOBJ_BACKEND_FILE),
                     SHMOBJ_ENOTSEG);
    assert_target_untouched(&d);
    fdir_remove(&d);
}

/* A path whose links loop names no segment. */
static void test_perms_open_file_symlink_loop_enotseg(void **state)
{
    (void)state;
    struct fdir d;
    fdir_make(&d);
    assert_int_equal(symlink(d.link, d.link), 0);
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_open(d.link, SHMOBJ_BACKEND_FILE, 0, &seg),
                     SHMOBJ_ENOTSEG);
    assert_int_equal(create_file_seg(d.link, 0), SHMOBJ_EEXIST);
    fdir_remove(&d);
}

/* A symlink planted under /dev/shm: create refuses the name, open does not
 * follow it, and its target stays as it was. */
static void test_perms_shm_symlink_not_followed(void **state)
{
    (void)state;
    require_root();
    struct fdir d;
    fdir_make(&d);
    fdir_target(&d);
    char name[128], path[256];
    test_name(name, sizeof name, "plink");
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    assert_int_equal(symlink(d.target, path), 0);
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = SEG_SIZE;
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), SHMOBJ_EEXIST);
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &seg),
                     SHMOBJ_ENOTSEG);
    assert_int_equal(as_stranger(OP_OPEN, name, SHMOBJ_BACKEND_SHM),
                     SHMOBJ_ENOTSEG);
    /* At once, whatever the timeout: waiting would not change the link. */
    assert_int_equal(
        shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 5000 * TEST_MS, &seg),
        SHMOBJ_ENOTSEG);
    assert_target_untouched(&d);
    /* destroy removes only segments: the link is not one */
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM),
                     SHMOBJ_ENOTSEG);
    assert_target_untouched(&d);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(unlink(path), 0);
    fdir_remove(&d);
}

static void test_perms_names_bad_einval(void **state)
{
    (void)state;
    char longest[SHMOBJ_NAME_MAX + 2];
    memset(longest, 'a', SHMOBJ_NAME_MAX + 1);
    longest[SHMOBJ_NAME_MAX + 1] = '\0';
    const char *bad[] = {"",         "/",        "a/b",     "/lead",
                         "..",       ".",        ".hidden", "../up",
                         "line\nfeed", "ctl\x01x", "tab\tx",  "del\x7f",
                         "sp ace",   "hi\xc3\xa9", longest};
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = SEG_SIZE;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        shmobj_segment *seg = NULL;
        if (shmobj_segment_create(bad[i], &o, &seg) != SHMOBJ_EINVAL ||
            shmobj_segment_open(bad[i], SHMOBJ_BACKEND_SHM, 0, &seg) !=
                SHMOBJ_EINVAL ||
            shmobj_segment_destroy(bad[i], SHMOBJ_BACKEND_SHM) !=
                SHMOBJ_EINVAL) {
            shmobj_segment_close(seg);
            fail_msg("name %zu (\"%s\") was not refused", i, bad[i]);
        }
        assert_null(seg);
    }
}

/* SHMOBJ_NAME_MAX bytes fit: the system's limit on a name in /dev/shm is
 * NAME_MAX (255), above it. */
static void test_perms_names_longest_ok(void **state)
{
    (void)state;
    char name[SHMOBJ_NAME_MAX + 1];
    int n = snprintf(name, sizeof name, "shmobj-test-max-%ld-", (long)getpid());
    memset(name + n, 'z', SHMOBJ_NAME_MAX - (size_t)n);
    name[SHMOBJ_NAME_MAX] = '\0';
    assert_int_equal(strlen(name), SHMOBJ_NAME_MAX);
    shmobj_segment *seg = make_segment(name, SHMOBJ_BACKEND_SHM, 0600);
    shmobj_segment *again = NULL;
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &again),
                     0);
    shmobj_segment_close(again);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &again),
                     SHMOBJ_ENOTFOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perms_open_0600_stranger_eacces),
        cmocka_unit_test(test_perms_open_0640_group_readonly),
        cmocka_unit_test(test_perms_open_0660_group_ok),
        cmocka_unit_test(test_perms_open_0660_other_group_eacces),
        cmocka_unit_test(test_perms_create_stranger_name_eexist),
        cmocka_unit_test(test_perms_create_file_symlink_refused),
        cmocka_unit_test(test_perms_create_file_dangling_symlink_refused),
        cmocka_unit_test(test_perms_open_file_symlink_follows),
        cmocka_unit_test(test_perms_open_file_symlink_loop_enotseg),
        cmocka_unit_test(test_perms_shm_symlink_not_followed),
        cmocka_unit_test(test_perms_names_bad_einval),
        cmocka_unit_test(test_perms_names_longest_ok),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
