/* The library's lock (lib/os/os-lock.c) on its own, in memory shared by
 * forked processes, with a liveness table of the test's own as the judge:
 * the release wakes a waiter that announced itself in `sleepers`, a
 * waiter that sleeps is handed the lock by the release, mutual exclusion
 * between processes that contend all the time, a holder killed while
 * others sleep, a waiter killed while announced, owners judged only in
 * long waits (or by a caller about to give up), and the plain release
 * once the process is registered for the waiters' barrier. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <pthread.h>

#include "os.h"
#include "shmobj/error.h"
#include "test-util.h"

/* Tokens of the test (any non-zero value below bit 31 is one to the lock). */
enum { TOK_PARENT = 1, TOK_CHILD = 2, TOK_OTHER = 3, TOKENS = 4 };

/* What the processes of a test share: the lock, the judge's table and a
 * counter the critical sections change. */
struct shared {
    shmobj__os_lock lock;
    _Atomic int alive[TOKENS];   /* SHMOBJ__OS_OWNER_* per token */
    _Atomic uint32_t step;       /* hand-shakes between the processes */
    uint64_t counter;            /* changed only under the lock */
    _Atomic int child_rc;
    _Atomic int judged;          /* calls of the judge */
};

static struct shared *shared_new(void)
{
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    for (int i = 0; i < TOKENS; i++)
        atomic_store(&sh->alive[i], SHMOBJ__OS_OWNER_ALIVE);
    return sh;
}

static void shared_free(struct shared *sh)
{
    munmap(sh, sizeof *sh);
}

static int judge(void *ctx, uint32_t owner)
{
    struct shared *sh = ctx;
    atomic_fetch_add(&sh->judged, 1);
    if (owner == 0 || owner >= TOKENS)
        return SHMOBJ__OS_OWNER_BAD;
    return atomic_load(&sh->alive[owner]);
}

static int lock_for(struct shared *sh, uint32_t self, int64_t ms)
{
    return shmobj__os_lock_acquire(&sh->lock, self,
                                   shmobj__os_deadline(ms * TEST_MS), judge, sh);
}

/* Poll (bounded) until fn says yes; false when `ms` passed first. */
static bool wait_until(bool (*fn)(struct shared *), struct shared *sh,
                       unsigned ms)
{
    for (unsigned i = 0; i < ms; i++) {
        if (fn(sh))
            return true;
        test_sleep_ms(1);
    }
    return fn(sh);
}

static bool someone_sleeps(struct shared *sh)
{
    return atomic_load(&sh->lock.sleepers) != 0;
}

/* Start a child running fn and wait (bounded) until some process has
 * announced itself in `sleepers`. */
static pid_t start_sleeper(struct shared *sh, int (*fn)(void *))
{
    pid_t child = test_child_start(fn, sh, 30);
    assert_true(wait_until(someone_sleeps, sh, 5000));
    return child;
}

/* ---- the release wakes an announced sleeper ---------------------------- */

/* A waiter's half written out: announce in `sleepers`, sleep on it for at
 * most 10 s. 0 when woken (or the word changed before it slept), 1 when
 * the whole 10 s passed. */
static int sleep_announced(void *arg)
{
    struct shared *sh = arg;
    atomic_store(&sh->lock.sleepers, 1);
    int rc = shmobj__os_futex_wait(&sh->lock.sleepers, 1,
                                   shmobj__os_deadline(10000 * TEST_MS));
    return rc == SHMOBJ_ETIMEDOUT ? 1 : 0;
}

/* The release is a plain store, so a sleeper can be found only through
 * `sleepers`: the release must clear it and wake the process sleeping on
 * it, which otherwise sleeps its whole 10 s. */
static void test_lock_release_wakes_announced_sleeper(void **state)
{
    (void)state;
    struct shared *sh = shared_new();
    assert_int_equal(lock_for(sh, TOK_PARENT, 1000), 0);
    pid_t child = start_sleeper(sh, sleep_announced);
    test_sleep_ms(20); /* let it reach the futex; if not, it sees 0 */
    shmobj__os_lock_release(&sh->lock);
    assert_int_equal(test_child_wait(child), 0);
    assert_int_equal(atomic_load(&sh->lock.sleepers), 0);
    assert_int_equal(shmobj__os_lock_owner(&sh->lock), 0);
    shared_free(sh);
}

