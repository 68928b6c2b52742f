/* The library's own lock for shared memory: one futex word holding the
 * owner's identity, and a word on which waiters sleep.
 *
 * Why not a robust pthread mutex: its bytes live in memory every attached
 * process can write, and the C library trusts them. Damaged bytes make
 * glibc wait for ever or abort the process, neither of which a library may
 * do to its caller. This lock trusts nothing it reads:
 *
 *   word == 0        free
 *   word == token    the handle named by `token` holds it (bit 31 is never
 *                    written, and ignored when the word is judged)
 *   sleepers != 0    a waiter may sleep on `sleepers`: the release wakes one
 *
 * Taking a free lock is one compare-and-swap (acquire); giving it back is
 * one store (release) and a load of `sleepers`, on the line the store just
 * wrote. That pair is the classic store-then-load of two parties (the
 * releaser stores the word and reads `sleepers`, a waiter stores `sleepers`
 * and reads the word), which needs a full barrier between each party's
 * store and load, or both can miss the other's store and the waiter sleeps
 * through the release. The waiter makes both: after it sets `sleepers` it
 * asks the kernel for a memory barrier on every CPU running a registered
 * process (membarrier(2), MEMBARRIER_CMD_GLOBAL_EXPEDITED), then reads the
 * word again and sleeps only if it still names the owner it judged. A
 * releaser whose store was still buffered has had it drained (the waiter
 * sees the free word), and one that had not stored yet reads `sleepers`
 * after the barrier (it wakes the waiter); the release keeps its store
 * before its load in program order (a compiler barrier). A process takes
 * the plain release only once it is registered (the first release of a
 * process registers it; until then, and for ever when the kernel refuses,
 * the release has a fence of its own). The barrier on every CPU costs a
 * few interrupts, so a waiter makes it only for a long sleep: its first
 * sleeps (100 us) follow this CPU's fence alone, where a release that
 * missed `sleepers` (its store still buffered while the waiter looked)
 * costs at most that slice; once one ran out, it makes the barrier and
 * sleeps the liveness slice. A waiter whose barrier the kernel refuses
 * sleeps in 1 ms slices instead. A new owner starts the sequence again.
 *
 * The release that finds `sleepers` set clears it and wakes one sleeper; a
 * waiter that has slept sets `sleepers` again before it takes the lock
 * (others may still sleep: its own release wakes the next), and one that
 * gives up after a sleep wakes another if the word was cleared meanwhile.
 * `sleepers` left set by a waiter that was killed costs the next release
 * one wake of nobody. A waiter spins first (a bounded time, and again
 * after each wake: a release wakes, it does not hand over, so the lock
 * never waits for a waiter the scheduler has not run yet), sleeps in
 * slices and, once an owner kept the lock past a short sleep, asks the
 * owner-state callback (the segment's liveness slots, a system call)
 * whether the owner is still attached between them: a dead owner's word
 * is taken over with one CAS from the exact value that named it, so of
 * several waiters one wins and returns SHMOBJ_EOWNERDEAD (repair the
 * guarded state, keep the lock);
 * a word that names no possible owner is SHMOBJ_ECORRUPT (so is one that
 * names the caller's own token in a process with no other thread: no
 * acquire here nests, so only damage puts it there); a live owner
 * that keeps the lock past the caller's deadline is SHMOBJ_ETIMEDOUT.
 * Nothing here waits without a deadline. */
#include <linux/membarrier.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu.h"
#include "os.h"
#include "shmobj/error.h"

/* Bit 31 of a word: format 2's "contended" mark, masked off when a word is
 * judged so that a word carrying it still names its owner. */
#define OLD_CONTENDED UINT32_C(0x80000000)
/* How long a waiter spins before it sleeps, and again after each wake.
 * A sleep and its wake cost both processes a system call and a context
 * switch each, tens of microseconds on a virtual machine; most waits for
 * an owner that runs end sooner, even one that takes a page fault in its
 * critical section. Four writers of a map on 2 CPUs, each allocation under
 * the segment lock: 100 pauses (3.6 us on the 2-CPU AMD EPYC virtual
 * machine) slept ~2,800 times per writer per 50,000 sets, and a woken
 * waiter that found the lock taken again slept at once: 15,000-20,500
 * futex calls per run of 200,000 sets, 700-1,700 with this spin
 * (doc/protocols.md, section 1, "Waiting with more processes than
 * CPUs"). */
#define SPIN_NS (UINT64_C(20) * 1000)
/* Of that, how long one owner may keep the lock before the spin ends: an
 * owner that keeps it longer is most likely off its CPU (preempted, or
 * waiting on the kernel), and the spin would only take CPU from it. While
 * the lock changes hands the spin goes on: the lock is moving. */
