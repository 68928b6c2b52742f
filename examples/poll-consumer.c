/* A consumer that waits for messages with plain poll(), as an event loop
 * (epoll, libuv, an asyncio reader) would: the queue's descriptor becomes
 * readable when messages wait, and producers write to it only when the
 * consumer armed it, not once per message.
 *
 * The program forks a producer that sends bursts of messages with pauses
 * between them; the consumer (the parent) also watches its standard input
 * in the same poll() call to show that the queue is just one more
 * descriptor. It exits 0 when every message arrived in order. */
#include <shmobj.h>

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SECOND INT64_C(1000000000)
#define BURSTS 20
#define PER_BURST 50

static int producer(shmobj_segment *seg)
{
    shmobj_queue *q;
    if (shmobj_queue_open(seg, "events", &q) != 0)
        return 1;
    for (unsigned b = 0; b < BURSTS; b++) {
        struct timespec pause = {0, 5 * 1000 * 1000}; /* 5 ms */
        nanosleep(&pause, NULL);
        for (unsigned i = 0; i < PER_BURST; i++) {
            uint64_t seq = (uint64_t)b * PER_BURST + i;
            if (shmobj_queue_put_copy(q, &seq, sizeof seq, 0, 10 * SECOND,
                                      NULL) != 0)
                return 1;
        }
    }
    shmobj_queue_close(q);
    return 0;
}

int main(void)
{
    char name[64];
    snprintf(name, sizeof name, "shmobj-poll-%d", (int)getpid());
    shmobj_segment *seg;
    int rc = shmobj_segment_create(name, NULL, &seg);
    if (rc != 0) {
        fprintf(stderr, "create: %s\n", shmobj_strerror(rc));
        return 1;
    }
    shmobj_queue *q = NULL;
    int fd = -1;
    rc = shmobj_queue_create(seg, "events", 64, 0, &q);
    if (rc == 0)
        rc = shmobj_queue_notify_fd(q, &fd);
    if (rc != 0) {
        fprintf(stderr, "queue: %s\n", shmobj_strerror(rc));
        shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
        return 1;
    }
    pid_t child = fork();
    if (child == 0)
        _exit(producer(seg));

    uint64_t expect = 0, wakeups = 0, timeouts = 0;
    int in_fd = STDIN_FILENO; /* -1 once it reached its end */
    while (expect < BURSTS * PER_BURST) {
        shmobj_queue_notify_arm(q); /* readable at the next put, or now */
        struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN},
                                {.fd = in_fd, .events = POLLIN}};
        /* a timeout too: a producer that died half-way through a put is
         * noticed by a take, not by the descriptor */
        int n = poll(pfd, 2, 100);
        if (n < 0)
            break;
        if (pfd[1].revents & POLLIN) {
            char buf[256];
            ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
            if (got > 0)
                printf("stdin: %zd bytes while waiting\n", got);
            else
                in_fd = -1; /* poll() ignores negative descriptors */
        }
        if (n > 0 && (pfd[0].revents & POLLIN))
            wakeups++;
        if (n == 0)
            timeouts++;
        shmobj_ref ref;
        while ((rc = shmobj_queue_try_take(q, &ref)) == 0) {
            uint64_t *seq;
            size_t len;
            if (shmobj_queue_msg_data(q, ref, (void **)&seq, &len) != 0 ||
                len != sizeof *seq || *seq != expect) {
                fprintf(stderr, "message %llu out of order\n",
                        (unsigned long long)expect);
                goto out;
            }
            expect++;
            shmobj_queue_msg_done(q, ref); /* frees the copy-in block */
        }
    }
out:;
    int status = 1;
    waitpid(child, &status, 0);
    printf("poll-consumer: %llu messages in order, %llu poll() wake-ups by "
           "the queue, %llu timeouts\n",
           (unsigned long long)expect, (unsigned long long)wakeups,
           (unsigned long long)timeouts);
    int ok = expect == BURSTS * PER_BURST && WIFEXITED(status) &&
             WEXITSTATUS(status) == 0;
    shmobj_queue_close(q);
    shmobj_segment_close(seg);
    shmobj_segment_destroy(name, SHMOBJ_BACKEND_SHM);
    return ok ? 0 : 1;
}