/* ---- a sleeping waiter gets the lock ----------------------------------- */

static int take_and_count(void *arg)
{
    struct shared *sh = arg;
    if (lock_for(sh, TOK_CHILD, 10000) != 0)
        return 1;
    sh->counter++;
    shmobj__os_lock_release(&sh->lock);
    return 0;
}

/* A waiter that went to sleep behind a live holder takes the lock once the
 * holder lets go, and the word and `sleepers` are clear afterwards. */
static void test_lock_sleeping_waiter_gets_lock(void **state)
{
    (void)state;
    struct shared *sh = shared_new();
    assert_int_equal(lock_for(sh, TOK_PARENT, 1000), 0);
    pid_t child = start_sleeper(sh, take_and_count);
    sh->counter = 41;
    shmobj__os_lock_release(&sh->lock);
    assert_int_equal(test_child_wait(child), 0);
    assert_int_equal(sh->counter, 42);
    assert_int_equal(shmobj__os_lock_owner(&sh->lock), 0);
    assert_int_equal(atomic_load(&sh->lock.sleepers), 0);
    shared_free(sh);
}

/* ---- liveness is judged only when a wait is long ---------------------- */

static int take_and_give_back(void *arg)
{
    struct shared *sh = arg;
    int rc = lock_for(sh, TOK_CHILD, 10000);
    if (rc == 0)
        shmobj__os_lock_release(&sh->lock);
    return rc == 0 ? 0 : 1;
}

/* Judging an owner is a system call in a segment (a probe of its OFD
 * lock): a waiter whose holder lets go within its first short sleep must
 * not judge it. The holder gives the lock back as soon as it sees the
 * waiter announced (spinning, not sleeping, so it sees it within
 * microseconds). A trial where the holder was descheduled past the short
 * sleep may judge once; of five trials, one must have judged nobody
 * (every trial judged at least once when the owner was judged before
 * each sleep). */
static void test_lock_short_wait_judges_nobody(void **state)
{
    (void)state;
    struct shared *sh = shared_new();
    int fewest = INT32_MAX;
    for (int trial = 0; trial < 5 && fewest > 0; trial++) {
        atomic_store(&sh->judged, 0);
        assert_int_equal(lock_for(sh, TOK_PARENT, 1000), 0);
        pid_t child = test_child_start(take_and_give_back, sh, 30);
        uint64_t until = shmobj__os_now_ns() + 5000 * TEST_MS;
        while (atomic_load(&sh->lock.sleepers) == 0 && shmobj__os_now_ns() < until)
            ;
        assert_int_not_equal(atomic_load(&sh->lock.sleepers), 0);
        shmobj__os_lock_release(&sh->lock);
        assert_int_equal(test_child_wait(child), 0);
        int n = atomic_load(&sh->judged);
        if (n < fewest)
            fewest = n;
    }
    assert_int_equal(fewest, 0);
    shared_free(sh);
}

/* A caller that does not wait (its deadline already passed) still takes
 * over a dead owner's lock: judging only long waits must not leave a dead
 * owner's lock to callers that only ever try. */
static void test_lock_try_dead_owner_takes_over(void **state)
{
    (void)state;
    struct shared *sh = shared_new();
    atomic_store(&sh->lock.word, TOK_CHILD);
    atomic_store(&sh->alive[TOK_CHILD], SHMOBJ__OS_OWNER_DEAD);
    assert_int_equal(shmobj__os_lock_acquire(&sh->lock, TOK_PARENT, shmobj__os_now_ns(), judge,
                                             sh),
                     SHMOBJ_EOWNERDEAD);
    assert_int_equal(shmobj__os_lock_owner(&sh->lock), TOK_PARENT);
    shmobj__os_lock_release(&sh->lock);
    /* a live owner, on the other hand, makes such a caller give up */
    atomic_store(&sh->lock.word, TOK_OTHER);
    assert_int_equal(shmobj__os_lock_acquire(&sh->lock, TOK_PARENT, shmobj__os_now_ns(), judge,
                                             sh),
                     SHMOBJ_ETIMEDOUT);
    assert_int_equal(shmobj__os_lock_owner(&sh->lock), TOK_OTHER);
    shared_free(sh);
}

