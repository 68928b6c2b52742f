/* Fuzz target for the topic's readers of untrusted segment bytes: open,
 * join and leave, take, batches and release, loans, publishing by copy and
 * by reference, reclaim and the spare records, repair, statistics, the
 * subscriber list, the pollable descriptor and destroy.
 *
 * Two topics are built once in a memfd segment. "t" (capacity 8, history
 * 2, 4 subscriber records, SHMOBJ_TOPIC_BLOCK) has gone round its ring
 * several times, so reclaim has run and left blocks in the spare records;
 * then a message published from a loan, one by copy and one by reference
 * (shmobj_topic_publish_ref()); two subscribers kept by this process, one
 * holding those three messages (taken, not released) with its descriptor
 * armed, one three messages behind with its descriptor idle; and a loan
 * not yet published. "o" (capacity 4, history 1, SHMOBJ_TOPIC_OVERWRITE)
 * has a subscriber holding its last message and one moved forward past
 * messages it lost. The bytes are saved. Each input is a list of edits,
 * each one naming a region (a line of a topic's header: constants, lock,
 * publishers', subscribers'; the ring's slots; the subscriber records; the
 * outstanding loan's record, every loan record, the spare records; the
 * 64-byte header of a message block in the ring, in a spare record or on
 * loan), an offset in it and up to 16 bytes to write there. After the
 * edits every operation runs: fresh handles opened and closed; the kept
 * subscribers' batch, releases and a take waiting 1 ms; a new subscriber
 * joining, taking the history, arming a descriptor and leaving; loans
 * published and cancelled (the outstanding one among them), publishes by
 * copy and by reference, which fire the armed descriptors, until the ring
 * is full and a publish waits 200 us, judging the records that hold it
 * up; repair, statistics and the subscriber list; the same on "o", whose
 * publishes move the slow subscriber forward; and last the destroy of
 * both. Then the saved bytes are put back, and so are the kept subscriber
 * handles and loan, whose cursors the exercise moved (they are process
 * memory, not segment bytes).
 *
 * Properties (abort on violation): nothing crashes or reads outside the
 * mapping (every byte of every message taken is read), every call returns
 * 0 or one of the codes its documentation lists, the heap's own check
 * still passes (no block freed twice, none written through a damaged
 * reference), and the whole exercise ends within FUZZ_EXERCISE_MAX_NS: the
 * library's lock must refuse a topic's lock word of garbage
 * (SHMOBJ_ECORRUPT) or take it over from a dead owner and repair, at once.
 * A word that names a live handle of this process is set to 0 first: it
 * is indistinguishable from a lock that handle holds, which a locker
 * rightly waits for (10 s, then SHMOBJ_EBUSY).
 *
 * Built with libFuzzer (-fsanitize=fuzzer) and, with -DFUZZ_STANDALONE, as
 * a plain program (fuzz-edits.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shmobj.h"
#include "space.h"
#include "topic-int.h"

#define FUZZ_NAME "fuzz-topic"
#include "fuzz-edits.h"

/* A property of a call's status, naming the code when it fails. */
static void expect_status(int ok, int rc, const char *what)
{
    if (!ok)
        fprintf(stderr, "%s: %s returned %s\n", FUZZ_NAME, what, shmobj_errname(rc));
    fuzz_expect(ok, what);
}

static shmobj_segment *seg;
/* "t" and its kept subscribers: holder took and holds held[], behind has
 * taken none of them; loan is outstanding */
static shmobj_topic *topic;
static shmobj_topic_sub *holder, *behind;
static shmobj_topic_msg held[3];
static shmobj_topic_loan loan;
/* "o" and its kept subscribers: oholder holds oheld, obehind lost some */
static shmobj_topic *otopic;
static shmobj_topic_sub *oholder, *obehind;
static shmobj_topic_msg oheld;
/* the kept handles' own memory as it was when the bytes were saved */
static struct shmobj_topic_sub saved_sub[4];
static shmobj_topic_loan saved_loan;

