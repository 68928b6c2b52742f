/* Segments: lifecycle, the creator/consumer handshake in both orders,
 * timeouts, damaged and foreign headers, names, sizes, permissions, named
 * roots, raw blocks and growth across processes. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "os.h"
#include "segment.h"
#include "shmobj.h"
#include "test-util.h"

#define MiB (UINT64_C(1) << 20)

static shmobj_segment *create_small(const char *name)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    assert_non_null(seg);
    return seg;
}

/* Map a segment's header directly, bypassing validation, to damage it. */
static struct shmobj__seg_header *raw_header(const char *name, int *fd_out)
{
    int fd = shm_open(name, O_RDWR, 0);
    assert_true(fd >= 0);
    void *p = mmap(NULL, SHMOBJ__SEG_HEADER_SIZE, PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
    assert_true(p != MAP_FAILED);
    *fd_out = fd;
    return p;
}

static void raw_release(struct shmobj__seg_header *h, int fd)
{
    munmap(h, SHMOBJ__SEG_HEADER_SIZE);
    close(fd);
}

static void test_segment_create_open_close_roundtrip(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "rt");
    shmobj_segment *a = create_small(name);
    shmobj_segment *b = NULL;
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &b), 0);
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(b, &info), 0);
    assert_int_equal(info.format_version, SHMOBJ_FORMAT_VERSION);
    assert_int_equal(info.size, 1 * MiB);
    assert_int_equal(info.max_size, 1 * MiB);
    assert_int_equal(info.attached, 2);
    shmobj_segment_close(b);
    assert_int_equal(shmobj_segment_info_get(a, &info), 0);
    assert_int_equal(info.attached, 1);
    shmobj_segment_close(a);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM),
                     SHMOBJ_ENOTFOUND);
    shmobj_segment_close(NULL); /* accepted, does nothing */
}

static void test_segment_create_twice_eexist(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "twice");
    shmobj_segment *a = create_small(name), *b = NULL;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    assert_int_equal(shmobj_segment_create(name, &o, &b), SHMOBJ_EEXIST);
    assert_null(b);
    o.flags = SHMOBJ_SEGMENT_REPLACE;
    assert_int_equal(shmobj_segment_create(name, &o, &b), 0);
    shmobj_segment_close(b);
    shmobj_segment_close(a);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

static void test_segment_open_missing_notfound(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "missing");
    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &s),
                     SHMOBJ_ENOTFOUND);
    /* The promise checked: a timed-out open never gives up before its
     * deadline (a bound the machine's speed cannot break). */
    uint64_t deadline = shmobj__os_now_ns() + 100 * TEST_MS;
    assert_int_equal(
        shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 100 * TEST_MS, &s),
        SHMOBJ_ETIMEDOUT);
    assert_true(shmobj__os_now_ns() >= deadline);
    assert_null(s);
}

static void test_segment_create_bad_names_einval(void **state)
{
    (void)state;
    char longname[SHMOBJ_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    const char *bad[] = {"", "a/b", ".hidden", "sp ace", "ünï", longname};
    shmobj_segment *s = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(shmobj_segment_create(bad[i], NULL, &s), SHMOBJ_EINVAL);
        assert_int_equal(shmobj_segment_open(bad[i], SHMOBJ_BACKEND_SHM, 0, &s),
                         SHMOBJ_EINVAL);
    }
    assert_int_equal(shmobj_segment_create(NULL, NULL, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_segment_create("ok", NULL, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_segment_open("ok", 7, 0, &s), SHMOBJ_EINVAL);
}

static void test_segment_create_bad_sizes_einval(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "sizes");
    shmobj_segment_options o;
    shmobj_segment *s = NULL;
    uint64_t sizes[][2] = {{0, 0}, {4096, 0}, {8 * MiB, 4 * MiB},
                           {1 * MiB, UINT64_C(1) << 60}, {UINT64_MAX, 0}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        shmobj_segment_options_init(&o);
        o.initial_size = sizes[i][0];
        o.max_size = sizes[i][1];
        assert_int_equal(shmobj_segment_create(name, &o, &s), SHMOBJ_EINVAL);
    }
    shmobj_segment_options_init(&o);
    o.struct_size = 4; /* from a caller built against a smaller struct */
    assert_int_equal(shmobj_segment_create(name, &o, &s), SHMOBJ_EINVAL);
    shmobj_segment_options_init(&o);
    o.flags = 0x80;
    assert_int_equal(shmobj_segment_create(name, &o, &s), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &s),
                     SHMOBJ_ENOTFOUND); /* nothing was left behind */
}

/* The struct_size contract (doc/versioning.md): a caller built against
 * another release passes a smaller or larger struct. Output structs are
 * filled as far as the caller has room and read 0 beyond what this release
 * knows; input structs may be longer only with zero bytes in the unknown
 * part, since a set byte there asks for something this release cannot do. */
struct grown_options {
    shmobj_segment_options o;
    uint64_t later_field;
};
struct grown_info {
    shmobj_segment_info i;
    uint64_t later_field;
};
struct grown_stats {
    shmobj_arena_stats a;
    uint64_t later_field;
};
struct grown_root {
    shmobj_root_info r;
    uint64_t later_field;
};

static void test_segment_struct_size_grows_at_end(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "grown");
    struct grown_options g;
    memset(&g, 0, sizeof g);
    shmobj_segment_options_init(&g.o);
    g.o.struct_size = sizeof g;
    g.later_field = 1;
    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_create(name, &g.o, &s), SHMOBJ_EINVAL);
    g.later_field = 0;
    assert_int_equal(shmobj_segment_create(name, &g.o, &s), 0);

    /* Larger output structs: the unknown tail is zeroed. */
    struct grown_info gi;
    memset(&gi, 0xAB, sizeof gi);
    gi.i.struct_size = sizeof gi;
    assert_int_equal(shmobj_segment_info_get(s, &gi.i), 0);
    assert_int_equal(gi.i.struct_size, sizeof gi);
    assert_true(gi.i.size > 0);
    assert_int_equal(gi.later_field, 0);
    struct grown_stats ga;
    memset(&ga, 0xAB, sizeof ga);
    ga.a.struct_size = sizeof ga;
    assert_int_equal(shmobj_arena_stats_get(s, &ga.a), 0);
    assert_true(ga.a.total_bytes > 0);
    assert_int_equal(ga.later_field, 0);
    shmobj_ref blk;
    assert_int_equal(shmobj_arena_alloc(s, 64, 0, &blk, NULL), 0);
    assert_int_equal(shmobj_segment_root_set(s, "r", blk), 0);
    struct grown_root gr;
    memset(&gr, 0xAB, sizeof gr);
    gr.r.struct_size = sizeof gr;
    uint32_t cursor = 0;
    assert_int_equal(shmobj_segment_root_next(s, &cursor, &gr.r), 0);
    assert_string_equal(gr.r.name, "r");
    assert_int_equal(gr.later_field, 0);

    /* A caller of the first release: only its prefix is written. */
    size_t v1 = offsetof(shmobj_segment_info, creator_pid);
    shmobj_segment_info info;
    memset(&info, 0xAB, sizeof info);
    info.struct_size = (uint32_t)v1;
    assert_int_equal(shmobj_segment_info_get(s, &info), 0);
    assert_true(info.size > 0);
    const unsigned char *tail = (const unsigned char *)&info + v1;
    for (size_t k = 0; k < sizeof info - v1; k++)
        assert_int_equal(tail[k], 0xAB);
    info.struct_size = (uint32_t)v1 - 1;
    assert_int_equal(shmobj_segment_info_get(s, &info), SHMOBJ_EINVAL);
    shmobj_segment_close(s);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* A store too small for the segment fails at creation, not with SIGBUS on
 * first touch. 64 TiB exceeds any /dev/shm this suite runs on. */
static void test_segment_create_store_too_small_enomem(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "huge");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = UINT64_C(64) << 40;
    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &s), SHMOBJ_ENOMEM);
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &s),
                     SHMOBJ_ENOTFOUND);
}

static void test_segment_create_mode_0600(void **state)
{
    (void)state;
    char name[96], path[128];
    test_name(name, sizeof name, "mode");
    mode_t old = umask(0);
    shmobj_segment *s = create_small(name);
    struct stat st;
    int fd;
    assert_int_equal(shmobj_segment_fd(s, &fd), 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);

    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    o.mode = 0640;
    assert_int_equal(shmobj_segment_create(name, &o, &s), 0);
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    umask(old);
}

static int open_and_report(void *arg)
{
    shmobj_segment *s = NULL;
    int rc = shmobj_segment_open(arg, SHMOBJ_BACKEND_SHM, 10000 * TEST_MS, &s);
    if (rc != 0)
        return 10 + (-rc);
    shmobj_ref ref;
    /* The creator publishes a root after creating the segment: seeing it
     * proves we attached to the initialised segment (waited for, since the
     * segment is ready before the root exists). */
    rc = shmobj_segment_root_wait(s, "hello", 10000 * TEST_MS, &ref);
    shmobj_segment_close(s);
    return rc == 0 && ref == 42 ? 0 : 2;
}

/* True once process pid sleeps in the kernel (state S in /proc). */
static bool proc_sleeping(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && p[2] == 'S';
}

/* Consumer first: it waits (inotify, then futex) until the creator is
 * done. The test creates only once the consumer is asleep in its open,
 * so the order is what the name says. */
static void test_segment_open_before_create_waits(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "early");
    pid_t child = test_child_start(open_and_report, name, 20);
    /* Asleep, with no segment to attach to: it is waiting for the name. */
    for (int i = 0; i < 10000 && !proc_sleeping(child); i++)
        test_sleep_ms(1);
    assert_true(proc_sleeping(child));
    assert_int_equal(waitpid(child, NULL, WNOHANG), 0); /* still in open */
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &s), 0);
    assert_int_equal(shmobj_segment_root_set(s, "hello", 42), 0);
    assert_int_equal(test_child_wait(child), 0);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

static int open_and_linger(void *arg)
{
    shmobj_segment *s = NULL;
    if (shmobj_segment_open(arg, SHMOBJ_BACKEND_SHM, 10000 * TEST_MS, &s) != 0)
        return 1;
    /* Stay attached until the creator removes the "go" root. */
    shmobj_ref ref;
    while (shmobj_segment_root_get(s, "stay", &ref) == 0)
        test_sleep_ms(5);
    shmobj_segment_close(s);
    return 0;
}

