/* Named steps of the library's concurrent protocols, where a test can stop
 * or kill the process that reaches them.
 *
 * A lock-free or optimistic protocol is only proven when every process
 * taking part can be stopped between any two of its steps while the others
 * go on (a process preempted there for a long time is exactly that). Each
 * such step carries SHMOBJ__STEP("area.protocol.step"); a test that links
 * the layers' static libraries sets shmobj__step_hook and stops (SIGSTOP),
 * delays or kills itself at the step it chose (tests/test-stall.h). The
 * shared library never sets the hook and hides the symbol, so a program
 * linking it cannot reach it; the cost of a step is one load of a global
 * and a branch predicted not taken.
 *
 * Every step named in lib/ is walked by a test (tests/check-steps.sh). */
#ifndef SHMOBJ_STEP_H
#define SHMOBJ_STEP_H

typedef void (*shmobj__step_fn)(const char *step);

/* Set by tests only; NULL otherwise. Relaxed: a test sets it before it
 * forks the processes whose steps it watches. */
extern shmobj__step_fn shmobj__step_hook;

#define SHMOBJ__STEP(name)                                                     \
    do {                                                                       \
        shmobj__step_fn step_fn_ =                                             \
            __atomic_load_n(&shmobj__step_hook, __ATOMIC_RELAXED);             \
        if (__builtin_expect(step_fn_ != 0, 0))                                \
            step_fn_(name);                                                    \
    } while (0)

#endif
