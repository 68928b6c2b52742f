/* The FIFO of retired message blocks (see retire.h).
 *
 * Invariants kept here: under the lock, entries [head, tail) are retired
 * and tail - head <= SHMOBJ__RETIRE_CAP; an entry counts once tail covers
 * it and is uncounted (head moved) before it leaves, so a process killed
 * inside leaks at most one block and never frees one twice. The positions
 * are read once per locked section and the loops run on those copies, so
 * no section hands out more than SHMOBJ__RETIRE_OUT_MAX blocks whatever
 * the shared words do meanwhile. A block taken out for reuse (pop) is
 * named in `taking` from before its generation is renewed until after
 * head moved past it, so the next locker after a holder's death puts it
 * back: a kill inside a pop loses no block. A push names its block in
 * `putting` before it moves the block's state to given back (the CAS is
 * made under the lock) until tail counts it, so the next locker counts a
 * block given back and held by no entry: a kill inside a push loses no
 * block either. (Blocks a push or drain took out, which the caller frees
 * after the lock, are lost with a caller killed before it freed them.)
 * Every block in the FIFO, or moving in or out of it, is allocated in
 * the heap throughout. */
#include "retire.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "arena.h" /* shmobj__arena_usable_if, shmobj__arena_gen_renew */
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

/* After the owner died inside a pop (`taking` set): the entry it was
 * taking out is kept in the FIFO, under the generation its block has now.
 * The pop renews the generation and then moves `head` past the entry, so
 * the entry is either still the oldest (renewed or not) or the one just
 * before `head` (renewed), which nothing overwrote since: the dead holder
 * held the lock. A block whose header is out of reach, or whose
 * generation is neither the entry's nor the next, is left alone. */
static void repair_taking(struct shmobj__space *sp, struct shmobj__retire *r,
                          struct pos *p)
{
    uint64_t t = __atomic_load_n(&r->taking, __ATOMIC_RELAXED);
    if (t == 0)
        return;
    uint64_t off = shmobj__ref_off(t);
    uint16_t g = shmobj__ref_gen(t);
    void *h;
    if (off < 16 || shmobj__space_at(sp, off - 16, 16, &h) != 0)
        return;
    uint16_t cur = (uint16_t)(__atomic_load_n((const uint64_t *)h + 1,
                                              __ATOMIC_RELAXED) >> 48);
    if (cur != g && cur != (uint16_t)(g + 1))
        return;
    uint64_t now = shmobj__ref_make(off, cur);
    if (p->tail != p->head && r->e[p->head % SHMOBJ__RETIRE_CAP].ref == t) {
        r->e[p->head % SHMOBJ__RETIRE_CAP].ref = now;
    } else if (p->head != 0 && p->tail - p->head < SHMOBJ__RETIRE_CAP &&
               r->e[(p->head - 1) % SHMOBJ__RETIRE_CAP].ref == t) {
        p->head--;
        r->e[p->head % SHMOBJ__RETIRE_CAP].ref = now;
        r->head = p->head;
    }
    __atomic_store_n(&r->taking, 0, __ATOMIC_RELAXED);
}

/* After the owner died inside a push (`putting` set): a block whose state
 * says given back and that the newest entry does not hold was given back
 * by the dead holder and not yet counted; it is counted now, when there
 * is room (a full FIFO leaks it). A block still in another state was not
 * given back: it stays its owners'. */
static void repair_putting(struct shmobj__space *sp, struct shmobj__retire *r,
                           struct pos *p)
{
    uint64_t t = __atomic_load_n(&r->putting, __ATOMIC_RELAXED);
    if (t == 0)
        return;
    __atomic_store_n(&r->putting, 0, __ATOMIC_RELAXED);
    if (p->tail != p->head && r->e[(p->tail - 1) % SHMOBJ__RETIRE_CAP].ref == t)
        return; /* counted */
    uint64_t off = shmobj__ref_off(t);
    void *h;
    if (off < 16 || (off & 15u) != 0 || p->tail - p->head >= SHMOBJ__RETIRE_CAP ||
        shmobj__space_at(sp, off - 16, 16 + SHMOBJ__RETIRE_STATE_OFF + 4, &h) != 0)
        return;
    uint64_t usable = shmobj__arena_usable_if(sp->base, off, shmobj__ref_gen(t));
    uint32_t st = __atomic_load_n((const uint32_t *)(const void *)(
                                      sp->base + off + SHMOBJ__RETIRE_STATE_OFF),
                                  __ATOMIC_ACQUIRE);
    if (usable < SHMOBJ__RETIRE_STATE_OFF + 4 || st != SHMOBJ__RETIRE_STATE_GIVEN)
        return;
    r->e[p->tail % SHMOBJ__RETIRE_CAP] = (struct shmobj__retire_entry){t, usable};
    p->tail++;
    r->tail = p->tail;
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
        *p = repair(r, *p);
        repair_taking(sp, r, p);
        repair_putting(sp, r, p);
        *p = repair(r, *p); /* cannot fail: it only recounts */
    } else if (p->tail < p->head || p->tail - p->head > SHMOBJ__RETIRE_CAP) {
        /* positions damaged by another writer: start over (leaking) */
        *p = repair(r, *p);
    }
    return 0;
}

