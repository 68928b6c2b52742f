/* Named topics in a segment: create, open, close, destroy; the topic's
 * lock; reclaim of released messages; repair of what dead processes left.
 *
 * Invariants kept here:
 * - A topic is one 64-byte aligned heap block, published as the root named
 *   as the topic only once it is complete. A handle validates the block's
 *   constants once at open and afterwards reads every counter it finds
 *   there against them (sequences within the ring, record indexes within
 *   the records): damage gives SHMOBJ_ECORRUPT.
 * - Publishing, joining, leaving, reclaim and repair happen under the
 *   topic's lock (the library's lock, lib/os/os-lock.c): a holder that dies
 *   leaves the lock to the next locker with SHMOBJ_EOWNERDEAD, which runs
 *   the repair before it goes on. Every step of those is written so that a
 *   death between any two leaves a state the repair completes: a slot is
 *   written before head moves past it; a block is freed before tail moves
 *   past it (a second free of the same reference is refused by the heap's
 *   generation, SHMOBJ_ESTALE, and ignored); a record's fields are written
 *   before its token.
 * - A block leaves the topic only when tail moves past it: every record in
 *   use holds held >= tail, and tail <= head - history. */
#include <stdlib.h>
#include <string.h>

#include "mix.h"
#include "os-notify.h"
#include "step.h"
#include "topic-int.h"

static int name_ok(const char *name)
{
    if (name == NULL)
        return SHMOBJ_EINVAL;
    size_t n = strnlen(name, SHMOBJ_TOPIC_NAME_MAX + 1);
    return n == 0 || n > SHMOBJ_TOPIC_NAME_MAX ? SHMOBJ_EINVAL : 0;
}

void shmobj_topic_config_init(shmobj_topic_config *cfg)
{
    if (cfg == NULL)
        return;
    cfg->capacity = 256;
    cfg->history = 0;
    cfg->subscribers = 1024;
    cfg->policy = SHMOBJ_TOPIC_BLOCK;
}

static bool config_ok(uint32_t capacity, uint32_t history, uint32_t subs,
                      uint32_t policy)
{
    return capacity >= 2 && capacity <= SHMOBJ_TOPIC_CAPACITY_MAX &&
           (capacity & (capacity - 1)) == 0 && history < capacity &&
           subs >= 1 && subs <= SHMOBJ_TOPIC_SUBSCRIBERS_MAX &&
           policy <= SHMOBJ_TOPIC_OVERWRITE;
}

uint64_t shmobj__topic_footprint(uint32_t capacity, uint32_t subs)
{
    return sizeof(struct shmobj__topic_hdr) +
           (uint64_t)capacity * sizeof(struct shmobj__topic_slot) +
           (uint64_t)subs * sizeof(struct shmobj__topic_subrec) +
           (uint64_t)SHMOBJ__TOPIC_LOANRECS * sizeof(struct shmobj__topic_loanrec);
}

static uint64_t topic_ident(shmobj_ref ref)
{
    static _Atomic uint64_t seq;
    uint64_t x = shmobj__mix64(ref ^ shmobj__mix64(shmobj__os_now_ns() ^
                                                   ((uint64_t)shmobj__os_pid() << 32) ^
                                                   atomic_fetch_add(&seq, 1)));
    return x != 0 ? x : 1;
}