/* ---- mutual exclusion under constant contention ------------------------ */

enum { ROUNDS = 20000 };

struct hammer {
    struct shared *sh;
    uint32_t self;
};

static int hammer(void *arg)
{
    struct hammer *hm = arg;
    for (int i = 0; i < ROUNDS; i++) {
        if (lock_for(hm->sh, hm->self, 10000) != 0)
            return 1;
        uint64_t v = hm->sh->counter; /* a torn increment shows a race */
        if ((i & 63) == 0)
            sched_yield(); /* let the other side sleep now and then */
        hm->sh->counter = v + 1;
        shmobj__os_lock_release(&hm->sh->lock);
    }
    return 0;
}

/* Three processes take and give back one lock in a loop, some holders
 * yielding inside: no increment is lost, each acquisition within its 10 s
 * bound (a lost wake-up would cost a slice, not a failure), and the lock is
 * free at the end. */
static void test_lock_three_processes_count_exact(void **state)
{
    (void)state;
    struct shared *sh = shared_new();
    struct hammer a = {sh, TOK_CHILD}, b = {sh, TOK_OTHER},
                  c = {sh, TOK_PARENT};
    pid_t pa = test_child_start(hammer, &a, 120);
    pid_t pb = test_child_start(hammer, &b, 120);
    assert_int_equal(hammer(&c), 0);
    assert_int_equal(test_child_wait(pa), 0);
    assert_int_equal(test_child_wait(pb), 0);
    assert_int_equal(sh->counter, 3 * (uint64_t)ROUNDS);
    assert_int_equal(shmobj__os_lock_owner(&sh->lock), 0);
    shared_free(sh);
}

/* ---- a holder killed while another sleeps ------------------------------ */

static int hold_forever(void *arg)
{
    struct shared *sh = arg;
    if (lock_for(sh, TOK_CHILD, 1000) != 0)
        return 1;
    atomic_store(&sh->step, 1);
    for (;;)
        pause();
}

static int wait_for_dead_holder(void *arg)
{
    struct shared *sh = arg;
    int rc = lock_for(sh, TOK_OTHER, 10000);
    if (rc == SHMOBJ_EOWNERDEAD)
        shmobj__os_lock_release(&sh->lock);
    return rc == SHMOBJ_EOWNERDEAD ? 0 : 1;
}

/* A holder SIGKILLed while a waiter sleeps behind it: once the judge says
 * the holder is dead, the sleeper (which looks again at the end of each
 * slice) takes the word over with SHMOBJ_EOWNERDEAD, and the lock is free
 * after its release. */
static void test_lock_holder_killed_sleeper_takes_over(void **state)
{
    (void)state;
    struct shared *sh = shared_new();
    pid_t holder = test_child_start(hold_forever, sh, 30);
    for (int i = 0; i < 5000 && atomic_load(&sh->step) == 0; i++)
        test_sleep_ms(1);
    assert_int_equal(atomic_load(&sh->step), 1);
    pid_t waiter = start_sleeper(sh, wait_for_dead_holder);
    kill(holder, SIGKILL);
    assert_int_equal(test_child_wait(holder), 128 + SIGKILL);
    atomic_store(&sh->alive[TOK_CHILD], SHMOBJ__OS_OWNER_DEAD);
    assert_int_equal(test_child_wait(waiter), 0);
    assert_int_equal(shmobj__os_lock_owner(&sh->lock), 0);
    shared_free(sh);
}

/* ---- a waiter killed while announced ----------------------------------- */

static int announce_and_sleep(void *arg)
{
    struct shared *sh = arg;
    return lock_for(sh, TOK_CHILD, 20000) == 0 ? 0 : 1;
}

/* ---- a word naming the caller's own token ------------------------------- */

/* In a process with one thread, a word holding the caller's own token
 * cannot name a holder (no acquire nests): it was damaged, and waiting for
 * it would only run out the deadline. */
