/* The calls tools use to look into a segment: shmobj_segment_peek() (a
 * read-only look by name that never attaches, waits or writes),
 * shmobj_segment_procs_get() (the attached handles),
 * shmobj_segment_root_next() (the root directory with each root's kind),
 * shmobj_queue_stats_get() / shmobj_queue_check(), and
 * shmobj_topic_subscribers_get(). */
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "map-layout.h"
#include "format.h"
#include "ring.h"
#include "segment.h"
#include "service-int.h"
#include "shmobj.h"
#include "test-util.h"
#include "topic-int.h"

#define MiB (UINT64_C(1) << 20)
#define WAIT_NS (10000 * TEST_MS)

static shmobj_segment *create_small(const char *name)
{
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.initial_size = 4 * MiB;
    o.max_size = 16 * MiB;
    shmobj_segment *seg = NULL;
    assert_int_equal(shmobj_segment_create(name, &o, &seg), 0);
    return seg;
}

static void drop(shmobj_segment *seg, const char *name)
{
    shmobj_segment_close(seg);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

static int peek(const char *name, shmobj_segment_peek_info *pi)
{
    memset(pi, 0xa5, sizeof *pi);
    pi->struct_size = sizeof *pi;
    return shmobj_segment_peek(name, SHMOBJ_BACKEND_SHM, pi);
}

/* A child that opens the segment, says so through a pipe, and stays
 * attached until the pipe's other end closes. */
struct holder {
    const char *name;
    int ready[2];
    int stop[2];
};

static int holder_main(void *arg)
{
    struct holder *h = arg;
    close(h->ready[0]);
    close(h->stop[1]);
    shmobj_segment *seg;
    if (shmobj_segment_open(h->name, SHMOBJ_BACKEND_SHM, WAIT_NS, &seg) != 0)
        return 1;
    char c = 'r';
    if (write(h->ready[1], &c, 1) != 1)
        return 2;
    (void)read(h->stop[0], &c, 1); /* EOF when the parent lets go */
    shmobj_segment_close(seg);
    return 0;
}

static pid_t holder_start(struct holder *h, const char *name)
{
    h->name = name;
    assert_int_equal(pipe(h->ready), 0);
    assert_int_equal(pipe(h->stop), 0);
    pid_t pid = test_child_start(holder_main, h, 30);
    close(h->ready[1]);
    close(h->stop[0]);
    char c;
    assert_int_equal(read(h->ready[0], &c, 1), 1);
    return pid;
}

static void holder_stop(struct holder *h, pid_t pid)
{
    close(h->stop[1]);
    close(h->ready[0]);
    assert_int_equal(test_child_wait(pid), 0);
}

/* The bytes a peek could change if it wrote: header, process table, root
 * directory and the arena's control block. */
static void snapshot(shmobj_segment *seg, uint8_t *buf, size_t n)
{
    memcpy(buf, ((struct shmobj__space *)seg)->base, n);
}

/* Ready, two handles attached (ours and a child's), the creator's figures,
 * the heap's use; and the segment's bytes are the same after the look. */
static void test_segment_peek_ready_counts_attached_changes_nothing(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "peek");
    shmobj_segment *seg = create_small(name);
    shmobj_ref ref;
    assert_int_equal(shmobj_arena_alloc(seg, 1000, 0, &ref, NULL), 0);
    struct holder h;
    pid_t pid = holder_start(&h, name);
    static uint8_t before[SHMOBJ__SEG_ARENA_OFF + 4096],
        after[SHMOBJ__SEG_ARENA_OFF + 4096];
    snapshot(seg, before, sizeof before);
    shmobj_segment_peek_info pi;
    assert_int_equal(peek(name, &pi), 0);
    snapshot(seg, after, sizeof after);
    assert_memory_equal(before, after, sizeof before);
    assert_int_equal(pi.struct_size, sizeof pi);
    assert_true(pi.flags & SHMOBJ_SEGMENT_PEEK_READY);
    assert_true(pi.flags & SHMOBJ_SEGMENT_PEEK_CREATOR_ALIVE);
    assert_true(pi.flags & SHMOBJ_SEGMENT_PEEK_USED_KNOWN);
    assert_false(pi.flags & SHMOBJ_SEGMENT_PEEK_STALE);
    assert_false(pi.flags & SHMOBJ_SEGMENT_PEEK_ORPHANED);
    assert_int_equal(pi.attached, 2);
    assert_int_equal(pi.creator_pid, (uint32_t)getpid());
    assert_int_equal(pi.size, 4 * MiB);
    assert_int_equal(pi.file_size, 4 * MiB);
    assert_int_equal(pi.max_size, 16 * MiB);
    assert_int_equal(pi.backend, SHMOBJ_BACKEND_SHM);
    assert_int_equal(pi.format_version, SHMOBJ_FORMAT_VERSION);
    assert_true(pi.created_ns > 0);
    shmobj_arena_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_arena_stats_get(seg, &st), 0);
    assert_int_equal(pi.heap_used, st.used_bytes);
    assert_true(pi.heap_used >= 1000);
    holder_stop(&h, pid);
    assert_int_equal(peek(name, &pi), 0);
    assert_int_equal(pi.attached, 1);
    drop(seg, name);
}