/* Open a handle of the topic in block ref (see shmobj_topic_open()). */
static int handle_new(shmobj_segment *seg, shmobj_ref ref, shmobj_topic **out)
{
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    if (sp->ops->live == NULL)
        return SHMOBJ_ENOTSUP;
    uint64_t usable = 0;
    void *mem;
    int rc = shmobj__space_block(sp, ref, &mem, &usable);
    if (rc != 0)
        return rc;
    struct shmobj__topic_hdr *h = mem;
    if (usable < sizeof *h ||
        __atomic_load_n(&h->magic, __ATOMIC_RELAXED) != SHMOBJ__TOPIC_MAGIC)
        return SHMOBJ_ETYPE;
    if (((uintptr_t)mem & 63u) != 0)
        return SHMOBJ_ECORRUPT;
    if (h->version != SHMOBJ__TOPIC_VERSION ||
        h->lock_format != SHMOBJ__OS_LOCK_FORMAT)
        return SHMOBJ_EVERSION;
    uint32_t cap = h->capacity, hist = h->history, subs = h->subs_max,
             pol = h->policy;
    if (!config_ok(cap, hist, subs, pol) ||
        h->bytes != shmobj__topic_footprint(cap, subs) || h->bytes > usable)
        return SHMOBJ_ECORRUPT;
    uint64_t ident = atomic_load_explicit(&h->ident, memory_order_acquire);
    if (ident == 0)
        return SHMOBJ_ESTALE;
    shmobj_topic *t = calloc(1, sizeof *t);
    if (t == NULL)
        return SHMOBJ_ENOMEM;
    t->sp = sp;
    t->seg = seg;
    t->ref = ref;
    t->ident = ident;
    t->hdr = h;
    t->slots = (struct shmobj__topic_slot *)(h + 1);
    t->subs = (struct shmobj__topic_subrec *)(t->slots + cap);
    t->loans = (struct shmobj__topic_loanrec *)(t->subs + subs);
    t->capacity = cap;
    t->history = hist;
    t->subs_max = subs;
    t->policy = pol;
    t->stall_ns = 1000 * 1000; /* 1 ms */
    atomic_init(&t->holds, 1);
    shmobj__space_hold(sp); /* the handle outlives the segment's close */
    *out = t;
    return 0;
}

int shmobj_topic_create(shmobj_segment *seg, const char *name,
                        const shmobj_topic_config *cfg, shmobj_topic **out)
{
    shmobj_topic_config def;
    if (cfg == NULL) {
        shmobj_topic_config_init(&def);
        cfg = &def;
    }
    if (seg == NULL || out == NULL || name_ok(name) != 0 ||
        !config_ok(cfg->capacity, cfg->history, cfg->subscribers, cfg->policy))
        return SHMOBJ_EINVAL;
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    uint64_t size = shmobj__topic_footprint(cfg->capacity, cfg->subscribers);
    shmobj_ref ref;
    int rc = sp->ops->alloc(sp, size, 64, &ref);
    if (rc != 0)
        return rc;
    void *mem;
    rc = shmobj__space_at(sp, shmobj__ref_off(ref), size, &mem);
    shmobj_topic *t = NULL;
    if (rc == 0) {
        memset(mem, 0, size);
        struct shmobj__topic_hdr *h = mem;
        h->magic = SHMOBJ__TOPIC_MAGIC;
        h->version = SHMOBJ__TOPIC_VERSION;
        h->capacity = cfg->capacity;
        h->history = cfg->history;
        h->subs_max = cfg->subscribers;
        h->policy = cfg->policy;
        h->lock_format = SHMOBJ__OS_LOCK_FORMAT;
        h->bytes = size;
        atomic_store_explicit(&h->ident, topic_ident(ref), memory_order_release);
        rc = handle_new(seg, ref, &t);
    }
    /* published last and only if the name is free */
    if (rc == 0)
        rc = shmobj_segment_root_add(seg, name, ref);
    if (rc != 0) {
        shmobj_topic_close(t);
        sp->ops->free(sp, ref);
        return rc;
    }
    *out = t;
    return 0;
}

int shmobj_topic_open(shmobj_segment *seg, const char *name, shmobj_topic **out)
{
    if (seg == NULL || out == NULL || name_ok(name) != 0)
        return SHMOBJ_EINVAL;
    shmobj_ref ref;
    int rc = shmobj_segment_root_get(seg, name, &ref);
    return rc != 0 ? rc : handle_new(seg, ref, out);
}

int shmobj_topic_open_timed(shmobj_segment *seg, const char *name,
                            int64_t timeout_ns, shmobj_topic **out)
{
    if (seg == NULL || out == NULL || name_ok(name) != 0)
        return SHMOBJ_EINVAL;
    shmobj_ref ref;
    int rc = shmobj_segment_root_wait(seg, name, timeout_ns, &ref);
    return rc != 0 ? rc : handle_new(seg, ref, out);
}

/* Rounds of create-then-open: each lost one means the name was published
 * and taken away again in between (a destroy racing the start-up). */
