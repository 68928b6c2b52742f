/* Backing objects (POSIX shm, files, memfd) and their mappings.
 *
 * Waiting for another process to create or size an object uses inotify on
 * /dev/shm (where glibc keeps POSIX shm objects) or on the file's
 * directory, so an early opener sleeps in the kernel instead of polling.
 *
 * Names are never taken over: creation is O_CREAT | O_EXCL, which refuses
 * an existing object of anyone's and a symlink at the path, dangling or
 * not, so a creator never writes through a link someone else planted.
 *
 * Reservation. An object grows only by as much as could be reserved: the
 * kernel extends it at the end of a successful fallocate, and undoes a
 * partial one, so a failure leaves the old size and no page a first touch
 * would have to find (a SIGBUS on hugetlbfs when its pool is empty, on
 * tmpfs when it is full). Objects meant for transparent huge pages are
 * reserved through their mapping instead (fallocate would fill them with
 * small pages), by a populating madvise that reports what would have been
 * a SIGBUS as an error. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "os.h"
#include "shmobj/error.h"

#define SHM_DIR "/dev/shm"
#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define HUGETLBFS_MAGIC_ 0x958458f6UL
#define TMPFS_MAGIC_ 0x01021994UL

static int errno_status(int e)
{
    switch (e) {
    case ENOENT:
        return SHMOBJ_ENOTFOUND;
    case EEXIST:
        return SHMOBJ_EEXIST;
    case EACCES:
    case EPERM:
    case EROFS: /* a file on a read-only mount: no write permission */
        return SHMOBJ_EACCES;
    case ENOSPC:
    case ENOMEM:
    case EFBIG:
        return SHMOBJ_ENOMEM;
    case ENAMETOOLONG:
    case EINVAL:
        return SHMOBJ_EINVAL;
    default:
        return SHMOBJ_ESYS;
    }
}

/* The path inotify watches for an object: /dev/shm/<name> or the file. */
static int object_path(const char *name, unsigned backend, char *buf,
                       size_t len)
{
    int n;
    if (backend == SHMOBJ__OS_SHM)
        n = snprintf(buf, len, "%s/%s", SHM_DIR, name);
    else if (backend == SHMOBJ__OS_FILE)
        n = snprintf(buf, len, "%s", name);
    else
        return SHMOBJ_ENOTREADY;
    return n < 0 || (size_t)n >= len ? SHMOBJ_EINVAL : 0;
}

/* A memfd sealed against shrinking: a process holding the descriptor can
 * grow the object but never cut pages from under another's mapping (which
 * would SIGBUS it). */
static int memfd_make(const char *name, unsigned mode, unsigned extra, int *fd)
{
    int f = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | extra);
    if (f < 0)
        return -1;
    if (fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK) != 0 ||
        fchmod(f, (mode_t)mode) != 0) {
        int e = errno;
        close(f);
        errno = e;
        return -1;
    }
    *fd = f;
    return 0;
}

int shmobj__os_memfd_create_huge(const char *name, unsigned mode, int *fd)
{
#ifdef MFD_HUGETLB
    if (memfd_make(name, mode, MFD_HUGETLB, fd) == 0)
        return 0;
    /* No hugetlbfs in this kernel, or none for the default page size. */
    if (errno == EINVAL || errno == ENOENT || errno == ENODEV ||
        errno == EOPNOTSUPP)
        return SHMOBJ_ENOTSUP;
    return errno_status(errno);
#else
    (void)name;
    (void)mode;
    (void)fd;
    return SHMOBJ_ENOTSUP;
#endif
}

int shmobj__os_obj_create(const char *name, unsigned backend, unsigned mode,
                          bool replace, int *fd)
{
    int f = -1;
    if (backend == SHMOBJ__OS_MEMFD) {
        if (memfd_make(name, mode, 0, &f) != 0)
            return errno_status(errno);
    } else {
        if (replace)
            (void)shmobj__os_obj_unlink(name, backend);
        int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
        f = backend == SHMOBJ__OS_SHM ? shm_open(name, flags, (mode_t)mode)
                                      : open(name, flags, (mode_t)mode);
        /* The umask must not widen or narrow what the caller asked for. */
        if (f >= 0 && fchmod(f, (mode_t)mode) != 0) {
            int e = errno;
            close(f);
            (void)shmobj__os_obj_unlink(name, backend);
            errno = e;
            return errno_status(e);
        }
    }
    if (f < 0)
        return errno_status(errno);
    *fd = f;
    return 0;
}

static int obj_open(const char *name, unsigned backend, int flags, int *fd);