static void die_unless(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "%s: set-up: %s: %s\n", FUZZ_NAME, what, shmobj_errname(rc));
        exit(1);
    }
}

static shmobj_topic *make(const char *name, uint32_t capacity, uint32_t history,
                          uint32_t subs, uint32_t policy)
{
    shmobj_topic_config cfg;
    shmobj_topic_config_init(&cfg);
    cfg.capacity = capacity;
    cfg.history = history;
    cfg.subscribers = subs;
    cfg.policy = policy;
    shmobj_topic *t;
    die_unless(shmobj_topic_create(seg, name, &cfg, &t), "create");
    return t;
}

static void take_release(shmobj_topic_sub *s)
{
    shmobj_topic_msg m;
    die_unless(shmobj_topic_try_take(s, &m), "take");
    die_unless(shmobj_topic_release(s, &m), "release");
}

/* A block's first 64 bytes as a region: a loan's header. */
static void add_header(shmobj__ref ref)
{
    void *p;
    if (ref != 0 && shmobj_arena_ptr(seg, ref, &p, NULL) == 0)
        fuzz_region_add(p, SHMOBJ__TOPIC_MSG_HEADER);
}

/* A topic's regions: its header's lines, slots, subscriber records, loan
 * and spare records, and the headers of the loans in its ring and of its
 * spare blocks. */
static void add_topic(shmobj_topic *t)
{
    struct shmobj__topic_hdr *h = t->hdr;
    fuzz_region_add(h, 64);
    fuzz_region_add(&h->lock, 64);
    fuzz_region_add(&h->head, 64);
    fuzz_region_add(&h->rel_event, 64);
    fuzz_region_add(t->slots, (size_t)t->capacity * sizeof *t->slots);
    fuzz_region_add(t->subs, (size_t)t->subs_max * sizeof *t->subs);
    fuzz_region_add(t->loans, SHMOBJ_TOPIC_LOANS_MAX * sizeof *t->loans);
    fuzz_region_add(t->loans + SHMOBJ_TOPIC_LOANS_MAX,
                    SHMOBJ__TOPIC_SPARES * sizeof *t->loans);
    for (uint64_t s = h->tail; s < h->head; s++) {
        struct shmobj__topic_slot *sl = &t->slots[s & (t->capacity - 1)];
        if (sl->kind == TOPIC_KIND_LOAN)
            add_header(sl->ref);
    }
    for (uint32_t i = SHMOBJ_TOPIC_LOANS_MAX; i < SHMOBJ__TOPIC_LOANRECS; i++)
        add_header(t->loans[i].ref);
}

static void setup_block_topic(void)
{
    topic = make("t", 8, 2, 4, SHMOBJ_TOPIC_BLOCK);
    die_unless(shmobj_topic_subscribe(topic, &holder), "subscribe");
    die_unless(shmobj_topic_subscribe(topic, &behind), "subscribe");
    /* round the ring: reclaims keep blocks as spares for the next loans */
    uint8_t buf[300];
    for (int i = 0; i < 20; i++) {
        memset(buf, 'a' + i, sizeof buf);
        die_unless(shmobj_topic_publish(topic, buf, 100, 0), "publish");
        take_release(holder);
        take_release(behind);
    }
    /* one of each kind of message: from a loan, by copy, by reference */
    shmobj_topic_loan l;
    die_unless(shmobj_topic_loan_get(topic, 64, &l), "loan");
    memset(l.data, 'L', 64);
    die_unless(shmobj_topic_loan_publish(topic, &l, 64, 0), "loan_publish");
    die_unless(shmobj_topic_publish(topic, buf, 100, 0), "publish");
    shmobj_ref r;
    void *p;
    die_unless(shmobj_arena_alloc(seg, 96, 0, &r, &p), "alloc");
    memset(p, 'R', 96);
    die_unless(shmobj_topic_publish_ref(topic, r, 96, 0), "publish_ref");
    for (int i = 0; i < 3; i++)
        die_unless(shmobj_topic_try_take(holder, &held[i]), "take");
    /* a loan of another size, not published */
    die_unless(shmobj_topic_loan_get(topic, 300, &loan), "loan");
    memset(loan.data, 'O', 300);
    int fd;
    die_unless(shmobj_topic_notify_fd(holder, &fd), "notify_fd");
    die_unless(shmobj_topic_notify_arm(holder), "notify_arm");
    die_unless(shmobj_topic_notify_fd(behind, &fd), "notify_fd");
    shmobj_topic_stats st = {0};
    die_unless(shmobj_topic_stats_get(topic, &st), "stats");
    if (st.spares == 0 || st.loans != 1 || st.retained < 4)
        fuzz_die("set-up: no spare, or no loan, or a short ring");
}