#define OPEN_OR_CREATE_ROUNDS 16

int shmobj_topic_open_or_create(shmobj_segment *seg, const char *name,
                                const shmobj_topic_config *cfg,
                                shmobj_topic **out)
{
    int rc = SHMOBJ_ENOTFOUND;
    for (unsigned i = 0; i < OPEN_OR_CREATE_ROUNDS; i++) {
        rc = shmobj_topic_create(seg, name, cfg, out);
        if (rc != SHMOBJ_EEXIST)
            return rc;
        rc = shmobj_topic_open(seg, name, out);
        if (rc != SHMOBJ_ENOTFOUND && rc != SHMOBJ_ESTALE)
            return rc;
    }
    return rc;
}

void shmobj__topic_release(shmobj_topic *t)
{
    if (atomic_fetch_sub_explicit(&t->holds, 1, memory_order_acq_rel) == 1) {
        struct shmobj__space *sp = t->sp;
        free(t);
        shmobj__space_release(sp);
    }
}

/* Subscriptions hold the handle: they may be ended before or after it. */
void shmobj_topic_close(shmobj_topic *t)
{
    if (t != NULL)
        shmobj__topic_release(t);
}

/* ---- the lock, reclaim and repair ------------------------------------------ */

int shmobj__topic_lock(shmobj_topic *t, uint64_t deadline)
{
    const struct shmobj__space_live_ops *live = t->sp->ops->live;
    int rc = live->lock(t->sp, &t->hdr->lock, deadline);
    if (rc == SHMOBJ_EOWNERDEAD) {
        /* the holder died mid-publish, mid-reclaim or mid-join: whatever
         * it half did is either invisible (a slot beyond head, a record
         * without a token) or finished by the repair and the next reclaim */
        rc = shmobj__topic_repair_locked(t, UINT64_MAX, NULL);
        if (rc != 0) {
            live->unlock_broken(t->sp, &t->hdr->lock);
            return rc;
        }
    }
    if (rc == 0 && shmobj__topic_live(t) != 0) {
        live->unlock(t->sp, &t->hdr->lock);
        return SHMOBJ_ESTALE;
    }
    return rc;
}

void shmobj__topic_unlock(shmobj_topic *t)
{
    t->sp->ops->live->unlock(t->sp, &t->hdr->lock);
}

/* Under the lock: keep a reclaimed block in a free spare record (token 0,
 * no reference) for the next loan. False when none is free. */
static bool spare_put(shmobj_topic *t, shmobj__ref ref)
{
    for (uint32_t k = 0; k < SHMOBJ__TOPIC_SPARES; k++) {
        uint32_t i;
        struct shmobj__topic_loanrec *l = shmobj__topic_spare(t, k, &i);
        if (atomic_load_explicit(&l->token, memory_order_acquire) == 0 &&
            atomic_load_explicit(&l->ref, memory_order_relaxed) == 0) {
            atomic_store_explicit(&l->ref, ref, memory_order_release);
            shmobj__topic_spare_seen(t, i);
            return true;
        }
    }
    return false;
}

