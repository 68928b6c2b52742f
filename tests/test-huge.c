/* Huge pages: segments from the hugetlb pool (memfd and hugetlbfs files),
 * transparent huge pages or their fall-back on shm, the page size
 * shmobj_segment_info reports, growth and prefault in whole huge pages,
 * and a pool that runs out giving SHMOBJ_ENOMEM instead of a SIGBUS.
 *
 * The pool is the machine's: as root the program sets
 * /proc/sys/vm/nr_hugepages to what each test needs (and shmem_enabled to
 * "advise" for the transparent huge pages of a memfd) and puts the old
 * values back before it exits. Without huge pages (no hugetlbfs, or not root and
 * too few free pages) it exits 77, which meson counts as skipped. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "os.h"
#include "segment.h"
#include "shmobj.h"
#include "test-util.h"

#define MiB (UINT64_C(1) << 20)
#define NR_PATH "/proc/sys/vm/nr_hugepages"

static uint64_t hpage;      /* the pool's page size, bytes */
static long nr_saved = -1;  /* nr_hugepages before the tests, to restore */
static pid_t main_pid;

static long meminfo(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    if (f != NULL)
        fclose(f);
    return v;
}

static long nr_read(void)
{
    FILE *f = fopen(NR_PATH, "re");
    long v = -1;
    if (f != NULL) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static int nr_write(long v)
{
    FILE *f = fopen(NR_PATH, "we");
    if (f == NULL)
        return -1;
    int ok = fprintf(f, "%ld\n", v) > 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static void shmem_restore(void);

/* The file system a test mounted, to unmount when a failed assertion
 * left it mounted. */
static char mounted[64];

static bool mount_at(char *dir, const char *type, const char *opts)
{
    if (mount("none", dir, type, 0, opts) != 0)
        return false;
    snprintf(mounted, sizeof mounted, "%s", dir);
    return true;
}

static int unmount_at(const char *dir)
{
    int rc = umount(dir);
    if (rc == 0)
        mounted[0] = '\0';
    return rc;
}

/* Put back what the tests changed of the machine. */
static void nr_restore(void)
{
    if (getpid() != main_pid)
        return;
    if (mounted[0] != '\0') {
        (void)umount2(mounted, MNT_DETACH);
        (void)rmdir(mounted);
        mounted[0] = '\0';
    }
    if (nr_saved >= 0)
        (void)nr_write(nr_saved);
    shmem_restore();
}

/* Make exactly `pages` pool pages free (other users' pages stay theirs).
 * False when the pool cannot be set so (not root, or no memory). */
static bool pool_free_exactly(long pages)
{
    long total = meminfo("HugePages_Total"), free_ = meminfo("HugePages_Free");
    if (total < 0 || free_ < 0)
        return false;
    if (nr_write(total - free_ + pages) != 0)
        return false;
    return meminfo("HugePages_Free") == pages;
}

static long pool_free(void)
{
    return meminfo("HugePages_Free");
}

static shmobj_segment *create_huge(unsigned backend, const char *name,
                                   uint64_t initial, uint64_t max,
                                   unsigned flags, int *rc)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = backend;
    o.flags = flags;
    o.initial_size = initial;
    o.max_size = max;
    shmobj_segment *seg = NULL;
    *rc = shmobj_segment_create(name, &o, &seg);
    return seg;
}

static shmobj_segment_info info_of(shmobj_segment *seg)
{
    shmobj_segment_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(shmobj_segment_info_get(seg, &info), 0);
    return info;
}

/* A memfd segment asked for pool pages gets them, reserved at creation
 * (the pool's free count drops by the whole initial size before any byte
 * is touched), sized in whole huge pages, and says so in its info. */
static void test_huge_memfd_pool_pages_reserved(void **state)
{
    (void)state;
    assert_true(pool_free_exactly(16));
    int rc;
    shmobj_segment *seg = create_huge(SHMOBJ_BACKEND_MEMFD, "huge-memfd",
                                      5 * MiB + 1, 24 * MiB,
                                      SHMOBJ_SEGMENT_HUGE_REQUIRE, &rc);
    assert_int_equal(rc, 0);
    shmobj_segment_info info = info_of(seg);
    assert_int_equal(info.page_size, hpage);
    assert_int_equal(info.size % hpage, 0);
    assert_int_equal(info.max_size % hpage, 0);
    assert_true(info.size >= 5 * MiB + 1);
    assert_int_equal(pool_free(), 16 - (long)(info.size / hpage));
    assert_int_equal(shmobj_segment_prefault(seg), 0);
    shmobj_segment_close(seg);
    assert_int_equal(pool_free(), 16);
}

/* Growth adds whole huge pages from the pool, and a forked child that
 * opens the segment by its descriptor maps it in huge pages too (its
 * mapping and unmapping are in whole pages, or the kernel refuses them)
 * and reads what the parent wrote past the first size. */
struct grow_arg {
    int fd;
    shmobj_ref ref;
    size_t len;
};

static int grow_child(void *p)
{
    struct grow_arg *a = p;
    shmobj_segment *seg = NULL;
    if (shmobj_segment_open_fd(a->fd, 5000 * TEST_MS, &seg) != 0)
        return 10;
    shmobj_segment_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (shmobj_segment_info_get(seg, &info) != 0 || info.page_size != hpage)
        return 11;
    void *ptr;
    size_t usable;
    if (shmobj_arena_ptr(seg, a->ref, &ptr, &usable) != 0 || usable < a->len)
        return 12;
    const unsigned char *b = ptr;
    for (size_t i = 0; i < a->len; i += 4096)
        if (b[i] != (unsigned char)(i >> 12))
            return 13;
    if (shmobj_segment_prefault(seg) != 0)
        return 14;
    shmobj_segment_close(seg);
    return 0;
}

static void test_huge_memfd_grows_in_huge_pages(void **state)
{
    (void)state;
    assert_true(pool_free_exactly(24));
    int rc;
    shmobj_segment *seg = create_huge(SHMOBJ_BACKEND_MEMFD, "huge-grow",
                                      4 * MiB, 40 * MiB,
                                      SHMOBJ_SEGMENT_HUGE_REQUIRE, &rc);
    assert_int_equal(rc, 0);
    uint64_t size0 = info_of(seg).size;
    size_t len = 9 * MiB;
    shmobj_ref ref;
    void *ptr;
    assert_int_equal(shmobj_arena_alloc(seg, len, 0, &ref, &ptr), 0);
    unsigned char *b = ptr;
    for (size_t i = 0; i < len; i += 4096)
        b[i] = (unsigned char)(i >> 12);
    shmobj_segment_info info = info_of(seg);
    assert_true(info.size > size0);
    assert_int_equal(info.size % hpage, 0);
    assert_int_equal(pool_free(), 24 - (long)(info.size / hpage));
    struct grow_arg a = {.ref = ref, .len = len};
    assert_int_equal(shmobj_segment_fd(seg, &a.fd), 0);
    assert_int_equal(test_child_wait(test_child_start(grow_child, &a, 30)), 0);
    shmobj_segment_close(seg);
}

/* With too few free pool pages for its initial size, a segment that
 * insists on them fails with SHMOBJ_ENOMEM at creation and gives the pool
 * back every page; one that does not insist falls back to other pages. */
static void test_huge_memfd_pool_short_enomem(void **state)
{
    (void)state;
    assert_true(pool_free_exactly(2));
    int rc;
    shmobj_segment *seg = create_huge(SHMOBJ_BACKEND_MEMFD, "huge-short",
                                      8 * MiB, 8 * MiB,
                                      SHMOBJ_SEGMENT_HUGE_REQUIRE, &rc);
    assert_int_equal(rc, SHMOBJ_ENOMEM);
    assert_null(seg);
    assert_int_equal(pool_free(), 2);
    seg = create_huge(SHMOBJ_BACKEND_MEMFD, "huge-short", 8 * MiB, 8 * MiB,
                      SHMOBJ_SEGMENT_HUGE, &rc);
    assert_int_equal(rc, 0);
    uint64_t thp = shmobj__os_thp_size();
    uint64_t page = info_of(seg).page_size;
    assert_true(page == shmobj__os_page_size() || (thp != 0 && page == thp));
    assert_int_equal(pool_free(), 2);
    shmobj_segment_close(seg);
}

/* The pool runs out while the heap grows: the allocation that needs more
 * pages than the pool has gets SHMOBJ_ENOMEM, and every byte of every
 * block handed out before is backed (written in full: a page the pool
 * could not give would SIGBUS, which the child would die of). The heap
 * stays usable: a freed block is allocated again. */
static int exhaust_child(void *p)
{
    (void)p;
    int rc;
    shmobj_segment *seg = create_huge(SHMOBJ_BACKEND_MEMFD, "huge-exhaust",
                                      2 * MiB, 256 * MiB,
                                      SHMOBJ_SEGMENT_HUGE_REQUIRE, &rc);
    if (rc != 0)
        return 20;
    shmobj_ref refs[256];
    int n = 0;
    for (; n < 256; n++) {
        void *ptr;
        rc = shmobj_arena_alloc(seg, MiB, 0, &refs[n], &ptr);
        if (rc != 0)
            break;
        memset(ptr, 0x5a, MiB);
    }
    if (rc != SHMOBJ_ENOMEM || n < 2 || n >= 256)
        return 21;
    if (shmobj_segment_prefault(seg) != 0)
        return 22;
    if (shmobj_arena_free(seg, refs[n - 1]) != 0)
        return 23;
    void *ptr;
    if (shmobj_arena_alloc(seg, MiB, 0, &refs[n - 1], &ptr) != 0)
        return 24;
    memset(ptr, 0xa5, MiB);
    shmobj_segment_close(seg);
    return 0;
}

static void test_huge_pool_runs_out_enomem_not_sigbus(void **state)
{
    (void)state;
    assert_true(pool_free_exactly(6));
    /* 128 + SIGBUS if a page was handed out unbacked */
    assert_int_equal(test_child_wait(test_child_start(exhaust_child, NULL, 60)), 0);
    assert_int_equal(pool_free(), 6);
}

/* A shm segment asked for huge pages gets transparent huge pages where
 * /dev/shm's mount allows them (and reports their size), else falls back
 * to system pages; insisting where they are not allowed is
 * SHMOBJ_ENOTSUP, and no name is left behind. */
static void test_huge_shm_thp_or_fallback(void **state)
{
    (void)state;
    char name[64];
    test_name(name, sizeof name, "huge-shm");
    int rc;
    shmobj_segment *seg = create_huge(SHMOBJ_BACKEND_SHM, name, 3 * MiB,
                                      16 * MiB, SHMOBJ_SEGMENT_HUGE, &rc);
    assert_int_equal(rc, 0);
    int fd;
    assert_int_equal(shmobj_segment_fd(seg, &fd), 0);
    uint64_t thp = shmobj__os_thp_allowed(fd, SHMOBJ__OS_SHM) ? shmobj__os_thp_size() : 0;
    shmobj_segment_info info = info_of(seg);
    assert_int_equal(info.page_size, thp != 0 ? thp : shmobj__os_page_size());
    if (thp != 0)
        assert_int_equal(info.size % thp, 0);
    /* an opener by name sees the same pages */
    shmobj_segment *other = NULL;
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &other), 0);
    assert_int_equal(info_of(other).page_size, info.page_size);
    shmobj_segment_close(other);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);

    seg = create_huge(SHMOBJ_BACKEND_SHM, name, 3 * MiB, 16 * MiB,
                      SHMOBJ_SEGMENT_HUGE_REQUIRE, &rc);
    if (thp != 0) {
        assert_int_equal(rc, 0);
        shmobj_segment_close(seg);
        assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
    } else {
        assert_int_equal(rc, SHMOBJ_ENOTSUP);
        assert_null(seg);
        assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM),
                         SHMOBJ_ENOTFOUND);
    }
}