int shmobj__os_obj_open(const char *name, unsigned backend, int *fd)
{
    return obj_open(name, backend, O_RDWR | O_CLOEXEC, fd);
}

int shmobj__os_obj_open_ro(const char *name, unsigned backend, int *fd)
{
    return obj_open(name, backend, O_RDONLY | O_CLOEXEC, fd);
}

bool shmobj__os_fd_writable(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && (fl & O_ACCMODE) == O_RDWR;
}

int shmobj__os_obj_with_ro(const char *name, unsigned backend,
                           int (*fn)(int fd, void *ctx), void *ctx)
{
    int fd;
    int rc = obj_open(name, backend, O_RDONLY | O_CLOEXEC, &fd);
    if (rc != 0)
        return rc;
    rc = fn(fd, ctx);
    close(fd);
    return rc;
}

static int obj_open(const char *name, unsigned backend, int flags, int *fd)
{
    int f;
    if (backend == SHMOBJ__OS_SHM)
        f = shm_open(name, flags, 0);
    else if (backend == SHMOBJ__OS_FILE)
        f = open(name, flags);
    else
        return SHMOBJ_EINVAL;
    /* shm_open opens with O_NOFOLLOW, so a symlink planted in /dev/shm
     * (ELOOP) is no segment under that name, and neither is a file path
     * that loops: the caller is told what the name holds, not that a
     * system call failed. A file path follows its links otherwise, the
     * target's permissions and header deciding. */
    if (f < 0)
        return errno == ELOOP ? SHMOBJ_ENOTSEG : errno_status(errno);
    *fd = f;
    return 0;
}

int shmobj__os_obj_unlink(const char *name, unsigned backend)
{
    int rc;
    if (backend == SHMOBJ__OS_SHM)
        rc = shm_unlink(name);
    else if (backend == SHMOBJ__OS_FILE)
        rc = unlink(name);
    else
        return SHMOBJ_EINVAL;
    return rc == 0 ? 0 : errno_status(errno);
}

/* Wait for one inotify event on ifd until the deadline. 0 on an event,
 * SHMOBJ_ETIMEDOUT past the deadline. */
static int wait_event(int ifd, uint64_t deadline)
{
    for (;;) {
        int ms = -1;
        if (deadline != UINT64_MAX) {
            uint64_t now = shmobj__os_now_ns();
            if (now >= deadline)
                return SHMOBJ_ETIMEDOUT;
            uint64_t left = (deadline - now + 999999) / 1000000;
            ms = left > INT_MAX ? INT_MAX : (int)left;
        }
        struct pollfd p = {.fd = ifd, .events = POLLIN};
        int n = poll(&p, 1, ms);
        if (n > 0) {
            char buf[4096];
            (void)read(ifd, buf, sizeof buf); /* drain; content unused */
            return 0;
        }
        if (n < 0 && errno != EINTR)
            return SHMOBJ_ESYS;
    }
}

