/* Publishing: loans (message blocks recorded in the topic until published)
 * and the publish itself.
 *
 * Invariants kept here:
 * - A publish happens under the topic's lock: the slot of sequence head is
 *   written (reference, length, then its sequence), then head moves past
 *   it (release), then the loan record is cleared. A publisher that dies
 *   before head moved published nothing (the slot lies beyond head and the
 *   loan goes back to the heap by repair); one that dies after published
 *   it whole (the repair finds the loan's block in the ring and leaves it).
 *   So one total order across publishers: the order of head.
 * - The slot of head is free when head - tail < capacity; reclaim makes it
 *   so when every subscriber released the message there. Under
 *   SHMOBJ_TOPIC_OVERWRITE the subscribers that hold nothing and are a ring
 *   behind are moved forward first (counted as missed); a message a
 *   subscriber holds is never taken from it.
 * - A waiting publisher announces itself in pub_waiters before it looks
 *   at the subscribers' held cursors once more (seq_cst), and a release
 *   stores its cursor before it looks at pub_waiters: one of the two sees
 *   the other, so no wake-up is lost. */
#include <string.h>

#include "step.h"
#include "topic-int.h"

/* ---- loans --------------------------------------------------------------- */

static int loan_record(shmobj_topic *t, uint64_t me, uint32_t *slot)
{
    uint32_t start = (uint32_t)(shmobj__os_now_ns() >> 6) % SHMOBJ_TOPIC_LOANS_MAX;
    for (uint32_t k = 0; k < SHMOBJ_TOPIC_LOANS_MAX; k++) {
        uint32_t i = (start + k) % SHMOBJ_TOPIC_LOANS_MAX;
        uint64_t z = 0;
        if (atomic_load_explicit(&t->loans[i].token, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&t->loans[i].token, &z, me,
                                                    memory_order_acq_rel,
                                                    memory_order_relaxed)) {
            *slot = i;
            return 0;
        }
    }
    return SHMOBJ_EFULL;
}

/* Write a loan's header (only what changed: a header left as it was
 * stays in the subscribers' caches). */
static void stamp_block(shmobj_topic *t, void *block, uint64_t size,
                        uint64_t cap)
{
    struct shmobj__topic_msghdr *h = block;
    uint64_t stamp = shmobj__topic_stamp(t->ident);
    if (h->stamp != stamp)
        h->stamp = stamp;
    if (h->size != size)
        h->size = size;
    if (h->cap != cap)
        h->cap = cap;
}

/* A spare block of at least size bytes (and not much more), claimed as a
 * loan of this process: the CAS of the record's token moves the block
 * from the topic to the loan in one step. */
static bool spare_get(shmobj_topic *t, uint64_t me, uint64_t size,
                      shmobj_topic_loan *loan)
{
    struct shmobj__space *sp = t->sp;
    for (uint32_t k = 0; k < SHMOBJ__TOPIC_SPARES; k++) {
        uint32_t i;
        struct shmobj__topic_loanrec *l = shmobj__topic_spare(t, k, &i);
        uint64_t z = 0;
        if (atomic_load_explicit(&l->ref, memory_order_relaxed) == 0 ||
            atomic_load_explicit(&l->token, memory_order_relaxed) != 0 ||
            !atomic_compare_exchange_strong_explicit(&l->token, &z, me,
                                                     memory_order_acq_rel,
                                                     memory_order_relaxed))
            continue;
        SHMOBJ__STEP("topic.loan.reused");
        shmobj__ref ref = atomic_load_explicit(&l->ref, memory_order_acquire);
        void *data = NULL;
        uint64_t need = size + SHMOBJ__TOPIC_MSG_HEADER, cap = 0;
        /* the block's own header says its size: spares of other sizes
         * are passed over without a look at the heap, whose header line
         * every allocation writes */
        int rc = ref != 0 ? shmobj__space_at(sp, shmobj__ref_off(ref),
                                             SHMOBJ__TOPIC_MSG_HEADER, &data)
                          : SHMOBJ_ENOTFOUND;
        /* alignment first: a damaged reference must not make the header's
         * reads misaligned */
        if (rc == 0 && ((uintptr_t)data & 63u) != 0)
            rc = SHMOBJ_ECORRUPT;
        if (rc == 0) {
            const struct shmobj__topic_msghdr *mh = data;
            cap = mh->cap;
            if (mh->stamp != shmobj__topic_stamp(t->ident) || cap < SHMOBJ__TOPIC_MSG_HEADER)
                rc = SHMOBJ_ECORRUPT;
        }
        if (rc == 0 && (cap < need || cap / 2 > need + 64)) {
            /* another size: leave it for a loan it fits */
            atomic_store_explicit(&l->token, 0, memory_order_release);
            continue;
        }
        /* the loan's writer trusts the block to hold size bytes, so the
         * heap's header word must say it is live, of this generation, and
         * as large as its own header (the segment's bytes) says: one load,
         * as the list's chunks are judged */
        if (rc == 0 && shmobj__space_usable(sp, ref) < cap)
            rc = SHMOBJ_ECORRUPT;
        if (rc == 0)
            rc = shmobj__space_at(sp, shmobj__ref_off(ref), cap, &data);
        if (rc != 0) {
            /* no block there (or not one the heap knows: damage, not ours
             * to free): the record is free again */
            atomic_store_explicit(&l->ref, 0, memory_order_relaxed);
            atomic_store_explicit(&l->token, 0, memory_order_release);
            continue;
        }
        stamp_block(t, data, size, cap);
        shmobj__topic_spare_seen(t, i);
        loan->ref = ref;
        loan->data = (uint8_t *)data + SHMOBJ__TOPIC_MSG_HEADER;
        loan->size = size;
        loan->slot = i;
        return true;
    }
    return false;
}