/* Every handle closed: ready, orphaned, nobody attached, creator gone. */
static void test_segment_peek_closed_orphaned(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "peek-orphan");
    shmobj_segment_close(create_small(name));
    shmobj_segment_peek_info pi;
    assert_int_equal(peek(name, &pi), 0);
    assert_true(pi.flags & SHMOBJ_SEGMENT_PEEK_READY);
    assert_true(pi.flags & SHMOBJ_SEGMENT_PEEK_ORPHANED);
    assert_false(pi.flags & SHMOBJ_SEGMENT_PEEK_CREATOR_ALIVE);
    assert_int_equal(pi.attached, 0);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

static void test_segment_peek_missing_enotfound(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "peek-missing");
    shmobj_segment_peek_info pi;
    assert_int_equal(peek(name, &pi), SHMOBJ_ENOTFOUND);
    assert_int_equal(peek("", &pi), SHMOBJ_EINVAL);
    assert_int_equal(peek("a/b", &pi), SHMOBJ_EINVAL);
    pi.struct_size = 8;
    assert_int_equal(shmobj_segment_peek(name, SHMOBJ_BACKEND_SHM, &pi),
                     SHMOBJ_EINVAL);
    assert_int_equal(shmobj_segment_peek(name, SHMOBJ_BACKEND_SHM, NULL),
                     SHMOBJ_EINVAL);
}

static void write_shm(const char *name, const void *bytes, size_t n)
{
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    if (n > 0)
        assert_int_equal(write(fd, bytes, n), (ssize_t)n);
    close(fd);
}

/* Another program's file under /dev/shm is not ours; an empty one nobody
 * sets up is not ready; both left as they were. */
static void test_segment_peek_foreign_enotseg_empty_enotready(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "peek-foreign");
    static char junk[8192];
    memset(junk, 'x', sizeof junk);
    write_shm(name, junk, sizeof junk);
    shmobj_segment_peek_info pi;
    assert_int_equal(peek(name, &pi), SHMOBJ_ENOTSEG);
    shm_unlink(name);
    write_shm(name, junk, 100); /* shorter than a header */
    assert_int_equal(peek(name, &pi), SHMOBJ_ENOTSEG);
    shm_unlink(name);
    write_shm(name, NULL, 0);
    assert_int_equal(peek(name, &pi), SHMOBJ_ENOTREADY);
    struct stat st;
    char path[160];
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 0);
    shm_unlink(name);
}

/* A damaged header (its checksum) and another format version. */
static void test_segment_peek_damaged_header_ecorrupt(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "peek-damaged");
    shmobj_segment *seg = create_small(name);
    struct shmobj__seg_header *h = (void *)((struct shmobj__space *)seg)->base;
    h->max_size ^= 4096; /* covered by the checksum */
    shmobj_segment_peek_info pi;
    assert_int_equal(peek(name, &pi), SHMOBJ_ECORRUPT);
    h->max_size ^= 4096;
    assert_int_equal(peek(name, &pi), 0);
    h->format_version++;
    assert_int_equal(peek(name, &pi), SHMOBJ_EVERSION);
    h->format_version--;
    drop(seg, name);
}

static int kill_at_heap_step;
static void kill_hook(int step)
{
    if (step == kill_at_heap_step)
        raise(SIGKILL);
}

static int die_creating(void *arg)
{
    shmobj__seg_create_hook = kill_hook;
    shmobj_segment *seg;
    (void)shmobj_segment_create(arg, NULL, &seg);
    return 1;
}

/* A creator killed before READY: not ready, stale, reported at once. */
static void test_segment_peek_creator_died_stale(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "peek-stale");
    kill_at_heap_step = SHMOBJ__SEG_STEP_HEAP;
    pid_t pid = test_child_start(die_creating, name, 30);
    assert_int_equal(test_child_wait(pid), 128 + SIGKILL);
    shmobj_segment_peek_info pi;
    assert_int_equal(peek(name, &pi), 0);
    assert_false(pi.flags & SHMOBJ_SEGMENT_PEEK_READY);
    assert_true(pi.flags & SHMOBJ_SEGMENT_PEEK_STALE);
    assert_false(pi.flags & SHMOBJ_SEGMENT_PEEK_CREATOR_ALIVE);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* A creator held at one step of set-up: it says so through `held` and
 * waits until `release` closes. */
static int held[2], release_fd[2];
static void hold_hook(int step)
{
    if (step != SHMOBJ__SEG_STEP_HEAP)
        return;
    char c = 'h';
    if (write(held[1], &c, 1) != 1)
        _exit(3);
    (void)read(release_fd[0], &c, 1);
}

static int create_held(void *arg)
{
    close(held[0]);
    close(release_fd[1]);
    shmobj__seg_create_hook = hold_hook;
    shmobj_segment *seg;
    if (shmobj_segment_create(arg, NULL, &seg) != 0)
        return 1;
    shmobj_segment_close(seg);
    return 0;
}

