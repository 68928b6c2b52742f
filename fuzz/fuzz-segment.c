/* Fuzz target for the segment's readers of untrusted bytes: the header
 * (magic, state, format fields, checksum, size, the lock word), the
 * process table and the root directory, read by open, info, the attach
 * count, the roots, the arena and the opens of the objects roots name.
 *
 * A small memfd segment is created with a map, a queue and a raw block
 * published as roots; a second handle is opened on it and the creating
 * handle closed, so that (1) nobody is setting the segment up and an open
 * with SHMOBJ_FOREVER must answer at once whatever the header says, and
 * (2) the surviving handle is the only live attachment. Its bytes are
 * saved. Each input is a list of edits (fuzz-edits.h) to the header page's
 * 256 bytes, the process table and the root directory, with small regions
 * over the fields most worth hitting (state, the lock word, this handle's
 * slot, the roots in use). Then every reader runs; the saved bytes are put
 * back and the segment must work as before.
 *
 * Properties (abort on violation): nothing crashes or reads outside the
 * mapping; every call returns 0 or a code its documentation lists; after
 * the restore, roots, opens and the heap check are as at the start.
 *
 * The lock word may hold any value except one that names a live handle of
 * this process (keep_lock_off_live()): such a word is indistinguishable
 * from a live holder, and a call without a timeout rightly waits its 10 s
 * bound (SHMOBJ__OS_LOCK_DEFAULT_NS) and returns SHMOBJ_EBUSY, far too
 * long per input. Every other word is free, dead (taken over, heap
 * repaired) or impossible (SHMOBJ_ECORRUPT), and answered at once.
 *
 * Built with libFuzzer (-fsanitize=fuzzer) and, with -DFUZZ_STANDALONE, as
 * a plain program (fuzz-edits.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "segment.h"
#include "shmobj.h"
#include "space.h"

#define FUZZ_NAME "fuzz-segment"
#define FUZZ_CHECK_RESTORED 1
#include "fuzz-edits.h"

#define MS INT64_C(1000000)

static shmobj_segment *seg; /* the only live handle */
static int seg_fd;          /* our own descriptor of the memfd */
static shmobj_ref ref_m, ref_q, ref_r;

static struct shmobj__seg_header *hdr(void)
{
    return (struct shmobj__seg_header *)seg->space.base;
}

static struct shmobj__seg_proc *procs(void)
{
    return (struct shmobj__seg_proc *)(seg->space.base + SHMOBJ__SEG_PROCS_OFF);
}

static struct shmobj__seg_root *roots(void)
{
    return (struct shmobj__seg_root *)(seg->space.base + SHMOBJ__SEG_ROOTS_OFF);
}

/* Would a locker see the owner of word `w` as the live handle `h`? Yes
 * when it is h's token, or names h's slot with the token the table holds
 * there (then another handle's probe finds h's OFD lock held). */
static bool names_live(uint32_t w, const shmobj_segment *h)
{
    uint32_t owner = w & UINT32_C(0x7fffffff);
    if (owner == 0)
        return false;
    if (owner == atomic_load(&h->token))
        return true;
    uint32_t slot = owner & (SHMOBJ__SEG_PROCS - 1);
    return slot == h->proc_slot &&
           atomic_load(&procs()[slot].token) == owner;
}

/* Keep the lock word off every live handle (see the opening comment). */
static void keep_lock_off_live(const shmobj_segment *other)
{
    _Atomic uint32_t *w = &hdr()->lock.word;
    uint32_t v = atomic_load(w);
    if (names_live(v, seg) || (other != NULL && names_live(v, other)))
        atomic_store(w, 0);
}

static void fuzz_setup(void)
{
    shmobj_segment *creator;
    shmobj_segment_options o;
    shmobj_segment_options_init(&o);
    o.backend = SHMOBJ_BACKEND_MEMFD;
    o.initial_size = 1u << 20;
    o.max_size = 1u << 20;
    shmobj_map *m = NULL;
    shmobj_queue *q = NULL;
    int fd;
    if (shmobj_segment_create(FUZZ_NAME, &o, &creator) != 0 ||
        shmobj_map_create(creator, "m", &m) != 0 ||
        shmobj_queue_create(creator, "q", 8, 0, &q) != 0 ||
        shmobj_arena_alloc(creator, 64, 0, &ref_r, NULL) != 0 ||
        shmobj_segment_root_set(creator, "r", ref_r) != 0 ||
        shmobj_segment_fd(creator, &fd) != 0 || (seg_fd = dup(fd)) < 0)
        fuzz_die("set-up failed");
    shmobj_map_close(m);
    shmobj_queue_close(q);
    if (shmobj_segment_open_fd(seg_fd, 100 * MS, &seg) != 0)
        fuzz_die("second handle failed");
    shmobj_segment_close(creator);
    if (shmobj_segment_root_get(seg, "m", &ref_m) != 0 ||
        shmobj_segment_root_get(seg, "q", &ref_q) != 0)
        fuzz_die("roots missing");
    fuzz_seg = seg;
    uint8_t *b = seg->space.base;
    fuzz_region_add(b, sizeof(struct shmobj__seg_header));
    fuzz_region_add(b + offsetof(struct shmobj__seg_header, state), 4);
    fuzz_region_add(b + offsetof(struct shmobj__seg_header, lock), 8);
    fuzz_region_add(b + offsetof(struct shmobj__seg_header, size), 16);
    fuzz_region_add(b + SHMOBJ__SEG_PROCS_OFF,
                    SHMOBJ__SEG_PROCS * sizeof(struct shmobj__seg_proc));
    fuzz_region_add(&procs()[seg->proc_slot], 3 * sizeof(struct shmobj__seg_proc));
    fuzz_region_add(b + SHMOBJ__SEG_ROOTS_OFF,
                    SHMOBJ__SEG_ROOTS * sizeof(struct shmobj__seg_root));
    fuzz_region_add(b + SHMOBJ__SEG_ROOTS_OFF, 4 * sizeof(struct shmobj__seg_root));
    fuzz_save();
}