/* A file on hugetlbfs is a huge-page segment without being asked: sizes
 * that are not whole huge pages are rounded up (hugetlbfs refuses others),
 * an opener by path maps and unmaps its header in whole pages, and growth
 * adds whole pages. Mounts a hugetlbfs of its own (root only). */
static void test_huge_file_on_hugetlbfs(void **state)
{
    (void)state;
    assert_true(pool_free_exactly(16));
    char dir[] = "/tmp/shmobj-test-hugetlbfs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    if (!mount_at(dir, "hugetlbfs", NULL)) {
        rmdir(dir);
        skip();
    }
    char path[128];
    snprintf(path, sizeof path, "%s/seg", dir);
    int rc;
    shmobj_segment *seg = create_huge(SHMOBJ_BACKEND_FILE, path, 3 * MiB + 4096,
                                      32 * MiB, 0, &rc);
    assert_int_equal(rc, 0);
    shmobj_segment_info info = info_of(seg);
    assert_int_equal(info.page_size, hpage);
    assert_int_equal(info.size, 4 * MiB);
    for (int round = 0; round < 8; round++) {
        shmobj_segment *other = NULL;
        assert_int_equal(shmobj_segment_open(path, SHMOBJ_BACKEND_FILE, 0, &other), 0);
        assert_int_equal(info_of(other).page_size, hpage);
        shmobj_segment_close(other);
    }
    shmobj_ref ref;
    void *ptr;
    assert_int_equal(shmobj_arena_alloc(seg, 6 * MiB, 0, &ref, &ptr), 0);
    memset(ptr, 1, 6 * MiB);
    assert_int_equal(info_of(seg).size % hpage, 0);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(path, SHMOBJ_BACKEND_FILE), 0);
    assert_int_equal(unmount_at(dir), 0);
    rmdir(dir);
}