/* Creator first: it sleeps until two consumers have attached. */
static void test_segment_wait_attached_two_consumers(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "wait");
    shmobj_segment *s = create_small(name);
    assert_int_equal(shmobj_segment_root_set(s, "stay", 1), 0);
    assert_int_equal(shmobj_segment_wait_attached(s, 1, 50 * TEST_MS),
                     SHMOBJ_ETIMEDOUT);
    pid_t c1 = test_child_start(open_and_linger, name, 20);
    pid_t c2 = test_child_start(open_and_linger, name, 20);
    assert_int_equal(shmobj_segment_wait_attached(s, 2, 10000 * TEST_MS), 0);
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(s, &info), 0);
    assert_int_equal(info.attached, 3);
    assert_int_equal(shmobj_segment_root_del(s, "stay"), 0);
    assert_int_equal(test_child_wait(c1), 0);
    assert_int_equal(test_child_wait(c2), 0);
    assert_int_equal(shmobj_segment_info_get(s, &info), 0);
    assert_int_equal(info.attached, 1);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

static int attach_and_die(void *arg)
{
    shmobj_segment *s = NULL;
    if (shmobj_segment_open(arg, SHMOBJ_BACKEND_SHM, 0, &s) != 0)
        return 1;
    _exit(0); /* no close: the table entry is left behind */
}

/* A consumer that died without detaching no longer counts. */
static void test_segment_wait_attached_dead_consumer_not_counted(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "dead");
    shmobj_segment *s = create_small(name);
    assert_int_equal(test_child_wait(test_child_start(attach_and_die, name, 10)),
                     0);
    assert_int_equal(shmobj_segment_wait_attached(s, 1, 20 * TEST_MS),
                     SHMOBJ_ETIMEDOUT);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

static void expect_open_fails(const char *name, int want)
{
    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &s), want);
    assert_null(s);
}

static void test_segment_open_damaged_header_ecorrupt(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "damaged");
    shmobj_segment_close(create_small(name));
    int fd;
    struct shmobj__seg_header *h = raw_header(name, &fd);

    h->max_size ^= 0x1000; /* an immutable field: the checksum catches it */
    expect_open_fails(name, SHMOBJ_ECORRUPT);
    h->max_size ^= 0x1000;

    uint64_t magic = h->magic;
    h->magic = 0x1234;
    expect_open_fails(name, SHMOBJ_ENOTSEG);
    h->magic = SHMOBJ__SEG_MAGIC_SWAPPED; /* the other byte order */
    expect_open_fails(name, SHMOBJ_ELAYOUT);
    h->magic = magic;

    h->format_version = SHMOBJ_FORMAT_VERSION + 1;
    expect_open_fails(name, SHMOBJ_EVERSION);
    h->format_version = SHMOBJ_FORMAT_VERSION;

    /* A process of another build (e.g. another C library): resealed, so
     * only the signature differs. */
    h->layout_sig ^= UINT64_C(1) << 56;
    shmobj__seg_header_seal(h);
    expect_open_fails(name, SHMOBJ_ELAYOUT);
    h->layout_sig ^= UINT64_C(1) << 56;
    shmobj__seg_header_seal(h);

    /* A forged, resealed size larger than the object. */
    h->max_size = 4096 * 2;
    shmobj__seg_header_seal(h);
    expect_open_fails(name, SHMOBJ_ECORRUPT);
    h->max_size = 1 * MiB;
    shmobj__seg_header_seal(h);

    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &s), 0);
    shmobj_segment_close(s);

    /* Random damage to the header never crashes the opener. */
    unsigned char saved[256];
    memcpy(saved, h, sizeof saved);
    srand(7);
    for (int round = 0; round < 2000; round++) {
        memcpy(h, saved, sizeof saved);
        for (int k = 0; k < 1 + round % 8; k++)
            ((unsigned char *)h)[rand() % 192] = (unsigned char)rand();
        /* Whatever the damage (a state that is neither INIT nor READY, a
         * magic of 0, ...), nobody is setting this segment up: even an
         * opener willing to wait for ever gets an answer at once. */
        int rc = shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, SHMOBJ_FOREVER, &s);
        assert_int_not_equal(rc, SHMOBJ_ETIMEDOUT);
        if (rc == 0)
            shmobj_segment_close(s);
    }
    memcpy(h, saved, sizeof saved);
    raw_release(h, fd);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* Open by name and close at once: the status alone. */
static int open_rc(const char *name, int64_t timeout_ns)
{
    shmobj_segment *s = NULL;
    int rc = shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, timeout_ns, &s);
    if (rc == 0)
        shmobj_segment_close(s);
    else
        assert_null(s);
    return rc;
}

/* The creator is killed at one step of shmobj_segment_create(). */
static int kill_step;
static void die_at_step(int step)
{
    if (step == kill_step)
        raise(SIGKILL);
}

static int create_and_die_at_step(void *arg)
{
    shmobj__seg_create_hook = die_at_step;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 4 * MiB;
    shmobj_segment *s;
    return shmobj_segment_create(arg, &o, &s) == 0 ? 0 : 1;
}

/* An opener willing to wait for ever, in a child bounded by its alarm. */
static int open_forever(void *arg)
{
    shmobj_segment *s = NULL;
    int rc = shmobj_segment_open(arg, SHMOBJ_BACKEND_SHM, SHMOBJ_FOREVER, &s);
    shmobj_segment_close(s);
    return rc == 0 ? 0 : 100 + rc; /* rc is small and negative */
}

/* A creator killed at any step of its set-up: an opener, even one that
 * would wait for ever, is told at once that nobody is setting the segment
 * up (or opens it, once READY was published). */
static void test_segment_open_creator_killed_each_step_enotready(void **state)
{
    (void)state;
    for (int step = SHMOBJ__SEG_STEP_CREATED; step <= SHMOBJ__SEG_STEP_READY;
         step++) {
        char name[96];
        test_name(name, sizeof name, "orphan");
        kill_step = step;
        assert_int_equal(test_child_wait(test_child_start(
                             create_and_die_at_step, name, 10)),
                         128 + SIGKILL);
        int want = step == SHMOBJ__SEG_STEP_READY ? 0 : 100 + SHMOBJ_ENOTREADY;
        assert_int_equal(test_child_wait(test_child_start(open_forever, name, 10)),
                         want);
        shmobj_segment *s = NULL;
        want = step == SHMOBJ__SEG_STEP_READY ? 0 : SHMOBJ_ENOTREADY;
        assert_int_equal(
            shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 5000 * TEST_MS, &s),
            want);
        shmobj_segment_close(s);
        /* The stale name can be removed and reused. */
        assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
        s = create_small(name);
        shmobj_segment_close(s);
        shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    }
}

/* A creator that is alive but never finishes (it holds the creator's lock
 * and stays at INIT): the opener times out. */
static void test_segment_open_unfinished_times_out(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "slow");
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(shmobj__os_live_hold(fd, SHMOBJ__SEG_LIVE_CREATOR), 0);
    assert_int_equal(ftruncate(fd, 64 * 1024), 0);
    struct shmobj__seg_header *h =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(h != MAP_FAILED);
    h->format_version = SHMOBJ_FORMAT_VERSION;
    h->magic = SHMOBJ__SEG_MAGIC;
    assert_int_equal(open_rc(name, 100 * TEST_MS), SHMOBJ_ETIMEDOUT);
    /* The same object once its creator is gone: not ready, at once. */
    raw_release(h, fd);
    assert_int_equal(open_rc(name, SHMOBJ_FOREVER), SHMOBJ_ENOTREADY);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* Objects under a segment's name that no creator is setting up: an empty
 * one and a zero-filled one are "not ready", a foreign one is "not a
 * segment"; all at once, even for an opener that would wait for ever. */
static void test_segment_open_foreign_or_empty_object_immediate(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "foreign");
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(open_rc(name, SHMOBJ_FOREVER), SHMOBJ_ENOTREADY);
    assert_int_equal(ftruncate(fd, 64 * 1024), 0);
    assert_int_equal(open_rc(name, SHMOBJ_FOREVER), SHMOBJ_ENOTREADY);
    assert_int_equal(pwrite(fd, "PNG junk, not a segment", 23, 0), 23);
    assert_int_equal(open_rc(name, SHMOBJ_FOREVER), SHMOBJ_ENOTSEG);
    assert_int_equal(ftruncate(fd, 100), 0); /* small and not empty */
    assert_int_equal(open_rc(name, SHMOBJ_FOREVER), SHMOBJ_ENOTSEG);
    close(fd);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

static void test_segment_backend_file_and_memfd(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "/tmp/shmobj-test-file-%ld", (long)getpid());
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    o.backend = SHMOBJ_BACKEND_FILE;
    shmobj_segment *a = NULL, *b = NULL;
    assert_int_equal(shmobj_segment_create(path, &o, &a), 0);
    assert_int_equal(shmobj_segment_root_set(a, "r", 7), 0);
    assert_int_equal(shmobj_segment_open(path, SHMOBJ_BACKEND_FILE, 0, &b), 0);
    shmobj_ref ref = 0;
    assert_int_equal(shmobj_segment_root_get(b, "r", &ref), 0);
    assert_int_equal(ref, 7);
    shmobj_segment_close(b);
    shmobj_segment_close(a);
    assert_int_equal(shmobj_segment_destroy(path, SHMOBJ_BACKEND_FILE), 0);

    o.backend = SHMOBJ_BACKEND_MEMFD;
    assert_int_equal(shmobj_segment_create("anon", &o, &a), 0);
    int fd;
    assert_int_equal(shmobj_segment_fd(a, &fd), 0);
    assert_int_equal(shmobj_segment_open_fd(fd, 0, &b), 0);
    assert_int_equal(shmobj_segment_root_set(b, "m", 9), 0);
    assert_int_equal(shmobj_segment_root_get(a, "m", &ref), 0);
    assert_int_equal(ref, 9);
    shmobj_segment_close(b);
    shmobj_segment_close(a);
    assert_int_equal(shmobj_segment_open_fd(-1, 0, &b), SHMOBJ_EINVAL);
}

/* Resident bytes of this process's mapping that holds addr (the Rss line
 * of /proc/self/smaps). */
static uint64_t mapping_rss(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    uint64_t kb = UINT64_MAX;
    assert_non_null(f);
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
        else if (in && sscanf(line, "Rss: %lu kB", &lo) == 1) {
            kb = lo;
            break;
        }
    }
    fclose(f);
    assert_true(kb != UINT64_MAX);
    return kb * 1024;
}

