/* The FIFO of retired message blocks (see retire.h).
 *
 * Invariants kept here: under the lock, entries [head, tail) are retired
 * and tail - head <= SHMOBJ__RETIRE_CAP; an entry counts once tail covers
 * it and is uncounted (head moved) before it leaves, so a process killed
 * inside leaks at most one block and never frees one twice. The positions
 * are read once per locked section and the loops run on those copies, so
 * no section hands out more than SHMOBJ__RETIRE_OUT_MAX blocks whatever
 * the shared words do meanwhile. */
#include "retire.h"

#include <stdbool.h>
#include <string.h>

#include "shmobj/error.h"

void shmobj__retire_init(struct shmobj__retire *r)
{
    memset(r, 0, sizeof *r); /* the lock is free when zero */
    r->magic = SHMOBJ__RETIRE_MAGIC;
    r->version = SHMOBJ__RETIRE_VERSION;
    r->capacity = SHMOBJ__RETIRE_CAP;
}

int shmobj__retire_check(const struct shmobj__retire *r)
{
    return r->magic == SHMOBJ__RETIRE_MAGIC &&
                   r->version == SHMOBJ__RETIRE_VERSION &&
                   r->capacity == SHMOBJ__RETIRE_CAP
               ? 0
               : SHMOBJ_ECORRUPT;
}

/* The positions, read once under the lock: the loops below run on these
 * copies, so a writer that breaks the rules (or damage) changing head or
 * tail meanwhile cannot make them take out more than SHMOBJ__RETIRE_CAP
 * entries, which is all their callers have room for. */
struct pos {
    uint64_t head, tail;
};

/* After the owner died inside, or positions found damaged: keep what the
 * positions still describe (a damaged pair empties the FIFO, leaking its
 * blocks) and count the bytes again. */
static struct pos repair(struct shmobj__retire *r, struct pos p)
{
    if (p.tail < p.head || p.tail - p.head > SHMOBJ__RETIRE_CAP)
        p.head = p.tail;
    uint64_t bytes = 0;
    for (uint64_t i = p.head; i != p.tail; i++)
        bytes += r->e[i % SHMOBJ__RETIRE_CAP].bytes;
    r->head = p.head;
    r->bytes = bytes;
    return p;
}

static int lock(struct shmobj__space *sp, struct shmobj__retire *r,
                struct pos *p)
{
    int rc = sp->ops->live->lock(sp, &r->lock, 0);
    if (rc != 0 && rc != SHMOBJ_EOWNERDEAD)
        return rc;
    p->head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
    p->tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
    if (rc == SHMOBJ_EOWNERDEAD) {
        *p = repair(r, *p); /* cannot fail: it only recounts */
    } else if (p->tail < p->head || p->tail - p->head > SHMOBJ__RETIRE_CAP) {
        /* positions damaged by another writer: start over (leaking) */
        *p = repair(r, *p);
    }
    return 0;
}

/* Take the oldest entry out into out[*n]: uncounted (head moved) before
 * the caller frees it. */
static void take_oldest(struct shmobj__retire *r, struct pos *p, uint64_t *out,
                        unsigned *n)
{
    struct shmobj__retire_entry e = r->e[p->head % SHMOBJ__RETIRE_CAP];
    p->head++;
    r->head = p->head;
    r->bytes = e.bytes <= r->bytes ? r->bytes - e.bytes : 0;
    out[(*n)++] = e.ref;
}

int shmobj__retire_push(struct shmobj__space *sp, struct shmobj__retire *r,
                        uint64_t ref, uint64_t bytes,
                        uint64_t budget, uint64_t out[SHMOBJ__RETIRE_OUT_MAX],
                        unsigned *n)
{
    *n = 0;
    struct pos p;
    int rc = lock(sp, r, &p);
    if (rc != 0)
        return rc;
    /* Over the budget (or full), give back a quarter of it at once: the
     * caller frees the blocks in a row, so the heap's lock and free lists
     * come to this core once per burst, not once per message, and the
     * producer allocates from a heap nobody else is writing meanwhile. */
    bool full = p.tail - p.head == SHMOBJ__RETIRE_CAP;
    if (full)
        while (p.tail - p.head > SHMOBJ__RETIRE_CAP - SHMOBJ__RETIRE_CAP / 4)
            take_oldest(r, &p, out, n);
    r->e[p.tail % SHMOBJ__RETIRE_CAP] = (struct shmobj__retire_entry){ref, bytes};
    p.tail++;
    r->tail = p.tail;
    r->bytes += bytes;
    /* keep at least the newest block: it is the one just read */
    if (r->bytes > budget)
        while (r->bytes > budget - budget / 4 && p.tail - p.head > 1)
            take_oldest(r, &p, out, n);
    sp->ops->live->unlock(sp, &r->lock);
    return 0;
}

int shmobj__retire_drain(struct shmobj__space *sp, struct shmobj__retire *r,
                         uint64_t out[SHMOBJ__RETIRE_OUT_MAX], unsigned *n)
{
    *n = 0;
    struct pos p;
    int rc = lock(sp, r, &p);
    if (rc != 0)
        return rc;
    while (p.tail != p.head)
        take_oldest(r, &p, out, n);
    sp->ops->live->unlock(sp, &r->lock);
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