/* A creator still at work: not ready, its creator alive, not stale, and
 * the peek returns at once instead of waiting for it. */
static void test_segment_peek_being_set_up_not_stale(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "peek-setup");
    assert_int_equal(pipe(held), 0);
    assert_int_equal(pipe(release_fd), 0);
    pid_t pid = test_child_start(create_held, name, 30);
    close(held[1]);
    close(release_fd[0]);
    char c;
    assert_int_equal(read(held[0], &c, 1), 1);
    shmobj_segment_peek_info pi;
    assert_int_equal(peek(name, &pi), 0);
    assert_false(pi.flags & SHMOBJ_SEGMENT_PEEK_READY);
    assert_true(pi.flags & SHMOBJ_SEGMENT_PEEK_CREATOR_ALIVE);
    assert_false(pi.flags & SHMOBJ_SEGMENT_PEEK_STALE);
    assert_int_equal(pi.attached, 0);
    close(release_fd[1]);
    close(held[0]);
    assert_int_equal(test_child_wait(pid), 0);
    assert_int_equal(peek(name, &pi), 0);
    assert_true(pi.flags & SHMOBJ_SEGMENT_PEEK_ORPHANED);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

static int peek_as_nobody(void *arg)
{
    struct passwd *pw = getpwnam("nobody");
    if (pw == NULL || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
        return 77;
    shmobj_segment_peek_info pi = {.struct_size = sizeof pi};
    return shmobj_segment_peek(arg, SHMOBJ_BACKEND_SHM, &pi) == SHMOBJ_EACCES
               ? 0
               : 1;
}

/* A segment of mode 0600 is unreadable to another user. */
static void test_segment_peek_other_user_eacces(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    char name[96];
    test_name(name, sizeof name, "peek-perm");
    shmobj_segment *seg = create_small(name);
    pid_t pid = test_child_start(peek_as_nobody, name, 30);
    int rc = test_child_wait(pid);
    drop(seg, name);
    if (rc == 77)
        skip();
    assert_int_equal(rc, 0);
}

/* Our handle (self, creator) and the child's, in slot order; too small a
 * buffer gets the first and the count. */
static void test_segment_procs_get_self_and_child(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "procs");
    shmobj_segment *seg = create_small(name);
    struct holder h;
    pid_t pid = holder_start(&h, name);
    shmobj_segment_proc p[4];
    size_t n = 0;
    assert_int_equal(shmobj_segment_procs_get(seg, p, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_true(p[0].slot < p[1].slot);
    int me = p[0].pid == (uint32_t)getpid() ? 0 : 1;
    assert_int_equal(p[me].pid, (uint32_t)getpid());
    assert_int_equal(p[me].flags,
                     SHMOBJ_SEGMENT_PROC_SELF | SHMOBJ_SEGMENT_PROC_CREATOR);
    assert_int_equal(p[1 - me].pid, (uint32_t)pid);
    assert_int_equal(p[1 - me].flags, 0);
    assert_true(p[1 - me].token != 0 && p[1 - me].token != p[me].token);
    assert_true(p[1 - me].attached_ns >= p[me].attached_ns);
    assert_int_equal(shmobj_segment_procs_get(seg, p, 1, &n), SHMOBJ_ENOBUFS);
    assert_int_equal(n, 2);
    assert_int_equal(shmobj_segment_procs_get(seg, NULL, 0, &n), SHMOBJ_ENOBUFS);
    assert_int_equal(shmobj_segment_procs_get(seg, NULL, 1, &n), SHMOBJ_EINVAL);
    holder_stop(&h, pid);
    assert_int_equal(shmobj_segment_procs_get(seg, p, 4, &n), 0);
    assert_int_equal(n, 1);
    drop(seg, name);
}

static uint64_t first_word(shmobj_segment *seg, shmobj_ref ref)
{
    void *p;
    assert_int_equal(shmobj_arena_ptr(seg, ref, &p, NULL), 0);
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

/* One root of every kind, each named with its kind; the magic each kind
 * was told by is its layer's own constant. */
static void test_segment_root_next_every_kind(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "roots");
    shmobj_segment *seg = create_small(name);
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(seg, "q", 8, 0, &q), 0);
    shmobj_map *m;
    assert_int_equal(shmobj_map_create(seg, "m", &m), 0);
    shmobj_ref obj, raw, gone;
    assert_int_equal(shmobj_obj_put_int(seg, 42, &obj), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "o", obj), 0);
    assert_int_equal(shmobj_arena_alloc(seg, 100, 0, &raw, NULL), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "r", raw), 0);
    assert_int_equal(shmobj_arena_alloc(seg, 100, 0, &gone, NULL), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "s", gone), 0);
    assert_int_equal(shmobj_arena_free(seg, gone), 0);
    shmobj_topic *t;
    assert_int_equal(shmobj_topic_create(seg, "t", NULL, &t), 0);
    shmobj_service *svc;
    assert_int_equal(shmobj_service_create(seg, "v", 4, 0, &svc), 0);
    struct {
        const char *name;
        unsigned kind;
        int seen;
    } want[] = {{"q", SHMOBJ_ROOT_QUEUE, 0}, {"m", SHMOBJ_ROOT_MAP, 0},
                {"o", SHMOBJ_ROOT_OBJECT, 0}, {"r", SHMOBJ_ROOT_RAW, 0},
                {"s", SHMOBJ_ROOT_STALE, 0}, {"t", SHMOBJ_ROOT_TOPIC, 0},
                {"v", SHMOBJ_ROOT_SERVICE, 0}, {"v/calls", SHMOBJ_ROOT_QUEUE, 0}};
    const unsigned nwant = sizeof want / sizeof want[0];
    uint32_t cur = 0;
    shmobj_root_info ri = {.struct_size = sizeof ri};
    int rc, n = 0;
    while ((rc = shmobj_segment_root_next(seg, &cur, &ri)) == 0) {
        n++;
        for (unsigned i = 0; i < nwant; i++) {
            if (strcmp(ri.name, want[i].name) != 0)
                continue;
            want[i].seen++;
            assert_int_equal(ri.kind, want[i].kind);
            shmobj_ref got;
            assert_int_equal(shmobj_segment_root_get(seg, ri.name, &got), 0);
            assert_int_equal(ri.ref, got);
            if (ri.kind == SHMOBJ_ROOT_STALE)
                assert_int_equal(ri.bytes, 0);
            else
                assert_true(ri.bytes >= 16);
            if (ri.kind == SHMOBJ_ROOT_QUEUE)
                assert_int_equal((uint32_t)first_word(seg, ri.ref),
                                 SHMOBJ__RING_MAGIC);
            if (ri.kind == SHMOBJ_ROOT_MAP)
                assert_int_equal(first_word(seg, ri.ref), SHMOBJ__MAP_MAGIC);
            if (ri.kind == SHMOBJ_ROOT_OBJECT)
                assert_int_equal((uint32_t)first_word(seg, ri.ref),
                                 SHMOBJ__TREE_MAGIC);
            if (ri.kind == SHMOBJ_ROOT_TOPIC)
                assert_int_equal((uint32_t)first_word(seg, ri.ref),
                                 SHMOBJ__TOPIC_MAGIC);
            if (ri.kind == SHMOBJ_ROOT_SERVICE)
                assert_int_equal(first_word(seg, ri.ref), SHMOBJ__SVC_MAGIC);
        }
    }
    assert_int_equal(rc, SHMOBJ_ENOTFOUND);
    assert_int_equal(n, (int)nwant);
    for (unsigned i = 0; i < nwant; i++)
        assert_int_equal(want[i].seen, 1);
    /* past the end stays at the end */
    assert_int_equal(shmobj_segment_root_next(seg, &cur, &ri), SHMOBJ_ENOTFOUND);
    ri.struct_size = 4;
    cur = 0;
    assert_int_equal(shmobj_segment_root_next(seg, &cur, &ri), SHMOBJ_EINVAL);
    shmobj_queue_close(q);
    shmobj_map_close(m);
    shmobj_topic_close(t);
    shmobj_service_close(svc);
    drop(seg, name);
}