/* Prefaulting maps every page of the current size into this process, at
 * creation with SHMOBJ_SEGMENT_PREFAULT or later by a call (also after
 * growth), and changes no byte. */
static void test_segment_prefault(void **state)
{
    (void)state;
    char name[96];
    shmobj_segment *seg;
    shmobj_segment_options o;
    shmobj_ref ref;
    void *p;
    shmobj_segment_options_init(&o);
    o.initial_size = 32 * MiB;
    o.max_size = 128 * MiB;
    test_name(name, sizeof name, "prefault");
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    assert_int_equal(shmobj_arena_alloc(seg, 4096, 16, &ref, &p), 0);
    memset(p, 0x5a, 4096);
    assert_true(mapping_rss(p) < 8 * MiB);
    assert_int_equal(shmobj_segment_prefault(seg), 0);
    assert_true(mapping_rss(p) >= 32 * MiB);
    for (size_t i = 0; i < 4096; i++)
        assert_int_equal(((unsigned char *)p)[i], 0x5a);
    /* after growth, again */
    void *big;
    shmobj_ref bref;
    assert_int_equal(shmobj_arena_alloc(seg, 48 * MiB, 16, &bref, &big), 0);
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(seg, &info), 0);
    assert_true(info.size > 48 * MiB);
    assert_int_equal(shmobj_segment_prefault(seg), 0);
    assert_true(mapping_rss(p) >= info.size);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);

    /* at creation */
    o.max_size = 0;
    o.flags = SHMOBJ_SEGMENT_PREFAULT;
    test_name(name, sizeof name, "prefault");
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    assert_int_equal(shmobj_arena_alloc(seg, 16, 16, &ref, &p), 0);
    assert_true(mapping_rss(p) >= 32 * MiB);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);

    assert_int_equal(shmobj_segment_prefault(NULL), SHMOBJ_EINVAL);
    o.flags = 1u << 7; /* unknown */
    assert_int_equal(shmobj_segment_create(name, &o, &seg), SHMOBJ_EINVAL);
}

static void test_segment_roots_set_get_del(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "roots");
    shmobj_segment *s = create_small(name);
    shmobj_ref ref = 0;
    assert_int_equal(shmobj_segment_root_get(s, "x", &ref), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_segment_root_set(s, "x", 5), 0);
    assert_int_equal(shmobj_segment_root_set(s, "x", 6), 0); /* replaces */
    assert_int_equal(shmobj_segment_root_get(s, "x", &ref), 0);
    assert_int_equal(ref, 6);
    assert_int_equal(shmobj_segment_root_add(s, "x", 7), SHMOBJ_EEXIST);
    assert_int_equal(shmobj_segment_root_get(s, "x", &ref), 0);
    assert_int_equal(ref, 6); /* add never replaces */
    assert_int_equal(shmobj_segment_root_del(s, "x"), 0);
    assert_int_equal(shmobj_segment_root_del(s, "x"), SHMOBJ_ENOTFOUND);
    assert_int_equal(shmobj_segment_root_add(s, "x", 8), 0);
    assert_int_equal(shmobj_segment_root_get(s, "x", &ref), 0);
    assert_int_equal(ref, 8);
    assert_int_equal(shmobj_segment_root_del(s, "x"), 0);
    char longname[SHMOBJ_ROOT_NAME_MAX + 2];
    memset(longname, 'r', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(shmobj_segment_root_set(s, longname, 1), SHMOBJ_EINVAL);
    longname[SHMOBJ_ROOT_NAME_MAX] = '\0'; /* exactly the maximum */
    assert_int_equal(shmobj_segment_root_set(s, longname, 1), 0);
    assert_int_equal(shmobj_segment_root_get(s, longname, &ref), 0);
    assert_int_equal(shmobj_segment_root_set(s, "", 1), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_segment_root_set(s, "z", SHMOBJ_REF_NULL),
                     SHMOBJ_EINVAL);
    char rn[16];
    int rc = 0;
    int i;
    for (i = 0; i < 1000 && rc == 0; i++) {
        snprintf(rn, sizeof rn, "n%d", i);
        rc = shmobj_segment_root_set(s, rn, 1);
    }
    assert_int_equal(rc, SHMOBJ_EFULL);
    assert_true(i > 100);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

static void test_arena_alloc_via_segment(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "blocks");
    shmobj_segment *s = create_small(name);
    shmobj_ref r = 0;
    assert_int_equal(shmobj_arena_alloc(s, 0, 0, &r, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_arena_alloc(s, 10, 3, &r, NULL), SHMOBJ_EINVAL);
    void *p = NULL, *q = NULL;
    assert_int_equal(shmobj_arena_alloc(s, 1000, 64, &r, &q), 0);
    size_t usable = 0;
    assert_int_equal(shmobj_arena_ptr(s, r, &p, &usable), 0);
    assert_ptr_equal(p, q);
    assert_true(usable >= 1000);
    assert_int_equal((uintptr_t)p % 64, 0);
    memset(p, 0xab, 1000);
    assert_int_equal(shmobj_arena_free(s, r), 0);
    assert_int_equal(shmobj_arena_ptr(s, r, &p, NULL), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_arena_free(s, r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_arena_alloc(s, 2 * MiB, 0, &r, NULL), SHMOBJ_ENOMEM);
    assert_int_equal(shmobj_arena_check(s, NULL), 0);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

static int grow_in_child(void *arg)
{
    shmobj_segment *s = NULL;
    if (shmobj_segment_open(arg, SHMOBJ_BACKEND_SHM, 0, &s) != 0)
        return 1;
    shmobj_ref r;
    if (shmobj_arena_alloc(s, 8 * MiB, 0, &r, NULL) != 0)
        return 2;
    void *p;
    if (shmobj_arena_ptr(s, r, &p, NULL) != 0)
        return 3;
    for (size_t i = 0; i < 8 * MiB; i++)
        ((unsigned char *)p)[i] = (unsigned char)(i * 7);
    if (shmobj_segment_root_set(s, "big", r) != 0)
        return 4;
    shmobj_segment_close(s);
    return 0;
}

/* Growth in one process; another meets an offset beyond its view and maps
 * the grown part lazily. */
static void test_segment_grow_across_processes(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "grow");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    o.max_size = 64 * MiB;
    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &s), 0);
    assert_int_equal(test_child_wait(test_child_start(grow_in_child, name, 20)),
                     0);
    shmobj_ref r;
    assert_int_equal(shmobj_segment_root_get(s, "big", &r), 0);
    void *p;
    size_t usable;
    assert_int_equal(shmobj_arena_ptr(s, r, &p, &usable), 0);
    assert_true(usable >= 8 * MiB);
    for (size_t i = 0; i < 8 * MiB; i += 4093)
        assert_int_equal(((unsigned char *)p)[i], (unsigned char)(i * 7));
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(s, &info), 0);
    assert_true(info.size > 8 * MiB);
    assert_true(info.size <= 64 * MiB);
    /* Past the maximum: a clean ENOMEM. */
    assert_int_equal(shmobj_arena_alloc(s, 80 * MiB, 0, &r, NULL), SHMOBJ_ENOMEM);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* The seed's fragmentation story: ten blocks, free every second one, then
 * ask for more than any hole. A fixed segment says ENOMEM and reports its
 * largest free block; a growable one grows and succeeds. */
static void fragment(shmobj_segment *s, uint64_t block, shmobj_ref *r)
{
    for (int i = 0; i < 10; i++)
        assert_int_equal(shmobj_arena_alloc(s, block, 0, &r[i], NULL), 0);
    for (int i = 0; i < 10; i += 2)
        assert_int_equal(shmobj_arena_free(s, r[i]), 0);
}

static void test_arena_fragmented_fixed_enomem_growable_ok(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "frag");
    const uint64_t block = 90 * 1024; /* ten of them nearly fill 1 MiB */
    shmobj_ref r[10], big;
    shmobj_segment *s = create_small(name);
    fragment(s, block, r);
    assert_int_equal(shmobj_arena_alloc(s, 2 * block, 0, &big, NULL), SHMOBJ_ENOMEM);
    shmobj_arena_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_arena_stats_get(s, &st), 0);
    assert_true(st.largest_free < 2 * block);
    assert_true(st.free_bytes > 2 * block); /* enough bytes, none together */
    assert_true(st.fragmentation_permille > 0);
    assert_int_equal(shmobj_arena_check(s, NULL), 0);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);

    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    o.max_size = 8 * MiB;
    assert_int_equal(shmobj_segment_create(name, &o, &s), 0);
    fragment(s, block, r);
    assert_int_equal(shmobj_arena_alloc(s, 2 * block, 0, &big, NULL), 0);
    assert_int_equal(shmobj_arena_check(s, NULL), 0);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* A child allocates and frees in a tight loop (mostly inside the segment
 * lock) and is SIGKILLed at random moments. After each kill the parent
 * takes the lock, the heap check passes, and every block the parent owns
 * still holds its data. */
static int churn_forever(void *arg)
{
    shmobj_segment *s = arg; /* inherited over fork */
    shmobj_ref live[16] = {0};
    unsigned x = (unsigned)getpid();
    for (;;) {
        x = x * 1103515245u + 12345u;
        unsigned i = (x >> 8) % 16;
        if (live[i] != 0) {
            shmobj_arena_free(s, live[i]);
            live[i] = 0;
        } else {
            /* larger than what the allocation cache serves: every call
             * takes the segment lock, where the kills are aimed */
            shmobj_arena_alloc(s, 8192 + (x >> 16) % 8192, (x & 1) ? 64 : 0,
                               &live[i], NULL);
        }
    }
    return 0;
}

static unsigned char pattern(unsigned block, size_t i)
{
    return (unsigned char)(block * 31 + i * 7);
}

/* The allocator takes the segment lock on an inline path that trusts the
 * handle's cached token only in the process that attached it: a forked
 * child's first allocation must attach the child (a token of its own)
 * before it locks, or a death of the child inside the lock would be
 * blamed on its live parent. */
struct fork_alloc {
    shmobj_segment *s;
    uint32_t parent_token;
};