static void setup_overwrite_topic(void)
{
    otopic = make("o", 4, 1, 2, SHMOBJ_TOPIC_OVERWRITE);
    die_unless(shmobj_topic_subscribe(otopic, &oholder), "subscribe");
    die_unless(shmobj_topic_subscribe(otopic, &obehind), "subscribe");
    for (int i = 0; i < 6; i++) {
        die_unless(shmobj_topic_publish(otopic, "overwrite", 9, 0), "publish");
        take_release(oholder);
    }
    die_unless(shmobj_topic_publish(otopic, "kept", 4, 0), "publish");
    die_unless(shmobj_topic_try_take(oholder, &oheld), "take");
    if (atomic_load(&obehind->rec->missed) == 0)
        fuzz_die("set-up: no subscriber moved forward");
}

/* The kept subscribers leave at exit: their descriptors are FIFOs in
 * /dev/shm, which only a leave (or a repair) unlinks. */
static void leave_at_exit(void)
{
    shmobj_topic_unsubscribe(holder);
    shmobj_topic_unsubscribe(behind);
}

static void fuzz_setup(void)
{
    seg = fuzz_segment();
    setup_block_topic();
    setup_overwrite_topic();
    shmobj__topic_stall_set(topic, 0);
    add_topic(topic);
    /* the outstanding loan: its record and its header */
    fuzz_region_add(&topic->loans[loan.slot], sizeof *topic->loans);
    add_header(loan.ref);
    add_topic(otopic);
    saved_sub[0] = *holder;
    saved_sub[1] = *behind;
    saved_sub[2] = *oholder;
    saved_sub[3] = *obehind;
    saved_loan = loan;
    atexit(leave_at_exit);
    fuzz_save();
}

/* ---- the documented codes ------------------------------------------------- */

/* shmobj_topic_open() */
static int open_status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_ETYPE || rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT ||
           rc == SHMOBJ_EVERSION;
}

/* shmobj_topic_take(), try_take() and take_batch() */
static int take_status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_EEMPTY || rc == SHMOBJ_ETIMEDOUT || rc == SHMOBJ_ESTALE ||
           rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_EREPLACED;
}

/* shmobj_topic_loan_get() */
static int loan_status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_ENOMEM || rc == SHMOBJ_EFULL || rc == SHMOBJ_ESTALE ||
           rc == SHMOBJ_ECORRUPT;
}

/* shmobj_topic_loan_publish(), and publish_ref() */
static int publish_status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_EINVAL || rc == SHMOBJ_ETIMEDOUT || rc == SHMOBJ_EFULL ||
           rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT || rc == SHMOBJ_EBUSY ||
           rc == SHMOBJ_EREPLACED;
}

/* shmobj_topic_publish(): a loan, then its publish */
static int copy_status_ok(int rc)
{
    return loan_status_ok(rc) || publish_status_ok(rc);
}

/* shmobj_topic_loan_cancel() */
static int cancel_status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_EINVAL || rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT;
}

/* shmobj_topic_subscribe() */
static int subscribe_status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_EFULL || rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT ||
           rc == SHMOBJ_EBUSY;
}

/* shmobj_topic_stats_get() and shmobj_topic_repair() (and its EBUSY) */
static int figures_status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT;
}