/* Transparent huge pages on a memfd, where shmem_enabled allows them (the
 * test sets it to "advise" as root and puts it back): with the pool empty
 * the segment falls back to them, reports their size, reserves its pages
 * through the advised mapping, and the kernel maps some of them whole
 * (ShmemPmdMapped grows), also the pages growth added. */
#define SHMEM_ENABLED "/sys/kernel/mm/transparent_hugepage/shmem_enabled"

static long pmd_mapped_kb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "re");
    char line[256];
    long v = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "ShmemPmdMapped:", 15) == 0)
            v = strtol(line + 15, NULL, 10);
    if (f != NULL)
        fclose(f);
    return v;
}

static bool policy_set(const char *path, const char *word, char *old, size_t len)
{
    FILE *f = fopen(path, "re");
    char line[256];
    if (f == NULL || fgets(line, sizeof line, f) == NULL) {
        if (f != NULL)
            fclose(f);
        return false;
    }
    fclose(f);
    char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
    if (old != NULL) {
        if (a == NULL || b == NULL || (size_t)(b - a) >= len)
            return false;
        memcpy(old, a + 1, (size_t)(b - a - 1));
        old[b - a - 1] = '\0';
    }
    f = fopen(path, "we");
    if (f == NULL)
        return false;
    bool ok = fputs(word, f) >= 0;
    return fclose(f) == 0 && ok;
}