static int alloc_in_child(void *arg)
{
    struct fork_alloc *f = arg;
    struct shmobj__seg_header *h = (struct shmobj__seg_header *)
        ((struct shmobj__space *)f->s)->base;
    shmobj_ref r;
    if (shmobj_arena_alloc(f->s, 200, 0, &r, NULL) != 0)
        return 1;
    uint32_t mine = atomic_load(&f->s->token);
    if (mine == 0 || mine == f->parent_token)
        return 2; /* locked under the parent's name */
    if (shmobj__os_lock_owner(&h->lock) != 0)
        return 3;
    if (shmobj_arena_free(f->s, r) != 0)
        return 4;
    return 0;
}

static void test_arena_alloc_forked_child_attaches_first(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "forkalloc");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 4 * MiB;
    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &s), 0);
    shmobj_ref r;
    assert_int_equal(shmobj_arena_alloc(s, 100, 0, &r, NULL), 0); /* warm */
    struct fork_alloc f = {s, atomic_load(&s->token)};
    assert_int_not_equal(f.parent_token, 0);
    pid_t child = test_child_start(alloc_in_child, &f, 20);
    assert_int_equal(test_child_wait(child), 0);
    assert_int_equal(atomic_load(&s->token), f.parent_token);
    assert_int_equal(shmobj_arena_free(s, r), 0);
    assert_int_equal(shmobj_arena_check(s, NULL), 0);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* A process killed while it holds the segment lock, found first by an
 * allocation (not by a heap check): the allocation's inline path sees the
 * word taken, the general path takes it over from the dead owner and
 * repairs, and the allocation succeeds with the lock free afterwards. */
static int hold_lock_forever(void *arg)
{
    int *fds = arg;
    shmobj_segment *s = *(shmobj_segment **)(void *)(fds + 2);
    if (shmobj__segment_lock(s) != 0)
        return 1;
    char c = 'L';
    if (write(fds[1], &c, 1) != 1)
        return 2;
    for (;;)
        pause();
}

static void test_arena_alloc_after_holder_killed_repairs(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "allocdead");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 4 * MiB;
    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &s), 0);
    struct shmobj__seg_header *h = (struct shmobj__seg_header *)
        ((struct shmobj__space *)s)->base;
    shmobj_ref keep;
    assert_int_equal(shmobj_arena_alloc(s, 300, 0, &keep, NULL), 0);
    /* fds[0..1]: a pipe; then the handle, for the child */
    int fds[2 + sizeof(shmobj_segment *) / sizeof(int) + 1];
    assert_int_equal(pipe(fds), 0);
    memcpy(fds + 2, &s, sizeof s);
    pid_t child = test_child_start(hold_lock_forever, fds, 30);
    char c = 0;
    assert_int_equal(read(fds[0], &c, 1), 1);
    assert_int_equal(c, 'L');
    assert_int_not_equal(shmobj__os_lock_owner(&h->lock), 0);
    kill(child, SIGKILL);
    assert_int_equal(test_child_wait(child), 128 + SIGKILL);
    shmobj_ref r;
    assert_int_equal(shmobj_arena_alloc(s, 500, 0, &r, NULL), 0);
    assert_int_equal(shmobj__os_lock_owner(&h->lock), 0);
    assert_int_equal(shmobj_arena_check(s, NULL), 0);
    assert_int_equal(shmobj_arena_free(s, r), 0);
    assert_int_equal(shmobj_arena_free(s, keep), 0);
    close(fds[0]);
    close(fds[1]);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

static void test_arena_kill_holder_recovers(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "kill");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 16 * MiB;
    o.max_size = 256 * MiB;
    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &s), 0);
    enum { OWN = 64 };
    shmobj_ref own[OWN];
    size_t own_size[OWN];
    for (unsigned b = 0; b < OWN; b++) {
        own_size[b] = 16 + (b * 977) % 3000;
        void *p;
        assert_int_equal(shmobj_arena_alloc(s, own_size[b], 0, &own[b], NULL), 0);
        assert_int_equal(shmobj_arena_ptr(s, own[b], &p, NULL), 0);
        for (size_t i = 0; i < own_size[b]; i++)
            ((unsigned char *)p)[i] = pattern(b, i);
    }
    struct shmobj__seg_header *h = (struct shmobj__seg_header *)
        (shmobj__space_of_seg(s))->base;
    const char *env = getenv("SHMOBJ_KILL_ITERATIONS");
    int rounds = env ? atoi(env) : 200;
    int owner_dead = 0;
    srand(11);
    for (int round = 0; round < rounds; round++) {
        pid_t child = test_child_start(churn_forever, s, 30);
        test_sleep_ms(1 + (unsigned)rand() % 3);
        kill(child, SIGKILL);
        assert_int_equal(test_child_wait(child), 128 + SIGKILL);
        if (round % 2 == 0) {
            /* Count the kills that hit the lock holder, repairing the way
             * the library's own lock path does. */
            int rc = shmobj__seg_lock_word(s, &h->lock, shmobj__os_now_ns());
            if (rc == SHMOBJ_EOWNERDEAD) {
                owner_dead++;
                assert_int_equal(shmobj__seg_heap_repair(s), 0);
                rc = 0;
            }
            assert_int_equal(rc, 0);
            shmobj__seg_unlock_word(s, &h->lock);
        }
        uint64_t bad = 0;
        int rc = shmobj_arena_check(s, &bad); /* odd rounds: repairs itself */
        if (rc != 0)
            fail_msg("round %d: heap check failed at offset %llu", round,
                     (unsigned long long)bad);
        for (unsigned b = 0; b < OWN; b++) {
            void *p;
            assert_int_equal(shmobj_arena_ptr(s, own[b], &p, NULL), 0);
            for (size_t i = 0; i < own_size[b]; i += 13)
                assert_int_equal(((unsigned char *)p)[i], pattern(b, i));
        }
        shmobj_ref r;
        assert_int_equal(shmobj_arena_alloc(s, 100, 0, &r, NULL), 0);
        assert_int_equal(shmobj_arena_free(s, r), 0);
    }
    /* With the child inside the lock most of its time, some kills must have
     * found it there; otherwise this test proved nothing. */
    if (rounds >= 40)
        assert_true(owner_dead > 0);
    print_message("kill rounds %d, lock owner died in %d of the %d checked\n",
                  rounds, owner_dead, (rounds + 1) / 2);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}


/* ---- the segment lock's word is validated, never trusted -------------- */

/* A damaged lock word costs an error or a repair, never a hang: a word
 * naming a slot that was never attached is a dead owner (taken over and
 * repaired), a word no token can be is ECORRUPT, a word naming a live
 * handle that does not hold the lock makes lockers give up at their
 * deadline. Opening never takes the lock. */
static void test_segment_lock_damaged_word_bounded(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "lockword");
    shmobj_segment *s = create_small(name);
    struct shmobj__seg_header *h = s->hdr;
    assert_int_equal(shmobj_segment_root_set(s, "r", 16), 0);

    /* slot 1000, generation 5: nobody */
    atomic_store(&h->lock.word, 1000u | 5u << SHMOBJ__SEG_SLOT_BITS);
    shmobj_ref ref;
    assert_int_equal(shmobj_segment_root_get(s, "r", &ref), 0);
    assert_int_equal(ref, 16);
    assert_int_equal(shmobj__os_lock_owner(&h->lock), 0);

    /* generation 0: no token looks like this */
    atomic_store(&h->lock.word, 7u);
    assert_int_equal(shmobj_segment_root_get(s, "r", &ref), SHMOBJ_ECORRUPT);
    shmobj_segment *o = NULL;
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 1000 * TEST_MS, &o), 0);

    /* the token of another live handle (o's), which does not hold it */
    uint32_t tok;
    assert_int_equal(shmobj__seg_procs_self(o, &tok), 0);
    atomic_store(&h->lock.word, tok);
    uint64_t deadline = shmobj__os_now_ns() + 100 * TEST_MS;
    assert_int_equal(shmobj__segment_lock_until(s, deadline), SHMOBJ_ETIMEDOUT);
    assert_true(shmobj__os_now_ns() >= deadline);
    /* o closes: its slot's OFD lock goes, the next locker repairs */
    shmobj_segment_close(o);
    assert_int_equal(shmobj_segment_root_get(s, "r", &ref), 0);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* ---- liveness across PID namespaces ------------------------------------ */

struct ns_arg {
    const char *name;
    int ready[2]; /* grandchild -> parent: "I hold the lock" */
    int pid[2];   /* child -> parent: the grandchild's pid */
};

static int ns_holder(void *p)
{
    struct ns_arg *a = p;
    /* A new PID namespace applies to children: fork once more. */
    if (unshare(CLONE_NEWPID) != 0)
        return 77;
    pid_t g = fork();
    if (g == 0) {
        shmobj_segment *s = NULL;
        if (shmobj_segment_open(a->name, SHMOBJ_BACKEND_SHM, 0, &s) != 0 ||
            shmobj__segment_lock(s) != 0)
            _exit(2);
        char c = getpid() == 1 ? '1' : 'x';
        if (write(a->ready[1], &c, 1) != 1)
            _exit(3);
        for (;;)
            pause(); /* holds the lock until killed */
    }
    /* The holder's pid as this (the parent's) namespace numbers it, so
     * the test can kill it. */
    int32_t gp = (int32_t)g;
    if (g < 0 || write(a->pid[1], &gp, sizeof gp) != sizeof gp)
        return 4;
    int st;
    waitpid(g, &st, 0);
    return 0;
}

/* Two containers sharing /dev/shm see each other's pids as nonsense: a
 * handle in another PID namespace must still count as attached, and its
 * lock must not be taken from it; once it dies, it is noticed. */
static void test_segment_liveness_other_pid_namespace(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "pidns");
    shmobj_segment *s = create_small(name);
    struct ns_arg a = {.name = name};
    assert_int_equal(pipe(a.ready), 0);
    assert_int_equal(pipe(a.pid), 0);
    pid_t c = test_child_start(ns_holder, &a, 20);
    char ch = 0;
    struct pollfd pf = {.fd = a.ready[0], .events = POLLIN};
    if (poll(&pf, 1, 5000) != 1) {
        int rc = test_child_wait(c);
        close(a.ready[0]);
        close(a.ready[1]);
        shmobj_segment_close(s);
        shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
        if (rc == 77)
            skip(); /* no permission to make a PID namespace */
        fail_msg("holder in a new PID namespace did not start (%d)", rc);
    }
    assert_int_equal(read(a.ready[0], &ch, 1), 1);
    assert_int_equal(ch, '1'); /* it is pid 1 over there */
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(s, &info), 0);
    assert_int_equal(info.attached, 2);
    assert_int_equal(shmobj__segment_lock_until(s, shmobj__os_now_ns() +
                                                       200 * TEST_MS),
                     SHMOBJ_ETIMEDOUT);
    int32_t holder = 0;
    assert_int_equal(read(a.pid[0], &holder, sizeof holder), sizeof holder);
    kill((pid_t)holder, SIGKILL); /* the namespace's init, holding the lock */
    assert_int_equal(test_child_wait(c), 0);
    /* Its OFD locks went with it: the next locker repairs. */
    assert_int_equal(shmobj__segment_lock_until(s, shmobj__os_now_ns() +
                                                       5000 * TEST_MS),
                     0);
    shmobj__segment_unlock(s);
    assert_int_equal(shmobj_segment_info_get(s, &info), 0);
    assert_int_equal(info.attached, 1);
    close(a.ready[0]);
    close(a.ready[1]);
    close(a.pid[0]);
    close(a.pid[1]);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* ---- growth that cannot be reserved ------------------------------------ */