int shmobj__os_obj_wait_exists(const char *name, unsigned backend,
                               uint64_t deadline)
{
    char path[PATH_MAX];
    int rc = object_path(name, backend, path, sizeof path);
    if (rc != 0)
        return rc;
    char dir[PATH_MAX];
    memcpy(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (ifd < 0)
        return SHMOBJ_ESYS;
    /* Watch first, then look: a creation between the two is not missed. */
    if (inotify_add_watch(ifd, dir, IN_CREATE | IN_MOVED_TO) < 0) {
        rc = errno_status(errno);
        close(ifd);
        return rc;
    }
    struct stat st;
    while ((rc = stat(path, &st)) != 0) {
        rc = wait_event(ifd, deadline);
        if (rc != 0)
            break;
    }
    close(ifd);
    return rc;
}

int shmobj__os_obj_wait_size(const char *name, unsigned backend, int fd,
                             uint64_t size, uint64_t deadline)
{
    char path[PATH_MAX];
    int rc = object_path(name, backend, path, sizeof path);
    if (rc != 0)
        return rc;
    int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (ifd < 0)
        return SHMOBJ_ESYS;
    if (inotify_add_watch(ifd, path, IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF) <
        0) {
        rc = errno_status(errno);
        close(ifd);
        return rc;
    }
    uint64_t have = 0;
    while ((rc = shmobj__os_fd_size(fd, &have)) == 0 && have < size) {
        rc = wait_event(ifd, deadline);
        if (rc != 0)
            break;
    }
    close(ifd);
    return rc;
}

int shmobj__os_fd_reopen(int fd, const char *name, unsigned backend,
                         int *out)
{
    struct stat a, b;
    if (fstat(fd, &a) != 0)
        return errno_status(errno);
    int f = -1;
    /* By name first (no /proc needed), accepted only if it is still the
     * same object; otherwise through this process's /proc. */
    if (name != NULL && shmobj__os_obj_open(name, backend, &f) == 0 &&
        (fstat(f, &b) != 0 || b.st_ino != a.st_ino || b.st_dev != a.st_dev)) {
        close(f);
        f = -1;
    }
    if (f < 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        f = open(path, O_RDWR | O_CLOEXEC);
        if (f >= 0 && (fstat(f, &b) != 0 || b.st_ino != a.st_ino ||
                       b.st_dev != a.st_dev)) {
            close(f);
            f = -1;
        }
    }
    if (f < 0)
        return SHMOBJ_ENOTSUP;
    *out = f;
    return 0;
}

int shmobj__os_obj_unlink_same(int fd, const char *name, unsigned backend)
{
    char path[PATH_MAX];
    struct stat a, b;
    int rc = object_path(name, backend, path, sizeof path);
    if (rc != 0)
        return rc;
    if (fstat(fd, &a) != 0)
        return errno_status(errno);
    /* lstat: a link is not the object it points to, and unlinking the
     * name would remove the link, not what was judged */
    if (lstat(path, &b) != 0)
        return errno_status(errno);
    if (!S_ISREG(b.st_mode))
        return SHMOBJ_ENOTSEG;
    if (a.st_ino != b.st_ino || a.st_dev != b.st_dev)
        return SHMOBJ_EREPLACED;
    return shmobj__os_obj_unlink(name, backend);
}

int shmobj__os_fd_named(int fd, const char *name, unsigned backend)
{
    char path[PATH_MAX];
    struct stat a, b;
    if (object_path(name, backend, path, sizeof path) != 0 ||
        fstat(fd, &a) != 0)
        return 1; /* cannot tell: say yes */
    if (a.st_nlink == 0)
        return 0;
    if (stat(path, &b) != 0)
        return errno == ENOENT ? 0 : 1;
    return a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

int shmobj__os_fd_size(int fd, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return errno_status(errno);
    *size = (uint64_t)st.st_size;
    return 0;
}

int shmobj__os_fd_age_ns(int fd, uint64_t *age)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return errno_status(errno);
    uint64_t changed = (uint64_t)st.st_ctim.tv_sec * UINT64_C(1000000000) +
                       (uint64_t)st.st_ctim.tv_nsec;
    uint64_t now = shmobj__os_realtime_ns();
    *age = now > changed ? now - changed : 0;
    return 0;
}

/* The size of the object behind fd before it grows to `size` (which must
 * fit an off_t). */
static int size_before_grow(int fd, uint64_t size, uint64_t *old)
{
    if (size > (uint64_t)INT64_MAX)
        return SHMOBJ_EINVAL;
    return shmobj__os_fd_size(fd, old);
}

int shmobj__os_fd_grow(int fd, uint64_t size)
{
    uint64_t old;
    int rc = size_before_grow(fd, size, &old);
    if (rc != 0)
        return rc;
    /* Reserve first: the object takes its new size only once every page
     * of it is reserved (see the top of this file). Also reserves pages a
     * dead grower truncated in but never reserved. */
    int e = 0;
    do
        e = fallocate(fd, 0, 0, (off_t)size) == 0 ? 0 : errno;
    while (e == EINTR);
    if (e == 0)
        return 0;
    if (e != EOPNOTSUPP && e != ENOSYS)
        return errno_status(e);
    /* A store without fallocate: size it, then let posix_fallocate
     * emulate the reservation by writing. */
    if (size > old && ftruncate(fd, (off_t)size) != 0)
        return errno_status(errno);
    e = posix_fallocate(fd, 0, (off_t)size);
    if (e == EOPNOTSUPP || e == ENOSYS)
        return 0; /* store cannot reserve at all: keep going */
    if (e != 0) {
        /* Give back the unreserved tail so nobody adopts pages that would
         * SIGBUS on first touch. A memfd sealed against shrinking keeps
         * it; the heap never adopts more than a successful call reserved
         * (seg-heap.c). */
        if (size > old)
            (void)ftruncate(fd, (off_t)old);
        errno = e;
        return errno_status(e);
    }
    return 0;
}

int shmobj__os_fd_grow_mapped(int fd, void *base, uint64_t size)
{
    uint64_t old;
    int rc = size_before_grow(fd, size, &old);
    if (rc != 0)
        return rc;
    if (size <= old)
        return shmobj__os_fd_grow(fd, size);
#if defined(MADV_POPULATE_WRITE)
    if (ftruncate(fd, (off_t)size) != 0)
        return errno_status(errno);
    /* Page-aligned: base is, and sizes are multiples of the page. */
    if (madvise((char *)base + old, (size_t)(size - old),
                MADV_POPULATE_WRITE) == 0)
        return 0;
    int e = errno;
    if (e != EINVAL) {
        /* EFAULT: a SIGBUS it spared us, the store is full; the pages
         * populated so far go with the tail (a sealed memfd keeps them,
         * reserved). */
        (void)ftruncate(fd, (off_t)old);
        return e == EFAULT || e == ENOMEM || e == ENOSPC ? SHMOBJ_ENOMEM
                                                         : errno_status(e);
    }
#else
    (void)base;
#endif
    return shmobj__os_fd_grow(fd, size); /* a kernel older than 5.14 */
}

int shmobj__os_fd_page_size(int fd, uint64_t *page)
{
    struct statfs s;
    if (fstatfs(fd, &s) != 0)
        return errno_status(errno);
    /* hugetlbfs pages are its block size; every other store pages as the
     * system does (transparent huge pages are the kernel's choice, page
     * by page, and impose no granule). */
    if ((unsigned long)s.f_type == HUGETLBFS_MAGIC_ && s.f_bsize > 0)
        *page = (uint64_t)s.f_bsize;
    else
        *page = shmobj__os_page_size();
    return 0;
}

/* The bracketed word of a sysfs policy file ("always [advise] never"), or
 * the whole first word when none is bracketed. */
static bool read_policy(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    char line[256];
    bool ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!ok)
        return false;
    char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
    if (a == NULL || b == NULL) {
        a = line - 1;
        b = line + strcspn(line, " \n");
    }
    size_t n = (size_t)(b - a - 1);
    if (n == 0 || n >= len)
        return false;
    memcpy(out, a + 1, n);
    out[n] = '\0';
    return true;
}