#define SPIN_OWNER_NS (UINT64_C(5) * 1000)
/* Pauses between the clock reads of a spin: a read costs about as much as
 * one pause; the first reads none (most spins end within it). */
#define SPIN_CLOCK_EVERY 16
/* How long a waiter sleeps before it looks at its owner's liveness again;
 * bounds how late a dead owner is noticed. */
#define LIVENESS_SLICE_NS (UINT64_C(20) * 1000000)
/* The slice of a waiter whose barrier the kernel refused: what a release
 * that missed its `sleepers` can cost. */
#define UNFENCED_SLICE_NS (UINT64_C(1) * 1000000)
/* A waiter's first sleeps, made without the barrier on every CPU (see
 * shmobj__os_lock_acquire()): long enough for most hand-overs under
 * contention, short enough that a missed wake costs little. */
#define SHORT_SLICE_NS (UINT64_C(100) * 1000)

_Atomic bool shmobj__os_lock_plain_release;

/* 0: not asked yet; 1: registered; -1: refused (old kernel, seccomp). */
static _Atomic int registration;

static void register_plain_release(void)
{
    int expect = 0;
    if (!atomic_compare_exchange_strong(&registration, &expect, -1))
        return; /* asked already, by this thread or another */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0,
                0) == 0) {
        atomic_store(&registration, 1);
        atomic_store(&shmobj__os_lock_plain_release, true);
    }
}

/* The waiter's half of the two-party barrier (see the top): a barrier on
 * this CPU and on every CPU running a registered process. False when the
 * kernel refused it (then only this CPU's fence was made). */
static bool barrier_everywhere(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    return syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0;
}

bool shmobj__os_barrier_everywhere(void)
{
    return barrier_everywhere();
}

void shmobj__os_lock_release_fenced(shmobj__os_lock *l)
{
    atomic_store_explicit(&l->word, 0, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&l->sleepers, memory_order_relaxed) != 0)
        shmobj__os_lock_wake(l, 1);
    if (atomic_load_explicit(&registration, memory_order_relaxed) == 0)
        register_plain_release();
}

void shmobj__os_lock_wake(shmobj__os_lock *l, int count)
{
    atomic_store_explicit(&l->sleepers, 0, memory_order_relaxed);
    shmobj__os_futex_wake(&l->sleepers, count);
}

/* A waiter that slept and leaves without the lock: if a release cleared
 * `sleepers` to wake it, the others still asleep would wait for their slice
 * to end; wake one of them, which announces itself again. */
static int leave(shmobj__os_lock *l, bool slept, int rc)
{
    if (slept && atomic_load_explicit(&l->sleepers, memory_order_relaxed) == 0)
        shmobj__os_futex_wake(&l->sleepers, 1);
    return rc;
}

/* Spin until the word is free and ours (true), or for SPIN_NS and no
 * later than `deadline` (0: none) (false). A waiter that has slept marks
 * `sleepers` before it takes the lock: others may still sleep, and its
 * release must wake the next. */
static bool spin(shmobj__os_lock *l, uint32_t self, bool slept,
                 uint64_t deadline)
{
    uint64_t until = 0, owner_until = 0;
    uint32_t owner = 0; /* the owner seen at the last clock read */
    for (unsigned i = 1;; i++) {
        shmobj__cpu_relax();
        uint32_t w = atomic_load_explicit(&l->word, memory_order_relaxed);
        if (w == 0) {
            if (slept)
                atomic_store_explicit(&l->sleepers, 1, memory_order_relaxed);
            if (atomic_compare_exchange_weak_explicit(
                    &l->word, &w, self, memory_order_acquire,
                    memory_order_relaxed))
                return true;
        }
        if (i % SPIN_CLOCK_EVERY == 0) {
            uint64_t now = shmobj__os_now_ns();
            if (until == 0) {
                until = now + SPIN_NS;
                if (deadline != 0 && deadline < until)
                    until = deadline;
            }
            if (w != owner) {
                owner = w;
                owner_until = now + SPIN_OWNER_NS;
            }
            if (now >= until || (w != 0 && now >= owner_until))
                return false;
        }
    }
}