/* A name that fills its field without a NUL: that entry is ECORRUPT and
 * the walk goes on past it to the next root. */
static void test_segment_root_next_damaged_name_moves_on(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "roots-damaged");
    shmobj_segment *seg = create_small(name);
    shmobj_ref a, b;
    assert_int_equal(shmobj_obj_put_int(seg, 1, &a), 0);
    assert_int_equal(shmobj_obj_put_int(seg, 2, &b), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "first", a), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "second", b), 0);
    struct shmobj__seg_root *r =
        (void *)(((struct shmobj__space *)seg)->base + SHMOBJ__SEG_ROOTS_OFF);
    assert_string_equal(r[0].name, "first");
    memset(r[0].name, 'z', sizeof r[0].name);
    uint32_t cur = 0;
    shmobj_root_info ri = {.struct_size = sizeof ri};
    assert_int_equal(shmobj_segment_root_next(seg, &cur, &ri), SHMOBJ_ECORRUPT);
    assert_int_equal(cur, 1);
    assert_int_equal(shmobj_segment_root_next(seg, &cur, &ri), 0);
    assert_string_equal(ri.name, "second");
    assert_int_equal(ri.kind, SHMOBJ_ROOT_OBJECT);
    assert_int_equal(shmobj_segment_root_next(seg, &cur, &ri), SHMOBJ_ENOTFOUND);
    drop(seg, name);
}