/* shmobj_topic_notify_fd() */
static int notify_fd_status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_ENOTSUP || rc == SHMOBJ_ESTALE || rc == SHMOBJ_ESYS;
}

/* shmobj_topic_notify_arm() */
static int notify_arm_status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_ESTALE;
}

/* shmobj_topic_destroy() */
static int destroy_status_ok(int rc)
{
    return rc == 0 || rc == SHMOBJ_ETYPE || rc == SHMOBJ_ESTALE || rc == SHMOBJ_ECORRUPT ||
           rc == SHMOBJ_EVERSION;
}

/* ---- the exercise ------------------------------------------------------------ */

/* Read every byte of a message taken. */
static void read_message(const shmobj_topic_msg *m)
{
    fuzz_expect(m->data != NULL || m->len == 0, "a message taken without its bytes");
    volatile uint8_t sum = 0;
    for (uint64_t j = 0; j < m->len; j++)
        sum ^= ((const uint8_t *)m->data)[j];
    (void)sum;
}

static void release(shmobj_topic_sub *s, const shmobj_topic_msg *m)
{
    int rc = shmobj_topic_release(s, m);
    expect_status(rc == 0 || rc == SHMOBJ_ESTALE || rc == SHMOBJ_EINVAL, rc, "release status");
}

/* Take what is there (at most `max`), reading each, releasing as it goes. */
static void drain(shmobj_topic_sub *s, int max)
{
    for (int i = 0; i < max; i++) {
        shmobj_topic_msg m;
        int rc = shmobj_topic_try_take(s, &m);
        expect_status(take_status_ok(rc) && rc != SHMOBJ_ETIMEDOUT, rc, "try_take status");
        if (rc != 0)
            return;
        read_message(&m);
        release(s, &m);
    }
}

/* Clear a topic's lock word when it names a live handle (see above). */
static void keep_lock_off_live(shmobj_topic *t)
{
    struct shmobj__space *sp = (struct shmobj__space *)seg;
    _Atomic uint32_t *w = &t->hdr->lock.word;
    uint32_t owner = atomic_load(w) & UINT32_C(0x7fffffff);
    if (owner != 0 && sp->ops->live->owner_state(sp, owner) > 0)
        atomic_store(w, 0);
}

/* A fresh handle's open and close, by each way of opening. */
static void opens(const char *name)
{
    shmobj_topic *t2;
    int rc = shmobj_topic_open(seg, name, &t2);
    expect_status(open_status_ok(rc), rc, "open status");
    if (rc == 0)
        shmobj_topic_close(t2);
    rc = shmobj_topic_open_timed(seg, name, 0, &t2);
    expect_status(open_status_ok(rc), rc, "open_timed status");
    if (rc == 0)
        shmobj_topic_close(t2);
    shmobj_topic_config cfg;
    shmobj_topic_config_init(&cfg);
    rc = shmobj_topic_open_or_create(seg, name, &cfg, &t2);
    expect_status(open_status_ok(rc) || rc == SHMOBJ_ENOMEM, rc, "open_or_create status");
    if (rc == 0)
        shmobj_topic_close(t2);
}

/* The figures and the subscriber list. */
static void figures(shmobj_topic *t)
{
    shmobj_topic_stats st;
    int rc = shmobj_topic_stats_get(t, &st);
    expect_status(figures_status_ok(rc), rc, "stats_get status");
    fuzz_expect(rc != 0 || (st.retained <= st.capacity && st.subscribers <= t->subs_max &&
                            st.loans + st.spares <= SHMOBJ__TOPIC_LOANRECS),
                "stats within the topic's geometry");
    shmobj_topic_sub_info info[8];
    size_t n = 0;
    rc = shmobj_topic_subscribers_get(t, info, 8, &n);
    expect_status(figures_status_ok(rc) || rc == SHMOBJ_ENOBUFS, rc, "subscribers_get status");
    fuzz_expect(rc != 0 || n <= t->subs_max, "subscribers within the records");
    rc = shmobj_topic_subscribers_get(t, NULL, 0, &n);
    expect_status(figures_status_ok(rc) || rc == SHMOBJ_ENOBUFS, rc,
                  "subscribers_get (count) status");
}

