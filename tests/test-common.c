/* Status codes and versions: the table behind shmobj_strerror() covers every
 * code, codes are stable, and the version functions agree with the macros.
 * Also the shared test helpers of test-util.h that every layer's tests rely
 * on. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "bytes.h"
#include "shmobj.h"
#include "test-util.h"

static void test_error_strerror_every_code(void **state)
{
    (void)state;
    for (int code = -1; code >= SHMOBJ_ERDONLY; code--) {
        const char *msg = shmobj_strerror(code);
        assert_non_null(msg);
        assert_string_not_equal(msg, "unknown error");
        assert_int_equal(strncmp(shmobj_errname(code), "SHMOBJ_E", 8), 0);
        assert_string_not_equal(shmobj_errname(code), "SHMOBJ_E?");
    }
    assert_string_equal(shmobj_strerror(0), "success");
    assert_string_equal(shmobj_errname(0), "SHMOBJ_OK");
}

static void test_error_strerror_unknown_code(void **state)
{
    (void)state;
    assert_string_equal(shmobj_strerror(-9999), "unknown error");
    assert_string_equal(shmobj_strerror(42), "unknown error");
    assert_string_equal(shmobj_errname(-9999), "SHMOBJ_E?");
}

/* The numbers are ABI: a change here is a break, not a refactor. */
static void test_error_codes_stable(void **state)
{
    (void)state;
    assert_int_equal(SHMOBJ_EINVAL, -1);
    assert_int_equal(SHMOBJ_ENOMEM, -2);
    assert_int_equal(SHMOBJ_ENOTFOUND, -3);
    assert_int_equal(SHMOBJ_EEXIST, -4);
    assert_int_equal(SHMOBJ_ECORRUPT, -5);
    assert_int_equal(SHMOBJ_EVERSION, -6);
    assert_int_equal(SHMOBJ_ELAYOUT, -7);
    assert_int_equal(SHMOBJ_ETIMEDOUT, -8);
    assert_int_equal(SHMOBJ_EEMPTY, -9);
    assert_int_equal(SHMOBJ_EFULL, -10);
    assert_int_equal(SHMOBJ_ETYPE, -11);
    assert_int_equal(SHMOBJ_ERANGE, -12);
    assert_int_equal(SHMOBJ_ESTALE, -13);
    assert_int_equal(SHMOBJ_EACCES, -14);
    assert_int_equal(SHMOBJ_EBUSY, -15);
    assert_int_equal(SHMOBJ_ENOTREADY, -16);
    assert_int_equal(SHMOBJ_ENOBUFS, -17);
    assert_int_equal(SHMOBJ_ENOTSUP, -18);
    assert_int_equal(SHMOBJ_ESYS, -19);
    assert_int_equal(SHMOBJ_EOWNERDEAD, -20);
    assert_int_equal(SHMOBJ_ENOTSEG, -21);
    assert_int_equal(SHMOBJ_EREPLACED, -22);
    assert_int_equal(SHMOBJ_EINUSE, -23);
    assert_int_equal(SHMOBJ_EOWNED, -24);
    assert_int_equal(SHMOBJ_ETRACKFULL, -25);
    assert_int_equal(SHMOBJ_EPEERDEAD, -26);
    assert_int_equal(SHMOBJ_ERDONLY, -27);
}

/* shmobj__mem_equal at every length a key takes its inline paths for (and
 * beyond), with one differing byte at every position, at unaligned
 * addresses: equal exactly when no byte differs. */
static void test_mem_equal_every_length_and_position(void **state)
{
    (void)state;
    uint8_t a[96 + 3], b[96 + 5];
    for (size_t i = 0; i < sizeof a; i++)
        a[i] = (uint8_t)(i * 37 + 11);
    for (uint64_t n = 0; n <= 96; n++) {
        const uint8_t *x = a + 3;
        uint8_t *y = b + 5;
        memcpy(y, x, (size_t)n);
        assert_true(shmobj__mem_equal(x, y, n));
        for (uint64_t at = 0; at < n; at++) {
            y[at] ^= 0x40;
            assert_false(shmobj__mem_equal(x, y, n));
            y[at] ^= 0x40;
        }
        assert_true(shmobj__mem_equal(x, y, n));
    }
}

static void test_version_matches_headers(void **state)
{
    (void)state;
    assert_int_equal(shmobj_version(), SHMOBJ_VERSION_NUMBER);
    assert_string_equal(shmobj_version_string(), SHMOBJ_VERSION_STRING);
    assert_int_equal(shmobj_format_version(), SHMOBJ_FORMAT_VERSION);
}

/* test_child_start() when fork() fails: the test that called it fails (it
 * does not go on with a pid of -1). Run in a child process holding a cmocka
 * group of its own, whose result is the number of its failed tests. */
static pid_t fork_refused(void)
{
    errno = EAGAIN;
    return -1;
}

static int child_never_runs(void *arg)
{
    (void)arg;
    return 0;
}

static void start_with_fork_refused(void **state)
{
    (void)state;
    test_fork = fork_refused;
    pid_t pid = test_child_start(child_never_runs, NULL, 5);
    test_fork = fork;
    /* Reached only when the failure went unnoticed. */
    (void)pid;
}

static void test_util_child_start_fork_fails_test(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(10);
        const struct CMUnitTest inner[] = {
            cmocka_unit_test(start_with_fork_refused),
        };
        _exit(cmocka_run_group_tests_name("fork refused", inner, NULL, NULL));
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_strerror_every_code),
        cmocka_unit_test(test_error_strerror_unknown_code),
        cmocka_unit_test(test_error_codes_stable),
        cmocka_unit_test(test_mem_equal_every_length_and_position),
        cmocka_unit_test(test_version_matches_headers),
        cmocka_unit_test(test_util_child_start_fork_fails_test),
    };
    test_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