/* Depth, capacity and the totals after 5 puts and 2 takes. */
static void test_queue_stats_counts_puts_takes(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "qstats");
    shmobj_segment *seg = create_small(name);
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(seg, "q", 16, 0, &q), 0);
    shmobj_ref ref;
    assert_int_equal(shmobj_obj_put_int(seg, 7, &ref), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(shmobj_queue_put(q, ref), 0);
    shmobj_ref got;
    for (int i = 0; i < 2; i++)
        assert_int_equal(shmobj_queue_take(q, &got), 0);
    shmobj_queue_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_queue_stats_get(q, &st), 0);
    assert_int_equal(st.capacity, 16);
    assert_int_equal(st.depth, 3);
    assert_int_equal(st.puts, 5);
    assert_int_equal(st.takes, 2);
    assert_int_equal(st.skipped, 0);
    assert_int_equal(st.rescued, 0);
    assert_int_equal(st.consumers_waiting, 0);
    assert_int_equal(st.listeners, 0);
    int fd;
    assert_int_equal(shmobj_queue_notify_fd(q, &fd), 0);
    assert_int_equal(shmobj_queue_stats_get(q, &st), 0);
    assert_int_equal(st.listeners, 1);
    st.struct_size = 8;
    assert_int_equal(shmobj_queue_stats_get(q, &st), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_queue_check(q, NULL), 0);
    shmobj_queue_close(q);
    drop(seg, name);
}

/* A slot holding a marker of a position it cannot hold, and a message of
 * reference 0: ECORRUPT at that slot's offset; repaired, consistent. */
static void test_queue_check_damaged_slot_offset(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "qcheck");
    shmobj_segment *seg = create_small(name);
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(seg, "q", 8, 0, &q), 0);
    assert_int_equal(shmobj_queue_check(q, NULL), 0);
    shmobj_ref qref;
    assert_int_equal(shmobj_segment_root_get(seg, "q", &qref), 0);
    uint8_t *base = ((struct shmobj__space *)seg)->base;
    struct shmobj__ring_hdr *h = (void *)(base + shmobj__ref_off(qref));
    struct shmobj__ring_slot *slots = (void *)(h + 1);
    uint64_t want = shmobj__ref_off(qref) + sizeof *h + 3 * 16;
    uint64_t saved = slots[3].word;
    slots[3].word = (5u << 2) | 1u; /* EMPTY(5) in slot 3 */
    uint64_t bad = 0;
    assert_int_equal(shmobj_queue_check(q, &bad), SHMOBJ_ECORRUPT);
    assert_int_equal(bad, want);
    slots[3].word = 2; /* a message of reference 0 */
    bad = 0;
    assert_int_equal(shmobj_queue_check(q, &bad), SHMOBJ_ECORRUPT);
    assert_int_equal(bad, want);
    slots[3].word = saved;
    assert_int_equal(shmobj_queue_check(q, NULL), 0);
    h->deq_pos = 100; /* consumers past the producers */
    bad = 0;
    assert_int_equal(shmobj_queue_check(q, &bad), SHMOBJ_ECORRUPT);
    assert_int_equal(bad, shmobj__ref_off(qref) + offsetof(struct shmobj__ring_hdr, deq_pos));
    h->deq_pos = 0;
    assert_int_equal(shmobj_queue_check(q, NULL), 0);
    shmobj_queue_close(q);
    drop(seg, name);
}

struct churn {
    shmobj_queue *q;
    shmobj_ref ref;
    int rounds;
};

static int churn_main(void *arg)
{
    struct churn *c = arg;
    for (int i = 0; i < c->rounds; i++) {
        shmobj_ref got;
        if (shmobj_queue_put(c->q, c->ref) != 0 ||
            shmobj_queue_take(c->q, &got) != 0)
            return 1;
    }
    return 0;
}

/* Two threads put and take while the check runs again and again: a queue
 * in use never reads as damaged. */
static void test_queue_check_threads_live_queue_consistent(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "qcheck-live");
    shmobj_segment *seg = create_small(name);
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(seg, "q", 4, 0, &q), 0);
    struct churn c = {.q = q, .rounds = 100000};
    assert_int_equal(shmobj_obj_put_int(seg, 1, &c.ref), 0);
    struct test_thread t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(test_thread_start(&t[i], churn_main, &c), 0);
    int checks = 0, bad = 0;
    shmobj_queue_stats st = {.struct_size = sizeof st};
    do {
        bad += shmobj_queue_check(q, NULL) != 0;
        checks++;
        assert_int_equal(shmobj_queue_stats_get(q, &st), 0);
        assert_true(st.depth <= st.capacity);
    } while (st.takes < 2 * 100000 && checks < 10000000);
    for (int i = 0; i < 2; i++)
        assert_int_equal(test_thread_wait(&t[i]), 0);
    assert_int_equal(bad, 0);
    assert_int_equal(shmobj_queue_stats_get(q, &st), 0);
    assert_int_equal(st.puts, 200000);
    assert_int_equal(st.takes, 200000);
    shmobj_queue_close(q);
    drop(seg, name);
}

/* Random bytes written over the ring header, slots, claims and retire
 * FIFO: the check and the figures answer with their documented codes and
 * never read outside the block (the sanitizer build would tell). */