/* Tests: stay ns inside the lock (no system call outside lib/os: the
 * clock is read through it). */
static __attribute__((noinline, cold)) void test_hold(uint64_t ns)
{
    uint64_t end = shmobj__os_now_ns() + ns;
    while (shmobj__os_now_ns() < end)
        ;
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
                        uint64_t ref, uint64_t bytes, _Atomic uint32_t *state,
                        uint32_t from, uint32_t *seen, uint64_t budget,
                        uint64_t hold_ns, uint64_t out[SHMOBJ__RETIRE_OUT_MAX],
                        unsigned *n)
{
    *n = 0;
    struct pos p;
    int rc = lock(sp, r, &p);
    if (rc != 0)
        return rc;
    /* named before the state moves, so that a death from here on leaves
     * the block to the next locker rather than to nobody */
    __atomic_store_n(&r->putting, ref, __ATOMIC_RELAXED);
    uint32_t expect = from;
    bool given = atomic_compare_exchange_strong_explicit(
        state, &expect, SHMOBJ__RETIRE_STATE_GIVEN, memory_order_acq_rel,
        memory_order_acquire);
    *seen = expect;
    if (!given) {
        __atomic_store_n(&r->putting, 0, __ATOMIC_RELAXED);
        sp->ops->live->unlock(sp, &r->lock);
        return 0;
    }
    if (__builtin_expect(hold_ns != 0, 0))
        test_hold(hold_ns);
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
    __atomic_store_n(&r->putting, 0, __ATOMIC_RELAXED);
    r->bytes += bytes;
    /* keep at least the newest block: it is the one just read */
    if (r->bytes > budget)
        while (r->bytes > budget - budget / 4 && p.tail - p.head > 1)
            take_oldest(r, &p, out, n);
    sp->ops->live->unlock(sp, &r->lock);
    return 0;
}

int shmobj__retire_pop(struct shmobj__space *sp, struct shmobj__retire *r,
                       uint64_t need, uint64_t cold, uint64_t hold_ns,
                       uint64_t *ref, uint64_t *bytes)
{
    *ref = 0;
    struct pos p;
    int rc = lock(sp, r, &p);
    if (rc != 0)
        return rc;
    if (p.tail == p.head)
        goto out;
    struct shmobj__retire_entry e = r->e[p.head % SHMOBJ__RETIRE_CAP];
    uint64_t total = __atomic_load_n(&r->bytes, __ATOMIC_RELAXED);
    if (e.bytes < need || e.bytes - need > need / 4 || total < e.bytes ||
        total - e.bytes < cold)
        goto out;
    /* The block as it was retired: in use with its generation and its
     * size, its header and payload inside the segment. An entry that is
     * not (damage) is dropped, its block left to the heap's check. */
    uint64_t off = shmobj__ref_off(e.ref);
    uint16_t gen = shmobj__ref_gen(e.ref);
    void *mem;
    if (off < 16 || (off & 15u) != 0 ||
        shmobj__space_at(sp, off - 16, 16 + e.bytes, &mem) != 0 ||
        shmobj__arena_usable_if(sp->base, off, gen) != e.bytes) {
        uint64_t dropped;
        unsigned n = 0;
        take_oldest(r, &p, &dropped, &n);
        goto out;
    }
    __atomic_store_n(&r->taking, e.ref, __ATOMIC_RELAXED);
    uint16_t ng = shmobj__arena_gen_renew(sp->base, off, gen);
    p.head++;
    r->head = p.head;
    r->bytes = total - e.bytes;
    if (__builtin_expect(hold_ns != 0, 0))
        test_hold(hold_ns);
    __atomic_store_n(&r->taking, 0, __ATOMIC_RELAXED);
    *ref = shmobj__ref_make(off, ng);
    *bytes = e.bytes;
out:
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
