/* Completion records of tracked references (track.h).
 *
 * Invariants kept here:
 * - A reference lives in one of the records that follow its hash, at
 *   most `reach` of them (the header's word, raised before any record
 *   beyond it is published, clamped to the count); every index is masked
 *   with the count the handle validated at open, so no word read from the
 *   table moves an access, and every walk is bounded by that count.
 * - Every free record can be taken: a put fails with SHMOBJ_ETRACKFULL
 *   only when no record of the whole table was free or reclaimable.
 * - A record's fields are written only by the party that moved its state
 *   to BUSY by CAS, and become visible with the release store that ends
 *   BUSY; readers load state with acquire before ref, so a record found
 *   PENDING names the reference its sender wrote.
 * - Every state change that hands a record from one party to the other is
 *   a CAS from the state seen: of a consumer's done and a sender's
 *   give-up racing, exactly one wins, and the record is emptied exactly
 *   once, by whoever comes second.
 * - A record is reclaimed from a sender that died only by CAS from the
 *   exact state seen, after its token was judged dead. */
#include "track.h"

#include <stdbool.h>
#include <string.h>

#include "mix.h"
#include "shmobj/error.h"
#include "step.h"

uint32_t shmobj__track_count(uint32_t capacity)
{
    uint64_t n = 2 * (uint64_t)capacity;
    if (n < SHMOBJ__TRACK_MIN)
        n = SHMOBJ__TRACK_MIN;
    if (n > SHMOBJ__TRACK_MAX)
        n = SHMOBJ__TRACK_MAX;
    return (uint32_t)n;
}

void shmobj__track_init(struct shmobj__track *t, uint32_t count)
{
    memset(t, 0, shmobj__track_bytes(count));
    t->version = SHMOBJ__TRACK_VERSION;
    t->count = count;
    t->window = count;
    atomic_init(&t->reach, SHMOBJ__TRACK_REACH_MIN);
    __atomic_store_n(&t->magic, SHMOBJ__TRACK_MAGIC, __ATOMIC_RELEASE);
}

int shmobj__track_check(const struct shmobj__track *t, uint32_t capacity)
{
    return __atomic_load_n(&t->magic, __ATOMIC_ACQUIRE) == SHMOBJ__TRACK_MAGIC &&
                   t->version == SHMOBJ__TRACK_VERSION &&
                   t->count == shmobj__track_count(capacity) &&
                   t->window == t->count
               ? 0
               : SHMOBJ_ECORRUPT;
}

static inline uint32_t home(uint64_t ref, uint32_t count)
{
    return (uint32_t)shmobj__mix64(ref) & (count - 1);
}

static bool live_state(uint32_t s)
{
    return s == SHMOBJ__TRACK_PENDING || s == SHMOBJ__TRACK_DONE ||
           s == SHMOBJ__TRACK_ABANDONED;
}

/* Records a look-up probes from a home: the table's reach, within
 * [SHMOBJ__TRACK_REACH_MIN, count] whatever the word says. */
static uint32_t reach_of(struct shmobj__track *t, uint32_t count)
{
    uint32_t n = atomic_load_explicit(&t->reach, memory_order_acquire);
    if (n < SHMOBJ__TRACK_REACH_MIN)
        n = SHMOBJ__TRACK_REACH_MIN;
    return n < count ? n : count;
}

/* A record was placed `n` records from its home (the home counted): make
 * look-ups probe that far before it is published. */
static void reach_raise(struct shmobj__track *t, uint32_t n)
{
    uint32_t cur = atomic_load_explicit(&t->reach, memory_order_relaxed);
    while (cur < n &&
           !atomic_compare_exchange_weak_explicit(&t->reach, &cur, n,
                                                  memory_order_release,
                                                  memory_order_relaxed))
        ;
}

int64_t shmobj__track_find(struct shmobj__track *t, uint32_t count,
                           uint64_t ref, uint32_t token, uint32_t handle)
{
    uint32_t h = home(ref, count);
    uint32_t reach = reach_of(t, count);
    for (uint32_t i = 0; i < reach; i++) {
        uint32_t k = (h + i) & (count - 1);
        struct shmobj__track_rec *r = &t->rec[k];
        uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
        if (!live_state(s) ||
            atomic_load_explicit(&r->ref, memory_order_relaxed) != ref)
            continue;
        if (token != 0 &&
            (atomic_load_explicit(&r->token, memory_order_relaxed) != token ||
             atomic_load_explicit(&r->handle, memory_order_relaxed) != handle))
            continue;
        return k;
    }
    return -1;
}