static char shmem_saved[32]; /* shmem_enabled before the test, or "" */

static void shmem_restore(void)
{
    if (shmem_saved[0] != '\0' && getpid() == main_pid &&
        policy_set(SHMEM_ENABLED, shmem_saved, NULL, 0))
        shmem_saved[0] = '\0';
}

/* An opener by descriptor advises its mapping as the creator did and
 * reports the same pages. */
static int thp_child(void *p)
{
    const int *fd = p;
    shmobj_segment *seg = NULL;
    if (shmobj_segment_open_fd(*fd, 5000 * TEST_MS, &seg) != 0)
        return 10;
    shmobj_segment_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (shmobj_segment_info_get(seg, &info) != 0 ||
        info.page_size != shmobj__os_thp_size())
        return 11;
    if (shmobj_segment_prefault(seg) != 0 || pmd_mapped_kb() <= 0)
        return 12;
    shmobj_segment_close(seg);
    return 0;
}

static void test_huge_memfd_thp_fallback_when_allowed(void **state)
{
    (void)state;
    uint64_t thp = shmobj__os_thp_size();
    if (thp == 0 || !policy_set(SHMEM_ENABLED, "advise", shmem_saved, sizeof shmem_saved))
        skip();
    assert_true(pool_free_exactly(0));
    int rc;
    shmobj_segment *seg = create_huge(SHMOBJ_BACKEND_MEMFD, "huge-thp",
                                      3 * MiB, 32 * MiB, SHMOBJ_SEGMENT_HUGE, &rc);
    assert_int_equal(rc, 0);
    shmobj_segment_info info = info_of(seg);
    assert_int_equal(info.page_size, thp);
    assert_int_equal(info.size % thp, 0);
    assert_int_equal(info.max_size % thp, 0);
    shmobj_ref ref;
    void *ptr;
    assert_int_equal(shmobj_arena_alloc(seg, 6 * MiB, 0, &ref, &ptr), 0);
    memset(ptr, 3, 6 * MiB);
    assert_int_equal(info_of(seg).size % thp, 0);
    assert_int_equal(shmobj_segment_prefault(seg), 0);
    assert_true(pmd_mapped_kb() >= (long)(thp >> 10));
    int fd;
    assert_int_equal(shmobj_segment_fd(seg, &fd), 0);
    assert_int_equal(test_child_wait(test_child_start(thp_child, &fd, 30)), 0);
    shmobj_segment_close(seg);
    shmem_restore();
}