int shmobj__topic_reclaim(shmobj_topic *t, bool for_loans)
{
    struct shmobj__topic_hdr *h = t->hdr;
    uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
    if (tail > head || head - tail > t->capacity)
        return SHMOBJ_ECORRUPT;
    uint64_t limit = head >= t->history ? head - t->history : 0;
    if (limit <= tail)
        return 0;
    uint32_t hwm;
    if (!shmobj__topic_hwm(t, &hwm))
        return SHMOBJ_ECORRUPT;
    uint64_t min = limit;
    for (uint32_t i = 0; i < hwm; i++) {
        struct shmobj__topic_subrec *r = &t->subs[i];
        if (atomic_load_explicit(&r->token, memory_order_acquire) == 0)
            continue;
        uint64_t held = atomic_load_explicit(&r->held, memory_order_acquire);
        if (held < tail || held > head)
            return SHMOBJ_ECORRUPT;
        if (held < min)
            min = held;
    }
    int bad = 0;
    bool spared = false;
    for (uint64_t s = tail; s < min; s++) {
        struct shmobj__topic_slot *sl = &t->slots[s & (t->capacity - 1)];
        if (atomic_load_explicit(&sl->seq, memory_order_relaxed) == s + 1) {
            /* kept as a spare or freed before the slot lets go of it: a
             * death in between leaves the block named twice, which the
             * repair (a spare also in the ring) or the heap (a second free
             * of a stale reference) resolves; never a leak */
            shmobj__ref ref = atomic_load_explicit(&sl->ref, memory_order_relaxed);
            if (ref != 0 && spare_put(t, ref)) {
                spared = true;
                SHMOBJ__STEP("topic.reclaim.spared");
            } else if (ref != 0 && for_loans && spared) {
                break; /* the spares are full: the rest wait in the ring */
            } else if (ref != 0) {
                if (t->sp->ops->free(t->sp, ref) == SHMOBJ_ECORRUPT)
                    bad = SHMOBJ_ECORRUPT;
                SHMOBJ__STEP("topic.reclaim.freed");
            }
            atomic_store_explicit(&sl->ref, 0, memory_order_relaxed);
        } else {
            bad = SHMOBJ_ECORRUPT; /* a slot below head never written */
        }
        atomic_store_explicit(&h->tail, s + 1, memory_order_release);
    }
    return bad;
}

/* Whether a block is a message of the ring (kept, between tail and head). */
static bool in_ring(shmobj_topic *t, shmobj__ref ref)
{
    uint64_t head = atomic_load_explicit(&t->hdr->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&t->hdr->tail, memory_order_relaxed);
    if (tail > head || head - tail > t->capacity)
        return true; /* damaged: do not free what might be a message */
    for (uint64_t s = tail; s < head; s++)
        if (atomic_load_explicit(&t->slots[s & (t->capacity - 1)].ref,
                                 memory_order_relaxed) == ref)
            return true;
    return false;
}

int shmobj__topic_repair_locked(shmobj_topic *t, uint64_t below,
                                unsigned *freed)
{
    struct shmobj__space *sp = t->sp;
    unsigned n = 0;
    uint32_t hwm;
    if (!shmobj__topic_hwm(t, &hwm))
        return SHMOBJ_ECORRUPT;
    for (uint32_t i = 0; i < hwm; i++) {
        struct shmobj__topic_subrec *r = &t->subs[i];
        uint64_t tok = atomic_load_explicit(&r->token, memory_order_acquire);
        if (tok == 0)
            continue;
        if (below != UINT64_MAX &&
            atomic_load_explicit(&r->held, memory_order_relaxed) >= below)
            continue;
        if (shmobj__space_token_alive(sp, tok))
            continue;
        uint32_t was = atomic_exchange_explicit(&r->notify, TOPIC_NOTIFY_NONE,
                                                memory_order_acq_rel);
        if (was == TOPIC_NOTIFY_ARMED)
            atomic_fetch_sub_explicit(&t->hdr->armed, 1, memory_order_relaxed);
        if (was != TOPIC_NOTIFY_NONE) /* the dead subscriber's FIFO */
            shmobj__os_notify_forget(atomic_load_explicit(&r->nino,
                                                          memory_order_relaxed));
        atomic_store_explicit(&r->token, 0, memory_order_release);
        n++;
    }
    for (uint32_t i = 0; i < SHMOBJ__TOPIC_LOANRECS; i++) {
        struct shmobj__topic_loanrec *l = &t->loans[i];
        uint64_t tok = atomic_load_explicit(&l->token, memory_order_acquire);
        if (tok == 0 && i >= SHMOBJ_TOPIC_LOANS_MAX) {
            /* a spare that a reclaim which died had not yet taken out
             * of its slot: the slot keeps it */
            shmobj__ref ref = atomic_load_explicit(&l->ref, memory_order_relaxed);
            if (ref != 0 && in_ring(t, ref)) {
                atomic_store_explicit(&l->ref, 0, memory_order_release);
                n++;
            }
            continue;
        }
        if (tok == 0 || shmobj__space_token_alive(sp, tok))
            continue;
        shmobj__ref ref = atomic_load_explicit(&l->ref, memory_order_relaxed);
        /* published before its publisher died inside the lock: the ring's */
        if (ref != 0 && !in_ring(t, ref))
            (void)sp->ops->free(sp, ref);
        atomic_store_explicit(&l->ref, 0, memory_order_relaxed);
        atomic_store_explicit(&l->token, 0, memory_order_release);
        n++;
    }
    if (freed != NULL)
        *freed = n;
    return 0;
}