/* A file segment on a tmpfs too small for its maximum: a growth whose
 * reservation fails leaves the file at the heap's size, and a repair after
 * a grower that died between truncate and reserve does not adopt pages
 * that were never reserved (a first touch of those would SIGBUS). */
static void test_segment_grow_unreserved_never_adopted(void **state)
{
    (void)state;
    char dir[96], path[160];
    snprintf(dir, sizeof dir, "/tmp/shmobj-test-tmpfs-%ld", (long)getpid());
    assert_int_equal(mkdir(dir, 0700), 0);
    if (mount("shmobj-test", dir, "tmpfs", 0, "size=3m") != 0) {
        rmdir(dir);
        skip(); /* needs root */
    }
    snprintf(path, sizeof path, "%s/seg", dir);
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_FILE;
    o.initial_size = 1 * MiB;
    o.max_size = 64 * MiB;
    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_create(path, &o, &s), 0);
    shmobj_ref r;
    assert_int_equal(shmobj_arena_alloc(s, 8 * MiB, 0, &r, NULL), SHMOBJ_ENOMEM);
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(s, &info), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal((uint64_t)st.st_size, info.size);

    /* A grower died after making the file larger, before reserving it. */
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 16 * MiB), 0);
    close(fd);
    assert_int_equal(shmobj__seg_heap_repair(s), 0);
    assert_int_equal(shmobj_segment_info_get(s, &info), 0);
    assert_int_equal(info.size, 1 * MiB);
    uint64_t bad = 0;
    assert_int_equal(shmobj_arena_check(s, &bad), 0);
    shmobj_segment_close(s);
    unlink(path);
    umount(dir);
    rmdir(dir);
}

/* A request near SIZE_MAX fails without growing the segment first. */
static void test_segment_alloc_huge_does_not_grow(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "huge");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    o.max_size = 64 * MiB;
    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &s), 0);
    shmobj_ref r;
    assert_int_equal(shmobj_arena_alloc(s, SIZE_MAX - 8, 0, &r, NULL),
                     SHMOBJ_ENOMEM);
    assert_int_equal(shmobj_arena_alloc(s, SIZE_MAX - 8, 4096, &r, NULL),
                     SHMOBJ_ENOMEM);
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(s, &info), 0);
    assert_int_equal(info.size, 1 * MiB);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* ---- memfd: sealed, mode honoured, backend from the header ------------- */

static void test_segment_memfd_sealed_mode_backend(void **state)
{
    (void)state;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.mode = 0640;
    o.flags = SHMOBJ_SEGMENT_REPLACE; /* a memfd has no name to replace */
    shmobj_segment *s = NULL;
    assert_int_equal(shmobj_segment_create("memfd-test", &o, &s), SHMOBJ_EINVAL);
    o.flags = 0;
    assert_int_equal(shmobj_segment_create("memfd-test", &o, &s), 0);
    int fd;
    assert_int_equal(shmobj_segment_fd(s, &fd), 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    /* Nobody holding the descriptor can cut pages from under a mapping. */
    assert_int_not_equal(ftruncate(fd, 4096), 0);
    assert_int_equal(errno, EPERM);
    shmobj_segment_close(s);

    /* A shm segment's descriptor passed to open_fd is still a shm one. */
    char name[96];
    test_name(name, sizeof name, "passfd");
    s = create_small(name);
    assert_int_equal(shmobj_segment_fd(s, &fd), 0);
    shmobj_segment *p = NULL;
    assert_int_equal(shmobj_segment_open_fd(fd, 0, &p), 0);
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(p, &info), 0);
    assert_int_equal(info.backend, SHMOBJ_BACKEND_SHM);
    shmobj_segment_close(p);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* ---- a segment replaced under its name --------------------------------- */

static void test_segment_replaced_reported(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "replaced");
    shmobj_segment *a = create_small(name);
    shmobj_segment *b = NULL;
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &b), 0);
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(b, &info), 0);
    assert_int_equal(info.flags, SHMOBJ_SEGMENT_INFO_LINKED |
                                     SHMOBJ_SEGMENT_INFO_CREATOR_ATTACHED);
    assert_int_equal(info.creator_pid, (uint32_t)getpid());
    assert_true(info.created_ns > 0);
    shmobj_segment_close(a);
    assert_int_equal(shmobj_segment_info_get(b, &info), 0);
    assert_int_equal(info.flags, SHMOBJ_SEGMENT_INFO_LINKED);

    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    o.flags = SHMOBJ_SEGMENT_REPLACE;
    assert_int_equal(shmobj_segment_create(name, &o, &a), 0);
    assert_int_equal(shmobj_segment_info_get(b, &info), 0);
    assert_int_equal(info.flags & SHMOBJ_SEGMENT_INFO_LINKED, 0);
    assert_int_equal(shmobj_segment_wait_attached(b, 5, 20 * TEST_MS),
                     SHMOBJ_EREPLACED);
    /* the new segment is fine */
    assert_int_equal(shmobj_segment_info_get(a, &info), 0);
    assert_int_not_equal(info.flags & SHMOBJ_SEGMENT_INFO_LINKED, 0);
    shmobj_segment_close(b);
    shmobj_segment_close(a);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}


/* A creator waiting without a deadline for consumers learns that its
 * segment's name was removed (no consumer can find it any more): the wait
 * ends with SHMOBJ_EREPLACED within a few of its slices. */
static int wait_attached_forever_main(void *p)
{
    shmobj_segment *seg = p;
    return -shmobj_segment_wait_attached(seg, 5, SHMOBJ_FOREVER);
}

static void test_segment_wait_attached_forever_removed_ereplaced(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "waitrm");
    shmobj_segment *a = create_small(name);
    pid_t pid = test_child_start(wait_attached_forever_main, a, 10);
    test_sleep_ms(100);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
    assert_int_equal(test_child_wait(pid), -SHMOBJ_EREPLACED);
    shmobj_segment_close(a);
}

/* A consumer of a segment that its producer replaced under the same name
 * is told so: a timed take says EREPLACED at its deadline, and so does a
 * sender waiting for a completion that will never come. */

static void test_segment_replaced_queue_waits_ereplaced(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "qrepl");
    shmobj_segment *a = create_small(name), *b = NULL;
    shmobj_queue *qa, *qb;
    assert_int_equal(shmobj_queue_create(a, "jobs", 16, 0, &qa), 0);
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &b), 0);
    assert_int_equal(shmobj_queue_open(b, "jobs", &qb), 0);
    shmobj_ref r, msg;
    assert_int_equal(shmobj_queue_take_timed(qb, &r, 20 * TEST_MS), SHMOBJ_ETIMEDOUT);
    void *data;
    assert_int_equal(shmobj_queue_msg_alloc(qa, 64, SHMOBJ_QUEUE_MSG_TRACK, &msg, &data), 0);

    /* the producer starts over with a new segment of the same name */
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    o.flags = SHMOBJ_SEGMENT_REPLACE;
    shmobj_segment *a2 = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &a2), 0);

    assert_int_equal(shmobj_queue_take_timed(qb, &r, 20 * TEST_MS), SHMOBJ_EREPLACED);
    assert_int_equal(shmobj_queue_try_take(qb, &r), SHMOBJ_EEMPTY); /* no wait: no claim */
    assert_int_equal(shmobj_queue_msg_wait_done(qa, msg, 20 * TEST_MS), SHMOBJ_EREPLACED);

    shmobj_queue_close(qb);
    shmobj_queue_close(qa);
    shmobj_segment_close(b);
    shmobj_segment_close(a);
    shmobj_segment_close(a2);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* Another process grows the segment while an open or a peek looks at it:
 * the size it read from the object is older than the header's size. A
 * segment that grew is not a damaged one. */
static shmobj_segment *grow_seg;

static void grow_now(void)
{
    shmobj_ref r;
    if (grow_seg != NULL && shmobj_arena_alloc(grow_seg, 2 * MiB, 0, &r, NULL) == 0)
        grow_seg = NULL; /* once */
}

static void test_segment_open_while_growing_not_corrupt(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "opengrow");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    o.max_size = 64 * MiB;
    shmobj_segment *s = NULL, *t = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &s), 0);
    shmobj__seg_open_hook = grow_now;

    grow_seg = s;
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &t), 0);
    assert_null(grow_seg); /* it did grow in between */
    shmobj_segment_close(t);

    grow_seg = s;
    shmobj_segment_peek_info pi = {.struct_size = sizeof pi};
    assert_int_equal(shmobj_segment_peek(name, SHMOBJ_BACKEND_SHM, &pi), 0);
    assert_null(grow_seg);
    assert_true(pi.flags & SHMOBJ_SEGMENT_PEEK_READY);

    shmobj__seg_open_hook = NULL;
    shmobj_segment_close(s);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* ---- the public allocation and free with the core inline ---- */

/* shmobj_arena_alloc() and shmobj_arena_free() run the arena core inline
 * behind the segment lock (arena-inline.h): each damage of the heap that
 * the core's own calls refuse is still SHMOBJ_ECORRUPT through the public
 * calls, writes nothing, and once the bytes are restored both work again.
 * The control block's magic and heap end, and a block's boundary tag. The
 * damaged allocations ask for more than the process's allocation cache
 * serves: a block from the cache (the first allocation filled its class)
 * is handed out by its own header word, which no damage here touches. */