/* fuzz_expect() with the code seen, for the report. */
static void expect_rc(bool ok, const char *what, int rc)
{
    if (!ok)
        fprintf(stderr, "%s: %s returned %d (%s)\n", FUZZ_NAME, what, rc,
                shmobj_strerror(rc));
    fuzz_expect(ok, what);
}

static bool lock_status_ok(int rc)
{
    return rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_EBUSY;
}

static bool open_status_ok(int rc, bool forever)
{
    return rc == 0 || (!forever && rc == SHMOBJ_ETIMEDOUT) ||
           rc == SHMOBJ_ENOTREADY || rc == SHMOBJ_ENOTSEG ||
           rc == SHMOBJ_EVERSION || rc == SHMOBJ_ELAYOUT ||
           rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_EFULL ||
           rc == SHMOBJ_ENOMEM || rc == SHMOBJ_ESYS;
}

/* The readers a handle offers without the segment lock. */
static void unlocked_readers(shmobj_segment *h)
{
    shmobj_segment_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    fuzz_expect(shmobj_segment_info_get(h, &info) == 0, "info_get status");
    fuzz_expect(shmobj_segment_wait_attached(h, 0, 0) == 0, "wait_attached(0)");
    int rc = shmobj_segment_wait_attached(h, 1, 0);
    expect_rc(rc == 0 || rc == SHMOBJ_ETIMEDOUT || rc == SHMOBJ_ECORRUPT,
                "wait_attached(1) status", rc);
}

/* Open the objects a root names (as what it should be, and as the other). */
static void open_objects(const char *name)
{
    shmobj_map *m;
    int rc = shmobj_map_open(seg, name, &m);
    expect_rc(rc == 0 || rc == SHMOBJ_EINVAL || rc == SHMOBJ_ENOTFOUND ||
                    rc == SHMOBJ_ETYPE || rc == SHMOBJ_ESTALE ||
                    rc == SHMOBJ_EVERSION || rc == SHMOBJ_ECORRUPT ||
                    rc == SHMOBJ_EFULL || rc == SHMOBJ_ENOMEM ||
                    rc == SHMOBJ_ESYS,
                "map_open status", rc);
    if (rc == 0)
        shmobj_map_close(m);
    shmobj_queue *q;
    rc = shmobj_queue_open(seg, name, &q);
    expect_rc(rc == 0 || rc == SHMOBJ_EINVAL || rc == SHMOBJ_ENOTFOUND ||
                    rc == SHMOBJ_ETYPE || rc == SHMOBJ_ECORRUPT ||
                    rc == SHMOBJ_EVERSION || rc == SHMOBJ_ESTALE ||
                    rc == SHMOBJ_ENOMEM,
                "queue_open status", rc);
    if (rc == 0) {
        uint64_t n;
        (void)shmobj_queue_count(q, &n);
        shmobj_queue_close(q);
    }
}

