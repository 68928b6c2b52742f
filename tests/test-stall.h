/* Stopping a process at a named step of a library protocol (lib/common/
 * step.h), so a test can prove the protocol with one party frozen at that
 * step while the others go on, and then resumed.
 *
 * In the child: test_stall_arm("mlist.append.reserved", 3, TEST_STALL_STOP)
 * makes its third arrival at that step raise SIGSTOP (or SIGKILL, or sleep
 * for a while). In the parent: test_stall_wait_stopped() waits, bounded,
 * until the child is stopped there (or ended without reaching the step);
 * the test lets other processes work, then test_stall_resume() continues
 * it. test_stall_pin() puts a process on one CPU, so tests run more
 * processes than CPUs on purpose. tests/check-steps.sh fails when a step
 * named in lib/ appears in no test. */
#ifndef SHMOBJ_TEST_STALL_H
#define SHMOBJ_TEST_STALL_H

#define _GNU_SOURCE 1
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "step.h"

enum test_stall_action {
    TEST_STALL_STOP,  /* raise(SIGSTOP): frozen until the parent resumes it */
    TEST_STALL_KILL,  /* raise(SIGKILL): dies at the step */
    TEST_STALL_SLEEP, /* sleeps test_stall_sleep_ms, then goes on */
};

static struct {
    const char *step; /* the step armed (compared by text) */
    unsigned nth;     /* arrivals left before the action */
    enum test_stall_action action;
    unsigned sleep_ms;
    unsigned reached; /* arrivals at the armed step, counted */
} test_stall;

static void test_stall_hook(const char *step)
{
    if (test_stall.step == NULL || strcmp(step, test_stall.step) != 0)
        return;
    test_stall.reached++;
    if (test_stall.nth == 0 || --test_stall.nth != 0)
        return;
    switch (test_stall.action) {
    case TEST_STALL_STOP:
        raise(SIGSTOP);
        break;
    case TEST_STALL_KILL:
        raise(SIGKILL);
        break;
    case TEST_STALL_SLEEP: {
        struct timespec ts = {.tv_sec = test_stall.sleep_ms / 1000,
                              .tv_nsec = (long)(test_stall.sleep_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        break;
    }
    }
}

/* Arm this process: its nth arrival (1 = the first) at `step` does
 * `action`. Call in the process to be stopped, before it works. */
static inline void test_stall_arm(const char *step, unsigned nth,
                                  enum test_stall_action action, unsigned sleep_ms)
{
    test_stall.step = step;
    test_stall.nth = nth ? nth : 1;
    test_stall.action = action;
    test_stall.sleep_ms = sleep_ms;
    test_stall.reached = 0;
    __atomic_store_n(&shmobj__step_hook, test_stall_hook, __ATOMIC_RELAXED);
}

static inline void test_stall_disarm(void)
{
    __atomic_store_n(&shmobj__step_hook, (shmobj__step_fn)0, __ATOMIC_RELAXED);
    test_stall.step = NULL;
}

/* Wait at most `ms` for the child to stop. 1: it is stopped (at the armed
 * step, the only SIGSTOP it raises); 0: it ended first (*status as from
 * waitpid); -1: it still runs after `ms`. */
static inline int test_stall_wait_stopped(pid_t pid, unsigned ms, int *status)
{
    for (unsigned waited = 0;; waited++) {
        int st;
        pid_t r = waitpid(pid, &st, WUNTRACED | WNOHANG);
        if (r == pid) {
            if (WIFSTOPPED(st))
                return 1;
            if (status)
                *status = st;
            return 0;
        }
        if (waited >= ms)
            return -1;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
}

static inline void test_stall_resume(pid_t pid)
{
    kill(pid, SIGCONT);
}

/* Keep the calling process on one CPU (cpu modulo the CPUs it may use). */
static inline void test_stall_pin(unsigned cpu)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return;
    unsigned n = (unsigned)CPU_COUNT(&allowed);
    if (n == 0)
        return;
    unsigned want = cpu % n;
    CPU_ZERO(&one);
    for (unsigned c = 0, seen = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed))
            continue;
        if (seen++ == want) {
            CPU_SET(c, &one);
            sched_setaffinity(0, sizeof one, &one);
            return;
        }
    }
}

#endif /* SHMOBJ_TEST_STALL_H */
