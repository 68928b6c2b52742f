/* Wait-sets: one poll over the descriptors of queues, topic subscribers,
 * services and watches (shmobj/waitset.h).
 *
 * Invariants kept here:
 * - Every member is armed before each poll, and a member's arm makes its
 *   descriptor readable at once when something is already there, so a
 *   message that came between the last take and the arm is not slept
 *   through.
 * - A member whose arm fails (its queue, topic or service destroyed) is
 *   reported ready: the caller's take tells it why. */
#include <stdlib.h>

#include "os-notify.h"
#include "os.h"
#include "shmobj/waitset.h"
#include "shmobj/watch.h"

/* Each wait arms again after this long without a wake-up. */
#define WAIT_SLICE_NS (100 * 1000 * 1000ull)

enum kind { KIND_QUEUE, KIND_TOPIC, KIND_SERVICE, KIND_WATCH };

struct member {
    enum kind kind;
    void *handle;
    void *tag;
};

struct shmobj_waitset {
    unsigned n;
    struct member m[SHMOBJ_WAITSET_MAX];
    int fd[SHMOBJ_WAITSET_MAX];
    unsigned char ready[SHMOBJ_WAITSET_MAX];
};

int shmobj_waitset_create(shmobj_waitset **out)
{
    if (out == NULL)
        return SHMOBJ_EINVAL;
    shmobj_waitset *ws = calloc(1, sizeof *ws);
    if (ws == NULL)
        return SHMOBJ_ENOMEM;
    *out = ws;
    return 0;
}

void shmobj_waitset_destroy(shmobj_waitset *ws)
{
    free(ws);
}

static int add(shmobj_waitset *ws, enum kind kind, void *handle, void *tag)
{
    if (ws->n == SHMOBJ_WAITSET_MAX)
        return SHMOBJ_EFULL;
    int fd = -1, rc;
    switch (kind) {
    case KIND_QUEUE:
        rc = shmobj_queue_notify_fd(handle, &fd);
        break;
    case KIND_TOPIC:
        rc = shmobj_topic_notify_fd(handle, &fd);
        break;
    case KIND_WATCH:
        rc = shmobj_watch_fd(handle, &fd);
        break;
    default:
        rc = shmobj_service_notify_fd(handle, &fd);
        break;
    }
    if (rc != 0)
        return rc;
    ws->m[ws->n] = (struct member){.kind = kind, .handle = handle, .tag = tag};
    ws->fd[ws->n] = fd;
    ws->n++;
    return 0;
}

int shmobj_waitset_add_queue(shmobj_waitset *ws, shmobj_queue *q, void *tag)
{
    return ws == NULL || q == NULL ? SHMOBJ_EINVAL : add(ws, KIND_QUEUE, q, tag);
}

int shmobj_waitset_add_topic(shmobj_waitset *ws, shmobj_topic_sub *sub, void *tag)
{
    return ws == NULL || sub == NULL ? SHMOBJ_EINVAL : add(ws, KIND_TOPIC, sub, tag);
}

int shmobj_waitset_add_service(shmobj_waitset *ws, shmobj_service *svc, void *tag)
{
    return ws == NULL || svc == NULL ? SHMOBJ_EINVAL
                                     : add(ws, KIND_SERVICE, svc, tag);
}

int shmobj_waitset_add_watch(shmobj_waitset *ws, shmobj_watch *w, void *tag)
{
    return ws == NULL || w == NULL ? SHMOBJ_EINVAL : add(ws, KIND_WATCH, w, tag);
}

int shmobj_waitset_remove(shmobj_waitset *ws, const void *member)
{
    if (ws == NULL || member == NULL)
        return SHMOBJ_EINVAL;
    for (unsigned i = 0; i < ws->n; i++) {
        if (ws->m[i].handle != member)
            continue;
        ws->n--;
        for (unsigned j = i; j < ws->n; j++) {
            ws->m[j] = ws->m[j + 1];
            ws->fd[j] = ws->fd[j + 1];
        }
        return 0;
    }
    return SHMOBJ_ENOTFOUND;
}

/* Arm every member; those whose arm failed are marked ready. */
static unsigned arm_all(shmobj_waitset *ws)
{
    unsigned failed = 0;
    for (unsigned i = 0; i < ws->n; i++) {
        int rc;
        switch (ws->m[i].kind) {
        case KIND_QUEUE:
            rc = shmobj_queue_notify_arm(ws->m[i].handle);
            break;
        case KIND_TOPIC:
            rc = shmobj_topic_notify_arm(ws->m[i].handle);
            break;
        case KIND_WATCH:
            rc = shmobj_watch_arm(ws->m[i].handle);
            break;
        default:
            rc = shmobj_service_notify_arm(ws->m[i].handle);
            break;
        }
        ws->ready[i] = rc != 0;
        failed += rc != 0;
    }
    return failed;
}

int shmobj_waitset_wait(shmobj_waitset *ws, int64_t timeout_ns, void **tags,
                        size_t max, size_t *n)
{
    if (ws == NULL || tags == NULL || n == NULL || max == 0 || ws->n == 0)
        return SHMOBJ_EINVAL;
    *n = 0;
    uint64_t now = shmobj__os_now_ns();
    uint64_t deadline = timeout_ns < 0 ? UINT64_MAX
                        : (uint64_t)timeout_ns > UINT64_MAX - now
                            ? UINT64_MAX
                            : now + (uint64_t)timeout_ns;
    for (;;) {
        int got = (int)arm_all(ws);
        if (got == 0) {
            now = shmobj__os_now_ns();
            uint64_t left = deadline > now ? deadline - now : 0;
            if (left > WAIT_SLICE_NS)
                left = WAIT_SLICE_NS;
            /* round up: a wait of 1 ns still looks once and may sleep 1 ms */
            int ms = (int)((left + 999999) / 1000000);
            got = shmobj__os_notify_poll(ws->fd, ws->n, ms, ws->ready);
            if (got < 0)
                return got;
        }
        if (got > 0) {
            for (unsigned i = 0; i < ws->n && *n < max; i++)
                if (ws->ready[i])
                    tags[(*n)++] = ws->m[i].tag;
            if (*n > 0)
                return 0;
        }
        if (shmobj__os_now_ns() >= deadline)
            return SHMOBJ_ETIMEDOUT;
    }
}