/* The kept subscribers of "t": the holder's batch, wait and releases; the
 * one behind takes what is there. */
static void kept_subscribers(void)
{
    shmobj_topic_msg m[8];
    unsigned n = 0;
    int rc = shmobj_topic_take_batch(behind, m, 8, &n, 0);
    expect_status(take_status_ok(rc) && rc != SHMOBJ_ETIMEDOUT && n <= 8 &&
                    (rc != 0 || n >= 1), rc, "take_batch status");
    for (unsigned i = 0; rc == 0 && i < n; i++)
        read_message(&m[i]);
    if (rc == 0)
        release(behind, &m[n - 1]);
    /* the holder's messages, read again in place, then let go one by one */
    for (int i = 0; i < 3; i++) {
        read_message(&held[i]);
        release(holder, &held[i]);
    }
    rc = shmobj_topic_take(holder, &m[0], 1000000);
    expect_status(take_status_ok(rc), rc, "take (1 ms) status");
    if (rc == 0) {
        read_message(&m[0]);
        release(holder, &m[0]);
    }
    drain(behind, 10);
}

/* A new subscriber's whole life: join (given the history), take, a
 * descriptor, leave. */
static void fresh_subscriber(shmobj_topic *t)
{
    shmobj_topic_sub *s;
    int rc = shmobj_topic_subscribe(t, &s);
    expect_status(subscribe_status_ok(rc), rc, "subscribe status");
    if (rc != 0)
        return;
    fuzz_expect(shmobj_topic_spin_set(s, 0) == 0, "spin_set status");
    drain(s, 10);
    int fd;
    rc = shmobj_topic_notify_fd(s, &fd);
    expect_status(notify_fd_status_ok(rc), rc, "notify_fd status");
    if (rc == 0) {
        rc = shmobj_topic_notify_arm(s);
        expect_status(notify_arm_status_ok(rc), rc, "notify_arm status");
    }
    shmobj_topic_unsubscribe(s);
}

/* Loans and every way of publishing. */
static void publishers(shmobj_topic *t, shmobj_topic_loan *kept)
{
    static const uint8_t bytes[300] = {1, 2, 3};
    int rc = shmobj_topic_publish(t, bytes, 100, 0);
    expect_status(copy_status_ok(rc), rc, "publish status");
    shmobj_topic_loan l;
    rc = shmobj_topic_loan_get(t, 100, &l);
    expect_status(loan_status_ok(rc), rc, "loan_get status");
    if (rc == 0) {
        memset(l.data, 'l', 100);
        rc = shmobj_topic_loan_publish(t, &l, 100, 0);
        expect_status(publish_status_ok(rc), rc, "loan_publish status");
        if (rc != 0) {
            rc = shmobj_topic_loan_cancel(t, &l);
            expect_status(cancel_status_ok(rc), rc, "loan_cancel status");
        }
    }
    rc = shmobj_topic_loan_get(t, 40, &l);
    expect_status(loan_status_ok(rc), rc, "loan_get status");
    if (rc == 0) {
        memset(l.data, 'c', 40);
        rc = shmobj_topic_loan_cancel(t, &l);
        expect_status(cancel_status_ok(rc), rc, "loan_cancel status");
    }
    if (kept != NULL) {
        /* the loan made before the damage */
        rc = shmobj_topic_loan_publish(t, kept, 300, 0);
        expect_status(publish_status_ok(rc), rc, "loan_publish (kept) status");
        if (rc != 0) {
            rc = shmobj_topic_loan_cancel(t, kept);
            expect_status(cancel_status_ok(rc), rc, "loan_cancel (kept) status");
        }
    }
    shmobj_ref r;
    void *p;
    if (shmobj_arena_alloc(seg, 80, 0, &r, &p) == 0) {
        memset(p, 'r', 80);
        rc = shmobj_topic_publish_ref(t, r, 80, 0);
        expect_status(publish_status_ok(rc), rc, "publish_ref status");
        if (rc != 0)
            (void)shmobj_arena_free(seg, r);
    }
}

