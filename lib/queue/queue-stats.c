/* Figures and a consistency check of a queue, for tools.
 *
 * Both read the shared ring through the handle's view (ring.h), whose
 * geometry was validated at open, and write nothing: no counter is added
 * to the put and take paths for them (the totals are the ring's claim
 * positions, which only grow). Each shared word is loaded once and judged
 * alone, and pairs of positions are read in an order that makes every
 * relation checked hold at all times for a live ring, so a queue in use
 * by others is never reported damaged; only bytes no code of the library
 * writes are. Slot words are read as ring.h describes them: EMPTY(p) =
 * p << 2 | 1, SKIPPED(p) = p << 2 | 3, and a message = a non-null
 * reference with its low four bits replaced by the lap tag. */
#include <stddef.h>

#include "extstruct.h"
#include "queue-internal.h"

/* A process killed while asleep in a blocking call leaves its count in the
 * waiter totals until a waker repairs its sleeper record (ring-sleep.c):
 * the figures leave out what the records of dead handles hold, judged by
 * the attachment tokens, without writing (the repair stays the wakers').
 * A record holds no more than its process contributes to a total, so
 * this never hides a live sleeper; the counts of a process that found
 * every record taken are in the totals only and stay there. */
static void dead_sleepers_leave(shmobj_queue *q, shmobj_queue_stats *stats)
{
    struct shmobj__ring_hdr *h = q->ring.hdr;
    uint32_t *side[2] = {&stats->consumers_waiting, &stats->producers_waiting};
    for (unsigned i = 0; i < SHMOBJ__RING_SLEEPERS; i++) {
        struct shmobj__ring_sleeper *s = &h->sleepers[i];
        uint64_t o = atomic_load_explicit(&s->owner, memory_order_acquire);
        uint64_t t = atomic_load_explicit(&s->token, memory_order_relaxed);
        if (o == 0 || o == SHMOBJ__RING_SLEEPER_BUSY || t != o ||
            shmobj__space_token_alive(q->sp, o))
            continue;
        for (unsigned k = 0; k < 2; k++) {
            uint32_t c = atomic_load_explicit(&s->count[k], memory_order_relaxed);
            *side[k] = *side[k] > c ? *side[k] - c : 0;
        }
    }
}

int shmobj_queue_stats_get(shmobj_queue *q, shmobj_queue_stats *out)
{
    if (q == NULL || out == NULL || !shmobj__ext_out_ok(out, sizeof *out))
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    shmobj_queue_stats ours = {.struct_size = sizeof ours}, *stats = &ours;
    struct shmobj__ring *r = &q->ring;
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE;
    struct shmobj__ring_hdr *h = r->hdr;
    stats->capacity = (uint32_t)r->capacity;
    stats->depth = shmobj__ring_count(r);
    stats->puts = atomic_load_explicit(&h->enq_pos, memory_order_relaxed);
    stats->takes = atomic_load_explicit(&h->deq_pos, memory_order_relaxed);
    stats->skipped = atomic_load_explicit(&h->skipped, memory_order_relaxed);
    stats->rescued = atomic_load_explicit(&h->rescued, memory_order_relaxed);
    stats->consumers_waiting =
        atomic_load_explicit(&h->cons_waiters, memory_order_relaxed);
    stats->producers_waiting =
        atomic_load_explicit(&h->prod_waiters, memory_order_relaxed);
    dead_sleepers_leave(q, stats);
    stats->armed = atomic_load_explicit(&h->armed, memory_order_relaxed);
    stats->listeners = 0;
    for (unsigned i = 0; i < SHMOBJ__RING_NOTIFY_MAX; i++)
        if (atomic_load_explicit(&h->notify[i].state, memory_order_relaxed) !=
            SHMOBJ__NOTIFY_FREE)
            stats->listeners++;
    shmobj__retire_count(q->retire, &stats->retired_blocks,
                         &stats->retired_bytes);
    /* a destroy that raced with the loads: the figures may be another's */
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE;
    shmobj__ext_out(out, stats, sizeof *stats);
    return 0;
}