bool shmobj__track_release(struct shmobj__track *t, uint32_t idx,
                           uint32_t from)
{
    struct shmobj__track_rec *r = &t->rec[idx];
    if (from != SHMOBJ__TRACK_BUSY &&
        !atomic_compare_exchange_strong_explicit(&r->state, &from,
                                                 SHMOBJ__TRACK_BUSY,
                                                 memory_order_acq_rel,
                                                 memory_order_relaxed))
        return false;
    SHMOBJ__STEP("queue.track.release");
    atomic_store_explicit(&r->ref, 0, memory_order_relaxed);
    atomic_store_explicit(&r->token, 0, memory_order_relaxed);
    atomic_store_explicit(&r->handle, 0, memory_order_relaxed);
    atomic_store_explicit(&r->pos, 0, memory_order_relaxed);
    atomic_store_explicit(&r->state, SHMOBJ__TRACK_FREE, memory_order_release);
    return true;
}

/* Tokens one walk of the table judged alive: most records of a full
 * table belong to a few senders, each judged once per walk. */
#define ALIVE_SEEN 8
struct alive_seen {
    uint64_t token[ALIVE_SEEN];
    unsigned n;
};

static bool token_alive(struct shmobj__space *sp, struct alive_seen *seen,
                        uint64_t owner)
{
    for (unsigned i = 0; i < seen->n; i++)
        if (seen->token[i] == owner)
            return true;
    if (!shmobj__space_token_alive(sp, owner))
        return false;
    seen->token[seen->n++ % ALIVE_SEEN] = owner;
    if (seen->n > ALIVE_SEEN)
        seen->n = ALIVE_SEEN;
    return true;
}

/* Take record k from a sender that died, from the state seen: true when
 * the caller now holds it BUSY. */
static bool reclaim_dead(struct shmobj__space *sp, struct alive_seen *alive,
                         struct shmobj__track_rec *r, uint32_t seen)
{
    if (!live_state(seen) && seen != SHMOBJ__TRACK_BUSY)
        return false;
    uint64_t owner = atomic_load_explicit(&r->token, memory_order_relaxed);
    /* a BUSY record whose token is not written yet is someone's at work */
    if (owner == 0 || sp->ops->live == NULL || token_alive(sp, alive, owner))
        return false;
    return atomic_compare_exchange_strong_explicit(&r->state, &seen,
                                                   SHMOBJ__TRACK_BUSY,
                                                   memory_order_acq_rel,
                                                   memory_order_relaxed);
}

int shmobj__track_add(struct shmobj__space *sp, struct shmobj__track *t,
                      uint32_t count, uint64_t ref, uint32_t token,
                      uint32_t handle, uint32_t *idx)
{
    if (shmobj__track_find(t, count, ref, 0, 0) >= 0)
        return SHMOBJ_EEXIST;
    uint32_t h = home(ref, count);
    struct alive_seen alive = {.n = 0};
    for (unsigned pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < count; i++) {
            uint32_t k = (h + i) & (count - 1);
            struct shmobj__track_rec *r = &t->rec[k];
            uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
            bool got;
            if (pass == 0) {
                got = s == SHMOBJ__TRACK_FREE &&
                      atomic_compare_exchange_strong_explicit(
                          &r->state, &s, SHMOBJ__TRACK_BUSY,
                          memory_order_acq_rel, memory_order_relaxed);
            } else {
                /* second pass: records of senders that died */
                got = reclaim_dead(sp, &alive, r, s);
            }
            if (!got)
                continue;
            SHMOBJ__STEP("queue.track.claimed");
            atomic_store_explicit(&r->ref, ref, memory_order_relaxed);
            atomic_store_explicit(&r->token, token, memory_order_relaxed);
            atomic_store_explicit(&r->handle, handle, memory_order_relaxed);
            atomic_store_explicit(&r->pos, 0, memory_order_relaxed);
            atomic_store_explicit(&r->waiters, 0, memory_order_relaxed);
            reach_raise(t, i + 1);
            *idx = k;
            return 0;
        }
    }
    return SHMOBJ_ETRACKFULL;
}
