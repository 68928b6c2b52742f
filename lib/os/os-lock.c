/* The library's own lock for shared memory: one futex word holding the
 * owner's identity.
 *
 * Why not a robust pthread mutex: its bytes live in memory every attached
 * process can write, and the C library trusts them. Damaged bytes make
 * glibc wait for ever or abort the process, neither of which a library may
 * do to its caller. This lock trusts nothing it reads:
 *
 *   word == 0                 free
 *   word == token | CONTENDED the handle named by `token` holds it;
 *                             CONTENDED (bit 31) says someone may sleep
 *
 * Taking a free lock is one compare-and-swap, releasing one exchange; the
 * futex is woken only when CONTENDED was set. A waiter sleeps in slices and
 * asks the owner-state callback (the segment's liveness slots) whether the
 * owner is still attached: a dead owner's word is taken over with one CAS
 * from the exact value that named it, so of several waiters one wins and
 * returns SHMOBJ_EOWNERDEAD (repair the guarded state, keep the lock); a
 * word that names no possible owner is SHMOBJ_ECORRUPT; a live owner that
 * keeps the lock past the caller's deadline is SHMOBJ_ETIMEDOUT. Nothing
 * here waits without a deadline. */
#include <sched.h>
#include <stdbool.h>

#include "cpu.h"
#include "os.h"
#include "shmobj/error.h"

#define CONTENDED UINT32_C(0x80000000)
/* Spins before the first sleep: most critical sections here are shorter
 * than a futex round trip. */
#define SPINS 100
/* How long a waiter sleeps before it looks at its owner's liveness again;
 * bounds how late a dead owner is noticed. */
#define LIVENESS_SLICE_NS (UINT64_C(20) * 1000000)

int shmobj__os_lock_acquire(shmobj__os_lock *l, uint32_t self,
                            uint64_t deadline, shmobj__os_owner_fn owner_state,
                            void *ctx)
{
    if (self == 0 || (self & CONTENDED) != 0)
        return SHMOBJ_EINVAL;
    uint32_t w;
    /* Acquire on success: the critical section sees what the previous
     * owner wrote before its release. */
    if (shmobj__os_lock_try(l, self))
        return 0;
    for (int i = 0; i < SPINS; i++) {
        shmobj__cpu_relax();
        w = atomic_load_explicit(&l->word, memory_order_relaxed);
        if (w == 0 && atomic_compare_exchange_weak_explicit(
                          &l->word, &w, self, memory_order_acquire,
                          memory_order_relaxed))
            return 0;
    }
    /* The default bound starts at the first wait: the uncontended path
     * reads no clock (a clock read can cost more than the whole lock). */
    bool bounded = deadline == 0;
    if (bounded)
        deadline = shmobj__os_deadline((int64_t)SHMOBJ__OS_LOCK_DEFAULT_NS);
    for (;;) {
        w = atomic_load_explicit(&l->word, memory_order_relaxed);
        if (w == 0) {
            /* Others may still sleep: keep CONTENDED so our release wakes
             * the next one. */
            if (atomic_compare_exchange_strong_explicit(
                    &l->word, &w, self | CONTENDED, memory_order_acquire,
                    memory_order_relaxed))
                return 0;
            continue;
        }
        uint32_t owner = w & ~CONTENDED;
        int state = owner == self ? SHMOBJ__OS_OWNER_ALIVE
                                  : owner_state(ctx, owner);
        if (state == SHMOBJ__OS_OWNER_BAD)
            return SHMOBJ_ECORRUPT;
        if (state == SHMOBJ__OS_OWNER_DEAD) {
            /* Keep the CONTENDED bit: sleepers are still there. */
            if (atomic_compare_exchange_strong_explicit(
                    &l->word, &w, self | (w & CONTENDED),
                    memory_order_acquire, memory_order_relaxed))
                return SHMOBJ_EOWNERDEAD;
            continue;
        }
        uint64_t now = shmobj__os_now_ns();
        if (now >= deadline)
            return bounded ? SHMOBJ_EBUSY : SHMOBJ_ETIMEDOUT;
        if ((w & CONTENDED) == 0) {
            if (!atomic_compare_exchange_strong_explicit(
                    &l->word, &w, w | CONTENDED, memory_order_relaxed,
                    memory_order_relaxed))
                continue;
            w |= CONTENDED;
        }
        uint64_t until = deadline - now > LIVENESS_SLICE_NS
                             ? now + LIVENESS_SLICE_NS
                             : deadline;
        int rc = shmobj__os_futex_wait(&l->word, w, until);
        if (rc != 0 && rc != SHMOBJ_ETIMEDOUT) {
            /* A futex that cannot sleep (never expected on Linux) must
             * not turn into a busy loop that ignores the deadline. */
            sched_yield();
        }
    }
}

void shmobj__os_lock_release(shmobj__os_lock *l)
{
    /* Release: the next owner sees every write of this critical section. */
    uint32_t w = atomic_exchange_explicit(&l->word, 0, memory_order_release);
    if ((w & CONTENDED) != 0)
        shmobj__os_futex_wake(&l->word, 1);
}

uint32_t shmobj__os_lock_owner(const shmobj__os_lock *l)
{
    return atomic_load_explicit(&((shmobj__os_lock *)l)->word,
                                memory_order_relaxed) &
           ~CONTENDED;
}