static void test_queue_check_random_damage_documented_codes(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "qcheck-fuzz");
    shmobj_segment *seg = create_small(name);
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(seg, "q", 8, 0, &q), 0);
    shmobj_ref qref;
    assert_int_equal(shmobj_segment_root_get(seg, "q", &qref), 0);
    uint8_t *blk;
    size_t usable;
    assert_int_equal(shmobj_arena_ptr(seg, qref, (void **)&blk, &usable), 0);
    static uint8_t saved[1 << 16];
    assert_true(usable <= sizeof saved);
    memcpy(saved, blk, usable);
    uint64_t rng = 0x1234567;
    int corrupt = 0;
    for (int round = 0; round < 3000; round++) {
        unsigned n = 1 + (unsigned)(test_xorshift(&rng) % 4);
        for (unsigned k = 0; k < n; k++) {
            size_t at = (size_t)(test_xorshift(&rng) % usable);
            blk[at] = (uint8_t)test_xorshift(&rng);
        }
        uint64_t bad = UINT64_MAX;
        int rc = shmobj_queue_check(q, &bad);
        assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_ESTALE);
        if (rc == SHMOBJ_ECORRUPT) {
            corrupt++;
            assert_true(bad >= shmobj__ref_off(qref) &&
                        bad < shmobj__ref_off(qref) + usable);
        }
        shmobj_queue_stats st = {.struct_size = sizeof st};
        rc = shmobj_queue_stats_get(q, &st);
        assert_true(rc == 0 || rc == SHMOBJ_ESTALE);
        if (rc == 0)
            assert_true(st.depth <= st.capacity);
        memcpy(blk, saved, usable);
    }
    assert_true(corrupt > 0);
    assert_int_equal(shmobj_queue_check(q, NULL), 0);
    shmobj_queue_close(q);
    drop(seg, name);
}

/* Random bytes over the header page, process table and root directory of
 * a copy of a segment: a peek answers with a documented code, and
 * changes none of the bytes it looked at. */
static void test_segment_peek_random_damage_documented_codes(void **state)
{
    (void)state;
    char name[96], copy[112];
    test_name(name, sizeof name, "peek-fuzz");
    snprintf(copy, sizeof copy, "%s-copy", name);
    shmobj_segment *seg = create_small(name);
    shmobj_ref ref;
    assert_int_equal(shmobj_obj_put_int(seg, 5, &ref), 0);
    assert_int_equal(shmobj_segment_root_set(seg, "five", ref), 0);
    shmobj_segment_close(seg);
    char path[160];
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    int src = open(path, O_RDONLY);
    assert_true(src >= 0);
    static uint8_t img[SHMOBJ__SEG_ARENA_OFF + 16384];
    assert_int_equal(read(src, img, sizeof img), (ssize_t)sizeof img);
    close(src);
    int fd = shm_open(copy, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 4 * MiB), 0);
    uint8_t *m = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(m != MAP_FAILED);
    static uint8_t before[sizeof img];
    uint64_t rng = 0x9e3779b9;
    for (int round = 0; round < 2000; round++) {
        memcpy(m, img, sizeof img);
        unsigned n = 1 + (unsigned)(test_xorshift(&rng) % 3);
        for (unsigned k = 0; k < n; k++) {
            /* mostly the header's first 256 bytes, else anywhere up to the
             * heap's first blocks */
            uint64_t r = test_xorshift(&rng);
            size_t at = (r & 1) ? (size_t)(r >> 8) % 256
                                : (size_t)(r >> 8) % sizeof img;
            m[at] = (uint8_t)test_xorshift(&rng);
        }
        memcpy(before, m, sizeof before);
        shmobj_segment_peek_info pi;
        int rc = peek(copy, &pi);
        assert_true(rc == 0 || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_EVERSION ||
                    rc == SHMOBJ_ELAYOUT || rc == SHMOBJ_ENOTSEG ||
                    rc == SHMOBJ_ENOTREADY);
        assert_memory_equal(before, m, sizeof before);
    }
    munmap(m, 4 * MiB);
    close(fd);
    shm_unlink(copy);
    assert_int_equal(shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM), 0);
}

/* A child asleep in a blocking take or put on queue `q` of segment `name`
 * until a message (or room) comes or it is killed. */
struct waiter {
    const char *name;
    const char *q;
    int put;
};

static int waiter_main(void *arg)
{
    struct waiter *w = arg;
    shmobj_segment *seg;
    shmobj_queue *q;
    if (shmobj_segment_open(w->name, SHMOBJ_BACKEND_SHM, WAIT_NS, &seg) != 0 ||
        shmobj_queue_open(seg, w->q, &q) != 0)
        return 1;
    shmobj_ref ref = 0;
    int rc = w->put ? shmobj_obj_put_int(seg, 1, &ref) : 0;
    if (rc == 0)
        rc = w->put ? shmobj_queue_put(q, ref) : shmobj_queue_take(q, &ref);
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
    return rc == 0 ? 0 : 2;
}

/* Until the queue's figures count `cons` consumers and `prod` producers
 * waiting (10 s at most). */
static void waiting_reach(shmobj_queue *q, uint32_t cons, uint32_t prod)
{
    shmobj_queue_stats st = {.struct_size = sizeof st};
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(shmobj_queue_stats_get(q, &st), 0);
        if (st.consumers_waiting == cons && st.producers_waiting == prod)
            return;
        test_sleep_ms(10);
    }
    fail_msg("waiting %u consumers, %u producers; expected %u and %u",
             st.consumers_waiting, st.producers_waiting, cons, prod);
}