int shmobj_topic_loan_get(shmobj_topic *t, uint64_t size, shmobj_topic_loan *loan)
{
    if (t != NULL && t->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (t == NULL || loan == NULL || size == 0 || size > (UINT64_C(1) << 47))
        return SHMOBJ_EINVAL;
    if (shmobj__topic_usable(t) != 0)
        return SHMOBJ_ESTALE;
    struct shmobj__space *sp = t->sp;
    uint64_t me = sp->ops->live->token(sp);
    if (me == 0)
        return SHMOBJ_EFULL;
    if (spare_get(t, me, size, loan))
        return 0;
    uint32_t slot;
    int rc = loan_record(t, me, &slot);
    if (rc == SHMOBJ_EFULL) {
        /* loans of dead publishers may hold the records */
        rc = shmobj_topic_repair(t, NULL);
        if (rc == 0)
            rc = loan_record(t, me, &slot);
    }
    if (rc != 0)
        return rc;
    struct shmobj__topic_loanrec *l = &t->loans[slot];
    shmobj__ref ref;
    rc = sp->ops->alloc(sp, size + SHMOBJ__TOPIC_MSG_HEADER, 64, &ref);
    void *data = NULL;
    if (rc == 0) {
        atomic_store_explicit(&l->ref, ref, memory_order_release);
        SHMOBJ__STEP("topic.loan.recorded");
        rc = shmobj__space_at(sp, shmobj__ref_off(ref),
                              size + SHMOBJ__TOPIC_MSG_HEADER, &data);
        if (rc != 0) {
            atomic_store_explicit(&l->ref, 0, memory_order_relaxed);
            (void)sp->ops->free(sp, ref);
        }
    }
    if (rc != 0) {
        atomic_store_explicit(&l->token, 0, memory_order_release);
        return rc;
    }
    uint64_t cap = 0;
    if (sp->ops->check(sp, ref, &cap) != 0 || cap < size + SHMOBJ__TOPIC_MSG_HEADER)
        cap = size + SHMOBJ__TOPIC_MSG_HEADER;
    stamp_block(t, data, size, cap);
    loan->ref = ref;
    loan->data = (uint8_t *)data + SHMOBJ__TOPIC_MSG_HEADER;
    loan->size = size;
    loan->slot = slot;
    return 0;
}

/* The loan's record, when it is this process's record of that block. */
static struct shmobj__topic_loanrec *loan_of(shmobj_topic *t,
                                             const shmobj_topic_loan *loan)
{
    if (loan->slot >= SHMOBJ__TOPIC_LOANRECS || loan->ref == 0)
        return NULL;
    struct shmobj__topic_loanrec *l = &t->loans[loan->slot];
    uint64_t me = t->sp->ops->live->token(t->sp);
    if (atomic_load_explicit(&l->token, memory_order_acquire) != me ||
        atomic_load_explicit(&l->ref, memory_order_relaxed) != loan->ref)
        return NULL;
    return l;
}

int shmobj_topic_loan_cancel(shmobj_topic *t, shmobj_topic_loan *loan)
{
    if (t != NULL && t->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (t == NULL || loan == NULL)
        return SHMOBJ_EINVAL;
    if (shmobj__topic_usable(t) != 0)
        return SHMOBJ_ESTALE;
    struct shmobj__topic_loanrec *l = loan_of(t, loan);
    if (l == NULL)
        return SHMOBJ_EINVAL;
    int rc = t->sp->ops->free(t->sp, loan->ref);
    atomic_store_explicit(&l->ref, 0, memory_order_relaxed);
    atomic_store_explicit(&l->token, 0, memory_order_release);
    loan->ref = 0;
    loan->data = NULL;
    return rc;
}

/* ---- making room ---------------------------------------------------------- */

/* Under the lock, overwrite policy: move every subscriber that holds
 * nothing and is a whole ring behind to `target`, counting what it lost. */
static int skip_slow(shmobj_topic *t, uint64_t head)
{
    uint64_t need = head - t->capacity + 1; /* tail must reach this */
    uint64_t limit = head - t->history;     /* >= need: history < capacity */
    uint64_t target = need + (t->capacity - t->history) / 4;
    if (target > limit)
        target = limit;
    uint32_t hwm;
    if (!shmobj__topic_hwm(t, &hwm))
        return SHMOBJ_ECORRUPT;
    for (uint32_t i = 0; i < hwm; i++) {
        struct shmobj__topic_subrec *r = &t->subs[i];
        if (atomic_load_explicit(&r->token, memory_order_acquire) == 0)
            continue;
        uint64_t held = atomic_load_explicit(&r->held, memory_order_seq_cst);
        if (held >= need)
            continue;
        uint64_t n = atomic_load_explicit(&r->next, memory_order_seq_cst);
        if (n != held || n >= target)
            continue; /* it holds messages: they stay */
        if (!atomic_compare_exchange_strong_explicit(&r->next, &n, target,
                                                     memory_order_acq_rel,
                                                     memory_order_relaxed))
            continue; /* it took one meanwhile */
        SHMOBJ__STEP("topic.skip.moved");
        atomic_fetch_add_explicit(&r->missed, target - n, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->hdr->missed, target - n, memory_order_relaxed);
        uint64_t h = held;
        for (unsigned k = 0; k < 64 && h < target; k++)
            if (atomic_compare_exchange_weak_explicit(&r->held, &h, target,
                                                      memory_order_acq_rel,
                                                      memory_order_relaxed))
                break;
    }
    return 0;
}

/* Under the lock: make the slot of head free if the policy allows, judging
 * the subscribers that hold it up when `judge`. 0 with *room set. */
static int make_room(shmobj_topic *t, bool judge, bool *room)
{
    struct shmobj__topic_hdr *h = t->hdr;
    uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
    if (tail > head || head - tail > t->capacity)
        return SHMOBJ_ECORRUPT;
    *room = head - tail < t->capacity;
    if (*room)
        return 0;
    int rc = shmobj__topic_reclaim(t, true);
    if (rc == 0 && atomic_load_explicit(&h->tail, memory_order_relaxed) + t->capacity <= head &&
        t->policy == SHMOBJ_TOPIC_OVERWRITE) {
        rc = skip_slow(t, head);
        if (rc == 0)
            rc = shmobj__topic_reclaim(t, true);
    }
    if (rc == 0 && judge &&
        atomic_load_explicit(&h->tail, memory_order_relaxed) + t->capacity <= head) {
        /* the records holding it up may be of dead subscribers */
        rc = shmobj__topic_repair_locked(t, head - t->capacity + 1, NULL);
        if (rc == 0)
            rc = shmobj__topic_reclaim(t, true);
    }
    if (rc != 0)
        return rc;
    *room = atomic_load_explicit(&h->tail, memory_order_relaxed) + t->capacity > head;
    return 0;
}

/* ---- publish ------------------------------------------------------------- */

/* A wait slice of a blocked publisher: it looks at the segment's name and
 * the subscribers' liveness between slices. */
#define PUB_SLICE_NS (10 * 1000 * 1000ull)

static void wake_takers(shmobj_topic *t)
{
    struct shmobj__topic_hdr *h = t->hdr;
    atomic_thread_fence(memory_order_seq_cst);
    /* only the first publish after a taker went to sleep wakes (all) */
    if (atomic_load_explicit(&h->sub_waiters, memory_order_relaxed) != 0 &&
        atomic_load_explicit(&h->sleepy, memory_order_relaxed) != 0 &&
        atomic_exchange_explicit(&h->sleepy, 0, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(&h->pub_event, 1, memory_order_release);
        shmobj__os_futex_wake(&h->pub_event, INT32_MAX);
    }
    if (atomic_load_explicit(&h->armed, memory_order_relaxed) != 0)
        shmobj__topic_notify_fire(t);
}

/* Publish block ref of len bytes; loan: its record, or NULL. */
static int publish(shmobj_topic *t, shmobj__ref ref, uint64_t len,
                   struct shmobj__topic_loanrec *loan, int64_t timeout_ns,
                   uint64_t kind)
{
    struct shmobj__topic_hdr *h = t->hdr;
    uint64_t deadline = UINT64_MAX, judged = 0;
    bool waited = false;
    for (;;) {
        int rc = shmobj__topic_lock(t, 0);
        if (rc != 0)
            return rc;
        SHMOBJ__STEP("topic.publish.locked");
        uint64_t now = waited ? shmobj__os_now_ns() : 0;
        bool judge = waited && now - judged >= t->stall_ns;
        if (judge)
            judged = now;
        bool room;
        rc = make_room(t, judge, &room);
        if (rc == 0 && !room) {
            /* announce the wait, then look once more (see the top) */
            atomic_fetch_add_explicit(&h->pub_waiters, 1, memory_order_seq_cst);
            atomic_thread_fence(memory_order_seq_cst);
            uint32_t ev = atomic_load_explicit(&h->rel_event, memory_order_seq_cst);
            rc = make_room(t, false, &room);
            if (rc != 0 || room)
                atomic_fetch_sub_explicit(&h->pub_waiters, 1, memory_order_relaxed);
            if (rc == 0 && !room) {
                shmobj__topic_unlock(t);
                if (!waited) {
                    waited = true;
                    judged = shmobj__os_now_ns();
                    deadline = shmobj__os_deadline(timeout_ns);
                }
                int wrc = 0;
                if (timeout_ns == 0)
                    wrc = SHMOBJ_EFULL;
                else if (shmobj__os_now_ns() >= deadline)
                    wrc = SHMOBJ_ETIMEDOUT;
                else if (!t->sp->ops->live->linked(t->sp))
                    wrc = SHMOBJ_EREPLACED;
                else {
                    uint64_t until = shmobj__os_now_ns() + PUB_SLICE_NS;
                    if (until > deadline)
                        until = deadline;
                    (void)shmobj__os_futex_wait(&h->rel_event, ev, until);
                }
                atomic_fetch_sub_explicit(&h->pub_waiters, 1, memory_order_relaxed);
                if (wrc != 0)
                    return wrc;
                if (shmobj__topic_usable(t) != 0)
                    return SHMOBJ_ESTALE;
                continue;
            }
        }
        if (rc != 0) {
            shmobj__topic_unlock(t);
            return rc;
        }
        uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
        struct shmobj__topic_slot *sl = &t->slots[head & (t->capacity - 1)];
        atomic_store_explicit(&sl->ref, ref, memory_order_relaxed);
        atomic_store_explicit(&sl->len, len, memory_order_relaxed);
        atomic_store_explicit(&sl->kind, kind, memory_order_relaxed);
        atomic_store_explicit(&sl->seq, head + 1, memory_order_release);
        SHMOBJ__STEP("topic.publish.slot");
        atomic_store_explicit(&h->head, head + 1, memory_order_release);
        SHMOBJ__STEP("topic.publish.head");
        if (loan != NULL) {
            atomic_store_explicit(&loan->ref, 0, memory_order_relaxed);
            atomic_store_explicit(&loan->token, 0, memory_order_release);
        }
        shmobj__topic_unlock(t);
        wake_takers(t);
        return 0;
    }
}

int shmobj_topic_loan_publish(shmobj_topic *t, shmobj_topic_loan *loan,
                              uint64_t len, int64_t timeout_ns)
{
    if (t != NULL && t->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (t == NULL || loan == NULL || len == 0 || len > loan->size)
        return SHMOBJ_EINVAL;
    if (shmobj__topic_usable(t) != 0)
        return SHMOBJ_ESTALE;
    struct shmobj__topic_loanrec *l = loan_of(t, loan);
    if (l == NULL)
        return SHMOBJ_EINVAL;
    int rc = publish(t, loan->ref, len, l, timeout_ns, TOPIC_KIND_LOAN);
    if (rc == 0) {
        loan->ref = 0;
        loan->data = NULL;
    }
    return rc;
}

int shmobj_topic_publish(shmobj_topic *t, const void *data, uint64_t len,
                         int64_t timeout_ns)
{
    if (t != NULL && t->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (t == NULL || (data == NULL && len != 0) || len == 0)
        return SHMOBJ_EINVAL;
    shmobj_topic_loan loan;
    int rc = shmobj_topic_loan_get(t, len, &loan);
    if (rc != 0)
        return rc;
    memcpy(loan.data, data, len);
    rc = shmobj_topic_loan_publish(t, &loan, len, timeout_ns);
    if (rc != 0)
        (void)shmobj_topic_loan_cancel(t, &loan);
    return rc;
}

int shmobj_topic_publish_ref(shmobj_topic *t, shmobj_ref ref, uint64_t len,
                             int64_t timeout_ns)
{
    if (t != NULL && t->sp->readonly)
        return SHMOBJ_ERDONLY;
    if (t == NULL || ref == 0 || len == 0)
        return SHMOBJ_EINVAL;
    if (shmobj__topic_usable(t) != 0)
        return SHMOBJ_ESTALE;
    uint64_t usable = 0;
    int rc = t->sp->ops->check(t->sp, ref, &usable);
    if (rc != 0)
        return rc == SHMOBJ_ESTALE ? rc : SHMOBJ_ECORRUPT;
    if (len > usable)
        return SHMOBJ_EINVAL;
    return publish(t, ref, len, NULL, timeout_ns, TOPIC_KIND_BLOCK);
}