int shmobj__os_lock_acquire(shmobj__os_lock *l, uint32_t self,
                            uint64_t deadline, shmobj__os_owner_fn owner_state,
                            void *ctx)
{
    if (self == 0 || (self & OLD_CONTENDED) != 0)
        return SHMOBJ_EINVAL;
    uint32_t w;
    /* Acquire on success: the critical section sees what the previous
     * owner wrote before its release. */
    if (shmobj__os_lock_try(l, self))
        return 0;
    if (spin(l, self, false, deadline))
        return 0;
    /* The default bound starts at the first wait: the uncontended path
     * reads no clock (a clock read can cost more than the whole lock). */
    bool bounded = deadline == 0;
    if (bounded)
        deadline = shmobj__os_deadline((int64_t)SHMOBJ__OS_LOCK_DEFAULT_NS);
    bool slept = false, short_ran_out = false;
    uint32_t waited_on = 0; /* the owner the sleeps below wait on */
    for (;;) {
        w = atomic_load_explicit(&l->word, memory_order_relaxed);
        if (w == 0) {
            /* Others may still sleep: mark them so our release wakes the
             * next one. */
            if (slept)
                atomic_store_explicit(&l->sleepers, 1, memory_order_relaxed);
            if (atomic_compare_exchange_strong_explicit(
                    &l->word, &w, self, memory_order_acquire,
                    memory_order_relaxed))
                return 0;
            continue;
        }
        uint32_t owner = w & ~OLD_CONTENDED;
        /* A new owner is waited on afresh: a short sleep first, and no
         * judgement of it until that ran out. */
        if (owner != waited_on) {
            waited_on = owner;
            short_ran_out = false;
        }
        uint64_t now = shmobj__os_now_ns();
        /* Our own token names another thread of this process as the
         * owner; in a process with no other thread it names nobody (the
         * word was damaged to our token): no live lock holds it. Another
         * owner is judged only once it held the lock past a short sleep,
         * or before the caller gives up (a dead owner is taken over even
         * by a caller that never waits): the judgement is a system call,
         * and most waits end sooner. */
        int state = owner == self ? (shmobj__os_threads_alone() ? SHMOBJ__OS_OWNER_BAD
                                                                : SHMOBJ__OS_OWNER_ALIVE)
                    : short_ran_out || now >= deadline ? owner_state(ctx, owner)
                                                       : SHMOBJ__OS_OWNER_ALIVE;
        if (state == SHMOBJ__OS_OWNER_BAD)
            return leave(l, slept, SHMOBJ_ECORRUPT);
        if (state == SHMOBJ__OS_OWNER_DEAD) {
            if (slept)
                atomic_store_explicit(&l->sleepers, 1, memory_order_relaxed);
            if (atomic_compare_exchange_strong_explicit(
                    &l->word, &w, self, memory_order_acquire,
                    memory_order_relaxed))
                return SHMOBJ_EOWNERDEAD;
            continue;
        }
        if (now >= deadline)
            return leave(l, slept,
                         bounded ? SHMOBJ_EBUSY : SHMOBJ_ETIMEDOUT);
        /* Announce, make the barrier of both parties, and sleep only if
         * the word still names the owner judged above: its release then
         * sees `sleepers` (or a later release cleared it and woke one).
         * Under contention the lock changes hands within microseconds, so
         * a sleep is first a short one behind this CPU's fence alone (a
         * release that missed `sleepers` costs at most that slice); only
         * after such a sleep ran out does the waiter pay for the barrier
         * on every CPU, and then it sleeps the liveness slice. */
        atomic_store_explicit(&l->sleepers, 1, memory_order_relaxed);
        uint64_t slice;
        if (!short_ran_out) {
            atomic_thread_fence(memory_order_seq_cst);
            slice = SHORT_SLICE_NS;
        } else {
            slice = barrier_everywhere() ? LIVENESS_SLICE_NS
                                         : UNFENCED_SLICE_NS;
        }
        if (atomic_load_explicit(&l->word, memory_order_relaxed) != w)
            continue;
        uint64_t until = deadline - now > slice ? now + slice : deadline;
        int rc = shmobj__os_futex_wait(&l->sleepers, 1, until);
        slept = true;
        /* Woken (by a release, most likely): the lock is free or soon
         * will be, and is not handed to us (whoever comes first takes it,
         * so a release never waits for a waiter the scheduler has not run
         * yet). Spin again before sleeping again: a woken waiter that
         * found the lock taken once more and slept at once made a convoy,
         * each release waking a waiter that went straight back to sleep. */
        if (rc == 0 && spin(l, self, true, deadline))
            return 0;
        if (rc == SHMOBJ_ETIMEDOUT)
            short_ran_out = true;
        if (rc != 0 && rc != SHMOBJ_ETIMEDOUT) {
            /* A futex that cannot sleep (never expected on Linux) must
             * not turn into a busy loop that ignores the deadline. */
            sched_yield();
        }
    }
}

uint32_t shmobj__os_lock_owner(const shmobj__os_lock *l)
{
    return atomic_load_explicit(&((shmobj__os_lock *)l)->word,
                                memory_order_relaxed) &
           ~OLD_CONTENDED;
}