static uint64_t off_of(shmobj_queue *q, const volatile void *p)
{
    return (uint64_t)((const uint8_t *)p - q->sp->base);
}

/* A slot word at index i can be: a marker of a position p with
 * p & mask == i (bit 0 set), or a message whose reference is not null and
 * lies inside the segment. */
static bool slot_word_ok(shmobj_queue *q, uint64_t i, uint64_t w)
{
    if ((w & 1u) != 0)
        return ((w >> 2) & q->ring.mask) == i;
    uint64_t off = shmobj__ref_off(w & ~(uint64_t)15);
    void *p;
    return off != 0 && shmobj__space_at(q->sp, off, 1, &p) == 0;
}

int shmobj_queue_check(shmobj_queue *q, uint64_t *bad_off)
{
    if (q == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(q->sp))
        return SHMOBJ_ESTALE;
    struct shmobj__ring *r = &q->ring;
    struct shmobj__ring_hdr *h = r->hdr;
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE;
    uint64_t bad = UINT64_MAX;
    /* The immutable line must still say what the open validated. */
    if (h->magic != SHMOBJ__RING_MAGIC)
        bad = off_of(q, &h->magic);
    else if (h->version != SHMOBJ__RING_VERSION)
        bad = off_of(q, &h->version);
    else if (h->capacity != r->capacity)
        bad = off_of(q, &h->capacity);
    else if (h->cap_log2 != r->cap_log2)
        bad = off_of(q, &h->cap_log2);
    else if (h->slot_size != SHMOBJ__RING_SLOT_BYTES)
        bad = off_of(q, &h->slot_size);
    else if (h->hdr_size != sizeof *h)
        bad = off_of(q, &h->hdr_size);
    /* deq never passes enq, and enq never runs more than a lap ahead of
     * deq: read d1, then e, then d2, so that d1 <= e <= d2 + capacity
     * holds whatever moved in between. */
    if (bad == UINT64_MAX) {
        uint64_t d1 = atomic_load_explicit(&h->deq_pos, memory_order_acquire);
        uint64_t e = atomic_load_explicit(&h->enq_pos, memory_order_acquire);
        uint64_t d2 = atomic_load_explicit(&h->deq_pos, memory_order_acquire);
        if (d1 > e || e > d2 + r->capacity)
            bad = off_of(q, d1 > e ? (void *)&h->deq_pos : (void *)&h->enq_pos);
    }
    for (uint64_t i = 0; bad == UINT64_MAX && i < r->capacity; i++) {
        uint64_t w = atomic_load_explicit(&r->slots[i].word, memory_order_relaxed);
        if (!slot_word_ok(q, i, w))
            bad = off_of(q, &r->slots[i].word);
    }
    /* The retire FIFO: its fixed words, then head <= tail <= head + CAP,
     * read head, tail, head for the same reason as the positions. */
    if (bad == UINT64_MAX) {
        struct shmobj__retire *f = q->retire;
        if (shmobj__retire_check(f) != 0) {
            bad = off_of(q, f);
        } else {
            uint64_t h1 = __atomic_load_n(&f->head, __ATOMIC_ACQUIRE);
            uint64_t t = __atomic_load_n(&f->tail, __ATOMIC_ACQUIRE);
            uint64_t h2 = __atomic_load_n(&f->head, __ATOMIC_ACQUIRE);
            if (h1 > t || t > h2 + SHMOBJ__RETIRE_CAP)
                bad = off_of(q, h1 > t ? &f->head : &f->tail);
        }
    }
    if (!shmobj__ring_live(r))
        return SHMOBJ_ESTALE;
    if (bad == UINT64_MAX)
        return 0;
    if (bad_off != NULL)
        *bad_off = bad;
    return SHMOBJ_ECORRUPT;
}