static void test_lock_word_naming_self_alone_ecorrupt(void **state)
{
    (void)state;
    struct shared *sh = shared_new();
    atomic_store(&sh->lock.word, 3);
    assert_int_equal(lock_for(sh, 3, 5000), SHMOBJ_ECORRUPT);
    assert_int_equal(atomic_load(&sh->lock.word), 3); /* left as found */
    shared_free(sh);
}

struct holder {
    struct shared *sh;
    _Atomic int taken;
};

static void *hold_100ms(void *p)
{
    struct holder *h = p;
    if (lock_for(h->sh, 3, 5000) != 0)
        return NULL;
    atomic_store(&h->taken, 1);
    test_sleep_ms(100);
    shmobj__os_lock_release(&h->sh->lock);
    return NULL;
}

/* The same token held by another thread of this process (threads share a
 * handle, so its token) is a live holder: the caller waits for it. */
static void test_lock_threads_same_token_waits_for_holder(void **state)
{
    (void)state;
    struct shared *sh = shared_new();
    struct holder h = {sh, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_100ms, &h), 0);
    while (!atomic_load(&h.taken))
        test_sleep_ms(1);
    assert_int_equal(lock_for(sh, 3, 5000), 0);
    shmobj__os_lock_release(&sh->lock);
    assert_int_equal(pthread_join(t, NULL), 0);
    shared_free(sh);
}

/* A waiter SIGKILLed asleep leaves `sleepers` set: the next release clears
 * it (one wake of nobody), the lock works as before, and the release after
 * that finds nothing to wake. */
static void test_lock_killed_sleeper_leaves_lock_usable(void **state)
{
    (void)state;
    struct shared *sh = shared_new();
    assert_int_equal(lock_for(sh, TOK_PARENT, 1000), 0);
    pid_t child = start_sleeper(sh, announce_and_sleep);
    kill(child, SIGKILL);
    assert_int_equal(test_child_wait(child), 128 + SIGKILL);
    assert_int_not_equal(atomic_load(&sh->lock.sleepers), 0);
    shmobj__os_lock_release(&sh->lock);
    assert_int_equal(atomic_load(&sh->lock.sleepers), 0);
    assert_int_equal(lock_for(sh, TOK_PARENT, 1000), 0);
    shmobj__os_lock_release(&sh->lock);
    assert_int_equal(shmobj__os_lock_owner(&sh->lock), 0);
    assert_int_equal(atomic_load(&sh->lock.sleepers), 0);
    shared_free(sh);
}

/* ---- the plain release ------------------------------------------------- */

/* The first release of a process registers it for the waiters' barrier;
 * from then on its releases take the plain store. Skipped where the kernel
 * refuses the registration (then every release keeps its fence). */
static void test_lock_release_plain_once_registered(void **state)
{
    (void)state;
    struct shared *sh = shared_new();
    assert_int_equal(lock_for(sh, TOK_PARENT, 1000), 0);
    shmobj__os_lock_release(&sh->lock);
    if (!atomic_load(&shmobj__os_lock_plain_release)) {
        shared_free(sh);
        skip();
    }
    assert_int_equal(lock_for(sh, TOK_PARENT, 1000), 0);
    shmobj__os_lock_release(&sh->lock);
    assert_int_equal(shmobj__os_lock_owner(&sh->lock), 0);
    shared_free(sh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_word_naming_self_alone_ecorrupt),
        cmocka_unit_test(test_lock_threads_same_token_waits_for_holder),
        cmocka_unit_test(test_lock_release_wakes_announced_sleeper),
        cmocka_unit_test(test_lock_sleeping_waiter_gets_lock),
        cmocka_unit_test(test_lock_short_wait_judges_nobody),
        cmocka_unit_test(test_lock_try_dead_owner_takes_over),
        cmocka_unit_test(test_lock_three_processes_count_exact),
        cmocka_unit_test(test_lock_holder_killed_sleeper_takes_over),
        cmocka_unit_test(test_lock_killed_sleeper_leaves_lock_usable),
        cmocka_unit_test(test_lock_release_plain_once_registered),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