static void fuzz_exercise(void)
{
    keep_lock_off_live(NULL);
    unlocked_readers(seg);

    /* A second handle while this one lives: a finite timeout (the state
     * word may say INIT, and this handle is no creator, so the answer is
     * immediate anyway). */
    shmobj_segment *h2;
    int rc = shmobj_segment_open_fd(seg_fd, 1 * MS, &h2);
    expect_rc(open_status_ok(rc, false),
                "open_fd status", rc);
    if (rc == 0) {
        keep_lock_off_live(h2);
        unlocked_readers(h2);
        shmobj_ref r;
        rc = shmobj_segment_root_get(h2, "m", &r);
        expect_rc(rc == 0 || rc == SHMOBJ_ENOTFOUND || lock_status_ok(rc),
                "root_get (second handle) status", rc);
        shmobj_segment_close(h2);
    }
    /* No creator is attached: SHMOBJ_FOREVER must answer at once. */
    rc = shmobj_segment_open_fd(seg_fd, SHMOBJ_FOREVER, &h2);
    expect_rc(open_status_ok(rc, true),
                "open_fd(FOREVER) status", rc);
    if (rc == 0)
        shmobj_segment_close(h2);
    keep_lock_off_live(NULL);

    /* The roots: the three published names and up to 8 others the
     * damaged directory holds. */
    const char *names[3 + 8] = {"m", "q", "r"};
    char found[8][SHMOBJ__SEG_ROOT_NAME];
    unsigned n = 3;
    for (unsigned i = 0; i < SHMOBJ__SEG_ROOTS && n < 11; i++) {
        const struct shmobj__seg_root *e = &roots()[i];
        size_t len = strnlen(e->name, SHMOBJ__SEG_ROOT_NAME);
        if (e->ref == 0 || len == 0 || len == SHMOBJ__SEG_ROOT_NAME)
            continue;
        if (len == 1 && (e->name[0] == 'm' || e->name[0] == 'q' || e->name[0] == 'r'))
            continue;
        memcpy(found[n - 3], e->name, len + 1);
        names[n] = found[n - 3];
        n++;
    }
    for (unsigned i = 0; i < n; i++) {
        shmobj_ref r;
        rc = shmobj_segment_root_get(seg, names[i], &r);
        expect_rc(rc == 0 || rc == SHMOBJ_ENOTFOUND || lock_status_ok(rc),
                "root_get status", rc);
        if (rc == 0)
            open_objects(names[i]);
    }
    rc = shmobj_segment_root_set(seg, "fz", ref_r);
    expect_rc(rc == 0 || rc == SHMOBJ_ESTALE || rc == SHMOBJ_EFULL ||
                    lock_status_ok(rc),
                "root_set status", rc);
    rc = shmobj_segment_root_add(seg, "fz", ref_r);
    expect_rc(rc == SHMOBJ_EEXIST || rc == 0 || rc == SHMOBJ_ESTALE ||
                    rc == SHMOBJ_EFULL || lock_status_ok(rc),
                "root_add status", rc);
    /* root_del gives SHMOBJ_ECORRUPT for an impossible lock word, as its
     * documentation says (tests/test-fuzz-regress.c holds the finding). */
    rc = shmobj_segment_root_del(seg, "fz");
    expect_rc(rc == 0 || rc == SHMOBJ_ENOTFOUND || lock_status_ok(rc),
                "root_del status", rc);
    rc = shmobj_segment_root_del(seg, "q");
    expect_rc(rc == 0 || rc == SHMOBJ_ENOTFOUND || lock_status_ok(rc),
                "root_del status", rc);

    /* The arena, whose lock and published size are in the header. */
    shmobj_ref a;
    void *p;
    rc = shmobj_arena_alloc(seg, 100, 0, &a, &p);
    expect_rc(rc == 0 || rc == SHMOBJ_ENOMEM || lock_status_ok(rc),
                "arena_alloc status", rc);
    if (rc == 0) {
        memset(p, 0x5a, 100);
        rc = shmobj_arena_free(seg, a);
        expect_rc(rc == 0 || lock_status_ok(rc),
                "arena_free status", rc);
    }
    shmobj_arena_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    rc = shmobj_arena_stats_get(seg, &st);
    expect_rc(rc == 0 || lock_status_ok(rc),
                "arena_stats_get status", rc);
    uint64_t bad = 0;
    rc = shmobj_arena_check(seg, &bad);
    expect_rc(rc == 0 || lock_status_ok(rc),
                "arena_check status", rc);
}

/* The saved bytes are back: everything works as at the start. */
static void fuzz_check_restored(void)
{
    shmobj_ref r;
    fuzz_expect(shmobj_segment_root_get(seg, "m", &r) == 0 && r == ref_m,
                "restored: root m");
    fuzz_expect(shmobj_segment_root_get(seg, "q", &r) == 0 && r == ref_q,
                "restored: root q");
    fuzz_expect(shmobj_segment_root_get(seg, "r", &r) == 0 && r == ref_r,
                "restored: root r");
    shmobj_segment *h2;
    fuzz_expect(shmobj_segment_open_fd(seg_fd, SHMOBJ_FOREVER, &h2) == 0,
                "restored: open");
    shmobj_segment_close(h2);
    shmobj_map *m;
    fuzz_expect(shmobj_map_open(seg, "m", &m) == 0, "restored: map_open");
    shmobj_map_close(m);
    shmobj_queue *q;
    fuzz_expect(shmobj_queue_open(seg, "q", &q) == 0, "restored: queue_open");
    shmobj_queue_close(q);
    uint64_t bad = 0;
    fuzz_expect(shmobj_arena_check(seg, &bad) == 0, "restored: heap intact");
}