static bool huge_word(const char *w)
{
    return strcmp(w, "always") == 0 || strcmp(w, "within_size") == 0 ||
           strcmp(w, "advise") == 0 || strcmp(w, "force") == 0;
}

/* The huge= option of the tmpfs mount holding st_dev (never when absent). */
static bool mount_allows_huge(dev_t dev)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL)
        return false;
    char line[4096];
    bool yes = false;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned maj, min;
        if (sscanf(line, "%*u %*u %u:%u", &maj, &min) != 2 ||
            maj != major(dev) || min != minor(dev))
            continue;
        /* "... - tmpfs <source> <super options>" */
        char *sep = strstr(line, " - ");
        char *h = sep ? strstr(sep, "huge=") : NULL;
        if (h != NULL) {
            char w[32];
            size_t n = strcspn(h + 5, ", \n");
            if (n < sizeof w) {
                memcpy(w, h + 5, n);
                w[n] = '\0';
                yes = huge_word(w);
            }
        }
        break;
    }
    fclose(f);
    return yes;
}

uint64_t shmobj__os_thp_size(void)
{
    FILE *f = fopen(THP_DIR "/hpage_pmd_size", "re");
    unsigned long long v = 0;
    if (f != NULL) {
        if (fscanf(f, "%llu", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v > shmobj__os_page_size() && (v & (v - 1)) == 0 ? (uint64_t)v : 0;
}

bool shmobj__os_thp_allowed(int fd, unsigned backend)
{
    struct statfs s;
    struct stat st;
    char w[32];
    if (shmobj__os_thp_size() == 0 || fstatfs(fd, &s) != 0 ||
        (unsigned long)s.f_type != TMPFS_MAGIC_ || fstat(fd, &st) != 0)
        return false;
    if (read_policy(THP_DIR "/shmem_enabled", w, sizeof w)) {
        if (strcmp(w, "deny") == 0)
            return false;
        if (strcmp(w, "force") == 0)
            return true;
    } else {
        return false;
    }
    if (backend == SHMOBJ__OS_MEMFD) {
        /* The kernel's own mount: the sysfs policy, where the PMD size
         * may have one of its own. */
        char pmd[32];
        char path[128];
        snprintf(path, sizeof path, THP_DIR "/hugepages-%llukB/shmem_enabled",
                 (unsigned long long)(shmobj__os_thp_size() >> 10));
        if (read_policy(path, pmd, sizeof pmd) && strcmp(pmd, "inherit") != 0)
            return huge_word(pmd);
        return huge_word(w);
    }
    return mount_allows_huge(st.st_dev);
}

int shmobj__os_map(int fd, uint64_t max_size, void **base)
{
    return shmobj__os_map_aligned(fd, max_size, 0, false, base);
}

static int map_prot(int fd, uint64_t len, uint64_t align, bool thp, int prot,
                    void **base);

int shmobj__os_map_aligned(int fd, uint64_t len, uint64_t align, bool thp,
                           void **base)
{
    return map_prot(fd, len, align, thp, PROT_READ | PROT_WRITE, base);
}

int shmobj__os_map_aligned_ro(int fd, uint64_t len, uint64_t align, bool thp,
                              void **base)
{
    return map_prot(fd, len, align, thp, PROT_READ, base);
}

static int map_prot(int fd, uint64_t len, uint64_t align, bool thp, int prot,
                    void **base)
{
    if (len == 0 || len > (uint64_t)SIZE_MAX ||
        (align != 0 && ((align & (align - 1)) != 0 || align > len)))
        return SHMOBJ_EINVAL;
    uint64_t page = shmobj__os_page_size();
    void *p;
    if (align <= page) {
        p = mmap(NULL, (size_t)len, prot, MAP_SHARED | MAP_NORESERVE, fd, 0);
        if (p == MAP_FAILED)
            return errno_status(errno);
    } else {
        /* Reserve room for an aligned start, map the object over it, give
         * the slack back: a huge page maps only at an address of its own
         * alignment. */
        size_t room = (size_t)(len + align);
        char *r = mmap(NULL, room, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (r == MAP_FAILED)
            return errno_status(errno);
        uintptr_t a = ((uintptr_t)r + (uintptr_t)align - 1) &
                      ~((uintptr_t)align - 1);
        p = mmap((void *)a, (size_t)len, prot,
                 MAP_SHARED | MAP_NORESERVE | MAP_FIXED, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            munmap(r, room);
            return errno_status(e);
        }
        if ((char *)p > r)
            munmap(r, (size_t)((char *)p - r));
        char *end = (char *)p + len;
        if (end < r + room)
            munmap(end, (size_t)(r + room - end));
    }
    /* Advice only: the kernel gives huge pages where it finds them. */
    if (thp)
        (void)madvise(p, (size_t)len, MADV_HUGEPAGE);
    *base = p;
    return 0;
}

/* MADV_POPULATE_WRITE maps every page, or fails with an error instead of
 * a SIGBUS where the store is full. Then each page is read once: on a
 * 2-CPU AMD EPYC virtual machine, pages only populated were accessed far
 * more slowly by two processes handing messages to each other than pages
 * also touched by a load afterwards (W1 copy-in, both sides prefaulted,
 * alternated runs: 16 MiB 4.0-5.5 GiB/s against 22-29, 400 KB 16.6-17.5
 * against 30-31, 64 KiB 20.9-21.9 against 23.3-25.6). The cause is not
 * known; a load of a mapped page costs nothing that matters here. */
int shmobj__os_prefault(void *base, uint64_t len)
{
    if (len == 0)
        return 0;
    uint64_t page = shmobj__os_page_size();
#if defined(MADV_POPULATE_WRITE)
    if (madvise(base, (size_t)len, MADV_POPULATE_WRITE) == 0) {
        for (uint64_t off = 0; off < len; off += page)
            (void)*(volatile const unsigned char *)((unsigned char *)base + off);
        return 0;
    }
    if (errno != EINVAL) /* EINVAL: a kernel older than 5.14 */
        return errno_status(errno);
#endif
    /* Touch each page with a write that changes nothing: an atomic OR of 0
     * cannot clobber what another process writes there meanwhile. */
    for (uint64_t off = 0; off < len; off += page)
        __atomic_fetch_or((unsigned char *)base + off, 0, __ATOMIC_RELAXED);
    return 0;
}

int shmobj__os_prefault_ro(const void *base, uint64_t len)
{
    if (len == 0)
        return 0;
#if defined(MADV_POPULATE_READ)
    if (madvise((void *)base, (size_t)len, MADV_POPULATE_READ) == 0)
        return 0;
    if (errno != EINVAL) /* EINVAL: a kernel older than 5.14 */
        return errno_status(errno);
#endif
    uint64_t page = shmobj__os_page_size();
    for (uint64_t off = 0; off < len; off += page)
        (void)*(volatile const unsigned char *)((const unsigned char *)base + off);
    return 0;
}

int shmobj__os_map_ro(int fd, uint64_t len, void **base)
{
    if (len == 0 || len > (uint64_t)SIZE_MAX)
        return SHMOBJ_EINVAL;
    void *p = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return errno_status(errno);
    *base = p;
    return 0;
}

void shmobj__os_unmap(void *base, uint64_t max_size)
{
    if (base != NULL)
        munmap(base, (size_t)max_size);
}

uint64_t shmobj__os_page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (uint64_t)p : 4096;
}