/* A process killed by SIGKILL while asleep in a take or a put is not
 * counted as waiting, while a live one asleep beside it still is; and
 * the figures repaired nothing (a later wake-up still does). */
static void test_queue_stats_killed_waiter_not_waiting(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "qstats-killed");
    shmobj_segment *seg = create_small(name);
    shmobj_queue *empty, *full;
    assert_int_equal(shmobj_queue_create(seg, "empty", 4, 0, &empty), 0);
    assert_int_equal(shmobj_queue_create(seg, "full", 2, 0, &full), 0);
    shmobj_ref ref;
    assert_int_equal(shmobj_obj_put_int(seg, 7, &ref), 0);
    assert_int_equal(shmobj_queue_put(full, ref), 0);
    assert_int_equal(shmobj_queue_put(full, ref), 0);
    struct waiter taker = {name, "empty", 0}, putter = {name, "full", 1};
    pid_t doomed_taker = test_child_start(waiter_main, &taker, 30);
    pid_t doomed_putter = test_child_start(waiter_main, &putter, 30);
    waiting_reach(empty, 1, 0);
    waiting_reach(full, 0, 1);
    pid_t live_taker = test_child_start(waiter_main, &taker, 30);
    waiting_reach(empty, 2, 0);
    assert_int_equal(kill(doomed_taker, SIGKILL), 0);
    assert_int_equal(kill(doomed_putter, SIGKILL), 0);
    assert_int_equal(test_child_wait(doomed_taker), 128 + SIGKILL);
    assert_int_equal(test_child_wait(doomed_putter), 128 + SIGKILL);
    /* the totals in the ring still hold the dead; the figures do not */
    shmobj_ref ring;
    assert_int_equal(shmobj_segment_root_get(seg, "empty", &ring), 0);
    struct shmobj__ring_hdr *h;
    assert_int_equal(shmobj_arena_ptr(seg, ring, (void **)&h, NULL), 0);
    assert_int_equal(atomic_load(&h->cons_waiters), 2);
    waiting_reach(empty, 1, 0);
    waiting_reach(full, 0, 0);
    assert_int_equal(atomic_load(&h->cons_waiters), 2);
    /* the live one is woken by a message and leaves */
    assert_int_equal(shmobj_queue_put(empty, ref), 0);
    assert_int_equal(test_child_wait(live_taker), 0);
    waiting_reach(empty, 0, 0);
    shmobj_queue_close(empty);
    shmobj_queue_close(full);
    drop(seg, name);
}

/* A child that joins topic "t" of segment `name`, says so through a pipe
 * and sleeps in a take until it is killed. */
struct topic_joiner {
    const char *name;
    int ready[2];
};

static int topic_joiner_main(void *arg)
{
    struct topic_joiner *j = arg;
    close(j->ready[0]);
    shmobj_segment *seg;
    shmobj_topic *t;
    shmobj_topic_sub *sub;
    if (shmobj_segment_open(j->name, SHMOBJ_BACKEND_SHM, WAIT_NS, &seg) != 0 ||
        shmobj_topic_open(seg, "t", &t) != 0 || shmobj_topic_subscribe(t, &sub) != 0)
        return 1;
    char c = 'r';
    if (write(j->ready[1], &c, 1) != 1)
        return 2;
    shmobj_topic_msg msg;
    (void)shmobj_topic_take(sub, &msg, 60 * INT64_C(1000000000));
    return 3;
}

/* Each subscriber's lag, held messages and liveness: ours behind by 6
 * with one message held, a joiner killed asleep in a take listed as dead
 * (never as a live subscriber) until a repair frees its record. */