#define PUB_UNCACHED 9000
static void test_arena_public_damaged_heap_ecorrupt(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "pubdamage");
    shmobj_segment *s = create_small(name);
    uint8_t *base = (uint8_t *)s->space.base;
    uint64_t *magic = (uint64_t *)(void *)(base + SHMOBJ__SEG_ARENA_OFF);
    uint64_t *heap_end = (uint64_t *)(void *)(base + SHMOBJ__SEG_ARENA_OFF + 16);
    shmobj_ref r = 0, r2 = 0;
    void *p = NULL;
    assert_int_equal(shmobj_arena_alloc(s, 100, 0, &r, &p), 0);
    /* the next block's boundary tag: the block is 128 bytes, header
     * included, and its payload starts 16 bytes into it */
    uint64_t *tag = (uint64_t *)(void *)((uint8_t *)p - 16 + 128);
    assert_int_equal(*tag, 128);

    uint64_t saved = *magic;
    *magic ^= 1;
    assert_int_equal(shmobj_arena_alloc(s, PUB_UNCACHED, 0, &r2, NULL), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_arena_free(s, r), SHMOBJ_ECORRUPT);
    *magic = saved;

    saved = *heap_end;
    *heap_end = s->max_size + 4096; /* beyond anything mapped */
    assert_int_equal(shmobj_arena_alloc(s, PUB_UNCACHED, 0, &r2, NULL), SHMOBJ_ECORRUPT);
    assert_int_equal(shmobj_arena_free(s, r), SHMOBJ_ECORRUPT);
    *heap_end = saved | 8; /* not a multiple of 16 */
    assert_int_equal(shmobj_arena_alloc(s, PUB_UNCACHED, 0, &r2, NULL), SHMOBJ_ECORRUPT);
    *heap_end = saved;

    *tag = 144;
    assert_int_equal(shmobj_arena_free(s, r), SHMOBJ_ECORRUPT);
    *tag = 128;

    assert_int_equal(shmobj_arena_check(s, NULL), 0);
    assert_int_equal(shmobj_arena_free(s, r), 0);
    assert_int_equal(shmobj_arena_free(s, r), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_arena_alloc(s, 100, 0, &r2, NULL), 0);
    assert_int_equal(shmobj_arena_free(s, r2), 0);
    assert_int_equal(shmobj_arena_check(s, NULL), 0);
    shmobj_segment_close(s);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* ---- growth within max_size (issue 29, defect 4) --------------------- */

/* A request far larger than half the segment, made while the heap's last
 * block is in use, fits once the segment grows: the growth is sized for
 * the allocator's size class, not the bare request. */
static void test_segment_grow_large_alloc_last_block_used_fits(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "growlast");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    o.max_size = 64 * MiB;
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    /* Take the heap's one free block whole, so its last block is used. */
    shmobj_arena_stats st = {.struct_size = sizeof st};
    shmobj_ref whole, big;
    /* The allocator looks for a block of the request's size class or
     * above, so a request of a block's whole size may not find it: take
     * 15/16 of the largest each time, down to the small exact classes. */
    for (int i = 0; i < 64; i++) {
        assert_int_equal(shmobj_arena_stats_get(seg, &st), 0);
        if (st.free_blocks == 0)
            break;
        uint64_t want = st.largest_free;
        if (want >= 512)
            want -= want / 16;
        assert_int_equal(shmobj_arena_alloc(seg, want, 16, &whole, NULL), 0);
    }
    assert_int_equal(st.free_blocks, 0);
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(seg, &info), 0);
    assert_int_equal(info.size, 1 * MiB); /* nothing grew yet */
    /* Sizes just past a size class's start (the class's rounding is
     * largest there), from 2 to 8 times the segment. */
    static const uint64_t sizes[] = {2 * MiB + 100, 3 * MiB + 16, 5 * MiB + 1,
                                     8 * MiB + 4096};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = NULL;
        int rc = shmobj_arena_alloc(seg, sizes[i], 16, &big, &p);
        if (rc != 0)
            fail_msg("alloc of %llu bytes: %d, segment below its maximum",
                     (unsigned long long)sizes[i], rc);
        memset(p, 0xa5, sizes[i]);
        /* keep it: the last block stays in use for the next request */
    }
    assert_int_equal(shmobj_arena_check(seg, NULL), 0);
    /* What does not fit even at the maximum is still refused. */
    assert_int_equal(shmobj_arena_alloc(seg, 64 * MiB, 16, &big, NULL),
                     SHMOBJ_ENOMEM);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* A mutable dict growing from empty in a small growable segment: every
 * set succeeds far below the maximum (the dict's body doubles, an
 * allocation larger than half the segment while its last block is used). */
static void test_segment_grow_mdict_from_empty_no_enomem(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "growdict");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 4 * MiB;
    o.max_size = 1024 * MiB;
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    shmobj_ref r;
    shmobj_view d;
    assert_int_equal(shmobj_obj_put(seg, &SHMOBJ_VAL_MDICT(), &r), 0);
    assert_int_equal(shmobj_obj_get(seg, r, &d), 0);
    for (int64_t i = 0; i < 120000; i++) {
        char k[32];
        snprintf(k, sizeof k, "key-%lld", (long long)i);
        int rc = shmobj_mdict_set(&d, &SHMOBJ_VAL_STR(k), &SHMOBJ_VAL_STR(k));
        if (rc != 0) {
            shmobj_segment_info info = {.struct_size = sizeof info};
            assert_int_equal(shmobj_segment_info_get(seg, &info), 0);
            fail_msg("set of key %lld: %d with the segment at %llu of %llu bytes",
                     (long long)i, rc, (unsigned long long)info.size,
                     (unsigned long long)info.max_size);
        }
    }
    assert_int_equal(shmobj_obj_check(seg, r), 0);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* ---- an empty object, timeout 0 (issue 29, defect 12) ---------------- */

static void test_segment_open_empty_timeout_zero_enotready(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "empty0");
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    /* Left by a creator that died at once: older than any creator still
     * between its create and its lock. */
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &seg),
                     SHMOBJ_ENOTREADY);
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 1000000, &seg),
                     SHMOBJ_ENOTREADY);
    assert_int_equal(shmobj_segment_open_fd(fd, 0, &seg), SHMOBJ_ENOTREADY);
    /* zero-filled, as before */
    assert_int_equal(ftruncate(fd, 64 * 1024), 0);
    assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &seg),
                     SHMOBJ_ENOTREADY);
    close(fd);
    /* the way out the docs give: destroy the name, create it again */
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
    seg = create_small(name);
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* ---- destroy and replace only segments (issue 29, defect 6) ---------- */

static void file_write(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    ssize_t n = (ssize_t)strlen(text);
    assert_int_equal(write(fd, text, (size_t)n), n);
    close(fd);
}

static bool file_has(const char *path, const char *text)
{
    char buf[256] = {0};
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n == (ssize_t)strlen(text) && memcmp(buf, text, (size_t)n) == 0;
}

static void test_segment_destroy_foreign_enotseg(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "/tmp/shmobj-test-notseg-%ld", (long)getpid());
    const char *text = "precious data, not a segment\n";
    file_write(path, text);
    assert_int_equal(shmobj_segment_destroy(path, SHMOBJ_BACKEND_FILE),
                     SHMOBJ_ENOTSEG);
    assert_true(file_has(path, text));
    /* A large one whose first bytes are not a segment's. */
    char big[8192];
    memset(big, 'x', sizeof big);
    big[sizeof big - 1] = 0;
    int fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, big, sizeof big), (ssize_t)sizeof big);
    close(fd);
    assert_int_equal(shmobj_segment_destroy(path, SHMOBJ_BACKEND_FILE),
                     SHMOBJ_ENOTSEG);
    assert_int_equal(access(path, F_OK), 0);
    unlink(path);

    /* another program's shm object */
    char name[96];
    test_name(name, sizeof name, "othershm");
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "another program's object", 24, 0), 24);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM),
                     SHMOBJ_ENOTSEG);
    int fd2 = shm_open(name, O_RDONLY, 0);
    assert_true(fd2 >= 0);
    struct stat a, b;
    assert_int_equal(fstat(fd, &a), 0);
    assert_int_equal(fstat(fd2, &b), 0);
    assert_true(a.st_ino == b.st_ino);
    close(fd2);
    close(fd);
    shm_unlink(name);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM),
                     SHMOBJ_ENOTFOUND);
}

static void test_segment_create_replace_foreign_enotseg(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "/tmp/shmobj-test-replace-%ld", (long)getpid());
    const char *text = "a user's file\n";
    file_write(path, text);
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    o.backend = SHMOBJ_BACKEND_FILE;
    o.flags = SHMOBJ_SEGMENT_REPLACE;
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_create(path, &o, &seg), SHMOBJ_ENOTSEG);
    assert_null(seg);
    assert_true(file_has(path, text));
    unlink(path);
    /* a segment is replaced, as before */
    assert_int_equal(shmobj_segment_create(path, &o, &seg), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "old", 1), 0);
    shmobj_segment *seg2 = NULL;
    assert_int_equal(shmobj_segment_create(path, &o, &seg2), 0);
    shmobj_ref ref;
    assert_int_equal(shmobj_segment_root_get(seg2, "old", &ref), SHMOBJ_ENOTFOUND);
    shmobj_segment_close(seg);
    shmobj_segment_close(seg2);
    assert_int_equal(shmobj_segment_destroy(path, SHMOBJ_BACKEND_FILE), 0);

    char name[96];
    test_name(name, sizeof name, "replshm");
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "not ours", 8, 0), 8);
    o.backend = SHMOBJ_BACKEND_SHM;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), SHMOBJ_ENOTSEG);
    char buf[8];
    assert_int_equal(pread(fd, buf, 8, 0), 8);
    assert_memory_equal(buf, "not ours", 8);
    int fd2 = shm_open(name, O_RDONLY, 0);
    assert_true(fd2 >= 0); /* the name still names it */
    close(fd2);
    close(fd);
    shm_unlink(name);
}

/* Objects a creator left empty or all zero (it died during set-up) are
 * what SHMOBJ_ENOTREADY reports: destroy removes them, so the way out the
 * documentation gives works. */
static void test_segment_destroy_abandoned_empty_or_zero_ok(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "abandoned");
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 1 * MiB), 0);
    close(fd);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM),
                     SHMOBJ_ENOTFOUND);
    /* a segment made by a process of the other byte order is still ours */
    shmobj_segment *seg = create_small(name);
    shmobj_segment_close(seg);
    struct shmobj__seg_header *h = raw_header(name, &fd);
    h->magic = SHMOBJ__SEG_MAGIC_SWAPPED;
    raw_release(h, fd);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* ---- handles outlive their segment (issue 29, defect 7) --------------- */