/* A file segment on a tmpfs mounted with huge=advise gets transparent huge
 * pages when asked (the mount's option, read from mountinfo, allows them),
 * and so does an opener by path; on a tmpfs without the option, insisting
 * is SHMOBJ_ENOTSUP and the file is removed. Mounts two small tmpfs of its
 * own (root only). */
static void test_huge_file_tmpfs_mount_option(void **state)
{
    (void)state;
    uint64_t thp = shmobj__os_thp_size();
    char dir[] = "/tmp/shmobj-test-tmpfs-huge-XXXXXX";
    assert_non_null(mkdtemp(dir));
    if (thp == 0 || !mount_at(dir, "tmpfs", "huge=advise,size=64m")) {
        rmdir(dir);
        skip();
    }
    char path[128];
    snprintf(path, sizeof path, "%s/seg", dir);
    int rc;
    shmobj_segment *seg = create_huge(SHMOBJ_BACKEND_FILE, path, 3 * MiB, 16 * MiB,
                                      SHMOBJ_SEGMENT_HUGE_REQUIRE, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(info_of(seg).page_size, thp);
    assert_int_equal(info_of(seg).size % thp, 0);
    shmobj_segment *other = NULL;
    assert_int_equal(shmobj_segment_open(path, SHMOBJ_BACKEND_FILE, 0, &other), 0);
    assert_int_equal(info_of(other).page_size, thp);
    assert_int_equal(shmobj_segment_prefault(other), 0);
    assert_true(pmd_mapped_kb() >= (long)(thp >> 10));
    shmobj_segment_close(other);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(path, SHMOBJ_BACKEND_FILE), 0);
    assert_int_equal(unmount_at(dir), 0);

    assert_true(mount_at(dir, "tmpfs", "size=64m"));
    seg = create_huge(SHMOBJ_BACKEND_FILE, path, 3 * MiB, 16 * MiB,
                      SHMOBJ_SEGMENT_HUGE_REQUIRE, &rc);
    assert_int_equal(rc, SHMOBJ_ENOTSUP);
    assert_null(seg);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(unmount_at(dir), 0);
    rmdir(dir);
}

/* A caller built before page_size existed passes the shorter struct:
 * nothing is written past its end. */
static void test_huge_info_short_struct_untouched(void **state)
{
    (void)state;
    int rc;
    shmobj_segment *seg = create_huge(SHMOBJ_BACKEND_MEMFD, "huge-info",
                                      4 * MiB, 4 * MiB, 0, &rc);
    assert_int_equal(rc, 0);
    shmobj_segment_info info;
    memset(&info, 0xee, sizeof info);
    info.struct_size = offsetof(shmobj_segment_info, page_size);
    assert_int_equal(shmobj_segment_info_get(seg, &info), 0);
    assert_int_equal(info.page_size, UINT64_C(0xeeeeeeeeeeeeeeee));
    info.struct_size = sizeof info;
    assert_int_equal(shmobj_segment_info_get(seg, &info), 0);
    assert_int_equal(info.page_size, shmobj__os_page_size());
    shmobj_segment_close(seg);
}

int main(void)
{
    main_pid = getpid();
    hpage = (uint64_t)meminfo("Hugepagesize") * 1024;
    int probe = -1;
    if (hpage == 0 || shmobj__os_memfd_create_huge("probe", 0600, &probe) != 0) {
        fprintf(stderr, "test-huge: no hugetlbfs here: skipped\n");
        return 77;
    }
    close(probe);
    nr_saved = nr_read();
    if (nr_saved < 0 || !pool_free_exactly(pool_free() > 24 ? pool_free() : 24)) {
        nr_restore();
        fprintf(stderr, "test-huge: cannot set the huge-page pool (needs root): skipped\n");
        return 77;
    }
    atexit(nr_restore);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_huge_memfd_pool_pages_reserved),
        cmocka_unit_test(test_huge_memfd_grows_in_huge_pages),
        cmocka_unit_test(test_huge_memfd_pool_short_enomem),
        cmocka_unit_test(test_huge_pool_runs_out_enomem_not_sigbus),
        cmocka_unit_test(test_huge_shm_thp_or_fallback),
        cmocka_unit_test(test_huge_file_on_hugetlbfs),
        cmocka_unit_test(test_huge_memfd_thp_fallback_when_allowed),
        cmocka_unit_test(test_huge_file_tmpfs_mount_option),
        cmocka_unit_test(test_huge_info_short_struct_untouched),
    };
    test_filter_from_env();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    nr_restore();
    return failed;
}