static void test_topic_subscribers_get_lag_and_dead(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "tsubs");
    shmobj_segment *seg = create_small(name);
    shmobj_topic *t;
    assert_int_equal(shmobj_topic_create(seg, "t", NULL, &t), 0);
    shmobj_topic_sub *sub;
    assert_int_equal(shmobj_topic_subscribe(t, &sub), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(shmobj_topic_publish(t, "m", 1, 0), 0);
    shmobj_topic_msg m1, m2;
    assert_int_equal(shmobj_topic_try_take(sub, &m1), 0);
    assert_int_equal(shmobj_topic_try_take(sub, &m2), 0);
    assert_int_equal(shmobj_topic_release(sub, &m1), 0);
    struct topic_joiner j = {.name = name};
    assert_int_equal(pipe(j.ready), 0);
    pid_t child = test_child_start(topic_joiner_main, &j, 30);
    close(j.ready[1]);
    char c;
    assert_int_equal(read(j.ready[0], &c, 1), 1);
    close(j.ready[0]);
    test_sleep_ms(20); /* most likely asleep in its take by now */
    assert_int_equal(kill(child, SIGKILL), 0);
    assert_int_equal(test_child_wait(child), 128 + SIGKILL);
    for (int i = 0; i < 3; i++)
        assert_int_equal(shmobj_topic_publish(t, "m", 1, 0), 0);
    shmobj_topic_sub_info si[4];
    size_t n = 99;
    memset(si, 0xa5, sizeof si);
    assert_int_equal(shmobj_topic_subscribers_get(t, si, 4, &n), 0);
    assert_int_equal(n, 2);
    shmobj_segment_proc self[4];
    size_t np;
    assert_int_equal(shmobj_segment_procs_get(seg, self, 4, &np), 0);
    assert_int_equal(np, 1);
    unsigned mine = si[0].token == self[0].token ? 0 : 1;
    assert_int_equal(si[mine].token, self[0].token);
    assert_int_equal(si[mine].flags, 0);
    assert_int_equal(si[mine].next, 2);
    assert_int_equal(si[mine].lag, 6);
    assert_int_equal(si[mine].held, 1);
    assert_int_equal(si[mine].missed, 0);
    assert_int_equal(si[mine].reserved, 0);
    assert_int_equal(si[1 - mine].flags & SHMOBJ_TOPIC_SUB_DEAD,
                     SHMOBJ_TOPIC_SUB_DEAD);
    assert_int_equal(si[1 - mine].next, 5);
    assert_int_equal(si[1 - mine].lag, 3);
    assert_int_equal(si[1 - mine].held, 0);
    assert_true(si[0].index < si[1].index);
    /* too small an array: the first, and how many there are */
    assert_int_equal(shmobj_topic_subscribers_get(t, si, 1, &n), SHMOBJ_ENOBUFS);
    assert_int_equal(n, 2);
    assert_int_equal(shmobj_topic_subscribers_get(t, NULL, 0, &n), SHMOBJ_ENOBUFS);
    assert_int_equal(shmobj_topic_subscribers_get(t, NULL, 1, &n), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_topic_subscribers_get(t, si, 4, NULL), SHMOBJ_EINVAL);
    assert_int_equal(shmobj_topic_subscribers_get(NULL, si, 4, &n), SHMOBJ_EINVAL);
    /* the dead record goes with a repair */
    unsigned freed = 0;
    assert_int_equal(shmobj_topic_repair(t, &freed), 0);
    assert_int_equal(freed, 1);
    assert_int_equal(shmobj_topic_subscribers_get(t, si, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(si[0].token, self[0].token);
    assert_int_equal(shmobj_topic_release(sub, &m2), 0);
    shmobj_topic_unsubscribe(sub);
    assert_int_equal(shmobj_topic_subscribers_get(t, si, 4, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(shmobj_topic_destroy(seg, "t"), 0);
    assert_int_equal(shmobj_topic_subscribers_get(t, si, 4, &n), SHMOBJ_ESTALE);
    shmobj_topic_close(t);
    drop(seg, name);
}

/* A destroyed queue: stats and check say ESTALE. */
static void test_queue_stats_destroyed_estale(void **state)
{
    (void)state;
    char name[96];
    test_name(name, sizeof name, "qstats-stale");
    shmobj_segment *seg = create_small(name);
    shmobj_queue *q;
    assert_int_equal(shmobj_queue_create(seg, "q", 8, 0, &q), 0);
    assert_int_equal(shmobj_queue_destroy(seg, "q"), 0);
    shmobj_queue_stats st = {.struct_size = sizeof st};
    assert_int_equal(shmobj_queue_stats_get(q, &st), SHMOBJ_ESTALE);
    assert_int_equal(shmobj_queue_check(q, NULL), SHMOBJ_ESTALE);
    shmobj_queue_close(q);
    drop(seg, name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segment_peek_ready_counts_attached_changes_nothing),
        cmocka_unit_test(test_segment_peek_closed_orphaned),
        cmocka_unit_test(test_segment_peek_missing_enotfound),
        cmocka_unit_test(test_segment_peek_foreign_enotseg_empty_enotready),
        cmocka_unit_test(test_segment_peek_damaged_header_ecorrupt),
        cmocka_unit_test(test_segment_peek_creator_died_stale),
        cmocka_unit_test(test_segment_peek_being_set_up_not_stale),
        cmocka_unit_test(test_segment_peek_other_user_eacces),
        cmocka_unit_test(test_segment_procs_get_self_and_child),
        cmocka_unit_test(test_segment_root_next_every_kind),
        cmocka_unit_test(test_segment_root_next_damaged_name_moves_on),
        cmocka_unit_test(test_queue_stats_counts_puts_takes),
        cmocka_unit_test(test_queue_check_damaged_slot_offset),
        cmocka_unit_test(test_queue_check_threads_live_queue_consistent),
        cmocka_unit_test(test_queue_stats_destroyed_estale),
        cmocka_unit_test(test_queue_stats_killed_waiter_not_waiting),
        cmocka_unit_test(test_topic_subscribers_get_lag_and_dead),
        cmocka_unit_test(test_queue_check_random_damage_documented_codes),
        cmocka_unit_test(test_segment_peek_random_damage_documented_codes),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