static uint32_t attached_count(shmobj_segment *obs)
{
    shmobj_segment_info info = {.struct_size = sizeof info};
    assert_int_equal(shmobj_segment_info_get(obs, &info), 0);
    return info.attached;
}

/* A queue closed after its segment, and before it: nothing reads freed
 * memory, the segment stays attached until the queue is closed, the
 * queue's calls that need the heap answer SHMOBJ_ESTALE meanwhile, and
 * the queue is sound afterwards. */
static void test_segment_close_before_queue_handle_safe(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "qorder");
    shmobj_segment *obs = create_small(name);
    shmobj_queue *q0;
    assert_int_equal(shmobj_queue_create(obs, "q", 64, 0, &q0), 0);
    shmobj_queue_close(q0);
    for (int seg_first = 0; seg_first < 2; seg_first++) {
        shmobj_segment *seg = NULL;
        assert_int_equal(shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 0, &seg), 0);
        shmobj_queue *q;
        assert_int_equal(shmobj_queue_open(seg, "q", &q), 0);
        int fd;
        assert_int_equal(shmobj_queue_notify_fd(q, &fd), 0);
        shmobj_ref ref;
        assert_int_equal(shmobj_queue_put_copy(q, "hello", 5, 0, 0, &ref), 0);
        assert_int_equal(attached_count(obs), 2);
        if (seg_first) {
            shmobj_segment_close(seg);
            assert_int_equal(attached_count(obs), 2); /* the queue holds it */
            void *data;
            assert_int_equal(shmobj_queue_msg_alloc(q, 512 * 1024, 0, &ref, &data),
                             SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_put_copy(q, "x", 1, 0, 0, &ref),
                             SHMOBJ_ESTALE);
            /* every call through the handle, ring operations included */
            shmobj_ref got, refs[2] = {ref, ref};
            size_t n;
            uint64_t count;
            uint32_t cap;
            shmobj_queue_stats st = {.struct_size = sizeof st};
            assert_int_equal(shmobj_queue_put(q, ref), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_try_put(q, ref), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_take(q, &got), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_try_take(q, &got), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_try_peek(q, &got), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_put_many(q, refs, 2, 0, &n), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_take_many(q, refs, 2, 0, &n), SHMOBJ_ESTALE);
            assert_false(shmobj_queue_has_messages(q));
            assert_int_equal(shmobj_queue_count(q, &count), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_capacity(q, &cap), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_stats_get(q, &st), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_check(q, NULL), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_notify_arm(q), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_msg_done(q, ref), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_put_tracked(q, ref, 0), SHMOBJ_ESTALE);
            assert_int_equal(shmobj_queue_wait_all(q, 0), SHMOBJ_ESTALE);
            shmobj_queue_close(q);
        } else {
            shmobj_queue_close(q);
            assert_int_equal(attached_count(obs), 2);
            shmobj_segment_close(seg);
        }
        assert_int_equal(attached_count(obs), 1);
        /* the message is there, once, for the observer */
        shmobj_queue *qo;
        assert_int_equal(shmobj_queue_open(obs, "q", &qo), 0);
        shmobj_ref got;
        assert_int_equal(shmobj_queue_try_take(qo, &got), 0);
        assert_int_equal(shmobj_queue_try_take(qo, &got), SHMOBJ_EEMPTY);
        assert_int_equal(shmobj_queue_msg_free(qo, got), 0);
        assert_int_equal(shmobj_queue_check(qo, NULL), 0);
        shmobj_queue_close(qo);
    }
    shmobj_segment_close(obs);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* ---- a process stopped at each step of growth (issue 29) --------------- */

#include "test-stall.h"

#define GROW_BLOCKS 400u
#define GROW_WORKERS_MAX 4

struct grow_model {
    shmobj_ref ref[GROW_WORKERS_MAX][GROW_BLOCKS]; /* 0: none or freed */
    uint32_t len[GROW_WORKERS_MAX][GROW_BLOCKS];
    uint64_t done[GROW_WORKERS_MAX];
    uint32_t ready;
};

struct grow_job {
    const char *name;
    struct grow_model *model;
    unsigned w, workers;
    const char *step;
    int pin;
};

static unsigned char grow_byte(unsigned w, unsigned i)
{
    return (unsigned char)(w * 61 + i * 7 + 1);
}

static int grow_worker(void *p)
{
    struct grow_job *job = p;
    if (job->pin)
        test_stall_pin(0);
    shmobj_segment *seg;
    if (shmobj_segment_open(job->name, SHMOBJ_BACKEND_SHM, 5000000000LL, &seg) != 0)
        return 10;
    __atomic_fetch_add(&job->model->ready, 1, __ATOMIC_ACQ_REL);
    for (unsigned ms = 0; __atomic_load_n(&job->model->ready, __ATOMIC_ACQUIRE) < job->workers; ms++) {
        if (ms > 60000)
            return 12;
        test_sleep_ms(1);
    }
    if (job->step != NULL)
        test_stall_arm(job->step, 1, TEST_STALL_STOP, 0);
    uint64_t rs = 0x5151ULL + job->w;
    for (unsigned i = 0; i < GROW_BLOCKS; i++) {
        uint64_t r = test_xorshift(&rs);
        /* the stopped one asks for large blocks: it is the one to grow */
        size_t len = job->step != NULL ? 32768 + (size_t)(r % 65536) : 64 + (size_t)(r % 8192);
        shmobj_ref ref;
        void *ptr;
        int rc = shmobj_arena_alloc(seg, len, 16, &ref, &ptr);
        if (rc != 0)
            return 20;
        memset(ptr, grow_byte(job->w, i), len);
        job->model->len[job->w][i] = (uint32_t)len;
        __atomic_store_n(&job->model->ref[job->w][i], ref, __ATOMIC_RELEASE);
        if (r % 5 == 0 && i > 0) { /* free an earlier one now and then */
            unsigned k = (unsigned)(r >> 32) % i;
            shmobj_ref old = job->model->ref[job->w][k];
            if (old != 0) {
                if (shmobj_arena_free(seg, old) != 0)
                    return 21;
                __atomic_store_n(&job->model->ref[job->w][k], 0, __ATOMIC_RELEASE);
            }
        }
        __atomic_store_n(&job->model->done[job->w], i + 1, __ATOMIC_RELAXED);
    }
    test_stall_disarm();
    shmobj_segment_close(seg);
    return 0;
}

static void grow_run(const char *step, unsigned workers, int pin)
{
    char name[96];
    test_name(name, sizeof name, "growstall");
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 1 * MiB;
    o.max_size = 512 * MiB;
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    struct grow_model *model = mmap(NULL, sizeof *model, PROT_READ | PROT_WRITE,
                                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(model != MAP_FAILED);
    struct grow_job jobs[GROW_WORKERS_MAX];
    pid_t pids[GROW_WORKERS_MAX];
    for (unsigned w = 0; w < workers; w++) {
        jobs[w] = (struct grow_job){name, model, w, workers, w == 0 ? step : NULL, pin};
        pids[w] = test_child_start(grow_worker, &jobs[w], 120);
    }
    int status = 0;
    int r = test_stall_wait_stopped(pids[0], 60000, &status);
    if (r != 1)
        fail_msg("step %s: the armed worker %s (status %#x)", step,
                 r == 0 ? "ended without reaching it" : "did not stop in time",
                 (unsigned)status);
    /* the others go on until they wait for the segment lock it holds */
    uint64_t last = 0;
    for (unsigned ms = 0, idle = 0; ms < 3000 && idle < 300; ms++) {
        uint64_t now = 0;
        for (unsigned w = 1; w < workers; w++)
            now += __atomic_load_n(&model->done[w], __ATOMIC_RELAXED);
        idle = now == last ? idle + 1 : 0;
        last = now;
        test_sleep_ms(1);
    }
    test_stall_resume(pids[0]);
    for (unsigned w = 0; w < workers; w++) {
        int rc = test_child_wait(pids[w]);
        if (rc != 0)
            fail_msg("step %s: worker %u exited with %d", step, w, rc);
    }
    /* every acknowledged block intact (no two overlap), the heap whole */
    for (unsigned w = 0; w < workers; w++)
        for (unsigned i = 0; i < GROW_BLOCKS; i++) {
            if (model->ref[w][i] == 0)
                continue;
            void *ptr;
            size_t usable;
            assert_int_equal(shmobj_arena_ptr(seg, model->ref[w][i], &ptr, &usable), 0);
            assert_true(usable >= model->len[w][i]);
            const unsigned char *b = ptr;
            for (uint32_t k = 0; k < model->len[w][i]; k++)
                if (b[k] != grow_byte(w, i))
                    fail_msg("step %s: block %u of worker %u changed at %u", step, i, w, k);
        }
    assert_int_equal(shmobj_arena_check(seg, NULL), 0);
    munmap(model, sizeof *model);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

static const char *const grow_steps[] = {"segment.grow.locked", "segment.grow.reserved",
                                         "segment.grow.handed"};

static void test_segment_stall_every_grow_step(void **state)
{
    (void)state;
    for (size_t i = 0; i < 3; i++)
        grow_run(grow_steps[i], 3, 0);
}

static void test_segment_stall_every_grow_step_pinned(void **state)
{
    (void)state;
    for (size_t i = 0; i < 3; i++)
        grow_run(grow_steps[i], 4, 1);
}

/* ---- the heap's untouched mark: what a new block may hold ------------- */

#include "space.h"

#define DIRTY_LIVE 256u

/* A segment of `initial` bytes that may grow to `max`, named after tag. */
static shmobj_segment *dirty_segment(char *name, size_t len, const char *tag,
                                     uint64_t initial, uint64_t max)
{
    test_name(name, len, tag);
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = initial;
    o.max_size = max;
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    return seg;
}

/* The first non-zero byte of a block past `from`, or `to` when none. */
static uint64_t dirty_first_nonzero(const uint8_t *p, uint64_t from, uint64_t to)
{
    for (uint64_t i = from; i < to; i++)
        if (p[i] != 0)
            return i;
    return to;
}

/* Random allocations (small, medium, large, some aligned) and frees in a
 * segment that grows, every block written whole: each block the heap
 * says is zero past its first `dirty` bytes must be. Returns the number
 * of blocks reported with fewer dirty bytes than their size. */
static unsigned dirty_model_run(shmobj_segment *seg, uint64_t seed, unsigned ops)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    shmobj__ref live[DIRTY_LIVE] = {0};
    unsigned clean = 0;
    for (unsigned op = 0; op < ops; op++) {
        uint64_t r = test_xorshift(&seed);
        unsigned slot = (unsigned)(r % DIRTY_LIVE);
        if (live[slot] != 0 && (r >> 60) < 6) /* mostly grow the live set */
            continue;
        if (live[slot] != 0) {
            assert_int_equal(sp->ops->free(sp, live[slot]), 0);
            live[slot] = 0;
            continue;
        }
        uint64_t kind = (r >> 8) % 20, size;
        if (kind < 10)
            size = 16 + (r >> 16) % 2048;
        else if (kind < 17)
            size = 4096 + (r >> 16) % (256 * 1024);
        else
            size = 256 * 1024 + (r >> 16) % (2 * MiB);
        uint64_t align = (r >> 40) % 8 == 0 ? 4096 : (r >> 40) % 8 == 1 ? 64 : 16;
        shmobj__ref ref = 0;
        uint64_t dirty = 0;
        int rc = shmobj__space_alloc_dirty(sp, size, align, &ref, &dirty);
        if (rc == SHMOBJ_ENOMEM)
            continue;
        assert_int_equal(rc, 0);
        assert_true(dirty <= size);
        uint8_t *p = sp->base + shmobj__ref_off(ref);
        uint64_t bad = dirty_first_nonzero(p, dirty, size);
        if (bad != size)
            fail_msg("op %u: block at %#llx of %llu bytes said zero past %llu, "
                     "byte %llu is %#x", op, (unsigned long long)shmobj__ref_off(ref),
                     (unsigned long long)size, (unsigned long long)dirty,
                     (unsigned long long)bad, p[bad]);
        clean += dirty < size;
        /* what lets the heap skip the mark for blocks far below it */
        uint64_t usable = shmobj__space_usable(sp, ref);
        assert_true(usable >= size && usable - size < SHMOBJ__SEG_UNTOUCHED_STEP);
        memset(p, 0xa5, (size_t)usable);
        live[slot] = ref;
    }
    for (unsigned i = 0; i < DIRTY_LIVE; i++)
        if (live[i] != 0)
            assert_int_equal(sp->ops->free(sp, live[i]), 0);
    return clean;
}

static void test_segment_alloc_dirty_covers_every_written_byte(void **state)
{
    (void)state;
    unsigned clean = 0;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        char name[96];
        shmobj_segment *seg = dirty_segment(name, sizeof name, "dirty", 1 * MiB, 1024 * MiB);
        clean += dirty_model_run(seg, seed * 0x9e3779b97f4a7c15ULL, 3000);
        uint64_t bad = 0;
        assert_int_equal(shmobj_arena_check(seg, &bad), 0);
        shmobj_segment_close(seg);
        shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    }
    print_message("%u blocks reported partly zero\n", clean);
    /* the mark is worth having: blocks from the top need no zeroing */
    assert_true(clean > 100);
}

