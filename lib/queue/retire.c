/* The FIFO of retired message blocks (see retire.h). */
#include "retire.h"

#include <string.h>

#include "shmobj/error.h"

int shmobj__retire_init(struct shmobj__retire *r)
{
    memset(r, 0, sizeof *r);
    r->magic = SHMOBJ__RETIRE_MAGIC;
    r->version = SHMOBJ__RETIRE_VERSION;
    r->capacity = SHMOBJ__RETIRE_CAP;
    return shmobj__os_mutex_init(&r->lock);
}

int shmobj__retire_check(const struct shmobj__retire *r)
{
    return r->magic == SHMOBJ__RETIRE_MAGIC &&
                   r->version == SHMOBJ__RETIRE_VERSION &&
                   r->capacity == SHMOBJ__RETIRE_CAP
               ? 0
               : SHMOBJ_ECORRUPT;
}

/* After the owner died inside: keep what the positions still describe
 * (a damaged pair empties the FIFO, leaking its blocks) and count the
 * bytes again. */
static void repair(struct shmobj__retire *r)
{
    if (r->tail < r->head || r->tail - r->head > SHMOBJ__RETIRE_CAP)
        r->head = r->tail;
    uint64_t bytes = 0;
    for (uint64_t p = r->head; p != r->tail; p++)
        bytes += r->e[p % SHMOBJ__RETIRE_CAP].bytes;
    r->bytes = bytes;
}

static int lock(struct shmobj__retire *r)
{
    int rc = shmobj__os_mutex_lock(&r->lock);
    if (rc == SHMOBJ_EOWNERDEAD) {
        repair(r);
        shmobj__os_mutex_consistent(&r->lock);
        rc = 0;
    }
    if (rc == 0 && (r->tail < r->head || r->tail - r->head > SHMOBJ__RETIRE_CAP)) {
        /* positions damaged by another writer: start over (leaking) */
        repair(r);
    }
    return rc;
}

/* Take the oldest entry out into out[*n]. */
static void take_oldest(struct shmobj__retire *r, uint64_t *out, unsigned *n)
{
    struct shmobj__retire_entry e = r->e[r->head % SHMOBJ__RETIRE_CAP];
    r->head++;
    r->bytes = e.bytes <= r->bytes ? r->bytes - e.bytes : 0;
    out[(*n)++] = e.ref;
}

int shmobj__retire_push(struct shmobj__retire *r, uint64_t ref, uint64_t bytes,
                        uint64_t budget, uint64_t out[SHMOBJ__RETIRE_OUT_MAX],
                        unsigned *n)
{
    *n = 0;
    int rc = lock(r);
    if (rc != 0)
        return rc;
    if (r->tail - r->head == SHMOBJ__RETIRE_CAP)
        take_oldest(r, out, n);
    r->e[r->tail % SHMOBJ__RETIRE_CAP] = (struct shmobj__retire_entry){ref, bytes};
    r->tail++;
    r->bytes += bytes;
    /* keep at least the newest block: it is the one just read */
    while (r->bytes > budget && r->tail - r->head > 1)
        take_oldest(r, out, n);
    shmobj__os_mutex_unlock(&r->lock);
    return 0;
}

int shmobj__retire_drain(struct shmobj__retire *r,
                         uint64_t out[SHMOBJ__RETIRE_OUT_MAX], unsigned *n)
{
    *n = 0;
    int rc = lock(r);
    if (rc != 0)
        return rc;
    while (r->tail != r->head)
        take_oldest(r, out, n);
    shmobj__os_mutex_unlock(&r->lock);
    return 0;
}

void shmobj__retire_count(struct shmobj__retire *r, uint64_t *blocks,
                          uint64_t *bytes)
{
    uint64_t h = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
    uint64_t t = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
    *blocks = t >= h ? t - h : 0;
    *bytes = __atomic_load_n(&r->bytes, __ATOMIC_RELAXED);
}