int shmobj_topic_repair(shmobj_topic *t, unsigned *freed)
{
    if (t != NULL && t->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (t == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__space_closed(t->sp))
        return SHMOBJ_ESTALE;
    int rc = shmobj__topic_lock(t, 0);
    if (rc != 0)
        return rc;
    rc = shmobj__topic_repair_locked(t, UINT64_MAX, freed);
    if (rc == 0)
        rc = shmobj__topic_reclaim(t, false);
    shmobj__topic_unlock(t);
    if (rc == 0)
        shmobj__topic_wake_publishers(t);
    return rc;
}

int shmobj_topic_stats_get(shmobj_topic *t, shmobj_topic_stats *st)
{
    if (t == NULL || st == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__topic_usable(t) != 0)
        return SHMOBJ_ESTALE;
    struct shmobj__topic_hdr *h = t->hdr;
    memset(st, 0, sizeof *st);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
    uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
    if (tail > head || head - tail > t->capacity)
        return SHMOBJ_ECORRUPT;
    st->published = head;
    st->retained = head - tail;
    st->capacity = t->capacity;
    st->history = t->history;
    st->missed = atomic_load_explicit(&h->missed, memory_order_relaxed);
    uint32_t hwm;
    if (!shmobj__topic_hwm(t, &hwm))
        return SHMOBJ_ECORRUPT;
    for (uint32_t i = 0; i < hwm; i++) {
        struct shmobj__topic_subrec *r = &t->subs[i];
        if (atomic_load_explicit(&r->token, memory_order_acquire) == 0)
            continue;
        st->subscribers++;
        uint64_t next = atomic_load_explicit(&r->next, memory_order_relaxed);
        if (next <= head && head - next > st->max_lag)
            st->max_lag = head - next;
    }
    for (uint32_t i = 0; i < SHMOBJ__TOPIC_LOANRECS; i++) {
        if (atomic_load_explicit(&t->loans[i].token, memory_order_relaxed) != 0)
            st->loans++;
        else if (atomic_load_explicit(&t->loans[i].ref, memory_order_relaxed) != 0)
            st->spares++;
    }
    return 0;
}

int shmobj_topic_subscribers_get(shmobj_topic *t, shmobj_topic_sub_info *subs,
                                 size_t cap, size_t *count)
{
    if (t == NULL || count == NULL || (subs == NULL && cap > 0))
        return SHMOBJ_EINVAL;
    if (shmobj__topic_usable(t) != 0)
        return SHMOBJ_ESTALE;
    uint64_t head = atomic_load_explicit(&t->hdr->head, memory_order_acquire);
    uint32_t hwm;
    if (!shmobj__topic_hwm(t, &hwm))
        return SHMOBJ_ECORRUPT;
    size_t n = 0;
    for (uint32_t i = 0; i < hwm; i++) {
        struct shmobj__topic_subrec *r = &t->subs[i];
        uint64_t tok = atomic_load_explicit(&r->token, memory_order_acquire);
        if (tok == 0)
            continue;
        if (n < cap) {
            /* each word judged alone: a subscriber moving meanwhile may
             * have taken past the head read above (lag 0 then) */
            uint64_t next = atomic_load_explicit(&r->next, memory_order_relaxed);
            uint64_t held = atomic_load_explicit(&r->held, memory_order_relaxed);
            shmobj_topic_sub_info *o = &subs[n];
            memset(o, 0, sizeof *o);
            o->token = tok <= UINT32_MAX ? (uint32_t)tok : 0;
            o->index = i;
            o->next = next;
            o->lag = next <= head ? head - next : 0;
            o->held = held <= next ? next - held : 0;
            o->missed = atomic_load_explicit(&r->missed, memory_order_relaxed);
            if (!shmobj__space_token_alive(t->sp, tok))
                o->flags |= SHMOBJ_TOPIC_SUB_DEAD;
            if (atomic_load_explicit(&r->notify, memory_order_relaxed) ==
                TOPIC_NOTIFY_ARMED)
                o->flags |= SHMOBJ_TOPIC_SUB_ARMED;
        }
        n++;
    }
    *count = n;
    if (shmobj__topic_usable(t) != 0)
        return SHMOBJ_ESTALE;
    return n > cap ? SHMOBJ_ENOBUFS : 0;
}

/* ---- destroy ----------------------------------------------------------------- */

/* How long a destroy waits for the threads asleep on the topic to leave. */
#define DESTROY_SLEEPERS_NS (100 * 1000 * 1000ull)

int shmobj_topic_destroy(shmobj_segment *seg, const char *name)
{
    if (seg != NULL && shmobj__space_of_seg(seg)->readonly)
        return SHMOBJ_ERDONLY;
    if (seg == NULL || name_ok(name) != 0)
        return SHMOBJ_EINVAL;
    shmobj_ref ref;
    int rc = shmobj_segment_root_get(seg, name, &ref);
    if (rc != 0)
        return rc;
    shmobj_topic *t;
    rc = handle_new(seg, ref, &t);
    if (rc != 0)
        return rc;
    struct shmobj__topic_hdr *h = t->hdr;
    rc = shmobj__topic_lock(t, 0);
    if (rc != 0) {
        shmobj_topic_close(t);
        return rc;
    }
    /* from here every handle's next call fails with SHMOBJ_ESTALE; the
     * publishers check it under the lock, so none writes the ring again */
    atomic_store_explicit(&h->ident, 0, memory_order_seq_cst);
    uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
    if (tail <= head && head - tail <= t->capacity)
        for (uint64_t s = tail; s < head; s++) {
            shmobj__ref r = atomic_exchange_explicit(
                &t->slots[s & (t->capacity - 1)].ref, 0, memory_order_relaxed);
            if (r != 0)
                (void)t->sp->ops->free(t->sp, r);
        }
    for (uint32_t i = 0; i < SHMOBJ__TOPIC_LOANRECS; i++) {
        shmobj__ref r = atomic_exchange_explicit(&t->loans[i].ref, 0,
                                                 memory_order_relaxed);
        if (r != 0)
            (void)t->sp->ops->free(t->sp, r);
    }
    t->sp->ops->live->unlock(t->sp, &h->lock);
    shmobj__topic_notify_fire(t);
    uint64_t end = shmobj__os_now_ns() + DESTROY_SLEEPERS_NS;
    for (;;) {
        atomic_fetch_add_explicit(&h->pub_event, 1, memory_order_seq_cst);
        atomic_fetch_add_explicit(&h->rel_event, 1, memory_order_seq_cst);
        shmobj__os_futex_wake(&h->pub_event, INT32_MAX);
        shmobj__os_futex_wake(&h->rel_event, INT32_MAX);
        if ((atomic_load(&h->sub_waiters) == 0 && atomic_load(&h->pub_waiters) == 0) ||
            shmobj__os_now_ns() >= end)
            break;
        shmobj__os_sleep_ns(1000 * 1000);
    }
    /* the FIFOs of dead subscribers: nobody repairs their records now */
    uint32_t hwm;
    if (shmobj__topic_hwm(t, &hwm))
        for (uint32_t i = 0; i < hwm; i++) {
            struct shmobj__topic_subrec *r = &t->subs[i];
            uint64_t tok = atomic_load_explicit(&r->token, memory_order_acquire);
            if (tok != 0 && !shmobj__space_token_alive(t->sp, tok) &&
                atomic_load_explicit(&r->notify, memory_order_relaxed) != TOPIC_NOTIFY_NONE)
                shmobj__os_notify_forget(atomic_load_explicit(&r->nino,
                                                              memory_order_relaxed));
        }
    shmobj_topic_close(t);
    rc = shmobj_segment_root_del(seg, name);
    if (rc != 0)
        return rc;
    struct shmobj__space *sp = shmobj__space_of_seg(seg);
    return sp->ops->free(sp, ref);
}

void shmobj__topic_stall_set(shmobj_topic *t, uint64_t ns)
{
    t->stall_ns = ns;
}