/* A block whose end falls on the mark's step: the heap writes the next
 * free block's header right there, and a merge keeps it inside the free
 * block once this one is freed. A later, larger block over it must count
 * those bytes as written. */
static void test_segment_alloc_dirty_block_ending_on_step(void **state)
{
    (void)state;
    char name[96];
    shmobj_segment *seg = dirty_segment(name, sizeof name, "dirtystep", 8 * MiB, 8 * MiB);
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    shmobj__ref a = 0, b = 0;
    uint64_t dirty = 0;
    /* larger than what an allocation cache keeps: its free merges at once */
    assert_int_equal(shmobj__space_alloc_dirty(sp, 8192, 16, &a, &dirty), 0);
    uint64_t top = shmobj__ref_off(a);
    assert_int_equal(sp->ops->free(sp, a), 0);
    uint64_t step = SHMOBJ__SEG_UNTOUCHED_STEP;
    uint64_t size = (top + 2 * step) / step * step - top; /* ends on a step */
    assert_int_equal(shmobj__space_alloc_dirty(sp, size, 16, &a, &dirty), 0);
    assert_int_equal(shmobj__ref_off(a), top);
    assert_int_equal(shmobj__space_usable(sp, a), size);
    assert_int_equal(sp->ops->free(sp, a), 0);
    assert_int_equal(shmobj__space_alloc_dirty(sp, size + step, 16, &b, &dirty), 0);
    assert_int_equal(shmobj__ref_off(b), top);
    uint8_t *p = sp->base + top;
    assert_int_equal(dirty_first_nonzero(p, dirty, size + step), size + step);
    assert_int_equal(sp->ops->free(sp, b), 0);
    /* a mark of 0 (unknown, or damage): nothing is taken for zero */
    atomic_store(&seg->hdr->untouched, 0);
    assert_int_equal(shmobj__space_alloc_dirty(sp, 4 * step, 16, &b, &dirty), 0);
    assert_int_equal(dirty, 4 * step);
    assert_int_equal(sp->ops->free(sp, b), 0);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

/* A holder killed between handing the grown space to the heap and marking
 * the old end (the old sentinel's bytes now inside the last free block):
 * the next locker's repair must take the whole heap for touched. */
static int dirty_grower(void *p)
{
    const char *name = p;
    shmobj_segment *seg;
    if (shmobj_segment_open(name, SHMOBJ_BACKEND_SHM, 5000000000LL, &seg) != 0)
        return 10;
    test_stall_arm("segment.grow.handed", 1, TEST_STALL_STOP, 0);
    shmobj_ref ref;
    void *ptr;
    (void)shmobj_arena_alloc(seg, 8 * MiB, 16, &ref, &ptr);
    return 11; /* never reached: killed at the step */
}

static void test_segment_alloc_dirty_after_holder_killed_growing(void **state)
{
    (void)state;
    char name[96];
    shmobj_segment *seg = dirty_segment(name, sizeof name, "dirtykill", 1 * MiB, 64 * MiB);
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    /* the heap's last block free, so the growth merges it with the new space */
    shmobj__ref small = 0;
    uint64_t dirty = 0;
    assert_int_equal(shmobj__space_alloc_dirty(sp, 1024, 16, &small, &dirty), 0);
    pid_t pid = test_child_start(dirty_grower, name, 60);
    int status = 0;
    assert_int_equal(test_stall_wait_stopped(pid, 30000, &status), 1);
    kill(pid, SIGKILL);
    assert_int_not_equal(test_child_wait(pid), 0);
    /* a block over the old end: the repair ran first, in this allocation */
    shmobj__ref big = 0;
    assert_int_equal(shmobj__space_alloc_dirty(sp, 4 * MiB, 16, &big, &dirty), 0);
    uint8_t *p = sp->base + shmobj__ref_off(big);
    assert_int_equal(dirty_first_nonzero(p, dirty, 4 * MiB), 4 * MiB);
    assert_int_equal(sp->ops->free(sp, big), 0);
    assert_int_equal(sp->ops->free(sp, small), 0);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segment_create_open_close_roundtrip),
        cmocka_unit_test(test_segment_create_twice_eexist),
        cmocka_unit_test(test_segment_open_missing_notfound),
        cmocka_unit_test(test_segment_create_bad_names_einval),
        cmocka_unit_test(test_segment_create_bad_sizes_einval),
        cmocka_unit_test(test_segment_struct_size_grows_at_end),
        cmocka_unit_test(test_segment_create_store_too_small_enomem),
        cmocka_unit_test(test_segment_create_mode_0600),
        cmocka_unit_test(test_segment_open_before_create_waits),
        cmocka_unit_test(test_segment_wait_attached_two_consumers),
        cmocka_unit_test(test_segment_wait_attached_dead_consumer_not_counted),
        cmocka_unit_test(test_segment_open_damaged_header_ecorrupt),
        cmocka_unit_test(test_segment_open_creator_killed_each_step_enotready),
        cmocka_unit_test(test_segment_open_foreign_or_empty_object_immediate),
        cmocka_unit_test(test_segment_open_unfinished_times_out),
        cmocka_unit_test(test_segment_backend_file_and_memfd),
        cmocka_unit_test(test_segment_roots_set_get_del),
        cmocka_unit_test(test_segment_prefault),
        cmocka_unit_test(test_arena_alloc_via_segment),
        cmocka_unit_test(test_segment_grow_across_processes),
        cmocka_unit_test(test_arena_fragmented_fixed_enomem_growable_ok),
        cmocka_unit_test(test_arena_kill_holder_recovers),
        cmocka_unit_test(test_arena_alloc_forked_child_attaches_first),
        cmocka_unit_test(test_arena_alloc_after_holder_killed_repairs),
        cmocka_unit_test(test_segment_lock_damaged_word_bounded),
        cmocka_unit_test(test_segment_liveness_other_pid_namespace),
        cmocka_unit_test(test_segment_grow_unreserved_never_adopted),
        cmocka_unit_test(test_segment_alloc_huge_does_not_grow),
        cmocka_unit_test(test_segment_memfd_sealed_mode_backend),
        cmocka_unit_test(test_segment_replaced_reported),
        cmocka_unit_test(test_segment_replaced_queue_waits_ereplaced),
        cmocka_unit_test(test_segment_open_while_growing_not_corrupt),
        cmocka_unit_test(test_arena_public_damaged_heap_ecorrupt),
        cmocka_unit_test(test_segment_grow_large_alloc_last_block_used_fits),
        cmocka_unit_test(test_segment_grow_mdict_from_empty_no_enomem),
        cmocka_unit_test(test_segment_open_empty_timeout_zero_enotready),
        cmocka_unit_test(test_segment_destroy_foreign_enotseg),
        cmocka_unit_test(test_segment_create_replace_foreign_enotseg),
        cmocka_unit_test(test_segment_destroy_abandoned_empty_or_zero_ok),
        cmocka_unit_test(test_segment_close_before_queue_handle_safe),
        cmocka_unit_test(test_segment_wait_attached_forever_removed_ereplaced),
        cmocka_unit_test(test_segment_stall_every_grow_step),
        cmocka_unit_test(test_segment_stall_every_grow_step_pinned),
        cmocka_unit_test(test_segment_alloc_dirty_covers_every_written_byte),
        cmocka_unit_test(test_segment_alloc_dirty_block_ending_on_step),
        cmocka_unit_test(test_segment_alloc_dirty_after_holder_killed_growing),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
