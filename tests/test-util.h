/* Helpers shared by the test programs: unique segment names, forked helper
 * processes bounded by a timeout, helper threads, and the test filter. */
#ifndef SHMOBJ_TEST_UTIL_H
#define SHMOBJ_TEST_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* xorshift64*: a deterministic generator, so failures reproduce; each
 * program keeps its own state (and seed). */
static inline uint64_t test_xorshift(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * UINT64_C(2685821657736338717);
}

/* A segment name unique to this process and call. */
static inline const char *test_name(char *buf, size_t len, const char *tag)
{
    static unsigned counter;
    snprintf(buf, len, "shmobj-test-%s-%ld-%u", tag, (long)getpid(),
             counter++);
    return buf;
}

/* The process helpers fail the running cmocka test, so they exist only
 * where cmocka.h was included first (the fuzz drivers take the generator
 * alone). */
#ifdef fail_msg
/* Unbuffered output: a test program that dies (or a child that calls
 * _exit()) loses nothing it printed, so a failure shows how far it got. */
__attribute__((constructor)) static void test_output_unbuffered(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
}

/* fork() for the helpers below; test-common.c replaces it to check what a
 * failed fork does. */
static pid_t (*test_fork)(void) = fork;

/* Run fn(arg) in a child process that is killed after `seconds`. Returns
 * the pid; collect it with test_child_wait(). The child exits with fn's
 * return value. A failed fork fails the calling test. */
static inline pid_t test_child_start(int (*fn)(void *), void *arg,
                                     unsigned seconds)
{
    pid_t pid = test_fork();
    if (pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        alarm(seconds);
        _exit(fn(arg));
    }
    return pid;
}
#endif

/* Wait for a child; its exit code, or 128 + signal when it was killed. */
static inline int test_child_wait(pid_t pid)
{
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

static inline void test_sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#define TEST_MS (INT64_C(1000000))

/* A helper thread running fn(arg); test_thread_wait() gives fn's result.
 * The tests named test_*_threads_* use them: the thread sanitizer's run
 * (suite 'threads') selects those. */
struct test_thread {
    pthread_t t;
    int (*fn)(void *);
    void *arg;
    int rc;
};

static inline void *test_thread_main(void *p)
{
    struct test_thread *t = p;
    t->rc = t->fn(t->arg);
    return NULL;
}

static inline int test_thread_start(struct test_thread *t, int (*fn)(void *), void *arg)
{
    t->fn = fn;
    t->arg = arg;
    t->rc = -1;
    return pthread_create(&t->t, NULL, test_thread_main, t);
}

static inline int test_thread_wait(struct test_thread *t)
{
    return pthread_join(t->t, NULL) == 0 ? t->rc : -1;
}

/* Run only the tests whose names match SHMOBJ_TEST_FILTER (a cmocka
 * pattern, `*` for any run of characters), when it is set. Call before
 * cmocka_run_group_tests(). */
#define test_filter_from_env() cmocka_set_test_filter(getenv("SHMOBJ_TEST_FILTER"))

#endif /* SHMOBJ_TEST_UTIL_H */