/* The descriptors of the kept subscribers: the holder's is armed, the
 * other's idle; a publish fires the armed ones. */
static void descriptors(void)
{
    shmobj_topic_sub *subs[2] = {holder, behind};
    for (int i = 0; i < 2; i++) {
        int fd;
        int rc = shmobj_topic_notify_fd(subs[i], &fd);
        expect_status(notify_fd_status_ok(rc), rc, "notify_fd (kept) status");
        rc = shmobj_topic_notify_arm(subs[i]);
        expect_status(notify_arm_status_ok(rc), rc, "notify_arm (kept) status");
    }
}

/* The ring fills (the subscribers took none of the last messages): a
 * publish that waits then judges the records holding it up, at once (the
 * handle's stall time is 0), and gives up after 200 us. */
static void waiting_publisher(void)
{
    for (int i = 0; i < 4; i++) {
        int rc = shmobj_topic_publish(topic, "waits", 5, 200000);
        expect_status(copy_status_ok(rc), rc, "publish (waiting) status");
        if (rc != 0)
            break;
    }
}

static void repair(shmobj_topic *t)
{
    unsigned freed = 0;
    int rc = shmobj_topic_repair(t, &freed);
    expect_status(figures_status_ok(rc), rc, "repair status");
}

/* The overwriting topic: the one moved forward takes what is left, the
 * holder lets go, publishes move the slow one forward again. */
static void overwrite_topic(void)
{
    read_message(&oheld);
    drain(obehind, 8);
    for (int i = 0; i < 6; i++) {
        int rc = shmobj_topic_publish(otopic, "again", 5, 0);
        expect_status(copy_status_ok(rc), rc, "publish (overwrite) status");
    }
    release(oholder, &oheld);
    drain(oholder, 8);
    drain(obehind, 8);
    publishers(otopic, NULL);
    fresh_subscriber(otopic);
    repair(otopic);
    figures(otopic);
}

static void fuzz_exercise(void)
{
    keep_lock_off_live(topic);
    keep_lock_off_live(otopic);
    long long t0 = fuzz_now_ns();
    opens("t");
    opens("o");
    figures(topic);
    kept_subscribers();
    fresh_subscriber(topic);
    publishers(topic, &loan);
    descriptors();
    publishers(topic, NULL); /* fires the descriptors armed */
    waiting_publisher();
    drain(holder, 16);
    drain(behind, 16);
    repair(topic);
    figures(topic);
    overwrite_topic();
    /* last, as it ends the topics (the saved bytes bring them back); no
     * thread of this process sleeps on them now, so counts of sleepers are
     * damage, which a destroy rightly waits out for its 100 ms: not here */
    atomic_store(&topic->hdr->sub_waiters, 0);
    atomic_store(&topic->hdr->pub_waiters, 0);
    atomic_store(&otopic->hdr->sub_waiters, 0);
    atomic_store(&otopic->hdr->pub_waiters, 0);
    int rc = shmobj_topic_destroy(seg, "t");
    expect_status(destroy_status_ok(rc), rc, "destroy status");
    rc = shmobj_topic_destroy(seg, "o");
    expect_status(destroy_status_ok(rc), rc, "destroy (overwrite) status");
    uint64_t bad = 0;
    fuzz_expect(shmobj_arena_check(seg, &bad) == 0, "heap intact");
    fuzz_expect(fuzz_now_ns() - t0 < FUZZ_EXERCISE_MAX_NS, "bounded: no lock word waited on");
    *holder = saved_sub[0];
    *behind = saved_sub[1];
    *oholder = saved_sub[2];
    *obehind = saved_sub[3];
    loan = saved_loan;
}
